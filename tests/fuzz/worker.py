"""Child process of the differential fuzzer: runs many programs, one job at a time.

Protocol: one JSON object per line on stdin (a job: ``{"id", "src", "modes", "timeout"}``);
for each job the worker writes JSON lines to the file descriptor that was its stdout:
``{"phase": <mode>}`` before each mode starts (so that the parent knows who was running
when the process died or hung), then ``{"result": {...}}``. Programs' own print() output is
captured per call; fd 1 is pointed at stderr so that nothing else can corrupt the protocol.

For each mode the program's source is executed into a fresh module namespace (fresh code
objects, fresh module state), and ``f`` is called three times: on variant 0 of the inputs,
again on variant 0 (a compiled function hits its cache), then on variant 1 (same shapes,
other tensor values). Each call's outcome (the result or the exception type, the inputs
after the call, the module's upper-case globals, what it printed, and which tensors are the
same object or share storage) is compared with the eager run's outcome of the same call.
"""
from __future__ import annotations

import contextlib
import faulthandler
import io
import json
import linecache
import math
import os
import signal
import sys
import time
import traceback

MODES = ("eager", "eager2", "cdynamo", "dynamo")


def _setup_io():
    """Keep the real stdout for the protocol; fd 1 goes to stderr from now on."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), line_buffering=True)
    return proto


PROTO = _setup_io()

import torch  # noqa: E402

torch.set_num_threads(1)
# quiet torch._dynamo's graph-break warnings (the worker's stderr is a log file)
import logging  # noqa: E402
logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
logging.getLogger("torch").setLevel(logging.ERROR)
import warnings  # noqa: E402
warnings.simplefilter("ignore")


def _compilers():
    """cdynamo and torch._dynamo, imported on first use (a worker running only eager modes
    starts in half the time)."""
    import torch._dynamo
    import cdynamo
    return cdynamo, torch._dynamo


def send(obj):
    """Write one protocol message to the parent."""
    PROTO.write(json.dumps(obj) + "\n")
    PROTO.flush()


# -- snapshots and comparison -----------------------------------------------------------------

class _Tensor:
    __slots__ = ("t", "requires_grad")

    def __init__(self, t):
        self.t = t.detach().clone()
        self.requires_grad = t.requires_grad


def snapshot(v, depth=0):
    """A copy of v that later calls cannot change, comparable with same()."""
    if depth > 20:
        return ("deep",)
    if isinstance(v, torch.Tensor):
        return _Tensor(v)
    if isinstance(v, (bool, int, float, str, type(None), complex)):
        return v
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [snapshot(x, depth + 1) for x in v])
    if isinstance(v, dict):
        return ("dict", [(k, snapshot(x, depth + 1)) for k, x in v.items()])
    if type(v).__name__ in ("dict_values", "dict_keys", "dict_items"):
        return (type(v).__name__, [snapshot(x, depth + 1) for x in v])
    if hasattr(v, "__dict__") and not callable(v):
        return ("obj", type(v).__name__, [(k, snapshot(x, depth + 1)) for k, x in sorted(vars(v).items())])
    return ("other", type(v).__name__)


def same(a, b, path="result"):
    """None when snapshots a (expected) and b (actual) agree, else a description."""
    if isinstance(a, _Tensor):
        if not isinstance(b, _Tensor):
            return f"{path}: expected a tensor, got {_tname(b)}"
        x, y = a.t, b.t
        if x.dtype != y.dtype or x.shape != y.shape:
            return f"{path}: tensor {x.dtype}{list(x.shape)} != {y.dtype}{list(y.shape)}"
        if a.requires_grad != b.requires_grad:
            return f"{path}: requires_grad {a.requires_grad} != {b.requires_grad}"
        eq = (x == y)
        if x.is_floating_point():
            eq = eq | (x.isnan() & y.isnan())
        if not bool(eq.all()):
            return f"{path}: tensors differ: expected {x.tolist()} got {y.tolist()}"
        return None
    if type(a) is not type(b):
        return f"{path}: expected {_tname(a)} {_short(a)}, got {_tname(b)} {_short(b)}"
    if isinstance(a, float):
        if a == b or (math.isnan(a) and math.isnan(b)):
            return None
        return f"{path}: {a!r} != {b!r}"
    if isinstance(a, tuple) and a and a[0] in ("list", "tuple", "dict_values", "dict_keys", "dict_items"):
        if a[0] != b[0]:
            return f"{path}: expected {a[0]}, got {b[0]}"
        if len(a[1]) != len(b[1]):
            return f"{path}: {a[0]} of length {len(a[1])} != {len(b[1])}"
        for i, (x, y) in enumerate(zip(a[1], b[1])):
            d = same(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(a, tuple) and a and a[0] in ("dict", "obj"):
        if a[:-1] != b[:-1] or [k for k, _ in a[-1]] != [k for k, _ in b[-1]]:
            return f"{path}: {_short(a)} != {_short(b)}"
        for (k, x), (_, y) in zip(a[-1], b[-1]):
            d = same(x, y, f"{path}[{k!r}]" if a[0] == "dict" else f"{path}.{k}")
            if d:
                return d
        return None
    if a != b:
        return f"{path}: {a!r} != {b!r}"
    return None


def _tname(v):
    if isinstance(v, _Tensor):
        return "tensor"
    if isinstance(v, tuple) and v and isinstance(v[0], str):
        return v[0] if v[0] != "obj" else v[1]
    return type(v).__name__


def _short(v):
    if isinstance(v, tuple) and v and v[0] in ("dict", "obj"):
        return f"{v[0]} with keys {[k for k, _ in v[-1]]}"
    if isinstance(v, tuple):
        return ""
    return repr(v)[:60]


def alias_pattern(values):
    """For each tensor reached in values (in order), the index of the first tensor that is the
    same object and of the first that shares its storage: eager's aliasing, to be preserved."""
    tensors = []

    def walk(v, depth=0):
        if depth > 20:
            return
        if isinstance(v, torch.Tensor):
            tensors.append(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x, depth + 1)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x, depth + 1)
        elif hasattr(v, "__dict__") and not callable(v) and not isinstance(v, type):
            for x in vars(v).values():
                walk(x, depth + 1)

    walk(values)
    ids, ptrs, out = {}, {}, []
    for i, t in enumerate(tensors):
        try:
            p = t.untyped_storage().data_ptr()
        except Exception:
            p = None
        out.append((ids.setdefault(id(t), i), ptrs.setdefault(p, i) if p else -1))
    return out


# -- running one mode ---------------------------------------------------------------------------

class Outcome:
    """What one call did."""

    def __init__(self):
        self.exc = None        # exception type name or None
        self.msg = ""
        self.tb = ""
        self.value = None
        self.args = None
        self.globals = None
        self.printed = ""
        self.alias = None


def _module_state(ns):
    return [(k, snapshot(v)) for k, v in sorted(ns.items()) if k[:1].isupper() and k.isupper()]


def run_mode(src, mode, filename):
    """Run the program under one mode; returns a list of three Outcomes (or one with a
    SyntaxError-like failure of the program itself)."""
    code = compile(src, filename, "exec")
    ns = {"__name__": "fuzzprog", "__file__": filename}
    exec(code, ns)
    fn = ns["f"]
    if mode in ("cdynamo", "dynamo"):
        cdynamo, dynamo = _compilers()
    if mode == "cdynamo":
        cdynamo.reset()
        fn = cdynamo.compile(fn, backend="eager")
    elif mode == "dynamo":
        dynamo.reset()
        fn = torch.compile(fn, backend="eager")
    outs = []
    for variant in (0, 0, 1):
        args, kwargs = ns["make_inputs"](variant)
        o = Outcome()
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                r = fn(*args, **kwargs)
            o.value = snapshot(r)
            o.alias = alias_pattern((r, args, kwargs))
        except Exception as e:  # noqa: BLE001 (the program's exception is the outcome)
            o.exc = type(e).__name__
            o.msg = str(e)[:400]
            o.tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-4:])[-1500:]
        o.printed = buf.getvalue()
        o.args = snapshot((args, kwargs))
        o.globals = _module_state(ns)
        outs.append(o)
    if mode == "cdynamo":
        cdynamo.reset()
    elif mode == "dynamo":
        dynamo.reset()
    return outs


def compare_runs(expected, actual):
    """(kind, diff) of a compiled mode's outcomes against eager's: kind is "ok", "exception"
    (it raised where eager did not), "wrong_exception" (eager raised, it raised another type
    or nothing) or "wrong" (values, printed output, inputs, globals or aliasing differ)."""
    for call, (e, a) in enumerate(zip(expected, actual)):
        where = f"call {call + 1}"
        if e.exc is None and a.exc is not None:
            return "exception", f"{where}: raised {a.exc}: {a.msg}"
        if e.exc is not None and a.exc != e.exc:
            got = f"raised {a.exc}: {a.msg}" if a.exc else "returned normally"
            return "wrong_exception", f"{where}: eager raised {e.exc}: {e.msg}; compiled {got}"
        if e.printed != a.printed:
            return "wrong", f"{where}: printed {a.printed[:300]!r}, eager printed {e.printed[:300]!r}"
        if e.exc is None:
            d = same(e.value, a.value)
            if d:
                return "wrong", f"{where}: {d}"
        d = same(e.args, a.args, "inputs after the call")
        if d:
            return "wrong", f"{where}: {d}"
        d = same(("list", [v for _, v in e.globals]), ("list", [v for _, v in a.globals]), "module globals")
        if d:
            return "wrong", f"{where}: {d}"
        if e.exc is None and e.alias != a.alias:
            return "wrong", f"{where}: aliasing of tensors (result, args, kwargs) {a.alias} != eager's {e.alias}"
    return "ok", ""


def run_job(job):
    """Run one program in the modes asked for; returns the result dict sent to the parent
    (and before each mode a phase message)."""
    src, modes = job["src"], job.get("modes", MODES)
    filename = f"/fuzz/prog_{job['id']}.py"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    res = {"id": job["id"], "modes": {}}
    try:
        compile(src, filename, "exec")
    except SyntaxError as e:
        res["invalid"] = f"SyntaxError: {e}"
        return res
    runs = {}
    for mode in modes:
        send({"phase": mode})
        t0 = time.process_time()
        try:
            runs[mode] = run_mode(src, mode, filename)
        except Exception as e:  # noqa: BLE001 (outside f's calls)
            if mode in ("eager", "eager2"):  # the program itself is broken
                res["invalid"] = f"{mode}: {type(e).__name__}: {e}"[:500]
                return res
            # compile() itself or a reset failed: the compiler's fault
            res["modes"][mode] = {"kind": "exception", "exc": type(e).__name__, "msg": str(e)[:400],
                                  "diff": f"outside the calls: {type(e).__name__}: {e}"[:1500],
                                  "tb": traceback.format_exc()[-1500:]}
            continue
        if mode == "eager":
            res["eager_ms"] = round((time.process_time() - t0) * 1000, 2)  # CPU time
            res["eager_exc"] = runs["eager"][0].exc
            res["eager_msg"] = runs["eager"][0].msg[:200]
        elif mode == "eager2":
            kind, diff = compare_runs(runs["eager"], runs["eager2"])
            if kind != "ok":
                res["nondeterministic"] = diff
                return res
        else:
            kind, diff = compare_runs(runs["eager"], runs[mode])
            entry = {"kind": kind, "diff": diff[:1500]}
            bad = next((o for o in runs[mode] if o.exc), None)
            if kind != "ok" and bad is not None:
                entry["exc"] = bad.exc
                entry["msg"] = bad.msg[:400]
                entry["tb"] = bad.tb
            res["modes"][mode] = entry
            if job.get("stop_if_ok") == mode and kind == "ok":
                break
    return res


WARM_UP = """
import torch
def f(x, n):
    print(n)
    return x.sin() + n
def make_inputs(variant):
    return (torch.ones(2) * variant, 1), {}
"""


def main():
    """Serve jobs from stdin until it closes. With --warm, import both compilers and compile
    a small function with each first, so that the first job's time is like the others'."""
    faulthandler.enable(sys.stderr)
    # the parent sends SIGUSR1 before it kills a hung worker: every thread's stack to the log
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    if "--warm" in sys.argv:
        run_job({"id": "warm-up", "src": WARM_UP, "modes": MODES})
    send({"ready": True, "pid": os.getpid()})
    for line in sys.stdin:
        job = json.loads(line)
        print(f"--- job {job['id']}", file=sys.stderr, flush=True)
        try:
            res = run_job(job)
        except BaseException as e:  # noqa: BLE001
            res = {"id": job["id"], "invalid": f"worker: {type(e).__name__}: {e}"[:500], "modes": {}}
        send({"result": res})


if __name__ == "__main__":
    main()
