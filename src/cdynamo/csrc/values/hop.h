/* values/hop.h: the higher-order ops family, shared by values/hop.c (the family table,
 * torch.cond, checkpoint, torch.func transforms, and the body tracer),
 * values/autograd_fn.c (custom autograd.Function: apply and its ctx), values/functorch.c
 * (torch.vmap, torch.func.grad) and values/scan.c (associative_scan's operator).
 * Internal to the engine. */
#ifndef CDYN_HOP_H
#define CDYN_HOP_H
#include "../tx.h"

/* Which op a HOP value is (its bits). */
enum {
    HOP_NONE = 0,
    HOP_COND,            /* torch.cond */
    HOP_CHECKPOINT,      /* torch.utils.checkpoint.checkpoint */
    HOP_AUTOGRAD_APPLY,  /* <torch.autograd.Function subclass>.apply (u.obj.obj: the bound
                            method) */
    HOP_UNSUPPORTED,     /* torch.func transforms, other torch._higher_order_ops: a graph
                            break with a reason */
    HOP_VMAP,            /* torch.vmap / torch.func.vmap (values/functorch.c) */
    HOP_VMAPPED,         /* what torch.vmap(f, ...) returned (values/functorch.c) */
    HOP_GRAD,            /* torch.func.grad / grad_and_value (values/functorch.c) */
    HOP_GRADDED,         /* what they returned */
    HOP_WRAP,            /* torch._higher_order_ops.wrap.wrap (torch.ops.higher_order.wrap) */
    HOP_ASSOC_SCAN,      /* torch.ops.higher_order.associative_scan (values/scan.c) */
    HOP_INVOKE_SUBGRAPH, /* torch._higher_order_ops.invoke_subgraph.invoke_subgraph_placeholder,
                            what a torch.compiler.nested_compile_region function calls */
};

/* A body being traced into its own graph (a sub-trace, graph.c) and the state it must leave
 * as it found it: no side effects on values made before it, the same grad mode. */
typedef struct {
    cdyn_sub sub;
    long mutations;         /* tx->mutations at the start */
    Py_ssize_t n_effects;   /* len(tx->effects) at the start */
    long long serial;       /* tx->ckpt_serial at the start (restored at the end) */
    int grad;               /* tx->grad_enabled at the start */
    int begun;
    PyObject *outputs;      /* strong: the output structure of FX nodes, once ended */
} cdyn_body;

/* Start tracing a body: a new graph becomes current. b is zeroed first. */
tr_status cdyn_body_begin(cdyn_tx *tx, cdyn_body *b);
/* The body's arguments: each TENSOR of args becomes a placeholder of the body's graph (a new
 * TENSOR value with the same fake); any other value is passed as it is (constants are baked
 * into the body; tensors inside containers are lifted when used). *out: new list. */
tr_status cdyn_body_bind(cdyn_tx *tx, cdyn_body *b, PyObject *const *args, Py_ssize_t nargs,
                         PyObject **out);
/* The tensors of a body's result v (a TENSOR, or TUPLE/LIST/plain DICT of them, nested;
 * constants allowed when allow_const), appended to the list `tensors` in order. */
tr_status cdyn_body_flatten(cdyn_tx *tx, PyObject *v, int allow_const, PyObject *tensors);
/* The FX nodes of a list of TENSOR values in the current (body) graph, lifted: new tuple. */
tr_status cdyn_body_nodes(cdyn_tx *tx, PyObject *tensors, PyObject **out);
/* End the body: refuse side effects and a changed grad mode (TR_UNSUPPORTED naming `what`),
 * keep `outputs` (borrowed structure of FX nodes) for its output node, and make the enclosing
 * level current again. */
tr_status cdyn_body_end(cdyn_tx *tx, cdyn_body *b, const char *what, PyObject *outputs);
/* The ended body as a GraphModule registered on the current level's root under a fresh name
 * `<base>_<i>`, and a SUBGRAPH value for its get_attr node. *out: new value. */
tr_status cdyn_body_module(cdyn_tx *tx, cdyn_body *b, const char *base, PyObject **out);
/* After the op failed: the SUBGRAPH value's get_attr node and module leave the current
 * level's graph and root (subv may be NULL). */
void cdyn_body_discard(cdyn_tx *tx, PyObject *subv);
/* Release b; when it is still being traced (a failure), pop it and restore the grad mode. */
void cdyn_body_clear(cdyn_tx *tx, cdyn_body *b);
/* Rebuild the structure of v (a body's result) with its TENSOR leaves taken in order from
 * items (a list of values, from *pos). *out: new value. */
tr_status cdyn_body_rebuild(cdyn_tx *tx, PyObject *v, PyObject *items, Py_ssize_t *pos,
                            PyObject **out);
/* New values (no source) for the lifted free nodes of b, appended to `list`: TENSORs, and
 * SYMINTs for lifted symbolic ints. */
tr_status cdyn_body_free_values(cdyn_tx *tx, cdyn_body *b, PyObject *list);
/* trace_body's flags */
enum {
    BODY_ALLOW_CONST = 1,   /* the result may hold constants besides tensors */
    BODY_AUTO_INPUTS = 2,   /* args are not bound as placeholders: tensors (and symbolic
                               ints) of args and kwargs are lifted when the body uses them,
                               as its free variables (torch._dynamo's "automatic" inputs) */
};
/* Trace fn(*args) (kwnames: tuple naming the last args, or NULL) as the body b (begun here):
 * each TENSOR argument a placeholder unless BODY_AUTO_INPUTS; *ret the body's result value
 * (new), the body ended (its output: the tuple of the result's tensors). `what` names the
 * body in reasons. */
tr_status cdyn_hop_trace_body(cdyn_tx *tx, cdyn_fs *fs, cdyn_body *b, const char *what,
                              PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames, int flags, PyObject **ret);
/* Record torch._C._set_grad_enabled(mode) in the current graph (the real mode follows). */
tr_status cdyn_hop_set_grad(cdyn_tx *tx, int mode);
/* Positional and keyword arguments of a call (args borrowed) bound to `names` (a
 * NULL-terminated list); the first nreq are required. a[] (one slot per name) gets borrowed
 * values or NULL. TR_UNSUPPORTED (naming `what`) for an unknown, repeated or missing one. */
tr_status cdyn_hop_bind_params(cdyn_tx *tx, const char *what, PyObject *const *args,
                               Py_ssize_t nargs, PyObject *kwnames, const char *const *names,
                               int nreq, PyObject **a);
/* After a failure: the real and symbolic grad mode back to `mode` (no node). */
void cdyn_hop_restore_grad(cdyn_tx *tx, int mode);
/* 1 when some TENSOR of args requires grad (from its fake). */
int cdyn_hop_any_requires_grad(PyObject *const *args, Py_ssize_t n);
/* Prefix tx->reason with "what: " (the innermost reason stays readable). */
void cdyn_hop_reason(cdyn_tx *tx, const char *what);

/* Record the op as one call_function node of `op` (a torch.ops.higher_order operator) on the
 * values in `args` (a list) and kwnames (tuple or NULL naming the last ones); its result
 * (a tuple of tensors) as a list of TENSOR values. *items: new list. */
tr_status cdyn_hop_call_node(cdyn_tx *tx, PyObject *op, PyObject *args, PyObject *kwnames,
                             PyObject **items);

/* ---- regions -----------------------------------------------------------------------------
 * An inlined call of the top graph (an nn.Module's forward, a nested_compile_region
 * function) whose nodes cdynamo/_regions.py may outline into one invoke_subgraph call when
 * the graph is compiled. A record only names the call's nodes and what they may be grouped
 * by; the outliner checks that each candidate is a pure, contiguous run of call nodes and
 * groups candidates by structure, so a wrong or stale record costs a missed outlining, never
 * a wrong graph. */
typedef struct {
    int on;            /* the call is traced into the top graph (no sub-trace active) */
    PyObject *prev;    /* strong or NULL: tx->last_node before the call */
} cdyn_region;

/* Before the call. */
void cdyn_region_begin(cdyn_tx *tx, cdyn_region *r);
/* After the call succeeded: when it made nodes, append to tx->regions the record
 * (kind, key, prev node or None, last node, label, grad mode, autocast open) with kind
 * "module" or "annotated", key what its calls are grouped by (a class, a function; the
 * outliner reads a nested_compile_region function's options from it), label (a source or
 * a name) for the logs; all borrowed. Releases r. 0, or -1 with an exception. */
int cdyn_region_end(cdyn_tx *tx, cdyn_region *r, const char *kind, PyObject *key,
                    PyObject *label);
/* Release r after a failed call. */
void cdyn_region_clear(cdyn_region *r);

/* ---- values/autograd_fn.c ---------------------------------------------------------------- */
tr_status cdyn_autograd_apply(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args,
                              Py_ssize_t nargs, PyObject *kwnames, PyObject **out);
tr_status cdyn_fnctx_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out);
tr_status cdyn_fnctx_setattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value);
tr_status cdyn_fnctx_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *self, PyObject *name,
                                 PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                                 PyObject **out);
/* torch.autograd.Function.apply's function and the Function class; 0 / -1. */
int cdyn_autograd_fn_init(void);
/* 1 when obj is <Function subclass>.apply (a bound classmethod). */
int cdyn_is_autograd_apply(PyObject *obj);

/* ---- values/scan.c ------------------------------------------------------------------------ */
/* torch.ops.higher_order.associative_scan(combine_fn, xs, additional_inputs); op: the operator
 * (borrowed). */
tr_status cdyn_assoc_scan(cdyn_tx *tx, cdyn_fs *fs, PyObject *op, PyObject *const *args,
                          Py_ssize_t nargs, PyObject *kwnames, PyObject **out);
int cdyn_scan_init(void);

/* ---- values/functorch.c -------------------------------------------------------------------- */
/* torch.vmap(func, in_dims, out_dims, randomness, chunk_size): fn is the HOP_VMAP value. */
tr_status cdyn_vmap_make(cdyn_tx *tx, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames, PyObject **out);
/* A call of the HOP_VMAPPED value vf. */
tr_status cdyn_vmap_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *vf, PyObject *const *args,
                         Py_ssize_t nargs, PyObject *kwnames, PyObject **out);
/* torch.func.grad / grad_and_value(func, argnums, has_aux): fn is the HOP_GRAD value. */
tr_status cdyn_grad_make(cdyn_tx *tx, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames, PyObject **out);
/* A call of the HOP_GRADDED value gf. */
tr_status cdyn_grad_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *gf, PyObject *const *args,
                         Py_ssize_t nargs, PyObject *kwnames, PyObject **out);
int cdyn_functorch_init(void);

#endif
