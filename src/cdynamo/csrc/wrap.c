/* wrap.c: real objects -> values (torch._dynamo's VariableBuilder). Each real object read
 * from the frame (a local, a global, an attribute, an item) is classified into a family of
 * values and guarded through its source as that family needs: tensors TENSOR_MATCH (graph
 * inputs), constants EQUALS_MATCH, modules and functions ID/FUNCTION_MATCH (closures and
 * functions passed in: their __code__, values/function.c), containers
 * TYPE_MATCH + LENGTH_CHECK once read, other objects TYPE_MATCH. */
#include "tx.h"
#include "hook.h"

/* ---- classification helpers ---------------------------------------------------------- */

int
cdyn_is_constant(PyObject *obj)
{
    if (obj == Py_None || obj == Py_Ellipsis || obj == Py_NotImplemented || PyBool_Check(obj) ||
        PyLong_CheckExact(obj) || PyFloat_CheckExact(obj) || PyComplex_CheckExact(obj) ||
        PyUnicode_CheckExact(obj) || PyBytes_CheckExact(obj) || PyCode_Check(obj) ||
        PySlice_Check(obj) || PyRange_Check(obj) || cdyn_is_enum_member(obj)) {
        return 1;
    }
    if (Py_TYPE(obj) == (PyTypeObject *)cdyn_G.torch_dtype_type ||
        Py_TYPE(obj) == (PyTypeObject *)cdyn_G.torch_device_type ||
        Py_TYPE(obj) == (PyTypeObject *)cdyn_G.torch_memory_format_type ||
        Py_TYPE(obj) == (PyTypeObject *)cdyn_G.torch_layout_type ||
        Py_TYPE(obj) == (PyTypeObject *)cdyn_G.torch_size_type) {
        return 1;
    }
    /* compiled regular expressions and their matches: immutable, their methods folded on
       constant arguments (torch._dynamo's ConstantLikeVariable) */
    if (Py_TYPE(obj) == (PyTypeObject *)cdyn_G.re_pattern_type ||
        Py_TYPE(obj) == (PyTypeObject *)cdyn_G.re_match_type) {
        return 1;
    }
    if (cdyn_is_numpy_constant(obj)) {
        return 1;   /* numpy scalars and numpy.dtype (values/ndarray.c) */
    }
    if (PyTuple_CheckExact(obj) || PyFrozenSet_CheckExact(obj)) {
        PyObject *it = PyObject_GetIter(obj), *item = NULL;
        int ok = 1;
        if (it == NULL) {
            PyErr_Clear();
            return 0;
        }
        while (ok && (item = PyIter_Next(it)) != NULL) {
            ok = cdyn_is_constant(item);
            Py_DECREF(item);
        }
        Py_DECREF(it);
        PyErr_Clear();
        return ok;
    }
    return 0;
}

int
cdyn_is_tensor(PyObject *obj)
{
    return PyObject_TypeCheck(obj, (PyTypeObject *)cdyn_G.torch_tensor_type);
}

int
cdyn_is_nn_module(PyObject *obj)
{
    return PyObject_TypeCheck(obj, (PyTypeObject *)cdyn_G.nn_module_type);
}

int
cdyn_startswith(const char *s, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(s, prefix, n) == 0 && (s[n] == '\0' || s[n] == '.');
}

int
cdyn_module_startswith(PyObject *obj, const char *prefix)
{
    PyObject *m = PyObject_GetAttr(obj, cdyn_G.s_module);
    int r = 0;
    if (m == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (PyUnicode_Check(m)) {
        const char *s = PyUnicode_AsUTF8(m);
        r = s != NULL && cdyn_startswith(s, prefix);
        if (s == NULL) {
            PyErr_Clear();
        }
    }
    Py_DECREF(m);
    return r;
}

const char *
cdyn_pymodule_name(PyObject *mod)
{
    const char *s = PyModule_GetName(mod);
    if (s == NULL) {
        PyErr_Clear();
        return "";
    }
    return s;
}

int
cdyn_name_is(PyObject *name, const char *s)
{
    return PyUnicode_CompareWithASCIIString(name, s) == 0;
}

int
cdyn_name_in(PyObject *name, const char *const *list)
{
    for (int i = 0; list[i] != NULL; i++) {
        if (cdyn_name_is(name, list[i])) {
            return 1;
        }
    }
    return 0;
}

int
cdyn_all_const(PyObject *const *args, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (V(args[i])->kind != VK_CONST) {
            return 0;
        }
    }
    return 1;
}

int
cdyn_any_tensor(PyObject *const *args, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (V(args[i])->kind == VK_TENSOR) {
            return 1;
        }
    }
    return 0;
}

PyObject *
cdyn_tx_frame_object(cdyn_tx *tx, PyObject *source)
{
    return cdyn_source_eval((cdyn_source *)source, cdyn_frame_slots(tx->frame),
                            cdyn_frame_func(tx->frame), cdyn_frame_globals(tx->frame),
                            cdyn_frame_builtins(tx->frame));
}

/* 1 when res is a fresh iterator of a builtin immutable sequence (str, bytes, tuple, range),
 * whose items are constants. */
static int
fresh_iterator_of_constants(PyObject *res)
{
    const char *n = Py_TYPE(res)->tp_name;
    return strcmp(n, "str_ascii_iterator") == 0 || strcmp(n, "str_iterator") == 0 ||
           strcmp(n, "bytes_iterator") == 0 || strcmp(n, "tuple_iterator") == 0 ||
           strcmp(n, "range_iterator") == 0 || strcmp(n, "longrange_iterator") == 0;
}

tr_status
cdyn_call_on_constants(cdyn_tx *tx, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames, PyObject **out)
{
    PyObject *objs[64], *res = NULL, *t = NULL, *lst = NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    tr_status st;
    if (nargs > 64) {
        return cdyn_tx_unsupported(tx, "too many arguments");
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        objs[i] = V(args[i])->u.cnst.value;
    }
    res = PyObject_Vectorcall(fn, objs, nargs - nkw, kwnames);
    if (res == NULL) {   /* a builtin error is eager's too: raised in the trace */
        st = cdyn_tx_raise_pending(tx);
        return st != TR_NOTIMPL ? st : cdyn_tx_unsupported(tx, "constant call of %R failed", fn);
    }
    if (!PyList_CheckExact(res)) {
        if (!cdyn_is_constant(res) && fresh_iterator_of_constants(res)) {
            /* "ab".__iter__(), iter((1, 2)): an iterator over the constant's items */
            PyObject *items = PySequence_List(res), *it_type = (PyObject *)Py_TYPE(res);
            Py_INCREF(it_type);
            Py_DECREF(res);
            for (Py_ssize_t i = 0; items != NULL && i < PyList_GET_SIZE(items); i++) {
                PyObject *c = cdyn_value_const(PyList_GET_ITEM(items, i));   /* as values */
                if (c == NULL) {
                    Py_CLEAR(items);
                    break;
                }
                PyList_SetItem(items, i, c);
            }
            *out = items != NULL ? cdyn_value_iter_typed(items, (PyTypeObject *)it_type) : NULL;
            Py_DECREF(it_type);
            Py_XDECREF(items);
            return *out ? TR_OK : TR_ERROR;
        }
        if (!cdyn_is_constant(res)) {
            Py_DECREF(res);
            return cdyn_tx_unsupported(tx, "constant call of %R gave a non-constant", fn);
        }
        *out = cdyn_value_const_steal(res);
        return *out ? TR_OK : TR_ERROR;
    }
    /* e.g. sorted(): a list of constants */
    t = PyList_AsTuple(res);
    Py_DECREF(res);
    *out = t ? cdyn_value_const(t) : NULL;
    Py_XDECREF(t);
    if (*out == NULL) {
        return TR_ERROR;
    }
    st = cdyn_v_unpack(tx, *out, &lst);
    Py_CLEAR(*out);
    if (st != TR_OK) {
        return st;
    }
    *out = cdyn_value_seq_list(VK_LIST, lst);
    Py_DECREF(lst);
    return *out ? TR_OK : TR_ERROR;
}

/* ---- containers -------------------------------------------------------------------------- */

tr_status
cdyn_tx_memo_attr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **src, PyObject **out)
{
    PyObject *hit;
    *src = *out = NULL;
    if (V(v)->source == NULL) {
        return TR_OK;
    }
    *src = cdyn_source_attr(V(v)->source, name);
    if (*src == NULL) {
        return TR_ERROR;
    }
    hit = PyDict_GetItemWithError(tx->by_source, cdyn_source_repr(*src));
    if (hit != NULL) {
        *out = Py_NewRef(hit);
        return TR_OK;
    }
    return PyErr_Occurred() ? TR_ERROR : TR_OK;
}

int
cdyn_tx_memo_source(cdyn_tx *tx, PyObject *source, PyObject *v)
{
    if (source == NULL) {
        return 0;
    }
    return PyDict_SetItem(tx->by_source, cdyn_source_repr(source), v);
}

/* The items of obj (a real sequence) wrapped with ITEM sources: a new list of values. */
static tr_status
wrap_items(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out_list)
{
    PyObject *items = NULL, *seq = PySequence_Fast(obj, "not a sequence");
    tr_status st = TR_ERROR;
    Py_ssize_t n;
    if (seq == NULL) {
        return TR_ERROR;
    }
    n = PySequence_Fast_GET_SIZE(seq);
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
    *out_list = items;
    items = NULL;
    st = TR_OK;
done:
    Py_XDECREF(items);
    Py_DECREF(seq);
    return st;
}

tr_status
cdyn_tx_wrap_sequence(cdyn_tx *tx, PyObject *obj, PyObject *source, cdyn_vkind kind,
                      PyObject **out)
{
    PyObject *items = NULL;
    tr_status st = wrap_items(tx, obj, source, &items);
    if (st != TR_OK) {
        return st;
    }
    *out = cdyn_value_seq_list(kind, items);
    Py_DECREF(items);
    if (*out != NULL && source != NULL) {
        V(*out)->source = Py_NewRef(source);
    }
    return *out ? TR_OK : TR_ERROR;
}

tr_status
cdyn_tx_wrap_dict(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    PyObject *d = cdyn_dict_new(Py_TYPE(obj)), *it = NULL, *k = NULL;
    tr_status st = d ? TR_OK : TR_ERROR;
    (void)source;   /* a dict read without a source: trusted, not guarded */
    it = d ? PyObject_GetIter(obj) : NULL;
    if (d != NULL && it == NULL) {
        st = TR_ERROR;
    }
    while (st == TR_OK && (k = PyIter_Next(it)) != NULL) {
        PyObject *val = PyObject_GetItem(obj, k), *kv = NULL, *w = NULL;
        if (val == NULL) {
            st = TR_ERROR;
        }
        else if (cdyn_is_tensor(k)) {
            st = cdyn_tx_unsupported(tx, "dict with tensor keys read without a source");
        }
        else {
            st = cdyn_tx_wrap_real(tx, k, NULL, &kv);
        }
        if (st == TR_OK) {
            st = cdyn_tx_wrap_real(tx, val, NULL, &w);
        }
        if (st == TR_OK) {
            st = cdyn_dict_set(tx, d, kv, w);
        }
        Py_XDECREF(val);
        Py_XDECREF(kv);
        Py_XDECREF(w);
        Py_DECREF(k);
    }
    if (st == TR_OK && PyErr_Occurred()) {
        st = TR_ERROR;
    }
    Py_XDECREF(it);
    if (st != TR_OK) {
        Py_XDECREF(d);
        return st;
    }
    *out = d;
    return TR_OK;
}

/* A mutable object of the frame (container, user object) already wrapped under another
 * source is that value, while a SAME_OBJECT guard keeps the two sources one object: *out (new)
 * and 1; 0 when obj is new to the trace; -1 on error. */
static int
seen_by_id(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    PyObject *key = PyLong_FromVoidPtr(obj), *seen = NULL;
    int rc = -1;
    if (key == NULL) {
        return -1;
    }
    seen = PyDict_GetItemWithError(tx->by_id, key);
    if (seen == NULL) {
        rc = PyErr_Occurred() ? -1 : 0;
    }
    else if (cdyn_guards_add_same(tx->guards, source, V(seen)->source) == 0) {
        *out = Py_NewRef(seen);
        rc = 1;
    }
    Py_DECREF(key);
    return rc;
}

/* Record v as the value of obj (by_id). 0 / -1. */
static int
remember_by_id(cdyn_tx *tx, PyObject *obj, PyObject *v)
{
    PyObject *key = PyLong_FromVoidPtr(obj);
    int rc = key == NULL ? -1 : PyDict_SetItem(tx->by_id, key, v);
    Py_XDECREF(key);
    return rc;
}

/* Any other object: specialised on its type only; what is read through it is guarded at
 * its own source. One value per object of the frame (its stores seen under every name). */
static tr_status
wrap_plain_object(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    if (source != NULL) {
        int seen = seen_by_id(tx, obj, source, out);
        if (seen != 0) {
            return seen > 0 ? TR_OK : TR_ERROR;
        }
        if (cdyn_guards_add_type(tx->guards, source, Py_TYPE(obj)) < 0) {
            return TR_ERROR;
        }
    }
    *out = cdyn_value_obj(VK_OBJECT, obj, source);
    if (*out != NULL && source != NULL && remember_by_id(tx, obj, *out) < 0) {
        Py_CLEAR(*out);
    }
    return *out ? TR_OK : TR_ERROR;
}

/* An input container read through a source: lazy, its items wrapped on first use. The same
 * list/dict/set reached under two names is one value (a SAME_OBJECT guard keeps it so). */
static tr_status
wrap_input_container(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    cdyn_vkind k = PyTuple_Check(obj) ? VK_TUPLE : PyList_CheckExact(obj) ? VK_LIST
                   : PySet_CheckExact(obj) ? VK_SET : PyFrozenSet_CheckExact(obj) ? VK_FROZENSET
                   : VK_DICT;
    int seen = seen_by_id(tx, obj, source, out);
    if (seen != 0) {
        return seen > 0 ? TR_OK : TR_ERROR;
    }
    if (cdyn_guards_add_type(tx->guards, source, Py_TYPE(obj)) < 0) {
        return TR_ERROR;
    }
    if (k == VK_TUPLE && !PyTuple_CheckExact(obj) && cdyn_seq_protocol_in_python(obj)) {
        /* a named tuple whose class overrides __getitem__ (or __iter__, __len__): its
           items read as tuple holds them, the override never runs */
        tr_status st = cdyn_wrap_seq_copy(tx, obj, source, out);
        if (st == TR_OK) {
            V(*out)->u.seq.nt_type = Py_NewRef(Py_TYPE(obj));
        }
        return st;
    }
    *out = cdyn_value_alloc(k, source);
    if (*out == NULL) {
        return TR_ERROR;
    }
    V(*out)->bits = SEQ_LAZY;
    if (k == VK_DICT) {
        V(*out)->u.dict.real = Py_NewRef(obj);
        if (!PyDict_CheckExact(obj)) {
            V(*out)->u.dict.type = Py_NewRef((PyObject *)Py_TYPE(obj));
        }
    }
    else if (k == VK_SET || k == VK_FROZENSET) {
        V(*out)->u.set.real = Py_NewRef(obj);
    }
    else {
        V(*out)->u.seq.real = Py_NewRef(obj);
        if (k == VK_TUPLE && !PyTuple_CheckExact(obj)) {   /* a named tuple (TYPE_MATCHed) */
            V(*out)->u.seq.nt_type = Py_NewRef(Py_TYPE(obj));
        }
    }
    if (k != VK_TUPLE && remember_by_id(tx, obj, *out) < 0) {
        Py_CLEAR(*out);
        return TR_ERROR;
    }
    return TR_OK;
}

/* A tuple iterator of the frame: an ITER value taking its items lazily (values/iter.c), one
 * value per iterator object whatever name reaches it (advanced under one name, it is
 * advanced under the other). */
static tr_status
wrap_input_iterator(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    int seen = seen_by_id(tx, obj, source, out);
    if (seen != 0) {
        return seen > 0 ? TR_OK : TR_ERROR;
    }
    if (cdyn_guards_add_type(tx->guards, source, Py_TYPE(obj)) < 0) {
        return TR_ERROR;
    }
    *out = cdyn_iter_input(obj, source);
    if (*out != NULL && remember_by_id(tx, obj, *out) < 0) {
        Py_CLEAR(*out);
    }
    return *out ? TR_OK : TR_ERROR;
}

/* Objects of the frame (source not NULL) that a family other than the generic object's
 * models: a tuple iterator, a NumPy array (values/ndarray.c), a view of a dict or a
 * ModelOutput (values/dataclass.c). TR_NOTIMPL for any other object. */
static tr_status
wrap_input_other(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    if (Py_TYPE(obj) == cdyn_tuple_iter_type()) {
        return wrap_input_iterator(tx, obj, source, out);
    }
    if (cdyn_is_numpy_array(obj)) {
        tr_status st = cdyn_ndarray_wrap_input(tx, obj, source, out);
        if (st != TR_OK || *out != NULL) {
            return st;
        }
    }
    return PyDict_Check(obj) ? TR_NOTIMPL : cdyn_tx_wrap_dict_view(tx, obj, source, out);
}

tr_status
cdyn_tx_materialize(cdyn_tx *tx, PyObject *v)
{
    cdyn_value *x = V(v);
    PyObject *real, *items = NULL;
    tr_status st;
    if (!(x->bits & (SEQ_LAZY | SEQ_APPENDED)) ||
        !(x->kind == VK_TUPLE || x->kind == VK_LIST || x->kind == VK_DICT || x->kind == VK_SET ||
          x->kind == VK_FROZENSET)) {
        return TR_OK;
    }
    if (x->kind == VK_DICT) {
        return cdyn_dict_materialize(tx, v);   /* DICT_KEYS guard, values by ITEM sources */
    }
    if (x->kind == VK_SET || x->kind == VK_FROZENSET) {
        return cdyn_set_materialize(tx, v);
    }
    real = x->u.seq.real;
    if (cdyn_guards_add_len(tx->guards, x->source, PyObject_Length(real)) < 0) {
        return TR_ERROR;
    }
    st = wrap_items(tx, real, x->source, &items);
    if (st != TR_OK) {
        return st;
    }
    if (x->u.seq.items != NULL) {
        /* values appended while the list was unread (replayed as EFF_APPEND; a later change
           writes the whole list back after them) */
        Py_ssize_t n = PyList_GET_SIZE(items);
        if (PyList_SetSlice(items, n, n, x->u.seq.items) < 0) {
            Py_DECREF(items);
            return TR_ERROR;
        }
    }
    Py_XSETREF(x->u.seq.items, items);
    x->bits &= ~(SEQ_LAZY | SEQ_APPENDED);
    return TR_OK;
}

/* ---- the builder ----------------------------------------------------------------------------- */

/* A bound method whose self (borrowed) is wrapped through source.__self__: a METHOD of the
 * Python function func (or NULL) and the method name. What the method is must be guarded
 * too: the function (source.__func__ FUNCTION_MATCH) or, for a builtin method, its name
 * (source.__name__ EQUALS_MATCH) with self's type. */
static tr_status
wrap_bound_method(cdyn_tx *tx, PyObject *self, PyObject *func, PyObject *name,
                  PyObject *source, PyObject **out)
{
    PyObject *ssrc = NULL, *sv = NULL, *what = NULL, *wsrc = NULL;
    tr_status st = TR_ERROR;
    if (source != NULL) {
        what = PyUnicode_FromString(func != NULL ? "__func__" : "__name__");
        wsrc = what ? cdyn_source_attr(source, what) : NULL;
        ssrc = cdyn_source_attr(source, cdyn_G.s_self);
        if (wsrc == NULL || ssrc == NULL ||
            (func != NULL ? cdyn_guards_add_id(tx->guards, wsrc, func, 1)
                          : cdyn_guards_add_equals(tx->guards, wsrc, name)) < 0) {
            goto done;
        }
    }
    st = cdyn_tx_wrap_real(tx, self, ssrc, &sv);
    if (st == TR_OK) {
        *out = cdyn_value_method(func, name, sv);
        st = *out ? TR_OK : TR_ERROR;
    }
done:
    Py_XDECREF(what);
    Py_XDECREF(wsrc);
    Py_XDECREF(ssrc);
    Py_XDECREF(sv);
    return st;
}

/* 1 when the builtin function obj is the method of its __self__ under its own name (x.add,
 * lst.append), so it can be rebuilt as <self>.<name>; 0 for builtins whose self is an
 * implementation detail (pybind11 function records, capsules). */
static int
is_method_of_self(PyObject *obj)
{
    PyObject *self = PyCFunction_GET_SELF(obj), *again;
    int r;
    again = PyObject_GetAttrString(self, ((PyCFunctionObject *)obj)->m_ml->ml_name);
    if (again == NULL) {
        PyErr_Clear();
        return 0;
    }
    r = PyCFunction_Check(again) && PyCFunction_GET_SELF(again) == self &&
        ((PyCFunctionObject *)again)->m_ml == ((PyCFunctionObject *)obj)->m_ml;
    Py_DECREF(again);
    return r;
}

/* A higher-order op (values/hop.c), recognised by identity before the graph-function
 * rule: guarded by ID_MATCH (a bound `MyFn.apply` through its class, source.__self__: a
 * bound method under torch 2.13, a builtin method bound to the class from torch 2.14 on;
 * either is made anew by every read). */
static tr_status
wrap_hop(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    if (source != NULL) {
        int e;
        PyObject *bound_self = PyMethod_Check(obj) ? PyMethod_GET_SELF(obj)
                               : PyCFunction_Check(obj) && PyCFunction_GET_SELF(obj) != NULL &&
                                       PyType_Check(PyCFunction_GET_SELF(obj))
                                   ? PyCFunction_GET_SELF(obj)
                                   : NULL;
        if (bound_self != NULL) {
            PyObject *ssrc = cdyn_source_attr(source, cdyn_G.s_self);
            e = ssrc == NULL || cdyn_guards_add_id(tx->guards, ssrc, bound_self, 0) < 0;
            Py_XDECREF(ssrc);
        }
        else {
            e = cdyn_guards_add_id(tx->guards, source, obj, PyFunction_Check(obj)) < 0;
        }
        if (e) {
            return TR_ERROR;
        }
    }
    *out = cdyn_value_obj(VK_HOP, obj, source);
    if (*out != NULL) {
        V(*out)->bits = (unsigned int)cdyn_hop_classify(obj);
    }
    return *out ? TR_OK : TR_ERROR;
}

/* What a call of obj from traced code runs when obj wraps a function compiled on its own
 * (borrowed): cdynamo.compile's CompiledFunction, or a wrapper torch._dynamo made
 * (torch.compile, torch._dynamo.run: the function its `_torchdynamo_inline` names, which
 * torch._dynamo inlines too; its disable() wrappers have none). NULL for anything else. */
static PyObject *
compiled_target(PyObject *obj)
{
    static PyObject *s_inline;
    PyObject *d, *target = cdyn_compiled_target(obj);
    if (target != NULL) {
        return target;
    }
    if (!PyFunction_Check(obj) || (d = ((PyFunctionObject *)obj)->func_dict) == NULL) {
        return NULL;
    }
    if (s_inline == NULL && (s_inline = PyUnicode_InternFromString("_torchdynamo_inline")) == NULL) {
        PyErr_Clear();
        return NULL;
    }
    target = PyDict_GetItemWithError(d, s_inline);
    PyErr_Clear();
    return target != NULL && PyCallable_Check(target) ? target : NULL;
}

/* 1 when obj is a function torch._dynamo.disable / torch.compiler.disable made (it carries
 * _torchdynamo_disable = True, and functools.wraps may give it the wrapped function's
 * __module__, e.g. torch.nn's): never traced or put in a graph, as torch._dynamo skips it. */
static int
dynamo_disabled(PyObject *obj)
{
    PyObject *d, *flag;
    if (!PyFunction_Check(obj) || (d = ((PyFunctionObject *)obj)->func_dict) == NULL) {
        return 0;
    }
    flag = PyDict_GetItemString(d, "_torchdynamo_disable");   /* borrowed */
    return flag == Py_True;
}

/* The family of a callable that is not a module, a method or a container. */
static cdyn_vkind
callable_kind(PyObject *obj)
{
    if (cdyn_user_is_objfn(obj)) {
        return VK_OBJFN;   /* object.__setattr__, dict.get, dataclasses.fields, ... */
    }
    if (cdyn_user_is_callable_object(obj)) {
        return VK_OBJECT;  /* an instance with a Python __call__ */
    }
    if (cdyn_polyfill_of(obj) != NULL) {   /* traced through its plain-Python version */
        return VK_BUILTIN;
    }
    if (cdyn_is_torch_special(obj)) {
        return VK_TORCHFN;
    }
    if (cdyn_hop_is_region_wrapper(obj)) {
        return VK_USERFN;   /* nested_compile_region's wrapper, defined by torch: inlined */
    }
    {
        PyObject *wrapped;
        int on;
        if (cdyn_ctx_eogb_wrapper(obj, &wrapped, &on)) {
            return VK_USERFN;   /* @torch._dynamo.error_on_graph_break(flag): inline.c */
        }
    }
    if (dynamo_disabled(obj)) {
        return VK_OPAQUE;   /* torch._dynamo.disable(fn) (any recursive=): run at a break */
    }
    if (cdyn_module_startswith(obj, "torch._dynamo") ||
        (cdyn_module_startswith(obj, "cdynamo") &&
         !cdyn_module_startswith(obj, "cdynamo.polyfills"))) {
        return VK_OPAQUE;
    }
    if (obj == cdyn_G.no_grad || obj == cdyn_G.enable_grad || obj == cdyn_G.set_grad_enabled_cls ||
        obj == cdyn_G.is_grad_enabled) {
        return VK_TORCHFN;
    }
    if (cdyn_is_builtin(obj)) {
        return VK_BUILTIN;
    }
    if (cdyn_is_graph_function(obj)) {
        return VK_TORCHFN;
    }
    if (PyFunction_Check(obj)) {
        return VK_USERFN;
    }
    if (PyType_Check(obj)) {
        return PyType_IsSubtype((PyTypeObject *)obj, (PyTypeObject *)PyExc_BaseException)
                   ? VK_EXCTYPE : VK_CLASS;
    }
    return VK_OPAQUE;
}

/* The exit object of a grad-mode block split by a graph break (codegen.c), read through
 * source (borrowed, may be NULL): its type and the mode it restores are guarded. */
static tr_status
wrap_grad_exit(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    PyObject *prev = PyObject_GetAttr(obj, cdyn_G.s_prev), *psrc = NULL;
    int guard_ok = 0;
    if (prev == NULL) {
        return TR_ERROR;
    }
    if (source != NULL) {
        psrc = cdyn_source_attr(source, cdyn_G.s_prev);
        guard_ok = psrc != NULL && cdyn_guards_add_type(tx->guards, source, Py_TYPE(obj)) == 0 &&
                   cdyn_guards_add_equals(tx->guards, psrc, prev) == 0;
        Py_XDECREF(psrc);
        if (!guard_ok) {
            Py_DECREF(prev);
            return TR_ERROR;
        }
    }
    *out = cdyn_value_alloc(VK_GRADEXIT, source);
    if (*out != NULL) {
        V(*out)->bits = prev == Py_True ? GRAD_MODE_ON : 0;
    }
    Py_DECREF(prev);
    return *out ? TR_OK : TR_ERROR;
}

/* An int, a float, or a tuple / torch.Size of ints of the frame (source not NULL) that
 * automatic dynamic shapes made dynamic (values/symint.c): an int or float that changed
 * between calls (or dynamic=True) is a symbolic input; a tuple whose int changed is wrapped
 * item by item (that int then a SymInt input). *out NULL when obj stays a constant. */
static tr_status
wrap_dynamic_number(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    int dyn;
    *out = NULL;
    if (PyLong_CheckExact(obj)) {
        return cdyn_sym_int_input(tx, obj, source, out);
    }
    if (PyFloat_CheckExact(obj)) {
        return cdyn_sym_float_input(tx, obj, source, out);
    }
    if ((dyn = cdyn_numpy_scalar_kind(obj)) != 0) {
        return cdyn_sym_numpy_scalar_input(tx, obj, source, dyn, out);
    }
    if (!(PyTuple_CheckExact(obj) || Py_TYPE(obj) == (PyTypeObject *)cdyn_G.torch_size_type) ||
        !cdyn_is_constant(obj)) {
        return TR_OK;
    }
    dyn = cdyn_sym_tuple_dynamic(tx, obj, source);
    return dyn == 0 ? TR_OK : dyn < 0 ? TR_ERROR : wrap_input_container(tx, obj, source, out);
}

/* Wrap obj (not memoized yet) guarded through source (may be NULL). */
static tr_status
build(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    PyObject *target;
    if (cdyn_is_tensor(obj)) {
        return cdyn_tx_wrap_tensor_input(tx, obj, source, out);
    }
    if ((PyObject *)Py_TYPE(obj) == cdyn_G.grad_mode_exit_type) {
        return wrap_grad_exit(tx, obj, source, out);
    }
    if ((PyObject *)Py_TYPE(obj) == cdyn_G.eogb_exit_type) {
        return cdyn_ctx_wrap_eogb_exit(tx, obj, source, out);
    }
    if (cdyn_ctx_is_mode_glue(obj)) {   /* AutocastEnter / AutocastExit and the like */
        return cdyn_ctx_wrap_mode_glue(tx, obj, source, out);
    }
    if (source != NULL) {
        tr_status st = wrap_dynamic_number(tx, obj, source, out);
        if (st != TR_OK || *out != NULL) {
            return st;
        }
    }
    if (cdyn_is_constant(obj)) {
        if (source != NULL && cdyn_guards_add_equals(tx->guards, source, obj) < 0) {
            return TR_ERROR;
        }
        *out = cdyn_value_const(obj);
        return *out ? TR_OK : TR_ERROR;
    }
    if (cdyn_is_nn_module(obj)) {
        /* by type, not identity: its parameters and buffers are graph inputs read through
           their sources, so one trace serves every instance of the class (values/nnmodule.c;
           an identity test pins it, cdyn_v_pin_identity) */
        if (source != NULL && cdyn_guards_add_nn_module(tx->guards, source, obj) < 0) {
            return TR_ERROR;
        }
        *out = cdyn_value_obj(VK_NNMODULE, obj, source);
        if (*out != NULL && source != NULL) {
            V(*out)->bits |= MOD_BY_TYPE;
        }
        return *out ? TR_OK : TR_ERROR;
    }
    if (PyModule_Check(obj)) {
        if (source != NULL && cdyn_guards_add_id(tx->guards, source, obj, 1) < 0) {
            return TR_ERROR;
        }
        *out = cdyn_value_obj(VK_PYMODULE, obj, source);
        return *out ? TR_OK : TR_ERROR;
    }
    if (cdyn_namedtuple_type_of(obj) != NULL) {
        /* a named tuple: a tuple that keeps its type */
        if (source != NULL) {
            return wrap_input_container(tx, obj, source, out);
        }
        tr_status st = cdyn_tx_wrap_sequence(tx, obj, NULL, VK_TUPLE, out);
        if (st == TR_OK) {
            V(*out)->u.seq.nt_type = Py_NewRef(Py_TYPE(obj));
        }
        return st;
    }
    if (PyTuple_CheckExact(obj) || PyList_CheckExact(obj) || cdyn_is_dict_type(Py_TYPE(obj)) ||
        PySet_CheckExact(obj) || (PyFrozenSet_CheckExact(obj) && source != NULL)) {
        /* (a frozenset of constants is a constant; one of functions or classes is an input
           container like a set) */
        if (source != NULL) {
            return wrap_input_container(tx, obj, source, out);
        }
        if (PySet_CheckExact(obj)) {
            return cdyn_set_construct_real(tx, obj, out);
        }
        return PyDict_Check(obj)
                   ? cdyn_tx_wrap_dict(tx, obj, NULL, out)
                   : cdyn_tx_wrap_sequence(tx, obj, NULL,
                                           PyTuple_CheckExact(obj) ? VK_TUPLE : VK_LIST, out);
    }
    if (cdyn_is_deque(obj)) {
        return cdyn_deque_wrap(tx, obj, source, out);
    }
    if (PyCallable_Check(obj) && cdyn_hop_classify(obj) != 0) {
        return wrap_hop(tx, obj, source, out);
    }
    if (PyMethod_Check(obj) && PyFunction_Check(PyMethod_GET_FUNCTION(obj))) {
        /* a Python method: inlined with its self */
        PyObject *func = PyMethod_GET_FUNCTION(obj);
        return wrap_bound_method(tx, PyMethod_GET_SELF(obj), func,
                                 ((PyFunctionObject *)func)->func_name, source, out);
    }
    if (PyCallable_Check(obj) && cdyn_is_numpy_callable(obj)) {
        /* numpy functions, ufuncs, numpy.random's: traced through torch._numpy */
        if (source != NULL && cdyn_guards_add_id(tx->guards, source, obj, PyFunction_Check(obj)) < 0) {
            return TR_ERROR;
        }
        *out = cdyn_value_obj(VK_NPFN, obj, source);
        return *out ? TR_OK : TR_ERROR;
    }
    if (PyCFunction_Check(obj) && PyCFunction_GET_SELF(obj) != NULL &&
        !PyModule_Check(PyCFunction_GET_SELF(obj)) && !PyType_Check(PyCFunction_GET_SELF(obj)) &&
        is_method_of_self(obj)) {
        /* a builtin method bound to an object (e.g. x.add, lst.append reaching a resume
           function): the method of its self, which is wrapped and guarded itself */
        PyObject *nm = PyUnicode_FromString(((PyCFunctionObject *)obj)->m_ml->ml_name);
        tr_status st;
        if (nm == NULL) {
            return TR_ERROR;
        }
        st = wrap_bound_method(tx, PyCFunction_GET_SELF(obj), NULL, nm, source, out);
        Py_DECREF(nm);
        return st;
    }
    if (cdyn_is_partial(obj)) {
        return cdyn_partial_wrap(tx, obj, source, out);
    }
    if ((target = compiled_target(obj)) != NULL) {
        /* a compiled function called from traced code: its function, inlined (the wrapper
           is pinned by identity: the function it runs never changes) */
        if (source != NULL && cdyn_guards_add_id(tx->guards, source, obj, 1) < 0) {
            return TR_ERROR;
        }
        return cdyn_tx_wrap_fixed(tx, target, Py_None, out);
    }
    if (PyCallable_Check(obj) &&
        (cdyn_is_cache_wrapper(obj) || callable_kind(obj) != VK_OBJECT)) {
        cdyn_vkind k = cdyn_is_cache_wrapper(obj) ? VK_WRAPPER : callable_kind(obj);
        if (k == VK_USERFN) {   /* closures: by code and cells (function.c) */
            *out = cdyn_value_obj(k, obj, source);
            if (*out != NULL && cdyn_guard_function(tx, obj, source, *out) != TR_OK) {
                Py_CLEAR(*out);
                return TR_ERROR;
            }
            return *out ? TR_OK : TR_ERROR;
        }
        /* a method bound to an object is made anew by every read (super().get,
           dict.fromkeys, a bound method rebuilt for a resume function): its identity is ==
           (the same self object, the same function), not `is` */
        int bound = PyMethod_Check(obj) ||
                    (PyCFunction_Check(obj) && PyCFunction_GET_SELF(obj) != NULL &&
                     !PyModule_Check(PyCFunction_GET_SELF(obj)));
        if (source != NULL &&
            (bound ? cdyn_guards_add_equals(tx->guards, source, obj)
                   : cdyn_guards_add_id(tx->guards, source, obj, PyFunction_Check(obj))) < 0) {
            return TR_ERROR;
        }
        *out = cdyn_value_obj(k, obj, source);   /* (OBJFN: u.ofn.fn is slot 0) */
        return *out ? TR_OK : TR_ERROR;
    }
    if (source != NULL) {
        tr_status st = wrap_input_other(tx, obj, source, out);
        if (st != TR_NOTIMPL) {
            return st;
        }
    }
    return wrap_plain_object(tx, obj, source, out);
}

tr_status
cdyn_tx_wrap_fixed(cdyn_tx *tx, PyObject *obj, PyObject *label, PyObject **out)
{
    PyObject *src = cdyn_source_const(obj, label);
    tr_status st = src ? cdyn_tx_wrap_real(tx, obj, src, out) : TR_ERROR;
    Py_XDECREF(src);
    return st;
}

tr_status
cdyn_tx_wrap_real(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    tr_status st;
    *out = NULL;
    if (source != NULL) {
        PyObject *cached = PyDict_GetItemWithError(tx->by_source, cdyn_source_repr(source));
        if (cached != NULL) {
            *out = Py_NewRef(cached);
            return TR_OK;
        }
        if (PyErr_Occurred()) {
            return TR_ERROR;
        }
    }
    st = build(tx, obj, source, out);
    if (st != TR_OK) {
        return st;
    }
    if (cdyn_tx_memo_source(tx, source, *out) < 0) {
        Py_CLEAR(*out);
        return TR_ERROR;
    }
    return TR_OK;
}
