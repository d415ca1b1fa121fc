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
    CDYN_SRC_TPROP,       /* base.size()[index], base.stride()[index] or
                             base.storage_offset() of a tensor; name = the method name */
    CDYN_SRC_ENTRY,       /* the index-th key (name 0) or value (name 1) of the dict base, in
                             iteration order: list(base.keys())[index] (a tensor used as a key
                             has no other path) */
    CDYN_SRC_CELL,        /* f_func->func_closure[index], the cell object itself (its
                             contents are a CLOSURE source); name = free var name */
} cdyn_source_kind;

typedef struct cdyn_source {
    PyObject_HEAD
    cdyn_source_kind kind;
    int index;                  /* LOCAL, CLOSURE, CELL: slot index; -1 otherwise */
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
/* The closure cell of free variable `index` itself (CELL[name]). */
PyObject *cdyn_source_cell(int index, PyObject *name);
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
/* A tensor property of base: prop 0 size()[dim], 1 stride()[dim], 2 storage_offset()
 * (the numbering of guards.h's CDYN_SLOT_*), as torch._dynamo's TensorPropertySource. */
PyObject *cdyn_source_tprop(PyObject *base, int prop, int dim);

/* Evaluate a source against a frame that is about to run (prefix not yet executed:
 * argument slots filled, cells not yet made, free vars not yet copied, so CLOSURE reads
 * func->func_closure). localsplus, func, globals, builtins: borrowed.
 * Returns a new reference, or NULL with an exception (NameError, AttributeError,
 * KeyError, IndexError, ValueError for an empty cell or an unbound local). */
PyObject *cdyn_source_eval(cdyn_source *s, PyObject *const *localsplus,
                           PyFunctionObject *func, PyObject *globals, PyObject *builtins);

/* New reference: a callable loader(obj) = getattr chain over `names` (a tuple of str,
 * borrowed, outermost first), each step read as the guards read nn.Module attributes and answered from a
 * version-tagged cache of its own while the module dicts are unchanged; NULL + exception. */
PyObject *cdyn_source_attr_loader(PyObject *names);

/* New reference: a callable loader(obj) reading every attribute chain of `paths` (a tuple
 * of tuples of str, borrowed, each outermost first) as cdyn_source_attr_loader's loaders
 * do, each distinct prefix once per call; returns the values in a tuple in REVERSE path
 * order (UNPACK_SEQUENCE then stacks them in path order). NULL + exception. */
PyObject *cdyn_source_attr_bulk_loader(PyObject *paths);

/* How objects of tp read attributes besides object's generic lookup: 0 (generic), a mask
 * of CDYN_GA_ALIAS (transformers' PreTrainedConfig.__getattribute__: the name is mapped
 * through the `attribute_map` found generically, "attribute_map" itself excepted) and
 * CDYN_GA_HETERO (HeterogeneousConfigMixin.__getattribute__: plain while the instance dict
 * has no `_heterogeneity_spec`), or -1 when anything else runs (an unknown
 * __getattribute__, a __getattr__, a custom tp_getattro). Never fails. */
#define CDYN_GA_ALIAS 1
#define CDYN_GA_HETERO 2
int cdyn_source_getattr_steps(PyTypeObject *tp);

/* Apply the last step of a source with a base (ATTR, ITEM, TPROP, CALL, ENTRY) to base
 * (borrowed): getattr(base, name), base[key], the tensor property, fn(base), the dict
 * entry, as cdyn_source_eval does. New reference or NULL + exception. */
PyObject *cdyn_source_step(cdyn_source *s, PyObject *base);

/* What an attribute read found by a fast path depended on: the exact type (with its version
 * tag: the class attributes and methods of its MRO), the instance dict (NULL: none) and
 * the sub-dicts consulted (nn.Module: _parameters / _buffers / _modules; a transformers
 * config: its attribute_map), each with its PEP 509 version tag (CPython 3.11 gives every
 * dict state a process-unique tag). While all tags are unchanged the read gives the same
 * object, or is absent again. All pointers borrowed, compared by address; value is
 * borrowed, valid only while the tags match (the dicts then still hold it). Zero-filled =
 * empty. Owned by its caller (a guard set's node, a guard, a loader). */
typedef struct {
    PyObject *value;            /* NULL: nothing cached */
    PyTypeObject *type;
    unsigned int type_tag;
    int nsub;
    PyDictObject *dict;
    uint64_t dict_tag;
    PyDictObject *sub[3];
    uint64_t sub_tag[3];
    uint64_t stamp;             /* process-unique number of an nn.Module registry fill (0
                                   otherwise): equal stamps mean the same read of the same
                                   object */
    int absent;                 /* the read found no attribute (value NULL) */
    PyTypeObject *cls;          /* a class read from (base itself), with its version tag;
                                   NULL otherwise */
    unsigned int cls_tag;
} cdyn_attr_cache;

/* getattr(base, name) (base borrowed) as an ATTR source reads it, answered from *c when its
 * tags still match, else read again (refilling *c when the fast path found it). New
 * reference or NULL + exception. */
PyObject *cdyn_source_attr_cached(PyObject *base, PyObject *name, cdyn_attr_cache *c);

/* hasattr(base, name) (base borrowed) answered from *c while its tags match, else read
 * again (refilling *c, absence included, when a fast path answered): 1 / 0, or -1 with an
 * exception (an error other than AttributeError). */
int cdyn_source_hasattr_cached(PyObject *base, PyObject *name, cdyn_attr_cache *c);


/* Borrowed: the cached readable form of a source. */
static inline PyObject *cdyn_source_repr(PyObject *s) { return ((cdyn_source *)s)->repr; }

/* 1 when two sources denote the same path (compared by their readable form). */
int cdyn_source_equal(PyObject *a, PyObject *b);

/* Registers the type on the module; 0 or -1. */
int cdyn_source_init(PyObject *module);

#endif
