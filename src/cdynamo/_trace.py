"""The structured trace: with ``CDYNAMO_TRACE=DIR`` (or ``cdynamo.set_trace_dir(DIR)``) each
process appends one JSON object per line to ``DIR/cdynamo_trace_<pid>_<start>.jsonl``, in
the spirit of torch's TORCH_TRACE (read by ``python -m cdynamo.report``).

Every record has ``event`` (str), ``ts`` (float, seconds since the epoch) and ``pid`` (int);
the other fields per event are listed in docs/trace-format.md. Records are written and
flushed as they happen, so a trace of a process that crashed is readable up to the crash.
Nothing here is on the per-call path: the engine calls it while compiling, and the module
is a no-op (one attribute test) when no directory is set.
"""
from __future__ import annotations

import atexit
import json
import os
import threading
import time

#: The directory of this process's trace, or None when tracing is off.
trace_dir: str | None = os.environ.get("CDYNAMO_TRACE") or None
_file = None
_lock = threading.Lock()


def set_trace_dir(path: str | None) -> None:
    """Start writing the structured trace into directory ``path`` (str; created if missing),
    or stop with None. A new file is opened on the next record."""
    global trace_dir, _file
    with _lock:
        if _file is not None:
            _file.close()
            _file = None
        trace_dir = os.fspath(path) if path is not None else None


def current_file() -> str | None:
    """The path of the trace file this process writes, or None before the first record."""
    return None if _file is None else _file.name


def _open():
    global _file
    os.makedirs(trace_dir, exist_ok=True)
    name = f"cdynamo_trace_{os.getpid()}_{int(time.time() * 1000)}.jsonl"
    _file = open(os.path.join(trace_dir, name), "a", encoding="utf-8")
    return _file


def _jsonable(value):
    return repr(value)


def emit(event: str, **fields) -> None:
    """Append one record ``{"event": event, "ts": ..., "pid": ..., **fields}`` to this
    process's trace; nothing when tracing is off. Values that JSON cannot hold are written
    as their repr()."""
    if trace_dir is None:
        return
    record = {"event": event, "ts": time.time(), "pid": os.getpid()}
    record.update(fields)
    line = json.dumps(record, default=_jsonable)
    with _lock:
        f = _file if _file is not None else _open()
        f.write(line + "\n")
        f.flush()


def _at_exit() -> None:
    if trace_dir is None or _file is None:
        return
    try:
        from cdynamo import counters
        emit("process_end", counters=counters())
    except Exception:  # noqa: BLE001 (the engine may be gone at shutdown)
        pass


atexit.register(_at_exit)
