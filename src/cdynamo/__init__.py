"""cdynamo: a graph-capture JIT for PyTorch (TorchDynamo's job) whose engine is written in C.

    import torch, cdynamo
    opt = cdynamo.compile(model, backend="inductor")   # as torch.compile
    y = opt(x)   # first call: trace + compile; later calls: guard check in C, compiled code

Public: compile, reset, config, cache_entries, explain, graph_break, counters, reset_counters,
CompiledModule, CacheEntry, CompileOptions.
"""
import importlib as _importlib
import os as _os
import sysconfig as _sysconfig
import sys as _sys

import torch as _torch  # first: the engine's module init looks torch up

from . import config
from . import _api
from ._api import (CacheEntry, CompiledModule, CompileOptions, cache_entries, compile, counters,
                   explain, graph_break, reset, reset_counters)

__version__ = "0.1.0"
__all__ = ["compile", "reset", "config", "cache_entries", "explain", "graph_break", "counters",
           "reset_counters", "CompiledModule", "CacheEntry", "CompileOptions"]


def _stdlib_prefixes():
    """Path prefixes of the standard library, without any site-packages inside it.

    The stdlib directories come from sysconfig with the base (not the venv) prefixes. A
    site-packages may sit inside the stdlib directory (a non-venv install), so the prefixes
    are its entries one by one, leaving site-packages and dist-packages out. Frozen stdlib
    modules have file names "<frozen os>" and are covered by "<frozen "."""
    base_vars = {"base": _sys.base_prefix, "platbase": _sys.base_exec_prefix,
                 "installed_base": _sys.base_prefix, "installed_platbase": _sys.base_exec_prefix}
    dirs = []
    for key in ("stdlib", "platstdlib"):
        d = _sysconfig.get_path(key, vars=base_vars)
        if d and _os.path.isdir(d) and d not in dirs:
            dirs.append(d)
    prefixes = ["<frozen "]
    for d in dirs:
        for entry in sorted(_os.listdir(d)):
            if entry in ("site-packages", "dist-packages"):
                continue
            path = _os.path.join(d, entry)
            prefixes.append(path + _os.sep if _os.path.isdir(path) else path)
    return prefixes


def _skip_prefixes():
    torch_dir = _os.path.dirname(_torch.__file__) + _os.sep
    own_dir = _os.path.dirname(_os.path.abspath(__file__)) + _os.sep
    return tuple(_stdlib_prefixes() + [torch_dir, own_dir])


try:
    _C = _importlib.import_module("cdynamo._C")
except ImportError as _e:  # the engine is not built: the API raises a clear error when used
    _api._set_engine(None, _e)
else:
    _api._set_engine(_C, None)
    _C.set_skip_prefixes(_skip_prefixes())
    _C.set_cache_size_limit(config.cache_size_limit)
    _C.set_raise_internal_errors(config.raise_internal_errors)
