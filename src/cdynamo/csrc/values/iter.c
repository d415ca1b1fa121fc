/* values/iter.c: iterators. Iteration is unrolled at trace time: an iterator value holds
 * the list of its items (values) and the position of the next one. At a graph break it is
 * rebuilt as iter(tuple of the remaining items), once per generated code.
 *
 * A tuple iterator of the frame (the iterator of a for loop handed to a resume function
 * crosses a break as one, codegen's iter_reconstruct; or a user's iter(tuple) passed in) is
 * an ITER value with a source that takes its items lazily (u.iter.rest, the real items left
 * at trace time): item k is read through ___tuple_iter_rest(<source>)[k] and TYPE_MATCHed
 * when the trace takes it, its exhaustion is a LENGTH_CHECK, so a trace that takes one item
 * and breaks serves every iteration of the loop; the real iterator is advanced as far as the
 * trace advanced it (EFF_SYNC, iter_writeback) and is itself what the generated code passes
 * on (identity kept). */
#include "../tx.h"
#include "../codegen.h"

static PyObject *
items(PyObject *v)
{
    return V(v)->u.iter.items;
}

/* ---- tuple iterators of the frame ---------------------------------------------------------- */

/* CPython 3.11's tuple iterator object (Objects/tupleobject.c keeps its struct private). */
typedef struct {
    PyObject_HEAD
    Py_ssize_t it_index;
    PyTupleObject *it_seq;   /* NULL once next() found it exhausted */
} tupleiter;

PyTypeObject *
cdyn_tuple_iter_type(void)
{
    static PyTypeObject *tp;
    if (tp == NULL) {
        PyObject *t = PyTuple_New(0), *it = t ? PyObject_GetIter(t) : NULL;
        tp = it ? Py_TYPE(it) : NULL;
        Py_XDECREF(it);
        Py_XDECREF(t);
        PyErr_Clear();
    }
    return tp;
}

/* ___tuple_iter_rest(it): the tuple of the items a tuple iterator has left (new ref), without
 * advancing it. */
static PyObject *
py_rest(PyObject *Py_UNUSED(self), PyObject *it)
{
    tupleiter *ti = (tupleiter *)it;
    if (Py_TYPE(it) != cdyn_tuple_iter_type()) {
        PyErr_Format(PyExc_TypeError, "___tuple_iter_rest: expected a tuple iterator, got %s",
                     Py_TYPE(it)->tp_name);
        return NULL;
    }
    if (ti->it_seq == NULL) {
        return PyTuple_New(0);
    }
    if (ti->it_index <= 0) {
        return Py_NewRef((PyObject *)ti->it_seq);
    }
    return PyTuple_GetSlice((PyObject *)ti->it_seq, ti->it_index,
                            PyTuple_GET_SIZE(ti->it_seq));
}

/* ___tuple_iter_advance(it, n): take n items of a tuple iterator (at most as many as it has
 * left), as n calls of next() would, without making them. */
static PyObject *
py_advance(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    tupleiter *ti;
    Py_ssize_t n;
    if (nargs != 2 || Py_TYPE(args[0]) != cdyn_tuple_iter_type()) {
        PyErr_SetString(PyExc_TypeError, "___tuple_iter_advance(tuple_iterator, n)");
        return NULL;
    }
    n = PyLong_AsSsize_t(args[1]);
    if (n == -1 && PyErr_Occurred()) {
        return NULL;
    }
    ti = (tupleiter *)args[0];
    if (ti->it_seq != NULL && n > 0) {
        Py_ssize_t size = PyTuple_GET_SIZE(ti->it_seq);
        ti->it_index = ti->it_index > size - n ? size : ti->it_index + n;
    }
    Py_RETURN_NONE;
}

static PyMethodDef rest_def = {"___tuple_iter_rest", (PyCFunction)py_rest, METH_O,
                               "the items a tuple iterator has left, as a tuple"};
static PyMethodDef advance_def = {"___tuple_iter_advance",
                                  (PyCFunction)(void (*)(void))py_advance, METH_FASTCALL,
                                  "advance a tuple iterator by n items"};

/* Borrowed: the helper builtin of def, made on first use (NULL + exception). */
static PyObject *
helper(PyMethodDef *def, PyObject **slot)
{
    if (*slot == NULL) {
        *slot = PyCFunction_New(def, NULL);
    }
    return *slot;
}

static PyObject *rest_fn, *advance_fn;

PyObject *
cdyn_iter_input(PyObject *obj, PyObject *source)
{
    PyObject *rest = py_rest(NULL, obj), *l = rest ? PyList_New(0) : NULL;
    PyObject *v = l ? cdyn_value_alloc(VK_ITER, source) : NULL;
    if (v == NULL) {
        Py_XDECREF(rest);
        Py_XDECREF(l);
        return NULL;
    }
    V(v)->u.iter.items = l;
    V(v)->u.iter.rest = rest;
    return v;
}

/* Take the next item of an input tuple iterator v into its items (pos is at their end):
 * *got 1, or 0 when it is exhausted (guarded either way). */
static tr_status
input_take(cdyn_tx *tx, PyObject *v, int *got)
{
    PyObject *rest = V(v)->u.iter.rest, *fn = helper(&rest_def, &rest_fn);
    PyObject *rsrc = fn ? cdyn_source_call(fn, V(v)->source, "___tuple_iter_rest") : NULL;
    PyObject *key = NULL, *isrc = NULL, *item = NULL, *obj;
    Py_ssize_t k = PyList_GET_SIZE(items(v));
    tr_status st = TR_ERROR;
    *got = 0;
    if (rsrc == NULL) {
        return TR_ERROR;
    }
    if (k >= PyTuple_GET_SIZE(rest)) {
        st = cdyn_guards_add_len(tx->guards, rsrc, k) < 0 ? TR_ERROR : TR_OK;
        goto done;
    }
    obj = PyTuple_GET_ITEM(rest, k);
    key = PyLong_FromSsize_t(k);
    isrc = key ? cdyn_source_item(rsrc, key) : NULL;
    if (isrc == NULL || cdyn_guards_add_type(tx->guards, isrc, Py_TYPE(obj)) < 0) {
        goto done;
    }
    st = cdyn_tx_wrap_real(tx, obj, isrc, &item);
    if (st == TR_OK && PyList_Append(items(v), item) < 0) {
        st = TR_ERROR;
    }
    *got = st == TR_OK;
done:
    Py_XDECREF(item);
    Py_XDECREF(isrc);
    Py_XDECREF(key);
    Py_DECREF(rsrc);
    return st;
}

/* v is about to advance from pos: an input tuple iterator advanced for the first time
 * records the EFF_SYNC that advances the real one (a rollback of the step drops it and
 * puts pos back to 0, so it is recorded again). */
static tr_status
input_advancing(cdyn_tx *tx, PyObject *v)
{
    if (V(v)->u.iter.rest == NULL || V(v)->pos != 0) {
        return TR_OK;
    }
    return cdyn_tx_effect(tx, EFF_SYNC, v, NULL, Py_None);
}

static tr_status
iter_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    Py_ssize_t n;
    int got = V(v)->u.iter.rest != NULL;
    while (got) {   /* an input tuple iterator: take every item it has left */
        tr_status st = input_take(tx, v, &got);
        if (st != TR_OK) {
            return st;
        }
    }
    n = PyList_GET_SIZE(items(v));
    if (cdyn_undo_pos(tx, v) < 0 || (n > V(v)->pos && input_advancing(tx, v) != TR_OK)) {
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
        int got = 0;
        tr_status st = V(v)->u.iter.rest != NULL ? input_take(tx, v, &got) : TR_OK;
        if (st != TR_OK || !got) {
            *out = NULL;
            return st;
        }
    }
    if (cdyn_undo_pos(tx, v) < 0 || input_advancing(tx, v) != TR_OK) {
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
    if (V(v)->u.iter.rest != NULL) {
        return TR_OK;   /* the real iterator, advanced by iter_writeback, is passed on */
    }
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
    int r;
    if (V(v)->u.iter.rest != NULL) {
        return cdyn_cg_source(cg, V(v)->source);
    }
    r = cdyn_cg_memo_load(cg, v);
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

/* An input tuple iterator the trace advanced (EFF_SYNC): advance the real one as far. */
static int
iter_writeback(cdyn_cg *cg, PyObject *v)
{
    PyObject *fn = helper(&advance_def, &advance_fn), *n = PyLong_FromSsize_t(V(v)->pos);
    int e = fn == NULL || n == NULL || cdyn_cg_push_callable(cg, fn) < 0 ||
            cdyn_cg_source(cg, V(v)->source) < 0 || cdyn_cg_load_const(cg, n) < 0 ||
            cdyn_cg_call(cg, 2) < 0 || cdyn_cg_emit(cg, POP_TOP, 0) < 0;
    Py_XDECREF(n);
    return e ? -1 : 0;
}

/* The type of the iterator the value stands for (a tuple iterator when it was made from
 * items with no real counterpart, e.g. zip/enumerate results). */
static PyTypeObject *
iter_python_type(PyObject *v)
{
    if (V(v)->u.iter.type != NULL) {
        return (PyTypeObject *)V(v)->u.iter.type;
    }
    return cdyn_tuple_iter_type();
}

/* it.__iter__() (the iterator itself), it.__next__() (next(it), StopIteration raised in
 * the trace at the end), it.__length_hint__() (the items left). */
static const char *const iter_methods[] = {"__iter__", "__next__", "__length_hint__", NULL};

static PyTypeObject *iter_python_type(PyObject *v);

static tr_status
iter_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    return cdyn_container_getattr(tx, v, iter_python_type(v), name, out);
}

static tr_status
iter_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *name, PyObject *const *args,
                 Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    tr_status st;
    (void)fs;
    (void)args;
    if (nargs != 0 || kwnames != NULL || !cdyn_name_in(name, iter_methods)) {
        return cdyn_tx_unsupported(tx, "method %U of an iterator", name);
    }
    if (cdyn_name_is(name, "__iter__")) {
        *out = Py_NewRef(v);
        return TR_OK;
    }
    if (cdyn_name_is(name, "__length_hint__")) {
        if (V(v)->u.iter.rest != NULL) {
            return cdyn_tx_unsupported(tx, "__length_hint__ of an input iterator");
        }
        *out = cdyn_value_const_steal(PyLong_FromSsize_t(PyList_GET_SIZE(items(v)) - V(v)->pos));
        return *out ? TR_OK : TR_ERROR;
    }
    st = cdyn_v_next(tx, v, out);
    if (st == TR_OK && *out == NULL) {   /* exhausted: StopIteration, as it.__next__() */
        return cdyn_tx_raise(tx, PyExc_StopIteration, NULL, 0);
    }
    return st;
}

const cdyn_vtable cdyn_iter_vt = {
    .name = "IteratorVariable",
    .getattr = iter_getattr,
    .call_method = iter_call_method,
    .truth = iter_truth,
    .unpack = iter_unpack,
    .next = iter_next,
    .python_type = iter_python_type,
    .collect = iter_collect,
    .reconstruct = iter_reconstruct,
    .writeback = iter_writeback,
};
