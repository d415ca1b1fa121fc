"""Polyfills of functools: reduce, update_wrapper, wraps, cmp_to_key.

functools.partial is a value of the engine itself (values/function.c); lru_cache/cache
wrappers are called through their __wrapped__ function (the cache is bypassed while
tracing, as torch._dynamo does)."""
import functools as _ft

from . import substitute_for, unsupported


@substitute_for(_ft.reduce)
def reduce(function, iterable, *initial):
    """reduce(function, iterable[, initial]): left to right."""
    if len(initial) > 1:
        unsupported("functools.reduce() with too many arguments")
    it = iter(iterable)
    if initial:
        value = initial[0]
    else:
        for value in it:
            break
        else:
            unsupported("functools.reduce() of an empty iterable with no initial value")
    for x in it:
        value = function(value, x)
    return value


@substitute_for(_ft.update_wrapper)
def update_wrapper(wrapper, wrapped, assigned=_ft.WRAPPER_ASSIGNMENTS,
                   updated=_ft.WRAPPER_UPDATES):
    """functools.update_wrapper, as CPython's: wrapped's __module__, __name__, __qualname__,
    __doc__, __annotations__ (and __type_params__ on 3.12+) copied onto wrapper where
    wrapped has them, wrapped's __dict__ entries set on wrapper one by one (the engine keeps
    a traced function's attributes, not its __dict__), then wrapper.__wrapped__ = wrapped.
    Returns wrapper."""
    for attr in assigned:
        try:
            value = getattr(wrapped, attr)
        except AttributeError:
            pass
        else:
            setattr(wrapper, attr, value)
    for attr in updated:
        entries = getattr(wrapped, attr, None)
        if entries:
            for key in entries:
                setattr(wrapper, key, entries[key])
    wrapper.__wrapped__ = wrapped
    return wrapper


@substitute_for(_ft.wraps)
def wraps(wrapped, assigned=_ft.WRAPPER_ASSIGNMENTS, updated=_ft.WRAPPER_UPDATES):
    """functools.wraps(wrapped): a decorator applying update_wrapper (as CPython's, a
    functools.partial of it). Returns that partial."""
    return _ft.partial(update_wrapper, wrapped=wrapped, assigned=assigned, updated=updated)


class _CmpKey:
    """A key made by cmp_to_key: compares by calling the comparison function."""

    def __init__(self, cmp, obj):
        self.cmp = cmp
        self.obj = obj

    def __lt__(self, other):
        return self.cmp(self.obj, other.obj) < 0

    def __gt__(self, other):
        return self.cmp(self.obj, other.obj) > 0

    def __eq__(self, other):
        return self.cmp(self.obj, other.obj) == 0

    def __le__(self, other):
        return self.cmp(self.obj, other.obj) <= 0

    def __ge__(self, other):
        return self.cmp(self.obj, other.obj) >= 0

    __hash__ = None


class _CmpToKey:
    """What cmp_to_key returns: called on an item, its key."""

    def __init__(self, cmp):
        self.cmp = cmp

    def __call__(self, obj):
        return _CmpKey(self.cmp, obj)


@substitute_for(_ft.cmp_to_key)
def cmp_to_key(mycmp):
    """functools.cmp_to_key(mycmp): a key function whose keys compare through mycmp (as the
    functools module's pure-Python version)."""
    return _CmpToKey(mycmp)
