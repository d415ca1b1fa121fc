/* bytecode.h: decode a code object of CPython 3.11, 3.12 or 3.13 into an instruction list in
 * the engine's normal form (opcodes.h, bytecode.c), and assemble such a list back into a
 * valid code object of the running version.
 *
 * Decoding folds EXTENDED_ARG into the argument, drops CACHE units, turns relative jump
 * arguments into instruction indices (target), and attaches line/column positions and the
 * exception-table entry covering each instruction. Assembly does the reverse: zeroed
 * caches of the right size per opcode, relative jump arguments, EXTENDED_ARG prefixes
 * grown to a fixed point, the line table (PEP 626/657), the exception table, and an exact
 * co_stacksize computed by flow analysis (handlers entering at depth + lasti + 1).
 * Decode then assemble with no change gives identical co_code, co_exceptiontable and
 * co_stacksize.
 */
#ifndef CDYN_BYTECODE_H
#define CDYN_BYTECODE_H
#include "cdynamo.h"
#include "opcodes.h"

typedef struct {
    int opcode;        /* real opcode: never EXTENDED_ARG or CACHE */
    int oparg;         /* full argument; for jumps it is recomputed from target on assembly */
    int target;        /* jumps: index of the target instruction in the list; else -1 */
    int offset;        /* code-unit offset in the decoded code (of the opcode itself, after
                          its EXTENDED_ARG prefixes); -1 for instructions made by us */
    int lineno, end_lineno, col, end_col;  /* positions; -1 when absent (col/end_col -1
                                              = no column info) */
    int exc_handler;   /* index of the handler of the exception-table entry covering this
                          instruction, or -1 */
    int exc_depth;     /* stack depth of that entry */
    int exc_lasti;     /* its lasti flag (0/1) */
    int ext;           /* EXTENDED_ARG prefixes the instruction had in decoded code (0 for
                          instructions made by us): a jump is assembled with at least as many,
                          as CPython's assembler, whose sizes only grow, may have left it */
    int fused;         /* 1: the second half of a fused real instruction (3.13's
                          LOAD_FAST_LOAD_FAST, ...), joined to the one before again on
                          assembly while both stand together */
} cdyn_instr;

typedef struct {
    cdyn_instr *items;   /* owned, PyMem_Malloc'd */
    Py_ssize_t len, cap;
} cdyn_instr_list;

/* Initialise an empty list / release its storage. */
void cdyn_instrs_init(cdyn_instr_list *l);
void cdyn_instrs_clear(cdyn_instr_list *l);
/* Append a copy of *ins; returns its index, or -1 with MemoryError. */
Py_ssize_t cdyn_instrs_append(cdyn_instr_list *l, const cdyn_instr *ins);
/* A new instruction with no position, no handler, target -1, offset -1. */
cdyn_instr cdyn_instr_make(int opcode, int oparg);

/* Decode co (borrowed) into out (initialised by the callee). 0, or -1 with an exception. */
int cdyn_decode(PyCodeObject *co, cdyn_instr_list *out);

/* Everything besides the instructions that a new code object needs. All borrowed.
 * Any NULL field is taken from `base`. */
typedef struct {
    PyCodeObject *base;       /* required: filename, name, qualname, firstlineno, and defaults */
    int argcount, posonlyargcount, kwonlyargcount;   /* -1: take from base */
    int flags;                /* -1: take from base */
    PyObject *consts, *names; /* tuples */
    PyObject *varnames, *cellvars, *freevars;        /* tuples of str */
    PyObject *name, *qualname;                       /* str */
    int firstlineno;          /* -1: take from base */
} cdyn_code_spec;

/* Assemble instrs into a new code object (new reference), or NULL with an exception.
 * instrs is not modified (jump args and EXTENDED_ARGs are computed on a copy). */
PyObject *cdyn_assemble(const cdyn_instr_list *instrs, const cdyn_code_spec *spec);

/* Exact maximum stack depth of instrs (normal form) by flow analysis over the real
 * instructions it assembles into; -1 with an exception when the stack would underflow or
 * depths disagree at a join. */
int cdyn_stackdepth(const cdyn_instr_list *instrs);

/* Number of CACHE units after real opcode op in the running version. */
int cdyn_cache_size(int opcode);

/* Stack effect of one real instruction (jump = 1 when the jump is taken). */
int cdyn_stack_effect(int opcode, int oparg, int jump);

/* 1 for relative jumps (forward or backward), including FOR_ITER and SEND. */
int cdyn_is_jump(int opcode);
/* 1 for jumps that never fall through (JUMP_FORWARD, JUMP_BACKWARD, ..._NO_INTERRUPT). */
int cdyn_is_unconditional_jump(int opcode);
/* 1 for instructions after which control never falls through (returns, raises,
 * unconditional jumps). */
int cdyn_is_terminator(int opcode);

/* ---- instruction facts: what differs between versions beyond the normal form ----------
 *
 * CDYN_NULL_FIRST   1 (3.11, 3.12): a call's stack is [NULL or method, callable or self,
 *                   args...], the NULL pushed before the callable (PUSH_NULL, LOAD_GLOBAL's
 *                   low bit, LOAD_METHOD's (NULL, attr)); 0 (3.13): [callable, NULL or self,
 *                   args...], the NULL pushed after it. LOAD_METHOD's method case pushes
 *                   (method, self) on every version.
 * CDYN_COMPARE_SHIFT COMPARE_OP's argument is cmp << shift plus flag bits (0, 4, 5); use
 *                   cdyn_compare_kind / cdyn_compare_oparg.
 * CDYN_FOR_ITER_SKIPS the instructions at an exhausted FOR_ITER's target that the loop's
 *                   exit skips (3.12: END_FOR; 3.13: END_FOR, POP_TOP): cdyn_for_iter_exit.
 * CDYN_TRUTH_IS_BOOL 1 (3.13): conditional jumps and UNARY_NOT take an exact bool (TO_BOOL
 *                   before them), so generated code adds TO_BOOL before them.
 * CDYN_LINETABLE_MERGES 1 (3.12+): neighbours with one position share line-table entries. */
#if PY_VERSION_HEX >= 0x030D0000
#define CDYN_NULL_FIRST 0
#define CDYN_COMPARE_SHIFT 5
#define CDYN_FOR_ITER_SKIPS 2
#define CDYN_TRUTH_IS_BOOL 1
#define CDYN_LINETABLE_MERGES 1
#elif PY_VERSION_HEX >= 0x030C0000
#define CDYN_NULL_FIRST 1
#define CDYN_COMPARE_SHIFT 4
#define CDYN_FOR_ITER_SKIPS 1
#define CDYN_TRUTH_IS_BOOL 0
#define CDYN_LINETABLE_MERGES 1
#else
#define CDYN_NULL_FIRST 1
#define CDYN_COMPARE_SHIFT 0
#define CDYN_FOR_ITER_SKIPS 0
#define CDYN_TRUTH_IS_BOOL 0
#define CDYN_LINETABLE_MERGES 0
#endif

/* END_FOR pops two (3.12: the iterator and the last value) or one (3.13, with a POP_TOP
 * after it for the iterator). */
#define CDYN_END_FOR_POPS (PY_VERSION_HEX >= 0x030D0000 ? 1 : 2)
/* PRECALL stands before every CALL (3.11 only); generated code emits it only there. */
#define CDYN_HAS_PRECALL (PY_VERSION_HEX < 0x030C0000)
/* SEND leaves its receiver below the result for END_SEND to pop (3.12+); 3.11's pops it. */
#define CDYN_SEND_KEEPS_RECEIVER (PY_VERSION_HEX >= 0x030C0000)
/* CALL_INTRINSIC_1's arguments for the operations 3.11 had opcodes for (3.12+; the numbers
 * of CPython's pycore_intrinsics.h). */
#define CDYN_INTRINSIC_UNARY_POSITIVE 5
#define CDYN_INTRINSIC_LIST_TO_TUPLE 6
#define CDYN_INTRINSIC_STOPITERATION_ERROR 3

/* The rich-comparison kind (Py_LT .. Py_GE) of COMPARE_OP's argument. */
int cdyn_compare_kind(int oparg);
/* COMPARE_OP's argument for comparison kind cmp (Py_LT .. Py_GE), as CPython's compiler
 * writes it. */
int cdyn_compare_oparg(int cmp);
/* Where control goes from index i of l: i, or past the unconditional jumps standing there
 * (a few at most), so that code resuming at either place is one code. */
Py_ssize_t cdyn_follow_jumps(const cdyn_instr_list *l, Py_ssize_t i);
/* 1 when instruction i of l is covered by a handler of the code's own try/with, not by the
 * one 3.12+ wraps every generator body in (CALL_INTRINSIC_1 STOPITERATION_ERROR: a
 * StopIteration escaping the body becomes a RuntimeError). */
int cdyn_in_user_try(const cdyn_instr_list *l, Py_ssize_t i);
/* 1 when opcode's argument is a slot of the frame (a localsplus index): LOAD_FAST and its
 * 3.12 forms, STORE/DELETE_FAST, the cell and free-variable opcodes. */
int cdyn_op_local_slot(int opcode);
/* The index where a loop continues once the FOR_ITER targeting `target` is exhausted (its
 * iterator popped): target itself, or past the END_FOR (and POP_TOP) standing there. */
Py_ssize_t cdyn_for_iter_exit(const cdyn_instr_list *l, Py_ssize_t target);

/* Notes on the implementation (bytecode.c), added by the bytecode layer's author:
 * - cdyn_assemble turns each jump to the direction of its target (target index <= own
 *   index: backward form, else forward form); FOR_ITER, SEND and JUMP_IF_*_OR_POP have no
 *   backward form and give ValueError when pointed backwards.
 * - The line table gets entries per instruction (split at 8 units), as CPython 3.11.7's
 *   compiler writes it; a round trip reproduces co_linetable byte for byte.
 * - cdyn_stack_effect is CPython's compiler table (PyCompile_OpcodeStackEffectWithJump)
 *   except RETURN_GENERATOR = +1 (the value sent on first resume, popped by the POP_TOP
 *   that follows it).
 * - A PRECALL must stay immediately followed by its CALL (specialised PRECALLs skip the
 *   CALL), and a YIELD_VALUE by its RESUME: do not insert instructions between them.
 * - Opcode names, cache sizes and the known-opcode test come from opcodes.h
 *   (cdyn_opname, cdyn_opcode_known, cdyn_op_native). */

/* A code whose whole body calls one constant with some of its positional arguments (and
 * the attributes of some of them, loaded by a constant loader) and returns items of the
 * result (the transformed code of a frame that is one graph over its tensor arguments, or
 * over a module's parameters):
 *     RESUME 0; PUSH_NULL; LOAD_CONST callee; <arg>...; PRECALL nargs; CALL nargs;
 *     UNPACK_SEQUENCE nunpack; STORE_FAST t_0 .. t_{nunpack-1};
 *     LOAD_FAST t_k ... (nret of them); [BUILD_TUPLE nret]; RETURN_VALUE
 * where each <arg> is LOAD_FAST a (a < co_argcount), or a loader call
 *     PUSH_NULL; LOAD_CONST loader; LOAD_FAST a; PRECALL 1; CALL 1; UNPACK_SEQUENCE n
 * (n arguments: the loader's result unpacked), with distinct t_j, no cells, no handlers.
 * The hook then runs it without a frame (hook.c direct_call). PUSH_NULL stands on the side of
 * its LOAD_CONST that CDYN_NULL_FIRST says, and PRECALL only on 3.11. */
#define CDYN_PLAN_MAX 64          /* argument segments, result items */
#define CDYN_PLAN_LOADS 8         /* loader calls */
#define CDYN_PLAN_ARGS 512        /* arguments of the call, loaders' items included */
typedef struct {
    PyObject *callee;          /* borrowed from co_consts (the code holds it) */
    int nin, in[CDYN_PLAN_MAX];      /* argument segments in order: an argument slot (>= 0),
                                        or -1 - j: the items of loader j */
    int nload;
    struct {
        PyObject *fn;          /* borrowed from co_consts */
        int slot;              /* the argument slot it is called on */
        int n;                 /* items its result unpacks into */
    } load[CDYN_PLAN_LOADS];
    int nargs;                 /* arguments of the call in all */
    int nunpack;               /* items the result must unpack into */
    int nret, ret[CDYN_PLAN_MAX];    /* positions (in the result) of the values returned */
    int ret_tuple;             /* 1: return a new tuple of them; 0: return ret[0] itself */
    int lineno;                /* the call's line (for a traceback entry on error) */
} cdyn_direct_plan;

/* Match co (borrowed) against the shape above: 1 and *out filled, 0 when it does not
 * match, -1 with an exception (decoding failed). */
int cdyn_direct_plan_of(PyCodeObject *co, cdyn_direct_plan *out);

/* Python-facing test helpers (bytecode_py.c), NULL-terminated; module.c adds them to
 * cdynamo._C with PyModule_AddFunctions. All take borrowed arguments and return new
 * references:
 *   _bytecode_roundtrip(code) -> code        decode, then assemble with spec.base = code
 *   _bytecode_decode(code) -> [(opname, oparg, target_index or -1, offset in code units,
 *                               lineno or None), ...]
 *   _bytecode_decode_full(code) -> [(opname, oparg, target, offset, lineno, end_lineno,
 *                                    col, end_col, exc_handler, exc_depth, exc_lasti,
 *                                    fused)]
 *                                            every cdyn_instr field, -1 kept as -1
 *   _bytecode_assemble(code, instrs) -> code cdyn_assemble of instrs given in
 *                                            _bytecode_decode_full's format (offset is
 *                                            ignored), spec.base = code
 *   _stackdepth(code) -> int                 cdyn_stackdepth of the decoded code
 *   _bytecode_insert_nops(code, n, stride=0) -> code
 *                                            n NOPs before instruction 0 and, when
 *                                            stride > 0, before every stride-th one (never
 *                                            before RESUME); jumps and handlers follow.
 *   _live_locals(code, index) -> tuple       cdyn_live_locals (analysis.h) at instruction
 *                                            index of the decoded list, nlocals =
 *                                            co_nlocalsplus: the live slot numbers
 *   _has_backward_jump(code, index) -> bool  cdyn_has_backward_jump (analysis.h)
 *   _direct_plan(code) -> (callee, in_slots, nunpack, ret_positions, ret_tuple) or None
 *                                            cdyn_direct_plan_of */
extern PyMethodDef cdyn_bytecode_methods[];

#endif
