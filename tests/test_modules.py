"""nn.Module programs compiled end to end (eager backend): ModuleList/ModuleDict/Embedding/
BatchNorm/GroupNorm/MultiheadAttention, train and eval mode, a subclass whose forward graph-
breaks and then calls super().forward(), and training with aot_eager through graph breaks."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import cdynamo
from conftest import requires_engine
from helpers import CountingBackend
import torch._dynamo

class Res(nn.Module):
    def __init__(s):
        super().__init__(); s.l = nn.Linear(8, 8); s.bn = nn.BatchNorm1d(8); s.scale = nn.Parameter(torch.ones(8))
        s.register_buffer("shift", torch.zeros(8))
    def forward(s, x):
        h = s.bn(s.l(x)) * s.scale + s.shift
        if s.training:
            h = F.dropout(h, 0.1, True)
        return x + F.relu(h)
class Net(nn.Module):
    def __init__(s):
        super().__init__()
        s.blocks = nn.ModuleList([Res() for _ in range(2)])
        s.head = nn.Sequential(nn.Linear(8, 4), nn.Tanh())
        s.d = nn.ModuleDict({"a": nn.Linear(8, 8), "b": nn.Identity()})
        s.emb = nn.Embedding(10, 8)
    def forward(s, x, idx=None):
        for i, b in enumerate(s.blocks):
            x = b(x)
        x = s.d["a"](x) + s.d["b"](x)
        if idx is not None:
            x = x + s.emb(idx).mean(0)
        return s.head(x)
class BreakNet(Net):
    def forward(s, x, idx=None):
        x = s.blocks[0](x)
        if x.mean() > 0:
            x = x * 2
        print("", end="")
        return super().forward(x, idx)
class Conv(nn.Module):
    def __init__(s):
        super().__init__()
        s.c = nn.Conv2d(3, 4, 3, padding=1); s.p = nn.MaxPool2d(2); s.bn = nn.BatchNorm2d(4)
        s.gn = nn.GroupNorm(2, 4); s.up = nn.Upsample(scale_factor=2)
    def forward(s, x):
        return s.up(s.gn(s.p(F.relu(s.bn(s.c(x)))))).flatten(1)
class Attn(nn.Module):
    def __init__(s):
        super().__init__(); s.mha = nn.MultiheadAttention(8, 2, batch_first=True); s.ln = nn.LayerNorm(8)
    def forward(s, x):
        y, _ = s.mha(x, x, x, need_weights=False)
        return s.ln(x + y)


def _run(m, *args, train=False):
    m.train(train)
    torch.manual_seed(1)
    expected = m(*args)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    cdynamo.reset()
    compiled = cdynamo.compile(m, backend=backend)
    for _ in range(2):
        torch.manual_seed(1)
        torch.testing.assert_close(compiled(*args), expected, rtol=0, atol=1e-6)
    cdynamo.reset()
    return graphs


X = torch.randn(5, 8, generator=torch.Generator().manual_seed(0))
IDX = torch.tensor([1, 2, 3])


@requires_engine
@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
def test_module_containers_one_graph(train):
    torch.manual_seed(0)
    assert len(_run(Net(), X, IDX, train=train)) == 1


@requires_engine
def test_break_then_zero_argument_super_forward():
    torch.manual_seed(0)
    # prefix graph (block, condition), the branch's graph, then super().forward() inlined
    assert len(_run(BreakNet(), X, IDX)) == 3


@requires_engine
@pytest.mark.parametrize("cls,shape", [(Conv, (2, 3, 8, 8)), (Attn, (2, 5, 8))],
                         ids=["conv", "attention"])
def test_torch_modules(cls, shape):
    torch.manual_seed(0)
    assert len(_run(cls(), torch.randn(*shape))) == 1


@requires_engine
def test_aot_eager_training_through_graph_breaks():
    torch.manual_seed(0)
    m = BreakNet().eval()
    x = torch.randn(5, 8, requires_grad=True)
    ref = m(x, IDX).sum()
    ref.backward()
    grads = [x.grad.clone()] + [p.grad.clone() for p in m.parameters() if p.grad is not None]
    x.grad = None
    m.zero_grad()
    cdynamo.reset()
    out = cdynamo.compile(m, backend="aot_eager")(x, IDX).sum()
    out.backward()
    got = [x.grad.clone()] + [p.grad.clone() for p in m.parameters() if p.grad is not None]
    torch.testing.assert_close(out, ref)
    assert len(got) == len(grads)
    for a, b in zip(got, grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    cdynamo.reset()


def _torch_module_cases():
    torch.manual_seed(0)
    return {
        "transformer_encoder": (nn.TransformerEncoder(nn.TransformerEncoderLayer(
            16, 2, 32, batch_first=True), 2), (torch.randn(2, 5, 16),)),
        "lstm": (nn.LSTM(8, 16, batch_first=True), (torch.randn(2, 5, 8),)),
        "conv1d_stack": (nn.Sequential(nn.Conv1d(4, 8, 3), nn.BatchNorm1d(8), nn.SiLU(),
                                       nn.AdaptiveAvgPool1d(1), nn.Flatten()),
                         (torch.randn(2, 4, 10),)),
        "conv_transpose": (nn.Sequential(nn.ConvTranspose2d(4, 2, 3, stride=2),
                                         nn.InstanceNorm2d(2), nn.LeakyReLU(0.1)),
                           (torch.randn(1, 4, 5, 5),)),
        "embedding_bag": (nn.EmbeddingBag(10, 4, mode="mean"), (torch.tensor([[1, 2], [3, 4]]),)),
        "bilinear": (nn.Bilinear(3, 4, 5), (torch.randn(2, 3), torch.randn(2, 4))),
        "multihead_attention": (nn.MultiheadAttention(8, 2),
                                (torch.randn(4, 2, 8), torch.randn(4, 2, 8), torch.randn(4, 2, 8))),
    }


@requires_engine
@pytest.mark.parametrize("name", list(_torch_module_cases()))
def test_torch_nn_modules_equal_eager(name):
    """torch.nn modules compiled directly: their forward (torch code) is traced (it may
    graph-break or fall back); the results must equal eager's."""
    m, args = _torch_module_cases()[name]
    m.eval()
    expected = m(*args)
    cdynamo.reset()
    compiled = cdynamo.compile(m, backend="eager")
    for _ in range(2):
        got = compiled(*args)
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    cdynamo.reset()


# ---- nn.Module generator methods (issue 7) -------------------------------------------------

class _GenBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(3, 3)
        self.b = torch.nn.ReLU()
        self.register_buffer("scale", torch.ones(3))

    def forward(self, x):
        for c in self.children():
            x = c(x)
        return x * self.scale


class _GenModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.Sequential(_GenBlock(), _GenBlock())
        self.shared = self.blocks[0].a          # the same Linear reached twice

    def forward(self, x):
        total = 0
        for name, p in self.named_parameters():
            total = total + p.sum()
        for m in self.modules():
            if isinstance(m, torch.nn.Linear):
                x = m(x)
        names = [n for n, _ in self.named_modules()]
        kids = [n for n, _ in self.named_children()]
        n_buf = len(list(self.buffers())) + len(list(self.named_buffers()))
        n_par = len(list(self.parameters()))
        return self.blocks(x) + total + n_buf + n_par, names, kids


def test_module_generator_methods_unrolled_like_dynamo():
    torch.manual_seed(0)
    m = _GenModel()
    x = torch.randn(2, 3)
    expected = m(x)
    counter = CountingBackend()
    out = cdynamo.compile(m, backend=counter)(x)
    assert torch.allclose(out[0], expected[0]) and out[1:] == expected[1:]
    torch._dynamo.reset()
    dyn = CountingBackend()
    torch.compile(m, backend=dyn)(x)
    assert (counter.frame_count, counter.op_count) == (dyn.frame_count, dyn.op_count)
    assert counter.frame_count == 1


def test_module_registry_change_recompiles():
    torch.manual_seed(0)
    m = _GenModel()
    x = torch.randn(2, 3)
    compiled = cdynamo.compile(m, backend="eager")
    compiled(x)
    m.blocks[1].register_parameter("extra", torch.nn.Parameter(torch.ones(3)))
    assert torch.allclose(compiled(x)[0], m(x)[0])


class _Rotaryish(nn.Module):
    """An HF-style rotary cache: grown with register_buffer inside forward."""

    def __init__(self):
        super().__init__()
        self.set_cache(6)

    def set_cache(self, n):
        self.max_len = n
        self.register_buffer("cached", torch.arange(n, dtype=torch.float32), persistent=False)

    def forward(self, x):
        n = x.shape[0]
        if n > self.max_len:
            self.set_cache(n)
        return x + self.cached[:n]


class _Registers(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.zeros(3))
        self.register_buffer("c", torch.ones(3))
        self.hist = torch.zeros(0)

    @property
    def hist_len(self):
        return self.hist.shape[0]

    def forward(self, x):
        self.register_buffer("b", None)
        self.c = x * 3
        y = x + (self.c if self.b is None else 0)
        self.register_buffer("d", y * 2, persistent=False)
        del self.c
        self.hist = torch.cat([self.hist, x])
        return y + self.d + self.hist_len, hasattr(self, "c"), self.b is None


class _AddModuleAfterBreak(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Identity()
        self.register_buffer("b", torch.ones(3))

    def forward(self, x):
        y = x * 2
        print("", end="")                                   # a graph break
        self.add_module("lin", nn.Linear(3, 3, bias=False))  # constructing it breaks too
        return y + self.lin.weight.shape[0]


class _RegisterThroughStackedMethod(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Identity()
        self.register_buffer("b", torch.ones(3))

    def forward(self, x):
        # the break inside the arguments hands the bound method to the resume function,
        # which reads self.b, then re-registers b through the method's __self__
        self.register_buffer("b", x * 3 + self.b if print("", end="") is None else None)
        return x + self.b


def test_registry_change_through_another_name_of_the_module():
    """After a graph break the module is reached both as self and as the __self__ of a
    bound method on the resume function's stack: add_module / register_buffer through one
    name are seen by reads through the other (they read the old submodule: AttributeError
    'Identity' object has no attribute 'weight', or the old buffer: a wrong result)."""
    for make in (_AddModuleAfterBreak, _RegisterThroughStackedMethod):
        eager_m, m = make(), make()
        c = cdynamo.compile(m, backend="eager")
        for _ in range(3):
            want = eager_m(torch.ones(3))
            assert torch.equal(c(torch.ones(3)), want), want
        assert torch.equal(m.b, eager_m.b) and type(m.lin) is type(eager_m.lin)
        cdynamo.reset()


def test_registry_changes_and_properties_inside_forward_are_read_back():
    """register_buffer / del inside forward, then reads of the module (a buffer re-registered,
    set to None, a new one, an attribute deleted) and a @property reading an attribute the
    same forward assigned: eager's values and module state (the reads saw the module from
    before the call: wrong results, and the growing rotary cache raised a size mismatch)."""
    for make, calls in ((_Registers, [(torch.ones(3),)]),
                        (_Rotaryish, [(torch.zeros(n),) for n in (4, 5, 7, 9)])):
        eager_m, comp_m = make(), make()
        c = cdynamo.compile(comp_m, backend="eager")
        for args in calls:
            want, got = eager_m(*args), c(*args)
            if isinstance(want, tuple):
                assert torch.equal(got[0], want[0]) and got[1:] == want[1:], (got, want)
            else:
                assert torch.equal(got, want), (got, want)
        assert sorted(comp_m._buffers) == sorted(eager_m._buffers)
        for k, v in eager_m._buffers.items():
            assert (v is None and comp_m._buffers[k] is None) or torch.equal(v, comp_m._buffers[k])
        cdynamo.reset()


def _bn_steps(compile_fn, set_training):
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(3, momentum=None)
    if set_training:
        bn.eval()

    def step(x):
        if set_training:
            bn.training = True
        return bn(x) * 2

    f = compile_fn(step) if compile_fn else step
    out = []
    for n in (4, 5, 6):
        torch.manual_seed(n)
        y = f(torch.randn(n, 3))
        out.append((y, bn.num_batches_tracked.clone(), bn.running_mean.clone()))
    return out


@pytest.mark.parametrize("set_training", [False, True], ids=["train", "training_set_in_trace"])
def test_module_recorded_as_call_module_does_not_run_on_real_buffers(set_training):
    # BatchNorm(momentum=None) reads float(num_batches_tracked): its forward is not inlinable.
    # Its fake run used the real module, so the trace itself counted a batch and updated the
    # running statistics (num_batches_tracked 2 after one call); and a call_module node ran
    # before a pending `bn.training = True` was replayed (eval mode on the first call). Both
    # now match eager: the fake run uses a fake copy of the module (as torch._dynamo) and a
    # call_module with side effects pending is a graph break.
    expected = _bn_steps(None, set_training)
    cdynamo.reset()
    got = _bn_steps(lambda f: cdynamo.compile(f, backend="eager"), set_training)
    for i, (e, g) in enumerate(zip(expected, got)):
        for a, b in zip(e, g):
            torch.testing.assert_close(b, a, msg=f"call {i}")
