/* tx.h: state shared by the translator's files.
 *
 *   translate.c   the opcode loop (one short handler per opcode) and graph-break decisions
 *   wrap.c        real objects -> values, with the guards they need (VariableBuilder)
 *   graph.c       the FX graph: torch calls on fake tensors, parameters, checkpoints
 *   inline.c      inlined calls: argument binding and nested frame states
 *   undo.c        the undo log of a top-level step (what a failed step changed, put back)
 *   codegen.c     graph output and the transformed code (codegen.h)
 *   values/       one C file per family of values (value.h)
 * Internal to the engine; not part of any Python-facing API.
 */
#ifndef CDYN_TX_H
#define CDYN_TX_H
#include "cdynamo.h"
#include "frame.h"
#include "bytecode.h"
#include "guards.h"
#include "source.h"
#include "value.h"

/* Kinds of graph break (the top frame stops at tx->break_pc with its stack intact):
 * a jump on a tensor, a call, a CALL_FUNCTION_EX, a FOR_ITER on an iterator the trace cannot
 * advance, or any other instruction run by Python. */
typedef enum { BRK_NONE = 0, BRK_JUMP, BRK_CALL, BRK_CALL_EX, BRK_INSTR, BRK_FOR_ITER } brk_kind;

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
    PyObject *by_id;        /* dict: id(real object) -> value (aliases share a value) */
    PyObject *last_node;    /* the newest call node made (checkpoints), or NULL */
    PyObject *open_modes;   /* list of the autocast / inference_mode blocks entered at trace time (exited
                               at the end of the trace, or on a rollback) */
    PyObject *exc;          /* the exception being raised (with TR_EXCEPTION), or NULL */
    PyObject *exc_info;     /* list: the exceptions being handled (PUSH_EXC_INFO), innermost
                               last */
    cdyn_guards *guards;    /* owned until handed to the translation result */
    PyObject *reason;       /* str: why the current step is unsupported */
    PyObject *reason_file;  /* borrowed: file of the instruction that set reason, or NULL */
    int reason_line;        /* its line */
    int reason_eogb;        /* tx->eogb where the reason arose (translate.c) */
    struct cdyn_fs *cur_fs; /* borrowed: the frame state being interpreted */
    int n_call_nodes;       /* call_function / call_method / call_module nodes */
    int output_bare_input;  /* fullgraph with no operation traced: a returned input tensor is
                               still a graph output (torch._dynamo compiles that graph) */
    int grad_enabled;       /* symbolic grad mode at the current instruction */
    int grad_enabled_at_start;
    long steps;             /* instructions interpreted, all frames */
    long mutations;         /* mutations of values older than ckpt_serial (side-effect checks
                               of higher-order op bodies and generators drained ahead) */
    long lost;              /* ... of them, those the undo log cannot undo (rollback check) */
    long long ckpt_serial;  /* values created before this serial predate the checkpoint */
    long long epoch;        /* number of the current top-level checkpoint (undo.c) */
    brk_kind break_kind;    /* set with TR_BREAK */
    Py_ssize_t break_pc;    /* index of the instruction the top frame breaks at */
    int break_arg;          /* its oparg */
    int break_in_loop;      /* 1 when that instruction lies inside a loop of the top frame */
    PyObject *break_kwnames;/* KW_NAMES tuple of a breaking CALL, or NULL */
    PyObject *resume_codes; /* list of resume code objects made for this frame */
    PyObject *effects;      /* list of side effects to replay, in program order: tuples
                               (kind, target value or None, key/name, value); see EFF_* */
    int depth;              /* inlining depth */
    PyObject *undo;         /* the undo log of the current top-level step (undo.c): what
                               it changed in older traced state; a rollback restores it */
    PyObject *cyclic;       /* list of CELL and GENERATOR values made in the trace: they can
                               reach themselves (a recursive closure), so their contents are
                               cleared when the trace ends */
    /* top frame facts needed by code generation */
    cdyn_frame *frame;  /* borrowed */
    PyCodeObject *code;     /* borrowed: the top frame's code */
    /* dynamic shapes (values/symint.c) */
    PyObject *shapes;       /* cdynamo._shapes.ShapeTrace of this trace */
    PyObject *frame_state;  /* dict: the code's sizes seen so far (automatic dynamic) */
    PyObject *sym_sources;  /* dict: symbol placeholder node -> its source (x.size()[0]) */
    int dynamic;            /* compile(dynamic=): -1 None (automatic), 0 False, 1 True */
    int dyn_sources;        /* torch.compiler.config.dynamic_sources: 0 not read yet, 1 empty,
                               2 set (sources it names are dynamic) */
    int capture_scalars;    /* cdynamo.config.capture_scalar_outputs at trace start */
    int tf_subclass_off;    /* inside torch._C.DisableTorchFunctionSubclass(): tensor
                               subclasses' __torch_function__ is not dispatched */
    int eogb;               /* inside torch._dynamo.error_on_graph_break(flag) blocks of the
                               trace: 0 none (the switch outside the trace decides), 1 flag
                               False, 2 flag True (a graph break raises; translate.c) */
    PyObject *param_overrides; /* inside torch.func.functional_call (values/polyfill.c): dict
                               (id(module), attribute name) -> the value its parameter or
                               buffer reads give (values/nnmodule.c), or NULL */
    struct cdyn_sub *sub;   /* borrowed: the innermost active sub-trace (graph.c), or NULL */
    int n_gen_in_try;       /* generators that suspended inside a try/with block (never less
                               than the number still suspended there; values/generator.c) */
    PyObject *stored_globals; /* list of the trusted globals dicts (torch's own modules)
                               the trace stored into, or NULL: their globals are then read
                               through sources (translate.c STORE_GLOBAL) */
    PyObject *regions;      /* list of the region records of the top graph: inlined calls
                               that cdynamo/_regions.py may outline into invoke_subgraph
                               (values/hop.c cdyn_region_end) */
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
    int call_n;             /* arguments on the stack of the last CALL tried (its oparg, or
                               2 for a zero-argument super() made explicit) */
    int is_top;
    int yielded;            /* a generator's frame: retval holds a yielded value (it is
                               suspended, not returned; values/generator.c) */
} cdyn_fs;

/* ---- translate.c ---------------------------------------------------------------------- */

/* Set tx->reason from a printf-style message; returns TR_UNSUPPORTED. When a Python
 * exception is pending, its text is appended and it is cleared. */
tr_status cdyn_tx_unsupported(cdyn_tx *tx, const char *fmt, ...);

/* Run an interpreter frame state until RETURN_VALUE (fs->retval set). */
tr_status cdyn_tx_run(cdyn_tx *tx, cdyn_fs *fs);

/* Raise an exception in the traced code: type (borrowed class) with argument values (borrowed):
 * sets tx->exc and returns TR_EXCEPTION (values/exception.c). */
tr_status cdyn_tx_raise(cdyn_tx *tx, PyObject *type, PyObject *const *args, Py_ssize_t nargs);
/* The same with one str argument, PyUnicode_FromFormat(fmt, ...): the error CPython would
 * raise, in the traced code (a missing argument, an unhashable key, ...). */
tr_status cdyn_tx_raise_text(cdyn_tx *tx, PyObject *type, const char *fmt, ...);
/* The ValueError CPython 3.11-3.13 raises when owner.method(x) ("list"/"tuple"/"deque",
 * "index"/"remove") finds no item equal to x (borrowed), raised in the trace; a message that
 * needs repr(x) of a non-constant x is unsupported instead (values/seq.c). 3.14 words these
 * messages as "list.index(x): x not in list": an addition to this function. */
tr_status cdyn_seq_not_found(cdyn_tx *tx, const char *owner, const char *method, PyObject *x);
/* The Python error set now, raised by a builtin run for real on constants (a bad argument:
 * TypeError, ValueError, IndexError, KeyError, AttributeError, ZeroDivisionError of a builtin
 * class, constant args), raised in the traced code as eager raises it: cdyn_tx_raise's
 * status. Any other error is cleared and TR_NOTIMPL returned (the caller says unsupported). */
tr_status cdyn_tx_raise_pending(cdyn_tx *tx);
/* `raise v` for an EXC or EXCTYPE value (borrowed), chained to the exception being
 * handled (__context__); TR_UNSUPPORTED for anything else. */
tr_status cdyn_tx_raise_value(cdyn_tx *tx, PyObject *v);
/* The same without chaining: a bare `raise`, RERAISE, gen.throw(v). */
tr_status cdyn_tx_reraise(cdyn_tx *tx, PyObject *v);
/* `raise v from cause` (cause: an exception value or None; both borrowed). */
tr_status cdyn_tx_raise_from(cdyn_tx *tx, PyObject *v, PyObject *cause);
/* 1/0 when exception value v matches the class (tuple) value cls, -1 when undecidable. */
int cdyn_exc_matches(PyObject *v, PyObject *cls);
/* str(v) / repr(v) (use_repr) of an EXC value whose arguments are constants and whose class
 * runs no Python code to make or print it: a new CONST str in *out. TR_NOTIMPL for any other
 * value. */
tr_status cdyn_exc_text(cdyn_tx *tx, PyObject *v, int use_repr, PyObject **out);

/* Record a side effect (all arguments borrowed; target/key may be NULL -> None). */
tr_status cdyn_tx_effect(cdyn_tx *tx, int kind, PyObject *target, PyObject *key, PyObject *value);

/* Side-effect kinds recorded in tx->effects and replayed by the transformed code. */
enum { EFF_STORE_SUBSCR = 0, EFF_STORE_ATTR = 1, EFF_STORE_GLOBAL = 2, EFF_APPEND = 3,
       EFF_DELETE_SUBSCR = 4, EFF_SYNC = 5, EFF_CALL = 6 };
/* EFF_CALL (target, (fn, key), value or None): fn(target, key, value), or fn(target, key)
   when the value is None (not a value): a builtin slot function applied to an object of the
   frame, e.g. object.__setattr__, OrderedDict.__setitem__, object.__delattr__, so that no
   override of the object's type runs again (values/userobj.c). */
/* EFF_SYNC (target, None, None): the input container target was mutated; its final contents
   are written back (values/dict.c cdyn_container_mutating, vtable writeback). */

/* ---- the undo log of a top-level step (undo.c) ----------------------------------------
 * A checkpoint is taken before each top-frame instruction; what the step changes in traced
 * state that existed before it is logged in tx->undo and a rollback applies it newest first:
 * iterator positions, generator resets, value snapshots (bits, pos, payload references and
 * the family's vt->save state, taken before a value's first mutation in the step) and
 * writes into tx->by_source. A mutation it cannot log counts in tx->lost, which makes the
 * rollback impossible (the frame runs unmodified). */

/* Before a mutation of value v (borrowed: a list/dict/set store, a cell store, a generator
 * advanced, an attribute or item stored on an object of the frame): counts it in
 * tx->mutations when v predates the checkpoint or stands for an object of the frame, and
 * logs v's state the first time in the step. Never fails (an unlogged one is lost). */
void cdyn_tx_mutated(cdyn_tx *tx, PyObject *v);
/* A mutation of older traced state that cannot be undone (a generator's handlers run). */
void cdyn_tx_mutation_lost(cdyn_tx *tx);
/* tx->by_source[key] = value (value NULL: the entry deleted; absent, nothing), the entry
 * before logged for a rollback (key, value borrowed). 0 / -1. */
int cdyn_tx_memo_write(cdyn_tx *tx, PyObject *key, PyObject *value);
/* An ITER value (borrowed) about to advance: its position logged when it predates the
 * checkpoint. 0 / -1. */
int cdyn_undo_pos(cdyn_tx *tx, PyObject *v);
/* A GENERATOR value (borrowed) not started yet, about to start: a rollback resets it. 0/-1. */
int cdyn_undo_reset(cdyn_tx *tx, PyObject *v);
/* 1 when v (borrowed) has a reset or snapshot entry in the log of this step. */
int cdyn_undo_noted(cdyn_tx *tx, PyObject *v);
/* Start the numbering of a new checkpoint (graph.c). */
void cdyn_undo_new_epoch(cdyn_tx *tx);
/* Apply the entries logged after the first n, newest first, and drop them. 0 / -1. */
int cdyn_undo_rollback(cdyn_tx *tx, Py_ssize_t n);
/* Start a new top-level step: the log of the previous one (it succeeded) is dropped. */
void cdyn_undo_step(cdyn_tx *tx);
/* References to value v held by the log (v NULL: to any value, an upper bound for one):
 * the generators' drop detection discounts them (values/generator.c). */
Py_ssize_t cdyn_undo_refs(cdyn_tx *tx, PyObject *v);
/* For families' vt->save / vt->restore: a new shallow copy of an exact list, dict or set
 * (None for NULL or anything else), and putting such a copy's contents back into c (in
 * place; c borrowed, may be NULL). */
PyObject *cdyn_undo_copy(PyObject *c);
int cdyn_undo_refill(PyObject *c, PyObject *copy);

/* ---- codegen.c -------------------------------------------------------------------------- */

/* Finish: compile the graph with the return value `ret` and generate the transformed
 * code. On TR_OK *code_out is a new code object. */
tr_status cdyn_tx_finish(cdyn_tx *tx, PyObject *ret, PyObject **code_out);
/* Finish at a graph break (tx->break_kind at tx->break_pc of fs, the top frame): compile
 * the graph so far, run the breaking instruction in plain Python, and call resume
 * functions. On TR_OK *code_out is a new code object. */
tr_status cdyn_tx_finish_break(cdyn_tx *tx, cdyn_fs *fs, PyObject **code_out);

/* How an instruction other than a call or a jump runs at a graph break: it takes the top
 * npop stack values, and leaves nout results (after a NULL when null_below); it is emitted
 * as (opcode, oparg), oparg a co_names index when named; terminal: nothing follows it (a
 * raise). */
typedef struct {
    int npop, nout, null_below, opcode, oparg, named, terminal;
} cdyn_break_shape_t;
/* 1 and *shape filled (shape may be NULL) when ins can be run at a graph break, else 0. */
int cdyn_break_shape(const cdyn_instr *ins, cdyn_break_shape_t *shape);

/* ---- wrap.c ------------------------------------------------------------------------------ */

/* Wrap a real object read through `source` (borrowed, may be NULL) into a value, adding
 * the guards it needs (TENSOR_MATCH, EQUALS_MATCH, ID/FUNCTION/TYPE_MATCH). Each source is
 * wrapped once per trace. *out: new ref. */
tr_status cdyn_tx_wrap_real(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out);
/* cdyn_tx_wrap_real of obj (borrowed) under a constant source (a fixed object the trace made
 * or found: a signature, a module imported in the frame) labelled `label` (borrowed str, or
 * None: named by its address). *out: new ref. */
tr_status cdyn_tx_wrap_fixed(cdyn_tx *tx, PyObject *obj, PyObject *label, PyObject **out);
/* The same for the items of a real tuple/list (kind TUPLE/LIST), wrapped now with ITEM
 * sources under `source` (may be NULL), or of a dict read without a source (source
 * unused: not guarded). *out: new ref. */
tr_status cdyn_tx_wrap_sequence(cdyn_tx *tx, PyObject *obj, PyObject *source, cdyn_vkind kind,
                                PyObject **out);
tr_status cdyn_tx_wrap_dict(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out);
/* The attribute `name` of v as seen so far in this trace: *src gets the attribute's source
 * (new ref, NULL when v has none) and *out the value memoised for it (new ref: wrapped
 * before, or stored by STORE_ATTR), or NULL. TR_OK / TR_ERROR. */
tr_status cdyn_tx_memo_attr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **src,
                            PyObject **out);
/* Remember value v (borrowed) for source (so the path is wrapped and guarded once). 0/-1. */
int cdyn_tx_memo_source(cdyn_tx *tx, PyObject *source, PyObject *v);
/* 1 when obj is a Python constant we specialise on (EQUALS_MATCH-able). */
int cdyn_is_constant(PyObject *obj);
int cdyn_is_tensor(PyObject *obj);
int cdyn_is_nn_module(PyObject *obj);
/* 1 when the __module__ of obj starts with the dotted prefix (a whole component). */
int cdyn_module_startswith(PyObject *obj, const char *prefix);
/* Name of a Python module object, or "" (borrowed C string). */
const char *cdyn_pymodule_name(PyObject *mod);
/* 1 when s starts with the dotted prefix (a whole component). */
int cdyn_startswith(const char *s, const char *prefix);

/* ---- graph.c ----------------------------------------------------------------------------- */

/* Record a graph call: op is "call_function", "call_method" or "call_module"; target the
 * callable / method name / attribute name; args a list of values, kwnames a tuple of str
 * or NULL naming the last len(kwnames) args; module: the nn.Module for call_module (else
 * NULL). Runs the call on fake tensors for metadata. *out: new value. */
tr_status cdyn_tx_graph_call(cdyn_tx *tx, const char *op, PyObject *target, PyObject *module,
                             PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                             PyObject **out);
/* A graph input: placeholder + fake example + TENSOR_MATCH (source borrowed, required). */
tr_status cdyn_tx_wrap_tensor_input(cdyn_tx *tx, PyObject *obj, PyObject *source,
                                    PyObject **out);
/* A call_function node of target on args (a tuple of FX node arguments) recorded as is,
 * without a fake run (state functions: torch.amp._enter_autocast, functorch's interpreter
 * stack). *node: new ref. */
tr_status cdyn_tx_graph_raw(cdyn_tx *tx, PyObject *target, PyObject *args, PyObject **node);
/* Leave the blocks of tx->open_modes entered at trace time beyond the first n, innermost
 * first (each entry a pair (fn, arg): fn(arg) leaves it; set_grad_enabled also restores
 * tx->grad_enabled). */
void cdyn_tx_exit_modes(cdyn_tx *tx, Py_ssize_t n);
/* A parameter or buffer of an nn.Module as a graph input read through source (its
 * attribute path), as torch._dynamo's inline_inbuilt_nn_modules. */
tr_status cdyn_tx_wrap_module_tensor(cdyn_tx *tx, PyObject *tensor, PyObject *source,
                                     PyObject **out);
/* A name for an FX node / attribute derived from a source: L['self'].linear -> self_linear.
 * New ref. */
PyObject *cdyn_sanitized_name(PyObject *source);
/* The name of a graph input read from source, as torch._dynamo names its placeholders: the
 * source's readable form with each run of non-alphanumeric characters made one underscore
 * (L['x'] -> L_x_; FX names the node itself l_x_). New ref. */
PyObject *cdyn_placeholder_name(PyObject *source);

/* A checkpoint of the trace before a step that may turn out unsupported (a call that fails
 * to inline, an instruction that becomes a graph break), so it can be undone: the call
 * nodes added since are erased. */
typedef struct {
    PyObject *last_node; /* strong or NULL: the newest node at the checkpoint */
    long lost;           /* tx->lost at the checkpoint */
    int n_call_nodes;
    int grad_enabled;
    Py_ssize_t n_effects; /* side effects recorded before the step (later ones are undone) */
    Py_ssize_t n_open_modes;
    Py_ssize_t n_undo;   /* length of tx->undo at the checkpoint */
    Py_ssize_t n_exc_info;  /* exceptions being handled (tx->exc_info) */
    int tf_subclass_off;
    int eogb;
} cdyn_ckpt;
void cdyn_tx_ckpt_take(cdyn_tx *tx, cdyn_ckpt *ck);
/* Undo to ck (the graph nodes, side effects and the undo log of the step): TR_OK,
 * TR_UNSUPPORTED when traced state was changed since in a way the log cannot undo,
 * TR_ERROR. */
tr_status cdyn_tx_ckpt_restore(cdyn_tx *tx, cdyn_ckpt *ck);
/* NO_TENSOR_ALIASING over the trace's distinct tensor inputs (2 or more; numpy arrays seen
 * as tensors excepted): an entry traced for f(x, y) is not reused for f(x, x); the same
 * guard over the distinct mutable objects of the frame (lists, dicts, sets, user objects:
 * one value per object, wrap.c). 0 / -1. */
int cdyn_tx_add_no_aliasing(cdyn_tx *tx);
void cdyn_tx_ckpt_clear(cdyn_ckpt *ck);

/* ---- sub-traces (graph.c) ---------------------------------------------------------------
 * The body of a higher-order op (a torch.cond branch, a checkpointed function, an
 * autograd.Function's forward/backward) is traced into a graph of its own. While a sub-trace
 * is active, tx->graph/root/last_node/n_call_nodes are its own (the interpreter, inlining and
 * checkpoints work unchanged), the enclosing level's are kept in the cdyn_sub. New graph
 * inputs and module parameters always go to the top graph; a tensor of an enclosing level
 * used in the body is lifted: a placeholder of the body's graph, and the enclosing node is
 * remembered as an extra operand of the op (free_nodes, in placeholder order). */
typedef struct cdyn_sub {
    struct cdyn_sub *parent;    /* borrowed: the enclosing sub-trace, or NULL (the top graph) */
    PyObject *graph, *root;     /* strong: this body's torch.fx.Graph and attribute dict */
    PyObject *outer_graph, *outer_root, *outer_last_node; /* strong: the enclosing level's,
                                                             while active */
    int outer_n_call_nodes;
    int active;
    PyObject *lifted;           /* dict: enclosing-level node -> placeholder of this graph */
    PyObject *free_nodes;       /* list: enclosing-level nodes lifted, in placeholder order */
    PyObject *free_fakes;       /* list: their example values */
    PyObject *arg_nodes;        /* list: placeholders of the body's own arguments */
} cdyn_sub;

/* Begin a sub-trace: a new graph becomes tx->graph (sub is filled; borrowed by tx until
 * popped). 0 / -1. */
int cdyn_tx_sub_push(cdyn_tx *tx, cdyn_sub *sub);
/* End the innermost sub-trace (sub): the enclosing level is current again. */
void cdyn_tx_sub_pop(cdyn_tx *tx, cdyn_sub *sub);
/* Release what sub holds (pops it first when still active). */
void cdyn_tx_sub_clear(cdyn_tx *tx, cdyn_sub *sub);
/* A placeholder of a body's graph named after `like` (an FX node or str, made unique),
 * example fake (its version counter noted: torch.cond refuses input mutations), appended to
 * the inputs of graph. New ref or NULL. */
PyObject *cdyn_tx_placeholder(cdyn_tx *tx, PyObject *graph, PyObject *like, PyObject *fake);
/* The node to use in the current graph for a tensor whose node (borrowed) may belong to an
 * enclosing level: lifted through every active sub-trace. *out new ref. TR_UNSUPPORTED for
 * a node of no enclosing level (a tensor of another, finished body). */
tr_status cdyn_tx_lift(cdyn_tx *tx, PyObject *node, PyObject *fake, PyObject **out);

/* ---- inline.c ---------------------------------------------------------------------------- */

/* Inline a real Python function object (borrowed) called with self (a value or NULL) and
 * args; fn_source: the function's source or NULL (closure guards). *out new value. */
tr_status cdyn_tx_inline_function(cdyn_tx *tx, PyObject *func, PyObject *fn_source,
                                  PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames, PyObject **out);
/* Inline a USERFN value (borrowed): with its source, its closure cells are read through
 * it, and when it is guarded by its code only (FUNC_CODE_GUARDED) its defaults and globals
 * are guarded through it too. */
tr_status cdyn_tx_inline_userfn(cdyn_tx *tx, PyObject *fn, PyObject *const *args,
                                Py_ssize_t nargs, PyObject *kwnames, PyObject **out);
/* Bind arguments to the parameters of code and inline it. defaults: a list of values for
 * the last positional parameters, or NULL; kwdefaults: dict name -> value, or NULL;
 * closure_cells: list of CELL values or NULL; globals/builtins borrowed. */
tr_status cdyn_tx_inline_code(cdyn_tx *tx, PyCodeObject *code, PyObject *self,
                              PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                              PyObject *defaults, PyObject *kwdefaults, PyObject *closure_cells,
                              PyObject *globals, PyObject *builtins, PyObject *globals_source,
                              int top_globals, PyObject **out);
/* The key in tx->by_source of global `name` of the globals dict `globals` (borrowed): the
 * readable form of its source, G[name] for the top frame's globals, else an item of the
 * globals' constant source (what LOAD_GLOBAL/STORE_GLOBAL of an inlined function use). New
 * reference, NULL + exception. */
PyObject *cdyn_tx_global_key(cdyn_tx *tx, PyObject *globals, PyObject *name);
/* The source of global `name` of a module's globals dict `globals` (borrowed), an item of
 * the dict's constant source (the trusted globals of torch's own modules: not guarded by
 * their loads, tracked once the trace stores into them). New reference, NULL + exception. */
PyObject *cdyn_tx_module_global_source(PyObject *globals, PyObject *name);
/* 1 when the trace stored into the trusted globals dict `globals` (tx->stored_globals). */
int cdyn_tx_globals_stored(cdyn_tx *tx, PyObject *globals);
/* Initialise fs for code (borrowed); locals zeroed. 0 / -1 (fs_clear it either way). */
int cdyn_fs_init(cdyn_fs *fs, PyCodeObject *code, PyObject *globals, PyObject *builtins);
void cdyn_fs_clear(cdyn_fs *fs);

/* ---- generators (values/generator.c) ---------------------------------------------------- */

/* A generator value over fs (a heap frame state of a generator function's code, locals
 * bound; stolen: freed with the value, or here on failure), run up to RETURN_GENERATOR.
 * *out: new value. */
tr_status cdyn_generator_new(cdyn_tx *tx, cdyn_fs *fs, PyObject **out);
/* Remember v (borrowed; a CELL or GENERATOR made in the trace) for tx->cyclic. 0 / -1. */
int cdyn_tx_note_cyclic(cdyn_tx *tx, PyObject *v);
/* A zeroed heap frame state for a generator (NULL + MemoryError); freed by cdyn_fs_free
 * (cdyn_fs_clear + free; NULL passes). */
cdyn_fs *cdyn_generator_frame_alloc(void);
void cdyn_fs_free(cdyn_fs *fs);
/* Put a generator value (borrowed) back in its state at creation (a rollback). */
void cdyn_generator_reset(PyObject *v);
/* The type of iter(()) (borrowed; a builtin type, alive for the process). */
PyTypeObject *cdyn_tuple_iter_type(void);
/* New ITER value standing for the tuple iterator obj of the frame (borrowed; exactly a tuple
 * iterator) read through source (borrowed, not NULL): it takes the items obj has left
 * lazily, each through the source ___tuple_iter_rest(<source>)[k] (TYPE_MATCHed, so a
 * shorter iterator fails the guards; its exhaustion is a LENGTH_CHECK); advancing it
 * records an EFF_SYNC that advances the real iterator as far (values/iter.c). The caller
 * guards its type. NULL + exception. */
PyObject *cdyn_iter_input(PyObject *obj, PyObject *source);
/* The value a generator returned (yield from), borrowed; None for other iterators. */
PyObject *cdyn_generator_retval(PyObject *v);
/* Report the real type `type` (borrowed) for a generator value made by a polyfill of that
 * type (map, filter, zip, ...). No-op for other values. */
void cdyn_generator_set_type(PyObject *v, PyObject *type);
/* After an instruction of fs succeeded: close the generators suspended inside a try/with
 * block that nothing references any more (their finally / __exit__ runs there, as when
 * CPython drops the last reference); when fs is the top frame and has returned, its locals
 * count as dropped. A failure here cannot be rolled back (counted as a mutation). */
tr_status cdyn_generator_release_dropped(cdyn_tx *tx, cdyn_fs *fs);
/* A step that began at value serial `serial` failed and is undone: generators it made are
 * unusable and never closed (their frames did not run in the program). */
void cdyn_generator_forget_since(cdyn_tx *tx, long long serial);
/* While a Python function is inlined: its arguments args[0..n) (borrowed), when they are
 * slots of the caller's stack (caller: borrowed fs or NULL), are references CPython would
 * have moved into the callee's frame, so they do not keep a generator alive (a `del` of
 * the parameter drops it). push: 1 when recorded (then pop after the call), else 0. */
int cdyn_generator_push_moved_args(cdyn_fs *caller, PyObject *const *args, Py_ssize_t n);
void cdyn_generator_pop_moved_args(void);
/* Raise tx->exc at instruction index pc of fs (a generator suspended there): unwind to
 * its handler (TR_OK, fs->pc at the handler) or TR_EXCEPTION when none (translate.c). */
tr_status cdyn_tx_throw_at(cdyn_tx *tx, cdyn_fs *fs, Py_ssize_t pc);

/* ---- polyfills (values/polyfill.c) ------------------------------------------------------ */

/* The plain-Python polyfill registered for the real callable obj (cdynamo.polyfills), or
 * NULL (borrowed; no exception). The table is loaded on first use. */
PyObject *cdyn_polyfill_of(PyObject *obj);
/* Call the polyfill of the real callable fn with the argument values (inlined); arguments
 * borrowed, *out new. *handled = 0 when fn has none. A result that is a generator of a
 * polyfilled type reports that type. */
tr_status cdyn_polyfill_call(cdyn_tx *tx, PyObject *fn, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames, PyObject **out,
                             int *handled);
/* Inline the function cdynamo.polyfills.<name> (a helper that stands for no real callable,
 * e.g. "tensor_tolist") on the argument values (borrowed); *out new. */
tr_status cdyn_polyfill_inline_named(cdyn_tx *tx, const char *name, PyObject *const *args,
                                     Py_ssize_t nargs, PyObject **out);

/* ---- functions (values/function.c) ------------------------------------------------------- */

/* functools.partial(func, *args, **kw) made while tracing (args borrowed; the first is the
 * function). Nested partials are flattened, as functools does. */
tr_status cdyn_partial_new(cdyn_tx *tx, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames, PyObject **out);
/* Wrap a real functools.partial (borrowed) read through source (borrowed, may be NULL):
 * its func, args and keywords are wrapped (and guarded) through source.func/.args/.keywords.
 * *out new. */
tr_status cdyn_partial_wrap(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out);
/* 1 when obj is a functools.partial (exactly) / a functools lru_cache wrapper. */
int cdyn_is_partial(PyObject *obj);
int cdyn_is_cache_wrapper(PyObject *obj);
/* Guards of a Python function (borrowed; v its new value, borrowed) read through source
 * (borrowed, may be NULL: no guard) that are enough to reuse the trace:
 * its __code__ by identity (closures built anew on each call), or FUNCTION_MATCH for a
 * global without a closure. Sets FUNC_CODE_GUARDED on v when guarded by code. */
tr_status cdyn_guard_function(cdyn_tx *tx, PyObject *func, PyObject *source, PyObject *v);
/* torch._dynamo.assume_constant_result / cdynamo.assume_constant_result: 1 when callable
 * (borrowed: a function, an lru_cache wrapper, anything with an instance __dict__) carries a
 * true `_dynamo_marked_constant` in its own __dict__ (a functools.wraps / lru_cache wrapper
 * copies it there), else 0; no exception. */
int cdyn_is_marked_constant(PyObject *callable);
/* Call the marked callable (borrowed) now, at trace time, on the real objects of self (a
 * value or NULL, borrowed) and args (borrowed values, kwnames as CALL): constants, and
 * objects whose identity is guarded (ID_MATCH added for objects and modules of the frame).
 * *out (new): the result as a constant (no guard), or any other object wrapped through a
 * constant source. Unsupported (a graph break: the call runs in Python) when an argument is
 * a tensor or another value with no real object, or when the call raises. */
tr_status cdyn_marked_constant_call(cdyn_tx *tx, PyObject *callable, PyObject *self,
                                    PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                                    PyObject **out);

/* ---- values: shared helpers between families --------------------------------------------- */

/* Wrap the items of a lazily wrapped input tuple/list/dict (SEQ_LAZY) now, adding its
 * LENGTH_CHECK guard; no-op for other values. */
tr_status cdyn_tx_materialize(cdyn_tx *tx, PyObject *v);
/* Call a real callable on the real objects of constant values; wrap a constant result
 * (a list result becomes a LIST of constants). */
tr_status cdyn_call_on_constants(cdyn_tx *tx, PyObject *fn, PyObject *const *args,
                                 Py_ssize_t nargs, PyObject *kwnames, PyObject **out);
/* 1 when every value in args is a CONST. */
int cdyn_all_const(PyObject *const *args, Py_ssize_t n);
/* 1 when obj is a builtin method or method-wrapper bound to a constant of an immutable
 * builtin type (tuple, str, bytes, int, float, complex, bool, frozenset, None): calling it
 * on constants is pure (values/builtin.c). */
int cdyn_immutable_bound(PyObject *obj);
/* 1 when some value in args is a TENSOR. */
int cdyn_any_tensor(PyObject *const *args, Py_ssize_t n);
/* isinstance(v, cls) for a TENSOR value v and a real class or tuple of classes cls (both
 * borrowed): 1 / 0, -1 with an exception (values/tensor.c). */
int cdyn_tensor_isinstance(PyObject *v, PyObject *cls);
/* __torch_function__ subclasses among the tensor arguments of a graph call (args: the
 * call's values, keyword values included; TENSOR values and the items of TUPLE / LIST
 * values are looked at), as torch's dispatch would see them (values/tensor.c). Both NULL
 * when none has a __torch_function__ of its own (torch.Tensor, nn.Parameter's disabled
 * one) or the trace is inside DisableTorchFunctionSubclass. When some class overrides it,
 * *types is a new tuple of the classes (most derived first): the call is traced through
 * their __torch_function__ (cdynamo.polyfills.torch_function_dispatch). Else *cls
 * (borrowed) is the class whose default torch.Tensor.__torch_function__ applies: results
 * are converted to it (cdyn_tensor_tf_convert). Unrelated subclasses: TR_UNSUPPORTED. */
tr_status cdyn_tensor_tf_class(cdyn_tx *tx, PyObject *const *args, Py_ssize_t nargs,
                               PyObject **cls, PyObject **types);
/* The function a __torch_function__ override receives for the graph call (op, target) and
 * the order of its npos positional argument values (*order: new list): see tensor.c. New
 * reference; NULL with *st TR_UNSUPPORTED / TR_ERROR. */
PyObject *cdyn_tensor_tf_func(cdyn_tx *tx, const char *op, PyObject *target,
                              PyObject *const *args, Py_ssize_t npos, PyObject **order,
                              tr_status *st);
/* Give the TENSOR value v (made by a call converted to cls: cdyn_tensor_tf_class) the
 * Python type cls (borrowed), as torch.Tensor.__torch_function__ converts results with
 * as_subclass; a value that already is an instance of cls keeps its type. */
void cdyn_tensor_tf_convert(PyObject *v, PyObject *cls);
/* hasattr(v, name) for a TENSOR value v (name borrowed str): 1 / 0, -1 when it cannot be
 * known here (a tensor type with its own attribute lookup, or the tensor cannot be read
 * again through its source), -2 with an exception. A class attribute answers at once;
 * otherwise the instance dict of the real tensor read through v's source decides, under a
 * HASATTR guard; a tensor the graph made (no source) has no instance attribute. *inst (may
 * be NULL): a new reference to the value found in the instance dict, else NULL; when set,
 * no HASATTR is added (the caller guards the value through <source>.<name>)
 * (values/tensor.c). */
int cdyn_tensor_hasattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **inst);
/* The real object `source` names in the traced frame, read again now: a new reference, or
 * NULL with an exception (wrap.c). */
PyObject *cdyn_tx_frame_object(cdyn_tx *tx, PyObject *source);
/* hasattr(v, name) of a FUNCTION made in the trace: 1 / 0 by its type's attributes and the
 * names the trace stored on it, -1 unknown, -2 with an exception (values/function.c). */
int cdyn_function_hasattr(cdyn_tx *tx, PyObject *v, PyObject *name);
/* 1 when name (str) equals s. */
int cdyn_name_is(PyObject *name, const char *s);
/* 1 when name (a str) equals one of the strings of list (NULL-terminated). */
int cdyn_name_in(PyObject *name, const char *const *list);
/* Builtins-family call of a recognised builtin (values/builtin.c): *handled = 0 when fn is
 * not one of the builtins with a handler. */
tr_status cdyn_builtin_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args,
                            Py_ssize_t nargs, PyObject *kwnames, PyObject **out, int *handled);
/* *out: a new CONST str value with str(v) (use_repr 0) or repr(v) (1) where that text is fixed
 * by the trace (a guarded class or function, a constant, a type whose __str__/__repr__ is
 * Python code, inlined); a graph break otherwise (values/builtin.c). */
tr_status cdyn_text_of(cdyn_tx *tx, PyObject *v, int use_repr, PyObject **out);
/* 1 when obj is a builtin the builtins family handles or folds. */
int cdyn_is_builtin(PyObject *obj);
/* 1 when obj is a method of an immutable builtin type taken from the type (str.isalnum,
 * bytes.hex, int.bit_length, tuple.count): pure on constant arguments. */
int cdyn_immutable_type_method(PyObject *obj);
/* torch.Size(seq) of a sequence value whose items are ints, constant or symbolic (a slice
 * of x.size(), a list of sizes): a tuple value rebuilt as a torch.Size (values/torch.c).
 * *out new; unsupported for other items. */
tr_status cdyn_torch_size_of(cdyn_tx *tx, PyObject *seq, PyObject **out);
/* dict.get / __getitem__ / __contains__ (fn, a method descriptor of dict) called on
 * args[0], a dict subclass instance read from the frame, with a constant key: the entry read
 * now, guarded through a source that reads it with dict's own method. TR_NOTIMPL (nothing
 * changed) when it does not apply. *out new. */
tr_status cdyn_builtin_dict_read(cdyn_tx *tx, PyObject *fn, PyObject *const *args,
                                 Py_ssize_t nargs, PyObject *kwnames, PyObject **out);
/* Guard that `key in dict.__contains__(<dict_source>)` stays `present` (the dict read
 * with dict's own method, in C, on every check; values/builtin.c). */
tr_status cdyn_guard_dict_has(cdyn_tx *tx, PyObject *dict_source, PyObject *key, int present);
/* 1 when obj is a torch callable recorded in the graph (values/torch.c), or a function
 * registered with torch._dynamo.allow_in_graph. */
int cdyn_is_graph_function(PyObject *obj);
/* 1 when obj (borrowed) is registered with torch._dynamo.allow_in_graph (its id in torch's
 * _allowed_callable_ids; 0 while torch._dynamo is not loaded). Never fails. */
int cdyn_allowed_in_graph(PyObject *obj);
/* 1 when torch._dynamo.disallow_in_graph(obj) marked obj (a torch op then breaks the graph
 * where it is called, as torch._dynamo). */
int cdyn_disallowed_in_graph(PyObject *obj);
/* 1 when obj sets global torch state as a graph node of its own, with no tensor argument
 * or result (torch._C._set_grad_enabled, torch._C._set_deterministic_algorithms). */
int cdyn_is_state_setter(PyObject *obj);
/* -1 with torch._dynamo's "forbidden callable" error (_glue.ForbiddenCallError) set when
 * obj (borrowed) is a function or class torch marks _dynamo_forbidden (set_stance and what
 * it decorates), or on error; 0 otherwise. */
int cdyn_refuse_forbidden(PyObject *obj);
/* 1 when obj is a torch helper folded at trace time (torch.jit.is_scripting, ...). */
int cdyn_is_torch_special(PyObject *obj);
/* A call of obj (borrowed) under a FOLD trace rule (trace_rules.py): with every argument a
 * constant, obj is called now and *out (new) is its constant result; a "state" rule adds a
 * GLOBAL_STATE guard re-reading it. *handled = 0 (TR_OK, nothing done) when obj has no FOLD
 * rule or an argument is not a constant; the call raising or giving a non-constant is
 * unsupported (values/torch.c). */
tr_status cdyn_tx_fold_call(cdyn_tx *tx, PyObject *obj, PyObject *const *args,
                            Py_ssize_t nargs, PyObject *kwnames, PyObject **out, int *handled);
/* Which higher-order op obj is (values/hop.c): a HOP_* id (> 0) for torch.cond,
 * torch.utils.checkpoint.checkpoint, <Function subclass>.apply, torch.func transforms; 0
 * for anything else. Decided by identity, before the graph-function rule. */
int cdyn_hop_classify(PyObject *obj);
/* 1 when obj is the wrapper function torch.compiler.nested_compile_region made (a user
 * function to inline, though torch defines it). */
int cdyn_hop_is_region_wrapper(PyObject *obj);
/* A family of context managers entered by one graph node and left by another, whose
 * blocks a graph break can split (values/ctx.c): torch.autocast and torch.inference_mode.
 * All pointers are to cdyn_G's fields (borrowed). */
typedef struct {
    const char *what;        /* "torch.autocast": for messages */
    PyObject **enter, **exit;   /* the graph nodes' targets: enter(*args), exit(enter node) */
    PyObject **exit_type;    /* glue: made by a break's code (entering the block in Python)
                                and called at the block's end */
    PyObject **enter_type;   /* glue: handed to a resume function, whose prologue calls it */
} cdyn_mode_family;
/* The family of an AUTOCAST or AUTOCAST_EXIT value v (borrowed). */
const cdyn_mode_family *cdyn_ctx_family(PyObject *v);
/* 1 when an FX call_function target (borrowed) changes global state: set_grad_enabled or a
 * mode family's enter / exit. */
int cdyn_ctx_changes_state(PyObject *target);
/* 1 when func (borrowed) is the function a torch._dynamo.error_on_graph_break(flag) decorator
 * made (torch's wrap_dunder_call_ctx_manager): *target (borrowed) is the function it wraps,
 * *on the flag; 0 otherwise (never raises). */
int cdyn_ctx_eogb_wrapper(PyObject *func, PyObject **target, int *on);
/* A _glue.ErrorOnGraphBreakExit of the frame (a resume function's stack, read through
 * source): the exit of an error_on_graph_break block split by a break; the trace runs with
 * the block's setting from here (tx->eogb), and the exit restores the one before. */
tr_status cdyn_ctx_wrap_eogb_exit(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out);
/* Set grad mode `mode` in the graph (a _set_grad_enabled node), unless the graph is in that
 * mode at this point already (no node for a no-op change, as torch._dynamo). */
tr_status cdyn_ctx_set_grad(cdyn_tx *tx, int mode);
/* The exits of the torch.autocast blocks open at a graph break of the top frame fs, outer
 * first: a new list of the AUTOCAST_EXIT values on fs's stack, one per entry of
 * tx->open_modes in order, or Py_None (new reference) when the open blocks are not all the
 * top frame's; NULL + exception on error. */
PyObject *cdyn_ctx_open_autocast_exits(cdyn_tx *tx, cdyn_fs *fs);
/* 1 when v (borrowed) is the exit of a block the resume function enters again (its stack
 * slot is a CDYN_SLOT_CALL, resume.h), else 0. */
int cdyn_ctx_reentered_in_resume(PyObject *v);
/* 1 when obj (borrowed) is a mode family's glue object (AutocastEnter, AutocastExit,
 * InferenceModeEnter, InferenceModeExit), else 0. */
int cdyn_ctx_is_mode_glue(PyObject *obj);
/* Wrap such an object handed to a resume function (obj borrowed, source borrowed or NULL;
 * its type guarded): an ...Enter is an AUTOCAST value that a call with no arguments enters
 * (its args guarded), an ...Exit an AUTOCAST_EXIT without node, whose call is a break.
 * *out new. */
tr_status cdyn_ctx_wrap_mode_glue(cdyn_tx *tx, PyObject *obj, PyObject *source,
                                  PyObject **out);
/* Context-manager factories (values/ctx.c): torch.autocast and its device forms,
 * torch.inference_mode, contextlib.nullcontext, the profiler's. cdyn_ctx_factory makes the value; *handled = 0 for others. */
int cdyn_is_ctx_factory(PyObject *obj);
/* *out (new): a GRADFN, function value fn (borrowed) decorated by a grad-mode context that
 * sets `mode` (torch.no_grad(f), torch.enable_grad()(f)); a generator function or another
 * callable is a break. */
tr_status cdyn_ctx_grad_fn(cdyn_tx *tx, PyObject *fn, int mode, PyObject **out);
tr_status cdyn_ctx_factory(cdyn_tx *tx, PyObject *obj, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames, PyObject **out, int *handled);
/* getattr on the real object of v (u.obj.obj); trusted: the attribute gets no source (not
 * guarded) unless it is a tensor. (values/misc.c) */
tr_status cdyn_getattr_real(cdyn_tx *tx, PyObject *v, PyObject *name, int trusted,
                            PyObject **out);
/* Stores into an object or module that outlives the frame, replayed by the transformed
 * code (values/user.c). */
tr_status cdyn_setattr_replayed(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value);
tr_status cdyn_store_subscr_replayed(cdyn_tx *tx, PyObject *v, PyObject *key,
                                     PyObject *value);
/* Closure cells (values/misc.c). The CELL value of the real cell `real` (borrowed), one per
 * real cell in a trace: source (borrowed) the path to the cell object, or NULL (a constant
 * source is made); csrc (borrowed or NULL: not guarded) the path its contents are read
 * through. Reached again under another source, a SAME_OBJECT guard keeps both paths one
 * cell. *out new. */
tr_status cdyn_cell_of_real(cdyn_tx *tx, PyObject *real, PyObject *source, PyObject *csrc,
                            PyObject **out);
/* LOAD_DEREF: the contents (*out borrowed), a real cell's wrapped (and guarded) on first use. */
tr_status cdyn_cell_get(cdyn_tx *tx, PyObject *cell, PyObject **out);
/* STORE_DEREF of value (borrowed) into cell (borrowed): later loads see it; a real cell is a
 * side effect written back after the graph (EFF_SYNC once per cell). */
tr_status cdyn_cell_store(cdyn_tx *tx, PyObject *cell, PyObject *value);
/* Rebuild a value from its source or, without one, as the constant obj (families of real
 * objects). */
int cdyn_reconstruct_obj(struct cdyn_cg *cg, PyObject *v);
tr_status cdyn_collect_nothing(cdyn_tx *tx, struct cdyn_cg *cg, PyObject *v);
/* The real type of values holding a real object in u.obj.obj. */
PyTypeObject *cdyn_python_type_obj(PyObject *v);

/* NumPy (values/ndarray.c). numpy scalars (numpy.number) and numpy.dtype objects are
 * constants; numpy callables with a torch._numpy counterpart (and numpy.dtype/iinfo/finfo)
 * are NPFN values; input arrays are graph inputs (cdyn_ndarray_wrap_input). All 0 while
 * numpy is not imported. */
int cdyn_is_numpy_constant(PyObject *obj);
int cdyn_is_numpy_scalar(PyObject *obj);
/* 1 for a numpy.int64 scalar, 2 for a numpy.float64 one (the scalars made dynamic when
 * they change, cdyn_sym_numpy_scalar_input), else 0. Never fails. */
int cdyn_numpy_scalar_kind(PyObject *obj);
/* numpy.int64 (kind 1), numpy.float64 (2) or numpy.bool_ (3), borrowed; NULL while numpy is
 * not imported. */
PyObject *cdyn_numpy_scalar_type(int kind);
int cdyn_is_numpy_array(PyObject *obj);
int cdyn_is_numpy_callable(PyObject *obj);
/* 1 when some value in args is an NDARRAY. */
int cdyn_any_ndarray(PyObject *const *args, Py_ssize_t n);
/* x.numpy(force=...) on the tensor value self: an NDARRAY (a recorded view of x). */
tr_status cdyn_ndarray_from_tensor(cdyn_tx *tx, PyObject *self, PyObject *const *args,
                                   Py_ssize_t nargs, PyObject *kwnames, PyObject **out);
/* A torch function fn called with NDARRAY arguments: torch.from_numpy / as_tensor / asarray
 * of one array are recorded, anything else is unsupported. */
tr_status cdyn_ndarray_torch_call(cdyn_tx *tx, PyObject *fn, PyObject *const *args,
                                  Py_ssize_t nargs, PyObject *kwnames, PyObject **out);

/* An input numpy array read through source (borrowed, required): a graph input, the tensor
 * sharing its memory (guards: TYPE_MATCH, TENSOR_MATCH on ___from_numpy(source)), as an
 * NDARRAY rebuilt from source. *out NULL (TR_OK) when torch cannot hold the array. */
tr_status cdyn_ndarray_wrap_input(cdyn_tx *tx, PyObject *arr, PyObject *source, PyObject **out);
/* User classes and objects (values/user.c and the files named in values/user.h). */
/* `a is b` when either operand is of the user family: TR_NOTIMPL when it cannot decide. An
 * object read from the frame that is compared by identity is ID_MATCHed. */
tr_status cdyn_user_is(cdyn_tx *tx, PyObject *a, PyObject *b, int *out);
/* super(cls, self) (the builtins family's super()). */
tr_status cdyn_user_super(cdyn_tx *tx, PyObject *cls, PyObject *self, PyObject **out);
/* type(v), guarded as the value's own guards or through <source>.__class__. */
tr_status cdyn_user_type_of(cdyn_tx *tx, PyObject *v, PyObject **out);
/* hash(v) of a user object whose type defines a Python __hash__ (inlined); else
 * unsupported (an identity hash is not known while tracing). */
tr_status cdyn_user_hash(cdyn_tx *tx, PyObject *v, PyObject **out);
/* obj (borrowed), a list / tuple (subclass) instance of the frame at source (borrowed),
 * read through ___seq_items(<source>), a copy of the base type's items, so that no
 * override of __iter__ / __len__ / __getitem__ runs in a guard or in the code that passes
 * the items to the graph: *out a new LIST / TUPLE value, items read (length guarded on the
 * copy), whose own source is `source`. */
tr_status cdyn_wrap_seq_copy(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out);
/* 1 when the class of obj, a list / tuple (subclass) instance, defines __iter__, __len__ or
 * __getitem__ in Python (torch.Size's own C slots do not count). */
int cdyn_seq_protocol_in_python(PyObject *obj);
/* hasattr(v, name) on an object made while tracing; TR_NOTIMPL for other values. */
tr_status cdyn_user_hasattr(cdyn_tx *tx, PyObject *v, PyObject *name, int *out);
/* setattr(v, name, value) / delattr(v, name) (value NULL) on a user instance value (the
 * type's __setattr__/__delattr__ inlined; object's are side effects on objects of the frame);
 * TR_NOTIMPL for other values. */
tr_status cdyn_user_setattr_builtin(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value);
/* hasattr(v, name) as the trace left an object of the frame (OBJECT): 1/0 when a store or
 * deletion while tracing decides it, -1 when the real object does, -2 on error, -3 when it
 * cannot be known (tx->reason set). */
int cdyn_user_hasattr_stored(cdyn_tx *tx, PyObject *v, PyObject *name);
/* wrap.c's classification: builtin slot functions / helpers the family implements
 * (VK_OBJFN); instances whose type has a Python __call__ (VK_OBJECT, not opaque); Enum
 * members (constants); named tuples and struct sequences (their type, or NULL). */
int cdyn_user_is_objfn(PyObject *obj);
int cdyn_user_is_callable_object(PyObject *obj);
int cdyn_is_enum_member(PyObject *obj);
PyTypeObject *cdyn_namedtuple_type_of(PyObject *obj);
/* Attributes of a named-tuple value other than its fields (seq.c): TR_NOTIMPL when none. */
tr_status cdyn_namedtuple_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out);
/* torch._dynamo's patch of nn.Module.__init__ (mutation_guard's `patched_init`, which calls
 * the __init__ it replaced and then tags the module for torch._dynamo's own bookkeeping):
 * the function it wraps (borrowed), traced in its place (values/newmodule.c); NULL (no
 * exception) for any other function. */
PyObject *cdyn_newmod_unpatched_init(PyObject *func);
/* A real keys/values/items view (obj, borrowed) of a dict, an OrderedDict, a dict subclass
 * or a ModelOutput, read through source (a frame input, or a view live at a graph break):
 * the same view of the owner's value (a ModelOutput: of the mirror of its items), the
 * owner wrapped through ___view_owner(<source>) (one value with the object under any other
 * name; its guards are the owner's, so a key added later recompiles). Only a view the
 * owner's own method makes (type compared). TR_NOTIMPL for any other object. */
tr_status cdyn_tx_wrap_dict_view(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out);
/* Resolve the family's cached objects; 0 / -1. */
int cdyn_user_init(void);
/* ---- dynamic shapes (values/symint.c) ------------------------------------------------- */

/* Set up / release the symbolic state of tx (after tx->shapes is made). 0 / -1. */
int cdyn_sym_open(cdyn_tx *tx);
void cdyn_sym_clear(cdyn_tx *tx);
/* 1 when the pending exception belongs to the user: a dim marked with mark_dynamic that the
 * trace specialised (ConstraintViolationError, as torch._dynamo raises it). */
int cdyn_sym_user_error(void);
/* 1 when obj is a torch.SymInt, SymFloat or SymBool. */
int cdyn_is_symbolic(PyObject *obj);
/* 1 when some value in args is symbolic (SYMINT or SYMSLICE). */
int cdyn_any_sym(PyObject *const *args, Py_ssize_t n);
/* A call_function node target(*args) kept for its effect (torch._check on a symbolic bool):
 * args are values (borrowed) passed as graph arguments (symbols lifted as inputs), the
 * call is not run, its result unused. */
tr_status cdyn_sym_record_effect(cdyn_tx *tx, PyObject *target, PyObject *const *args, Py_ssize_t n);
/* A call_function node target(*nargs, **nkwargs) (FX arguments: a tuple, a dict or NULL;
 * borrowed) whose example value is res (borrowed, not computed here): *node new. */
tr_status cdyn_tx_record_node(cdyn_tx *tx, PyObject *target, PyObject *nargs, PyObject *nkwargs,
                              PyObject *res, PyObject **node);
/* The value of a fake result `fake` computed by `node` (borrowed): a CONST when it is a
 * plain Python number or a symbol known to be constant, else a SYMINT. *out new. */
tr_status cdyn_sym_value(cdyn_tx *tx, PyObject *fake, PyObject *node, PyObject *source,
                         PyObject **out);
/* A metadata read of tensor value t (shape, size(), stride(), numel(), ...): obj is the
 * fake result, method/arg (arg may be NULL) the call that reads it again in the graph
 * when a symbolic element has no input placeholder. *out new. */
tr_status cdyn_sym_meta(cdyn_tx *tx, PyObject *t, PyObject *obj, const char *method,
                        PyObject *arg, PyObject **out);
/* A builtin or math/operator function called with a symbolic argument (no tensor):
 * symbolic arithmetic recorded in the graph, anything else specialised (guarded). */
tr_status cdyn_sym_builtin(cdyn_tx *tx, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames, PyObject **out);
/* BUILD_SLICE over n values (borrowed) of which one is symbolic. *out new. */
/* Automatic dynamic shapes for the int items of a tuple (or torch.Size) obj (borrowed) of
 * the frame read through source (borrowed), and its float items when source is a dict entry
 * read by name (an optimizer param group's "betas"): records each under source[i] as an int
 * or float input would be; 1 when one of them is dynamic now (wrap the tuple item by item),
 * 0 when all stay static (one constant), -1 on error. */
int cdyn_sym_tuple_dynamic(cdyn_tx *tx, PyObject *obj, PyObject *source);
/* set_stance("eager_then_compile"): the arguments of code's frame that runs eagerly (its
 * first call; slots borrowed, the frame not yet started) recorded into the code's frame
 * state as a trace records its inputs (tensors' sizes and strides, ints; the items of
 * lists, tuples and dicts, under the sources a trace reads them by, e.g. L['z'][0]), so
 * that the next call compiles what changed between the two as dynamic (torch._dynamo
 * derives the same from two example inputs). 0, or -1 with an exception. */
int cdyn_sym_record_eager_call(PyCodeObject *code, PyObject *const *slots);
/* torch._refs.tensor (borrowed), or NULL when torch has none: builds a tensor from symbolic
 * numbers without specialising them (values/torch.c). */
PyObject *cdyn_torch_refs_tensor(void);
tr_status cdyn_sym_build_slice(cdyn_tx *tx, PyObject *const *parts, int n, PyObject **out);
/* A constant for v: a SYMINT specialised to its value (the ShapeEnv guards it); other
 * values returned as they are. *out new. */
tr_status cdyn_sym_specialize(cdyn_tx *tx, PyObject *v, PyObject **out);
/* A Python int input read through source: *out a SYMINT graph input when automatic dynamic
 * shapes / dynamic=True make it dynamic, else NULL (the caller specialises it). */
tr_status cdyn_sym_int_input(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out);
/* A Python float of the frame read through source (both borrowed) that changed between calls
 * (or dynamic=True): *out a new SymFloat value, the graph taking the float as a 0-d float64
 * tensor input (as torch._dynamo's unspecialized float); *out NULL when it stays a constant. */
tr_status cdyn_sym_float_input(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out);
/* A numpy int64 (kind 1) or float64 (kind 2) scalar of the frame read through source (both
 * borrowed): unless dynamic=False, a SymInt / SymFloat of int(<source>) / float(<source>)
 * from the first call (torch converts numpy scalars to Python numbers in its operations; as
 * torch._dynamo, which makes them graph inputs, one graph serves every value), its type
 * TYPE_MATCH-guarded; read back, it is the numpy scalar itself, and what arithmetic makes of
 * it stays a numpy scalar (SYM_NUMPY). *out NULL when it stays a constant. */
tr_status cdyn_sym_numpy_scalar_input(cdyn_tx *tx, PyObject *obj, PyObject *source, int kind,
                                      PyObject **out);
/* 1 when v (borrowed) is a symbolic value standing for a numpy scalar (SYM_NUMPY). */
int cdyn_sym_is_numpy(PyObject *v);
/* Keep the float input read through source (borrowed) static in this code's later traces
 * (the backend could not tensorify it). 0 / -1. */
int cdyn_sym_mark_float_static(cdyn_tx *tx, PyObject *source);
/* The fake of an input tensor read through source, its dims static or symbolic as
 * automatic dynamic shapes, dynamic= and mark_dynamic/mark_static decide. *fake new. */
tr_status cdyn_sym_tensor_input(cdyn_tx *tx, PyObject *tensor, PyObject *source,
                                PyObject **fake);
/* Graph inputs for the new symbols of an input's fake (placeholders before node). */
tr_status cdyn_sym_lift(cdyn_tx *tx, PyObject *node, PyObject *fake, PyObject *source);
/* Add the ShapeEnv's guards of the trace to tx->guards (after the backend ran). 0 / -1. */
int cdyn_sym_finish_guards(cdyn_tx *tx);

/* ---- values/dict.c, values/set.c, values/seq.c: containers --------------------------------
 * A dict key or set item is identified at trace time by its hash key: a constant is its own
 * hash key; a tensor (by identity) or a function made in the trace is a private (marker,
 * node/value) pair; a class, function, module, enum member or other object compared by
 * identity is the real object (an object read through a source gets an ID_MATCH guard); a
 * tuple is the tuple of its items' hash keys; a frozenset the frozenset of them. */

/* *out: the hash key of v (new ref); TR_UNSUPPORTED when v is unhashable or its equality
 * cannot be decided at trace time. */
tr_status cdyn_hash_key(cdyn_tx *tx, PyObject *v, PyObject **out);
/* 1 when hash key h hashes as the real object would (no tensor or traced function inside),
 * so a real set of such keys iterates in the real set's order. */
int cdyn_hash_key_is_real(PyObject *h);
/* `a == b` decided at trace time (identity, constants, the families' compare): *out 0/1;
 * TR_UNSUPPORTED when undecidable (e.g. two different tensors). */
tr_status cdyn_values_equal(cdyn_tx *tx, PyObject *a, PyObject *b, int *out);
/* Attribute `name` of container v of real type `type`: __class__, or a method bound to v
 * (its family's call_method runs it); anything else is unsupported. */
tr_status cdyn_container_getattr(cdyn_tx *tx, PyObject *v, PyTypeObject *type, PyObject *name,
                                 PyObject **out);
/* Before a mutation of container v (all checks done): an input container (with a source)
 * gets its EFF_SYNC side effect once (SEQ_SYNCED); notes the mutation. TR_UNSUPPORTED (nothing
 * changed) for a DICT_BY_POSITION dict. */
tr_status cdyn_container_mutating(cdyn_tx *tx, PyObject *v);
/* values/newobj.c: 1 when v is an object made in the trace whose class subclasses list,
 * set, frozenset or dict (its items in a builtin base value). */
int cdyn_newobj_has_items(PyObject *v);
/* values/userobj.c: the DICT value holding the items of v, an object of a dict subclass
 * (made in the trace, or of the frame with dict's iteration and subscription), as dict's C
 * code reads them (dict.update(d, v), {**v}); *out new. A break for any other object. */
tr_status cdyn_dict_subclass_items(cdyn_tx *tx, PyObject *v, PyObject **out);
/* For such a v whose items are constants: a new real instance of its class holding them
 * (made by the builtin base's __new__ and update/extend, no user code), for its builtin
 * repr; NULL (no exception) otherwise. */
PyObject *cdyn_newobj_items_copy(PyObject *v);
/* values/tensor.c: 1 when t is a traceable wrapper tensor subclass (its class defines
 * __tensor_flatten__: TwoTensor, a torchao-style quantized tensor). */
int cdyn_is_wrapper_subclass(PyTypeObject *t);
/* values/deque.c: 1 when obj is exactly a collections.deque / is collections.deque. */
int cdyn_is_deque(PyObject *obj);
int cdyn_is_deque_type(PyObject *obj);
/* collections.deque(iterable=(), maxlen=None) in the trace. */
tr_status cdyn_deque_construct(cdyn_tx *tx, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames, PyObject **out);
/* A deque of the frame at source (borrowed): its items read through <source>[i]. */
tr_status cdyn_deque_wrap(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out);
/* values/mproxy.c: a read-only proxy of the DICT value d (borrowed): what
 * types.MappingProxyType(d) and d.keys().mapping make in the trace (*out new). */
tr_status cdyn_mproxy_new(cdyn_tx *tx, PyObject *d, PyObject **out);
/* New empty DICT of real type `type` (borrowed; NULL: dict). */
PyObject *cdyn_dict_new(PyTypeObject *type);
/* hasattr(v, name) of a DICT made in the trace whose instances have attributes
 * (OrderedDict, Counter): 1/0 by the attributes it stored and its type's; -1 unknown. */
int cdyn_dict_hasattr(PyObject *v, PyObject *name);
/* d[key] = val into a dict made in the trace (key, val: values; no side effect). */
tr_status cdyn_dict_set(cdyn_tx *tx, PyObject *d, PyObject *key, PyObject *val);
/* DICT_UPDATE / DICT_MERGE (merge: a duplicate key is left to Python) of other into d. */
tr_status cdyn_dict_update_op(cdyn_tx *tx, PyObject *d, PyObject *other, int merge);
/* **kw of a call: appends kw's values to the list `into`; *names: new tuple of the keys (str)
 * or NULL when kw is empty. */
tr_status cdyn_dict_kwargs(cdyn_tx *tx, PyObject *kw, PyObject *into, PyObject **names);
/* dict(...), OrderedDict(...), defaultdict(...), Counter(...) (type borrowed). */
tr_status cdyn_dict_construct(cdyn_tx *tx, PyTypeObject *type, PyObject *const *args,
                              Py_ssize_t npos, PyObject *kwnames, PyObject **out);
/* dict.copy(v) / dict.popitem(v) (args: after v) on a DICT value whose type overrides them
 * (an OrderedDict, a defaultdict, a Counter): dict's own C method; TR_NOTIMPL when it does
 * not apply. */
tr_status cdyn_dict_base_method(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *const *args,
                                Py_ssize_t nargs, PyObject *kwnames, PyObject **out);
/* type.fromkeys(iterable[, value]). */
tr_status cdyn_dict_fromkeys(cdyn_tx *tx, PyTypeObject *type, PyObject *const *args,
                             Py_ssize_t npos, PyObject *kwnames, PyObject **out);
/* Wrap the entries of a lazy input dict (SEQ_LAZY): DICT_KEYS guard, values through ITEM
 * sources. */
tr_status cdyn_dict_materialize(cdyn_tx *tx, PyObject *v);
/* New SET/FROZENSET of the values in items (a list of values, borrowed), added in order. */
tr_status cdyn_set_build(cdyn_tx *tx, cdyn_vkind kind, PyObject *items, PyObject **out);
/* SET_ADD / SET_UPDATE into a set made in the trace. */
tr_status cdyn_set_add_op(cdyn_tx *tx, PyObject *s, PyObject *item);
tr_status cdyn_set_update_op(cdyn_tx *tx, PyObject *s, PyObject *iterable);
/* set(...) / frozenset(...). */
tr_status cdyn_set_construct(cdyn_tx *tx, cdyn_vkind kind, PyObject *const *args,
                             Py_ssize_t npos, PyObject *kwnames, PyObject **out);
/* Wrap the items of a lazy input set: DICT_KEYS guard on its iteration order. */
tr_status cdyn_set_materialize(cdyn_tx *tx, PyObject *v);
/* A set read without a source (trusted): a SET value of its items, unguarded. */
tr_status cdyn_set_construct_real(cdyn_tx *tx, PyObject *obj, PyObject **out);
/* 1 when obj (a key of an input dict, an item of an input set) is pinned by a DICT_KEYS
 * guard: a constant, an object compared by identity, or a tuple of those. */
int cdyn_pinnable_key(PyObject *obj);
/* 1 when type is exactly dict, OrderedDict, defaultdict or Counter. */
int cdyn_is_dict_type(PyTypeObject *type);

/* Cached Python objects used by the translator (borrowed after init). */
typedef struct {
    PyObject *torch, *torch_tensor_type, *torch_size_type, *torch_dtype_type,
        *torch_device_type, *torch_memory_format_type, *torch_layout_type, *nn_module_type,
        *re_pattern_type, *re_match_type,
        *nn_parameter_type, *fx_graph_type,
        *operator_mod, *builtins_mod, *math_mod, *glue, *getattr_fn, *getitem_fn,
        *setitem_fn, *set_grad_enabled, *saved_hooks_set_tracing, *is_grad_enabled, *no_grad, *enable_grad,
        *set_grad_enabled_cls, *sequential_type, *modulelist_type, *moduledict_type,
        *binop_fns[26], *cmp_fns[6], *neg, *pos, *invert, *not_, *contains,
        *grad_mode_exit_type, *eogb_exit_type, *user_errors, *restart_trace, *enter_autocast, *exit_autocast,
        *autocast_exit_type, *autocast_enter_type, *enter_inference_mode,
        *exit_inference_mode, *inference_mode_type, *inference_exit_type, *inference_enter_type,
        *sdpa_kernel_fn, *sdpa_backend_type, *sdpa_enter, *sdpa_exit, *sdpa_exit_type, *sdpa_enter_type;
    /* interned strings */
    PyObject *s_self, *s_closure, *s_cell_contents, *s_parameters, *s_buffers, *s_modules,
        *s_forward, *s_module, *s_placeholder, *s_create_node, *s_fake_from_tensor,
        *s_fake_call, *s_fake_call_method, *s_set_example, *s_get_attr, *s_forward_hooks,
        *s_forward_pre_hooks, *s_prev, *s_match_args, *s_make, *s_exit, *s_dynamo_forbidden;
} cdyn_tx_globals;
extern cdyn_tx_globals cdyn_G;

/* Dunder `name` of the builtin container type t (list, tuple, dict, set, frozenset, range)
 * applied to the container value self, whatever type self's object has (the items of a
 * subclass's instance read with the base's own slot): `in`, len, subscript, iter, item
 * stores, operators. args borrowed; *out new. TR_NOTIMPL for another t or name. */
tr_status cdyn_v_base_dunder(cdyn_tx *tx, PyObject *self, PyTypeObject *t, PyObject *name,
                             PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                             PyObject **out);
/* tuple.__getitem__ / __len__ on a named-tuple value whose class overrides that slot in
 * Python (values/seq.c): the builtin's own operation, not the override. TR_NOTIMPL
 * otherwise. */
tr_status cdyn_seq_base_dunder(cdyn_tx *tx, PyObject *self, PyObject *name, PyObject *const *args,
                               Py_ssize_t nargs, PyObject **out);

/* The first local variable a tensor made in the trace is stored into names its graph node
 * (node._rename(name), as torch._dynamo's set_name_hint: `a = x * 2` prints as `a = ...`).
 * Later stores keep the name. 0 / -1. */
int cdyn_tensor_name_hint(PyObject *v, PyObject *name);

#endif
