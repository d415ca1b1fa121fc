/* hook.h: the PEP 523 frame hook, the compiled-function wrapper and the disable wrapper.
 *
 * The hook is installed interpreter-wide only while at least one compiled call is active
 * (a global counter, GIL-protected), and acts only on frames of a thread that is inside a
 * compiled call and not disabled (thread-local state). On a frame it consults the code's
 * cache (cache.h), runs the guards, and either redirects to transformed code, compiles
 * (translate.h), or evaluates the frame unmodified.
 */
#ifndef CDYN_HOOK_H
#define CDYN_HOOK_H
#include "cdynamo.h"

/* Process-wide counters, reset by cdyn_counters_reset (see _C.counters()). */
typedef struct {
    Py_ssize_t frames;           /* hooked frames that reached a cache lookup */
    Py_ssize_t cache_hits;
    Py_ssize_t cache_misses;
    Py_ssize_t compiles;         /* translations that produced code */
    Py_ssize_t unmodified;       /* frames run unmodified after a miss */
    Py_ssize_t cache_limit_hits; /* misses refused because of cache_size_limit */
    Py_ssize_t skipped;          /* code objects newly marked SKIP */
} cdyn_counters;

extern cdyn_counters cdyn_counts;

/* Ready the wrapper types and add them to the module; 0 or -1. */
int cdyn_hook_init(PyObject *module);

/* New reference to a CompiledFunction running fn (borrowed) under options (borrowed);
 * NULL with TypeError when fn is not callable. */
PyObject *cdyn_wrap(PyObject *fn, PyObject *options);

/* New reference to a callable running fn (borrowed) with the hook disabled for this
 * thread; NULL with TypeError when fn is not callable. */
PyObject *cdyn_disable(PyObject *fn);

/* Cache size limit per code object (>= 0). */
int cdyn_get_cache_size_limit(void);
void cdyn_set_cache_size_limit(int n);

/* Replace the filename prefixes whose code is skipped; prefixes: borrowed tuple of str.
 * Forgets previous SKIP decisions. 0, or -1 with TypeError. */
int cdyn_set_skip_prefixes(PyObject *prefixes);

/* Mark code (borrowed code object) to be compiled even under a skip prefix; 0 or -1. */
int cdyn_mark_force_compile(PyObject *code);

/* 1 when the hook is currently installed on this interpreter. */
int cdyn_hook_installed(void);

/* New tuple (active_depth, disabled) of the calling thread (tests). */
PyObject *cdyn_thread_state(void);

#endif
