/* frame.h: the frame-access layer: everything the engine reads or does to CPython's
 * _PyInterpreterFrame and thread state, for CPython 3.11, 3.12 and 3.13 (one place per
 * difference; the rest of the engine calls these and never names a frame field).
 *
 * Differences covered:
 *   - the code object: f_code (3.11, 3.12), f_executable (3.13);
 *   - the function: f_func (3.11, a PyFunctionObject *), f_funcobj (3.12+);
 *   - "not started yet": prev_instr one unit before the code (3.11, 3.12), instr_ptr at
 *     the code's first unit (3.13);
 *   - the executing frame: ts->cframe->current_frame (3.11, 3.12), ts->current_frame (3.13);
 *   - the recursion budget: recursion_remaining / recursion_limit (3.11), the Python-level
 *     py_recursion_remaining / py_recursion_limit (3.12+);
 *   - who clears a frame the hook replaced: its caller (3.11: _PyEval_Vector clears and
 *     pops it after the eval function returns) or the eval function itself (3.12+: the hook
 *     must clear the frame and pop it off the thread's frame stack, cdyn_frame_release).
 * 3.14 would add: _PyStackRef slots (localsplus entries are tagged references, read through
 * PyStackRef_AsPyObjectBorrow), f_executable as a stack reference, and its own clear/pop.
 *
 * Ownership: every getter returns a borrowed reference (the frame holds it).
 */
#ifndef CDYN_FRAME_H
#define CDYN_FRAME_H
#include "cdynamo.h"

typedef struct _PyInterpreterFrame cdyn_frame;

static inline PyCodeObject *
cdyn_frame_code(cdyn_frame *f)
{
#if PY_VERSION_HEX >= 0x030D0000
    return (PyCodeObject *)f->f_executable;
#else
    return f->f_code;
#endif
}

/* The frame's function, or NULL (a frame of code run without one). */
static inline PyFunctionObject *
cdyn_frame_func(cdyn_frame *f)
{
#if PY_VERSION_HEX >= 0x030C0000
    return (PyFunctionObject *)f->f_funcobj;
#else
    return f->f_func;
#endif
}

static inline PyObject *cdyn_frame_globals(cdyn_frame *f) { return f->f_globals; }
static inline PyObject *cdyn_frame_builtins(cdyn_frame *f) { return f->f_builtins; }
/* The slots: arguments, locals, cells and free variables (co_nlocalsplus of them). */
static inline PyObject **cdyn_frame_slots(cdyn_frame *f) { return f->localsplus; }

/* 1 when f has not run an instruction yet (a new call, not a resumed generator). */
static inline int
cdyn_frame_at_start(cdyn_frame *f)
{
    PyCodeObject *code = cdyn_frame_code(f);
#if PY_VERSION_HEX >= 0x030D0000
    return f->instr_ptr == _PyCode_CODE(code);
#else
    return f->prev_instr == _PyCode_CODE(code) - 1;
#endif
}

/* The frame executing on ts (borrowed; NULL when none). */
static inline cdyn_frame *
cdyn_current_frame(PyThreadState *ts)
{
#if PY_VERSION_HEX >= 0x030D0000
    return ts->current_frame;
#else
    return ts->cframe->current_frame;
#endif
}

/* 1 when less than a quarter of ts's Python recursion budget is left. */
static inline int
cdyn_near_recursion_limit(PyThreadState *ts)
{
#if PY_VERSION_HEX >= 0x030C0000
    return ts->py_recursion_remaining < ts->py_recursion_limit / 4;
#else
    return ts->recursion_remaining < ts->recursion_limit / 4;
#endif
}

/* 1 when the eval function must release a frame it did not evaluate (3.12+). */
#define CDYN_HOOK_RELEASES_FRAME (PY_VERSION_HEX >= 0x030C0000)

/* Release frame f that the hook replaced (ran something else in its place) instead of
 * evaluating it: on 3.12+ its references are dropped and it is popped off ts's frame stack,
 * as the default evaluator does when a frame returns; on 3.11 nothing (the caller does it,
 * and the hook's per-call path pays no call). f must be a new frame (cdyn_frame_at_start)
 * owned by the thread, with no frame object. */
#if CDYN_HOOK_RELEASES_FRAME
void cdyn_frame_release(PyThreadState *ts, cdyn_frame *f);
#else
static inline void
cdyn_frame_release(PyThreadState *ts, cdyn_frame *f)
{
    (void)ts;
    (void)f;
}
#endif

#endif
