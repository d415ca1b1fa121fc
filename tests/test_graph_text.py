"""The FX graph a backend receives reads as torch._dynamo's: graph inputs named after their
sources as torch._dynamo names them (L['x'] -> placeholder L_x_, node l_x_), and every call
node carrying node.meta["stack_trace"] with the user's line, which FX's print_readable uses
to group the nodes (PyTorch's own tests compare these printouts with assertExpectedInline).
Also: under fullgraph=True a function returning an input tensor untouched still hands its
(empty) graph to the backend, as torch._dynamo does."""
import functools

import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter, EagerAndRecordGraphs, normalize_gm

import cdynamo


def _printouts(compile_fn, fn, *args, **kw):
    backend = EagerAndRecordGraphs()
    torch._dynamo.reset()
    cdynamo.reset()
    compile_fn(fn, backend=backend, **kw)(*args)
    return [normalize_gm(g.print_readable(print_output=False)) for g in backend.graphs]


def _same_text(fn, *args, **kw):
    ours = _printouts(cdynamo.compile, fn, *args, **kw)
    theirs = _printouts(torch.compile, fn, *args, **kw)
    assert ours == theirs
    return ours


def test_placeholders_named_as_torch_dynamo_and_grouped_by_line():
    def fn(x, y):
        if x.sum() > 0:
            return x + y
        return x * y

    texts = _same_text(fn, torch.zeros(3), torch.ones(3))
    assert len(texts) == 2
    assert 'def forward(self, L_x_: "f32[3]"):' in texts[0]
    assert "l_x_ = L_x_" in texts[0]


def test_partial_keywords_and_inlined_lines():
    """Nodes of an inlined function's lines form their own groups (blank lines between
    lines, as torch._dynamo's stack traces make them)."""
    def inner(x, y, scale):
        a = x * scale
        b = torch.mul(a, y)
        return b + 1

    def fn(x, y):
        p = functools.partial(inner, scale=2.0)
        z = p(x, y)
        return z.sin()

    texts = _same_text(fn, torch.ones(2, 2), torch.ones(2, 2))
    assert texts[0].count("\n\n") >= 4


def test_stack_trace_meta_names_the_user_line():
    def fn(x):
        y = x.cos()
        return y + 1

    backend = EagerAndRecordGraphs()
    cdynamo.compile(fn, backend=backend)(torch.ones(2))
    calls = [n for n in backend.graphs[0].graph.nodes if n.op == "call_method" or
             n.op == "call_function"]
    assert len(calls) == 2
    for node, code in zip(calls, ("y = x.cos()", "return y + 1")):
        assert f'in fn\n    {code}' in node.meta["stack_trace"]
        assert __file__ in node.meta["stack_trace"]


def test_fullgraph_returning_an_input_compiles_its_graph():
    """torch._dynamo hands a graph to the backend for a fullgraph frame that returns a lone
    input tensor with no operation (its frame counts); a returned tuple of inputs, or a
    frame without fullgraph, makes none."""
    def lone(x, y):
        functools.reduce(lambda a, b: (a, b), [y])
        return x

    def pair(x):
        return (x, x)

    for fn, n_args in ((lone, 2), (pair, 1)):
        for fullgraph in (True, False):
            counts = []
            for compile_fn in (torch.compile, cdynamo.compile):
                torch._dynamo.reset()
                cdynamo.reset()
                cnt = CompileCounter()
                args = [torch.ones(2)] * n_args
                out = compile_fn(fn, backend=cnt, fullgraph=fullgraph)(*args)
                assert out is args[0] or out == (args[0], args[0])
                counts.append((cnt.frame_count, cnt.op_count))
            assert counts[0] == counts[1], (fn.__name__, fullgraph, counts)
    torch._dynamo.reset()
