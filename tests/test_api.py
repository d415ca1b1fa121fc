"""The public API: argument errors, decorator forms, modules, config, output_code."""
import traceback

import pytest
import torch
import torch.nn as nn

import cdynamo
import models
from conftest import requires_engine
from helpers import CountingBackend


def add(a, b):
    return a + b


# --- errors (no engine needed: arguments are checked first) ---------------------------------

def test_not_callable():
    with pytest.raises(TypeError, match="not callable"):
        cdynamo.compile(42)


def test_unknown_backend_lists_choices():
    with pytest.raises(ValueError) as e:
        cdynamo.compile(add, backend="tensorrt")
    msg = str(e.value)
    assert "'tensorrt'" in msg
    for name in ("eager", "aot_eager", "inductor", "callable"):
        assert name in msg


def test_unknown_backend_in_decorator_form_fails_early():
    with pytest.raises(ValueError, match="aot_eager"):
        cdynamo.compile(backend="nope")


def test_dynamic_values_accepted():
    for dynamic in (None, True, False):
        f = cdynamo.compile(add, backend="eager", dynamic=dynamic)
        assert torch.equal(f(torch.ones(3), torch.ones(3)), torch.full((3,), 2.0))
    assert "dynamic" in cdynamo.compile.__doc__ and "symbolic" in cdynamo.compile.__doc__


def test_bad_options():
    with pytest.raises(TypeError, match="dynamic must be None, True or False"):
        cdynamo.compile(add, dynamic="yes")
    with pytest.raises(TypeError, match="fullgraph must be a bool"):
        cdynamo.compile(add, fullgraph="yes")
    with pytest.raises(ValueError, match="inductor"):
        cdynamo.compile(add, backend="eager", mode="max-autotune")
    with pytest.raises(TypeError, match="str or a callable"):
        cdynamo.compile(add, backend=3)


def test_disable_returns_model():
    assert cdynamo.compile(add, disable=True) is add


def test_config_errors_and_defaults():
    cfg = cdynamo.config
    assert cfg.cache_size_limit == 8
    assert isinstance(cfg.output_code, bool) and isinstance(cfg.verbose, bool)
    with pytest.raises(AttributeError) as e:
        cfg.cache_limit = 3
    assert "output_code" in str(e.value) and "cache_size_limit" in str(e.value)
    with pytest.raises(TypeError):
        cfg.output_code = "yes"
    with pytest.raises(ValueError):
        cfg.cache_size_limit = 0
    with pytest.raises(TypeError):
        cfg.cache_size_limit = 2.5
    with cfg.patch(cache_size_limit=3):
        assert cfg.cache_size_limit == 3
    assert cfg.cache_size_limit == 8


def test_output_code_env_default(monkeypatch):
    import importlib
    import subprocess
    import sys
    code = "import cdynamo; print(cdynamo.config.output_code)"
    env = dict(__import__("os").environ, CDYNAMO_OUTPUT_CODE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "True", out.stderr
    importlib.import_module("cdynamo.config")


# --- with the engine ------------------------------------------------------------------------

@requires_engine
def test_decorator_forms():
    @cdynamo.compile
    def f1(x):
        return x * 2

    @cdynamo.compile(backend="eager")
    def f2(x):
        return x * 3

    def f3(x):
        return x * 4

    g3 = cdynamo.compile(f3, backend="eager")
    x = torch.randn(3)
    assert torch.equal(f2(x), x * 3)
    assert torch.equal(g3(x), x * 4)
    assert torch.allclose(f1(x), x * 2)
    assert f2.__name__ == "f2" and g3.__wrapped__ is f3
    assert len(cdynamo.cache_entries(f2)) == 1 and len(cdynamo.cache_entries(g3)) == 1


@requires_engine
def test_compile_config_change_takes_effect():
    cdynamo.config.cache_size_limit = 1
    try:
        counter = CountingBackend()
        f = cdynamo.compile(add, backend=counter)
        f(torch.randn(2), torch.randn(2))
        f(torch.randn(3), torch.randn(3))
        assert counter.frame_count == 1
    finally:
        cdynamo.config.cache_size_limit = 8


@requires_engine
def test_method_decoration_and_bound_method():
    class Scaler:
        def __init__(self, k):
            self.k = k

        @cdynamo.compile(backend="eager")
        def scale(self, x):
            return x * self.k

    s = Scaler(3)
    x = torch.randn(4)
    assert torch.equal(s.scale(x), x * 3)

    class Other:
        def run(self, x):
            return x + 1

    o = Other()
    f = cdynamo.compile(o.run, backend="eager")
    assert torch.equal(f(x), x + 1)
    assert len(cdynamo.cache_entries(o.run)) == 1


@requires_engine
def test_compiled_module_forwards_attributes():
    mlp = models.MLP().eval()
    opt = cdynamo.compile(mlp, backend="eager")
    assert isinstance(opt, cdynamo.CompiledModule) and isinstance(opt, nn.Module)
    assert opt._orig_mod is mlp
    assert opt.fc1 is mlp.fc1
    assert list(opt.state_dict().keys()) == list(mlp.state_dict().keys())
    opt.train()
    assert mlp.training and opt.training
    opt.eval()
    assert not mlp.training and not opt.training
    x, = models.mlp_inputs()
    with torch.no_grad():
        assert torch.equal(opt(x), mlp(x))
    assert len(cdynamo.cache_entries(opt)) == 1
    assert len(cdynamo.cache_entries(mlp)) == 1


@requires_engine
def test_torch_module_forward_is_compiled():
    counter = CountingBackend()
    lin = nn.Linear(3, 2)
    opt = cdynamo.compile(lin, backend=counter)
    x = torch.randn(4, 3)
    assert torch.equal(opt(x), lin(x))
    assert counter.frame_count == 1


def raises_inside(x):
    y = x + 1
    raise ValueError("user error 123")


@requires_engine
def test_user_exception_reaches_user_unchanged():
    f = cdynamo.compile(raises_inside, backend="eager")
    with pytest.raises(ValueError, match="user error 123") as e:
        f(torch.randn(2))
    frames = [fr.name for fr in traceback.extract_tb(e.value.__traceback__)]
    assert "raises_inside" in frames


def shape_error(x):
    return x @ x


@requires_engine
def test_runtime_error_from_graph_reaches_user():
    f = cdynamo.compile(shape_error, backend="eager")
    with pytest.raises(RuntimeError):
        f(torch.randn(2, 3))


@requires_engine
def test_output_code_prints_report(capsys):
    def toy_example(a, b):
        x = a / (torch.abs(a) + 1)
        return x * b

    with cdynamo.config.patch(output_code=True):
        cdynamo.compile(toy_example, backend="eager")(torch.randn(10), torch.randn(10))
    captured = capsys.readouterr()
    text = captured.out + captured.err
    for needle in ("__compiled_fn", "placeholder", "call_function", "ORIGINAL BYTECODE toy_example",
                   "MODIFIED BYTECODE", "GUARDS:", "TENSOR_MATCH"):
        assert needle in text, needle


@requires_engine
def test_counters_and_explain():
    c = cdynamo.counters()
    for key in ("frames", "cache_hits", "cache_misses", "compiles", "unmodified", "cache_limit_hits"):
        assert isinstance(c[key], int)
    report = cdynamo.explain(add)(torch.randn(2), torch.randn(2))
    assert report.graph_count == 1 and report.graph_break_count == 0
    assert report.ops_per_graph and len(report.ops_per_graph[0]) == 1
    assert any("TENSOR_MATCH" in g for g in report.guards)
    assert "Graph Count: 1" in str(report)
    assert cdynamo.cache_entries(add) == []
    assert cdynamo.graph_break() is None


def test_report_format_without_engine():
    from cdynamo._report import format_output_code, format_table

    def toy_example(a, b):
        x = a / (torch.abs(a) + 1)
        return x * b

    gm = torch.fx.symbolic_trace(toy_example)
    text = format_output_code("__compiled_fn_0", gm, toy_example.__code__, toy_example.__code__,
                              ["local 'a' TENSOR_MATCH", "global 'torch' FUNCTION_MATCH"])
    lines = text.splitlines()
    assert lines[0].startswith("__compiled_fn_0 <eval_with_key>.")
    assert lines[1].split() == ["opcode", "name", "target", "args", "kwargs"]
    assert set(lines[2].replace(" ", "")) == {"-"}
    assert lines[3].split()[:3] == ["placeholder", "a", "a"]
    assert any(l.startswith("call_function  truediv") for l in lines)
    assert f"ORIGINAL BYTECODE toy_example {toy_example.__code__.co_filename} " in text
    assert "MODIFIED BYTECODE" in text and "BINARY_OP" in text
    assert text.endswith("GUARDS:\n - local 'a' TENSOR_MATCH\n - global 'torch' FUNCTION_MATCH")
    assert format_table(["x", "y"], [[1, 22]]).splitlines() == ["x    y", "---  ---", "1    22"]


def _explain_breaking(a, b):
    x = a * 2
    if x.sum() > 0:  # line tested below
        return x + b
    return x - b


@requires_engine
def test_explain_reports_graph_breaks():
    import inspect
    a = torch.ones(3)
    report = cdynamo.explain(_explain_breaking)(a, torch.ones(3))
    torch.testing.assert_close(report.out, _explain_breaking(a, torch.ones(3)))
    # the prefix graph (mul, sum, gt) and the resume function's graph (add)
    assert report.graph_count == 2
    assert report.graph_break_count == 1
    brk = report.break_reasons[0]
    lines, first = inspect.getsourcelines(_explain_breaking)
    assert brk.lineno == first + 2 and brk.filename == __file__
    assert "tensor" in brk.reason
    text = str(report)
    assert "Graph Break Count: 1" in text and f"{__file__}:{first + 2}" in text


@requires_engine
def test_output_code_prints_resume_functions(capsys):
    with cdynamo.config.patch(output_code=True):
        cdynamo.compile(_explain_breaking, backend="eager")(torch.ones(3), torch.ones(3))
    text = capsys.readouterr().out
    assert "RESUME FUNCTION" in text and "__resume_at_" in text
    cdynamo.reset()
