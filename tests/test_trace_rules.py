"""What is never traced (issue 8, scope 2): cdynamo.trace_rules, the engine's copy of it, and
the frame hook's decisions taken from it."""
import collections
import contextlib
import copy
import dataclasses
import functools
import importlib
import sys
import typing

import pytest
import sympy
import torch
import torch.utils._config_module as config_module
import torch.utils._pytree as pytree

import cdynamo
from cdynamo import trace_rules as tr

_C = pytest.importorskip("cdynamo._C")


@pytest.fixture(autouse=True)
def _clean():
    cdynamo.reset()
    cdynamo.reset_counters()
    yield
    cdynamo.reset()


def user_fn(x):
    return x + 1


@dataclasses.dataclass
class UserConfig:
    scale: float = 2.0


Pair = collections.namedtuple("Pair", "a b")


def _rule(obj):
    m = tr.lookup_callable(obj)
    return None if m is None else m.rule


# ---- the table ------------------------------------------------------------------------------

def test_every_rule_is_documented_and_every_entry_valid():
    assert set(tr.RULES) == {tr.SKIP, tr.INLINE, tr.COMPILE, tr.GRAPH, tr.CONSTANT,
                             tr.FOLD, tr.POLYFILL, tr.BREAK}
    assert all(isinstance(text, str) and text for text in tr.RULES.values())
    for name, rule in tr.MODULE_RULES.items():
        assert rule in (tr.SKIP, tr.INLINE, tr.COMPILE, tr.GRAPH, tr.BREAK), name
    for name, entry in tr.CALLABLE_RULES.items():
        rule = entry if isinstance(entry, str) else entry[0]
        assert rule in tr.RULES, name
    with pytest.raises(ValueError, match="per callable"):
        tr.set_module_rule("somewhere", tr.CONSTANT)
    with pytest.raises(ValueError, match="unknown rule"):
        tr.set_callable_rule("somewhere.fn", "sometimes")


@pytest.mark.parametrize("fn", [
    sympy.simplify,                          # sympy (torch's symbolic shapes use it)
    sympy.Integer.__add__,
    torch._dynamo.convert_frame.convert_frame,  # torch internals
    torch.fx.symbolic_trace,
    config_module.install_config_module,
    functools.total_ordering,                # the standard library's machinery (wraps
                                             # and update_wrapper are polyfilled)
    typing.get_type_hints,
    copy._reconstruct,                       # (copy.deepcopy itself has a polyfill)
    importlib.import_module,
    cdynamo._glue.fake_call,                 # cdynamo's own Python
    cdynamo.trace_rules.lookup_callable,
])
def test_skip_rule(fn):
    assert _rule(fn) == tr.SKIP
    assert _C.trace_rule(fn.__code__, fn.__globals__) == (tr.SKIP, None)


def test_skip_rule_covers_numpy_and_third_party_python():
    np = pytest.importorskip("numpy")
    from numpy.lib import _function_base_impl as fb
    impl = getattr(fb.piecewise, "_implementation", fb.piecewise)   # numpy's Python code
    assert isinstance(impl, type(user_fn)) and _rule(impl) == tr.SKIP
    import typing_extensions
    assert tr.lookup_file(typing_extensions.__file__) == tr.SKIP
    assert np is not None


@pytest.mark.parametrize("fn", [
    torch.nn.functional.relu,
    torch.nn.Linear.forward,
    pytree.tree_map,
    contextlib.contextmanager,   # its helper and _GeneratorContextManager (generator.c)
])
def test_inline_rule(fn):
    assert _rule(fn) == tr.INLINE
    assert _C.trace_rule(fn.__code__, fn.__globals__) == (tr.INLINE, None)


def test_graph_rule():
    assert _rule(torch.functional.einsum) == tr.GRAPH
    assert _rule(torch.einsum) == tr.GRAPH        # the same function, re-exported


@pytest.mark.parametrize("fn,value", [
    (torch.jit.is_scripting, False),
    (torch.jit.is_tracing, False),
    (torch.compiler.is_compiling, True),
    (torch._C._get_tracing_state, None),
])
def test_constant_rule(fn, value):
    m = tr.lookup_callable(fn)
    assert m.rule == tr.CONSTANT and m.value is value
    assert _C.trace_rule(fn) == (tr.CONSTANT, value)


def _tracing_state_branch(x):
    if torch._C._get_tracing_state():   # a builtin (pybind11), read by nn.Module._call_impl
        return x - 1
    return x + 1


def test_constant_rule_folds_a_builtin_call():
    """The call of a builtin with a CONSTANT rule folds to its value (no graph break)."""
    out = cdynamo.explain(_tracing_state_branch)(torch.ones(2))
    assert out.graph_count == 1 and out.graph_break_count == 0, out.break_reasons


@pytest.mark.parametrize("fn", [print, torch.Tensor.item, torch.Tensor.tolist,
                                cdynamo.graph_break, torch._dynamo.graph_break])
def test_break_rule(fn):
    assert _rule(fn) == tr.BREAK
    assert _C.trace_rule(fn) == (tr.BREAK, None)


def _slow_norm(v):
    return sum(e * e for e in v) ** 0.5


def _plain_norm(v):
    total = 0.0
    for e in v:
        total += e * e
    return total ** 0.5


def test_polyfill_rule_by_patch():
    name = f"{__name__}._slow_norm"
    with tr.patch(callables={name: (tr.POLYFILL, f"{__name__}._plain_norm")}):
        m = tr.lookup_callable(_slow_norm)
        assert m == (tr.POLYFILL, _plain_norm, name)
        assert _C.trace_rule(_slow_norm) == (tr.POLYFILL, _plain_norm)
    assert tr.lookup_callable(_slow_norm) is None


def test_user_code_has_no_rule_and_compile_overrides():
    assert _rule(user_fn) is None
    assert _C.trace_rule(user_fn.__code__, user_fn.__globals__) == ("none", None)
    assert _rule(torch.sin) is None and _rule(len) is None    # C callables: the interpreter's
    with tr.patch(modules={"torch.nn.functional": tr.COMPILE}):
        assert _rule(torch.nn.functional.relu) == tr.COMPILE
        assert _C.trace_rule(torch.nn.functional.relu.__code__) == (tr.COMPILE, None)
        assert _rule(torch.nn.functional.gelu) is None or True   # C function
        assert _rule(torch.nn.Linear.forward) == tr.INLINE      # torch.nn still inline
    assert _rule(torch.nn.functional.relu) == tr.INLINE


def test_generated_code_is_ruled_by_its_module():
    # dataclass __init__ of torch's own class (file "<string>", torch's globals): skip
    init = config_module._Config.__init__
    assert init.__code__.co_filename == "<string>"
    assert _rule(init) == tr.SKIP
    assert _C.trace_rule(init.__code__, init.__globals__) == (tr.SKIP, None)
    # the same kind of code for a user's dataclass: no rule (compiled)
    assert _rule(UserConfig.__init__) is None
    assert _C.trace_rule(UserConfig.__init__.__code__, UserConfig.__init__.__globals__)[0] == "none"
    # namedtuple machinery: never translated, inlined when called (pure)
    assert _rule(Pair.__new__) == tr.INLINE
    # frozen standard-library modules
    boot = sys.modules["importlib._bootstrap"]._find_and_load
    assert boot.__code__.co_filename.startswith("<frozen ")
    assert _C.trace_rule(boot.__code__) == (tr.SKIP, None)


def test_module_rules_match_whole_names_only():
    assert tr.lookup_module("torch") == tr.SKIP
    assert tr.lookup_module("torch.nn.modules.linear") == tr.INLINE
    assert tr.lookup_module("torchvision_like") is None     # not a submodule of torch
    assert tr.lookup_module("sympy.core") == tr.SKIP
    assert tr.lookup_module("namedtuple_Pair") == tr.INLINE
    assert tr.lookup_module("my_project.models") is None


# ---- the hook's decisions -------------------------------------------------------------------

def test_frames_of_libraries_are_never_translated():
    calls = []

    def user_helper(v):           # user code reached through skipped library frames
        calls.append(v)
        return v * 2

    def f(x):
        n = int(sympy.Integer(3) + 2)                        # sympy (a graph break)
        y = x * n
        cfg = copy.deepcopy(UserConfig(scale=1.5))           # stdlib, user dataclass
        z = functools.reduce(lambda a, b: a + b, [y, y])     # C reducer calling user code
        w = pytree.tree_map(user_helper, {"a": z})["a"]     # torch pytree calling user code
        return w * cfg.scale

    x = torch.randn(4)
    cf = cdynamo.compile(f, backend="eager")
    for _ in range(2):
        assert torch.allclose(cf(x), f(x))
    assert cdynamo.cache_entries(f)
    # library frames that reached the hook were decided "skip" and never got an entry
    for fn in (sympy.Integer.__add__, copy.deepcopy, pytree.tree_map):
        dec = _C.frame_decision(fn.__code__)
        assert dec is None or dec[1] is True, (fn, dec)
        assert _C.cache_entries(fn.__code__) == []


def test_torch_forward_compiled_only_when_forced():
    lin = torch.nn.Linear(3, 2)
    x = torch.randn(5, 3)
    # called from a compiled function: torch's forward is torch.nn (inline), never a frame
    # of its own
    cf = cdynamo.compile(lambda t: torch.relu(lin(t)), backend="eager")
    assert torch.allclose(cf(x), torch.relu(lin(x)))
    assert _C.cache_entries(torch.nn.Linear.forward.__code__) == []
    # compiling the module itself forces its forward
    cm = cdynamo.compile(lin, backend="eager")
    assert torch.allclose(cm(x), lin(x))
    assert len(_C.cache_entries(torch.nn.Linear.forward.__code__)) == 1


def _helper_in_this_module(x):
    return x.cos() + 1


def test_rule_change_takes_effect_and_is_undone():
    f = cdynamo.compile(_helper_in_this_module, backend="eager")
    x = torch.randn(3)
    assert torch.equal(f(x), _helper_in_this_module(x))
    assert len(cdynamo.cache_entries(_helper_in_this_module)) == 1
    with tr.patch(modules={__name__: tr.SKIP}):
        assert _C.trace_rule(_helper_in_this_module.__code__) == (tr.SKIP, None)
        cdynamo.reset()
        assert torch.equal(f(x), _helper_in_this_module(x))
        assert cdynamo.cache_entries(_helper_in_this_module) == []
        assert _C.frame_decision(_helper_in_this_module.__code__) == (tr.SKIP, True)
    assert _C.trace_rule(_helper_in_this_module.__code__) == ("none", None)
    assert torch.equal(f(x), _helper_in_this_module(x))
    assert len(cdynamo.cache_entries(_helper_in_this_module)) == 1


def test_engine_snapshot_matches_python_lookup():
    samples = [user_fn, sympy.simplify, torch.nn.functional.relu, torch.functional.einsum,
               contextlib.contextmanager, config_module._Config.__init__,
               UserConfig.__init__, Pair.__new__, cdynamo._glue.fake_call]
    for fn in samples:
        py = tr.lookup_code(fn.__code__, fn.__globals__)
        assert _C.trace_rule(fn.__code__, fn.__globals__)[0] == (py or "none"), fn


def test_get_device_module_folds_and_a_patched_one_recompiles():
    """torch.get_device_module (an lru_cache of torch) folds to its module, as torch._dynamo
    folds it (it was a graph break: torch/__init__ is skipped); the wrapper is pinned in torch's
    globals, so a patched torch.get_device_module recompiles and gives the patched answer."""
    from unittest import mock

    from helpers import CountingBackend

    def f():
        return torch.get_device_module(), torch.get_device_module("cpu")

    counter = CountingBackend()
    cdynamo.reset()
    compiled = cdynamo.compile(f, backend=counter, fullgraph=True)
    assert compiled() == f() == (torch.get_device_module(), torch.cpu)
    old = torch.get_device_module

    def patched(device=None):
        return old(device) if device else torch.cuda

    with mock.patch("torch.get_device_module", patched):
        assert compiled() == f() == (torch.cuda, torch.cpu)
    assert compiled() == f()


def test_user_function_patched_into_torch_is_guarded():
    """A user's function patched over a torch attribute (mock.patch("torch.nn.functional.relu",
    fn)) and back: each state gets its entry, the one traced under the patch is never reused
    once the patch ends (user functions read from torch's modules are guarded, torch's own
    attributes stay trusted unguarded)."""
    from unittest import mock

    def f(x):
        return torch.nn.functional.relu(x)

    x = torch.tensor([-1.0, 2.0])
    cdynamo.reset()
    compiled = cdynamo.compile(f, backend="eager")
    assert torch.equal(compiled(x), f(x))

    def neg(t):
        return -t

    with mock.patch("torch.nn.functional.relu", neg):
        assert torch.equal(compiled(x), -x)
    assert torch.equal(compiled(x), torch.relu(x))
    with mock.patch("torch.nn.functional.relu", neg):
        assert torch.equal(compiled(x), -x)
