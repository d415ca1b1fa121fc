"""Regional compilation (cdynamo/_regions.py, cdynamo.config.regional_compile): repeated
blocks outlined into torch.ops.higher_order.invoke_subgraph calls of one subgraph per
distinct body, for torch.compiler.nested_compile_region functions (as torch.compile) and,
in "auto" mode, for the repeated nn.Module calls of a frame when the backend runs
AOTAutograd."""
import logging
import operator

import pytest
import torch
import torch.nn as nn

from conftest import requires_engine
from helpers import assert_same

pytestmark = requires_engine

ISG = torch.ops.higher_order.invoke_subgraph


class Block(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(torch.relu(self.lin(x))) + x


class Stack(nn.Module):
    def __init__(self, widths=(8, 8, 8, 8), block=Block):
        super().__init__()
        self.blocks = nn.ModuleList([block(w) for w in widths])
        self.widths = widths

    def forward(self, x):
        for i, b in enumerate(self.blocks):
            if i and self.widths[i] != self.widths[i - 1]:
                x = x.repeat(1, self.widths[i] // self.widths[i - 1])
            x = b(x)
        return x.sum(-1)


def _aot_recorder(graphs):
    """A backend that records the graph it is given and compiles it with aot_eager; listed
    among the backends for which "auto" outlines modules (a named AOTAutograd backend)."""
    from cdynamo._backends import aot_eager

    def aot_recorder(gm, example_inputs):
        graphs.append(gm)
        return aot_eager(gm, example_inputs)
    return aot_recorder


@pytest.fixture
def recorder(monkeypatch):
    from cdynamo import _regions
    monkeypatch.setattr(_regions, "AUTO_BACKENDS", _regions.AUTO_BACKENDS + ("aot_recorder",))
    monkeypatch.setattr(_regions, "AUTOGRAD_BACKENDS",
                        _regions.AUTOGRAD_BACKENDS + ("aot_recorder",))
    graphs = []
    return graphs, _aot_recorder(graphs)


def _calls(gm):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is ISG]


def _subgraphs(gm):
    return {n.args[0].target for n in _calls(gm)}


def _train_step(model, compiled, x):
    """Loss and parameter gradients of one forward/backward, eager and compiled."""
    out = []
    for fn in (model, compiled):
        model.zero_grad()
        loss = fn(x).pow(2).mean()
        loss.backward()
        out.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
    return out


def test_auto_outlines_repeated_modules_once(recorder):
    import cdynamo
    graphs, backend = recorder
    model = Stack()
    x = torch.randn(3, 8)
    with torch.no_grad():
        assert_same(cdynamo.compile(model, backend=backend)(x), model(x), exact=False)
    assert len(graphs) == 1
    calls = _calls(graphs[0])
    assert len(calls) == 4 and len(_subgraphs(graphs[0])) == 1
    # the body is one block's operations, its parameters among the inputs of each call
    body = getattr(graphs[0], calls[0].args[0].target)
    ops = [n for n in body.graph.nodes if n.op == "call_function" or n.op == "call_method"]
    assert len(ops) == 4
    assert len(calls[0].args) == 2 + 1 + 4   # subgraph, identifier, x, weight/bias x2
    assert calls[1].args[3] is not calls[0].args[3]   # each block's own weight


def test_auto_keeps_training_graphs_inline(recorder):
    """Unannotated blocks that need autograd stay inline (AOTAutograd re-traces every
    invoke_subgraph call of a training graph): eager's gradients, a flat graph."""
    import cdynamo
    from cdynamo import _regions
    graphs, backend = recorder
    model = Stack()
    x = torch.randn(3, 8, requires_grad=True)
    n0 = len(_regions.region_log)
    (le, ge), (lc, gc) = _train_step(model, cdynamo.compile(model, backend=backend), x)
    assert_same(lc, le, exact=False)
    assert_same(gc, ge, exact=False)
    assert _calls(graphs[0]) == []
    assert not any(e["subgraph"] for e in _regions.region_log[n0:])


def test_auto_groups_blocks_by_structure(recorder):
    import cdynamo
    graphs, backend = recorder
    model = Stack(widths=(8, 8, 16, 16, 16))
    x = torch.randn(2, 8)
    with torch.no_grad():
        assert_same(cdynamo.compile(model, backend=backend)(x), model(x), exact=False)
    calls = _calls(graphs[0])
    assert len(calls) == 5
    by_body = {}
    for c in calls:
        by_body.setdefault(c.args[0].target, []).append(c)
    assert sorted(len(v) for v in by_body.values()) == [2, 3]


def test_off_and_annotated_modes_keep_modules_inline(recorder):
    import cdynamo
    graphs, backend = recorder
    model = Stack()
    x = torch.randn(3, 8)
    for mode in ("off", "annotated"):
        cdynamo.reset()
        with cdynamo.config.patch(regional_compile=mode):
            assert_same(cdynamo.compile(model, backend=backend)(x), model(x), exact=False)
        assert _calls(graphs[-1]) == []


def test_auto_leaves_eager_backends_flat():
    import cdynamo
    graphs = []

    def rec(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    model = Stack()
    x = torch.randn(3, 8)
    assert_same(cdynamo.compile(model, backend=rec)(x), model(x), exact=False)
    assert _calls(graphs[0]) == []


class InplaceBlock(Block):
    def forward(self, x):
        y = self.lin(x)
        y.mul_(2)
        return self.norm(y) + x


def test_in_place_blocks_are_not_outlined(recorder, caplog):
    import cdynamo
    from cdynamo import _regions
    graphs, backend = recorder
    model = Stack(block=InplaceBlock)
    x = torch.randn(3, 8)
    with torch.no_grad(), caplog.at_level(logging.DEBUG, logger="cdynamo.regional"):
        assert_same(cdynamo.compile(model, backend=backend)(x), model(x), exact=False)
    assert _calls(graphs[0]) == []
    assert any("in-place" in (e["reason"] or "") for e in _regions.region_log)


def test_dynamic_shapes(recorder):
    import cdynamo
    graphs, backend = recorder
    model = Stack()
    compiled = cdynamo.compile(model, backend=backend, dynamic=True)
    for n in (3, 5, 7):
        x = torch.randn(n, 8)
        with torch.no_grad():
            assert_same(compiled(x), model(x), exact=False)
    assert len(graphs) == 1 and len(_calls(graphs[0])) == 4
    assert len(_subgraphs(graphs[0])) == 1


def _marked_model():
    class MarkedBlock(Block):
        @torch.compiler.nested_compile_region
        def forward(self, x):
            return self.norm(torch.relu(self.lin(x))) + x
    return Stack(block=MarkedBlock)


def _dynamo_graphs(model, x):
    import torch._dynamo
    graphs = []

    def rec(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    torch._dynamo.reset()
    with torch.no_grad():
        out = torch.compile(model, backend=rec)(x)
    torch._dynamo.reset()
    return out, graphs


def test_nested_compile_region_one_graph_as_torch_dynamo():
    """Today's torch._dynamo: one graph with invoke_subgraph nodes (it inlines the first
    call); cdynamo: one graph, every call an invoke_subgraph of one body."""
    import cdynamo
    model = _marked_model()
    x = torch.randn(3, 8)
    ref_out, ref_graphs = _dynamo_graphs(model, x)
    graphs = []

    def rec(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    with torch.no_grad():
        out = cdynamo.compile(model, backend=rec)(x)
        assert_same(out, model(x), exact=False)
    assert_same(out, ref_out, exact=False)
    assert len(graphs) == len(ref_graphs) == 1
    assert len(_calls(graphs[0])) == 4 >= len(_calls(ref_graphs[0]))
    assert len(_subgraphs(graphs[0])) == 1


def test_nested_compile_region_trains_with_aot_backends():
    import cdynamo
    from cdynamo import _regions
    model = _marked_model()
    x = torch.randn(3, 8, requires_grad=True)
    n0 = len(_regions.region_log)
    (le, ge), (lc, gc) = _train_step(model, cdynamo.compile(model, backend="aot_eager"), x)
    assert_same(lc, le, exact=False)
    assert_same(gc, ge, exact=False)
    assert [(e["kind"], e["calls"]) for e in _regions.region_log[n0:] if e["subgraph"]] == \
        [("annotated", 4)]


def test_nested_compile_region_needing_autograd_stays_flat_for_eager_backends():
    """torch runs invoke_subgraph's backward only under AOTAutograd (torch.compile with
    backend="eager" fails in backward): cdynamo keeps those calls inline for such backends."""
    import cdynamo
    model = _marked_model()
    x = torch.randn(3, 8)
    (le, ge), (lc, gc) = _train_step(model, cdynamo.compile(model, backend="eager"), x)
    assert_same(lc, le, exact=False)
    assert_same(gc, ge, exact=False)


def test_nested_compile_region_function_with_side_effect_and_break():
    import cdynamo
    seen = []

    @torch.compiler.nested_compile_region
    def region(x, k):
        seen.append(k)
        return torch.sin(x) * k

    def fn(x):
        y = region(x, 2) + region(x + 1, 2)
        print("break")   # a graph break between regions
        return region(y, 3)

    x = torch.randn(4)
    with torch.no_grad():
        expected = fn(x)
        del seen[:]
        assert_same(cdynamo.compile(fn, backend="aot_eager")(x), expected, exact=False)
    assert seen == [2, 2, 3]


def test_max_reuse_entries_as_torch():
    import cdynamo

    @torch.compiler.nested_compile_region(max_reuse_entries=1)
    def region(x):
        return torch.cos(x) + 1

    def fn(x, y):
        return region(x).sum() + region(y).sum()

    with torch.no_grad(), pytest.raises(RuntimeError, match="max_reuse_entries=1"):
        cdynamo.compile(fn, backend="aot_eager")(torch.randn(4), torch.randn(5))


def test_backend_failure_on_outlined_graph_falls_back_to_flat(caplog):
    import cdynamo
    model = _marked_model()
    x = torch.randn(3, 8)
    seen = []

    def picky(gm, example_inputs):
        seen.append(len(_calls(gm)))
        if _calls(gm):
            raise NotImplementedError("no invoke_subgraph here")
        return gm.forward
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="cdynamo.regional"):
        assert_same(cdynamo.compile(model, backend=picky)(x), model(x), exact=False)
    assert seen == [4, 0]
    assert "compiling the flat graph" in caplog.text


def test_config_validation():
    import cdynamo
    with pytest.raises(ValueError, match="'auto', 'annotated', 'off'"):
        cdynamo.config.regional_compile = "sometimes"
    assert cdynamo.config.regional_compile == "auto"


def test_outputs_used_later_and_getitem_wiring(recorder):
    """A block whose intermediate value is used after it (an auxiliary output), called in a
    chain: every use is rewired to the right invoke_subgraph output."""
    import cdynamo
    graphs, backend = recorder

    class Aux(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(6, 6)
            self.b = nn.Linear(6, 6)

        def forward(self, x):
            h = torch.tanh(self.a(x))
            return self.b(h) + x, h * 2

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Aux() for _ in range(3)])

        def forward(self, x):
            hs = []
            for layer in self.layers:
                x, h = layer(x)
                hs.append(h)
            return x, torch.stack(hs)

    model = Net()
    x = torch.randn(2, 6)
    with torch.no_grad():
        assert_same(cdynamo.compile(model, backend=backend)(x), model(x), exact=False)
    calls = _calls(graphs[0])
    assert len(calls) == 3
    for c in calls:
        assert sorted(u.args[1] for u in c.users if u.target is operator.getitem) == [0, 1]


def test_inductor_outlines_inference_and_keeps_training_flat():
    """With inductor, blocks are outlined where no autograd goes through them (no_grad
    forward); a forward that needs gradients keeps them inline."""
    import cdynamo
    from cdynamo import _regions
    model = Stack()
    x = torch.randn(3, 8, requires_grad=True)
    compiled = cdynamo.compile(model, backend="inductor")
    n0 = len(_regions.region_log)
    with torch.no_grad():
        assert_same(compiled(x), model(x), exact=False)
    assert [e["calls"] for e in _regions.region_log[n0:] if e["subgraph"]] == [4]
    cdynamo.reset()
    n0 = len(_regions.region_log)
    (le, ge), (lc, gc) = _train_step(model, cdynamo.compile(model, backend="inductor"), x)
    assert_same(lc, le, exact=False)
    assert_same(gc, ge, exact=False)
    assert not any(e["subgraph"] for e in _regions.region_log[n0:])


def test_explain_lists_regions():
    import cdynamo
    model = _marked_model()
    x = torch.randn(3, 8)
    with torch.no_grad():
        out = cdynamo.explain(model)(x)
    assert [(r["kind"], r["calls"]) for r in out.regions if r["subgraph"]] == [("annotated", 4)]
    assert "4 call(s) share subgraph_0" in str(out)


def test_nested_regions_outer_one_wins():
    """A nested_compile_region function calling another: the outer calls become the
    invoke_subgraph calls (the inner ones are inside their body)."""
    import cdynamo

    @torch.compiler.nested_compile_region
    def inner(x):
        return torch.sin(x) + 1

    @torch.compiler.nested_compile_region
    def outer(x):
        return inner(x) * inner(x + 1)

    def fn(x):
        return outer(x) + outer(x * 2)

    graphs = []

    def rec(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    x = torch.randn(5)
    with torch.no_grad():
        assert_same(cdynamo.compile(fn, backend=rec)(x), fn(x), exact=False)
    calls = _calls(graphs[0])
    assert len(calls) == 2 and len(_subgraphs(graphs[0])) == 1
