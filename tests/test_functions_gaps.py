"""Cases of PyTorch's test/dynamo/test_functions.py (a 2025-26 copy) that cdynamo failed,
written again as our own programs: a dynamic int as a list index or slice bound in a store,
deque.extend/extendleft of a generator that reads the deque (two wrong results before:
the generator was run to its end first), operators a named-tuple subclass defines (it was
tuple concatenation: a wrong result), `is` between exceptions of two types, and the default
repr of an object made in the trace. Each against eager, with fullgraph=True."""
import collections
from typing import NamedTuple

import torch

import cdynamo
from helpers import CountingBackend


def _fullgraph(fn, *args, graphs=1, **kw):
    counter = CountingBackend()
    compiled = cdynamo.compile(fn, backend=counter, fullgraph=True, **kw)
    out = compiled(*args)
    assert counter.frame_count == graphs
    return out


def test_store_with_a_dynamic_int_index_or_slice():
    def item(a: int):
        arr = [1, 2, 3]
        arr[a] = 5
        return torch.ones(arr)

    def sliced(a: int):
        arr = [1, 2, 3]
        arr[a:a + 1] = [5]
        return torch.ones(arr)

    for fn in (item, sliced):
        counter = CountingBackend()
        compiled = cdynamo.compile(fn, backend=counter, fullgraph=True, dynamic=True)
        for a in (0, 1, 0):
            assert torch.equal(compiled(a), fn(a))
        assert counter.frame_count == 2   # specialised on the index, as torch._dynamo


def test_deque_extend_of_a_generator_reading_the_deque():
    def left(a):
        y = collections.deque([1])

        def inner(z):
            return z + y[0]

        y.extendleft(map(inner, [a, a]))
        return y

    def right(a):
        y = collections.deque([a], maxlen=3)
        y.extend(v + y[-1] for v in (a, a, a))
        return y

    a = torch.randn(3)
    for fn in (left, right):
        out, expected = _fullgraph(fn, a), fn(a)
        assert type(out) is collections.deque and out.maxlen == expected.maxlen
        assert len(out) == len(expected)
        for o, e in zip(out, expected):
            assert torch.equal(torch.as_tensor(o), torch.as_tensor(e))


class _Pair(NamedTuple):
    a: torch.Tensor
    b: torch.Tensor


def test_operators_of_a_named_tuple_subclass():
    class PairTensor(_Pair):
        def __new__(cls, a, b):
            return super().__new__(cls, a, b)

        def __add__(self, other):
            return PairTensor(self.a + other.a, self.b + other.b)

        def __rmul__(self, k):
            return PairTensor(self.a * k, self.b * k)

    def fn(p, q):
        s = p + q
        t = 2 * p
        s += q
        return s, t, (p,) + (q,)

    p = PairTensor(torch.randn(4), torch.randn(2, 8))
    q = PairTensor(torch.randn(1), torch.randn(2, 1))
    out, expected = _fullgraph(fn, p, q), fn(p, q)
    assert [type(o) for o in out] == [type(e) for e in expected]
    assert type(out[0]) is PairTensor and type(out[2]) is tuple
    for o, e in zip(out[:2], expected[:2]):
        assert torch.equal(o.a, e.a) and torch.equal(o.b, e.b)


def test_is_between_exceptions_of_two_types():
    def fn(x, y):
        exc = ValueError("abcd")
        other = TypeError("abc")
        try:
            raise exc
        except Exception as e:
            assert e is not other
            return x + y

    x = torch.ones(2)
    assert torch.equal(_fullgraph(fn, x, x), fn(x, x))


def test_default_repr_of_an_object_made_in_the_trace():
    class Plain:
        pass

    class Custom:
        def __str__(self):
            return "ok"

    def fn(x):
        return x + 1, str(Plain()), repr(Plain()), str(Custom()), f"{Plain()}"

    out, expected = _fullgraph(fn, torch.ones(2)), fn(torch.ones(2))
    assert out[3] == expected[3] == "ok"
    for o, e in zip(out[1:], expected[1:]):
        assert o.split(" object at 0x")[0] == e.split(" object at 0x")[0]
    assert out[1].startswith("<test_functions_gaps.")


def test_cached_property_computed_in_the_trace():
    """functools.cached_property not computed yet on an object passed in: its function is
    inlined and the result stored into the instance dict, as cached_property.__get__ does
    (it was a graph break)."""
    import functools

    class Cfg:
        def __init__(self, h):
            self.h, self.n = h, 2

        @functools.cached_property
        def head_dim(self):
            return self.h // self.n

    def fn(x, cfg):
        return x.reshape(-1, cfg.head_dim), cfg.head_dim

    cfg = Cfg(8)
    out = _fullgraph(fn, torch.ones(8), cfg)
    assert out[0].shape == (2, 4) and out[1] == 4 and cfg.__dict__["head_dim"] == 4


def test_callable_of_a_bound_method_in_a_comprehension():
    """transformers' BatchEncoding.to: `callable(v.to)` over a dict's values (a break)."""
    def fn(d):
        return {k: v.to(dtype=torch.float64) if hasattr(v, "to") and callable(v.to) else v
                for k, v in d.items()}, callable(len), callable(fn)

    d = {"a": torch.ones(2), "b": 3}
    out, expected = _fullgraph(fn, d), fn(d)
    assert out[1:] == expected[1:] == (True, True)
    assert out[0]["b"] == 3 and torch.equal(out[0]["a"], expected[0]["a"])


# ---- user iterators (a class with a Python __next__) -------------------------------------

class _Counter:
    def __init__(self, n):
        self.n, self.i, self.log = n, 0, []

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        self.log.append(self.i)
        return self.i


class _Countable:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return _Counter(self.n)


def test_user_iterator_in_for_enumerate_next_and_list():
    """A class that is its own iterator (test_functions' test_enumerate_custom), one whose
    __iter__ gives another iterator object, next() on one, list() / zip() of one: traced
    with __next__ inlined per step (was a graph break on every one)."""
    def loops(x):
        for i, v in enumerate(_Counter(3)):
            x = x + i * v
        for v in _Countable(2):
            x = x * v
        c = _Counter(5)
        a, b = next(c), next(c)
        return x + a + b + sum(list(c)), c.log, dict(zip(_Counter(2), "ab"))

    x = torch.ones(2)
    out = _fullgraph(loops, x)
    expected = loops(x)
    torch.testing.assert_close(out[0], expected[0])
    assert out[1:] == expected[1:]


def test_user_iterator_passed_in_is_advanced_step_by_step():
    """An iterator passed in: its state changes as in eager, and the loop body's store into
    it is seen by the next __next__ (items are taken one step at a time, not all first)."""
    def f(x, c):
        for v in c:
            x = x + v
            if v == 2:
                c.n = 3
        return x

    c1, c2 = _Counter(10), _Counter(10)
    torch.testing.assert_close(_fullgraph(f, torch.ones(2), c2), f(torch.ones(2), c1))
    assert vars(c1) == vars(c2) == {"n": 3, "i": 3, "log": [1, 2, 3]}


def test_max_of_an_iterable_of_tensors():
    """max()/min() of an iterable holding tensors reduce with torch.maximum / minimum as
    the two-argument form does (test_functions' test_map_max: a graph break on the tensor
    comparison)."""
    def f(a, b):
        return max(map(lambda t: t.sum(), [a, b])), min([a.sum(), b.sum(), 0.5])

    a, b = torch.randn(3), torch.randn(3)
    out = _fullgraph(f, a, b)
    torch.testing.assert_close(out, f(a, b))


class _PlainTuple(tuple):
    def __new__(cls, items):
        return super().__new__(cls, items)


def test_comparison_of_tuple_subclass_inputs():
    """!= / == / < between instances of a tuple subclass passed in compare their items as
    tuple does (test_functions' test_udf_tuple_equality: a graph break)."""
    def f(x, p, q):
        if p != q:
            x = x + 1
        if p == q:
            x = x - 1
        if p < q:
            x = x * 3
        return x

    for p, q in [((1, -1), (1, -1)), ((1, -1), (1, 2))]:
        x = torch.ones(1)
        args = (x, _PlainTuple(p), _PlainTuple(q))
        torch.testing.assert_close(_fullgraph(f, *args), f(*args))


def test_functools_singledispatch_is_traced():
    """A functools.singledispatch function: the implementation for the first argument's type
    is picked at trace time and inlined (was a graph break: functools is not traced), guarded
    on the registry (a later registration recompiles) and on that type."""
    import functools

    @functools.singledispatch
    def scale(x, k):
        raise NotImplementedError

    @scale.register
    def _(x: torch.Tensor, k):
        return x * k

    @scale.register(list)
    def _(x, k):
        return [scale(v, k) for v in x]

    def f(x, items):
        return scale(x, 2), scale(items, 3)

    x = torch.randn(3)
    counter = CountingBackend()
    opt = cdynamo.compile(f, backend=counter)
    out = opt(x, [x, x + 1])
    expected = f(x, [x, x + 1])
    torch.testing.assert_close(out, expected)
    assert counter.frame_count == 1

    @scale.register(tuple)
    def _(x, k):
        return tuple(v * k * 10 for v in x)

    out = opt(x, (x, x))
    torch.testing.assert_close(out, f(x, (x, x)))
    assert counter.frame_count == 2


def test_hasattr_of_functions_made_in_the_trace_and_partials():
    """hasattr() on a function made in the trace (its type's attributes; an attribute stored
    on it in the trace is seen) and on a functools.partial passed in (read on the object,
    guarded): test_misc's test_fn_hasattr__name__1 / _3 were graph breaks."""
    import functools

    def bar(x, y):
        return torch.sin(x) + torch.cos(y)

    baz = functools.partial(bar, y=4)

    def made(x):
        foo = lambda v: v + 1   # noqa: E731
        g = lambda: 0           # noqa: E731
        g.attr = 1
        return x + 1, hasattr(foo, "__name__"), hasattr(foo, "zzz"), hasattr(g, "attr")

    def partial_attrs(x):
        return x + 1, hasattr(baz, "__name__"), hasattr(baz, "func")

    x = torch.ones(2)
    for fn in (made, partial_attrs):
        out = _fullgraph(fn, x)
        expected = fn(x)
        torch.testing.assert_close(out[0], expected[0])
        assert out[1:] == expected[1:]


def test_in_of_an_iterator_consumes_it():
    """`item in it` of an iterator (a list iterator, a generator) takes items until one
    equals item, leaving it advanced there, as CPython (test_misc's
    test_list_iterator_contains: a graph break)."""
    def f(x):
        it = iter(["my_weight", "not_my_weight", "c"])
        next(it)
        a = "my_weight" in it
        it2 = iter([1, 2, 3, 4])
        b = 2 in it2
        g = (i * 2 for i in range(5))
        return x + a + (4 in g), b, list(it2), list(g)

    x = torch.zeros(1)
    out = _fullgraph(f, x)
    expected = f(x)
    torch.testing.assert_close(out[0], expected[0])
    assert out[1:] == expected[1:]


def test_explicit_dunder_iter_of_tensors_and_constants():
    """x.__iter__() of a tensor and "ab".__iter__() / (1, 2).__iter__() of constants are
    iter() (test_misc's test_tensor__iter__ and test_str___iter__: graph breaks)."""
    def f(x):
        for y in x.__iter__():
            y.add_(1.0)
        s = next("ab".__iter__())
        return x * 2, s, [c for c in (1, 2, 3).__iter__()]

    x1, x2 = torch.ones(3), torch.ones(3)
    out = _fullgraph(f, x1)
    expected = f(x2)
    torch.testing.assert_close(out[0], expected[0])
    assert out[1:] == expected[1:]
