"""Polyfills of heapq: heappush, heappop, heapify, heappushpop, heapreplace, nlargest,
nsmallest. The heap algorithms compare with `<` only, in the same order as the C module, so
results (ties included) are eager's."""
import heapq as _hq

from . import substitute_for


def _siftdown(heap, startpos, pos):
    # move heap[pos] up towards startpos while it is smaller than its parent
    newitem = heap[pos]
    while pos > startpos:
        parentpos = (pos - 1) >> 1
        parent = heap[parentpos]
        if newitem < parent:
            heap[pos] = parent
            pos = parentpos
            continue
        break
    heap[pos] = newitem


def _siftup(heap, pos):
    # move the smaller child up until a leaf is reached, then sift the item down
    endpos = len(heap)
    startpos = pos
    newitem = heap[pos]
    childpos = 2 * pos + 1
    while childpos < endpos:
        rightpos = childpos + 1
        if rightpos < endpos and not heap[childpos] < heap[rightpos]:
            childpos = rightpos
        heap[pos] = heap[childpos]
        pos = childpos
        childpos = 2 * pos + 1
    heap[pos] = newitem
    _siftdown(heap, startpos, pos)


@substitute_for(_hq.heappush)
def heappush(heap, item, /):
    """heappush(heap, item)."""
    heap.append(item)
    _siftdown(heap, 0, len(heap) - 1)


@substitute_for(_hq.heappop)
def heappop(heap, /):
    """heappop(heap)."""
    lastelt = heap.pop()
    if heap:
        returnitem = heap[0]
        heap[0] = lastelt
        _siftup(heap, 0)
        return returnitem
    return lastelt


@substitute_for(_hq.heapreplace)
def heapreplace(heap, item, /):
    """heapreplace(heap, item): pop, then push."""
    returnitem = heap[0]
    heap[0] = item
    _siftup(heap, 0)
    return returnitem


@substitute_for(_hq.heappushpop)
def heappushpop(heap, item, /):
    """heappushpop(heap, item): push, then pop."""
    if heap and heap[0] < item:
        top = heap[0]
        heap[0] = item
        _siftup(heap, 0)
        return top
    return item


@substitute_for(_hq.heapify)
def heapify(x, /):
    """heapify(x), in place."""
    n = len(x)
    for i in range(n // 2 - 1, -1, -1):
        _siftup(x, i)


@substitute_for(_hq.nlargest)
def nlargest(n, iterable, key=None):
    """nlargest(n, iterable, key=None): documented as sorted(iterable, key=key,
    reverse=True)[:n]."""
    return sorted(iterable, key=key, reverse=True)[:n]


@substitute_for(_hq.nsmallest)
def nsmallest(n, iterable, key=None):
    """nsmallest(n, iterable, key=None): documented as sorted(iterable, key=key)[:n]."""
    return sorted(iterable, key=key)[:n]
