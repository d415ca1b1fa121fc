"""Faults found by trying code nobody on the project wrote (issue 8): each program gave a
crash, a hang, a wrong result or an exception eager does not raise. Results are compared
with eager (and graph counts with torch._dynamo where both compile the same)."""
import logging
import sys
import types

import numpy as np
import pytest
import torch

import cdynamo
from cdynamo import _glue
from helpers import CountingBackend, assert_same


def run(fn, *args, calls=2):
    """Eager result vs cdynamo (backend eager) on `calls` calls; returns the backend."""
    expected = fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    counter = CountingBackend()
    compiled = cdynamo.compile(fn, backend=counter)
    for i in range(calls):
        got = compiled(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
        assert_same(got, expected, f"call {i}")
    return counter


X = torch.arange(6, dtype=torch.float32).reshape(2, 3) - 2


# ---- super() across a graph break (transformers' config __getattribute__) ----------------

class Base:
    def f(self, x):
        print("Base.f")
        return x + 1


class Derived(Base):
    def f(self, x):
        y = x * 2
        return super().f(y)


def test_super_method_graph_break_calls_the_base_method():
    # before: the break re-emitted `self.f(...)`, the override: RecursionError
    counter = run(Derived().f, X)
    assert counter.frame_count == 2


# ---- cells not assigned yet at a break ---------------------------------------------------

def genexpr_after_break(x):
    t = {"a": 1, "b": 2}
    print("b")
    keep = "a"
    return x + sum(t[k] for k in t if k != keep)


def test_break_with_an_unassigned_cell():
    # before: SystemError: cdynamo: live empty cell
    run(genexpr_after_break, X)


# ---- nn.ModuleList slicing ----------------------------------------------------------------

class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(3, 3) for _ in range(3)])

    def forward(self, x, n=2):
        for layer in self.layers[:n]:
            x = layer(x)
        return x


def test_modulelist_slice_is_iterated():
    # before: TypeError: cdyn_source_item: key must be int or str, not slice
    torch.manual_seed(0)
    m = Stack()
    counter = run(m, X)
    assert counter.frame_count == 1
    assert counter.op_count == 2


# ---- in-place operators with a constant on the left ---------------------------------------

def t5_buckets(x):
    acc = 0
    acc += (x > 0).to(torch.long) * 16
    acc += 1
    return acc


def test_inplace_add_on_a_constant_accumulator():
    # before: SyntaxError '0 += mul' in the generated FX code
    assert run(t5_buckets, X).frame_count == 1


# ---- wrong results ------------------------------------------------------------------------

def view_sees_later_insert(x):
    d = {"a": x}
    v = d.values()
    k = d.keys()
    d["b"] = x * 2
    return len(v), list(k), sum(v)


def inplace_returns_receiver(x):
    y = x.add_(1)
    return y is x, y


def test_dict_view_sees_later_inserts():
    # before: len(v) == 1 (eager 2)
    run(view_sees_later_insert, X)


def test_inplace_method_returns_the_same_value():
    # before: `y is x` was False
    run(inplace_returns_receiver, X)


# ---- crashes ---------------------------------------------------------------------------------

class CallableObj:
    def __call__(self, a, b):
        return a * b


def method_type_of_c_function(x):
    f = types.MethodType(torch.add, x)
    g = types.MethodType(CallableObj(), x)
    return f(1), g(3)


def numpy_random_inside(x):
    return x + float(np.random.rand(1)[0] * 0)


def test_method_type_of_a_non_function():
    # before: segmentation fault (the bound callable was taken for a Python function)
    run(method_type_of_c_function, X)


def test_numpy_random_inside_is_a_graph_break():
    run(numpy_random_inside, X)


# ---- FX code that did not compile ----------------------------------------------------------

def tensor_type_class(x):
    return x.type(torch.DoubleTensor) + 1


def jit_annotate(x):
    import typing
    y = torch.jit.annotate(typing.Any, x)
    return y * 2


def test_non_printable_constants_never_enter_the_graph():
    # before: SyntaxError in <eval_with_key> (torch.DoubleTensor printed as a class repr)
    run(tensor_type_class, X)


def test_jit_annotate_is_identity():
    # before: NameError in the generated FX code
    counter = run(jit_annotate, X)
    assert counter.frame_count == 1 and counter.op_count == 1


def helpers_fold(x):
    a = torch.jit.is_tracing()
    b = torch.jit.is_scripting()
    c = torch.onnx.is_in_onnx_export()
    d = torch.compiler.is_compiling()
    torch._assert(x.dim() == 2, "2-d")
    return x + int(a) + int(b) + int(c) + int(d)


def test_non_tensor_torch_helpers_are_constants():
    # before: each became a graph node (is_compiling: an extra node, and False); while
    # compiling, is_compiling() is True (as torch._dynamo), so the result differs from eager
    counter = CountingBackend()
    out = cdynamo.compile(helpers_fold, backend=counter)(X)
    assert torch.equal(out, X + 1) and torch.equal(helpers_fold(X), X)
    assert counter.frame_count == 1
    assert counter.op_count == 4


def non_tensor_torch_call(x):
    torch.manual_seed(3)
    return x + 1


def test_non_tensor_torch_function_runs_in_python():
    # torch.manual_seed: no tensor argument or result, so not a graph node (a graph break)
    counter = run(non_tensor_torch_call, X)
    for gm in counter.graphs:
        assert all("manual_seed" not in str(n.target) for n in gm.graph.nodes)


# ---- graph breaks inside try / with blocks -----------------------------------------------------

def try_missing_attribute(x):
    try:
        y = x.no_such_attribute
    except AttributeError:
        y = x + 1
    return y * 2


def try_import_missing(x):
    try:
        import cdynamo_no_such_module  # noqa: F401
    except ImportError:
        return x + 1
    return x


def raise_inside_no_grad(x):
    try:
        with torch.no_grad():
            y = x * 2
            y.no_such_attribute
    except AttributeError:
        return torch.is_grad_enabled(), x + 3
    return y


def raise_in_break_call(x):
    y = x * 2
    try:
        int("not a number")
    except ValueError:
        y = y + 1
    return y


@pytest.mark.parametrize("fn", [try_missing_attribute, try_import_missing,
                                raise_inside_no_grad, raise_in_break_call],
                         ids=lambda f: f.__name__)
def test_exception_at_a_graph_break_reaches_its_handler(fn):
    run(fn, X)


def raises_user_error(x):
    y = x + 1
    raise KeyError(f"user {y.shape[0]}")


def test_raise_in_traced_code_reaches_the_user():
    with pytest.raises(KeyError, match="user 2"):
        cdynamo.compile(raises_user_error, backend="eager")(X)


# ---- internal errors -------------------------------------------------------------------------

def plain(x):
    return x.sin() + 1


def test_internal_error_runs_the_frame_unmodified(monkeypatch, caplog):
    def broken_trace():
        raise RuntimeError("glue exploded")
    monkeypatch.setattr(_glue, "new_trace", broken_trace)
    with cdynamo.config.patch(raise_internal_errors=False):
        with caplog.at_level(logging.WARNING, logger="cdynamo"):
            out = cdynamo.compile(plain, backend="eager")(X)
    assert torch.equal(out, plain(X))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "glue exploded" in warnings[0].getMessage()
    assert cdynamo.counters()["unmodified"] >= 1


def test_internal_error_raises_when_asked(monkeypatch):
    def broken_trace():
        raise RuntimeError("glue exploded")
    monkeypatch.setattr(_glue, "new_trace", broken_trace)
    with cdynamo.config.patch(raise_internal_errors=True):
        with pytest.raises(RuntimeError, match="glue exploded"):
            cdynamo.compile(plain, backend="eager")(X)


def test_backend_failure_reaches_the_user():
    def bad_backend(gm, example_inputs):
        raise ZeroDivisionError("in the backend")
    with pytest.raises(_glue.BackendCompilerFailed) as e:
        cdynamo.compile(plain, backend=bad_backend)(X)
    assert isinstance(e.value.__cause__, ZeroDivisionError)
    # code written for torch.compile catches torch's class
    import torch._dynamo.exc
    assert isinstance(e.value, torch._dynamo.exc.BackendCompilerFailed)
    assert e.value.inner_exception is e.value.__cause__


def boolean_mask_store(x, b, y):
    x = x.clone()
    x[b] = y
    return x * 2


def test_backend_fake_tensor_limit_runs_the_graph_eagerly(caplog):
    """AOTAutograd's trace of x[mask] = y's backward needs nonzero's data-dependent shape
    (DynamicOutputShapeException): the graph runs as captured, eagerly, with a warning, as
    torch._dynamo falls back there (it raised BackendCompilerFailed to the user before);
    results and gradients are eager's (PyTorch's test_repros test_setitem_boolean_mask_diff)."""
    def inputs():
        torch.manual_seed(0)
        return (torch.randn(4, requires_grad=True), torch.tensor([True, False, True, False]),
                torch.randn(2, requires_grad=True))
    x, b, y = inputs()
    expected = boolean_mask_store(x, b, y)
    expected.sum().backward()
    x2, b2, y2 = inputs()
    with caplog.at_level("WARNING", logger="cdynamo"):
        out = cdynamo.compile(boolean_mask_store, backend="aot_eager")(x2, b2, y2)
    out.sum().backward()
    assert torch.equal(out, expected)
    assert torch.equal(x2.grad, x.grad) and torch.equal(y2.grad, y.grad)
    assert any("could not compile graph" in r.getMessage() and
               "DynamicOutputShapeException" in r.getMessage() for r in caplog.records)


def test_error_on_recompile():
    """cdynamo.config.error_on_recompile (and torch._dynamo.config's) makes a recompile raise
    torch._dynamo.exc.RecompileError naming the failed guard; the first compile does not."""
    import torch._dynamo.exc

    def add(a, b):
        return a + b

    compiled = cdynamo.compile(add, backend="eager")
    assert torch.equal(compiled(X, 1), X + 1)
    for patch in (cdynamo.config.patch(error_on_recompile=True),
                  torch._dynamo.config.patch(error_on_recompile=True)):
        with patch:
            assert torch.equal(compiled(X, 1), X + 1)   # a cache hit
            with pytest.raises(torch._dynamo.exc.RecompileError, match="L\\['b'\\]"):
                compiled(X, X)
    assert torch.equal(compiled(X, X), X + X)   # off again: recompiles


def test_unmodified_frames_are_logged_at_info(caplog):
    def generator_user(x):
        def gen():
            yield x
        return x + 1, [g for g in gen()]
    with caplog.at_level(logging.INFO, logger="cdynamo"):
        cdynamo.compile(generator_user, backend="eager")(X)
    assert any("unmodified" in r.getMessage() or "Graph break" in r.getMessage()
               for r in caplog.records if r.levelno == logging.INFO)


# ---- context managers: torch.autocast, nullcontext (issue 7) ------------------------------------

def autocast_block(x, w):
    import contextlib
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
    z = y.float() * 2
    with contextlib.nullcontext():
        z = z + 1
    return z, y.dtype, torch.is_autocast_enabled("cpu")


def test_autocast_block_in_the_graph_like_dynamo():
    import torch._dynamo
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    counter = run(autocast_block, x, w)
    torch._dynamo.reset()
    dyn = CountingBackend()
    torch.compile(autocast_block, backend=dyn)(x, w)
    assert (counter.frame_count, counter.op_count) == (dyn.frame_count, dyn.op_count) == (1, 6)


def test_autocast_state_is_guarded():
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    counter = CountingBackend()
    compiled = cdynamo.compile(autocast_block, backend=counter)
    compiled(x, w)
    with torch.autocast("cpu"):
        out = compiled(x, w)
        expected = autocast_block(x, w)
    assert out[1:] == expected[1:] and counter.frame_count == 2


def _matmul(a, b):
    return a @ b


def test_autocast_dtype_change_recompiles_like_dynamo():
    """A graph traced under autocast(bfloat16) and compiled by aot_eager has the casts baked
    in: under autocast(float16) it must not run (it returned bfloat16; wrong result). The
    full autocast state is guarded while autocast is on (torch's GlobalStateGuard, as
    torch._dynamo): same results as eager, same compiles as torch._dynamo, and the
    recompile reason names the dtype."""
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    counts = []
    for engine in ("cdynamo", "dynamo"):
        cdynamo.reset()
        torch._dynamo.reset()
        from torch._dynamo.backends.registry import lookup_backend
        counter = CountingBackend(lookup_backend("aot_eager"))
        compiled = (cdynamo.compile(_matmul, backend=counter) if engine == "cdynamo"
                    else torch.compile(_matmul, backend=counter))
        for dt in (torch.bfloat16, torch.float16, torch.bfloat16, torch.float16):
            with torch.autocast("cpu", dtype=dt):
                out = compiled(a, b)
                assert out.dtype == dt and torch.equal(out, _matmul(a, b)), (engine, dt)
        assert compiled(a, b).dtype == torch.float32
        counts.append(counter.frame_count)
        if engine == "cdynamo":
            reasons = [e.recompile_reason for e in cdynamo.cache_entries(_matmul)]
    assert counts[0] == counts[1] == 3
    assert any(r and "autocast(cpu)_dtype" in r for r in reasons), reasons


def autocast_break(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x
        print("inside autocast")
        y = y @ x
    return y


def test_graph_break_inside_autocast_matches_eager():
    """The block is split by the break (tests/test_break_in_autocast.py): 2 graphs."""
    assert run(autocast_break, torch.randn(3, 3)).frame_count == 2
    assert not torch.is_autocast_enabled("cpu")


# ---- objects of one call baked into the generated code (harness repros) -----------------------

def set_built_and_mutated(x):
    s = set()
    s.add("a")
    s.add("b")
    s.update(["c", "a"])
    s.discard("b")
    return x * len(s)


def deque_built_and_mutated(a, b):
    import collections
    d = collections.deque([a, b])
    d.append(a + 1)
    d.insert(0, "foo")
    return list(d)


def numpy_copy(x):
    a = x.numpy()
    return torch.from_numpy(a.copy())


def range_iterator_type(a, b):
    it = iter(range(5))
    if isinstance(it, type(iter(range(0)))):
        return a + b
    return a - b


def helper_with_cache(x, cache={}):
    cache["n"] = cache.get("n", 0) + 1
    return x + 1


def uses_mutable_default(x):
    return helper_with_cache(x) * 2


@pytest.mark.parametrize("fn, nargs", [(set_built_and_mutated, 1), (deque_built_and_mutated, 2),
                                       (numpy_copy, 1), (range_iterator_type, 2)],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_objects_of_the_call_are_not_baked_in(fn, nargs):
    # before: a builtin method of an object made in the frame was rebuilt as a constant (the
    # first call's object): the second call mutated or read the old object
    compiled = cdynamo.compile(fn, backend="eager")
    for seed in range(3):
        args = [torch.full((2,), float(seed + i)) for i in range(nargs)]
        assert str(compiled(*args)) == str(fn(*args))


def test_mutable_default_is_mutated_in_place():
    helper_with_cache.__defaults__[0].clear()
    compiled = cdynamo.compile(uses_mutable_default, backend="eager")
    compiled(X)
    compiled(X)
    assert helper_with_cache.__defaults__[0] == {"n": 2}


# ---- torch objects made in the frame ------------------------------------------------------------

def torch_objects_made_here(x):
    y = torch.nn.Softmax(dim=-1)(x)
    m = torch.finfo(x.dtype).min
    z = torch.nn.functional.relu(x).masked_fill(x < 0, m)
    return y + torch.nn.ReLU()(x) + z * 0 + torch.tensor(range(3)).sum()


def test_torch_modules_and_finfo_made_in_the_frame():
    # before: each class call was a graph break; torch._dynamo makes one graph (its graph
    # also records nn.Module.__init__'s _log_api_usage_once calls)
    counter = run(torch_objects_made_here, torch.randn(3))
    assert counter.frame_count == 1 and counter.op_count == 11


# ---- found by the differential fuzzer (tests/fuzz, seed 0) --------------------------------

def test_float_guard_tells_negative_zero_from_zero():
    """float(t) at a break is an argument of the resume function, guarded by its value:
    -0.0 == 0.0 in Python, so an == guard reused the resume function that had -0.0 baked in."""
    def f(x, y):
        x -= x
        x *= y
        m = x.max()
        return float(m), str(float(m))

    compiled = cdynamo.compile(f, backend="eager")
    x = torch.tensor([1.0, 1.0])
    neg = torch.tensor([-1.0, -1.0])
    pos = torch.tensor([1.0, 1.0])
    assert compiled(x.clone(), neg) == f(x.clone(), neg) == (-0.0, "-0.0")
    assert compiled(x.clone(), pos) == f(x.clone(), pos)
    assert compiled(x.clone(), pos)[1] == "0.0"
    nan = float("nan")

    def g(v, x):
        return x + 1, str(v)

    cg = cdynamo.compile(g, backend="eager")
    assert cg(nan, X)[1] == "nan" and cg(nan, X)[1] == "nan"


def test_break_in_try_block_handler_rebuilds_objects_of_its_own():
    """A break at an instruction in a try block: the handler's resume function got a list
    that only the normal path (after the instruction) had rebuilt: UnboundLocalError."""
    def f(y):
        t = y * 2
        items = [t]
        try:
            _ = {}["missing"]
        except KeyError:
            for u in items:
                t = t + u
        return t, items

    def h(x):
        d = {"a": x + 1}
        keep = [d]
        try:
            print("read", d["b"])
        except KeyError:
            keep.append(x - 1)
        return keep

    run(f, X)
    run(h, X)


def test_inplace_op_on_overlapping_memory_inside_try_is_caught_as_in_eager():
    """`a.mul_(a.flatten()[4])` raises in eager (partial overlap of operand and receiver),
    which fake tensors do not see: in a graph the error escaped the user's try block. Such a
    call runs in Python; disjoint views of one tensor stay in the graph."""
    def f(x):
        try:
            x.mul_(x.flatten()[4])
            caught = False
        except RuntimeError:
            caught = True
        return x + 1, caught

    def g(x):
        y = x * 2
        y.add_(x)
        y.mul_(y)
        y[:, 1:].copy_(y[:, :1])
        return y

    run(f, X)
    assert run(g, X).frame_count == 1
    assert cdynamo.explain(g)(X.clone()).graph_break_count == 0


def _library_helper(x):
    # as transformers' helpers test it before taking an export-only path
    if torch.compiler.is_exporting():
        return x - 1
    return x + 1


def test_is_exporting_folds_in_inlined_code():
    """torch.compiler.is_exporting() (a trace_rules CONSTANT entry) folds to False wherever
    it is called, not only as a torch function: it was a graph break ("trace rule skip") in
    every transformers model."""
    def f(x):
        return _library_helper(x) * 2

    counter = run(f, X)
    assert counter.frame_count == 1
    assert cdynamo.explain(f)(X.clone()).graph_break_count == 0


# ---- grad mode after a no_grad block that a break split -------------------------------------

def no_grad_block_split_at_its_end(x):
    with torch.no_grad():
        x = x * 2
        print(end="")
    return x, torch.is_grad_enabled(), x.requires_grad


def test_grad_mode_restored_by_a_resume_function_without_tensor_ops():
    """The resume function after the break only leaves the no_grad block: its graph has no
    tensor operation and is not called, so the generated code restores the mode itself
    (grad mode stayed disabled after the call)."""
    x = torch.randn(3, requires_grad=True)
    compiled = cdynamo.compile(no_grad_block_split_at_its_end, backend="eager")
    for _ in range(2):
        out = compiled(x)
        assert torch.is_grad_enabled(), "grad mode left disabled"
        assert out[1:] == (True, False)


# ---- graph breaks inside exception handlers ---------------------------------------------------

def reraise_after_break(x):
    try:
        raise ValueError("v")
    except ValueError:
        x = x + 1
        print(end="")
        raise


def exc_info_after_break(x):
    try:
        raise ValueError("v")
    except ValueError:
        x = x + 1
        print(end="")
        return x, sys.exc_info()[0]


def chained_after_break(x):
    try:
        raise ValueError("v")
    except ValueError:
        print(end="")
        raise KeyError("k")


def test_bare_raise_after_a_break_in_a_handler_reraises_the_exception():
    """A break inside an except block runs the frame unmodified (CDB0020): the resume function
    would have had no exception to re-raise (RuntimeError: No active exception to reraise)."""
    compiled = cdynamo.compile(reraise_after_break, backend="eager")
    with pytest.raises(ValueError, match="v"):
        compiled(X)


def test_exc_info_and_chaining_after_a_break_in_a_handler():
    out = cdynamo.compile(exc_info_after_break, backend="eager")(X)
    assert out[1] is ValueError and torch.equal(out[0], X + 1)
    with pytest.raises(KeyError) as info:
        cdynamo.compile(chained_after_break, backend="eager")(X)
    assert isinstance(info.value.__context__, ValueError)
    explained = cdynamo.explain(exc_info_after_break)(X)
    assert [b.code for b in explained.unmodified_frames] == ["CDB0020"]


# ---- found while building the module call fast path (session of 2026-11-27) ------------

def _scaled(k, x):
    return x * k


def _star_call(k, *a):
    # BUILD_LIST [k], LIST_EXTEND a, LIST_TO_TUPLE, CALL_FUNCTION_EX
    return _scaled(k, *a)


def test_list_to_tuple_of_a_list_handed_to_a_resume_function():
    # under torch.jit.trace no fake tensor can be made of a traced tensor, so LIST_EXTEND of
    # `a` is a graph break and the resume function starts at LIST_TO_TUPLE with the list on
    # its stack (an input list, wrapped lazily): it crashed (NULL items)
    cdynamo.reset()
    compiled = cdynamo.compile(_star_call, backend="eager")
    x = torch.randn(3)
    traced = torch.jit.trace(lambda t: compiled(2, t), (x,), check_trace=False)
    assert torch.equal(traced(x), _star_call(2, x))


def _named_self(self, *a, **k):
    return _scaled(self, *a, **k)


def test_tensor_argument_named_self():
    # a frame's tensor named `self` became a placeholder `self`, the generated forward's own
    # first parameter: "forward() takes 1 positional argument but 2 were given"
    x = torch.randn(3)
    counter = run(_named_self, x, 3)
    assert counter.frame_count == 1
    counter = run(_named_self, x, x)
    assert counter.frame_count == 1


class _Registry(dict):
    def get(self, k):
        return super().get(k) or 0


_REG = _Registry(a=1, b=2)


def _two_registry_reads(x):
    return x + _REG.get("a") * 10 + _REG.get("b")


def test_two_keys_of_a_dict_subclass_are_two_guards():
    # the sources of two entries of one dict subclass shared their readable form
    # (dict_entry(G['REG'])): the second read returned the first one's value (11, eager 12)
    # and a change of the second entry was not seen
    cdynamo.reset()
    compiled = cdynamo.compile(_two_registry_reads, backend="eager")
    x = torch.zeros(1)
    assert compiled(x).item() == _two_registry_reads(x).item() == 12
    dict.__setitem__(_REG, "b", 5)
    try:
        assert compiled(x).item() == _two_registry_reads(x).item() == 15
    finally:
        dict.__setitem__(_REG, "b", 2)


_DEBUG_ALLOC_SCRIPT = r"""
import gc, torch, cdynamo
def two(a, b):
    return a * 2 + b
compiled = cdynamo.compile(two, backend="eager")
x, y = torch.randn(3, dtype=torch.complex64), torch.randn(3, dtype=torch.complex64)
for _ in range(3):
    compiled(x, y)
out = compiled(x, y.conj())     # fails only in TensorGuards (dispatch keys): the slow path
assert torch.equal(out, two(x, y.conj()))
print(cdynamo.cache_entries(two)[0].recompile_reason)
cdynamo.reset()
gc.collect()
print("clean")
"""


def test_tensor_guards_failure_report_stays_in_bounds():
    # naming the tensor whose dispatch keys failed listed every guard marked batched, the
    # NO_TENSOR_ALIASING that TensorGuards implies included: one item past the end of a
    # list. Python's debug allocator (PYTHONMALLOC=debug) catches a write past a block.
    import os
    import subprocess
    env = dict(os.environ, PYTHONMALLOC="debug")
    r = subprocess.run([sys.executable, "-c", _DEBUG_ALLOC_SCRIPT], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "dispatch key" in r.stdout and "L['b']" in r.stdout and "clean" in r.stdout
