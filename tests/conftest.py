"""Test set-up: examples/ importable, every test starts from empty caches in both compilers."""
import os
import sys

import pytest
import torch

# Internal translation errors raise in the tests instead of running the frame unmodified.
os.environ.setdefault("CDYNAMO_RAISE_INTERNAL_ERRORS", "1")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)


def engine_available():
    try:
        import cdynamo._C  # noqa: F401
        return True
    except ImportError:
        return False


def under_asan():
    """True when the AddressSanitizer runtime is loaded (`make test-asan`): its quarantine
    keeps freed memory mapped, so process RSS says nothing about leaks there."""
    try:
        with open("/proc/self/maps") as f:
            return "libasan" in f.read()
    except OSError:
        return False


requires_engine = pytest.mark.skipif(not engine_available(),
                                     reason="cdynamo._C is not built (run `make test`)")


@pytest.fixture(autouse=True)
def _fresh_compilers():
    """Both compilers' caches empty and cdynamo's counters at zero before each test, the
    caches emptied again after it; the global state a compiled call must leave as it found
    it (grad mode, autocast, inference mode, the SDPA backends) checked after it."""
    import torch._dynamo
    sdpa = _sdpa_backends()
    torch.manual_seed(0)
    torch._dynamo.reset()
    if engine_available():
        import cdynamo
        cdynamo.reset()
        cdynamo.reset_counters()
    yield
    torch._dynamo.reset()
    if engine_available():
        import cdynamo
        cdynamo.reset()
    # global state a compiled call must leave as it found it (every test starts and ends with
    # grad mode on and autocast off)
    grad, amp = torch.is_grad_enabled(), torch.is_autocast_enabled("cpu")
    torch.set_grad_enabled(True)
    if amp:
        torch.set_autocast_enabled("cpu", False)
    assert grad, "the test left grad mode disabled"
    assert not amp, "the test left autocast enabled"
    assert not torch.is_inference_mode_enabled(), "the test left inference mode enabled"
    assert _sdpa_backends() == sdpa, "the test left the SDPA backends changed"


def _sdpa_backends():
    """Which scaled_dot_product_attention backends are enabled (math, flash, mem-efficient)."""
    return (torch.backends.cuda.math_sdp_enabled(), torch.backends.cuda.flash_sdp_enabled(),
            torch.backends.cuda.mem_efficient_sdp_enabled())


@pytest.fixture
def no_graph_break():
    """Fails the test when cdynamo logged a graph break or ran a frame unmodified while it
    ran (use with pytest.mark.usefixtures("no_graph_break"))."""
    from cdynamo import _glue
    breaks, unmodified = len(_glue.break_log), len(_glue.unmodified_log)
    yield
    assert [b.reason for b in _glue.break_log[breaks:]] == []
    assert [b.reason for b in _glue.unmodified_log[unmodified:]] == []
