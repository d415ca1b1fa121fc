/* values/dict.c: dicts (dict, OrderedDict, defaultdict, Counter) and their views, and the
 * helpers every container family shares (hash keys, equality, mutation of inputs).
 *
 * A DICT value keeps its entries in insertion order: u.dict.keys holds each key's hash key
 * (tx.h: a constant is its own hash key, a tensor a private (marker, node) pair, an object
 * compared by identity the object itself), u.dict.vals the values, u.dict.keyvals (once a
 * key is not a constant) each key's value. Lookups compare hash keys with ==, as a real
 * dict compares its keys. u.dict.type is the real type (kept for isinstance, for a subclass
 * and for reconstruction), u.dict.factory a defaultdict's default_factory.
 *
 * An input dict (read through a source) starts lazy (SEQ_LAZY, u.dict.real) and is wrapped
 * on first read with a DICT_KEYS guard (its keys, in order) and its values through ITEM
 * sources. A mutation of an input container marks it SEQ_SYNCED and records one EFF_SYNC side
 * effect: the transformed code writes its final contents back (writeback), in program order
 * with the other side effects.
 *
 * Views (keys()/values()/items()) hold their dict value, so they see its later changes. */
#include "../tx.h"
#include "../codegen.h"
#include "user.h"

static PyObject *key_marker;          /* the private first item of a non-real hash key */
static PyObject *odict_type, *ddict_type, *counter_type;   /* collections' types */
static PyObject *fn_dict_update, *fn_dict_clear, *fn_odict_update, *fn_odict_clear;

/* Import what the family needs; 0 / -1. */
static int
dict_init(void)
{
    PyObject *coll = NULL;
    if (counter_type != NULL) {
        return 0;
    }
    key_marker = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    coll = PyImport_ImportModule("collections");
    if (coll == NULL || key_marker == NULL) {
        Py_XDECREF(coll);
        return -1;
    }
    odict_type = PyObject_GetAttrString(coll, "OrderedDict");
    ddict_type = PyObject_GetAttrString(coll, "defaultdict");
    counter_type = PyObject_GetAttrString(coll, "Counter");
    Py_DECREF(coll);
    if (odict_type == NULL || ddict_type == NULL || counter_type == NULL) {
        Py_CLEAR(counter_type);
        return -1;
    }
    fn_dict_update = PyObject_GetAttrString((PyObject *)&PyDict_Type, "update");
    fn_dict_clear = PyObject_GetAttrString((PyObject *)&PyDict_Type, "clear");
    fn_odict_update = PyObject_GetAttrString(odict_type, "update");
    fn_odict_clear = PyObject_GetAttrString(odict_type, "clear");
    if (!fn_dict_update || !fn_dict_clear || !fn_odict_update || !fn_odict_clear) {
        Py_CLEAR(counter_type);
        return -1;
    }
    return 0;
}

static PyObject *keys(PyObject *v) { return V(v)->u.dict.keys; }
static PyObject *vals(PyObject *v) { return V(v)->u.dict.vals; }
static Py_ssize_t dlen(PyObject *v) { return PyList_GET_SIZE(V(v)->u.dict.keys); }

/* The real type of a DICT value (borrowed). */
static PyTypeObject *
dtype(PyObject *v)
{
    return V(v)->u.dict.type ? (PyTypeObject *)V(v)->u.dict.type : &PyDict_Type;
}

static int
is_a(PyObject *v, PyObject *type)
{
    return type != NULL && PyType_IsSubtype(dtype(v), (PyTypeObject *)type);
}

#define IS_COUNTER(v) is_a(v, counter_type)
#define IS_ODICT(v) is_a(v, odict_type)
#define IS_DDICT(v) is_a(v, ddict_type)

/* ---- hash keys and equality (shared with sets and sequences, see tx.h) ----------------- */

/* 1 when obj compares by identity (its type keeps object's ==), or is a builtin function
 * (equal only to the same function of the same object). */
static int
identity_eq(PyObject *obj)
{
    return Py_TYPE(obj)->tp_richcompare == PyBaseObject_Type.tp_richcompare ||
           PyCFunction_Check(obj);
}

/* 1 when obj is a typing construct (typing.Union[int, str], List[int], int | str): its ==
 * and hash are pure functions of its arguments, run for real on it as a key. */
static int
typing_key(PyObject *obj)
{
    PyTypeObject *t = Py_TYPE(obj);
    return PyType_IsSubtype(t, &Py_GenericAliasType) ||
           cdyn_module_startswith((PyObject *)t, "typing");
}

/* Tuple of the hash keys of a list of values. */
static tr_status
hash_keys_tuple(cdyn_tx *tx, PyObject *items, PyObject **out)
{
    Py_ssize_t n = PyList_GET_SIZE(items);
    PyObject *t = PyTuple_New(n);
    if (t == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *h = NULL;
        tr_status st = cdyn_hash_key(tx, PyList_GET_ITEM(items, i), &h);
        if (st != TR_OK) {
            Py_DECREF(t);
            return st;
        }
        PyTuple_SET_ITEM(t, i, h);
    }
    *out = t;
    return TR_OK;
}

tr_status
cdyn_hash_key(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    cdyn_value *x = V(v);
    PyObject *real;
    tr_status st;
    *out = NULL;
    if (dict_init() < 0) {
        return TR_ERROR;
    }
    switch (x->kind) {
    case VK_CONST:
        if (PyObject_Hash(x->u.cnst.value) == -1) {
            return cdyn_tx_unsupported(tx, "unhashable key %R", x->u.cnst.value);
        }
        *out = Py_NewRef(x->u.cnst.value);
        return TR_OK;
    case VK_TENSOR:
        *out = PyTuple_Pack(2, key_marker, x->u.tensor.node);
        return *out ? TR_OK : TR_ERROR;
    case VK_FUNCTION:
        *out = PyTuple_Pack(2, key_marker, v);
        return *out ? TR_OK : TR_ERROR;
    case VK_OBJFN:
        if (x->u.ofn.self == NULL && identity_eq(x->u.ofn.fn)) {
            *out = Py_NewRef(x->u.ofn.fn);   /* list.__add__: a fixed slot function */
            return TR_OK;
        }
        break;
    case VK_PARTIAL:
        if (x->source != NULL) {
            break;   /* a partial of the frame: its real object (below) */
        }
        *out = PyTuple_Pack(2, key_marker, v);   /* made in the trace: by identity */
        return *out ? TR_OK : TR_ERROR;
    case VK_NEWOBJ: {
        /* an object made in the trace whose class keeps object's == and hash: by identity */
        PyTypeObject *t = cdyn_v_python_type(v);
        if (t != NULL && t->tp_richcompare == PyBaseObject_Type.tp_richcompare &&
            t->tp_hash == PyBaseObject_Type.tp_hash) {
            *out = PyTuple_Pack(2, key_marker, v);
            return *out ? TR_OK : TR_ERROR;
        }
        st = cdyn_dataclass_hash_key(tx, v, key_marker, out);   /* a frozen dataclass */
        if (st != TR_NOTIMPL) {
            return st;
        }
        break;
    }
    case VK_TUPLE:
        st = cdyn_tx_materialize(tx, v);
        return st == TR_OK ? hash_keys_tuple(tx, x->u.seq.items, out) : st;
    case VK_FROZENSET:
        *out = PyFrozenSet_New(x->u.set.order);
        return *out ? TR_OK : TR_ERROR;
    case VK_SYMINT: {
        /* a symbolic number as a key: by its value (guarded), as torch._dynamo */
        PyObject *k = NULL;
        st = cdyn_sym_specialize(tx, v, &k);
        if (st == TR_OK && V(k)->kind == VK_CONST) {
            *out = Py_NewRef(V(k)->u.cnst.value);
        }
        else if (st == TR_OK) {
            st = cdyn_tx_unsupported(tx, "%S as a dict key", v);
        }
        Py_XDECREF(k);
        return st;
    }
    case VK_LIST:
    case VK_DICT:
    case VK_SET: {
        /* unhashable: the TypeError eager raises, in the traced code */
        PyTypeObject *t = cdyn_v_python_type(v);
        return cdyn_tx_raise_text(tx, PyExc_TypeError, "unhashable type: '%s'",
                                  t ? t->tp_name : "?");
    }
    default:
        break;
    }
    real = cdyn_v_real(v);
    if (real == NULL || !(identity_eq(real) || typing_key(real)) || cdyn_is_tensor(real)) {
        return cdyn_tx_unsupported(tx, "%S as a dict key or set item", v);
    }
    if (PyObject_Hash(real) == -1) {
        return cdyn_tx_unsupported(tx, "unhashable key %S", v);
    }
    if (x->kind == VK_OBJECT && x->source != NULL &&
        cdyn_guards_add_id(tx->guards, x->source, real, 0) < 0) {
        return TR_ERROR;   /* its identity decides the lookup: guard it */
    }
    if (x->kind == VK_NNMODULE && cdyn_v_pin_identity(tx, v) != TR_OK) {
        return TR_ERROR;   /* a module guarded by type: its identity now decides */
    }
    *out = Py_NewRef(real);
    return TR_OK;
}

int
cdyn_hash_key_is_real(PyObject *h)
{
    if (!PyTuple_CheckExact(h)) {
        return 1;
    }
    if (PyTuple_GET_SIZE(h) == 2 && PyTuple_GET_ITEM(h, 0) == key_marker) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(h); i++) {
        if (!cdyn_hash_key_is_real(PyTuple_GET_ITEM(h, i))) {
            return 0;
        }
    }
    return 1;
}

tr_status
cdyn_values_equal(cdyn_tx *tx, PyObject *a, PyObject *b, int *out)
{
    PyObject *r = NULL;
    tr_status st;
    cdyn_vkind ka = V(a)->kind, kb = V(b)->kind;
    if (a == b || (ka == VK_TENSOR && kb == VK_TENSOR &&
                   V(a)->u.tensor.node == V(b)->u.tensor.node)) {
        *out = 1;   /* `==` of containers and `in` try identity first */
        return TR_OK;
    }
    if (ka == VK_TENSOR || kb == VK_TENSOR) {
        if (cdyn_v_is_none(a) || cdyn_v_is_none(b)) {
            *out = 0;   /* Tensor.__eq__(None) is False */
            return TR_OK;
        }
        return cdyn_tx_unsupported(tx, "== of a tensor in a container (data-dependent)");
    }
    if (ka == VK_CONST && kb == VK_CONST) {
        int e = PyObject_RichCompareBool(V(a)->u.cnst.value, V(b)->u.cnst.value, Py_EQ);
        if (e < 0) {
            return cdyn_tx_unsupported(tx, "== of constants failed");
        }
        *out = e;
        return TR_OK;
    }
    st = cdyn_v_compare(tx, Py_EQ, a, b, &r);
    if (st != TR_OK) {
        return st;
    }
    if (V(r)->kind == VK_SYMINT) {   /* sizes: decided, and guarded by the ShapeEnv */
        st = cdyn_v_truth(tx, r, out);
        Py_DECREF(r);
        return st;
    }
    if (V(r)->kind != VK_CONST) {
        Py_DECREF(r);
        return cdyn_tx_unsupported(tx, "== of container items is not a constant");
    }
    *out = PyObject_IsTrue(V(r)->u.cnst.value);
    Py_DECREF(r);
    return *out < 0 ? TR_ERROR : TR_OK;
}

tr_status
cdyn_container_getattr(cdyn_tx *tx, PyObject *v, PyTypeObject *type, PyObject *name,
                       PyObject **out)
{
    PyObject *attr = _PyType_Lookup(type, name);   /* borrowed */
    if (cdyn_name_is(name, "__class__")) {
        return cdyn_tx_wrap_real(tx, (PyObject *)type, NULL, out);
    }
    if (attr == NULL && !(type->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        /* a builtin container has no such attribute and takes none (frozenset().add): the
           AttributeError eager raises, in the traced code */
        return cdyn_tx_raise_text(tx, PyExc_AttributeError, "'%s' object has no attribute '%U'",
                                  type->tp_name, name);
    }
    if (attr == NULL || !(Py_IS_TYPE(attr, &PyMethodDescr_Type) ||
                          Py_IS_TYPE(attr, &PyWrapperDescr_Type) ||
                          Py_IS_TYPE(attr, &PyClassMethodDescr_Type) || PyFunction_Check(attr))) {
        return cdyn_tx_unsupported(tx, "attribute %U of a %s", name, type->tp_name);
    }
    *out = cdyn_value_method(NULL, name, v);
    return *out ? TR_OK : TR_ERROR;
}

tr_status
cdyn_container_mutating(cdyn_tx *tx, PyObject *v)
{
    cdyn_tx_mutated(tx, v);   /* first: the undo log keeps its state before */
    if (V(v)->bits & DICT_BY_POSITION) {   /* its keys are another instance's: no write-back */
        return cdyn_tx_unsupported(tx, "a change of an nn.Module hook registry");
    }
    if (V(v)->source != NULL && !(V(v)->bits & (SEQ_SYNCED | DICT_MIRROR))) {
        if (cdyn_tx_effect(tx, EFF_SYNC, v, NULL, Py_None) != TR_OK) {
            return TR_ERROR;
        }
        V(v)->bits |= SEQ_SYNCED;
    }
    return TR_OK;
}

/* ---- entries ------------------------------------------------------------------------------- */

/* Index of hash key h in d, -1 when absent, -2 on error. */
static Py_ssize_t
find(PyObject *d, PyObject *h)
{
    for (Py_ssize_t i = 0; i < dlen(d); i++) {
        PyObject *k = PyList_GET_ITEM(keys(d), i);
        int r = k == h ? 1 : PyObject_RichCompareBool(k, h, Py_EQ);
        if (r < 0) {
            return -2;
        }
        if (r) {
            return i;
        }
    }
    return -1;
}

/* The value of the i-th key (new ref). */
static PyObject *
keyval(PyObject *d, Py_ssize_t i)
{
    PyObject *kv = V(d)->u.dict.keyvals;
    if (kv != NULL && PyList_GET_ITEM(kv, i) != Py_None) {
        return Py_NewRef(PyList_GET_ITEM(kv, i));
    }
    return cdyn_value_const(PyList_GET_ITEM(keys(d), i));
}

/* Store (h, keyv, val) at the end, or replace the value of an equal key (kept). Raw: no
 * effect, no mutation note. 0 / -1. */
static int
raw_set(PyObject *d, PyObject *h, PyObject *keyv, PyObject *val)
{
    Py_ssize_t i = find(d, h);
    cdyn_value *x = V(d);
    int is_const = V(keyv)->kind == VK_CONST;
    if (i == -2) {
        return -1;
    }
    if (i >= 0) {
        return PyList_SetItem(x->u.dict.vals, i, Py_NewRef(val));
    }
    if (!is_const && x->u.dict.keyvals == NULL) {
        Py_ssize_t n = dlen(d);
        x->u.dict.keyvals = PyList_New(n);
        if (x->u.dict.keyvals == NULL) {
            return -1;
        }
        for (Py_ssize_t k = 0; k < n; k++) {
            PyList_SET_ITEM(x->u.dict.keyvals, k, Py_NewRef(Py_None));
        }
    }
    if (PyList_Append(x->u.dict.keys, h) < 0 || PyList_Append(x->u.dict.vals, val) < 0) {
        return -1;
    }
    if (x->u.dict.keyvals != NULL &&
        PyList_Append(x->u.dict.keyvals, is_const ? Py_None : keyv) < 0) {
        return -1;
    }
    return 0;
}

/* Remove entry i. 0 / -1. */
static int
raw_del(PyObject *d, Py_ssize_t i)
{
    cdyn_value *x = V(d);
    if (PyList_SetSlice(x->u.dict.keys, i, i + 1, NULL) < 0 ||
        PyList_SetSlice(x->u.dict.vals, i, i + 1, NULL) < 0) {
        return -1;
    }
    return x->u.dict.keyvals ? PyList_SetSlice(x->u.dict.keyvals, i, i + 1, NULL) : 0;
}

static int
raw_clear(PyObject *d)
{
    cdyn_value *x = V(d);
    Py_ssize_t n = dlen(d);
    if (PyList_SetSlice(x->u.dict.keys, 0, n, NULL) < 0 ||
        PyList_SetSlice(x->u.dict.vals, 0, n, NULL) < 0) {
        return -1;
    }
    Py_CLEAR(x->u.dict.keyvals);
    return 0;
}

PyObject *
cdyn_dict_new(PyTypeObject *type)
{
    PyObject *k = PyList_New(0), *vl = PyList_New(0), *d = NULL;
    if (k != NULL && vl != NULL) {
        d = cdyn_value_dict(k, vl);
    }
    Py_XDECREF(k);
    Py_XDECREF(vl);
    if (d != NULL && type != NULL && type != &PyDict_Type) {
        V(d)->u.dict.type = Py_NewRef((PyObject *)type);
    }
    return d;
}

/* A new dict value of type (d's own: with its factory) holding d's entries. */
static PyObject *
dict_copy_as(PyObject *d, PyTypeObject *type)
{
    PyObject *c = cdyn_dict_new(type);
    cdyn_value *x;
    if (c == NULL) {
        return NULL;
    }
    x = V(c);
    Py_SETREF(x->u.dict.keys, PyList_GetSlice(keys(d), 0, PY_SSIZE_T_MAX));
    Py_SETREF(x->u.dict.vals, PyList_GetSlice(vals(d), 0, PY_SSIZE_T_MAX));
    if (V(d)->u.dict.keyvals != NULL) {
        x->u.dict.keyvals = PyList_GetSlice(V(d)->u.dict.keyvals, 0, PY_SSIZE_T_MAX);
        if (x->u.dict.keyvals == NULL) {
            Py_CLEAR(c);
            return NULL;
        }
    }
    x->u.dict.factory = type == dtype(d) ? Py_XNewRef(V(d)->u.dict.factory) : NULL;
    if (x->u.dict.keys == NULL || x->u.dict.vals == NULL) {
        Py_CLEAR(c);
    }
    return c;
}

/* A new dict value of d's type (and factory) holding d's entries. */
static PyObject *
dict_copy(PyObject *d)
{
    return dict_copy_as(d, dtype(d));
}

tr_status
cdyn_dict_set(cdyn_tx *tx, PyObject *d, PyObject *key, PyObject *val)
{
    PyObject *h = NULL;
    tr_status st = cdyn_hash_key(tx, key, &h);
    if (st != TR_OK) {
        return st;
    }
    st = raw_set(d, h, key, val) < 0 ? TR_ERROR : TR_OK;
    Py_DECREF(h);
    return st;
}

/* The entries of v, a mapping read through keys() (reads_as_mapping: a user Mapping, an
 * OrderedDict subclass such as transformers' ModelOutput), as dict(v) reads them: v.keys()
 * (its methods inlined), then v[k] for each key. New lists in *kl / *vl. */
static tr_status
mapping_entries(cdyn_tx *tx, PyObject *v, PyObject **kl, PyObject **vl)
{
    PyObject *name = PyUnicode_FromString("keys"), *m = NULL, *ks = NULL;
    tr_status st = name ? cdyn_v_getattr(tx, v, name, &m) : TR_ERROR;
    if (st == TR_OK) {
        PyObject *view = NULL;
        st = cdyn_v_call(tx, NULL, m, NULL, 0, NULL, &view);
        if (st == TR_OK) {
            st = cdyn_v_unpack(tx, view, &ks);
        }
        Py_XDECREF(view);
    }
    *vl = st == TR_OK ? PyList_New(0) : NULL;
    if (st == TR_OK && *vl == NULL) {
        st = TR_ERROR;
    }
    for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(ks); i++) {
        PyObject *val = NULL;
        st = cdyn_v_subscr(tx, v, PyList_GET_ITEM(ks, i), &val);
        if (st == TR_OK && PyList_Append(*vl, val) < 0) {
            st = TR_ERROR;
        }
        Py_XDECREF(val);
    }
    if (st == TR_OK) {
        *kl = Py_NewRef(ks);
    }
    else {
        Py_CLEAR(*vl);
    }
    Py_XDECREF(name);
    Py_XDECREF(m);
    Py_XDECREF(ks);
    return st;
}

/* 1 when dict(v) / d.update(v) / {**v} read v as a mapping, through v.keys() and v[k] as
 * CPython's dict_merge does for an argument with a keys() method (a user Mapping, an
 * nn.ModuleDict, a mappingproxy, a dict subclass iterating otherwise than dict); 0 for a
 * DICT value, a dict subclass iterating as dict (read directly) and an iterable of pairs. */
static int
reads_as_mapping(PyObject *v, PyTypeObject *t)
{
    static PyObject *s_keys;
    if (t == NULL || V(v)->kind == VK_DICT || V(v)->kind == VK_DICTVIEW) {
        return 0;
    }
    if (PyType_IsSubtype(t, &PyDict_Type)) {
        return t->tp_iter != PyDict_Type.tp_iter;
    }
    if (s_keys == NULL && (s_keys = PyUnicode_InternFromString("keys")) == NULL) {
        PyErr_Clear();
        return 0;
    }
    return _PyType_Lookup(t, s_keys) != NULL;
}

/* The entries of v (a dict-family value, a mapping read through keys(), or an iterable of
 * pairs) as new lists of key values and values. An element of an iterable that is not a
 * pair stops the reading: *bad its index and *badlen its length, *kl / *vl the entries
 * before it (TR_OK); *bad is -1 when all were pairs. */
static tr_status
entries_of(cdyn_tx *tx, PyObject *v, PyObject **kl, PyObject **vl, Py_ssize_t *bad,
           Py_ssize_t *badlen)
{
    PyObject *items = NULL;
    PyTypeObject *t = V(v)->kind != VK_DICT ? cdyn_v_python_type(v) : NULL;
    tr_status st = cdyn_tx_materialize(tx, v);
    *kl = *vl = NULL;
    *bad = -1;
    if (st != TR_OK) {
        return st;
    }
    if (reads_as_mapping(v, t)) {
        return mapping_entries(tx, v, kl, vl);
    }
    if (t != NULL && PyType_IsSubtype(t, &PyDict_Type)) {
        /* a dict subclass's object iterating as dict: its items, read directly as CPython's
           dict_merge reads them (no override of keys / __getitem__ runs) */
        PyObject *d = NULL;
        st = cdyn_dict_subclass_items(tx, v, &d);
        if (st == TR_OK) {
            st = entries_of(tx, d, kl, vl, bad, badlen);
            Py_DECREF(d);
        }
        return st;
    }
    if (V(v)->kind == VK_DICT) {
        Py_ssize_t n = dlen(v);
        *kl = PyList_New(n);
        *vl = PyList_GetSlice(vals(v), 0, PY_SSIZE_T_MAX);
        for (Py_ssize_t i = 0; *kl && *vl && i < n; i++) {
            PyObject *k = keyval(v, i);
            if (k == NULL) {
                break;
            }
            PyList_SET_ITEM(*kl, i, k);
        }
        if (PyErr_Occurred() || *kl == NULL || *vl == NULL) {
            Py_CLEAR(*kl);
            Py_CLEAR(*vl);
            return TR_ERROR;
        }
        return TR_OK;
    }
    st = cdyn_v_unpack(tx, v, &items);
    if (st != TR_OK) {
        return st;
    }
    *kl = PyList_New(0);
    *vl = PyList_New(0);
    for (Py_ssize_t i = 0; st == TR_OK && *kl && *vl && i < PyList_GET_SIZE(items); i++) {
        PyObject *pair = NULL;
        st = cdyn_v_unpack(tx, PyList_GET_ITEM(items, i), &pair);
        if (st == TR_OK && PyList_GET_SIZE(pair) != 2) {
            *bad = i;
            *badlen = PyList_GET_SIZE(pair);
            Py_DECREF(pair);
            break;
        }
        if (st == TR_OK && (PyList_Append(*kl, PyList_GET_ITEM(pair, 0)) < 0 ||
                            PyList_Append(*vl, PyList_GET_ITEM(pair, 1)) < 0)) {
            st = TR_ERROR;
        }
        Py_XDECREF(pair);
    }
    Py_DECREF(items);
    if (st == TR_OK && (*kl == NULL || *vl == NULL)) {
        st = TR_ERROR;
    }
    if (st != TR_OK) {
        Py_CLEAR(*kl);
        Py_CLEAR(*vl);
    }
    return st;
}

/* The hash keys of a list of key values (new list). */
static tr_status
hash_all(cdyn_tx *tx, PyObject *kl, PyObject **out)
{
    PyObject *hl = PyList_New(PyList_GET_SIZE(kl));
    if (hl == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(kl); i++) {
        PyObject *h = NULL;
        tr_status st = cdyn_hash_key(tx, PyList_GET_ITEM(kl, i), &h);
        if (st != TR_OK) {
            Py_DECREF(hl);
            return st;
        }
        PyList_SET_ITEM(hl, i, h);
    }
    *out = hl;
    return TR_OK;
}

/* Store entries (hash keys hl, key values kl, values vl) into d: all checks were done. */
static int
raw_set_all(PyObject *d, PyObject *hl, PyObject *kl, PyObject *vl)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(hl); i++) {
        if (raw_set(d, PyList_GET_ITEM(hl, i), PyList_GET_ITEM(kl, i), PyList_GET_ITEM(vl, i)) < 0) {
            return -1;
        }
    }
    return 0;
}

/* d.update(other) (other NULL: none) with keyword entries (names, kv); Counter.update adds
 * (sign +1) or subtract()s (sign -1) counts when counting is set. */
static tr_status
update_from(cdyn_tx *tx, PyObject *d, PyObject *other, PyObject *const *kwv, PyObject *kwnames,
            int counting, int sign);

tr_status
cdyn_dict_update_op(cdyn_tx *tx, PyObject *d, PyObject *other, int merge)
{
    PyObject *m = NULL;
    tr_status st = cdyn_tx_materialize(tx, other);
    if (st != TR_OK) {
        return st;
    }
    if (V(d)->kind != VK_DICT || V(d)->source != NULL) {
        return cdyn_tx_unsupported(tx, "dict merge of %S into %S", other, d);
    }
    if (V(other)->kind != VK_DICT) {
        /* {**m} / f(**m) of a mapping: its entries through m.keys() and m[k], as eager (a
           dict subclass iterating as dict: its items) */
        PyTypeObject *t = cdyn_v_python_type(other);
        if (t == NULL || (!reads_as_mapping(other, t) && !PyType_IsSubtype(t, &PyDict_Type))) {
            return cdyn_tx_unsupported(tx, "dict merge of %S into %S", other, d);
        }
        if ((m = cdyn_dict_new(NULL)) == NULL) {
            return TR_ERROR;
        }
        st = update_from(tx, m, other, NULL, NULL, 0, 1);
        other = m;
    }
    for (Py_ssize_t i = 0; st == TR_OK && merge && i < dlen(other); i++) {
        Py_ssize_t j = find(d, PyList_GET_ITEM(keys(other), i));
        if (j != -1) {
            st = j == -2 ? TR_ERROR : cdyn_tx_unsupported(tx, "duplicate keyword argument");
        }
    }
    if (st == TR_OK) {
        st = update_from(tx, d, other, NULL, NULL, 0, 1);
    }
    Py_XDECREF(m);
    return st;
}

tr_status
cdyn_dict_kwargs(cdyn_tx *tx, PyObject *kw, PyObject *into, PyObject **names)
{
    tr_status st = cdyn_tx_materialize(tx, kw);
    *names = NULL;
    if (st != TR_OK) {
        return st;
    }
    if (V(kw)->kind != VK_DICT) {
        return cdyn_tx_unsupported(tx, "**kwargs that is not a dict");
    }
    for (Py_ssize_t i = 0; i < dlen(kw); i++) {
        if (!PyUnicode_Check(PyList_GET_ITEM(keys(kw), i))) {
            return cdyn_tx_unsupported(tx, "non-string keyword");
        }
        if (PyList_Append(into, PyList_GET_ITEM(vals(kw), i)) < 0) {
            return TR_ERROR;
        }
    }
    if (dlen(kw) > 0 && (*names = PyList_AsTuple(keys(kw))) == NULL) {
        return TR_ERROR;
    }
    return TR_OK;
}

/* ---- Counter helpers: counts folded on a real Counter of hash keys ----------------------- */

/* A real Counter (or dict when plain) mapping d's hash keys to its constant counts. */
static tr_status
real_counts(cdyn_tx *tx, PyObject *d, int plain, PyObject **out)
{
    PyObject *c = PyObject_CallNoArgs(plain ? (PyObject *)&PyDict_Type : counter_type);
    if (c == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < dlen(d); i++) {
        PyObject *v = PyList_GET_ITEM(vals(d), i);
        if (V(v)->kind != VK_CONST) {
            Py_DECREF(c);
            return cdyn_tx_unsupported(tx, "Counter with a non-constant count");
        }
        if (PyDict_SetItem(c, PyList_GET_ITEM(keys(d), i), V(v)->u.cnst.value) < 0) {
            Py_DECREF(c);
            return TR_ERROR;
        }
    }
    *out = c;
    return TR_OK;
}

/* Value for hash key h found in a or b (new ref): the key value of the first holding it. */
static PyObject *
key_from(PyObject *h, PyObject *a, PyObject *b)
{
    PyObject *src[2] = {a, b};
    for (int s = 0; s < 2; s++) {
        Py_ssize_t i = src[s] ? find(src[s], h) : -1;
        if (i == -2) {
            return NULL;
        }
        if (i >= 0) {
            PyObject *kv = keyval(src[s], i);
            if (kv != NULL && V(kv)->kind == VK_CONST && V(kv)->u.cnst.value != h) {
                Py_SETREF(kv, cdyn_value_const(h));   /* the very object the real op kept */
            }
            return kv;
        }
    }
    return cdyn_value_const(h);
}

/* Replace d's entries by those of the real mapping m (hash key -> constant), taking key
 * values from a or b (either may be d itself). Raw. 0 / -1. */
static int
raw_set_from_real(PyObject *d, PyObject *m, PyObject *a, PyObject *b)
{
    PyObject *h, *c, *tmp = cdyn_dict_new(NULL);
    Py_ssize_t pos = 0;
    if (tmp == NULL) {
        return -1;
    }
    while (PyDict_Next(m, &pos, &h, &c)) {
        PyObject *kv = key_from(h, a, b), *cv = cdyn_value_const(c);
        int e = kv == NULL || cv == NULL || raw_set(tmp, h, kv, cv) < 0;
        Py_XDECREF(kv);
        Py_XDECREF(cv);
        if (e) {
            Py_DECREF(tmp);
            return -1;
        }
    }
    /* swap the new entries in */
    Py_SETREF(V(d)->u.dict.keys, Py_NewRef(keys(tmp)));
    Py_SETREF(V(d)->u.dict.vals, Py_NewRef(vals(tmp)));
    Py_XSETREF(V(d)->u.dict.keyvals, Py_XNewRef(V(tmp)->u.dict.keyvals));
    Py_DECREF(tmp);
    return 0;
}

/* A new Counter value from a real Counter m (keys from a or b). */
static PyObject *
counter_from_real(PyObject *m, PyObject *a, PyObject *b)
{
    PyObject *d = cdyn_dict_new((PyTypeObject *)counter_type);
    if (d != NULL && raw_set_from_real(d, m, a, b) < 0) {
        Py_CLEAR(d);
    }
    return d;
}

/* Count the items of iterable v into the real mapping m (hash key -> int), sign +-1; the
 * items' key values are recorded in kd (a scratch dict value: hash key -> key value). */
static tr_status
count_items(cdyn_tx *tx, PyObject *v, PyObject *m, int sign, PyObject *kd)
{
    PyObject *items = NULL, *one = PyLong_FromLong(sign);
    tr_status st = one ? cdyn_v_unpack(tx, v, &items) : TR_ERROR;
    for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(items); i++) {
        PyObject *h = NULL, *old, *n;
        st = cdyn_hash_key(tx, PyList_GET_ITEM(items, i), &h);
        if (st != TR_OK) {
            break;
        }
        old = PyDict_GetItemWithError(m, h);
        n = old ? PyNumber_Add(old, one) : Py_NewRef(one);
        if (n == NULL || PyDict_SetItem(m, h, n) < 0 ||
            raw_set(kd, h, PyList_GET_ITEM(items, i), Py_None) < 0) {
            st = TR_ERROR;
        }
        Py_XDECREF(n);
        Py_DECREF(h);
    }
    Py_XDECREF(items);
    Py_XDECREF(one);
    return st;
}

/* ---- update / construction ---------------------------------------------------------------- */

/* Raises in the trace what eager raises for a dict operation that fails its argument checks
 * (too many positional arguments, an update element that is not a pair): the exception of
 * the real call -- the unbound method `name` of an empty object of `type`, or `type` itself
 * when name is NULL -- with the real arguments args (a tuple), its type and constant
 * arguments, so that the user's try/except sees eager's exception and message. Only for
 * dict, OrderedDict, defaultdict and Counter (no user code runs); another type, or a call
 * that does not raise, is a break with the reason `what`. */
static tr_status
raise_as_real(cdyn_tx *tx, PyTypeObject *type, const char *name, PyObject *args,
              const char *what)
{
    PyObject *self = NULL, *call = NULL, *res = NULL, *exc = NULL, *eargs = NULL;
    PyObject *cargs[4] = {NULL, NULL, NULL, NULL};
    Py_ssize_t n = 0;
    tr_status st = TR_OK;
    if (type != &PyDict_Type && type != (PyTypeObject *)odict_type &&
        type != (PyTypeObject *)ddict_type && type != (PyTypeObject *)counter_type) {
        return cdyn_tx_unsupported(tx, "%s", what);
    }
    if (name != NULL) {
        self = PyObject_CallNoArgs((PyObject *)type);
        call = self ? PyObject_GetAttrString(self, name) : NULL;
    }
    else {
        call = Py_NewRef(type);
    }
    res = call ? PyObject_Call(call, args, NULL) : NULL;
    if (res == NULL && PyErr_ExceptionMatches(PyExc_Exception)) {
        PyObject *et = NULL, *tb = NULL;
        PyErr_Fetch(&et, &exc, &tb);
        PyErr_NormalizeException(&et, &exc, &tb);
        Py_XDECREF(et);
        Py_XDECREF(tb);
        eargs = exc ? PyObject_GetAttrString(exc, "args") : NULL;
        PyErr_Clear();
    }
    if (eargs == NULL || !PyTuple_Check(eargs) || PyTuple_GET_SIZE(eargs) > 4) {
        st = PyErr_Occurred() ? TR_ERROR : cdyn_tx_unsupported(tx, "%s", what);
    }
    for (; st == TR_OK && n < PyTuple_GET_SIZE(eargs); n++) {
        if ((cargs[n] = cdyn_value_const(PyTuple_GET_ITEM(eargs, n))) == NULL) {
            st = TR_ERROR;
        }
    }
    if (st == TR_OK) {
        st = cdyn_tx_raise(tx, (PyObject *)Py_TYPE(exc), cargs, n);
    }
    for (Py_ssize_t i = 0; i < 4; i++) {
        Py_XDECREF(cargs[i]);
    }
    Py_XDECREF(self);
    Py_XDECREF(call);
    Py_XDECREF(res);
    Py_XDECREF(exc);
    Py_XDECREF(eargs);
    return st;
}

/* type(...) (name NULL) / d.update(...) / d.subtract(...) (name the method) with npos > 1
 * positional arguments: eager's TypeError (the real call with npos empty dicts; a
 * defaultdict's factory None first for its constructor). */
static tr_status
raise_too_many(cdyn_tx *tx, PyTypeObject *type, const char *name, Py_ssize_t npos)
{
    int ddict = name == NULL && type == (PyTypeObject *)ddict_type;
    PyObject *args = PyTuple_New(npos + ddict);
    tr_status st;
    for (Py_ssize_t i = 0; args != NULL && i < npos + ddict; i++) {
        PyObject *e = i < ddict ? Py_NewRef(Py_None) : PyDict_New();
        if (e == NULL) {
            Py_CLEAR(args);
            break;
        }
        PyTuple_SET_ITEM(args, i, e);
    }
    st = args ? raise_as_real(tx, type, name, args,
                              "dict construction or update with several positional arguments")
              : TR_ERROR;
    Py_XDECREF(args);
    return st;
}

/* d.update([...]) where element #bad of the iterable has length badlen: eager's exception
 * (ValueError for dict, the unpacking error of MutableMapping.update for OrderedDict), raised
 * after the entries before it were stored, as eager stores them. */
static tr_status
raise_bad_element(cdyn_tx *tx, PyObject *d, Py_ssize_t bad, Py_ssize_t badlen)
{
    PyObject *seq = PyList_New(bad + 1), *args = NULL;
    tr_status st;
    for (Py_ssize_t i = 0; seq != NULL && i <= bad; i++) {
        PyObject *t = PyTuple_New(i < bad ? 2 : badlen);
        for (Py_ssize_t j = 0; t != NULL && j < PyTuple_GET_SIZE(t); j++) {
            PyTuple_SET_ITEM(t, j, PyLong_FromSsize_t(j));
        }
        if (t == NULL) {
            Py_CLEAR(seq);
            break;
        }
        PyList_SET_ITEM(seq, i, t);
    }
    args = seq ? PyTuple_Pack(1, seq) : NULL;
    st = args ? raise_as_real(tx, dtype(d), "update", args,
                              "dict update sequence element is not a pair")
              : TR_ERROR;
    Py_XDECREF(seq);
    Py_XDECREF(args);
    return st;
}

/* Counter.update(iterable) / subtract(iterable): count the items. */
static tr_status
count_update(cdyn_tx *tx, PyObject *d, PyObject *other, Py_ssize_t nkw, int sign)
{
    PyObject *m = NULL, *kd = NULL;
    tr_status st = real_counts(tx, d, 0, &m);
    kd = st == TR_OK ? cdyn_dict_new(NULL) : NULL;
    if (st == TR_OK && kd == NULL) {
        st = TR_ERROR;
    }
    if (st == TR_OK) {
        st = count_items(tx, other, m, sign, kd);
    }
    if (st == TR_OK && nkw > 0) {
        st = cdyn_tx_unsupported(tx, "Counter.update with an iterable and keywords");
    }
    if (st == TR_OK) {
        st = cdyn_container_mutating(tx, d);
    }
    if (st == TR_OK && raw_set_from_real(d, m, d, kd) < 0) {
        st = TR_ERROR;
    }
    Py_XDECREF(m);
    Py_XDECREF(kd);
    return st;
}

/* Counter.update(mapping) / subtract(mapping): vl (the counts to add, hash keys hl) becomes
 * the new counts. */
static tr_status
add_counts(cdyn_tx *tx, PyObject *d, PyObject *hl, PyObject *vl, int sign)
{
    tr_status st = TR_OK;
    for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(hl); i++) {
        Py_ssize_t j = find(d, PyList_GET_ITEM(hl, i));
        PyObject *old = j >= 0 ? PyList_GET_ITEM(vals(d), j) : NULL, *sum = NULL;
        PyObject *add = PyList_GET_ITEM(vl, i);
        if (j == -2) {
            return TR_ERROR;
        }
        if (old != NULL) {
            st = cdyn_v_binop(tx, sign > 0 ? 0 : 10, old, add, &sum);
        }
        else if (sign > 0) {
            sum = Py_NewRef(add);
        }
        else {
            st = cdyn_v_unary(tx, UNARY_NEGATIVE, add, &sum);
        }
        if (st == TR_OK) {
            st = PyList_SetItem(vl, i, sum) < 0 ? TR_ERROR : TR_OK;
        }
    }
    return st;
}

static tr_status
update_from(cdyn_tx *tx, PyObject *d, PyObject *other, PyObject *const *kwv, PyObject *kwnames,
            int counting, int sign)
{
    PyObject *kl = NULL, *vl = NULL, *hl = NULL;
    tr_status st = TR_OK;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, bad = -1, badlen = 0;
    if (other != NULL && counting && V(other)->kind != VK_DICT) {
        /* Counter.update(m) of a mapping adds m.items()'s counts: a dict subclass's object
           keeping dict's items() is read as a dict below (another is a break) */
        static PyObject *s_items;
        PyTypeObject *t = cdyn_v_python_type(other);
        if (t == NULL || !PyType_IsSubtype(t, &PyDict_Type)) {
            return count_update(tx, d, other, nkw, sign);
        }
        if (s_items == NULL && (s_items = PyUnicode_InternFromString("items")) == NULL) {
            return TR_ERROR;
        }
        if (_PyType_Lookup(t, s_items) != _PyType_Lookup(&PyDict_Type, s_items)) {
            return cdyn_tx_unsupported(tx, "Counter update from %S (its own items())", other);
        }
    }
    if (other != NULL) {
        st = entries_of(tx, other, &kl, &vl, &bad, &badlen);
    }
    else {
        kl = PyList_New(0);
        vl = PyList_New(0);
        st = kl && vl ? TR_OK : TR_ERROR;
    }
    if (st == TR_OK && bad >= 0 && counting) {
        st = cdyn_tx_unsupported(tx, "dict update sequence element is not a pair");
    }
    for (Py_ssize_t i = 0; st == TR_OK && bad < 0 && i < nkw; i++) {
        PyObject *k = cdyn_value_const(PyTuple_GET_ITEM(kwnames, i));
        if (k == NULL || PyList_Append(kl, k) < 0 || PyList_Append(vl, kwv[i]) < 0) {
            st = TR_ERROR;
        }
        Py_XDECREF(k);
    }
    if (st == TR_OK) {
        st = hash_all(tx, kl, &hl);
    }
    if (st == TR_OK && counting) {
        st = add_counts(tx, d, hl, vl, sign);
    }
    if (st == TR_OK && PyList_GET_SIZE(hl) > 0) {
        st = cdyn_container_mutating(tx, d);
    }
    if (st == TR_OK && raw_set_all(d, hl, kl, vl) < 0) {
        st = TR_ERROR;
    }
    if (st == TR_OK && bad >= 0) {
        st = raise_bad_element(tx, d, bad, badlen);
    }
    Py_XDECREF(kl);
    Py_XDECREF(vl);
    Py_XDECREF(hl);
    return st;
}

tr_status
cdyn_dict_construct(cdyn_tx *tx, PyTypeObject *type, PyObject *const *args, Py_ssize_t npos,
                    PyObject *kwnames, PyObject **out)
{
    PyObject *d = NULL, *factory = NULL;
    tr_status st;
    int counting;
    if (dict_init() < 0) {
        return TR_ERROR;
    }
    counting = PyType_IsSubtype(type, (PyTypeObject *)counter_type);
    if (PyType_IsSubtype(type, (PyTypeObject *)ddict_type) && npos >= 1) {
        PyObject *real;
        factory = args[0];
        args++;
        npos--;
        real = cdyn_v_real(factory);
        if (!(V(factory)->kind == VK_FUNCTION || V(factory)->kind == VK_METHOD ||
              (real != NULL && (real == Py_None || PyCallable_Check(real))))) {
            return cdyn_tx_unsupported(tx, "defaultdict factory %S", factory);
        }
    }
    if (npos > 1) {
        return raise_too_many(tx, type, NULL, npos);
    }
    d = cdyn_dict_new(type);
    if (d == NULL) {
        return TR_ERROR;
    }
    if (factory != NULL && !cdyn_v_is_none(factory)) {
        V(d)->u.dict.factory = Py_NewRef(factory);
    }
    st = update_from(tx, d, npos ? args[0] : NULL, args + npos, kwnames, counting, 1);
    if (st != TR_OK) {
        Py_DECREF(d);
        return st;
    }
    *out = d;
    return TR_OK;
}

tr_status
cdyn_dict_fromkeys(cdyn_tx *tx, PyTypeObject *type, PyObject *const *args, Py_ssize_t npos,
                   PyObject *kwnames, PyObject **out)
{
    PyObject *items = NULL, *hl = NULL, *d = NULL, *none = NULL;
    PyObject *value;
    tr_status st;
    if (kwnames != NULL && npos == 1 && PyTuple_GET_SIZE(kwnames) == 1 &&
        PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "value") == 0) {
        kwnames = NULL;   /* fromkeys(keys, value=v): the value passed by name */
        npos = 2;
    }
    if (kwnames != NULL || npos < 1 || npos > 2 ||
        (V(args[0])->kind == VK_CONST && Py_TYPE(V(args[0])->u.cnst.value)->tp_iter == NULL &&
         !PySequence_Check(V(args[0])->u.cnst.value))) {
        /* a bad call (no iterable, too many arguments, keywords, a number): the real one on
           the constants gives eager's TypeError (its words differ between dict types and
           Pythons), raised in the trace */
        Py_ssize_t nall = npos + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
        PyObject *fk = cdyn_all_const(args, nall)
                           ? PyObject_GetAttrString((PyObject *)type, "fromkeys") : NULL;
        tr_status raised = fk ? cdyn_call_on_constants(tx, fk, args, nall, kwnames, out)
                              : TR_UNSUPPORTED;
        Py_XDECREF(fk);
        if (fk == NULL) {
            PyErr_Clear();   /* (not all constants, or no such attribute) */
        }
        if (raised == TR_EXCEPTION || raised == TR_ERROR) {
            return raised;
        }
        if (raised == TR_OK) {
            Py_CLEAR(*out);
        }
        return cdyn_tx_unsupported(tx, "fromkeys() with these arguments");
    }
    if (dict_init() < 0) {
        return TR_ERROR;
    }
    if (PyType_IsSubtype(type, (PyTypeObject *)counter_type)) {
        return cdyn_tx_unsupported(tx, "Counter.fromkeys (NotImplementedError)");
    }
    none = cdyn_value_const(Py_None);
    value = npos == 2 ? args[1] : none;
    st = none ? cdyn_v_unpack(tx, args[0], &items) : TR_ERROR;
    if (st == TR_OK) {
        st = hash_all(tx, items, &hl);
    }
    if (st == TR_OK && (d = cdyn_dict_new(type)) == NULL) {
        st = TR_ERROR;
    }
    for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(hl); i++) {
        if (raw_set(d, PyList_GET_ITEM(hl, i), PyList_GET_ITEM(items, i), value) < 0) {
            st = TR_ERROR;
        }
    }
    Py_XDECREF(items);
    Py_XDECREF(hl);
    Py_XDECREF(none);
    if (st != TR_OK) {
        Py_XDECREF(d);
        return st;
    }
    *out = d;
    return TR_OK;
}

/* ---- materialization of input dicts --------------------------------------------------------- */

/* 1 when obj can be a key of an input dict (or an item of an input set) pinned by the
 * DICT_KEYS guard: a constant, an object compared by identity, a tuple of those. */
int
cdyn_pinnable_key(PyObject *obj)
{
    if (PyTuple_CheckExact(obj)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj); i++) {
            if (!cdyn_pinnable_key(PyTuple_GET_ITEM(obj, i))) {
                return 0;
            }
        }
        return 1;
    }
    if (cdyn_is_constant(obj)) {
        return 1;
    }
    if (cdyn_is_tensor(obj) || !identity_eq(obj)) {
        return 0;
    }
    if (PyObject_Hash(obj) == -1) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* The keys of a real mapping in iteration order (an OrderedDict's may differ from its dict
 * storage): a new list, or NULL with an exception. */
static PyObject *
real_keys(PyObject *real)
{
    PyObject *kl = PyList_New(0), *it = PyObject_GetIter(real), *k;
    while (kl != NULL && it != NULL && (k = PyIter_Next(it)) != NULL) {
        int e = PyList_Append(kl, k);
        Py_DECREF(k);
        if (e < 0) {
            Py_CLEAR(kl);
        }
    }
    Py_XDECREF(it);
    if (PyErr_Occurred()) {
        Py_CLEAR(kl);
    }
    return kl;
}

/* Wrap entry i (key k) of the input dict v and add it: the value through an ITEM source and
 * the key pinned by the DICT_KEYS guard, or, for a tensor key, both through entry sources
 * (list(d.keys())[i], list(d.values())[i]): the key is a graph input. */
static tr_status
wrap_entry(cdyn_tx *tx, PyObject *v, Py_ssize_t i, PyObject *k)
{
    PyObject *val = PyDict_GetItemWithError(V(v)->u.dict.real, k);   /* no __missing__ */
    PyObject *src = NULL, *ksrc = NULL, *w = NULL, *kv = NULL, *h = NULL;
    int tensor_key = cdyn_is_tensor(k);
    tr_status st;
    if (val == NULL) {
        return PyErr_Occurred() ? TR_ERROR
                                : cdyn_tx_unsupported(tx, "input dict changed while tracing");
    }
    src = tensor_key ? cdyn_source_entry(V(v)->source, i, 1) : cdyn_source_item(V(v)->source, k);
    ksrc = tensor_key ? cdyn_source_entry(V(v)->source, i, 0) : NULL;
    if (src == NULL || (tensor_key && ksrc == NULL)) {
        Py_XDECREF(src);
        return TR_ERROR;
    }
    st = cdyn_tx_wrap_real(tx, val, src, &w);
    if (st == TR_OK) {
        st = cdyn_tx_wrap_real(tx, k, ksrc, &kv);
    }
    if (st == TR_OK) {
        st = tensor_key ? cdyn_hash_key(tx, kv, &h) : TR_OK;
    }
    if (st == TR_OK && raw_set(v, h ? h : k, kv, w) < 0) {
        st = TR_ERROR;
    }
    Py_DECREF(src);
    Py_XDECREF(ksrc);
    Py_XDECREF(w);
    Py_XDECREF(kv);
    Py_XDECREF(h);
    return st;
}

/* A defaultdict input's default_factory, wrapped through its attribute source. */
static tr_status
wrap_factory(cdyn_tx *tx, PyObject *v)
{
    PyObject *f = PyObject_GetAttrString(V(v)->u.dict.real, "default_factory");
    PyObject *name = PyUnicode_FromString("default_factory"), *fsrc = NULL, *fv = NULL;
    tr_status st = TR_ERROR;
    fsrc = name ? cdyn_source_attr(V(v)->source, name) : NULL;
    if (f != NULL && fsrc != NULL) {
        st = cdyn_tx_wrap_real(tx, f, fsrc, &fv);
    }
    Py_XDECREF(f);
    Py_XDECREF(fsrc);
    Py_XDECREF(name);
    if (st == TR_OK && !cdyn_v_is_none(fv)) {
        V(v)->u.dict.factory = Py_NewRef(fv);
    }
    Py_XDECREF(fv);
    return st;
}

/* The stores made while v was lazy (lazy_store): its entries so far, taken out of v (which
 * is left empty) into a new dict value *ov, or *ov NULL when there were none. 0 / -1. */
static int
take_overlay(PyObject *v, PyObject **ov)
{
    cdyn_value *x = V(v);
    *ov = NULL;
    if (x->u.dict.keys != NULL) {
        *ov = cdyn_dict_new(NULL);
        if (*ov == NULL) {
            return -1;
        }
        Py_SETREF(V(*ov)->u.dict.keys, x->u.dict.keys);
        Py_SETREF(V(*ov)->u.dict.vals, x->u.dict.vals);
        x->u.dict.keys = x->u.dict.vals = NULL;
    }
    if ((x->u.dict.keys = PyList_New(0)) == NULL || (x->u.dict.vals = PyList_New(0)) == NULL) {
        return -1;
    }
    return 0;
}

/* Entry i (key k) of the input dict v being materialized: the value stored while v was lazy
 * when there is one (the real value, overwritten, is not read or guarded), else the real
 * one (wrap_entry). */
static tr_status
add_entry(cdyn_tx *tx, PyObject *v, PyObject *ov, Py_ssize_t i, PyObject *k)
{
    Py_ssize_t j = ov != NULL && cdyn_is_constant(k) ? find(ov, k) : -1;
    PyObject *kv;
    int e;
    if (j == -2) {
        return TR_ERROR;
    }
    if (j < 0) {
        return wrap_entry(tx, v, i, k);
    }
    kv = cdyn_value_const(k);
    e = kv == NULL || raw_set(v, k, kv, PyList_GET_ITEM(vals(ov), j)) < 0;
    Py_XDECREF(kv);
    return e ? TR_ERROR : TR_OK;
}

/* The keys stored while v was lazy that the real dict did not have, at the end in the
 * order they were stored. */
static tr_status
add_new_overlay_keys(PyObject *v, PyObject *ov)
{
    for (Py_ssize_t j = 0; ov != NULL && j < dlen(ov); j++) {
        PyObject *k = PyList_GET_ITEM(keys(ov), j), *kv;
        Py_ssize_t i = find(v, k);
        int e;
        if (i == -2) {
            return TR_ERROR;
        }
        if (i >= 0) {
            continue;
        }
        kv = cdyn_value_const(k);
        e = kv == NULL || raw_set(v, k, kv, PyList_GET_ITEM(vals(ov), j)) < 0;
        Py_XDECREF(kv);
        if (e) {
            return TR_ERROR;
        }
    }
    return TR_OK;
}

tr_status
cdyn_dict_materialize(cdyn_tx *tx, PyObject *v)
{
    cdyn_value *x = V(v);
    PyObject *kl = NULL, *kt = NULL, *ov = NULL;
    tr_status st = TR_ERROR;
    if (dict_init() < 0 || take_overlay(v, &ov) < 0) {
        goto done;
    }
    kl = real_keys(x->u.dict.real);
    if (kl == NULL) {
        return TR_ERROR;
    }
    kt = PyList_AsTuple(kl);
    if (kt == NULL || cdyn_guards_any_key() == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kt); i++) {
        PyObject *k = PyTuple_GET_ITEM(kt, i);
        if (cdyn_is_tensor(k)) {   /* a tensor key is checked by its TENSOR_MATCH */
            Py_INCREF(cdyn_guards_any_key());
            PyTuple_SET_ITEM(kt, i, cdyn_guards_any_key());
            Py_DECREF(k);
        }
        else if (!cdyn_pinnable_key(k)) {
            st = cdyn_tx_unsupported(tx, "input dict with a key of type %s", Py_TYPE(k)->tp_name);
            goto done;
        }
    }
    if (cdyn_guards_add_keys(tx->guards, x->source, kt) < 0) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(kl); i++) {
        if ((st = add_entry(tx, v, ov, i, PyList_GET_ITEM(kl, i))) != TR_OK) {
            goto done;
        }
    }
    st = add_new_overlay_keys(v, ov);
    if (st == TR_OK) {
        st = IS_DDICT(v) ? wrap_factory(tx, v) : TR_OK;
    }
    if (st == TR_OK) {
        x->bits &= ~SEQ_LAZY;
    }
done:
    Py_XDECREF(kl);
    Py_XDECREF(kt);
    Py_XDECREF(ov);
    return st;
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
    Py_ssize_t n = dlen(d);
    unsigned which = V(view)->bits;
    PyObject *l = PyList_New(n);
    (void)tx;
    for (Py_ssize_t i = 0; l && i < n; i++) {
        PyObject *k = NULL, *e = NULL;
        if (which == VIEW_VALUES) {
            e = Py_NewRef(PyList_GET_ITEM(vals(d), i));
        }
        else if ((k = keyval(d, i)) != NULL) {
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

static const char *const view_methods[] = {"keys", "values", "items"};

/* The type of a view: odict_keys / odict_values / odict_items for an OrderedDict. */
static PyTypeObject *
view_type(PyObject *view)
{
    static PyTypeObject *odict_views[3];
    if (IS_ODICT(vdict(view)) && odict_views[0] == NULL) {
        PyObject *od = PyObject_CallNoArgs(odict_type);
        for (int i = 0; od != NULL && i < 3; i++) {
            PyObject *r = PyObject_CallMethod(od, view_methods[i], NULL);
            odict_views[i] = r ? Py_TYPE(r) : NULL;   /* builtin types live for the process */
            Py_XDECREF(r);
        }
        Py_XDECREF(od);
        PyErr_Clear();
    }
    if (IS_ODICT(vdict(view)) && odict_views[V(view)->bits] != NULL) {
        return odict_views[V(view)->bits];
    }
    switch (V(view)->bits) {
    case VIEW_VALUES:
        return &PyDictValues_Type;
    case VIEW_ITEMS:
        return &PyDictItems_Type;
    default:
        return &PyDictKeys_Type;
    }
}

/* A view used as a set (keys / items views): a new SET value of its entries. */
static tr_status
view_as_set(cdyn_tx *tx, PyObject *view, PyObject **out)
{
    PyObject *items = NULL;
    tr_status st = view_unpack(tx, view, &items);
    if (st != TR_OK) {
        return st;
    }
    st = cdyn_set_build(tx, VK_SET, items, out);
    Py_DECREF(items);
    return st;
}

/* ---- attributes and methods ------------------------------------------------------------- */

/* 1 when v is a dict made in the trace whose instances have a __dict__ and object's
 * __setattr__ (OrderedDict, Counter; a plain dict or defaultdict has no attributes). */
static int
has_instance_attrs(PyObject *v)
{
    PyTypeObject *t = dtype(v);
    return V(v)->kind == VK_DICT && V(v)->source == NULL && !(V(v)->bits & SEQ_LAZY) &&
           (t == (PyTypeObject *)odict_type || t == (PyTypeObject *)counter_type) &&
           t->tp_setattro == PyObject_GenericSetAttr;
}

/* d.name = value on an OrderedDict/Counter made in the trace: kept in u.dict.attrs (a plain
 * dict value; `d.__dict__` is that value), set again when d is rebuilt (dict_reconstruct).
 * A name the type defines as a data descriptor (`__class__`, `__dict__`) is a break. */
static tr_status
dict_setattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    PyObject *attr = has_instance_attrs(v) ? _PyType_Lookup(dtype(v), name) : NULL;
    PyObject *key = NULL;
    tr_status st;
    if (!has_instance_attrs(v) || (attr != NULL && Py_TYPE(attr)->tp_descr_set != NULL)) {
        return cdyn_tx_unsupported(tx, "STORE_ATTR %U on %S (side effect)", name, v);
    }
    cdyn_tx_mutated(tx, v);   /* before: a rollback puts back attrs as it was */
    if (V(v)->u.dict.attrs == NULL && (V(v)->u.dict.attrs = cdyn_dict_new(NULL)) == NULL) {
        return TR_ERROR;
    }
    cdyn_tx_mutated(tx, V(v)->u.dict.attrs);
    key = cdyn_value_const(name);
    st = key != NULL ? cdyn_dict_set(tx, V(v)->u.dict.attrs, key, value) : TR_ERROR;
    Py_XDECREF(key);
    return st;
}

/* An instance attribute the trace stored on v (borrowed), or NULL. */
static PyObject *
stored_attr(PyObject *v, PyObject *name)
{
    PyObject *a = V(v)->kind == VK_DICT ? V(v)->u.dict.attrs : NULL;
    Py_ssize_t i = a != NULL ? find(a, name) : -1;
    if (i < -1) {
        PyErr_Clear();
    }
    return i >= 0 ? PyList_GET_ITEM(vals(a), i) : NULL;
}

int
cdyn_dict_hasattr(PyObject *v, PyObject *name)
{
    if (!has_instance_attrs(v)) {
        return -1;
    }
    return stored_attr(v, name) != NULL || _PyType_Lookup(dtype(v), name) != NULL;
}

static tr_status
dict_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *a = stored_attr(v, name);
    if (a != NULL) {
        *out = Py_NewRef(a);
        return TR_OK;
    }
    if (cdyn_name_is(name, "__dict__") && has_instance_attrs(v)) {
        cdyn_tx_mutated(tx, v);
        if (V(v)->u.dict.attrs == NULL && (V(v)->u.dict.attrs = cdyn_dict_new(NULL)) == NULL) {
            return TR_ERROR;
        }
        *out = Py_NewRef(V(v)->u.dict.attrs);
        return TR_OK;
    }
    if (V(v)->kind == VK_DICTVIEW && cdyn_name_is(name, "mapping")) {
        return cdyn_mproxy_new(tx, vdict(v), out);   /* d.keys().mapping: a proxy of d */
    }
    if (V(v)->kind == VK_DICT && IS_DDICT(v) && cdyn_name_is(name, "default_factory")) {
        tr_status st = cdyn_tx_materialize(tx, v);
        if (st != TR_OK) {
            return st;
        }
        *out = V(v)->u.dict.factory ? Py_NewRef(V(v)->u.dict.factory) : cdyn_value_const(Py_None);
        return *out ? TR_OK : TR_ERROR;
    }
    return cdyn_container_getattr(tx, v, V(v)->kind == VK_DICTVIEW ? view_type(v) : dtype(v),
                                  name, out);
}

/* Positional and keyword arguments of a method into slots[0..n) by parameter names (NULL
 * where not given). TR_UNSUPPORTED on an unknown keyword or too many arguments. */
static tr_status
bind_args(cdyn_tx *tx, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
          const char *const *names, int n, PyObject **slots)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    for (int i = 0; i < n; i++) {
        slots[i] = i < npos ? args[i] : NULL;
    }
    if (npos > n) {
        return cdyn_tx_unsupported(tx, "too many arguments");
    }
    for (Py_ssize_t k = 0; k < nkw; k++) {
        int found = 0;
        for (int i = 0; i < n && !found; i++) {
            if (names[i] != NULL && cdyn_name_is(PyTuple_GET_ITEM(kwnames, k), names[i])) {
                if (slots[i] != NULL) {
                    return cdyn_tx_unsupported(tx, "argument given twice");
                }
                slots[i] = args[npos + k];
                found = 1;
            }
        }
        if (!found) {
            return cdyn_tx_unsupported(tx, "unexpected keyword argument %U",
                                       PyTuple_GET_ITEM(kwnames, k));
        }
    }
    return TR_OK;
}

/* A constant bool argument (dflt when NULL): 0/1, or -1 when not a constant. */
static int
const_bool(PyObject *v, int dflt)
{
    if (v == NULL) {
        return dflt;
    }
    if (V(v)->kind != VK_CONST) {
        return -1;
    }
    return PyObject_IsTrue(V(v)->u.cnst.value);
}

/* The value for missing hash key h of d (new ref), inserting it for a defaultdict; for a
 * dict or OrderedDict, KeyError(key) raised in the traced code (caught there, as by
 * Mapping.get's try/except, or left to Python as a break). */
static tr_status
missing(cdyn_tx *tx, PyObject *d, PyObject *key, PyObject *h, PyObject **out)
{
    tr_status st;
    PyTypeObject *t = dtype(d);
    if (IS_COUNTER(d)) {
        *out = cdyn_value_const_steal(PyLong_FromLong(0));
        return *out ? TR_OK : TR_ERROR;
    }
    if (t == &PyDict_Type || t == (PyTypeObject *)odict_type ||
        (t == (PyTypeObject *)ddict_type && V(d)->u.dict.factory == NULL)) {
        return cdyn_tx_raise(tx, PyExc_KeyError, &key, 1);   /* (a defaultdict of no factory) */
    }
    if (!IS_DDICT(d) || V(d)->u.dict.factory == NULL || dtype(d) != (PyTypeObject *)ddict_type) {
        return cdyn_tx_unsupported(tx, "missing dict key %S", key);
    }
    st = cdyn_v_call(tx, tx->cur_fs, V(d)->u.dict.factory, &key, 0, NULL, out);
    if (st != TR_OK) {
        return st;
    }
    st = cdyn_container_mutating(tx, d);
    if (st == TR_OK && raw_set(d, h, key, *out) < 0) {
        st = TR_ERROR;
    }
    if (st != TR_OK) {
        Py_CLEAR(*out);
    }
    return st;
}

/* torch.optim's traced steps read group["capturable"] as True, as torch._dynamo's optimizer
 * variable shows every param group while it traces (its view only: the real dict keeps its
 * value, and the state _init_group made eagerly is eager's): the capturable paths are tensor
 * ops (torch.where on the step) where the others branch on the step's value (RAdam's
 * `rho_t > 5`: a graph break). Only for a read by code of a torch.optim module of a real
 * plain dict with "params" and "capturable" keys that the trace did not write; nothing is
 * guarded (the answer does not depend on the dict). TR_NOTIMPL otherwise. */
static tr_status
optim_capturable_view(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out)
{
    PyObject *real = V(v)->u.dict.real, *k = cdyn_v_real(key), *mod;
    const char *name;
    if (V(v)->kind != VK_DICT || real == NULL || !PyDict_CheckExact(real) || k == NULL ||
        !PyUnicode_Check(k) || !cdyn_name_is(k, "capturable") || tx->cur_fs == NULL ||
        (V(v)->bits & SEQ_SYNCED)) {
        return TR_NOTIMPL;
    }
    mod = PyDict_GetItemString(tx->cur_fs->globals, "__name__");   /* borrowed */
    name = mod != NULL && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
    if (name == NULL) {
        PyErr_Clear();
        return TR_NOTIMPL;
    }
    if (!cdyn_startswith(name, "torch.optim") ||
        PyDict_GetItemString(real, "params") == NULL ||
        PyDict_GetItemString(real, "capturable") == NULL) {
        return TR_NOTIMPL;
    }
    if ((V(v)->bits & SEQ_LAZY) && V(v)->u.dict.keys != NULL) {
        Py_ssize_t j = find(v, k);   /* stored while lazy: the trace's own value */
        if (j != -1) {
            return j == -2 ? TR_ERROR : TR_NOTIMPL;
        }
    }
    *out = cdyn_value_const(Py_True);
    return *out != NULL ? TR_OK : TR_ERROR;
}

/* Lookup helper: *i the index of key's hash key in d (-1 absent), *h the hash key (new). */
static tr_status
lookup(cdyn_tx *tx, PyObject *d, PyObject *key, Py_ssize_t *i, PyObject **h)
{
    tr_status st = cdyn_hash_key(tx, key, h);
    if (st != TR_OK) {
        return st;
    }
    *i = find(d, *h);
    if (*i == -2) {
        Py_CLEAR(*h);
        return TR_ERROR;
    }
    return TR_OK;
}

static tr_status
m_get_pop_setdefault(cdyn_tx *tx, PyObject *d, int which, PyObject *const *args,
                     Py_ssize_t nargs, PyObject **out)
{
    /* which: 0 get, 1 pop, 2 setdefault */
    PyObject *h = NULL;
    Py_ssize_t i;
    tr_status st;
    *out = NULL;
    if (nargs < 1 || nargs > 2) {
        return cdyn_tx_unsupported(tx, "dict method with %zd arguments", nargs);
    }
    st = lookup(tx, d, args[0], &i, &h);
    if (st != TR_OK) {
        return st;
    }
    if (i >= 0) {
        *out = Py_NewRef(PyList_GET_ITEM(vals(d), i));
        if (which == 1 && ((st = cdyn_container_mutating(tx, d)) != TR_OK || raw_del(d, i) < 0)) {
            Py_CLEAR(*out);
            st = st == TR_OK ? TR_ERROR : st;
        }
    }
    else if (which == 1 && nargs == 1) {   /* KeyError(key) in the trace, as eager */
        st = cdyn_tx_raise(tx, PyExc_KeyError, args, 1);
    }
    else {
        *out = nargs == 2 ? Py_NewRef(args[1]) : cdyn_value_const(Py_None);
        if (*out == NULL) {
            st = TR_ERROR;
        }
        else if (which == 2) {
            st = cdyn_container_mutating(tx, d);
            if (st == TR_OK && raw_set(d, h, args[0], *out) < 0) {
                st = TR_ERROR;
            }
        }
    }
    Py_DECREF(h);
    if (st != TR_OK) {
        Py_CLEAR(*out);
    }
    return st;
}

/* popitem() / popitem(last=): the pair (key, value) removed. */
static tr_status
m_popitem(cdyn_tx *tx, PyObject *d, PyObject *last, PyObject **out)
{
    int l = const_bool(last, 1);
    Py_ssize_t i;
    PyObject *pair[2] = {NULL, NULL};
    tr_status st;
    if (l < 0 || (last != NULL && !IS_ODICT(d))) {
        return cdyn_tx_unsupported(tx, "popitem with these arguments");
    }
    if (dlen(d) == 0) {
        return cdyn_tx_unsupported(tx, "popitem of an empty dict (KeyError)");
    }
    i = l ? dlen(d) - 1 : 0;
    pair[0] = keyval(d, i);
    pair[1] = PyList_GET_ITEM(vals(d), i);
    *out = pair[0] ? cdyn_value_seq(VK_TUPLE, pair, 2) : NULL;
    Py_XDECREF(pair[0]);
    if (*out == NULL) {
        return TR_ERROR;
    }
    st = cdyn_container_mutating(tx, d);
    if (st == TR_OK && raw_del(d, i) < 0) {
        st = TR_ERROR;
    }
    if (st != TR_OK) {
        Py_CLEAR(*out);
    }
    return st;
}

/* OrderedDict.move_to_end(key, last=True). */
static tr_status
m_move_to_end(cdyn_tx *tx, PyObject *d, PyObject *key, PyObject *last)
{
    int l = const_bool(last, 1);
    PyObject *h = NULL, *kv = NULL, *val = NULL, *kvs;
    Py_ssize_t i;
    tr_status st;
    if (l < 0 || key == NULL) {
        return cdyn_tx_unsupported(tx, "move_to_end with these arguments");
    }
    st = lookup(tx, d, key, &i, &h);
    if (st != TR_OK) {
        return st;
    }
    if (i < 0) {
        Py_DECREF(h);
        return cdyn_tx_unsupported(tx, "move_to_end of a missing key (KeyError)");
    }
    Py_SETREF(h, Py_NewRef(PyList_GET_ITEM(keys(d), i)));
    kvs = V(d)->u.dict.keyvals;
    kv = Py_NewRef(kvs ? PyList_GET_ITEM(kvs, i) : Py_None);
    val = Py_NewRef(PyList_GET_ITEM(vals(d), i));
    st = cdyn_container_mutating(tx, d);
    if (st == TR_OK) {
        Py_ssize_t at = l ? dlen(d) - 1 : 0;
        V(d)->bits |= DICT_REORDERED;   /* (undone with the step: the undo log keeps bits) */
        if (raw_del(d, i) < 0 || PyList_Insert(keys(d), at, h) < 0 ||
            PyList_Insert(vals(d), at, val) < 0 ||
            (kvs != NULL && PyList_Insert(kvs, at, kv) < 0)) {
            st = TR_ERROR;
        }
    }
    Py_DECREF(h);
    Py_DECREF(kv);
    Py_DECREF(val);
    return st;
}

/* Counter.most_common([n]): pairs sorted by count, stable. */
static tr_status
m_most_common(cdyn_tx *tx, PyObject *d, PyObject *n, PyObject **out)
{
    PyObject *m = NULL, *res = NULL, *meth = NULL, *lst = NULL;
    tr_status st = real_counts(tx, d, 0, &m);
    if (st != TR_OK) {
        return st;
    }
    if (n != NULL && V(n)->kind != VK_CONST) {
        Py_DECREF(m);
        return cdyn_tx_unsupported(tx, "most_common with a non-constant n");
    }
    meth = PyObject_GetAttrString(m, "most_common");
    res = meth ? PyObject_CallOneArg(meth, n ? V(n)->u.cnst.value : Py_None) : NULL;
    Py_XDECREF(meth);
    lst = res ? PyList_New(PyList_GET_SIZE(res)) : NULL;
    for (Py_ssize_t i = 0; lst && i < PyList_GET_SIZE(res); i++) {
        PyObject *p = PyList_GET_ITEM(res, i), *pair[2] = {NULL, NULL}, *t = NULL;
        pair[0] = key_from(PyTuple_GET_ITEM(p, 0), d, NULL);
        pair[1] = cdyn_value_const(PyTuple_GET_ITEM(p, 1));
        t = pair[0] && pair[1] ? cdyn_value_seq(VK_TUPLE, pair, 2) : NULL;
        Py_XDECREF(pair[0]);
        Py_XDECREF(pair[1]);
        if (t == NULL) {
            Py_CLEAR(lst);
            break;
        }
        PyList_SET_ITEM(lst, i, t);
    }
    Py_DECREF(m);
    Py_XDECREF(res);
    if (lst == NULL) {
        return PyErr_Occurred() ? TR_ERROR : cdyn_tx_unsupported(tx, "most_common failed");
    }
    *out = cdyn_value_seq_list(VK_LIST, lst);
    Py_DECREF(lst);
    return *out ? TR_OK : TR_ERROR;
}

/* Counter.elements() / total(). */
static tr_status
m_counter_fold(cdyn_tx *tx, PyObject *d, int elements, PyObject **out)
{
    PyObject *m = NULL, *items = NULL;
    tr_status st = real_counts(tx, d, 0, &m);
    if (st != TR_OK) {
        return st;
    }
    if (!elements) {
        PyObject *r = PyObject_CallMethod(m, "total", NULL);
        Py_DECREF(m);
        *out = r ? cdyn_value_const_steal(r) : NULL;
        return *out ? TR_OK : cdyn_tx_unsupported(tx, "Counter.total failed");
    }
    items = PyList_New(0);
    for (Py_ssize_t i = 0; items && i < dlen(d); i++) {
        long c = PyLong_AsLong(V(PyList_GET_ITEM(vals(d), i))->u.cnst.value);
        PyObject *kv = keyval(d, i);
        for (long k = 0; kv && k < c; k++) {
            if (PyList_Append(items, kv) < 0) {
                Py_CLEAR(items);
                break;
            }
        }
        Py_XDECREF(kv);
        if (PyErr_Occurred()) {
            Py_CLEAR(items);
        }
    }
    Py_DECREF(m);
    if (items == NULL) {
        return cdyn_tx_unsupported(tx, "Counter.elements failed");
    }
    *out = cdyn_value_iter(items);
    Py_DECREF(items);
    return *out ? TR_OK : TR_ERROR;
}

static tr_status
view_call_method(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *const *args,
                 Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    static const char *const setops[] = {"isdisjoint", NULL};
    PyObject *s = NULL;
    tr_status st;
    if (V(v)->bits == VIEW_VALUES || kwnames != NULL || !cdyn_name_is(name, setops[0])) {
        return cdyn_tx_unsupported(tx, "method %U of a dict view", name);
    }
    st = view_as_set(tx, v, &s);
    if (st == TR_OK) {
        st = cdyn_v_call_method(tx, tx->cur_fs, s, name, args, nargs, NULL, out);
        Py_DECREF(s);
    }
    return st;
}

static tr_status dict_subscr_lazy(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out);
static tr_status dict_contains_lazy(cdyn_tx *tx, PyObject *v, PyObject *item, int *out);
static int lazy_readable(PyObject *v);

/* d.get(k[, default]) on an input dict not read yet, k a constant: d[k] read alone
 * (dict_subscr_lazy) when k is there, else the default with a DICT_CONTAINS absent guard;
 * the other entries stay unread (kwargs.get("flag", False)). TR_NOTIMPL otherwise. */
static tr_status
get_lazy(cdyn_tx *tx, PyObject *v, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
         PyObject **out)
{
    int has = 0;
    tr_status st;
    if (kwnames != NULL || nargs < 1 || nargs > 2 || !lazy_readable(v)) {
        PyErr_Clear();
        return TR_NOTIMPL;
    }
    st = dict_contains_lazy(tx, v, args[0], &has);
    if (st != TR_OK) {
        return st;
    }
    if (has) {
        return dict_subscr_lazy(tx, v, args[0], out);
    }
    *out = nargs == 2 ? Py_NewRef(args[1]) : cdyn_value_const(Py_None);
    return *out ? TR_OK : TR_ERROR;
}

static tr_status
dict_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *name, PyObject *const *args,
                 Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    static const char *const last_names[] = {"key", "last"};
    Py_ssize_t npos = nargs - (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *slots[2] = {NULL, NULL};
    tr_status st;
    int counter;
    (void)fs;
    if (cdyn_name_is(name, "get") && (st = get_lazy(tx, v, args, nargs, kwnames, out)) !=
                                         TR_NOTIMPL) {
        return st;
    }
    st = cdyn_tx_materialize(tx, v);
    if (st != TR_OK) {
        return st;
    }
    if (V(v)->kind == VK_DICTVIEW) {
        return view_call_method(tx, v, name, args, nargs, kwnames, out);
    }
    counter = IS_COUNTER(v);
    if (cdyn_name_is(name, "update") || (counter && cdyn_name_is(name, "subtract"))) {
        int sub = cdyn_name_is(name, "subtract");
        if (npos > 1) {
            return raise_too_many(tx, dtype(v), sub ? "subtract" : "update", npos);
        }
        st = update_from(tx, v, npos ? args[0] : NULL, args + npos, kwnames, counter,
                         sub ? -1 : 1);
        *out = st == TR_OK ? cdyn_value_const(Py_None) : NULL;
        return st == TR_OK && *out == NULL ? TR_ERROR : st;
    }
    if (cdyn_name_is(name, "popitem") || cdyn_name_is(name, "move_to_end")) {
        int pop = cdyn_name_is(name, "popitem");
        st = bind_args(tx, args, nargs, kwnames, pop ? last_names + 1 : last_names, pop ? 1 : 2,
                       slots);
        if (st != TR_OK) {
            return st;
        }
        if (pop) {
            return m_popitem(tx, v, slots[0], out);
        }
        if (!IS_ODICT(v)) {
            return cdyn_tx_unsupported(tx, "move_to_end of a dict");
        }
        st = m_move_to_end(tx, v, slots[0], slots[1]);
        *out = st == TR_OK ? cdyn_value_const(Py_None) : NULL;
        return st == TR_OK && *out == NULL ? TR_ERROR : st;
    }
    if (counter && cdyn_name_is(name, "most_common")) {
        static const char *const n_name[] = {"n"};
        st = bind_args(tx, args, nargs, kwnames, n_name, 1, slots);
        return st == TR_OK ? m_most_common(tx, v, slots[0], out) : st;
    }
    if (kwnames != NULL) {
        return cdyn_tx_unsupported(tx, "keyword arguments to dict.%U", name);
    }
    if (counter && (cdyn_name_is(name, "elements") || cdyn_name_is(name, "total")) && nargs == 0) {
        return m_counter_fold(tx, v, cdyn_name_is(name, "elements"), out);
    }
    for (unsigned w = 0; w < 3; w++) {
        if (cdyn_name_is(name, view_methods[w]) && nargs == 0) {
            return make_view(v, w, out);
        }
    }
    if (cdyn_name_is(name, "get") || cdyn_name_is(name, "pop") ||
        cdyn_name_is(name, "setdefault")) {
        return m_get_pop_setdefault(tx, v, cdyn_name_is(name, "get") ? 0
                                           : cdyn_name_is(name, "pop") ? 1 : 2,
                                    args, nargs, out);
    }
    if ((cdyn_name_is(name, "copy") ||
         (cdyn_name_is(name, "__copy__") && dtype(v) != &PyDict_Type)) && nargs == 0) {
        /* (OrderedDict, defaultdict and Counter have __copy__, a copy of their type) */
        *out = dict_copy(v);
        return *out ? TR_OK : TR_ERROR;
    }
    if (cdyn_name_is(name, "clear") && nargs == 0) {
        st = cdyn_container_mutating(tx, v);
        if (st == TR_OK && raw_clear(v) < 0) {
            st = TR_ERROR;
        }
        *out = st == TR_OK ? cdyn_value_const(Py_None) : NULL;
        return st == TR_OK && *out == NULL ? TR_ERROR : st;
    }
    if (cdyn_name_is(name, "fromkeys")) {
        return cdyn_dict_fromkeys(tx, dtype(v), args, nargs, NULL, out);
    }
    if (cdyn_name_is(name, "__getitem__") && nargs == 1) {
        return cdyn_v_subscr(tx, v, args[0], out);
    }
    if (cdyn_name_is(name, "__contains__") && nargs == 1) {
        int r = 0;
        st = cdyn_v_contains(tx, v, args[0], &r);
        *out = st == TR_OK ? cdyn_value_bool(r) : NULL;
        return st == TR_OK && *out == NULL ? TR_ERROR : st;
    }
    return cdyn_tx_unsupported(tx, "method %U of %S", name, v);
}

tr_status
cdyn_dict_base_method(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *const *args,
                      Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyTypeObject *t;
    tr_status st;
    (void)args;   /* methods of no argument only */
    if (V(v)->vt != &cdyn_dict_vt || V(v)->kind != VK_DICT || kwnames != NULL || nargs != 0) {
        return TR_NOTIMPL;
    }
    t = dtype(v);
    if (cdyn_name_is(name, "copy") &&
        ((PyObject *)t == odict_type || (PyObject *)t == ddict_type ||
         (PyObject *)t == counter_type)) {
        /* dict's copy reads the entries in the order iteration gives them (an OrderedDict's
           keys(), then d[k]; a defaultdict's or Counter's own storage): a plain dict */
        st = cdyn_tx_materialize(tx, v);
        if (st != TR_OK) {
            return st;
        }
        *out = dict_copy_as(v, &PyDict_Type);
        return *out ? TR_OK : TR_ERROR;
    }
    if (cdyn_name_is(name, "popitem") && (PyObject *)t == odict_type) {
        /* dict's popitem pops the last entry of the underlying dict, which is the
           OrderedDict's last while move_to_end never ran on it: known only for one made in
           the trace (eager leaves the OrderedDict's own links stale; the trace keeps it
           consistent, as torch._dynamo) */
        if (V(v)->source != NULL || (V(v)->bits & DICT_REORDERED)) {
            return cdyn_tx_unsupported(tx, "dict.popitem on %S, an OrderedDict %s", v,
                                       V(v)->source ? "of the frame" : "reordered by move_to_end");
        }
        return m_popitem(tx, v, NULL, out);
    }
    return TR_NOTIMPL;
}

/* ---- protocol ------------------------------------------------------------------------------- */

static tr_status
dict_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    (void)tx;
    if (V(v)->kind == VK_DICTVIEW) {
        v = vdict(v);
    }
    *out = dlen(v) > 0;
    return TR_OK;
}

static tr_status
dict_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    Py_ssize_t n;
    PyObject *l;
    if (V(v)->kind == VK_DICTVIEW) {
        tr_status st = cdyn_tx_materialize(tx, vdict(v));
        return st == TR_OK ? view_unpack(tx, v, out_list) : st;
    }
    n = dlen(v);
    l = PyList_New(n);
    if (l == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = keyval(v, i);
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
    PyObject *h = NULL;
    tr_status st;
    if (V(v)->kind == VK_DICTVIEW) {
        return cdyn_tx_unsupported(tx, "subscript of a dict view");
    }
    st = optim_capturable_view(tx, v, key, out);
    if (st != TR_NOTIMPL) {
        return st;
    }
    st = lookup(tx, v, key, &i, &h);
    if (st != TR_OK) {
        return st;
    }
    if (i >= 0) {
        *out = Py_NewRef(PyList_GET_ITEM(vals(v), i));
    }
    else {
        st = missing(tx, v, key, h, out);
    }
    Py_DECREF(h);
    return st;
}

/* d[k] on an input dict not yet materialized (SEQ_LAZY), a plain dict or OrderedDict (no
 * __missing__), k a key the DICT_KEYS guard could pin (a constant, a class, ...) that is in
 * it: the value read through its ITEM source alone, which guards it (and so k's presence),
 * as torch._dynamo guards only the keys read; other keys may change without a recompile.
 * A later read of the whole dict materializes it and gets the same value (memoised by
 * source). TR_NOTIMPL otherwise. */
static tr_status
dict_subscr_lazy(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out)
{
    PyObject *real = V(v)->u.dict.real, *k = cdyn_v_real(key), *val, *src;
    tr_status st = optim_capturable_view(tx, v, key, out);
    if (st != TR_NOTIMPL) {
        return st;
    }
    if (V(v)->kind != VK_DICT || !(V(v)->bits & SEQ_LAZY) || V(v)->source == NULL ||
        real == NULL || !(PyDict_CheckExact(real) || Py_IS_TYPE(real, (PyTypeObject *)odict_type)) ||
        k == NULL || cdyn_is_tensor(k) || !cdyn_pinnable_key(k)) {
        return TR_NOTIMPL;
    }
    if (V(v)->u.dict.keys != NULL) {   /* stored while lazy (lazy_store) */
        Py_ssize_t j = find(v, k);
        if (j >= 0) {
            *out = Py_NewRef(PyList_GET_ITEM(vals(v), j));
            return TR_OK;
        }
        if (j == -2) {
            return TR_ERROR;
        }
    }
    val = PyDict_GetItemWithError(real, k);   /* borrowed */
    if (val == NULL) {
        return PyErr_Occurred() ? TR_ERROR : TR_NOTIMPL;
    }
    src = cdyn_source_item(V(v)->source, k);
    if (src == NULL) {
        return TR_ERROR;
    }
    Py_INCREF(val);
    st = cdyn_tx_wrap_real(tx, val, src, out);
    Py_DECREF(val);
    Py_DECREF(src);
    return st;
}

/* 1 when v is an input dict not read yet whose entries the trace may answer one key at a
 * time: a plain dict or OrderedDict, read through a source, no object's mirror and no
 * registry read by position. */
static int
lazy_readable(PyObject *v)
{
    cdyn_value *x = V(v);
    return x->kind == VK_DICT && (x->bits & SEQ_LAZY) &&
           !(x->bits & (DICT_MIRROR | DICT_BY_POSITION)) && x->source != NULL &&
           x->u.dict.real != NULL && dict_init() == 0 &&
           (PyDict_CheckExact(x->u.dict.real) ||
            Py_IS_TYPE(x->u.dict.real, (PyTypeObject *)odict_type));
}

/* The source of the module (borrowed) when v is an nn.Module's _parameters, _buffers or
 * _modules read through its source, as `m._buffers` or `m.__dict__['_buffers']`; NULL
 * otherwise. */
static PyObject *
module_registry_owner(PyObject *v)
{
    cdyn_source *s = (cdyn_source *)V(v)->source;
    if (s == NULL || s->base == NULL || !PyUnicode_Check(s->name) ||
        !(cdyn_name_is(s->name, "_parameters") || cdyn_name_is(s->name, "_buffers") ||
          cdyn_name_is(s->name, "_modules"))) {
        return NULL;
    }
    if (s->kind == CDYN_SRC_ATTR) {
        return (PyObject *)s->base;
    }
    if (s->kind == CDYN_SRC_ITEM && s->base->kind == CDYN_SRC_ATTR && s->base->base != NULL &&
        cdyn_name_is(s->base->name, "__dict__")) {
        return (PyObject *)s->base->base;
    }
    return NULL;
}

/* Drop every memoised read `<source>.<name>`: the module whose registry changed may have
 * been read under another name too (self, and the __self__ of a bound method handed to a
 * resume function), and such a read is stale now; a read of another object's `.name` is only
 * made again. 0 / -1. */
static int
drop_alias_memos(cdyn_tx *tx, PyObject *name)
{
    PyObject *suffix = PyUnicode_FromFormat(".%U", name), *stale = PyList_New(0), *k, *v;
    Py_ssize_t pos = 0;
    int rc = suffix && stale ? 0 : -1;
    while (rc == 0 && PyDict_Next(tx->by_source, &pos, &k, &v)) {
        if (PyUnicode_Check(k) && PyUnicode_Tailmatch(k, suffix, 0, PY_SSIZE_T_MAX, 1) == 1) {
            rc = PyList_Append(stale, k);
        }
    }
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(stale); i++) {
        rc = cdyn_tx_memo_write(tx, PyList_GET_ITEM(stale, i), NULL);
    }
    Py_XDECREF(suffix);
    Py_XDECREF(stale);
    return rc;
}

/* A store into / delete from an nn.Module's _parameters, _buffers or _modules
 * (register_buffer, add_module, ... inlined): what the trace read of module.<key> before is
 * stale; the next read asks the registries again (values/nnmodule.c reads this trace's). */
static int
registry_key_changed(cdyn_tx *tx, PyObject *v, PyObject *key)
{
    PyObject *owner = module_registry_owner(v), *k, *asrc;
    int rc;
    if (owner == NULL || V(key)->kind != VK_CONST ||
        !PyUnicode_CheckExact(V(key)->u.cnst.value)) {
        return 0;
    }
    k = V(key)->u.cnst.value;
    asrc = cdyn_source_attr(owner, k);
    rc = asrc ? cdyn_tx_memo_write(tx, cdyn_source_repr(asrc), NULL) : -1;
    Py_XDECREF(asrc);
    return rc < 0 ? -1 : drop_alias_memos(tx, k);
}

/* d[k] = value on an input dict not read yet (SEQ_LAZY: a plain dict or OrderedDict, k a
 * constant the DICT_KEYS guard could pin): replayed as it is (EFF_STORE_SUBSCR) and the dict
 * kept unread, so the trace guards nothing of it it does not read (STATE["step"] = step does
 * not guard the old step, as torch._dynamo); the values stored wait in its entries until the
 * dict is read whole (cdyn_dict_materialize). TR_NOTIMPL otherwise. */
static tr_status
lazy_store(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value)
{
    cdyn_value *x = V(v);
    PyObject *k = V(key)->kind == VK_CONST ? V(key)->u.cnst.value : NULL;
    if (k == NULL || !cdyn_is_constant(k) || !lazy_readable(v) ||
        module_registry_owner(v) != NULL) {
        PyErr_Clear();
        return TR_NOTIMPL;
    }
    cdyn_tx_mutated(tx, v);   /* first: the undo log keeps its state before */
    if ((x->u.dict.keys == NULL && (x->u.dict.keys = PyList_New(0)) == NULL) ||
        (x->u.dict.vals == NULL && (x->u.dict.vals = PyList_New(0)) == NULL) ||
        cdyn_tx_effect(tx, EFF_STORE_SUBSCR, v, k, value) != TR_OK ||
        raw_set(v, k, key, value) < 0) {
        return TR_ERROR;
    }
    return TR_OK;
}

static tr_status
dict_store_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value)
{
    PyObject *h = NULL;
    Py_ssize_t i;
    tr_status st;
    if (V(v)->kind == VK_DICTVIEW) {
        return cdyn_tx_unsupported(tx, "subscript of a dict view");
    }
    st = lookup(tx, v, key, &i, &h);
    if (st == TR_OK) {
        st = cdyn_container_mutating(tx, v);
    }
    if (st == TR_OK && raw_set(v, h, key, value) < 0) {
        st = TR_ERROR;
    }
    if (st == TR_OK && registry_key_changed(tx, v, key) < 0) {
        st = TR_ERROR;
    }
    Py_XDECREF(h);
    return st;
}

static tr_status
dict_delete_subscr(cdyn_tx *tx, PyObject *v, PyObject *key)
{
    Py_ssize_t i;
    PyObject *h = NULL;
    tr_status st;
    if (V(v)->kind == VK_DICTVIEW) {
        return cdyn_tx_unsupported(tx, "subscript of a dict view");
    }
    st = lookup(tx, v, key, &i, &h);
    if (st != TR_OK) {
        return st;
    }
    Py_DECREF(h);
    if (i < 0) {
        return cdyn_tx_unsupported(tx, "del of a missing dict key %S", key);
    }
    st = cdyn_container_mutating(tx, v);
    if (st == TR_OK && raw_del(v, i) < 0) {
        st = TR_ERROR;
    }
    if (st == TR_OK && registry_key_changed(tx, v, key) < 0) {
        st = TR_ERROR;
    }
    return st;
}

static tr_status
dict_contains(cdyn_tx *tx, PyObject *v, PyObject *item, int *out)
{
    Py_ssize_t i;
    PyObject *h = NULL, *pair = NULL;
    tr_status st;
    if (V(v)->kind == VK_DICTVIEW) {
        PyObject *d = vdict(v);
        if ((st = cdyn_tx_materialize(tx, d)) != TR_OK) {
            return st;
        }
        if (V(v)->bits == VIEW_VALUES) {
            *out = 0;
            for (i = 0; i < dlen(d) && !*out; i++) {
                st = cdyn_values_equal(tx, PyList_GET_ITEM(vals(d), i), item, out);
                if (st != TR_OK) {
                    return st;
                }
            }
            return TR_OK;
        }
        if (V(v)->bits == VIEW_ITEMS) {
            st = cdyn_v_unpack(tx, item, &pair);
            if (st != TR_OK) {
                return st;
            }
            if (PyList_GET_SIZE(pair) != 2) {
                Py_DECREF(pair);
                *out = 0;
                return TR_OK;
            }
            st = lookup(tx, d, PyList_GET_ITEM(pair, 0), &i, &h);
            Py_XDECREF(h);
            *out = 0;
            if (st == TR_OK && i >= 0) {
                st = cdyn_values_equal(tx, PyList_GET_ITEM(vals(d), i), PyList_GET_ITEM(pair, 1),
                                       out);
            }
            Py_DECREF(pair);
            return st;
        }
        v = d;
    }
    st = lookup(tx, v, item, &i, &h);
    if (st != TR_OK) {
        return st;
    }
    Py_DECREF(h);
    *out = i >= 0;
    return TR_OK;
}

/* k in d on an input dict not read yet, k a constant: a key stored by the trace is there; any
 * other is looked up in the real dict and guarded by DICT_CONTAINS alone (the values and the
 * other keys stay unread), as torch._dynamo guards only the key tested. TR_NOTIMPL
 * otherwise. */
static tr_status
dict_contains_lazy(cdyn_tx *tx, PyObject *v, PyObject *item, int *out)
{
    PyObject *k = V(item)->kind == VK_CONST ? V(item)->u.cnst.value : NULL;
    Py_ssize_t j;
    int has;
    if (k == NULL || !cdyn_is_constant(k) || !lazy_readable(v)) {
        PyErr_Clear();
        return TR_NOTIMPL;
    }
    if (V(v)->u.dict.keys != NULL) {   /* stored while lazy (lazy_store) */
        if ((j = find(v, k)) == -2) {
            return TR_ERROR;
        }
        if (j >= 0) {
            *out = 1;
            return TR_OK;
        }
    }
    has = PyDict_Contains(V(v)->u.dict.real, k);
    if (has < 0 || cdyn_guards_add_contains(tx->guards, V(v)->source, k, has) < 0) {
        return TR_ERROR;
    }
    *out = has;
    return TR_OK;
}

static tr_status
dict_len(cdyn_tx *tx, PyObject *v, Py_ssize_t *out)
{
    if (V(v)->kind == VK_DICTVIEW) {
        tr_status st = cdyn_tx_materialize(tx, vdict(v));
        if (st != TR_OK) {
            return st;
        }
        v = vdict(v);
    }
    *out = dlen(v);
    return TR_OK;
}

/* == / != of two dicts (Counter: missing counts are zero; two OrderedDicts: order too). */
static tr_status
dict_eq(cdyn_tx *tx, PyObject *a, PyObject *b, int *out)
{
    int counters = IS_COUNTER(a) && IS_COUNTER(b), ordered = IS_ODICT(a) && IS_ODICT(b);
    tr_status st;
    *out = 1;
    if (counters) {
        PyObject *ma = NULL, *mb = NULL;
        st = real_counts(tx, a, 0, &ma);
        if (st == TR_OK) {
            st = real_counts(tx, b, 0, &mb);
        }
        if (st == TR_OK) {
            *out = PyObject_RichCompareBool(ma, mb, Py_EQ);
            st = *out < 0 ? TR_ERROR : TR_OK;
        }
        Py_XDECREF(ma);
        Py_XDECREF(mb);
        return st;
    }
    if (dlen(a) != dlen(b)) {
        *out = 0;
        return TR_OK;
    }
    for (Py_ssize_t i = 0; i < dlen(a) && *out; i++) {
        Py_ssize_t j = find(b, PyList_GET_ITEM(keys(a), i));
        if (j == -2) {
            return TR_ERROR;
        }
        if (j < 0 || (ordered && j != i)) {
            *out = 0;
            return TR_OK;
        }
        st = cdyn_values_equal(tx, PyList_GET_ITEM(vals(a), i), PyList_GET_ITEM(vals(b), j), out);
        if (st != TR_OK) {
            return st;
        }
    }
    return TR_OK;
}

/* 1 when v is a keys() or items() view (they behave as sets). */
static int
set_like_view(PyObject *v)
{
    return V(v)->kind == VK_DICTVIEW && V(v)->bits != VIEW_VALUES;
}

/* v as a set value: a set-like view's entries, any other value as set(v) would take it. */
static tr_status
as_set(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    if (set_like_view(v)) {
        return view_as_set(tx, v, out);
    }
    if (V(v)->kind == VK_SET || V(v)->kind == VK_FROZENSET) {
        *out = Py_NewRef(v);
        return TR_OK;
    }
    return cdyn_set_construct(tx, VK_SET, &v, 1, NULL, out);
}

static tr_status
dict_compare(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    int eq = 0;
    tr_status st;
    if (set_like_view(a) || set_like_view(b)) {
        PyObject *sa = NULL, *sb = NULL;
        PyObject *other = set_like_view(a) ? b : a;
        if (V(other)->kind != VK_SET && V(other)->kind != VK_FROZENSET && !set_like_view(other)) {
            return TR_NOTIMPL;
        }
        st = as_set(tx, a, &sa);
        if (st == TR_OK) {
            st = as_set(tx, b, &sb);
        }
        if (st == TR_OK) {
            st = cdyn_v_compare(tx, op, sa, sb, out);
        }
        Py_XDECREF(sa);
        Py_XDECREF(sb);
        return st;
    }
    if ((op != Py_EQ && op != Py_NE) || V(a)->kind != VK_DICT || V(b)->kind != VK_DICT) {
        return TR_NOTIMPL;
    }
    if ((st = cdyn_tx_materialize(tx, a)) != TR_OK || (st = cdyn_tx_materialize(tx, b)) != TR_OK) {
        return st;
    }
    st = dict_eq(tx, a, b, &eq);
    if (st != TR_OK) {
        return st;
    }
    *out = cdyn_value_bool(op == Py_EQ ? eq : !eq);
    return *out ? TR_OK : TR_ERROR;
}

/* Counter arithmetic (+ - | & and in-place forms) on a real Counter of hash keys. */
static tr_status
counter_binop(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    static const int ops[] = {0, 10, 7, 1};   /* add, sub, or, and */
    int opb = op >= 13 ? op - 13 : op, known = 0;
    PyObject *ma = NULL, *mb = NULL, *r = NULL;
    tr_status st;
    for (int i = 0; i < 4; i++) {
        known |= ops[i] == opb;
    }
    if (!known) {
        return TR_NOTIMPL;
    }
    st = real_counts(tx, a, 0, &ma);
    if (st == TR_OK) {
        st = real_counts(tx, b, 0, &mb);
    }
    if (st == TR_OK) {
        r = op >= 13 ? PyObject_CallFunctionObjArgs(cdyn_G.binop_fns[op], ma, mb, NULL)
                     : PyObject_CallFunctionObjArgs(cdyn_G.binop_fns[opb], ma, mb, NULL);
        st = r ? TR_OK : cdyn_tx_unsupported(tx, "Counter operation failed");
    }
    if (st == TR_OK && op >= 13) {
        st = cdyn_container_mutating(tx, a);
        if (st == TR_OK && raw_set_from_real(a, r, a, b) < 0) {
            st = TR_ERROR;
        }
        *out = st == TR_OK ? Py_NewRef(a) : NULL;
    }
    else if (st == TR_OK) {
        *out = counter_from_real(r, a, b);
        st = *out ? TR_OK : TR_ERROR;
    }
    Py_XDECREF(ma);
    Py_XDECREF(mb);
    Py_XDECREF(r);
    return st;
}

/* a | b of two dicts: a copy of a (as dict.__or__, or b's __ror__ when b's type is a
 * subclass of a's with its own: OrderedDict, defaultdict) updated with b. */
static tr_status
dict_or(cdyn_tx *tx, PyObject *a, PyObject *b, PyObject **out)
{
    PyObject *base = a;
    tr_status st;
    if (dtype(b) != dtype(a) && PyType_IsSubtype(dtype(b), dtype(a)) && (IS_ODICT(b) || IS_DDICT(b))) {
        base = b;   /* b.__ror__(a): b's type and factory, a's entries first */
    }
    *out = dict_copy(a);
    if (*out == NULL) {
        return TR_ERROR;
    }
    Py_XSETREF(V(*out)->u.dict.type, Py_XNewRef(V(base)->u.dict.type));
    Py_XSETREF(V(*out)->u.dict.factory, Py_XNewRef(V(base)->u.dict.factory));
    if (dtype(*out) != &PyDict_Type && !IS_ODICT(*out) && !IS_DDICT(*out)) {
        Py_CLEAR(V(*out)->u.dict.type);   /* dict.__or__ of another subclass: a dict */
    }
    st = update_from(tx, *out, b, NULL, NULL, 0, 1);
    if (st != TR_OK) {
        Py_CLEAR(*out);
    }
    return st;
}

static tr_status
dict_binop(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    tr_status st;
    int opb = op >= 13 ? op - 13 : op;
    if (op == NB_INPLACE_OR && V(a)->kind == VK_DICT && V(b)->kind != VK_DICT && !IS_COUNTER(a) &&
        cdyn_v_python_type(b) != NULL &&
        !PyType_IsSubtype(cdyn_v_python_type(b), &PyDict_Type)) {
        /* d |= iterable of pairs: dict.update's way (dict.__ior__ takes any) */
        if ((st = cdyn_tx_materialize(tx, a)) == TR_OK) {
            st = update_from(tx, a, b, NULL, NULL, 0, 1);
        }
        *out = st == TR_OK ? Py_NewRef(a) : NULL;
        return st;
    }
    if (set_like_view(a) || set_like_view(b)) {
        /* keys()/items() views combine as sets: (view op iterable) gives a set */
        /* (in place: a view has no __iand__, and a set's returns NotImplemented for a view,
           so `s &= d.keys()` is the binary operator too, making a new set) */
        PyObject *sa = NULL, *sb = NULL;
        if (opb != 1 && opb != 7 && opb != 10 && opb != 12) {
            return TR_NOTIMPL;
        }
        st = as_set(tx, a, &sa);
        if (st == TR_OK) {
            st = as_set(tx, b, &sb);
        }
        if (st == TR_OK) {
            st = cdyn_v_binop(tx, opb, sa, sb, out);
        }
        Py_XDECREF(sa);
        Py_XDECREF(sb);
        return st;
    }
    if (V(a)->kind != VK_DICT || V(b)->kind != VK_DICT) {
        return TR_NOTIMPL;
    }
    if ((st = cdyn_tx_materialize(tx, a)) != TR_OK || (st = cdyn_tx_materialize(tx, b)) != TR_OK) {
        return st;
    }
    if (IS_COUNTER(a) && IS_COUNTER(b)) {
        return counter_binop(tx, op, a, b, out);
    }
    if (opb != 7 /* | */ || (op >= 13 && IS_COUNTER(a))) {
        return TR_NOTIMPL;
    }
    if (op >= 13) {
        st = update_from(tx, a, b, NULL, NULL, 0, 1);
        *out = st == TR_OK ? Py_NewRef(a) : NULL;
        return st;
    }
    return dict_or(tx, a, b, out);
}

static tr_status
dict_unary(cdyn_tx *tx, int opcode, PyObject *v, PyObject **out)
{
    PyObject *m = NULL, *r = NULL;
    tr_status st;
    if (V(v)->kind != VK_DICT || !IS_COUNTER(v) ||
        (opcode != UNARY_POSITIVE && opcode != UNARY_NEGATIVE)) {
        return cdyn_tx_unsupported(tx, "unary operator on %S", v);
    }
    st = real_counts(tx, v, 0, &m);
    if (st != TR_OK) {
        return st;
    }
    r = opcode == UNARY_POSITIVE ? PyNumber_Positive(m) : PyNumber_Negative(m);
    Py_DECREF(m);
    if (r == NULL) {
        return cdyn_tx_unsupported(tx, "Counter unary operator failed");
    }
    *out = counter_from_real(r, v, NULL);
    Py_DECREF(r);
    return *out ? TR_OK : TR_ERROR;
}

static tr_status
dict_graph_arg(cdyn_tx *tx, PyObject *v, PyObject **fake, PyObject **node)
{
    PyObject *fd, *nd;
    if (V(v)->kind == VK_DICTVIEW || V(v)->u.dict.keyvals != NULL) {
        return cdyn_tx_unsupported(tx, "%S as an argument to a torch operation", v);
    }
    fd = PyDict_New();
    nd = PyDict_New();
    if (fd == NULL || nd == NULL) {
        goto error;
    }
    for (Py_ssize_t i = 0; i < dlen(v); i++) {
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
    return dtype(v);
}

/* ---- code generation ------------------------------------------------------------------------ */

/* 1 when a dict of d's type can be built by the transformed code. */
static int
rebuildable_type(PyObject *d)
{
    PyTypeObject *t = dtype(d);
    return t == &PyDict_Type || t == (PyTypeObject *)odict_type || t == (PyTypeObject *)ddict_type ||
           t == (PyTypeObject *)counter_type;
}

static tr_status
dict_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    cdyn_value *x = V(v);
    tr_status st;
    if (x->kind == VK_DICTVIEW) {
        return cdyn_cg_collect(tx, cg, vdict(v));
    }
    if (x->source != NULL && !(x->bits & SEQ_SYNCED)) {
        return TR_OK;
    }
    if (x->source == NULL && !rebuildable_type(v)) {
        return cdyn_tx_unsupported(tx, "cannot rebuild a %s", dtype(v)->tp_name);
    }
    for (Py_ssize_t i = 0; i < dlen(v); i++) {
        PyObject *kvs = x->u.dict.keyvals;
        if (kvs != NULL && PyList_GET_ITEM(kvs, i) != Py_None &&
            (st = cdyn_cg_collect(tx, cg, PyList_GET_ITEM(kvs, i))) != TR_OK) {
            return st;
        }
        if ((st = cdyn_cg_collect(tx, cg, PyList_GET_ITEM(vals(v), i))) != TR_OK) {
            return st;
        }
    }
    if (x->u.dict.factory != NULL && x->source == NULL &&
        (st = cdyn_cg_collect(tx, cg, x->u.dict.factory)) != TR_OK) {
        return st;
    }
    if (x->u.dict.attrs != NULL && x->source == NULL && !(x->bits & DICT_VISITING)) {
        /* rebuilt after the dict is kept in its temporary (dict_reconstruct), so an
           attribute may refer back to it */
        x->bits |= DICT_VISITING;
        st = cdyn_cg_collect(tx, cg, x->u.dict.attrs);
        x->bits &= ~DICT_VISITING;
        return st;
    }
    return TR_OK;
}

/* The instance attributes the trace stored on v, set on the dict just built (on the stack,
 * kept there): value; COPY 2; STORE_ATTR name, in the order they were first stored. */
static int
emit_attrs(cdyn_cg *cg, PyObject *v)
{
    PyObject *a = V(v)->u.dict.attrs;
    for (Py_ssize_t k = 0; a != NULL && k < dlen(a); k++) {
        int i = cdyn_cg_name(cg, PyList_GET_ITEM(keys(a), k));
        if (i < 0 || cdyn_cg_value(cg, PyList_GET_ITEM(vals(a), k)) < 0 ||
            cdyn_cg_emit(cg, COPY, 2) < 0 || cdyn_cg_emit(cg, STORE_ATTR, i) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Push a plain dict of v's entries (BUILD_MAP). 0 / -1. */
static int
emit_entries(cdyn_cg *cg, PyObject *v)
{
    Py_ssize_t n = dlen(v);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *kvs = V(v)->u.dict.keyvals;
        int e = kvs != NULL && PyList_GET_ITEM(kvs, k) != Py_None
                    ? cdyn_cg_value(cg, PyList_GET_ITEM(kvs, k))
                    : cdyn_cg_load_const(cg, PyList_GET_ITEM(keys(v), k));
        if (e < 0 || cdyn_cg_value(cg, PyList_GET_ITEM(vals(v), k)) < 0) {
            return -1;
        }
    }
    return cdyn_cg_emit(cg, BUILD_MAP, (int)n);
}

static int
dict_reconstruct(cdyn_cg *cg, PyObject *v)
{
    int r, nargs = 1;
    PyTypeObject *t;
    if (V(v)->kind == VK_DICTVIEW) {
        PyObject *name = PyUnicode_FromString(view_methods[V(v)->bits]);
        int i = name ? cdyn_cg_name(cg, name) : -1;
        Py_XDECREF(name);
        if (i < 0 || cdyn_cg_value(cg, vdict(v)) < 0 || cdyn_cg_emit(cg, LOAD_METHOD, i) < 0) {
            return -1;
        }
        return cdyn_cg_call(cg, 0);
    }
    if (V(v)->source != NULL) {   /* the real dict (changes written back to it) */
        return cdyn_cg_source(cg, V(v)->source);
    }
    r = cdyn_cg_memo_load(cg, v);
    if (r != 0) {
        return r < 0 ? -1 : 0;
    }
    t = dtype(v);
    if (t != &PyDict_Type) {
        /* type(mapping) or defaultdict(factory, mapping): keeps the order */
        if (cdyn_cg_push_callable(cg, (PyObject *)t) < 0) {
            return -1;
        }
        if (t == (PyTypeObject *)ddict_type) {
            nargs = 2;
            if ((V(v)->u.dict.factory ? cdyn_cg_value(cg, V(v)->u.dict.factory)
                                      : cdyn_cg_load_const(cg, Py_None)) < 0) {
                return -1;
            }
        }
    }
    if (emit_entries(cg, v) < 0) {
        return -1;
    }
    if (t != &PyDict_Type && cdyn_cg_call(cg, nargs) < 0) {
        return -1;
    }
    /* stored first: an attribute that refers back to the dict loads it */
    return cdyn_cg_memo_store(cg, v, "obj") < 0 ? -1 : emit_attrs(cg, v);
}

/* target.clear(); target.update(<contents>) with dict's own methods (OrderedDict's for an
 * OrderedDict: its order lives outside the dict storage). */
static int
dict_writeback(cdyn_cg *cg, PyObject *v)
{
    int od = IS_ODICT(v);
    if (emit_entries(cg, v) < 0 ||
        cdyn_cg_push_callable(cg, od ? fn_odict_clear : fn_dict_clear) < 0 ||
        cdyn_cg_value(cg, v) < 0 || cdyn_cg_call(cg, 1) < 0 ||
        cdyn_cg_emit(cg, POP_TOP, 0) < 0 ||
        cdyn_cg_push_callable(cg, od ? fn_odict_update : fn_dict_update) < 0 ||
        cdyn_cg_value(cg, v) < 0 || cdyn_cg_emit(cg, COPY, 4) < 0 ||
        cdyn_cg_call(cg, 2) < 0 || cdyn_cg_emit(cg, POP_TOP, 0) < 0) {
        return -1;
    }
    return cdyn_cg_emit(cg, POP_TOP, 0);
}

/* A dict (OrderedDict, Counter) of constants as a real one; a view of one as the same view
 * of the real dict. */
static PyObject *
dict_as_constant(PyObject *v)
{
    PyObject *d = NULL, *r = NULL;
    if (V(v)->kind == VK_DICTVIEW) {
        d = cdyn_v_as_constant(vdict(v));
        r = d ? PyObject_CallMethod(d, view_methods[V(v)->bits], NULL) : NULL;
        Py_XDECREF(d);
        return r;
    }
    if (V(v)->kind != VK_DICT || (V(v)->bits & SEQ_LAZY) || V(v)->u.dict.keyvals != NULL ||
        V(v)->u.dict.attrs != NULL || IS_DDICT(v) || !rebuildable_type(v) || (d = PyDict_New()) == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < dlen(v); i++) {
        PyObject *c = cdyn_v_as_constant(PyList_GET_ITEM(vals(v), i));
        int e = c == NULL || PyDict_SetItem(d, PyList_GET_ITEM(keys(v), i), c) < 0;
        Py_XDECREF(c);
        if (e) {
            Py_DECREF(d);
            return NULL;
        }
    }
    if (dtype(v) == &PyDict_Type) {
        return d;
    }
    r = PyObject_CallOneArg((PyObject *)dtype(v), d);
    Py_DECREF(d);
    return r;
}

/* Undo (undo.c): the entries of a dict (keys, values, key values); the input dict a lazy
 * one stands for is the program's, never written while tracing. A view has no state of its
 * own. */
static PyObject *
dict_save(PyObject *v)
{
    if (V(v)->kind != VK_DICT) {
        return Py_NewRef(Py_None);
    }
    return Py_BuildValue("(NNN)", cdyn_undo_copy(V(v)->u.dict.keys),
                         cdyn_undo_copy(V(v)->u.dict.vals), cdyn_undo_copy(V(v)->u.dict.keyvals));
}

static int
dict_restore(PyObject *v, PyObject *saved)
{
    return cdyn_undo_refill(V(v)->u.dict.keys, PyTuple_GET_ITEM(saved, 0)) < 0 ||
                   cdyn_undo_refill(V(v)->u.dict.vals, PyTuple_GET_ITEM(saved, 1)) < 0 ||
                   cdyn_undo_refill(V(v)->u.dict.keyvals, PyTuple_GET_ITEM(saved, 2)) < 0
               ? -1 : 0;
}

const cdyn_vtable cdyn_dict_vt = {
    .name = "ConstDictVariable",
    .getattr = dict_getattr,
    .setattr = dict_setattr,
    .call_method = dict_call_method,
    .truth = dict_truth,
    .unpack = dict_unpack,
    .subscr = dict_subscr,
    .subscr_lazy = dict_subscr_lazy,
    .store_subscr = dict_store_subscr,
    .store_subscr_lazy = lazy_store,
    .delete_subscr = dict_delete_subscr,
    .contains = dict_contains,
    .contains_lazy = dict_contains_lazy,
    .binop = dict_binop,
    .compare = dict_compare,
    .unary = dict_unary,
    .len = dict_len,
    .graph_arg = dict_graph_arg,
    .python_type = dict_python_type,
    .collect = dict_collect,
    .reconstruct = dict_reconstruct,
    .writeback = dict_writeback,
    .as_constant = dict_as_constant,
    .save = dict_save,
    .restore = dict_restore,
};

/* 1 when type is one of the dict types this family models (exactly). */
int
cdyn_is_dict_type(PyTypeObject *type)
{
    if (dict_init() < 0) {
        PyErr_Clear();
        return type == &PyDict_Type;
    }
    return type == &PyDict_Type || type == (PyTypeObject *)odict_type ||
           type == (PyTypeObject *)ddict_type || type == (PyTypeObject *)counter_type;
}
