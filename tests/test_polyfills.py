"""Builtins and standard-library helpers traced through cdynamo.polyfills (issue 7, Scope 3),
and generators (Scope 4).

Each program runs eagerly, under torch._dynamo and under cdynamo (twice: the second call hits
the cache). cdynamo's results must equal eager's (bitwise, with the eager-like counting
backend), and its graphs and captured ops are compared with torch._dynamo's: equal, or, where
torch._dynamo breaks or skips the frame (noted per case), fewer graphs and at least as many
ops. Laziness is checked on the iterators themselves (what is left in an iterator a builtin
consumed, generators with interleaved side effects)."""
import collections
import copy
import functools
import heapq
import itertools
import operator

import pytest
import torch

import cdynamo
from helpers import CountingBackend, assert_same, run_torch_dynamo


X = torch.randn(4)
XS = [torch.randn(4) for _ in range(4)]


def _clone(args):
    return tuple(a.clone() if isinstance(a, torch.Tensor) else copy.deepcopy(a) for a in args)


def check(fn, *args, dynamo="same", calls=2):
    """Run fn eagerly, under torch._dynamo and under cdynamo; return cdynamo's backend.

    dynamo: "same": graphs and ops equal torch._dynamo's; "better": torch._dynamo breaks or
    skips here, cdynamo must make no more graphs and capture at least as many ops; None: do
    not run torch._dynamo (it fails on this program, see the caller)."""
    expected = fn(*_clone(args))
    counter = CountingBackend()
    cdynamo.reset()
    compiled = cdynamo.compile(fn, backend=counter)
    for i in range(calls):
        assert_same(compiled(*_clone(args)), expected, f"call {i}")
    if dynamo is not None:
        _, dyn = run_torch_dynamo(fn, *_clone(args))
        if dynamo == "same":
            assert (counter.frame_count, counter.op_count) == (dyn.frame_count, dyn.op_count), (
                f"cdynamo {counter.frame_count} graphs / {counter.op_count} ops, "
                f"torch._dynamo {dyn.frame_count} / {dyn.op_count}")
        else:
            # fewer graphs, or torch._dynamo ran the frame unmodified (0 graphs)
            assert counter.frame_count <= dyn.frame_count or dyn.frame_count == 0
            assert counter.op_count >= dyn.op_count
    return counter


def breaks(fn, *args):
    """cdynamo.explain(fn)(*args): (graphs, breaks, frames run unmodified)."""
    e = cdynamo.explain(fn)(*args)
    return e.graph_count, e.graph_break_count, e.counters.get("unmodified", 0)


# ================================================================ generators


def test_generator_expression_sum():
    c = check(lambda xs: sum(t * 2 for t in xs), XS)
    assert c.op_count == 8   # 4 mul + 4 add (0 + t as eager)


def test_generator_function_closure():
    def f(x):
        def gen(n):
            for i in range(n):
                yield x * i
        return tuple(gen(3))
    check(f, X)


def test_generator_any_all():
    def f(x, xs):
        a = all(t.shape[0] == 4 for t in xs)
        b = any(t.dim() == 2 for t in xs)
        return x + 1 if a and not b else x - 1
    check(f, X, XS)


def test_generator_next_and_rest():
    def f(xs):
        g = (t + 1 for t in xs)
        a = next(g)
        b = next(g)
        return a, b, list(g), next(g, None)
    check(f, XS)


def test_generator_for_loop_and_zip():
    def f(x, xs):
        out = []
        for a, b in zip((t for t in xs), range(10)):
            out.append(a * b)
        for v in (x + i for i in range(2)):
            out.append(v)
        return out
    check(f, X, XS)


def test_yield_from_returns_value():
    # torch._dynamo 2.13 gets the value of `yield from` wrong here (None): eager is the
    # reference
    def f(x):
        def inner():
            yield x + 1
            yield x + 2
            return 5

        def outer():
            yield x
            r = yield from inner()
            yield x * r
            yield from [x - 1, x - 2]
        return list(outer())
    check(f, X, dynamo=None)


def test_generator_side_effects_interleave():
    # items are made when consumed: the appends interleave with the consumer's
    def f(x):
        log = []

        def gen():
            for i in range(3):
                log.append(("make", i))
                yield x * i
        out = []
        for v in gen():
            log.append(("use",))
            out.append(v)
        return out, log
    check(f, X)


def test_generator_returned_and_live_at_break():
    # a generator live at a graph break or returned is rebuilt from its remaining items
    def f(x):
        g = (x * i for i in range(3))
        first = next(g)
        torch._dynamo.graph_break()
        return first, list(g)
    check(f, X, dynamo="better")   # torch._dynamo runs this frame unmodified

    def g(x):
        return (x * i for i in range(3))
    cdynamo.reset()
    it = cdynamo.compile(g, backend=CountingBackend())(X)
    assert_same(list(it), list(g(X)))


def test_call_breaking_after_starting_a_generator_is_a_graph_break():
    # the call consumed a generator made before it, then broke: the generator is put back
    # as it was made, the call runs in Python on its items, the frame is not given up
    def f(xs):
        print(*(t + 1 for t in xs))
        return xs[0] * 2

    def g(xs):
        def helper(it):
            a = next(it)
            print("graph break")
            return a + next(it)
        gen = (t * 2 for t in xs)
        r = helper(gen)
        return r, list(gen)
    for fn in (f, g):
        graphs, nbreaks, unmodified = breaks(fn, XS)
        assert nbreaks >= 1 and unmodified == 0
        assert_same(cdynamo.compile(fn, backend="eager")(XS), fn(XS))


def test_generator_graph_break_inside_skips_frame():
    # a break inside a generator's body: the frame runs unmodified (as torch._dynamo),
    # results stay eager's
    def f(xs):
        return sum(t.sum().item() for t in xs)
    assert breaks(f, XS)[2] >= 1
    assert cdynamo.compile(f, backend="eager")(XS) == f(XS)


def test_generator_send_contains_close():
    def double():
        v = yield
        yield v * 2

    def whoo():
        yield 1
        yield 2

    def f(x):
        gen = double()
        next(gen)
        a = gen.send(x)
        g = whoo()
        found = (1 in g, 2 in g, 3 in whoo())
        h = whoo()
        next(h)
        h.close()
        return a, found, list(g), list(h)
    check(f, X, dynamo=None)


def test_generators_returned_advanced_exhausted_or_in_tuples():
    def whoo(t):
        yield t + 1
        yield t + 2
        yield t + 3

    def f(x):
        a = whoo(x)
        next(a)
        b = whoo(x * 2)
        for _ in b:
            pass
        return (a, b, whoo(x - 1)), x.sin()
    cdynamo.reset()
    (a, b, c), s = cdynamo.compile(f, backend="eager")(X)
    (ea, eb, ec), es = f(X)
    assert_same((list(a), list(b), list(c), s), (list(ea), list(eb), list(ec), es))


def test_generator_with_inplace_ops_not_run_ahead():
    # rebuilding a returned generator would run its body now: refused when it writes a
    # tensor in place (eager writes only when the items are consumed)
    def whoo(t):
        yield t.sin_()
        yield t.cos_()

    def f(t):
        return whoo(t), t + 1
    t = X.clone()
    cdynamo.reset()
    g, _ = cdynamo.compile(f, backend="eager")(t)
    assert torch.equal(t, X)
    assert len(list(g)) == 2 and not torch.equal(t, X)


def test_stop_iteration_raised_and_caught_in_traced_code():
    def f(x):
        g = (t for t in [x])
        a = next(g)
        try:
            next(g)
            b = x
        except StopIteration:
            b = x + 1

        def gen():
            yield 1
            raise StopIteration   # PEP 479: a RuntimeError out of the generator
        h = gen()
        next(h)
        try:
            next(h)
            c = 0
        except RuntimeError:
            c = 2
        return a, b, c
    check(f, X, dynamo=None)
    assert breaks(f, X)[:2] == (1, 0)


def test_generator_with_finally_is_inlined():
    # dropping a generator half-way runs its finally block when its last reference goes:
    # traced there (values/generator.c), eager's log kept; tests/test_generators_try.py has more
    def f(x):
        log = []

        def gen():
            try:
                yield x + 1
                yield x + 2
            finally:
                log.append("closed")
        g = gen()
        a = next(g)
        del g
        log.append("after del")
        return a, log
    out = cdynamo.compile(f, backend="eager")(X)
    assert_same(out, f(X))
    assert out[1] == ["closed", "after del"]
    assert breaks(f, X) == (1, 0, 0)


def test_infinite_generator_consumed_lazily():
    def f(x):
        def naturals():
            n = 0
            while True:
                yield n
                n += 1
        return [x * n for n, _ in zip(naturals(), range(3))]
    check(f, X)


# ================================================================ builtins


def test_sorted_key_reverse():
    def f(x):
        d = {"b": 2, "a": 3, "c": 1}
        ks = sorted(d, key=lambda k: d[k], reverse=True)
        return [x * d[k] for k in ks], ks
    check(f, X)


def test_sorted_is_stable():
    def f(x):
        pairs = [(1, "a"), (0, "b"), (1, "c"), (0, "d"), (1, "e")]
        return (sorted(pairs, key=lambda p: p[0]), sorted(pairs, key=lambda p: p[0], reverse=True),
                sorted([3, 1, 2]), x + 1)
    check(f, X)


def test_map_filter_are_lazy_iterators():
    def f(x, xs):
        m = map(lambda t: t * 2, xs)
        first = next(m)
        flt = filter(lambda t: t is not None, [None, x, None, x + 1])
        mm = map(lambda a, b: a + b, xs, [1, 2])
        return first, list(m), list(m), list(flt), list(mm), isinstance(m, map)
    check(f, X, XS)


def test_reversed_enumerate_start_zip_strict():
    def f(xs):
        a = [t + i for i, t in enumerate(reversed(xs), start=2)]
        b = [u - v for u, v in zip(xs, xs, strict=True)]
        c = list(reversed({"k": 1, "j": 2}))
        return a, b, c
    check(f, XS)


def test_zip_consumes_iterators_as_eager():
    # zip pulls from its arguments in order and stops at the first exhausted one: the
    # iterator passed in keeps its remaining items
    def f(xs):
        it = iter(xs)
        pairs = list(zip(it, range(2)))
        return pairs, next(it), list(it)
    check(f, XS)


def test_sum_start_min_max_key_default():
    def f(x, xs):
        s = sum(xs, start=x)
        a = max([3, 1, 5], key=lambda v: -v)
        b = min([], default=7)
        c = max(xs, key=lambda t: 0)      # the first maximal item
        d = min(4, 2, 9)
        return s, x * a + b + d, c
    check(f, X, XS, dynamo="better")   # torch._dynamo breaks at max(key=)


def test_str_methods_on_constants_fold():
    def f(x):
        return x * len("a,b,c".split(",")), "-".join(["a", "b"])
    check(f, X)


def test_pure_builtins_fold_on_containers_and_generators_of_constants():
    def f(x):
        name = "_".join(str(d) for d in x.shape)
        return x * len(name), str([1, (2, "a")]), max([3, 9, 4]), sorted((i * 2 for i in range(3)))
    check(f, X)


# ================================================================ functools, operator


def test_functools_reduce():
    def f(xs):
        return (functools.reduce(lambda a, b: a + b, xs),
                functools.reduce(operator.mul, [1, 2, 3], 4), functools.reduce(operator.add, [7]))
    check(f, XS)


def test_operator_getters():
    def f(x):
        pairs = [(3, x), (1, x + 1), (2, x + 2)]
        return (sorted(pairs, key=operator.itemgetter(0)), operator.itemgetter(0, 2)([5, 6, 7]),
                operator.attrgetter("shape")(x), operator.methodcaller("add", 1)(x))
    check(f, X)


# ================================================================ itertools


def test_itertools_chain_product_accumulate():
    def f(x, xs):
        a = list(itertools.chain(xs[:2], [x]))
        b = list(itertools.chain.from_iterable([xs[:1], [x]]))
        c = [x * p + q for p, q in itertools.product([1, 2], [3, 4])]
        d = list(itertools.accumulate(xs))
        e = list(itertools.accumulate([1, 2, 3], operator.mul, initial=2))
        return a, b, c, d, e
    check(f, X, XS)


def test_iterator_advanced_in_a_breaking_call_is_restored():
    # the call breaks after advancing an iterator reached through a list: the rollback puts
    # it back, so Python runs the call on the iterator as it was
    def foo(its):
        a = next(its[0])
        print("graph break")
        return a

    def f(x):
        it = iter([1, 2, 3])
        r = foo([it])
        return x + r, list(it)
    out = cdynamo.compile(f, backend="eager")(X)
    assert_same(out, f(X))


def test_hf_style_tuple_of_present_outputs():
    def f(x, xs):
        hidden, attn, cache = x * 2, None, xs[0] + 1
        out = tuple(v for v in [hidden, attn, cache] if v is not None)
        use = any(v is None for v in [hidden, attn])
        return out, use
    check(f, X, XS)


def test_itertools_islice_consumes_as_eager():
    def f(xs):
        it = iter(xs)
        a = list(itertools.islice(it, 1, 3))
        b = list(itertools.islice(range(10), 2, 9, 3))
        return a, next(it), b
    check(f, XS)


def test_itertools_zip_longest_count_repeat():
    def f(x, xs):
        a = [(u, v) for u, v in itertools.zip_longest(xs[:2], [1, 2, 3], fillvalue=x)]
        b = [t * c for t, c in zip(xs, itertools.count(2, 3))]
        c = list(itertools.repeat(x, 2))
        return a, b, c
    check(f, X, XS)


def test_itertools_combinatorics_and_groupby():
    def f(x, xs):
        a = [u + v for u, v in itertools.combinations(xs, 2)]
        b = list(itertools.permutations([1, 2, 3], 2))
        groups = [(k, len(list(g))) for k, g in itertools.groupby([1, 1, 2, 3, 3, 3])]
        # a group whose outer iterator moved on is empty, as eager
        gb = itertools.groupby("aabbb")
        k1, g1 = next(gb)
        k2, g2 = next(gb)
        return a, b, groups, (k1, list(g1), k2, list(g2)), x + 1
    check(f, X, XS)


def test_itertools_misc():
    def f(x):
        a = list(itertools.starmap(operator.add, [(1, 2), (3, 4)]))
        b = list(itertools.takewhile(lambda v: v < 3, [1, 2, 3, 1]))
        c = list(itertools.dropwhile(lambda v: v < 3, [1, 2, 3, 1]))
        d = list(itertools.compress("abcd", [1, 0, 1, 0]))
        e = list(itertools.pairwise([1, 2, 3]))
        f_ = list(itertools.filterfalse(None, [0, 1, 0, 2]))
        return a, b, c, d, e, f_, x * len(a)
    check(f, X)


# ================================================================ heapq, copy, collections


def test_heapq():
    # torch._dynamo breaks at _heapq.heappush inside the loop and skips the frame
    def f(x, xs):
        h = []
        for v in [5, 1, 4, 2, 3]:
            heapq.heappush(h, v)
        out = [heapq.heappop(h) for _ in range(3)]
        lst = [9, 3, 7, 1, 8]
        heapq.heapify(lst)
        r = heapq.heappushpop(lst, 4), heapq.heapreplace(lst, 0)
        return out, lst, r, heapq.nlargest(2, [1, 5, 3]), heapq.nsmallest(2, xs, key=lambda t: 0), x + 1
    check(f, X, XS, dynamo="better")


def test_bisect():
    import bisect

    def f(x):
        a = [1, 3, 3, 7]
        i = bisect.bisect_left(a, 3), bisect.bisect_right(a, 3), bisect.bisect(a, 8, 1)
        bisect.insort(a, 4)
        bisect.insort_left(a, 0)
        j = bisect.bisect_left([(1, "a"), (5, "b")], 4, key=lambda p: p[0])
        return i, a, j, x * len(a)
    check(f, X)


def test_copy_and_deepcopy_of_containers():
    def f(x):
        inner = [2, 3]
        a = [1, inner, {"k": [4]}, inner, (5, 6)]
        b = copy.deepcopy(a)
        b[1].append(5)      # the shared list stays shared in the copy
        c = copy.copy(a)
        c.append(6)
        return a, b, c, b[1] is b[3], b[4] is a[4], x + 1
    check(f, X)


def test_deepcopy_of_tensor_breaks():
    def f(x):
        y = copy.deepcopy(x)
        return y + 1
    g, b, _ = breaks(f, X)
    assert b == 1
    assert_same(cdynamo.compile(f, backend="eager")(X), f(X))


def test_counter_tally_polyfill():
    from cdynamo.polyfills import registry
    import _collections
    assert _collections._count_elements in registry()
    d = {}
    registry()[_collections._count_elements](d, "abca")
    assert d == dict(collections.Counter("abca"))


def test_registry_maps_reals_to_python_functions():
    from cdynamo.polyfills import registry
    table = registry()
    for real in (sorted, map, filter, zip, enumerate, reversed, sum, any, all, min, max,
                 functools.reduce, itertools.chain, itertools.chain.from_iterable,
                 itertools.product, itertools.accumulate, itertools.islice,
                 itertools.zip_longest, itertools.count, itertools.repeat,
                 itertools.combinations, itertools.permutations, itertools.groupby,
                 operator.itemgetter, operator.attrgetter, operator.methodcaller,
                 heapq.heappush, heapq.heappop, heapq.heapify, heapq.nlargest, heapq.nsmallest,
                 copy.copy, copy.deepcopy, __import__("bisect").bisect_left):
        assert callable(table[real]) and table[real].__module__.startswith("cdynamo.polyfills")


def test_no_symbolic_values_leak():
    from cdynamo import _C

    def f(x, xs):
        g = (t * 2 for t in xs)
        next(g)
        p = functools.partial(torch.add, other=1)
        return list(map(p, g)), sorted(xs, key=lambda t: 0), list(itertools.islice(g, 1)), g
    cdynamo.reset()
    cdynamo.compile(f, backend="eager")(X, XS)
    assert _C.live_counts()["values"] == 0


def test_trace_rules_report_polyfills():
    from cdynamo import trace_rules
    m = trace_rules.lookup_callable(itertools.chain.from_iterable)
    assert m.rule == "polyfill" and m.value.__module__ == "cdynamo.polyfills.itertools"
    assert trace_rules.lookup_callable(len) is None   # an exact C handler, no polyfill
    # the standard library's frames are skipped, but a call of copy.deepcopy is polyfilled
    assert trace_rules.lookup_callable(copy.deepcopy).rule == "polyfill"
    assert trace_rules.lookup_code(copy.deepcopy.__code__, copy.deepcopy.__globals__) == "skip"
