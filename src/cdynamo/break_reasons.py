"""The catalogue of graph-break reasons: one table, in the spirit of torch._dynamo's
graph_break_registry.

Every reason the engine gives for a graph break (or for running a whole frame unmodified)
is a free-text message naming what it met (``call to print() (runs in Python)``, ``generic_jump
on a tensor value ...``). ``classify(message)`` maps it to one catalogue entry: a short code
users can search for (``CDB0001``...), a one-line explanation and a hint. The logs, the
fullgraph error and ``cdynamo.explain()`` show the code, and explain() counts breaks by code.
The first entry whose pattern matches the message wins (entries for messages that wrap
another reason come first); the last entry matches anything.
"""
from __future__ import annotations

import re
from typing import NamedTuple


class BreakReason(NamedTuple):
    """One catalogue entry.

    code: str, e.g. "CDB0001"; title: short name; pattern: regular expression searched in the
    engine's message; explanation: one line; hint: what the user can do."""

    code: str
    title: str
    pattern: str
    explanation: str
    hint: str


CATALOGUE: tuple[BreakReason, ...] = (
    BreakReason("CDB0005", "break inside a loop", r"graph break in a for/while loop",
                "With cdynamo.config.graph_break_in_loops off, a graph break inside a loop "
                "makes the whole frame run unmodified (the functions it calls are still "
                "compiled), as torch._dynamo does.",
                "Leave cdynamo.config.graph_break_in_loops on (the default), or move the "
                "unsupported code out of the loop."),
    BreakReason("CDB0006", "break inside autocast", r"graph break inside torch\.autocast",
                "A graph break inside a torch.autocast or torch.inference_mode block that was "
                "entered in a called function (not the frame that breaks) makes the frame run "
                "unmodified.",
                "Move the unsupported code out of the autocast block, or the block into the "
                "caller."),
    BreakReason("CDB0020", "break inside an exception handler",
                r"graph break inside an exception handler",
                "A graph break inside an `except` block (or a `finally`/`with` cleanup reached by "
                "an exception) makes the frame run unmodified: a resume function would run the "
                "rest of the handler with no exception being handled (a bare `raise`, "
                "sys.exc_info(), logging.exception() and exception chaining would differ).",
                "Move the unsupported code out of the handler (e.g. set a flag and act after "
                "the try statement)."),
    BreakReason("CDB0019", "autocast block exit", r"exit of a torch\.autocast block split",
                "A torch.autocast block that a graph break split is left in Python: its end "
                "is one more graph break.",
                "Move the unsupported code out of the autocast block."),
    BreakReason("CDB0050", "numpy not traced", r"^numpy: ",
                "A NumPy operation cdynamo does not trace through torch._numpy (it needs the "
                "array's data, has no torch._numpy counterpart, mixes ndarrays with tensors, "
                "or torch._numpy's result would differ from NumPy's); it runs in NumPy.",
                "Use torch operations on tensors, or convert with torch.from_numpy() first."),
    BreakReason("CDB0001", "data-dependent branch",
                r"generic_jump on a tensor|truth value of .*Tensor|branch on a tensor",
                "Python control flow (if/while/and/or/not) depends on a tensor's value, which "
                "is not known while tracing.",
                "Use torch.where / torch.cond, or compute the condition from shapes or Python "
                "values."),
    BreakReason("CDB0002", "tensor data read",
                r"Tensor\.(item|tolist|numpy|__bool__|__int__|__float__|__index__)|needs the "
                r"tensor's data",
                "A Python value is read out of a tensor's data (.item(), .tolist(), int(t), ...).",
                "Keep the value as a 0-d tensor, or move the read out of the compiled function."),
    BreakReason("CDB0003", "print / I/O", r"print\(\)|builtins\.(print|input)",
                "print() and other I/O run in Python between two graphs.",
                "Remove the print or guard it with `if not torch.compiler.is_compiling():`."),
    BreakReason("CDB0004", "explicit graph break",
                r"explicit graph break|graph_break|compiler function",
                "cdynamo.graph_break() / torch._dynamo.graph_break() was called.",
                "Remove the call if the break is not wanted."),
    BreakReason("CDB0007", "never traced (trace rules)", r"trace rule|never traced",
                "The callee belongs to a library cdynamo never traces (trace_rules); it runs "
                "in Python.",
                "See cdynamo.trace_rules; cdynamo.trace_rules.set_module_rule can change it."),
    BreakReason("CDB0008", "non-tensor torch function",
                r"has no tensor argument or result|failed on fake tensors",
                "A torch function without tensor inputs or outputs (or one that fails on fake "
                "tensors) cannot be a graph operation; it runs in Python.",
                "Call it outside the compiled function if it does not depend on its inputs."),
    BreakReason("CDB0009", "side effect on an outer object",
                r"side effect|mutation of an input|STORE_DEREF|STORE_GLOBAL",
                "A store into a variable or object that outlives the frame cannot be replayed "
                "here.",
                "Return the new value instead of storing it, or store into a container passed "
                "in."),
    BreakReason("CDB0010", "generator", r"generator",
                "A generator function or generator expression is not traced here.",
                "Use a list comprehension or an explicit loop."),
    BreakReason("CDB0011", "unsupported call", r"^call (to|of) ",
                "A call of something the interpreter does not model (a C function of another "
                "library, an unsupported class or callable); it runs in Python.",
                "If it is a pure tensor function, torch.library custom ops are traced as graph "
                "operations."),
    BreakReason("CDB0012", "unsupported attribute or method",
                r"^(attribute|method|module attribute|Tensor attribute|constant attribute) ",
                "An attribute or method the interpreter does not model (or that does not "
                "exist at trace time).",
                "Read the attribute outside the compiled function, or file an issue with the "
                "type."),
    BreakReason("CDB0013", "unsupported operation on a value",
                r"is not supported|BINARY_OP|COMPARE_OP|IS_OP|CONTAINS_OP|subscript|"
                r"iteration|len\(\)",
                "An operator or protocol (subscript, iteration, len, comparison, ...) on a value "
                "the interpreter does not model.",
                "Convert the value to a list/tuple/dict/tensor before the operation."),
    BreakReason("CDB0014", "unsupported opcode", r"unsupported opcode|cannot run .* at a "
                r"graph break",
                "A bytecode instruction the interpreter does not model.",
                "File an issue with the instruction name."),
    BreakReason("CDB0015", "cannot rebuild a value", r"cannot rebuild|live free variable",
                "A value made while tracing cannot be rebuilt into a real object at the graph "
                "break, so the frame runs unmodified.",
                "Avoid graph breaks while such values (closures with defaults, module slices, "
                "super objects) are alive."),
    BreakReason("CDB0016", "trace too long or too deep",
                r"trace too long|inlining too deep|recursion",
                "The trace exceeded the instruction or inlining-depth limit.",
                "Split the function, or mark the recursive helper with cdynamo.graph_break()."),
    BreakReason("CDB0017", "internal error", r"internal error",
                "cdynamo hit an internal error translating this frame; it runs unmodified "
                "(see the WARNING log).",
                "Please report it with the WARNING message."),
    BreakReason("CDB0018", "unbound or undefined name",
                r"unbound local|is not defined|referenced before assignment|empty closure",
                "A name is not bound at trace time (the program would raise NameError or "
                "UnboundLocalError).",
                "Check the program: eager raises the same error."),
    BreakReason("CDB9999", "other", r".*",
                "The interpreter does not model this operation.",
                "Run cdynamo.explain(fn)(*args) to see where; file an issue with the message."),
)

_COMPILED = [(r, re.compile(r.pattern)) for r in CATALOGUE]
_BY_CODE = {r.code: r for r in CATALOGUE}


def classify(message: str) -> BreakReason:
    """The catalogue entry of an engine message (str); never fails (CDB9999 at worst)."""
    for entry, rx in _COMPILED:
        if rx.search(message):
            return entry
    return CATALOGUE[-1]


def lookup(code: str) -> BreakReason:
    """The catalogue entry of a code such as "CDB0001". Raises KeyError naming the valid
    codes when there is none."""
    try:
        return _BY_CODE[code]
    except KeyError:
        raise KeyError(f"unknown graph-break code {code!r}; valid codes: "
                       f"{', '.join(_BY_CODE)}") from None
