"""cdynamo as a drop-in for torch.compile: ``cdynamo.install()`` / ``cdynamo.uninstall()``.

install() replaces, in torch's own modules, the entry points that libraries and user code
call (torch.compile, torch._dynamo.optimize / optimize_assert / reset / explain /
substitute_in_graph, torch.compiler.reset, torch._logging.set_logs: the artifacts cdynamo
shares with torch; TORCH_LOGS is read at install), so code that calls torch.compile
(Hugging Face's Trainer, transformers' generate, timm, Lightning) compiles with cdynamo
without being changed. What torch._dynamo does with markers (torch._dynamo.disable,
allow_in_graph, graph_break, is_compiling, mark_dynamic / maybe_mark_dynamic / mark_static,
assume_constant_result, torch.compiler.set_stance, error_on_graph_break) cdynamo already
honours without patching anything. What cdynamo does not implement goes to the original
torch._dynamo function with a one-time warning naming it (torch.compile's
``recompile_limit=``, ``isolate_recompiles=``, ``shapes_spec=``; a backend name only torch
registers, e.g. ``"cudagraphs"``, is used as a cdynamo backend callable).
uninstall() puts every original back.

Also ``CDYNAMO=1``: ``import cdynamo_autoinstall`` (from a sitecustomize.py, see
docs/drop-in.md) installs cdynamo as soon as torch is imported, without importing torch
itself; ``python -m cdynamo script.py args`` runs a script with cdynamo installed.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import sys
import warnings

import torch

log = logging.getLogger("cdynamo")

_originals: dict = {}     # (module, name) -> the object install() replaced
_warned: set = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, stacklevel=3)


def is_installed() -> bool:
    """Whether cdynamo.install() is in effect (torch.compile is cdynamo's)."""
    return bool(_originals)


@contextlib.contextmanager
def _originals_restored():
    """torch's own entry points back for a with-block (a call handed to torch._dynamo)."""
    saved = {key: getattr(*key) for key in _originals}
    for (module, name), original in _originals.items():
        setattr(module, name, original)
    try:
        yield
    finally:
        for (module, name), ours in saved.items():
            setattr(module, name, ours)


def _resolve_backend_for_torch(backend):
    """A torch.compile backend argument as cdynamo takes it: None means "inductor"; a name
    only torch's registry knows (torch._dynamo.list_backends) becomes torch's compiler
    callable for it. Unknown names are left for cdynamo's ValueError listing the choices."""
    from cdynamo import _backends
    if backend is None:
        return "inductor"
    if isinstance(backend, str) and backend not in _backends.BACKEND_NAMES:
        import torch._dynamo
        if backend in torch._dynamo.list_backends(exclude_tags=()):
            return torch._dynamo.lookup_backend(backend)
    return backend


_TORCH_ONLY_DEFAULTS = {"recompile_limit": None, "isolate_recompiles": False, "shapes_spec": None}


def torch_compile(model=None, *, fullgraph: bool = False, dynamic=None, backend="inductor",
                  mode=None, options=None, disable: bool = False, **torch_only):
    """torch.compile while cdynamo is installed: the same arguments and results, compiled
    by cdynamo (cdynamo.compile): a function gives a compiled function, an nn.Module a
    CompiledModule (an OptimizedModule with ``_orig_mod``, as torch.compile), None a
    decorator. ``name=`` is accepted and ignored (as torch.compile, a label for logs).
    Other torch-only arguments with non-default values (recompile_limit,
    isolate_recompiles, shapes_spec, or any argument cdynamo does not know) make the call go
    to the original torch.compile, with a one-time warning (torch raises TypeError for an
    argument it does not take either). mode= / options= with a backend other than "inductor" are ignored with a
    one-time warning, as torch.compile's other backends ignore them (cdynamo.compile refuses
    them). Raises as cdynamo.compile (TypeError, ValueError naming the choices)."""
    from cdynamo import _api
    torch_only.pop("name", None)
    # an argument cdynamo does not know (a newer torch's, or a typo): torch.compile decides
    passed = [k for k, v in torch_only.items()
              if k not in _TORCH_ONLY_DEFAULTS or v != _TORCH_ONLY_DEFAULTS[k]]
    if passed:
        _warn_once("compile:" + ",".join(passed),
                   f"cdynamo: torch.compile({', '.join(k + '=' for k in passed)}...) is not "
                   "implemented by cdynamo; this call is compiled by torch._dynamo")
        with _originals_restored():   # torch.compile calls torch._dynamo.optimize
            return _originals[(torch, "compile")](
                model, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                options=options, disable=disable, **torch_only)
    backend = _resolve_backend_for_torch(backend)
    guard_filter_fn = None
    if isinstance(options, dict) and "guard_filter_fn" in options:
        # as torch.compile: the guard filter applies with any backend
        guard_filter_fn = options["guard_filter_fn"]
        options = {k: v for k, v in options.items() if k != "guard_filter_fn"} or None
    if backend != "inductor" and (mode is not None or options is not None):
        # torch.compile hands mode/options to another backend, which ignores them (a warning)
        _warn_once(f"extra:{backend}", f"cdynamo: backend {backend!r} ignores mode= and "
                   "options= (they apply to 'inductor'), as torch.compile's backends do")
        mode = options = None
    if guard_filter_fn is not None:
        options = dict(options or {}, guard_filter_fn=guard_filter_fn)
    return _api.compile(model, backend=backend, fullgraph=fullgraph, dynamic=dynamic,
                        mode=mode, options=options, disable=disable)


class _Optimize:
    """What torch._dynamo.optimize(...) returns while cdynamo is installed: as a decorator,
    cdynamo.compile with those options; as a context manager, the RuntimeError torch._dynamo
    raises there."""

    def __init__(self, args, kwargs, fullgraph):
        self._args, self._kwargs = args, kwargs
        backend = args[0] if args else kwargs.get("backend", "inductor")
        self._fullgraph = fullgraph or bool(kwargs.get("nopython", False))
        self._dynamic = kwargs.get("dynamic", None)
        self._disable = bool(kwargs.get("disable", False))
        self._backend = _resolve_backend_for_torch(backend)
        self._guard_filter_fn = kwargs.get("guard_filter_fn")
        self._guard_fail_fn = kwargs.get("guard_fail_fn")
        ignored = [k for k in ("guard_export_fn",) if kwargs.get(k) is not None]
        if ignored:
            _warn_once("optimize:" + ",".join(ignored),
                       f"cdynamo: torch._dynamo.optimize({', '.join(k + '=' for k in ignored)}"
                       "...) is not implemented by cdynamo and is ignored")
        self._inner = None

    def __call__(self, fn):
        from cdynamo import _api
        options = None
        if self._guard_filter_fn is not None:
            options = {"guard_filter_fn": self._guard_filter_fn}
        if self._guard_fail_fn is None or self._disable:
            return _api.compile(fn, backend=self._backend, fullgraph=self._fullgraph,
                                dynamic=self._dynamic, disable=self._disable, options=options)
        if not callable(fn):
            return _api.compile(fn)   # its TypeError
        opts = _api._make_options(self._backend, self._fullgraph, self._dynamic, None, options)
        opts.guard_fail_fn = self._guard_fail_fn
        return _api._compile_with(fn, opts)

    def __enter__(self):
        raise RuntimeError(
            "torch._dynamo.optimize(...) is used with a context manager: cdynamo (as "
            "torch._dynamo) compiles callables; use it as a decorator, "
            "torch._dynamo.optimize(...)(fn), or torch.compile(fn)")

    def __exit__(self, *exc):
        return False


def optimize(*args, **kwargs):
    """torch._dynamo.optimize while cdynamo is installed (see _Optimize)."""
    return _Optimize(args, kwargs, fullgraph=False)


def optimize_assert(*args, **kwargs):
    """torch._dynamo.optimize_assert (fullgraph) while cdynamo is installed."""
    return _Optimize(args, kwargs, fullgraph=True)


def _reset_both(original):
    @functools.wraps(original)
    def reset(*args, **kwargs):
        from cdynamo import _api
        _api.reset()
        return original(*args, **kwargs)
    return reset


def explain(f, *extra_args, **extra_kwargs):
    """torch._dynamo.explain while cdynamo is installed: ``explain(f)(*args)`` runs f once under
    cdynamo.explain and returns its ExplainOutput (graph_count, graph_break_count,
    break_reasons, ops_per_graph, out_guards, ...). Extra arguments call it at once, as
    torch's deprecated form does."""
    from cdynamo import _api
    run = _api.explain(f)
    if extra_args or extra_kwargs:
        return run(*extra_args, **extra_kwargs)
    return run


def _substitute_in_graph(original):
    @functools.wraps(original)
    def substitute_in_graph(original_fn, *args, **kwargs):
        register = original(original_fn, *args, **kwargs)

        def wrapper(traceable_fn):
            wrapped = register(traceable_fn)
            from cdynamo import polyfills
            polyfills.add_substitute(original_fn, traceable_fn)
            return wrapped
        return wrapper
    return substitute_in_graph


def _adopt_registered_substitutes() -> None:
    """The substitute_in_graph registrations user code made before install()."""
    from cdynamo import _compat, polyfills
    for original, traceable in _compat.user_substitutes():
        polyfills.add_substitute(original, traceable)


def _set_logs_both(original):
    @functools.wraps(original)
    def set_logs(*args, **kwargs):
        from cdynamo import _logging
        original(*args, **kwargs)
        ours = {k: v for k, v in kwargs.items()
                if k in _logging.ARTIFACTS and k not in _logging.TORCH_ARTIFACTS}
        if "dynamo" in kwargs:
            ours["cdynamo"] = kwargs["dynamo"]
        if ours or not kwargs:
            _logging.set_logs(**ours)
    return set_logs


#: torch._dynamo.config name -> cdynamo.config name, synced while installed
SHARED_SETTINGS = {"recompile_limit": "cache_size_limit", "optimize_ddp": "optimize_ddp"}
_seen_torch_settings: dict = {}


def _torch_settings() -> dict:
    import torch._dynamo.config as tcfg
    return {name: getattr(tcfg, name) for name in SHARED_SETTINGS if hasattr(tcfg, name)}


def sync_config() -> None:
    """While installed (called at each compile): a shared setting whose value in
    torch._dynamo.config changed since install() or the last sync (``torch._dynamo.config.
    recompile_limit = 4``, ``with torch._dynamo.config.patch(optimize_ddp=False)``) is copied
    to cdynamo.config. Settings changed only on cdynamo's side stay as they are."""
    if not _originals:
        return
    from cdynamo import config
    for name, value in _torch_settings().items():
        if _seen_torch_settings.get(name, value) != value:
            setattr(config, SHARED_SETTINGS[name], value)
        _seen_torch_settings[name] = value


def _targets():
    """(module, attribute, replacement) for each entry point install() replaces."""
    import torch._dynamo
    import torch._logging
    import torch.compiler
    return [
        (torch._logging, "set_logs", _set_logs_both(torch._logging.set_logs)),
        (torch, "compile", torch_compile),
        (torch._dynamo, "optimize", optimize),
        (torch._dynamo, "optimize_assert", optimize_assert),
        (torch._dynamo, "reset", _reset_both(torch._dynamo.reset)),
        (torch.compiler, "reset", _reset_both(torch.compiler.reset)),
        (torch._dynamo, "explain", explain),
        (torch._dynamo, "substitute_in_graph",
         _substitute_in_graph(torch._dynamo.substitute_in_graph)),
    ]


def install() -> None:
    """Make torch.compile and the torch._dynamo / torch.compiler entry points that libraries
    call go to cdynamo, until uninstall(). Idempotent. Code that already holds a reference to
    the original torch.compile (``from torch import compile`` before install()) keeps it.
    Raises RuntimeError when the C engine is not built."""
    from cdynamo import _api
    _api._C()   # a clear error now rather than at the first compile
    if _originals:
        return
    for module, name, replacement in _targets():
        _originals[(module, name)] = getattr(module, name)
        setattr(module, name, replacement)
    _adopt_registered_substitutes()
    _seen_torch_settings.clear()
    _seen_torch_settings.update(_torch_settings())
    from cdynamo import _logging
    _logging.apply_env("TORCH_LOGS")   # the artifacts cdynamo shares with torch
    log.info("cdynamo installed: torch.compile and torch._dynamo.optimize compile with cdynamo")


def uninstall() -> None:
    """Undo install(): torch's original functions come back. Functions and modules compiled
    while installed stay cdynamo-compiled. Idempotent."""
    while _originals:
        (module, name), original = _originals.popitem()
        setattr(module, name, original)


def main(argv=None) -> int:
    """``python -m cdynamo script.py [args...]``: run script.py as __main__ with cdynamo
    installed (as ``python -m cProfile``). Returns the exit status; raises SystemExit with a
    usage message when no script is given."""
    import runpy
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        raise SystemExit("usage: python -m cdynamo script.py [args...]   (runs the script with "
                         "torch.compile going to cdynamo: cdynamo.install())")
    if argv[0] == "-m":
        if len(argv) < 2:
            raise SystemExit("usage: python -m cdynamo -m module [args...]")
        sys.argv = argv[1:]
        install()
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return 0
    sys.argv = argv
    install()
    runpy.run_path(argv[0], run_name="__main__")
    return 0
