"""Reference-count check of the engine's own objects (_C.live_counts()): symbolic values are
transient (none left once a translation has finished, whether it compiled, fell back to the
unmodified frame or raised), and every guard set and cache entry is freed by reset()."""
import gc

import pytest
import torch

import cdynamo
from conftest import requires_engine

pytestmark = requires_engine


def live():
    return cdynamo._C.live_counts()


# ---- programs: graph breaks, inlining, modules, closures, comprehensions, side effects ----

def _helper(x, k):
    return x * k + 1


def p_inline(a, b):
    return _helper(a, 2) + _helper(b, 3).relu()


def p_breaks(a, b):
    x = a.sin()
    seen.append(live()["values"])       # a C call of another module: a graph break
    d = {"k": x, "n": 3}
    if x.sum() > 0:                     # a break on a tensor value
        x = x + b
    ys = [x * i for i in range(d["n"])]
    print("break", end="\r")
    return sum(ys) + d["k"]


def _breaks_inside(x):
    y = x + 1
    cdynamo.graph_break()
    return y * 2


def p_break_in_inlined(a):
    return _breaks_inside(a) - 1


def p_closure(a, b):
    scale = 3

    def inner(t):
        return t * scale + b

    return inner(a) + (lambda t: t - scale)(b)


def p_loop_break(a):
    acc = a
    for i in range(3):                  # a break inside a loop: the frame runs unmodified
        acc = acc + i
        print("loop", end="\r")
    return acc


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.norm = torch.nn.LayerNorm(4)
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(2)])

    def forward(self, x):
        x = self.norm(self.lin(x)).relu()
        for layer in self.layers:
            x = layer(x) + x
        return x


seen = []


def _programs():
    a, b = torch.randn(4).abs(), torch.randn(4)
    mod = _Block()
    return [
        (p_inline, (a, b)),
        (p_breaks, (a, b)),
        (p_breaks, (-a, b)),
        (p_break_in_inlined, (a,)),
        (p_closure, (a, b)),
        (p_loop_break, (a,)),
        (mod, (torch.randn(2, 4),)),
        (p_inline, (a.double(), b.double())),   # a guard failure: recompiles
    ]


def test_values_are_transient_and_reset_frees_entries():
    cdynamo.reset()
    gc.collect()
    base = live()
    assert base == {"values": 0, "guard_sets": 0, "cache_entries": 0}
    seen.clear()
    with torch.no_grad():
        for fn, args in _programs():
            expected = fn(*args)
            compiled = cdynamo.compile(fn, backend="eager")
            for _ in range(2):                  # compile, then a cache hit
                out = compiled(*args)
                assert torch.equal(out, expected), fn
                assert live()["values"] == 0, (fn, live())
    assert seen and all(n == 0 for n in seen), seen    # counted at a break, between translations
    during = live()
    # p_breaks alone makes 2+ entries (the frame and its resume functions)
    assert during["cache_entries"] >= len(_programs()), during
    assert during["guard_sets"] == during["cache_entries"], during
    cdynamo.reset()
    gc.collect()
    assert live() == base


def test_failed_translations_free_their_values():
    base = live()

    def breaks(x):
        y = x + 1
        print("no", end="\r")
        return y

    f = cdynamo.compile(breaks, backend="eager", fullgraph=True)
    for _ in range(3):
        with pytest.raises(Exception):
            f(torch.ones(2))
        assert live()["values"] == 0, live()

    def bad_backend(gm, example_inputs):
        raise RuntimeError("backend failed")

    g = cdynamo.compile(p_inline, backend=bad_backend)
    with pytest.raises(Exception):
        g(torch.ones(2), torch.ones(2))
    assert live()["values"] == 0, live()
    cdynamo.reset()
    gc.collect()
    assert live() == base


def test_cache_limit_and_repeated_compile_reset_cycles():
    base = live()

    def sq(x):
        return x * x + 1

    f = cdynamo.compile(sq, backend="eager")
    with cdynamo.config.patch(cache_size_limit=3):
        for n in range(1, 7):                    # a new shape each call: recompiles, then the limit
            x = torch.ones(n)
            assert torch.equal(f(x), sq(x))
    assert live()["cache_entries"] == 3, live()
    for _ in range(20):
        cdynamo.reset()
        f(torch.ones(2))
        assert live()["values"] == 0
        assert live()["cache_entries"] == live()["guard_sets"] == 1, live()
    cdynamo.reset()
    gc.collect()
    assert live() == base


def test_entries_die_with_their_code_object():
    """The cache lives on the code object (co_extra): when the code object dies, its entries
    and guard sets are freed with it, without a reset(). (A function whose globals hold the
    function itself stays alive until reset(): the entry keeps a function built on those
    globals.)"""
    import builtins
    import types
    base = live()
    code = compile("def tmp(x):\n    return x * 2 + 1\n", "<live_counts_tmp>", "exec").co_consts[0]
    fn = types.FunctionType(code, {"__builtins__": builtins})
    f = cdynamo.compile(fn, backend="eager")
    assert torch.equal(f(torch.ones(3)), torch.full((3,), 3.0))
    assert live()["cache_entries"] == base["cache_entries"] + 1
    del f, fn, code
    gc.collect()
    assert live() == base, "entries of a dead code object were not freed"
