"""Cold and warm start with backend "inductor": time to the first result of a Hugging Face
decoder built from a small config, cdynamo vs torch.compile (not a timed test).

For each model and engine: one fresh process with an empty private TORCHINDUCTOR_CACHE_DIR
(cold), then one more fresh process on the same directory (warm). Each measures, from just
before the engine is imported (`import cdynamo`; torch.compile imports torch._dynamo on its
first call) to the first result of a no_grad forward (trace, regional compilation,
AOTAutograd, Inductor, kernel builds or cache hits, the run), then the steady-state time per
call (median of 40 calls, in the warm process: the cold one may still run compile workers),
and checks the result against eager. Prints seconds and the
cdynamo / torch.compile ratios. Usage: python bench/bench_cold_start.py [gpt2] [llama]
"""
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
import torch
import transformers
transformers.logging.set_verbosity_error()
engine, kind = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
if kind == "gpt2":
    cfg = transformers.GPT2Config(n_layer=12, n_embd=128, n_head=4, vocab_size=1000,
                                  n_positions=128)
    model = transformers.GPT2Model(cfg).eval()
else:
    cfg = transformers.LlamaConfig(num_hidden_layers=16, hidden_size=128, num_attention_heads=4,
                                   num_key_value_heads=2, intermediate_size=256, vocab_size=1000)
    model = transformers.LlamaModel(cfg).eval()
ids = torch.randint(0, 1000, (2, 32))
t0 = time.perf_counter()
# the window starts before the engine is imported: torch.compile imports torch._dynamo
# on its first call, cdynamo imports it (and its own package) here
if engine == "cdynamo":
    import cdynamo
compiled = (cdynamo.compile if engine == "cdynamo" else torch.compile)(model, backend="inductor")
with torch.no_grad():
    out = compiled(input_ids=ids, use_cache=False).last_hidden_state
t1 = time.perf_counter()
with torch.no_grad():
    ok = torch.allclose(out, model(input_ids=ids, use_cache=False).last_hidden_state, atol=1e-4)
    times = []
    for _ in range(40):
        s = time.perf_counter()
        compiled(input_ids=ids, use_cache=False)
        times.append(time.perf_counter() - s)
print(json.dumps({"first_s": t1 - t0, "ok": bool(ok), "call_us": 1e6 * sorted(times)[20]}))
"""


def run(engine, kind, cache_dir):
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", CHILD, engine, kind], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    kinds = sys.argv[1:] or ["gpt2", "llama"]
    print(f"{'model':8} {'engine':14} {'cold s':>8} {'warm s':>8} {'call us':>9}  eager-equal")
    for kind in kinds:
        res = {}
        for engine in ("cdynamo", "torch.compile"):
            with tempfile.TemporaryDirectory() as d:
                cold = run("cdynamo" if engine == "cdynamo" else "torch", kind, d)
                warm = run("cdynamo" if engine == "cdynamo" else "torch", kind, d)
            res[engine] = (cold, warm)
            print(f"{kind:8} {engine:14} {cold['first_s']:8.2f} {warm['first_s']:8.2f} "
                  f"{warm['call_us']:9.0f}  {cold['ok'] and warm['ok']}")
        (cc, cw), (tc, tw) = res["cdynamo"], res["torch.compile"]
        print(f"{kind:8} ratio cdynamo/torch.compile: cold {cc['first_s'] / tc['first_s']:.2f}x, "
              f"warm {cw['first_s'] / tw['first_s']:.2f}x, steady state "
              f"{cw['call_us'] / tw['call_us']:.2f}x")


if __name__ == "__main__":
    main()
