"""Warm start: time to the first result in a fresh process whose inductor cache is warm,
cdynamo vs torch.compile (not a timed test).

For each engine, a private TORCHINDUCTOR_CACHE_DIR is filled by one cold run (a fresh
process compiling TransformerStack(depth) with backend "inductor"), then WARM fresh
processes each time, from just before the engine is imported (`import cdynamo`; torch.compile
imports torch._dynamo on its first call) to the first result:
  first result   the import, compile() + the first call (trace, guards, FX graph cache and AOTAutograd
                 cache lookups, loading the compiled kernels, the run);
and report the inductor / aot_autograd cache counters of the warm run (hits expected, no
"Bypassing FX Graph Cache"). Usage: python bench/bench_warm_start.py [depth] [warm runs]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, os.path.join(sys.argv[1], "examples"))
engine, depth = sys.argv[2], int(sys.argv[3])
import torch
import models
torch.manual_seed(0)
model = models.TransformerStack(depth=depth).eval()
(x,) = models.transformer_inputs()
t0 = time.perf_counter()
# the window starts before the engine is imported: torch.compile imports torch._dynamo
# on its first call, cdynamo imports it (and its own package) here
if engine == "cdynamo":
    import cdynamo
if engine == "cdynamo":
    compiled = cdynamo.compile(model, backend="inductor")
else:
    compiled = torch.compile(model, backend="inductor")
with torch.no_grad():
    out = compiled(x)
t1 = time.perf_counter()
with torch.no_grad():
    ok = torch.allclose(out, model(x), atol=1e-4)
from torch._dynamo.utils import counters
print(json.dumps({"first_result_s": t1 - t0, "ok": bool(ok),
                  "inductor": dict(counters["inductor"]),
                  "aot_autograd": dict(counters["aot_autograd"])}))
"""


def run(engine, depth, cache_dir):
    # the installed package (`make install`): src/ holds no built extensions
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", CHILD, ROOT, engine, str(depth)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    depth = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    warm = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    print(f"TransformerStack(depth={depth}), backend inductor, time to first result (s)")
    for engine in ("torch.compile", "cdynamo"):
        with tempfile.TemporaryDirectory() as cache:
            cold = run(engine, depth, cache)
            runs = [run(engine, depth, cache) for _ in range(warm)]
        times = [r["first_result_s"] for r in runs]
        last = runs[-1]
        print(f"{engine:14s} cold {cold['first_result_s']:6.2f}   warm median "
              f"{statistics.median(times):6.2f} (runs {', '.join(f'{t:.2f}' for t in times)})  "
              f"correct={all(r['ok'] for r in runs)}")
        print(f"{'':14s} warm counters: inductor {last['inductor']}, "
              f"aot_autograd {last['aot_autograd']}")


if __name__ == "__main__":
    main()
