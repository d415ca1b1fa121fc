"""Polyfills of copy: copy and deepcopy of Python containers and constants.

Tensors, modules and other objects are left to Python (a graph break at the call): their
copies have identities and storage the trace cannot model."""
import copy as _copy
import types as _types

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
    """copy.copy(x) of a list, dict, tuple or constant."""
    t = exact_type(x)
    if t is list:
        return list(x)
    if t is dict:
        return {k: v for k, v in x.items()}
    if t is tuple or _atomic(t):
        return x
    unsupported("copy.copy() of an object that is not a list, dict, tuple or constant")


def _deepcopy(x, memo):
    """(copy of x, whether it is a new object)."""
    t = exact_type(x)
    if _atomic(t):
        return x, False
    if t is list or t is dict:
        for orig, done in memo:
            if same(orig, x):
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
    unsupported("copy.deepcopy() of an object that is not a container of constants")


@substitute_for(_copy.deepcopy)
def deepcopy(x, memo=None):
    """copy.deepcopy(x) of lists, dicts and tuples of constants (shared lists and dicts stay
    shared in the copy, and a tuple of constants is returned as it is, as eager)."""
    if memo is not None:
        unsupported("copy.deepcopy() with a memo")
    return _deepcopy(x, [])[0]
