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

/* Log through Python's logging under the "cdynamo" logger (slow path only).
 * level: 10 debug, 20 info, 30 warning. Never raises: a logging failure is swallowed. */
void cdyn_log(int level, const char *fmt, ...);

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
