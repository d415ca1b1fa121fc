/* values/deque.c: collections.deque (DEQUE).
 *
 * A deque value holds its items in a LIST value (u.deque.list, no source: the family's own
 * mirror) and its maxlen (u.deque.maxlen: an int CONST, or NULL for None). Its methods are
 * the list's where deque has them (append, extend, pop, insert, remove, index, count,
 * reverse, clear, copy, len, iteration, int subscripts, `in`, ==), plus appendleft,
 * popleft, extendleft and rotate; an append past maxlen drops an item from the other end,
 * as the real deque does. A deque made while tracing is rebuilt as
 *     collections.deque([items], maxlen)
 * A deque of the frame (with a source) is read item by item through <source>[i] under a
 * TYPE_MATCH, a LENGTH_CHECK and an EQUALS_MATCH of its maxlen; once mutated its whole
 * contents are written back (_glue.refill_deque: clear + extend, the object stays the
 * same). Ownership as everywhere: value arguments borrowed, *out new on TR_OK. */
#include "../tx.h"
#include "../codegen.h"

static PyObject *deque_type;   /* collections.deque (kept for the process) */

/* collections.deque, borrowed; NULL with an exception on failure. */
static PyObject *
get_deque_type(void)
{
    if (deque_type == NULL) {
        PyObject *m = PyImport_ImportModule("collections");
        deque_type = m ? PyObject_GetAttrString(m, "deque") : NULL;
        Py_XDECREF(m);
    }
    return deque_type;
}

int
cdyn_is_deque(PyObject *obj)
{
    PyObject *t = get_deque_type();
    if (t == NULL) {
        PyErr_Clear();
        return 0;
    }
    return Py_IS_TYPE(obj, (PyTypeObject *)t);
}

int
cdyn_is_deque_type(PyObject *obj)
{
    PyObject *t = get_deque_type();
    if (t == NULL) {
        PyErr_Clear();
    }
    return t != NULL && obj == t;
}

static PyObject *
dlist(PyObject *v)
{
    return V(v)->u.deque.list;
}

static PyObject *
ditems(PyObject *v)
{
    return V(V(v)->u.deque.list)->u.seq.items;
}

/* maxlen, or -1 for None. */
static Py_ssize_t
maxlen_of(PyObject *v)
{
    PyObject *m = V(v)->u.deque.maxlen;
    return m == NULL ? -1 : PyLong_AsSsize_t(V(m)->u.cnst.value);
}

/* A new DEQUE over items (a list of values, borrowed: copied), maxlen (CONST value or NULL,
 * borrowed), keeping the last maxlen items. */
static PyObject *
new_deque(PyObject *items, PyObject *maxlen, PyObject *source)
{
    PyObject *v = cdyn_value_alloc(VK_DEQUE, source), *copy, *l;
    Py_ssize_t n = PyList_GET_SIZE(items), keep = n;
    if (v == NULL) {
        return NULL;
    }
    if (maxlen != NULL) {
        keep = PyLong_AsSsize_t(V(maxlen)->u.cnst.value);
        keep = keep < n ? keep : n;
    }
    copy = PyList_GetSlice(items, n - keep, n);
    l = copy ? cdyn_value_seq_list(VK_LIST, copy) : NULL;
    Py_XDECREF(copy);
    if (l == NULL) {
        Py_DECREF(v);
        return NULL;
    }
    V(v)->u.deque.list = l;
    V(v)->u.deque.maxlen = Py_XNewRef(maxlen);
    return v;
}

/* Before a change of v's items: the undo log and, for a deque of the frame, the write-back. */
static tr_status
mutating(cdyn_tx *tx, PyObject *v)
{
    cdyn_tx_mutated(tx, dlist(v));
    return cdyn_container_mutating(tx, v);
}

/* Drop items from the left (from_left) or the right until maxlen holds. */
static int
trim(PyObject *v, int from_left)
{
    Py_ssize_t m = maxlen_of(v), n = PyList_GET_SIZE(ditems(v));
    if (m < 0 || n <= m) {
        return 0;
    }
    return from_left ? PyList_SetSlice(ditems(v), 0, n - m, NULL)
                     : PyList_SetSlice(ditems(v), m, n, NULL);
}

tr_status
cdyn_deque_construct(cdyn_tx *tx, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                     PyObject **out)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    PyObject *iterable = npos > 0 ? args[0] : NULL, *maxlen = npos > 1 ? args[1] : NULL;
    PyObject *items = NULL;
    tr_status st = TR_OK;
    if (npos > 2) {
        return cdyn_tx_unsupported(tx, "deque() with %zd arguments", npos);
    }
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        if (cdyn_name_is(name, "maxlen") && maxlen == NULL) {
            maxlen = args[npos + k];
        }
        else if (cdyn_name_is(name, "iterable") && iterable == NULL) {
            iterable = args[npos + k];
        }
        else {
            return cdyn_tx_unsupported(tx, "deque() with keyword %U", name);
        }
    }
    if (maxlen != NULL && cdyn_v_is_none(maxlen)) {
        maxlen = NULL;
    }
    if (maxlen != NULL && (V(maxlen)->kind != VK_CONST || !PyLong_CheckExact(V(maxlen)->u.cnst.value) ||
                           PyLong_AsSsize_t(V(maxlen)->u.cnst.value) < 0)) {
        return cdyn_tx_unsupported(tx, "deque() with maxlen %S", maxlen);
    }
    if (iterable != NULL) {
        st = cdyn_v_unpack(tx, iterable, &items);
    }
    else {
        items = PyList_New(0);
        st = items ? TR_OK : TR_ERROR;
    }
    if (st == TR_OK) {
        *out = new_deque(items, maxlen, NULL);
        st = *out ? TR_OK : TR_ERROR;
    }
    Py_XDECREF(items);
    return st;
}

tr_status
cdyn_deque_wrap(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    PyObject *items = NULL, *maxlen = NULL, *ml = NULL, *msrc = NULL, *ms = NULL;
    Py_ssize_t n = PyObject_Size(obj);
    tr_status st = n < 0 ? TR_ERROR : TR_OK;
    if (source == NULL) {
        return cdyn_tx_unsupported(tx, "a deque read without a source");
    }
    ml = PyObject_GetAttrString(obj, "maxlen");
    ms = PyUnicode_FromString("maxlen");
    msrc = ms ? cdyn_source_attr(source, ms) : NULL;
    if (st == TR_OK && (ml == NULL || msrc == NULL ||
                        cdyn_guards_add_type(tx->guards, source, Py_TYPE(obj)) < 0 ||
                        cdyn_guards_add_len(tx->guards, source, n) < 0 ||
                        cdyn_guards_add_equals(tx->guards, msrc, ml) < 0)) {
        st = TR_ERROR;
    }
    if (st == TR_OK && ml != Py_None && (maxlen = cdyn_value_const(ml)) == NULL) {
        st = TR_ERROR;
    }
    if (st == TR_OK && (items = PyList_New(0)) == NULL) {
        st = TR_ERROR;
    }
    for (Py_ssize_t i = 0; st == TR_OK && i < n; i++) {
        PyObject *key = PyLong_FromSsize_t(i), *isrc = NULL, *x = NULL, *iv = NULL;
        isrc = key ? cdyn_source_item(source, key) : NULL;
        x = isrc ? PySequence_GetItem(obj, i) : NULL;
        st = x == NULL ? TR_ERROR : cdyn_tx_wrap_real(tx, x, isrc, &iv);
        if (st == TR_OK && PyList_Append(items, iv) < 0) {
            st = TR_ERROR;
        }
        Py_XDECREF(key);
        Py_XDECREF(isrc);
        Py_XDECREF(x);
        Py_XDECREF(iv);
    }
    if (st == TR_OK) {
        *out = new_deque(items, maxlen, source);
        st = *out ? TR_OK : TR_ERROR;
    }
    Py_XDECREF(items);
    Py_XDECREF(maxlen);
    Py_XDECREF(ml);
    Py_XDECREF(ms);
    Py_XDECREF(msrc);
    return st;
}

/* ---- methods ------------------------------------------------------------------------------ */

static tr_status
deque_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    if (cdyn_name_is(name, "maxlen")) {
        *out = V(v)->u.deque.maxlen ? Py_NewRef(V(v)->u.deque.maxlen) : cdyn_value_const(Py_None);
        return *out ? TR_OK : TR_ERROR;
    }
    return cdyn_container_getattr(tx, v, (PyTypeObject *)deque_type, name, out);
}

/* appendleft / extendleft: x (or each item of it) put at the left, trimming the right. */
static tr_status
add_left(cdyn_tx *tx, PyObject *v, PyObject *const *xs, Py_ssize_t n)
{
    tr_status st = mutating(tx, v);
    for (Py_ssize_t i = 0; st == TR_OK && i < n; i++) {
        if (PyList_Insert(ditems(v), 0, xs[i]) < 0 || trim(v, 0) < 0) {
            st = TR_ERROR;
        }
    }
    return st;
}

/* extend / extendleft(generator): each item added (and the other end trimmed) before the
 * next is made, as CPython's deque consumes an iterator (the generator, or a map over it,
 * may read the deque it extends). */
static tr_status
extend_lazily(cdyn_tx *tx, PyObject *v, PyObject *gen, int left)
{
    PyObject *it = NULL, *item = NULL;
    tr_status st = cdyn_v_iter(tx, gen, &it);
    while (st == TR_OK) {
        st = cdyn_v_next(tx, it, &item);
        if (st != TR_OK || item == NULL) {
            break;
        }
        st = mutating(tx, v);
        if (st == TR_OK && ((left ? PyList_Insert(ditems(v), 0, item)
                                  : PyList_Append(ditems(v), item)) < 0 ||
                            trim(v, left ? 0 : 1) < 0)) {
            st = TR_ERROR;
        }
        Py_CLEAR(item);
    }
    Py_XDECREF(it);
    return st;
}

/* rotate(k): k steps to the right (negative: to the left). */
static tr_status
rotate(cdyn_tx *tx, PyObject *v, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t n = PyList_GET_SIZE(ditems(v)), k = 1;
    PyObject *head, *tail;
    tr_status st;
    if (nargs == 1) {
        PyObject *c = V(args[0])->kind == VK_CONST ? V(args[0])->u.cnst.value : NULL;
        if (c == NULL || !PyLong_Check(c)) {
            return cdyn_tx_unsupported(tx, "deque.rotate(%S)", args[0]);
        }
        k = PyLong_AsSsize_t(c);
        if (k == -1 && PyErr_Occurred()) {
            return TR_ERROR;
        }
    }
    if ((st = mutating(tx, v)) != TR_OK || n == 0) {
        return st;
    }
    k = ((k % n) + n) % n;
    head = PyList_GetSlice(ditems(v), 0, n - k);
    tail = PyList_GetSlice(ditems(v), n - k, n);
    if (head == NULL || tail == NULL || PyList_SetSlice(ditems(v), 0, n, tail) < 0 ||
        PyList_SetSlice(ditems(v), k, k, head) < 0) {
        st = TR_ERROR;
    }
    Py_XDECREF(head);
    Py_XDECREF(tail);
    return st;
}

/* The list's ValueError for an item missing from the deque, worded as deque's. */
static tr_status
not_in_deque(cdyn_tx *tx, const char *method, PyObject *x)
{
    if (!PyErr_GivenExceptionMatches(V(tx->exc)->u.exc.type, PyExc_ValueError)) {
        return TR_EXCEPTION;
    }
    Py_CLEAR(tx->exc);
    Py_CLEAR(tx->reason);
    return cdyn_seq_not_found(tx, "deque", method, x);
}

static tr_status
deque_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *name, PyObject *const *args,
                  Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    static const char *const reads[] = {"index", "count", "__len__", "__contains__",
                                        "__getitem__", "__iter__", NULL};
    static const char *const writes[] = {"append", "extend", "pop", "insert", "remove",
                                         "reverse", "clear", NULL};
    PyObject *items = NULL, *r = NULL;
    tr_status st;
    if (kwnames != NULL) {
        return cdyn_tx_unsupported(tx, "keyword arguments to deque.%U", name);
    }
    if (cdyn_name_in(name, reads)) {
        st = cdyn_v_call_method(tx, fs, dlist(v), name, args, nargs, NULL, out);
        return st == TR_EXCEPTION && nargs >= 1 && cdyn_name_is(name, "index")
                   ? not_in_deque(tx, "index", args[0]) : st;
    }
    if (cdyn_name_is(name, "copy") && nargs == 0) {
        *out = new_deque(ditems(v), V(v)->u.deque.maxlen, NULL);
        return *out ? TR_OK : TR_ERROR;
    }
    if (cdyn_name_is(name, "rotate") && nargs <= 1) {
        st = rotate(tx, v, args, nargs);
    }
    else if ((cdyn_name_is(name, "extend") || cdyn_name_is(name, "extendleft")) && nargs == 1 &&
             V(args[0])->kind == VK_GENERATOR) {
        st = extend_lazily(tx, v, args[0], cdyn_name_is(name, "extendleft"));
    }
    else if ((cdyn_name_is(name, "appendleft") && nargs == 1) ||
             (cdyn_name_is(name, "extendleft") && nargs == 1)) {
        if (cdyn_name_is(name, "appendleft")) {
            st = add_left(tx, v, args, 1);
        }
        else if ((st = cdyn_v_unpack(tx, args[0], &items)) == TR_OK) {
            st = add_left(tx, v, &PyList_GET_ITEM(items, 0), PyList_GET_SIZE(items));
        }
        Py_XDECREF(items);
    }
    else if (cdyn_name_is(name, "popleft") && nargs == 0) {
        if (PyList_GET_SIZE(ditems(v)) == 0) {
            return cdyn_tx_unsupported(tx, "pop from an empty deque (IndexError)");
        }
        if ((st = mutating(tx, v)) != TR_OK) {
            return st;
        }
        *out = Py_NewRef(PyList_GET_ITEM(ditems(v), 0));
        if (PyList_SetSlice(ditems(v), 0, 1, NULL) < 0) {
            Py_CLEAR(*out);
            return TR_ERROR;
        }
        return TR_OK;
    }
    else if (cdyn_name_in(name, writes) && !(cdyn_name_is(name, "pop") && nargs != 0)) {
        if (cdyn_name_is(name, "insert") && maxlen_of(v) >= 0 &&
            PyList_GET_SIZE(ditems(v)) >= maxlen_of(v)) {
            return cdyn_tx_unsupported(tx, "insert into a full deque (IndexError)");
        }
        if ((st = mutating(tx, v)) != TR_OK) {
            return st;
        }
        st = cdyn_v_call_method(tx, fs, dlist(v), name, args, nargs, NULL, &r);
        if (st == TR_EXCEPTION && cdyn_name_is(name, "remove")) {
            return not_in_deque(tx, "remove", args[0]);
        }
        if (st == TR_OK && trim(v, 1) < 0) {
            st = TR_ERROR;
        }
        if (st == TR_OK) {
            *out = r;
            return TR_OK;
        }
        Py_XDECREF(r);
        return st;
    }
    else {
        return cdyn_tx_unsupported(tx, "method %U of a deque", name);
    }
    *out = st == TR_OK ? cdyn_value_const(Py_None) : NULL;
    return st == TR_OK && *out == NULL ? TR_ERROR : st;
}

/* ---- protocol ----------------------------------------------------------------------------- */

static tr_status
deque_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    return cdyn_v_truth(tx, dlist(v), out);
}

static tr_status
deque_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    return cdyn_v_unpack(tx, dlist(v), out_list);
}

static tr_status
deque_len(cdyn_tx *tx, PyObject *v, Py_ssize_t *out)
{
    return cdyn_v_len(tx, dlist(v), out);
}

static tr_status
deque_contains(cdyn_tx *tx, PyObject *v, PyObject *item, int *out)
{
    return cdyn_v_contains(tx, dlist(v), item, out);
}

/* 1 when key is an int constant (deques take no slices). */
static int
int_key(PyObject *key)
{
    return V(key)->kind == VK_CONST && PyLong_Check(V(key)->u.cnst.value);
}

static tr_status
deque_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out)
{
    if (!int_key(key)) {
        return cdyn_tx_unsupported(tx, "deque subscript %S", key);
    }
    return cdyn_v_subscr(tx, dlist(v), key, out);
}

static tr_status
deque_store_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value)
{
    tr_status st;
    if (!int_key(key)) {
        return cdyn_tx_unsupported(tx, "deque subscript %S", key);
    }
    st = mutating(tx, v);
    return st == TR_OK ? cdyn_v_store_subscr(tx, dlist(v), key, value) : st;
}

static tr_status
deque_delete_subscr(cdyn_tx *tx, PyObject *v, PyObject *key)
{
    tr_status st;
    if (!int_key(key)) {
        return cdyn_tx_unsupported(tx, "deque subscript %S", key);
    }
    st = mutating(tx, v);
    return st == TR_OK ? cdyn_v_delete_subscr(tx, dlist(v), key) : st;
}

/* d1 + d2 (a new deque with d1's maxlen), d += iterable (extend). */
static tr_status
deque_binop(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    PyObject *items = NULL, *r = NULL, *name;
    tr_status st;
    if (V(a)->kind != VK_DEQUE) {
        return TR_NOTIMPL;
    }
    if (op == NB_ADD && V(b)->kind == VK_DEQUE) {
        items = PySequence_Concat(ditems(a), ditems(b));
        *out = items ? new_deque(items, V(a)->u.deque.maxlen, NULL) : NULL;
        Py_XDECREF(items);
        return *out ? TR_OK : TR_ERROR;
    }
    if (op != NB_INPLACE_ADD) {
        return TR_NOTIMPL;
    }
    name = PyUnicode_FromString("extend");
    st = name ? deque_call_method(tx, NULL, a, name, &b, 1, NULL, &r) : TR_ERROR;
    Py_XDECREF(name);
    Py_XDECREF(r);
    *out = st == TR_OK ? Py_NewRef(a) : NULL;
    return st;
}

/* == / != / < ... between deques: their items compared as lists; a deque never equals
 * another kind of container. */
static tr_status
deque_compare(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    if (V(a)->kind == VK_DEQUE && V(b)->kind == VK_DEQUE) {
        return cdyn_v_compare(tx, op, dlist(a), dlist(b), out);
    }
    if (op == Py_EQ || op == Py_NE) {
        PyObject *other = V(a)->kind == VK_DEQUE ? b : a;
        cdyn_vkind k = V(other)->kind;
        if (k == VK_CONST || k == VK_TUPLE || k == VK_LIST || k == VK_DICT || k == VK_SET) {
            *out = cdyn_value_bool(op == Py_NE);
            return *out ? TR_OK : TR_ERROR;
        }
    }
    return TR_NOTIMPL;
}

static PyTypeObject *
deque_python_type(PyObject *v)
{
    (void)v;
    return (PyTypeObject *)deque_type;
}

/* ---- code generation ---------------------------------------------------------------------- */

static tr_status
deque_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    if (V(v)->source != NULL && !(V(v)->bits & SEQ_SYNCED)) {
        return TR_OK;   /* rebuilt from its source */
    }
    return cdyn_cg_collect(tx, cg, dlist(v));
}

/* Push a new list of v's items (not its mirror LIST: that would be memoized as one object). */
static int
emit_items(cdyn_cg *cg, PyObject *v)
{
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(ditems(v)); k++) {
        if (cdyn_cg_value(cg, PyList_GET_ITEM(ditems(v), k)) < 0) {
            return -1;
        }
    }
    return cdyn_cg_emit(cg, BUILD_LIST, (int)PyList_GET_SIZE(ditems(v)));
}

static int
deque_reconstruct(cdyn_cg *cg, PyObject *v)
{
    int r;
    if (V(v)->source != NULL) {
        return cdyn_cg_source(cg, V(v)->source);
    }
    r = cdyn_cg_memo_load(cg, v);
    if (r != 0) {
        return r < 0 ? -1 : 0;
    }
    if (cdyn_cg_push_callable(cg, deque_type) < 0 || emit_items(cg, v) < 0) {
        return -1;
    }
    if (V(v)->u.deque.maxlen != NULL) {
        if (cdyn_cg_value(cg, V(v)->u.deque.maxlen) < 0 || cdyn_cg_call(cg, 2) < 0) {
            return -1;
        }
    }
    else if (cdyn_cg_call(cg, 1) < 0) {
        return -1;
    }
    return cdyn_cg_memo_store(cg, v, "obj");
}

/* _glue.refill_deque(<the deque>, [items]) */
static int
deque_writeback(cdyn_cg *cg, PyObject *v)
{
    PyObject *fill = PyObject_GetAttrString(cdyn_G.glue, "refill_deque");
    int e = fill == NULL || cdyn_cg_push_callable(cg, fill) < 0 || cdyn_cg_value(cg, v) < 0 ||
            emit_items(cg, v) < 0 || cdyn_cg_call(cg, 2) < 0 || cdyn_cg_emit(cg, POP_TOP, 0) < 0;
    Py_XDECREF(fill);
    return e ? -1 : 0;
}

/* A real deque of the items when they are all constants (its repr, folds); NULL (no
 * exception) otherwise. */
static PyObject *
deque_as_constant(PyObject *v)
{
    PyObject *items = cdyn_v_as_constant(dlist(v)), *r;
    if (items == NULL) {
        return NULL;
    }
    r = PyObject_CallFunctionObjArgs(deque_type, items,
                                     V(v)->u.deque.maxlen ? V(V(v)->u.deque.maxlen)->u.cnst.value
                                                          : Py_None, NULL);
    Py_DECREF(items);
    if (r == NULL) {
        PyErr_Clear();
    }
    return r;
}

const cdyn_vtable cdyn_deque_vt = {
    .name = "DequeVariable",
    .getattr = deque_getattr,
    .call_method = deque_call_method,
    .truth = deque_truth,
    .unpack = deque_unpack,
    .subscr = deque_subscr,
    .store_subscr = deque_store_subscr,
    .delete_subscr = deque_delete_subscr,
    .contains = deque_contains,
    .binop = deque_binop,
    .compare = deque_compare,
    .len = deque_len,
    .python_type = deque_python_type,
    .collect = deque_collect,
    .reconstruct = deque_reconstruct,
    .writeback = deque_writeback,
    .as_constant = deque_as_constant,
};
