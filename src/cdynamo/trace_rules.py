"""What cdynamo never traces: one rule table, as torch._dynamo's trace_rules.

The table says, for Python code by where it is defined (a module and its submodules, found by
file path or, for generated code such as dataclass methods in ``"<string>"``, by the
``__name__`` of the globals it runs with) and for specific callables, which rule applies.

Rules (``RULES`` holds the same text):

``skip``
    Frames run unmodified: the frame hook never translates them (functions they call are
    still looked at one by one, so user code called from a skipped library is compiled).
    When traced code calls such a function it is an opaque call (a graph break), never
    inlined. PyTorch's internals, sympy, numpy, the standard library's machinery and
    cdynamo's own Python.
``inline``
    A pure helper: frames run unmodified like ``skip`` (never compiled on their own), but
    when traced user code calls the function the interpreter may inline its bytecode.
    ``torch.nn`` (module ``forward`` methods, ``torch.nn.functional``), pytree helpers.
``compile``
    Translated like user code even when a broader rule skips the module (the default for
    code no rule matches).
``graph``
    A call is recorded into the FX graph as a torch operation (``call_function``) instead of
    being inlined or run; frames run unmodified. ``torch.functional`` (einsum, split, ...).
``constant``
    A call is folded at trace time to the rule's value: ``torch.jit.is_scripting()`` is
    False, ``torch.compiler.is_compiling()`` is True. Per callable only.
``fold``
    A call whose arguments are all constants is made at trace time and its result, a
    constant, replaces it (torch.get_default_dtype(), torch.promote_types(a, b)), as
    torch._dynamo's constant-fold functions. The rule's value says what the result depends
    on: None, the arguments only (pure); ``"state"``, global state too, re-read on every
    call of the compiled code by a GLOBAL_STATE guard (fn(*args) == result; refused inside
    an autocast block the trace entered, where the state differs from the frame's entry);
    ``"module"``, pure, called with ``module=`` the calling traced function's ``__name__``
    (collections.namedtuple, which eager reads from its caller's frame). Lists and tuples of
    constants count as constants; a class result (a named tuple class) is a fixed object of
    the trace. Per callable only.
``polyfill``
    A call is replaced by the rule's value, a plain-Python version of the callable, which the
    interpreter inlines like user code. Per callable only.
``break``
    A call is opaque: the graph so far is compiled, the call runs eagerly, tracing resumes
    after it (``print``, ``Tensor.item``, ``torch._dynamo.graph_break``).

How the engine uses it: the frame hook (C) holds a snapshot of the code rules, pushed by
this module at import and again after every change (``set_module_rule``,
``set_callable_rule``, ``patch``), decides once per code object and caches the decision on
the code object; a frame whose code has any rule but ``compile`` runs unmodified (unless the
code was force-compiled: ``cdynamo.compile`` of one of torch's own nn.Modules compiles its
``forward``). No Python runs on the per-frame path. Per-callable rules
(``lookup_callable``) are for the interpreter at trace time.

Lookup order: ``lookup_callable(obj)``: the per-callable table (by identity, names resolved
from already-imported modules), then, for a Python function or method, the rule of its code;
C callables without an entry have no rule (the interpreter decides: builtins it models, torch
operations it records, anything else breaks). ``lookup_code(code, globals)``: ``<frozen NAME>``
files have module NAME's rule (``skip`` for the standard library); then the longest matching file prefix; for code whose file is not a path
(``"<string>"``), the longest matching module rule of ``globals["__name__"]``.
"""
from __future__ import annotations

import collections
import contextlib
import importlib.util
import os
import sys
import sysconfig
import types
from typing import Any, Callable, Iterator, NamedTuple

from . import _compat

SKIP = "skip"
INLINE = "inline"
COMPILE = "compile"
GRAPH = "graph"
CONSTANT = "constant"
FOLD = "fold"
POLYFILL = "polyfill"
BREAK = "break"

RULES: dict[str, str] = {
    SKIP: "frames run unmodified; a call from traced code is opaque (graph break)",
    INLINE: "frames run unmodified; a call from traced code may be inlined (pure helper)",
    COMPILE: "translated like user code even under a skipped module",
    GRAPH: "a call is recorded into the FX graph as a torch operation",
    CONSTANT: "a call is folded at trace time to the rule's value",
    FOLD: "a call on constants is made at trace time, its result a constant (guarded)",
    POLYFILL: "a call is replaced by the rule's value, a plain-Python version, inlined",
    BREAK: "a call is a graph break: run eagerly between two graphs",
}

# Rules that describe code by where it is defined; CONSTANT, FOLD and POLYFILL need a value
# and exist per callable only.
_CODE_RULES = (SKIP, INLINE, COMPILE, GRAPH, BREAK)

# Python code by module (dotted name: the module and its submodules; the longest key wins).
# A key ending in "*" matches any module name starting with the text before it (names of
# generated code, e.g. namedtuple methods run with __name__ "namedtuple_<typename>").
MODULE_RULES: dict[str, str] = {
    # PyTorch: its internals never run translated; user code they call still compiles.
    "torch": SKIP,
    "torch._dynamo": SKIP,
    "torch._inductor": SKIP,
    "torch._higher_order_ops": SKIP,
    # associative_scan's Python front end (movedim, flip, torch.vmap of combine_fn, the
    # recursive generic scan): inlined, as torch._dynamo does; its HOP is values/scan.c's.
    "torch._higher_order_ops.associative_scan": INLINE,
    # nested_compile_region's wrapper function: inlined; the invoke_subgraph_placeholder it
    # calls is a higher-order op of values/hop.c (a region, cdynamo/_regions.py).
    "torch._higher_order_ops.invoke_subgraph": INLINE,
    "torch.fx": SKIP,
    "torch.utils.checkpoint": SKIP,
    "torchgen": SKIP,
    "functorch": SKIP,
    "torch.functional": GRAPH,
    "torch.nn": INLINE,
    "torch._tensor": INLINE,
    "torch.distributions": INLINE,
    "torch.amp.autocast_mode": INLINE,
    "torch.autograd.function": INLINE,
    "torch.random": INLINE,
    "torch.testing": INLINE,
    "torch.utils._contextlib": INLINE,
    "torch.utils._pytree": INLINE,
    # optimizers and LR schedulers: step() traced op by op (foreach kernels), as torch._dynamo
    "torch.optim": COMPILE,
    # ... but not the LR schedulers (torch._dynamo's FORCE_SKIP_FILES): their step() is
    # Python arithmetic on an epoch counter, traced it only made a graph of symbolic-number
    # operations once the counter became dynamic (one more graph per training step)
    "torch.optim.lr_scheduler": SKIP,
    # gradient clipping's grouping of tensors by device and dtype (polyfilled C helper)
    "torch.utils._foreach_utils": INLINE,
    "torch.utils.hooks": INLINE,
    # torch's pure-Python OrderedSet (a MutableSet over a dict), traced as user code
    "torch.utils._ordered_set": INLINE,
    # cdynamo's own Python: API, glue, backends, this table.
    "cdynamo": SKIP,
    # ... but its polyfills, plain-Python builtins, are inlined where the engine calls them.
    "cdynamo.polyfills": INLINE,
    # ... and the plain-Python versions of torch.distributed's collectives (cdynamo/_distributed.py)
    "cdynamo._distributed": INLINE,
    # Libraries a model does not consist of (torch's own dependencies first).
    "sympy": SKIP,
    "mpmath": SKIP,
    "numpy": SKIP,
    "networkx": SKIP,
    "typing_extensions": SKIP,
    "typing_inspection": SKIP,
    "filelock": SKIP,
    "fsspec": SKIP,
    "jinja2": SKIP,
    "markupsafe": SKIP,
    "packaging": SKIP,
    "setuptools": SKIP,
    "pkg_resources": SKIP,
    "_distutils_hack": SKIP,
    "pytest": SKIP,
    "_pytest": SKIP,
    "pluggy": SKIP,
    "iniconfig": SKIP,
    "hypothesis": SKIP,
    "triton": SKIP,
    "tqdm": SKIP,
    "tabulate": SKIP,
    "regex": SKIP,
    "yaml": SKIP,
    "pydantic": SKIP,
    "pydantic_core": SKIP,
    "safetensors": SKIP,
    "tokenizers": SKIP,
    "huggingface_hub": SKIP,
    # Strict dataclasses (transformers' configs): their __setattr__ validators are inlined
    # when traced code sets a config attribute, as torch._dynamo inlines them.
    "huggingface_hub.dataclasses": INLINE,
    "scipy": SKIP,
    "pandas": SKIP,
    "sklearn": SKIP,
    "onnx": SKIP,
    "onnxruntime": SKIP,
    "onnxscript": SKIP,
    "optree": SKIP,
    "rich": SKIP,
    "pygments": SKIP,
    # Generated code of the standard library's machinery: a named tuple's __new__ (pure).
    "namedtuple_*": INLINE,
    # The standard library's pure-Python mixins that user classes inherit (Mapping.get,
    # Mapping.__contains__, ...), inlined as torch._dynamo traces them.
    "_collections_abc": INLINE,
    # contextlib.contextmanager: the decorated generator driven by _GeneratorContextManager's
    # own __enter__/__exit__, inlined (values/generator.c closes and throws into it).
    "contextlib": INLINE,
    # pathlib's PurePath/Path methods: inlined, as torch._dynamo inlines every
    # standard-library module but a few (abc, copy, importlib, random, re, linecache);
    # collections' pure-Python classes: per callable, below.
    "pathlib": INLINE,
    "posixpath": INLINE,   # os.path, which pathlib calls (join, splitroot)
    "genericpath": INLINE,
}

# The standard library (frames of its machinery never run translated): every module under
# the stdlib directories and every name in sys.stdlib_module_names (for generated code).
STDLIB_RULE = SKIP

# Per callable: qualified name (resolved from already-imported modules) -> rule, or
# (rule, value) for CONSTANT (the folded value), FOLD (None: pure; "state": guarded;
# "module": pure, called with module=<the caller's __name__>) and
# POLYFILL (the replacement callable or its qualified name).
CALLABLE_RULES: dict[str, str | tuple[str, Any]] = {
    "torch.jit.is_scripting": (CONSTANT, False),
    "torch.jit.is_tracing": (CONSTANT, False),
    # nn.Module._call_impl's JIT-trace checks, which differ between torch releases
    **{name: (CONSTANT, answer) for name, answer in _compat.JIT_TRACE_QUERIES.items()},
    "torch.onnx.is_in_onnx_export": (CONSTANT, False),
    "torch.fx._symbolic_trace.is_fx_tracing": (CONSTANT, False),
    "torch.fx._symbolic_trace.is_fx_symbolic_tracing": (CONSTANT, False),
    "torch.compiler.is_compiling": (CONSTANT, True),
    "torch.compiler.is_dynamo_compiling": (CONSTANT, True),
    "torch.compiler.is_exporting": (CONSTANT, False),
    "torch._dynamo.is_compiling": (CONSTANT, True),
    "torch._utils.is_compiling": (CONSTANT, True),
    "torch.backends.mha.get_fastpath_enabled": INLINE,
    "typing.cast": INLINE,   # returns its value (pytree's namedtuple flatten uses it)
    # a function decorated by @torch.inference_mode() enters self.clone() per call
    "torch.autograd.grad_mode.inference_mode.clone": INLINE,
    # torch._dynamo's constant-fold functions: no tensor in or out, called at trace time.
    "torch.promote_types": (FOLD, None),
    "sys.intern": (FOLD, None),   # pathlib's parts (3.12): the same str
    "sys.getrecursionlimit": (FOLD, None),   # a constant of the trace, as torch._dynamo's
    "posix._path_splitroot_ex": (FOLD, None),   # os.path.splitroot (3.13): pure on a str
    # collections' pure-Python containers (transformers' BatchFeature / BatchEncoding are
    # UserDicts): their methods inlined, as torch._dynamo inlines them
    **{f"collections.{cls}.{name}": INLINE
       for cls in ("UserDict", "UserList", "UserString", "ChainMap")
       for name, member in vars(getattr(collections, cls)).items()
       if isinstance(member, types.FunctionType)},
    # a named tuple class made from constants: made at trace time (one class for the cache
    # entry, where eager makes one per call), as torch._dynamo makes it; "module": called
    # with module= the calling traced function's __name__ (what eager reads from its frame)
    "collections.namedtuple": (FOLD, "module"),
    # re's functions on constants (re.Pattern and re.Match are constants), as torch._dynamo's
    # RE_CONSTANT_FOLD_FNS; split and findall give lists, which are no constants
    **{f"re.{name}": (FOLD, None)
       for name in ("compile", "search", "match", "fullmatch", "sub", "subn", "escape")},
    "torch.nn.functional._Reduction.get_enum": (FOLD, None),
    "torch._prims_common.canonicalize_dim": (FOLD, None),
    "torch.distributed.is_available": (FOLD, None),
    "torch.distributed.is_initialized": (FOLD, "state"),
    "torch.get_default_dtype": (FOLD, "state"),
    "torch.get_autocast_gpu_dtype": (FOLD, "state"),
    "torch._C._is_any_autocast_enabled": (FOLD, "state"),
    "torch.is_inference_mode_enabled": (FOLD, "state"),
    "torch._C._get_privateuse1_backend_name": (FOLD, "state"),
    "torch._C._get_cublas_allow_tf32": (FOLD, "state"),
    "torch.cuda.is_available": (FOLD, "state"),
    "torch.cuda.is_initialized": (FOLD, "state"),
    "torch.accelerator.is_available": (FOLD, "state"),
    # torch.cpu / torch.cuda / ... for a device (the accelerator when none): fixed per process
    "torch.get_device_module": (FOLD, None),
    "torch.autograd._is_checkpoint_valid": (FOLD, "state"),
    "torch.__future__.get_overwrite_module_params_on_conversion": (FOLD, "state"),
    "torch._dynamo.graph_break": BREAK,
    "torch._dynamo.testing.unsupported": BREAK,
    "cdynamo.graph_break": BREAK,
    "builtins.print": BREAK,
    "builtins.input": BREAK,
    "builtins.breakpoint": BREAK,
    "torch.Tensor.item": BREAK,
    "torch.Tensor.tolist": BREAK,
    # torch.Tensor.numpy has no rule: traced (csrc/values/ndarray.c), as torch._dynamo does.
}


class RuleMatch(NamedTuple):
    """What ``lookup_callable`` found: the rule, its value (CONSTANT, POLYFILL) and the key
    of the table entry that matched (a qualified name, module name or file prefix)."""

    rule: str
    value: Any
    key: str


# ---- code rules -----------------------------------------------------------------------------

def _stdlib_dirs() -> list[str]:
    """The standard library's directories, from sysconfig with the base (not venv) prefix."""
    base_vars = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix,
                 "installed_base": sys.base_prefix, "installed_platbase": sys.base_exec_prefix}
    dirs = []
    for key in ("stdlib", "platstdlib"):
        d = sysconfig.get_path(key, vars=base_vars)
        if d and os.path.isdir(d) and d not in dirs:
            dirs.append(d)
    return dirs


def _stdlib_file_prefixes() -> list[str]:
    """Path prefixes of the standard library, without any site-packages inside it: a
    site-packages may sit inside the stdlib directory (a non-venv install), so the prefixes
    are the directory's entries one by one, leaving site-packages and dist-packages out."""
    prefixes = []
    for d in _stdlib_dirs():
        for entry in sorted(os.listdir(d)):
            if entry in ("site-packages", "dist-packages"):
                continue
            path = os.path.join(d, entry)
            prefixes.append(path + os.sep if os.path.isdir(path) else path)
    return prefixes


_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_path_cache: dict[str, tuple[str, ...]] = {}


def module_paths(name: str) -> tuple[str, ...]:
    """File prefixes of module ``name`` without importing it: ``dir/`` for a package, the
    ``.py`` file for a plain module; () when it cannot be found (not installed)."""
    if name.endswith("*"):
        return ()
    cached = _path_cache.get(name)
    if cached is not None:
        return cached
    top, _, rest = name.partition(".")
    roots: list[str] = []
    origin = None
    if top == "cdynamo":
        roots = [_OWN_DIR.rstrip(os.sep)]
    else:
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            spec = None
        if spec is not None:
            roots = list(spec.submodule_search_locations or [])
            origin = spec.origin
    found: list[str] = []
    if not rest:
        if roots:
            found = [r + os.sep for r in roots]
        elif origin and os.path.isfile(origin):
            found = [origin]
    else:
        for r in roots:
            p = os.path.join(r, *rest.split("."))
            if os.path.isdir(p):
                found.append(p + os.sep)
            elif os.path.isfile(p + ".py"):
                found.append(p + ".py")
    result = tuple(found)
    _path_cache[name] = result
    return result


def _stdlib_module_names() -> list[str]:
    # builtins is modelled by the interpreter and __main__ is the user's script.
    return sorted(n for n in sys.stdlib_module_names if n not in ("builtins", "__main__"))


def file_rules() -> list[tuple[str, str]]:
    """(path prefix, rule) pairs: the standard library's entries, then every module rule's
    files (a module rule wins over the standard library's rule for the same path). The
    engine keeps the longest matching prefix."""
    merged = {p: STDLIB_RULE for p in _stdlib_file_prefixes()}
    for name, rule in MODULE_RULES.items():
        merged.update((p, rule) for p in module_paths(name))
    return list(merged.items())


def module_rules() -> list[tuple[str, str]]:
    """(dotted module name, rule) pairs: the standard library's names, then MODULE_RULES
    (which wins on equal keys)."""
    merged = {n: STDLIB_RULE for n in _stdlib_module_names()}
    merged.update(MODULE_RULES)
    return sorted(merged.items())


def lookup_module(name: str | None) -> str | None:
    """The rule of module ``name`` (longest matching key), or None."""
    if not isinstance(name, str):
        return None
    best, best_len = None, -1
    for key, rule in _snapshot()[1]:
        raw = key.endswith("*")
        prefix = key[:-1] if raw else key
        if len(prefix) <= best_len or not name.startswith(prefix):
            continue
        if not raw and len(name) > len(prefix) and name[len(prefix)] != ".":
            continue
        best, best_len = rule, len(prefix)
    return best


def lookup_file(filename: str) -> str | None:
    """The rule of a source file path (longest matching prefix), or None. ``<frozen NAME>``
    files (the stdlib's frozen modules) have the rule of module NAME (SKIP for the
    standard library unless MODULE_RULES says otherwise, e.g. _collections_abc)."""
    if filename.startswith("<frozen "):
        return lookup_module(filename[len("<frozen "):-1]) or SKIP
    best, best_len = None, -1
    for prefix, rule in _snapshot()[0]:
        if len(prefix) > best_len and filename.startswith(prefix):
            best, best_len = rule, len(prefix)
    return best


def lookup_code(code: types.CodeType, globals: dict | None = None) -> str | None:
    """The rule of Python code, as the frame hook decides it: by file, then, for code whose
    file is not a path ("<string>"), by the module name of the globals it runs with."""
    rule = lookup_file(code.co_filename)
    if rule is None and code.co_filename.startswith("<") and isinstance(globals, dict):
        rule = lookup_module(globals.get("__name__"))
    return rule


# ---- per-callable rules ---------------------------------------------------------------------

_resolved: dict[int, tuple[Any, RuleMatch]] = {}   # id -> (object kept alive, match)
_pending: dict[str, tuple[str, Any]] = {}          # names not resolvable yet
_resolved_modules_len = -1


def _resolve(qualname: str) -> Any:
    """The object named ``qualname`` reachable from an already-imported module, or a
    LookupError (nothing is imported)."""
    parts = qualname.split(".")
    for i in range(len(parts) - 1, 0, -1):
        mod = sys.modules.get(".".join(parts[:i]))
        if mod is None:
            continue
        obj = mod
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            continue
        return obj
    raise LookupError(qualname)


def _normalise(entry: str | tuple[str, Any]) -> tuple[str, Any]:
    rule, value = (entry, None) if isinstance(entry, str) else entry
    if rule not in RULES:
        raise ValueError(f"trace_rules: unknown rule {rule!r}; valid rules: {sorted(RULES)}")
    if rule == FOLD and value not in (None, "state", "module"):
        raise ValueError(f"trace_rules: a fold rule's value is None, 'state' or 'module', "
                         f"got {value!r}")
    return rule, value


def _resolve_pending() -> None:
    """Resolve the per-callable names whose modules have been imported since last time."""
    global _resolved_modules_len
    if len(sys.modules) == _resolved_modules_len:
        return
    _resolved_modules_len = len(sys.modules)
    for name, (rule, value) in list(_pending.items()):
        try:
            obj = _resolve(name)
        except LookupError:
            continue
        del _pending[name]
        if rule == POLYFILL and isinstance(value, str):
            try:
                value = _resolve(value)
            except LookupError:
                _pending[name] = (rule, value)
                continue
        try:
            _resolved[id(obj)] = (obj, RuleMatch(rule, value, name))
        except TypeError:
            pass


def _rebuild_callables() -> None:
    global _resolved_modules_len
    _resolved.clear()
    _pending.clear()
    for name, entry in CALLABLE_RULES.items():
        _pending[name] = _normalise(entry)
    _resolved_modules_len = -1


def lookup_callable(obj: Any) -> RuleMatch | None:
    """The rule for a call of ``obj`` from traced code, or None (no rule: user code is
    inlined; the interpreter decides for C callables). Trace time only: runs Python."""
    _resolve_pending()
    hit = _resolved.get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    func = obj.__func__ if isinstance(obj, types.MethodType) else obj
    if func is not obj:
        hit = _resolved.get(id(func))
        if hit is not None and hit[0] is func:
            return hit[1]
    from . import polyfills   # the engine's table of builtins traced through plain Python
    replacement = polyfills.polyfill_of(obj)
    if replacement is not None:
        return RuleMatch(POLYFILL, replacement, "cdynamo.polyfills")
    code = getattr(func, "__code__", None)
    if isinstance(func, types.FunctionType) and isinstance(code, types.CodeType):
        rule = lookup_code(code, func.__globals__)
        if rule is not None:
            return RuleMatch(rule, None, code.co_filename)
    return None


# ---- changes and the engine's snapshot ------------------------------------------------------

_snap: tuple[list[tuple[str, str]], list[tuple[str, str]]] | None = None


def _snapshot() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    global _snap
    if _snap is None:
        _snap = (file_rules(), module_rules())
    return _snap


def _push() -> None:
    """Recompute the code rules and hand them to the engine (which forgets its cached frame
    decisions). No-op when the engine is not built."""
    global _snap
    _snap = None
    files, modules = _snapshot()
    engine = sys.modules.get("cdynamo._C")
    if engine is not None:
        engine.set_trace_rules(files, modules, _lookup_for_engine)


def _lookup_for_engine(obj: Any) -> tuple[str, Any] | None:
    """lookup_callable as the engine reads it: None or (rule, value)."""
    m = lookup_callable(obj)
    return None if m is None else (m.rule, m.value)


def set_module_rule(name: str, rule: str | None) -> None:
    """Set (or, with None, remove) the rule of Python code under module ``name`` (dotted;
    a trailing "*" matches any name starting with the rest). Takes effect for code objects
    the hook decides from now on: cached decisions are forgotten."""
    if rule is not None and rule not in _CODE_RULES:
        raise ValueError(f"trace_rules: a module rule must be one of {list(_CODE_RULES)}, "
                         f"got {rule!r} (constant and polyfill rules are per callable)")
    if rule is None:
        MODULE_RULES.pop(name, None)
    else:
        MODULE_RULES[name] = rule
    _push()


def set_callable_rule(name: str, rule: str | None, value: Any = None) -> None:
    """Set (or, with None, remove) the rule of the callable with qualified name ``name``
    (e.g. "torch.jit.is_scripting"); ``value``: the folded constant or the polyfill."""
    if rule is None:
        CALLABLE_RULES.pop(name, None)
    else:
        CALLABLE_RULES[name] = _normalise((rule, value))
    _rebuild_callables()


@contextlib.contextmanager
def patch(modules: dict[str, str | None] | None = None,
          callables: dict[str, str | tuple[str, Any] | None] | None = None) -> Iterator[None]:
    """Change module and callable rules for a with-block (a value None removes the rule);
    the previous tables come back afterwards."""
    saved_modules, saved_callables = dict(MODULE_RULES), dict(CALLABLE_RULES)
    try:
        for name, rule in (modules or {}).items():
            if rule is not None and rule not in _CODE_RULES:
                raise ValueError(f"trace_rules: a module rule must be one of "
                                 f"{list(_CODE_RULES)}, got {rule!r}")
            if rule is None:
                MODULE_RULES.pop(name, None)
            else:
                MODULE_RULES[name] = rule
        for name, entry in (callables or {}).items():
            if entry is None:
                CALLABLE_RULES.pop(name, None)
            else:
                CALLABLE_RULES[name] = _normalise(entry)
        _rebuild_callables()
        _push()
        yield
    finally:
        MODULE_RULES.clear()
        MODULE_RULES.update(saved_modules)
        CALLABLE_RULES.clear()
        CALLABLE_RULES.update(saved_callables)
        _rebuild_callables()
        _push()


def _check_table() -> None:
    for name, rule in MODULE_RULES.items():
        if rule not in _CODE_RULES:
            raise ValueError(f"trace_rules: module rule {name!r}: {rule!r} is not a code rule")
    for entry in CALLABLE_RULES.values():
        _normalise(entry)


_check_table()
_rebuild_callables()
