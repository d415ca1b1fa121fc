"""Polyfills of collections helpers: _collections._count_elements (Counter's tally)."""

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
