"""Guards: an unchanged call hits the cache; each changed property recompiles exactly once."""
import pytest
import torch

import cdynamo
from conftest import requires_engine
from helpers import CountingBackend

pytestmark = requires_engine


def add(a, b):
    return a + b


def simple_kernel(a, b, actived: bool):
    if actived:
        return a + b
    else:
        return a - b


def _compiled(fn):
    counter = CountingBackend()
    return cdynamo.compile(fn, backend=counter), counter


def test_unchanged_call_does_not_recompile():
    f, counter = _compiled(add)
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    f(a, b)
    cdynamo.reset_counters()
    for _ in range(5):
        x = torch.randn(3, 4)
        assert torch.equal(f(x, b), x + b)
    assert counter.frame_count == 1
    assert len(cdynamo.cache_entries(add)) == 1
    c = cdynamo.counters()
    assert c["compiles"] == 0
    assert c["cache_hits"] >= 1


def _recompiles_once(first_args, second_args, fn=add):
    f, counter = _compiled(fn)
    f(*first_args)
    f(*first_args)
    assert counter.frame_count == 1
    out = f(*second_args)
    assert torch.equal(out, fn(*second_args))
    f(*second_args)
    f(*first_args)
    assert counter.frame_count == 2, f"expected exactly one recompile, got {counter.frame_count - 1}"
    assert len(cdynamo.cache_entries(fn)) == 2


def test_dtype_change_recompiles_once():
    a = torch.randn(3, 4)
    _recompiles_once((a, a), (a.double(), a.double()))


def test_shape_change_recompiles_once():
    _recompiles_once((torch.randn(3, 4), torch.randn(3, 4)), (torch.randn(5, 4), torch.randn(5, 4)))


def test_stride_change_recompiles_once():
    a = torch.randn(4, 4)
    _recompiles_once((a, a), (a.t(), a.t()))


def test_requires_grad_change_recompiles_once():
    a = torch.randn(3, 4)
    f, counter = _compiled(add)
    f(a, a)
    g = a.clone().requires_grad_()
    out = f(g, a)
    assert out.requires_grad
    f(g, a)
    f(a, a)
    assert counter.frame_count == 2


def test_guarded_constant_gives_two_entries():
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    f, counter = _compiled(simple_kernel)
    assert torch.equal(f(a, b, True), a + b)
    assert torch.equal(f(a, b, False), a - b)
    assert torch.equal(f(a, b, True), a + b)
    assert torch.equal(f(a, b, False), a - b)
    assert counter.frame_count == 2
    assert len(cdynamo.cache_entries(simple_kernel)) == 2


def test_grad_mode_is_guarded():
    a = torch.randn(3, 4, requires_grad=True)
    f, counter = _compiled(add)
    assert f(a, a).requires_grad
    with torch.no_grad():
        assert not f(a, a).requires_grad
    assert counter.frame_count == 2


def test_past_cache_size_limit_runs_eagerly():
    saved = cdynamo.config.cache_size_limit
    cdynamo.config.cache_size_limit = 2
    try:
        # static shapes (dynamic=False): each size is a new entry
        counter = CountingBackend()
        f = cdynamo.compile(add, backend=counter, dynamic=False)
        for n in range(1, 6):
            a = torch.randn(n, 3)
            assert torch.equal(f(a, a), a + a)
        assert counter.frame_count == 2
        assert len(cdynamo.cache_entries(add)) == 2
        assert cdynamo.counters()["cache_limit_hits"] >= 1
    finally:
        cdynamo.config.cache_size_limit = saved


def _limit_outer(x, n):
    x = x + n
    return _limit_inner(x, n)


def _limit_inner(x, n):
    if torch.compiler.is_compiling():
        x = x + 100
    return x + n


def test_callees_of_a_frame_at_its_cache_limit_are_not_compiled():
    """Once a frame is at its cache limit it runs uncompiled and so do the frames it calls
    (their cache entries still run), as torch._dynamo's run-only mode after recompile_limit:
    the callee was compiled anew for each call before (a frame at the limit compiling its
    callees in a loop). Outputs and graph count equal torch._dynamo's."""
    def run(compile_fn, limit_ctx):
        counter = CountingBackend()
        with limit_ctx:
            f = compile_fn(_limit_outer, backend=counter, dynamic=False)
            outs = [f(torch.zeros(1), i).item() for i in range(4)]
        return outs, counter.frame_count

    class _CdynamoLimit:
        def __enter__(self):
            self.saved = cdynamo.config.cache_size_limit
            cdynamo.config.cache_size_limit = 2

        def __exit__(self, *exc):
            cdynamo.config.cache_size_limit = self.saved

    torch._dynamo.reset()
    want = run(torch.compile, torch._dynamo.config.patch(recompile_limit=2))
    torch._dynamo.reset()
    cdynamo.reset()
    got = run(cdynamo.compile, _CdynamoLimit())
    assert got == want == ([100.0, 102.0, 4.0, 6.0], 2), (got, want)


def test_reset_clears_entries():
    f, counter = _compiled(add)
    a = torch.randn(2)
    f(a, a)
    assert len(cdynamo.cache_entries(add)) == 1
    cdynamo.reset()
    assert cdynamo.cache_entries(add) == []
    f(a, a)
    assert counter.frame_count == 2


def test_cache_entries_show_guards():
    f, _ = _compiled(simple_kernel)
    a = torch.randn(3)
    f(a, a, True)
    (entry,) = cdynamo.cache_entries(f)
    guards, code = entry
    text = "\n".join(guards)
    assert "TENSOR_MATCH" in text
    assert "'a'" in text and "'b'" in text
    assert "actived" in text
    assert code.co_name == simple_kernel.__code__.co_name or isinstance(code, type(add.__code__))
    assert "TENSOR_MATCH" in repr(entry)
    # the same entries are found from the original function and the code object
    assert [e.guards for e in cdynamo.cache_entries(simple_kernel)] == [guards]
    assert [e.guards for e in cdynamo.cache_entries(simple_kernel.__code__)] == [guards]


def test_most_recent_entry_first():
    f, _ = _compiled(simple_kernel)
    a = torch.randn(3)
    f(a, a, True)
    f(a, a, False)
    first = cdynamo.cache_entries(simple_kernel)[0].guards
    assert any("False" in g for g in first)
    f(a, a, True)
    first = cdynamo.cache_entries(simple_kernel)[0].guards
    assert any("True" in g for g in first)


@requires_engine
def test_module_structure_changes_recompile():
    """Swapping a submodule for one of the same type or replacing a parameter by one of the
    same shape reuses the entry (parameters are graph inputs read through their sources, as
    torch._dynamo); another type, another shape or a longer ModuleList recompiles
    (NN_MODULE / TENSOR_MATCH / LENGTH_CHECK)."""
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(3, 3)])
            self.head = nn.Linear(3, 2)

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return self.head(x)

    torch.manual_seed(0)
    m = Net().eval()
    x = torch.randn(2, 3)
    cdynamo.reset()
    c = cdynamo.compile(m, backend="eager")

    def check():
        assert torch.equal(c(x), m(x))

    check()
    check()
    assert len(cdynamo.cache_entries(m)) == 1
    m.head = nn.Linear(3, 2)                                   # submodule swapped
    check()
    assert len(cdynamo.cache_entries(m)) == 1
    m.head = nn.Bilinear(3, 3, 2)                              # another type
    m.head.forward = lambda x, lin=nn.Linear(3, 2): lin(x)
    check()
    assert len(cdynamo.cache_entries(m)) == 2
    m.head = nn.Linear(3, 2)
    m.head.weight = nn.Parameter(torch.randn(2, 3))            # parameter replaced
    check()
    assert len(cdynamo.cache_entries(m)) == 2
    m.layers[0].weight = nn.Parameter(torch.randn(3, 3).t())   # other strides
    check()
    assert len(cdynamo.cache_entries(m)) == 3
    m.layers.append(nn.Linear(3, 3))                            # one more layer
    check()
    assert len(cdynamo.cache_entries(m)) == 4
    with torch.no_grad():
        m.head.weight.mul_(2)                                   # in-place update: same object
    check()
    assert len(cdynamo.cache_entries(m)) == 4
    guards = cdynamo.cache_entries(m)[0].guards
    assert any("LENGTH_CHECK" in g for g in guards) and any("NN_MODULE" in g for g in guards)
    cdynamo.reset()


def _alias_add(x, y):
    return x + y * 2


def test_aliased_tensor_inputs_are_guarded():
    # before: traced with x is y, one placeholder served both; a later call with two
    # different tensors returned x + x * 2 (wrong result)
    compiled = cdynamo.compile(_alias_add, backend="eager")
    a, b = torch.ones(2), torch.zeros(2)
    assert torch.equal(compiled(a, a), _alias_add(a, a))
    assert torch.equal(compiled(a, b), _alias_add(a, b))
    assert torch.equal(compiled(b, b), _alias_add(b, b))
    assert any("SAME_OBJECT" in g for e in cdynamo.cache_entries(_alias_add) for g in e.guards)


def _make_scaler(k):
    class Scale(torch.nn.Module):
        def forward(self, x):
            return x * k
    return Scale()


def test_closure_of_an_inlined_method_is_guarded():
    # the method is inlined from its module (no source of its own): its cell is read through
    # a constant source on the function, so changing the cell recompiles
    scaler = _make_scaler(2)

    def f(x):
        return scaler(x) + 1

    compiled = cdynamo.compile(f, backend="eager")
    assert torch.equal(compiled(torch.ones(2)), torch.full((2,), 3.0))
    type(scaler).forward.__closure__[0].cell_contents = 5
    assert torch.equal(compiled(torch.ones(2)), torch.full((2,), 6.0))


def test_bound_method_passed_in_is_guarded_by_what_it_is():
    # before: a builtin method reaching a frame (a resume function's argument) was guarded
    # by its self's type only, so obj.__reduce__ was answered with obj.__reduce_ex__
    class Obj:
        pass

    o = Obj()

    def call_it(m):
        return m()

    compiled = cdynamo.compile(call_it, backend="eager")
    assert compiled(o.__reduce__) == o.__reduce__()
    assert compiled(o.__sizeof__) == o.__sizeof__()
    assert compiled(o.__repr__) == o.__repr__()


def _h_is(a, b):
    if b is not a:
        print("different")
        return a - b
    return a * 2


def test_entry_for_distinct_tensors_is_not_reused_for_aliased_ones():
    """NO_TENSOR_ALIASING (as torch._dynamo): an entry traced for h(x, y) decided `b is not
    a` and is not reused for h(x, x) (found by the fuzzer, seed 2 program 2935)."""
    compiled = cdynamo.compile(_h_is, backend="eager")
    x, y = torch.ones(3), torch.zeros(3)
    assert torch.equal(compiled(x, y), _h_is(x, y))
    assert torch.equal(compiled(x, x), _h_is(x, x))
    assert len(cdynamo.cache_entries(_h_is)) == 2
    assert torch.equal(compiled(y, x), _h_is(y, x))   # hits the first entry again
    assert len(cdynamo.cache_entries(_h_is)) == 2
    assert any("NO_TENSOR_ALIASING" in str(e) for e in cdynamo.cache_entries(_h_is))


class _Holder:
    def __init__(self, a=1):
        self.a = a


class _Pair:
    def __init__(self, p, q):
        self.p, self.p2 = p, q


def _store_then_read_other_path(x, pair):
    pair.p.a = 5
    return x + pair.p2.a


def _store_then_read_other_arg(x, a, b):
    a.a = 7
    return x + b.a


def _append_then_len_other(x, a, b):
    a.append(1)
    return x + len(b)


def test_one_object_under_two_attribute_paths_is_one_value():
    """An object of the frame reached as pair.p and pair.p2 is one value: the store through
    one path is seen by the read through the other (was a wrong result: 2 for 6)."""
    compiled = cdynamo.compile(_store_then_read_other_path, backend="eager")
    h = _Holder()
    out = compiled(torch.ones(1), _Pair(h, h))
    assert torch.equal(out, torch.tensor([6.])) and h.a == 5
    # distinct objects: another entry (SAME_OBJECT fails), the right result again
    assert torch.equal(compiled(torch.ones(1), _Pair(_Holder(), _Holder())), torch.tensor([2.]))
    assert torch.equal(compiled(torch.ones(1), _Pair(h, h)), torch.tensor([6.]))


@pytest.mark.parametrize("first_same", [True, False])
def test_entry_for_distinct_objects_is_not_reused_for_one_object_twice(first_same):
    """The distinct mutable objects of a trace (user objects, lists) stay distinct
    (a NO_TENSOR_ALIASING guard over them), and one object passed twice is one value."""
    cdynamo.reset()
    for fn, make in ((_store_then_read_other_arg, _Holder), (_append_then_len_other, list)):
        compiled = cdynamo.compile(fn, backend="eager")
        calls = [True, False] if first_same else [False, True]
        for same in calls + calls:
            a = make()
            b = a if same else make()
            a2 = make()
            b2 = a2 if same else make()
            assert torch.equal(compiled(torch.ones(1), a, b), fn(torch.ones(1), a2, b2))
        assert len(cdynamo.cache_entries(fn)) == 2


_MOD_B = """
import torch
def inner(x):
    return torch.sin(x)
"""

_MOD_A = """
import functools
def deco(fn):
    @functools.wraps(fn)          # the wrapper's __module__ becomes fn's module
    def wrapper(x):
        return fn(x) + helper_a(x)
    return wrapper
def helper_a(x):
    return x * 2
"""


def test_globals_of_a_wraps_wrapper_and_of_the_wrapped_module_stay_apart(monkeypatch):
    """A functools.wraps wrapper (globals of module A, __module__ of module B) and a function
    of B inlined in one trace: their globals dicts are two guard sources (they were labelled
    alike, so B's `torch` was looked up in A's globals: KeyError, a recompile on every call,
    found on transformers' merge_with_config_defaults)."""
    import sys
    import types
    mods = {}
    for name, text in (("_cdyn_mod_b", _MOD_B), ("_cdyn_mod_a", _MOD_A)):
        m = types.ModuleType(name)
        exec(compile(text, name, "exec"), m.__dict__)
        monkeypatch.setitem(sys.modules, name, m)
        mods[name] = m
    wrapped = mods["_cdyn_mod_a"].deco(mods["_cdyn_mod_b"].inner)
    assert wrapped.__module__ == "_cdyn_mod_b"

    def f(x):
        return wrapped(x) - mods["_cdyn_mod_b"].inner(x)

    cdynamo.reset()
    counter = CountingBackend()
    compiled = cdynamo.compile(f, backend=counter)
    for _ in range(3):
        x = torch.randn(4)
        assert torch.allclose(compiled(x), f(x))
    assert counter.frame_count == 1
    assert len(cdynamo.cache_entries(f)) == 1
