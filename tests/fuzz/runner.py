"""Differential fuzzer for cdynamo: eager vs cdynamo.compile vs torch.compile (backend "eager").

    python tests/fuzz/runner.py -n 2000 --seed 0 [--jobs 2] [--timeout 60] [--out fuzz-out]
    python tests/fuzz/runner.py --seed 0 --only 17 42     # just these programs
    python tests/fuzz/runner.py --seed 0 --show 17        # print program 17's source
    python tests/fuzz/runner.py -n 3000 --exclude closure # no nested functions in f
    python tests/fuzz/runner.py -n 10000 --dynamo on-mismatch  # torch._dynamo only to classify

Programs come from gen.py; each runs in a worker process (worker.py) that serves many
programs; a watchdog kills a worker whose program uses more than --timeout CPU seconds (or 20
times that in wall time) and notices one that dies (a crash), then starts a fresh worker.
Each result is classified:

  ok                 cdynamo and torch._dynamo both agree with eager
  cdynamo_wrong      cdynamo's outcome (the value, printed output, inputs after the call,
                     module globals, aliasing, or the type of the exception eager raises)
                     differs from eager's, torch._dynamo's does not (or differs in another
                     way: another bug): our fault
  cdynamo_exception  cdynamo raises where eager does not, torch._dynamo does not (or fails
                     in another way): our fault
  crash / hang       the worker died (signal) or hung while cdynamo ran the program (or, not
                     reproducible with either compiler alone, with both in one process)
  shared             cdynamo and torch._dynamo both differ from eager, the same way (the
                     same exception type, or the same part of the outcome): listed, not hidden
  dynamo_only        torch._dynamo differs from eager (or crashed/hung), cdynamo does not
  flaky              a crash or hang that did not happen again on a rerun (listed)
  nondeterministic   two eager runs disagree (discarded); invalid: the program does not run

Every failing class is deduplicated by a signature; up to --minimize programs are reduced
(minimize.py) and written as standalone reproducers to the output folder with a summary
(summary_s<seed>.json, results_s<seed>.jsonl). The exit status is 1 when a crash, hang,
cdynamo_wrong or cdynamo_exception was found.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import re
import select
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from gen import generate  # noqa: E402
from minimize import minimize  # noqa: E402

WORKER = os.path.join(HERE, "worker.py")
OURS = ("crash", "hang", "cdynamo_wrong", "cdynamo_exception")
CLASSES = ("ok", "cdynamo_wrong", "cdynamo_exception", "crash", "hang", "shared", "dynamo_only",
           "flaky", "nondeterministic", "invalid")
DESCRIPTIONS = {
    "cdynamo_wrong": "wrong result, cdynamo only (our fault)",
    "cdynamo_exception": "exception eager does not raise, cdynamo only (our fault)",
    "crash": "worker died while cdynamo ran (our fault)",
    "hang": "timeout while cdynamo ran (our fault)",
    "shared": "torch._dynamo differs from eager too, the same way",
    "dynamo_only": "torch._dynamo differs, cdynamo agrees with eager",
    "flaky": "a crash or hang that did not happen again when rerun",
    "nondeterministic": "eager disagrees with itself (discarded)",
    "invalid": "the program does not run (generator bug)",
}


# -- workers ----------------------------------------------------------------------------------

def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc), 0.0 if unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class Worker:
    """One child process running worker.py; replaced when it dies, hangs or has served
    `recycle` jobs.

    The watchdog counts the worker's CPU time, not the wall clock: on a machine shared with
    other jobs a slow program is not a hang. A job is a hang when the worker has used
    `timeout` CPU seconds on it, or when `wall_factor * timeout` seconds have passed (a
    deadlock uses no CPU)."""

    def __init__(self, log_path: str, recycle: int = 250, warm: bool = True, wall_factor: float = 20.0):
        self.log_path = log_path
        self.recycle = recycle
        self.warm = warm
        self.wall_factor = wall_factor
        self.proc = None
        self.served = 0
        self.buf = b""

    def start(self):
        """Start (or restart) the worker process and wait for its ready message."""
        self.stop()
        self.log = open(self.log_path, "ab")
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")
        argv = [sys.executable, WORKER] + (["--warm"] if self.warm else [])
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, env=env, cwd=ROOT)
        self.buf = b""
        self.served = 0
        deadline = time.monotonic() + 900
        line = self._readline(deadline)
        while isinstance(line, dict) and "phase" in line:  # the warm-up job's
            line = self._readline(deadline)
        if not isinstance(line, dict) or not line.get("ready"):
            raise RuntimeError(f"fuzz worker did not start (see {self.log_path}): {line!r}")

    def stop(self):
        """Kill the worker process if it runs and release its pipes and log."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
            self.log.close()
            self.proc = None

    def _readline(self, deadline):
        """The next protocol message; "timeout" or "eof" when there is none."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                return "timeout"
            chunk = os.read(fd, 65536)
            if not chunk:
                return "eof"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def _log_tail(self, offset, limit=6000):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                data = f.read()
            return data.decode("utf-8", "replace")[-limit:]
        except OSError:
            return ""

    def run(self, job: dict, timeout: float) -> dict:
        """Send one job; its result, or a crash/hang record (the worker is then replaced)."""
        if self.proc is None or self.proc.poll() is not None or self.served >= self.recycle:
            self.start()
        self.log.flush()
        offset = os.path.getsize(self.log_path)
        job = dict(job, timeout=timeout)
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.start()
            return self.run(job, timeout)
        self.served += 1
        phase = None
        pid = self.proc.pid
        cpu0 = _cpu_seconds(pid)
        wall_deadline = time.monotonic() + timeout * self.wall_factor
        while True:
            msg = self._readline(min(wall_deadline, time.monotonic() + 1.0))
            if msg == "timeout":
                cpu = _cpu_seconds(pid) - cpu0
                if cpu < timeout and time.monotonic() < wall_deadline:
                    continue
                os.kill(pid, signal.SIGUSR1)  # the worker's faulthandler dumps its stacks
                time.sleep(1.0)
                self.stop()
                return {"id": job["id"], "hang": True, "phase": phase, "timeout": timeout,
                        "cpu_s": round(cpu, 1), "log": self._log_tail(offset)}
            if msg == "eof":
                rc = self.proc.wait()
                self.stop()
                sig = -rc if rc < 0 else None
                return {"id": job["id"], "crash": True, "phase": phase, "returncode": rc,
                        "signal": signal.Signals(sig).name if sig else None,
                        "log": self._log_tail(offset)}
            if "phase" in msg:
                phase = msg["phase"]
            elif "result" in msg:
                return msg["result"]


class Pool:
    """`jobs` workers, each driven by a thread of this process (which never imports torch)."""

    def __init__(self, out_dir: str, jobs: int = 1, timeout: float = 60.0, recycle: int = 250,
                 warm: bool = True):
        os.makedirs(out_dir, exist_ok=True)
        self.timeout = timeout
        self.workers = [Worker(os.path.join(out_dir, f"worker{i}.log"), recycle, warm) for i in range(jobs)]
        self.spare = Worker(os.path.join(out_dir, "worker-single.log"), recycle, warm)

    def map(self, jobs, on_result=None):
        """Run every job (dicts with id, src, modes); returns {id: result}."""
        q = queue.Queue()
        for j in jobs:
            q.put(j)
        results = {}
        lock = threading.Lock()
        errors = []

        def drive(w):
            try:
                while True:
                    try:
                        j = q.get_nowait()
                    except queue.Empty:
                        return
                    r = w.run(j, self.timeout)
                    with lock:
                        results[j["id"]] = r
                        if on_result:
                            on_result(j, r)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=drive, args=(w,), daemon=True) for w in self.workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return results

    def run_one(self, job, timeout=None):
        """One job on the spare worker (used to confirm and to minimize)."""
        return self.spare.run(job, timeout or self.timeout)

    def close(self):
        """Stop every worker."""
        for w in self.workers + [self.spare]:
            w.stop()


# -- classification ---------------------------------------------------------------------------

def classify(res: dict) -> str:
    """The class of a worker result (see the module docstring)."""
    if res.get("crash") or res.get("hang"):
        kind = "crash" if res.get("crash") else "hang"
        if res.get("who") == "not reproduced":
            return "flaky"
        return "dynamo_only" if res.get("who") == "dynamo" else kind
    if "invalid" in res:
        return "invalid"
    if "nondeterministic" in res:
        return "nondeterministic"
    cd = res["modes"].get("cdynamo", {"kind": "ok"})
    dy = res["modes"].get("dynamo", {"kind": "ok"})
    if cd["kind"] == "ok":
        return "ok" if dy["kind"] == "ok" else "dynamo_only"
    if dy["kind"] != "ok" and same_failure(cd, dy):
        return "shared"
    # torch._dynamo is right, or fails in another way (another bug, its own)
    return "cdynamo_exception" if cd["kind"] == "exception" else "cdynamo_wrong"


def same_failure(a: dict, b: dict) -> bool:
    """Whether two compilers' failures look alike: the same kind and the same exception type
    or the same part of the outcome differing (whichever call it shows in)."""
    if a["kind"] != b["kind"]:
        return False
    if a["kind"] in ("exception", "wrong_exception"):
        return a.get("exc") == b.get("exc")
    strip = lambda e: re.sub(r"^call\d ", "", _diff_category(e))
    return strip(a) == strip(b)


def _norm(text: str) -> str:
    text = (text.strip().splitlines() or [""])[0]
    text = re.sub(r"0x[0-9a-f]+", "ADDR", text)
    text = re.sub(r"\b[a-z]+\d+\b", "VAR", text)
    text = re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "N", text)
    return text[:90]


def _diff_category(entry: dict) -> str:
    diff = entry.get("diff", "")
    m = re.match(r"call (\d)", diff)
    call = f"call{m.group(1)}" if m else ""
    if entry.get("kind") == "exception":
        return f"raises {entry.get('exc')}: {_norm(entry.get('msg', ''))}"
    if entry.get("kind") == "wrong_exception":
        if entry.get("exc"):  # what the compiled code raised tells the bug, not what eager raised
            return f"{call} raises {entry['exc']}: {_norm(entry.get('msg', ''))} (eager raises another)"
        exp = re.search(r"eager raised (\w+)", diff)
        return f"{call} eager raises {exp.group(1) if exp else '?'}, compiled returns normally"
    for key in ("printed", "inputs after the call", "module globals", "aliasing"):
        if key in diff:
            return f"{call} {key}"
    m = re.search(r"result\S*: (.*)", diff)
    rest = m.group(1) if m else ""
    if rest.startswith("tensors differ"):
        what = "tensor values"
    elif rest.startswith("tensor "):
        what = "tensor dtype/shape"
    elif rest.startswith("expected"):
        types = re.match(r"expected (\S+).*got (\S+)", rest)
        what = f"type {types.group(1)} -> {types.group(2)}" if types else "type"
    elif " of length " in rest:
        what = "length"
    elif rest.startswith("requires_grad"):
        what = "requires_grad"
    else:
        what = "value"
    return f"{call} result {what}"


def signature(res: dict, cls: str) -> str:
    """What makes two failures of one class look like the same bug (for deduplication)."""
    modes = res.get("modes", {})
    if cls == "flaky":
        return f"flaky: {'crash' if res.get('crash') else 'hang'} in {res.get('phase')}"
    if cls in ("crash", "hang"):
        return f"{cls} in {res.get('who') or res.get('phase')} {res.get('signal') or ''}".strip()
    if cls in ("cdynamo_wrong", "cdynamo_exception"):
        return f"{cls}: {_diff_category(modes['cdynamo'])}"
    if cls == "shared":
        return f"shared: cdynamo {_diff_category(modes['cdynamo'])} | dynamo {_diff_category(modes['dynamo'])}"
    if cls == "dynamo_only":
        if res.get("crash") or res.get("hang"):
            return f"dynamo_only: {'crash' if res.get('crash') else 'hang'}"
        return f"dynamo_only: {_diff_category(modes['dynamo'])}"
    if cls == "invalid":
        return "invalid: " + _norm(res.get("invalid", ""))
    return cls


# -- the run ----------------------------------------------------------------------------------

FULL = ["eager", "eager2", "cdynamo", "dynamo"]


def confirm_crash(pool: Pool, job: dict, res: dict) -> dict:
    """Rerun a crash/hang with each compiler alone to say whose it is (res["who"])."""
    alone = {}
    for mode in ("cdynamo", "dynamo"):
        r = pool.run_one(dict(job, modes=["eager", mode]))
        alone[mode] = bool(r.get("crash") or r.get("hang"))
    if alone["cdynamo"]:
        who = "cdynamo"
    elif alone["dynamo"]:
        who = "dynamo"
    else:
        again = pool.run_one(dict(job, modes=FULL))
        if again.get("crash") or again.get("hang"):
            who = "eager" if again.get("phase") in ("eager", "eager2") else "cdynamo+dynamo in one process"
        else:
            who = "not reproduced"
    res["who"] = who
    res["reproduced_alone"] = alone
    return res


def run_programs(seed: int, indices, jobs: int = 1, timeout: float = 60.0, out_dir: str = "fuzz-out",
                 progress=None, pool: Pool | None = None, exclude=(), dynamo: str = "always"):
    """Generate and run programs `indices` of `seed` (without the statement kinds in
    `exclude`); returns ({index: result}, {index: class}).

    dynamo: "always" runs torch._dynamo on every program; "on-mismatch" only where cdynamo
    disagrees with eager (torch._dynamo's compile is ~90% of the time; the classes of
    cdynamo's failures are the same, dynamo_only is then not measured).

    Crashes and hangs are rerun with each compiler alone to attribute them."""
    own = pool is None
    pool = pool or Pool(out_dir, jobs, timeout)
    try:
        if dynamo not in ("always", "on-mismatch"):
            raise ValueError(f"dynamo must be 'always' or 'on-mismatch', not {dynamo!r}")
        extra = {"stop_if_ok": "cdynamo"} if dynamo == "on-mismatch" else {}
        job_list = [{"id": i, "src": generate(seed, i, exclude), "modes": FULL, **extra} for i in indices]
        by_id = {j["id"]: j for j in job_list}
        results = pool.map(job_list, progress)
        for i, r in results.items():
            if r.get("crash") or r.get("hang"):
                confirm_crash(pool, by_id[i], r)
        classes = {i: classify(r) for i, r in results.items()}
        return results, classes
    finally:
        if own:
            pool.close()


def make_predicate(pool: Pool, cls: str, sig: str, timeout: float, res: dict):
    """still_fails(src) for the minimizer: same class and same signature as the original."""
    alone = cls in ("crash", "hang") and res.get("who") == "cdynamo"
    modes = ["eager", "eager2", "cdynamo"] if alone else FULL
    counter = [0]

    def still_fails(src):
        counter[0] += 1
        job = {"id": f"min{counter[0]}", "src": src, "modes": modes, "stop_if_ok": "cdynamo"}
        r = pool.run_one(job, timeout)
        if r.get("crash") or r.get("hang"):
            r["who"] = res.get("who") if r.get("phase") == res.get("phase") else r.get("phase")
        c = classify(r)
        return c == cls and signature(r, c) == sig

    return still_fails


HARNESS = '''

# --- harness: eager vs cdynamo.compile(backend="eager"), each on a fresh copy of this module;
# three calls: inputs variant 0, variant 0 again (cache hit), variant 1 (other tensor values).
if __name__ == "__main__":
    import contextlib
    import io
    import math
    import cdynamo

    def fresh_module():
        ns = {"__name__": "repro"}
        exec(compile(open(__file__).read(), __file__, "exec"), ns)
        return ns

    def calls(ns, fn):
        outs = []
        for variant in (0, 0, 1):
            args, kwargs = ns["make_inputs"](variant)
            buf = io.StringIO()
            try:
                with contextlib.redirect_stdout(buf):
                    r = fn(*args, **kwargs)
                outs.append(("returned", r, "inputs after", args, kwargs, "printed", buf.getvalue()))
            except Exception as e:
                outs.append(("raised", type(e).__name__, str(e)[:200], "printed", buf.getvalue()))
        return outs

    def same(a, b):
        if isinstance(a, torch.Tensor):
            return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                    and bool(((a == b) | (a.isnan() & b.isnan())).all()))
        if type(a).__qualname__ != type(b).__qualname__:   # each run has its own classes
            return False
        if isinstance(a, (list, tuple)):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        if isinstance(a, dict):
            return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
        if isinstance(a, float):
            return a == b or (math.isnan(a) and math.isnan(b))
        if hasattr(a, "__dict__") and not callable(a):
            return same(vars(a), vars(b))
        return a == b

    e = fresh_module()
    expected = calls(e, e["f"])
    c = fresh_module()
    got = calls(c, cdynamo.compile(c["f"], backend="eager"))
    for i, (x, y) in enumerate(zip(expected, got)):
        print(f"call {i + 1}: eager   {x}")
        print(f"call {i + 1}: cdynamo {y}")
    print("SAME" if same(expected, got) else "MISMATCH")
'''


def write_reproducer(out_dir, name, src, header_lines):
    """Write a standalone reproducer; returns its path."""
    path = os.path.join(out_dir, name)
    with open(path, "w") as f:
        for line in header_lines:
            for sub in str(line).splitlines() or [""]:
                f.write(f"# {sub}\n")
        f.write(src.rstrip() + "\n" + HARNESS)
    return path


def report_failures(pool, seed, results, classes, out_dir, max_min, per_sig, min_budget, timeout,
                    min_timeout, log=print, exclude=()):
    """Group failures by signature, minimize up to max_min of them (ours first), write the
    reproducers; returns a list of dicts (one per signature)."""
    groups = {}
    for i in sorted(results):
        cls = classes[i]
        if cls in ("ok", "nondeterministic"):
            continue
        sig = signature(results[i], cls)
        groups.setdefault(sig, {"class": cls, "signature": sig, "programs": []})["programs"].append(i)
    order = sorted(groups.values(), key=lambda g: (g["class"] not in OURS, g["class"] in ("invalid",
                                                                                          "dynamo_only"),
                                                   -len(g["programs"])))
    done = 0
    seen_src = {}
    for g in order:
        g["reproducers"] = []
        if g["class"] in ("invalid", "flaky"):
            continue
        for i in g["programs"][:per_sig]:
            if done >= max_min:
                break
            res = results[i]
            src = generate(seed, i, exclude)
            log(f"minimizing program {i} ({g['signature']}) ...")
            t0 = time.monotonic()
            mt = min_timeout if g["class"] == "hang" else timeout
            small = minimize(src, make_predicate(pool, g["class"], g["signature"], mt, res), budget_s=min_budget)
            done += 1
            log(f"  {len(src.splitlines())} -> {len(small.splitlines())} lines in {time.monotonic() - t0:.0f} s")
            if small in seen_src:
                g["reproducers"].append(seen_src[small])
                continue
            detail = res.get("modes", {}).get("cdynamo", {})
            header = [f"cdynamo fuzz reproducer: {g['class']} ({DESCRIPTIONS.get(g['class'], '')})",
                      f"signature: {g['signature']}",
                      f"from: seed {seed}, program {i} (python tests/fuzz/runner.py --seed {seed} --only {i}"
                      + (f" --exclude {','.join(exclude)}" if exclude else "") + ")"]
            if res.get("crash") or res.get("hang"):
                header.append(f"{'crash' if res.get('crash') else 'hang'} during {res.get('phase')}; "
                              f"signal {res.get('signal')}; attributed to {res.get('who')}")
            else:
                header.append(f"cdynamo: {detail.get('diff', '')[:600]}")
                if res["modes"].get("dynamo", {}).get("kind", "ok") != "ok":
                    header.append(f"torch._dynamo: {res['modes'].get('dynamo', {}).get('diff', '')[:600]}")
            name = f"repro_s{seed}_p{i}_{g['class']}.py"
            path = write_reproducer(out_dir, name, small, header)
            seen_src[small] = path
            g["reproducers"].append(path)
    return order


def main(argv=None):
    """Command line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", "--count", type=int, default=int(os.environ.get("FUZZ_N", 2000)))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("FUZZ_SEED", 0)))
    ap.add_argument("--start", type=int, default=0, help="first program index")
    ap.add_argument("--only", type=int, nargs="*", help="run just these program indices")
    ap.add_argument("--show", type=int, help="print this program's source and exit")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("FUZZ_JOBS", max(1, (os.cpu_count() or 2) // 2))))
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("FUZZ_TIMEOUT", 60)),
                    help="seconds per program before it counts as a hang")
    ap.add_argument("--out", default=os.environ.get("FUZZ_OUT", os.path.join(ROOT, "fuzz-out")))
    ap.add_argument("--minimize", type=int, default=int(os.environ.get("FUZZ_MINIMIZE", 30)),
                    help="at most this many failing programs are minimized")
    ap.add_argument("--per-signature", type=int, default=1)
    ap.add_argument("--min-budget", type=float, default=240.0, help="seconds per minimization")
    ap.add_argument("--exclude", default=os.environ.get("FUZZ_EXCLUDE", ""),
                    help="comma-separated statement kinds not to generate (gen.STATEMENT_KINDS), "
                         "e.g. closure to look past a known bug")
    ap.add_argument("--dynamo", choices=("always", "on-mismatch"),
                    default=os.environ.get("FUZZ_DYNAMO", "always"),
                    help="run torch._dynamo on every program, or only where cdynamo disagrees "
                         "with eager (several times faster; dynamo_only is then not measured)")
    args = ap.parse_args(argv)
    exclude = tuple(k for k in args.exclude.split(",") if k)

    if args.show is not None:
        print(generate(args.seed, args.show, exclude))
        return 0
    os.makedirs(args.out, exist_ok=True)
    indices = args.only if args.only else list(range(args.start, args.start + args.count))
    t0 = time.monotonic()
    counts = {}
    # one line per program as it finishes (crashes and hangs before they are attributed);
    # results_s<seed>.jsonl gets the final classes once the run is over
    jsonl = open(os.path.join(args.out, f"progress_s{args.seed}.jsonl"), "a")

    def record(f, i, r, c):
        f.write(json.dumps({"seed": args.seed, "id": i, "class": c,
                            "signature": signature(r, c) if c != "ok" else "", **r}) + "\n")

    def progress(job, r):
        c = classify(r)
        counts[c] = counts.get(c, 0) + 1
        record(jsonl, job["id"], r, c)
        jsonl.flush()
        n = sum(counts.values())
        if c in OURS or n % 100 == 0:
            print(f"[{time.monotonic() - t0:6.0f}s] {n}/{len(indices)} "
                  + " ".join(f"{k}={v}" for k, v in sorted(counts.items())), flush=True)
            if c in OURS:
                print(f"    program {job['id']}: {signature(r, c)}", flush=True)

    pool = Pool(args.out, args.jobs, args.timeout)
    try:
        results, classes = run_programs(args.seed, indices, out_dir=args.out, progress=progress, pool=pool,
                                        exclude=exclude, dynamo=args.dynamo)
        elapsed = time.monotonic() - t0
        with open(os.path.join(args.out, f"results_s{args.seed}.jsonl"), "w") as f:
            for i in sorted(results):
                record(f, i, results[i], classes[i])
        groups = report_failures(pool, args.seed, results, classes, args.out, args.minimize,
                                 args.per_signature, args.min_budget, args.timeout,
                                 min(args.timeout, 20.0), exclude=exclude)
    finally:
        pool.close()
        jsonl.close()

    counts = {c: 0 for c in CLASSES}
    for c in classes.values():
        counts[c] = counts.get(c, 0) + 1
    eager_raised = sum(1 for r in results.values() if r.get("eager_exc"))
    print()
    print(f"fuzz: seed {args.seed}{' without ' + ','.join(exclude) if exclude else ''}, "
          f"{len(results)} programs in {elapsed:.0f} s ({args.jobs} workers, torch._dynamo {args.dynamo}); "
          f"{eager_raised} raise in eager (checked: the same exception type)")
    for c in CLASSES:
        print(f"  {c:18} {counts[c]:6}   {DESCRIPTIONS.get(c, '')}")
    if any(g["class"] != "invalid" for g in groups):
        print("\nfailures by signature (programs; reproducers):")
    for g in groups:
        if g["class"] == "invalid":
            continue
        more = f" ... (+{len(g['programs']) - 8})" if len(g["programs"]) > 8 else ""
        print(f"  [{g['class']}] {g['signature']}\n      programs {g['programs'][:8]}{more}")
        for p in g.get("reproducers", []):
            print(f"      {os.path.relpath(p)}")
    summary = {"seed": args.seed, "exclude": list(exclude), "dynamo": args.dynamo, "programs": len(results), "seconds": round(elapsed),
               "eager_raised": eager_raised, "counts": counts,
               "groups": [{k: v for k, v in g.items()} for g in groups]}
    with open(os.path.join(args.out, f"summary_s{args.seed}.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"\nsummary: {os.path.relpath(os.path.join(args.out, f'summary_s{args.seed}.json'))}")
    return 1 if any(counts[c] for c in OURS) else 0


if __name__ == "__main__":
    sys.exit(main())
