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
 * The slow path (first_failure, describe) rebuilds everything and formats messages.
 */
#include "guards.h"
#include "source.h"

typedef enum {
    G_TENSOR = 0,
    G_EQUALS,
    G_TYPE,
    G_ID,
    G_FUNCTION,
    G_GRAD_MODE,
    G_LEN,
} guard_kind;

static const char *const guard_kind_names[] = {
    "TENSOR_MATCH", "EQUALS_MATCH", "TYPE_MATCH", "ID_MATCH", "FUNCTION_MATCH", "GRAD_MODE",
    "LENGTH_CHECK",
};

typedef struct {
    guard_kind kind;
    PyObject *source;      /* strong cdyn_source; NULL for GRAD_MODE */
    PyObject *value;       /* strong: EQUALS value, TYPE type, ID/FUNCTION object,
                              TENSOR Python type; NULL for GRAD_MODE */
    int flag;              /* GRAD_MODE: enabled; TENSOR: requires_grad */
    Py_ssize_t len;        /* LENGTH_CHECK: expected length */
    /* TENSOR_MATCH only */
    PyObject *dtype;       /* strong */
    PyObject *device;      /* strong torch.device */
    int device_is_cpu;
    int use_contiguous;    /* check is_contiguous() instead of the stride tuple */
    int ndim;
    int64_t *sizes;        /* PyMem, ndim entries each (one block: sizes then strides) */
    int64_t *strides;
} guard;

struct cdyn_guards {
    guard *items;          /* PyMem */
    Py_ssize_t len, cap;
};

/* Resolved once by cdyn_guards_init (strong references kept for the process lifetime). */
static PyTypeObject *tensor_base_type;      /* torch._C.TensorBase */
static PyGetSetDef *gs_dtype, *gs_device, *gs_requires_grad, *gs_shape, *gs_is_cpu;
static PyObject *m_stride, *m_is_contiguous; /* method descriptors */
static PyObject *fn_is_grad_enabled;         /* torch._C.is_grad_enabled */
static PyObject *fn_peek_functorch;          /* torch._C._functorch.peek_interpreter_stack */

/* ---- construction ------------------------------------------------------------------ */

cdyn_guards *
cdyn_guards_new(void)
{
    cdyn_guards *g = PyMem_Calloc(1, sizeof(cdyn_guards));
    if (g == NULL) {
        PyErr_NoMemory();
    }
    return g;
}

/* Release what one guard owns. */
static void
guard_clear(guard *gd)
{
    Py_CLEAR(gd->source);
    Py_CLEAR(gd->value);
    Py_CLEAR(gd->dtype);
    Py_CLEAR(gd->device);
    PyMem_Free(gd->sizes);
    gd->sizes = gd->strides = NULL;
}

void
cdyn_guards_free(cdyn_guards *g)
{
    if (g == NULL) {
        return;
    }
    for (Py_ssize_t i = 0; i < g->len; i++) {
        guard_clear(&g->items[i]);
    }
    PyMem_Free(g->items);
    PyMem_Free(g);
}

Py_ssize_t
cdyn_guards_len(const cdyn_guards *g)
{
    return g->len;
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

/* Append a zeroed guard of `kind` on `source` (borrowed, may be NULL); returns a pointer
 * into the array (valid until the next append), or NULL with MemoryError. */
static guard *
guards_append(cdyn_guards *g, guard_kind kind, PyObject *source)
{
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
cdyn_guards_add_grad_mode(cdyn_guards *g, int enabled)
{
    if (guards_contain(g, G_GRAD_MODE, NULL)) {
        return 0;
    }
    guard *gd = guards_append(g, G_GRAD_MODE, NULL);
    if (gd == NULL) {
        return -1;
    }
    gd->flag = enabled != 0;
    return 0;
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

/* Element-wise check of a tuple of ints against expected[0..n). 1 equal, 0 differ
 * (with *why), -1 error. `what` is "size" or "stride". */
static int
check_int64s(PyObject *tup, const int64_t *expected, int n, const char *what, why_t why)
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
        if ((int64_t)v != expected[i]) {
            return fail_with(why, "%s mismatch at index %d. expected %lld, actual %lld", what, i,
                             (long long)expected[i], v);
        }
    }
    return 1;
}

/* TENSOR_MATCH on v (borrowed). 1 pass, 0 fail, -1 error. */
static int
check_tensor(const guard *gd, PyObject *v, why_t why)
{
    PyObject *tmp = NULL;
    int rc = -1;
    if ((PyObject *)Py_TYPE(v) != gd->value) {
        return fail_with(why, "type %s != %s", ((PyTypeObject *)gd->value)->tp_name,
                         Py_TYPE(v)->tp_name);
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
    if (!PyTuple_Check(tmp) || PyTuple_GET_SIZE(tmp) != gd->ndim) {
        rc = fail_with(why, "ndim mismatch. expected %d, actual %zd", gd->ndim,
                       PyTuple_Check(tmp) ? PyTuple_GET_SIZE(tmp) : (Py_ssize_t)-1);
        goto done;
    }
    rc = check_int64s(tmp, gd->sizes, gd->ndim, "size", why);
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
    rc = check_int64s(tmp, gd->strides, gd->ndim, "stride", why);
done:
    Py_XDECREF(tmp);
    return rc;
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
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

/* 1 when grad mode is enabled, 0 when not, -1 on error. */
static int
grad_mode_enabled(void)
{
    PyObject *r = PyObject_Vectorcall(fn_is_grad_enabled, NULL, 0, NULL);
    if (r == NULL) {
        return -1;
    }
    int on = r == Py_True;
    Py_DECREF(r);
    return on;
}

/* Check one guard. 1 pass, 0 fail (with *why when asked), -1 internal error. */
static int
check_one(const guard *gd, PyObject *const *localsplus, PyFunctionObject *func,
          PyObject *globals, PyObject *builtins, why_t why, cdyn_source_memo *memo)
{
    PyObject *v = NULL, *owned = NULL;
    int rc = -1;
    if (gd->kind == G_GRAD_MODE) {
        int on = grad_mode_enabled(), on_stack;
        PyObject *ft;
        if (on < 0) {
            return -1;
        }
        /* entries are compiled outside torch.func transforms (translate.c): under vmap/grad
           the inputs are wrapped tensors a compiled graph cannot take */
        ft = PyObject_Vectorcall(fn_peek_functorch, NULL, 0, NULL);
        if (ft == NULL) {
            return -1;
        }
        on_stack = ft != Py_None;
        Py_DECREF(ft);
        if (on_stack) {
            return fail_with(why, "a torch.func transform (vmap/grad) is running");
        }
        if (on == gd->flag) {
            return 1;
        }
        return fail_with(why, "expected %s, actual %s", gd->flag ? "enabled" : "disabled",
                         on ? "enabled" : "disabled");
    }
    cdyn_source *src = (cdyn_source *)gd->source;
    if (src->kind == CDYN_SRC_LOCAL) {
        v = localsplus[src->index];    /* borrowed */
        if (v == NULL) {
            return fail_with(why, "local is unbound");
        }
    }
    else {
        owned = v = cdyn_source_eval_memo(src, localsplus, func, globals, builtins, memo);
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
        rc = check_tensor(gd, v, why);
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
    case G_GRAD_MODE:
        break;
    }
    Py_XDECREF(owned);
    return rc;
}

int
cdyn_guards_check(const cdyn_guards *g, PyObject *const *localsplus, PyFunctionObject *func,
                  PyObject *globals, PyObject *builtins)
{
    cdyn_source_memo memo;
    int r = 1;
    memo.n = 0;
    for (Py_ssize_t i = 0; i < g->len && r == 1; i++) {
        r = check_one(&g->items[i], localsplus, func, globals, builtins, NULL, &memo);
    }
    cdyn_source_memo_clear(&memo);
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
cdyn_guards_first_failure(const cdyn_guards *g, PyObject *const *localsplus,
                          PyFunctionObject *func, PyObject *globals, PyObject *builtins)
{
    PyObject *why = NULL, *name = NULL, *res = NULL;
    for (Py_ssize_t i = 0; i < g->len; i++) {
        const guard *gd = &g->items[i];
        int r = check_one(gd, localsplus, func, globals, builtins, &why, NULL);
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
    res = Py_NewRef(Py_None);
done:
    Py_XDECREF(why);
    Py_XDECREF(name);
    return res;
}

/* ---- describe ---------------------------------------------------------------------- */

/* New str for one guard in the seeds' form (see guards.h). */
static PyObject *
guard_describe(const guard *gd)
{
    PyObject *head = NULL, *res = NULL;
    const char *kind = guard_kind_names[gd->kind];
    if (gd->kind == G_GRAD_MODE) {
        return PyUnicode_FromFormat("GRAD_MODE %s", gd->flag ? "enabled" : "disabled");
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
    if (head == NULL || (gd->kind != G_EQUALS && gd->kind != G_LEN)) {
        return head;
    }
    res = gd->kind == G_LEN ? PyUnicode_FromFormat("%U %zd", head, gd->len)
                            : PyUnicode_FromFormat("%U %R", head, gd->value);
    Py_DECREF(head);
    return res;
}

PyObject *
cdyn_guards_describe(const cdyn_guards *g)
{
    PyObject *list = PyList_New(g->len);
    if (list == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < g->len; i++) {
        PyObject *s = guard_describe(&g->items[i]);
        if (s == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, s);
    }
    return list;
}

/* ---- init -------------------------------------------------------------------------- */

/* The getset def behind TensorBase.<name>, or NULL with an exception. */
static PyGetSetDef *
find_getset(const char *name)
{
    PyObject *d = PyDict_GetItemString(tensor_base_type->tp_dict, name);   /* borrowed */
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
    PyObject *d = PyDict_GetItemString(tensor_base_type->tp_dict, name);   /* borrowed */
    if (d == NULL) {
        PyErr_Format(PyExc_ImportError, "torch._C.TensorBase.%s not found", name);
        return NULL;
    }
    return Py_NewRef(d);
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
        (gs_shape = find_getset("shape")) == NULL || (gs_is_cpu = find_getset("is_cpu")) == NULL) {
        goto done;
    }
    if ((m_stride = find_method("stride")) == NULL ||
        (m_is_contiguous = find_method("is_contiguous")) == NULL) {
        goto done;
    }
    fn_is_grad_enabled = PyObject_GetAttrString(torch_c, "is_grad_enabled");
    if (fn_is_grad_enabled == NULL) {
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
