"""Programs torch._dynamo captures in one graph (fullgraph=True) that cdynamo broke on, from
PyTorch's Dynamo tests (harness reproducers fg_*.py): torch functions with no tensor argument
or result folded at trace time (trace rule "fold"), helpers under a skip rule that
torch._dynamo inlines or folds, user dict subclasses and mappings, grad-mode decorators."""
import pytest
import torch
import torch._dynamo

import cdynamo
from cdynamo import trace_rules as tr
from helpers import CountingBackend, _clone_args, assert_same


def fg_compare(fn, *args, calls=2):
    """fn eagerly, under torch._dynamo and under cdynamo, both with fullgraph=True: equal
    results on every call, as many graphs as torch._dynamo. Returns cdynamo's counter."""
    expected = fn(*_clone_args(args))
    dyn = CountingBackend()
    dyn_out = torch.compile(fn, backend=dyn, fullgraph=True)(*_clone_args(args))
    assert_same(dyn_out, expected, "torch._dynamo")
    torch._dynamo.reset()
    counter = CountingBackend()
    compiled = cdynamo.compile(fn, backend=counter, fullgraph=True)
    for i in range(calls):
        assert_same(compiled(*_clone_args(args)), expected, f"call {i}")
    assert counter.frame_count == dyn.frame_count, (
        f"cdynamo compiled {counter.frame_count} graphs, torch._dynamo {dyn.frame_count}")
    return counter


# ---- torch functions with no tensor argument or result: trace rule "fold" ----------------

def default_dtype(x):
    if x.dtype == torch.get_default_dtype():
        x = x + 1
    if x.dtype == torch.promote_types(torch.int32, torch.float32):
        x = x + 2
    return x


def any_autocast(x):
    if torch._C._is_any_autocast_enabled():
        return x + 1
    return x - 1


def autocast_gpu_dtype(x):
    return x.type(torch.get_autocast_gpu_dtype())


def privateuse1_name(x):
    if torch._C._get_privateuse1_backend_name() == "privateuseone":
        return x + 1
    return x - 1


def checkpoint_valid(x):
    if torch.autograd._is_checkpoint_valid():
        return x + 1
    return x - 1


def cuda_available(x):
    return x + 1 if torch.cuda.is_available() else x - 1


def tensor_like(x):
    a = torch.overrides.is_tensor_like(x)
    b = torch.overrides.is_tensor_like(4)
    c = torch.overrides.is_tensor_like([x])
    return x * 2 if a else x, b, c


def fx_tracing(x):
    if torch.fx._symbolic_trace.is_fx_tracing():
        return x - 1
    return x + 1


@pytest.mark.parametrize("fn", [default_dtype, any_autocast, autocast_gpu_dtype,
                                privateuse1_name, checkpoint_valid, cuda_available,
                                tensor_like, fx_tracing])
def test_no_tensor_call_folds_in_one_graph(fn):
    fg_compare(fn, torch.ones(3))


def test_folded_calls_are_no_graph_nodes():
    counter = fg_compare(tensor_like, torch.ones(3))
    targets = [n.target for gm in counter.graphs for n in gm.graph.nodes
               if n.op == "call_function"]
    assert torch.overrides.is_tensor_like not in targets
    assert len(targets) == 1


def test_default_dtype_fold_is_guarded():
    counter = CountingBackend()
    f = cdynamo.compile(default_dtype, backend=counter, fullgraph=True)
    x = torch.ones(3)
    assert_same(f(x), default_dtype(x))
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert_same(f(x), default_dtype(x))   # float32 input is no longer the default
    finally:
        torch.set_default_dtype(old)
    assert counter.frame_count == 2
    assert_same(f(x), default_dtype(x))
    assert counter.frame_count == 2


def test_autocast_dtype_fold_is_guarded():
    counter = CountingBackend()
    f = cdynamo.compile(autocast_gpu_dtype, backend=counter, fullgraph=True)
    x = torch.ones(3)
    assert f(x).dtype == autocast_gpu_dtype(x).dtype
    old = torch.get_autocast_dtype("cuda")
    torch.set_autocast_dtype("cuda", torch.bfloat16)
    try:
        assert f(x).dtype == torch.bfloat16
    finally:
        torch.set_autocast_dtype("cuda", old)
    assert counter.frame_count == 2


def test_pure_fold_adds_no_guard_and_raising_call_breaks():
    def f(x):
        return x.to(torch.promote_types(torch.int8, torch.uint8))

    fg_compare(f, torch.ones(3))

    def g(x):
        return x.to(torch.promote_types(torch.int8, "no dtype"))

    with pytest.raises(TypeError):
        g(torch.ones(3))
    with pytest.raises(TypeError):
        cdynamo.compile(g, backend="eager")(torch.ones(3))


def test_state_fold_inside_traced_autocast_block_is_not_folded():
    def f(x):
        with torch.autocast("cpu"):
            y = x + 1
            if torch._C._is_any_autocast_enabled():
                y = y * 2
        return y

    counter = CountingBackend()
    compiled = cdynamo.compile(f, backend=counter)
    for _ in range(3):
        assert_same(compiled(torch.ones(3)), f(torch.ones(3)))
    # a break at the call (torch._dynamo folds it: 1 graph), compiled once: no guard
    # comparing the entry state with the block's on every call
    assert counter.frame_count == 2


def test_fold_rule_values_are_checked():
    assert tr.lookup_callable(torch.get_default_dtype).rule == tr.FOLD
    assert tr.lookup_callable(torch.promote_types).value is None
    with pytest.raises(ValueError, match="fold"):
        tr.set_callable_rule("torch.get_default_dtype", tr.FOLD, "sometimes")


# ---- torch helpers under a skip rule that torch._dynamo inlines or folds --------------------

@torch.jit.script_if_tracing
def scripted_if_tracing(x, y, c=1.2):
    return torch.cos(x * y) + c


@torch.jit.script_if_tracing
def other_scripted_if_tracing(x, y, c=1.2):
    return torch.sin(x * y) - c


def calls_script_if_tracing(x, y):
    return scripted_if_tracing(x, y), scripted_if_tracing(x, y, c=2)


def test_script_if_tracing_wrapper_is_inlined():
    counter = fg_compare(calls_script_if_tracing, torch.ones(3), torch.full((3,), 2.0))
    assert counter.op_count == 6


def test_script_if_tracing_wrappers_share_code_but_not_function():
    def pick(f, x):
        return f(x, x)

    counter = CountingBackend()
    compiled = cdynamo.compile(pick, backend=counter, fullgraph=True)
    x = torch.ones(3)
    assert_same(compiled(scripted_if_tracing, x), scripted_if_tracing(x, x))
    assert_same(compiled(other_scripted_if_tracing, x), other_scripted_if_tracing(x, x))
    assert counter.frame_count == 2


# ---- dict subclasses of the frame: inherited reads go through a mirror of their items ------

class SimpleDict(dict):
    pass


class PlainOrdered(__import__("collections").OrderedDict):
    pass


class DotDict(dict):
    __getattr__ = dict.get
    __setattr__ = dict.__setitem__
    __delattr__ = dict.__delitem__


def read_all(sd, x):
    for value in sd.values():
        x = x * value
    for key in sd:
        x = x * key
    for k, v in sd.items():
        x = x * k + v
    x = x * 2 if 1 in sd else x * 3
    x = x * sd.get(2, 0) * sd.get(3, 4)
    return len(sd) * x


def mutate_then_read(sd, x):
    for value in sd.values():
        x = x * value
    sd[6] = 14
    for k, v in sd.items():
        x = x * k + v
    return x * len(sd)


def _simple():
    sd = SimpleDict()
    sd[2] = 5
    sd[4] = 10
    return sd


def test_dict_subclass_inherited_reads_one_graph():
    fg_compare(read_all, _simple(), torch.ones(4))


def test_dict_subclass_reads_guard_its_keys():
    sd = _simple()
    sd.attr = 3
    counter = CountingBackend()
    f = cdynamo.compile(lambda x: read_all(sd, x) * sd.attr, backend=counter, fullgraph=True)
    x = torch.ones(4)
    assert_same(f(x), read_all(sd, x) * 3)
    sd[6] = 15                      # a new key: recompiled, right result
    assert_same(f(x), read_all(sd, x) * 3)
    sd[6] = 16                      # a new (int, so guarded) value under a known key
    assert_same(f(x), read_all(sd, x) * 3)
    assert counter.frame_count == 3
    assert_same(f(x), read_all(sd, x) * 3)
    assert counter.frame_count == 3


def test_dict_subclass_item_store_then_reads_writes_back():
    sd1, sd2 = _simple(), _simple()
    expected = mutate_then_read(sd1, torch.ones(4))
    dyn = CountingBackend()
    torch.compile(mutate_then_read, backend=dyn, fullgraph=True)(_simple(), torch.ones(4))
    counter = CountingBackend()
    out = cdynamo.compile(mutate_then_read, backend=counter, fullgraph=True)(sd2, torch.ones(4))
    assert_same(out, expected)
    assert sd2 == sd1 and type(sd2) is SimpleDict
    assert counter.frame_count == dyn.frame_count == 1


def test_dict_subclass_with_dunder_overrides_reads_get():
    config = DotDict({"a": 1, "b": 2})

    def fn(x):
        return x * config.get("a", 3) + x * config.get("c", 5)

    fg_compare(fn, torch.ones(2))


def test_ordered_dict_subclass_contains():
    def f(x, d):
        if "key1" in d:
            x = x + 2
        if "key2" in d:
            x = x + 4
        return x + 8

    counter = CountingBackend()
    g = cdynamo.compile(f, backend=counter, fullgraph=True)
    assert_same(g(torch.ones(4), PlainOrdered({"key1": torch.ones(4)})), torch.full([4], 11.0))
    assert_same(g(torch.ones(4), PlainOrdered({"key2": torch.ones(4)})), torch.full([4], 13.0))
    assert counter.frame_count == 2


def test_dict_subclass_overriding_iter_is_not_mirrored():
    class Reversed(dict):
        def __iter__(self):
            return iter(list(dict.__iter__(self))[::-1])

    d = Reversed({1: 2, 3: 4})

    def fn(x):
        return [x * k for k in d]

    # not read through a mirror (dict's own order would be wrong): eager's order
    assert_same(cdynamo.compile(fn, backend="eager")(torch.ones(2)), fn(torch.ones(2)))
