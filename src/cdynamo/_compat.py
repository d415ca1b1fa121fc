"""Every difference between the torch releases cdynamo supports, in one place.

Supported: torch 2.13, 2.14 and 2.15; tested releases: 2.13.0, 2.14.1 and 2.15.0 (Python 3.11).

- torch older than 2.13: ``import cdynamo`` raises ImportError naming the supported range.
- torch 2.13.x, 2.14.x, 2.15.x: imported silently (a patch release is taken as its minor
  release: patch releases do not move the internals cdynamo reads).
- torch newer than 2.15.x (2.16 and later, pre-releases and nightlies of them included):
  imported with one TorchVersionWarning naming the tested releases; the internals below are
  looked up as for the newest tested release, and a missing one fails at its first use.

Other modules of cdynamo import what differs from here; no other module compares torch
versions. The engine (C) reads the torch internals that moved through ``engine_lookups()``.

The differences (torch 2.13 -> 2.14 -> 2.15) this module and the engine handle:

- C++ standard of torch's headers (setup.py, ``cxx_std``): 2.13's headers build as C++17;
  2.14's and 2.15's need C++20 (std::strong_ordering, requires-clauses, string_view's
  starts_with). torch's own cpp_extension passes -std=c++20 in all three.
- ``torch.autograd.Function.apply``: a Python classmethod in 2.13; from 2.14 a C classmethod
  of ``torch._C._FunctionBase`` (``MyFn.apply`` is a builtin method, not a bound method).
  The engine recognises either form by identity (values/autograd_fn.c, values/hop.c) and
  guards a `MyFn.apply` read through its class, `.__self__`, in both (wrap.c).
- ``nn.Module._call_impl`` asks whether a torch.jit trace runs through
  ``torch._C._get_tracing_state()`` in 2.13 and 2.14, ``torch._C._is_tracing()`` in 2.15: both
  are folded to their no-trace answer while tracing (``JIT_TRACE_QUERIES``, read by
  cdynamo.trace_rules); without the second, every module with hooks broke the graph on 2.15.
- The engine's module init: torch internals it cannot find make ``import cdynamo`` raise an
  ImportError naming this module (2.15's C ``Function.apply`` made it fail with a bare
  SystemError).

Differences of torch itself that change what the tests expect (tests/, no cdynamo code):
- ``associative_scan(..., combine_mode="pointwise")`` on CPU tensors raises ValueError in
  2.13 and runs in 2.14 and 2.15.
- torch._dynamo of 2.14 and 2.15 differs from 2.13 on programs the tests compare against:
  it traces ``Counter.most_common`` and an intersection of sets of tensors into a graph
  (2.13 gave these frames up); it gives up a frame whose config object is read through a
  ``__getattribute__`` that reads its ``__dict__`` (2.13 compiled it); it puts an
  ``x == None`` alone in a graph for ``None in [x, None]``; it treats an int global of another
  module, read and stored by an inlined function, as unspecialized (no recompile when it
  changes; cdynamo specializes it: one recompile); and its own results differ from eager's
  for ``("a", x) in d.items()`` (a tensor instead of True) and for an input OrderedDict whose
  keys a program reorders.
"""
import re
import warnings

MIN_SUPPORTED = (2, 13)
NEWEST_TESTED = (2, 15)
TESTED_RELEASES = ("2.13.0", "2.14.1", "2.15.0")


# The functions nn.Module._call_impl calls to ask whether a torch.jit trace runs, with their
# answer while cdynamo traces (no JIT trace then): the first in 2.13 and 2.14, the second in
# 2.15 (it exists in all three).
JIT_TRACE_QUERIES = {
    "torch._C._get_tracing_state": None,
    "torch._C._is_tracing": False,
}


class TorchVersionWarning(UserWarning):
    """The installed torch is newer than the newest release cdynamo was tested with."""


def parse_torch_version(version):
    """(major, minor, patch) of a torch version string such as "2.15.0+cu132",
    "2.16.0a0+git1234" or "2.16.0.dev20260101" (a missing patch number reads as 0).

    Raises ValueError when the string does not start with "MAJOR.MINOR"."""
    m = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", str(version))
    if m is None:
        raise ValueError(f"cannot read a torch version from {version!r} (expected "
                         "MAJOR.MINOR[.PATCH], e.g. '2.15.0')")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def _supported_range():
    """'torch 2.13 to 2.15.x (tested: ...)' for error messages."""
    oldest = "%d.%d" % MIN_SUPPORTED
    newest = "%d.%d" % NEWEST_TESTED
    bound = "%d.%d" % (NEWEST_TESTED[0], NEWEST_TESTED[1] + 1)
    return (f"torch {oldest} to {newest}.x (tested: {', '.join(TESTED_RELEASES)}); "
            f"e.g. pip install 'torch>={oldest},<{bound}'")


def check_torch_version(version):
    """Check a torch version string against the supported releases.

    Returns None for a supported release (2.13.x to 2.15.x) and a warning text for a newer
    one (or one whose version cannot be read); raises ImportError for one older than 2.13.
    Takes the string as an argument so that it can be checked without that torch installed."""
    try:
        major, minor, _ = parse_torch_version(version)
    except ValueError as e:
        return (f"cdynamo: {e}; the torch internals are looked up as for torch "
                f"{TESTED_RELEASES[-1]} (tested releases: {', '.join(TESTED_RELEASES)})")
    if (major, minor) < MIN_SUPPORTED:
        raise ImportError(f"cdynamo does not support torch {version}: it needs "
                          + _supported_range())
    if (major, minor) > NEWEST_TESTED:
        return (f"cdynamo was tested with torch {', '.join(TESTED_RELEASES)}; torch {version} "
                "is newer: its internals are looked up as for torch "
                f"{TESTED_RELEASES[-1]}, and one that moved fails at its first use")
    return None


_warned = False


def check_installed_torch():
    """Run check_torch_version on the installed torch: ImportError when it is too old, one
    TorchVersionWarning per process when it is newer than the tested releases."""
    global _warned
    import torch
    message = check_torch_version(torch.__version__)
    if message is not None and not _warned:
        _warned = True
        warnings.warn(message, TorchVersionWarning, stacklevel=3)


def torch_minor(version=None):
    """(major, minor) of `version` (default: the installed torch), newer-than-tested releases
    read as the newest tested one, an unreadable version as the newest tested one."""
    if version is None:
        import torch
        version = torch.__version__
    try:
        major, minor, _ = parse_torch_version(version)
    except ValueError:
        return NEWEST_TESTED
    return min((major, minor), NEWEST_TESTED)


def cxx_std(version):
    """The -std= value the C++ extension (csrc/tensor_meta.cpp) is compiled with against the
    headers of torch `version`: "c++17" for 2.13, "c++20" for 2.14 and later (their headers
    use C++20 features)."""
    return "c++17" if torch_minor(version) <= (2, 13) else "c++20"


# ---- torch._dynamo state and classes cdynamo honours (torch.compiler controls) -------------

def _dynamo_exc():
    import torch._dynamo.exc as exc
    return exc


Unsupported = _dynamo_exc().Unsupported


def init_unsupported(err, msg):
    """Initialise a torch._dynamo.exc.Unsupported subclass instance with message msg (its
    __init__ takes msg first in 2.13 to 2.15)."""
    Unsupported.__init__(err, msg)


def torch_error_on_graph_break():
    """torch's error_on_graph_break switch as torch._dynamo.error_on_graph_break(flag) sets it
    (a global of torch._dynamo.utils read through its getter in 2.13 to 2.15)."""
    import sys
    utils = sys.modules.get("torch._dynamo.utils")
    getter = getattr(utils, "_get_error_on_graph_break", None)
    return bool(getter()) if getter is not None else False


def _polyfill_handlers():
    import sys
    variables = sys.modules.get("torch._dynamo.variables")
    cls = getattr(variables, "PolyfilledFunctionVariable", None)
    getter = getattr(cls, "_get_polyfill_handlers", None)
    try:
        return getter() if getter is not None else {}
    except Exception:  # noqa: BLE001 (an internal table of torch: none is as good as empty)
        return {}


def _is_torch_module(name):
    return name == "torch" or name.startswith("torch.")


def user_substitutes():
    """(original, traceable) for each torch._dynamo.substitute_in_graph registration made by
    code outside torch (torch keeps them in PolyfilledFunctionVariable's handler table,
    original -> a wrapper whose __torch_dynamo_polyfill__ is the traceable function, in 2.13
    to 2.15)."""
    out = []
    for original, wrapped in list(_polyfill_handlers().items()):
        fn = getattr(wrapped, "__torch_dynamo_polyfill__", None)
        if fn is not None and getattr(wrapped, "__torch_dynamo_original__", None) is original \
                and not _is_torch_module(getattr(fn, "__module__", None) or "torch"):
            out.append((original, fn))
    return out


def _optimized_module():
    from torch._dynamo.eval_frame import OptimizedModule
    return OptimizedModule


#: torch.compile's nn.Module wrapper class (torch._dynamo.eval_frame, 2.13 to 2.15);
#: cdynamo.CompiledModule subclasses it.
OptimizedModule = _optimized_module()


def guard_filter_entry_type():
    """torch's GuardFilterEntry (the dataclass torch.compile's guard_filter_fn receives:
    name, has_value, value, guard_type, derived_guard_types, is_global, orig_guard); it lives
    in torch._dynamo.types in 2.13-2.15. A look-alike dataclass when it is not there."""
    try:
        from torch._dynamo.types import GuardFilterEntry
        return GuardFilterEntry
    except ImportError:
        import dataclasses

        @dataclasses.dataclass
        class GuardFilterEntry:
            name: str
            has_value: bool
            value: object
            guard_type: str
            derived_guard_types: tuple
            is_global: bool
            orig_guard: object
        return GuardFilterEntry


def nonrecursive_disable_code():
    """The code object of torch._dynamo.disable(fn, recursive=False)'s wrapper
    (torch._dynamo.decorators, 2.13-2.15): a frame it calls runs uncompiled (its callees are
    compiled), as torch._dynamo decides. None when this torch has none."""
    from torch._dynamo import decorators
    return getattr(decorators, "_nonrecursive_disable_wrapper_code", None)
