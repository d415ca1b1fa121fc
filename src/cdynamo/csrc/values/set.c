/* values/set.c: sets and frozensets.
 *
 * A set value keeps its items' hash keys (tx.h) in u.set.order, a real set (or frozenset)
 * that mirrors the real one: every operation is applied to it as Python applies it to the
 * real set (the same algorithm on objects of the same hashes), so the mirror iterates in
 * the real set's order. u.set.map maps each hash key to the item's value. The order is
 * certain only when every hash key hashes as its real item does (no tensors or functions
 * made in the trace) and the set does not derive from an input set (SET_INEXACT: an input
 * set's table layout is not reproduced); an operation that depends on the order (iteration,
 * pop) is unsupported otherwise, anything else (membership, len, set algebra) is exact.
 *
 * An input set (read through a source) is wrapped lazily; on first use its items (constants
 * or objects compared by identity) are pinned by a DICT_KEYS guard on its iteration order,
 * which its own iteration follows while it is not mutated. Mutations of an input set are
 * written back (SEQ_SYNCED, EFF_SYNC). */
#include "../tx.h"
#include "../codegen.h"

static PyObject *fn_set_clear, *fn_set_update;

static PyObject *order(PyObject *s) { return V(s)->u.set.order; }
static PyObject *smap(PyObject *s) { return V(s)->u.set.map; }

static int
is_set(PyObject *v)
{
    return V(v)->kind == VK_SET || V(v)->kind == VK_FROZENSET;
}

/* New set value of kind over (order, map), both stolen (NULL passes through). */
static PyObject *
new_set(cdyn_vkind kind, PyObject *ord, PyObject *map, unsigned bits)
{
    PyObject *s = NULL;
    if (ord != NULL && map != NULL) {
        s = cdyn_value_alloc(kind, NULL);
    }
    if (s == NULL) {
        Py_XDECREF(ord);
        Py_XDECREF(map);
        return NULL;
    }
    V(s)->u.set.order = ord;
    V(s)->u.set.map = map;
    V(s)->bits = bits & SET_INEXACT;
    return s;
}

/* The item value for hash key h (new ref), from the maps in `maps` (a NULL-terminated array
 * of dicts): a constant item is the very object h (the one the real set kept). */
static PyObject *
item_of(PyObject *h, PyObject *const *maps)
{
    for (int i = 0; maps[i] != NULL; i++) {
        PyObject *v = PyDict_GetItemWithError(maps[i], h);
        if (v != NULL) {
            if (V(v)->kind == VK_CONST && V(v)->u.cnst.value != h) {
                return cdyn_value_const(h);
            }
            return Py_NewRef(v);
        }
        if (PyErr_Occurred()) {
            return NULL;
        }
    }
    return cdyn_value_const(h);
}

/* A new map: hash key -> value for every hash key of ord, taken from maps. */
static PyObject *
map_for(PyObject *ord, PyObject *const *maps)
{
    PyObject *m = PyDict_New(), *it = m ? PyObject_GetIter(ord) : NULL, *h;
    while (it != NULL && (h = PyIter_Next(it)) != NULL) {
        PyObject *v = item_of(h, maps);
        int e = v == NULL || PyDict_SetItem(m, h, v) < 0;
        Py_XDECREF(v);
        Py_DECREF(h);
        if (e) {
            Py_CLEAR(m);
            break;
        }
    }
    Py_XDECREF(it);
    if (PyErr_Occurred()) {
        Py_CLEAR(m);
    }
    return m;
}

/* 1 when v is an input set (its table is the real one, not reproduced). */
static int
is_input(PyObject *v)
{
    return V(v)->kind == VK_SET && V(v)->source != NULL;
}

/* ---- operands: what the real operation would take, as hash keys ------------------------- */

typedef struct {
    PyObject *real;   /* the mirror operand: a set/frozenset of hash keys, a dict of them, or
                         a list of them (as the real operand is a set, a dict, or another
                         iterable: each takes its own path in CPython) */
    PyObject *map;    /* hash key -> item value */
    int inexact;      /* derived from an input set */
    int setlike;      /* a set or frozenset (allowed in operators) */
} operand;

static void
operand_clear(operand *o)
{
    Py_CLEAR(o->real);
    Py_CLEAR(o->map);
}

/* Hash keys of a list of values: a new list, and new entries in map (first kept). */
static tr_status
hash_items(cdyn_tx *tx, PyObject *items, PyObject *map, PyObject **out)
{
    PyObject *hl = PyList_New(PyList_GET_SIZE(items));
    if (hl == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *h = NULL;
        tr_status st = cdyn_hash_key(tx, PyList_GET_ITEM(items, i), &h);
        if (st != TR_OK) {
            Py_DECREF(hl);
            return st;
        }
        PyList_SET_ITEM(hl, i, h);
        if (PyDict_SetDefault(map, h, PyList_GET_ITEM(items, i)) == NULL) {
            Py_DECREF(hl);
            return TR_ERROR;
        }
    }
    *out = hl;
    return TR_OK;
}

static tr_status
operand_of(cdyn_tx *tx, PyObject *v, operand *o)
{
    PyObject *items = NULL, *hl = NULL, *real = cdyn_v_real(v);
    tr_status st = cdyn_tx_materialize(tx, v);
    memset(o, 0, sizeof(*o));
    if (st != TR_OK) {
        return st;
    }
    if (is_set(v)) {
        o->real = Py_NewRef(order(v));
        o->map = Py_NewRef(smap(v));
        o->inexact = (V(v)->bits & SET_INEXACT) || is_input(v);
        o->setlike = 1;
        return TR_OK;
    }
    o->map = PyDict_New();
    if (o->map == NULL) {
        return TR_ERROR;
    }
    if (V(v)->kind == VK_CONST && PyAnySet_Check(real)) {
        /* a constant set: its items are their own hash keys */
        PyObject *it = PyObject_GetIter(real), *x;
        while (it != NULL && (x = PyIter_Next(it)) != NULL) {
            PyObject *c = cdyn_value_const(x);
            int e = c == NULL || PyDict_SetItem(o->map, x, c) < 0;
            Py_XDECREF(c);
            Py_DECREF(x);
            if (e) {
                break;
            }
        }
        Py_XDECREF(it);
        if (PyErr_Occurred()) {
            operand_clear(o);
            return TR_ERROR;
        }
        o->real = Py_NewRef(real);
        o->setlike = 1;
        return TR_OK;
    }
    st = cdyn_v_unpack(tx, v, &items);
    if (st == TR_OK) {
        st = hash_items(tx, items, o->map, &hl);
    }
    Py_XDECREF(items);
    if (st == TR_OK && V(v)->kind == VK_DICT) {
        o->real = PyDict_New();   /* a dict takes CPython's dict path (presized) */
        for (Py_ssize_t i = 0; o->real && i < PyList_GET_SIZE(hl); i++) {
            if (PyDict_SetItem(o->real, PyList_GET_ITEM(hl, i), Py_None) < 0) {
                Py_CLEAR(o->real);
            }
        }
        Py_DECREF(hl);
        st = o->real ? TR_OK : TR_ERROR;
    }
    else if (st == TR_OK) {
        o->real = hl;
    }
    if (st != TR_OK) {
        operand_clear(o);
    }
    return st;
}

/* Operands of every value in args; *n set on success (caller clears them). */
static tr_status
operands_of(cdyn_tx *tx, PyObject *const *args, Py_ssize_t nargs, operand *ops)
{
    for (Py_ssize_t i = 0; i < nargs; i++) {
        tr_status st = operand_of(tx, args[i], &ops[i]);
        if (st != TR_OK) {
            for (Py_ssize_t k = 0; k < i; k++) {
                operand_clear(&ops[k]);
            }
            return st;
        }
    }
    return TR_OK;
}

/* ---- construction -------------------------------------------------------------------------- */

tr_status
cdyn_set_build(cdyn_tx *tx, cdyn_vkind kind, PyObject *items, PyObject **out)
{
    PyObject *map = PyDict_New(), *hl = NULL, *ord = NULL;
    tr_status st = map ? hash_items(tx, items, map, &hl) : TR_ERROR;
    if (st == TR_OK) {
        ord = PySet_New(NULL);   /* BUILD_SET adds one item at a time */
        for (Py_ssize_t i = 0; ord && i < PyList_GET_SIZE(hl); i++) {
            if (PySet_Add(ord, PyList_GET_ITEM(hl, i)) < 0) {
                Py_CLEAR(ord);
            }
        }
        if (ord != NULL && kind == VK_FROZENSET) {
            Py_SETREF(ord, PyFrozenSet_New(ord));
        }
        st = ord ? TR_OK : TR_ERROR;
    }
    Py_XDECREF(hl);
    if (st != TR_OK) {
        Py_XDECREF(map);
        return st;
    }
    *out = new_set(kind, ord, map, 0);
    return *out ? TR_OK : TR_ERROR;
}

tr_status
cdyn_set_construct(cdyn_tx *tx, cdyn_vkind kind, PyObject *const *args, Py_ssize_t npos,
                   PyObject *kwnames, PyObject **out)
{
    operand o;
    PyObject *ord = NULL, *maps[2] = {NULL, NULL};
    tr_status st;
    if (kwnames != NULL || npos > 1) {
        return cdyn_tx_unsupported(tx, "set() with these arguments");
    }
    if (npos == 0) {
        ord = kind == VK_SET ? PySet_New(NULL) : PyFrozenSet_New(NULL);
        *out = new_set(kind, ord, PyDict_New(), 0);
        return *out ? TR_OK : TR_ERROR;
    }
    st = operand_of(tx, args[0], &o);
    if (st != TR_OK) {
        return st;
    }
    ord = kind == VK_SET ? PySet_New(o.real) : PyFrozenSet_New(o.real);
    maps[0] = o.map;
    *out = ord ? new_set(kind, ord, map_for(ord, maps), o.inexact ? SET_INEXACT : 0) : NULL;
    operand_clear(&o);
    return *out ? TR_OK : TR_ERROR;
}

tr_status
cdyn_set_construct_real(cdyn_tx *tx, PyObject *obj, PyObject **out)
{
    PyObject *items = PyList_New(0), *it = PyObject_GetIter(obj), *x;
    tr_status st = items && it ? TR_OK : TR_ERROR;
    while (st == TR_OK && (x = PyIter_Next(it)) != NULL) {
        PyObject *v = NULL;
        st = cdyn_is_tensor(x) ? cdyn_tx_unsupported(tx, "a set of tensors read without a source")
                               : cdyn_tx_wrap_real(tx, x, NULL, &v);
        if (st == TR_OK && PyList_Append(items, v) < 0) {
            st = TR_ERROR;
        }
        Py_XDECREF(v);
        Py_DECREF(x);
    }
    if (st == TR_OK && PyErr_Occurred()) {
        st = TR_ERROR;
    }
    Py_XDECREF(it);
    if (st == TR_OK) {
        st = cdyn_set_build(tx, VK_SET, items, out);
    }
    Py_XDECREF(items);
    return st;
}

tr_status
cdyn_set_materialize(cdyn_tx *tx, PyObject *v)
{
    cdyn_value *x = V(v);
    PyObject *real = x->u.set.real, *kt = NULL, *map = NULL, *ord = NULL;
    tr_status st = TR_ERROR;
    kt = PySequence_Tuple(real);
    if (kt == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kt); i++) {
        PyObject *e = PyTuple_GET_ITEM(kt, i);
        if (!cdyn_pinnable_key(e)) {
            st = cdyn_tx_unsupported(tx, "input set with an item of type %s", Py_TYPE(e)->tp_name);
            goto done;
        }
    }
    if (cdyn_guards_add_keys(tx->guards, x->source, kt) < 0 || (map = PyDict_New()) == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kt); i++) {
        PyObject *w = NULL;
        st = cdyn_tx_wrap_real(tx, PyTuple_GET_ITEM(kt, i), NULL, &w);
        if (st == TR_OK && PyDict_SetItem(map, PyTuple_GET_ITEM(kt, i), w) < 0) {
            st = TR_ERROR;
        }
        Py_XDECREF(w);
        if (st != TR_OK) {
            goto done;
        }
    }
    st = TR_ERROR;
    ord = PySet_New(kt);
    if (ord == NULL) {
        goto done;
    }
    x->u.set.order = ord;
    x->u.set.map = map;
    map = NULL;
    x->bits &= ~SEQ_LAZY;
    st = TR_OK;
done:
    Py_XDECREF(kt);
    Py_XDECREF(map);
    return st;
}

/* ---- iteration order -------------------------------------------------------------------------- */

/* The items of s in the real set's iteration order (a new list of values), or
 * TR_UNSUPPORTED when that order is not known at trace time. */
static tr_status
ordered_items(cdyn_tx *tx, PyObject *s, PyObject **out)
{
    PyObject *src = order(s), *it, *h, *l, *maps[2] = {smap(s), NULL};
    if (is_input(s) && !(V(s)->bits & SEQ_SYNCED)) {
        src = V(s)->u.set.real;   /* its order is the one the DICT_KEYS guard pinned */
    }
    else if (PySet_GET_SIZE(order(s)) > 1) {
        int known = !(V(s)->bits & SET_INEXACT) && !is_input(s);
        Py_ssize_t pos = 0;
        Py_hash_t hash;
        while (known && _PySet_NextEntry(order(s), &pos, &h, &hash)) {
            known = cdyn_hash_key_is_real(h);
        }
        if (!known) {
            return cdyn_tx_unsupported(tx, "iteration order of a set of tensors (or derived from "
                                           "an input set) is not known while tracing");
        }
    }
    l = PyList_New(0);
    it = l ? PyObject_GetIter(src) : NULL;
    while (it != NULL && (h = PyIter_Next(it)) != NULL) {
        PyObject *v = item_of(h, maps);
        int e = v == NULL || PyList_Append(l, v) < 0;
        Py_XDECREF(v);
        Py_DECREF(h);
        if (e) {
            break;
        }
    }
    Py_XDECREF(it);
    if (l == NULL || PyErr_Occurred()) {
        Py_XDECREF(l);
        return TR_ERROR;
    }
    *out = l;
    return TR_OK;
}

/* ---- mutation ----------------------------------------------------------------------------------- */

/* After an in-place change of order(s): keep map to the current items, values from s's
 * map then from extra (a NULL-terminated array of at most 8 maps, or NULL). 0 / -1. */
static int
refresh_map(PyObject *s, PyObject *const *extra)
{
    PyObject *maps[10] = {smap(s), NULL}, *m;
    for (int i = 0; extra != NULL && extra[i] != NULL && i < 8; i++) {
        maps[i + 1] = extra[i];
        maps[i + 2] = NULL;
    }
    m = map_for(order(s), maps);
    if (m == NULL) {
        return -1;
    }
    Py_SETREF(V(s)->u.set.map, m);
    return 0;
}

tr_status
cdyn_set_add_op(cdyn_tx *tx, PyObject *s, PyObject *item)
{
    PyObject *h = NULL;
    tr_status st;
    if (V(s)->kind != VK_SET) {
        return cdyn_tx_unsupported(tx, "add to %S", s);
    }
    st = cdyn_tx_materialize(tx, s);
    if (st == TR_OK) {
        st = cdyn_hash_key(tx, item, &h);
    }
    if (st == TR_OK) {
        st = cdyn_container_mutating(tx, s);
    }
    if (st == TR_OK && (PySet_Add(order(s), h) < 0 || PyDict_SetDefault(smap(s), h, item) == NULL)) {
        st = TR_ERROR;
    }
    Py_XDECREF(h);
    return st;
}

/* s.<method>(*args) applied in place on the mirror (update, intersection_update, ...). */
static tr_status
inplace_method(cdyn_tx *tx, PyObject *s, const char *method, PyObject *const *args,
               Py_ssize_t nargs)
{
    operand ops[8];
    PyObject *meth = NULL, *reals[8], *maps[9], *r = NULL;
    tr_status st;
    int inexact = 0;
    if (nargs > 8) {
        return cdyn_tx_unsupported(tx, "set.%s with %zd arguments", method, nargs);
    }
    st = operands_of(tx, args, nargs, ops);
    if (st != TR_OK) {
        return st;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        reals[i] = ops[i].real;
        inexact |= ops[i].inexact;
    }
    st = cdyn_container_mutating(tx, s);
    meth = st == TR_OK ? PyObject_GetAttrString(order(s), method) : NULL;
    r = meth ? PyObject_Vectorcall(meth, reals, nargs, NULL) : NULL;
    if (st == TR_OK && r == NULL) {
        st = TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        maps[i] = ops[i].map;
    }
    maps[nargs] = NULL;
    if (st == TR_OK && refresh_map(s, maps) < 0) {
        st = TR_ERROR;
    }
    if (inexact || is_input(s)) {
        V(s)->bits |= SET_INEXACT;
    }
    Py_XDECREF(meth);
    Py_XDECREF(r);
    for (Py_ssize_t i = 0; i < nargs; i++) {
        operand_clear(&ops[i]);
    }
    return st;
}

tr_status
cdyn_set_update_op(cdyn_tx *tx, PyObject *s, PyObject *iterable)
{
    if (V(s)->kind != VK_SET) {
        return cdyn_tx_unsupported(tx, "update of %S", s);
    }
    return inplace_method(tx, s, "update", &iterable, 1);
}

/* A new set value: the real method `method` of the mirror applied to the operands. */
static tr_status
new_from_method(cdyn_tx *tx, PyObject *s, const char *method, PyObject *const *args,
                Py_ssize_t nargs, PyObject **out)
{
    operand ops[8];
    PyObject *meth = NULL, *reals[8], *maps[10], *r = NULL;
    tr_status st;
    int inexact = (V(s)->bits & SET_INEXACT) || is_input(s);
    if (nargs > 8) {
        return cdyn_tx_unsupported(tx, "set.%s with %zd arguments", method, nargs);
    }
    st = operands_of(tx, args, nargs, ops);
    if (st != TR_OK) {
        return st;
    }
    maps[0] = smap(s);
    for (Py_ssize_t i = 0; i < nargs; i++) {
        reals[i] = ops[i].real;
        maps[i + 1] = ops[i].map;
        inexact |= ops[i].inexact;
    }
    maps[nargs + 1] = NULL;
    meth = PyObject_GetAttrString(order(s), method);
    r = meth ? PyObject_Vectorcall(meth, reals, nargs, NULL) : NULL;
    if (r == NULL) {
        st = TR_ERROR;
    }
    else if (PyBool_Check(r)) {
        *out = cdyn_value_bool(r == Py_True);
    }
    else {
        *out = new_set(PySet_Check(r) ? VK_SET : VK_FROZENSET, Py_NewRef(r), map_for(r, maps),
                       inexact ? SET_INEXACT : 0);
    }
    if (st == TR_OK && *out == NULL) {
        st = TR_ERROR;
    }
    Py_XDECREF(meth);
    Py_XDECREF(r);
    for (Py_ssize_t i = 0; i < nargs; i++) {
        operand_clear(&ops[i]);
    }
    return st;
}

/* set.isdisjoint(it) / set.issuperset(it) with an iterator (a generator): its items taken
 * one by one and the answer given where CPython gives it (the first item in / not in the
 * set), so the iterator is left as far advanced as in eager, its side effects run as far. */
static tr_status
test_items_lazily(cdyn_tx *tx, PyObject *s, int disjoint, PyObject *it, PyObject **out)
{
    for (;;) {
        PyObject *item = NULL, *h = NULL;
        int present;
        tr_status st = cdyn_v_next(tx, it, &item);
        if (st != TR_OK) {
            return st;
        }
        if (item == NULL) {
            *out = cdyn_value_bool(1);
            break;
        }
        st = cdyn_hash_key(tx, item, &h);
        Py_DECREF(item);
        if (st != TR_OK) {
            return st;
        }
        present = PySet_Contains(order(s), h);
        Py_DECREF(h);
        if (present < 0) {
            return TR_ERROR;
        }
        if (present == disjoint) {
            *out = cdyn_value_bool(0);
            break;
        }
    }
    return *out != NULL ? TR_OK : TR_ERROR;
}

/* ---- the family table ---------------------------------------------------------------------- */

static tr_status
set_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyTypeObject *t = V(v)->kind == VK_SET ? &PySet_Type : &PyFrozenSet_Type;
    return cdyn_container_getattr(tx, v, t, name, out);
}

/* add / discard / remove / pop / clear. */
/* The hash key `item in s`, s.discard(item) and s.remove(item) look up: a set (or a set
 * subclass's items) as the frozenset of its items, as CPython's set does for an unhashable
 * set key; any other item's own (cdyn_hash_key). *h new. */
static tr_status
lookup_key(cdyn_tx *tx, PyObject *item, PyObject **h)
{
    PyObject *b = cdyn_newobj_has_items(item) ? V(item)->u.uobj.base : item;
    if (V(b)->kind == VK_SET) {
        tr_status st = cdyn_tx_materialize(tx, b);
        if (st != TR_OK) {
            return st;
        }
        *h = PyFrozenSet_New(order(b));
        return *h ? TR_OK : TR_ERROR;
    }
    return cdyn_hash_key(tx, item, h);
}

static tr_status
set_item_method(cdyn_tx *tx, PyObject *s, PyObject *name, PyObject *const *args,
                Py_ssize_t nargs, PyObject **out)
{
    PyObject *h = NULL, *maps[2] = {smap(s), NULL};
    tr_status st = TR_OK;
    int present;
    if (cdyn_name_is(name, "add") && nargs == 1) {
        st = cdyn_set_add_op(tx, s, args[0]);
    }
    else if ((cdyn_name_is(name, "discard") || cdyn_name_is(name, "remove")) && nargs == 1) {
        st = lookup_key(tx, args[0], &h);
        present = st == TR_OK ? PySet_Contains(order(s), h) : 0;
        if (present < 0) {
            st = TR_ERROR;
        }
        else if (st == TR_OK && !present && cdyn_name_is(name, "remove")) {
            st = cdyn_tx_raise(tx, PyExc_KeyError, args, 1);   /* KeyError(item), as CPython */
        }
        else if (st == TR_OK && present) {
            st = cdyn_container_mutating(tx, s);
            if (st == TR_OK && (PySet_Discard(order(s), h) < 0 ||
                                PyDict_DelItem(smap(s), h) < 0)) {
                st = TR_ERROR;
            }
        }
        Py_XDECREF(h);
    }
    else if (cdyn_name_is(name, "pop") && nargs == 0) {
        PyObject *items = NULL;
        if (PySet_GET_SIZE(order(s)) == 0) {
            return cdyn_tx_unsupported(tx, "pop from an empty set (KeyError)");
        }
        st = ordered_items(tx, s, &items);   /* refuses an unknown order */
        Py_XDECREF(items);
        if (st == TR_OK && is_input(s) && !(V(s)->bits & SEQ_SYNCED)) {
            st = cdyn_tx_unsupported(tx, "pop of an input set");
        }
        if (st == TR_OK) {
            st = cdyn_container_mutating(tx, s);
        }
        h = st == TR_OK ? PySet_Pop(order(s)) : NULL;
        if (st == TR_OK && h == NULL) {
            st = TR_ERROR;
        }
        if (st == TR_OK) {
            *out = item_of(h, maps);
            st = *out && PyDict_DelItem(smap(s), h) == 0 ? TR_OK : TR_ERROR;
        }
        Py_XDECREF(h);
        return st;
    }
    else if (cdyn_name_is(name, "clear") && nargs == 0) {
        st = cdyn_container_mutating(tx, s);
        if (st == TR_OK && PySet_Clear(order(s)) < 0) {
            st = TR_ERROR;
        }
        if (st == TR_OK) {
            PyDict_Clear(smap(s));
        }
    }
    else {
        return cdyn_tx_unsupported(tx, "method %U of %S", name, s);
    }
    *out = st == TR_OK ? cdyn_value_const(Py_None) : NULL;
    return st == TR_OK && *out == NULL ? TR_ERROR : st;
}

static tr_status set_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *name,
                                 PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                                 PyObject **out);

/* s.__init__() / s.__init__(iterable), called directly: a set is emptied, then updated from
 * the iterable, as set.__init__ does; a frozenset's is object.__init__, which changes
 * nothing (its items were fixed by __new__). */
static tr_status
init_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *const *args, Py_ssize_t nargs,
            PyObject **out)
{
    PyObject *clear = NULL, *update = NULL, *r = NULL;
    tr_status st;
    if (V(v)->kind != VK_SET) {
        *out = cdyn_value_const(Py_None);
        return *out ? TR_OK : TR_ERROR;
    }
    clear = PyUnicode_InternFromString("clear");
    update = clear ? PyUnicode_InternFromString("update") : NULL;
    st = update ? set_call_method(tx, fs, v, clear, NULL, 0, NULL, &r) : TR_ERROR;
    Py_CLEAR(r);
    if (st == TR_OK && nargs == 1) {
        st = set_call_method(tx, fs, v, update, args, 1, NULL, &r);
        Py_CLEAR(r);
    }
    Py_XDECREF(clear);
    Py_XDECREF(update);
    if (st == TR_OK) {
        *out = cdyn_value_const(Py_None);
        st = *out ? TR_OK : TR_ERROR;
    }
    return st;
}

static tr_status
set_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *name, PyObject *const *args,
                Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    static const char *const derived[] = {"union", "intersection", "difference",
                                           "symmetric_difference", "issubset", "issuperset",
                                           "isdisjoint", "copy", NULL};
    static const char *const inplace[] = {"update", "intersection_update", "difference_update",
                                          "symmetric_difference_update", NULL};
    const char *nm = PyUnicode_AsUTF8(name);
    tr_status st;
    (void)fs;
    if (nm == NULL) {
        return TR_ERROR;
    }
    if (kwnames != NULL) {
        return cdyn_tx_unsupported(tx, "keyword arguments to set.%U", name);
    }
    if (nargs != 1 &&
        (strcmp(nm, "isdisjoint") == 0 || strcmp(nm, "issubset") == 0 ||
         strcmp(nm, "issuperset") == 0 || strncmp(nm, "symmetric_difference", 20) == 0)) {
        /* (the traced program gets the real TypeError: value.c raise_as_real) */
        return cdyn_tx_unsupported(tx, "set.%U with %zd arguments", name, nargs);
    }
    if (nargs != 0 && strcmp(nm, "copy") == 0) {
        return cdyn_tx_unsupported(tx, "set.copy with arguments");
    }
    if (strcmp(nm, "__init__") == 0 && nargs <= 1) {
        return init_method(tx, fs, v, args, nargs, out);
    }
    st = cdyn_tx_materialize(tx, v);
    if (st != TR_OK) {
        return st;
    }
    if ((strcmp(nm, "isdisjoint") == 0 || strcmp(nm, "issuperset") == 0) && nargs == 1 &&
        cdyn_v_is_iterator(args[0])) {
        return test_items_lazily(tx, v, nm[2] == 'd', args[0], out);
    }
    for (int i = 0; derived[i]; i++) {
        if (strcmp(nm, derived[i]) == 0) {
            return new_from_method(tx, v, nm, args, nargs, out);
        }
    }
    if (V(v)->kind != VK_SET) {
        return cdyn_tx_unsupported(tx, "method %U of a frozenset", name);
    }
    for (int i = 0; inplace[i]; i++) {
        if (strcmp(nm, inplace[i]) == 0) {
            st = inplace_method(tx, v, nm, args, nargs);
            *out = st == TR_OK ? cdyn_value_const(Py_None) : NULL;
            return st == TR_OK && *out == NULL ? TR_ERROR : st;
        }
    }
    return set_item_method(tx, v, name, args, nargs, out);
}

static tr_status
set_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    (void)tx;
    *out = PySet_GET_SIZE(order(v)) > 0;
    return TR_OK;
}

static tr_status
set_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    return ordered_items(tx, v, out_list);
}

static tr_status
set_contains(cdyn_tx *tx, PyObject *v, PyObject *item, int *out)
{
    PyObject *h = NULL;
    tr_status st = lookup_key(tx, item, &h);   /* (a set: as the frozenset of its items) */
    if (st != TR_OK) {
        return st;
    }
    *out = PySet_Contains(order(v), h);
    Py_DECREF(h);
    return *out < 0 ? TR_ERROR : TR_OK;
}

static tr_status
set_len(cdyn_tx *tx, PyObject *v, Py_ssize_t *out)
{
    (void)tx;
    *out = PySet_GET_SIZE(order(v));
    return TR_OK;
}

/* 1 when v can be an operand of a set operator (a set value or a constant set). */
static int
set_operand(PyObject *v)
{
    PyObject *r = cdyn_v_real(v);
    return is_set(v) || (V(v)->kind == VK_CONST && PyAnySet_Check(r));
}

/* & | - ^ and their in-place forms. */
static tr_status
set_binop(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    int opb = op >= 13 ? op - 13 : op;
    operand oa, ob;
    PyObject *r = NULL, *maps[3];
    tr_status st;
    if ((opb != 1 && opb != 7 && opb != 10 && opb != 12) || !set_operand(a) || !set_operand(b)) {
        return TR_NOTIMPL;
    }
    if ((st = operand_of(tx, a, &oa)) != TR_OK) {
        return st;
    }
    if ((st = operand_of(tx, b, &ob)) != TR_OK) {
        operand_clear(&oa);
        return st;
    }
    maps[0] = oa.map;
    maps[1] = ob.map;
    maps[2] = NULL;
    if (op >= 13 && V(a)->kind == VK_SET) {
        /* s |= t: in place */
        st = cdyn_container_mutating(tx, a);
        /* operator.ior(order(a), ...) and friends mutate the mirror itself */
        r = st == TR_OK ? PyObject_CallFunctionObjArgs(cdyn_G.binop_fns[op], oa.real, ob.real, NULL)
                        : NULL;
        if (st == TR_OK && (r == NULL || refresh_map(a, maps + 1) < 0)) {
            st = TR_ERROR;
        }
        if (st == TR_OK && (ob.inexact || is_input(a))) {
            V(a)->bits |= SET_INEXACT;
        }
        *out = st == TR_OK ? Py_NewRef(a) : NULL;
    }
    else {
        r = PyObject_CallFunctionObjArgs(cdyn_G.binop_fns[opb], oa.real, ob.real, NULL);
        *out = r ? new_set(PySet_Check(r) ? VK_SET : VK_FROZENSET, Py_NewRef(r), map_for(r, maps),
                           oa.inexact || ob.inexact ? SET_INEXACT : 0)
                 : NULL;
        st = *out ? TR_OK : TR_ERROR;
    }
    Py_XDECREF(r);
    operand_clear(&oa);
    operand_clear(&ob);
    return st;
}

/* < <= == != > >= between sets (subset order). */
static tr_status
set_compare(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    operand oa, ob;
    int r;
    tr_status st;
    if (!set_operand(a) || !set_operand(b)) {
        PyObject *other = is_set(a) ? b : a;
        cdyn_vkind k = V(other)->kind;
        if ((op == Py_EQ || op == Py_NE) && !set_operand(other) &&
            (k == VK_CONST || k == VK_TUPLE || k == VK_LIST || k == VK_DICT)) {
            *out = cdyn_value_bool(op == Py_NE);   /* a set never equals these */
            return *out ? TR_OK : TR_ERROR;
        }
        return TR_NOTIMPL;
    }
    if ((st = operand_of(tx, a, &oa)) != TR_OK) {
        return st;
    }
    if ((st = operand_of(tx, b, &ob)) != TR_OK) {
        operand_clear(&oa);
        return st;
    }
    r = PyObject_RichCompareBool(oa.real, ob.real, op);
    operand_clear(&oa);
    operand_clear(&ob);
    if (r < 0) {
        return TR_ERROR;
    }
    *out = cdyn_value_bool(r);
    return *out ? TR_OK : TR_ERROR;
}

static PyTypeObject *
set_python_type(PyObject *v)
{
    return V(v)->kind == VK_SET ? &PySet_Type : &PyFrozenSet_Type;
}

static PyObject *
set_as_constant(PyObject *v)
{
    PyObject *list = NULL, *it, *h, *r = NULL, *maps[2] = {smap(v), NULL};
    if (V(v)->bits & SEQ_LAZY) {
        return NULL;
    }
    list = PyList_New(0);
    it = list ? PyObject_GetIter(order(v)) : NULL;
    while (it != NULL && (h = PyIter_Next(it)) != NULL) {
        /* an item that is a constant, or a tuple of constants made in the trace
           (set(d.items())) */
        PyObject *item = item_of(h, maps), *c = item ? cdyn_v_as_constant(item) : NULL;
        int e = c == NULL || !cdyn_hash_key_is_real(h) || PyList_Append(list, c) < 0;
        Py_XDECREF(c);
        Py_XDECREF(item);
        Py_DECREF(h);
        if (e) {
            Py_CLEAR(list);
            break;
        }
    }
    Py_XDECREF(it);
    if (list != NULL && !PyErr_Occurred()) {
        /* every hash key is its item's constant: a copy of the set of them, which keeps its
           table (and so the order it iterates in: a set made again from a list of its items
           may not, when hashes collide) */
        r = V(v)->kind == VK_SET ? PySet_New(order(v)) : PyFrozenSet_New(order(v));
    }
    Py_XDECREF(list);
    return r;
}

static tr_status
set_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    PyObject *k, *item;
    Py_ssize_t pos = 0;
    if (V(v)->source != NULL && !(V(v)->bits & SEQ_SYNCED)) {
        return TR_OK;
    }
    while (PyDict_Next(smap(v), &pos, &k, &item)) {
        tr_status st = cdyn_cg_collect(tx, cg, item);
        if (st != TR_OK) {
            return st;
        }
    }
    return TR_OK;
}

/* Push the items (any order: the real set orders them by their real hashes), BUILD_SET. */
static int
emit_items(cdyn_cg *cg, PyObject *v)
{
    PyObject *k, *item;
    Py_ssize_t pos = 0;
    while (PyDict_Next(smap(v), &pos, &k, &item)) {
        if (cdyn_cg_value(cg, item) < 0) {
            return -1;
        }
    }
    return cdyn_cg_emit(cg, BUILD_SET, (int)PyDict_GET_SIZE(smap(v)));
}

static int
set_reconstruct(cdyn_cg *cg, PyObject *v)
{
    int r;
    if (V(v)->source != NULL) {
        return cdyn_cg_source(cg, V(v)->source);
    }
    r = cdyn_cg_memo_load(cg, v);
    if (r != 0) {
        return r < 0 ? -1 : 0;
    }
    if (V(v)->kind == VK_FROZENSET) {
        if (cdyn_cg_push_callable(cg, (PyObject *)&PyFrozenSet_Type) < 0 || emit_items(cg, v) < 0 ||
            cdyn_cg_call(cg, 1) < 0) {
            return -1;
        }
    }
    else if (emit_items(cg, v) < 0) {
        return -1;
    }
    return cdyn_cg_memo_store(cg, v, "obj");
}

/* set.clear(target); set.update(target, <items>). */
static int
set_writeback(cdyn_cg *cg, PyObject *v)
{
    if (fn_set_clear == NULL) {
        fn_set_clear = PyObject_GetAttrString((PyObject *)&PySet_Type, "clear");
        fn_set_update = PyObject_GetAttrString((PyObject *)&PySet_Type, "update");
        if (fn_set_clear == NULL || fn_set_update == NULL) {
            Py_CLEAR(fn_set_clear);
            return -1;
        }
    }
    if (emit_items(cg, v) < 0 || cdyn_cg_push_callable(cg, fn_set_clear) < 0 ||
        cdyn_cg_value(cg, v) < 0 || cdyn_cg_call(cg, 1) < 0 ||
        cdyn_cg_emit(cg, POP_TOP, 0) < 0 || cdyn_cg_push_callable(cg, fn_set_update) < 0 ||
        cdyn_cg_value(cg, v) < 0 || cdyn_cg_emit(cg, COPY, 4) < 0 ||
        cdyn_cg_call(cg, 2) < 0 || cdyn_cg_emit(cg, POP_TOP, 0) < 0) {
        return -1;
    }
    return cdyn_cg_emit(cg, POP_TOP, 0);
}

/* Undo (undo.c): the mirror and the map of a set (the input set a lazy one stands for is
 * the program's, never written while tracing). */
static PyObject *
set_save(PyObject *v)
{
    return Py_BuildValue("(NN)", cdyn_undo_copy(order(v)), cdyn_undo_copy(smap(v)));
}

static int
set_restore(PyObject *v, PyObject *saved)
{
    return cdyn_undo_refill(order(v), PyTuple_GET_ITEM(saved, 0)) < 0 ||
                   cdyn_undo_refill(smap(v), PyTuple_GET_ITEM(saved, 1)) < 0
               ? -1 : 0;
}

const cdyn_vtable cdyn_set_vt = {
    .name = "SetVariable",
    .getattr = set_getattr,
    .call_method = set_call_method,
    .truth = set_truth,
    .unpack = set_unpack,
    .contains = set_contains,
    .binop = set_binop,
    .compare = set_compare,
    .len = set_len,
    .python_type = set_python_type,
    .collect = set_collect,
    .reconstruct = set_reconstruct,
    .writeback = set_writeback,
    .as_constant = set_as_constant,
    .save = set_save,
    .restore = set_restore,
};
