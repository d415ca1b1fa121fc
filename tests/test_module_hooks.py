"""nn.Modules with hooks called inside compiled code (issue 7).

A module with forward hooks or forward pre-hooks (its own or global ones) is called as
torch._dynamo 2.13 calls it: nn.Module._call_impl is inlined, so the hooks are inlined user
functions (their side effects replayed as any other) and their results replace the arguments
and the output exactly as in eager. Each program is compared with eager (results, what the
hooks collected, gradients with aot_eager) and with torch._dynamo (graph count, graph breaks).
Backward hooks keep the call a graph break (it runs in Python): never a wrong gradient.
"""
import copy

import pytest
import torch
import torch._dynamo
import torch.nn as nn

import cdynamo
from helpers import CountingBackend, assert_same

D = 8


class Stack(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(D, D) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class KwNet(nn.Module):
    """A layer taking a keyword argument, called with it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, D)

    def forward(self, x, scale=1.0):
        return self.fc(x) * scale


class KwOuter(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = KwNet()

    def forward(self, x):
        return self.inner(x, scale=2.0) + 1


def x_input():
    return torch.randn(2, D, generator=torch.Generator().manual_seed(1))


def run_three(make, x, calls=2):
    """make() -> (module, log): a fresh seeded model whose hooks append to `log`. Runs it
    eagerly, under torch._dynamo and `calls` times under cdynamo (the second call must hit the
    cache), each on its own model; checks results and logs against eager. Returns (cdynamo's
    backend, torch._dynamo's backend, cdynamo's explain())."""
    torch.manual_seed(0)
    model, log = make()
    expected = model(x.clone())
    expected_log = list(log)

    torch.manual_seed(0)
    d_model, d_log = make()
    dyn = CountingBackend()
    assert_same(torch.compile(d_model, backend=dyn)(x.clone()), expected, "torch._dynamo")
    torch._dynamo.reset()

    torch.manual_seed(0)
    c_model, c_log = make()
    cdy = CountingBackend()
    compiled = cdynamo.compile(c_model, backend=cdy)
    for i in range(calls):
        del c_log[:]
        out = compiled(x.clone())
        assert_same(out, expected, f"cdynamo call {i}")
        assert_same(c_log, expected_log, f"hook log of call {i}")
        if i == 0:
            compiles = cdynamo.counters()["compiles"]
    assert cdynamo.counters()["compiles"] == compiles, "2nd call was not a cache hit"
    assert cdynamo.counters()["unmodified"] == 0

    torch.manual_seed(0)
    e_model, _ = make()
    explained = cdynamo.explain(e_model)(x.clone())
    return cdy, dyn, explained


def same_graphs_as_dynamo(cdy, dyn, explained):
    assert cdy.frame_count == dyn.frame_count, (cdy.frame_count, dyn.frame_count)
    assert explained.graph_break_count == 0, explained.break_reasons


# ---- forward hooks and pre-hooks --------------------------------------------------------

def test_forward_hook_replaces_the_output():
    def make():
        m = Stack()
        m.layers[1].register_forward_hook(lambda mod, args, out: out * 2 - 1)
        return m, []
    same_graphs_as_dynamo(*run_three(make, x_input()))


def test_forward_hook_returning_none_keeps_the_output():
    def make():
        m, log = Stack(), []
        m.layers[0].register_forward_hook(lambda mod, args, out: log.append(out.sum()))
        return m, log
    cdy, dyn, ex = run_three(make, x_input())
    same_graphs_as_dynamo(cdy, dyn, ex)
    assert cdy.frame_count == 1


def test_pre_hook_replaces_the_arguments():
    def make():
        m = Stack()
        m.layers[0].register_forward_pre_hook(lambda mod, args: (args[0] + 1,))
        m.layers[1].register_forward_pre_hook(lambda mod, args: args[0] * 3)   # not a tuple
        m.layers[2].register_forward_pre_hook(lambda mod, args: None)
        return m, []
    same_graphs_as_dynamo(*run_three(make, x_input()))


def test_pre_hook_and_forward_hook_on_one_module_in_eager_order():
    def make():
        m, log = Stack(), []

        def pre(mod, args):
            log.append(("pre", args[0].sum()))
            return (args[0] * 0.5,)

        def post(mod, args, out):
            log.append(("post", args[0].sum(), out.sum()))
            return out + args[0]
        m.layers[1].register_forward_pre_hook(pre)
        m.layers[1].register_forward_hook(post)
        m.layers[1].register_forward_hook(lambda mod, args, out: out * 2, prepend=True)
        return m, log
    same_graphs_as_dynamo(*run_three(make, x_input()))


def test_kwargs_pre_hook_and_kwargs_forward_hook():
    """with_kwargs=True: the pre-hook sees and replaces (args, kwargs); the forward hook gets
    the kwargs too."""
    def make():
        m, log = KwOuter(), []

        def pre(mod, args, kwargs):
            kwargs = dict(kwargs, scale=kwargs["scale"] + 1.0)
            return (args[0] - 1,), kwargs

        def post(mod, args, kwargs, out):
            log.append(kwargs["scale"])
            return out * kwargs["scale"]
        m.inner.register_forward_pre_hook(pre, with_kwargs=True)
        m.inner.register_forward_hook(post, with_kwargs=True)
        return m, log
    same_graphs_as_dynamo(*run_three(make, x_input()))


def test_pre_hook_without_kwargs_on_a_call_with_kwargs():
    def make():
        m = KwOuter()
        m.inner.register_forward_pre_hook(lambda mod, args: (args[0].flip(0),))
        return m, []
    same_graphs_as_dynamo(*run_three(make, x_input()))


def test_always_call_hook_is_traced():
    def make():
        m, log = Stack(), []
        m.layers[2].register_forward_hook(lambda mod, args, out: log.append(1) or out + 1,
                                          always_call=True)
        return m, log
    same_graphs_as_dynamo(*run_three(make, x_input()))


class Raises(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, D)

    def forward(self, x):
        y = self.fc(x)
        if y.shape[0] == 2:
            raise ValueError("two rows")
        return y


def test_exception_in_forward_still_runs_always_call_hooks():
    """The always_call hook is traced on the normal path; eager runs it also when forward
    raises, then re-raises, and so does the compiled call (that call runs in Python)."""
    outer = nn.Sequential(nn.Linear(D, D), Raises())
    log = []
    outer[1].register_forward_hook(lambda mod, args, out: log.append(out) or out,
                                   always_call=True)

    def f(x):
        return outer(x) + 1
    x3 = torch.randn(3, D)
    expected = f(x3)
    with pytest.raises(ValueError, match="two rows"):
        f(x_input())
    assert len(log) == 2 and log[1] is None
    cdy = CountingBackend()
    compiled = cdynamo.compile(f, backend=cdy)
    assert_same(compiled(x3), expected)
    assert cdy.frame_count == 1 and len(log) == 3
    for _ in range(2):
        with pytest.raises(ValueError, match="two rows"):
            compiled(x_input())
    assert len(log) == 5 and log[3] is None and log[4] is None


# ---- global hooks -----------------------------------------------------------------------

def test_global_forward_hook_and_pre_hook():
    """register_module_forward_hook / _pre_hook: every module call runs them, the calls inside
    the compiled code included."""
    seen = []
    handles = [
        nn.modules.module.register_module_forward_pre_hook(
            lambda mod, args: seen.append(type(mod).__name__)),
        nn.modules.module.register_module_forward_hook(
            lambda mod, args, out: out * 2 if isinstance(mod, nn.Linear) else None),
    ]
    try:
        def f(m, x):
            return m(x) + 1
        torch.manual_seed(0)
        m, x = Stack(), x_input()
        expected = f(m, x)
        expected_seen = list(seen)
        dyn = CountingBackend()
        assert_same(torch.compile(f, backend=dyn)(m, x), expected)
        torch._dynamo.reset()
        cdy = CountingBackend()
        compiled = cdynamo.compile(f, backend=cdy)
        for _ in range(2):
            del seen[:]
            assert_same(compiled(m, x), expected)
            assert seen == expected_seen
        assert cdy.frame_count == dyn.frame_count == 1
        assert cdynamo.counters()["compiles"] == 1
    finally:
        for h in handles:
            h.remove()


def test_global_hook_registered_after_compile_is_seen():
    torch.manual_seed(0)
    m, x = Stack(), x_input()

    def f(x):
        return m(x) - 1
    compiled = cdynamo.compile(f, backend="eager")
    assert_same(compiled(x), f(x))
    h = nn.modules.module.register_module_forward_hook(lambda mod, args, out: out + 5)
    try:
        assert_same(compiled(x), f(x))
    finally:
        h.remove()
    assert_same(compiled(x), f(x))
    assert cdynamo.counters()["compiles"] == 2   # the first entry serves again


# ---- hooks on the layers of a loop; the transformers pattern ---------------------------

def capturing_hooks(model, log):
    """transformers' output capturing: one closure per layer appending its output."""
    for i, layer in enumerate(model.layers):
        def hook(mod, args, out, i=i):
            log.append((i, out))
        layer.register_forward_hook(hook)


def test_hooks_capturing_outputs_into_a_list():
    def make():
        m, log = Stack(4), []
        capturing_hooks(m, log)
        return m, log
    cdy, dyn, ex = run_three(make, x_input())
    same_graphs_as_dynamo(cdy, dyn, ex)
    assert cdy.frame_count == 1


class LoopWithBreak(nn.Module):
    def __init__(self, n=10):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(D, D) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
            print(end="")        # a graph break in every iteration
        return x


def test_hooked_layers_in_a_loop_with_a_break_share_one_entry():
    """The hook registries are guarded by position, not by the hook ids (new for every
    registration): the resume function traced for one hooked layer serves the others."""
    torch.manual_seed(0)
    model, log = LoopWithBreak(), []
    for layer in model.layers:
        layer.register_forward_hook(lambda mod, args, out: log.append(out.sum()) or out * 0.5)
    x = x_input()
    expected = model(x)
    expected_log = list(log)
    compiled = cdynamo.compile(model, backend="eager")
    for _ in range(2):
        del log[:]
        assert_same(compiled(x), expected)
        assert_same(log, expected_log)
    counts = cdynamo.counters()
    assert counts["cache_limit_hits"] == 0 and counts["unmodified"] == 0
    assert counts["compiles"] <= 3, counts


def test_transformers_gpt2_output_hidden_states():
    """transformers installs an output-capturing forward hook on every layer when
    output_hidden_states is requested: one graph, as torch._dynamo."""
    pytest.importorskip("transformers")
    import hf_models
    model, (ids,) = hf_models.gpt2()

    def f(ids):
        return model(ids, output_hidden_states=True)
    with torch.no_grad():
        expected = f(ids)     # installs the hooks (once per model)
        assert model.h[0]._forward_hooks, "transformers did not install its hooks"
        dyn = CountingBackend()
        d_out = torch.compile(f, backend=dyn)(ids)
        torch._dynamo.reset()
        assert len(d_out.hidden_states) == len(expected.hidden_states)
        cdy = CountingBackend()
        compiled = cdynamo.compile(f, backend=cdy)
        for _ in range(2):
            out = compiled(ids)
            assert_same(out.last_hidden_state, expected.last_hidden_state, exact=False)
            assert_same(list(out.hidden_states), list(expected.hidden_states), exact=False)
        explained = cdynamo.explain(f)(ids)
    assert cdy.frame_count == dyn.frame_count == 1
    assert explained.graph_break_count == 0, explained.break_reasons
    assert cdynamo.counters()["unmodified"] == 0


# ---- guards: hooks added or removed after a compile ----------------------------------------

def test_hook_added_after_compile_recompiles():
    """(torch._dynamo does not guard empty hook dicts, skip_nnmodule_hook_guards: it keeps
    running the entry traced without the hook.)"""
    torch.manual_seed(0)
    m, x = Stack(), x_input()
    cdy = CountingBackend()
    compiled = cdynamo.compile(m, backend=cdy)
    assert_same(compiled(x), m(x))
    h = m.layers[1].register_forward_hook(lambda mod, args, out: out * 3)
    assert_same(compiled(x), m(x))
    assert cdy.frame_count == 2 and cdynamo.counters()["compiles"] == 2
    assert all(sum(n.op == "call_function" for n in g.graph.nodes) for g in cdy.graphs)
    h.remove()
    assert_same(compiled(x), m(x))
    assert cdynamo.counters()["compiles"] == 2


def test_hook_removed_after_compile_is_not_run():
    torch.manual_seed(0)
    m, x = Stack(), x_input()
    log = []
    h = m.layers[0].register_forward_hook(lambda mod, args, out: log.append(1) or out + 1)
    cdy = CountingBackend()
    compiled = cdynamo.compile(m, backend=cdy)
    assert_same(compiled(x), m(x))
    assert log == [1, 1] and cdy.frame_count == 1
    h.remove()
    assert_same(compiled(x), m(x))
    assert log == [1, 1]
    assert cdynamo.counters()["compiles"] == 2


def test_hook_replaced_by_another_recompiles():
    torch.manual_seed(0)
    m, x = Stack(), x_input()
    h = m.layers[0].register_forward_hook(lambda mod, args, out: out + 1)
    cdy = CountingBackend()
    compiled = cdynamo.compile(m, backend=cdy)
    assert_same(compiled(x), m(x))
    h.remove()
    m.layers[0].register_forward_hook(lambda mod, args, out: out - 1)
    assert_same(compiled(x), m(x))
    m.layers[0].register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    assert_same(compiled(x), m(x))
    assert cdy.frame_count == cdynamo.counters()["compiles"] == 3   # one graph each


def test_same_hooks_on_another_instance_reuse_the_entry():
    def make():
        torch.manual_seed(0)
        m = Stack()
        m.layers[2].register_forward_hook(lambda mod, args, out: out * 2)
        return m

    def f(m, x):
        return m(x)
    a, b, x = make(), make(), x_input()
    compiled = cdynamo.compile(f, backend="eager")
    assert_same(compiled(a, x), f(a, x))
    assert_same(compiled(b, x), f(b, x))
    assert cdynamo.counters()["compiles"] == 1


def test_hooks_registered_on_the_compiled_module_run():
    """Hooks registered on the compiled module itself (not the module it compiles) run around
    the compiled forward, as on torch's OptimizedModule (fully_shard applied after compiling,
    as torchtitan does, registers FSDP2's hooks there); removed, they no longer run. They were
    ignored: the compiled module called its forward directly."""
    torch.manual_seed(0)
    m, x = Stack(), x_input()
    expected = m(x * 2) + 100
    log = []
    for name, compiled in (("torch._dynamo", torch.compile(m, backend="eager")),
                           ("cdynamo", cdynamo.compile(m, backend="eager"))):
        h1 = compiled.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
        h2 = compiled.register_forward_hook(lambda mod, args, out: log.append(mod) or out + 100)
        assert_same(compiled(x), expected, name)
        assert log == [compiled], name
        h1.remove()
        h2.remove()
        assert_same(compiled(x), m(x), name)
        assert log == [compiled], name
        del log[:]


def _kw_pre(mod, args, kwargs):
    return (args[0] + 1,), {"scale": 2.0}


def _kw_post(mod, args, kwargs, out):
    return out - 1


@pytest.mark.parametrize("always_call", [False, True])
def test_kwargs_hooks_on_many_instances_reuse_the_entry(always_call):
    """Hooks registered with_kwargs=True / always_call=True put their ids into the id sets
    _call_impl asks (`hook_id in self._forward_pre_hooks_with_kwargs`); the ids differ per
    registration, so keying the entry on them recompiled once per instance (past
    cache_size_limit with 10 instances, as the loop of an FSDP2 model's blocks). Read by
    position: one graph for the 10 instances, as torch._dynamo with with_kwargs hooks
    (with an always_call hook torch._dynamo keys its entries on the hook ids: it compiles
    until its cache limit, 8 graphs)."""
    def make():
        m = KwNet()
        m.register_forward_pre_hook(_kw_pre, with_kwargs=True)
        m.register_forward_hook(_kw_post, with_kwargs=True, always_call=always_call)
        return m

    def f(m, x):
        return m(x) * 2
    torch.manual_seed(0)
    mods, x = [make() for _ in range(10)], x_input()
    dyn = CountingBackend()
    d = torch.compile(f, backend=dyn)
    for m in mods:
        assert_same(d(m, x), f(m, x))
    torch._dynamo.reset()
    cdy = CountingBackend()
    compiled = cdynamo.compile(f, backend=cdy)
    for m in mods:
        assert_same(compiled(m, x), f(m, x))
    assert cdy.frame_count == 1
    assert dyn.frame_count == (8 if always_call else 1), dyn.frame_count
    counts = cdynamo.counters()
    assert counts["compiles"] == 1 and counts["cache_limit_hits"] == 0, counts


def test_kwargs_hooks_at_other_positions_recompile():
    """The same hooks, with_kwargs on the first on one instance and on the second on the
    other: which hook of the dict is with_kwargs is guarded (SAME_OBJECT between the id set's
    key and the hook dict's key at that position), so the second instance recompiles and
    both give eager's results."""
    def pre(mod, args, kwargs=None):
        return (args[0] + 3,) if kwargs is None else ((args[0] + 1,), {"scale": 2.0})

    def post(mod, args, *rest):
        return rest[-1] - len(rest)     # 1 without kwargs, 2 with

    a, b = KwNet(), KwNet()
    a.register_forward_pre_hook(pre, with_kwargs=True)
    a.register_forward_pre_hook(pre)
    b.register_forward_pre_hook(pre)
    b.register_forward_pre_hook(pre, with_kwargs=True)
    a.register_forward_hook(post, with_kwargs=True)
    a.register_forward_hook(post)
    b.register_forward_hook(post)
    b.register_forward_hook(post, with_kwargs=True)

    def f(m, x):
        return m(x) * 2
    x = x_input()
    cdy = CountingBackend()
    compiled = cdynamo.compile(f, backend=cdy)
    for m in (a, b, a, b):
        assert_same(compiled(m, x), f(m, x))
    assert cdy.frame_count == 2 and cdynamo.counters()["compiles"] == 2


# ---- training ------------------------------------------------------------------------------

def test_training_with_hooks_gives_eager_gradients():
    torch.manual_seed(0)
    m, x = Stack(), x_input()
    m.layers[0].register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    m.layers[1].register_forward_hook(lambda mod, args, out: out * out)
    ref = copy.deepcopy(m)
    ref(x).sum().backward()
    cdy = CountingBackend(torch._dynamo.backends.registry.lookup_backend("aot_eager"))
    compiled = cdynamo.compile(m, backend=cdy)
    for _ in range(2):
        m.zero_grad()
        out = compiled(x)
        out.sum().backward()
    assert_same(out, ref(x), exact=False)
    for (name, p), (_, q) in zip(m.named_parameters(), ref.named_parameters()):
        assert_same(p.grad, q.grad, name, exact=False)
    assert cdy.frame_count == 1


def test_backward_hooks_stay_a_graph_break_with_eager_gradients():
    """A module with a full backward hook (or pre-hook) is called in Python (its BackwardHook
    needs the real autograd graph): the gradients and the hook's calls are eager's; the
    forward hook of another layer is traced."""
    def make(log):
        torch.manual_seed(0)
        m = Stack()
        m.layers[0].register_forward_hook(lambda mod, args, out: out * 2)
        m.layers[1].register_full_backward_hook(
            lambda mod, gin, gout: log.append(gout[0].sum().item()))
        m.layers[2].register_full_backward_pre_hook(
            lambda mod, gout: (gout[0] * 2,))
        return m
    x = x_input()
    e_log, c_log = [], []
    ref, m = make(e_log), make(c_log)
    ref(x).sum().backward()
    compiled = cdynamo.compile(m, backend="aot_eager")
    compiled(x).sum().backward()
    assert c_log == pytest.approx(e_log)
    for (name, p), (_, q) in zip(m.named_parameters(), ref.named_parameters()):
        assert_same(p.grad, q.grad, name, exact=False)
    reasons = [b.reason for b in cdynamo.explain(make([]))(x).break_reasons]
    assert len(reasons) == 2 and all("backward hooks" in r for r in reasons), reasons


def test_global_backward_hook_runs_for_the_calls_inside_compiled_code():
    """A global full backward hook: every module call inside the compiled code runs in Python,
    so the hook sees each layer's gradients as in eager."""
    torch.manual_seed(0)
    m, x = Stack(), x_input().requires_grad_()
    ref = copy.deepcopy(m)
    seen = []
    h = nn.modules.module.register_module_full_backward_hook(
        lambda mod, gin, gout: seen.append(type(mod).__name__))
    try:
        ref(x).sum().backward()
        expected = list(seen)
        del seen[:]
        compiled = cdynamo.compile(m, backend="aot_eager")
        compiled(x).sum().backward()
    finally:
        h.remove()
    assert seen == expected and expected.count("Linear") == 3
    for (name, p), (_, q) in zip(m.named_parameters(), ref.named_parameters()):
        assert_same(p.grad, q.grad, name, exact=False)
