"""torch.no_grad() / torch.enable_grad() / torch.set_grad_enabled(m) used as decorators on a
function of the traced frame (harness reproducer fg_grad_mode_as_decorator.py): the call of
the decorated function is traced with the grad mode set and the mode from before it restored
(also when it raises); decorating does not change the mode (set_grad_enabled's is undone);
the decorated function is rebuilt when it outlives the trace."""
import pytest
import torch
import torch._dynamo

import cdynamo
from helpers import CountingBackend, _clone_args, assert_same


def results(fn, x):
    out = fn(x)
    return out, tuple(t.requires_grad for t in out if isinstance(t, torch.Tensor))


def fg_compare(fn, x, calls=2):
    """fn eagerly, under torch._dynamo and cdynamo with fullgraph=True: equal results and
    requires_grad of the tensors returned, as many graphs as torch._dynamo."""
    expected = results(fn, x.clone())
    dyn = CountingBackend()
    assert_same(results(torch.compile(fn, backend=dyn, fullgraph=True), x.clone()), expected)
    torch._dynamo.reset()
    counter = CountingBackend()
    compiled = cdynamo.compile(fn, backend=counter, fullgraph=True)
    for i in range(calls):
        assert_same(results(compiled, x.clone()), expected, f"call {i}")
    assert counter.frame_count == dyn.frame_count
    return counter


MODES = [(torch.enable_grad, True), (torch.no_grad, False)]


@pytest.mark.parametrize("call", [True, False])
@pytest.mark.parametrize("i", [0, 1])
def test_decorator_applied_to_nested_function(call, i):
    wrapper, mode = MODES[i]
    inverse, mode_inverse = MODES[1 - i]

    def fn(x):
        def inner(x):
            return x.sin(), torch.is_grad_enabled()

        with inverse():
            inner = wrapper()(inner) if call else wrapper(inner)
            unchanged = torch.is_grad_enabled() == mode_inverse
        with inverse():
            y, seen = inner(x)
            after = torch.is_grad_enabled()
        return y, x.cos(), seen, unchanged, after

    fg_compare(fn, torch.zeros(5, requires_grad=True))


@pytest.mark.parametrize("mode", [True, False])
def test_set_grad_enabled_decorator(mode):
    def fn(x):
        with torch.set_grad_enabled(not mode):
            @torch.set_grad_enabled(mode)
            def inner(x):
                return x * 2, torch.is_grad_enabled()

            during = torch.is_grad_enabled()   # decorating undid set_grad_enabled(mode)
        with torch.set_grad_enabled(not mode):
            y, seen = inner(x)
            return y, x + 1, seen, during, torch.is_grad_enabled()

    fg_compare(fn, torch.ones(3, requires_grad=True))


def test_mode_restored_when_decorated_function_raises():
    def fn(x):
        @torch.no_grad()
        def inner(x):
            y = x * 3
            if y.dim() == 1:
                raise ValueError("one dim")
            return y

        try:
            inner(x)
        except ValueError:
            pass
        return x * 2, torch.is_grad_enabled()

    counter = CountingBackend()
    x = torch.ones(3, requires_grad=True)
    out = cdynamo.compile(fn, backend=counter, fullgraph=True)(x)
    assert_same(results(lambda t: out, x), results(fn, x))
    assert out[0].requires_grad and out[1] is True
    assert counter.frame_count == 1


def test_decorated_function_returned_is_rebuilt():
    def fn(x):
        def inner(t):
            return t * 2

        return torch.no_grad()(inner), torch.enable_grad(inner), x + 1

    x = torch.ones(3, requires_grad=True)
    counter = CountingBackend()
    f_ng, f_eg, y = cdynamo.compile(fn, backend=counter, fullgraph=True)(x)
    with torch.enable_grad():
        assert not f_ng(x).requires_grad
    with torch.no_grad():
        assert f_eg(x).requires_grad
    assert_same(y, x + 1)
    assert counter.frame_count == 1


def test_decorated_function_across_graph_break():
    def fn(x):
        inner = torch.no_grad()(lambda t: t.sin())
        y = x + 1
        torch._dynamo.graph_break()
        return inner(y), y

    x = torch.ones(3, requires_grad=True)
    expected = results(fn, x)
    counter = CountingBackend()
    compiled = cdynamo.compile(fn, backend=counter)
    for _ in range(2):
        assert_same(results(compiled, x), expected)
    # The resume function gets torch's real decorated function (rebuilt as torch.no_grad(f))
    # and inlines its decorate_context, which pins the no_grad instance of its closure
    # (ID_MATCH) that every call makes anew: the resume function recompiles on each call
    # (torch._dynamo: 2 graphs). Known limitation; only the results are checked here.
    assert counter.frame_count >= 2


def test_decorating_a_generator_function_is_a_break():
    def fn(x):
        def gen(t):
            yield t * 2

        return list(torch.no_grad()(gen)(x))[0]

    x = torch.ones(3, requires_grad=True)
    with pytest.raises(Exception, match="grad-mode context decorating"):
        cdynamo.compile(fn, backend="eager", fullgraph=True)(x)
    cdynamo.reset()
    assert_same(results(lambda t: (cdynamo.compile(fn, backend="eager")(t),), x),
                results(lambda t: (fn(t),), x))


def _grad_by_batch(x, w):
    with torch.set_grad_enabled(x.size(0) > 2):
        y = x * w
    return y.sum(), y.requires_grad


def test_set_grad_enabled_of_a_size_condition_is_decided_and_guarded():
    # set_grad_enabled(x.size(0) > 2) was a graph break ("non-constant mode") whose resume
    # function guarded the per-call grad-mode object: a recompile every call. The mode is now
    # decided by the current sizes (a shape guard): one graph per outcome
    import cdynamo
    from helpers import CountingBackend
    w = torch.randn(3, requires_grad=True)
    cdynamo.reset()
    backend = CountingBackend()
    c = cdynamo.compile(_grad_by_batch, backend=backend)
    for b in (2, 3, 1, 5, 4, 6, 2):
        x = torch.randn(b, 3)
        out, rg = c(x, w)
        ref, ref_rg = _grad_by_batch(x, w)
        torch.testing.assert_close(out, ref)
        assert rg == ref_rg
    assert backend.frame_count <= 3


def test_set_grad_enabled_to_the_current_mode_makes_no_node():
    """torch.set_grad_enabled(False) under no_grad changes nothing: no _set_grad_enabled node
    (PyTorch's test_no_grad: 3 ops, as torch._dynamo's coalesced no-op)."""
    def fn(a, b):
        x = a + 1
        with torch.set_grad_enabled(False):
            x = x + b
        return x + 2

    targets = []

    def backend(gm, example_inputs):
        targets.extend(n.target for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    a, b = torch.ones(2, requires_grad=True), torch.ones(2)
    with torch.no_grad():
        out = cdynamo.compile(fn, backend=backend)(a, b)
    assert torch.equal(out, torch.full((2,), 5.0)) and not out.requires_grad
    assert torch._C._set_grad_enabled not in targets and len(targets) == 3
