/* values/exception.c: exceptions raised and caught inside the traced code.
 *
 *   EXCTYPE  an exception class (ValueError, a user's subclass of Exception): calling it
 *            makes an EXC value.
 *   EXC      an exception instance made in the trace: its type and its argument values.
 *
 * `raise` in traced code (RAISE_VARARGS, RERAISE) and operations that raise (cdyn_tx_raise:
 * a missing dict key, ...) set tx->exc and return TR_EXCEPTION; the opcode loop unwinds to
 * the instruction's exception handler in the same frame (translate.c) or propagates the
 * exception to the caller of an inlined function. An exception that no traced handler
 * catches is left to Python: the instruction becomes a graph break and raises for real. */
#include "../tx.h"
#include "../codegen.h"

tr_status
cdyn_tx_raise(cdyn_tx *tx, PyObject *type, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *exc = cdyn_value_alloc(VK_EXC, NULL), *items = PyList_New(nargs);
    if (exc == NULL || items == NULL) {
        Py_XDECREF(exc);
        Py_XDECREF(items);
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyList_SET_ITEM(items, i, Py_NewRef(args[i]));
    }
    V(exc)->u.exc.type = Py_NewRef(type);
    V(exc)->u.exc.args = items;
    Py_XSETREF(tx->exc, exc);
    if (tx->reason == NULL) {
        tx->reason = PyUnicode_FromFormat("exception %s raised in traced code",
                                          ((PyTypeObject *)type)->tp_name);
    }
    return TR_EXCEPTION;
}

tr_status
cdyn_tx_raise_value(cdyn_tx *tx, PyObject *v)
{
    if (V(v)->kind == VK_EXCTYPE) {
        return cdyn_tx_raise(tx, V(v)->u.obj.obj, NULL, 0);
    }
    if (V(v)->kind != VK_EXC) {
        return cdyn_tx_unsupported(tx, "raise of %S", v);
    }
    Py_XSETREF(tx->exc, Py_NewRef(v));
    if (tx->reason == NULL) {
        tx->reason = PyUnicode_FromFormat("exception %s raised in traced code",
                                          ((PyTypeObject *)V(v)->u.exc.type)->tp_name);
    }
    return TR_EXCEPTION;
}

/* 1 when exception value v matches the class (or tuple of classes) value cls; -1 when it
 * cannot be decided. */
int
cdyn_exc_matches(PyObject *v, PyObject *cls)
{
    PyObject *real = cdyn_v_real(cls), *t;
    int r;
    if (V(v)->kind != VK_EXC) {
        return -1;
    }
    t = V(v)->u.exc.type;
    if (real != NULL) {
        r = PyObject_IsSubclass(t, real);
        if (r < 0) {
            PyErr_Clear();
        }
        return r;
    }
    if (V(cls)->kind == VK_TUPLE && V(cls)->u.seq.items != NULL) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(V(cls)->u.seq.items); i++) {
            r = cdyn_exc_matches(v, PyList_GET_ITEM(V(cls)->u.seq.items, i));
            if (r != 0) {
                return r;
            }
        }
        return 0;
    }
    return -1;
}

/* 1 when class t makes and prints its instances with C code only (no Python __new__,
 * __init__, __str__ or __repr__ anywhere in its MRO). */
static int
exc_class_is_c(PyTypeObject *t)
{
    static const char *const names[] = {"__new__", "__init__", "__str__", "__repr__"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        PyObject *n = PyUnicode_InternFromString(names[i]), *m;
        if (n == NULL) {
            PyErr_Clear();
            return 0;
        }
        m = _PyType_Lookup(t, n);
        Py_DECREF(n);
        if (m == NULL || PyFunction_Check(m) || PyObject_TypeCheck(m, &PyStaticMethod_Type) ||
            PyObject_TypeCheck(m, &PyClassMethod_Type)) {
            return 0;
        }
    }
    return 1;
}

tr_status
cdyn_exc_text(cdyn_tx *tx, PyObject *v, int use_repr, PyObject **out)
{
    PyObject *args = NULL, *exc = NULL, *text = NULL;
    Py_ssize_t n;
    tr_status st = TR_OK;
    if (V(v)->kind != VK_EXC) {
        return TR_NOTIMPL;
    }
    if (!exc_class_is_c((PyTypeObject *)V(v)->u.exc.type)) {
        return cdyn_tx_unsupported(tx, "%s() of %S", use_repr ? "repr" : "str", v);
    }
    n = PyList_GET_SIZE(V(v)->u.exc.args);
    args = PyTuple_New(n);
    for (Py_ssize_t i = 0; args != NULL && i < n; i++) {
        PyObject *a = PyList_GET_ITEM(V(v)->u.exc.args, i);
        if (V(a)->kind != VK_CONST) {
            st = cdyn_tx_unsupported(tx, "%s() of %S with a non-constant argument",
                                     use_repr ? "repr" : "str", v);
            break;
        }
        PyTuple_SET_ITEM(args, i, Py_NewRef(V(a)->u.cnst.value));
    }
    if (args == NULL) {
        st = TR_ERROR;
    }
    if (st == TR_OK) {
        exc = PyObject_Call(V(v)->u.exc.type, args, NULL);
        text = exc == NULL ? NULL : use_repr ? PyObject_Repr(exc) : PyObject_Str(exc);
        *out = text ? cdyn_value_const(text) : NULL;
        if (*out == NULL) {
            PyErr_Clear();
            st = cdyn_tx_unsupported(tx, "%s() of %S failed", use_repr ? "repr" : "str", v);
        }
    }
    Py_XDECREF(args);
    Py_XDECREF(exc);
    Py_XDECREF(text);
    return st;
}

static tr_status
exc_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames, PyObject **out)
{
    PyObject *items;
    (void)fs;
    if (V(fn)->kind != VK_EXCTYPE || kwnames != NULL) {
        return cdyn_tx_unsupported(tx, "call of %S", fn);
    }
    items = PyList_New(nargs);
    *out = items ? cdyn_value_alloc(VK_EXC, NULL) : NULL;
    if (*out == NULL) {
        Py_XDECREF(items);
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyList_SET_ITEM(items, i, Py_NewRef(args[i]));
    }
    V(*out)->u.exc.type = Py_NewRef(V(fn)->u.obj.obj);
    V(*out)->u.exc.args = items;
    return TR_OK;
}

static tr_status
exc_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    if (V(v)->kind == VK_EXCTYPE) {
        return cdyn_getattr_real(tx, v, name, 1, out);
    }
    if (cdyn_name_is(name, "args")) {
        *out = cdyn_value_seq(VK_TUPLE, &PyList_GET_ITEM(V(v)->u.exc.args, 0),
                              PyList_GET_SIZE(V(v)->u.exc.args));
        return *out ? TR_OK : TR_ERROR;
    }
    return cdyn_tx_unsupported(tx, "attribute %U of an exception", name);
}

static tr_status
exc_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    (void)tx;
    (void)v;
    *out = 1;
    return TR_OK;
}

static PyTypeObject *
exc_python_type(PyObject *v)
{
    if (V(v)->kind == VK_EXCTYPE) {
        return Py_TYPE(V(v)->u.obj.obj);
    }
    return (PyTypeObject *)V(v)->u.exc.type;
}

static tr_status
exc_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    if (V(v)->kind == VK_EXCTYPE) {
        return TR_OK;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(V(v)->u.exc.args); i++) {
        tr_status st = cdyn_cg_collect(tx, cg, PyList_GET_ITEM(V(v)->u.exc.args, i));
        if (st != TR_OK) {
            return st;
        }
    }
    return TR_OK;
}

/* type(*args) (a new instance: identity is not kept across a graph break). */
static int
exc_reconstruct(cdyn_cg *cg, PyObject *v)
{
    Py_ssize_t n;
    if (V(v)->kind == VK_EXCTYPE) {
        return cdyn_reconstruct_obj(cg, v);
    }
    n = PyList_GET_SIZE(V(v)->u.exc.args);
    if (cdyn_cg_push_callable(cg, V(v)->u.exc.type) < 0) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (cdyn_cg_value(cg, PyList_GET_ITEM(V(v)->u.exc.args, i)) < 0) {
            return -1;
        }
    }
    return cdyn_cg_call(cg, (int)n);
}

const cdyn_vtable cdyn_exc_vt = {
    .name = "ExceptionVariable",
    .getattr = exc_getattr,
    .call = exc_call,
    .truth = exc_truth,
    .python_type = exc_python_type,
    .collect = exc_collect,
    .reconstruct = exc_reconstruct,
};
