"""Runtime (hook, cache, guards, wrapper) behaviour of cdynamo's C engine, through the public
API. Written against behaviour, not translator internals: any translator that compiles
`x + 1` / `x * 2` into one entry per (dtype, shape) satisfies them."""
import functools
import sys
import threading
import traceback
import tracemalloc

import pytest
import torch

import cdynamo

_C = pytest.importorskip("cdynamo._C")


@pytest.fixture(autouse=True)
def _clean():
    limit = _C.get_cache_size_limit()
    cdynamo.reset()
    cdynamo.reset_counters()
    yield
    _C.set_cache_size_limit(limit)
    cdynamo.reset()
    assert not _C.hook_installed()
    assert _C.thread_state() == (0, 0)


def add1(x):
    return x + 1


def test_hit_then_recompile_on_dtype_and_shape():
    f = cdynamo.compile(add1, backend="eager")
    t = torch.ones(3)
    assert torch.equal(f(t), t + 1)
    c = _C.counters()
    assert c["compiles"] == 1 and c["cache_misses"] == 1
    assert torch.equal(f(t), t + 1)
    assert _C.counters()["cache_hits"] == 1
    f(torch.ones(3, dtype=torch.float64))
    f(torch.ones(5))
    assert _C.counters()["compiles"] == 3
    entries = _C.cache_entries(add1.__code__)
    assert len(entries) == 3
    assert any("TENSOR_MATCH" in g for g in entries[0][0])
    # a hit moves its entry to the front
    f(torch.ones(3, dtype=torch.float64))
    assert _C.cache_entries(add1.__code__)[0][1] is entries[1][1]


def test_cache_size_limit_runs_unmodified():
    _C.set_cache_size_limit(2)
    # static shapes: each size is a new entry (with automatic dynamic shapes the second
    # size would make one entry serve them all)
    f = cdynamo.compile(add1, backend="eager", dynamic=False)
    for n in range(1, 6):
        assert torch.equal(f(torch.ones(n)), torch.ones(n) + 1)
    c = _C.counters()
    assert c["compiles"] == 2 and c["cache_limit_hits"] == 3, c
    f(torch.ones(1))
    assert _C.counters()["cache_hits"] >= 1


def test_exception_passes_through_with_traceback():
    def boom(x):
        raise ValueError(f"bad {x.shape[0]}")

    f = cdynamo.compile(boom, backend="eager")
    for _ in range(2):
        with pytest.raises(ValueError, match="bad 3") as ei:
            f(torch.ones(3))
        names = [fr.name for fr in traceback.extract_tb(ei.value.__traceback__)]
        assert "boom" in names
    assert _C.thread_state() == (0, 0)


def test_threads_share_one_compiled_function():
    f = cdynamo.compile(add1, backend="eager")
    t = torch.ones(4)
    f(t)
    errors = []

    def run():
        try:
            for _ in range(500):
                assert torch.equal(f(t), t + 1)
            assert _C.thread_state() == (0, 0)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert _C.counters()["compiles"] == 1
    assert not _C.hook_installed()


_seen_depth = []


def _inner(x):
    return x * 2


def _plain(x):
    return x - 1


def test_nested_compiled_and_disable():
    finner = cdynamo.compile(_inner, backend="eager")
    globals()["_finner"] = finner

    def outer(x):
        _seen_depth.append(_C.thread_state()[0])
        return _finner(x) + 1

    fouter = cdynamo.compile(outer, backend="eager")
    assert torch.equal(fouter(torch.ones(2)), torch.ones(2) * 2 + 1)
    assert _seen_depth and _seen_depth[-1] == 1
    # a compiled function called from traced code is inlined there (as torch._dynamo
    # ignores a nested torch.compile wrapper): _inner gets no cache entry of its own
    assert _C.cache_entries(_inner.__code__) == []
    assert torch.equal(finner(torch.ones(2)), torch.ones(2) * 2)   # called alone: compiled
    assert _C.cache_entries(_inner.__code__)

    globals()["_d"] = _C.disable(_plain)

    def calls_disabled(x):
        return _d(x) * 3

    f = cdynamo.compile(calls_disabled, backend="eager")
    assert torch.equal(f(torch.ones(2)), torch.zeros(2))
    assert _C.cache_entries(_plain.__code__) == []


def test_wrapper_metadata_and_method_binding():
    class M:
        def __init__(self):
            self.k = 3

        def f(self, x):
            return x + self.k

    M.g = cdynamo.compile(M.f, backend="eager")
    m = M()
    assert torch.equal(m.g(torch.ones(2)), torch.ones(2) + 3)
    assert M.g.__name__ == "f"
    w = _C.wrap(M.f, None)
    functools.update_wrapper(w, M.f)
    assert w.__wrapped__ is M.f and w._cdynamo_orig_callable is M.f


def test_no_reference_leaks_on_hits():
    f = cdynamo.compile(add1, backend="eager")
    t = torch.ones(3)
    f(t)
    before = sys.getrefcount(t)
    for _ in range(20000):
        f(t)
    assert sys.getrefcount(t) == before
    tracemalloc.start()
    for _ in range(5000):
        f(t)
    s1 = tracemalloc.take_snapshot()
    for _ in range(20000):
        f(t)
    s2 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    growth = sum(st.size_diff for st in s2.compare_to(s1, "filename"))
    assert growth < 20000, growth


def test_reset_from_inside_a_compiled_call():
    def g(x):
        cdynamo.reset()
        return x + 1

    f = cdynamo.compile(g, backend="eager")
    assert f(1) == 2 and f(1) == 2


def _make_scaled(k):
    def scaled(x):
        return x * k + torch.ones(1)
    return scaled


class _ResetWhenCollected:
    """Garbage that only the cyclic GC frees; its finalizer clears the engine's caches."""

    def __init__(self):
        self.me = self

    def __del__(self):
        _C.reset()


def test_reset_by_a_finalizer_while_the_entry_builds_its_function():
    """A hit on a new closure builds a new function for the entry (PyFunction_New); that
    allocation can run the GC, whose finalizers may free the entry (a reset here, another
    thread's reset in general). The entry must not be written or read after that (it was: a
    use-after-free and a second DECREF of the entry's old function; found by make test-asan)."""
    import gc
    f = cdynamo.compile(_make_scaled(2), backend="eager")
    assert torch.equal(f(3), torch.full((1,), 7.0))          # compile
    old = gc.get_threshold()
    freed = 0
    try:
        for _ in range(10):
            f = cdynamo.compile(_make_scaled(2), backend="eager")  # new closure: a hit, new function
            entries_before = _C.live_counts()["cache_entries"]
            gc.collect()
            _ResetWhenCollected()
            gc.set_threshold(1)            # the next GC allocation collects: PyFunction_New's
            out = f(3)
            gc.set_threshold(*old)
            assert torch.equal(out, torch.full((1,), 7.0))
            freed += entries_before - _C.live_counts()["cache_entries"]
            f(3)                           # recompiles after the reset
    finally:
        gc.set_threshold(*old)
    assert freed > 0, "the finalizer never ran during the call: the test did not test anything"
    assert _C.live_counts()["values"] == 0


class _CfgResettingOnRead:
    """A config object whose attribute is computed by __getattr__ (Python code that the
    guard on it runs; a property would be inlined instead); reading it while armed clears
    the engine's caches (as another thread's reset() can, at any Python code a guard runs)."""

    armed = False

    def __getattr__(self, name):
        if name != "scale":
            raise AttributeError(name)
        if _CfgResettingOnRead.armed:
            _CfgResettingOnRead.armed = False
            _C.reset()
        return 2.0


def _scale_by_cfg(cfg, x):
    return x * cfg.scale


def test_reset_by_python_code_inside_a_guard_check():
    """The guard on `cfg.scale` runs __getattr__; the set being checked was freed under the
    check, which went on reading it (a use-after-free, found by make test-asan). The check
    now holds the set until it returns, and the call runs unmodified."""
    f = cdynamo.compile(_scale_by_cfg, backend="eager")
    cfg, x = _CfgResettingOnRead(), torch.ones(3)
    assert torch.equal(f(cfg, x), x * 2)                 # compile: the guard reads cfg.scale
    assert any("scale" in g for g in cdynamo.cache_entries(_scale_by_cfg)[0].guards)
    for _ in range(3):
        _CfgResettingOnRead.armed = True
        assert torch.equal(f(cfg, x), x * 2)
        assert not _CfgResettingOnRead.armed, "the guard did not read the property"
        assert torch.equal(f(cfg, x), x * 2)             # compiles again after the reset
    assert _C.live_counts()["values"] == 0
    cdynamo.reset()
    assert _C.live_counts() == {"values": 0, "guard_sets": 0, "cache_entries": 0}
