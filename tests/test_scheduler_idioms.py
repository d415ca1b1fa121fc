"""Idioms of training loops and diffusion schedulers (torch.optim with an LR scheduler, a
scalar conversion of a timestep tensor), each compared with eager and with torch._dynamo's
graph and op counts on the same function."""
import pytest
import torch

import cdynamo
from helpers import CountingBackend, assert_same


def _adamw_lambda_lr():
    """A fresh AdamW + LambdaLR (warmup then cosine) step function with fixed gradients."""
    import math
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)

    def lr_lambda(step, warmup=2, total=10):
        if step < warmup:
            return float(step + 1) / float(max(1, warmup))
        progress = float(step - warmup) / float(max(1, total - warmup))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    grads = [torch.randn_like(p) for p in model.parameters()]

    def fn():
        for p, g in zip(model.parameters(), grads):
            p.grad = g.clone()
        opt.step()
        sched.step()
        opt.zero_grad()
        return [p.detach().clone() for p in model.parameters()], sched.get_last_lr()
    return fn


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_lr_scheduler_step_is_not_traced(backend):
    """torch.optim.lr_scheduler runs unmodified (torch._dynamo force-skips the file): traced,
    LambdaLR.step's arithmetic on its epoch counter became a graph of symbolic-number
    operations once the counter was dynamic, one more graph than torch._dynamo's (5 with
    eager, 6 with aot_eager, where torch._dynamo has 4)."""
    from torch._dynamo.backends.registry import lookup_backend
    inner = None if backend == "eager" else lookup_backend(backend)
    eager = _adamw_lambda_lr()
    want = [eager() for _ in range(3)]
    counters = []
    for comp, reset in ((cdynamo.compile, cdynamo.reset), (torch.compile, torch._dynamo.reset)):
        reset()
        counter = CountingBackend(inner)
        c = comp(_adamw_lambda_lr(), backend=counter)
        for i, w in enumerate(want):
            assert_same(c(), w, f"call {i}", exact=False)
        counters.append(counter)
        reset()
    ours, theirs = counters
    for gm in ours.graphs:
        ops = [n for n in gm.graph.nodes if n.op.startswith("call")]
        assert any(isinstance(n.meta.get("example_value"), torch.Tensor) for n in ops), \
            f"a graph without tensor operations: {gm.code}"
    assert ours.frame_count == 4
    assert ours.frame_count <= theirs.frame_count
    assert ours.op_count >= theirs.op_count
