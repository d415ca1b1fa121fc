/* values/ctx.c: context managers.
 *
 *   GRADCTX   torch.no_grad() / enable_grad() / set_grad_enabled(m): entering sets the
 *             grad mode in the graph (a _set_grad_enabled node) and gives a GRADEXIT.
 *   GRADEXIT  the __exit__ of such a block: restores the mode it remembers. When a graph
 *             break splits the block, it is rebuilt as cdynamo._glue.GradModeExit(prev) and
 *             handed to the resume function, which calls it at the end of the block.
 */
#include "../tx.h"
#include "../codegen.h"

/* Record torch._C._set_grad_enabled(mode) in the graph. */
static tr_status
set_mode(cdyn_tx *tx, int mode)
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

static tr_status
ctx_enter(cdyn_tx *tx, PyObject *v, PyObject **exit_fn, PyObject **result)
{
    cdyn_value *c = V(v);
    int restore;
    tr_status st = TR_OK;
    if (c->kind != VK_GRADCTX) {
        return cdyn_tx_unsupported(tx, "with-block over %S", v);
    }
    if (c->bits & GRAD_APPLIED) {
        /* torch.set_grad_enabled(m): the mode was set by the call; restore the mode from
           before it on exit */
        restore = (c->bits & GRAD_PREV_ON) != 0;
    }
    else {
        restore = tx->grad_enabled;
        st = set_mode(tx, (c->bits & GRAD_MODE_ON) != 0);
    }
    if (st != TR_OK) {
        return st;
    }
    *exit_fn = cdyn_value_alloc(VK_GRADEXIT, NULL);
    *result = cdyn_value_const(Py_None);
    if (*exit_fn == NULL || *result == NULL) {
        Py_CLEAR(*exit_fn);
        Py_CLEAR(*result);
        return TR_ERROR;
    }
    V(*exit_fn)->bits = restore ? GRAD_MODE_ON : 0;
    return TR_OK;
}

static tr_status
ctx_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames, PyObject **out)
{
    tr_status st;
    (void)fs;
    (void)args;
    (void)nargs;
    (void)kwnames;
    if (V(fn)->kind != VK_GRADEXIT) {
        return cdyn_tx_unsupported(tx, "call of %S", fn);
    }
    st = set_mode(tx, (V(fn)->bits & GRAD_MODE_ON) != 0);
    if (st != TR_OK) {
        return st;
    }
    *out = cdyn_value_const(Py_None);
    return *out ? TR_OK : TR_ERROR;
}

static tr_status
ctx_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    (void)cg;
    if (V(v)->kind == VK_GRADEXIT) {
        return TR_OK;
    }
    return cdyn_tx_unsupported(tx, "cannot rebuild %S", v);
}

/* GradModeExit(prev): restores grad mode at the end of a block split by a break. */
static int
ctx_reconstruct(cdyn_cg *cg, PyObject *v)
{
    if (cdyn_cg_push_callable(cg, cdyn_G.grad_mode_exit_type) < 0 ||
        cdyn_cg_load_const(cg, (V(v)->bits & GRAD_MODE_ON) ? Py_True : Py_False) < 0) {
        return -1;
    }
    return cdyn_cg_call(cg, 1);
}

const cdyn_vtable cdyn_ctx_vt = {
    .name = "ContextManagerVariable",
    .call = ctx_call,
    .enter = ctx_enter,
    .collect = ctx_collect,
    .reconstruct = ctx_reconstruct,
};
