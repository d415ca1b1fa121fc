/* module.c: the extension module cdynamo._C (single-phase init).
 *
 * Python API of the runtime:
 *   wrap(fn, options) -> CompiledFunction     disable(fn) -> DisabledFunction
 *   reset()                                   cache_entries(code) -> [(guards, code, reason)]
 *   set_cache_size_limit(n), get_cache_size_limit()
 *   set_trace_rules(files, modules, lookup)   mark_force_compile(code)
 *   trace_rule(obj[, globals]) -> (rule, value)  frame_decision(code) -> (rule, skip) | None
 *   counters() -> dict, reset_counters()      hook_installed() -> bool
 *   live_counts() -> dict (live values, guard sets, cache entries)
 *   tensor_meta_active() -> bool (TENSOR_MATCH reads through cdynamo._tensor_meta)
 *   thread_state() -> (active_depth, disabled)
 *   _time_guards(code, args, n) -> ns per guard check (benchmarks)
 * plus the translator's, the resume layer's and the bytecode layer's own methods.
 */
#include "cdynamo.h"
#include "cache.h"
#include "guards.h"
#include "hook.h"
#include "stance.h"
#include "modcall.h"
#include "resume.h"
#include "source.h"
#include "trace_rules.h"
#include "translate.h"

extern PyMethodDef cdyn_bytecode_methods[];
extern PyMethodDef cdyn_translate_methods[];
/* cdyn_resume_methods is declared in resume.h. */

/* wrap(fn, options): new CompiledFunction. */
static PyObject *
mod_wrap(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs)
{
    if (!_PyArg_CheckPositional("wrap", nargs, 2, 2)) {
        return NULL;
    }
    return cdyn_wrap(args[0], args[1]);
}

/* disable(fn): new DisabledFunction. */
static PyObject *
mod_disable(PyObject *Py_UNUSED(m), PyObject *fn)
{
    return cdyn_disable(fn);
}

/* reset(): drop every cache entry, SKIP decision and cached resume code. */
static PyObject *
mod_reset(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    cdyn_cache_reset();
    cdyn_resume_reset();
    cdyn_stance_clear();
    Py_RETURN_NONE;
}

/* cache_entries(code): list of (guard descriptions, transformed code, recompile reason or
 * None), most recent first. */
static PyObject *
mod_cache_entries(PyObject *Py_UNUSED(m), PyObject *code)
{
    if (!PyCode_Check(code)) {
        PyErr_SetString(PyExc_TypeError, "cache_entries: expected a code object");
        return NULL;
    }
    return cdyn_cache_entries_list((PyCodeObject *)code);
}

/* set_cache_size_limit(n) */
static PyObject *
mod_set_cache_size_limit(PyObject *Py_UNUSED(m), PyObject *arg)
{
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (n < 0 || n > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "set_cache_size_limit: n must be >= 0");
        return NULL;
    }
    cdyn_set_cache_size_limit((int)n);
    Py_RETURN_NONE;
}

/* get_cache_size_limit() -> int */
static PyObject *
mod_get_cache_size_limit(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromLong(cdyn_get_cache_size_limit());
}

/* set_trace_rules(file_rules, module_rules, lookup): the snapshot of cdynamo.trace_rules */
static PyObject *
mod_set_trace_rules(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs)
{
    if (!_PyArg_CheckPositional("set_trace_rules", nargs, 3, 3)) {
        return NULL;
    }
    if (cdyn_rules_set(args[0], args[1], args[2]) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* trace_rule(obj[, globals]) -> (rule name, value): the engine's view of a code object's
 * frame rule (globals: the dict its frames run with) or of a callable's rule. */
static PyObject *
mod_trace_rule(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *value = NULL, *res = NULL;
    int r;
    if (!_PyArg_CheckPositional("trace_rule", nargs, 1, 2)) {
        return NULL;
    }
    if (PyCode_Check(args[0])) {
        r = (int)cdyn_rules_for_code((PyCodeObject *)args[0], nargs > 1 ? args[1] : NULL);
    }
    else if ((r = cdyn_rules_for_callable(args[0], &value)) < 0) {
        return NULL;
    }
    res = Py_BuildValue("(sO)", cdyn_rule_name((cdyn_rule)r), value ? value : Py_None);
    Py_XDECREF(value);
    return res;
}

/* frame_decision(code) -> None, or (rule name, skip) as decided by the hook */
static PyObject *
mod_frame_decision(PyObject *Py_UNUSED(m), PyObject *code)
{
    int rule = 0, skip = 0;
    if (!PyCode_Check(code)) {
        PyErr_SetString(PyExc_TypeError, "frame_decision: expected a code object");
        return NULL;
    }
    if (!cdyn_frame_decision((PyCodeObject *)code, &rule, &skip)) {
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(sO)", cdyn_rule_name((cdyn_rule)rule), skip ? Py_True : Py_False);
}

/* mark_force_compile(code) */
static PyObject *
mod_mark_force_compile(PyObject *Py_UNUSED(m), PyObject *arg)
{
    if (cdyn_mark_force_compile(arg) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* counters() -> dict of the runtime counters */
static PyObject *
mod_counters(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    const cdyn_counters *c = &cdyn_counts;
    return Py_BuildValue("{sn,sn,sn,sn,sn,sn,sn}", "frames", c->frames, "cache_hits",
                         c->cache_hits, "cache_misses", c->cache_misses, "compiles",
                         c->compiles, "unmodified", c->unmodified, "cache_limit_hits",
                         c->cache_limit_hits, "skipped", c->skipped);
}

cdyn_live_counts cdyn_live;

/* live_counts() -> dict of the live engine objects (cdynamo.h) */
static PyObject *
mod_live_counts(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    const cdyn_live_counts *c = &cdyn_live;
    return Py_BuildValue("{sn,sn,sn}", "values", c->values, "guard_sets", c->guard_sets,
                         "cache_entries", c->cache_entries);
}

/* reset_counters() */
static PyObject *
mod_reset_counters(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    memset(&cdyn_counts, 0, sizeof(cdyn_counts));
    Py_RETURN_NONE;
}

/* tensor_meta_active() -> bool: tensors are checked through cdynamo._tensor_meta */
static PyObject *
mod_tensor_meta_active(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(cdyn_guards_tensor_meta_active());
}

/* hook_installed() -> bool */
static PyObject *
mod_hook_installed(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(cdyn_hook_installed());
}

/* thread_state() -> (active_depth, disabled) of the calling thread */
static PyObject *
mod_thread_state(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    return cdyn_thread_state();
}

/* _other_hook(on) -> int: the test stand-in for another PEP 523 hook (see hook.h) */
static PyObject *
mod_other_hook(PyObject *Py_UNUSED(m), PyObject *arg)
{
    long on = PyLong_AsLong(arg);
    if (on == -1 && PyErr_Occurred()) {
        return NULL;
    }
    return PyLong_FromSsize_t(cdyn_test_other_hook(on > 0 ? 1 : (on == 0 ? 0 : -1)));
}

/* _time_guards(code, args_tuple, n) -> float: ns per cdyn_guards_check of code's most
 * recent cache entry against args as the argument slots (benchmarks and tests). */
static PyObject *
mod_time_guards(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *code = NULL, *slots = NULL;
    long n = 0;
    if (!PyArg_ParseTuple(args, "O!O!l", &PyCode_Type, &code, &PyTuple_Type, &slots, &n)) {
        return NULL;
    }
    cdyn_extra *x = cdyn_cache_get((PyCodeObject *)code);
    if (x == NULL || x->entries == NULL || n <= 0) {
        PyErr_SetString(PyExc_ValueError, "_time_guards: code has no cache entry (or n <= 0)");
        return NULL;
    }
    PyObject *const *localsplus = &PyTuple_GET_ITEM(slots, 0);
    PyObject *globals = PyEval_GetGlobals();
    PyObject *builtins = PyEval_GetBuiltins();
    int64_t t0 = cdyn_perf_counter_ns();
    int ok = 1;
    for (long i = 0; i < n && ok == 1; i++) {
        ok = cdyn_guards_check(x->entries->guards, localsplus, NULL, globals, builtins);
    }
    int64_t t1 = cdyn_perf_counter_ns();
    if (ok < 0) {
        return NULL;
    }
    return PyFloat_FromDouble(ok == 1 ? (double)(t1 - t0) / (double)n : -1.0);
}

static PyMethodDef runtime_methods[] = {
    {"wrap", (PyCFunction)(void (*)(void))mod_wrap, METH_FASTCALL,
     "wrap(fn, options) -> CompiledFunction"},
    {"disable", mod_disable, METH_O, "disable(fn) -> callable running fn with the hook off"},
    {"reset", mod_reset, METH_NOARGS, "drop every cache entry and skip mark"},
    {"cache_entries", mod_cache_entries, METH_O,
     "cache_entries(code) -> [(guard descriptions, transformed code, recompile reason)], most "
     "recent first"},
    {"set_cache_size_limit", mod_set_cache_size_limit, METH_O, "set_cache_size_limit(n)"},
    {"get_cache_size_limit", mod_get_cache_size_limit, METH_NOARGS, "get_cache_size_limit()"},
    {"set_trace_rules", (PyCFunction)(void (*)(void))mod_set_trace_rules, METH_FASTCALL,
     "set_trace_rules(file_rules, module_rules, lookup): the snapshot of cdynamo.trace_rules"},
    {"trace_rule", (PyCFunction)(void (*)(void))mod_trace_rule, METH_FASTCALL,
     "trace_rule(code_or_callable[, globals]) -> (rule, value) as the engine sees it"},
    {"frame_decision", mod_frame_decision, METH_O,
     "frame_decision(code) -> None or (rule, skip): the hook's cached decision"},
    {"mark_force_compile", mod_mark_force_compile, METH_O, "mark_force_compile(code)"},
    {"counters", mod_counters, METH_NOARGS, "counters() -> dict"},
    {"reset_counters", mod_reset_counters, METH_NOARGS, "reset_counters()"},
    {"live_counts", mod_live_counts, METH_NOARGS,
     "live_counts() -> dict: live symbolic values (0 between translations), guard sets and "
     "cache entries (0 after reset())"},
    {"hook_installed", mod_hook_installed, METH_NOARGS, "hook_installed() -> bool"},
    {"tensor_meta_active", mod_tensor_meta_active, METH_NOARGS,
     "tensor_meta_active() -> bool: TENSOR_MATCH reads tensors through cdynamo._tensor_meta "
     "(torch's C++ API) instead of torch's Python getters and TensorGuards"},
    {"thread_state", mod_thread_state, METH_NOARGS, "thread_state() -> (active, disabled)"},
    {"_other_hook", mod_other_hook, METH_O,
     "_other_hook(on) -> frames seen: 1 installs a stand-in PEP 523 hook, 0 removes it (tests)"},
    {"_time_guards", mod_time_guards, METH_VARARGS,
     "_time_guards(code, args, n) -> ns per guard check of the most recent entry"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef cdynamo_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cdynamo._C",
    .m_doc = "cdynamo's engine: frame hook, cache, guards and the symbolic translator.",
    .m_size = -1,
    .m_methods = runtime_methods,
};

PyMODINIT_FUNC
PyInit__C(void)
{
    PyObject *m = PyModule_Create(&cdynamo_module);
    if (m == NULL) {
        return NULL;
    }
    if (cdyn_source_init(m) < 0 || cdyn_guards_init() < 0 || cdyn_hook_init(m) < 0 ||
        cdyn_modcall_init(m) < 0 || cdyn_translate_init(m) < 0 || PyModule_AddFunctions(m, cdyn_bytecode_methods) < 0 ||
        PyModule_AddFunctions(m, cdyn_translate_methods) < 0 ||
        PyModule_AddFunctions(m, cdyn_resume_methods) < 0) {
        Py_DECREF(m);
        if (!PyErr_Occurred()) {
            /* a lookup of a torch internal failed without saying so: name the cause */
            PyErr_SetString(PyExc_ImportError,
                            "cdynamo._C: a torch internal the engine needs was not found "
                            "(see cdynamo._compat for the supported torch releases)");
        }
        return NULL;
    }
    return m;
}
