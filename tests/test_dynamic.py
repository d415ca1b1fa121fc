"""Dynamic shapes (issue 9): automatic dynamic shapes, dynamic=, mark_dynamic, symbolic size
arithmetic, SymInts across graph breaks, shape guards checked in C with their recompile
reasons, and warm start through torch's FX graph / AOTAutograd caches.

Every program runs eagerly, under torch._dynamo and under cdynamo on the same sequence of
inputs: cdynamo must give eager's results and hand its backend no more graphs than
torch._dynamo, and the graphs' inputs (tensors and SymInts, in order) must be torch._dynamo's.
"""
import json
import logging
import math
import os
import subprocess
import sys
from collections import OrderedDict

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
import torch.nn as nn
import torch.nn.functional as F

import cdynamo
from conftest import requires_engine
from helpers import CountingBackend, assert_same

pytestmark = requires_engine


class RecordingBackend(CountingBackend):
    """CountingBackend that also keeps each graph's example_inputs."""

    def __init__(self, inner=None):
        super().__init__(inner)
        self.example_inputs = []

    def __call__(self, gm, example_inputs):
        self.example_inputs.append(list(example_inputs))
        return super().__call__(gm, example_inputs)


def _inputs_signature(example_inputs):
    """What a backend can see of its inputs: tensor shapes and SymInts (by symbol)."""
    out = []
    for e in example_inputs:
        if isinstance(e, torch.Tensor):
            out.append(("tensor", tuple(e.shape)))
        elif isinstance(e, torch.SymInt):
            out.append(("symint", str(e)))
        else:
            out.append((type(e).__name__, e))
    return out


def _placeholders(gm):
    return [type(n.meta.get("example_value")).__name__ for n in gm.graph.nodes
            if n.op == "placeholder"]


def sweep(fn, calls, dynamic=None, exact=True, same_inputs=True):
    """Call fn on each argument tuple of `calls`: eagerly, under torch.compile and under
    cdynamo.compile (backend: record + eager). Checks eager's results, that cdynamo made no
    more graphs than torch._dynamo and, when same_inputs, that each graph got the same
    example inputs (tensors by shape, SymInts by symbol, in order). Returns (dynamo's
    backend, cdynamo's backend)."""
    torch._dynamo.reset()
    cdynamo.reset()
    dyn, cdy = RecordingBackend(), RecordingBackend()
    d = torch.compile(fn, backend=dyn, dynamic=dynamic)
    c = cdynamo.compile(fn, backend=cdy, dynamic=dynamic)
    for i, args in enumerate(calls):
        expected = fn(*args)
        d(*args)
        assert_same(c(*args), expected, f"call {i}", exact=exact)
    torch._dynamo.reset()
    assert cdy.frame_count <= dyn.frame_count, \
        f"cdynamo made {cdy.frame_count} graphs, torch._dynamo {dyn.frame_count}"
    if same_inputs and cdy.frame_count == dyn.frame_count:
        for k, (a, b) in enumerate(zip(cdy.example_inputs, dyn.example_inputs)):
            assert _inputs_signature(a) == _inputs_signature(b), f"graph {k}"
            assert _placeholders(cdy.graphs[k]) == _placeholders(dyn.graphs[k]), f"graph {k}"
    return dyn, cdy


# ---- automatic dynamic shapes -----------------------------------------------------------------


def seq_fn(x):
    return torch.softmax(x, -1) * x.size(1) + x.mean(1, keepdim=True)


def test_sequence_length_sweep_makes_two_graphs():
    dyn, cdy = sweep(seq_fn, [(torch.randn(2, n, 4),) for n in range(8, 16)])
    assert cdy.frame_count == dyn.frame_count == 2
    # the second graph takes the symbolic length first, then the tensor (as torch._dynamo)
    assert _placeholders(cdy.graphs[1]) == ["SymInt", "FakeTensor"]
    assert isinstance(cdy.example_inputs[1][0], torch.SymInt)


def test_growing_batch_of_embeddings():
    emb = nn.Embedding(100, 16)

    def f(ids):
        return emb(ids).sum(0) / ids.shape[0]

    dyn, cdy = sweep(f, [(torch.randint(0, 100, (b, 5)),) for b in range(2, 8)],
                     same_inputs=False)   # torch._dynamo lifts the weight as an input
    assert cdy.frame_count == dyn.frame_count == 2


def test_size_arithmetic_view():
    def f(x):
        y = x.view(x.size(0) // 2, -1)
        n = x.shape[0] * 3 + x.shape[1] - 1
        return y * n, min(x.size(0), 7), max(x.size(1), 2), x.size(0) % 3

    dyn, cdy = sweep(f, [(torch.randn(n, 4),) for n in (4, 6, 8, 10, 12)])
    assert cdy.frame_count == 2
    ops = [str(n.target) for n in cdy.graphs[1].graph.nodes if n.op == "call_function"]
    assert any("floordiv" in o for o in ops), ops   # x.size(0) // 2 is in the graph


class TinyLM(nn.Module):
    """Token + position embeddings, one causal self-attention block, an MLP and a head; the
    causal mask and the positions are sliced to the current length."""

    def __init__(self, vocab=50, dim=16, ctx=32):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(ctx, dim))
        self.ln = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx)).bool())
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids):
        B, T = ids.shape
        x = self.tok(ids) + self.pos[:T]
        q, k, v = self.qkv(self.ln(x)).chunk(3, dim=-1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(-1)
        x = x + self.proj(att @ v)
        x = x + self.mlp(x)
        return self.head(x)[:, -1, :]


def test_small_lm_called_with_growing_length():
    torch.manual_seed(0)
    lm = TinyLM().eval()
    calls = [(torch.randint(0, 50, (1, t)),) for t in range(1, 17)]
    cdynamo.reset_counters()
    with torch.no_grad():
        dyn, cdy = sweep(lm, calls, same_inputs=False)
    # length 1 (static), length 2 (static, 0/1 specialisation), then one symbolic graph
    assert cdy.frame_count == dyn.frame_count <= 3
    assert cdynamo.counters()["cache_limit_hits"] == 0


def test_generation_loop_stays_compiled():
    torch.manual_seed(0)
    lm = TinyLM().eval()
    cdynamo.reset()
    cdynamo.reset_counters()
    backend = CountingBackend()
    compiled = cdynamo.compile(lm, backend=backend)
    ids = torch.randint(0, 50, (1, 1))
    with torch.no_grad():
        for _ in range(20):
            logits = compiled(ids)
            assert_same(logits, lm(ids), exact=False)
            ids = torch.cat([ids, logits.argmax(-1, keepdim=True)], dim=1)
    assert backend.frame_count <= 3
    assert cdynamo.counters()["unmodified"] == 0


def test_int_input_becomes_dynamic_after_a_change():
    def f(x, n):
        return x * n + n // 2

    dyn, cdy = sweep(f, [(torch.randn(4), n) for n in (2, 3, 4, 1, 0, 5)])
    assert cdy.frame_count == dyn.frame_count == 2
    assert _placeholders(cdy.graphs[1]) == ["FakeTensor", "SymInt"]


def test_int_items_of_a_tuple_input_become_dynamic_after_a_change():
    """A shape tuple passed in (x.reshape(shp)): one constant until an item changes, then
    that item is a SymInt input (2 graphs as torch._dynamo, was one per shape)."""
    def f(x, shp):
        return x.reshape(shp) * 2

    dyn, cdy = sweep(f, [(torch.randn(n, 4), (n * 2, 2)) for n in (4, 6, 8, 10, 12)])
    assert cdy.frame_count == dyn.frame_count == 2
    assert "SymInt" in _placeholders(cdy.graphs[1])


def test_torch_size_of_symbolic_ints():
    """torch.Size([...]) of symbolic sizes, Size slicing and concatenation: torch.Size values
    in the graph (2 graphs as torch._dynamo, was one per size), and Size results stay Sizes."""
    def build(x):
        return x.new_zeros(torch.Size([x.shape[0], 2])) + x.sum()

    def concat(x):
        return x.new_ones(x.shape[:-1] + torch.Size([3])), x.reshape(torch.Size((x.size(0) * 2, -1)))

    def sizes(x):
        return x.shape[:-1], (7,) + x.shape, x.shape * 2, torch.Size([x.size(0), 5]), x.size(0)

    for fn in (build, concat):
        dyn, cdy = sweep(fn, [(torch.randn(n, 4),) for n in (4, 6, 8, 10)])
        assert cdy.frame_count == dyn.frame_count == 2, fn.__name__
    cdynamo.reset()
    c = cdynamo.compile(sizes, backend="eager")
    for n in (4, 6, 8):
        x = torch.randn(n, 4)
        got, want = c(x), sizes(x)
        assert [type(g) for g in got] == [type(w) for w in want] and got == want, (got, want)


def test_torch_size_crossing_a_graph_break():
    """A torch.Size built from symbolic sizes and live across a break reaches the resume
    function as a Size whose ints are tracked like int inputs (3 graphs as torch._dynamo:
    was one more resume function per size)."""
    def f(x):
        s = torch.Size([x.size(0) * 2, -1])
        torch._dynamo.graph_break()
        return x.reshape(s) + 1

    dyn, cdy = sweep(f, [(torch.randn(n, 4),) for n in (4, 6, 8, 10, 12)], same_inputs=False)
    assert cdy.frame_count == dyn.frame_count == 3


@pytest.mark.parametrize("dynamic", [None, True])
def test_in_place_view_of_a_symbolic_input(dynamic):
    """t.unsqueeze_(0) / t.t_() on an input with symbolic dims: the shape guards are made
    from the input as it came in (producing them raised IndexError inside the engine and the
    frame ran unmodified); graphs as torch._dynamo, the input changed as eagerly."""
    def unsq(t):
        t.unsqueeze_(0)
        return t + 1

    def transpose(t):
        t.t_()
        return t * 2

    for fn in (unsq, transpose):
        calls = [(torch.randn(n, 3),) for n in (2, 3, 4, 5, 3)]
        torch._dynamo.reset()
        cdynamo.reset()
        cdy = RecordingBackend()
        c = cdynamo.compile(fn, backend=cdy, dynamic=dynamic)
        for (a,) in calls:
            b = a.clone()
            assert_same(c(a), fn(b), fn.__name__)
            assert a.shape == b.shape and a.stride() == b.stride()
        assert cdy.frame_count == (1 if dynamic else 2), (fn.__name__, cdy.frame_count)


def test_parameter_arguments_keep_static_shapes():
    """An nn.Parameter passed as an argument keeps static shapes (torch._dynamo's
    force_parameter_static_shapes): one graph per shape, as torch._dynamo (was automatic
    dynamic: one symbolic graph), plain tensors of the same shapes still become dynamic."""
    def f(x, w):
        return x @ w

    calls = [(torch.randn(4, n), nn.Parameter(torch.randn(n, 2))) for n in (3, 4, 5, 6)]
    dyn, cdy = sweep(f, calls)
    assert cdy.frame_count == dyn.frame_count == 4
    assert all(s == "FakeTensor" for g in cdy.graphs for s in _placeholders(g))
    dyn, cdy = sweep(f, [(x, w.detach()) for x, w in calls])
    assert cdy.frame_count == dyn.frame_count == 2


def test_torch_check_on_sizes_is_a_shape_guard():
    """torch._check(relation between sizes): traced as torch._dynamo does (a shape guard, no
    graph break: fullgraph=True compiles, 2 graphs for a sweep); a size that fails the check
    raises torch's RuntimeError as eagerly (was a graph break at every torch._check)."""
    def f(x):
        torch._check(x.size(0) % 2 == 0)
        torch._check(x.size(0) >= 2, lambda: "too small")
        torch._check(True)
        return x.view(x.size(0) // 2, -1) * 2

    torch._dynamo.reset()
    cdynamo.reset()
    cdy = RecordingBackend()
    c = cdynamo.compile(f, backend=cdy, fullgraph=True)
    for n in (4, 6, 8, 10):
        x = torch.randn(n, 3)
        assert_same(c(x), f(x))
    assert cdy.frame_count == 2
    c = cdynamo.compile(f, backend="eager")
    with pytest.raises(RuntimeError, match="Expected cond to be True"):
        c(torch.randn(5, 3))


def test_math_functions_of_sizes_stay_symbolic():
    """math.sqrt / math.cos / math.log2 of a size (torch's _sym_ versions, as torch._dynamo),
    math.prod(x.shape) (a polyfill) and divmod of a size: one symbolic graph after the first
    change, 2 graphs as torch._dynamo (each size was its own graph: math.sqrt called
    SymInt.__float__, math.prod was a break, divmod specialised)."""
    import math

    def scaled(x):
        return x / math.sqrt(x.size(0)) + math.cos(x.size(0)) + math.log2(x.size(1))

    def numel(x):
        return x * math.prod(x.shape)

    for fn in (scaled, numel):
        dyn, cdy = sweep(fn, [(torch.randn(n, 3),) for n in (4, 5, 6, 7, 9)], exact=False)
        assert cdy.frame_count == dyn.frame_count == 2, fn.__name__

    def dm(x):
        q, r = divmod(x.size(0), 3)
        return x * q + r

    torch._dynamo.reset()
    cdynamo.reset()
    cdy = RecordingBackend()
    c = cdynamo.compile(dm, backend=cdy)
    for n in (4, 5, 6, 7, 9, 12):
        x = torch.randn(n, 3)
        assert_same(c(x), dm(x))
    assert cdy.frame_count == 2   # torch._dynamo gives up on the frame at the second size


def test_torch_tensor_of_symbolic_sizes():
    """torch.tensor([x.size(0), 3]) with a dynamic size: built by torch._refs.tensor from
    the SymInt (as torch._dynamo), 2 graphs (torch.tensor specialised the size: one graph
    per size)."""
    def f(x):
        return torch.tensor([x.size(0), 3]) * 2 + x.sum()

    dyn, cdy = sweep(f, [(torch.randn(n, 3),) for n in (4, 5, 6, 7, 8)], exact=False)
    assert cdy.frame_count == dyn.frame_count == 2


def test_plain_tensor_attribute_of_a_user_module_becomes_dynamic():
    """A tensor held as a plain attribute of a user module (a cache, a mask) follows
    automatic dynamic shapes as torch._dynamo's (2 graphs for 5 sizes; was static: one per
    size); a registered buffer of the same module keeps static shapes (one per size)."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.k = None
            self.register_buffer("b", torch.zeros(3, 4))

        def forward(self, x):
            return x + self.k.sum(0) + self.b.sum(0)

    def run(set_attr):
        counts = []
        for comp, reset in ((torch.compile, torch._dynamo.reset), (cdynamo.compile, cdynamo.reset)):
            reset()
            m = M()
            be = CountingBackend()
            c = comp(m, backend=be)
            for n in (3, 4, 5, 6, 7):
                set_attr(m, n)
                x = torch.randn(4)
                assert_same(c(x), m(x))
            counts.append(be.frame_count)
            reset()
        return counts

    def plain(m, n):
        m.k = torch.randn(n, 4)
        m.b = torch.zeros(3, 4)

    def buffer(m, n):
        m.k = torch.randn(3, 4)
        m.b = torch.zeros(n, 4)   # assigning a tensor to a buffer name replaces the buffer

    assert run(plain) == [2, 2]
    assert run(buffer) == [5, 5]


def test_float_input_becomes_dynamic_after_a_change():
    """A Python float argument that changes between calls becomes a graph input, as
    torch._dynamo 2.13 with specialize_float=False: a 0-d float64 tensor placeholder read
    back with .item() (the backend's example input is that tensor), guarded TYPE_MATCH plus
    the ShapeEnv's float guards (a NaN recompiles). 2 graphs as torch._dynamo (was one per
    value until the cache limit)."""
    def f(x, s):
        return x * s + s

    calls = [(torch.ones(3), s) for s in (0.5, 1.5, 2.5, 3.25, -0.0)]
    dyn, cdy = sweep(f, calls)
    assert cdy.frame_count == dyn.frame_count == 2
    assert _placeholders(cdy.graphs[1]) == ["FakeTensor", "FakeTensor"]
    ex = cdy.example_inputs[1][1]
    assert isinstance(ex, torch.Tensor) and ex.dim() == 0 and ex.dtype == torch.float64
    assert any(n.op == "call_method" and n.target == "item" for n in cdy.graphs[1].graph.nodes)
    c = cdynamo.compile(f, backend="eager")
    for s in (0.5, 1.5, float("nan"), 2, 4.5):
        got, want = c(torch.ones(3), s), f(torch.ones(3), s)
        assert torch.equal(got, want) or (got.isnan().all() and want.isnan().all()), s


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_float_inputs_in_branches_breaks_and_factories(backend):
    """Dynamic floats through a branch (a float shape guard), a graph break (re-read by the
    resume function), a keyword argument, and factories/int conversions that AOTAutograd
    cannot keep as tensors (torch's TensorifyScalarRestartAnalysis: the frame is traced
    again with that float static, as torch._dynamo restarts its analysis): graph counts as
    torch._dynamo's, eager's results (aot_eager raised BackendCompilerFailed)."""
    def branch(x, s):
        if s > 1.0:
            return x * s
        return x - s

    def with_break(x, s):
        y = x * s
        torch._dynamo.graph_break()
        return y + s

    def kwarg(x, *, scale=1.0):
        return x * scale

    def factory(x, s):
        return torch.full((3,), s) + x

    def to_int(x, s):
        return x[: int(s)] * 2

    for fn in (branch, with_break, kwarg, factory, to_int):
        counts = []
        for comp, reset in ((torch.compile, torch._dynamo.reset), (cdynamo.compile, cdynamo.reset)):
            reset()
            be = torch._dynamo.testing.CompileCounterWithBackend(backend)
            c = comp(fn, backend=be)
            for s in (0.5, 1.5, 2.5, 3.25, 4.0):
                if fn is kwarg:
                    assert_same(c(torch.ones(8), scale=s), fn(torch.ones(8), scale=s))
                else:
                    assert_same(c(torch.ones(8 if fn is to_int else 3), s),
                                fn(torch.ones(8 if fn is to_int else 3), s), fn.__name__)
            counts.append(be.frame_count)
            reset()
        assert counts[1] == counts[0], (fn.__name__, counts)


def test_symbolic_int_index_and_dict_key():
    """x[x.size(0) - 1] with a dynamic size is torch.select(x, 0, n - 1) (indexing called
    __index__ and specialised the size: one graph per size), and a size used as a dict key is
    specialised (guarded) instead of a graph break: graph counts as torch._dynamo's."""
    def last_row(x):
        return x[x.size(0) - 1] * 2

    def keyed(x):
        scale = {4: 10.0, 5: 20.0}
        return x * scale.get(x.size(0), -1.0)

    dyn, cdy = sweep(last_row, [(torch.randn(n, 3),) for n in (4, 5, 6, 7, 9, 12)])
    assert cdy.frame_count == dyn.frame_count == 2
    dyn, cdy = sweep(keyed, [(torch.randn(n, 3),) for n in (4, 5, 4, 6)])
    assert cdy.frame_count == dyn.frame_count
    c = cdynamo.compile(keyed, backend="eager", fullgraph=True)
    for n in (4, 5, 6):
        assert_same(c(torch.randn(n, 3) * 0 + 1), keyed(torch.ones(n, 3)))


def test_broadcast_shapes_of_symbolic_sizes():
    """torch.broadcast_shapes of dynamic shapes is traced (a polyfill of torch's
    _broadcast_shapes): no graph break (fullgraph=True compiles), eager's results and errors,
    at most one graph more than torch._dynamo over a sweep (its guard_or_false avoids one
    guard; the break made one graph per size)."""
    def f(x, y):
        s = torch.broadcast_shapes(x.shape, y.shape)
        return x.expand(s) + y

    calls = [(torch.randn(n, 1, 3), torch.randn(1, n + 1, 3)) for n in (2, 3, 4, 5, 6)]
    torch._dynamo.reset()
    dyn = RecordingBackend()
    d = torch.compile(f, backend=dyn)
    cdynamo.reset()
    cdy = RecordingBackend()
    c = cdynamo.compile(f, backend=cdy, fullgraph=True)
    for args in calls:
        d(*args)
        assert_same(c(*args), f(*args))
    assert cdy.frame_count <= dyn.frame_count + 1, (cdy.frame_count, dyn.frame_count)
    g = cdynamo.compile(lambda *s: torch.broadcast_shapes(*s), backend="eager")
    for shapes in [((2,), (3, 1), (1, 1, 1)), ((5,),), (3, (2, 3)), ((1, 4), (3, 1))]:
        assert g(*shapes) == torch.broadcast_shapes(*shapes)
        assert type(g(*shapes)) is torch.Size
    with pytest.raises(RuntimeError, match="Attempting to broadcast a dimension of length 4"):
        g((2, 3), (4, 3))


def test_list_repeated_by_a_symbolic_size():
    """[t] * (x.size(0) // 3): the count specialised (guarded) as torch._dynamo, no graph
    break; graph counts as torch._dynamo's."""
    def f(x):
        return torch.cat([x[:1]] * (x.size(0) // 3) + [x])

    dyn, cdy = sweep(f, [(torch.randn(n, 3),) for n in (4, 5, 6, 7, 9, 12, 13)],
                     same_inputs=False)
    assert cdy.frame_count == dyn.frame_count


def test_floats_inside_a_list_stay_constants_and_checks_on_item():
    """Floats inside containers (a tolist() result live across its graph break) stay
    constants: aot_eager is handed as many graphs as torch._dynamo's (making them dynamic
    inputs restarted and recompiled the resume function once per length); and a 0-d int
    input's .item() under dynamic=True with capture_scalar_outputs is unbacked (it raised an
    internal error producing the guards), its torch._check a runtime assertion in the graph,
    as torch._dynamo (fullgraph=True compiles it; a failing check raises torch's error)."""
    def f(x):
        sizes = x.shape
        lst = x[:, 0].tolist()
        return x + len(lst) + sizes[0], lst

    counts = []
    for comp, reset in ((torch.compile, torch._dynamo.reset), (cdynamo.compile, cdynamo.reset)):
        reset()
        be = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
        c = comp(f, backend=be)
        for k in (4, 5, 6, 7, 9, 12):
            x = torch.randn(k, 3)
            got, want = c(x), f(x)
            assert_same(got[0], want[0], exact=False)
            assert got[1] == want[1]
        counts.append(be.frame_count)
        reset()
    assert counts[1] <= counts[0], counts

    def g(x, y):
        b = x.item()
        torch._check(b >= 0)
        torch._check(b < y.shape[0])
        return y[:b]

    saved = cdynamo.config.capture_scalar_outputs
    cdynamo.config.capture_scalar_outputs = True
    try:
        for dynamic in (True, None):
            cdynamo.reset()
            c = cdynamo.compile(g, backend="eager", dynamic=dynamic, fullgraph=True)
            for n in (4, 2, 7):
                args = (torch.tensor(n), torch.ones(10))
                assert_same(c(*args), g(*args))
            with pytest.raises(RuntimeError, match="Runtime assertion failed"):
                c(torch.tensor(12), torch.ones(10))
            assert len(cdynamo.cache_entries(g)) == 1
    finally:
        cdynamo.config.capture_scalar_outputs = saved


def test_method_of_a_symbolic_number_specialises_it():
    """m.is_integer() on a dynamic float, n.bit_length() on a dynamic size: the method runs
    on the value (guarded; was a graph break, fullgraph=True refused)."""
    def forward(t, m):
        return 2 * t if m.is_integer() else t

    c = cdynamo.compile(forward, backend="eager", fullgraph=True)
    t = torch.tensor([1])
    assert [c(t, m).item() for m in (1.0, 1.5, 2.0, 2.5)] == [2, 1, 2, 1]

    def g(x):
        return x * x.size(0).bit_length()

    c = cdynamo.compile(g, backend="eager", fullgraph=True)
    for n in (4, 5, 9, 17):
        assert_same(c(torch.ones(n)), g(torch.ones(n)))


def test_size_numel_of_symbolic_sizes():
    """x.shape.numel() and a slice's numel() with dynamic dims: the product of the sizes in
    the graph (was a graph break), 2 graphs as torch._dynamo."""
    def f(x):
        return x * x.shape.numel() + x.shape[1:].numel() + torch.Size([]).numel()

    dyn, cdy = sweep(f, [(torch.ones(n, 3),) for n in (4, 5, 6, 7)])
    assert cdy.frame_count == dyn.frame_count == 2


def test_new_tensor_of_a_symbolic_size():
    """x.new_tensor(x.size(0)) (and of n / 2) with a dynamic size: built by torch._refs.tensor
    with x's dtype and device (new_tensor specialised the size: one graph per size); results,
    dtypes and graph counts as torch._dynamo's."""
    def f(x):
        return x.new_tensor(x.size(0)) * 2 + x.new_tensor(x.size(0) / 2)

    dyn, cdy = sweep(f, [(torch.ones(n, 3, dtype=torch.float64),) for n in (4, 5, 6, 7, 9)],
                     same_inputs=False)
    assert cdy.frame_count == dyn.frame_count == 2


def test_zero_one_sizes_specialise():
    def f(x):
        return x * x.size(0)

    dyn, cdy = sweep(f, [(torch.randn(n),) for n in (3, 4, 5, 1, 6)])
    assert cdy.frame_count == dyn.frame_count == 3
    reasons = [e.recompile_reason for e in cdynamo.cache_entries(f)]
    assert "SHAPE_GUARD: 2 <= L['x'].size()[0] failed (L['x'].size()[0] = 1)" in reasons


def test_dynamic_false_is_static():
    dyn, cdy = sweep(seq_fn, [(torch.randn(2, n, 4),) for n in (3, 4, 5)], dynamic=False)
    assert cdy.frame_count == dyn.frame_count == 3
    assert all(_placeholders(g) == ["FakeTensor"] for g in cdy.graphs)


def test_dynamic_true_from_the_start():
    def f(x, y, n):
        return (x + y) * n, x.size(0) + 1

    calls = [(torch.randn(k, 4), torch.randn(k, 4), k) for k in (2, 3, 5, 1)]
    dyn, cdy = sweep(f, calls, dynamic=True)
    assert cdy.frame_count == dyn.frame_count == 2   # size 1 specialises
    # duck sizing: x and y share their symbols; the int has its own
    assert _placeholders(cdy.graphs[0]) == ["SymInt", "SymInt", "FakeTensor", "FakeTensor",
                                            "SymInt"]


# ---- mark_dynamic / mark_static ------------------------------------------------------------------


@pytest.mark.parametrize("mark", [torch._dynamo.mark_dynamic, cdynamo.mark_dynamic],
                         ids=["torch._dynamo", "cdynamo"])
def test_mark_dynamic_first_compile_is_symbolic(mark):
    def f(x):
        return x * 2 + x.size(0)

    t = torch.randn(5, 3)
    mark(t, 0)
    dyn, cdy = sweep(f, [(t,), (torch.randn(6, 3),), (torch.randn(9, 3),)])
    assert cdy.frame_count == 1
    assert _placeholders(cdy.graphs[0]) == ["SymInt", "FakeTensor"]


def test_mark_dynamic_with_dynamic_false_and_mark_static_with_dynamic_true():
    def f(x):
        return x * 2 + x.size(0)

    t = torch.randn(5, 3)
    cdynamo.mark_dynamic(t, 0)
    _, cdy = sweep(f, [(t,), (torch.randn(7, 3),)], dynamic=False)
    assert cdy.frame_count == 1
    s = torch.randn(5, 3)
    cdynamo.mark_static(s, 0)
    _, cdy = sweep(f, [(s,)], dynamic=True)
    assert _placeholders(cdy.graphs[0]) == ["SymInt", "FakeTensor"]   # dim 1 only
    assert cdy.graphs[0].graph.find_nodes(op="placeholder")[1].meta["example_value"].shape[0] == 5


def test_marking_a_tensor_later_recompiles():
    def f(x):
        return x + 1

    cdynamo.reset()
    backend = CountingBackend()
    c = cdynamo.compile(f, backend=backend)
    c(torch.randn(4))
    t = torch.randn(4)
    cdynamo.maybe_mark_dynamic(t, 0)
    assert torch.equal(c(t), t + 1)
    assert backend.frame_count == 2
    assert "mark" in cdynamo.cache_entries(f)[0].recompile_reason


def test_specialising_a_mark_dynamic_dim_raises_as_dynamo():
    from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

    def f(x):
        if x.size(0) == 5:
            return x + 1
        return x - 1

    t = torch.randn(5)
    cdynamo.mark_dynamic(t, 0)
    with pytest.raises(ConstraintViolationError, match="marked L\\['x'\\].size\\(\\)\\[0\\] as dynamic"):
        cdynamo.compile(f, backend="eager")(t)
    u = torch.randn(5)
    cdynamo.maybe_mark_dynamic(u, 0)      # not insisted on: specialised, no error
    assert torch.equal(cdynamo.compile(f, backend="eager")(u), u + 1)


@pytest.mark.parametrize("mark", [torch._dynamo.mark_static, cdynamo.mark_static],
                         ids=["torch._dynamo", "cdynamo"])
def test_mark_static_inside_a_compiled_function_specialises(mark):
    # as torch._dynamo (PyTorch's test_mark_static_inside): with dynamic=True and
    # fullgraph=True, mark_static(x, 0) inside the function makes size 0 a constant (no
    # graph break); another size 0 recompiles, size 1 stays symbolic
    def f(x):
        mark(x, 0)
        return x * x.size(0) + x.size(1)

    dyn, cdy = sweep(f, [(torch.randn(12, 23),), (torch.randn(12, 24),),
                         (torch.randn(13, 25),)], dynamic=True)
    assert cdy.frame_count == dyn.frame_count == 2
    assert _placeholders(cdy.graphs[0]) == ["SymInt", "FakeTensor"]
    assert cdy.graphs[0].graph.find_nodes(op="placeholder")[1].meta["example_value"].shape[0] == 12
    cdynamo.reset()
    c = cdynamo.compile(f, backend="eager", dynamic=True, fullgraph=True)
    x = torch.randn(4, 5)
    assert torch.equal(c(x), f(x))

    def every_size(x):
        mark(x)
        return x.sum(0) * x.size(1)

    _, cdy = sweep(every_size, [(torch.randn(3, 4),), (torch.randn(3, 5),)], dynamic=True)
    assert cdy.frame_count == 2 and _placeholders(cdy.graphs[0]) == ["FakeTensor"]


@pytest.mark.parametrize("mark", [torch._dynamo.mark_dynamic, cdynamo.mark_dynamic],
                         ids=["torch._dynamo", "cdynamo"])
def test_mark_dynamic_min_max_bound_the_symbol(mark):
    # as torch._dynamo: min=/max= bound the marked dim (a SHAPE_GUARD on the range); a
    # program narrowing it, or a size outside it, raises ConstraintViolationError
    from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

    def f(x):
        n = x.size(1)
        return torch.ones(n, n).tril() @ x

    def branchy(x):
        return x * 2 if x.size(0) > 10 else x + 1

    cdynamo.reset()
    backend = CountingBackend()
    c = cdynamo.compile(f, backend=backend)
    for n in (4, 6, 9):
        x = torch.randn(2, n, 8)
        mark(x, 1, min=3, max=40)
        assert_same(c(x), f(x), exact=False)
    assert backend.frame_count == 1
    assert "SHAPE_GUARD: 3 <= L['x'].size()[1] and L['x'].size()[1] <= 40" in \
        cdynamo.cache_entries(f)[0].guards
    x = torch.randn(2, 70, 8)
    mark(x, 1, min=3, max=40)
    with pytest.raises(ConstraintViolationError, match="70 not in range"):
        c(x)
    x = torch.randn(5)
    mark(x, 0, min=2, max=64)
    cdynamo.reset()
    with pytest.raises(ConstraintViolationError):
        cdynamo.compile(branchy, backend="eager")(x)


def test_mark_api_errors():
    with pytest.raises(TypeError, match="torch.Tensor"):
        cdynamo.mark_dynamic([1, 2], 0)
    with pytest.raises(IndexError, match="out of range"):
        cdynamo.mark_dynamic(torch.randn(2), 3)
    with pytest.raises(TypeError, match="index"):
        cdynamo.mark_static(torch.randn(2), "0")
    with pytest.raises(TypeError, match="max must be an int"):
        cdynamo.mark_dynamic(torch.randn(2), 0, max=2.5)
    with pytest.raises(ValueError, match="larger than max"):
        cdynamo.mark_dynamic(torch.randn(2), 0, min=4, max=3)
    assert "torch._dynamo.mark_dynamic" in cdynamo.mark_dynamic.__doc__


# ---- symbolic values through the interpreter -------------------------------------------------


def test_shapes_reshapes_slices_and_factories():
    def f(x, y):
        b, t, c = x.size()
        pos = torch.arange(t)
        mask = torch.ones(t, t).tril()
        z = x.reshape(b * t, c).relu().reshape(b, t, c)
        return z + pos[:, None], mask.sum(), x.new_zeros(x.shape), len(x), x.numel(), y[:t]

    sweep(f, [(torch.randn(2, n, 3), torch.randn(20, 3)) for n in (3, 4, 5, 6)])


def test_branch_on_a_size_guards_the_relation():
    def f(x):
        if x.size(0) > 5:
            return x * 2
        return x - 1

    dyn, cdy = sweep(f, [(torch.randn(n),) for n in (3, 4, 6, 7, 8, 2)])
    assert cdy.frame_count == dyn.frame_count == 3


def test_range_over_a_size_specialises_like_dynamo():
    def f(x):
        acc = x[0]
        for i in range(x.size(0)):
            acc = acc + x[i]
        return acc

    dyn, cdy = sweep(f, [(torch.randn(n, 3),) for n in (4, 5, 6)])
    assert cdy.frame_count == dyn.frame_count == 3


def test_shape_equality_and_pad():
    def f(x, y):
        if x.shape == y.shape:
            return F.pad(x + y, (0, 8 - x.size(-1) % 8))
        return x - y.sum()

    sweep(f, [(torch.randn(n), torch.randn(n)) for n in (2, 3, 4)])


def test_symints_across_a_graph_break():
    def f(x):
        n = x.size(0) * 2
        cdynamo.graph_break()
        return x.sum() * n, n

    def g(x):
        n = x.size(0) * 2
        torch._dynamo.graph_break()
        return x.sum() * n, n

    # the same program for each compiler's own graph_break()
    torch._dynamo.reset()
    cdynamo.reset()
    dyn, cdy = RecordingBackend(), RecordingBackend()
    d, c = torch.compile(g, backend=dyn), cdynamo.compile(f, backend=cdy)
    for n in (4, 5, 6, 7):
        x = torch.randn(n, 3)
        d(x)
        assert_same(c(x), g(x))
    assert cdy.frame_count == dyn.frame_count == 3
    # the resume function re-symbolises the int it gets: a SymInt input of its own graph
    assert [_inputs_signature(e) for e in cdy.example_inputs] == \
        [_inputs_signature(e) for e in dyn.example_inputs]


def test_code_objects_with_one_identity_share_automatic_dynamic_state():
    # torch._dynamo keys its automatic-dynamic state by (file, first line, name): a function
    # made again from the same source goes dynamic on its second size, as the same code would
    src = "def h(x):\n    return x * 2 + x.size(0)\n"

    def make():
        ns = {}
        exec(compile(src, "<dyn-exec>", "exec"), ns)
        return ns["h"]

    torch._dynamo.reset()
    cdynamo.reset()
    dyn, cdy = RecordingBackend(), RecordingBackend()
    for n in (2, 3, 4):
        h, x = make(), torch.randn(n)
        torch.compile(h, backend=dyn)(x)
        assert_same(cdynamo.compile(h, backend=cdy)(x), h(x))
    torch._dynamo.reset()
    assert cdy.frame_count == dyn.frame_count == 3
    assert [_inputs_signature(e) for e in cdy.example_inputs] == \
        [_inputs_signature(e) for e in dyn.example_inputs]
    assert _inputs_signature(cdy.example_inputs[1])[0][0] == "symint"


def test_iterating_a_dynamic_tensor_specialises_its_length():
    def f(x):
        out = 0
        for row in x:
            out = out + row.sum()
        return out

    dyn, cdy = sweep(f, [(torch.randn(n, 3),) for n in (2, 3, 4)], dynamic=True)
    assert cdy.frame_count == dyn.frame_count == 3


def test_item_is_captured_with_capture_scalar_outputs():
    def f(x, y):
        return y * x.sum().int().item() + 1

    calls = [(torch.ones(3), torch.randn(4)), (torch.full((3,), 2.0), torch.randn(4))]
    _, cdy = sweep(f, calls)          # a graph break: two graphs, the second for each value
    assert cdy.frame_count == 3
    with cdynamo.config.patch(capture_scalar_outputs=True):
        cdynamo.reset()
        backend = CountingBackend()
        c = cdynamo.compile(f, backend=backend)
        for args in calls:
            assert_same(c(*args), f(*args))
        assert backend.frame_count == 1   # one graph, the item an unbacked symbol
        item = [n for n in backend.graphs[0].graph.nodes if n.target == "item"]
        assert item and isinstance(item[0].meta["example_value"], torch.SymInt)


def bool_of_sizes(x):
    n = x.size(0)
    return x * 2, bool(n % 3), bool(n > 4), bool(n % 2 == 0)


def test_bool_of_a_symbolic_size_is_a_symbool_not_a_guard():
    # bool(n % 3) is the SymBool n % 3 != 0 (a graph output), as torch._dynamo: it added a
    # guard on its value, so every flip recompiled (4 graphs where dynamo makes 1)
    def mark(args):
        cdynamo.mark_dynamic(args[0], 0)
        return args
    calls = [mark((torch.ones(n, 3),)) for n in (2, 3, 4, 5, 6, 7)]
    dyn, cdy = sweep(bool_of_sizes, calls, same_inputs=False)
    assert cdy.frame_count == dyn.frame_count == 1


def max_with_key_of_a_size(x):
    n = x.size(0) - 1
    c = max(n, 4, key=lambda v: -v)
    return x + 1, c


def test_builtin_refused_on_a_size_does_not_specialise_it():
    # max(n, 4, key=...) with n symbolic is a graph break; the refusal came after n had been
    # specialised (its guard kept), so the graph before the break stayed static: one graph
    # per size (9 over 7 sizes where torch._dynamo makes 4)
    dyn, cdy = sweep(max_with_key_of_a_size, [(torch.ones(n, 3),) for n in range(3, 10)],
                     same_inputs=False)
    assert cdy.frame_count <= 4


def test_tolist_is_captured_with_capture_scalar_outputs():
    # PyTorch's test_split_aot_autograd: i.tolist() of an integer tensor is the .item() of
    # each element (unbacked symbols), so fullgraph=True compiles, with capture_scalar_outputs
    # and (for that call, as torch._dynamo's tolist) without it; on a float tensor (as
    # torch._dynamo) it is a graph break
    def f(x, i):
        y, z = i.tolist()
        return torch.split(x, [y, z])

    def nested(t):
        return t.tolist(), t * 2

    x, i = torch.randn(10, requires_grad=True), torch.tensor([7, 3])
    cdynamo.reset()
    assert_same(cdynamo.compile(f, backend="eager", fullgraph=True)(x, i), f(x, i))
    with cdynamo.config.patch(capture_scalar_outputs=True):
        cdynamo.reset()
        backend = CountingBackend(cdynamo._backends.aot_eager)
        c = cdynamo.compile(f, backend=backend, fullgraph=True)
        for args in ((x, i), (x, torch.tensor([4, 6]))):
            assert_same(c(*args), f(*args), exact=False)
        assert backend.frame_count == 1 and sum(
            n.target == "item" for n in backend.graphs[0].graph.nodes) == 2
        for t in (torch.tensor([[1, 2], [3, 4]]), torch.tensor(5)):
            cdynamo.reset()
            out = cdynamo.compile(nested, backend="eager", fullgraph=True)(t)
            assert out[0] == t.tolist() and type(out[0]) is type(t.tolist())
        with pytest.raises(Exception, match="integer dtype"):
            cdynamo.reset()
            cdynamo.compile(nested, backend="eager", fullgraph=True)(torch.randn(2))


# ---- guards ------------------------------------------------------------------------------------------


def test_shape_guard_failure_recompiles_with_its_reason(caplog):
    def f(x):
        if x.size(0) > 5:
            return x * 2
        return x - 1

    cdynamo.reset()
    c = cdynamo.compile(f, backend="eager")
    c(torch.randn(6))
    c(torch.randn(7))          # dynamic: x.size(0) > 5 is now a SHAPE_GUARD
    entries = cdynamo.cache_entries(f)
    assert entries[0].recompile_reason.startswith("L['x'] TENSOR_MATCH: size mismatch at index 0")
    assert "expected 6, actual 7" in entries[0].recompile_reason
    assert "local 'x' TENSOR_MATCH size=[None], stride=[1]" in entries[0].guards
    assert "SHAPE_GUARD: 6 <= L['x'].size()[0]" in entries[0].guards
    c(torch.randn(8))          # served by the symbolic entry
    assert len(cdynamo.cache_entries(f)) == 2
    with caplog.at_level(logging.INFO, logger="cdynamo"):
        assert torch.equal(c(torch.ones(3)), torch.ones(3) - 1)
    reason = cdynamo.cache_entries(f)[0].recompile_reason
    assert reason == "SHAPE_GUARD: 6 <= L['x'].size()[0] failed (L['x'].size()[0] = 3)"
    assert any("recompiling" in r.getMessage() and reason in r.getMessage()
               for r in caplog.records if r.levelno == logging.INFO)


def _relu_then_break(x):
    y = x.relu()
    cdynamo.graph_break()     # not inlined: a frame of its own, recompiled for a new size
    return y + 1


def test_explain_lists_recompile_reasons():
    f = _relu_then_break

    def run(a, b):
        return f(a) + 1, f(b)

    out = cdynamo.explain(run)(torch.randn(3), torch.randn(5))
    reasons = [r.reason for r in out.recompile_reasons]
    assert any("size mismatch at index 0. expected 3, actual 5" in r for r in reasons), reasons
    assert "Recompile Reasons" in str(out)


def test_stride_and_int_guards_in_c():
    def f(x, n):
        return x.t().contiguous().view(-1)[: n * 2] * n

    calls = [(torch.randn(n, m), k) for n, m, k in ((3, 4, 2), (4, 5, 3), (5, 6, 4), (6, 3, 5))]
    sweep(f, calls)
    # an int that breaks a relation of the symbolic entry recompiles, with the reason
    entries = cdynamo.cache_entries(f)
    assert any(g.startswith("SHAPE_GUARD") for g in entries[0].guards)


def test_aliased_tensor_inputs_are_guarded():
    """A tensor passed twice shares one graph input; a later call with two different tensors
    must not reuse that entry (SAME_OBJECT)."""
    def f(a, b):
        return a + b * 2

    cdynamo.reset()
    c = cdynamo.compile(f, backend="eager")
    x, y = torch.ones(3), torch.zeros(3)
    assert torch.equal(c(x, x), f(x, x))
    assert torch.equal(c(x, y), f(x, y))
    assert "local 'b' SAME_OBJECT L['a']" in cdynamo.cache_entries(f)[1].guards


def test_no_python_call_on_the_guard_path():
    """The SHAPE_GUARDs of common programs are int64 programs, never Python callables."""
    from cdynamo import _shapes
    for expr in ("2 <= _v0", "((3*_v0) % (_v0 // 2)) == 0", "_v1 == _v0 and not _v0 < 3",
                 "max(_v0, _v1) >= -(-_v0 // 4)", "2 <= _v0 <= 9", "abs(_v0 - _v1) ** 2 != 1"):
        code, fn = _shapes._lower(expr, 2)
        assert code is not None and fn is None, expr
    code, fn = _shapes._lower("_v0 / 2 > 1.5", 1)     # floats: a Python fallback
    assert code is None and fn(4) is True


def test_floor_division_and_modulo_match_python():
    """Programs over negative values use Python's floor semantics (the symbol - 7 is negative
    for small sizes)."""
    def f(x):
        k = (x.size(0) - 7) // 3 + (x.size(0) - 7) % 3
        if k > -2:
            return x * 2
        return x - 1

    sweep(f, [(torch.randn(n),) for n in (3, 4, 2, 5, 6, 9, 3)])


# ---- backends: dynamic kernels and warm start ------------------------------------------------------


def test_inductor_symbolic_graph_serves_three_sizes_with_one_compile():
    def f(x):
        return torch.sin(x) * x.size(0) + x.sum(-1, keepdim=True)

    cdynamo.reset()
    cdynamo.reset_counters()
    seen = []

    def spy(gm, example_inputs):
        seen.append(_inputs_signature(example_inputs))
        from torch._inductor.compile_fx import compile_fx
        return compile_fx(gm, example_inputs)

    c = cdynamo.compile(f, backend=spy, dynamic=True)
    for n in (3, 5, 8):
        x = torch.randn(n, 4)
        assert_same(c(x), f(x), exact=False)
    assert cdynamo.counters()["compiles"] == 1 and len(seen) == 1
    assert seen[0][0][0] == "symint"


def test_aot_eager_training_with_dynamic_shapes():
    def step(x, w):
        return ((x @ w).relu() * x.size(0)).sum()

    cdynamo.reset()
    c = cdynamo.compile(step, backend="aot_eager")
    for n in (3, 4, 5, 6):
        x = torch.randn(n, 4)
        w1 = torch.randn(4, 2, requires_grad=True)
        w2 = w1.detach().clone().requires_grad_()
        c(x, w1).backward()
        step(x, w2).backward()
        assert torch.allclose(w1.grad, w2.grad, atol=1e-5)


def _cached_fn(x):
    return torch.cos(x) * 2 + x.size(0)


_CACHE_CHILD = r"""
import json, sys, torch, cdynamo
from torch._dynamo.utils import counters
def _cached_fn(x):
    return torch.cos(x) * 2 + x.size(0)
out = cdynamo.compile(_cached_fn, backend="inductor")(torch.ones(4, 3))
assert torch.allclose(out, _cached_fn(torch.ones(4, 3)))
print(json.dumps({"inductor": dict(counters["inductor"]),
                  "aot_autograd": dict(counters["aot_autograd"])}))
"""


def test_warm_start_hits_torch_caches_from_a_second_process(tmp_path):
    """This process compiles a graph with "inductor" (filling torch's FX graph cache and
    AOTAutograd cache, no "No shape env" bypass); a fresh process compiling the same program
    with the same TORCHINDUCTOR_CACHE_DIR finds both. The cache directory starts empty, and this
    process compiles another graph first, so the child's graphs are numbered differently: what
    cdynamo attaches to a graph must not enter torch's cache keys (it did: CI, a cold cache)."""
    from torch._dynamo.utils import counters
    from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir
    cdynamo.reset()
    with temporary_cache_dir(str(tmp_path)):
        cdynamo.compile(lambda x: x.sin() - 1, backend="eager")(torch.ones(2))
        counters.clear()
        out = cdynamo.compile(_cached_fn, backend="inductor")(torch.ones(4, 3))
        assert torch.allclose(out, _cached_fn(torch.ones(4, 3)))
        here = counters["inductor"]
        assert here.get("fxgraph_cache_miss", 0) == 1, dict(here)
        assert here.get("fxgraph_cache_bypass", 0) == 0
        assert counters["aot_autograd"].get("autograd_cache_saved", 0) == 1, \
            dict(counters["aot_autograd"])
        # the child imports the cdynamo under test (src/ with an in-place build, or the venv's
        # site-packages under `make test`)
        src = os.path.dirname(os.path.dirname(os.path.abspath(cdynamo.__file__)))
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path),
                   PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
        r = subprocess.run([sys.executable, "-c", _CACHE_CHILD], env=env, capture_output=True,
                           text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Bypassing FX Graph Cache" not in r.stderr
    child = json.loads(r.stdout.strip().splitlines()[-1])
    assert child["inductor"].get("fxgraph_cache_hit", 0) == 1, child
    assert child["aot_autograd"].get("autograd_cache_hit", 0) == 1, child


def test_constant_sequences_indexed_or_repeated_by_a_size_specialise():
    """"abcdef"[: n % 4] and (1, 2) * (n % 3) with n a symbolic size: the size's value is used
    (guarded), as torch._dynamo; they were graph breaks, which made a resume function and a
    graph of size arithmetic per size (9 graphs, torch._dynamo 7)."""
    def f(x):
        n = x.size(0)
        return torch.cat([x[:1]] * (n // 3) + [x]), ("abcdef"[: n % 4], (1, 2) * (n % 3))

    dyn, cdy = sweep(f, [(torch.randn(n, 3),) for n in (4, 5, 6, 7, 9, 12, 13)],
                     same_inputs=False)
    assert cdy.frame_count == dyn.frame_count == 7


def test_sorting_symbolic_sizes_is_a_graph_break():
    """sorted() of a list holding a symbolic size breaks the graph there, as torch._dynamo
    ("sort with non-constant keys"): no guard on the order of the sizes, so one graph serves
    sizes on both sides of the constants (was 3 graphs, torch._dynamo 2)."""
    def f(x):
        return (x.new_zeros(min(x.shape), max(x.shape[1:])), min(x.shape),
                sorted([x.size(0), 3, 7]))

    calls = [(torch.randn(n, n % 4 + 2),) for n in (4, 5, 6, 7, 9, 12, 13)]
    dyn, cdy = sweep(f, calls)
    assert cdy.frame_count == dyn.frame_count == 2
    ex = cdynamo.explain(f)(torch.randn(5, 3))
    assert ex.graph_break_count == 0    # static sizes: sorted() on constants is folded
    cdynamo.reset()
    c = cdynamo.compile(f, backend="eager", dynamic=True)
    assert c(torch.randn(9, 3))[2] == [3, 7, 9]
    assert c(torch.randn(5, 3))[2] == [3, 5, 7]


def test_resume_function_without_ops_runs_as_it_is():
    """A trace that returns without one op in its graph is not compiled: its code runs as it is
    from then on (torch._dynamo's "No ops traced" skip). Here the resume function after the
    print only appends y.size(0) + 1: it is skipped on its first (static) call, so no graph of
    size arithmetic is compiled when the sizes change (was 3 graphs, torch._dynamo 2)."""
    def f(x, log):
        y = x * 2
        print("", end="")
        log.append(y.size(0) + 1)
        return y

    calls = [(torch.randn(n, 3), []) for n in (4, 5, 6, 7, 9)]
    cdynamo.reset_counters()
    dyn, cdy = sweep(f, calls)
    assert cdy.frame_count == dyn.frame_count == 2
    assert cdynamo.counters()["skipped"] >= 1 and cdynamo.counters()["unmodified"] == 0
    log = []
    cdynamo.compile(f, backend="eager")(torch.randn(11, 3), log)
    assert log == [12]


def test_frame_without_ops_is_skipped_but_fullgraph_compiles_it():
    def g(a, b):
        return a + b

    cdynamo.reset()
    cdynamo.reset_counters()
    c = cdynamo.compile(g, backend="eager")
    assert c(1, 2) == 3 and c(3, 4) == 7
    assert cdynamo.cache_entries(g) == [] and cdynamo.counters()["compiles"] == 0
    assert cdynamo.counters()["skipped"] == 1
    cdynamo.reset()
    c = cdynamo.compile(g, backend="eager", fullgraph=True)
    assert c(1, 2) == 3
    assert len(cdynamo.cache_entries(g)) == 1


STATE = {"step": 0, "scale": 2}


def test_store_into_a_global_dict_does_not_guard_the_old_value():
    """STATE["step"] = n stores without reading: the old value is not guarded (as
    torch._dynamo), so the next call with another value is a cache hit (was one graph per
    call); the key read (STATE["scale"]) is guarded."""
    def f(x):
        STATE["step"] = x.size(0) * 2
        STATE["last"] = x.size(1)
        return x * STATE["scale"]

    STATE.clear()
    STATE.update(step=0, scale=2)
    calls = [(torch.randn(n, 3),) for n in (4, 5, 6, 7, 9)]
    dyn, cdy = sweep(f, calls)
    assert STATE == {"step": 18, "scale": 2, "last": 3}
    assert cdy.frame_count == dyn.frame_count == 2
    STATE["scale"] = 3            # read: guarded
    x = torch.randn(8, 3)
    cdynamo.reset()
    c = cdynamo.compile(f, backend="eager")
    assert_same(c(x), x * 3)
    STATE["scale"] = 4
    assert_same(c(x), x * 4)
    assert len(cdynamo.cache_entries(f)) == 2


def test_stores_into_an_input_dict_then_reads_it_whole():
    """Stores into a dict argument wait unread until the dict is read whole: the order, the
    overwritten and new keys and the values are eager's."""
    def f(x, d):
        d["c"] = x * 2
        d["a"] = x.size(0)
        y = x + d["a"]
        return y, list(d), [type(v).__name__ for v in d.values()], len(d)

    for mk in (dict, OrderedDict):
        c = cdynamo.compile(f, backend="eager")
        for n in (3, 4, 5):
            x = torch.randn(n, 2)
            d1, d2 = mk(a=1, b=2), mk(a=1, b=2)
            assert_same(c(x, d2), f(x, d1))
            assert list(d1) == list(d2) and type(d1) is type(d2)
            assert_same(list(d1.values()), list(d2.values()))
        cdynamo.reset()


@pytest.mark.parametrize("rnn", ["GRU", "LSTM"])
def test_rnn_module_over_growing_lengths_stops_recompiling(rnn):
    """nn.GRU / nn.LSTM cannot be inlined and a call_module node specialises a symbolic length
    (one graph per length until the cache limit; torch._dynamo does not trace RNN modules at
    all): on symbolic sizes the call is a graph break, so the first graph holds the RNN and
    the graphs after the break serve every length."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = getattr(nn, rnn)(6, 8, batch_first=True)

        def forward(self, x):
            out, h = self.rnn(x)
            h = h[0] if isinstance(h, tuple) else h
            return out[:, -1] + h[0]

    torch.manual_seed(0)
    m = M()
    cdy = RecordingBackend()
    c = cdynamo.compile(m, backend=cdy)
    cdynamo.reset_counters()
    for k, n in enumerate((4, 5, 6, 7, 9, 12, 13, 15, 17, 20)):
        x = torch.randn(2, n, 6)
        assert_same(c(x), m(x), f"length {n}", exact=False)
        if k == 4:
            after_five = cdy.frame_count
    # the static graph, then after the break at most a static and a dynamic one
    assert cdy.frame_count == after_five <= 3, (cdy.frame_count, after_five)
    assert cdynamo.counters()["cache_limit_hits"] == 0


def test_torch_sym_functions_of_sizes():
    """torch.sym_max / sym_min / sym_int / sym_float on sizes are traced (constants folded,
    symbolic ones recorded as torch.sym_max, ...): they were graph breaks (trace rule skip),
    with a resume function per call and an int guarded per size (5 graphs, torch._dynamo 2)."""
    def f(x):
        n = x.size(0)
        return (x[: torch.sym_max(n - 5, 1)], torch.sym_min(n, 6), torch.sym_int(n / 2),
                torch.sym_float(n), torch.sym_max(2.0, 1))

    dyn, cdy = sweep(f, [(torch.randn(n, 3),) for n in (4, 5, 6, 7, 9, 12, 13)])
    assert cdy.frame_count == dyn.frame_count == 2
    assert cdynamo.explain(f)(torch.randn(5, 3)).graph_break_count == 0


def test_float_output_under_inductor_specialises_instead_of_failing():
    """A float input made dynamic whose arithmetic is returned (`s * 2`): inductor cannot
    return a SymFloat (InductorError, raised to the user as BackendCompilerFailed before);
    the trace restarts with the float inputs static. torch.compile returns a stale 1.5 on the
    third call here."""
    def f(x, s):
        return x * s, s * 2

    compiled = cdynamo.compile(f, backend="inductor")
    for i in range(3):
        s = i * 0.5 + 0.25
        out, twice = compiled(torch.ones(3), s)
        torch.testing.assert_close(out, torch.full((3,), s))
        assert twice == s * 2 and type(twice) is float


def test_torch_dynamo_capture_scalar_outputs_setting_is_honoured():
    """A program written for torch.compile that patches torch._dynamo.config
    (capture_scalar_outputs=True, as PyTorch's own tests do) gets .item() in the graph under
    cdynamo too: one graph under fullgraph=True, eager's result."""
    import torch._dynamo

    def f(t):
        return torch.ones(2) * (t.item() * 2)

    t = torch.tensor(3.0)
    cdynamo.reset()
    with pytest.raises(Exception):
        cdynamo.compile(f, backend="eager", fullgraph=True)(t)
    cdynamo.reset()
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        out = cdynamo.compile(f, backend="eager", fullgraph=True)(t)
    assert torch.equal(out, f(t))
    cdynamo.reset()


# ---- torch._check on sizes: a graph node, its symbols graph inputs ------------------------

def _check_sizes(x, y, z):
    z += 7
    u0 = z.item()
    s0, s1 = x.size(0), y.size(0)
    torch._check(s0 < 100)
    torch._check(s1 < 100)
    torch._check(u0 == s0 + s1)
    return x, y, z


def test_check_on_sizes_is_a_graph_assertion():
    """torch._check(s0 < 100) on the size of a tensor the graph does not take is recorded in
    the graph as torch._dynamo records it (an _assert_scalar of `s77 < 100`, s77 a SymInt
    input), so the ShapeEnv's deferred assertion Eq(u0, s17 + s77) finds its symbols bound:
    inductor's code failed with NameError: name 's17' is not defined (test_misc's
    test_sym_constrain_range_on_replaced_unbacked_symbol); and a later call that breaks the
    assertion raises RuntimeError."""
    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        return gm

    x, y = torch.randn(16, 10), torch.randn(16, 10)
    torch._dynamo.mark_dynamic(x, 0)
    torch._dynamo.mark_dynamic(y, 0)
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        cdynamo.reset()
        cdynamo.compile(_check_sizes, backend=capture, fullgraph=True)(x, y, torch.tensor(25))
        phs = [n for n in graphs[0].graph.nodes if n.op == "placeholder"]
        assert [type(n.meta["example_value"]).__name__ for n in phs] == \
            ["FakeTensor", "SymInt", "SymInt"]
        asserts = [n.args[1] for n in graphs[0].graph.nodes
                   if n.target is torch.ops.aten._assert_scalar.default]
        assert any("< 100" in a for a in asserts) and any("Eq(u0" in a for a in asserts)
        cdynamo.reset()
        opt = cdynamo.compile(_check_sizes, backend="inductor", fullgraph=True)
        out = opt(x, y, torch.tensor(25))
        assert out[2].item() == 32
        with pytest.raises(RuntimeError):
            opt(torch.randn(20, 10), torch.randn(20, 10), torch.tensor(25))


def test_dynamic_sources_config_marks_inputs_dynamic():
    """torch.compiler.config.dynamic_sources (TORCH_COMPILE_DYNAMIC_SOURCES) names sources
    compiled dynamic from the first call, as torch._dynamo reads it: an int and a tensor
    input by name, a regex, a ":N" dim suffix; dominant over dynamic=False (test_misc's
    test_dynamic_sources_*: one graph per value before)."""
    def scale(x):
        return torch.ones(5) * x

    def square(x):
        return x * x

    cases = [("L['x']", scale, [1, 2, 3], {}),
             ("L['x']", square, [torch.randn(2), torch.randn(3), torch.randn(4)], {}),
             (r"L\['x.*'\]:0", square, [torch.randn(2, 3), torch.randn(4, 3)], {}),
             ("L['x']", square, [torch.randn(2), torch.randn(3)], {"dynamic": False})]
    for spec, fn, inputs, kw in cases:
        with torch.compiler.config.patch(dynamic_sources=spec):
            cdynamo.reset()
            counter = CountingBackend()
            opt = cdynamo.compile(fn, backend=counter, **kw)
            for x in inputs:
                assert_same(opt(x), fn(x))
            assert counter.frame_count == 1, (spec, fn.__name__, kw)
