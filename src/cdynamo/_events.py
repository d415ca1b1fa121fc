"""What happened while compiling, told once to both observers: the logs by artifact
(cdynamo._logging) and the structured trace (cdynamo._trace, docs/trace-format.md).

The engine and the glue call these functions at compile time only (never per call): a
frame's compile starts and ends (hook.c), a graph reaches the backend (_glue.compile_graph),
a cache entry is made (codegen.c, through _glue.report), a graph break, a frame given up, a
recompile, a dynamic-shape decision, the cache limit. Each function does nothing costly when
neither observer wants the event.
"""
from __future__ import annotations

import linecache
import os
import sys
import threading
import time
import traceback
import weakref

from cdynamo import _install, _logging, _trace

_tls = threading.local()
_frames: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # code -> [F, attempts]
_next_frame = [0]
_lock = threading.Lock()
_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _stack() -> list:
    s = getattr(_tls, "stack", None)
    if s is None:
        s = _tls.stack = []
    return s


def _current():
    s = _stack()
    return s[-1] if s else None


def current_compile_id() -> str | None:
    """The compile_id ("F/A") of the compile running on this thread, or None."""
    c = _current()
    return c["compile_id"] if c else None


def _frame_number(code, bump: bool) -> str:
    with _lock:
        entry = _frames.get(code)
        if entry is None:
            entry = _frames[code] = [_next_frame[0], 0]
            _next_frame[0] += 1
        cid = f"{entry[0]}/{entry[1]}"
        if bump:
            entry[1] += 1
    return cid


def _started_process() -> None:
    if not getattr(_started_process, "done", False) and _trace.trace_dir is not None:
        _started_process.done = True
        import torch
        import cdynamo
        _trace.emit("process_start", argv=list(sys.argv), python=sys.version.split()[0],
                    torch=torch.__version__, cdynamo=cdynamo.__version__)


def compile_start(code, reason=None) -> str:
    """A frame of code (types.CodeType) starts compiling; reason (str or None): the guard
    failure when it is a recompile. Returns its compile_id."""
    if _install._originals:
        _install.sync_config()
    cid = _frame_number(code, bump=True)
    _stack().append({"compile_id": cid, "t0": time.perf_counter(), "backend_s": 0.0,
                     "graphs": 0, "breaks": 0})
    if _trace.trace_dir is not None:
        _started_process()
        _trace.emit("compile_start", compile_id=cid, qualname=code.co_qualname,
                    filename=code.co_filename, lineno=code.co_firstlineno, reason=reason)
    return cid


def compile_end(status: str, error: str | None = None) -> None:
    """The compile begun by the last compile_start on this thread ended: status "compiled",
    "unmodified", "skipped" (no operation) or "error" (error: its message)."""
    s = _stack()
    if not s:
        return
    c = s.pop()
    if _trace.trace_dir is None:
        return
    total = time.perf_counter() - c["t0"]
    fields = dict(compile_id=c["compile_id"], status=status, graphs=c["graphs"],
                  breaks=c["breaks"], times_s={"trace": max(total - c["backend_s"], 0.0),
                                               "backend": c["backend_s"], "total": total})
    if error is not None:
        fields["error"] = error
    _trace.emit("compile_end", **fields)


def graph(name: str, gm, backend_name: str, backend_s: float) -> None:
    """The graph gm (torch.fx.GraphModule), named name, was compiled by backend_name in
    backend_s seconds."""
    c = _current()
    if c is not None:
        c["backend_s"] += backend_s
        c["graphs"] += 1
    want_code = _logging.enabled("graph_code")
    if want_code or _trace.trace_dir is not None:
        code = gm.code.strip("\n")
        if want_code:
            _logging.log("graph_code", "TRACED GRAPH %s (%s)\n%s", name,
                         current_compile_id(), code)
        if _trace.trace_dir is not None:
            nodes = list(gm.graph.nodes)
            _trace.emit("graph", compile_id=current_compile_id(), name=name,
                        backend=backend_name, code=code, nodes=len(nodes),
                        ops=sum(n.op.startswith("call_") for n in nodes))
    if _logging.enabled("graph"):
        from cdynamo._report import format_graph
        _logging.log("graph", "TRACED GRAPH %s (%s)\n%s", name, current_compile_id(),
                     format_graph(gm))


def entry_made(orig_code, new_code, guards, resume_codes) -> None:
    """A cache entry was made for orig_code: its guards (list of str), the transformed code
    and the resume functions generated with it."""
    guards = list(guards)
    if _trace.trace_dir is not None:
        _trace.emit("guards", compile_id=current_compile_id(), guards=guards)
    if _logging.enabled("guards"):
        _logging.log("guards", "GUARDS %s (%s):\n%s", orig_code.co_qualname,
                     current_compile_id(), "\n".join(f"  {g}" for g in guards))
    if _logging.enabled("bytecode"):
        from cdynamo._report import format_bytecode
        parts = [f"ORIGINAL BYTECODE {orig_code.co_qualname} {orig_code.co_filename} "
                 f"{orig_code.co_firstlineno}", format_bytecode(orig_code), "",
                 "MODIFIED BYTECODE", format_bytecode(new_code)]
        for rc in resume_codes or ():
            parts += ["", f"RESUME FUNCTION {rc.co_name}", format_bytecode(rc)]
        _logging.log("bytecode", "%s", "\n".join(parts))


def source_line(filename: str, lineno: int) -> str:
    """That line of the user's source, stripped ("" when unknown)."""
    return linecache.getline(filename, lineno).strip() if lineno else ""


def _with_caret(filename: str, lineno: int) -> str:
    line = linecache.getline(filename, lineno).strip() if lineno else ""
    return f"    {line}\n    {'^' * len(line)}" if line else ""


def user_stack(filename: str, lineno: int, qualname: str) -> list:
    """The user's stack at a break: the Python frames calling the compiled frame (outside
    cdynamo itself), outermost first, then the frame's own line."""
    out = []
    for fs in traceback.extract_stack(sys._getframe(2), limit=12):
        if fs.filename.startswith(_PKG_DIR):
            continue
        out.append({"filename": fs.filename, "lineno": fs.lineno, "name": fs.name,
                    "line": fs.line or ""})
    out.append({"filename": filename, "lineno": lineno, "name": qualname.split(".")[-1],
                "line": source_line(filename, lineno)})
    return out


def _break_record(event: str, b, inner=None) -> None:
    c = _current()
    if c is not None and event == "graph_break":
        c["breaks"] += 1
    want_log = _logging.enabled("graph_breaks")
    if not want_log and _trace.trace_dir is None:
        return
    stack = user_stack(b.filename, b.lineno, b.qualname)
    from cdynamo.break_reasons import lookup
    entry = lookup(b.code)
    if _trace.trace_dir is not None:
        _trace.emit(event, compile_id=current_compile_id(), code=b.code, title=entry.title,
                    reason=b.reason, hint=entry.hint, qualname=b.qualname,
                    filename=b.filename, lineno=b.lineno,
                    source=source_line(b.filename, b.lineno), user_stack=stack)
    if want_log:
        what = "Graph break" if event == "graph_break" else "Frame run unmodified"
        lines = [f"{what} in user code at {b.filename}:{b.lineno}",
                 f"Graph Break Reason: [{b.code}] {entry.title}: {b.reason}",
                 "User code traceback:"]
        for fr in stack:
            lines.append(f'  File "{fr["filename"]}", line {fr["lineno"]}, in {fr["name"]}')
            if fr is stack[-1]:
                caret = _with_caret(fr["filename"], fr["lineno"])
                if caret:
                    lines.append(caret)
            elif fr["line"]:
                lines.append(f"    {fr['line']}")
        if inner is not None:
            lines.append(f"  (inside a call, at {inner[0]}:{inner[1]})")
        lines.append(f"Hint: {entry.hint}")
        _logging.log("graph_breaks", "%s", "\n".join(lines))


def graph_break(b) -> None:
    """A graph break (cdynamo._glue.GraphBreak b) in the frame being compiled."""
    _break_record("graph_break", b)


def unmodified(b, inner=None) -> None:
    """The frame being compiled runs unmodified because of b (a GraphBreak); inner: (file,
    line) inside an inlined call where the reason arose, or None."""
    _break_record("unmodified", b, inner)
    if _logging.enabled("perf_hints"):
        _logging.log("perf_hints", "%s (%s:%s) runs unmodified: [%s] %s", b.qualname,
                     b.filename, b.lineno, b.code, b.reason)


def recompile(code_or_name, filename: str, lineno: int, reason: str, code=None) -> None:
    """A frame of function code_or_name (qualified name) is compiled again: the guard that
    failed (reason, with expected and actual values)."""
    cid = _frame_number(code, bump=False) if code is not None else None
    msg = (f"Recompiling function {code_or_name} in {filename}:{lineno}\n"
           f"    triggered by the following guard failure(s):\n    - {reason}")
    if _logging.enabled("recompiles"):
        _logging.log("recompiles", "%s", msg)
    if _logging.enabled("recompiles_verbose"):
        _logging.log("recompiles_verbose", "%s\n    (the most recently used cache entry's "
                     "first failing guard)", msg)
    if _trace.trace_dir is not None:
        _started_process()
        _trace.emit("recompile", compile_id=cid, qualname=code_or_name, filename=filename,
                    lineno=lineno, reason=reason)


def dynamic(source: str, decision: str, reason: str) -> None:
    """A dynamic-shape decision while tracing: source (e.g. "L['x'].size()[0]") is made
    `decision` (e.g. "dynamic") because of reason."""
    if _logging.enabled("dynamic"):
        _logging.log("dynamic", "%s: %s (%s) [%s]", source, decision, reason,
                     current_compile_id())
    if _trace.trace_dir is not None:
        _trace.emit("dynamic", compile_id=current_compile_id(), source=source,
                    decision=decision, reason=reason)


def cache_limit(qualname: str, filename: str, lineno: int, limit: int, reason: str) -> None:
    """A frame reached cache_size_limit and runs without compiling from now on."""
    if _logging.enabled("perf_hints"):
        _logging.log("perf_hints", "cache_size_limit (%d) reached for %s (%s:%d): %s", limit,
                     qualname, filename, lineno, reason)
    if _logging.enabled("recompiles"):
        _logging.log("recompiles", "cache_size_limit (%d) reached for %s (%s:%d), last "
                     "failure: %s; it runs without compiling", limit, qualname, filename,
                     lineno, reason)
    if _trace.trace_dir is not None:
        _trace.emit("cache_limit", qualname=qualname, filename=filename, lineno=lineno,
                    limit=limit, reason=reason)
