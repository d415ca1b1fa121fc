"""The ``match`` statement's class and mapping patterns (PEP 634), traced by the engine: its
MATCH_CLASS and MATCH_KEYS opcode handlers (translate.c) inline these
as CPython's ceval does the same work (Python/ceval.c match_class / match_keys): the same
results, attribute reads and TypeErrors. MATCH_MAPPING, MATCH_SEQUENCE and GET_LEN are
answered in C from the subject's type flags and length."""

_MISSING = object()

# builtin types whose one positional sub-pattern matches the subject itself (ceval's
# MATCH_SELF types), e.g. ``case int(n):``
_MATCH_SELF = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)


def _take(subject, cls, name, names, attrs):
    """Append subject.<name> to attrs (name to names): False when subject lacks it; raises
    TypeError for a name matched twice, as CPython."""
    if name in names:
        raise TypeError(f"{cls.__name__}() got multiple sub-patterns for attribute {name!r}")
    names.append(name)
    value = getattr(subject, name, _MISSING)
    if value is _MISSING:
        return False
    attrs.append(value)
    return True


def match_class(subject, cls, count, kw_names):
    """``case cls(<count positional>, **kw_names)``: the tuple of the matched attributes
    (positional first), or None when subject is not a cls or lacks one of them.

    Raises TypeError as CPython does: cls not a type, __match_args__ not a tuple or too
    short, a positional sub-pattern given to a class that takes none, an attribute named
    twice."""
    if not isinstance(cls, type):
        raise TypeError("called match pattern must be a class")
    if not isinstance(subject, cls):
        return None
    names = []
    attrs = []
    if count:
        match_args = getattr(cls, "__match_args__", _MISSING)
        if match_args is _MISSING:
            if issubclass(cls, _MATCH_SELF):
                if count > 1:
                    raise TypeError(f"{cls.__name__}() accepts 1 positional sub-pattern "
                                    f"({count} given)")
                attrs.append(subject)
                match_args = ()
            else:
                raise TypeError(f"{cls.__name__}() accepts 0 positional sub-patterns "
                                f"({count} given)")
        elif not isinstance(match_args, tuple):
            raise TypeError(f"{cls.__name__}.__match_args__ must be a tuple (got "
                            f"{type(match_args).__name__})")
        elif len(match_args) < count:
            raise TypeError(f"{cls.__name__}() accepts {len(match_args)} positional "
                            f"sub-pattern{'' if len(match_args) == 1 else 's'} ({count} given)")
        for k in range(min(count, len(match_args))):
            name = match_args[k]
            if not isinstance(name, str):
                raise TypeError(f"__match_args__ elements must be strings (got "
                                f"{type(name).__name__})")
            if not _take(subject, cls, name, names, attrs):
                return None
    for name in kw_names:
        if not _take(subject, cls, name, names, attrs):
            return None
    return tuple(attrs)


def match_keys(subject, keys):
    """``case {k1: ..., k2: ...}``: the tuple of subject's values for keys, or None when one
    is missing (read with subject.get(key, <missing>), as CPython). Raises ValueError for a
    key named twice."""
    if not keys:
        return ()
    seen = []
    values = []
    for key in keys:
        if key in seen:
            raise ValueError(f"mapping pattern checks duplicate key ({key!r})")
        seen.append(key)
        value = subject.get(key, _MISSING)
        if value is _MISSING:
            return None
        values.append(value)
    return tuple(values)

