/* values/hop.c: higher-order ops, traced the way torch._dynamo does. Each body (a torch.cond
 * branch, a checkpointed or wrap()-ed function, an autograd.Function's forward and backward)
 * is traced into a graph of its own (a sub-trace, graph.c) by the ordinary interpreter,
 * registered on the enclosing graph's root as a GraphModule, and the op becomes one
 * call_function node of torch.ops.higher_order.<op> taking the subgraphs (get_attr nodes),
 * the operands, and the tensors and symbolic ints the bodies use from outside (closures,
 * globals, module parameters), lifted as extra inputs. A body that cannot be traced, or
 * that has side effects, makes the call a graph break (the op then runs in Python).
 *
 *   HOP       u.obj.obj the real callable; bits: HOP_* (values/hop.h)
 *   SUBGRAPH  u.sub     a traced body (graph_arg: its get_attr node)
 *   FNCTX     u.fnctx   the ctx of a traced autograd.Function (values/autograd_fn.c)
 */
#include "hop.h"
#include "../codegen.h"

static PyObject *fn_cond;         /* torch.cond */
static PyObject *fn_checkpoint;   /* torch.utils.checkpoint.checkpoint */
static PyObject *fn_wrap;         /* torch._higher_order_ops.wrap.wrap
                                     (torch.ops.higher_order.wrap) */
static PyObject *fn_vmap;         /* torch.vmap (torch.func.vmap) */
static PyObject *fn_grad, *fn_grad_and_value;   /* torch.func.grad / grad_and_value */
static PyObject *op_cond;         /* torch.ops.higher_order.cond */
static PyObject *op_checkpoint;   /* torch.ops.higher_order.tag_activation_checkpoint */
static PyObject *op_assoc_scan;   /* torch.ops.higher_order.associative_scan */
static PyObject *fn_isg;          /* invoke_subgraph_placeholder (nested_compile_region) */
static PyObject *code_ncr_inner;  /* the code of nested_compile_region's wrapper function */
static PyObject *hop_type;        /* torch._ops.HigherOrderOperator */
static PyObject *unsupported_fns; /* set: torch.func transforms */

int
cdyn_hop_classify(PyObject *obj)
{
    int r;
    if (fn_cond == NULL) {
        return HOP_NONE;
    }
    if (obj == fn_cond) {
        return HOP_COND;
    }
    if (obj == fn_checkpoint) {
        return HOP_CHECKPOINT;
    }
    if (obj == fn_wrap) {
        return HOP_WRAP;
    }
    if (obj == op_assoc_scan) {
        return HOP_ASSOC_SCAN;
    }
    if (obj == fn_isg) {
        return HOP_INVOKE_SUBGRAPH;
    }
    if (cdyn_hop_is_region_wrapper(obj)) {
        return HOP_NONE;   /* nested_compile_region's wrapper: inlined, it calls fn_isg */
    }
    if (obj == fn_vmap) {
        return HOP_VMAP;
    }
    if (obj == fn_grad || obj == fn_grad_and_value) {
        return HOP_GRAD;
    }
    if (cdyn_is_autograd_apply(obj)) {   /* a bound method or (torch >= 2.14) a C method */
        return HOP_AUTOGRAD_APPLY;
    }
    if (PyMethod_Check(obj)) {
        return HOP_NONE;
    }
    if (PyObject_TypeCheck(obj, (PyTypeObject *)hop_type)) {
        return HOP_UNSUPPORTED;
    }
    r = PySet_Contains(unsupported_fns, obj);
    if (r < 0) {
        PyErr_Clear();   /* unhashable: not one of them */
        r = 0;
    }
    if (r || (PyFunction_Check(obj) && cdyn_module_startswith(obj, "torch._higher_order_ops") &&
              !cdyn_module_startswith(obj, "torch._higher_order_ops.associative_scan"))) {
        return HOP_UNSUPPORTED;
    }
    return HOP_NONE;
}

void
cdyn_hop_reason(cdyn_tx *tx, const char *what)
{
    if (tx->reason != NULL) {
        PyObject *r = PyUnicode_FromFormat("%s: %U", what, tx->reason);
        if (r != NULL) {
            Py_SETREF(tx->reason, r);
        }
        PyErr_Clear();
    }
}

tr_status
cdyn_hop_set_grad(cdyn_tx *tx, int mode)
{
    PyObject *mv = cdyn_value_bool(mode), *r = NULL;
    tr_status st;
    if (mv == NULL) {
        return TR_ERROR;
    }
    st = cdyn_tx_graph_call(tx, "call_function", cdyn_G.set_grad_enabled, NULL, &mv, 1, NULL, &r);
    Py_DECREF(mv);
    Py_XDECREF(r);
    return st;
}

void
cdyn_hop_restore_grad(cdyn_tx *tx, int mode)
{
    PyObject *r;
    if (tx->grad_enabled == mode) {
        return;
    }
    /* a body failed inside a grad-mode change: the real mode follows the symbolic one */
    r = PyObject_CallFunctionObjArgs(cdyn_G.set_grad_enabled, mode ? Py_True : Py_False, NULL);
    if (r == NULL) {
        PyErr_WriteUnraisable(NULL);
    }
    Py_XDECREF(r);
    tx->grad_enabled = mode;
}

int
cdyn_hop_any_requires_grad(PyObject *const *args, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (V(args[i])->kind == VK_TENSOR) {
            PyObject *r = PyObject_GetAttrString(V(args[i])->u.tensor.fake, "requires_grad");
            int yes = r == Py_True;
            Py_XDECREF(r);
            PyErr_Clear();
            if (yes) {
                return 1;
            }
        }
    }
    return 0;
}

/* ---- bodies ------------------------------------------------------------------------------ */

tr_status
cdyn_body_begin(cdyn_tx *tx, cdyn_body *b)
{
    memset(b, 0, sizeof(*b));
    if (cdyn_tx_sub_push(tx, &b->sub) < 0) {
        return TR_ERROR;
    }
    b->begun = 1;
    b->mutations = tx->mutations;
    b->n_effects = PyList_GET_SIZE(tx->effects);
    b->serial = tx->ckpt_serial;
    b->grad = tx->grad_enabled;
    tx->ckpt_serial = cdyn_value_serial;   /* values made before the body are outside it */
    return TR_OK;
}

tr_status
cdyn_body_bind(cdyn_tx *tx, cdyn_body *b, PyObject *const *args, Py_ssize_t nargs,
               PyObject **out)
{
    PyObject *list = PyList_New(nargs);
    if (list == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *a = args[i], *v = NULL, *ph = NULL;
        if (V(a)->kind == VK_TENSOR) {
            ph = cdyn_tx_placeholder(tx, tx->graph, V(a)->u.tensor.node, V(a)->u.tensor.fake);
            if (ph == NULL || PyList_Append(b->sub.arg_nodes, ph) < 0) {
                Py_XDECREF(ph);
                Py_DECREF(list);
                return TR_ERROR;
            }
            v = cdyn_value_tensor(V(a)->u.tensor.fake, ph, NULL);
            Py_DECREF(ph);
            if (v == NULL) {
                Py_DECREF(list);
                return TR_ERROR;
            }
        }
        else {
            v = Py_NewRef(a);
        }
        PyList_SET_ITEM(list, i, v);
    }
    *out = list;
    return TR_OK;
}

/* 1 when v (a DICT) is a plain dict with constant keys, made by the trace (not a lazy input):
 * a body's result that the op's outputs can be put back into. */
static int
body_plain_dict(PyObject *v)
{
    return V(v)->u.dict.real == NULL && V(v)->u.dict.type == NULL &&
           V(v)->u.dict.factory == NULL && V(v)->u.dict.keyvals == NULL &&
           V(v)->u.dict.vals != NULL;
}

tr_status
cdyn_body_flatten(cdyn_tx *tx, PyObject *v, int allow_const, PyObject *tensors)
{
    PyObject *items = NULL;
    tr_status st;
    switch (V(v)->kind) {
    case VK_TENSOR:
        return PyList_Append(tensors, v) < 0 ? TR_ERROR : TR_OK;
    case VK_CONST:
        return allow_const ? TR_OK
                           : cdyn_tx_unsupported(tx, "a body returning a non-tensor %S", v);
    case VK_TUPLE:
    case VK_LIST:
        if (V(v)->u.seq.nt_type != NULL) {
            return cdyn_tx_unsupported(tx, "a body returning a named tuple");
        }
        st = cdyn_v_unpack(tx, v, &items);
        for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(items); i++) {
            st = cdyn_body_flatten(tx, PyList_GET_ITEM(items, i), allow_const, tensors);
        }
        Py_XDECREF(items);
        return st;
    case VK_DICT:
        if (!body_plain_dict(v)) {
            return cdyn_tx_unsupported(tx, "a body returning %S", v);
        }
        items = V(v)->u.dict.vals;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
            st = cdyn_body_flatten(tx, PyList_GET_ITEM(items, i), allow_const, tensors);
            if (st != TR_OK) {
                return st;
            }
        }
        return TR_OK;
    default:
        return cdyn_tx_unsupported(tx, "a body returning %S", v);
    }
}

tr_status
cdyn_body_nodes(cdyn_tx *tx, PyObject *tensors, PyObject **out)
{
    Py_ssize_t n = PyList_GET_SIZE(tensors);
    PyObject *t = PyTuple_New(n);
    if (t == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *fake = NULL, *node = NULL;
        tr_status st = cdyn_v_graph_arg(tx, PyList_GET_ITEM(tensors, i), &fake, &node);
        Py_XDECREF(fake);
        if (st != TR_OK) {
            Py_DECREF(t);
            return st;
        }
        PyTuple_SET_ITEM(t, i, node);
    }
    *out = t;
    return TR_OK;
}

tr_status
cdyn_body_end(cdyn_tx *tx, cdyn_body *b, const char *what, PyObject *outputs)
{
    Py_ssize_t ne = PyList_GET_SIZE(tx->effects);
    assert(b->sub.active);
    if (ne != b->n_effects) {
        /* a store replayed at the end of the frame cannot come from inside the op: drop
           it, and make sure the trace is not resumed (memos of the store were made) */
        if (PyList_SetSlice(tx->effects, b->n_effects, ne, NULL) < 0) {
            return TR_ERROR;
        }
        tx->mutations++;
    }
    if (tx->mutations != b->mutations) {
        return cdyn_tx_unsupported(tx, "%s: side effect inside the body (a store into a value "
                                   "from outside it)", what);
    }
    if (tx->grad_enabled != b->grad) {
        return cdyn_tx_unsupported(tx, "%s: the body leaves the grad mode changed", what);
    }
    b->outputs = Py_NewRef(outputs);
    cdyn_tx_sub_pop(tx, &b->sub);
    tx->ckpt_serial = b->serial;
    return TR_OK;
}

tr_status
cdyn_body_module(cdyn_tx *tx, cdyn_body *b, const char *base, PyObject **out)
{
    PyObject *gm = NULL, *name = NULL, *node = NULL;
    tr_status st = TR_ERROR;
    assert(!b->sub.active && b->outputs != NULL);
    gm = PyObject_CallMethod(tx->glue, "finish_subgraph", "OOO", b->sub.graph, b->sub.root,
                             b->outputs);
    if (gm == NULL) {
        return cdyn_tx_unsupported(tx, "cannot build the graph module of a %s body", base);
    }
    for (int i = 0; name == NULL; i++) {
        int has;
        name = PyUnicode_FromFormat("%s_%d", base, i);
        has = name ? PyDict_Contains(tx->root, name) : -1;
        if (has < 0) {
            goto done;
        }
        if (has) {
            Py_CLEAR(name);
        }
    }
    if (PyDict_SetItem(tx->root, name, gm) < 0) {
        goto done;
    }
    node = PyObject_CallMethodOneArg(tx->graph, cdyn_G.s_get_attr, name);
    if (node == NULL || (*out = cdyn_value_alloc(VK_SUBGRAPH, NULL)) == NULL) {
        goto done;
    }
    V(*out)->u.sub.gm = Py_NewRef(gm);
    V(*out)->u.sub.node = Py_NewRef(node);
    st = TR_OK;
done:
    Py_XDECREF(gm);
    Py_XDECREF(name);
    Py_XDECREF(node);
    return st;
}

/* Drop the get_attr node and module of a failed op's body; any pending exception (the
 * failure's) is kept across the call. */
void
cdyn_body_discard(cdyn_tx *tx, PyObject *subv)
{
    PyObject *r = NULL, *et = NULL, *ev = NULL, *etb = NULL;
    if (subv == NULL) {
        return;
    }
    PyErr_Fetch(&et, &ev, &etb);
    r = PyObject_CallMethod(tx->glue, "discard_subgraph", "OOO", tx->graph, tx->root,
                            V(subv)->u.sub.node);
    if (r == NULL) {
        PyErr_WriteUnraisable(NULL);
    }
    Py_XDECREF(r);
    PyErr_Restore(et, ev, etb);
}

void
cdyn_body_clear(cdyn_tx *tx, cdyn_body *b)
{
    if (b->sub.active) {   /* the body failed while being traced */
        cdyn_tx_sub_pop(tx, &b->sub);
        tx->ckpt_serial = b->serial;
        if (b->begun) {
            cdyn_hop_restore_grad(tx, b->grad);
        }
    }
    cdyn_tx_sub_clear(tx, &b->sub);
    Py_CLEAR(b->outputs);
    b->begun = 0;
}

tr_status
cdyn_body_rebuild(cdyn_tx *tx, PyObject *v, PyObject *items, Py_ssize_t *pos, PyObject **out)
{
    PyObject *parts = NULL, *list = NULL;
    tr_status st = TR_OK;
    switch (V(v)->kind) {
    case VK_TENSOR:
        if (*pos >= PyList_GET_SIZE(items)) {
            return cdyn_tx_unsupported(tx, "a higher-order op gave fewer outputs than its body");
        }
        *out = Py_NewRef(PyList_GET_ITEM(items, (*pos)++));
        return TR_OK;
    case VK_TUPLE:
    case VK_LIST:
        st = cdyn_v_unpack(tx, v, &parts);
        if (st != TR_OK) {
            return st;
        }
        list = PyList_New(PyList_GET_SIZE(parts));
        for (Py_ssize_t i = 0; list != NULL && st == TR_OK && i < PyList_GET_SIZE(parts); i++) {
            PyObject *r = NULL;
            st = cdyn_body_rebuild(tx, PyList_GET_ITEM(parts, i), items, pos, &r);
            if (st == TR_OK) {
                PyList_SET_ITEM(list, i, r);
            }
        }
        Py_DECREF(parts);
        if (list == NULL) {
            return TR_ERROR;
        }
        if (st == TR_OK) {
            *out = cdyn_value_seq_list(V(v)->kind, list);
            st = *out ? TR_OK : TR_ERROR;
        }
        Py_DECREF(list);
        return st;
    case VK_DICT:   /* a plain dict (cdyn_body_flatten): a new one, same keys */
        parts = V(v)->u.dict.vals;
        list = PyList_New(PyList_GET_SIZE(parts));
        for (Py_ssize_t i = 0; list != NULL && st == TR_OK && i < PyList_GET_SIZE(parts); i++) {
            PyObject *r = NULL;
            st = cdyn_body_rebuild(tx, PyList_GET_ITEM(parts, i), items, pos, &r);
            if (st == TR_OK) {
                PyList_SET_ITEM(list, i, r);
            }
        }
        if (list == NULL) {
            return TR_ERROR;
        }
        if (st == TR_OK) {
            PyObject *keys = PyList_GetSlice(V(v)->u.dict.keys, 0, PY_SSIZE_T_MAX);
            *out = keys ? cdyn_value_dict(keys, list) : NULL;
            Py_XDECREF(keys);
            st = *out ? TR_OK : TR_ERROR;
        }
        Py_DECREF(list);
        return st;
    default:
        *out = Py_NewRef(v);   /* a constant */
        return TR_OK;
    }
}

tr_status
cdyn_body_free_values(cdyn_tx *tx, cdyn_body *b, PyObject *list)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(b->sub.free_nodes); i++) {
        PyObject *fake = PyList_GET_ITEM(b->sub.free_fakes, i), *t = NULL;
        PyObject *node = PyList_GET_ITEM(b->sub.free_nodes, i);
        int e;
        if (cdyn_is_symbolic(fake)) {   /* a SymInt of an enclosing level the body used */
            tr_status st = cdyn_sym_value(tx, fake, node, NULL, &t);
            if (st != TR_OK) {
                return st;
            }
        }
        else {
            t = cdyn_value_tensor(fake, node, NULL);
        }
        e = t == NULL || PyList_Append(list, t) < 0;
        Py_XDECREF(t);
        if (e) {
            return TR_ERROR;
        }
    }
    return TR_OK;
}

tr_status
cdyn_hop_call_node(cdyn_tx *tx, PyObject *op, PyObject *args, PyObject *kwnames,
                   PyObject **items)
{
    PyObject *res = NULL;
    tr_status st = cdyn_tx_graph_call(tx, "call_function", op, NULL,
                                      PySequence_Fast_ITEMS(args), PyList_GET_SIZE(args),
                                      kwnames, &res);
    if (st != TR_OK) {
        return st;
    }
    if (V(res)->kind == VK_TUPLE || V(res)->kind == VK_LIST) {
        *items = PyList_GetSlice(V(res)->u.seq.items, 0, PyList_GET_SIZE(V(res)->u.seq.items));
    }
    else {
        *items = PyList_New(1);
        if (*items != NULL) {
            PyList_SET_ITEM(*items, 0, Py_NewRef(res));
        }
    }
    Py_DECREF(res);
    return *items ? TR_OK : TR_ERROR;
}

tr_status
cdyn_hop_trace_body(cdyn_tx *tx, cdyn_fs *fs, cdyn_body *b, const char *what, PyObject *fn,
           PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int flags,
           PyObject **ret)
{
    PyObject *bound = NULL, *tensors = NULL, *nodes = NULL;
    tr_status st = cdyn_body_begin(tx, b);
    if (st == TR_OK) {
        if (flags & BODY_AUTO_INPUTS) {
            bound = PyList_New(nargs);
            for (Py_ssize_t i = 0; bound != NULL && i < nargs; i++) {
                PyList_SET_ITEM(bound, i, Py_NewRef(args[i]));
            }
            st = bound ? TR_OK : TR_ERROR;
        }
        else {
            st = cdyn_body_bind(tx, b, args, nargs, &bound);
        }
    }
    if (st == TR_OK) {
        st = cdyn_v_call(tx, fs, fn, PySequence_Fast_ITEMS(bound), nargs, kwnames, ret);
        if (st == TR_UNSUPPORTED) {
            cdyn_hop_reason(tx, what);
        }
    }
    if (st == TR_OK && (tensors = PyList_New(0)) == NULL) {
        st = TR_ERROR;
    }
    if (st == TR_OK) {
        st = cdyn_body_flatten(tx, *ret, (flags & BODY_ALLOW_CONST) != 0, tensors);
    }
    if (st == TR_OK) {
        st = cdyn_body_nodes(tx, tensors, &nodes);
    }
    if (st == TR_OK) {
        st = cdyn_body_end(tx, b, what, nodes);
    }
    if (st != TR_OK) {
        Py_CLEAR(*ret);
    }
    Py_XDECREF(bound);
    Py_XDECREF(tensors);
    Py_XDECREF(nodes);
    return st;
}

/* Positional and keyword arguments of a call bound to `names` (NULL-terminated); the first
 * nreq are required. a[] gets borrowed values or NULL. */
tr_status
cdyn_hop_bind_params(cdyn_tx *tx, const char *what, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames, const char *const *names, int nreq, PyObject **a)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    int n = 0;
    while (names[n] != NULL) {
        a[n++] = NULL;
    }
    if (npos > n) {
        return cdyn_tx_unsupported(tx, "%s: too many arguments", what);
    }
    for (Py_ssize_t i = 0; i < npos; i++) {
        a[i] = args[i];
    }
    for (Py_ssize_t k = 0; k < nkw; k++) {
        int j = 0;
        while (j < n && !cdyn_name_is(PyTuple_GET_ITEM(kwnames, k), names[j])) {
            j++;
        }
        if (j == n || a[j] != NULL) {
            return cdyn_tx_unsupported(tx, "%s: unexpected keyword argument %U", what,
                                       PyTuple_GET_ITEM(kwnames, k));
        }
        a[j] = args[npos + k];
    }
    for (int j = 0; j < nreq; j++) {
        if (a[j] == NULL) {
            return cdyn_tx_unsupported(tx, "%s: missing argument %s", what, names[j]);
        }
    }
    return TR_OK;
}

/* ---- torch.cond ----------------------------------------------------------------------------- */

/* Give both branches the same inputs: the operands, then the union of the tensors either
 * branch lifted, in one order (a branch gets unused placeholders for the other's). */
static tr_status
unify_branch_inputs(cdyn_tx *tx, cdyn_body *br)
{
    cdyn_sub *s0 = &br[0].sub, *s1 = &br[1].sub;
    PyObject *all = PyList_GetSlice(s0->free_nodes, 0, PyList_GET_SIZE(s0->free_nodes));
    PyObject *fakes = PyList_GetSlice(s0->free_fakes, 0, PyList_GET_SIZE(s0->free_fakes));
    tr_status st = TR_ERROR;
    if (all == NULL || fakes == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(s1->free_nodes); i++) {
        PyObject *n = PyList_GET_ITEM(s1->free_nodes, i);
        int has = PyDict_Contains(s0->lifted, n);
        if (has < 0 || (!has && (PyList_Append(all, n) < 0 ||
                                 PyList_Append(fakes, PyList_GET_ITEM(s1->free_fakes, i)) < 0))) {
            goto done;
        }
    }
    for (int k = 0; k < 2; k++) {
        cdyn_sub *s = &br[k].sub;
        PyObject *order = PyList_GetSlice(s->arg_nodes, 0, PyList_GET_SIZE(s->arg_nodes)), *r;
        if (order == NULL) {
            goto done;
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(all); i++) {
            PyObject *n = PyList_GET_ITEM(all, i), *ph = PyDict_GetItemWithError(s->lifted, n);
            if (ph == NULL && !PyErr_Occurred()) {
                ph = cdyn_tx_placeholder(tx, s->graph, n, PyList_GET_ITEM(fakes, i));
                if (ph == NULL || PyDict_SetItem(s->lifted, n, ph) < 0) {
                    Py_XDECREF(ph);
                    Py_DECREF(order);
                    goto done;
                }
                Py_DECREF(ph);   /* the dict holds it */
            }
            if (ph == NULL || PyList_Append(order, ph) < 0) {
                Py_DECREF(order);
                goto done;
            }
        }
        r = PyObject_CallMethod(tx->glue, "reorder_placeholders", "OO", s->graph, order);
        Py_DECREF(order);
        if (r == NULL) {
            goto done;
        }
        Py_DECREF(r);
        Py_SETREF(s->free_nodes, Py_NewRef(all));
        Py_SETREF(s->free_fakes, Py_NewRef(fakes));
    }
    st = TR_OK;
done:
    Py_XDECREF(all);
    Py_XDECREF(fakes);
    return st;
}

/* torch.cond(pred, true_fn, false_fn, operands): a Python bool pred inlines the branch
 * taken (as torch._dynamo); a tensor pred traces both branches into cond_true_<i> /
 * cond_false_<i> and records torch.ops.higher_order.cond. */
static tr_status
hop_cond(cdyn_tx *tx, cdyn_fs *fs, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames, PyObject **out)
{
    static const char *const names[] = {"pred", "true_fn", "false_fn", "operands", NULL};
    static const char *const what[2] = {"torch.cond true branch", "torch.cond false branch"};
    PyObject *a[4], *ops = NULL, *ret[2] = {NULL, NULL}, *subs[2] = {NULL, NULL};
    PyObject *opnds = NULL, *node_args = NULL, *items = NULL, *tup = NULL;
    cdyn_body br[2];
    Py_ssize_t pos = 0;
    tr_status st = cdyn_hop_bind_params(tx, "torch.cond", args, nargs, kwnames, names, 3, a);
    memset(br, 0, sizeof(br));
    if (st != TR_OK) {
        return st;
    }
    if (a[3] != NULL) {
        st = cdyn_v_unpack(tx, a[3], &ops);
    }
    else if ((ops = PyList_New(0)) == NULL) {
        st = TR_ERROR;
    }
    if (st != TR_OK) {
        return st;
    }
    if (V(a[0])->kind == VK_CONST) {
        int t = PyObject_IsTrue(V(a[0])->u.cnst.value);
        st = t < 0 ? cdyn_tx_unsupported(tx, "torch.cond: truth of the predicate")
                   : cdyn_v_call(tx, fs, a[t ? 1 : 2], PySequence_Fast_ITEMS(ops),
                                 PyList_GET_SIZE(ops), NULL, out);
        goto done;
    }
    if (V(a[0])->kind != VK_TENSOR) {
        st = cdyn_tx_unsupported(tx, "torch.cond with a predicate %S", a[0]);
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(ops); i++) {
        if (V(PyList_GET_ITEM(ops, i))->kind != VK_TENSOR) {
            st = cdyn_tx_unsupported(tx, "torch.cond with an operand that is not a tensor (%S)",
                                     PyList_GET_ITEM(ops, i));
            goto done;
        }
    }
    for (int k = 0; k < 2 && st == TR_OK; k++) {
        st = cdyn_hop_trace_body(tx, fs, &br[k], what[k], a[1 + k], PySequence_Fast_ITEMS(ops),
                        PyList_GET_SIZE(ops), NULL, 0, &ret[k]);
    }
    for (int k = 0; k < 2 && st == TR_OK; k++) {
        /* eager's torch.cond refuses these (it raises): the call runs it in Python */
        PyObject *why = PyObject_CallMethod(tx->glue, "body_alias_or_mutation", "OO",
                                            br[k].sub.graph, br[k].outputs);
        if (why == NULL) {
            st = TR_ERROR;
        }
        else if (why != Py_None) {
            st = cdyn_tx_unsupported(tx, "%s: %U (raised in Python)", what[k], why);
        }
        Py_XDECREF(why);
    }
    if (st == TR_OK && PyTuple_GET_SIZE(br[0].outputs) != PyTuple_GET_SIZE(br[1].outputs)) {
        st = cdyn_tx_unsupported(tx, "torch.cond: the branches return different numbers of "
                                 "tensors");
    }
    if (st == TR_OK) {
        st = unify_branch_inputs(tx, br);
    }
    for (int k = 0; k < 2 && st == TR_OK; k++) {
        st = cdyn_body_module(tx, &br[k], k == 0 ? "cond_true" : "cond_false", &subs[k]);
    }
    if (st != TR_OK) {
        goto done;
    }
    st = TR_ERROR;
    opnds = PyList_GetSlice(ops, 0, PyList_GET_SIZE(ops));
    if (opnds == NULL || cdyn_body_free_values(tx, &br[0], opnds) != TR_OK) {
        goto done;
    }
    tup = cdyn_value_seq_list(VK_TUPLE, opnds);
    node_args = tup ? PyList_New(0) : NULL;
    if (node_args == NULL || PyList_Append(node_args, a[0]) < 0 ||
        PyList_Append(node_args, subs[0]) < 0 || PyList_Append(node_args, subs[1]) < 0 ||
        PyList_Append(node_args, tup) < 0) {
        goto done;
    }
    st = cdyn_hop_call_node(tx, op_cond, node_args, NULL, &items);
    if (st == TR_OK) {
        st = cdyn_body_rebuild(tx, ret[0], items, &pos, out);
    }
done:
    for (int k = 0; k < 2; k++) {
        cdyn_body_clear(tx, &br[k]);
        if (st != TR_OK) {
            cdyn_body_discard(tx, subs[k]);
        }
        Py_XDECREF(ret[k]);
        Py_XDECREF(subs[k]);
    }
    Py_XDECREF(ops);
    Py_XDECREF(opnds);
    Py_XDECREF(tup);
    Py_XDECREF(node_args);
    Py_XDECREF(items);
    return st;
}

/* ---- torch.utils.checkpoint.checkpoint ------------------------------------------------------ */

/* The keyword arguments of checkpoint passed on to the op: constants among use_reentrant,
 * preserve_rng_state, determinism_check, debug. *reentrant: the mode used (True when not
 * given, as eager's default). */
static tr_status
checkpoint_kwargs(cdyn_tx *tx, PyObject *const *kwvals, PyObject *kwnames, int *reentrant)
{
    static const char *const known[] = {"use_reentrant", "preserve_rng_state",
                                        "determinism_check", "debug", NULL};
    *reentrant = 1;
    for (Py_ssize_t k = 0; kwnames != NULL && k < PyTuple_GET_SIZE(kwnames); k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        int j = 0;
        while (known[j] != NULL && !cdyn_name_is(name, known[j])) {
            j++;
        }
        if (known[j] == NULL || V(kwvals[k])->kind != VK_CONST) {
            return cdyn_tx_unsupported(tx, "checkpoint with the keyword argument %U", name);
        }
        if (j == 0 && V(kwvals[k])->u.cnst.value != Py_None) {
            *reentrant = PyObject_IsTrue(V(kwvals[k])->u.cnst.value) == 1;
        }
    }
    return TR_OK;
}

/* The call of the traced body b as one node of op: b made the submodule wrap_body_<i>
 * (*sub, new), the node called on [*sub, the tensors among lead[0..nlead), b's free values,
 * tail[0..ntail)] with kwnames naming the last of tail; *items (new) its result's items.
 * On failure the caller still owns and discards *sub. */
static tr_status
wrap_body_node(cdyn_tx *tx, cdyn_body *b, PyObject *op, PyObject *const *lead, Py_ssize_t nlead,
               PyObject *const *tail, Py_ssize_t ntail, PyObject *kwnames, PyObject **sub,
               PyObject **items)
{
    PyObject *node_args = NULL;
    tr_status st = cdyn_body_module(tx, b, "wrap_body", sub);
    if (st != TR_OK) {
        return st;
    }
    st = TR_ERROR;
    node_args = PyList_New(0);
    if (node_args == NULL || PyList_Append(node_args, *sub) < 0) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < nlead; i++) {
        if (V(lead[i])->kind == VK_TENSOR && PyList_Append(node_args, lead[i]) < 0) {
            goto done;
        }
    }
    if (cdyn_body_free_values(tx, b, node_args) != TR_OK) {
        goto done;
    }
    for (Py_ssize_t k = 0; k < ntail; k++) {
        if (PyList_Append(node_args, tail[k]) < 0) {
            goto done;
        }
    }
    st = cdyn_hop_call_node(tx, op, node_args, kwnames, items);
done:
    Py_XDECREF(node_args);
    return st;
}

/* checkpoint(function, *args, use_reentrant=...): the function traced into wrap_body_<i>,
 * recorded as torch.ops.higher_order.tag_activation_checkpoint (the recomputation is the
 * backend's, as with torch._dynamo). */
static tr_status
hop_checkpoint(cdyn_tx *tx, cdyn_fs *fs, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames, PyObject **out)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw, pos = 0;
    PyObject *ret = NULL, *sub = NULL, *items = NULL;
    cdyn_body b;
    int reentrant, nograd = 0;
    tr_status st;
    memset(&b, 0, sizeof(b));
    if (npos < 1) {
        return cdyn_tx_unsupported(tx, "checkpoint without a function");
    }
    st = checkpoint_kwargs(tx, args + npos, kwnames, &reentrant);
    if (st != TR_OK) {
        return st;
    }
    /* eager's reentrant checkpoint runs the function under no_grad when no input requires
       grad: its result does not require grad even if parameters do (the op is recorded
       under no_grad) */
    nograd = reentrant && tx->grad_enabled && !cdyn_hop_any_requires_grad(args + 1, npos - 1);
    if (nograd && (st = cdyn_hop_set_grad(tx, 0)) != TR_OK) {
        return st;
    }
    st = cdyn_hop_trace_body(tx, fs, &b, "checkpoint", args[0], args + 1, npos - 1, NULL,
                    BODY_ALLOW_CONST, &ret);
    if (st == TR_OK) {
        st = wrap_body_node(tx, &b, op_checkpoint, args + 1, npos - 1, args + npos, nkw, kwnames,
                            &sub, &items);
    }
    if (st == TR_OK && nograd) {
        st = cdyn_hop_set_grad(tx, 1);
    }
    if (st == TR_OK) {
        st = cdyn_body_rebuild(tx, ret, items, &pos, out);
    }
    cdyn_body_clear(tx, &b);
    if (st != TR_OK) {
        cdyn_body_discard(tx, sub);
    }
    if (st != TR_OK && nograd) {
        cdyn_hop_restore_grad(tx, 1);
    }
    Py_XDECREF(ret);
    Py_XDECREF(sub);
    Py_XDECREF(items);
    return st;
}

/* ---- torch._higher_order_ops.wrap.wrap ------------------------------------------------------ */

/* wrap(fn, *args, **kwargs): fn traced into wrap_body_<i> with automatic inputs (the tensors
 * and symbolic ints it uses, from its arguments, closures, globals or modules, lifted in the
 * order of first use; constants baked in), recorded as wrap(wrap_body_<i>, *lifted), the
 * node torch._dynamo records. A side effect on a value from outside the body (a nonlocal
 * rebinding, an append to an outer list) makes the call a graph break, as torch._dynamo's
 * fallback: wrap then runs in Python. */
static tr_status
hop_wrap(cdyn_tx *tx, cdyn_fs *fs, PyObject *op, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames, PyObject **out)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, pos = 0;
    PyObject *ret = NULL, *sub = NULL, *items = NULL;
    cdyn_body b;
    tr_status st;
    memset(&b, 0, sizeof(b));
    if (nargs - nkw < 1) {
        return cdyn_tx_unsupported(tx, "wrap without a function");
    }
    st = cdyn_hop_trace_body(tx, fs, &b, "wrap", args[0], args + 1, nargs - 1, kwnames,
                    BODY_ALLOW_CONST | BODY_AUTO_INPUTS, &ret);
    if (st == TR_OK && PyTuple_GET_SIZE(b.outputs) == 0 &&
        PyList_GET_SIZE(b.sub.free_nodes) == 0) {
        /* no tensor in or out: a body without operations is its (constant) result; one
           with operations (on tensors it made) cannot be a node, wrap runs in Python */
        PyObject *nodes = PyObject_GetAttrString(b.sub.graph, "nodes");
        Py_ssize_t n = nodes ? PyObject_Length(nodes) : -1;
        Py_XDECREF(nodes);
        st = n < 0 ? TR_ERROR
             : n > 0 ? cdyn_tx_unsupported(tx, "wrap: a body without tensor inputs or outputs")
                     : TR_OK;
        if (st == TR_OK) {
            *out = Py_NewRef(ret);
        }
        goto done;
    }
    if (st == TR_OK) {
        st = wrap_body_node(tx, &b, op, NULL, 0, NULL, 0, NULL, &sub, &items);
    }
    if (st == TR_OK) {
        st = cdyn_body_rebuild(tx, ret, items, &pos, out);
    }
done:
    cdyn_body_clear(tx, &b);
    if (st != TR_OK) {
        cdyn_body_discard(tx, sub);
    }
    Py_XDECREF(ret);
    Py_XDECREF(sub);
    Py_XDECREF(items);
    return st;
}

/* ---- nested_compile_region and the region records --------------------------------------- */

int
cdyn_hop_is_region_wrapper(PyObject *obj)
{
    return code_ncr_inner != NULL && PyFunction_Check(obj) &&
           PyFunction_GET_CODE(obj) == code_ncr_inner;
}

void
cdyn_region_begin(cdyn_tx *tx, cdyn_region *r)
{
    r->on = tx->sub == NULL;
    r->prev = r->on ? Py_XNewRef(tx->last_node) : NULL;
}

void
cdyn_region_clear(cdyn_region *r)
{
    Py_CLEAR(r->prev);
    r->on = 0;
}

int
cdyn_region_end(cdyn_tx *tx, cdyn_region *r, const char *kind, PyObject *key, PyObject *label)
{
    int e = 0;
    if (r->on && tx->sub == NULL && tx->last_node != NULL && tx->last_node != r->prev) {
        PyObject *rec = Py_BuildValue(
            "(sOOOOOO)", kind, key, r->prev ? r->prev : Py_None, tx->last_node,
            label ? label : Py_None, tx->grad_enabled ? Py_True : Py_False,
            PyList_GET_SIZE(tx->open_modes) > 0 ? Py_True : Py_False);
        e = rec == NULL || PyList_Append(tx->regions, rec) < 0;
        Py_XDECREF(rec);
    }
    cdyn_region_clear(r);
    return e ? -1 : 0;
}

/* invoke_subgraph_placeholder(fn, *args, **kwargs), the call a nested_compile_region
 * function makes: fn(*args, **kwargs) inlined and recorded as an "annotated" region (keyed by
 * fn), which cdynamo/_regions.py outlines into invoke_subgraph calls, one subgraph per
 * distinct body (unless cdynamo.config.regional_compile is "off"). */
static tr_status
hop_invoke_subgraph(cdyn_tx *tx, cdyn_fs *fs, PyObject *const *args, Py_ssize_t nargs,
                    PyObject *kwnames, PyObject **out)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *fn;
    cdyn_region r;
    tr_status st;
    if (nargs - nkw < 1) {
        return cdyn_tx_unsupported(tx, "nested_compile_region: a call without a function");
    }
    fn = cdyn_v_real(args[0]);   /* borrowed, or NULL: a function made in the trace */
    cdyn_region_begin(tx, &r);
    st = cdyn_v_call(tx, fs, args[0], args + 1, nargs - 1, kwnames, out);
    if (st != TR_OK || fn == NULL) {
        cdyn_region_clear(&r);
        return st;
    }
    if (cdyn_region_end(tx, &r, "annotated", fn, V(args[0])->source) < 0) {
        Py_CLEAR(*out);
        return TR_ERROR;
    }
    return TR_OK;
}

/* ---- the family table ------------------------------------------------------------------------ */

static tr_status
hop_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames, PyObject **out)
{
    if (V(fn)->kind != VK_HOP) {
        return cdyn_tx_unsupported(tx, "call of %S", fn);
    }
    switch (V(fn)->bits) {
    case HOP_COND:
        return hop_cond(tx, fs, args, nargs, kwnames, out);
    case HOP_CHECKPOINT:
        return hop_checkpoint(tx, fs, args, nargs, kwnames, out);
    case HOP_WRAP:
        return hop_wrap(tx, fs, V(fn)->u.obj.obj, args, nargs, kwnames, out);
    case HOP_ASSOC_SCAN:
        return cdyn_assoc_scan(tx, fs, V(fn)->u.obj.obj, args, nargs, kwnames, out);
    case HOP_INVOKE_SUBGRAPH:
        return hop_invoke_subgraph(tx, fs, args, nargs, kwnames, out);
    case HOP_AUTOGRAD_APPLY:
        return cdyn_autograd_apply(tx, fs, fn, args, nargs, kwnames, out);
    case HOP_VMAP:
        return cdyn_vmap_make(tx, fn, args, nargs, kwnames, out);
    case HOP_VMAPPED:
        return cdyn_vmap_call(tx, fs, fn, args, nargs, kwnames, out);
    case HOP_GRAD:
        return cdyn_grad_make(tx, fn, args, nargs, kwnames, out);
    case HOP_GRADDED:
        return cdyn_grad_call(tx, fs, fn, args, nargs, kwnames, out);
    default:
        return cdyn_tx_unsupported(tx, "%R is a higher-order function cdynamo does not trace "
                                   "(run in Python)", V(fn)->u.obj.obj);
    }
}

static tr_status
hop_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    switch (V(v)->kind) {
    case VK_FNCTX:
        return cdyn_fnctx_getattr(tx, v, name, out);
    case VK_HOP:
        if (V(v)->bits == HOP_VMAPPED || V(v)->bits == HOP_GRADDED) {
            return cdyn_tx_unsupported(tx, "attribute %U of a transformed function", name);
        }
        return cdyn_getattr_real(tx, v, name, 1, out);
    default:
        return cdyn_tx_unsupported(tx, "attribute %U of %S", name, v);
    }
}

static tr_status
hop_setattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    if (V(v)->kind == VK_FNCTX) {
        return cdyn_fnctx_setattr(tx, v, name, value);
    }
    return cdyn_tx_unsupported(tx, "STORE_ATTR %U on %S", name, v);
}

static tr_status
hop_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *self, PyObject *name,
                PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    if (V(self)->kind == VK_FNCTX) {
        return cdyn_fnctx_call_method(tx, fs, self, name, args, nargs, kwnames, out);
    }
    return cdyn_tx_unsupported(tx, "method %U of %S", name, self);
}

static tr_status
hop_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    (void)tx;
    (void)v;
    *out = 1;
    return TR_OK;
}

static tr_status
hop_graph_arg(cdyn_tx *tx, PyObject *v, PyObject **fake, PyObject **node)
{
    if (V(v)->kind != VK_SUBGRAPH) {
        return cdyn_tx_unsupported(tx, "%S as an argument to a torch operation", v);
    }
    *fake = Py_NewRef(V(v)->u.sub.gm);
    *node = Py_NewRef(V(v)->u.sub.node);
    return TR_OK;
}

static PyTypeObject *
hop_python_type(PyObject *v)
{
    if (V(v)->kind == VK_HOP) {
        return cdyn_python_type_obj(v);
    }
    return NULL;
}

static tr_status
hop_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    if (V(v)->kind != VK_HOP || V(v)->bits == HOP_VMAPPED || V(v)->bits == HOP_GRADDED) {
        return cdyn_tx_unsupported(tx, "cannot rebuild %S", v);
    }
    return cdyn_collect_nothing(tx, cg, v);
}

int
cdyn_hop_init(void)
{
    static const char *const transforms[] = {"vjp", "jvp", "jacrev", "jacfwd", "hessian",
                                             "linearize", "functionalize", NULL};
    PyObject *func = NULL;
    if (fn_cond != NULL) {
        return 0;
    }
    if ((fn_cond = PyObject_GetAttrString(cdyn_G.torch, "cond")) == NULL ||
        (op_cond = PyObject_CallMethod(cdyn_G.glue, "higher_order_op", "s", "cond")) == NULL ||
        (op_checkpoint = PyObject_CallMethod(cdyn_G.glue, "higher_order_op", "s",
                                             "tag_activation_checkpoint")) == NULL ||
        (fn_wrap = PyObject_CallMethod(cdyn_G.glue, "higher_order_op", "s", "wrap")) == NULL ||
        (op_assoc_scan = PyObject_CallMethod(cdyn_G.glue, "higher_order_op", "s",
                                             "associative_scan")) == NULL ||
        (hop_type = PyObject_CallMethod(cdyn_G.glue, "higher_order_op_type", NULL)) == NULL ||
        (unsupported_fns = PySet_New(NULL)) == NULL) {
        return -1;
    }
    func = PyObject_CallMethod(cdyn_G.glue, "nested_region_functions", NULL);
    if (func == NULL || !PyArg_ParseTuple(func, "OO", &fn_isg, &code_ncr_inner)) {
        Py_XDECREF(func);
        fn_isg = code_ncr_inner = NULL;
        return -1;
    }
    Py_INCREF(fn_isg);
    Py_INCREF(code_ncr_inner);
    Py_CLEAR(func);
    {
        PyObject *m = PyImport_ImportModule("torch.utils.checkpoint");
        fn_checkpoint = m ? PyObject_GetAttrString(m, "checkpoint") : NULL;
        Py_XDECREF(m);
        func = PyImport_ImportModule("torch.func");
    }
    fn_vmap = func ? PyObject_GetAttrString(func, "vmap") : NULL;
    fn_grad = func ? PyObject_GetAttrString(func, "grad") : NULL;
    fn_grad_and_value = func ? PyObject_GetAttrString(func, "grad_and_value") : NULL;
    if (fn_checkpoint == NULL || fn_vmap == NULL || fn_grad == NULL || fn_grad_and_value == NULL) {
        Py_XDECREF(func);
        return -1;
    }
    for (int i = 0; transforms[i] != NULL; i++) {
        PyObject *f = PyObject_GetAttrString(func, transforms[i]);
        int e = f != NULL && PySet_Add(unsupported_fns, f) < 0;
        Py_XDECREF(f);
        PyErr_Clear();
        if (e) {
            Py_DECREF(func);
            return -1;
        }
    }
    Py_DECREF(func);
    return (cdyn_autograd_fn_init() < 0 || cdyn_scan_init() < 0) ? -1 : cdyn_functorch_init();
}

const cdyn_vtable cdyn_hop_vt = {
    .name = "HigherOrderOpVariable",
    .getattr = hop_getattr,
    .setattr = hop_setattr,
    .call = hop_call,
    .call_method = hop_call_method,
    .truth = hop_truth,
    .graph_arg = hop_graph_arg,
    .python_type = hop_python_type,
    .collect = hop_collect,
    .reconstruct = cdyn_reconstruct_obj,
};
