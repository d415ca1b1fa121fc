"""resolve_backend on its own (no engine): torch's backends on torch.fx graphs with real inputs."""
import pytest
import torch
import torch.fx
import torch.nn as nn

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
