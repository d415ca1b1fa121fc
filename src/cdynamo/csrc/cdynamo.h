/* cdynamo.h: common includes for every engine file.
 *
 * Every engine file includes this first. It pulls in CPython's public API and the internal
 * frame layout (struct _PyInterpreterFrame), which only the frame-access layer (frame.h)
 * reads.
 *
 * Ownership vocabulary used in every header: "new" = the caller owns the returned
 * reference; "borrowed" = valid while the owner lives, do not DECREF; "stolen" = the callee
 * takes over the caller's reference even on failure.
 */
#ifndef CDYN_CDYNAMO_H
#define CDYN_CDYNAMO_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "cdynamo's engine supports CPython 3.11, 3.12 and 3.13"
#endif

#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h>
#include <internal/pycore_code.h>
#undef Py_BUILD_CORE

#include <assert.h>
#include <stdint.h>
#include <string.h>

/* ---- CPython's private and unstable API across 3.11 to 3.13 -------------------------------
 * The one place where the engine's C-API calls differ by version (frames: frame.h; bytecode:
 * opcodes.h and bytecode.h). */
#if PY_VERSION_HEX >= 0x030D0000
/* Still exported by 3.13, declared only in its internal headers. */
PyAPI_FUNC(int) _PySet_NextEntry(PyObject *set, Py_ssize_t *pos, PyObject **key, Py_hash_t *hash);
PyAPI_FUNC(PyObject *) _Py_CheckFunctionResult(PyThreadState *tstate, PyObject *callable,
                                              PyObject *result, const char *where);
PyAPI_FUNC(void) _PyTraceback_Add(const char *funcname, const char *filename, int lineno);
PyAPI_FUNC(int) _PyArg_CheckPositional(const char *name, Py_ssize_t nargs, Py_ssize_t min,
                                       Py_ssize_t max);
#endif
#if PY_VERSION_HEX >= 0x030D0000
#define cdyn_long_as_int PyLong_AsInt
#define cdyn_lookup_attr PyObject_GetOptionalAttr
#else
#define cdyn_long_as_int _PyLong_AsInt
#define cdyn_lookup_attr _PyObject_LookupAttr
#endif
/* A dict view's dict (keys(), values(), items() of a dict; borrowed): the layout every
 * version gives dict views (internal since 3.13). */
typedef struct {
    PyObject_HEAD
    PyDictObject *dv_dict;
} cdyn_dict_view;
static inline PyObject *
cdyn_dict_view_dict(PyObject *view)
{
    return (PyObject *)((cdyn_dict_view *)view)->dv_dict;
}
#if PY_VERSION_HEX >= 0x030C0000
#define cdyn_code_get_extra PyUnstable_Code_GetExtra
#define cdyn_code_set_extra PyUnstable_Code_SetExtra
#define cdyn_request_code_extra_index PyUnstable_Eval_RequestCodeExtraIndex
#define cdyn_code_new PyUnstable_Code_NewWithPosOnlyArgs
#else
#define cdyn_code_get_extra _PyCode_GetExtra
#define cdyn_code_set_extra _PyCode_SetExtra
#define cdyn_request_code_extra_index _PyEval_RequestCodeExtraIndex
#define cdyn_code_new PyCode_NewWithPosOnlyArgs
#endif

/* A monotonic clock in ns (for timing helpers, never on the per-call path). */
static inline int64_t
cdyn_perf_counter_ns(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyTime_t t = 0;
    (void)PyTime_PerfCounterRaw(&t);
    return (int64_t)t;
#else
    return (int64_t)_PyTime_GetPerfCounter();
#endif
}

/* d's PEP 509 version tag (dict d, borrowed): changes whenever d changes. Deprecated since
 * 3.12 (dict watchers replace it) but kept up to date through 3.13. */
static inline uint64_t
cdyn_dict_version(PyObject *d)
{
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
    return ((PyDictObject *)d)->ma_version_tag;
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
}

/* cdyn_dict_version of d when a cache records it, so that every later change of d moves it.
 * On 3.13 an object's attribute stores go into its inline values without moving its dict's
 * tag (nor telling its watchers): there a split dict is made combined first (frame.c). Slow
 * path only. */
uint64_t cdyn_dict_version_tracked(PyObject *d);

/* tp's version tag, or 0 when it has no valid one (the type changed since it was given).
 * Through 3.12 validity is a flag; 3.13 drops the flag and clears the tag instead. */
static inline unsigned int
cdyn_type_version(PyTypeObject *tp)
{
#if PY_VERSION_HEX >= 0x030D0000
    return tp->tp_version_tag;
#else
    return (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ? tp->tp_version_tag : 0;
#endif
}

/* cdyn_type_version of tp when a cache records it: 3.12+ give a type a tag on demand
 * (3.13 only once the interpreter specialises on it otherwise). Slow path only. */
static inline unsigned int
cdyn_type_version_assigned(PyTypeObject *tp)
{
#if PY_VERSION_HEX >= 0x030C0000
    if (cdyn_type_version(tp) == 0) {
        (void)PyUnstable_Type_AssignVersionTag(tp);
    }
#endif
    return cdyn_type_version(tp);
}

/* Call Python function func (a PyFunctionObject) by vectorcall. New reference or NULL. */
static inline PyObject *
cdyn_function_vectorcall(PyObject *func, PyObject *const *args, size_t nargsf)
{
    return ((PyFunctionObject *)func)->vectorcall(func, args, nargsf, NULL);
}

/* Log through Python's logging under the "cdynamo" logger (slow path only).
 * level: 10 debug, 20 info, 30 warning. Never raises: a logging failure is swallowed. */
void cdyn_log(int level, const char *fmt, ...);

/* Tell cdynamo._events (the logs by artifact and the structured trace) what happened:
 * calls cdynamo._events.<name>(*Py_BuildValue(fmt, ...)) (fmt builds a tuple, e.g. "(Os)").
 * Compile time only. Never raises, and a pending exception is kept as it was. */
void cdyn_event(const char *name, const char *fmt, ...);

/* The truth of setting `name` of cdynamo.config (read while tracing, slow path only):
 * 1 / 0, or -1 with an exception. */
int cdyn_config_bool(const char *name);

/* Live engine objects (see _C.live_counts()): incremented where one is created, decremented
 * where it is freed, on slow paths only (never on the per-call guard check). GIL-protected.
 * Symbolic values are transient (0 once a translation has finished; the shared NULL value
 * of the translator is not counted); guard sets and cache entries are 0 after a reset. */
typedef struct {
    Py_ssize_t values;          /* cdyn_value objects (value.c) */
    Py_ssize_t guard_sets;      /* cdyn_guards (guards.c) */
    Py_ssize_t cache_entries;   /* cdyn_cache_entry (cache.c) */
} cdyn_live_counts;
extern cdyn_live_counts cdyn_live;

/* The dict of type t, borrowed (the type holds it). Since 3.12 the builtin static types
 * (object, type, dict, ...) keep theirs per interpreter, with tp_dict NULL; PyType_GetDict
 * answers for every type (a new reference to a dict the interpreter keeps alive). */
static inline PyObject *
cdyn_type_dict(PyTypeObject *t)
{
#if PY_VERSION_HEX >= 0x030C0000
    if (t->tp_dict == NULL) {
        PyObject *d = PyType_GetDict(t);
        Py_XDECREF(d);
        return d;
    }
#endif
    return t->tp_dict;
}

/* The address of obj's instance-dict slot, or NULL when its type has none: what
 * _PyObject_GetDictPtr answers, without its call for a type with its own dict slot at a
 * positive offset (tensors). Types with a managed dict (CPython 3.11's plain classes) and
 * negative offsets go through it. */
static inline PyObject **
cdyn_dict_ptr(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    if (!(tp->tp_flags & Py_TPFLAGS_MANAGED_DICT)) {
        if (tp->tp_dictoffset == 0) {
            return NULL;
        }
        if (tp->tp_dictoffset > 0) {
            return (PyObject **)((char *)obj + tp->tp_dictoffset);
        }
    }
    return _PyObject_GetDictPtr(obj);
}

#endif
