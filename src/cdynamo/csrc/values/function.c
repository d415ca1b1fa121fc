/* values/function.c: functions and methods.
 *
 *   FUNCTION  a function made by MAKE_FUNCTION while tracing (a closure, a lambda, a
 *             comprehension's function): code, globals, defaults, closure cells as values;
 *             calls are inlined.
 *   USERFN    a real Python function (a global, an attribute): inlined, its closure cells
 *             read (and guarded) through the function's source.
 *   METHOD    a method bound to a value: with u.method.func, that Python function inlined
 *             with self; without, the method name called on self's family (list.append,
 *             Tensor.add, ...).
 */
#include "../tx.h"
#include "../codegen.h"

/* The parts of a FUNCTION: defaults (list of values or NULL), kwdefaults (dict name ->
 * value or NULL), closure cells (list of CELL values or NULL). New refs. */
static tr_status
function_parts(cdyn_tx *tx, PyObject *fn, PyObject **defaults, PyObject **kwdefaults,
               PyObject **cells)
{
    PyObject *parts = V(fn)->u.func.parts;
    PyObject *dv = PyList_GET_ITEM(parts, 0), *cv = PyList_GET_ITEM(parts, 1);
    PyObject *kv = PyList_GET_ITEM(parts, 2);
    tr_status st = TR_OK;
    *defaults = *kwdefaults = *cells = NULL;
    if (dv != Py_None) {
        st = cdyn_v_unpack(tx, dv, defaults);
    }
    if (st == TR_OK && kv != Py_None) {
        if (V(kv)->kind != VK_DICT) {
            st = cdyn_tx_unsupported(tx, "keyword defaults that are not a dict");
        }
        else if ((*kwdefaults = PyDict_New()) == NULL) {
            st = TR_ERROR;
        }
        for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(V(kv)->u.dict.keys); i++) {
            if (PyDict_SetItem(*kwdefaults, PyList_GET_ITEM(V(kv)->u.dict.keys, i),
                               PyList_GET_ITEM(V(kv)->u.dict.vals, i)) < 0) {
                st = TR_ERROR;
            }
        }
    }
    if (st == TR_OK && cv != Py_None) {
        st = cdyn_v_unpack(tx, cv, cells);
    }
    if (st != TR_OK) {
        Py_CLEAR(*defaults);
        Py_CLEAR(*kwdefaults);
        Py_CLEAR(*cells);
    }
    return st;
}

static tr_status
nested_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames, PyObject **out)
{
    PyObject *defaults = NULL, *kwdefaults = NULL, *cells = NULL, *gsrc = V(fn)->u.func.gsource;
    tr_status st = function_parts(tx, fn, &defaults, &kwdefaults, &cells);
    if (st != TR_OK) {
        return st;
    }
    st = cdyn_tx_inline_code(tx, (PyCodeObject *)V(fn)->u.func.code, NULL, args, nargs,
                             kwnames, defaults, kwdefaults, cells, V(fn)->u.func.globals,
                             fs->builtins, gsrc == Py_None ? NULL : gsrc,
                             (V(fn)->bits & FUNC_TOP_GLOBALS) != 0, out);
    Py_XDECREF(defaults);
    Py_XDECREF(kwdefaults);
    Py_XDECREF(cells);
    return st;
}

static tr_status
function_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames, PyObject **out)
{
    cdyn_value *f = V(fn);
    switch (f->kind) {
    case VK_FUNCTION:
        return nested_call(tx, fs, fn, args, nargs, kwnames, out);
    case VK_USERFN:
        return cdyn_tx_inline_function(tx, f->u.obj.obj, f->source, NULL, args, nargs, kwnames,
                                       out);
    default:   /* VK_METHOD */
        if (f->u.method.func != NULL) {
            return cdyn_tx_inline_function(tx, f->u.method.func, NULL, f->u.method.self, args,
                                           nargs, kwnames, out);
        }
        return cdyn_v_call_method(tx, fs, f->u.method.self, f->u.method.name, args, nargs,
                                  kwnames, out);
    }
}

static tr_status
function_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    if (V(v)->kind == VK_USERFN) {
        return cdyn_getattr_real(tx, v, name, cdyn_module_startswith(V(v)->u.obj.obj, "torch"),
                                 out);
    }
    return cdyn_tx_unsupported(tx, "attribute %U of %S", name, v);
}

static tr_status
function_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    (void)tx;
    (void)v;
    *out = 1;
    return TR_OK;
}

static PyTypeObject *
function_python_type(PyObject *v)
{
    switch (V(v)->kind) {
    case VK_FUNCTION:
        return &PyFunction_Type;
    case VK_USERFN:
        return Py_TYPE(V(v)->u.obj.obj);
    default:
        return V(v)->u.method.func != NULL ? &PyMethod_Type : NULL;
    }
}

static tr_status
function_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    cdyn_value *x = V(v);
    PyObject *parts = x->u.func.parts;
    switch (x->kind) {
    case VK_FUNCTION:
        /* rebuilt by MAKE_FUNCTION when it has no defaults, no closure and the frame's own
           globals */
        if (!(x->bits & FUNC_TOP_GLOBALS) || PyList_GET_ITEM(parts, 0) != Py_None ||
            PyList_GET_ITEM(parts, 1) != Py_None || PyList_GET_ITEM(parts, 2) != Py_None) {
            return cdyn_tx_unsupported(tx, "cannot rebuild %S", v);
        }
        return TR_OK;
    case VK_USERFN:
        return TR_OK;
    default:
        return cdyn_cg_collect(tx, cg, x->u.method.self);
    }
}

static int
function_reconstruct(cdyn_cg *cg, PyObject *v)
{
    cdyn_value *x = V(v);
    switch (x->kind) {
    case VK_FUNCTION:
        return (cdyn_cg_load_const(cg, x->u.func.code) < 0) ? -1
                                                             : cdyn_cg_emit(cg, MAKE_FUNCTION, 0);
    case VK_USERFN:
        return cdyn_reconstruct_obj(cg, v);
    default:
        if (x->u.method.func != NULL) {
            /* MethodType(func, self): exactly this function, not whatever self.<name>
               resolves to (an override, for a super() method) */
            if (cdyn_cg_push_callable(cg, (PyObject *)&PyMethod_Type) < 0 ||
                cdyn_cg_load_const(cg, x->u.method.func) < 0 ||
                cdyn_cg_value(cg, x->u.method.self) < 0) {
                return -1;
            }
            return cdyn_cg_call(cg, 2);
        }
        if (cdyn_cg_value(cg, x->u.method.self) < 0) {
            return -1;
        }
        {
            int i = cdyn_cg_name(cg, x->u.method.name);
            return i < 0 ? -1 : cdyn_cg_emit(cg, LOAD_ATTR, i);
        }
    }
}

const cdyn_vtable cdyn_function_vt = {
    .name = "FunctionVariable",
    .getattr = function_getattr,
    .call = function_call,
    .truth = function_truth,
    .python_type = function_python_type,
    .collect = function_collect,
    .reconstruct = function_reconstruct,
};
