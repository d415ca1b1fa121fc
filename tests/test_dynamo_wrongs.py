"""Wrong results / wrong exceptions found by the differential harness over PyTorch's own Dynamo
tests (/work/harness/dynamo_tests/repro): each program is compared with eager, and graph counts
with torch._dynamo where both compile the same."""
import pytest
import torch

import cdynamo
from helpers import CountingBackend, assert_same, run_torch_dynamo, check_against_eager


run = check_against_eager     # eager result vs cdynamo on `calls` calls; returns the backend


X = torch.ones(2)


# ---- __context__ / __cause__ of exceptions raised and caught in the trace ----------------

def ctx_try_finally(x):
    try:
        try:
            te = TypeError(1)
            raise te
        finally:
            ve = ValueError(2)
            raise ve
    except Exception as e:
        exc = e
    return x + 1, exc is ve, exc.__context__ is te, type(exc.__context__).__name__


def ctx_except_finally(x):
    try:
        try:
            te = TypeError(1)
            raise te
        except Exception:
            ve = ValueError(2)
            raise ve
        finally:
            oe = OSError(3)
            raise oe
    except Exception as e:
        exc = e
    return (x + 1, exc is oe, exc.__context__ is ve, exc.__context__.__context__ is te,
            te.__context__ is None)


def ctx_else_finally(x):
    try:
        try:
            pass
        except Exception:
            pass
        else:
            ve = ValueError(1)
            raise ve
        finally:
            oe = OSError(2)
            raise oe
    except Exception as e:
        exc = e
    return x + 1, exc is oe, exc.__context__ is ve, ve.__context__ is None


def ctx_raise_from(x):
    try:
        try:
            raise KeyError("k")
        except KeyError as k:
            raise ValueError("v") from k
    except ValueError as e:
        exc = e
    return (x + 1, type(exc.__cause__).__name__, exc.__cause__ is exc.__context__,
            exc.__suppress_context__)


def ctx_raise_from_none(x):
    try:
        try:
            raise KeyError("k")
        except KeyError:
            raise ValueError("v") from None
    except ValueError as e:
        exc = e
    return x + 1, exc.__cause__ is None, type(exc.__context__).__name__, exc.__suppress_context__


def ctx_bare_reraise(x):
    # a re-raise keeps the exception's chain as it was (no new __context__)
    try:
        try:
            raise KeyError("k")
        except KeyError:
            raise
    except KeyError as e:
        exc = e
    return x + 1, exc.__context__ is None


def test_exception_context_in_finally_except_else():
    for fn in (ctx_try_finally, ctx_except_finally, ctx_else_finally, ctx_raise_from,
               ctx_raise_from_none, ctx_bare_reraise):
        counter = run(fn, X)
        _, dyn = run_torch_dynamo(fn, X)
        assert counter.frame_count == dyn.frame_count == 1, fn.__name__


def ctx_across_break(x):
    try:
        try:
            te = TypeError(1)
            raise te
        finally:
            ve = ValueError(2)
            raise ve
    except Exception as e:
        exc = e
    cdynamo.graph_break()
    return x + 1, exc is ve, exc.__context__ is te, exc.__context__.args, exc.__cause__


def test_exception_context_crosses_a_graph_break():
    # the exceptions are rebuilt once each by the generated code, with their chain links
    counter = run(ctx_across_break, X)
    _, dyn = run_torch_dynamo(ctx_across_break, X)
    assert counter.frame_count == dyn.frame_count


def returns_chained(x):
    try:
        try:
            raise KeyError("k")
        except KeyError:
            raise ValueError("v")
    except ValueError as e:
        return x + 1, e


def test_returned_exception_keeps_its_context():
    e_res, e_exc = returns_chained(X)
    r_res, r_exc = cdynamo.compile(returns_chained, backend="eager")(X)
    assert_same(r_res, e_res)
    assert type(r_exc) is ValueError and r_exc.args == e_exc.args
    assert type(r_exc.__context__) is KeyError and r_exc.__context__.args == ("k",)
    assert r_exc.__cause__ is None and r_exc.__suppress_context__ is False


# ---- the Python type of tensor inputs: nn.Parameter (and other exact types) --------------

class ParamModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        self.register_buffer("buf", torch.ones(2))

    def forward(self, x, p):
        return (x + 1, isinstance(self.lin.weight, torch.nn.Parameter),
                isinstance(self.buf, torch.nn.Parameter), type(self.lin.weight) is torch.nn.Parameter,
                isinstance(p, torch.nn.Parameter), isinstance(x, torch.nn.Parameter),
                type(p).__name__, type(x).__name__)


def test_parameter_inputs_keep_their_type():
    m = ParamModule()
    p = torch.nn.Parameter(torch.ones(2))
    counter = run(m, X, p)
    assert counter.frame_count == 1
    # a plain tensor in p's place fails the TENSOR_MATCH (its exact type) and recompiles
    assert_same(cdynamo.compile(m, backend="eager")(X, torch.ones(2)), m(X, torch.ones(2)))


def make_param():
    a = torch.nn.Parameter(torch.randn(5, 5))   # a graph break: the resume gets a Parameter
    return isinstance(a, torch.nn.Parameter), type(a).__name__, a.requires_grad


def test_parameter_made_in_the_frame():
    assert cdynamo.compile(make_param, backend="eager")() == make_param()


# ---- isinstance against torch's legacy tensor types (dtype/device by metaclass) ----------

def legacy_types(dtype, tensor_type):
    x = torch.empty(4, dtype=dtype)
    y = x.double()
    return (isinstance(x, tensor_type), isinstance(y, torch.DoubleTensor),
            isinstance(x, (torch.BoolTensor, tensor_type)), isinstance(x, (int, torch.Tensor)))


def legacy_input(x):
    return x * 2, isinstance(x, torch.FloatTensor), isinstance(x, torch.LongTensor)


def test_isinstance_of_legacy_tensor_types():
    compiled = cdynamo.compile(legacy_types, backend="eager")
    for dt, tt in [(torch.float32, torch.FloatTensor), (torch.float64, torch.DoubleTensor),
                   (torch.int64, torch.LongTensor), (torch.bool, torch.BoolTensor),
                   (torch.float32, torch.DoubleTensor), (torch.int32, torch.FloatTensor)]:
        assert compiled(dt, tt) == legacy_types(dt, tt), (dt, tt)
    run(legacy_input, X)
    run(legacy_input, torch.arange(3))


# ---- nn.Module attribute precedence: the class and the instance dict before __getattr__ ---

class PrecedenceBase(torch.nn.Module):
    def linear(self, x):
        return x * 2.0


class Precedence(PrecedenceBase):
    def __init__(self):
        super().__init__()
        self.activation = torch.nn.ReLU()        # a submodule: M.activation (a method) wins
        self.linear = torch.nn.Linear(10, 10)    # a submodule: Base.linear wins
        self.initializer = torch.ones([10, 10])  # plain attribute: the instance dict wins
        self.scale = 0.5

    def activation(self, x):
        return x * 1.2

    def initializer(self):
        return torch.zeros([10, 10])

    def scale(self):
        return 2.0

    def forward(self, x):
        return self.activation(self.linear(self.initializer + x)) * self.scale


def test_module_attribute_precedence():
    m = Precedence().eval()
    x = torch.randn(10, 10)
    counter = run(m, x)
    _, dyn = run_torch_dynamo(m, x)
    assert counter.frame_count == dyn.frame_count == 1


# ---- generators and polyfilled iterators rebuilt at a break or returned keep their type ---

def close_after_break(x):
    log = []

    def f():
        try:
            yield
        except GeneratorExit:
            log.append("exiting")

    g = f()
    next(g)
    g.close()
    cdynamo.graph_break()   # g crosses the break
    g.close()               # a no-op in eager
    return x + 1, log, type(g).__name__, g.__name__


def test_generator_close_after_a_graph_break():
    run(close_after_break, X)


def whoo(t):
    yield t + 1
    yield t + 2


def returns_iterators(t):
    g = whoo(t)
    next(g)
    return (zip(range(2), whoo(t)), map(torch.cos, [t, t]), enumerate(whoo(t), 3), g,
            filter(None, [1, 0, 2]), t.sin())


def test_returned_iterators_keep_their_type():
    expected = returns_iterators(X)
    got = cdynamo.compile(returns_iterators, backend="eager", fullgraph=True)(X)
    for e, r in zip(expected, got):
        assert type(r) is type(e)
    assert got[3].__name__ == "whoo" and got[3].__qualname__ == "whoo"
    for e, r in zip(expected, got):
        if isinstance(e, torch.Tensor):
            assert_same(r, e)
        else:
            assert_same(list(r), list(e))


# ---- fullgraph=True also forbids running a frame unmodified -------------------------------

def subgen(t):
    yield t + 1
    yield t + 2


def main_gen(t):
    yield from subgen(t)
    yield t + 3


def returns_started_subgenerator(t):
    gen = main_gen(t)
    next(gen)
    return gen


def test_fullgraph_raises_where_the_frame_would_run_unmodified():
    counter = CountingBackend()
    cdynamo.reset()
    compiled = cdynamo.compile(returns_started_subgenerator, backend=counter, fullgraph=True)
    try:
        g = compiled(X)
    except RuntimeError as e:
        assert "fullgraph=True" in str(e) and "returns_started_subgenerator" in str(e)
    else:   # compiled into one graph (as torch._dynamo does): then the items must be right
        assert counter.frame_count == 1
        assert_same(list(g), [X + 2, X + 3])
    # without fullgraph the result is eager's
    g = cdynamo.compile(returns_started_subgenerator, backend="eager")(X)
    assert_same(list(g), [X + 2, X + 3])


# ---- a missing attribute of a plain object raises AttributeError in the trace ------------

class Mock:
    def __init__(self):
        self.a = 1


mock = Mock()


def except_attribute_error(x):
    try:
        c = 2
        mock.b
    except AttributeError as e:
        c = 3 if e.args == ("'Mock' object has no attribute 'b'",) else 4
    return torch.sin(x) * c


def test_missing_attribute_caught_in_the_trace():
    counter = run(except_attribute_error, X)
    _, dyn = run_torch_dynamo(except_attribute_error, X)
    assert counter.frame_count == dyn.frame_count == 1
    # the absence is guarded: once the attribute exists, the other branch runs
    compiled = cdynamo.compile(except_attribute_error, backend="eager")
    mock.b = 7
    try:
        assert_same(compiled(X), except_attribute_error(X))
    finally:
        del mock.b
    assert_same(compiled(X), except_attribute_error(X))


def test_send_to_generator_rebuilt_at_break_after_it_started():
    """PyTorch's TestGeneratorSend.test_send_stop_iteration: the second send() finishes the
    generator (StopIteration raised in the trace: a graph break that reruns the send in
    Python on the rebuilt generator). The rebuilt generator must be a started one, so the
    send raises StopIteration as eager's does (was: TypeError, can't send non-None value to a
    just-started generator); a generator never advanced is rebuilt unstarted."""
    def double():
        x = yield
        yield x * 2

    def fn(t):
        gen = double()
        next(gen)
        a = gen.send(t)
        b = gen.send(t)
        return a + b

    def fresh(t):
        gen = double()
        torch._dynamo.graph_break()
        return gen.send(t)

    for f, exc in ((fn, StopIteration), (fresh, TypeError)):
        compiled = cdynamo.compile(f, backend="eager")
        t = torch.randn(2)
        with pytest.raises(exc) as eager_info:
            f(t)
        with pytest.raises(exc) as info:
            compiled(t)
        assert str(info.value) == str(eager_info.value)


def test_tensor_class_and_memory_format_arguments_one_graph():
    """PyTorch's test_fstrings3 and test_is_contiguous_memory_format (issue 7 Scope 4, tensor
    introspection): x.__class__ is type(x); torch.memory_format / torch.layout objects are
    constants (torch.contiguous_format as an argument of is_contiguous), one graph under
    fullgraph=True as torch._dynamo."""
    def fstr(x):
        tmp = f"{x.__class__.__name__} foo"
        if tmp.startswith("Tensor"):
            return x + 1
        return x - 1

    def contig(t):
        if t.is_contiguous(memory_format=torch.contiguous_format):
            return t + 1
        return t - 1

    def fmt(x):
        y = x.contiguous(memory_format=torch.channels_last)
        return y * 2, y.is_contiguous(memory_format=torch.channels_last), x.layout == torch.strided

    for f, x in ((fstr, torch.randn(3)), (contig, torch.randn(3, 4)),
                 (contig, torch.randn(4, 3).t()), (fmt, torch.randn(2, 3, 4, 5))):
        counter = CountingBackend()
        out = cdynamo.compile(f, backend=counter, fullgraph=True)(x)
        assert_same(out, f(x))
        _, dyn = run_torch_dynamo(f, x)
        assert counter.frame_count == dyn.frame_count == 1
    y = cdynamo.compile(fmt, backend="eager")(torch.randn(2, 3, 4, 5))[0]
    assert y.is_contiguous(memory_format=torch.channels_last)


def test_id_of_module_is_a_guarded_constant():
    """PyTorch's test_id_of_nn_module: id(self) of a module folds to its id with an ID_MATCH
    guard (one graph under fullgraph=True; another instance recompiles), as torch._dynamo."""
    class M(torch.nn.Module):
        def forward(self, x, ref_id):
            if id(self) == ref_id:
                x = torch.mul(x, 1.0)
            return torch.add(x, 1.0)

    m, other, data = M().eval(), M().eval(), torch.randn(1)
    counter = CountingBackend()
    compiled = cdynamo.compile(m, backend=counter, fullgraph=True)
    assert_same(compiled(data, id(m)), m(data, id(m)))
    assert counter.frame_count == 1 and counter.op_count == 2
    assert_same(compiled(data, id(m) + 1), m(data, id(m) + 1))
    assert counter.frame_count == 2 and counter.op_count == 3
    compiled_other = cdynamo.compile(other, backend=counter)
    assert_same(compiled_other(data, id(m)), other(data, id(m)))   # ID_MATCH fails: recompile
    assert counter.frame_count == 3


# ---- attributes stored on tensors (their instance dict) ---------------------------------

_LIN = torch.nn.Linear(3, 3)
_LIN.weight._no_wd = True


def params_flagged(x):
    s = x * 2
    for p in _LIN.parameters():
        if getattr(p, "_no_wd", False):
            s = s + p.sum()
    return s


def tagged(x, y):
    x = x * 2
    if hasattr(y, "tag"):
        return x + y.tag
    return x


def _add_one(x):
    return x + 1


_T = torch.nn.Parameter(torch.ones(1))
_T.add_one = _add_one


def tensor_dynamic_method(x):
    return _T.add_one(_T) + x


def test_attributes_in_a_tensors_instance_dict_are_seen_and_guarded():
    # getattr(p, name, default) and hasattr(t, name) read the tensor's own attributes (they
    # answered from the fake tensor, which has none: a wrong result); PyTorch's
    # test_tensor_dynamic_method (a function stored on a Parameter) is one graph, as dynamo
    with torch.no_grad():
        run(params_flagged, torch.ones(1))
        cdynamo.reset()
        c = cdynamo.compile(tagged, backend="eager")
        y = torch.ones(2)
        assert torch.equal(c(torch.ones(2), y), torch.full((2,), 2.0))
        y.tag = 7                      # HASATTR absent fails: recompiles
        assert torch.equal(c(torch.ones(2), y), torch.full((2,), 9.0))
        y.tag = 9                      # the value is guarded too
        assert torch.equal(c(torch.ones(2), y), torch.full((2,), 11.0))
        del y.tag
        assert torch.equal(c(torch.ones(2), y), torch.full((2,), 2.0))
        be = run(tensor_dynamic_method, torch.ones(1))
        assert be.frame_count == 1
        cdynamo.reset()
        out = cdynamo.compile(tensor_dynamic_method, backend="eager", fullgraph=True)(X[:1])
        assert torch.equal(out, X[:1] + 2)


# ---- builtins guarded by identity (test_misc's test_patched_builtin_functions) -------------

class _Marked:
    pass


def _isinstance_branch(x, y):
    if isinstance(y, _Marked):
        return x + 1
    return x - 1


def test_patched_builtin_is_guarded():
    """A trace made while builtins.isinstance was patched is not reused once it is restored,
    nor the other way round: each builtin the trace calls is guarded by identity, as
    torch._dynamo's BUILTIN_MATCH (before: the patched result came back after the restore)."""
    import builtins
    real = builtins.isinstance

    def patched(obj, classinfo):
        return False if real(obj, _Marked) else real(obj, classinfo)

    cdynamo.reset()
    counter = CountingBackend()
    opt = cdynamo.compile(_isinstance_branch, backend=counter, fullgraph=True)
    y = _Marked()
    builtins.isinstance = patched
    try:
        assert_same(opt(X, y), X - 1)
    finally:
        builtins.isinstance = real
    assert_same(opt(X, y), X + 1)
    builtins.isinstance = patched
    try:
        assert_same(opt(X, y), X - 1)
    finally:
        builtins.isinstance = real
    assert counter.frame_count == 2    # one entry per builtin, reused on the third call
    guards = [g for e in cdynamo.cache_entries(_isinstance_branch) for g in e.guards]
    assert "global 'isinstance' ID_MATCH" in guards


def test_global_shadowing_a_builtin_recompiles():
    """A module global defined after the trace with a builtin's name is what the frame calls."""
    g = {"torch": torch}
    exec("def f(x):\n    return x + len([1, 2])\n", g)
    f = g["f"]
    opt = cdynamo.compile(f, backend="eager")
    assert_same(opt(X), X + 2)
    g["len"] = lambda v: 10
    assert_same(opt(X), X + 10)


# ---- numpy: a ufunc's out= array is what it returns (test_misc's test_numpy_ufunc_out) -----

def _ufunc_out():
    import numpy as np
    x = np.arange(5)
    out = np.empty((x.shape[0], x.shape[0]))
    res = np.sin(x, out=out)
    return res is out, res


def _ufunc_out_input(x, o):
    import numpy as np
    r = np.multiply(x, 2, out=o)
    return r is o, r


def test_numpy_out_is_returned():
    np = pytest.importorskip("numpy")
    same, res = cdynamo.compile(_ufunc_out, backend="eager")()
    assert same is True
    np.testing.assert_allclose(res, _ufunc_out()[1])
    x, o = np.arange(5.0), np.zeros(5)
    same, r = cdynamo.compile(_ufunc_out_input, backend="eager")(x, o)
    assert same is True and r is o
    np.testing.assert_allclose(o, x * 2)


# ---- a named tuple whose class overrides __getitem__ / __len__ -----------------------------

import typing   # noqa: E402


class _IndexedPair(typing.NamedTuple):
    a: torch.Tensor
    b: torch.Tensor

    def __getitem__(self, index):
        if isinstance(index, str):
            return getattr(self, index)
        return tuple.__getitem__(self, index) * 2

    def __len__(self):
        return 7


def _pair_field(t):
    return t.a + 1


def _pair_ops(t):
    x, y = t                      # tuple's own iteration
    return t["a"] + t[1], len(t), x - y


def test_namedtuple_custom_getitem_input():
    """The items of a named tuple passed in are read as tuple holds them, in the guards and
    in the code that passes them to the graph (test_misc's
    test_namedtuple_with_custom_getitem: the class's __getitem__ ran there and the graph got
    a tuple); in the trace, t[i] and len(t) run the class's own methods (before: tuple's)."""
    p = _IndexedPair(torch.ones(2), torch.full((2,), 3.0))
    cdynamo.reset()
    opt = cdynamo.compile(_pair_field, backend="eager", fullgraph=True)
    for _ in range(2):
        assert_same(opt(p), p.a + 1)
    counter = run(_pair_ops, p)
    assert counter.frame_count == 1
    opt = cdynamo.compile(_pair_ops, backend="eager", fullgraph=True)
    assert_same(opt(p), _pair_ops(p))
