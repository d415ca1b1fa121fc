/* values/autograd_fn.c: custom torch.autograd.Function, traced as torch._dynamo does.
 * `MyFn.apply(*args)` becomes one torch.ops.higher_order.autograd_function_apply node over
 * two subgraphs: fwd_body_<i> (the user's forward under no_grad, returning (outputs,
 * saved tensors)) and bwd_body_<i> (the user's backward, taking (*grads, *saved) and
 * returning one gradient per input of the op), so the user's backward is the one autograd
 * runs (a straight-through estimator stays one).
 *
 *   FNCTX  the `ctx` both bodies see: attributes stored on it (constants and tensors),
 *          save_for_backward / saved_tensors, needs_input_grad (constants, from the inputs'
 *          requires_grad), mark_non_differentiable; other ctx methods are unsupported.
 */
#include "hop.h"

static PyObject *apply_func;     /* torch.autograd.Function.apply.__func__ (torch 2.13) */
static PyMethodDef *apply_def;   /* its C method's def (torch >= 2.14: _FunctionBase.apply) */
static PyObject *function_type;  /* torch.autograd.Function */
static PyObject *base_setup;     /* _SingleLevelFunction.setup_context (not overridden) */
static PyObject *op_apply;       /* torch.ops.higher_order.autograd_function_apply */
static PyObject *once_diff_code; /* the code of once_differentiable's wrapper */

int
cdyn_is_autograd_apply(PyObject *obj)
{
    PyObject *self;
    if (apply_func != NULL && PyMethod_Check(obj) && PyMethod_GET_FUNCTION(obj) == apply_func) {
        self = PyMethod_GET_SELF(obj);
    }
    else if (apply_def != NULL && PyCFunction_Check(obj) &&
             ((PyCFunctionObject *)obj)->m_ml == apply_def) {
        self = PyCFunction_GET_SELF(obj);
    }
    else {
        return 0;
    }
    return PyType_Check(self) && self != function_type &&
           PyType_IsSubtype((PyTypeObject *)self, (PyTypeObject *)function_type);
}

/* ---- ctx --------------------------------------------------------------------------------- */

/* A new FNCTX: attrs (dict, borrowed; NULL: empty), saved (list of values or NULL), needs
 * (tuple of bools, borrowed). */
static PyObject *
fnctx_new(PyObject *attrs, PyObject *saved, PyObject *needs)
{
    PyObject *v = cdyn_value_alloc(VK_FNCTX, NULL);
    if (v == NULL) {
        return NULL;
    }
    V(v)->u.fnctx.attrs = attrs ? PyDict_Copy(attrs) : PyDict_New();
    V(v)->u.fnctx.saved = Py_XNewRef(saved);
    V(v)->u.fnctx.needs = Py_NewRef(needs);
    V(v)->u.fnctx.nondiff = PyList_New(0);
    if (V(v)->u.fnctx.attrs == NULL || V(v)->u.fnctx.nondiff == NULL) {
        Py_CLEAR(v);
    }
    return v;
}

tr_status
cdyn_fnctx_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    static const char *const methods[] = {"save_for_backward", "mark_non_differentiable",
                                          "set_materialize_grads", NULL};
    PyObject *hit = PyDict_GetItemWithError(V(v)->u.fnctx.attrs, name);
    if (hit != NULL) {
        *out = Py_NewRef(hit);
        return TR_OK;
    }
    if (PyErr_Occurred()) {
        return TR_ERROR;
    }
    for (int i = 0; methods[i] != NULL; i++) {
        if (cdyn_name_is(name, methods[i])) {
            *out = cdyn_value_method(NULL, name, v);
            return *out ? TR_OK : TR_ERROR;
        }
    }
    if (cdyn_name_is(name, "needs_input_grad")) {
        *out = cdyn_value_const(V(v)->u.fnctx.needs);
        return *out ? TR_OK : TR_ERROR;
    }
    if (cdyn_name_is(name, "saved_tensors") && V(v)->u.fnctx.saved != NULL) {
        PyObject *items = PyList_GetSlice(V(v)->u.fnctx.saved, 0,
                                          PyList_GET_SIZE(V(v)->u.fnctx.saved));
        *out = items ? cdyn_value_seq_list(VK_TUPLE, items) : NULL;
        Py_XDECREF(items);
        return *out ? TR_OK : TR_ERROR;
    }
    return cdyn_tx_unsupported(tx, "autograd.Function ctx.%U", name);
}

tr_status
cdyn_fnctx_setattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    cdyn_vkind k = V(value)->kind;
    if (k != VK_CONST && k != VK_TENSOR) {
        return cdyn_tx_unsupported(tx, "autograd.Function ctx.%U = %S (only tensors and "
                                   "constants are traced)", name, value);
    }
    return PyDict_SetItem(V(v)->u.fnctx.attrs, name, value) < 0 ? TR_ERROR : TR_OK;
}

tr_status
cdyn_fnctx_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *self, PyObject *name,
                       PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                       PyObject **out)
{
    cdyn_value *c = V(self);
    (void)fs;
    if (kwnames != NULL) {
        return cdyn_tx_unsupported(tx, "ctx.%U with keyword arguments", name);
    }
    if (cdyn_name_is(name, "save_for_backward") && c->u.fnctx.saved == NULL) {
        for (Py_ssize_t i = 0; i < nargs; i++) {
            if (V(args[i])->kind != VK_TENSOR && !cdyn_v_is_none(args[i])) {
                return cdyn_tx_unsupported(tx, "ctx.save_for_backward of %S", args[i]);
            }
        }
        c->u.fnctx.saved = PyList_New(nargs);
        if (c->u.fnctx.saved == NULL) {
            return TR_ERROR;
        }
        for (Py_ssize_t i = 0; i < nargs; i++) {
            PyList_SET_ITEM(c->u.fnctx.saved, i, Py_NewRef(args[i]));
        }
    }
    else if (cdyn_name_is(name, "mark_non_differentiable")) {
        for (Py_ssize_t i = 0; i < nargs; i++) {
            if (PyList_Append(c->u.fnctx.nondiff, args[i]) < 0) {
                return TR_ERROR;
            }
        }
    }
    else if (cdyn_name_is(name, "set_materialize_grads") && nargs == 1 &&
             V(args[0])->kind == VK_CONST && V(args[0])->u.cnst.value == Py_True) {
        /* the default */
    }
    else {
        return cdyn_tx_unsupported(tx, "ctx.%U of an autograd.Function", name);
    }
    *out = cdyn_value_const(Py_None);
    return *out ? TR_OK : TR_ERROR;
}

/* ---- apply --------------------------------------------------------------------------------- */

/* What one traced apply carries between its two bodies. */
typedef struct {
    PyObject *cls;          /* borrowed: the Function subclass */
    PyObject *ctx;          /* the forward's FNCTX */
    PyObject *ret;          /* the forward's result value */
    PyObject *elems;        /* list: its outputs (the result, or the items of a tuple) */
    PyObject *outs;         /* list: its tensors */
    PyObject *saved;        /* list: the tensors saved for backward (save_for_backward ones
                               first, then tensors stored as ctx attributes) */
    PyObject *saved_idx;    /* list of ints: the positions of save_for_backward's tensors */
    PyObject *nondiff_idx;  /* list of ints: outputs marked non-differentiable */
    PyObject *needs;        /* tuple of bools */
    cdyn_body fwd, bwd;
} apply_state;

static void
apply_clear(cdyn_tx *tx, apply_state *s)
{
    cdyn_body_clear(tx, &s->fwd);
    cdyn_body_clear(tx, &s->bwd);
    Py_CLEAR(s->ctx);
    Py_CLEAR(s->ret);
    Py_CLEAR(s->elems);
    Py_CLEAR(s->outs);
    Py_CLEAR(s->saved);
    Py_CLEAR(s->saved_idx);
    Py_CLEAR(s->nondiff_idx);
    Py_CLEAR(s->needs);
}

/* A Python function attribute of the Function class (staticmethods are plain functions). */
static tr_status
class_function(cdyn_tx *tx, PyObject *cls, const char *name, PyObject **out)
{
    *out = PyObject_GetAttrString(cls, name);
    if (*out == NULL || !PyFunction_Check(*out)) {
        Py_CLEAR(*out);
        return cdyn_tx_unsupported(tx, "autograd.Function %s that is not a Python function",
                                   name);
    }
    return TR_OK;
}

/* needs_input_grad: a TENSOR argument that requires grad. */
static PyObject *
needs_input_grad(PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *t = PyTuple_New(nargs);
    for (Py_ssize_t i = 0; t != NULL && i < nargs; i++) {
        int yes = 0;
        if (V(args[i])->kind == VK_TENSOR) {
            PyObject *r = PyObject_GetAttrString(V(args[i])->u.tensor.fake, "requires_grad");
            yes = r == Py_True;
            Py_XDECREF(r);
            PyErr_Clear();
        }
        PyTuple_SET_ITEM(t, i, Py_NewRef(yes ? Py_True : Py_False));
    }
    return t;
}

/* Append the int i to list. */
static int
append_int(PyObject *list, Py_ssize_t i)
{
    PyObject *n = PyLong_FromSsize_t(i);
    int e = n == NULL || PyList_Append(list, n) < 0;
    Py_XDECREF(n);
    return e ? -1 : 0;
}

/* The tensors the backward needs: save_for_backward's (positions in saved_idx), then
 * tensors stored as ctx attributes; and which outputs are non-differentiable. */
static tr_status
collect_saved(apply_state *s)
{
    cdyn_value *c = V(s->ctx);
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    if ((s->saved = PyList_New(0)) == NULL || (s->saved_idx = PyList_New(0)) == NULL ||
        (s->nondiff_idx = PyList_New(0)) == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; c->u.fnctx.saved && i < PyList_GET_SIZE(c->u.fnctx.saved); i++) {
        PyObject *t = PyList_GET_ITEM(c->u.fnctx.saved, i);
        if (V(t)->kind == VK_TENSOR && (append_int(s->saved_idx, PyList_GET_SIZE(s->saved)) < 0 ||
                                        PyList_Append(s->saved, t) < 0)) {
            return TR_ERROR;
        }
    }
    while (PyDict_Next(c->u.fnctx.attrs, &pos, &k, &v)) {
        if (V(v)->kind == VK_TENSOR && PyList_Append(s->saved, v) < 0) {
            return TR_ERROR;
        }
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(s->outs); i++) {
        PyObject *o = PyList_GET_ITEM(s->outs, i);
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(c->u.fnctx.nondiff); j++) {
            PyObject *m = PyList_GET_ITEM(c->u.fnctx.nondiff, j);
            if (m == o || (V(m)->kind == VK_TENSOR && V(m)->u.tensor.node == V(o)->u.tensor.node)) {
                if (append_int(s->nondiff_idx, i) < 0) {
                    return TR_ERROR;
                }
                break;
            }
        }
    }
    return TR_OK;
}

/* The forward's result: a tensor, or a tuple of tensors and constants (as eager's apply
 * takes them): s->elems and s->outs. */
static tr_status
forward_outputs(cdyn_tx *tx, apply_state *s)
{
    tr_status st = TR_OK;
    if ((s->outs = PyList_New(0)) == NULL) {
        return TR_ERROR;
    }
    if (V(s->ret)->kind == VK_TUPLE && V(s->ret)->u.seq.nt_type == NULL) {
        st = cdyn_v_unpack(tx, s->ret, &s->elems);
    }
    else if (V(s->ret)->kind == VK_TENSOR) {
        s->elems = PyList_New(1);
        if (s->elems == NULL) {
            return TR_ERROR;
        }
        PyList_SET_ITEM(s->elems, 0, Py_NewRef(s->ret));
    }
    else {
        return cdyn_tx_unsupported(tx, "a forward returning %S", s->ret);
    }
    for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(s->elems); i++) {
        PyObject *e = PyList_GET_ITEM(s->elems, i);
        if (V(e)->kind == VK_TENSOR) {
            st = PyList_Append(s->outs, e) < 0 ? TR_ERROR : TR_OK;
        }
        else if (V(e)->kind != VK_CONST) {
            st = cdyn_tx_unsupported(tx, "a forward returning %S", e);
        }
    }
    return st;
}

/* The forward body: forward(ctx, *args) (or forward(*args) + setup_context(ctx, args,
 * output)) under no_grad; output ((outputs), (saved)). */
static tr_status
trace_forward(cdyn_tx *tx, apply_state *s, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *fwd = NULL, *setup = NULL, *bound = NULL, *all = NULL, *outn = NULL,
             *savedn = NULL, *outputs = NULL, *inputs = NULL;
    int prev = tx->grad_enabled, own_setup;
    tr_status st = class_function(tx, s->cls, "forward", &fwd);
    if (st == TR_OK) {
        st = class_function(tx, s->cls, "setup_context", &setup);
    }
    if (st == TR_OK) {
        st = cdyn_body_begin(tx, &s->fwd);
    }
    if (st == TR_OK) {
        st = cdyn_body_bind(tx, &s->fwd, args, nargs, &bound);
    }
    if (st != TR_OK) {
        goto done;
    }
    st = TR_ERROR;
    own_setup = setup != base_setup;
    s->ctx = fnctx_new(NULL, NULL, s->needs);
    all = s->ctx ? PyList_New(0) : NULL;
    if (all == NULL || (!own_setup && PyList_Append(all, s->ctx) < 0) ||
        PyList_SetSlice(all, PyList_GET_SIZE(all), PyList_GET_SIZE(all), bound) < 0) {
        goto done;
    }
    st = prev ? cdyn_hop_set_grad(tx, 0) : TR_OK;
    if (st == TR_OK) {
        st = cdyn_tx_inline_function(tx, fwd, NULL, NULL, PySequence_Fast_ITEMS(all),
                                     PyList_GET_SIZE(all), NULL, &s->ret);
    }
    if (st == TR_OK && own_setup) {
        PyObject *sargs[3] = {s->ctx, NULL, s->ret}, *r = NULL;
        inputs = cdyn_value_seq_list(VK_TUPLE, bound);
        sargs[1] = inputs;
        st = inputs ? cdyn_tx_inline_function(tx, setup, NULL, NULL, sargs, 3, NULL, &r)
                    : TR_ERROR;
        Py_XDECREF(r);
    }
    if (st == TR_OK && prev) {
        st = cdyn_hop_set_grad(tx, 1);
    }
    if (st == TR_OK) {
        st = forward_outputs(tx, s);
    }
    if (st == TR_OK) {
        st = collect_saved(s);
    }
    if (st == TR_OK) {
        st = cdyn_body_nodes(tx, s->outs, &outn);
    }
    if (st == TR_OK) {
        st = cdyn_body_nodes(tx, s->saved, &savedn);
    }
    if (st == TR_OK) {
        outputs = PyTuple_Pack(2, outn, savedn);
        st = outputs ? cdyn_body_end(tx, &s->fwd, "autograd.Function forward", outputs)
                     : TR_ERROR;
    }
done:
    if (st == TR_UNSUPPORTED) {
        cdyn_hop_reason(tx, "autograd.Function forward");
    }
    Py_XDECREF(fwd);
    Py_XDECREF(setup);
    Py_XDECREF(bound);
    Py_XDECREF(all);
    Py_XDECREF(outn);
    Py_XDECREF(savedn);
    Py_XDECREF(outputs);
    Py_XDECREF(inputs);
    return st;
}

/* The backward's ctx: the forward's attributes and saved tensors, each tensor replaced by
 * a placeholder of the backward body (in the order of s->saved). */
static tr_status
backward_ctx(cdyn_tx *tx, apply_state *s, PyObject **ctx)
{
    cdyn_value *c = V(s->ctx);
    PyObject *phv = PyList_New(0), *saved = NULL, *attrs = NULL, *k, *v;
    Py_ssize_t pos = 0, next = 0;
    tr_status st = TR_ERROR;
    if (phv == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(s->saved); i++) {
        PyObject *t = PyList_GET_ITEM(s->saved, i), *ph, *tv;
        ph = cdyn_tx_placeholder(tx, tx->graph, V(t)->u.tensor.node, V(t)->u.tensor.fake);
        tv = ph ? cdyn_value_tensor(V(t)->u.tensor.fake, ph, NULL) : NULL;
        Py_XDECREF(ph);
        if (tv == NULL || PyList_Append(phv, tv) < 0) {
            Py_XDECREF(tv);
            goto done;
        }
        Py_DECREF(tv);
    }
    if (c->u.fnctx.saved != NULL) {
        saved = PyList_New(PyList_GET_SIZE(c->u.fnctx.saved));
        for (Py_ssize_t i = 0; saved != NULL && i < PyList_GET_SIZE(c->u.fnctx.saved); i++) {
            PyObject *t = PyList_GET_ITEM(c->u.fnctx.saved, i);
            PyList_SET_ITEM(saved, i, Py_NewRef(V(t)->kind == VK_TENSOR
                                                    ? PyList_GET_ITEM(phv, next++) : t));
        }
        if (saved == NULL) {
            goto done;
        }
    }
    if ((attrs = PyDict_Copy(c->u.fnctx.attrs)) == NULL) {
        goto done;
    }
    while (PyDict_Next(c->u.fnctx.attrs, &pos, &k, &v)) {
        if (V(v)->kind == VK_TENSOR && PyDict_SetItem(attrs, k, PyList_GET_ITEM(phv, next++)) < 0) {
            goto done;
        }
    }
    *ctx = fnctx_new(attrs, saved, s->needs);
    st = *ctx ? TR_OK : TR_ERROR;
done:
    Py_DECREF(phv);
    Py_XDECREF(saved);
    Py_XDECREF(attrs);
    return st;
}

/* The gradients the backward is called with, one per forward output: a placeholder of the
 * backward body named after the backward's parameter for a tensor output, None for a
 * constant. New list of values in *grads. */
static tr_status
grad_inputs(cdyn_tx *tx, apply_state *s, PyCodeObject *bcode, PyObject **grads)
{
    Py_ssize_t n = PyList_GET_SIZE(s->elems);
    *grads = PyList_New(n);
    if (*grads == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyList_GET_ITEM(s->elems, i), *fk = NULL, *ph = NULL, *name = NULL;
        if (V(o)->kind != VK_TENSOR) {
            PyObject *none = cdyn_value_const(Py_None);   /* a non-tensor output gets None */
            if (none == NULL) {
                Py_CLEAR(*grads);
                return TR_ERROR;
            }
            PyList_SET_ITEM(*grads, i, none);
            continue;
        }
        name = i + 1 < bcode->co_argcount
                   ? Py_NewRef(PyTuple_GET_ITEM(bcode->co_localsplusnames, i + 1))
                   : PyUnicode_FromString("grad");
        fk = name ? PyObject_CallMethod(tx->glue, "fake_grad_like", "OO", tx->fake_mode,
                                        V(o)->u.tensor.fake)
                  : NULL;
        ph = fk ? cdyn_tx_placeholder(tx, tx->graph, name, fk) : NULL;
        if (ph != NULL) {
            PyList_SET_ITEM(*grads, i, cdyn_value_tensor(fk, ph, NULL));
        }
        Py_XDECREF(name);
        Py_XDECREF(fk);
        Py_XDECREF(ph);
        if (ph == NULL || PyList_GET_ITEM(*grads, i) == NULL) {
            Py_CLEAR(*grads);
            return TR_ERROR;
        }
    }
    return TR_OK;
}

/* The gradients backward returned (r), as FX nodes or None for the tensor arguments of the
 * op (a non-tensor argument must get None, as eager checks). *out: new list. */
static tr_status
grad_outputs(cdyn_tx *tx, PyObject *r, PyObject *const *args, Py_ssize_t nargs, PyObject **out)
{
    PyObject *items = NULL, *nodes = PyList_New(0), *fake = NULL, *node = NULL;
    tr_status st = TR_ERROR;
    if (nodes == NULL) {
        return TR_ERROR;
    }
    if (V(r)->kind == VK_TUPLE || V(r)->kind == VK_LIST) {
        st = cdyn_v_unpack(tx, r, &items);
    }
    else if ((items = PyList_New(1)) != NULL) {
        PyList_SET_ITEM(items, 0, Py_NewRef(r));
        st = TR_OK;
    }
    if (st == TR_OK && PyList_GET_SIZE(items) != nargs) {
        st = cdyn_tx_unsupported(tx, "backward returned %zd gradients for %zd inputs",
                                 PyList_GET_SIZE(items), nargs);
    }
    for (Py_ssize_t i = 0; st == TR_OK && i < nargs; i++) {
        PyObject *g = PyList_GET_ITEM(items, i);
        if (V(args[i])->kind != VK_TENSOR) {
            st = cdyn_v_is_none(g) ? TR_OK
                                   : cdyn_tx_unsupported(tx, "a gradient for a non-tensor input");
            continue;
        }
        if (cdyn_v_is_none(g)) {
            st = PyList_Append(nodes, Py_None) < 0 ? TR_ERROR : TR_OK;
            continue;
        }
        if (V(g)->kind != VK_TENSOR) {
            st = cdyn_tx_unsupported(tx, "backward returned %S as a gradient", g);
            continue;
        }
        st = cdyn_v_graph_arg(tx, g, &fake, &node);
        if (st == TR_OK && PyList_Append(nodes, node) < 0) {
            st = TR_ERROR;
        }
        Py_CLEAR(fake);
        Py_CLEAR(node);
    }
    Py_XDECREF(items);
    if (st != TR_OK) {
        Py_DECREF(nodes);
        return st;
    }
    *out = nodes;
    return TR_OK;
}

/* The tensors the backward lifted from outside that the forward does not take yet: they
 * become extra inputs of the forward, saved for the backward (as torch._dynamo). */
static tr_status
route_backward_free(cdyn_tx *tx, apply_state *s)
{
    cdyn_sub *f = &s->fwd.sub, *b = &s->bwd.sub;
    PyObject *saved_nodes = PyList_New(0), *outputs = NULL;
    tr_status st = TR_ERROR;
    if (saved_nodes == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(b->free_nodes); i++) {
        PyObject *n = PyList_GET_ITEM(b->free_nodes, i), *fk = PyList_GET_ITEM(b->free_fakes, i);
        PyObject *ph = PyDict_GetItemWithError(f->lifted, n);
        if (ph == NULL && PyErr_Occurred()) {
            goto done;
        }
        if (ph == NULL) {
            ph = cdyn_tx_placeholder(tx, f->graph, n, fk);
            if (ph == NULL || PyDict_SetItem(f->lifted, n, ph) < 0 ||
                PyList_Append(f->free_nodes, n) < 0 || PyList_Append(f->free_fakes, fk) < 0) {
                Py_XDECREF(ph);
                goto done;
            }
            Py_DECREF(ph);
        }
        if (PyList_Append(saved_nodes, ph) < 0) {
            goto done;
        }
    }
    if (PyList_GET_SIZE(saved_nodes) > 0) {
        /* fwd outputs: ((outs), (saved..., backward's free tensors...)) */
        PyObject *old = PyTuple_GET_ITEM(s->fwd.outputs, 1);
        PyObject *more = PyList_AsTuple(saved_nodes), *all = more ? PySequence_Concat(old, more) : NULL;
        Py_XDECREF(more);
        outputs = all ? PyTuple_Pack(2, PyTuple_GET_ITEM(s->fwd.outputs, 0), all) : NULL;
        Py_XDECREF(all);
        if (outputs == NULL) {
            goto done;
        }
        Py_SETREF(s->fwd.outputs, outputs);
    }
    st = TR_OK;
done:
    Py_DECREF(saved_nodes);
    return st;
}

/* The backward body: backward(ctx, *grads) over placeholders (*grads, *saved, *the
 * tensors it uses from outside). */
static tr_status
trace_backward(cdyn_tx *tx, cdyn_fs *fs, apply_state *s, PyObject *const *args,
               Py_ssize_t nargs)
{
    PyObject *bwd = NULL, *grads = NULL, *ctx = NULL, *all = NULL, *r = NULL, *outputs = NULL;
    PyObject *gnodes = NULL;
    tr_status st = class_function(tx, s->cls, "backward", &bwd);
    (void)fs;
    if (st == TR_OK && once_diff_code != NULL &&
        PyFunction_GET_CODE(bwd) == once_diff_code) {
        /* @once_differentiable: the user's function (it only differs from it on a double
           backward, which raises in eager) */
        PyObject *inner = PyObject_GetAttrString(bwd, "__wrapped__");
        if (inner != NULL && PyFunction_Check(inner)) {
            Py_SETREF(bwd, inner);
        }
        else {
            Py_XDECREF(inner);
            PyErr_Clear();
        }
    }
    if (st == TR_OK) {
        st = cdyn_body_begin(tx, &s->bwd);
    }
    if (st == TR_OK) {
        st = grad_inputs(tx, s, (PyCodeObject *)PyFunction_GET_CODE(bwd), &grads);
    }
    if (st == TR_OK) {
        st = backward_ctx(tx, s, &ctx);
    }
    if (st == TR_OK) {
        all = PyList_New(0);
        st = (all == NULL || PyList_Append(all, ctx) < 0 ||
              PyList_SetSlice(all, 1, 1, grads) < 0) ? TR_ERROR : TR_OK;
    }
    if (st == TR_OK) {
        st = cdyn_tx_inline_function(tx, bwd, NULL, NULL, PySequence_Fast_ITEMS(all),
                                     PyList_GET_SIZE(all), NULL, &r);
    }
    if (st == TR_OK) {
        st = grad_outputs(tx, r, args, nargs, &gnodes);
    }
    if (st == TR_OK) {
        st = route_backward_free(tx, s);
    }
    for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(s->fwd.sub.free_nodes); i++) {
        /* the forward's lifted tensors are inputs of the op too: no gradient */
        st = PyList_Append(gnodes, Py_None) < 0 ? TR_ERROR : TR_OK;
    }
    if (st == TR_OK) {
        outputs = PyList_AsTuple(gnodes);
        st = outputs ? TR_OK : TR_ERROR;
    }
    if (st == TR_OK) {
        st = cdyn_body_end(tx, &s->bwd, "autograd.Function backward", outputs);
    }
    if (st == TR_UNSUPPORTED) {
        cdyn_hop_reason(tx, "autograd.Function backward");
    }
    Py_XDECREF(bwd);
    Py_XDECREF(grads);
    Py_XDECREF(ctx);
    Py_XDECREF(all);
    Py_XDECREF(r);
    Py_XDECREF(outputs);
    Py_XDECREF(gnodes);
    return st;
}

/* A LIST value of the constant ints in list. New ref or NULL. */
static PyObject *
int_list_value(PyObject *list)
{
    Py_ssize_t n = PyList_GET_SIZE(list);
    PyObject *items = PyList_New(n), *v = NULL;
    for (Py_ssize_t i = 0; items != NULL && i < n; i++) {
        PyObject *c = cdyn_value_const(PyList_GET_ITEM(list, i));
        if (c == NULL) {
            Py_CLEAR(items);
            break;
        }
        PyList_SET_ITEM(items, i, c);
    }
    if (items != NULL) {
        v = cdyn_value_seq_list(VK_LIST, items);
        Py_DECREF(items);
    }
    return v;
}

/* The op node: autograd_function_apply(fwd_body, bwd_body, *tensor args, *lifted,
 * non_differentiable_idx=[...], saved_for_backward_idx=[...]); *out the forward's result
 * structure over its outputs. */
static tr_status
apply_node(cdyn_tx *tx, apply_state *s, PyObject *const *args, Py_ssize_t nargs,
           PyObject **out)
{
    PyObject *fsub = NULL, *bsub = NULL, *node_args = PyList_New(0), *kw = NULL, *items = NULL;
    PyObject *nd = NULL, *sv = NULL;
    Py_ssize_t pos = 0;
    tr_status st = node_args ? cdyn_body_module(tx, &s->fwd, "fwd_body", &fsub) : TR_ERROR;
    if (st == TR_OK) {
        st = cdyn_body_module(tx, &s->bwd, "bwd_body", &bsub);
    }
    if (st != TR_OK) {
        goto done;
    }
    st = TR_ERROR;
    if (PyList_Append(node_args, fsub) < 0 || PyList_Append(node_args, bsub) < 0) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (V(args[i])->kind == VK_TENSOR && PyList_Append(node_args, args[i]) < 0) {
            goto done;
        }
    }
    nd = int_list_value(s->nondiff_idx);
    sv = int_list_value(s->saved_idx);
    kw = Py_BuildValue("(ss)", "non_differentiable_idx", "saved_for_backward_idx");
    if (nd == NULL || sv == NULL || kw == NULL ||
        cdyn_body_free_values(tx, &s->fwd, node_args) != TR_OK ||
        PyList_Append(node_args, nd) < 0 || PyList_Append(node_args, sv) < 0) {
        goto done;
    }
    st = cdyn_hop_call_node(tx, op_apply, node_args, kw, &items);
    if (st == TR_OK) {
        st = cdyn_body_rebuild(tx, s->ret, items, &pos, out);
    }
done:
    if (st != TR_OK) {
        cdyn_body_discard(tx, fsub);
        cdyn_body_discard(tx, bsub);
    }
    Py_XDECREF(fsub);
    Py_XDECREF(bsub);
    Py_XDECREF(node_args);
    Py_XDECREF(kw);
    Py_XDECREF(items);
    Py_XDECREF(nd);
    Py_XDECREF(sv);
    return st;
}

/* No input requires grad (or grad mode is off): the forward inlined under no_grad, as
 * eager's apply runs it (its result does not require grad even if a parameter it uses
 * does); torch._dynamo inlines it too. */
static tr_status
apply_inline(cdyn_tx *tx, apply_state *s, PyObject *const *args, Py_ssize_t nargs,
             PyObject **out)
{
    PyObject *fwd = NULL, *setup = NULL, *all = NULL, *inputs = NULL;
    int prev = tx->grad_enabled, own_setup;
    tr_status st = class_function(tx, s->cls, "forward", &fwd);
    if (st == TR_OK) {
        st = class_function(tx, s->cls, "setup_context", &setup);
    }
    if (st != TR_OK) {
        goto done;
    }
    own_setup = setup != base_setup;
    s->ctx = fnctx_new(NULL, NULL, s->needs);
    all = s->ctx ? PyList_New(0) : NULL;
    st = TR_ERROR;
    if (all == NULL || (!own_setup && PyList_Append(all, s->ctx) < 0)) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (PyList_Append(all, args[i]) < 0) {
            goto done;
        }
    }
    st = prev ? cdyn_hop_set_grad(tx, 0) : TR_OK;
    if (st == TR_OK) {
        st = cdyn_tx_inline_function(tx, fwd, NULL, NULL, PySequence_Fast_ITEMS(all),
                                     PyList_GET_SIZE(all), NULL, out);
    }
    if (st == TR_OK && own_setup) {
        PyObject *sargs[3] = {s->ctx, NULL, *out}, *r = NULL;
        inputs = cdyn_value_seq(VK_TUPLE, args, nargs);
        sargs[1] = inputs;
        st = inputs ? cdyn_tx_inline_function(tx, setup, NULL, NULL, sargs, 3, NULL, &r)
                    : TR_ERROR;
        Py_XDECREF(r);
    }
    if (st == TR_OK && prev) {
        st = cdyn_hop_set_grad(tx, 1);
    }
    if (st != TR_OK) {
        Py_CLEAR(*out);
        cdyn_hop_restore_grad(tx, prev);
    }
done:
    Py_XDECREF(fwd);
    Py_XDECREF(setup);
    Py_XDECREF(all);
    Py_XDECREF(inputs);
    return st;
}

tr_status
cdyn_autograd_apply(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args,
                    Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    apply_state s;
    tr_status st;
    memset(&s, 0, sizeof(s));
    /* the class `apply` is bound to: a bound method's __self__ (torch 2.13's Python
     * classmethod) or a C method's self (torch >= 2.14's _FunctionBase.apply), as
     * cdyn_is_autograd_apply accepted it; PyMethod_GET_SELF on the C method read the right
     * field only because the two structs happen to share its offset (an assertion failure in
     * the sanitizer build) */
    s.cls = PyMethod_Check(V(fn)->u.obj.obj) ? PyMethod_GET_SELF(V(fn)->u.obj.obj)
                                             : PyCFunction_GET_SELF(V(fn)->u.obj.obj);
    if (kwnames != NULL) {
        return cdyn_tx_unsupported(tx, "autograd.Function.apply with keyword arguments");
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (V(args[i])->kind != VK_TENSOR && V(args[i])->kind != VK_CONST) {
            return cdyn_tx_unsupported(tx, "autograd.Function.apply with the argument %S "
                                       "(only tensors and constants are traced)", args[i]);
        }
    }
    cdyn_guards_note_requires_grad(tx->guards);
    s.needs = needs_input_grad(args, nargs);
    if (s.needs == NULL) {
        return TR_ERROR;
    }
    if (!tx->grad_enabled || !cdyn_hop_any_requires_grad(args, nargs)) {
        st = apply_inline(tx, &s, args, nargs, out);
        apply_clear(tx, &s);
        return st;
    }
    st = trace_forward(tx, &s, args, nargs);
    if (st == TR_OK) {
        st = trace_backward(tx, fs, &s, args, nargs);
    }
    if (st == TR_OK) {
        st = apply_node(tx, &s, args, nargs, out);
    }
    apply_clear(tx, &s);
    return st;
}

int
cdyn_autograd_fn_init(void)
{
    PyObject *m = PyImport_ImportModule("torch.autograd.function"), *apply = NULL, *base = NULL;
    int rc = -1;
    if (m == NULL) {
        return -1;
    }
    function_type = PyObject_GetAttrString(m, "Function");
    apply = function_type ? PyObject_GetAttrString(function_type, "apply") : NULL;
    apply_func = apply && PyMethod_Check(apply) ? Py_NewRef(PyMethod_GET_FUNCTION(apply)) : NULL;
    apply_def = apply && PyCFunction_Check(apply) ? ((PyCFunctionObject *)apply)->m_ml : NULL;
    base = PyObject_GetAttrString(m, "_SingleLevelFunction");
    base_setup = base ? PyObject_GetAttrString(base, "setup_context") : NULL;
    op_apply = PyObject_CallMethod(cdyn_G.glue, "higher_order_op", "s", "autograd_function_apply");
    once_diff_code = PyObject_CallMethod(cdyn_G.glue, "once_differentiable_code", NULL);
    if (function_type != NULL && (apply_func != NULL || apply_def != NULL) && base_setup != NULL &&
        op_apply != NULL && once_diff_code != NULL) {
        rc = 0;
    }
    else if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_ImportError, "torch.autograd.Function.apply is neither a Python "
                                           "classmethod nor a C method");
    }
    Py_DECREF(m);
    Py_XDECREF(apply);
    Py_XDECREF(base);
    return rc;
}
