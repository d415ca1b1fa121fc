/* undo.c: the undo log of a top-level step (tx->undo).
 *
 * A checkpoint (graph.c) is taken before each instruction of the top frame. What the step
 * then changes in traced state that existed before it is logged, newest last, and a rollback
 * (the step failed: a graph break at that instruction, e.g. a call whose inlining failed)
 * applies the entries newest first. Entries are tuples (kind, ...):
 *
 *   (UNDO_POS, v, pos)          an ITER value about to advance: its position before
 *   (UNDO_RESET, v)             a GENERATOR not started yet: reset to its creation state
 *   (UNDO_VALUE, v, bits, pos, refs, saved)
 *                               a value before its first mutation in the step: its bits,
 *                               pos, payload references (refs: a tuple, NULL as the
 *                               sentinel) and the family's own state (vt->save, or None)
 *   (UNDO_MEMO, key, old)       a write into tx->by_source (attribute stores on objects of
 *                               the frame, deletions, globals): the entry before (or the
 *                               sentinel when there was none)
 *
 * A mutation that cannot be logged counts in tx->lost: the rollback is then refused and the
 * frame runs unmodified. */
#include "tx.h"

enum { UNDO_POS = 0, UNDO_RESET = 1, UNDO_VALUE = 2, UNDO_MEMO = 3 };

static long long epoch_counter;   /* numbers the checkpoints (tx->epoch) */
static PyObject *null_marker;     /* stands for NULL in entries */

static PyObject *
marker(void)
{
    if (null_marker == NULL) {
        null_marker = PyCapsule_New(&null_marker, "cdynamo.undo.null", NULL);
    }
    return null_marker;
}

void
cdyn_undo_new_epoch(cdyn_tx *tx)
{
    tx->epoch = ++epoch_counter;
}

/* Append an entry (stolen; NULL: an error is set). 0 / -1. */
static int
log_entry(cdyn_tx *tx, PyObject *e)
{
    int r = e == NULL ? -1 : PyList_Append(tx->undo, e);
    Py_XDECREF(e);
    return r;
}

/* The snapshot of v: an UNDO_VALUE entry (new) or NULL + exception. */
static PyObject *
snapshot(PyObject *v)
{
    PyObject *refs = PyTuple_New(CDYN_VREFS), *saved = NULL, *m = marker();
    if (refs == NULL || m == NULL) {
        Py_XDECREF(refs);
        return NULL;
    }
    for (int k = 0; k < CDYN_VREFS; k++) {
        PyObject *r = V(v)->u.ref[k];
        PyTuple_SET_ITEM(refs, k, Py_NewRef(r != NULL ? r : m));
    }
    saved = V(v)->vt->save != NULL ? V(v)->vt->save(v) : Py_NewRef(Py_None);
    if (saved == NULL) {
        Py_DECREF(refs);
        return NULL;
    }
    return Py_BuildValue("(iOInNN)", UNDO_VALUE, v, V(v)->bits, V(v)->pos, refs, saved);
}

void
cdyn_tx_mutated(cdyn_tx *tx, PyObject *v)
{
    /* a value made after the checkpoint is new state, unless it stands for an object from
       the frame (it has a source); iterators are restored by their own entries (UNDO_POS),
       but not inside a higher-order op's body: advancing one from outside is a side
       effect */
    if (!((V(v)->serial < tx->ckpt_serial || V(v)->source != NULL) &&
          (V(v)->kind != VK_ITER || tx->sub != NULL))) {
        return;
    }
    tx->mutations++;
    if (V(v)->undo_epoch == tx->epoch && tx->epoch != 0) {
        return;   /* its state before the step is logged already */
    }
    if (tx->undo == NULL || log_entry(tx, snapshot(v)) < 0) {
        PyErr_Clear();   /* not undoable: the step cannot be rolled back */
        tx->lost++;
        return;
    }
    V(v)->undo_epoch = tx->epoch;
}

void
cdyn_tx_mutation_lost(cdyn_tx *tx)
{
    tx->mutations++;
    tx->lost++;
}

int
cdyn_undo_pos(cdyn_tx *tx, PyObject *v)
{
    if (V(v)->serial >= tx->ckpt_serial || tx->undo == NULL) {
        return 0;
    }
    return log_entry(tx, Py_BuildValue("(iOn)", UNDO_POS, v, V(v)->pos));
}

int
cdyn_undo_noted(cdyn_tx *tx, PyObject *v)
{
    for (Py_ssize_t i = 0; tx->undo != NULL && i < PyList_GET_SIZE(tx->undo); i++) {
        PyObject *e = PyList_GET_ITEM(tx->undo, i);
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(e, 0));
        if ((kind == UNDO_RESET || kind == UNDO_VALUE) && PyTuple_GET_ITEM(e, 1) == v) {
            return 1;
        }
    }
    return 0;
}

int
cdyn_undo_reset(cdyn_tx *tx, PyObject *v)
{
    return log_entry(tx, Py_BuildValue("(iO)", UNDO_RESET, v));
}

int
cdyn_tx_memo_write(cdyn_tx *tx, PyObject *key, PyObject *value)
{
    PyObject *old = PyDict_GetItemWithError(tx->by_source, key), *m = marker();
    if ((old == NULL && PyErr_Occurred()) || m == NULL) {
        return -1;
    }
    if (old == NULL && value == NULL) {
        return 0;   /* nothing to delete */
    }
    if (tx->undo != NULL &&
        log_entry(tx, Py_BuildValue("(iOO)", UNDO_MEMO, key, old != NULL ? old : m)) < 0) {
        return -1;
    }
    return value != NULL ? PyDict_SetItem(tx->by_source, key, value)
                         : PyDict_DelItem(tx->by_source, key);
}

/* Put back the value snapshot e. 0 / -1. */
static int
restore_value(PyObject *e)
{
    PyObject *v = PyTuple_GET_ITEM(e, 1), *refs = PyTuple_GET_ITEM(e, 4);
    PyObject *saved = PyTuple_GET_ITEM(e, 5);
    V(v)->bits = (unsigned int)PyLong_AsUnsignedLong(PyTuple_GET_ITEM(e, 2));
    V(v)->pos = PyLong_AsSsize_t(PyTuple_GET_ITEM(e, 3));
    for (int k = 0; k < CDYN_VREFS; k++) {
        PyObject *r = PyTuple_GET_ITEM(refs, k);
        Py_XSETREF(V(v)->u.ref[k], r == null_marker ? NULL : Py_NewRef(r));
    }
    if (V(v)->vt->restore != NULL && saved != Py_None) {
        return V(v)->vt->restore(v, saved);
    }
    return 0;
}

/* Apply entry e. 0 / -1. */
static int
apply(cdyn_tx *tx, PyObject *e)
{
    PyObject *a = PyTuple_GET_ITEM(e, 1);
    switch (PyLong_AsLong(PyTuple_GET_ITEM(e, 0))) {
    case UNDO_POS:
        V(a)->pos = PyLong_AsSsize_t(PyTuple_GET_ITEM(e, 2));
        return 0;
    case UNDO_RESET:
        cdyn_generator_reset(a);
        return 0;
    case UNDO_VALUE:
        return restore_value(e);
    default: {
        PyObject *old = PyTuple_GET_ITEM(e, 2);
        if (old != null_marker) {
            return PyDict_SetItem(tx->by_source, a, old);
        }
        if (PyDict_DelItem(tx->by_source, a) < 0 && PyErr_ExceptionMatches(PyExc_KeyError)) {
            PyErr_Clear();
            return 0;
        }
        return PyErr_Occurred() ? -1 : 0;
    }
    }
}

int
cdyn_undo_rollback(cdyn_tx *tx, Py_ssize_t n)
{
    if (tx->undo == NULL || PyList_GET_SIZE(tx->undo) <= n) {
        return 0;
    }
    for (Py_ssize_t i = PyList_GET_SIZE(tx->undo) - 1; i >= n; i--) {
        if (apply(tx, PyList_GET_ITEM(tx->undo, i)) < 0) {
            return -1;
        }
    }
    return PyList_SetSlice(tx->undo, n, PyList_GET_SIZE(tx->undo), NULL);
}

void
cdyn_undo_step(cdyn_tx *tx)
{
    if (tx->undo != NULL && PyList_GET_SIZE(tx->undo) > 0 &&
        PyList_SetSlice(tx->undo, 0, PyList_GET_SIZE(tx->undo), NULL) < 0) {
        PyErr_Clear();   /* cannot fail for a list; keeping the entries is harmless */
    }
}

/* References to v (v NULL: to any object) held by the containers of a family's saved
 * state (fresh tuples, lists, dicts and sets owned by the snapshot). */
static Py_ssize_t
count_saved(PyObject *s, PyObject *v)
{
    Py_ssize_t n = 0;
    if (PyTuple_CheckExact(s) || PyList_CheckExact(s)) {
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(s); i++) {
            n += count_saved(PySequence_Fast_GET_ITEM(s, i), v);
        }
        return n;
    }
    if (PyDict_CheckExact(s)) {
        PyObject *k, *x;
        Py_ssize_t pos = 0;
        while (PyDict_Next(s, &pos, &k, &x)) {
            n += count_saved(x, v);
        }
        return n;
    }
    return cdyn_Value_Check(s) && (v == NULL || s == v);
}

Py_ssize_t
cdyn_undo_refs(cdyn_tx *tx, PyObject *v)
{
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; tx->undo != NULL && i < PyList_GET_SIZE(tx->undo); i++) {
        PyObject *e = PyList_GET_ITEM(tx->undo, i);
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(e, 0));
        PyObject *a = PyTuple_GET_ITEM(e, 1);
        if (kind == UNDO_MEMO) {
            PyObject *old = PyTuple_GET_ITEM(e, 2);
            n += cdyn_Value_Check(old) && (v == NULL || old == v);
            continue;
        }
        n += v == NULL || a == v;
        if (kind == UNDO_VALUE) {
            PyObject *refs = PyTuple_GET_ITEM(e, 4);
            for (int k = 0; k < CDYN_VREFS; k++) {
                PyObject *r = PyTuple_GET_ITEM(refs, k);
                n += cdyn_Value_Check(r) && (v == NULL || r == v);
            }
            n += count_saved(PyTuple_GET_ITEM(e, 5), v);
        }
    }
    return n;
}

PyObject *
cdyn_undo_copy(PyObject *c)
{
    if (c == NULL) {
        return Py_NewRef(Py_None);
    }
    if (PyList_CheckExact(c)) {
        return PyList_GetSlice(c, 0, PY_SSIZE_T_MAX);
    }
    if (PyDict_CheckExact(c)) {
        return PyDict_Copy(c);
    }
    if (PySet_CheckExact(c)) {
        return PySet_New(c);
    }
    return Py_NewRef(Py_None);   /* immutable (a frozenset mirror): nothing to keep */
}

int
cdyn_undo_refill(PyObject *c, PyObject *copy)
{
    if (c == NULL || copy == Py_None) {
        return 0;
    }
    if (PyList_CheckExact(c)) {
        return PyList_SetSlice(c, 0, PY_SSIZE_T_MAX, copy);
    }
    if (PyDict_CheckExact(c)) {
        PyDict_Clear(c);
        return PyDict_Update(c, copy);
    }
    if (PySet_CheckExact(c)) {
        /* the same items, added back in the order they iterated in: the mirror's table
           layout may differ from the one before the step, but nothing iterates a set value
           after a rollback (the trace ends at that instruction; code generation rebuilds
           sets from their map) */
        PyObject *it, *h;
        if (PySet_Clear(c) < 0 || (it = PyObject_GetIter(copy)) == NULL) {
            return -1;
        }
        while ((h = PyIter_Next(it)) != NULL) {
            int r = PySet_Add(c, h);
            Py_DECREF(h);
            if (r < 0) {
                break;
            }
        }
        Py_DECREF(it);
        return PyErr_Occurred() ? -1 : 0;
    }
    return 0;
}
