/* values/nnmodule.c: torch.nn.Modules.
 *
 * A module is ID_MATCHed through its source; its parameters and buffers become get_attr
 * nodes (graph.c), its submodules are modules again, other attributes are wrapped with
 * their own guards. Calling a module inlines its forward; a leaf module of torch.nn
 * (Linear, Conv2d, ...) is inlined too (functional calls on its parameters) and recorded
 * as one call_module node only when that fails. Sequential/ModuleList/ModuleDict iterate
 * over their children (the loop is unrolled; the number of children is guarded). */
#include "../tx.h"
#include "../codegen.h"

static PyObject *
mobj(PyObject *v)
{
    return V(v)->u.obj.obj;
}

static int
is_container(PyObject *mod)
{
    return PyObject_TypeCheck(mod, (PyTypeObject *)cdyn_G.modulelist_type) ||
           PyObject_TypeCheck(mod, (PyTypeObject *)cdyn_G.sequential_type);
}

/* Look name up on the module: parameters, buffers, submodules, then plain attributes. */
static tr_status
module_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *mod = mobj(v), *src = NULL, *attr = NULL;
    PyObject *const dicts[3] = {cdyn_G.s_parameters, cdyn_G.s_buffers, cdyn_G.s_modules};
    tr_status st = cdyn_tx_memo_attr(tx, v, name, &src, out);
    if (st != TR_OK || *out != NULL) {
        Py_XDECREF(src);
        return st;
    }
    st = TR_ERROR;
    for (int i = 0; i < 3; i++) {
        PyObject *d = PyObject_GetAttr(mod, dicts[i]), *found = NULL;
        if (d == NULL) {
            PyErr_Clear();
            continue;
        }
        found = PyDict_Check(d) ? PyDict_GetItemWithError(d, name) : NULL;
        Py_XINCREF(found);
        Py_DECREF(d);
        if (found == NULL && PyErr_Occurred()) {
            goto done;
        }
        if (found == Py_None) {
            Py_DECREF(found);
            break;   /* a registered None parameter: a constant below */
        }
        if (found != NULL) {
            /* parameters and buffers: get_attr nodes; a submodule: ID_MATCHed (read
               through _modules, source.c), so swapping it recompiles */
            st = i < 2 ? cdyn_tx_wrap_module_tensor(tx, found, src, out)
                       : cdyn_tx_wrap_real(tx, found, src, out);
            Py_DECREF(found);
            goto done;
        }
    }
    attr = PyObject_GetAttr(mod, name);
    if (attr == NULL) {
        st = cdyn_tx_unsupported(tx, "module attribute %U", name);
        goto done;
    }
    if (PyMethod_Check(attr) && PyMethod_GET_SELF(attr) == mod &&
        PyFunction_Check(PyMethod_GET_FUNCTION(attr))) {
        *out = cdyn_value_method(PyMethod_GET_FUNCTION(attr), name, v);
        st = *out ? TR_OK : TR_ERROR;
        goto done;
    }
    st = cdyn_tx_wrap_real(tx, attr, src, out);
done:
    Py_XDECREF(src);
    Py_XDECREF(attr);
    return st;
}

/* The children of a Sequential/ModuleList/ModuleDict, by registered name (getattr(seq,
 * "0")): guards read them from _modules directly (source.c), much cheaper than
 * ModuleList.__getitem__. Their number is guarded. New list of values. */
static tr_status
module_children(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    PyObject *mods = PyObject_GetAttr(mobj(v), cdyn_G.s_modules), *l = NULL, *k, *m;
    Py_ssize_t pos = 0;
    tr_status st = TR_ERROR;
    if (mods == NULL) {
        return TR_ERROR;
    }
    if (!PyDict_Check(mods)) {
        Py_DECREF(mods);
        return cdyn_tx_unsupported(tx, "module without a _modules dict");
    }
    if (V(v)->source != NULL &&
        cdyn_guards_add_len(tx->guards, V(v)->source, PyDict_GET_SIZE(mods)) < 0) {
        goto done;
    }
    l = PyList_New(0);
    if (l == NULL) {
        goto done;
    }
    while (PyDict_Next(mods, &pos, &k, &m)) {
        PyObject *src = NULL, *c = NULL;
        if (V(v)->source != NULL && (src = cdyn_source_attr(V(v)->source, k)) == NULL) {
            goto done;
        }
        st = cdyn_tx_wrap_real(tx, m, src, &c);   /* ID_MATCHed when it has a source */
        Py_XDECREF(src);
        if (st != TR_OK) {
            goto done;
        }
        st = TR_ERROR;
        if (PyList_Append(l, c) < 0) {
            Py_DECREF(c);
            goto done;
        }
        Py_DECREF(c);
    }
    *out_list = l;
    l = NULL;
    st = TR_OK;
done:
    Py_XDECREF(l);
    Py_DECREF(mods);
    return st;
}

static tr_status
module_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    if (!is_container(mobj(v))) {
        return cdyn_tx_unsupported(tx, "iteration over a %s", Py_TYPE(mobj(v))->tp_name);
    }
    return module_children(tx, v, out_list);
}

/* container[i] (the child under its registered name) and container[a:b] (a list of the
 * children, typed as the container for isinstance; it cannot be rebuilt). */
static tr_status
module_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out)
{
    PyObject *k, *sub = NULL, *src = NULL;
    tr_status st;
    if (V(key)->kind != VK_CONST) {
        return cdyn_tx_unsupported(tx, "module subscript with a non-constant key");
    }
    k = V(key)->u.cnst.value;
    if (PySlice_Check(k) && is_container(mobj(v))) {
        PyObject *children = NULL, *sl = NULL;
        st = module_children(tx, v, &children);
        if (st != TR_OK) {
            return st;
        }
        sl = PyObject_GetItem(children, k);
        Py_DECREF(children);
        if (sl == NULL) {
            return TR_ERROR;
        }
        *out = cdyn_value_seq_list(VK_LIST, sl);
        Py_DECREF(sl);
        if (*out == NULL) {
            return TR_ERROR;
        }
        V(*out)->u.seq.nt_type = Py_NewRef((PyObject *)Py_TYPE(mobj(v)));
        return TR_OK;
    }
    sub = PyObject_GetItem(mobj(v), k);
    if (sub == NULL) {
        return cdyn_tx_unsupported(tx, "module subscript failed");
    }
    if (!cdyn_is_nn_module(sub)) {
        Py_DECREF(sub);
        return cdyn_tx_unsupported(tx, "module subscript that is not a module");
    }
    if (V(v)->source != NULL) {
        PyObject *name = PyLong_Check(k) ? PyObject_Str(k) : NULL;
        int by_name = 0;
        if (name != NULL) {
            /* the child under its registered name, when that is what [i] returned */
            PyObject *mods = PyObject_GetAttr(mobj(v), cdyn_G.s_modules);
            PyObject *child = mods && PyDict_Check(mods) ? PyDict_GetItemWithError(mods, name)
                                                        : NULL;
            by_name = child == sub;
            Py_XDECREF(mods);
            PyErr_Clear();
        }
        if (by_name) {
            src = cdyn_source_attr(V(v)->source, name);
        }
        else if (PyLong_Check(k) || PyUnicode_Check(k)) {
            src = cdyn_source_item(V(v)->source, k);
        }
        else {
            Py_XDECREF(name);
            Py_DECREF(sub);
            return cdyn_tx_unsupported(tx, "module subscript with %R", k);
        }
        Py_XDECREF(name);
        if (src == NULL) {
            Py_DECREF(sub);
            return TR_ERROR;
        }
    }
    st = cdyn_tx_wrap_real(tx, sub, src, out);
    Py_DECREF(sub);
    Py_XDECREF(src);
    return st;
}

static tr_status
module_len(cdyn_tx *tx, PyObject *v, Py_ssize_t *out)
{
    Py_ssize_t n = PyObject_Length(mobj(v));
    if (n < 0) {
        return cdyn_tx_unsupported(tx, "len() of %S", v);
    }
    *out = n;
    return TR_OK;
}

static tr_status
module_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    int r = PyObject_IsTrue(mobj(v));
    if (r < 0) {
        return cdyn_tx_unsupported(tx, "truth value failed");
    }
    *out = r;
    return TR_OK;
}

/* ---- calls ---------------------------------------------------------------------------------- */

/* 1 when the module is a leaf from torch.nn (recorded as call_module as a fallback). */
static int
is_torch_leaf_module(PyObject *mod)
{
    PyObject *m = PyObject_GetAttr((PyObject *)Py_TYPE(mod), cdyn_G.s_module);
    int r = 0;
    if (m == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (PyUnicode_Check(m)) {
        const char *s = PyUnicode_AsUTF8(m);
        r = s != NULL && strncmp(s, "torch.nn.", 9) == 0;
        PyErr_Clear();
    }
    Py_DECREF(m);
    if (is_container(mod) || PyObject_TypeCheck(mod, (PyTypeObject *)cdyn_G.moduledict_type)) {
        return 0;
    }
    return r;
}

static int
has_hooks(PyObject *mod)
{
    PyObject *names[2] = {cdyn_G.s_forward_hooks, cdyn_G.s_forward_pre_hooks};
    for (int i = 0; i < 2; i++) {
        PyObject *d = PyObject_GetAttr(mod, names[i]);
        int r = 0;
        if (d == NULL) {
            PyErr_Clear();
            continue;
        }
        r = PyObject_Length(d) > 0;
        PyErr_Clear();
        Py_DECREF(d);
        if (r) {
            return 1;
        }
    }
    return 0;
}

/* Sequential(x): the children called in turn. */
static tr_status
call_sequential(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *arg, PyObject **out)
{
    PyObject *children = NULL, *cur = Py_NewRef(arg);
    tr_status st = module_children(tx, v, &children);
    for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(children); i++) {
        PyObject *next = NULL;
        st = cdyn_v_call(tx, fs, PyList_GET_ITEM(children, i), &cur, 1, NULL, &next);
        Py_DECREF(cur);
        cur = next;
    }
    Py_XDECREF(children);
    if (st != TR_OK) {
        Py_XDECREF(cur);
        return st;
    }
    *out = cur;
    return TR_OK;
}

/* A torch.nn leaf module: its forward inlined (functional calls on its parameters, no
 * nn.Module call at run time, as torch._dynamo); if that fails, undone and recorded as one
 * call_module node instead. */
static tr_status
call_leaf(cdyn_tx *tx, PyObject *v, PyObject *fwd, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames, PyObject **out)
{
    PyObject *mod = mobj(v), *name = NULL;
    tr_status st;
    if (V(v)->source == NULL) {
        return cdyn_tx_unsupported(tx, "call of a module with no source");
    }
    if (PyFunction_Check(fwd)) {
        cdyn_ckpt ck;
        long long saved_serial = tx->ckpt_serial;
        int fall_back = 0;
        cdyn_tx_ckpt_take(tx, &ck);
        st = cdyn_tx_inline_function(tx, fwd, NULL, v, args, nargs, kwnames, out);
        if (st == TR_UNSUPPORTED) {
            st = cdyn_tx_ckpt_restore(tx, &ck);
            if (st == TR_OK) {
                cdyn_log(10, "inlining %S failed (%U): recorded as call_module", v,
                         tx->reason ? tx->reason : Py_None);
                Py_CLEAR(tx->reason);
                fall_back = 1;
            }
        }
        tx->ckpt_serial = saved_serial;
        cdyn_tx_ckpt_clear(&ck);
        if (!fall_back) {
            return st;
        }
    }
    name = cdyn_sanitized_name(V(v)->source);
    if (name == NULL || PyDict_SetItem(tx->root, name, mod) < 0) {
        Py_XDECREF(name);
        return TR_ERROR;
    }
    st = cdyn_tx_graph_call(tx, "call_module", name, mod, args, nargs, kwnames, out);
    Py_DECREF(name);
    return st;
}

static tr_status
module_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames, PyObject **out)
{
    PyObject *mod = mobj(v), *fwd = NULL;
    tr_status st;
    if (has_hooks(mod)) {
        return cdyn_tx_unsupported(tx, "nn.Module with forward hooks");
    }
    if (PyObject_TypeCheck(mod, (PyTypeObject *)cdyn_G.sequential_type) && nargs == 1 &&
        kwnames == NULL) {
        return call_sequential(tx, fs, v, args[0], out);
    }
    fwd = PyObject_GetAttr((PyObject *)Py_TYPE(mod), cdyn_G.s_forward);
    if (fwd == NULL) {
        return TR_ERROR;
    }
    if (is_torch_leaf_module(mod)) {
        st = call_leaf(tx, v, fwd, args, nargs, kwnames, out);
    }
    else if (!PyFunction_Check(fwd)) {
        st = cdyn_tx_unsupported(tx, "module forward is not a Python function");
    }
    else {
        st = cdyn_tx_inline_function(tx, fwd, NULL, v, args, nargs, kwnames, out);
    }
    Py_DECREF(fwd);
    return st;
}

static tr_status
module_setattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    return cdyn_setattr_replayed(tx, v, name, value);
}

static tr_status
module_store_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value)
{
    return cdyn_store_subscr_replayed(tx, v, key, value);
}

const cdyn_vtable cdyn_nnmodule_vt = {
    .name = "NNModuleVariable",
    .getattr = module_getattr,
    .setattr = module_setattr,
    .call = module_call,
    .truth = module_truth,
    .unpack = module_unpack,
    .subscr = module_subscr,
    .store_subscr = module_store_subscr,
    .len = module_len,
    .python_type = cdyn_python_type_obj,
    .collect = cdyn_collect_nothing,
    .reconstruct = cdyn_reconstruct_obj,
};
