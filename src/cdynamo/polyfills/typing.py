"""Polyfills of typing's introspection helpers: ``typing.get_origin`` and ``typing.get_args``.

Libraries validate values against annotations while running (huggingface_hub's strict
dataclasses check every field assignment of a transformers config with them). The standard
library is never traced by cdynamo, so without these a call would be a graph break; here
they are the same tests as CPython 3.11's (isinstance checks against typing's alias classes
and reads of ``__origin__`` / ``__args__`` / ``__metadata__``), traced on the annotation
objects, as torch._dynamo inlines ``typing`` itself."""
import collections.abc as _cabc
import types as _types
import typing as _typing

from . import substitute_for, unsupported

_AnnotatedAlias = _typing._AnnotatedAlias
_BaseGenericAlias = _typing._BaseGenericAlias
_GenericAlias = _typing._GenericAlias


@substitute_for(_typing.get_origin)
def get_origin(tp):
    """typing.get_origin(tp): the unsubscripted form of an alias (``list`` for ``list[int]``,
    ``typing.Union`` for ``Optional[int]``, ``types.UnionType`` for ``int | None``), or
    None."""
    if isinstance(tp, _AnnotatedAlias):
        return _typing.Annotated
    if isinstance(tp, (_BaseGenericAlias, _types.GenericAlias,
                       _typing.ParamSpecArgs, _typing.ParamSpecKwargs)):
        return tp.__origin__
    if tp is _typing.Generic:
        return _typing.Generic
    if isinstance(tp, _types.UnionType):
        return _types.UnionType
    return None


@substitute_for(_typing.get_args)
def get_args(tp):
    """typing.get_args(tp): the arguments of an alias (``(int, NoneType)`` for
    ``Optional[int]``), or (). The argument list of a ``collections.abc.Callable`` alias,
    which CPython regroups, is left to Python (a graph break)."""
    if isinstance(tp, _AnnotatedAlias):
        return (tp.__origin__,) + tp.__metadata__
    if isinstance(tp, (_GenericAlias, _types.GenericAlias)):
        if tp.__origin__ is _cabc.Callable:
            unsupported("typing.get_args of a collections.abc.Callable alias")
        return tp.__args__
    if isinstance(tp, _types.UnionType):
        return tp.__args__
    return ()
