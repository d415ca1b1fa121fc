"""Backend resolution: a backend name or callable -> a compiler ``(gm, example_inputs) -> callable``.

A backend receives the captured ``torch.fx.GraphModule`` and a list of the real example input
tensors of the first call (as torch._dynamo passes them), and returns a callable that takes the
graph inputs positionally and returns the graph outputs.

Named backends, all torch's own implementations (nothing is reimplemented here):

  "eager"      returns ``gm.forward`` unchanged: the graph runs op by op in eager PyTorch.
  "aot_eager"  torch's AOTAutograd (forward and backward graphs traced with functionalization),
               each run eagerly; checks the AOTAutograd path without a code generator.
  "inductor"   torch's TorchInductor (``torch._inductor.compile_fx.compile_fx``): generated
               C++/OpenMP kernels on CPU. Compiling takes seconds per graph.

Checked standalone (outside torch._dynamo, no TracingContext, no fake-mode wrapper): "aot_eager"
and "inductor" accept a GraphModule from ``torch.fx.symbolic_trace`` (call_function,
call_method, call_module and get_attr nodes, parameters owned by the traced module) with REAL
example tensors, and training works: ``backward()`` on the output gives eager's gradients for
the inputs and for the module's parameters. Both require the graph to return a tuple or list
(as torch._dynamo's graphs always do); for a graph that returns a single value this module
rewrites the output into a 1-tuple and unwraps it again around the compiled callable.
"""
from __future__ import annotations

import functools
import logging
from typing import Any, Callable

import torch
import torch.fx

log = logging.getLogger("cdynamo")

CompilerFn = Callable[[torch.fx.GraphModule, list], Callable[..., Any]]

BACKEND_NAMES = ("eager", "aot_eager", "inductor")


def _describe_choices() -> str:
    names = ", ".join(repr(n) for n in BACKEND_NAMES)
    return f"{names}, or a callable (gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> callable"


def eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable[..., Any]:
    """The "eager" backend: run the captured graph as it is (``gm.forward``), as torch's "eager"."""
    return gm.forward


def _output_is_sequence(gm: torch.fx.GraphModule) -> bool:
    for node in gm.graph.nodes:
        if node.op == "output":
            return isinstance(node.args[0], (tuple, list))
    return True


def _tuple_output(gm: torch.fx.GraphModule) -> None:
    """Rewrite gm's output node in place so the graph returns a 1-tuple of its single value."""
    for node in gm.graph.nodes:
        if node.op == "output":
            node.args = ((node.args[0],),)
    gm.recompile()


def _with_sequence_output(compile_fn: CompilerFn) -> CompilerFn:
    """Make compile_fn accept graphs that return a single value (AOTAutograd needs a tuple)."""

    @functools.wraps(compile_fn)
    def compiler(gm: torch.fx.GraphModule, example_inputs: list) -> Callable[..., Any]:
        if _output_is_sequence(gm):
            return compile_fn(gm, example_inputs)
        _tuple_output(gm)
        compiled = compile_fn(gm, example_inputs)

        def run_single_output(*args):
            return compiled(*args)[0]

        return run_single_output

    return compiler


def _aot_eager_impl(gm: torch.fx.GraphModule, example_inputs: list) -> Callable[..., Any]:
    from torch._dynamo.backends.registry import lookup_backend

    return lookup_backend("aot_eager")(gm, example_inputs)


aot_eager = _with_sequence_output(_aot_eager_impl)
aot_eager.__name__ = aot_eager.__qualname__ = "aot_eager"
aot_eager.__doc__ = "The \"aot_eager\" backend: torch's AOTAutograd with eager forward/backward graphs."


def _make_inductor(mode: str | None, options: dict | None) -> CompilerFn:
    """torch's inductor compiler, with torch.compile's mode/options applied as config patches."""
    if mode is None and options is None:

        def _inductor_impl(gm, example_inputs):
            from torch._inductor.compile_fx import compile_fx

            return compile_fx(gm, example_inputs)

    else:
        # torch.compile's own wrapper validates mode and options and turns them into
        # inductor config patches (unknown option -> RuntimeError naming the known ones).
        wrapper = torch._TorchCompileInductorWrapper(mode, options, None)

        def _inductor_impl(gm, example_inputs):
            return wrapper(gm, example_inputs)

    compiler = _with_sequence_output(_inductor_impl)
    compiler.__name__ = compiler.__qualname__ = "inductor"
    compiler.__doc__ = "The \"inductor\" backend: torch's TorchInductor (compile_fx)."
    return compiler


inductor = _make_inductor(None, None)

_isa_probes_started = [False]


def start_isa_probes() -> None:
    """Start inductor's CPU vector-ISA probes in background threads, one per candidate ISA
    the CPU reports (AMX, AVX512-VNNI, AVX512, AVX2 on a recent x86).

    Before generating its first C++ kernel, inductor checks each candidate ISA by compiling
    and loading a test program, one after another: on a cold cache (no earlier process left
    the test programs in TORCHINDUCTOR_CACHE_DIR) that costs about 3 s per ISA (about 12 s
    on this project's 2-core machine), more than compiling a 12-layer model's kernels. Run
    when a compile with backend "inductor" is requested, the probes build in parallel with
    each other and with tracing and AOTAutograd; inductor's own check then finds each result
    cached (torch's per-ISA cache), or waits on the file lock of a build in progress. The
    chosen ISA and the generated code are what inductor would choose without it.

    Once per process; nothing on non-x86 machines, when inductor's vec_isa_ok setting
    decides the answer, or when torch lacks these internals (then inductor probes as usual).
    """
    if _isa_probes_started[0]:
        return
    _isa_probes_started[0] = True
    import platform
    import threading
    if platform.machine() not in ("x86_64", "AMD64"):
        return
    try:
        from torch._inductor import config as inductor_config
        from torch._inductor import cpu_vec_isa
        if inductor_config.cpp.vec_isa_ok is not None or inductor_config.is_fbcode():
            return
        flags = cpu_vec_isa.x86_isa_checker()
        todo = [isa for isa in cpu_vec_isa.supported_vec_isa_list
                if all(f in flags for f in str(isa).split())]
    except Exception:  # noqa: BLE001 (another torch: inductor probes as usual)
        return

    def probe(isa):
        try:
            bool(isa)   # compile + load the test program; torch caches the answer
        except Exception:  # noqa: BLE001 (inductor's own check will see the failure)
            pass
    for isa in todo:
        threading.Thread(target=probe, args=(isa,), name=f"cdynamo-isa-probe-{isa}",
                         daemon=True).start()

_NAMED: dict[str, CompilerFn] = {"eager": eager, "aot_eager": aot_eager, "inductor": inductor}


def resolve_backend(backend: Any, *, mode: str | None = None,
                    options: dict | None = None) -> tuple[CompilerFn, str]:
    """Resolve a backend to ``(compiler, name)``.

    Args:
        backend: "eager", "aot_eager", "inductor" (str), or a callable
            ``(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> callable``,
            which is passed through unchanged (its name is its ``__name__``, or its type's name).
        mode: inductor mode, as torch.compile ("default", "reduce-overhead", "max-autotune",
            "max-autotune-no-cudagraphs"); only with backend "inductor".
        options: dict of inductor config options, as torch.compile; only with "inductor".

    Returns:
        (compiler, backend_name): compiler takes (gm, example_inputs) and returns a callable.

    Raises:
        ValueError: unknown backend name (the message lists the valid choices); mode/options with
            a backend other than "inductor".
        TypeError: backend is neither a str nor a callable; options is not a dict.
        RuntimeError: both mode and options given, unknown mode or option (as torch.compile).
    """
    if isinstance(backend, str):
        name = backend
        if name not in _NAMED:
            raise ValueError(f"cdynamo: unknown backend {backend!r}; valid choices: {_describe_choices()}")
        if mode is not None or options is not None:
            if name != "inductor":
                raise ValueError(
                    f"cdynamo: mode= and options= apply only to backend 'inductor', not {name!r}")
            if options is not None and not isinstance(options, dict):
                raise TypeError(f"cdynamo: options must be a dict or None, got {type(options).__name__}")
            if mode is not None and options is not None:
                raise RuntimeError("cdynamo: give either mode or options, not both (as torch.compile)")
            start_isa_probes()
            return _make_inductor(mode, options), name
        if name == "inductor":
            start_isa_probes()
        return _NAMED[name], name
    if callable(backend):
        if mode is not None or options is not None:
            raise ValueError("cdynamo: mode= and options= apply only to backend 'inductor', "
                             "not to a callable backend")
        name = getattr(backend, "__name__", None) or type(backend).__name__
        return backend, name
    raise TypeError(f"cdynamo: backend must be a str or a callable, got {type(backend).__name__}; "
                    f"valid choices: {_describe_choices()}")
