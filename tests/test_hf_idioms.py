"""Python as Hugging Face models write it (issue 7), found on models as they ship:

- torch._dynamo.assume_constant_result (transformers 5.23 marks its install probes,
  is_torch_distributed_available, ..., under @lru_cache; wav2vec2/hubert/mamba call them from
  forward): the marked function is called while tracing and its result is a constant, not
  guarded, as torch._dynamo does; cdynamo.assume_constant_result sets the same marker.
- Python's scalar types as torch dtypes (`torch.zeros(n, dtype=int)`, transformers'
  masking_utils.create_chunked_causal_mask in Llama4): eager torch takes int, float, bool and
  complex wherever a dtype goes (int64, float64, bool, complex128).
- transformers' ACT2FN, a ClassInstantier (an OrderedDict subclass whose __getitem__ reads
  `super().__getitem__(key)` and builds the class found): two keys read in one frame are two
  entries (they were one source, so the second read returned the first's class).

Each program runs eagerly and under cdynamo (twice: the second call hits the cache); results
must equal eager's, and graphs / graph breaks are compared with torch._dynamo's on the same
function."""
import collections
import functools
import importlib.util
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


# ================================================================ assume_constant_result

PROBE_CALLS = []


@functools.lru_cache
@torch._dynamo.assume_constant_result          # as transformers' _make_compile_constant
def torch_installed() -> bool:
    PROBE_CALLS.append("torch_installed")
    return importlib.util.find_spec("torch") is not None


@torch._dynamo.assume_constant_result          # the mark on the lru_cache wrapper itself
@functools.lru_cache
def numpy_installed() -> bool:
    return importlib.util.find_spec("numpy") is not None


def copying_decorator(fn):
    @functools.wraps(fn)                       # copies fn.__dict__, the mark included
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@copying_decorator
@cdynamo.assume_constant_result
def scale_of(n, factor=1.0):
    PROBE_CALLS.append("scale_of")
    return importlib.util.find_spec("torch") is not None and float(n) * factor


def probes_under_lru_cache(x):
    x = x + 1
    if torch_installed():
        x = x * 2
    if numpy_installed():
        x = x - 3
    return x


def probe_value_in_the_graph(x):
    return torch.full((2,), scale_of(3, factor=2.0)) + x[:2]


@pytest.mark.parametrize("fn", [probes_under_lru_cache, probe_value_in_the_graph],
                         ids=lambda f: f.__name__)
def test_assume_constant_result(fn):
    # before: inlined down to importlib.util.find_spec, a graph break per probe
    counter = check(fn, X)
    assert counts(cdynamo.explain, fn, X) == (1, 0)
    assert counter.frame_count == 1


def test_assume_constant_result_is_a_literal_of_the_graph_and_not_guarded():
    PROBE_CALLS.clear()
    counter = check(probe_value_in_the_graph, X, calls=3)
    code = counter.graphs[0].code
    assert "6.0" in code   # the folded result, printed as Python
    rebuilt = torch.fx.GraphModule(counter.graphs[0], counter.graphs[0].graph)
    assert_same(rebuilt(X)[0], probe_value_in_the_graph(X))
    # called while tracing only (once per trace; the eager reference and torch._dynamo add
    # theirs), never by the compiled code
    cdynamo.reset()
    compiled = cdynamo.compile(probe_value_in_the_graph, backend="eager")
    n = len(PROBE_CALLS)
    compiled(X)
    assert PROBE_CALLS[n:] == ["scale_of"]   # the trace
    for _ in range(3):
        compiled(X)
    assert PROBE_CALLS[n:] == ["scale_of"]
    guards = cdynamo.cache_entries(probe_value_in_the_graph)[0].guards
    assert not any("scale_of" in g and "EQUALS" in g for g in guards), guards


FLAG = {"on": True}


@torch._dynamo.assume_constant_result
def flag_is_on():
    return FLAG["on"]


def uses_flag(x):
    return x + 1 if flag_is_on() else x - 1


def test_assume_constant_result_keeps_the_traced_answer_as_torch_dynamo():
    # the mark promises the answer never changes: a change is not seen by either compiler
    FLAG["on"] = True
    cdynamo.reset()
    torch._dynamo.reset()
    ours = cdynamo.compile(uses_flag, backend="eager")
    theirs = torch.compile(uses_flag, backend="eager")
    assert_same(ours(X), X + 1)
    assert_same(theirs(X), X + 1)
    FLAG["on"] = False
    try:
        assert_same(ours(X), X + 1)
        assert_same(theirs(X), X + 1)
        assert len(cdynamo.cache_entries(uses_flag)) == 1
    finally:
        FLAG["on"] = True
        torch._dynamo.reset()


class ProbedBlock(torch.nn.Module):
    @torch._dynamo.assume_constant_result
    def fast_path(self):
        return self.training

    def forward(self, x):
        return x + 1 if self.fast_path() else x - 1


def test_assume_constant_result_method_pins_its_object():
    # self is an argument: passed as the object itself, pinned by identity (ID_MATCH), so
    # another instance of the class recompiles instead of reusing the first one's answer
    def f(x, m):
        return m(x)
    a, b = ProbedBlock(), ProbedBlock().eval()
    counter = check(f, X, a)
    assert counts(cdynamo.explain, f, X, a) == (1, 0)
    compiled = cdynamo.compile(f, backend=counter)
    assert_same(compiled(X, a), X + 1)
    assert_same(compiled(X, b), X - 1)
    assert any("ID_MATCH" in g for g in cdynamo.cache_entries(f)[0].guards)


@torch._dynamo.assume_constant_result
def size_of(t):
    return 2


@torch._dynamo.assume_constant_result
def fails():
    raise RuntimeError("probe failed")


def test_assume_constant_result_on_a_tensor_or_raising_is_a_graph_break():
    # a tensor argument has no value while tracing (torch._dynamo runs the graph so far for
    # it): the call runs in Python; a probe that raises raises from the compiled code
    def f(x):
        return x * size_of(x)

    def g(x):
        return x + fails()
    cdynamo.reset()
    e = cdynamo.explain(f)(X)
    assert e.graph_break_count == 1
    assert "assume_constant_result" in e.break_reasons[0].reason
    assert_same(cdynamo.compile(f, backend="eager")(X), f(X))
    cdynamo.reset()
    with pytest.raises(RuntimeError, match="probe failed"):
        cdynamo.compile(g, backend="eager")(X)


def test_transformers_install_probes():
    transformers = pytest.importorskip("transformers")
    from transformers.utils import import_utils as iu

    def f(x):
        if iu.is_torch_greater_or_equal("2.5") and iu.is_torch_distributed_available():
            x = x * 2
        return x + iu.is_torch_available()
    del transformers
    check(f, X)
    assert counts(cdynamo.explain, f, X) == (1, 0)


# ================================================================ dict subclass registries


class AddOne:
    def __call__(self, x):
        return x + 1


class Double:
    def __init__(self, k=2):
        self.k = k

    def __call__(self, x):
        return x * self.k


class ClassInstantier(collections.OrderedDict):   # transformers.activations.ClassInstantier
    def __getitem__(self, key):
        content = super().__getitem__(key)
        cls, kwargs = content if isinstance(content, tuple) else (content, {})
        return cls(**kwargs)


REGISTRY = ClassInstantier({"one": AddOne, "double": (Double, {"k": 3})})


def two_registry_entries(x):
    return REGISTRY["one"](x) + REGISTRY["double"](x)


def test_two_entries_of_a_dict_subclass_registry_are_two_values():
    check(two_registry_entries, X)
    assert counts(cdynamo.explain, two_registry_entries, X) == (1, 0)


def test_dict_subclass_registry_entries_are_guarded_each():
    compiled = cdynamo.compile(two_registry_entries, backend="eager")
    assert_same(compiled(X), (X + 1) + X * 3)
    REGISTRY["double"] = (Double, {"k": 5})
    try:
        assert_same(compiled(X), (X + 1) + X * 5)
    finally:
        REGISTRY["double"] = (Double, {"k": 3})
    assert_same(compiled(X), (X + 1) + X * 3)
