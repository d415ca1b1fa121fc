/* values/misc.c: the NULL of the call protocol, Python modules, closure cells and opaque
 * callables; plus helpers shared by the families whose values hold a real object
 * (u.obj.obj): attribute reads through a source, rebuilding from a source or a constant. */
#include "../tx.h"
#include "../codegen.h"
#include "../trace_rules.h"

/* ---- shared by families of real objects ---------------------------------------------- */

PyTypeObject *
cdyn_python_type_obj(PyObject *v)
{
    return V(v)->u.obj.obj ? Py_TYPE(V(v)->u.obj.obj) : NULL;
}

int
cdyn_reconstruct_obj(cdyn_cg *cg, PyObject *v)
{
    if (V(v)->source != NULL) {
        return cdyn_cg_source(cg, V(v)->source);
    }
    assert(V(v)->u.obj.obj != NULL);
    return cdyn_cg_load_const(cg, V(v)->u.obj.obj);
}

tr_status
cdyn_collect_nothing(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    (void)tx;
    (void)cg;
    (void)v;
    return TR_OK;
}

/* ---- closure cells ----------------------------------------------------------------------
 * A CELL made in the trace (MAKE_CELL) holds its contents only. A CELL for a real cell (a
 * free variable of the top frame, a closure cell of an inlined real function) is one value
 * per real cell in a trace (tx->by_id), whatever function reaches it, so a store seen through
 * one closure is seen through the others; its source is the cell object itself and
 * u.cell.csrc the source its contents are read and guarded through. A store into it is a
 * side effect: the new contents are what later loads see, and the real cell gets the final
 * contents after the graph (EFF_SYNC, misc_writeback), before a graph break's code runs. */

tr_status
cdyn_cell_of_real(cdyn_tx *tx, PyObject *real, PyObject *source, PyObject *csrc, PyObject **out)
{
    PyObject *key = PyLong_FromVoidPtr(real), *seen = NULL, *own = NULL;
    tr_status st = TR_ERROR;
    if (key == NULL) {
        return TR_ERROR;
    }
    if (source == NULL && (source = own = cdyn_source_const(real, Py_None)) == NULL) {
        goto done;
    }
    seen = PyDict_GetItemWithError(tx->by_id, key);
    if (seen != NULL && V(seen)->kind == VK_CELL) {
        /* reached before under another name: the two paths stay one cell (SAME_OBJECT) */
        if (!cdyn_source_equal(source, V(seen)->source) &&
            cdyn_guards_add_same(tx->guards, source, V(seen)->source) < 0) {
            goto done;
        }
        if (V(seen)->u.cell.csrc == NULL && V(seen)->u.cell.contents == NULL && csrc != NULL) {
            V(seen)->u.cell.csrc = Py_NewRef(csrc);   /* read guarded from now on */
        }
        *out = Py_NewRef(seen);
        st = TR_OK;
        goto done;
    }
    if (PyErr_Occurred() || (*out = cdyn_value_alloc(VK_CELL, source)) == NULL) {
        goto done;
    }
    V(*out)->u.cell.real = Py_NewRef(real);
    V(*out)->u.cell.csrc = Py_XNewRef(csrc);
    if (PyDict_SetItem(tx->by_id, key, *out) < 0 || cdyn_tx_note_cyclic(tx, *out) < 0) {
        Py_CLEAR(*out);
        goto done;
    }
    st = TR_OK;
done:
    Py_DECREF(key);
    Py_XDECREF(own);
    return st;
}

tr_status
cdyn_cell_get(cdyn_tx *tx, PyObject *cell, PyObject **out)
{
    cdyn_value *c = V(cell);
    if (c->kind != VK_CELL) {
        return cdyn_tx_unsupported(tx, "LOAD_DEREF of a non-cell");
    }
    if (c->u.cell.contents == NULL && c->u.cell.real != NULL) {
        PyObject *contents = PyCell_GET(c->u.cell.real);
        tr_status st;
        if (contents == NULL) {
            return cdyn_tx_unsupported(tx, "empty closure cell");
        }
        /* read once: its guard holds the contents at entry (a later store does not
           change what was read) */
        st = cdyn_tx_wrap_real(tx, contents, c->u.cell.csrc, &c->u.cell.contents);
        if (st != TR_OK) {
            return st;
        }
    }
    if (c->u.cell.contents == NULL) {
        return cdyn_tx_unsupported(tx, "free variable referenced before assignment");
    }
    *out = c->u.cell.contents;
    return TR_OK;
}

tr_status
cdyn_cell_store(cdyn_tx *tx, PyObject *cell, PyObject *value)
{
    cdyn_value *c = V(cell);
    if (c->kind != VK_CELL) {
        return cdyn_tx_unsupported(tx, "STORE_DEREF to a non-cell");
    }
    cdyn_tx_mutated(tx, cell);   /* before the bit: a rollback clears both */
    if (c->u.cell.real != NULL && !(c->bits & CELL_STORED)) {
        if (cdyn_tx_effect(tx, EFF_SYNC, cell, NULL, Py_None) != TR_OK) {
            return TR_ERROR;
        }
        c->bits |= CELL_STORED;
    }
    Py_XSETREF(c->u.cell.contents, Py_NewRef(value));
    return TR_OK;
}

/* Truth of values that are always true (functions, modules, classes). */
static tr_status
truth_true(cdyn_tx *tx, PyObject *v, int *out)
{
    (void)tx;
    (void)v;
    *out = 1;
    return TR_OK;
}

/* obj.name raised (the exception pending; obj borrowed, src the attribute's source or NULL).
 * An AttributeError is raised in the traced code, so that a try/except around the read is
 * traced, where its absence is known to last: a Python function read through a source (a
 * HASATTR absent guard on src: setting the attribute later recompiles), or a static builtin
 * type (`type(fn).__exit__`: such types take no new attributes). Anything else is
 * unsupported, with the error's text. */
static tr_status
missing_attribute(cdyn_tx *tx, PyObject *obj, PyObject *name, PyObject *src)
{
    int fn = PyFunction_Check(obj) && src != NULL;
    int static_type = PyType_Check(obj) &&
                      !(((PyTypeObject *)obj)->tp_flags & Py_TPFLAGS_HEAPTYPE);
    if (!PyErr_ExceptionMatches(PyExc_AttributeError) || !(fn || static_type)) {
        return cdyn_tx_unsupported(tx, "attribute %U", name);
    }
    PyErr_Clear();
    if (fn) {
        if (cdyn_guards_add_hasattr(tx->guards, src, 0) < 0) {
            return TR_ERROR;
        }
        return cdyn_tx_raise_text(tx, PyExc_AttributeError,
                                  "'function' object has no attribute '%U'", name);
    }
    return cdyn_tx_raise_text(tx, PyExc_AttributeError, "type object '%s' has no attribute '%U'",
                              ((PyTypeObject *)obj)->tp_name, name);
}

/* getattr on a real object held by v. trusted: the attribute is wrapped without a source
 * (not guarded; torch's own modules and classes, as torch._dynamo trusts them) unless it
 * is a tensor or a Python function defined outside torch (a user's function patched in,
 * `mock.patch("torch.get_device_module", fn)`: guarded, so that the patch's end recompiles). */
tr_status
cdyn_getattr_real(cdyn_tx *tx, PyObject *v, PyObject *name, int trusted, PyObject **out)
{
    PyObject *obj = V(v)->u.obj.obj, *attr = NULL, *src = NULL;
    tr_status st = cdyn_tx_memo_attr(tx, v, name, &src, out);
    if (st != TR_OK || *out != NULL) {
        Py_XDECREF(src);
        return st;
    }
    attr = PyObject_GetAttr(obj, name);
    if (attr == NULL) {
        st = missing_attribute(tx, obj, name, src);
        Py_XDECREF(src);
        return st;
    }
    if (trusted && !cdyn_is_tensor(attr) &&
        !(PyFunction_Check(attr) && !cdyn_module_startswith(attr, "torch"))) {
        Py_CLEAR(src);
    }
    st = cdyn_tx_wrap_real(tx, attr, src, out);
    Py_DECREF(attr);
    Py_XDECREF(src);
    return st;
}

/* ---- Python modules ------------------------------------------------------------------ */

static tr_status
pymodule_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    const char *m = cdyn_pymodule_name(V(v)->u.obj.obj);
    int trusted = cdyn_startswith(m, "torch") || strcmp(m, "math") == 0 ||
                  strcmp(m, "operator") == 0 || strcmp(m, "builtins") == 0;
    if (!trusted || cdyn_tx_globals_stored(tx, PyModule_GetDict(V(v)->u.obj.obj))) {
        /* a global of that module stored by the trace (STORE_GLOBAL) */
        PyObject *key = cdyn_tx_global_key(tx, PyModule_GetDict(V(v)->u.obj.obj), name);
        PyObject *memo = key != NULL ? PyDict_GetItemWithError(tx->by_source, key) : NULL;
        Py_XDECREF(key);
        if (memo != NULL || PyErr_Occurred()) {
            *out = Py_XNewRef(memo);
            return memo != NULL ? TR_OK : TR_ERROR;
        }
    }
    return cdyn_getattr_real(tx, v, name, trusted, out);
}

static tr_status
opaque_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    return cdyn_getattr_real(tx, v, name, cdyn_module_startswith(V(v)->u.obj.obj, "torch"),
                             out);
}

/* ---- the family table ------------------------------------------------------------------- */

static tr_status
misc_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    switch (V(v)->kind) {
    case VK_PYMODULE:
        return pymodule_getattr(tx, v, name, out);
    case VK_OPAQUE:
        return opaque_getattr(tx, v, name, out);
    default:
        return cdyn_tx_unsupported(tx, "attribute %U of %S", name, v);
    }
}

int
cdyn_refuse_forbidden(PyObject *obj)
{
    PyObject *d = PyFunction_Check(obj) ? ((PyFunctionObject *)obj)->func_dict : NULL, *r;
    int forbidden =
        (PyType_Check(obj) &&
         _PyType_Lookup((PyTypeObject *)obj, cdyn_G.s_dynamo_forbidden) == Py_True) ||
        (d != NULL && PyDict_CheckExact(d) &&
         PyDict_GetItemWithError(d, cdyn_G.s_dynamo_forbidden) == Py_True);
    if (!forbidden) {
        return PyErr_Occurred() ? -1 : 0;
    }
    r = PyObject_CallMethod(cdyn_G.glue, "forbidden_call", "O", obj);   /* raises */
    Py_XDECREF(r);
    return -1;
}

/* The list Cls.__subclasses__() gives now, wrapped under the source
   operator.call(<the bound method's source>) so that the guards re-read it. */
static tr_status
subclasses_call(cdyn_tx *tx, PyObject *fn, PyObject **out)
{
    PyObject *call = PyObject_GetAttrString(cdyn_G.operator_mod, "call");
    PyObject *src = NULL, *result = NULL;
    tr_status st = TR_ERROR;
    if (call == NULL || (src = cdyn_source_call(call, V(fn)->source, "call")) == NULL ||
        (result = PyObject_CallNoArgs(V(fn)->u.obj.obj)) == NULL) {
        goto done;
    }
    st = cdyn_tx_wrap_real(tx, result, src, out);
done:
    Py_XDECREF(call);
    Py_XDECREF(src);
    Py_XDECREF(result);
    return st;
}

static tr_status
misc_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames, PyObject **out)
{
    PyObject *obj = V(fn)->u.obj.obj;
    if (V(fn)->kind != VK_OPAQUE) {
        return cdyn_tx_unsupported(tx, "call of %S", fn);
    }
    if (cdyn_refuse_forbidden(obj) < 0) {
        return TR_ERROR;
    }
    {
        /* a builtin with a CONSTANT trace rule (torch._C._get_tracing_state(), read by
           nn.Module._call_impl): folded, as inline.c folds Python functions */
        PyObject *value = NULL;
        int rule = cdyn_rules_for_callable(obj, &value);
        if (rule == CDYN_RULE_CONSTANT) {
            *out = cdyn_value_const(value);
            Py_DECREF(value);
            return *out ? TR_OK : TR_ERROR;
        }
        Py_XDECREF(value);
        if (rule < 0) {
            return TR_ERROR;
        }
        if (rule == CDYN_RULE_FOLD) {   /* a builtin folded on constants */
            int handled = 0;
            tr_status st = cdyn_tx_fold_call(tx, obj, args, nargs, kwnames, out, &handled);
            if (handled || st != TR_OK) {
                return st;
            }
        }
    }
    if (strcmp(Py_TYPE(obj)->tp_name, "method-wrapper") == 0 && nargs >= 1 && nargs <= 2 &&
        kwnames == NULL && !cdyn_v_is_none(args[0])) {
        /* f.__get__(obj[, type]) of a Python function: f bound to obj (what an LR
           scheduler's wrapper of optimizer.step does), inlined when called */
        PyObject *self = PyObject_GetAttrString(obj, "__self__"), *nm = NULL;
        int is_get = 0;
        if (self == NULL) {
            return TR_ERROR;
        }
        nm = PyObject_GetAttrString(obj, "__name__");
        is_get = nm != NULL && PyUnicode_Check(nm) && cdyn_name_is(nm, "__get__");
        Py_XDECREF(nm);
        PyErr_Clear();
        if (is_get && PyFunction_Check(self)) {
            *out = cdyn_value_method(self, ((PyFunctionObject *)self)->func_name, args[0]);
            Py_DECREF(self);
            return *out ? TR_OK : TR_ERROR;
        }
        if (is_get && (Py_IS_TYPE(self, &PyGetSetDescr_Type) ||
                       Py_IS_TYPE(self, &PyMemberDescr_Type))) {
            /* torch.Tensor.shape.__get__(x): the attribute x.shape, when x is of the
               descriptor's class */
            PyTypeObject *tp = cdyn_v_python_type(args[0]);
            if (tp != NULL && PyType_IsSubtype(tp, PyDescr_TYPE(self))) {
                tr_status st = cdyn_v_getattr(tx, args[0], PyDescr_NAME(self), out);
                Py_DECREF(self);
                return st;
            }
        }
        Py_DECREF(self);
    }
    if (PyCFunction_Check(obj) && nargs == 0 && kwnames == NULL && V(fn)->source != NULL &&
        PyType_Check(PyCFunction_GET_SELF(obj)) &&
        strcmp(((PyCFunctionObject *)obj)->m_ml->ml_name, "__subclasses__") == 0) {
        /* Cls.__subclasses__() of a class read from the frame: called now, the list guarded
           through the source call(<Cls.__subclasses__>) (a subclass defined later
           recompiles), as torch._dynamo's CallFunctionNoArgsSource */
        return subclasses_call(tx, fn, out);
    }
    if (PyWeakref_CheckRef(obj) && nargs == 0) {
        /* ref(): the referent, pinned by identity (the ref object is pinned by its source;
           a dead referent is not traced) */
        PyObject *referent = PyObject_CallNoArgs(obj);
        tr_status st;
        if (referent == NULL) {
            return TR_ERROR;
        }
        st = referent == Py_None ? cdyn_tx_unsupported(tx, "a dead weak reference")
                                 : cdyn_tx_wrap_fixed(tx, referent, Py_None, out);
        Py_DECREF(referent);
        return st;
    }
    if (cdyn_all_const(args, nargs) &&
        (cdyn_immutable_bound(obj) || cdyn_immutable_type_method(obj))) {
        /* a method of an immutable builtin constant ((4, 5).__getitem__(1), "a".upper), or
           one taken from its type (str.isalnum(c)): pure, called now */
        return cdyn_call_on_constants(tx, obj, args, nargs, kwnames, out);
    }
    if ((Py_IS_TYPE(obj, &PyMethodDescr_Type) || Py_IS_TYPE(obj, &PyWrapperDescr_Type)) &&
        nargs - (kwnames ? PyTuple_GET_SIZE(kwnames) : 0) >= 1) {
        /* torch.Tensor.add(t, ...), Tensor.__add__(t, 1) (what __torch_function__ receives
           as func): the method call t.add(...) when t is a tensor */
        PyTypeObject *owner = PyDescr_TYPE(obj), *tp = cdyn_v_python_type(args[0]);
        if (owner != &PyBaseObject_Type && tp != NULL && PyType_IsSubtype(tp, owner) &&
            PyType_IsSubtype((PyTypeObject *)cdyn_G.torch_tensor_type, owner)) {
            return cdyn_v_call_method(tx, fs, args[0], PyDescr_NAME(obj), args + 1, nargs - 1,
                                      kwnames, out);
        }
    }
    if (cdyn_module_startswith(obj, "torch._dynamo") || cdyn_module_startswith(obj, "cdynamo")) {
        return cdyn_tx_unsupported(tx, "call to %R (an explicit graph break or a compiler "
                                       "function)", obj);
    }
    return cdyn_tx_unsupported(tx, "call to %R", obj);
}

static tr_status
misc_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    if (V(v)->kind == VK_PYMODULE || V(v)->kind == VK_OPAQUE) {
        return truth_true(tx, v, out);
    }
    return cdyn_tx_unsupported(tx, "truth value of %S", v);
}

static tr_status
misc_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    if (V(v)->kind == VK_CELL) {
        /* a real cell is itself (its source); one stored into needs its final contents */
        if (V(v)->u.cell.real == NULL) {
            return cdyn_tx_unsupported(tx, "cannot rebuild %S", v);
        }
        if ((V(v)->bits & CELL_STORED) && V(v)->u.cell.contents != NULL) {
            return cdyn_cg_collect(tx, cg, V(v)->u.cell.contents);
        }
    }
    return cdyn_collect_nothing(tx, cg, v);
}

/* A real cell stored into by the trace (EFF_SYNC): cell.cell_contents = its final contents. */
static int
misc_writeback(cdyn_cg *cg, PyObject *v)
{
    int k = cdyn_cg_name(cg, cdyn_G.s_cell_contents);
    if (V(v)->kind != VK_CELL || V(v)->u.cell.real == NULL || V(v)->u.cell.contents == NULL) {
        PyErr_Format(PyExc_SystemError, "cdynamo: no write-back for %R", v);
        return -1;
    }
    return k < 0 || cdyn_cg_value(cg, V(v)->u.cell.contents) < 0 || cdyn_cg_value(cg, v) < 0 ||
                   cdyn_cg_emit(cg, STORE_ATTR, k) < 0
               ? -1
               : 0;
}

static int
misc_reconstruct(cdyn_cg *cg, PyObject *v)
{
    if (V(v)->kind == VK_NULL) {
        return cdyn_cg_emit(cg, PUSH_NULL, 0);
    }
    return cdyn_reconstruct_obj(cg, v);
}

static PyTypeObject *
misc_python_type(PyObject *v)
{
    if (V(v)->kind == VK_PYMODULE || V(v)->kind == VK_OPAQUE) {
        return cdyn_python_type_obj(v);
    }
    return NULL;
}

static tr_status
misc_graph_arg(cdyn_tx *tx, PyObject *v, PyObject **fake, PyObject **node)
{
    return cdyn_tx_unsupported(tx, "%S as an argument to a torch operation", v);
    (void)fake;
    (void)node;
}

const cdyn_vtable cdyn_misc_vt = {
    .name = "Misc",
    .getattr = misc_getattr,
    .call = misc_call,
    .truth = misc_truth,
    .graph_arg = misc_graph_arg,
    .python_type = misc_python_type,
    .collect = misc_collect,
    .reconstruct = misc_reconstruct,
    .writeback = misc_writeback,
};
