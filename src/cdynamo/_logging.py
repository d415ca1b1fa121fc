"""Logs by artifact, as torch's TORCH_LOGS: ``CDYNAMO_LOGS="graph_breaks,recompiles,+cdynamo"``
in the environment, or ``cdynamo.set_logs(graph_breaks=True, ...)`` (as
``torch._logging.set_logs``).

Every artifact is a child logger of ``cdynamo`` (``cdynamo.graph_breaks``, ...) that cdynamo
writes at DEBUG, so Python's logging configuration works as usual: an artifact is shown when
its logger is enabled for DEBUG and a handler sees the record (set_logs turns the logger on
and gives ``cdynamo`` one stderr handler; a program may instead configure the loggers itself).
Nothing is formatted for an artifact that is off (one isEnabledFor per event, at compile
time only).

``+cdynamo`` sets the ``cdynamo`` logger to DEBUG (every trace step the engine logs),
``-cdynamo`` to ERROR; ``cdynamo`` alone to INFO (breaks, recompiles, frames run unmodified).
With cdynamo installed (cdynamo.install()), TORCH_LOGS and torch._logging.set_logs set the
artifacts cdynamo shares with torch as well, and the ones cdynamo does not produce
(``output_code``, Inductor's generated code, ``perf_hints``, ...) stay torch's.
"""
from __future__ import annotations

import logging
import os

#: artifact name -> what it shows (torch's artifact names)
ARTIFACTS = {
    "graph_breaks": "each graph break: catalogue code, reason, the user's source line with a "
                    "caret, the user stack, and the hint",
    "recompiles": "each recompile: the function and the guard that failed",
    "recompiles_verbose": "each recompile with every cache entry's failed guard",
    "guards": "the guards of each new cache entry",
    "graph_code": "the Python code of each FX graph handed to the backend",
    "graph": "each FX graph as a table of nodes",
    "bytecode": "the original and transformed bytecode of each compiled frame (and resume "
                "functions)",
    "dynamic": "dynamic-shape decisions: which input dims and ints are symbolic, and why",
    "output_code": "the code the backend generated (Inductor's output_code, logged by torch)",
    "perf_hints": "what costs time: frames run unmodified, cache_size_limit reached, and "
                  "Inductor's own perf hints",
}
#: artifacts whose records torch writes (cdynamo turns torch's artifact on with them)
TORCH_ARTIFACTS = ("output_code", "perf_hints")

_ROOT = logging.getLogger("cdynamo")
_handler = None


def get_artifact_logger(name: str) -> logging.Logger:
    """The logger of artifact ``name`` (a key of ARTIFACTS): ``cdynamo.<name>``."""
    if name not in ARTIFACTS:
        raise ValueError(f"cdynamo: unknown log artifact {name!r}; valid artifacts: "
                         f"{', '.join(ARTIFACTS)}")
    return logging.getLogger(f"cdynamo.{name}")


_LOGGERS = {name: logging.getLogger(f"cdynamo.{name}") for name in ARTIFACTS}


def enabled(name: str) -> bool:
    """Whether artifact ``name`` would be shown (its logger is enabled for DEBUG)."""
    return _LOGGERS[name].isEnabledFor(logging.DEBUG)


def log(name: str, msg: str, *args) -> None:
    """Write one record of artifact ``name`` (DEBUG on its logger)."""
    _LOGGERS[name].debug(msg, *args)


def _ensure_handler() -> None:
    global _handler
    if _handler is None:
        _handler = logging.StreamHandler()
        _handler.setFormatter(logging.Formatter(
            "[%(asctime)s] %(name)s: [%(levelname)s] %(message)s"))
        _ROOT.addHandler(_handler)


def _level_of(value) -> int | None:
    if value is None or value is False:
        return None
    if value is True:
        return logging.INFO
    if isinstance(value, int):
        return value
    raise TypeError(f"cdynamo.set_logs: cdynamo= takes a logging level (int) or None, "
                    f"got {value!r}")


def set_logs(*, cdynamo: int | None = None, **artifacts: bool) -> None:
    """Choose what cdynamo logs, as torch._logging.set_logs.

    Args:
        cdynamo: the level (int, e.g. logging.DEBUG) of the ``cdynamo`` logger, or None to
            leave it (its default: NOTSET, i.e. Python's root level).
        **artifacts: name=True turns an artifact of ARTIFACTS on (its logger at DEBUG),
            name=False off (its logger back to NOTSET). output_code and perf_hints also set
            torch's artifact of that name (Inductor writes them).

    Any call that turns something on gives the ``cdynamo`` logger one stderr handler (once).
    Calling set_logs() with no arguments turns every artifact off and the level back to
    NOTSET, as torch's does.

    Raises:
        ValueError: an unknown artifact name (the message lists the valid ones).
        TypeError: a non-bool artifact value or a bad level.
    """
    unknown = [k for k in artifacts if k not in ARTIFACTS]
    if unknown:
        raise ValueError(f"cdynamo.set_logs: unknown log artifact {unknown[0]!r}; valid "
                         f"artifacts: {', '.join(ARTIFACTS)}")
    for name, on in artifacts.items():
        if not isinstance(on, bool):
            raise TypeError(f"cdynamo.set_logs: {name}= takes True or False, got {on!r}")
    level = _level_of(cdynamo)
    if not artifacts and cdynamo is None:
        for lg in _LOGGERS.values():
            lg.setLevel(logging.NOTSET)
        _ROOT.setLevel(logging.NOTSET)
        return
    for name, on in artifacts.items():
        _LOGGERS[name].setLevel(logging.DEBUG if on else logging.NOTSET)
    if level is not None:
        _ROOT.setLevel(level)
    torch_side = {k: v for k, v in artifacts.items() if k in TORCH_ARTIFACTS}
    if torch_side:
        import torch._logging
        torch._logging.set_logs(**torch_side)
    if level is not None or any(artifacts.values()):
        _ensure_handler()


def parse_spec(spec: str) -> dict:
    """The set_logs arguments of a CDYNAMO_LOGS / TORCH_LOGS string: comma-separated artifact
    names, ``+cdynamo`` (DEBUG), ``-cdynamo`` (ERROR), ``cdynamo`` (INFO); ``+dynamo`` /
    ``dynamo`` are read as cdynamo's. Names cdynamo does not know are left out (TORCH_LOGS
    names many of torch's own); returns {"cdynamo": level?, artifact: True, ...}."""
    out: dict = {}
    for raw in spec.replace(" ", "").split(","):
        if not raw:
            continue
        sign = raw[0] if raw[0] in "+-" else ""
        name = raw[1:] if sign else raw
        if name in ("cdynamo", "dynamo"):
            out["cdynamo"] = {"+": logging.DEBUG, "-": logging.ERROR, "": logging.INFO}[sign]
        elif name in ARTIFACTS:
            out[name] = True
    return out


def apply_env(var: str = "CDYNAMO_LOGS") -> None:
    """set_logs from the environment variable var, when set."""
    spec = os.environ.get(var)
    if spec:
        set_logs(**parse_spec(spec))
