"""Tensor.tolist() of integer tensors and Tensor.data reads inside compiled code (issue 24,
PyTorch's test_misc): tolist gives unbacked symbols (.item() of each element) for that
call even without capture_scalar_outputs, as torch._dynamo's tolist; x.data is a graph node
(torch._C._autograd._get_data_attr), as torch._dynamo makes it. Results against eager,
graph and op counts against torch._dynamo."""
import pytest
import torch

from conftest import requires_engine
from helpers import check_against_eager, compare_at_least

pytestmark = requires_engine
no_break = pytest.mark.usefixtures("no_graph_break")


def tolist_loop(x):
    out = []
    for i in x.tolist():
        out.append(i * 4)
    return out


def tolist_0d(x):
    return [x.tolist() * 4]


def data_index(x, y):
    return x[y.data], y.data.requires_grad


def data_of_parameter(w):
    d = w.data
    return d * 2, d.requires_grad


@no_break
@pytest.mark.parametrize("x", [torch.tensor([2, 1]), torch.tensor([[2, 1], [3, 4]])],
                         ids=["1d", "2d"])
def test_tolist_of_integer_tensor(x):
    counter, _ = compare_at_least(tolist_loop, x)
    assert counter.frame_count == 1


@no_break
def test_tolist_of_0d_tensor():
    counter, _ = compare_at_least(tolist_0d, torch.tensor(42))
    assert counter.frame_count == 1


def test_tolist_of_float_tensor_runs_as_eager():
    # not traced (as torch._dynamo): no graph, eager's result
    counter = check_against_eager(tolist_loop, torch.tensor([1.5, 2.0]))
    assert counter.frame_count == 0


@no_break
def test_data_read_in_graph():
    counter, _ = compare_at_least(data_index, torch.rand(8), torch.ones(8).to(torch.int))
    assert counter.frame_count == 1
    counter, _ = compare_at_least(data_of_parameter, torch.randn(3, requires_grad=True))
    assert counter.frame_count == 1


# ---- t.data = value ----------------------------------------------------------------------

def data_set_fresh(x, y):
    x.data = y * 2          # x takes a new tensor's memory, sizes and strides; keeps requires_grad
    return x + 1, x.shape


def data_set_twice(x, y):
    x.data = y * 2
    y.data = torch.zeros([0])
    return x * 3


class DataSetModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, w):
        self.lin.weight.data = w * 0.5
        return self.lin(x)


def data_set_input(x, y):
    x.data = y              # y is an input: its memory would be shared
    return x * 2


def data_set_view(x, y):
    x.data = y[1:]
    return x * 2


def _data_run(fn, make, compiled=None):
    """(result, each tensor argument's (shape, values, requires_grad)) of fn on fresh
    arguments, compiled or eager."""
    args = make()
    out = (fn if compiled is None else compiled)(*args)
    state = [(a.shape, a.detach().clone(), a.requires_grad) for a in args
             if isinstance(a, torch.Tensor)]
    return out, state


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.shape == b.shape and
                a.requires_grad == b.requires_grad and torch.equal(a.detach(), b.detach()))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


DATA_SET_CASES = {
    "fresh": (data_set_fresh, lambda: (torch.ones(3), torch.arange(5.0))),
    "fresh_grad": (data_set_fresh, lambda: (torch.ones(5, requires_grad=True), torch.arange(5.0))),
    "twice": (data_set_twice, lambda: (torch.ones(6, requires_grad=True), torch.ones(6))),
    "module": (DataSetModule(), lambda: (torch.ones(2, 4), torch.arange(16.0).view(4, 4))),
}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("case", sorted(DATA_SET_CASES))
def test_data_set_to_a_new_tensor_is_one_graph(case, backend):
    # as torch._dynamo: set_ under no_grad and the version counter put back, in one graph;
    # the arguments end as eager leaves them (sizes, values, requires_grad)
    import cdynamo
    import torch._dynamo
    from torch._dynamo.testing import CompileCounterWithBackend
    fn, make = DATA_SET_CASES[case]
    torch.manual_seed(0)
    expected = _data_run(fn, make)
    counters = {}
    for engine in ("cdynamo", "torch"):
        cdynamo.reset()
        torch._dynamo.reset()
        cnt = counters[engine] = CompileCounterWithBackend(backend)
        compiled = (cdynamo.compile if engine == "cdynamo" else torch.compile)(fn, backend=cnt)
        for _ in range(2):
            torch.manual_seed(0)
            got = _data_run(fn, make, compiled)
            if engine == "cdynamo":
                assert _same(got, expected)
    assert counters["cdynamo"].frame_count == counters["torch"].frame_count == 1
    assert counters["cdynamo"].op_count >= counters["torch"].op_count


def data_set_resized(x, y):
    x.data = y * 2
    return x + 1


@pytest.mark.parametrize("fn,reason", [(data_set_input, "shares memory"),
                                       (data_set_view, "shares memory"),
                                       (data_set_resized, "other sizes")])
def test_data_set_that_aot_cannot_take_breaks_and_gives_eager_results(fn, reason):
    # new data that shares memory with an input (the input, a view of it), or of other sizes
    # for a tensor that requires grad, is a graph break at the store (under AOTAutograd a
    # set_ to it can be wrong, or fail in the backward as torch._dynamo's does); the store
    # runs in Python
    import cdynamo
    make = lambda: (torch.ones(6, requires_grad=True), torch.arange(7.0 if fn is data_set_resized else 6.0))
    expected = _data_run(fn, make)
    for backend in ("eager", "aot_eager"):
        cdynamo.reset()
        assert _same(_data_run(fn, make, cdynamo.compile(fn, backend=backend)), expected)
    ex = cdynamo.explain(fn)(*make())
    assert any(reason in str(r) for r in ex.break_reasons)
