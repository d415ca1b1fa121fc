"""cdynamo under torch.distributed: DistributedDataParallel's gradient buckets, and the
collectives of compiled code (the second half of this file).

Why: DDP all-reduces gradients in buckets, each launched by autograd hooks as soon as every
gradient of the bucket is ready. A compiled graph runs its backward as one autograd node, so
every gradient becomes ready at the same moment (when the whole backward has finished) and no
all-reduce overlaps the backward. Splitting the forward graph where DDP's buckets end gives
one backward node per bucket: the bucket closest to the output finishes its backward first
and its all-reduce runs while the earlier pieces still compute (torch._dynamo's DDPOptimizer
does the same; the plan below reproduces its bucket boundaries, so both give the same number
of subgraphs for the same program).

Entry point: ``maybe_split_backend(options)``, called by ``_glue.compile_graph`` for every
graph: while a DDP module runs its forward (``DistributedDataParallel._get_active_ddp_module()``
is set) and ``cdynamo.config.optimize_ddp`` is on, it returns a backend that plans the buckets,
splits the graph with ``torch.fx.passes.split_module`` and compiles each piece with the
user's backend; otherwise the user's backend itself.

The plan (``plan_buckets``):
  * nodes are visited from the output backwards (the order in which backward makes the
    gradients ready); a node's parameters are its positional arguments that are graph inputs
    holding an ``nn.Parameter`` (cdynamo lifts parameters to inputs), the parameter of a
    ``get_attr``, or the parameters of a ``call_module`` target (once per module);
  * only parameters that require grad and that DDP does not ignore (``_ddp_ignored``) count;
    their size is their storage's size in bytes; a parameter used by two nodes counts twice
    (as torch._dynamo counts it);
  * when the bucket being filled has reached the cap (``ddp.bucket_bytes_cap``; for the first
    bucket, the one nearest the output, DDP's default first-bucket cap
    ``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``, at most the cap, as torch._dynamo uses;
    DDP itself rebuilds its first bucket at that size only when bucket_cap_mb is left at its
    default, at bucket_cap_mb otherwise: the subgraph counts follow torch._dynamo's)
    a new bucket starts before the next node, unless no value computed in the bucket is used
    outside it (a piece must have an output): then the bucket grows until one is;
  * a leading bucket without parameters (only parameter-free ops near the inputs) joins the
    next one.

Each split is logged on the "cdynamo.ddp" logger (INFO: how many pieces and why, DEBUG: the
parameters of each bucket) and appended to ``split_log`` (``SplitRecord``). Fake tensors of
the trace's FakeTensorMode flow through the pieces so that each one is compiled with example
inputs of the right shapes. If planning or splitting fails the graph is compiled whole
(logged as a WARNING).

Collectives: torch.distributed's functional collectives and in-place c10d calls, called by
traced code, are traced through the plain-Python versions below (``polyfill_for``, asked by
the engine, values/torch.c): ``_c10d_functional`` operators on a group name, as in
torch._dynamo's graphs.
"""
from __future__ import annotations

import dataclasses
import logging

import torch
import torch.fx

log = logging.getLogger("cdynamo.ddp")

#: one SplitRecord per graph that was split (or planned and left whole), newest last
split_log: list = []
_SPLIT_LOG_MAX = 256


@dataclasses.dataclass
class Bucket:
    """One planned bucket: the nodes (in reverse graph order), their parameters' names and
    their total size in bytes."""
    nodes: list = dataclasses.field(default_factory=list)
    params: list = dataclasses.field(default_factory=list)
    nbytes: int = 0
    grown: int = 0  # nodes taken past the cap because the bucket had no output yet


@dataclasses.dataclass
class SplitRecord:
    """What happened to one graph compiled under DDP.

    frame: the compiled frame's name (as the logs give it) or "".
    bucket_bytes_cap / first_bucket_bytes_cap: the caps used.
    buckets: per piece in graph order (inputs first): (parameter names, bytes).
    pieces: how many subgraphs were compiled (1: not split).
    reason: why it was (or was not) split, in words.
    """
    frame: str
    bucket_bytes_cap: int
    first_bucket_bytes_cap: int
    buckets: list
    pieces: int
    reason: str


def active_ddp_module():
    """The DistributedDataParallel module whose forward is running, or None."""
    if not torch.distributed.is_available():
        return None
    try:
        from torch.nn.parallel import DistributedDataParallel
    except ImportError:  # pragma: no cover (torch without distributed)
        return None
    getter = getattr(DistributedDataParallel, "_get_active_ddp_module", None)
    return getter() if getter is not None else None


def bucket_caps(ddp) -> tuple[int, int]:
    """(bucket cap, first bucket cap) in bytes for a DDP module (or any object with
    ``bucket_bytes_cap``)."""
    cap = int(ddp.bucket_bytes_cap)
    first = getattr(torch.distributed, "_DEFAULT_FIRST_BUCKET_BYTES", cap)
    return cap, min(int(first), cap)


def maybe_split_backend(options, frame: str = ""):
    """The backend that compile_graph hands the graph to: options.backend itself, or, while a
    DDP forward is running and cdynamo.config.optimize_ddp is on, a splitting backend that
    calls options.backend once per bucket."""
    from cdynamo import config

    backend = options.backend
    if not config.optimize_ddp:
        return backend
    ddp = active_ddp_module()
    if ddp is None or not hasattr(ddp, "bucket_bytes_cap"):
        return backend
    cap, first = bucket_caps(ddp)
    return BucketSplitter(backend, cap, first, getattr(options, "backend_name", repr(backend)),
                          frame)


# ---- the plan -------------------------------------------------------------------------------


def _counted_param(value):
    """value if it is a parameter DDP all-reduces (requires grad, not ignored), else None."""
    if isinstance(value, torch.nn.Parameter) and value.requires_grad and \
            not getattr(value, "_ddp_ignored", False):
        return value
    return None


def _nbytes(p) -> int:
    try:
        return p.untyped_storage().nbytes()
    except Exception:  # noqa: BLE001 (a tensor without storage: count its elements)
        return p.numel() * p.element_size()


def _attr(gm, target):
    obj = gm
    for part in str(target).split("."):
        obj = getattr(obj, part)
    return obj


def _has_output_outside(bucket: Bucket) -> bool:
    inside = set(bucket.nodes)
    return any(user not in inside for n in bucket.nodes for user in n.users)


def plan_buckets(gm: torch.fx.GraphModule, example_inputs, cap: int, first_cap: int) -> list:
    """The buckets of gm's nodes, in graph order (the bucket nearest the inputs first); see
    the module docstring for the rules."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    input_param = {}
    for node, value in zip(placeholders, example_inputs):
        p = _counted_param(value)
        if p is not None:
            input_param[node] = p

    def add(bucket, p, name):
        bucket.nbytes += _nbytes(p)
        bucket.params.append(name)

    seen_modules = set()
    filling = [Bucket()]  # newest (nearest the inputs) last
    for node in reversed(gm.graph.nodes):
        if node.op in ("placeholder", "output"):
            continue
        cur = filling[-1]
        limit = first_cap if len(filling) == 1 else cap
        if cur.nbytes >= limit:
            if _has_output_outside(cur):
                cur = Bucket()
                filling.append(cur)
            else:
                cur.grown += 1
        if node.op in ("call_function", "call_method"):
            for a in node.args:
                if isinstance(a, torch.fx.Node) and a in input_param:
                    add(cur, input_param[a], a.name)
        elif node.op == "get_attr":
            p = _counted_param(_attr(gm, node.target))
            if p is not None:
                add(cur, p, str(node.target))
        elif node.op == "call_module":
            mod = gm.get_submodule(node.target)
            if mod not in seen_modules:
                seen_modules.add(mod)
                for pname, p in mod.named_parameters():
                    if _counted_param(p) is not None:
                        add(cur, p, f"{node.target}.{pname}")
        cur.nodes.append(node)
    if len(filling) > 1 and filling[-1].nbytes == 0:
        # only parameter-free nodes before the last boundary: no bucket of their own
        filling[-2].nodes.extend(filling.pop().nodes)
    filling.reverse()
    return filling


# ---- splitting and compiling ----------------------------------------------------------------


class _Piece:
    """A compiled piece installed in the split module (a plain callable attribute, so the
    split module's code calls it without nn.Module's call machinery)."""
    __slots__ = ("fn", "name")

    def __init__(self, fn, name):
        self.fn = fn
        self.name = name

    def __call__(self, *args):
        return self.fn(*args)


class BucketSplitter:
    """A backend (gm, example_inputs) -> callable that splits gm at DDP bucket boundaries and
    compiles each piece with `backend`."""

    def __init__(self, backend, cap: int, first_cap: int, backend_name: str = "", frame: str = ""):
        self.backend = backend
        self.cap = cap
        self.first_cap = first_cap
        self.backend_name = backend_name
        self.frame = frame
        self.buckets = None

    def _record(self, buckets, pieces, reason):
        rec = SplitRecord(self.frame, self.cap, self.first_cap,
                          [(list(reversed(b.params)), b.nbytes) for b in buckets], pieces, reason)
        split_log.append(rec)
        del split_log[:-_SPLIT_LOG_MAX]
        return rec

    def __call__(self, gm, example_inputs):
        try:
            buckets = plan_buckets(gm, example_inputs, self.cap, self.first_cap)
        except Exception as e:  # noqa: BLE001 (compile whole)
            log.warning("DDP bucket split of %s: planning failed (%s: %s); compiling the "
                        "graph whole", self.frame or "graph", type(e).__name__, e)
            return self.backend(gm, example_inputs)
        self.buckets = buckets
        where = self.frame or "graph"
        if len(buckets) == 1:
            nparams = len(buckets[0].params)
            reason = ("no parameter that DDP all-reduces" if not nparams else
                      f"its {nparams} parameters ({buckets[0].nbytes} bytes) fit in one "
                      f"bucket of {self.first_cap} bytes")
            self._record(buckets, 1, "not split: " + reason)
            log.debug("DDP: %s not split: %s", where, reason)
            return self.backend(gm, example_inputs)
        try:
            split_gm, names = self._split(gm, buckets)
        except Exception as e:  # noqa: BLE001 (compile whole)
            log.warning("DDP bucket split of %s failed (%s: %s); compiling the graph whole",
                        where, type(e).__name__, e)
            self._record(buckets, 1, f"not split: split_module failed ({type(e).__name__})")
            return self.backend(gm, example_inputs)
        reason = (f"DDP bucket boundaries (bucket_bytes_cap={self.cap}, first bucket "
                  f"{self.first_cap} bytes; set cdynamo.config.optimize_ddp = False to "
                  "compile one graph)")
        rec = self._record(buckets, len(buckets), "split at " + reason)
        log.info("DDP: %s split into %d subgraphs at %s", where, len(buckets), reason)
        for i, (params, nbytes) in enumerate(rec.buckets):
            grown = buckets[i].grown
            log.debug("DDP: %s piece %d (%s): %d bytes, parameters %s%s", where, i, names[i],
                      nbytes, ", ".join(params) or "-",
                      f" (grown by {grown} nodes to have an output)" if grown else "")
        self._compile_pieces(split_gm, names, example_inputs)
        return split_gm

    @staticmethod
    def _split(gm, buckets):
        from torch.fx.passes.split_module import split_module

        index = {}
        for i, b in enumerate(buckets):
            for n in b.nodes:
                index[n] = i
        split_gm = split_module(gm, None, lambda n: index[n], tuple_return=True)
        names = [n.target for n in split_gm.graph.nodes if n.op == "call_module"]
        if len(names) != len(buckets):
            raise RuntimeError(f"split_module made {len(names)} pieces for "
                               f"{len(buckets)} buckets")
        return split_gm, names

    def _compile_pieces(self, split_gm, names, example_inputs):
        """Run split_gm on fake copies of the inputs; compile each piece when it is reached,
        with the fake values it receives as example inputs."""
        from torch._guards import TracingContext, detect_fake_mode
        from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

        fake_mode = detect_fake_mode(example_inputs) or FakeTensorMode()
        ctx = TracingContext.try_get()
        ddp_ctx = None
        if ctx is not None and hasattr(ctx, "ddp_optimizer_ctx"):
            # AOTAutograd compiles the backward of each piece lazily, last piece first, and
            # reads that piece's forward metadata from here (its place for it)
            ddp_ctx = _PieceMetadata()
            ctx.ddp_optimizer_ctx = ddp_ctx

        def fake(x):
            if isinstance(x, torch.Tensor) and not isinstance(x, FakeTensor):
                return fake_mode.from_tensor(x)
            return x

        backend = self.backend
        pieces = set(names)

        class Compiler(torch.fx.Interpreter):
            def call_module(self, target, args, kwargs):
                if target not in pieces:
                    return super().call_module(target, args, kwargs)
                sub = self.fetch_attr(target)
                args = [fake(a) for a in args]
                if ctx is not None:
                    ctx.fw_metadata = None
                compiled = backend(sub, list(args))
                if not callable(compiled):
                    raise TypeError(f"backend returned {type(compiled).__name__}, "
                                    "expected a callable")
                if ddp_ctx is not None and getattr(ctx, "fw_metadata", None) is not None:
                    ddp_ctx.curr_bucket += 1
                    ddp_ctx.metadata_per_bucket.append(ctx.fw_metadata)
                with fake_mode:
                    fake_mode.allow_non_fake_inputs, old = True, fake_mode.allow_non_fake_inputs
                    try:
                        out = sub(*args)
                    finally:
                        fake_mode.allow_non_fake_inputs = old
                split_gm.delete_submodule(target)
                setattr(split_gm, target, _Piece(compiled, target))
                return out

        Compiler(split_gm).run(*[fake(x) for x in example_inputs])
        split_gm.recompile()


class _PieceMetadata:
    """AOTAutograd's per-piece forward metadata slot (TracingContext.ddp_optimizer_ctx):
    curr_bucket, metadata_per_bucket."""

    def __init__(self):
        self.curr_bucket = -1
        self.metadata_per_bucket = []


# ---- collectives in compiled code ------------------------------------------------------------
#
# torch.distributed._functional_collectives' functions, as traced by cdynamo: plain-Python
# versions (POLYFILL rules in trace_rules.CALLABLE_RULES) that put the _c10d_functional
# operators in the graph, as torch._dynamo's graphs hold them: the collective on a group name
# (a string, known at trace time), then its wait_tensor. The in-place c10d calls
# (dist.all_reduce(t), async_op=False) become the functional collective and a copy_ into t,
# as torch._dynamo rewrites them. Group names are found at trace time (group_name, FOLD):
# None is the default group, a ProcessGroup its name, a list of ranks the group of those ranks.


def group_name(group, tag: str = "") -> str:
    """The name of a collective's group: a ProcessGroup, a group name, a list of ranks or
    None (the default group). Called at trace time (a FOLD rule) or from a polyfill."""
    from torch.distributed import distributed_c10d as c10d

    if group is None:
        group = c10d._get_default_group()
    if isinstance(group, str):
        return group
    if isinstance(group, (list, tuple)) and all(isinstance(r, int) for r in group):
        return c10d._resolve_group_name_by_ranks_and_tag(list(group), tag)
    if isinstance(group, tuple) and len(group) == 2 and isinstance(group[1], int):
        return group[0]._dim_group_names[group[1]]   # (DeviceMesh, dim)
    names = getattr(group, "_dim_group_names", None)   # a 1-D DeviceMesh
    if names is not None and getattr(group, "ndim", None) == 1:
        return names[0]
    name = getattr(group, "group_name", None)
    if isinstance(name, str):
        return name
    raise TypeError(f"cdynamo: unsupported process group {type(group).__name__} in a "
                    "compiled collective")


def group_size(name: str) -> int:
    """The size of the group with this name (trace time)."""
    from torch.distributed import distributed_c10d as c10d

    return c10d._get_group_size_by_name(name)


def reduce_op_name(op) -> str:
    """"sum", "avg", ... for a c10d ReduceOp or a string (trace time)."""
    if isinstance(op, str):
        return op.lower()
    from torch.distributed import ReduceOp

    for name in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"):
        if op == getattr(ReduceOp, name, None):
            return name.lower()
    raise ValueError(f"cdynamo: reduce op {op!r} has no functional collective")


# Trace-time helpers: called by the engine with the real arguments while tracing (marked as
# constant results, as torch._dynamo.assume_constant_result), their results constants of the
# graph. A ProcessGroup is an object the trace cannot read attributes of; its name can be.
def _trace_group_name(group, tag=""):
    return group_name(group, tag)


def _trace_ranks_group_name(tag, *ranks):
    return group_name(list(ranks), tag)


def _trace_mesh_group_name(mesh, dim):
    return group_name((mesh, dim))


def _group_arg(group):
    """A list of ranks, or a (DeviceMesh, dim) pair, as its group's name (each element an
    argument of its own: the container is a value of the trace, not a constant)."""
    if isinstance(group, list):
        return _trace_ranks_group_name("", *group)
    if isinstance(group, tuple) and len(group) == 2:
        return _trace_mesh_group_name(group[0], group[1])
    return group


def _trace_group_size(name):
    return group_size(name)


def _trace_reduce_op(op):
    return reduce_op_name("sum" if op is None else op)


for _f in (_trace_group_name, _trace_ranks_group_name, _trace_mesh_group_name, _trace_group_size,
           _trace_reduce_op):
    _f._dynamo_marked_constant = True
del _f


def _unsupported(reason):
    from cdynamo.polyfills import unsupported

    return unsupported(reason)


# The plain-Python versions (inlined by the engine in place of the real functions).

def funcol_wait_tensor(tensor):
    return torch.ops._c10d_functional.wait_tensor(tensor)


def funcol_all_reduce(self, reduceOp, group, tag=""):
    name = _trace_group_name(_group_arg(group), tag)
    out = torch.ops._c10d_functional.all_reduce(self, _trace_reduce_op(reduceOp), name)
    return torch.ops._c10d_functional.wait_tensor(out)


def funcol_all_gather_tensor(self, gather_dim, group, tag=""):
    name = _trace_group_name(_group_arg(group), tag)
    size = _trace_group_size(name)
    out = torch.ops._c10d_functional.all_gather_into_tensor(self.contiguous(), size, name)
    out = torch.ops._c10d_functional.wait_tensor(out)
    if gather_dim != 0:
        out = torch.cat(torch.chunk(out, size, dim=0), dim=gather_dim)
    return out


def funcol_reduce_scatter_tensor(self, reduceOp, scatter_dim, group, tag=""):
    name = _trace_group_name(_group_arg(group), tag)
    size = _trace_group_size(name)
    if scatter_dim != 0:
        self = torch.cat(torch.chunk(self, size, dim=scatter_dim), dim=0)
    out = torch.ops._c10d_functional.reduce_scatter_tensor(
        self.contiguous(), _trace_reduce_op(reduceOp), size, name)
    return torch.ops._c10d_functional.wait_tensor(out)


def funcol_broadcast(self, src, group, tag=""):
    name = _trace_group_name(_group_arg(group), tag)
    out = torch.ops._c10d_functional.broadcast(self, src, name)
    return torch.ops._c10d_functional.wait_tensor(out)


def funcol_all_to_all_single(self, output_split_sizes, input_split_sizes, group, tag=""):
    name = _trace_group_name(_group_arg(group), tag)
    if output_split_sizes is None or input_split_sizes is None:
        if output_split_sizes is not None or input_split_sizes is not None:
            _unsupported("all_to_all_single with only one of the split sizes")
        size = _trace_group_size(name)
        output_split_sizes = [self.shape[0] // size] * size
        input_split_sizes = output_split_sizes
    out = torch.ops._c10d_functional.all_to_all_single(
        self, output_split_sizes, input_split_sizes, name)
    return torch.ops._c10d_functional.wait_tensor(out)


def c10d_all_reduce(tensor, op=None, group=None, async_op=False):
    if async_op:
        _unsupported("torch.distributed.all_reduce with async_op=True (a Work object)")
    tensor.copy_(funcol_all_reduce(tensor, op, group))
    return None


def c10d_all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    if async_op:
        _unsupported("torch.distributed.all_gather_into_tensor with async_op=True")
    output_tensor.copy_(funcol_all_gather_tensor(input_tensor, 0, group))
    return None


def c10d_reduce_scatter_tensor(output, input, op=None, group=None, async_op=False):
    if async_op:
        _unsupported("torch.distributed.reduce_scatter_tensor with async_op=True")
    output.copy_(funcol_reduce_scatter_tensor(input, op, 0, group))
    return None


def c10d_broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    if async_op:
        _unsupported("torch.distributed.broadcast with async_op=True (a Work object)")
    if group is not None or (group_src is not None and src is not None):
        # a sub-group's rank numbering: left to eager (a graph break, as torch._dynamo)
        _unsupported("torch.distributed.broadcast with a group")
    tensor.copy_(funcol_broadcast(tensor, src if group_src is None else group_src, None))
    return None


def c10d_all_gather(tensor_list, tensor, group=None, async_op=False):
    if async_op:
        _unsupported("torch.distributed.all_gather with async_op=True (a Work object)")
    gathered = funcol_all_gather_tensor(tensor.contiguous(), 0, group)
    for out, part in zip(tensor_list, torch.chunk(gathered, len(tensor_list), 0)):
        out.copy_(part.view_as(out))
    return None


def _c10d_unsupported(name):
    def call_breaks(*args, **kwargs):
        _unsupported(f"torch.distributed.{name} (an in-place collective cdynamo does not "
                     "rewrite to a functional one): runs eagerly, as torch._dynamo")
    call_breaks.__module__ = "cdynamo.polyfills.distributed"
    call_breaks.__qualname__ = call_breaks.__name__ = f"c10d_{name}_breaks"
    return call_breaks


# In-place collectives of torch.distributed without a functional rewrite above: recorded as
# graph calls they lose their mutation under AOTAutograd's functionalization (garbage with
# aot_eager), so each call is a graph break and runs eagerly.
_C10D_BREAKS = ("gather", "scatter", "reduce", "all_to_all", "reduce_scatter", "send", "recv",
                "isend", "irecv", "barrier", "monitored_barrier", "all_gather_object",
                "gather_object", "scatter_object_list", "broadcast_object_list",
                "all_gather_coalesced", "all_reduce_coalesced", "batch_isend_irecv",
                "all_to_all_single")


# The engine treats a function of a cdynamo module other than cdynamo.polyfills, reached from
# traced code, as a compiler function (a graph break); these are polyfills in its sense (the
# plain-Python versions it inlines, and the helpers they call at trace time), so they carry
# that module prefix.
for _f in (_trace_group_name, _trace_ranks_group_name, _trace_mesh_group_name, _group_arg,
           _trace_group_size,
           _trace_reduce_op, _unsupported, funcol_wait_tensor, funcol_all_reduce, funcol_all_gather_tensor,
           funcol_reduce_scatter_tensor, funcol_broadcast, funcol_all_to_all_single,
           c10d_all_reduce, c10d_all_gather_into_tensor,
           c10d_reduce_scatter_tensor, c10d_broadcast, c10d_all_gather):
    _f.__module__ = "cdynamo.polyfills.distributed"
del _f

_FUNCOL_POLYFILLS = (("all_reduce", funcol_all_reduce),
                     ("all_gather_tensor", funcol_all_gather_tensor),
                     ("all_gather_single", funcol_all_gather_tensor),
                     ("reduce_scatter_tensor", funcol_reduce_scatter_tensor),
                     ("reduce_scatter_single", funcol_reduce_scatter_tensor),
                     ("broadcast", funcol_broadcast),
                     ("all_to_all_single", funcol_all_to_all_single),
                     ("wait_tensor", funcol_wait_tensor))
_C10D_POLYFILLS = (("all_reduce", c10d_all_reduce),
                   ("all_gather_into_tensor", c10d_all_gather_into_tensor),
                   ("reduce_scatter_tensor", c10d_reduce_scatter_tensor),
                   ("broadcast", c10d_broadcast),
                   ("all_gather", c10d_all_gather)) + tuple(
                       (name, _c10d_unsupported(name)) for name in _C10D_BREAKS)
_polyfills: dict = {}
_polyfill_modules: set = set()


def polyfill_for(fn):
    """The plain-Python version of a torch.distributed function that the engine traces in its
    place (values/torch.c asks for every Python function of torch.distributed that traced
    code calls), or None: that function is recorded or traced as any other. Reads only
    modules already imported (the function's own)."""
    import sys

    for name, table in (("torch.distributed._functional_collectives", _FUNCOL_POLYFILLS),
                        ("torch.distributed", _C10D_POLYFILLS)):
        mod = sys.modules.get(name)
        if mod is not None and name not in _polyfill_modules:
            _polyfill_modules.add(name)
            for real, poly in table:
                f = getattr(mod, real, None)
                if f is not None:
                    _polyfills[f] = poly
    try:
        return _polyfills.get(fn)
    except TypeError:
        return None
