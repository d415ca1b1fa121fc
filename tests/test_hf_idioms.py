"""Python as Hugging Face models write it (issue 7), found on models as they ship:

- Python's scalar types as torch dtypes (`torch.zeros(n, dtype=int)`, transformers'
  masking_utils.create_chunked_causal_mask in Llama4): eager torch takes int, float, bool and
  complex wherever a dtype goes (int64, float64, bool, complex128).

Each program runs eagerly and under cdynamo (twice: the second call hits the cache); results
must equal eager's, and graphs / graph breaks are compared with torch._dynamo's on the same
function."""
import sys

import pytest
import torch

import cdynamo
from helpers import CountingBackend, assert_same

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="CPython 3.11 only")

X = torch.randn(4)


def counts(explain, fn, *args):
    """(graphs, graph breaks) of explain(fn)(*args) (cdynamo.explain or torch._dynamo's)."""
    if explain is torch._dynamo.explain:
        torch._dynamo.reset()
    else:
        cdynamo.reset()
    e = explain(fn)(*args)
    return e.graph_count, e.graph_break_count


def check(fn, *args, calls=2):
    """fn under cdynamo (calls times) equals eager, with as many graphs and graph breaks as
    torch._dynamo on the same function. Returns cdynamo's counting backend."""
    expected = fn(*args)
    counter = CountingBackend()
    cdynamo.reset()
    compiled = cdynamo.compile(fn, backend=counter)
    for i in range(calls):
        assert_same(compiled(*args), expected, f"call {i}")
    assert counts(cdynamo.explain, fn, *args) == counts(torch._dynamo.explain, fn, *args)
    return counter


# ================================================================ Python scalar types as dtypes


def chunked_mask(x):
    # transformers.masking_utils.create_chunked_causal_mask
    z = torch.zeros(x.shape[0], dtype=int)
    f = torch.ones(x.shape[0], dtype=float)
    return x + z + f


def every_scalar_type(x):
    return (torch.ones(2, dtype=bool), x.to(float), x.new_zeros(3, dtype=int),
            torch.full((2,), 3, dtype=int), x.to(dtype=bool))


def complex_dtype(x):
    return torch.ones(2, dtype=complex) * x[:2]


@pytest.mark.parametrize("fn", [chunked_mask, every_scalar_type], ids=lambda f: f.__name__)
def test_python_scalar_types_as_dtypes(fn):
    counter = check(fn, X)
    assert counts(cdynamo.explain, fn, X) == (1, 0)
    assert counter.frame_count == 1


def test_python_complex_as_dtype():
    # beyond torch._dynamo, which breaks on dtype=complex ("Missing as_proxy()")
    expected = complex_dtype(X)
    counter = CountingBackend()
    cdynamo.reset()
    compiled = cdynamo.compile(complex_dtype, backend=counter)
    for i in range(2):
        assert_same(compiled(X), expected, f"call {i}")
    assert expected.dtype == torch.complex128 and counter.frame_count == 1
    assert counts(cdynamo.explain, complex_dtype, X) == (1, 0)
    assert "torch.complex128" in counter.graphs[0].code


def test_python_scalar_type_dtype_in_the_graph_is_the_torch_dtype():
    # eager: int -> int64, float -> float64 (whatever the default dtype), complex -> complex128;
    # the FX node carries the dtype, so the graph's code is valid Python and reruns
    counter = check(every_scalar_type, X)
    gm = counter.graphs[0]
    code = gm.code
    assert "torch.int64" in code and "torch.float64" in code and "torch.bool" in code
    assert "<class" not in code
    rebuilt = torch.fx.GraphModule(gm, gm.graph)   # compiles gm.code again
    assert_same(rebuilt(X), every_scalar_type(X))


def test_python_scalar_type_float_is_float64_under_another_default_dtype():
    def f(x):
        return torch.ones(2, dtype=float) + x.sum()
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        x = torch.randn(2)
        check(f, x)
    finally:
        torch.set_default_dtype(old)


def test_python_scalar_type_refused_by_eager_raises_as_in_eager():
    # Tensor.type() refuses Python types in eager: the call stays a graph break, and raises
    def f(x):
        return x.type(float)
    with pytest.raises(ValueError, match="invalid type"):
        f(X)
    cdynamo.reset()
    with pytest.raises(ValueError, match="invalid type"):
        cdynamo.compile(f, backend="eager")(X)
