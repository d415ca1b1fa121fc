"""A layer loop with a graph break in every iteration: cdynamo vs torch._dynamo (not a timed
test).

The model (12 pre-norm MLP blocks in an nn.ModuleList) checks a data-dependent condition
after every block, so each iteration has a graph break. torch._dynamo runs such a frame
unmodified ("graph break in a for/while loop") and compiles only the blocks it calls;
cdynamo breaks inside the loop and compiles the loop body between the breaks too.

Prints, per backend: graphs compiled by each engine, and the steady-state time per call of
eager, cdynamo and torch.compile (minimum over ROUNDS rounds of CALLS calls, interleaved), in
microseconds, with the ratio cdynamo / torch._dynamo (lower is better). One thread.
"""
import os
import sys
import time

import torch
import torch._dynamo
import torch.nn as nn

import cdynamo

ROUNDS = int(os.environ.get("BENCH_ROUNDS", 7))
CALLS = int(os.environ.get("BENCH_CALLS", 100))


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln(x))))


class CheckedStack(nn.Module):
    """Blocks with a data-dependent check after each (a graph break per iteration)."""

    def __init__(self, n=12, d=64):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d) for _ in range(n))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
            if x.abs().max() > 1e6:
                x = x / 2
        return x


class Counter:
    """A backend wrapper counting the graphs it is handed."""

    def __init__(self, backend):
        self.backend, self.graphs = backend, 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        if self.backend == "eager":
            return gm.forward
        from torch._inductor.compile_fx import compile_fx
        return compile_fx(gm, example_inputs)


def per_call_us(fns, x):
    """Minimum per-call time of each function over ROUNDS interleaved rounds."""
    best = [float("inf")] * len(fns)
    for _ in range(ROUNDS):
        for i, f in enumerate(fns):
            start = time.perf_counter()
            for _ in range(CALLS):
                f(x)
            best[i] = min(best[i], (time.perf_counter() - start) / CALLS * 1e6)
    return best


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model, x = CheckedStack().eval(), torch.randn(8, 64)
    print(f"{'backend':10s} {'graphs cd/dyn':>14s} {'eager us':>10s} {'cdynamo us':>11s} "
          f"{'dynamo us':>10s} {'ratio':>7s}")
    with torch.no_grad():
        expected = model(x)
        for backend in ("eager", "inductor"):
            cdynamo.reset()
            torch._dynamo.reset()
            cd_count, dyn_count = Counter(backend), Counter(backend)
            cd = cdynamo.compile(model, backend=cd_count)
            dyn = torch.compile(model, backend=dyn_count)
            for f in (cd, dyn):
                for _ in range(3):
                    out = f(x)
                if not torch.allclose(out, expected, atol=1e-5):
                    sys.exit(f"{backend}: results differ from eager")
            te, tc, td = per_call_us([model, cd, dyn], x)
            print(f"{backend:10s} {f'{cd_count.graphs}/{dyn_count.graphs}':>14s} {te:10.0f} "
                  f"{tc:11.0f} {td:10.0f} {tc / td:7.2f}")


if __name__ == "__main__":
    main()
