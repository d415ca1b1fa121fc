"""cdynamo demo (`make demo`): compile an MLP and a transformer stack with backends "inductor"
and "eager"; print the captured graph, the guards, whether the output equals eager's, and
first-call and steady per-call times for eager, torch.compile and cdynamo. Then seed 004's
toy_example with a graph break: output_code (graphs, original/modified bytecode, resume
functions, guards) for both branches, and explain(). Last, a Hugging Face GPT2 as it ships
(tiny config): graphs, ops, breaks and times beside torch.compile."""
import os
import statistics
import sys
import time
import traceback

import torch
import torch._dynamo

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_models  # noqa: E402
import models  # noqa: E402

import cdynamo  # noqa: E402
from cdynamo._report import format_graph  # noqa: E402


def timed_first(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return out, (time.perf_counter() - t) * 1e6


def steady_us(fn, *args, rounds=5, calls=100):
    for _ in range(20):
        fn(*args)
    samples = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        samples.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(samples)


def printing_backend(inner_name):
    """A backend that prints the captured FX graph, then compiles it with `inner_name`."""
    inner, _ = cdynamo._backends.resolve_backend(inner_name)

    def backend(gm, example_inputs):
        print(f"  captured graph ({sum(1 for n in gm.graph.nodes if n.op.startswith('call'))} ops):")
        print("    " + format_graph(gm).replace("\n", "\n    "))
        return inner(gm, example_inputs)

    backend.__name__ = f"print+{inner_name}"
    return backend


def safe_reset():
    try:
        cdynamo.reset()
    except Exception as e:
        print(f"  cdynamo.reset failed: {type(e).__name__}: {e}")


def run_case(title, make_model, make_inputs, backend):
    print(f"\n=== {title}, backend={backend!r} ===")
    torch.manual_seed(0)
    model = make_model().eval()
    args = make_inputs()
    with torch.no_grad():
        expected = model(*args)
        eager_first = timed_first(model, *args)[1]
        eager_us = steady_us(model, *args)
        row = {"eager": (eager_first, eager_us)}

        torch._dynamo.reset()
        try:
            tc = torch.compile(model, backend=backend)
            _, first = timed_first(tc, *args)
            row["torch.compile"] = (first, steady_us(tc, *args))
        except Exception as e:  # report and go on
            print(f"  torch.compile failed: {type(e).__name__}: {e}")
        torch._dynamo.reset()

        safe_reset()
        try:
            cd = cdynamo.compile(model, backend=printing_backend(backend))
            out, first = timed_first(cd, *args)
            row["cdynamo"] = (first, steady_us(cd, *args))
            same = torch.equal(out, expected) if backend == "eager" else torch.allclose(out, expected, atol=1e-5, rtol=1e-4)
            how = "torch.equal" if backend == "eager" else "allclose"
            print(f"  output equals eager ({how}): {same}")
            entries = cdynamo.cache_entries(model)
            print(f"  cache entries: {len(entries)}")
            if entries:
                print("  guards of the first entry:")
                for g in entries[0].guards:
                    print(f"    - {g}")
            c = cdynamo.counters()
            if not entries:
                print(f"  no cache entry: the frame ran unmodified (counters: {c})")
        except Exception as e:
            print(f"  cdynamo failed: {type(e).__name__}: {e}")
            traceback.print_exc(limit=3)
        safe_reset()

    print(f"  {'':14} {'first call (us)':>16} {'per call (us)':>14}")
    for name, (first, per) in row.items():
        print(f"  {name:14} {first:16.0f} {per:14.1f}")


def toy_example(a, b):
    """Seed 004's toy example: a branch on a tensor value splits it into two graphs."""
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def graph_break_case():
    print("\n=== graph break: seed 004's toy_example, backend='eager', output_code on ===")
    safe_reset()
    f = cdynamo.compile(toy_example, backend="eager")
    a, b = torch.randn(10), torch.randn(10)
    with cdynamo.config.patch(output_code=True):
        out1 = f(a, b)
        out2 = f(a, -b)
    print(f"  outputs equal eager (torch.equal): "
          f"{torch.equal(out1, toy_example(a, b)) and torch.equal(out2, toy_example(a, -b))}")
    print("  explain():")
    print("    " + str(cdynamo.explain(toy_example)(a, b)).replace("\n", "\n    "))
    safe_reset()


class _Counter:
    """A backend counting graphs and their call nodes, running each graph eagerly."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward

    @property
    def ops(self):
        return sum(1 for gm in self.graphs for n in gm.graph.nodes if n.op.startswith("call"))


def hf_case(name="gpt2"):
    """A Hugging Face model as it ships (tiny config): graphs, breaks, frames run unmodified
    and times, cdynamo beside torch.compile (backend "eager")."""
    print(f"\n=== Hugging Face {name} (transformers, tiny config), backend='eager' ===")
    model, args = hf_models.BUILDERS[name]()
    with torch.no_grad():
        expected = hf_models.main_output(model(*args))
        rows = {}
        for which in ("torch.compile", "cdynamo"):
            torch._dynamo.reset()
            safe_reset()
            counter = _Counter()
            compiled = (torch.compile(model, backend=counter) if which == "torch.compile"
                        else cdynamo.compile(model, backend=counter))
            out, first = timed_first(compiled, *args)
            same = torch.allclose(hf_models.main_output(out), expected, atol=1e-5, rtol=1e-4)
            rows[which] = (len(counter.graphs), counter.ops, first, steady_us(compiled, *args),
                           same)
        ex = cdynamo.explain(model)(*args)
        torch._dynamo.reset()
        safe_reset()
    print(f"  {'':14} {'graphs':>7} {'ops':>5} {'first call (ms)':>16} {'per call (us)':>14} "
          f"{'== eager':>9}")
    for which, (g, ops, first, per, same) in rows.items():
        print(f"  {which:14} {g:7d} {ops:5d} {first / 1e3:16.1f} {per:14.1f} {str(same):>9}")
    print(f"  cdynamo: {ex.graph_break_count} graph breaks, {len(ex.unmodified_frames)} frames "
          f"run unmodified; reasons by code: {ex.reasons_by_code}")


def main():
    # One intra-op thread: steadier timings on a small shared machine (OpenMP threads that
    # spin while another process holds a core can make a 100 us call take milliseconds).
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, cdynamo {cdynamo.__version__}, "
          f"{torch.get_num_threads()} threads")
    cases = [("MLP", models.MLP, models.mlp_inputs),
             ("TransformerStack", models.TransformerStack, models.transformer_inputs)]
    for backend in ("eager", "inductor"):
        for title, make_model, make_inputs in cases:
            try:
                run_case(title, make_model, make_inputs, backend)
            except Exception as e:
                print(f"  {title}/{backend} failed: {type(e).__name__}: {e}")
    try:
        graph_break_case()
    except Exception as e:
        print(f"  graph break case failed: {type(e).__name__}: {e}")
        traceback.print_exc(limit=3)
    try:
        hf_case("gpt2")
    except Exception as e:
        print(f"  Hugging Face case failed: {type(e).__name__}: {e}")
        traceback.print_exc(limit=3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
