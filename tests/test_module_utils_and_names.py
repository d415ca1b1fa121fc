"""torch.nn.utils' weight_norm and parametrizations traced into the graph (the hook object
and the parametrized weight), operator module functions on containers, names of bound
builtin methods and slot functions, torch's OrderedSet, and repr() of builtin subclasses and
deques made in the trace (issue 24). Results against eager, graph and op counts against
torch._dynamo, no graph break."""
import collections
import unittest
import operator
import warnings

import pytest
import torch
import torch.nn as nn

import cdynamo
from cdynamo import _glue
from conftest import requires_engine
from helpers import CountingBackend, compare, run_torch_dynamo

pytestmark = requires_engine


@pytest.fixture(autouse=True)
def no_graph_break():
    breaks, unmodified = len(_glue.break_log), len(_glue.unmodified_log)
    yield
    assert [b.reason for b in _glue.break_log[breaks:]] == []
    assert [b.reason for b in _glue.unmodified_log[unmodified:]] == []


class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)


def make_module(kind):
    torch.manual_seed(0)
    lin = nn.Linear(4, 4)
    if kind == "weight_norm":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # deprecated in favour of parametrizations
            return nn.utils.weight_norm(lin)
    if kind == "parametrizations.weight_norm":
        return nn.utils.parametrizations.weight_norm(lin)
    nn.utils.parametrize.register_parametrization(lin, "weight", Symmetric())
    return lin


@pytest.mark.parametrize("kind", ["weight_norm", "parametrizations.weight_norm", "parametrize"])
def test_parametrized_weight_in_graph(kind):
    mod = make_module(kind)

    def forward(x):
        return mod(x)

    x = torch.randn(2, 4)
    counter = compare(forward, x)
    _, dyn = run_torch_dynamo(forward, x)
    assert counter.frame_count == 1 and counter.op_count == dyn.op_count
    # the weight is computed from the original parameters on every call (not a constant)
    compiled = cdynamo.compile(forward, backend=CountingBackend())
    with torch.no_grad():
        for p in mod.parameters():
            p.mul_(2)
    assert torch.allclose(compiled(x), mod(x))


def operator_functions(x):
    d = {"one": 1, "two": 2}
    s = {1, 2}
    return (x + len(operator.and_(d.keys(), {"one", "four"})), operator.or_(s, {3}),
            operator.sub(s, {1}), operator.lt({1}, s), operator.eq(d.keys(), {"one", "two"}),
            operator.ior(set(s), {9}))


def method_names(x):
    m = [1, 2].count
    return x + 1, m.__name__, m.__qualname__, list.count.__name__, set.__or__.__name__


def ordered_set(x):
    from torch.utils._ordered_set import OrderedSet
    s = OrderedSet([3, 1, 2])
    s.add(5)
    s.discard(1)
    return x + len(s), list(s), 3 in s


class SetSub(set):
    pass


class ListSub(list):
    pass


def reprs(x):
    d = collections.deque([1, 2], maxlen=3)
    return x + 1, repr(SetSub([1, 2])), str(ListSub([1])), f"{SetSub()}", repr(d)


@pytest.mark.parametrize("fn", [operator_functions, method_names, ordered_set, reprs],
                         ids=lambda f: f.__name__)
def test_python_builtins(fn):
    counter = compare(fn, torch.randn(3))
    assert counter.frame_count == 1


class _Case(unittest.TestCase):
    def runTest(self):
        pass


def builtin_errors_caught(x):
    s = {1, 2}
    try:
        s - 1                      # TypeError raised in the trace, caught by the program
    except TypeError as e:
        x = x + len(e.args)
    try:
        [1, 2].count()
    except TypeError:
        x = x * 2
    return x


def test_builtin_errors_raised_in_trace():
    counter = compare(builtin_errors_caught, torch.randn(3))
    assert counter.frame_count == 1


def test_unittest_asserts_traced_when_enabled(monkeypatch):
    """torch._dynamo.config.enable_trace_unittest, as torch._dynamo: assert* methods and
    assertRaises' context inlined (fullgraph)."""
    case = _Case()

    def fn(x):
        s = {1, 2}
        case.assertRaises(TypeError, s.isdisjoint)
        with case.assertRaises(TypeError):
            s - 1
        case.assertEqual(len(s), 2)
        case.assertIn(1, s)
        return x + 1

    monkeypatch.setattr(torch._dynamo.config, "enable_trace_unittest", True)
    cdynamo.reset()
    out = cdynamo.compile(fn, backend="eager", fullgraph=True)(torch.ones(2))
    assert torch.equal(out, torch.full((2,), 2.0))
