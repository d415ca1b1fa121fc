/* values/vmap.c: torch.vmap / torch.func.vmap, traced as torch._dynamo traces them: the
 * vmapped function is inlined into the current graph between functorch's own primitives,
 * which run at trace time too (so the fake tensors inside are BatchedTensors):
 *
 *   lazy_load_decompositions(); _vmap_increment_nesting(batch_size, randomness)
 *   _add_batch_dim(x, in_dim, level) for each mapped argument
 *   ... the function's operations ...
 *   _remove_batch_dim(out, level, batch_size, out_dim) for each output
 *   _vmap_decrement_nesting()
 *
 * (torch._functorch.predispatch). The level is a trace-time constant: compiled entries are
 * never used while a torch.func transform runs (guards.c), so at run time the stack starts
 * empty as it did while tracing. Supported: positional tensor arguments with in_dims an
 * int/None or a flat tuple of them, out_dims an int or a flat tuple, tensor (or tuple/list of
 * tensor) results, randomness, no chunk_size. Anything else, or a side effect inside the
 * function, makes the call a graph break (vmap runs in Python).
 *
 * A vmapped function is a HOP value with bits HOP_VMAPPED: u.ref[0] torch.vmap, u.ref[1]
 * the function value, u.ref[2] the real tuple (in_dims, out_dims, randomness).
 */
#include "hop.h"

static PyObject *fn_lazy_load, *fn_increment, *fn_decrement, *fn_add_batch_dim,
    *fn_remove_batch_dim, *empty_tuple;

/* 1 when obj is an int (not a bool) or, with allow_none, None. */
static int
is_dim(PyObject *obj, int allow_none)
{
    return (allow_none && obj == Py_None) || (PyLong_CheckExact(obj));
}

/* 1 when obj is a dim or a flat tuple of dims. */
static int
is_dims(PyObject *obj, int allow_none)
{
    if (PyTuple_CheckExact(obj)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj); i++) {
            if (!is_dim(PyTuple_GET_ITEM(obj, i), allow_none)) {
                return 0;
            }
        }
        return 1;
    }
    return is_dim(obj, allow_none);
}

/* torch.vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None): a HOP
 * value (HOP_VMAPPED) remembering the function and the (constant) configuration. */
tr_status
cdyn_vmap_make(cdyn_tx *tx, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames, PyObject **out)
{
    static const char *const names[] = {"func", "in_dims", "out_dims", "randomness",
                                        "chunk_size", NULL};
    PyObject *a[5] = {NULL, NULL, NULL, NULL, NULL}, *c[5] = {NULL, NULL, NULL, NULL, NULL};
    PyObject *zero = NULL, *error = NULL, *cfg = NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    tr_status st = TR_ERROR;
    if (npos > 5 || npos < 1) {
        return cdyn_tx_unsupported(tx, "torch.vmap: bad arguments");
    }
    for (Py_ssize_t i = 0; i < npos; i++) {
        a[i] = args[i];
    }
    for (Py_ssize_t k = 0; k < nkw; k++) {
        int j = 0;
        while (names[j] != NULL && !cdyn_name_is(PyTuple_GET_ITEM(kwnames, k), names[j])) {
            j++;
        }
        if (names[j] == NULL || a[j] != NULL) {
            return cdyn_tx_unsupported(tx, "torch.vmap: keyword argument %U",
                                       PyTuple_GET_ITEM(kwnames, k));
        }
        a[j] = args[npos + k];
    }
    for (int j = 1; j < 5; j++) {
        if (a[j] != NULL && V(a[j])->kind != VK_CONST) {
            return cdyn_tx_unsupported(tx, "torch.vmap with a non-constant %s", names[j]);
        }
        c[j] = a[j] ? V(a[j])->u.cnst.value : NULL;
    }
    if (c[4] != NULL && c[4] != Py_None) {
        return cdyn_tx_unsupported(tx, "torch.vmap with chunk_size");
    }
    if ((c[1] && !is_dims(c[1], 1)) || (c[2] && !is_dims(c[2], 0))) {
        return cdyn_tx_unsupported(tx, "torch.vmap with in_dims/out_dims that are not ints or "
                                   "flat tuples of ints");
    }
    if (c[3] && !(PyUnicode_Check(c[3]) &&
                  (cdyn_name_is(c[3], "error") || cdyn_name_is(c[3], "same") ||
                   cdyn_name_is(c[3], "different")))) {
        return cdyn_tx_unsupported(tx, "torch.vmap: randomness %R", c[3]);
    }
    zero = PyLong_FromLong(0);
    error = PyUnicode_FromString("error");
    cfg = zero && error ? PyTuple_Pack(3, c[1] ? c[1] : zero, c[2] ? c[2] : zero,
                                       c[3] ? c[3] : error)
                        : NULL;
    if (cfg != NULL && (*out = cdyn_value_alloc(VK_HOP, NULL)) != NULL) {
        V(*out)->bits = HOP_VMAPPED;
        V(*out)->u.ref[0] = Py_NewRef(V(fn)->u.obj.obj);
        V(*out)->u.ref[1] = Py_NewRef(a[0]);
        V(*out)->u.ref[2] = Py_NewRef(cfg);
        st = TR_OK;
    }
    Py_XDECREF(zero);
    Py_XDECREF(error);
    Py_XDECREF(cfg);
    return st;
}

/* The in_dim of positional argument i (borrowed int or None). */
static PyObject *
in_dim_of(PyObject *in_dims, Py_ssize_t i)
{
    return PyTuple_Check(in_dims) ? PyTuple_GET_ITEM(in_dims, i) : in_dims;
}

/* The batch size: the size of every mapped argument at its in_dim (all equal). */
static tr_status
batch_size_of(cdyn_tx *tx, PyObject *in_dims, PyObject *const *args, Py_ssize_t npos,
              long *bs)
{
    *bs = -1;
    if (PyTuple_Check(in_dims) && PyTuple_GET_SIZE(in_dims) != npos) {
        return cdyn_tx_unsupported(tx, "vmap: in_dims has %zd entries for %zd arguments",
                                   PyTuple_GET_SIZE(in_dims), npos);
    }
    for (Py_ssize_t i = 0; i < npos; i++) {
        PyObject *d = in_dim_of(in_dims, i), *shape;
        long di, nd, size;
        if (d == Py_None) {
            continue;
        }
        if (V(args[i])->kind != VK_TENSOR) {
            return cdyn_tx_unsupported(tx, "vmap over %S (only tensor arguments are traced)",
                                       args[i]);
        }
        shape = PyObject_GetAttrString(V(args[i])->u.tensor.fake, "shape");
        if (shape == NULL) {
            return TR_ERROR;
        }
        nd = (long)PyTuple_GET_SIZE(shape);
        di = PyLong_AsLong(d);
        di = di < 0 ? di + nd : di;
        size = di >= 0 && di < nd ? PyLong_AsLong(PyTuple_GET_ITEM(shape, di)) : -1;
        Py_DECREF(shape);
        if (size < 0 || (*bs >= 0 && size != *bs)) {
            PyErr_Clear();
            return cdyn_tx_unsupported(tx, "vmap: an in_dim out of range or different batch "
                                       "sizes (raised in Python)");
        }
        *bs = size;
    }
    if (*bs < 0) {
        return cdyn_tx_unsupported(tx, "vmap with no mapped argument (raised in Python)");
    }
    return TR_OK;
}

/* Call a functorch primitive for real now (its effect on the interpreter stack is needed
 * while tracing) and record it as a node. *res: new ref (the call's result). */
static tr_status
primitive(cdyn_tx *tx, PyObject *fn, PyObject *args, PyObject **res)
{
    PyObject *node = NULL;
    *res = PyObject_Call(fn, args, NULL);
    if (*res == NULL) {
        return cdyn_tx_unsupported(tx, "vmap: %R failed", fn);
    }
    if (cdyn_tx_graph_effect(tx, fn, args, &node) < 0) {
        Py_CLEAR(*res);
        return TR_ERROR;
    }
    Py_DECREF(node);
    return TR_OK;
}

/* graph_call of fn(t, *ints) on a tensor value t. */
static tr_status
call_ints(cdyn_tx *tx, PyObject *fn, PyObject *t, long a, long b, long c, int nints,
          PyObject **out)
{
    PyObject *vals[4] = {t, NULL, NULL, NULL};
    long ints[3] = {a, b, c};
    tr_status st = TR_ERROR;
    for (int i = 0; i < nints; i++) {
        vals[i + 1] = cdyn_value_const_steal(PyLong_FromLong(ints[i]));
        if (vals[i + 1] == NULL) {
            goto done;
        }
    }
    st = cdyn_tx_graph_call(tx, "call_function", fn, NULL, vals, 1 + nints, NULL, out);
done:
    for (int i = 1; i < 4; i++) {
        Py_XDECREF(vals[i]);
    }
    return st;
}

/* The out_dim of output i of n (out_dims an int, or a tuple of n ints for a flat tuple
 * result). -1 with a reason set when they do not match. */
static tr_status
out_dim_of(cdyn_tx *tx, PyObject *out_dims, PyObject *ret, Py_ssize_t i, Py_ssize_t n,
           long *od)
{
    if (PyTuple_Check(out_dims)) {
        if (V(ret)->kind == VK_TENSOR || PyTuple_GET_SIZE(out_dims) != n) {
            return cdyn_tx_unsupported(tx, "vmap: out_dims does not match the outputs");
        }
        *od = PyLong_AsLong(PyTuple_GET_ITEM(out_dims, i));
    }
    else {
        *od = PyLong_AsLong(out_dims);
    }
    return TR_OK;
}

/* Calling a vmapped function: see the file's comment. */
tr_status
cdyn_vmap_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *vf, PyObject *const *args,
               Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyObject *func = V(vf)->u.ref[1], *cfg = V(vf)->u.ref[2];
    PyObject *in_dims = PyTuple_GET_ITEM(cfg, 0), *out_dims = PyTuple_GET_ITEM(cfg, 1);
    PyObject *batched = NULL, *ret = NULL, *outs = NULL, *removed = NULL, *r = NULL, *pa = NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw, pos = 0;
    Py_ssize_t n_effects = PyList_GET_SIZE(tx->effects);
    long mutations = tx->mutations, bs, level = -1;
    long long serial = tx->ckpt_serial;
    tr_status st = batch_size_of(tx, in_dims, args, npos, &bs);
    if (st != TR_OK) {
        return st;
    }
    tx->ckpt_serial = cdyn_value_serial;   /* values made before the call are outside it */
    st = primitive(tx, fn_lazy_load, empty_tuple, &r);
    Py_CLEAR(r);
    if (st == TR_OK) {
        pa = Py_BuildValue("(lO)", bs, PyTuple_GET_ITEM(cfg, 2));
        st = pa ? primitive(tx, fn_increment, pa, &r) : TR_ERROR;
    }
    if (st != TR_OK) {
        goto done;
    }
    level = PyLong_AsLong(r);
    Py_CLEAR(r);
    st = TR_ERROR;
    if (level < 0 || (batched = PyList_New(nargs)) == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *d = i < npos ? in_dim_of(in_dims, i) : Py_None, *b = NULL;
        if (d == Py_None) {
            b = Py_NewRef(args[i]);
        }
        else if ((st = call_ints(tx, fn_add_batch_dim, args[i], PyLong_AsLong(d), level, 0, 2,
                                 &b)) != TR_OK) {
            goto done;
        }
        PyList_SET_ITEM(batched, i, b);
    }
    st = cdyn_v_call(tx, fs, func, PySequence_Fast_ITEMS(batched), nargs, kwnames, &ret);
    if (st == TR_UNSUPPORTED) {
        cdyn_hop_reason(tx, "vmap");
    }
    if (st == TR_OK) {
        st = (outs = PyList_New(0)) ? cdyn_body_flatten(tx, ret, 0, outs) : TR_ERROR;
    }
    if (st == TR_OK) {
        st = (removed = PyList_New(0)) ? TR_OK : TR_ERROR;
    }
    for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(outs); i++) {
        long od = 0;
        PyObject *t = NULL;
        st = out_dim_of(tx, out_dims, ret, i, PyList_GET_SIZE(outs), &od);
        if (st == TR_OK) {
            st = call_ints(tx, fn_remove_batch_dim, PyList_GET_ITEM(outs, i), level, bs, od, 3,
                           &t);
        }
        if (st == TR_OK && PyList_Append(removed, t) < 0) {
            st = TR_ERROR;
        }
        Py_XDECREF(t);
    }
    if (st == TR_OK) {
        level = -1;
        st = primitive(tx, fn_decrement, empty_tuple, &r);
        Py_CLEAR(r);
    }
    if (st == TR_OK && PyList_GET_SIZE(tx->effects) != n_effects) {
        if (PyList_SetSlice(tx->effects, n_effects, PyList_GET_SIZE(tx->effects), NULL) < 0) {
            st = TR_ERROR;
        }
        tx->mutations++;
    }
    if (st == TR_OK && tx->mutations != mutations) {
        st = cdyn_tx_unsupported(tx, "vmap: side effect inside the function");
    }
    if (st == TR_OK) {
        st = cdyn_body_rebuild(tx, ret, removed, &pos, out);
    }
done:
    if (level >= 0) {
        /* failed while the vmap level was pushed: pop it */
        PyObject *d = PyObject_CallNoArgs(fn_decrement);
        if (d == NULL) {
            PyErr_WriteUnraisable(NULL);
        }
        Py_XDECREF(d);
    }
    tx->ckpt_serial = serial;
    Py_XDECREF(batched);
    Py_XDECREF(ret);
    Py_XDECREF(outs);
    Py_XDECREF(removed);
    Py_XDECREF(pa);
    return st;
}

int
cdyn_vmap_init(void)
{
    static const struct { PyObject **fn; const char *name; } fns[] = {
        {&fn_lazy_load, "lazy_load_decompositions"}, {&fn_increment, "_vmap_increment_nesting"},
        {&fn_decrement, "_vmap_decrement_nesting"}, {&fn_add_batch_dim, "_add_batch_dim"},
        {&fn_remove_batch_dim, "_remove_batch_dim"},
    };
    PyObject *m = PyImport_ImportModule("torch._functorch.predispatch");
    if (m == NULL || (empty_tuple = PyTuple_New(0)) == NULL) {
        Py_XDECREF(m);
        return -1;
    }
    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        if ((*fns[i].fn = PyObject_GetAttrString(m, fns[i].name)) == NULL) {
            Py_DECREF(m);
            return -1;
        }
    }
    Py_DECREF(m);
    return 0;
}
