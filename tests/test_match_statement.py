"""The match statement (PEP 634) traced: literal, capture, sequence (with star), mapping
(with **rest), class (positional via __match_args__, keyword, builtin self-matching),
or- and guard patterns, on constants, containers, dataclasses and tensors' metadata.
Results equal eager's and the graph counts torch._dynamo's (one graph, no break)."""
import dataclasses

import pytest
import torch

import cdynamo
from conftest import requires_engine
from cdynamo import _glue
from helpers import compare, check_against_eager

pytestmark = requires_engine


@pytest.fixture(autouse=True)
def no_graph_break(request):
    """Every test here traces its match statement without a graph break or a frame run
    unmodified (but the one whose match raises to the user)."""
    breaks, unmodified = len(_glue.break_log), len(_glue.unmodified_log)
    yield
    if "errors_reach_the_user" in request.node.name:
        return
    assert [b.reason for b in _glue.break_log[breaks:]] == []
    assert [u.reason for u in _glue.unmodified_log[unmodified:]] == []


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Config:
    __match_args__ = ("mode", "scale")

    def __init__(self, mode, scale):
        self.mode = mode
        self.scale = scale


def by_sequence(x, spec):
    match spec:
        case []:
            return x
        case [a]:
            return x * a
        case [a, b]:
            return x * a + b
        case [a, *rest]:
            return x * a + len(rest)
        case _:
            return x - 1


def by_mapping(x, spec):
    match spec:
        case {"op": "add", "value": v}:
            return x + v
        case {"op": "mul", **rest}:
            return x * rest["value"] + len(rest)
        case {"op": op}:
            return x - len(op)
        case _:
            return x


def by_class(x, spec):
    match spec:
        case Point(x=0, y=yy):
            return x + yy
        case Point(px, py) if px > py:
            return x * px - py
        case Point():
            return x
        case Config("scale", s):
            return x * s
        case Config(mode="shift", scale=s):
            return x + s
        case int(n) | float(n):
            return x + n
        case str() as name:
            return x + len(name)
        case _:
            return -x


def by_literal(x, mode):
    match mode:
        case "relu":
            return torch.relu(x)
        case "gelu" | "silu":
            return torch.nn.functional.silu(x)
        case None:
            return x
        case 1 | 2 | 3:
            return x + mode
        case _:
            return x.sin()


def by_shape(x):
    match x.shape:
        case (n,):
            return x * n
        case (n, m) if n == m:
            return x @ x
        case (n, *rest):
            return x.sum(0) + len(rest)


@pytest.mark.parametrize("spec", [[], [2.0], [2.0, 3.0], [1.0, 2.0, 3.0, 4.0], (5.0,), "ab"])
def test_sequence_patterns(spec):
    counter = compare(by_sequence, torch.randn(3), spec)
    assert counter.frame_count == (0 if spec == [] else 1)


@pytest.mark.parametrize("spec", [{"op": "add", "value": 2.0}, {"op": "mul", "value": 3.0, "k": 1},
                                  {"op": "neg"}, {"other": 1}, [1]])
def test_mapping_patterns(spec):
    counter = compare(by_mapping, torch.randn(3), spec)
    assert counter.frame_count == ("op" in spec)


@pytest.mark.parametrize("spec", [Point(0, 4), Point(3, 1), Point(1, 3), Config("scale", 2.0),
                                  Config("shift", 5.0), 3, 2.5, "abc", None])
def test_class_patterns(spec):
    counter = check_against_eager(by_class, torch.randn(3), spec)
    assert counter.frame_count == (0 if spec == Point(1, 3) else 1)


@pytest.mark.parametrize("mode", ["relu", "silu", None, 2, "other"])
def test_literal_patterns(mode):
    counter = compare(by_literal, torch.randn(3), mode)
    assert counter.frame_count == (mode is not None)


@pytest.mark.parametrize("shape", [(4,), (3, 3), (2, 3, 4)])
def test_patterns_on_tensor_shape(shape):
    counter = compare(by_shape, torch.randn(*shape))
    assert counter.frame_count == 1


def test_match_args_errors_reach_the_user_as_in_eager():
    class NoArgs:
        pass

    def f(x, obj):
        match obj:
            case NoArgs(a):
                return x + a
        return x

    with pytest.raises(TypeError) as eager:
        f(torch.randn(2), NoArgs())
    with pytest.raises(TypeError) as ours:
        cdynamo.compile(f, backend="eager")(torch.randn(2), NoArgs())
    assert str(ours.value) == str(eager.value)


def test_class_pattern_guards_recompile_on_another_class():
    calls = []

    def backend(gm, ex):
        calls.append(gm)
        return gm.forward

    f = cdynamo.compile(by_class, backend=backend)
    x = torch.randn(3)
    for spec in (Point(0, 4), Point(0, 5), Config("scale", 2.0)):
        assert torch.equal(f(x, spec), by_class(x, spec))
    assert len(calls) >= 2
