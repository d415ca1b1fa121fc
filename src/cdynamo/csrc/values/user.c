/* values/user.c: user-defined classes and objects.
 *
 *   CLASS   a class that is not a builtin type (ID_MATCHed through its source).
 *   OBJECT  any other object: specialised on its type (TYPE_MATCH); what is read through
 *           it is guarded at its own source. Stores into it (attributes, items) are side
 *           effects replayed by the transformed code; after an item store its attributes
 *           are no longer traced (OBJ_MUTATED).
 *   SUPER   super(cls, self): its methods are the base class's functions, inlined with self.
 */
#include "../tx.h"
#include "../codegen.h"

static tr_status
object_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *obj = V(v)->u.obj.obj, *attr = NULL, *src = NULL;
    tr_status st;
    if (V(v)->bits & OBJ_MUTATED) {
        return cdyn_tx_unsupported(tx, "attribute of an object mutated while tracing");
    }
    st = cdyn_tx_memo_attr(tx, v, name, &src, out);
    if (st != TR_OK || *out != NULL) {
        Py_XDECREF(src);
        return st;
    }
    attr = PyObject_GetAttr(obj, name);
    if (attr == NULL) {
        Py_XDECREF(src);
        return cdyn_tx_unsupported(tx, "attribute %U", name);
    }
    if ((PyMethod_Check(attr) && PyMethod_GET_SELF(attr) == obj) ||
        (PyCFunction_Check(attr) && PyCFunction_GET_SELF(attr) == obj)) {
        /* a method of the object: its function inlined with this value as self, or a
           builtin method called through the object (a graph break, the call run by Python) */
        /* the method is bound to this object: rebuilt as <object>.name, never as the bound
           method of the object seen at trace time */
        PyObject *func = PyMethod_Check(attr) ? PyMethod_GET_FUNCTION(attr) : NULL;
        *out = cdyn_value_method(func != NULL && PyFunction_Check(func) ? func : NULL, name, v);
        st = *out ? TR_OK : TR_ERROR;
    }
    else if (src == NULL) {
        st = cdyn_tx_unsupported(tx, "attribute of an object with no source");
    }
    else {
        st = cdyn_tx_wrap_real(tx, attr, src, out);
    }
    Py_DECREF(attr);
    Py_XDECREF(src);
    return st;
}

static tr_status
super_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *self = V(v)->u.super.self, *attr = PyObject_GetAttr(V(v)->u.super.obj, name);
    if (attr == NULL) {
        return cdyn_tx_unsupported(tx, "super() attribute %U", name);
    }
    if (PyMethod_Check(attr) && PyMethod_GET_SELF(attr) == cdyn_v_real(self) &&
        PyFunction_Check(PyMethod_GET_FUNCTION(attr))) {
        *out = cdyn_value_method(PyMethod_GET_FUNCTION(attr), name, self);
        Py_DECREF(attr);
        return *out ? TR_OK : TR_ERROR;
    }
    Py_DECREF(attr);
    return cdyn_tx_unsupported(tx, "super() attribute %U is not a method", name);
}

static tr_status
user_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    switch (V(v)->kind) {
    case VK_CLASS:
        return cdyn_getattr_real(tx, v, name, 1, out);
    case VK_SUPER:
        return super_getattr(tx, v, name, out);
    default:
        return object_getattr(tx, v, name, out);
    }
}

/* obj.name = value on an object that outlives the frame: replayed; later loads of the
 * attribute see the stored value. */
tr_status
cdyn_setattr_replayed(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    PyObject *src;
    tr_status st;
    if (V(v)->source == NULL) {
        return cdyn_tx_unsupported(tx, "STORE_ATTR on %S (side effect)", v);
    }
    src = cdyn_source_attr(V(v)->source, name);
    if (src == NULL) {
        return TR_ERROR;
    }
    st = cdyn_tx_effect(tx, EFF_STORE_ATTR, v, name, value);
    if (st == TR_OK && PyDict_SetItem(tx->by_source, cdyn_source_repr(src), value) < 0) {
        st = TR_ERROR;
    }
    cdyn_tx_mutated(tx, v);
    Py_DECREF(src);
    return st;
}

/* obj[key] = value on an object that outlives the frame: replayed; the object's
 * attributes are no longer traced. */
tr_status
cdyn_store_subscr_replayed(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value)
{
    if (V(v)->source == NULL || V(key)->kind != VK_CONST) {
        return cdyn_tx_unsupported(tx, "STORE_SUBSCR into %S", v);
    }
    if (cdyn_tx_effect(tx, EFF_STORE_SUBSCR, v, V(key)->u.cnst.value, value) != TR_OK) {
        return TR_ERROR;
    }
    V(v)->bits |= OBJ_MUTATED;
    cdyn_tx_mutated(tx, v);
    return TR_OK;
}

static tr_status
user_setattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    if (V(v)->kind != VK_OBJECT) {
        return cdyn_tx_unsupported(tx, "STORE_ATTR on %S (side effect)", v);
    }
    return cdyn_setattr_replayed(tx, v, name, value);
}

static tr_status
user_store_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value)
{
    if (V(v)->kind != VK_OBJECT) {
        return cdyn_tx_unsupported(tx, "STORE_SUBSCR into %S", v);
    }
    return cdyn_store_subscr_replayed(tx, v, key, value);
}

static tr_status
user_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames, PyObject **out)
{
    (void)fs;
    (void)args;
    (void)nargs;
    (void)kwnames;
    (void)out;
    return cdyn_tx_unsupported(tx, "call to %S", fn);
}

static tr_status
user_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    PyTypeObject *t;
    if (V(v)->kind != VK_OBJECT) {
        *out = 1;
        return TR_OK;
    }
    /* an object whose type defines neither __bool__ nor __len__ is true (its type is
       guarded) */
    t = Py_TYPE(V(v)->u.obj.obj);
    if ((t->tp_as_number == NULL || t->tp_as_number->nb_bool == NULL) &&
        (t->tp_as_mapping == NULL || t->tp_as_mapping->mp_length == NULL) &&
        (t->tp_as_sequence == NULL || t->tp_as_sequence->sq_length == NULL)) {
        *out = 1;
        return TR_OK;
    }
    return cdyn_tx_unsupported(tx, "truth value of %S", v);
}

static PyTypeObject *
user_python_type(PyObject *v)
{
    if (V(v)->kind == VK_SUPER) {
        return &PySuper_Type;
    }
    return Py_TYPE(V(v)->u.obj.obj);
}

static tr_status
user_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    (void)cg;
    if (V(v)->kind == VK_SUPER) {
        return cdyn_tx_unsupported(tx, "cannot rebuild %S", v);
    }
    return TR_OK;
}

const cdyn_vtable cdyn_user_vt = {
    .name = "UserDefinedVariable",
    .getattr = user_getattr,
    .setattr = user_setattr,
    .call = user_call,
    .truth = user_truth,
    .store_subscr = user_store_subscr,
    .python_type = user_python_type,
    .collect = user_collect,
    .reconstruct = cdyn_reconstruct_obj,
};
