"""A static HTML compile report built from cdynamo's structured trace (``CDYNAMO_TRACE``).

    python -m cdynamo.report DIR -o OUT        (or the console script ``cdynamo-report``)

reads every ``cdynamo_trace_*.jsonl`` file in DIR (one per process, format in
docs/trace-format.md) and writes ``OUT/index.html``: a page that opens from disk, needs no
server, network or JavaScript. It has a summary (compiles, graphs, graph breaks by catalogue
code, recompiles, time by phase, the processes' counters), an index of the compiles in order,
then one section per compile: the recompile reason (the guard that failed), the graph breaks
(code, reason, source line, user stack, hint), the frame run unmodified, each graph's code,
the guards, the dynamic-shape decisions and the time by phase. Several trace files give one
section per process.

Stable names for tools and tests: the section of compile ``"F/A"`` has ``id="compile-F-A"``
(``id="pN-compile-F-A"`` for the N-th process, N >= 1, processes ordered by start time) and
``class="compile"`` with ``data-compile-id`` and ``data-pid``; inside it ``class="recompile"``
(the failed guard in ``class="recompile-reason"``), ``class="graph-break"`` (``break-code``,
``break-reason``, ``break-location``, ``break-source``, ``user-stack``, ``break-hint``),
``class="unmodified"`` (same inner classes), ``class="graph-code"`` (a ``<pre>``),
``class="guards"``, ``class="dynamic"``, ``class="timings"``. The summary is
``id="summary"`` (``id="breaks-by-code"``, ``id="recompiles"``, ``id="phase-times"``,
``id="counters"``), the index ``id="compile-index"``.

Events and fields this module does not know are ignored (counted in the summary), so a trace
written by a newer cdynamo still gives a report. Standard library only.
"""
from __future__ import annotations

import argparse
import html
import json
import os
import sys
import time
import warnings
from collections import Counter, OrderedDict
from pathlib import Path

__all__ = ["build_report", "read_trace", "render", "main"]

_PATTERN = "cdynamo_trace_*.jsonl"


# --- reading -------------------------------------------------------------------------------

def read_trace(trace_dir: str) -> list[tuple[str, list[dict]]]:
    """Read the structured trace in a directory.

    Args:
        trace_dir: str (or path-like), a directory holding ``cdynamo_trace_*.jsonl`` files.

    Returns:
        list of ``(path: str, records: list[dict])``, one per file, in file-name order; each
        record is one JSON object of the file, in file order.

    Raises:
        FileNotFoundError: trace_dir does not exist, is not a directory, or holds no
            ``cdynamo_trace_*.jsonl`` file.
        ValueError: a line (other than a file's last) is not a JSON object; the message names
            the file and line. A last line that is not valid JSON (a record cut short by a
            crash) is skipped with a ``UserWarning`` instead.
    """
    root = Path(trace_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"trace directory {str(root)!r} does not exist or is not a "
                                "directory")
    files = sorted(p for p in root.glob(_PATTERN) if p.is_file())
    if not files:
        raise FileNotFoundError(
            f"no trace files ({_PATTERN}) in {str(root)!r}: run the program with "
            f"CDYNAMO_TRACE={str(root)!r} (or cdynamo.set_trace_dir()) first")
    return [(str(path), _read_file(path)) for path in files]


def _read_file(path: Path) -> list[dict]:
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            if number == len(lines):
                warnings.warn(f"{path}:{number}: skipped a truncated last line ({e.msg})",
                              stacklevel=3)
                continue
            raise ValueError(f"{path}:{number}: not a JSON line ({e.msg}): "
                             f"{line[:80]!r}") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{number}: a trace line must be a JSON object, "
                             f"got {type(record).__name__}")
        records.append(record)
    return records


# --- the model -----------------------------------------------------------------------------

class _Compile:
    """One compile of one process, from its records."""

    def __init__(self, compile_id: str, key: str):
        self.compile_id = compile_id
        self.key = key                  # unique within the process (compile_id, or "id#n")
        self.start: dict | None = None
        self.end: dict | None = None
        self.recompiles: list[dict] = []
        self.graphs: list[dict] = []
        self.guards: list[list] = []
        self.breaks: list[dict] = []
        self.unmodified: list[dict] = []
        self.dynamic: list[dict] = []

    def field(self, name, default=None):
        """A field of compile_start, else of the first record that names the frame."""
        for rec in [self.start] + self.recompiles + self.breaks + self.unmodified:
            if rec and rec.get(name) is not None:
                return rec[name]
        return default

    def field_rec(self) -> dict | None:
        """The first record after compile_start that names the frame's file."""
        for rec in self.recompiles + self.breaks + self.unmodified:
            if rec.get("filename") is not None:
                return rec
        return None

    @property
    def status(self) -> str:
        if self.end is None:
            return "incomplete"
        return str(self.end.get("status", "?"))

    @property
    def times(self) -> dict:
        times = self.end.get("times_s") if self.end else None
        if not isinstance(times, dict):
            return {}
        return {str(k): v for k, v in times.items() if _is_number(v)}

    @property
    def graph_count(self) -> int:
        n = self.end.get("graphs") if self.end else None
        return n if isinstance(n, int) and not isinstance(n, bool) else len(self.graphs)

    @property
    def break_count(self) -> int:
        n = self.end.get("breaks") if self.end else None
        return n if isinstance(n, int) and not isinstance(n, bool) else len(self.breaks)

    @property
    def recompile_reasons(self) -> list[str]:
        reasons = [str(r.get("reason")) for r in self.recompiles if r.get("reason") is not None]
        if self.start and self.start.get("reason") is not None:
            reason = str(self.start["reason"])
            if reason not in reasons:
                reasons.append(reason)
        return reasons


class _Process:
    """The records of one trace file."""

    def __init__(self, path: str, records: list[dict]):
        self.path = path
        self.records = records
        self.pid = next((r["pid"] for r in records if "pid" in r), "?")
        self.start = next((r for r in records if r.get("event") == "process_start"), None)
        self.end = next((r for r in reversed(records) if r.get("event") == "process_end"),
                        None)
        stamps = [r["ts"] for r in records if _is_number(r.get("ts"))]
        self.first_ts = min(stamps) if stamps else None
        self.compiles: list[_Compile] = []
        self.cache_limits: list[dict] = []
        self.orphans: list[dict] = []       # breaks with no compile_id
        self.unknown = Counter()
        self._group()

    def _group(self):
        latest: dict[str, _Compile] = {}

        def new(cid):
            n = sum(1 for c in self.compiles if c.compile_id == cid)
            c = _Compile(cid, cid if n == 0 else f"{cid}#{n + 1}")
            self.compiles.append(c)
            latest[cid] = c
            return c

        def of(cid):
            return latest.get(cid) or new(cid)

        for rec in self.records:
            event = rec.get("event")
            cid = rec.get("compile_id")
            cid = None if cid is None else str(cid)
            if event == "process_start" or event == "process_end":
                continue
            if event == "cache_limit":
                self.cache_limits.append(rec)
                continue
            if cid is None:
                if event in ("graph_break", "unmodified"):
                    self.orphans.append(rec)
                else:
                    self.unknown[str(event)] += 1
                continue
            if event == "recompile":
                c = latest.get(cid)
                if c is None or c.start is not None or c.end is not None:
                    c = new(cid)
                c.recompiles.append(rec)
            elif event == "compile_start":
                c = latest.get(cid)
                if c is None or c.start is not None or c.end is not None:
                    c = new(cid)
                c.start = rec
            elif event == "compile_end":
                of(cid).end = rec
            elif event == "graph":
                of(cid).graphs.append(rec)
            elif event == "guards":
                of(cid).guards.append(rec.get("guards"))
            elif event == "graph_break":
                of(cid).breaks.append(rec)
            elif event == "unmodified":
                of(cid).unmodified.append(rec)
            elif event == "dynamic":
                of(cid).dynamic.append(rec)
            else:
                self.unknown[str(event)] += 1


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# --- writing -------------------------------------------------------------------------------

def _e(value) -> str:
    """HTML-escaped text of a value (None gives "")."""
    return "" if value is None else html.escape(str(value), quote=True)


def _secs(value) -> str:
    return f"{value:.3f}" if _is_number(value) else ""


def _loc(rec: dict | None, file_key="filename", line_key="lineno") -> str:
    if not rec:
        return ""
    filename, lineno = rec.get(file_key), rec.get(line_key)
    if filename is None:
        return "" if lineno is None else f"line {lineno}"
    return f"{filename}:{lineno}" if lineno is not None else str(filename)


def _anchor(proc_index: int, c: _Compile) -> str:
    key = "".join(ch if ch.isalnum() else "-" for ch in c.key)
    return f"compile-{key}" if proc_index == 0 else f"p{proc_index}-compile-{key}"


_CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em;color:#222}
h1{font-size:1.5em;margin:0 0 .3em} h2{font-size:1.25em;border-bottom:2px solid #ccc;
padding-bottom:.2em;margin-top:1.6em} h3{font-size:1.1em;margin:1.2em 0 .3em}
h4{font-size:1em;margin:.8em 0 .2em}
table{border-collapse:collapse;margin:.4em 0} th,td{border:1px solid #ccc;padding:2px 8px;
text-align:left;vertical-align:top} th{background:#f0f0f0} td.num{text-align:right}
pre{background:#f7f7f7;border:1px solid #ddd;padding:.5em;overflow-x:auto;font-size:12px;
white-space:pre-wrap;word-break:break-word;margin:.3em 0}
code{font-size:12px} .compile{border:1px solid #bbb;border-radius:4px;padding:.2em 1em .8em;
margin:1em 0} .compile:target{border-color:#36c;box-shadow:0 0 0 2px #36c}
.graph-break,.unmodified{border-left:4px solid #e69500;padding:.2em .8em;margin:.5em 0;
background:#fffaf0} .unmodified{border-color:#c33;background:#fff3f3}
.recompile{border-left:4px solid #36c;padding:.2em .8em;margin:.5em 0;background:#f3f7ff}
.break-code{font-weight:bold;font-family:monospace} .break-hint{color:#555}
.status-compiled{color:#080} .status-unmodified{color:#b60} .status-error,
.status-incomplete{color:#c00} .meta{color:#555} ol.user-stack{margin:.2em 0}
.muted{color:#777} .cards{display:flex;flex-wrap:wrap;gap:0 2.5em;align-items:flex-start}
.cards h3{margin-top:.6em}
"""


def _table(headers, rows, attrs="") -> str:
    out = [f"<table{attrs}><thead><tr>"]
    out += [f"<th>{_e(h)}</th>" for h in headers]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(
            f"<td>{cell}</td>" if isinstance(cell, _Raw)
            else f'<td class="num">{_e(cell)}</td>' if _is_number(cell)
            else f"<td>{_e(cell)}</td>" for cell in row) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


class _Raw(str):
    """HTML already escaped (a table cell that holds markup)."""


def _raw(s: str) -> _Raw:
    return _Raw(s)


def _cell(value) -> str:
    return value if _is_number(value) else _Raw(_e(value))


def _summary(procs: list[_Process]) -> str:
    compiles = [c for p in procs for c in p.compiles]
    out = ['<section id="summary"><h2>Summary</h2>', '<div class="cards"><div><h3>Totals</h3>']
    n_breaks = sum(len(c.breaks) for c in compiles) + sum(
        1 for p in procs for r in p.orphans if r.get("event") == "graph_break")
    n_unmod = sum(len(c.unmodified) for c in compiles) + sum(
        1 for p in procs for r in p.orphans if r.get("event") == "unmodified")
    n_recompiles = sum(1 for c in compiles if c.recompile_reasons)
    statuses = Counter(c.status for c in compiles)
    rows = [("processes", len(procs)), ("compiles", len(compiles)),
            ("graphs", sum(c.graph_count for c in compiles)),
            ("graph breaks", n_breaks), ("frames run unmodified", n_unmod),
            ("recompiles", n_recompiles),
            ("cache size limit hits (records)", sum(len(p.cache_limits) for p in procs))]
    rows += [(f"compiles with status {s}", n) for s, n in sorted(statuses.items())]
    out.append(_table(["", "count"], [(_cell(k), v) for k, v in rows], ' id="totals"'))

    # breaks by code
    by_code: "OrderedDict[tuple, int]" = OrderedDict()
    for p in procs:
        recs = [r for c in p.compiles for r in c.breaks + c.unmodified] + p.orphans
        for r in recs:
            key = (str(r.get("code") or "?"), str(r.get("title") or ""),
                   "unmodified" if r.get("event") == "unmodified" else "graph break")
            by_code[key] = by_code.get(key, 0) + 1
    out.append('</div><div><h3>Graph breaks by code</h3>')
    if by_code:
        rows = sorted(by_code.items(), key=lambda kv: (-kv[1], kv[0]))
        out.append(_table(["code", "title", "kind", "count"],
                          [(_raw(f'<span class="break-code">{_e(k[0])}</span>'),
                            _cell(k[1]), _cell(k[2]), n) for k, n in rows],
                          ' id="breaks-by-code"'))
    else:
        out.append('<p id="breaks-by-code" class="muted">No graph breaks.</p>')

    # time by phase
    totals: "OrderedDict[str, float]" = OrderedDict()
    for c in compiles:
        for phase, secs in c.times.items():
            totals[phase] = totals.get(phase, 0.0) + secs
    out.append('</div><div><h3>Compile time by phase (seconds)</h3>')
    if totals:
        out.append(_table(["phase", "seconds"],
                          [(_cell(k), _raw(_secs(v))) for k, v in totals.items()],
                          ' id="phase-times"'))
    else:
        out.append('<p id="phase-times" class="muted">No timings recorded.</p>')

    # counters
    out.append('</div><div><h3>Process counters</h3>')
    names: list[str] = []
    for p in procs:
        counters = p.end.get("counters") if p.end else None
        if isinstance(counters, dict):
            names += [str(k) for k in counters if str(k) not in names]
    if names:
        rows = []
        for p in procs:
            counters = p.end.get("counters") if p.end else None
            counters = counters if isinstance(counters, dict) else {}
            rows.append([_cell(p.pid)] + [
                _cell(counters.get(n, "")) for n in names])
        out.append(_table(["pid"] + names, rows, ' id="counters"'))
    else:
        out.append('<p id="counters" class="muted">No process_end record (the process may '
                   'have crashed, or is still running).</p>')
    out.append("</div></div>")

    # recompiles
    out.append("<h3>Recompiles</h3>")
    rows = []
    for i, p in enumerate(procs):
        for c in p.compiles:
            for reason in c.recompile_reasons:
                rows.append((_raw(f'<a href="#{_anchor(i, c)}">{_e(c.key)}</a>'),
                             _cell(p.pid), _cell(c.field("qualname")),
                             _raw(f'<code class="recompile-reason">{_e(reason)}</code>')))
    if rows:
        out.append(_table(["compile", "pid", "function", "failed guard"], rows,
                          ' id="recompiles"'))
    else:
        out.append('<p id="recompiles" class="muted">No recompiles.</p>')

    unknown = Counter()
    for p in procs:
        unknown.update(p.unknown)
    if unknown:
        out.append('<p class="muted unknown-events">Records of events this report does not '
                   "know (ignored): " + _e(", ".join(f"{k} ({n})"
                                                     for k, n in sorted(unknown.items())))
                   + "</p>")
    out.append("</section>")
    return "\n".join(out)


def _index(procs: list[_Process]) -> str:
    out = ['<section id="compile-index"><h2>Compiles</h2>']
    rows = []
    for i, p in enumerate(procs):
        for c in p.compiles:
            start_ts = (c.start or {}).get("ts")
            at = (start_ts - p.first_ts if _is_number(start_ts) and p.first_ts is not None
                  else None)
            rows.append((
                _raw(f'<a href="#{_anchor(i, c)}">{_e(c.key)}</a>'), _cell(p.pid),
                _cell(c.field("qualname")), _raw(f"<code>{_e(_loc(c.start or c.field_rec()))}"
                                                 "</code>"),
                _raw(f'<span class="status-{_e(c.status)}">{_e(c.status)}</span>'),
                c.graph_count, c.break_count,
                _raw("yes" if c.recompile_reasons else ""),
                _raw(_secs(c.times.get("total"))), _raw(_secs(at))))
    if rows:
        out.append(_table(["compile", "pid", "function", "file:line", "status", "graphs",
                           "breaks", "recompile", "total (s)", "at (s)"], rows))
    else:
        out.append('<p class="muted no-compiles">The trace has no compile records.</p>')
    out.append("</section>")
    return "\n".join(out)


def _break_html(rec: dict, cls: str) -> str:
    code = rec.get("code")
    title = rec.get("title")
    out = [f'<div class="{cls}" data-code="{_e(code)}">',
           f'<div><span class="break-code">{_e(code or "?")}</span>'
           + (f' <span class="break-title">{_e(title)}</span>' if title else "")
           + ("" if cls == "graph-break" else " (the whole frame runs unmodified)")
           + "</div>",
           f'<div>Reason: <span class="break-reason">{_e(rec.get("reason"))}</span></div>']
    loc = _loc(rec)
    if loc or rec.get("source"):
        where = f'<code class="break-location">{_e(loc)}</code>'
        qual = rec.get("qualname")
        if qual:
            where += f' in <code>{_e(qual)}</code>'
        out.append(f"<div>At {where}</div>")
        if rec.get("source"):
            out.append(f'<pre class="break-source">{_e(rec.get("source"))}</pre>')
    stack = rec.get("user_stack")
    if isinstance(stack, list) and stack:
        out.append('<details open><summary>User stack (outermost first)</summary>'
                   '<ol class="user-stack">')
        for frame in stack:
            if isinstance(frame, dict):
                line = frame.get("line")
                out.append(f'<li><code>{_e(_loc(frame))}</code> in '
                           f'<code>{_e(frame.get("name"))}</code>'
                           + (f"<pre>{_e(line)}</pre>" if line else "") + "</li>")
            else:
                out.append(f"<li><code>{_e(frame)}</code></li>")
        out.append("</ol></details>")
    if rec.get("hint"):
        out.append(f'<div class="break-hint">Hint: {_e(rec.get("hint"))}</div>')
    out.append("</div>")
    return "\n".join(out)


def _compile_html(proc_index: int, p: _Process, c: _Compile) -> str:
    anchor = _anchor(proc_index, c)
    qual = c.field("qualname")
    out = [f'<section class="compile" id="{anchor}" data-status="{_e(c.status)}" '
           f'data-compile-id="{_e(c.compile_id)}" data-pid="{_e(p.pid)}">',
           f'<h3>[{_e(c.key)}] <code>{_e(qual)}</code> '
           f'<span class="status-{_e(c.status)}">{_e(c.status)}</span></h3>',
           f'<div class="meta"><code>{_e(_loc(c.start or c.field_rec()))}</code> &middot; pid '
           f'{_e(p.pid)} &middot; {c.graph_count} graph(s), {c.break_count} break(s)</div>']
    for reason in c.recompile_reasons:
        out.append('<div class="recompile"><strong>Recompile</strong>: the guard that failed: '
                   f'<pre class="recompile-reason">{_e(reason)}</pre></div>')
    if c.end and c.end.get("error"):
        out.append(f'<div class="compile-error"><strong>Error</strong>:'
                   f'<pre>{_e(c.end.get("error"))}</pre></div>')
    for rec in c.unmodified:
        out.append(_break_html(rec, "unmodified"))
    if c.breaks:
        out.append("<h4>Graph breaks</h4>")
        out += [_break_html(rec, "graph-break") for rec in c.breaks]
    for g in c.graphs:
        nodes, ops = g.get("nodes"), g.get("ops")
        out.append(f'<h4>Graph <code>{_e(g.get("name"))}</code> '
                   f'<span class="meta">backend {_e(g.get("backend"))}'
                   + (f", {_e(nodes)} nodes" if nodes is not None else "")
                   + (f", {_e(ops)} ops" if ops is not None else "") + "</span></h4>")
        out.append(f'<pre class="graph-code">{_e(g.get("code"))}</pre>')
    for guards in c.guards:
        out.append("<h4>Guards</h4>")
        if isinstance(guards, list):
            out.append('<pre class="guards">' + _e("\n".join(str(g) for g in guards))
                       + "</pre>")
        else:
            out.append(f'<pre class="guards">{_e(guards)}</pre>')
    if c.dynamic:
        out.append("<h4>Dynamic shapes</h4>")
        out.append(_table(["source", "decision", "reason"],
                          [(_raw(f"<code>{_e(d.get('source'))}</code>"),
                            _cell(d.get("decision")), _cell(d.get("reason")))
                           for d in c.dynamic], ' class="dynamic"'))
    times = c.times
    if times:
        out.append("<h4>Time by phase (seconds)</h4>")
        out.append(_table(list(times), [[_raw(_secs(v)) for v in times.values()]],
                          ' class="timings"'))
    out.append("</section>")
    return "\n".join(out)


def _process_html(index: int, p: _Process, several: bool) -> str:
    out = [f'<section class="process" id="process-{index}" data-pid="{_e(p.pid)}">']
    out.append(f"<h2>Process {_e(p.pid)}</h2>" if several else "<h2>Compile details</h2>")
    meta = []
    if p.start:
        argv = p.start.get("argv")
        if isinstance(argv, list):
            meta.append(("command", " ".join(str(a) for a in argv)))
        for key in ("python", "torch", "cdynamo"):
            if p.start.get(key) is not None:
                meta.append((key, p.start[key]))
    if p.first_ts is not None:
        meta.append(("started", time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(p.first_ts))))
    meta.append(("trace file", os.path.basename(p.path)))
    out.append('<table class="process-meta">' + "".join(
        f"<tr><th>{_e(k)}</th><td><code>{_e(v)}</code></td></tr>" for k, v in meta)
        + "</table>")
    if p.cache_limits:
        out.append("<h3>Cache size limit reached</h3>")
        out.append(_table(["function", "file:line", "limit"],
                          [(_cell(r.get("qualname")), _raw(f"<code>{_e(_loc(r))}</code>"),
                            _cell(r.get("limit"))) for r in p.cache_limits],
                          ' class="cache-limit"'))
    for c in p.compiles:
        out.append(_compile_html(index, p, c))
    if p.orphans:
        out.append("<h3>Graph breaks outside a known compile</h3>")
        out += [_break_html(r, "graph-break" if r.get("event") == "graph_break"
                            else "unmodified") for r in p.orphans]
    out.append("</section>")
    return "\n".join(out)


def render(traces: list[tuple[str, list[dict]]], title: str = "cdynamo compile report") -> str:
    """The report page for traces as read_trace() returns them.

    Args:
        traces: list of ``(path: str, records: list[dict])``, one per process.
        title: str, the page title.

    Returns:
        str, a complete HTML document (every trace text escaped).
    """
    procs = [_Process(path, records) for path, records in traces]
    procs.sort(key=lambda p: (p.first_ts is None, p.first_ts or 0, p.path))
    several = len(procs) > 1
    body = [f"<h1>{_e(title)}</h1>",
            '<p class="meta">Built from the structured trace (CDYNAMO_TRACE) by '
            "<code>python -m cdynamo.report</code>; times in seconds.</p>",
            _summary(procs), _index(procs)]
    body += [_process_html(i, p, several) for i, p in enumerate(procs)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def build_report(trace_dir: str, out_dir: str) -> str:
    """Write the static HTML report of the structured trace in trace_dir.

    Args:
        trace_dir: str (or path-like), the directory given as CDYNAMO_TRACE: its
            ``cdynamo_trace_*.jsonl`` files are read (one per process).
        out_dir: str (or path-like), the directory to write ``index.html`` into (created if
            missing; an existing index.html is replaced).

    Returns:
        str, the path of the index page (``out_dir/index.html``).

    Raises:
        FileNotFoundError: trace_dir is missing or holds no trace file.
        ValueError: a line of a trace file (other than its last) is not a JSON object. A
            truncated last line is skipped with a ``UserWarning``.
        OSError: out_dir cannot be written.
    """
    traces = read_trace(trace_dir)
    page = render(traces, title=f"cdynamo compile report: {os.path.abspath(trace_dir)}")
    os.makedirs(out_dir, exist_ok=True)
    index = os.path.join(out_dir, "index.html")
    tmp = index + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, index)
    return index


def main(argv: list[str] | None = None) -> int:
    """The command line: ``cdynamo-report DIR [-o OUT]``; prints the index path.

    Args:
        argv: list of str, the arguments (default sys.argv[1:]).

    Returns:
        int, the exit status: 0, or 2 when the trace cannot be read (the message on stderr).
    """
    parser = argparse.ArgumentParser(
        prog="cdynamo-report",
        description="Build a static HTML compile report from a cdynamo structured trace "
                    "(the directory given as CDYNAMO_TRACE).")
    parser.add_argument("trace_dir", metavar="DIR", help="directory of cdynamo_trace_*.jsonl")
    parser.add_argument("-o", "--out", metavar="OUT", default=None,
                        help="output directory (default: DIR/report); index.html goes there")
    args = parser.parse_args(argv)
    out = args.out or os.path.join(args.trace_dir, "report")
    try:
        index = build_report(args.trace_dir, out)
    except (FileNotFoundError, ValueError) as e:
        print(f"cdynamo-report: error: {e}", file=sys.stderr)
        return 2
    print(index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
