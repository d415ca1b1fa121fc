"""The per-call fast paths (issue 9, point 7) keep every guard they skip implied elsewhere.

- A compiled plain function called with positional arguments only checks its most recent
  cache entry on the arguments directly (hook.c, direct_call) instead of building the
  original frame: grad mode, autocast, dtype, shape, closure and global changes must still
  miss and recompile, and calls the fast path does not take (keywords, defaults, *args)
  must behave as before.
- A HASATTR present guard is skipped on the fast path when another guard reads the same
  attribute (guards.c, mark_implied): removing the attribute must still fail the check.
"""
import torch

import cdynamo
from helpers import CountingBackend


def _compiled(fn):
    cdynamo.reset()
    counter = CountingBackend()
    return cdynamo.compile(fn, backend=counter), counter


def add_one(x):
    return x + 1


def test_direct_path_counts_hits():
    f, counter = _compiled(add_one)
    x = torch.randn(4)
    cdynamo.reset_counters()
    for _ in range(5):
        assert torch.equal(f(x), x + 1)
    c = cdynamo.counters()
    assert counter.frame_count == 1
    assert c["compiles"] == 1 and c["cache_hits"] == 4 and c["frames"] == 5


def test_direct_path_grad_mode_change_recompiles():
    f, counter = _compiled(add_one)
    x = torch.randn(4, requires_grad=True)
    assert f(x).requires_grad
    assert f(x).requires_grad
    with torch.no_grad():
        assert not f(x).requires_grad
        assert not f(x).requires_grad
    assert f(x).requires_grad
    assert counter.frame_count == 2


def mm(a, b):
    return a @ b


def test_direct_path_autocast_change_recompiles():
    f, counter = _compiled(mm)
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    assert f(a, b).dtype == torch.float32
    assert f(a, b).dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = mm(a, b)
        assert expected.dtype == torch.bfloat16
        assert f(a, b).dtype == torch.bfloat16
        assert f(a, b).dtype == torch.bfloat16
    assert f(a, b).dtype == torch.float32
    assert counter.frame_count == 2


def test_direct_path_dtype_and_shape_changes_recompile():
    cdynamo.reset()
    counter = CountingBackend()
    f = cdynamo.compile(add_one, backend=counter, dynamic=False)
    for x in (torch.randn(4), torch.randn(4), torch.randn(4, dtype=torch.float64),
              torch.randn(5), torch.randn(4)):
        out = f(x)
        assert out.dtype == x.dtype and torch.equal(out, x + 1)
    assert counter.frame_count == 3


def test_direct_path_closure_and_global_changes():
    def make(k):
        def g(x):
            return x * k + OFFSET
        return g

    global OFFSET
    OFFSET = 1.0
    g2, g3 = make(2.0), make(3.0)
    cdynamo.reset()
    counter = CountingBackend()
    f2 = cdynamo.compile(g2, backend=counter)
    f3 = cdynamo.compile(g3, backend=counter)
    x = torch.randn(3)
    assert torch.equal(f2(x), x * 2.0 + 1.0)
    assert torch.equal(f2(x), x * 2.0 + 1.0)
    assert torch.equal(f3(x), x * 3.0 + 1.0)    # same code, another closure: a miss
    OFFSET = 5.0
    assert torch.equal(f2(x), x * 2.0 + 5.0)    # a global changed: a miss
    assert torch.equal(f3(x), x * 3.0 + 5.0)
    # the closure's float becomes a dynamic input at its first change (3 graphs, as
    # torch._dynamo: g3's miss compiles an entry symbolic in k that serves both closures,
    # the global's change one more)
    assert counter.frame_count == 3


def with_default(x, k=2):
    return x * k


def varargs(*xs):
    return xs[0] + xs[1]


def test_calls_outside_the_direct_path():
    cdynamo.reset()
    counter = CountingBackend()
    f = cdynamo.compile(with_default, backend=counter)
    v = cdynamo.compile(varargs, backend=counter)
    x = torch.randn(3)
    for _ in range(3):
        assert torch.equal(f(x), x * 2)
        assert torch.equal(f(x, 3), x * 3)
        assert torch.equal(f(x, k=4), x * 4)
        assert torch.equal(v(x, x), x + x)


def test_direct_path_under_torch_func_transforms_misses():
    # the functorch test of GRAD_MODE is implied by TensorGuards here (guards.c)
    f, counter = _compiled(add_one)
    x = torch.randn(3, 4)
    assert torch.equal(f(x), x + 1)
    assert torch.equal(f(x), x + 1)
    hits = cdynamo.counters()["cache_hits"]
    assert torch.equal(torch.func.vmap(f)(x), x + 1)
    assert torch.equal(torch.func.grad(lambda v: f(v).sum())(x[0]), torch.ones(4))
    # no entry compiled outside the transform may run on its wrapped tensors
    assert cdynamo.counters()["cache_hits"] == hits


class Holder:
    def __init__(self):
        self.scale = 3.0


def read_optional(h, x):
    s = getattr(h, "scale", None)
    if s is None:
        return x - 1
    return x * s


def test_hasattr_present_implied_by_the_read_still_fails_when_removed():
    f, counter = _compiled(read_optional)
    h, x = Holder(), torch.randn(3)
    assert torch.equal(f(h, x), x * 3.0)
    assert torch.equal(f(h, x), x * 3.0)
    guards = cdynamo.cache_entries(read_optional)[0].guards
    assert any("scale HASATTR present" in g for g in guards)
    del h.scale
    assert torch.equal(f(h, x), x - 1)
    assert torch.equal(f(h, x), x - 1)
    h.scale = 4.0
    assert torch.equal(f(h, x), x * 4.0)
    assert counter.frame_count == 3


class SlowAttrs:
    """An object whose attribute reads run Python code (as transformers' configs)."""

    def __init__(self):
        object.__setattr__(self, "store", {"flag": True})

    def __getattribute__(self, name):
        store = object.__getattribute__(self, "store")
        if name in store:
            return store[name]
        return object.__getattribute__(self, name)


def read_flag(c, x):
    if getattr(c, "flag", False):
        return x + 1
    return x - 1


def test_hasattr_implied_through_a_python_getattribute():
    f, counter = _compiled(read_flag)
    c, x = SlowAttrs(), torch.randn(3)
    assert torch.equal(f(c, x), x + 1)
    assert torch.equal(f(c, x), x + 1)
    del object.__getattribute__(c, "store")["flag"]
    assert torch.equal(f(c, x), x - 1)
    object.__getattribute__(c, "store")["flag"] = False
    assert torch.equal(f(c, x), x - 1)
