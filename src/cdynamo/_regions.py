"""Regional compilation: repeated blocks of a traced FX graph outlined into
``torch.ops.higher_order.invoke_subgraph`` calls, so that AOTAutograd and Inductor compile
each distinct block once and call it N times (cdynamo.config.regional_compile).

This is what ``torch.compiler.nested_compile_region`` asks torch.compile for; in "auto" mode
cdynamo also does it without annotations for the repeated nn.Module calls of a frame (the
decoder layers of a ModuleList, the blocks of a vision model).

The engine (values/hop.c, ``cdyn_region_end``) records every inlined call of the top graph
that may become a region: an nn.Module's forward (kind "module", keyed by the module's class)
or a nested_compile_region function (kind "annotated", keyed by the function). When the
graph is compiled, outline():

1. turns each record into the run of call nodes the call made; a record whose nodes were
   erased (a rolled-back step, dead-code removal) or whose run is no longer contiguous is
   dropped;
2. refuses runs that are not pure functions of their inputs: in-place operations, setitem,
   side-effecting calls (``torch.fx.Node.is_impure``: grad-mode and autocast switches,
   asserts), call_module / get_attr nodes, inputs or outputs that are not tensors or
   symbolic ints, and calls traced inside an autocast block;
3. groups the runs by structure: the same operations in the same order on the same
   constants, inputs numbered in order of first use with equal metadata (type, sizes,
   strides, dtype, device, requires_grad), and the same grad mode;
4. outlines the groups, largest bodies first, skipping runs that overlap a chosen one: one
   GraphModule per group (``subgraph_<i>`` on the root), each run replaced by
   ``invoke_subgraph(subgraph_<i>, 'subgraph_<i>', *its inputs)`` and getitem nodes for the
   values used after it.

Every call was traced in full (its guards are installed as for an inlined call), and a
group only holds runs that compute the same function of their inputs, so reuse never rests
on the records being right: a wrong record costs a missed outlining, never a wrong graph.
"""
from __future__ import annotations

import logging
import operator

import torch
import torch.fx

log = logging.getLogger("cdynamo.regional")

#: modes of cdynamo.config.regional_compile
MODES = ("auto", "annotated", "off")
#: backends for which "auto" outlines unannotated module calls: the ones whose compile time
#: (AOTAutograd, Inductor) grows with the graph; "eager" and user callables get the flat graph
AUTO_BACKENDS = ("inductor", "aot_eager")
#: backends that differentiate through invoke_subgraph correctly, for nested_compile_region
#: calls that need autograd (unannotated blocks that need autograd are never outlined: in a
#: training graph AOTAutograd re-traces every invoke_subgraph call to check it for input
#: mutation, which made the first training step of Hugging Face models 1.2-1.8x slower than
#: with the blocks inline): torch runs its backward only
#: under AOTAutograd (torch.compile with backend="eager" fails in backward), and inductor's
#: gradients through it are wrong in torch 2.13 on CPU (torch.compile with a
#: nested_compile_region'd Llama decoder layer: gradients off by 1e3); regions that need
#: autograd are outlined for these backends only, inlined for the others
AUTOGRAD_BACKENDS = ("aot_eager",)
#: fewest call nodes in an unannotated block worth a subgraph of its own
AUTO_MIN_NODES = 4

#: what outline() decided, newest last: dicts (frame, label, kind, calls, subgraph or None,
#: reason); read by cdynamo.explain and the compile report
region_log: list = []

_INPLACE_OPERATORS = frozenset({
    operator.setitem, operator.delitem, operator.iadd, operator.isub, operator.imul,
    operator.imatmul, operator.itruediv, operator.ifloordiv, operator.imod, operator.ipow,
    operator.iand, operator.ior, operator.ixor, operator.ilshift, operator.irshift,
})

_CONSTANT_TYPES = (int, float, bool, str, complex, bytes, type(None), type(Ellipsis),
                   torch.dtype, torch.device, torch.layout, torch.memory_format)


class ReuseLimitExceeded(RuntimeError):
    """A nested_compile_region function gave more distinct bodies in one graph than its
    max_reuse_entries (torch.compile raises a RuntimeError there too); reaches the user."""


class _Refused(Exception):
    """A run that cannot be a region; the message says why."""


def _run(rec, graph):
    """The run of call nodes of record `rec`, or None where it no longer holds."""
    prev, last = rec[2], rec[3]
    if last._erased or (prev is not None and prev._erased):
        return None
    node = prev.next if prev is not None else next(iter(graph.nodes), None)
    run = []
    while node is not None and node.op not in ("root", "output"):
        if node.op not in ("placeholder", "get_attr") or run:
            run.append(node)
        if node is last:
            break
        node = node.next
    return run if run and run[-1] is last else None


def _value_key(value, grad=True):
    """What an input of a run must agree on for two runs to share a body (requires_grad
    only where grad mode is on)."""
    if isinstance(value, torch.Tensor):
        return ("tensor", type(value), tuple(str(s) for s in value.shape),
                tuple(str(s) for s in value.stride()), str(value.storage_offset()), value.dtype,
                value.device, value.layout, grad and value.requires_grad,
                isinstance(value, torch.nn.Parameter))
    if isinstance(value, torch.SymInt):
        return ("symint", str(value.node.expr))
    raise _Refused(f"an input or output of type {type(value).__name__}")


def _is_inplace(node):
    if node.target in _INPLACE_OPERATORS:
        return True
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    return (isinstance(name, str) and name.endswith("_") and not name.endswith("__")) or \
        "out" in node.kwargs


def _signature(run, grad):
    """(structure, inputs, outputs) of a run: structure is hashable and equal for runs that
    compute the same function of their inputs; inputs the nodes from outside in order of
    first use; outputs the positions of the run's nodes used after it."""
    index = {n: i for i, n in enumerate(run)}
    inputs = {}

    def norm(a):
        if isinstance(a, torch.fx.Node):
            if a in index:
                return ("n", index[a])
            if a not in inputs:
                inputs[a] = len(inputs)
            return ("x", inputs[a])
        if isinstance(a, (list, tuple)):
            return (type(a).__name__, tuple(norm(x) for x in a))
        if isinstance(a, dict):
            return ("dict", tuple((k, norm(v)) for k, v in a.items()))
        if isinstance(a, slice):
            return ("slice", norm(a.start), norm(a.stop), norm(a.step))
        if isinstance(a, _CONSTANT_TYPES):
            return ("c", type(a), repr(a) if isinstance(a, float) else a)
        return ("obj", id(a))

    items = []
    for n in run:
        if n.op not in ("call_function", "call_method"):
            raise _Refused(f"a {n.op} node ({n.target})")
        if _is_inplace(n):
            raise _Refused(f"an in-place operation ({n.target})")
        if n.op == "call_function" and n.is_impure():
            raise _Refused(f"a side-effecting call ({n.target})")
        items.append((n.op, n.target, norm(n.args), norm(n.kwargs)))
    in_keys = tuple(_value_key(x.meta.get("example_value"), grad) for x in inputs)
    outputs = tuple(i for i, n in enumerate(run) if any(u not in index for u in n.users))
    for i in outputs:
        value = run[i].meta.get("example_value")
        if not isinstance(value, torch.Tensor):
            raise _Refused(f"a {type(value).__name__} used after the call")
    return (tuple(items), in_keys), list(inputs), outputs


class _Group:
    def __init__(self, kind, key, label):
        self.kind, self.key, self.label = kind, key, label
        self.runs, self.inputs, self.outputs = [], [], set()


def _fresh_name(root):
    i = 0
    while f"subgraph_{i}" in root:
        i += 1
    return f"subgraph_{i}"


def _body(run, inputs, outputs):
    """A GraphModule computing `run` from placeholders for `inputs`, returning the nodes at
    `outputs` (a tuple)."""
    sub = torch.fx.Graph()
    env = {}
    for j, x in enumerate(inputs):
        p = sub.placeholder(f"arg{j}")
        p.meta = dict(x.meta)
        env[x] = p
    for n in run:
        env[n] = sub.node_copy(n, lambda a: env[a])
    sub.output(tuple(env[run[i]] for i in outputs))
    return torch.fx.GraphModule({}, sub)


def _replace(graph, run, inputs, outputs, name, redirect):
    """Replace `run` in graph by one invoke_subgraph call of the root's `name`; redirect
    (dict) gets each replaced output node -> the getitem node that stands for it."""
    members = set(run)
    last = run[-1]
    with graph.inserting_after(last):
        attr = graph.get_attr(name)
    with graph.inserting_after(attr):
        call = graph.call_function(torch.ops.higher_order.invoke_subgraph,
                                   (attr, name, *inputs))
    call.meta["example_value"] = tuple(run[i].meta["example_value"] for i in outputs)
    prev = call
    for k, i in enumerate(outputs):
        with graph.inserting_after(prev):
            item = graph.call_function(operator.getitem, (call, k))
        item.meta = dict(run[i].meta)
        run[i].replace_all_uses_with(item, delete_user_cb=lambda u: u not in members)
        redirect[run[i]] = item
        prev = item
    for n in reversed(run):
        graph.erase_node(n)


def _options(fn):
    """(identity key, max_reuse_entries) of a nested_compile_region function."""
    fn = getattr(fn, "__func__", fn)
    return fn, getattr(fn, "__marked_compile_region_max_reuse_entries__", 8)


def outline(graph, root, records, backend_name, frame=""):
    """Outline the repeated regions of `graph` (see the module docstring).

    Args:
        graph: the frame's torch.fx.Graph, finished (its output node made); not changed.
        root: dict of the graph's get_attr targets; not changed.
        records: the engine's region records (values/hop.h cdyn_region_end), in trace order.
        backend_name: the compile's backend name ("auto" outlines modules only for
            AUTO_BACKENDS).
        frame: the compiled frame's name, for the logs.

    Returns:
        (graph, root) with the regions outlined (a new graph and dict), or None when nothing
        was outlined.

    Raises:
        ReuseLimitExceeded (a RuntimeError): a nested_compile_region function gave more
            distinct bodies than its max_reuse_entries (as torch.compile).
    """
    from cdynamo import config
    mode = config.regional_compile
    if mode == "off" or not records:
        return None
    modules = mode == "auto" and backend_name in AUTO_BACKENDS
    counts = {}
    for rec in records:
        counts[rec[1]] = counts.get(rec[1], 0) + 1
    groups = {}
    variants = {}
    for rec in records:
        kind, key, label, grad, autocast = rec[0], rec[1], rec[4], rec[5], rec[6]
        annotated = kind == "annotated"
        if not annotated and (not modules or counts[key] < 2):
            continue
        run = _run(rec, graph)
        label = str(label) if label is not None else getattr(key, "__qualname__", "?")
        reason = None
        if run is None:
            reason = "its nodes were removed from the graph"
        elif autocast:
            reason = "called inside an autocast block"
        elif not annotated and len(run) < AUTO_MIN_NODES:
            reason = f"fewer than {AUTO_MIN_NODES} operations"
        if reason is None:
            try:
                structure, inputs, outputs = _signature(run, grad)
            except _Refused as e:
                reason = str(e)
        if reason is None and grad and any(
                getattr(x.meta.get("example_value"), "requires_grad", False) for x in inputs):
            if not annotated:
                reason = "needs autograd (AOTAutograd re-traces each invoke_subgraph call of " \
                         "a training graph: slower than inline)"
            elif backend_name not in AUTOGRAD_BACKENDS:
                reason = f"needs autograd, which backend {backend_name!r} does not give " \
                         "invoke_subgraph correctly"
        if reason is not None:
            if annotated or log.isEnabledFor(logging.DEBUG):
                _note(frame, label, kind, 1, None, reason)
            continue
        gkey = (annotated, _options(key)[0] if annotated else None, grad, structure)
        g = groups.get(gkey)
        if g is None:
            g = groups[gkey] = _Group(kind, key, label)
            if annotated:
                fn, limit = _options(key)
                variants[fn] = variants.get(fn, 0) + 1
                if variants[fn] > limit:
                    raise ReuseLimitExceeded(
                        f"nested_compile_region: {getattr(fn, '__qualname__', fn)} gave more "
                        f"than max_reuse_entries={limit} different bodies in one graph (its "
                        "calls differ in shapes, constants or branches taken); raise "
                        "max_reuse_entries, or make the calls alike")
        g.runs.append(run)
        g.inputs.append(inputs)
        g.outputs.update(outputs)
    chosen = [g for g in groups.values() if g.kind == "annotated" or len(g.runs) >= 2]
    if not chosen:
        return None
    chosen.sort(key=lambda g: (g.kind != "annotated", -len(g.runs[0])))
    val_map = {}
    new_graph = torch.fx.Graph()
    out = new_graph.graph_copy(graph, val_map)
    new_graph.output(out)
    new_root = dict(root)
    taken = set()
    redirect = {}   # outputs of runs already replaced -> their getitem nodes
    outlined = 0
    for g in chosen:
        picks = [k for k, run in enumerate(g.runs) if not any(n in taken for n in run)]
        if not picks or (g.kind != "annotated" and len(picks) < 2):
            continue   # inside blocks outlined already (a region within a region)
        for k in picks:
            taken.update(g.runs[k])
        outputs = tuple(sorted(g.outputs))
        first = picks[0]
        run0 = [val_map[n] for n in g.runs[first]]
        inputs0 = [redirect.get(val_map[x], val_map[x]) for x in g.inputs[first]]
        name = _fresh_name(new_root)
        new_root[name] = _body(run0, inputs0, outputs)
        for k in picks:
            _replace(new_graph, [val_map[n] for n in g.runs[k]],
                     [redirect.get(val_map[x], val_map[x]) for x in g.inputs[k]], outputs,
                     name, redirect)
        outlined += 1
        _note(frame, g.label, g.kind, len(picks), name, None)
    if not outlined:
        return None
    new_graph.lint()
    return new_graph, new_root


def _note(frame, label, kind, calls, subgraph, reason):
    entry = {"frame": frame, "label": label, "kind": kind, "calls": calls,
             "subgraph": subgraph, "reason": reason}
    region_log.append(entry)
    if subgraph is not None:
        log.info("regional compile: %s: %d call(s) of %s (%s) share %s", frame, calls, label,
                 kind, subgraph)
    else:
        log.debug("regional compile: %s: %s (%s) not outlined: %s", frame, label, kind, reason)
