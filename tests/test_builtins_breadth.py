"""Builtins and standard-library helpers that Hugging Face transformers code calls (issue 7):
str()/repr() of classes, functions and objects, callable(), dict.get on a dict subclass
instance held in a global (super().get), os.environ reads, inspect.signature, and iteration
of a collections.abc.Sequence subclass.

Each program runs eagerly and under cdynamo (twice: the second call hits the cache); results
must equal eager's, and graphs / captured ops are compared with torch._dynamo's on the same
function. Guards are checked by changing what the trace read (a registry entry, an
environment variable) between calls: the result must follow eager's and the code recompile."""
import collections.abc
import copy
import enum
import inspect
import os

import pytest
import torch

import cdynamo
from helpers import CountingBackend, assert_same, run_torch_dynamo, check_against_eager


X = torch.randn(4)


def check(fn, *args, dynamo="same", calls=2):
    """fn eagerly, under cdynamo (calls times) and torch._dynamo: results equal eager's, and
    graphs/ops equal torch._dynamo's ("same") or no worse ("better": fewer or as many graphs,
    at least as many ops). Returns cdynamo's counting backend."""
    counter = check_against_eager(fn, *args, calls=calls)
    _, dyn = run_torch_dynamo(fn, *args)
    if dynamo == "same":
        assert (counter.frame_count, counter.op_count) == (dyn.frame_count, dyn.op_count), (
            f"cdynamo {counter.frame_count}/{counter.op_count}, "
            f"torch._dynamo {dyn.frame_count}/{dyn.op_count}")
    else:
        assert counter.frame_count <= dyn.frame_count or dyn.frame_count == 0
        assert counter.op_count >= dyn.op_count
    return counter


def explain(fn, *args):
    """(graphs, breaks, frames run unmodified) of cdynamo.explain(fn)(*args)."""
    cdynamo.reset()
    e = cdynamo.explain(fn)(*args)
    return e.graph_count, e.graph_break_count, e.counters.get("unmodified", 0)


# ================================================================ str() / repr()


class Color(enum.Enum):
    RED = 1


class Block(torch.nn.Module):
    def forward(self, x):
        return x * 2


def helper_fn(a):
    return a


def test_str_of_classes_functions_dtypes():
    def f(x):
        s = str(type(x)) + str(x.dtype) + str(x.device) + repr(Block) + str(Color.RED)
        s += str(helper_fn) + repr(len) + str(torch)
        n = len(s) if s.startswith("<class 'torch.") else -1
        return x + n
    check(f, X)
    assert explain(f, X) == (1, 0, 0)


def test_str_of_class_from_module_attribute():
    m = Block()

    def f(x):
        name = str(m.__class__)
        return m(x) + len(name) if name.endswith("Block'>") else x
    check(f, X)


class WithStr:
    def __init__(self, n):
        self.n = n

    def __str__(self):
        return f"WithStr({self.n})"


class WithRepr:
    def __repr__(self):
        return "R"


def test_str_inlines_python_dunder():
    w = WithStr(3)

    def f(x):
        return x + len(str(w)) + len(str(WithRepr())) + len(repr(WithRepr()))
    check(f, X)
    assert explain(f, X) == (1, 0, 0)


def test_str_guard_follows_attribute():
    w = WithStr(3)
    counter = CountingBackend()
    cdynamo.reset()
    g = cdynamo.compile(lambda x: x + len(str(w)), backend=counter)
    assert_same(g(X), X + 10)
    w.n = 1234   # str(w) is longer now: the attribute is guarded
    assert_same(g(X), X + 13)
    assert counter.frame_count == 2


def test_str_of_default_repr_and_tensor_is_a_break():
    class Plain:
        pass
    p = Plain()

    def f(x):
        return x + len(str(p)) + len(str(x))
    expected = f(X)
    cdynamo.reset()
    assert_same(cdynamo.compile(f, backend=CountingBackend())(X), expected)
    graphs, breaks, unmodified = explain(f, X)
    assert breaks >= 1 and unmodified == 0


# ================================================================ callable()


class CallMe:
    def __call__(self, x):
        return x + 1


def test_callable():
    m, c = Block(), CallMe()

    def f(x, g):
        n = callable(g) + callable(x) + callable(m) + callable(Block) + callable(c)
        n += callable(lambda: 1) + callable(3) + callable("s") + callable(helper_fn)
        return x + n
    c1 = check(f, X, len)
    assert c1.frame_count == 1
    assert explain(f, X, len) == (1, 0, 0)


def test_callable_in_a_loop_keeps_the_frame():
    fns = [helper_fn, None, torch.relu]

    def f(x):
        for g in fns:
            if callable(g):
                x = g(x)
        return x
    check(f, X)
    assert explain(f, X)[1:] == (0, 0)


# ================================================================ dict subclass in a global


class Registry(dict):
    def get(self, model):
        return super().get(str(model.__class__)) or {}


REGISTRY = Registry()


def test_dict_subclass_super_get_guarded():
    m = Block()
    REGISTRY.clear()

    def f(x):
        d = REGISTRY.get(m)
        return m(x) + len(d)
    counter = CountingBackend()
    cdynamo.reset()
    g = cdynamo.compile(f, backend=counter)
    assert_same(g(X), f(X))
    assert_same(g(X), f(X))
    assert counter.frame_count == 1
    REGISTRY[str(Block)] = {"a": 1, "b": 2}   # the entry read at trace time changed
    assert_same(g(X), f(X))
    assert counter.frame_count == 2
    assert_same(g(X), f(X))
    assert counter.frame_count == 2
    assert explain(f, X) == (1, 0, 0)
    REGISTRY.clear()


# ================================================================ os.environ


def _env_fn(x):
    if os.environ.get("CDYN_BB_FLAG", "0") == "1":
        x = x + 1
    if "CDYN_BB_FLAG2" in os.environ:
        x = x * 3
    return x - len(os.getenv("CDYN_BB_NAME", "ab"))


@pytest.fixture
def clean_env():
    names = ("CDYN_BB_FLAG", "CDYN_BB_FLAG2", "CDYN_BB_NAME")
    saved = {k: os.environ.pop(k) for k in names if k in os.environ}
    yield
    for k in names:
        os.environ.pop(k, None)
    os.environ.update(saved)


def test_environ_reads_fold_like_dynamo(clean_env):
    check(_env_fn, X)
    assert explain(_env_fn, X) == (1, 0, 0)


def test_environ_change_recompiles(clean_env):
    counter = CountingBackend()
    cdynamo.reset()
    g = cdynamo.compile(_env_fn, backend=counter)
    steps = [lambda: None,
             lambda: os.environ.__setitem__("CDYN_BB_FLAG", "1"),
             lambda: os.environ.__setitem__("CDYN_BB_FLAG2", ""),
             lambda: os.environ.__setitem__("CDYN_BB_NAME", "abcdef"),
             lambda: os.environ.pop("CDYN_BB_FLAG")]
    for i, step in enumerate(steps):
        step()
        assert_same(g(X), _env_fn(X), f"step {i}")
        assert_same(g(X), _env_fn(X), f"step {i} again")
        assert counter.frame_count == i + 1   # each change misses the guard once


def test_environ_missing_key_raises_as_eager(clean_env):
    def f(x):
        return x + len(os.environ["CDYN_BB_FLAG"])
    cdynamo.reset()
    g = cdynamo.compile(f, backend=CountingBackend())
    with pytest.raises(KeyError):
        g(X)
    os.environ["CDYN_BB_FLAG"] = "abc"
    assert_same(g(X), X + 3)


def test_environ_write_is_a_break(clean_env):
    def f(x):
        os.environ["CDYN_BB_FLAG"] = "1"
        return x + len(os.environ["CDYN_BB_FLAG"])
    cdynamo.reset()
    g = cdynamo.compile(f, backend=CountingBackend())
    assert_same(g(X), X + 1)
    assert os.environ["CDYN_BB_FLAG"] == "1"
    assert explain(f, X)[1] >= 1


# ================================================================ inspect.signature


def two_args(a, b=2):
    return a


class Chunked(torch.nn.Module):
    def chunk(self, x):
        return x + 1

    def forward(self, x):
        n = len(inspect.signature(self.chunk).parameters)
        return self.chunk(x) * n


def test_signature_parameters_len():
    def f(x):
        return x + len(inspect.signature(two_args).parameters)
    check(f, X)
    assert explain(f, X) == (1, 0, 0)


def test_signature_of_bound_method():
    m = Chunked()
    check(m, X)
    assert explain(m, X) == (1, 0, 0)


# ================================================================ collections.abc.Sequence


class View(collections.abc.Sequence):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i < 0 or i >= len(self):
            raise IndexError("list index out of range")
        return i * 10


VIEW = View(3)


def test_sequence_iteration():
    def f(x):
        for c in VIEW:
            x = x + c
        names = ["a", "b", "c", "d"]
        return x, [c for _, c in zip(names, VIEW)], list(VIEW)
    check(f, X)
    assert explain(f, X) == (1, 0, 0)


def test_sequence_iteration_guarded_on_length():
    v = View(2)
    counter = CountingBackend()
    cdynamo.reset()

    def f(x):
        for c in v:
            x = x + c
        return x
    g = cdynamo.compile(f, backend=counter)
    assert_same(g(X), f(X))
    v.n = 4
    assert_same(g(X), f(X))


# ================================================================ hasattr of a property


class CacheLike:
    def __init__(self):
        self.layers = [1, 2]

    @property
    def is_compileable(self):
        return len(self.layers) > 1

    @property
    def missing(self):
        raise AttributeError("missing")

    @property
    def broken(self):
        raise ValueError("broken")


def test_hasattr_property_of_new_object():
    def f(x):
        c = CacheLike()
        return x + hasattr(c, "is_compileable") + 2 * hasattr(c, "missing") + 4 * hasattr(c, "nope")
    check(f, X)
    assert explain(f, X) == (1, 0, 0)


def test_hasattr_property_other_exception_propagates():
    def f(x):
        c = CacheLike()
        return x + hasattr(c, "broken")
    cdynamo.reset()
    with pytest.raises(ValueError, match="broken"):
        cdynamo.compile(f, backend=CountingBackend())(X)


# ================================================================ copy.deepcopy of plain objects


class Inner:
    def __init__(self):
        self.a = 1
        self.items = [1, 2]
        self.dtype = torch.float32


class Outer:
    def __init__(self, inner):
        self.inner = inner
        self.alias = inner
        self.me = self
        self.table = {"k": (1, 2)}


OUTER = Outer(Inner())


def test_deepcopy_plain_object():
    def f(x):
        q = copy.deepcopy(OUTER)
        q.inner.a = 5
        q.inner.items.append(3)
        n = q.alias.a + len(q.alias.items) + len(OUTER.inner.items) + OUTER.inner.a
        return x + n, q.me is q, q.inner is q.alias, q.inner is not OUTER.inner, q.inner.dtype
    check(f, X, dynamo="better")
    assert explain(f, X) == (1, 0, 0)


class WithHook:
    def __init__(self):
        self.a = [1]

    def __deepcopy__(self, memo):
        return "hooked"


class Slotted:
    __slots__ = ("a",)

    def __init__(self):
        self.a = 1


def test_deepcopy_objects_with_hooks_run_in_python():
    hooked, slotted = WithHook(), Slotted()

    def f(x):
        h = copy.deepcopy(hooked)
        s = copy.deepcopy(slotted)
        return x + len(h) + s.a
    expected = f(X)
    cdynamo.reset()
    assert_same(cdynamo.compile(f, backend=CountingBackend())(X), expected)
    graphs, breaks, unmodified = explain(f, X)
    assert breaks >= 1 and unmodified == 0


# ================================================================ setattr / delattr


class Plain:
    def __init__(self):
        self.a = 1
        self.b = 2


class LogsDelete:
    def __delattr__(self, name):
        object.__setattr__(self, "deleted", name)


def test_setattr_delattr_of_new_objects():
    def f(x):
        p = Plain()
        delattr(p, "a")
        setattr(p, "c", 3)
        d = LogsDelete()
        delattr(d, "zz")
        return x + p.b + p.c + hasattr(p, "a") + len(d.deleted)
    check(f, X, dynamo="better")
    assert explain(f, X) == (1, 0, 0)


def test_setattr_of_input_object_is_replayed():
    def f(x, p):
        setattr(p, "c", 3)
        return x + p.c
    p = Plain()
    cdynamo.reset()
    assert_same(cdynamo.compile(f, backend=CountingBackend())(X, p), X + 3)
    assert p.c == 3


def test_getattr_default_of_property_of_new_object():
    def f(x):
        c = CacheLike()
        a = getattr(c, "is_compileable", False)
        b = getattr(c, "missing", 7)
        return x + a + b
    check(f, X)
    assert explain(f, X) == (1, 0, 0)


def test_str_of_function_guarded_by_code_is_not_baked():
    def make():
        def inner(a):
            return a
        return inner

    def f(x, fn):
        return x + len(str(fn).split(" at ")[0]), str(fn)
    cdynamo.reset()
    g = cdynamo.compile(f, backend=CountingBackend())
    for _ in range(3):
        fn = make()   # a new function object (same code) each call
        assert_same(g(X, fn), f(X, fn))
