/* tx.h: state shared by the translator's files (translate.c: the interpreter loop and
 * opcode handlers; tcall.c: calls; codegen.c: graph output and transformed code).
 * Internal to the engine; not part of any Python-facing API.
 */
#ifndef CDYN_TX_H
#define CDYN_TX_H
#include "cdynamo.h"
#include "bytecode.h"
#include "guards.h"
#include "source.h"
#include "value.h"

/* Result of a translator step. Unsupported code is not an error: it sets tx->reason and
 * makes the frame run unmodified. */
typedef enum { TR_OK = 0, TR_UNSUPPORTED = 1, TR_BREAK = 2, TR_ERROR = -1 } tr_status;

/* Kinds of graph break (the top frame stops at tx->break_pc with its stack intact). */
typedef enum { BRK_NONE = 0, BRK_JUMP, BRK_CALL, BRK_CALL_EX } brk_kind;

/* Whole-trace state (one per traced top-level frame). All PyObject fields strong. */
typedef struct cdyn_tx {
    PyObject *options;      /* borrowed: compile options (backend, backend_name, fullgraph) */
    PyObject *glue;         /* the cdynamo._glue module */
    PyObject *graph;        /* torch.fx.Graph */
    PyObject *fake_mode;    /* FakeTensorMode */
    PyObject *root;         /* dict: fx attribute target -> module or tensor */
    PyObject *input_sources;/* list of sources of the graph inputs, in placeholder order */
    PyObject *input_values; /* list of the real input objects, same order */
    PyObject *by_source;    /* dict: source repr -> value (each source wrapped once) */
    PyObject *by_id;        /* dict: id(real tensor) -> value (aliases share a placeholder) */
    cdyn_guards *guards;    /* owned until handed to the translation result */
    PyObject *reason;       /* str: why the frame is unsupported (set with TR_UNSUPPORTED) */
    PyObject *reason_file;  /* borrowed: file of the instruction that set reason, or NULL */
    int reason_line;        /* its line */
    struct cdyn_fs *cur_fs; /* borrowed: the frame state being interpreted */
    int n_call_nodes;       /* call_function / call_method / call_module nodes */
    int grad_enabled;       /* symbolic grad mode at the current instruction */
    int grad_enabled_at_start;
    long steps;             /* instructions interpreted, all frames */
    long mutations;         /* mutations of values older than ckpt_serial (rollback check) */
    long long ckpt_serial;  /* values created before this serial predate the checkpoint */
    brk_kind break_kind;    /* set with TR_BREAK */
    Py_ssize_t break_pc;    /* index of the instruction the top frame breaks at */
    int break_arg;          /* its oparg */
    PyObject *break_kwnames;/* KW_NAMES tuple of a breaking CALL, or NULL */
    PyObject *resume_codes; /* list of resume code objects made for this frame */
    PyObject *effects;      /* list of side effects to replay, in program order: tuples
                               (kind, target value or None, key/name, value); see EFF_* */
    int depth;              /* inlining depth */
    /* top frame facts needed by code generation */
    struct _PyInterpreterFrame *frame;  /* borrowed */
    PyCodeObject *code;     /* borrowed: the top frame's code */
} cdyn_tx;

/* Per-function interpreter state (the top frame or an inlined call). */
typedef struct cdyn_fs {
    PyCodeObject *code;     /* strong */
    cdyn_instr_list instrs;
    PyObject **locals;      /* co_nlocalsplus slots, strong or NULL */
    int nlocals;
    PyObject **stack;       /* strong */
    int sp, stack_cap;
    PyObject *globals;      /* strong: the function's globals dict */
    PyObject *builtins;     /* strong */
    PyObject *globals_source; /* strong source of the globals dict's owner function, or NULL
                                 when these globals are the top frame's (G[...] sources) */
    int top_globals;        /* 1: globals are the top frame's globals */
    PyObject *kw_names;     /* strong tuple from KW_NAMES, consumed by CALL */
    PyObject *retval;       /* strong, set by RETURN_VALUE */
    Py_ssize_t pc;          /* index of the next instruction */
    int is_top;
} cdyn_fs;

/* Set tx->reason from a printf-style message; returns TR_UNSUPPORTED. When a Python
 * exception is pending, its text is appended and it is cleared. */
tr_status cdyn_tx_unsupported(cdyn_tx *tx, const char *fmt, ...);

/* Wrap a real object read through `source` (borrowed, may be NULL) into a value, adding
 * the guards it needs (TENSOR_MATCH, EQUALS_MATCH, ID/FUNCTION_MATCH). *out: new ref. */
tr_status cdyn_tx_wrap_real(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out);

/* Wrap the items of a lazily wrapped input tuple/list/dict (flag 2) now, adding its
 * LENGTH_CHECK guard; no-op for other values. */
tr_status cdyn_tx_materialize(cdyn_tx *tx, PyObject *v);

/* A checkpoint of the trace before a call that may turn out unsupported (a failed
 * inlining), so it can be undone: the graph nodes added since are erased. */
typedef struct {
    PyObject *nodes;     /* strong: the graph's nodes at the checkpoint */
    long mutations;
    int n_call_nodes;
} cdyn_ckpt;
int cdyn_tx_ckpt_take(cdyn_tx *tx, cdyn_ckpt *ck);          /* 0 / -1 */
/* Undo to ck: TR_OK, TR_UNSUPPORTED when traced state was mutated since, TR_ERROR. */
tr_status cdyn_tx_ckpt_restore(cdyn_tx *tx, cdyn_ckpt *ck);

/* Record a graph call: op is "call_function", "call_method" or "call_module"; target the
 * callable / method name / attribute name; args a list of values, kwnames a tuple of str
 * or NULL naming the last len(kwnames) args; module: the nn.Module for call_module (else
 * NULL). Runs the call on fake tensors for metadata. *out: new value. */
tr_status cdyn_tx_graph_call(cdyn_tx *tx, const char *op, PyObject *target, PyObject *module,
                             PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                             PyObject **out);

/* Call a value with arguments (values, borrowed), kwnames as above. *out: new value. */
tr_status cdyn_tx_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args,
                       Py_ssize_t nargs, PyObject *kwnames, PyObject **out);

/* Interpret an inlined function: code (borrowed), the bound argument values already in
 * locals order (array of nlocalsplus strong-or-NULL, stolen), closure cells (a list of
 * VK_CELL values or NULL), globals (borrowed). *out: the return value (new). */
tr_status cdyn_tx_inline(cdyn_tx *tx, PyCodeObject *code, PyObject **locals,
                         PyObject *closure_cells, PyObject *globals, PyObject *builtins,
                         PyObject *globals_source, int top_globals, PyObject **out);

/* Run an interpreter frame state until RETURN_VALUE (fs->retval set). */
tr_status cdyn_tx_run(cdyn_tx *tx, cdyn_fs *fs);

/* The items of an iterable value as a new list of values (tuple, list, dict keys, iterator
 * rest (consumed), constant tuple/list/range/str, ModuleList/Sequential children, tensor
 * rows). */
tr_status cdyn_tx_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list);

/* Truth value of a value for a jump: 0/1 in *out. */
tr_status cdyn_tx_truth(cdyn_tx *tx, PyObject *v, int *out);

/* Attribute load on a value (LOAD_ATTR); *out new value. */
tr_status cdyn_tx_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out);

/* Finish at a graph break (tx->break_kind at tx->break_pc of fs, the top frame): compile
 * the graph so far, run the breaking instruction in plain Python, and call resume
 * functions. On TR_OK *code_out is a new code object. */
struct cdyn_fs;
tr_status cdyn_tx_finish_break(cdyn_tx *tx, struct cdyn_fs *fs, PyObject **code_out);

/* Finish: compile the graph with the return value `ret` and generate the transformed
 * code. On TR_OK *code_out is a new code object. */
tr_status cdyn_tx_finish(cdyn_tx *tx, PyObject *ret, PyObject **code_out);

/* Side-effect kinds recorded in tx->effects and replayed by the transformed code. */
enum { EFF_STORE_SUBSCR = 0, EFF_STORE_ATTR = 1, EFF_STORE_GLOBAL = 2, EFF_APPEND = 3,
       EFF_DELETE_SUBSCR = 4 };

/* Record a side effect (all arguments borrowed; target/key may be NULL -> None). */
tr_status cdyn_tx_effect(cdyn_tx *tx, int kind, PyObject *target, PyObject *key, PyObject *value);

/* Note a mutation of value v (list/dict store, iterator advance, cell store). */
static inline void
cdyn_tx_mutated(cdyn_tx *tx, PyObject *v)
{
    /* iterators passed to a call are restored by the caller's checkpoint instead */
    if (V(v)->serial < tx->ckpt_serial && V(v)->kind != VK_ITER) {
        tx->mutations++;
    }
}

/* Cached Python objects used by the translator (borrowed after init). */
typedef struct {
    PyObject *torch, *torch_tensor_type, *torch_size_type, *torch_dtype_type,
        *torch_device_type, *nn_module_type, *nn_parameter_type, *fx_graph_type,
        *operator_mod, *builtins_mod, *math_mod, *glue, *getattr_fn, *getitem_fn,
        *setitem_fn, *set_grad_enabled, *is_grad_enabled, *no_grad, *enable_grad,
        *set_grad_enabled_cls, *sequential_type, *modulelist_type, *moduledict_type,
        *binop_fns[26], *cmp_fns[6], *neg, *pos, *invert, *not_, *contains,
        *grad_mode_exit_type;
} cdyn_tx_globals;
extern cdyn_tx_globals cdyn_G;

#endif
