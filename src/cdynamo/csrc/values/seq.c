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
    }
    if (_PyType_Lookup(base, name) == NULL) {
        return cdyn_tx_unsupported(tx, "attribute %U of a %s", name, base->tp_name);
    }
    *out = cdyn_value_method(NULL, name, v);
    return *out ? TR_OK : TR_ERROR;
}

/* list.pop([i]) */
static tr_status
list_pop(cdyn_tx *tx, PyObject *v, PyObject *const *args, Py_ssize_t nargs, PyObject **out)
{
    Py_ssize_t n = PyList_GET_SIZE(items(v)), i = n - 1;
    if (nargs == 1) {
        if (V(args[0])->kind != VK_CONST || !PyLong_Check(V(args[0])->u.cnst.value)) {
            return cdyn_tx_unsupported(tx, "list.pop with a non-constant index");
        }
        i = PyLong_AsSsize_t(V(args[0])->u.cnst.value);
        if (i < 0) {
            i += n;
        }
    }
    if (i < 0 || i >= n) {
        return cdyn_tx_unsupported(tx, "pop index out of range");
    }
    cdyn_tx_mutated(tx, v);
    *out = Py_NewRef(PyList_GET_ITEM(items(v), i));
    return PyList_SetSlice(items(v), i, i + 1, NULL) < 0 ? TR_ERROR : TR_OK;
}

/* Methods of a list made in the trace (or an input list's append, replayed). */
static tr_status
seq_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *name, PyObject *const *args,
                Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    cdyn_value *x = V(v);
    tr_status st;
    (void)fs;
    if (kwnames != NULL) {
        return cdyn_tx_unsupported(tx, "keyword arguments to a container method");
    }
    if (x->kind == VK_LIST && (x->bits & (SEQ_LAZY | SEQ_APPENDED)) && x->source != NULL &&
        cdyn_name_is(name, "append") && nargs == 1) {
        /* append to an input list whose items were never read: replay it, and keep the
           list unread (its items can no longer be traced) */
        if (cdyn_tx_effect(tx, EFF_APPEND, v, name, args[0]) != TR_OK) {
            return TR_ERROR;
        }
        x->bits |= SEQ_APPENDED;
        cdyn_tx_mutated(tx, v);
        *out = cdyn_value_const(Py_None);
        return *out ? TR_OK : TR_ERROR;
    }
    st = cdyn_tx_materialize(tx, v);
    if (st != TR_OK) {
        return st;
    }
    if (x->kind != VK_LIST) {
        return cdyn_tx_unsupported(tx, "method %U of %S", name, v);
    }
    if (x->source != NULL) {
        if (!cdyn_name_is(name, "append") || nargs != 1) {
            return cdyn_tx_unsupported(tx, "list.%U on an input list (side effect)", name);
        }
        if (cdyn_tx_effect(tx, EFF_APPEND, v, name, args[0]) != TR_OK) {
            return TR_ERROR;
        }
    }
    if (cdyn_name_is(name, "append") && nargs == 1) {
        cdyn_tx_mutated(tx, v);
        if (PyList_Append(items(v), args[0]) < 0) {
            return TR_ERROR;
        }
        *out = cdyn_value_const(Py_None);
        return *out ? TR_OK : TR_ERROR;
    }
    if (cdyn_name_is(name, "extend") && nargs == 1) {
        PyObject *more = NULL;
        Py_ssize_t n;
        st = cdyn_v_unpack(tx, args[0], &more);
        if (st != TR_OK) {
            return st;
        }
        cdyn_tx_mutated(tx, v);
        n = PyList_GET_SIZE(items(v));
        if (PyList_SetSlice(items(v), n, n, more) < 0) {
            Py_DECREF(more);
            return TR_ERROR;
        }
        Py_DECREF(more);
        *out = cdyn_value_const(Py_None);
        return *out ? TR_OK : TR_ERROR;
    }
    if (cdyn_name_is(name, "pop") && nargs <= 1) {
        return list_pop(tx, v, args, nargs, out);
    }
    if (cdyn_name_is(name, "insert") && nargs == 2 && V(args[0])->kind == VK_CONST &&
        PyLong_Check(V(args[0])->u.cnst.value)) {
        Py_ssize_t i = PyLong_AsSsize_t(V(args[0])->u.cnst.value);
        cdyn_tx_mutated(tx, v);
        if (PyList_Insert(items(v), i, args[1]) < 0) {
            return TR_ERROR;
        }
        *out = cdyn_value_const(Py_None);
        return *out ? TR_OK : TR_ERROR;
    }
    return cdyn_tx_unsupported(tx, "method %U of %S", name, v);
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
    (void)tx;
    *out_list = PyList_GetSlice(items(v), 0, PyList_GET_SIZE(items(v)));
    return *out_list ? TR_OK : TR_ERROR;
}

static tr_status
seq_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out)
{
    PyObject *k;
    if (V(key)->kind != VK_CONST) {
        return cdyn_tx_unsupported(tx, "subscript with a non-constant key");
    }
    k = V(key)->u.cnst.value;
    if (PyLong_Check(k)) {
        Py_ssize_t n = PyList_GET_SIZE(items(v));
        Py_ssize_t i = PyLong_AsSsize_t(k);
        if (i < 0) {
            i += n;
        }
        if (i < 0 || i >= n) {
            return cdyn_tx_unsupported(tx, "index out of range");
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
        return *out ? TR_OK : TR_ERROR;
    }
    return cdyn_tx_unsupported(tx, "sequence index of type %s", Py_TYPE(k)->tp_name);
}

static tr_status
seq_store_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value)
{
    PyObject *k;
    Py_ssize_t n, i;
    if (V(key)->kind != VK_CONST) {
        return cdyn_tx_unsupported(tx, "STORE_SUBSCR with a non-constant key");
    }
    k = V(key)->u.cnst.value;
    if (V(v)->kind != VK_LIST || !PyLong_Check(k)) {
        return cdyn_tx_unsupported(tx, "STORE_SUBSCR into %S", v);
    }
    n = PyList_GET_SIZE(items(v));
    i = PyLong_AsSsize_t(k);
    if (i < 0) {
        i += n;
    }
    if (i < 0 || i >= n) {
        return cdyn_tx_unsupported(tx, "list assignment index out of range");
    }
    if (V(v)->source != NULL &&
        cdyn_tx_effect(tx, EFF_STORE_SUBSCR, v, k, value) != TR_OK) {
        return TR_ERROR;
    }
    cdyn_tx_mutated(tx, v);
    return PyList_SetItem(items(v), i, Py_NewRef(value)) < 0 ? TR_ERROR : TR_OK;
}

static tr_status
seq_delete_subscr(cdyn_tx *tx, PyObject *v, PyObject *key)
{
    Py_ssize_t n, i;
    if (V(key)->kind != VK_CONST || V(v)->kind != VK_LIST || V(v)->source != NULL ||
        !PyLong_Check(V(key)->u.cnst.value)) {
        return cdyn_tx_unsupported(tx, "DELETE_SUBSCR on %S", v);
    }
    n = PyList_GET_SIZE(items(v));
    i = PyLong_AsSsize_t(V(key)->u.cnst.value);
    if (i < 0) {
        i += n;
    }
    if (i < 0 || i >= n) {
        return cdyn_tx_unsupported(tx, "del of a list index out of range");
    }
    cdyn_tx_mutated(tx, v);
    return PyList_SetSlice(items(v), i, i + 1, NULL) < 0 ? TR_ERROR : TR_OK;
}

static tr_status
seq_contains(cdyn_tx *tx, PyObject *v, PyObject *item, int *out)
{
    if (V(item)->kind != VK_CONST) {
        return cdyn_tx_unsupported(tx, "'in' of %S in a sequence", item);
    }
    *out = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items(v)); i++) {
        PyObject *e = PyList_GET_ITEM(items(v), i);
        int r;
        if (V(e)->kind != VK_CONST) {
            return cdyn_tx_unsupported(tx, "'in' over non-constant items");
        }
        r = PyObject_RichCompareBool(V(e)->u.cnst.value, V(item)->u.cnst.value, Py_EQ);
        if (r < 0) {
            return cdyn_tx_unsupported(tx, "'in' comparison failed");
        }
        if (r) {
            *out = 1;
            break;
        }
    }
    return TR_OK;
}

/* LIST, TUPLE or NULL: the sequence kind a value concatenates as (a constant tuple is a
 * tuple, a constant list a list), or 0 when it is not a sequence. */
static cdyn_vkind
seq_kind_of(PyObject *v)
{
    if (V(v)->kind == VK_TUPLE || V(v)->kind == VK_LIST) {
        return V(v)->kind;
    }
    if (V(v)->kind == VK_CONST && PyTuple_CheckExact(V(v)->u.cnst.value)) {
        return VK_TUPLE;
    }
    return VK_NULL;
}

/* The items of a tuple-like (TUPLE value, constant tuple or torch.Size) or LIST value as a
 * new list of values; *is_list tells which; NULL list (no error) when v is neither. */
static tr_status
compare_items(cdyn_tx *tx, PyObject *v, PyObject **list, int *is_list)
{
    *list = NULL;
    *is_list = V(v)->kind == VK_LIST;
    if (V(v)->kind == VK_TUPLE || V(v)->kind == VK_LIST ||
        (V(v)->kind == VK_CONST && PyTuple_Check(V(v)->u.cnst.value))) {
        return cdyn_v_unpack(tx, v, list);
    }
    return TR_OK;
}

/* seq == seq / seq != seq, item by item as Python compares them (a symbolic size compared
 * is guarded as it is decided: x.shape == y.shape). */
static tr_status
seq_compare(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    PyObject *la = NULL, *lb = NULL;
    int la_list = 0, lb_list = 0, equal = 1;
    tr_status st;
    if (op != Py_EQ && op != Py_NE) {
        return TR_NOTIMPL;
    }
    st = compare_items(tx, a, &la, &la_list);
    if (st == TR_OK) {
        st = compare_items(tx, b, &lb, &lb_list);
    }
    if (st != TR_OK || la == NULL || lb == NULL) {
        Py_XDECREF(la);
        Py_XDECREF(lb);
        return st != TR_OK ? st : TR_NOTIMPL;
    }
    if (la_list != lb_list || PyList_GET_SIZE(la) != PyList_GET_SIZE(lb)) {
        equal = 0;
    }
    for (Py_ssize_t i = 0; equal && i < PyList_GET_SIZE(la); i++) {
        PyObject *r = NULL;
        int t = 0;
        st = cdyn_v_compare(tx, Py_EQ, PyList_GET_ITEM(la, i), PyList_GET_ITEM(lb, i), &r);
        if (st == TR_OK) {
            st = cdyn_v_truth(tx, r, &t);
            Py_DECREF(r);
        }
        if (st != TR_OK) {
            break;
        }
        equal = t;
    }
    Py_DECREF(la);
    Py_DECREF(lb);
    if (st != TR_OK) {
        return st;
    }
    *out = cdyn_value_bool(op == Py_EQ ? equal : !equal);
    return *out ? TR_OK : TR_ERROR;
}

/* seq * n and n * seq. */
static tr_status
seq_repeat(cdyn_tx *tx, PyObject *seq, PyObject *count, PyObject **out)
{
    PyObject *l = NULL, *res = NULL;
    tr_status st;
    long n;
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

static tr_status
seq_binop(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    cdyn_vkind ka = seq_kind_of(a), kb = seq_kind_of(b);
    int opb = op >= 13 ? op - 13 : op;
    PyObject *la = NULL, *lb = NULL;
    tr_status st;
    Py_ssize_t n;
    if (opb == 5 /* mul */) {
        return ka != VK_NULL ? seq_repeat(tx, a, b, out)
                             : kb != VK_NULL ? seq_repeat(tx, b, a, out) : TR_NOTIMPL;
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
        if (V(a)->source != NULL) {
            Py_DECREF(lb);
            return cdyn_tx_unsupported(tx, "mutation of an input list");
        }
        cdyn_tx_mutated(tx, a);
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
    return *out ? TR_OK : TR_ERROR;
}

static tr_status
seq_len(cdyn_tx *tx, PyObject *v, Py_ssize_t *out)
{
    (void)tx;
    *out = PyList_GET_SIZE(items(v));
    return TR_OK;
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
    if (V(v)->source != NULL) {
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
           called on the plain tuple */
        PyObject *maker = PyObject_GetAttr(V(v)->u.seq.nt_type, cdyn_G.s_make);
        if (maker == NULL) {
            PyErr_Clear();
            maker = Py_NewRef(V(v)->u.seq.nt_type);
        }
        r = cdyn_cg_push_callable(cg, maker);
        Py_DECREF(maker);
        if (r < 0 || emit_items(cg, v) < 0 || cdyn_cg_emit(cg, BUILD_TUPLE, (int)n) < 0) {
            return -1;
        }
        return cdyn_cg_call(cg, 1);
    }
    if (emit_items(cg, v) < 0) {
        return -1;
    }
    return cdyn_cg_emit(cg, BUILD_TUPLE, (int)n);
}

const cdyn_vtable cdyn_seq_vt = {
    .name = "SequenceVariable",
    .getattr = seq_getattr,
    .call_method = seq_call_method,
    .truth = seq_truth,
    .unpack = seq_unpack,
    .subscr = seq_subscr,
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
};
