/* hook.c: the PEP 523 frame hook, the compiled-function wrapper and the disable wrapper.
 *
 * Thread-local state (C11 _Thread_local): the compile options of the innermost active
 * compiled call, the depth of compiled calls, a "disabled" flag (set around guards, the
 * translator and _C.disable'd callables), a one-shot pass-through marker for the
 * transformed code the hook is about to run, and the delegation marker (below). Global
 * state (GIL-protected): the install counter, the previous eval-frame function, the cache
 * size limit, the trace rules (trace_rules.h) and the counters.
 *
 * Coexistence with other PEP 523 hooks (torch._dynamo's, profilers'): each hook remembers
 * one "previous" function and calls it for frames it does not handle, so two hooks that
 * installed themselves over each other can end up each other's previous. Three rules keep
 * every order of nesting finite and each hook to its own frames:
 *   - Ownership: cdynamo acts on a frame only when this thread is inside a compiled call
 *     and eval_frame is the installed function. A frame handed to us by a hook installed
 *     over us (we are its previous) belongs to that hook: we pass it on untouched. A frame
 *     we own and do not replace runs on _PyEval_EvalFrameDefault: hooks below us never see
 *     our transformed code, our guards, our translator or the frames of our compiled call.
 *   - Delegation: a frame we do not own goes to prev_eval (the function that was installed
 *     when we put ourselves over it). Before calling it we record, per thread, the frame
 *     and the Python frame that was executing (the caller); if the hook below calls back
 *     into us before that frame has started executing (same caller frame still current),
 *     it is handing back our frame, its own version of it (a shadow frame of transformed
 *     code) or its own Python code run on its behalf: we run it on
 *     _PyEval_EvalFrameDefault and never call the hook below again for it. No cycle of
 *     "previous" pointers can loop.
 *   - Installation: every compiled call puts eval_frame on top if another function is
 *     installed (remembering that one as prev_eval) and, when it returns, puts back exactly
 *     the function it replaced if eval_frame is still on top; a hook installed over us
 *     meanwhile is never removed. The hook stays installed while compiled calls of other
 *     threads are active (install_count).
 * Cost on the per-frame fast path: one extra TLS load (the delegation marker, same TLS
 * block as the depth) and one read of the interpreter's installed function.
 *
 * Running an entry: the transformed code takes every argument slot of the original frame
 * as a plain positional parameter (translate.h), so the hook calls a function built from
 * (entry code, frame globals, frame closure) by vectorcall on localsplus[0..n) and returns
 * its result. The original frame was never linked in as the current frame; the caller
 * (_PyEval_Vector on 3.11) clears and pops it after the hook returns, releasing the
 * argument slots it still owns (vectorcall only borrowed them).
 */
#include "hook.h"
#include "stance.h"
#include "cache.h"
#include "modcall.h"
#include "trace_rules.h"
#include "translate.h"
#include "tx.h"

#include <stddef.h>
#include <structmember.h>

typedef struct {
    PyObject *options;     /* borrowed (held by the running wrapper) or NULL */
    int active;            /* depth of compiled calls on this thread */
    int disabled;          /* nonzero: every frame falls through */
    int run_only;          /* nonzero inside a frame run uncompiled at its cache limit: frames
                              run their cache entries but nothing is compiled (as
                              torch._dynamo's run-only mode after recompile_limit) */
    PyObject *passthrough; /* borrowed code object: the next frame with it falls through */
    /* Delegation marker: the frame last handed to prev_eval (NULL when none) and the
     * Python frame executing when it was handed over. Saved and restored around each
     * delegation. Borrowed; compared by address only. */
    cdyn_frame *deleg_frame;
    cdyn_frame *deleg_caller;
    /* The forward code of the nn.Module the innermost compiled call wraps, until a frame of
     * it starts: a code marked force-compile (torch's own module classes) is compiled only
     * as that frame, not wherever else it runs. Borrowed; compared by address only. */
    PyObject *force_code;
    /* torch.compiler.set_stance of the innermost compiled call (stance.h) */
    cdyn_stance_mode stance;
    int skip_guards;       /* skip_guard_eval_unsafe */
    PyObject *first_options;   /* aot_eager_then_compile's (cdyn_stance); borrowed, or NULL */
    /* The backend of the innermost compiled call (its wrapper's CompileOptions.backend):
     * only entries made under it (or with none) are looked up. Borrowed; NULL: any entry
     * (set_stance's force_backend, frames outside compiled calls). */
    PyObject *backend_key;
} cdyn_tls;

static _Thread_local cdyn_tls tls;

/* 1 when entry e may serve the current call: made with no backend, or with the backend of
 * the innermost compiled call (or that call has none: force_backend). */
static inline int
backend_matches(const cdyn_cache_entry *e)
{
    return e->backend == NULL || tls.backend_key == NULL || e->backend == tls.backend_key;
}

cdyn_counters cdyn_counts;
static Py_ssize_t install_count;   /* compiled calls active on all threads */
/* The function below us: installed when we put eval_frame over it. Never eval_frame. */
static _PyFrameEvalFunction prev_eval = _PyEval_EvalFrameDefault;
static int cache_size_limit = 8;
/* Entries of one code object in all (torch._dynamo's accumulated_recompile_limit): the cap
 * when cache_size_limit counts only the entries of the frame's id-matched locals. */
enum { ACCUMULATED_CACHE_LIMIT = 256 };
static PyObject *str_dynamo_eval_frame;   /* strong "torch._C._dynamo.eval_frame" */

static void decide_skip(PyCodeObject *code, PyObject *globals, cdyn_extra *x);

/* ---- installation ------------------------------------------------------------------ */

static PyObject *eval_frame(PyThreadState *ts, cdyn_frame *f, int throwflag);

/* What a compiled call did to the installed function, to undo it exactly. */
typedef struct {
    _PyFrameEvalFunction below;      /* the function installed when the call began */
    _PyFrameEvalFunction saved_prev; /* prev_eval when the call began */
    int pushed;                      /* eval_frame was put over `below` */
    int nested;                      /* other compiled calls were active (any thread) */
} hook_layer;

/* Put eval_frame on top of the installed function if it is not there; count the call. */
static void
hook_enter(hook_layer *l)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    l->below = _PyInterpreterState_GetEvalFrameFunc(interp);
    l->saved_prev = prev_eval;
    l->pushed = l->below != eval_frame;
    l->nested = install_count > 0;
    if (l->pushed) {
        assert(l->below != eval_frame);
        prev_eval = l->below;
        _PyInterpreterState_SetEvalFrameFunc(interp, eval_frame);
    }
    install_count++;
}

/* Undo hook_enter. A hook installed over eval_frame meanwhile stays (we never remove a
 * function we did not install); otherwise the function this call replaced comes back,
 * and the last compiled call of all threads uninstalls eval_frame. */
static void
hook_leave(const hook_layer *l)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    assert(install_count > 0);
    install_count--;
    if (_PyInterpreterState_GetEvalFrameFunc(interp) != eval_frame) {
        return;
    }
    if (l->pushed && l->nested) {
        /* we had been put below another hook: restore that hook over us */
        _PyInterpreterState_SetEvalFrameFunc(interp, l->below);
        prev_eval = l->saved_prev;
    }
    else if (install_count == 0) {
        _PyInterpreterState_SetEvalFrameFunc(interp, prev_eval);
    }
}

/* torch._dynamo's own PEP 523 hook keeps a per-thread callback and, whenever that callback
 * goes from set to None on a thread whose count of active threads drops to zero, puts
 * back the function it replaced even when another hook (us) was installed over it since.
 * Inside a torch.compile-d call, anything wrapped with torch._dynamo.disable (fake
 * tensors, torch internals) does that, which would remove eval_frame in the middle of our
 * compiled call and hand our internals to torch._dynamo. So a compiled call entered while
 * torch._dynamo's callback is set on this thread suspends it (through its own API) for its
 * extent, before installing eval_frame, and restores it afterwards: inside a compiled call
 * the frames are cdynamo's; a torch.compile-d function called from there sets its
 * callback again and nests over us. Only consulted when another hook is installed. */
static PyObject *dynamo_get_callback;   /* strong, or NULL until torch._dynamo is loaded */
static PyObject *dynamo_set_callback;   /* strong, or NULL */

/* New reference to torch._dynamo's callback that was set on this thread, now replaced by
 * None; NULL when none was set or torch._dynamo is not loaded. Never raises. */
static PyObject *
dynamo_suspend(void)
{
    PyObject *cb = NULL, *prior = NULL;
    if (dynamo_set_callback == NULL) {
        PyObject *m = PyImport_GetModule(str_dynamo_eval_frame);
        if (m == NULL) {
            PyErr_Clear();
            return NULL;
        }
        dynamo_get_callback = PyObject_GetAttrString(m, "get_eval_frame_callback");
        dynamo_set_callback = PyObject_GetAttrString(m, "set_eval_frame");
        Py_DECREF(m);
        if (dynamo_get_callback == NULL || dynamo_set_callback == NULL) {
            Py_CLEAR(dynamo_get_callback);
            Py_CLEAR(dynamo_set_callback);
            PyErr_Clear();
            return NULL;
        }
    }
    cb = PyObject_CallNoArgs(dynamo_get_callback);
    if (cb != NULL && cb != Py_None) {
        prior = PyObject_CallOneArg(dynamo_set_callback, Py_None);
    }
    if (prior == NULL) {
        PyErr_Clear();
    }
    Py_XDECREF(cb);
    return prior;
}

/* Give torch._dynamo back its callback prior (stolen), keeping any pending exception. */
static void
dynamo_resume(PyObject *prior)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *r = PyObject_CallOneArg(dynamo_set_callback, prior);
    if (r == NULL) {
        PyErr_WriteUnraisable(dynamo_set_callback);
    }
    Py_XDECREF(r);
    Py_DECREF(prior);
    PyErr_Restore(et, ev, tb);
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

int
cdyn_code_trace_rule(PyCodeObject *code, PyObject *globals)
{
    cdyn_extra *x = cdyn_cache_get(code);
    if (x == NULL && (x = cdyn_cache_ensure(code)) == NULL) {
        PyErr_Clear();
        return (int)cdyn_rules_for_code(code, globals);
    }
    if (!x->decided) {
        decide_skip(code, globals, x);
    }
    return x->force ? (int)CDYN_RULE_COMPILE : (int)x->rule;
}

int
cdyn_frame_decision(PyCodeObject *code, int *rule, int *skip)
{
    cdyn_extra *x = cdyn_cache_get(code);
    if (x == NULL || !x->decided) {
        return 0;
    }
    *rule = (int)x->rule;
    *skip = (int)x->skip;
    return 1;
}

/* ---- the hook ---------------------------------------------------------------------- */

/* Evaluate a frame we own and do not replace: the hooks below us never see it. */
static inline PyObject *
eval_plain(PyThreadState *ts, cdyn_frame *f, int throwflag)
{
    return _PyEval_EvalFrameDefault(ts, f, throwflag);
}

/* Hand a frame we do not own to the function below us, marking the delegation so that a
 * hook below that calls back into us for it is answered by eval_frame's re-entry rule. */
static PyObject *
eval_below(PyThreadState *ts, cdyn_frame *f, int throwflag)
{
    _PyFrameEvalFunction below = prev_eval;
    if (below == _PyEval_EvalFrameDefault) {
        return _PyEval_EvalFrameDefault(ts, f, throwflag);
    }
    assert(below != eval_frame);
    cdyn_tls *t = &tls;
    cdyn_frame *saved_frame = t->deleg_frame, *saved_caller = t->deleg_caller;
    t->deleg_frame = f;
    t->deleg_caller = cdyn_current_frame(ts);
    PyObject *res = below(ts, f, throwflag);
    t->deleg_frame = saved_frame;
    t->deleg_caller = saved_caller;
    return res;
}

/* Code whose frames run with the hook off for their whole extent (cache.h's `quiet`):
 * (qualified name, file name suffix). */
static const struct {
    const char *qualname, *file;
} quiet_codes[] = {
    /* torch.autograd.graph._engine_run_backward, where every backward pass run from Python
       enters the autograd engine: the backward graphs AOTAutograd compiled and the user's
       autograd.Function backwards run as they are, as torch._dynamo leaves them */
    {"_engine_run_backward", "autograd/graph.py"},
    /* the wrapper torch._dynamo.disable(fn) makes (recursive, its default): fn and all it
       calls run uncompiled, as under torch._dynamo (a function compiled explicitly inside
       still compiles: its wrapper turns the hook on again) */
    {"DisableContext.__call__.<locals>._fn", "_dynamo/eval_frame.py"},
};

/* 1 when frames of code run quietly (quiet_codes). */
static int
is_quiet_code(PyCodeObject *code)
{
    const char *fn;
    size_t n;
    if (!PyUnicode_Check(code->co_qualname) || !PyUnicode_Check(code->co_filename) ||
        (fn = PyUnicode_AsUTF8(code->co_filename)) == NULL) {
        PyErr_Clear();
        return 0;
    }
    n = strlen(fn);
    for (size_t i = 0; i < sizeof quiet_codes / sizeof *quiet_codes; i++) {
        size_t k = strlen(quiet_codes[i].file);
        if (PyUnicode_CompareWithASCIIString(code->co_qualname, quiet_codes[i].qualname) == 0 &&
            n >= k && strcmp(fn + n - k, quiet_codes[i].file) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Decide once whether frames of code (run with globals, borrowed) are translated: fills
 * x->rule, x->skip and x->decided. Never fails. */
static void
decide_skip(PyCodeObject *code, PyObject *globals, cdyn_extra *x)
{
    int flags = code->co_flags;
    int skip = 0;
    cdyn_rule rule = cdyn_rules_for_code(code, globals);
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
    else if (!x->force && cdyn_rule_skips_frame(rule)) {
        skip = 1;
    }
    else if (!x->force && PyUnicode_Check(code->co_name) &&
             (PyUnicode_CompareWithASCIIString(code->co_name, "__getattribute__") == 0 ||
              PyUnicode_CompareWithASCIIString(code->co_name, "__getattr__") == 0)) {
        /* attribute hooks run for every attribute read, the guards' and the translator's
           included: entered on their own they run as they are (inlined when traced code
           calls them). Compiling them made one entry per attribute name, and transformers'
           configs (mutually recursive overrides with RecursionError fallbacks) ran for
           minutes */
        skip = 1;
    }
    if (is_quiet_code(code)) {
        skip = 1;
        x->quiet = 1;
    }
    x->rule = (unsigned)rule;
    x->decided = 1;
    x->skip = skip;
    if (skip) {
        cdyn_counts.skipped++;
    }
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
run_entry(PyThreadState *ts, cdyn_frame *f, cdyn_cache_entry *e)
{
    PyObject *closure = cdyn_frame_func(f) != NULL ? cdyn_frame_func(f)->func_closure : NULL;
    /* A new reference: the entry may be freed while its code runs (a reset from inside, or
     * from another thread), or already while the function is built; e is not used after. */
    PyObject *func = cdyn_cache_entry_func(e, cdyn_frame_globals(f), closure);
    if (func == NULL) {
        cdyn_frame_release(ts, f);
        return NULL;
    }
    cdyn_tls *t = &tls;
    t->passthrough = PyFunction_GET_CODE(func);
    PyObject *res = cdyn_function_vectorcall(func, cdyn_frame_slots(f),
                                              (size_t)frame_nargs(cdyn_frame_code(f)));
    t->passthrough = NULL;
    Py_DECREF(func);
    cdyn_frame_release(ts, f);   /* replaced: its slots were only borrowed by the call */
    return res;
}

/* New str: the first failing guard of the most recent entry, or "unknown". Runs with the
 * hook disabled; never fails (errors become the text "unknown"). */
static PyObject *
recent_failure(cdyn_extra *x, cdyn_frame *f)
{
    PyObject *r = NULL;
    if (x->entries != NULL) {
        r = cdyn_guards_first_failure(x->entries->guards, cdyn_frame_slots(f), cdyn_frame_func(f),
                                      cdyn_frame_globals(f), cdyn_frame_builtins(f));
    }
    if (r == NULL || !PyUnicode_Check(r)) {
        PyErr_Clear();
        Py_XDECREF(r);
        r = PyUnicode_FromString("unknown");
    }
    return r;
}

/* A recompile of code because of reason (str), compiling with options (borrowed, may be
 * NULL): one INFO line on the "cdynamo" logger naming the guard that failed with its old
 * and new values, a record for cdynamo.explain(), and the options' guard_fail_fn called. -1 with the exception set when the record raises: a RecompileError
 * under error_on_recompile (cdynamo.config or torch._dynamo.config), the call's error. */
static int
note_recompile(PyCodeObject *code, PyObject *reason, PyObject *options)
{
    PyObject *glue = NULL, *r = NULL;
    cdyn_log(20, "recompiling %U (%U:%d): %U", code->co_qualname, code->co_filename,
             code->co_firstlineno, reason);
    glue = PyImport_ImportModule("cdynamo._glue");
    r = glue ? PyObject_CallMethod(glue, "record_recompile", "OOiOOO", code->co_qualname,
                                   code->co_filename, code->co_firstlineno, reason,
                                   (PyObject *)code, options != NULL ? options : Py_None)
             : NULL;
    Py_XDECREF(glue);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* cdyn_translate_frame, told to cdynamo._events (the logs and the structured trace) as one
 * compile: its start (reason: the failed guard of a recompile, borrowed, or NULL) and its end
 * with the outcome, or "error" with the pending exception's message. */
static int
translate_observed(cdyn_frame *f, PyObject *options, PyObject *reason, cdyn_translation *out)
{
    PyObject *exc = NULL, *val = NULL, *tb = NULL, *msg = NULL;
    int rc;
    cdyn_event("compile_start", "(OO)", (PyObject *)cdyn_frame_code(f),
               reason != NULL ? reason : Py_None);
    rc = cdyn_translate_frame(f, options, out);
    if (rc == 0) {
        cdyn_event("compile_end", "(s)", out->code != NULL ? "compiled"
                                         : out->no_ops ? "skipped" : "unmodified");
        return 0;
    }
    PyErr_Fetch(&exc, &val, &tb);
    PyErr_NormalizeException(&exc, &val, &tb);
    msg = val != NULL ? PyObject_Str(val) : NULL;
    PyErr_Clear();
    cdyn_event("compile_end", "(sO)", "error", msg != NULL ? msg : Py_None);
    Py_XDECREF(msg);
    PyErr_Restore(exc, val, tb);
    return rc;
}

/* A miss of f (code extra x) under a set_stance other than the default: -1 with the
 * fail_on_recompile error (or another error) set, 1 when f runs unmodified now
 * (eager_then_compile: its code's first invocation), 2 when it compiles with
 * t->first_options (aot_eager_then_compile's first invocation), 0 when it compiles as
 * usual. Frames without tensors or torch are never affected, as torch's
 * has_tensor_in_frame decides. */
static int
stance_miss(cdyn_extra *x, cdyn_frame *f)
{
    cdyn_tls *t = &tls;
    PyCodeObject *code = cdyn_frame_code(f);
    if (!cdyn_frame_has_torch(f)) {
        return 0;
    }
    if (t->stance == CDYN_STANCE_FAIL_ON_RECOMPILE) {
        PyObject *reason = x->nentries > 0 ? recent_failure(x, f) : NULL;
        cdyn_stance_fail(code, code->co_firstlineno, reason);
        Py_XDECREF(reason);
        return -1;
    }
    if ((t->stance == CDYN_STANCE_EAGER_THEN_COMPILE ||
         t->stance == CDYN_STANCE_AOT_EAGER_THEN_COMPILE) && !x->eager_seen) {
        x->eager_seen = 1;
        /* the first call's inputs decide, with the next call's, what compiles dynamic */
        if (cdyn_sym_record_eager_call(code, cdyn_frame_slots(f)) < 0) {
            return -1;
        }
        return t->stance == CDYN_STANCE_EAGER_THEN_COMPILE ? 1 : 2;
    }
    return 0;
}

/* An entry of x that another thread inserted while this one translated the same code (the
 * translator runs Python code, where threads switch) and whose guards pass for f; NULL when
 * none does. When the walk saw the cache change (cdyn_cache_generation), *px is refetched
 * (NULL with an exception on failure) and NULL returned. A guard error is cleared: the
 * caller then inserts its own entry. */
static cdyn_cache_entry *
entry_compiled_meanwhile(PyCodeObject *code, cdyn_frame *f, cdyn_extra **px)
{
    cdyn_tls *t = &tls;
    int saved_disabled = t->disabled;
    unsigned long gen = cdyn_cache_generation;
    cdyn_cache_entry *e = NULL;
    int r = 0;
    t->disabled = 1;
    for (e = (*px)->entries; e != NULL; e = e->next) {
        if (!backend_matches(e)) {
            continue;
        }
        r = cdyn_guards_check(e->guards, cdyn_frame_slots(f), cdyn_frame_func(f), cdyn_frame_globals(f),
                              cdyn_frame_builtins(f));
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

/* The compile lock: one translation (trace, backend compile, code generation) at a time
 * in the process, as torch._dynamo's compile_lock. Translations run torch's Python code
 * whose state is not thread-safe: ShapeEnv's _lru_cache keeps one version number for all
 * ShapeEnvs, so two traces interleaved on two threads read each other's stale cache
 * (produce_guards then failed with "sources must not be empty for symbol s98"). Reentrant
 * per thread; the GIL is released while waiting. Strong; created on first use. */
static PyObject *compile_lock;

/* Take the compile lock (waiting without the GIL). 0, or -1 with an exception. */
static int
compile_lock_acquire(void)
{
    PyObject *r;
    if (compile_lock == NULL) {
        PyObject *mod = PyImport_ImportModule("_thread");
        if (mod == NULL) {
            return -1;
        }
        /* another thread may have made it while the import switched threads */
        if (compile_lock == NULL) {
            compile_lock = PyObject_CallMethod(mod, "RLock", NULL);
        }
        Py_DECREF(mod);
        if (compile_lock == NULL) {
            return -1;
        }
    }
    r = PyObject_CallMethod(compile_lock, "acquire", NULL);
    if (r == NULL) {
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* Release the compile lock taken by compile_lock_acquire; keeps a pending exception. */
static void
compile_lock_release(void)
{
    PyObject *et, *ev, *tb, *r;
    PyErr_Fetch(&et, &ev, &tb);
    r = PyObject_CallMethod(compile_lock, "release", NULL);
    if (r == NULL) {
        PyErr_WriteUnraisable(compile_lock);
    }
    Py_XDECREF(r);
    PyErr_Restore(et, ev, tb);
}

/* Whether f (of code with extra x) may not compile once more: its entries that count for
 * it (those whose ID_MATCHes on plain locals name f's objects) plus the translations given
 * up reach cache_size_limit, or all its entries reach ACCUMULATED_CACHE_LIMIT. */
static int
at_cache_limit(cdyn_extra *x, cdyn_frame *f)
{
    int n = x->nunmodified;
    if (x->nentries + x->nunmodified >= ACCUMULATED_CACHE_LIMIT) {
        return 1;
    }
    for (cdyn_cache_entry *e = x->entries; e != NULL && n < cache_size_limit; e = e->next) {
        n += cdyn_guards_same_id_locals(e->guards, cdyn_frame_slots(f));
    }
    return n >= cache_size_limit;
}

/* torch._dynamo.disable(fn, recursive=False)'s wrapper code (strong, resolved on first use
 * through cdynamo._compat; Py_None when torch has none). */
static PyObject *nonrecursive_wrapper_code;

/* 1 when the frame calling the one about to start (the thread's executing frame) runs
 * torch's non-recursive disable wrapper: that call is not compiled, its callees are (as
 * torch._dynamo's convert_frame decides); 0 otherwise or on error (cleared: compiled). */
static int
called_by_nonrecursive_disable(PyThreadState *ts)
{
    cdyn_frame *caller = cdyn_current_frame(ts);
    if (nonrecursive_wrapper_code == NULL) {
        PyObject *compat = PyImport_ImportModule("cdynamo._compat");
        nonrecursive_wrapper_code =
            compat ? PyObject_CallMethod(compat, "nonrecursive_disable_code", NULL) : NULL;
        Py_XDECREF(compat);
        if (nonrecursive_wrapper_code == NULL) {
            PyErr_Clear();
            nonrecursive_wrapper_code = Py_NewRef(Py_None);
        }
    }
    return caller != NULL && (PyObject *)cdyn_frame_code(caller) == nonrecursive_wrapper_code;
}

/* The first time f's code (extra x) reaches cache_size_limit: one WARNING naming the guard
 * that failed, and a cache_limit event. Never raises. */
static void
log_cache_limit(cdyn_extra *x, cdyn_frame *f)
{
    PyCodeObject *code = cdyn_frame_code(f);
    PyObject *reason;
    if (x->limit_logged) {
        return;
    }
    x->limit_logged = 1;
    reason = recent_failure(x, f);
    if (reason != NULL) {
        cdyn_log(30, "cache_size_limit reached (%d) for %U %U:%d (reason: %U); "
                 "running it without compiling", cache_size_limit, code->co_name,
                 code->co_filename, code->co_firstlineno, reason);
        cdyn_event("cache_limit", "(OOiiO)", code->co_qualname, code->co_filename,
                   code->co_firstlineno, cache_size_limit, reason);
        Py_DECREF(reason);
    }
    PyErr_Clear();
}

/* Run f, whose translation gave no code (no_ops: there was nothing to compile, so nothing
 * was given up): a code without entries is skipped from then on, one with entries counts
 * one more untranslated call. */
static PyObject *
run_untranslated(PyThreadState *ts, cdyn_frame *f, cdyn_extra *x, int no_ops)
{
    cdyn_counts.unmodified += !no_ops;
    if (x->nentries == 0) {
        x->skip = 1;
        x->decided = 1;
        cdyn_counts.skipped++;
    }
    else {
        x->nunmodified++;
    }
    return eval_plain(ts, f, 0);
}

/* The slow path of a frame whose code has no passing entry: compile or run unmodified.
 * order: cdyn_cache_order when the walk that found no entry started. */
static PyObject *
handle_miss(PyThreadState *ts, cdyn_frame *f, cdyn_extra *x,
            unsigned long order)
{
    cdyn_tls *t = &tls;
    PyCodeObject *code = cdyn_frame_code(f);
    PyObject *reason = NULL, *res = NULL;
    PyObject *opts = t->options;   /* borrowed: the options this miss compiles with */
    cdyn_translation out = {NULL, NULL, 0};
    int saved_disabled = t->disabled;
    int rc, locked = 0, ran = 0;   /* ran: f was evaluated or replaced (released) */

    cdyn_counts.cache_misses++;
    if (t->run_only || called_by_nonrecursive_disable(ts)) {
        /* called from a frame at its cache limit (runs as is, its callees too), or by
           torch._dynamo.disable(recursive=False)'s wrapper (this call only) */
        cdyn_counts.unmodified++;
        return eval_plain(ts, f, 0);
    }
    if (t->stance != CDYN_STANCE_DEFAULT) {
        int handled = stance_miss(x, f);
        if (handled < 0) {
            goto done;     /* fail_on_recompile: the call raises */
        }
        if (handled == 2) {
            opts = t->first_options;
        }
        else if (handled) {
            cdyn_counts.unmodified++;
            ran = 1;
            res = eval_plain(ts, f, 0);
            goto done;
        }
    }
    t->disabled = 1;
    if (at_cache_limit(x, f)) {
        cdyn_counts.cache_limit_hits++;
        cdyn_counts.unmodified++;
        log_cache_limit(x, f);
        t->disabled = saved_disabled;
        t->run_only++;   /* and what it calls (cached entries still run) */
        ran = 1;
        res = eval_plain(ts, f, 0);
        t->run_only--;
        goto done;
    }
    if (x->nentries > 0) {
        reason = recent_failure(x, f);
        PyErr_Clear();
        if (reason != NULL && note_recompile(code, reason, opts) < 0) {
            t->disabled = saved_disabled;   /* error_on_recompile: the call raises */
            goto done;
        }
    }
    if (x->rule == CDYN_RULE_COMPILE && !x->force && x->nentries == 0 &&
        !cdyn_frame_has_torch(f)) {
        /* library code translated like user code (torch.optim): a frame of it with no
           tensor or module in its arguments and no torch import runs as it is, this call,
           as torch._dynamo's has_tensor_in_frame decides (an LR scheduler's list
           comprehension over param_groups) */
        t->disabled = saved_disabled;
        cdyn_counts.unmodified++;
        ran = 1;
        res = eval_plain(ts, f, 0);
        goto done;
    }
    if (compile_lock_acquire() < 0) {
        t->disabled = saved_disabled;
        goto done;
    }
    locked = 1;
    /* x may have been freed by a reset on another thread while this one waited */
    x = cdyn_cache_ensure(code);
    if (x != NULL && order != cdyn_cache_order) {
        /* Another thread compiled while this one waited for the lock: run its entry when
         * its guards pass (the same code missed on 8 threads at once compiles once). */
        cdyn_cache_entry *other = entry_compiled_meanwhile(code, f, &x);
        if (other != NULL) {
            compile_lock_release();
            locked = 0;
            t->disabled = saved_disabled;
            cdyn_counts.cache_hits++;
            other->hits++;
            ran = 1;
            res = run_entry(ts, f, other);
            goto done;
        }
    }
    if (x == NULL) {
        t->disabled = saved_disabled;
        goto done;
    }
    if (at_cache_limit(x, f)) {
        /* filled by the threads that compiled meanwhile: the next miss logs the limit */
        compile_lock_release();
        locked = 0;
        t->disabled = saved_disabled;
        cdyn_counts.cache_limit_hits++;
        cdyn_counts.unmodified++;
        t->run_only++;
        ran = 1;
        res = eval_plain(ts, f, 0);
        t->run_only--;
        goto done;
    }
    rc = translate_observed(f, opts, reason, &out);
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
        compile_lock_release();
        locked = 0;
        ran = 1;
        res = run_untranslated(ts, f, x, out.no_ops);
        goto done;
    }
    if (out.code == (PyObject *)code || !PyCode_Check(out.code) || out.guards == NULL) {
        PyErr_SetString(PyExc_SystemError,
                        "cdynamo: the translator must return a new code object and guards");
        goto done;
    }
    cdyn_counts.compiles++;
    cdyn_cache_entry *e = cdyn_cache_insert(x, out.guards, out.code);
    out.guards = NULL;    /* stolen */
    if (e == NULL) {
        goto done;
    }
    e->backend = Py_XNewRef(t->backend_key);
    e->reason = Py_XNewRef(reason);   /* the guard failure that made this entry */
    compile_lock_release();
    locked = 0;
    ran = 1;
    res = run_entry(ts, f, e);
done:
    if (locked) {
        compile_lock_release();
    }
    if (res == NULL && !ran) {
        cdyn_frame_release(ts, f);    /* an error before f ran or was replaced */
    }
    cdyn_guards_free(out.guards);
    Py_XDECREF(out.code);
    Py_XDECREF(reason);
    return res;
}

/* The PEP 523 function: see the file comment. */
static PyObject *
eval_frame(PyThreadState *ts, cdyn_frame *f, int throwflag)
{
    cdyn_tls *t = &tls;
    if (t->deleg_frame != NULL && cdyn_current_frame(ts) == t->deleg_caller) {
        /* Re-entry: no Python frame has started since we handed t->deleg_frame to the
         * hook below, so this is that frame, the hook's version of it, or the hook's own
         * code run for it: calling the hook again could loop. */
        return eval_plain(ts, f, throwflag);
    }
    if (t->active == 0 || _PyInterpreterState_GetEvalFrameFunc(ts->interp) != eval_frame) {
        /* not ours: no compiled call on this thread, or a hook installed over us (whose
         * frame this is) called us as its previous function */
        return eval_below(ts, f, throwflag);
    }
    if (throwflag || t->disabled || cdyn_near_recursion_limit(ts)) {
        /* near the recursion limit the frame runs as is: transformed code and resume
           functions add frames, and a program that stays under the limit eagerly must not
           overflow it because it was compiled */
        return eval_plain(ts, f, throwflag);
    }
    PyCodeObject *code = cdyn_frame_code(f);
    if ((PyObject *)code == t->passthrough) {
        t->passthrough = NULL;
        return eval_plain(ts, f, 0);
    }
    cdyn_extra *x = cdyn_cache_get(code);
    if (x == NULL || !x->decided) {
        if (x == NULL && (x = cdyn_cache_ensure(code)) == NULL) {
            cdyn_frame_release(ts, f);
            return NULL;
        }
        decide_skip(code, cdyn_frame_globals(f), x);
    }
    if (x->skip || !cdyn_frame_at_start(f) || cdyn_frame_func(f) == NULL) {
        if (x->quiet) {   /* a quiet code is skipped too: its extent runs with the hook off */
            PyObject *res;
            t->disabled = 1;
            res = eval_plain(ts, f, 0);
            t->disabled = 0;
            return res;
        }
        return eval_plain(ts, f, 0);
    }
    if (x->force) {
        if ((PyObject *)code == t->force_code) {
            t->force_code = NULL;    /* the compiled module's own forward */
        }
        else if (cdyn_rule_skips_frame((cdyn_rule)x->rule)) {
            return eval_plain(ts, f, 0);   /* elsewhere it runs by its trace rule */
        }
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
    if (t->skip_guards && x->entries != NULL && x->entries->next == NULL &&
        backend_matches(x->entries)) {
        /* set_stance(skip_guard_eval_unsafe=True): no other entry to tell apart */
        t->disabled = saved_disabled;
        cdyn_counts.cache_hits++;
        x->entries->hits++;
        return run_entry(ts, f, x->entries);
    }
restart:
    prev = NULL;
    order = cdyn_cache_order;
    for (e = x->entries; e != NULL; prev = e, e = e->next) {
        unsigned long gen = cdyn_cache_generation;
        if (!backend_matches(e)) {
            continue;
        }
        int r = cdyn_guards_check(e->guards, cdyn_frame_slots(f), cdyn_frame_func(f), cdyn_frame_globals(f),
                                  cdyn_frame_builtins(f));
        if (r < 0) {
            t->disabled = saved_disabled;
            cdyn_frame_release(ts, f);
            return NULL;
        }
        if (gen != cdyn_cache_generation) {
            x = cdyn_cache_get(code);
            if (x == NULL || x->skip || ++restarts > 3) {
                t->disabled = saved_disabled;
                return eval_plain(ts, f, 0);
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
    return run_entry(ts, f, e);
}

/* ---- a stand-in for another PEP 523 hook (tests) ----------------------------------- */

/* Behaves like a third-party hook (a profiler, torch._dynamo with its callback unset):
 * counts the frames it sees and hands each to the function it replaced. */
static _PyFrameEvalFunction other_prev;
static Py_ssize_t other_frames;

static PyObject *
other_eval(PyThreadState *ts, cdyn_frame *f, int throwflag)
{
    other_frames++;
    return other_prev(ts, f, throwflag);
}

Py_ssize_t
cdyn_test_other_hook(int on)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    _PyFrameEvalFunction cur = _PyInterpreterState_GetEvalFrameFunc(interp);
    if (on < 0) {
        return other_frames;
    }
    if (on && cur != other_eval) {
        other_prev = cur;
        _PyInterpreterState_SetEvalFrameFunc(interp, other_eval);
    }
    else if (!on && cur == other_eval) {
        _PyInterpreterState_SetEvalFrameFunc(interp, other_prev);
    }
    return other_frames;
}

/* ---- wrapper objects --------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *fn;          /* strong */
    PyObject *options;     /* strong; Py_None for DisabledFunction */
    PyObject *backend;     /* strong or NULL: options.backend, the key of its cache entries */
    PyObject *dict;        /* strong or NULL */
    PyObject *weakreflist;
    vectorcallfunc vectorcall;
    cdyn_modcall_cache modcall;   /* CompiledFunction over an nn.Module: modcall.h */
} cdyn_wrapper;

/* New reference to item pos of res unpacked into n values as UNPACK_SEQUENCE n would (an
 * exact tuple or list of n items; anything else through a tuple of its items, with
 * CPython's messages when the count differs), or NULL with an exception. */
static PyObject *
plan_item(PyObject *res, int n, int pos, PyObject **seq)
{
    if (*seq == NULL) {
        if ((PyTuple_CheckExact(res) || PyList_CheckExact(res)) && Py_SIZE(res) == n) {
            *seq = Py_NewRef(res);
        }
        else if ((*seq = PySequence_Tuple(res)) == NULL) {
            if (PyErr_ExceptionMatches(PyExc_TypeError) && Py_TYPE(res)->tp_iter == NULL &&
                !PySequence_Check(res)) {
                PyErr_Format(PyExc_TypeError, "cannot unpack non-iterable %.200s object",
                             Py_TYPE(res)->tp_name);
            }
            return NULL;
        }
        else if (PyTuple_GET_SIZE(*seq) != n) {
            if (PyTuple_GET_SIZE(*seq) < n) {
                PyErr_Format(PyExc_ValueError, "not enough values to unpack (expected %d, got %zd)",
                             n, PyTuple_GET_SIZE(*seq));
            }
            else {
                PyErr_Format(PyExc_ValueError, "too many values to unpack (expected %d)", n);
            }
            Py_CLEAR(*seq);
            return NULL;
        }
    }
    return Py_NewRef(PyTuple_Check(*seq) ? PyTuple_GET_ITEM(*seq, pos) : PyList_GET_ITEM(*seq, pos));
}

/* The items of loader result r (n >= 1) in the order UNPACK_SEQUENCE n leaves them on the
 * stack (the last item deepest), borrowed from *seq (set to a new reference holding them)
 * into argv. 0, or -1 with CPython's exception when r does not unpack into n values. */
static int
plan_unpack_args(PyObject *r, int n, PyObject **seq, PyObject **argv)
{
    for (int k = 0; k < n; k++) {
        PyObject *item = plan_item(r, n, n - 1 - k, seq);
        if (item == NULL) {
            return -1;
        }
        argv[k] = item;
        Py_DECREF(item);    /* *seq holds it */
    }
    return 0;
}

/* Call the plan's callee on its arguments: the argument slots and the loaders' items, in
 * order. New reference, or NULL with an exception. */
static PyObject *
plan_call(const cdyn_direct_plan *p, PyObject *const *slots)
{
    PyObject *argv[CDYN_PLAN_ARGS], *held[CDYN_PLAN_LOADS] = {NULL}, *res = NULL;
    int na = 0, j = 0;
    for (int i = 0; i < p->nin; i++) {
        if (p->in[i] >= 0) {
            argv[na++] = slots[p->in[i]];
            continue;
        }
        j = -1 - p->in[i];
        PyObject *r = PyObject_Vectorcall(p->load[j].fn, &slots[p->load[j].slot], 1, NULL);
        int st = r != NULL ? plan_unpack_args(r, p->load[j].n, &held[j], argv + na) : -1;
        Py_XDECREF(r);
        if (st < 0) {
            goto done;
        }
        na += p->load[j].n;
    }
    assert(na == p->nargs);
    res = PyObject_Vectorcall(p->callee, argv, (size_t)na, NULL);
done:
    for (int k = 0; k < p->nload; k++) {
        Py_XDECREF(held[k]);
    }
    return res;
}

/* Run the transformed code of entry e whose plan matched (plan_state 1) on the argument
 * slots, without a frame: call the plan's callee on its arguments (plan_call) and return
 * the items picked from its result. An error gets a traceback entry for the compiled
 * function's line, where the frame would have had one. New reference, or NULL with an
 * exception. The plan is held (its box's refs) for the call, which may free e (a reset). */
static PyObject *
run_plan(const cdyn_cache_entry *e, PyObject *const *slots)
{
    cdyn_plan_box *box = e->plan;
    const cdyn_direct_plan *p = &box->p;
    PyCodeObject *co = (PyCodeObject *)e->code;
    PyObject *res = NULL, *seq = NULL, *out = NULL, *item = NULL;
    box->refs++;      /* the call may free e, not the plan */
    Py_INCREF(co);    /* holds the callee, the loaders (its constants) and the names */
    res = plan_call(p, slots);
    if (res == NULL) {
        goto done;
    }
    if (p->ret_tuple && (out = PyTuple_New(p->nret)) == NULL) {
        goto done;
    }
    for (int k = 0; k < p->nret; k++) {
        if ((item = plan_item(res, p->nunpack, p->ret[k], &seq)) == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        if (!p->ret_tuple) {
            out = item;
            break;
        }
        PyTuple_SET_ITEM(out, k, item);
    }
done:
    if (out == NULL) {
        const char *name = PyUnicode_AsUTF8(co->co_name), *file = PyUnicode_AsUTF8(co->co_filename);
        if (name != NULL && file != NULL) {
            _PyTraceback_Add(name, file, p->lineno > 0 ? p->lineno : co->co_firstlineno);
        }
    }
    Py_XDECREF(seq);
    Py_XDECREF(res);
    Py_DECREF(co);
    cdyn_plan_release(box);
    return out;
}

/* The per-call fast path of a compiled call of a plain Python function given positional
 * arguments only (the common case: cdynamo.compile(fn)(x, y)): the most recent entry of
 * fn's code is checked on the arguments as they are and, when its guards pass, its
 * transformed code runs at once, without first building the original frame that
 * eval_frame would only replace. Anything else (no entry yet, a guard failure, keywords,
 * defaults, *args, another hook, near the recursion limit) sets *handled = 0 and the call
 * goes the usual way through eval_frame, which checks again and compiles on a miss. The
 * argument slots the guards read are args[0..n) followed by NULL, as in a frame about to
 * start (cells not made, free variables not copied yet). Returns a new reference, or NULL
 * with an exception (*handled = 1). Called with the hook installed and t->active set. */
static PyObject *
direct_call(PyObject *fn, PyObject *const *args, size_t nargsf, PyObject *kwnames, int *handled)
{
    enum { DIRECT_MAX_SLOTS = 64 };
    PyObject *slots[DIRECT_MAX_SLOTS];
    PyThreadState *ts = PyThreadState_Get();
    cdyn_tls *t = &tls;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    *handled = 0;
    if (!Py_IS_TYPE(fn, &PyFunction_Type) || kwnames != NULL || t->disabled ||
        t->deleg_frame != NULL || cdyn_near_recursion_limit(ts) ||
        _PyInterpreterState_GetEvalFrameFunc(ts->interp) != eval_frame) {
        return NULL;
    }
    PyFunctionObject *func = (PyFunctionObject *)fn;
    PyCodeObject *code = (PyCodeObject *)func->func_code;
    if (nargs != code->co_argcount || code->co_kwonlyargcount != 0 ||
        (code->co_flags & (CO_VARARGS | CO_VARKEYWORDS)) ||
        code->co_nlocalsplus > DIRECT_MAX_SLOTS || (PyObject *)code == t->passthrough) {
        return NULL;
    }
    cdyn_extra *x = cdyn_cache_get(code);
    cdyn_cache_entry *e = x != NULL && x->decided && !x->skip ? x->entries : NULL;
    /* a force-compiled code (torch's module classes) is compiled only as the compiled
     * module's own forward (eval_frame's rule) */
    int force_hit = e != NULL && x->force && (PyObject *)code == t->force_code;
    if (e == NULL || (x->force && !force_hit && cdyn_rule_skips_frame((cdyn_rule)x->rule)) ||
        !backend_matches(e)) {
        return NULL;
    }
    PyObject *const *locals = args;    /* the arguments are all the slots: read in place */
    if (code->co_nlocalsplus != nargs) {
        for (Py_ssize_t i = 0; i < code->co_nlocalsplus; i++) {
            slots[i] = i < nargs ? args[i] : NULL;
        }
        locals = slots;
    }
    unsigned long gen = cdyn_cache_generation;
    t->disabled = 1;     /* guards may run Python code: no tracing meanwhile */
    int r = cdyn_guards_check(e->guards, locals, func, func->func_globals, func->func_builtins);
    t->disabled = 0;
    if (r < 0) {
        *handled = 1;
        return NULL;
    }
    if (r == 0 || gen != cdyn_cache_generation) {
        return NULL;     /* a miss, or entries freed meanwhile: the usual path decides */
    }
    *handled = 1;
    if (force_hit) {
        t->force_code = NULL;
    }
    cdyn_counts.frames++;
    cdyn_counts.cache_hits++;
    e->hits++;
    if (e->plan_state == 0) {
        cdyn_plan_box *box = PyMem_Malloc(sizeof(cdyn_plan_box));
        int m = box != NULL ? cdyn_direct_plan_of((PyCodeObject *)e->code, &box->p) : -1;
        if (m <= 0) {
            PyMem_Free(box);
            if (m < 0) {
                if (box == NULL) {
                    PyErr_NoMemory();
                }
                return NULL;
            }
        }
        else {
            box->refs = 1;
            e->plan = box;
        }
        e->plan_state = m ? 1 : -1;
    }
    if (e->plan_state == 1) {
        return run_plan(e, locals);
    }
    PyObject *entry_fn = cdyn_cache_entry_func(e, func->func_globals, func->func_closure);
    if (entry_fn == NULL) {
        return NULL;
    }
    t->passthrough = PyFunction_GET_CODE(entry_fn);
    PyObject *res = cdyn_function_vectorcall(entry_fn, locals, (size_t)nargs);
    t->passthrough = NULL;
    Py_DECREF(entry_fn);
    return res;
}

/* Borrowed: the code of type(fn).forward when fn is not a function and its type has a
 * Python forward (an nn.Module), else NULL. Never fails. */
static PyObject *
module_forward_code(PyObject *fn)
{
    static PyObject *str_forward;
    PyObject *fwd;
    if (PyFunction_Check(fn) || PyMethod_Check(fn)) {
        return NULL;
    }
    if (str_forward == NULL && (str_forward = PyUnicode_InternFromString("forward")) == NULL) {
        PyErr_Clear();
        return NULL;
    }
    fwd = _PyType_Lookup(Py_TYPE(fn), str_forward);   /* borrowed, no exception */
    return fwd != NULL && PyFunction_Check(fwd) ? PyFunction_GET_CODE(fwd) : NULL;
}

/* A compiled call of an nn.Module whose nn.Module.__call__ would only call its forward
 * (modcall.h): that forward called here, through direct_call when it can, *done = 1 (a
 * new reference, or NULL with an exception); *done = 0 when the module must be called as
 * usual (also past 16 arguments). Called with the hook installed. */
static PyObject *
call_module_forward(cdyn_wrapper *self, PyObject *const *args, size_t nargsf, PyObject *kwnames,
                    int *done)
{
    enum { MODCALL_MAX_ARGS = 16 };
    PyObject *stack[1 + MODCALL_MAX_ARGS], *fwd = NULL, *mod = self->fn, *res = NULL;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    int prepend = 0, handled = 0;
    *done = 0;
    if (nargs + nkw > MODCALL_MAX_ARGS) {
        return NULL;
    }
    if (!cdyn_modcall_forward(&self->modcall, mod, &fwd, &prepend)) {
        return NULL;
    }
    *done = 1;
    Py_INCREF(mod);
    Py_INCREF(fwd);    /* the call may change the instance dict that holds it */
    if (prepend) {
        stack[0] = mod;
        memcpy(stack + 1, args, (size_t)(nargs + nkw) * sizeof(PyObject *));
        args = stack;
        nargs++;
    }
    res = direct_call(fwd, args, (size_t)nargs, kwnames, &handled);
    if (!handled) {
        res = PyObject_Vectorcall(fwd, args, (size_t)nargs, kwnames);
    }
    Py_DECREF(fwd);
    Py_DECREF(mod);
    return res;
}

/* CompiledFunction.__call__: run fn with this wrapper's options active on this thread. */
static PyObject *
compiled_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    cdyn_wrapper *self = (cdyn_wrapper *)callable;
    cdyn_tls *t = &tls;
    PyObject *saved_options = t->options;
    int saved_disabled = t->disabled;
    cdyn_stance_mode saved_stance = t->stance;
    int saved_skip_guards = t->skip_guards;
    PyObject *saved_first = t->first_options;
    PyObject *saved_backend = t->backend_key;
    hook_layer layer;
    PyObject *dynamo_prior = NULL;
    cdyn_stance stance;
    _PyFrameEvalFunction installed = _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
    if (installed != eval_frame && installed != _PyEval_EvalFrameDefault) {
        dynamo_prior = dynamo_suspend();   /* another hook: maybe torch._dynamo's */
    }
    if (cdyn_stance_get(self->options, &stance) < 0 || stance.mode == CDYN_STANCE_FORCE_EAGER) {
        /* set_stance("force_eager"): the original callable, no frame looked up */
        if (dynamo_prior != NULL) {
            dynamo_resume(dynamo_prior);
        }
        return PyErr_Occurred() ? NULL : PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    }
    PyObject *saved_force = t->force_code;
    t->force_code = module_forward_code(self->fn);
    t->options = stance.options;
    t->stance = stance.mode;
    t->skip_guards = stance.skip_guards;
    t->first_options = stance.first_options;
    /* torch._dynamo.run() around this call (its callback False): cached entries of any
       backend run, nothing is compiled, as torch's run-only mode */
    int dynamo_run = dynamo_prior == Py_False;
    int run_only = stance.mode == CDYN_STANCE_EAGER_ON_RECOMPILE || dynamo_run;
    t->backend_key = stance.options == self->options && !dynamo_run ? self->backend : NULL;
    t->run_only += run_only;
    t->active++;
    t->disabled = 0;
    hook_enter(&layer);
    int handled = 0;
    PyObject *res = PyFunction_Check(self->fn)
                        ? direct_call(self->fn, args, nargsf, kwnames, &handled)
                        : call_module_forward(self, args, nargsf, kwnames, &handled);
    if (!handled) {
        res = PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    }
    hook_leave(&layer);
    if (dynamo_prior != NULL) {
        dynamo_resume(dynamo_prior);
    }
    t->active--;
    t->run_only -= run_only;
    t->options = saved_options;
    t->disabled = saved_disabled;
    t->stance = saved_stance;
    t->skip_guards = saved_skip_guards;
    t->first_options = saved_first;
    t->backend_key = saved_backend;
    t->force_code = saved_force;
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
    Py_VISIT(self->backend);
    Py_VISIT(self->dict);
    Py_VISIT(self->modcall.type);
    Py_VISIT(self->modcall.forward);
    return 0;
}

/* GC: drop the references that may form cycles. */
static int
wrapper_clear(cdyn_wrapper *self)
{
    Py_CLEAR(self->fn);
    Py_CLEAR(self->options);
    Py_CLEAR(self->backend);
    Py_CLEAR(self->dict);
    cdyn_modcall_clear(&self->modcall);
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
    /* a compiled graph named by the engine (_cdynamo_name, e.g. __compiled_fn_0) reads as its
       name in the transformed code's listing */
    PyObject *name = self->dict ? PyDict_GetItemString(self->dict, "_cdynamo_name") : NULL;
    if (name != NULL && PyUnicode_Check(name)) {
        return Py_NewRef(name);
    }
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
    w->backend = options != Py_None ? PyObject_GetAttrString(options, "backend") : NULL;
    if (w->backend == NULL) {
        PyErr_Clear();   /* options without a backend: its entries serve any call */
    }
    w->dict = NULL;
    w->weakreflist = NULL;
    w->vectorcall = vc;
    memset(&w->modcall, 0, sizeof(w->modcall));
    PyObject_GC_Track(w);
    return (PyObject *)w;
}

PyObject *
cdyn_wrap(PyObject *fn, PyObject *options)
{
    return wrapper_new(&CompiledFunctionType, fn, options, compiled_vectorcall);
}

PyObject *
cdyn_compiled_target(PyObject *obj)
{
    return Py_IS_TYPE(obj, &CompiledFunctionType) ? ((cdyn_wrapper *)obj)->fn : NULL;
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
    if (str_dynamo_eval_frame == NULL &&
        (str_dynamo_eval_frame = PyUnicode_InternFromString("torch._C._dynamo.eval_frame")) ==
            NULL) {
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
