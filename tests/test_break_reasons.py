"""The catalogue of graph-break reasons (issue 7, Scope 6): codes in logs, explain() and
fullgraph errors."""
import logging

import pytest
import torch

import cdynamo
from cdynamo import break_reasons


def prints(x):
    y = x + 1
    print("hello")
    return y * 2


def branches(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def test_catalogue_codes_are_unique_and_the_last_entry_matches_anything():
    codes = [r.code for r in break_reasons.CATALOGUE]
    assert len(codes) == len(set(codes))
    assert break_reasons.classify("something nobody wrote down").code == "CDB9999"
    with pytest.raises(KeyError, match="valid codes"):
        break_reasons.lookup("nope")


@pytest.mark.parametrize("fn, code", [(prints, "CDB0003"), (branches, "CDB0001")],
                         ids=["print", "branch"])
def test_explain_reports_codes(fn, code):
    out = cdynamo.explain(fn)(torch.ones(3))
    assert out.graph_break_count == 1
    b = out.break_reasons[0]
    assert b.code == code and b.hint and b.explanation
    assert out.reasons_by_code == {code: 1}
    assert f"[{code}]" in str(out)


def test_log_line_carries_the_code(caplog):
    with caplog.at_level(logging.INFO, logger="cdynamo"):
        cdynamo.compile(prints, backend="eager")(torch.ones(3))
    lines = [r.getMessage() for r in caplog.records if "Graph break" in r.getMessage()]
    assert len(lines) == 1 and "[CDB0003]" in lines[0]


def test_fullgraph_error_carries_code_and_hint():
    with pytest.raises(RuntimeError) as e:
        cdynamo.compile(branches, backend="eager", fullgraph=True)(torch.ones(3))
    assert "[CDB0001]" in str(e.value) and "hint:" in str(e.value)


def loop_break(x):
    for i in range(3):
        print(i)
        x = x + 1
    return x


def test_unmodified_frames_are_listed_by_explain():
    with cdynamo.config.patch(graph_break_in_loops=False):
        out = cdynamo.explain(loop_break)(torch.ones(3))
    assert [b.code for b in out.unmodified_frames] == ["CDB0005"]
    assert out.reasons_by_code == {"CDB0005": 1}
