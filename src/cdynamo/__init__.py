"""cdynamo: a graph-capture JIT for PyTorch (TorchDynamo's job) whose engine is written in C.

    import torch, cdynamo
    opt = cdynamo.compile(model, backend="inductor")   # as torch.compile
    y = opt(x)   # first call: trace + compile; later calls: guard check in C, compiled code

Public: compile, reset, config, cache_entries, explain, graph_break, counters, reset_counters,
mark_dynamic, maybe_mark_dynamic, mark_static, assume_constant_result, CompiledModule,
CacheEntry, CompileOptions; install / uninstall / is_installed (torch.compile goes to
cdynamo: cdynamo._install); set_trace_dir (the structured trace: cdynamo._trace);
set_logs (logs by artifact, as torch._logging.set_logs: cdynamo._logging);
trace_rules (what is never traced).

Supported: CPython 3.11, 3.12 and 3.13; torch 2.13, 2.14 and 2.15 (see cdynamo._compat).
"""
import importlib as _importlib
import sys as _sys

SUPPORTED_PYTHONS = ((3, 11), (3, 12), (3, 13))


def _check_python(version_info):
    """Raise ImportError naming the supported versions when version_info (a sys.version_info
    or a (major, minor, ...) tuple) is no CPython cdynamo's engine supports: its bytecode
    layer and frame layout are those of 3.11 to 3.13 (3.14 would need its own tables)."""
    if tuple(version_info[:2]) not in SUPPORTED_PYTHONS:
        have = ".".join(str(p) for p in version_info[:3])
        raise ImportError(f"cdynamo supports CPython 3.11, 3.12 and 3.13, not Python {have}")


_check_python(_sys.version_info)

import torch as _torch  # first: the engine's module init looks torch up

from . import _compat
_compat.check_installed_torch()   # ImportError below torch 2.13; a warning above 2.15.x

from . import config
from . import trace_rules
from . import _api
from ._api import (CacheEntry, CompiledModule, CompileOptions, assume_constant_result,
                   cache_entries, compile, counters, explain, graph_break, mark_dynamic,
                   mark_static, maybe_mark_dynamic, reset, reset_counters)
from ._install import install, uninstall, is_installed
from ._trace import set_trace_dir
from ._logging import set_logs

__version__ = "0.1.0"
__all__ = ["compile", "reset", "config", "cache_entries", "explain", "graph_break", "counters",
           "reset_counters", "mark_dynamic", "maybe_mark_dynamic", "mark_static",
           "assume_constant_result", "CompiledModule", "CacheEntry", "CompileOptions",
           "install", "uninstall", "is_installed", "set_trace_dir", "set_logs"]


try:
    _C = _importlib.import_module("cdynamo._C")
except ImportError as _e:  # the engine is not built: the API raises a clear error when used
    _api._set_engine(None, _e)
else:
    _api._set_engine(_C, None)
    trace_rules._push()
    _C.set_cache_size_limit(config.cache_size_limit)
    _C.set_raise_internal_errors(config.raise_internal_errors)

from . import _logging
_logging.apply_env("CDYNAMO_LOGS")
