"""No leaks over many calls, inputs freed after the call, and thread safety."""
import gc
import os
import threading
import tracemalloc
import weakref

import torch

import cdynamo
from conftest import requires_engine

pytestmark = requires_engine


def add_one(x, y):
    return x + 1 + y


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_100k_calls_keep_memory_flat():
    f = cdynamo.compile(add_one, backend="eager")
    x, y = torch.randn(4), torch.randn(4)
    for _ in range(2000):  # warm-up: compile, allocator pools, interned objects
        f(x, y)
    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(1000):
            f(x, y)
        gc.collect()
        traced_before, _ = tracemalloc.get_traced_memory()
        rss_before = _rss_bytes()
        for _ in range(100_000):
            f(x, y)
        gc.collect()
        traced_after, _ = tracemalloc.get_traced_memory()
        rss_after = _rss_bytes()
    finally:
        tracemalloc.stop()
    # a leak of even one small object per call would be >= 3 MB here
    assert traced_after - traced_before < 256 * 1024, f"tracemalloc grew {traced_after - traced_before} B"
    assert rss_after - rss_before < 4 * 1024 * 1024, f"RSS grew {rss_after - rss_before} B"
    assert cdynamo.counters()["compiles"] >= 1


def test_inputs_freed_after_call():
    f = cdynamo.compile(add_one, backend="eager")
    y = torch.randn(8)
    f(torch.randn(8), y)  # compile first
    x = torch.randn(8)
    ref = weakref.ref(x)
    out = f(x, y)
    del x
    gc.collect()
    assert ref() is None, "the input tensor is still alive after the call"
    del out


def test_module_inputs_freed_after_call():
    mod = torch.nn.Linear(4, 4)
    f = cdynamo.compile(mod, backend="eager")
    f(torch.randn(2, 4))
    x = torch.randn(2, 4)
    ref = weakref.ref(x)
    out = f(x)
    del x, out
    gc.collect()
    assert ref() is None


def test_four_threads_get_eager_results():
    def fn(a, b):
        return torch.relu(a @ b) + a.sum()

    f = cdynamo.compile(fn, backend="eager")
    inputs = [(torch.randn(16, 16), torch.randn(16, 16)) for _ in range(4)]
    expected = [fn(a, b) for a, b in inputs]
    errors = []
    barrier = threading.Barrier(4)

    def worker(i):
        try:
            a, b = inputs[i]
            barrier.wait()
            for _ in range(300):
                out = f(a, b)
                if not torch.equal(out, expected[i]):
                    errors.append(f"thread {i}: wrong result")
                    return
        except Exception as e:  # reported below
            errors.append(f"thread {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert errors == []
    assert len(cdynamo.cache_entries(fn)) >= 1


def _breaking_for_leak_test(a, b):
    x = a * 2
    y = [x + i for i in range(3)]
    d = {"k": x}
    if x.sum() > 0:
        y.append(b)
    return y[0] + d["k"] + b


def test_compile_reset_cycles_do_not_leak():
    """Tracing, graph breaks, resume functions and reset(): 100 compile/reset cycles keep
    memory flat (graphs, fake tensors and installed globals are freed by reset())."""
    import gc
    import tracemalloc
    a, b = torch.randn(4).abs(), torch.randn(4)

    def cycles(n):
        for _ in range(n):
            cdynamo.reset()
            c = cdynamo.compile(_breaking_for_leak_test, backend="eager")
            assert torch.equal(c(a, b), _breaking_for_leak_test(a, b))
            c(a, b)

    cycles(20)
    gc.collect()
    tracemalloc.start()
    try:
        cycles(5)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        cycles(100)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        cdynamo.reset()
    # torch.fx keeps each generated forward's source in linecache (~1 KB per graph); a leaked
    # graph with its fake tensors costs tens of KB
    assert (after - before) / 100 < 8 * 1024, after - before
