"""Issue 7 scope 1, "break, never give up a frame": an inlined call that mutates state of the
frame (an attribute of an object that outlives it, a list/dict/set of the caller or an input,
a global, a ModelOutput item, a generator's position) and then hits a graph break is rolled
back whole (csrc/undo.c): the caller breaks at the call site, the callee runs in Python (and
is compiled as a frame of its own), and the caller's own ops stay compiled. Before, the
caller ran unmodified. A mutation that cannot be undone keeps the old behaviour (the frame
runs unmodified), and the record names the frame's own call-site line.

Each program runs eagerly, under torch._dynamo and under cdynamo (twice: the second call
hits the cache) on fresh inputs; results and the state left in the inputs and globals must
equal eager's, and the graphs (with their FX call nodes) torch._dynamo's.
"""
from collections import OrderedDict

import pytest
import torch
import torch._dynamo

import cdynamo
from helpers import CountingBackend, assert_same


CALL_OPS = ("call_function", "call_method", "call_module")


def state(obj):
    """A comparable form of obj: objects as (type name, their attributes), sets sorted."""
    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(state(o) for o in obj)
    if isinstance(obj, dict) and type(obj) not in (dict, OrderedDict):
        # a ModelOutput: its items in order and its attributes (kept in step)
        return (type(obj).__name__, [(k, state(v)) for k, v in obj.items()],
                {k: state(v) for k, v in vars(obj).items()})
    if isinstance(obj, dict):
        return {k: state(v) for k, v in obj.items()}
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return (type(obj).__name__, {k: state(v) for k, v in vars(obj).items()})
    return obj


def ops_per_graph(counter):
    return [sum(1 for n in gm.graph.nodes if n.op in CALL_OPS) for gm in counter.graphs]


def check(fn, make, graphs=None, breaks=None, dynamo_right=True):
    """fn(*make()) eagerly, under torch._dynamo and under cdynamo; returns cdynamo's explain()
    output. make() builds fresh inputs and resets any global state fn changes.
    dynamo_right=False: torch._dynamo's result differs from eager's (only its graphs count)."""
    args = make()
    expected = fn(*args)
    expected_state = state((expected, args, make_state()))

    torch._dynamo.reset()
    td = CountingBackend()
    td_args = make()
    td_out = torch.compile(fn, backend=td)(*td_args)
    torch._dynamo.reset()
    if dynamo_right:
        assert_same(state((td_out, td_args, make_state())), expected_state, "torch._dynamo")

    cdynamo.reset()
    cd = CountingBackend()
    compiled = cdynamo.compile(fn, backend=cd)
    for call in range(2):
        cd_args = make()
        out = compiled(*cd_args)
        assert_same(state((out, cd_args, make_state())), expected_state, f"call {call}")
        assert cdynamo._C.live_counts()["values"] == 0   # nothing the undo log kept leaks
        if call == 0:
            first = ops_per_graph(cd)
    assert first == ops_per_graph(cd), "the second call compiled again"
    assert first == ops_per_graph(td), f"cdynamo graphs {first}, torch._dynamo {ops_per_graph(td)}"
    if graphs is not None:
        assert len(first) == graphs

    ex = cdynamo.explain(fn)(*make())
    assert ex.unmodified_frames == [], ex.unmodified_frames
    if breaks is not None:
        assert ex.graph_break_count == breaks, [b.reason for b in ex.break_reasons]
    return ex


def make_state():
    """The module state the programs below change."""
    return (HOLDER.value, COUNTER, Klass.count)


class Holder:
    def __init__(self):
        self.value = None


HOLDER = Holder()
COUNTER = 0


class Klass:
    count = 0


def reset_globals():
    global COUNTER
    HOLDER.value = None
    COUNTER = 0
    Klass.count = 0


def fresh(*make_args):
    """make() for check(): resets the globals, then builds the arguments."""
    def make():
        reset_globals()
        return tuple(m() for m in make_args)
    return make


def x3():
    return torch.arange(3.0) + 1


class Obj:
    def __init__(self, v):
        self.v = v


# ============================================================ part 1: mutation, then a break


def test_attribute_store_on_global_object_then_break():
    # the reproducer (transformers 5.x capture_outputs: _active_collector.set() then the
    # model's forward breaks): 3 graphs, 2 breaks, as torch._dynamo; the caller's sin/add and
    # cos/sub stay compiled, and the store happens once
    def inner(x):
        HOLDER.value = 1
        torch._dynamo.graph_break()
        return x * 2

    def outer(x):
        x = torch.sin(x) + 1
        y = inner(x)
        return torch.cos(y) - 1, HOLDER.value

    ex = check(outer, fresh(x3), graphs=3, breaks=2)
    assert [len(ops) for ops in ex.ops_per_graph] == [2, 1, 2]
    assert [(b.qualname, b.lineno) for b in ex.break_reasons][0] == \
        ("test_attribute_store_on_global_object_then_break.<locals>.outer",
         outer.__code__.co_firstlineno + 2)


def test_attribute_read_modify_write_on_global_object():
    def inner(x):
        HOLDER.value = (HOLDER.value or 0) + 1
        torch._dynamo.graph_break()
        return x * 2

    def outer(x):
        x = x + 1
        y = inner(x)
        return y + HOLDER.value

    check(outer, fresh(x3), graphs=3, breaks=2)


def test_list_of_the_caller_appended_then_break():
    # undone exactly: replayed as well, the item would be appended twice
    def inner(lst, x):
        lst.append(x * 3)
        torch._dynamo.graph_break()
        return x * 2

    def outer(x):
        acc = [x + 1]
        y = inner(acc, x)
        return y + 1, acc

    check(outer, fresh(x3), graphs=4, breaks=2)


def test_input_list_appended_then_break():
    def inner(lst, x):
        lst.append(x * 3)
        lst[0] = lst[0] + 1
        torch._dynamo.graph_break()
        return x * 2

    def outer(x, lst):
        x = x + 1
        y = inner(lst, x)
        return y + 1, lst

    check(outer, fresh(x3, lambda: [torch.zeros(1)]), graphs=4, breaks=2)


def test_input_dict_stored_and_deleted_then_break():
    def inner(d, x):
        d["k"] = x * 3
        del d["a"]
        torch._dynamo.graph_break()
        return x * 2

    def outer(x, d):
        x = x + 1
        y = inner(d, x)
        return y + 1, d

    check(outer, fresh(x3, lambda: {"a": 1, "b": 2}), graphs=4, breaks=2)


def test_dict_of_the_caller_changed_then_break():
    def inner(d, x):
        d["k"] = x * 3
        d.pop("a")
        d.setdefault("c", 3)
        torch._dynamo.graph_break()
        return x * 2

    def outer(x):
        d = OrderedDict(a=x, b=2)
        x = x + 1
        y = inner(d, x)
        return y + 1, d, list(d)

    check(outer, fresh(x3), graphs=4, breaks=2)


def test_set_of_the_caller_changed_then_break():
    def inner(s, x):
        s.add(5)
        s.discard(1)
        torch._dynamo.graph_break()
        return x * 2

    def outer(x):
        s = {1, 2, 3}
        x = x + 1
        y = inner(s, x)
        return y + 1, sorted(s)

    check(outer, fresh(x3), graphs=3, breaks=2)


def test_global_store_then_break():
    def outer(x):
        x = x + 1
        y = bump_counter_then_break(x)
        return y + 1, COUNTER

    check(outer, fresh(x3), graphs=3, breaks=2)


def bump_counter_then_break(x):
    global COUNTER
    COUNTER += 1
    torch._dynamo.graph_break()
    return x * 2


def test_class_attribute_store_then_break():
    def inner(x):
        Klass.count += 1
        torch._dynamo.graph_break()
        return x * 2

    def outer(x):
        x = x + 1
        return inner(x) + 1, Klass.count

    check(outer, fresh(x3), graphs=3, breaks=2)


def test_object_made_by_the_caller_changed_then_break():
    def inner(o, x):
        o.v = o.v + x
        o.w = 1
        torch._dynamo.graph_break()
        return x * 2

    def outer(x):
        o = Obj(x)
        x = x + 1
        y = inner(o, x)
        return y + o.v, o.w

    check(outer, fresh(x3), graphs=4, breaks=2)


class Acc:
    def __init__(self):
        self.total = 0

    def add(self, x):
        self.total = self.total + 1
        torch._dynamo.graph_break()
        return x * self.total


def test_method_mutating_its_object_then_break():
    # an object made in an earlier instruction, changed by its own method, which then breaks
    def outer(x):
        a = Acc()
        x = x + 1
        y = a.add(x)
        return y + a.total

    make = fresh(x3)
    expected = outer(*make())
    cdynamo.reset()
    compiled = cdynamo.compile(outer, backend=CountingBackend())
    for _ in range(2):
        assert_same(compiled(*make()), expected)
        assert cdynamo._C.live_counts()["values"] == 0
    ex = cdynamo.explain(outer)(*make())
    assert ex.unmodified_frames == []
    assert ex.graph_count == 3 and [len(o) for o in ex.ops_per_graph] == [1, 1, 1]


def test_input_object_changed_then_break():
    def inner(o, x):
        o.v = o.v + x
        o.w = 1
        torch._dynamo.graph_break()
        return x * 2

    def outer(x, o):
        x = x + 1
        y = inner(o, x)
        return y + o.v, o.w

    check(outer, fresh(x3, lambda: Obj(torch.ones(3))), graphs=4, breaks=2)


def test_input_object_dict_changed_then_break():
    def inner(o, x):
        o.__dict__["z"] = 5
        torch._dynamo.graph_break()
        return x * 2

    def outer(x, o):
        x = x + 1
        y = inner(o, x)
        return y, o.z

    check(outer, fresh(x3, lambda: Obj(1)), graphs=2)


class CustomSetattr:
    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)


def test_object_with_custom_setattr_changed_then_break():
    # object.__setattr__ replayed by its slot function (an EFF_CALL side effect)
    def inner(o, x):
        o.a = 3
        torch._dynamo.graph_break()
        return x * 2

    def outer(x, o):
        x = x + 1
        y = inner(o, x)
        return y, o.a

    check(outer, fresh(x3, CustomSetattr), graphs=2)


def test_mutation_two_calls_deep_then_break():
    def inner_b(lst, x):
        lst.append(1)
        torch._dynamo.graph_break()
        return x

    def inner_a(lst, x):
        lst.append(0)
        return inner_b(lst, x) * 2

    def outer(x):
        lst = []
        x = x + 1
        y = inner_a(lst, x)
        return y, lst

    check(outer, fresh(x3), graphs=2)


def test_generator_of_the_caller_advanced_then_break():
    # the generator's frame state is put back: drained at the break from where the caller
    # left it, the callee's next() takes the second item, the caller's the third
    def gen(x):
        yield x + 1
        yield x + 2
        yield x + 3

    def inner(g):
        a = next(g)
        torch._dynamo.graph_break()
        return a

    def outer(x):
        g = gen(x)
        a = next(g)
        b = inner(g)
        return a + b + next(g)

    args = (x3(),)
    expected = outer(*args)
    cdynamo.reset()
    compiled = cdynamo.compile(outer, backend=CountingBackend())
    for _ in range(2):
        assert_same(compiled(x3()), expected)
        assert cdynamo._C.live_counts()["values"] == 0
    ex = cdynamo.explain(outer)(x3())
    assert ex.unmodified_frames == []
    assert ex.break_reasons[0].qualname.endswith("outer")


def test_checkpoint_body_with_side_effect_breaks_at_the_call():
    # a store into an outer value inside a higher-order op's body fails the op; undone, the
    # caller breaks at torch.utils.checkpoint.checkpoint (the body runs in Python)
    from torch.utils.checkpoint import checkpoint

    def outer(x, acc):
        x = x + 1

        def body(x):
            acc.append(1)
            HOLDER.value = 2
            return x.sin()
        y = checkpoint(body, x, use_reentrant=False)
        return y + 1, acc, HOLDER.value

    make = fresh(x3, list)
    expected = state(outer(*make()))
    cdynamo.reset()
    compiled = cdynamo.compile(outer, backend=CountingBackend())
    for _ in range(2):
        assert_same(state(compiled(*make())), expected)
        assert cdynamo._C.live_counts()["values"] == 0
    ex = cdynamo.explain(outer)(*make())
    assert ex.unmodified_frames == []
    assert ex.graph_break_count == 1
    assert "side effect inside the body" in ex.break_reasons[0].reason


# ============================================================ what cannot be undone


def gen_with_finally(log):
    try:
        yield 1
        yield 2
    finally:
        log.append("finally")


def test_generator_closed_inside_the_call_keeps_the_frame_unmodified():
    # dropping a started generator suspended in a try block runs its finally inside the
    # failed call: not undoable, so the frame runs unmodified (as before), recorded at the
    # frame's own line of the call site (not the line inside the callee)
    def inner(holder):
        holder.pop()
        torch._dynamo.graph_break()

    def outer(x, log):
        holder = [gen_with_finally(log)]
        next(holder[0])
        inner(holder)
        return x + 1

    log = []
    expected = outer(x3(), log)
    assert log == ["finally"]
    cdynamo.reset()
    compiled = cdynamo.compile(outer, backend=CountingBackend())
    for _ in range(2):
        log = []
        assert_same(compiled(x3(), log), expected)
        assert log == ["finally"]
    ex = cdynamo.explain(outer)(x3(), [])
    [rec] = [b for b in ex.unmodified_frames if b.qualname.endswith("outer")]
    assert rec.filename == outer.__code__.co_filename
    assert rec.lineno == outer.__code__.co_firstlineno + 3   # inner(holder)
    assert "graph_break" in rec.reason


def test_unmodified_record_names_the_frame_line_not_the_inlined_one():
    # a break inside an inlined call made inside an except block: the frame runs unmodified
    # (CDB0020); the record is the frame's, at its line of the call
    def inner(x):
        torch._dynamo.graph_break()
        return x

    def outer(x):
        try:
            raise ValueError
        except ValueError:
            y = inner(x)
        return y + 1

    ex = cdynamo.explain(outer)(x3())
    [rec] = [b for b in ex.unmodified_frames if b.qualname.endswith("outer")]
    assert rec.code == "CDB0020"
    assert rec.filename == outer.__code__.co_filename
    assert rec.lineno == outer.__code__.co_firstlineno + 4


def test_unmodified_reason_is_what_failed_after_the_break():
    # a break whose code cannot be generated (a closure over a variable its nested function
    # reassigns): the frame's record gives that reason, not the break's
    def outer(x):
        n = 0

        def bump(x):
            nonlocal n
            n += 1
            torch._dynamo.graph_break()
            return x * 2
        x = x + 1
        y = bump(x)
        return y + n

    expected = outer(x3())
    cdynamo.reset()
    assert_same(cdynamo.compile(outer, backend=CountingBackend())(x3()), expected)
    ex = cdynamo.explain(outer)(x3())
    [rec] = [b for b in ex.unmodified_frames if b.qualname.endswith("outer")]
    assert "closure over variable n" in rec.reason
    assert rec.lineno == outer.__code__.co_firstlineno + 9


# ============================================================ part 2: a ModelOutput of the frame


def model_output():
    from transformers.modeling_outputs import BaseModelOutputWithPast
    return BaseModelOutputWithPast


def x_and_output():
    x = x3()
    return x, model_output()(last_hidden_state=x * 2)


def test_modeloutput_setitem_after_break_then_to_tuple():
    # the reproducer (gpt2 with return_dict=False and output_hidden_states): the ModelOutput
    # reaches the resume function, gets an item, and is converted: 2 graphs, 1 break, as
    # torch._dynamo (was 8 breaks and an unmodified resume function of ModelOutput.to_tuple)
    def f(x):
        o = model_output()(last_hidden_state=x * 2)
        torch._dynamo.graph_break()
        o["hidden_states"] = (x + 1,)
        return o.to_tuple()

    check(f, fresh(x3), graphs=2, breaks=1)


def test_modeloutput_of_the_frame_read_after_an_item_store():
    # keys/values/items, iteration, len, in, truth, get, o[i], o[k], the types of its views
    # and iterators: one graph, as torch._dynamo
    def f(x, o):
        o["hidden_states"] = (x + 1,)
        return (list(o.keys()), list(o.values()), list(o.items()), len(o), bool(o),
                "hidden_states" in o, "attentions" in o, [k for k in o], o.get("hidden_states"),
                o.get("nope", 3), type(o.keys()).__name__, type(o.items()).__name__,
                type(iter(o)).__name__, type(iter(o.values())).__name__, o.hidden_states,
                o[0], o[1], o["last_hidden_state"], dict(o), o.to_tuple())

    # (torch._dynamo reports type(o.keys()) as dict_keys)
    check(f, lambda: (reset_globals(),) and x_and_output(), graphs=1, breaks=0,
          dynamo_right=False)


def test_modeloutput_view_live_across_a_break():
    # o.keys() taken before the break is the object's own view after it: it sees the item
    # stored by the resume function
    def f(x, o):
        ks = o.keys()
        o["hidden_states"] = (x,)
        torch._dynamo.graph_break()
        o["attentions"] = (x * 2,)
        return list(ks), len(ks), list(o.items())

    # (torch._dynamo's view misses the item stored after the break)
    check(f, lambda: (reset_globals(),) and x_and_output(), graphs=1, breaks=1,
          dynamo_right=False)


def test_modeloutput_items_view_reaching_a_resume_function():
    # an odict_items view of a ModelOutput handed to a resume function is iterated there
    def f(x, o):
        its = o.items()
        torch._dynamo.graph_break()
        return [(k, v * 2 if isinstance(v, torch.Tensor) else v) for k, v in its]

    make = lambda: (reset_globals(),) and x_and_output()   # noqa: E731
    expected = state(f(*make()))
    cdynamo.reset()
    cd = CountingBackend()
    compiled = cdynamo.compile(f, backend=cd)
    for _ in range(2):
        assert_same(state(compiled(*make())), expected)
    ex = cdynamo.explain(f)(*make())
    assert ex.graph_break_count == 1 and ex.unmodified_frames == []
    assert [len(o) for o in ex.ops_per_graph] == [1]   # the loop's multiply, in the resume


def test_modeloutput_field_setattr_keeps_item_in_step():
    # ModelOutput.__setattr__ of a field that is not None also stores the item
    def f(x, o):
        o.hidden_states = (x,)
        o.attentions = None
        return o.to_tuple(), list(o.keys()), o.hidden_states is o["hidden_states"]

    check(f, lambda: (reset_globals(),) and x_and_output(), graphs=0, breaks=0)


def test_modeloutput_item_and_attribute_stay_one_object():
    # replayed as two slot calls, the stored tuple is one object (as in eager), so the next
    # frame still finds its items to be its fields
    def f(x, o):
        o.__setitem__("hidden_states", (x,))
        ks = o.keys()
        torch._dynamo.graph_break()
        return [k for k in ks], o.hidden_states is o["hidden_states"], o.to_tuple()

    # the resume function traces no op, so it runs as it is (not compiled, as torch._dynamo
    # skips it), and its list comprehension is then a frame of its own: its breaks count too
    ex = check(f, lambda: (reset_globals(),) and x_and_output(), graphs=0)
    assert ex.unmodified_frames == []


def test_modeloutput_of_the_frame_stored_in_a_failed_inlining():
    # parts 1 and 2 together: the mirror of its items is put back by the rollback
    def inner(o, x):
        o["hidden_states"] = (x * 3,)
        torch._dynamo.graph_break()
        return x * 2

    def f(x, o):
        x = x + 1
        t0 = o.to_tuple()
        y = inner(o, x)
        return y, t0, o.to_tuple(), list(o.keys())

    check(f, lambda: (reset_globals(),) and x_and_output(), graphs=3, breaks=2)


class OrderedSub(OrderedDict):
    pass


class DictSub(dict):
    pass


def test_dict_subclass_item_stored_by_slot_then_read_is_not_stale():
    # dict.get on a dict subclass of the frame after its items were stored through a slot
    # function read the real (stale) entry: None instead of the tensor
    def f(x, d):
        OrderedDict.__setitem__(d, "k", x + 1)
        return dict.get(d, "k")

    def g(x, d):
        dict.__setitem__(d, "k", x + 1)
        return dict.get(d, "k"), d["k"]

    for fn, cls in ((f, OrderedSub), (g, DictSub)):
        make = fresh(x3, lambda: cls(a=1))   # noqa: B023
        expected = state(fn(*make()))
        cdynamo.reset()
        compiled = cdynamo.compile(fn, backend=CountingBackend())
        for _ in range(2):
            assert_same(state(compiled(*make())), expected)
