/* resume.h: resume functions, the continuations a graph break calls to run the rest of the
 * original function in plain Python (seed 004, shared notes section 5).
 *
 * A resume code is a copy of the ORIGINAL code object behind a short prologue:
 *     MAKE_CELL i                  for every cell slot of the new code (localsplus order)
 *     COPY_FREE_VARS n             when the original has free variables
 *     RETURN_GENERATOR; POP_TOP    when the original is a generator/coroutine
 *     RESUME 0
 *     PUSH_NULL | LOAD_FAST ___stackK | PUSH_NULL LOAD_FAST ___stackK PRECALL 0 CALL 0
 *                                  per restored stack slot, bottom first
 *     JUMP_FORWARD                 to the copy of the original instruction `target`
 *     <every instruction of the original, its own prefix included (unreachable)>
 * Local-slot opargs of the copy are remapped to the new localsplus layout; jump targets and
 * exception handlers are shifted by the prologue length; positions are kept. The prologue
 * takes the line of the target instruction.
 *
 * The new code's parameters are the `live` names, then ___stack0.. (one per non-NULL
 * stack slot, bottom first)
 * followed by the `live` names, all plain positional. Its varnames are those parameters,
 * then the other varnames of the original in their order; cellvars and freevars are the
 * original's (a live local that is a cell in the original becomes an argument cell). The
 * code keeps the original's co_name, flags (minus CO_VARARGS/CO_VARKEYWORDS), filename and
 * firstlineno; co_qualname is "<resume in ORIGINAL_QUALNAME>". Call it through a function
 * made with the original's globals and closure.
 *
 * Every resume code records its original (a strong reference in the code's co_extra, kept
 * for the resume code's lifetime, surviving cdyn_resume_reset), so a resume inside a resume
 * is generated from the original code and prologues never nest.
 *
 * All functions need the GIL.
 */
#ifndef CDYN_RESUME_H
#define CDYN_RESUME_H
#include "cdynamo.h"

/* Kinds of restored stack slot (the bytes of null_mask below). */
enum {
    CDYN_SLOT_VALUE = 0,   /* a parameter ___stackK, loaded as it is */
    CDYN_SLOT_NULL = 1,    /* the NULL of the call protocol (no parameter) */
    CDYN_SLOT_CALL = 2,    /* a parameter called with no arguments, its result restored: the
                              exit of a with-block entered again by the resume code itself */
};

/* New reference to the resume code for `orig` (borrowed; an original code object, or a
 * resume code made here, which is mapped back to its original: target -> target -
 * prologue_len) resuming at instruction index `target` of cdyn_decode(orig).
 * The restored stack has `nstack` slots, bottom first; null_mask[i] is the CDYN_SLOT_*
 * kind of slot i (borrowed array of nstack bytes, may be NULL when nstack == 0). `live` (borrowed) is a tuple of str: local or cell variable names of the
 * original that the resume code takes as its first parameters, before the stack ones (free
 * variables come from the closure and are refused).
 * Cached: the same (original, target, nstack, null_mask, live) returns the same object
 * until cdyn_resume_reset().
 * NULL + exception on failure: TypeError for bad argument types, ValueError for a target
 * outside [index of the original's RESUME, number of instructions) or right after a
 * KW_NAMES (its names would be lost before the call), unknown, free or
 * duplicated live names, or a stack layout the stack-depth pass rejects. */
PyObject *cdyn_resume_code(PyCodeObject *orig, int target, int nstack,
                           const unsigned char *null_mask, PyObject *live);

/* If code (borrowed) is a resume code made by cdyn_resume_code: set *orig (borrowed; kept
 * alive by code) and *prologue_len (number of instructions before the copy of the
 * original's instructions) and return 1; else return 0. Never fails, never raises. */
int cdyn_resume_origin(PyCodeObject *code, PyCodeObject **orig, int *prologue_len);

/* Loops. A graph break inside a loop calls a resume function inside that loop, whose own
 * translation breaks at the same place in the next iteration, and so on: called plainly,
 * every iteration would nest one call deeper. So a resume code whose target lies inside a
 * loop of the original "bounces": the code that calls it calls cdyn_resume_trampoline()
 * with the function and its arguments, and the generated code of such a resume code
 * returns the tuple (cdyn_resume_bounce_marker(), next resume function, *args) instead of
 * calling its own resume function; the trampoline calls that in its place, in a loop. A
 * bounce never reaches user code: only trampolines call bouncing resume codes. */

/* 1 when code (borrowed) is a resume code made by cdyn_resume_code whose target lies in a
 * loop of the original (it is always called through the trampoline), else 0. Never
 * fails, never raises. */
int cdyn_resume_bounces(PyCodeObject *code);

/* Borrowed references (made on first use, kept for the process; NULL + exception only
 * when that first allocation fails): the trampoline builtin
 * `_resume_trampoline(fn, *args)`, and the marker object that opens a bounce tuple. */
PyObject *cdyn_resume_trampoline(void);
PyObject *cdyn_resume_bounce_marker(void);

/* Drop the cache of resume codes (cdynamo.reset()). Resume codes still referenced
 * elsewhere stay valid and keep their origin record. Never fails. */
void cdyn_resume_reset(void);

/* Python-facing test helpers (resume.c), NULL-terminated, for PyModule_AddFunctions on
 * cdynamo._C. Borrowed arguments, new references returned:
 *   _resume_code(code, target_index, stack_null_mask: tuple[bool | int, ...] (CDYN_SLOT_*),
 *                live: tuple[str, ...]) -> code         cdyn_resume_code
 *   _resume_origin(code) -> (orig_code, prologue_len) or None   cdyn_resume_origin
 *   _resume_reset() -> None                                     cdyn_resume_reset */
extern PyMethodDef cdyn_resume_methods[];

#endif
