"""Polyfills of bisect: bisect_left, bisect_right (bisect), insort_left, insort_right
(insort), with lo, hi and key as the C module takes them."""
import bisect as _bs

from . import substitute_for, unsupported


def _bounds(a, lo, hi):
    if lo < 0:
        unsupported("bisect with a negative lo")
    if hi is None:
        hi = len(a)
    return lo, hi


@substitute_for(_bs.bisect_right)
def bisect_right(a, x, lo=0, hi=None, *, key=None):
    """bisect_right(a, x, lo=0, hi=None, *, key=None): compares with `<` as the C module."""
    lo, hi = _bounds(a, lo, hi)
    while lo < hi:
        mid = (lo + hi) // 2
        if x < (a[mid] if key is None else key(a[mid])):
            hi = mid
        else:
            lo = mid + 1
    return lo


@substitute_for(_bs.bisect_left)
def bisect_left(a, x, lo=0, hi=None, *, key=None):
    """bisect_left(a, x, lo=0, hi=None, *, key=None)."""
    lo, hi = _bounds(a, lo, hi)
    while lo < hi:
        mid = (lo + hi) // 2
        if (a[mid] if key is None else key(a[mid])) < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@substitute_for(_bs.insort_right)
def insort_right(a, x, lo=0, hi=None, *, key=None):
    """insort_right(a, x, lo=0, hi=None, *, key=None): a.insert at bisect_right."""
    i = bisect_right(a, x if key is None else key(x), lo, hi, key=key)
    a.insert(i, x)


@substitute_for(_bs.insort_left)
def insort_left(a, x, lo=0, hi=None, *, key=None):
    """insort_left(a, x, lo=0, hi=None, *, key=None): a.insert at bisect_left."""
    i = bisect_left(a, x if key is None else key(x), lo, hi, key=key)
    a.insert(i, x)
