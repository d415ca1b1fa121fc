/* values/seq.c: tuples, lists and named tuples.
 *
 * A sequence value holds a list of values (u.seq.items). A named tuple keeps its type in
 * u.seq.nt_type (field access by name, rebuilt by the type's _make). An input container
 * (a tuple/list read from the frame through a source) starts lazy (SEQ_LAZY: u.seq.real is
 * the real container, items NULL) and is wrapped item by item, with a LENGTH_CHECK guard,
 * on first read (cdyn_tx_materialize, wrap.c): a list that is only appended to is not
 * specialised on its contents. Stores into an input list are replayed on the real list by
 * the transformed code (side effects). */
#include "../tx.h"
#include "../codegen.h"

static PyObject *
items(PyObject *v)
{
    return V(v)->u.seq.items;
}

/* ---- attributes and methods -------------------------------------------------------------- */

/* Index of field `name` of a named tuple type, or -1. */
static Py_ssize_t
field_index(PyObject *nt_type, PyObject *name)
{
    PyObject *fields = PyObject_GetAttr(nt_type, cdyn_G.s_match_args);
    Py_ssize_t idx = -1;
    if (fields == NULL) {
        PyErr_Clear();
        return -1;
    }
    if (PyTuple_Check(fields)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields); i++) {
            if (PyUnicode_Compare(PyTuple_GET_ITEM(fields, i), name) == 0) {
                idx = i;
                break;
            }
        }
    }
    Py_DECREF(fields);
    return idx;
}

static PyTypeObject *seq_python_type(PyObject *v);

static tr_status
seq_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyTypeObject *base = V(v)->kind == VK_LIST ? &PyList_Type : &PyTuple_Type;
    if (V(v)->u.seq.nt_type != NULL) {
        tr_status st = cdyn_tx_materialize(tx, v);
        Py_ssize_t idx;
        if (st != TR_OK) {
            return st;
        }
        idx = field_index(V(v)->u.seq.nt_type, name);
        if (idx >= 0 && idx < PyList_GET_SIZE(items(v))) {
            *out = Py_NewRef(PyList_GET_ITEM(items(v), idx));
            return TR_OK;
        }
        st = cdyn_namedtuple_getattr(tx, v, name, out);   /* _replace, _fields, methods */
        if (st != TR_NOTIMPL) {
            return st;
        }
    }
    return cdyn_container_getattr(tx, v, V(v)->u.seq.nt_type ? seq_python_type(v) : base, name,
                                  out);
}

/* An int constant argument (a dynamic int specialised to its value): 0 and *i set, or -1
 * when it is not one. */
static int
const_index(cdyn_tx *tx, PyObject *v, Py_ssize_t *i)
{
    PyObject *c = NULL;
    int rc = -1;
    if (V(v)->kind == VK_SYMINT) {   /* a dynamic int input: specialised (guarded) */
        if (cdyn_sym_specialize(tx, v, &c) != TR_OK) {
            PyErr_Clear();
            return -1;
        }
        v = c;
    }
    if (V(v)->kind == VK_CONST && PyLong_Check(V(v)->u.cnst.value)) {
        *i = PyLong_AsSsize_t(V(v)->u.cnst.value);
        rc = *i == -1 && PyErr_Occurred() ? -1 : 0;
        PyErr_Clear();
    }
    Py_XDECREF(c);
    return rc;
}

/* list.pop([i]) */
static tr_status
list_pop(cdyn_tx *tx, PyObject *v, PyObject *const *args, Py_ssize_t nargs, PyObject **out)
{
    Py_ssize_t n = PyList_GET_SIZE(items(v)), i = n - 1;
    tr_status st;
    if (nargs == 1) {
        if (const_index(tx, args[0], &i) < 0) {
            return cdyn_tx_unsupported(tx, "list.pop with a non-constant index");
        }
        if (i < 0) {
            i += n;
        }
    }
    if (i < 0 || i >= n) {
        return cdyn_tx_unsupported(tx, "pop index out of range");
    }
    if ((st = cdyn_container_mutating(tx, v)) != TR_OK) {
        return st;
    }
    *out = Py_NewRef(PyList_GET_ITEM(items(v), i));
    return PyList_SetSlice(items(v), i, i + 1, NULL) < 0 ? TR_ERROR : TR_OK;
}

/* index(x[, start[, stop]]) / count(x) / remove(x): the positions where an item equals x. */
static tr_status
find_equal(cdyn_tx *tx, PyObject *v, PyObject *const *args, Py_ssize_t nargs, int count,
           Py_ssize_t *out)
{
    Py_ssize_t n = PyList_GET_SIZE(items(v)), lo = 0, hi = n, found = 0;
    if (nargs < 1 || nargs > (count ? 1 : 3) ||
        (nargs >= 2 && const_index(tx, args[1], &lo) < 0) ||
        (nargs == 3 && const_index(tx, args[2], &hi) < 0)) {
        return cdyn_tx_unsupported(tx, "index/count with these arguments");
    }
    lo = lo < 0 ? (lo + n < 0 ? 0 : lo + n) : lo;
    hi = hi < 0 ? (hi + n < 0 ? 0 : hi + n) : (hi > n ? n : hi);
    *out = -1;
    for (Py_ssize_t i = lo; i < hi; i++) {
        int eq = 0;
        tr_status st = cdyn_values_equal(tx, PyList_GET_ITEM(items(v), i), args[0], &eq);
        if (st != TR_OK) {
            return st;
        }
        if (eq && !count) {
            *out = i;
            return TR_OK;
        }
        found += eq;
    }
    if (count) {
        *out = found;
    }
    return TR_OK;
}

/* The sort keys of the items (key(item) when key is given, called once per item, in
 * order): *out a new list of the key values. */
static tr_status
sort_keys(cdyn_tx *tx, cdyn_fs *fs, PyObject *saved, PyObject *key, PyObject **out)
{
    Py_ssize_t n = PyList_GET_SIZE(saved);
    PyObject *l = PyList_New(n);
    if (l == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(saved, i), *k = NULL;
        tr_status st = TR_OK;
        if (key != NULL) {
            st = cdyn_v_call(tx, fs, key, &item, 1, NULL, &k);
        }
        else {
            k = Py_NewRef(item);
        }
        if (st != TR_OK) {
            Py_DECREF(l);
            return st;
        }
        PyList_SET_ITEM(l, i, k);
    }
    *out = l;
    return TR_OK;
}

/* The permutation that sorts key values kv (a list of values) as list.sort does (stable,
 * reverse keeping equal items in order): for constant keys sorted() on their real values;
 * otherwise (user objects with __lt__, functools.cmp_to_key) the polyfills' merge sort
 * inlined, which compares with `<` only, as list.sort. *perm: a new list of ints. */
static tr_status
sort_order(cdyn_tx *tx, PyObject *kv, PyObject *rev, PyObject **perm)
{
    Py_ssize_t n = PyList_GET_SIZE(kv);
    PyObject *keys = PyList_New(n), *idx = NULL, *getter = NULL, *kw = NULL, *sorted_fn;
    PyObject *mod = NULL, *ms = NULL, *args[2] = {NULL, NULL}, *r = NULL;
    tr_status st = TR_OK;
    *perm = NULL;
    for (Py_ssize_t i = 0; keys != NULL && i < n; i++) {
        PyObject *c = cdyn_v_as_constant(PyList_GET_ITEM(kv, i));
        if (c == NULL) {
            PyErr_Clear();
            Py_CLEAR(keys);
            break;
        }
        PyList_SET_ITEM(keys, i, c);
    }
    if (keys != NULL) {
        idx = PyObject_CallFunction((PyObject *)&PyRange_Type, "n", n);
        getter = PyObject_GetAttrString(keys, "__getitem__");
        sorted_fn = PyDict_GetItemString(PyEval_GetBuiltins(), "sorted");
        kw = getter ? Py_BuildValue("{sOsO}", "key", getter, "reverse", rev) : NULL;
        if (idx != NULL && kw != NULL && sorted_fn != NULL) {
            PyObject *a = PyTuple_Pack(1, idx);
            *perm = a ? PyObject_Call(sorted_fn, a, kw) : NULL;
            Py_XDECREF(a);
        }
        Py_XDECREF(getter);
        Py_XDECREF(kw);
        Py_XDECREF(idx);
        Py_DECREF(keys);
        if (*perm == NULL) {
            return cdyn_tx_unsupported(tx, "sort failed");
        }
        return TR_OK;
    }
    mod = PyImport_ImportModule("cdynamo.polyfills.builtins");
    ms = mod ? PyObject_GetAttrString(mod, "_merge_sort") : NULL;
    args[0] = ms ? cdyn_value_seq_list(VK_LIST, kv) : NULL;
    args[1] = args[0] ? cdyn_value_const(PyObject_IsTrue(rev) ? Py_True : Py_False) : NULL;
    st = args[1] ? cdyn_tx_inline_function(tx, ms, NULL, NULL, args, 2, NULL, &r) : TR_ERROR;
    if (st == TR_OK) {   /* a list of int constants */
        PyObject *order = V(r)->kind == VK_LIST ? V(r)->u.seq.items : NULL;
        *perm = order ? PyList_New(PyList_GET_SIZE(order)) : NULL;
        for (Py_ssize_t i = 0; *perm != NULL && i < PyList_GET_SIZE(order); i++) {
            PyObject *o = PyList_GET_ITEM(order, i);
            if (V(o)->kind != VK_CONST || !PyLong_Check(V(o)->u.cnst.value)) {
                Py_CLEAR(*perm);
                st = cdyn_tx_unsupported(tx, "sort order not known while tracing");
                break;
            }
            PyList_SET_ITEM(*perm, i, Py_NewRef(V(o)->u.cnst.value));
        }
        st = st == TR_OK && *perm == NULL ? TR_ERROR : st;
    }
    Py_XDECREF(r);
    Py_XDECREF(args[0]);
    Py_XDECREF(args[1]);
    Py_XDECREF(ms);
    Py_XDECREF(mod);
    return st;
}

/* list.sort(key=None, reverse=False): stable. As CPython's list.sort, the list is empty while
 * the keys are computed and compared (a key function sees len 0); afterwards it holds the
 * sorted items (items added meanwhile are dropped) or, when a key raised, the items as they
 * were, and a list changed meanwhile raises ValueError("list modified during sort"). */
static tr_status
list_sort(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames, PyObject **out)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *key = NULL, *rev = Py_False, *kv = NULL, *perm = NULL, *saved = NULL;
    PyObject *result = NULL;
    int modified;
    tr_status st;
    if (nargs != nkw) {
        return cdyn_tx_unsupported(tx, "sort() takes no positional arguments");
    }
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        if (cdyn_name_is(name, "key")) {
            key = cdyn_v_is_none(args[k]) ? NULL : args[k];
        }
        else if (cdyn_name_is(name, "reverse") && V(args[k])->kind == VK_CONST) {
            rev = V(args[k])->u.cnst.value;
        }
        else {
            return cdyn_tx_unsupported(tx, "sort() argument %U", name);
        }
    }
    st = cdyn_container_mutating(tx, v);
    if (st != TR_OK) {
        return st;
    }
    saved = PyList_GetSlice(items(v), 0, PY_SSIZE_T_MAX);
    if (saved == NULL || PyList_SetSlice(items(v), 0, PY_SSIZE_T_MAX, NULL) < 0) {
        Py_XDECREF(saved);
        return TR_ERROR;
    }
    st = sort_keys(tx, fs, saved, key, &kv);
    if (st == TR_OK) {
        st = sort_order(tx, kv, rev, &perm);
    }
    Py_XDECREF(kv);
    modified = PyList_GET_SIZE(items(v)) != 0;
    if (st == TR_OK) {
        assert(PyList_GET_SIZE(perm) == PyList_GET_SIZE(saved));
        result = PyList_New(PyList_GET_SIZE(perm));
        for (Py_ssize_t i = 0; result && i < PyList_GET_SIZE(perm); i++) {
            Py_ssize_t j = PyLong_AsSsize_t(PyList_GET_ITEM(perm, i));
            assert(j >= 0 && j < PyList_GET_SIZE(saved));
            PyList_SET_ITEM(result, i, Py_NewRef(PyList_GET_ITEM(saved, j)));
        }
        st = result ? TR_OK : TR_ERROR;
    }
    Py_XDECREF(perm);
    if (PyList_SetSlice(items(v), 0, PY_SSIZE_T_MAX, result ? result : saved) < 0) {
        st = TR_ERROR;
    }
    Py_XDECREF(result);
    Py_DECREF(saved);
    if (st == TR_OK && modified) {
        return cdyn_tx_raise_text(tx, PyExc_ValueError, "list modified during sort");
    }
    *out = st == TR_OK ? cdyn_value_const(Py_None) : NULL;
    return st == TR_OK && *out == NULL ? TR_ERROR : st;
}

tr_status
cdyn_seq_not_found(cdyn_tx *tx, const char *owner, const char *method, PyObject *x)
{
    if (strcmp(owner, "tuple") == 0 || (strcmp(owner, "list") == 0 && strcmp(method, "remove") == 0)) {
        return cdyn_tx_raise_text(tx, PyExc_ValueError, "%s.%s(x): x not in %s", owner, method,
                                  owner);
    }
    if (V(x)->kind != VK_CONST) {   /* the message holds repr(x) */
        return cdyn_tx_unsupported(tx, "%s.%s of an item not in it (ValueError)", owner, method);
    }
    return cdyn_tx_raise_text(tx, PyExc_ValueError, "%R is not in %s", V(x)->u.cnst.value, owner);
}

/* Methods that read a list or tuple: copy, index, count. */
static tr_status
seq_read_method(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *const *args,
                Py_ssize_t nargs, PyObject **out, int *handled)
{
    Py_ssize_t r = 0;
    tr_status st;
    *handled = 1;
    if (cdyn_name_is(name, "copy") && nargs == 0 && V(v)->kind == VK_LIST) {
        PyObject *l = PyList_GetSlice(items(v), 0, PY_SSIZE_T_MAX);
        *out = l ? cdyn_value_seq_list(VK_LIST, l) : NULL;
        Py_XDECREF(l);
        return *out ? TR_OK : TR_ERROR;
    }
    if (cdyn_name_is(name, "index") || cdyn_name_is(name, "count")) {
        int count = cdyn_name_is(name, "count");
        st = find_equal(tx, v, args, nargs, count, &r);
        if (st != TR_OK) {
            return st;
        }
        if (r < 0) {
            return cdyn_seq_not_found(tx, V(v)->kind == VK_LIST ? "list" : "tuple", "index",
                                      args[0]);
        }
        *out = cdyn_value_const_steal(PyLong_FromSsize_t(r));
        return *out ? TR_OK : TR_ERROR;
    }
    *handled = 0;
    return TR_OK;
}

/* list.extend(generator): each item appended before the next is made, as CPython's
 * list.extend consumes an iterator (the generator may read the list it extends). */
static tr_status
list_extend_lazily(cdyn_tx *tx, PyObject *v, PyObject *gen)
{
    PyObject *it = NULL, *item = NULL;
    tr_status st = cdyn_v_iter(tx, gen, &it);
    while (st == TR_OK) {
        st = cdyn_v_next(tx, it, &item);
        if (st != TR_OK || item == NULL) {
            break;
        }
        st = cdyn_container_mutating(tx, v);
        if (st == TR_OK && PyList_Append(items(v), item) < 0) {
            st = TR_ERROR;
        }
        Py_CLEAR(item);
    }
    Py_XDECREF(it);
    return st;
}

/* Methods that change a list: the list was materialized (an input list's whole contents are
 * written back). */
static tr_status
list_write_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *name, PyObject *const *args,
                  Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyObject *more = NULL;
    Py_ssize_t i = 0, n = PyList_GET_SIZE(items(v));
    tr_status st = TR_OK;
    if (cdyn_name_is(name, "sort")) {
        return list_sort(tx, fs, v, args, nargs, kwnames, out);
    }
    if (kwnames != NULL) {
        return cdyn_tx_unsupported(tx, "keyword arguments to list.%U", name);
    }
    if (cdyn_name_is(name, "pop") && nargs <= 1) {
        return list_pop(tx, v, args, nargs, out);
    }
    if (cdyn_name_is(name, "append") && nargs == 1) {
        more = PyList_New(1);
        if (more != NULL) {
            PyList_SET_ITEM(more, 0, Py_NewRef(args[0]));
        }
        i = n;
    }
    else if (cdyn_name_is(name, "extend") && nargs == 1 && V(args[0])->kind == VK_GENERATOR) {
        st = list_extend_lazily(tx, v, args[0]);
        goto done;
    }
    else if (cdyn_name_is(name, "extend") && nargs == 1) {
        st = cdyn_v_unpack(tx, args[0], &more);
        i = n;
    }
    else if (cdyn_name_is(name, "insert") && nargs == 2) {
        if (const_index(tx, args[0], &i) < 0) {
            return cdyn_tx_unsupported(tx, "list.insert with a non-constant index");
        }
        i = i < 0 ? (i + n < 0 ? 0 : i + n) : (i > n ? n : i);
        more = PyList_New(1);
        if (more != NULL) {
            PyList_SET_ITEM(more, 0, Py_NewRef(args[1]));
        }
    }
    else if (cdyn_name_is(name, "remove") && nargs == 1) {
        st = find_equal(tx, v, args, 1, 0, &i);
        if (st == TR_OK && i < 0) {
            st = cdyn_seq_not_found(tx, "list", "remove", args[0]);
        }
        if (st == TR_OK && (st = cdyn_container_mutating(tx, v)) == TR_OK &&
            PyList_SetSlice(items(v), i, i + 1, NULL) < 0) {
            st = TR_ERROR;
        }
        goto done;
    }
    else if ((cdyn_name_is(name, "reverse") || cdyn_name_is(name, "clear")) && nargs == 0) {
        st = cdyn_container_mutating(tx, v);
        if (st == TR_OK && (cdyn_name_is(name, "reverse") ? PyList_Reverse(items(v))
                                                          : PyList_SetSlice(items(v), 0, n, NULL)) < 0) {
            st = TR_ERROR;
        }
        goto done;
    }
    else {
        return cdyn_tx_unsupported(tx, "method %U of %S", name, v);
    }
    if (st == TR_OK && more == NULL) {
        st = TR_ERROR;
    }
    if (st == TR_OK) {
        st = cdyn_container_mutating(tx, v);
    }
    if (st == TR_OK && PyList_SetSlice(items(v), i, i, more) < 0) {
        st = TR_ERROR;
    }
done:
    Py_XDECREF(more);
    *out = st == TR_OK ? cdyn_value_const(Py_None) : NULL;
    return st == TR_OK && *out == NULL ? TR_ERROR : st;
}

/* Methods of lists and tuples. An input list whose items were never read only records its
 * appends (replayed; the list stays unread). */
static int is_size(PyObject *v);

/* torch.Size.numel() of a Size with symbolic items: the product of its items (1 for none). */
static tr_status
size_numel(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    PyObject *acc = cdyn_value_const_steal(PyLong_FromLong(1));
    tr_status st = acc ? TR_OK : TR_ERROR;
    for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(items(v)); i++) {
        PyObject *r = NULL;
        st = cdyn_v_binop(tx, 5 /* * */, acc, PyList_GET_ITEM(items(v), i), &r);
        Py_SETREF(acc, r);
    }
    if (st != TR_OK) {
        Py_XDECREF(acc);
        return st;
    }
    *out = acc;
    return TR_OK;
}

static tr_status
seq_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *name, PyObject *const *args,
                Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    cdyn_value *x = V(v);
    tr_status st;
    int handled = 0;
    if (x->kind == VK_LIST && (x->bits & (SEQ_LAZY | SEQ_APPENDED)) && x->source != NULL &&
        cdyn_name_is(name, "append") && nargs == 1 && kwnames == NULL) {
        /* append to an input list whose items were never read: replay it, and keep the
           list unread; the values appended wait in items until it is read */
        cdyn_tx_mutated(tx, v);   /* first: the undo log keeps its state before */
        if (x->u.seq.items == NULL && (x->u.seq.items = PyList_New(0)) == NULL) {
            return TR_ERROR;
        }
        if (cdyn_tx_effect(tx, EFF_APPEND, v, name, args[0]) != TR_OK ||
            PyList_Append(x->u.seq.items, args[0]) < 0) {
            return TR_ERROR;
        }
        x->bits |= SEQ_APPENDED;
        *out = cdyn_value_const(Py_None);
        return *out ? TR_OK : TR_ERROR;
    }
    st = cdyn_tx_materialize(tx, v);
    if (st != TR_OK) {
        return st;
    }
    if (kwnames == NULL) {
        st = seq_read_method(tx, v, name, args, nargs, out, &handled);
        if (handled) {
            return st;
        }
    }
    if (is_size(v) && cdyn_name_is(name, "numel") && nargs == 0 && kwnames == NULL) {
        return size_numel(tx, v, out);
    }
    if (x->kind != VK_LIST || x->u.seq.nt_type != NULL) {
        return cdyn_tx_unsupported(tx, "method %U of %S", name, v);
    }
    return list_write_method(tx, fs, v, name, args, nargs, kwnames, out);
}

/* ---- container slots a named-tuple class overrides ---------------------------------------
 * A named tuple's class may define __getitem__ / __len__ (typing.NamedTuple subclasses that
 * index their fields): the traced `t[i]` and `len(t)` inline them; __iter__ / __contains__
 * overrides are not traced. tuple.__getitem__(t, i) and super().__getitem__(i) inside them
 * reach the builtin's own operation (cdyn_seq_base_dunder). */

/* The Python function v's class defines for dunder `name` in place of the builtin's
 * (borrowed), or NULL. */
static PyObject *
override_of(PyObject *v, const char *name)
{
    PyTypeObject *t = (PyTypeObject *)V(v)->u.seq.nt_type;
    PyObject *n, *fn;
    if (t == NULL || V(v)->kind != VK_TUPLE || !PyType_IsSubtype(t, &PyTuple_Type) ||
        t == (PyTypeObject *)cdyn_G.torch_size_type) {
        return NULL;   /* (a LIST's nt_type may be a module container class: a slice) */
    }
    n = PyUnicode_InternFromString(name);
    fn = n != NULL ? _PyType_Lookup(t, n) : NULL;   /* borrowed from the type */
    Py_XDECREF(n);
    PyErr_Clear();
    return fn != NULL && PyFunction_Check(fn) ? fn : NULL;
}

/* self.<name>(*args) inlined (the bound method of the value). */
static tr_status
call_dunder(cdyn_tx *tx, PyObject *self, PyObject *name, PyObject *const *args, Py_ssize_t nargs,
            PyObject **out)
{
    PyObject *bound = NULL;
    tr_status st = cdyn_v_getattr(tx, self, name, &bound);
    if (st == TR_OK) {
        st = cdyn_v_call(tx, NULL, bound, args, nargs, NULL, out);
        Py_DECREF(bound);
    }
    return st;
}

/* The overriding `name` (__getitem__ or __len__) of v inlined: TR_NOTIMPL when its class
 * does not override it. */
static tr_status
call_override(cdyn_tx *tx, PyObject *v, const char *name, PyObject *const *args,
              Py_ssize_t nargs, PyObject **out)
{
    PyObject *n;
    tr_status st;
    if (override_of(v, name) == NULL) {
        return TR_NOTIMPL;
    }
    if ((n = PyUnicode_FromString(name)) == NULL) {
        return TR_ERROR;
    }
    st = call_dunder(tx, v, n, args, nargs, out);
    Py_DECREF(n);
    return st;
}

/* A slot the class of v overrides in Python that is not traced (__iter__, __contains__):
 * unsupported; TR_NOTIMPL when it does not override it. */
static tr_status
untraced_override(cdyn_tx *tx, PyObject *v, const char *name)
{
    if (override_of(v, name) == NULL) {
        return TR_NOTIMPL;
    }
    return cdyn_tx_unsupported(tx, "%s of named-tuple class %s defined in Python", name,
                               ((PyTypeObject *)V(v)->u.seq.nt_type)->tp_name);
}

/* ---- protocol ---------------------------------------------------------------------------- */

static tr_status
seq_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    (void)tx;
    *out = PyList_GET_SIZE(items(v)) > 0;
    return TR_OK;
}

static tr_status
seq_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    tr_status st = untraced_override(tx, v, "__iter__");
    if (st != TR_NOTIMPL) {
        return st;
    }
    *out_list = PyList_GetSlice(items(v), 0, PyList_GET_SIZE(items(v)));
    return *out_list ? TR_OK : TR_ERROR;
}

static void keep_size(PyObject *r, PyObject *a, PyObject *b);

static tr_status seq_subscr_plain(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out);

static tr_status
seq_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out)
{
    tr_status st = call_override(tx, v, "__getitem__", &key, 1, out);
    return st != TR_NOTIMPL ? st : seq_subscr_plain(tx, v, key, out);
}

static tr_status
seq_subscr_plain(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out)
{
    PyObject *k;
    if (V(key)->kind != VK_CONST) {
        PyObject *ck = cdyn_tensor_constant_index(key);
        tr_status st;
        if (ck == NULL) {
            return PyErr_Occurred() ? TR_ERROR
                                    : cdyn_tx_unsupported(tx, "subscript with a non-constant key");
        }
        st = seq_subscr_plain(tx, v, ck, out);   /* l[torch.as_tensor(2)]: l[2] */
        Py_DECREF(ck);
        return st;
    }
    k = V(key)->u.cnst.value;
    if (PyLong_Check(k)) {
        Py_ssize_t n = PyList_GET_SIZE(items(v));
        Py_ssize_t i = PyLong_AsSsize_t(k);
        if (i < 0) {
            i += n;
        }
        if (i < 0 || i >= n) {   /* IndexError in the traced code (Sequence.__iter__ ends) */
            PyObject *msg = cdyn_value_const_steal(PyUnicode_FromString(
                V(v)->kind == VK_LIST ? "list index out of range" : "tuple index out of range"));
            tr_status st = msg != NULL ? cdyn_tx_raise(tx, PyExc_IndexError, &msg, 1) : TR_ERROR;
            Py_XDECREF(msg);
            return st;
        }
        *out = Py_NewRef(PyList_GET_ITEM(items(v), i));
        return TR_OK;
    }
    if (PySlice_Check(k)) {
        PyObject *sl = PyObject_GetItem(items(v), k);
        if (sl == NULL) {
            return TR_ERROR;
        }
        *out = cdyn_value_seq_list(V(v)->kind, sl);
        Py_DECREF(sl);
        keep_size(*out, v, NULL);   /* a slice of a torch.Size is one */
        return *out ? TR_OK : TR_ERROR;
    }
    return cdyn_tx_unsupported(tx, "sequence index of type %s", Py_TYPE(k)->tp_name);
}

/* t[i] on an input tuple not read yet (SEQ_LAZY), i a constant int in range: that item
 * through its ITEM source with a LENGTH_CHECK, the other items unread and unguarded, as
 * torch._dynamo guards a tuple's length and the items it reads (a tuple argument of which
 * only args[0] is used serves another args[1]). A later read of the whole tuple gets the
 * same value (memoised by source). TR_NOTIMPL otherwise. */
static tr_status
seq_subscr_lazy(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out)
{
    cdyn_value *x = V(v);
    PyObject *real = x->u.seq.real, *k, *idx, *src;
    Py_ssize_t i, n;
    tr_status st;
    if (x->kind != VK_TUPLE || (x->bits & (SEQ_LAZY | SEQ_APPENDED)) != SEQ_LAZY ||
        override_of(v, "__getitem__") != NULL ||
        x->source == NULL || real == NULL || !PyTuple_Check(real) || V(key)->kind != VK_CONST ||
        !PyLong_CheckExact(k = V(key)->u.cnst.value)) {
        return TR_NOTIMPL;
    }
    n = PyTuple_GET_SIZE(real);
    i = PyLong_AsSsize_t(k);
    if (i == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return TR_NOTIMPL;
    }
    i = i < 0 ? i + n : i;
    if (i < 0 || i >= n) {
        return TR_NOTIMPL;   /* the whole read raises IndexError */
    }
    if (cdyn_guards_add_len(tx->guards, x->source, n) < 0 ||
        (idx = PyLong_FromSsize_t(i)) == NULL) {
        return TR_ERROR;
    }
    src = cdyn_source_item(x->source, idx);
    Py_DECREF(idx);
    if (src == NULL) {
        return TR_ERROR;
    }
    st = cdyn_tx_wrap_real(tx, PyTuple_GET_ITEM(real, i), src, out);
    Py_DECREF(src);
    return st;
}

/* The error `l[k] = value` raises for a list of n items, where value is a real object (a
 * non-iterable constant, or a list of the items an iterable gave): the assignment run for real
 * on a list of n Nones, so the traced code raises CPython's own TypeError or ValueError,
 * whose text differs between Python releases. */
static tr_status
raise_like_slice_store(cdyn_tx *tx, Py_ssize_t n, PyObject *k, PyObject *value)
{
    PyObject *scratch = PyList_New(n);
    tr_status st;
    if (scratch == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyList_SET_ITEM(scratch, i, Py_NewRef(Py_None));
    }
    if (PyObject_SetItem(scratch, k, value) == 0) {
        Py_DECREF(scratch);
        return cdyn_tx_unsupported(tx, "slice assignment %R did not fail", k);
    }
    Py_DECREF(scratch);
    st = cdyn_tx_raise_pending(tx);
    return st == TR_NOTIMPL ? cdyn_tx_unsupported(tx, "slice assignment %R", k) : st;
}

/* l[i] = x, l[a:b] = iterable, l[a:b:c] = iterable of the same length. */
static tr_status
seq_store_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value)
{
    PyObject *k, *more = NULL, *spec = NULL;
    Py_ssize_t n, i, start, stop, step;
    tr_status st;
    if (V(key)->kind == VK_SYMINT || V(key)->kind == VK_SYMSLICE) {
        /* a dynamic int index or slice bound: specialised to its value (guarded), as
           torch._dynamo does for a list index */
        if ((st = cdyn_sym_specialize(tx, key, &spec)) != TR_OK) {
            return st;
        }
        st = V(spec)->kind == VK_CONST ? seq_store_subscr(tx, v, spec, value)
                                       : cdyn_tx_unsupported(tx, "STORE_SUBSCR with a "
                                                                 "non-constant key");
        Py_DECREF(spec);
        return st;
    }
    if (V(key)->kind != VK_CONST) {
        return cdyn_tx_unsupported(tx, "STORE_SUBSCR with a non-constant key");
    }
    k = V(key)->u.cnst.value;
    if (V(v)->kind != VK_LIST || V(v)->u.seq.nt_type != NULL || !(PyLong_Check(k) || PySlice_Check(k))) {
        return cdyn_tx_unsupported(tx, "STORE_SUBSCR into %S", v);
    }
    n = PyList_GET_SIZE(items(v));
    if (PyLong_Check(k)) {
        i = PyLong_AsSsize_t(k);
        if (i < 0) {
            i += n;
        }
        if (i < 0 || i >= n) {
            return cdyn_tx_unsupported(tx, "list assignment index out of range");
        }
        if ((st = cdyn_container_mutating(tx, v)) != TR_OK) {
            return st;
        }
        return PyList_SetItem(items(v), i, Py_NewRef(value)) < 0 ? TR_ERROR : TR_OK;
    }
    if (V(value)->kind == VK_CONST && Py_TYPE(V(value)->u.cnst.value)->tp_iter == NULL &&
        !PySequence_Check(V(value)->u.cnst.value)) {   /* not iterable: eager's TypeError */
        return raise_like_slice_store(tx, n, k, V(value)->u.cnst.value);
    }
    st = cdyn_v_unpack(tx, value, &more);
    if (st != TR_OK) {
        return st;
    }
    if (PySlice_Unpack(k, &start, &stop, &step) < 0) {   /* a step of 0: ValueError */
        Py_DECREF(more);
        st = cdyn_tx_raise_pending(tx);
        return st == TR_NOTIMPL ? cdyn_tx_unsupported(tx, "bad slice") : st;
    }
    if (step != 1 && PySlice_AdjustIndices(n, &start, &stop, step) != PyList_GET_SIZE(more)) {
        /* eager's ValueError "attempt to assign sequence of size ..." */
        st = raise_like_slice_store(tx, n, k, more);
        Py_DECREF(more);
        return st;
    }
    st = cdyn_container_mutating(tx, v);
    if (st == TR_OK && PyObject_SetItem(items(v), k, more) < 0) {
        st = TR_ERROR;
    }
    Py_DECREF(more);
    return st;
}

/* del l[i], del l[a:b:c] */
static tr_status
seq_delete_subscr(cdyn_tx *tx, PyObject *v, PyObject *key)
{
    Py_ssize_t n, i;
    PyObject *k;
    tr_status st;
    if (V(key)->kind != VK_CONST || V(v)->kind != VK_LIST || V(v)->u.seq.nt_type != NULL) {
        return cdyn_tx_unsupported(tx, "DELETE_SUBSCR on %S", v);
    }
    k = V(key)->u.cnst.value;
    if (!(PyLong_Check(k) || PySlice_Check(k))) {   /* eager's TypeError, in the trace */
        return cdyn_tx_raise_text(tx, PyExc_TypeError,
                                  "list indices must be integers or slices, not %s",
                                  Py_TYPE(k)->tp_name);
    }
    n = PyList_GET_SIZE(items(v));
    if (PySlice_Check(k)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(k, &start, &stop, &step) < 0) {   /* a step of 0: ValueError */
            st = cdyn_tx_raise_pending(tx);
            return st == TR_NOTIMPL ? cdyn_tx_unsupported(tx, "del of %R", k) : st;
        }
        st = cdyn_container_mutating(tx, v);
        return st == TR_OK && PyObject_DelItem(items(v), k) < 0 ? TR_ERROR : st;
    }
    i = PyLong_AsSsize_t(k);
    if (i < 0) {
        i += n;
    }
    if (i < 0 || i >= n) {
        return cdyn_tx_raise_text(tx, PyExc_IndexError, "list assignment index out of range");
    }
    if ((st = cdyn_container_mutating(tx, v)) != TR_OK) {
        return st;
    }
    return PyList_SetSlice(items(v), i, i + 1, NULL) < 0 ? TR_ERROR : TR_OK;
}

/* `item in seq`: == against each item (identity first), decided at trace time. */
static tr_status
seq_contains(cdyn_tx *tx, PyObject *v, PyObject *item, int *out)
{
    tr_status st = untraced_override(tx, v, "__contains__");
    if (st != TR_NOTIMPL) {
        return st;
    }
    *out = 0;
    st = TR_OK;
    for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(items(v)) && !*out; i++) {
        st = cdyn_values_equal(tx, PyList_GET_ITEM(items(v), i), item, out);
    }
    return st;
}

/* 1 when v is a torch.Size: a tuple value rebuilt as one, or a constant Size. */
static int
is_size(PyObject *v)
{
    return (V(v)->kind == VK_TUPLE && V(v)->u.seq.nt_type == cdyn_G.torch_size_type) ||
           (V(v)->kind == VK_CONST &&
            Py_TYPE(V(v)->u.cnst.value) == (PyTypeObject *)cdyn_G.torch_size_type);
}

/* The result of seq + seq / seq * n is a torch.Size when an operand is (Size's __add__,
 * __radd__, __mul__, __rmul__); r is a new tuple value. */
static void
keep_size(PyObject *r, PyObject *a, PyObject *b)
{
    if (r != NULL && V(r)->kind == VK_TUPLE && V(r)->u.seq.nt_type == NULL &&
        (is_size(a) || (b != NULL && is_size(b)))) {
        V(r)->u.seq.nt_type = Py_NewRef(cdyn_G.torch_size_type);
    }
}

/* LIST, TUPLE or NULL: the sequence kind a value concatenates as (a constant tuple is a
 * tuple, a constant list a list), or 0 when it is not a sequence. */
static cdyn_vkind
seq_kind_of(PyObject *v)
{
    if (V(v)->kind == VK_TUPLE || V(v)->kind == VK_LIST) {
        return V(v)->kind;
    }
    if (V(v)->kind == VK_CONST && (PyTuple_CheckExact(V(v)->u.cnst.value) || is_size(v))) {
        return VK_TUPLE;
    }
    return VK_NULL;
}

/* seq * n and n * seq. */
static tr_status
seq_repeat(cdyn_tx *tx, PyObject *seq, PyObject *count, PyObject **out)
{
    PyObject *l = NULL, *res = NULL, *c = NULL;
    tr_status st;
    long n;
    if (V(count)->kind == VK_SYMINT && cdyn_v_python_type(count) == &PyLong_Type) {
        /* [t] * n with a symbolic n: by its value (guarded), as torch._dynamo */
        if ((st = cdyn_sym_specialize(tx, count, &c)) != TR_OK) {
            return st;
        }
        st = V(c)->kind == VK_CONST ? seq_repeat(tx, seq, c, out) : TR_NOTIMPL;
        Py_DECREF(c);
        return st;
    }
    if (V(count)->kind != VK_CONST || !PyLong_CheckExact(V(count)->u.cnst.value)) {
        return TR_NOTIMPL;
    }
    n = PyLong_AsLong(V(count)->u.cnst.value);
    if (n > 100000) {
        return cdyn_tx_unsupported(tx, "sequence repeated %ld times", n);
    }
    st = cdyn_v_unpack(tx, seq, &l);
    if (st != TR_OK) {
        return st;
    }
    res = PySequence_Repeat(l, n < 0 ? 0 : n);
    Py_DECREF(l);
    if (res == NULL) {
        return TR_ERROR;
    }
    *out = cdyn_value_seq_list(seq_kind_of(seq), res);
    Py_DECREF(res);
    return *out ? TR_OK : TR_ERROR;
}

/* seq + seq / seq * n on sequences of constants where one side is a constant tuple subclass
 * (torch.Size + (-1, 4) is a torch.Size): folded on the real objects. TR_NOTIMPL otherwise. */
static tr_status
fold_sized(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    PyObject *ra = cdyn_v_real(a), *rb = cdyn_v_real(b), *ca = NULL, *cb = NULL, *r = NULL;
    int sized = (V(a)->kind == VK_CONST && PyTuple_Check(ra) && !PyTuple_CheckExact(ra)) ||
                (V(b)->kind == VK_CONST && PyTuple_Check(rb) && !PyTuple_CheckExact(rb));
    if (!sized || (op != 0 && op != 5)) {
        return TR_NOTIMPL;
    }
    ca = cdyn_v_as_constant(a);
    cb = ca ? cdyn_v_as_constant(b) : NULL;
    if (cb != NULL) {
        r = op == 0 ? PyNumber_Add(ca, cb) : PyNumber_Multiply(ca, cb);
        if (r == NULL) {
            PyErr_Clear();
        }
    }
    Py_XDECREF(ca);
    Py_XDECREF(cb);
    if (r == NULL || !cdyn_is_constant(r)) {
        Py_XDECREF(r);
        return TR_NOTIMPL;
    }
    (void)tx;
    *out = cdyn_value_const_steal(r);
    return *out ? TR_OK : TR_ERROR;
}

/* An operator a named-tuple subclass defines in Python (PairTensor.__add__): that method
 * inlined on self (the forward form on a, or the reflected one on b; an in-place operator
 * without its own method uses the binary one). TR_NOTIMPL when neither defines it or both
 * return NotImplemented. */
static tr_status
user_operator(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    for (int side = 0; side < 2; side++) {
        PyObject *self = side ? b : a, *other = side ? a : b, *name = NULL, *fn;
        PyTypeObject *t;
        tr_status st;
        if ((V(self)->kind != VK_TUPLE && V(self)->kind != VK_LIST) ||
            V(self)->u.seq.nt_type == NULL || is_size(self) || (side && op >= 13)) {
            continue;
        }
        t = seq_python_type(self);
        name = cdyn_binop_dunder_name(op, side);
        fn = name && t ? _PyType_Lookup(t, name) : NULL;
        if (name != NULL && op >= 13 && (fn == NULL || !PyFunction_Check(fn))) {
            Py_SETREF(name, cdyn_binop_dunder_name(op - 13, 0));
            fn = name ? _PyType_Lookup(t, name) : NULL;
        }
        if (name == NULL) {
            return TR_ERROR;
        }
        if (fn == NULL || !PyFunction_Check(fn)) {
            Py_DECREF(name);
            continue;
        }
        st = call_dunder(tx, self, name, &other, 1, out);   /* self.<name>(other) */
        Py_DECREF(name);
        if (st != TR_OK) {
            return st;
        }
        if (!(V(*out)->kind == VK_CONST && V(*out)->u.cnst.value == Py_NotImplemented)) {
            return TR_OK;
        }
        Py_CLEAR(*out);
    }
    return TR_NOTIMPL;
}

static tr_status
seq_binop(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    cdyn_vkind ka = seq_kind_of(a), kb = seq_kind_of(b);
    int opb = op >= 13 ? op - 13 : op;
    PyObject *la = NULL, *lb = NULL;
    tr_status st = user_operator(tx, op, a, b, out);
    Py_ssize_t n;
    if (st != TR_NOTIMPL) {
        return st;
    }
    st = fold_sized(tx, op, a, b, out);
    if (st != TR_NOTIMPL) {
        return st;
    }
    if (op == 18 /* *= */ && V(a)->kind == VK_LIST) {
        PyObject *r = NULL;
        st = seq_repeat(tx, a, b, &r);
        if (st != TR_OK) {
            return st;
        }
        if ((st = cdyn_container_mutating(tx, a)) == TR_OK &&
            PyList_SetSlice(items(a), 0, PY_SSIZE_T_MAX, items(r)) < 0) {
            st = TR_ERROR;
        }
        Py_DECREF(r);
        *out = st == TR_OK ? Py_NewRef(a) : NULL;
        return st;
    }
    if (opb == 5 /* mul */) {
        st = ka != VK_NULL ? seq_repeat(tx, a, b, out)
                           : kb != VK_NULL ? seq_repeat(tx, b, a, out) : TR_NOTIMPL;
        if (st == TR_OK) {
            keep_size(*out, a, b);
        }
        return st;
    }
    if (op == 13 && V(a)->kind == VK_LIST && V(b)->kind != VK_TENSOR) {
        kb = VK_LIST;   /* list += any iterable (a tuple, a dict's keys, a set, ...) */
    }
    if (opb != 0 /* add */ || ka == VK_NULL || ka != kb) {
        return TR_NOTIMPL;   /* tuple + list raises in Python: left to it */
    }
    st = cdyn_v_unpack(tx, b, &lb);
    if (st != TR_OK) {
        return st;
    }
    if (op >= 13 && V(a)->kind == VK_LIST) {
        /* list += iterable: mutate in place */
        if ((st = cdyn_tx_materialize(tx, a)) != TR_OK ||
            (st = cdyn_container_mutating(tx, a)) != TR_OK) {
            Py_DECREF(lb);
            return st;
        }
        n = PyList_GET_SIZE(items(a));
        if (PyList_SetSlice(items(a), n, n, lb) < 0) {
            Py_DECREF(lb);
            return TR_ERROR;
        }
        Py_DECREF(lb);
        *out = Py_NewRef(a);
        return TR_OK;
    }
    st = cdyn_v_unpack(tx, a, &la);
    if (st != TR_OK) {
        Py_DECREF(lb);
        return st;
    }
    n = PyList_GET_SIZE(la);
    if (PyList_SetSlice(la, n, n, lb) < 0) {
        Py_DECREF(la);
        Py_DECREF(lb);
        return TR_ERROR;
    }
    Py_DECREF(lb);
    *out = cdyn_value_seq_list(ka, la);
    Py_DECREF(la);
    keep_size(*out, a, b);
    return *out ? TR_OK : TR_ERROR;
}

/* The kind a value compares as: seq_kind_of, and a constant torch.Size (a tuple subclass,
 * compared as a tuple: x.shape == (n, 3) with a symbolic n). */
static cdyn_vkind
compare_kind_of(PyObject *v)
{
    if (V(v)->kind == VK_CONST && PyTuple_Check(V(v)->u.cnst.value)) {
        return VK_TUPLE;
    }
    return seq_kind_of(v);
}

/* Comparison of two lists or two tuples: the first items that differ (==, identity first)
 * decide, else the lengths (a symbolic size compared is guarded as it is decided). */
static tr_status
seq_compare(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    cdyn_vkind ka = compare_kind_of(a), kb = compare_kind_of(b);
    PyObject *la = NULL, *lb = NULL, *cmp = NULL;
    Py_ssize_t na, nb, i;
    tr_status st;
    int eq = 1;
    if (ka == VK_NULL || kb == VK_NULL) {
        return TR_NOTIMPL;
    }
    if (ka != kb) {
        if (op != Py_EQ && op != Py_NE) {
            return TR_NOTIMPL;   /* list < tuple raises: left to Python */
        }
        *out = cdyn_value_bool(op == Py_NE);
        return *out ? TR_OK : TR_ERROR;
    }
    if ((st = cdyn_v_unpack(tx, a, &la)) != TR_OK) {
        return st;
    }
    if ((st = cdyn_v_unpack(tx, b, &lb)) != TR_OK) {
        Py_DECREF(la);
        return st;
    }
    na = PyList_GET_SIZE(la);
    nb = PyList_GET_SIZE(lb);
    if ((op == Py_EQ || op == Py_NE) && na != nb) {
        eq = 0;
        i = 0;
    }
    else {
        for (i = 0; i < na && i < nb && eq; i++) {
            st = cdyn_values_equal(tx, PyList_GET_ITEM(la, i), PyList_GET_ITEM(lb, i), &eq);
            if (st != TR_OK) {
                goto done;
            }
        }
        i = eq ? i : i - 1;
    }
    if (op == Py_EQ || op == Py_NE) {
        *out = cdyn_value_bool((op == Py_EQ) == eq);
    }
    else if (!eq) {
        st = cdyn_v_compare(tx, op, PyList_GET_ITEM(la, i), PyList_GET_ITEM(lb, i), &cmp);
        *out = cmp;
        cmp = NULL;
        goto done;
    }
    else {
        PyObject *x = PyLong_FromSsize_t(na), *y = PyLong_FromSsize_t(nb);
        int r = x && y ? PyObject_RichCompareBool(x, y, op) : -1;
        Py_XDECREF(x);
        Py_XDECREF(y);
        *out = r < 0 ? NULL : cdyn_value_bool(r);
    }
    st = *out ? TR_OK : TR_ERROR;
done:
    Py_XDECREF(la);
    Py_XDECREF(lb);
    return st;
}

/* A list/tuple of constants as a real list/tuple (not named tuples). */
static PyObject *
seq_as_constant(PyObject *v)
{
    Py_ssize_t n;
    PyObject *l = NULL;
    if (V(v)->bits & (SEQ_LAZY | SEQ_APPENDED)) {
        return NULL;
    }
    n = PyList_GET_SIZE(items(v));
    if (V(v)->u.seq.nt_type != NULL) {
        return NULL;
    }
    l = PyList_New(n);
    for (Py_ssize_t i = 0; l && i < n; i++) {
        PyObject *c = cdyn_v_as_constant(PyList_GET_ITEM(items(v), i));
        if (c == NULL) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, i, c);
    }
    if (l != NULL && V(v)->kind == VK_TUPLE) {
        Py_SETREF(l, PyList_AsTuple(l));
    }
    return l;
}

static tr_status
seq_len(cdyn_tx *tx, PyObject *v, Py_ssize_t *out)
{
    PyObject *r = NULL;
    tr_status st = call_override(tx, v, "__len__", NULL, 0, &r);
    if (st == TR_NOTIMPL) {
        *out = PyList_GET_SIZE(items(v));
        return TR_OK;
    }
    if (st != TR_OK) {
        return st;
    }
    if (V(r)->kind != VK_CONST || !PyLong_Check(V(r)->u.cnst.value)) {
        st = cdyn_tx_unsupported(tx, "__len__ of %S returned %S", v, r);
    }
    else if ((*out = PyLong_AsSsize_t(V(r)->u.cnst.value)) == -1 && PyErr_Occurred()) {
        st = TR_ERROR;
    }
    Py_DECREF(r);
    return st;
}

tr_status
cdyn_seq_base_dunder(cdyn_tx *tx, PyObject *self, PyObject *name, PyObject *const *args,
                     Py_ssize_t nargs, PyObject **out)
{
    if (V(self)->vt != &cdyn_seq_vt || V(self)->u.seq.nt_type == NULL) {
        return TR_NOTIMPL;
    }
    if (nargs == 1 && cdyn_name_is(name, "__getitem__") &&
        override_of(self, "__getitem__") != NULL) {
        return seq_subscr_plain(tx, self, args[0], out);
    }
    if (nargs == 0 && cdyn_name_is(name, "__len__") && override_of(self, "__len__") != NULL) {
        *out = cdyn_value_const_steal(PyLong_FromSsize_t(PyList_GET_SIZE(items(self))));
        return *out ? TR_OK : TR_ERROR;
    }
    return TR_NOTIMPL;
}

static tr_status
seq_graph_arg(cdyn_tx *tx, PyObject *v, PyObject **fake, PyObject **node)
{
    Py_ssize_t n = PyList_GET_SIZE(items(v));
    PyObject *fl = PyList_New(n), *nl = PyList_New(n);
    if (fl == NULL || nl == NULL) {
        Py_XDECREF(fl);
        Py_XDECREF(nl);
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *f = NULL, *nd = NULL;
        tr_status st = cdyn_v_graph_arg(tx, PyList_GET_ITEM(items(v), i), &f, &nd);
        if (st != TR_OK) {
            Py_DECREF(fl);
            Py_DECREF(nl);
            return st;
        }
        PyList_SET_ITEM(fl, i, f);
        PyList_SET_ITEM(nl, i, nd);
    }
    if (V(v)->kind == VK_TUPLE) {
        *fake = PyList_AsTuple(fl);
        *node = PyList_AsTuple(nl);
        Py_DECREF(fl);
        Py_DECREF(nl);
    }
    else {
        *fake = fl;
        *node = nl;
    }
    if (*fake == NULL || *node == NULL) {
        Py_CLEAR(*fake);
        Py_CLEAR(*node);
        return TR_ERROR;
    }
    return TR_OK;
}

static PyTypeObject *
seq_python_type(PyObject *v)
{
    if (V(v)->u.seq.nt_type != NULL) {
        return (PyTypeObject *)V(v)->u.seq.nt_type;
    }
    if (V(v)->u.seq.real != NULL) {
        return Py_TYPE(V(v)->u.seq.real);
    }
    return V(v)->kind == VK_LIST ? &PyList_Type : &PyTuple_Type;
}

/* ---- code generation --------------------------------------------------------------------- */

static tr_status
seq_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    if (V(v)->source != NULL && !(V(v)->bits & SEQ_SYNCED)) {
        return TR_OK;   /* rebuilt from its source (stores replayed on it) */
    }
    if (V(v)->kind == VK_LIST && V(v)->u.seq.nt_type != NULL) {
        return cdyn_tx_unsupported(tx, "cannot rebuild a slice of a module container");
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items(v)); i++) {
        tr_status st = cdyn_cg_collect(tx, cg, PyList_GET_ITEM(items(v), i));
        if (st != TR_OK) {
            return st;
        }
    }
    return TR_OK;
}

static int
emit_items(cdyn_cg *cg, PyObject *v)
{
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(items(v)); k++) {
        if (cdyn_cg_value(cg, PyList_GET_ITEM(items(v), k)) < 0) {
            return -1;
        }
    }
    return 0;
}

static int
seq_reconstruct(cdyn_cg *cg, PyObject *v)
{
    Py_ssize_t n = items(v) ? PyList_GET_SIZE(items(v)) : 0;
    int r;
    if (V(v)->source != NULL) {
        return cdyn_cg_source(cg, V(v)->source);
    }
    if (V(v)->kind == VK_LIST) {
        /* mutable: built once into a temporary so every use sees the same object */
        r = cdyn_cg_memo_load(cg, v);
        if (r != 0) {
            return r < 0 ? -1 : 0;
        }
        if (emit_items(cg, v) < 0 || cdyn_cg_emit(cg, BUILD_LIST, (int)n) < 0) {
            return -1;
        }
        return cdyn_cg_memo_store(cg, v, "obj");
    }
    if (V(v)->u.seq.nt_type != NULL) {
        /* a named tuple: its type's _make (namedtuple) or the type itself (structseq),
           called on the plain tuple; built once (an instance of a subclass has a __dict__
           that a graph break's STORE_ATTR writes: every use must see that object) */
        PyObject *maker = NULL;
        r = cdyn_cg_memo_load(cg, v);
        if (r != 0) {
            return r < 0 ? -1 : 0;
        }
        maker = PyObject_GetAttr(V(v)->u.seq.nt_type, cdyn_G.s_make);
        if (maker == NULL) {
            PyErr_Clear();
            maker = Py_NewRef(V(v)->u.seq.nt_type);
        }
        r = cdyn_cg_push_callable(cg, maker);
        Py_DECREF(maker);
        if (r < 0 || emit_items(cg, v) < 0 || cdyn_cg_emit(cg, BUILD_TUPLE, (int)n) < 0 ||
            cdyn_cg_call(cg, 1) < 0) {
            return -1;
        }
        return cdyn_cg_memo_store(cg, v, "obj");
    }
    if ((r = cdyn_cg_is_shared(cg, v)) != 0) {
        /* stored by side effects (an item and an attribute): one object, as in eager */
        if (r < 0 || (r = cdyn_cg_memo_load(cg, v)) != 0) {
            return r < 0 ? -1 : 0;
        }
        if (emit_items(cg, v) < 0 || cdyn_cg_emit(cg, BUILD_TUPLE, (int)n) < 0) {
            return -1;
        }
        return cdyn_cg_memo_store(cg, v, "obj");
    }
    if (emit_items(cg, v) < 0) {
        return -1;
    }
    return cdyn_cg_emit(cg, BUILD_TUPLE, (int)n);
}

/* target[:] = [<items>] */
static int
seq_writeback(cdyn_cg *cg, PyObject *v)
{
    PyObject *all = PySlice_New(NULL, NULL, NULL);
    int e = all == NULL || emit_items(cg, v) < 0 ||
            cdyn_cg_emit(cg, BUILD_LIST, (int)PyList_GET_SIZE(items(v))) < 0 ||
            cdyn_cg_value(cg, v) < 0 || cdyn_cg_load_const(cg, all) < 0 ||
            cdyn_cg_emit(cg, STORE_SUBSCR, 0) < 0;
    Py_XDECREF(all);
    return e ? -1 : 0;
}

/* Undo (undo.c): the items of a list (a tuple's never change; the input list a lazy one
 * stands for is the program's, never written while tracing). */
static PyObject *
seq_save(PyObject *v)
{
    return cdyn_undo_copy(V(v)->u.seq.items);
}

static int
seq_restore(PyObject *v, PyObject *saved)
{
    return cdyn_undo_refill(V(v)->u.seq.items, saved);
}

const cdyn_vtable cdyn_seq_vt = {
    .name = "SequenceVariable",
    .getattr = seq_getattr,
    .call_method = seq_call_method,
    .truth = seq_truth,
    .unpack = seq_unpack,
    .subscr = seq_subscr,
    .subscr_lazy = seq_subscr_lazy,
    .store_subscr = seq_store_subscr,
    .delete_subscr = seq_delete_subscr,
    .contains = seq_contains,
    .binop = seq_binop,
    .compare = seq_compare,
    .len = seq_len,
    .graph_arg = seq_graph_arg,
    .python_type = seq_python_type,
    .collect = seq_collect,
    .reconstruct = seq_reconstruct,
    .writeback = seq_writeback,
    .as_constant = seq_as_constant,
    .save = seq_save,
    .restore = seq_restore,
};
