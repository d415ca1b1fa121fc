"""Functions (issue 7, Scopes 4 and 5): functools.partial, lru_cache/cache and wraps-decorated
functions, closures returned or live across graph breaks, and closures guarded by their code
and cells instead of their identity (a closure built anew on every call reuses the trace).

Results are compared with eager on every call; graph and op counts with torch._dynamo on the
same function (helpers.compare), recompilations with cdynamo.counters()."""
import functools

import pytest
import torch

import cdynamo
from helpers import CountingBackend, assert_same, compare, run_torch_dynamo


X = torch.randn(4)
Y = torch.randn(4)


def compiles_of(fn, calls):
    """Compile fn with a counting backend, run each (args, expected) in calls; return the
    number of graphs compiled and cache misses."""
    counter = CountingBackend()
    cdynamo.reset()
    cdynamo.reset_counters()
    compiled = cdynamo.compile(fn, backend=counter)
    for args in calls:
        assert_same(compiled(*args), fn(*args))
    return counter.frame_count, cdynamo.counters()["cache_misses"]


def dynamo_compiles(fn, calls):
    counter = CountingBackend()
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=counter)
    for args in calls:
        compiled(*args)
    torch._dynamo.reset()
    return counter.frame_count


# ================================================================ closures: guards (Scope 5)


def make_scaler(k):
    def inner(t):
        return t * k
    return inner


def consumer(fn, t):
    return fn(t) + 1


def test_closure_per_call_tensor_cell_compiles_once():
    calls = [(make_scaler(torch.randn(4)), X) for _ in range(4)]
    graphs, misses = compiles_of(consumer, calls)
    assert graphs == 1 and misses == 1
    assert dynamo_compiles(consumer, calls) == 1
    cdynamo.reset()
    compiled = cdynamo.compile(consumer, backend="eager")
    compiled(*calls[0])
    text = cdynamo.cache_entries(consumer)[0].guards
    assert "L['fn'].__code__ ID_MATCH" in text
    assert not any(g == "local 'fn' FUNCTION_MATCH" for g in text)


def test_closure_per_call_int_cell_recompiles_per_value():
    calls = [(make_scaler(k), X) for k in (2, 2, 3, 3, 2)]
    graphs, misses = compiles_of(consumer, calls)
    assert graphs == 2 and misses == 2      # k=2, k=3; the second k=2 closure hits the cache


def test_lambda_per_call_compiles_once():
    calls = [(lambda t: t - 1, X) for _ in range(3)]
    assert compiles_of(consumer, calls) == (1, 1)


def test_closure_with_other_code_recompiles():
    def other(t):
        return t * 5
    graphs, _ = compiles_of(consumer, [(make_scaler(2), X), (other, X)])
    assert graphs == 2


def test_closure_defaults_are_guarded():
    def make(k):
        def inner(t, scale=k):
            return t * scale
        return inner
    graphs, _ = compiles_of(consumer, [(make(2), X), (make(2), X), (make(3), X)])
    assert graphs == 2


def test_identity_of_code_guarded_function_is_pinned():
    # `fn is helper` decides a branch: the guard becomes the function's identity
    def helper(t):
        return t + 1

    def f(fn, t):
        if fn is helper:
            return t * 2
        return fn(t)
    graphs, _ = compiles_of(f, [(helper, X), (lambda t: t - 3, X), (helper, X)])
    assert graphs == 2


# ================================================================ closures returned / across breaks (Scope 4)


def returns_closure(x):
    y = x * 2

    def g(z):
        return z + y
    return g


def test_return_closure_made_in_frame():
    counter = CountingBackend()
    cdynamo.reset()
    g = cdynamo.compile(returns_closure, backend=counter)(X)
    assert_same(g(Y), returns_closure(X)(Y))
    _, dyn = run_torch_dynamo(returns_closure, X)
    assert counter.frame_count == dyn.frame_count == 1


def test_returned_closures_share_cells():
    def f(x):
        n = x + 1

        def a():
            return n * 2

        def b():
            return n * 3
        return a, b
    cdynamo.reset()
    a, b = cdynamo.compile(f, backend="eager")(X)
    assert a.__closure__[0] is b.__closure__[0]
    assert_same(a(), (X + 1) * 2)
    assert_same(b(), (X + 1) * 3)


def test_closure_with_defaults_and_kwdefaults_returned():
    def f(x):
        def g(z, w=3, *, v=x):
            return z * w + v
        return g
    cdynamo.reset()
    g = cdynamo.compile(f, backend="eager")(X)
    assert_same(g(Y), f(X)(Y))
    assert_same(g(Y, 2, v=1), f(X)(Y, 2, v=1))


def closure_across_break(x):
    k = x.sum()

    def g(z):
        return z * k
    print("graph break")
    return g(x) + 1, g


def test_closure_live_across_graph_break():
    compare(lambda x: closure_across_break(x)[0], X)
    cdynamo.reset()
    _, g = cdynamo.compile(closure_across_break, backend="eager")(X)
    assert_same(g(Y), Y * X.sum())


def closure_reassigned_after_break(x):
    k = 1

    def g(z):
        return z * k
    print("graph break")
    k = 2
    return g(x)


def test_closure_over_reassigned_variable_at_break_stays_eager():
    # the rebuilt closure would get a cell of its own: refused, the frame runs as eager
    counter = CountingBackend()
    cdynamo.reset()
    assert_same(cdynamo.compile(closure_reassigned_after_break, backend=counter)(X),
                closure_reassigned_after_break(X))


def _sign_step(a):
    if (a > 0).any():      # graph break inside the inlined call
        return a + 1
    return a - 1


def closure_over_variable_assigned_by_broken_call(x, y):
    def g(z):
        return z * t
    t = _sign_step(x)      # the call breaks; t's only store runs in the resume function
    return g(y)


def test_closure_over_variable_assigned_after_break_point():
    # fuzzer, seed 3 program 299: NameError (free variable 't' not associated with a value)
    # when the rebuilt closure got a cell that the resume function's store never reached
    cdynamo.reset()
    for a in (X, -X):
        assert_same(cdynamo.compile(closure_over_variable_assigned_by_broken_call,
                                    backend="eager")(a, Y),
                    closure_over_variable_assigned_by_broken_call(a, Y))


def test_returned_closure_calls_closure():
    def f(x):
        def inner(a):
            return a * x

        def outer(b):
            return inner(b) + 1
        return outer(x), outer
    compare(lambda x: f(x)[0], X)
    cdynamo.reset()
    _, outer = cdynamo.compile(f, backend="eager")(X)
    assert_same(outer(Y), Y * X + 1)


# ================================================================ functools.partial


def test_partial_build_call_nest_keywords():
    def f(x):
        p = functools.partial(torch.add, other=2)
        q = functools.partial(p, alpha=3)

        def h(a, b, c=1):
            return a * b + c
        r = functools.partial(h, x, c=5)
        return p(x), q(x), r(2), r(3, c=0), q.func is torch.add, len(r.args), r.keywords
    compare(f, X)


def test_partial_passed_in_guarded_by_func_and_args():
    def f(p, x):
        return p(x) + 1
    calls = [(functools.partial(torch.add, other=k), X) for k in (2, 2, 3)]
    graphs, _ = compiles_of(f, calls)
    assert graphs == 2
    assert dynamo_compiles(f, calls) == 2
    cdynamo.reset()
    cdynamo.compile(f, backend="eager")(*calls[0])
    guards = cdynamo.cache_entries(f)[0].guards
    assert "L['p'].keywords['other'] EQUALS_MATCH 2" in guards


def test_partial_of_per_call_lambda_compiles_once():
    def f(p, x):
        return p(x)
    calls = [(functools.partial(lambda a, b: a * b, 3), X) for _ in range(3)]
    assert compiles_of(f, calls) == (1, 1)


def test_partial_of_closure_returned_and_across_break():
    def f(x):
        def h(a, b):
            return a * b + x
        p = functools.partial(h, 2)
        print("graph break")
        return p(x), p
    compare(lambda x: f(x)[0], X)
    cdynamo.reset()
    _, p = cdynamo.compile(f, backend="eager")(X)
    assert isinstance(p, functools.partial) and p.args == (2,)
    assert_same(p(Y), 2 * Y + X)


def test_partial_global_and_as_key():
    scale = functools.partial(torch.mul, other=3)

    def f(x):
        return sorted([x, x + 1], key=functools.partial(lambda t, s: -s, s=1)), scale(x)
    globals()["_scale_partial"] = scale
    compare(f, X)


# ================================================================ lru_cache / cache / wraps


@functools.lru_cache(maxsize=None)
def _cached_scale(n):
    return n * 2


@functools.cache
def _cached_offset(n):
    return n + 1


def _deco(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) + 1
    return wrapper


@_deco
def _wrapped_base(t):
    return t * 2


def test_lru_cache_and_cache_inline_the_wrapped_function():
    def f(x):
        return x * _cached_scale(3) + _cached_offset(1)
    c = compare(f, X)
    assert c.frame_count == 1


def test_wraps_decorated_function_inlined():
    def f(x):
        return _wrapped_base(x) * 3
    c = compare(f, X)
    assert c.op_count == 3


def test_lru_cache_wrapper_returned_keeps_its_identity():
    def f(x):
        return x + 1, _cached_scale
    cdynamo.reset()
    _, fn = cdynamo.compile(f, backend="eager")(X)
    assert fn is _cached_scale


def test_recursive_closure_and_self_referencing_generator_do_not_leak():
    from cdynamo import _C

    def f(x):
        def fact(n):
            return 1 if n == 0 else n * fact(n - 1)

        def gen():
            yield g
        g = gen()
        return x * fact(3), next(g) is g
    cdynamo.reset()
    assert_same(cdynamo.compile(f, backend="eager")(X), f(X))
    assert _C.live_counts()["values"] == 0
