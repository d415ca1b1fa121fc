"""nn.Module methods traced with parameters and buffers as graph inputs (issue 7, scope 5):
one compiled entry serves every instance of a layer class, as torch._dynamo 2.13's
inline_inbuilt_nn_modules. Each program runs eagerly, under torch._dynamo and under cdynamo;
results must equal eager's and graph counts torch._dynamo's."""
import copy

import pytest
import torch
import torch._dynamo
import torch.nn as nn
import torch.nn.functional as F

import cdynamo
from helpers import CountingBackend, assert_same


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models: one intra-op thread (a loaded 2-core machine makes OpenMP spin)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def run_both_models(model, *inputs, calls=2, exact=False, backend=None):
    """model (an nn.Module) eagerly, under torch.compile and under cdynamo.compile, each on its
    own deep copy. Returns (cdynamo counter, torch._dynamo counter, cdynamo counters())."""
    expected = [copy.deepcopy(model)(*inputs) for _ in range(calls)]
    torch._dynamo.reset()
    dyn = CountingBackend(backend)
    d_model = torch.compile(copy.deepcopy(model), backend=dyn)
    for i in range(calls):
        assert_same(d_model(*inputs), expected[i], f"torch._dynamo call {i}", exact=False)
    torch._dynamo.reset()
    cdynamo.reset()
    cdynamo.reset_counters()
    cdy = CountingBackend(backend)
    c_model = cdynamo.compile(copy.deepcopy(model), backend=cdy)
    for i in range(calls):
        assert_same(c_model(*inputs), expected[i], f"cdynamo call {i}", exact=exact)
    return cdy, dyn, cdynamo.counters()


# ---- 1. twelve blocks, each block's forward compiled as a frame of its own -----------------

class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)
        self.scale = 0.5

    def forward(self, x):
        h = self.fc2(F.gelu(self.fc1(self.ln(x))))
        return x + self.scale * h


class LoopBreakModel(nn.Module):
    """The layer loop breaks on every block (a data-dependent branch): with
    graph_break_in_loops off (torch._dynamo's behaviour) the loop's frame runs unmodified and
    each block's forward is compiled as a frame of its own."""

    def __init__(self, n=12, d=16):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d) for _ in range(n))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
            if x.abs().sum() > 1e9:
                x = x * 0
        return x


class PrintModel(nn.Module):
    """Each block compiled separately: the caller prints between blocks (a graph break at
    each call, as a logging model does)."""

    def __init__(self, n=12, d=16):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d) for _ in range(n))

    def forward(self, x):
        x = self.blocks[0](x)
        for i in range(1, len(self.blocks)):
            print(end="")
            x = self.blocks[i](x)
        return x


@pytest.mark.parametrize("cls", [LoopBreakModel, PrintModel])
def test_twelve_blocks_one_entry_for_the_block_code(cls):
    torch.manual_seed(0)
    model = cls().eval()
    x = torch.randn(3, 16)
    with cdynamo.config.patch(graph_break_in_loops=False):   # each block its own frame
        cdy, dyn, counters = run_both_models(model, x, calls=3)
    assert cdy.frame_count == dyn.frame_count
    assert counters["cache_limit_hits"] == 0
    # torch._dynamo: one entry for an input without grad (block 0), one for the rest
    entries = cdynamo.cache_entries(Block.forward)
    assert 1 <= len(entries) <= 2, [e.guards for e in entries]
    assert any("NN_MODULE Block" in g for g in entries[0].guards)
    assert not any("ID_MATCH" in g and "self" in g for g in entries[0].guards)


def test_twelve_blocks_training_grads_match_eager():
    torch.manual_seed(0)
    model = LoopBreakModel()
    x = torch.randn(3, 16)
    ref = copy.deepcopy(model)
    ref(x).pow(2).sum().backward()
    cdynamo.reset()
    cdy = CountingBackend()
    opt = cdynamo.compile(model, backend="aot_eager")
    for loops in (False, True):   # each block its own frame; then the loop compiled
        with cdynamo.config.patch(graph_break_in_loops=loops):
            cdynamo.reset()
            for _ in range(2):
                model.zero_grad()
                opt(x).pow(2).sum().backward()
            if not loops:
                assert 1 <= len(cdynamo.cache_entries(Block.forward)) <= 2
    for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-5, rtol=1e-4), n
    del cdy


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_block_reuse_backends(backend):
    torch.manual_seed(0)
    model = LoopBreakModel(n=3, d=8).eval()
    x = torch.randn(2, 8)
    with torch.no_grad(), cdynamo.config.patch(graph_break_in_loops=False):
        expected = model(x)
        cdynamo.reset()
        opt = cdynamo.compile(model, backend=backend)
        for _ in range(2):
            assert_same(opt(x), expected, exact=False)
    assert len(cdynamo.cache_entries(Block.forward)) == 1


def test_whole_model_params_are_graph_inputs():
    """Compiled whole, a model's parameters are placeholders (as torch._dynamo), not get_attr
    nodes holding one instance's tensors."""
    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(Block(8) for _ in range(3))

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    torch.manual_seed(0)
    model = Stack()
    x = torch.randn(2, 8)
    cdy, dyn, _ = run_both_models(model, x)
    assert cdy.frame_count == dyn.frame_count == 1
    gm = cdy.graphs[0]
    assert not [n for n in gm.graph.nodes if n.op == "get_attr"]
    n_params = len(list(model.parameters()))
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == n_params + 1
    assert len(placeholders) == len([n for n in dyn.graphs[0].graph.nodes if n.op == "placeholder"])


# ---- 2. a RegNet-like and a Swin-like model -------------------------------------------------

class SqueezeExcite(nn.Module):
    def __init__(self, c, r):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(c, r, 1)
        self.act = nn.ReLU()
        self.fc2 = nn.Conv2d(r, c, 1)

    def forward(self, x):
        s = self.fc2(self.act(self.fc1(self.pool(x))))
        return x * torch.sigmoid(s)


class ResBottleneck(nn.Module):
    def __init__(self, cin, cout, stride, groups):
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())
        self.b = nn.Sequential(nn.Conv2d(cout, cout, 3, stride, 1, groups=groups, bias=False),
                               nn.BatchNorm2d(cout), nn.ReLU())
        self.se = SqueezeExcite(cout, max(1, cin // 4))
        self.c = nn.Sequential(nn.Conv2d(cout, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.proj = None
        if stride != 1 or cin != cout:
            self.proj = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        self.activation = nn.ReLU()

    def forward(self, x):
        y = self.c(self.se(self.b(self.a(x))))
        x = x if self.proj is None else self.proj(x)
        return self.activation(x + y)


class AnyStage(nn.Sequential):
    def __init__(self, cin, cout, depth, groups):
        super().__init__()
        for i in range(depth):
            self.add_module(f"block{i + 1}", ResBottleneck(cin if i == 0 else cout, cout,
                                                           2 if i == 0 else 1, groups))


class Stem(nn.Module):
    # torch's own modules are only called from user modules here: a frame of torch.nn's own
    # code called from a frame that runs unmodified is compiled by cdynamo once
    # cdynamo.compile() was given such a module (a per-code mark that reset() keeps)
    def __init__(self, *layers):
        super().__init__()
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)


class Head(nn.Module):
    def __init__(self, cin, n):
        super().__init__()
        self.fc = nn.Linear(cin, n)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class RegNetLike(nn.Module):
    def __init__(self, widths=(8, 16), depths=(2, 4), per_block=False):
        super().__init__()
        self.stem = Stem(nn.Conv2d(3, widths[0], 3, 2, 1, bias=False),
                         nn.BatchNorm2d(widths[0]), nn.ReLU())
        cin = widths[0]
        stages = []
        for w, d in zip(widths, depths):
            stages.append(AnyStage(cin, w, d, groups=4))
            cin = w
        self.trunk_output = nn.Sequential(*stages)
        self.head = Head(cin, 10)
        self.per_block = per_block

    def forward(self, x):
        x = self.stem(x)
        if self.per_block:
            for stage in self.trunk_output:
                for block in stage:
                    x = block(x)
                    if x.abs().sum() > 1e9:   # data-dependent: every block its own frame
                        x = x * 0
        else:
            x = self.trunk_output(x)
        return self.head(x)


@pytest.mark.parametrize("per_block", [False, True])
def test_regnet_like(per_block):
    torch.manual_seed(0)
    model = RegNetLike(per_block=per_block).eval()
    x = torch.randn(2, 3, 32, 32)
    # per_block: the stage loop breaks at every block; as torch._dynamo, that loop's frame
    # is skipped and every block is compiled as a frame of its own
    with torch.no_grad(), cdynamo.config.patch(graph_break_in_loops=not per_block):
        cdy, dyn, counters = run_both_models(model, x)
    assert cdy.frame_count == dyn.frame_count, (
        [len(g.graph.nodes) for g in cdy.graphs], [len(g.graph.nodes) for g in dyn.graphs],
        counters, [e.recompile_reason for e in cdynamo.cache_entries(ResBottleneck.forward)])
    assert counters["cache_limit_hits"] == 0
    if per_block:
        # 6 blocks of 2 widths: one entry per distinct block shape, not per instance
        assert len(cdynamo.cache_entries(ResBottleneck.forward)) <= 4


class StochasticDepth(nn.Module):
    def __init__(self, p, mode):
        super().__init__()
        self.p = p
        self.mode = mode

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        keep = torch.empty([x.shape[0]] + [1] * (x.ndim - 1)).bernoulli_(1 - self.p)
        return x * keep / (1 - self.p)


class ShiftedWindowAttention(nn.Module):
    def __init__(self, dim, window_size, shift_size, heads):
        super().__init__()
        self.window_size = window_size
        self.shift_size = shift_size
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, H, W, C = x.shape
        shift_size = self.shift_size.copy()
        if self.window_size[0] >= H:
            shift_size[0] = 0
        if self.window_size[1] >= W:
            shift_size[1] = 0
        if sum(shift_size) > 0:
            x = torch.roll(x, shifts=(-shift_size[0], -shift_size[1]), dims=(1, 2))
        wh, ww = self.window_size
        x = x.view(B, H // wh, wh, W // ww, ww, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, wh * ww, C)
        q, k, v = self.qkv(x).reshape(x.size(0), x.size(1), 3, self.heads, C // self.heads) \
            .permute(2, 0, 3, 1, 4)
        attn = (q @ k.transpose(-2, -1)) * (C // self.heads) ** -0.5
        x = (attn.softmax(dim=-1) @ v).transpose(1, 2).reshape(-1, wh * ww, C)
        x = self.proj(x)
        x = x.view(B, H // wh, W // ww, wh, ww, C).permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, C)
        if sum(shift_size) > 0:
            x = torch.roll(x, shifts=(shift_size[0], shift_size[1]), dims=(1, 2))
        return x


class SwinBlock(nn.Module):
    def __init__(self, dim, heads, window_size, shift_size, sd_prob):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = ShiftedWindowAttention(dim, window_size, shift_size, heads)
        self.stochastic_depth = StochasticDepth(sd_prob, "row")
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = x + self.stochastic_depth(self.attn(self.norm1(x)))
        return x + self.stochastic_depth(self.mlp(self.norm2(x)))


class SwinHead(nn.Module):
    def __init__(self, dim, n):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, n)

    def forward(self, x):
        return self.fc(self.norm(x).mean(dim=(1, 2)))


class SwinLike(nn.Module):
    def __init__(self, dim=16, depths=(2, 4), per_block=False):
        super().__init__()
        self.embed = Stem(nn.Conv2d(3, dim, 4, 4))
        blocks = []
        total = sum(depths)
        k = 0
        for d in depths:
            for i in range(d):
                blocks.append(SwinBlock(dim, 2, [4, 4], [0 if i % 2 == 0 else 2] * 2,
                                        0.1 * k / total))
                k += 1
        self.features = nn.Sequential(*blocks)
        self.head = SwinHead(dim, 10)
        self.per_block = per_block

    def forward(self, x):
        x = self.embed(x).permute(0, 2, 3, 1)
        for b in self.features.children():
            x = b(x)
            if self.per_block and x.abs().sum() > 1e9:
                x = x * 0
        return self.head(x)


@pytest.mark.parametrize("per_block", [False, True])
def test_swin_like(per_block):
    torch.manual_seed(0)
    model = SwinLike(per_block=per_block).eval()
    x = torch.randn(2, 3, 32, 32)
    # per_block: the stage loop breaks at every block; as torch._dynamo, that loop's frame
    # is skipped and every block is compiled as a frame of its own
    with torch.no_grad(), cdynamo.config.patch(graph_break_in_loops=not per_block):
        cdy, dyn, counters = run_both_models(model, x)
    assert cdy.frame_count == dyn.frame_count
    assert counters["cache_limit_hits"] == 0
    if per_block:
        # blocks differ by shift (0 / 2) and stochastic-depth p: guarded constants
        entries = cdynamo.cache_entries(SwinBlock.forward)
        assert any("shift_size" in g for g in entries[0].guards)


# ---- 3. guards: what stays specialised ------------------------------------------------------

class Norm(nn.Module):
    def __init__(self, d, eps, use_bias):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d))
        self.bias = nn.Parameter(torch.randn(d))
        self.eps = eps
        self.use_bias = use_bias

    def forward(self, x):
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
        if self.use_bias:
            y = y + self.bias
        return y


def compiled_method(fn):
    cdynamo.reset()
    cdynamo.reset_counters()
    cnt = CountingBackend()
    return cdynamo.compile(fn, backend=cnt), cnt


def test_constant_attributes_and_flags_recompile():
    torch.manual_seed(0)
    mods = [Norm(8, 1e-6, True), Norm(8, 1e-6, True), Norm(8, 0.5, True), Norm(8, 1e-6, False)]
    x = torch.randn(2, 8)

    def f(m, x):
        return m(x)

    opt, cnt = compiled_method(f)
    for m in mods:
        assert_same(opt(m, x), m(x))
    # the second instance reuses the first entry; eps and use_bias each recompile
    assert cnt.frame_count == 3
    assert cdynamo.counters()["compiles"] == 3


def test_parameter_shape_recompiles_and_swap_is_seen():
    torch.manual_seed(0)
    a, b = Norm(8, 1e-6, True), Norm(4, 1e-6, True)

    def f(m, x):
        return m(x)

    opt, cnt = compiled_method(f)
    x8, x4 = torch.randn(2, 8), torch.randn(2, 4)
    assert_same(opt(a, x8), a(x8))
    assert_same(opt(b, x4), b(x4))
    assert cnt.frame_count == 2
    # swapping a parameter (a new Parameter object) is read through its source: no stale value
    a.weight = nn.Parameter(torch.randn(8))
    assert_same(opt(a, x8), a(x8))
    # in-place updates (an optimizer step) too
    with torch.no_grad():
        a.bias.add_(1.0)
    assert_same(opt(a, x8), a(x8))
    # a parameter of another dtype recompiles
    a.weight = nn.Parameter(torch.randn(8, dtype=torch.float64))
    assert_same(opt(a, x8), a(x8))
    assert cnt.frame_count == 3


def test_hooks_of_another_instance_are_not_skipped():
    torch.manual_seed(0)
    model = LoopBreakModel(n=4, d=8).eval()
    x = torch.randn(2, 8)
    cdynamo.reset()
    opt = cdynamo.compile(model, backend="eager")
    assert_same(opt(x), model(x), exact=False)
    model.blocks[2].fc1.register_forward_hook(lambda mod, inp, out: out * 2)
    model.blocks[3].register_forward_pre_hook(lambda mod, inp: (inp[0] + 1,))
    with torch.no_grad():
        assert_same(opt(x), model(x), exact=False)
        assert_same(opt(x), model(x), exact=False)


def test_instance_forward_and_training_flag():
    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)) for _ in range(3)]
    blocks[1][0].forward = lambda x: torch.zeros(x.shape[0], 4)
    x = torch.randn(2, 4)

    def f(m, x):
        return m(x)

    opt, cnt = compiled_method(f)
    for m in blocks:
        m.eval()
        assert_same(opt(m, x), m(x), exact=False)
    blocks[2].train()
    torch.manual_seed(1)
    out = opt(blocks[2], x)
    torch.manual_seed(1)
    assert_same(out, blocks[2](x), exact=False)


def test_identity_of_a_module_pins_it():
    torch.manual_seed(0)
    shared = nn.Linear(4, 4)

    class Pair(nn.Module):
        def __init__(self, other):
            super().__init__()
            self.a = shared
            self.b = other

        def forward(self, x):
            if self.a is self.b:
                return self.a(x)
            return self.a(x) + self.b(x)

    p1, p2 = Pair(shared), Pair(nn.Linear(4, 4))
    x = torch.randn(2, 4)

    def f(m, x):
        return m(x)

    opt, cnt = compiled_method(f)
    assert_same(opt(p1, x), p1(x))
    assert_same(opt(p2, x), p2(x))
    assert_same(opt(p1, x), p1(x))
    assert cnt.frame_count == 2


def test_len_and_truth_of_a_module_list_are_guarded():
    class Net(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(n))

        def forward(self, x):
            for i in range(len(self.layers)):
                x = self.layers[i](x)
            if self.layers:
                x = x + 1
            return x

    torch.manual_seed(0)
    nets = [Net(2), Net(2), Net(3), Net(0)]
    x = torch.randn(2, 4)

    def f(m, x):
        return m(x)

    torch._dynamo.reset()
    dyn = CountingBackend()
    d_opt = torch.compile(f, backend=dyn)
    for m in nets:
        d_opt(m, x)
    torch._dynamo.reset()
    opt, cnt = compiled_method(f)
    for m in nets:
        assert_same(opt(m, x), m(x))
    assert cnt.frame_count == dyn.frame_count == 2   # Net(0) makes no graph
    assert cdynamo.counters()["compiles"] == 3
