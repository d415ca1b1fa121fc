"""resolve_backend on its own (no engine): torch's backends on torch.fx graphs with real inputs."""
import pytest
import torch
import torch.fx
import torch.nn as nn

import cdynamo
from helpers import CountingBackend
from cdynamo._backends import BACKEND_NAMES, resolve_backend


def toy(a, b):
    return (a / (torch.abs(a) + 1) * b,)


def single(a):
    return a.sin() * 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.w = nn.Parameter(torch.randn(8))
        self.ln = nn.LayerNorm(8)

    def forward(self, x, y):
        return (self.ln(torch.relu(self.lin(x)) * self.w + y),)


def first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def test_names_and_callables():
    assert BACKEND_NAMES == ("eager", "aot_eager", "inductor")
    for name in BACKEND_NAMES:
        fn, got = resolve_backend(name)
        assert callable(fn) and got == name

    def mine(gm, example_inputs):
        return gm.forward

    assert resolve_backend(mine) == (mine, "mine")


def test_unknown_name_lists_choices():
    with pytest.raises(ValueError) as e:
        resolve_backend("fast")
    for name in ("'fast'", "eager", "aot_eager", "inductor", "callable"):
        assert name in str(e.value)


def test_not_a_backend():
    with pytest.raises(TypeError, match="str or a callable"):
        resolve_backend(42)


def test_mode_and_options():
    with pytest.raises(ValueError, match="only to backend 'inductor'"):
        resolve_backend("eager", mode="max-autotune")
    with pytest.raises(RuntimeError):
        resolve_backend("inductor", mode="no-such-mode")
    with pytest.raises(RuntimeError):
        resolve_backend("inductor", mode="default", options={"max_autotune": False})
    fn, name = resolve_backend("inductor", options={"max_autotune": False})
    assert name == "inductor" and callable(fn)


def test_eager_returns_forward():
    gm = torch.fx.symbolic_trace(toy)
    fn, _ = resolve_backend("eager")
    assert fn(gm, []) == gm.forward


@pytest.mark.parametrize("name", ["eager", "aot_eager", "inductor"])
def test_function_graph_with_real_inputs(name):
    gm = torch.fx.symbolic_trace(toy)
    a, b = torch.randn(10), torch.randn(10)
    compiled = resolve_backend(name)[0](gm, [a, b])
    assert torch.allclose(first(compiled(a, b)), toy(a, b)[0])


@pytest.mark.parametrize("name", ["aot_eager", "inductor"])
def test_single_output_graph(name):
    gm = torch.fx.symbolic_trace(single)
    a = torch.randn(5)
    out = resolve_backend(name)[0](gm, [a])(a)
    assert isinstance(out, torch.Tensor) and torch.allclose(out, single(a))


@pytest.mark.parametrize("name", ["eager", "aot_eager", "inductor"])
def test_module_graph_training(name):
    torch.manual_seed(0)
    net = Net()
    gm = torch.fx.symbolic_trace(net)
    ops = {n.op for n in gm.graph.nodes}
    assert {"call_module", "get_attr"} <= ops
    x = torch.randn(4, 8, requires_grad=True)
    y = torch.randn(4, 8, requires_grad=True)
    compiled = resolve_backend(name)[0](gm, [x, y])
    out = first(compiled(x, y))
    (out * torch.arange(8.0)).sum().backward()
    got = [p.grad.clone() for p in net.parameters()] + [x.grad.clone(), y.grad.clone()]
    net.zero_grad()
    x.grad = y.grad = None
    ref = net(x, y)[0]
    (ref * torch.arange(8.0)).sum().backward()
    want = [p.grad.clone() for p in net.parameters()] + [x.grad.clone(), y.grad.clone()]
    assert torch.allclose(out, ref, atol=1e-5)
    for g, w in zip(got, want):
        assert torch.allclose(g, w, atol=1e-5, rtol=1e-4)


def _input_requires_grad_(x):
    x.requires_grad_()
    return (x * x).sum()


def _factory_requires_grad(x):
    w = torch.ones(3, requires_grad=True)
    return (x * w).sum(), w


def _intermediate_requires_grad_(x):
    w = torch.ones(3).requires_grad_()
    return (x * w).sum()


def _gradient_penalty(x):
    with torch.enable_grad():
        x = x.detach().requires_grad_(True)
        out = (x * x).sum()
        return torch.autograd.grad(out, x)[0]


@pytest.mark.parametrize("fn", [_input_requires_grad_, _factory_requires_grad,
                                _intermediate_requires_grad_, _gradient_penalty])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_tensors_made_to_require_grad_keep_autograd_with_aot(fn, backend):
    # requires_grad_() / requires_grad=True made the graph's leaf: under AOTAutograd the
    # results did not require grad (backward raised "element 0 of tensors does not require
    # grad") and an input's flag stayed unchanged; such calls now run in Python (a graph
    # break), as torch._dynamo breaks or lifts them
    x = torch.randn(3)
    xr = x.clone()
    expected = fn(xr)
    cdynamo.reset()
    got = cdynamo.compile(fn, backend=backend)(x)
    e0 = expected[0] if isinstance(expected, tuple) else expected
    g0 = got[0] if isinstance(got, tuple) else got
    torch.testing.assert_close(g0, e0)
    assert g0.requires_grad == e0.requires_grad and x.requires_grad == xr.requires_grad
    if e0.requires_grad:
        e0.backward()
        g0.backward()
        leaves = [(xr, x)] if fn is _input_requires_grad_ else \
            [(expected[1], got[1])] if isinstance(expected, tuple) else []
        for a, b in leaves:
            torch.testing.assert_close(b.grad, a.grad)


def _train_step(model, x):
    loss = model(x).sum()
    loss.backward()           # a graph break: AOTAutograd's backward graph runs here
    return loss.detach() * 2


def test_backward_run_in_a_graph_break_is_not_compiled_again():
    # the backward graph AOTAutograd made for the first graph is an FX module whose forward
    # the frame hook saw while loss.backward() ran in the break, and compiled as a frame of its
    # own (one graph more per shape with aot_eager than with eager); autograd's backward now
    # runs with the hook off, as torch._dynamo leaves it
    counts = {}
    for backend in ("eager", "aot_eager"):
        torch.manual_seed(0)
        model = nn.Linear(4, 3)
        cdynamo.reset()
        counter = CountingBackend(None if backend == "eager" else cdynamo._backends.aot_eager)
        step = cdynamo.compile(_train_step, backend=counter)
        for b in (2, 3, 5):
            out = step(model, torch.randn(b, 4))
            assert model.weight.grad is not None and out.requires_grad is False
        counts[backend] = counter.frame_count
    assert counts["aot_eager"] == counts["eager"]
