"""Cases from PyTorch's test_misc / test_repros / test_list (issue 24, third round): builtin
errors of constant calls raised inside the trace as eager raises them (ValueError of
list/tuple/deque.index and remove with CPython's words), torch.compile of a callable whose own
call traces nothing (torch.sin, an OpOverload, F.relu: wrapped in a Python function, as
torch.compile wraps them), cache_size_limit counting only the entries whose ID_MATCHed
arguments are the frame's (torch._dynamo's recompile_limit), the frame hook's C API
(torch._C._dynamo) never a graph op, dynamic ints specialised where a constant is needed
(list.index bounds, x.size(dim)), a symbolic __bool__, descriptor __get__, frozensets of
functions. Results against eager, graph and op counts against torch._dynamo."""
import collections
import functools

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter

import cdynamo
from conftest import requires_engine
from helpers import CountingBackend, check_against_eager, compare_at_least

pytestmark = requires_engine
no_break = pytest.mark.usefixtures("no_graph_break")


class NeverEqual:
    def __eq__(self, other):
        return False

    __hash__ = object.__hash__


MISSING = {
    "list_index": lambda: [1, 2, 3].index("z"),
    "tuple_index": lambda: (1, 2, 3).index("z"),
    "deque_index": lambda: collections.deque([1, 2, 3]).index("z"),
    "list_index_object": lambda: [NeverEqual()].index("z"),
    "tuple_index_object": lambda: (NeverEqual(),).index("z"),
    "deque_index_object": lambda: collections.deque([NeverEqual()]).index("z"),
    "list_remove": lambda: [NeverEqual()].remove("z"),
    "deque_remove": lambda: collections.deque([NeverEqual()]).remove("z"),
    "int_of_bad_literal": lambda: int("abc"),
    "divmod_by_zero": lambda: divmod(1, 0),
}


@pytest.mark.parametrize("name", sorted(MISSING))
def test_builtin_error_raised_in_trace(name):
    """The handler sees eager's exception type and message; the whole function is one graph
    (fullgraph: no break at the raise)."""
    body = MISSING[name]

    def fn(x):
        try:
            body()
        except (ValueError, ZeroDivisionError) as e:
            return x + 1, type(e).__name__, str(e)
        return x, None, None

    x = torch.ones(2)
    expected = fn(x)
    got = cdynamo.compile(fn, backend="eager", fullgraph=True)(x)
    assert got[1:] == expected[1:]
    assert torch.equal(got[0], expected[0])


def test_missing_item_with_tensor_argument_breaks_not_guesses():
    """list.index(t) of a tensor not in the list needs repr(t) for its message: a graph
    break, still eager's message."""

    def fn(x):
        try:
            [1, 2].index(x)
        except (ValueError, RuntimeError) as e:
            return x + 1, type(e).__name__
        return x, None

    check_against_eager(fn, torch.ones(()))


@no_break
@pytest.mark.parametrize("target", [torch.sin, torch.nn.functional.relu, torch.ops.aten.cos.default,
                                    functools.partial(torch.add, alpha=2), torch.Tensor.exp],
                         ids=["builtin", "inline_rule", "op_overload", "partial", "method_descr"])
def test_compile_of_callable_without_python_frame(target):
    """cdynamo.compile(torch.sin) compiles one graph with the op, as torch.compile."""
    x = torch.randn(3)
    args = (x, x) if isinstance(target, functools.partial) else (x,)
    ours, theirs = CountingBackend(), CompileCounter()
    compiled = cdynamo.compile(target, backend=ours)
    assert torch.equal(compiled(*args), target(*args))
    torch._dynamo.reset()
    torch.compile(target, backend=theirs)(*args)
    assert (ours.frame_count, ours.op_count) == (theirs.frame_count, theirs.op_count) == (1, 1)
    assert compiled.__wrapped__ is target


def test_compiled_callables_have_separate_caches():
    """Two compiled builtins each get their own cache entries (their own wrapper code)."""
    a, b = CountingBackend(), CountingBackend()
    ca, cb = cdynamo.compile(torch.sin, backend=a), cdynamo.compile(torch.cos, backend=b)
    x = torch.randn(3)
    assert torch.equal(ca(x), torch.sin(x)) and torch.equal(cb(x), torch.cos(x))
    assert torch.equal(ca(x), torch.sin(x))
    assert a.frame_count == b.frame_count == 1


def test_cache_limit_counts_entries_of_the_frames_objects():
    """A function called with ten different classes (ID_MATCH on an argument) compiles for
    each, past cache_size_limit=8, as torch._dynamo's recompile_limit counts only entries
    whose id-matched locals are the frame's; the same object failing another guard still
    stops at the limit."""
    def fn(cls, x):
        return x * cls.factor

    classes = [type(f"C{i}", (), {"factor": i}) for i in range(10)]
    counter = CountingBackend()
    compiled = cdynamo.compile(fn, backend=counter)
    for cls in classes:
        x = torch.ones(2)
        assert torch.equal(compiled(cls, x), fn(cls, x))
    assert counter.frame_count == len(classes)

    def g(k, x):
        return x + k   # k: an int constant, EQUALS_MATCH (no ID_MATCH)

    counter = CountingBackend()
    compiled = cdynamo.compile(g, backend=counter, dynamic=False)
    for k in range(12):
        assert torch.equal(compiled(k, torch.ones(2)), torch.ones(2) + k)
    assert counter.frame_count == 8


def test_frame_hook_api_is_not_a_graph_op():
    """torch._C._dynamo.eval_frame.unsupported (a C function of torch's frame hook) is a graph
    break, not a node: the graph after it has test_misc's 3 ops."""
    from torch._dynamo.testing import unsupported
    out = []

    def fn(a, b):
        c = unsupported(a, b)
        out.append(a + b * 10 + c)

    v = torch.Tensor([100])
    counter = CountingBackend()
    cdynamo.compile(fn, backend=counter)(v, v)
    assert out[0].item() == 1200
    assert counter.frame_count == 1 and counter.op_count == 3


@no_break
def test_list_index_with_dynamic_bounds():
    """xs.index(3, *bounds) with bounds read from a list argument that changed between
    calls (automatic dynamic ints): specialised, no break."""
    def fn(t, bounds):
        return t + [1, 2, 3, 4].index(3, *bounds)

    counter = CountingBackend()
    compiled = cdynamo.compile(fn, backend=counter)
    for bounds in ([], [2], [0, 3], [1, 4]):
        assert torch.equal(compiled(torch.zeros(1), bounds), fn(torch.zeros(1), bounds))


@no_break
def test_size_and_stride_with_dynamic_dim():
    def fn(x, dim):
        return x.size(dim=dim), x.stride(dim)

    compiled = cdynamo.compile(fn, backend="eager")
    x = torch.empty(4, 9, 8)
    for dim in (1, -2, 0, 2):
        assert compiled(x, dim) == fn(x, dim)


@no_break
def test_symbolic_bool_dunder():
    """__bool__ returning self.x > 0 with x a float that became dynamic: guarded."""
    class B:
        def __init__(self, x):
            self.x = x

        def __bool__(self):
            return self.x > 0

    def fn(x, obj):
        return x + 1 if obj else x - 1

    compiled = cdynamo.compile(fn, backend="eager")
    x = torch.ones(2)
    for v in (1.5, -2.5, 3.5, -4.5, 0.0):
        assert torch.equal(compiled(x, B(v)), fn(x, B(v)))


@no_break
def test_getset_descriptor_get():
    def fn(g, x):
        return g.__get__(x), x.sum()

    got = cdynamo.compile(fn, backend="eager", fullgraph=True)(torch.Tensor.shape, torch.ones(2, 3))
    assert got[0] == torch.Size([2, 3])


FUNCS = frozenset([torch.add])


def in_frozenset_of_functions(x, func):
    if func in FUNCS:
        x = torch.add(x, 1.0)
    return torch.mul(x, 2.0)


@no_break
@pytest.mark.parametrize("func", [torch.add, torch.mul], ids=["member", "not_member"])
def test_frozenset_of_functions(func):
    counter, _ = compare_at_least(in_frozenset_of_functions, torch.randn(3), func)
    assert counter.op_count == (2 if func is torch.add else 1)
