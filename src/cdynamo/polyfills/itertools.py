"""Polyfills of itertools: chain, chain.from_iterable, product, accumulate, islice,
zip_longest, count, repeat, cycle, combinations, permutations, groupby, starmap, takewhile,
dropwhile, filterfalse, compress, pairwise.

Each is a function that does at construction what the C type does at construction (iter()
of its arguments, or tuple() of the pools for product/combinations/permutations) and returns
a generator that makes the items on demand, consuming its inputs exactly as the C code does
(islice and zip_longest included), so iterators shared with other code are left where eager
leaves them."""
import itertools as _it

from . import substitute_for, unsupported


def _chain(iterables):
    for it in iterables:
        yield from it


@substitute_for(_it.chain, result_type=_it.chain)
def chain(*iterables):
    """chain(*iterables): each iterable opened when reached, as eager."""
    return _chain(iterables)


@substitute_for(_it.chain.from_iterable, result_type=_it.chain)
def chain_from_iterable(iterable, /):
    """chain.from_iterable(iterable)."""
    return _chain(iter(iterable))


def _product(pools):
    result = [()]
    for pool in pools:
        grown = []
        for prefix in result:
            for y in pool:
                grown.append(prefix + (y,))
        result = grown
    for prod in result:
        yield prod


@substitute_for(_it.product, result_type=_it.product)
def product(*iterables, repeat=1):
    """product(*iterables, repeat=1): the pools are read at construction, as eager."""
    if repeat < 0:
        unsupported("itertools.product() with a negative repeat")
    pools = []
    for _ in range(repeat):
        for p in iterables:
            pools.append(tuple(p))
    return _product(pools)


def _accumulate(it, func, initial):
    if initial is not None:
        total = initial
        yield total
    else:
        for total in it:
            yield total
            break
        else:
            return
    for x in it:
        total = total + x if func is None else func(total, x)
        yield total


@substitute_for(_it.accumulate, result_type=_it.accumulate)
def accumulate(iterable, func=None, *, initial=None):
    """accumulate(iterable, func=None, *, initial=None)."""
    return _accumulate(iter(iterable), func, initial)


def _islice(it, start, stop, step):
    # the C iterator's bookkeeping: cnt items consumed, nxt the index of the next one to
    # yield (items in between are consumed and dropped, up to stop)
    cnt = 0
    nxt = start
    while True:
        while cnt < nxt:
            for _ in it:
                break
            else:
                return
            cnt += 1
        if stop is not None and cnt >= stop:
            return
        for item in it:
            break
        else:
            return
        cnt += 1
        old = nxt
        nxt += step
        if nxt < old or (stop is not None and nxt > stop):
            nxt = stop
        yield item


@substitute_for(_it.islice, result_type=_it.islice)
def islice(iterable, /, *args):
    """islice(iterable, stop) / islice(iterable, start, stop[, step])."""
    if len(args) == 1:
        start, stop, step = 0, args[0], 1
    elif len(args) == 2:
        start, stop, step = args[0], args[1], 1
    elif len(args) == 3:
        start, stop, step = args[0], args[1], args[2]
    else:
        unsupported("itertools.islice() with a wrong number of arguments")
    if start is None:
        start = 0
    if step is None:
        step = 1
    if start < 0 or (stop is not None and stop < 0) or step < 1:
        unsupported("itertools.islice() with negative or zero bounds")
    return _islice(iter(iterable), start, stop, step)


def _zip_longest(its, fillvalue):
    n = len(its)
    if n == 0:
        return
    active = n
    done = []
    for _ in range(n):
        done.append(False)
    while True:
        items = []
        for i in range(n):
            if done[i]:
                items.append(fillvalue)
                continue
            for x in its[i]:
                items.append(x)
                break
            else:
                active -= 1
                if active == 0:
                    return
                done[i] = True
                items.append(fillvalue)
        yield tuple(items)


@substitute_for(_it.zip_longest, result_type=_it.zip_longest)
def zip_longest(*iterables, fillvalue=None):
    """zip_longest(*iterables, fillvalue=None)."""
    its = []
    for x in iterables:
        its.append(iter(x))
    return _zip_longest(its, fillvalue)


def _count(start, step):
    n = start
    while True:
        yield n
        n += step


@substitute_for(_it.count, result_type=_it.count)
def count(start=0, step=1):
    """count(start=0, step=1): infinite, made on demand."""
    return _count(start, step)


def _repeat(obj, times):
    if times is None:
        while True:
            yield obj
    else:
        for _ in range(times):
            yield obj


@substitute_for(_it.repeat, result_type=_it.repeat)
def repeat(object, times=None):
    """repeat(object[, times])."""
    return _repeat(object, times)


def _cycle(it):
    saved = []
    for x in it:
        yield x
        saved.append(x)
    if not saved:
        return
    while True:
        for x in saved:
            yield x


@substitute_for(_it.cycle, result_type=_it.cycle)
def cycle(iterable, /):
    """cycle(iterable)."""
    return _cycle(iter(iterable))


def _combinations(pool, r):
    n = len(pool)
    if r > n:
        return
    indices = list(range(r))
    yield tuple(pool[i] for i in indices)
    while True:
        for i in range(r - 1, -1, -1):
            if indices[i] != i + n - r:
                break
        else:
            return
        indices[i] += 1
        for j in range(i + 1, r):
            indices[j] = indices[j - 1] + 1
        yield tuple(pool[k] for k in indices)


@substitute_for(_it.combinations, result_type=_it.combinations)
def combinations(iterable, r):
    """combinations(iterable, r): the pool is read at construction."""
    if r < 0:
        unsupported("itertools.combinations() with a negative r")
    return _combinations(tuple(iterable), r)


def _permutations(pool, r):
    n = len(pool)
    if r > n:
        return
    indices = list(range(n))
    cycles = list(range(n, n - r, -1))
    yield tuple(pool[indices[k]] for k in range(r))
    while n:
        for i in range(r - 1, -1, -1):
            cycles[i] -= 1
            if cycles[i] == 0:
                first = indices[i]
                for k in range(i, n - 1):
                    indices[k] = indices[k + 1]
                indices[n - 1] = first
                cycles[i] = n - i
            else:
                j = n - cycles[i]
                tmp = indices[i]
                indices[i] = indices[j]
                indices[j] = tmp
                yield tuple(pool[indices[k]] for k in range(r))
                break
        else:
            return


@substitute_for(_it.permutations, result_type=_it.permutations)
def permutations(iterable, r=None):
    """permutations(iterable, r=None): the pool is read at construction."""
    pool = tuple(iterable)
    if r is None:
        r = len(pool)
    elif r < 0:
        unsupported("itertools.permutations() with a negative r")
    return _permutations(pool, r)


# groupby: the outer iterator and the group iterators share one state list
#   [state, current key, current value, group id]; state 0: no current value (fetch one),
#   1: a current value, 2: the input is exhausted. A group stops once the outer iterator
#   moved on (its id is stale) or the key changes, as the C groupby.

def _groupby_fetch(it, keyfunc, s):
    for v in it:
        s[1] = v if keyfunc is None else keyfunc(v)
        s[2] = v
        s[0] = 1
        return
    s[0] = 2


def _grouper(it, keyfunc, s, tgtkey, gid):
    while s[3] == gid:
        if s[0] == 0:
            _groupby_fetch(it, keyfunc, s)
        if s[0] != 1 or not (s[1] == tgtkey):
            return
        s[0] = 0
        yield s[2]


def _groupby(it, keyfunc):
    s = [0, None, None, 0]
    have_target = False
    tgtkey = None
    while True:
        s[3] += 1
        while True:
            if s[0] == 0:
                _groupby_fetch(it, keyfunc, s)
            if s[0] == 2:
                return
            if have_target and s[1] == tgtkey:
                s[0] = 0
                continue
            break
        tgtkey = s[1]
        have_target = True
        yield (tgtkey, _grouper(it, keyfunc, s, tgtkey, s[3]))


@substitute_for(_it.groupby, result_type=_it.groupby)
def groupby(iterable, key=None):
    """groupby(iterable, key=None): groups share the input iterator, as eager."""
    return _groupby(iter(iterable), key)


def _starmap(function, it):
    for args in it:
        yield function(*args)


@substitute_for(_it.starmap, result_type=_it.starmap)
def starmap(function, iterable, /):
    """starmap(function, iterable)."""
    return _starmap(function, iter(iterable))


def _takewhile(predicate, it):
    for x in it:
        if predicate(x):
            yield x
        else:
            return


@substitute_for(_it.takewhile, result_type=_it.takewhile)
def takewhile(predicate, iterable, /):
    """takewhile(predicate, iterable)."""
    return _takewhile(predicate, iter(iterable))


def _dropwhile(predicate, it):
    for x in it:
        if not predicate(x):
            yield x
            break
    for x in it:
        yield x


@substitute_for(_it.dropwhile, result_type=_it.dropwhile)
def dropwhile(predicate, iterable, /):
    """dropwhile(predicate, iterable)."""
    return _dropwhile(predicate, iter(iterable))


def _filterfalse(function, it):
    for x in it:
        if not (x if function is None else function(x)):
            yield x


@substitute_for(_it.filterfalse, result_type=_it.filterfalse)
def filterfalse(function, iterable, /):
    """filterfalse(function, iterable)."""
    return _filterfalse(function, iter(iterable))


def _compress(data, selectors):
    for d in data:
        for s in selectors:
            if s:
                yield d
            break
        else:
            return


@substitute_for(_it.compress, result_type=_it.compress)
def compress(data, selectors):
    """compress(data, selectors)."""
    return _compress(iter(data), iter(selectors))


def _pairwise(it):
    for a in it:
        break
    else:
        return
    for b in it:
        yield (a, b)
        a = b


@substitute_for(_it.pairwise, result_type=_it.pairwise)
def pairwise(iterable, /):
    """pairwise(iterable)."""
    return _pairwise(iter(iterable))
