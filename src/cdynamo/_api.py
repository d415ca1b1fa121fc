"""cdynamo's public Python API. Thin glue over the C engine (cdynamo._C): argument checking,
the compile options object, the nn.Module wrapper and inspection helpers. No tracing here."""
from __future__ import annotations

import functools
import logging
import os
import types
from typing import Any, Callable, NamedTuple

import torch

from . import _backends, _compat

log = logging.getLogger("cdynamo")

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep

_engine = None          # the cdynamo._C module once importable
_engine_error = None    # why it is not


def _set_engine(module, error) -> None:
    global _engine, _engine_error
    _engine, _engine_error = module, error
    if module is not None:
        CompiledModule.__call__ = module.compiled_module_call


def _C():
    """The C engine module; RuntimeError with the import failure when it is not built."""
    if _engine is None:
        raise RuntimeError(
            "cdynamo's C engine (cdynamo._C) is not available; build and install the package "
            f"with `pip install --no-build-isolation .` (import error: {_engine_error})")
    return _engine


class CompileOptions:
    """Options of one cdynamo.compile call, read by the C engine on each compiled frame.

    Attributes:
        backend: the resolved compiler, (gm: torch.fx.GraphModule, example_inputs: list) -> callable.
        backend_name: str, e.g. "inductor", or the callable's __name__.
        fullgraph: bool; True makes anything that cannot be captured whole an error instead
            of an eager fallback (as torch.compile).
        dynamic: None (automatic dynamic shapes: the first compile is static, a dim or
            int input that changed becomes symbolic), True (symbolic from the start) or
            False (static; only mark_dynamic'd dims are symbolic), as torch.compile.
        mode, options: as passed (inductor only).
        guard_filter_fn: None, or torch.compile's options["guard_filter_fn"]: called once per
            compiled frame with a list of torch GuardFilterEntry (one per guard), returning
            one bool per entry; guards answered False are not checked (see _glue.guard_filter).
        guard_fail_fn: None, or torch._dynamo.optimize's guard_fail_fn: called with a torch
            GuardFail(reason, orig_code) before each recompile (_glue.record_recompile).
    """

    __slots__ = ("backend", "backend_name", "fullgraph", "dynamic", "mode", "options",
                 "guard_filter_fn", "guard_fail_fn")

    def __init__(self, backend, backend_name, fullgraph, dynamic, mode=None, options=None,
                 guard_filter_fn=None):
        self.backend = backend
        self.backend_name = backend_name
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        self.mode = mode
        self.options = options
        self.guard_filter_fn = guard_filter_fn
        self.guard_fail_fn = None

    def __repr__(self):
        return (f"CompileOptions(backend={self.backend_name!r}, fullgraph={self.fullgraph}, "
                f"dynamic={self.dynamic})")


def _make_options(backend, fullgraph, dynamic, mode, options) -> CompileOptions:
    if not isinstance(fullgraph, bool):
        raise TypeError(f"cdynamo.compile: fullgraph must be a bool (True or False), "
                        f"got {type(fullgraph).__name__}")
    if dynamic is not None and dynamic is not False and dynamic is not True:
        raise TypeError(f"cdynamo.compile: dynamic must be None, True or False, got {dynamic!r}")
    if mode is not None and not isinstance(mode, str):
        raise TypeError(f"cdynamo.compile: mode must be a str or None, got {type(mode).__name__}")
    guard_filter_fn = None
    if isinstance(options, dict) and "guard_filter_fn" in options:
        # as torch.compile: taken out of options for every backend, applied to the guards
        guard_filter_fn = options["guard_filter_fn"]
        if guard_filter_fn is not None and not callable(guard_filter_fn):
            raise TypeError("cdynamo.compile: options['guard_filter_fn'] must be a callable "
                            "(list of torch GuardFilterEntry -> list of bool), got "
                            f"{type(guard_filter_fn).__name__}")
        options = {k: v for k, v in options.items() if k != "guard_filter_fn"} or None
    compiler, name = _backends.resolve_backend(backend, mode=mode, options=options)
    return CompileOptions(compiler, name, fullgraph, dynamic, mode, options, guard_filter_fn)


def _forward_lives_in_torch(mod: torch.nn.Module) -> types.CodeType | None:
    """The code of type(mod).forward when it is torch's own (skipped unless forced), else None."""
    code = getattr(getattr(type(mod), "forward", None), "__code__", None)
    if code is not None and code.co_filename.startswith(_TORCH_DIR):
        return code
    return None


class _CompiledFunction:
    """Python fallback around an engine wrapper that cannot take attributes or bind as a method."""

    def __init__(self, wrapped, fn):
        self._cdynamo_call = wrapped
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        return self._cdynamo_call(*args, **kwargs)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return types.MethodType(self, obj)


def _finish_function_wrapper(wrapped, fn):
    """Give the engine's wrapper fn's metadata (__wrapped__, __name__, ...) as functools does."""
    if hasattr(type(wrapped), "__get__"):
        try:
            functools.update_wrapper(wrapped, fn)
            return wrapped
        except (AttributeError, TypeError):
            pass
    log.debug("cdynamo: engine wrapper %s takes no attributes or cannot bind; using a Python "
              "wrapper", type(wrapped).__name__)
    return _CompiledFunction(wrapped, fn)


class CompiledModule(_compat.OptimizedModule):
    """An nn.Module compiled by cdynamo.compile: a torch._dynamo OptimizedModule (what
    torch.compile returns for a module), so library code that checks
    ``isinstance(m, OptimizedModule)`` and unwraps ``m._orig_mod`` treats it as compiled.

    Holds the original module as ``_orig_mod``. Calling it runs the original module (its
    nn.Module.__call__ with hooks, then forward) with the frame hook active, so forward is
    traced and compiled. As OptimizedModule: attribute reads and writes that the wrapper does
    not have go to the original module; ``training``, ``train()``/``eval()`` apply to it;
    ``state_dict`` and ``load_state_dict`` are the original's (without an ``_orig_mod.``
    prefix, unlike torch's). Pickles as the original module and the compile options when the
    backend is a name.
    """

    def __init__(self, mod: torch.nn.Module, options: CompileOptions):
        # as OptimizedModule: _orig_mod first, since attribute access forwards to it
        object.__setattr__(self, "_orig_mod", mod)
        object.__setattr__(self, "_super_module_initialized", False)
        torch.nn.Module.__init__(self)
        object.__setattr__(self, "_super_module_initialized", True)
        self._orig_mod = mod
        object.__setattr__(self, "_cdynamo_options", options)
        object.__setattr__(self, "_cdynamo_call", _C().wrap(mod, options))

    @property
    def dynamo_ctx(self):
        """What OptimizedModule.dynamo_ctx is to libraries (Lightning's from_compiled): a
        callable that compiles another callable with this module's compile options."""
        return _CompileWith(self._cdynamo_options)

    def __reduce__(self):
        o = self._cdynamo_options
        backend = o.backend_name if o.backend_name in _backends.BACKEND_NAMES else o.backend
        return (_rebuild_compiled_module,
                (self._orig_mod, backend, o.fullgraph, o.dynamic, o.mode, o.options))

    def __call__(self, *args, **kwargs):
        # replaced by cdynamo._C.compiled_module_call once the engine is loaded
        # (_set_engine): the same call without a Python frame of its own
        return self._cdynamo_call(*args, **kwargs)

    def forward(self, *args, **kwargs):
        return self._cdynamo_call(*args, **kwargs)

    def _call_lazy_check(self, *args, **kwargs):
        return self._cdynamo_call(*args, **kwargs)

    def __getattr__(self, name):
        modules = self.__dict__.get("_modules")
        if modules is not None and "_orig_mod" in modules:
            if name == "_orig_mod":
                return modules["_orig_mod"]
            return getattr(modules["_orig_mod"], name)
        return torch.nn.Module.__getattr__(self, name)

    @property
    def training(self):
        mods = self.__dict__.get("_modules")
        return mods["_orig_mod"].training if mods and "_orig_mod" in mods else True

    @training.setter
    def training(self, value):
        mods = self.__dict__.get("_modules")
        if mods and "_orig_mod" in mods:
            mods["_orig_mod"].training = value

    def state_dict(self, *args, **kwargs):
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        return self._orig_mod.load_state_dict(*args, **kwargs)

    def __repr__(self):
        return f"CompiledModule({self._cdynamo_options.backend_name!r}, {self._orig_mod!r})"


class _CompileWith:
    """compile(fn) with fixed CompileOptions: a CompiledModule's dynamo_ctx."""

    __slots__ = ("options",)

    def __init__(self, options: CompileOptions):
        self.options = options

    def __call__(self, fn):
        return _finish_function_wrapper(_C().wrap(_top_level_target(fn), self.options), fn)

    def __repr__(self):
        return f"_CompileWith({self.options!r})"


def _rebuild_compiled_module(mod, backend, fullgraph, dynamic, mode, options):
    """Unpickle a CompiledModule: compile the unpickled original module again."""
    return compile(mod, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode,
                   options=options)


def compile(model: Callable | None = None, *, backend: str | Callable = "inductor",
            fullgraph: bool = False, dynamic: bool | None = None, mode: str | None = None,
            options: dict | None = None, disable: bool = False):
    """Compile a function or nn.Module with cdynamo, as torch.compile.

    Usable as ``cdynamo.compile(fn)``, ``@cdynamo.compile``, ``@cdynamo.compile(backend="eager")``
    and ``cdynamo.compile(module)``. Each call of the result runs the function with cdynamo's
    frame hook active: on the first call of a code object its bytecode is traced into a
    torch.fx graph, handed to the backend, and replaced by code that calls the compiled graph;
    later calls check the guards (in C) and reuse the entry. At a graph break (a branch on a
    tensor value, a call that cannot be traced) the graph so far is compiled, the break runs in
    plain Python and a generated resume function continues, compiled in turn; each break is
    logged (INFO) under the "cdynamo" logger. Code that cannot be handled at all (e.g. a break
    inside a loop) runs unmodified, with the reason logged; functions it calls are still
    compiled.

    Args:
        model: a callable, or an nn.Module instance (then a CompiledModule is returned). None
            returns a decorator taking the callable.
        backend: "eager", "aot_eager", "inductor" (default), or a callable
            ``(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> callable``,
            as torch.compile.
        fullgraph: bool, as torch.compile: True turns the first graph break (or a frame that
            cannot be captured) into a RuntimeError naming the reason and the source line.
        dynamic: as torch.compile. None (default): automatic dynamic shapes, as torch._dynamo
            (the first compile specialises every size; when a recompile is caused by a size or
            a Python int input that changed, the dims / ints that changed become symbolic, so
            one graph serves every size; 0 and 1 stay specialised). True: every dim and int
            input symbolic from the first compile. False: static shapes (a new shape
            recompiles, up to ``cdynamo.config.cache_size_limit`` entries per code object),
            except dims marked with mark_dynamic.
        mode: inductor mode (str), as torch.compile; only with backend "inductor".
        options: dict of inductor options, as torch.compile; only with backend "inductor".
        disable: bool; True returns model unchanged (as torch.compile).

    Returns:
        A callable with model's metadata (functools.update_wrapper), a CompiledModule for an
        nn.Module, or a decorator when model is None.

    Raises:
        TypeError: model is not callable; fullgraph not a bool; dynamic not None/False/True;
            backend neither str nor callable.
        ValueError: unknown backend name (the message lists the valid choices); mode/options
            with a backend other than "inductor".
        RuntimeError: bad mode/options (as torch.compile); the C engine is not built.
    """
    if model is None:
        # Check the arguments now, so a bad decorator argument fails where it is written.
        _make_options(backend, fullgraph, dynamic, mode, options)

        def decorator(fn):
            return compile(fn, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode,
                           options=options, disable=disable)

        return decorator
    if not callable(model):
        raise TypeError(f"cdynamo.compile: expected a function, method or nn.Module to compile, "
                        f"got {type(model).__name__} (not callable)")
    opts = _make_options(backend, fullgraph, dynamic, mode, options)
    if disable:
        return model
    return _compile_with(model, opts)


def _compile_with(model: Callable, opts: CompileOptions):
    """compile() of a callable model with options already made (torch._dynamo.optimize's
    path sets guard_fail_fn on them)."""
    engine = _C()
    while True:
        # compile(compile(fn)): the outer options win, as torch.compile's innermost_fn; a
        # function torch.compile or torch._dynamo.disable wrapped (any recursive=) is
        # compiled itself, as torch.compile compiles it
        if isinstance(model, engine.CompiledFunction):
            model = model._cdynamo_orig_callable
        elif (not isinstance(model, torch.nn.Module) and
              callable(getattr(model, "_torchdynamo_orig_callable", None))):
            model = model._torchdynamo_orig_callable
        else:
            break
    _patch_torch_once()
    if isinstance(model, torch.nn.Module):
        forced = _forward_lives_in_torch(model)
        if forced is not None:
            engine.mark_force_compile(forced)
        return CompiledModule(model, opts)
    return _finish_function_wrapper(engine.wrap(_top_level_target(model), opts), model)


def _runs_untraced(fn) -> bool:
    """Whether a call of fn (a callable) runs no frame cdynamo would trace: a builtin or C
    callable (torch.sin, an OpOverload), a Python function whose trace rule makes calls to it
    inlined, recorded, folded or polyfilled (torch.nn.functional.relu, torch.functional's
    ops), or a functools.partial of one of them. Functions under the ``skip`` rule (torch's
    internals, which may call torch.compile on their own helpers) still run as they are;
    classes and objects with a Python ``__call__`` are traced where they run."""
    from . import trace_rules
    if isinstance(fn, functools.partial):
        return _runs_untraced(fn.func)
    if isinstance(fn, (types.FunctionType, types.MethodType)):
        rule = trace_rules.lookup_callable(fn)
        return rule is not None and rule.rule not in (trace_rules.COMPILE, trace_rules.SKIP)
    return isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType,
                           types.MethodWrapperType, types.WrapperDescriptorType,
                           types.MethodDescriptorType, types.ClassMethodDescriptorType,
                           torch._ops.OpOverload, torch._ops.OpOverloadPacket))


def _top_level_target(fn):
    """What the engine's wrapper calls for cdynamo.compile(fn): fn itself, or, when fn's own
    call would trace nothing (_runs_untraced: ``cdynamo.compile(torch.sin)``), a new Python
    function calling it, whose frame is traced with the call in it (as torch.compile wraps
    such callables, external_utils.wrap_inline). Each wrapper has its own code object, so
    each compiled callable has its own cache entries; its file "<cdynamo.compile>" and
    globals' module name have no trace rule (this module's code is never traced)."""
    if not _runs_untraced(fn):
        return fn

    def call_compiled_callable(*args, **kwargs):
        return fn(*args, **kwargs)

    code = call_compiled_callable.__code__.replace(co_filename="<cdynamo.compile>")
    return types.FunctionType(code, {"__name__": "cdynamo_compiled_callable",
                                     "__builtins__": __builtins__},
                              "call_compiled_callable", None,
                              call_compiled_callable.__closure__)


_torch_patched = False


def _patch_torch_once() -> None:
    """What torch.compile changes in torch on its first use and a trace relies on, done once
    per process on the first cdynamo.compile: torch.distributions' argument validation is off
    by default (``Distribution.set_default_validate_args(False)``, as torch._dynamo's
    TorchPatcher), so constructing a distribution in compiled code checks no tensor values
    (a data-dependent graph break per constraint); ``validate_args=True`` still validates."""
    global _torch_patched
    if not _torch_patched:
        _torch_patched = True
        torch.distributions.Distribution.set_default_validate_args(False)


def reset() -> None:
    """Clear every cache entry of every code object and the compiled-graph globals' bookkeeping,
    as torch._dynamo.reset(), and remove the __compiled_fn_N / __resume_at_* globals the engine
    installed, so their graphs are freed. Counters are not cleared (see reset_counters)."""
    from cdynamo import _glue
    _C().reset()
    _glue.clear_installed_globals()


def counters() -> dict:
    """The engine's counters since start or reset_counters(): dict of str -> int with keys
    "frames", "cache_hits", "cache_misses", "compiles", "unmodified", "cache_limit_hits"."""
    return _C().counters()


def reset_counters() -> None:
    """Set every counter of counters() to 0."""
    _C().reset_counters()


class _CacheEntryFields(NamedTuple):
    guards: list
    code: types.CodeType


class CacheEntry(_CacheEntryFields):
    """One cache entry of a code object: the guard descriptions and the transformed code.

    Unpacks as ``guards, code = entry`` (as seed 004's ``guard, code = cache_entries[0]``).
    ``recompile_reason`` (str or None): for an entry made by a recompile, the guard of the
    entry tried before it that failed, with the old and new values (e.g. ``"L['x']
    TENSOR_MATCH: size mismatch at index 0. expected 8, actual 9"`` or ``"SHAPE_GUARD: 2 <=
    L['x'].size()[0] failed (L['x'].size()[0] = 1)"``); None for the first entry."""

    def __new__(cls, guards, code, recompile_reason=None):
        self = super().__new__(cls, guards, code)
        self.recompile_reason = recompile_reason
        return self

    def __repr__(self):
        lines = [f"CacheEntry(code=<code {self.code.co_name} at {hex(id(self.code))}>, guards=["]
        lines.extend(f"    {g!r}," for g in self.guards)
        lines.append("]" + (f", recompile_reason={self.recompile_reason!r})"
                            if self.recompile_reason else ")"))
        return "\n".join(lines)


def _code_of(obj) -> types.CodeType:
    """The original code object whose frames cdynamo compiles for obj."""
    seen = 0
    while seen < 16:
        seen += 1
        if isinstance(obj, types.CodeType):
            return obj
        if isinstance(obj, CompiledModule):
            obj = obj._orig_mod
            continue
        if isinstance(obj, torch.nn.Module):
            obj = type(obj).forward
            continue
        if isinstance(obj, types.MethodType):
            obj = obj.__func__
            continue
        if isinstance(obj, types.FunctionType):
            return obj.__code__
        inner = getattr(obj, "__wrapped__", None)
        if inner is not None:
            obj = inner
            continue
        break
    raise TypeError(f"cdynamo.cache_entries: cannot find the code of {type(obj).__name__}; pass a "
                    "function, a compiled function, a bound method, an nn.Module or a code object")


def cache_entries(fn) -> list[CacheEntry]:
    """The cache entries of fn's code object, most recently used first (as torch's
    ``_debug_get_cache_entry_list``).

    Args:
        fn: a function, the result of cdynamo.compile, a bound method, an nn.Module (its
            type's forward) or a code object.

    Returns:
        list of CacheEntry(guards: list[str], code: types.CodeType) with recompile_reason
        (str or None); empty when not compiled.

    Raises:
        TypeError: no code object can be found for fn.
    """
    code = _code_of(fn)
    return [CacheEntry(list(guards), new_code, reason)
            for guards, new_code, reason in _C().cache_entries(code)]


def graph_break() -> None:
    """Force a graph break here, as torch._dynamo.graph_break().

    Called from a compiled function, the translator compiles the graph so far, runs this
    call in plain Python (it does nothing) and continues in a resume function. Called
    outside a compiled function it does nothing."""
    return None


def assume_constant_result(fn):
    """Mark fn so that a compiled function calling it calls it once, while tracing, and uses
    its result as a constant (not guarded): for helpers whose answer is fixed for the
    process, such as an install probe. The same marker as torch._dynamo's
    assume_constant_result (the attribute ``_dynamo_marked_constant``), so either compiler
    honours either spelling; it also holds through functools.lru_cache and functools.wraps
    wrappers, which copy the attribute. The arguments of such a call must be constants (or
    objects, then guarded by identity); otherwise the call is a graph break. Returns fn."""
    fn._dynamo_marked_constant = True
    return fn


class ExplainOutput:
    """What explain() saw (as torch._dynamo.explain):

    graph_count (int), graphs (list of torch.fx.GraphModule), graph_break_count (int),
    break_reasons (list of GraphBreak with reason, code, explanation, hint, qualname,
    filename, lineno), unmodified_frames (list of GraphBreak: frames run without compiling,
    with the reason), reasons_by_code (dict code -> number of breaks and unmodified frames,
    codes from cdynamo.break_reasons), ops_per_graph (list per graph of the targets of its
    call nodes), op_count (int), guards (guard strings of every cache entry made; also as
    out_guards, torch's name), compile_times ("": not measured), recompile_reasons (list of
    Recompile with qualname, filename, lineno, reason: the guard that failed, old and new
    values), out (fn's result), counters (engine counter changes), regions (list of dicts
    from regional compilation, cdynamo._regions.region_log: frame, label, kind, calls,
    subgraph (None when not outlined), reason), ddp_splits (list of
    cdynamo._distributed.SplitRecord: each graph compiled under DistributedDataParallel,
    its bucket caps, buckets, number of subgraphs and why it was or was not split; the
    subgraphs are in graphs)."""

    def __init__(self, graphs, guards, out, counter_delta, breaks, unmodified=(), recompiles=(),
                 regions=(), ddp_splits=()):
        self.graphs = graphs
        self.graph_count = len(graphs)
        self.break_reasons = list(breaks)
        self.graph_break_count = len(self.break_reasons)
        self.unmodified_frames = list(unmodified)
        self.reasons_by_code = {}
        for b in self.break_reasons + self.unmodified_frames:
            self.reasons_by_code[b.code] = self.reasons_by_code.get(b.code, 0) + 1
        self.ops_per_graph = [
            [n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
            for gm in graphs]
        self.guards = guards
        self.op_count = sum(len(o) for o in self.ops_per_graph)   # as torch's ExplainOutput
        self.out_guards = guards
        self.compile_times = ""
        self.recompile_reasons = list(recompiles)
        self.out = out
        self.counters = counter_delta
        self.regions = list(regions)
        self.ddp_splits = list(ddp_splits)

    def __str__(self):
        lines = [f"Graph Count: {self.graph_count}",
                 f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {sum(len(o) for o in self.ops_per_graph)}",
                 "Break Reasons:"]
        for i, b in enumerate(self.break_reasons, 1):
            lines.append(f"  Break Reason {i}: [{b.code}] {b.reason}")
            lines.append(f"    at {b.filename}:{b.lineno} in {b.qualname}")
        for d in self.ddp_splits:
            lines.append(f"  DDP split of {d.frame or 'a graph'}: {d.pieces} subgraph(s), "
                         f"bucket cap {d.bucket_bytes_cap} bytes: {d.reason}")
        for r in self.regions:
            lines.append(f"  Region {r['label']} ({r['kind']}) in {r['frame']}: "
                         + (f"{r['calls']} call(s) share {r['subgraph']}" if r["subgraph"]
                            else f"not outlined: {r['reason']}"))
        if self.unmodified_frames:
            lines.append("Frames run unmodified:")
            for b in self.unmodified_frames:
                lines.append(f"  [{b.code}] {b.qualname} ({b.filename}:{b.lineno}): {b.reason}")
        for i, ops in enumerate(self.ops_per_graph):
            lines.append(f"Ops per Graph {i}:")
            lines.extend(f"  {op}" for op in ops)
        lines.append("Guards:")
        lines.extend(f"  - {g}" for g in self.guards)
        if self.recompile_reasons:
            lines.append("Recompile Reasons:")
            lines.extend(f"  - {r.qualname} ({r.filename}:{r.lineno}): {r.reason}"
                         for r in self.recompile_reasons)
        if self.counters.get("unmodified"):
            lines.append(f"Frames run unmodified (not capturable): {self.counters['unmodified']}")
        return "\n".join(lines)

    __repr__ = __str__


def explain(fn: Callable, *, dynamic: bool | None = None) -> Callable[..., ExplainOutput]:
    """``explain(fn)(*args, **kwargs)`` runs fn once under cdynamo with a backend that records
    each graph and runs it eagerly, and returns an ExplainOutput (as torch._dynamo.explain):
    graphs, graph breaks with their reasons, guards, and the recompiles of the run with the
    guard that failed (a function called with several shapes in one run).

    It calls cdynamo.reset() before and after the run, so the recording entries do not stay in
    the caches (as torch._dynamo.explain, this clears every cache). dynamic: as compile().

    Raises:
        TypeError: fn is not callable. Exceptions of fn propagate.
    """
    if not callable(fn):
        raise TypeError(f"cdynamo.explain: expected a callable, got {type(fn).__name__}")
    target = fn._orig_mod if isinstance(fn, CompiledModule) else getattr(fn, "__wrapped__", fn)

    def run(*args, **kwargs) -> ExplainOutput:
        graphs = []

        def recording_backend(gm, example_inputs):
            graphs.append(gm)
            return gm.forward

        from cdynamo import _distributed, _glue, _regions
        engine = _C()
        reset()
        splits_before = list(_distributed.split_log)
        before = dict(engine.counters())
        first_break = len(_glue.break_log)
        first_recompile = len(_glue.recompile_log)
        first_unmodified = len(_glue.unmodified_log)
        first_region = len(_regions.region_log)
        try:
            out = compile(target, backend=recording_backend, dynamic=dynamic)(*args, **kwargs)
            try:
                guards = [g for e in cache_entries(target) for g in e.guards]
            except TypeError:
                guards = []
            after = engine.counters()
            breaks = _glue.break_log[first_break:]
            recompiles = _glue.recompile_log[first_recompile:]
            unmodified = _glue.unmodified_log[first_unmodified:]
            regions = _regions.region_log[first_region:]
            splits = [r for r in _distributed.split_log
                      if not any(r is b for b in splits_before)]
        finally:
            reset()
        delta = {k: after[k] - before.get(k, 0) for k in after}
        return ExplainOutput(graphs, guards, out, delta, breaks, unmodified, recompiles, regions,
                             splits)

    return run


# ---- dynamic shapes: marking dims ---------------------------------------------------------------


def _dims(t, index, who: str) -> list:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"cdynamo.{who}: expected a torch.Tensor, got {type(t).__name__}")
    if isinstance(index, int) and not isinstance(index, bool):
        dims = [index]
    elif isinstance(index, (list, tuple)) and all(isinstance(i, int) and not isinstance(i, bool)
                                                  for i in index):
        dims = list(index)
    else:
        raise TypeError(f"cdynamo.{who}: index must be an int or a list/tuple of ints, got {index!r}")
    for i in dims:
        if not -t.dim() <= i < max(t.dim(), 1):
            raise IndexError(f"cdynamo.{who}: dim {i} out of range for a {t.dim()}-d tensor")
    return [i % t.dim() if t.dim() else i for i in dims]


def mark_dynamic(t: torch.Tensor, index, *, min: int | None = None,
                 max: int | None = None) -> None:
    """Mark dim(s) `index` (int or list of ints) of tensor t dynamic: a compile that sees t
    makes those dims symbolic from the first compile, with any other setting (also
    ``dynamic=False``), as torch._dynamo.mark_dynamic (whose marks cdynamo also reads: both
    set the same attributes on the tensor). If tracing then specialises such a dim (e.g.
    a branch on its exact value, or a size of 0 or 1), compiling raises
    torch.fx.experimental.symbolic_shapes.ConstraintViolationError, as torch._dynamo does.
    ``min``/``max`` (ints, inclusive) bound the dim's sizes as torch._dynamo's: the symbol's
    range, guarded; a program that narrows it, or a size outside it, raises the same
    ConstraintViolationError.

    Raises TypeError (t not a tensor, bad index, min/max not ints), IndexError (dim out of
    range) or ValueError (min > max)."""
    for name, b in (("min", min), ("max", max)):
        if b is not None and (not isinstance(b, int) or isinstance(b, bool)):
            raise TypeError(f"cdynamo.mark_dynamic: {name} must be an int or None, got {b!r}")
    if min is not None and max is not None and min > max:
        raise ValueError(f"cdynamo.mark_dynamic: min={min} is larger than max={max}")
    dims = _dims(t, index, "mark_dynamic")
    if min is not None or max is not None:
        import torch._dynamo   # the ranges in torch._dynamo's own marks (_dynamo_dynamic_range)
        for i in dims:
            torch._dynamo.mark_dynamic(t, i, min=min, max=max)
        return
    for i in dims:
        if not hasattr(t, "_dynamo_dynamic_indices"):
            t._dynamo_dynamic_indices = set()
        t._dynamo_dynamic_indices.add(i)
        t._has_dynamo_dim_marking = True


def maybe_mark_dynamic(t: torch.Tensor, index) -> None:
    """Mark dim(s) `index` of tensor t dynamic without insisting: as mark_dynamic, but a dim
    that tracing specialises is simply static (as torch._dynamo.maybe_mark_dynamic).

    Raises TypeError (t not a tensor, bad index) or IndexError (dim out of range)."""
    for i in _dims(t, index, "maybe_mark_dynamic"):
        if not hasattr(t, "_dynamo_weak_dynamic_indices"):
            t._dynamo_weak_dynamic_indices = set()
        t._dynamo_weak_dynamic_indices.add(i)
        t._has_dynamo_dim_marking = True


def mark_static(t: torch.Tensor, index=None) -> None:
    """Mark dim(s) `index` of tensor t (all dims when None) static: never made symbolic by
    automatic dynamic shapes or ``dynamic=True`` (mark_dynamic takes precedence), as
    torch._dynamo.mark_static on a tensor.

    Raises TypeError (t not a tensor, bad index) or IndexError (dim out of range)."""
    dims = list(range(t.dim())) if index is None and isinstance(t, torch.Tensor) else \
        _dims(t, index, "mark_static")
    for i in dims:
        if not hasattr(t, "_dynamo_static_indices"):
            t._dynamo_static_indices = set()
        t._dynamo_static_indices.add(i)
        t._has_dynamo_dim_marking = True
