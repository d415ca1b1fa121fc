/* values/nnmodule.c: torch.nn.Modules.
 *
 * A module is guarded by its type and by what the trace read from it (NN_MODULE: exact
 * type, no forward of its own, its hooks as at trace time; attributes through their
 * sources), not by identity: its parameters and buffers are graph inputs read through
 * their sources (graph.c), so one compiled entry serves every instance of a layer class
 * (torch._dynamo's inline_inbuilt_nn_modules). Its submodules are modules again, other
 * attributes are wrapped with their own guards. What bakes the instance in (a call_module
 * node, an identity test, a dict key) pins it by ID_MATCH (cdyn_v_pin_identity). Calling a module inlines its forward; a leaf module of torch.nn
 * (Linear, Conv2d, ...) is inlined too (functional calls on its parameters) and recorded
 * as one call_module node only when that fails. Sequential/ModuleList/ModuleDict iterate
 * over their children (the loop is unrolled; the number of children is guarded).
 *
 * Hooks (as torch._dynamo 2.13): a module with forward hooks or forward pre-hooks, its own or
 * global (register_module_forward_hook, ...), is called by inlining nn.Module._call_impl, so
 * the hooks are inlined user functions and their results replace the arguments and the output
 * exactly as in eager. Its hook registries are read by position (hook_registry: LENGTH_CHECK,
 * each hook through its entry source; the hook ids are not guarded, so one trace serves
 * every instance with hooks of the same code), the global registries through one
 * GLOBAL_STATE guard that every traced module call adds (a global hook registered later
 * recompiles). Backward hooks (module or global) keep the call a graph break: it runs in
 * Python, where autograd sees torch's BackwardHook. */
#include "../tx.h"
#include "../codegen.h"
#include "hop.h"
#include "user.h"

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

/* nn.Module's generator methods answered by the family (when the class does not override
 * them): the loop over them is unrolled like a ModuleList's. */
static const char *const gen_names[] = {"children", "named_children", "modules", "named_modules",
                                        "parameters", "named_parameters", "buffers",
                                        "named_buffers", NULL};
static PyObject *gen_funcs[8];   /* nn.Module.<name> functions, resolved on first use */

/* Index into gen_names of the nn.Module generator method `func` (a function), or -1. */
static int
gen_method_index(PyObject *func)
{
    if (gen_funcs[0] == NULL) {
        for (int i = 0; gen_names[i]; i++) {
            gen_funcs[i] = PyObject_GetAttrString(cdyn_G.nn_module_type, gen_names[i]);
            if (gen_funcs[i] == NULL) {
                PyErr_Clear();
                return -1;
            }
        }
    }
    for (int i = 0; gen_names[i]; i++) {
        if (func == gen_funcs[i]) {
            return i;
        }
    }
    return -1;
}

/* ---- hook registries ------------------------------------------------------------------- */

/* The registries nn.Module._call_impl reads: the hook dicts (0-3) and the id sets of the hooks
 * registered with_kwargs / always_call (4-6). */
static const char *const registry_names[] = {
    "_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
    "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs",
    "_forward_hooks_always_called", NULL};
static PyObject *registry_strs[8];

/* Borrowed: the interned name of registry i, or NULL (no exception) when it cannot be made. */
static PyObject *
registry_str(int i)
{
    if (registry_strs[i] == NULL &&
        (registry_strs[i] = PyUnicode_InternFromString(registry_names[i])) == NULL) {
        PyErr_Clear();
    }
    return registry_strs[i];
}

/* Index of name in registry_names, or -1. */
static int
registry_index(PyObject *name)
{
    for (int i = 0; registry_names[i] != NULL; i++) {
        if (cdyn_name_is(name, registry_names[i])) {
            return i;
        }
    }
    return -1;
}

/* Registry `which` of a module with a source (real: the dict, src its source), read by
 * position as torch._dynamo's NNModuleHooksDictVariable: a DICT value of its type whose keys
 * are the hook ids as constants, not guarded (each registration makes a new id, so another
 * instance with the same hooks has other keys), its length guarded and each hook read through
 * its entry source (list(d.values())[i]), so the trace serves every instance whose hooks have
 * the same code; it cannot be changed by the trace (DICT_BY_POSITION). The id sets (4-6) are
 * read so too, their keys related to the hook dict's by position (id_set_positions): a hook
 * registered with_kwargs or always_call on every instance (FSDP2's pre-hook, for one) is then
 * not a recompile per instance; an id set whose keys are not all keys of its hook dict
 * (*out NULL) is read as an input dict, whose keys are guarded. */

/* The hook dict whose ids id set `which` (4-6) holds: _forward_hooks for
 * _forward_hooks_with_kwargs and _forward_hooks_always_called, _forward_pre_hooks for
 * _forward_pre_hooks_with_kwargs (the indices of registry_names). */
static int
id_set_hook_dict(int which)
{
    return which == 5 ? 1 : 0;
}

/* Guard a non-empty id set W (real, at src) of the module mod (at msrc) by position: for
 * each key of W, the key of W's hook dict H at the same object, its position p there; the
 * guard: W's key j is (SAME_OBJECT) H's key p_j. With W's length and H's length (guarded
 * where _call_impl reads H) that fixes which of H's hooks W holds, whatever their ids, so
 * `hook_id in W` answers by position, as torch._dynamo's NNModuleHooksDictVariable (which
 * guards only W's length). 1 guarded; 0 when a key of W is not a key of H (or H is not a
 * dict): read W otherwise; -1 error. */
static int
id_set_positions(cdyn_tx *tx, int which, PyObject *real, PyObject *src, PyObject *mod,
                 PyObject *msrc)
{
    PyObject *hname = registry_str(id_set_hook_dict(which)), *h = NULL, *hsrc = NULL;
    PyObject *hkeys = NULL, *wkeys = NULL;
    Py_ssize_t nw, nh, *pos = NULL;
    int r = -1;
    if (hname == NULL || msrc == NULL) {
        return 0;
    }
    if ((h = PyObject_GetAttr(mod, hname)) == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (!PyDict_Check(h)) {
        r = 0;
        goto done;
    }
    if ((hkeys = PyDict_Keys(h)) == NULL || (wkeys = PyDict_Keys(real)) == NULL ||
        (hsrc = cdyn_source_attr(msrc, hname)) == NULL) {
        goto done;
    }
    /* all of W's keys first, then the guards (none added when one is missing) */
    nw = PyList_GET_SIZE(wkeys);
    nh = PyList_GET_SIZE(hkeys);
    pos = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(nw ? nw : 1));
    if (pos == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    r = 1;
    for (Py_ssize_t j = 0; r == 1 && j < nw; j++) {
        pos[j] = -1;
        for (Py_ssize_t p = 0; p < nh; p++) {
            if (PyList_GET_ITEM(hkeys, p) == PyList_GET_ITEM(wkeys, j)) {
                pos[j] = p;
                break;
            }
        }
        r = pos[j] >= 0;
    }
    for (Py_ssize_t j = 0; r == 1 && j < nw; j++) {
        PyObject *wk = cdyn_source_entry(src, j, 0), *hk = NULL;
        hk = wk ? cdyn_source_entry(hsrc, pos[j], 0) : NULL;
        if (hk == NULL || cdyn_guards_add_same(tx->guards, wk, hk) < 0) {
            r = -1;
        }
        Py_XDECREF(wk);
        Py_XDECREF(hk);
    }
    PyMem_Free(pos);
done:
    Py_XDECREF(h);
    Py_XDECREF(hsrc);
    Py_XDECREF(hkeys);
    Py_XDECREF(wkeys);
    return r;
}

static tr_status
hook_registry(cdyn_tx *tx, int which, PyObject *real, PyObject *src, PyObject *mod,
              PyObject *msrc, PyObject **out)
{
    PyObject *d = NULL, *items = NULL;
    Py_ssize_t n = PyDict_GET_SIZE(real);
    tr_status st = TR_ERROR;
    *out = NULL;
    if (which >= 4 && n > 0) {
        int r = id_set_positions(tx, which, real, src, mod, msrc);
        if (r <= 0) {
            return r < 0 ? TR_ERROR : TR_OK;
        }
    }
    if ((items = PyMapping_Items(real)) == NULL || (d = cdyn_dict_new(Py_TYPE(real))) == NULL) {
        goto done;
    }
    V(d)->source = Py_NewRef(src);
    V(d)->bits |= DICT_BY_POSITION;
    if (cdyn_guards_add_type(tx->guards, src, Py_TYPE(real)) < 0 ||
        cdyn_guards_add_len(tx->guards, src, n) < 0) {
        goto done;
    }
    st = TR_OK;
    for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(items); i++) {
        PyObject *kv = PyList_GET_ITEM(items, i), *key = NULL, *hook = NULL;
        PyObject *esrc = cdyn_source_entry(src, i, 1);
        if (esrc == NULL || !cdyn_is_constant(PyTuple_GET_ITEM(kv, 0))) {
            st = esrc == NULL ? TR_ERROR : cdyn_tx_unsupported(tx, "a hook registry keyed by %R",
                                                                PyTuple_GET_ITEM(kv, 0));
            Py_XDECREF(esrc);
            break;
        }
        key = cdyn_value_const(PyTuple_GET_ITEM(kv, 0));
        st = key ? cdyn_tx_wrap_real(tx, PyTuple_GET_ITEM(kv, 1), esrc, &hook) : TR_ERROR;
        if (st == TR_OK) {
            st = cdyn_dict_set(tx, d, key, hook);
        }
        Py_XDECREF(key);
        Py_XDECREF(hook);
        Py_DECREF(esrc);
    }
    if (st == TR_OK && cdyn_tx_memo_source(tx, src, d) < 0) {
        st = TR_ERROR;
    }
    if (st == TR_OK) {
        *out = d;
        d = NULL;
    }
done:
    Py_XDECREF(d);
    Py_XDECREF(items);
    return st;
}

/* 1 when object.__getattribute__ finds name on mod (its class defines it, or its instance
 * dict has it), so nn.Module.__getattr__ (parameters, buffers, submodules) is not asked; 0
 * when not; -1 on error. */
static int
generic_lookup_finds(PyObject *mod, PyObject *name)
{
    PyObject **dictptr = _PyObject_GetDictPtr(mod);
    if (_PyType_Lookup(Py_TYPE(mod), name) != NULL) {
        return 1;
    }
    if (dictptr == NULL || *dictptr == NULL || !PyDict_Check(*dictptr)) {
        return 0;
    }
    return PyDict_GetItemWithError(*dictptr, name) != NULL ? 1 : PyErr_Occurred() ? -1 : 0;
}

/* The value this trace has for registry i (0 _parameters, 1 _buffers, 2 _modules) of the
 * module mod whose source is msrc: the one wrapped through msrc.<registry>, or the one the
 * trace changed through another name of the same dict (the module reached as self and as a
 * bound method's __self__ on a resume function's stack); borrowed, NULL when the trace has
 * none (or on error). */
static PyObject *
traced_registry(cdyn_tx *tx, PyObject *mod, PyObject *msrc, int i)
{
    PyObject *rname = i == 0 ? cdyn_G.s_parameters : i == 1 ? cdyn_G.s_buffers
                                                            : cdyn_G.s_modules;
    PyObject *rsrc = cdyn_source_attr(msrc, rname), *d = NULL, *real = NULL, *key = NULL;
    PyObject **dictptr = _PyObject_GetDictPtr(mod);
    if (rsrc == NULL) {
        return NULL;
    }
    d = PyDict_GetItemWithError(tx->by_source, cdyn_source_repr(rsrc));   /* borrowed */
    Py_DECREF(rsrc);
    if (d != NULL || PyErr_Occurred()) {
        return d;
    }
    real = dictptr && *dictptr ? PyDict_GetItemWithError(*dictptr, rname) : NULL;
    key = real ? PyLong_FromVoidPtr(real) : NULL;
    d = key ? PyDict_GetItemWithError(tx->by_id, key) : NULL;
    Py_XDECREF(key);
    /* under another name, only when the trace changed it (what it only read, the real
       registry answers as well) */
    return d != NULL && V(d)->kind == VK_DICT && (V(d)->bits & SEQ_SYNCED) ? d : NULL;
}

/* name in registry i (0 _parameters, 1 _buffers, 2 _modules) of the module mod whose source
 * is msrc, as this trace left it: 1 with *out the value (None included) when the trace has the
 * registry (register_buffer, add_module, ... inlined stored into it), 0 when it has not (the
 * real registry answers), -1 unsupported/error (status in *st). A name not in a traced
 * registry: 1 with *out NULL. */
static int
traced_registry_get(cdyn_tx *tx, PyObject *mod, PyObject *msrc, int i, PyObject *name,
                    PyObject **out, tr_status *st)
{
    PyObject *d = traced_registry(tx, mod, msrc, i), *key = NULL;
    int has = 0;
    *out = NULL;
    *st = TR_OK;
    if (d == NULL) {
        if (PyErr_Occurred()) {
            *st = TR_ERROR;
            return -1;
        }
        return 0;
    }
    if ((key = cdyn_value_const(name)) == NULL) {
        *st = TR_ERROR;
        return -1;
    }
    *st = cdyn_v_contains(tx, d, key, &has);
    if (*st == TR_OK && has) {
        *st = cdyn_v_subscr(tx, d, key, out);
    }
    Py_DECREF(key);
    return *st == TR_OK ? 1 : -1;
}

/* A property of the module's class read after this trace changed state, or the
 * parametrized tensor of torch.nn.utils.parametrize (computed by its parametrization
 * modules: their ops belong in the graph, as torch._dynamo traces them): its getter is
 * inlined on the traced module (the real property would read the state from before the
 * trace, or run outside the graph). *done = 0 when name is no such property. */
static tr_status
traced_property(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out, int *done)
{
    PyObject *d = _PyType_Lookup(Py_TYPE(mobj(v)), name), *fget;
    tr_status st;
    *done = 0;
    if (d == NULL || Py_TYPE(d) != &PyProperty_Type) {
        return TR_OK;
    }
    fget = PyObject_GetAttrString(d, "fget");
    if (fget == NULL) {
        return TR_ERROR;
    }
    if (!PyFunction_Check(fget) ||
        (tx->mutations == 0 && !cdyn_module_startswith(fget, "torch.nn.utils.parametrize"))) {
        Py_DECREF(fget);
        return TR_OK;
    }
    *done = 1;
    st = cdyn_tx_inline_function(tx, fget, NULL, v, NULL, 0, NULL, out);
    Py_DECREF(fget);
    return st;
}

/* Look name up on the module as Python does: what the class defines or the instance dict
 * holds (a method of the class wins over a submodule of the same name), then parameters,
 * buffers and submodules (nn.Module.__getattr__). */
static tr_status
module_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *mod = mobj(v), *src = NULL, *attr = NULL;
    PyObject *const dicts[3] = {cdyn_G.s_parameters, cdyn_G.s_buffers, cdyn_G.s_modules};
    int which, generic;
    tr_status st;
    if (tx->param_overrides != NULL) {
        /* inside functional_call: the tensor given for this module's parameter / buffer */
        PyObject *key = Py_BuildValue("(nO)", (Py_ssize_t)mod, name), *o;
        o = key ? PyDict_GetItemWithError(tx->param_overrides, key) : NULL;
        Py_XDECREF(key);
        if (o != NULL) {
            *out = Py_NewRef(o);
            return TR_OK;
        }
        if (PyErr_Occurred()) {
            return TR_ERROR;
        }
    }
    if (tx->mutations > 0) {
        /* a property read again after the trace changed state: not the value an earlier
           read remembered (a setter may have run since) */
        int done = 0;
        st = traced_property(tx, v, name, out, &done);
        if (st != TR_OK || done) {
            return st;
        }
    }
    st = cdyn_tx_memo_attr(tx, v, name, &src, out);
    if (st != TR_OK || *out != NULL) {
        Py_XDECREF(src);
        return st;
    }
    {
        int done = 0;
        st = traced_property(tx, v, name, out, &done);
        if (st != TR_OK || done) {
            Py_XDECREF(src);
            return st;
        }
    }
    if (src != NULL && (which = registry_index(name)) >= 0) {
        attr = PyObject_GetAttr(mod, name);
        if (attr == NULL) {
            PyErr_Clear();   /* read below as any other attribute */
        }
        st = attr != NULL && PyDict_Check(attr) ? hook_registry(tx, which, attr, src, mod,
                                                                V(v)->source, out)
                                                : TR_OK;
        if (st != TR_OK || *out != NULL) {
            goto done;
        }
        Py_CLEAR(attr);
    }
    st = TR_ERROR;
    generic = generic_lookup_finds(mod, name);
    if (generic < 0) {
        goto done;
    }
    for (int i = 0; i < 3 && !generic; i++) {
        PyObject *d = NULL, *found = NULL;
        int traced = V(v)->source != NULL
                         ? traced_registry_get(tx, mod, V(v)->source, i, name, out, &st) : 0;
        if (traced < 0) {
            goto done;
        }
        if (traced > 0) {
            if (*out != NULL) {
                goto done;   /* this trace's registry has it (None included) */
            }
            continue;
        }
        d = PyObject_GetAttr(mod, dicts[i]);
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
        PyObject *func = PyMethod_GET_FUNCTION(attr);
        *out = cdyn_value_method(gen_method_index(func) >= 0 ? NULL : func, name, v);
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

/* len(module) (a ModuleList, Sequential, ModuleDict, or a class with __len__), guarded
 * (LENGTH_CHECK through its source): another instance of the class may have another. */
static tr_status
module_len(cdyn_tx *tx, PyObject *v, Py_ssize_t *out)
{
    Py_ssize_t n = PyObject_Length(mobj(v));
    if (n < 0) {
        PyErr_Clear();
        return cdyn_tx_unsupported(tx, "len() of %S", v);
    }
    if (V(v)->source != NULL && cdyn_guards_add_len(tx->guards, V(v)->source, n) < 0) {
        return TR_ERROR;
    }
    *out = n;
    return TR_OK;
}

/* `key in module`: the class's Python __contains__ inlined (ModuleDict's `key in
 * self._modules`, ParameterDict's), its result's truth, as CPython's `in`. */
static tr_status
module_contains(cdyn_tx *tx, PyObject *v, PyObject *item, int *out)
{
    static PyObject *s_contains;
    PyObject *fn, *r = NULL;
    tr_status st;
    if (s_contains == NULL && (s_contains = PyUnicode_InternFromString("__contains__")) == NULL) {
        return TR_ERROR;
    }
    fn = _PyType_Lookup(Py_TYPE(mobj(v)), s_contains);   /* borrowed */
    if (fn == NULL || !PyFunction_Check(fn)) {
        return cdyn_tx_unsupported(tx, "'in' of %S (no Python __contains__)", v);
    }
    Py_INCREF(fn);
    st = cdyn_tx_inline_function(tx, fn, NULL, v, &item, 1, NULL, &r);
    Py_DECREF(fn);
    if (st == TR_OK) {
        st = cdyn_v_truth(tx, r, out);
    }
    Py_XDECREF(r);
    return st;
}

/* bool(module): by its __len__ when the class has one (guarded as len()), else true. */
static tr_status
module_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    PyTypeObject *tp = Py_TYPE(mobj(v));
    Py_ssize_t n = 1;
    if (tp->tp_as_number != NULL && tp->tp_as_number->nb_bool != NULL) {
        return cdyn_tx_unsupported(tx, "truth value of %S (its class defines __bool__)", v);
    }
    if ((tp->tp_as_sequence != NULL && tp->tp_as_sequence->sq_length != NULL) ||
        (tp->tp_as_mapping != NULL && tp->tp_as_mapping->mp_length != NULL)) {
        tr_status st = module_len(tx, v, &n);
        if (st != TR_OK) {
            return st;
        }
    }
    *out = n != 0;
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

/* What a module call of mod runs besides forward, as bits: HOOK_FORWARD forward hooks or
 * pre-hooks, HOOK_BACKWARD backward hooks or pre-hooks, HOOK_ALWAYS forward hooks registered
 * with always_call (the module's own registries; -1 with an exception: no memory). */
enum { HOOK_FORWARD = 1, HOOK_BACKWARD = 2, HOOK_ALWAYS = 4 };

static int
module_hooks(PyObject *mod)
{
    static const int bits[5] = {HOOK_FORWARD, HOOK_FORWARD, HOOK_BACKWARD, HOOK_BACKWARD,
                                HOOK_ALWAYS};
    static const int names[5] = {0, 1, 2, 3, 6};   /* registry_names */
    int r = 0;
    for (int i = 0; i < 5; i++) {
        PyObject *name = registry_str(names[i]), *d;
        if (name == NULL) {
            return -1;
        }
        d = PyObject_GetAttr(mod, name);
        if (d == NULL) {
            PyErr_Clear();
            continue;
        }
        if (PyObject_Length(d) > 0) {
            r |= bits[i];
        }
        PyErr_Clear();
        Py_DECREF(d);
    }
    return r;
}

/* The global hook registries of torch.nn.modules.module, in the order of global_hook_bits. */
static const char *const global_hook_names[] = {
    "_global_backward_pre_hooks", "_global_backward_hooks", "_global_forward_pre_hooks",
    "_global_forward_hooks", "_global_forward_hooks_with_kwargs",
    "_global_forward_hooks_always_called", NULL};
static const int global_hook_bits[] = {HOOK_BACKWARD, HOOK_BACKWARD, HOOK_FORWARD, HOOK_FORWARD,
                                       0, HOOK_ALWAYS};
#define N_GLOBAL_HOOKS 6

/* The state of the global registries, kept while the module's globals and every registry
 * are unchanged (their PEP 509 version tags): `state` is a tuple of one tuple of (id, hook)
 * pairs per registry; all references strong. */
static struct {
    PyObject *globals;                     /* torch.nn.modules.module's dict */
    uint64_t globals_tag;
    PyObject *dicts[N_GLOBAL_HOOKS];
    uint64_t tags[N_GLOBAL_HOOKS];
    PyObject *state;
} GH;

/* Read the global registries anew into GH. 0 / -1. */
static int
global_hooks_read(void)
{
    PyObject *state = PyTuple_New(N_GLOBAL_HOOKS);
    if (state == NULL) {
        return -1;
    }
    if (GH.globals == NULL) {
        PyObject *m = PyImport_ImportModule("torch.nn.modules.module");
        GH.globals = m ? Py_NewRef(PyModule_GetDict(m)) : NULL;
        Py_XDECREF(m);
        if (GH.globals == NULL) {
            Py_DECREF(state);
            return -1;
        }
    }
    for (int i = 0; i < N_GLOBAL_HOOKS; i++) {
        PyObject *d = PyDict_GetItemString(GH.globals, global_hook_names[i]), *items, *t;
        if (d == NULL || !PyDict_Check(d)) {
            Py_DECREF(state);
            PyErr_Format(PyExc_RuntimeError, "torch.nn.modules.module.%s is not a dict",
                         global_hook_names[i]);
            return -1;
        }
        items = PyMapping_Items(d);
        t = items ? PyList_AsTuple(items) : NULL;
        Py_XDECREF(items);
        if (t == NULL) {
            Py_DECREF(state);
            return -1;
        }
        PyTuple_SET_ITEM(state, i, t);
        Py_XSETREF(GH.dicts[i], Py_NewRef(d));
        GH.tags[i] = cdyn_dict_version_tracked(d);
    }
    GH.globals_tag = cdyn_dict_version_tracked(GH.globals);
    Py_XSETREF(GH.state, state);
    return 0;
}

/* ___global_module_hooks(): the state of the global hook registries (a new reference to the
 * same tuple while nothing changed). The GLOBAL_STATE guard of every traced module call. */
static PyObject *
py_global_hooks(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(args))
{
    int fresh = GH.state != NULL &&
                cdyn_dict_version(GH.globals) == GH.globals_tag;
    for (int i = 0; fresh && i < N_GLOBAL_HOOKS; i++) {
        fresh = cdyn_dict_version(GH.dicts[i]) == GH.tags[i];
    }
    if (!fresh && global_hooks_read() < 0) {
        return NULL;
    }
    return Py_NewRef(GH.state);
}

static PyMethodDef global_hooks_def = {"___global_module_hooks", py_global_hooks, METH_NOARGS,
                                       "the global nn.Module hook registries' contents"};

/* Guard the global hook registries as they are now (GLOBAL_STATE; one per guard set) and
 * say which kinds of hooks they hold (*bits). */
static tr_status
guard_global_hooks(cdyn_tx *tx, int *bits)
{
    static PyObject *fn, *noargs;
    PyObject *state;
    int r;
    *bits = 0;
    if (fn == NULL && (fn = PyCFunction_New(&global_hooks_def, NULL)) == NULL) {
        return TR_ERROR;
    }
    if (noargs == NULL && (noargs = PyTuple_New(0)) == NULL) {
        return TR_ERROR;
    }
    if ((state = py_global_hooks(NULL, NULL)) == NULL) {
        return TR_ERROR;
    }
    for (int i = 0; i < N_GLOBAL_HOOKS; i++) {
        *bits |= PyTuple_GET_SIZE(PyTuple_GET_ITEM(state, i)) ? global_hook_bits[i] : 0;
    }
    r = cdyn_guards_add_call(tx->guards, fn, noargs, state);
    Py_DECREF(state);
    return r < 0 ? TR_ERROR : TR_OK;
}

/* 1 when the instance dict of mod holds a `forward` (it shadows the class's). */
static int
own_forward(PyObject *mod)
{
    PyObject **dp = _PyObject_GetDictPtr(mod);
    PyObject *d = dp ? *dp : NULL;
    int r = d != NULL && PyDict_Check(d) ? PyDict_Contains(d, cdyn_G.s_forward) : 0;
    if (r < 0) {
        PyErr_Clear();
        r = 0;
    }
    return r;
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

/* 1 when a tensor among args[0..n) has a symbolic size (dynamic shapes), 0 when none has,
 * -1 on error. */
static int
any_dynamic_tensor(PyObject *const *args, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *shape;
        int dyn = 0;
        if (V(args[i])->kind != VK_TENSOR || V(args[i])->u.tensor.fake == NULL) {
            continue;
        }
        shape = PyObject_GetAttrString(V(args[i])->u.tensor.fake, "shape");
        if (shape == NULL) {
            return -1;
        }
        for (Py_ssize_t d = 0; PyTuple_Check(shape) && d < PyTuple_GET_SIZE(shape); d++) {
            dyn |= cdyn_is_symbolic(PyTuple_GET_ITEM(shape, d));
        }
        Py_DECREF(shape);
        if (dyn) {
            return 1;
        }
    }
    return 0;
}

/* 1 when mod is an nn.RNNBase (GRU, LSTM, RNN): never inlined, as torch._dynamo does not
 * trace RNN modules (allow_rnn=False); its own forward reads sequence lengths as ints. */
static int
is_rnn(PyObject *mod)
{
    static PyObject *rnn_base;
    if (rnn_base == NULL) {
        PyObject *m = PyImport_ImportModule("torch.nn");
        rnn_base = m ? PyObject_GetAttrString(m, "RNNBase") : NULL;
        Py_XDECREF(m);
        if (rnn_base == NULL) {
            PyErr_Clear();
            return 0;
        }
    }
    return PyObject_IsInstance(mod, rnn_base) == 1;
}

/* A torch.nn leaf module: its forward inlined (functional calls on its parameters, no
 * nn.Module call at run time, as torch._dynamo); if that fails, undone and recorded as one
 * call_module node instead, unless an argument has symbolic sizes: the module's own forward
 * on fake tensors would specialise them (nn.GRU / nn.LSTM: one graph per sequence length),
 * so the call is a graph break (torch._dynamo does not trace RNN modules at all). */
static tr_status
call_leaf(cdyn_tx *tx, PyObject *v, PyObject *fwd, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames, PyObject **out)
{
    PyObject *mod = mobj(v), *name = NULL;
    tr_status st;
    if (V(v)->source == NULL) {
        return cdyn_tx_unsupported(tx, "call of a module with no source");
    }
    if (PyFunction_Check(fwd) && !is_rnn(mod)) {
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
    switch (any_dynamic_tensor(args, nargs)) {
    case -1:
        return TR_ERROR;
    case 1:
        return cdyn_tx_unsupported(tx, "%s (not inlinable) called on tensors of symbolic sizes "
                                   "(a call_module node would specialise them)",
                                   Py_TYPE(mod)->tp_name);
    default:
        break;
    }
    if (PyList_GET_SIZE(tx->effects) > 0) {
        /* the node runs the real module before the side effects are replayed (a pending
           `m.training = True` would not be seen) */
        return cdyn_tx_unsupported(tx, "%s (not inlinable) called while side effects of the "
                                   "trace are pending", Py_TYPE(mod)->tp_name);
    }
    if (cdyn_v_pin_identity(tx, v) != TR_OK) {
        return TR_ERROR;   /* the graph holds this instance */
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

/* The nn.Module attribute `name` as the class of mod sees it is nn.Module's own (borrowed
 * from nn.Module's dict: *attr), not overridden. */
static int
torch_protocol(PyObject *mod, const char *name, PyObject **attr)
{
    PyObject *s = PyUnicode_InternFromString(name);
    int r = 0;
    *attr = NULL;
    if (s != NULL) {
        *attr = _PyType_Lookup((PyTypeObject *)cdyn_G.nn_module_type, s);
        r = *attr != NULL && _PyType_Lookup(Py_TYPE(mod), s) == *attr;
        Py_DECREF(s);
    }
    PyErr_Clear();
    return r;
}

/* A module with forward hooks or pre-hooks (its own or global; `hooks` the HOOK_* bits):
 * nn.Module._call_impl inlined, as torch._dynamo inlines the call of such a module, so the
 * hooks run as inlined functions in eager's order with eager's handling of their results.
 * Under torch.compiler.is_compiling() _call_impl does not catch an exception of forward to
 * run the always_call hooks, as eager does: such an exception makes the call a graph break
 * instead (it runs in Python). */
static tr_status
call_with_hooks(cdyn_tx *tx, PyObject *v, int hooks, PyObject *const *args, Py_ssize_t nargs,
                PyObject *kwnames, PyObject **out)
{
    PyObject *mod = mobj(v), *impl = NULL, *call = NULL;
    tr_status st;
    if (!torch_protocol(mod, "__call__", &call) || !torch_protocol(mod, "_call_impl", &impl) ||
        !PyFunction_Check(impl)) {
        return cdyn_tx_unsupported(tx, "nn.Module with hooks whose class overrides __call__ or "
                                       "_call_impl");
    }
    st = cdyn_tx_inline_function(tx, impl, NULL, v, args, nargs, kwnames, out);
    if (st == TR_EXCEPTION && (hooks & HOOK_ALWAYS)) {
        Py_CLEAR(tx->exc);
        st = cdyn_tx_unsupported(tx, "an exception in the call of an nn.Module with always_call "
                                     "hooks (run in Python)");
    }
    return st;
}

static tr_status
module_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames, PyObject **out)
{
    PyObject *mod = mobj(v), *fwd = NULL;
    int hooks = module_hooks(mod), global_hooks = 0;
    tr_status st = hooks < 0 ? TR_ERROR : guard_global_hooks(tx, &global_hooks);
    if (st != TR_OK) {
        return st;
    }
    hooks |= global_hooks;
    if (hooks & HOOK_BACKWARD) {
        return cdyn_tx_unsupported(tx, "nn.Module with backward hooks (run in Python)");
    }
    if (hooks & HOOK_FORWARD) {
        return call_with_hooks(tx, v, hooks, args, nargs, kwnames, out);
    }
    if (PyObject_TypeCheck(mod, (PyTypeObject *)cdyn_G.sequential_type) && nargs == 1 &&
        kwnames == NULL) {
        return call_sequential(tx, fs, v, args[0], out);
    }
    if (own_forward(mod)) {
        /* a forward set on the instance (NN_MODULE guards that it is still there): called
           as read, through its source */
        PyObject *f = NULL;
        st = module_getattr(tx, v, cdyn_G.s_forward, &f);
        if (st == TR_OK) {
            st = cdyn_v_call(tx, fs, f, args, nargs, kwnames, out);
            Py_DECREF(f);
        }
        return st;
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
        /* a candidate for regional compilation (cdynamo/_regions.py), keyed by class */
        cdyn_region r;
        cdyn_region_begin(tx, &r);
        st = cdyn_tx_inline_function(tx, fwd, NULL, v, args, nargs, kwnames, out);
        if (st != TR_OK) {
            cdyn_region_clear(&r);
        }
        else if (cdyn_region_end(tx, &r, "module", (PyObject *)Py_TYPE(mod),
                                 V(v)->source) < 0) {
            Py_CLEAR(*out);
            st = TR_ERROR;
        }
    }
    Py_DECREF(fwd);
    return st;
}

/* The source of attribute `name` of a module value (NULL when the module has none). */
static tr_status
attr_source(PyObject *v, PyObject *name, PyObject **src)
{
    *src = NULL;
    if (V(v)->source == NULL) {
        return TR_OK;
    }
    *src = cdyn_source_attr(V(v)->source, name);
    return *src ? TR_OK : TR_ERROR;
}

/* Guard the number of entries of one of the module's registries (_modules, _parameters,
 * _buffers), which the unrolled loop relied on. */
static tr_status
guard_registry(cdyn_tx *tx, PyObject *v, PyObject *registry_name, PyObject *registry)
{
    PyObject *src = NULL;
    tr_status st = attr_source(v, registry_name, &src);
    if (st == TR_OK && src != NULL &&
        cdyn_guards_add_len(tx->guards, src, PyDict_GET_SIZE(registry)) < 0) {
        st = TR_ERROR;
    }
    Py_XDECREF(src);
    return st;
}

/* Append (prefix + name, value) or value to out for every entry of the module's registry
 * `which` (0 _modules, 1 _parameters, 2 _buffers), skipping None entries and objects
 * already in seen (a set of ids, when remove_duplicate). */
static tr_status
registry_items(cdyn_tx *tx, PyObject *v, int which, PyObject *prefix, int named,
               PyObject *seen, PyObject *out)
{
    PyObject *const names[3] = {cdyn_G.s_modules, cdyn_G.s_parameters, cdyn_G.s_buffers};
    PyObject *reg = PyObject_GetAttr(V(v)->u.obj.obj, names[which]), *k, *obj;
    Py_ssize_t pos = 0;
    tr_status st = TR_ERROR;
    if (reg == NULL || !PyDict_Check(reg)) {
        Py_XDECREF(reg);
        return cdyn_tx_unsupported(tx, "module without its %U registry", names[which]);
    }
    if ((st = guard_registry(tx, v, names[which], reg)) != TR_OK) {
        goto done;
    }
    while (PyDict_Next(reg, &pos, &k, &obj)) {
        PyObject *src = NULL, *val = NULL, *id = NULL, *entry = NULL;
        int dup = 0;
        if (obj == Py_None) {
            continue;
        }
        id = PyLong_FromVoidPtr(obj);
        dup = id == NULL ? -1 : (seen != NULL ? PySet_Contains(seen, id) : 0);
        if (dup == 0 && seen != NULL && PySet_Add(seen, id) < 0) {
            dup = -1;
        }
        Py_XDECREF(id);
        if (dup != 0) {
            st = dup < 0 ? TR_ERROR : TR_OK;
            if (dup < 0) {
                goto done;
            }
            continue;
        }
        if ((st = attr_source(v, k, &src)) == TR_OK) {
            st = which == 0 ? cdyn_tx_wrap_real(tx, obj, src, &val)
                            : cdyn_tx_wrap_module_tensor(tx, obj, src, &val);
        }
        Py_XDECREF(src);
        if (st != TR_OK) {
            goto done;
        }
        if (named) {
            PyObject *full = PyUnicode_Concat(prefix, k), *pair[2];
            pair[0] = full ? cdyn_value_const_steal(full) : NULL;
            pair[1] = val;
            entry = pair[0] ? cdyn_value_seq(VK_TUPLE, pair, 2) : NULL;
            Py_XDECREF(pair[0]);
            Py_DECREF(val);
        }
        else {
            entry = val;
        }
        st = TR_ERROR;
        if (entry == NULL || PyList_Append(out, entry) < 0) {
            Py_XDECREF(entry);
            goto done;
        }
        Py_DECREF(entry);
        st = TR_OK;
    }
done:
    Py_DECREF(reg);
    return st;
}

/* prefix + "." when prefix is not empty, else "" (a new str). */
static PyObject *
dotted(PyObject *prefix)
{
    return PyUnicode_GET_LENGTH(prefix) ? PyUnicode_FromFormat("%U.", prefix) : Py_NewRef(prefix);
}

/* named_modules(): (prefix, module) for v and every submodule, depth first, each once. */
static tr_status
walk_modules(cdyn_tx *tx, PyObject *v, PyObject *prefix, PyObject *seen, PyObject *out)
{
    PyObject *children = PyList_New(0), *pair[2], *entry = NULL, *dot = NULL;
    PyObject *id = PyLong_FromVoidPtr(mobj(v));
    tr_status st = TR_ERROR;
    int dup = id ? PySet_Contains(seen, id) : -1;
    if (dup != 0 || children == NULL) {
        st = dup > 0 ? TR_OK : TR_ERROR;
        goto done;
    }
    pair[0] = cdyn_value_const(prefix);
    pair[1] = v;
    entry = pair[0] ? cdyn_value_seq(VK_TUPLE, pair, 2) : NULL;
    Py_XDECREF(pair[0]);
    if (entry == NULL || PySet_Add(seen, id) < 0 || PyList_Append(out, entry) < 0 ||
        (dot = dotted(prefix)) == NULL) {
        goto done;
    }
    st = registry_items(tx, v, 0, dot, 1, NULL, children);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(children) && st == TR_OK; i++) {
        PyObject *c = V(PyList_GET_ITEM(children, i))->u.seq.items;
        PyObject *name = V(PyList_GET_ITEM(c, 0))->u.cnst.value, *sub = PyList_GET_ITEM(c, 1);
        st = V(sub)->kind == VK_NNMODULE
                 ? walk_modules(tx, sub, name, seen, out)
                 : cdyn_tx_unsupported(tx, "a submodule that is not a module");
    }
done:
    Py_XDECREF(entry);
    Py_XDECREF(dot);
    Py_XDECREF(children);
    Py_XDECREF(id);
    return st;
}

/* parameters()/buffers() and their named forms: the entries of every module of
 * named_modules(prefix) (v's own only when !recurse), each tensor once. which: 1
 * parameters, 2 buffers. */
static tr_status
tensors_of(cdyn_tx *tx, PyObject *v, int which, int named, PyObject *prefix, int recurse,
           PyObject *out)
{
    PyObject *mods = PyList_New(0), *seen = PySet_New(NULL), *seen_t = PySet_New(NULL);
    tr_status st = TR_ERROR;
    if (mods == NULL || seen == NULL || seen_t == NULL) {
        goto done;
    }
    st = walk_modules(tx, v, prefix, seen, mods);
    for (Py_ssize_t i = 0; st == TR_OK && i < (recurse ? PyList_GET_SIZE(mods) : 1); i++) {
        PyObject *pair = V(PyList_GET_ITEM(mods, i))->u.seq.items;
        PyObject *dot = dotted(V(PyList_GET_ITEM(pair, 0))->u.cnst.value);
        st = dot ? registry_items(tx, PyList_GET_ITEM(pair, 1), which, dot, named, seen_t, out)
                 : TR_ERROR;
        Py_XDECREF(dot);
    }
done:
    Py_XDECREF(mods);
    Py_XDECREF(seen);
    Py_XDECREF(seen_t);
    return st;
}

/* The parameters of the generator methods (gen_names order), after self: each a name and
 * its default: P prefix '', R recurse/remove_duplicate True, M memo None. */
static const char *const gen_params[8][3] = {
    {NULL}, {NULL}, {"remove_duplicate", NULL}, {"memo", "prefix", "remove_duplicate"},
    {"recurse", NULL}, {"prefix", "recurse", "remove_duplicate"},
    {"recurse", NULL}, {"prefix", "recurse", "remove_duplicate"},
};

/* Bind the constant arguments of generator method i: *prefix (borrowed, '' by default),
 * *recurse (1 by default). memo must be None and remove_duplicate true (else unsupported). */
static tr_status
gen_bind(cdyn_tx *tx, int i, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
         PyObject *empty, PyObject **prefix, int *recurse)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    *prefix = empty;
    *recurse = 1;
    for (Py_ssize_t a = 0; a < npos + nkw; a++) {
        PyObject *val = V(args[a])->kind == VK_CONST ? V(args[a])->u.cnst.value : NULL;
        const char *pname = NULL;
        int k = 0;
        if (a < npos) {
            pname = a < 3 ? gen_params[i][a] : NULL;
        }
        else {
            for (k = 0; k < 3 && gen_params[i][k] != NULL; k++) {
                if (cdyn_name_is(PyTuple_GET_ITEM(kwnames, a - npos), gen_params[i][k])) {
                    pname = gen_params[i][k];
                    break;
                }
            }
        }
        if (pname == NULL || val == NULL) {
            return cdyn_tx_unsupported(tx, "nn.Module.%s with these arguments", gen_names[i]);
        }
        if (strcmp(pname, "prefix") == 0 && PyUnicode_Check(val)) {
            *prefix = val;
        }
        else if (strcmp(pname, "recurse") == 0 && (val == Py_True || val == Py_False)) {
            *recurse = val == Py_True;
        }
        else if (!(strcmp(pname, "memo") == 0 && val == Py_None) &&
                 !(strcmp(pname, "remove_duplicate") == 0 && val == Py_True)) {
            return cdyn_tx_unsupported(tx, "nn.Module.%s(%s=%R)", gen_names[i], pname, val);
        }
    }
    return TR_OK;
}

/* children(), named_children(), modules(), named_modules(), parameters(),
 * named_parameters(), buffers(), named_buffers() with constant arguments (prefix, recurse;
 * remove_duplicate only true): an iterator over the values, unrolled at trace time. */
static tr_status
module_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *name, PyObject *const *args,
                   Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyObject *items = PyList_New(0), *seen = NULL, *empty = PyUnicode_New(0, 0), *prefix = NULL;
    tr_status st = TR_ERROR;
    int i = 0, recurse = 1;
    (void)fs;
    while (gen_names[i] && !cdyn_name_is(name, gen_names[i])) {
        i++;
    }
    if (gen_names[i] == NULL) {
        st = cdyn_tx_unsupported(tx, "method %U of %S", name, v);
        goto done;
    }
    if (items == NULL || empty == NULL ||
        (st = gen_bind(tx, i, args, nargs, kwnames, empty, &prefix, &recurse)) != TR_OK) {
        goto done;
    }
    switch (i) {
    case 0: case 1:
        st = registry_items(tx, v, 0, empty, i == 1, NULL, items);
        break;
    case 2: case 3:
        seen = PySet_New(NULL);
        st = seen ? walk_modules(tx, v, prefix, seen, items) : TR_ERROR;
        if (st == TR_OK && i == 2) {   /* modules(): the modules of named_modules() */
            for (Py_ssize_t k = 0; k < PyList_GET_SIZE(items); k++) {
                PyObject *m = PyList_GET_ITEM(V(PyList_GET_ITEM(items, k))->u.seq.items, 1);
                PyList_SetItem(items, k, Py_NewRef(m));
            }
        }
        break;
    default:
        st = tensors_of(tx, v, i < 6 ? 1 : 2, i % 2 == 1, prefix, recurse, items);
        break;
    }
    if (st == TR_OK) {
        *out = cdyn_value_iter(items);
        st = *out ? TR_OK : TR_ERROR;
    }
done:
    Py_XDECREF(items);
    Py_XDECREF(seen);
    Py_XDECREF(empty);
    return st;
}

/* m.name = value: through a property of the module's class, its setter inlined (as
 * nn.Module.__setattr__ reaches object.__setattr__ for a value that is no parameter,
 * module or tensor: transformers' gradient_checkpointing setters store on every submodule,
 * read back in the same trace), else a store replayed after the graph. */
static tr_status
module_setattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    PyObject *mod = cdyn_v_real(v);
    if (mod != NULL && V(value)->kind != VK_TENSOR && V(value)->kind != VK_NNMODULE) {
        int done = 0;
        tr_status st = cdyn_uobj_store_descriptor(tx, v, Py_TYPE(mod), name, value, &done);
        if (done) {
            return st;
        }
    }
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
    .call_method = module_call_method,
    .truth = module_truth,
    .unpack = module_unpack,
    .subscr = module_subscr,
    .store_subscr = module_store_subscr,
    .len = module_len,
    .contains = module_contains,
    .python_type = cdyn_python_type_obj,
    .collect = cdyn_collect_nothing,
    .reconstruct = cdyn_reconstruct_obj,
};
