"""User subclasses of list, set and frozenset made inside compiled code, and
collections.deque (issue 24): their builtin methods and operators act on the items the
trace keeps for them, overrides and super() calls into the builtin are inlined, and objects
that outlive the trace are rebuilt with their type, attributes and items. Results against
eager (type included), graph and op counts against torch._dynamo, no graph break."""
import collections

import pytest
import torch

import cdynamo
from conftest import requires_engine
from helpers import CountingBackend, compare_at_least

pytestmark = [requires_engine, pytest.mark.usefixtures("no_graph_break")]


class TensorList(list):
    def total(self):
        return sum(self)


class DoublingList(list):
    def append(self, x):
        super().append(x * 2)


class ShiftSet(set):
    def add(self, item):
        return super().add(item + 1)


class Frozen(frozenset):
    pass


def same_ops(fn, *args):
    """Eager's results; graphs <= and ops >= torch._dynamo's (compare_at_least)."""
    return compare_at_least(fn, *args)[0]


def list_methods(x):
    l = TensorList([x, x + 1])
    l.append(x * 2)
    l.extend([x])
    l.insert(0, x - 1)
    return l.total(), len(l), isinstance(l, TensorList), l[0], l[-1]


def list_super_append(x):
    l = DoublingList()
    l.append(x)
    l.append(x + 1)
    return l[0] + l[1], len(l)


def list_returned(x):
    l = TensorList([x])
    l.append(x * 3)
    l.tag = "kept"
    return l


def list_operators(x):
    l = TensorList([1, 2])
    m = l + [3]
    l += [4]
    return x + len(m) + len(l), type(m) is list, type(l) is TensorList, l == [1, 2, 4], 2 in l


def list_iteration(x):
    l = TensorList(range(4))
    s = 0
    for i in l:
        s += i
    return x + s, list(l), [i * 2 for i in l], tuple(l), sorted(l, reverse=True)


def set_methods(x):
    s = ShiftSet([1, 2])
    s.add(3)
    return x + len(s), s == {1, 2, 4}, 4 in s, sorted(s), isinstance(s, set)


def set_operators(x):
    s = ShiftSet([1, 2])
    t = s | {5}
    s |= {7}
    d = s - {1}
    return (x + len(t), type(t) is set, sorted(s & {1}), sorted(s), type(s) is ShiftSet,
            sorted(d), s.issubset({1, 2, 7, 9}), s.union([8]) == {1, 2, 7, 8}, s < {1, 2, 7, 0})


def set_returned(x):
    s = ShiftSet()
    s.add(1)
    s.update([4, 5])
    return s, x + 1


def frozenset_subclass(x):
    f = Frozen([1, 2, 3])
    return x + len(f), 2 in f, f == frozenset({1, 2, 3}), f | {4} == {1, 2, 3, 4}, f


def dunders_called_directly(x):
    s = ShiftSet([1, 2])
    l = TensorList([1])
    return (x + s.__len__(), set.__or__(s, {3}), ShiftSet.__contains__(s, 2),
            l.__contains__(1), list.__len__(l), s.__eq__({1, 2}), {1}.__sub__(1))


@pytest.mark.parametrize("fn", [list_methods, list_super_append, list_returned, list_operators,
                                list_iteration, set_methods, set_operators, set_returned,
                                frozenset_subclass, dunders_called_directly],
                         ids=lambda f: f.__name__)
def test_builtin_subclass_in_trace(fn):
    counter = same_ops(fn, torch.randn(3))
    assert counter.frame_count == 1


def test_rebuilt_subclass_keeps_attributes():
    out = cdynamo.compile(list_returned, backend=CountingBackend())(torch.ones(2))
    assert type(out) is TensorList and out.tag == "kept" and len(out) == 2


def deque_methods(x):
    d = collections.deque([1, 2, 3], maxlen=4)
    d.append(4)
    d.append(5)
    d.appendleft(0)
    d.rotate(2)
    d.extendleft([7, 8])
    return x + sum(d), list(d), d.maxlen, len(d), d[0], d[-1], 3 in d


def deque_returned(x):
    d = collections.deque(maxlen=2)
    for i in range(3):
        d.append((x + i).sum())   # 0-d tensors: the deques compare item by item
    return d


def deque_operators(x):
    d = collections.deque([1, 2])
    e = d + collections.deque([3])
    d += [4]
    d[0] = 9
    del d[1]
    return (x + 1, list(d), list(e), d == collections.deque([9]), d.copy() == d,
            d.popleft(), bool(d))


def sliding_window(x):
    d = collections.deque()
    for i in range(4):
        d.append(x * i)
        if len(d) > 2:
            d.popleft()
    return sum(d), isinstance(d, collections.deque)


@pytest.mark.parametrize("fn", [deque_methods, deque_returned, deque_operators, sliding_window],
                         ids=lambda f: f.__name__)
def test_deque_in_trace(fn):
    counter = same_ops(fn, torch.randn(3))
    assert counter.frame_count == 1


def test_deque_result_keeps_maxlen():
    out = cdynamo.compile(deque_returned, backend=CountingBackend())(torch.zeros(2))
    assert type(out) is collections.deque and out.maxlen == 2
    assert [t.item() for t in out] == [2.0, 4.0]


def test_input_deque_read_mutated_and_guarded():
    def fn(x, d):
        y = d[0] + x
        d.append(y)
        return y, len(d)

    counter = CountingBackend()
    cdynamo.reset()
    compiled = cdynamo.compile(fn, backend=counter)
    eager_d = collections.deque([torch.ones(2), torch.zeros(2)], maxlen=3)
    d = collections.deque([torch.ones(2), torch.zeros(2)], maxlen=3)
    for _ in range(3):   # the third call drops the oldest item (maxlen)
        expected = fn(torch.ones(2), eager_d)
        out = compiled(torch.ones(2), d)
        assert torch.equal(out[0], expected[0]) and out[1] == expected[1]
        assert len(d) == len(eager_d) and all(torch.equal(a, b) for a, b in zip(d, eager_d))
    # lengths 2, 3, 3: the length guard recompiled once, the last call hit the cache
    assert counter.frame_count == 2


class SetSub(set):
    pass


def set_keys_coerced(x):
    # set.discard / remove / `in` look a set key up as the frozenset of its items (CPython),
    # never a TypeError
    s = {frozenset("ab"), 1}
    s.discard(set("ab"))
    n = len(s)
    s.add(frozenset("cd"))
    found = (set("cd") in s, SetSub("cd") in s)
    try:
        s.remove(set("zz"))
    except KeyError:
        n += 10
    return x + n, found


def test_set_keys_coerced_to_frozenset():
    counter = compare_at_least(set_keys_coerced, torch.randn(2))[0]
    assert counter.frame_count == 1


# ---- list / tuple subclasses passed in: builtin slots called on them directly ----

class ContainsList(list):
    def __contains__(self, x):
        return super().__contains__(x)


class ContainsTuple(tuple):
    def __contains__(self, x):
        return super().__contains__(x)


class DoublingGetList(list):
    def __getitem__(self, i):
        return super().__getitem__(i) * 2

    def __len__(self):
        return super().__len__() + 1


class PlainList(list):
    pass


def _twice(fn, make, changed):
    """fn compiled (fullgraph) on make() twice, then on changed(): eager's results each time,
    the last one after a recompile (the items are guarded where they were read)."""
    counter = CountingBackend()
    compiled = cdynamo.compile(fn, backend=counter, fullgraph=True)
    for mk in (make, make, changed):
        out = compiled(*mk())
        exp = fn(*mk())
        assert repr(out) == repr(exp)
    return counter


def test_super_contains_of_list_and_tuple_subclass_inputs():
    """super().__contains__(x) of a list / tuple subclass passed in (test_functions' user
    list/tuple subclasses): the base's items, guarded."""
    def fn(x, l, t):
        return x + 1, 1 in l, 5 in l, 3 in t, 9 in t

    x = torch.ones(2)
    c = _twice(fn, lambda: (x, ContainsList([1, 2]), ContainsTuple((3, 4))),
               lambda: (x, ContainsList([5]), ContainsTuple((9,))))
    assert c.frame_count == 2


def test_builtin_slots_on_overriding_list_subclass_input():
    """list.__getitem__ / __len__ called by overrides read the list's own items (a copy
    through ___seq_items: the overrides do not run in the guards)."""
    def fn(x, l):
        return x + l[0], len(l), list.__len__(l), l.count(1), l.index(2)

    x = torch.ones(2)
    c = _twice(fn, lambda: (x, DoublingGetList([1, 2])), lambda: (x, DoublingGetList([2, 1, 1])))
    assert c.frame_count == 2


def test_store_into_list_subclass_input_is_read_back():
    """l[0] = v and del l[i] on a list subclass passed in: later reads in the trace see the
    store (the items of the mirror), and the object is changed as eager changes it."""
    def fn(x, l):
        a = 5 in l
        l.append(5)
        l[0] = 9
        del l[1]
        return x + 1, a, 5 in l, len(l), l[0], [y for y in l]

    x = torch.ones(2)
    counter = CountingBackend()
    compiled = cdynamo.compile(fn, backend=counter, fullgraph=True)
    for _ in range(2):
        la, lb = PlainList([1, 2]), PlainList([1, 2])
        assert repr(compiled(x, la)) == repr(fn(x, lb))
        assert la == lb == [9, 5] and type(la) is PlainList
    assert counter.frame_count == 1


class RaisingGetList(list):
    """test_functions' test_udf_list: the override must never run (not in a guard either)."""

    def __contains__(self, val):
        self.checked = True
        return super().__contains__(val)

    def __getitem__(self, idx):
        raise RuntimeError("Should not be called")

    def len_times_2(self):
        return len(self) * 2


def test_mutating_a_list_subclass_input_whose_getitem_raises():
    def fn(x, lst):
        x = torch.cos(x) if 3 in lst else torch.sin(x)
        lst.append(4)
        return x * lst.len_times_2()

    x = torch.randn(4)
    counter = CountingBackend()
    compiled = cdynamo.compile(fn, backend=counter, fullgraph=True)
    for _ in range(2):
        ref, res = RaisingGetList([1, 2, 3]), RaisingGetList([1, 2, 3])
        assert torch.equal(compiled(x, res), fn(x, ref))
        assert list.__iter__(res) and list(list.__iter__(res)) == [1, 2, 3, 4] == list(list.__iter__(ref))
        assert res.checked is True and type(res) is RaisingGetList
    assert counter.frame_count == 1
