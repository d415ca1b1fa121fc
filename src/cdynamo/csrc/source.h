/* source.h: access paths ("sources") from a frame to a value.
 *
 * A source names where a traced value came from, e.g. L['x'], G['torch'],
 * L['self'].linear, L['xs'][0], C['scale'] (closure cell contents). One abstraction serves
 * both guards (evaluate the path on every call) and code generation (emit bytecode that
 * loads the value). Sources are immutable Python objects of type cdynamo._C.Source, so they
 * are shared and reference counted like any PyObject.
 */
#ifndef CDYN_SOURCE_H
#define CDYN_SOURCE_H
#include "cdynamo.h"

typedef enum {
    CDYN_SRC_LOCAL = 0,   /* f->localsplus[index]; name = the variable name */
    CDYN_SRC_GLOBAL,      /* f_globals[name], then f_builtins[name] */
    CDYN_SRC_CLOSURE,     /* f_func->func_closure[index].cell_contents; name = free var name */
    CDYN_SRC_ATTR,        /* getattr(base, name) */
    CDYN_SRC_ITEM,        /* base[key]; key (hashable, usually an int or str) held in name */
    CDYN_SRC_CONST,       /* a fixed object held in name (e.g. the globals dict of another
                             module, for globals read by inlined functions); repr given */
    CDYN_SRC_CALL,        /* name(base): a fixed callable held in name applied to the value of
                             base (a numpy input array seen as a tensor); repr given */
    CDYN_SRC_ENTRY,       /* the index-th key (name 0) or value (name 1) of the dict base, in
                             iteration order: list(base.keys())[index] (a tensor used as a key
                             has no other path) */
} cdyn_source_kind;

typedef struct cdyn_source {
    PyObject_HEAD
    cdyn_source_kind kind;
    int index;                  /* LOCAL, CLOSURE: slot index; -1 otherwise */
    PyObject *name;             /* strong; see cdyn_source_kind */
    struct cdyn_source *base;   /* strong; ATTR and ITEM only, else NULL */
    PyObject *repr;             /* strong; cached readable form, e.g. "L['self'].linear" */
} cdyn_source;

extern PyTypeObject cdyn_SourceType;
#define cdyn_Source_Check(o) (Py_TYPE(o) == &cdyn_SourceType)

/* Constructors. name/key/base are borrowed (the source takes its own references).
 * All return a new reference, or NULL with an exception set. */
PyObject *cdyn_source_local(int index, PyObject *name);
PyObject *cdyn_source_global(PyObject *name);
PyObject *cdyn_source_closure(int index, PyObject *name);
PyObject *cdyn_source_attr(PyObject *base, PyObject *name);
PyObject *cdyn_source_item(PyObject *base, PyObject *key);
/* The index-th key (value=0) or value (value=1) of the dict at base, in iteration order. */
PyObject *cdyn_source_entry(PyObject *base, Py_ssize_t index, int value);
/* A source that always evaluates to obj (borrowed; the source keeps a strong reference);
 * label (borrowed str or None) names it in the repr: G@label (added by the lead). */
PyObject *cdyn_source_const(PyObject *obj, PyObject *label);
/* A source evaluating fn(<base>) (fn, base borrowed); label names fn in the repr:
 * label(<base repr>). */
PyObject *cdyn_source_call(PyObject *fn, PyObject *base, const char *label);

/* Evaluate a source against a frame that is about to run (prefix not yet executed:
 * argument slots filled, cells not yet made, free vars not yet copied, so CLOSURE reads
 * func->func_closure). localsplus, func, globals, builtins: borrowed.
 * Returns a new reference, or NULL with an exception (NameError, AttributeError,
 * KeyError, IndexError, ValueError for an empty cell or an unbound local). */
PyObject *cdyn_source_eval(cdyn_source *s, PyObject *const *localsplus,
                           PyFunctionObject *func, PyObject *globals, PyObject *builtins);

/* Values of ATTR/ITEM sources computed during one guard check, keyed by source object:
 * guards on L['self'].a.b.w and L['self'].a.b.eps share the evaluation of L['self'].a.b
 * (child sources hold their base source object). Values are strong references; the owner
 * releases them with cdyn_source_memo_clear. */
#define CDYN_SOURCE_MEMO_SIZE 64
typedef struct {
    int n;
    PyObject *keys[CDYN_SOURCE_MEMO_SIZE];   /* borrowed sources */
    PyObject *vals[CDYN_SOURCE_MEMO_SIZE];   /* strong */
} cdyn_source_memo;

/* As cdyn_source_eval, reusing and filling memo (may be NULL). New reference or NULL. */
PyObject *cdyn_source_eval_memo(cdyn_source *s, PyObject *const *localsplus,
                                PyFunctionObject *func, PyObject *globals, PyObject *builtins,
                                cdyn_source_memo *memo);
void cdyn_source_memo_clear(cdyn_source_memo *memo);

/* Borrowed: the cached readable form of a source. */
static inline PyObject *cdyn_source_repr(PyObject *s) { return ((cdyn_source *)s)->repr; }

/* 1 when two sources denote the same path (compared by their readable form). */
int cdyn_source_equal(PyObject *a, PyObject *b);

/* Registers the type on the module; 0 or -1. */
int cdyn_source_init(PyObject *module);

#endif
