"""Cases from PyTorch's test_misc / test_repros / test_list (issue 24, third round): builtin
errors of constant calls raised inside the trace as eager raises them (ValueError of
list/tuple/deque.index and remove with CPython's words), torch.compile of a callable whose own
call traces nothing (torch.sin, an OpOverload, F.relu: wrapped in a Python function, as
torch.compile wraps them), cache_size_limit counting only the entries whose ID_MATCHed
arguments are the frame's (torch._dynamo's recompile_limit), the frame hook's C API
(torch._C._dynamo) never a graph op, dynamic ints specialised where a constant is needed
(list.index bounds, x.size(dim)), a symbolic __bool__, descriptor __get__, frozensets of
functions. Results against eager, graph and op counts against torch._dynamo."""
import collections
import functools

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter

import cdynamo
from conftest import requires_engine
from helpers import CountingBackend, check_against_eager, compare_at_least

pytestmark = requires_engine
no_break = pytest.mark.usefixtures("no_graph_break")


class NeverEqual:
    def __eq__(self, other):
        return False

    __hash__ = object.__hash__


MISSING = {
    "list_index": lambda: [1, 2, 3].index("z"),
    "tuple_index": lambda: (1, 2, 3).index("z"),
    "deque_index": lambda: collections.deque([1, 2, 3]).index("z"),
    "list_index_object": lambda: [NeverEqual()].index("z"),
    "tuple_index_object": lambda: (NeverEqual(),).index("z"),
    "deque_index_object": lambda: collections.deque([NeverEqual()]).index("z"),
    "list_remove": lambda: [NeverEqual()].remove("z"),
    "deque_remove": lambda: collections.deque([NeverEqual()]).remove("z"),
    "int_of_bad_literal": lambda: int("abc"),
    "divmod_by_zero": lambda: divmod(1, 0),
}


@pytest.mark.parametrize("name", sorted(MISSING))
def test_builtin_error_raised_in_trace(name):
    """The handler sees eager's exception type and message; the whole function is one graph
    (fullgraph: no break at the raise)."""
    body = MISSING[name]

    def fn(x):
        try:
            body()
        except (ValueError, ZeroDivisionError) as e:
            return x + 1, type(e).__name__, str(e)
        return x, None, None

    x = torch.ones(2)
    expected = fn(x)
    got = cdynamo.compile(fn, backend="eager", fullgraph=True)(x)
    assert got[1:] == expected[1:]
    assert torch.equal(got[0], expected[0])


def test_missing_item_with_tensor_argument_breaks_not_guesses():
    """list.index(t) of a tensor not in the list needs repr(t) for its message: a graph
    break, still eager's message."""

    def fn(x):
        try:
            [1, 2].index(x)
        except (ValueError, RuntimeError) as e:
            return x + 1, type(e).__name__
        return x, None

    check_against_eager(fn, torch.ones(()))


@no_break
@pytest.mark.parametrize("target", [torch.sin, torch.nn.functional.relu, torch.ops.aten.cos.default,
                                    functools.partial(torch.add, alpha=2), torch.Tensor.exp],
                         ids=["builtin", "inline_rule", "op_overload", "partial", "method_descr"])
def test_compile_of_callable_without_python_frame(target):
    """cdynamo.compile(torch.sin) compiles one graph with the op, as torch.compile."""
    x = torch.randn(3)
    args = (x, x) if isinstance(target, functools.partial) else (x,)
    ours, theirs = CountingBackend(), CompileCounter()
    compiled = cdynamo.compile(target, backend=ours)
    assert torch.equal(compiled(*args), target(*args))
    torch._dynamo.reset()
    torch.compile(target, backend=theirs)(*args)
    assert (ours.frame_count, ours.op_count) == (theirs.frame_count, theirs.op_count) == (1, 1)
    assert compiled.__wrapped__ is target


def test_compiled_callables_have_separate_caches():
    """Two compiled builtins each get their own cache entries (their own wrapper code)."""
    a, b = CountingBackend(), CountingBackend()
    ca, cb = cdynamo.compile(torch.sin, backend=a), cdynamo.compile(torch.cos, backend=b)
    x = torch.randn(3)
    assert torch.equal(ca(x), torch.sin(x)) and torch.equal(cb(x), torch.cos(x))
    assert torch.equal(ca(x), torch.sin(x))
    assert a.frame_count == b.frame_count == 1


def test_cache_limit_counts_entries_of_the_frames_objects():
    """A function called with ten different classes (ID_MATCH on an argument) compiles for
    each, past cache_size_limit=8, as torch._dynamo's recompile_limit counts only entries
    whose id-matched locals are the frame's; the same object failing another guard still
    stops at the limit."""
    def fn(cls, x):
        return x * cls.factor

    classes = [type(f"C{i}", (), {"factor": i}) for i in range(10)]
    counter = CountingBackend()
    compiled = cdynamo.compile(fn, backend=counter)
    for cls in classes:
        x = torch.ones(2)
        assert torch.equal(compiled(cls, x), fn(cls, x))
    assert counter.frame_count == len(classes)

    def g(k, x):
        return x + k   # k: an int constant, EQUALS_MATCH (no ID_MATCH)

    counter = CountingBackend()
    compiled = cdynamo.compile(g, backend=counter, dynamic=False)
    for k in range(12):
        assert torch.equal(compiled(k, torch.ones(2)), torch.ones(2) + k)
    assert counter.frame_count == 8


def test_frame_hook_api_is_not_a_graph_op():
    """torch._C._dynamo.eval_frame.unsupported (a C function of torch's frame hook) is a graph
    break, not a node: the graph after it has test_misc's 3 ops."""
    from torch._dynamo.testing import unsupported
    out = []

    def fn(a, b):
        c = unsupported(a, b)
        out.append(a + b * 10 + c)

    v = torch.Tensor([100])
    counter = CountingBackend()
    cdynamo.compile(fn, backend=counter)(v, v)
    assert out[0].item() == 1200
    assert counter.frame_count == 1 and counter.op_count == 3


@no_break
def test_list_index_with_dynamic_bounds():
    """xs.index(3, *bounds) with bounds read from a list argument that changed between
    calls (automatic dynamic ints): specialised, no break."""
    def fn(t, bounds):
        return t + [1, 2, 3, 4].index(3, *bounds)

    counter = CountingBackend()
    compiled = cdynamo.compile(fn, backend=counter)
    for bounds in ([], [2], [0, 3], [1, 4]):
        assert torch.equal(compiled(torch.zeros(1), bounds), fn(torch.zeros(1), bounds))


@no_break
def test_size_and_stride_with_dynamic_dim():
    def fn(x, dim):
        return x.size(dim=dim), x.stride(dim)

    compiled = cdynamo.compile(fn, backend="eager")
    x = torch.empty(4, 9, 8)
    for dim in (1, -2, 0, 2):
        assert compiled(x, dim) == fn(x, dim)


@no_break
def test_symbolic_bool_dunder():
    """__bool__ returning self.x > 0 with x a float that became dynamic: guarded."""
    class B:
        def __init__(self, x):
            self.x = x

        def __bool__(self):
            return self.x > 0

    def fn(x, obj):
        return x + 1 if obj else x - 1

    compiled = cdynamo.compile(fn, backend="eager")
    x = torch.ones(2)
    for v in (1.5, -2.5, 3.5, -4.5, 0.0):
        assert torch.equal(compiled(x, B(v)), fn(x, B(v)))


@no_break
def test_getset_descriptor_get():
    def fn(g, x):
        return g.__get__(x), x.sum()

    got = cdynamo.compile(fn, backend="eager", fullgraph=True)(torch.Tensor.shape, torch.ones(2, 3))
    assert got[0] == torch.Size([2, 3])


FUNCS = frozenset([torch.add])


def in_frozenset_of_functions(x, func):
    if func in FUNCS:
        x = torch.add(x, 1.0)
    return torch.mul(x, 2.0)


@no_break
@pytest.mark.parametrize("func", [torch.add, torch.mul], ids=["member", "not_member"])
def test_frozenset_of_functions(func):
    counter, _ = compare_at_least(in_frozenset_of_functions, torch.randn(3), func)
    assert counter.op_count == (2 if func is torch.add else 1)


def test_compile_of_compiled_function_takes_the_outer_options():
    """compile(compile(fn, backend=a), backend=b): b compiles fn, a never runs (as
    torch.compile's innermost_fn)."""
    inner, outer = CountingBackend(), CountingBackend()

    def fn(x):
        return torch.relu(torch.cos(x) + torch.sin(x))

    twice = cdynamo.compile(cdynamo.compile(fn, backend=inner), backend=outer)
    x = torch.randn(4)
    assert torch.equal(twice(x), fn(x))
    assert (inner.frame_count, outer.frame_count, outer.op_count) == (0, 1, 4)


@no_break
@pytest.mark.parametrize("maker", ["cdynamo", "torch_run"])
def test_compiled_function_called_from_traced_code_is_inlined(maker):
    """A function compiled on its own (cdynamo.compile, or a torch._dynamo wrapper such as
    torch._dynamo.run()) called from a compiled function is inlined into its graph."""
    inner = CountingBackend()

    def helper(x):
        return torch.sin(x) * 10

    wrapped = (cdynamo.compile(helper, backend=inner) if maker == "cdynamo"
               else torch._dynamo.run()(helper))

    def fn(x):
        return torch.relu(wrapped(x) + 1)

    outer = CountingBackend()
    x = torch.randn(4, 5)
    assert torch.equal(cdynamo.compile(fn, backend=outer)(x), torch.relu(helper(x) + 1))
    assert (inner.frame_count, outer.frame_count, outer.op_count) == (0, 1, 4)


def test_disabled_function_is_not_inlined():
    """torch._dynamo.disable's wrapper stays a graph break: what it wraps runs in Python."""
    seen = []

    @torch._dynamo.disable
    def side(x):
        seen.append(torch.compiler.is_compiling())
        return x * 2

    def fn(x):
        return side(x + 1) - 1

    counter = CountingBackend()
    x = torch.randn(3)
    assert torch.equal(cdynamo.compile(fn, backend=counter)(x), fn(x))
    assert seen == [False, False] and counter.frame_count == 2


def test_mark_dynamic_on_a_specialised_dim_recompiles():
    """An entry traced with dim 0 marked dynamic serves an unmarked tensor of the same sizes,
    but a tensor marking dim 1 (specialised in that graph) recompiles, as torch._dynamo."""
    def fn(a):
        return a.cos() if a.shape[0] > 2 else a.sin()

    counter = CountingBackend()
    compiled = cdynamo.compile(fn, backend=counter)
    x0 = torch.randn(3, 3, 3)
    torch._dynamo.mark_dynamic(x0, 0)
    compiled(x0)
    compiled(torch.randn(3, 3, 3))
    assert counter.frame_count == 1
    x1 = torch.randn(3, 3, 3)
    torch._dynamo.mark_dynamic(x1, 1)
    assert torch.equal(compiled(x1), fn(x1))
    assert counter.frame_count == 2
    x2 = torch.randn(3, 3, 3)
    torch._dynamo.mark_dynamic(x2, 0)
    compiled(x2)
    assert counter.frame_count == 2   # dim 0 dynamic in the first entry: a hit


@no_break
def test_legacy_tensor_constructors():
    def fn(x):
        return torch.FloatTensor([1.0, 2.0]) + x, torch.LongTensor((3, 4)), torch.BoolTensor()

    got = cdynamo.compile(fn, backend="eager", fullgraph=True)(torch.ones(2))
    for a, e in zip(got, fn(torch.ones(2))):
        assert a.dtype == e.dtype and torch.equal(a, e)


@no_break
def test_pytree_tree_map_only_with_callable_hint():
    """pytree.tree_map_only builds Callable[[T], Any] hints at run time."""
    import torch.utils._pytree as pytree

    def fn(xs):
        return pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), xs)

    xs = [torch.tensor(i) for i in range(3)] + ["hi"]
    counter, _ = compare_at_least(fn, {"aa": (xs, xs), "ab": xs})
    assert counter.op_count == 9


@pytest.mark.parametrize("other", [1, 1.0, "a", (1, 2), [1, 2]], ids=type)
def test_operator_on_unsupported_operand_types_raises_type_error(other):
    """{...} | 1 raises eager's TypeError inside the trace (a dict holding a tensor)."""
    def fn(b):
        a = {"one": torch.ones(1)}
        try:
            return a | b
        except TypeError as e:
            return str(e)

    assert cdynamo.compile(fn, backend="eager", fullgraph=True)(other) == fn(other)


@no_break
def test_defaultdict_without_factory_raises_key_error():
    from collections import defaultdict

    def fn(x):
        d = defaultdict()
        try:
            d[1] += 42
        except KeyError:
            d[1] = 1
        return x + 1, d[1]

    x = torch.ones(2)
    got = cdynamo.compile(fn, backend="eager", fullgraph=True)(x)
    assert torch.equal(got[0], x + 1) and got[1] == 1


@no_break
def test_dict_subclass_copy_and_repr():
    from collections import OrderedDict, defaultdict

    def fn(x):
        d = defaultdict(list, {1: 1, 2: 2})
        od = OrderedDict(a=1, b=2)
        c = d.__copy__()
        return x + 1, c.default_factory is list, dict(c), repr(od), repr(od.copy())

    x = torch.ones(2)
    got = cdynamo.compile(fn, backend="eager", fullgraph=True)(x)
    assert got[1:] == fn(x)[1:]


@pytest.mark.parametrize("thetype", ["dict", "OrderedDict"])
def test_fromkeys_bad_calls_raise_eagers_type_error(thetype):
    from collections import OrderedDict
    t = dict if thetype == "dict" else OrderedDict

    def fn(x):
        out = [t.fromkeys(["a", "b"], 1), t.fromkeys(range(2))]
        for args in ((), (1, 2), ((1,), 2, 3)):
            try:
                t.fromkeys(*args)
            except TypeError as e:
                out.append(str(e))
        return x + 1, out

    x = torch.ones(2)
    got = cdynamo.compile(fn, backend="eager", fullgraph=True)(x)
    assert got[1] == fn(x)[1]


class ProcessorList(list):
    """transformers' LogitsProcessorList style: a list subclass with its own methods."""

    def __call__(self, x):
        for p in self:
            x = p(x)
        return x

    def append_twice(self, x):
        self.extend([x, x])


@no_break
def test_list_subclass_argument_mutated_in_place():
    """extend/append/pop/insert on a list subclass passed in: traced on its items, written
    back into the same object (its identity and type kept)."""
    def fn(a, b):
        a.extend(b)
        a.append_twice(b[1] + 1)
        a.insert(len(a), b[0] * 2)
        a.pop()
        a.insert(1, b[1])
        return len(a), a.index(b[0])   # (found first, by identity: no tensor ==)

    x, y = torch.randn(3), torch.randn(3)
    eager = ProcessorList([x, y])
    expected = fn(eager, ProcessorList([x, y]))
    obj = ProcessorList([x, y])
    other = ProcessorList([x, y])
    counter = CountingBackend()
    got = cdynamo.compile(fn, backend=counter, fullgraph=True)(obj, other)
    assert got == expected
    assert type(obj) is ProcessorList and len(obj) == len(eager)
    for a, e in zip(obj, eager):
        assert torch.equal(a, e)
    assert obj[0] is x and obj[1] is y and obj[2] is y


@no_break
def test_list_subclass_argument_aliased():
    """fn(l, l): both names are the one object (test_repros' restricted_list_subclass3)."""
    def fn(a, b):
        a.extend(b)
        a.append(b[1] + 2)
        return b

    x, y = torch.randn(3), torch.randn(3)
    obj = ProcessorList([x, y])
    assert cdynamo.compile(fn, backend="eager", fullgraph=True)(obj, obj) is obj
    assert len(obj) == 5 and obj[2] is x and obj[3] is y
    assert torch.equal(obj[4], y + 2)


@no_break
def test_user_set_operators_with_foreign_operands_raise_type_error():
    """OrderedSet (collections.abc.Set mixins) - 1, ^ 1, <= 1, 1 >= s: NotImplemented both
    ways, so eager's TypeError raised in the trace; super().__ne__ (object.__ne__) inverts
    __eq__."""
    from torch.utils._ordered_set import OrderedSet

    def fn(x):
        a = OrderedSet([1, 2, 3])
        out = []
        for f in (lambda: a - 1, lambda: a ^ 1, lambda: a <= 1, lambda: 1 >= a,
                  lambda: a != 1, lambda: a != OrderedSet([1, 2, 3]), lambda: a == 1):
            try:
                out.append(f())
            except TypeError as e:
                out.append(str(e))
        return x + 1, out

    x = torch.ones(1)
    assert cdynamo.compile(fn, backend="eager", fullgraph=True)(x)[1] == fn(x)[1]


class _Eq:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return isinstance(other, _Eq) and self.v == other.v

    def __ne__(self, other):
        return super().__ne__(other)

    __hash__ = None


@no_break
def test_object_ne_through_super():
    def fn(x):
        return x + 1, _Eq(1) != _Eq(1), _Eq(1) != _Eq(2), _Eq(1) != 3

    x = torch.ones(1)
    assert cdynamo.compile(fn, backend="eager", fullgraph=True)(x)[1:] == fn(x)[1:]


class _ByLt:
    def __init__(self, v):
        self.v = v

    def __lt__(self, other):
        return self.v < other.v


@no_break
def test_sort_by_user_keys_and_cmp_to_key():
    """list.sort / sorted with keys that are user objects (__lt__) or functools.cmp_to_key:
    stable, reverse keeps equal items in order, as eager."""
    from functools import cmp_to_key

    def revcmp(a, b):
        return (a < b) - (a > b)

    def fn(x):
        p = [1, 3, 2, 3, 0]
        p.sort(key=cmp_to_key(revcmp))
        q = [3, 4, 5, 4]
        q.sort(key=_ByLt, reverse=True)
        pairs = [(2, "a"), (1, "b"), (2, "c"), (1, "d")]
        pairs.sort(key=lambda t: _ByLt(t[0]))
        return x + 1, p, q, pairs, sorted([2, 1, 3], key=cmp_to_key(revcmp))

    x = torch.ones(1)
    assert cdynamo.compile(fn, backend="eager", fullgraph=True)(x)[1:] == fn(x)[1:]


@no_break
def test_iterator_dunders_and_delitem_errors():
    def fn(x):
        p = [1, 2, 3, 4, 5]
        it = p.__iter__().__iter__()
        first = it.__next__()
        hint = it.__length_hint__()
        out = [first, hint, list(it)]
        del p[1:3]
        for bad in (slice(1, 1, 0), 10, 1.5):
            try:
                del p[bad]
            except (ValueError, IndexError, TypeError) as e:
                out.append((type(e).__name__, str(e)))
        return x + 1, out, p

    x = torch.ones(1)
    assert cdynamo.compile(fn, backend="eager", fullgraph=True)(x)[1:] == fn(x)[1:]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_tensor_data_assignment_keeps_eagers_result(backend):
    """x.data = y; y.data = zeros(0): x keeps y's old storage, y is empty, as eager (the
    assignment runs in Python: a graph break, never a wrong result)."""
    def fn(x, y):
        x.data = y
        y.data = torch.zeros([0])
        return x * 2

    ea, eb = torch.ones(6, requires_grad=True), torch.full((6,), 2.0, requires_grad=True)
    ca, cb = torch.ones(6, requires_grad=True), torch.full((6,), 2.0, requires_grad=True)
    expected = fn(ea, eb)
    got = cdynamo.compile(fn, backend=backend)(ca, cb)
    assert torch.equal(got.detach(), expected.detach())
    assert torch.equal(ca.detach(), ea.detach()) and torch.equal(cb.detach(), eb.detach())
    assert ca.requires_grad and cb.requires_grad


def test_check_is_size_defers_a_runtime_assert():
    """torch._check_is_size on an unbacked .item(): a runtime assertion in the graph (a
    negative value raises when the graph runs), no graph break, as torch._dynamo."""
    counter = CountingBackend()

    def f(x):
        y = x.item()
        torch._check_is_size(y)
        return x * 2 if y >= 0 else x * 3

    compiled = cdynamo.compile(f, backend=counter, fullgraph=True)
    with cdynamo.config.patch(capture_scalar_outputs=True):
        assert torch.equal(compiled(torch.tensor([3])), torch.tensor([6]))
        with pytest.raises(RuntimeError, match="u0 >= 0"):
            compiled(torch.tensor([-2]))
    assert counter.frame_count == 1
    assert torch.equal(cdynamo.compile(lambda: torch._check_is_size(4) or torch.ones(1),
                                       backend="eager", fullgraph=True)(), torch.ones(1))


class _TagMeta(type):
    def __call__(cls, *args, **kwargs):
        obj = super().__call__(*args, **kwargs)
        obj.tag = 7
        return obj


class _Tagged(metaclass=_TagMeta):
    def __init__(self, v, w=1):
        self.v = v
        self.w = w


class _Singleton(type):
    _instances = {}

    def __call__(cls, *args, **kwargs):
        if cls not in cls._instances:
            cls._instances[cls] = super().__call__(*args, **kwargs)
        return cls._instances[cls]


class _Config(metaclass=_Singleton):
    def __init__(self, scale):
        self.scale = scale


@no_break
def test_metaclass_call_inlined():
    """A metaclass's Python __call__ runs in the trace with the class as self; its
    super().__call__ constructs the object (__new__ + __init__)."""
    def fn(x):
        o = _Tagged(3, w=2)
        return x + o.v * o.w + o.tag, type(o) is _Tagged

    x = torch.ones(2)
    got = cdynamo.compile(fn, backend="eager", fullgraph=True)(x)
    exp = fn(x)
    assert torch.equal(got[0], exp[0]) and got[1] == exp[1]


def test_singleton_metaclass():
    """The singleton's class-level registry is read and written as eager does: the same
    instance on every call, made once."""
    _Singleton._instances.clear()

    def fn(x):
        return x * _Config(2).scale, _Config(5).scale

    compiled = cdynamo.compile(fn, backend="eager")
    x = torch.ones(2)
    got = compiled(x)
    assert got[1] == 2 and torch.equal(got[0], x * 2)
    assert _Config in _Singleton._instances and _Config(9).scale == 2
    got = compiled(x)
    assert got[1] == 2


@no_break
def test_typing_and_slot_function_dict_keys():
    import typing

    def fn(x):
        d = {typing.Union[int, str]: 1, list.__add__: 2, typing.List[int]: 3}
        return x + d[typing.Union[str, int]] + d[list.__add__] + d[typing.List[int]]

    x = torch.ones(1)
    assert torch.equal(cdynamo.compile(fn, backend="eager", fullgraph=True)(x), fn(x))


@no_break
def test_copy_copy_of_dict_subclasses():
    import copy
    from collections import Counter, OrderedDict, defaultdict

    def fn(x):
        d = defaultdict(list, {1: 1})
        c = copy.copy(d)
        o = copy.copy(OrderedDict(a=1))
        n = copy.copy(Counter("abca"))
        s = copy.copy({1, 2})
        return x + 1, c.default_factory is list, type(c) is defaultdict, o, n, s, type(o), type(n)

    x = torch.ones(1)
    assert cdynamo.compile(fn, backend="eager", fullgraph=True)(x)[1:] == fn(x)[1:]


def test_uncaught_exception_is_raised_where_eager_raises_it():
    """An exception the traced code raises and does not catch: without fullgraph the
    instruction runs in Python and raises the user's error; fullgraph=True refuses the
    break, as torch._dynamo's fullgraph refuses an uncaught ("observed") exception."""
    def fn(b):
        a = {"one": torch.ones(1)}
        return a | b

    with pytest.raises(RuntimeError, match="fullgraph=True"):
        cdynamo.compile(fn, backend="eager", fullgraph=True)(1)
    with pytest.raises(TypeError, match="unsupported operand type"):
        cdynamo.compile(fn, backend="eager")(1)


MAPPINGPROXY = type(type.__dict__)


@no_break
def test_mapping_proxy_made_in_the_trace():
    """types.MappingProxyType(d) and d.keys().mapping: read-only views of a dict made in the
    trace (later changes show through; writes raise eager's TypeError); an escaping proxy
    is rebuilt over the same dict."""
    import types

    def fn(x):
        d = {}
        m = d.keys().mapping
        d["foo"] = x + 1
        p = types.MappingProxyType(d)
        try:
            p["x"] = 1
            err = None
        except TypeError as e:
            err = str(e)
        e = {"a": x - 1}
        e.update(p)
        return (x.sin(), isinstance(m, MAPPINGPROXY), len(p), "foo" in p, list(p), err,
                m == d, sorted(p | {"z": 1}), e["foo"], m, p)

    x = torch.randn(3)
    got = cdynamo.compile(fn, backend="eager", fullgraph=True)(x)
    exp = fn(x)
    assert torch.equal(got[0], exp[0]) and got[1:8] == exp[1:8]
    assert torch.equal(got[8], exp[8])
    assert type(got[9]) is MAPPINGPROXY and type(got[10]) is MAPPINGPROXY
    assert torch.equal(got[9]["foo"], exp[9]["foo"]) and list(got[10]) == ["foo"]
