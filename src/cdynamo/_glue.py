"""Glue between the C translator and torch's Python libraries (internal).

The C engine (src/cdynamo/csrc/translate.c, codegen.c) calls these functions on the slow
path only (while tracing a frame): torch.fx for the graph, FakeTensorMode for tensor
metadata, the chosen backend to compile the graph, and the output_code report. Nothing
here runs on a cache hit, except fill_ordered_dict (generated code rebuilding objects).
"""
from __future__ import annotations

import collections
import contextlib
import copy
import itertools
import logging
import operator
import re
import sys
import time
import weakref

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeCopyMode

from cdynamo import _backends, _compat, _events

log = logging.getLogger("cdynamo")
_graph_counter = itertools.count()


class GradModeExit:
    """The __exit__ of a `with torch.no_grad()/enable_grad()` block that a graph break
    split: resume functions receive it on their stack and call it at the end of the block
    (with three Nones, or with the exception), restoring grad mode `prev`."""

    __slots__ = ("prev",)

    def __init__(self, prev):
        self.prev = bool(prev)

    def __call__(self, *exc_info):
        torch._C._set_grad_enabled(self.prev)
        return None

    def __repr__(self):
        return f"GradModeExit(prev={self.prev})"


class ErrorOnGraphBreakExit:
    """The __exit__ of a `with torch._dynamo.error_on_graph_break(flag)` block that a graph
    break split: resume functions receive it on their stack, and tracing one starts with
    the block's setting (`flag`) and restores `prev` at the block's end (both the engine's
    codes: 0 unset, 1 False, 2 True). Called at run time it does nothing, as the block's
    setting is a compile-time one."""

    __slots__ = ("flag", "prev")

    def __init__(self, flag, prev):
        self.flag = int(flag)
        self.prev = int(prev)

    def __call__(self, *exc_info):
        return None

    def __repr__(self):
        return f"ErrorOnGraphBreakExit(flag={self.flag}, prev={self.prev})"


class AutocastExit:
    """An entered `with torch.autocast(...)` block split by a graph break. Making it enters
    the autocast ``args`` = (device_type, dtype, enabled, cache_enabled) as
    torch.amp.autocast_mode._enter_autocast does; calling it (with three Nones, or with the
    exception, as an __exit__) leaves it. The break's code makes one around the instruction
    it runs in Python; a resume function makes one from its AutocastEnter."""

    __slots__ = ("mode",)
    _enter = staticmethod(torch.amp.autocast_mode._enter_autocast)
    _exit = staticmethod(torch.amp.autocast_mode._exit_autocast)

    def __init__(self, *args):
        self.mode = self._enter(*args)

    def __call__(self, *exc_info):
        self._exit(self.mode)
        return None

    def __repr__(self):
        return f"{type(self).__name__}()"


class InferenceModeExit(AutocastExit):
    """An entered `with torch.inference_mode(mode)` block split by a graph break, as
    AutocastExit: ``args`` = (mode,), entered and left as
    torch.autograd.grad_mode._enter_inference_mode / _exit_inference_mode do."""

    __slots__ = ()
    _enter = staticmethod(torch.autograd.grad_mode._enter_inference_mode)
    _exit = staticmethod(torch.autograd.grad_mode._exit_inference_mode)


def sdpa_kernel_enter(names, set_priority):
    """Enter torch.nn.attention.sdpa_kernel(backends, set_priority) for the SDPBackend members
    named in ``names`` (a tuple of str: names keep the FX graph printable), as its generator
    does; returns what sdpa_kernel_exit needs to restore the backends enabled before."""
    from torch.nn import attention
    prev = tuple(b.name for b in attention._cur_sdpa_kernel_backends(with_priority=set_priority))
    attention._sdpa_kernel([getattr(attention.SDPBackend, n) for n in names], set_priority)
    return prev, set_priority


def sdpa_kernel_exit(state):
    """Leave an sdpa_kernel block entered by sdpa_kernel_enter (``state`` its result)."""
    from torch.nn import attention
    prev, set_priority = state
    attention._sdpa_kernel([getattr(attention.SDPBackend, n) for n in prev], set_priority)


class SdpaKernelExit(AutocastExit):
    """An entered `with torch.nn.attention.sdpa_kernel(...)` block split by a graph break, as
    AutocastExit: ``args`` = (names, set_priority) of sdpa_kernel_enter."""

    __slots__ = ()
    _enter = staticmethod(sdpa_kernel_enter)
    _exit = staticmethod(sdpa_kernel_exit)


class AutocastEnter:
    """The autocast block a resume function continues inside: handed on its stack in place
    of the block's __exit__, and called (no arguments) by the resume function's prologue,
    which enters the autocast again and puts the AutocastExit on the stack. Traced, that
    call is an _enter_autocast node, so the block's end is in the same graph (as
    torch._dynamo's resume functions enter their context managers again)."""

    __slots__ = ("args",)
    _exit_type = AutocastExit

    def __init__(self, *args):
        self.args = args

    def __call__(self):
        return self._exit_type(*self.args)

    def __repr__(self):
        return f"{type(self).__name__}{self.args!r}"


class SdpaKernelEnter(AutocastEnter):
    """As AutocastEnter, for a `with torch.nn.attention.sdpa_kernel(...)` block."""

    __slots__ = ()
    _exit_type = SdpaKernelExit


class InferenceModeEnter(AutocastEnter):
    """As AutocastEnter, for a `with torch.inference_mode(mode)` block: ``args`` = (mode,);
    traced, the call is an _enter_inference_mode node."""

    __slots__ = ()
    _exit_type = InferenceModeExit


def autocast_args(cls, args, kwargs):
    """The (device_type, dtype, enabled, cache_enabled) of `cls(*args, **kwargs)` for
    torch.autocast and its torch.cpu/cuda.amp forms (constants), as torch.amp._enter_autocast
    takes them."""
    import inspect
    if cls is not torch.autocast and issubclass(cls, torch.autocast) and \
            cls.__module__.startswith(("torch.cpu", "torch.cuda")):
        device = "cuda" if cls.__module__.startswith("torch.cuda") else "cpu"
        bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        return (device, a.get("dtype"), a.get("enabled", True), a.get("cache_enabled"))
    bound = inspect.signature(torch.autocast.__init__).bind(None, *args, **kwargs)
    bound.apply_defaults()
    a = bound.arguments
    return (a["device_type"], a["dtype"], a["enabled"], a["cache_enabled"])


_generic_readers = {}


def generic_attr_reader(name):
    """The callable ``obj -> object.__getattribute__(obj, name)`` (one per name, kept), used
    as the source of an attribute read past a type's own ``__getattribute__`` (guards and
    generated code evaluate it on the real object). ``name``: str."""
    fn = _generic_readers.get(name)
    if fn is None:
        def fn(obj, _get=object.__getattribute__, _name=name):
            return _get(obj, _name)
        fn.__qualname__ = fn.__name__ = "object_getattribute_" + name
        _generic_readers[name] = fn
    return fn


def functional_call_targets(module, names):
    """Where torch.func.functional_call's tensors go: for each dotted name in `names` (a
    list of str), (owning module, attribute name, index of the name), then the same for every
    other name of the module's parameters and buffers registered as the same tensor (tied
    weights follow the given one). Raises KeyError for a name that is neither."""
    import itertools
    out, given = [], {}
    for i, name in enumerate(names):
        prefix, _, attr = name.rpartition(".")
        owner = module.get_submodule(prefix) if prefix else module
        t = owner._parameters.get(attr, owner._buffers.get(attr))
        if t is None:
            raise KeyError(name)
        out.append((owner, attr, i))
        given.setdefault(id(t), i)
    seen = set(names)
    for name, t in itertools.chain(module.named_parameters(remove_duplicate=False),
                                   module.named_buffers(remove_duplicate=False)):
        if name not in seen and id(t) in given:
            prefix, _, attr = name.rpartition(".")
            out.append((module.get_submodule(prefix) if prefix else module, attr, given[id(t)]))
            seen.add(name)
    return out


def undo_version_bump(t):
    """Lower tensor t's version counter by one (not below 0): a graph node after the
    torch.Tensor.set_ that stands for ``t.data = value``, which in eager does not bump the
    version the way set_ does (as torch._dynamo's setattr of Tensor.data). Returns t."""
    version = t._version
    torch._C._autograd._unsafe_set_version_counter((t,), (max(version - 1, 0),))
    return t


def data_set_refusal(target, value, value_is_input):
    """Why ``target.data = value`` (both fake tensors of the trace, target a tensor of the
    frame; value_is_input: bool) cannot be a torch.Tensor.set_ node under AOTAutograd, as a
    str, or None when it can: value is an input or its memory is used by another tensor too
    (a view, a detach(); the untyped_storage() object asked for holds one use itself), another
    dtype or device, or other sizes for a target that requires grad (AOTAutograd's backward
    expects its sizes)."""
    try:
        shared = value_is_input or torch._C._storage_Use_Count(
            value.untyped_storage()._cdata) > 2
    except Exception:
        shared = True
    if shared:
        return "the new data shares memory with another tensor (an input, a view)"
    if value.dtype != target.dtype or value.device != target.device:
        return "another dtype or device"
    if target.requires_grad and value.shape != target.shape:
        return "other sizes for a tensor that requires grad"
    return None


_ASSERT_OP = []


def assert_op():
    """The operator ``torch.ops.cdynamo.assert_true(cond: Tensor, msg: str) -> None`` that
    stands for ``assert cond, msg`` on a one-element tensor inside a graph: it raises
    AssertionError(msg) when bool(cond) is False, as eager's assert (torch._dynamo puts
    torch._assert_async there instead, which raises RuntimeError). Registered with
    torch.library on first use, with a fake implementation and as side-effectful for FX
    (torch.fx.node.has_side_effect), so AOTAutograd and Inductor keep it."""
    if not _ASSERT_OP:
        @torch.library.custom_op("cdynamo::assert_true", mutates_args=())
        def assert_true(cond: torch.Tensor, msg: str) -> None:
            if not bool(cond):
                raise AssertionError(msg)

        @assert_true.register_fake
        def _(cond, msg):
            return None

        op = torch.ops.cdynamo.assert_true.default
        torch.fx.node.has_side_effect(op)
        _ASSERT_OP.append(op)
    return _ASSERT_OP[0]


def set_function_attrs(fn, attrs):
    """Set on ``fn`` (a function compiled code rebuilt) the attributes the trace stored on it
    (``attrs``: dict name -> value, e.g. functools.wraps' __name__ and __wrapped__), in
    order. Returns None."""
    for name, value in attrs.items():
        setattr(fn, name, value)


def refill_deque(d, items):
    """Make ``d`` (a ``collections.deque`` of the frame that compiled code changed) hold
    ``items`` (a list, in order), keeping the same object: the write-back of the deque's
    contents after a graph. Returns None."""
    d.clear()
    d.extend(items)


def fill_ordered_dict(obj, items):
    """Give ``obj`` (an OrderedDict subclass instance rebuilt by generated code) the entries
    of the dict ``items``, through ``OrderedDict.__setitem__`` so that neither an override of
    ``__setitem__``/``update`` runs nor the order bookkeeping is bypassed."""
    setitem = collections.OrderedDict.__setitem__
    for k, v in items.items():
        setitem(obj, k, v)


def exception_chain(exc, context, cause, suppress):
    """Give ``exc`` (an exception rebuilt by generated code) the chain links the trace gave
    it: ``__context__``, ``__cause__`` and ``__suppress_context__``; returns ``exc``."""
    exc.__context__ = context
    exc.__cause__ = cause
    exc.__suppress_context__ = suppress
    return exc


def _replay(items):
    yield from items


def _replay_started(items):
    yield   # where next() leaves it: send(v) is then accepted, as by the started original
    yield from items


def _keep(_item):
    return True


def _drop(_item):
    return False


def _last(_acc, item):
    return item


def _columns(items):
    return list(zip(*items)) if items else []


# the iterator types a polyfill's generator stands for, rebuilt over the items it has left
# (each yields exactly `items`, in order)
_REBUILD = {
    map: lambda items: map(_identity, items),
    filter: lambda items: filter(_keep, items),
    zip: lambda items: zip(*_columns(items)),
    enumerate: lambda items: enumerate((v for _, v in items), items[0][0] if items else 0),
    itertools.chain: lambda items: itertools.chain(items),
    itertools.zip_longest: lambda items: itertools.zip_longest(*_columns(items)),
    itertools.islice: lambda items: itertools.islice(items, None),
    itertools.takewhile: lambda items: itertools.takewhile(_keep, items),
    itertools.dropwhile: lambda items: itertools.dropwhile(_drop, items),
    itertools.filterfalse: lambda items: itertools.filterfalse(_drop, items),
    itertools.compress: lambda items: itertools.compress(items, itertools.repeat(True)),
    itertools.starmap: lambda items: itertools.starmap(_identity, ((x,) for x in items)),
    itertools.accumulate: lambda items: itertools.accumulate(items, _last),
}


def _identity(x):
    return x


def rebuild_iterator(ptype, items, name, qualname, started=False):
    """The iterator that a generator of the trace stands for, rebuilt by generated code over
    the items it has left (a tuple): a generator named as the traced one (so close(), send()
    and type() behave as eager's: it has no try block left to run; started (bool): the traced
    one was advanced, so the rebuilt one is too and accepts send() of a value, as eager's
    started generator does), or an object of the polyfilled type (zip, map, itertools.chain,
    ...) it stands for; a plain iterator over the items for the other types."""
    if ptype is None:
        if started:
            gen = _replay_started(items)
            next(gen)
        else:
            gen = _replay(items)
        if name is not None:
            gen.__name__, gen.__qualname__ = name, qualname
        return gen
    make = _REBUILD.get(ptype)
    return make(items) if make is not None else iter(items)


def new_trace():
    """Return a fresh (torch.fx.Graph, FakeTensorMode, ShapeTrace) for one traced frame: the
    fake mode has a ShapeEnv (symbolic sizes, and what inductor's caches need) and the
    ShapeTrace (cdynamo._shapes) holds the rest of the frame's shape state."""
    from cdynamo import config
    from cdynamo._shapes import ShapeTrace
    dynamo_config = sys.modules.get("torch._dynamo.config")
    shapes = ShapeTrace(config.capture_scalar_outputs or
                        bool(getattr(dynamo_config, "capture_scalar_outputs", False)))
    _honour_trace_unittest(bool(getattr(dynamo_config, "enable_trace_unittest", False)))
    return torch.fx.Graph(), shapes.fake_mode, shapes


_TRACE_UNITTEST = [False]


def _honour_trace_unittest(enabled):
    """torch._dynamo.config.enable_trace_unittest (bool), as torch._dynamo: when True,
    unittest's code (``self.assertEqual`` and the other ``assert*`` methods, assertRaises'
    context) is inlined into the trace (trace rule INLINE for ``unittest``); when False it is
    stdlib code, never traced. Changes the rule only when the setting changed."""
    if enabled != _TRACE_UNITTEST[0]:
        from cdynamo import trace_rules
        _TRACE_UNITTEST[0] = enabled
        trace_rules.set_module_rule("unittest", trace_rules.INLINE if enabled else None)


def new_graph():
    """Return a fresh torch.fx.Graph for the body of a higher-order op (a sub-trace)."""
    return torch.fx.Graph()


def sub_placeholder(graph, name, fake):
    """A placeholder of a body graph (placeholder()), with its example value and the version
    counter of that value when the body starts using it (body_alias_or_mutation); fake may
    be a SymInt (a symbolic int of an enclosing level that the body uses)."""
    node = placeholder(graph, name)
    node.meta["example_value"] = fake
    if isinstance(fake, torch.Tensor):
        node.meta["cdynamo_version"] = fake._version
    return node


def body_alias_or_mutation(graph, outputs):
    """Why torch.cond refuses a branch (as eager's torch.cond does): "input mutation" when an
    input of the branch graph was changed in place, "aliasing" when an output shares storage
    with an input or another output; None when neither."""
    from torch.multiprocessing.reductions import StorageWeakRef

    def storage(t):
        return StorageWeakRef(t.untyped_storage())

    inputs = set()
    for n in graph.nodes:
        if n.op == "placeholder":
            t = n.meta.get("example_value")
            if isinstance(t, torch.Tensor):
                if t._version != n.meta.get("cdynamo_version", t._version):
                    return "input mutation"
                inputs.add(storage(t))
    seen = set()
    for o in outputs:
        t = o.meta.get("example_value")
        if isinstance(t, torch.Tensor):
            s = storage(t)
            if s in inputs or s in seen:
                return "aliasing"
            seen.add(s)
    return None


def reorder_placeholders(graph, order):
    """Move the placeholders of `graph` into the order of the list `order` (all of them),
    so that two bodies of one higher-order op (torch.cond's branches) take the same inputs."""
    first = next((n for n in graph.nodes if n.op != "placeholder"), None)
    if first is None:
        raise AssertionError("a body graph has no output node")
    for node in order:
        first.prepend(node)


def finish_subgraph(graph, root, outputs):
    """Give the body graph its output (a tuple/nested tuples of FX nodes) and return it as a
    torch.fx.GraphModule over `root` (a dict of the modules its own get_attr nodes use),
    as torch._dynamo registers the bodies of higher-order ops."""
    graph.output(outputs)
    return torch.fx.GraphModule(root, graph)


def associative_scan_refusal(gm, n):
    """Why torch._dynamo refuses the traced combine_fn `gm` of associative_scan over `n` xs
    leaves (its placeholders: n lhs slices, n rhs slices, additional inputs; its output: the
    combined leaves), or None: an output whose metadata differs from its slice's, or an
    operation that is not pointwise (checked on the body's aten graph, as torch._dynamo)."""
    from torch._higher_order_ops.utils import _maybe_fake_tracing, check_meta_consistency
    from torch._inductor.utils import is_pointwise_use

    fakes = [p.meta["example_value"] for p in gm.graph.find_nodes(op="placeholder")]
    outs = torch.utils._pytree.tree_leaves(gm.graph.find_nodes(op="output")[0].args[0])
    try:
        check_meta_consistency(fakes[:n], [o.meta["example_value"] for o in outs],
                               "initial_xs", "combine_fn_output", include_contiguity=False)
    except Exception as e:  # noqa: BLE001 (its message is the reason)
        return str(e).splitlines()[0]
    mode = next(t.fake_mode for t in fakes if isinstance(t, torch._subclasses.FakeTensor))
    with mode:
        args = [t.clone() if isinstance(t, torch.Tensor) else t for t in fakes]
        traced = _maybe_fake_tracing(gm, args, pre_dispatch=False)
    for node in traced.graph.nodes:
        if not all(is_pointwise_use(u) or u.op == "output" for u in node.users):
            return "combine_fn is not pointwise"
    return None


def discard_subgraph(graph, root, node):
    """Undo a registered body after its op failed: the get_attr `node` (if unused) leaves
    `graph` and its GraphModule leaves `root`."""
    if not node.users:
        root.pop(node.target, None)
        graph.erase_node(node)


def fake_grad_like(mode, fake):
    """A fake tensor with the metadata of `fake` that does not require grad: the example
    value of a gradient input of a traced autograd.Function backward."""
    with mode:
        return torch.empty_like(fake, requires_grad=False)


def is_functorch_wrapped(tensor):
    """True when `tensor` is wrapped by a torch.func transform (vmap's BatchedTensor, grad's
    GradTrackingTensor): such tensors are never graph inputs."""
    return torch._C._functorch.is_functorch_wrapped_tensor(tensor)


def higher_order_op(name):
    """torch.ops.higher_order.<name>: the operator a traced higher-order op is recorded as
    (cond, tag_activation_checkpoint, autograd_function_apply, wrap), as torch._dynamo does."""
    import torch._higher_order_ops  # noqa: F401  (defines cond, tag_activation_checkpoint, wrap)
    import torch._functorch.autograd_function  # noqa: F401  (autograd_function_apply)
    return getattr(torch.ops.higher_order, name)


def once_differentiable_code():
    """The code object of the wrapper torch.autograd.function.once_differentiable makes (a
    traced backward wrapped by it is traced as the user's own function)."""
    from torch.autograd.function import once_differentiable
    return once_differentiable(lambda ctx: None).__code__


def nested_region_functions():
    """(invoke_subgraph_placeholder, the code of nested_compile_region's wrapper): what a
    function marked with torch.compiler.nested_compile_region calls, recorded by the engine
    as a region (values/hop.c), and the wrapper itself, inlined."""
    import importlib
    m = importlib.import_module("torch._higher_order_ops.invoke_subgraph")

    def probe():
        pass
    return m.invoke_subgraph_placeholder, m.mark_compile_region(probe).__code__


def higher_order_op_type():
    """torch._ops.HigherOrderOperator: calling one directly is not traced (a graph break)."""
    return torch._ops.HigherOrderOperator


def functorch_active():
    """True while a torch.func transform (vmap, grad, jvp, ...) is running on this thread."""
    return torch._C._functorch.peek_interpreter_stack() is not None


def fake_from_tensor(mode, tensor):
    """Return a FakeTensor with the metadata of `tensor` (static shapes)."""
    return mode.from_tensor(tensor, static_shapes=True)


def _symbolic(mode):
    """The python dispatcher when the trace has symbols (as torch._dynamo runs fake tensors:
    composite ops then decompose over SymInts), else a no-op context."""
    shape_env = mode.shape_env
    if shape_env is not None and (shape_env.backed_var_to_val or shape_env.unbacked_symint_counter
                                  or shape_env.unbacked_symfloat_counter):
        from torch._dispatch.python import enable_python_dispatcher
        return enable_python_dispatcher()
    return contextlib.nullcontext()


def fake_call(mode, fn, args, kwargs):
    """Run fn(*args, **kwargs) on fake tensors under `mode`; returns the fake result. An
    nn.Module (a call_module node) runs as a copy of it whose parameters and buffers are fake
    tensors of `mode` (made once per trace), as torch._dynamo runs one: its forward would
    otherwise update the real module's buffers at trace time (BatchNorm's
    num_batches_tracked, running statistics)."""
    if isinstance(fn, torch.nn.Module):
        fn = _fake_module(mode, fn)
    with mode, _symbolic(mode):
        return fn(*args, **kwargs)


_FAKE_MODULES = weakref.WeakKeyDictionary()   # fake mode -> {id(module): (module, fake copy)}


def _fake_module(mode, mod):
    """The fake copy of module `mod` under fake mode `mode` (made once while the mode lives)."""
    per_mode = _FAKE_MODULES.setdefault(mode, {})
    hit = per_mode.get(id(mod))
    if hit is None or hit[0] is not mod:
        with FakeCopyMode(mode):
            hit = per_mode[id(mod)] = (mod, copy.deepcopy(mod))
    return hit[1]


def _memory_offsets(t):
    """The storage offsets of the elements of tensor ``t`` (a set of ints), or None when its
    layout is symbolic or it is too large to enumerate cheaply."""
    try:
        sizes, strides, off = [int(v) for v in t.shape], [int(v) for v in t.stride()], \
            int(t.storage_offset())
    except Exception:
        return None
    offsets = {off}
    for n, st in zip(sizes, strides):
        if n == 0:
            return set()
        offsets = {o + i * st for o in offsets for i in range(n)}
        if len(offsets) > 65536:
            return None
    return offsets


def _overlapping_operand(self, args, kwargs):
    """True when a tensor operand of the in-place method on `self` partly overlaps self's
    memory (another view of it, not the same one). Eager checks that on real data and raises
    ("some elements of the input tensor and the written-to tensor refer to a single memory
    location"); fake tensors do not, so such a call is not put in a graph: it runs in Python,
    where an enclosing ``try`` catches the error as in eager."""
    if not isinstance(self, torch.Tensor):
        return False
    try:
        storage = self.untyped_storage()
    except Exception:
        return False
    mine = None
    for a in list(args) + list(kwargs.values()):
        if not isinstance(a, torch.Tensor) or a is self:
            continue
        try:
            if a.untyped_storage() is not storage:
                continue
            if (a.shape == self.shape and a.stride() == self.stride()
                    and a.storage_offset() == self.storage_offset()):
                continue   # the same memory exactly: eager allows it
        except Exception:
            continue
        if mine is None:
            mine = _memory_offsets(self)
        theirs = _memory_offsets(a)
        if mine is None or theirs is None or mine & theirs:
            return True
    return False


def fake_call_method(mode, name, args, kwargs):
    """Run args[0].<name>(*args[1:], **kwargs) under `mode` (a Tensor method call).
    Raises RuntimeError for an in-place method whose operand overlaps its receiver (see
    _overlapping_operand): the caller makes the call a graph break."""
    if name.endswith("_") and not name.endswith("__") and \
            _overlapping_operand(args[0], args[1:], kwargs):
        raise RuntimeError(f"in-place {name} with an operand sharing the receiver's memory")
    with mode, _symbolic(mode):
        return getattr(args[0], name)(*args[1:], **kwargs)


def placeholder(graph, name):
    """Add a graph input named `name` (made unique: it is the parameter name of the generated
    forward) after the existing inputs (FX wants them first). "self" is the generated
    forward's own first parameter: a frame's tensor named self becomes self_1."""
    taken = {n.target for n in graph.nodes if n.op == "placeholder"} | {"self"}
    if name in taken:
        name = next(f"{name}_{i}" for i in itertools.count(1) if f"{name}_{i}" not in taken)
    first = next((n for n in graph.nodes if n.op != "placeholder"), None)
    if first is None:
        return graph.placeholder(name)
    with graph.inserting_before(first):
        return graph.placeholder(name)


def rollback(graph, last):
    """Erase the call nodes added to `graph` after node `last` (None: since the start), newest
    first. Placeholders, get_attr nodes and the .item() of a float input stay (the trace
    keeps values for them)."""
    for node in reversed(list(graph.nodes)):
        if node is last:
            break
        if node.op in ("placeholder", "get_attr") or node.users or "cdynamo_keep" in node.meta:
            continue
        graph.erase_node(node)


class GraphBreakError(_compat.Unsupported):
    """A graph break where none is allowed: fullgraph=True, torch._dynamo.error_on_graph_break
    (True) or cdynamo.config.error_on_graph_break. A torch._dynamo.exc.Unsupported (so a
    RuntimeError), as torch.compile raises there; the message names the reason, its catalogue
    code and hint, and the user's source line."""

    def __init__(self, msg):
        _compat.init_unsupported(self, msg)


def fullgraph_error(reason, qualname, filename, lineno, inner_file=None, inner_line=0,
                    by_setting=False):
    """Raise GraphBreakError naming the reason and the user's source line(s).

    (filename, lineno) is the line of the compiled frame where the graph breaks;
    (inner_file, inner_line), when given and different, is where the reason arose inside
    an inlined call. by_setting: the error comes from error_on_graph_break, not fullgraph."""
    import linecache
    from cdynamo.break_reasons import classify
    entry = classify(str(reason))
    why = "error_on_graph_break" if by_setting else "fullgraph=True"
    lines = [f"cdynamo ({why}): graph break in {qualname} at {filename}:{lineno}",
             f"    {linecache.getline(filename, lineno).strip()}"]
    if inner_file is not None and (inner_file, inner_line) != (filename, lineno):
        lines.append(f"  inside a call, at {inner_file}:{inner_line}")
        lines.append(f"    {linecache.getline(inner_file, inner_line).strip()}")
    lines.append(f"reason: {reason}")
    lines.append(f"[{entry.code}] {entry.title}: {entry.explanation}")
    lines.append(f"hint: {entry.hint}")
    raise GraphBreakError("\n".join(lines))


def error_on_graph_break_active():
    """Whether a graph break must raise (GraphBreakError) although fullgraph is off:
    cdynamo.config.error_on_graph_break, or torch's own switch set by
    torch._dynamo.error_on_graph_break(True) (as a context manager or decorator around the
    compiled call). Read at a graph break while tracing."""
    from cdynamo import config
    return config.error_on_graph_break or _compat.torch_error_on_graph_break()


#: torch.compiler.set_stance names -> the engine's stance modes (csrc/stance.h)
STANCE_MODES = {"default": 0, "force_eager": 1, "eager_on_recompile": 2,
                "fail_on_recompile": 3, "eager_then_compile": 4,
                "aot_eager_then_compile": 5}


def stance_plan(stance):
    """What torch.compiler.set_stance's current stance (a torch DynamoStance: .stance str,
    .skip_guard_eval_unsafe bool, .backend str | callable | None) means for cdynamo's
    compiled calls: (mode: int, skip_guard_eval_unsafe: bool, force_backend or None). Called
    by the engine once per new stance object. For "aot_eager_then_compile" the third item is
    "aot_eager", the backend of each code's first call (as torch). Raises RuntimeError for a
    stance name torch does not know (as torch)."""
    name = getattr(stance, "stance", "default")
    if name not in STANCE_MODES:
        raise RuntimeError(f"invalid torch.compile stance '{stance}'; valid stances: "
                           f"{', '.join(STANCE_MODES)}")
    backend = getattr(stance, "backend", None) if name == "default" else None
    if name == "aot_eager_then_compile":
        backend = "aot_eager"
    return STANCE_MODES[name], bool(getattr(stance, "skip_guard_eval_unsafe", False)), backend


def stance_options(options, backend):
    """The CompileOptions a compiled function made with `options` compiles with under
    set_stance(force_backend=backend): the same fullgraph and dynamic, that backend. Frames
    compiled with it share the code's cache entries (entries made before stay in use)."""
    from cdynamo._api import CompileOptions
    compiler, bname = _backends.resolve_backend(backend)
    return CompileOptions(compiler, bname, options.fullgraph, options.dynamic,
                          guard_filter_fn=options.guard_filter_fn)


#: cdynamo's guard kinds under torch's names where torch's differ (GuardFilterEntry.guard_type)
_TORCH_GUARD_TYPES = {"GRAD_MODE": "GLOBAL_STATE", "SHAPE_GUARD": "SHAPE_ENV",
                      "DICT_KEYS": "DICT_KEYS_MATCH"}


class FilterGuardSource:
    """What a guard filter reads of ``entry.orig_guard.source`` (torch's Source methods that
    torch.compiler's skip_guard_on_*_unsafe filters call)."""

    __slots__ = ("_name", "_in_module", "_in_builtin_module", "_global")

    def __init__(self, name, in_module, in_builtin_module, is_global):
        self._name = name
        self._in_module = in_module
        self._in_builtin_module = in_builtin_module
        self._global = is_global

    def name(self):
        return self._name

    def is_unspecialized_nn_module(self):
        """True when the guarded value is an nn.Module or is read through one."""
        return self._in_module

    def is_unspecialized_builtin_nn_module(self):
        """True when it is, or is read through, a module of torch.nn's own classes."""
        return self._in_builtin_module

    def is_specialized_nn_module(self):
        return False

    def is_nn_module(self):
        return self._in_module

    def guard_source(self):
        return None

    def __repr__(self):
        return self._name


class FilterGuard:
    """``entry.orig_guard`` of a GuardFilterEntry cdynamo hands a guard filter: name,
    source (FilterGuardSource), guard_types ([the entry's guard_type])."""

    __slots__ = ("name", "source", "guard_types")

    def __init__(self, name, source, guard_type):
        self.name = name
        self.source = source
        self.guard_types = [guard_type]

    def __repr__(self):
        return f"FilterGuard({self.name!r}, {self.guard_types[0]})"


def _builtin_module(v):
    return type(v).__module__.startswith(("torch.nn.", "torch.ao."))


def guard_filter(fn, rows):
    """Apply torch.compile's options["guard_filter_fn"] to one compiled frame's guards
    (called by the engine, guards.c cdyn_guards_filter, once per compile).

    rows: list of (name: str | None, has_value: bool, value, kind: str, is_global: bool,
    chain: tuple of the values of the guard's source and each base, innermost first).
    fn gets one torch GuardFilterEntry per row and returns a sequence of bools; returns
    that as a list of True/False. Raises AssertionError when fn's answer is not one bool
    per entry (as torch._dynamo); fn's own errors propagate unchanged."""
    entry_type = _compat.guard_filter_entry_type()
    entries = []
    for name, has_value, value, kind, is_global, chain in rows:
        name = name or ""
        guard_type = _TORCH_GUARD_TYPES.get(kind, kind)
        modules = [v for v in chain if isinstance(v, torch.nn.Module)]
        source = FilterGuardSource(name, bool(modules), any(map(_builtin_module, modules)),
                                   is_global)
        entries.append(entry_type(name=name, has_value=has_value, value=value,
                                  guard_type=guard_type, derived_guard_types=(),
                                  is_global=is_global,
                                  orig_guard=FilterGuard(name, source, guard_type)))
    keep = list(fn(entries))
    if len(keep) != len(entries):
        # torch._dynamo asserts the same
        raise AssertionError(f"guard_filter_fn returned {len(keep)} values for "
                             f"{len(entries)} guard entries; it must return one bool per entry")
    return [bool(k) for k in keep]


def stance_fail(name, filename, lineno, reason):
    """Raise the RuntimeError of set_stance("fail_on_recompile") for a frame of function
    `name` that would be compiled; reason (str or None) is the guard that failed."""
    msg = (f"Detected recompile when torch.compile stance is 'fail_on_recompile'. "
           f"filename: '{filename}', function name: '{name}', line number: {lineno}")
    if reason is not None:
        msg += f"\n    triggered by the following guard failure(s):\n    - {reason}"
    raise RuntimeError(msg)


#: (globals dict, name) of every global the engine installed (compiled graphs, resume
#: functions); cdynamo.reset() removes them so their graphs can be freed.
installed_globals: list = []


def install_global(globals_dict, name, value, removable=True):
    """Set globals_dict[name] = value for the transformed code, remembering it for reset()
    when removable. Resume functions are not removable: a transformed code running while
    reset() is called (from the code at a graph break) loads its resume function later."""
    globals_dict[name] = value
    if removable:
        installed_globals.append((globals_dict, name))


def clear_installed_globals():
    """Remove every global install_global() set (called by cdynamo.reset())."""
    while installed_globals:
        g, name = installed_globals.pop()
        g.pop(name, None)


def set_example(node, value):
    """Attach the fake example value to an FX node (and the unbacked symbols it binds), as
    torch._dynamo does."""
    from cdynamo._shapes import set_example as _set
    _set(node, value)


from torch._dynamo.exc import BackendCompilerFailed as _DynamoBackendCompilerFailed  # noqa: E402


def _fake_tensor_limit(exc) -> bool:
    """Whether exc (a backend's exception), or an exception it was raised from, is one of the
    fake-tensor limits torch._dynamo lets a backend fall back on (exc.py's
    exceptions_allowed_to_be_fallback: a data-dependent output, a dynamic output shape, an
    operator or tensor fake tensors do not support)."""
    from torch._subclasses import fake_tensor
    kinds = tuple(k for k in (getattr(fake_tensor, n, None) for n in (
        "DataDependentOutputException", "DynamicOutputShapeException",
        "UnsupportedOperatorException", "UnsupportedFakeTensorException",
        "UnsupportedMutationAliasingException")) if isinstance(k, type))
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kinds):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


class BackendCompilerFailed(_DynamoBackendCompilerFailed):
    """The backend raised while compiling a graph: the error reaches the user, with the
    backend's exception as __cause__. A subclass of torch._dynamo.exc.BackendCompilerFailed
    (a RuntimeError), so code written for torch.compile catches it as it catches torch's."""

    def __init__(self, backend_name, inner):
        # torch's __init__ differs between releases: only RuntimeError's is run, and the
        # attributes torch's class reads are set here
        RuntimeError.__init__(self, f"backend {backend_name!r} raised {type(inner).__name__}: "
                                    f"{inner}")
        self.backend_name = backend_name
        self.inner_exception = inner
        self.first_useful_frame = None


#: errors raised while compiling a frame that reach the user (the engine does not run the
#: frame unmodified on them): a backend's failure, a nested_compile_region over its limit
from cdynamo._regions import ReuseLimitExceeded as _ReuseLimitExceeded  # noqa: E402
class ForbiddenCallError(AssertionError):
    """A callable torch marks _dynamo_forbidden (torch.compiler.set_stance) was called from
    compiled code: an AssertionError, as torch._dynamo raises it."""


def forbidden_call(fn):
    """Raise ForbiddenCallError for fn (called by the translator)."""
    raise ForbiddenCallError(f"Attempt to trace forbidden callable {fn!r}: it may not be "
                             "called inside a compiled function (as torch.compile)")


USER_ERRORS = (BackendCompilerFailed, _ReuseLimitExceeded, ForbiddenCallError)


class RestartTrace(Exception):
    """The backend's AOTAutograd could not turn these float inputs into tensors (torch's
    TensorifyScalarRestartAnalysis): the engine traces the frame again with them static, as
    torch._dynamo restarts its analysis. sources: tuple of engine sources."""

    def __init__(self, sources):
        super().__init__(f"float inputs to specialise: {sources}")
        self.sources = tuple(sources)


_CALL_OPS = ("call_function", "call_method", "call_module")


def compile_graph(options, graph, root, example_inputs, outputs, shapes, regions=(), frame=""):
    """Finish `graph` with `outputs` (a tuple of FX nodes), hand it to the backend.

    Args:
        options: cdynamo's CompileOptions (backend callable, backend_name, fullgraph).
        graph: the torch.fx.Graph recorded by the C translator.
        root: dict mapping get_attr / call_module targets to parameters and submodules.
        example_inputs: list of the graph inputs in placeholder order: real tensors, and
            the SymInts of symbolic sizes and dynamic int inputs (as torch._dynamo).
        outputs: tuple of torch.fx.Node, the graph outputs.
        shapes: the frame's cdynamo._shapes.ShapeTrace.
        regions: the engine's region records (cdynamo._regions.outline): calls that may be
            outlined into invoke_subgraph (regional compilation).
        frame: the compiled frame's qualified name, for the logs.

    Dead symbolic computations and unused inputs are removed first (as torch._dynamo), then
    repeated regions are outlined (cdynamo.config.regional_compile); if the backend fails
    on the outlined graph, the flat graph is compiled instead (logged). The backend is
    called inside the trace's TracingContext (as torch.compile calls it).
    Returns (name, compiled_callable, graph_module, kept input indices, device types), or
    None when no operation is left; device types is graph_device_types(gm). The callable is wrapped by cdynamo._C.disable so that frames the
    compiled graph runs are never traced; the transformed code holds it as a constant (it
    reads as `name`), and it is also installed as the global `name` for inspection.
    """
    from cdynamo import _C

    graph.output(tuple(outputs))
    keep = shapes.finalize(graph, example_inputs)
    if not outputs and not any(n.op in _CALL_OPS for n in graph.nodes):
        return None
    from cdynamo import _regions
    outlined = _regions.outline(graph, root, regions, options.backend_name,
                                frame=frame) if regions else None
    gm = torch.fx.GraphModule(root, graph)
    # the name stays off gm: an attribute of gm is part of torch's AOTAutograd cache key, and a
    # per-process counter there makes a second process miss that cache (warm start)
    name = f"__compiled_fn_{next(_graph_counter)}"
    inputs = [example_inputs[i] for i in keep]
    tf_subclass = [k for k, x in enumerate(inputs) if _has_torch_function(x)]
    if tf_subclass:
        # the trace dispatched the subclasses' __torch_function__ already: the backend sees
        # plain tensors (views of the same data, in the same autograd graph), at compile
        # time and on every call (torch._dynamo runs the graph with that dispatch off, and
        # its AOTAutograd backends then fail on such inputs)
        inputs = [x.as_subclass(torch.Tensor) if k in tf_subclass else x
                  for k, x in enumerate(inputs)]
    from cdynamo import _distributed
    backend = _distributed.maybe_split_backend(options, frame)  # DDP: split at buckets
    t_backend = time.perf_counter()
    try:
        if outlined is not None:
            flat = gm
            gm = torch.fx.GraphModule(outlined[1], outlined[0])
            try:
                compiled = shapes.call_backend(backend, gm, inputs)
            except Exception as e:  # noqa: BLE001 (the flat graph is the fallback)
                if shapes.floats_to_specialise(e):
                    raise
                _regions.log.warning("regional compile: backend %r failed on the outlined "
                                     "graph (%s: %s); compiling the flat graph",
                                     options.backend_name, type(e).__name__, e)
                gm = flat
                compiled = shapes.call_backend(backend, gm, inputs)
        else:
            compiled = shapes.call_backend(backend, gm, inputs)
    except Exception as e:
        restart = shapes.floats_to_specialise(e)
        if restart:
            raise RestartTrace(restart) from None
        if not _fake_tensor_limit(e):
            raise BackendCompilerFailed(options.backend_name, e) from e
        # the backend's own trace met a data-dependent op its fake tensors cannot run
        # (x[mask] = y's backward: nonzero): the graph runs as captured, eagerly, as
        # torch._dynamo gives up on such a graph with a warning ("Backend compiler exception")
        log.warning("backend %r could not compile graph %s (%s: %s); it runs eagerly",
                    options.backend_name, name, type(e).__name__, e)
        compiled = gm.forward
    if not callable(compiled):
        raise TypeError(
            f"backend {options.backend_name!r} returned {type(compiled).__name__}, "
            "expected a callable")
    _events.graph(name, gm, options.backend_name, time.perf_counter() - t_backend)
    floats = [k for k, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")
              if n.meta.get("cdynamo_float_input")]
    if floats:
        compiled = _floats_as_tensors(compiled, floats)
    if tf_subclass:
        compiled = _plain_tensors_at(compiled, tf_subclass)
    wrapped = _C.disable(compiled)
    wrapped._cdynamo_name = name
    return name, wrapped, gm, keep, graph_device_types(gm)


class _ProbeStop(Exception):
    pass


class _Probe(torch.Tensor):
    """Records what torch hands __torch_function__ for an operator, then stops (no kernel
    runs): _operator_funcs() probes each operator with it."""
    seen = None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        _Probe.seen = (func, tuple(a is _Probe.operand for a in args))
        raise _ProbeStop


_OPERATOR_FUNCS = {}


def torch_function_operator(op, tensor_first):
    """What eager hands __torch_function__ for ``op(a, b)`` (an ``operator`` function:
    add, radd through a non-tensor left operand, iadd, lt, getitem, neg, ...) when its
    tensor-subclass operand is the first (tensor_first) or only the second argument:
    (func, index of the subclass operand among func's arguments), or None when torch does
    not dispatch it. Found once per process by calling op on a probe subclass (torch maps
    the number protocol to functions irregularly: a + t gives Tensor.add(t, a), 1 - t
    Tensor.__rsub__(t, 1), t ** 2 TensorBase.pow, t += 1 Tensor.add_)."""
    key = (op, tensor_first)
    if key in _OPERATOR_FUNCS:
        return _OPERATOR_FUNCS[key]
    probe = torch.zeros(2, dtype=torch.int64).as_subclass(_Probe)
    _Probe.operand = probe
    _Probe.seen = None
    args = {1: (probe,), 2: (probe, 1) if tensor_first else (1, probe),
            3: (probe, 0, 1)}
    try:
        n = 3 if op is operator.setitem else 1 if op in (
            operator.neg, operator.pos, operator.invert, operator.abs, operator.not_) else 2
        op(*args[n])
    except _ProbeStop:
        pass
    except Exception:
        _Probe.seen = None
    found = None
    if _Probe.seen is not None and _Probe.seen[1].count(True) == 1:
        found = (_Probe.seen[0], _Probe.seen[1].index(True))
    _Probe.operand = None
    _OPERATOR_FUNCS[key] = found
    return found


def _has_torch_function(x):
    """True when x is a tensor of a subclass with a __torch_function__ of its own (not
    torch.Tensor's disabled one, as nn.Parameter has)."""
    return (isinstance(x, torch.Tensor) and type(x) is not torch.Tensor and
            type(x).__torch_function__ is not torch._C._disabled_torch_function_impl)


def _plain_tensors_at(compiled, positions):
    """compiled, called with the tensor-subclass inputs at `positions` (guarded by type) as
    plain tensors viewing them (Tensor.as_subclass(torch.Tensor)): the trace applied their
    __torch_function__ already."""
    plain = torch.Tensor.as_subclass
    tensor = torch.Tensor

    def call(*args):
        args = list(args)
        for k in positions:
            args[k] = plain(args[k], tensor)
        return compiled(*args)
    call._cdynamo_inner = compiled
    return call


def _floats_as_tensors(compiled, positions):
    """compiled, called with the Python floats at `positions` (dynamic float inputs) as 0-d
    float64 tensors, as torch._dynamo passes an unspecialized float to its graph."""
    as_tensor = torch._as_tensor_fullprec

    def call(*args):
        args = list(args)
        for k in positions:
            args[k] = as_tensor(args[k])
        return compiled(*args)
    call._cdynamo_inner = compiled
    return call


def tensor_guard_manager(tensors, sizes, strides):
    """torch's C++ guard tree checking a TENSOR_MATCH on each item of a tuple: a
    RootGuardManager with, per index i, a tuple-item manager holding torch's TENSOR_MATCH leaf
    guard for tensors[i] (exact Python type, dispatch keys with the thread's included and
    excluded sets applied, dtype, device, requires_grad, sizes[i], strides[i]), as
    torch._dynamo builds them. Unlike TensorGuards it does not test the tensors for
    uniqueness (the caller does).

    Args:
        tensors: tuple of torch.Tensor, the values the guards pass on now.
        sizes, strides: list of list of int, one per tensor (handed to torch as they are).
    Returns the tree's bound ``check``: called with a tuple of as many objects, True when
    every TENSOR_MATCH passes. Keeps no reference to the tensors. The tree's accessors import
    torch._dynamo (about a second): the engine calls this only once torch._dynamo is loaded.
    """
    from torch._C._dynamo.guards import RootGuardManager
    from torch._dynamo.guards import GuardManagerType
    root = RootGuardManager()
    for i, t in enumerate(tensors):
        name = f"[{i}]"
        m = root.tuple_getitem_manager(i, name, t, GuardManagerType.GUARD_MANAGER)
        m.add_tensor_match_guard(t, sizes[i], strides[i], name,
                                 [f"TENSOR_MATCH {name}"], None, type(t),
                                 torch._C._dispatch_keys(t))
    return root.check


def graph_device_types(gm):
    """frozenset of the device types (str, e.g. "cpu") of every tensor a node of gm or of
    its graph submodules (higher-order op bodies) produces, from the nodes' example values;
    None when a call node has no example value or enters/exits autocast, so the set is not
    known. The GRAD_MODE guard leaves its autocast test to TensorGuards when the tensors it
    checks cover these types (autocast of another device type cannot change these ops)."""
    types = set()
    for mod in gm.modules():
        if not isinstance(mod, torch.fx.GraphModule):
            continue
        for node in mod.graph.nodes:
            if node.op == "output":
                continue
            ev = node.meta.get("example_value", node.meta.get("val"))
            if node.op == "get_attr":
                try:
                    ev = operator.attrgetter(node.target)(mod)
                except AttributeError:
                    return None
                if isinstance(ev, torch.nn.Module):
                    continue    # a body, walked as a module of its own
            if node.op == "call_function" and "autocast" in getattr(node.target, "__name__", ""):
                return None
            if ev is None and node.op in _CALL_OPS:
                return None
            for leaf in torch.utils._pytree.tree_leaves(ev):
                if isinstance(leaf, torch.Tensor):
                    types.add(leaf.device.type)
    return frozenset(types)


def report(name, gm, orig_code, new_code, guards, resume_codes=()):
    """A cache entry was made (new_code None: the frame runs unmodified): tell the logs and
    the trace (cdynamo._events), and print the output_code report when config.output_code."""
    from cdynamo import config
    if new_code is not None:
        _events.entry_made(orig_code, new_code, guards, resume_codes)
    if not config.output_code:
        return
    from cdynamo._report import format_output_code
    print(format_output_code(name, gm, orig_code, new_code, list(guards), tuple(resume_codes)),
          flush=True)


class GraphBreak:
    """One graph break (or frame run unmodified) seen while tracing: the engine's reason, its
    catalogue code (cdynamo.break_reasons), and the user's source location."""

    __slots__ = ("reason", "qualname", "filename", "lineno", "code")

    def __init__(self, reason, qualname, filename, lineno):
        from cdynamo.break_reasons import classify
        self.reason, self.qualname, self.filename, self.lineno = reason, qualname, filename, lineno
        self.code = classify(reason).code

    @property
    def explanation(self):
        """One line saying what this kind of break is (from the catalogue)."""
        from cdynamo.break_reasons import lookup
        return lookup(self.code).explanation

    @property
    def hint(self):
        """What the user can do about it (from the catalogue)."""
        from cdynamo.break_reasons import lookup
        return lookup(self.code).hint

    @property
    def user_stack(self):
        """[traceback.FrameSummary] of the break's line, as torch's GraphCompileReason."""
        import traceback
        return [traceback.FrameSummary(self.filename, self.lineno,
                                       self.qualname.split(".")[-1])]

    def __repr__(self):
        return f"GraphBreak([{self.code}] {self.qualname} at {self.filename}:{self.lineno}: " \
               f"{self.reason})"


#: Graph breaks recorded since the process started (cdynamo.explain reads the new ones).
break_log: list = []


def record_break(reason, qualname, filename, lineno):
    """Called by the translator at every graph break: logs it (INFO, with its catalogue code)
    and keeps it for explain() (the last 10,000)."""
    b = GraphBreak(str(reason), qualname, filename, lineno)
    log.info("Graph break in %s at %s:%s: [%s] %s", qualname, filename, lineno, b.code, b.reason)
    _events.graph_break(b)
    break_log.append(b)
    if len(break_log) > 10000:
        del break_log[:5000]


#: Frames run unmodified (nothing compiled) since the process started, as GraphBreak records
#: (cdynamo.explain reads the new ones).
unmodified_log: list = []


def record_unmodified(reason, qualname, filename, lineno, inner_file=None, inner_line=0):
    """Called by the translator when a whole frame runs unmodified: logs it (INFO, with its
    catalogue code) and keeps it for explain() (the last 10,000).

    (filename, lineno) is the frame's own line where the trace stopped (the call site when
    an inlined call failed); (inner_file, inner_line), when given and different, is where
    the reason arose inside the inlined call (logged)."""
    b = GraphBreak(str(reason), qualname, filename, lineno)
    inner = ""
    if inner_file is not None and (inner_file, inner_line) != (filename, lineno):
        inner = f" (inside a call, at {inner_file}:{inner_line})"
    log.info("running %s (%s:%s) unmodified: [%s] %s%s", qualname, filename, lineno, b.code,
             b.reason, inner)
    _events.unmodified(b, (inner_file, inner_line) if inner else None)
    unmodified_log.append(b)
    if len(unmodified_log) > 10000:
        del unmodified_log[:5000]


class Recompile:
    """One recompile: the function and the guard failure that caused it (the old and new
    values are part of the reason, e.g. "L['x'] TENSOR_MATCH: size mismatch at index 0.
    expected 8, actual 9")."""

    __slots__ = ("qualname", "filename", "lineno", "reason")

    def __init__(self, qualname, filename, lineno, reason):
        self.qualname, self.filename, self.lineno, self.reason = qualname, filename, lineno, reason

    def __repr__(self):
        return f"Recompile({self.qualname} at {self.filename}:{self.lineno}: {self.reason})"


#: Recompiles since the process started (cdynamo.explain reads the new ones).
recompile_log: list = []


_TENSOR_FAIL = re.compile(r"^(?:L\['([A-Za-z_][A-Za-z0-9_]*)'\]|(.+?)) TENSOR_MATCH: (.*)$", re.S)


def _torch_guard_wording(reason):
    """A failed TENSOR_MATCH worded as torch._dynamo words it for guard_fail_fn
    ("tensor 'x' size mismatch at index 0. expected 2, actual 3"; a local's source is its
    name); any other reason unchanged."""
    m = _TENSOR_FAIL.match(reason)
    if m is None:
        return reason
    return f"tensor '{m.group(1) or m.group(2)}' {m.group(3)}"


def record_recompile(qualname, filename, lineno, reason, code=None, options=None):
    """Called by the frame hook before a recompile (kept to the last 10,000); options: the
    CompileOptions it compiles with, whose guard_fail_fn (torch._dynamo.optimize's) is
    called with torch's GuardFail(reason, code), as torch._dynamo calls it. Raises
    torch._dynamo.exc.RecompileError when cdynamo.config.error_on_recompile or
    torch._dynamo.config.error_on_recompile is set: the compiled call raises it (and
    guard_fail_fn's own errors)."""
    fail_fn = getattr(options, "guard_fail_fn", None)
    if fail_fn is not None:
        from torch._dynamo.types import GuardFail
        fail_fn(GuardFail(_torch_guard_wording(str(reason)), code))
    recompile_log.append(Recompile(qualname, filename, lineno, str(reason)))
    _events.recompile(qualname, filename, lineno, str(reason), code)
    if len(recompile_log) > 10000:
        del recompile_log[:5000]
    from cdynamo import config
    dynamo_config = sys.modules.get("torch._dynamo.config")
    if config.error_on_recompile or getattr(dynamo_config, "error_on_recompile", False):
        from torch._dynamo.exc import RecompileError
        raise RecompileError(f"Recompiling function {qualname} in {filename}:{lineno}\n"
                             f"    triggered by the following guard failure(s):\n    - {reason}")
