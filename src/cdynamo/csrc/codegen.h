/* codegen.h: the code generator's state, as the value families see it when they rebuild
 * a value into a real object (cdyn_vtable.collect / .reconstruct).
 *
 * Rebuilding happens in two passes over the values the generated code needs (the return
 * value, the live locals and stack of a graph break, side-effect operands):
 *   collect      gathers the graph outputs the value needs (tensors made in the graph) with
 *                cdyn_cg_add_output, and refuses (TR_UNSUPPORTED) what cannot be rebuilt;
 *   reconstruct  emits bytecode pushing the real object, using cdyn_cg_value recursively
 *                for the values it contains.
 * Mutable values (lists, dicts, iterators) are built once into a temporary: cdyn_cg_memo_load
 * / cdyn_cg_memo_store keep every use pointing at the same object.
 */
#ifndef CDYN_CODEGEN_H
#define CDYN_CODEGEN_H
#include "cdynamo.h"
#include "bytecode.h"
#include "value.h"

typedef struct cdyn_cg {
    cdyn_instr_list out;
    PyObject *consts;     /* list */
    PyObject *names;      /* list of str */
    PyObject *outputs;    /* dict: fx node -> output index */
    PyObject *out_nodes;  /* list of fx nodes, in output order */
    PyObject *memo;       /* dict: id(value) -> temp slot (int) */
    PyObject *varnames;   /* list of str: the new code's varnames (temps appended) */
    PyObject *free_fixups;/* list of instruction indices whose oparg is a free-variable
                             number, fixed up once all temporaries exist */
    PyObject *preload;    /* list of values with a source loaded into temporaries before
                             the side effects are replayed (codegen.c note_preload) */
    PyObject *shared;     /* set of id(value) of the values side effects store: each is
                             built once, so one stored under two names (a ModelOutput's item
                             and attribute) is one object, as in eager */
    int first_tmp;        /* slot of the first graph output temporary */
    int amp_tmps[8];      /* at a break inside autocast blocks: temporaries holding their
                             AutocastExit objects, outer first (codegen.c) */
    int n_amp;
    int lineno;
} cdyn_cg;

/* Append an instruction (positions: cg->lineno). 0 / -1. */
int cdyn_cg_emit(cdyn_cg *cg, int opcode, int oparg);
/* Index of obj (borrowed) in the constants, by identity; -1 on error. */
int cdyn_cg_const(cdyn_cg *cg, PyObject *obj);
/* Index of name (borrowed str) in the names; -1 on error. */
int cdyn_cg_name(cdyn_cg *cg, PyObject *name);
/* Emit LOAD_CONST obj. 0 / -1. */
int cdyn_cg_load_const(cdyn_cg *cg, PyObject *obj);
/* Emit a call `callable(<n values already pushed>)`: the caller emits PUSH_NULL +
 * LOAD_CONST callable (cdyn_cg_push_callable) first, then the arguments. 0 / -1. */
int cdyn_cg_push_callable(cdyn_cg *cg, PyObject *callable);
int cdyn_cg_call(cdyn_cg *cg, int nargs);
/* The NULL of a call, emitted before (CDYN_NULL_FIRST) or after the instructions that push
 * the callable: call both around them, one of them emits PUSH_NULL. 0 / -1. */
int cdyn_cg_null_before(cdyn_cg *cg);
int cdyn_cg_null_after(cdyn_cg *cg);
/* A conditional jump on the value at the top (POP_JUMP_IF_TRUE / _FALSE, its target set by
 * the caller), after TO_BOOL where the version needs an exact bool. 0 / -1. */
int cdyn_cg_cond_jump(cdyn_cg *cg, int if_true);
/* Emit LOAD_CLOSURE of the top frame's free variable k (the cell itself). 0 / -1. */
int cdyn_cg_load_closure_cell(cdyn_cg *cg, int k);
/* Emit bytecode pushing the value of a source. 0 / -1. */
int cdyn_cg_source(cdyn_cg *cg, PyObject *source);
/* Emit bytecode pushing value v (its family's reconstruct). 0 / -1. */
int cdyn_cg_value(cdyn_cg *cg, PyObject *v);
/* Collect what v needs (its family's collect). */
tr_status cdyn_cg_collect(struct cdyn_tx *tx, cdyn_cg *cg, PyObject *v);
/* Record an fx node as a graph output (once). 0 / -1. */
int cdyn_cg_add_output(cdyn_cg *cg, PyObject *node);
/* Emit LOAD_FAST of the temporary holding graph output `node`. 0 / -1 (SystemError when
 * it is not an output). */
int cdyn_cg_load_output(cdyn_cg *cg, PyObject *node);
/* 1 when v (an immutable value, a tuple) must still be built once: a side effect stores
 * it (cg->shared); 0 when not; -1 on error. */
int cdyn_cg_is_shared(cdyn_cg *cg, PyObject *v);
/* When v was already built: emit its load and return 1; 0 when it must be built; -1. */
int cdyn_cg_memo_load(cdyn_cg *cg, PyObject *v);
/* v was just built on the stack: keep it there and in a new temporary. 0 / -1. */
int cdyn_cg_memo_store(cdyn_cg *cg, PyObject *v, const char *prefix);

#endif
