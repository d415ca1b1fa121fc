"""Config objects as Hugging Face ships them (issue 7): strict dataclasses whose __setattr__
validates each assignment against the field's annotation (huggingface_hub's ``@strict``,
transformers' PreTrainedConfig), ``object.__getattribute__(obj, "__dict__")`` in a custom
``__getattribute__``, ``obj.__dict__`` of objects made while tracing (a deep copy of a
config), ``typing.get_origin`` / ``get_args`` on annotations.

Each program runs eagerly, under torch.compile and twice under cdynamo.compile (``check``):
results equal eager's, graph and FX call-node counts equal torch._dynamo's, no frame runs
unmodified, the second call is a cache hit.
"""
import collections.abc
import copy
import dataclasses
import typing
from typing import Annotated, Any, Literal, Optional, Union

import pytest
import torch
import torch._dynamo

import cdynamo


CALL_OPS = ("call_function", "call_method", "call_module")


class Counting:
    """A backend recording the FX call nodes of each graph."""

    def __init__(self):
        self.ops = []

    def __call__(self, gm, example_inputs):
        self.ops.append(sum(1 for n in gm.graph.nodes if n.op in CALL_OPS))
        return gm.forward


def same(a, b, path="result"):
    """a equals b: tensors exactly, containers and plain objects (their __dict__) recursively."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), f"{path}: {b!r} != {a!r}"
        return
    assert type(a) is type(b), f"{path}: {type(b).__name__} != {type(a).__name__}"
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b), f"{path}: length {len(b)} != {len(a)}"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{path}: keys {list(b)} != {list(a)}"
        for k in a:
            same(a[k], b[k], f"{path}[{k!r}]")
    elif hasattr(a, "__dict__") and not isinstance(a, type) and not callable(a):
        same(dict(vars(a)), dict(vars(b)), f"{path}.__dict__")
    else:
        assert a == b, f"{path}: {b!r} != {a!r}"


def check(fn, *args, graphs=None, ops=None):
    """fn eagerly, under torch.compile and twice under cdynamo.compile (fresh deep copies of
    args each time): results equal eager's, (graphs, ops) equal torch._dynamo's (or the
    graphs / ops given, where torch._dynamo itself fails: no graph, or a RecursionError
    inlining a closure over object.__setattr__), nothing runs unmodified, the 2nd call is a
    cache hit. Returns cdynamo's Counting."""
    expected = fn(*copy.deepcopy(args))
    torch._dynamo.reset()
    dyn = Counting()
    if graphs is None:
        same(expected, torch.compile(fn, backend=dyn)(*copy.deepcopy(args)), "torch._dynamo")
    torch._dynamo.reset()
    cdynamo.reset()
    cdynamo._C.reset_counters()
    cdy = Counting()
    compiled = cdynamo.compile(fn, backend=cdy)
    same(expected, compiled(*copy.deepcopy(args)), "cdynamo (1st call)")
    first, compiles = list(cdy.ops), cdynamo._C.counters()["compiles"]
    same(expected, compiled(*copy.deepcopy(args)), "cdynamo (2nd call)")
    assert cdy.ops == first and cdynamo._C.counters()["compiles"] == compiles, \
        "the 2nd call was not a cache hit"
    assert cdynamo._C.counters()["unmodified"] == 0, f"a frame ran unmodified: {cdynamo._C.counters()}"
    want = (len(dyn.ops) if graphs is None else graphs, sum(dyn.ops) if ops is None else ops)
    assert (len(first), sum(first)) == want, \
        f"cdynamo graphs/ops {first} vs torch._dynamo {dyn.ops}"
    return cdy


@pytest.fixture(autouse=True)
def _clean():
    torch._dynamo.reset()
    cdynamo.reset()
    yield
    torch._dynamo.reset()
    cdynamo.reset()


X = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))


# ================================================================ a strict dataclass, as huggingface_hub's


def _type_ok(value, expected):
    """A validator in the style of huggingface_hub.dataclasses.type_validator."""
    origin, args = typing.get_origin(expected), typing.get_args(expected)
    if expected is Any:
        return True
    if origin is Union or origin is typing.get_origin(int | None):
        return any(_type_ok(value, a) for a in args)
    if origin is Literal:
        return value in args
    if origin is list:
        return isinstance(value, list) and all(_type_ok(v, args[0]) for v in value)
    if origin is tuple:
        return isinstance(value, tuple)
    if origin is Annotated:
        return _type_ok(value, args[0])
    if isinstance(expected, type):
        return isinstance(value, expected) and not (expected is int and isinstance(value, bool))
    raise TypeError(f"unsupported annotation {expected!r}")


def strict(cls):
    """Make dataclass cls validate every attribute assignment against its fields' types (a
    __setattr__ closure over the class's own, as huggingface_hub.dataclasses.strict)."""
    cls.__validators__ = {f.name: [(lambda v, t=f.type, n=f.name: _check(n, v, t))]
                          for f in dataclasses.fields(cls)}
    original_setattr = cls.__setattr__

    def __strict_setattr__(self, name, value):
        for validator in self.__validators__.get(name, []):
            validator(value)
        original_setattr(self, name, value)

    cls.__setattr__ = __strict_setattr__
    return cls


def _check(name, value, expected):
    if not _type_ok(value, expected):
        raise TypeError(f"field {name!r} expected {expected}, got {type(value).__name__}")


@strict
@dataclasses.dataclass
class TinyConfig:
    hidden: int = 4
    layers: int = 2
    dec_layers: int = 3
    scale: Optional[float] = None
    act: Literal["gelu", "relu"] = "gelu"
    dims: list[int] = dataclasses.field(default_factory=lambda: [1, 2])
    tag: Annotated[str, "meta"] = "t"
    eps: float | None = 1e-5
    attribute_map = {"n_layers": "layers"}

    def __setattr__(self, key, value):
        # transformers' PreTrainedConfig.__setattr__ (what @strict's closure calls)
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        # transformers' PreTrainedConfig: aliases through attribute_map, and the instance
        # dict read with object.__getattribute__ (HeterogeneousConfigMixin)
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        spec = super().__getattribute__("__dict__").get("_spec")
        if spec is not None and key in spec:
            raise AttributeError(key)
        return super().__getattribute__(key)

    def to_dict(self):
        return copy.deepcopy(self.__dict__)

    def decoder_config(self):
        """As PreTrainedConfig.get_text_config(decoder=True) of an old flat config: a deep
        copy with the "dec_" keys renamed, through delattr/setattr (validated)."""
        c = copy.deepcopy(self)
        for key in c.to_dict():
            if key.startswith("dec_"):
                value = getattr(c, key)
                delattr(c, key)
                setattr(c, key[4:], value)
        return c


CFG = TinyConfig(hidden=4, scale=0.5)


def test_strict_config_deepcopy_and_validated_setattr():
    def f(x):
        c = CFG.decoder_config()
        c.scale = 2.0                 # validated: Optional[float]
        c.act = "relu"                # Literal
        c.dims = [3, 4]               # list[int]
        c.eps = None                  # float | None
        return x * c.layers + c.scale + c.hidden + len(c.dims) + c.n_layers

    check(f, X)


def test_strict_config_returned_after_setattr():
    def f(x):
        c = copy.deepcopy(CFG)
        c.layers = 7
        c.tag = "u"
        return x + c.layers, c

    check(f, X)


def test_strict_config_of_the_frame_read():
    def f(x, cfg):
        d = cfg.decoder_config()
        return x * d.layers * cfg.hidden

    check(f, X, TinyConfig(hidden=3))


def test_strict_config_validation_error_matches_eager():
    def f(x):
        c = copy.deepcopy(CFG)
        try:
            c.layers = "three"        # a TypeError raised by the validator
        except TypeError:
            return x - 1
        return x + 1

    check(f, X)


# ================================================================ the real huggingface_hub @strict


def test_huggingface_hub_strict_dataclass():
    hub = pytest.importorskip("huggingface_hub.dataclasses")

    @hub.strict
    @dataclasses.dataclass
    class HubConfig:
        hidden: int = 4
        scale: Optional[float] = None
        names: list[str] = dataclasses.field(default_factory=list)

    cfg = HubConfig(hidden=2)

    def f(x):
        c = copy.deepcopy(cfg)
        c.hidden = 5
        c.scale = 1.5
        c.names = ["a", "b"]
        return x * c.hidden + c.scale + len(c.names)

    # torch._dynamo raises RecursionError here: @strict's closure calls the class's original
    # __setattr__, object.__setattr__, which it resolves to the closure again
    check(f, X, graphs=1, ops=3)


# ================================================================ __dict__ of objects made in the trace


class Plain:
    def __init__(self, a):
        self.a = a
        self.b = 2


class Guarded:
    """A custom __getattribute__ reading the instance dict through object's."""

    def __init__(self, a):
        self.a = a

    def __getattribute__(self, key):
        d = object.__getattribute__(self, "__dict__")
        if key in d:
            return d[key]
        return object.__getattribute__(self, key)

    def twice(self):
        return self.a * 2


def test_newobj_dict_is_live():
    def f(x):
        o = Plain(3)
        d = o.__dict__
        d["z"] = 5                    # seen as o.z
        o.w = 1                       # seen in d
        keys = [k for k in d]
        total = sum(v for v in o.__dict__.values())
        return x * o.z + d["w"] + total + len(keys), o, sorted(d.items())

    check(f, X)


def test_newobj_dict_update_and_pop():
    def f(x):
        o = Plain(1)
        o.__dict__.update({"c": 4, "a": 10})
        n = o.__dict__.pop("b")
        return x * o.a + o.c + n + ("b" in o.__dict__), o

    check(f, X)


def test_object_getattribute_dict_of_newobj():
    def f(x):
        o = Guarded(4)
        return x * o.a + o.twice() + len(object.__getattribute__(o, "__dict__"))

    # torch._dynamo gives up on the frame (no graph)
    check(f, X, graphs=1, ops=3)


def test_object_getattribute_dict_of_copied_object():
    def f(x, g):
        o = copy.deepcopy(g)
        o.a = o.a + 1
        return x * o.a + o.twice()

    check(f, X, Guarded(2), graphs=1, ops=2)   # torch._dynamo: no graph


def test_slots_newobj_dict_is_a_break_not_wrong():
    class Slotted:
        __slots__ = ("s", "__dict__")

        def __init__(self):
            self.s = 1
            self.t = 2

    def f(x):
        o = Slotted()
        return x + len(o.__dict__), sorted(o.__dict__)

    expected = f(X)
    out = cdynamo.compile(f, backend="eager")(X)
    same(expected, out)
    reasons = [str(r) for r in cdynamo.explain(f)(X).break_reasons]
    assert any("slots" in r for r in reasons), reasons


# ================================================================ functions made per item


VALIDATORS = {name: [lambda v, t=ann: (v, t)]
              for name, ann in (("a", Optional[int]), ("b", Optional[float]), ("c", list[int]))}


def _make_closures():
    out = []
    for ann in (Optional[int], Optional[float]):
        def check_one(v):
            return v, ann
        out.append(check_one)
    return out


CLOSURES = _make_closures()


def test_lambdas_of_one_expression_keep_their_own_defaults():
    # one code object, one qualified name, different defaults: each call sees its own
    def f(x):
        r = [val(i) for i, name in enumerate("abc") for val in VALIDATORS[name]]
        return x + len(r), r

    check(f, X)


def test_closures_of_one_def_keep_their_own_cells():
    def f(x):
        return x + 1, [g(i) for i, g in enumerate(CLOSURES)]

    check(f, X)


# ================================================================ typing.get_origin / get_args


ANNOTATIONS = (int, Optional[int], int | None, Union[int, str], list[int], typing.List[int],
               dict[str, int], tuple[int, ...], Literal["a", 1], Annotated[int, "x"], Any,
               typing.Sequence[int], collections.abc.Sequence[int], typing.Generic,
               type(None), None, "fwd")


@pytest.mark.parametrize("i", range(len(ANNOTATIONS)))
def test_typing_get_origin_get_args(i):
    ann = ANNOTATIONS[i]

    def f(x):
        origin, args = typing.get_origin(ann), typing.get_args(ann)
        if origin is None:
            return x - len(args)
        if origin is Union or origin is typing.get_origin(int | None):
            return x + 10 * len(args)
        return x + len(args), origin, args

    check(f, X)


def test_typing_get_args_callable_is_a_break():
    ann = collections.abc.Callable[[int, str], float]

    def f(x):
        return x + len(typing.get_args(ann)), typing.get_args(ann)

    expected = f(X)
    same(expected, cdynamo.compile(f, backend="eager")(X))
    reasons = [str(r) for r in cdynamo.explain(f)(X).break_reasons]
    assert any("Callable" in r for r in reasons), reasons


# ================================================================ type(obj).__dict__ and vars()


class Base:
    scale = 2

    def __init__(self):
        self.a = 1
        self.b = 2


class Derived(Base):
    offset = 3

    def method(self):
        return self.a


def test_class_dict_membership_and_get():
    def f(x, p):
        t = type(p)
        n = 0
        if "__init__" in t.__dict__:
            n += 1
        if "method" in t.__dict__:
            n += 10
        if "scale" not in Derived.__dict__:
            n += 100
        s = Base.__dict__.get("scale", 0) + t.__dict__.get("missing", 5)
        return x * n + s + Derived.__dict__["offset"]

    check(f, X, Derived())


def test_class_dict_iteration():
    def f(x):
        public = [k for k in Derived.__dict__ if not k.startswith("_")]
        consts = {k: v for k, v in Base.__dict__.items() if isinstance(v, int)}
        return x + len(public) + consts["scale"], public, consts

    check(f, X)


def test_class_dict_guarded_on_keys():
    class Live:
        pass

    def f(x):
        return x + 1 if "extra" in Live.__dict__ else x - 1

    compiled = cdynamo.compile(f, backend="eager")
    assert torch.equal(compiled(X), X - 1)
    Live.extra = 1        # the class's keys change: recompiled, not the stale answer
    assert torch.equal(compiled(X), X + 1)
    del Live.extra
    assert torch.equal(compiled(X), X - 1)


def test_vars_of_objects():
    def f(x, p):
        o = Base()
        o.c = 4
        total = sum(v for v in vars(o).values()) + sum(vars(p).values())
        return x * total, sorted(vars(o)), dict(vars(p))

    check(f, X, Derived())


def test_vars_without_argument_is_not_traced():
    def f(x):
        y = x + 1
        return y * len(vars())

    expected = f(X)
    out = cdynamo.compile(f, backend="eager")(X)
    assert torch.equal(out, expected)


# ================================================================ registries and library helpers


class Registry(collections.abc.MutableMapping):
    """transformers' GeneralInterface: a class-wide mapping and a local one; get() of a name
    registered nowhere goes through Mapping.get's try/except KeyError."""

    _global_mapping = {"double": lambda t: t * 2}

    def __init__(self):
        self._local_mapping = {}

    def __getitem__(self, key):
        if key in self._local_mapping:
            return self._local_mapping[key]
        return self._global_mapping[key]

    def __setitem__(self, key, value):
        self._local_mapping.update({key: value})

    def __delitem__(self, key):
        del self._local_mapping[key]

    def __iter__(self):
        return iter({**self._global_mapping, **self._local_mapping})

    def __len__(self):
        return len(self._global_mapping.keys() | self._local_mapping.keys())

    def get_interface(self, name, default):
        return super().get(name, default)


REGISTRY = Registry()


def test_missing_dict_key_raises_in_the_trace():
    def fallback(t):
        return t - 1

    def f(x):
        a = REGISTRY.get_interface("eager", fallback)(x)      # KeyError caught by Mapping.get
        b = REGISTRY.get_interface("double", fallback)(x)
        try:
            c = {"k": 1}["missing"]
        except KeyError as e:
            c = len(e.args)
        return a + b + c

    check(f, X)


def test_missing_dict_key_uncaught_is_a_break_with_eager_error():
    def f(x):
        y = x + 1
        return y * {"a": 1}["b"]

    with pytest.raises(KeyError):
        f(X)
    with pytest.raises(KeyError):
        cdynamo.compile(f, backend="eager")(X)


def test_torch_is_tensor_inlined():
    def f(x, n):
        m = 2 + n
        if not torch.is_tensor(m) and m > 1:
            x = x * m
        return x + torch.is_tensor(x)

    check(f, X, 3)
