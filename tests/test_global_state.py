"""Global torch state a graph depends on (as torch._dynamo's GlobalStateGuard): deterministic
algorithms, cuBLAS TF32, the default dtype and the thread count are guarded, so a graph
traced under one setting is not reused under another. Counts are compared with
torch._dynamo's on the same function."""
import pytest
import torch
import torch._dynamo

import cdynamo
from cdynamo import _glue
from conftest import requires_engine
from helpers import CountingBackend

pytestmark = requires_engine


def _read_state():
    return [torch.is_grad_enabled(), torch.are_deterministic_algorithms_enabled(),
            torch._C._get_cublas_allow_tf32()]


def _write_state(state):
    torch.set_grad_enabled(state[0])
    torch.use_deterministic_algorithms(state[1])
    torch._C._set_cublas_allow_tf32(state[2])


def _run_state_rounds(compile_fn):
    """PyTorch's test_recompile_on_global_state_change, for either engine: the backend
    records the state at compile time, the compiled function must run the graph compiled
    under the state of the call. Returns the compile count."""
    last_state, cnt = [], [0]

    def my_compiler(gm, _):
        cnt[0] += 1
        state = _read_state()

        def inner(*args):
            last_state[:] = state
            return gm(*args)
        return inner

    def fn(x):
        return x + 1

    cfn = compile_fn(fn, my_compiler)
    initial = _read_state()
    y = torch.randn(10)
    try:
        for rnd in range(3):
            for i in range(len(initial)):
                new_state = [False] * len(initial)
                new_state[i] = True
                _write_state(new_state)
                last_state.clear()
                assert torch.equal(cfn(y), y + 1)
                assert last_state == new_state, (rnd, i, last_state)
                if rnd == 0:
                    assert cnt[0] == i + 1
                else:
                    assert cnt[0] == len(initial)
    finally:
        _write_state(initial)
    return cnt[0]


def test_recompile_on_global_state_change_as_dynamo():
    ours = _run_state_rounds(lambda fn, be: cdynamo.compile(fn, backend=be))
    torch._dynamo.reset()
    theirs = _run_state_rounds(lambda fn, be: torch.compile(fn, backend=be))
    assert ours == theirs == 3


def test_deterministic_change_names_the_state_in_the_recompile_reason():
    def fn(x):
        return x * 2
    counter = CountingBackend()
    f = cdynamo.compile(fn, backend=counter)
    x = torch.randn(4)
    f(x)
    before = len(_glue.recompile_log)
    torch.use_deterministic_algorithms(True)
    try:
        f(x)
        f(x)
    finally:
        torch.use_deterministic_algorithms(False)
    f(x)
    assert counter.frame_count == 2
    reasons = [r.reason for r in _glue.recompile_log[before:]]
    assert any("deterministic_algorithms" in r for r in reasons), reasons


def test_default_dtype_change_recompiles_and_gives_eager_dtype():
    def fn(x):
        return torch.ones(3) + x

    counter = CountingBackend()
    f = cdynamo.compile(fn, backend=counter)
    x = torch.zeros(3, dtype=torch.float64)
    assert f(x).dtype == torch.float64
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        # torch.ones(3) is float64 now, so is the sum: the same as eager
        out = f(x.float())
        assert out.dtype == fn(x.float()).dtype == torch.float64
    finally:
        torch.set_default_dtype(old)
    assert f(x.float()).dtype == torch.float32
    assert counter.frame_count == 3


def test_num_threads_change_recompiles_once():
    def fn(x):
        return x.sin()

    counter = CountingBackend()
    f = cdynamo.compile(fn, backend=counter)
    x = torch.randn(4)
    f(x)
    old = torch.get_num_threads()
    torch.set_num_threads(old + 1)
    try:
        f(x)
        f(x)
    finally:
        torch.set_num_threads(old)
    f(x)
    assert counter.frame_count == 2


def test_unchanged_state_hits_the_cache():
    counter = CountingBackend()
    f = cdynamo.compile(lambda x: x - 1, backend=counter)
    x = torch.randn(4)
    for _ in range(5):
        f(x)
    assert counter.frame_count == 1


def _det_state():
    return (torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled())


def _run_deterministic_mutated(compile_fn):
    """PyTorch's test_deterministic_algorithms_mutated, for either engine: the graph sees
    the state of the call before it, the call leaves the state the program set, and the
    next call (same entry state) hits the cache. Returns (seen, after, graphs)."""
    prior = _det_state()
    seen = []

    @torch._dynamo.allow_in_graph
    def check_state():
        seen.append(_det_state())

    def fn(x):
        check_state()
        torch.use_deterministic_algorithms(False, warn_only=False)
        return x + 1

    counter = CountingBackend()
    f = compile_fn(fn, counter)
    after = []
    try:
        for _ in range(2):
            torch.use_deterministic_algorithms(True, warn_only=True)
            assert torch.equal(f(torch.ones(3)), torch.full((3,), 2.0))
            after.append(_det_state())
    finally:
        torch.use_deterministic_algorithms(prior[0], warn_only=prior[1])
    return seen, after, counter.frame_count


def test_use_deterministic_algorithms_in_compiled_code():
    # was a break (use_deterministic_algorithms: trace rule "skip"); now a
    # _set_deterministic_algorithms node, as torch._dynamo records it
    ours = _run_deterministic_mutated(
        lambda fn, be: cdynamo.compile(fn, backend=be, fullgraph=True))
    cdynamo.reset()
    theirs = _run_deterministic_mutated(
        lambda fn, be: torch.compile(fn, backend=be, fullgraph=True))
    torch._dynamo.reset()
    # (torch._dynamo also runs check_state once at trace time)
    assert set(ours[0]) == set(theirs[0]) == {(True, True)}
    assert ours[1:] == theirs[1:] == ([(False, False)] * 2, 1)


def test_use_deterministic_algorithms_then_break_keeps_the_state():
    # a break after the call: the graph before it set the state, the rest runs under it
    prior = _det_state()

    def fn(x):
        torch.use_deterministic_algorithms(True)
        torch._dynamo.graph_break()
        return x + 1, torch.are_deterministic_algorithms_enabled()

    try:
        torch.use_deterministic_algorithms(False)
        out = cdynamo.compile(fn, backend="eager")(torch.ones(2))
        assert out[1] is True and _det_state() == (True, False)
        torch.use_deterministic_algorithms(False)
        with pytest.raises(Exception, match="use_deterministic_algorithms"):
            cdynamo.reset()
            cdynamo.compile(lambda x, m: torch.use_deterministic_algorithms(m) or x,
                            backend="eager", fullgraph=True)(torch.ones(1), torch.ones(1))
        assert _det_state() == (False, False)
    finally:
        torch.use_deterministic_algorithms(prior[0], warn_only=prior[1])
