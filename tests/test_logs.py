"""Logs by artifact (issue 26, point 4): CDYNAMO_LOGS / cdynamo.set_logs, and TORCH_LOGS /
torch._logging.set_logs once installed, compared with what torch._dynamo logs for the same
programs."""
import logging
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

import cdynamo
from cdynamo import _logging

pytest.importorskip("cdynamo._C")

SRC = os.path.dirname(os.path.dirname(os.path.abspath(cdynamo.__file__)))

PROGRAM = textwrap.dedent("""
    import sys, torch, cdynamo
    def f(x):
        x = x + 1
        print("p")
        return x * 2
    engine = sys.argv[1]
    if engine == "installed":
        cdynamo.install()
    compile = cdynamo.compile if engine == "cdynamo" else torch.compile
    cf = compile(f, backend="eager", dynamic=False)
    cf(torch.randn(3))
    cf(torch.randn(4))
    cf(torch.randn(4))
""")


def run(engine, env, tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    e = dict(os.environ)
    e.pop("TORCH_LOGS", None)
    e.pop("CDYNAMO_LOGS", None)
    e["PYTHONPATH"] = os.pathsep.join([SRC, e.get("PYTHONPATH", "")])
    e.update(env)
    r = subprocess.run([sys.executable, str(prog), engine], capture_output=True, text=True,
                       env=e, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stderr


def counts(text):
    """(graph breaks at prog.py:5, recompiles of f, failed guard lines) in a log."""
    breaks = len(re.findall(r"Graph break.* in user code at .*prog\.py:5", text))
    recompiles = len(re.findall(r"Recompiling function f in .*prog\.py:3", text))
    guards = len(re.findall(r"triggered by the following guard failure", text))
    return breaks, recompiles, guards


@pytest.fixture(autouse=True)
def _restore_logs():
    yield
    cdynamo.set_logs()
    cdynamo.uninstall()


def test_cdynamo_logs_match_torch_logs_side_by_side(tmp_path):
    torch_log = run("torch", {"TORCH_LOGS": "graph_breaks,recompiles"}, tmp_path)
    ours = run("cdynamo", {"CDYNAMO_LOGS": "graph_breaks,recompiles"}, tmp_path)
    assert counts(ours) == counts(torch_log) == (2, 1, 2)   # f and its resume function
    assert "size mismatch at index 0. expected 3, actual 4" in ours
    # catalogue code, the source line with a caret, the user stack, the hint
    assert "[CDB0003]" in ours and 'print("p")\n    ^^^^^^^^^^' in ours
    assert "User code traceback:" in ours and "in <module>" in ours and "Hint:" in ours


def test_torch_logs_drive_cdynamo_once_installed(tmp_path):
    ours = run("installed", {"TORCH_LOGS": "graph_breaks,recompiles"}, tmp_path)
    assert counts(ours)[:2] == (2, 1)
    assert "cdynamo.graph_breaks" in ours and "[__graph_breaks]" not in ours


def test_nothing_logged_without_a_setting(tmp_path):
    assert counts(run("cdynamo", {}, tmp_path)) == (0, 0, 0)


def test_plus_cdynamo_is_debug_and_minus_is_error(tmp_path):
    debug = run("cdynamo", {"CDYNAMO_LOGS": "+cdynamo"}, tmp_path)
    assert "start tracing f" in debug
    quiet = run("cdynamo", {"CDYNAMO_LOGS": "-cdynamo"}, tmp_path)
    assert "start tracing" not in quiet and "Graph break" not in quiet


def g(x):
    y = x.cos()
    torch._dynamo.graph_break()
    return y + 1


def test_set_logs_artifacts_are_child_loggers_of_cdynamo(caplog):
    cdynamo.set_logs(guards=True, graph_code=True, bytecode=True, dynamic=True, graph=True)
    assert logging.getLogger("cdynamo.guards").level == logging.DEBUG
    with caplog.at_level(logging.DEBUG, logger="cdynamo.guards"):
        cf = cdynamo.compile(g, backend="eager")
        cf(torch.randn(3))
        cf(torch.randn(5))
    names = {r.name for r in caplog.records}
    assert {"cdynamo.guards", "cdynamo.graph_code", "cdynamo.bytecode", "cdynamo.graph",
            "cdynamo.dynamic"} <= names
    text = "\n".join(r.getMessage() for r in caplog.records)
    # (graph text as torch._dynamo's: the input is L_x_, the node named after y)
    assert "TENSOR_MATCH" in text and "y = l_x_.cos()" in text
    assert "MODIFIED BYTECODE" in text and "L['x'].size()[0]: symbolic" in text
    cdynamo.reset()


def test_python_logging_configuration_works_as_usual(caplog):
    cf = cdynamo.compile(g, backend="eager")
    with caplog.at_level(logging.DEBUG, logger="cdynamo.graph_breaks"):
        cf(torch.randn(3))
    assert [r.name for r in caplog.records if r.name.startswith("cdynamo.")] == \
        ["cdynamo.graph_breaks"]
    cdynamo.reset()


def test_set_logs_errors_name_the_valid_artifacts():
    with pytest.raises(ValueError, match="unknown log artifact 'nope'.*graph_breaks"):
        cdynamo.set_logs(nope=True)
    with pytest.raises(TypeError):
        cdynamo.set_logs(graph_breaks="yes")


def test_parse_spec():
    assert _logging.parse_spec("+cdynamo,graph_breaks, recompiles,aot_graphs") == \
        {"cdynamo": logging.DEBUG, "graph_breaks": True, "recompiles": True}
    assert _logging.parse_spec("-dynamo") == {"cdynamo": logging.ERROR}
