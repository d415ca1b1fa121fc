/* guards.c: guard sets checked in C on every call of a compiled function (see guards.h).
 *
 * A guard set is a growable array of guards checked in insertion order. Per-call cost is
 * what matters, so:
 *   - a LOCAL source is read as a borrowed slot (no incref, no source walk);
 *   - tensor metadata is read through the getset getters and method descriptors of
 *     torch._C.TensorBase resolved once in cdyn_guards_init (no attribute lookup by name);
 *   - dtype and requires_grad compare by identity (singletons); a CPU device is checked
 *     with the is_cpu getter (a bool, no device object built); other devices build the
 *     device object and compare it with ==;
 *   - sizes and strides compare against C int64 arrays; a tensor traced contiguous with
 *     every size >= 2 checks is_contiguous() instead of building the stride tuple (exact:
 *     with sizes equal and no size-1 or size-0 dim, contiguous strides are unique).
 * Where the extension cdynamo._tensor_meta is installed (tensor_meta.h: torch's C++ API), a
 * tensor's metadata is read from C++ instead (tm_api): a TENSOR_MATCH costs one call and no
 * Python object, and the static tensors of plain locals are checked by it instead of
 * torch's TensorGuards (tg_meta), which then serves only the failure reasons.
 * The slow path (first_failure, describe) rebuilds everything and formats messages.
 */
#include "guards.h"

#include <math.h>
#include "source.h"
#include "tensor_meta.h"

typedef enum {
    G_TENSOR = 0,
    G_EQUALS,
    G_TYPE,
    G_ID,
    G_FUNCTION,
    G_GRAD_MODE,
    G_LEN,
    G_HASATTR,
    G_CALL,
    G_SHAPE,
    G_SAME,
    G_KEYS,
    G_DISTINCT,
    G_NNMODULE,
    G_CONTAINS,
} guard_kind;

static const char *const guard_kind_names[] = {
    "TENSOR_MATCH", "EQUALS_MATCH", "TYPE_MATCH", "ID_MATCH", "FUNCTION_MATCH", "GRAD_MODE",
    "LENGTH_CHECK", "HASATTR", "GLOBAL_STATE", "SHAPE_GUARD", "SAME_OBJECT", "DICT_KEYS",
    "NO_TENSOR_ALIASING", "NN_MODULE", "DICT_CONTAINS",
};

/* What an NN_MODULE guard's module_state() read last time it passed: the instance dict and
 * the hook dicts found in it, each with its PEP 509 tag (process-unique per dict state):
 * while all are unchanged the state is the same. Borrowed pointers, compared by address
 * (the hook dicts are alive while the instance dict is unchanged: it holds them). */
typedef struct {
    PyDictObject *dict;    /* NULL: nothing cached */
    uint64_t tag;
    int nsub;
    PyDictObject *sub[4];
    uint64_t sub_tag[4];
} nn_state_cache;

typedef struct {
    guard_kind kind;
    PyObject *source;      /* strong cdyn_source; NULL for GRAD_MODE */
    PyObject *value;       /* strong: EQUALS value, TYPE type, ID/FUNCTION object,
                              TENSOR Python type; NULL for GRAD_MODE */
    uint64_t tstate;       /* GRAD_MODE: tm_api->torch_state() at trace time */
    int flag;              /* GRAD_MODE: enabled (bit 0) and any autocast enabled (bit 1);
                              TENSOR: requires_grad; HASATTR, DICT_CONTAINS: present;
                              NN_MODULE: the module_state() mask at trace time */
    PyObject *args;        /* strong; CALL: the argument tuple (value is the callable) */
    PyObject *expected;    /* strong; CALL: the result expected */
    Py_ssize_t len;        /* LENGTH_CHECK: expected length */
    /* TENSOR_MATCH only */
    PyObject *dtype;       /* strong */
    PyObject *device;      /* strong torch.device */
    int device_is_cpu;
    int use_contiguous;    /* check is_contiguous() instead of the stride tuple */
    int ndim;
    int64_t *sizes;        /* PyMem, ndim entries each (one block: sizes then strides) */
    int64_t *strides;
    int marked;            /* the tensor had dimension markings (mark_dynamic, ...) */
    cdyn_tmeta meta;       /* read through tm_api when the guard was made (its keys are not
                              compared: read while tracing); meta.plain 0: not used */
    /* dynamic shapes (cdyn_guards_tensor_dynamic / bind_slot / add_shape) */
    unsigned char *dyn;    /* TENSOR: PyMem, 2*ndim: size then stride dims not compared */
    int *slot_of;          /* TENSOR: PyMem, 2*ndim+1: slot receiving size i, stride i,
                              the storage offset (-1: none) */
    int slot;              /* TYPE_MATCH of an int input: slot receiving it (-1: none) */
    int64_t *prog;         /* SHAPE: PyMem program words (NULL: value is a Python callable
                              called with the slot values) */
    Py_ssize_t prog_len;
    PyObject *text;        /* strong; SHAPE: the relation, over source names */
    int node;              /* the node of the object checked (HASATTR: of the base); -1 none */
    int node2;             /* SAME: the node of the other source */
    int *dnodes;           /* DISTINCT: PyMem, the node of each source of value */
    uint64_t *dstamps;     /* DISTINCT: PyMem (from its first pass), per source the stamp of
                              the attribute-cache fill whose object last passed, or 0 */
    int batched;           /* TENSOR: checked by the set's TensorGuards (see tg_build);
                              DISTINCT: implied by it (its tensors are all batched) */
    int implied;           /* HASATTR present: another guard reads the attribute itself
                              (mark_implied), and a missing attribute fails that one;
                              TENSOR batched but not the first, when tg_unmarked (the first
                              one's TensorGuards call checks it) */
    nn_state_cache ms;     /* NN_MODULE: the dicts of the instance that last passed */
    cdyn_attr_cache hc;    /* HASATTR: the last read of the attribute (source.h) */
    uint64_t verified;     /* TENSOR read from an nn.Module's dicts: the stamp of the
                              attribute-cache fill whose object last passed (see
                              tensor_unchanged); 0 none */
} guard;

/* One distinct source read by the guards of a set (sources equal by their readable form
 * share a node): each is evaluated at most once per check, from its base's node. */
typedef struct {
    PyObject *source;      /* strong cdyn_source */
    int base;              /* ATTR/ITEM: the node of the base source; -1 otherwise */
    cdyn_attr_cache cache; /* ATTR: the last nn.Module fast-path read (source.h) */
} src_node;

struct cdyn_guards {
    guard *items;          /* PyMem */
    Py_ssize_t len, cap;
    int nslots;            /* slots the SHAPE guards read (filled in check order) */
    uint64_t float_slots[4];   /* bit k: slot k holds a float input's double (MAX_SLOTS bits) */
    PyObject *slot_names;  /* strong tuple of str (slot -> source name), or NULL */
    Py_ssize_t refs;       /* the owner's reference plus one per check running on the set */
    src_node *nodes;       /* PyMem; a base precedes the nodes built on it */
    int nnodes, ncap;
    PyObject *node_index;  /* strong dict: source repr -> node number, or NULL */
    /* torch's TensorGuards over the static TENSOR_MATCHes of plain locals (tg_build) */
    PyObject *tg;          /* strong, or NULL */
    PyObject *tg_tuple;    /* strong, or NULL: the argument tuple of tg's check kept for the
                              next call (its items NULL between calls; tg_call) */
    PyObject *rgm_check;   /* strong: the check of torch's guard tree over the same tensors
                              (_glue.tensor_guard_manager), used instead of tg's from
                              RGM_MIN tensors on (cheaper per tensor, dearer per call); NULL:
                              tg's check */
    int tg_state;          /* 0 not tried yet, 1 built, -1 not used */
    int tg_n;              /* tensors it checks */
    int *tg_locals;        /* PyMem: their local slots, in guard order */
    cdyn_tmeta *tg_meta;   /* PyMem, tg_n entries: the metadata of each (dispatch keys
                              included) read through tm_api from the frame tg_build saw;
                              NULL: tg's check runs instead */
    Py_ssize_t *tg_guard;  /* PyMem, tg_n entries: the index of each one's guard */
    Py_ssize_t tg_first;   /* the first batched guard: it runs tg for all of them */
    PyObject *graph_devices; /* strong frozenset of the device types (str) the graph's
                                tensors are on, or NULL when not known */
    int tg_unmarked;       /* no batched tensor had dimension markings when traced: the
                              first batched guard tests every tg tensor for markings added
                              since, and the other batched guards are implied */
    Py_ssize_t *active;    /* PyMem: indices of the guards a passing check visits (not
                              implied), in order; NULL until tg_build ran (then all) */
    Py_ssize_t nactive;
    int rg_seen;           /* the trace may depend on a tensor's requires_grad: grad mode
                              was on at its start or set on in it, or a requires_grad was
                              read (cdyn_guards_note_requires_grad); 0: a tag-skipped
                              TENSOR_MATCH need not compare it */
    int tg_autocast;       /* tg's tensors cover graph_devices: TensorGuards compares their
                              dispatch keys with the thread's excluded set applied, which
                              holds the autocast key of their device type when autocast is
                              off, so it fails when autocast of those types changes */
};

/* Most tensors one TensorGuards call checks (their arguments are on the C stack). */
#define TG_MAX 256

/* From this many batched tensors on, torch's guard tree checks them (about 40% less per
 * tensor than TensorGuards, about 130 ns more per call on this project's machine). */
#define RGM_MIN 4

/* Most slots a guard set may use (the checker keeps them on the C stack). */
#define MAX_SLOTS 256

/* Resolved once by cdyn_guards_init (strong references kept for the process lifetime). */
static PyTypeObject *tensor_base_type;      /* torch._C.TensorBase */
static PyGetSetDef *gs_dtype, *gs_device, *gs_requires_grad, *gs_shape, *gs_is_cpu;
static PyGetSetDef *gs_is_nested;
static PyObject *m_stride, *m_is_contiguous; /* method descriptors */
static PyObject *m_storage_offset;            /* method descriptor */
static PyObject *str_dim_marking;             /* "_has_dynamo_dim_marking" */
static PyObject *str_dynamic_indices;         /* "_dynamo_dynamic_indices" */
static PyObject *str_dynamo_guards;           /* "torch._dynamo.guards" */
static PyObject *fn_is_grad_enabled;         /* torch._C.is_grad_enabled */
static PyObject *fn_peek_functorch;          /* torch._C._functorch.peek_interpreter_stack */
static PyObject *fn_any_autocast;            /* torch._C._is_any_autocast_enabled */
static PyObject *tg_type;                    /* torch._C._dynamo.guards.TensorGuards, or NULL */
static PyObject *gsg_type;                   /* torch._C._dynamo.guards.GlobalStateGuard, or NULL */
static PyObject *tg_check_fn, *tg_verbose_fn; /* its check / check_verbose descriptors */
static PyCFunctionWithKeywords tg_check_c;   /* the C function of its check, or NULL */
static PyObject *str_dims_sizes, *str_dims_strides, *str_check_names;
static const cdyn_tensor_meta_api *tm_api;   /* cdynamo._tensor_meta's table, or NULL */

/* Most dimensions of a tensor the tm_api paths handle (more: the Python getters). */
#define TM_MAX_DIMS 64

static int global_state(void);

/* ---- construction ------------------------------------------------------------------ */

cdyn_guards *
cdyn_guards_new(void)
{
    cdyn_guards *g = PyMem_Calloc(1, sizeof(cdyn_guards));
    if (g == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    g->refs = 1;
    cdyn_live.guard_sets++;
    return g;
}

/* Release what one guard owns. */
static void
guard_clear(guard *gd)
{
    Py_CLEAR(gd->source);
    Py_CLEAR(gd->value);
    Py_CLEAR(gd->args);
    Py_CLEAR(gd->expected);
    Py_CLEAR(gd->dtype);
    Py_CLEAR(gd->device);
    Py_CLEAR(gd->text);
    PyMem_Free(gd->sizes);
    gd->sizes = gd->strides = NULL;
    PyMem_Free(gd->dyn);
    gd->dyn = NULL;
    PyMem_Free(gd->slot_of);
    gd->slot_of = NULL;
    PyMem_Free(gd->prog);
    gd->prog = NULL;
    PyMem_Free(gd->dnodes);
    gd->dnodes = NULL;
    PyMem_Free(gd->dstamps);
    gd->dstamps = NULL;
}

void
cdyn_guards_free(cdyn_guards *g)
{
    if (g == NULL) {
        return;
    }
    assert(g->refs > 0);
    if (--g->refs > 0) {
        return;    /* a check still runs on it: the last one frees it */
    }
    for (Py_ssize_t i = 0; i < g->len; i++) {
        guard_clear(&g->items[i]);
    }
    PyMem_Free(g->items);
    for (int i = 0; i < g->nnodes; i++) {
        Py_DECREF(g->nodes[i].source);
    }
    PyMem_Free(g->nodes);
    Py_XDECREF(g->node_index);
    Py_XDECREF(g->tg);
    Py_XDECREF(g->tg_tuple);
    Py_XDECREF(g->rgm_check);
    Py_XDECREF(g->graph_devices);
    PyMem_Free(g->tg_locals);
    PyMem_Free(g->tg_meta);
    PyMem_Free(g->tg_guard);
    PyMem_Free(g->active);
    Py_XDECREF(g->slot_names);
    PyMem_Free(g);
    cdyn_live.guard_sets--;
}

Py_ssize_t
cdyn_guards_len(const cdyn_guards *g)
{
    return g->len;
}

/* ---- guard_filter_fn (torch.compile(options={"guard_filter_fn": fn})) ----------------- */

/* Whether a guard fills slots that SHAPE guards read. */
static int
fills_slots(const guard *gd)
{
    if (gd->slot >= 0) {
        return 1;
    }
    for (int i = 0; gd->slot_of != NULL && i < 2 * gd->ndim + 1; i++) {
        if (gd->slot_of[i] >= 0) {
            return 1;
        }
    }
    return 0;
}

/* The row describing gd for _glue.guard_filter (new reference): (name, has_value, value,
 * kind, is_global, chain) where chain is the tuple of the values of the source and each of
 * its bases, innermost first, as far as they evaluate. NULL on error. */
static PyObject *
filter_row(const guard *gd, PyObject *const *localsplus, PyFunctionObject *func,
           PyObject *globals, PyObject *builtins)
{
    PyObject *chain = PyList_New(0), *tchain = NULL, *row = NULL;
    const cdyn_source *s = (const cdyn_source *)gd->source, *root = s;
    int ok = chain != NULL;
    for (; ok && s != NULL; s = s->base) {
        PyObject *v = cdyn_source_eval((cdyn_source *)s, localsplus, func, globals, builtins);
        if (v == NULL) {
            if (PyErr_ExceptionMatches(PyExc_Exception)) {
                PyErr_Clear();   /* not readable now: the chain stops here */
                break;
            }
            ok = 0;
            break;
        }
        ok = PyList_Append(chain, v) == 0;
        Py_DECREF(v);
    }
    while (root != NULL && root->base != NULL) {
        root = root->base;
    }
    tchain = ok ? PyList_AsTuple(chain) : NULL;
    if (tchain != NULL) {
        int has_value = gd->source != NULL && PyTuple_GET_SIZE(tchain) > 0;
        int is_global = root != NULL && (root->kind == CDYN_SRC_GLOBAL ||
                                         root->kind == CDYN_SRC_CONST);
        row = Py_BuildValue("(OOOsOO)",
                            gd->source != NULL ? cdyn_source_repr(gd->source) : Py_None,
                            has_value ? Py_True : Py_False,
                            has_value ? PyTuple_GET_ITEM(tchain, 0) : Py_None,
                            guard_kind_names[gd->kind], is_global ? Py_True : Py_False, tchain);
    }
    Py_XDECREF(chain);
    Py_XDECREF(tchain);
    return row;
}

int
cdyn_guards_filter(cdyn_guards *g, PyObject *fn, PyObject *const *localsplus,
                   PyFunctionObject *func, PyObject *globals, PyObject *builtins)
{
    PyObject *rows = PyList_New(g->len), *glue = NULL, *keep = NULL;
    Py_ssize_t j = 0;
    int shape_kept = 0, rc = -1;
    if (g->tg_state != 0 || g->active != NULL) {
        Py_XDECREF(rows);
        return 0;   /* checked already (not the case after a translation): kept whole */
    }
    for (Py_ssize_t i = 0; rows != NULL && i < g->len; i++) {
        PyObject *row = filter_row(&g->items[i], localsplus, func, globals, builtins);
        if (row == NULL) {
            goto done;
        }
        PyList_SET_ITEM(rows, i, row);
    }
    glue = rows ? PyImport_ImportModule("cdynamo._glue") : NULL;
    keep = glue ? PyObject_CallMethod(glue, "guard_filter", "OO", fn, rows) : NULL;
    if (keep == NULL) {
        goto done;
    }
    if (!PyList_CheckExact(keep) || PyList_GET_SIZE(keep) != g->len) {
        PyErr_SetString(PyExc_SystemError, "cdynamo: guard_filter must return one bool per guard");
        goto done;
    }
    for (Py_ssize_t i = 0; i < g->len; i++) {
        shape_kept |= g->items[i].kind == G_SHAPE && PyList_GET_ITEM(keep, i) == Py_True;
    }
    for (Py_ssize_t i = 0; i < g->len; i++) {
        guard *gd = &g->items[i];
        /* a guard filling slots that a kept SHAPE guard reads stays (unsafe otherwise) */
        if (PyList_GET_ITEM(keep, i) == Py_True || (shape_kept && fills_slots(gd))) {
            g->items[j++] = *gd;
        }
        else {
            guard_clear(gd);
        }
    }
    g->len = j;
    rc = 0;
done:
    Py_XDECREF(rows);
    Py_XDECREF(glue);
    Py_XDECREF(keep);
    return rc;
}

/* 1 when a guard of this kind on this source (NULL for GRAD_MODE) already exists. */
static int
guards_contain(const cdyn_guards *g, guard_kind kind, PyObject *source)
{
    for (Py_ssize_t i = 0; i < g->len; i++) {
        const guard *gd = &g->items[i];
        if (gd->kind != kind) {
            continue;
        }
        if (source == NULL || (gd->source != NULL && cdyn_source_equal(gd->source, source))) {
            return 1;
        }
    }
    return 0;
}

/* The node of source (borrowed cdyn_source), made (with its bases) when new; -1 with an
 * exception. */
static int
source_node(cdyn_guards *g, PyObject *source)
{
    cdyn_source *s = (cdyn_source *)source;
    PyObject *num = NULL;
    int base = -1;
    if (g->node_index == NULL && (g->node_index = PyDict_New()) == NULL) {
        return -1;
    }
    num = PyDict_GetItemWithError(g->node_index, s->repr);
    if (num != NULL || PyErr_Occurred()) {
        return num != NULL ? (int)PyLong_AsLong(num) : -1;
    }
    if (s->base != NULL && (base = source_node(g, (PyObject *)s->base)) < 0) {
        return -1;
    }
    if (g->nnodes == g->ncap) {
        int cap = g->ncap ? g->ncap * 2 : 8;
        src_node *nodes = PyMem_Realloc(g->nodes, (size_t)cap * sizeof(src_node));
        if (nodes == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        g->nodes = nodes;
        g->ncap = cap;
    }
    num = PyLong_FromLong(g->nnodes);
    if (num == NULL || PyDict_SetItem(g->node_index, s->repr, num) < 0) {
        Py_XDECREF(num);
        return -1;
    }
    Py_DECREF(num);
    src_node *n = &g->nodes[g->nnodes];
    memset(n, 0, sizeof(*n));
    n->source = Py_NewRef(source);
    n->base = base;
    return g->nnodes++;
}

/* Append a zeroed guard of `kind` on `source` (borrowed, may be NULL); returns a pointer
 * into the array (valid until the next append), or NULL with an exception. */
static guard *
guards_append(cdyn_guards *g, guard_kind kind, PyObject *source)
{
    int node = -1;
    if (g->active != NULL) {    /* a guard added after checks ran: visit every guard again */
        PyMem_Free(g->active);
        g->active = NULL;
    }
    if (source != NULL) {
        /* HASATTR checks its source's base object */
        PyObject *obj = kind == G_HASATTR ? (PyObject *)((cdyn_source *)source)->base : source;
        if ((node = source_node(g, obj)) < 0) {
            return NULL;
        }
    }
    if (g->len == g->cap) {
        Py_ssize_t cap = g->cap ? g->cap * 2 : 8;
        guard *items = PyMem_Realloc(g->items, (size_t)cap * sizeof(guard));
        if (items == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        g->items = items;
        g->cap = cap;
    }
    guard *gd = &g->items[g->len++];
    memset(gd, 0, sizeof(*gd));
    gd->slot = -1;
    gd->node = node;
    gd->node2 = -1;
    gd->kind = kind;
    gd->source = Py_XNewRef(source);
    return gd;
}

/* 0 when source is a cdyn_source, else -1 with TypeError. */
static int
check_source_arg(PyObject *source)
{
    if (source == NULL || !cdyn_Source_Check(source)) {
        PyErr_SetString(PyExc_TypeError, "guard source must be a cdynamo._C.Source");
        return -1;
    }
    return 0;
}

/* Call a cached getter on obj: new reference or NULL. */
static inline PyObject *
get_attr(PyGetSetDef *gs, PyObject *obj)
{
    return gs->get(obj, gs->closure);
}

/* Call a cached zero-argument method descriptor on obj: new reference or NULL. */
static inline PyObject *
call_method0(PyObject *meth, PyObject *obj)
{
    return PyObject_Vectorcall(meth, &obj, 1, NULL);
}

/* 1 when the tensor carries dimension markings (torch._dynamo.mark_dynamic /
 * maybe_mark_dynamic / mark_static and cdynamo's set `_has_dynamo_dim_marking` on it), 0
 * when not; never fails (a tensor without an instance dict has none). */
static int
tensor_marked(PyObject *t)
{
    PyObject **dictptr = cdyn_dict_ptr(t);
    PyObject *d = dictptr ? *dictptr : NULL;
    if (d == NULL || !PyDict_Check(d) || PyDict_GET_SIZE(d) == 0) {
        return 0;
    }
    PyObject *m = PyDict_GetItemWithError(d, str_dim_marking);
    if (m == NULL) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* Read an int sequence (torch.Size or tuple of int) into out[0..n); 0 or -1. */
static int
read_int64s(PyObject *seq, int64_t *out, int n)
{
    for (int i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) {
            return -1;
        }
        out[i] = (int64_t)v;
    }
    return 0;
}

int
cdyn_guards_add_tensor(cdyn_guards *g, PyObject *source, PyObject *tensor)
{
    PyObject *shape = NULL, *stride = NULL, *rg = NULL;
    guard *gd = NULL;
    int rc = -1;
    if (check_source_arg(source) < 0) {
        return -1;
    }
    if (!PyObject_TypeCheck(tensor, tensor_base_type)) {
        PyErr_Format(PyExc_TypeError, "TENSOR_MATCH on %U: not a tensor (%.100s)",
                     cdyn_source_repr(source), Py_TYPE(tensor)->tp_name);
        return -1;
    }
    if (guards_contain(g, G_TENSOR, source)) {
        return 0;
    }
    shape = get_attr(gs_shape, tensor);
    if (shape == NULL) {
        goto done;
    }
    stride = call_method0(m_stride, tensor);
    if (stride == NULL) {
        goto done;
    }
    rg = get_attr(gs_requires_grad, tensor);
    if (rg == NULL) {
        goto done;
    }
    if (!PyTuple_Check(shape) || !PyTuple_Check(stride) ||
        PyTuple_GET_SIZE(shape) != PyTuple_GET_SIZE(stride) || PyTuple_GET_SIZE(shape) > INT_MAX) {
        PyErr_SetString(PyExc_TypeError, "TENSOR_MATCH: unexpected shape/stride types");
        goto done;
    }
    int ndim = (int)PyTuple_GET_SIZE(shape);
    gd = guards_append(g, G_TENSOR, source);
    if (gd == NULL) {
        goto done;
    }
    gd->value = Py_NewRef((PyObject *)Py_TYPE(tensor));
    gd->flag = rg == Py_True;
    gd->ndim = ndim;
    gd->marked = tensor_marked(tensor);
    gd->sizes = PyMem_Malloc(sizeof(int64_t) * (size_t)(2 * ndim + 1));
    if (gd->sizes == NULL) {
        PyErr_NoMemory();
        goto fail_guard;
    }
    gd->strides = gd->sizes + ndim;
    if (read_int64s(shape, gd->sizes, ndim) < 0 || read_int64s(stride, gd->strides, ndim) < 0) {
        goto fail_guard;
    }
    gd->dtype = get_attr(gs_dtype, tensor);
    if (gd->dtype == NULL) {
        goto fail_guard;
    }
    gd->device = get_attr(gs_device, tensor);
    if (gd->device == NULL) {
        goto fail_guard;
    }
    PyObject *is_cpu = get_attr(gs_is_cpu, tensor);
    if (is_cpu == NULL) {
        goto fail_guard;
    }
    gd->device_is_cpu = is_cpu == Py_True;
    Py_DECREF(is_cpu);
    /* Contiguous strides with every size >= 2 are the only strides is_contiguous()
     * accepts for these sizes, so the cheaper check is exact. */
    int contiguous = 1;
    int64_t expect = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        if (gd->sizes[i] < 2 || gd->strides[i] != expect) {
            contiguous = 0;
            break;
        }
        expect *= gd->sizes[i];
    }
    gd->use_contiguous = contiguous;
    if (tm_api != NULL && ndim <= TM_MAX_DIMS) {
        if (tm_api->read(tensor, &gd->meta) < 0) {
            goto fail_guard;
        }
    }
    rc = 0;
    goto done;
fail_guard:
    guard_clear(gd);
    g->len--;
done:
    Py_XDECREF(shape);
    Py_XDECREF(stride);
    Py_XDECREF(rg);
    return rc;
}

int
cdyn_guards_add_equals(cdyn_guards *g, PyObject *source, PyObject *value)
{
    if (check_source_arg(source) < 0) {
        return -1;
    }
    if (guards_contain(g, G_EQUALS, source)) {
        return 0;
    }
    guard *gd = guards_append(g, G_EQUALS, source);
    if (gd == NULL) {
        return -1;
    }
    gd->value = Py_NewRef(value);
    return 0;
}

int
cdyn_guards_add_type(cdyn_guards *g, PyObject *source, PyTypeObject *type)
{
    if (check_source_arg(source) < 0) {
        return -1;
    }
    if (guards_contain(g, G_TYPE, source)) {
        return 0;
    }
    guard *gd = guards_append(g, G_TYPE, source);
    if (gd == NULL) {
        return -1;
    }
    gd->value = Py_NewRef((PyObject *)type);
    return 0;
}

/* Names read by module_state(), interned once. */
static PyObject *nn_state_names[5];

/* The state of an nn.Module that a trace of its calls depends on besides its type: bit 0
 * `forward` in the instance dict, bit 1 forward (pre-)hooks registered, bit 2 backward
 * (pre-)hooks registered. Read from the instance dict only (no Python code). -1 with an
 * exception on error. */
static int
module_state_rec(PyObject *mod, nn_state_cache *c);

static int
module_state(PyObject *mod)
{
    return module_state_rec(mod, NULL);
}

/* 1 when c describes mod's dicts as they are now (module_state unchanged since). */
static int
module_state_cached(PyObject *mod, const nn_state_cache *c)
{
    PyObject **dp;
    if (c->dict == NULL || (dp = cdyn_dict_ptr(mod)) == NULL ||
        *dp != (PyObject *)c->dict || cdyn_dict_version((PyObject *)c->dict) != c->tag) {
        return 0;
    }
    for (int i = 0; i < c->nsub; i++) {
        if (cdyn_dict_version((PyObject *)c->sub[i]) != c->sub_tag[i]) {
            return 0;
        }
    }
    return 1;
}

/* module_state, recording in *c (when not NULL) what it read when every value read was a
 * dict (else c->dict stays NULL: nothing cached). */
static int
module_state_rec(PyObject *mod, nn_state_cache *c)
{
    nn_state_cache rec = {0};
    int cacheable = 1;
    static const char *const names[5] = {"forward", "_forward_hooks", "_forward_pre_hooks",
                                         "_backward_hooks", "_backward_pre_hooks"};
    PyObject **dp = cdyn_dict_ptr(mod);
    PyObject *d = dp ? *dp : NULL;
    int mask = 0;
    if (nn_state_names[0] == NULL) {
        for (int i = 0; i < 5; i++) {
            if ((nn_state_names[i] = PyUnicode_InternFromString(names[i])) == NULL) {
                return -1;
            }
        }
    }
    if (c != NULL) {
        c->dict = NULL;
    }
    if (d == NULL || !PyDict_Check(d)) {
        return 0;
    }
    rec.dict = (PyDictObject *)d;
    rec.tag = cdyn_dict_version_tracked((PyObject *)rec.dict);
    for (int i = 0; i < 5; i++) {
        PyObject *h = PyDict_GetItemWithError(d, nn_state_names[i]);   /* borrowed */
        Py_ssize_t n;
        if (h == NULL) {
            if (PyErr_Occurred()) {
                return -1;
            }
            continue;
        }
        if (i > 0 && PyDict_Check(h)) {
            rec.sub[rec.nsub] = (PyDictObject *)h;
            rec.sub_tag[rec.nsub++] = cdyn_dict_version_tracked(h);
        }
        else if (i > 0) {
            cacheable = 0;
        }
        n = i == 0 ? 1 : (PyDict_Check(h) ? PyDict_GET_SIZE(h) : PyObject_Size(h));
        if (n < 0) {
            PyErr_Clear();
            n = 1;
        }
        if (n > 0) {
            mask |= i == 0 ? 1 : (i < 3 ? 2 : 4);
        }
    }
    if (c != NULL && cacheable) {
        *c = rec;   /* the lookups ran no Python code (str keys): the tags still hold */
    }
    return mask;
}

int
cdyn_guards_add_nn_module(cdyn_guards *g, PyObject *source, PyObject *mod)
{
    int state;
    if (check_source_arg(source) < 0) {
        return -1;
    }
    if (guards_contain(g, G_NNMODULE, source)) {
        return 0;
    }
    if ((state = module_state(mod)) < 0) {
        return -1;
    }
    guard *gd = guards_append(g, G_NNMODULE, source);
    if (gd == NULL) {
        return -1;
    }
    gd->value = Py_NewRef((PyObject *)Py_TYPE(mod));
    gd->flag = state;
    return 0;
}

int
cdyn_guards_add_id(cdyn_guards *g, PyObject *source, PyObject *obj, int is_function)
{
    guard_kind kind = is_function ? G_FUNCTION : G_ID;
    if (check_source_arg(source) < 0) {
        return -1;
    }
    if (guards_contain(g, kind, source)) {
        return 0;
    }
    guard *gd = guards_append(g, kind, source);
    if (gd == NULL) {
        return -1;
    }
    gd->value = Py_NewRef(obj);
    return 0;
}

int
cdyn_guards_same_id_locals(const cdyn_guards *g, PyObject *const *localsplus)
{
    for (Py_ssize_t i = 0; i < g->len; i++) {
        const guard *gd = &g->items[i];
        if ((gd->kind == G_ID || gd->kind == G_FUNCTION) &&
            ((cdyn_source *)gd->source)->kind == CDYN_SRC_LOCAL &&
            localsplus[((cdyn_source *)gd->source)->index] != gd->value) {
            return 0;
        }
    }
    return 1;
}

int
cdyn_guards_add_len(cdyn_guards *g, PyObject *source, Py_ssize_t n)
{
    if (check_source_arg(source) < 0) {
        return -1;
    }
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "LENGTH_CHECK: negative length");
        return -1;
    }
    if (guards_contain(g, G_LEN, source)) {
        return 0;
    }
    guard *gd = guards_append(g, G_LEN, source);
    if (gd == NULL) {
        return -1;
    }
    gd->len = n;
    return 0;
}

int
cdyn_guards_add_hasattr(cdyn_guards *g, PyObject *attr_source, int present)
{
    guard *gd;
    if (check_source_arg(attr_source) < 0) {
        return -1;
    }
    if (((cdyn_source *)attr_source)->kind != CDYN_SRC_ATTR) {
        PyErr_SetString(PyExc_TypeError, "HASATTR: expected an attribute source");
        return -1;
    }
    if (guards_contain(g, G_HASATTR, attr_source)) {
        return 0;
    }
    gd = guards_append(g, G_HASATTR, attr_source);
    if (gd == NULL) {
        return -1;
    }
    gd->flag = present != 0;
    return 0;
}

int
cdyn_guards_add_same(cdyn_guards *g, PyObject *source, PyObject *other)
{
    guard *gd;
    if (check_source_arg(source) < 0 || check_source_arg(other) < 0) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < g->len; i++) {
        if (g->items[i].kind == G_SAME && cdyn_source_equal(g->items[i].source, source) &&
            cdyn_source_equal(g->items[i].value, other)) {
            return 0;
        }
    }
    int node2 = source_node(g, other);
    gd = node2 < 0 ? NULL : guards_append(g, G_SAME, source);
    if (gd == NULL) {
        return -1;
    }
    gd->value = Py_NewRef(other);
    gd->node2 = node2;
    return 0;
}

int
cdyn_guards_add_distinct(cdyn_guards *g, PyObject *sources)
{
    guard *gd;
    if (!PyTuple_Check(sources) || PyTuple_GET_SIZE(sources) < 2) {
        PyErr_SetString(PyExc_TypeError, "cdyn_guards_add_distinct: a tuple of 2+ sources");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(sources); i++) {
        if (check_source_arg(PyTuple_GET_ITEM(sources, i)) < 0) {
            return -1;
        }
    }
    Py_ssize_t n = PyTuple_GET_SIZE(sources) > 64 ? 64 : PyTuple_GET_SIZE(sources);
    int *dnodes = PyMem_Calloc((size_t)n, sizeof(int));
    if (dnodes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((dnodes[i] = source_node(g, PyTuple_GET_ITEM(sources, i))) < 0) {
            PyMem_Free(dnodes);
            return -1;
        }
    }
    gd = guards_append(g, G_DISTINCT, PyTuple_GET_ITEM(sources, 0));
    if (gd == NULL) {
        PyMem_Free(dnodes);
        return -1;
    }
    gd->value = Py_NewRef(sources);
    gd->dnodes = dnodes;
    return 0;
}

int
cdyn_guards_add_call(cdyn_guards *g, PyObject *fn, PyObject *args, PyObject *expected)
{
    guard *gd;
    for (Py_ssize_t i = 0; i < g->len; i++) {
        const guard *o = &g->items[i];
        if (o->kind == G_CALL && o->value == fn) {
            int same = PyObject_RichCompareBool(o->args, args, Py_EQ);
            if (same < 0) {
                return -1;
            }
            if (same) {
                return 0;
            }
        }
    }
    gd = guards_append(g, G_CALL, NULL);
    if (gd == NULL) {
        return -1;
    }
    gd->value = Py_NewRef(fn);
    gd->args = Py_NewRef(args);
    gd->expected = Py_NewRef(expected);
    return 0;
}

static PyObject *any_key;   /* in a DICT_KEYS tuple: a position another guard checks */

PyObject *
cdyn_guards_any_key(void)
{
    if (any_key == NULL) {
        any_key = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    }
    return any_key;
}

int
cdyn_guards_add_keys(cdyn_guards *g, PyObject *source, PyObject *keys)
{
    guard *gd;
    if (check_source_arg(source) < 0) {
        return -1;
    }
    if (!PyTuple_CheckExact(keys)) {
        PyErr_SetString(PyExc_TypeError, "DICT_KEYS: keys must be a tuple");
        return -1;
    }
    if (guards_contain(g, G_KEYS, source)) {
        return 0;
    }
    gd = guards_append(g, G_KEYS, source);
    if (gd == NULL) {
        return -1;
    }
    gd->value = Py_NewRef(keys);
    gd->len = PyTuple_GET_SIZE(keys);
    return 0;
}

int
cdyn_guards_add_contains(cdyn_guards *g, PyObject *source, PyObject *key, int present)
{
    guard *gd;
    if (check_source_arg(source) < 0) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < g->len; i++) {
        const guard *o = &g->items[i];
        if (o->kind == G_CONTAINS && cdyn_source_equal(o->source, source) &&
            PyObject_RichCompareBool(o->value, key, Py_EQ) == 1 &&
            Py_TYPE(o->value) == Py_TYPE(key)) {
            return 0;
        }
    }
    PyErr_Clear();
    gd = guards_append(g, G_CONTAINS, source);
    if (gd == NULL) {
        return -1;
    }
    gd->value = Py_NewRef(key);
    gd->flag = present != 0;
    return 0;
}

void
cdyn_guards_note_requires_grad(cdyn_guards *g)
{
    g->rg_seen = 1;
}

void
cdyn_guards_set_graph_devices(cdyn_guards *g, PyObject *types)
{
    Py_XSETREF(g->graph_devices, PyFrozenSet_Check(types) ? Py_NewRef(types) : NULL);
}

int
cdyn_guards_add_grad_mode(cdyn_guards *g, int enabled)
{
    if (guards_contain(g, G_GRAD_MODE, NULL)) {
        return 0;
    }
    guard *gd = guards_append(g, G_GRAD_MODE, NULL);
    if (gd == NULL) {
        return -1;
    }
    gd->flag = enabled;
    if (enabled & 1) {
        g->rg_seen = 1;
    }
    if (tm_api != NULL) {
        gd->tstate = tm_api->torch_state();
    }
    if ((enabled & 2) || tm_api == NULL) {
        /* Under autocast, its dtypes and cache flag per device are baked into what
         * aot_eager/inductor compile: torch's GlobalStateGuard snapshots them (and the rest
         * of the state torch._dynamo guards), checked only while autocast is on. Without
         * it, a graph traced under autocast(bfloat16) ran under autocast(float16). */
        if (gsg_type == NULL) {
            PyErr_SetString(PyExc_RuntimeError,
                            "torch._C._dynamo.guards.GlobalStateGuard is not available");
            return -1;
        }
        gd->value = PyObject_CallNoArgs(gsg_type);
        if (gd->value == NULL) {
            return -1;
        }
    }
    return 0;
}

int
cdyn_guards_global_state(void)
{
    return global_state();
}

/* The guard of `kind` on `source`, or NULL. */
static guard *
find_guard(cdyn_guards *g, guard_kind kind, PyObject *source)
{
    for (Py_ssize_t i = 0; i < g->len; i++) {
        guard *gd = &g->items[i];
        if (gd->kind == kind && gd->source != NULL && cdyn_source_equal(gd->source, source)) {
            return gd;
        }
    }
    return NULL;
}

int
cdyn_guards_tensor_dynamic(cdyn_guards *g, PyObject *source, PyObject *size_mask,
                           PyObject *stride_mask)
{
    guard *gd = find_guard(g, G_TENSOR, source);
    if (gd == NULL) {
        PyErr_Format(PyExc_SystemError, "cdynamo: no TENSOR_MATCH on %R", source);
        return -1;
    }
    if (!PyBytes_Check(size_mask) || !PyBytes_Check(stride_mask) ||
        PyBytes_GET_SIZE(size_mask) != gd->ndim || PyBytes_GET_SIZE(stride_mask) != gd->ndim) {
        PyErr_SetString(PyExc_TypeError, "TENSOR_MATCH dynamic dims: bad masks");
        return -1;
    }
    if (gd->dyn == NULL && (gd->dyn = PyMem_Calloc(2 * (size_t)gd->ndim + 1, 1)) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < gd->ndim; i++) {
        gd->dyn[i] |= (unsigned char)(PyBytes_AS_STRING(size_mask)[i] != 0);
        gd->dyn[gd->ndim + i] |= (unsigned char)(PyBytes_AS_STRING(stride_mask)[i] != 0);
    }
    gd->use_contiguous = 0;   /* dims are compared one by one */
    return 0;
}

int
cdyn_guards_bind_slot(cdyn_guards *g, PyObject *source, int prop, int dim, int slot)
{
    int scalar = prop == CDYN_SLOT_INT || prop == CDYN_SLOT_FLOAT;
    guard *gd = find_guard(g, scalar ? G_TYPE : G_TENSOR, source);
    int at;
    if (gd == NULL || slot < 0 || slot >= MAX_SLOTS) {
        PyErr_Format(PyExc_SystemError, "cdynamo: no guard to read slot %d from %R", slot,
                     source);
        return -1;
    }
    if (slot >= g->nslots) {
        g->nslots = slot + 1;
    }
    if (scalar) {
        gd->slot = slot;
        if (prop == CDYN_SLOT_FLOAT) {
            g->float_slots[slot / 64] |= (uint64_t)1 << (slot % 64);
        }
        return 0;
    }
    at = prop == CDYN_SLOT_SIZE ? dim : prop == CDYN_SLOT_STRIDE ? gd->ndim + dim : 2 * gd->ndim;
    if (at < 0 || at > 2 * gd->ndim || (prop != CDYN_SLOT_OFFSET && dim >= gd->ndim)) {
        PyErr_Format(PyExc_SystemError, "cdynamo: bad slot dim %d of %R", dim, source);
        return -1;
    }
    if (gd->slot_of == NULL) {
        gd->slot_of = PyMem_Malloc(sizeof(int) * (2 * (size_t)gd->ndim + 1));
        if (gd->slot_of == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (int i = 0; i <= 2 * gd->ndim; i++) {
            gd->slot_of[i] = -1;
        }
    }
    gd->slot_of[at] = slot;
    gd->use_contiguous = 0;
    return 0;
}

int
cdyn_guards_add_shape(cdyn_guards *g, PyObject *code, PyObject *fallback, PyObject *text,
                      PyObject *reads, PyObject *slot_names)
{
    guard *gd;
    Py_ssize_t n = code != Py_None ? PyTuple_Size(code) : 0;
    if (n < 0 || !PyUnicode_Check(text) || !PyTuple_Check(reads) || !PyTuple_Check(slot_names) ||
        (code == Py_None && !PyCallable_Check(fallback))) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "SHAPE_GUARD: bad arguments");
        }
        return -1;
    }
    gd = guards_append(g, G_SHAPE, NULL);
    if (gd == NULL) {
        return -1;
    }
    gd->text = Py_NewRef(text);
    gd->args = Py_NewRef(reads);
    Py_XSETREF(g->slot_names, Py_NewRef(slot_names));
    if (code == Py_None) {
        gd->value = Py_NewRef(fallback);
        return 0;
    }
    gd->prog = PyMem_Malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (gd->prog == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long w = PyLong_AsLongLong(PyTuple_GET_ITEM(code, i));
        if (w == -1 && PyErr_Occurred()) {
            goto fail;
        }
        gd->prog[i] = (int64_t)w;
    }
    gd->prog_len = n;
    return 0;
fail:
    guard_clear(gd);
    g->len--;
    return -1;
}

/* ---- checking ---------------------------------------------------------------------- */

/* Failure details filled by the checkers when `why` is non-NULL (slow path only):
 * a new str, or left NULL when the checker had nothing better to say. */
typedef PyObject **why_t;

/* Set *why to a formatted message when the caller asked for one. Always returns 0 (the
 * check's "failed" result), or -1 if formatting failed. */
static int
fail_with(why_t why, const char *fmt, ...)
{
    if (why == NULL) {
        return 0;
    }
    va_list va;
    va_start(va, fmt);
    *why = PyUnicode_FromFormatV(fmt, va);
    va_end(va);
    return *why == NULL ? -1 : 0;
}

/* Element-wise check of a tuple of ints against expected[0..n): dims with dyn[i] set are
 * not compared; dims with slot_of[i] >= 0 are stored into slots. 1 equal, 0 differ (with
 * *why), -1 error. `what` is "size" or "stride". dyn, slot_of may be NULL. */
static int
check_dims(PyObject *tup, const int64_t *expected, int n, const char *what, why_t why,
           const unsigned char *dyn, const int *slot_of, int64_t *slots)
{
    if (!PyTuple_Check(tup) || PyTuple_GET_SIZE(tup) != n) {
        return fail_with(why, "%s length mismatch", what);
    }
    for (int i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(tup, i);
        long long v = PyLong_AsLongLong(item);
        if (v == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (slot_of != NULL && slot_of[i] >= 0) {
            slots[slot_of[i]] = (int64_t)v;
        }
        if (dyn != NULL && dyn[i]) {
            continue;
        }
        if ((int64_t)v != expected[i]) {
            return fail_with(why, "%s mismatch at index %d. expected %lld, actual %lld", what, i,
                             (long long)expected[i], v);
        }
    }
    return 1;
}

/* check_tensor's properties through tm_api (gd's tensor was plain when traced), without a
 * reason: dtype, ndim, device, requires_grad, the sizes and strides not marked dynamic; the
 * slots of gd filled from the current sizes. 1 / 0 / -1. */
static int
check_tensor_tm(const guard *gd, PyObject *v, int64_t *slots)
{
    int64_t sz[TM_MAX_DIMS], st[TM_MAX_DIMS], off = 0;
    const int nd = gd->ndim;
    int r;
    /* match() compares is_inference() too (torch's TENSOR_MATCH tells an inference tensor
       by its dispatch keys) */
    if (!tm_api->match(v, &gd->meta, gd->sizes, gd->strides, gd->dyn, 0)) {
        return 0;
    }
    if (gd->slot_of == NULL) {
        return 1;
    }
    r = tm_api->dims(v, nd, sz, st, gd->slot_of[2 * nd] >= 0 ? &off : NULL);
    if (r != 1) {
        return r;
    }
    for (int i = 0; i < nd; i++) {
        if (gd->slot_of[i] >= 0) {
            slots[gd->slot_of[i]] = sz[i];
        }
        if (gd->slot_of[nd + i] >= 0) {
            slots[gd->slot_of[nd + i]] = st[i];
        }
    }
    if (gd->slot_of[2 * nd] >= 0) {
        slots[gd->slot_of[2 * nd]] = off;
    }
    return 1;
}

/* For a TENSOR_MATCH made from a tensor with dimension markings: 1 when every dim that v
 * marks dynamic (mark_dynamic: its _dynamo_dynamic_indices) is one the guard leaves
 * uncompared, so the graph treats it as dynamic; 0 when v marks a dim the trace
 * specialised (a recompile, as torch._dynamo's guards); never fails. */
static int
marks_covered(const guard *gd, PyObject *v)
{
    PyObject **dictptr = cdyn_dict_ptr(v), *idx, *it, *item;
    int ok = 1;
    idx = dictptr && *dictptr ? PyDict_GetItemWithError(*dictptr, str_dynamic_indices) : NULL;
    if (idx == NULL || (it = PyObject_GetIter(idx)) == NULL) {
        PyErr_Clear();
        return 1;
    }
    while (ok && (item = PyIter_Next(it)) != NULL) {
        long i = PyLong_Check(item) ? PyLong_AsLong(item) : -1;
        ok = i >= 0 && i < gd->ndim && gd->dyn != NULL && gd->dyn[i];
        Py_DECREF(item);
    }
    Py_DECREF(it);
    PyErr_Clear();
    return ok;
}

/* TENSOR_MATCH on v (borrowed); symbolic dims are stored into slots instead of compared.
 * 1 pass, 0 fail, -1 error. */
static int
check_tensor(const guard *gd, PyObject *v, why_t why, int64_t *slots)
{
    PyObject *tmp = NULL;
    int rc = -1, nd = gd->ndim;
    if ((PyObject *)Py_TYPE(v) != gd->value) {
        return fail_with(why, "type %s != %s", ((PyTypeObject *)gd->value)->tp_name,
                         Py_TYPE(v)->tp_name);
    }
    if (!gd->marked && tensor_marked(v)) {
        return fail_with(why, "dimension markings added (mark_dynamic / mark_static)");
    }
    if (gd->marked && !marks_covered(gd, v)) {
        return fail_with(why, "a dimension the graph specialised is marked dynamic");
    }
    if (why == NULL && gd->meta.plain) {
        return check_tensor_tm(gd, v, slots);
    }
    /* dtype: a singleton per scalar type. */
    tmp = get_attr(gs_dtype, v);
    if (tmp == NULL) {
        return -1;
    }
    if (tmp != gd->dtype) {
        rc = fail_with(why, "dtype %R != %R", gd->dtype, tmp);
        goto done;
    }
    Py_DECREF(tmp);
    /* requires_grad: Py_True or Py_False. */
    tmp = get_attr(gs_requires_grad, v);
    if (tmp == NULL) {
        return -1;
    }
    if ((tmp == Py_True) != gd->flag) {
        rc = fail_with(why, "requires_grad mismatch. expected %s, actual %s",
                       gd->flag ? "True" : "False", gd->flag ? "False" : "True");
        goto done;
    }
    Py_DECREF(tmp);
    tmp = NULL;
    /* an inference tensor or not, as the fast path compares it (gd->meta is read only
       through the extension); here on the way to a failure's description, or for a tensor
       the fast path does not take */
    if (tm_api != NULL && gd->meta.plain) {
        tmp = PyObject_CallMethod(v, "is_inference", NULL);
        if (tmp == NULL) {
            return -1;
        }
        if ((tmp == Py_True) != (gd->meta.inference != 0)) {
            rc = fail_with(why, "inference tensor mismatch. expected %s, actual %s",
                           gd->meta.inference ? "True" : "False",
                           gd->meta.inference ? "False" : "True");
            goto done;
        }
        Py_CLEAR(tmp);
    }
    /* device: is_cpu is a bool; only non-CPU devices need a device object. */
    tmp = get_attr(gs_is_cpu, v);
    if (tmp == NULL) {
        return -1;
    }
    int is_cpu = tmp == Py_True;
    Py_CLEAR(tmp);
    if (is_cpu != gd->device_is_cpu || !is_cpu || why != NULL) {
        tmp = get_attr(gs_device, v);
        if (tmp == NULL) {
            return -1;
        }
        if (tmp != gd->device) {
            int eq = PyObject_RichCompareBool(tmp, gd->device, Py_EQ);
            if (eq < 0) {
                goto done;
            }
            if (!eq) {
                rc = fail_with(why, "device %S != %S", gd->device, tmp);
                goto done;
            }
        }
        Py_CLEAR(tmp);
    }
    /* sizes (and ndim) */
    tmp = get_attr(gs_shape, v);
    if (tmp == NULL) {
        return -1;
    }
    if (!PyTuple_Check(tmp) || PyTuple_GET_SIZE(tmp) != nd) {
        rc = fail_with(why, "ndim mismatch. expected %d, actual %zd", nd,
                       PyTuple_Check(tmp) ? PyTuple_GET_SIZE(tmp) : (Py_ssize_t)-1);
        goto done;
    }
    rc = check_dims(tmp, gd->sizes, nd, "size", why, gd->dyn, gd->slot_of, slots);
    if (rc != 1) {
        goto done;
    }
    Py_CLEAR(tmp);
    /* strides */
    if (gd->use_contiguous && why == NULL) {
        tmp = call_method0(m_is_contiguous, v);
        if (tmp == NULL) {
            return -1;
        }
        rc = tmp == Py_True;
        goto done;
    }
    tmp = call_method0(m_stride, v);
    if (tmp == NULL) {
        return -1;
    }
    rc = check_dims(tmp, gd->strides, nd, "stride", why, gd->dyn ? gd->dyn + nd : NULL,
                    gd->slot_of ? gd->slot_of + nd : NULL, slots);
    if (rc == 1 && gd->slot_of != NULL && gd->slot_of[2 * nd] >= 0) {
        long long off;
        Py_CLEAR(tmp);
        tmp = call_method0(m_storage_offset, v);
        if (tmp == NULL) {
            return -1;
        }
        off = PyLong_AsLongLong(tmp);
        if (off == -1 && PyErr_Occurred()) {
            rc = -1;
            goto done;
        }
        slots[gd->slot_of[2 * nd]] = (int64_t)off;
    }
done:
    Py_XDECREF(tmp);
    return rc;
}

/* ---- SHAPE_GUARD programs ------------------------------------------------------------ */

/* Opcodes of a shape guard program (cdynamo/_shapes.py emits them; keep in sync). */
enum {
    SP_CONST, SP_SLOT, SP_ADD, SP_SUB, SP_MUL, SP_FLOORDIV, SP_MOD, SP_POW, SP_NEG,
    SP_EQ, SP_NE, SP_LT, SP_LE, SP_GT, SP_GE, SP_NOT, SP_MIN, SP_MAX, SP_ABS,
    SP_JUMP_IF_FALSE_OR_POP, SP_JUMP_IF_TRUE_OR_POP, SP_AND, SP_OR,
    SP_ISNAN,   /* the top is a float input's slot (its double's bits): isnan of it */
};
#define SP_STACK 32

/* Python's floor division and modulo on int64; 0, or -1 on division by zero/overflow. */
static int
floor_divmod(int64_t a, int64_t b, int64_t *q, int64_t *r)
{
    if (b == 0 || (a == INT64_MIN && b == -1)) {
        return -1;
    }
    int64_t qq = a / b, rr = a % b;
    if (rr != 0 && ((rr < 0) != (b < 0))) {
        qq -= 1;
        rr += b;
    }
    *q = qq;
    *r = rr;
    return 0;
}

/* a ** b for b >= 0 without overflow; 0 or -1. */
static int
int_pow(int64_t a, int64_t b, int64_t *out)
{
    int64_t r = 1;
    if (b < 0) {
        return -1;
    }
    while (b-- > 0) {
        if (__builtin_mul_overflow(r, a, &r)) {
            return -1;
        }
    }
    *out = r;
    return 0;
}

/* Evaluate a program over the slots: 1 true, 0 false, -1 when it cannot be evaluated in
 * int64 (division by zero, overflow: treated as a failed guard by the caller). */
static int
eval_program(const int64_t *code, Py_ssize_t n, const int64_t *slots, int nslots)
{
    int64_t st[SP_STACK];
    int sp = 0;
    Py_ssize_t pc = 0;
    while (pc < n) {
        int64_t op = code[pc++], a, b, q, r;
        if (op == SP_CONST || op == SP_SLOT) {
            if (pc >= n || sp >= SP_STACK) {
                return -1;
            }
            int64_t arg = code[pc++];
            if (op == SP_SLOT && (arg < 0 || arg >= nslots)) {
                return -1;
            }
            st[sp++] = op == SP_CONST ? arg : slots[arg];
            continue;
        }
        if (op == SP_JUMP_IF_FALSE_OR_POP || op == SP_JUMP_IF_TRUE_OR_POP) {
            if (pc >= n || sp < 1) {
                return -1;
            }
            int64_t target = code[pc++];
            if ((st[sp - 1] != 0) == (op == SP_JUMP_IF_TRUE_OR_POP)) {
                if (target < pc || target > n) {
                    return -1;
                }
                pc = (Py_ssize_t)target;
            }
            else {
                sp--;
            }
            continue;
        }
        if (op == SP_NEG || op == SP_NOT || op == SP_ABS || op == SP_ISNAN) {
            double d;
            if (sp < 1) {
                return -1;
            }
            a = st[sp - 1];
            if ((op == SP_NEG || op == SP_ABS) && a == INT64_MIN) {
                return -1;
            }
            memcpy(&d, &a, sizeof(d));   /* SP_ISNAN: a float input's slot */
            st[sp - 1] = op == SP_NEG ? -a : op == SP_NOT ? (a == 0)
                         : op == SP_ABS ? (a < 0 ? -a : a) : (isnan(d) ? 1 : 0);
            continue;
        }
        if (sp < 2) {
            return -1;
        }
        b = st[--sp];
        a = st[sp - 1];
        switch (op) {
        case SP_ADD: if (__builtin_add_overflow(a, b, &r)) return -1; break;
        case SP_SUB: if (__builtin_sub_overflow(a, b, &r)) return -1; break;
        case SP_MUL: if (__builtin_mul_overflow(a, b, &r)) return -1; break;
        case SP_FLOORDIV: if (floor_divmod(a, b, &q, &r) < 0) return -1; r = q; break;
        case SP_MOD: if (floor_divmod(a, b, &q, &r) < 0) return -1; break;
        case SP_POW: if (int_pow(a, b, &r) < 0) return -1; break;
        case SP_EQ: r = a == b; break;
        case SP_NE: r = a != b; break;
        case SP_LT: r = a < b; break;
        case SP_LE: r = a <= b; break;
        case SP_GT: r = a > b; break;
        case SP_GE: r = a >= b; break;
        case SP_MIN: r = a < b ? a : b; break;
        case SP_MAX: r = a > b ? a : b; break;
        case SP_AND: r = a & b; break;
        case SP_OR: r = a | b; break;
        default: return -1;
        }
        st[sp - 1] = r;
    }
    return sp == 1 ? st[0] != 0 : -1;
}

/* Store the int (or the float's bits) v of a TYPE_MATCHed input into *slot. 1 / 0 (an
 * int beyond 64 bits) / -1. */
static int
store_scalar_slot(PyObject *v, why_t why, int64_t *slot)
{
    int overflow = 0;
    long long iv;
    if (PyFloat_CheckExact(v)) {
        double d = PyFloat_AS_DOUBLE(v);
        memcpy(slot, &d, sizeof(d));
        return 1;
    }
    iv = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (iv == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow) {
        return fail_with(why, "int does not fit in 64 bits");
    }
    *slot = (int64_t)iv;
    return 1;
}

/* Slot k as a Python number: a float for a float input's slot, else an int. New ref. */
static PyObject *
slot_value(const cdyn_guards *g, const int64_t *slots, int k)
{
    if (g->float_slots[k / 64] & ((uint64_t)1 << (k % 64))) {
        double d;
        memcpy(&d, &slots[k], sizeof(d));
        return PyFloat_FromDouble(d);
    }
    return PyLong_FromLongLong((long long)slots[k]);
}

/* New str "name = value, ..." of the slots a SHAPE guard reads, for messages. */
static PyObject *
shape_values(const cdyn_guards *g, const guard *gd, const int64_t *slots)
{
    PyObject *parts = PyList_New(0), *sep = NULL, *res = NULL;
    for (Py_ssize_t i = 0; parts != NULL && i < PyTuple_GET_SIZE(gd->args); i++) {
        long k = PyLong_AsLong(PyTuple_GET_ITEM(gd->args, i));
        PyObject *name = (g->slot_names != NULL && k >= 0 && k < PyTuple_GET_SIZE(g->slot_names))
                             ? PyTuple_GET_ITEM(g->slot_names, k) : Py_None;
        PyObject *val = k >= 0 && k < g->nslots ? slot_value(g, slots, (int)k) : NULL;
        PyObject *p = val ? PyUnicode_FromFormat("%S = %R", name, val) : NULL;
        Py_XDECREF(val);
        if (p == NULL || PyList_Append(parts, p) < 0) {
            Py_XDECREF(p);
            Py_CLEAR(parts);
            break;
        }
        Py_DECREF(p);
    }
    sep = parts ? PyUnicode_FromString(", ") : NULL;
    res = sep ? PyUnicode_Join(sep, parts) : NULL;
    Py_XDECREF(sep);
    Py_XDECREF(parts);
    return res;
}

/* SHAPE_GUARD: the relation over the slots filled by earlier guards. 1 / 0 / -1. */
static int
check_shape(const cdyn_guards *g, const guard *gd, why_t why, const int64_t *slots)
{
    int r;
    if (gd->prog != NULL) {
        r = eval_program(gd->prog, gd->prog_len, slots, g->nslots);
        r = r < 0 ? 0 : r;
    }
    else {
        PyObject *args = PyTuple_New(g->nslots), *res = NULL;
        for (int k = 0; args != NULL && k < g->nslots; k++) {
            PyObject *iv = slot_value(g, slots, k);
            if (iv == NULL) {
                Py_CLEAR(args);
                break;
            }
            PyTuple_SET_ITEM(args, k, iv);
        }
        res = args ? PyObject_Call(gd->value, args, NULL) : NULL;
        Py_XDECREF(args);
        if (res == NULL) {
            return -1;
        }
        r = PyObject_IsTrue(res);
        Py_DECREF(res);
        if (r < 0) {
            return -1;
        }
    }
    if (r == 0 && why != NULL) {
        PyObject *vals = shape_values(g, gd, slots);
        if (vals == NULL) {
            return -1;
        }
        r = fail_with(why, "%U failed (%U)", gd->text, vals);
        Py_DECREF(vals);
    }
    return r;
}

/* Exact-type equality: same type at every level of nested tuples, then ==.
 * 1 equal, 0 not, -1 error. a, b borrowed. */
static int
equals_exact(PyObject *a, PyObject *b)
{
    if (a == b) {
        return 1;
    }
    if (Py_TYPE(a) != Py_TYPE(b)) {
        return 0;
    }
    if (PyTuple_CheckExact(a)) {
        Py_ssize_t n = PyTuple_GET_SIZE(a);
        if (PyTuple_GET_SIZE(b) != n) {
            return 0;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            int r = equals_exact(PyTuple_GET_ITEM(a, i), PyTuple_GET_ITEM(b, i));
            if (r != 1) {
                return r;
            }
        }
        return 1;
    }
    if (PyFloat_CheckExact(a)) {
        /* the value the trace baked in: -0.0 is not 0.0 (it prints and divides otherwise),
           and a NaN is the same NaN */
        double x = PyFloat_AS_DOUBLE(a), y = PyFloat_AS_DOUBLE(b);
        return (x == y && signbit(x) == signbit(y)) || (isnan(x) && isnan(y));
    }
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

/* DICT_KEYS: v iterates exactly the keys (dict keys, set items) of the tuple `keys`, in
 * order. 1 pass, 0 fail, -1 error. */
static int
check_keys(PyObject *keys, PyObject *v)
{
    Py_ssize_t n = PyTuple_GET_SIZE(keys), i = 0, pos = 0;
    PyObject *k, *val, *it;
    Py_hash_t hash;
    int r = 1;
    if (PyDict_CheckExact(v)) {
        if (PyDict_GET_SIZE(v) != n) {
            return 0;
        }
        while (r == 1 && PyDict_Next(v, &pos, &k, &val)) {
            PyObject *want = PyTuple_GET_ITEM(keys, i++);
            r = want == any_key ? 1 : equals_exact(k, want);
        }
        return r;
    }
    if (PyAnySet_CheckExact(v)) {
        if (PySet_GET_SIZE(v) != n) {
            return 0;
        }
        while (r == 1 && _PySet_NextEntry(v, &pos, &k, &hash)) {
            r = equals_exact(k, PyTuple_GET_ITEM(keys, i++));
        }
        return r;
    }
    it = PyObject_GetIter(v);
    if (it == NULL) {
        PyErr_Clear();
        return 0;
    }
    while (r == 1 && (k = PyIter_Next(it)) != NULL) {
        PyObject *want = i < n ? PyTuple_GET_ITEM(keys, i++) : NULL;
        r = want == NULL ? 0 : want == any_key ? 1 : equals_exact(k, want);
        Py_DECREF(k);
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return r == 1 && i == n;
}

/* Call a state function of torch with no arguments: through its C function at once when
 * it is a METH_NOARGS builtin (torch._C's are; saves the vectorcall dispatch on the
 * per-call path), else by vectorcall. New reference or NULL. */
static inline PyObject *
call_state_fn(PyObject *fn)
{
    if (PyCFunction_CheckExact(fn) &&
        (PyCFunction_GET_FLAGS(fn) & (METH_NOARGS | METH_VARARGS | METH_FASTCALL | METH_O |
                                      METH_KEYWORDS | METH_METHOD)) == METH_NOARGS) {
        return _Py_CheckFunctionResult(PyThreadState_Get(), fn,
                                       PyCFunction_GET_FUNCTION(fn)(PyCFunction_GET_SELF(fn), NULL),
                                       NULL);
    }
    return PyObject_Vectorcall(fn, NULL, 0, NULL);
}

/* 1 when grad mode is enabled, 0 when not, -1 on error. */
static int
grad_mode_enabled(void)
{
    if (tm_api != NULL) {
        return tm_api->grad_enabled();
    }
    PyObject *r = call_state_fn(fn_is_grad_enabled);
    if (r == NULL) {
        return -1;
    }
    int on = r == Py_True;
    Py_DECREF(r);
    return on;
}

/* Global state as GRAD_MODE records it: bit 0 grad mode, bit 1 any autocast enabled; -1 on
 * error. */
static int
global_state(void)
{
    int on = grad_mode_enabled();
    PyObject *r;
    if (on < 0) {
        return -1;
    }
    r = call_state_fn(fn_any_autocast);
    if (r == NULL) {
        return -1;
    }
    on |= (r == Py_True) << 1;
    Py_DECREF(r);
    return on;
}

/* 1 when a torch.func transform (vmap/grad) is running (functorch's interpreter stack is not
 * empty), 0 when not, -1 on error. */
static int
functorch_running(void)
{
    PyObject *ft = call_state_fn(fn_peek_functorch);
    int on = 0;
    if (ft == NULL) {
        return -1;
    }
    on = ft != Py_None;
    Py_DECREF(ft);
    return on;
}

/* The GlobalStateGuard of a GRAD_MODE traced under autocast (gd->value): 1 / 0 / -1. */
static int
check_autocast_state(const guard *gd, why_t why)
{
    static PyObject *str_check, *str_reason;
    PyObject *r = NULL, *reason = NULL;
    int ok;
    if ((str_check == NULL && (str_check = PyUnicode_InternFromString("check")) == NULL) ||
        (str_reason == NULL && (str_reason = PyUnicode_InternFromString("reason")) == NULL)) {
        return -1;
    }
    r = PyObject_CallMethodNoArgs(gd->value, str_check);
    if (r == NULL) {
        return -1;
    }
    ok = r == Py_True;
    Py_DECREF(r);
    if (ok || why == NULL) {
        return ok;
    }
    reason = PyObject_CallMethodNoArgs(gd->value, str_reason);
    if (reason == NULL) {
        return -1;
    }
    ok = fail_with(why, "global state (autocast dtype, ...) changed: %S", reason);
    Py_DECREF(reason);
    return ok;
}

/* The GRAD_MODE failure for torch state words that differ (tm_api->torch_state()): names
 * the first field that changed, as torch's GlobalStateGuard.reason() does. Returns 0 (or -1
 * when the reason could not be made). */
static int
torch_state_failed(uint64_t was, uint64_t now, why_t why)
{
    static const struct {
        uint64_t mask;
        const char *name;
    } fields[] = {
        {CDYN_TS_DETERMINISTIC, "deterministic_algorithms"},
        {CDYN_TS_DETERMINISTIC_WARN, "deterministic_algorithms_warn_only"},
        {CDYN_TS_CUBLAS_TF32, "allow_tf32"},
        {(uint64_t)3 << CDYN_TS_FP16_REDUCE_SHIFT, "allow_fp16_reduce"},
        {(uint64_t)3 << CDYN_TS_BF16_REDUCE_SHIFT, "allow_bf16_reduce"},
        {(uint64_t)3 << CDYN_TS_TF_STATE_SHIFT, "torch_function"},
        {CDYN_TS_TF_MODE, "torch_function_mode_stack"},
        {(uint64_t)0xff << CDYN_TS_DTYPE_SHIFT, "default_dtype"},
        {(uint64_t)0xffffffff << CDYN_TS_THREADS_SHIFT, "num_threads"},
    };
    const char *name = "torch state";
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if ((was ^ now) & fields[i].mask) {
            name = fields[i].name;
            break;
        }
    }
    return fail_with(why, "global state changed: %s", name);
}

/* Check a guard on global state (no source): GRAD_MODE or CALL. 1 / 0 / -1. ac_covered:
 * tg_covers, and the set's TensorGuards also covers the autocast state of every device
 * type the graph's tensors are on (tg_autocast): the GRAD_MODE traced without autocast
 * then reads only the grad mode (torch's any-autocast test reads a thread-local per device
 * type, the larger part of this guard's cost; a change on those devices fails
 * TensorGuards, and autocast of other device types cannot change the graph). tg_covers:
 * the set's TensorGuards runs in this check (over at least one tensor), which implies the
 * functorch test: while a torch.func transform runs, functorch keeps its DynamicLayer
 * dispatch keys in the thread's included set, and TensorGuards compares each tensor's
 * dispatch keys with that set applied (its inputs are also wrapped tensors, with other
 * keys), so it fails there. */
static int
check_global(const guard *gd, why_t why, int tg_covers, int ac_covered)
{
    PyObject *r;
    int on, eq;
    if (gd->kind == G_GRAD_MODE) {
        /* entries are compiled outside torch.func transforms (translate.c): under vmap/grad
           the inputs are wrapped tensors a compiled graph cannot take */
        on = tg_covers ? 0 : functorch_running();
        if (on != 0) {
            return on < 0 ? -1 : fail_with(why, "a torch.func transform (vmap/grad) is running");
        }
        on = ac_covered && !(gd->flag & 2) ? grad_mode_enabled() : global_state();
        if (on < 0) {
            return -1;
        }
        if (on == gd->flag) {
            if (tm_api != NULL) {
                uint64_t now = tm_api->torch_state();
                if (now != gd->tstate) {
                    return torch_state_failed(gd->tstate, now, why);
                }
            }
            return gd->value == NULL ? 1 : check_autocast_state(gd, why);
        }
        if ((on & 1) != (gd->flag & 1)) {
            return fail_with(why, "expected %s, actual %s", (gd->flag & 1) ? "enabled" : "disabled",
                             (on & 1) ? "enabled" : "disabled");
        }
        return fail_with(why, "autocast expected %s, actual %s",
                         (gd->flag & 2) ? "enabled" : "disabled", (on & 2) ? "enabled" : "disabled");
    }
    r = PyObject_Call(gd->value, gd->args, NULL);
    if (r == NULL) {
        return -1;
    }
    eq = equals_exact(r, gd->expected);
    if (eq == 0) {
        eq = fail_with(why, "%R%R: expected %R, actual %R", gd->value, gd->args, gd->expected, r);
    }
    Py_DECREF(r);
    return eq;
}

/* Per-check evaluation state: the frame, and the value of each node read so far. */
#define STACK_NODES 128
typedef struct {
    PyObject *const *localsplus;
    PyFunctionObject *func;
    PyObject *globals, *builtins;
    PyObject **vals;       /* g->nnodes entries: strong, or NULL (not read yet) */
    int use_tg;            /* the set's TensorGuards was built when this check began */
    PyObject *stack_vals[STACK_NODES];
} eval_ctx;

/* Start a check of g on a frame (arguments borrowed); 0, or -1 with MemoryError. */
static int
ctx_init(const cdyn_guards *g, eval_ctx *cx, PyObject *const *localsplus,
         PyFunctionObject *func, PyObject *globals, PyObject *builtins)
{
    cx->localsplus = localsplus;
    cx->func = func;
    cx->globals = globals;
    cx->builtins = builtins;
    cx->vals = cx->stack_vals;
    cx->use_tg = g->tg_state == 1;
    if (g->nnodes > STACK_NODES &&
        (cx->vals = PyMem_Malloc(sizeof(PyObject *) * (size_t)g->nnodes)) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(cx->vals, 0, sizeof(PyObject *) * (size_t)g->nnodes);
    return 0;
}

/* Release the values read by a check (nnodes: the set's node count). */
static void
ctx_clear(eval_ctx *cx, int nnodes)
{
    for (int i = 0; i < nnodes; i++) {
        Py_XDECREF(cx->vals[i]);
    }
    if (cx->vals != cx->stack_vals) {
        PyMem_Free(cx->vals);
    }
}

/* The value of node i (borrowed: cx owns it until the check ends), read with its bases
 * when not read yet; NULL with an exception (a missing name, attribute or item). An ATTR
 * node on an nn.Module answers from its version-tagged cache while the dicts it read are
 * unchanged (source.h). */
static PyObject *
node_value(cdyn_guards *g, int i, eval_ctx *cx)
{
    PyObject *v = cx->vals[i], *base = NULL;
    if (v != NULL) {
        return v;
    }
    src_node *n = &g->nodes[i];
    cdyn_source *s = (cdyn_source *)n->source;
    if (n->base < 0) {
        v = cdyn_source_eval(s, cx->localsplus, cx->func, cx->globals, cx->builtins);
    }
    else {
        base = node_value(g, n->base, cx);
        if (base == NULL) {
            return NULL;
        }
        v = s->kind == CDYN_SRC_ATTR ? cdyn_source_attr_cached(base, s->name, &n->cache)
                                     : cdyn_source_step(s, base);
    }
    assert(cx->vals[i] == NULL);
    cx->vals[i] = v;
    return v;
}

/* NO_TENSOR_ALIASING: v (the first source's object) and the objects of the other sources of
 * gd->value are pairwise different. A source read from an nn.Module's registries by the
 * same attribute-cache fill as at the guard's last pass (its stamp, dstamps) is the same
 * object as then: two such sources were distinct then and still are, so only the pairs
 * with another source are compared (parameters of a model against its inputs), as
 * torch._dynamo leaves parameters out of this guard, but exact. 1 pass, 0 fail. */
static int
check_distinct(cdyn_guards *g, const guard *gd, PyObject *v, why_t why, eval_ctx *cx)
{
    Py_ssize_t n = PyTuple_GET_SIZE(gd->value);
    PyObject *objs[64];
    unsigned char stable[64];
    if (n > 64) {
        n = 64;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = i == 0 ? v : node_value(g, gd->dnodes[i], cx);
        if (o == NULL) {
            PyErr_Clear();
            return fail_with(why, "cannot evaluate %U",
                             cdyn_source_repr(PyTuple_GET_ITEM(gd->value, i)));
        }
        const cdyn_attr_cache *c = &g->nodes[gd->dnodes[i]].cache;
        objs[i] = o;
        stable[i] = why == NULL && gd->dstamps != NULL && gd->dstamps[i] != 0 &&
                    c->stamp == gd->dstamps[i] && c->value == o;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (stable[i]) {
            continue;
        }
        for (Py_ssize_t j = 0; j < n; j++) {
            if (j != i && objs[j] == objs[i]) {
                Py_ssize_t a = i > j ? i : j, b = i > j ? j : i;
                return fail_with(why, "%U is the same object as %U",
                                 cdyn_source_repr(PyTuple_GET_ITEM(gd->value, a)),
                                 cdyn_source_repr(PyTuple_GET_ITEM(gd->value, b)));
            }
        }
    }
    if (why == NULL && gd->dstamps == NULL) {
        ((guard *)gd)->dstamps = PyMem_Calloc((size_t)n, sizeof(uint64_t));
    }
    for (Py_ssize_t i = 0; why == NULL && gd->dstamps != NULL && i < n; i++) {
        const cdyn_attr_cache *c = &g->nodes[gd->dnodes[i]].cache;
        gd->dstamps[i] = c->value == objs[i] ? c->stamp : 0;
    }
    return 1;
}

/* SAME_OBJECT: v is the object the source gd->value evaluates to. 1 pass, 0 fail. */
static int
check_same(cdyn_guards *g, const guard *gd, PyObject *v, why_t why, eval_ctx *cx)
{
    PyObject *o = node_value(g, gd->node2, cx);
    if (o == NULL) {
        PyErr_Clear();
        return fail_with(why, "cannot evaluate %U", cdyn_source_repr(gd->value));
    }
    return o == v ? 1 : fail_with(why, "expected the same object as %U",
                                  cdyn_source_repr(gd->value));
}

/* ---- TensorGuards: the static tensors of plain locals in one call ------------------ */

/* Gather the batched tensors of the frame into stack[1..] (borrowed; stack[0] = g->tg):
 * 1, or 0 when one is unbound. */
static int
tg_args(const cdyn_guards *g, PyObject *const *localsplus, PyObject **stack)
{
    stack[0] = g->tg;
    for (int i = 0; i < g->tg_n; i++) {
        if ((stack[i + 1] = localsplus[g->tg_locals[i]]) == NULL) {
            return 0;
        }
    }
    return 1;
}

/* DICT_CONTAINS: (key in v) == present, v a dict. 1 / 0 (reason in *why). */
static int
check_contains(const guard *gd, PyObject *v, why_t why)
{
    int rc = PyDict_Check(v) ? PyDict_Contains(v, gd->value) : -1;
    if (rc < 0) {
        PyErr_Clear();
        return fail_with(why, "not a dict: %.100s", Py_TYPE(v)->tp_name);
    }
    if (rc != gd->flag) {
        return fail_with(why, "expected the key %R to be %s", gd->value,
                         gd->flag ? "present" : "absent");
    }
    return 1;
}

/* torch's TensorGuards check of g's tensors (stack: tg, then the tg_n tensors), new ref or
 * NULL. Its C function is called on an argument tuple the set keeps between calls (what
 * calling the method would build and free each time); the tuple holds the tensors only
 * during the call. */
static PyObject *
tg_call(cdyn_guards *g, PyObject *const *stack)
{
    PyObject *t = g->tg_tuple, *r;
    if (tg_check_c == NULL) {
        return PyObject_Vectorcall(tg_check_fn, stack, (size_t)g->tg_n + 1, NULL);
    }
    g->tg_tuple = NULL;   /* a check running meanwhile on another thread makes its own */
    if (t == NULL && (t = PyTuple_New(g->tg_n)) == NULL) {
        return NULL;
    }
    for (int i = 0; i < g->tg_n; i++) {
        PyTuple_SET_ITEM(t, i, Py_NewRef(stack[i + 1]));
    }
    r = tg_check_c(g->tg, t, NULL);
    if (Py_REFCNT(t) == 1 && g->tg_tuple == NULL) {
        for (int i = 0; i < g->tg_n; i++) {
            PyObject *o = PyTuple_GET_ITEM(t, i);
            PyTuple_SET_ITEM(t, i, NULL);
            Py_DECREF(o);
        }
        g->tg_tuple = t;
    }
    else {
        Py_DECREF(t);     /* kept by the callee, or another one is kept already */
    }
    if (r == NULL && !PyErr_Occurred()) {
        PyErr_SetString(PyExc_SystemError, "TensorGuards.check returned NULL without an error");
    }
    return r;
}

/* 1 when the n (<= TG_MAX) objects of objs are pairwise different objects: an open-addressing
 * set of their addresses, O(n). */
static int
all_distinct(PyObject *const *objs, int n)
{
    PyObject *table[4 * TG_MAX];
    size_t size = 8;
    while (size < 2 * (size_t)n) {
        size *= 2;
    }
    memset(table, 0, size * sizeof(PyObject *));
    for (int i = 0; i < n; i++) {
        size_t h = ((uintptr_t)objs[i] >> 4) * 0x9E3779B97F4A7C15ull >> 7;
        for (h &= size - 1; table[h] != NULL; h = (h + 1) & (size - 1)) {
            if (table[h] == objs[i]) {
                return 0;
            }
        }
        table[h] = objs[i];
    }
    return 1;
}

/* 1 when t (a tensor) is a nested tensor, whose sizes torch's TensorCheck reads with a C++
 * exception that escapes its Python entry points (std::terminate), 0 when not, -1 on error.
 * Read through tm_api, else through the is_nested getter. */
static int
tensor_nested(PyObject *t)
{
    cdyn_tmeta m;
    PyObject *r;
    int on;
    if (tm_api != NULL) {
        return tm_api->read(t, &m) < 0 ? -1 : m.nested;
    }
    if ((r = get_attr(gs_is_nested, t)) == NULL) {
        return -1;
    }
    on = r == Py_True;
    Py_DECREF(r);
    return on;
}

/* The batched tensors ts[0..tg_n) against tg_meta (tm_api: the properties TensorGuards
 * compares, dispatch keys included, and its test that they are distinct objects). 1 / 0. */
static int
tg_meta_check(const cdyn_guards *g, PyObject *const *ts)
{
    for (int i = 0; i < g->tg_n; i++) {
        const guard *gd = &g->items[g->tg_guard[i]];
        if ((PyObject *)Py_TYPE(ts[i]) != gd->value ||
            !tm_api->match(ts[i], &g->tg_meta[i], gd->sizes, gd->strides, NULL, CDYN_TM_KEYS)) {
            return 0;
        }
    }
    return g->tg_n == 1 || (g->tg_n == 2 ? ts[0] != ts[1] : all_distinct(ts, g->tg_n));
}

/* A batched TENSOR_MATCH (fast path): its dimension markings, and, at the first batched
 * guard, torch's TensorGuards check of every batched tensor (exact Python type, dispatch
 * keys, dtype, device, requires_grad, sizes, strides). 1 / 0 / -1. */
static int
check_batched(cdyn_guards *g, const guard *gd, PyObject *v, eval_ctx *cx)
{
    PyObject *stack[1 + TG_MAX], *r = NULL;
    if (!g->tg_unmarked && ((!gd->marked && tensor_marked(v)) ||
                            (gd->marked && !marks_covered(gd, v)))) {
        return 0;
    }
    if (gd != &g->items[g->tg_first]) {
        return 1;    /* the first batched guard checked it */
    }
    if (!tg_args(g, cx->localsplus, stack)) {
        return 0;
    }
    for (int i = 0; g->tg_unmarked && i < g->tg_n; i++) {
        if (tensor_marked(stack[i + 1])) {
            return 0;
        }
    }
    if (g->tg_meta != NULL) {
        return tg_meta_check(g, stack + 1);
    }
    for (int i = 0; i < g->tg_n; i++) {
        int nested = tensor_nested(stack[i + 1]);
        if (nested != 0) {
            return nested;   /* torch's checks would end the process on it: a miss */
        }
    }
    if (g->rgm_check != NULL) {
        PyObject *t;
        if (!all_distinct(stack + 1, g->tg_n)) {
            return 0;    /* TensorGuards' uniqueness test, which the tree does not make */
        }
        if ((t = PyTuple_New(g->tg_n)) == NULL) {
            return -1;
        }
        for (int i = 0; i < g->tg_n; i++) {
            PyTuple_SET_ITEM(t, i, Py_NewRef(stack[i + 1]));
        }
        r = PyObject_CallOneArg(g->rgm_check, t);
        Py_DECREF(t);
    }
    else {
        r = tg_call(g, stack);
    }
    if (r == NULL) {
        return -1;
    }
    Py_DECREF(r);
    return r == Py_True;
}

/* New list of the ints of a[0..n). */
static PyObject *
int_list(const int64_t *a, int n)
{
    PyObject *l = PyList_New(n);
    for (int i = 0; l != NULL && i < n; i++) {
        PyObject *x = PyLong_FromLongLong((long long)a[i]);
        if (x == NULL) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, i, x);
    }
    return l;
}

/* TensorGuards fails when two of its tensors are the same object: a NO_TENSOR_ALIASING
 * guard whose sources are all batched locals is implied by it (marked batched). */
static void
tg_mark_distinct(cdyn_guards *g)
{
    for (Py_ssize_t i = 0; i < g->len; i++) {
        guard *gd = &g->items[i];
        Py_ssize_t n = gd->kind == G_DISTINCT ? PyTuple_GET_SIZE(gd->value) : 0, k = 0;
        if (n == 0 || n > 64) {
            continue;    /* past 64 sources the guard checks only the first 64: keep it */
        }
        for (; k < n; k++) {
            const cdyn_source *src = (const cdyn_source *)PyTuple_GET_ITEM(gd->value, k);
            int found = 0;
            for (int j = 0; src->kind == CDYN_SRC_LOCAL && j < g->tg_n && !found; j++) {
                found = g->tg_locals[j] == src->index;
            }
            if (!found) {
                break;
            }
        }
        gd->batched = k == n;
    }
}

/* 1 when every device type in g->graph_devices is that of one of the tensors of args (a
 * tuple), 0 when not or not known (never fails). */
static int
tg_covers_devices(const cdyn_guards *g, PyObject *args)
{
    static PyObject *str_type;
    PyObject *types = NULL;
    int ok = 0;
    if (g->graph_devices == NULL ||
        (str_type == NULL && (str_type = PyUnicode_InternFromString("type")) == NULL) ||
        (types = PySet_New(NULL)) == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
        PyObject *dev = PyObject_GetAttrString(PyTuple_GET_ITEM(args, i), "device");
        PyObject *t = dev != NULL ? PyObject_GetAttr(dev, str_type) : NULL;
        int r = t != NULL ? PySet_Add(types, t) : -1;
        Py_XDECREF(t);
        Py_XDECREF(dev);
        if (r < 0) {
            goto done;
        }
    }
    ok = PyObject_RichCompareBool(g->graph_devices, types, Py_LE) == 1;
done:
    PyErr_Clear();
    Py_XDECREF(types);
    return ok;
}

/* _glue.tensor_guard_manager(tensors, sizes, strides) (all borrowed): the check of torch's guard
 * tree over the tensors (new reference), or NULL without an exception when it is not built
 * (TensorGuards' check is used then): when torch._dynamo is not loaded in this process (the
 * tree's accessors import it, about a second, which a guard check must not spend), or when
 * building it fails. */
static PyObject *
rgm_build(PyObject *tensors, PyObject *sizes, PyObject *strides)
{
    static PyObject *glue;
    PyObject *r = NULL, *loaded = PyImport_GetModule(str_dynamo_guards);
    if (loaded == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_DECREF(loaded);
    if (glue == NULL) {
        glue = PyImport_ImportModule("cdynamo._glue");
    }
    if (glue != NULL) {
        r = PyObject_CallMethod(glue, "tensor_guard_manager", "OOO", tensors, sizes, strides);
    }
    if (r == NULL || !PyCallable_Check(r)) {
        Py_CLEAR(r);
        PyErr_Clear();
    }
    return r;
}

/* tg_meta and tg_guard of g (tg built: its batched guards marked) read through tm_api from
 * the frame whose check just passed, when every batched tensor is plain; else left NULL. */
static void
tg_meta_build(cdyn_guards *g, PyObject *const *localsplus)
{
    cdyn_tmeta *meta = PyMem_Calloc((size_t)g->tg_n, sizeof(cdyn_tmeta));
    Py_ssize_t *idx = PyMem_Calloc((size_t)g->tg_n, sizeof(Py_ssize_t));
    int k = 0;
    if (meta == NULL || idx == NULL) {
        goto fail;
    }
    for (Py_ssize_t i = 0; i < g->len; i++) {
        const guard *gd = &g->items[i];
        if (gd->kind != G_TENSOR || !gd->batched) {
            continue;
        }
        PyObject *t = localsplus[((const cdyn_source *)gd->source)->index];
        if (k >= g->tg_n || !gd->meta.plain || t == NULL || tm_api->read(t, &meta[k]) < 0 ||
            !meta[k].plain) {
            goto fail;
        }
        idx[k++] = i;
    }
    if (k != g->tg_n) {
        goto fail;
    }
    g->tg_meta = meta;
    g->tg_guard = idx;
    return;
fail:
    PyErr_Clear();
    PyMem_Free(meta);
    PyMem_Free(idx);
}

/* Build the TensorGuards over the static TENSOR_MATCHes of plain locals (no symbolic dim,
 * no slot), from the frame whose check just passed (its tensors then agree with every
 * recorded property; the dispatch keys TensorGuards adds are theirs, as torch._dynamo
 * takes the trace's). Sets tg_state; failures only leave the per-tensor path. */
static void
tg_build(cdyn_guards *g, PyObject *const *localsplus)
{
    PyObject *args = NULL, *sizes = NULL, *strides = NULL, *kw = NULL;
    int n = 0;
    g->tg_state = -1;
    for (Py_ssize_t i = 0; i < g->len; i++) {
        const guard *gd = &g->items[i];
        n += gd->kind == G_TENSOR && gd->dyn == NULL && gd->slot_of == NULL &&
             ((cdyn_source *)gd->source)->kind == CDYN_SRC_LOCAL;
    }
    if (tg_type == NULL || n == 0 || n > TG_MAX ||
        (g->tg_locals = PyMem_Calloc((size_t)n, sizeof(int))) == NULL) {
        return;
    }
    args = PyTuple_New(n);
    sizes = PyList_New(n);
    strides = PyList_New(n);
    if (args == NULL || sizes == NULL || strides == NULL) {
        goto done;
    }
    n = 0;
    for (Py_ssize_t i = 0; i < g->len; i++) {
        const guard *gd = &g->items[i];
        const cdyn_source *src = (const cdyn_source *)gd->source;
        if (gd->kind != G_TENSOR || gd->dyn != NULL || gd->slot_of != NULL ||
            src->kind != CDYN_SRC_LOCAL) {
            continue;
        }
        PyObject *sz = int_list(gd->sizes, gd->ndim), *st = int_list(gd->strides, gd->ndim);
        PyList_SET_ITEM(sizes, n, sz);
        PyList_SET_ITEM(strides, n, st);
        if (sz == NULL || st == NULL || localsplus[src->index] == NULL) {
            goto done;
        }
        PyTuple_SET_ITEM(args, n, Py_NewRef(localsplus[src->index]));
        g->tg_locals[n++] = src->index;
    }
    kw = Py_BuildValue("{OOOO}", str_dims_sizes, sizes, str_dims_strides, strides);
    if (kw == NULL || (g->tg = PyObject_Call(tg_type, args, kw)) == NULL) {
        goto done;
    }
    g->tg_n = n;
    g->tg_first = -1;
    for (Py_ssize_t i = 0; i < g->len; i++) {
        guard *gd = &g->items[i];
        if (gd->kind == G_TENSOR && gd->dyn == NULL && gd->slot_of == NULL &&
            ((cdyn_source *)gd->source)->kind == CDYN_SRC_LOCAL) {
            gd->batched = 1;
            g->tg_first = g->tg_first < 0 ? i : g->tg_first;
        }
    }
    tg_mark_distinct(g);
    g->tg_unmarked = 1;
    for (Py_ssize_t i = 0; i < g->len; i++) {
        g->tg_unmarked &= !(g->items[i].batched && g->items[i].marked);
    }
    for (Py_ssize_t i = 0; g->tg_unmarked && i < g->len; i++) {
        guard *gd = &g->items[i];
        gd->implied |= gd->kind == G_TENSOR && gd->batched && i != g->tg_first;
    }
    g->tg_autocast = tg_covers_devices(g, args);
    g->tg_state = 1;
    if (tm_api != NULL) {
        tg_meta_build(g, localsplus);
    }
    if (g->tg_meta == NULL && n >= RGM_MIN) {
        g->rgm_check = rgm_build(args, sizes, strides);
    }
done:
    PyErr_Clear();
    Py_XDECREF(args);
    Py_XDECREF(sizes);
    Py_XDECREF(strides);
    Py_XDECREF(kw);
}

/* Slow path after every guard passed: what TensorGuards checks beyond the per-tensor
 * properties (dispatch keys). New str naming the failure, Py_None when it passes, NULL on
 * error. */
static PyObject *
tg_failure(const cdyn_guards *g, PyObject *const *localsplus)
{
    PyObject *stack[2 + TG_MAX], *names = NULL, *kwn = NULL, *r = NULL;   /* tg, tensors, names */
    if (g->tg_state != 1) {
        return Py_NewRef(Py_None);
    }
    if (!tg_args(g, localsplus, stack)) {
        return PyUnicode_FromString("TENSOR_MATCH: a tensor local is unbound");
    }
    names = PyList_New(g->tg_n);
    for (Py_ssize_t i = 0, k = 0; names != NULL && i < g->len; i++) {
        /* the tensors only: a NO_TENSOR_ALIASING it implies is marked batched too */
        if (g->items[i].batched && g->items[i].kind == G_TENSOR) {
            PyList_SET_ITEM(names, k++, Py_NewRef(cdyn_source_repr(g->items[i].source)));
        }
    }
    kwn = names ? PyTuple_Pack(1, str_check_names) : NULL;
    if (kwn != NULL) {
        stack[g->tg_n + 1] = names;
        r = PyObject_Vectorcall(tg_verbose_fn, stack, (size_t)g->tg_n + 1, kwn);
    }
    Py_XDECREF(names);
    Py_XDECREF(kwn);
    if (r != NULL && PyUnicode_Check(r)) {
        Py_SETREF(r, PyUnicode_FromFormat("TENSOR_MATCH: %U", r));
    }
    else if (r != NULL) {
        Py_SETREF(r, Py_NewRef(Py_None));
    }
    return r;
}

/* Mark the guards a cheaper one implies (after the set's first passing check; never
 * fails): a HASATTR present whose attribute source another guard reads (that read fails
 * the check when the attribute is missing, as the HASATTR would). Saves one attribute read
 * per call, which for objects with a Python __getattribute__ (transformers' configs) is
 * a Python call. The slow path (first_failure) still checks them, for the message. */
static void
mark_implied(cdyn_guards *g)
{
    for (Py_ssize_t i = 0; i < g->len; i++) {
        guard *gd = &g->items[i];
        if (gd->kind != G_HASATTR || !gd->flag) {
            continue;
        }
        for (Py_ssize_t j = 0; j < g->len && !gd->implied; j++) {
            const guard *o = &g->items[j];
            gd->implied = o->kind != G_HASATTR && o->kind != G_GRAD_MODE && o->kind != G_CALL &&
                          o->kind != G_SHAPE && o->source != NULL &&
                          cdyn_source_equal(o->source, gd->source);
        }
    }
}

/* g->active: the guards not implied (set once, after tg_build and mark_implied); left NULL
 * (every guard visited) when out of memory. */
static void
list_active(cdyn_guards *g)
{
    Py_ssize_t n = 0;
    assert(g->active == NULL);
    if ((g->active = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(g->len + 1))) == NULL) {
        return;
    }
    for (Py_ssize_t i = 0; i < g->len; i++) {
        if (!g->items[i].implied) {
            g->active[n++] = i;
        }
    }
    g->nactive = n;
}

/* NN_MODULE on v: exact type, then the module_state() mask, answered from the dicts' tags
 * while they are unchanged since the guard last passed. 1 / 0 (with *why) / -1. */
static int
check_nn_module(const guard *gd, PyObject *v, why_t why)
{
    int rc;
    if ((PyObject *)Py_TYPE(v) != gd->value) {
        return fail_with(why, "expected type %s, actual %s",
                         ((PyTypeObject *)gd->value)->tp_name, Py_TYPE(v)->tp_name);
    }
    if (why == NULL && module_state_cached(v, &gd->ms)) {
        return 1;   /* the dicts it read are unchanged since it last passed */
    }
    rc = module_state_rec(v, why == NULL ? &((guard *)gd)->ms : NULL);
    if (rc >= 0 && rc != gd->flag) {
        ((guard *)gd)->ms.dict = NULL;
        return fail_with(why, "its own forward / hooks changed (state %d, traced with %d)", rc,
                         gd->flag);
    }
    return rc < 0 ? -1 : 1;
}

/* 1 when the TENSOR_MATCH gd may be skipped for v: v was read from an nn.Module's
 * registries by an attribute-cache fill whose dicts are all unchanged since (PEP 509 tags),
 * and that same fill's object passed gd before, as torch._dynamo's
 * skip_tensor_guards_with_matching_dict_tags (a tensor held by a dict whose tag is
 * unchanged is taken as unchanged: parameters and buffers of a model cost no
 * TENSOR_MATCH per call). Static tensors only (no size slots for SHAPE guards). */
static inline int
tensor_unchanged(const cdyn_guards *g, const guard *gd, PyObject *v)
{
    if (gd->verified == 0 || gd->node < 0) {
        return 0;
    }
    const cdyn_attr_cache *c = &g->nodes[gd->node].cache;
    if (c->value != v || c->stamp != gd->verified) {
        return 0;
    }
    /* beyond torch._dynamo: requires_grad is still compared (freezing parameters after a
       compile, p.requires_grad_(False), changes no dict), unless the trace cannot depend
       on it: traced with grad mode off throughout (GRAD_MODE keeps it off) and no
       requires_grad read, the graph and what the backend makes of it (AOTAutograd's
       inference path) are the same either way */
    if (!g->rg_seen) {
        return 1;
    }
    if (tm_api != NULL && gd->meta.plain) {
        return tm_api->requires_grad(v) == gd->flag;
    }
    PyObject *rg = get_attr(gs_requires_grad, v);
    int same = rg != NULL && (rg == Py_True) == gd->flag;
    if (rg == NULL) {
        PyErr_Clear();
    }
    Py_XDECREF(rg);
    return same;
}

static PyObject *module_len_fns[3];   /* ModuleList / Sequential / ModuleDict.__len__ */
static PyObject *str_len, *str_modules, *str_getattribute_name;
static PyObject *object_getattribute_fn;   /* object.__getattribute__, borrowed */

/* len(v) of a torch container module (ModuleList, Sequential, ModuleDict) whose __len__ is
 * torch's own `len(self._modules)`, read from its instance dict without the Python call;
 * -2 when v is not one (or its _modules is not read that way). */
static Py_ssize_t
container_module_len(PyObject *v)
{
    PyTypeObject *tp = Py_TYPE(v);
    PyObject *f, **dp, *mods;
    if (module_len_fns[0] == NULL || !(tp->tp_flags & Py_TPFLAGS_HEAPTYPE) ||
        (f = _PyType_Lookup(tp, str_len)) == NULL ||
        (f != module_len_fns[0] && f != module_len_fns[1] && f != module_len_fns[2]) ||
        _PyType_Lookup(tp, str_modules) != NULL ||
        _PyType_Lookup(tp, str_getattribute_name) != object_getattribute_fn ||
        (dp = cdyn_dict_ptr(v)) == NULL ||
        *dp == NULL || !PyDict_CheckExact(*dp)) {
        return -2;
    }
    mods = PyDict_GetItemWithError(*dp, str_modules);
    if (mods == NULL || !PyDict_CheckExact(mods)) {
        PyErr_Clear();
        return -2;
    }
    return PyDict_GET_SIZE(mods);
}

/* A TENSOR_MATCH whose tensor torch cannot read (it raised RuntimeError: a nested tensor's
 * sizes, a sparse tensor's strides) fails: the error becomes the reason, never the caller's.
 * 0, or -1 when the reason cannot be made. */
static int
unreadable_tensor(why_t why)
{
    PyObject *exc, *val, *tb;
    int rc;
    PyErr_Fetch(&exc, &val, &tb);
    PyErr_NormalizeException(&exc, &val, &tb);
    rc = fail_with(why, "cannot read the tensor's properties (%S)", val ? val : Py_None);
    Py_XDECREF(exc);
    Py_XDECREF(val);
    Py_XDECREF(tb);
    return rc;
}

/* Check one guard of g. 1 pass, 0 fail (with *why when asked), -1 internal error. slots:
 * the values TENSOR_MATCH / TYPE_MATCH store for the SHAPE guards that follow them. */
static int
check_one(cdyn_guards *g, const guard *gd, why_t why, eval_ctx *cx, int64_t *slots)
{
    PyObject *v = NULL;
    int rc = -1;
    if (gd->implied && why == NULL) {
        return 1;
    }
    if (gd->kind == G_GRAD_MODE || gd->kind == G_CALL) {
        int tg_covers = why == NULL && cx->use_tg && g->tg_n > 0;
        return check_global(gd, why, tg_covers, tg_covers && g->tg_autocast);
    }
    if (gd->kind == G_SHAPE) {
        return check_shape(g, gd, why, slots);
    }
    cdyn_source *src = (cdyn_source *)gd->source;
    if (gd->kind == G_HASATTR) {
        src = src->base;   /* hasattr(base, name): evaluate the object, not the attribute */
    }
    if (src->kind == CDYN_SRC_LOCAL) {
        v = cx->localsplus[src->index];    /* borrowed */
        if (v == NULL) {
            return fail_with(why, "local is unbound");
        }
    }
    else {
        v = node_value(g, gd->node, cx);    /* borrowed */
        if (v == NULL) {
            /* A missing name, attribute or item is a guard failure, not an error. */
            if (why != NULL) {
                PyObject *exc = NULL, *val = NULL, *tb = NULL;
                PyErr_Fetch(&exc, &val, &tb);
                PyErr_NormalizeException(&exc, &val, &tb);
                *why = PyUnicode_FromFormat("cannot evaluate source (%s: %S)",
                                            exc ? ((PyTypeObject *)exc)->tp_name : "?",
                                            val ? val : Py_None);
                Py_XDECREF(exc);
                Py_XDECREF(val);
                Py_XDECREF(tb);
                return *why == NULL ? -1 : 0;
            }
            PyErr_Clear();
            return 0;
        }
    }
    switch (gd->kind) {
    case G_TENSOR:
        if (why == NULL && tensor_unchanged(g, gd, v)) {
            rc = 1;
            break;
        }
        rc = gd->batched && cx->use_tg && why == NULL ? check_batched(g, gd, v, cx)
                                                      : check_tensor(gd, v, why, slots);
        if (rc < 0 && PyErr_ExceptionMatches(PyExc_RuntimeError)) {
            rc = unreadable_tensor(why);
        }
        if (rc == 1 && src->kind == CDYN_SRC_ATTR && gd->dyn == NULL && gd->slot_of == NULL &&
            g->nodes[gd->node].cache.value == v) {
            ((guard *)gd)->verified = g->nodes[gd->node].cache.stamp;
        }
        break;
    case G_EQUALS:
        rc = equals_exact(v, gd->value);
        if (rc == 0) {
            rc = fail_with(why, "expected %R, actual %R", gd->value, v);
        }
        break;
    case G_TYPE:
        rc = (PyObject *)Py_TYPE(v) == gd->value;
        if (rc == 0) {
            rc = fail_with(why, "expected type %s, actual %s",
                           ((PyTypeObject *)gd->value)->tp_name, Py_TYPE(v)->tp_name);
        }
        else if (gd->slot >= 0) {   /* an int or float input read by SHAPE guards */
            rc = store_scalar_slot(v, why, &slots[gd->slot]);
        }
        break;
    case G_ID:
    case G_FUNCTION:
        rc = v == gd->value;
        if (rc == 0) {
            rc = fail_with(why, "expected the object %R (id %p), got another one", gd->value,
                           (void *)gd->value);
        }
        break;
    case G_LEN: {
        Py_ssize_t n;
        if (PyList_CheckExact(v) || PyTuple_CheckExact(v)) {
            n = Py_SIZE(v);
        }
        else if (PyDict_CheckExact(v)) {
            n = PyDict_GET_SIZE(v);
        }
        else if ((n = container_module_len(v)) >= 0) {
        }
        else {
            n = PyObject_Size(v);
            if (n < 0) {
                PyErr_Clear();
                rc = fail_with(why, "no len() for %.100s", Py_TYPE(v)->tp_name);
                break;
            }
        }
        rc = n == gd->len;
        if (rc == 0) {
            rc = fail_with(why, "expected length %zd, actual %zd", gd->len, n);
        }
        break;
    }
    case G_KEYS:
        rc = check_keys(gd->value, v);
        if (rc == 0) {
            rc = fail_with(why, "expected keys %R", gd->value);
        }
        break;
    case G_DISTINCT:
        /* implied by the TensorGuards check (tg_mark_distinct) */
        rc = gd->batched && cx->use_tg && why == NULL ? 1 : check_distinct(g, gd, v, why, cx);
        break;
    case G_SAME:
        rc = check_same(g, gd, v, why, cx);
        break;
    case G_HASATTR:
        rc = cdyn_source_hasattr_cached(v, ((cdyn_source *)gd->source)->name,
                                        &((guard *)gd)->hc);
        if (rc < 0) {
            PyErr_Clear();   /* as hasattr: an error reads as absent */
            rc = 0;
        }
        if (rc != gd->flag) {
            rc = fail_with(why, "expected the attribute to be %s", gd->flag ? "present" : "absent");
        }
        else {
            rc = 1;
        }
        break;
    case G_NNMODULE:
        rc = check_nn_module(gd, v, why);
        break;
    case G_CONTAINS:
        rc = check_contains(gd, v, why);
        break;
    case G_GRAD_MODE:
    case G_CALL:
    case G_SHAPE:
        break;
    }
    return rc;
}

int
cdyn_guards_check(cdyn_guards *g, PyObject *const *localsplus, PyFunctionObject *func,
                  PyObject *globals, PyObject *builtins)
{
    eval_ctx cx;
    int64_t slots[MAX_SLOTS];
    int r = 1;
    if (ctx_init(g, &cx, localsplus, func, globals, builtins) < 0) {
        return -1;
    }
    g->refs++;    /* Python code run by a guard may free the owner (a reset) */
    if (g->active != NULL) {
        for (Py_ssize_t k = 0; k < g->nactive && r == 1; k++) {
            r = check_one(g, &g->items[g->active[k]], NULL, &cx, slots);
        }
    }
    else {
        for (Py_ssize_t i = 0; i < g->len && r == 1; i++) {
            r = check_one(g, &g->items[i], NULL, &cx, slots);
        }
    }
    if (r == 1 && g->tg_state == 0) {
        tg_build(g, localsplus);
        mark_implied(g);
        list_active(g);
    }
    ctx_clear(&cx, g->nnodes);
    cdyn_guards_free(g);
    return r;
}

/* New str "<source repr> <KIND>" (or "GRAD_MODE") naming one guard. */
static PyObject *
guard_name(const guard *gd)
{
    if (gd->source == NULL) {
        return PyUnicode_FromString(guard_kind_names[gd->kind]);
    }
    return PyUnicode_FromFormat("%U %s", cdyn_source_repr(gd->source),
                                guard_kind_names[gd->kind]);
}

PyObject *
cdyn_guards_first_failure(cdyn_guards *g, PyObject *const *localsplus,
                          PyFunctionObject *func, PyObject *globals, PyObject *builtins)
{
    PyObject *why = NULL, *name = NULL, *res = NULL;
    int64_t slots[MAX_SLOTS];
    eval_ctx cx;
    if (ctx_init(g, &cx, localsplus, func, globals, builtins) < 0) {
        return NULL;
    }
    g->refs++;    /* as in cdyn_guards_check */
    for (Py_ssize_t i = 0; i < g->len; i++) {
        const guard *gd = &g->items[i];
        int r = check_one(g, gd, &why, &cx, slots);
        if (r < 0) {
            goto done;
        }
        if (r == 1) {
            assert(why == NULL);
            continue;
        }
        name = guard_name(gd);
        if (name == NULL) {
            goto done;
        }
        res = why ? PyUnicode_FromFormat("%U: %U", name, why) : Py_NewRef(name);
        goto done;
    }
    res = tg_failure(g, localsplus);
done:
    Py_XDECREF(why);
    Py_XDECREF(name);
    ctx_clear(&cx, g->nnodes);
    cdyn_guards_free(g);
    return res;
}

/* ---- describe ---------------------------------------------------------------------- */

/* New str "size=[None, 3], stride=[3, 1]" of a TENSOR_MATCH with symbolic dims (None: not
 * compared, as torch._dynamo prints them). */
static PyObject *
tensor_dims_text(const guard *gd)
{
    PyObject *res = PyUnicode_FromString("size=["), *part = NULL;
    for (int w = 0; res != NULL && w < 2; w++) {
        for (int i = 0; res != NULL && i < gd->ndim; i++) {
            int dyn = gd->dyn[w * gd->ndim + i];
            int64_t v = w == 0 ? gd->sizes[i] : gd->strides[i];
            part = dyn ? PyUnicode_FromFormat("%sNone", i ? ", " : "")
                       : PyUnicode_FromFormat("%s%lld", i ? ", " : "", (long long)v);
            if (part == NULL) {
                Py_CLEAR(res);
                break;
            }
            PyUnicode_AppendAndDel(&res, part);
        }
        if (res != NULL) {
            PyUnicode_AppendAndDel(&res, PyUnicode_FromString(w == 0 ? "], stride=[" : "]"));
        }
    }
    return res;
}

/* New str for one guard in the seeds' form (see guards.h). */
static PyObject *
guard_describe(const guard *gd)
{
    PyObject *head = NULL, *res = NULL;
    const char *kind = guard_kind_names[gd->kind];
    if (gd->kind == G_GRAD_MODE) {
        return PyUnicode_FromFormat("GRAD_MODE %s%s", (gd->flag & 1) ? "enabled" : "disabled",
                                    (gd->flag & 2) ? ", autocast enabled" : "");
    }
    if (gd->kind == G_CALL) {
        return PyUnicode_FromFormat("GLOBAL_STATE %R%R == %R", gd->value, gd->args, gd->expected);
    }
    if (gd->kind == G_SHAPE) {
        return PyUnicode_FromFormat("SHAPE_GUARD: %U", gd->text);
    }
    cdyn_source *src = (cdyn_source *)gd->source;
    if (src->kind == CDYN_SRC_LOCAL) {
        head = PyUnicode_FromFormat("local %R %s", src->name, kind);
    }
    else if (src->kind == CDYN_SRC_GLOBAL) {
        head = PyUnicode_FromFormat("global %R %s", src->name, kind);
    }
    else {
        head = PyUnicode_FromFormat("%U %s", src->repr, kind);
    }
    if (head != NULL && gd->kind == G_HASATTR) {
        res = PyUnicode_FromFormat("%U %s", head, gd->flag ? "present" : "absent");
        Py_DECREF(head);
        return res;
    }
    if (head != NULL && gd->kind == G_CONTAINS) {
        res = PyUnicode_FromFormat("%U %R %s", head, gd->value, gd->flag ? "present" : "absent");
        Py_DECREF(head);
        return res;
    }
    if (head != NULL && gd->kind == G_NNMODULE) {
        res = PyUnicode_FromFormat("%U %s%s", head, ((PyTypeObject *)gd->value)->tp_name,
                                   gd->flag ? " (with hooks or its own forward)" : "");
        Py_DECREF(head);
        return res;
    }
    if (head != NULL && gd->kind == G_TENSOR && gd->dyn != NULL) {
        PyObject *dims = tensor_dims_text(gd);
        res = dims ? PyUnicode_FromFormat("%U %U", head, dims) : NULL;
        Py_XDECREF(dims);
        Py_DECREF(head);
        return res;
    }
    if (head != NULL && gd->kind == G_SAME) {
        res = PyUnicode_FromFormat("%U %U", head, cdyn_source_repr(gd->value));
        Py_DECREF(head);
        return res;
    }
    if (head == NULL || (gd->kind != G_EQUALS && gd->kind != G_LEN && gd->kind != G_KEYS)) {
        return head;
    }
    res = gd->kind == G_LEN ? PyUnicode_FromFormat("%U %zd", head, gd->len)
                            : PyUnicode_FromFormat("%U %R", head, gd->value);
    Py_DECREF(head);
    return res;
}

PyObject *
cdyn_guards_describe(cdyn_guards *g)
{
    PyObject *list = PyList_New(g->len);
    if (list == NULL) {
        return NULL;
    }
    g->refs++;    /* as in cdyn_guards_check (a repr may run Python code) */
    for (Py_ssize_t i = 0; i < g->len; i++) {
        PyObject *s = guard_describe(&g->items[i]);
        if (s == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, s);
    }
    cdyn_guards_free(g);
    return list;
}

/* ---- init -------------------------------------------------------------------------- */

/* The getset def behind TensorBase.<name>, or NULL with an exception. */
static PyGetSetDef *
find_getset(const char *name)
{
    PyObject *d = PyDict_GetItemString(cdyn_type_dict(tensor_base_type), name);   /* borrowed */
    if (d == NULL || !Py_IS_TYPE(d, &PyGetSetDescr_Type)) {
        PyErr_Format(PyExc_ImportError, "torch._C.TensorBase.%s is not a getset descriptor",
                     name);
        return NULL;
    }
    PyGetSetDef *gs = ((PyGetSetDescrObject *)d)->d_getset;
    if (gs->get == NULL) {
        PyErr_Format(PyExc_ImportError, "torch._C.TensorBase.%s has no getter", name);
        return NULL;
    }
    return gs;
}

/* New reference to the method descriptor TensorBase.<name>, or NULL. */
static PyObject *
find_method(const char *name)
{
    PyObject *d = PyDict_GetItemString(cdyn_type_dict(tensor_base_type), name);   /* borrowed */
    if (d == NULL) {
        PyErr_Format(PyExc_ImportError, "torch._C.TensorBase.%s not found", name);
        return NULL;
    }
    return Py_NewRef(d);
}

/* torch._C._dynamo.guards.TensorGuards and its methods; 0, or -1 on error (absent: 0,
 * tg_type stays NULL and tensors are checked one by one). */
static int
tg_init(void)
{
    PyObject *m = PyImport_ImportModule("torch._C._dynamo.guards");
    if (m == NULL) {
        PyErr_Clear();
        return 0;
    }
    tg_type = PyObject_GetAttrString(m, "TensorGuards");
    gsg_type = PyObject_GetAttrString(m, "GlobalStateGuard");
    if (gsg_type == NULL) {
        PyErr_Clear();
    }
    Py_DECREF(m);
    tg_check_fn = tg_type ? PyObject_GetAttrString(tg_type, "check") : NULL;
    tg_verbose_fn = tg_type ? PyObject_GetAttrString(tg_type, "check_verbose") : NULL;
    if (tg_check_fn == NULL || tg_verbose_fn == NULL) {
        Py_CLEAR(tg_type);
        Py_CLEAR(tg_check_fn);
        Py_CLEAR(tg_verbose_fn);
        PyErr_Clear();
        return 0;
    }
    if (PyObject_TypeCheck(tg_check_fn, &PyMethodDescr_Type)) {
        PyMethodDef *d = ((PyMethodDescrObject *)tg_check_fn)->d_method;
        if ((d->ml_flags & ~METH_COEXIST) == (METH_VARARGS | METH_KEYWORDS)) {
            tg_check_c = (PyCFunctionWithKeywords)(void (*)(void))d->ml_meth;
        }
    }
    str_dims_sizes = PyUnicode_InternFromString("dynamic_dims_sizes");
    str_dims_strides = PyUnicode_InternFromString("dynamic_dims_strides");
    str_check_names = PyUnicode_InternFromString("tensor_check_names");
    return str_dims_sizes && str_dims_strides && str_check_names ? 0 : -1;
}

int
cdyn_guards_tensor_meta_active(void)
{
    return tm_api != NULL;
}

int
cdyn_guards_init(void)
{
    PyObject *torch_c = NULL;
    int rc = -1;
    if (tensor_base_type != NULL) {
        return 0;
    }
    torch_c = PyImport_ImportModule("torch._C");
    if (torch_c == NULL) {
        goto done;
    }
    PyObject *tb = PyObject_GetAttrString(torch_c, "TensorBase");
    if (tb == NULL) {
        goto done;
    }
    if (!PyType_Check(tb)) {
        Py_DECREF(tb);
        PyErr_SetString(PyExc_ImportError, "torch._C.TensorBase is not a type");
        goto done;
    }
    tensor_base_type = (PyTypeObject *)tb;
    if ((gs_dtype = find_getset("dtype")) == NULL || (gs_device = find_getset("device")) == NULL ||
        (gs_requires_grad = find_getset("requires_grad")) == NULL ||
        (gs_shape = find_getset("shape")) == NULL || (gs_is_cpu = find_getset("is_cpu")) == NULL ||
        (gs_is_nested = find_getset("is_nested")) == NULL) {
        goto done;
    }
    if ((m_stride = find_method("stride")) == NULL ||
        (m_is_contiguous = find_method("is_contiguous")) == NULL ||
        (m_storage_offset = find_method("storage_offset")) == NULL) {
        goto done;
    }
    if ((str_dim_marking = PyUnicode_InternFromString("_has_dynamo_dim_marking")) == NULL ||
        (str_dynamic_indices = PyUnicode_InternFromString("_dynamo_dynamic_indices")) == NULL ||
        (str_dynamo_guards = PyUnicode_InternFromString("torch._dynamo.guards")) == NULL) {
        goto done;
    }
    fn_is_grad_enabled = PyObject_GetAttrString(torch_c, "is_grad_enabled");
    fn_any_autocast = PyObject_GetAttrString(torch_c, "_is_any_autocast_enabled");
    if (fn_is_grad_enabled == NULL || fn_any_autocast == NULL) {
        goto done;
    }
    {
        PyObject *ft = PyObject_GetAttrString(torch_c, "_functorch");
        fn_peek_functorch = ft ? PyObject_GetAttrString(ft, "peek_interpreter_stack") : NULL;
        Py_XDECREF(ft);
        if (fn_peek_functorch == NULL) {
            goto done;
        }
    }
    if (tg_init() < 0) {
        goto done;
    }
    /* CDYNAMO_TENSOR_META=0: the Python-getter and TensorGuards paths (tests compare them) */
    if (getenv("CDYNAMO_TENSOR_META") == NULL || strcmp(getenv("CDYNAMO_TENSOR_META"), "0") != 0) {
        /* PyCapsule_Import reads the capsule as attributes of "cdynamo": import it first */
        PyObject *tm_mod = PyImport_ImportModule("cdynamo._tensor_meta");
        tm_api = tm_mod != NULL ? PyCapsule_Import(CDYN_TENSOR_META_CAPSULE, 0) : NULL;
        Py_XDECREF(tm_mod);   /* sys.modules keeps it */
        if (tm_api == NULL || tm_api->version != CDYN_TENSOR_META_VERSION) {
            tm_api = NULL;
            PyErr_Clear();   /* not built: the Python getters */
        }
    }
    {
        static const char *const classes[3] = {"ModuleList", "Sequential", "ModuleDict"};
        PyObject *nn = PyImport_ImportModule("torch.nn");
        str_len = PyUnicode_InternFromString("__len__");
        str_modules = PyUnicode_InternFromString("_modules");
        str_getattribute_name = PyUnicode_InternFromString("__getattribute__");
        object_getattribute_fn = str_getattribute_name == NULL ? NULL
            : PyDict_GetItemWithError(cdyn_type_dict(&PyBaseObject_Type), str_getattribute_name);
        for (int i = 0; nn != NULL && str_len != NULL && i < 3; i++) {
            PyObject *cls = PyObject_GetAttrString(nn, classes[i]);
            PyObject *f = cls != NULL && PyType_Check(cls)
                              ? PyDict_GetItemWithError(cdyn_type_dict((PyTypeObject *)cls), str_len)
                              : NULL;
            module_len_fns[i] = f != NULL && PyFunction_Check(f) ? Py_NewRef(f) : NULL;
            Py_XDECREF(cls);
        }
        Py_XDECREF(nn);
        PyErr_Clear();   /* without them LENGTH_CHECK calls __len__ */
        if (str_len == NULL || str_modules == NULL || object_getattribute_fn == NULL) {
            goto done;
        }
    }
    rc = 0;
done:
    if (rc < 0) {
        Py_CLEAR(tensor_base_type);
        Py_CLEAR(m_stride);
        Py_CLEAR(m_is_contiguous);
    }
    Py_XDECREF(torch_c);
    return rc;
}
