/* graph.c: the FX graph of a trace. Graph inputs (placeholders with fake examples and
 * TENSOR_MATCH guards; module parameters and buffers too), torch calls run on fake tensors
 * for their metadata and recorded as call_function / call_method / call_module nodes, and
 * checkpoints that undo the nodes of a step that turned out unsupported. */
#include "tx.h"

/* An identifier made of a source's readable form: each run of non-alphanumeric characters
 * one underscore, a "v" in front of a leading digit. dynamo_style 0 drops the "L[" / "G[" /
 * "C[" prefix and leading / trailing underscores (L['self'].linear -> self_linear); 1 keeps
 * them all, as torch._dynamo names its placeholders (L['x'] -> L_x_). New ref. */
static PyObject *
source_identifier(PyObject *source, int dynamo_style)
{
    PyObject *r = cdyn_source_repr(source), *out = NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(r), j = 0;
    Py_UCS4 *buf = PyMem_Malloc((n + 2) * sizeof(Py_UCS4));
    int drop_prefix = !dynamo_style && n > 2 && PyUnicode_READ_CHAR(r, 1) == '[';
    if (buf == NULL) {
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = drop_prefix ? 2 : 0; i < n; i++) {
        Py_UCS4 ch = PyUnicode_READ_CHAR(r, i);
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')) {
            buf[j++] = ch;
        }
        else if (j == 0 ? dynamo_style : buf[j - 1] != '_') {
            buf[j++] = '_';
        }
    }
    while (!dynamo_style && j > 0 && buf[j - 1] == '_') {
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

PyObject *
cdyn_sanitized_name(PyObject *source)
{
    return source_identifier(source, 0);
}

PyObject *
cdyn_placeholder_name(PyObject *source)
{
    return source_identifier(source, 1);
}

/* The top level's graph and attribute dict (borrowed): graph inputs and module parameters
 * always live there, also while a sub-trace is active. */
static PyObject *
top_graph(cdyn_tx *tx)
{
    cdyn_sub *s = tx->sub;
    if (s == NULL) {
        return tx->graph;
    }
    while (s->parent != NULL) {
        s = s->parent;
    }
    return s->outer_graph;
}

/* Attach the fake example value to an FX node. 0 / -1. */
static int
set_example(cdyn_tx *tx, PyObject *node, PyObject *example)
{
    PyObject *r = PyObject_CallMethodObjArgs(tx->glue, cdyn_G.s_set_example, node, example, NULL);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* node.meta["stack_trace"] of a call node: the user's line being interpreted (the innermost
 * frame, inlined functions included), in traceback form as torch._dynamo records it (FX's
 * print_readable groups nodes by it; tlparse and inductor's comments show it). One string
 * per (file, function, line), kept for the process. 0 / -1. */
static int
set_stack_trace(cdyn_tx *tx, PyObject *node)
{
    static PyObject *cache, *getline;
    cdyn_fs *fs = tx->cur_fs;
    PyObject *key = NULL, *text = NULL, *code_line = NULL, *meta = NULL;
    int line, rc = -1;
    if (fs == NULL || fs->pc <= 0 || fs->pc > fs->instrs.len) {
        return 0;
    }
    line = fs->instrs.items[fs->pc - 1].lineno;
    line = line >= 0 ? line : fs->code->co_firstlineno;
    if (cache == NULL && (cache = PyDict_New()) == NULL) {
        return -1;
    }
    /* keyed by file, function name and line (never the code object: the cache would keep
       it alive, and its cache entries with it) */
    key = Py_BuildValue("(OOi)", fs->code->co_filename, fs->code->co_name, line);
    text = key ? Py_XNewRef(PyDict_GetItemWithError(cache, key)) : NULL;
    if (text == NULL && !PyErr_Occurred()) {
        PyObject *raw;
        if (getline == NULL) {
            PyObject *lc = PyImport_ImportModule("linecache");
            getline = lc ? PyObject_GetAttrString(lc, "getline") : NULL;
            Py_XDECREF(lc);
        }
        raw = getline ? PyObject_CallFunction(getline, "Oi", fs->code->co_filename, line) : NULL;
        code_line = raw && PyUnicode_Check(raw) ? PyObject_CallMethod(raw, "strip", NULL) : NULL;
        Py_XDECREF(raw);
        text = code_line ? PyUnicode_FromFormat("  File \"%U\", line %d, in %U\n    %U\n",
                                                fs->code->co_filename, line,
                                                fs->code->co_name, code_line)
                         : NULL;
        if (text != NULL && PyDict_SetItem(cache, key, text) < 0) {
            Py_CLEAR(text);
        }
    }
    meta = text ? PyObject_GetAttrString(node, "meta") : NULL;
    if (meta != NULL && PyDict_Check(meta) && PyDict_SetItemString(meta, "stack_trace", text) == 0) {
        rc = 0;
    }
    Py_XDECREF(key);
    Py_XDECREF(text);
    Py_XDECREF(code_line);
    Py_XDECREF(meta);
    return rc;
}

/* obj.is_inference(): 1 / 0, -1 with an exception. */
static int
tensor_is_inference(PyObject *obj)
{
    PyObject *r = PyObject_CallMethod(obj, "is_inference", NULL);
    int on = -1;
    if (r != NULL) {
        on = PyObject_IsTrue(r);
    }
    Py_XDECREF(r);
    return on;
}

tr_status
cdyn_tx_wrap_tensor_input(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    PyObject *key = NULL, *alias = NULL, *fake = NULL, *name = NULL, *node = NULL;
    tr_status st = TR_ERROR;
    if (source == NULL) {
        return cdyn_tx_unsupported(tx, "a tensor with no source (cannot be a graph input)");
    }
    {
        /* a tensor of a running torch.func transform (vmap, grad): its frame runs in Python */
        PyObject *w = PyObject_CallMethod(tx->glue, "is_functorch_wrapped", "O", obj);
        int wrapped = w == Py_True;
        Py_XDECREF(w);
        if (w == NULL) {
            return TR_ERROR;
        }
        if (wrapped) {
            return cdyn_tx_unsupported(tx, "%U is a tensor wrapped by a running torch.func "
                                       "transform (vmap/grad)", cdyn_source_repr(source));
        }
    }
    key = PyLong_FromVoidPtr(obj);
    if (key == NULL) {
        goto done;
    }
    alias = PyDict_GetItemWithError(tx->by_id, key);
    if (alias != NULL) {
        /* the same tensor under another name shares the placeholder: guarded to be the
           same object again (its TENSOR_MATCH is the other name's) */
        if (V(alias)->source == NULL ||
            cdyn_guards_add_same(tx->guards, source, V(alias)->source) < 0) {
            if (!PyErr_Occurred()) {
                st = cdyn_tx_unsupported(tx, "an aliased tensor input without a source");
            }
            goto done;
        }
        *out = Py_NewRef(alias);
        st = TR_OK;
        goto done;
    }
    if (PyErr_Occurred() || cdyn_guards_add_tensor(tx->guards, source, obj) < 0) {
        goto done;
    }
    /* static or symbolic sizes: automatic dynamic shapes, dynamic=, mark_dynamic */
    st = cdyn_sym_tensor_input(tx, obj, source, &fake);
    if (st != TR_OK) {
        goto done;
    }
    st = TR_ERROR;
    name = cdyn_placeholder_name(source);
    if (name == NULL) {
        goto done;
    }
    node = PyObject_CallMethodObjArgs(tx->glue, cdyn_G.s_placeholder, top_graph(tx), name, NULL);
    if (node == NULL || set_example(tx, node, fake) < 0) {
        goto done;
    }
    /* placeholders for its new symbols come first (graph inputs, as torch._dynamo) */
    if (cdyn_sym_lift(tx, node, fake, source) != TR_OK) {
        goto done;
    }
    *out = cdyn_value_tensor(fake, node, source);
    if (*out != NULL) {
        /* the fake tensors are never inference tensors: Tensor.is_inference() of an input
           is read from the real one (its TENSOR_MATCH keys guard it) */
        int inf = tensor_is_inference(obj);
        if (inf < 0) {
            Py_CLEAR(*out);
            goto done;
        }
        V(*out)->bits |= inf ? TENSOR_INFERENCE : 0u;
    }
    if (*out != NULL && Py_TYPE(obj) != (PyTypeObject *)cdyn_G.torch_tensor_type) {
        V(*out)->u.tensor.type = Py_NewRef((PyObject *)Py_TYPE(obj));   /* TENSOR_MATCHed */
    }
    if (*out == NULL || PyList_Append(tx->input_sources, source) < 0 ||
        PyList_Append(tx->input_values, obj) < 0 || PyDict_SetItem(tx->by_id, key, *out) < 0) {
        Py_CLEAR(*out);
        goto done;
    }
    st = TR_OK;
done:
    Py_XDECREF(key);
    Py_XDECREF(fake);
    Py_XDECREF(name);
    Py_XDECREF(node);
    return st;
}

tr_status
cdyn_tx_wrap_module_tensor(cdyn_tx *tx, PyObject *tensor, PyObject *source, PyObject **out)
{
    if (source == NULL) {
        return cdyn_tx_unsupported(tx, "parameter of a module with no source");
    }
    /* a graph input read through its source on every call (TENSOR_MATCH, static sizes:
       symint.c's under_nn_module), as torch._dynamo's inline_inbuilt_nn_modules: the
       graph holds no instance's tensors, so it serves every instance of the module */
    return cdyn_tx_wrap_real(tx, tensor, source, out);
}

/* Wrap one element of a fake result: a tensor becomes getitem(node, i), a constant stays. */
static tr_status
wrap_element(cdyn_tx *tx, PyObject *elem, PyObject *node, Py_ssize_t i, PyObject **out)
{
    PyObject *idx = NULL, *args = NULL, *sub = NULL;
    tr_status st = TR_ERROR;
    if (!cdyn_is_tensor(elem)) {
        if (cdyn_is_symbolic(elem)) {
            idx = PyLong_FromSsize_t(i);
            args = idx ? PyTuple_Pack(2, node, idx) : NULL;
            sub = args ? PyObject_CallMethod(tx->graph, "call_function", "OO", cdyn_G.getitem_fn,
                                             args) : NULL;
            if (sub != NULL && set_example(tx, sub, elem) == 0) {
                Py_XSETREF(tx->last_node, Py_NewRef(sub));
                st = cdyn_sym_value(tx, elem, sub, NULL, out);
            }
            Py_XDECREF(idx);
            Py_XDECREF(args);
            Py_XDECREF(sub);
            return st;
        }
        if (elem == Py_None || cdyn_is_constant(elem)) {
            *out = cdyn_value_const(elem);
            return *out ? TR_OK : TR_ERROR;
        }
        return cdyn_tx_unsupported(tx, "torch operation returned a %s", Py_TYPE(elem)->tp_name);
    }
    idx = PyLong_FromSsize_t(i);
    args = idx ? PyTuple_Pack(2, node, idx) : NULL;
    sub = args ? PyObject_CallMethod(tx->graph, "call_function", "OO", cdyn_G.getitem_fn, args)
               : NULL;
    if (sub != NULL && set_example(tx, sub, elem) == 0) {
        Py_XSETREF(tx->last_node, Py_NewRef(sub));
        *out = cdyn_value_tensor(elem, sub, NULL);
        st = *out ? TR_OK : TR_ERROR;
    }
    Py_XDECREF(idx);
    Py_XDECREF(args);
    Py_XDECREF(sub);
    return st;
}

/* Wrap the fake result of a graph call (node: the call's node). A tensor result that is one
 * of the call's tensor arguments (an in-place method returns its receiver) is that
 * argument's value, so `x.add_(1) is x`. */
static tr_status
wrap_result(cdyn_tx *tx, PyObject *res, PyObject *node, PyObject *const *args,
            PyObject *fargs, PyObject **out)
{
    Py_ssize_t n;
    PyObject *items;
    if (cdyn_is_tensor(res)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fargs); i++) {
            if (PyTuple_GET_ITEM(fargs, i) == res && V(args[i])->kind == VK_TENSOR) {
                *out = Py_NewRef(args[i]);
                return TR_OK;
            }
        }
        *out = cdyn_value_tensor(res, node, NULL);
        return *out ? TR_OK : TR_ERROR;
    }
    if (cdyn_is_symbolic(res)) {   /* a SymInt / SymFloat (numel(), item() captured, ...) */
        return cdyn_sym_value(tx, res, node, NULL, out);
    }
    if (res == Py_None || cdyn_is_constant(res)) {
        *out = cdyn_value_const(res);
        return *out ? TR_OK : TR_ERROR;
    }
    if (!PyTuple_Check(res) && !PyList_Check(res)) {
        return cdyn_tx_unsupported(tx, "torch operation returned a %s", Py_TYPE(res)->tp_name);
    }
    n = PySequence_Size(res);
    items = PyList_New(n);
    if (items == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *elem = PySequence_GetItem(res, i), *v = NULL;
        tr_status st = elem ? wrap_element(tx, elem, node, i, &v) : TR_ERROR;
        Py_XDECREF(elem);
        if (st != TR_OK) {
            Py_DECREF(items);
            return st;
        }
        PyList_SET_ITEM(items, i, v);
    }
    *out = cdyn_value_seq_list(PyList_Check(res) ? VK_LIST : VK_TUPLE, items);
    Py_DECREF(items);
    if (*out != NULL && PyTuple_Check(res) && !PyTuple_CheckExact(res)) {
        /* a named tuple (e.g. torch.return_types.topk): keep its type for field access and
           to rebuild it */
        V(*out)->u.seq.nt_type = Py_NewRef((PyObject *)Py_TYPE(res));
    }
    return *out ? TR_OK : TR_ERROR;
}

/* A graph call on tensor subclasses whose __torch_function__ is overridden: traced as
 * torch_function_dispatch(func, types, args, kwargs) (cdynamo.polyfills), the override
 * inlined as user code, as eager calls it. */
static tr_status
tf_override_call(cdyn_tx *tx, const char *op, PyObject *target, PyObject *const *args,
                 Py_ssize_t nargs, PyObject *kwnames, PyObject *types, PyObject **out)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    PyObject *order = NULL, *func = NULL, *vals[4] = {NULL, NULL, NULL, NULL}, *keys = NULL,
             *kwv = NULL;
    tr_status st = TR_ERROR;
    func = cdyn_tensor_tf_func(tx, op, target, args, npos, &order, &st);
    if (func == NULL) {
        return st;
    }
    st = cdyn_tx_wrap_fixed(tx, func, Py_None, &vals[0]);
    if (st == TR_OK) {
        st = cdyn_tx_wrap_fixed(tx, types, Py_None, &vals[1]);
    }
    if (st != TR_OK) {
        goto done;
    }
    st = TR_ERROR;
    keys = PyList_New(0);
    kwv = PyList_New(0);
    if (keys == NULL || kwv == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < nkw; i++) {
        if (PyList_Append(keys, PyTuple_GET_ITEM(kwnames, i)) < 0 ||
            PyList_Append(kwv, args[npos + i]) < 0) {
            goto done;
        }
    }
    vals[2] = cdyn_value_seq(VK_TUPLE, &PyList_GET_ITEM(order, 0), npos);
    vals[3] = cdyn_value_dict(keys, kwv);
    if (vals[2] == NULL || vals[3] == NULL) {
        goto done;
    }
    st = cdyn_polyfill_inline_named(tx, "torch_function_dispatch", vals, 4, out);
done:
    for (int i = 0; i < 4; i++) {
        Py_XDECREF(vals[i]);
    }
    Py_XDECREF(keys);
    Py_XDECREF(kwv);
    Py_XDECREF(order);
    Py_DECREF(func);
    return st;
}

/* The result v of a graph call dispatched to torch.Tensor.__torch_function__ of tensor
 * subclass cls (borrowed): its tensors, and those of a tuple or list, become cls (as that
 * function's _convert does). An argument returned as it is (an in-place method's receiver)
 * keeps its type when it is a cls already; otherwise eager would return a new cls object
 * viewing it: not traced. */
static tr_status
tf_convert_result(cdyn_tx *tx, PyObject *v, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *cls)
{
    PyObject *items = V(v)->kind == VK_TUPLE || V(v)->kind == VK_LIST ? V(v)->u.seq.items
                                                                      : NULL;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (args[i] == v && V(v)->kind == VK_TENSOR) {
            PyObject *t = V(v)->u.tensor.type;
            if (t == NULL || !PyType_IsSubtype((PyTypeObject *)t, (PyTypeObject *)cls)) {
                return cdyn_tx_unsupported(tx, "an in-place call on a plain tensor with a "
                                               "tensor subclass argument");
            }
            return TR_OK;
        }
    }
    if (items == NULL) {
        cdyn_tensor_tf_convert(v, cls);
        return TR_OK;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        cdyn_tensor_tf_convert(PyList_GET_ITEM(items, i), cls);
    }
    return TR_OK;
}

/* 1 when target is one of torch's functions that answer from a tensor's metadata only
 * (dtype, sizes, conjugate/negative bits): torch.numel, is_floating_point, is_complex,
 * is_conj, is_neg, is_same_size. */
static int
is_metadata_fn(PyObject *target)
{
    static const char *const names[] = {"numel", "is_floating_point", "is_complex", "is_conj",
                                        "is_neg", "is_same_size", NULL};
    static PyObject *fns[6];
    if (fns[0] == NULL) {
        for (int i = 0; names[i] != NULL; i++) {
            fns[i] = PyObject_GetAttrString(cdyn_G.torch, names[i]);
            if (fns[i] == NULL) {
                PyErr_Clear();
                fns[i] = Py_NewRef(Py_None);
            }
        }
    }
    for (int i = 0; names[i] != NULL; i++) {
        if (target == fns[i]) {
            return 1;
        }
    }
    return 0;
}

/* 1 when obj (a fake argument or result, through tuples, lists and dicts) holds a tensor. */
static int
holds_tensor(PyObject *obj)
{
    if (cdyn_is_tensor(obj)) {
        return 1;
    }
    if (PyTuple_Check(obj) || PyList_Check(obj)) {
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(obj); i++) {
            if (holds_tensor(PySequence_Fast_GET_ITEM(obj, i))) {
                return 1;
            }
        }
    }
    if (PyDict_Check(obj)) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(obj, &pos, &k, &v)) {
            if (holds_tensor(v)) {
                return 1;
            }
        }
    }
    return 0;
}

/* 1 when the fake result res (a tensor, or a tuple / list of them) holds a tensor whose
 * layout is not strided (sparse COO / CSR / CSC / BSR / BSC), -1 on error. */
static int
holds_sparse(PyObject *res)
{
    static PyObject *strided, *s_layout;
    if (strided == NULL) {
        PyObject *torch = PyImport_ImportModule("torch");
        strided = torch != NULL ? PyObject_GetAttrString(torch, "strided") : NULL;
        Py_XDECREF(torch);
        if (strided == NULL || (s_layout = PyUnicode_InternFromString("layout")) == NULL) {
            Py_CLEAR(strided);
            return -1;
        }
    }
    if (cdyn_is_tensor(res)) {
        PyObject *layout = PyObject_GetAttr(res, s_layout);
        int r = layout == NULL ? -1 : layout != strided;
        Py_XDECREF(layout);
        return r;
    }
    if (PyTuple_Check(res) || PyList_Check(res)) {
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(res); i++) {
            int r = holds_sparse(PySequence_Fast_GET_ITEM(res, i));
            if (r != 0) {
                return r;
            }
        }
    }
    return 0;
}

/* The fake and node argument tuples/dicts of a call. New refs on TR_OK. */
static tr_status
graph_args(cdyn_tx *tx, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
           PyObject **fargs, PyObject **nargs_t, PyObject **fkw, PyObject **nkw_d)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    tr_status st = TR_ERROR;
    *fargs = PyTuple_New(npos);
    *nargs_t = PyTuple_New(npos);
    *fkw = PyDict_New();
    *nkw_d = PyDict_New();
    if (!*fargs || !*nargs_t || !*fkw || !*nkw_d) {
        goto fail;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *f = NULL, *n = NULL;
        st = cdyn_v_graph_arg(tx, args[i], &f, &n);
        if (st != TR_OK) {
            goto fail;
        }
        st = TR_ERROR;
        if (i < npos) {
            PyTuple_SET_ITEM(*fargs, i, f);
            PyTuple_SET_ITEM(*nargs_t, i, n);
        }
        else {
            PyObject *k = PyTuple_GET_ITEM(kwnames, i - npos);
            int e = PyDict_SetItem(*fkw, k, f) < 0 || PyDict_SetItem(*nkw_d, k, n) < 0;
            Py_DECREF(f);
            Py_DECREF(n);
            if (e) {
                goto fail;
            }
        }
    }
    return TR_OK;
fail:
    Py_CLEAR(*fargs);
    Py_CLEAR(*nargs_t);
    Py_CLEAR(*fkw);
    Py_CLEAR(*nkw_d);
    return st;
}

/* 1 when the call makes a tensor require grad: requires_grad=True (a factory, a copy) or
 * t.requires_grad_() / t.requires_grad_(True). A graph compiled through AOTAutograd
 * (aot_eager, inductor) cannot make such a leaf: its result would not require grad, or the
 * input's flag would stay unchanged (torch._dynamo lifts such tensors out of the graph or
 * breaks); the call runs in Python instead. A non-constant flag counts as True. */
static int
makes_grad_leaf(const char *op, PyObject *target, PyObject *const *args, Py_ssize_t nargs,
                PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        if (cdyn_name_is(PyTuple_GET_ITEM(kwnames, i), "requires_grad")) {
            PyObject *v = args[npos + i];
            return V(v)->kind != VK_CONST || PyObject_IsTrue(V(v)->u.cnst.value) != 0;
        }
    }
    if (strcmp(op, "call_method") == 0 && PyUnicode_Check(target) &&
        cdyn_name_is(target, "requires_grad_")) {
        return npos < 2 || V(args[1])->kind != VK_CONST ||
               PyObject_IsTrue(V(args[1])->u.cnst.value) != 0;
    }
    return 0;
}

tr_status
cdyn_tx_graph_call(cdyn_tx *tx, const char *op, PyObject *target, PyObject *module,
                   PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyObject *fargs = NULL, *nargs_t = NULL, *fkw = NULL, *nkw_d = NULL, *res = NULL,
             *node = NULL, *opname = NULL;
    PyObject *tf_cls = NULL, *tf_types = NULL;   /* borrowed, new */
    tr_status st;
    if (makes_grad_leaf(op, target, args, nargs, kwnames)) {
        return cdyn_tx_unsupported(tx, "%s %R makes a tensor that requires grad (a leaf of "
                                   "autograd: made in Python, not in the graph)", op, target);
    }
    st = cdyn_tensor_tf_class(tx, args, nargs, &tf_cls, &tf_types);
    if (st != TR_OK || tf_types != NULL) {
        if (st == TR_OK) {
            st = tf_override_call(tx, op, target, args, nargs, kwnames, tf_types, out);
        }
        Py_XDECREF(tf_types);
        return st;
    }
    st = graph_args(tx, args, nargs, kwnames, &fargs, &nargs_t, &fkw, &nkw_d);
    if (st != TR_OK) {
        return st;
    }
    st = TR_ERROR;
    if (strcmp(op, "call_method") == 0) {
        res = PyObject_CallMethodObjArgs(tx->glue, cdyn_G.s_fake_call_method, tx->fake_mode,
                                         target, fargs, fkw, NULL);
    }
    else {
        res = PyObject_CallMethodObjArgs(tx->glue, cdyn_G.s_fake_call, tx->fake_mode,
                                         module ? module : target, fargs, fkw, NULL);
    }
    if (res == NULL) {
        st = cdyn_tx_unsupported(tx, "%s %R failed on fake tensors", op, target);
        goto done;
    }
    switch (holds_sparse(res)) {
    case 1:   /* as torch._dynamo: sparse tensors are not supported in a graph */
        st = cdyn_tx_unsupported(tx, "%s %R gives a sparse tensor", op, target);
        goto done;
    case -1:
        goto done;
    }
    if (strcmp(op, "call_function") == 0 && (PyBool_Check(res) || PyLong_CheckExact(res)) &&
        is_metadata_fn(target)) {
        /* torch.numel(t), torch.is_complex(t), ...: read from the fake tensor's metadata,
           fixed by the inputs' TENSOR_MATCH, a constant (as torch._dynamo folds them) */
        *out = cdyn_value_const(res);
        st = *out ? TR_OK : TR_ERROR;
        goto done;
    }
    if (!cdyn_is_state_setter(target) && !holds_tensor(res) && !holds_tensor(fargs) &&
        !holds_tensor(fkw) && !cdyn_is_symbolic(res) && !cdyn_allowed_in_graph(target)) {
        /* not a tensor operation: never a graph node (it runs in Python) */
        st = cdyn_tx_unsupported(tx, "call to %R has no tensor argument or result", target);
        goto done;
    }
    opname = PyUnicode_FromString(op);
    if (opname == NULL) {
        goto done;
    }
    node = PyObject_CallMethodObjArgs(tx->graph, cdyn_G.s_create_node, opname, target, nargs_t,
                                      nkw_d, NULL);
    if (node == NULL || set_example(tx, node, res) < 0 || set_stack_trace(tx, node) < 0) {
        goto done;
    }
    Py_XSETREF(tx->last_node, Py_NewRef(node));
    if (target == cdyn_G.set_grad_enabled) {
        tx->grad_enabled = PyTuple_GET_SIZE(fargs) > 0 &&
                           PyObject_IsTrue(PyTuple_GET_ITEM(fargs, 0)) == 1;
        if (tx->grad_enabled) {
            cdyn_guards_note_requires_grad(tx->guards);
        }
    }
    else {
        tx->n_call_nodes++;
    }
    st = wrap_result(tx, res, node, args, fargs, out);
    if (st == TR_OK && tf_cls != NULL) {
        st = tf_convert_result(tx, *out, args, nargs, tf_cls);
        if (st != TR_OK) {
            Py_CLEAR(*out);
        }
    }
done:
    Py_XDECREF(fargs);
    Py_XDECREF(nargs_t);
    Py_XDECREF(fkw);
    Py_XDECREF(nkw_d);
    Py_XDECREF(res);
    Py_XDECREF(node);
    Py_XDECREF(opname);
    return st;
}

tr_status
cdyn_tx_graph_raw(cdyn_tx *tx, PyObject *target, PyObject *args, PyObject **node)
{
    PyObject *kw = PyDict_New(), *op = PyUnicode_FromString("call_function");
    *node = (kw && op) ? PyObject_CallMethodObjArgs(tx->graph, cdyn_G.s_create_node, op, target,
                                                    args, kw, NULL)
                       : NULL;
    Py_XDECREF(kw);
    Py_XDECREF(op);
    if (*node == NULL) {
        return TR_ERROR;
    }
    Py_XSETREF(tx->last_node, Py_NewRef(*node));
    tx->n_call_nodes++;
    return TR_OK;
}

void
cdyn_tx_exit_modes(cdyn_tx *tx, Py_ssize_t n)
{
    PyObject *et, *ev, *tb;
    if (tx->open_modes == NULL) {
        return;
    }
    PyErr_Fetch(&et, &ev, &tb);
    while (PyList_GET_SIZE(tx->open_modes) > n) {
        Py_ssize_t last = PyList_GET_SIZE(tx->open_modes) - 1;
        PyObject *entry = PyList_GET_ITEM(tx->open_modes, last);
        PyObject *r = PyObject_CallOneArg(PyTuple_GET_ITEM(entry, 0), PyTuple_GET_ITEM(entry, 1));
        Py_XDECREF(r);
        if (PyTuple_GET_ITEM(entry, 0) == cdyn_G.set_grad_enabled) {
            tx->grad_enabled = PyTuple_GET_ITEM(entry, 1) == Py_True;
        }
        PyErr_Clear();
        PyList_SetSlice(tx->open_modes, last, last + 1, NULL);
    }
    PyErr_Restore(et, ev, tb);
}

/* ---- checkpoints ------------------------------------------------------------------------- */

void
cdyn_tx_ckpt_take(cdyn_tx *tx, cdyn_ckpt *ck)
{
    ck->last_node = Py_XNewRef(tx->last_node);
    ck->lost = tx->lost;
    ck->n_call_nodes = tx->n_call_nodes;
    ck->grad_enabled = tx->grad_enabled;
    ck->tf_subclass_off = tx->tf_subclass_off;
    ck->eogb = tx->eogb;
    ck->n_open_modes = tx->open_modes ? PyList_GET_SIZE(tx->open_modes) : 0;
    ck->n_undo = tx->undo != NULL ? PyList_GET_SIZE(tx->undo) : 0;
    ck->n_effects = tx->effects ? PyList_GET_SIZE(tx->effects) : 0;
    ck->n_exc_info = tx->exc_info ? PyList_GET_SIZE(tx->exc_info) : 0;
    tx->ckpt_serial = cdyn_value_serial;
    cdyn_undo_new_epoch(tx);
}

tr_status
cdyn_tx_ckpt_restore(cdyn_tx *tx, cdyn_ckpt *ck)
{
    PyObject *r;
    cdyn_generator_forget_since(tx, tx->ckpt_serial);
    if (tx->lost != ck->lost) {
        return TR_UNSUPPORTED;   /* the failed step changed traced state for good: give up */
    }
    /* values it changed, iterators and generators it advanced, memos it wrote: back to
       where they were, newest first */
    if (cdyn_undo_rollback(tx, ck->n_undo) < 0) {
        return TR_ERROR;
    }
    if (tx->last_node != ck->last_node) {
        r = PyObject_CallMethod(tx->glue, "rollback", "OO", tx->graph,
                                ck->last_node ? ck->last_node : Py_None);
        if (r == NULL) {
            return TR_ERROR;
        }
        Py_DECREF(r);
        Py_XSETREF(tx->last_node, Py_XNewRef(ck->last_node));
    }
    /* the step runs in Python instead: what it would have replayed is dropped (values made
       in it, e.g. an input wrapped and changed inside a failed inlined call, are not reached
       again: the trace ends at this instruction) */
    if (tx->effects && PyList_GET_SIZE(tx->effects) > ck->n_effects &&
        PyList_SetSlice(tx->effects, ck->n_effects, PY_SSIZE_T_MAX, NULL) < 0) {
        return TR_ERROR;
    }
    tx->n_call_nodes = ck->n_call_nodes;
    tx->grad_enabled = ck->grad_enabled;
    tx->tf_subclass_off = ck->tf_subclass_off;
    tx->eogb = ck->eogb;
    cdyn_tx_exit_modes(tx, ck->n_open_modes);
    /* handlers of failed inlined calls entered since are not being run any more */
    if (tx->exc_info && PyList_GET_SIZE(tx->exc_info) > ck->n_exc_info &&
        PyList_SetSlice(tx->exc_info, ck->n_exc_info, PY_SSIZE_T_MAX, NULL) < 0) {
        return TR_ERROR;
    }
    return TR_OK;
}

void
cdyn_tx_ckpt_clear(cdyn_ckpt *ck)
{
    Py_CLEAR(ck->last_node);
}

/* ---- sub-traces -------------------------------------------------------------------------- */

int
cdyn_tx_sub_push(cdyn_tx *tx, cdyn_sub *sub)
{
    memset(sub, 0, sizeof(*sub));
    sub->graph = PyObject_CallMethod(tx->glue, "new_graph", NULL);
    sub->root = PyDict_New();
    sub->lifted = PyDict_New();
    sub->free_nodes = PyList_New(0);
    sub->free_fakes = PyList_New(0);
    sub->arg_nodes = PyList_New(0);
    if (!sub->graph || !sub->root || !sub->lifted || !sub->free_nodes || !sub->free_fakes ||
        !sub->arg_nodes) {
        cdyn_tx_sub_clear(tx, sub);
        return -1;
    }
    sub->parent = tx->sub;
    sub->outer_graph = tx->graph;               /* references move into sub */
    sub->outer_root = tx->root;
    sub->outer_last_node = tx->last_node;
    sub->outer_n_call_nodes = tx->n_call_nodes;
    tx->graph = Py_NewRef(sub->graph);
    tx->root = Py_NewRef(sub->root);
    tx->last_node = NULL;
    tx->n_call_nodes = 0;
    tx->sub = sub;
    sub->active = 1;
    return 0;
}

void
cdyn_tx_sub_pop(cdyn_tx *tx, cdyn_sub *sub)
{
    assert(sub->active && tx->sub == sub);
    Py_SETREF(tx->graph, sub->outer_graph);     /* references move back */
    Py_SETREF(tx->root, sub->outer_root);
    Py_XSETREF(tx->last_node, sub->outer_last_node);
    tx->n_call_nodes = sub->outer_n_call_nodes;
    sub->outer_graph = sub->outer_root = sub->outer_last_node = NULL;
    tx->sub = sub->parent;
    sub->active = 0;
}

void
cdyn_tx_sub_clear(cdyn_tx *tx, cdyn_sub *sub)
{
    if (sub->active) {
        cdyn_tx_sub_pop(tx, sub);
    }
    Py_CLEAR(sub->graph);
    Py_CLEAR(sub->root);
    Py_CLEAR(sub->lifted);
    Py_CLEAR(sub->free_nodes);
    Py_CLEAR(sub->free_fakes);
    Py_CLEAR(sub->arg_nodes);
}

PyObject *
cdyn_tx_placeholder(cdyn_tx *tx, PyObject *graph, PyObject *like, PyObject *fake)
{
    PyObject *name = PyUnicode_Check(like) ? Py_NewRef(like) : PyObject_GetAttrString(like, "name");
    PyObject *node = NULL;
    if (name != NULL) {
        node = PyObject_CallMethod(tx->glue, "sub_placeholder", "OOO", graph, name, fake);
    }
    Py_XDECREF(name);
    return node;
}

/* node (borrowed) as a node of sub's graph, lifting it through the enclosing sub-traces
 * first. New ref in *out. */
static tr_status
lift_into(cdyn_tx *tx, cdyn_sub *sub, PyObject *node, PyObject *fake, PyObject **out)
{
    PyObject *g = PyObject_GetAttrString(node, "graph"), *outer = NULL, *ph = NULL;
    tr_status st = TR_ERROR;
    if (g == NULL) {
        return TR_ERROR;
    }
    if (g == sub->graph) {
        *out = Py_NewRef(node);
        st = TR_OK;
        goto done;
    }
    if (g == sub->outer_graph) {
        outer = Py_NewRef(node);
    }
    else if (sub->parent != NULL) {
        st = lift_into(tx, sub->parent, node, fake, &outer);
        if (st != TR_OK) {
            goto done;
        }
        st = TR_ERROR;
    }
    else {
        st = cdyn_tx_unsupported(tx, "a tensor of another higher-order op's body used here");
        goto done;
    }
    ph = PyDict_GetItemWithError(sub->lifted, outer);
    if (ph != NULL) {
        *out = Py_NewRef(ph);
        st = TR_OK;
        goto done;
    }
    if (PyErr_Occurred()) {
        goto done;
    }
    ph = cdyn_tx_placeholder(tx, sub->graph, outer, fake);
    if (ph == NULL || PyDict_SetItem(sub->lifted, outer, ph) < 0 ||
        PyList_Append(sub->free_nodes, outer) < 0 || PyList_Append(sub->free_fakes, fake) < 0) {
        Py_XDECREF(ph);
        goto done;
    }
    *out = ph;
    st = TR_OK;
done:
    Py_DECREF(g);
    Py_XDECREF(outer);
    return st;
}

tr_status
cdyn_tx_lift(cdyn_tx *tx, PyObject *node, PyObject *fake, PyObject **out)
{
    if (tx->sub == NULL) {
        *out = Py_NewRef(node);
        return TR_OK;
    }
    return lift_into(tx, tx->sub, node, fake, out);
}

int
cdyn_tx_add_no_aliasing(cdyn_tx *tx)
{
    PyObject *srcs = NULL, *objs = NULL, *cells = NULL, *tup = NULL, *key, *v;
    Py_ssize_t pos = 0;
    int rc = -1, stored = 0;
    if (tx->input_sources == NULL || tx->input_values == NULL || tx->by_id == NULL) {
        return 0;
    }
    srcs = PyList_New(0);
    objs = PyList_New(0);
    cells = PyList_New(0);
    if (srcs == NULL || objs == NULL || cells == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tx->input_sources) &&
                           i < PyList_GET_SIZE(tx->input_values); i++) {
        PyObject *src = PyList_GET_ITEM(tx->input_sources, i);
        if (cdyn_is_tensor(PyList_GET_ITEM(tx->input_values, i)) &&
            ((cdyn_source *)src)->kind != CDYN_SRC_CALL && PyList_Append(srcs, src) < 0) {
            goto done;
        }
    }
    /* the mutable objects of the frame (one value each, wrap.c): a trace that stored into
       one of two distinct objects and read the other is not right for one object twice */
    while (PyDict_Next(tx->by_id, &pos, &key, &v)) {
        cdyn_source *src = (cdyn_source *)V(v)->source;
        cdyn_vkind k = V(v)->kind;
        if (src != NULL && src->kind != CDYN_SRC_CALL &&
            (k == VK_OBJECT || k == VK_LIST || k == VK_DICT || k == VK_SET) &&
            PyList_Append(objs, (PyObject *)src) < 0) {
            goto done;
        }
        /* the real closure cells (values/misc.c): when the trace stored into one, the
           others it reached must not be that cell under another name */
        if (k == VK_CELL && src != NULL && PyList_Append(cells, (PyObject *)src) < 0) {
            goto done;
        }
        stored |= k == VK_CELL && (V(v)->bits & CELL_STORED) != 0;
    }
    rc = 0;
    if (PyList_GET_SIZE(srcs) >= 2) {
        tup = PyList_AsTuple(srcs);
        rc = tup == NULL ? -1 : cdyn_guards_add_distinct(tx->guards, tup);
        Py_CLEAR(tup);
    }
    if (rc == 0 && PyList_GET_SIZE(objs) >= 2) {
        tup = PyList_AsTuple(objs);
        rc = tup == NULL ? -1 : cdyn_guards_add_distinct(tx->guards, tup);
        Py_CLEAR(tup);
    }
    if (rc == 0 && stored && PyList_GET_SIZE(cells) >= 2) {
        tup = PyList_AsTuple(cells);
        rc = tup == NULL ? -1 : cdyn_guards_add_distinct(tx->guards, tup);
    }
done:
    Py_XDECREF(srcs);
    Py_XDECREF(objs);
    Py_XDECREF(cells);
    Py_XDECREF(tup);
    return rc;
}
