"""Compiled DistributedDataParallel training step, cdynamo vs torch.compile (issue 27).

Two processes (gloo on 127.0.0.1, CPU) train DDP models with SGD: an 8-layer MLP and a small
decoder-style transformer, each in eager DDP and compiled by cdynamo and by torch.compile
with the same backend, with the graph split at DDP's buckets (optimize_ddp on, both
engines' default) and without it. Per configuration: a few warm-up steps (the compile), then
the median time of the timed steps (forward, backward with DDP's all-reduce, optimizer step),
as rank 0 measures it; the number of compiled graphs of each engine; and the ratio
cdynamo / torch.compile of the step times (below 1: cdynamo faster). Not a test.

Usage: python bench/bench_ddp.py [--backend aot_eager|inductor|eager] [--steps N]
                                 [--models mlp,transformer]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, width=512, depth=8):
        super().__init__()
        self.net = nn.Sequential(*[nn.Linear(width, width) for _ in range(depth)])

    def forward(self, x):
        for layer in self.net:
            x = torch.relu(layer(x))
        return x


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Transformer(nn.Module):
    def __init__(self, vocab=2048, d=256, heads=4, layers=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.emb(idx)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def make(model_name, rank):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(rank)
    if model_name == "mlp":
        model = MLP()
        x = torch.randn(64, 512, generator=g)
        y = torch.randn(64, 512, generator=g)
        return model, x, lambda out: F.mse_loss(out, y)
    model = Transformer()
    idx = torch.randint(0, 2048, (8, 64), generator=g)
    tgt = torch.randint(0, 2048, (8, 64), generator=g)
    return model, idx, lambda out: F.cross_entropy(out.flatten(0, 1), tgt.flatten())


class Counter:
    def __init__(self, backend):
        self.backend = backend
        self.count = 0

    def __call__(self, gm, example_inputs):
        self.count += 1
        from torch._dynamo.backends.registry import lookup_backend
        return lookup_backend(self.backend)(gm, example_inputs)


def run_config(model_name, engine, split, backend, steps, warmup, rank):
    import torch._dynamo
    from torch.nn.parallel import DistributedDataParallel as DDP

    import cdynamo
    import torch.distributed as dist
    cdynamo.reset()
    torch._dynamo.reset()
    model, x, loss_fn = make(model_name, rank)
    ddp = DDP(model, bucket_cap_mb=1)
    counter = Counter(backend)
    if engine == "cdynamo":
        run = cdynamo.compile(ddp, backend=counter)
    elif engine == "torch.compile":
        run = torch.compile(ddp, backend=counter)
    else:
        run = ddp
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    times = []
    with cdynamo.config.patch(optimize_ddp=split), \
            torch._dynamo.config.patch(optimize_ddp=split):
        for i in range(warmup + steps):
            dist.barrier()
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(run(x))
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t0)
    return {"median_ms": statistics.median(times[warmup:]) * 1e3,
            "first_ms": times[0] * 1e3, "graphs": counter.count, "loss": loss.item()}


def worker(rank, world, port, out, args):
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    results = []
    try:
        for model_name in args.models.split(","):
            results.append((model_name, "eager", True,
                            run_config(model_name, "eager", True, args.backend, args.steps,
                                       args.warmup, rank)))
            for split in (True, False):
                for engine in ("cdynamo", "torch.compile"):
                    r = run_config(model_name, engine, split, args.backend, args.steps,
                                   args.warmup, rank)
                    results.append((model_name, engine, split, r))
    finally:
        if rank == 0:
            with open(out, "w") as f:
                json.dump(results, f)
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="aot_eager")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--models", default="mlp,transformer")
    p.add_argument("--timeout", type=int, default=1200)
    p.add_argument("--worker", nargs=3, type=int, help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        rank, world, port = args.worker
        worker(rank, world, port, args.out, args)
        return
    if not torch.distributed.is_available():
        print("bench_ddp: torch without torch.distributed; skipped")
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "results.json")
        env = dict(os.environ, OMP_NUM_THREADS="1")
        cmd = [sys.executable, os.path.abspath(__file__), "--backend", args.backend, "--steps",
               str(args.steps), "--warmup", str(args.warmup), "--models", args.models,
               "--out", out, "--worker"]
        procs = [subprocess.Popen(cmd + [str(r), "2", str(port)], env=env) for r in range(2)]
        try:
            for proc in procs:
                proc.wait(timeout=args.timeout)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        if not os.path.exists(out):
            print("bench_ddp: no results (a worker failed)")
            sys.exit(1)
        with open(out) as f:
            results = json.load(f)
    print(f"\nDDP training step, 2 processes (gloo, CPU, 1 thread each), bucket_cap_mb=1, "
          f"backend {args.backend!r}, median of {args.steps} steps after {args.warmup} warm-up")
    print(f"{'model':12} {'engine':14} {'split':6} {'graphs':>6} {'step ms':>9} "
          f"{'first ms':>10} {'loss':>10}")
    by = {}
    for model_name, engine, split, r in results:
        by[(model_name, engine, split)] = r
        print(f"{model_name:12} {engine:14} {str(split):6} {r['graphs']:>6} "
              f"{r['median_ms']:>9.2f} {r['first_ms']:>10.0f} {r['loss']:>10.5f}")
    print()
    for model_name in args.models.split(","):
        for split in (True, False):
            c, t = by.get((model_name, "cdynamo", split)), by.get((model_name, "torch.compile", split))
            if c and t:
                print(f"{model_name:12} split={str(split):5}  cdynamo / torch.compile step time: "
                      f"{c['median_ms'] / t['median_ms']:.3f}  (graphs {c['graphs']} vs "
                      f"{t['graphs']})")


if __name__ == "__main__":
    main()
