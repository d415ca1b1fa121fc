"""torch._higher_order_ops.wrap.wrap(fn, *args, **kwargs) is traced as torch._dynamo traces it
(WrapHigherOrderVariable): fn's body becomes a subgraph wrap_body_<i> (a GraphModule on the
graph) whose inputs are the tensors and symbolic ints it uses (arguments, closures, globals,
module parameters), lifted in order of first use, and the call one
torch.ops.higher_order.wrap(wrap_body_<i>, *lifted) node. A side effect on a value from outside
the body is torch._dynamo's fallback: a graph break, wrap runs in Python. Results are compared
with eager, graph counts and the wrap nodes (nesting, number of arguments) with torch._dynamo
on the same function (tests mirror pytorch's test/dynamo/test_higher_order_ops.py)."""
import enum

import pytest
import torch
import torch._dynamo
from torch._higher_order_ops.wrap import wrap
from torch.utils.checkpoint import checkpoint

import cdynamo
from helpers import CountingBackend, assert_same

global_tensor = torch.randn(3)
global_float = 2.5


def wrap_nodes(gm):
    """[(number of args, nested wrap_nodes of its body)] for the wrap nodes of gm, in order."""
    out = []
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is wrap:
            body = getattr(gm, n.args[0].target)
            out.append((len(n.args), wrap_nodes(body)))
    return out


def run_both(fn, args_list, dynamic=None, fullgraph=True):
    """fn under torch._dynamo and cdynamo over each args tuple of args_list; results compared
    with eager. Returns (cdynamo backend, torch._dynamo backend)."""
    torch._dynamo.reset()
    dyn = CountingBackend()
    dfn = torch.compile(fn, backend=dyn, fullgraph=fullgraph, dynamic=dynamic)
    for args in args_list:
        dfn(*args)
    torch._dynamo.reset()
    cdynamo.reset()
    cdy = CountingBackend()
    cfn = cdynamo.compile(fn, backend=cdy, fullgraph=fullgraph, dynamic=dynamic)
    for i, args in enumerate(args_list):
        assert_same(cfn(*args), fn(*args), f"call {i}")
    return cdy, dyn


def check(fn, *args, calls=2):
    """One graph with the same wrap nodes (nesting and argument counts) as torch._dynamo."""
    cdy, dyn = run_both(fn, [args] * calls)
    assert cdy.frame_count == dyn.frame_count == 1
    got = [wrap_nodes(gm) for gm in cdy.graphs]
    assert got == [wrap_nodes(gm) for gm in dyn.graphs]
    assert got[0], "no wrap node"
    return cdy


def test_no_freevars():
    cdy = check(lambda x: wrap(lambda x: torch.sin(x), x), torch.randn(3))
    assert wrap_nodes(cdy.graphs[0]) == [(2, [])]


def test_unused_argument_is_not_lifted():
    freevar = torch.randn(3)
    # the body ignores x and returns the closure's tensor: only that tensor is lifted
    cdy = check(lambda x: wrap(lambda x: freevar, x), torch.randn(3))
    assert wrap_nodes(cdy.graphs[0]) == [(2, [])]


def test_captures():
    y = torch.randn(3, 3)
    const = 4.0
    check(lambda x: wrap(lambda x: x + y, x), torch.randn(3, 3))                   # closure
    check(lambda x: wrap(lambda x: x + global_tensor, x), torch.randn(3))         # global
    check(lambda x: wrap(lambda x: x * const + global_float, x), torch.randn(3))  # constants
    check(lambda x, y: wrap(lambda x: x + y, x), torch.randn(3), torch.randn(3))  # argument


def test_untracked_tensor_captured():
    def f(x):
        t = torch.ones(3) * 2     # made in the trace, before the body
        return wrap(lambda x: x + t, x)

    check(f, torch.randn(3))


def test_nested_and_inlined_calls():
    y = torch.randn(3)

    def g(a, b):
        return a * b

    cdy = check(lambda x: wrap(lambda x: wrap(lambda x: x + y, x), x), torch.randn(3))
    assert wrap_nodes(cdy.graphs[0]) == [(3, [(3, [])])]
    check(lambda x: wrap(lambda x: g(x, y), x), torch.randn(3))
    check(lambda x: wrap(lambda x: x.cos(), x) + wrap(lambda x: x.sin(), x), torch.randn(3))


def test_kwargs():
    def fn(*, x, y, z=None):
        if z is None:
            return x * 2 + y
        return 2 * x

    x, y = torch.randn(3), torch.randn(3, 3)
    check(lambda x, y: wrap(fn, x=x, y=y), x, y)
    check(lambda x, y: wrap(lambda x, y: x + y, x, y=y), x, y)
    check(lambda x, y: wrap(fn, x=x, y=y, z=(x, y)), x, y)


def test_kwarg_int_becomes_dynamic():
    # the int changes between calls: automatic dynamic makes it a SymInt, lifted into the body
    def f(x, y):
        return wrap(lambda x, y: x + y, x, y=y)

    x = torch.randn(3)
    cdy, dyn = run_both(f, [(x, 8), (x, 9), (x, 10)])
    assert cdy.frame_count == dyn.frame_count == 2
    last = cdy.graphs[-1]
    body = getattr(last, next(n for n in last.graph.nodes if n.target is wrap).args[0].target)
    kinds = [type(n.meta["example_value"]).__name__ for n in body.graph.nodes
             if n.op == "placeholder"]
    assert "SymInt" in kinds, kinds


def test_return_structures():
    y = torch.randn(3)
    check(lambda x: wrap(lambda x: (x.sin(), 3, None), x), torch.randn(3))
    check(lambda x: wrap(lambda x: {"a": x.sin(), "b": [x.cos(), y]}, x), torch.randn(3))
    check(lambda x: wrap(lambda x: (y, y + x, y), x), torch.randn(3))
    check(lambda x: wrap(lambda d: d["x"].sin() + d["y"][1][0], {"x": x, "y": (x, [x])}),
          torch.randn(3))


def test_enum_arg():
    class E(enum.Enum):
        A = 0
        B = 1

    def g(x, val):
        return torch.sin(x) if val == E.A else torch.cos(x)

    for e in (E.A, E.B):
        check(lambda x: wrap(g, x, e), torch.randn(3))


def test_symint_inputs():
    def f(x):
        i = x.size(0) - 2
        j = x.size(1) - 3
        k = x.size(2)
        return wrap(lambda x: x[:i, :j, k:], x)

    def g(x):
        return wrap(lambda x, i: x.view(i), x, x.size(0))

    for fn, shapes in ((f, [(3, 4, 5), (4, 5, 2)]), (g, [(3, 1), (5, 1)])):
        cdy, dyn = run_both(fn, [(torch.randn(s),) for s in shapes], dynamic=True)
        assert cdy.frame_count == dyn.frame_count == 1
        assert len(wrap_nodes(cdy.graphs[0])) == 1


def test_module_as_body():
    mod = torch.nn.Linear(3, 3)
    check(lambda x: wrap(mod, x), torch.randn(2, 3))


def test_input_mutation_in_body():
    def f(x):
        return wrap(lambda x: x.add_(1), x)

    x = torch.randn(3)
    expected = f(x.clone())
    x2 = x.clone()
    cdynamo.reset()
    got = cdynamo.compile(f, backend="eager", fullgraph=True)(x2)
    assert_same(got, expected)
    assert_same(x2, x + 1)


def test_local_list_append_in_body_is_one_graph():
    def g(x):
        def f(k):
            y = []
            y.append(k + 1)
            return y[0]

        return wrap(f, x)

    check(g, torch.randn(3, 3))


def _fallback(fn, *args):
    """Both compilers break at the wrap call: no graph holds a wrap node; results as eager."""
    cdy, dyn = run_both(fn, [args, args], fullgraph=False)
    assert cdy.frame_count <= dyn.frame_count or dyn.frame_count == 0
    assert all(not wrap_nodes(gm) for gm in cdy.graphs + dyn.graphs)
    with pytest.raises(RuntimeError, match="side effect inside the body"):
        cdynamo.reset()
        cdynamo.compile(fn, backend="eager", fullgraph=True)(*args)


def test_nonlocal_list_append_falls_back():
    def g(x):
        y = []

        def f(k):
            y.append(k + 1)
            return k

        wrap(f, x)
        return y[0]

    _fallback(g, torch.randn(3, 3))


@pytest.mark.parametrize("make_val", [lambda: 1, lambda: torch.tensor(1.0)])
def test_nonlocal_rebinding_falls_back(make_val):
    def f(x):
        def h(x):
            val = make_val()

            def g(x):
                nonlocal val
                val += 1
                return x + val

            y = wrap(g, x)
            return y + val

        return h(x)

    _fallback(f, torch.zeros([]))


def test_break_inside_body_falls_back():
    def f(x):
        return wrap(lambda x: (print("", end=""), x.sin())[1], x) * 2

    x = torch.randn(3)
    cdynamo.reset()
    cdy = CountingBackend()
    assert_same(cdynamo.compile(f, backend=cdy)(x), f(x))
    assert all(not wrap_nodes(gm) for gm in cdy.graphs)


def test_no_tensor_in_or_out():
    # a body without tensors in or out and without operations folds to its constant result
    # (torch._dynamo keeps a wrap node for it, returning the constant outside the graph)
    cdy, dyn = run_both(lambda x: wrap(lambda a: a + 1, 3) + wrap(lambda x: x.sin(), x),
                        [(torch.randn(3),)] * 2)
    assert cdy.frame_count == dyn.frame_count == 1
    assert wrap_nodes(cdy.graphs[0]) == [(2, [])]


def test_backward_through_wrap():
    w = torch.randn(3, requires_grad=True)

    def f(x):
        return wrap(lambda x: (x * w).sin(), x)

    x = torch.randn(3, requires_grad=True)
    f(x).sum().backward()
    expected = (x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    cdynamo.reset()
    cdynamo.compile(f, backend="aot_eager", fullgraph=True)(x).sum().backward()
    assert_same((x.grad, w.grad), expected, exact=False)


def test_checkpoint_body_uses_symint():
    # a SymInt of the enclosing graph used in a checkpointed body is lifted (it was a foreign
    # node in the body's graph: failed on fake tensors)
    def f(x, n):
        return checkpoint(lambda x: x.view(n) * 2, x, use_reentrant=False)

    cdynamo.reset()
    c = cdynamo.compile(f, backend="eager", fullgraph=True, dynamic=True)
    for n in (3, 4):
        x = torch.randn(n, 1)
        assert_same(c(x, n), f(x, n))
