"""Plain-Python versions of builtins and standard-library helpers, traced by cdynamo's engine.

When traced code calls a builtin or a library helper that has a polyfill here (``sorted``
with a key, ``map``, ``itertools.chain``, ``functools.reduce``, ``heapq.heappush``,
``copy.deepcopy``, ...), the engine inlines the polyfill instead, like any user function
(as torch._dynamo's ``polyfills`` package): the result is a graph of the torch operations
they perform and the Python values they compute, with no special case in the C engine.
Where the engine has an exact and cheaper C handler (``len``, ``isinstance``, ``zip`` over
sequences, ...) that handler runs first; pure builtins on constants are folded.

Each module registers its polyfills with :func:`substitute_for`; the engine reads
:func:`registry` once when it starts. Polyfills run only symbolically: in eager code (and in
resume functions after a graph break) the real builtins run.

A polyfill must behave as the real function does, laziness included: builtins that return
iterators (``map``, ``filter``, ``zip``, the ``itertools``) are generator functions, so items
are made on demand, in eager's order. What a polyfill cannot do exactly it refuses with
:func:`unsupported`, which makes the call a graph break (the real function then runs in
Python).
"""
import torch as _torch

_REGISTRY = {}

__all__ = ["substitute_for", "registry", "polyfill_of", "unsupported", "exact_type", "same",
           "is_symbolic", "force_static", "tensor_tolist", "match_class", "match_keys",
           "torch_function_dispatch", "call_with_parameters"]


def substitute_for(*reals, result_type=None):
    """Decorator: register the decorated function as the polyfill of each callable in reals.

    Args:
        reals: the real callables (functions, builtin functions or types) it replaces while
            tracing.
        result_type: a type the engine reports for the generator the polyfill returns (e.g.
            ``map`` for the polyfill of ``map``), so ``isinstance(m, map)`` holds as in eager.
    Returns the function unchanged. Raises ValueError when a callable already has one."""
    def register(fn):
        for real in reals:
            if real in _REGISTRY:
                raise ValueError(f"{real!r} already has a polyfill")
            _REGISTRY[real] = fn
        if result_type is not None:
            fn.__cdynamo_result_type__ = result_type
        return fn
    return register


def unsupported(reason):
    """Make the call of the polyfill that calls this a graph break, with `reason` (a str).

    Handled by the engine (values/polyfill.c); calling it outside a trace raises
    NotImplementedError."""
    raise NotImplementedError(reason)


def exact_type(x):
    """type(x), as the engine knows it while tracing (values/polyfill.c); in eager: type(x)."""
    return type(x)


def same(a, b):
    """``a is b`` for lists and dicts while tracing (values/polyfill.c); in eager: a is b."""
    return a is b


def is_symbolic(x):
    """True while tracing when x is a symbolic number (an int or float that dynamic shapes
    made a SymInt / SymFloat: its value differs between calls); False for every other value
    and always in eager (values/polyfill.c)."""
    return False


def force_static(x):
    """x, a symbolic number specialised to its value while tracing (the shape environment
    guards that value, as torch._dynamo's comptime.force_static; values/polyfill.c); any other
    value, and always in eager, as it is."""
    return x


def tensor_tolist(t):
    """t.tolist() traced with capture_scalar_outputs (values/tensor.c): the .item() of each
    element (unbacked symbols in the graph), nested as t's dimensions, as torch._dynamo does.
    A graph break when t is not of an integer dtype (as torch._dynamo), a size of t is
    symbolic or t has more than 1024 elements."""
    if t.is_floating_point() or t.is_complex() or t.dtype is _torch.bool:
        unsupported("Tensor.tolist() of a tensor not of an integer dtype")
    for s in t.shape:
        if is_symbolic(s):
            unsupported("Tensor.tolist() of a tensor of symbolic size")
    if t.numel() > 1024:
        unsupported("Tensor.tolist() of more than 1024 elements")
    if t.dim() == 0:
        return t.item()
    return [tensor_tolist(row) for row in t.unbind(0)]


def call_with_parameters(module, tensors, args, kwargs):
    """module(*args, **kwargs) with its parameters and buffers named in `tensors` (a dict:
    dotted name -> tensor) read as those tensors, as torch.func.functional_call.

    While tracing the engine runs it (values/polyfill.c): the module's forward is traced with
    those reads overridden (names tied to a given one follow it); the real module is never
    changed. In eager: torch.func.functional_call itself."""
    return _torch.func.functional_call(module, tensors, args, kwargs)


from .match import match_class, match_keys  # noqa: E402
from .torch_function import torch_function_dispatch  # noqa: E402

for _helper in (unsupported, exact_type, same, is_symbolic, force_static, call_with_parameters):
    _REGISTRY[_helper] = _helper


def polyfill_of(obj):
    """The polyfill the engine inlines for a call of obj (a function, builtin or type), or
    None (also for unhashable objects). Loads the polyfill modules on first use."""
    if not _LOADED:
        registry()
    try:
        return _REGISTRY.get(obj)
    except TypeError:
        return None


_LOADED = []


def registry():
    """The table ``{real callable: polyfill}``, every polyfill module loaded. The engine
    holds this very dict: add_substitute() changes what it traces."""
    from . import (bisect, builtins, collections, contextlib, copy, distributed,  # noqa: F401
                   functools, heapq, itertools, mathfns, operator, os, torch_function,
                   torchfns, tracebacks, typing)
    _LOADED.append(True)
    return _REGISTRY


def add_substitute(original, traceable) -> None:
    """Trace calls of ``original`` (a function, builtin or type) as calls of ``traceable``
    (a plain-Python function with the same signature and results), as
    torch._dynamo.substitute_in_graph(original)(traceable) registers it for torch._dynamo.
    Raises TypeError when original is unhashable."""
    registry()[original] = traceable
