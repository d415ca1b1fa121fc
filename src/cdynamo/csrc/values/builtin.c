/* values/builtin.c: builtins (len, isinstance, zip, ...), builtin types (range, list,
 * dict, super, ...), and the pure functions of math / operator and methods of constants.
 *
 * A builtin with symbolic meaning has a handler in the table below, found by identity once
 * when the value is made (its index is kept in the value's bits). Any other pure builtin is
 * folded at trace time when every argument is a constant, and recorded in the graph when an
 * argument is a tensor (operator.add(x, y), abs(x)). */
#include "../tx.h"
#include "../codegen.h"

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
    st = cdyn_v_len(tx, args[0], &n);
    if (st != TR_OK) {
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
    r = real != NULL ? PyObject_IsInstance(real, cls)
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
        return cdyn_tx_unsupported(tx, "%s with these arguments", is_zip ? "zip" : "enumerate");
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
        *out = cdyn_value_iter(res);
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
    if (npos < 1 || npos > 2 || nkw != 0 || V(args[0])->kind != VK_ITER) {
        return cdyn_tx_unsupported(tx, "next() of %S", npos ? args[0] : Py_None);
    }
    st = cdyn_v_next(tx, args[0], out);
    if (st == TR_OK && *out == NULL) {
        if (npos == 1) {
            return cdyn_tx_unsupported(tx, "next() on an exhausted iterator");
        }
        *out = Py_NewRef(args[1]);
    }
    return st;
}

/* 1/0 when attribute `name` of v exists / does not, with a HASATTR guard when the answer
 * depends on an object from the frame; -1 when unknown; -2 on error. */
static int
known_hasattr(cdyn_tx *tx, PyObject *v, PyObject *name)
{
    PyObject *obj = NULL, *src = NULL;
    int r;
    switch (V(v)->kind) {
    case VK_TENSOR:
        obj = V(v)->u.tensor.fake;   /* the fake tensor has the same attributes */
        break;
    case VK_PYMODULE: case VK_CONST: case VK_CLASS: case VK_USERFN: case VK_BUILTIN:
    case VK_TORCHFN:
        obj = cdyn_v_real(v);        /* fixed by EQUALS/ID/FUNCTION_MATCH */
        break;
    case VK_OBJECT: case VK_NNMODULE:
        if (V(v)->source == NULL || (V(v)->bits & OBJ_MUTATED)) {
            return -1;
        }
        obj = cdyn_v_real(v);        /* guarded below: attributes may come and go */
        break;
    default:
        return -1;
    }
    r = PyObject_HasAttr(obj, name);
    if ((V(v)->kind == VK_OBJECT || V(v)->kind == VK_NNMODULE)) {
        src = cdyn_source_attr(V(v)->source, name);
        if (src == NULL || cdyn_guards_add_hasattr(tx->guards, src, r) < 0) {
            Py_XDECREF(src);
            return -2;
        }
        Py_DECREF(src);
    }
    return r;
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
        if (has == 0) {
            *out = Py_NewRef(args[2]);
            return TR_OK;
        }
    }
    return cdyn_v_getattr(tx, args[0], name, out);
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
        return cdyn_tx_unsupported(tx, "sum() with these arguments");
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

static tr_status
b_dict(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
       PyObject *kwnames, PyObject **out)
{
    PyObject *keys = NULL, *vals = NULL;
    (void)fs;
    (void)fn;
    if (npos != 0) {
        return cdyn_tx_unsupported(tx, "dict() with positional arguments");
    }
    keys = kwnames ? PySequence_List(kwnames) : PyList_New(0);
    vals = PyList_New(0);
    for (Py_ssize_t i = 0; keys && vals && i < nkw; i++) {
        if (PyList_Append(vals, args[i]) < 0) {
            Py_CLEAR(vals);
        }
    }
    *out = keys && vals ? cdyn_value_dict(keys, vals) : NULL;
    Py_XDECREF(keys);
    Py_XDECREF(vals);
    return *out ? TR_OK : TR_ERROR;
}

/* super(cls, self): a proxy whose methods are inlined with self. */
static tr_status
b_super(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t npos, Py_ssize_t nkw,
        PyObject *kwnames, PyObject **out)
{
    PyObject *cls, *self, *sup;
    (void)fs;
    (void)fn;
    (void)kwnames;
    if (npos != 2 || nkw != 0) {
        return cdyn_tx_unsupported(tx, "super() with %zd arguments", npos + nkw);
    }
    cls = cdyn_v_real(args[0]);
    self = V(args[1])->kind == VK_NNMODULE || V(args[1])->kind == VK_OBJECT
               ? cdyn_v_real(args[1]) : NULL;
    if (cls == NULL || !PyType_Check(cls) || self == NULL) {
        return cdyn_tx_unsupported(tx, "super(%S, %S)", args[0], args[1]);
    }
    sup = PyObject_CallFunctionObjArgs((PyObject *)&PySuper_Type, cls, self, NULL);
    if (sup == NULL) {
        return cdyn_tx_unsupported(tx, "super() failed");
    }
    *out = cdyn_value_alloc(VK_SUPER, NULL);
    if (*out != NULL) {
        V(*out)->u.super.obj = sup;
        V(*out)->u.super.self = Py_NewRef(args[1]);
    }
    else {
        Py_DECREF(sup);
    }
    return *out ? TR_OK : TR_ERROR;
}

/* The handler table: (module, name) -> handler; resolved to objects at init. */
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
    {"builtins", "super", b_super},
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
    int hashable = PyObject_Hash(obj) != -1;
    if (!hashable) {
        PyErr_Clear();
    }
    return (hashable && handler_of(obj) >= 0) || is_pure_builtin(obj);
}

tr_status
cdyn_builtin_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args,
                  Py_ssize_t nargs, PyObject *kwnames, PyObject **out, int *handled)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    Py_ssize_t h = handler_of(fn);
    *handled = 1;
    if (h >= 0) {
        return handlers[h].fn(tx, fs, fn, args, nargs - nkw, nkw, kwnames, out);
    }
    if (is_pure_builtin(fn)) {
        if (cdyn_any_tensor(args, nargs)) {
            return cdyn_tx_graph_call(tx, "call_function", fn, NULL, args, nargs, kwnames, out);
        }
        if (cdyn_all_const(args, nargs)) {
            return cdyn_call_on_constants(tx, fn, args, nargs, kwnames, out);
        }
        if (cdyn_any_sym(args, nargs)) {   /* size arithmetic: min, max, abs, int, ... */
            return cdyn_sym_builtin(tx, fn, args, nargs, kwnames, out);
        }
        return cdyn_tx_unsupported(tx, "call to %R with non-constant arguments", fn);
    }
    *handled = 0;
    return TR_OK;
}

/* ---- the family table ----------------------------------------------------------------- */

static tr_status
builtin_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames, PyObject **out)
{
    int handled = 0;
    tr_status st = cdyn_builtin_call(tx, fs, V(fn)->u.obj.obj, args, nargs, kwnames, out,
                                     &handled);
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

static tr_status
builtin_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    (void)tx;
    (void)v;
    *out = 1;
    return TR_OK;
}

const cdyn_vtable cdyn_builtin_vt = {
    .name = "BuiltinVariable",
    .getattr = builtin_getattr,
    .call = builtin_call,
    .truth = builtin_truth,
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
    for (Py_ssize_t i = 0; handlers[i].name != NULL; i++) {
        PyObject *mod = PyImport_ImportModule(handlers[i].module), *obj = NULL, *idx = NULL;
        int e;
        if (mod == NULL) {
            return -1;
        }
        obj = PyObject_GetAttrString(mod, handlers[i].name);
        Py_DECREF(mod);
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
