"""The per-call guard path's shortcuts stay exact: every change a guard watches is still seen.

Guards read each source once per check (a node per distinct source), nn.Module attribute
reads are answered from a cache keyed by the dicts' PEP 509 version tags and the type's
version tag, and the tensors of plain local inputs are checked in one call of torch's
TensorGuards. Each test changes one thing behind those shortcuts and expects the result of
eager mode (a recompile or another entry), then a cache hit once the state is back.
"""
import sys

import pytest
import torch
import torch.nn as nn

import cdynamo
from conftest import requires_engine
from helpers import CountingBackend

pytestmark = requires_engine


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scale = 2.0

    def forward(self, x):
        return self.lin(x) * self.scale


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()
        self.register_buffer("shift", torch.ones(4))

    def forward(self, x):
        return self.inner(x) + self.shift


def _setup():
    torch.manual_seed(0)
    m = Outer().eval()
    counter = CountingBackend()
    c = cdynamo.compile(m, backend=counter)
    x = torch.randn(2, 4)
    with torch.no_grad():
        torch.testing.assert_close(c(x), m(x))
        torch.testing.assert_close(c(x), m(x))
    assert counter.frame_count == 1
    return m, c, x, counter


def _check(m, c, x):
    with torch.no_grad():
        torch.testing.assert_close(c(x), m(x))


class _OtherLinear(nn.Linear):
    pass


def test_submodule_replaced_through_setattr():
    # modules are guarded by type (their parameters are graph inputs read through their
    # sources, as torch._dynamo): a new Linear reuses the entry, another type recompiles
    m, c, x, counter = _setup()
    m.inner.lin = nn.Linear(4, 4)
    _check(m, c, x)
    assert counter.frame_count == 1
    m.inner.lin = _OtherLinear(4, 4)
    _check(m, c, x)
    assert counter.frame_count == 2


def test_submodule_replaced_in_modules_dict():
    m, c, x, counter = _setup()
    m.inner._modules["lin"] = nn.Linear(4, 4)
    _check(m, c, x)
    assert counter.frame_count == 1
    m.inner._modules["lin"] = _OtherLinear(4, 4)
    _check(m, c, x)
    assert counter.frame_count == 2


def test_parameter_replaced():
    m, c, x, counter = _setup()
    m.inner.lin.weight = nn.Parameter(torch.randn(4, 4))
    _check(m, c, x)
    assert counter.frame_count == 1    # read through its source: the new one is used
    m.inner.lin.weight = nn.Parameter(torch.randn(4, 4, dtype=torch.float64))
    with pytest.raises(RuntimeError):
        m(x)                           # eager raises too (dtype mismatch) ...
    with pytest.raises(RuntimeError):
        c(x)
    assert counter.frame_count == 2    # ... and so does the recompiled trace (TENSOR_MATCH failed)


def test_buffer_replaced_in_buffers_dict():
    m, c, x, counter = _setup()
    m._buffers["shift"] = torch.full((4,), 3.0)
    _check(m, c, x)


def test_plain_attribute_changed_by_a_specialised_store():
    m, c, x, counter = _setup()

    def store(obj, v, n):
        for _ in range(n):
            obj.scale = v   # specialises to STORE_ATTR_WITH_HINT, which writes the dict in place

    store(m.inner, 2.0, 50)
    _check(m, c, x)
    assert counter.frame_count == 1     # same value: still a hit
    store(m.inner, 3.0, 1)
    _check(m, c, x)
    assert counter.frame_count == 2
    store(m.inner, 2.0, 1)
    _check(m, c, x)
    assert counter.frame_count == 2     # back to the first entry


def test_instance_dict_written_directly():
    m, c, x, counter = _setup()
    m.inner.__dict__["scale"] = 5.0
    _check(m, c, x)
    assert counter.frame_count == 2


def test_parameter_shadowing_a_submodule_of_the_same_name():
    # a value found in _modules depends on _parameters and _buffers not having the name
    m, c, x, counter = _setup()
    m.inner._parameters["lin"] = nn.Parameter(torch.randn(4))
    with pytest.raises(TypeError):
        m(x)    # nn.Module.__getattr__ finds the Parameter first: not callable
    with pytest.raises(TypeError):
        c(x)


def test_class_attribute_added_over_an_instance_attribute():
    m, c, x, counter = _setup()

    class Patched(Inner):
        pass

    m.inner.__class__ = Patched
    _check(m, c, x)
    Patched.scale = property(lambda self: 7.0)   # a data descriptor wins over the dict
    _check(m, c, x)


def test_module_swapped_for_a_copy_with_the_same_attributes():
    m, c, x, counter = _setup()
    other = Outer().eval()
    other.load_state_dict(m.state_dict())
    m._modules["inner"] = other.inner
    _check(m, c, x)
    assert counter.frame_count == 1    # same type, same attributes: the entry is reused
    other.inner.scale = 5.0
    _check(m, c, x)
    assert counter.frame_count == 2


def test_many_distinct_sources_each_read_once():
    # more sources than a check keeps on the C stack: values still right, still a hit
    torch.manual_seed(0)
    m = nn.Sequential(*[nn.Linear(4, 4) for _ in range(80)]).eval()
    counter = CountingBackend()
    c = cdynamo.compile(m, backend=counter)
    x = torch.randn(2, 4)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(c(x), m(x))
        assert counter.frame_count == 1
        m[79].bias = nn.Parameter(torch.randn(4))
        torch.testing.assert_close(c(x), m(x))
        assert counter.frame_count == 1    # read through its source
        m[79].bias = nn.Parameter(torch.randn(4).to(torch.float64))
        with pytest.raises(RuntimeError):
            c(x)                           # recompiled: eager raises too (dtype mismatch)
    assert counter.frame_count == 2


def _mul2(x):
    return x * 2


def _h_is(a, b):
    if a is b:
        return a * 3
    return a + b


def test_tensor_guards_batch_sees_dispatch_keys():
    # the first hit builds the entry's TensorGuards; a conjugate view differs from the traced
    # tensor only in its dispatch keys, which the batch checks (as torch._dynamo)
    compiled = cdynamo.compile(_mul2, backend="eager")
    c = torch.randn(3, dtype=torch.complex64)
    for _ in range(3):
        assert torch.equal(compiled(c), _mul2(c))
    assert len(cdynamo.cache_entries(_mul2)) == 1
    d = c.conj()
    assert torch.equal(compiled(d), _mul2(d))
    entries = cdynamo.cache_entries(_mul2)
    assert len(entries) == 2
    assert "dispatch key" in entries[0].recompile_reason
    assert torch.equal(compiled(c), _mul2(c))     # the first entry still serves c
    assert len(cdynamo.cache_entries(_mul2)) == 2


def test_tensor_guards_batch_implies_no_aliasing():
    # after the batch is built, NO_TENSOR_ALIASING is answered by it: h(x, x) still misses
    compiled = cdynamo.compile(_h_is, backend="eager")
    x, y = torch.ones(3), torch.zeros(3)
    for _ in range(3):
        assert torch.equal(compiled(x, y), _h_is(x, y))
    assert torch.equal(compiled(x, x), _h_is(x, x))
    assert len(cdynamo.cache_entries(_h_is)) == 2
    for _ in range(3):
        assert torch.equal(compiled(y, x), _h_is(y, x))
        assert torch.equal(compiled(y, y), _h_is(y, y))
    assert len(cdynamo.cache_entries(_h_is)) == 2


def test_tensor_guards_batch_sees_each_property():
    compiled = cdynamo.compile(_mul2, backend="eager")
    x = torch.randn(2, 3)
    for _ in range(3):
        compiled(x)
    changed = [torch.randn(2, 4), torch.randn(3, 2).t(), x.double(), x.clone().requires_grad_(),
               torch.nn.Parameter(x.clone())]
    for i, t in enumerate(changed):
        assert torch.equal(compiled(t), _mul2(t))
        assert len(cdynamo.cache_entries(_mul2)) == i + 2
    assert torch.equal(compiled(x), _mul2(x))
    assert len(cdynamo.cache_entries(_mul2)) == len(changed) + 1


_IMPORTS_SCRIPT = r"""
import sys, torch, cdynamo
def six(a, b, c, d, e, f):
    return a * 2 + b + c + d + e + f
compiled = cdynamo.compile(six, backend="eager")
xs = [torch.randn(3) for _ in range(6)]
assert torch.equal(compiled(*xs), six(*xs))          # the trace
before = set(sys.modules)
for _ in range(3):                                    # cache hits: the guard tree is built
    assert torch.equal(compiled(*xs), six(*xs))
ys = xs[:5] + [xs[5].double()]
assert torch.equal(compiled(*ys), six(*ys))
assert len(cdynamo.cache_entries(six)) == 2
print(sorted(set(sys.modules) - before))
"""


def test_guard_tree_costs_no_import_at_a_cache_hit():
    # torch's guard tree (from four tensor inputs on) needs torch._dynamo.guards, which the
    # trace has loaded already (the engine never builds the tree before it is loaded): the
    # first cache hit imports nothing
    import subprocess
    r = subprocess.run([sys.executable, "-c", _IMPORTS_SCRIPT], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]"


def _six(a, b, c, d, e, f):
    if a is f:
        return a * 3 + b + c + d + e
    return a * 2 + b + c + d + e + f


@pytest.mark.parametrize("pos", [1, 5])
def test_tensor_match_tree_of_many_inputs_sees_each_property(pos):
    # the batched tensors are checked through cdynamo._tensor_meta; without it (the
    # CDYNAMO_TENSOR_META=0 run of test_tensor_meta.py), from four tensor inputs on, by
    # torch's guard tree (RootGuardManager) once torch._dynamo is loaded (here by conftest):
    # every property of an input still recompiles, and the old entry serves the old inputs
    # (static shapes: a size change is one more entry)
    assert "torch._dynamo.guards" in sys.modules
    compiled = cdynamo.compile(_six, backend="eager", dynamic=False)
    xs = [torch.randn(2, 3) for _ in range(6)]
    for _ in range(3):
        assert torch.equal(compiled(*xs), _six(*xs))
    x = xs[pos]
    changed = [torch.randn(1, 3), torch.randn(3, 2).t(), x.double(),
               x.clone().requires_grad_(), torch.nn.Parameter(x.clone())]
    for i, t in enumerate(changed):
        args = xs[:pos] + [t] + xs[pos + 1:]
        assert torch.equal(compiled(*args), _six(*args))
        assert len(cdynamo.cache_entries(_six)) == i + 2
    assert torch.equal(compiled(*xs), _six(*xs))
    assert len(cdynamo.cache_entries(_six)) == len(changed) + 1


def test_tensor_match_tree_of_many_inputs_sees_dispatch_keys_and_aliasing():
    compiled = cdynamo.compile(_six, backend="eager")
    xs = [torch.randn(3, dtype=torch.complex64) for _ in range(6)]
    for _ in range(3):
        assert torch.equal(compiled(*xs), _six(*xs))
    conj = xs[:4] + [xs[4].conj()] + xs[5:]
    assert torch.equal(compiled(*conj), _six(*conj))
    entries = cdynamo.cache_entries(_six)
    assert len(entries) == 2 and "dispatch key" in entries[0].recompile_reason
    same = xs[:5] + [xs[0]]                          # a is f: the other branch
    assert torch.equal(compiled(*same), _six(*same))
    assert len(cdynamo.cache_entries(_six)) == 3
    pair = [xs[0], xs[1], xs[1]] + xs[3:]            # b is c: aliasing the trace did not have
    assert torch.equal(compiled(*pair), _six(*pair))
    assert len(cdynamo.cache_entries(_six)) == 4
    for _ in range(2):
        assert torch.equal(compiled(*xs), _six(*xs))
        assert torch.equal(compiled(*same), _six(*same))
    assert len(cdynamo.cache_entries(_six)) == 4


def test_tensor_match_tree_sees_autocast():
    compiled = cdynamo.compile(_six, backend="eager")
    xs = [torch.randn(4, 4) for _ in range(6)]
    for _ in range(3):
        compiled(*xs)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = compiled(*xs)
        ref = _six(*xs)
    assert out.dtype == ref.dtype and torch.equal(out, ref)
    assert len(cdynamo.cache_entries(_six)) == 2


class _Registry(dict):
    def get(self, key):
        lookup = super().get      # a builtin method made anew by each call
        cdynamo.graph_break()     # ... reaching the resume function as a local
        return lookup(key) or 0


_REGISTRY = _Registry(a=5)


def _uses_registry(x):
    return x + _REGISTRY.get("a")


def test_bound_builtin_method_reaching_a_resume_function_hits_the_cache():
    # guarded by == (same self, same C function): an `is` guard missed on every call and
    # recompiled up to the cache size limit
    compiled = cdynamo.compile(_uses_registry, backend="eager")
    x = torch.ones(2)
    compiled(x)
    compiled(x)
    cdynamo.reset_counters()
    for _ in range(5):
        assert torch.equal(compiled(x), _uses_registry(x))
    assert cdynamo.counters()["compiles"] == 0
    assert cdynamo.counters()["cache_limit_hits"] == 0
