/* tcall.c: the translator's object model: wrapping real objects into values (with their
 * guards), attribute loads, iteration, truth, and calls (torch ops into the FX graph,
 * builtins folded on constants, user functions and nn.Modules inlined).
 */
#include "tx.h"
#include "hook.h"
#include "trace_rules.h"

static PyObject *str_self, *str_globals, *str_closure, *str_cell_contents, *str_parameters, *str_buffers,
    *str_modules, *str_forward, *str_module_attr, *str_placeholder, *str_create_node,
    *str_fake_from_tensor, *str_fake_call, *str_fake_call_method, *str_set_example,
    *str_get_attr, *str_call_function, *str_forward_hooks, *str_forward_pre_hooks;

static tr_status make_method(PyObject *name_or_func, PyObject *self, int is_func,
                             PyObject **out);

/* ---- classification helpers ---------------------------------------------------------- */

/* 1 when obj is a Python constant we specialise on (EQUALS_MATCH-able). */
static int
is_constant(PyObject *obj)
{
    if (obj == Py_None || obj == Py_Ellipsis || obj == Py_NotImplemented || PyBool_Check(obj) ||
        PyLong_CheckExact(obj) || PyFloat_CheckExact(obj) || PyComplex_CheckExact(obj) ||
        PyUnicode_CheckExact(obj) || PyBytes_CheckExact(obj) || PyCode_Check(obj) ||
        PySlice_Check(obj) || PyRange_Check(obj)) {
        return 1;
    }
    if (Py_TYPE(obj) == (PyTypeObject *)cdyn_G.torch_dtype_type ||
        Py_TYPE(obj) == (PyTypeObject *)cdyn_G.torch_device_type ||
        Py_TYPE(obj) == (PyTypeObject *)cdyn_G.torch_size_type) {
        return 1;
    }
    if (PyTuple_CheckExact(obj) || PyFrozenSet_CheckExact(obj)) {
        PyObject *it = PyObject_GetIter(obj), *item = NULL;
        int ok = 1;
        if (it == NULL) {
            PyErr_Clear();
            return 0;
        }
        while (ok && (item = PyIter_Next(it)) != NULL) {
            ok = is_constant(item);
            Py_DECREF(item);
        }
        Py_DECREF(it);
        PyErr_Clear();
        return ok;
    }
    return 0;
}

static int
is_tensor(PyObject *obj)
{
    return PyObject_TypeCheck(obj, (PyTypeObject *)cdyn_G.torch_tensor_type);
}

static int
is_nn_module(PyObject *obj)
{
    return PyObject_TypeCheck(obj, (PyTypeObject *)cdyn_G.nn_module_type);
}

/* 1 when the __module__ of obj (a callable) starts with prefix. */
static int
module_startswith(PyObject *obj, const char *prefix)
{
    PyObject *m = PyObject_GetAttr(obj, str_module_attr);
    int r = 0;
    if (m == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (PyUnicode_Check(m)) {
        const char *s = PyUnicode_AsUTF8(m);
        size_t n = strlen(prefix);
        r = s != NULL && strncmp(s, prefix, n) == 0 && (s[n] == '\0' || s[n] == '.');
        if (s == NULL) {
            PyErr_Clear();
        }
    }
    Py_DECREF(m);
    return r;
}

/* Name of a Python module object, or "" (borrowed C string). */
static const char *
pymodule_name(PyObject *mod)
{
    const char *s = PyModule_GetName(mod);
    if (s == NULL) {
        PyErr_Clear();
        return "";
    }
    return s;
}

static int
startswith(const char *s, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(s, prefix, n) == 0 && (s[n] == '\0' || s[n] == '.');
}

/* Torch callables recorded in the graph as call_function. */
static int
is_graph_function(PyObject *obj)
{
    if (PyType_Check(obj)) {
        return 0;
    }
    if (!(PyCFunction_Check(obj) || PyFunction_Check(obj) ||
          Py_TYPE(obj)->tp_call != NULL)) {
        return 0;
    }
    if (module_startswith(obj, "torch._dynamo") || module_startswith(obj, "torch.fx") ||
        module_startswith(obj, "torch.compiler") || module_startswith(obj, "torch.autograd")) {
        return 0;
    }
    return module_startswith(obj, "torch") || module_startswith(obj, "torch._C") ||
           module_startswith(obj, "torch._C._nn") || module_startswith(obj, "torch.functional");
}

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
            const char *m = pymodule_name(self);
            if (strcmp(m, "builtins") == 0) {
                const char *n = ((PyCFunctionObject *)obj)->m_ml->ml_name;
                /* print, input, open, exec, eval, ... have effects: not pure. */
                static const char *ok[] = {"abs", "min", "max", "sum", "round", "divmod", "pow",
                                           "len", "sorted", "any", "all", "hash", "repr",
                                           "format", "chr", "ord", "bin", "hex", "oct", NULL};
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
        return self != NULL && is_constant(self);
    }
    return 0;
}

/* ---- values from real objects --------------------------------------------------------- */

/* A name for an FX node / attribute derived from a source: L['self'].linear -> self_linear */
static PyObject *
sanitized_name(PyObject *source)
{
    PyObject *r = cdyn_source_repr(source);
    Py_ssize_t n = PyUnicode_GET_LENGTH(r);
    Py_UCS4 *buf = PyMem_Malloc((n + 2) * sizeof(Py_UCS4));
    Py_ssize_t j = 0;
    PyObject *out = NULL;
    int last_us = 1;
    if (buf == NULL) {
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 ch = PyUnicode_READ_CHAR(r, i);
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (i < 2 && n > 2 && PyUnicode_READ_CHAR(r, 1) == '[') {
            continue;   /* drop the "L[" / "G[" / "C[" prefix */
        }
        if (ok) {
            buf[j++] = ch;
            last_us = 0;
        }
        else if (!last_us) {
            buf[j++] = '_';
            last_us = 1;
        }
    }
    while (j > 0 && buf[j - 1] == '_') {
        j--;
    }
    if (j == 0 || (buf[0] >= '0' && buf[0] <= '9')) {
        memmove(buf + 1, buf, j * sizeof(Py_UCS4));
        buf[0] = 'v';
        j++;
    }
    out = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, buf, j);
    PyMem_Free(buf);
    return out;
}

/* Remember value v for source (so the path is wrapped and guarded once). */
static int
memo_source(cdyn_tx *tx, PyObject *source, PyObject *v)
{
    if (source == NULL) {
        return 0;
    }
    return PyDict_SetItem(tx->by_source, cdyn_source_repr(source), v);
}

/* A graph input: placeholder + fake example + TENSOR_MATCH. */
static tr_status
wrap_tensor_input(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    PyObject *key = NULL, *alias = NULL, *fake = NULL, *name = NULL, *node = NULL, *r = NULL;
    tr_status st = TR_ERROR;
    if (source == NULL) {
        return cdyn_tx_unsupported(tx, "a tensor with no source (cannot be a graph input)");
    }
    if (cdyn_guards_add_tensor(tx->guards, source, obj) < 0) {
        goto done;
    }
    key = PyLong_FromVoidPtr(obj);
    if (key == NULL) {
        goto done;
    }
    alias = PyDict_GetItemWithError(tx->by_id, key);
    if (alias != NULL) {
        *out = Py_NewRef(alias);
        st = TR_OK;
        goto done;
    }
    if (PyErr_Occurred()) {
        goto done;
    }
    fake = PyObject_CallMethodObjArgs(tx->glue, str_fake_from_tensor, tx->fake_mode, obj, NULL);
    if (fake == NULL) {
        st = cdyn_tx_unsupported(tx, "cannot make a fake tensor for %U",
                                 cdyn_source_repr(source));
        goto done;
    }
    name = sanitized_name(source);
    if (name == NULL) {
        goto done;
    }
    node = PyObject_CallMethodObjArgs(tx->glue, str_placeholder, tx->graph, name, NULL);
    if (node == NULL) {
        goto done;
    }
    r = PyObject_CallMethodObjArgs(tx->glue, str_set_example, node, fake, NULL);
    if (r == NULL) {
        goto done;
    }
    *out = cdyn_value_new(VK_TENSOR, fake, node, NULL, source);
    if (*out == NULL || PyList_Append(tx->input_sources, source) < 0 ||
        PyList_Append(tx->input_values, obj) < 0 || PyDict_SetItem(tx->by_id, key, *out) < 0) {
        goto done;
    }
    st = TR_OK;
done:
    Py_XDECREF(key);
    Py_XDECREF(fake);
    Py_XDECREF(name);
    Py_XDECREF(node);
    Py_XDECREF(r);
    return st;
}

/* Container items wrapped with ITEM sources. kind VK_TUPLE / VK_LIST. */
static tr_status
wrap_sequence(cdyn_tx *tx, PyObject *obj, PyObject *source, cdyn_vkind kind, PyObject **out)
{
    PyObject *items = NULL, *seq = NULL;
    tr_status st = TR_ERROR;
    seq = PySequence_Fast(obj, "not a sequence");
    if (seq == NULL) {
        return TR_ERROR;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    items = PyList_New(n);
    if (items == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyLong_FromSsize_t(i), *src = NULL, *v = NULL;
        if (key == NULL) {
            goto done;
        }
        src = source ? cdyn_source_item(source, key) : NULL;
        Py_DECREF(key);
        if (source != NULL && src == NULL) {
            goto done;
        }
        st = cdyn_tx_wrap_real(tx, PySequence_Fast_GET_ITEM(seq, i), src, &v);
        Py_XDECREF(src);
        if (st != TR_OK) {
            goto done;
        }
        st = TR_ERROR;
        PyList_SET_ITEM(items, i, v);
    }
    *out = cdyn_value_new(kind, NULL, NULL, items, source);
    st = *out ? TR_OK : TR_ERROR;
done:
    Py_XDECREF(items);
    Py_XDECREF(seq);
    return st;
}

static tr_status
wrap_dict(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    PyObject *keys = PyList_New(0), *vals = PyList_New(0), *k, *v;
    Py_ssize_t pos = 0;
    tr_status st = TR_ERROR;
    if (keys == NULL || vals == NULL) {
        goto done;
    }
    while (PyDict_Next(obj, &pos, &k, &v)) {
        PyObject *src = NULL, *w = NULL;
        if (!(PyUnicode_CheckExact(k) || PyLong_CheckExact(k))) {
            st = cdyn_tx_unsupported(tx, "dict with a non-str/int key");
            goto done;
        }
        src = source ? cdyn_source_item(source, k) : NULL;
        if (source != NULL && src == NULL) {
            goto done;
        }
        st = cdyn_tx_wrap_real(tx, v, src, &w);
        Py_XDECREF(src);
        if (st != TR_OK) {
            goto done;
        }
        st = TR_ERROR;
        if (PyList_Append(keys, k) < 0 || PyList_Append(vals, w) < 0) {
            Py_DECREF(w);
            goto done;
        }
        Py_DECREF(w);
    }
    *out = cdyn_value_new(VK_DICT, keys, NULL, vals, source);
    st = *out ? TR_OK : TR_ERROR;
done:
    Py_XDECREF(keys);
    Py_XDECREF(vals);
    return st;
}

/* A bound method whose self (borrowed) is wrapped through source.__self__: a VK_METHOD of
 * the function to inline (is_func 1) or of the method name (is_func 0). */
static tr_status
wrap_bound_method(cdyn_tx *tx, PyObject *self, PyObject *name_or_func, int is_func,
                  PyObject *source, PyObject **out)
{
    PyObject *ssrc = NULL, *sv = NULL;
    tr_status st;
    if (source != NULL) {
        ssrc = cdyn_source_attr(source, str_self);
        if (ssrc == NULL) {
            return TR_ERROR;
        }
    }
    st = cdyn_tx_wrap_real(tx, self, ssrc, &sv);
    Py_XDECREF(ssrc);
    if (st != TR_OK) {
        return st;
    }
    st = make_method(name_or_func, sv, is_func, out);
    Py_DECREF(sv);
    return st;
}

tr_status
cdyn_tx_wrap_real(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    PyObject *cached = NULL;
    tr_status st = TR_OK;
    *out = NULL;
    if (source != NULL) {
        cached = PyDict_GetItemWithError(tx->by_source, cdyn_source_repr(source));
        if (cached != NULL) {
            *out = Py_NewRef(cached);
            return TR_OK;
        }
        if (PyErr_Occurred()) {
            return TR_ERROR;
        }
    }
    if (is_tensor(obj)) {
        st = wrap_tensor_input(tx, obj, source, out);
    }
    else if ((PyObject *)Py_TYPE(obj) == cdyn_G.grad_mode_exit_type) {
        /* the exit of a grad-mode block split by a graph break (codegen.c) */
        PyObject *prev = PyObject_GetAttrString(obj, "prev"), *psrc = NULL;
        if (prev == NULL) {
            return TR_ERROR;
        }
        if (source != NULL) {
            psrc = cdyn_source_attr(source, PyUnicode_InternFromString("prev"));
            if (psrc == NULL || cdyn_guards_add_type(tx->guards, source, Py_TYPE(obj)) < 0 ||
                cdyn_guards_add_equals(tx->guards, psrc, prev) < 0) {
                Py_XDECREF(psrc);
                Py_DECREF(prev);
                return TR_ERROR;
            }
            Py_DECREF(psrc);
        }
        *out = cdyn_value_new(VK_GRADEXIT, NULL, NULL, NULL, source);
        if (*out != NULL) {
            V(*out)->flag = prev == Py_True;
        }
        Py_DECREF(prev);
    }
    else if (is_constant(obj)) {
        if (source != NULL && cdyn_guards_add_equals(tx->guards, source, obj) < 0) {
            return TR_ERROR;
        }
        *out = cdyn_value_const(obj);
    }
    else if (is_nn_module(obj)) {
        if (source != NULL && cdyn_guards_add_id(tx->guards, source, obj, 0) < 0) {
            return TR_ERROR;
        }
        *out = cdyn_value_new(VK_NNMODULE, obj, NULL, NULL, source);
    }
    else if (PyModule_Check(obj)) {
        if (source != NULL && cdyn_guards_add_id(tx->guards, source, obj, 1) < 0) {
            return TR_ERROR;
        }
        *out = cdyn_value_new(VK_PYMODULE, obj, NULL, NULL, source);
    }
    else if (PyTuple_CheckExact(obj) || PyList_CheckExact(obj) || PyDict_CheckExact(obj)) {
        cdyn_vkind k = PyTuple_CheckExact(obj) ? VK_TUPLE : PyList_CheckExact(obj) ? VK_LIST
                                                                                   : VK_DICT;
        if (source == NULL) {
            st = k == VK_DICT ? wrap_dict(tx, obj, NULL, out)
                              : wrap_sequence(tx, obj, NULL, k, out);
        }
        else {
            /* Lazy: the items (and the LENGTH_CHECK) are wrapped on first use, so a list
               that is only appended to is not specialised on its contents. */
            PyObject *key = PyLong_FromVoidPtr(obj), *seen = NULL;
            if (key == NULL) {
                return TR_ERROR;
            }
            seen = PyDict_GetItemWithError(tx->by_id, key);
            if (seen != NULL || PyErr_Occurred()) {
                Py_DECREF(key);
                /* the same container under two names: aliasing is not guarded */
                return seen ? cdyn_tx_unsupported(tx, "one input container reached through "
                                                      "two sources (aliasing)")
                            : TR_ERROR;
            }
            if (cdyn_guards_add_type(tx->guards, source, Py_TYPE(obj)) < 0) {
                Py_DECREF(key);
                return TR_ERROR;
            }
            *out = cdyn_value_new(k, obj, NULL, NULL, source);
            if (*out != NULL) {
                V(*out)->flag = 2;
                if (k != VK_TUPLE && PyDict_SetItem(tx->by_id, key, *out) < 0) {
                    Py_CLEAR(*out);
                }
            }
            Py_DECREF(key);
        }
    }
    else if (PyMethod_Check(obj)) {
        /* a Python method: inlined with its self */
        st = wrap_bound_method(tx, PyMethod_GET_SELF(obj), PyMethod_GET_FUNCTION(obj), 1,
                               source, out);
    }
    else if (PyCFunction_Check(obj) && PyCFunction_GET_SELF(obj) != NULL &&
             !PyModule_Check(PyCFunction_GET_SELF(obj)) && !PyType_Check(PyCFunction_GET_SELF(obj))) {
        /* a builtin method bound to an object (e.g. x.add, lst.append reaching a resume
           function): the method of its self, which is wrapped and guarded itself */
        PyObject *nm = PyUnicode_FromString(((PyCFunctionObject *)obj)->m_ml->ml_name);
        if (nm == NULL) {
            return TR_ERROR;
        }
        st = wrap_bound_method(tx, PyCFunction_GET_SELF(obj), nm, 0, source, out);
        Py_DECREF(nm);
    }
    else if (PyCallable_Check(obj)) {
        if (source != NULL && cdyn_guards_add_id(tx->guards, source, obj, PyFunction_Check(obj)) < 0) {
            return TR_ERROR;
        }
        *out = cdyn_value_new(VK_CALLABLE, obj, NULL, NULL, source);
    }
    else {
        /* Any other object: specialise on its type only; what is read through it is
           guarded at its own source. */
        if (source != NULL && cdyn_guards_add_type(tx->guards, source, Py_TYPE(obj)) < 0) {
            return TR_ERROR;
        }
        *out = cdyn_value_new(VK_OBJECT, obj, NULL, NULL, source);
    }
    if (st != TR_OK) {
        return st;
    }
    if (*out == NULL) {
        return TR_ERROR;
    }
    if (memo_source(tx, source, *out) < 0) {
        Py_CLEAR(*out);
        return TR_ERROR;
    }
    return TR_OK;
}

tr_status
cdyn_tx_materialize(cdyn_tx *tx, PyObject *v)
{
    cdyn_value *x = V(v), *w = NULL;
    PyObject *tmp = NULL, *real = NULL;
    tr_status st;
    if (!((x->kind == VK_TUPLE || x->kind == VK_LIST || x->kind == VK_DICT) &&
          (x->flag == 2 || x->flag == 3))) {
        return TR_OK;
    }
    if (x->flag == 3) {
        return cdyn_tx_unsupported(tx, "read of an input list after an append to it");
    }
    real = x->obj;   /* the real container, owned by x until swapped below */
    if (cdyn_guards_add_len(tx->guards, x->source, PyObject_Length(real)) < 0) {
        return TR_ERROR;
    }
    st = x->kind == VK_DICT ? wrap_dict(tx, real, x->source, &tmp)
                            : wrap_sequence(tx, real, x->source, x->kind, &tmp);
    if (st != TR_OK) {
        return st;
    }
    w = V(tmp);
    /* take over the wrapped items (and dict keys) */
    Py_XSETREF(x->items, Py_XNewRef(w->items));
    if (x->kind == VK_DICT) {
        Py_XSETREF(x->obj, Py_XNewRef(w->obj));
    }
    else {
        Py_CLEAR(x->obj);
    }
    x->flag = 0;
    Py_DECREF(tmp);
    return TR_OK;
}

/* ---- the FX graph ------------------------------------------------------------------- */

/* Map a value to (fake object, node argument). Both new refs. */
static tr_status
to_args(cdyn_tx *tx, PyObject *v, PyObject **fake, PyObject **node)
{
    cdyn_value *x = V(v);
    *fake = *node = NULL;
    if (cdyn_tx_materialize(tx, v) != TR_OK) {
        return PyErr_Occurred() ? TR_ERROR : TR_UNSUPPORTED;
    }
    switch (x->kind) {
    case VK_TENSOR:
        *fake = Py_NewRef(x->obj);
        *node = Py_NewRef(x->node);
        return TR_OK;
    case VK_CONST:
        *fake = Py_NewRef(x->obj);
        *node = Py_NewRef(x->obj);
        return TR_OK;
    case VK_TUPLE:
    case VK_LIST: {
        Py_ssize_t n = PyList_GET_SIZE(x->items);
        PyObject *fl = PyList_New(n), *nl = PyList_New(n);
        if (fl == NULL || nl == NULL) {
            Py_XDECREF(fl);
            Py_XDECREF(nl);
            return TR_ERROR;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *f = NULL, *nd = NULL;
            tr_status st = to_args(tx, PyList_GET_ITEM(x->items, i), &f, &nd);
            if (st != TR_OK) {
                Py_DECREF(fl);
                Py_DECREF(nl);
                return st;
            }
            PyList_SET_ITEM(fl, i, f);
            PyList_SET_ITEM(nl, i, nd);
        }
        if (x->kind == VK_TUPLE) {
            *fake = PyList_AsTuple(fl);
            *node = PyList_AsTuple(nl);
            Py_DECREF(fl);
            Py_DECREF(nl);
        }
        else {
            *fake = fl;
            *node = nl;
        }
        return (*fake && *node) ? TR_OK : TR_ERROR;
    }
    case VK_DICT: {
        PyObject *fd = PyDict_New(), *nd = PyDict_New();
        if (fd == NULL || nd == NULL) {
            Py_XDECREF(fd);
            Py_XDECREF(nd);
            return TR_ERROR;
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(x->obj); i++) {
            PyObject *f = NULL, *n = NULL;
            tr_status st = to_args(tx, PyList_GET_ITEM(x->items, i), &f, &n);
            if (st != TR_OK) {
                Py_DECREF(fd);
                Py_DECREF(nd);
                return st;
            }
            PyDict_SetItem(fd, PyList_GET_ITEM(x->obj, i), f);
            PyDict_SetItem(nd, PyList_GET_ITEM(x->obj, i), n);
            Py_DECREF(f);
            Py_DECREF(n);
        }
        *fake = fd;
        *node = nd;
        return TR_OK;
    }
    case VK_CALLABLE:
        /* dtypes-as-classes etc.: pass real callables through (e.g. torch.float32 is const) */
        *fake = Py_NewRef(x->obj);
        *node = Py_NewRef(x->obj);
        return TR_OK;
    default:
        return cdyn_tx_unsupported(tx, "argument of kind %d to a torch operation", (int)x->kind);
    }
}

/* Wrap the fake result of a graph call (node: the call's node). */
static tr_status
wrap_result(cdyn_tx *tx, PyObject *res, PyObject *node, PyObject **out)
{
    if (is_tensor(res)) {
        *out = cdyn_value_new(VK_TENSOR, res, node, NULL, NULL);
        return *out ? TR_OK : TR_ERROR;
    }
    if (res == Py_None || is_constant(res)) {
        *out = cdyn_value_const(res);
        return *out ? TR_OK : TR_ERROR;
    }
    if (PyTuple_Check(res) || PyList_Check(res)) {
        Py_ssize_t n = PySequence_Size(res);
        PyObject *items = PyList_New(n);
        if (items == NULL) {
            return TR_ERROR;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *elem = PySequence_GetItem(res, i), *idx = NULL, *args = NULL,
                     *sub = NULL, *r = NULL, *v = NULL;
            tr_status st = TR_ERROR;
            if (elem == NULL) {
                Py_DECREF(items);
                return TR_ERROR;
            }
            if (is_tensor(elem)) {
                idx = PyLong_FromSsize_t(i);
                args = idx ? PyTuple_Pack(2, node, idx) : NULL;
                sub = args ? PyObject_CallMethod(tx->graph, "call_function", "OO",
                                                 cdyn_G.getitem_fn, args) : NULL;
                r = sub ? PyObject_CallMethodObjArgs(tx->glue, str_set_example, sub, elem, NULL)
                        : NULL;
                if (r != NULL) {
                    v = cdyn_value_new(VK_TENSOR, elem, sub, NULL, NULL);
                }
                st = v ? TR_OK : TR_ERROR;
            }
            else if (elem == Py_None || is_constant(elem)) {
                v = cdyn_value_const(elem);
                st = v ? TR_OK : TR_ERROR;
            }
            else {
                st = cdyn_tx_unsupported(tx, "torch operation returned a %s",
                                         Py_TYPE(elem)->tp_name);
            }
            Py_XDECREF(elem);
            Py_XDECREF(idx);
            Py_XDECREF(args);
            Py_XDECREF(sub);
            Py_XDECREF(r);
            if (st != TR_OK) {
                Py_DECREF(items);
                return st;
            }
            PyList_SET_ITEM(items, i, v);
        }
        if (PyTuple_Check(res) && !PyTuple_CheckExact(res)) {
            /* a named tuple (e.g. torch.return_types.topk): keep its type for field access
               and to rebuild it (flag 4: obj is the type) */
            *out = cdyn_value_new(VK_TUPLE, (PyObject *)Py_TYPE(res), NULL, items, NULL);
            if (*out != NULL) {
                V(*out)->flag = 4;
            }
        }
        else {
            *out = cdyn_value_new(PyList_Check(res) ? VK_LIST : VK_TUPLE, NULL, NULL, items,
                                  NULL);
        }
        Py_DECREF(items);
        return *out ? TR_OK : TR_ERROR;
    }
    return cdyn_tx_unsupported(tx, "torch operation returned a %s", Py_TYPE(res)->tp_name);
}

tr_status
cdyn_tx_graph_call(cdyn_tx *tx, const char *op, PyObject *target, PyObject *module,
                   PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    PyObject *fargs = NULL, *nargs_t = NULL, *fkw = NULL, *nkw_d = NULL, *res = NULL,
             *node = NULL, *r = NULL, *opname = NULL;
    tr_status st = TR_ERROR;
    fargs = PyTuple_New(npos);
    nargs_t = PyTuple_New(npos);
    fkw = PyDict_New();
    nkw_d = PyDict_New();
    if (!fargs || !nargs_t || !fkw || !nkw_d) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *f = NULL, *n = NULL;
        st = to_args(tx, args[i], &f, &n);
        if (st != TR_OK) {
            goto done;
        }
        st = TR_ERROR;
        if (i < npos) {
            PyTuple_SET_ITEM(fargs, i, f);
            PyTuple_SET_ITEM(nargs_t, i, n);
        }
        else {
            PyObject *k = PyTuple_GET_ITEM(kwnames, i - npos);
            int e = PyDict_SetItem(fkw, k, f) < 0 || PyDict_SetItem(nkw_d, k, n) < 0;
            Py_DECREF(f);
            Py_DECREF(n);
            if (e) {
                goto done;
            }
        }
    }
    if (strcmp(op, "call_method") == 0) {
        res = PyObject_CallMethodObjArgs(tx->glue, str_fake_call_method, tx->fake_mode, target,
                                         fargs, fkw, NULL);
    }
    else {
        res = PyObject_CallMethodObjArgs(tx->glue, str_fake_call, tx->fake_mode,
                                         module ? module : target, fargs, fkw, NULL);
    }
    if (res == NULL) {
        st = cdyn_tx_unsupported(tx, "%s %R failed on fake tensors", op, target);
        goto done;
    }
    opname = PyUnicode_FromString(op);
    if (opname == NULL) {
        goto done;
    }
    node = PyObject_CallMethodObjArgs(tx->graph, str_create_node, opname, target, nargs_t, nkw_d,
                                      NULL);
    if (node == NULL) {
        goto done;
    }
    r = PyObject_CallMethodObjArgs(tx->glue, str_set_example, node, res, NULL);
    if (r == NULL) {
        goto done;
    }
    if (target == cdyn_G.set_grad_enabled) {
        tx->grad_enabled = npos > 0 && PyObject_IsTrue(PyTuple_GET_ITEM(fargs, 0)) == 1;
    }
    else {
        tx->n_call_nodes++;
    }
    st = wrap_result(tx, res, node, out);
done:
    Py_XDECREF(fargs);
    Py_XDECREF(nargs_t);
    Py_XDECREF(fkw);
    Py_XDECREF(nkw_d);
    Py_XDECREF(res);
    Py_XDECREF(node);
    Py_XDECREF(r);
    Py_XDECREF(opname);
    return st;
}

/* A parameter or buffer of an nn.Module as a get_attr node (source: its attribute path). */
static tr_status
wrap_module_tensor(cdyn_tx *tx, PyObject *tensor, PyObject *source, PyObject **out)
{
    PyObject *cached = NULL, *name = NULL, *node = NULL, *fake = NULL, *r = NULL;
    tr_status st = TR_ERROR;
    if (source == NULL) {
        return cdyn_tx_unsupported(tx, "parameter of a module with no source");
    }
    cached = PyDict_GetItemWithError(tx->by_source, cdyn_source_repr(source));
    if (cached != NULL) {
        *out = Py_NewRef(cached);
        return TR_OK;
    }
    if (PyErr_Occurred()) {
        return TR_ERROR;
    }
    /* the graph holds this parameter/buffer object: replacing it recompiles */
    if (cdyn_guards_add_id(tx->guards, source, tensor, 0) < 0) {
        goto done;
    }
    name = sanitized_name(source);
    if (name == NULL || PyDict_SetItem(tx->root, name, tensor) < 0) {
        goto done;
    }
    fake = PyObject_CallMethodObjArgs(tx->glue, str_fake_from_tensor, tx->fake_mode, tensor, NULL);
    if (fake == NULL) {
        st = cdyn_tx_unsupported(tx, "cannot fake a parameter");
        goto done;
    }
    node = PyObject_CallMethodOneArg(tx->graph, str_get_attr, name);
    if (node == NULL) {
        goto done;
    }
    r = PyObject_CallMethodObjArgs(tx->glue, str_set_example, node, fake, NULL);
    if (r == NULL) {
        goto done;
    }
    *out = cdyn_value_new(VK_TENSOR, fake, node, NULL, source);
    if (*out == NULL || memo_source(tx, source, *out) < 0) {
        goto done;
    }
    st = TR_OK;
done:
    Py_XDECREF(name);
    Py_XDECREF(node);
    Py_XDECREF(fake);
    Py_XDECREF(r);
    return st;
}

/* ---- attributes ------------------------------------------------------------------------- */

static tr_status
make_method(PyObject *name_or_func, PyObject *self, int is_func, PyObject **out)
{
    PyObject *items = PyList_New(1);
    if (items == NULL) {
        return TR_ERROR;
    }
    PyList_SET_ITEM(items, 0, Py_NewRef(self));
    *out = cdyn_value_new(VK_METHOD, name_or_func, NULL, items, NULL);
    Py_DECREF(items);
    if (*out == NULL) {
        return TR_ERROR;
    }
    V(*out)->flag = is_func;
    return TR_OK;
}

static int
name_is(PyObject *name, const char *s)
{
    return PyUnicode_CompareWithASCIIString(name, s) == 0;
}

static tr_status
tensor_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    static const char *meta[] = {"shape", "dtype", "device", "ndim", "requires_grad", "is_cuda",
                                 "layout", "is_sparse", "is_quantized", "is_meta", "is_cpu",
                                 NULL};
    static const char *views[] = {"T", "mT", "H", "mH", "real", "imag", NULL};
    static const char *bad[] = {"data", "grad", "grad_fn", "_base", "_version", NULL};
    for (int i = 0; meta[i]; i++) {
        if (name_is(name, meta[i])) {
            PyObject *r = PyObject_GetAttr(V(v)->obj, name);
            if (r == NULL) {
                return cdyn_tx_unsupported(tx, "tensor attribute failed");
            }
            *out = cdyn_value_const_steal(r);
            return *out ? TR_OK : TR_ERROR;
        }
    }
    for (int i = 0; views[i]; i++) {
        if (name_is(name, views[i])) {
            PyObject *nv = cdyn_value_const(name);
            PyObject *args[2] = {v, nv};
            tr_status st;
            if (nv == NULL) {
                return TR_ERROR;
            }
            st = cdyn_tx_graph_call(tx, "call_function", cdyn_G.getattr_fn, NULL, args, 2, NULL,
                                    out);
            Py_DECREF(nv);
            return st;
        }
    }
    for (int i = 0; bad[i]; i++) {
        if (name_is(name, bad[i])) {
            return cdyn_tx_unsupported(tx, "Tensor.%U is not traced", name);
        }
    }
    {
        /* a method of torch.Tensor; a data attribute (property / getset) is read from the
           fake tensor when it is a constant (is_nested, is_sparse, ...); anything else (an
           attribute error included) is left to plain Python */
        PyObject *attr = _PyType_Lookup((PyTypeObject *)cdyn_G.torch_tensor_type, name);
        if (attr != NULL && (PyObject_TypeCheck(attr, &PyProperty_Type) ||
                             Py_TYPE(attr) == &PyGetSetDescr_Type ||
                             Py_TYPE(attr) == &PyMemberDescr_Type)) {
            PyObject *val = PyObject_GetAttr(V(v)->obj, name);
            if (val == NULL) {
                return cdyn_tx_unsupported(tx, "Tensor attribute %U", name);
            }
            if (!is_constant(val)) {
                Py_DECREF(val);
                return cdyn_tx_unsupported(tx, "Tensor attribute %U is not a constant", name);
            }
            *out = cdyn_value_const_steal(val);
            return *out ? TR_OK : TR_ERROR;
        }
        if (attr == NULL || !PyCallable_Check(attr)) {
            return cdyn_tx_unsupported(tx, "Tensor attribute %U", name);
        }
    }
    return make_method(name, v, 0, out);
}

/* Look name up on an nn.Module: parameters, buffers, submodules, then plain attributes. */
static tr_status
module_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *mod = V(v)->obj, *src = NULL, *d = NULL, *found = NULL, *attr = NULL;
    tr_status st = TR_ERROR;
    static PyObject *const *dicts[3] = {&str_parameters, &str_buffers, &str_modules};
    if (V(v)->source != NULL) {
        src = cdyn_source_attr(V(v)->source, name);
        if (src == NULL) {
            return TR_ERROR;
        }
    }
    for (int i = 0; i < 3 && found == NULL; i++) {
        d = PyObject_GetAttr(mod, *dicts[i]);
        if (d == NULL) {
            PyErr_Clear();
            continue;
        }
        if (PyDict_Check(d)) {
            found = PyDict_GetItemWithError(d, name);
            if (found != NULL) {
                Py_INCREF(found);
                if (found == Py_None) {
                    Py_CLEAR(found);
                    Py_DECREF(d);
                    d = NULL;
                    break;   /* a registered None parameter: a constant below */
                }
                if (i < 2) {
                    st = wrap_module_tensor(tx, found, src, out);
                }
                else {
                    /* a submodule: ID_MATCHed (read through _modules, source.c), so
                       swapping it recompiles */
                    st = cdyn_tx_wrap_real(tx, found, src, out);
                }
            }
            else if (PyErr_Occurred()) {
                Py_DECREF(d);
                goto done;
            }
        }
        Py_DECREF(d);
    }
    if (found != NULL) {
        Py_DECREF(found);
        goto done;
    }
    attr = PyObject_GetAttr(mod, name);
    if (attr == NULL) {
        st = cdyn_tx_unsupported(tx, "module attribute %U", name);
        goto done;
    }
    if (PyMethod_Check(attr) && PyMethod_GET_SELF(attr) == mod &&
        PyFunction_Check(PyMethod_GET_FUNCTION(attr))) {
        st = make_method(PyMethod_GET_FUNCTION(attr), v, 1, out);
        goto done;
    }
    st = cdyn_tx_wrap_real(tx, attr, src, out);
done:
    Py_XDECREF(src);
    Py_XDECREF(attr);
    return st;
}

tr_status
cdyn_tx_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    cdyn_value *x = V(v);
    PyObject *attr = NULL, *src = NULL;
    tr_status st;
    switch (x->kind) {
    case VK_TENSOR:
        return tensor_getattr(tx, v, name, out);
    case VK_NNMODULE:
        return module_getattr(tx, v, name, out);
    case VK_DICT:
    case VK_LIST:
    case VK_TUPLE: {
        PyTypeObject *base = x->kind == VK_DICT ? &PyDict_Type
                             : x->kind == VK_LIST ? &PyList_Type : &PyTuple_Type;
        if (x->kind == VK_TUPLE && x->flag == 4) {
            /* a field of a named tuple */
            PyObject *fields = PyObject_GetAttrString(x->obj, "__match_args__");
            Py_ssize_t idx = -1;
            if (fields == NULL) {
                PyErr_Clear();
            }
            else if (PyTuple_Check(fields)) {
                for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields); i++) {
                    if (PyUnicode_Compare(PyTuple_GET_ITEM(fields, i), name) == 0) {
                        idx = i;
                        break;
                    }
                }
            }
            Py_XDECREF(fields);
            if (idx >= 0 && idx < PyList_GET_SIZE(x->items)) {
                *out = Py_NewRef(PyList_GET_ITEM(x->items, idx));
                return TR_OK;
            }
        }
        if (_PyType_Lookup(base, name) == NULL) {
            return cdyn_tx_unsupported(tx, "attribute %U of a %s", name, base->tp_name);
        }
        return make_method(name, v, 0, out);
    }
    case VK_CONST:
        attr = PyObject_GetAttr(x->obj, name);
        if (attr == NULL) {
            return cdyn_tx_unsupported(tx, "constant attribute %U", name);
        }
        if (is_constant(attr)) {
            *out = cdyn_value_const_steal(attr);
        }
        else {
            *out = cdyn_value_new(VK_CALLABLE, attr, NULL, NULL, NULL);
            Py_DECREF(attr);
        }
        return *out ? TR_OK : TR_ERROR;
    case VK_PYMODULE:
    case VK_CALLABLE:
    case VK_OBJECT: {
        int trusted = 0;
        if (x->kind == VK_OBJECT && x->flag == 1) {
            return cdyn_tx_unsupported(tx, "attribute of an object mutated while tracing");
        }
        if (x->kind == VK_OBJECT && x->flag == 5) {
            /* super(cls, self).name: a method of a base class, inlined with self */
            PyObject *self = PyList_GET_ITEM(x->items, 0);
            attr = PyObject_GetAttr(x->obj, name);
            if (attr == NULL) {
                return cdyn_tx_unsupported(tx, "super() attribute %U", name);
            }
            if (PyMethod_Check(attr) && PyMethod_GET_SELF(attr) == V(self)->obj &&
                PyFunction_Check(PyMethod_GET_FUNCTION(attr))) {
                st = make_method(PyMethod_GET_FUNCTION(attr), self, 1, out);
            }
            else {
                st = cdyn_tx_unsupported(tx, "super() attribute %U is not a method", name);
            }
            Py_DECREF(attr);
            return st;
        }
        if (x->kind == VK_PYMODULE) {
            const char *m = pymodule_name(x->obj);
            trusted = startswith(m, "torch") || strcmp(m, "math") == 0 ||
                      strcmp(m, "operator") == 0 || strcmp(m, "builtins") == 0;
        }
        else if (x->kind == VK_CALLABLE) {
            trusted = module_startswith(x->obj, "torch") || PyType_Check(x->obj);
        }
        attr = PyObject_GetAttr(x->obj, name);
        if (attr == NULL) {
            return cdyn_tx_unsupported(tx, "attribute %U", name);
        }
        if (x->kind == VK_OBJECT &&
            ((PyCFunction_Check(attr) && PyCFunction_GET_SELF(attr) == x->obj) ||
             (PyMethod_Check(attr) && PyMethod_GET_SELF(attr) == x->obj &&
              !PyFunction_Check(PyMethod_GET_FUNCTION(attr))))) {
            /* a builtin method bound to the object: fixed by the object's TYPE_MATCH */
            *out = cdyn_value_new(VK_CALLABLE, attr, NULL, NULL, NULL);
            Py_DECREF(attr);
            return *out ? TR_OK : TR_ERROR;
        }
        if (x->source != NULL && (!trusted || is_tensor(attr))) {
            src = cdyn_source_attr(x->source, name);
            if (src == NULL) {
                Py_DECREF(attr);
                return TR_ERROR;
            }
        }
        else if (!trusted && x->kind == VK_OBJECT) {
            Py_DECREF(attr);
            return cdyn_tx_unsupported(tx, "attribute of an object with no source");
        }
        st = cdyn_tx_wrap_real(tx, attr, src, out);
        Py_DECREF(attr);
        Py_XDECREF(src);
        return st;
    }
    default:
        return cdyn_tx_unsupported(tx, "attribute %U of %S", name, v);
    }
}

/* ---- iteration and truth ------------------------------------------------------------------ */

tr_status
cdyn_tx_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    cdyn_value *x = V(v);
    tr_status mst = cdyn_tx_materialize(tx, v);
    if (mst != TR_OK) {
        return mst;
    }
    switch (x->kind) {
    case VK_TUPLE:
    case VK_LIST:
        *out_list = PyList_GetSlice(x->items, 0, PyList_GET_SIZE(x->items));
        return *out_list ? TR_OK : TR_ERROR;
    case VK_ITER: {
        Py_ssize_t n = PyList_GET_SIZE(x->items);
        cdyn_tx_mutated(tx, v);
        *out_list = PyList_GetSlice(x->items, x->pos, n);
        x->pos = n;
        return *out_list ? TR_OK : TR_ERROR;
    }
    case VK_DICT: {
        Py_ssize_t n = PyList_GET_SIZE(x->obj);
        PyObject *l = PyList_New(n);
        if (l == NULL) {
            return TR_ERROR;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *k = cdyn_value_const(PyList_GET_ITEM(x->obj, i));
            if (k == NULL) {
                Py_DECREF(l);
                return TR_ERROR;
            }
            PyList_SET_ITEM(l, i, k);
        }
        *out_list = l;
        return TR_OK;
    }
    case VK_CONST: {
        PyObject *seq = NULL, *l = NULL;
        if (!(PyTuple_Check(x->obj) || PyList_Check(x->obj) || PyRange_Check(x->obj) ||
              PyUnicode_Check(x->obj) || PyFrozenSet_Check(x->obj))) {
            return cdyn_tx_unsupported(tx, "iteration over a %s", Py_TYPE(x->obj)->tp_name);
        }
        if (PyObject_Length(x->obj) > 100000) {
            PyErr_Clear();
            return cdyn_tx_unsupported(tx, "iteration over more than 100000 constants");
        }
        seq = PySequence_List(x->obj);
        if (seq == NULL) {
            return TR_ERROR;
        }
        l = PyList_New(PyList_GET_SIZE(seq));
        for (Py_ssize_t i = 0; l && i < PyList_GET_SIZE(seq); i++) {
            PyObject *c = cdyn_value_const(PyList_GET_ITEM(seq, i));
            if (c == NULL) {
                Py_CLEAR(l);
                break;
            }
            PyList_SET_ITEM(l, i, c);
        }
        Py_DECREF(seq);
        *out_list = l;
        return l ? TR_OK : TR_ERROR;
    }
    case VK_NNMODULE: {
        PyObject *mods = NULL, *l = NULL;
        int is_list = PyObject_TypeCheck(x->obj, (PyTypeObject *)cdyn_G.modulelist_type) ||
                      PyObject_TypeCheck(x->obj, (PyTypeObject *)cdyn_G.sequential_type);
        if (!is_list) {
            return cdyn_tx_unsupported(tx, "iteration over a %s", Py_TYPE(x->obj)->tp_name);
        }
        mods = PyObject_GetAttr(x->obj, str_modules);
        if (mods == NULL) {
            return TR_ERROR;
        }
        /* the loop is unrolled over the children: their number is guarded */
        if (x->source != NULL && PyDict_Check(mods) &&
            cdyn_guards_add_len(tx->guards, x->source, PyDict_GET_SIZE(mods)) < 0) {
            Py_DECREF(mods);
            return TR_ERROR;
        }
        l = PyList_New(0);
        if (l == NULL) {
            Py_DECREF(mods);
            return TR_ERROR;
        }
        Py_ssize_t pos = 0, i = 0;
        PyObject *k, *m;
        while (PyDict_Next(mods, &pos, &k, &m)) {
            PyObject *src = NULL, *c = NULL;
            tr_status st;
            i++;
            /* the child by its registered name (getattr(seq, "0")): guards read it from
               _modules directly (source.c), much cheaper than ModuleList.__getitem__ */
            src = x->source ? cdyn_source_attr(x->source, k) : NULL;
            if (x->source != NULL && src == NULL) {
                Py_DECREF(l);
                Py_DECREF(mods);
                return TR_ERROR;
            }
            st = cdyn_tx_wrap_real(tx, m, src, &c);   /* ID_MATCHed when it has a source */
            Py_XDECREF(src);
            if (st != TR_OK || PyList_Append(l, c) < 0) {
                Py_XDECREF(c);
                Py_DECREF(l);
                Py_DECREF(mods);
                return st != TR_OK ? st : TR_ERROR;
            }
            Py_DECREF(c);
        }
        Py_DECREF(mods);
        *out_list = l;
        return TR_OK;
    }
    case VK_TENSOR: {
        PyObject *shape = PyObject_GetAttrString(x->obj, "shape"), *l = NULL;
        Py_ssize_t n;
        if (shape == NULL) {
            return TR_ERROR;
        }
        if (PyTuple_GET_SIZE(shape) == 0) {
            Py_DECREF(shape);
            return cdyn_tx_unsupported(tx, "iteration over a 0-d tensor");
        }
        n = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, 0));
        Py_DECREF(shape);
        l = PyList_New(0);
        for (Py_ssize_t i = 0; l && i < n; i++) {
            PyObject *idx = cdyn_value_const_steal(PyLong_FromSsize_t(i)), *r = NULL;
            PyObject *args[2] = {v, idx};
            tr_status st;
            if (idx == NULL) {
                Py_CLEAR(l);
                return TR_ERROR;
            }
            st = cdyn_tx_graph_call(tx, "call_function", cdyn_G.getitem_fn, NULL, args, 2, NULL,
                                    &r);
            Py_DECREF(idx);
            if (st != TR_OK) {
                Py_DECREF(l);
                return st;
            }
            PyList_Append(l, r);
            Py_DECREF(r);
        }
        *out_list = l;
        return l ? TR_OK : TR_ERROR;
    }
    default:
        return cdyn_tx_unsupported(tx, "iteration over %S", v);
    }
}

tr_status
cdyn_tx_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    cdyn_value *x = V(v);
    int r;
    if (cdyn_tx_materialize(tx, v) != TR_OK) {
        return PyErr_Occurred() ? TR_ERROR : TR_UNSUPPORTED;
    }
    switch (x->kind) {
    case VK_CONST:
    case VK_NNMODULE:
        r = PyObject_IsTrue(x->obj);
        if (r < 0) {
            return cdyn_tx_unsupported(tx, "truth value failed");
        }
        *out = r;
        return TR_OK;
    case VK_TUPLE:
    case VK_LIST:
    case VK_DICT:
        *out = PyList_GET_SIZE(x->items) > 0;
        return TR_OK;
    case VK_PYMODULE:
    case VK_CALLABLE:
    case VK_FUNCTION:
    case VK_METHOD:
    case VK_ITER:
        *out = 1;
        return TR_OK;
    case VK_TENSOR:
        return cdyn_tx_unsupported(tx, "data-dependent branch on a tensor value");
    default:
        return cdyn_tx_unsupported(tx, "truth value of %S", v);
    }
}

/* ---- calls ----------------------------------------------------------------------------- */

/* Bind arguments to the parameters of code and inline it. defaults: a list of values for
 * the last positional parameters, or NULL; kwdefaults: dict name -> value, or NULL. */
static tr_status
inline_call(cdyn_tx *tx, PyCodeObject *code, PyObject *self, PyObject *const *args,
            Py_ssize_t nargs, PyObject *kwnames, PyObject *defaults, PyObject *kwdefaults,
            PyObject *closure_cells, PyObject *globals, PyObject *builtins,
            PyObject *globals_source, int top_globals, PyObject **out)
{
    int n = code->co_nlocalsplus, argc = code->co_argcount, kwonly = code->co_kwonlyargcount;
    int posonly = code->co_posonlyargcount;
    int has_varargs = (code->co_flags & CO_VARARGS) != 0;
    int has_varkw = (code->co_flags & CO_VARKEYWORDS) != 0;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    Py_ssize_t npos = nargs - nkw;
    PyObject **locals = PyMem_Calloc(n + 1, sizeof(PyObject *));
    PyObject *all = NULL, *kwdict_keys = NULL, *kwdict_vals = NULL;
    tr_status st = TR_ERROR;
    if (locals == NULL) {
        PyErr_NoMemory();
        return TR_ERROR;
    }
    all = PyList_New(0);
    if (all == NULL) {
        goto fail;
    }
    if (self != NULL && PyList_Append(all, self) < 0) {
        goto fail;
    }
    for (Py_ssize_t i = 0; i < npos; i++) {
        if (PyList_Append(all, args[i]) < 0) {
            goto fail;
        }
    }
    Py_ssize_t total_pos = PyList_GET_SIZE(all);
    for (Py_ssize_t i = 0; i < total_pos && i < argc; i++) {
        locals[i] = Py_NewRef(PyList_GET_ITEM(all, i));
    }
    if (has_varargs) {
        PyObject *rest = PyList_GetSlice(all, argc < total_pos ? argc : total_pos, total_pos);
        if (rest == NULL) {
            goto fail;
        }
        locals[argc + kwonly] = cdyn_value_new(VK_TUPLE, NULL, NULL, rest, NULL);
        Py_DECREF(rest);
        if (locals[argc + kwonly] == NULL) {
            goto fail;
        }
    }
    else if (total_pos > argc) {
        st = cdyn_tx_unsupported(tx, "too many positional arguments to %U", code->co_qualname);
        goto fail;
    }
    if (has_varkw) {
        kwdict_keys = PyList_New(0);
        kwdict_vals = PyList_New(0);
        if (kwdict_keys == NULL || kwdict_vals == NULL) {
            goto fail;
        }
    }
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *kname = PyTuple_GET_ITEM(kwnames, k);
        int found = -1;
        for (int i = posonly; i < argc + kwonly; i++) {
            if (PyUnicode_Compare(PyTuple_GET_ITEM(code->co_localsplusnames, i), kname) == 0) {
                found = i;
                break;
            }
        }
        if (found >= 0 && locals[found] == NULL) {
            locals[found] = Py_NewRef(args[npos + k]);
        }
        else if (found < 0 && has_varkw) {
            if (PyList_Append(kwdict_keys, kname) < 0 ||
                PyList_Append(kwdict_vals, args[npos + k]) < 0) {
                goto fail;
            }
        }
        else {
            st = cdyn_tx_unsupported(tx, "bad keyword argument %U to %U", kname,
                                     code->co_qualname);
            goto fail;
        }
    }
    if (has_varkw) {
        int slot = argc + kwonly + (has_varargs ? 1 : 0);
        locals[slot] = cdyn_value_new(VK_DICT, kwdict_keys, NULL, kwdict_vals, NULL);
        if (locals[slot] == NULL) {
            goto fail;
        }
    }
    if (defaults != NULL) {
        Py_ssize_t nd = PyList_GET_SIZE(defaults);
        for (Py_ssize_t j = 0; j < nd; j++) {
            Py_ssize_t i = argc - nd + j;
            if (i >= 0 && locals[i] == NULL) {
                locals[i] = Py_NewRef(PyList_GET_ITEM(defaults, j));
            }
        }
    }
    for (int i = argc; i < argc + kwonly; i++) {
        if (locals[i] == NULL && kwdefaults != NULL) {
            PyObject *d = PyDict_GetItemWithError(kwdefaults,
                                                  PyTuple_GET_ITEM(code->co_localsplusnames, i));
            if (d != NULL) {
                locals[i] = Py_NewRef(d);
            }
            else if (PyErr_Occurred()) {
                goto fail;
            }
        }
    }
    for (int i = 0; i < argc + kwonly; i++) {
        if (locals[i] == NULL) {
            st = cdyn_tx_unsupported(tx, "missing argument %U of %U",
                                     PyTuple_GET_ITEM(code->co_localsplusnames, i),
                                     code->co_qualname);
            goto fail;
        }
    }
    Py_DECREF(all);
    Py_XDECREF(kwdict_keys);
    Py_XDECREF(kwdict_vals);
    st = cdyn_tx_inline(tx, code, locals, closure_cells, globals, builtins, globals_source,
                        top_globals, out);
    PyMem_Free(locals);
    return st;
fail:
    for (int i = 0; i < n; i++) {
        Py_XDECREF(locals[i]);
    }
    PyMem_Free(locals);
    Py_XDECREF(all);
    Py_XDECREF(kwdict_keys);
    Py_XDECREF(kwdict_vals);
    return st;
}

/* Inline a real Python function object (fn_value: its value, for sources). */
static tr_status
inline_real_function(cdyn_tx *tx, PyObject *func, PyObject *fn_source, PyObject *self,
                     PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyFunctionObject *f = (PyFunctionObject *)func;
    PyObject *defaults = NULL, *kwdefaults = NULL, *cells = NULL;
    tr_status st = TR_ERROR;
    PyCodeObject *code = (PyCodeObject *)f->func_code;
    int rule = cdyn_code_trace_rule(code, f->func_globals);
    if (rule == CDYN_RULE_SKIP || rule == CDYN_RULE_BREAK) {
        /* trace_rules: library internals are never traced, not even inlined */
        return cdyn_tx_unsupported(tx, "call to %R (trace rule \"%s\": never traced)", func,
                                   cdyn_rule_name((cdyn_rule)rule));
    }
    if (f->func_defaults != NULL) {
        Py_ssize_t nd = PyTuple_GET_SIZE(f->func_defaults);
        defaults = PyList_New(nd);
        if (defaults == NULL) {
            goto done;
        }
        for (Py_ssize_t i = 0; i < nd; i++) {
            PyObject *v = NULL;
            st = cdyn_tx_wrap_real(tx, PyTuple_GET_ITEM(f->func_defaults, i), NULL, &v);
            if (st != TR_OK) {
                goto done;
            }
            st = TR_ERROR;
            PyList_SET_ITEM(defaults, i, v);
        }
    }
    if (f->func_kwdefaults != NULL && PyDict_Check(f->func_kwdefaults)) {
        PyObject *k, *d;
        Py_ssize_t pos = 0;
        kwdefaults = PyDict_New();
        if (kwdefaults == NULL) {
            goto done;
        }
        while (PyDict_Next(f->func_kwdefaults, &pos, &k, &d)) {
            PyObject *v = NULL;
            st = cdyn_tx_wrap_real(tx, d, NULL, &v);
            if (st != TR_OK) {
                goto done;
            }
            st = TR_ERROR;
            if (PyDict_SetItem(kwdefaults, k, v) < 0) {
                Py_DECREF(v);
                goto done;
            }
            Py_DECREF(v);
        }
    }
    if (f->func_closure != NULL) {
        Py_ssize_t nc = PyTuple_GET_SIZE(f->func_closure);
        PyObject *csrc = NULL;
        cells = PyList_New(nc);
        if (cells == NULL) {
            goto done;
        }
        if (fn_source != NULL) {
            csrc = cdyn_source_attr(fn_source, str_closure);
            if (csrc == NULL) {
                goto done;
            }
        }
        for (Py_ssize_t i = 0; i < nc; i++) {
            PyObject *items = PyList_New(0), *isrc = NULL, *src = NULL, *idx = NULL, *cell = NULL;
            if (items == NULL) {
                Py_XDECREF(csrc);
                goto done;
            }
            if (csrc != NULL) {
                idx = PyLong_FromSsize_t(i);
                isrc = idx ? cdyn_source_item(csrc, idx) : NULL;
                src = isrc ? cdyn_source_attr(isrc, str_cell_contents) : NULL;
            }
            cell = cdyn_value_new(VK_CELL, PyTuple_GET_ITEM(f->func_closure, i), NULL, items, src);
            Py_XDECREF(items);
            Py_XDECREF(idx);
            Py_XDECREF(isrc);
            Py_XDECREF(src);
            if (cell == NULL) {
                Py_XDECREF(csrc);
                goto done;
            }
            PyList_SET_ITEM(cells, i, cell);
        }
        Py_XDECREF(csrc);
    }
    {
        int top = f->func_globals == tx->frame->f_globals;
        PyObject *gsrc = NULL;
        if (!top && !module_startswith(func, "torch")) {
            /* torch's own module globals (F, math, ...) are trusted, not guarded */
            gsrc = cdyn_source_const(f->func_globals, f->func_module ? f->func_module : Py_None);
            if (gsrc == NULL) {
                goto done;
            }
        }
        st = inline_call(tx, code, self, args, nargs, kwnames, defaults, kwdefaults, cells,
                         f->func_globals, f->func_builtins, gsrc, top, out);
        Py_XDECREF(gsrc);
    }
done:
    Py_XDECREF(defaults);
    Py_XDECREF(kwdefaults);
    Py_XDECREF(cells);
    return st;
}

/* 1 when every value in args is a VK_CONST. */
static int
all_const(PyObject *const *args, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (V(args[i])->kind != VK_CONST) {
            return 0;
        }
    }
    return 1;
}

/* Call a real callable on constant args (real objects); wrap a constant result. */
static tr_status
call_on_constants(cdyn_tx *tx, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames, PyObject **out)
{
    PyObject *objs[64], *res = NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs > 64) {
        return cdyn_tx_unsupported(tx, "too many arguments");
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        objs[i] = V(args[i])->obj;
    }
    res = PyObject_Vectorcall(fn, objs, nargs - nkw, kwnames);
    if (res == NULL) {
        return cdyn_tx_unsupported(tx, "constant call of %R failed", fn);
    }
    if (!is_constant(res) && !PyList_CheckExact(res)) {
        Py_DECREF(res);
        return cdyn_tx_unsupported(tx, "constant call of %R gave a non-constant", fn);
    }
    if (PyList_CheckExact(res)) {   /* e.g. sorted(): a list of constants */
        PyObject *t = PyList_AsTuple(res);
        Py_DECREF(res);
        if (t == NULL) {
            return TR_ERROR;
        }
        PyObject *lst = NULL;
        tr_status st = TR_OK;
        *out = cdyn_value_const(t);
        Py_DECREF(t);
        if (*out == NULL) {
            return TR_ERROR;
        }
        st = cdyn_tx_unpack(tx, *out, &lst);
        Py_DECREF(*out);
        *out = NULL;
        if (st != TR_OK) {
            return st;
        }
        *out = cdyn_value_new(VK_LIST, NULL, NULL, lst, NULL);
        Py_DECREF(lst);
        return *out ? TR_OK : TR_ERROR;
    }
    *out = cdyn_value_const_steal(res);
    return *out ? TR_OK : TR_ERROR;
}

static tr_status
new_iter(PyObject *items, PyObject **out)
{
    *out = cdyn_value_new(VK_ITER, NULL, NULL, items, NULL);
    return *out ? TR_OK : TR_ERROR;
}

/* Builtins with symbolic meaning. *handled = 0 when fn is not one of them. */
static tr_status
call_builtin(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames, PyObject **out, int *handled)
{
    const char *name;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    tr_status st = TR_OK;
    *handled = 1;
    if (fn == cdyn_G.no_grad || fn == cdyn_G.enable_grad) {
        if (nargs != 0) {
            return cdyn_tx_unsupported(tx, "grad-mode context with arguments");
        }
        *out = cdyn_value_new(VK_GRADCTX, NULL, NULL, NULL, NULL);
        if (*out == NULL) {
            return TR_ERROR;
        }
        V(*out)->flag = fn == cdyn_G.enable_grad;
        return TR_OK;
    }
    if (fn == cdyn_G.is_grad_enabled && nargs == 0) {
        *out = cdyn_value_const(tx->grad_enabled ? Py_True : Py_False);
        return *out ? TR_OK : TR_ERROR;
    }
    if (fn == cdyn_G.set_grad_enabled_cls) {
        /* torch.set_grad_enabled(mode) sets the mode at once (also usable in a with) */
        PyObject *mv = NULL, *r = NULL;
        int prev = tx->grad_enabled, mode;
        if (nargs != 1 || nkw != 0 || V(args[0])->kind != VK_CONST) {
            return cdyn_tx_unsupported(tx, "torch.set_grad_enabled with a non-constant mode");
        }
        mode = PyObject_IsTrue(V(args[0])->obj);
        if (mode < 0) {
            return TR_ERROR;
        }
        mv = cdyn_value_const(mode ? Py_True : Py_False);
        if (mv == NULL) {
            return TR_ERROR;
        }
        st = cdyn_tx_graph_call(tx, "call_function", cdyn_G.set_grad_enabled, NULL, &mv, 1,
                                NULL, &r);
        Py_DECREF(mv);
        Py_XDECREF(r);
        if (st != TR_OK) {
            return st;
        }
        *out = cdyn_value_new(VK_GRADCTX, prev ? Py_True : Py_False, NULL, NULL, NULL);
        if (*out == NULL) {
            return TR_ERROR;
        }
        V(*out)->flag = mode;
        V(*out)->pos = 1;   /* already applied; obj holds the previous mode */
        return TR_OK;
    }
    if (fn == (PyObject *)&PySuper_Type && nargs == 2 && nkw == 0 &&
        (V(args[0])->kind == VK_CALLABLE || V(args[0])->kind == VK_CONST) &&
        PyType_Check(V(args[0])->obj) && V(args[1])->obj != NULL &&
        (V(args[1])->kind == VK_NNMODULE || V(args[1])->kind == VK_OBJECT)) {
        /* super(cls, self): a proxy whose methods are inlined with self (flag 5) */
        PyObject *sup = PyObject_CallFunctionObjArgs(fn, V(args[0])->obj, V(args[1])->obj, NULL);
        PyObject *items = NULL;
        if (sup == NULL) {
            return cdyn_tx_unsupported(tx, "super() failed");
        }
        items = PyList_New(1);
        if (items == NULL) {
            Py_DECREF(sup);
            return TR_ERROR;
        }
        PyList_SET_ITEM(items, 0, Py_NewRef(args[1]));
        *out = cdyn_value_new(VK_OBJECT, sup, NULL, items, NULL);
        Py_DECREF(sup);
        Py_DECREF(items);
        if (*out == NULL) {
            return TR_ERROR;
        }
        V(*out)->flag = 5;
        return TR_OK;
    }
    if (fn == (PyObject *)&PyRange_Type || fn == (PyObject *)&PySlice_Type) {
        if (!all_const(args, nargs)) {
            return cdyn_tx_unsupported(tx, "range/slice of non-constants");
        }
        return call_on_constants(tx, fn, args, nargs, kwnames, out);
    }
    if (fn == (PyObject *)&PyList_Type || fn == (PyObject *)&PyTuple_Type) {
        PyObject *items = NULL;
        if (nkw != 0 || npos > 1) {
            return cdyn_tx_unsupported(tx, "list/tuple with keyword arguments");
        }
        if (npos == 0) {
            items = PyList_New(0);
            st = items ? TR_OK : TR_ERROR;
        }
        else {
            st = cdyn_tx_unpack(tx, args[0], &items);
        }
        if (st != TR_OK) {
            return st;
        }
        *out = cdyn_value_new(fn == (PyObject *)&PyList_Type ? VK_LIST : VK_TUPLE, NULL, NULL,
                              items, NULL);
        Py_DECREF(items);
        return *out ? TR_OK : TR_ERROR;
    }
    if (fn == (PyObject *)&PyDict_Type) {
        PyObject *keys = NULL, *vals = NULL;
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
        if (keys && vals) {
            *out = cdyn_value_new(VK_DICT, keys, NULL, vals, NULL);
        }
        Py_XDECREF(keys);
        Py_XDECREF(vals);
        return (keys && vals && *out) ? TR_OK : TR_ERROR;
    }
    if (!PyCFunction_Check(fn) || PyCFunction_GET_SELF(fn) == NULL ||
        !PyModule_Check(PyCFunction_GET_SELF(fn)) ||
        strcmp(pymodule_name(PyCFunction_GET_SELF(fn)), "builtins") != 0) {
        if (fn == (PyObject *)&PyZip_Type || fn == (PyObject *)&PyEnum_Type) {
            name = fn == (PyObject *)&PyZip_Type ? "zip" : "enumerate";
        }
        else {
            *handled = 0;
            return TR_OK;
        }
    }
    else {
        name = ((PyCFunctionObject *)fn)->m_ml->ml_name;
    }
    if (strcmp(name, "len") == 0 && nargs == 1) {
        cdyn_value *x = V(args[0]);
        Py_ssize_t n = -1;
        st = cdyn_tx_materialize(tx, args[0]);
        if (st != TR_OK) {
            return st;
        }
        if (x->kind == VK_TUPLE || x->kind == VK_LIST || x->kind == VK_DICT) {
            n = PyList_GET_SIZE(x->items);
        }
        else if (x->kind == VK_CONST || x->kind == VK_NNMODULE) {
            n = PyObject_Length(x->obj);
        }
        else if (x->kind == VK_TENSOR) {
            n = PyObject_Length(x->obj);
        }
        if (n < 0) {
            return cdyn_tx_unsupported(tx, "len() of %S", args[0]);
        }
        *out = cdyn_value_const_steal(PyLong_FromSsize_t(n));
        return *out ? TR_OK : TR_ERROR;
    }
    if (strcmp(name, "isinstance") == 0 && nargs == 2) {
        cdyn_value *x = V(args[0]), *c = V(args[1]);
        PyObject *probe = NULL, *cls = NULL;
        int r;
        switch (x->kind) {
        case VK_TUPLE: probe = (PyObject *)&PyTuple_Type; break;
        case VK_LIST: probe = (PyObject *)&PyList_Type; break;
        case VK_DICT: probe = (PyObject *)&PyDict_Type; break;
        case VK_TENSOR: case VK_CONST: case VK_NNMODULE: case VK_PYMODULE: case VK_CALLABLE:
        case VK_OBJECT:
            probe = x->obj;
            break;
        default:
            return cdyn_tx_unsupported(tx, "isinstance of %S", args[0]);
        }
        if (c->kind == VK_CONST || c->kind == VK_CALLABLE) {
            cls = Py_NewRef(c->obj);
        }
        else if (c->kind == VK_TUPLE) {
            Py_ssize_t n;
            st = cdyn_tx_materialize(tx, args[1]);
            if (st != TR_OK) {
                return st;
            }
            n = PyList_GET_SIZE(c->items);
            cls = PyTuple_New(n);
            for (Py_ssize_t i = 0; cls && i < n; i++) {
                cdyn_value *e = V(PyList_GET_ITEM(c->items, i));
                if (e->obj == NULL) {
                    Py_CLEAR(cls);
                    return cdyn_tx_unsupported(tx, "isinstance class tuple");
                }
                PyTuple_SET_ITEM(cls, i, Py_NewRef(e->obj));
            }
        }
        if (cls == NULL) {
            return PyErr_Occurred() ? TR_ERROR : cdyn_tx_unsupported(tx, "isinstance class");
        }
        if (x->kind == VK_TUPLE || x->kind == VK_LIST || x->kind == VK_DICT) {
            r = PyObject_IsSubclass(probe, cls);
        }
        else {
            r = PyObject_IsInstance(probe, cls);
        }
        Py_DECREF(cls);
        if (r < 0) {
            return cdyn_tx_unsupported(tx, "isinstance failed");
        }
        *out = cdyn_value_const(r ? Py_True : Py_False);
        return *out ? TR_OK : TR_ERROR;
    }
    if (strcmp(name, "zip") == 0 || strcmp(name, "enumerate") == 0) {
        PyObject *lists[16], *res = NULL;
        Py_ssize_t n = -1, start = 0, nl = strcmp(name, "zip") == 0 ? npos : 1;
        if (nkw != 0 || nl > 16 || nl < 1) {
            return cdyn_tx_unsupported(tx, "%s with these arguments", name);
        }
        if (strcmp(name, "enumerate") == 0 && npos == 2) {
            if (V(args[1])->kind != VK_CONST) {
                return cdyn_tx_unsupported(tx, "enumerate start");
            }
            start = PyLong_AsSsize_t(V(args[1])->obj);
        }
        for (Py_ssize_t i = 0; i < nl; i++) {
            st = cdyn_tx_unpack(tx, args[i], &lists[i]);
            if (st != TR_OK) {
                for (Py_ssize_t j = 0; j < i; j++) {
                    Py_DECREF(lists[j]);
                }
                return st;
            }
            if (n < 0 || PyList_GET_SIZE(lists[i]) < n) {
                n = PyList_GET_SIZE(lists[i]);
            }
        }
        res = PyList_New(n);
        for (Py_ssize_t k = 0; res && k < n; k++) {
            PyObject *tup[16], *t = NULL;
            Py_ssize_t m = 0;
            if (strcmp(name, "enumerate") == 0) {
                tup[m++] = cdyn_value_const_steal(PyLong_FromSsize_t(start + k));
            }
            for (Py_ssize_t i = 0; i < nl; i++) {
                tup[m++] = Py_NewRef(PyList_GET_ITEM(lists[i], k));
            }
            t = cdyn_value_seq(VK_TUPLE, tup, m);
            for (Py_ssize_t i = 0; i < m; i++) {
                Py_XDECREF(tup[i]);
            }
            if (t == NULL) {
                Py_CLEAR(res);
                break;
            }
            PyList_SET_ITEM(res, k, t);
        }
        for (Py_ssize_t i = 0; i < nl; i++) {
            Py_DECREF(lists[i]);
        }
        if (res == NULL) {
            return TR_ERROR;
        }
        st = new_iter(res, out);
        Py_DECREF(res);
        return st;
    }
    if (strcmp(name, "iter") == 0 && nargs == 1) {
        PyObject *items = NULL;
        st = cdyn_tx_unpack(tx, args[0], &items);
        if (st != TR_OK) {
            return st;
        }
        st = new_iter(items, out);
        Py_DECREF(items);
        return st;
    }
    if (strcmp(name, "next") == 0 && nargs == 1 && V(args[0])->kind == VK_ITER) {
        cdyn_value *it = V(args[0]);
        if (it->pos >= PyList_GET_SIZE(it->items)) {
            return cdyn_tx_unsupported(tx, "next() on an exhausted iterator");
        }
        cdyn_tx_mutated(tx, args[0]);
        *out = Py_NewRef(PyList_GET_ITEM(it->items, it->pos++));
        return TR_OK;
    }
    if (strcmp(name, "getattr") == 0 && (nargs == 2 || nargs == 3) && nkw == 0 &&
        V(args[1])->kind == VK_CONST && PyUnicode_Check(V(args[1])->obj)) {
        st = cdyn_tx_getattr(tx, args[0], V(args[1])->obj, out);
        if (st == TR_UNSUPPORTED && nargs == 3) {
            Py_CLEAR(tx->reason);
            *out = Py_NewRef(args[2]);
            return TR_OK;
        }
        return st;
    }
    if (strcmp(name, "hasattr") == 0 && nargs == 2 && nkw == 0 &&
        V(args[1])->kind == VK_CONST && PyUnicode_Check(V(args[1])->obj) &&
        (V(args[0])->kind == VK_PYMODULE || V(args[0])->kind == VK_CONST ||
         V(args[0])->kind == VK_TENSOR)) {
        /* on Python modules (FUNCTION_MATCHed), constants and tensors (the fake tensor has
           the same attributes); not on objects whose attributes may change unguarded */
        int r = PyObject_HasAttr(V(args[0])->obj, V(args[1])->obj);
        *out = cdyn_value_const(r ? Py_True : Py_False);
        return *out ? TR_OK : TR_ERROR;
    }
    if (strcmp(name, "sum") == 0 && npos >= 1 && nkw == 0 && !all_const(args, nargs)) {
        PyObject *items = NULL, *acc = NULL;
        st = cdyn_tx_unpack(tx, args[0], &items);
        if (st != TR_OK) {
            return st;
        }
        acc = npos == 2 ? Py_NewRef(args[1]) : cdyn_value_const_steal(PyLong_FromLong(0));
        for (Py_ssize_t i = 0; acc && i < PyList_GET_SIZE(items) && st == TR_OK; i++) {
            PyObject *pair[2] = {acc, PyList_GET_ITEM(items, i)}, *r = NULL;
            if (V(acc)->kind == VK_CONST && V(pair[1])->kind == VK_CONST) {
                PyObject *s = PyNumber_Add(V(acc)->obj, V(pair[1])->obj);
                r = cdyn_value_const_steal(s);
                st = r ? TR_OK : cdyn_tx_unsupported(tx, "sum of constants failed");
            }
            else {
                st = cdyn_tx_graph_call(tx, "call_function", cdyn_G.binop_fns[0], NULL, pair, 2,
                                        NULL, &r);
            }
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
    if (strcmp(name, "print") == 0) {
        return cdyn_tx_unsupported(tx, "call to print() (runs in Python)");
    }
    *handled = 0;
    (void)fs;
    return TR_OK;
}

/* Methods of local containers: list.append/extend/pop/insert, dict items/keys/values/get. */
static tr_status
call_container_method(cdyn_tx *tx, PyObject *self, PyObject *name, PyObject *const *args,
                      Py_ssize_t nargs, PyObject **out)
{
    cdyn_value *x = V(self);
    if (x->kind == VK_LIST && x->flag >= 2 && x->source != NULL && name_is(name, "append") &&
        nargs == 1) {
        /* append to an input list whose items were never read: replay it, and keep the
           list unread (flag 3: its items can no longer be traced) */
        if (cdyn_tx_effect(tx, EFF_APPEND, self, name, args[0]) != TR_OK) {
            return TR_ERROR;
        }
        x->flag = 3;
        cdyn_tx_mutated(tx, self);
        *out = cdyn_value_const(Py_None);
        return *out ? TR_OK : TR_ERROR;
    }
    if (cdyn_tx_materialize(tx, self) != TR_OK) {
        return PyErr_Occurred() ? TR_ERROR : TR_UNSUPPORTED;
    }
    if (x->kind == VK_DICT) {
        Py_ssize_t n = PyList_GET_SIZE(x->obj);
        if (name_is(name, "items") || name_is(name, "keys") || name_is(name, "values")) {
            PyObject *l = PyList_New(n);
            for (Py_ssize_t i = 0; l && i < n; i++) {
                PyObject *k = cdyn_value_const(PyList_GET_ITEM(x->obj, i)), *e = NULL;
                if (k == NULL) {
                    Py_CLEAR(l);
                    break;
                }
                if (name_is(name, "items")) {
                    PyObject *pair[2] = {k, PyList_GET_ITEM(x->items, i)};
                    e = cdyn_value_seq(VK_TUPLE, pair, 2);
                    Py_DECREF(k);
                }
                else if (name_is(name, "keys")) {
                    e = k;
                }
                else {
                    Py_DECREF(k);
                    e = Py_NewRef(PyList_GET_ITEM(x->items, i));
                }
                if (e == NULL) {
                    Py_CLEAR(l);
                    break;
                }
                PyList_SET_ITEM(l, i, e);
            }
            if (l == NULL) {
                return TR_ERROR;
            }
            *out = cdyn_value_new(VK_LIST, NULL, NULL, l, NULL);
            Py_DECREF(l);
            return *out ? TR_OK : TR_ERROR;
        }
        if (name_is(name, "get") && (nargs == 1 || nargs == 2) && V(args[0])->kind == VK_CONST) {
            for (Py_ssize_t i = 0; i < n; i++) {
                int r = PyObject_RichCompareBool(PyList_GET_ITEM(x->obj, i), V(args[0])->obj, Py_EQ);
                if (r < 0) {
                    return TR_ERROR;
                }
                if (r) {
                    *out = Py_NewRef(PyList_GET_ITEM(x->items, i));
                    return TR_OK;
                }
            }
            *out = nargs == 2 ? Py_NewRef(args[1]) : cdyn_value_const(Py_None);
            return *out ? TR_OK : TR_ERROR;
        }
    }
    if (x->kind == VK_LIST) {
        if (x->source != NULL) {
            if (!name_is(name, "append") || nargs != 1) {
                return cdyn_tx_unsupported(tx, "list.%U on an input list (side effect)", name);
            }
            if (cdyn_tx_effect(tx, EFF_APPEND, self, name, args[0]) != TR_OK) {
                return TR_ERROR;
            }
        }
        cdyn_tx_mutated(tx, self);
        if (name_is(name, "append") && nargs == 1) {
            if (PyList_Append(x->items, args[0]) < 0) {
                return TR_ERROR;
            }
            *out = cdyn_value_const(Py_None);
            return *out ? TR_OK : TR_ERROR;
        }
        if (name_is(name, "extend") && nargs == 1) {
            PyObject *more = NULL;
            tr_status st = cdyn_tx_unpack(tx, args[0], &more);
            if (st != TR_OK) {
                return st;
            }
            Py_ssize_t n = PyList_GET_SIZE(x->items);
            int e = PyList_SetSlice(x->items, n, n, more);
            Py_DECREF(more);
            if (e < 0) {
                return TR_ERROR;
            }
            *out = cdyn_value_const(Py_None);
            return *out ? TR_OK : TR_ERROR;
        }
        if (name_is(name, "pop") && nargs <= 1) {
            Py_ssize_t n = PyList_GET_SIZE(x->items), i = n - 1;
            if (nargs == 1) {
                if (V(args[0])->kind != VK_CONST) {
                    return cdyn_tx_unsupported(tx, "list.pop with a non-constant index");
                }
                i = PyLong_AsSsize_t(V(args[0])->obj);
                if (i < 0) {
                    i += n;
                }
            }
            if (i < 0 || i >= n) {
                return cdyn_tx_unsupported(tx, "pop index out of range");
            }
            *out = Py_NewRef(PyList_GET_ITEM(x->items, i));
            return PyList_SetSlice(x->items, i, i + 1, NULL) < 0 ? TR_ERROR : TR_OK;
        }
        if (name_is(name, "insert") && nargs == 2 && V(args[0])->kind == VK_CONST) {
            Py_ssize_t i = PyLong_AsSsize_t(V(args[0])->obj);
            if (PyList_Insert(x->items, i, args[1]) < 0) {
                return TR_ERROR;
            }
            *out = cdyn_value_const(Py_None);
            return *out ? TR_OK : TR_ERROR;
        }
    }
    return cdyn_tx_unsupported(tx, "method %U of %S", name, self);
}

static tr_status
call_tensor_method(cdyn_tx *tx, PyObject *self, PyObject *name, PyObject *const *args,
                   Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    static const char *meta[] = {"size", "dim", "ndimension", "numel", "nelement", "stride",
                                 "is_contiguous", "is_floating_point", "is_complex",
                                 "element_size", "get_device", "__len__", NULL};
    static const char *bad[] = {"item", "tolist", "numpy", "backward", "__index__", "data_ptr",
                                "__bool__", "__int__", "__float__", "register_hook",
                                "retain_grad", NULL};
    PyObject *all[65];
    for (int i = 0; meta[i]; i++) {
        if (name_is(name, meta[i])) {
            PyObject *m = NULL, *objs[64], *res = NULL;
            Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
            if (!all_const(args, nargs) || nargs > 64) {
                return cdyn_tx_unsupported(tx, "Tensor.%U with non-constant arguments", name);
            }
            for (Py_ssize_t j = 0; j < nargs; j++) {
                objs[j] = V(args[j])->obj;
            }
            m = PyObject_GetAttr(V(self)->obj, name);
            res = m ? PyObject_Vectorcall(m, objs, nargs - nkw, kwnames) : NULL;
            Py_XDECREF(m);
            if (res == NULL) {
                return cdyn_tx_unsupported(tx, "Tensor.%U failed", name);
            }
            *out = cdyn_value_const_steal(res);
            return *out ? TR_OK : TR_ERROR;
        }
    }
    for (int i = 0; bad[i]; i++) {
        if (name_is(name, bad[i])) {
            return cdyn_tx_unsupported(tx, "Tensor.%U() needs the tensor's data", name);
        }
    }
    if (nargs > 64) {
        return cdyn_tx_unsupported(tx, "too many arguments");
    }
    all[0] = self;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        all[i + 1] = args[i];
    }
    return cdyn_tx_graph_call(tx, "call_method", name, NULL, all, nargs + 1, kwnames, out);
}

/* 1 when the module is a leaf from torch.nn (recorded as call_module). */
static int
is_torch_leaf_module(PyObject *mod)
{
    PyTypeObject *t = Py_TYPE(mod);
    PyObject *m = PyObject_GetAttr((PyObject *)t, str_module_attr);
    int r = 0;
    if (m == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (PyUnicode_Check(m)) {
        const char *s = PyUnicode_AsUTF8(m);
        r = s != NULL && strncmp(s, "torch.nn.", 9) == 0;
        PyErr_Clear();
    }
    Py_DECREF(m);
    if (PyObject_TypeCheck(mod, (PyTypeObject *)cdyn_G.sequential_type) ||
        PyObject_TypeCheck(mod, (PyTypeObject *)cdyn_G.modulelist_type) ||
        PyObject_TypeCheck(mod, (PyTypeObject *)cdyn_G.moduledict_type)) {
        return 0;
    }
    return r;
}

static int
has_hooks(PyObject *mod)
{
    PyObject *names[2] = {str_forward_hooks, str_forward_pre_hooks};
    for (int i = 0; i < 2; i++) {
        PyObject *d = PyObject_GetAttr(mod, names[i]);
        int r = 0;
        if (d == NULL) {
            PyErr_Clear();
            continue;
        }
        r = PyObject_Length(d) > 0;
        PyErr_Clear();
        Py_DECREF(d);
        if (r) {
            return 1;
        }
    }
    return 0;
}

static tr_status
call_module(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames, PyObject **out)
{
    PyObject *mod = V(v)->obj, *fwd = NULL, *name = NULL;
    tr_status st;
    if (has_hooks(mod)) {
        return cdyn_tx_unsupported(tx, "nn.Module with forward hooks");
    }
    if (PyObject_TypeCheck(mod, (PyTypeObject *)cdyn_G.sequential_type) && nargs == 1 &&
        kwnames == NULL) {
        PyObject *children = NULL, *cur = Py_NewRef(args[0]);
        st = cdyn_tx_unpack(tx, v, &children);
        for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(children); i++) {
            PyObject *next = NULL;
            st = cdyn_tx_call(tx, fs, PyList_GET_ITEM(children, i), &cur, 1, NULL, &next);
            Py_DECREF(cur);
            cur = next;
        }
        Py_XDECREF(children);
        if (st != TR_OK) {
            Py_XDECREF(cur);
            return st;
        }
        *out = cur;
        return TR_OK;
    }
    if (is_torch_leaf_module(mod)) {
        if (V(v)->source == NULL) {
            return cdyn_tx_unsupported(tx, "call of a module with no source");
        }
        /* Inline the torch module's forward (functional calls on its parameters, no
           nn.Module call at run time, as torch._dynamo); if that fails, undo it and record
           the module as one call_module node instead. */
        fwd = PyObject_GetAttr((PyObject *)Py_TYPE(mod), str_forward);
        if (fwd == NULL) {
            return TR_ERROR;
        }
        if (PyFunction_Check(fwd)) {
            cdyn_ckpt ck = {NULL, 0, 0};
            long long saved_serial = tx->ckpt_serial;
            if (cdyn_tx_ckpt_take(tx, &ck) < 0) {
                Py_DECREF(fwd);
                return TR_ERROR;
            }
            int fall_back = 0;
            st = inline_real_function(tx, fwd, NULL, v, args, nargs, kwnames, out);
            if (st == TR_UNSUPPORTED) {
                st = cdyn_tx_ckpt_restore(tx, &ck);
                if (st == TR_OK) {
                    cdyn_log(10, "inlining %S failed (%U): recorded as call_module", v,
                             tx->reason ? tx->reason : Py_None);
                    Py_CLEAR(tx->reason);
                    fall_back = 1;
                }
            }
            tx->ckpt_serial = saved_serial;
            Py_XDECREF(ck.nodes);
            if (!fall_back) {
                Py_DECREF(fwd);
                return st;
            }
        }
        Py_CLEAR(fwd);
        name = sanitized_name(V(v)->source);
        if (name == NULL || PyDict_SetItem(tx->root, name, mod) < 0) {
            Py_XDECREF(name);
            return TR_ERROR;
        }
        st = cdyn_tx_graph_call(tx, "call_module", name, mod, args, nargs, kwnames, out);
        Py_DECREF(name);
        return st;
    }
    fwd = PyObject_GetAttr((PyObject *)Py_TYPE(mod), str_forward);
    if (fwd == NULL) {
        return TR_ERROR;
    }
    if (!PyFunction_Check(fwd)) {
        Py_DECREF(fwd);
        return cdyn_tx_unsupported(tx, "module forward is not a Python function");
    }
    st = inline_real_function(tx, fwd, NULL, v, args, nargs, kwnames, out);
    Py_DECREF(fwd);
    return st;
}

tr_status
cdyn_tx_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames, PyObject **out)
{
    cdyn_value *f = V(fn);
    tr_status st;
    int handled = 0;
    switch (f->kind) {
    case VK_METHOD: {
        PyObject *self = PyList_GET_ITEM(f->items, 0);
        if (f->flag) {
            PyObject *fsrc = NULL;
            return inline_real_function(tx, f->obj, fsrc, self, args, nargs, kwnames, out);
        }
        if (V(self)->kind == VK_TENSOR) {
            return call_tensor_method(tx, self, f->obj, args, nargs, kwnames, out);
        }
        if (kwnames != NULL) {
            return cdyn_tx_unsupported(tx, "keyword arguments to a container method");
        }
        return call_container_method(tx, self, f->obj, args, nargs, out);
    }
    case VK_NNMODULE:
        return call_module(tx, fs, fn, args, nargs, kwnames, out);
    case VK_GRADEXIT: {
        PyObject *mv = cdyn_value_const(f->flag ? Py_True : Py_False), *r = NULL;
        if (mv == NULL) {
            return TR_ERROR;
        }
        st = cdyn_tx_graph_call(tx, "call_function", cdyn_G.set_grad_enabled, NULL, &mv, 1, NULL,
                                &r);
        Py_DECREF(mv);
        Py_XDECREF(r);
        if (st != TR_OK) {
            return st;
        }
        *out = cdyn_value_const(Py_None);
        return *out ? TR_OK : TR_ERROR;
    }
    case VK_FUNCTION: {
        PyObject *defaults = NULL, *kwdefaults = NULL, *cells = NULL;
        PyObject *dv = PyList_GET_ITEM(f->items, 0), *cv = PyList_GET_ITEM(f->items, 1);
        PyObject *kv = PyList_GET_ITEM(f->items, 2);
        PyCodeObject *code = (PyCodeObject *)f->obj;
        if (dv != Py_None) {
            st = cdyn_tx_unpack(tx, dv, &defaults);
            if (st != TR_OK) {
                return st;
            }
        }
        if (kv != Py_None) {
            cdyn_value *kd = V(kv);
            if (kd->kind != VK_DICT) {
                Py_XDECREF(defaults);
                return cdyn_tx_unsupported(tx, "keyword defaults");
            }
            kwdefaults = PyDict_New();
            for (Py_ssize_t i = 0; kwdefaults && i < PyList_GET_SIZE(kd->obj); i++) {
                PyDict_SetItem(kwdefaults, PyList_GET_ITEM(kd->obj, i),
                               PyList_GET_ITEM(kd->items, i));
            }
        }
        if (cv != Py_None) {
            st = cdyn_tx_unpack(tx, cv, &cells);
            if (st != TR_OK) {
                Py_XDECREF(defaults);
                Py_XDECREF(kwdefaults);
                return st;
            }
        }
        {
            PyObject *gsrc = PyList_GET_ITEM(f->items, 3);
            st = inline_call(tx, code, NULL, args, nargs, kwnames, defaults, kwdefaults, cells,
                             f->node /* globals */, fs->builtins,
                             gsrc == Py_None ? NULL : gsrc, f->flag, out);
        }
        Py_XDECREF(defaults);
        Py_XDECREF(kwdefaults);
        Py_XDECREF(cells);
        return st;
    }
    case VK_CALLABLE: {
        PyObject *obj = f->obj;
        if (module_startswith(obj, "torch._dynamo") || module_startswith(obj, "cdynamo")) {
            return cdyn_tx_unsupported(tx, "call to %R (an explicit graph break or a "
                                           "compiler function)", obj);
        }
        st = call_builtin(tx, fs, obj, args, nargs, kwnames, out, &handled);
        if (handled || st != TR_OK) {
            return st;
        }
        if (is_graph_function(obj)) {
            int any_tensor = 0;
            for (Py_ssize_t i = 0; i < nargs; i++) {
                any_tensor |= V(args[i])->kind == VK_TENSOR;
            }
            if (!any_tensor && all_const(args, nargs) &&
                (module_startswith(obj, "math") || obj == cdyn_G.torch_size_type)) {
                return call_on_constants(tx, obj, args, nargs, kwnames, out);
            }
            return cdyn_tx_graph_call(tx, "call_function", obj, NULL, args, nargs, kwnames, out);
        }
        if (PyFunction_Check(obj)) {
            return inline_real_function(tx, obj, f->source, NULL, args, nargs, kwnames, out);
        }
        if (is_pure_builtin(obj) || (PyCFunction_Check(obj) && PyCFunction_GET_SELF(obj) &&
                                     PyModule_Check(PyCFunction_GET_SELF(obj)) &&
                                     strcmp(pymodule_name(PyCFunction_GET_SELF(obj)),
                                            "_operator") == 0)) {
            int any_tensor = 0;
            for (Py_ssize_t i = 0; i < nargs; i++) {
                any_tensor |= V(args[i])->kind == VK_TENSOR;
            }
            if (any_tensor) {
                return cdyn_tx_graph_call(tx, "call_function", obj, NULL, args, nargs, kwnames,
                                          out);
            }
            if (all_const(args, nargs)) {
                return call_on_constants(tx, obj, args, nargs, kwnames, out);
            }
        }
        return cdyn_tx_unsupported(tx, "call to %R", obj);
    }
    default:
        return cdyn_tx_unsupported(tx, "call of %S", fn);
    }
}

int cdyn_tcall_init(void);

/* Interned strings used above; 0 / -1. */
int
cdyn_tcall_init(void)
{
#define S(var, text)                                             \
    do {                                                         \
        if ((var = PyUnicode_InternFromString(text)) == NULL) {  \
            return -1;                                           \
        }                                                        \
    } while (0)
    S(str_self, "__self__");
    S(str_globals, "__globals__");
    S(str_closure, "__closure__");
    S(str_cell_contents, "cell_contents");
    S(str_parameters, "_parameters");
    S(str_buffers, "_buffers");
    S(str_modules, "_modules");
    S(str_forward, "forward");
    S(str_module_attr, "__module__");
    S(str_placeholder, "placeholder");
    S(str_create_node, "create_node");
    S(str_fake_from_tensor, "fake_from_tensor");
    S(str_fake_call, "fake_call");
    S(str_fake_call_method, "fake_call_method");
    S(str_set_example, "set_example");
    S(str_get_attr, "get_attr");
    S(str_call_function, "call_function");
    S(str_forward_hooks, "_forward_hooks");
    S(str_forward_pre_hooks, "_forward_pre_hooks");
#undef S
    return 0;
}
