/* values/polyfill.c: builtins and standard-library helpers traced through plain-Python
 * versions of themselves (the package cdynamo.polyfills, as torch._dynamo's polyfills/).
 *
 * The polyfill modules register `real callable -> polyfill function` with a decorator;
 * the table is read once at init. A callable found in it is a value of the builtins family
 * (wrap.c); its call (values/builtin.c) first tries an exact C handler where one exists
 * (len, isinstance, zip and enumerate over sequences, ...), then folds pure builtins on
 * constants, and otherwise inlines the polyfill like any Python function. A polyfill that
 * is a generator function gives a generator value (values/generator.c): map, filter, zip,
 * itertools.* stay lazy, as in eager. Generators made by the polyfill of a type (map,
 * filter, itertools.chain, ...) report that type to isinstance().
 *
 * Three helpers of the polyfill package are handled here directly:
 *   unsupported(msg)  a graph break at the polyfill's call site with the reason msg;
 *   exact_type(x)     type(x) as the trace knows it (or a break);
 *   same(a, b)        `a is b` for mutable containers (lists, dicts) made in the frame or
 *                     read from it: distinct values are distinct objects (wrap.c refuses
 *                     one input container under two names);
 *   is_symbolic(x)    whether x is a symbolic number (VK_SYMINT: a SymInt or SymFloat);
 *   force_static(x)   x as a constant: a symbolic number specialised to its value (the
 *                     ShapeEnv guards it, as torch._dynamo's comptime.force_static);
 *   call_with_parameters(module, tensors, args, kwargs)
 *                     torch.func.functional_call's call: module called with reads of its
 *                     parameters / buffers overridden (tx->param_overrides) for its
 *                     duration, restored however it ends.
 */
#include "../tx.h"

static PyObject *table;          /* dict: real callable -> polyfill function */
static PyObject *pf_module;      /* cdynamo.polyfills */
static PyObject *h_unsupported, *h_exact_type, *h_same, *h_is_symbolic, *h_force_static,
    *h_call_with_parameters;     /* the helpers above */
static PyObject *s_result_type;  /* "__cdynamo_result_type__" */

int cdyn_polyfill_init(void);

/* Load the table from cdynamo.polyfills.registry(); 0 / -1. */
int
cdyn_polyfill_init(void)
{
    PyObject *mod = NULL;
    if (table != NULL) {
        return 0;
    }
    mod = PyImport_ImportModule("cdynamo.polyfills");
    if (mod == NULL) {
        return -1;
    }
    table = PyObject_CallMethod(mod, "registry", NULL);
    pf_module = Py_NewRef(mod);
    h_unsupported = PyObject_GetAttrString(mod, "unsupported");
    h_exact_type = PyObject_GetAttrString(mod, "exact_type");
    h_same = PyObject_GetAttrString(mod, "same");
    h_is_symbolic = PyObject_GetAttrString(mod, "is_symbolic");
    h_force_static = PyObject_GetAttrString(mod, "force_static");
    h_call_with_parameters = PyObject_GetAttrString(mod, "call_with_parameters");
    s_result_type = PyUnicode_InternFromString("__cdynamo_result_type__");
    Py_DECREF(mod);
    if (table == NULL || !PyDict_Check(table) || h_unsupported == NULL ||
        h_exact_type == NULL || h_same == NULL || h_is_symbolic == NULL ||
        h_force_static == NULL || h_call_with_parameters == NULL || s_result_type == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "cdynamo.polyfills.registry() is not a dict");
        }
        Py_CLEAR(table);
        return -1;
    }
    return 0;
}

PyObject *
cdyn_polyfill_of(PyObject *obj)
{
    PyObject *pf = NULL;
    /* only functions and types can be polyfilled: no user __hash__ runs here */
    if (table == NULL || !(PyCFunction_Check(obj) || PyFunction_Check(obj) ||
                           (PyType_Check(obj) && Py_TYPE(obj)->tp_hash == PyType_Type.tp_hash))) {
        return NULL;
    }
    pf = PyDict_GetItemWithError(table, obj);
    if (pf == NULL) {
        PyErr_Clear();
    }
    return pf;
}

/* The overrides of call_with_parameters(module, tensors, ...): a new dict extending
 * tx->param_overrides with (id(owner), attr) -> tensor value for every name of the DICT
 * value `tensors` (constant str keys) and the names tied to them (_glue). NULL with a
 * reason (unsupported) or an error (*st). */
static PyObject *
parameter_overrides(cdyn_tx *tx, PyObject *module, PyObject *tensors, tr_status *st)
{
    PyObject *merged = NULL, *targets = NULL, *keys = NULL;
    *st = cdyn_tx_materialize(tx, tensors);
    if (*st != TR_OK) {
        return NULL;
    }
    if (V(tensors)->kind != VK_DICT || V(tensors)->u.dict.keyvals != NULL) {
        *st = cdyn_tx_unsupported(tx, "functional_call with %S", tensors);
        return NULL;
    }
    keys = V(tensors)->u.dict.keys;
    targets = PyObject_CallMethod(cdyn_G.glue, "functional_call_targets", "OO", module, keys);
    if (targets == NULL) {
        *st = cdyn_tx_unsupported(tx, "functional_call: a name that is no parameter or buffer");
        return NULL;
    }
    merged = tx->param_overrides ? PyDict_Copy(tx->param_overrides) : PyDict_New();
    for (Py_ssize_t i = 0; merged != NULL && i < PyList_GET_SIZE(targets); i++) {
        PyObject *t = PyList_GET_ITEM(targets, i), *key;
        Py_ssize_t idx = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 2));
        key = idx < 0 ? NULL
                      : Py_BuildValue("(nO)", (Py_ssize_t)PyTuple_GET_ITEM(t, 0),
                                      PyTuple_GET_ITEM(t, 1));
        if (key == NULL ||
            PyDict_SetItem(merged, key, PyList_GET_ITEM(V(tensors)->u.dict.vals, idx)) < 0) {
            Py_CLEAR(merged);
        }
        Py_XDECREF(key);
    }
    Py_DECREF(targets);
    *st = merged ? TR_OK : TR_ERROR;
    return merged;
}

/* call_with_parameters(module, tensors, args, kwargs): the module call traced with the
 * overrides in place, tx->param_overrides restored after (whatever the outcome). */
static tr_status
call_with_parameters(cdyn_tx *tx, PyObject *const *args, Py_ssize_t nargs, PyObject **out)
{
    PyObject *module = nargs == 4 ? cdyn_v_real(args[0]) : NULL, *merged, *saved;
    PyObject *all = NULL, *kwnames = NULL;
    tr_status st;
    if (module == NULL || V(args[0])->kind != VK_NNMODULE || V(args[2])->kind != VK_TUPLE ||
        V(args[3])->kind != VK_DICT) {
        return cdyn_tx_unsupported(tx, "functional_call of %S", nargs ? args[0] : Py_None);
    }
    if ((merged = parameter_overrides(tx, module, args[1], &st)) == NULL) {
        return st;
    }
    st = cdyn_v_unpack(tx, args[2], &all);
    if (st == TR_OK) {
        st = cdyn_dict_kwargs(tx, args[3], all, &kwnames);
    }
    if (st == TR_OK) {
        saved = tx->param_overrides;
        tx->param_overrides = merged;
        st = cdyn_v_call(tx, tx->cur_fs, args[0], &PyList_GET_ITEM(all, 0),
                         PyList_GET_SIZE(all), kwnames, out);
        tx->param_overrides = saved;
    }
    Py_DECREF(merged);
    Py_XDECREF(all);
    Py_XDECREF(kwnames);
    return st;
}

/* The helpers of the polyfill package (see above). */
static tr_status
call_helper(cdyn_tx *tx, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
            PyObject **out)
{
    PyTypeObject *t = NULL;
    if (fn == h_call_with_parameters) {
        return call_with_parameters(tx, args, nargs, out);
    }
    if (fn == h_unsupported) {
        if (nargs == 1 && V(args[0])->kind == VK_CONST && PyUnicode_Check(cdyn_v_real(args[0]))) {
            return cdyn_tx_unsupported(tx, "%U", cdyn_v_real(args[0]));
        }
        return cdyn_tx_unsupported(tx, "unsupported by a polyfill");
    }
    if (nargs != (fn == h_same ? 2 : 1)) {
        return cdyn_tx_unsupported(tx, "polyfill helper %R with %zd arguments", fn, nargs);
    }
    if (fn == h_exact_type) {
        if ((t = cdyn_v_python_type(args[0])) == NULL) {
            return cdyn_tx_unsupported(tx, "type of %S is not known", args[0]);
        }
        return cdyn_tx_wrap_real(tx, (PyObject *)t, NULL, out);
    }
    if (fn == h_is_symbolic) {
        *out = cdyn_value_bool(V(args[0])->kind == VK_SYMINT);
        return *out ? TR_OK : TR_ERROR;
    }
    if (fn == h_force_static) {
        return cdyn_sym_specialize(tx, args[0], out);
    }
    if (args[0] != args[1] && !((V(args[0])->kind == VK_LIST || V(args[0])->kind == VK_DICT) &&
                                (V(args[1])->kind == VK_LIST || V(args[1])->kind == VK_DICT))) {
        return cdyn_tx_unsupported(tx, "identity of %S and %S", args[0], args[1]);
    }
    *out = cdyn_value_bool(args[0] == args[1]);
    return *out ? TR_OK : TR_ERROR;
}

tr_status
cdyn_polyfill_call(cdyn_tx *tx, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames, PyObject **out, int *handled)
{
    PyObject *pf = cdyn_polyfill_of(fn), *rt = NULL;
    tr_status st;
    *handled = pf != NULL;
    if (pf == NULL) {
        return TR_OK;
    }
    if (fn == h_unsupported || fn == h_exact_type || fn == h_same || fn == h_is_symbolic ||
        fn == h_force_static || fn == h_call_with_parameters) {
        if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
            return cdyn_tx_unsupported(tx, "polyfill helper with keywords");
        }
        return call_helper(tx, fn, args, nargs, out);
    }
    if (!PyFunction_Check(pf)) {
        return cdyn_tx_unsupported(tx, "polyfill of %R is not a Python function", fn);
    }
    st = cdyn_tx_inline_function(tx, pf, NULL, NULL, args, nargs, kwnames, out);
    if (st != TR_OK) {
        return st;
    }
    rt = PyObject_GetAttr(pf, s_result_type);
    if (rt == NULL) {
        PyErr_Clear();
    }
    else {
        cdyn_generator_set_type(*out, rt);
        Py_DECREF(rt);
    }
    return TR_OK;
}

tr_status
cdyn_polyfill_inline_named(cdyn_tx *tx, const char *name, PyObject *const *args,
                           Py_ssize_t nargs, PyObject **out)
{
    PyObject *fn;
    tr_status st;
    if (cdyn_polyfill_init() < 0) {
        return TR_ERROR;
    }
    if ((fn = PyObject_GetAttrString(pf_module, name)) == NULL) {
        return TR_ERROR;
    }
    st = PyFunction_Check(fn)
             ? cdyn_tx_inline_function(tx, fn, NULL, NULL, args, nargs, NULL, out)
             : cdyn_tx_unsupported(tx, "cdynamo.polyfills.%s is not a Python function", name);
    Py_DECREF(fn);
    return st;
}
