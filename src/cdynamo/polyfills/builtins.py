"""Polyfills of builtins: all, any, map, filter, zip, enumerate, reversed, sorted, min, max,
vars, sum.

The names defined here shadow the builtins inside this module only; a polyfill that needs
the real builtin (which the engine then treats as usual) reaches it through ``_b``."""
import builtins as _b

from . import is_symbolic, substitute_for, unsupported

_DICT_LIKE = (dict, type({}.keys()), type({}.values()), type({}.items()))


@substitute_for(_b.all)
def all(iterable, /):
    """all(): stops at the first false item, as eager."""
    for x in iterable:
        if not x:
            return False
    return True


@substitute_for(_b.any)
def any(iterable, /):
    """any(): stops at the first true item, as eager."""
    for x in iterable:
        if x:
            return True
    return False


def _map_one(func, it):
    for x in it:
        yield func(x)


def _map_many(func, its):
    while True:
        args = []
        for it in its:
            for x in it:
                args.append(x)
                break
            else:
                return
        yield func(*args)


@substitute_for(_b.map, result_type=_b.map)
def map(func, iterable, /, *iterables):
    """map(): the iterators are made now, the items on demand."""
    if not iterables:
        return _map_one(func, iter(iterable))
    its = [iter(iterable)]
    for x in iterables:
        its.append(iter(x))
    return _map_many(func, its)


def _filter(function, it):
    if function is None:
        for x in it:
            if x:
                yield x
    else:
        for x in it:
            if function(x):
                yield x


@substitute_for(_b.filter, result_type=_b.filter)
def filter(function, iterable, /):
    """filter(): items tested on demand."""
    return _filter(function, iter(iterable))


def _zip(its, strict):
    n = len(its)
    while True:
        items = []
        for i in range(n):
            for x in its[i]:
                items.append(x)
                break
            else:
                if strict:
                    if i > 0:
                        unsupported("zip(strict=True): an argument is shorter than another")
                    for j in range(1, n):
                        for _ in its[j]:
                            unsupported("zip(strict=True): an argument is longer than another")
                return
        yield tuple(items)


@substitute_for(_b.zip, result_type=_b.zip)
def zip(*iterables, strict=False):
    """zip(): items pulled from each iterator in turn, stopping at the first exhausted one
    (eager's order, so iterators passed in are left where eager leaves them)."""
    its = []
    for x in iterables:
        its.append(iter(x))
    return _zip(its, strict)


def _enumerate(it, start):
    n = start
    for x in it:
        yield (n, x)
        n += 1


@substitute_for(_b.enumerate, result_type=_b.enumerate)
def enumerate(iterable, start=0):
    """enumerate(iterable, start=0)."""
    return _enumerate(iter(iterable), start)


def _reversed(seq, n):
    for i in range(n - 1, -1, -1):
        yield seq[i]


@substitute_for(_b.reversed)
def reversed(seq, /):
    """reversed() of a list, tuple, range, str, dict or dict view; anything else (objects
    with __reversed__) is left to Python."""
    if isinstance(seq, _DICT_LIKE):
        seq = list(seq)
    elif not isinstance(seq, (list, tuple, range, str)):
        unsupported("reversed() of an object that is not a list, tuple, range, str or dict")
    return _reversed(seq, len(seq))


def _merge_sort(keys, reverse):
    """Indices of keys in sorted order: a stable bottom-up merge sort that compares with `<`
    only (as list.sort); reverse keeps equal items in their original order, as eager."""
    n = len(keys)
    order = list(range(n))
    width = 1
    while width < n:
        merged = []
        for lo in range(0, n, 2 * width):
            mid = lo + width
            if mid > n:
                mid = n
            hi = lo + 2 * width
            if hi > n:
                hi = n
            i = lo
            j = mid
            while i < mid and j < hi:
                a = order[i]
                b = order[j]
                if reverse:
                    take_right = keys[a] < keys[b]
                else:
                    take_right = keys[b] < keys[a]
                if take_right:
                    merged.append(b)
                    j += 1
                else:
                    merged.append(a)
                    i += 1
            while i < mid:
                merged.append(order[i])
                i += 1
            while j < hi:
                merged.append(order[j])
                j += 1
        order = merged
        width *= 2
    return order


@substitute_for(_b.sorted)
def sorted(iterable, /, *, key=None, reverse=False):
    """sorted(iterable, key=None, reverse=False): stable; key called once per item, in order."""
    items = list(iterable)
    if key is None:
        keys = items
    else:
        keys = [key(x) for x in items]
    for k in keys:
        if is_symbolic(k):
            # as torch._dynamo: a graph break, not a guard on the order of sizes
            unsupported("sort with symbolic keys (a SymInt or SymFloat)")
    order = _merge_sort(keys, reverse)
    return [items[i] for i in order]


def _is_tensor(x):
    import torch
    return isinstance(x, torch.Tensor)


def _extreme(name, is_max, args, key, kwargs):
    has_default = "default" in kwargs
    if len(kwargs) > (1 if has_default else 0):
        unsupported(f"{name}() with an unexpected keyword argument")
    if len(args) == 1:
        it = args[0]
    elif len(args) == 0:
        unsupported(f"{name}() with no arguments")
    else:
        if has_default:
            unsupported(f"{name}() with several arguments and a default")
        it = args
    found = False
    best = None
    best_key = None
    for x in it:
        k = x if key is None else key(x)
        if not found:
            found = True
            best = x
            best_key = k
        elif key is None and (_is_tensor(x) or _is_tensor(best)):
            # the two-argument form on a tensor: torch.maximum / torch.minimum (or clamp
            # with a number), as torch._dynamo reduces max()/min() of tensors
            best = _b.max(best, x) if is_max else _b.min(best, x)
            best_key = best
        elif (k > best_key) if is_max else (k < best_key):
            best = x
            best_key = k
    if not found:
        if has_default:
            return kwargs["default"]
        unsupported(f"{name}() of an empty sequence")
    return best


@substitute_for(_b.max)
def max(*args, key=None, **kwargs):
    """max(iterable, *, key=None[, default]) / max(a, b, *c, key=None): the first maximal
    item, as eager."""
    return _extreme("max", True, args, key, kwargs)


@substitute_for(_b.min)
def min(*args, key=None, **kwargs):
    """min(iterable, *, key=None[, default]) / min(a, b, *c, key=None): the first minimal
    item, as eager."""
    return _extreme("min", False, args, key, kwargs)


@substitute_for(_b.vars)
def vars(*args):
    """vars(obj): obj.__dict__ (the live dict; a class's mappingproxy). vars() without an
    argument (the caller's locals) is left to Python."""
    if len(args) != 1:
        unsupported("vars() without exactly one argument")
    return args[0].__dict__


@substitute_for(_b.sum)
def sum(iterable, /, start=0):
    """sum(iterable, start=0): start + each item, left to right."""
    total = start
    for x in iterable:
        total = total + x
    return total
