/* analysis.h: control-flow questions about a decoded instruction list (bytecode.h), asked
 * by the graph-break and resume-function work.
 *
 * Flow model: instruction k is followed by k+1 unless it is a terminator
 * (cdyn_is_terminator), by its jump target when it is a jump, and by its exception
 * handler (exc_handler) when one covers it. Instructions are taken as given: the list is
 * borrowed, never modified, and must have valid targets and handlers (as cdyn_decode
 * produces them); invalid ones give ValueError.
 *
 * No Python objects are involved: nothing to own, nothing borrowed beyond the list itself.
 */
#ifndef CDYN_ANALYSIS_H
#define CDYN_ANALYSIS_H
#include "bytecode.h"

/* Liveness of the localsplus slots at instruction `start`.
 *
 * live_out (caller-owned, nlocals bytes, nlocals = co_nlocalsplus) is filled with
 * live_out[i] = 1 when slot i may be read on some path from `start` (start included)
 * before it is written, else 0. Paths follow fall-through, both sides of conditional
 * jumps and exception handlers (a handler sees the slots as they were before the raising
 * instruction wrote anything).
 *   reads:  LOAD_FAST, DELETE_FAST (it fails on an unbound slot, so the value matters),
 *           and the cell/free slot ops MAKE_CELL, LOAD_CLOSURE, LOAD_DEREF, STORE_DEREF,
 *           DELETE_DEREF, LOAD_CLASSDEREF (they use the cell object held in the slot;
 *           MAKE_CELL reads the initial value it wraps);
 *   writes: STORE_FAST, DELETE_FAST (after it the slot is unbound), MAKE_CELL,
 *           COPY_FREE_VARS n (the last n slots).
 * Returns 0, or -1 with an exception (start out of range, slot index >= nlocals,
 * bad target/handler, MemoryError). */
int cdyn_live_locals(const cdyn_instr_list *instrs, Py_ssize_t start, int nlocals,
                     unsigned char *live_out);

/* 1 when some instruction reachable from `start` (start included) is a jump to an
 * instruction at or before itself (a loop), 0 when none, -1 with an exception. */
int cdyn_has_backward_jump(const cdyn_instr_list *instrs, Py_ssize_t start);

/* 1 when instruction pc lies inside a loop: some jump at or after pc goes back to an
 * instruction at or before pc (3.11 lays a loop out contiguously, its back edge last);
 * else 0. Never fails. */
int cdyn_in_loop(const cdyn_instr_list *instrs, Py_ssize_t pc);

#endif
