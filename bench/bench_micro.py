"""Compile-time micro-benchmarks in the spirit of PyTorch's pr_time_benchmarks (add_loop,
ListOfLinears, NestedModule, InlineMod, symint_sum), cdynamo vs torch._dynamo, counted in
instructions with valgrind's callgrind (not a timed test; instruction counts do not move with
the machine's load as times do).

Each engine runs in its own process under `valgrind --tool=callgrind --collect-atstart=no`;
for each benchmark the process first compiles and runs it once outside the count (imports,
caches of torch), resets the engine, then counts the instructions of one compile and first
call with backend "eager" (the front end: tracing, guards, code generation; the backend
does no work), toggled with torch._C._valgrind_toggle_and_dump_stats. Prints the
instructions per engine and the ratio cdynamo / torch._dynamo. Needs valgrind on PATH (the
benchmark says so and stops otherwise); takes a few minutes.
Usage: python bench/bench_micro.py [name ...]
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn


def add_loop(x):
    for _ in range(100):
        x = x + 1
    return x


class ListOfLinears(nn.Module):
    def __init__(self):
        super().__init__()
        self.linears = nn.ModuleList([nn.Linear(4, 4) for _ in range(20)])

    def forward(self, x):
        for lin in self.linears:
            x = lin(x)
        return x


class _Leaf(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.lin(x))


class _Mid(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = _Leaf(), _Leaf()

    def forward(self, x):
        return self.b(self.a(x)) + x


class NestedModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.mids = nn.ModuleList([_Mid() for _ in range(5)])

    def forward(self, x):
        for m in self.mids:
            x = m(x)
        return x


def _scale(x, k):
    return x * k


def _shift(x, k):
    return _scale(x, 2) + k


def inline_mod(x):
    for k in range(30):
        x = _shift(x, k)
    return x


def symint_sum(x):
    s = 0
    for i in range(50):
        s = s + x.size(0) * i
    return x.sum() + s


BENCHES = {
    "add_loop": (lambda: add_loop, lambda: (torch.randn(4),), False),
    "ListOfLinears": (ListOfLinears, lambda: (torch.randn(2, 4),), False),
    "NestedModule": (NestedModule, lambda: (torch.randn(2, 4),), False),
    "InlineMod": (lambda: inline_mod, lambda: (torch.randn(4),), False),
    "symint_sum": (lambda: symint_sum, lambda: (torch.randn(6, 3),), True),
}


def _child(engine, names):
    """Runs under callgrind: one counted compile + first call per benchmark."""
    import torch._dynamo
    if engine == "cdynamo":
        import cdynamo
        compile_fn, reset = cdynamo.compile, cdynamo.reset
    else:
        compile_fn, reset = torch.compile, torch._dynamo.reset
    for name in names:
        make, inputs, dynamic = BENCHES[name]
        fn = make()
        compile_fn(fn, backend="eager", dynamic=dynamic)(*inputs())   # warm-up, not counted
        reset()
        fn = make()
        args = inputs()
        torch._C._valgrind_toggle_and_dump_stats()   # on (dumps what came before)
        compile_fn(fn, backend="eager", dynamic=dynamic)(*args)
        torch._C._valgrind_toggle_and_dump_stats()   # off: this dump is the benchmark
        reset()


def _instructions(path):
    with open(path) as f:
        for line in f:
            m = re.match(r"(?:summary|totals):\s*(\d+)", line)
            if m:
                return int(m.group(1))
    return 0


def _run(engine, names):
    out = tempfile.mkdtemp(prefix=f"callgrind-{engine}-")
    cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--instr-atstart=yes",
           f"--callgrind-out-file={out}/cg.out", sys.executable, os.path.abspath(__file__),
           "--child", engine, *names]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    numbered = sorted((p for p in glob.glob(f"{out}/cg.out.*") if p.rsplit(".", 1)[1].isdigit()),
                      key=lambda p: int(p.rsplit(".", 1)[1]))
    counts = [_instructions(p) for p in numbered]
    shutil.rmtree(out, ignore_errors=True)
    # two dumps per benchmark: at the toggle on (nothing collected), at the toggle off (it)
    bench = counts[1::2]
    if len(bench) != len(names):
        raise RuntimeError(f"callgrind gave {len(bench)} counts for {len(names)} benchmarks")
    return bench


def main():
    names = [a for a in sys.argv[1:]] or list(BENCHES)
    if shutil.which("valgrind") is None:
        print("bench_micro: valgrind is not on PATH (apt-get install valgrind); skipped")
        return
    res = {e: _run(e, names) for e in ("cdynamo", "torch._dynamo")}
    print(f"{'benchmark':14} {'cdynamo Ir':>14} {'torch._dynamo Ir':>17} {'ratio':>7}")
    for i, name in enumerate(names):
        c, t = res["cdynamo"][i], res["torch._dynamo"][i]
        print(f"{name:14} {c:14,d} {t:17,d} {c / t:7.3f}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3:])
    else:
        main()
