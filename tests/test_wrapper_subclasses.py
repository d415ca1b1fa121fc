"""Traceable wrapper tensor subclasses (``__torch_dispatch__`` with ``__tensor_flatten__`` /
``__tensor_unflatten__``: torchao's quantized tensors, DTensor, torch's TwoTensor) as inputs
of compiled code (issue 24): faked as the same subclass over fake inner tensors (static
sizes), their type known on every value the graph makes from them (isinstance, inner
tensors read as getattr nodes), handed to AOTAutograd backends as subclasses (it flattens
them). Results against eager, graph and op counts against torch._dynamo, guards by type."""
import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor
from torch.utils._pytree import tree_map

import cdynamo
from conftest import requires_engine
from helpers import CountingBackend, compare_at_least

pytestmark = [requires_engine, pytest.mark.usefixtures("no_graph_break")]


class Int8Tensor(torch.Tensor):
    """torchao-style weight-only quantized tensor: int8 data and a per-row scale; every op
    dequantizes (its __torch_dispatch__)."""

    @staticmethod
    def __new__(cls, data, scale):
        return torch.Tensor._make_wrapper_subclass(cls, data.shape, dtype=scale.dtype,
                                                   device=data.device)

    def __init__(self, data, scale):
        self.int_data = data
        self.scale = scale

    def __tensor_flatten__(self):
        return ["int_data", "scale"], None

    @staticmethod
    def __tensor_unflatten__(inner, meta, outer_size, outer_stride):
        return Int8Tensor(inner["int_data"], inner["scale"])

    def dequantize(self):
        return self.int_data.to(self.scale.dtype) * self.scale

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __repr__(self):   # (AOTAutograd's structured log prints its inputs' metadata)
        return f"Int8Tensor(shape={tuple(self.shape)})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        unwrap = lambda a: a.dequantize() if isinstance(a, Int8Tensor) else a  # noqa: E731
        args, kwargs = tree_map(unwrap, (args, kwargs or {}))
        return func(*args, **kwargs)


def quantize(w):
    scale = w.abs().amax(dim=1, keepdim=True) / 127
    return Int8Tensor((w / scale).round().to(torch.int8), scale)


def two_tensor_ops(x, y):
    z = x * 2 + y.sin()
    inner = z.a if isinstance(z, TwoTensor) else None
    return z.sum(dim=0), inner, type(z) is TwoTensor


def quantized_linear(x, w):
    return torch.nn.functional.linear(x, w).relu() + 1


def test_two_tensor_graph_and_type():
    x = TwoTensor(torch.randn(3, 4), torch.randn(3, 4))
    counter, dyn = compare_at_least(two_tensor_ops, x, torch.randn(3, 4))
    assert counter.frame_count == 1 and counter.op_count == dyn.op_count


def test_quantized_weight_input():
    counter, _ = compare_at_least(quantized_linear, torch.randn(2, 4), quantize(torch.randn(3, 4)))
    assert counter.frame_count == 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_aot_backends_take_wrapper_subclasses(backend):
    x, w = torch.randn(2, 4), quantize(torch.randn(3, 4))
    cdynamo.reset()
    out = cdynamo.compile(quantized_linear, backend=backend)(x, w)
    torch.testing.assert_close(out, quantized_linear(x, w))
    a, y = TwoTensor(torch.randn(3, 4), torch.randn(3, 4)), torch.randn(3, 4)
    out = cdynamo.compile(two_tensor_ops, backend=backend)(a, y)
    ref = two_tensor_ops(a, y)
    assert type(out[0]) is TwoTensor and out[2] is True
    torch.testing.assert_close(out[0].a, ref[0].a)
    torch.testing.assert_close(out[0].b, ref[0].b)
    torch.testing.assert_close(out[1], ref[1])


def test_guarded_by_type():
    counter = CountingBackend()
    cdynamo.reset()
    compiled = cdynamo.compile(two_tensor_ops, backend=counter)
    y = torch.randn(3, 4)
    x = TwoTensor(torch.randn(3, 4), torch.randn(3, 4))
    assert compiled(x, y)[2] is True
    out = compiled(torch.randn(3, 4), y)   # a plain tensor: recompiles, no inner tensor
    assert out[1] is None and out[2] is False
    assert counter.frame_count == 2
    compiled(TwoTensor(torch.randn(3, 4), torch.randn(3, 4)), y)   # the first entry again
    assert counter.frame_count == 2
