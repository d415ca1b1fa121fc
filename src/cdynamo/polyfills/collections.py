"""Polyfills of collections helpers: _collections._count_elements (Counter's tally)."""
import collections.abc as _abc

from . import substitute_for

try:
    import _collections
except ImportError:  # pragma: no cover - CPython always has it
    _collections = None

if _collections is not None and hasattr(_collections, "_count_elements"):
    @substitute_for(_collections._count_elements)
    def _count_elements(mapping, iterable):
        """Tally the items of iterable into mapping (collections.Counter.update)."""
        for elem in iterable:
            mapping[elem] = mapping.get(elem, 0) + 1


def _sequence_iter(seq):
    i = 0
    while True:
        try:
            v = seq[i]
        except IndexError:
            return
        yield v
        i += 1


@substitute_for(_abc.Sequence.__iter__)
def sequence_iter(self):
    """iter() of a collections.abc.Sequence subclass without its own __iter__: items
    self[0], self[1], ... until self[i] raises IndexError, on demand, as
    Sequence.__iter__ (whose yield inside try the engine does not resume; here the try
    covers the subscript only: an IndexError thrown into the generator with throw()
    propagates instead of ending it)."""
    return _sequence_iter(self)
