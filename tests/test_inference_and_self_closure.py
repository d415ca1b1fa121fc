"""Two faults found by PyTorch's 2025/26 test/dynamo/test_functions.py under cdynamo's
drop-in: Tensor.is_inference() of an input answered from its fake tensor (always False) and
TENSOR_MATCH not comparing dispatch keys, so an inference tensor reused the graph traced for a
normal one (a wrong result); and a nested function whose closure holds the function itself
(`def f(): return f`) sent code generation into endless recursion (a crash)."""
import pytest
import torch

import cdynamo
from helpers import CountingBackend, assert_same


def branch_on_inference(x):
    if x.is_inference():
        return x + 1
    return x - 1


def _inference_tensor():
    with torch.inference_mode():
        return torch.randn(2, 2)


def test_is_inference_of_an_input_recompiles():
    counter = CountingBackend()
    cdynamo.reset()
    opt = cdynamo.compile(branch_on_inference, backend=counter)
    x, xi = torch.randn(2, 2), _inference_tensor()
    assert_same(opt(x), branch_on_inference(x))
    assert counter.frame_count == 1
    assert_same(opt(xi), branch_on_inference(xi))     # was x - 1: the cached graph
    assert counter.frame_count == 2                    # recompiled, as torch._dynamo
    assert_same(opt(x), branch_on_inference(x))
    assert_same(opt(xi), branch_on_inference(xi))
    assert counter.frame_count == 2


def test_is_inference_of_an_inference_input_first():
    cdynamo.reset()
    opt = cdynamo.compile(branch_on_inference, backend=CountingBackend())
    xi = _inference_tensor()
    assert_same(opt(xi), branch_on_inference(xi))


def test_inference_tensor_misses_a_guard_without_is_inference():
    # no is_inference() in the trace: the dispatch keys still tell the tensors apart, as
    # torch._dynamo's TENSOR_MATCH does
    counter = CountingBackend()
    cdynamo.reset()
    opt = cdynamo.compile(lambda t: t * 2, backend=counter)
    opt(torch.randn(2, 2))
    xi = _inference_tensor()
    assert_same(opt(xi), xi * 2)
    assert counter.frame_count == 2
    dyn = CountingBackend()
    torch._dynamo.reset()
    tc = torch.compile(lambda t: t * 2, backend=dyn)
    tc(torch.randn(2, 2))
    tc(_inference_tensor())
    torch._dynamo.reset()
    assert dyn.frame_count == counter.frame_count


def returns_self_referencing_function(x):
    def f():
        return f

    return x + 1, f


def test_self_referencing_closure_is_a_break_not_a_crash():
    cdynamo.reset()
    opt = cdynamo.compile(returns_self_referencing_function, backend=CountingBackend())
    res, f = opt(torch.zeros(1))
    assert_same(res, torch.ones(1))
    assert f is f()
    cdynamo.reset()
    strict = cdynamo.compile(returns_self_referencing_function, backend="eager",
                             fullgraph=True)
    with pytest.raises(Exception, match="closure holds the function itself"):
        strict(torch.zeros(1))


def times_recursion_limit(x):
    import sys
    return x.sin() * sys.getrecursionlimit()


def test_sys_getrecursionlimit_is_a_constant_of_the_trace():
    # torch._dynamo folds it (test_functions' test_sys_recursionlimit, fullgraph=True)
    cdynamo.reset()
    x = torch.randn(4)
    opt = cdynamo.compile(times_recursion_limit, backend="eager", fullgraph=True)
    assert_same(opt(x), times_recursion_limit(x))
