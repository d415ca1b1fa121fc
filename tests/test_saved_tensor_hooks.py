"""torch.autograd.graph.saved_tensors_hooks around a compiled call: the pack hook runs once
per saved tensor when the compiled graph runs and never on the fake tensors of the trace,
the unpack hook once in backward (as eager, and torch._dynamo; PyTorch's
test_unpack_hooks_dont_run_during_tracing)."""
import pytest
import torch
import torch._dynamo

import cdynamo
from conftest import requires_engine

pytestmark = requires_engine


def _counts(compile_fn, backend):
    def f(x, y):
        return x * y

    fc = compile_fn(f, backend)
    counts = [0, 0]

    def pack_hook(t):
        counts[0] += 1
        return t

    def unpack_hook(t):
        counts[1] += 1
        return t

    x = torch.ones(4, requires_grad=True)
    y = torch.ones(4)
    seen = []
    for _ in range(2):
        with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
            out = fc(x, y)
            seen.append(tuple(counts))
            out.sum().backward()
            seen.append(tuple(counts))
    return seen, x.grad


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_pack_hook_runs_once_per_call_as_eager_and_dynamo(backend):
    eager, eager_grad = _counts(lambda f, be: f, backend)
    ours, our_grad = _counts(lambda f, be: cdynamo.compile(f, backend=be), backend)
    torch._dynamo.reset()
    theirs, _ = _counts(lambda f, be: torch.compile(f, backend=be), backend)
    assert eager == [(1, 0), (1, 1), (2, 1), (2, 2)]
    assert ours == eager == theirs
    assert torch.equal(our_grad, eager_grad)


def test_hooks_outside_a_trace_are_left_as_they_were():
    # the trace marks the hooks as tracing and restores the mark, also when it breaks
    def f(x):
        y = x * 2
        print("break")
        return y.sin()

    fc = cdynamo.compile(f, backend="aot_eager")
    counts = [0]

    def pack_hook(t):
        counts[0] += 1
        return t

    x = torch.ones(3, requires_grad=True)
    fc(x)
    with torch.autograd.graph.saved_tensors_hooks(pack_hook, lambda t: t):
        (x * x).sum()
    assert counts[0] == 2
