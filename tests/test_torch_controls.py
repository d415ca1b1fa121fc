"""torch.compiler's controls honoured by cdynamo, side by side with torch._dynamo on the same
programs (issue 26, point 3), and the drop-in (point 1): cdynamo.install() / uninstall(),
``python -m cdynamo``, cdynamo.autoinstall with CDYNAMO=1."""
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter
from torch._dynamo.utils import counters as dyn_counters

import cdynamo

pytest.importorskip("cdynamo._C")

SRC = os.path.dirname(os.path.dirname(os.path.abspath(cdynamo.__file__)))
ENGINES = ("cdynamo", "torch")


@pytest.fixture(autouse=True)
def _clean():
    torch._dynamo.reset()
    cdynamo.reset()
    dyn_counters.clear()
    cdynamo.reset_counters()
    yield
    torch.compiler.set_stance("default")
    cdynamo.uninstall()
    torch._dynamo.reset()
    cdynamo.reset()


def compile_with(engine, fn, **kw):
    kw.setdefault("backend", "eager")
    return cdynamo.compile(fn, **kw) if engine == "cdynamo" else torch.compile(fn, **kw)


def compiles(engine):
    """Graphs compiled so far by that engine (frames that produced code)."""
    if engine == "cdynamo":
        return cdynamo.counters()["compiles"]
    return dyn_counters["stats"]["unique_graphs"]


def f_sin(x):
    return x.sin() + 1


# ---- set_stance ---------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
def test_force_eager_compiles_nothing_then_default_compiles(engine):
    cf = compile_with(engine, f_sin)
    x = torch.randn(4)
    with torch.compiler.set_stance("force_eager"):
        assert torch.equal(cf(x), f_sin(x))
    assert compiles(engine) == 0
    assert torch.equal(cf(x), f_sin(x))
    assert compiles(engine) == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_force_eager_as_decorator(engine):
    cf = compile_with(engine, f_sin)

    @torch.compiler.set_stance("force_eager")
    def run(x):
        return cf(x)

    run(torch.randn(3))
    assert compiles(engine) == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_eager_on_recompile_uses_entries_and_runs_new_shapes_eagerly(engine):
    cf = compile_with(engine, f_sin, dynamic=False)
    x = torch.randn(4)
    cf(x)
    assert compiles(engine) == 1
    with torch.compiler.set_stance("eager_on_recompile"):
        y = torch.randn(5, 2)
        assert torch.equal(cf(y), f_sin(y))
        assert torch.equal(cf(x), f_sin(x))
    assert compiles(engine) == 1
    cf(torch.randn(5, 2))
    assert compiles(engine) == 2


@pytest.mark.parametrize("engine", ENGINES)
def test_fail_on_recompile_raises_naming_the_guard(engine):
    cf = compile_with(engine, f_sin, dynamic=False)
    cf(torch.randn(4))
    with torch.compiler.set_stance("fail_on_recompile"):
        cf(torch.randn(4))   # a cache hit is fine
        with pytest.raises(RuntimeError, match="Detected recompile when torch.compile stance "
                                               "is 'fail_on_recompile'") as info:
            cf(torch.randn(5, 2))
    assert "f_sin" in str(info.value)
    if engine == "cdynamo":
        assert "TENSOR_MATCH" in str(info.value)


def g_then(x):
    return x * 2 - 1


EAGER_THEN_COMPILE = textwrap.dedent("""
    import sys, torch, cdynamo
    from torch._dynamo.utils import counters
    def g(x):
        return x * 2 - 1
    engine = sys.argv[1]
    cg = cdynamo.compile(g, backend="eager") if engine == "cdynamo" else \\
        torch.compile(g, backend="eager")
    def compiles():
        return (cdynamo.counters()["compiles"] if engine == "cdynamo"
                else counters["stats"]["unique_graphs"])
    x = torch.randn(3)
    with torch.compiler.set_stance("eager_then_compile"):
        assert torch.equal(cg(x), g(x))
        first = compiles()
        assert torch.equal(cg(x), g(x))
        print("compiles", first, compiles())
""")


@pytest.mark.parametrize("engine", ENGINES)
def test_eager_then_compile_first_call_runs_eagerly(engine, tmp_path):
    # each engine in a fresh process: torch remembers first calls per file:line for the process
    (tmp_path / "prog.py").write_text(EAGER_THEN_COMPILE)
    r = _run(["prog.py", engine], {}, str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "compiles 0 1" in r.stdout


EAGER_THEN_COMPILE_DYNAMIC = textwrap.dedent("""
    import sys, torch, cdynamo
    from torch._dynamo.testing import CompileCounter
    engine = sys.argv[1]
    def compile(fn, **kw):
        return (cdynamo.compile if engine == "cdynamo" else torch.compile)(fn, **kw)
    def fn(x, y, z):
        return x * y * z[0]
    def fn_break(x, y, z):
        y = torch.sin(y)
        torch._dynamo.graph_break()
        return x * torch.cos(y) * z[0]
    def fn_static(x, y, z):
        return x * y * z[0]
    def fn_items(a, d, ls):
        return a * d["k"] + d["n"] + ls[1]
    results = []
    for f, dynamic in ((fn, None), (fn_break, None), (fn_static, False)):
        cnt = CompileCounter()
        cf = compile(f, backend=cnt, dynamic=dynamic)
        with torch.compiler.set_stance("eager_then_compile"):
            for n in (1, 2, 3):
                args = (n, torch.full((n,), 2.0), {0: torch.full((n,), 3.0)})
                assert torch.equal(cf(*args), f(*args))
        results.append(cnt.frame_count)
    cnt = CompileCounter()
    cf = compile(fn_items, backend=cnt)
    with torch.compiler.set_stance("eager_then_compile"):
        for n in (1, 2, 3, 4):
            args = (torch.ones(n, 2), {"k": torch.ones(n, 2), "n": n}, [0, torch.ones(2)])
            assert torch.equal(cf(*args), fn_items(*args))
    results.append(cnt.frame_count)
    # aot_eager_then_compile: the first call compiles with aot_eager (not counted by the
    # user's backend) and serves the same sizes after; the next sizes compile once, dynamic
    def fn_aot(x, y, z):
        return x * y.sin() * z[0]
    cnt = CompileCounter()
    cf = compile(fn_aot, backend=cnt)
    seen = []
    with torch.compiler.set_stance("aot_eager_then_compile"):
        for n in (1, 1, 2, 3, 1):
            args = (n, torch.full((n,), 2.0), {0: torch.full((n,), 3.0)})
            assert torch.allclose(cf(*args), fn_aot(*args))
            seen.append(cnt.frame_count)
    print("frames", *results, "aot", *seen)
""")


@pytest.mark.parametrize("engine", ENGINES)
def test_eager_then_compile_dims_that_change_compile_dynamic(engine, tmp_path):
    # as torch's test_set_stance_eager_then_compile: the first (eager) call's inputs and the
    # second call's decide what is dynamic, so sizes 1, 2, 3 compile once; the items of a
    # dict or list argument count too; a graph break gives two frames; dynamic=False keeps
    # every size static (one compile per size after the eager call)
    (tmp_path / "prog.py").write_text(EAGER_THEN_COMPILE_DYNAMIC)
    r = _run(["prog.py", engine], {}, str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "frames 1 2 2 1 aot 0 0 1 1 1" in r.stdout, r.stdout


def test_eager_then_compile_in_process():
    cg = cdynamo.compile(g_then, backend="eager")
    with torch.compiler.set_stance("eager_then_compile"):
        x = torch.randn(3)
        assert torch.equal(cg(x), g_then(x))
        assert compiles("cdynamo") == 0
        assert torch.equal(cg(x), g_then(x))
        assert compiles("cdynamo") == 1


def test_skip_guard_eval_unsafe_runs_the_only_entry_unchecked():
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    cf = cdynamo.compile(f_sin, backend=backend)
    x = torch.randn(4)
    cf(x)
    with torch.compiler.set_stance(skip_guard_eval_unsafe=True):
        hits = cdynamo.counters()["cache_hits"]
        assert torch.equal(cf(x), f_sin(x))
        assert cdynamo.counters()["cache_hits"] == hits + 1
    assert len(seen) == 1


def test_force_backend_compiles_new_frames_with_that_backend():
    used = []

    def mine(gm, example_inputs):
        used.append("mine")
        return gm.forward

    cf = cdynamo.compile(f_sin, backend="eager")
    with torch.compiler.set_stance("default", force_backend=mine):
        cf(torch.randn(3))
    assert used == ["mine"]


@pytest.mark.parametrize("engine", ENGINES)
def test_invalid_stance_raises_at_the_call(engine):
    cf = compile_with(engine, f_sin)
    with torch.compiler.set_stance("bogus"):
        with pytest.raises(RuntimeError, match="invalid torch.compile stance"):
            cf(torch.randn(3))


# ---- error_on_graph_break -----------------------------------------------------------------

def f_break(x):
    x = x + 1
    torch._dynamo.graph_break()
    return x * 2


@pytest.mark.parametrize("engine", ENGINES)
def test_error_on_graph_break_context_raises_unsupported(engine):
    cf = compile_with(engine, f_break)
    x = torch.randn(3)
    with torch._dynamo.error_on_graph_break(True):
        with pytest.raises(torch._dynamo.exc.Unsupported):
            cf(x)
    torch._dynamo.reset()
    cdynamo.reset()
    assert torch.equal(cf(x), f_break(x))   # off again: the break is allowed


@pytest.mark.parametrize("engine", ENGINES)
def test_error_on_graph_break_decorator(engine):
    cf = compile_with(engine, f_break)
    run = torch._dynamo.error_on_graph_break(True)(lambda x: cf(x))
    with pytest.raises(torch._dynamo.exc.Unsupported):
        run(torch.randn(3))


def test_error_on_graph_break_config_and_message():
    cf = cdynamo.compile(f_break, backend="eager")
    with cdynamo.config.patch(error_on_graph_break=True):
        with pytest.raises(torch._dynamo.exc.Unsupported) as info:
            cf(torch.randn(3))
    msg = str(info.value)
    assert "error_on_graph_break" in msg and "CDB0004" in msg
    assert "torch._dynamo.graph_break()" in msg   # the source line


def g_inner_off(x):
    x = x + 1
    with torch._dynamo.error_on_graph_break(False):
        torch._dynamo.graph_break()
    return x * 2


def g_inner_on(x):
    x = x + 1
    with torch._dynamo.error_on_graph_break(True):
        x = x * 3
        torch._dynamo.graph_break()
    return x * 2


def raised_under(fn, outer):
    """{engine: whether fn compiled by it raised Unsupported} with error_on_graph_break(outer)
    around the call; a result that does not raise must equal eager's."""
    x = torch.randn(3)
    raised = {}
    for engine in ENGINES:
        torch._dynamo.reset()
        cdynamo.reset()
        cf = compile_with(engine, fn)
        with torch._dynamo.error_on_graph_break(outer):
            try:
                torch.testing.assert_close(cf(x), fn(x))
                raised[engine] = False
            except torch._dynamo.exc.Unsupported:
                raised[engine] = True
    return raised


@pytest.mark.parametrize("outer", [True, False])
@pytest.mark.parametrize("fn", [g_inner_off, g_inner_on])
def test_error_on_graph_break_switched_inside_the_trace(fn, outer):
    """The block's flag decides at a break inside it, whatever is set outside, as torch."""
    raised = raised_under(fn, outer)
    assert raised["cdynamo"] == raised["torch"] == (fn is g_inner_on)


@torch._dynamo.error_on_graph_break(False)
def helper_allows(x):
    torch._dynamo.graph_break()
    return x + 1


@torch._dynamo.error_on_graph_break(True)
def helper_forbids(x):
    x = x * 2
    torch._dynamo.graph_break()
    return x + 1


def calls_allowing(x):
    return helper_allows(x * 3) - 1


def calls_forbidding(x):
    return helper_forbids(x * 3) - 1


@pytest.mark.parametrize("outer", [True, False])
@pytest.mark.parametrize("fn", [calls_allowing, calls_forbidding])
def test_error_on_graph_break_decorator_inside_the_trace(fn, outer):
    """A function decorated with error_on_graph_break(flag) and called from compiled code:
    its flag decides at a break inside it, as torch._dynamo."""
    raised = raised_under(fn, outer)
    assert raised["cdynamo"] == raised["torch"] == (fn is calls_forbidding)


def test_fullgraph_error_is_unsupported():
    cf = cdynamo.compile(f_break, backend="eager", fullgraph=True)
    with pytest.raises(torch._dynamo.exc.Unsupported, match="fullgraph=True"):
        cf(torch.randn(3))


# ---- install / uninstall ------------------------------------------------------------------

def test_install_routes_torch_compile_and_uninstall_restores():
    original = torch.compile
    cdynamo.install()
    assert cdynamo.is_installed()
    cf = torch.compile(f_sin, backend="eager")
    x = torch.randn(4)
    assert torch.equal(cf(x), f_sin(x))
    assert cdynamo.counters()["compiles"] == 1
    assert dyn_counters["stats"]["unique_graphs"] == 0
    m = torch.compile(torch.nn.Linear(3, 2))
    assert isinstance(m, torch._dynamo.eval_frame.OptimizedModule)
    assert isinstance(m, cdynamo.CompiledModule)
    assert isinstance(m._orig_mod, torch.nn.Linear)
    cdynamo.uninstall()
    assert torch.compile is original and not cdynamo.is_installed()


def test_install_decorator_forms_and_errors():
    cdynamo.install()

    @torch.compile
    def a(x):
        return x + 1

    @torch.compile(backend="eager", fullgraph=True)
    def b(x):
        return x - 1

    x = torch.randn(2)
    assert torch.equal(a(x), x + 1) and torch.equal(b(x), x - 1)
    with pytest.raises(ValueError, match="unknown backend 'nope'.*valid choices"):
        torch.compile(f_sin, backend="nope")
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        torch.compile(f_sin, bogus=1)


def test_install_torch_registered_backend_name_and_torch_only_argument():
    cdynamo.install()
    cf = torch.compile(f_sin, backend="aot_eager_decomp_partition")   # torch's registry only
    x = torch.randn(3)
    torch.testing.assert_close(cf(x), f_sin(x))
    assert cdynamo.counters()["compiles"] == 1
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cf2 = torch.compile(f_sin, backend="eager", recompile_limit=3)
    assert any("recompile_limit" in str(m.message) for m in w)
    cf2(x)
    assert dyn_counters["stats"]["unique_graphs"] == 1   # that one went to torch._dynamo


def test_install_optimize_reset_explain():
    cdynamo.install()
    cf = torch._dynamo.optimize("eager")(f_break)
    x = torch.randn(3)
    assert torch.equal(cf(x), f_break(x))
    assert cdynamo.counters()["compiles"] >= 1
    assert len(cdynamo.cache_entries(f_break)) == 1
    torch._dynamo.reset()
    assert len(cdynamo.cache_entries(f_break)) == 0
    out = torch._dynamo.explain(f_break)(x)
    assert out.graph_count == 2 and out.graph_break_count == 1
    cdynamo.uninstall()
    theirs = torch._dynamo.explain(f_break)(x)
    assert (out.graph_count, out.graph_break_count, out.op_count) == \
        (theirs.graph_count, theirs.graph_break_count, theirs.op_count)
    assert out.break_reasons[0].user_stack[-1].lineno == \
        theirs.break_reasons[0].user_stack[-1].lineno
    cdynamo.install()
    with pytest.raises(torch._dynamo.exc.Unsupported):
        torch._dynamo.optimize("eager", nopython=True)(f_break)(x)


def test_install_optimize_as_context_manager_is_refused_as_torch_refuses_it():
    with pytest.raises(RuntimeError, match="context manager"):
        with torch._dynamo.optimize("eager"):
            pass
    cdynamo.install()
    with pytest.raises(RuntimeError, match="context manager"):
        with torch._dynamo.optimize("eager"):
            pass


def test_mark_dynamic_of_torch_is_honoured():
    cf = cdynamo.compile(f_sin, backend="eager")
    x = torch.randn(4)
    torch._dynamo.mark_dynamic(x, 0)
    cf(x)
    cf(torch.randn(7))
    assert cdynamo.counters()["compiles"] == 1


@pytest.mark.parametrize("before_install", [True, False])
def test_substitute_in_graph_polyfill_is_traced(before_install):
    calls = []
    if not before_install:
        cdynamo.install()

    def opaque(x):
        calls.append(1)
        return x * 3

    @torch._dynamo.substitute_in_graph(opaque)
    def traced(x):
        return x * 3

    def f(x):
        return opaque(x) + 1

    cdynamo.install()
    out = cdynamo.explain(f)(torch.randn(3))
    assert out.graph_count == 1 and out.graph_break_count == 0
    assert calls == []


def _run(args, env_extra, cwd):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([cwd, SRC, env.get("PYTHONPATH", "")])
    env.update(env_extra)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


SCRIPT = textwrap.dedent("""
    import sys, torch, cdynamo
    @torch.compile(backend="eager")
    def f(x):
        return x.cos() * 2
    x = torch.randn(3)
    assert torch.equal(f(x), x.cos() * 2)
    print("installed", cdynamo.is_installed(), "compiles", cdynamo.counters()["compiles"],
          "args", sys.argv[1:])
""")


def test_python_dash_m_cdynamo_runs_a_script_installed(tmp_path):
    (tmp_path / "script.py").write_text(SCRIPT)
    r = _run(["-m", "cdynamo", "script.py", "a", "b"], {}, str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "installed True compiles 1 args ['a', 'b']" in r.stdout


@pytest.mark.parametrize("flag,installed", [("1", True), ("0", False)])
def test_autoinstall_from_sitecustomize_with_env(tmp_path, flag, installed):
    (tmp_path / "sitecustomize.py").write_text("import cdynamo_autoinstall\n")
    (tmp_path / "script.py").write_text(
        "import sys\nassert 'torch' not in sys.modules\n" + SCRIPT)
    r = _run(["script.py"], {"CDYNAMO": flag}, str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert f"installed {installed} compiles {1 if installed else 0}" in r.stdout


def test_installed_shared_settings_follow_torch_dynamo_config():
    cdynamo.install()
    before = cdynamo.config.cache_size_limit
    try:
        with torch._dynamo.config.patch(recompile_limit=2):
            cf = torch.compile(f_sin, backend="eager", dynamic=False)
            for n in range(1, 6):
                cf(torch.randn(n, 2))
            assert cdynamo.counters()["compiles"] == 2
            assert cdynamo.counters()["cache_limit_hits"] >= 1
    finally:
        cdynamo.config.cache_size_limit = before


def _sets_stance(x):
    torch.compiler.set_stance("force_eager")
    return x + 1


@torch.compiler.set_stance("force_eager")
def _decorated_with_stance(x):
    return x + 1


def _calls_decorated(x):
    return _decorated_with_stance(x)


def _dynamo_set_stance_block(x):
    with torch._dynamo.set_stance("force_eager"):
        return x + 1


@pytest.mark.parametrize("fn", [_sets_stance, _calls_decorated, _dynamo_set_stance_block])
@pytest.mark.parametrize("engine", ENGINES)
def test_set_stance_inside_compiled_code_is_refused(engine, fn):
    """set_stance itself, a function decorated with it, or torch._dynamo.set_stance (a class
    torch marks _dynamo_forbidden) used in compiled code."""
    cf = compile_with(engine, fn)
    with pytest.raises(AssertionError, match="forbidden callable"):
        cf(torch.randn(2))
    assert torch._dynamo.eval_frame._stance.stance == "default"


# ---- options["guard_filter_fn"]: torch.compiler's guard filters --------------------------

GF_SCALE = 2


def gf_f(x, n):
    return x * GF_SCALE + n


def _guard_filter_run(engine, filt):
    """Calls of gf_f compiled with filt, changing a global, an int and a size in turn:
    (frames compiled, the results)."""
    global GF_SCALE
    torch._dynamo.reset()
    cdynamo.reset()
    GF_SCALE = 2
    cnt = CompileCounter()
    comp = cdynamo.compile if engine == "cdynamo" else torch.compile
    cf = comp(gf_f, backend=cnt, dynamic=False,
              options={"guard_filter_fn": filt} if filt else None)
    r = [cf(torch.ones(3), 1).sum().item()]
    GF_SCALE = 5
    r.append(cf(torch.ones(3), 1).sum().item())
    r.append(cf(torch.ones(3), 2).sum().item())
    r.append(cf(torch.ones(4), 2).sum().item())
    GF_SCALE = 2
    return cnt.frame_count, r


@pytest.mark.parametrize("filt, expected", [
    (None, (4, [9.0, 18.0, 21.0, 28.0])),
    ("skip_guard_on_globals_unsafe", (3, [9.0, 9.0, 21.0, 28.0])),
    ("keep_tensor_guards_unsafe", (2, [9.0, 9.0, 9.0, 28.0])),
    ("keep_portable_guards_unsafe", (2, [9.0, 9.0, 9.0, 28.0])),
    ("skip_all_guards_unsafe", (1, [9.0, 9.0, 9.0, 12.0])),
])
def test_guard_filter_fn_drops_the_guards_torch_drops(filt, expected):
    # the same recompiles (and the same stale results the filter asks for) as torch._dynamo
    fn = getattr(torch.compiler, filt) if filt else None
    assert _guard_filter_run("torch", fn) == expected
    assert _guard_filter_run("cdynamo", fn) == expected


class GfModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.k = 2

    def forward(self, x):
        return self.lin(x) * self.k


@pytest.mark.parametrize("filt, recompiles", [
    (None, 2), ("skip_guard_on_all_nn_modules_unsafe", 1),
    ("skip_guard_on_inbuilt_nn_modules_unsafe", 2),
])
def test_guard_filter_fn_nn_module_filters(filt, recompiles):
    # a user module's attribute changed: guarded unless every nn.Module guard is skipped
    seen = {}
    for engine in ENGINES:
        torch._dynamo.reset()
        cdynamo.reset()
        torch.manual_seed(0)
        m = GfModule()
        cnt = CompileCounter()
        comp = cdynamo.compile if engine == "cdynamo" else torch.compile
        cm = comp(m, backend=cnt,
                  options={"guard_filter_fn": getattr(torch.compiler, filt)} if filt else None)
        x = torch.ones(2, 3)
        r = [cm(x)]
        m.k = 3
        r.append(cm(x))
        seen[engine] = (cnt.frame_count, r)
    assert seen["cdynamo"][0] == seen["torch"][0] == recompiles
    for a, b in zip(seen["cdynamo"][1], seen["torch"][1]):
        assert torch.equal(a, b)


def test_guard_filter_fn_entries_and_errors():
    got = []

    def spy(entries):
        got.extend(entries)
        return [True] * len(entries)

    cf = cdynamo.compile(gf_f, backend="eager", options={"guard_filter_fn": spy})
    assert torch.equal(cf(torch.ones(3), 1), gf_f(torch.ones(3), 1))
    by_name = {e.name: e for e in got}
    assert by_name["L['x']"].guard_type == "TENSOR_MATCH" and not by_name["L['x']"].is_global
    assert by_name["L['n']"].value == 1 and by_name["L['n']"].has_value
    assert any(e.is_global and "GF_SCALE" in e.name for e in got)
    assert all(isinstance(e, torch._dynamo.types.GuardFilterEntry) for e in got)
    # one bool per entry, as torch._dynamo asserts
    bad = cdynamo.compile(gf_f, backend="eager", options={"guard_filter_fn": lambda es: [True]})
    with pytest.raises(AssertionError, match="one bool per entry"):
        bad(torch.ones(2), 1)
    # the filter's own error reaches the caller unchanged
    def boom(entries):
        raise KeyError("from the filter")
    with pytest.raises(KeyError, match="from the filter"):
        cdynamo.compile(gf_f, backend="eager", options={"guard_filter_fn": boom})(torch.ones(2), 1)
    with pytest.raises(TypeError, match="guard_filter_fn"):
        cdynamo.compile(gf_f, backend="eager", options={"guard_filter_fn": 3})


def test_guard_filter_fn_through_install_and_optimize():
    cdynamo.install()
    try:
        cnt = CompileCounter()
        cf = torch.compile(gf_f, backend=cnt, dynamic=False,
                           options={"guard_filter_fn": torch.compiler.skip_all_guards_unsafe})
        cf(torch.ones(3), 1)
        assert torch.equal(cf(torch.ones(3), 2), torch.ones(3) * GF_SCALE + 1)   # stale, asked for
        def g(x, n):
            return x * 3 + n
        opt = torch._dynamo.optimize(cnt, guard_filter_fn=torch.compiler.skip_all_guards_unsafe)
        of = opt(g)
        of(torch.ones(3), 1)
        assert torch.equal(of(torch.ones(4), 2), torch.ones(4) * 3 + 1)   # n=1 baked in: no guard
        assert cnt.frame_count == 2 and cdynamo.counters()["compiles"] >= 2
    finally:
        cdynamo.uninstall()


def gfail_fn(x, y):
    if x.shape[0] < 3:
        return x * y
    return -1


@pytest.mark.parametrize("engine", ENGINES)
def test_optimize_guard_fail_fn_called_with_guard_fail(engine):
    # torch._dynamo.optimize(guard_fail_fn=fn): fn(GuardFail(reason, orig_code)) before the
    # recompile, as torch._dynamo; a failed TENSOR_MATCH worded as torch._dynamo words it
    # (test_misc's test_guard_failure_fn2 looks for "tensor 'x' size mismatch ...")
    torch._dynamo.reset()
    if engine == "cdynamo":
        cdynamo.install()
    try:
        got = []
        opt_fn = torch._dynamo.optimize("eager", nopython=True, guard_fail_fn=got.append)(gfail_fn)
        opt_fn(torch.randn(2, 2), torch.randn(2, 2))
        assert got == []
        x = torch.randn(5, 5)
        assert opt_fn(x, x) == -1
        assert len(got) == 1 and isinstance(got[0], torch._dynamo.types.GuardFail)
        assert got[0].orig_code is gfail_fn.__code__
        assert "tensor 'x' size mismatch at index 0. expected 2, actual 5" in got[0].reason
        if engine == "cdynamo":
            assert cdynamo.counters()["compiles"] >= 2
    finally:
        if engine == "cdynamo":
            cdynamo.uninstall()


# ---- torch._dynamo.disable forms called from compiled code; one cache per backend --------


def _fresh_engine(engine):
    """Both engines reset; (engine's compile function, a new CompileCounter)."""
    torch._dynamo.reset()
    cdynamo.reset()
    return (cdynamo.compile if engine == "cdynamo" else torch.compile), CompileCounter()


def _nr_fn2(x):
    return x + 1


@torch._dynamo.disable(recursive=False)
def _nr_fn1(x):
    if torch.compiler.is_compiling():
        raise RuntimeError("bad: the non-recursively disabled frame was compiled")
    return _nr_fn2(x.sigmoid().cos())


def _nr_fn(x):
    return _nr_fn1(x.tan())


@pytest.mark.parametrize("engine", ENGINES)
def test_disable_non_recursive_runs_the_frame_eagerly_and_compiles_callees(engine):
    # as torch's test_disable_recursive_false: the wrapped frame runs uncompiled, the
    # function it calls is compiled (2 frames: the caller's graph and _nr_fn2's)
    comp, cnt = _fresh_engine(engine)
    x = torch.randn(4)
    assert torch.allclose(comp(_nr_fn, backend=cnt)(x), _nr_fn(x))
    assert cnt.frame_count == 2


class _DisLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer0 = torch.nn.Linear(4, 4)

    def forward(self, inp):
        return self.layer0(torch.sigmoid(inp))


class _DisModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer0 = _DisLinear()
        self.layer1 = torch.nn.Linear(4, 4)

    def forward(self, inp):
        return self.layer1(self.layer0(torch.sin(inp)))


@pytest.mark.parametrize("engine", ENGINES)
def test_disabled_submodule_called_from_compiled_code(engine):
    # torch._dynamo.disable(module) inside a compiled model: a graph break around it (it
    # was put in the graph as torch.nn's _wrapped_call_impl, which failed when run)
    torch._dynamo.reset()
    cdynamo.reset()
    torch.manual_seed(0)
    model = _DisModel()
    model.layer0.register_forward_pre_hook(lambda mod, args: (args[0].sigmoid(),))
    model.layer0 = torch._dynamo.disable(model.layer0)
    cnt = CompileCounter()
    comp = cdynamo.compile if engine == "cdynamo" else torch.compile
    x = torch.randn(4)
    assert torch.allclose(comp(model, backend=cnt)(x), model(x))
    assert cnt.frame_count == 2


def _be_f(x):
    return x.sin() + 1


@pytest.mark.parametrize("engine", ENGINES)
def test_each_backend_compiles_its_own_entries(engine):
    # the same code compiled with two backends: each backend compiles it once and its
    # compiled function uses only its own entries (cdynamo reused the first backend's)
    torch._dynamo.reset()
    cdynamo.reset()
    c1, c2 = CompileCounter(), CompileCounter()
    comp = cdynamo.compile if engine == "cdynamo" else torch.compile
    a, b, a2 = comp(_be_f, backend=c1), comp(_be_f, backend=c2), comp(_be_f, backend=c1)
    x = torch.randn(3)
    for fn in (a, b, a2, a, b):
        assert torch.equal(fn(x), _be_f(x))
    assert (c1.frame_count, c2.frame_count) == (1, 1)


def _dis_fn(a):
    x = torch.add(a, 1)
    x = torch.add(x, 1)
    x = torch.sub(x, 1)
    x = torch.add(x, 1)
    return torch.add(x, 1)


@pytest.mark.parametrize("engine", ENGINES)
def test_disallow_in_graph_breaks_at_the_op(engine):
    torch._dynamo.reset()
    cdynamo.reset()
    torch._dynamo.disallow_in_graph(torch.sub)
    try:
        cnt = CompileCounter()
        comp = cdynamo.compile if engine == "cdynamo" else torch.compile
        x = torch.ones(3)
        assert torch.equal(comp(_dis_fn, backend=cnt)(x), _dis_fn(x))
        assert (cnt.frame_count, cnt.op_count) == (2, 4)
    finally:
        torch._dynamo.allow_in_graph(torch.sub)


@torch._dynamo.nonstrict_trace
def _ns_traced(x, p):
    torch._dynamo.graph_break()   # run opaquely at trace time: no break
    return x * p["scale"] + p["shift"]


def _ns_caller(x):
    return _ns_traced(x + 1, {"scale": 2, "shift": torch.ones(3)})


@pytest.mark.parametrize("engine", ENGINES)
def test_nonstrict_trace_function_is_one_opaque_node(engine):
    comp, cnt = _fresh_engine(engine)
    x = torch.ones(3)
    assert torch.equal(comp(_ns_caller, backend=cnt, fullgraph=True)(x), _ns_caller(x))
    assert cnt.frame_count == 1


def _eogb_two_breaks(x):
    x = x + 1
    with torch._dynamo.error_on_graph_break(False):
        torch._dynamo.graph_break()
        x = x + 2
        torch._dynamo.graph_break()
    return x + 4


def _eogb_break_after_block(x):
    x = x + 1
    with torch._dynamo.error_on_graph_break(False):
        torch._dynamo.graph_break()
        x = x + 2
    torch._dynamo.graph_break()
    return x + 4


@pytest.mark.parametrize("engine", ENGINES)
def test_error_on_graph_break_block_survives_a_break_inside_it(engine):
    # as torch's test_error_on_graph_break (f3): the resume function after the first break
    # is still inside the False block, so the second break is allowed (3 frames); after the
    # block the outer True applies again
    torch._dynamo.reset()
    cdynamo.reset()
    comp = cdynamo.compile if engine == "cdynamo" else torch.compile
    cnt = CompileCounter()
    f = torch._dynamo.error_on_graph_break(True)(comp(_eogb_two_breaks, backend=cnt))
    x = torch.ones(3)
    assert torch.equal(f(x), x + 7)
    assert cnt.frame_count == 3
    g = torch._dynamo.error_on_graph_break(True)(comp(_eogb_break_after_block, backend=cnt))
    with pytest.raises(torch._dynamo.exc.Unsupported):
        g(x)


def _cd_fn3(x):
    if torch.compiler.is_compiling():
        return x - 1
    return _nr_fn2(x) + 2


def _cd_outer(f, x):
    return f(x)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("recursive", [False, True])
def test_compiling_a_disabled_function_compiles_it(engine, recursive):
    # torch.compile(torch._dynamo.disable(f)) compiles f (innermost_fn); called from compiled
    # code the disabled function runs eagerly (and its callee is compiled when recursive=False)
    torch._dynamo.reset()
    cdynamo.reset()
    comp = cdynamo.compile if engine == "cdynamo" else torch.compile
    dis = torch._dynamo.disable(_cd_fn3, recursive=recursive)
    x = torch.ones(3)
    cnt = CompileCounter()
    assert torch.equal(comp(dis, backend=cnt)(x), x - 1) and cnt.frame_count == 1
    cnt = CompileCounter()
    assert torch.equal(comp(_cd_outer, backend=cnt)(dis, x), x + 3)
    assert cnt.frame_count == (1 if not recursive else 0)


# ---- torch._dynamo.run() around a compiled function --------------------------------------

def f_run_only(x):
    return torch.relu(torch.cos(x) + torch.sin(x))


@pytest.mark.parametrize("engine", ENGINES)
def test_dynamo_run_around_a_compiled_function_runs_entries_and_compiles_nothing(engine):
    # torch._dynamo.run(): cached entries still serve their inputs, a new input is run as is
    # (as torch's test_misc test_nested_optimize_run)
    cnt = CompileCounter()
    fn = compile_with(engine, f_run_only, backend=cnt)
    fn(torch.randn(4))
    fn(torch.randn(4, 4))
    assert cnt.frame_count == 2
    runner = torch._dynamo.run(fn)
    x = torch.randn(4, 4, 4)
    assert torch.equal(runner(x), f_run_only(x))
    assert cnt.frame_count == 2
    x = torch.randn(4, 4)
    assert torch.equal(runner(x), f_run_only(x))
    assert cnt.frame_count == 2
    fn(torch.randn(4, 4, 4))    # outside run(): compiled again
    assert cnt.frame_count == 3


@pytest.mark.parametrize("engine", ENGINES)
def test_dynamo_run_uses_an_entry_of_another_backend(engine):
    # as torch's test_nested_optimize: fn2 = compile(compile(f)); run()(fn1) reuses fn2's entry
    c1, c2 = CompileCounter(), CompileCounter()
    fn1 = compile_with(engine, f_run_only, backend=c1)
    fn2 = compile_with(engine, fn1, backend=c2)
    fn2(torch.randn(4))
    assert (c1.frame_count, c2.frame_count) == (0, 1)
    torch._dynamo.run()(fn1)(torch.randn(4))
    assert (c1.frame_count, c2.frame_count) == (0, 1)
