/* values/newmodule.c: nn.Modules made while tracing (a NEWOBJ whose class is an nn.Module
 * subclass: torch.nn's own, nn.Softmax(dim=-1)(x), or a user's or library's, transformers'
 * ACT2FN["silu"] building a SiLUActivation on every lookup), as torch._dynamo traces them.
 *
 * Construction is the family's (newobj.c): __init__ is inlined, and with it nn.Module's
 * __init__, whose bookkeeping (`training`, `_parameters`, `_buffers`, `_modules`, the hook
 * dicts, ...) becomes symbolic attributes of the object like any other (torch._dynamo's
 * generation-tagging patch of nn.Module.__init__ is traced as the function it wraps, see
 * cdyn_newmod_unpatched_init); nn.Module.__setattr__ and __getattr__ are inlined as any
 * class's. A module that creates parameters (nn.Parameter(...): a torch class, not
 * modelled) makes the construction a graph break: the module is built in Python and the
 * rest of the frame gets the real module.
 *
 * Calling such a module inlines its forward when nn.Module.__call__ would only call it: the
 * class's call protocol is nn.Module's (modcall.c's type part), the object's hook dicts are
 * empty and it has no `_compiled_call_impl`/`_call_impl` of its own, and the process has no
 * global module hook and no JIT trace (checked while tracing, not guarded, as for modules of
 * the frame and as torch._dynamo). Anything else is a graph break.
 *
 * A module that outlives the trace (returned, stored, live at a graph break) is rebuilt by
 * newobj.c as any object made while tracing: object.__new__(cls) and its __dict__ (the
 * bookkeeping dicts rebuilt too), a new module on every call as in eager. */
#include "user.h"
#include "../modcall.h"

/* The per-instance hook dicts nn.Module.__call__ looks at (modcall.c's list). */
static const char *const hook_names[] = {"_backward_hooks", "_backward_pre_hooks",
                                         "_forward_hooks", "_forward_pre_hooks", NULL};

int
cdyn_newmod_class_ok(PyTypeObject *cls)
{
    /* torch's own modules only from torch.nn (not torch.jit's ScriptModules, quantized or
       parallel wrappers) */
    return !cdyn_module_startswith((PyObject *)cls, "torch") ||
           (cdyn_module_startswith((PyObject *)cls, "torch.nn") &&
            !cdyn_module_startswith((PyObject *)cls, "torch.nn.parallel"));
}

int
cdyn_newmod_is_module(PyObject *v)
{
    PyTypeObject *t, *mt = (PyTypeObject *)cdyn_G.nn_module_type;
    if (V(v)->kind != VK_NEWOBJ) {
        return 0;
    }
    t = cdyn_user_type(v);
    /* __call__ is nn.Module's own (a class's Python __call__ is inlined as any class's) */
    return PyType_IsSubtype(t, mt) &&
           _PyType_Lookup(t, cdyn_U.s_call) == _PyType_Lookup(mt, cdyn_U.s_call);
}

PyObject *
cdyn_newmod_unpatched_init(PyObject *func)
{
    PyFunctionObject *f = (PyFunctionObject *)func;
    PyCodeObject *co = (PyCodeObject *)f->func_code;
    PyObject *freevars = NULL, *target = NULL;
    if (f->func_closure == NULL || f->func_module == NULL || !PyUnicode_Check(f->func_module) ||
        !cdyn_name_is(f->func_module, "torch._dynamo.mutation_guard") ||
        !cdyn_name_is(co->co_name, "patched_init")) {
        return NULL;
    }
    freevars = PyCode_GetFreevars(co);
    for (Py_ssize_t i = 0; freevars != NULL && i < PyTuple_GET_SIZE(freevars) &&
                           i < PyTuple_GET_SIZE(f->func_closure); i++) {
        if (cdyn_name_is(PyTuple_GET_ITEM(freevars, i), "init")) {
            target = PyCell_GET(PyTuple_GET_ITEM(f->func_closure, i));
            break;
        }
    }
    Py_XDECREF(freevars);
    PyErr_Clear();
    return target != NULL && PyFunction_Check(target) ? target : NULL;
}

/* TR_OK when the object v (a module made while tracing) has the instance state with which
 * nn.Module.__call__ only calls forward: empty hook dicts, no call implementation of its
 * own. */
static tr_status
check_instance(cdyn_tx *tx, PyObject *v)
{
    static const char *const own[] = {"_compiled_call_impl", "_call_impl", NULL};
    for (int i = 0; hook_names[i] != NULL; i++) {
        PyObject *name = PyUnicode_FromString(hook_names[i]), *d;
        Py_ssize_t n = 1;
        tr_status st;
        if (name == NULL) {
            return TR_ERROR;
        }
        d = cdyn_newobj_attr(v, name);
        Py_DECREF(name);
        if (d == NULL || V(d)->kind != VK_DICT) {
            return cdyn_tx_unsupported(tx, "call of %S: no %s dict (nn.Module.__init__ not "
                                       "called?)", v, hook_names[i]);
        }
        if ((st = cdyn_v_len(tx, d, &n)) != TR_OK) {
            return st;
        }
        if (n != 0) {
            return cdyn_tx_unsupported(tx, "nn.Module with forward or backward hooks");
        }
    }
    for (int i = 0; own[i] != NULL; i++) {
        PyObject *name = PyUnicode_FromString(own[i]), *a;
        if (name == NULL) {
            return TR_ERROR;
        }
        a = cdyn_newobj_attr(v, name);
        Py_DECREF(name);
        if (a != NULL && !cdyn_v_is_none(a)) {
            return cdyn_tx_unsupported(tx, "call of %S: %s set on the instance", v, own[i]);
        }
    }
    return TR_OK;
}

tr_status
cdyn_newmod_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames, PyObject **out)
{
    PyObject *fwd = NULL, *name = NULL;
    PyTypeObject *t = cdyn_user_type(v);
    tr_status st;
    if (!cdyn_modcall_type_plain(t)) {
        return cdyn_tx_unsupported(tx, "call of %s made while tracing (its call protocol is "
                                   "not nn.Module's)", t->tp_name);
    }
    if (!cdyn_modcall_process_plain()) {
        return cdyn_tx_unsupported(tx, "call of %s while global module hooks or a JIT trace "
                                   "are active", t->tp_name);
    }
    if ((st = cdyn_uobj_guard_type_member(tx, v, cdyn_U.s_call)) != TR_OK ||
        (st = check_instance(tx, v)) != TR_OK) {
        return st;
    }
    /* self.forward: an instance attribute, else the class's, bound (and guarded) */
    name = PyUnicode_FromString("forward");
    st = name ? cdyn_v_getattr(tx, v, name, &fwd) : TR_ERROR;
    Py_XDECREF(name);
    if (st == TR_OK) {
        st = cdyn_v_call(tx, fs, fwd, args, nargs, kwnames, out);
        Py_DECREF(fwd);
    }
    return st;
}
