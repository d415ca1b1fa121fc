"""NumPy glue for the C engine (internal): how numpy calls on traced tensors become graph ops.

The engine (src/cdynamo/csrc/values/ndarray.c) models a numpy.ndarray that a traced function
makes from a tensor (``x.numpy()``, ``np.asarray(x)``, a numpy function of one) as the tensor
that backs it, as torch.compile does: numpy functions, ndarray methods, attributes and operators
are recorded in the FX graph as calls of torch._numpy (NumPy's API written with torch ops), so
the graph takes and returns tensors. The callables recorded are the wrappers below: each turns
its tensor arguments into ``torch._numpy.ndarray`` where needed, calls torch._numpy, and turns
the ``torch._numpy.ndarray`` results back into tensors. When a traced ndarray leaves the graph
(returned, or live at a graph break), the generated code rebuilds it with ``to_numpy``.

Nothing here runs on a cache hit except the wrappers (inside compiled graphs) and
``to_numpy``.
"""
from __future__ import annotations

import math
import operator

import numpy as np
import torch

__all__ = ["tnp_counterpart", "is_random", "constant_collection", "holds_array",
           "NumpyFunction", "NumpyMethod", "NumpyOperator", "numpy_attr", "to_numpy",
           "numpy_refusal", "check_call", "method_caller", "ndarray_attribute",
           "tensor_of_array", "to_numpy_scalar", "scalar_type"]

_tnp = None


def _torch_numpy():
    """torch._numpy, imported on first use (it is not free to import)."""
    global _tnp
    if _tnp is None:
        import torch._numpy as tnp
        _tnp = tnp
    return _tnp


#: numpy functions a traced call never records: their effect is on numpy's own state.
_NOT_TRACED = {"seed", "get_state", "set_state", "default_rng", "RandomState", "Generator",
               "get_printoptions", "set_printoptions", "printoptions", "show_config",
               "seterr", "geterr", "errstate", "from_dlpack", "frombuffer", "fromfile",
               "fromiter", "fromstring", "load", "save", "savez", "loadtxt", "savetxt"}

_counterparts = None   # dict: id(numpy callable) -> (numpy callable, torch._numpy callable)


def _build_counterparts():
    tnp = _torch_numpy()
    pairs = [(np, tnp), (np.fft, tnp.fft), (np.linalg, tnp.linalg), (np.random, tnp.random)]
    table = {}
    for np_mod, tnp_mod in pairs:
        for name, tfn in vars(tnp_mod).items():
            if name.startswith("_") or name in _NOT_TRACED or isinstance(tfn, type) or \
                    not callable(tfn):
                continue
            nfn = getattr(np_mod, name, None)
            if nfn is None or isinstance(nfn, type) or not callable(nfn):
                continue
            table.setdefault(id(nfn), (nfn, tfn))
    return table


def tnp_counterpart(obj):
    """The torch._numpy function that stands for the numpy callable ``obj`` (a function of
    numpy, numpy.fft, numpy.linalg or numpy.random: a ufunc, a Python function, a bound method
    of numpy's global RandomState), or None. As torch._dynamo's numpy-to-torch._numpy map."""
    global _counterparts
    if _counterparts is None:
        _counterparts = _build_counterparts()
    hit = _counterparts.get(id(obj))
    if hit is None or hit[0] is not obj:
        return None
    return hit[1]


def is_random(tnp_fn):
    """True when ``tnp_fn`` is one of torch._numpy.random's functions (traced on torch's
    random stream, as torch.compile does by default)."""
    return getattr(tnp_fn, "__module__", "") == "torch._numpy.random"


def constant_collection(obj):
    """True for numpy.dtype, numpy.iinfo, numpy.finfo and numpy's scalar types (np.float32,
    ...): called with constants they are built at trace time (torch._dynamo folds dtype/iinfo/
    finfo the same way)."""
    return obj is np.dtype or obj is np.iinfo or obj is np.finfo or \
        (isinstance(obj, type) and issubclass(obj, np.generic))


def holds_array(obj):
    """True when obj (a numpy call's real result) is or contains a numpy.ndarray."""
    if isinstance(obj, np.ndarray):
        return True
    if isinstance(obj, (tuple, list)):
        return any(holds_array(o) for o in obj)
    return False


# ---- the callables recorded in graphs ------------------------------------------------------

def _to_tensors(out):
    """torch._numpy results -> tensors (through tuples and lists); other values unchanged."""
    tnp = _torch_numpy()
    if isinstance(out, tnp.ndarray):
        return out.tensor
    if isinstance(out, (tuple, list)):
        return type(out)(_to_tensors(o) for o in out)
    return out


def _as_ndarray(x):
    tnp = _torch_numpy()
    return tnp.ndarray(x) if isinstance(x, torch.Tensor) else x


class NumpyFunction:
    """A torch._numpy function as a graph target: tensors in, tensors out."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = "np_" + fn.__name__
        self.__qualname__ = self.__name__

    def __repr__(self):
        return f"<numpy {self.fn.__module__.replace('torch._numpy', 'numpy')}.{self.fn.__name__}>"

    def __call__(self, *args, **kwargs):
        return _to_tensors(self.fn(*args, **kwargs))


class NumpyMethod:
    """The ndarray method ``name`` as a graph target: its first argument (a tensor) is the
    array."""

    def __init__(self, name):
        self.method = name
        self.__name__ = "ndarray_" + name.strip("_")
        self.__qualname__ = self.__name__

    def __repr__(self):
        return f"<numpy ndarray.{self.method}>"

    def __call__(self, self_, *args, **kwargs):
        return _to_tensors(getattr(_as_ndarray(self_), self.method)(*args, **kwargs))


class NumpyOperator:
    """An operator (operator.add, operator.getitem, ...) applied to ndarrays, as a graph
    target: tensor arguments are arrays."""

    def __init__(self, op):
        self.op = op
        self.__name__ = "ndarray_" + op.__name__.strip("_")
        self.__qualname__ = self.__name__

    def __repr__(self):
        return f"<numpy operator {self.op.__name__}>"

    def __call__(self, *args):
        return _to_tensors(self.op(*[_as_ndarray(a) for a in args]))


def numpy_attr(t, name):
    """``getattr(ndarray, name)`` for the array backed by tensor t (a graph target)."""
    return _to_tensors(getattr(_as_ndarray(t), name))


_functions: dict = {}
_methods: dict = {}
_operators: dict = {}


def function_target(tnp_fn):
    """The (cached) NumpyFunction of a torch._numpy function."""
    w = _functions.get(tnp_fn)
    if w is None:
        w = _functions[tnp_fn] = NumpyFunction(tnp_fn)
    return w


def method_target(name):
    """The (cached) NumpyMethod for method ``name``."""
    w = _methods.get(name)
    if w is None:
        w = _methods[name] = NumpyMethod(name)
    return w


def operator_target(op):
    """The (cached) NumpyOperator of an operator function."""
    w = _operators.get(op)
    if w is None:
        w = _operators[op] = NumpyOperator(op)
    return w


def to_numpy(t):
    """Rebuild a traced ndarray from the tensor the graph returned for it (as torch.compile's
    generated code does): it shares the tensor's memory."""
    return t.numpy(force=True)


# ---- trace-time checks ---------------------------------------------------------------------

def numpy_refusal(fake):
    """Why ``Tensor.numpy()`` would raise in eager for a tensor like ``fake``, or None."""
    if fake.layout != torch.strided:
        return f"Tensor.numpy() of a {fake.layout} tensor raises"
    if fake.device.type != "cpu":
        return "Tensor.numpy() of a tensor not on the CPU raises"
    if fake.requires_grad:
        return "Tensor.numpy() of a tensor that requires grad raises"
    if fake.is_conj() or fake.is_neg():
        return "Tensor.numpy() of a tensor with the conjugate/negative bit raises"
    if numpy_dtype(fake.dtype) is None:
        return f"Tensor.numpy() of a {fake.dtype} tensor raises"
    return None


_np_dtypes: dict = {}


def numpy_dtype(torch_dtype):
    """The numpy dtype of tensors of torch_dtype after .numpy(), or None when it has none."""
    if torch_dtype not in _np_dtypes:
        try:
            _np_dtypes[torch_dtype] = torch.empty(0, dtype=torch_dtype).numpy().dtype
        except Exception:  # noqa: BLE001 - bfloat16 and others numpy cannot hold
            _np_dtypes[torch_dtype] = None
    return _np_dtypes[torch_dtype]


def ndarray_attribute(fake, name):
    """The value of the constant attribute ``name`` of the ndarray backed by ``fake`` (shape,
    strides in bytes, ndim, size, itemsize, nbytes, dtype as a numpy.dtype), as numpy gives
    it; raises AttributeError for other names."""
    if name == "shape":
        return tuple(int(s) for s in fake.shape)
    if name == "ndim":
        return fake.dim()
    if name == "size":
        return int(fake.numel())
    if name == "itemsize":
        return fake.element_size()
    if name == "nbytes":
        return int(fake.numel()) * fake.element_size()
    if name == "strides":
        return tuple(int(s) * fake.element_size() for s in fake.stride())
    if name == "dtype":
        d = numpy_dtype(fake.dtype)
        if d is None:
            raise AttributeError(name)
        return d
    raise AttributeError(name)


class _ArrayProbe:
    """Stands for a traced ndarray (or numpy scalar) among a check's arguments and results."""

    __slots__ = ("fake", "scalar")

    def __init__(self, fake, scalar):
        self.fake = fake
        self.scalar = scalar


def array_probe(fake, scalar=False):
    """A stand-in for a traced ndarray backed by ``fake`` (a numpy scalar when ``scalar``)."""
    return _ArrayProbe(fake, bool(scalar))


class _NoHint(Exception):
    """A symbolic value without a hint (unbacked): the probe cannot run."""


def _hint(v):
    """The value a symbolic int/float/bool has on this trace's example inputs, read from its
    hint, so that probing adds no guard (int(v) would specialise it); plain values as they
    are. Raises _NoHint for an unbacked value."""
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        h = v.node.hint
        if h is None:
            raise _NoHint
        return h
    return v


def _hint_shape(shape):
    return tuple(int(_hint(s)) for s in shape)


def _probe_value(x):
    if isinstance(x, _ArrayProbe):
        z = np.zeros(_hint_shape(x.fake.shape), dtype=numpy_dtype(x.fake.dtype))
        return z[()] if x.scalar else z
    if isinstance(x, torch.Tensor):
        if x.device.type != "cpu":
            raise TypeError("a tensor not on the CPU")
        t = torch.zeros(_hint_shape(x.shape), dtype=x.dtype)
        return t.requires_grad_(True) if x.requires_grad else t
    if isinstance(x, (tuple, list)):
        return type(x)(_probe_value(i) for i in x)
    return _hint(x)


class _MethodCaller:
    def __init__(self, name):
        self.name = self.__name__ = name

    def __call__(self, self_, *args, **kwargs):
        return getattr(self_, self.name)(*args, **kwargs)


_callers: dict = {}


def method_caller(name):
    """A callable c with c(arr, *args) == arr.<name>(*args) (what check_call runs for a
    method), cached."""
    c = _callers.get(name)
    if c is None:
        c = _callers[name] = _MethodCaller(name)
    return c


_PROBE_MAX_NUMEL = 1 << 22


def check_call(np_fn, args, kwargs, traced, strict):
    """Check a numpy call traced through torch._numpy against numpy itself, run now on zeros
    like the arguments (``_ArrayProbe`` for traced ndarrays and numpy scalars, fake tensors
    for tensors).

    ``traced`` is the traced result (an ``_ArrayProbe`` for each array, tuples/lists of them,
    constants). ``strict``: some arguments are tensors themselves, not ndarrays: numpy's own
    handling then differs by function (most convert them to arrays, some call a tensor method:
    np.sum(t) raises, np.reshape(t) gives a tensor; ufuncs give tensors back), so the call is
    traced only when numpy gives arrays.

    Returns a str reason when the traced call would differ from numpy's in structure, dtype
    or shape; else None, or, when numpy's result differs only in kind, a pair (container,
    scalars): numpy's container type for a tuple/list result (a tuple or named tuple where
    torch._numpy gives a list or a torch type; None when the same) and which results are numpy
    scalars where torch._numpy gives 0-d arrays (a bool for an array result, a tuple of bools
    for a container's items). Not strict, numpy raising on zeros (np.linalg.inv) or too large
    arguments leave the call trusted, as torch._dynamo trusts torch._numpy."""
    name = getattr(np_fn, "__name__", repr(np_fn))
    try:
        sizes = [math.prod(_hint_shape((a.fake if isinstance(a, _ArrayProbe) else a).shape))
                 for a in _flat(list(args) + list(kwargs.values()))
                 if isinstance(a, (torch.Tensor, _ArrayProbe))]
        probe_args = _probe_value(tuple(args))
        probe_kwargs = {k: _probe_value(v) for k, v in kwargs.items()}
    except _NoHint:   # unbacked sizes: trusted, as torch._dynamo trusts torch._numpy
        return None
    if sum(sizes) > _PROBE_MAX_NUMEL:
        return "numpy call on a large tensor (its eager result cannot be checked)" \
            if strict else None
    try:
        with np.errstate(all="ignore"):
            out = np_fn(*probe_args, **probe_kwargs)
    except Exception as e:  # noqa: BLE001 - raises here; on tensors: so does eager
        return f"numpy {name} on a tensor raises {type(e).__name__} in eager" if strict else None
    if strict and not all(isinstance(o, (np.ndarray, np.generic, int, float, bool, complex))
                          for o in _flat([out])):
        return f"numpy {name} on a tensor does not give an ndarray in eager"
    try:
        why = _mismatch(out, traced)
    except _NoHint:
        return None
    if why is not None:
        return f"torch._numpy's {name} differs from numpy's: {why}"
    container = None
    if isinstance(out, (tuple, list)) and type(out) is not type(traced):
        container = type(out)
    if isinstance(traced, _ArrayProbe):
        scalars = isinstance(out, np.generic)
    elif isinstance(traced, (tuple, list)):
        scalars = tuple(isinstance(t, _ArrayProbe) and isinstance(o, np.generic)
                        for o, t in zip(out, traced))
    else:
        scalars = False
    if container is None and not any(_flat([scalars])):
        return None
    return container, scalars


def _mismatch(eager, traced):
    """Why the traced result (see check_call) differs from numpy's, or None."""
    if isinstance(traced, _ArrayProbe):
        if not isinstance(eager, (np.ndarray, np.generic)):
            return f"{type(eager).__name__} where an array is traced"
        dt = numpy_dtype(traced.fake.dtype)
        if dt != eager.dtype:
            return f"dtype {dt} where numpy gives {eager.dtype}"
        if _hint_shape(traced.fake.shape) != tuple(np.shape(eager)):
            return f"shape {_hint_shape(traced.fake.shape)} where numpy gives {np.shape(eager)}"
        return None
    if isinstance(traced, (tuple, list)):
        if not isinstance(eager, (tuple, list)) or len(eager) != len(traced):
            return f"{type(eager).__name__} where a {type(traced).__name__} is traced"
        for e, t in zip(eager, traced):
            why = _mismatch(e, t)
            if why is not None:
                return why
    return None


def to_numpy_scalar(t):
    """Rebuild a traced numpy scalar (a 0-d tensor in the graph)."""
    return t.numpy(force=True)[()]


def scalar_type(torch_dtype):
    """The numpy scalar type of a traced numpy scalar of torch_dtype (np.float32, ...)."""
    return numpy_dtype(torch_dtype).type


def _flat(xs):
    for x in xs:
        if isinstance(x, (tuple, list)):
            yield from _flat(x)
        else:
            yield x


def tensor_of_array(arr):
    """The tensor sharing an input ndarray's memory (a graph input stands for the array as
    this tensor, as torch.compile passes numpy inputs), or None when torch cannot hold it
    (object or string arrays, negative strides) or the array is read-only (a graph may write
    into its inputs). Called by the guards of every call that uses such an input."""
    if type(arr) is not np.ndarray or not arr.flags.writeable:
        return None
    try:
        return torch.as_tensor(arr)
    except Exception:  # noqa: BLE001 - object arrays, strings, negative strides, ...
        return None


OPERATORS = (operator.getitem, operator.setitem)
