"""Polyfills of math: prod (over sizes, e.g. math.prod(x.shape), it stays symbolic with
dynamic shapes, as torch._dynamo's inlined math.prod)."""
import math as _m

from . import substitute_for


@substitute_for(_m.prod)
def prod(iterable, /, *, start=1):
    """math.prod(): start times every item, left to right, as eager."""
    r = start
    for x in iterable:
        r = r * x
    return r
