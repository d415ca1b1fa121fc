"""Graph breaks inside `with torch.autocast(...)` blocks (issue 7, Scope 1).

The graph before the break ends with the block's _exit_autocast; the break's code enters the
same autocast in Python (cdynamo._glue.AutocastExit) around the instruction it runs, leaves it,
and hands the resume function a cdynamo._glue.AutocastEnter, which the resume function's
prologue calls to enter the block again: traced, that is an _enter_autocast node, so the rest
of the block and its end are in one graph, as torch._dynamo's resume functions do. Graph and
FX call-node counts equal torch._dynamo's (run_both); autocast never leaks out of a call.
"""
import pytest
import torch

import cdynamo
from test_graph_breaks import run_both

X = torch.randn(4, 4, generator=torch.Generator().manual_seed(3))


@pytest.fixture(autouse=True)
def _clean():
    cdynamo.reset()
    cdynamo.reset_counters()
    yield
    cdynamo.reset()


def _autocast_off():
    assert not torch.is_autocast_enabled("cpu"), "autocast left enabled after the call"


def one_block(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x
        print(end="")
        z = y @ x
    return z, z.float() @ x


def nested_blocks(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x
        with torch.autocast("cpu", enabled=False):
            w = y.float() @ x
            print(end="")
            w = w @ x
        z = y @ x
    return z, w, torch.is_autocast_enabled("cpu")


def helper(y):
    print(end="")
    return y @ y


def break_in_inlined_call(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = helper(x @ x)
    return y, y.float() @ x


def inner_block(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        print(end="")
        return x @ x


def block_in_callee(x):
    return inner_block(x) + 1


def tensor_branch_in_block(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x
        if y.sum() > 0:
            y = y @ x
        else:
            y = y @ (-x)
    return y.float() + 1


@pytest.mark.parametrize("fn", [one_block, nested_blocks, break_in_inlined_call,
                                block_in_callee, tensor_branch_in_block])
def test_break_inside_autocast_like_dynamo(fn):
    expected, dyn, cdy = run_both(fn, X)
    _autocast_off()
    assert cdy.n_graphs >= 2


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_break_inside_autocast_backends(backend):
    expected = one_block(X)
    compiled = cdynamo.compile(one_block, backend=backend)
    for _ in range(2):
        out = compiled(X)
        _autocast_off()
        assert out[0].dtype == torch.bfloat16 == expected[0].dtype
        assert torch.allclose(out[0].float(), expected[0].float(), atol=1e-2)
        assert torch.allclose(out[1], expected[1], atol=1e-1)
    assert cdynamo.counters()["unmodified"] == 0


def raises_in_block(x):
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ x
            print(end="")
            raise ValueError("in block")
    except ValueError as e:
        return x @ x, str(e), torch.is_autocast_enabled("cpu"), y.dtype


def test_exception_after_the_break_leaves_autocast():
    """The resume function's with-block cleanup (run unmodified: the exit happens in an
    exception handler) leaves the autocast the prologue entered."""
    compiled = cdynamo.compile(raises_in_block, backend="eager")
    for _ in range(2):
        out = compiled(X)
        _autocast_off()
        assert out[1:] == ("in block", False, torch.bfloat16)
        assert torch.equal(out[0], X @ X)


def loop_with_block(x):
    for i in range(3):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            x = (x @ x) / 4
            if x.sum() > 0:
                x = x + 1
        x = x.float()
    return x


def test_break_inside_autocast_inside_a_loop():
    # the resume functions advance the loop's iterator themselves (no break at FOR_ITER)
    run_both(loop_with_block, X, captures_more=(4, 0))
    _autocast_off()


def test_resume_code_enters_the_block_when_run_unmodified():
    """A resume function that runs without compiling (cache limit 1, a second shape)
    still enters and leaves the block through its AutocastEnter."""
    compiled = cdynamo.compile(one_block, backend="eager")
    with cdynamo.config.patch(cache_size_limit=1):
        for x in (X, torch.randn(3, 3), X):
            out = compiled(x)
            _autocast_off()
            expected = one_block(x)
            assert out[0].dtype == expected[0].dtype
            assert torch.allclose(out[0].float(), expected[0].float(), atol=1e-2)
    assert cdynamo.counters()["unmodified"] + cdynamo.counters()["cache_limit_hits"] > 0
