"""Polyfills of os: os.fspath and reads of os.environ.

An environment variable read while tracing is a constant of the trace, guarded: the engine
reads it once (``environ_read``, values/builtin.c) and adds the guard
``GLOBAL_STATE os.getenv(key) == value``, so a later call with the variable changed, set or
unset recompiles (torch._dynamo reads it the same way but does not guard it). Writes
(``os.environ[k] = v``, ``putenv``) are not polyfilled: they are graph breaks and run in
Python."""
import os as _os

from . import substitute_for, unsupported


def environ_read(env, key, /):
    """The value of environment variable key (a str) in env (os.environ), or None when unset.

    While tracing the engine handles the call (values/builtin.c): key must be a constant str
    and env os.environ itself (guarded by identity); anything else is a graph break. In eager
    code: ``env.get(key)``."""
    return env.get(key)


@substitute_for(_os._Environ.__getitem__)
def environ_getitem(self, key):
    """os.environ[key] (and through it os.environ.get, ``key in os.environ``): KeyError when
    unset, as eager."""
    value = environ_read(self, key)
    if value is None:
        raise KeyError(key)
    return value


@substitute_for(_os.getenv)
def getenv(key, default=None):
    """os.getenv(key, default): the variable's value, or default when unset."""
    if not isinstance(key, str):
        unsupported("os.getenv of a non-str key")
    value = environ_read(_os.environ, key)
    return default if value is None else value


@substitute_for(_os.fspath)
def fspath(path):
    """os.fspath(path): path itself for a str or bytes, else ``type(path).__fspath__(path)``
    (pathlib's, inlined), which must return str or bytes; TypeError otherwise, with CPython's
    text."""
    if isinstance(path, (str, bytes)):
        return path
    path_type = type(path)
    try:
        method = path_type.__fspath__
    except AttributeError:
        raise TypeError("expected str, bytes or os.PathLike object, not "
                        + path_type.__name__) from None
    result = method(path)
    if isinstance(result, (str, bytes)):
        return result
    raise TypeError("expected " + path_type.__name__ + ".__fspath__() to return str or bytes, not "
                    + type(result).__name__)
