"""Python as Hugging Face models write it (issue 7), found on models as they ship:

- torch._dynamo.assume_constant_result (transformers 5.23 marks its install probes,
  is_torch_distributed_available, ..., under @lru_cache; wav2vec2/hubert/mamba call them from
  forward): the marked function is called while tracing and its result is a constant, not
  guarded, as torch._dynamo does; cdynamo.assume_constant_result sets the same marker.
- Python's scalar types as torch dtypes (`torch.zeros(n, dtype=int)`, transformers'
  masking_utils.create_chunked_causal_mask in Llama4): eager torch takes int, float, bool and
  complex wherever a dtype goes (int64, float64, bool, complex128).
- nn.Modules constructed inside the compiled code (transformers' ACT2FN["silu"] builds a
  SiLUActivation on every lookup; mamba calls it per forward; nn.Softmax(dim=-1)(x)): their
  __init__ (nn.Module's too) is traced, calling them inlines forward, a module that escapes is
  rebuilt (a new one per call, as eager), one creating parameters is a graph break.
- transformers' ACT2FN, a ClassInstantier (an OrderedDict subclass whose __getitem__ reads
  `super().__getitem__(key)` and builds the class found): two keys read in one frame are two
  entries (they were one source, so the second read returned the first's class).

Each program runs eagerly and under cdynamo (twice: the second call hits the cache); results
must equal eager's, and graphs / graph breaks are compared with torch._dynamo's on the same
function."""
import collections
import functools
import importlib.util

import pytest
import torch
import torch.nn as nn

import cdynamo
from helpers import CountingBackend, assert_same, check_against_eager


X = torch.randn(4)


def counts(explain, fn, *args):
    """(graphs, graph breaks) of explain(fn)(*args) (cdynamo.explain or torch._dynamo's)."""
    if explain is torch._dynamo.explain:
        torch._dynamo.reset()
    else:
        cdynamo.reset()
    e = explain(fn)(*args)
    return e.graph_count, e.graph_break_count


def check(fn, *args, calls=2):
    """fn under cdynamo (calls times) equals eager, with as many graphs and graph breaks as
    torch._dynamo on the same function. Returns cdynamo's counting backend."""
    counter = check_against_eager(fn, *args, calls=calls)
    assert counts(cdynamo.explain, fn, *args) == counts(torch._dynamo.explain, fn, *args)
    return counter


# ================================================================ Python scalar types as dtypes


def chunked_mask(x):
    # transformers.masking_utils.create_chunked_causal_mask
    z = torch.zeros(x.shape[0], dtype=int)
    f = torch.ones(x.shape[0], dtype=float)
    return x + z + f


def every_scalar_type(x):
    return (torch.ones(2, dtype=bool), x.to(float), x.new_zeros(3, dtype=int),
            torch.full((2,), 3, dtype=int), x.to(dtype=bool))


def complex_dtype(x):
    return torch.ones(2, dtype=complex) * x[:2]


@pytest.mark.parametrize("fn", [chunked_mask, every_scalar_type], ids=lambda f: f.__name__)
def test_python_scalar_types_as_dtypes(fn):
    counter = check(fn, X)
    assert counts(cdynamo.explain, fn, X) == (1, 0)
    assert counter.frame_count == 1


def test_python_complex_as_dtype():
    # beyond torch._dynamo, which breaks on dtype=complex ("Missing as_proxy()")
    expected = complex_dtype(X)
    counter = CountingBackend()
    cdynamo.reset()
    compiled = cdynamo.compile(complex_dtype, backend=counter)
    for i in range(2):
        assert_same(compiled(X), expected, f"call {i}")
    assert expected.dtype == torch.complex128 and counter.frame_count == 1
    assert counts(cdynamo.explain, complex_dtype, X) == (1, 0)
    assert "torch.complex128" in counter.graphs[0].code


def test_python_scalar_type_dtype_in_the_graph_is_the_torch_dtype():
    # eager: int -> int64, float -> float64 (whatever the default dtype), complex -> complex128;
    # the FX node carries the dtype, so the graph's code is valid Python and reruns
    counter = check(every_scalar_type, X)
    gm = counter.graphs[0]
    code = gm.code
    assert "torch.int64" in code and "torch.float64" in code and "torch.bool" in code
    assert "<class" not in code
    rebuilt = torch.fx.GraphModule(gm, gm.graph)   # compiles gm.code again
    assert_same(rebuilt(X), every_scalar_type(X))


def test_python_scalar_type_float_is_float64_under_another_default_dtype():
    def f(x):
        return torch.ones(2, dtype=float) + x.sum()
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        x = torch.randn(2)
        check(f, x)
    finally:
        torch.set_default_dtype(old)


def test_python_scalar_type_refused_by_eager_raises_as_in_eager():
    # Tensor.type() refuses Python types in eager: the call stays a graph break, and raises
    def f(x):
        return x.type(float)
    with pytest.raises(ValueError, match="invalid type"):
        f(X)
    cdynamo.reset()
    with pytest.raises(ValueError, match="invalid type"):
        cdynamo.compile(f, backend="eager")(X)


# ================================================================ assume_constant_result

PROBE_CALLS = []


@functools.lru_cache
@torch._dynamo.assume_constant_result          # as transformers' _make_compile_constant
def torch_installed() -> bool:
    PROBE_CALLS.append("torch_installed")
    return importlib.util.find_spec("torch") is not None


@torch._dynamo.assume_constant_result          # the mark on the lru_cache wrapper itself
@functools.lru_cache
def numpy_installed() -> bool:
    return importlib.util.find_spec("numpy") is not None


def copying_decorator(fn):
    @functools.wraps(fn)                       # copies fn.__dict__, the mark included
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@copying_decorator
@cdynamo.assume_constant_result
def scale_of(n, factor=1.0):
    PROBE_CALLS.append("scale_of")
    return importlib.util.find_spec("torch") is not None and float(n) * factor


def probes_under_lru_cache(x):
    x = x + 1
    if torch_installed():
        x = x * 2
    if numpy_installed():
        x = x - 3
    return x


def probe_value_in_the_graph(x):
    return torch.full((2,), scale_of(3, factor=2.0)) + x[:2]


@pytest.mark.parametrize("fn", [probes_under_lru_cache, probe_value_in_the_graph],
                         ids=lambda f: f.__name__)
def test_assume_constant_result(fn):
    # before: inlined down to importlib.util.find_spec, a graph break per probe
    counter = check(fn, X)
    assert counts(cdynamo.explain, fn, X) == (1, 0)
    assert counter.frame_count == 1


def test_assume_constant_result_is_a_literal_of_the_graph_and_not_guarded():
    PROBE_CALLS.clear()
    counter = check(probe_value_in_the_graph, X, calls=3)
    code = counter.graphs[0].code
    assert "6.0" in code   # the folded result, printed as Python
    rebuilt = torch.fx.GraphModule(counter.graphs[0], counter.graphs[0].graph)
    assert_same(rebuilt(X)[0], probe_value_in_the_graph(X))
    # called while tracing only (once per trace; the eager reference and torch._dynamo add
    # theirs), never by the compiled code
    cdynamo.reset()
    compiled = cdynamo.compile(probe_value_in_the_graph, backend="eager")
    n = len(PROBE_CALLS)
    compiled(X)
    assert PROBE_CALLS[n:] == ["scale_of"]   # the trace
    for _ in range(3):
        compiled(X)
    assert PROBE_CALLS[n:] == ["scale_of"]
    guards = cdynamo.cache_entries(probe_value_in_the_graph)[0].guards
    assert not any("scale_of" in g and "EQUALS" in g for g in guards), guards


FLAG = {"on": True}


@torch._dynamo.assume_constant_result
def flag_is_on():
    return FLAG["on"]


def uses_flag(x):
    return x + 1 if flag_is_on() else x - 1


def test_assume_constant_result_keeps_the_traced_answer_as_torch_dynamo():
    # the mark promises the answer never changes: a change is not seen by either compiler
    FLAG["on"] = True
    cdynamo.reset()
    torch._dynamo.reset()
    ours = cdynamo.compile(uses_flag, backend="eager")
    theirs = torch.compile(uses_flag, backend="eager")
    assert_same(ours(X), X + 1)
    assert_same(theirs(X), X + 1)
    FLAG["on"] = False
    try:
        assert_same(ours(X), X + 1)
        assert_same(theirs(X), X + 1)
        assert len(cdynamo.cache_entries(uses_flag)) == 1
    finally:
        FLAG["on"] = True
        torch._dynamo.reset()


class ProbedBlock(torch.nn.Module):
    @torch._dynamo.assume_constant_result
    def fast_path(self):
        return self.training

    def forward(self, x):
        return x + 1 if self.fast_path() else x - 1


def test_assume_constant_result_method_pins_its_object():
    # self is an argument: passed as the object itself, pinned by identity (ID_MATCH), so
    # another instance of the class recompiles instead of reusing the first one's answer
    def f(x, m):
        return m(x)
    a, b = ProbedBlock(), ProbedBlock().eval()
    counter = check(f, X, a)
    assert counts(cdynamo.explain, f, X, a) == (1, 0)
    compiled = cdynamo.compile(f, backend=counter)
    assert_same(compiled(X, a), X + 1)
    assert_same(compiled(X, b), X - 1)
    assert any("ID_MATCH" in g for g in cdynamo.cache_entries(f)[0].guards)


class _Box:
    def __init__(self, v):
        self.v = v


BOXES = [_Box(1.0), _Box(10.0)]


@torch._dynamo.assume_constant_result
def box_at(i):
    return BOXES[i]


def test_assume_constant_result_two_objects_in_one_trace():
    """Two calls returning two different objects (not constants): each result is its own
    value (both were one, the first, as their constant sources shared a name), as eager and
    torch._dynamo."""
    def f(x):
        a, b = box_at(0), box_at(1)
        return x + a.v * 100 + b.v
    torch._dynamo.reset()
    assert_same(torch.compile(f, backend="eager")(X), X + 110)
    torch._dynamo.reset()
    counter = check(f, X)
    assert counter.frame_count == 1
    assert_same(cdynamo.compile(f, backend="eager")(X), X + 110)


@torch._dynamo.assume_constant_result
def size_of(t):
    return 2


@torch._dynamo.assume_constant_result
def fails():
    raise RuntimeError("probe failed")


def test_assume_constant_result_on_a_tensor_or_raising_is_a_graph_break():
    # a tensor argument has no value while tracing (torch._dynamo runs the graph so far for
    # it): the call runs in Python; a probe that raises raises from the compiled code
    def f(x):
        return x * size_of(x)

    def g(x):
        return x + fails()
    cdynamo.reset()
    e = cdynamo.explain(f)(X)
    assert e.graph_break_count == 1
    assert "assume_constant_result" in e.break_reasons[0].reason
    assert_same(cdynamo.compile(f, backend="eager")(X), f(X))
    cdynamo.reset()
    with pytest.raises(RuntimeError, match="probe failed"):
        cdynamo.compile(g, backend="eager")(X)


def test_transformers_install_probes():
    transformers = pytest.importorskip("transformers")
    from transformers.utils import import_utils as iu

    def f(x):
        if iu.is_torch_greater_or_equal("2.5") and iu.is_torch_distributed_available():
            x = x * 2
        return x + iu.is_torch_available()
    del transformers
    check(f, X)
    assert counts(cdynamo.explain, f, X) == (1, 0)


# ================================================================ dict subclass registries


class AddOne:
    def __call__(self, x):
        return x + 1


class Double:
    def __init__(self, k=2):
        self.k = k

    def __call__(self, x):
        return x * self.k


class ClassInstantier(collections.OrderedDict):   # transformers.activations.ClassInstantier
    def __getitem__(self, key):
        content = super().__getitem__(key)
        cls, kwargs = content if isinstance(content, tuple) else (content, {})
        return cls(**kwargs)


REGISTRY = ClassInstantier({"one": AddOne, "double": (Double, {"k": 3})})


def two_registry_entries(x):
    return REGISTRY["one"](x) + REGISTRY["double"](x)


def test_two_entries_of_a_dict_subclass_registry_are_two_values():
    check(two_registry_entries, X)
    assert counts(cdynamo.explain, two_registry_entries, X) == (1, 0)


def test_dict_subclass_registry_entries_are_guarded_each():
    compiled = cdynamo.compile(two_registry_entries, backend="eager")
    assert_same(compiled(X), (X + 1) + X * 3)
    REGISTRY["double"] = (Double, {"k": 5})
    try:
        assert_same(compiled(X), (X + 1) + X * 5)
    finally:
        REGISTRY["double"] = (Double, {"k": 3})
    assert_same(compiled(X), (X + 1) + X * 3)


# ================================================================ nn.Modules made in the frame


class SiLUActivation(nn.Module):                 # transformers.activations.SiLUActivation
    def forward(self, x):
        return nn.functional.silu(x)


class Scale(nn.Module):
    def __init__(self, s, bias=0.0):
        super().__init__()
        self.s = s
        self.bias = bias

    def forward(self, x):
        return x * self.s + self.bias


class WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("offset", torch.arange(4.0))

    def forward(self, x):
        return x + self.offset


class WithParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4))

    def forward(self, x):
        return x * self.w


class PrintsInForward(nn.Module):
    def forward(self, x):
        print("forward")
        return x + 1


def silu_made_in_forward(x):
    act = SiLUActivation()
    return act(x + 1) * 2


def torch_nn_modules_made_in_forward(x):
    y = nn.Softmax(dim=-1)(x) + nn.GELU(approximate="tanh")(x) + nn.Identity()(x)
    return nn.Dropout(p=0.0)(y) + nn.Flatten(0)(x).view(x.shape)


def user_module_with_traced_arguments(x):
    return Scale(x.shape[0], bias=x.sum())(x)


def modules_in_a_loop(x):
    mods = [Scale(k) for k in range(1, 4)]
    for m in mods:
        x = m(x)
    return x, isinstance(mods[0], nn.Module), mods[1].training


def sequential_made_in_forward(x):
    return nn.Sequential(nn.ReLU(), Scale(2), SiLUActivation())(x)


def module_with_a_buffer(x):
    return WithBuffer()(x)


def eval_mode_set_in_forward(x):
    m = nn.Dropout(p=0.5)
    m.eval()
    return m(x), m.training


@pytest.mark.parametrize("fn", [silu_made_in_forward, torch_nn_modules_made_in_forward,
                                user_module_with_traced_arguments, modules_in_a_loop,
                                sequential_made_in_forward, module_with_a_buffer,
                                eval_mode_set_in_forward], ids=lambda f: f.__name__)
def test_module_made_in_forward(fn):
    # before: "construction of SiLUActivation (a torch class)", a graph break
    counter = check(fn, X)
    assert counts(cdynamo.explain, fn, X) == (1, 0)
    assert counter.frame_count == 1


def test_module_made_in_forward_under_torch_dynamos_patched_init():
    # torch.compile patches nn.Module.__init__ (generation tagging); the function it wraps
    # is traced in its place
    from torch._dynamo import mutation_guard
    mutation_guard.install_generation_tagging_init()
    assert nn.Module.__init__.__qualname__.endswith("patched_init")
    check(silu_made_in_forward, X)
    assert counts(cdynamo.explain, silu_made_in_forward, X) == (1, 0)


def test_activations_of_transformers_act2fn():
    pytest.importorskip("transformers")
    from transformers.activations import ACT2FN

    def f(x):
        return ACT2FN["silu"](x) + ACT2FN["gelu"](x) + ACT2FN["relu"](x)
    check(f, X)
    assert counts(cdynamo.explain, f, X) == (1, 0)


def returns_module(x):
    m = Scale(2.0)
    return m(x), m


def returns_torch_nn_module(x):
    m = nn.Sequential(nn.Softmax(dim=-1), Scale(3))
    return m(x), m


@pytest.mark.parametrize("fn", [returns_module, returns_torch_nn_module],
                         ids=lambda f: f.__name__)
def test_module_made_in_forward_that_escapes_is_rebuilt_per_call(fn):
    expected_out, expected_mod = fn(X)
    cdynamo.reset()
    compiled = cdynamo.compile(fn, backend="eager")
    out1, mod1 = compiled(X)
    out2, mod2 = compiled(X)
    assert_same(out1, expected_out)
    assert mod1 is not mod2   # a new module per call (the same object before: built once)
    for mod in (mod1, mod2):
        assert type(mod) is type(expected_mod)
        assert list(mod.__dict__) == list(expected_mod.__dict__)
        assert [n for n, _ in mod.named_modules()] == [n for n, _ in expected_mod.named_modules()]
        assert_same(mod(X), expected_mod(X))
    # the rebuilt module is a working module: hooks, mode, state
    seen = []
    mod1.register_forward_hook(lambda m, i, o: seen.append(o))
    mod1(X)
    assert len(seen) == 1 and mod1.eval() is mod1 and not mod1.training
    assert mod2.training and mod2.state_dict().keys() == expected_mod.state_dict().keys()
    assert_same(compiled(X)[0], expected_out)
    assert counts(cdynamo.explain, fn, X) == counts(torch._dynamo.explain, fn, X)


def module_live_at_a_break(x):
    m = Scale(2)
    y = m(x)
    torch._dynamo.graph_break()
    return m(y), m.s


def module_whose_forward_breaks(x):
    return PrintsInForward()(x) * 2


@pytest.mark.parametrize("fn", [module_live_at_a_break, module_whose_forward_breaks],
                         ids=lambda f: f.__name__)
def test_module_made_in_forward_across_graph_breaks(fn, capsys):
    expected = fn(X)
    cdynamo.reset()
    compiled = cdynamo.compile(fn, backend="eager")
    for i in range(2):
        assert_same(compiled(X), expected, f"call {i}")
    graphs, breaks = counts(cdynamo.explain, fn, X)
    dyn_graphs, dyn_breaks = counts(torch._dynamo.explain, fn, X)
    assert breaks == dyn_breaks and graphs <= dyn_graphs


def module_with_parameters(x):
    return WithParameter()(x) + nn.Linear(4, 4)(x)


def test_module_creating_parameters_is_a_graph_break():
    # nn.Parameter is not made while tracing: the construction runs in Python (eager's RNG
    # stream, eager's parameters); the __init__ compiled as a frame of its own says why
    torch.manual_seed(0)
    expected = [module_with_parameters(X) for _ in range(3)]   # new parameters per call
    cdynamo.reset()
    compiled = cdynamo.compile(module_with_parameters, backend="eager")
    torch.manual_seed(0)
    for i in range(3):
        assert_same(compiled(X), expected[i], f"call {i}")
    cdynamo.reset()
    e = cdynamo.explain(module_with_parameters)(X)
    reasons = [b.reason for b in e.break_reasons]
    assert reasons[0].endswith("construction of Parameter (a tensor subclass)"), reasons
    assert not any(r.endswith("None") for r in reasons), reasons


def test_module_made_in_forward_with_a_hook_registered_runs_the_hook():
    def f(x):
        m = nn.ReLU()
        m.register_forward_hook(lambda mod, inp, out: out * 10)
        return m(x)
    expected = f(X)
    cdynamo.reset()
    compiled = cdynamo.compile(f, backend="eager")
    for i in range(2):
        assert_same(compiled(X), expected, f"call {i}")


def test_module_made_in_forward_under_a_global_hook_runs_the_hook():
    handle = nn.modules.module.register_module_forward_hook(lambda m, i, o: o + 100)
    try:
        expected = silu_made_in_forward(X)
        cdynamo.reset()
        compiled = cdynamo.compile(silu_made_in_forward, backend="eager")
        assert_same(compiled(X), expected)
        e = cdynamo.explain(silu_made_in_forward)(X)
        assert any("global module hooks" in b.reason for b in e.break_reasons)
    finally:
        handle.remove()


def test_no_symbolic_value_outlives_these_translations():
    # modules made, escaping, live at breaks, a Parameter refused; constants called
    import gc
    cdynamo.reset()
    gc.collect()
    for fn in (silu_made_in_forward, returns_torch_nn_module, module_live_at_a_break,
               module_with_parameters, probe_value_in_the_graph, two_registry_entries,
               every_scalar_type):
        compiled = cdynamo.compile(fn, backend="eager")
        for _ in range(2):
            compiled(X)
            assert cdynamo._C.live_counts()["values"] == 0, fn
    cdynamo.reset()
    gc.collect()
    assert cdynamo._C.live_counts() == {"values": 0, "guard_sets": 0, "cache_entries": 0}
