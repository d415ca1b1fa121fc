"""A fixed-seed short run of the differential fuzzer (tests/fuzz, `make fuzz` for long runs).

COUNT random programs of seed SEED run in a worker process, each in eager and under
cdynamo.compile(backend="eager") (three calls: the second hits the cache, the third has other
tensor values), and under torch.compile(backend="eager") where cdynamo disagrees with eager
(to tell our faults from differences torch._dynamo shares). Each program must not crash, hang
or give cdynamo-only wrong results or exceptions. Programs that fail today because of a known
engine bug are xfail(strict=True) with the bug named, so that they flip when it is fixed.
Plus checks of the fuzzer itself: the watchdog catches a crash and a hang and replaces the
worker; the minimizer reduces a program while the failure persists.
"""
import os
import sys

import pytest

from conftest import requires_engine, under_asan

FUZZ_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz")
if FUZZ_DIR not in sys.path:
    sys.path.insert(0, FUZZ_DIR)

import runner  # noqa: E402
from gen import generate  # noqa: E402
from minimize import minimize  # noqa: E402

SEED = 0
COUNT = 60

# program index -> (the engine bug that makes it fail today, a part of the failure's signature
# that shows it); `python tests/fuzz/runner.py --seed 0 --only N` minimizes program N. Empty:
# the bugs this seed found (a live empty cell at a break, an in-place method's result not being
# its receiver, a float guard that took -0.0 for 0.0, a try-block break whose handler path
# read an object only the normal path had rebuilt) are fixed.
KNOWN = {}


class KnownBug(Exception):
    """A known failing program failed the known way (anything else fails the test)."""


def _param(i):
    if i in KNOWN:
        mark = pytest.mark.xfail(strict=True, raises=KnownBug, reason=KNOWN[i][0])
        return pytest.param(i, marks=mark)
    return i


@pytest.fixture(scope="module")
def fuzz_run(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("fuzz"))
    return runner.run_programs(SEED, range(COUNT), jobs=1, timeout=120, out_dir=out, dynamo="on-mismatch")


@requires_engine
@pytest.mark.parametrize("index", [_param(i) for i in range(COUNT)])
def test_fuzz_program(fuzz_run, index):
    results, classes = fuzz_run
    res, cls = results[index], classes[index]
    detail = res.get("modes", {}).get("cdynamo", {})
    if cls in runner.OURS and index in KNOWN and KNOWN[index][1] in runner.signature(res, cls):
        raise KnownBug(runner.signature(res, cls))
    assert cls not in runner.OURS, (
        f"program {index} of seed {SEED}: {runner.signature(res, cls)}\n"
        f"{detail.get('diff', '')}\n{detail.get('tb', '')}{res.get('log', '')}\n"
        f"--- program (python tests/fuzz/runner.py --seed {SEED} --only {index} minimizes it):\n"
        f"{generate(SEED, index)}")


@requires_engine
def test_fuzz_programs_are_valid(fuzz_run):
    """The generator's programs run (no generator bug) and most are compared to the end."""
    results, classes = fuzz_run
    assert len(results) == COUNT
    invalid = {i: results[i]["invalid"] for i, c in classes.items() if c == "invalid"}
    assert not invalid, invalid
    assert sum(c == "ok" for c in classes.values()) >= COUNT // 2
    assert all(r.get("eager_ms", 0) < 200 for r in results.values())


PRELUDE = "import torch\n"
INPUTS = """
def make_inputs(variant):
    g = torch.Generator().manual_seed(variant)
    return (torch.randn(3, generator=g),), {}
"""


@requires_engine
def test_watchdog_catches_crash_and_hang(tmp_path):
    """A program that kills its process is a crash, one that never returns a hang; the worker
    is replaced and the next program runs normally."""
    pool = runner.Pool(str(tmp_path), jobs=1, timeout=4, warm=False)
    try:
        crash = PRELUDE + "import os, signal\ndef f(x):\n    os.kill(os.getpid(), signal.SIGSEGV)\n" + INPUTS
        hang = PRELUDE + "def f(x):\n    while True:\n        pass\n" + INPUTS
        good = PRELUDE + "def f(x):\n    print('hi')\n    return x * 2, x.sum().item()\n" + INPUTS
        jobs = [{"id": i, "src": s, "modes": ["eager", "eager2"]} for i, s in enumerate([crash, hang, good])]
        res = pool.map(jobs)
    finally:
        pool.close()
    assert res[0].get("crash") and res[0]["phase"] == "eager"
    if under_asan():
        # AddressSanitizer's own SEGV handler reports the fault and exits with status 1
        assert res[0].get("returncode") not in (None, 0)
    else:
        assert res[0]["signal"] == "SIGSEGV"
        assert "Segmentation fault" in res[0]["log"]  # faulthandler's traceback
    assert res[1].get("hang") and res[1]["phase"] == "eager"
    assert "in f" in res[1]["log"]  # the stack dumped before the kill
    assert runner.classify(res[2]) == "ok", res[2]


def test_minimizer_keeps_the_failure():
    """Statements, branches, operands and parameters that do not matter go (a parameter
    with its input in make_inputs); what the failure needs stays (here: f returns y * 2)."""
    import torch
    src = PRELUDE + """
def f(x, y, n):
    a = x + 1
    b = a * 2 - y
    if n > 1:
        c = b.sin()
        for i in range(3):
            a = a + i
    d = (y + 0) * 2
    return a, d

def make_inputs(variant):
    g = torch.Generator().manual_seed(variant)
    args = (torch.randn(3, generator=g), torch.randn(3, generator=g), 2)
    kwargs = {}
    return args, kwargs
"""

    def still_fails(candidate):
        try:
            ns = {}
            exec(candidate, ns)
            args, kwargs = ns["make_inputs"](0)
            out = ns["f"](*args, **kwargs)
            y = ns["make_inputs"](0)[0][ns["f"].__code__.co_varnames.index("y")]
            return any(isinstance(t, torch.Tensor) and torch.equal(t, y * 2) for t in out)
        except Exception:
            return False

    assert still_fails(src)
    small = minimize(src, still_fails)
    f_src = small.split("def make_inputs")[0].strip().splitlines()
    assert f_src[-3:] == ["def f(y):", "    d = y * 2", "    return (d,)"], small
    assert "args = (torch.randn(3, generator=g),)" in small
