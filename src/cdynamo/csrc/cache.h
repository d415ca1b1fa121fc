/* cache.h: per-code-object state kept in co_extra.
 *
 * Every code object the hook has looked at carries one cdyn_extra (in the co_extra slot
 * requested by cdyn_cache_init): its trace rule and SKIP decision (decided once per rules
 * snapshot, see trace_rules.h), and a list of cache entries, most recently hit first. Each entry owns its guard set, a strong
 * reference to its transformed code, and a function object built from that code for the
 * last (globals, closure) pair seen. All extras are also kept on one registry list so that
 * cdyn_cache_reset can clear them. Everything here runs with the GIL held.
 */
#ifndef CDYN_CACHE_H
#define CDYN_CACHE_H
#include "cdynamo.h"
#include "bytecode.h"
#include "guards.h"

typedef struct cdyn_cache_entry {
    struct cdyn_cache_entry *next;
    cdyn_guards *guards;        /* owned */
    PyObject *code;             /* strong: the transformed code */
    PyObject *func;             /* strong or NULL: function for (func_globals, func_closure) */
    Py_ssize_t hits;
    PyObject *reason;           /* strong str or NULL: the guard failure that made this entry
                                   (set by the hook for an entry made by a recompile) */
    PyObject *backend;          /* strong or NULL: the backend of the compiled function whose
                                   call made this entry (its CompileOptions.backend); a call
                                   of a function compiled with another backend does not use
                                   it, as torch._dynamo's entries carry their backend. NULL:
                                   any call uses it */
    int plan_state;             /* 0 not looked at, 1 `plan` runs the code, -1 it cannot */
    struct cdyn_plan_box *plan; /* owned (one of its refs); set when plan_state == 1 */
} cdyn_cache_entry;

/* An entry's direct plan (bytecode.h), PyMem, shared by the entry and each run of it in
 * progress (a run may free the entry: a reset), freed by the last cdyn_plan_release. */
typedef struct cdyn_plan_box {
    Py_ssize_t refs;
    cdyn_direct_plan p;
} cdyn_plan_box;

/* Drop one reference to box (NULL: nothing). */
void cdyn_plan_release(cdyn_plan_box *box);

typedef struct cdyn_extra {
    struct cdyn_extra *reg_prev, *reg_next;  /* registry links */
    PyObject *code;             /* borrowed: the code object carrying this extra */
    cdyn_cache_entry *entries;  /* owned list, most recently hit first */
    int nentries;
    PyObject *frame_state;      /* strong dict or NULL: per source, the sizes / ints seen by
                                   the traces of this code (automatic dynamic shapes, as
                                   torch._dynamo's frame state; values/symint.c) */
    unsigned skip : 1;          /* SKIP: evaluate every frame of this code normally */
    unsigned force : 1;         /* compile even if its trace rule skips its frames */
    unsigned rule : 4;          /* cdyn_rule of the code (valid when decided) */
    unsigned limit_logged : 1;  /* the cache_size_limit message was logged */
    unsigned decided : 1;       /* the skip rules were evaluated */
    unsigned eager_seen : 1;    /* set_stance("eager_then_compile"): a miss ran unmodified */
    unsigned quiet : 1;         /* SKIP, and every frame its frames call runs with the hook
                                   off too (autograd's backward: AOTAutograd's backward
                                   graphs, user autograd.Function backwards, hooks) */
    int nunmodified;            /* translations given up (run unmodified) while the code had
                                   entries: they count toward cache_size_limit, so a call
                                   pattern that cannot compile is not traced again on every
                                   call (hook.c) */
} cdyn_extra;

/* Incremented whenever an entry or an extra is freed: a walker that ran Python code (guards,
 * repr) compares it before following a pointer it read earlier. */
extern unsigned long cdyn_cache_generation;

/* Incremented whenever an entry is inserted or moved to the front of any list: a walk that
 * ran Python code (guards) and found no passing entry compares it, since another thread may
 * have put an entry before the walk's position meanwhile (see eval_frame in hook.c). */
extern unsigned long cdyn_cache_order;

/* Request the co_extra index; 0 or -1. Called once from module init. */
int cdyn_cache_init(void);

/* Borrowed: the extra of code, or NULL when it has none (never fails). */
cdyn_extra *cdyn_cache_get(PyCodeObject *code);

/* Borrowed: the extra of code, created empty when missing; NULL with an exception. */
cdyn_extra *cdyn_cache_ensure(PyCodeObject *code);

/* Insert a new entry at the front. guards is stolen (freed on failure too); code is
 * borrowed. Returns the entry (borrowed, owned by the extra) or NULL with an exception. */
cdyn_cache_entry *cdyn_cache_insert(cdyn_extra *x, cdyn_guards *guards, PyObject *code);

/* Move entry e to the front. prev: e's predecessor when the caller's walk passed it (NULL if
 * e was first); when the list was reordered since (by another thread while guards ran
 * Python code) the predecessor is found again. e must still be on x's list or absent
 * from it (then nothing happens): a freed e is excluded by cdyn_cache_generation. */
void cdyn_cache_move_to_front(cdyn_extra *x, cdyn_cache_entry *prev, cdyn_cache_entry *e);

/* New reference: e's function for (globals, closure), built and cached in e when they
 * changed; NULL with an exception. globals and closure (may be NULL) borrowed. e may be
 * freed by the time this returns (building a function can run the GC's finalizers): the
 * caller must not use e afterwards unless cdyn_cache_generation is unchanged. */
PyObject *cdyn_cache_entry_func(cdyn_cache_entry *e, PyObject *globals, PyObject *closure);

/* Drop every cache entry and SKIP decision of every code object (force marks are kept).
 * May run arbitrary finalizers. */
void cdyn_cache_reset(void);

/* Forget every SKIP decision and cached trace rule (after the trace rules changed); entries
 * are kept and used again if the new rules still translate the code. */
void cdyn_cache_forget_decisions(void);

/* Borrowed: the frame-state dict of code, created empty when missing and shared by every
 * code object with the same identity (file, first line, qualname), as torch._dynamo keys its
 * frame state by code id; NULL + exception. */
PyObject *cdyn_cache_frame_state(PyCodeObject *code);
/* Make code (a resume function) use the frame state registered under key (borrowed,
 * hashable; the resume functions of one graph break share theirs, as torch._dynamo's resume
 * functions named after the break's line do). 0 / -1. */
int cdyn_cache_share_frame_state(PyCodeObject *code, PyObject *key);

/* New list of (list_of_guard_str, transformed_code, recompile reason or None), most recent
 * first; [] when code has no entries. NULL on error. */
PyObject *cdyn_cache_entries_list(PyCodeObject *code);

#endif
