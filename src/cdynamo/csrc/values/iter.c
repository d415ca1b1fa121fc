/* values/iter.c: iterators. Iteration is unrolled at trace time: an iterator value holds
 * the list of its items (values) and the position of the next one. At a graph break it is
 * rebuilt as iter(tuple of the remaining items), once per generated code. */
#include "../tx.h"
#include "../codegen.h"

static PyObject *
items(PyObject *v)
{
    return V(v)->u.iter.items;
}

static tr_status
iter_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    Py_ssize_t n = PyList_GET_SIZE(items(v));
    if (cdyn_undo_pos(tx, v) < 0) {
        return TR_ERROR;
    }
    *out_list = PyList_GetSlice(items(v), V(v)->pos, n);
    V(v)->pos = n;
    return *out_list ? TR_OK : TR_ERROR;
}

static tr_status
iter_next(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    if (V(v)->pos >= PyList_GET_SIZE(items(v))) {
        *out = NULL;
        return TR_OK;
    }
    if (cdyn_undo_pos(tx, v) < 0) {
        return TR_ERROR;
    }
    *out = Py_NewRef(PyList_GET_ITEM(items(v), V(v)->pos));
    V(v)->pos++;
    return TR_OK;
}

static tr_status
iter_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    (void)tx;
    (void)v;
    *out = 1;
    return TR_OK;
}

static tr_status
iter_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    for (Py_ssize_t i = V(v)->pos; i < PyList_GET_SIZE(items(v)); i++) {
        tr_status st = cdyn_cg_collect(tx, cg, PyList_GET_ITEM(items(v), i));
        if (st != TR_OK) {
            return st;
        }
    }
    return TR_OK;
}

static int
iter_reconstruct(cdyn_cg *cg, PyObject *v)
{
    Py_ssize_t n = PyList_GET_SIZE(items(v)) - V(v)->pos;
    int r = cdyn_cg_memo_load(cg, v);
    if (r != 0) {
        return r < 0 ? -1 : 0;
    }
    for (Py_ssize_t k = V(v)->pos; k < PyList_GET_SIZE(items(v)); k++) {
        if (cdyn_cg_value(cg, PyList_GET_ITEM(items(v), k)) < 0) {
            return -1;
        }
    }
    if (cdyn_cg_emit(cg, BUILD_TUPLE, (int)n) < 0 || cdyn_cg_emit(cg, GET_ITER, 0) < 0) {
        return -1;
    }
    return cdyn_cg_memo_store(cg, v, "iter");
}

/* The type of the iterator the value stands for (a tuple iterator when it was made from
 * items with no real counterpart, e.g. zip/enumerate results). */
static PyTypeObject *
iter_python_type(PyObject *v)
{
    static PyTypeObject *tuple_iter;
    if (V(v)->u.iter.type != NULL) {
        return (PyTypeObject *)V(v)->u.iter.type;
    }
    if (tuple_iter == NULL) {
        PyObject *t = PyTuple_New(0), *it = t ? PyObject_GetIter(t) : NULL;
        tuple_iter = it ? Py_TYPE(it) : NULL;
        Py_XDECREF(it);
        Py_XDECREF(t);
        PyErr_Clear();
    }
    return tuple_iter;
}

const cdyn_vtable cdyn_iter_vt = {
    .name = "IteratorVariable",
    .truth = iter_truth,
    .unpack = iter_unpack,
    .next = iter_next,
    .python_type = iter_python_type,
    .collect = iter_collect,
    .reconstruct = iter_reconstruct,
};
