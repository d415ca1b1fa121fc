"""NumPy on tensors, traced as torch ops through torch._numpy as torch._dynamo does
(csrc/values/ndarray.c, cdynamo/_numpy.py).

Every program runs eagerly, under torch.compile and (twice) under cdynamo.compile: results
must equal eager's (numpy arrays by type, dtype, shape and values), argument state after the
call too, and cdynamo's graph count (and FX call-node count, unless a test says why not) must
equal torch._dynamo's. The first group restates, in our own words, the numpy programs of
PyTorch's test/dynamo/test_functions.py.
"""
import copy
import logging
import math
import operator

import numpy as np
import pytest
import torch
import torch._dynamo

import cdynamo
from conftest import requires_engine
from helpers import CountingBackend

pytestmark = requires_engine

X = torch.randn(4, 5)
Y = torch.randn(4, 5)


def assert_same_np(actual, expected, path="result", exact=False):
    """Equality of eager and compiled results: numpy arrays and scalars by type, dtype, shape
    and values (allclose: torch._numpy's reductions may round differently from numpy's),
    tensors likewise, containers recursively, anything else by type and ==."""
    if isinstance(expected, (np.ndarray, np.generic)):
        assert type(actual) is type(expected), \
            f"{path}: {type(actual).__name__} != {type(expected).__name__}"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert np.shape(actual) == np.shape(expected), f"{path}: shape"
        if exact:
            np.testing.assert_array_equal(actual, expected, err_msg=path)
        else:
            np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6, err_msg=path)
    elif isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: {type(actual).__name__}"
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, path
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6, msg=path)
    elif isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected), \
            f"{path}: {type(actual).__name__} != {type(expected).__name__}"
        assert len(actual) == len(expected), f"{path}: length"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same_np(a, e, f"{path}[{i}]", exact)
    elif isinstance(expected, dict):
        assert type(actual) is type(expected), \
            f"{path}: {type(actual).__name__} != {type(expected).__name__}"
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for k in expected:
            assert_same_np(actual[k], expected[k], f"{path}[{k!r}]", exact)
    elif isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(actual), path
    elif isinstance(expected, float) and not exact:
        assert type(actual) is float and math.isclose(actual, expected, rel_tol=1e-5), \
            f"{path}: {actual!r} != {expected!r}"
    else:
        assert type(actual) is type(expected) and actual == expected, \
            f"{path}: {actual!r} != {expected!r}"


class _Breaks(logging.Handler):
    def __init__(self):
        super().__init__()
        self.reasons = []

    def emit(self, record):
        msg = record.getMessage()
        if "Graph break" in msg or "unmodified" in msg:
            self.reasons.append(msg)


def run_np(fn, *args, ops=True, graphs=True, calls=2, exact=False, raises=None):
    """Run fn eagerly, under torch.compile and under cdynamo.compile (`calls` times, each
    on fresh copies of args); assert cdynamo's results and argument state equal eager's and,
    when asked, that graph / FX call-node counts equal torch._dynamo's (`graphs`/`ops`: True,
    or an int that cdynamo's count must equal where it knowingly differs). With `raises`,
    eager must raise that exception type and so must cdynamo. Returns (cdynamo's backend,
    its break reasons)."""
    e_args = copy.deepcopy(args)
    if raises is not None:
        with pytest.raises(raises):
            fn(*e_args)
        cdynamo.reset()
        with pytest.raises(raises):
            cdynamo.compile(fn, backend="eager")(*copy.deepcopy(args))
        return None, []
    expected = fn(*e_args)
    torch._dynamo.reset()
    dyn = CountingBackend()
    torch.compile(fn, backend=dyn)(*copy.deepcopy(args))
    torch._dynamo.reset()

    handler = _Breaks()
    log = logging.getLogger("cdynamo")
    old_level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        cdynamo.reset()
        cdy = CountingBackend()
        compiled = cdynamo.compile(fn, backend=cdy)
        for i in range(calls):
            c_args = copy.deepcopy(args)
            out = compiled(*c_args)
            assert_same_np(out, expected, f"call {i}", exact)
            assert_same_np(c_args, e_args, f"args after call {i}", exact)
            if i == 0:
                graphs_after_first = cdy.frame_count
        assert cdy.frame_count == graphs_after_first, "later calls recompiled"
    finally:
        log.removeHandler(handler)
        log.setLevel(old_level)
    want_graphs = dyn.frame_count if graphs is True else graphs
    if graphs is not None:
        assert cdy.frame_count == want_graphs, \
            f"cdynamo made {cdy.frame_count} graphs, expected {want_graphs} " \
            f"(torch._dynamo {dyn.frame_count}); breaks: {handler.reasons}"
    want_ops = dyn.op_count if ops is True else ops
    if ops is not None:
        assert cdy.op_count == want_ops, \
            f"cdynamo recorded {cdy.op_count} ops, expected {want_ops} " \
            f"(torch._dynamo {dyn.op_count}); breaks: {handler.reasons}"
    return cdy, handler.reasons


# ==================================== the numpy programs of PyTorch's test_functions.py

def meshgrid_of_two(x, y):
    g1, g2 = np.meshgrid(x.numpy(), y.numpy())
    return torch.from_numpy(g1), torch.from_numpy(g2)


def from_numpy_then_branch_on_size(x):
    t = torch.from_numpy(x.numpy())
    return torch.tensor(t.size(0) == 1)


def size_of_array(x):
    return x.numpy().size


def array_attributes(x):
    arr = x.numpy()
    return (arr.itemsize, arr.strides, arr.shape, arr.ndim, arr.size,
            torch.from_numpy(arr.T), torch.from_numpy(arr.real), torch.from_numpy(arr.imag))


def mean_then_sum(x):
    m = np.mean(x.numpy(), 1)
    s = np.sum(m)
    return torch.from_numpy(np.asarray(s))


def returns_transposed_array(x):
    return x.numpy().T


def returns_three_arrays(x):
    arr = x.numpy()
    return arr.T, arr.imag, arr.real


def copy_method(x):
    return x.numpy().copy()


def transpose_method(x):
    return x.numpy().transpose(0, 1)


def reshape_with_size(x):
    arr = x.numpy()
    return arr.reshape([1, arr.size])


def methods_giving_scalars(x):
    arr = x.numpy()
    return arr.max(axis=0), arr.all(axis=0)


def array_operators(x):
    arr = x.numpy()
    return arr + arr, arr - arr


def ones_like_of_tensor_with_dtype(x):
    return np.ones_like(x, dtype=np.float64)


def dtype_made_in_function(x):
    float_type = np.dtype("float")
    return np.full_like(x, 2.4, dtype=float_type)


def norm_over_axis(x):
    return np.linalg.norm(x.numpy(), axis=0)


def fftshift_of_array(x):
    return np.fft.fftshift(x.numpy())


def random_minus_itself():
    r = np.random.randn(2, 2)
    return r - r


def iinfo_bound(x):
    return x + np.iinfo(np.int16).max


def finfo_bound(x):
    return x + np.finfo(np.float32).min


@pytest.mark.parametrize("fn, args", [
    (meshgrid_of_two, (X, Y)),
    (from_numpy_then_branch_on_size, (X,)),
    (size_of_array, (X,)),
    (array_attributes, (X,)),
    (mean_then_sum, (X,)),
    (returns_transposed_array, (X,)),
    (returns_three_arrays, (X,)),
    (copy_method, (X,)),
    (transpose_method, (X,)),
    (reshape_with_size, (X,)),
    (methods_giving_scalars, (X,)),
    (array_operators, (X,)),
    (ones_like_of_tensor_with_dtype, (X,)),
    (dtype_made_in_function, (X,)),
    (norm_over_axis, (X,)),
    (fftshift_of_array, (X,)),
    (random_minus_itself, ()),
], ids=lambda v: getattr(v, "__name__", "args"))
def test_dynamo_numpy_programs(fn, args):
    cdy, reasons = run_np(fn, *args)
    assert cdy.frame_count == 1 and not reasons, reasons


@pytest.mark.parametrize("fn", [iinfo_bound, finfo_bound], ids=lambda f: f.__name__)
def test_iinfo_finfo_fold(fn):
    # folded at trace time (torch._dynamo folds them too): one graph, one add
    cdy, reasons = run_np(fn, X)
    assert cdy.op_count == 1 and not reasons


def test_graph_is_made_of_torch_numpy_wrappers():
    cdy, _ = run_np(mean_then_sum, X)
    targets = [n.target for n in cdy.graphs[0].graph.nodes if n.op == "call_function"]
    names = [getattr(t, "__name__", str(t)) for t in targets]
    assert names == ["np_mean", "np_sum", "np_asarray", "as_tensor"], names
    methods = [n.target for n in cdy.graphs[0].graph.nodes if n.op == "call_method"]
    assert methods == ["view_as"]    # x.numpy(): a view of x stands for the array


# ==================================== functions, methods, attributes, operators

def concatenate_list(x, y):
    return np.concatenate([x.numpy(), y.numpy()], axis=0)


def clip_with_numpy_keywords(x):
    arr = x.numpy()
    return np.clip(arr, a_min=-0.5, a_max=0.5), arr.clip(-0.1, 0.1)


def astype_variants(x):
    arr = x.numpy()
    return arr.astype(np.int64), arr.astype("float64"), arr.astype(np.dtype("int32"))


def where_and_compare(x):
    arr = x.numpy()
    return np.where(arr > 0, arr, 0.0), arr == arr, -arr, ~(arr > 0)


def ufuncs_and_reductions(x, y):
    a, b = x.numpy(), y.numpy()
    return np.maximum(a, b), np.exp(a).sum(axis=1), np.matmul(a, b.T), (a @ b.T).mean()


def subscripts(x):
    arr = x.numpy()
    return arr[1], arr[:, 1:3], arr[[0, 2]], arr[..., None].shape, arr[0, 0]


def iterate_and_len(x):
    arr = x.numpy()
    return [row.sum() for row in arr], len(arr), arr.ndim, arr.nbytes


def linalg_and_tuple_results(x):
    arr = x.numpy()
    gram = arr @ arr.T
    u, s, vh = np.linalg.svd(gram)
    return s, np.linalg.norm(arr)


@pytest.mark.parametrize("fn, args", [
    (concatenate_list, (X, Y)),
    (clip_with_numpy_keywords, (X,)),
    (astype_variants, (X,)),
    (where_and_compare, (X,)),
    (ufuncs_and_reductions, (X, Y)),
    (subscripts, (X,)),
    (iterate_and_len, (X,)),
], ids=lambda v: getattr(v, "__name__", "args"))
def test_array_operations(fn, args):
    cdy, reasons = run_np(fn, *args)
    assert cdy.frame_count == 1 and not reasons, reasons


def test_tuple_results_are_numpy_containers():
    # np.linalg.svd gives numpy's SVDResult (torch._numpy a torch return type); each element
    # of a tuple result is its own getitem node (torch._dynamo makes them lazily: fewer ops)
    cdy, reasons = run_np(linalg_and_tuple_results, X, ops=None)
    assert cdy.frame_count == 1 and not reasons


def svd_result_returned(x):
    return np.linalg.svd(x.numpy() @ x.numpy().T)


def meshgrid_returned(x, y):
    return np.meshgrid(x.numpy(), y.numpy())


@pytest.mark.parametrize("fn", [svd_result_returned, meshgrid_returned], ids=lambda f: f.__name__)
def test_returned_containers_have_numpy_types(fn):
    # numpy 2 gives a tuple (a named tuple) where torch._numpy gives a list / torch type:
    # cdynamo returns numpy's (torch._dynamo returns torch._numpy's)
    expected = fn(X, Y) if fn is meshgrid_returned else fn(X)
    args = (X, Y) if fn is meshgrid_returned else (X,)
    out = cdynamo.compile(fn, backend="eager")(*args)
    assert type(out) is type(expected)
    if fn is svd_result_returned:   # singular vectors are defined up to their sign
        assert_same_np(out.S, expected.S)
        u, s, vh = out
        np.testing.assert_allclose((u * s) @ vh, X.numpy() @ X.numpy().T, atol=1e-4)
    else:
        assert_same_np(tuple(out), tuple(expected))


# ==================================== constants: folded at trace time

def sqrt_of_dim(x):
    return x / np.sqrt(x.shape[-1])


def numpy_scalars(x):
    half = np.float32(0.5)
    return x * half, half * 3, np.pi * x


def dtype_comparisons(x):
    arr = x.numpy()
    if arr.dtype == np.float32:
        return torch.from_numpy(arr + 1)
    return torch.from_numpy(arr - 1)


def arange_made_from_constants(x):
    return x + torch.from_numpy(np.arange(5)).float()


def test_constant_calls_fold():
    # np.sqrt(5) is computed while tracing (torch._dynamo records it: one more op)
    cdy, reasons = run_np(sqrt_of_dim, X, ops=1)
    assert not reasons


def test_numpy_scalars_are_constants():
    # numpy scalars fold (np.float32 arithmetic as eager) and enter graphs as Python numbers
    cdy, reasons = run_np(numpy_scalars, X, ops=2, exact=True)
    assert not reasons
    consts = [a for n in cdy.graphs[0].graph.nodes if n.op == "call_function" for a in n.args
              if not isinstance(a, torch.fx.Node)]
    assert consts and all(type(a) is float for a in consts), consts


def test_dtype_comparison_folds():
    # torch._dynamo breaks on ndarray.dtype; cdynamo folds the comparison
    cdy, reasons = run_np(dtype_comparisons, X, graphs=1, ops=3)
    assert not reasons


def test_array_from_constants_is_traced():
    # as torch._dynamo: np.arange(5) is a graph op (its result is an array)
    run_np(arange_made_from_constants, X)


def test_numpy_scalar_input_is_guarded():
    def scale(x, s):
        return x * s

    f = cdynamo.compile(scale, backend="eager")
    for s in (np.float32(2.0), np.float32(3.0), np.float64(2.0)):
        torch.testing.assert_close(f(X, s), X * s)
    assert len(cdynamo.cache_entries(scale)) == 3   # EQUALS_MATCH on the value and its type


# ==================================== graph breaks and rebuilt arrays

def break_with_print(x):
    arr = x.numpy()
    doubled = arr * 2
    print("numpy break")
    return torch.from_numpy(doubled + 1), doubled.sum()


def test_arrays_cross_a_graph_break(capsys):
    # the arrays live at the break are rebuilt as numpy arrays; the resume function takes
    # them as inputs (tensors sharing their memory)
    cdy, reasons = run_np(break_with_print, X)
    assert cdy.frame_count == 2 and len(reasons) == 1 and "print" in reasons[0]
    assert "numpy break" in capsys.readouterr().out


def inplace_through_the_array(x):
    arr = x.numpy()
    arr += 1
    arr[0] = 5.0
    return x


def inplace_after_break(x):
    arr = x.numpy()
    print("numpy break")
    arr[0, 0] = 100.0
    return x * 1


def test_array_shares_the_tensors_memory():
    cdy, reasons = run_np(inplace_through_the_array, X)
    assert not reasons


def test_rebuilt_array_shares_the_tensors_memory(capsys):
    x = X.clone()
    out = cdynamo.compile(inplace_after_break, backend="eager")(x)
    assert x[0, 0].item() == 100.0 and out[0, 0].item() == 100.0


def same_array_twice(x):
    arr = x.numpy()
    print("numpy break")
    return arr, arr


def test_one_array_is_rebuilt_once(capsys):
    a, b = cdynamo.compile(same_array_twice, backend="eager")(X.clone())
    assert a is b


# ==================================== numpy arrays as inputs

def add_input_array(arr, x):
    return torch.from_numpy(arr) + x, arr.sum(axis=0), arr


def test_input_arrays_are_graph_inputs():
    arr = np.arange(20, dtype=np.float32).reshape(4, 5)
    cdy, reasons = run_np(add_input_array, arr, X)
    assert not reasons
    f = cdynamo.compile(add_input_array, backend="eager")
    out = f(arr, X)
    assert out[2] is arr    # the input array itself, rebuilt from its source
    entries = cdynamo.cache_entries(add_input_array)
    assert any("___from_numpy(L['arr']) TENSOR_MATCH" in g for e in entries for g in e.guards)


def test_input_array_guards_recompile():
    f = cdynamo.compile(add_input_array, backend="eager")
    for arr in (np.ones((4, 5), np.float32), np.ones((4, 5), np.float64),
                np.ones((2, 5), np.float32), np.ones((4, 5), np.float32).T.copy().T):
        x = torch.randn(arr.shape[0], 5)
        assert_same_np(f(arr, x)[:2], add_input_array(arr, x)[:2], exact=True)
    assert len(cdynamo.cache_entries(add_input_array)) == 4


def test_read_only_input_array_is_not_traced():
    arr = np.ones((4, 5), np.float32)
    arr.flags.writeable = False
    f = cdynamo.compile(add_input_array, backend="eager")
    assert_same_np(f(arr, X)[:2], add_input_array(arr, X)[:2], exact=True)


# ==================================== clean breaks where tracing would be wrong

def numpy_of_grad_tensor(x):
    return x.numpy()


def np_sum_of_tensor(x):
    return np.sum(x)


def test_eager_errors_are_kept():
    run_np(numpy_of_grad_tensor, X.clone().requires_grad_(), raises=RuntimeError)
    run_np(np_sum_of_tensor, X, raises=TypeError)   # numpy calls x.sum(axis=...): TypeError


def ufunc_of_tensor(x):
    return np.sin(x)


def reshape_of_tensor(x):
    return np.reshape(x, (5, 4))


@pytest.mark.parametrize("fn", [ufunc_of_tensor, reshape_of_tensor], ids=lambda f: f.__name__)
def test_numpy_on_tensors_keeps_eager_types(fn):
    # eager gives tensors here (torch._dynamo wrongly gives arrays): cdynamo breaks
    expected = fn(X)
    assert isinstance(expected, torch.Tensor)
    cdy, reasons = run_np(fn, X, graphs=0, ops=0)
    assert reasons and "CDB0050" in reasons[0]


def fft_of_float32(x):
    return np.fft.fft(x.numpy()).real


def test_torch_numpy_dtype_differences_break():
    # numpy 2 keeps complex64 for float32 input, torch._numpy gives complex128 (torch._dynamo
    # returns float64): cdynamo breaks and numpy computes it; .real of numpy's result is
    # traced in the resume function (the array is its input)
    cdy, reasons = run_np(fft_of_float32, X, graphs=2, ops=2)
    assert any("differs from numpy" in r for r in reasons)


def data_reads(x):
    arr = x.numpy()
    total = arr.sum()
    return arr.tolist(), float(total), bool((arr > 10).any())


def truth_of_array(x):
    arr = x.numpy()
    if (arr > 0).any():
        return torch.from_numpy(arr + 1)
    return torch.from_numpy(arr)


def mixes_tensor_and_array(x):
    arr = x.numpy()
    return x + arr


def seeds_numpy(x):
    np.random.seed(0)
    return x + 1


@pytest.mark.parametrize("fn", [data_reads, truth_of_array, mixes_tensor_and_array, seeds_numpy],
                         ids=lambda f: f.__name__)
def test_clean_breaks(fn):
    # each is a graph break with a reason; results equal eager's (graph counts may differ:
    # torch._dynamo traces np.random.seed and `x + arr` into its graph)
    cdy, reasons = run_np(fn, X, graphs=None, ops=None)
    assert reasons


def test_fullgraph_names_the_numpy_reason():
    f = cdynamo.compile(mixes_tensor_and_array, backend="eager", fullgraph=True)
    with pytest.raises(RuntimeError, match="CDB0050"):
        f(X)


def test_explain_counts_numpy_breaks():
    info = cdynamo.explain(truth_of_array)(X)
    assert info.graph_break_count == 1
    assert "numpy" in str(info.break_reasons[0])


def test_aot_eager_backend_runs_the_numpy_graph():
    f = cdynamo.compile(ufuncs_and_reductions, backend="aot_eager")
    assert_same_np(f(X, Y), ufuncs_and_reductions(X, Y))


def int_division(x):
    a = (x.numpy() * 10).astype(np.int32)
    return a // 3, a / 2


def test_torch_numpy_promotion_differences_break():
    # int32 / 2 is float64 in numpy, float32 in torch._numpy (torch._dynamo returns float32)
    cdy, reasons = run_np(int_division, X, graphs=1, ops=None)
    assert any("truediv differs from numpy" in r for r in reasons)


def scalar_results(x):
    arr = x.numpy()
    total = arr.sum()
    corner = arr[0, 0]
    return total, corner, total * 2, isinstance(total, np.ndarray), arr.mean(keepdims=True)


def test_numpy_scalars_where_numpy_gives_them():
    # numpy gives numpy scalars for full reductions and element reads, 0-d arrays with
    # keepdims; torch._numpy (and torch._dynamo) give 0-d arrays for all
    cdy, reasons = run_np(scalar_results, X, ops=True, graphs=True)
    assert not reasons


def sin_of_array(x):
    return torch.from_numpy(np.sin(x.numpy())) + 1


def test_trace_numpy_off():
    with cdynamo.config.patch(trace_numpy=False), \
            torch._dynamo.config.patch(trace_numpy=False):
        cdy, reasons = run_np(sin_of_array, X)
    assert reasons and "CDB0050" in reasons[0] and "trace_numpy is off" in reasons[0]


def test_numpy_scalar_types_in_isinstance():
    def kinds(x, s):
        return isinstance(s, np.float32), isinstance(s, np.floating), \
            isinstance(x.numpy(), np.ndarray), x + s

    cdy, reasons = run_np(kinds, X, np.float32(1.5), graphs=1, ops=None)
    assert not reasons


# ==================================== programs in the style of PyTorch's test_misc.py numpy tests
# (results against eager; graph and op counts against torch._dynamo on the same function)

def take_along_rows(a, i):
    return np.take_along_axis(a, i, axis=1)


def break_keeps_array(x):
    a = x.numpy()
    b = a + 1
    torch._dynamo.graph_break()
    return b * 2


def break_keeps_two_arrays(x):
    a = x.numpy()
    b, c = a + 1, a - 1
    torch._dynamo.graph_break()
    return b * c, c


def numpy_forced(x):
    return x.numpy(force=True) * 3


GLOBAL_ARRAY = np.arange(5.0)


def adds_global_array(y):
    return y + GLOBAL_ARRAY + GLOBAL_ARRAY


def builtin_types_as_dtypes(x):
    return np.zeros_like(x.numpy(), dtype=float) + np.ones(x.shape, dtype=int)


def tolist_then_more(x):
    a = x.numpy()
    return a.tolist(), a * 2


def iterates_rows(x):
    return [r.sum() for r in x.numpy()]


def min_max_compare(x):
    a = x.numpy()
    return np.min(a), a > 0, np.maximum(a, 0.5)


def unique_of_array(x):
    return np.unique(x.numpy())


def array_of_arrays(x, y):
    return np.array([x.numpy(), y.numpy()])


def ones_like_with_dtype_argument(x, dt):
    return np.ones_like(x.numpy(), dtype=dt)


def linalg_norms(x):
    a = x.numpy()
    return np.linalg.norm(a), np.linalg.norm(a, axis=1)


def ufunc_into_out(x):
    a = x.numpy()
    out = np.empty_like(a)
    np.add(a, 1, out=out)
    return out


def mandelbrot_counts(n):
    c = np.linspace(-2.0, 1.0, n)[None, :] + 1j * np.linspace(-1.0, 1.0, n)[:, None]
    z = np.zeros_like(c)
    count = np.zeros(c.shape, dtype=np.int64)
    for _ in range(5):
        z = z * z + c
        count = count + (np.abs(z) < 2)
    return count


def stacks_and_concatenations(x, y):
    a, b = x.numpy(), y.numpy()
    return np.stack([a, b]), np.concatenate((a, b), axis=1), np.vstack([a, b])


def reductions_and_reshapes(x):
    a = x.numpy()
    return a.mean(axis=0), a.std(), a.argmax(), a.cumsum(0), a.ravel(), a.flatten(), a.squeeze()


def shape_used_in_python(x):
    a = x.numpy()
    n, m = a.shape
    return torch.from_numpy(a[: n // 2]) * m


def input_array_products(a, b):
    return a @ b.T, (a * b).sum(axis=-1), np.dot(a, b.T)


def arrays_in_input_list(xs):
    return [a * 2 for a in xs]


def arrays_in_input_dict(d):
    return {k: np.sum(v) for k, v in d.items()}


def appends_array_to_input_list(lst, x):
    lst.append(x.numpy() + 1)
    return len(lst)


def arrays_in_returned_dict(x):
    a = x.numpy()
    return {"a": a, "b": (a.T, a.sum())}


def mutates_input_array(a):
    a += 1
    a[0, 0] = 7
    return a.sum()


def negative_step_slices(x):
    a = x.numpy()
    return a[::-1], a[:, ::-2]


def boolean_mask(x):
    a = x.numpy()
    return a[a > 0]


def sorts_in_place(x):
    a = x.numpy().copy()
    a.sort(axis=1)
    return a, np.argsort(a, axis=0)


def einsum_and_clip(x, y):
    return np.einsum("ij,kj->ik", x.numpy(), y.numpy()), np.clip(x.numpy(), -0.5, 0.5)


def branches_on_array(x):
    a = x.numpy()
    if (a > 100).any():
        return a * 2
    return a * 3


def complex_arrays(x):
    a = x.numpy() + 1j * x.numpy()
    return np.abs(a), a.conj(), np.angle(a)


def newaxis_broadcast(x):
    a = x.numpy()
    return a[:, np.newaxis, :] + a[np.newaxis]


def arrays_in_input_tuple(t):
    a, b = t
    return a + b


@pytest.mark.parametrize("fn, args", [
    (mutates_input_array, (np.ones((3, 4)),)),
    (negative_step_slices, (X,)),
    (boolean_mask, (X,)),
    (sorts_in_place, (X,)),
    (einsum_and_clip, (X, Y)),
    (branches_on_array, (X,)),
    (complex_arrays, (X,)),
    (newaxis_broadcast, (X,)),
    (arrays_in_input_tuple, ((np.ones(3), np.arange(3.0)),)),
    (take_along_rows, (np.arange(12.0).reshape(3, 4), np.array([[0, 3], [1, 1], [2, 0]]))),
    (break_keeps_array, (X,)),
    (break_keeps_two_arrays, (X,)),
    (numpy_forced, (X.clone().requires_grad_(),)),
    (adds_global_array, (np.ones(5),)),
    (builtin_types_as_dtypes, (X,)),
    (tolist_then_more, (X,)),
    (iterates_rows, (X,)),
    (min_max_compare, (X,)),
    (unique_of_array, (torch.tensor([3.0, 1.0, 3.0, 2.0]),)),
    (array_of_arrays, (X, Y)),
    (ones_like_with_dtype_argument, (X, np.float32)),
    (ones_like_with_dtype_argument, (X, np.int64)),
    (linalg_norms, (X,)),
    (ufunc_into_out, (X,)),
    (mandelbrot_counts, (6,)),
    (stacks_and_concatenations, (X, Y)),
    (reductions_and_reshapes, (X,)),
    (shape_used_in_python, (X,)),
    (input_array_products, (np.random.randn(3, 4), np.random.randn(3, 4))),
    (arrays_in_input_list, ([np.ones(3), np.arange(4.0)],)),
    (arrays_in_input_dict, ({"a": np.ones(3), "b": np.arange(4.0)},)),
    (appends_array_to_input_list, ([1], X)),
    (arrays_in_returned_dict, (X,)),
], ids=lambda v: getattr(v, "__name__", "args"))
def test_dynamo_misc_numpy_programs(fn, args):
    cdy, reasons = run_np(fn, *args)
    # the breaks are the ones torch._dynamo has too (run_np compared the graph counts)
    assert len(reasons) == cdy.frame_count - 1 or fn in (unique_of_array, boolean_mask), reasons


def array_as_dict_key(x):
    return {x.numpy(): 1}


def test_unhashable_array_raises_as_eager():
    run_np(array_as_dict_key, X, raises=TypeError)


def test_forced_numpy_uses_the_detached_tensor():
    # x.numpy(force=True) is x.detach().cpu() seen as an array: no extra view (as torch._dynamo)
    cdy, _ = run_np(numpy_forced, X.clone().requires_grad_())
    methods = [n.target for n in cdy.graphs[0].graph.nodes if n.op == "call_method"]
    assert methods[:2] == ["detach", "cpu"] and "view_as" not in methods


def modulo_of_numpy_scalars(x, a, b):
    return x + (a % b)


def test_numpy_scalar_arguments_are_graph_inputs():
    # numpy int64 / float64 arguments are graph inputs from the first call (SymInts of
    # int(a)), as torch._dynamo makes them graph inputs: a new value reuses the graph (it
    # recompiled for every value before, up to the cache limit: PyTorch's
    # test_no_recompilations 8 graphs [1]); another numpy type (int32: a constant) compiles
    run_np(modulo_of_numpy_scalars, X, np.int64(12), np.int64(5))
    cdynamo.reset()   # the entries below are the "eager" backend's alone
    f = cdynamo.compile(modulo_of_numpy_scalars, backend="eager")
    for a in (np.int64(12), np.int64(13), np.int64(7), np.int32(13)):
        torch.testing.assert_close(f(X, a, np.int64(5)), X + (a % np.int64(5)))
    assert len(cdynamo.cache_entries(modulo_of_numpy_scalars)) == 2


def numpy_scalar_arithmetic(x, t, s):
    return (x * t + s, t // 2, t % 3, t ** 2, -t, abs(t), t / 4, t + 1.5, s * 2, t > 3,
            max(t, 4), min(s, 0.5), int(t) + 1, float(s), isinstance(t, np.integer),
            math.sqrt(t), math.floor(s * 10), operator.add(t, 1), operator.mul(s, 2))


def _same_typed(actual, expected):
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected)
        return
    if isinstance(expected, tuple):
        assert type(actual) is tuple and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _same_typed(a, e)
        return
    assert type(actual) is type(expected) and actual == expected, (actual, expected)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_numpy_scalar_results_keep_numpy_types(backend):
    """What arithmetic makes of a numpy scalar input stays the numpy scalar eager gives
    (np.int64 // 2 is np.int64, / gives np.float64, a comparison np.bool_; int() a Python
    int; max() the winning argument itself), rebuilt from the graph's outputs; torch._dynamo
    returns 0-d float32 arrays here. One graph serves every value (under eager; AOTAutograd
    specialises float outputs, as for Python float inputs)."""
    from torch._dynamo.backends.registry import lookup_backend
    cdy = CountingBackend(inner=None if backend == "eager" else lookup_backend(backend))
    f = cdynamo.compile(numpy_scalar_arithmetic, backend=cdy)
    for i in range(5):
        args = (X, np.int64(i + 5), np.float64(0.07 * i + 0.1))
        _same_typed(f(*args), numpy_scalar_arithmetic(*args))
    if backend == "eager":
        assert cdy.frame_count == 1


def numpy_scalar_needs_numpy(x, t):
    return x + 1, np.sqrt(t), t.item(), t.dtype, str(t)


def test_numpy_function_of_a_dynamic_numpy_scalar_runs_in_python():
    """numpy functions and attributes of a numpy scalar input run in Python on the scalar
    (a graph break, once: the graph is not recompiled per value)."""
    cdy = CountingBackend()
    f = cdynamo.compile(numpy_scalar_needs_numpy, backend=cdy)
    for i in range(5):
        args = (X, np.int64(i + 2))
        _same_typed(f(*args), numpy_scalar_needs_numpy(*args))
    assert cdy.frame_count <= 2


def subdtype_of_array(x):
    a = x.numpy()
    return np.issubdtype(a.dtype, np.floating), a * 2


def test_array_dtype_is_a_constant():
    # torch._dynamo breaks on ndarray.dtype (0 graphs); cdynamo folds the dtype check
    cdy, reasons = run_np(subdtype_of_array, X, graphs=1, ops=2)
    assert not reasons


def ones_of_int_to_tensor(n, y):
    arr = np.stack([np.ones([2, n])], axis=0)
    t = torch.tensor(arr, dtype=torch.long)
    t.unsqueeze_(0)
    return t + y


def test_torch_tensor_of_array_with_a_dynamic_size_stays_in_one_graph():
    # PyTorch's test_graph_break_correctly_when_passing_numpy_ndarray_to_torch_function:
    # torch.tensor of a traced array is a copy in the graph (no break), and checking numpy's
    # result on the probe reads the sizes' hints, so the int n stays symbolic: 2 graphs for
    # 9 values of n, as torch._dynamo
    counts = {}
    for name, comp in (("dynamo", torch.compile), ("cdynamo", cdynamo.compile)):
        torch._dynamo.reset()
        cdynamo.reset()
        cnt = CountingBackend()
        f = comp(ones_of_int_to_tensor, backend=cnt)
        for n in range(1, 10):
            y = torch.randn(1, 2, n)
            ref, out = ones_of_int_to_tensor(n, y), f(n, y)
            assert out.dtype == ref.dtype and torch.equal(out, ref)
        counts[name] = cnt.frame_count
    assert counts["cdynamo"] == counts["dynamo"] == 2


def tensor_of_array_copies(x):
    a = x.numpy() * 2
    t = torch.tensor(a)
    a += 1                      # the copy does not see later writes into the array
    return t, torch.tensor(a, device="cpu", dtype=torch.float64)


def test_torch_tensor_of_array_is_a_copy_without_a_warning():
    import warnings
    cdy, reasons = run_np(tensor_of_array_copies, X, graphs=1)
    assert not reasons
    nodes = cdy.graphs[0].graph.nodes
    assert [n.target for n in nodes if n.op == "call_method"].count("to") == 2
    cdynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")    # torch.tensor(tensor) in the graph would warn
        out = cdynamo.compile(tensor_of_array_copies, backend="eager")(X.clone())
    assert_same_np(out, tensor_of_array_copies(X.clone()))
