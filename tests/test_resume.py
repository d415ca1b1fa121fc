"""Resume functions (csrc/resume.c): a copy of the original code behind a prologue that
restores the stack and jumps to the resume point. Each test builds a function from the
resume code with the original's globals and closure and checks that it computes what the
rest of the original computes from that point."""
import sys
import types

import pytest

from cdynamo import _C



# ---------------------------------------------------------------- helpers


def decode(code):
    """[(opname, oparg, target, offset, lineno)] of the decoded instruction list."""
    return _C._bytecode_decode(code)


def slot_name(code, oparg):
    return code._varname_from_oparg(oparg)


def index_of(code, opname, name=None, nth=0, after=False):
    """Index of the nth instruction `opname` (on local `name` when given); +1 if after."""
    hits = []
    for i, (op, arg, _t, _o, _l) in enumerate(decode(code)):
        if op != opname:
            continue
        if name is not None:
            if op in ("LOAD_GLOBAL",):
                if code.co_names[arg >> 1] != name:
                    continue
            elif slot_name(code, arg) != name:
                continue
        hits.append(i)
    return hits[nth] + (1 if after else 0)


def resume_fn(fn, target, null_mask, live):
    """The resume function, called as r(*stack_values, *live_values) (the resume code takes
    the live locals first: r.__code__ is the code itself)."""
    code = _C._resume_code(fn.__code__, target, tuple(null_mask), tuple(live))
    f = types.FunctionType(code, fn.__globals__, "resumed", None, fn.__closure__)
    nstack = sum(1 for m in null_mask if not m)

    class Resumed:
        __code__ = code   # the tests inspect r.__code__

        def __call__(self, *args):
            return f(*args[nstack:], *args[:nstack])
    return Resumed()


def helper(v):
    return v * 100


# ---------------------------------------------------------------- straight line, branches


def straight(a, b):
    x = a + 1
    y = x * 2
    return y + b


def test_straight_line_after_store():
    t = index_of(straight.__code__, "STORE_FAST", "x", after=True)
    r = resume_fn(straight, t, (), ("x", "b"))
    assert r(5, 7) == 5 * 2 + 7
    assert r(5, 7) == straight(4, 7)
    co = r.__code__
    assert co.co_argcount == 2
    assert co.co_varnames[:2] == ("x", "b")
    assert set(co.co_varnames) == set(straight.__code__.co_varnames)
    assert co.co_name == "straight"
    assert co.co_qualname == "<resume in straight>"
    assert co.co_firstlineno == straight.__code__.co_firstlineno
    assert co.co_posonlyargcount == 0 and co.co_kwonlyargcount == 0


def test_prologue_layout_and_positions():
    orig = straight.__code__
    t = index_of(orig, "STORE_FAST", "x", after=True)
    co = _C._resume_code(orig, t, (False, True), ("b",))
    ins = decode(co)
    got, plen = _C._resume_origin(co)
    assert got is orig
    ops = [i[0] for i in ins[:plen]]
    assert ops == ["RESUME", "LOAD_FAST", "PUSH_NULL", "JUMP_FORWARD"]
    assert ins[plen - 1][2] == plen + t
    assert co.co_varnames[:2] == ("b", "___stack0")
    # the prologue takes the target's line; the copy keeps every position
    tline = decode(orig)[t][4]
    assert all(i[4] == tline for i in ins[:plen])
    orig_ins = decode(orig)
    assert [(i[0], i[4]) for i in ins[plen:]] == [(i[0], i[4]) for i in orig_ins]
    assert _C._resume_origin(orig) is None


def branches(a, b):
    if a > 0:
        r = a * 10
    else:
        r = b - 1
    return r + 1


def test_resume_at_both_sides_of_a_branch():
    code = branches.__code__
    ins = decode(code)
    j = next(i for i, x in enumerate(ins) if x[0].startswith("POP_JUMP"))
    else_t = ins[j][2]
    then_t = j + 1
    r_else = resume_fn(branches, else_t, (), ("b",))
    r_then = resume_fn(branches, then_t, (), ("a",))
    assert r_else(5) == 5
    assert r_then(5) == 51
    assert r_else(-3) == branches(-1, -3)
    assert r_then(2) == branches(2, 99)


def test_resume_at_the_jump_with_condition_on_stack():
    code = branches.__code__
    j = next(i for i, x in enumerate(decode(code)) if x[0].startswith("POP_JUMP"))
    r = resume_fn(branches, j, (False,), ("a", "b"))
    assert r(True, 3, 4) == 31
    assert r(False, 3, 4) == 4


# ---------------------------------------------------------------- values on the stack


def call_in_expr(a, b):
    return a + helper(b)


def test_stack_after_call():
    code = call_in_expr.__code__
    t = index_of(code, "CALL", after=True)        # BINARY_OP with [a, result] on the stack
    assert decode(code)[t][0] == "BINARY_OP"
    r = resume_fn(call_in_expr, t, (False, False), ())
    assert r.__code__.co_argcount == 2
    assert r(1, 2) == 3
    assert r(3, helper(4)) == call_in_expr(3, 4)


def test_stack_with_call_protocol_null():
    code = call_in_expr.__code__
    # [a, NULL, helper] on the stack ([a, helper, NULL] since 3.13: the NULL after the callable)
    t = index_of(code, "LOAD_GLOBAL", "helper", after=True)
    mask = (False, True, False) if sys.version_info < (3, 13) else (False, False, True)
    r = resume_fn(call_in_expr, t, mask, ("b",))
    assert r.__code__.co_argcount == 3
    assert r.__code__.co_varnames[:3] == ("b", "___stack0", "___stack1")
    assert r(1, helper, 2) == call_in_expr(1, 2)
    assert r(1, lambda v: -v, 2) == -1      # the callable comes from the stack slot


class Box:
    def __init__(self, k):
        self.k = k

    def scaled(self, v):
        return self.k * v


def method_call(box, v):
    return box.scaled(v) + 1


def test_stack_with_method_layout():
    code = method_call.__code__
    t = index_of(code, "LOAD_METHOD", after=True)   # [method, self] on the stack
    r = resume_fn(method_call, t, (False, False), ("v",))
    b = Box(3)
    assert r(Box.scaled, b, 5) == method_call(b, 5)
    # the [NULL, attr] form of LOAD_METHOD ([attr, NULL] since 3.13)
    r2 = resume_fn(method_call, t, (True, False) if sys.version_info < (3, 13) else (False, True),
                   ("v",))
    assert r2(lambda v: v - 1, 5) == 5


# ---------------------------------------------------------------- cells and free variables


def cell_after(a):
    k = a + 1
    g = a * 3

    def inner():
        return k * 2

    return inner() + g


def test_live_cell_becomes_argument_cell():
    code = cell_after.__code__
    assert "k" in code.co_cellvars and "k" not in code.co_varnames
    t = index_of(code, "STORE_DEREF", "k", after=True)
    r = resume_fn(cell_after, t, (), ("k", "a"))
    assert r(5, 2) == 5 * 2 + 6
    assert r(5, 2) == cell_after(4) - 12 + 6
    assert r.__code__.co_argcount == 2
    assert "k" in r.__code__.co_cellvars


def test_cell_not_live_is_made_fresh():
    code = cell_after.__code__
    t = index_of(code, "LOAD_FAST", "a")       # before k is stored
    r = resume_fn(cell_after, t, (), ("a",))
    assert r(4) == cell_after(4)


def arg_cell(a, b):
    c = b + 1

    def inner():
        return a + c

    return inner()


def test_argument_cell():
    code = arg_cell.__code__
    assert "a" in code.co_cellvars and "a" in code.co_varnames
    t = index_of(code, "STORE_DEREF", "c", after=True)
    r = resume_fn(arg_cell, t, (), ("a", "c"))
    assert r(10, 5) == 15
    # a live local c and a non-live argument cell b
    r2 = resume_fn(arg_cell, t, (), ("c", "a"))
    assert r2(5, 10) == 15


def make_closure(base):
    scale = base * 2

    def f(x):
        y = x + scale
        z = y + base
        return z

    return f


def test_free_variables_from_closure():
    f = make_closure(10)
    code = f.__code__
    assert code.co_freevars
    t = index_of(code, "STORE_FAST", "y", after=True)
    r = resume_fn(f, t, (), ("y",))
    assert r(1) == 11
    with pytest.raises(ValueError, match="free variable"):
        _C._resume_code(code, t, (), ("base",))


# ---------------------------------------------------------------- loops


def loop(xs):
    total = 0
    for v in xs:
        total += v * 2
    return total


def test_resume_at_for_iter_with_iterator_on_stack():
    code = loop.__code__
    t = index_of(code, "FOR_ITER")
    r = resume_fn(loop, t, (False,), ("total",))
    assert r(iter([1, 2, 3]), 100) == 112
    it = iter([1, 2, 3, 4])
    next(it)
    assert r(it, 2) == loop([1, 2, 3, 4])


def test_resume_inside_loop_body():
    code = loop.__code__
    t = index_of(code, "STORE_FAST", "v", after=True)
    r = resume_fn(loop, t, (False,), ("total", "v"))
    it = iter([5, 6])
    assert r(it, 1, 10) == 1 + 20 + 10 + 12


def gen(n):
    acc = 0
    for i in range(n):
        acc += i
        yield acc


def test_generator_resume():
    code = gen.__code__
    t = index_of(code, "FOR_ITER")
    r = resume_fn(gen, t, (False,), ("acc",))
    g = r(iter(range(3, 5)), 100)
    assert isinstance(g, types.GeneratorType)
    assert list(g) == [103, 107]


# ---------------------------------------------------------------- exception table


def with_try(a):
    y = 0
    try:
        y = a + 1
        if y > 0:
            raise ValueError(y)
        y = -y
    except ValueError as e:
        return ("caught", e.args[0])
    return ("fell", y)


def test_exception_handler_still_catches():
    code = with_try.__code__
    t = index_of(code, "STORE_FAST", "y", nth=1, after=True)
    r = resume_fn(with_try, t, (), ("y",))
    assert r(5) == ("caught", 5)
    assert r(-5) == ("fell", 5)
    assert r(6) == with_try(5)


def uncaught(a):
    y = a * 2
    z = y + 1
    raise KeyError(z)


def test_traceback_lines_are_the_originals():
    code = uncaught.__code__
    t = index_of(code, "STORE_FAST", "y", after=True)
    r = resume_fn(uncaught, t, (), ("y",))
    with pytest.raises(KeyError) as info:
        r(3)
    assert info.value.args == (4,)
    tb = info.tb
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_lineno == code.co_firstlineno + 3


def with_block(cm, v):
    with cm:
        w = v + 1
        raise RuntimeError(w)
    return w


class Catch:
    def __init__(self):
        self.exited = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.exited = exc[0]
        return True


def test_resume_inside_with_block():
    code = with_block.__code__
    t = index_of(code, "STORE_FAST", "w", after=True)
    # inside the with block the stack holds the bound __exit__
    cm = Catch()
    r = resume_fn(with_block, t, (False,), ("w",))
    assert r(cm.__exit__, 7) == 7
    assert cm.exited is RuntimeError


def varargs(*args, **kw):
    n = len(args)
    return n + len(kw)


def test_varargs_code_becomes_plain_positional():
    code = varargs.__code__
    t = index_of(code, "STORE_FAST", "n", after=True)
    r = resume_fn(varargs, t, (), ("n", "kw"))
    assert r.__code__.co_flags & (0x04 | 0x08) == 0
    assert r(3, {"a": 1}) == 4


# ---------------------------------------------------------------- caching, nesting


def test_cache_hits_and_reset():
    code = straight.__code__
    t = index_of(code, "STORE_FAST", "x", after=True)
    a = _C._resume_code(code, t, (), ("x", "b"))
    assert _C._resume_code(code, t, (), ("x", "b")) is a
    assert _C._resume_code(code, t, (), ("b", "x")) is not a
    assert _C._resume_code(code, t, (False,), ("x", "b")) is not a
    assert _C._resume_code(code, t, (True,), ("x", "b")) is not \
        _C._resume_code(code, t, (False,), ("x", "b"))
    _C._resume_reset()
    b = _C._resume_code(code, t, (), ("x", "b"))
    assert b is not a
    assert _C._resume_origin(a) == (code, 1 + 1)     # RESUME, JUMP_FORWARD
    assert _C._resume_code(a, t + 2, (), ("x", "b")) is b


def test_resume_of_resume_maps_to_the_original():
    code = straight.__code__
    t1 = index_of(code, "STORE_FAST", "x", after=True)
    t2 = index_of(code, "STORE_FAST", "y", after=True)
    r1 = _C._resume_code(code, t1, (False,), ("b",))
    _, plen = _C._resume_origin(r1)
    direct = _C._resume_code(code, t2, (), ("y", "b"))
    nested = _C._resume_code(r1, t2 + plen, (), ("y", "b"))
    assert nested is direct
    assert _C._resume_origin(nested) == (code, 1 + 1)
    f = types.FunctionType(nested, straight.__globals__)
    assert f(10, 1) == 11
    assert len(decode(nested)) == len(decode(code)) + 2


def test_resume_of_resume_with_cells():
    code = cell_after.__code__
    t1 = index_of(code, "LOAD_FAST", "a")
    t2 = index_of(code, "STORE_DEREF", "k", after=True)
    r1 = _C._resume_code(code, t1, (), ("a",))
    _, plen = _C._resume_origin(r1)
    nested = _C._resume_code(r1, t2 + plen, (), ("k", "a"))
    assert nested is _C._resume_code(code, t2, (), ("k", "a"))
    f = types.FunctionType(nested, cell_after.__globals__)
    assert f(5, 2) == 16


# ---------------------------------------------------------------- errors


def test_errors():
    code = straight.__code__
    n = len(decode(code))
    with pytest.raises(ValueError):
        _C._resume_code(code, n, (), ())
    with pytest.raises(ValueError):
        _C._resume_code(code, -1, (), ())
    with pytest.raises(ValueError, match="not a local"):
        _C._resume_code(code, 1, (), ("nope",))
    with pytest.raises(ValueError, match="twice"):
        _C._resume_code(code, 1, (), ("a", "a"))
    with pytest.raises(TypeError):
        _C._resume_code(code, 1, (), ["a"])
    with pytest.raises(TypeError):
        _C._resume_code(code, 1, (), (1,))
    with pytest.raises(TypeError):
        _C._resume_code(straight, 1, (), ())
    # a stack layout that does not match the code underflows or disagrees at a join
    ret = index_of(code, "RETURN_VALUE")
    with pytest.raises(ValueError):
        _C._resume_code(code, ret, (), ())
    # the cell prefix: target before RESUME is refused
    cco = cell_after.__code__
    with pytest.raises(ValueError):
        _C._resume_code(cco, 0, (), ())
    # a resume code's prologue is not a valid target
    r1 = _C._resume_code(code, 1, (), ("a", "b"))
    with pytest.raises(ValueError):
        _C._resume_code(r1, 0, (), ())


def kw_call(a, b):
    return a + helper(v=b)


def test_keyword_call():
    code = kw_call.__code__
    t = index_of(code, "CALL", after=True)
    r = resume_fn(kw_call, t, (False, False), ())
    assert r(1, 200) == 201
    t = index_of(code, "KW_NAMES")
    # [a, NULL, helper, b] ([a, helper, NULL, b] since 3.13)
    mask = (False, True, False, False) if sys.version_info < (3, 13) else (False, False, True, False)
    r = resume_fn(kw_call, t, mask, ())
    assert r(1, helper, 2) == kw_call(1, 2)
    with pytest.raises(ValueError, match="KW_NAMES"):
        _C._resume_code(code, t + 1, mask, ())
