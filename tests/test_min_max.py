"""Builtins min()/max() with tensor arguments and abs() of a tensor, as users write them
(issue 7).

Eager's max(a, b) keeps a unless bool(b > a): it only works on tensors of one element. Where
eager works, cdynamo traces what torch._dynamo traces (torch.maximum / torch.minimum of two
tensors, torch.clamp(t, min=c) / clamp(t, max=c) of a tensor and a number, reduced pairwise
from the left; abs() as the builtin) and the graphs' call targets must equal torch._dynamo's.
Where eager raises (tensors of more elements) cdynamo breaks the graph there, so the call
raises as in eager (torch._dynamo returns torch.maximum's result instead)."""

import pytest
import torch
import torch._dynamo

import cdynamo
from helpers import CALL_OPS, CountingBackend, assert_same, run_torch_dynamo



def _targets(counter):
    return [[getattr(n.target, "__name__", str(n.target)) for n in gm.graph.nodes
             if n.op in CALL_OPS] for gm in counter.graphs]


def _clone(args):
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def check(fn, *args):
    """Eager vs cdynamo (bitwise, twice: the second call hits the cache); the graphs' call
    targets equal torch._dynamo's. Returns cdynamo's backend."""
    expected = fn(*_clone(args))
    _, dyn = run_torch_dynamo(fn, *_clone(args))
    cdynamo.reset()
    cdy = CountingBackend()
    compiled = cdynamo.compile(fn, backend=cdy)
    for i in range(2):
        assert_same(compiled(*_clone(args)), expected, f"call {i}")
    assert _targets(cdy) == _targets(dyn)
    return cdy


A1 = torch.tensor([2.0])
B1 = torch.tensor([-1.0])
C1 = torch.tensor([0.25])


def max2(x, y):
    return max(x, y) + 1


def min2(x, y):
    return min(x, y) * 2


def min3(x, y, z):
    return min(x, y, z) + 1


def max3(x, y, z):
    return max(x, y, z) - 1


def max_number(x):
    return max(x, 0.5) + 1


def number_max(x):
    return max(0.5, x) + 1


def min_int(x):
    return min(x, 3) + 1


def max_two_numbers(x):
    return max(x, 0.5, -2) * 3


def numbers_first(x):
    # the two numbers fold first (max(0.5, -2) == 0.5), then clamp
    return min(0.5, -2, x) * 3


def mixed(x, y):
    return max(x, 1.0, y) + min(y, x, -5)


def scalars(x, y):
    # 0-d tensors (one element) from reductions
    return max(x.sum(), y.sum()) + min(x.mean(), 0.1)


def abs_of_tensor(x):
    return abs(x) + abs(-x * 2)


def abs_and_max(x, y):
    return max(abs(x), abs(y))


@pytest.mark.parametrize("fn,args", [
    (max2, (A1, B1)), (max2, (B1, A1)), (min2, (A1, B1)), (min3, (A1, B1, C1)),
    (max3, (C1, A1, B1)), (max_number, (A1,)), (number_max, (A1,)), (min_int, (B1,)),
    (max_two_numbers, (A1,)), (numbers_first, (B1,)), (mixed, (A1, B1)),
    (scalars, (torch.randn(3), torch.randn(3))), (abs_of_tensor, (torch.randn(5),)),
    (abs_and_max, (A1, B1)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_min_max_abs_as_torch_dynamo(fn, args):
    cdy = check(fn, *args)
    assert cdy.frame_count == 1


def test_ops_recorded():
    cdy = check(min3, A1, B1, C1)
    assert _targets(cdy) == [["minimum", "minimum", "add"]]
    cdy = check(max_two_numbers, A1)
    assert _targets(cdy) == [["clamp", "clamp", "mul"]]
    cdy = check(numbers_first, B1)
    assert _targets(cdy) == [["clamp", "mul"]]
    clamps = [n for n in cdy.graphs[0].graph.nodes if n.target is torch.clamp]
    assert clamps[0].kwargs == {"max": -2}


def test_number_wins_gives_a_tensor_as_torch_dynamo():
    # eager returns the number itself (5.0); torch._dynamo's clamp gives a one-element
    # tensor of the same value, and so does cdynamo
    def f(x):
        return max(x, 5.0)
    x = torch.tensor([1.0])
    assert f(x) == 5.0 and isinstance(f(x), float)
    d_out, _ = run_torch_dynamo(f, x.clone())
    cdynamo.reset()
    out = cdynamo.compile(f, backend=CountingBackend())(x.clone())
    assert_same(out, d_out)
    assert out.item() == f(x)


def test_gradient_goes_to_the_winner():
    # eager's loser is not in the autograd graph (its grad stays None); torch.maximum gives
    # it a zero gradient, in torch._dynamo as in cdynamo
    def f(x, y):
        return (max(x, y) * 3).sum()

    def grads(run):
        ts = [torch.tensor([2.0], requires_grad=True), torch.tensor([1.0], requires_grad=True)]
        run(*ts).backward()
        return [t.grad for t in ts]
    eager = grads(f)
    assert eager[1] is None
    torch._dynamo.reset()
    dyn = grads(torch.compile(f, backend=CountingBackend()))
    torch._dynamo.reset()
    cdynamo.reset()
    cdy = grads(cdynamo.compile(f, backend=CountingBackend()))
    for e, d, c in zip(eager, dyn, cdy):
        assert_same(c, d)
        assert_same(c, torch.zeros(1) if e is None else e)


def _ambiguous():
    return pytest.raises(RuntimeError, match="more than one value is ambiguous")


@pytest.mark.parametrize("fn,nargs", [(max2, 2), (min3, 3), (max_number, 1)],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_many_elements_raise_as_eager(fn, nargs):
    args = [torch.randn(4) for _ in range(nargs)]
    with _ambiguous():
        fn(*args)
    d_out, _ = run_torch_dynamo(fn, *args)   # torch._dynamo does not raise here
    assert isinstance(d_out, torch.Tensor)
    cdynamo.reset()
    with _ambiguous():
        cdynamo.compile(fn, backend=CountingBackend())(*args)


def test_break_at_an_ambiguous_max_keeps_the_graph_before():
    def f(x, y):
        a = x * 2
        return max(a, y)
    cdynamo.reset()
    cdy = CountingBackend()
    with _ambiguous():
        cdynamo.compile(f, backend=cdy)(torch.randn(4), torch.randn(4))
    assert _targets(cdy) == [["mul"]]


def test_shape_change_recompiles_and_raises_as_eager():
    cdynamo.reset()
    compiled = cdynamo.compile(max2, backend=CountingBackend())
    assert_same(compiled(A1.clone(), B1.clone()), max2(A1, B1))
    with _ambiguous():
        compiled(torch.randn(3), torch.randn(3))
    assert_same(compiled(B1.clone(), A1.clone()), max2(B1, A1))


def test_key_is_eager():
    def f(x, y):
        return max(x, y, key=lambda t: -t) + 1
    expected = f(A1, B1)
    cdynamo.reset()
    out = cdynamo.compile(f, backend=CountingBackend())(A1.clone(), B1.clone())
    assert_same(out, expected)
