"""torch._higher_order_ops.associative_scan.associative_scan is traced as torch._dynamo traces
it: its Python front end (movedim, flip, torch.vmap of combine_fn over pytree in_dims, the
recursive generic scan, pytree flatten/unflatten) is inlined op by op into the caller's graph
(was a graph break "<function associative_scan> is a higher-order function cdynamo does not
trace" and combine_fn "called inside a running torch.func transform"). transformers'
MambaMixer slow path (mamba_selective_scan) calls it with a tuple of tensors. Results are
compared with eager, graph and op counts with torch._dynamo on the same function; backends
eager and aot_eager."""
import functools

import pytest
import torch
import torch._dynamo
import torch.utils._pytree as pytree
from collections import namedtuple
from torch._higher_order_ops.associative_scan import (associative_scan, associative_scan_op,
                                                      wrap_combine_fn_flat)

import cdynamo
from helpers import CountingBackend, assert_same

W = torch.randn(3)


def mul_add(a, b):
    return a * b + b


def ssm_pair(left, right):   # transformers' mamba_selective_scan combine_fn
    a_left, b_left = left
    a_right, b_right = right
    return a_left * a_right, a_right * b_left + b_right


def list_pair(left, right):
    return [left[0] + right[0], torch.maximum(left[1], right[1])]


def with_closure(a, b):
    return a * W + b


def scan_generic(x):
    return associative_scan(mul_add, x.sin(), dim=1, combine_mode="generic").cos()


def scan_reverse(x):
    return associative_scan(mul_add, x, dim=-1, reverse=True, combine_mode="generic")


def scan_tuple(a, b):
    return associative_scan(ssm_pair, (a, b), dim=2, combine_mode="generic")


def scan_list(x):
    return associative_scan(list_pair, [x, x + 1], dim=0, combine_mode="generic")


def scan_closure(x):
    return associative_scan(with_closure, x, dim=0, combine_mode="generic")


CASES = [
    (scan_generic, (torch.randn(2, 8),)),
    (scan_generic, (torch.randn(2, 7),)),        # odd length
    (scan_generic, (torch.randn(2, 1),)),        # nothing to combine
    (scan_reverse, (torch.randn(3, 7),)),
    (scan_tuple, (torch.rand(2, 3, 5, 4), torch.randn(2, 3, 5, 4))),
    (scan_list, (torch.randn(5, 3),)),
    (scan_closure, (torch.randn(6, 3),)),
]


def run(fn, args, backend):
    torch._dynamo.reset()
    dyn = CountingBackend()
    torch.compile(fn, backend=dyn)(*args)
    torch._dynamo.reset()
    cdynamo.reset()
    cdy = CountingBackend(None if backend == "eager" else
                          cdynamo._backends.resolve_backend(backend)[0])
    compiled = cdynamo.compile(fn, backend=cdy)
    for i in range(2):   # the second call runs the cached entry
        assert_same(compiled(*args), fn(*args), f"call {i}", exact=False)
    return cdy, dyn


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn, args", CASES)
def test_scan_one_graph_as_dynamo(fn, args, backend):
    cdy, dyn = run(fn, args, backend)
    assert cdy.frame_count == dyn.frame_count == 1
    assert cdy.op_count == dyn.op_count


def test_scan_no_break_reasons():
    x = torch.randn(2, 3, 8, 4)
    ex = cdynamo.explain(scan_tuple)(x.abs(), x)
    assert ex.graph_count == 1 and ex.graph_break_count == 0, ex.break_reasons
    assert not ex.unmodified_frames, ex.unmodified_frames


def test_pointwise_on_cpu_as_eager():
    # combine_mode="pointwise" on CPU: torch 2.13's front end raises (CUDA or XPU only), later
    # releases scan; compiled, the same as in eager either way
    fn = lambda x: associative_scan(mul_add, x, dim=0, combine_mode="pointwise")  # noqa: E731
    x = torch.randn(4, 3)
    try:
        expected = fn(x)
    except ValueError as e:
        assert "CUDA" in str(e)
        with pytest.raises(ValueError, match="CUDA"):
            cdynamo.compile(fn, backend="eager")(x)
    else:
        assert_same(cdynamo.compile(fn, backend="eager")(x), expected, exact=False)


# ---- the operator (what combine_mode="pointwise" calls on CUDA): torch.ops.higher_order ------

def flat_mul_add(a, b):
    return [a * b + b]


def op_direct(x):
    return associative_scan_op(flat_mul_add, [x.sin()], ())[0].cos()


def op_partial_closure(a, b):
    # the front end's call: a partial of wrap_combine_fn_flat; W is lifted as an input
    spec = pytree.tree_structure((a, b))
    cf = functools.partial(wrap_combine_fn_flat, combine_fn=lambda l, r: (
        l[0] * r[0], r[0] * l[1] + r[1] * W), spec=spec, num_leaves=2)
    return associative_scan_op(cf, [a, b], additional_inputs=())


def scan_nodes(gm):
    return [n for n in gm.graph.nodes if n.target is torch.ops.higher_order.associative_scan]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn, args", [
    (op_direct, (torch.randn(5, 3),)),
    (op_partial_closure, (torch.randn(5, 3), torch.randn(5, 3))),
])
def test_op_recorded_as_dynamo(fn, args, backend):
    torch._dynamo.reset()
    dyn = CountingBackend()
    expected = torch.compile(fn, backend=dyn)(*args)
    torch._dynamo.reset()
    cdynamo.reset()
    cdy = CountingBackend(cdynamo._backends.resolve_backend(backend)[0])
    compiled = cdynamo.compile(fn, backend=cdy)
    for i in range(2):
        # torch._dynamo puts the outputs back into the partial's pytree (eager: a list)
        assert_same(compiled(*args), expected, f"call {i}", exact=False)
    assert pytree.tree_leaves(fn(*args))[0].allclose(pytree.tree_leaves(expected)[0])
    assert cdy.frame_count == dyn.frame_count == 1
    assert cdy.op_count == dyn.op_count
    got, want = scan_nodes(cdy.graphs[0]), scan_nodes(dyn.graphs[0])
    assert len(got) == len(want) == 1
    assert [len(a) for a in got[0].args[1:]] == [len(a) for a in want[0].args[1:]]
    body = getattr(cdy.graphs[0], got[0].args[0].target)
    assert len(body.graph.find_nodes(op="placeholder")) == \
        len(getattr(dyn.graphs[0], want[0].args[0].target).graph.find_nodes(op="placeholder"))


def not_pointwise(a, b):
    return [a.cumsum(0) + b]


def op_not_pointwise(x):
    return associative_scan_op(not_pointwise, [x], ())


def test_op_not_pointwise_runs_in_python():
    # torch._dynamo raises ("the combine_fn needs to be pointwise"); eager's op runs it: the
    # call is a graph break and runs as in eager
    x = torch.randn(5, 3)
    ex = cdynamo.explain(op_not_pointwise)(x)
    assert ex.graph_break_count == 1
    assert "not pointwise" in str(ex.break_reasons[0])
    assert_same(cdynamo.compile(op_not_pointwise, backend="eager")(x), op_not_pointwise(x),
                exact=False)


# ---- what the front end needed: pytree inlined, vmap over pytree in_dims, annotations --------

P = namedtuple("P", "a b")


def tree_roundtrip(x, y):
    leaves, spec = pytree.tree_flatten({"a": x, "b": [y, (x, 3)]})
    return pytree.tree_unflatten([t * 2 if isinstance(t, torch.Tensor) else t for t in leaves],
                                 spec)


def tree_map_nested(x, y):
    return pytree.tree_map(lambda t: t + 1, (x, [y, {"k": x}]))


def tree_namedtuple(x, y):
    leaves, spec = pytree.tree_flatten(P(x, [y]))
    return pytree.tree_unflatten([t.cos() for t in leaves], spec)


def vmap_pytree_in_dims(x, y):
    return torch.vmap(lambda p, q: p[0] * p[1] + q, in_dims=((0, 1), None))((x, y), x[0])


def vmap_tuple_arg_int_dim(x, y):
    return torch.vmap(lambda p: p[0] - p[1].sin(), in_dims=(0,))((x, y))


def annotated_helper(x):
    def helper(node: torch.Tensor, acc: list[torch.Tensor]) -> dict[str, int]:
        acc.append(node * 2)
        return {"n": len(acc)}
    acc = []
    n = helper(x, acc)["n"]
    return acc[0] + n


@pytest.mark.parametrize("fn, args", [
    (tree_roundtrip, (torch.randn(3), torch.randn(2))),
    (tree_map_nested, (torch.randn(3), torch.randn(2))),
    (tree_namedtuple, (torch.randn(3), torch.randn(2))),
    (vmap_pytree_in_dims, (torch.randn(4, 3), torch.randn(3, 4))),
    (vmap_tuple_arg_int_dim, (torch.randn(4, 3), torch.randn(4, 3))),
    (annotated_helper, (torch.randn(3),)),
])
def test_helpers_as_dynamo(fn, args):
    cdy, dyn = run(fn, args, "eager")
    assert cdy.frame_count == dyn.frame_count == 1
    assert cdy.op_count == dyn.op_count


def test_vmap_mismatched_in_dims_raises_as_eager():
    fn = lambda x: torch.vmap(lambda p: p[0], in_dims=((0, 0, 0),))((x, x))  # noqa: E731
    with pytest.raises(ValueError):
        fn(torch.randn(2, 3))
    with pytest.raises(ValueError):
        cdynamo.compile(fn, backend="eager")(torch.randn(2, 3))
    assert torch._C._functorch.peek_interpreter_stack() is None


# ---- transformers' Mamba (use_associative_scan: the scan runs only while compiling) ----------

def test_mamba_one_graph():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.MambaConfig(num_hidden_layers=2, hidden_size=64, state_size=8,
                                   vocab_size=128)
    if not getattr(cfg, "use_associative_scan", False):
        pytest.skip("this transformers' Mamba has no associative_scan path")
    model = transformers.MambaModel(cfg).eval()
    ids = torch.randint(1, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = model(ids).last_hidden_state
        torch._dynamo.reset()
        dyn = CountingBackend()
        torch.compile(model, backend=dyn)(ids)
        torch._dynamo.reset()
        cdynamo.reset()
        cdy = CountingBackend()
        compiled = cdynamo.compile(model, backend=cdy)
        for _ in range(2):
            got = compiled(ids).last_hidden_state
            assert torch.allclose(got, expected, atol=1e-5, rtol=1e-4)
    assert cdy.frame_count == dyn.frame_count == 1
    scans = [n for n in cdy.graphs[0].graph.nodes
             if getattr(n.target, "__name__", "") == "_vmap_increment_nesting"]
    assert scans, "the associative scan is not in the graph"
