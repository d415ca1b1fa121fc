/* bytecode.h: decode a CPython 3.11 code object into an instruction list, and assemble an
 * instruction list back into a valid code object.
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

/* Exact maximum stack depth of instrs by flow analysis; -1 with an exception when the
 * stack would underflow or depths disagree at a join. */
int cdyn_stackdepth(const cdyn_instr_list *instrs);

/* Number of CACHE units after opcode op in 3.11. */
int cdyn_cache_size(int opcode);

/* Stack effect of one instruction (jump = 1 when the jump is taken). */
int cdyn_stack_effect(int opcode, int oparg, int jump);

/* 1 for relative jumps (forward or backward), including FOR_ITER and SEND. */
int cdyn_is_jump(int opcode);
/* 1 for jumps that never fall through (JUMP_FORWARD, JUMP_BACKWARD, ..._NO_INTERRUPT). */
int cdyn_is_unconditional_jump(int opcode);
/* 1 for instructions after which control never falls through (returns, raises,
 * unconditional jumps). */
int cdyn_is_terminator(int opcode);

#endif
