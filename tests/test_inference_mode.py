"""`with torch.inference_mode(mode):` blocks, as torch._dynamo traces them.

The block is two graph nodes, torch.autograd.grad_mode._enter_inference_mode(mode) and
_exit_inference_mode(<enter node>); at trace time only grad mode changes (to `not mode`), so
the fake tensors are never inference tensors. A graph break inside the block is handled as one
inside torch.autocast: the graph ends with the exit node, the break's code enters the same mode
in Python (cdynamo._glue.InferenceModeExit) and the resume function enters it again. Before,
the block was a graph break whose resume function was handed the per-call context object
(ID_MATCH): a recompile on every call until the cache limit.
"""
import pytest
import torch
import torch._dynamo

import cdynamo
from helpers import CountingBackend
from test_graph_breaks import run_both

ENTER = torch.autograd.grad_mode._enter_inference_mode
EXIT = torch.autograd.grad_mode._exit_inference_mode


# conftest's fixture resets both compilers around each test and checks that inference mode
# is off after it.


def no_break(x):
    with torch.inference_mode():
        y = x * 2
    return y + 1


def break_inside(x):
    with torch.inference_mode():
        y = x * 2
        print(end="")
        y = y + 1
    return y.sin()


@torch.inference_mode()
def decorated_helper(x):
    return x.cos() * 2


def calls_decorated(x):
    return decorated_helper(x) + 1


def nested_false(x):
    with torch.inference_mode():
        y = x * 2
        with torch.inference_mode(False):
            z = y + 1
    return z * 3, torch.is_grad_enabled()


def reads_state_inside(x):
    with torch.inference_mode():
        y = x * 2
        inside = torch.is_inference_mode_enabled()
    return y, inside, torch.is_inference_mode_enabled()


def asks_is_inference(x):
    with torch.inference_mode():
        y = x * 2
    return y.is_inference(), y + 1


def with_grad_modes(x):
    with torch.enable_grad():
        with torch.inference_mode():
            y = x * 2
            with torch.no_grad():
                z = y + 1
            print(end="")
            w = z * 2
        v = x * 3
    return w, v


def raises_inside(x):
    try:
        with torch.inference_mode():
            y = x * 2
            raise ValueError("boom")
    except ValueError:
        y = x + 1
    return y, torch.is_grad_enabled(), torch.is_inference_mode_enabled()


PROGRAMS = [no_break, break_inside, calls_decorated, nested_false, reads_state_inside,
            asks_is_inference, with_grad_modes, raises_inside]


def _same(actual, expected):
    """Values, and for tensors is_inference() and requires_grad, as eager's."""
    assert type(actual) is type(expected)
    if isinstance(expected, tuple):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _same(a, e)
    elif isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected)
        assert actual.is_inference() == expected.is_inference()
        assert actual.requires_grad == expected.requires_grad
    else:
        assert actual == expected


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_counts_as_torch_dynamo(fn):
    """Results, graph and call-node counts as torch._dynamo's; the second call a cache hit."""
    run_both(fn, torch.randn(3), ignore=(ENTER, EXIT))


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_repeated_calls_no_recompile(fn):
    """Six calls alternating requires_grad: eager's results (is_inference() included), and no
    more graphs than torch._dynamo makes for the same calls (it made one per call before)."""
    cd, tc = CountingBackend(), CountingBackend()
    torch._dynamo.reset()
    compiled, reference = cdynamo.compile(fn, backend=cd), torch.compile(fn, backend=tc)
    for i in range(6):
        x = torch.randn(3, requires_grad=i % 2 == 1)
        expected = fn(x)
        _same(compiled(x), expected)
        reference(x)
        assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    torch._dynamo.reset()
    assert cd.frame_count == tc.frame_count
    assert cd.frame_count <= 6 // 2 + 2


def test_graph_has_enter_and_exit_nodes():
    cd = CountingBackend()
    compiled = cdynamo.compile(no_break, backend=cd, fullgraph=True)
    x = torch.randn(3, requires_grad=True)
    _same(compiled(x), no_break(x))
    (gm,) = cd.graphs
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets[0] is ENTER and EXIT in targets
    enter = next(n for n in gm.graph.nodes if n.target is ENTER)
    assert enter.args == (True,)
    exit_node = next(n for n in gm.graph.nodes if n.target is EXIT)
    assert exit_node.args == (enter,)


def test_break_inside_resume_enters_again():
    """The graph before the break ends with the exit node; the resume function's graph
    starts with an enter node; the break's code ran in inference mode."""
    seen = []

    def fn(x):
        with torch.inference_mode():
            y = x * 2
            seen.append(torch.is_inference_mode_enabled())
            y = y + 1
        return y

    cd = CountingBackend()
    compiled = cdynamo.compile(fn, backend=cd)
    for _ in range(3):
        out = compiled(torch.randn(3))
        assert out.is_inference()
    assert seen == [True] * 3
    assert cd.frame_count == 2
    first, second = ([n.target for n in gm.graph.nodes if n.op == "call_function"]
                     for gm in cd.graphs)
    assert first[0] is ENTER and first[-1] is EXIT
    assert second[0] is ENTER and second[-1] is EXIT


def test_aot_eager_values():
    """Under AOTAutograd the values are eager's (as torch._dynamo, the tensors the graph makes
    are not inference tensors there: AOTAutograd runs the mode change at trace time)."""
    for fn in (no_break, break_inside, nested_false, with_grad_modes):
        cdynamo.reset()
        compiled = cdynamo.compile(fn, backend="aot_eager")
        for i in range(3):
            x = torch.randn(3, requires_grad=i == 1)
            got, expected = compiled(x), fn(x)
            torch.testing.assert_close(got, expected)


def test_non_constant_mode_is_a_break():
    def fn(x, flag):
        with torch.inference_mode(x.sum() > 0 if flag else True):
            return x + 1

    compiled = cdynamo.compile(fn, backend="eager")
    x = torch.ones(3)
    assert torch.equal(compiled(x, False), x + 1)
    with pytest.raises(Exception, match="inference_mode"):
        cdynamo.compile(fn, backend="eager", fullgraph=True)(x, True)
