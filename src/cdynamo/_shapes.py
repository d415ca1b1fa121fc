"""Glue between the C engine and torch's symbolic shapes (internal).

One ``ShapeTrace`` per traced frame holds what torch._dynamo's OutputGraph holds for shapes:
the ShapeEnv, the FakeTensorMode over it, the TracingContext that AOTAutograd and inductor
read while the backend compiles (and that their FX graph / AOTAutograd caches need), the
fake inputs with their symbolic contexts and sources, and the placeholders bound to
symbols. The C engine decides which dimensions are dynamic (automatic dynamic shapes, its
per-code frame state, mark_dynamic; values/symint.c) and calls these helpers on the slow
path only:

  fake_input        a real input tensor -> its fake, with static or symbolic sizes
  lift_symbols      placeholders for the new symbols of a fake input (before it, as Dynamo)
  sym_input         a Python int input made dynamic -> a SymInt placeholder
  finalize          dead symbolic nodes and unused placeholders removed (as Dynamo)
  call_backend      the backend called inside the TracingContext (as torch.compile does)
  guards            ShapeEnv.produce_guards lowered to small integer programs that the C
                    guard checker evaluates over slots (sizes, strides, ints) it reads

The guard programs: each guard expression printed by ShapeEnv (Python syntax over
sources) is parsed with ``ast`` and lowered to a postfix program of int64 words (see
``_Lowering``); an expression outside that small language (floats, calls other than
min/max/abs) keeps a Python callable instead, called with the slot values.
"""
from __future__ import annotations

import ast
import dataclasses
import re
from typing import Any

import sympy
import torch
import torch.fx
from torch._guards import GuardSource, Source, TracingContext, tracing
from torch._subclasses.fake_tensor import FakeTensorMode
from cdynamo import _events
from torch.fx.experimental.symbolic_shapes import (DimDynamic, RelaxedUnspecConstraint,
                                                   ShapeEnv, StatefulSymbolicContext,
                                                   SubclassSymbolicContext,
                                                   compute_unbacked_bindings, free_symbols,
                                                   is_accessor_node)
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

# Codes the engine passes for each dimension (values/symint.c uses the same numbers).
_DIMS = {0: DimDynamic.STATIC, 1: DimDynamic.DYNAMIC, 2: DimDynamic.DUCK}
# Constraint codes: 0 none, 1 relaxed (automatic: warn only), 2 relaxed strict (mark_dynamic).
# Slot properties (guards.c uses the same numbers).
PROP_SIZE, PROP_STRIDE, PROP_OFFSET, PROP_INT, PROP_FLOAT = 0, 1, 2, 3, 4

_SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


@dataclasses.dataclass(frozen=True)
class _NamedSource(Source):
    """A torch Source for a path Dynamo names differently (closure cells, constants): only
    its name matters to the ShapeEnv (symbol names and guard text)."""

    label: str

    @property
    def _name_template(self) -> str:
        return self.label

    @property
    def guard_source(self) -> GuardSource:
        return GuardSource.LOCAL


def _constraint(code: int, dim_range=None):
    """The constraint of a dim: 1 automatic (warn only), 2 marked dynamic (strict; bounded by
    dim_range = (min, max) when mark_dynamic gave min=/max=, as torch._dynamo), else None."""
    if code == 1:
        return RelaxedUnspecConstraint(warn_only=True)
    if code == 2 and dim_range is not None:
        from torch.fx.experimental.symbolic_shapes import StrictMinMaxConstraint
        from torch.utils._sympy.numbers import int_oo
        from torch.utils._sympy.value_ranges import ValueRanges
        lo, hi = dim_range
        return StrictMinMaxConstraint(
            vr=ValueRanges(lower=0 if lo is None else lo, upper=int_oo if hi is None else hi),
            warn_only=False)
    if code == 2:
        return RelaxedUnspecConstraint(warn_only=False)
    return None


def _static_subclass_context(tensor, ts):
    """A symbolic context with every size static for `tensor` read through torch source ts:
    for a traceable wrapper subclass, a SubclassSymbolicContext whose inner contexts (one per
    inner tensor of ``__tensor_flatten__``, read as ``ts.<attr>``, recursively) are static too."""
    from torch._dynamo.source import AttrSource
    ndim = tensor.dim()
    static = dict(dynamic_sizes=[DimDynamic.STATIC] * ndim,
                  dynamic_strides=[DimDynamic.INFER_STRIDE] * ndim,
                  constraint_sizes=[None] * ndim, constraint_strides=[None] * ndim,
                  tensor_source=ts, shape_env_to_source_to_symbol_cache={})
    if not is_traceable_wrapper_subclass(tensor):
        return StatefulSymbolicContext(**static)
    attrs, _ = tensor.__tensor_flatten__()
    inner = {a: _static_subclass_context(getattr(tensor, a), AttrSource(ts, a)) for a in attrs}
    return SubclassSymbolicContext(inner_contexts=inner, **static)


def _dim_ranges(tensor) -> dict:
    """{dim: (min, max)} of the dims mark_dynamic(..., min=, max=) bounded (torch._dynamo's
    _dynamo_dynamic_range marks; entries without bounds are left out)."""
    out = {}
    for r in getattr(tensor, "_dynamo_dynamic_range", ()) or ():
        lo, hi = getattr(r, "min", None), getattr(r, "max", None)
        if lo is not None or hi is not None:
            out[r.dim] = (lo, hi)
    return out


class ShapeTrace:
    """The shape state of one traced frame (see the module docstring)."""

    def __init__(self, capture_scalar_outputs: bool = False):
        self.shape_env = ShapeEnv(allow_scalar_outputs=bool(capture_scalar_outputs),
                                  allow_dynamic_output_shape_ops=False,
                                  prefer_deferred_runtime_asserts_over_guards=False)
        self.fake_mode = FakeTensorMode(shape_env=self.shape_env, allow_non_fake_inputs=True)
        self.tracing_context = TracingContext(self.fake_mode)
        self.capture_scalar_outputs = bool(capture_scalar_outputs)
        #: (fake or SymInt, torch source, symbolic context or None, engine source)
        self.tracked: list = []
        self.float_sources: set = set()   # names of the float inputs (their slots hold floats)
        self.float_symbols: dict = {}     # their symbols (str) -> engine source
        #: sympy.Symbol -> the placeholder node that binds it
        self.bound: dict = {}
        self._torch_sources: dict = {}

    # ---- sources -----------------------------------------------------------------------

    def torch_source(self, src) -> Source:
        """The torch._dynamo Source named as torch._dynamo names `src` (an engine Source), so
        that symbols and guard text read as Dynamo's (L['x'].size()[0], s77)."""
        key = str(src)
        ts = self._torch_sources.get(key)
        if ts is not None:
            return ts
        from torch._dynamo.source import AttrSource, GetItemSource, GlobalSource, LocalSource
        kind = src.kind
        if kind == "local":
            ts = LocalSource(src.name, is_input=True)
        elif kind == "global":
            ts = GlobalSource(src.name)
        elif kind == "attr":
            ts = AttrSource(self.torch_source(src.base), src.name)
        elif kind == "item":
            ts = GetItemSource(self.torch_source(src.base), src.name)
        else:
            ts = _NamedSource(key)
        if ts.name != key:
            ts = _NamedSource(key)
        self._torch_sources[key] = ts
        return ts

    # ---- inputs --------------------------------------------------------------------------

    def fake_input(self, tensor, src, sizes, size_constraints, strides):
        """The fake of an input tensor read through `src`. sizes/strides: a code per dim
        (sizes: 0 static, 1 dynamic, 2 duck; strides: 0 inferred, 1 dynamic),
        size_constraints: 0 none, 1 automatic (warn only), 2 marked dynamic (strict)."""
        ts = self.torch_source(src)
        ndim = len(sizes)
        if is_traceable_wrapper_subclass(tensor):
            return self._fake_subclass_input(tensor, src, ts)
        ranges = _dim_ranges(tensor) if 2 in size_constraints else {}
        ctx = StatefulSymbolicContext(
            dynamic_sizes=[_DIMS[c] for c in sizes],
            dynamic_strides=[DimDynamic.DYNAMIC if c else DimDynamic.INFER_STRIDE for c in strides],
            constraint_sizes=[_constraint(c, ranges.get(i)) for i, c in enumerate(size_constraints)],
            constraint_strides=[_constraint(1) if c else None for c in strides],
            tensor_source=ts,
            shape_env_to_source_to_symbol_cache={},
        )
        assert ndim == tensor.dim()
        fake = self.fake_mode.from_tensor(tensor, source=ts, symbolic_context=ctx, trace=False)
        if getattr(fake, "item_memo", None) is not None:
            # torch memoises .item() of a 0-d input as a backed symbol read through
            # L['x'].item(), a guard source the C guards cannot read: .item() stays unbacked
            fake.item_memo = None
        self.tracing_context.tensor_to_context[tensor] = ctx
        # the metadata the input came with: an in-place view op of the trace (t.unsqueeze_(0))
        # changes the fake's, and the guards are about the input as it came in
        meta = (fake.size(), fake.stride(), fake.storage_offset())
        self.tracked.append((fake, ts, ctx, src, meta))
        if any(sizes):
            _note_dynamic_dims(ts.name, fake, sizes, size_constraints)
        return fake

    def _fake_subclass_input(self, tensor, src, ts):
        """The fake of an input of a traceable wrapper subclass (``__tensor_flatten__``: a
        torchao-style quantized tensor, DTensor, TwoTensor): a fake of the same subclass over
        fake inner tensors, every size static (the engine guards its type and outer
        metadata), as torch._dynamo fakes one with a SubclassSymbolicContext."""
        ctx = _static_subclass_context(tensor, ts)
        fake = self.fake_mode.from_tensor(tensor, source=ts, symbolic_context=ctx, trace=False)
        self.tracing_context.tensor_to_context[tensor] = ctx
        meta = (fake.size(), fake.stride(), fake.storage_offset())
        self.tracked.append((fake, ts, ctx, src, meta))
        return fake

    @staticmethod
    def dynamic_source(name, dim):
        """True when torch.compiler.config.dynamic_sources (TORCH_COMPILE_DYNAMIC_SOURCES)
        marks source `name` (its repr, e.g. "L['x']") dynamic, as torch._dynamo reads it:
        comma-separated entries, each an exact name or a regex (re.match), with an optional
        ":N" suffix naming one dim of a tensor; dim: the tensor dim asked about, or -1 for an
        int source (a suffix is ignored there). Dominant over dynamic=False."""
        spec = getattr(torch.compiler.config, "dynamic_sources", "")
        if not spec:
            return False
        for entry in spec.replace(" ", "").split(","):
            if not entry:
                continue
            m = re.match(r"^(.*):(\d+)$", entry)
            pattern, pdim = (m.group(1), int(m.group(2))) if m else (entry, None)
            if pattern == name or re.match(pattern, name):
                if dim < 0 or pdim is None or pdim == dim:
                    return True
        return False

    def lift_symbols(self, graph, node, fake):
        """Placeholders, inserted before `node`, for the symbols of `fake`'s sizes, strides
        and storage offset not bound yet (as torch._dynamo's _lift_basic_symbols). Returns
        a list of (placeholder, SymInt, prop, dim) in placeholder order."""
        out = []
        parts = [(PROP_SIZE, i, s) for i, s in enumerate(fake.size())]
        parts += [(PROP_STRIDE, i, s) for i, s in enumerate(fake.stride())]
        parts.append((PROP_OFFSET, -1, fake.storage_offset()))
        for prop, dim, s in parts:
            if not isinstance(s, torch.SymInt):
                continue
            expr = s.node.expr
            if not isinstance(expr, sympy.Symbol) or expr in self.bound:
                continue
            with graph.inserting_before(node):
                ph = graph.placeholder(str(expr))
            ph.meta["example_value"] = s
            self.bound[expr] = ph
            out.append((ph, s, prop, dim))
        return out

    def sym_input(self, value, src, graph, name):
        """A Python int read through `src` as a dynamic input: (placeholder, SymInt), or None
        when the ShapeEnv specialises it."""
        ts = self.torch_source(src)
        sym = self.shape_env.create_unspecified_symint_and_symbol(value, ts, DimDynamic.DYNAMIC)
        if not isinstance(sym, torch.SymInt) or not isinstance(sym.node.expr, sympy.Symbol):
            return None
        ph = _input_placeholder(graph, name, sym)
        self.bound[sym.node.expr] = ph
        self.tracked.append((sym, ts, None, src, None))
        _events.dynamic(ts.name, f"symbolic int {sym.node.expr}",
                        "an int input that changed between calls, or dynamic=True")
        return ph, sym

    def float_input(self, value, src, graph, name):
        """A Python float read through `src` as a dynamic input, as torch._dynamo's
        unspecialized float (specialize_float=False): the graph takes it as a 0-d float64
        tensor (placeholder `name`) and reads it back with .item(), a SymFloat of the
        ShapeEnv whose source is `src`. Returns (placeholder, example tensor, item node,
        SymFloat), or None when the ShapeEnv keeps it a constant."""
        from torch._dynamo.source import FloatTensorSource
        ts = self.torch_source(src)
        wrapped = torch.tensor(value, dtype=torch.float64)
        fts = FloatTensorSource(ts)
        ctx = StatefulSymbolicContext(dynamic_sizes=[], dynamic_strides=[], constraint_sizes=[],
                                      constraint_strides=[], tensor_source=fts,
                                      shape_env_to_source_to_symbol_cache={})
        fake = self.fake_mode.from_tensor(wrapped, source=fts, symbolic_context=ctx, trace=False)
        self.tracing_context.tensor_to_context[wrapped] = ctx   # AOTAutograd's fake: the same
        sym = getattr(fake, "item_memo", None)
        if not isinstance(sym, torch.SymFloat):
            return None
        ph = _input_placeholder(graph, name, fake)
        ph.meta["cdynamo_float_input"] = True
        item = graph.call_method("item", (ph,))
        item.meta["example_value"] = sym
        item.meta["cdynamo_keep"] = True   # the trace keeps the value: rollback leaves it
        self.tracked.append((sym, ts, None, src, None))
        self.float_sources.add(ts.name)
        self.float_symbols[str(sym.node.expr)] = src
        return ph, wrapped, item, sym

    def floats_to_specialise(self, exc):
        """For an exception of the backend: the engine sources of the float inputs that
        torch's tensorify pass asks to specialise (TensorifyScalarRestartAnalysis, which
        torch._dynamo answers by restarting its analysis); for any other exception of a graph
        with float inputs, all of them (e.g. inductor cannot return a SymFloat computed from
        one: `return s * 2` raised InductorError, where torch._dynamo returns a stale value);
        else an empty list. Clears torch's record of them (a new trace starts from none, as
        torch._dynamo's)."""
        from torch._dynamo.exc import TensorifyScalarRestartAnalysis
        from torch._dynamo.symbolic_convert import TensorifyState
        cause = exc
        while cause is not None and not isinstance(cause, TensorifyScalarRestartAnalysis):
            cause = getattr(cause, "inner_exception", None) or cause.__cause__
        if cause is None:
            TensorifyState.clear()
            return list(self.float_symbols.values())
        names = set(TensorifyState.force_specializations)
        TensorifyState.clear()
        return [src for name, src in self.float_symbols.items() if name in names]

    def bound_node(self, sym):
        """The placeholder bound to sym's expression when it is one input symbol, or None."""
        return self.bound.get(sym.node.expr)

    def specialize(self, value):
        """A symbolic value as a Python constant, guarded (the ShapeEnv records value == hint)."""
        if isinstance(value, torch.SymBool):
            return bool(value)
        if isinstance(value, torch.SymFloat):
            return float(value)
        if isinstance(value, torch.SymInt):
            return int(value)
        return value

    # ---- finishing the graph -------------------------------------------------------------

    def finalize(self, graph, example_inputs):
        """Remove dead symbolic computations and unused placeholders as torch._dynamo does
        (remove_unused_graphargs); returns the indices of the inputs kept, in order."""
        se = self.shape_env
        if se.deferred_runtime_asserts or se.unbacked_symint_counter or se.unbacked_symfloat_counter:
            from torch.fx.passes.runtime_assert import insert_deferred_runtime_asserts
            insert_deferred_runtime_asserts(torch.fx.GraphModule({}, graph), self.shape_env,
                                            "cdynamo", export=False)
        for node in reversed(list(graph.nodes)):
            if node.users or node.op in ("placeholder", "output"):
                continue
            if (node.op == "call_function" and node.target is _getitem) or \
                    _is_symnode_compute(node) or is_accessor_node(node):
                graph.erase_node(node)
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(example_inputs):
            raise RuntimeError(f"cdynamo: {len(placeholders)} placeholders for "
                               f"{len(example_inputs)} inputs")
        for node, value in zip(placeholders, example_inputs):
            if isinstance(node.meta.get("example_value"), torch.Tensor) != \
                    isinstance(value, torch.Tensor):
                raise RuntimeError(f"cdynamo: graph input {node.name} is out of order")
        n_inputs = len(example_inputs)
        keep = [True] * n_inputs
        used: set = set()
        recheck = []
        for i, node in enumerate(placeholders):
            ex = node.meta.get("example_value")
            binds = isinstance(ex, torch.SymInt) and isinstance(ex.node.expr, sympy.Symbol)
            if binds:
                if not node.users:
                    recheck.append(i)
            elif not node.users:
                keep[i] = False
            elif isinstance(ex, (torch.Tensor,) + _SYM_TYPES):
                used |= free_symbols(ex)
        for i in recheck:
            sym = placeholders[i].meta["example_value"].node.expr
            if sym not in used:
                keep[i] = False
            else:
                used.discard(sym)
        for i, node in enumerate(placeholders):
            if not keep[i]:
                graph.erase_node(node)
        return [i for i in range(n_inputs) if keep[i]]

    def call_backend(self, backend, gm, example_inputs):
        """backend(gm, example_inputs) inside this trace's TracingContext, with a fresh
        FakeTensorMode over the same ShapeEnv, as torch._dynamo hands graphs to backends
        (AOTAutograd re-fakes the inputs from tensor_to_context; inductor's FX graph cache
        and the AOTAutograd cache read the ShapeEnv from it)."""
        ctx = self.tracing_context
        ctx.fake_mode = FakeTensorMode(shape_env=self.shape_env)
        with tracing(ctx):
            return backend(gm, example_inputs)

    # ---- guards --------------------------------------------------------------------------

    def has_symbols(self) -> bool:
        se = self.shape_env
        return bool(se.backed_var_to_val) or bool(se.guards) or \
            bool(se.unbacked_symint_counter or se.unbacked_symfloat_counter)

    def guards(self):
        """The shape guards of this trace for the C guard checker, or None when nothing is
        symbolic. Returns (masks, slots, programs):
          masks: [(engine source, size mask bytes, stride mask bytes)] for inputs with
                 symbolic dims (TENSOR_MATCH skips them; as Dynamo's size=[None, ...]);
          slots: [(engine source, prop, dim)]: slot k holds that size/stride/offset of a
                 tensor input (filled by its TENSOR_MATCH) or that int input (its
                 TYPE_MATCH);
          programs: [(code tuple or None, python callable or None, text, slot tuple)].
        """
        if not self.tracked or not self.has_symbols():
            return None
        by_name = {t[1].name: t[3] for t in self.tracked}
        names: dict = {}
        slot_specs: list = []

        def source_ref(s):
            n = s.name
            var = names.get(n)
            if var is None:
                var = names[n] = f"_v{len(slot_specs)}"
                slot_specs.append(s)
            return var

        fs = [(_as_it_came(t[0], t[4]),) + t[1:4] for t in self.tracked]
        exprs = self.shape_env.produce_guards_verbose(
            [t[0] for t in fs], [t[1] for t in fs], source_ref=source_ref,
            input_contexts=[t[2] for t in fs], langs=("python",))[0].exprs
        masks = []
        for fake, ts, ctx, src in fs:
            if not isinstance(fake, torch.Tensor):
                continue
            sm = bytes(int(_maybe_int(s) is None) for s in fake.size())
            tm = bytes(int(_maybe_int(s) is None) for s in fake.stride())
            if any(sm) or any(tm):
                masks.append((src, sm, tm))
        # keep only the slots the expressions read, renumbered densely
        used = sorted({int(m) for e in exprs for m in re.findall(r"\b_v(\d+)\b", e)})
        renumber = {old: new for new, old in enumerate(used)}
        slots = []
        for old in used:
            slot = _slot_of(slot_specs[old], by_name)
            if slot[1] == PROP_INT and slot_specs[old].name in self.float_sources:
                slot = (slot[0], PROP_FLOAT, -1)
            slots.append(slot)
        float_slots = {k for k, sl in enumerate(slots) if sl[1] == PROP_FLOAT}
        slot_names = [slot_specs[old].name for old in used]
        programs = []
        for e in exprs:
            e2 = re.sub(r"\b_v(\d+)\b", lambda m: f"_v{renumber[int(m.group(1))]}", e)
            text = re.sub(r"\b_v(\d+)\b", lambda m: slot_names[int(m.group(1))], e2)
            reads = tuple(sorted({int(m) for m in re.findall(r"\b_v(\d+)\b", e2)}))
            code, fn = _lower(e2, len(slots), frozenset(float_slots))
            programs.append((code, fn, text, reads))
        return masks, slots, programs, slot_names


_SIZE_REASONS = {0: "automatic dynamic (the size changed) or dynamic=True",
                 1: "automatic dynamic (the size changed)", 2: "marked with mark_dynamic"}


def _note_dynamic_dims(name, fake, sizes, constraints):
    """Tell cdynamo._events which dims of input `name` are symbolic and why."""
    for i, code in enumerate(sizes):
        if code:
            expr = fake.size(i)
            kind = "symbolic" if isinstance(expr, torch.SymInt) else "static (specialised)"
            _events.dynamic(f"{name}.size()[{i}]", f"{kind} {expr}",
                            _SIZE_REASONS.get(constraints[i] if i < len(constraints) else 0,
                                              "dynamic"))


def _input_placeholder(graph, name, example):
    """A placeholder `name` after the graph's inputs (before its first other node), its
    example_value `example`."""
    first = next((n for n in graph.nodes if n.op != "placeholder"), None)
    if first is None:
        ph = graph.placeholder(name)
    else:
        with graph.inserting_before(first):
            ph = graph.placeholder(name)
    ph.meta["example_value"] = example
    return ph


def _as_it_came(fake, meta):
    """The fake of an input with the sizes, strides and offset it was made with: `fake`
    itself, or a view of it with those (an in-place view op of the trace changed its own)."""
    if meta is None:
        return fake
    size, stride, offset = meta
    same = (fake.dim() == len(size) and
            all(str(a) == str(b) for a, b in zip(fake.size(), size)) and
            all(str(a) == str(b) for a, b in zip(fake.stride(), stride)) and
            str(fake.storage_offset()) == str(offset))
    if same:
        return fake
    with fake.fake_mode:
        return fake.as_strided(size, stride, offset)


def _maybe_int(s):
    if isinstance(s, torch.SymInt):
        return s.node.maybe_as_int()
    return s


def _slot_of(ts, by_name):
    """(engine source, prop, dim) for a torch source read by a guard expression."""
    from torch._dynamo.source import TensorProperty, TensorPropertySource
    if isinstance(ts, TensorPropertySource):
        prop = {TensorProperty.SIZE: PROP_SIZE, TensorProperty.STRIDE: PROP_STRIDE,
                TensorProperty.STORAGE_OFFSET: PROP_OFFSET}[ts.prop]
        return by_name[ts.base.name], prop, -1 if ts.idx is None else int(ts.idx)
    return by_name[ts.name], PROP_INT, -1


_getitem = __import__("operator").getitem


def _is_symnode_arg(a) -> bool:
    if isinstance(a, (int, float, bool)):
        return True
    if isinstance(a, torch.fx.Node):
        return isinstance(a.meta.get("example_value"), _SYM_TYPES)
    return False


def _is_symnode_compute(node) -> bool:
    """A call computing a symbolic scalar from symbolic scalars: pure, removable when unused
    (torch._dynamo's remove_unused_graphargs removes the same)."""
    if node.op != "call_function" or not isinstance(node.meta.get("example_value"), _SYM_TYPES):
        return False
    return all(_is_symnode_arg(a) for a in node.args) and \
        all(_is_symnode_arg(a) for a in node.kwargs.values())


def set_example(node, value):
    """node.meta["example_value"] = value, and the unbacked symbols it binds (as
    torch._dynamo's set_example_value)."""
    node.meta["example_value"] = value
    shape_env = None
    if isinstance(value, torch.Tensor):
        mode = getattr(value, "fake_mode", None)
        shape_env = getattr(mode, "shape_env", None)
    elif isinstance(value, _SYM_TYPES):
        shape_env = value.node.shape_env
    if shape_env is not None and shape_env.pending_fresh_unbacked_symbols:
        bindings = compute_unbacked_bindings(shape_env, value)
        if bindings:
            node.meta["unbacked_bindings"] = bindings


# ---- guard expressions -> programs ----------------------------------------------------------

# Opcodes of a guard program (guards.c evaluates them; keep the numbers in sync).
OP_CONST, OP_SLOT, OP_ADD, OP_SUB, OP_MUL, OP_FLOORDIV, OP_MOD, OP_POW, OP_NEG = range(9)
OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_NOT, OP_MIN, OP_MAX, OP_ABS = range(9, 19)
OP_JUMP_IF_FALSE_OR_POP, OP_JUMP_IF_TRUE_OR_POP, OP_AND, OP_OR, OP_ISNAN = range(19, 24)
_INT64 = (-(1 << 63), (1 << 63) - 1)
MAX_DEPTH = 32


class _Unsupported(Exception):
    pass


class _Lowering:
    """Postfix lowering of one guard expression (ast) into int64 words."""

    _BIN = {ast.Add: OP_ADD, ast.Sub: OP_SUB, ast.Mult: OP_MUL, ast.FloorDiv: OP_FLOORDIV,
            ast.Mod: OP_MOD, ast.Pow: OP_POW, ast.BitAnd: OP_AND, ast.BitOr: OP_OR}
    _CMP = {ast.Eq: OP_EQ, ast.NotEq: OP_NE, ast.Lt: OP_LT, ast.LtE: OP_LE, ast.Gt: OP_GT,
            ast.GtE: OP_GE}

    def __init__(self, nslots, float_slots=frozenset()):
        self.code: list = []
        self.nslots = nslots
        self.float_slots = float_slots   # slots holding a float's bits: only math.isnan reads them
        self.depth = 0
        self.max_depth = 0

    def _push(self, n=1):
        self.depth += n
        self.max_depth = max(self.max_depth, self.depth)

    def emit(self, node):
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool):
                v = int(v)
            if type(v) is not int or not (_INT64[0] <= v <= _INT64[1]):
                raise _Unsupported(repr(v))
            self.code += [OP_CONST, v]
            self._push()
        elif isinstance(node, ast.Name):
            m = re.fullmatch(r"_v(\d+)", node.id)
            if m is None or int(m.group(1)) >= self.nslots or int(m.group(1)) in self.float_slots:
                raise _Unsupported(node.id)
            self.code += [OP_SLOT, int(m.group(1))]
            self._push()
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "math.isnan" and \
                len(node.args) == 1 and not node.keywords and \
                isinstance(node.args[0], ast.Name) and \
                (m := re.fullmatch(r"_v(\d+)", node.args[0].id)) is not None and \
                int(m.group(1)) in self.float_slots:
            self.code += [OP_SLOT, int(m.group(1)), OP_ISNAN]   # math.isnan(float input)
            self._push()
        elif isinstance(node, ast.BinOp) and type(node.op) in self._BIN:
            self.emit(node.left)
            self.emit(node.right)
            self.code.append(self._BIN[type(node.op)])
            self.depth -= 1
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not, ast.UAdd)):
            self.emit(node.operand)
            if isinstance(node.op, ast.USub):
                self.code.append(OP_NEG)
            elif isinstance(node.op, ast.Not):
                self.code.append(OP_NOT)
        elif isinstance(node, ast.BoolOp):
            jump = OP_JUMP_IF_FALSE_OR_POP if isinstance(node.op, ast.And) else OP_JUMP_IF_TRUE_OR_POP
            fixups = []
            for k, v in enumerate(node.values):
                self.emit(v)
                if k < len(node.values) - 1:
                    self.code += [jump, 0]
                    fixups.append(len(self.code) - 1)
                    self.depth -= 1
            for at in fixups:
                self.code[at] = len(self.code)
        elif isinstance(node, ast.Compare):
            # a < b < c  ->  (a < b) and (b < c): operands are pure, re-evaluated
            parts = []
            left = node.left
            for op, right in zip(node.ops, node.comparators):
                if type(op) not in self._CMP:
                    raise _Unsupported(type(op).__name__)
                parts.append((left, op, right))
                left = right
            fixups = []
            for k, (a, op, b) in enumerate(parts):
                self.emit(a)
                self.emit(b)
                self.code.append(self._CMP[type(op)])
                self.depth -= 1
                if k < len(parts) - 1:
                    self.code += [OP_JUMP_IF_FALSE_OR_POP, 0]
                    fixups.append(len(self.code) - 1)
                    self.depth -= 1
            for at in fixups:
                self.code[at] = len(self.code)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("max", "min", "abs", "Max", "Min") and not node.keywords:
            name = node.func.id.lower()
            if name == "abs":
                if len(node.args) != 1:
                    raise _Unsupported("abs")
                self.emit(node.args[0])
                self.code.append(OP_ABS)
            else:
                if len(node.args) < 2:
                    raise _Unsupported(name)
                self.emit(node.args[0])
                for a in node.args[1:]:
                    self.emit(a)
                    self.code.append(OP_MAX if name == "max" else OP_MIN)
                    self.depth -= 1
        else:
            raise _Unsupported(ast.dump(node)[:80])


def _lower(expr: str, nslots: int, float_slots=frozenset()):
    """(code tuple, None) for an expression in the program language (int64 arithmetic; a
    float input's slot only as math.isnan's argument), else (None, callable) taking the slot
    values positionally."""
    try:
        tree = ast.parse(expr, mode="eval")
        low = _Lowering(nslots, float_slots)
        low.emit(tree.body)
        if low.max_depth > MAX_DEPTH:
            raise _Unsupported("too deep")
        return tuple(low.code), None
    except (_Unsupported, SyntaxError, RecursionError):
        pass
    import math
    from torch.fx.experimental.symbolic_shapes import (IsNonOverlappingAndDenseIndicator,
                                                       cast_symbool_to_symint_guardless)
    env: dict[str, Any] = {"math": math, "torch": torch,
                           "IsNonOverlappingAndDenseIndicator": IsNonOverlappingAndDenseIndicator,
                           "cast_symbool_to_symint_guardless": cast_symbool_to_symint_guardless,
                           "inf": float("inf")}
    params = ", ".join(f"_v{i}" for i in range(nslots))
    fn = eval(f"lambda {params}: bool({expr})", env)  # noqa: S307 - our own guard text
    return None, fn
