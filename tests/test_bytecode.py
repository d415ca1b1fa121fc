"""Tests of the C bytecode layer (bytecode.c, bytecode_py.c): decode, assemble, stack depth.

(a) round trip over every code object of many imported standard-library and torch modules:
    co_code, co_exceptiontable, co_stacksize and co_linetable identical, co_positions() equal;
(b) functions rebuilt from round-tripped code behave like the originals;
(c) edited instruction lists (NOPs inserted so that jumps grow) still run correctly.
"""
import asyncio
import contextlib
import importlib
import importlib.machinery
import sys
import sysconfig
import types

import pytest

from cdynamo import _C

# ---------------------------------------------------------------------------- corpus

STDLIB_MODULES = [
    "abc", "argparse", "ast", "asyncio", "base64", "bisect", "calendar", "collections",
    "concurrent.futures", "configparser", "contextlib", "copy", "csv", "dataclasses",
    "datetime", "decimal", "difflib", "dis", "email.message", "email.parser", "enum",
    "fractions", "functools", "gettext", "glob", "gzip", "heapq", "hmac", "html.parser",
    "http.client", "http.server", "inspect", "ipaddress", "json", "logging",
    "logging.handlers", "lzma", "mailbox", "multiprocessing", "numbers", "operator",
    "optparse", "os", "pathlib", "pdb", "pickle", "pickletools", "pkgutil", "platform",
    "plistlib", "pprint", "pydoc", "queue", "random", "re", "shlex", "shutil", "smtplib",
    "socket", "socketserver", "statistics", "string", "subprocess", "tarfile", "tempfile",
    "textwrap", "threading", "tokenize", "traceback", "typing", "unittest", "unittest.mock",
    "urllib.parse", "urllib.request", "uuid", "warnings", "weakref", "xml.dom.minidom",
    "xml.etree.ElementTree", "zipfile", "zoneinfo",
]
TORCH_MODULES = ["torch", "torch.nn", "torch.fx", "torch._dynamo", "torch.optim",
                 "torch.utils.data"]
MIN_CODE_OBJECTS = 5000


def _walk(code, out, seen):
    """Collect code and every code object nested in its co_consts (depth first)."""
    if id(code) in seen:
        return
    seen.add(id(code))
    out.append(code)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _walk(c, out, seen)


def _collect_corpus():
    """Every code object of the listed modules and of the modules they import from the
    standard library and torch. Returns (codes, report dict)."""
    report = {"import_failed": [], "modules": 0, "frozen": 0, "not_python_source": 0}
    for name in STDLIB_MODULES + TORCH_MODULES:
        try:
            importlib.import_module(name)
        except Exception as e:  # counted and reported, never silently dropped
            report["import_failed"].append(f"{name}: {type(e).__name__}: {e}")
    stdlib = sysconfig.get_paths()["stdlib"]
    codes, seen, done = [], set(), set()
    for name, mod in sorted(sys.modules.items()):
        spec = getattr(mod, "__spec__", None)
        if spec is None:                        # torch._C's submodules: no bytecode
            report["not_python_source"] += name.startswith("torch.")
            continue
        if spec.name in done:                   # aliases such as os.path -> posixpath
            continue
        done.add(spec.name)
        origin = getattr(spec, "origin", None) or ""
        loader = getattr(spec, "loader", None)
        if loader is importlib.machinery.FrozenImporter and origin == "frozen":
            code = loader.get_code(spec.name)  # os, abc, codecs, ... (frozen stdlib)
            report["frozen"] += 1
        elif not (origin.startswith(stdlib) or name == "torch" or name.startswith("torch.")):
            continue
        elif isinstance(loader, importlib.machinery.SourceFileLoader):
            code = loader.get_code(name)
        else:
            report["not_python_source"] += 1   # extension modules: no bytecode
            continue
        report["modules"] += 1
        _walk(code, codes, seen)
    return codes, report


@pytest.fixture(scope="module")
def corpus():
    return _collect_corpus()


def test_roundtrip_corpus(corpus):
    codes, report = corpus
    failures = []
    linetable_identical = 0
    for code in codes:
        try:
            new = _C._bytecode_roundtrip(code)
        except Exception as e:
            failures.append(f"{code.co_filename}:{code.co_firstlineno} {code.co_qualname}: "
                            f"raised {type(e).__name__}: {e}")
            continue
        problems = [field for field in ("co_code", "co_exceptiontable", "co_stacksize")
                    if getattr(new, field) != getattr(code, field)]
        if list(new.co_positions()) != list(code.co_positions()):
            problems.append("co_positions")
        if new.co_linetable == code.co_linetable:
            linetable_identical += 1
        if new.co_varnames != code.co_varnames or new.co_cellvars != code.co_cellvars or \
                new.co_freevars != code.co_freevars or new.co_flags != code.co_flags:
            problems.append("names/flags")
        if problems:
            failures.append(f"{code.co_filename}:{code.co_firstlineno} {code.co_qualname}: "
                            f"{problems}")
    print(f"\nbytecode round trip: {len(codes)} code objects from {report['modules']} modules "
          f"({report['frozen']} frozen), "
          f"{len(failures)} failures, co_linetable byte-identical for {linetable_identical}; "
          f"{len(report['import_failed'])} imports failed {report['import_failed']}, "
          f"{report['not_python_source']} modules without Python source skipped")
    assert not report["import_failed"]
    assert len(codes) >= MIN_CODE_OBJECTS
    assert failures == [], "\n".join(failures[:20])


def _normal_form(instrs):
    """dis's instructions rewritten into the engine's normal form (bytecode.c): (opname, arg,
    instruction) triples, arg None where dis's is kept."""
    out = []
    i = 0
    v = sys.version_info[:2]
    while i < len(instrs):
        ins = instrs[i]
        name, arg = ins.opname, ins.arg or 0
        nxt = instrs[i + 1] if i + 1 < len(instrs) else None
        if name.startswith(("POP_JUMP_FORWARD_IF_", "POP_JUMP_BACKWARD_IF_")):
            name = "POP_JUMP_IF_" + name.split("_IF_", 1)[1]
        elif name == "LOAD_ATTR" and v >= (3, 12):
            name, arg = ("LOAD_METHOD" if arg & 1 else "LOAD_ATTR"), arg >> 1
        elif v >= (3, 13) and name == "LOAD_CONST" and nxt is not None and nxt.opname == "CALL_KW":
            name = "KW_NAMES"
        elif v >= (3, 13) and name == "CALL_KW" and out and out[-1][0] == "KW_NAMES":
            name = "CALL"
        elif v >= (3, 13) and name == "MAKE_FUNCTION":
            while nxt is not None and nxt.opname == "SET_FUNCTION_ATTRIBUTE":
                arg |= nxt.arg
                i += 1
                nxt = instrs[i + 1] if i + 1 < len(instrs) else None
        elif v >= (3, 13) and name in ("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST",
                                       "STORE_FAST_STORE_FAST"):
            first, second = name.split("_FAST_", 1)[0] + "_FAST", name.rsplit("_FAST_", 1)[1]
            second = second if second.endswith("_FAST") else second + "_FAST"
            out.append((first, arg >> 4, ins))
            name, arg = second, arg & 15
        out.append((name, arg, ins))
        i += 1
    return out


def test_decode_matches_dis(corpus):
    """Instruction list, opargs, offsets, targets and line numbers agree with dis, read in
    the engine's normal form."""
    import dis
    codes, _ = corpus
    for code in codes[:3000]:
        ours = _C._bytecode_decode(code)
        norm = _normal_form([i for i in dis.get_instructions(code) if i.opname != "EXTENDED_ARG"])
        theirs = [ins for (_, _, ins) in norm]
        # dis shows EXTENDED_ARG separately but also folds it into the next argument.
        assert len(ours) == len(theirs), code
        index_of = {}
        for n, (_, _, _, off, _) in enumerate(ours):
            index_of.setdefault(off, n)    # a fused pair's halves share an offset (3.13)
        positions = list(code.co_positions())
        for (name, arg, target, off, line), (nname, narg, ins) in zip(ours, norm):
            assert name == nname and off * 2 == ins.offset, (code, ins)
            assert arg == narg, (code, ins)
            assert line == positions[off][0], (code, ins)
            if ins.opcode in dis.hasjrel:
                # dis's argval is the byte offset of the target (after EXTENDED_ARGs there).
                tgt_units = ins.argval // 2
                while tgt_units not in index_of:  # target is an EXTENDED_ARG prefix
                    tgt_units += 1
                assert target == index_of[tgt_units], (code, ins)
            else:
                assert target == -1


def test_stackdepth_matches(corpus):
    codes, _ = corpus
    bad = [c for c in codes[:5000] if _C._stackdepth(c) != c.co_stacksize]
    assert bad == []


# ---------------------------------------------------------------------------- behaviour

def deep(transform, code):
    """Apply transform to code and, first, to every code object nested in it."""
    consts = tuple(deep(transform, c) if isinstance(c, types.CodeType) else c
                   for c in code.co_consts)
    return transform(code.replace(co_consts=consts))


def rebuild(fn, transform=_C._bytecode_roundtrip):
    new = deep(transform, fn.__code__)
    g = types.FunctionType(new, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    g.__kwdefaults__ = fn.__kwdefaults__
    return g


def f_loops(n):
    out = []
    for i in range(n):
        if i % 3 == 0:
            continue
        j = 0
        while j < i:
            j += 2
            if j > 7:
                break
        else:
            out.append(-j)
        out.append(i * j)
    return out


def f_try(x):
    log = []
    try:
        try:
            log.append(10 // x)
        except ZeroDivisionError as e:
            log.append(type(e).__name__)
            raise ValueError("inner") from e
        else:
            log.append("else")
        finally:
            log.append("finally")
    except ValueError as e:
        log.append(str(e))
    try:
        return log
    finally:
        log.append("return-finally")


def f_with(n):
    events = []

    @contextlib.contextmanager
    def cm(tag):
        events.append(("enter", tag))
        try:
            yield tag
        finally:
            events.append(("exit", tag))

    with cm("a") as a, cm("b") as b:
        events.append(a + b)
    with contextlib.suppress(KeyError):
        with cm("c"):
            {}[n]
    return events


def f_closure(a, b=3, *args, k=4, **kw):
    def inner(z):
        nonlocal b
        b += z
        return a + b + k + len(args) + len(kw)

    def counter():
        count = 0

        def inc():
            nonlocal count
            count += 1
            return count
        return inc
    c = counter()
    c()
    return inner(1), inner(2), c(), sorted(kw.items())


def f_comprehensions(n):
    squares = [i * i for i in range(n) if i % 2]
    table = {i: [j for j in range(i)] for i in range(n)}
    uniq = {x % 4 for x in squares}
    total = sum(x for row in table.values() for x in row)
    return squares, table, uniq, total, list(zip(*[(i, -i) for i in range(3)]))


def f_generators(n):
    def gen(k):
        for i in range(k):
            got = yield i
            if got:
                yield got * 10

    def delegate(k):
        r = yield from gen(k)
        yield "done"
        return r

    g = delegate(n)
    vals = [next(g), g.send(5), next(g), next(g)]
    g.close()

    def thrower():
        try:
            yield 1
        except KeyError:
            yield "caught"

    t = thrower()
    vals.append(next(t))
    vals.append(t.throw(KeyError))
    return vals + list(gen(3))


async def _agen(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i


async def f_async(n):
    out = [x async for x in _agen(n)]
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(asyncio.sleep, 0)
        out.append(await asyncio.sleep(0, result="slept"))
    return out


def f_match(v):
    match v:
        case {"k": [1, *rest]}:
            return ("dict", rest)
        case (a, b) if a > b:
            return ("pair", a - b)
        case str() as s:
            return ("str", s.upper())
        case _:
            return None


def f_except_star():
    seen = []
    try:
        raise ExceptionGroup("g", [KeyError(1), ValueError(2)])
    except* KeyError as e:
        seen.append(len(e.exceptions))
    except* ValueError as e:
        seen.append(repr(e.exceptions[0]))
    return seen


def _make_big():
    """A function with 320 locals (EXTENDED_ARG on LOAD_FAST/STORE_FAST) and jumps over
    long stretches of code (EXTENDED_ARG on jumps, forward and backward)."""
    n = 320
    lines = ["def big(x):"]
    lines += [f"    v{i} = x + {i}" for i in range(n)]
    lines.append("    acc = 0")
    lines.append("    for it in range(3):")
    lines.append("        if x > it:")
    lines += [f"            acc += v{i} * it" for i in range(0, n, 2)]
    lines.append("        else:")
    lines += [f"            acc -= v{i}" for i in range(1, n, 3)]
    lines.append("        try:")
    lines += [f"            acc ^= v{i}" for i in range(0, n, 5)]
    lines.append("            acc //= (x - it)")
    lines.append("        except ZeroDivisionError:")
    lines.append("            acc += 1")
    lines.append(f"    return acc, v{n - 1}")
    ns = {}
    exec(compile("\n".join(lines), "<big>", "exec"), ns)
    return ns["big"]


f_big = _make_big()

CASES = [
    (f_loops, (12,)),
    (f_try, (0,)),
    (f_try, (5,)),
    (f_with, (1,)),
    (f_closure, (1,)),
    (f_closure, (1, 2, 3, 4)),
    (f_comprehensions, (7,)),
    (f_generators, (4,)),
    (f_match, ({"k": [1, 2, 3]},)),
    (f_match, ((5, 2),)),
    (f_match, ("abc",)),
    (f_match, (1.5,)),
    (f_except_star, ()),
    (f_big, (1,)),
    (f_big, (5,)),
]


@pytest.mark.parametrize("fn,args", CASES, ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)])
def test_roundtrip_behaviour(fn, args):
    g = rebuild(fn)
    assert g.__code__ is not fn.__code__
    assert g.__code__.co_code == fn.__code__.co_code
    assert g(*args) == fn(*args)


def test_closure_with_kwargs():
    g = rebuild(f_closure)
    assert g(1, 2, 3, 4, k=9, extra=1) == f_closure(1, 2, 3, 4, k=9, extra=1)


def test_async_roundtrip():
    g = rebuild(f_async)
    assert asyncio.run(g(3)) == asyncio.run(f_async(3))


def test_big_function_uses_extended_arg():
    ops = [op for op, *_ in _C._bytecode_decode(f_big.__code__)]
    assert f_big.__code__.co_nlocals > 300
    import dis
    assert any(i.opname == "EXTENDED_ARG" for i in dis.get_instructions(f_big))
    assert "JUMP_BACKWARD" in ops


def test_exception_traceback_lines():
    g = rebuild(f_try)
    # the line table survives: a traceback from rebuilt code points at the same line
    def boom():
        return 1 / 0
    h = rebuild(boom)
    with pytest.raises(ZeroDivisionError) as e1:
        boom()
    with pytest.raises(ZeroDivisionError) as e2:
        h()
    assert e1.traceback[-1].lineno == e2.traceback[-1].lineno
    assert g(0) == f_try(0)


# ---------------------------------------------------------------------------- edited code

@pytest.mark.parametrize("n,stride", [(1, 0), (40, 0), (1, 1), (3, 2), (300, 0)])
@pytest.mark.parametrize("fn,args", CASES, ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)])
def test_inserted_nops_still_run(fn, args, n, stride):
    edit = lambda code: _C._bytecode_insert_nops(code, n, stride)  # noqa: E731
    g = rebuild(fn, edit)
    code = g.__code__
    assert len(code.co_code) > len(fn.__code__.co_code)
    assert code.co_stacksize == fn.__code__.co_stacksize
    assert g(*args) == fn(*args)
    # Re-decoded, the edited code is the original with NOPs added: same instructions in the
    # same order, and every jump lands on its original target after skipping NOPs.
    old = [ins for ins in _C._bytecode_decode(fn.__code__) if ins[0] != "NOP"]
    new = _C._bytecode_decode(code)
    kept = [k for k, ins in enumerate(new) if ins[0] != "NOP"]
    def shape(ins):  # a jump's oparg is a distance, which the NOPs change
        return (ins[0], ins[1] if ins[2] < 0 else None)
    assert [shape(new[k]) for k in kept] == [shape(ins) for ins in old]
    old_index = {k: j for j, k in enumerate(kept)}
    old_all = _C._bytecode_decode(fn.__code__)
    old_pos = [k for k, ins in enumerate(old_all) if ins[0] != "NOP"]
    for j, k in enumerate(kept):
        t = new[k][2]
        if t < 0:
            continue
        while new[t][0] == "NOP":
            t += 1
        ot = old_all[old_pos[j]][2]
        while old_all[ot][0] == "NOP":
            ot += 1
        assert old_pos[old_index[t]] == ot


def test_inserted_nops_grow_extended_args():
    """NOPs before every instruction push short jumps past 255 units: the assembler must
    add EXTENDED_ARG prefixes and move everything after them."""
    import dis
    before = sum(i.opname == "EXTENDED_ARG" for i in dis.get_instructions(f_loops))
    g = rebuild(f_loops, lambda c: _C._bytecode_insert_nops(c, 30, 1))
    after = sum(i.opname == "EXTENDED_ARG" for i in dis.get_instructions(g))
    assert after > before
    assert g(12) == f_loops(12)


def test_async_inserted_nops():
    g = rebuild(f_async, lambda c: _C._bytecode_insert_nops(c, 2, 1))
    assert asyncio.run(g(3)) == asyncio.run(f_async(3))


def test_errors():
    with pytest.raises(TypeError):
        _C._bytecode_roundtrip(42)
    with pytest.raises(TypeError):
        _C._bytecode_decode("x")
    with pytest.raises(ValueError):
        _C._bytecode_insert_nops(f_loops.__code__, -1)


# ---------------------------------------------------------------------------- analysis

def _index_of(code, opname, argval=None, nth=0):
    """Index in _C._bytecode_decode(code) of the nth instruction opname (argval, the name of
    a local, matches; RETURN_VALUE also finds 3.12's RETURN_CONST)."""
    names = ("RETURN_VALUE", "RETURN_CONST") if opname == "RETURN_VALUE" else (opname,)
    hits = [k for k, (name, arg, _, _, _) in enumerate(_C._bytecode_decode(code))
            if name in names and (argval is None or code._varname_from_oparg(arg) == argval)]
    return hits[nth]


def _live_names(code, index):
    names = code.co_varnames + code.co_cellvars + code.co_freevars
    return {names[s] for s in _C._live_locals(code, index)}


def test_live_locals_branches():
    def f(a, b, c):
        x = a + 1
        if b:
            y = x
        else:
            y = c
        return y
    co = f.__code__
    assert _live_names(co, _index_of(co, "LOAD_FAST", "b")) == {"b", "x", "c"}
    assert _live_names(co, _index_of(co, "LOAD_FAST", "a")) == {"a", "b", "c"}
    assert _live_names(co, _index_of(co, "RETURN_VALUE")) == set()


def test_live_locals_loop_and_backward_jump():
    def f(n):
        total = 0
        i = 0
        while i < n:
            total += i
            i += 1
        return total
    co = f.__code__
    body = _index_of(co, "LOAD_FAST", "total")
    assert _live_names(co, body) == {"total", "i", "n"}
    assert _C._has_backward_jump(co, 0) is True
    assert _C._has_backward_jump(co, body) is True
    assert _C._has_backward_jump(co, _index_of(co, "RETURN_VALUE", nth=-1)) is False

    def g(x):
        return x + 1
    assert _C._has_backward_jump(g.__code__, 0) is False


def test_live_locals_exception_handler():
    def f(a, b):
        r = 0
        try:
            r = a / b
        except ZeroDivisionError:
            return r
        return r
    co = f.__code__
    # r is overwritten on the normal path but read by the handler if a / b raises
    assert _live_names(co, _index_of(co, "LOAD_FAST", "a")) == {"a", "b", "r"}
    # after the handler has run there is nothing left to read but r
    assert _live_names(co, _index_of(co, "LOAD_FAST", "r")) == {"r"}


def test_live_locals_cells_and_delete():
    def f(a, b):
        def inner():
            return a
        del b
        return inner
    co = f.__code__
    assert "a" in co.co_cellvars
    # at the first instruction: MAKE_CELL reads a; del b needs b bound
    assert _live_names(co, 0) == {"a", "b"}
    assert _live_names(co, _index_of(co, "DELETE_FAST")) == {"b", "inner"}
    with pytest.raises(ValueError):
        _C._live_locals(co, 10_000)


def _reference_live(code, start):
    """Liveness by a different algorithm: for each slot, search the paths from start for a
    read that no write precedes (exception edges leave before the instruction's write)."""
    import dis
    dec = _C._bytecode_decode(code)
    unit_to_index = {}
    for k, (_, _, _, off, _) in enumerate(dec):
        unit_to_index.setdefault(off, k)
    handler = [None] * len(dec)
    for e in dis._parse_exception_table(code):
        target = e.target // 2
        while target not in unit_to_index:
            target += 1
        for k, (_, _, _, off, _) in enumerate(dec):
            if e.start <= off * 2 < e.end:
                handler[k] = unit_to_index[target]
    nslots = len(set(code.co_varnames + code.co_cellvars + code.co_freevars))
    reads = {"LOAD_FAST", "LOAD_CLOSURE", "LOAD_DEREF", "STORE_DEREF", "DELETE_DEREF",
             "LOAD_CLASSDEREF", "DELETE_FAST", "MAKE_CELL", "LOAD_FAST_CHECK",
             "LOAD_FAST_AND_CLEAR", "LOAD_FROM_DICT_OR_DEREF"}
    writes = {"STORE_FAST", "DELETE_FAST", "MAKE_CELL", "LOAD_FAST_AND_CLEAR"}
    terminators = {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD",
                   "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"}
    live = set()
    for slot in range(nslots):
        seen, stack = {start}, [start]
        while stack:
            k = stack.pop()
            name, arg, target, _, _ = dec[k]
            if name in reads and arg == slot:
                live.add(slot)
                break
            succ = [handler[k]] if handler[k] is not None else []
            written = (name in writes and arg == slot) or (
                name == "COPY_FREE_VARS" and slot >= nslots - arg)
            if not written:
                if target >= 0:
                    succ.append(target)
                if name not in terminators and k + 1 < len(dec):
                    succ.append(k + 1)
            for s in succ:
                if s not in seen:
                    seen.add(s)
                    stack.append(s)
    return live


def test_live_locals_matches_reference(corpus):
    codes, _ = corpus
    checked = 0
    for code in codes[::40]:
        n = len(_C._bytecode_decode(code))
        for start in sorted({0, n // 3, n // 2, n - 1}):
            assert set(_C._live_locals(code, start)) == _reference_live(code, start), \
                (code, start)
            checked += 1
    assert checked > 1000


# ---------------------------------------------------------------------------- assembler edits

def test_decode_full_assemble_roundtrip(corpus):
    codes, _ = corpus
    for code in codes[:500]:
        new = _C._bytecode_assemble(code, _C._bytecode_decode_full(code))
        assert (new.co_code, new.co_linetable, new.co_exceptiontable, new.co_stacksize) == \
            (code.co_code, code.co_linetable, code.co_exceptiontable, code.co_stacksize)


@pytest.mark.skipif(sys.version_info[:2] != (3, 11),
                    reason="3.11's layout; conditional jumps only go forward since 3.12")
def test_reordered_blocks_flip_jump_direction():
    import dis

    def f(x):
        if x:
            return 1
        return 2
    code = f.__code__
    ins = _C._bytecode_decode_full(code)
    names = [i[0] for i in ins]
    assert names == ["RESUME", "LOAD_FAST", "POP_JUMP_IF_FALSE", "LOAD_CONST",
                     "RETURN_VALUE", "LOAD_CONST", "RETURN_VALUE"]

    def with_target(i, t):
        return (i[0], i[1], t) + i[3:]
    resume, load, jump, c1, r1, c2, r2 = ins
    # RESUME; JUMP_FORWARD M; L: LOAD_CONST 2; RETURN; M: LOAD_FAST x; POP_JUMP -> L (back)
    jf = ("JUMP_FORWARD", 0, 4) + resume[3:]
    new = [resume, jf, c2, r2, load, with_target(jump, 2), c1, r1]
    g_code = _C._bytecode_assemble(code, new)
    got = [i.opname for i in dis.get_instructions(g_code)]
    assert got[1] == "JUMP_FORWARD" and got[5] == "POP_JUMP_BACKWARD_IF_FALSE"
    g = types.FunctionType(g_code, globals())
    assert (g(0), g(1)) == (2, 1)


def test_assemble_rejects_bad_lists():
    def f(x):
        for i in x:
            pass
    code = f.__code__
    ins = _C._bytecode_decode_full(code)
    k = [i[0] for i in ins].index("FOR_ITER")
    bad = list(ins)
    bad[k] = ("FOR_ITER", 0, 0) + ins[k][3:]          # FOR_ITER cannot jump backwards
    with pytest.raises(ValueError):
        _C._bytecode_assemble(code, bad)
    bad = list(ins)
    bad[k] = ("FOR_ITER", 0, 999) + ins[k][3:]        # target out of range
    with pytest.raises(ValueError):
        _C._bytecode_assemble(code, bad)
    pop = ("POP_TOP", 0, -1, -1, -1, -1, -1, -1, -1, 0, 0)
    # targets not moved: an underflow, or since 3.12 a FOR_ITER no longer at its END_FOR
    with pytest.raises(ValueError, match="underflow|END_FOR"):
        _C._bytecode_assemble(code, [ins[0], pop] + list(ins[1:]))
    with pytest.raises(ValueError):
        _C._bytecode_assemble(code, [("NOT_AN_OP", 0, -1, -1, -1, -1, -1, -1, -1, 0, 0)])
    with pytest.raises(ValueError):
        _C._bytecode_assemble(code, [])


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="3.11's layout of the function")
def test_stackdepth_rejects_disagreeing_join():
    def f(x):
        if x:
            return 1
        return 2
    code = f.__code__
    resume, load, jump, c1, r1, c2, r2 = _C._bytecode_decode_full(code)
    # drop the first RETURN_VALUE: the LOAD_CONST 1 path reaches LOAD_CONST 2 at depth 1,
    # the jump reaches it at depth 0
    with pytest.raises(ValueError, match="depths"):
        _C._bytecode_assemble(code, [resume, load, (jump[0], jump[1], 4) + jump[3:], c1, c2, r2])


def test_inserted_nops_corpus_structure(corpus):
    """One NOP before (almost) every instruction of every fifth corpus code object: the
    re-decoded result must be exactly the expected edited list (jump targets and handlers
    remapped, positions and handler entries kept), with the same stack depth. Short jumps
    become long ones, so EXTENDED_ARG prefixes appear and move everything after them."""
    import dis
    codes, _ = corpus
    checked = with_extended_jumps = 0
    for code in codes[::5]:
        old = _C._bytecode_decode_full(code)
        new_code = _C._bytecode_insert_nops(code, 1, 1)
        new = _C._bytecode_decode_full(new_code)
        assert new_code.co_stacksize == code.co_stacksize, code
        # expected: (instruction, is_inserted_nop) in order, and old index -> new index
        newidx, expected = [], []
        for k, ins in enumerate(old):
            pinned = (ins[0] == "RESUME" and ins[1] > 0) or ins[11] or ins[0] == "END_FOR" or \
                (sys.version_info >= (3, 13) and k > 0 and old[k - 1][0] == "END_FOR") or \
                (ins[0] == "CALL" and k > 0 and old[k - 1][0] in ("PRECALL", "KW_NAMES"))
            newidx.append(len(expected))
            if not pinned:
                expected.append((("NOP", 0, -1) + ins[3:], True))
            expected.append((ins, False))
        assert len(new) == len(expected), code
        for k, ((name, arg, target, *rest), inserted) in enumerate(expected):
            got = new[k]
            assert got[0] == name, (code, k)
            if target >= 0:
                assert got[2] == newidx[target], (code, k)   # distance changed, target kept
            else:
                assert got[1:3] == (arg, -1), (code, k)
            assert got[4:8] == tuple(rest[1:5]), (code, k)     # positions
            handler, depth, lasti = rest[5:8]
            assert got[8:11] == (newidx[handler] if handler >= 0 else -1, depth, lasti), (code, k)
        checked += 1
        ext = dis.opmap["EXTENDED_ARG"]
        with_extended_jumps += ext in new_code.co_code[::2] and ext not in code.co_code[::2]
    print(f"\ninserted NOPs: {checked} code objects rebuilt and re-decoded; "
          f"{with_extended_jumps} gained EXTENDED_ARG prefixes")
    assert checked > 1000 and with_extended_jumps > 0
