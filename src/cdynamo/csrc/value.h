/* value.h: symbolic values of the translator and the handler tables that give each family
 * of values its behaviour (the C shape of CPython's type slots).
 *
 * Every slot of the symbolic stack and of the symbolic locals holds a value: a Python
 * object of type cdynamo._C.Value, so ownership is ordinary reference counting. A value
 * has a family (vt, a const table of handlers, one table per family, each family in its
 * own file under values/), a precise kind inside the family, an optional source (where it
 * came from in the frame, source.h) and a payload whose layout the family defines (the
 * union below; every payload is made of at most CDYN_VREFS strong-or-NULL references, so
 * the generic dealloc releases them without knowing the family).
 *
 * The opcode handlers (translate.c) never switch on kinds: they call the cdyn_v_* entry
 * points below, which call through the value's table; a missing handler means "not
 * supported here" (a graph break at that instruction, or a failed inlining).
 *
 *   family        file                kinds        payload
 *   misc          values/misc.c       NULL         -                  the NULL of the call protocol
 *                                     PYMODULE     u.obj.obj          a Python module
 *                                     CELL         u.cell             a closure cell
 *                                     OPAQUE       u.obj.obj          a callable we cannot trace
 *   constants     values/constant.c   CONST        u.cnst.value       int, float, bool, str, None, bytes,
 *                                                                     complex, slice, range, tuple of constants,
 *                                                                     torch.Size/dtype/device, code objects
 *   tensors       values/tensor.c     TENSOR       u.tensor           fake tensor (example value) + fx.Node
 *   sequences     values/seq.c        TUPLE, LIST  u.seq              items: list of values (named tuple
 *                                                                     type in nt_type); lazy input containers
 *   dicts         values/dict.c       DICT         u.dict             hashable keys -> values (dict,
 *                                                                     OrderedDict, defaultdict, Counter)
 *                                     DICTVIEW     u.view             a live keys()/values()/items() view
 *   sets          values/set.c        SET          u.set              set / frozenset: hashable items
 *                                     FROZENSET    u.set
 *   functions     values/function.c   FUNCTION     u.func             made by MAKE_FUNCTION in the trace
 *                                     USERFN       u.obj.obj          a real Python function (inlined)
 *                                     METHOD       u.method           a method bound to a value
 *   builtins      values/builtin.c    BUILTIN      u.obj.obj          builtins, math/operator functions,
 *                                                                     builtin types (handler table by identity)
 *   torch         values/torch.c      TORCHFN      u.obj.obj          torch callables put into the graph
 *   user objects  values/user.c       CLASS        u.obj.obj          a class (not a builtin type)
 *                                     OBJECT       u.obj.obj          any other object (opaque, type-guarded);
 *                                                  (u.dobj)           a ModelOutput's items mirrored
 *                                     SUPER        u.super            super(cls, self): the class and self value
 *                                     NEWOBJ       u.uobj             an object made while tracing (values/newobj.c)
 *                                     OBJFN        u.ofn              a builtin slot function of object/dict/tuple
 *                                                                     or a dataclasses helper, maybe bound to self
 *   nn.Modules    values/nnmodule.c   NNMODULE     u.obj.obj
 *   iterators     values/iter.c       ITER         u.iter (+ pos)     the items, and the next position
 *   contexts      values/ctx.c        GRADCTX      -                  a grad-mode context manager (bits)
 *                                     GRADEXIT     -                  the __exit__ restoring a grad mode
 *                                     AUTOCAST     u.amp.args         torch.autocast(...) (its 4 arguments),
 *                                                                     torch.inference_mode(m)
 *                                     AUTOCAST_EXIT u.amp             the __exit__ of an entered autocast
 *                                     NULLCTX      u.nullctx          contextlib.nullcontext(enter_result)
 *   symbolic      values/symint.c     SYMINT       u.sym              a SymInt/SymFloat/SymBool (example value)
 *   scalars                                                           + the FX node computing it
 *                                     SYMSLICE     u.slice.parts      slice(a, b, c) with a symbolic bound
 *   exceptions    values/exception.c  EXCTYPE      u.obj.obj          an exception class
 *                                     EXC          u.exc              an exception made in the trace
 *   higher-order  values/hop.c        HOP          u.obj.obj          torch.cond, checkpoint, Function.apply,
 *   ops           values/autograd_fn.c                                 torch.func transforms (bits: HOP_*)
 *                                     SUBGRAPH     u.sub              a body traced into its own GraphModule
 *                                     FNCTX        u.fnctx            the ctx of a traced autograd.Function
 *   numpy         values/ndarray.c    NDARRAY      u.tensor           a numpy.ndarray: the tensor backing it
 *                                                                     (fake + node), traced via torch._numpy
 *                                     NPFN         u.obj.obj          a numpy callable traced via torch._numpy
 *   deques        values/deque.c      DEQUE        u.deque            collections.deque: a LIST of the items
 *                                                                     and the maxlen
 *   proxies       values/mproxy.c     MPROXY       u.mproxy           types.MappingProxyType(d) made in the
 *                                                                     trace: a read-only view of a DICT
 *   generators    values/generator.c  GENERATOR    u.gen              a suspended frame state of a generator
 *                                                                     function (inlined, resumed by next())
 *   functions     values/function.c   PARTIAL      u.partial          functools.partial(func, *args, **kw)
 *                                     WRAPPER      u.obj.obj          a functools.lru_cache/cache wrapper:
 *                                                                     calls inline its __wrapped__
 */
#ifndef CDYN_VALUE_H
#define CDYN_VALUE_H
#include "cdynamo.h"

/* Result of a translator step. Unsupported code is not an error: it sets tx->reason and
 * becomes a graph break or makes the frame run unmodified. TR_NOTIMPL is only returned by
 * binop/compare handlers to let the other operand's family try (as NotImplemented).
 * TR_EXCEPTION: the traced program raised an exception (values/exception.c). */
typedef enum {
    TR_OK = 0,
    TR_UNSUPPORTED = 1,
    TR_BREAK = 2,
    TR_NOTIMPL = 3,     /* binop/compare: let the other operand's family try */
    TR_EXCEPTION = 4,   /* the traced code raised tx->exc (translate.c unwinds it) */
    TR_ERROR = -1
} tr_status;

typedef enum {
    VK_NULL, VK_PYMODULE, VK_CELL, VK_OPAQUE,
    VK_CONST,
    VK_TENSOR,
    VK_TUPLE, VK_LIST,
    VK_DICT, VK_DICTVIEW,
    VK_FUNCTION, VK_USERFN, VK_METHOD,
    VK_BUILTIN,
    VK_TORCHFN,
    VK_CLASS, VK_OBJECT, VK_SUPER,
    VK_NNMODULE,
    VK_ITER,
    VK_GRADCTX, VK_GRADEXIT, VK_GRADFN,
    VK_HOP, VK_SUBGRAPH, VK_FNCTX,
    VK_AUTOCAST, VK_AUTOCAST_EXIT, VK_NULLCTX,
    VK_SYMINT, VK_SYMSLICE,
    VK_EXCTYPE, VK_EXC,
    VK_GENERATOR,
    VK_PARTIAL, VK_WRAPPER,
    VK_NEWOBJ, VK_OBJFN,
    VK_SET, VK_FROZENSET,
    VK_NDARRAY, VK_NPFN,
    VK_DEQUE,
    VK_MPROXY,
    VK__COUNT
} cdyn_vkind;

struct cdyn_tx;
struct cdyn_fs;
struct cdyn_cg;

#define CDYN_VREFS 7

typedef struct cdyn_value {
    PyObject_HEAD
    const struct cdyn_vtable *vt;   /* the family's handlers (never NULL) */
    cdyn_vkind kind;
    unsigned int bits;              /* family flags (see each family's header section) */
    Py_ssize_t pos;                 /* ITER: next position */
    long long serial;               /* creation order, for rollback checks */
    long long undo_epoch;           /* the checkpoint whose undo log holds its state (undo.c) */
    PyObject *source;               /* strong cdyn_source or NULL */
    union {
        PyObject *ref[CDYN_VREFS];  /* generic view of the payload (dealloc) */
        struct { PyObject *value; } cnst;
        /* type: the exact type of a tensor input that is not a plain torch.Tensor (an
           nn.Parameter, a subclass; TENSOR_MATCH guards it), NULL for torch.Tensor;
           attrs: a tensor made in the trace, the attributes stored on it there (a dict
           name -> value, replaced, never changed in place, on each store), or NULL */
        struct { PyObject *fake, *node, *type, *attrs; } tensor;
        /* items: list of values, NULL while lazy; real: the input container while lazy */
        struct { PyObject *items, *nt_type, *real; } seq;
        /* keys: list of hash keys (a constant key is its own hash key, see values/dict.c);
           vals: list of values (same order); real: the input dict while lazy; type: the
           real type (NULL: dict); factory: a defaultdict's default_factory value (NULL:
           None); keyvals: NULL while every key is a constant, else a list parallel to keys
           holding each key's value (None for constant keys); attrs: a plain DICT value of
           the instance attributes stored by the trace on an OrderedDict/Counter made in it
           (nn.Module.state_dict()'s `destination._metadata`), NULL when none */
        struct { PyObject *keys, *vals, *real, *type, *factory, *keyvals, *attrs; } dict;
        /* order: a real set of the items' hash keys, mirroring the real set's iteration
           order; map: dict hash key -> item value; real: the input set while lazy */
        struct { PyObject *order, *map, *real; } set;
        /* list: the LIST value holding the items (no source); maxlen: an int CONST, NULL
           for None */
        struct { PyObject *list, *maxlen; } deque;
        /* dict: the DICT value a types.MappingProxyType made in the trace shows */
        struct { PyObject *dict; } mproxy;
        struct { PyObject *obj; } obj;
        /* OBJECT of a dict subclass read from the frame (transformers' ModelOutput): obj as
           u.obj.obj; items: a DICT value mirroring its items once the trace read them
           (DICT_MIRROR), kept in step with the item stores replayed on it, or NULL */
        struct { PyObject *obj, *items; } dobj;
        struct { PyObject *obj, *self; } super;   /* the class (real type), self value */
        /* func: the real function to inline with self (or NULL: call self's method name);
           name: the method name (str); self: the value bound */
        struct { PyObject *func, *name, *self; } method;
        /* items: list of values; type: the type of the real iterator it stands for (NULL:
           a tuple iterator), for isinstance/type(); rest: for a tuple iterator of the frame
           (it has a source), the real tuple of the items it had left at trace time, which
           `items` takes lazily, each guarded when taken (values/iter.c); else NULL */
        struct { PyObject *items, *type, *rest; } iter;
        struct { PyObject *dict; } view;           /* the DICT value; bits: VIEW_* */
        /* args: (device_type, dtype, enabled, cache_enabled), (mode,) for
           torch.inference_mode (AMP_INFERENCE), (backend names, set_priority) for
           sdpa_kernel (AMP_SDPA); node: the enter node; mode: the entry of
           tx->open_modes for the block entered at trace time */
        struct { PyObject *args, *node, *mode; } amp;
        struct { PyObject *enter_result; } nullctx; /* a value */
        /* type: the class; args: list of argument values; context / cause: the EXC values
           of __context__ / __cause__ or NULL (None); bits: EXC_SUPPRESS */
        struct { PyObject *type, *args, *context, *cause; } exc;
        /* fn: the function value a grad-mode context decorated (torch.no_grad()(f));
           bits: GRAD_MODE_ON, the mode its calls run in */
        struct { PyObject *fn; } gradfn;
        /* real: the real cell (a closure of the top frame or of a real function) or NULL
           for a cell made in the trace; contents: the value, NULL while empty / unread;
           csrc: the source its contents are read (and guarded) through, or NULL (not
           guarded). A CELL with a real cell has a source: the cell object itself (CELL[x],
           f.__closure__[i], or a constant), one value per real cell in a trace */
        struct { PyObject *real, *contents, *csrc; } cell;
        /* code, globals dict, parts: list [defaults tuple value or None, closure tuple
           value or None, kwdefaults dict value or None], gsource: source of the globals
           of another module or None; attrs: a DICT value of the attributes the trace
           stored on it (f.__wrapped__ = g, functools.wraps' __name__...), or NULL */
        struct { PyObject *code, *globals, *parts, *gsource, *attrs; } func;
        /* frame: capsule owning the generator's cdyn_fs; buffer: list of values drained
           ahead (collect) and not consumed yet, from index pos, or NULL; ptype: the real
           type it stands for (map, filter, ... for a polyfill's generator) or NULL; retval:
           the return value once exhausted (yield from) */
        struct { PyObject *frame, *buffer, *ptype, *retval; } gen;
        /* func: the callable value; args: list of values; kwkeys: list of str; kwvals:
           list of values (same order) */
        struct { PyObject *func, *args, *kwkeys, *kwvals; } partial;
        /* cls: the CLASS value of its type; attrs: a DICT value, its __dict__ (and slots);
           base: the DICT / LIST / SET / FROZENSET / TUPLE value holding the items of a
           subclass of that builtin (values/newobj.c), or NULL */
        struct { PyObject *cls, *attrs, *base; } uobj;
        /* fn: the real slot function / helper; self: the value it is bound to, or NULL */
        struct { PyObject *fn, *self; } ofn;
        /* fake: the SymInt / SymFloat / SymBool; node: the FX node computing it */
        struct { PyObject *fake, *node; } sym;
        struct { PyObject *parts; } slice;        /* list of 3 values (start, stop, step) */
        /* gm: the GraphModule registered on the enclosing graph's root; node: its get_attr */
        struct { PyObject *gm, *node; } sub;
        /* attrs: dict name -> value stored on ctx; saved: list of values (save_for_backward)
           or NULL; needs: tuple of bools (needs_input_grad); nondiff: list of values marked
           non-differentiable */
        struct { PyObject *attrs, *saved, *needs, *nondiff; } fnctx;
    } u;
} cdyn_value;

/* Family flags (bits). */
#define SEQ_LAZY        0x1u   /* TUPLE/LIST/DICT: an input container, items not read yet */
#define SEQ_APPENDED    0x2u   /* ... and appends were replayed on it (the values wait in items) */
#define SEQ_SYNCED      0x4u   /* LIST/DICT/SET with a source: mutated while tracing; its whole
                                  contents are written back (EFF_SYNC, vtable writeback) */
#define SET_INEXACT     0x8u   /* SET/FROZENSET: derived from an input set, so the mirror of
                                  hash keys may iterate in another order than the real set */
#define DICT_MIRROR     0x10u  /* DICT with a source: the items of the dict-subclass object at
                                  that source (u.dobj.items of its OBJECT), changed only with
                                  the slot calls replayed on the object (never written back);
                                  rebuilt as the object itself (its views are the object's) */
#define DICT_BY_POSITION 0x20u /* DICT with a source whose keys are not guarded (an nn.Module
                                  hook registry read by position, values/nnmodule.c): the
                                  trace may not change it (cdyn_container_mutating refuses) */
#define DICT_REORDERED  0x40u  /* DICT (an OrderedDict made in the trace): move_to_end ran on
                                  it, so its order may differ from its underlying dict's (the
                                  entry dict.popitem would pop) */
#define DICT_VISITING   0x80u  /* DICT: its stored attributes being collected (an attribute
                                  that refers back to it: values/dict.c) */
#define OBJ_MUTATED     0x1u   /* OBJECT/NNMODULE: stored into while tracing */
#define OBJ_TRUSTED     0x2u   /* OBJECT without source whose attributes are fixed metadata
                                  (dataclass fields): read unguarded */
#define UOBJ_VISITING   0x4u   /* NEWOBJ: being collected (cycles) */
#define OBJ_ITEMS_MUTATED 0x8u /* OBJECT of a dict subclass: its items stored into while
                                  tracing (builtin dict slots, replayed): not read back */
#define OBJ_ATTRS_STORED 0x10u /* OBJECT: attributes stored or deleted through the generic
                                  protocol; a custom __getattribute__ is then inlined */
#define OBJ_KEYS_GUARDED 0x20u /* OBJECT (a mappingproxy): its keys DICT_KEYS-guarded */
#define TENSOR_INFERENCE 0x1u  /* TENSOR: a graph input that is an inference tensor (made
                                  under torch.inference_mode; TENSOR_MATCH compares the
                                  dispatch keys, which tell it) */
#define TENSOR_NAMED    0x2u   /* TENSOR: its graph node was renamed after the first local it
                                  was stored into (cdyn_tensor_name_hint) */
#define FUNC_TOP_GLOBALS 0x1u  /* FUNCTION: its globals are the top frame's */
#define FUNC_VISITING   0x4u   /* FUNCTION: being collected (a closure that holds the
                                  function itself: `def f(): return f`) */
#define GRAD_MODE_ON    0x1u   /* GRADCTX: the mode it sets; GRADEXIT: the mode it restores */
#define GRAD_APPLIED    0x2u   /* GRADCTX: set_grad_enabled(m) already applied the mode ... */
#define SYM_NUMPY       0x1u   /* SYMINT: stands for a numpy scalar (np.int64, np.float64,
                                   np.bool_ by its kind) derived from a numpy scalar input */
#define AMP_REENTER     0x1u   /* AUTOCAST: a resume function's AutocastEnter, entered by a
                                   call with no arguments (values/ctx.c) */
#define AMP_INFERENCE   0x2u   /* AUTOCAST, AUTOCAST_EXIT: torch.inference_mode's family */
#define AMP_SDPA        0x4u   /* AUTOCAST, AUTOCAST_EXIT: torch.nn.attention.sdpa_kernel's */
#define AMP_FAMILY      (AMP_INFERENCE | AMP_SDPA)
#define NULLCTX_EXIT    0x1u   /* NULLCTX: the __exit__ of an entered nullcontext */
#define NULLCTX_PROFILER 0x2u  /* NULLCTX: torch.profiler.profile() / record_function(...),
                                   ignored as torch._dynamo does; entering gives itself */
#define GRAD_PREV_ON    0x4u   /* ... and the mode before it was on */
#define GRAD_ENTERED    0x10u  /* GRADCTX: its __enter__() was called directly ... */
#define GRAD_EXIT_ON    0x20u  /* ... and its __exit__() sets grad mode on */
#define NULLCTX_TF_OFF  0x8u   /* NULLCTX: torch._C.DisableTorchFunctionSubclass() (or
                                   DisableTorchFunction()): no graph node, tensor subclasses'
                                   __torch_function__ not dispatched inside; never rebuilt */
#define NULLCTX_EOGB    0x40u  /* NULLCTX: torch._dynamo.error_on_graph_break(flag): no graph
                                   node; sets tx->eogb for the block (and its exit restores) */
#define NULLCTX_EOGB_ON 0x80u  /* ... with flag True */
#define NULLCTX_EOGB_PREV_SHIFT 8 /* NULLCTX_EOGB exit: tx->eogb before the block (2 bits) */
#define VIEW_KEYS       0x0u   /* DICTVIEW: which view */
#define VIEW_VALUES     0x1u
#define VIEW_ITEMS      0x2u
#define GEN_RUNNING     0x1u   /* GENERATOR: its frame is being interpreted */
#define GEN_DONE        0x2u   /* ... returned (or drained into the buffer) */
#define GEN_BROKEN      0x4u   /* ... failed while running: its state is unusable */
#define GEN_IN_TRY      0x8u   /* ... suspended at a yield inside a try/with block */
#define GEN_FRESH       0x10u  /* ... drained ahead before it was ever resumed (rebuilt unstarted) */
#define EXC_SUPPRESS    0x1u   /* EXC: __suppress_context__ (set by `raise .. from ..`) */
#define CELL_TOP        0x1u   /* CELL: made by MAKE_CELL in the top frame, for slot `pos` */
#define CELL_STORED     0x2u   /* CELL with a real cell: stored into while tracing; the real
                                  cell gets the final contents (EFF_SYNC, misc.c writeback) */
#define FUNC_CODE_GUARDED 0x2u /* USERFN: guarded by __code__ (not identity); an identity
                                  test pins it with ID_MATCH first (cdyn_v_pin_identity) */
#define MOD_BY_TYPE     0x4u   /* NNMODULE: guarded by type (NN_MODULE), not identity; an
                                  identity test pins it with ID_MATCH (cdyn_v_pin_identity) */

typedef tr_status (*cdyn_call_fn)(struct cdyn_tx *tx, struct cdyn_fs *fs, PyObject *fn,
                                  PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                                  PyObject **out);

/* The handler table of a family. Every handler may be NULL ("not supported"). Arguments
 * that are values are borrowed; *out receives a new reference on TR_OK. A handler that
 * returns TR_UNSUPPORTED has changed nothing (no graph node kept, no value mutated), so the
 * instruction can become a graph break. */
typedef struct cdyn_vtable {
    const char *name;   /* family name for logs, e.g. "TensorVariable" */
    tr_status (*getattr)(struct cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out);
    tr_status (*setattr)(struct cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value);
    cdyn_call_fn call;
    tr_status (*call_method)(struct cdyn_tx *tx, struct cdyn_fs *fs, PyObject *self,
                             PyObject *name, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames, PyObject **out);
    tr_status (*truth)(struct cdyn_tx *tx, PyObject *v, int *out);
    /* every item, in iteration order, as a new list of values (iterators are consumed) */
    tr_status (*unpack)(struct cdyn_tx *tx, PyObject *v, PyObject **out_list);
    tr_status (*subscr)(struct cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out);
    /* v[key] answered before v is materialized (cdyn_tx_materialize), guarding only what it
       reads (an input dict read by one key); TR_NOTIMPL: not such a read, materialize */
    tr_status (*subscr_lazy)(struct cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out);
    tr_status (*store_subscr)(struct cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value);
    /* v[key] = value done before v is materialized, reading nothing of it (a store into an
       input dict, replayed); TR_NOTIMPL: materialize, then store_subscr */
    tr_status (*store_subscr_lazy)(struct cdyn_tx *tx, PyObject *v, PyObject *key,
                                   PyObject *value);
    tr_status (*delete_subscr)(struct cdyn_tx *tx, PyObject *v, PyObject *key);
    tr_status (*contains)(struct cdyn_tx *tx, PyObject *v, PyObject *item, int *out);
    /* item in v answered before v is materialized, guarding only that (a constant key of an
       input dict); TR_NOTIMPL: materialize, then contains */
    tr_status (*contains_lazy)(struct cdyn_tx *tx, PyObject *v, PyObject *item, int *out);
    /* op: BINARY_OP oparg (0..25, in-place forms >= 13); compare op: Py_LT..Py_GE. Either
       operand may be of this family; TR_NOTIMPL passes to the other operand's family. */
    tr_status (*binop)(struct cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out);
    tr_status (*compare)(struct cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out);
    /* opcode: UNARY_NEGATIVE, UNARY_POSITIVE, UNARY_INVERT (UNARY_NOT goes through truth) */
    tr_status (*unary)(struct cdyn_tx *tx, int opcode, PyObject *v, PyObject **out);
    tr_status (*len)(struct cdyn_tx *tx, PyObject *v, Py_ssize_t *out);
    /* FOR_ITER / next(): *out the next item (new), or NULL when exhausted */
    tr_status (*next)(struct cdyn_tx *tx, PyObject *v, PyObject **out);
    /* GET_ITER / iter() decided by the family (a user object: its __iter__ inlined), *out
       new; NULL or TR_NOTIMPL: an iterator is itself, any other value's items unpacked */
    tr_status (*iter)(struct cdyn_tx *tx, PyObject *v, PyObject **out);
    /* 1 when v is an iterator (next() applies to it); NULL: every value of a family with
       `next` is one */
    int (*is_iterator)(PyObject *v);
    /* BEFORE_WITH: *exit_fn the value the block's end calls with three Nones, *result the
       value of __enter__ (both new) */
    tr_status (*enter)(struct cdyn_tx *tx, PyObject *v, PyObject **exit_fn, PyObject **result);
    /* (fake object, FX node argument) for a torch call's argument list; both new refs */
    tr_status (*graph_arg)(struct cdyn_tx *tx, PyObject *v, PyObject **fake, PyObject **node);
    /* the real type of the value (borrowed), or NULL when it cannot be known */
    PyTypeObject *(*python_type)(PyObject *v);
    /* code generation (codegen.h): gather the graph outputs needed to rebuild v into real
       objects, then emit bytecode that pushes it */
    tr_status (*collect)(struct cdyn_tx *tx, struct cdyn_cg *cg, PyObject *v);
    int (*reconstruct)(struct cdyn_cg *cg, PyObject *v);
    /* a mutated input container (SEQ_SYNCED): emit bytecode that makes the real object
       (loaded through its source) hold v's current contents (collect gathered them) */
    int (*writeback)(struct cdyn_cg *cg, PyObject *v);
    /* a new real object equal to v when v is made of constants only (a list, set, dict of
       constants), to fold a pure builtin on it; NULL (no exception) otherwise */
    PyObject *(*as_constant)(PyObject *v);
    /* undo of a failed step (undo.c): the family's mutable state of v beyond its payload
       references, bits and pos (which the log keeps anyway) as a new object made of fresh
       tuples/lists/dicts/sets whose leaves are the references it keeps (NULL + exception
       on error), and putting it back (0 / -1); NULL handlers: the references are the
       whole state */
    PyObject *(*save)(PyObject *v);
    int (*restore)(PyObject *v, PyObject *saved);
} cdyn_vtable;

/* The families' tables (values/<family>.c). */
extern const cdyn_vtable cdyn_misc_vt, cdyn_const_vt, cdyn_tensor_vt, cdyn_seq_vt,
    cdyn_dict_vt, cdyn_function_vt, cdyn_builtin_vt, cdyn_torch_vt, cdyn_user_vt,
    cdyn_nnmodule_vt, cdyn_iter_vt, cdyn_ctx_vt, cdyn_symint_vt, cdyn_exc_vt,
    cdyn_generator_vt, cdyn_set_vt, cdyn_hop_vt;
extern const cdyn_vtable cdyn_ndarray_vt, cdyn_npfn_vt, cdyn_deque_vt, cdyn_mproxy_vt;

/* Serial number the next value will get (increases monotonically). */
extern long long cdyn_value_serial;

extern PyTypeObject cdyn_ValueType;
#define V(o) ((cdyn_value *)(o))
#define cdyn_Value_Check(o) (Py_TYPE(o) == &cdyn_ValueType)

/* New value of kind with its family table, an empty payload and the source (borrowed, may
 * be NULL). Returns a new reference or NULL + MemoryError. Families fill the payload. */
PyObject *cdyn_value_alloc(cdyn_vkind kind, PyObject *source);
/* New value whose payload slot 0 is obj (borrowed, may be NULL): CONST, PYMODULE, OPAQUE,
 * USERFN, BUILTIN, TORCHFN, CLASS, OBJECT, NNMODULE. */
PyObject *cdyn_value_obj(cdyn_vkind kind, PyObject *obj, PyObject *source);
/* New CONST of obj (borrowed) / whose reference is stolen (NULL passes NULL through). */
PyObject *cdyn_value_const(PyObject *obj);
PyObject *cdyn_value_const_steal(PyObject *obj);
/* New CONST True/False. */
PyObject *cdyn_value_bool(int b);
/* New TUPLE or LIST over `items` (a list of values, borrowed; the value keeps it, so the
 * caller must not reuse it) / over a fresh list holding the n values of vals (borrowed). */
PyObject *cdyn_value_seq_list(cdyn_vkind kind, PyObject *items);
PyObject *cdyn_value_seq(cdyn_vkind kind, PyObject *const *vals, Py_ssize_t n);
/* New DICT over keys (list of constant real keys) and vals (list of values); borrowed. */
PyObject *cdyn_value_dict(PyObject *keys, PyObject *vals);
/* New ITER over items (list of values, borrowed). */
PyObject *cdyn_value_iter(PyObject *items);
/* New ITER over items standing for an iterator of type `type` (borrowed, may be NULL). */
PyObject *cdyn_value_iter_typed(PyObject *items, PyTypeObject *type);
/* New TENSOR of fake (example value) and node (borrowed), source may be NULL. */
PyObject *cdyn_value_tensor(PyObject *fake, PyObject *node, PyObject *source);
/* New METHOD: func (borrowed real function to inline, or NULL), name (borrowed str), self
 * (borrowed value). */
PyObject *cdyn_value_method(PyObject *func, PyObject *name, PyObject *self);
/* The shared NULL value (new reference). */
PyObject *cdyn_value_null(void);

/* obj.name of the real object obj that value v stands for (a function, a slot function),
 * read now, as a CONST in *out when it is a constant (__name__, __qualname__, __doc__);
 * else unsupported, naming v. */
tr_status cdyn_constant_attr(struct cdyn_tx *tx, PyObject *v, PyObject *obj, PyObject *name,
                             PyObject **out);

/* Readable short form for logs, e.g. "TensorVariable(add)", "ConstantVariable(3)". New ref. */
PyObject *cdyn_value_repr(PyObject *v);

/* 1 when the value is the constant None. */
static inline int
cdyn_v_is_none(PyObject *v)
{
    return V(v)->kind == VK_CONST && V(v)->u.cnst.value == Py_None;
}

/* A 0-d integer tensor value the trace made from constants only (torch.as_tensor(2): its
 * fake tensor carries the constant) as the CONST value of its int (new reference), so that
 * it indexes a list, tuple or str as eager's __index__ does; NULL without an exception for
 * any other value (values/tensor.c). */
PyObject *cdyn_tensor_constant_index(PyObject *key);

/* The real object a value stands for when it is known exactly (constants and values of
 * real objects: modules, functions, classes, objects); borrowed, or NULL. */
PyObject *cdyn_v_real(PyObject *v);

/* 1 when name is __iter__, __len__, __contains__ or __getitem__ of an exact builtin container
 * type t (list, tuple, dict, set, frozenset, range): cdyn_v_call_method of that name on a
 * value of t is the operation (iter(v), len(v), x in v, v[k]), also for a constant whose
 * method-wrapper would not fold (a range_iterator is no constant). */
int cdyn_container_dunder(PyTypeObject *t, PyObject *name);

/* ---- dispatch: the opcode handlers' entry points --------------------------------------
 * Each calls the value's handler; a missing handler sets the reason "<what> on <value>"
 * and returns TR_UNSUPPORTED. Arguments borrowed, *out new. */
/* 1 when t is one of the exact builtin types whose binary operators decide NotImplemented
 * from the operand types alone (dict.__or__ takes dicts, list.__add__ lists, int.__add__
 * ints, ...; None, bool, float, complex, str, bytes, tuple, set, frozenset too). */
int cdyn_type_decides_operators(PyTypeObject *t);
tr_status cdyn_v_getattr(struct cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out);
tr_status cdyn_v_setattr(struct cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value);
tr_status cdyn_v_call(struct cdyn_tx *tx, struct cdyn_fs *fs, PyObject *fn,
                      PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                      PyObject **out);
tr_status cdyn_v_call_method(struct cdyn_tx *tx, struct cdyn_fs *fs, PyObject *self,
                             PyObject *name, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames, PyObject **out);
tr_status cdyn_v_truth(struct cdyn_tx *tx, PyObject *v, int *out);
tr_status cdyn_v_unpack(struct cdyn_tx *tx, PyObject *v, PyObject **out_list);
/* GET_ITER / iter(): an iterator value (ITER values are their own iterator). */
tr_status cdyn_v_iter(struct cdyn_tx *tx, PyObject *v, PyObject **out);
tr_status cdyn_v_subscr(struct cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out);
tr_status cdyn_v_store_subscr(struct cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value);
tr_status cdyn_v_delete_subscr(struct cdyn_tx *tx, PyObject *v, PyObject *key);
/* `item in container`: 0/1 in *out. */
tr_status cdyn_v_contains(struct cdyn_tx *tx, PyObject *container, PyObject *item, int *out);
tr_status cdyn_v_binop(struct cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out);
/* The BINARY_OP oparg of a binary dunder name (__or__ 7, __ior__ 20, ...) / the COMPARE_OP
 * of a comparison dunder (__lt__ Py_LT, ...), or -1. */
int cdyn_dunder_binop(PyObject *name);
/* The dunder name of BINARY_OP op (new str): __add__, __radd__ (reflected), __iadd__ (op >= 13). */
PyObject *cdyn_binop_dunder_name(int op, int reflected);
int cdyn_dunder_compare(PyObject *name);
tr_status cdyn_v_compare(struct cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out);
tr_status cdyn_v_unary(struct cdyn_tx *tx, int opcode, PyObject *v, PyObject **out);
/* `a is b`: 0/1 in *out (decided by kinds and identities; unsupported when undecidable). */
tr_status cdyn_v_is(struct cdyn_tx *tx, PyObject *a, PyObject *b, int *out);
tr_status cdyn_v_len(struct cdyn_tx *tx, PyObject *v, Py_ssize_t *out);
tr_status cdyn_v_next(struct cdyn_tx *tx, PyObject *v, PyObject **out);
/* 1 when v is an iterator value (next() applies; iteration consumes it). */
int cdyn_v_is_iterator(PyObject *v);
tr_status cdyn_v_enter(struct cdyn_tx *tx, PyObject *v, PyObject **exit_fn, PyObject **result);
tr_status cdyn_v_graph_arg(struct cdyn_tx *tx, PyObject *v, PyObject **fake, PyObject **node);
/* Borrowed type or NULL (no exception) when unknown. */
PyTypeObject *cdyn_v_python_type(PyObject *v);
/* The identity of v is about to decide something (`is`, ==): a function guarded by its code
 * only gets an ID_MATCH on its source first. TR_OK / TR_ERROR. */
tr_status cdyn_v_pin_identity(struct cdyn_tx *tx, PyObject *v);
/* A real object standing for v: a constant's value (new ref), or the family's as_constant;
 * NULL without an exception when v is not made of constants only. */
PyObject *cdyn_v_as_constant(PyObject *v);
/* The real object v stands for as an argument of a type subscript (list[int], Dict[str, V],
 * Callable[[int], V]): cdyn_v_real (new reference), a tuple / list of such objects for a
 * TUPLE / LIST value, else cdyn_v_as_constant; NULL (an exception only on a real failure)
 * when some part is not known exactly. */
PyObject *cdyn_v_real_arg(PyObject *v);

int cdyn_value_init(PyObject *module);

#endif
