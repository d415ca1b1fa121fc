"""cdynamo's settings: ``cdynamo.config.<name>``.

  output_code       bool, default False (True when the environment has CDYNAMO_OUTPUT_CODE=1).
                    Print, per compiled frame, the FX graph as a table, ORIGINAL BYTECODE,
                    MODIFIED BYTECODE and GUARDS (as torch._dynamo.config.output_code).
  cache_size_limit  int >= 1, default 8. Cache entries per code object; past it the frame runs
                    without compiling (as torch._dynamo.config.cache_size_limit). As
                    torch._dynamo's recompile_limit, a frame counts only the entries whose
                    ID_MATCH guards on its arguments (a class, a function) name the objects it
                    was called with, and every code object stops at 256 entries in all
                    (torch._dynamo's accumulated_recompile_limit).
  verbose           bool, default False (True with CDYNAMO_VERBOSE=1). Sets the "cdynamo"
                    logger to DEBUG and gives it a stderr handler if it has none.
  raise_internal_errors
                    bool, default False (True with CDYNAMO_RAISE_INTERNAL_ERRORS=1). An
                    internal error of cdynamo while translating a frame raises instead of
                    making the frame run unmodified with a WARNING (the test suite sets it).
  trace_numpy       bool, default True. NumPy calls on tensors (x.numpy(), np.* on the
                    result, numpy input arrays) are traced as torch ops through torch._numpy
                    (as torch._dynamo.config.trace_numpy); False makes them graph breaks.
                    Read while tracing: call cdynamo.reset() after changing it.
  capture_scalar_outputs
                    bool, default False (True with CDYNAMO_CAPTURE_SCALAR_OUTPUTS=1). As
                    torch._dynamo.config.capture_scalar_outputs: ``tensor.item()`` is put in
                    the graph as an unbacked symbolic scalar instead of being a graph break;
                    a branch on its value is still a graph break. Read when a frame is traced.
                    Also on while torch._dynamo.config.capture_scalar_outputs is True (a
                    program or test written for torch.compile that patches torch's setting).
  graph_break_in_loops
                    bool, default True. A graph break inside a for/while loop of a compiled
                    frame breaks there like any other: the graph so far is compiled, the
                    instruction runs in Python, and the loop goes on in resume functions, one
                    iteration per call (called through a trampoline, so a long loop does not
                    nest calls). False skips the whole frame there, as torch._dynamo does
                    ("graph break in a for/while loop"). Read when a frame is traced.

  error_on_recompile
                    bool, default False. A recompile (a cache entry's guards failed and the
                    frame is compiled again) raises torch._dynamo.exc.RecompileError from the
                    call instead, naming the function and the guard that failed (as
                    torch._dynamo.config.error_on_recompile, which is honoured too).

  regional_compile
                    "auto" (default), "annotated" or "off"; CDYNAMO_REGIONAL_COMPILE sets the
                    default. Regional compilation (cdynamo/_regions.py): the calls of a
                    function marked with torch.compiler.nested_compile_region become
                    invoke_subgraph calls of one subgraph per distinct body (as torch.compile
                    does) in "auto" and "annotated"; "auto" also does it, without annotations,
                    for the repeated nn.Module calls of a frame (the layers of a ModuleList)
                    when the backend is "inductor" or "aot_eager" and no autograd goes
                    through them (inference), so each distinct block is compiled once. "off" inlines every call. Read when a graph is compiled.

  optimize_ddp      bool, default True (as torch._dynamo.config.optimize_ddp). A graph compiled
                    while a torch.nn.parallel.DistributedDataParallel module runs its forward
                    is split at DDP's gradient-bucket boundaries (cdynamo/_distributed.py), each
                    piece compiled by the user's backend, so each bucket's all-reduce starts
                    while the rest of the backward runs. Read when a graph is compiled.

  error_on_graph_break
                    bool, default False. A graph break (or a frame that cannot be captured)
                    raises instead of falling back to Python, as fullgraph=True does but for
                    every compiled function (as torch._dynamo.config.error_on_graph_break; the
                    context manager / decorator torch._dynamo.error_on_graph_break(flag) sets
                    it for a region, also inside compiled code). Read when a frame is traced.

Assigning any other public name raises AttributeError naming the valid ones. ``config.patch``
sets values for the duration of a with-block.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import types

_NAMES = ("output_code", "cache_size_limit", "verbose", "raise_internal_errors", "trace_numpy",
          "capture_scalar_outputs", "graph_break_in_loops", "error_on_recompile",
          "regional_compile", "optimize_ddp", "error_on_graph_break")
_REGIONAL_MODES = ("auto", "annotated", "off")
_log = logging.getLogger("cdynamo")
_handler = None


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "") == "1"


def _push_cache_size_limit(n: int) -> None:
    """Hand the limit to the engine; a no-op while the engine is not importable."""
    engine = sys.modules.get("cdynamo._C")
    if engine is not None:
        engine.set_cache_size_limit(n)


def _push_raise_internal_errors(on: bool) -> None:
    """Hand the setting to the engine; a no-op while the engine is not importable."""
    engine = sys.modules.get("cdynamo._C")
    if engine is not None:
        engine.set_raise_internal_errors(on)


def _apply_verbose(on: bool) -> None:
    global _handler
    if on:
        _log.setLevel(logging.DEBUG)
        if not _log.handlers:
            _handler = logging.StreamHandler()
            _handler.setFormatter(logging.Formatter("[%(asctime)s] %(name)s: [%(levelname)s] %(message)s"))
            _log.addHandler(_handler)
    else:
        _log.setLevel(logging.NOTSET)
        if _handler is not None:
            _log.removeHandler(_handler)
            _handler = None


def _validate(name: str, value):
    if name in ("output_code", "verbose", "raise_internal_errors", "trace_numpy",
                "capture_scalar_outputs", "graph_break_in_loops", "error_on_recompile",
                "optimize_ddp", "error_on_graph_break"):
        if not isinstance(value, bool):
            raise TypeError(f"cdynamo.config.{name} must be a bool, got {type(value).__name__}")
        return value
    if name == "cache_size_limit":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"cdynamo.config.cache_size_limit must be an int, got {type(value).__name__}")
        if value < 1:
            raise ValueError(f"cdynamo.config.cache_size_limit must be >= 1, got {value}")
        return value
    if name == "regional_compile":
        if value not in _REGIONAL_MODES:
            raise ValueError(f"cdynamo.config.regional_compile must be one of "
                             f"{', '.join(repr(m) for m in _REGIONAL_MODES)}, got {value!r}")
        return value
    raise AttributeError(name)


class _ConfigModule(types.ModuleType):
    """The config module's class: validates assignments to the public settings."""

    def __setattr__(self, name, value):
        if name.startswith("_"):
            super().__setattr__(name, value)
            return
        if name not in _NAMES:
            raise AttributeError(
                f"cdynamo.config has no setting {name!r}; valid settings: {', '.join(_NAMES)}")
        value = _validate(name, value)
        if name == "cache_size_limit":
            _push_cache_size_limit(value)
        elif name == "raise_internal_errors":
            _push_raise_internal_errors(value)
        elif name == "verbose":
            _apply_verbose(value)
        super().__setattr__(name, value)

    def __delattr__(self, name):
        raise AttributeError(f"cdynamo.config settings cannot be deleted ({name!r})")

    def as_dict(self) -> dict:
        """The current settings, {name: value}."""
        return {n: getattr(self, n) for n in _NAMES}

    @contextlib.contextmanager
    def patch(self, **changes):
        """Set settings for the duration of a with-block, then restore them.

        Raises AttributeError for an unknown name and TypeError/ValueError for a bad value
        (before anything is changed)."""
        for name, value in changes.items():
            if name not in _NAMES:
                raise AttributeError(
                    f"cdynamo.config has no setting {name!r}; valid settings: {', '.join(_NAMES)}")
            _validate(name, value)
        saved = {n: getattr(self, n) for n in changes}
        try:
            for name, value in changes.items():
                setattr(self, name, value)
            yield self
        finally:
            for name, value in saved.items():
                setattr(self, name, value)


output_code: bool = _env_flag("CDYNAMO_OUTPUT_CODE")
cache_size_limit: int = 8
verbose: bool = _env_flag("CDYNAMO_VERBOSE")
raise_internal_errors: bool = _env_flag("CDYNAMO_RAISE_INTERNAL_ERRORS")
trace_numpy: bool = True
capture_scalar_outputs: bool = _env_flag("CDYNAMO_CAPTURE_SCALAR_OUTPUTS")
graph_break_in_loops: bool = True
error_on_recompile: bool = False
regional_compile: str = _validate("regional_compile",
                                  os.environ.get("CDYNAMO_REGIONAL_COMPILE", "auto"))

optimize_ddp: bool = True
error_on_graph_break: bool = False

sys.modules[__name__].__class__ = _ConfigModule
if verbose:
    _apply_verbose(True)
