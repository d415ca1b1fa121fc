/* hook.c: the PEP 523 frame hook, the compiled-function wrapper and the disable wrapper.
 *
 * Thread-local state (C11 _Thread_local): the compile options of the innermost active
 * compiled call, the depth of compiled calls, a "disabled" flag (set around guards, the
 * translator and _C.disable'd callables), and a one-shot pass-through marker for the
 * transformed code the hook is about to run. Global state (GIL-protected): the install
 * counter, the previous eval-frame function, the cache size limit, the skip prefixes,
 * and the counters.
 *
 * Running an entry: the transformed code takes every argument slot of the original frame
 * as a plain positional parameter (translate.h), so the hook calls a function built from
 * (entry code, frame globals, frame closure) by vectorcall on localsplus[0..n) and returns
 * its result. The original frame was never linked in as the current frame; the caller
 * (_PyEval_Vector on 3.11) clears and pops it after the hook returns, releasing the
 * argument slots it still owns (vectorcall only borrowed them).
 */
#include "hook.h"
#include "cache.h"
#include "translate.h"

#include <stddef.h>
#include <structmember.h>

typedef struct {
    PyObject *options;     /* borrowed (held by the running wrapper) or NULL */
    int active;            /* depth of compiled calls on this thread */
    int disabled;          /* nonzero: every frame falls through */
    PyObject *passthrough; /* borrowed code object: the next frame with it falls through */
} cdyn_tls;

static _Thread_local cdyn_tls tls;

cdyn_counters cdyn_counts;
static Py_ssize_t install_count;
static _PyFrameEvalFunction prev_eval = _PyEval_EvalFrameDefault;
static int cache_size_limit = 8;
static PyObject *skip_prefixes;    /* strong tuple of str or NULL */
static PyObject *str_frozen;       /* strong "<frozen " */

/* ---- installation ------------------------------------------------------------------ */

static PyObject *eval_frame(PyThreadState *ts, struct _PyInterpreterFrame *f, int throwflag);

/* Install the hook on this interpreter, remembering the previous function. */
static void
hook_install(void)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    _PyFrameEvalFunction cur = _PyInterpreterState_GetEvalFrameFunc(interp);
    if (cur != eval_frame) {
        prev_eval = cur;
        _PyInterpreterState_SetEvalFrameFunc(interp, eval_frame);
    }
}

/* Restore the previous function if ours is still the installed one. */
static void
hook_uninstall(void)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    if (_PyInterpreterState_GetEvalFrameFunc(interp) == eval_frame) {
        _PyInterpreterState_SetEvalFrameFunc(interp, prev_eval);
    }
}

int
cdyn_hook_installed(void)
{
    return _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get()) == eval_frame;
}

PyObject *
cdyn_thread_state(void)
{
    return Py_BuildValue("(ii)", tls.active, tls.disabled);
}

/* ---- settings ---------------------------------------------------------------------- */

int
cdyn_get_cache_size_limit(void)
{
    return cache_size_limit;
}

void
cdyn_set_cache_size_limit(int n)
{
    cache_size_limit = n < 0 ? 0 : n;
}

int
cdyn_set_skip_prefixes(PyObject *prefixes)
{
    if (!PyTuple_Check(prefixes)) {
        PyErr_SetString(PyExc_TypeError, "set_skip_prefixes: expected a tuple of str");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(prefixes); i++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(prefixes, i))) {
            PyErr_SetString(PyExc_TypeError, "set_skip_prefixes: expected a tuple of str");
            return -1;
        }
    }
    Py_XSETREF(skip_prefixes, Py_NewRef(prefixes));
    cdyn_cache_forget_decisions();
    return 0;
}

int
cdyn_mark_force_compile(PyObject *code)
{
    if (!PyCode_Check(code)) {
        PyErr_SetString(PyExc_TypeError, "mark_force_compile: expected a code object");
        return -1;
    }
    cdyn_extra *x = cdyn_cache_ensure((PyCodeObject *)code);
    if (x == NULL) {
        return -1;
    }
    x->force = 1;
    if (x->entries == NULL) {
        x->skip = 0;
        x->decided = 0;
    }
    return 0;
}

/* ---- the hook ---------------------------------------------------------------------- */

/* Evaluate f as if no hook were installed. */
static inline PyObject *
eval_default(PyThreadState *ts, struct _PyInterpreterFrame *f, int throwflag)
{
    return prev_eval(ts, f, throwflag);
}

/* 1 when code's file starts with one of the skip prefixes. */
static int
under_skip_prefix(PyCodeObject *code)
{
    if (!PyUnicode_Check(code->co_filename)) {
        return 0;
    }
    /* Frozen standard-library modules (importlib) are always skipped. */
    if (PyUnicode_GET_LENGTH(code->co_filename) >= 8 &&
        PyUnicode_READ_CHAR(code->co_filename, 0) == '<' &&
        PyUnicode_Tailmatch(code->co_filename, str_frozen, 0, PY_SSIZE_T_MAX, -1) == 1) {
        return 1;
    }
    if (skip_prefixes == NULL) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(skip_prefixes); i++) {
        Py_ssize_t r = PyUnicode_Tailmatch(code->co_filename, PyTuple_GET_ITEM(skip_prefixes, i),
                                           0, PY_SSIZE_T_MAX, -1);
        if (r < 0) {
            PyErr_Clear();
        }
        else if (r == 1) {
            return 1;
        }
    }
    return 0;
}

/* Decide once whether frames of code are skipped; fills x->skip. 0, or -1 on error. */
static int
decide_skip(PyCodeObject *code, cdyn_extra *x)
{
    int flags = code->co_flags;
    int skip = 0;
    if (flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)) {
        skip = 1;
    }
    else if (!(flags & CO_NEWLOCALS)) {
        skip = 1;    /* module and class bodies: they run on a locals mapping */
    }
    else if (PyUnicode_Check(code->co_name) &&
             PyUnicode_CompareWithASCIIString(code->co_name, "<module>") == 0) {
        skip = 1;
    }
    else if (!x->force && under_skip_prefix(code)) {
        skip = 1;
    }
    x->decided = 1;
    x->skip = skip;
    if (skip) {
        cdyn_counts.skipped++;
    }
    return 0;
}

/* Number of argument slots of the original code: the transformed code's parameters. */
static inline Py_ssize_t
frame_nargs(PyCodeObject *code)
{
    return code->co_argcount + code->co_kwonlyargcount + ((code->co_flags & CO_VARARGS) != 0) +
           ((code->co_flags & CO_VARKEYWORDS) != 0);
}

/* Run entry e for frame f: call its function on the argument slots. New reference or
 * NULL with an exception (the user's, with the transformed code's traceback). */
static PyObject *
run_entry(struct _PyInterpreterFrame *f, cdyn_cache_entry *e)
{
    PyObject *closure = f->f_func != NULL ? f->f_func->func_closure : NULL;
    /* A new reference: the entry may be freed while its code runs (a reset from inside, or
     * from another thread), or already while the function is built; e is not used after. */
    PyObject *func = cdyn_cache_entry_func(e, f->f_globals, closure);
    if (func == NULL) {
        return NULL;
    }
    cdyn_tls *t = &tls;
    t->passthrough = PyFunction_GET_CODE(func);
    PyObject *res = _PyFunction_Vectorcall(func, f->localsplus, (size_t)frame_nargs(f->f_code),
                                           NULL);
    t->passthrough = NULL;
    Py_DECREF(func);
    return res;
}

/* New str: the first failing guard of the most recent entry, or "unknown". Runs with the
 * hook disabled; never fails (errors become the text "unknown"). */
static PyObject *
recent_failure(cdyn_extra *x, struct _PyInterpreterFrame *f)
{
    PyObject *r = NULL;
    if (x->entries != NULL) {
        r = cdyn_guards_first_failure(x->entries->guards, f->localsplus, f->f_func,
                                      f->f_globals, f->f_builtins);
    }
    if (r == NULL || !PyUnicode_Check(r)) {
        PyErr_Clear();
        Py_XDECREF(r);
        r = PyUnicode_FromString("unknown");
    }
    return r;
}

/* An entry of x that another thread inserted while this one translated the same code (the
 * translator runs Python code, where threads switch) and whose guards pass for f; NULL when
 * none does. When the walk saw the cache change (cdyn_cache_generation), *px is refetched
 * (NULL with an exception on failure) and NULL returned. A guard error is cleared: the
 * caller then inserts its own entry. */
static cdyn_cache_entry *
entry_compiled_meanwhile(PyCodeObject *code, struct _PyInterpreterFrame *f, cdyn_extra **px)
{
    cdyn_tls *t = &tls;
    int saved_disabled = t->disabled;
    unsigned long gen = cdyn_cache_generation;
    cdyn_cache_entry *e = NULL;
    int r = 0;
    t->disabled = 1;
    for (e = (*px)->entries; e != NULL; e = e->next) {
        r = cdyn_guards_check(e->guards, f->localsplus, f->f_func, f->f_globals,
                              f->f_builtins);
        if (r < 0) {
            PyErr_Clear();
        }
        if (r != 0 || gen != cdyn_cache_generation) {
            break;
        }
    }
    t->disabled = saved_disabled;
    if (gen != cdyn_cache_generation) {
        *px = cdyn_cache_ensure(code);
        return NULL;
    }
    return r == 1 ? e : NULL;
}

/* The slow path of a frame whose code has no passing entry: compile or run unmodified.
 * order: cdyn_cache_order when the walk that found no entry started. */
static PyObject *
handle_miss(PyThreadState *ts, struct _PyInterpreterFrame *f, cdyn_extra *x,
            unsigned long order)
{
    cdyn_tls *t = &tls;
    PyCodeObject *code = f->f_code;
    PyObject *reason = NULL, *res = NULL;
    cdyn_translation out = {NULL, NULL};
    int saved_disabled = t->disabled;
    int rc;

    cdyn_counts.cache_misses++;
    t->disabled = 1;
    if (x->nentries >= cache_size_limit) {
        cdyn_counts.cache_limit_hits++;
        cdyn_counts.unmodified++;
        if (!x->limit_logged) {
            x->limit_logged = 1;
            reason = recent_failure(x, f);
            if (reason != NULL) {
                cdyn_log(30, "cache_size_limit reached (%d) for %U %U:%d (reason: %U); "
                         "running it without compiling", cache_size_limit, code->co_name,
                         code->co_filename, code->co_firstlineno, reason);
            }
            PyErr_Clear();
        }
        t->disabled = saved_disabled;
        res = eval_default(ts, f, 0);
        goto done;
    }
    if (x->nentries > 0) {
        reason = recent_failure(x, f);
        if (reason != NULL) {
            cdyn_log(10, "recompiling %U %U:%d because %U", code->co_name, code->co_filename,
                     code->co_firstlineno, reason);
        }
        PyErr_Clear();
    }
    rc = cdyn_translate_frame(f, t->options, &out);
    t->disabled = saved_disabled;
    if (rc < 0) {
        assert(PyErr_Occurred());
        goto done;
    }
    /* The translator ran Python code: x may have been freed by a reset. */
    x = cdyn_cache_ensure(code);
    if (x == NULL) {
        goto done;
    }
    if (out.code == NULL) {
        assert(out.guards == NULL);
        cdyn_counts.unmodified++;
        if (x->nentries == 0) {
            x->skip = 1;
            x->decided = 1;
            cdyn_counts.skipped++;
        }
        res = eval_default(ts, f, 0);
        goto done;
    }
    if (out.code == (PyObject *)code || !PyCode_Check(out.code) || out.guards == NULL) {
        PyErr_SetString(PyExc_SystemError,
                        "cdynamo: the translator must return a new code object and guards");
        goto done;
    }
    if (order != cdyn_cache_order) {
        /* Threads that miss on the same code at once all translate it: the first to finish
         * inserts its entry, the others run that one instead of inserting duplicates (8 of
         * them filled cache_size_limit at the first call). */
        cdyn_cache_entry *other = entry_compiled_meanwhile(code, f, &x);
        if (x == NULL) {
            goto done;
        }
        if (other != NULL) {
            cdyn_counts.cache_hits++;
            other->hits++;
            res = run_entry(f, other);
            goto done;
        }
    }
    cdyn_counts.compiles++;
    cdyn_cache_entry *e = cdyn_cache_insert(x, out.guards, out.code);
    out.guards = NULL;    /* stolen */
    if (e == NULL) {
        goto done;
    }
    res = run_entry(f, e);
done:
    cdyn_guards_free(out.guards);
    Py_XDECREF(out.code);
    Py_XDECREF(reason);
    return res;
}

/* The PEP 523 function: see the file comment. */
static PyObject *
eval_frame(PyThreadState *ts, struct _PyInterpreterFrame *f, int throwflag)
{
    cdyn_tls *t = &tls;
    if (throwflag || t->active == 0 || t->disabled) {
        return eval_default(ts, f, throwflag);
    }
    PyCodeObject *code = f->f_code;
    if ((PyObject *)code == t->passthrough) {
        t->passthrough = NULL;
        return eval_default(ts, f, 0);
    }
    cdyn_extra *x = cdyn_cache_get(code);
    if (x == NULL || !x->decided) {
        if (x == NULL && (x = cdyn_cache_ensure(code)) == NULL) {
            return NULL;
        }
        if (decide_skip(code, x) < 0) {
            return NULL;
        }
    }
    if (x->skip || f->prev_instr != _PyCode_CODE(code) - 1 || f->f_func == NULL) {
        return eval_default(ts, f, 0);
    }
    cdyn_counts.frames++;
    /* Guards may run Python code (attribute getters): keep the hook off meanwhile. If that
     * code freed cache entries (reset, code objects dying), restart the walk from a fresh
     * extra rather than follow a stale pointer; give up after a few restarts. That code can
     * also switch threads: another thread may insert an entry or move one to the front, ahead
     * of this walk's position, so a walk that finds nothing while the order changed walks
     * again (bounded) before it compiles. */
    int saved_disabled = t->disabled;
    int restarts = 0, rewalks = 0;
    unsigned long order;
    cdyn_cache_entry *prev = NULL, *e = NULL;
    t->disabled = 1;
restart:
    prev = NULL;
    order = cdyn_cache_order;
    for (e = x->entries; e != NULL; prev = e, e = e->next) {
        unsigned long gen = cdyn_cache_generation;
        int r = cdyn_guards_check(e->guards, f->localsplus, f->f_func, f->f_globals,
                                  f->f_builtins);
        if (r < 0) {
            t->disabled = saved_disabled;
            return NULL;
        }
        if (gen != cdyn_cache_generation) {
            x = cdyn_cache_get(code);
            if (x == NULL || x->skip || ++restarts > 3) {
                t->disabled = saved_disabled;
                return eval_default(ts, f, 0);
            }
            goto restart;
        }
        if (r) {
            break;
        }
    }
    if (e == NULL && order != cdyn_cache_order && ++rewalks <= 100) {
        goto restart;
    }
    t->disabled = saved_disabled;
    if (e == NULL) {
        return handle_miss(ts, f, x, order);
    }
    cdyn_counts.cache_hits++;
    e->hits++;
    cdyn_cache_move_to_front(x, prev, e);
    return run_entry(f, e);
}

/* ---- wrapper objects --------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *fn;          /* strong */
    PyObject *options;     /* strong; Py_None for DisabledFunction */
    PyObject *dict;        /* strong or NULL */
    PyObject *weakreflist;
    vectorcallfunc vectorcall;
} cdyn_wrapper;

/* CompiledFunction.__call__: run fn with this wrapper's options active on this thread. */
static PyObject *
compiled_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    cdyn_wrapper *self = (cdyn_wrapper *)callable;
    cdyn_tls *t = &tls;
    PyObject *saved_options = t->options;
    int saved_disabled = t->disabled;
    t->options = self->options;
    t->active++;
    t->disabled = 0;
    if (install_count++ == 0) {
        hook_install();
    }
    PyObject *res = PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    if (--install_count == 0) {
        hook_uninstall();
    }
    t->active--;
    t->options = saved_options;
    t->disabled = saved_disabled;
    return res;
}

/* DisabledFunction.__call__: run fn with the hook disabled on this thread. */
static PyObject *
disabled_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    cdyn_wrapper *self = (cdyn_wrapper *)callable;
    cdyn_tls *t = &tls;
    int saved_disabled = t->disabled;
    t->disabled = 1;
    PyObject *res = PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    t->disabled = saved_disabled;
    return res;
}

/* GC: visit the wrapped callable, the options and the attribute dict. */
static int
wrapper_traverse(cdyn_wrapper *self, visitproc visit, void *arg)
{
    Py_VISIT(self->fn);
    Py_VISIT(self->options);
    Py_VISIT(self->dict);
    return 0;
}

/* GC: drop the references that may form cycles. */
static int
wrapper_clear(cdyn_wrapper *self)
{
    Py_CLEAR(self->fn);
    Py_CLEAR(self->options);
    Py_CLEAR(self->dict);
    return 0;
}

/* Untrack, clear weak references and fields, free. */
static void
wrapper_dealloc(cdyn_wrapper *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    wrapper_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* __get__: bind like a function (unbound access returns the wrapper itself). */
static PyObject *
wrapper_descr_get(PyObject *self, PyObject *obj, PyObject *Py_UNUSED(type))
{
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, obj);
}

/* repr: names the kind and the wrapped callable. */
static PyObject *
wrapper_repr(cdyn_wrapper *self)
{
    return PyUnicode_FromFormat("<%s wrapping %R>", Py_TYPE(self)->tp_name, self->fn);
}

static PyMemberDef wrapper_members[] = {
    {"_cdynamo_orig_callable", T_OBJECT, offsetof(cdyn_wrapper, fn), READONLY, NULL},
    {"_cdynamo_options", T_OBJECT, offsetof(cdyn_wrapper, options), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef wrapper_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

#define WRAPPER_TYPE(cname, pyname, doc)                                                     \
    static PyTypeObject cname = {                                                            \
        PyVarObject_HEAD_INIT(NULL, 0)                                                       \
        .tp_name = pyname,                                                                   \
        .tp_basicsize = sizeof(cdyn_wrapper),                                                \
        .tp_dealloc = (destructor)wrapper_dealloc,                                           \
        .tp_vectorcall_offset = offsetof(cdyn_wrapper, vectorcall),                          \
        .tp_repr = (reprfunc)wrapper_repr,                                                   \
        .tp_call = PyVectorcall_Call,                                                        \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |   \
                    Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_IMMUTABLETYPE |                \
                    Py_TPFLAGS_DISALLOW_INSTANTIATION,                                       \
        .tp_doc = doc,                                                                       \
        .tp_traverse = (traverseproc)wrapper_traverse,                                       \
        .tp_clear = (inquiry)wrapper_clear,                                                  \
        .tp_weaklistoffset = offsetof(cdyn_wrapper, weakreflist),                            \
        .tp_members = wrapper_members,                                                       \
        .tp_getset = wrapper_getset,                                                         \
        .tp_descr_get = wrapper_descr_get,                                                   \
        .tp_dictoffset = offsetof(cdyn_wrapper, dict),                                       \
    }

WRAPPER_TYPE(CompiledFunctionType, "cdynamo._C.CompiledFunction",
             "A callable running its function with cdynamo's frame hook active.");
WRAPPER_TYPE(DisabledFunctionType, "cdynamo._C.DisabledFunction",
             "A callable running its function with cdynamo's frame hook disabled.");

/* New wrapper of `type` around fn/options (borrowed) calling through vc. */
static PyObject *
wrapper_new(PyTypeObject *type, PyObject *fn, PyObject *options, vectorcallfunc vc)
{
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "expected a callable, got %.100s", Py_TYPE(fn)->tp_name);
        return NULL;
    }
    cdyn_wrapper *w = PyObject_GC_New(cdyn_wrapper, type);
    if (w == NULL) {
        return NULL;
    }
    w->fn = Py_NewRef(fn);
    w->options = Py_NewRef(options);
    w->dict = NULL;
    w->weakreflist = NULL;
    w->vectorcall = vc;
    PyObject_GC_Track(w);
    return (PyObject *)w;
}

PyObject *
cdyn_wrap(PyObject *fn, PyObject *options)
{
    return wrapper_new(&CompiledFunctionType, fn, options, compiled_vectorcall);
}

PyObject *
cdyn_disable(PyObject *fn)
{
    return wrapper_new(&DisabledFunctionType, fn, Py_None, disabled_vectorcall);
}

int
cdyn_hook_init(PyObject *module)
{
    if (PyType_Ready(&CompiledFunctionType) < 0 || PyType_Ready(&DisabledFunctionType) < 0) {
        return -1;
    }
    if (cdyn_cache_init() < 0) {
        return -1;
    }
    if (str_frozen == NULL && (str_frozen = PyUnicode_InternFromString("<frozen ")) == NULL) {
        return -1;
    }
    Py_INCREF(&CompiledFunctionType);
    if (PyModule_AddObject(module, "CompiledFunction", (PyObject *)&CompiledFunctionType) < 0) {
        Py_DECREF(&CompiledFunctionType);
        return -1;
    }
    Py_INCREF(&DisabledFunctionType);
    if (PyModule_AddObject(module, "DisabledFunction", (PyObject *)&DisabledFunctionType) < 0) {
        Py_DECREF(&DisabledFunctionType);
        return -1;
    }
    return 0;
}
