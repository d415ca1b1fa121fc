"""Tensor.grad in compiled code, as torch._dynamo reads and writes it: a parameter's or
input's .grad is read through <source>.grad (a graph input, or None under a guard), and
`p.grad = None` / `p.grad = t` are replayed on the real tensor after the graph, later reads
in the trace seeing the stored value (Module.zero_grad(set_to_none=True))."""
import warnings

import torch
import torch.nn as nn

import cdynamo
from cdynamo import _glue
from conftest import requires_engine
from helpers import CountingBackend, run_torch_dynamo

pytestmark = requires_engine


def _model_with_grads():
    torch.manual_seed(0)
    m = nn.Linear(4, 3)
    m(torch.randn(2, 4)).sum().backward()
    return m


def test_zero_grad_set_to_none_and_forward_in_one_graph():
    m = _model_with_grads()

    def step(x):
        m.zero_grad(set_to_none=True)
        return m(x).sum()

    counter = CountingBackend()
    breaks = len(_glue.break_log)
    out = cdynamo.compile(step, backend=counter)(torch.ones(2, 4))
    assert torch.equal(out, m(torch.ones(2, 4)).sum())
    assert m.weight.grad is None and m.bias.grad is None
    assert counter.frame_count == 1 and _glue.break_log[breaks:] == []
    m2 = _model_with_grads()

    def step2(x):
        m2.zero_grad(set_to_none=True)
        return m2(x).sum()
    _, dyn = run_torch_dynamo(step2, torch.ones(2, 4))
    assert counter.frame_count == dyn.frame_count and counter.op_count >= dyn.op_count


def test_grad_read_is_a_graph_input_and_none_is_guarded():
    m = _model_with_grads()

    def grad_norm(x):
        total = x.sum() * 0
        for p in m.parameters():
            if p.grad is not None:
                total = total + p.grad.pow(2).sum()
        return total

    counter = CountingBackend()
    f = cdynamo.compile(grad_norm, backend=counter)
    x = torch.ones(1)
    assert torch.allclose(f(x), grad_norm(x))
    m.weight.grad.mul_(2)                      # same tensor, new values: no recompile
    assert torch.allclose(f(x), grad_norm(x))
    assert counter.frame_count == 1
    m.zero_grad(set_to_none=True)              # None now: the guard fails once
    assert torch.equal(f(x), grad_norm(x))
    assert counter.frame_count == 2


def test_grad_store_then_read_in_one_trace():
    m = _model_with_grads()
    g = torch.full((3, 4), 0.5)

    def set_and_read(x):
        m.weight.grad = g * 2
        m.bias.grad = None
        return x + m.weight.grad.sum() + (1 if m.bias.grad is None else 0)

    out = cdynamo.compile(set_and_read, backend="eager")(torch.zeros(1))
    assert torch.equal(out, torch.tensor([13.0]))
    assert torch.equal(m.weight.grad, g * 2) and m.bias.grad is None


def test_grad_and_underscore_grad_are_one_attribute():
    """t._grad is t.grad: a store to one is read back through the other in the same trace
    (test_repros' test_grad: `y.grad = ...; y._grad.data` read _grad as the constant None
    and the transformed code raised AttributeError where eager runs)."""
    def fn(x, y):
        x._grad = y + 1
        y.grad = x + 2
        return x.grad.data, y._grad.data

    x0 = torch.randn(4, requires_grad=True)
    y0 = torch.randn(4, requires_grad=True)
    x1, y1 = x0.clone(), y0.clone()
    x2, y2 = x0.clone(), y0.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # .grad of a non-leaf tensor
        expected = fn(x1, y1)
        got = cdynamo.compile(fn, backend="eager")(x2, y2)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(x2.grad, x1.grad)
        torch.testing.assert_close(y2.grad, y1.grad)
