/* guards.h: guards built while tracing and checked in C on every call.
 *
 * A guard set is a flat list of checks on sources (source.h) plus global state. It is
 * owned by one cache entry (cache.h) and freed with it. Kinds, as torch._dynamo names them:
 *   TENSOR_MATCH   Python type, dtype, device, requires_grad, ndim, sizes, strides
 *   EQUALS_MATCH   exact type and == of a Python constant (int, float, bool, str, None,
 *                  tuples of them)
 *   TYPE_MATCH     exact type
 *   ID_MATCH       object identity (modules, nn.Modules, other objects)
 *   FUNCTION_MATCH object identity of a function or Python module (printed as such)
 *   GRAD_MODE      torch.is_grad_enabled() and whether any autocast is on, as at trace time
 *   GLOBAL_STATE   a torch state function called with constants gives what it gave
 *   HASATTR        whether an object has an attribute (hasattr / getattr with a default)
 *   SHAPE_GUARD    a relation between sizes, strides and int inputs produced by torch's
 *                  ShapeEnv (dynamic shapes), evaluated as a small int64 program
 *   SAME_OBJECT    two sources denote the same object (an aliased input, a tensor passed
 *                  twice)
 *   DICT_KEYS      the keys of a dict / items of a set, in iteration order
 *   NN_MODULE      an nn.Module by its exact type (not its identity: one trace serves every
 *                  instance, as torch._dynamo's inline_inbuilt_nn_modules) and whether it
 *                  has its own `forward` or forward/backward hooks, as at trace time
 * Identical (source, kind) pairs are added once. Checks run in insertion order.
 *
 * Dynamic shapes: a TENSOR_MATCH may leave some dims uncompared (symbolic) and store them,
 * with chosen strides / the storage offset, into numbered slots while it checks; a
 * TYPE_MATCH on an int input may store the int. SHAPE_GUARDs, added after them, read only
 * the slots: no Python call on the check path (see cdynamo/_shapes.py for the programs).
 */
#ifndef CDYN_GUARDS_H
#define CDYN_GUARDS_H
#include "cdynamo.h"

typedef struct cdyn_guards cdyn_guards;

/* New empty guard set (owned by the caller; free with cdyn_guards_free), NULL + MemoryError. */
cdyn_guards *cdyn_guards_new(void);
/* Drop the owner's reference (g may be NULL). The set is freed at once, or, when a check,
 * first_failure or describe is running on it (its guards ran Python code that dropped the
 * owner: a reset, another thread), when that call returns. */
void cdyn_guards_free(cdyn_guards *g);

/* Adders. source: borrowed cdyn_source; value/obj: borrowed (the guard keeps what it needs:
 * for ID/FUNCTION_MATCH a strong reference to obj, so ids cannot be reused).
 * Return 0, or -1 with an exception set. */
int cdyn_guards_add_tensor(cdyn_guards *g, PyObject *source, PyObject *tensor);
int cdyn_guards_add_equals(cdyn_guards *g, PyObject *source, PyObject *value);
int cdyn_guards_add_type(cdyn_guards *g, PyObject *source, PyTypeObject *type);
int cdyn_guards_add_id(cdyn_guards *g, PyObject *source, PyObject *obj, int is_function);
/* NN_MODULE: exact type of mod (borrowed) and its state (own forward, hooks) as now. */
int cdyn_guards_add_nn_module(cdyn_guards *g, PyObject *source, PyObject *mod);
/* GRAD_MODE: the global state of cdyn_guards_global_state() (bit 0 grad mode, bit 1 any
 * autocast enabled) as at trace time. */
int cdyn_guards_add_grad_mode(cdyn_guards *g, int state);
/* Note that the trace read a tensor's requires_grad (or another autograd property) or
 * turned grad mode on: a parameter's TENSOR_MATCH skipped by its module dicts' tags then
 * still compares requires_grad. A set whose GRAD_MODE was added with grad mode on has it
 * noted already. */
void cdyn_guards_note_requires_grad(cdyn_guards *g);
/* The device types (a frozenset of str, borrowed; anything else: not known) of every
 * tensor the compiled graph makes: GRAD_MODE then leaves its autocast test to the set's
 * TensorGuards when that checks tensors of each of these types. */
void cdyn_guards_set_graph_devices(cdyn_guards *g, PyObject *types);
/* The current global state for GRAD_MODE; -1 with an exception. */
int cdyn_guards_global_state(void);
/* 1 when tensors are read through cdynamo._tensor_meta (tensor_meta.h), 0 when through
 * torch's Python getters and TensorGuards (not built, or CDYNAMO_TENSOR_META=0). */
int cdyn_guards_tensor_meta_active(void);
/* GLOBAL_STATE: fn(*args) == expected (fn, args: borrowed; a tuple of constants), e.g.
 * torch.get_autocast_dtype('cpu') when the trace read it. */
int cdyn_guards_add_call(cdyn_guards *g, PyObject *fn, PyObject *args, PyObject *expected);
/* 1 when every ID_MATCH / FUNCTION_MATCH of g on a plain local (L['x']) names the object
 * that slot of localsplus (borrowed, a frame's slots at entry) holds now, else 0: the entries
 * that count toward cache_size_limit for that frame, as torch._dynamo's recompile_limit counts
 * only the entries whose id-matched locals are the frame's (a function called with 10 classes
 * or modules in turn keeps compiling; the same object failing other guards does not). */
int cdyn_guards_same_id_locals(const cdyn_guards *g, PyObject *const *localsplus);
/* LENGTH_CHECK: len(value) == n, for tuples, lists and dicts whose items were traced
 * (added by the lead; printed as "<source> LENGTH_CHECK n"). */
int cdyn_guards_add_len(cdyn_guards *g, PyObject *source, Py_ssize_t n);
/* DICT_KEYS: the dict (keys) or set (items) at source iterates exactly the items of the tuple
 * `keys` (borrowed), in order, each of the same type and == (pins constants and objects
 * compared by identity). */
int cdyn_guards_add_keys(cdyn_guards *g, PyObject *source, PyObject *keys);
/* DICT_CONTAINS: (key in the dict at source) == present, key a constant (borrowed); the
 * dict's other keys and its values are not read (printed as "<source> DICT_CONTAINS key
 * present|absent"). */
int cdyn_guards_add_contains(cdyn_guards *g, PyObject *source, PyObject *key, int present);
/* The placeholder of a DICT_KEYS tuple for a key another guard checks (a tensor key, guarded
 * through its entry source); borrowed, NULL + MemoryError. */
PyObject *cdyn_guards_any_key(void);
/* SAME_OBJECT: source evaluates to the very object `other` (a source) evaluates to: one input
 * reached under two names (aliasing) at trace time must stay so. */
int cdyn_guards_add_same(cdyn_guards *g, PyObject *source, PyObject *other);
/* NO_TENSOR_ALIASING: the sources (a tuple of 2+ sources, borrowed; at most 64 are checked)
 * evaluate to pairwise different objects, as the distinct tensor inputs of a trace were
 * (torch._dynamo's guard of that name). */
int cdyn_guards_add_distinct(cdyn_guards *g, PyObject *sources);
/* HASATTR: hasattr(<base of attr_source>, <its name>) == present; attr_source an ATTR
 * source (printed as "<source> HASATTR present|absent"). */
int cdyn_guards_add_hasattr(cdyn_guards *g, PyObject *attr_source, int present);

/* Slot properties (cdynamo/_shapes.py uses the same numbers). */
enum { CDYN_SLOT_SIZE = 0, CDYN_SLOT_STRIDE = 1, CDYN_SLOT_OFFSET = 2, CDYN_SLOT_INT = 3,
       CDYN_SLOT_FLOAT = 4 };

/* The TENSOR_MATCH on source stops comparing the dims whose byte is nonzero in size_mask /
 * stride_mask (bytes of ndim each). 0 / -1 (SystemError when there is no TENSOR_MATCH). */
int cdyn_guards_tensor_dynamic(cdyn_guards *g, PyObject *source, PyObject *size_mask,
                               PyObject *stride_mask);
/* The guard on source (TENSOR_MATCH for CDYN_SLOT_SIZE/STRIDE/OFFSET with dim, TYPE_MATCH
 * for CDYN_SLOT_INT, and for CDYN_SLOT_FLOAT, a float input whose slot holds its double's
 * bits: only fallback callables read it, as a float) stores that value into slot while
 * checking. 0 / -1. */
int cdyn_guards_bind_slot(cdyn_guards *g, PyObject *source, int prop, int dim, int slot);
/* SHAPE_GUARD: code a tuple of int program words (or None: fallback, a callable taking
 * every slot value, is called instead); text the relation over source names; reads a
 * tuple of the slots it reads; slot_names a tuple naming every slot (messages). All
 * borrowed. 0 / -1. */
int cdyn_guards_add_shape(cdyn_guards *g, PyObject *code, PyObject *fallback, PyObject *text,
                          PyObject *reads, PyObject *slot_names);

/* Check every guard against a frame about to run (arguments borrowed, see
 * cdyn_source_eval). Returns 1 when all pass, 0 when one fails, -1 with an exception
 * set only on an internal error (a missing attribute or name is a failure, not an error). */
int cdyn_guards_check(cdyn_guards *g, PyObject *const *localsplus,
                      PyFunctionObject *func, PyObject *globals, PyObject *builtins);

/* New str naming the first failing guard (e.g. "L['a'] TENSOR_MATCH: dtype
 * torch.float32 != torch.float64"), or Py_None (new ref) when all pass; NULL on error. */
PyObject *cdyn_guards_first_failure(cdyn_guards *g, PyObject *const *localsplus,
                                    PyFunctionObject *func, PyObject *globals,
                                    PyObject *builtins);

/* New list of str, one per guard, in the seeds' form: "local 'a' TENSOR_MATCH",
 * "global 'torch' FUNCTION_MATCH", "L['self'].training EQUALS_MATCH True",
 * "GRAD_MODE enabled". NULL on error. */
PyObject *cdyn_guards_describe(cdyn_guards *g);

/* torch.compile's options["guard_filter_fn"]: fn (borrowed) is called once with one
 * torch GuardFilterEntry per guard of g (name, value read from the frame about to run,
 * guard_type, is_global, orig_guard.source's nn.Module tests; cdynamo._glue.guard_filter)
 * and the guards it answers False for are removed, except those that fill the slots of
 * a SHAPE guard it keeps. Only before g's first check. localsplus, func, globals,
 * builtins: borrowed, the frame the guards were built from. 0, or -1 with an exception
 * (the filter's own, unchanged). */
int cdyn_guards_filter(cdyn_guards *g, PyObject *fn, PyObject *const *localsplus,
                       PyFunctionObject *func, PyObject *globals, PyObject *builtins);

/* Number of guards in the set. */
Py_ssize_t cdyn_guards_len(const cdyn_guards *g);

/* Module-level set-up: caches torch.Tensor, torch.is_grad_enabled and attribute names.
 * Called once from module init after torch is importable; 0 or -1. */
int cdyn_guards_init(void);

#endif
