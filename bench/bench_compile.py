"""cdynamo vs torch._dynamo, side by side in one process (not a timed test).

For each workload (a one-op function, the MLP, the transformer stack, a function with one
graph break: two graphs and a resume function), with backend "eager":
  first call  time of the first call after a reset (trace + guards + codegen + eager graph run),
              median of REPEATS, both compilers reset between repeats;
  overhead    per-call time on a cache hit minus the eager call's, median over ROUNDS
              interleaved rounds of CALLS calls each, in microseconds;
  dispatch    per-call time on a cache hit minus the time of the captured graphs run
              directly on the same arguments (hook, guards, transformed code, resume
              functions): the overhead that does not depend on how the graph itself runs.
  front end   per-call time on a cache hit with a backend whose compiled graph returns its
              first outputs at once (ConstBackend: the first call runs the graph, later calls
              hand back those outputs without running it), so only the front end is timed:
              hook, guards, transformed code, argument plumbing. Both engines interleaved
              (alternating order) in FE_ROUNDS rounds of CALLS calls; the minimum per engine.
Prints a table with the ratio cdynamo / torch._dynamo (lower is better), then a front-end
table (same workloads) and two lines:
  x + 1 over eager   compiled call minus eager call of x + 1 with backend "eager", both
              engines, eager and both engines interleaved, the minimum of FE_ROUNDS rounds each;
  per tensor input   front end of a function of 33 tensor inputs minus that of a function
              of 1, over 32: the cost of one more tensor input (its TENSOR_MATCH guard and
              passing it on to the graph), in nanoseconds, both engines.
BENCH_FIRST=0 skips the first-call and overhead columns (front-end table only).
"""
import os
import statistics
import sys
import time

import torch
import torch._dynamo

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import hf_models  # noqa: E402
import models  # noqa: E402

import cdynamo  # noqa: E402

REPEATS = int(os.environ.get("BENCH_REPEATS", 5))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", 21))
CALLS = 300
FE_ROUNDS = int(os.environ.get("BENCH_FE_ROUNDS", 41))
FIRST = os.environ.get("BENCH_FIRST", "1") != "0"


def one_op(x):
    return x + 1


def many_inputs(n):
    """A function of n tensor inputs returning their sum (n - 1 adds in one graph)."""
    names = [f"x{i}" for i in range(n)]
    ns = {}
    exec(f"def sum{n}({', '.join(names)}):\n    return {' + '.join(names)}\n", ns)
    return ns[f"sum{n}"]


def one_break(x):
    # one graph break: the prefix graph, then a resume function with its own graph
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1


def workloads():
    torch.manual_seed(0)
    mlp = models.MLP().eval()
    tf = models.TransformerStack().eval()
    gpt2, gpt2_args = hf_models.gpt2()
    return [("x + 1", one_op, (torch.randn(16),)),
            ("MLP", mlp, models.mlp_inputs()),
            ("TransformerStack", tf, models.transformer_inputs()),
            ("one graph break", one_break, (torch.randn(16).abs(),)),
            ("HF GPT2 (2 layers)", gpt2, gpt2_args)]


def graphs_and_breaks(fn, args):
    """(graphs, breaks) of each compiler on one call: torch._dynamo.explain and cdynamo.explain."""
    torch._dynamo.reset()
    d = torch._dynamo.explain(fn)(*args)
    c = cdynamo.explain(fn)(*args)
    reset_all()
    return {"torch._dynamo": (d.graph_count, d.graph_break_count),
            "cdynamo": (c.graph_count, c.graph_break_count + len(c.unmodified_frames))}


class RecordingEager:
    """Backend "eager" that also records each graph and the arguments of its last call, so
    the graphs can be timed on their own (dispatch = compiled call minus graph time)."""

    def __init__(self):
        self.graphs = []   # [forward, last args]

    def __call__(self, gm, example_inputs):
        rec = [gm.forward, None]
        self.graphs.append(rec)

        def run(*args):
            rec[1] = args
            return rec[0](*args)
        return run

    def graphs_us(self):
        total = 0.0
        for fwd, args in self.graphs:
            if args is not None:
                total += per_call_us(fwd, args)
        return total


class ConstBackend:
    """Backend whose compiled graph returns its first outputs at once: the first call runs
    the graph (gm.forward), every later call hands back those outputs without running it, so
    a compiled call times only the front end (hook, guards, transformed code, arguments)."""

    def __call__(self, gm, example_inputs):
        first = []

        def run(*args):
            if first:
                return first[0]
            out = gm.forward(*args)
            first.append(out)
            return out
        return run


def front_end_us(fn, args):
    """{engine: per-call us} of fn compiled with ConstBackend, cache hits only; the engines
    run interleaved (order alternating each round), the minimum over FE_ROUNDS rounds."""
    reset_all()
    compiled = {w: make(w, fn, ConstBackend()) for w in ("torch._dynamo", "cdynamo")}
    for c in compiled.values():
        for _ in range(100):
            c(*args)
    samples = {w: [] for w in compiled}
    order = list(compiled)
    for r in range(FE_ROUNDS):
        for w in (order if r % 2 == 0 else order[::-1]):
            samples[w].append(per_call_us(compiled[w], args))
    reset_all()
    return {w: min(v) for w, v in samples.items()}


def over_eager_us(fn, args):
    """{engine: compiled call minus eager call, us} with backend "eager": eager and both
    engines interleaved (order rotating each round), the minimum of FE_ROUNDS rounds each."""
    reset_all()
    cands = {"eager": fn}
    cands.update({w: make(w, fn) for w in ("torch._dynamo", "cdynamo")})
    for c in cands.values():
        for _ in range(100):
            c(*args)
    samples = {w: [] for w in cands}
    order = list(cands)
    for r in range(FE_ROUNDS):
        k = r % len(order)
        for w in order[k:] + order[:k]:
            samples[w].append(per_call_us(cands[w], args))
    reset_all()
    best = {w: min(v) for w, v in samples.items()}
    return {w: best[w] - best["eager"] for w in ("torch._dynamo", "cdynamo")}, best["eager"]


def make(which, fn, backend="eager"):
    if which == "torch._dynamo":
        return torch.compile(fn, backend=backend)
    return cdynamo.compile(fn, backend=backend)


def reset_all():
    torch._dynamo.reset()
    cdynamo.reset()


def first_call_ms(which, fn, args):
    samples = []
    for _ in range(REPEATS):
        reset_all()
        compiled = make(which, fn)
        t = time.perf_counter()
        compiled(*args)
        samples.append((time.perf_counter() - t) * 1e3)
    return statistics.median(samples)


def per_call_us(fn, args):
    t = time.perf_counter()
    for _ in range(CALLS):
        fn(*args)
    return (time.perf_counter() - t) / CALLS * 1e6


def overheads_us(fn, args):
    reset_all()
    recorders = {w: RecordingEager() for w in ("torch._dynamo", "cdynamo")}
    compiled = {w: make(w, fn, recorders[w]) for w in recorders}
    for c in compiled.values():
        for _ in range(50):
            c(*args)
    for _ in range(50):
        fn(*args)
    diffs = {w: [] for w in compiled}
    dispatch = {w: [] for w in compiled}
    totals = {w: [] for w in list(compiled) + ["eager"]}
    for _ in range(ROUNDS):
        eager = per_call_us(fn, args)
        totals["eager"].append(eager)
        for w, c in compiled.items():
            t = per_call_us(c, args)
            totals[w].append(t)
            diffs[w].append(t - eager)
            dispatch[w].append(t - recorders[w].graphs_us())
    med = lambda d: {w: statistics.median(v) for w, v in d.items()}  # noqa: E731
    return med(diffs), med(totals), med(dispatch)


def main():
    torch.set_num_threads(1)
    rows = []
    fe_rows = []
    with torch.no_grad():
        for name, fn, args in workloads():
            try:
                fe_rows.append((name, front_end_us(fn, args)))
                if FIRST:
                    fc = {w: first_call_ms(w, fn, args) for w in ("torch._dynamo", "cdynamo")}
                    oh, tot, disp = overheads_us(fn, args)
                    rows.append((name, fc, oh, tot, disp, graphs_and_breaks(fn, args)))
            except Exception as e:
                print(f"{name}: failed: {type(e).__name__}: {e}")
            reset_all()
        x1_over = None
        try:
            x1_over = over_eager_us(one_op, (torch.randn(16),))
        except Exception as e:
            print(f"x + 1 over eager: failed: {type(e).__name__}: {e}")
        per_tensor = None
        try:
            ts = [torch.randn(4, 4) for _ in range(33)]
            d1 = front_end_us(many_inputs(1), tuple(ts[:1]))
            d33 = front_end_us(many_inputs(33), tuple(ts))
            per_tensor = {w: (d33[w] - d1[w]) / 32 * 1e3 for w in d1}
        except Exception as e:
            print(f"per tensor input: failed: {type(e).__name__}: {e}")
        reset_all()
    if FIRST:
        print_main_table(rows)
    print()
    print(f"front end (backend returns its first outputs at once; min of {FE_ROUNDS} interleaved "
          f"rounds x {CALLS} calls)")
    hdr = f"{'workload':18} {'dynamo us':>10} {'cdynamo us':>11} {'ratio':>6}"
    print(hdr)
    print("-" * len(hdr))
    for name, fe in fe_rows:
        print(f"{name:18} {fe['torch._dynamo']:10.2f} {fe['cdynamo']:11.2f} "
              f"{fe['cdynamo'] / fe['torch._dynamo']:6.3f}")
    if x1_over is not None:
        oh, eager = x1_over
        print(f"x + 1 over eager: dynamo {oh['torch._dynamo']:.2f} us, cdynamo "
              f"{oh['cdynamo']:.2f} us (compiled call minus eager call ({eager:.2f} us), backend "
              f"'eager'; min of {FE_ROUNDS} interleaved rounds each)")
    if per_tensor is not None:
        print(f"per tensor input (TENSOR_MATCH + passing it on): dynamo "
              f"{per_tensor['torch._dynamo']:.0f} ns, cdynamo {per_tensor['cdynamo']:.0f} ns, "
              f"ratio {per_tensor['cdynamo'] / per_tensor['torch._dynamo']:.2f} "
              "(front end of 33 tensor inputs minus 1, over 32)")


def print_main_table(rows):
    """The first-call / overhead / dispatch table (one row per workload)."""
    print(f"torch {torch.__version__}, backend 'eager', 1 thread; first call: median of {REPEATS}; "
          f"overhead: median of {ROUNDS} rounds x {CALLS} calls")
    hdr = (f"{'workload':18} {'graphs/breaks d':>15} {'graphs/breaks c':>15} {'first dynamo ms':>16} {'first cdynamo ms':>17} {'ratio':>6}   "
           f"{'ovh dynamo us':>14} {'ovh cdynamo us':>15} {'ratio':>6}   "
           f"{'eager us':>9} {'dynamo us':>10} {'cdynamo us':>11} {'call ratio':>10}   "
           f"{'disp dynamo us':>14} {'disp cdynamo us':>15} {'ratio':>6}")
    print(hdr)
    print("-" * len(hdr))
    for name, fc, oh, tot, disp, gb in rows:
        r1 = fc["cdynamo"] / fc["torch._dynamo"]
        # A negative overhead means the compiled call beat eager (e.g. torch._dynamo's graph
        # skips nn.Module call machinery); the ratio is then not meaningful.
        r2 = (f"{oh['cdynamo'] / oh['torch._dynamo']:6.2f}" if oh["torch._dynamo"] > 0
              else f"{'n/a':>6}")
        r3 = tot["cdynamo"] / tot["torch._dynamo"]
        gbd = "%d/%d" % gb["torch._dynamo"]
        gbc = "%d/%d" % gb["cdynamo"]
        print(f"{name:18} {gbd:>15} {gbc:>15} {fc['torch._dynamo']:16.2f} {fc['cdynamo']:17.2f} {r1:6.2f}   "
              f"{oh['torch._dynamo']:14.2f} {oh['cdynamo']:15.2f} {r2}   "
              f"{tot['eager']:9.2f} {tot['torch._dynamo']:10.2f} {tot['cdynamo']:11.2f} "
              f"{r3:10.2f}   {disp['torch._dynamo']:14.2f} {disp['cdynamo']:15.2f} "
              f"{disp['cdynamo'] / disp['torch._dynamo']:6.2f}")
    print("graphs/breaks: graphs handed to the backend / graph breaks (cdynamo: plus frames run "
          "unmodified) on one call, d = torch._dynamo, c = cdynamo")
    print("ratio = cdynamo / torch._dynamo; ovh = compiled call minus eager call (negative: the "
          "compiled call beat eager); n/a: torch._dynamo's call was faster than eager, so the "
          "overhead ratio is meaningless: compare the compiled calls (call ratio) instead; "
          "disp = per-call cost on a cache hit besides the graphs themselves (compiled call "
          "minus the captured graphs run directly on the same arguments: hook, guards, "
          "transformed code, resume functions)")


if __name__ == "__main__":
    main()
