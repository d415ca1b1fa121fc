"""Polyfills of functools: reduce.

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
