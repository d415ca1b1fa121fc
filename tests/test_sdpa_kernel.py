"""`with torch.nn.attention.sdpa_kernel(backends[, set_priority]):` blocks.

Traced as torch._dynamo traces them (its SDPAKernelVariable): the block's enter and exit are
graph nodes (cdynamo._glue.sdpa_kernel_enter(names, set_priority) / sdpa_kernel_exit(state),
backends by name so the FX code stays printable), the backends are also set while tracing,
and a graph break inside the block is handled as inside torch.autocast (SdpaKernelExit /
SdpaKernelEnter). The SDPBackend members are pinned by ID_MATCH when they come from the
frame. Before, inlining sdpa_kernel's generator broke the graph at its `_sdpa_kernel` call.
"""
import pytest
import torch
import torch._dynamo
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import cdynamo
from cdynamo import _glue
from helpers import CountingBackend
from test_graph_breaks import run_both

IGNORE = ("sdpa_kernel_enter", "sdpa_kernel_exit", "_sdpa_kernel", "_backend_from_string")
Q = torch.randn(1, 2, 4, 8, generator=torch.Generator().manual_seed(0))


def _flags():
    return (torch.backends.cuda.math_sdp_enabled(), torch.backends.cuda.flash_sdp_enabled(),
            torch.backends.cuda.mem_efficient_sdp_enabled())


# conftest's fixture resets both compilers around each test and checks that the SDPA
# backends are as before it.


def one_backend(q):
    with sdpa_kernel(SDPBackend.MATH):
        o = F.scaled_dot_product_attention(q, q, q)
    return o * 2


def backend_list(q):
    with sdpa_kernel([SDPBackend.MATH, SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]):
        o = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    return o + 1


def break_inside(q):
    with sdpa_kernel(SDPBackend.MATH):
        o = F.scaled_dot_product_attention(q, q, q)
        print(end="")
        o = o + F.scaled_dot_product_attention(o, q, q)
    return o


@pytest.mark.parametrize("fn", [one_backend, backend_list, break_inside], ids=lambda f: f.__name__)
def test_counts_as_torch_dynamo(fn):
    """Results and graph counts as torch._dynamo's (call nodes too, the blocks' own nodes
    left out: torch._dynamo spells them as one node per backend)."""
    run_both(fn, Q, ignore=IGNORE)


def test_break_inside_runs_with_the_block_backends():
    seen = []

    def fn(q):
        with sdpa_kernel(SDPBackend.MATH):
            o = F.scaled_dot_product_attention(q, q, q)
            seen.append(_flags())
            o = o * 2
        return o

    cd = CountingBackend()
    compiled = cdynamo.compile(fn, backend=cd)
    for _ in range(3):
        torch.testing.assert_close(compiled(Q), fn(Q))
    assert set(seen) == {(True, False, False)}
    assert cd.frame_count == 2
    targets = [[n.target for n in gm.graph.nodes if n.op == "call_function"] for gm in cd.graphs]
    assert targets[0][0] is _glue.sdpa_kernel_enter and targets[0][-1] is _glue.sdpa_kernel_exit
    assert targets[1][0] is _glue.sdpa_kernel_enter and targets[1][-1] is _glue.sdpa_kernel_exit
    enter = next(n for n in cd.graphs[0].graph.nodes if n.target is _glue.sdpa_kernel_enter)
    assert enter.args == (("MATH",), False)


def test_backend_argument_is_guarded():
    """A backend handed in is pinned by ID_MATCH: another one recompiles (the graph has the
    backend's name baked in)."""
    def fn(q, backend):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, q, q) + 1

    cd = CountingBackend()
    compiled = cdynamo.compile(fn, backend=cd)
    for b in (SDPBackend.MATH, SDPBackend.MATH, SDPBackend.FLASH_ATTENTION,
              [SDPBackend.MATH], [SDPBackend.MATH]):
        torch.testing.assert_close(compiled(Q, b), fn(Q, b))
    assert cd.frame_count == 3
    names = [next(n for n in gm.graph.nodes if n.target is _glue.sdpa_kernel_enter).args[0]
             for gm in cd.graphs]
    assert names == [("MATH",), ("FLASH_ATTENTION",), ("MATH",)]


def test_as_target_is_an_empty_dict():
    """sdpa_kernel's generator yields {} (torch._dynamo gives None)."""
    def fn(q):
        with sdpa_kernel(SDPBackend.MATH) as ctx:
            o = q * 2
        return o, ctx

    out, ctx = cdynamo.compile(fn, backend="eager", fullgraph=True)(Q)
    assert ctx == {} and type(ctx) is dict
    torch.testing.assert_close(out, Q * 2)


def test_bad_backend_raises_as_eager():
    def fn(q):
        with sdpa_kernel("math"):
            return q + 1

    with pytest.raises(AssertionError, match="Backend must be an instance of SDPBackend"):
        fn(Q)
    with pytest.raises(AssertionError, match="Backend must be an instance of SDPBackend"):
        cdynamo.compile(fn, backend="eager")(Q)


def test_aot_eager():
    for fn in (one_backend, break_inside):
        cdynamo.reset()
        compiled = cdynamo.compile(fn, backend="aot_eager")
        torch.testing.assert_close(compiled(Q), fn(Q))
