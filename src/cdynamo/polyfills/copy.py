"""Polyfills of copy: copy of Python containers and constants; deepcopy of those and of
plain Python objects (their __dict__ copied into a new instance).

Tensors, modules and other objects are left to Python (a graph break at the call): their
copies have identities and storage the trace cannot model."""
import collections as _collections
import copy as _copy
import copyreg as _copyreg
import types as _types

import torch as _torch

from . import exact_type, same, substitute_for, unsupported

_ATOMIC = (type(None), int, float, bool, complex, str, bytes, range, slice, type,
           _types.FunctionType, _types.BuiltinFunctionType, type(Ellipsis))


def _atomic(t):
    for a in _ATOMIC:
        if t is a:
            return True
    return False


@substitute_for(_copy.copy)
def copy(x):
    """copy.copy(x) of a list, dict, set, tuple, frozenset or constant; of an OrderedDict,
    defaultdict or Counter (their __copy__: a copy of their type, default_factory kept)."""
    t = exact_type(x)
    if t is list:
        return list(x)
    if t is dict:
        return {k: v for k, v in x.items()}
    if t is set:
        return set(x)
    if t is _collections.OrderedDict or t is _collections.defaultdict or t is _collections.Counter:
        return x.copy()
    if t is tuple or t is frozenset or _atomic(t):
        return x
    unsupported("copy.copy() of an object that is not a list, dict, tuple or constant")


def _deepcopy(x, memo):
    """(copy of x, whether it is a new object)."""
    t = exact_type(x)
    if _atomic(t):
        return x, False
    if t is list or t is dict:
        for orig, done in memo:
            if exact_type(orig) is t and same(orig, x):
                return done, True
        if t is list:
            y = []
            memo.append((x, y))
            for v in x:
                y.append(_deepcopy(v, memo)[0])
            return y, True
        y = {}
        memo.append((x, y))
        for k, v in x.items():
            y[_deepcopy(k, memo)[0]] = _deepcopy(v, memo)[0]
        return y, True
    if t is tuple:
        items = []
        changed = False
        for v in x:
            c, new = _deepcopy(v, memo)
            items.append(c)
            if new:
                changed = True
        if changed:
            return tuple(items), True
        return x, False
    if _plain_object_type(t):
        for orig, done in memo:
            if exact_type(orig) is t and orig is x:
                return done, True
        return _deepcopy_plain(x, t, memo), True
    if t is _torch_dtype:
        return x, False   # reduced to its name: the same object, as eager
    unsupported("copy.deepcopy() of an object that is not a container of constants")


_HEAPTYPE = 1 << 9
_torch_dtype = type(_torch.float32)


def _plain_object_type(t):
    """True when eager deepcopy copies instances of t through object.__reduce_ex__ alone:
    a class whose every class but object is a Python class (no C base such as dict or
    Exception), with no __slots__, no own copy or pickling hooks (__deepcopy__,
    __reduce_ex__, __reduce__, __getstate__, __setstate__, __getnewargs__[_ex__],
    copyreg.dispatch_table), object.__new__, and not a class itself."""
    if issubclass(t, type) or t in _copy._deepcopy_dispatch or t in _copyreg.dispatch_table:
        return False
    mro = t.__mro__
    if mro[-1] is not object or hasattr(t, "__slots__"):
        return False
    for c in mro[:-1]:
        if not c.__flags__ & _HEAPTYPE:
            return False
    return (t.__reduce_ex__ is object.__reduce_ex__ and t.__reduce__ is object.__reduce__ and
            t.__getstate__ is object.__getstate__ and t.__new__ is object.__new__ and
            getattr(t, "__deepcopy__", None) is None and
            getattr(t, "__setstate__", None) is None and
            getattr(t, "__getnewargs_ex__", None) is None and
            getattr(t, "__getnewargs__", None) is None)


def _deepcopy_plain(x, t, memo):
    """The copy eager makes of an instance of a _plain_object_type: a new instance (made
    with object.__new__, no __init__), memoised before its state, whose __dict__ is filled
    with a deep copy of x.__dict__ (bypassing __setattr__ and descriptors, as
    copy._reconstruct's y.__dict__.update)."""
    if getattr(x, "__deepcopy__", None) is not None:   # an instance attribute or __getattr__
        unsupported("copy.deepcopy() of an object with an instance __deepcopy__")
    y = t.__new__(t)
    memo.append((x, y))
    state = x.__dict__
    if state:
        ydict = y.__dict__
        for k, v in state.items():
            ydict[_deepcopy(k, memo)[0]] = _deepcopy(v, memo)[0]
    return y


@substitute_for(_copy.deepcopy)
def deepcopy(x, memo=None):
    """copy.deepcopy(x) of lists, dicts and tuples of constants and of plain Python objects
    (see _plain_object_type: copied as object.__reduce_ex__ and copy._reconstruct do, as
    torch._dynamo traces it); shared lists, dicts and objects stay shared in the copy, and a
    tuple of constants is returned as it is, as eager."""
    if memo is not None:
        unsupported("copy.deepcopy() with a memo")
    return _deepcopy(x, [])[0]
