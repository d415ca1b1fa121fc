"""The static HTML compile report (cdynamo/report.py, `python -m cdynamo.report DIR -o OUT`):
unit tests on a trace written by hand in the format of docs/trace-format.md, and an end-to-end
test that traces a real program (CDYNAMO_TRACE), builds its report and, where a chromium is
installed (`make chromium`), loads it in headless Chromium.

report.py is loaded from this checkout's src/ (it uses the standard library only), so the
tests check the working tree even before the package is reinstalled.
"""
import html
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import engine_available

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT_PY = os.path.join(ROOT, "src", "cdynamo", "report.py")


def _load_report():
    spec = importlib.util.spec_from_file_location("_cdynamo_report_under_test", REPORT_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


report = _load_report()

NASTY = "x < 3 && y > \"q\" & 'z'"      # HTML-special characters in a break reason
GRAPH_CODE = textwrap.dedent("""\
    def forward(self, L_x_ : torch.Tensor):
        l_x_ = L_x_
        mul = l_x_ * 2;  l_x_ = None
        return (mul,)
    """)
RECOMPILE_GUARD = "tensor 'L['x']' size mismatch at index 0. expected 4, actual 8 (<guard>)"


def _rec(event, ts, **fields):
    return dict(event=event, ts=ts, pid=4242, **fields)


def _synthetic_records():
    where = dict(qualname="Model.forward", filename="/src/app<1>.py", lineno=10)
    stack = [{"filename": "/src/app<1>.py", "lineno": 20, "name": "main", "line": "m(x)"},
             {"filename": "/src/app<1>.py", "lineno": 12, "name": "forward",
              "line": "if x.sum() > 0 and a < b:"}]
    return [
        _rec("process_start", 100.0, argv=["app.py", "--n", "<3>"], python="3.11.9",
             torch="2.13.0", cdynamo="0.1.0"),
        _rec("compile_start", 100.1, compile_id="0/0", reason=None, **where),
        _rec("graph_break", 100.2, compile_id="0/0", code="CDB0001",
             title="data-dependent branch", reason=NASTY,
             hint="Use torch.where <or> torch.cond", source="if x.sum() > 0 and a < b:",
             user_stack=stack, **dict(where, lineno=12)),
        _rec("graph", 100.3, compile_id="0/0", name="__compiled_fn_1", backend="eager",
             code=GRAPH_CODE, nodes=4, ops=1, some_future_field={"a": 1}),
        _rec("guards", 100.3, compile_id="0/0",
             guards=["local 'x' TENSOR_MATCH size=[4] <float32>", "global 'torch' ID_MATCH"]),
        _rec("a_future_event", 100.35, compile_id="0/0", payload="<ignored>"),
        _rec("compile_end", 100.4, compile_id="0/0", status="compiled", graphs=1, breaks=1,
             times_s={"trace": 0.25, "backend": 0.05, "total": 0.3}),
        _rec("compile_start", 100.5, compile_id="1/0", qualname="torch_dynamo_resume_in_f",
             filename="/src/app<1>.py", lineno=12, reason=None),
        _rec("unmodified", 100.55, compile_id="1/0", code="CDB0005",
             title="break inside a loop", reason="graph break in a for/while loop: print()",
             hint="move it", qualname="torch_dynamo_resume_in_f", filename="/src/app<1>.py",
             lineno=14, source="print(i)", user_stack=[]),
        _rec("compile_end", 100.6, compile_id="1/0", status="unmodified", graphs=0, breaks=0,
             times_s={"trace": 0.01, "backend": 0.0, "total": 0.01}),
        _rec("recompile", 101.0, compile_id="0/1", reason=RECOMPILE_GUARD, **where),
        _rec("compile_start", 101.0, compile_id="0/1", reason=RECOMPILE_GUARD, **where),
        _rec("dynamic", 101.1, compile_id="0/1", source="L['x'].size()[0]",
             decision="symbolic s0", reason="size changed 4 -> 8 <auto>"),
        _rec("graph", 101.2, compile_id="0/1", name="__compiled_fn_2", backend="eager",
             code="def forward(self, s0 : torch.SymInt):\n    return (s0 * 2,)\n",
             nodes=3, ops=1),
        _rec("compile_end", 101.3, compile_id="0/1", status="compiled", graphs=1, breaks=0,
             times_s={"trace": 0.5, "backend": 0.25, "total": 0.75}),
        _rec("cache_limit", 102.0, qualname="g", filename="/src/app<1>.py", lineno=30, limit=8),
        _rec("process_end", 103.0, counters={"frames": 5, "cache_hits": 7, "cache_misses": 3,
                                             "compiles": 3, "unmodified": 1,
                                             "cache_limit_hits": 1}),
    ]


def _write_trace(directory, records, name="cdynamo_trace_4242_100000.jsonl", tail=""):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
        f.write(tail)
    return path


@pytest.fixture
def synthetic(tmp_path):
    trace = tmp_path / "trace"
    # a record cut short by a crash at the end of the file
    _write_trace(trace, _synthetic_records(), tail='{"event": "graph", "ts": 103.5, "co')
    with pytest.warns(UserWarning, match="truncated last line"):
        index = report.build_report(str(trace), str(tmp_path / "out"))
    with open(index, encoding="utf-8") as f:
        return index, f.read()


def _section(page, anchor):
    """The HTML of the <section id=anchor> (sections are not nested inside compiles)."""
    start = page.index(f'id="{anchor}"')
    return page[start:page.index("</section>", start)]


def test_index_and_summary(synthetic):
    index, page = synthetic
    assert index.endswith("index.html")
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page
    idx = _section(page, "compile-index")
    # compiles in order, each linking to its section
    assert [m for m in re.findall(r'href="#(compile-[\w-]+)"', idx)] == [
        "compile-0-0", "compile-1-0", "compile-0-1"]
    assert "Model.forward" in idx and "/src/app&lt;1&gt;.py:10" in idx
    assert "0.300" in idx and "0.750" in idx
    summary = _section(page, "summary")
    assert re.search(r"<td>compiles</td><td class=\"num\">3</td>", summary)
    assert re.search(r"<td>graphs</td><td class=\"num\">2</td>", summary)
    assert re.search(r"<td>recompiles</td><td class=\"num\">1</td>", summary)
    by_code = summary[summary.index('id="breaks-by-code"'):]
    assert "CDB0001" in by_code and "CDB0005" in by_code
    phases = summary[summary.index('id="phase-times"'):]
    assert "<td>trace</td><td>0.760</td>" in phases
    assert "<td>total</td><td>1.060</td>" in phases
    counters = summary[summary.index('id="counters"'):]
    assert "cache_hits" in counters and '<td class="num">7</td>' in counters
    # unknown events are ignored (and counted)
    assert "a_future_event (1)" in summary
    assert "payload" not in page


def test_graph_break_details_escaped(synthetic):
    _, page = synthetic
    sec = _section(page, "compile-0-0")
    assert 'class="graph-break"' in sec
    assert html.escape(NASTY, quote=True) in sec
    assert NASTY not in page                       # never raw
    assert '<span class="break-code">CDB0001</span>' in sec
    assert "data-dependent branch" in sec
    assert '<code class="break-location">/src/app&lt;1&gt;.py:12</code>' in sec
    assert '<pre class="break-source">if x.sum() &gt; 0 and a &lt; b:</pre>' in sec
    assert 'class="user-stack"' in sec and "/src/app&lt;1&gt;.py:20" in sec
    assert "Use torch.where &lt;or&gt; torch.cond" in sec
    # the graph's code and the guards
    assert f'<pre class="graph-code">{html.escape(GRAPH_CODE)}</pre>' in sec
    assert "local &#x27;x&#x27; TENSOR_MATCH size=[4] &lt;float32&gt;" in sec
    # the frame run unmodified
    sec = _section(page, "compile-1-0")
    assert 'class="unmodified"' in sec and "CDB0005" in sec
    assert "graph break in a for/while loop: print()" in sec
    assert '<pre class="break-source">print(i)</pre>' in sec


def test_recompile_shown_on_the_compile_it_starts(synthetic):
    _, page = synthetic
    assert 'class="recompile"' not in _section(page, "compile-0-0")
    sec = _section(page, "compile-0-1")
    assert sec.count('class="recompile"') == 1        # the recompile record and compile_start
    assert html.escape(RECOMPILE_GUARD) in sec         # carry the same guard: shown once
    assert "L[&#x27;x&#x27;].size()[0]" in sec and "symbolic s0" in sec
    assert "size changed 4 -&gt; 8 &lt;auto&gt;" in sec
    assert 'class="timings"' in sec and "0.750" in sec
    recompiles = _section(page, "summary")
    assert 'href="#compile-0-1"' in recompiles[recompiles.index('id="recompiles"'):]


def test_process_metadata_and_cache_limit(synthetic):
    _, page = synthetic
    proc = page[page.index('id="process-0"'):]
    assert "app.py --n &lt;3&gt;" in proc and "2.13.0" in proc
    assert 'class="cache-limit"' in proc


def test_several_processes(tmp_path):
    trace = tmp_path / "trace"
    _write_trace(trace, _synthetic_records())
    other = [dict(r, pid=777, ts=r["ts"] + 50) for r in _synthetic_records()]
    _write_trace(trace, other, name="cdynamo_trace_777_150000.jsonl")
    page = open(report.build_report(str(trace), str(tmp_path / "out")), encoding="utf-8").read()
    assert 'id="process-0" data-pid="4242"' in page
    assert 'id="process-1" data-pid="777"' in page
    assert 'id="compile-0-1"' in page and 'id="p1-compile-0-1"' in page
    assert re.search(r"<td>compiles</td><td class=\"num\">6</td>", page)


def test_repeated_compile_ids_stay_apart(tmp_path):
    # e.g. a process that called cdynamo.reset(): the numbering may start again
    records = _synthetic_records()[:8] + _synthetic_records()[1:8]
    _write_trace(tmp_path / "t", records)
    page = open(report.build_report(str(tmp_path / "t"), str(tmp_path / "o")),
                encoding="utf-8").read()
    assert 'id="compile-0-0"' in page and 'id="compile-0-0-2"' in page


def test_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        report.build_report(str(tmp_path / "missing"), str(tmp_path / "out"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("not a trace")
    with pytest.raises(FileNotFoundError, match=r"no trace files \(cdynamo_trace_\*\.jsonl\)"):
        report.build_report(str(tmp_path / "empty"), str(tmp_path / "out"))
    bad = _write_trace(tmp_path / "bad", [])
    with open(bad, "w") as f:
        f.write('{"event": "process_start", "ts": 1, "pid": 1}\nnot json\n'
                '{"event": "process_end", "ts": 2, "pid": 1}\n')
    with pytest.raises(ValueError, match=r"cdynamo_trace_4242_100000\.jsonl:2: not a JSON line"):
        report.build_report(str(tmp_path / "bad"), str(tmp_path / "out"))
    with open(bad, "w") as f:
        f.write('[1, 2]\n{"event": "process_end", "ts": 2, "pid": 1}\n')
    with pytest.raises(ValueError, match="must be a JSON object"):
        report.build_report(str(tmp_path / "bad"), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_command_line(tmp_path):
    trace = tmp_path / "trace"
    _write_trace(trace, _synthetic_records())
    out = subprocess.run([sys.executable, REPORT_PY, str(trace), "-o", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(tmp_path / "out" / "index.html")
    out = subprocess.run([sys.executable, REPORT_PY, str(tmp_path / "nothing")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "cdynamo-report: error:" in out.stderr and "does not exist" in out.stderr


# --- end to end: a real program's trace, its report, headless Chromium -------------------------

PROGRAM = textwrap.dedent("""\
    import torch
    import cdynamo

    def with_breaks(x):
        y = x * 2
        print("between the graphs")
        y = y + 1
        torch._dynamo.graph_break()
        return y.sin()

    def static(x):
        return x.cos() + 1

    def dynamic(x):
        return x * x + 1

    f = cdynamo.compile(with_breaks, backend="eager")
    f(torch.ones(3))
    s = cdynamo.compile(static, backend="eager", dynamic=False)
    s(torch.ones(4))
    s(torch.ones(8))                      # a new shape: recompile
    d = cdynamo.compile(dynamic, backend="eager")
    for n in (2, 5, 7):                   # automatic dynamic shapes
        d(torch.ones(n))
    """)


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _headless(browser, *args, timeout=120):
    cmd = [browser, "--headless=new", "--no-sandbox", "--disable-gpu",
           "--disable-dev-shm-usage", "--no-first-run", *args]
    # not the sanitizer settings of `make test-asan`: chromium with the ASan/UBSan runtimes
    # preloaded spins at full CPU until the timeout (the browser is not what it checks)
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS", "PYTHONMALLOC")}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def _dom_text(text):
    """text as a browser serialises it in an element's content (--dump-dom): &, < and >
    escaped, quotes not."""
    return html.escape(str(text), quote=False)


def _check_in_chromium(index, texts, tmp_path):
    """Load the report in headless Chromium: its DOM must hold every one of texts and the
    report's parts (summary, breaks, recompiles, graph code); a screenshot must be a PNG.
    Skipped (naming `make chromium`) when no chromium is installed."""
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium / chromium-browser / google-chrome on PATH: run "
                    "`make chromium` to install Debian's chromium for the browser check")
    url = "file://" + os.path.abspath(index)
    dump = _headless(browser, "--dump-dom", url)
    assert dump.returncode == 0, dump.stderr[-3000:]
    dom = dump.stdout
    for part in ('id="summary"', 'id="compile-index"', 'class="graph-break"',
                 'class="recompile"', 'class="graph-code"', 'class="guards"'):
        assert part in dom, f"{part} is not in the browser's DOM"
    for text in texts:
        assert _dom_text(text) in dom, f"{text!r} is not in the browser's DOM"
    shot = tmp_path / "report.png"
    run = _headless(browser, f"--screenshot={shot}", "--window-size=1280,2000", url)
    assert run.returncode == 0, run.stderr[-3000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_synthetic_report_in_chromium(synthetic, tmp_path):
    index, _ = synthetic
    _check_in_chromium(index, [NASTY, "CDB0001", "if x.sum() > 0 and a < b:",
                               "/src/app<1>.py:12", RECOMPILE_GUARD, GRAPH_CODE,
                               "Use torch.where <or> torch.cond"], tmp_path)


@pytest.mark.skipif(not engine_available(), reason="cdynamo._C is not built (run `make test`)")
def test_end_to_end_report_in_chromium(tmp_path):
    trace, out = tmp_path / "trace", tmp_path / "report"
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    env = dict(os.environ, CDYNAMO_TRACE=str(trace))
    env.pop("CDYNAMO_RAISE_INTERNAL_ERRORS", None)
    run = subprocess.run([sys.executable, str(prog)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "between the graphs" in run.stdout

    _check_real_trace(trace, out, tmp_path)


def _check_real_trace(trace, out, tmp_path):
    """The report of a real program's trace shows every break, recompile and graph of it."""
    files = sorted(trace.glob("cdynamo_trace_*.jsonl")) if trace.is_dir() else []
    assert files, (f"CDYNAMO_TRACE={trace} produced no trace file: the installed cdynamo "
                   "emits no trace records (is the package reinstalled with _trace.py and "
                   "its emitters?)")
    records = [json.loads(line) for f in files for line in f.read_text().splitlines()
               if line.strip()]
    events = {r.get("event") for r in records}
    assert "compile_start" in events, (
        "the trace has no compile records (events seen: "
        f"{sorted(e for e in events if e)}): the engine does not emit compile_start / "
        "graph / graph_break / recompile yet")

    index = report.build_report(str(trace), str(out))
    page = open(index, encoding="utf-8").read()

    # what the report must show: everything the trace says about breaks, recompiles, graphs
    breaks = [r for r in records if r.get("event") == "graph_break"]
    recompiles = [r for r in records if r.get("event") == "recompile"
                  or (r.get("event") == "compile_start" and r.get("reason"))]
    graphs = [r for r in records if r.get("event") == "graph"]
    assert breaks, f"no graph_break record for print() / graph_break(): {sorted(events)}"
    assert {b.get("code") for b in breaks} >= {"CDB0003", "CDB0004"}, breaks
    assert recompiles, "no recompile record for the new shape under dynamic=False"
    assert graphs, "no graph record"
    expect = []
    for b in breaks:
        expect += [b["code"], b["reason"]]
        if b.get("source"):
            expect.append(b["source"])
        if b.get("filename") is not None and b.get("lineno") is not None:
            expect.append(f"{b['filename']}:{b['lineno']}")
    expect += [r["reason"] for r in recompiles]
    for text in expect:
        assert html.escape(str(text)) in page, f"{text!r} is not in the report"
    for g in graphs:
        assert f'<pre class="graph-code">{html.escape(g["code"])}</pre>' in page
    dyn = [r for r in records if r.get("event") == "dynamic"]
    for d in dyn:
        assert html.escape(d["decision"]) in page

    _check_in_chromium(index, expect + [g["code"] for g in graphs], tmp_path)
