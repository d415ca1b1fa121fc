/* modcall.c: the nn.Module call fast path of a compiled module (see modcall.h).
 *
 * nn.Module.__call__ is `_wrapped_call_impl(self, *args, **kwargs)`: it calls
 * `self._compiled_call_impl` when that is set, else `self._call_impl`, which picks
 * `self._slow_forward` under a JIT trace (torch._C._get_tracing_state()) and otherwise,
 * when neither the module (`_backward_hooks`, `_backward_pre_hooks`, `_forward_hooks`,
 * `_forward_pre_hooks`) nor the process (the four `_global_*_hooks` dicts of
 * torch.nn.modules.module) has a hook, returns `self.forward(*args, **kwargs)`. We call
 * that forward directly when exactly that no-hook path would be taken:
 *   - type part (cached per wrapper on the type's version tag, which changes with any
 *     change to the type or its bases): `__call__` and `_call_impl` resolve to nn.Module's
 *     own functions, `__getattribute__` to object's (so `self.<name>` reads the instance
 *     dict first), `forward` to a plain Python function, `_compiled_call_impl` to the class
 *     attribute None, and none of the hook dicts read below is shadowed by a data
 *     descriptor of the type;
 *   - instance part (every call): `_compiled_call_impl` is None or not set on the
 *     instance (`module.compile()` sets it there), the four hook dicts are
 *     empty, `_call_impl` is not overridden in the instance dict; a `forward` set on the
 *     instance is the one called (as `self.forward` finds it);
 *     The instance dict's entries are re-read only when its PEP 509 version tag changed
 *     (the hook dicts' sizes are read on every call);
 *   - process part (every call): the global hook dicts are empty (the dicts themselves
 *     re-read when the module's globals change, PEP 509 tag), and no torch.jit.trace of a
 *     module runs (`torch.jit._trace._trace_module_map` is None: under a JIT trace
 *     _call_impl calls `_slow_forward`, which differs from `self.forward` only when that map
 *     is set, to record scope names).
 * Anything else answers 0 and the module is called as usual.
 */
#include "modcall.h"

enum { N_HOOKS = 4 };

static const char *const hook_names[N_HOOKS] = {
    "_backward_hooks", "_backward_pre_hooks", "_forward_hooks", "_forward_pre_hooks"};
static const char *const global_hook_names[N_HOOKS] = {
    "_global_backward_pre_hooks", "_global_backward_hooks", "_global_forward_hooks",
    "_global_forward_pre_hooks"};

/* torch objects read once (strong, GIL-protected). ready: 0 not yet, 1 read, -1 not
 * available (the fast path is then never taken). */
static struct {
    int ready;
    PyObject *call;           /* nn.Module.__dict__['__call__'] (_wrapped_call_impl) */
    PyObject *call_impl;      /* nn.Module.__dict__['_call_impl'] */
    PyObject *getattribute;   /* object.__dict__['__getattribute__'] */
    PyObject *globals;        /* torch.nn.modules.module.__dict__ */
    PyObject *slow_forward;   /* nn.Module.__dict__['_slow_forward'] */
    PyObject *jit_globals;    /* torch.jit._trace.__dict__ */
    uint64_t jit_tag;         /* its ma_version_tag when _trace_module_map was None; 0 not */
    uint64_t globals_tag;     /* globals' ma_version_tag when hooks[] were read; 0: not read */
    PyObject *hooks[N_HOOKS]; /* borrowed from globals while globals_tag matches */
    PyObject *str_hooks[N_HOOKS];
    PyObject *str_call, *str_call_impl, *str_getattribute, *str_forward, *str_compiled;
    PyObject *str_slow_forward, *str_map;
    PyObject *str_cdynamo_call;
} M;

static PyObject *
intern(const char *s)
{
    return PyUnicode_InternFromString(s);
}

/* Read the torch objects; M.ready becomes 1, or -1 when they cannot be read (no
 * exception is left either way). */
static void
modcall_ready(void)
{
    PyObject *modmod = NULL, *module_cls = NULL, *jit = NULL;
    M.ready = -1;
    if ((M.str_slow_forward = intern("_slow_forward")) == NULL ||
        (M.str_map = intern("_trace_module_map")) == NULL ||
        (M.str_call = intern("__call__")) == NULL ||
        (M.str_call_impl = intern("_call_impl")) == NULL ||
        (M.str_getattribute = intern("__getattribute__")) == NULL ||
        (M.str_forward = intern("forward")) == NULL ||
        (M.str_compiled = intern("_compiled_call_impl")) == NULL) {
        goto done;
    }
    for (int i = 0; i < N_HOOKS; i++) {
        if ((M.str_hooks[i] = intern(hook_names[i])) == NULL) {
            goto done;
        }
    }
    if ((modmod = PyImport_ImportModule("torch.nn.modules.module")) == NULL ||
        (module_cls = PyObject_GetAttrString(modmod, "Module")) == NULL ||
        !PyType_Check(module_cls) ||
        (jit = PyImport_ImportModule("torch.jit._trace")) == NULL) {
        goto done;
    }
    PyObject *cdict = cdyn_type_dict((PyTypeObject *)module_cls);
    M.call = Py_XNewRef(PyDict_GetItemWithError(cdict, M.str_call));
    M.call_impl = Py_XNewRef(PyDict_GetItemWithError(cdict, M.str_call_impl));
    M.slow_forward = Py_XNewRef(PyDict_GetItemWithError(cdict, M.str_slow_forward));
    M.jit_globals = Py_XNewRef(PyModule_GetDict(jit));
    M.getattribute = Py_XNewRef(PyDict_GetItemWithError(cdyn_type_dict(&PyBaseObject_Type),
                                                        M.str_getattribute));
    M.globals = Py_XNewRef(PyModule_GetDict(modmod));
    if (M.call == NULL || M.call_impl == NULL || M.getattribute == NULL || M.globals == NULL ||
        M.slow_forward == NULL || M.jit_globals == NULL) {
        goto done;
    }
    M.ready = 1;
done:
    PyErr_Clear();
    Py_XDECREF(modmod);
    Py_XDECREF(module_cls);
    Py_XDECREF(jit);
}

/* 1 when name (str) resolves on tp to nothing or to a non-data descriptor (the instance
 * dict then wins), else 0. */
static int
not_shadowed(PyTypeObject *tp, PyObject *name)
{
    PyObject *d = _PyType_Lookup(tp, name);
    return d == NULL || Py_TYPE(d)->tp_descr_set == NULL;
}

/* Fill c for tp (see the file comment, type part). Never fails. */
static void
check_type(cdyn_modcall_cache *c, PyTypeObject *tp)
{
    Py_CLEAR(c->type);
    Py_CLEAR(c->forward);
    PyObject *fwd = _PyType_Lookup(tp, M.str_forward);
    int plain = _PyType_Lookup(tp, M.str_call) == M.call &&
                _PyType_Lookup(tp, M.str_call_impl) == M.call_impl &&
                _PyType_Lookup(tp, M.str_slow_forward) == M.slow_forward &&
                _PyType_Lookup(tp, M.str_getattribute) == M.getattribute &&
                fwd != NULL && Py_IS_TYPE(fwd, &PyFunction_Type) &&
                _PyType_Lookup(tp, M.str_compiled) == Py_None;
    for (int i = 0; plain && i < N_HOOKS; i++) {
        plain = not_shadowed(tp, M.str_hooks[i]);
    }
    c->idict = NULL;    /* the instance part is re-read under the new type */
    c->type = (PyTypeObject *)Py_NewRef(tp);
    c->tag = cdyn_type_version_assigned(tp);
    c->forward = plain ? Py_NewRef(fwd) : NULL;
}

/* 1 when the process has no global module hook (re-reading the dicts when the module's
 * globals changed), else 0. Never fails. */
static int
no_global_hooks(void)
{
    PyDictObject *g = (PyDictObject *)M.globals;
    if (M.globals_tag == 0 || cdyn_dict_version((PyObject *)g) != M.globals_tag) {
        for (int i = 0; i < N_HOOKS; i++) {
            PyObject *h = PyDict_GetItemString(M.globals, global_hook_names[i]);
            if (h == NULL || !PyDict_Check(h)) {
                M.globals_tag = 0;
                return 0;
            }
            M.hooks[i] = h;
        }
        M.globals_tag = cdyn_dict_version_tracked((PyObject *)g);
    }
    for (int i = 0; i < N_HOOKS; i++) {
        if (PyDict_GET_SIZE(M.hooks[i]) != 0) {
            return 0;
        }
    }
    return 1;
}

/* 1 when no torch.jit.trace of a module is running (see the file comment). Never fails. */
static int
no_jit_module_trace(void)
{
    PyDictObject *g = (PyDictObject *)M.jit_globals;
    if (M.jit_tag != 0 && cdyn_dict_version((PyObject *)g) == M.jit_tag) {
        return 1;
    }
    if (PyDict_GetItemWithError(M.jit_globals, M.str_map) != Py_None) {
        PyErr_Clear();
        M.jit_tag = 0;
        return 0;
    }
    M.jit_tag = cdyn_dict_version_tracked((PyObject *)g);
    return 1;
}

/* Re-read mod's instance dict d into c (instance part of the file comment): 1 when plain,
 * else 0 (c->idict left NULL). Never fails. */
static int
read_instance(cdyn_modcall_cache *c, PyObject *d)
{
    PyObject *v;
    c->idict = NULL;
    if (((v = PyDict_GetItemWithError(d, M.str_compiled)) != NULL && v != Py_None) ||
        PyErr_Occurred() || PyDict_GetItemWithError(d, M.str_call_impl) != NULL) {
        PyErr_Clear();
        return 0;
    }
    for (int i = 0; i < N_HOOKS; i++) {
        v = PyDict_GetItemWithError(d, M.str_hooks[i]);
        if (v == NULL || !PyDict_Check(v)) {
            PyErr_Clear();
            return 0;
        }
        c->hooks[i] = v;
    }
    c->inst_forward = PyDict_GetItemWithError(d, M.str_forward);
    if (c->inst_forward == NULL && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    c->idict = d;
    c->idict_tag = cdyn_dict_version_tracked(d);
    return 1;
}

/* 1 when mod's instance dict says nn.Module.__call__ would only call forward (instance
 * part of the file comment), else 0; c->inst_forward is then the forward set on the
 * instance or NULL. Never fails. */
static int
instance_plain(cdyn_modcall_cache *c, PyObject *mod)
{
    PyObject **dp = cdyn_dict_ptr(mod);
    PyObject *d = dp != NULL ? *dp : NULL;
    if (d == NULL || !PyDict_CheckExact(d)) {
        return 0;
    }
    if ((d != c->idict || cdyn_dict_version(d) != c->idict_tag) &&
        !read_instance(c, d)) {
        return 0;
    }
    for (int i = 0; i < N_HOOKS; i++) {
        if (PyDict_GET_SIZE(c->hooks[i]) != 0) {
            return 0;
        }
    }
    return 1;
}

int
cdyn_modcall_forward(cdyn_modcall_cache *c, PyObject *mod, PyObject **fwd, int *prepend)
{
    PyTypeObject *tp = Py_TYPE(mod);
    if (M.ready == 0) {
        modcall_ready();
    }
    if (M.ready != 1) {
        return 0;
    }
    if (c->type != tp || c->tag == 0 || cdyn_type_version(tp) != c->tag) {
        check_type(c, tp);
    }
    if (c->forward == NULL || !instance_plain(c, mod) || !no_global_hooks() ||
        !no_jit_module_trace()) {
        return 0;
    }
    *fwd = c->inst_forward != NULL ? c->inst_forward : c->forward;
    *prepend = c->inst_forward == NULL;
    return 1;
}

int
cdyn_modcall_type_plain(PyTypeObject *tp)
{
    cdyn_modcall_cache c = {0};
    int plain;
    if (M.ready == 0) {
        modcall_ready();
    }
    if (M.ready != 1) {
        return 0;
    }
    check_type(&c, tp);
    plain = c.forward != NULL;
    cdyn_modcall_clear(&c);
    return plain;
}

int
cdyn_modcall_process_plain(void)
{
    if (M.ready == 0) {
        modcall_ready();
    }
    return M.ready == 1 && no_global_hooks() && no_jit_module_trace();
}

void
cdyn_modcall_clear(cdyn_modcall_cache *c)
{
    Py_CLEAR(c->type);
    Py_CLEAR(c->forward);
    c->tag = 0;
    c->idict = NULL;
}

/* ---- CompiledModule.__call__ ------------------------------------------------------- */

/* A method descriptor: `compiled_module(*args, **kw)` calls the CompiledModule's own
 * `_cdynamo_call` (its CompiledFunction over the original module) with the arguments, as
 * the Python `return self._cdynamo_call(*args, **kwargs)` did, without a Python frame.
 * When the CompiledModule itself has hooks (registered on the compiled module: fully_shard
 * applied after compiling, as torchtitan does, registers FSDP2's unshard / reshard hooks on
 * it), it is called through nn.Module.__call__, which runs them around its forward (the
 * same `_cdynamo_call`), as torch's OptimizedModule is called. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
} cdyn_modcall_obj;

/* 1 when the instance dict d of a CompiledModule holds a hook dict that is not empty (or
 * not a dict), 0 when none, -1 with an exception. */
static int
wrapper_hooked(PyObject *d)
{
    for (int i = 0; i < N_HOOKS; i++) {
        PyObject *h = PyDict_GetItemWithError(d, M.str_hooks[i]);
        if (h == NULL) {
            if (PyErr_Occurred()) {
                return -1;
            }
            continue;
        }
        if (!PyDict_Check(h) || PyDict_GET_SIZE(h) != 0) {
            return 1;
        }
    }
    return 0;
}

static PyObject *
modcall_vectorcall(PyObject *Py_UNUSED(callable), PyObject *const *args, size_t nargsf,
                   PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *call = NULL, *res = NULL;
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "CompiledModule.__call__ needs the module");
        return NULL;
    }
    if (M.str_cdynamo_call == NULL && (M.str_cdynamo_call = intern("_cdynamo_call")) == NULL) {
        return NULL;
    }
    if (M.ready == 0) {
        modcall_ready();
    }
    PyObject **dp = cdyn_dict_ptr(args[0]);
    if (dp != NULL && *dp != NULL && PyDict_CheckExact(*dp)) {
        int hooked = M.ready == 1 ? wrapper_hooked(*dp) : 0;
        if (hooked < 0) {
            return NULL;
        }
        if (hooked) {   /* nn.Module.__call__(self, *args, **kw): its hooks, then forward */
            return PyObject_Vectorcall(M.call, args, (size_t)nargs, kwnames);
        }
        call = Py_XNewRef(PyDict_GetItemWithError(*dp, M.str_cdynamo_call));
    }
    if (call == NULL && !PyErr_Occurred()) {
        call = PyObject_GetAttr(args[0], M.str_cdynamo_call);
    }
    if (call == NULL) {
        return NULL;
    }
    res = PyObject_Vectorcall(call, args + 1, (size_t)(nargs - 1), kwnames);
    Py_DECREF(call);
    return res;
}

static PyObject *
modcall_descr_get(PyObject *self, PyObject *obj, PyObject *Py_UNUSED(type))
{
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, obj);
}

static PyTypeObject ModuleCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cdynamo._C.CompiledModuleCall",
    .tp_basicsize = sizeof(cdyn_modcall_obj),
    .tp_vectorcall_offset = offsetof(cdyn_modcall_obj, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR |
                Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .tp_doc = "CompiledModule.__call__: calls the module's _cdynamo_call with the arguments.",
    .tp_descr_get = modcall_descr_get,
};

int
cdyn_modcall_init(PyObject *module)
{
    if (PyType_Ready(&ModuleCallType) < 0) {
        return -1;
    }
    cdyn_modcall_obj *o = PyObject_New(cdyn_modcall_obj, &ModuleCallType);
    if (o == NULL) {
        return -1;
    }
    o->vectorcall = modcall_vectorcall;
    if (PyModule_AddObject(module, "compiled_module_call", (PyObject *)o) < 0) {
        Py_DECREF(o);
        return -1;
    }
    return 0;
}
