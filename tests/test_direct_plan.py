"""Two shortcuts of the per-call path (issue 9, point 7), each checked for what it skips.

- Frameless entries: a transformed code that only calls its compiled graph on positional
  arguments and returns items of the result (bytecode.h cdyn_direct_plan_of) is run by
  the hook without a frame (hook.c run_plan). Results, unpacking errors and the
  traceback entry of an error raised by the graph must be those of the code it replaces.
- Autocast left to TensorGuards: GRAD_MODE traced without autocast reads only the grad
  mode when the set's TensorGuards checks tensors of every device type the graph's
  tensors are on (guards.c tg_covers_devices; _glue.graph_device_types). Enabling
  autocast on that device type must still recompile, also after TensorGuards was built.
"""
import traceback

import pytest
import torch

import cdynamo
from cdynamo import _C, _glue
from helpers import CountingBackend


def _entry_code(fn):
    (entry,) = cdynamo.cache_entries(fn)
    return entry.code


def add_one(x):
    return x + 1


def two_outputs(x, y):
    return x + y, x * y


def one_of_two_inputs(x, y):
    return y.sin()


def with_closure_value(x):
    return x + add_one.__code__.co_argcount


def test_plan_matches_pure_graph_calls_only():
    cdynamo.reset()
    x, y = torch.randn(3), torch.randn(3)
    cases = [(add_one, (x,), ((0,), 1, (0,), False)),
             (two_outputs, (x, y), ((0, 1), 2, (0, 1), True)),
             (one_of_two_inputs, (x, y), ((1,), 1, (0,), False))]
    for fn, args, want in cases:
        cdynamo.compile(fn, backend="eager")(*args)
        plan = _C._direct_plan(_entry_code(fn))
        assert plan is not None, fn.__name__
        assert plan[1:] == want, (fn.__name__, plan)
        assert plan[0]._cdynamo_name.startswith("__compiled_fn_")

    def returns_arg(x):     # a transformed code that returns an input: no plan
        return x, x + 1
    cdynamo.compile(returns_arg, backend="eager")(x)
    assert _C._direct_plan(_entry_code(returns_arg)) is None


@pytest.mark.parametrize("fn,nargs", [(add_one, 1), (two_outputs, 2), (one_of_two_inputs, 2)])
def test_plan_results_equal_eager_over_many_calls(fn, nargs):
    cdynamo.reset()
    counter = CountingBackend()
    f = cdynamo.compile(fn, backend=counter)
    for i in range(5):
        args = [torch.randn(4) for _ in range(nargs)]
        got, want = f(*args), fn(*args)
        if isinstance(want, tuple):
            assert type(got) is tuple and len(got) == len(want)
            assert all(torch.equal(a, b) for a, b in zip(got, want))
        else:
            assert torch.equal(got, want)
    assert counter.frame_count == 1


class _Outputs:
    """A backend whose compiled callable returns what `make(outputs)` gives, after the first
    call (which runs the graph as it is)."""

    def __init__(self, make):
        self.make = make

    def __call__(self, gm, example_inputs):
        calls = []

        def run(*args):
            out = gm.forward(*args)
            calls.append(1)
            return out if len(calls) == 1 else self.make(out)
        return run


def _call_twice(fn, backend, *args):
    cdynamo.reset()
    f = cdynamo.compile(fn, backend=backend)
    f(*args)
    assert _C._direct_plan(_entry_code(fn)) is not None
    return f(*args)


def test_plan_unpacks_lists_and_iterables_like_unpack_sequence():
    x, y = torch.randn(3), torch.randn(3)
    got = _call_twice(two_outputs, _Outputs(list), x, y)
    assert torch.equal(got[0], x + y) and torch.equal(got[1], x * y)
    got = _call_twice(two_outputs, _Outputs(iter), x, y)
    assert torch.equal(got[0], x + y) and torch.equal(got[1], x * y)


@pytest.mark.parametrize("make,exc,text", [
    (lambda out: out[:1], ValueError, "not enough values to unpack (expected 2, got 1)"),
    (lambda out: out + out, ValueError, "too many values to unpack (expected 2)"),
    (lambda out: 7, TypeError, "cannot unpack non-iterable int object"),
])
def test_plan_unpack_errors_are_cpythons(make, exc, text):
    x, y = torch.randn(3), torch.randn(3)
    with pytest.raises(exc) as info:
        _call_twice(two_outputs, _Outputs(make), x, y)
    assert str(info.value) == text


def test_error_raised_by_graph_has_the_functions_traceback_entry():
    def boom(out):
        raise RuntimeError("from the graph")

    x = torch.randn(3)
    with pytest.raises(RuntimeError, match="from the graph") as info:
        _call_twice(add_one, _Outputs(boom), x)
    frames = traceback.extract_tb(info.value.__traceback__)
    names = [(fr.name, fr.lineno) for fr in frames]
    # the line the transformed code's frame reported (its instructions carry the def line)
    assert ("add_one", add_one.__code__.co_firstlineno) in names, names
    assert frames[-1].name == "boom"


def test_closure_and_global_reads_keep_the_frame_path():
    cdynamo.reset()
    x = torch.randn(3)
    f = cdynamo.compile(with_closure_value, backend="eager")
    assert torch.equal(f(x), x + 1)
    assert torch.equal(f(x), x + 1)


# ---- autocast left to TensorGuards ------------------------------------------------------

def test_graph_device_types():
    def fn(x):
        return x.sin() + torch.ones(3)

    gm = torch.fx.symbolic_trace(fn)
    assert _glue.graph_device_types(gm) is None      # no example values: not known

    seen = []

    def backend(gm, example_inputs):
        seen.append(_glue.graph_device_types(gm))
        return gm.forward

    cdynamo.reset()
    cdynamo.compile(fn, backend=backend)(torch.randn(3))
    assert seen == [frozenset({"cpu"})]

    def amp(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return x @ x

    seen.clear()
    cdynamo.compile(amp, backend=backend)(torch.randn(3, 3))
    assert seen == [None]


def test_autocast_after_tensorguards_built_recompiles():
    cdynamo.reset()
    counter = CountingBackend()

    def mm(x, y):
        return x @ y

    f = cdynamo.compile(mm, backend=counter)
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    for _ in range(3):             # TensorGuards is built at the first passing check
        assert f(x, y).dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, want = f(x, y), mm(x, y)
    assert got.dtype == want.dtype == torch.bfloat16
    assert torch.equal(got, want)
    assert counter.frame_count == 2
    assert f(x, y).dtype == torch.float32          # the first entry again
    assert counter.frame_count == 2
    reasons = [e.recompile_reason for e in cdynamo.cache_entries(mm)]
    assert any("autocast" in (r or "") for r in reasons), reasons


def test_autocast_check_kept_when_the_graph_makes_tensors_without_tensor_inputs():
    cdynamo.reset()
    counter = CountingBackend()

    def make():
        a = torch.ones(4, 4)
        return a @ a

    f = cdynamo.compile(make, backend=counter)
    for _ in range(3):
        assert f().dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert f().dtype == make().dtype == torch.bfloat16
    assert counter.frame_count == 2


def test_marking_a_later_tensor_after_tensorguards_built_recompiles():
    # Only the first batched TENSOR_MATCH runs per call (the others are implied by its
    # TensorGuards call); it must still see a dimension marking on every other tensor.
    cdynamo.reset()
    counter = CountingBackend()

    def f(a, b, c):
        return (a * b).sum() + c

    cf = cdynamo.compile(f, backend=counter)
    a, b, c = torch.randn(4), torch.randn(4), torch.randn(4)
    for _ in range(3):
        cf(a, b, c)
    assert counter.frame_count == 1
    torch._dynamo.mark_dynamic(c, 0)
    assert torch.equal(cf(a, b, c), f(a, b, c))
    assert counter.frame_count == 2
    c5 = torch.randn(5)
    assert torch.equal(cf(a, b, c5), f(a, b, c5))      # the symbolic graph serves size 5
    assert counter.frame_count == 2
