"""Polyfills of operator: itemgetter, attrgetter, methodcaller (made while tracing; each
returns a function that does what the real object does when called)."""
import operator as _op

from . import substitute_for, unsupported


@substitute_for(_op.itemgetter)
def itemgetter(item, /, *items):
    """itemgetter(item, *items): obj[item], or the tuple of obj[i] for several items."""
    if not items:
        def get_one(obj):
            return obj[item]
        return get_one

    def get_many(obj):
        res = [obj[item]]
        for i in items:
            res.append(obj[i])
        return tuple(res)
    return get_many


def _resolve(obj, attr):
    for name in attr.split("."):
        obj = getattr(obj, name)
    return obj


@substitute_for(_op.attrgetter)
def attrgetter(attr, /, *attrs):
    """attrgetter(attr, *attrs): dotted names resolved one attribute at a time."""
    for a in (attr,) + attrs:
        if not isinstance(a, str):
            unsupported("operator.attrgetter() of a non-string")
    if not attrs:
        def get_one(obj):
            return _resolve(obj, attr)
        return get_one

    def get_many(obj):
        res = [_resolve(obj, attr)]
        for a in attrs:
            res.append(_resolve(obj, a))
        return tuple(res)
    return get_many


@substitute_for(_op.methodcaller)
def methodcaller(name, /, *args, **kwargs):
    """methodcaller(name, *args, **kwargs): obj.name(*args, **kwargs)."""
    if not isinstance(name, str):
        unsupported("operator.methodcaller() of a non-string")

    def call(obj):
        return getattr(obj, name)(*args, **kwargs)
    return call
