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

/* A new EXC value of class type (borrowed) with the argument values args (borrowed). */
static PyObject *
new_exc(PyObject *type, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *exc = cdyn_value_alloc(VK_EXC, NULL), *items = PyList_New(nargs);
    if (exc == NULL || items == NULL) {
        Py_XDECREF(exc);
        Py_XDECREF(items);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyList_SET_ITEM(items, i, Py_NewRef(args[i]));
    }
    V(exc)->u.exc.type = Py_NewRef(type);
    V(exc)->u.exc.args = items;
    return exc;
}

/* The EXC value raised by `raise v`: v itself, or a new instance of an EXCTYPE v (new
 * reference); NULL with TR_UNSUPPORTED in *st for any other value. */
static PyObject *
exc_instance(cdyn_tx *tx, PyObject *v, tr_status *st)
{
    PyObject *r = NULL;
    if (V(v)->kind == VK_EXC) {
        return Py_NewRef(v);
    }
    if (V(v)->kind == VK_EXCTYPE) {
        r = new_exc(V(v)->u.obj.obj, NULL, 0);
        *st = r ? TR_OK : TR_ERROR;
        return r;
    }
    *st = cdyn_tx_unsupported(tx, "raise of %S", v);
    return NULL;
}

/* 1 when exception value b is a (or is reached from a through __context__ / __cause__
 * links, within a bounded depth: a deeper chain counts as reaching); the links made in the
 * trace must stay acyclic for exc_reconstruct. */
static int
reaches(PyObject *a, PyObject *b, int depth)
{
    if (a == NULL || V(a)->kind != VK_EXC) {
        return 0;
    }
    if (a == b || depth > 64) {
        return 1;
    }
    return reaches(V(a)->u.exc.context, b, depth + 1) || reaches(V(a)->u.exc.cause, b, depth + 1);
}

/* Implicit chaining, as CPython does when an exception is set: the innermost exception
 * being handled (tx->exc_info) becomes exc's __context__, unless it is exc itself; a cycle
 * through the handled exception's context chain back to exc is cut first. */
static tr_status
chain_context(cdyn_tx *tx, PyObject *exc)
{
    Py_ssize_t n = PyList_GET_SIZE(tx->exc_info);
    PyObject *handled = n ? PyList_GET_ITEM(tx->exc_info, n - 1) : NULL, *o, *cut;
    int cycle;
    if (handled == NULL || handled == exc || cdyn_v_is_none(handled)) {
        return TR_OK;
    }
    if (V(handled)->kind != VK_EXC) {
        return cdyn_tx_unsupported(tx, "exception raised while handling %S", handled);
    }
    for (o = handled; V(o)->u.exc.context != NULL && V(o)->u.exc.context != exc;
         o = V(o)->u.exc.context) {
    }
    cut = V(o)->u.exc.context;   /* the link back to exc, or NULL */
    V(o)->u.exc.context = NULL;  /* (only while checking) */
    cycle = reaches(handled, exc, 0);   /* through a __cause__ or a long chain */
    V(o)->u.exc.context = cut;
    if (cycle) {
        return cdyn_tx_unsupported(tx, "exception chain with a cycle");
    }
    if (cut != NULL) {
        cdyn_tx_mutated(tx, o);
        Py_CLEAR(V(o)->u.exc.context);
    }
    cdyn_tx_mutated(tx, exc);
    Py_XSETREF(V(exc)->u.exc.context, Py_NewRef(handled));
    return TR_OK;
}

/* Set tx->exc to exc (borrowed EXC value), chained to the handled exception when chain. */
static tr_status
raise_exc(cdyn_tx *tx, PyObject *exc, int chain)
{
    tr_status st = chain ? chain_context(tx, exc) : TR_OK;
    if (st != TR_OK) {
        return st;
    }
    Py_XSETREF(tx->exc, Py_NewRef(exc));
    if (tx->reason == NULL) {
        tx->reason = PyUnicode_FromFormat("Observed exception: %s raised in traced code",
                                          ((PyTypeObject *)V(exc)->u.exc.type)->tp_name);
    }
    return TR_EXCEPTION;
}

tr_status
cdyn_tx_raise(cdyn_tx *tx, PyObject *type, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *exc = new_exc(type, args, nargs);
    tr_status st = exc ? raise_exc(tx, exc, 1) : TR_ERROR;
    Py_XDECREF(exc);
    return st;
}

tr_status
cdyn_tx_raise_pending(cdyn_tx *tx)
{
    static PyObject *const *const kinds[] = {&PyExc_TypeError, &PyExc_ValueError,
                                             &PyExc_IndexError, &PyExc_KeyError,
                                             &PyExc_AttributeError, &PyExc_ZeroDivisionError};
    PyObject *et = NULL, *ev = NULL, *tb = NULL, *eargs = NULL, *cargs[4] = {NULL};
    Py_ssize_t k = 0;
    tr_status st = TR_NOTIMPL;
    int known = 0;
    assert(PyErr_Occurred());
    for (size_t j = 0; j < sizeof(kinds) / sizeof(kinds[0]); j++) {
        known |= PyErr_ExceptionMatches(*kinds[j]);
    }
    if (!known) {
        PyErr_Clear();
        goto done;
    }
    PyErr_Fetch(&et, &ev, &tb);
    PyErr_NormalizeException(&et, &ev, &tb);
    eargs = ev ? PyObject_GetAttrString(ev, "args") : NULL;
    PyErr_Clear();
    if (eargs == NULL || !PyTuple_Check(eargs) || PyTuple_GET_SIZE(eargs) > 4 ||
        !PyType_Check(et) || ((PyTypeObject *)et)->tp_flags & Py_TPFLAGS_HEAPTYPE) {
        goto done;
    }
    for (k = 0; k < PyTuple_GET_SIZE(eargs); k++) {
        if (!cdyn_is_constant(PyTuple_GET_ITEM(eargs, k)) ||
            (cargs[k] = cdyn_value_const(PyTuple_GET_ITEM(eargs, k))) == NULL) {
            PyErr_Clear();
            goto done;
        }
    }
    Py_CLEAR(tx->reason);
    st = cdyn_tx_raise(tx, et, cargs, k);
done:
    for (Py_ssize_t i = 0; i < 4; i++) {
        Py_XDECREF(cargs[i]);
    }
    Py_XDECREF(et);
    Py_XDECREF(ev);
    Py_XDECREF(tb);
    Py_XDECREF(eargs);
    return st;
}

tr_status
cdyn_tx_raise_text(cdyn_tx *tx, PyObject *type, const char *fmt, ...)
{
    va_list va;
    PyObject *msg, *mv;
    tr_status st;
    va_start(va, fmt);
    msg = PyUnicode_FromFormatV(fmt, va);
    va_end(va);
    mv = msg ? cdyn_value_const_steal(msg) : NULL;
    st = mv ? cdyn_tx_raise(tx, type, &mv, 1) : TR_ERROR;
    Py_XDECREF(mv);
    return st;
}

static tr_status
raise_value(cdyn_tx *tx, PyObject *v, int chain)
{
    tr_status st = TR_OK;
    PyObject *exc = exc_instance(tx, v, &st);
    if (exc != NULL) {
        st = raise_exc(tx, exc, chain);
    }
    Py_XDECREF(exc);
    return st;
}

tr_status
cdyn_tx_raise_value(cdyn_tx *tx, PyObject *v)
{
    return raise_value(tx, v, 1);
}

tr_status
cdyn_tx_reraise(cdyn_tx *tx, PyObject *v)
{
    return raise_value(tx, v, 0);
}

tr_status
cdyn_tx_raise_from(cdyn_tx *tx, PyObject *v, PyObject *cause)
{
    tr_status st = TR_OK;
    PyObject *exc = NULL, *c = NULL;
    if (!cdyn_v_is_none(cause) && (c = exc_instance(tx, cause, &st)) == NULL) {
        return st;
    }
    if ((exc = exc_instance(tx, v, &st)) != NULL) {
        cdyn_tx_mutated(tx, exc);
        Py_XSETREF(V(exc)->u.exc.cause, c);   /* steals c */
        c = NULL;
        V(exc)->bits |= EXC_SUPPRESS;
        st = raise_exc(tx, exc, 1);
    }
    Py_XDECREF(c);
    Py_XDECREF(exc);
    return st;
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
    (void)fs;
    if (V(fn)->kind != VK_EXCTYPE || kwnames != NULL) {
        return cdyn_tx_unsupported(tx, "call of %S", fn);
    }
    *out = new_exc(V(fn)->u.obj.obj, args, nargs);
    return *out ? TR_OK : TR_ERROR;
}

/* An EXC value or None for a chain link (borrowed or NULL): a new reference. */
static PyObject *
link_or_none(PyObject *link)
{
    return link != NULL ? Py_NewRef(link) : cdyn_value_const(Py_None);
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
    } else if (cdyn_name_is(name, "__context__")) {
        *out = link_or_none(V(v)->u.exc.context);
    } else if (cdyn_name_is(name, "__cause__")) {
        *out = link_or_none(V(v)->u.exc.cause);
    } else if (cdyn_name_is(name, "__suppress_context__")) {
        *out = cdyn_value_bool((V(v)->bits & EXC_SUPPRESS) != 0);
    } else if (cdyn_name_is(name, "__traceback__")) {
        *out = cdyn_value_const(Py_None);   /* raised in the trace: no traceback */
    } else if (cdyn_name_is(name, "with_traceback")) {
        *out = cdyn_value_method(NULL, name, v);
    } else {
        return cdyn_tx_unsupported(tx, "attribute %U of an exception", name);
    }
    return *out ? TR_OK : TR_ERROR;
}

/* e.__context__ / e.__cause__ = an exception or None (setting __cause__ also sets
 * __suppress_context__, as BaseException does), e.__suppress_context__ = a constant. */
static tr_status
exc_setattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    int is_ctx = cdyn_name_is(name, "__context__"), is_cause = cdyn_name_is(name, "__cause__");
    int none = cdyn_v_is_none(value), truth = 0;
    if (V(v)->kind != VK_EXC) {
        return cdyn_tx_unsupported(tx, "attribute store on %S", v);
    }
    if ((is_ctx || is_cause) && !none && (V(value)->kind != VK_EXC || reaches(value, v, 0))) {
        return cdyn_tx_unsupported(tx, "exception %U set to %S", name, value);
    }
    if (!is_ctx && !is_cause) {
        PyObject *c = cdyn_v_real(value);
        if (!cdyn_name_is(name, "__suppress_context__") || c == NULL ||
            (truth = PyObject_IsTrue(c)) < 0) {
            PyErr_Clear();
            return cdyn_tx_unsupported(tx, "attribute %U of an exception", name);
        }
    }
    cdyn_tx_mutated(tx, v);
    if (is_ctx) {
        Py_XSETREF(V(v)->u.exc.context, none ? NULL : Py_NewRef(value));
    } else if (is_cause) {
        Py_XSETREF(V(v)->u.exc.cause, none ? NULL : Py_NewRef(value));
        V(v)->bits |= EXC_SUPPRESS;
    } else {
        V(v)->bits = truth ? (V(v)->bits | EXC_SUPPRESS) : (V(v)->bits & ~EXC_SUPPRESS);
    }
    return TR_OK;
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
    tr_status st = TR_OK;
    if (V(v)->kind == VK_EXCTYPE) {
        return TR_OK;
    }
    for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(V(v)->u.exc.args); i++) {
        st = cdyn_cg_collect(tx, cg, PyList_GET_ITEM(V(v)->u.exc.args, i));
    }
    if (st == TR_OK && V(v)->u.exc.context != NULL) {
        st = cdyn_cg_collect(tx, cg, V(v)->u.exc.context);
    }
    if (st == TR_OK && V(v)->u.exc.cause != NULL) {
        st = cdyn_cg_collect(tx, cg, V(v)->u.exc.cause);
    }
    return st;
}

static int
load_link(cdyn_cg *cg, PyObject *link)
{
    return link != NULL ? cdyn_cg_value(cg, link) : cdyn_cg_load_const(cg, Py_None);
}

/* _glue.exception_chain(type(*args), context, cause, suppress), built once per generated
 * code, so that every name of the exception (and its place in other chains) is one object. */
static int
exc_reconstruct(cdyn_cg *cg, PyObject *v)
{
    Py_ssize_t n;
    PyObject *chain = NULL;
    int r, e;
    if (V(v)->kind == VK_EXCTYPE) {
        return cdyn_reconstruct_obj(cg, v);
    }
    if ((r = cdyn_cg_memo_load(cg, v)) != 0) {
        return r < 0 ? -1 : 0;
    }
    n = PyList_GET_SIZE(V(v)->u.exc.args);
    chain = PyObject_GetAttrString(cdyn_G.glue, "exception_chain");
    e = chain == NULL || cdyn_cg_push_callable(cg, chain) < 0 ||
        cdyn_cg_push_callable(cg, V(v)->u.exc.type) < 0;
    Py_XDECREF(chain);
    for (Py_ssize_t i = 0; !e && i < n; i++) {
        e = cdyn_cg_value(cg, PyList_GET_ITEM(V(v)->u.exc.args, i)) < 0;
    }
    if (e || cdyn_cg_call(cg, (int)n) < 0 || load_link(cg, V(v)->u.exc.context) < 0 ||
        load_link(cg, V(v)->u.exc.cause) < 0 ||
        cdyn_cg_load_const(cg, (V(v)->bits & EXC_SUPPRESS) ? Py_True : Py_False) < 0 ||
        cdyn_cg_call(cg, 4) < 0) {
        return -1;
    }
    return cdyn_cg_memo_store(cg, v, "exc");
}

/* e.with_traceback(None) (unittest's assertRaises context does it): e itself, whose
 * traceback is None already. */
static tr_status
exc_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *name, PyObject *const *args,
                Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    (void)fs;
    if (V(v)->kind == VK_EXC && cdyn_name_is(name, "with_traceback") && nargs == 1 &&
        kwnames == NULL && cdyn_v_is_none(args[0])) {
        *out = Py_NewRef(v);
        return TR_OK;
    }
    return cdyn_tx_unsupported(tx, "method %U of %S", name, v);
}

const cdyn_vtable cdyn_exc_vt = {
    .name = "ExceptionVariable",
    .getattr = exc_getattr,
    .setattr = exc_setattr,
    .call = exc_call,
    .call_method = exc_call_method,
    .truth = exc_truth,
    .python_type = exc_python_type,
    .collect = exc_collect,
    .reconstruct = exc_reconstruct,
};
