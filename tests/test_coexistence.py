"""cdynamo beside torch._dynamo and other PEP 523 hooks (issue 8, scope 1).

Every program that nests the two compilers runs in its own process with a timeout, so a
regression (the two frame hooks calling each other forever, as main did on torch.cond) fails
instead of hanging the suite. Each compares with eager and checks, through each compiler's own
caches and counters, that each one compiled its part and nothing of the other's.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import cdynamo

_C = pytest.importorskip("cdynamo._C")

# the directory the cdynamo under test was imported from (src/ with an in-place build, or the
# venv's site-packages after `make test`), so the child runs the same build
SRC = os.path.dirname(os.path.dirname(os.path.abspath(cdynamo.__file__)))

PRELUDE = """
import json, sys, faulthandler
faulthandler.dump_traceback_later(TIMEOUT - 5, exit=True)
import torch, torch._dynamo, cdynamo
from cdynamo import _C
from torch._dynamo.utils import counters as dyn_counters
from torch._dynamo.eval_frame import _debug_get_cache_entry_list as dyn_entries
out = {}

def done():
    assert not _C.hook_installed()
    assert _C.thread_state() == (0, 0)
    assert torch._C._dynamo.eval_frame.get_eval_frame_callback() is None
    print("RESULT " + json.dumps(out))
"""


def run_program(body, timeout=240):
    """Run PRELUDE + body in a fresh interpreter; the dict it printed as RESULT."""
    code = PRELUDE.replace("TIMEOUT", str(timeout)) + textwrap.dedent(body) + "\ndone()\n"
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"program hung (> {timeout}s):\n{e.stderr}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def test_torch_cond_inside_cdynamo_eager():
    # torch.cond's eager path runs torch.compile: torch._dynamo installs its hook over ours.
    r = run_program("""
        def f(x):
            return torch.cond(x.sum() > 0, lambda y: y.sin(), lambda y: y.cos(), (x,)) + 1
        cf = cdynamo.compile(f, backend="eager")
        x = torch.randn(6)
        ok = []
        for _ in range(3):
            for v in (x.abs() + 0.1, -x.abs() - 0.1):
                ok.append(torch.equal(cf(v), f(v)))
        out["ok"] = ok
        out["cdynamo_compiles"] = cdynamo.counters()["compiles"]
        out["f_entries"] = len(cdynamo.cache_entries(f))
        out["dynamo_graphs"] = dyn_counters["stats"]["unique_graphs"]
    """)
    assert all(r["ok"]) and len(r["ok"]) == 6
    assert r["cdynamo_compiles"] >= 1 and r["f_entries"] >= 1
    assert r["dynamo_graphs"] >= 1      # torch._dynamo compiled cond's branches itself


def test_torch_cond_inside_cdynamo_inductor_no_hang():
    # main looped forever on the second call of this program (inductor backend).
    r = run_program("""
        def f(x):
            return torch.cond(x.sum() > 0, lambda y: y.sin(), lambda y: y.cos(), (x,))
        cf = cdynamo.compile(f, backend="inductor")
        x = torch.randn(4)
        out["ok"] = [torch.allclose(cf(v), f(v)) for v in (x.abs(), -x.abs(), x.abs(), -x.abs())]
    """)
    assert r["ok"] == [True] * 4


def test_torch_compile_inside_cdynamo():
    r = run_program("""
        def g(x):
            return torch.sin(x) * 2 + 1
        tg = torch.compile(g, backend="eager")
        def f(x):
            y = x + 1
            return tg(y) - 3
        cf = cdynamo.compile(f, backend="eager")
        x = torch.randn(5)
        out["ok"] = [torch.equal(cf(x), f(x)) for _ in range(3)]
        out["f_entries"] = len(cdynamo.cache_entries(f))
        out["g_cdynamo_entries"] = len(_C.cache_entries(g.__code__))
        out["g_dynamo_entries"] = len(dyn_entries(g.__code__))
        out["f_dynamo_entries"] = len(dyn_entries(f.__code__))
        out["dynamo_frames_ok"] = dyn_counters["frames"]["ok"]
    """)
    assert all(r["ok"])
    assert r["f_entries"] >= 1            # cdynamo compiled f (graph break at tg)
    assert r["g_dynamo_entries"] == 1     # torch._dynamo compiled g, once
    assert r["g_cdynamo_entries"] == 0    # ... and cdynamo did not translate it
    assert r["f_dynamo_entries"] == 0     # torch._dynamo did not translate cdynamo's frame
    assert r["dynamo_frames_ok"] == 1


def test_cdynamo_inside_torch_compile():
    r = run_program("""
        import cdynamo._glue as glue
        def g(x):
            return torch.sin(x) * 2 + 1
        cg = cdynamo.compile(g, backend="eager")
        def f(x):
            y = x + 1
            return cg(y) - 3
        tf = torch.compile(f, backend="eager")
        x = torch.randn(5)
        out["ok"] = [torch.equal(tf(x), f(x)) for _ in range(3)]
        out["g_cdynamo_entries"] = len(cdynamo.cache_entries(g))
        out["f_dynamo_entries"] = len(dyn_entries(f.__code__))
        out["g_dynamo_entries"] = len(dyn_entries(g.__code__))
        # torch._dynamo never saw cdynamo's internals (the translator's glue)
        out["glue_dynamo_entries"] = sum(
            len(dyn_entries(v.__code__)) for v in vars(glue).values()
            if callable(v) and hasattr(v, "__code__"))
        out["dynamo_frames"] = dict(dyn_counters["frames"])
        out["cdynamo_compiles"] = cdynamo.counters()["compiles"]
    """)
    assert all(r["ok"])
    assert r["f_dynamo_entries"] == 1     # torch._dynamo compiled f (graph break at cg)
    assert r["g_cdynamo_entries"] == 1    # cdynamo compiled g, once
    assert r["g_dynamo_entries"] == 0
    assert r["glue_dynamo_entries"] == 0
    # f and its resume function after the break: nothing of cdynamo's
    assert r["dynamo_frames"]["total"] <= 2, r["dynamo_frames"]
    assert r["cdynamo_compiles"] == 1


def test_both_orders_repeated_and_nested_three_deep():
    r = run_program("""
        def g(x):
            return x.cos() + 2
        def h(x):
            return x * 3 - 1
        tg = torch.compile(g, backend="eager")
        ch = cdynamo.compile(h, backend="eager")
        def c_outer(x):            # cdynamo -> torch.compile -> (eager)
            return tg(x) * 2
        def t_outer(x):            # torch.compile -> cdynamo
            return ch(x) + 1
        def c_deep(x):             # cdynamo -> torch.compile -> cdynamo
            return tt(x) - 1
        def t_mid(x):
            return ch(x.sin()) * 2
        tt = torch.compile(t_mid, backend="eager")
        def t_deep(x):             # torch.compile -> cdynamo -> torch.compile
            return cc(x) + 5
        def c_mid(x):
            return tg(x + 1) / 2
        cc = cdynamo.compile(c_mid, backend="eager")
        cf = cdynamo.compile(c_outer, backend="eager")
        tf = torch.compile(t_outer, backend="eager")
        cd = cdynamo.compile(c_deep, backend="eager")
        td = torch.compile(t_deep, backend="eager")
        x = torch.randn(7)
        ok = []
        for _ in range(3):
            for fn, ref in ((cf, c_outer), (tf, t_outer), (cd, c_deep), (td, t_deep)):
                ok.append(torch.allclose(fn(x), ref(x)))
                ok.append(_C.thread_state() == (0, 0) and not _C.hook_installed())
        out["ok"] = ok
        out["cdynamo"] = {n: len(_C.cache_entries(fn.__code__))
                          for n, fn in (("h", h), ("c_outer", c_outer), ("c_deep", c_deep),
                                        ("c_mid", c_mid), ("g", g), ("t_mid", t_mid))}
        out["dynamo"] = {n: len(dyn_entries(fn.__code__))
                         for n, fn in (("g", g), ("t_outer", t_outer), ("t_mid", t_mid),
                                       ("t_deep", t_deep), ("h", h), ("c_mid", c_mid))}
    """)
    assert all(r["ok"]), r["ok"]
    c, d = r["cdynamo"], r["dynamo"]
    # each compiler compiled its own functions, once, and none of the other's
    assert c["h"] == 1 and c["c_outer"] == 1 and c["c_deep"] == 1 and c["c_mid"] == 1
    assert c["g"] == 0 and c["t_mid"] == 0
    assert d["g"] == 1 and d["t_outer"] == 1 and d["t_mid"] == 1 and d["t_deep"] == 1
    assert d["h"] == 0 and d["c_mid"] == 0


def test_library_that_compiles_on_each_call():
    r = run_program("""
        def lib(x):
            # a library compiling a fresh function on every call
            return torch.compile(lambda t: t.relu() + 1, backend="eager")(x)
        def f(x):
            return lib(x * 2) + x
        cf = cdynamo.compile(f, backend="eager")
        x = torch.randn(5)
        out["ok"] = [torch.equal(cf(x), f(x)) for _ in range(3)]
    """)
    assert all(r["ok"])


# ---- another PEP 523 hook, in process (the stand-in counts frames, never compiles) ----------

def _plus(x):
    return x + 1


def _twice(x):
    return _plus(x) * 2


def test_other_hook_below_cdynamo_is_restored_exactly():
    f = cdynamo.compile(_twice, backend="eager")
    seen0 = _C._other_hook(1)
    try:
        x = torch.ones(3)
        assert torch.equal(f(x), _twice(x))
        assert not _C.hook_installed()        # the stand-in is back on top
        before = _C._other_hook(-1)
        _twice(x)
        assert _C._other_hook(-1) > before    # ... and still sees frames
    finally:
        _C._other_hook(0)
    assert seen0 >= 0
    assert len(cdynamo.cache_entries(_twice)) == 1


def _installs_other_hook_then_calls(x):
    # a hook installed over cdynamo in the middle of a compiled call, whose previous
    # function is cdynamo's: frames it hands back must neither loop nor be translated
    _C._other_hook(1)
    try:
        y = _plus(x)
        y = _inner_compiled(y)       # cdynamo puts itself back on top: a cycle of "previous"
        y = _plus(y)
    finally:
        _C._other_hook(0)
    return y


def test_other_hook_installed_over_cdynamo_cycle_terminates():
    globals()["_inner_compiled"] = cdynamo.compile(_twice, backend="eager")

    def outer(x):
        y = x * 3
        print("break")
        return _installs_other_hook_then_calls(y) - 1

    f = cdynamo.compile(outer, backend="eager")
    x = torch.arange(4.0)
    for _ in range(3):
        assert torch.equal(f(x), ((x * 3 + 1 + 1) * 2 + 1) - 1)
    assert not _C.hook_installed()
    assert _C.thread_state() == (0, 0)
    assert cdynamo.cache_entries(_twice)


def test_other_thread_through_a_cycle_of_previous_functions():
    # While the innermost compiled call runs, the interpreter's chain is
    # cdynamo -> stand-in -> cdynamo (each the other's previous). Frames of another thread
    # are not cdynamo's: they go to the stand-in, which hands them back; the re-entry rule
    # must run them instead of recursing until the C stack overflows.
    r = run_program("""
        import threading
        go, finished = threading.Event(), threading.Event()
        count = []
        def work(i):
            return i + 1
        def worker():
            go.wait(60)
            s = 0
            for i in range(2000):
                s = work(s)
            count.append(s)
            finished.set()
        def rendezvous():
            go.set()
            assert finished.wait(60)
        def inner(x):
            y = x + 1
            rendezvous()
            return y * 2
        cinner = cdynamo.compile(inner, backend="eager")
        def middle(x):
            _C._other_hook(1)        # the stand-in goes over cdynamo, cdynamo its previous
            try:
                return cinner(x) + 1  # cdynamo goes over the stand-in again
            finally:
                _C._other_hook(0)
        def outer(x):
            print("break")
            return middle(x * 3)
        th = threading.Thread(target=worker)
        th.start()
        couter = cdynamo.compile(outer, backend="eager")
        x = torch.arange(3.0)
        res = couter(x)
        th.join(60)
        out["ok"] = torch.equal(res, (x * 3 + 1) * 2 + 1)
        out["count"] = count
        out["other_frames"] = _C._other_hook(-1)
    """, timeout=180)
    assert r["ok"] and r["count"] == [2000]
    assert r["other_frames"] >= 2000     # the worker's frames went through the stand-in
