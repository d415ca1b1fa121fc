"""Text of the ``config.output_code`` report, in the form the seeds show.

  __compiled_fn_0 <eval_with_key>.1
  opcode         name     target                      args        kwargs
  -------------  -------  --------------------------  ----------  --------
  placeholder    a        a                           ()          {}
  ...

  ORIGINAL BYTECODE toy_example example.py 9
   <dis of the original code>

  MODIFIED BYTECODE
   <dis of the transformed code>

  GUARDS:
   - local 'a' TENSOR_MATCH
"""
from __future__ import annotations

import dis
import types
from typing import Iterable, Sequence

_HEADERS = ("opcode", "name", "target", "args", "kwargs")


def format_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A plain text table: left-aligned columns two spaces apart, a dashed rule under the header.

    Column width is the longest cell, and at least the header plus 2 (as the `tabulate`
    package's "simple" format that ``Graph.print_tabular`` uses)."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [len(h) + 2 for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for row in cells:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return "\n".join(lines)


def format_graph(gm) -> str:
    """The FX graph of gm as a table of opcode, name, target, args, kwargs (one row per node)."""
    rows = [(n.op, n.name, n.target, n.args, n.kwargs) for n in gm.graph.nodes]
    return format_table(_HEADERS, rows)


def format_bytecode(code: types.CodeType) -> str:
    """dis output of code itself (nested code objects are not expanded)."""
    return dis.Bytecode(code).dis().rstrip("\n")


def _graph_title(name: str, gm) -> str:
    fwd = getattr(type(gm), "forward", None)
    fwd_code = getattr(fwd, "__code__", None)
    # torch names the generated file "<eval_with_key>.N from <file>:<line> in <fn>"; the seeds
    # show only "<eval_with_key>.N".
    where = fwd_code.co_filename.split(" ")[0] if fwd_code is not None else ""
    return f"{name} {where}".rstrip()


def format_output_code(name: str, gm, orig_code: types.CodeType, new_code: types.CodeType | None,
                       guards: Sequence[str], resume_codes: Sequence[types.CodeType] = ()) -> str:
    """The output_code report of one compiled frame.

    Args:
        name: the compiled graph's global name, e.g. "__compiled_fn_0".
        gm: the captured torch.fx.GraphModule, or None when the frame produced no graph.
        orig_code: the frame's original code object.
        new_code: the transformed code object (None: the frame runs unmodified).
        guards: guard descriptions, e.g. "local 'a' TENSOR_MATCH".
        resume_codes: code objects of generated resume functions, each printed after the
            modified bytecode (empty until graph breaks exist).

    Returns:
        The report text (no trailing newline).
    """
    parts = []
    if gm is not None:
        parts.append(_graph_title(name, gm))
        parts.append(format_graph(gm))
    else:
        parts.append(f"{name} (no graph)")
    parts.append("")
    parts.append(f"ORIGINAL BYTECODE {orig_code.co_name} {orig_code.co_filename} {orig_code.co_firstlineno}")
    parts.append(format_bytecode(orig_code))
    parts.append("")
    parts.append("MODIFIED BYTECODE")
    parts.append(format_bytecode(new_code) if new_code is not None else " (frame runs unmodified)")
    for rc in resume_codes:
        parts.append("")
        parts.append(f"RESUME FUNCTION {rc.co_name} {rc.co_filename} {rc.co_firstlineno}")
        parts.append(format_bytecode(rc))
    parts.append("")
    parts.append("GUARDS:")
    parts.extend(f" - {g}" for g in guards)
    return "\n".join(parts)
