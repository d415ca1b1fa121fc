"""Guards reading attributes without Python code (issue 9, point 7): plain objects, classes,
nn.Module class attributes and missing names, and transformers' configs (whose Python
__getattribute__ is recognised as a plain delegation) are answered from version-tagged
caches (type, class and dict tags). Each test changes what such a cache must notice, after
the cache is warm, and checks the result against eager and the compile count."""
import pytest
import torch
import torch.nn as nn

import cdynamo
from conftest import requires_engine
from helpers import CountingBackend

pytestmark = requires_engine


def _compile(fn):
    counter = CountingBackend()
    return cdynamo.compile(fn, backend=counter), counter


def _warm(c, *args):
    for _ in range(3):
        c(*args)


class Plain:
    scale = 2.0


def test_plain_object_instance_and_class_attribute_changes_are_seen():
    o = Plain()
    x = torch.randn(3)

    def f(x):
        return x * o.scale

    c, counter = _compile(f)
    _warm(c, x)
    Plain.scale = 3.0                   # class attribute: the type's version tag
    try:
        assert torch.equal(c(x), x * 3.0)
        o.scale = 5.0                   # now in the instance dict (shadows the class)
        assert torch.equal(c(x), x * 5.0)
        del o.scale
        assert torch.equal(c(x), x * 3.0)
    finally:
        Plain.scale = 2.0
    assert torch.equal(c(x), x * 2.0)
    # the float read through the closure becomes a dynamic input after its first change
    # (torch._dynamo: 3 graphs, its guards on where the attribute lives recompile once more)
    assert counter.frame_count >= 2


def test_hasattr_absent_then_set_is_seen():
    o = Plain()
    x = torch.randn(3)

    def f(x):
        if hasattr(o, "extra"):
            return x + 1
        return x - 1

    c, counter = _compile(f)
    _warm(c, x)
    o.extra = 1
    assert torch.equal(c(x), x + 1)
    del o.extra
    assert torch.equal(c(x), x - 1)
    Plain.extra = 1                     # on the class this time
    try:
        assert torch.equal(c(x), x + 1)
    finally:
        del Plain.extra
    assert torch.equal(c(x), x - 1)


def test_changed_class_of_an_object_is_seen():
    class A:
        k = 1

    class B:
        k = 2

    o = A()
    x = torch.randn(3)

    def f(x):
        return x * o.k + (10 if o.__class__ is A else 20)

    c, counter = _compile(f)
    _warm(c, x)
    o.__class__ = B
    assert torch.equal(c(x), x * 2 + 20)


def test_class_attribute_read_through_the_class_sees_base_class_changes():
    class Base:
        def act(self, x):
            return x + 1

    class Child(Base):
        pass

    o = Child()
    x = torch.randn(3)

    def f(x):
        return type(o).act(o, x)

    c, counter = _compile(f)
    _warm(c, x)
    assert torch.equal(c(x), x + 1)
    Base.act = lambda self, x: x * 7        # a base class's dict: Child's version tag
    assert torch.equal(c(x), x * 7)


class Flagged(nn.Module):
    checkpointing = False                   # a class attribute read through the module

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        if self.checkpointing:
            y = y * 2
        if hasattr(self, "extra"):
            y = y + self.extra
        return y


@pytest.mark.parametrize("change", ["class", "instance", "buffer", "module_attr"])
def test_module_class_attribute_and_missing_name_changes_are_seen(change):
    torch.manual_seed(0)
    m, x = Flagged(), torch.randn(2, 3)
    c, counter = _compile(m)
    _warm(c, x)
    if change == "class":
        Flagged.checkpointing = True
    elif change == "instance":
        m.checkpointing = True
    elif change == "buffer":
        m.register_buffer("extra", torch.ones(3))
    else:
        m.extra = 3.0
    try:
        assert torch.equal(c(x), m(x))
    finally:
        Flagged.checkpointing = False
    assert counter.frame_count == 2


transformers = pytest.importorskip("transformers")


def _config():
    from transformers import GPT2Config
    return GPT2Config(n_layer=2, n_embd=8, n_head=2, vocab_size=16, n_positions=8)


def test_config_attribute_set_after_compile_is_seen():
    cfg = _config()
    x = torch.randn(3)

    def f(x):
        if cfg.use_cache:
            return x * cfg.hidden_size      # attribute_map: hidden_size -> n_embd
        return x - 1

    c, counter = _compile(f)
    _warm(c, x)
    assert torch.equal(c(x), x * 8)
    cfg.n_embd = 16
    assert torch.equal(c(x), x * 16)
    cfg.use_cache = False
    assert torch.equal(c(x), x - 1)


def test_config_missing_attribute_then_set_is_seen():
    cfg = _config()
    x = torch.randn(3)

    def f(x):
        return x + 1 if getattr(cfg, "my_flag", None) else x - 1

    c, counter = _compile(f)
    _warm(c, x)
    cfg.my_flag = True
    assert torch.equal(c(x), x + 1)


def test_config_attribute_map_changed_in_place_is_seen():
    from transformers import GPT2Config

    class MyConfig(GPT2Config):
        attribute_map = dict(GPT2Config.attribute_map)

    cfg = MyConfig(n_layer=2, n_embd=8, n_head=2, vocab_size=16, n_positions=8)
    x = torch.randn(3)

    def f(x):
        return x * cfg.width if hasattr(cfg, "width") else x - 1

    c, counter = _compile(f)
    _warm(c, x)
    assert torch.equal(c(x), x - 1)
    MyConfig.attribute_map["width"] = "n_head"    # the dict changes, not the class
    assert torch.equal(c(x), x * 2)
    MyConfig.attribute_map["width"] = "n_embd"
    assert torch.equal(c(x), x * 8)


class Forwarding:
    def __init__(self):
        self._flag = True

    @property
    def flag(self):             # `return self._flag`: read as the read of _flag
        return self._flag


def test_forwarding_property_sees_its_attribute_and_a_replaced_property():
    o = Forwarding()
    x = torch.randn(3)

    def f(x):
        return x + 1 if o.flag else x - 1

    c, counter = _compile(f)
    _warm(c, x)
    o._flag = False
    assert torch.equal(c(x), x - 1)
    o._flag = True
    assert torch.equal(c(x), x + 1)
    Forwarding.flag = property(lambda self: not self._flag)   # no longer forwarding
    try:
        assert torch.equal(c(x), x - 1)
    finally:
        Forwarding.flag = property(lambda self: self._flag)


def test_function_defaults_and_closure_cells_are_read_each_call():
    x = torch.randn(3)

    def make(k):
        def g(x, s=2):
            return x * s + k
        return g

    g = make(1)

    def f(x):
        return g(x)

    c, counter = _compile(f)
    _warm(c, x)
    g.__defaults__ = (5,)
    assert torch.equal(c(x), x * 5 + 1)
    g.__closure__[0].cell_contents = 4
    assert torch.equal(c(x), x * 5 + 4)


def test_class_mro_change_is_seen():
    class A:
        def act(self, x):
            return x + 1

    class B:
        def act(self, x):
            return x * 3

    class C(A):
        pass

    o = C()
    x = torch.randn(3)

    def f(x):
        return o.act(x)

    c, counter = _compile(f)
    _warm(c, x)
    C.__bases__ = (B,)
    assert torch.equal(c(x), x * 3)
