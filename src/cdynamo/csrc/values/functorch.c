/* values/functorch.c: torch.func transforms traced as torch._dynamo traces them.
 *
 * torch.vmap / torch.func.vmap: the
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
 * empty as it did while tracing. Supported: positional tensor arguments, or tuples/lists of
 * them, with in_dims an int/None or a tuple of them nesting as the arguments do, out_dims an int or a flat tuple, tensor (or tuple/list of
 * tensor) results, randomness, no chunk_size. Anything else, or a side effect inside the
 * function, makes the call a graph break (vmap runs in Python).
 *
 * A vmapped function is a HOP value with bits HOP_VMAPPED: u.ref[0] torch.vmap, u.ref[1]
 * the function value, u.ref[2] the real tuple (in_dims, out_dims, randomness).
 *
 * torch.func.grad / grad_and_value: the function inlined between functorch's grad
 * primitives (saved-tensor hooks disabled, _grad_increment_nesting, _wrap_for_grad of the
 * tensor arguments, _set_tensor_requires_grad of the differentiated ones, ...,
 * _autograd_grad, _unwrap_for_grad, _grad_decrement_nesting), all run at trace time too.
 * Supported: positional tensor arguments, argnums an int or a flat tuple, has_aux; the
 * function's output a scalar tensor. A HOP value with bits HOP_GRADDED: u.ref[0] the
 * transform, u.ref[1] the function value, u.ref[2] the tuple (argnums, has_aux,
 * with_value).
 */
#include "hop.h"

static PyObject *fn_lazy_load, *fn_increment, *fn_decrement, *fn_add_batch_dim,
    *fn_remove_batch_dim, *empty_tuple;
static PyObject *fn_hooks_disable, *fn_hooks_enable, *fn_hooks_is_enabled, *fn_grad_increment,
    *fn_grad_decrement, *fn_wrap_for_grad, *fn_set_inplace_rg, *fn_set_requires_grad,
    *fn_autograd_grad, *fn_unwrap_for_grad, *fn_grad_and_value, *hooks_message, *args_true,
    *args_false;

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

/* 1 when obj is a dim (or None) or a tuple/list nesting them: the in_dims of one argument
 * (a pytree prefix of it). */
static int
is_dim_tree(PyObject *obj)
{
    if (PyTuple_CheckExact(obj) || PyList_CheckExact(obj)) {
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(obj); i++) {
            if (!is_dim_tree(PySequence_Fast_ITEMS(obj)[i])) {
                return 0;
            }
        }
        return 1;
    }
    return is_dim(obj, 1);
}

/* in_dims: an int/None, or a tuple with one dim tree per positional argument. */
static int
is_in_dims(PyObject *obj)
{
    return PyTuple_CheckExact(obj) ? is_dim_tree(obj) : is_dim(obj, 1);
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
    tr_status st = cdyn_hop_bind_params(tx, "torch.vmap", args, nargs, kwnames, names, 1, a);
    if (st != TR_OK) {
        return st;
    }
    st = TR_ERROR;
    for (int j = 1; j < 5; j++) {
        /* in_dims may be a tuple value of constants (pytree in_dims built by the caller) */
        if (a[j] != NULL && (c[j] = cdyn_v_as_constant(a[j])) == NULL) {
            if (PyErr_Occurred()) {
                goto done;
            }
            st = cdyn_tx_unsupported(tx, "torch.vmap with a non-constant %s", names[j]);
            goto done;
        }
    }
    if (c[4] != NULL && c[4] != Py_None) {
        st = cdyn_tx_unsupported(tx, "torch.vmap with chunk_size");
        goto done;
    }
    if ((c[1] && !is_in_dims(c[1])) || (c[2] && !is_dims(c[2], 0))) {
        st = cdyn_tx_unsupported(tx, "torch.vmap with in_dims that are not ints or tuples of "
                                 "them, or out_dims not an int or a flat tuple of ints");
        goto done;
    }
    if (c[3] && !(PyUnicode_Check(c[3]) &&
                  (cdyn_name_is(c[3], "error") || cdyn_name_is(c[3], "same") ||
                   cdyn_name_is(c[3], "different")))) {
        st = cdyn_tx_unsupported(tx, "torch.vmap: randomness %R", c[3]);
        goto done;
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
done:
    for (int j = 1; j < 5; j++) {
        Py_XDECREF(c[j]);
    }
    Py_XDECREF(zero);
    Py_XDECREF(error);
    Py_XDECREF(cfg);
    return st;
}

/* The in_dim tree of positional argument i (borrowed). */
static PyObject *
in_dim_of(PyObject *in_dims, Py_ssize_t i)
{
    return PyTuple_Check(in_dims) ? PyTuple_GET_ITEM(in_dims, i) : in_dims;
}

/* The items of arg (a tuple or list, not a named tuple) that dim tree d (a tuple/list or a
 * dim) maps: *items new list; d, when a container, must be one of the same type and length
 * (vmap's pytree-prefix rule; anything else raises in Python). *items NULL: arg is a leaf. */
static tr_status
dim_tree_items(cdyn_tx *tx, PyObject *d, PyObject *arg, PyObject **items)
{
    int seq = V(arg)->kind == VK_TUPLE || V(arg)->kind == VK_LIST;
    tr_status st;
    *items = NULL;
    if (!seq) {
        return PyTuple_Check(d) || PyList_Check(d)
                   ? cdyn_tx_unsupported(tx, "vmap: in_dims do not match the arguments "
                                         "(raised in Python)")
                   : TR_OK;
    }
    if (V(arg)->u.seq.nt_type != NULL) {
        return cdyn_tx_unsupported(tx, "vmap over a named tuple");
    }
    st = cdyn_v_unpack(tx, arg, items);
    if (st == TR_OK && (PyTuple_Check(d) || PyList_Check(d)) &&
        (PyTuple_Check(d) != (V(arg)->kind == VK_TUPLE) ||
         PySequence_Fast_GET_SIZE(d) != PyList_GET_SIZE(*items))) {
        Py_CLEAR(*items);
        st = cdyn_tx_unsupported(tx, "vmap: in_dims do not match the arguments (raised in "
                                 "Python)");
    }
    return st;
}

/* The dim that d (a dim or a tuple/list of them) gives item i of a container (borrowed). */
static PyObject *
dim_tree_item(PyObject *d, Py_ssize_t i)
{
    return PyTuple_Check(d) || PyList_Check(d) ? PySequence_Fast_ITEMS(d)[i] : d;
}

/* The batch size of the leaves of arg mapped by dim tree d (all equal; *bs -1 until the
 * first). */
static tr_status
batch_size_tree(cdyn_tx *tx, PyObject *d, PyObject *arg, long *bs)
{
    PyObject *items = NULL, *shape;
    long di, nd, size;
    tr_status st;
    if (d == Py_None) {
        return TR_OK;
    }
    if ((st = dim_tree_items(tx, d, arg, &items)) != TR_OK || items != NULL) {
        for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(items); i++) {
            st = batch_size_tree(tx, dim_tree_item(d, i), PyList_GET_ITEM(items, i), bs);
        }
        Py_XDECREF(items);
        return st;
    }
    if (V(arg)->kind != VK_TENSOR) {
        return cdyn_tx_unsupported(tx, "vmap over %S (only tensor arguments are traced)", arg);
    }
    shape = PyObject_GetAttrString(V(arg)->u.tensor.fake, "shape");
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
    return TR_OK;
}

/* The batch size: the size of every mapped tensor at its in_dim (all equal). */
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
        tr_status st = batch_size_tree(tx, in_dim_of(in_dims, i), args[i], bs);
        if (st != TR_OK) {
            return st;
        }
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
    if (cdyn_tx_graph_raw(tx, fn, args, &node) != TR_OK) {
        Py_CLEAR(*res);
        return TR_ERROR;
    }
    Py_DECREF(node);
    return TR_OK;
}

/* After a transformed function was inlined: a store replayed at the end of the frame or a
 * mutation of a value from outside it is refused (TR_UNSUPPORTED; the trace is not resumed). */
static tr_status
side_effect_check(cdyn_tx *tx, const char *what, Py_ssize_t n_effects, long mutations)
{
    Py_ssize_t ne = PyList_GET_SIZE(tx->effects);
    if (ne != n_effects) {
        if (PyList_SetSlice(tx->effects, n_effects, ne, NULL) < 0) {
            return TR_ERROR;
        }
        tx->mutations++;
    }
    if (tx->mutations != mutations) {
        return cdyn_tx_unsupported(tx, "%s: side effect inside the function", what);
    }
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

/* arg with _add_batch_dim(leaf, dim, level) applied to each tensor leaf that dim tree d
 * maps (containers rebuilt, same kind). *out new. */
static tr_status
batch_tree(cdyn_tx *tx, PyObject *d, PyObject *arg, long level, PyObject **out)
{
    PyObject *items = NULL, *list = NULL;
    tr_status st;
    if (d == Py_None) {
        *out = Py_NewRef(arg);
        return TR_OK;
    }
    if ((st = dim_tree_items(tx, d, arg, &items)) != TR_OK) {
        return st;
    }
    if (items == NULL) {
        return call_ints(tx, fn_add_batch_dim, arg, PyLong_AsLong(d), level, 0, 2, out);
    }
    list = PyList_New(PyList_GET_SIZE(items));
    st = list ? TR_OK : TR_ERROR;
    for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(items); i++) {
        PyObject *b = NULL;
        st = batch_tree(tx, dim_tree_item(d, i), PyList_GET_ITEM(items, i), level, &b);
        if (st == TR_OK) {
            PyList_SET_ITEM(list, i, b);
        }
    }
    if (st == TR_OK) {
        *out = cdyn_value_seq_list(V(arg)->kind, list);
        st = *out ? TR_OK : TR_ERROR;
    }
    Py_DECREF(items);
    Py_XDECREF(list);
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

/* A result of the vmapped function that is the batched form of a positional tensor
 * argument itself (the function returned its argument, or an in-place method's self), with
 * out_dim equal to that argument's in_dim (both normalised): eager's _remove_batch_dim
 * hands back the argument itself, so does the trace (`vmap(Tensor.acos_)(x) is x`). New
 * reference to the argument's value, or NULL (no exception) otherwise. */
static PyObject *
unbatched_input(PyObject *in_dims, PyObject *const *args, Py_ssize_t npos, PyObject *batched,
                PyObject *result, long od)
{
    for (Py_ssize_t j = 0; j < npos; j++) {
        PyObject *d = in_dim_of(in_dims, j), *shape;
        long nd, di;
        if (PyList_GET_ITEM(batched, j) != result || V(args[j])->kind != VK_TENSOR ||
            !PyLong_Check(d)) {
            continue;
        }
        shape = PyObject_GetAttrString(V(args[j])->u.tensor.fake, "shape");
        if (shape == NULL) {
            PyErr_Clear();
            return NULL;
        }
        nd = (long)PyTuple_GET_SIZE(shape);
        Py_DECREF(shape);
        di = PyLong_AsLong(d);
        if ((di < 0 ? di + nd : di) == (od < 0 ? od + nd : od)) {
            return Py_NewRef(args[j]);
        }
    }
    return NULL;
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
        PyObject *b = NULL;
        st = batch_tree(tx, i < npos ? in_dim_of(in_dims, i) : Py_None, args[i], level, &b);
        if (st != TR_OK) {
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
        if (st == TR_OK && (t = unbatched_input(in_dims, args, npos, batched,
                                                PyList_GET_ITEM(outs, i), od)) == NULL) {
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
    if (st == TR_OK) {
        st = side_effect_check(tx, "vmap", n_effects, mutations);
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

/* ---- torch.func.grad / grad_and_value ---------------------------------------------------- */

/* torch.func.grad(func, argnums=0, has_aux=False) (grad_and_value: with_value): a HOP value
 * (HOP_GRADDED) remembering the function and the constant configuration. */
tr_status
cdyn_grad_make(cdyn_tx *tx, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames, PyObject **out)
{
    static const char *const names[] = {"func", "argnums", "has_aux", NULL};
    PyObject *a[3] = {NULL, NULL, NULL}, *argnums = NULL, *has_aux = Py_False, *cfg = NULL;
    tr_status st = cdyn_hop_bind_params(tx, "torch.func.grad", args, nargs, kwnames, names, 1,
                                        a);
    if (st != TR_OK) {
        return st;
    }
    if ((a[1] && V(a[1])->kind != VK_CONST) || (a[2] && V(a[2])->kind != VK_CONST)) {
        return cdyn_tx_unsupported(tx, "torch.func.grad with non-constant argnums/has_aux");
    }
    argnums = a[1] ? V(a[1])->u.cnst.value : NULL;
    has_aux = a[2] ? V(a[2])->u.cnst.value : Py_False;
    if ((argnums != NULL && (!is_dims(argnums, 0) ||
                             (PyTuple_Check(argnums) && PyTuple_GET_SIZE(argnums) == 0))) ||
        !PyBool_Check(has_aux)) {
        return cdyn_tx_unsupported(tx, "torch.func.grad: argnums not an int or a flat tuple "
                                   "of ints, or has_aux not a bool");
    }
    if (argnums == NULL) {
        argnums = PyLong_FromLong(0);
    }
    else {
        Py_INCREF(argnums);
    }
    cfg = argnums ? PyTuple_Pack(3, argnums, has_aux,
                                 V(fn)->u.obj.obj == fn_grad_and_value ? Py_True : Py_False)
                  : NULL;
    Py_XDECREF(argnums);
    if (cfg == NULL || (*out = cdyn_value_alloc(VK_HOP, NULL)) == NULL) {
        Py_XDECREF(cfg);
        return TR_ERROR;
    }
    V(*out)->bits = HOP_GRADDED;
    V(*out)->u.ref[0] = Py_NewRef(V(fn)->u.obj.obj);
    V(*out)->u.ref[1] = Py_NewRef(a[0]);
    V(*out)->u.ref[2] = cfg;
    return TR_OK;
}

/* The global state a traced grad changed, undone on failure. */
typedef struct {
    int hooks_disabled, level_pushed, inplace_allowed, grad_set, prev_grad;
} grad_state;

static void
grad_undo(cdyn_tx *tx, grad_state *g)
{
    PyObject *r;
    if (g->inplace_allowed) {
        r = PyObject_CallOneArg(fn_set_inplace_rg, Py_False);
        Py_XDECREF(r);
    }
    if (g->level_pushed) {
        r = PyObject_CallNoArgs(fn_grad_decrement);
        Py_XDECREF(r);
    }
    if (g->hooks_disabled) {
        r = PyObject_CallNoArgs(fn_hooks_enable);
        Py_XDECREF(r);
    }
    if (PyErr_Occurred()) {
        PyErr_WriteUnraisable(NULL);
    }
    if (g->grad_set) {
        cdyn_hop_restore_grad(tx, g->prev_grad);
    }
}

/* The argnums as a list of positions in [0, npos) whose arguments are tensors. */
static tr_status
grad_positions(cdyn_tx *tx, PyObject *argnums, PyObject *const *args, Py_ssize_t npos,
               Py_ssize_t *pos, Py_ssize_t *n)
{
    Py_ssize_t k = PyTuple_Check(argnums) ? PyTuple_GET_SIZE(argnums) : 1;
    if (k > 16) {
        return cdyn_tx_unsupported(tx, "torch.func.grad: too many argnums");
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        long a = PyLong_AsLong(PyTuple_Check(argnums) ? PyTuple_GET_ITEM(argnums, i) : argnums);
        a = a < 0 ? a + (long)npos : a;
        if (a < 0 || a >= (long)npos || V(args[a])->kind != VK_TENSOR) {
            PyErr_Clear();
            return cdyn_tx_unsupported(tx, "torch.func.grad: argnums out of range or not a "
                                       "tensor argument (raised in Python, or a pytree)");
        }
        pos[i] = a;
    }
    *n = k;
    return TR_OK;
}

/* fn(v, level) as a graph call on one value. */
static tr_status
call_level(cdyn_tx *tx, PyObject *fn, PyObject *v, long level, PyObject **out)
{
    return call_ints(tx, fn, v, level, 0, 0, 1, out);
}

/* The wrapped arguments: every TENSOR argument _wrap_for_grad'ed, the differentiated ones
 * made to require grad. *out: new list. */
static tr_status
grad_wrap_args(cdyn_tx *tx, grad_state *g, PyObject *const *args, Py_ssize_t nargs,
               const Py_ssize_t *pos, Py_ssize_t npos_diff, long level, PyObject **out)
{
    PyObject *r = NULL, *list = PyList_New(nargs);
    tr_status st = list ? TR_OK : TR_ERROR;
    for (Py_ssize_t i = 0; st == TR_OK && i < nargs; i++) {
        PyObject *w = NULL;
        if (V(args[i])->kind == VK_TENSOR) {
            st = call_level(tx, fn_wrap_for_grad, args[i], level, &w);
        }
        else {
            w = Py_NewRef(args[i]);
        }
        if (st == TR_OK) {
            PyList_SET_ITEM(list, i, w);
        }
    }
    for (Py_ssize_t i = 0; st == TR_OK && i < npos_diff; i++) {
        /* as torch._dynamo: requires_grad_() allowed around each one */
        PyObject *d = PyList_GET_ITEM(list, pos[i]);
        cdyn_guards_note_requires_grad(tx->guards);
        st = primitive(tx, fn_set_inplace_rg, args_true, &r);
        Py_CLEAR(r);
        g->inplace_allowed = st == TR_OK;
        if (st == TR_OK) {
            st = cdyn_tx_graph_call(tx, "call_function", fn_set_requires_grad, NULL, &d, 1, NULL,
                                    &r);
            Py_CLEAR(r);
        }
        if (st == TR_OK) {
            st = primitive(tx, fn_set_inplace_rg, args_false, &r);
            Py_CLEAR(r);
            g->inplace_allowed = st != TR_OK;
        }
    }
    if (st != TR_OK) {
        Py_XDECREF(list);
        return st;
    }
    *out = list;
    return TR_OK;
}

/* _autograd_grad((output,), [diff args], create_graph=True), each gradient unwrapped:
 * *out a new list of values. */
static tr_status
grad_of(cdyn_tx *tx, PyObject *output, PyObject *wrapped, const Py_ssize_t *pos,
        Py_ssize_t ndiff, long level, PyObject **out)
{
    PyObject *outs = cdyn_value_seq(VK_TUPLE, &output, 1), *diffs = PyList_New(ndiff);
    PyObject *cg = cdyn_value_bool(1), *kw = Py_BuildValue("(s)", "create_graph");
    PyObject *res = NULL, *items = NULL, *list = NULL;
    tr_status st = TR_ERROR;
    if (outs == NULL || diffs == NULL || cg == NULL || kw == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < ndiff; i++) {
        PyList_SET_ITEM(diffs, i, Py_NewRef(PyList_GET_ITEM(wrapped, pos[i])));
    }
    {
        PyObject *dv = cdyn_value_seq_list(VK_LIST, diffs), *argv[3] = {outs, dv, cg};
        st = dv ? cdyn_tx_graph_call(tx, "call_function", fn_autograd_grad, NULL, argv, 3, kw,
                                     &res)
                : TR_ERROR;
        Py_XDECREF(dv);
    }
    if (st != TR_OK) {
        goto done;
    }
    st = TR_ERROR;
    items = V(res)->kind == VK_TUPLE ? V(res)->u.seq.items : NULL;
    if (items == NULL || PyList_GET_SIZE(items) != ndiff || (list = PyList_New(ndiff)) == NULL) {
        st = items == NULL ? cdyn_tx_unsupported(tx, "torch.func.grad: unexpected gradients")
                           : TR_ERROR;
        goto done;
    }
    st = TR_OK;
    for (Py_ssize_t i = 0; st == TR_OK && i < ndiff; i++) {
        PyObject *u = NULL;
        st = call_level(tx, fn_unwrap_for_grad, PyList_GET_ITEM(items, i), level, &u);
        if (st == TR_OK) {
            PyList_SET_ITEM(list, i, u);
        }
    }
    if (st == TR_OK) {
        *out = list;
        list = NULL;
    }
done:
    Py_XDECREF(outs);
    Py_XDECREF(diffs);
    Py_XDECREF(cg);
    Py_XDECREF(kw);
    Py_XDECREF(res);
    Py_XDECREF(list);
    return st;
}

/* The tensors of v (tensors, tuples/lists of them, constants) unwrapped: *out new value. */
static tr_status
unwrap_all(cdyn_tx *tx, PyObject *v, long level, PyObject **out)
{
    PyObject *ts = PyList_New(0), *un = PyList_New(0);
    Py_ssize_t pos = 0;
    tr_status st = (ts && un) ? cdyn_body_flatten(tx, v, 1, ts) : TR_ERROR;
    for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(ts); i++) {
        PyObject *u = NULL;
        st = call_level(tx, fn_unwrap_for_grad, PyList_GET_ITEM(ts, i), level, &u);
        if (st == TR_OK && PyList_Append(un, u) < 0) {
            st = TR_ERROR;
        }
        Py_XDECREF(u);
    }
    if (st == TR_OK) {
        st = cdyn_body_rebuild(tx, v, un, &pos, out);
    }
    Py_XDECREF(ts);
    Py_XDECREF(un);
    return st;
}

/* The result: grad (a value, or a tuple for tuple argnums), then with has_aux / with_value
 * the shapes torch.func.grad and grad_and_value return. */
static tr_status
grad_result(PyObject *cfg, PyObject *grads, PyObject *output, PyObject *aux, PyObject **out)
{
    int tuple_argnums = PyTuple_Check(PyTuple_GET_ITEM(cfg, 0));
    int has_aux = PyTuple_GET_ITEM(cfg, 1) == Py_True, with_value = PyTuple_GET_ITEM(cfg, 2) == Py_True;
    PyObject *g = tuple_argnums ? cdyn_value_seq_list(VK_TUPLE, grads)
                                : Py_NewRef(PyList_GET_ITEM(grads, 0));
    PyObject *second = NULL;
    if (g == NULL) {
        return TR_ERROR;
    }
    if (with_value) {
        PyObject *oa[2] = {output, aux};
        second = has_aux ? cdyn_value_seq(VK_TUPLE, oa, 2) : Py_NewRef(output);
    }
    else if (has_aux) {
        second = Py_NewRef(aux);
    }
    else {
        *out = g;
        return TR_OK;
    }
    if (second == NULL) {
        Py_DECREF(g);
        return TR_ERROR;
    }
    {
        PyObject *pair[2] = {g, second};
        *out = cdyn_value_seq(VK_TUPLE, pair, 2);
    }
    Py_DECREF(g);
    Py_DECREF(second);
    return *out ? TR_OK : TR_ERROR;
}

/* The function's result: *output (a scalar tensor) and, with has_aux, *aux (new refs). */
static tr_status
grad_split(cdyn_tx *tx, PyObject *cfg, PyObject *ret, PyObject **output, PyObject **aux)
{
    PyObject *items = NULL, *d = NULL;
    tr_status st = TR_OK;
    if (PyTuple_GET_ITEM(cfg, 1) == Py_True) {
        st = V(ret)->kind == VK_TUPLE ? cdyn_v_unpack(tx, ret, &items) : TR_UNSUPPORTED;
        if (st == TR_OK && PyList_GET_SIZE(items) == 2) {
            *output = Py_NewRef(PyList_GET_ITEM(items, 0));
            *aux = Py_NewRef(PyList_GET_ITEM(items, 1));
        }
        Py_XDECREF(items);
        if (*output == NULL) {
            return st == TR_ERROR ? st : cdyn_tx_unsupported(
                tx, "torch.func.grad(has_aux=True): f did not return (output, aux) (raised "
                    "in Python)");
        }
    }
    else {
        *output = Py_NewRef(ret);
    }
    if (V(*output)->kind == VK_TENSOR) {
        d = PyObject_CallMethod(V(*output)->u.tensor.fake, "dim", NULL);
        if (d == NULL) {
            return TR_ERROR;
        }
    }
    if (d == NULL || PyLong_AsLong(d) != 0) {
        st = cdyn_tx_unsupported(tx, "torch.func.grad: f did not return a scalar tensor "
                                 "(raised in Python)");
    }
    Py_XDECREF(d);
    return st;
}

/* Calling a grad-transformed function: see the file's comment. */
tr_status
cdyn_grad_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *gf, PyObject *const *args,
               Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyObject *func = V(gf)->u.ref[1], *cfg = V(gf)->u.ref[2];
    PyObject *wrapped = NULL, *ret = NULL, *output = NULL, *aux = NULL, *grads = NULL,
             *uout = NULL, *uaux = NULL, *r = NULL, *en = NULL;
    Py_ssize_t pos[16], ndiff = 0, n_effects = PyList_GET_SIZE(tx->effects);
    long mutations = tx->mutations, level = -1;
    long long serial = tx->ckpt_serial;
    grad_state g = {0, 0, 0, 0, tx->grad_enabled};
    tr_status st;
    if (kwnames != NULL) {
        return cdyn_tx_unsupported(tx, "torch.func.grad: keyword arguments to the function");
    }
    st = grad_positions(tx, PyTuple_GET_ITEM(cfg, 0), args, nargs, pos, &ndiff);
    if (st != TR_OK) {
        return st;
    }
    en = PyObject_CallNoArgs(fn_hooks_is_enabled);
    if (en != Py_True) {
        Py_XDECREF(en);
        return en ? cdyn_tx_unsupported(tx, "torch.func.grad with saved tensor hooks disabled")
                  : TR_ERROR;
    }
    Py_DECREF(en);
    tx->ckpt_serial = cdyn_value_serial;   /* values made before the call are outside it */
    {
        PyObject *t = PyTuple_Pack(1, hooks_message);
        st = t ? primitive(tx, fn_hooks_disable, t, &r) : TR_ERROR;
        Py_XDECREF(t);
        Py_CLEAR(r);
    }
    g.hooks_disabled = st == TR_OK;
    if (st == TR_OK) {
        st = primitive(tx, fn_grad_increment, empty_tuple, &r);
        g.level_pushed = st == TR_OK;
        level = r ? PyLong_AsLong(r) : -1;
        Py_CLEAR(r);
    }
    if (st == TR_OK && !tx->grad_enabled) {
        st = cdyn_hop_set_grad(tx, 1);   /* grad runs the function under enable_grad */
        g.grad_set = st == TR_OK;
    }
    if (st == TR_OK) {
        st = grad_wrap_args(tx, &g, args, nargs, pos, ndiff, level, &wrapped);
    }
    if (st == TR_OK) {
        st = cdyn_v_call(tx, fs, func, PySequence_Fast_ITEMS(wrapped), nargs, NULL, &ret);
        if (st == TR_UNSUPPORTED) {
            cdyn_hop_reason(tx, "torch.func.grad");
        }
    }
    if (st == TR_OK) {
        st = grad_split(tx, cfg, ret, &output, &aux);
    }
    if (st == TR_OK) {
        st = grad_of(tx, output, wrapped, pos, ndiff, level, &grads);
    }
    if (st == TR_OK) {
        st = call_level(tx, fn_unwrap_for_grad, output, level, &uout);
    }
    if (st == TR_OK && aux != NULL) {
        st = unwrap_all(tx, aux, level, &uaux);
    }
    if (st == TR_OK && g.grad_set) {
        st = cdyn_hop_set_grad(tx, 0);
        g.grad_set = st != TR_OK;
    }
    if (st == TR_OK) {
        st = primitive(tx, fn_grad_decrement, empty_tuple, &r);
        Py_CLEAR(r);
        g.level_pushed = st != TR_OK;
    }
    if (st == TR_OK) {
        st = primitive(tx, fn_hooks_enable, empty_tuple, &r);
        Py_CLEAR(r);
        g.hooks_disabled = st != TR_OK;
    }
    if (st == TR_OK) {
        st = side_effect_check(tx, "torch.func.grad", n_effects, mutations);
    }
    if (st == TR_OK) {
        st = grad_result(cfg, grads, uout, uaux, out);
    }
    grad_undo(tx, &g);
    tx->ckpt_serial = serial;
    Py_XDECREF(wrapped);
    Py_XDECREF(ret);
    Py_XDECREF(output);
    Py_XDECREF(aux);
    Py_XDECREF(grads);
    Py_XDECREF(uout);
    Py_XDECREF(uaux);
    return st;
}

int
cdyn_functorch_init(void)
{
    static const struct { PyObject **fn; const char *name; } fns[] = {
        {&fn_lazy_load, "lazy_load_decompositions"}, {&fn_increment, "_vmap_increment_nesting"},
        {&fn_decrement, "_vmap_decrement_nesting"}, {&fn_add_batch_dim, "_add_batch_dim"},
        {&fn_remove_batch_dim, "_remove_batch_dim"},
    };
    static const struct { PyObject **fn; const char *mod, *name; } gfns[] = {
        {&fn_hooks_disable, "torch._C._autograd", "_saved_tensors_hooks_disable"},
        {&fn_hooks_enable, "torch._C._autograd", "_saved_tensors_hooks_enable"},
        {&fn_hooks_is_enabled, "torch._C._autograd", "_saved_tensors_hooks_is_enabled"},
        {&fn_grad_increment, "torch._C._functorch", "_grad_increment_nesting"},
        {&fn_grad_decrement, "torch._C._functorch", "_grad_decrement_nesting"},
        {&fn_wrap_for_grad, "torch._C._functorch", "_wrap_for_grad"},
        {&fn_set_inplace_rg, "torch._C._functorch", "set_inplace_requires_grad_allowed"},
        {&fn_set_requires_grad, "torch._functorch.eager_transforms", "_set_tensor_requires_grad"},
        {&fn_autograd_grad, "torch._functorch.eager_transforms", "_autograd_grad"},
        {&fn_unwrap_for_grad, "torch._functorch.predispatch", "_unwrap_for_grad"},
        {&fn_grad_and_value, "torch.func", "grad_and_value"},
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
    for (size_t i = 0; i < sizeof(gfns) / sizeof(gfns[0]); i++) {
        m = PyImport_ImportModule(gfns[i].mod);
        *gfns[i].fn = m ? PyObject_GetAttrString(m, gfns[i].name) : NULL;
        Py_XDECREF(m);
        if (*gfns[i].fn == NULL) {
            return -1;
        }
    }
    hooks_message = PyUnicode_FromString(
        "torch.func.{grad, vjp, jacrev, hessian} don't yet support saved tensor hooks. "
        "Please open an issue with your use case.");
    args_true = PyTuple_Pack(1, Py_True);
    args_false = PyTuple_Pack(1, Py_False);
    return hooks_message && args_true && args_false ? 0 : -1;
}
