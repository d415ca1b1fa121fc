"""Idioms of torchvision's and timm's model code (written out here; torchvision is not a
test dependency), each compared with eager and with torch._dynamo's graph count."""
import torch
import torch.nn as nn

import cdynamo
from helpers import compare


def _log_api_usage_once(obj):
    """As torchvision.utils._log_api_usage_once: usage telemetry with a constant event name."""
    module = obj.__module__
    name = obj.__class__.__name__
    torch._C._log_api_usage_once(f"{module}.{name}")


def stochastic_depth(x, p, mode, training=True):
    """As torchvision.ops.stochastic_depth: logs its use on every call."""
    if not torch.jit.is_scripting() and not torch.jit.is_tracing():
        _log_api_usage_once(stochastic_depth)
    if not training or p == 0.0:
        return x
    return x * (1.0 - p)


class StochasticDepth(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        return stochastic_depth(x, self.p, "row", self.training)


class Block(nn.Module):
    def __init__(self, c, p):
        super().__init__()
        self.lin = nn.Linear(c, c)
        self.sd = StochasticDepth(p)

    def forward(self, x):
        return x + self.sd(self.lin(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        _log_api_usage_once(self)
        self.blocks = nn.Sequential(*[Block(8, 0.1 * i) for i in range(3)])

    def forward(self, x):
        torch._C._log_api_usage_once("tests.Net.forward")
        return self.blocks(x)


def test_log_api_usage_once_is_no_break():
    torch.manual_seed(0)
    net = Net()
    x = torch.randn(2, 8)
    for mode in (net.eval(), net.train()):
        c = compare(mode, x)
        assert c.frame_count == 1
    ex = cdynamo.explain(net)(x)
    assert ex.graph_break_count == 0 and not ex.unmodified_frames
    # not a graph node: only the linear layers and the arithmetic are
    assert not any("log_api_usage" in str(t) for ops in ex.ops_per_graph for t in ops)


def test_log_api_usage_once_in_loop():
    def f(xs, scale):
        out = 0
        for i, x in enumerate(xs):
            torch._C._log_api_usage_once(f"loop.{i}")
            out = out + x * scale
        return out
    compare(f, [torch.randn(3), torch.randn(3)], 2.0)


def test_log_api_usage_once_argument_string():
    def f(x, name):
        torch._C._log_api_usage_once(name)
        return x + 1
    # a string argument is a constant of the trace (guarded by its value)
    compare(f, torch.randn(3), "tests.name")


def test_log_api_usage_once_wrong_argument_raises_as_eager():
    def f(x):
        y = x + 1
        torch._C._log_api_usage_once(3)
        return y
    try:
        f(torch.randn(3))
    except TypeError as e:
        expected = str(e)
    cdynamo.reset()
    try:
        cdynamo.compile(f, backend="eager")(torch.randn(3))
    except TypeError as e:
        assert str(e) == expected
    else:
        raise AssertionError("no TypeError")
