"""Polyfills of contextlib: the __enter__/__exit__ of contextlib.contextmanager's objects.

A ``with cm():`` over a ``@contextlib.contextmanager`` function is traced through
contextlib's own ``helper`` and ``_GeneratorContextManager.__init__`` (trace rule INLINE);
these two methods replace the real ones, which differ only in bookkeeping the engine does
not model (deleting ``args``/``kwds``/``func`` on entry, reattaching tracebacks). The
generator itself is the engine's (values/generator.c): ``next`` resumes it, ``throw``
raises into it at its ``yield``, so its ``finally``/``except`` run as in eager."""
import contextlib as _cl

from . import substitute_for


@substitute_for(_cl._GeneratorContextManager.__enter__)
def generator_cm_enter(self):
    """_GeneratorContextManager.__enter__: the generator's first item (its ``yield``).

    Raises RuntimeError when the generator returns without yielding, as contextlib."""
    try:
        return next(self.gen)
    except StopIteration:
        raise RuntimeError("generator didn't yield") from None


@substitute_for(_cl._GeneratorContextManager.__exit__)
def generator_cm_exit(self, typ, value, traceback):
    """_GeneratorContextManager.__exit__ (Python 3.11's logic): resumes the generator after
    its ``yield`` (no exception) or throws the exception into it there.

    Returns True when the generator swallowed the exception. Raises RuntimeError when the
    generator yields again, or what the generator raised instead, as contextlib."""
    if typ is None:
        try:
            next(self.gen)
        except StopIteration:
            return False
        raise RuntimeError("generator didn't stop")
    if value is None:
        value = typ()
    try:
        self.gen.throw(value)
    except StopIteration as exc:
        # the generator returned: swallowed, unless it was the StopIteration thrown in
        return not isinstance(value, StopIteration) or exc is not value
    except RuntimeError as exc:
        if exc is value:
            return False
        if isinstance(value, StopIteration) and exc.__cause__ is value:
            return False
        raise
    except BaseException as exc:
        if exc is not value:
            raise
        return False
    raise RuntimeError("generator didn't stop after throw()")

