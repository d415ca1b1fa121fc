"""__torch_function__ tensor subclasses (as torchvision's tv_tensors make them with
as_subclass): the subclass type is kept on every value eager keeps it on, inside the trace
(type(), isinstance()) and on what the compiled function returns; x.as_subclass(cls) is
traced (no graph node); the graph runs on plain tensors, so AOTAutograd backends take such
inputs. An overridden __torch_function__ is traced as user code with the function eager
hands it (torch.add, Tensor.add, Tensor.__add__, ...), its DisableTorchFunctionSubclass
blocks and super().__torch_function__ included. Results against eager, graph and op counts
against torch._dynamo."""
import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

import cdynamo
from conftest import requires_engine
from helpers import CountingBackend, assert_same, run_torch_dynamo

pytestmark = requires_engine


class Sub(torch.Tensor):
    """torch.Tensor's default __torch_function__: results are converted to Sub."""


class SubSub(Sub):
    pass


class Logged(torch.Tensor):
    """Overrides __torch_function__, changing results (every add adds one more) and
    returning plain tensors as tv_tensors do."""
    calls = 0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        Logged.calls += 1
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **(kwargs or {}))
            if func in (torch.Tensor.add, torch.add, torch.Tensor.__add__):
                out = out + 1
        return out


_FORCE_SUBCLASS = {torch.Tensor.clone, torch.Tensor.to, torch.Tensor.detach,
                   torch.Tensor.requires_grad_}


class TVTensor(torch.Tensor):
    """torchvision's tv_tensors protocol: results are plain tensors except for a few
    functions that keep the subclass."""

    @classmethod
    def _wrap(cls, t):
        return t.as_subclass(cls)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if not all(issubclass(cls, t) for t in types):
            return NotImplemented
        with torch._C.DisableTorchFunctionSubclass():
            output = func(*args, **kwargs or dict())
        if func in _FORCE_SUBCLASS and isinstance(args[0], cls):
            output = cls._wrap(output)
        return output


class ViaSuper(torch.Tensor):
    """An override that defers to torch.Tensor's default through super()."""
    seen = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        ViaSuper.seen.append(func.__name__)
        return super().__torch_function__(func, types, args, kwargs)


def _types(out):
    if isinstance(out, (tuple, list)):
        return [_types(o) for o in out]
    return type(out)


def _check(fn, *args, backend="eager", graphs=None):
    expected = fn(*args)
    counter = CountingBackend(None if backend == "eager" else
                              torch._dynamo.lookup_backend(backend))
    cdynamo.reset()
    compiled = cdynamo.compile(fn, backend=counter)
    for _ in range(2):
        out = compiled(*args)
        assert_same(out, expected)
        assert _types(out) == _types(expected)
    if graphs is not None:
        assert counter.frame_count == graphs
    return counter


def type_checks(x):
    y = x.as_subclass(Sub)
    z = y * 2
    return type(z) is Sub, isinstance(z, Sub), type(y) is Sub, isinstance(x, Sub), z


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_as_subclass_and_ops_keep_the_type_in_the_trace(backend):
    x = torch.randn(3)
    counter = _check(type_checks, x, backend=backend, graphs=1)
    out, dyn = run_torch_dynamo(type_checks, x)
    assert counter.frame_count <= dyn.frame_count
    assert out[:4] == type_checks(x)[:4]


def ops_on_subclass(x, w):
    a = x + 1
    b = torch.cat([a, x])
    c, d = b.chunk(2)
    e = F.linear(c, w)
    f = e.relu().T
    return a, b, c, d, e, f, x.sum() * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_results_of_ops_on_a_subclass_input_are_the_subclass(backend):
    x = torch.randn(4, 4).as_subclass(Sub)
    w = torch.randn(4, 4)
    counter = _check(ops_on_subclass, x, w, backend=backend, graphs=1)
    _, dyn = run_torch_dynamo(ops_on_subclass, x, w)
    assert counter.frame_count == dyn.frame_count
    assert counter.op_count >= dyn.op_count


def mixed(a, b):
    return a * b, (a * b).as_subclass(torch.Tensor) + 1


def test_most_derived_subclass_wins_and_as_subclass_back_to_tensor():
    a = torch.randn(3).as_subclass(Sub)
    b = torch.randn(3).as_subclass(SubSub)
    out = _check(mixed, a, b, graphs=1)
    assert out.frame_count == 1
    res = cdynamo.compile(mixed, backend="eager")(a, b)
    assert type(res[0]) is SubSub and type(res[1]) is torch.Tensor


def logged_fn(x):
    y = x.as_subclass(Logged)
    z = y + 1
    return z * 2, type(z) is Logged


def tv_style(x):
    y = TVTensor._wrap(x)
    a = y * 2
    b = y.clone()
    c = torch.nn.functional.relu(b)
    d = 1 - b
    return a, b, c, d, type(a) is TVTensor, type(b) is TVTensor, isinstance(c, TVTensor)


def via_super(x):
    y = x.as_subclass(ViaSuper)
    z = (y + 1).sin()
    parts = torch.chunk(z, 2)
    return z, parts, type(z).__name__, isinstance(parts[1], ViaSuper)


@pytest.mark.parametrize("fn", [tv_style, via_super])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_overrides_traced_in_one_graph_as_dynamo(fn, backend):
    x = torch.randn(4)
    counter = _check(fn, x, backend=backend, graphs=1)
    _, dyn = run_torch_dynamo(fn, x)
    assert counter.frame_count == dyn.frame_count == 1
    assert counter.op_count >= dyn.op_count


def test_super_torch_function_sees_eager_funcs():
    ViaSuper.seen = []
    via_super(torch.randn(4))
    eager = list(ViaSuper.seen)
    ViaSuper.seen = []
    cdynamo.reset()
    cdynamo.compile(via_super, backend="eager")(torch.randn(4))
    assert ViaSuper.seen == eager == ["add", "sin", "chunk"]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_overridden_torch_function_runs_as_in_eager(backend):
    x = torch.randn(3)
    Logged.calls = 0
    expected = logged_fn(x)
    eager_calls = Logged.calls
    Logged.calls = 0
    cdynamo.reset()
    compiled = cdynamo.compile(logged_fn, backend=backend)
    out = compiled(x)
    assert_same(out, expected)
    assert Logged.calls == eager_calls
    assert torch.equal(compiled(x)[0], expected[0])


def test_inplace_on_subclass_keeps_identity_and_type():
    def f(x):
        x.add_(1)
        return x, type(x)

    x = torch.zeros(3).as_subclass(Sub)
    out = cdynamo.compile(f, backend="eager")(x)
    assert out[0] is x and out[1] is Sub and torch.equal(x, torch.ones(3))


def test_parameter_inputs_stay_plain_parameters():
    lin = torch.nn.Linear(3, 3)

    def f(inp):
        w = lin.weight * 2
        return w, isinstance(lin.weight, torch.nn.Parameter), type(w)

    expected = f(torch.randn(3))
    out = cdynamo.compile(f, backend="eager")(torch.randn(3))
    assert out[1:] == expected[1:] == (True, torch.Tensor)
    assert type(out[0]) is torch.Tensor


# ---- attributes stored on tensors made in the trace; subclasses built by their __new__ --------

class BoundingBoxes(torch.Tensor):
    """As torchvision's tv_tensors.BoundingBoxes: metadata as instance attributes."""


def _wrap_boxes(t, fmt, size):
    b = t.as_subclass(BoundingBoxes)
    b.format = fmt
    b.canvas_size = size
    return b


def flip_boxes(boxes):
    w = boxes.canvas_size[1]
    x = boxes.as_subclass(torch.Tensor)
    flipped = torch.stack([w - x[:, 2], x[:, 1], w - x[:, 0], x[:, 3]], dim=-1)
    return _wrap_boxes(flipped, boxes.format, boxes.canvas_size)


def stored_then_read(x):
    b = (x * 2).as_subclass(BoundingBoxes)
    b.format = "XYXY"
    return b, b.format, b


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_attributes_stored_on_a_tensor_made_in_the_trace(backend):
    """Kept on the value, read back, set on the object the compiled function returns; one
    object however many times it is returned (was a graph break whose resume function got a
    second object, so the returned box had no `format`: a wrong result)."""
    boxes = _wrap_boxes(torch.tensor([[1.0, 2.0, 5.0, 6.0]]), "XYXY", (10, 20))
    out = cdynamo.compile(flip_boxes, backend=backend)(boxes)
    expected = flip_boxes(boxes)
    assert type(out) is BoundingBoxes and out.format == "XYXY" and out.canvas_size == (10, 20)
    assert torch.equal(out.as_subclass(torch.Tensor), expected.as_subclass(torch.Tensor))
    counter = CountingBackend()
    cdynamo.compile(flip_boxes, backend=counter)(boxes)
    _, dyn = run_torch_dynamo(flip_boxes, boxes)
    assert counter.frame_count == dyn.frame_count == 1
    b1, fmt, b2 = cdynamo.compile(stored_then_read, backend=backend)(torch.ones(2))
    assert b1 is b2 and fmt == "XYXY" and b1.format == "XYXY"


class Image(torch.Tensor):
    """As torchvision's tv_tensors.Image: built by its own __new__ from data."""

    def __new__(cls, data):
        return torch.as_tensor(data).as_subclass(cls)


def make_image(x):
    img = Image(x.flip(-1))
    return img * 2, isinstance(img, Image)


def test_subclass_made_by_its_own_new_is_traced():
    x = torch.randn(3, 4)
    counter = CountingBackend()
    out, is_image = cdynamo.compile(make_image, backend=counter)(x)
    expected, _ = make_image(x)
    assert is_image and type(out) is Image and torch.equal(out, expected)
    _, dyn = run_torch_dynamo(make_image, x)
    assert counter.frame_count == dyn.frame_count == 1


def make_parameter(x):
    return torch.nn.Parameter(x * 2)


def test_parameter_construction_stays_a_graph_break():
    x = torch.randn(3)
    out = cdynamo.compile(make_parameter, backend="eager")(x)
    assert type(out) is torch.nn.Parameter and torch.equal(out, x * 2)
    assert [b.reason for b in cdynamo.explain(make_parameter)(x).break_reasons] == [
        "construction of Parameter (a tensor subclass)"]


class TaggedMeta(torch.Tensor):
    """MONAI MetaTensor / torchvision TVTensor style: the override copies a Python attribute
    onto its outputs."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs or {})
        if isinstance(out, TaggedMeta) and isinstance(args[0], TaggedMeta) and \
                hasattr(args[0], "tag"):
            out.tag = args[0].tag
        return out


def test_attribute_stored_on_a_traced_tensor_is_seen_by_hasattr():
    """An attribute stored on a tensor made in the trace (inside __torch_function__ or in
    the function) is seen by hasattr() and getattr(t, name, default), and set on the returned
    tensor (getattr with a default gave None: a wrong result)."""
    def fn(x):
        m = x.as_subclass(TaggedMeta)
        m.tag = "img"
        y = m * 2
        z = x * 3
        z.note = "plain"
        return y, getattr(y, "tag", None), hasattr(y, "tag"), getattr(z, "note", None)

    x = torch.ones(2)
    expected = fn(x)
    compiled = cdynamo.compile(fn, backend=CountingBackend())
    for _ in range(2):
        out = compiled(x)
        assert out[1:] == expected[1:] == ("img", True, "plain")
        assert type(out[0]) is TaggedMeta and out[0].tag == "img"
        assert torch.equal(out[0].as_subclass(torch.Tensor), expected[0].as_subclass(torch.Tensor))
