"""More programs, compiled with the eager backend: results (values and Python types) must
equal eager's on two calls. These mix constructs (try blocks, asserts, dataclass configs,
named-tuple results, in-place updates, nested grad modes, while loops over constants, ...)
where a wrong result or an exception would be a defect; where the tracer cannot capture a
construct, the frame must still run correctly (unmodified or split by a graph break)."""
import dataclasses
import functools
import math  # noqa: F401
import operator

import pytest
import torch
import torch.nn.functional as F

import cdynamo
from conftest import requires_engine

@dataclasses.dataclass
class Cfg:
    scale: float = 2.0
    act: str = "relu"
cfg = Cfg()
def p1(x):
    try:
        y = x + 1
    except ValueError:
        y = x - 1
    return y
def p2(x):
    assert x.dim() == 2, "bad"
    return x.t()
def p3(x):
    assert (x > -100).all()
    return x * 2
def p4(x):
    return f"{x.shape}", x * cfg.scale
def p5(x, c=cfg):
    return F.relu(x) * c.scale if c.act == "relu" else x
def p6(x):
    s = 0
    for i, row in enumerate(x):
        s = s + row * i
    return s
def p7(x):
    return functools.reduce(operator.add, [x, x, x])
def p8(x):
    ys = list(map(lambda t: t * 2, [x, x + 1]))
    return ys
def p9(x):
    return torch.stack([x[i] for i in range(x.shape[0]) if i % 2 == 0])
def p10(x):
    d = {}
    d.update(a=x)
    d.setdefault("b", x + 1)
    return d
def p11(x):
    out = x
    for _ in range(3):
        out = out @ x.T if out.shape[-1] == x.shape[0] else out
    return out
def p12(x):
    if x.requires_grad:
        return x * 2
    return x.sum(dim=-1, keepdim=True).expand_as(x).contiguous()
def p13(x):
    a, b = x.chunk(2, dim=1)
    m, idx = x.max(dim=1)
    return a + b, m, idx
def p14(x):
    y = x.clone()
    y += 1
    y.mul_(2)
    y[y > 2] = 0
    return y
def p15(x):
    with torch.no_grad():
        with torch.enable_grad():
            y = x * 2
    return y
def p16(x, *, k=3):
    return torch.topk(x.flatten(), k).values
def p17(x):
    return x.new_zeros(3), x.new_ones((2, 2)), torch.zeros_like(x), torch.arange(4).float()
def p18(x):
    print_it = lambda v: None
    return [t.sum() for t in x.split(1)]
def p19(x):
    n = int(x.shape[0] * 1.5)
    return x.repeat(n, 1)
def p20(x):
    global_var = globals().get("cfg")
    return x * global_var.scale
def p21(x):
    z = torch.where(x > 0, x, torch.zeros_like(x))
    return z.masked_fill(z == 0, -1.0)
def p22(x):
    return x.float().double().to(torch.float32).type(torch.float64)
def p23(x):
    return sorted([3, 1, 2]), max(x.shape), min(1, 2), abs(-3), round(2.5), divmod(7, 2)
def p24(x):
    return torch.einsum("ij,kj->ik", x, x), torch.nn.functional.softmax(x, -1)
def p25(x):
    i = 0
    while i < 3:
        x = x + i
        i += 1
    return x


PROGRAMS = [v for k, v in sorted(globals().items()) if k.startswith("p") and k[1:].isdigit()]


def same(a, b):
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            same(a[k], b[k])
    else:
        assert a == b


@requires_engine
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_more_programs_equal_eager(fn):
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    expected = fn(x)
    cdynamo.reset()
    compiled = cdynamo.compile(fn, backend="eager")
    same(expected, compiled(x))
    same(expected, compiled(x))
    cdynamo.reset()


@requires_engine
def test_named_tuple_result_fields_and_type():
    def f(x):
        r = torch.topk(x.flatten(), 3)
        return r, r.values * 2, r.indices

    x = torch.randn(4, 4)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    out = cdynamo.compile(f, backend=backend)(x)
    same(f(x), out)
    assert type(out[0]).__name__ == "topk" and len(graphs) == 1
    cdynamo.reset()


# ---- programs with graph breaks, data-dependent values and Python containers as inputs

import collections  # noqa: E402
import itertools  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402

torch.manual_seed(0)
def q1(x, ys):
    for y in ys:
        x = x + y
    return x
def q2(x, d):
    return x * d["a"] + d.get("b", 0)
def q3(x, n):
    return [x * i for i in range(n)]
def q4(x):
    out = []
    for i in range(3):
        if i % 2:
            out.append(x * i)
        else:
            out.append(x - i)
    return torch.cat(out)
def q5(x):
    y = x.sum().item()
    if y > 0:
        return x * y
    return x
def q6(x):
    vals = x.tolist()
    return torch.tensor([v * 2 for v in vals[0]])
def q7(x):
    a = x.numpy()
    return torch.from_numpy(a * 2)
def q8(x, flag=None):
    if flag is None:
        flag = x.mean() > 0
    return x if flag else -x
def q9(x):
    k = x.shape[-1] // 2
    return x[..., :k], x[..., k:]
def q10(x):
    t = (x, x + 1)
    a, b = t
    return {"s": a + b, "l": [a, b]}
def q11(x):
    try:
        return x.foo
    except AttributeError:
        return x + 1
def q12(x):
    import math as m
    return x * m.pi
def q13(x):
    lst = [x]
    lst.extend([x * 2, x * 3])
    lst.insert(0, x - 1)
    return sum(lst)
def q14(x):
    acc = torch.zeros_like(x)
    for a, b in itertools.product(range(2), range(2)):
        acc = acc + a * b
    return acc
def q15(x):
    nt = collections.namedtuple("NT", "a b")(x, x * 2)
    return nt.a + nt.b
def q16(x):
    if x.sum() > 0 and x.max() < 100:
        return x + 1
    return x - 1
def q17(x):
    r = x if x.sum() > 0 else -x
    return r * 2
def q18(x):
    s = str(x.dtype)
    return x * 2 if s == "torch.float32" else x
def q19(x):
    y = x
    for _ in range(2):
        y = y @ x
        print("step")
    return y
def q20(x, scale=torch.tensor(2.0)):
    return x * scale
BREAK_CASES = [(q1, (torch.randn(3), [torch.randn(3), torch.randn(3)])), (q2, (torch.randn(3), {"a": torch.randn(3), "b": 2.0})),
         (q3, (torch.randn(3), 3)), (q4, (torch.randn(3),)), (q5, (torch.randn(3),)), (q6, (torch.randn(2, 3),)),
         (q7, (torch.randn(3),)), (q8, (torch.randn(3),)), (q9, (torch.randn(2, 4),)), (q10, (torch.randn(3),)),
         (q11, (torch.randn(3),)), (q12, (torch.randn(3),)), (q13, (torch.randn(3),)), (q14, (torch.randn(3),)),
         (q15, (torch.randn(3),)), (q16, (torch.randn(3),)), (q17, (torch.randn(3),)), (q18, (torch.randn(3),)),
         (q19, (torch.randn(3, 3),)), (q20, (torch.randn(3),))]


@requires_engine
@pytest.mark.parametrize("fn,args", BREAK_CASES, ids=[c[0].__name__ for c in BREAK_CASES])
def test_more_break_programs_equal_eager(fn, args):
    with contextlib.redirect_stdout(io.StringIO()):
        expected = fn(*args)
        cdynamo.reset()
        compiled = cdynamo.compile(fn, backend="eager")
        first, second = compiled(*args), compiled(*args)
    same(expected, first)
    same(expected, second)
    cdynamo.reset()


def _assert_one_graph_equal_eager(f, x):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    same(f(x), cdynamo.compile(f, backend=backend)(x))
    assert len(graphs) == 1
    cdynamo.reset()


@requires_engine
def test_hasattr_on_tensors_and_modules():
    def f(x):
        a = hasattr(x, "shape") and hasattr(torch, "relu")
        b = hasattr(x, "no_such_attribute")
        return x + 1 if a and not b else x - 1

    x = torch.randn(3)
    _assert_one_graph_equal_eager(f, x)


@requires_engine
def test_del_subscript_on_local_containers():
    def f(x):
        d = {"a": x, "b": x * 2, "c": x * 3}
        del d["b"]
        lst = [x, x + 1, x + 2]
        del lst[0]
        return d, lst

    x = torch.randn(3)
    _assert_one_graph_equal_eager(f, x)


def _noisy(v):
    print("noisy", end="")
    return v * 2


def _comprehension_after_next(x):
    it = iter([x, x + 1, x + 2])
    first = next(it)
    ys = [_noisy(v) for v in it]          # breaks inside the comprehension's call
    return first, ys


def _dict_comprehension_breaking(x):
    return {k: _noisy(v) for k, v in zip("ab", (x, x * 3))}


@requires_engine
@pytest.mark.parametrize("fn", [_comprehension_after_next, _dict_comprehension_breaking],
                         ids=lambda f: f.__name__)
def test_comprehension_call_breaks(fn):
    """A comprehension whose body graph-breaks: the call is rebuilt (MAKE_FUNCTION on the
    comprehension's code, the iterator from its remaining items) and runs in Python."""
    x = torch.randn(3)
    with contextlib.redirect_stdout(io.StringIO()):
        expected = fn(x)
        cdynamo.reset()
        compiled = cdynamo.compile(fn, backend="eager")
        first, second = compiled(x), compiled(x)
    same(expected, first)
    same(expected, second)
    cdynamo.reset()
