/* hook.h: the PEP 523 frame hook, the compiled-function wrapper and the disable wrapper.
 *
 * The hook is installed interpreter-wide only while at least one compiled call is active
 * (a global counter, GIL-protected), and acts only on frames of a thread that is inside a
 * compiled call and not disabled (thread-local state), while it is the installed function
 * (a frame passed down by another PEP 523 hook installed over it belongs to that hook; see
 * hook.c for how it nests with torch._dynamo's). On a frame it consults the code's cache
 * (cache.h) and trace rule (trace_rules.h), runs the guards, and either redirects to
 * transformed code, compiles (translate.h), or evaluates the frame unmodified.
 */
#ifndef CDYN_HOOK_H
#define CDYN_HOOK_H
#include "cdynamo.h"
#include "frame.h"

/* Process-wide counters, reset by cdyn_counters_reset (see _C.counters()). */
typedef struct {
    Py_ssize_t frames;           /* hooked frames that reached a cache lookup */
    Py_ssize_t cache_hits;
    Py_ssize_t cache_misses;
    Py_ssize_t compiles;         /* translations that produced code */
    Py_ssize_t unmodified;       /* frames run unmodified after a miss */
    Py_ssize_t cache_limit_hits; /* misses refused because of cache_size_limit */
    Py_ssize_t skipped;          /* code objects newly marked SKIP (trace rules, flags) */
} cdyn_counters;

extern cdyn_counters cdyn_counts;

/* Ready the wrapper types and add them to the module; 0 or -1. */
int cdyn_hook_init(PyObject *module);

/* The function a CompiledFunction runs (borrowed), or NULL when obj is not one: called from
 * traced code, that function is inlined (the inner wrapper's options are ignored, as
 * torch._dynamo ignores a compiled function nested in another's trace). */
PyObject *cdyn_compiled_target(PyObject *obj);
/* New reference to a CompiledFunction running fn (borrowed) under options (borrowed);
 * NULL with TypeError when fn is not callable. */
PyObject *cdyn_wrap(PyObject *fn, PyObject *options);

/* New reference to a callable running fn (borrowed) with the hook disabled for this
 * thread; NULL with TypeError when fn is not callable. */
PyObject *cdyn_disable(PyObject *fn);

/* Cache size limit per code object (>= 0). */
int cdyn_get_cache_size_limit(void);
void cdyn_set_cache_size_limit(int n);

/* Mark code (borrowed code object) to be compiled even when its trace rule skips its
 * frames (torch's own nn.Module forward compiled as the root); 0 or -1. */
int cdyn_mark_force_compile(PyObject *code);

/* The trace rule (a cdyn_rule) of code (borrowed) run with globals (borrowed), as the hook
 * decides it for frames and caches it on the code object; CDYN_RULE_COMPILE for code
 * marked force-compile. For the interpreter deciding whether to inline a call. Never
 * fails. */
int cdyn_code_trace_rule(PyCodeObject *code, PyObject *globals);

/* The hook's cached frame decision for code (borrowed): 1 with *rule (a cdyn_rule) and
 * *skip (frames run unmodified) filled, or 0 when it has not decided yet (tests). */
int cdyn_frame_decision(PyCodeObject *code, int *rule, int *skip);

/* 1 when the hook is currently installed on this interpreter. */
int cdyn_hook_installed(void);

/* Tests: a stand-in for another PEP 523 hook that counts frames and calls the function it
 * replaced. on=1 installs it over the current function (remembering that one), on=0 puts
 * that one back if it is still on top, on=-1 changes nothing. Returns the frames it saw. */
Py_ssize_t cdyn_test_other_hook(int on);

/* New tuple (active_depth, disabled) of the calling thread (tests). */
PyObject *cdyn_thread_state(void);

#endif
