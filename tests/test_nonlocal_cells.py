"""`nonlocal` stores (STORE_DEREF) into cells of frames that are not traced: a closure cell
of the compiled function, or of an inlined function whose cell came from outside the trace.
As torch._dynamo, the store is a side effect on the cell: later loads in the trace see the
new value, and the real cell gets it after the graph (before a graph break's code runs).
Was a graph break (CDB0009, "STORE_DEREF to a cell of an outer frame"), an error under
fullgraph=True. Each case runs a fresh closure in eager, under cdynamo and under
torch._dynamo over several calls: the results and the cells' contents after every call
must equal eager's, and the graph counts torch._dynamo's."""
import torch
import torch._dynamo

import cdynamo
from cdynamo import _glue
from helpers import CountingBackend, assert_same


def check(make, make_args, calls=3, fullgraph=False, graphs="=="):
    """make() -> (fn, state) where state() reads the closure's cells. Compares every call's
    result and the state after it with eager, and cdynamo's graph count with torch._dynamo's
    (graphs "==", or "<=" where cdynamo hands no empty graph to the backend); returns
    (cdynamo, torch._dynamo) backends."""
    fn_e, state_e = make()
    fn_c, state_c = make()
    fn_d, state_d = make()
    cc, cd = CountingBackend(), CountingBackend()
    torch._dynamo.reset()
    comp_c = cdynamo.compile(fn_c, backend=cc, fullgraph=fullgraph)
    comp_d = torch.compile(fn_d, backend=cd, fullgraph=fullgraph)
    for i in range(calls):
        args = make_args(i)
        expected = fn_e(*args)
        assert_same(comp_c(*make_args(i)), expected, f"cdynamo call {i}")
        assert_same(state_c(), state_e(), f"cdynamo cells after call {i}")
        assert_same(comp_d(*make_args(i)), expected, f"torch._dynamo call {i}")
        assert_same(state_d(), state_e(), f"torch._dynamo cells after call {i}")
    torch._dynamo.reset()
    if graphs == "==":
        assert cc.frame_count == cd.frame_count, (cc.frame_count, cd.frame_count)
    else:
        assert 1 <= cc.frame_count <= cd.frame_count, (cc.frame_count, cd.frame_count)
    return cc, cd


def ones(i):
    return (torch.ones(3) * (i + 1),)


# ---- a counter in a closure ------------------------------------------------------------------

def make_counter():
    z = 0

    def fn(x):
        nonlocal z
        z = z + 1
        return x + z

    return fn, lambda: z


def test_counter_is_right_on_every_call():
    # each call reads the count at entry (guarded) and writes the next one back: the 2nd and
    # 3rd calls must not reuse a trace that folded the first count
    n0 = len(_glue.break_log)
    cc, _ = check(make_counter, ones, calls=4, fullgraph=True)
    assert cc.frame_count >= 1
    assert not [b for b in _glue.break_log[n0:] if "STORE_DEREF" in b.reason]


def make_read_after_store():
    z = 5

    def fn(x):
        nonlocal z
        a = z          # read (guarded) before the store
        z = z * 2
        return x * a + z   # z: the stored value, not the cell's

    return fn, lambda: z


def test_load_after_store_sees_the_new_value():
    check(make_read_after_store, ones, calls=3, fullgraph=True)


# ---- a tensor stored into a nonlocal ------------------------------------------------------------

def make_tensor_out():
    out = None

    def fn(a, b):
        nonlocal out
        out = a + b * 10
        return out.sin()

    return fn, lambda: out


def test_tensor_stored_into_a_nonlocal():
    cc, cd = check(make_tensor_out, lambda i: (torch.ones(3) * i, torch.ones(3)), calls=3,
                   fullgraph=True)
    assert cc.frame_count == 1


def make_tensor_accumulator():
    acc = torch.zeros(3)

    def fn(x):
        nonlocal acc
        acc = acc + x      # the cell's tensor is a graph input, the new one an output
        return acc * 2

    return fn, lambda: acc


def test_tensor_accumulated_in_a_nonlocal():
    check(make_tensor_accumulator, ones, calls=4, fullgraph=True)


# ---- stores before and after a graph break ----------------------------------------------------

def make_store_around_break():
    z = 1
    seen = []

    def fn(x):
        nonlocal z
        z = z + 1
        seen.append(z)     # the break's code sees the store written back
        print("", end="")  # graph break
        seen.append(z)
        z = z * 3
        return x + z

    return fn, lambda: (z, list(seen))


def test_stores_before_and_after_a_graph_break():
    n0 = len(_glue.break_log)
    # torch._dynamo hands the backend the graph before the print too, which has no op
    cc, cd = check(make_store_around_break, ones, calls=3, graphs="<=")
    assert [b for b in _glue.break_log[n0:] if "STORE_DEREF" in b.reason] == []
    assert cc.frame_count >= 2


def make_break_reads_cell():
    z = 0

    def fn(x):
        nonlocal z
        z = 7
        torch._dynamo.graph_break()
        return x + z   # the resume function reads the real cell

    return fn, lambda: z


def test_resume_function_reads_the_written_cell():
    check(make_break_reads_cell, ones, calls=3)


# ---- nested closures two levels deep -----------------------------------------------------------

def make_nested():
    a = 0

    def mid():
        b = torch.zeros(2)

        def inner(x):
            nonlocal a, b
            a += 1
            b = b + x
            return b * a

        return inner, lambda: b

    inner, get_b = mid()
    return inner, lambda: (a, get_b())


def test_nested_closures_two_levels():
    check(make_nested, lambda i: (torch.ones(2) * (i + 1),), calls=3, fullgraph=True)


# ---- a store in an inlined function -------------------------------------------------------------

def make_inlined_store():
    z = 0

    def inc():
        nonlocal z
        z += 1

    def fn(x):
        inc()
        inc()          # the second call sees the first one's store
        return x + z   # and so does the caller

    return fn, lambda: z


def test_store_in_an_inlined_function():
    n0 = len(_glue.break_log)
    cc, _ = check(make_inlined_store, ones, calls=3, fullgraph=True)
    assert not [b for b in _glue.break_log[n0:] if "STORE_DEREF" in b.reason]


def make_counter_argument():
    def make_counter():
        x = torch.ones(4)

        def counter():
            nonlocal x
            x = x + 1
            return x

        return counter

    counter = make_counter()

    def fn(c):
        return c() + c()

    return (lambda: fn(counter)), lambda: counter.__closure__[0].cell_contents


def test_closure_passed_in_stores_twice():
    # test_write_to_closures_in_inlining: one trace, the two calls see one cell
    cc, _ = check(make_counter_argument, lambda i: (), calls=3, fullgraph=True)


def make_aliasing_args():
    def pair():
        z = 0

        def inc():
            nonlocal z
            z += 1

        def get():
            return z

        return inc, get

    p1, p2 = pair(), pair()
    plan = [(p1[0], p1[1]), (p1[0], p2[1]), (p2[0], p2[1]), (p2[0], p1[1])]

    def fn(x, inc, get):
        inc()
        return x + get()

    return fn, plan, (lambda: (p1[1](), p2[1]()))


def test_one_cell_under_two_names_is_guarded():
    # the same cell reached through two functions passed in is one cell while they share it
    # (SAME_OBJECT), and two distinct cells stay distinct (no aliasing): the shared/unshared
    # pairs alternate, each call equal to eager
    fn_e, plan_e, state_e = make_aliasing_args()
    fn_c, plan_c, state_c = make_aliasing_args()
    comp = cdynamo.compile(fn_c, backend=CountingBackend())
    for i in range(8):
        x = torch.ones(2) * i
        expected = fn_e(x, *plan_e[i % 4])
        assert_same(comp(x, *plan_c[i % 4]), expected, f"call {i}")
        assert state_c() == state_e(), i


# ---- an old value kept across the store ------------------------------------------------------

def make_swap():
    state = {"k": torch.zeros(2)}

    def fn(x):
        nonlocal state
        prev = state
        state = {"k": x}
        return prev   # the dict the cell held at entry, not the one stored

    return fn, lambda: state


def test_value_read_before_the_store_is_returned():
    check(make_swap, lambda i: (torch.ones(2) * i,), calls=3, fullgraph=True)


# ---- a cell made inside the trace (unchanged behaviour) ---------------------------------------

def make_local_closure():
    def fn(x):
        c = 0

        def bump():
            nonlocal c
            c += 1

        bump()
        bump()
        return x + c

    return fn, lambda: None


def test_store_into_a_cell_made_in_the_trace():
    cc, _ = check(make_local_closure, ones, calls=3, fullgraph=True)
    assert cc.frame_count == 1


# ---- generators that store into an outer cell -----------------------------------------------

def make_generator_store():
    n = 0

    def gen():
        nonlocal n
        n += 1
        yield 1
        n += 2
        yield 2
        n += 3
        yield 3

    def fn(x):
        s = {2, 4, 5}
        d = s.isdisjoint(gen())   # stops at 2, as eager: n grows by 3
        return x + n, d

    return fn, lambda: n


def test_generator_stores_into_an_outer_cell():
    check(make_generator_store, ones, calls=3, fullgraph=True)


def make_close_with_store():
    L = []
    z = 0

    def whoo(t):
        try:
            L.append(1)
            yield t.sin()
            L.append(2)
            yield t.cos()
        finally:
            L.append(z)

    def fn(t):
        nonlocal z
        gen = whoo(t)
        i = next(gen)
        z = -123
        gen.close()         # the finally reads the stored value
        L.append(len(L))
        return i

    return fn, lambda: (z, list(L))


def test_generator_close_sees_the_store():
    check(make_close_with_store, ones, calls=2, fullgraph=True)
