/* values/scan.c: torch.ops.higher_order.associative_scan(combine_fn, xs, additional_inputs),
 * the operator associative_scan's front end calls with combine_mode="pointwise" (CUDA
 * tensors; the "generic" mode is plain Python, inlined op by op), traced as torch._dynamo's
 * AssociativeScanHigherOrderVariable:
 *
 *   select_copy = torch.select_copy(x, 0, 0)        one per leaf of xs (example values of
 *                                                   the body; left unused, as torch._dynamo)
 *   associative_scan_combine_fn_<i>(lhs..., rhs..., additional..., lifted...)
 *   associative_scan(associative_scan_combine_fn_<i>, [xs...], (additional..., lifted...))
 *
 * combine_fn (a function, or the front end's functools.partial of wrap_combine_fn_flat) is
 * traced as a body (values/hop.c) on the first slices, once as lhs and once as rhs; its
 * result must hold one tensor per leaf of xs with the leaf's slice metadata, and its
 * operations must be pointwise (glue.associative_scan_refusal, torch._dynamo's checks). With
 * the front end's partial, the op's outputs are put back into the structure combine_fn
 * returned (the user's pytree of xs, which torch._dynamo unflattens them into; that the two
 * structures are equal is not checked: torch._dynamo raises when they differ), otherwise
 * they are the list the op returns in eager. Anything else (a body that cannot be traced, a side effect, aliasing or mutation
 * of an input) makes the call a graph break: the op runs in Python.
 */
#include "hop.h"

static PyObject *fn_select_copy;   /* torch.select_copy */

int
cdyn_scan_init(void)
{
    if (fn_select_copy == NULL) {
        fn_select_copy = PyObject_GetAttrString(cdyn_G.torch, "select_copy");
    }
    return fn_select_copy ? 0 : -1;
}

/* The leaves of a tuple/list value v that must all be tensors: *items new list. */
static tr_status
tensor_items(cdyn_tx *tx, PyObject *v, const char *what, PyObject **items)
{
    tr_status st;
    if (V(v)->kind != VK_TUPLE && V(v)->kind != VK_LIST &&
        !(V(v)->kind == VK_CONST && PyTuple_CheckExact(V(v)->u.cnst.value))) {
        return cdyn_tx_unsupported(tx, "associative_scan: %s is %S, not a list or tuple", what,
                                   v);
    }
    st = cdyn_v_unpack(tx, v, items);
    for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(*items); i++) {
        if (V(PyList_GET_ITEM(*items, i))->kind != VK_TENSOR) {
            st = cdyn_tx_unsupported(tx, "associative_scan: %s holds %S", what,
                                     PyList_GET_ITEM(*items, i));
            Py_CLEAR(*items);
        }
    }
    return st;
}

/* The body's arguments: the first slice of each leaf of xs (recorded torch.select_copy(x, 0,
 * 0)) twice, then the additional inputs. *out new list. */
static tr_status
body_args(cdyn_tx *tx, PyObject *xs, PyObject *extra, PyObject **out)
{
    Py_ssize_t n = PyList_GET_SIZE(xs);
    PyObject *zero = cdyn_value_const_steal(PyLong_FromLong(0)), *list = PyList_New(0);
    tr_status st = zero && list ? TR_OK : TR_ERROR;
    for (Py_ssize_t i = 0; st == TR_OK && i < n; i++) {
        PyObject *call[3] = {PyList_GET_ITEM(xs, i), zero, zero}, *sl = NULL;
        st = cdyn_tx_graph_call(tx, "call_function", fn_select_copy, NULL, call, 3, NULL,
                                &sl);
        if (st == TR_OK && PyList_Append(list, sl) < 0) {
            st = TR_ERROR;
        }
        Py_XDECREF(sl);
    }
    for (Py_ssize_t i = 0; st == TR_OK && i < n; i++) {
        if (PyList_Append(list, PyList_GET_ITEM(list, i)) < 0) {
            st = TR_ERROR;
        }
    }
    if (st == TR_OK && PyList_SetSlice(list, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, extra) < 0) {
        st = TR_ERROR;
    }
    Py_XDECREF(zero);
    if (st == TR_OK) {
        *out = list;
    }
    else {
        Py_XDECREF(list);
    }
    return st;
}

/* TR_UNSUPPORTED when the traced body is refused: aliasing or mutation of an input, a wrong
 * number of outputs, or glue.associative_scan_refusal's reason. */
static tr_status
check_body(cdyn_tx *tx, cdyn_body *b, PyObject *gm, Py_ssize_t n)
{
    PyObject *why;
    tr_status st = TR_OK;
    if (gm == NULL) {
        why = PyObject_CallMethod(tx->glue, "body_alias_or_mutation", "OO", b->sub.graph,
                                  b->outputs);
    }
    else if (PyTuple_GET_SIZE(b->outputs) != n) {
        return cdyn_tx_unsupported(tx, "associative_scan: combine_fn returns %zd tensors for "
                                   "%zd leaves of xs", PyTuple_GET_SIZE(b->outputs), n);
    }
    else {
        why = PyObject_CallMethod(tx->glue, "associative_scan_refusal", "On", gm, n);
    }
    if (why == NULL) {
        return TR_ERROR;
    }
    if (why != Py_None) {
        st = cdyn_tx_unsupported(tx, "associative_scan: %U (raised under torch.compile)", why);
    }
    Py_DECREF(why);
    return st;
}

/* The node's arguments: [combine_fn_<i>, [xs...], (additional..., lifted...)]. *out new. */
static tr_status
node_args(cdyn_tx *tx, cdyn_body *b, PyObject *sub, PyObject *xs, PyObject *extra,
          PyObject **out)
{
    PyObject *xl = NULL, *rest = PyList_GetSlice(extra, 0, PyList_GET_SIZE(extra));
    PyObject *tup = NULL, *list = NULL;
    tr_status st = TR_ERROR;
    if (rest == NULL || cdyn_body_free_values(tx, b, rest) != TR_OK) {
        goto done;
    }
    xl = cdyn_value_seq_list(VK_LIST, xs);
    tup = xl ? cdyn_value_seq_list(VK_TUPLE, rest) : NULL;
    list = tup ? PyList_New(0) : NULL;
    if (list == NULL || PyList_Append(list, sub) < 0 || PyList_Append(list, xl) < 0 ||
        PyList_Append(list, tup) < 0) {
        Py_CLEAR(list);
        goto done;
    }
    *out = list;
    st = TR_OK;
done:
    Py_XDECREF(rest);
    Py_XDECREF(xl);
    Py_XDECREF(tup);
    return st;
}

tr_status
cdyn_assoc_scan(cdyn_tx *tx, cdyn_fs *fs, PyObject *op, PyObject *const *args,
                Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    static const char *const names[] = {"combine_fn", "xs", "additional_inputs", NULL};
    PyObject *a[3], *xs = NULL, *extra = NULL, *bargs = NULL, *ret = NULL, *sub = NULL;
    PyObject *nargs_list = NULL, *items = NULL;
    Py_ssize_t pos = 0;
    cdyn_body b;
    tr_status st = cdyn_hop_bind_params(tx, "associative_scan", args, nargs, kwnames, names, 3,
                                        a);
    memset(&b, 0, sizeof(b));
    if (st == TR_OK) {
        st = tensor_items(tx, a[1], "xs", &xs);
    }
    if (st == TR_OK) {
        st = tensor_items(tx, a[2], "additional_inputs", &extra);
    }
    if (st == TR_OK && PyList_GET_SIZE(xs) == 0) {
        st = cdyn_tx_unsupported(tx, "associative_scan without xs");
    }
    if (st == TR_OK) {
        st = body_args(tx, xs, extra, &bargs);
    }
    if (st == TR_OK) {
        st = cdyn_hop_trace_body(tx, fs, &b, "associative_scan combine_fn", a[0],
                                 PySequence_Fast_ITEMS(bargs), PyList_GET_SIZE(bargs), NULL, 0,
                                 &ret);
    }
    if (st == TR_OK) {
        st = check_body(tx, &b, NULL, PyList_GET_SIZE(xs));
    }
    if (st == TR_OK) {
        st = cdyn_body_module(tx, &b, "associative_scan_combine_fn", &sub);
    }
    if (st == TR_OK) {
        st = check_body(tx, &b, V(sub)->u.sub.gm, PyList_GET_SIZE(xs));
    }
    if (st == TR_OK) {
        st = node_args(tx, &b, sub, xs, extra, &nargs_list);
    }
    if (st == TR_OK) {
        st = cdyn_hop_call_node(tx, op, nargs_list, NULL, &items);
    }
    if (st == TR_OK && V(a[0])->kind == VK_PARTIAL) {
        st = cdyn_body_rebuild(tx, ret, items, &pos, out);   /* the front end's pytree */
    }
    else if (st == TR_OK) {
        *out = cdyn_value_seq_list(VK_LIST, items);   /* the op's own result: a list */
        st = *out ? TR_OK : TR_ERROR;
    }
    cdyn_body_clear(tx, &b);
    if (st != TR_OK) {
        cdyn_body_discard(tx, sub);
    }
    Py_XDECREF(xs);
    Py_XDECREF(extra);
    Py_XDECREF(bargs);
    Py_XDECREF(ret);
    Py_XDECREF(sub);
    Py_XDECREF(nargs_list);
    Py_XDECREF(items);
    return st;
}
