/* values/dict.c: dicts with constant keys.
 *
 * u.dict.keys is a list of real constant keys, u.dict.vals the values in the same order
 * (insertion order, as dict). An input dict starts lazy (SEQ_LAZY, u.dict.real) and is
 * wrapped on first read, like input sequences (values/seq.c); stores into it are replayed
 * on the real dict by the transformed code. */
#include "../tx.h"
#include "../codegen.h"

static PyObject *
keys(PyObject *v)
{
    return V(v)->u.dict.keys;
}

static PyObject *
vals(PyObject *v)
{
    return V(v)->u.dict.vals;
}

/* Index of the constant key k (real object) in d, -1 when absent, -2 on error. */
static Py_ssize_t
find_key(PyObject *d, PyObject *k)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys(d)); i++) {
        int r = PyObject_RichCompareBool(PyList_GET_ITEM(keys(d), i), k, Py_EQ);
        if (r < 0) {
            return -2;
        }
        if (r) {
            return i;
        }
    }
    return -1;
}

/* ---- views: keys() / values() / items() see later changes of their dict ---------------- */

static PyObject *
vdict(PyObject *view)
{
    return V(view)->u.view.dict;
}

/* The current entries of a view as a new list of values. */
static tr_status
view_unpack(cdyn_tx *tx, PyObject *view, PyObject **out_list)
{
    PyObject *d = vdict(view);
    Py_ssize_t n = PyList_GET_SIZE(keys(d));
    unsigned which = V(view)->bits;
    PyObject *l = PyList_New(n);
    (void)tx;
    for (Py_ssize_t i = 0; l && i < n; i++) {
        PyObject *k = NULL, *e = NULL;
        if (which == VIEW_VALUES) {
            e = Py_NewRef(PyList_GET_ITEM(vals(d), i));
        }
        else if ((k = cdyn_value_const(PyList_GET_ITEM(keys(d), i))) != NULL) {
            if (which == VIEW_ITEMS) {
                PyObject *pair[2] = {k, PyList_GET_ITEM(vals(d), i)};
                e = cdyn_value_seq(VK_TUPLE, pair, 2);
                Py_DECREF(k);
            }
            else {
                e = k;
            }
        }
        if (e == NULL) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, i, e);
    }
    *out_list = l;
    return l ? TR_OK : TR_ERROR;
}

static tr_status
make_view(PyObject *d, unsigned which, PyObject **out)
{
    *out = cdyn_value_alloc(VK_DICTVIEW, NULL);
    if (*out == NULL) {
        return TR_ERROR;
    }
    V(*out)->u.view.dict = Py_NewRef(d);
    V(*out)->bits = which;
    return TR_OK;
}

static PyTypeObject *
view_type(PyObject *view)
{
    switch (V(view)->bits) {
    case VIEW_VALUES:
        return &PyDictValues_Type;
    case VIEW_ITEMS:
        return &PyDictItems_Type;
    default:
        return &PyDictKeys_Type;
    }
}

static const char *const view_methods[] = {"keys", "values", "items"};

static tr_status
dict_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    if (_PyType_Lookup(V(v)->kind == VK_DICTVIEW ? view_type(v) : &PyDict_Type, name) == NULL) {
        return cdyn_tx_unsupported(tx, "attribute %U of a dict", name);
    }
    *out = cdyn_value_method(NULL, name, v);
    return *out ? TR_OK : TR_ERROR;
}

static tr_status
dict_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *name, PyObject *const *args,
                 Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    tr_status st;
    (void)fs;
    if (kwnames != NULL) {
        return cdyn_tx_unsupported(tx, "keyword arguments to a container method");
    }
    st = cdyn_tx_materialize(tx, v);
    if (st != TR_OK) {
        return st;
    }
    if (V(v)->kind == VK_DICTVIEW) {
        return cdyn_tx_unsupported(tx, "method %U of a dict view", name);
    }
    for (unsigned w = 0; w < 3; w++) {
        if (cdyn_name_is(name, view_methods[w]) && nargs == 0) {
            return make_view(v, w, out);
        }
    }
    if (cdyn_name_is(name, "get") && (nargs == 1 || nargs == 2) && V(args[0])->kind == VK_CONST) {
        Py_ssize_t i = find_key(v, V(args[0])->u.cnst.value);
        if (i == -2) {
            return TR_ERROR;
        }
        if (i >= 0) {
            *out = Py_NewRef(PyList_GET_ITEM(vals(v), i));
        }
        else {
            *out = nargs == 2 ? Py_NewRef(args[1]) : cdyn_value_const(Py_None);
        }
        return *out ? TR_OK : TR_ERROR;
    }
    return cdyn_tx_unsupported(tx, "method %U of %S", name, v);
}

static tr_status
dict_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    (void)tx;
    if (V(v)->kind == VK_DICTVIEW) {
        v = vdict(v);
    }
    *out = PyList_GET_SIZE(vals(v)) > 0;
    return TR_OK;
}

static tr_status
dict_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    Py_ssize_t n;
    PyObject *l;
    if (V(v)->kind == VK_DICTVIEW) {
        return view_unpack(tx, v, out_list);
    }
    n = PyList_GET_SIZE(keys(v));
    l = PyList_New(n);
    if (l == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = cdyn_value_const(PyList_GET_ITEM(keys(v), i));
        if (k == NULL) {
            Py_DECREF(l);
            return TR_ERROR;
        }
        PyList_SET_ITEM(l, i, k);
    }
    *out_list = l;
    return TR_OK;
}

static tr_status
dict_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out)
{
    Py_ssize_t i;
    if (V(v)->kind == VK_DICTVIEW) {
        return cdyn_tx_unsupported(tx, "subscript of a dict view");
    }
    if (V(key)->kind != VK_CONST) {
        return cdyn_tx_unsupported(tx, "subscript with a non-constant key");
    }
    i = find_key(v, V(key)->u.cnst.value);
    if (i == -2) {
        return TR_ERROR;
    }
    if (i < 0) {
        return cdyn_tx_unsupported(tx, "missing dict key %R", V(key)->u.cnst.value);
    }
    *out = Py_NewRef(PyList_GET_ITEM(vals(v), i));
    return TR_OK;
}

static tr_status
dict_store_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value)
{
    PyObject *k;
    Py_ssize_t i;
    if (V(v)->kind == VK_DICTVIEW) {
        return cdyn_tx_unsupported(tx, "subscript of a dict view");
    }
    if (V(key)->kind != VK_CONST) {
        return cdyn_tx_unsupported(tx, "STORE_SUBSCR with a non-constant key");
    }
    k = V(key)->u.cnst.value;
    if (PyObject_Hash(k) == -1) {
        return cdyn_tx_unsupported(tx, "unhashable dict key");
    }
    i = find_key(v, k);
    if (i == -2) {
        return TR_ERROR;
    }
    if (V(v)->source != NULL && cdyn_tx_effect(tx, EFF_STORE_SUBSCR, v, k, value) != TR_OK) {
        return TR_ERROR;
    }
    cdyn_tx_mutated(tx, v);
    if (i >= 0) {
        return PyList_SetItem(vals(v), i, Py_NewRef(value)) < 0 ? TR_ERROR : TR_OK;
    }
    if (PyList_Append(keys(v), k) < 0 || PyList_Append(vals(v), value) < 0) {
        return TR_ERROR;
    }
    return TR_OK;
}

static tr_status
dict_delete_subscr(cdyn_tx *tx, PyObject *v, PyObject *key)
{
    Py_ssize_t i;
    if (V(v)->kind == VK_DICTVIEW) {
        return cdyn_tx_unsupported(tx, "subscript of a dict view");
    }
    if (V(key)->kind != VK_CONST) {
        return cdyn_tx_unsupported(tx, "DELETE_SUBSCR on %S", v);
    }
    i = find_key(v, V(key)->u.cnst.value);
    if (i == -2) {
        return TR_ERROR;
    }
    if (i < 0) {
        return cdyn_tx_unsupported(tx, "del of a missing dict key %R", V(key)->u.cnst.value);
    }
    if (V(v)->source != NULL &&
        cdyn_tx_effect(tx, EFF_DELETE_SUBSCR, v, V(key)->u.cnst.value, Py_None) != TR_OK) {
        return TR_ERROR;
    }
    cdyn_tx_mutated(tx, v);
    if (PyList_SetSlice(keys(v), i, i + 1, NULL) < 0 ||
        PyList_SetSlice(vals(v), i, i + 1, NULL) < 0) {
        return TR_ERROR;
    }
    return TR_OK;
}

static tr_status
dict_contains(cdyn_tx *tx, PyObject *v, PyObject *item, int *out)
{
    Py_ssize_t i;
    if (V(v)->kind == VK_DICTVIEW) {
        if (V(v)->bits != VIEW_KEYS) {
            return cdyn_tx_unsupported(tx, "'in' of a dict values/items view");
        }
        v = vdict(v);
    }
    if (V(item)->kind != VK_CONST) {
        return cdyn_tx_unsupported(tx, "'in' of %S in a dict", item);
    }
    i = find_key(v, V(item)->u.cnst.value);
    if (i == -2) {
        return TR_ERROR;
    }
    *out = i >= 0;
    return TR_OK;
}

static tr_status
dict_len(cdyn_tx *tx, PyObject *v, Py_ssize_t *out)
{
    (void)tx;
    if (V(v)->kind == VK_DICTVIEW) {
        v = vdict(v);
    }
    *out = PyList_GET_SIZE(vals(v));
    return TR_OK;
}

static tr_status
dict_graph_arg(cdyn_tx *tx, PyObject *v, PyObject **fake, PyObject **node)
{
    PyObject *fd, *nd;
    if (V(v)->kind == VK_DICTVIEW) {
        return cdyn_tx_unsupported(tx, "a dict view as an argument to a torch operation");
    }
    fd = PyDict_New();
    nd = PyDict_New();
    if (fd == NULL || nd == NULL) {
        goto error;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys(v)); i++) {
        PyObject *f = NULL, *n = NULL, *k = PyList_GET_ITEM(keys(v), i);
        tr_status st = cdyn_v_graph_arg(tx, PyList_GET_ITEM(vals(v), i), &f, &n);
        int e;
        if (st != TR_OK) {
            Py_XDECREF(fd);
            Py_XDECREF(nd);
            return st;
        }
        e = PyDict_SetItem(fd, k, f) < 0 || PyDict_SetItem(nd, k, n) < 0;
        Py_DECREF(f);
        Py_DECREF(n);
        if (e) {
            goto error;
        }
    }
    *fake = fd;
    *node = nd;
    return TR_OK;
error:
    Py_XDECREF(fd);
    Py_XDECREF(nd);
    return TR_ERROR;
}

static PyTypeObject *
dict_python_type(PyObject *v)
{
    if (V(v)->kind == VK_DICTVIEW) {
        return view_type(v);
    }
    return V(v)->u.dict.real != NULL ? Py_TYPE(V(v)->u.dict.real) : &PyDict_Type;
}

static tr_status
dict_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    if (V(v)->kind == VK_DICTVIEW) {
        return cdyn_cg_collect(tx, cg, vdict(v));
    }
    if (V(v)->source != NULL) {
        return TR_OK;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(vals(v)); i++) {
        tr_status st = cdyn_cg_collect(tx, cg, PyList_GET_ITEM(vals(v), i));
        if (st != TR_OK) {
            return st;
        }
    }
    return TR_OK;
}

static int
dict_reconstruct(cdyn_cg *cg, PyObject *v)
{
    Py_ssize_t n;
    int r;
    if (V(v)->kind == VK_DICTVIEW) {
        PyObject *name = PyUnicode_FromString(view_methods[V(v)->bits]);
        int i = name ? cdyn_cg_name(cg, name) : -1;
        Py_XDECREF(name);
        if (i < 0 || cdyn_cg_value(cg, vdict(v)) < 0 || cdyn_cg_emit(cg, LOAD_METHOD, i) < 0) {
            return -1;
        }
        return cdyn_cg_call(cg, 0);
    }
    if (V(v)->source != NULL) {   /* the real dict (side effects replayed on it) */
        return cdyn_cg_source(cg, V(v)->source);
    }
    r = cdyn_cg_memo_load(cg, v);
    if (r != 0) {
        return r < 0 ? -1 : 0;
    }
    n = PyList_GET_SIZE(vals(v));
    for (Py_ssize_t k = 0; k < n; k++) {
        if (cdyn_cg_load_const(cg, PyList_GET_ITEM(keys(v), k)) < 0 ||
            cdyn_cg_value(cg, PyList_GET_ITEM(vals(v), k)) < 0) {
            return -1;
        }
    }
    if (cdyn_cg_emit(cg, BUILD_MAP, (int)n) < 0) {
        return -1;
    }
    return cdyn_cg_memo_store(cg, v, "obj");
}

const cdyn_vtable cdyn_dict_vt = {
    .name = "ConstDictVariable",
    .getattr = dict_getattr,
    .call_method = dict_call_method,
    .truth = dict_truth,
    .unpack = dict_unpack,
    .subscr = dict_subscr,
    .store_subscr = dict_store_subscr,
    .delete_subscr = dict_delete_subscr,
    .contains = dict_contains,
    .len = dict_len,
    .graph_arg = dict_graph_arg,
    .python_type = dict_python_type,
    .collect = dict_collect,
    .reconstruct = dict_reconstruct,
};
