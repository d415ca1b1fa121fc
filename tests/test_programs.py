"""Programs without graph breaks: cdynamo's result equals eager's (bitwise with a graph run as
it is) and it hands as many graphs to the backend as torch._dynamo does."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import models
from conftest import requires_engine
from helpers import CountingBackend, assert_same, compare

pytestmark = requires_engine


def A(*shape):
    return torch.randn(*shape)


# --- seed 000 -------------------------------------------------------------------------------

def add_kernel(a, b):
    return a + b


def add_kernel2(a, b):
    a0 = 0
    a1 = 1
    a2 = 2
    a3 = a0 + a1 + a2
    return a + b + a3


def simple_kernel(a, b, actived: bool):
    if actived:
        return a + b
    else:
        return a - b


def func0(a, b):
    return a + b


def func1(a, b):
    sum = a - b
    sum += func0(a, b)
    return sum


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    return x * b


def test_add_kernel():
    compare(add_kernel, A(3, 4), A(3, 4))


def test_add_kernel2_constant_folded():
    c = compare(add_kernel2, A(3, 4), A(3, 4))
    consts = [a for gm in c.graphs for n in gm.graph.nodes for a in n.args if not isinstance(a, torch.fx.Node)]
    assert 3 in consts, "a0 + a1 + a2 should be folded into the constant 3"


@pytest.mark.parametrize("actived", [True, False])
def test_simple_kernel(actived):
    compare(simple_kernel, A(3, 4), A(3, 4), actived)


def test_inline_func1_func0():
    c = compare(func1, A(3, 4), A(3, 4))
    assert c.frame_count == 1


def test_toy_example_ten_calls():
    counter = CountingBackend()
    import cdynamo
    f = cdynamo.compile(toy_example, backend=counter)
    for _ in range(10):
        a, b = torch.randn(10), torch.randn(10)
        assert torch.equal(f(a, b), toy_example(a, b))
    assert counter.frame_count == 1
    compare(toy_example, torch.randn(10), torch.randn(10))


# --- torch functions, methods, operators ---------------------------------------------------

def torch_functions(x, y):
    return torch.sin(x) + torch.cos(y) * torch.exp(torch.tanh(x)) - torch.sigmoid(y).sqrt()


def tensor_methods(x):
    return x.relu().sum(dim=1, keepdim=True).mul(2).view(-1).unsqueeze(0).t().contiguous()


def inplace_ops(x):
    y = x.clone()
    y.add_(1)
    y.mul_(3)
    y.clamp_(min=0.5)
    return y


def operators(x, y):
    return (x @ y.t(), x ** 2, (x * 10) // 3, x % 2, -x, x - y, x / (y.abs() + 1))


def comparisons(x, y):
    return (x < y, x <= y, x > 0, x >= y, x == y, x != y)


def indexing(x):
    return x[0], x[:, 1:], x[..., None], x[1:3, ::2], x[-1, 2]


def store_subscr(x):
    y = x.clone()
    y[0] = 0.0
    y[:, 1] = y[:, 2] * 2
    return y


def shape_arithmetic(x):
    n = x.shape[0] * x.size(1)
    d = x.dim()
    y = x.reshape(n)
    z = y * d
    if x.dtype == torch.float32:
        z = z + 1
    return z.reshape(x.size(0), -1)


def functional_calls(x, w):
    return F.softmax(F.relu(F.linear(x, w)), dim=-1) + F.gelu(x).sum()


def loops(x, ys):
    total = x
    for i in range(3):
        total = total + i
    for a, b in zip(ys, ys[1:]):
        total = total + a * b
    for i, y in enumerate(ys):
        total = total - y * i
    for t in (x, x * 2):
        total = total + t
    return total


def dict_items(x, d):
    out = x
    for k, v in d.items():
        out = out + v * len(k)
    return out


def comprehensions(x):
    parts = [x * i for i in range(4)]
    table = {i: p + 1 for i, p in enumerate(parts)}
    return parts[0] + parts[1] + parts[2] + parts[3], table


def closures(x):
    scale = 3

    def inner(t):
        return t * scale

    def outer(t):
        return inner(t) + scale

    return outer(x)


def kwargs_defaults(x, y=None, *, alpha=2.0, beta=1):
    if y is None:
        y = x
    return x * alpha + y * beta


def star_args(x, *args, **kwargs):
    out = x
    for a in args:
        out = out + a
    for k, v in kwargs.items():
        out = out * v
    return out


def returns_containers(x):
    return (x + 1, [x * 2, x * 3], {"a": x - 1, "b": (x, 4)})


def unpacking(x):
    a, b = x.chunk(2)
    first, *rest = (a, b, a * b)
    return first + rest[0] + rest[1]


def no_grad_block(x, w):
    with torch.no_grad():
        y = x @ w
    return y + 1


def math_constants(x):
    c = math.sqrt(16) + math.pi * 0 + math.floor(2.7) + abs(-1) + max(1, 2) + min(3, 4) + len([1, 2])
    return x * c


def no_tensor_ops(a, b):
    return a + b * 2


def tuple_arg(x, pair):
    a, b = pair
    return x * a + b


def list_methods(x):
    items = [x, x + 1, *[x * 2, x * 3]]
    return torch.stack(items).sum(0)


def is_and_contains(x, flag, names):
    out = x
    if flag is None:
        out = out + 1
    if "b" in names:
        out = out * 2
    if "z" not in names:
        out = out - 3
    return out


def torch_factories(x):
    return x + torch.ones(3, 4) * 2 + torch.zeros_like(x) + torch.arange(4.0)


def matmul_chain(x, y, z):
    return torch.matmul(x, y).mm(z).softmax(-1)


def dtype_conversion(x):
    return x.to(torch.float64).sum() + x.int().float().mean(), x.type_as(x.double())


def where_cat(x, y):
    return torch.where(x > 0, x, y), torch.cat([x, y], dim=0), torch.stack([x, y], dim=1)


def reductions(x):
    return x.sum(), x.mean(0), x.amax(dim=1), x.argmax(), x.norm(), x.var(unbiased=False)


PROGRAMS = [
    (torch_functions, lambda: (A(3, 4), A(3, 4))),
    (tensor_methods, lambda: (A(3, 4),)),
    (inplace_ops, lambda: (A(3, 4),)),
    (operators, lambda: (A(3, 4), A(3, 4))),
    (comparisons, lambda: (A(3, 4), A(3, 4))),
    (indexing, lambda: (A(4, 5),)),
    (store_subscr, lambda: (A(4, 5),)),
    (shape_arithmetic, lambda: (A(3, 4),)),
    (functional_calls, lambda: (A(3, 4), A(4, 4))),
    (loops, lambda: (A(3), [A(3), A(3), A(3)])),
    (dict_items, lambda: (A(3), {"ab": A(3), "cde": A(3)})),
    (comprehensions, lambda: (A(3),)),
    (closures, lambda: (A(3),)),
    (kwargs_defaults, lambda: (A(3),)),
    (unpacking, lambda: (A(4, 3),)),
    (returns_containers, lambda: (A(3),)),
    (no_grad_block, lambda: (A(3, 4).requires_grad_(), A(4, 2))),
    (math_constants, lambda: (A(3),)),
    (tuple_arg, lambda: (A(3), (2, 5))),
    (list_methods, lambda: (A(3),)),
    (is_and_contains, lambda: (A(3), None, ("a", "b"))),
    (torch_factories, lambda: (A(3, 4),)),
    (matmul_chain, lambda: (A(3, 4), A(4, 5), A(5, 2))),
    (dtype_conversion, lambda: (A(3, 4),)),
    (where_cat, lambda: (A(3, 4), A(3, 4))),
    (reductions, lambda: (A(3, 4),)),
]


@pytest.mark.parametrize("fn,make_args", PROGRAMS, ids=[p[0].__name__ for p in PROGRAMS])
def test_program(fn, make_args):
    compare(fn, *make_args())


def test_kwargs_given():
    compare(kwargs_defaults, A(3), A(3), alpha=0.5, beta=3)


def test_star_args_kwargs():
    compare(star_args, A(3), A(3), A(3), p=2.0, q=3.0)


def test_no_tensor_ops_gives_no_graph():
    c = compare(no_tensor_ops, 3, 4)
    assert c.frame_count == 0


# --- nn.Modules -----------------------------------------------------------------------------

class WithHelper(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def helper(self, x, k):
        return torch.relu(self.lin(x)) * k

    def forward(self, x):
        return self.helper(x, 2) + self.helper(x, 3)


class ModuleListLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(5, 5) for _ in range(3)])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x) + i
        return x


MODULES = [
    ("mlp", lambda: models.MLP().eval(), models.mlp_inputs),
    ("transformer_stack", lambda: models.TransformerStack().eval(), models.transformer_inputs),
    ("convnet", lambda: models.ConvNet().eval(), models.convnet_inputs),
    ("linear", lambda: nn.Linear(4, 3), lambda: (A(2, 4),)),
    ("conv2d", lambda: nn.Conv2d(3, 4, 3), lambda: (A(1, 3, 8, 8),)),
    ("layernorm", lambda: nn.LayerNorm(4), lambda: (A(2, 4),)),
    ("batchnorm2d_eval", lambda: nn.BatchNorm2d(3).eval(), lambda: (A(2, 3, 4, 4),)),
    ("sequential", lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), lambda: (A(3, 4),)),
    ("modulelist_loop", ModuleListLoop, lambda: (A(2, 5),)),
    ("helper_method", WithHelper, lambda: (A(2, 6),)),
]


@pytest.mark.parametrize("name,make_mod,make_args", MODULES, ids=[m[0] for m in MODULES])
def test_module(name, make_mod, make_args):
    torch.manual_seed(0)
    mod = make_mod()
    with torch.no_grad():
        compare(mod, *make_args())


# --- other backends -------------------------------------------------------------------------

def _train_check(backend, mod_factory, args, atol=1e-5):
    import cdynamo
    torch.manual_seed(0)
    ref_mod = mod_factory()
    mod = mod_factory()
    mod.load_state_dict(ref_mod.state_dict())
    ref_args = [a.clone().requires_grad_() for a in args]
    test_args = [a.clone().requires_grad_() for a in args]
    expected = ref_mod(*ref_args)
    expected.sum().backward()
    counter = CountingBackend(inner=backend)
    compiled = cdynamo.compile(mod, backend=counter)
    out = compiled(*test_args)
    assert_same(out, expected, exact=False, atol=atol)
    out.sum().backward()
    assert counter.frame_count == 1
    for (name, p), (_, q) in zip(mod.named_parameters(), ref_mod.named_parameters()):
        assert p.grad is not None, f"no grad for {name}"
        assert torch.allclose(p.grad, q.grad, atol=atol, rtol=1e-4), f"grad of {name} differs"
    for a, b in zip(test_args, ref_args):
        assert torch.allclose(a.grad, b.grad, atol=atol, rtol=1e-4)


def test_aot_eager_mlp_training():
    from cdynamo._backends import aot_eager
    _train_check(aot_eager, lambda: models.MLP(p=0.0), models.mlp_inputs())


def test_aot_eager_function_training():
    import cdynamo
    a = torch.randn(10, requires_grad=True)
    b = torch.randn(10, requires_grad=True)
    a2, b2 = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    out = cdynamo.compile(toy_example, backend="aot_eager")(a, b)
    ref = toy_example(a2, b2)
    assert torch.allclose(out, ref)
    out.sum().backward()
    ref.sum().backward()
    assert torch.allclose(a.grad, a2.grad) and torch.allclose(b.grad, b2.grad)


def test_aot_eager_transformer_inference():
    import cdynamo
    mod = models.TransformerStack().eval()
    x, = models.transformer_inputs()
    with torch.no_grad():
        assert_same(cdynamo.compile(mod, backend="aot_eager")(x), mod(x), exact=False)


def test_inductor_mlp_training():
    from cdynamo._backends import inductor
    _train_check(inductor, lambda: models.MLP(p=0.0), models.mlp_inputs(), atol=1e-4)
