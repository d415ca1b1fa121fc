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
