/* values/builtin.c: builtins (len, isinstance, zip, ...), builtin types (range, list,
 * dict, super, ...), and the pure functions of math / operator and methods of constants.
 *
 * A builtin with symbolic meaning has a handler in the table below, found by identity once
 * when the value is made (its index is kept in the value's bits). Any other pure builtin is
 * folded at trace time when every argument is a constant, and recorded in the graph when an
 * argument is a tensor (operator.add(x, y), abs(x)). */
#include "../tx.h"
#include "../codegen.h"
#include "user.h"

typedef tr_status (*builtin_fn)(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args,
                                Py_ssize_t npos, Py_ssize_t nkw, PyObject *kwnames,
                                PyObject **out);

static PyObject *handler_index;   /* dict: builtin object -> index into handlers[] */

/* ---- handlers ------------------------------------------------------------------------------ */

static tr_status
b_len(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
      PyObject *kwnames, PyObject **out)
{
    Py_ssize_t n = 0;
    tr_status st;
    (void)fn;
    (void)kwnames;
    if (npos != 1 || nkw != 0) {
        return cdyn_tx_unsupported(tx, "len() with %zd arguments", npos + nkw);
    }
    if (V(args[0])->kind == VK_TENSOR) {   /* x.size(0): symbolic with dynamic shapes */
        PyObject *name = PyUnicode_FromString("__len__");
        st = name ? cdyn_v_call_method(tx, fs, args[0], name, NULL, 0, NULL, out) : TR_ERROR;
        Py_XDECREF(name);
        return st;
    }
    if (V(args[0])->kind == VK_OBJECT && V(args[0])->source != NULL &&
        Py_IS_TYPE(V(args[0])->u.obj.obj, &PyDictProxy_Type)) {
        /* a read-only mapping read from the frame (a class __dict__, a signature's
           parameters): its length now, guarded */
        n = PyObject_Size(V(args[0])->u.obj.obj);
        if (n < 0 || cdyn_guards_add_len(tx->guards, V(args[0])->source, n) < 0) {
            return TR_ERROR;
        }
    }
    else if ((st = cdyn_v_len(tx, args[0], &n)) != TR_OK) {
        return st;
    }
    *out = cdyn_value_const_steal(PyLong_FromSsize_t(n));
    return *out ? TR_OK : TR_ERROR;
}

/* The class (or tuple of classes) argument of isinstance/issubclass as a real object. */
static tr_status
class_arg(cdyn_tx *tx, PyObject *c, PyObject **cls)
{
    PyObject *real = cdyn_v_real(c);
    *cls = NULL;
    if (real != NULL) {
        *cls = Py_NewRef(real);
        return TR_OK;
    }
    if (V(c)->kind == VK_TUPLE) {
        tr_status st = cdyn_tx_materialize(tx, c);
        Py_ssize_t n;
        if (st != TR_OK) {
            return st;
        }
        n = PyList_GET_SIZE(V(c)->u.seq.items);
        *cls = PyTuple_New(n);
        for (Py_ssize_t i = 0; *cls && i < n; i++) {
            PyObject *e = cdyn_v_real(PyList_GET_ITEM(V(c)->u.seq.items, i));
            if (e == NULL) {
                Py_CLEAR(*cls);
                return cdyn_tx_unsupported(tx, "isinstance class tuple");
            }
            PyTuple_SET_ITEM(*cls, i, Py_NewRef(e));
        }
        return *cls ? TR_OK : TR_ERROR;
    }
    return cdyn_tx_unsupported(tx, "isinstance class %S", c);
}

static tr_status
b_isinstance(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
             PyObject *kwnames, PyObject **out)
{
    PyObject *cls = NULL, *real;
    PyTypeObject *type = NULL;
    tr_status st;
    int r;
    (void)fs;
    (void)fn;
    (void)kwnames;
    if (npos != 2 || nkw != 0) {
        return cdyn_tx_unsupported(tx, "isinstance() with %zd arguments", npos + nkw);
    }
    real = V(args[0])->kind == VK_CONST || V(args[0])->kind == VK_NNMODULE ||
           V(args[0])->kind == VK_PYMODULE || V(args[0])->kind == VK_OBJECT ||
           V(args[0])->kind == VK_CLASS || V(args[0])->kind == VK_USERFN ||
           V(args[0])->kind == VK_BUILTIN || V(args[0])->kind == VK_TORCHFN ||
           V(args[0])->kind == VK_OPAQUE ? cdyn_v_real(args[0]) : NULL;
    if (real == NULL) {
        type = cdyn_v_python_type(args[0]);
        if (type == NULL) {
            return cdyn_tx_unsupported(tx, "isinstance of %S", args[0]);
        }
    }
    st = class_arg(tx, args[1], &cls);
    if (st != TR_OK) {
        return st;
    }
    r = real != NULL                    ? PyObject_IsInstance(real, cls)
        : V(args[0])->kind == VK_TENSOR ? cdyn_tensor_isinstance(args[0], cls)
                                        : PyObject_IsSubclass((PyObject *)type, cls);
    Py_DECREF(cls);
    if (r < 0) {
        return cdyn_tx_unsupported(tx, "isinstance failed");
    }
    *out = cdyn_value_bool(r);
    return *out ? TR_OK : TR_ERROR;
}

/* zip(a, b, ...) and enumerate(a[, start]): an iterator over tuples, unrolled now. */
static tr_status
zip_or_enumerate(cdyn_tx *tx, int is_zip, PyObject *const *args, Py_ssize_t npos,
                 Py_ssize_t nkw, PyObject **out)
{
    PyObject *lists[16], *res = NULL;
    Py_ssize_t n = -1, start = 0, nl = is_zip ? npos : 1, got = 0;
    tr_status st = TR_OK;
    if (nkw != 0 || nl > 16 || nl < 1 || (!is_zip && npos > 2)) {
        return TR_NOTIMPL;   /* zip(strict=), enumerate(start=): the polyfill */
    }
    for (Py_ssize_t i = 0; i < nl; i++) {
        if (cdyn_v_is_iterator(args[i])) {
            return TR_NOTIMPL;   /* over an iterator: the lazy polyfill consumes as eager */
        }
    }
    if (!is_zip && npos == 2) {
        if (V(args[1])->kind != VK_CONST || !PyLong_Check(V(args[1])->u.cnst.value)) {
            return cdyn_tx_unsupported(tx, "enumerate start");
        }
        start = PyLong_AsSsize_t(V(args[1])->u.cnst.value);
    }
    for (got = 0; got < nl && st == TR_OK; got++) {
        st = cdyn_v_unpack(tx, args[got], &lists[got]);
        if (st == TR_OK && (n < 0 || PyList_GET_SIZE(lists[got]) < n)) {
            n = PyList_GET_SIZE(lists[got]);
        }
    }
    if (st != TR_OK) {
        got--;
        goto done;
    }
    res = PyList_New(n);
    for (Py_ssize_t k = 0; res && k < n; k++) {
        PyObject *tup[17], *t = NULL;
        Py_ssize_t m = 0;
        if (!is_zip) {
            tup[m++] = cdyn_value_const_steal(PyLong_FromSsize_t(start + k));
        }
        for (Py_ssize_t i = 0; i < nl; i++) {
            tup[m++] = Py_NewRef(PyList_GET_ITEM(lists[i], k));
        }
        t = (tup[0] != NULL) ? cdyn_value_seq(VK_TUPLE, tup, m) : NULL;
        for (Py_ssize_t i = 0; i < m; i++) {
            Py_XDECREF(tup[i]);
        }
        if (t == NULL) {
            Py_CLEAR(res);
            break;
        }
        PyList_SET_ITEM(res, k, t);
    }
    st = res != NULL ? TR_OK : TR_ERROR;
    if (res != NULL) {
        *out = cdyn_value_iter_typed(res, is_zip ? &PyZip_Type : &PyEnum_Type);
        st = *out ? TR_OK : TR_ERROR;
    }
done:
    for (Py_ssize_t i = 0; i < got; i++) {
        Py_DECREF(lists[i]);
    }
    Py_XDECREF(res);
    return st;
}

static tr_status
b_zip(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
      PyObject *kwnames, PyObject **out)
{
    (void)fs;
    (void)fn;
    (void)kwnames;
    return zip_or_enumerate(tx, 1, args, npos, nkw, out);
}

static tr_status
b_enumerate(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
            PyObject *kwnames, PyObject **out)
{
    (void)fs;
    (void)fn;
    (void)kwnames;
    return zip_or_enumerate(tx, 0, args, npos, nkw, out);
}

static tr_status
b_iter(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
       PyObject *kwnames, PyObject **out)
{
    (void)fs;
    (void)fn;
    (void)kwnames;
    if (npos != 1 || nkw != 0) {
        return cdyn_tx_unsupported(tx, "iter() with a sentinel");
    }
    return cdyn_v_iter(tx, args[0], out);
}

static tr_status
b_next(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
       PyObject *kwnames, PyObject **out)
{
    tr_status st;
    (void)fs;
    (void)fn;
    (void)kwnames;
    if (npos < 1 || npos > 2 || nkw != 0 || !cdyn_v_is_iterator(args[0])) {
        return cdyn_tx_unsupported(tx, "next() of %S", npos ? args[0] : Py_None);
    }
    st = cdyn_v_next(tx, args[0], out);
    if (st == TR_OK && *out == NULL) {
        if (npos == 1) {   /* StopIteration (its value: a generator's return value) */
            PyObject *rv = cdyn_generator_retval(args[0]);
            int has = rv != NULL && !cdyn_v_is_none(rv);
            return cdyn_tx_raise(tx, PyExc_StopIteration, has ? &rv : NULL, has);
        }
        *out = Py_NewRef(args[1]);
    }
    return st;
}

/* After a read that raised in the trace (TR_EXCEPTION): when the exception is an
 * AttributeError it is dropped, *miss = 1 and TR_OK returned (as hasattr/getattr with a
 * default catch it); otherwise TR_EXCEPTION, the exception kept. */
static tr_status
attribute_error_caught(cdyn_tx *tx, int *miss)
{
    int is_attr = tx->exc != NULL && V(tx->exc)->kind == VK_EXC
                      ? PyObject_IsSubclass(V(tx->exc)->u.exc.type, PyExc_AttributeError)
                      : 0;
    *miss = 0;
    if (is_attr < 0) {
        PyErr_Clear();
    }
    if (is_attr != 1) {
        return TR_EXCEPTION;
    }
    Py_CLEAR(tx->exc);
    Py_CLEAR(tx->reason);
    *miss = 1;
    return TR_OK;
}

/* hasattr(obj, name) of the real object obj that v (with a source) stands for, under a
 * HASATTR guard on <source>.<name>: 1 / 0, -2 on error. */
static int
hasattr_guarded(cdyn_tx *tx, PyObject *v, PyObject *obj, PyObject *name)
{
    int r = PyObject_HasAttr(obj, name);
    PyObject *src = cdyn_source_attr(V(v)->source, name);
    if (src == NULL || cdyn_guards_add_hasattr(tx->guards, src, r) < 0) {
        Py_XDECREF(src);
        return -2;
    }
    Py_DECREF(src);
    return r;
}

/* 1/0 when attribute `name` of v exists / does not, with a HASATTR guard when the answer
 * depends on an object from the frame; -1 when unknown; -2 on error. */
static int
known_hasattr(cdyn_tx *tx, PyObject *v, PyObject *name)
{
    PyObject *obj = NULL;
    int r;
    switch (V(v)->kind) {
    case VK_TENSOR:                  /* its type's, or its own (instance dict) */
        return cdyn_tensor_hasattr(tx, v, name, NULL);
    case VK_PYMODULE: case VK_CONST: case VK_CLASS: case VK_USERFN: case VK_BUILTIN:
    case VK_TORCHFN:
        obj = cdyn_v_real(v);        /* fixed by EQUALS/ID/FUNCTION_MATCH */
        break;
    case VK_FUNCTION:   /* made in the trace: its type's attributes and what it stored */
        return cdyn_function_hasattr(tx, v, name);
    case VK_PARTIAL:
        /* functools.partial: its type's attributes (func, args, keywords, ...); a partial
           made in the trace has nothing in its instance dict, one of the frame is read */
        obj = (PyObject *)cdyn_v_python_type(v);
        if (obj == NULL) {
            return -1;
        }
        r = _PyType_Lookup((PyTypeObject *)obj, name) != NULL;   /* what instances see */
        if (r || V(v)->source == NULL) {
            return r;
        }
        obj = cdyn_tx_frame_object(tx, V(v)->source);   /* the partial itself */
        if (obj == NULL) {
            PyErr_Clear();
            return -1;
        }
        r = hasattr_guarded(tx, v, obj, name);
        Py_DECREF(obj);
        return r;
    case VK_OBJECT: case VK_NNMODULE:
        if (V(v)->source == NULL || (V(v)->bits & OBJ_MUTATED)) {
            return -1;
        }
        if (V(v)->kind == VK_OBJECT && (r = cdyn_user_hasattr_stored(tx, v, name)) != -1) {
            return r;                /* stored or deleted while tracing */
        }
        if (V(v)->kind == VK_NNMODULE) {
            /* an attribute the trace stored on the module (a replayed store, remembered
               under its source: module.gc = True, then hasattr / getattr(m, "gc", False)) */
            PyObject *src = cdyn_source_attr(V(v)->source, name);
            r = src ? PyDict_Contains(tx->by_source, cdyn_source_repr(src)) : -1;
            Py_XDECREF(src);
            if (r != 0) {
                return r < 0 ? -2 : 1;
            }
        }
        obj = cdyn_v_real(v);        /* guarded below: attributes may come and go */
        break;
    default: {
        /* a list, tuple, dict or set made or read in the trace: instances of these types
           have no attributes of their own, only their type's */
        PyTypeObject *t = cdyn_v_python_type(v);
        PyObject *d;
        if (V(v)->kind == VK_DICT && (r = cdyn_dict_hasattr(v, name)) != -1) {
            return r;   /* an OrderedDict made in the trace: its stored attributes too */
        }
        if (t == &PyList_Type || t == &PyTuple_Type || t == &PyDict_Type || t == &PySet_Type ||
            t == &PyFrozenSet_Type) {
            return _PyType_Lookup(t, name) != NULL;
        }
        /* a subclass of them whose instances have no __dict__ either (a named tuple: its
           fields and _fields are its class's), without __getattr__: its type's attribute,
           when reading it cannot raise (not a property) */
        if (t == NULL || t->tp_dictoffset != 0 ||
            !(PyType_IsSubtype(t, &PyTuple_Type) || PyType_IsSubtype(t, &PyList_Type)) ||
            _PyType_Lookup(t, cdyn_U.s_getattr) != NULL) {
            return -1;
        }
        d = _PyType_Lookup(t, name);
        return d == NULL ? 0 : PyObject_TypeCheck(d, &PyProperty_Type) ? -1 : 1;
    }
    }
    if ((V(v)->kind == VK_OBJECT || V(v)->kind == VK_NNMODULE)) {
        return hasattr_guarded(tx, v, obj, name);
    }
    return PyObject_HasAttr(obj, name);
}

static tr_status
b_getattr(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
          PyObject *kwnames, PyObject **out)
{
    PyObject *name;
    (void)fs;
    (void)fn;
    (void)kwnames;
    if ((npos != 2 && npos != 3) || nkw != 0 || V(args[1])->kind != VK_CONST ||
        !PyUnicode_Check(V(args[1])->u.cnst.value)) {
        return cdyn_tx_unsupported(tx, "getattr() with a non-constant name");
    }
    name = V(args[1])->u.cnst.value;
    if (npos == 3) {
        int has = known_hasattr(tx, args[0], name);
        if (has == -2) {
            return TR_ERROR;
        }
        if (has == -1) {   /* objects made while tracing */
            tr_status st = cdyn_user_hasattr(tx, args[0], name, &has);
            if (st == TR_UNSUPPORTED && V(args[0])->kind == VK_NEWOBJ) {
                /* a property: read it, AttributeError giving the default */
                PyObject *r = NULL, *saved = tx->reason;
                tx->reason = NULL;
                st = cdyn_v_getattr(tx, args[0], name, &r);
                if (st == TR_OK) {
                    Py_XDECREF(saved);
                    *out = r;
                    return TR_OK;
                }
                Py_XSETREF(tx->reason, saved);
                if (st == TR_EXCEPTION) {
                    int miss = 0;
                    st = attribute_error_caught(tx, &miss);
                    if (st == TR_OK && miss) {
                        *out = Py_NewRef(args[2]);
                        return TR_OK;
                    }
                }
            }
            if (st != TR_OK && st != TR_NOTIMPL) {
                return st;
            }
        }
        if (has == 0) {
            *out = Py_NewRef(args[2]);
            return TR_OK;
        }
    }
    return cdyn_v_getattr(tx, args[0], name, out);
}

/* hasattr of a user object by reading the attribute, as eager does (a property's getter
 * inlined): *out 1 when the read succeeds, 0 when it raises AttributeError (the exception
 * dropped); any other outcome is returned. The reason left by an earlier attempt is
 * replaced. */
static tr_status
hasattr_by_reading(cdyn_tx *tx, PyObject *v, PyObject *name, int *out)
{
    PyObject *r = NULL;
    tr_status st;
    Py_CLEAR(tx->reason);
    st = cdyn_v_getattr(tx, v, name, &r);
    if (st == TR_OK) {
        Py_DECREF(r);
        *out = 1;
    }
    else if (st == TR_EXCEPTION) {
        int miss = 0;
        st = attribute_error_caught(tx, &miss);
        *out = 0;
        (void)miss;
    }
    return st;
}

static tr_status
b_hasattr(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
          PyObject *kwnames, PyObject **out)
{
    int r;
    (void)fs;
    (void)fn;
    (void)kwnames;
    if (npos != 2 || nkw != 0 || V(args[1])->kind != VK_CONST ||
        !PyUnicode_Check(V(args[1])->u.cnst.value)) {
        return cdyn_tx_unsupported(tx, "hasattr() with a non-constant name");
    }
    r = known_hasattr(tx, args[0], V(args[1])->u.cnst.value);
    if (r == -2) {
        return TR_ERROR;
    }
    if (r < 0) {
        tr_status st = cdyn_user_hasattr(tx, args[0], V(args[1])->u.cnst.value, &r);
        if (st == TR_UNSUPPORTED && V(args[0])->kind == VK_NEWOBJ) {   /* a property */
            st = hasattr_by_reading(tx, args[0], V(args[1])->u.cnst.value, &r);
        }
        if (st != TR_NOTIMPL) {
            if (st == TR_OK) {
                *out = cdyn_value_bool(r);
                return *out ? TR_OK : TR_ERROR;
            }
            return st;
        }
        return cdyn_tx_unsupported(tx, "hasattr() on %S", args[0]);
    }
    *out = cdyn_value_bool(r);
    return *out ? TR_OK : TR_ERROR;
}

static tr_status
b_sum(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
      PyObject *kwnames, PyObject **out)
{
    PyObject *items = NULL, *acc = NULL;
    tr_status st;
    (void)fs;
    if (npos < 1 || npos > 2 || nkw != 0) {
        return TR_NOTIMPL;   /* sum(xs, start=...): the polyfill */
    }
    if (cdyn_all_const(args, npos)) {
        return cdyn_call_on_constants(tx, fn, args, npos, kwnames, out);
    }
    st = cdyn_v_unpack(tx, args[0], &items);
    if (st != TR_OK) {
        return st;
    }
    acc = npos == 2 ? Py_NewRef(args[1]) : cdyn_value_const_steal(PyLong_FromLong(0));
    for (Py_ssize_t i = 0; acc && i < PyList_GET_SIZE(items) && st == TR_OK; i++) {
        PyObject *r = NULL;
        st = cdyn_v_binop(tx, 0 /* add */, acc, PyList_GET_ITEM(items, i), &r);
        Py_DECREF(acc);
        acc = r;
    }
    Py_DECREF(items);
    if (st != TR_OK) {
        Py_XDECREF(acc);
        return st;
    }
    *out = acc;
    return acc ? TR_OK : TR_ERROR;
}

static tr_status
b_print(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
        PyObject *kwnames, PyObject **out)
{
    (void)fs;
    (void)fn;
    (void)args;
    (void)npos;
    (void)nkw;
    (void)kwnames;
    (void)out;
    return cdyn_tx_unsupported(tx, "call to print() (runs in Python)");
}

static tr_status
b_range_slice(cdyn_tx *tx, PyObject *fn, PyObject *const *args, Py_ssize_t npos,
              Py_ssize_t nkw, PyObject *kwnames, PyObject **out)
{
    if (cdyn_any_sym(args, npos + nkw)) {   /* slice(n): symbolic; range(n): specialised */
        return cdyn_sym_builtin(tx, fn, args, npos + nkw, kwnames, out);
    }
    if (!cdyn_all_const(args, npos + nkw)) {
        return cdyn_tx_unsupported(tx, "range/slice of non-constants");
    }
    return cdyn_call_on_constants(tx, fn, args, npos + nkw, kwnames, out);
}

static tr_status
b_range(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
        PyObject *kwnames, PyObject **out)
{
    (void)fs;
    return b_range_slice(tx, fn, args, npos, nkw, kwnames, out);
}

static tr_status
b_slice(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
        PyObject *kwnames, PyObject **out)
{
    (void)fs;
    return b_range_slice(tx, fn, args, npos, nkw, kwnames, out);
}

static tr_status
list_or_tuple(cdyn_tx *tx, cdyn_vkind kind, PyObject *const *args, Py_ssize_t npos,
              Py_ssize_t nkw, PyObject **out)
{
    PyObject *items = NULL;
    tr_status st;
    if (nkw != 0 || npos > 1) {
        return cdyn_tx_unsupported(tx, "list/tuple with keyword arguments");
    }
    if (npos == 0) {
        items = PyList_New(0);
        st = items ? TR_OK : TR_ERROR;
    }
    else {
        st = cdyn_v_unpack(tx, args[0], &items);
    }
    if (st != TR_OK) {
        return st;
    }
    *out = cdyn_value_seq_list(kind, items);
    Py_DECREF(items);
    return *out ? TR_OK : TR_ERROR;
}

static tr_status
b_list(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
       PyObject *kwnames, PyObject **out)
{
    (void)fs;
    (void)fn;
    (void)kwnames;
    return list_or_tuple(tx, VK_LIST, args, npos, nkw, out);
}

static tr_status
b_tuple(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
        PyObject *kwnames, PyObject **out)
{
    (void)fs;
    (void)fn;
    (void)kwnames;
    return list_or_tuple(tx, VK_TUPLE, args, npos, nkw, out);
}

/* torch.Size(seq) of ints and symbolic ints (torch.Size([x.size(0), 4])): a tuple value
 * rebuilt as a torch.Size. Constants fold (the pure-builtin path); TR_NOTIMPL otherwise. */
static tr_status
b_torch_size(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos,
             Py_ssize_t nkw, PyObject *kwnames, PyObject **out)
{
    PyObject *items = NULL;
    tr_status st;
    (void)fs;
    (void)kwnames;
    if (npos != 1 || nkw != 0 ||
        (V(args[0])->kind != VK_LIST && V(args[0])->kind != VK_TUPLE)) {
        return TR_NOTIMPL;
    }
    if ((st = cdyn_v_unpack(tx, args[0], &items)) != TR_OK) {
        return st;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *p = PyList_GET_ITEM(items, i);
        int is_int = V(p)->kind == VK_CONST ? PyLong_CheckExact(V(p)->u.cnst.value)
                                            : V(p)->kind == VK_SYMINT &&
                                                  cdyn_v_python_type(p) == &PyLong_Type;
        if (!is_int) {
            Py_DECREF(items);
            return TR_NOTIMPL;
        }
    }
    *out = cdyn_value_seq_list(VK_TUPLE, items);
    Py_DECREF(items);
    if (*out == NULL) {
        return TR_ERROR;
    }
    V(*out)->u.seq.nt_type = Py_NewRef(fn);
    return TR_OK;
}

/* dict / OrderedDict / defaultdict / Counter and set / frozenset (values/dict.c, set.c). */
static tr_status
b_dict(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
       PyObject *kwnames, PyObject **out)
{
    (void)fs;
    (void)nkw;
    return cdyn_dict_construct(tx, (PyTypeObject *)fn, args, npos, kwnames, out);
}

static tr_status
b_fromkeys(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos,
           Py_ssize_t nkw, PyObject *kwnames, PyObject **out)
{
    PyObject *self = PyCFunction_Check(fn) ? PyCFunction_GET_SELF(fn) : NULL;
    (void)fs;
    (void)nkw;
    if (self == NULL || !PyType_Check(self)) {
        return cdyn_tx_unsupported(tx, "fromkeys of %R", fn);
    }
    return cdyn_dict_fromkeys(tx, (PyTypeObject *)self, args, npos, kwnames, out);
}

static tr_status
b_set(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
      PyObject *kwnames, PyObject **out)
{
    (void)fs;
    (void)nkw;
    return cdyn_set_construct(tx, fn == (PyObject *)&PySet_Type ? VK_SET : VK_FROZENSET, args,
                              npos, kwnames, out);
}

/* super(cls, self): a proxy whose methods are inlined with self (values/user.c). */
static tr_status
b_super(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
        PyObject *kwnames, PyObject **out)
{
    (void)fs;
    (void)fn;
    (void)kwnames;
    if (npos != 2 || nkw != 0) {
        return cdyn_tx_unsupported(tx, "super() with %zd arguments", npos + nkw);
    }
    return cdyn_user_super(tx, args[0], args[1], out);
}

/* bool(x): the truth value of x (user objects' __bool__/__len__ inlined). */
static tr_status
b_bool(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
       PyObject *kwnames, PyObject **out)
{
    int truth = 0;
    tr_status st = TR_OK;
    (void)fs;
    (void)kwnames;
    if (npos > 1 || nkw != 0) {
        return cdyn_tx_unsupported(tx, "bool() with %zd arguments", npos + nkw);
    }
    if (npos == 1 && V(args[0])->kind == VK_SYMINT) {   /* a SymBool, not decided here */
        return cdyn_sym_builtin(tx, fn, args, 1, NULL, out);
    }
    if (npos == 1) {
        st = cdyn_v_truth(tx, args[0], &truth);
    }
    *out = st == TR_OK ? cdyn_value_bool(truth) : NULL;
    return st == TR_OK && *out == NULL ? TR_ERROR : st;
}

/* hash(x): folded for constants; a user object's Python __hash__ inlined (values/user.c). */
static tr_status
b_hash(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
       PyObject *kwnames, PyObject **out)
{
    (void)fs;
    if (npos != 1 || nkw != 0) {
        return cdyn_tx_unsupported(tx, "hash() with %zd arguments", npos + nkw);
    }
    if (V(args[0])->kind == VK_CONST) {
        return cdyn_call_on_constants(tx, fn, args, 1, kwnames, out);
    }
    return cdyn_user_hash(tx, args[0], out);
}

/* type(x): the class of a value (values/user.c). */
static tr_status
b_type(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
       PyObject *kwnames, PyObject **out)
{
    (void)fs;
    (void)fn;
    (void)kwnames;
    if (npos != 1 || nkw != 0) {
        return cdyn_tx_unsupported(tx, "type() with %zd arguments", npos + nkw);
    }
    return cdyn_user_type_of(tx, args[0], out);
}

/* issubclass(cls, classinfo) on classes known exactly (guarded where they were read). */
static tr_status
b_issubclass(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
             PyObject *kwnames, PyObject **out)
{
    PyObject *cls = NULL, *c = npos == 2 ? cdyn_v_real(args[0]) : NULL;
    tr_status st;
    int r;
    (void)fs;
    (void)fn;
    (void)kwnames;
    if (npos != 2 || nkw != 0 || c == NULL || !PyType_Check(c)) {
        return cdyn_tx_unsupported(tx, "issubclass() of these arguments");
    }
    st = class_arg(tx, args[1], &cls);
    if (st != TR_OK) {
        return st;
    }
    r = PyObject_IsSubclass(c, cls);
    Py_DECREF(cls);
    if (r < 0) {
        return cdyn_tx_unsupported(tx, "issubclass failed");
    }
    *out = cdyn_value_bool(r);
    return *out ? TR_OK : TR_ERROR;
}

/* functools.partial(func, *args, **kw) (values/function.c). */
static tr_status
b_partial(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
          PyObject *kwnames, PyObject **out)
{
    (void)fs;
    (void)fn;
    return cdyn_partial_new(tx, args, npos + nkw, kwnames, out);
}

/* 1 when the text of v's real object is fixed by what its kind guards (its identity):
 * classes, modules, functions guarded by identity (not a function guarded by its code only,
 * whose repr shows the address of whichever function object came), builtin functions not
 * bound to an object (a bound one shows its object's address). */
static int
text_fixed_kind(PyObject *v)
{
    PyObject *obj = V(v)->u.obj.obj, *self;
    switch (V(v)->kind) {
    case VK_CONST: case VK_CLASS: case VK_EXCTYPE: case VK_TORCHFN: case VK_PYMODULE:
        return 1;
    case VK_USERFN:
        return (V(v)->bits & FUNC_CODE_GUARDED) == 0;
    case VK_BUILTIN:
        self = PyCFunction_Check(obj) ? PyCFunction_GET_SELF(obj) : NULL;
        return PyType_Check(obj) || PyFunction_Check(obj) ||
               (PyCFunction_Check(obj) && (self == NULL || PyModule_Check(self)));
    default:
        return 0;
    }
}

/* *out: a new CONST str value with str(v) (use_repr 0) or repr(v) (1), where that text is
 * fixed by the trace: an object whose identity is guarded and whose type prints it with
 * C code (a class, a function, a constant), or any object whose type's __str__/__repr__ is
 * Python code, inlined (a result that is not a constant str is a break); the default repr
 * of an object made in the trace names its class. Anything else (a tensor's data, the
 * default repr of an object of the frame) is a break. */
tr_status
cdyn_text_of(cdyn_tx *tx, PyObject *v, int use_repr, PyObject **out)
{
    static PyObject *s_str, *s_repr, *object_str;
    PyTypeObject *type = cdyn_v_python_type(v);
    PyObject *real = cdyn_v_real(v), *meth = NULL, *r = NULL;
    tr_status st;
    if (s_str == NULL) {
        s_str = PyUnicode_InternFromString("__str__");
        s_repr = PyUnicode_InternFromString("__repr__");
        object_str = s_str ? _PyType_Lookup(&PyBaseObject_Type, s_str) : NULL;
        if (s_repr == NULL || object_str == NULL) {
            return TR_ERROR;
        }
    }
    if (type == NULL || V(v)->kind == VK_TENSOR) {
        return cdyn_tx_unsupported(tx, "%s() of %S", use_repr ? "repr" : "str", v);
    }
    meth = _PyType_Lookup(type, use_repr ? s_repr : s_str);
    if (!use_repr && meth == object_str) {   /* object.__str__ is repr() */
        use_repr = 1;
        meth = _PyType_Lookup(type, s_repr);
    }
    if (meth != NULL && PyFunction_Check(meth)) {   /* user code: inlined on v */
        st = cdyn_tx_inline_function(tx, meth, NULL, v, NULL, 0, NULL, &r);
        if (st != TR_OK) {
            return st;
        }
        if (V(r)->kind != VK_CONST || !PyUnicode_Check(V(r)->u.cnst.value)) {
            Py_DECREF(r);
            return cdyn_tx_unsupported(tx, "%s() of %S gave a non-constant",
                                       use_repr ? "repr" : "str", v);
        }
        *out = r;
        return TR_OK;
    }
    if (real == NULL && (st = cdyn_exc_text(tx, v, use_repr, out)) != TR_NOTIMPL) {
        return st;   /* an exception made in the trace, printed by C code */
    }
    if (real == NULL && (type == &PyList_Type || type == &PyTuple_Type || type == &PyDict_Type ||
                         type == &PySet_Type || type == &PyFrozenSet_Type ||
                         cdyn_is_deque_type((PyObject *)type) || cdyn_newobj_has_items(v) ||
                         V(v)->kind == VK_DICT)) {
        /* a container of constants made or read in the trace (a list/set/dict subclass's
           made in the trace included: its builtin repr): its text is its items' */
        PyObject *c = NULL;
        if (cdyn_tx_materialize(tx, v) != TR_OK) {
            return TR_ERROR;
        }
        c = cdyn_newobj_has_items(v) ? cdyn_newobj_items_copy(v) : cdyn_v_as_constant(v);
        if (c != NULL && V(v)->kind == VK_DICT && Py_TYPE(c) != type) {
            Py_CLEAR(c);   /* (an OrderedDict / Counter prints with its type's name) */
        }
        if (c != NULL) {
            r = use_repr ? PyObject_Repr(c) : PyObject_Str(c);
            Py_DECREF(c);
            if (r == NULL) {
                return TR_ERROR;
            }
            *out = cdyn_value_const_steal(r);
            return *out ? TR_OK : TR_ERROR;
        }
        if (PyErr_Occurred()) {
            return TR_ERROR;
        }
    }
    if (real == NULL && V(v)->kind == VK_NEWOBJ && use_repr &&
        meth == _PyType_Lookup(&PyBaseObject_Type, s_repr)) {
        /* object.__repr__ of an object made in the trace: its class's name, at the address
           of the value standing for it (the real object does not exist yet; eager's address
           differs on every call anyway), as torch._dynamo prints it */
        PyObject *mod = PyObject_GetAttrString((PyObject *)type, "__module__");
        PyObject *qual = mod ? PyObject_GetAttrString((PyObject *)type, "__qualname__") : NULL;
        if (qual != NULL && PyUnicode_Check(mod) && !cdyn_name_is(mod, "builtins")) {
            r = PyUnicode_FromFormat("<%U.%U object at %p>", mod, qual, (void *)v);
        }
        else if (qual != NULL) {
            r = PyUnicode_FromFormat("<%S object at %p>", qual, (void *)v);
        }
        Py_XDECREF(mod);
        Py_XDECREF(qual);
        *out = r ? cdyn_value_const_steal(r) : NULL;
        return *out ? TR_OK : TR_ERROR;
    }
    if (real == NULL || !text_fixed_kind(v)) {
        return cdyn_tx_unsupported(tx, "%s() of %S", use_repr ? "repr" : "str", v);
    }
    r = use_repr ? PyObject_Repr(real) : PyObject_Str(real);
    if (r == NULL) {
        PyErr_Clear();
        return cdyn_tx_unsupported(tx, "%s() of %S failed", use_repr ? "repr" : "str", v);
    }
    *out = cdyn_value_const_steal(r);
    return *out ? TR_OK : TR_ERROR;
}

/* str(x) / repr(x): folded where the text is fixed (text_of); str(b, encoding) and other
 * forms on constants folded too. */
static tr_status
b_str_repr(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos,
           Py_ssize_t nkw, PyObject *kwnames, PyObject **out)
{
    if (cdyn_all_const(args, npos + nkw)) {
        return cdyn_call_on_constants(tx, fn, args, npos + nkw, kwnames, out);
    }
    if (npos != 1 || nkw != 0) {
        return cdyn_tx_unsupported(tx, "call to %R with non-constant arguments", fn);
    }
    (void)fs;
    return cdyn_text_of(tx, args[0], fn != (PyObject *)&PyUnicode_Type, out);
}

/* callable(x): from x's type (guarded wherever x came from), as torch._dynamo. */
static tr_status
b_callable(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos,
           Py_ssize_t nkw, PyObject *kwnames, PyObject **out)
{
    PyTypeObject *type = npos == 1 && nkw == 0 ? cdyn_v_python_type(args[0]) : NULL;
    (void)fs;
    (void)fn;
    (void)kwnames;
    if (type == NULL && npos == 1 && nkw == 0 &&
        (V(args[0])->kind == VK_METHOD || V(args[0])->kind == VK_USERFN ||
         V(args[0])->kind == VK_FUNCTION || V(args[0])->kind == VK_PARTIAL ||
         V(args[0])->kind == VK_TORCHFN || V(args[0])->kind == VK_CLASS)) {
        *out = cdyn_value_bool(1);   /* a bound method (t.to), a function, a class */
        return *out ? TR_OK : TR_ERROR;
    }
    if (type == NULL) {
        return cdyn_tx_unsupported(tx, "callable() of %S", npos ? args[0] : Py_None);
    }
    *out = cdyn_value_bool(type->tp_call != NULL);
    return *out ? TR_OK : TR_ERROR;
}

/* id(x) of an object read from the frame (it has a source): its id now, a constant of the
 * trace, the object pinned by an ID_MATCH guard (as torch._dynamo). An nn.Module of the
 * frame read through trusted state (a closure cell of torch's own function:
 * torch.nn.utils.parametrize's caching getter keys its cache by id(module)) has no source:
 * its id is a constant too, the module kept alive by the guard set (an ID_MATCH on a
 * constant source). id() of anything else (a tensor, an object made in the trace) is a
 * graph break. */
static tr_status
b_id(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos,
     Py_ssize_t nkw, PyObject *kwnames, PyObject **out)
{
    PyObject *src = npos == 1 && nkw == 0 ? Py_XNewRef(V(args[0])->source) : NULL;
    PyObject *real = npos == 1 && nkw == 0 && V(args[0])->kind != VK_TENSOR
                         ? cdyn_v_real(args[0])
                         : NULL;
    tr_status st = TR_ERROR;
    (void)fs;
    (void)fn;
    (void)kwnames;
    if (real != NULL && src == NULL && V(args[0])->kind == VK_NNMODULE &&
        (src = cdyn_source_const(real, Py_None)) == NULL) {
        return TR_ERROR;
    }
    if (real == NULL || src == NULL) {
        st = cdyn_tx_unsupported(tx, "id() of %S", npos ? args[0] : Py_None);
        goto done;
    }
    if (cdyn_guards_add_id(tx->guards, src, real, 0) < 0) {
        goto done;
    }
    *out = cdyn_value_const_steal(PyLong_FromVoidPtr(real));
    st = *out ? TR_OK : TR_ERROR;
done:
    Py_XDECREF(src);
    return st;
}

/* environ_read(env, key) of cdynamo.polyfills.os: the environment variable key (a constant
 * str) of env (os.environ itself, guarded by identity) read now, a constant of the trace
 * guarded by GLOBAL_STATE os.getenv(key) == value (None when unset). */
static tr_status
b_environ_read(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos,
               Py_ssize_t nkw, PyObject *kwnames, PyObject **out)
{
    static PyObject *environ, *getenv;
    PyObject *env = npos == 2 ? cdyn_v_real(args[0]) : NULL, *key, *value = NULL, *targs = NULL;
    tr_status st = TR_ERROR;
    (void)fs;
    (void)fn;
    (void)kwnames;
    if (environ == NULL) {
        PyObject *os = PyImport_ImportModule("os");
        environ = os ? PyObject_GetAttrString(os, "environ") : NULL;
        getenv = os ? PyObject_GetAttrString(os, "getenv") : NULL;
        Py_XDECREF(os);
        if (environ == NULL || getenv == NULL) {
            Py_CLEAR(environ);
            return TR_ERROR;
        }
    }
    if (npos != 2 || nkw != 0 || env == NULL || V(args[1])->kind != VK_CONST ||
        !PyUnicode_CheckExact(V(args[1])->u.cnst.value)) {
        return cdyn_tx_unsupported(tx, "read of an environment variable with a non-constant "
                                   "name");
    }
    if (env != environ) {   /* another _Environ (os.environb) or a replaced os.environ */
        return cdyn_tx_unsupported(tx, "read of %S (not os.environ)", args[0]);
    }
    if (V(args[0])->source != NULL &&
        cdyn_guards_add_id(tx->guards, V(args[0])->source, env, 0) < 0) {
        return TR_ERROR;
    }
    key = V(args[1])->u.cnst.value;
    value = PyObject_CallOneArg(getenv, key);
    targs = value ? PyTuple_Pack(1, key) : NULL;
    if (targs != NULL && (value == Py_None || PyUnicode_CheckExact(value)) &&
        cdyn_guards_add_call(tx->guards, getenv, targs, value) == 0) {
        *out = cdyn_value_const(value);
        st = *out ? TR_OK : TR_ERROR;
    }
    else if (targs != NULL && !PyErr_Occurred()) {
        st = cdyn_tx_unsupported(tx, "os.getenv(%R) is not a str", key);
    }
    Py_XDECREF(value);
    Py_XDECREF(targs);
    return st;
}

/* The real callable whose signature v's signature is, when it is fixed by the trace's
 * guards (a function, class, builtin, module or a method bound to any self), or NULL.
 * *bound: 1 for a method (its first parameter is dropped). Borrowed. */
static PyObject *
signature_target(PyObject *v, int *bound)
{
    *bound = 0;
    switch (V(v)->kind) {
    case VK_USERFN: case VK_BUILTIN: case VK_TORCHFN: case VK_CLASS: case VK_EXCTYPE:
        return V(v)->u.obj.obj;
    case VK_METHOD:
        *bound = 1;
        return V(v)->u.method.func != NULL && PyFunction_Check(V(v)->u.method.func)
                   ? V(v)->u.method.func : NULL;
    default:
        return NULL;
    }
}

/* inspect.signature(fn): computed now for a callable the trace has fixed (signature_target),
 * a constant object of the trace (its parameters a dict of constants). Keyword arguments
 * must be constants. */
static tr_status
b_signature(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos,
            Py_ssize_t nkw, PyObject *kwnames, PyObject **out)
{
    PyObject *target, *call[8], *sig = NULL, *tmp = NULL;
    int bound = 0;
    tr_status st;
    (void)fs;
    target = npos == 1 && nkw < 7 && cdyn_all_const(args + 1, nkw) ? signature_target(args[0], &bound)
                                                                  : NULL;
    if (target == NULL) {
        return cdyn_tx_unsupported(tx, "inspect.signature of %S", npos ? args[0] : Py_None);
    }
    if (bound) {   /* a method: bound to a stand-in self, whose identity does not matter */
        tmp = PyMethod_New(target, Py_None);
        if (tmp == NULL) {
            return TR_ERROR;
        }
        target = tmp;
    }
    call[0] = target;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        call[1 + i] = V(args[1 + i])->u.cnst.value;
    }
    sig = PyObject_Vectorcall(fn, call, 1, kwnames);
    Py_XDECREF(tmp);
    if (sig == NULL) {
        PyErr_Clear();
        return cdyn_tx_unsupported(tx, "inspect.signature of %S failed", args[0]);
    }
    st = cdyn_tx_wrap_fixed(tx, sig, Py_None, out);
    Py_DECREF(sig);
    return st;
}

/* setattr(obj, name, value) / delattr(obj, name) with a constant name: on user instances the
 * protocol of values/userobj.c (the type's __setattr__/__delattr__ inlined, object's recorded
 * as side effects); setattr on other values as STORE_ATTR through their family. */
static tr_status
b_setattr(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos,
          Py_ssize_t nkw, PyObject *kwnames, PyObject **out)
{
    int del = PyCFunction_Check(fn) &&
              strcmp(((PyCFunctionObject *)fn)->m_ml->ml_name, "delattr") == 0;
    tr_status st;
    (void)fs;
    (void)kwnames;
    if (npos != (del ? 2 : 3) || nkw != 0 || V(args[1])->kind != VK_CONST ||
        !PyUnicode_CheckExact(V(args[1])->u.cnst.value)) {
        return cdyn_tx_unsupported(tx, "%R with these arguments", fn);
    }
    st = cdyn_user_setattr_builtin(tx, args[0], V(args[1])->u.cnst.value,
                                   del ? NULL : args[2]);
    if (st == TR_NOTIMPL && !del) {
        st = cdyn_v_setattr(tx, args[0], V(args[1])->u.cnst.value, args[2]);
    }
    else if (st == TR_NOTIMPL) {
        return cdyn_tx_unsupported(tx, "%R on %S", fn, args[0]);
    }
    *out = st == TR_OK ? cdyn_value_const(Py_None) : NULL;
    return st == TR_OK && *out == NULL ? TR_ERROR : st;
}

/* sys.exception(): the exception the traced code is handling (tx->exc_info, innermost
 * last), None outside handlers (Python 3.13's contextlib.ExitStack.__exit__ reads it). */
static tr_status
b_exception(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos,
            Py_ssize_t nkw, PyObject *kwnames, PyObject **out)
{
    Py_ssize_t n = PyList_GET_SIZE(tx->exc_info);
    (void)fs;
    (void)args;
    (void)kwnames;
    if (npos + nkw != 0) {
        return cdyn_tx_unsupported(tx, "%R with arguments", fn);
    }
    *out = n == 0 ? cdyn_value_const(Py_None) : Py_NewRef(PyList_GET_ITEM(tx->exc_info, n - 1));
    return *out ? TR_OK : TR_ERROR;
}

/* sys.exc_info(): (type, value, traceback) of the exception the traced code is handling
 * (tx->exc_info, innermost last), (None, None, None) outside handlers. The traceback of an
 * exception raised in the traced code is None (as torch._dynamo gives it). */
static tr_status
b_exc_info(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos,
           Py_ssize_t nkw, PyObject *kwnames, PyObject **out)
{
    Py_ssize_t n = PyList_GET_SIZE(tx->exc_info);
    PyObject *parts[3] = {NULL, NULL, NULL}, *exc, *name = NULL;
    PyTypeObject *t;
    tr_status st = TR_ERROR;
    (void)fs;
    (void)args;
    (void)kwnames;
    if (npos + nkw != 0) {
        return cdyn_tx_unsupported(tx, "%R with arguments", fn);
    }
    if (n == 0) {
        PyObject *none = cdyn_value_const(Py_None);
        *out = none ? cdyn_value_seq(VK_TUPLE, (PyObject *[]){none, none, none}, 3) : NULL;
        Py_XDECREF(none);
        return *out ? TR_OK : TR_ERROR;
    }
    exc = PyList_GET_ITEM(tx->exc_info, n - 1);
    t = cdyn_v_python_type(exc);
    if (t == NULL) {
        return cdyn_tx_unsupported(tx, "sys.exc_info() of %S", exc);
    }
    name = PyUnicode_InternFromString("__traceback__");
    st = name ? cdyn_tx_wrap_fixed(tx, (PyObject *)t, Py_None, &parts[0]) : TR_ERROR;
    if (st == TR_OK && cdyn_v_real(exc) == NULL) {
        /* raised in the traced code: no traceback is made while tracing (None, as
           torch._dynamo gives it) */
        parts[2] = cdyn_value_const(Py_None);
        st = parts[2] ? TR_OK : TR_ERROR;
    }
    else if (st == TR_OK) {
        st = cdyn_v_getattr(tx, exc, name, &parts[2]);
    }
    if (st == TR_OK) {
        parts[1] = Py_NewRef(exc);
        *out = cdyn_value_seq(VK_TUPLE, parts, 3);
        st = *out ? TR_OK : TR_ERROR;
    }
    for (int i = 0; i < 3; i++) {
        Py_XDECREF(parts[i]);
    }
    Py_XDECREF(name);
    return st;
}

/* The handler table: (module, name) -> handler; resolved to objects at init. A handler
 * returns TR_NOTIMPL (having changed nothing) to leave the call to the polyfill. */
static const struct {
    const char *module, *name;
    builtin_fn fn;
} handlers[] = {
    {"builtins", "len", b_len},
    {"builtins", "isinstance", b_isinstance},
    {"builtins", "zip", b_zip},
    {"builtins", "enumerate", b_enumerate},
    {"builtins", "iter", b_iter},
    {"builtins", "next", b_next},
    {"builtins", "getattr", b_getattr},
    {"builtins", "hasattr", b_hasattr},
    {"builtins", "sum", b_sum},
    {"builtins", "print", b_print},
    {"builtins", "range", b_range},
    {"builtins", "slice", b_slice},
    {"builtins", "list", b_list},
    {"builtins", "tuple", b_tuple},
    {"builtins", "dict", b_dict},
    {"collections", "OrderedDict", b_dict},
    {"collections", "defaultdict", b_dict},
    {"collections", "Counter", b_dict},
    {"builtins", "dict.fromkeys", b_fromkeys},
    {"collections", "OrderedDict.fromkeys", b_fromkeys},
    {"collections", "defaultdict.fromkeys", b_fromkeys},
    {"builtins", "set", b_set},
    {"builtins", "frozenset", b_set},
    {"builtins", "super", b_super},
    {"functools", "partial", b_partial},
    {"builtins", "type", b_type},
    {"builtins", "bool", b_bool},
    {"builtins", "hash", b_hash},
    {"builtins", "issubclass", b_issubclass},
    {"builtins", "str", b_str_repr},
    {"builtins", "repr", b_str_repr},
    {"builtins", "callable", b_callable},
    {"builtins", "id", b_id},
    {"sys", "exc_info", b_exc_info},
    {"sys", "exception", b_exception},
    {"cdynamo.polyfills.os", "environ_read", b_environ_read},
    {"inspect", "signature", b_signature},
    {"builtins", "setattr", b_setattr},
    {"builtins", "delattr", b_setattr},
    {"torch", "Size", b_torch_size},
    {NULL, NULL, NULL},
};

/* ---- pure builtins ------------------------------------------------------------------------ */

/* Builtins evaluated at trace time when every argument is a constant. */
static int
is_pure_builtin(PyObject *obj)
{
    if (PyType_Check(obj)) {
        return obj == (PyObject *)&PyLong_Type || obj == (PyObject *)&PyFloat_Type ||
               obj == (PyObject *)&PyBool_Type || obj == (PyObject *)&PyUnicode_Type ||
               obj == (PyObject *)&PyTuple_Type || obj == (PyObject *)&PyComplex_Type ||
               obj == (PyObject *)&PySlice_Type || obj == (PyObject *)&PyRange_Type ||
               obj == cdyn_G.torch_size_type || obj == cdyn_G.torch_device_type;
    }
    if (PyCFunction_Check(obj)) {
        PyObject *self = PyCFunction_GET_SELF(obj);
        if (self != NULL && PyModule_Check(self)) {
            const char *m = cdyn_pymodule_name(self);
            if (strcmp(m, "builtins") == 0) {
                const char *n = ((PyCFunctionObject *)obj)->m_ml->ml_name;
                /* print, input, open, exec, eval, ... have effects: not pure. */
                static const char *const ok[] = {"abs", "min", "max", "sum", "round", "divmod",
                                                 "pow", "len", "sorted", "any", "all", "hash",
                                                 "repr", "format", "chr", "ord", "bin", "hex",
                                                 "oct", NULL};
                for (int i = 0; ok[i]; i++) {
                    if (strcmp(n, ok[i]) == 0) {
                        return 1;
                    }
                }
                return 0;
            }
            return strcmp(m, "math") == 0 || strcmp(m, "_operator") == 0 ||
                   strcmp(m, "operator") == 0;
        }
        /* a method of a constant (e.g. "a,b".split) */
        return self != NULL && cdyn_is_constant(self);
    }
    return 0;
}

/* A method taken from a container type (dict.get, set.union, list.append, set.__or__,
 * OrderedDict.move_to_end): 1 with its type and name. */
static int
container_descr(PyObject *obj, PyTypeObject **type, PyObject **name)
{
    PyTypeObject *t;
    if (!Py_IS_TYPE(obj, &PyMethodDescr_Type) && !Py_IS_TYPE(obj, &PyWrapperDescr_Type)) {
        return 0;
    }
    t = ((PyDescrObject *)obj)->d_type;
    if (t != &PyList_Type && t != &PyTuple_Type && t != &PySet_Type && t != &PyFrozenSet_Type &&
        !cdyn_is_dict_type(t)) {
        return 0;
    }
    *type = t;
    *name = ((PyDescrObject *)obj)->d_name;
    return 1;
}

/* 1 when dict.<name>(v) on v, a dict-family value of a dict subclass that overrides name
 * (an OrderedDict: its items/keys/values/pop/... ), acts as v's own method: the reads and
 * item changes that give the same result on the entries the value keeps in order (not
 * copy, popitem, fromkeys: their results' type or order are dict's own). */
static int
dict_method_on_dict_value(PyTypeObject *type, PyObject *name, PyObject *v)
{
    static const char *const same[] = {"keys", "values", "items", "get", "pop", "setdefault",
                                       "update", "clear", "__contains__", "__getitem__",
                                       "__len__", "__iter__", "__setitem__", "__delitem__",
                                       "__eq__", "__ne__", "__or__", "__ior__", NULL};
    return type == &PyDict_Type && V(v)->vt == &cdyn_dict_vt && V(v)->kind == VK_DICT &&
           cdyn_name_in(name, same);
}

/* type.method(self, *args) for a container method (dict.get(d, k), set.__or__(a, b)): the
 * method called on self, when self is a container value whose type does not override it. */
static tr_status
call_container_descr(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyTypeObject *type, PyObject *name,
                     PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyTypeObject *st;
    Py_ssize_t npos = nargs - (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    int op, truth = 0;
    tr_status r;
    if (npos >= 1 && cdyn_all_const(args, nargs)) {
        /* on a constant tuple / frozenset (immutable): folded */
        return cdyn_call_on_constants(tx, fn, args, nargs, kwnames, out);
    }
    if (type == &PyDict_Type && npos >= 1 &&
        (r = cdyn_dict_base_method(tx, args[0], name, args + 1, nargs - 1, kwnames, out)) !=
            TR_NOTIMPL) {
        return r;   /* dict.copy(od), dict.popitem(od): dict's own method on an OrderedDict */
    }
    if ((type == &PyTuple_Type || type == &PyList_Type) && npos >= 1 && kwnames == NULL &&
        (r = cdyn_seq_base_dunder(tx, args[0], name, args + 1, nargs - 1, out)) != TR_NOTIMPL) {
        return r;   /* tuple.__getitem__(t) inside the __getitem__ of t's named-tuple class */
    }
    if (npos < 1 || (st = cdyn_v_python_type(args[0])) == NULL || !PyType_IsSubtype(st, type) ||
        (_PyType_Lookup(st, name) != fn && !dict_method_on_dict_value(type, name, args[0])) ||
        (V(args[0])->vt != &cdyn_dict_vt && V(args[0])->vt != &cdyn_set_vt &&
         V(args[0])->vt != &cdyn_seq_vt)) {
        return cdyn_tx_unsupported(tx, "%s.%U on %S", type->tp_name, name,
                                   npos ? args[0] : Py_None);
    }
    if (kwnames == NULL && nargs == 2 && (op = cdyn_dunder_binop(name)) >= 0) {
        return cdyn_v_binop(tx, op, args[0], args[1], out);
    }
    if (kwnames == NULL && nargs == 2 && (op = cdyn_dunder_compare(name)) >= 0) {
        return cdyn_v_compare(tx, op, args[0], args[1], out);
    }
    if (kwnames == NULL && nargs == 2 && cdyn_name_is(name, "__getitem__")) {
        return cdyn_v_subscr(tx, args[0], args[1], out);
    }
    if (kwnames == NULL && ((nargs == 3 && cdyn_name_is(name, "__setitem__")) ||
                            (nargs == 2 && cdyn_name_is(name, "__delitem__")))) {
        r = nargs == 3 ? cdyn_v_store_subscr(tx, args[0], args[1], args[2])
                       : cdyn_v_delete_subscr(tx, args[0], args[1]);
        *out = r == TR_OK ? cdyn_value_const(Py_None) : NULL;
        return r == TR_OK && *out == NULL ? TR_ERROR : r;
    }
    if (kwnames == NULL && nargs == 2 && cdyn_name_is(name, "__contains__")) {
        r = cdyn_v_contains(tx, args[0], args[1], &truth);
        *out = r == TR_OK ? cdyn_value_bool(truth) : NULL;
        return r == TR_OK && *out == NULL ? TR_ERROR : r;
    }
    if (kwnames == NULL && nargs == 1 && cdyn_name_is(name, "__iter__")) {
        return cdyn_v_iter(tx, args[0], out);
    }
    if (kwnames == NULL && nargs == 1 && cdyn_name_is(name, "__len__")) {
        Py_ssize_t n = 0;
        r = cdyn_v_len(tx, args[0], &n);
        *out = r == TR_OK ? cdyn_value_const_steal(PyLong_FromSsize_t(n)) : NULL;
        return r == TR_OK && *out == NULL ? TR_ERROR : r;
    }
    if (PyUnicode_READ_CHAR(name, 0) == '_') {
        return cdyn_tx_unsupported(tx, "%s.%U", type->tp_name, name);
    }
    return cdyn_v_call_method(tx, fs, args[0], name, args + 1, nargs - 1, kwnames, out);
}

/* Index of obj's handler, or -1 (no error). */
static Py_ssize_t
handler_of(PyObject *obj)
{
    PyObject *i = PyDict_GetItemWithError(handler_index, obj);
    if (i == NULL) {
        PyErr_Clear();
        return -1;
    }
    return PyLong_AsSsize_t(i);
}

int
cdyn_is_builtin(PyObject *obj)
{
    PyTypeObject *ctype = NULL;
    PyObject *cname = NULL;
    if (container_descr(obj, &ctype, &cname)) {
        return 1;
    }
    int hashable = PyObject_Hash(obj) != -1;
    if (!hashable) {
        PyErr_Clear();
    }
    return (hashable && handler_of(obj) >= 0) || is_pure_builtin(obj);
}

/* 1 when the pure builtin fn consumes an iterable argument entirely (sorted, min, max, sum,
 * str.join), so an iterator passed to it may be drained first. */
static int
consumes_iterables(PyObject *fn)
{
    PyObject *self;
    const char *n;
    if (!PyCFunction_Check(fn)) {
        return 0;
    }
    self = PyCFunction_GET_SELF(fn);
    n = ((PyCFunctionObject *)fn)->m_ml->ml_name;
    if (self != NULL && PyModule_Check(self)) {
        return strcmp(cdyn_pymodule_name(self), "builtins") == 0 &&
               (strcmp(n, "sorted") == 0 || strcmp(n, "min") == 0 || strcmp(n, "max") == 0 ||
                strcmp(n, "sum") == 0);
    }
    return self != NULL && (PyUnicode_CheckExact(self) || PyBytes_CheckExact(self)) &&
           strcmp(n, "join") == 0;
}

/* *obj: a new real object equal to v when v is a constant or a list/tuple of such
 * (nested, input lists read on the way), or another container of constants only (a set, a
 * dict: the family's as_constant), else NULL. */
static tr_status
constant_view(cdyn_tx *tx, PyObject *v, int depth, PyObject **obj)
{
    PyObject *items, *res = NULL;
    tr_status st;
    *obj = NULL;
    if (V(v)->kind == VK_CONST) {
        *obj = Py_NewRef(V(v)->u.cnst.value);
        return TR_OK;
    }
    if (V(v)->kind != VK_LIST && V(v)->kind != VK_TUPLE) {
        if ((st = cdyn_tx_materialize(tx, v)) != TR_OK) {
            return st;
        }
        *obj = cdyn_v_as_constant(v);
        return TR_OK;
    }
    if (depth > 8 || (V(v)->kind == VK_TUPLE && V(v)->u.seq.nt_type != NULL)) {
        return TR_OK;
    }
    if ((st = cdyn_tx_materialize(tx, v)) != TR_OK) {
        return st;
    }
    items = V(v)->u.seq.items;
    res = PyList_New(PyList_GET_SIZE(items));
    for (Py_ssize_t i = 0; res != NULL && i < PyList_GET_SIZE(items); i++) {
        PyObject *o = NULL;
        if ((st = constant_view(tx, PyList_GET_ITEM(items, i), depth + 1, &o)) != TR_OK || !o) {
            Py_DECREF(res);
            return st;
        }
        PyList_SET_ITEM(res, i, o);
    }
    if (res != NULL && V(v)->kind == VK_TUPLE) {
        Py_SETREF(res, PyList_AsTuple(res));
    }
    *obj = res;
    return res ? TR_OK : TR_ERROR;
}

/* A pure builtin called on containers of constants (sorted of a set, max of a list; or on
 * iterators, drained first when it consumes them whole): folded on real copies of them (the
 * containers are not changed). *done = 0 when it does not apply. */
static tr_status
fold_on_containers(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args,
                   Py_ssize_t nargs, PyObject *kwnames, PyObject **out, int *done)
{
    PyObject *vals[16] = {NULL}, *objs[16] = {NULL}, *r = NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    int drained = 0, all = 1;
    tr_status st = TR_OK;
    *done = 0;
    if (nargs > 16 || cdyn_all_const(args, nargs)) {
        return TR_OK;
    }
    for (Py_ssize_t i = 0; st == TR_OK && i < nargs; i++) {
        PyObject *items = NULL;
        vals[i] = Py_NewRef(args[i]);
        if (cdyn_v_is_iterator(args[i]) && consumes_iterables(fn)) {
            st = cdyn_v_unpack(tx, args[i], &items);
            if (st == TR_OK) {
                Py_SETREF(vals[i], cdyn_value_seq_list(VK_LIST, items));
                Py_DECREF(items);
                st = vals[i] ? TR_OK : TR_ERROR;
                drained = 1;
            }
        }
    }
    if (st == TR_OK && drained) {   /* the iterators are consumed: go on with their items */
        *done = 1;
        st = cdyn_builtin_call(tx, fs, fn, vals, nargs, kwnames, out, &all);
        if (st == TR_OK && !all) {
            st = cdyn_tx_unsupported(tx, "call to %R", fn);
        }
        goto done;
    }
    for (Py_ssize_t i = 0; st == TR_OK && all && i < nargs; i++) {
        st = constant_view(tx, vals[i], 0, &objs[i]);
        all = objs[i] != NULL;
    }
    if (st == TR_OK && all) {
        r = PyObject_Vectorcall(fn, objs, nargs - nkw, kwnames);
        if (r == NULL) {   /* a builtin error is eager's too: raised in the trace */
            *done = 1;
            st = cdyn_tx_raise_pending(tx);
            st = st != TR_NOTIMPL ? st : cdyn_tx_unsupported(tx, "constant call of %R failed", fn);
        }
        else if (cdyn_is_constant(r)) {
            *done = 1;
            *out = cdyn_value_const(r);
            st = *out ? TR_OK : TR_ERROR;
        }
        else if (PyList_CheckExact(r) && consumes_iterables(fn) &&
                 strcmp(((PyCFunctionObject *)fn)->m_ml->ml_name, "sorted") == 0) {
            /* sorted(): a new list, its items as constants */
            PyObject *c = PyList_AsTuple(r), *cv = NULL, *items = NULL;
            cv = c ? cdyn_value_const(c) : NULL;
            st = cv ? cdyn_v_unpack(tx, cv, &items) : TR_ERROR;
            Py_XDECREF(c);
            Py_XDECREF(cv);
            if (st == TR_OK) {
                *done = 1;
                *out = cdyn_value_seq_list(VK_LIST, items);
                Py_DECREF(items);
                st = *out ? TR_OK : TR_ERROR;
            }
        }
        /* any other result (an item of a list passed in, ...) keeps its identity through
           the polyfill: not folded */
    }
done:
    for (Py_ssize_t i = 0; i < nargs; i++) {
        Py_XDECREF(vals[i]);
        Py_XDECREF(objs[i]);
    }
    Py_XDECREF(r);
    return st;
}

/* 1 for builtins.max, -1 for builtins.min, 0 for anything else. */
static int
min_max_sign(PyObject *fn)
{
    PyObject *self;
    const char *n;
    if (!PyCFunction_Check(fn)) {
        return 0;
    }
    self = PyCFunction_GET_SELF(fn);
    if (self == NULL || !PyModule_Check(self) ||
        strcmp(cdyn_pymodule_name(self), "builtins") != 0) {
        return 0;
    }
    n = ((PyCFunctionObject *)fn)->m_ml->ml_name;
    return strcmp(n, "max") == 0 ? 1 : strcmp(n, "min") == 0 ? -1 : 0;
}

/* 1 when v is an argument min()/max() of tensors can take as eager does: a tensor of exactly
 * one element (its shape is static: eager's bool(a > b) decides), or an int/float constant;
 * 0 otherwise (no exception). A tensor of more elements makes eager raise. */
static int
min_max_operand(PyObject *v)
{
    PyObject *n = NULL, *c;
    int ok;
    if (V(v)->kind == VK_CONST) {
        c = V(v)->u.cnst.value;
        return (PyLong_CheckExact(c) || PyFloat_CheckExact(c));
    }
    if (V(v)->kind != VK_TENSOR) {
        return 0;
    }
    n = PyObject_CallMethod(V(v)->u.tensor.fake, "numel", NULL);
    ok = n != NULL && PyLong_CheckExact(n) && PyLong_AsLong(n) == 1;
    if (n == NULL || PyErr_Occurred()) {
        PyErr_Clear();
    }
    Py_XDECREF(n);
    return ok;
}

/* One step of min()/max() over two operands (borrowed), at least one a tensor: as
 * torch._dynamo, torch.maximum / torch.minimum of two tensors, torch.clamp(t, min=c) /
 * clamp(t, max=c) of a tensor and a number. *out: new value. */
static tr_status
tensor_min_max_pair(cdyn_tx *tx, int sign, PyObject *a, PyObject *b, PyObject **out)
{
    PyObject *torch = NULL, *op = NULL, *kw = NULL, *pair[2];
    tr_status st = TR_ERROR;
    if (V(a)->kind != VK_TENSOR) {
        PyObject *t = a;
        a = b;
        b = t;
    }
    pair[0] = a;
    pair[1] = b;
    torch = PyImport_ImportModule("torch");
    if (torch == NULL) {
        goto done;
    }
    if (V(b)->kind == VK_CONST) {
        op = PyObject_GetAttrString(torch, "clamp");
        kw = Py_BuildValue("(s)", sign > 0 ? "min" : "max");
        if (op == NULL || kw == NULL) {
            goto done;
        }
    }
    else {
        op = PyObject_GetAttrString(torch, sign > 0 ? "maximum" : "minimum");
        if (op == NULL) {
            goto done;
        }
    }
    st = cdyn_tx_graph_call(tx, "call_function", op, NULL, pair, 2, kw, out);
done:
    Py_XDECREF(torch);
    Py_XDECREF(op);
    Py_XDECREF(kw);
    return st;
}

/* max(a, b, *c) / min(a, b, *c) with a tensor among the arguments, reduced pairwise from the
 * left as torch._dynamo does (two numbers fold; see tensor_min_max_pair). Only where eager
 * decides the comparisons: tensors of one element and int/float constants; anything else
 * (key=/default=, a tensor of more elements, for which eager raises) is a graph break. */
static tr_status
tensor_min_max(cdyn_tx *tx, PyObject *fn, int sign, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames, PyObject **out)
{
    PyObject *acc = NULL, *r = NULL, *pair[2];
    tr_status st = TR_OK;
    if (kwnames != NULL || nargs < 2) {
        return cdyn_tx_unsupported(tx, "%R of tensors with key/default or one iterable", fn);
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (!min_max_operand(args[i])) {
            return cdyn_tx_unsupported(tx, "%R of %S (eager compares with bool(): only tensors "
                                       "of one element and numbers)", fn, args[i]);
        }
    }
    acc = Py_NewRef(args[0]);
    for (Py_ssize_t i = 1; st == TR_OK && i < nargs; i++) {
        pair[0] = acc;
        pair[1] = args[i];
        if (V(acc)->kind == VK_CONST && V(args[i])->kind == VK_CONST) {
            st = cdyn_call_on_constants(tx, fn, pair, 2, NULL, &r);
        }
        else {
            st = tensor_min_max_pair(tx, sign, acc, args[i], &r);
        }
        Py_SETREF(acc, r);
        r = NULL;
    }
    if (st != TR_OK) {
        Py_XDECREF(acc);
        return st;
    }
    *out = acc;
    return TR_OK;
}

/* operator.and_(a, b), operator.ior(a, b), operator.lt(a, b), ... on values that are not
 * all constants (sets, dict views, containers, user objects): the operator itself, as the
 * BINARY_OP / COMPARE_OP would run it. TR_NOTIMPL when fn is no such function. */
static tr_status
operator_function(cdyn_tx *tx, PyObject *fn, PyObject *const *args, PyObject **out)
{
    for (int op = 0; op < 26; op++) {
        if (fn == cdyn_G.binop_fns[op]) {
            return cdyn_v_binop(tx, op, args[0], args[1], out);
        }
    }
    for (int op = 0; op < 6; op++) {
        if (fn == cdyn_G.cmp_fns[op]) {
            return cdyn_v_compare(tx, op, args[0], args[1], out);
        }
    }
    return TR_NOTIMPL;
}

tr_status
cdyn_builtin_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args,
                  Py_ssize_t nargs, PyObject *kwnames, PyObject **out, int *handled)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    Py_ssize_t h = handler_of(fn);
    PyTypeObject *ctype = NULL;
    PyObject *cname = NULL;
    int pure = is_pure_builtin(fn), has_polyfill = 0;
    tr_status st;
    *handled = 1;
    if (h >= 0) {
        st = handlers[h].fn(tx, fs, fn, args, nargs - nkw, nkw, kwnames, out);
        if (st != TR_NOTIMPL) {
            return st;
        }
        pure = 0;
    }
    if (container_descr(fn, &ctype, &cname)) {
        return call_container_descr(tx, fs, fn, ctype, cname, args, nargs, kwnames, out);
    }
    if (pure && cdyn_any_tensor(args, nargs) && min_max_sign(fn) != 0) {
        return tensor_min_max(tx, fn, min_max_sign(fn), args, nargs, kwnames, out);
    }
    if (tx->capture_scalars && nargs == 1 && nkw == 0 && V(args[0])->kind == VK_TENSOR &&
        (fn == (PyObject *)&PyFloat_Type || fn == (PyObject *)&PyLong_Type)) {
        /* float(t) / int(t) under capture_scalar_outputs: of t.item(), an unbacked symbol,
           as torch._dynamo converts it */
        PyObject *item = NULL, *nm = PyUnicode_FromString("item");
        st = nm ? cdyn_v_call_method(tx, fs, args[0], nm, NULL, 0, NULL, &item) : TR_ERROR;
        Py_XDECREF(nm);
        if (st == TR_OK) {
            st = cdyn_builtin_call(tx, fs, fn, &item, 1, NULL, out, handled);
            Py_DECREF(item);
        }
        return st;
    }
    if (pure && cdyn_any_tensor(args, nargs)) {
        return cdyn_tx_graph_call(tx, "call_function", fn, NULL, args, nargs, kwnames, out);
    }
    if (pure && cdyn_all_const(args, nargs)) {
        return cdyn_call_on_constants(tx, fn, args, nargs, kwnames, out);
    }
    if (nargs == 2 && nkw == 0 && (st = operator_function(tx, fn, args, out)) != TR_NOTIMPL) {
        return st;
    }
    if (pure && cdyn_any_sym(args, nargs)) {   /* size arithmetic: min, max, abs, int, ... */
        return cdyn_sym_builtin(tx, fn, args, nargs, kwnames, out);
    }
    if (pure) {
        int folded = 0;
        st = fold_on_containers(tx, fs, fn, args, nargs, kwnames, out, &folded);
        if (folded || st != TR_OK) {
            return st;
        }
    }
    st = cdyn_polyfill_call(tx, fn, args, nargs, kwnames, out, &has_polyfill);
    if (has_polyfill) {
        return st;
    }
    if (fn == cdyn_G.torch_size_type && nargs <= 1 && kwnames == NULL) {
        /* torch.Size() / torch.Size(x.size()[:-1]) */
        return nargs == 0 || V(args[0])->kind == VK_CONST
                   ? cdyn_call_on_constants(tx, fn, args, nargs, NULL, out)
                   : cdyn_torch_size_of(tx, args[0], out);
    }
    if (pure || h >= 0) {
        return cdyn_tx_unsupported(tx, "call to %R with non-constant arguments", fn);
    }
    *handled = 0;
    return TR_OK;
}

/* ---- reads of dict subclass instances from the frame ------------------------------------ */

/* A reader of one key of a dict (subclass instances included) bypassing the type's
 * overrides: `dict.get(d, key, <missing>)` (entry) or `dict.__contains__(d, key)` (has),
 * evaluated in C by the guard of a CALL source on every check (no Python frame). */
typedef struct {
    PyObject_HEAD
    PyObject *key;         /* strong */
    int has;               /* 1: __contains__, 0: get */
    vectorcallfunc vectorcall;
} dict_reader;

static PyObject *dict_missing;   /* strong: what an entry reader returns for a missing key */

static PyObject *
dict_reader_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    dict_reader *r = (dict_reader *)self;
    PyObject *d = PyVectorcall_NARGS(nargsf) == 1 && kwnames == NULL ? args[0] : NULL;
    if (d == NULL || !PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "dict reader: expected one dict, got %.100s",
                     d != NULL ? Py_TYPE(d)->tp_name : "other arguments");
        return NULL;
    }
    if (r->has) {
        int c = PyDict_Contains(d, r->key);
        return c < 0 ? NULL : Py_NewRef(c ? Py_True : Py_False);
    }
    PyObject *v = PyDict_GetItemWithError(d, r->key);
    return v != NULL ? Py_NewRef(v) : PyErr_Occurred() ? NULL : Py_NewRef(dict_missing);
}

static void
dict_reader_dealloc(PyObject *self)
{
    Py_XDECREF(((dict_reader *)self)->key);
    Py_TYPE(self)->tp_free(self);
}

static PyTypeObject DictReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cdynamo._C.DictReader",
    .tp_basicsize = sizeof(dict_reader),
    .tp_dealloc = dict_reader_dealloc,
    .tp_vectorcall_offset = offsetof(dict_reader, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE |
                Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .tp_doc = "dict.get(d, key, <missing>) / dict.__contains__(d, key) of one key (guards).",
};

/* Source `helper(key)(<base>)` (new ref) reading key of the dict at base, helper being
 * "dict_entry" or "dict_has" (a dict_reader). Its readable form names the key (a constant),
 * so reads of two keys are two sources (guards and values are told apart by it). */
static PyObject *
dict_read_source(const char *helper, PyObject *key, PyObject *base)
{
    dict_reader *r;
    PyObject *src, *label;
    const char *lab;
    if (dict_missing == NULL) {
        if (PyType_Ready(&DictReaderType) < 0 ||
            (dict_missing = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type)) == NULL) {
            return NULL;
        }
    }
    if ((r = PyObject_New(dict_reader, &DictReaderType)) == NULL) {
        return NULL;
    }
    r->key = Py_NewRef(key);
    r->has = strcmp(helper, "dict_has") == 0;
    r->vectorcall = dict_reader_call;
    label = PyUnicode_FromFormat("%s(%R)", helper, key);
    lab = label ? PyUnicode_AsUTF8(label) : NULL;
    src = lab ? cdyn_source_call((PyObject *)r, base, lab) : NULL;
    Py_XDECREF(label);
    Py_DECREF(r);
    return src;
}

tr_status
cdyn_guard_dict_has(cdyn_tx *tx, PyObject *dict_source, PyObject *key, int present)
{
    PyObject *src = dict_read_source("dict_has", key, dict_source);
    int r = src == NULL || cdyn_guards_add_equals(tx->guards, src, present ? Py_True : Py_False) < 0;
    Py_XDECREF(src);
    return r ? TR_ERROR : TR_OK;
}

tr_status
cdyn_builtin_dict_read(cdyn_tx *tx, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames, PyObject **out)
{
    PyObject *name, *self, *key, *item, *src = NULL;
    int get, has, r;
    tr_status st = TR_ERROR;
    if (!PyObject_TypeCheck(fn, &PyMethodDescr_Type) || kwnames != NULL || nargs < 2 ||
        V(args[0])->kind != VK_OBJECT || V(args[0])->source == NULL ||
        (V(args[0])->bits & (OBJ_MUTATED | OBJ_ITEMS_MUTATED)) || V(args[1])->kind != VK_CONST) {
        return TR_NOTIMPL;   /* (items stored while tracing: the real entry is stale) */
    }
    name = ((PyDescrObject *)fn)->d_name;
    self = V(args[0])->u.obj.obj;
    key = V(args[1])->u.cnst.value;
    get = cdyn_name_is(name, "get") && nargs <= 3;
    has = cdyn_name_is(name, "__contains__") && nargs == 2;
    if (!PyDict_Check(self) || !(get || has || (cdyn_name_is(name, "__getitem__") && nargs == 2))) {
        return TR_NOTIMPL;
    }
    if (PyObject_Hash(key) == -1) {
        PyErr_Clear();
        return TR_NOTIMPL;
    }
    item = PyDict_GetItemWithError(self, key);   /* borrowed */
    if (item == NULL && PyErr_Occurred()) {
        PyErr_Clear();
        return TR_NOTIMPL;
    }
    if (has) {
        src = dict_read_source("dict_has", key, V(args[0])->source);
        r = src == NULL || cdyn_guards_add_equals(tx->guards, src, item ? Py_True : Py_False) < 0;
        *out = r ? NULL : cdyn_value_bool(item != NULL);
        st = *out ? TR_OK : TR_ERROR;
        goto done;
    }
    src = dict_read_source("dict_entry", key, V(args[0])->source);
    if (src == NULL) {
        goto done;
    }
    if (item == NULL) {
        PyObject *missing = PyObject_CallOneArg(((cdyn_source *)src)->name, self);
        r = missing == NULL || cdyn_guards_add_id(tx->guards, src, missing, 0) < 0;
        Py_XDECREF(missing);
        if (r) {
            goto done;
        }
        if (!get) {   /* d[key] of a missing key: KeyError, as eager */
            st = cdyn_tx_raise(tx, PyExc_KeyError, &args[1], 1);
            goto done;
        }
        *out = nargs == 3 ? Py_NewRef(args[2]) : cdyn_value_const(Py_None);
        st = *out ? TR_OK : TR_ERROR;
        goto done;
    }
    st = cdyn_tx_wrap_real(tx, item, src, out);
done:
    Py_XDECREF(src);
    return st;
}

/* ---- the family table ----------------------------------------------------------------- */

/* 1 when obj is a builtin method or method-wrapper bound to a value of an immutable
 * builtin type (tuple, str, bytes, int, float, complex, bool, frozenset, None). */
int
cdyn_immutable_bound(PyObject *obj)
{
    PyObject *self = NULL;
    int r;
    if (PyCFunction_Check(obj)) {
        self = Py_XNewRef(PyCFunction_GET_SELF(obj));
    }
    else if (strcmp(Py_TYPE(obj)->tp_name, "method-wrapper") == 0) {
        self = PyObject_GetAttrString(obj, "__self__");
        if (self == NULL) {
            PyErr_Clear();
        }
    }
    r = self != NULL &&
        (PyTuple_CheckExact(self) || PyUnicode_CheckExact(self) || PyBytes_CheckExact(self) ||
         PyLong_CheckExact(self) || PyFloat_CheckExact(self) || PyComplex_CheckExact(self) ||
         PyBool_Check(self) || PyFrozenSet_CheckExact(self) || self == Py_None) &&
        cdyn_is_constant(self);
    Py_XDECREF(self);
    return r;
}


/* 1 when obj is a method of an immutable builtin type taken from the type (str.isalnum,
 * bytes.hex, int.bit_length, tuple.count): pure on constant arguments. */
int
cdyn_immutable_type_method(PyObject *obj)
{
    PyTypeObject *t;
    if (Py_TYPE(obj) != &PyMethodDescr_Type) {
        return 0;
    }
    t = PyDescr_TYPE(obj);
    return t == &PyUnicode_Type || t == &PyBytes_Type || t == &PyLong_Type || t == &PyFloat_Type ||
           t == &PyComplex_Type || t == &PyTuple_Type || t == &PyFrozenSet_Type ||
           t == &PyBool_Type;
}

static tr_status
builtin_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames, PyObject **out)
{
    int handled = 0;
    tr_status st = cdyn_builtin_call(tx, fs, V(fn)->u.obj.obj, args, nargs, kwnames, out,
                                     &handled);
    if (!handled && cdyn_all_const(args, nargs) &&
        (cdyn_immutable_bound(V(fn)->u.obj.obj) ||
         cdyn_immutable_type_method(V(fn)->u.obj.obj))) {
        /* a method of an immutable builtin constant ((4, 5).__getitem__(1)): pure */
        return cdyn_call_on_constants(tx, V(fn)->u.obj.obj, args, nargs, kwnames, out);
    }
    if (!handled) {
        return cdyn_tx_unsupported(tx, "call to %R", V(fn)->u.obj.obj);
    }
    return st;
}

static tr_status
builtin_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    return cdyn_getattr_real(tx, v, name, 1, out);
}

/* list[int], dict[str, Any], tuple[...]: a builtin type parameterised by constants or real
 * objects (an annotation evaluated by a `def` in traced code) is the real alias, made now
 * (types.GenericAlias: pure); anything else is not supported. */
static tr_status
builtin_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out)
{
    PyObject *type = V(v)->u.obj.obj, *k = NULL, *alias = NULL;
    tr_status st;
    if (!PyType_Check(type) || !PyType_HasFeature((PyTypeObject *)type, Py_TPFLAGS_IMMUTABLETYPE)) {
        return cdyn_tx_unsupported(tx, "subscript of %S", v);
    }
    k = cdyn_v_real_arg(key);
    if (k == NULL) {
        return PyErr_Occurred() ? TR_ERROR
                                : cdyn_tx_unsupported(tx, "subscript of %S by %S", v, key);
    }
    alias = PyObject_GetItem(type, k);
    Py_DECREF(k);
    if (alias == NULL) {
        PyErr_Clear();
        return cdyn_tx_unsupported(tx, "subscript of %S raised", v);
    }
    st = cdyn_tx_wrap_fixed(tx, alias, Py_None, out);
    Py_DECREF(alias);
    return st;
}

static tr_status
builtin_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    (void)tx;
    (void)v;
    *out = 1;
    return TR_OK;
}

/* The Python scalar types torch's argument parser takes as a dtype (`torch.zeros(n,
 * dtype=int)`, `x.to(float)`) and the dtype each stands for there: int -> torch.int64,
 * float -> torch.float64 (not the default dtype), bool -> torch.bool, complex ->
 * torch.complex128. Resolved by cdyn_builtin_init. */
static struct { PyTypeObject *type; const char *dtype; PyObject *obj; } scalar_dtypes[] = {
    {&PyLong_Type, "int64", NULL}, {&PyFloat_Type, "float64", NULL},
    {&PyBool_Type, "bool", NULL}, {&PyComplex_Type, "complex128", NULL},
};

/* A builtin as an argument of a torch operation: one of the scalar types above. The fake
 * run gets the type itself (so an operation that refuses it in eager, `x.type(float)`,
 * fails there too and stays a graph break); the FX node gets the dtype, which prints as
 * valid Python (`dtype = torch.int64`) and means the same to the operation. */
static tr_status
builtin_graph_arg(cdyn_tx *tx, PyObject *v, PyObject **fake, PyObject **node)
{
    PyObject *obj = V(v)->u.obj.obj;
    for (size_t i = 0; i < sizeof(scalar_dtypes) / sizeof(scalar_dtypes[0]); i++) {
        if (obj == (PyObject *)scalar_dtypes[i].type && scalar_dtypes[i].obj != NULL) {
            *fake = Py_NewRef(obj);
            *node = Py_NewRef(scalar_dtypes[i].obj);
            return TR_OK;
        }
    }
    return cdyn_tx_unsupported(tx, "%S as an argument to a torch operation", v);
}

const cdyn_vtable cdyn_builtin_vt = {
    .name = "BuiltinVariable",
    .getattr = builtin_getattr,
    .call = builtin_call,
    .subscr = builtin_subscr,
    .truth = builtin_truth,
    .graph_arg = builtin_graph_arg,
    .python_type = cdyn_python_type_obj,
    .collect = cdyn_collect_nothing,
    .reconstruct = cdyn_reconstruct_obj,
};

int cdyn_builtin_init(void);

/* Resolve the handler table to objects; 0 / -1. */
int
cdyn_builtin_init(void)
{
    if (handler_index != NULL) {
        return 0;
    }
    handler_index = PyDict_New();
    if (handler_index == NULL) {
        return -1;
    }
    for (size_t i = 0; i < sizeof(scalar_dtypes) / sizeof(scalar_dtypes[0]); i++) {
        scalar_dtypes[i].obj = PyObject_GetAttrString(cdyn_G.torch, scalar_dtypes[i].dtype);
        if (scalar_dtypes[i].obj == NULL) {
            return -1;
        }
    }
    for (Py_ssize_t i = 0; handlers[i].name != NULL; i++) {
        PyObject *mod = PyImport_ImportModule(handlers[i].module), *obj = NULL, *idx = NULL;
        int e;
        if (mod == NULL) {
            return -1;
        }
        obj = mod;   /* a dotted name: attributes of attributes (dict.fromkeys) */
        for (const char *p = handlers[i].name; obj != NULL && p != NULL;) {
            const char *dot = strchr(p, '.');
            PyObject *nm = dot ? PyUnicode_FromStringAndSize(p, dot - p) : PyUnicode_FromString(p);
            Py_SETREF(obj, nm ? PyObject_GetAttr(obj, nm) : NULL);
            Py_XDECREF(nm);
            p = dot ? dot + 1 : NULL;
        }
        idx = PyLong_FromSsize_t(i);
        e = obj == NULL || idx == NULL || PyDict_SetItem(handler_index, obj, idx) < 0;
        Py_XDECREF(obj);
        Py_XDECREF(idx);
        if (e) {
            return -1;
        }
    }
    return 0;
}
