"""Higher-order ops (issue 8, scope 3): torch.cond, torch.utils.checkpoint.checkpoint and
custom torch.autograd.Function are traced as torch._dynamo traces them: each body into a
subgraph (a GraphModule registered on the graph), the op as one torch.ops.higher_order.*
node. Results and gradients are compared with eager, graph counts and the op node with
torch._dynamo on the same function. torch.vmap and torch.func.grad/grad_and_value are inlined
between functorch's primitives as torch._dynamo does; the other torch.func transforms
(jacrev, vjp, ...) are a clean graph break."""
import copy
import logging

import pytest
import torch
import torch._dynamo
from torch.autograd.function import once_differentiable
from torch.utils.checkpoint import checkpoint

import cdynamo
from helpers import CountingBackend, assert_same

HOP = torch._ops.HigherOrderOperator


def hop_names(counter):
    """Names of the higher-order op nodes in the top graphs a CountingBackend received."""
    return [n.target.__name__ for gm in counter.graphs for n in gm.graph.nodes
            if n.op == "call_function" and isinstance(n.target, HOP)]


def clone(args):
    return tuple(a.detach().clone().requires_grad_(a.requires_grad)
                 if isinstance(a, torch.Tensor) else a for a in args)


def check(fn, *args, hop=None, calls=2, exact=True):
    """fn eager vs torch._dynamo vs cdynamo (calls times, backend counting eager): results
    equal, the same number of graphs, and the op node `hop` in both (or in neither when
    None). Returns cdynamo's CountingBackend."""
    expected = fn(*clone(args))
    dyn = CountingBackend()
    torch._dynamo.reset()
    torch.compile(fn, backend=dyn)(*clone(args))
    torch._dynamo.reset()
    cdynamo.reset()
    cdy = CountingBackend()
    compiled = cdynamo.compile(fn, backend=cdy)
    grad = torch.is_grad_enabled()
    for i in range(calls):
        assert_same(compiled(*clone(args)), expected, f"call {i}", exact=exact)
        assert torch.is_grad_enabled() == grad, "the call left the grad mode changed"
    assert cdy.frame_count == dyn.frame_count, (cdy.frame_count, dyn.frame_count)
    assert hop_names(cdy) == hop_names(dyn) == ([hop] if hop else [])
    return cdy


def grads_of(fn, args, params=()):
    """Run fn(*args), backward of the sum; the result and the grads of the args that require
    grad and of params."""
    out = fn(*args)
    out.sum().backward()
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad] + list(params)
    return out.detach(), [None if t.grad is None else t.grad.clone() for t in leaves]


def check_grads(make, args, backend="aot_eager", exact=False):
    """make() -> (fn, params): the compiled fn's result and gradients (of the args and the
    params) equal eager's."""
    fn, params = make()
    expected = grads_of(fn, clone(args), params)
    fn2, params2 = make()
    cdynamo.reset()
    got = grads_of(cdynamo.compile(fn2, backend=backend), clone(args), params2)
    assert_same(got[0], expected[0], "result", exact=exact)
    assert len(got[1]) == len(expected[1])
    for i, (g, e) in enumerate(zip(got[1], expected[1])):
        assert (g is None) == (e is None), f"grad {i}: {g} vs {e}"
        if e is not None:
            assert_same(g, e, f"grad {i}", exact=exact)


def _net_and_params(net):
    m = copy.deepcopy(net)
    return m, list(m.parameters())


X = torch.tensor([0.5, -1.0, 2.0])
W = torch.tensor([1.5, 2.0, -0.5])


# ---- torch.cond ------------------------------------------------------------------------------

def cond_closure(x):
    return torch.cond(x.sum() > 0, lambda y: y.sin() * W, lambda y: y.cos(), (x,))


def test_cond_both_branches_one_node_with_lifted_global():
    cdy = check(cond_closure, X, hop="cond")
    gm = cdy.graphs[0]
    # both branches are GraphModules on the root and take (x, W): W lifted into both
    subs = dict(gm.named_children())
    assert set(subs) == {"cond_true_0", "cond_false_0"}
    for sub in subs.values():
        assert isinstance(sub, torch.fx.GraphModule)
        assert len([n for n in sub.graph.nodes if n.op == "placeholder"]) == 2
    # the other branch runs from the same graph (no recompile)
    compiled = cdynamo.compile(cond_closure, backend=cdy)
    assert_same(compiled(-X), cond_closure(-X))
    assert cdy.frame_count == 1


def cond_python_bool(x):
    return torch.cond(True, lambda y: y.sin(), lambda y: y.cos(), (x,))


def test_cond_python_bool_traces_the_branch_taken():
    cdy = check(cond_python_bool, X)
    assert [n.target for n in cdy.graphs[0].graph.nodes if n.op == "call_method"] == ["sin"]


def cond_local_closure_tuple(x, y):
    s = x * 2

    def true_fn(a, b):
        return a + s, b.sin()

    def false_fn(a, b):
        return a - b, s.cos() + b

    return torch.cond(x.mean() > y.mean(), true_fn, false_fn, (x, y))


def test_cond_tuple_result_and_local_closure():
    y = torch.tensor([1.0, 1.0, 1.0])
    check(cond_local_closure_tuple, X, y, hop="cond")
    check(cond_local_closure_tuple, -X, y, hop="cond")


def nested_cond(x):
    def outer_true(y):
        return torch.cond(y.max() > 1, lambda z: z * W, lambda z: z + W, (y,))

    return torch.cond(x.sum() > 0, outer_true, lambda y: -y, (x,))


def test_nested_cond():
    cdy = check(nested_cond, X, hop="cond")
    true_gm = cdy.graphs[0].cond_true_0
    inner = [n for n in true_gm.graph.nodes if n.op == "call_function" and isinstance(n.target, HOP)]
    assert [n.target.__name__ for n in inner] == ["cond"]
    compiled = cdynamo.compile(nested_cond, backend="eager")
    for x in (X, -X, X * 0.1):
        assert_same(compiled(x), nested_cond(x))


def cond_in_a_loop(x):
    for i in range(3):
        # the same tensor twice: two inputs of the branches (before: duplicate argument 'x')
        x = torch.cond(x.sum() > i, lambda a, b: a * b + i, lambda a, b: a - b, (x, x))
    return x


def test_cond_in_a_loop_with_a_repeated_operand():
    cdy = CountingBackend()
    compiled = cdynamo.compile(cond_in_a_loop, backend=cdy)
    for x in (X, -X, X * 3):
        assert_same(compiled(x), cond_in_a_loop(x))
    assert cdy.frame_count == 1 and hop_names(cdy) == ["cond"] * 3


class CondNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.scale = torch.nn.Parameter(torch.tensor([2.0, 0.5, 1.0]))

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda y: self.lin(y).relu(), lambda y: y * self.scale,
                          (x,))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_cond_module_parameters_gradients(backend):
    for x in ((X, -X) if backend == "aot_eager" else (X,)):
        torch.manual_seed(0)
        net = CondNet()
        check_grads(lambda: _net_and_params(net), (x.clone().requires_grad_(),),
                    backend=backend)


def test_cond_module_graph_vs_dynamo():
    torch.manual_seed(0)
    net = CondNet()
    check(net, X, hop="cond", exact=False)


@pytest.mark.parametrize("branch, why", [
    (lambda a: a.add_(1), "input mutation"),
    (lambda a: W.add_(a), "input mutation"),
    (lambda a: a[0:2], "aliasing"),
    (lambda a: W, "aliasing"),
])
def test_cond_branch_mutating_or_aliasing_an_input_is_refused(branch, why):
    # eager's torch.cond (torch._dynamo) raises for these; cdynamo does not trace them (with
    # fullgraph=True: the error names the reason)
    def f(x):
        return torch.cond(x.sum() > 0, branch, lambda a: a[0:2].cos(), (x,))

    with pytest.raises(RuntimeError, match=why):
        cdynamo.compile(f, backend="eager", fullgraph=True)(X.clone())
    with pytest.raises(Exception, match="(mutation|aliasing)"):
        torch.compile(f, backend="eager", fullgraph=True)(X.clone())


def cond_fake_error_caught(x):
    y = x.sin()
    try:
        z = torch.cond(x.sum() > 0, lambda t: t.cos(), lambda t: t.to(torch.float64), (x,))
    except Exception:
        z = 1
    return y + z


def test_cond_failing_after_its_bodies_leaves_no_subgraph_behind():
    # both bodies trace, the op's fake run fails (branch dtypes differ): the graph break
    # leaves no get_attr node nor GraphModule of the bodies in the graph before it
    x = torch.tensor([0.5, -1.0, 2.0])
    cdynamo.reset()
    cdy = CountingBackend()
    assert_same(cdynamo.compile(cond_fake_error_caught, backend=cdy)(x),
                cond_fake_error_caught(x))
    top = cdy.graphs[0]
    assert [n.op for n in top.graph.nodes if n.op == "get_attr"] == []
    assert list(dict(top.named_children())) == []


COND_BREAK = """
import torch, cdynamo
def f(x):
    def t(y):
        print("inside")
        return y.sin()
    return torch.cond(x.sum() > 0, t, lambda y: y.cos(), (x,))
x = torch.tensor([0.5, -1.0, 2.0])
try:
    f(x)
except Exception as e:
    eager = type(e).__name__
try:
    cdynamo.compile(f, backend="eager")(x)
    got = "no exception"
except Exception as e:
    got = type(e).__name__
print("RESULT", eager, got)
"""


def test_cond_branch_that_cannot_be_traced_runs_eager_torch_cond():
    # a branch with a print cannot be traced (torch._dynamo refuses it too): the call runs
    # eager torch.cond, which raises UncapturedHigherOrderOpError, as in eager
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", COND_BREAK], capture_output=True, text=True,
                       timeout=30)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")]
    assert line and line[0].split()[1] == line[0].split()[2], r.stdout[-2000:] + r.stderr[-2000:]


# ---- torch.utils.checkpoint ------------------------------------------------------------------

def ckpt_fn(x, y):
    return checkpoint(lambda a, b: (a.sin() * b).cos() * W, x, y, use_reentrant=False) + 1


def ckpt_reentrant(x, y):
    return checkpoint(lambda a, b: (a.sin() * b).cos() * W, x, y, use_reentrant=True) + 1


@pytest.mark.parametrize("fn", [ckpt_fn, ckpt_reentrant])
def test_checkpoint_one_node(fn):
    cdy = check(fn, X, W * 2, hop="tag_activation_checkpoint")
    node = next(n for n in cdy.graphs[0].graph.nodes if n.op == "call_function" and
                isinstance(n.target, HOP))
    assert node.kwargs == {"use_reentrant": fn is ckpt_reentrant}
    assert isinstance(cdy.graphs[0].wrap_body_0, torch.fx.GraphModule)
    # the FX code of the graph compiles (before: a function constant in the graph)
    cdy.graphs[0].recompile()


@pytest.mark.parametrize("fn", [ckpt_fn, ckpt_reentrant])
def test_checkpoint_gradients(fn):
    check_grads(lambda: (fn, ()), (X.clone().requires_grad_(), (W * 2).requires_grad_()))


def ckpt_side_effect(x, log):
    def body(a):
        log.append(a.shape[0])
        return a.sin()

    return checkpoint(body, x, use_reentrant=False) * 2


def test_checkpoint_side_effect_in_the_body_is_not_traced(caplog):
    # a store into a list from outside the body: not traced into the op (torch._dynamo
    # refuses it too); the function runs in Python and appends once, as eager
    log, cdy = [], CountingBackend()
    with caplog.at_level(logging.INFO, logger="cdynamo"):
        got = cdynamo.compile(ckpt_side_effect, backend=cdy)(X, log)
    assert_same(got, ckpt_side_effect(X, []))
    assert log == [3]
    assert hop_names(cdy) == []
    assert any("side effect" in r.getMessage() for r in caplog.records)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(3, 4)
        self.b = torch.nn.Linear(4, 3)

    def forward(self, x, scale):
        return self.b(self.a(x).relu() * scale)


class CkptNet(torch.nn.Module):
    def __init__(self, reentrant):
        super().__init__()
        self.block = Block()
        self.reentrant = reentrant

    def forward(self, x):
        return checkpoint(self.block, x, 0.5, use_reentrant=self.reentrant).tanh()


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_module_parameter_gradients(reentrant):
    torch.manual_seed(0)
    net = CkptNet(reentrant)
    x = torch.randn(2, 3, requires_grad=True)
    check_grads(lambda: _net_and_params(net), (x,))
    check(net, x.detach(), exact=False, hop="tag_activation_checkpoint")


def test_checkpoint_reentrant_without_grad_inputs_keeps_eager_semantics():
    # eager's reentrant checkpoint runs the function under no_grad when no input requires
    # grad: the result does not require grad although the parameters do (torch._dynamo's
    # result does)
    torch.manual_seed(0)
    net = CkptNet(True)
    x = torch.randn(2, 3)
    cdy = CountingBackend()
    out = cdynamo.compile(net, backend=cdy)(x)
    assert_same(out, net(x), exact=False)
    assert not net(x).requires_grad and not out.requires_grad
    assert hop_names(cdy) == ["tag_activation_checkpoint"]


# ---- custom autograd.Function ----------------------------------------------------------------

class RoundSTE(torch.autograd.Function):
    """Straight-through estimator: the backward is not the forward's derivative (zero)."""

    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, g):
        return g


def ste(x):
    return (RoundSTE.apply(x * 3) * W).sum(0, keepdim=True)


def test_autograd_function_node_and_user_backward():
    cdy = check(ste, X.clone().requires_grad_(), hop="autograd_function_apply")
    assert isinstance(cdy.graphs[0].fwd_body_0, torch.fx.GraphModule)
    assert isinstance(cdy.graphs[0].bwd_body_0, torch.fx.GraphModule)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_autograd_function_straight_through_gradient(backend):
    x = X.clone().requires_grad_()
    check_grads(lambda: (ste, ()), (x,), backend=backend)
    # the gradient is the STE's (3 * W), not round's derivative (0)
    out = cdynamo.compile(ste, backend=backend)(x)
    out.sum().backward()
    assert torch.allclose(x.grad, 3 * W)


class MulSaved(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, k):
        ctx.save_for_backward(x, y)
        ctx.k = k
        ctx.extra = x * 3
        return x * y * k, x + y

    @staticmethod
    def backward(ctx, ga, gb):
        x, y = ctx.saved_tensors
        gx = ga * y * ctx.k + gb + ctx.extra * W
        gy = ga * x * ctx.k + gb if ctx.needs_input_grad[1] else None
        return gx, gy, None


def mul_saved(x, y):
    a, b = MulSaved.apply(x, y, 2.0)
    return a * b


def test_autograd_function_saved_tensors_ctx_attributes():
    check(mul_saved, X.clone().requires_grad_(), W * 2, hop="autograd_function_apply")
    check_grads(lambda: (mul_saved, ()), (X.clone().requires_grad_(), (W * 2).requires_grad_()))
    check_grads(lambda: (mul_saved, ()), (X.clone().requires_grad_(), W * 2))


class ArgmaxSin(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x.sin(), x.argmax()

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, g, g_idx):
        (x,) = ctx.saved_tensors
        return g * x.cos() * 2


def argmax_sin(x):
    s, i = ArgmaxSin.apply(x)
    return s * i


def test_autograd_function_setup_context_and_non_differentiable():
    cdy = check(argmax_sin, X.clone().requires_grad_(), hop="autograd_function_apply")
    node = next(n for n in cdy.graphs[0].graph.nodes if n.op == "call_function" and
                isinstance(n.target, HOP))
    assert node.kwargs["non_differentiable_idx"] == [1]
    check_grads(lambda: (argmax_sin, ()), (X.clone().requires_grad_(),))


class ExpOnce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp(), x.shape[0]

    @staticmethod
    @once_differentiable
    def backward(ctx, g, g_n):
        (x,) = ctx.saved_tensors
        return g * x.exp() * 2      # not exp's derivative: the user's backward is used


def exp_once(x):
    y, n = ExpOnce.apply(x)
    return y * n


def test_autograd_function_once_differentiable_and_constant_output():
    cdy = check(exp_once, X.clone().requires_grad_(), hop="autograd_function_apply")
    check_grads(lambda: (exp_once, ()), (X.clone().requires_grad_(),))


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        return MulSaved.apply(self.lin(x), self.lin.weight[0], 0.5)[0].relu()


class UsesParam(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * P

    @staticmethod
    def backward(ctx, g):
        return g


P = torch.nn.Parameter(torch.tensor([1.0, 2.0, 3.0]))


def uses_param(x):
    return UsesParam.apply(x) + 1


def test_autograd_function_without_grad_inputs_is_inlined_under_no_grad():
    # no input requires grad: eager runs forward under no_grad (the result does not require
    # grad although P does); torch._dynamo inlines the forward as well (no op node)
    cdy = check(uses_param, X)
    assert not cdynamo.compile(uses_param, backend="eager")(X).requires_grad
    with torch.no_grad():
        check(mul_saved, X.clone().requires_grad_(), W)


def test_autograd_function_in_a_module_parameter_gradients():
    torch.manual_seed(0)
    net = Scaled()
    check_grads(lambda: _net_and_params(net), (torch.randn(2, 3, requires_grad=True),))


class Dirty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x.mul_(2)

    @staticmethod
    def backward(ctx, g):
        return g * 2


def dirty(x):
    y = x.clone()
    return Dirty.apply(y) + 1


def test_autograd_function_unsupported_ctx_method_is_a_graph_break():
    cdy = CountingBackend()
    assert_same(cdynamo.compile(dirty, backend=cdy)(X), dirty(X))
    assert hop_names(cdy) == []
    x = X.clone().requires_grad_()
    check_grads(lambda: (dirty, ()), (x,))


# ---- torch.vmap: inlined between functorch's primitives, as torch._dynamo ----------------------

def vmap_closure(x):
    return torch.vmap(lambda a: a.sin() * W)(x) * 2


def vmap_dims(x, y):
    return torch.vmap(lambda a, b: (a * b, a.sum()), in_dims=(1, None), out_dims=(0, 0))(x, y)


def vmap_nested(x):
    return torch.vmap(torch.vmap(lambda a: a.sin() + W))(x)


def vmap_unbatched_result(x):
    return torch.func.vmap(lambda a: W)(x)


@pytest.mark.parametrize("fn, args", [
    (vmap_closure, (torch.randn(4, 3),)),
    (vmap_dims, (torch.randn(3, 4), torch.randn(3))),
    (vmap_nested, (torch.randn(2, 4, 3),)),
    (vmap_unbatched_result, (torch.randn(4, 3),)),
])
def test_vmap_same_graph_as_dynamo(fn, args):
    dyn = CountingBackend()
    torch._dynamo.reset()
    torch.compile(fn, backend=dyn)(*clone(args))
    torch._dynamo.reset()
    cdy = check(fn, *args)
    assert cdy.op_count == dyn.op_count
    targets = [n.target.__name__ for n in cdy.graphs[0].graph.nodes if n.op == "call_function"
               and getattr(n.target, "__module__", "") == "torch._functorch.predispatch"]
    assert targets[:2] == ["lazy_load_decompositions", "_vmap_increment_nesting"]
    assert targets[-1] == "_vmap_decrement_nesting"
    assert torch._C._functorch.peek_interpreter_stack() is None


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_vmap_gradients(backend):
    x = torch.randn(4, 3, requires_grad=True)
    check_grads(lambda: (vmap_closure, ()), (x,), backend=backend)


def vmap_inplace_identity(x):
    # eager's vmap hands back the argument itself when the function returns its batched form
    # (an in-place method's self, or the argument) at the same dim
    a = x.clone()
    y = torch.vmap(torch.Tensor.acos_)(a)
    same = torch.vmap(lambda t: t, in_dims=1, out_dims=-1)(x)
    moved = torch.vmap(lambda t: t, in_dims=1, out_dims=0)(x)
    view = torch.vmap(lambda t: t.view(-1))(x)
    return y is a, same is x, moved is x, view is x, y


@pytest.mark.parametrize("dynamic", [False, True])
def test_vmap_result_that_is_its_argument_keeps_identity(dynamic):
    x = torch.rand(4, 2)
    expected = vmap_inplace_identity(x.clone())
    assert expected[:4] == (True, True, False, False)
    got = cdynamo.compile(vmap_inplace_identity, backend="eager", fullgraph=True,
                          dynamic=dynamic)(x.clone())
    assert got[:4] == expected[:4]
    assert torch.equal(got[4], expected[4])


def vmap_random(x):
    return torch.vmap(lambda a: a + torch.rand(3))(x * 2)


def test_vmap_error_is_eagers():
    # randomness="error": eager vmap raises; the trace fails without leaving the vmap level
    # pushed, and the call raises as in eager
    with pytest.raises(RuntimeError, match="randomness"):
        vmap_random(torch.randn(4, 3))
    with pytest.raises(RuntimeError, match="randomness"):
        cdynamo.compile(vmap_random, backend="eager")(torch.randn(4, 3))
    assert torch._C._functorch.peek_interpreter_stack() is None


# ---- torch.func.grad / grad_and_value: inlined between functorch's primitives ---------------

def func_grad(x):
    return torch.func.grad(lambda a: (a.sin() * W).sum())(x) + 1


def func_grad_argnums(x, y):
    return torch.func.grad(lambda a, b: (a * b).sum() + b.sum(), argnums=(0, 1))(x, y)


def func_grad_and_value_aux(x):
    return torch.func.grad_and_value(lambda a: ((a ** 2).sum(), a.cos()), has_aux=True)(x)


def func_grad_under_no_grad(x):
    with torch.no_grad():
        return torch.func.grad(lambda a: a.exp().sum())(x)


def func_vmap_of_grad(x):
    return torch.vmap(torch.func.grad(lambda a: (a.sin() * W).sum()))(x)


@pytest.mark.parametrize("fn, args", [
    (func_grad, (X,)),
    (func_grad_argnums, (X, W)),
    (func_grad_and_value_aux, (X,)),
    (func_grad_under_no_grad, (X,)),
    (func_vmap_of_grad, (torch.randn(4, 3),)),
])
def test_func_grad_same_graph_as_dynamo(fn, args):
    dyn = CountingBackend()
    torch._dynamo.reset()
    torch.compile(fn, backend=dyn)(*clone(args))
    torch._dynamo.reset()
    cdy = check(fn, *args, exact=False)
    assert cdy.op_count == dyn.op_count
    names = [getattr(n.target, "__name__", "") for n in cdy.graphs[0].graph.nodes]
    assert "_grad_increment_nesting" in names and "_autograd_grad" in names
    assert torch._C._functorch.peek_interpreter_stack() is None
    assert torch._C._autograd._saved_tensors_hooks_is_enabled()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_func_grad_differentiated_again(backend):
    # a training step through torch.func.grad (create_graph): outer gradients equal eager's
    check_grads(lambda: (func_grad, ()), (X.clone().requires_grad_(),), backend=backend)


def func_grad_not_scalar(x):
    return torch.func.grad(lambda a: a.exp())(x)


def test_func_grad_error_is_eagers():
    with pytest.raises(RuntimeError, match="scalar"):
        func_grad_not_scalar(X)
    with pytest.raises(RuntimeError, match="scalar"):
        cdynamo.compile(func_grad_not_scalar, backend="eager")(X)
    assert torch._C._functorch.peek_interpreter_stack() is None
    assert torch._C._autograd._saved_tensors_hooks_is_enabled()


# ---- other torch.func transforms: a clean graph break ---------------------------------------

def func_jacrev(x):
    return torch.func.jacrev(lambda a: a.sin() * W)(x)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_func_jacrev_breaks_cleanly(backend, caplog):
    with caplog.at_level(logging.INFO, logger="cdynamo"):
        got = cdynamo.compile(func_jacrev, backend=backend)(X.clone())
    assert_same(got, func_jacrev(X.clone()), exact=False)
    # the function the transform calls (in eager) sees wrapped tensors: never translated
    assert any("torch.func transform" in r.getMessage() for r in caplog.records)


def test_func_transform_called_on_a_compiled_function():
    # the entry compiled outside vmap must not run on vmap's BatchedTensors (inductor's
    # kernels read their storage: "Cannot access data pointer")
    cdynamo.reset_counters()
    compiled = cdynamo.compile(lambda a: a.sin() * W, backend="inductor")
    x = torch.randn(4, 3)
    assert_same(compiled(x[0]), x[0].sin() * W, exact=False)      # compiled outside vmap
    assert_same(torch.vmap(compiled)(x), x.sin() * W, exact=False)
    assert_same(compiled(x[1]), x[1].sin() * W, exact=False)      # the entry still serves
    assert cdynamo.counters()["compiles"] == 1
