"""Per-call caches of module reads (issue 9, point 7): parameters' TENSOR_MATCH skipped while
the module dicts holding them are unchanged (as torch._dynamo's
skip_tensor_guards_with_matching_dict_tags, plus requires_grad), NN_MODULE's hook/forward
state answered from the dicts' version tags, and graph inputs loaded through per-site
attribute caches. Each test changes what a cache must notice and checks the result against
eager and the compile count."""
import torch
import torch.nn as nn

import cdynamo
from conftest import requires_engine
from helpers import CountingBackend

pytestmark = requires_engine


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.ln = nn.LayerNorm(4)

    def forward(self, x):
        return self.ln(self.lin(x)).relu()


def _aot_eager_counter():
    return CountingBackend(torch._dynamo.backends.registry.lookup_backend("aot_eager"))


def _run(m, x, counter, calls=1):
    """m compiled with counter, called `calls` times on x (the later calls hit the cache and
    fill its per-call caches): (compiled, output of the first call)."""
    c = cdynamo.compile(m, backend=counter)
    out = c(x)
    for _ in range(calls - 1):
        c(x)
    return c, out


def test_replaced_parameter_of_another_shape_recompiles():
    torch.manual_seed(0)
    m, x = Block(), torch.randn(2, 4)
    counter = CountingBackend()
    c, _ = _run(m, x, counter)
    for _ in range(3):
        assert torch.equal(c(x), m(x))              # cached: TENSOR_MATCH skipped
    with torch.no_grad():
        m.lin.weight = nn.Parameter(torch.randn(4, 4, dtype=torch.float64))
        m.lin.bias = nn.Parameter(torch.randn(4, dtype=torch.float64))
        m.ln.weight = nn.Parameter(torch.ones(4, dtype=torch.float64))
        m.ln.bias = nn.Parameter(torch.zeros(4, dtype=torch.float64))
        xd = x.double()
        assert torch.equal(c(xd), m(xd))
    assert counter.frame_count == 2


def test_in_place_update_is_seen_without_recompiling():
    torch.manual_seed(0)
    m, x = Block(), torch.randn(2, 4)
    counter = CountingBackend()
    c, _ = _run(m, x, counter, calls=2)
    with torch.no_grad():
        m.lin.weight.mul_(2)
    assert torch.equal(c(x), m(x))
    assert counter.frame_count == 1


def test_freezing_parameters_after_compile_recompiles():
    torch.manual_seed(0)
    m, x = Block(), torch.randn(2, 4)
    counter = _aot_eager_counter()
    c, out = _run(m, x, counter, calls=3)  # the parameters' guards now cached
    out.sum().backward()
    g1 = m.lin.weight.grad.clone()
    for p in m.lin.parameters():
        p.requires_grad_(False)
        p.grad = None
    out = c(x)
    assert torch.equal(out, m(x))
    assert counter.frame_count == 2, "requires_grad changed: the entry must not be reused"
    out.sum().backward()
    assert m.lin.weight.grad is None and m.ln.weight.grad is not None
    assert g1 is not None


def test_freezing_under_no_grad_keeps_the_entry():
    # traced and called under no_grad, with no requires_grad read: the graph and the
    # backend's inference path are the same either way, so the tag-skipped parameters'
    # requires_grad is not compared (no recompile), and results stay eager's
    torch.manual_seed(0)
    m, x = Block(), torch.randn(2, 4)
    counter = _aot_eager_counter()
    with torch.no_grad():
        c, _ = _run(m, x, counter, calls=3)
        for p in m.parameters():
            p.requires_grad_(False)
        out = c(x)
        assert torch.equal(out, m(x)) and not out.requires_grad
        for p in m.parameters():
            p.requires_grad_(True)
        assert torch.equal(c(x), m(x))
    assert counter.frame_count == 1
    out = c(x)                                      # grad mode on: GRAD_MODE recompiles
    assert counter.frame_count == 2 and out.requires_grad
    assert torch.equal(out, m(x))


class ReadsRequiresGrad(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        if self.lin.weight.requires_grad:
            return y + 1
        return y - 1


def test_requires_grad_read_under_no_grad_is_still_guarded():
    torch.manual_seed(0)
    m, x = ReadsRequiresGrad(), torch.randn(2, 4)
    counter = CountingBackend()
    with torch.no_grad():
        c, _ = _run(m, x, counter, calls=3)  # the parameters' guards now cached
        m.lin.weight.requires_grad_(False)
        assert torch.equal(c(x), m(x)), "the branch on requires_grad must be re-taken"
    assert counter.frame_count == 2


def test_enable_grad_inside_no_grad_frame_is_still_guarded():
    class GradInside(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            with torch.enable_grad():
                return self.lin(x)

    torch.manual_seed(0)
    m, x = GradInside(), torch.randn(2, 4)
    counter = _aot_eager_counter()
    with torch.no_grad():
        c, _ = _run(m, x, counter, calls=2)
        assert c(x).requires_grad
        for p in m.lin.parameters():
            p.requires_grad_(False)
        out = c(x)
        assert not out.requires_grad and torch.equal(out, m(x))
    assert counter.frame_count == 2


def test_hook_added_after_caching_is_run():
    torch.manual_seed(0)
    m, x = Block(), torch.randn(2, 4)
    counter = CountingBackend()
    c, _ = _run(m, x, counter, calls=3)
    calls = []
    h = m.lin.register_forward_hook(lambda mod, inp, out: calls.append(1))
    try:
        assert torch.equal(c(x), m(x))
        assert len(calls) == 2                      # compiled call and eager call
    finally:
        h.remove()
    calls.clear()
    assert torch.equal(c(x), m(x)) and calls == []


def test_instance_forward_set_after_caching_is_used():
    torch.manual_seed(0)
    m, x = Block(), torch.randn(2, 4)
    counter = CountingBackend()
    c, _ = _run(m, x, counter, calls=2)
    m.ln.forward = lambda t: t * 0 + 7
    assert torch.equal(c(x), m(x))
    del m.ln.forward
    assert torch.equal(c(x), m(x))


def test_two_instances_alternating_share_the_entry():
    torch.manual_seed(0)
    a, b, x = Block(), Block(), torch.randn(2, 4)
    counter = CountingBackend()

    def f(mod, t):
        return mod(t) + 1

    c = cdynamo.compile(f, backend=counter)
    for _ in range(3):
        assert torch.equal(c(a, x), f(a, x))
        assert torch.equal(c(b, x), f(b, x))
    assert counter.frame_count == 1
    with torch.no_grad():
        b.lin.weight.zero_()
    assert torch.equal(c(b, x), f(b, x)) and torch.equal(c(a, x), f(a, x))


class _StemAndBreakingLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))

    def forward(self, x):
        x = self.stem(x)
        for layer in self.layers:
            x = layer(x)
            if x.sum() > 0:          # a break inside a loop
                x = x * 2
        return x


def test_compiling_a_torch_module_forces_only_its_own_frame():
    """cdynamo.compile(nn.Sequential(...)) compiles Sequential.forward as that call's top
    frame; a Sequential run later from a frame that runs unmodified is not compiled on its
    own (it was, for the rest of the process: one graph more than torch._dynamo)."""
    seq = nn.Sequential(nn.Linear(2, 2))
    first = CountingBackend()
    cs = cdynamo.compile(seq, backend=first)
    x2 = torch.randn(1, 2)
    assert torch.equal(cs(x2), seq(x2)) and first.frame_count == 1
    cdynamo.reset()
    torch.manual_seed(0)
    m, x = _StemAndBreakingLoop(), torch.randn(2, 4)
    counts = []
    for engine in ("cdynamo", "dynamo"):
        torch._dynamo.reset()
        counter = CountingBackend()
        c = (cdynamo.compile(m, backend=counter) if engine == "cdynamo"
             else torch.compile(m, backend=counter))
        with cdynamo.config.patch(graph_break_in_loops=False):   # loop frame unmodified
            assert torch.equal(c(x), m(x))
            c(x)
        counts.append(counter.frame_count)
    assert counts[0] == counts[1]
    again = CountingBackend()
    cs2 = cdynamo.compile(seq, backend=again)   # still compiled as its own top frame
    assert torch.equal(cs2(x2), seq(x2)) and again.frame_count == 1


class Tree(nn.Module):
    """Parameters of several submodules, read by one bulk loader (shared prefixes)."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(2)])
        self.head = nn.Linear(4, 4)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def test_bulk_loader_reads_a_replaced_submodule_and_parameter():
    torch.manual_seed(0)
    m, x = Tree(), torch.randn(2, 4)
    counter = CountingBackend()
    c, _ = _run(m, x, counter)
    for _ in range(3):
        assert torch.equal(c(x), m(x))
    m.blocks[1] = Block()                           # same types and shapes: no recompile
    assert torch.equal(c(x), m(x))
    m.blocks[0].ln.bias = nn.Parameter(torch.full((4,), 3.0))
    assert torch.equal(c(x), m(x))
    m.head.weight.data = torch.randn(4, 4)          # swapped storage, same object
    assert torch.equal(c(x), m(x))
    assert counter.frame_count == 1


class TwoLin(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4, bias=False)
        self.b = nn.Linear(4, 4, bias=False)

    def forward(self, x):
        self.a.weight.add_(1.0)                     # aliasing decides what b sees
        return self.b(x) + self.a.weight.sum()


def test_parameter_aliasing_after_compile_is_seen():
    """NO_TENSOR_ALIASING skips only parameter pairs read by the same cache fills as at its
    last pass: tying two parameters, or passing a parameter as the input, is checked."""
    torch.manual_seed(0)
    m, x = TwoLin(), torch.randn(4, 4)
    ref = TwoLin()
    ref.load_state_dict(m.state_dict())
    counter = CountingBackend()
    c = cdynamo.compile(m, backend=counter)
    with torch.no_grad():
        for _ in range(3):
            assert torch.equal(c(x), ref(x))
        m.b.weight = m.a.weight                     # tied after compile
        ref.b.weight = ref.a.weight
        assert torch.allclose(c(x), ref(x))
        assert counter.frame_count == 2
        w, rw = m.a.weight, ref.a.weight
        assert torch.allclose(c(w), ref(rw))      # the input is a parameter too
    assert counter.frame_count == 3


def test_container_length_change_is_seen():
    torch.manual_seed(0)
    m, x = Tree(), torch.randn(2, 4)
    counter = CountingBackend()
    c, _ = _run(m, x, counter)
    for _ in range(3):
        c(x)
    m.blocks.append(Block())
    assert torch.equal(c(x), m(x))
    del m.blocks[0]
    del m.blocks[0]
    assert torch.equal(c(x), m(x))
    assert counter.frame_count == 3


class Capped(nn.ModuleList):
    cap = 2

    def __len__(self):                              # not torch's own: called as it is
        return min(Capped.cap, len(self._modules))


class CappedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = Capped([Block() for _ in range(3)])

    def forward(self, x):
        for i in range(len(self.blocks)):
            x = self.blocks[i](x)
        return x


def test_container_with_its_own_len_is_called():
    torch.manual_seed(0)
    m, x = CappedNet(), torch.randn(2, 4)
    counter = CountingBackend()
    c, _ = _run(m, x, counter)
    for _ in range(3):
        assert torch.equal(c(x), m(x))
    Capped.cap = 3
    try:
        assert torch.equal(c(x), m(x))
    finally:
        Capped.cap = 2
