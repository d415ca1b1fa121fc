/* values/ndarray.c: NumPy, traced as torch ops through torch._numpy (as torch._dynamo does).
 *
 *   NDARRAY  u.tensor (fake, node)  a numpy.ndarray made in the trace (x.numpy(), a numpy
 *                                   function's result) or an input array: the tensor that
 *                                   backs it (its fake tensor and FX node); bits
 *                                   NDARRAY_SCALAR: numpy gives a numpy scalar there
 *   NPFN     u.obj.obj              a numpy callable with a torch._numpy counterpart (np.sum,
 *                                   np.linalg.norm, np.random.randn, ...), numpy.dtype /
 *                                   iinfo / finfo or a numpy scalar type (np.float32)
 *
 * Numpy functions, ndarray methods, attributes and operators on ndarrays are recorded as calls
 * of the wrappers of cdynamo/_numpy.py (torch._numpy on tensors, tensors out); their tensor
 * results are ndarrays again. Each recorded call is checked against numpy itself run on zeros
 * like its arguments (glue check_call): a dtype, shape or structure torch._numpy would get
 * wrong is a graph break, and numpy's container types and scalars are kept. Metadata (shape,
 * strides, dtype, ...) are constants; numpy calls on constants fold when they give constants
 * (arrays of constants are traced, numpy.random always is). An ndarray that leaves the graph is
 * rebuilt by the generated code as _numpy.to_numpy(<graph output>), or from its source for an
 * input array. Anything that needs the array's data (bool(a), a.tolist(), a.item()), numpy
 * callables without a torch._numpy counterpart, torch functions other than from_numpy /
 * as_tensor / asarray on an ndarray, and operators mixing ndarrays with tensors are graph
 * breaks with a reason starting "numpy: " (catalogue CDB0050).
 */
#include "../tx.h"
#include "../codegen.h"

/* numpy's types once numpy is imported (this file never imports numpy itself: no numpy
 * object can exist before), the glue module cdynamo._numpy and torch functions; all strong,
 * kept for the process. */
static PyObject *np_ndarray, *np_number, *np_bool, *np_generic, *np_dtype, *np_int64,
    *np_float64, *glue_mod;
static PyObject *fn_from_numpy, *fn_as_tensor, *fn_asarray, *fn_tensor, *s_view_as, *s_detach, *s_cpu;
static PyObject *s_to, *kw_copy;   /* "to", ("copy",) */

/* 1 when numpy has been imported (its types are then cached), else 0. Never fails. */
static int
numpy_loaded(void)
{
    static PyObject *s_numpy;
    enum { N = 7 };
    PyObject *np = NULL, *t[N] = {NULL};
    static const char *const names[N] = {"ndarray", "number", "bool_", "generic", "dtype",
                                         "int64", "float64"};
    int ok = 1;
    if (np_ndarray != NULL) {
        return 1;
    }
    if (s_numpy == NULL && (s_numpy = PyUnicode_InternFromString("numpy")) == NULL) {
        PyErr_Clear();
        return 0;
    }
    np = PyImport_GetModule(s_numpy);
    for (int i = 0; np != NULL && i < N; i++) {
        ok = ok && (t[i] = PyObject_GetAttrString(np, names[i])) != NULL;
    }
    Py_XDECREF(np);
    if (np == NULL || !ok) {
        PyErr_Clear();
        for (int i = 0; i < N; i++) {
            Py_XDECREF(t[i]);
        }
        return 0;
    }
    np_number = t[1];
    np_bool = t[2];
    np_generic = t[3];
    np_dtype = t[4];
    np_int64 = t[5];
    np_float64 = t[6];
    np_ndarray = t[0];   /* last: it marks the set as complete */
    return 1;
}

/* The glue module cdynamo._numpy (borrowed), importing it and caching torch's functions on
 * first use; NULL with an exception. */
static PyObject *
glue(void)
{
    PyObject *torch = NULL, *mod = NULL;
    if (glue_mod != NULL) {
        return glue_mod;
    }
    torch = PyImport_ImportModule("torch");
    mod = torch ? PyImport_ImportModule("cdynamo._numpy") : NULL;
    if (mod != NULL && fn_from_numpy == NULL) {
        fn_from_numpy = PyObject_GetAttrString(torch, "from_numpy");
        fn_as_tensor = PyObject_GetAttrString(torch, "as_tensor");
        fn_asarray = PyObject_GetAttrString(torch, "asarray");
        fn_tensor = PyObject_GetAttrString(torch, "tensor");
        s_to = PyUnicode_InternFromString("to");
        kw_copy = Py_BuildValue("(s)", "copy");
        s_view_as = PyUnicode_InternFromString("view_as");
        s_detach = PyUnicode_InternFromString("detach");
        s_cpu = PyUnicode_InternFromString("cpu");
    }
    if (mod != NULL && fn_from_numpy && fn_as_tensor && fn_asarray && fn_tensor && s_view_as &&
        s_detach && s_cpu && s_to && kw_copy) {
        glue_mod = Py_NewRef(mod);
    }
    else if (mod != NULL) {
        PyErr_SetString(PyExc_ImportError, "cdynamo: torch.from_numpy/as_tensor/asarray");
    }
    Py_XDECREF(mod);
    Py_XDECREF(torch);
    return glue_mod;
}

/* glue.<name>(args...) as a new reference, NULL with an exception. */
static PyObject *
glue_call(const char *name, PyObject *a, PyObject *b)
{
    PyObject *g = glue(), *fn = NULL, *r = NULL;
    if (g == NULL) {
        return NULL;
    }
    fn = PyObject_GetAttrString(g, name);
    if (fn != NULL) {
        r = b ? PyObject_CallFunctionObjArgs(fn, a, b, NULL) : PyObject_CallOneArg(fn, a);
    }
    Py_XDECREF(fn);
    return r;
}

/* 1 when cdynamo.config.trace_numpy is on (read while tracing), 0 when off, -1 on error. */
static int
trace_numpy(void)
{
    return cdyn_config_bool("trace_numpy");
}

/* ---- classification (wrap.c) ----------------------------------------------------------- */

/* numpy scalars and numpy.dtype objects (constants, EQUALS-guarded). */
int
cdyn_is_numpy_constant(PyObject *obj)
{
    if (!numpy_loaded()) {
        return 0;
    }
    return PyObject_TypeCheck(obj, (PyTypeObject *)np_dtype) || cdyn_is_numpy_scalar(obj);
}

/* numpy scalars (numpy.number, numpy.bool_ instances). */
int
cdyn_is_numpy_scalar(PyObject *obj)
{
    return numpy_loaded() && (PyObject_TypeCheck(obj, (PyTypeObject *)np_number) ||
                              PyObject_TypeCheck(obj, (PyTypeObject *)np_bool));
}

int
cdyn_numpy_scalar_kind(PyObject *obj)
{
    if (!numpy_loaded()) {
        return 0;
    }
    return (PyObject *)Py_TYPE(obj) == np_int64 ? 1 : (PyObject *)Py_TYPE(obj) == np_float64 ? 2 : 0;
}

PyObject *
cdyn_numpy_scalar_type(int kind)
{
    if (!numpy_loaded()) {
        return NULL;
    }
    return kind == 1 ? np_int64 : kind == 2 ? np_float64 : np_bool;
}

/* Exactly numpy.ndarray (subclasses such as np.matrix are opaque objects). */
int
cdyn_is_numpy_array(PyObject *obj)
{
    return numpy_loaded() && Py_TYPE(obj) == (PyTypeObject *)np_ndarray;
}

/* 1 when obj may be a numpy callable: numpy's functions, ufuncs and the bound methods of its
 * global RandomState are defined in numpy's modules; cheap test before the glue's lookup. */
static int
maybe_numpy(PyObject *obj)
{
    PyObject *self;
    if (cdyn_module_startswith(obj, "numpy")) {
        return 1;
    }
    if (PyCFunction_Check(obj) && (self = PyCFunction_GET_SELF(obj)) != NULL) {
        return cdyn_module_startswith((PyObject *)Py_TYPE(self), "numpy");
    }
    return strcmp(Py_TYPE(obj)->tp_name, "numpy.ufunc") == 0;
}

/* A numpy callable traced as an NPFN (glue: constant_collection, tnp_counterpart). */
int
cdyn_is_numpy_callable(PyObject *obj)
{
    PyObject *r = NULL;
    int yes;
    if (!numpy_loaded() || !maybe_numpy(obj)) {
        return 0;
    }
    r = glue_call("constant_collection", obj, NULL);
    yes = r == Py_True;
    Py_XDECREF(r);
    if (!yes && r != NULL) {
        r = glue_call("tnp_counterpart", obj, NULL);
        yes = r != NULL && r != Py_None;
        Py_XDECREF(r);
    }
    PyErr_Clear();
    return yes;
}

/* ---- values ------------------------------------------------------------------------------ */

/* bits of an NDARRAY: numpy gives a numpy scalar here (np.sum(a), a[0, 0]) where the graph
 * has a 0-d array: rebuilt as one, typed as one (torch._dynamo gives 0-d arrays). */
#define NDARRAY_SCALAR 0x1u

static int
is_scalar(PyObject *v)
{
    return V(v)->kind == VK_NDARRAY && (V(v)->bits & NDARRAY_SCALAR);
}

/* New NDARRAY of fake and node (borrowed); source (borrowed) NULL unless an input array. */
static PyObject *
value_ndarray(PyObject *fake, PyObject *node, PyObject *source)
{
    PyObject *v = cdyn_value_alloc(VK_NDARRAY, source);
    if (v != NULL) {
        V(v)->u.tensor.fake = Py_NewRef(fake);
        V(v)->u.tensor.node = Py_NewRef(node);
    }
    return v;
}

int
cdyn_any_ndarray(PyObject *const *args, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (V(args[i])->kind == VK_NDARRAY) {
            return 1;
        }
    }
    return 0;
}

/* Array arguments of a numpy call, looking into tuples and lists: bit 1 an ndarray, bit 2 a
 * tensor (numpy converts it itself: see probe()). */
static int
array_args(PyObject *const *args, Py_ssize_t n)
{
    int r = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        cdyn_value *v = V(args[i]);
        if (v->kind == VK_NDARRAY) {
            r |= 1;
        }
        else if (v->kind == VK_TENSOR) {
            r |= 2;
        }
        else if ((v->kind == VK_TUPLE || v->kind == VK_LIST) && v->u.seq.items != NULL) {
            r |= array_args(&PyList_GET_ITEM(v->u.seq.items, 0), PyList_GET_SIZE(v->u.seq.items));
        }
    }
    return r;
}

/* A value as an argument of a recorded numpy call (new ref): an ndarray becomes the tensor
 * backing it, a numpy dtype or scalar type its name (torch._numpy reads dtype names, and they
 * print as valid Python), a numpy scalar a Python number, tuples and lists item by item. */
static tr_status
to_graph_arg(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    cdyn_value *x = V(v);
    PyObject *real = cdyn_v_real(v), *items = NULL;
    tr_status st = cdyn_tx_materialize(tx, v);
    if (st != TR_OK) {
        return st;
    }
    if (x->kind == VK_NDARRAY) {
        *out = cdyn_value_tensor(x->u.tensor.fake, x->u.tensor.node, NULL);
        return *out ? TR_OK : TR_ERROR;
    }
    if (real != NULL && x->kind == VK_CONST && numpy_loaded() &&
        PyObject_TypeCheck(real, (PyTypeObject *)np_dtype)) {
        PyObject *type = PyObject_GetAttrString(real, "type");
        *out = type ? cdyn_value_const_steal(PyObject_GetAttrString(type, "__name__")) : NULL;
        Py_XDECREF(type);
        return *out ? TR_OK : TR_ERROR;
    }
    if (real != NULL && x->kind == VK_CONST && cdyn_is_numpy_scalar(real)) {
        *out = cdyn_value_const_steal(PyObject_CallMethod(real, "item", NULL));
        return *out ? TR_OK : TR_ERROR;
    }
    if (real != NULL && x->kind != VK_CONST && PyType_Check(real) &&
        ((numpy_loaded() && PyType_IsSubtype((PyTypeObject *)real, (PyTypeObject *)np_generic)) ||
         real == (PyObject *)&PyFloat_Type || real == (PyObject *)&PyLong_Type ||
         real == (PyObject *)&PyBool_Type || real == (PyObject *)&PyComplex_Type)) {
        *out = cdyn_value_const_steal(PyObject_GetAttrString(real, "__name__"));
        return *out ? TR_OK : TR_ERROR;
    }
    if ((x->kind == VK_TUPLE || x->kind == VK_LIST) && x->u.seq.items != NULL &&
        x->u.seq.nt_type == NULL) {
        Py_ssize_t n = PyList_GET_SIZE(x->u.seq.items);
        items = PyList_New(n);
        for (Py_ssize_t i = 0; items && i < n; i++) {
            PyObject *item = NULL;
            st = to_graph_arg(tx, PyList_GET_ITEM(x->u.seq.items, i), &item);
            if (st != TR_OK) {
                Py_DECREF(items);
                return st;
            }
            PyList_SET_ITEM(items, i, item);
        }
        *out = items ? cdyn_value_seq_list(x->kind, items) : NULL;
        Py_XDECREF(items);
        return *out ? TR_OK : TR_ERROR;
    }
    *out = Py_NewRef(v);
    return TR_OK;
}

/* A value of a recorded call's result as numpy sees it (new ref): tensors are ndarrays,
 * through tuples and lists. */
static tr_status
from_graph_result(PyObject *v, PyObject **out)
{
    cdyn_value *x = V(v);
    PyObject *items = NULL;
    if (x->kind == VK_TENSOR) {
        *out = value_ndarray(x->u.tensor.fake, x->u.tensor.node, NULL);
        return *out ? TR_OK : TR_ERROR;
    }
    if ((x->kind == VK_TUPLE || x->kind == VK_LIST) && x->u.seq.items != NULL) {
        Py_ssize_t n = PyList_GET_SIZE(x->u.seq.items);
        items = PyList_New(n);
        for (Py_ssize_t i = 0; items && i < n; i++) {
            PyObject *item = NULL;
            if (from_graph_result(PyList_GET_ITEM(x->u.seq.items, i), &item) != TR_OK) {
                Py_CLEAR(items);
                break;
            }
            PyList_SET_ITEM(items, i, item);
        }
        *out = items ? cdyn_value_seq_list(x->kind, items) : NULL;
        if (*out != NULL && x->u.seq.nt_type != NULL) {
            V(*out)->u.seq.nt_type = Py_NewRef(x->u.seq.nt_type);
        }
        Py_XDECREF(items);
        return *out ? TR_OK : TR_ERROR;
    }
    *out = Py_NewRef(v);
    return TR_OK;
}

/* Record target(*args) (args values, the last len(kwnames) named) as a call_function node on
 * the arrays' tensors; *out: the result with ndarrays for tensors. */
static tr_status
record(cdyn_tx *tx, PyObject *target, PyObject *const *args, Py_ssize_t nargs,
       PyObject *kwnames, PyObject **out)
{
    PyObject *conv[64] = {NULL}, *res = NULL;
    tr_status st = TR_OK;
    Py_ssize_t done = 0;
    if (nargs > 64) {
        return cdyn_tx_unsupported(tx, "numpy: too many arguments");
    }
    for (; done < nargs && st == TR_OK; done++) {
        st = to_graph_arg(tx, args[done], &conv[done]);
    }
    if (st == TR_OK) {
        st = cdyn_tx_graph_call(tx, "call_function", target, NULL, conv, nargs, kwnames, &res);
    }
    if (st == TR_OK) {
        st = from_graph_result(res, out);
    }
    Py_XDECREF(res);
    for (Py_ssize_t i = 0; i < done; i++) {
        Py_XDECREF(conv[i]);
    }
    return st;
}

/* Record a call of the cached glue target glue.<maker>(key). */
static tr_status
record_wrapped(cdyn_tx *tx, const char *maker, PyObject *key, PyObject *const *args,
               Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyObject *target = glue_call(maker, key, NULL);
    tr_status st;
    if (target == NULL) {
        return TR_ERROR;
    }
    st = record(tx, target, args, nargs, kwnames, out);
    Py_DECREF(target);
    return st;
}

/* ---- from tensors and back --------------------------------------------------------------- */

/* A recorded x.<name>() (call_method) on the tensor value self; *out the tensor value. */
static tr_status
tensor_method(cdyn_tx *tx, PyObject *self, PyObject *name, int twice, PyObject **out)
{
    PyObject *args[2] = {self, self};
    return cdyn_tx_graph_call(tx, "call_method", name, NULL, args, twice ? 2 : 1, NULL, out);
}

tr_status
cdyn_ndarray_from_tensor(cdyn_tx *tx, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames, PyObject **out)
{
    PyObject *t = Py_NewRef(self), *r = NULL, *why = NULL;
    tr_status st = TR_OK;
    int force = 0;
    if (nargs > 1 || (nargs == 1 && (kwnames == NULL || V(args[0])->kind != VK_CONST ||
                                     !cdyn_name_is(PyTuple_GET_ITEM(kwnames, 0), "force")))) {
        Py_DECREF(t);
        return cdyn_tx_unsupported(tx, "numpy: Tensor.numpy() with these arguments");
    }
    if (nargs == 1 && (force = PyObject_IsTrue(V(args[0])->u.cnst.value)) < 0) {
        Py_DECREF(t);
        return TR_ERROR;
    }
    if (glue() == NULL || trace_numpy() != 1) {
        Py_DECREF(t);
        PyErr_Clear();
        return cdyn_tx_unsupported(tx, "numpy: Tensor.numpy() is not traced (numpy cannot be "
                                       "imported, or cdynamo.config.trace_numpy is off)");
    }
    if (force) {   /* as eager: detached, on the CPU */
        st = tensor_method(tx, t, s_detach, 0, &r);
        Py_SETREF(t, r);
        r = NULL;
        if (st == TR_OK) {
            st = tensor_method(tx, t, s_cpu, 0, &r);
            Py_XSETREF(t, r);
            r = NULL;
        }
    }
    if (st == TR_OK) {
        why = glue_call("numpy_refusal", V(t)->u.tensor.fake, NULL);
        if (why == NULL) {
            st = TR_ERROR;
        }
        else if (why != Py_None) {
            st = cdyn_tx_unsupported(tx, "numpy: %U", why);
        }
    }
    if (st == TR_OK && force) {   /* the detached tensor is already a node of its own */
        r = Py_NewRef(t);
    }
    else if (st == TR_OK) {   /* a view of the tensor stands for the array (same memory) */
        st = tensor_method(tx, t, s_view_as, 1, &r);
    }
    if (st == TR_OK) {
        *out = value_ndarray(V(r)->u.tensor.fake, V(r)->u.tensor.node, NULL);
        st = *out ? TR_OK : TR_ERROR;
    }
    Py_XDECREF(why);
    Py_XDECREF(r);
    Py_XDECREF(t);
    return st;
}

/* torch.tensor(a[, dtype=][, device=]) of a traced ndarray a: a copy of the tensor backing
 * it (same dtype, as torch.tensor gives for an ndarray), recorded as
 * t.to(dtype=, device=, copy=True): recording torch.tensor on a tensor would warn at every
 * call, which eager does not. TR_UNSUPPORTED for other keywords (requires_grad=, ...). */
static tr_status
tensor_of_ndarray(cdyn_tx *tx, PyObject *const *args, PyObject *kwnames, PyObject **out)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *all[4] = {NULL}, *names = NULL;
    tr_status st = TR_ERROR;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *k = PyTuple_GET_ITEM(kwnames, i);
        if (!cdyn_name_is(k, "dtype") && !cdyn_name_is(k, "device")) {
            return cdyn_tx_unsupported(tx, "numpy: torch.tensor of a numpy ndarray with %U=", k);
        }
    }
    if ((all[0] = cdyn_value_tensor(V(args[0])->u.tensor.fake, V(args[0])->u.tensor.node,
                                    NULL)) == NULL ||
        (all[nkw + 1] = cdyn_value_const(Py_True)) == NULL ||
        (names = nkw ? PySequence_Concat(kwnames, kw_copy) : Py_NewRef(kw_copy)) == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < nkw; i++) {
        all[i + 1] = Py_NewRef(args[i + 1]);
    }
    st = cdyn_tx_graph_call(tx, "call_method", s_to, NULL, all, nkw + 2, names, out);
done:
    for (int i = 0; i < 4; i++) {
        Py_XDECREF(all[i]);
    }
    Py_XDECREF(names);
    return st;
}

tr_status
cdyn_ndarray_torch_call(cdyn_tx *tx, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames, PyObject **out)
{
    PyObject *conv = NULL, *all[16];
    tr_status st;
    if (glue() == NULL) {
        return TR_ERROR;
    }
    if (fn == fn_from_numpy && nargs >= 1 && is_scalar(args[0])) {
        return cdyn_tx_unsupported(tx, "numpy: torch.from_numpy of a numpy scalar raises");
    }
    if (fn == fn_tensor && nargs >= 1 && nargs <= 3 && V(args[0])->kind == VK_NDARRAY &&
        nargs - (kwnames ? PyTuple_GET_SIZE(kwnames) : 0) == 1) {
        return tensor_of_ndarray(tx, args, kwnames, out);
    }
    if (!(fn == fn_from_numpy || fn == fn_as_tensor || fn == fn_asarray) || nargs < 1 ||
        nargs > 16 || V(args[0])->kind != VK_NDARRAY || cdyn_any_ndarray(args + 1, nargs - 1) ||
        (fn == fn_from_numpy && nargs != 1)) {
        return cdyn_tx_unsupported(tx, "numpy: %R on a numpy ndarray", fn);
    }
    /* the tensor backing the array; torch.from_numpy(a) is torch.as_tensor(a) (shared
       memory), as torch._dynamo records it */
    conv = cdyn_value_tensor(V(args[0])->u.tensor.fake, V(args[0])->u.tensor.node, NULL);
    if (conv == NULL) {
        return TR_ERROR;
    }
    all[0] = conv;
    for (Py_ssize_t i = 1; i < nargs; i++) {
        all[i] = args[i];
    }
    st = cdyn_tx_graph_call(tx, "call_function", fn == fn_from_numpy ? fn_as_tensor : fn, NULL,
                            all, nargs, kwnames, out);
    Py_DECREF(conv);
    return st;
}

tr_status
cdyn_ndarray_wrap_input(cdyn_tx *tx, PyObject *arr, PyObject *source, PyObject **out)
{
    PyObject *g = glue(), *conv = NULL, *t = NULL, *csrc = NULL, *tv = NULL;
    tr_status st = TR_ERROR;
    *out = NULL;
    switch (trace_numpy()) {
    case 0:
        return TR_OK;   /* not traced: an opaque object */
    case 1:
        break;
    default:
        return TR_ERROR;
    }
    if (g == NULL || (conv = PyObject_GetAttrString(g, "tensor_of_array")) == NULL) {
        return TR_ERROR;
    }
    t = PyObject_CallOneArg(conv, arr);
    if (t == NULL || t == Py_None) {   /* not traced: an opaque object */
        st = t ? TR_OK : TR_ERROR;
        goto done;
    }
    /* guards: the type, then TENSOR_MATCH on the tensor the array is seen as */
    csrc = cdyn_source_call(conv, source, "___from_numpy");
    if (csrc == NULL || cdyn_guards_add_type(tx->guards, source, Py_TYPE(arr)) < 0) {
        goto done;
    }
    st = cdyn_tx_wrap_tensor_input(tx, t, csrc, &tv);
    if (st == TR_OK) {
        *out = value_ndarray(V(tv)->u.tensor.fake, V(tv)->u.tensor.node, source);
        st = *out ? TR_OK : TR_ERROR;
    }
done:
    Py_XDECREF(conv);
    Py_XDECREF(t);
    Py_XDECREF(csrc);
    Py_XDECREF(tv);
    return st;
}

/* ---- numpy callables (NPFN) ----------------------------------------------------------------- */

/* 1 when the real object of v is fixed by its guards (constants; numpy, builtin and class
 * objects guarded by identity), not an OBJECT guarded by its type only. */
static int
is_fixed(PyObject *v)
{
    cdyn_vkind k = V(v)->kind;
    return k == VK_CONST || k == VK_NPFN || k == VK_CLASS || k == VK_BUILTIN;
}

/* The real object for v when it is fixed, through tuples and lists of such (new ref), or
 * NULL without an exception. */
static PyObject *
fixed_obj(PyObject *v)
{
    cdyn_value *x = V(v);
    PyObject *l = NULL;
    if (is_fixed(v)) {
        return Py_XNewRef(cdyn_v_real(v));
    }
    if ((x->kind == VK_TUPLE || x->kind == VK_LIST) && x->u.seq.items != NULL &&
        x->u.seq.nt_type == NULL) {
        Py_ssize_t n = PyList_GET_SIZE(x->u.seq.items);
        l = PyList_New(n);
        for (Py_ssize_t i = 0; l && i < n; i++) {
            PyObject *o = fixed_obj(PyList_GET_ITEM(x->u.seq.items, i));
            if (o == NULL) {
                Py_CLEAR(l);
                break;
            }
            PyList_SET_ITEM(l, i, o);
        }
        if (l != NULL && x->kind == VK_TUPLE) {
            Py_SETREF(l, PyList_AsTuple(l));
        }
        PyErr_Clear();
        return l;
    }
    return NULL;
}

/* A numpy call on constants only: run now when it gives a constant (a numpy scalar, a
 * Python number, a dtype, tuples of them): *out set. *out NULL (TR_OK) when it gives arrays
 * (then traced, as torch._dynamo does) or an argument is not a constant. */
static tr_status
fold(cdyn_tx *tx, PyObject *np_fn, PyObject *const *args, Py_ssize_t nargs,
     PyObject *kwnames, PyObject **out)
{
    PyObject *objs[32] = {NULL}, *res = NULL, *arr = NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, got = 0;
    tr_status st = TR_OK;
    *out = NULL;
    for (; got < nargs && nargs <= 32; got++) {
        if ((objs[got] = fixed_obj(args[got])) == NULL) {
            break;
        }
    }
    if (got == nargs && nargs <= 32) {
        res = PyObject_Vectorcall(np_fn, objs, nargs - nkw, kwnames);
        if (res == NULL) {
            st = cdyn_tx_unsupported(tx, "numpy: %R on these constants raises", np_fn);
        }
        else if ((arr = glue_call("holds_array", res, NULL)) == NULL) {
            st = TR_ERROR;
        }
        else if (arr == Py_False && cdyn_is_constant(res)) {
            *out = cdyn_value_const(res);
            st = *out ? TR_OK : TR_ERROR;
        }
    }
    for (Py_ssize_t i = 0; i < got; i++) {
        Py_XDECREF(objs[i]);
    }
    Py_XDECREF(res);
    Py_XDECREF(arr);
    return st;
}

/* A real object standing for value v in probe(): constants and real objects as they are, a
 * tensor its fake, an ndarray glue.array_probe(fake), tuples/lists item by item. New ref, or
 * NULL without an exception when v has no such object. */
static PyObject *
probe_obj(PyObject *v)
{
    cdyn_value *x = V(v);
    PyObject *real = cdyn_v_real(v), *l = NULL;
    if (x->kind == VK_TENSOR) {
        return Py_NewRef(x->u.tensor.fake);
    }
    if (x->kind == VK_NDARRAY) {
        PyObject *r = glue_call("array_probe", x->u.tensor.fake, is_scalar(v) ? Py_True : Py_False);
        PyErr_Clear();
        return r;
    }
    if ((x->kind == VK_TUPLE || x->kind == VK_LIST) && x->u.seq.items != NULL) {
        Py_ssize_t n = PyList_GET_SIZE(x->u.seq.items);
        l = PyList_New(n);
        for (Py_ssize_t i = 0; l && i < n; i++) {
            PyObject *o = probe_obj(PyList_GET_ITEM(x->u.seq.items, i));
            if (o == NULL) {
                Py_CLEAR(l);
                break;
            }
            PyList_SET_ITEM(l, i, o);
        }
        if (l != NULL && x->kind == VK_TUPLE) {
            Py_SETREF(l, PyList_AsTuple(l));
        }
        PyErr_Clear();
        return l;
    }
    return Py_XNewRef(real);
}

/* Make the fresh result value res of a recorded call what numpy gives (glue.check_call's
 * pair): container: numpy's tuple / named tuple / list type for a sequence result (or None);
 * scalars: a bool (res an array) or a tuple of bools (its items) marking numpy scalars. */
static tr_status
apply_fix(PyObject *res, PyObject *container, PyObject *scalars)
{
    cdyn_value *x = V(res);
    if (x->kind == VK_NDARRAY) {
        if (scalars == Py_True) {
            x->bits |= NDARRAY_SCALAR;
        }
        return TR_OK;
    }
    if (x->kind != VK_TUPLE && x->kind != VK_LIST) {
        return TR_OK;
    }
    if (PyType_Check(container)) {
        int is_list = PyType_IsSubtype((PyTypeObject *)container, &PyList_Type);
        x->kind = is_list ? VK_LIST : VK_TUPLE;
        Py_CLEAR(x->u.seq.nt_type);
        if (!is_list && container != (PyObject *)&PyTuple_Type) {
            x->u.seq.nt_type = Py_NewRef(container);
        }
    }
    for (Py_ssize_t i = 0; PyTuple_Check(scalars) && x->u.seq.items != NULL &&
                           i < PyTuple_GET_SIZE(scalars) && i < PyList_GET_SIZE(x->u.seq.items);
         i++) {
        PyObject *item = PyList_GET_ITEM(x->u.seq.items, i);
        if (PyTuple_GET_ITEM(scalars, i) == Py_True && V(item)->kind == VK_NDARRAY) {
            V(item)->bits |= NDARRAY_SCALAR;
        }
    }
    return TR_OK;
}

/* Check a recorded numpy call against numpy itself (glue.check_call: numpy run now on zeros
 * like the arguments; strict when some arguments are tensors). TR_OK (*res possibly turned
 * into numpy's container type), else unsupported with the reason. */
static tr_status
verify(cdyn_tx *tx, PyObject *np_fn, PyObject *const *args, Py_ssize_t nargs,
       PyObject *kwnames, PyObject *res, int strict)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *pos = PyTuple_New(nargs - nkw), *kw = PyDict_New(), *g = glue(), *fn = NULL,
             *why = NULL, *traced = NULL;
    tr_status st = TR_ERROR;
    for (Py_ssize_t i = 0; pos && kw && i < nargs; i++) {
        PyObject *o = probe_obj(args[i]);
        if (o == NULL) {
            st = strict ? cdyn_tx_unsupported(tx, "numpy: %S in a numpy call on a tensor",
                                              args[i])
                        : TR_OK;   /* cannot be checked: trusted, as torch._dynamo does */
            goto done;
        }
        if (i < nargs - nkw) {
            PyTuple_SET_ITEM(pos, i, o);
        }
        else {
            int e = PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i - (nargs - nkw)), o);
            Py_DECREF(o);
            if (e < 0) {
                goto done;
            }
        }
    }
    traced = probe_obj(res);
    if (traced == NULL) {
        st = TR_OK;
        goto done;
    }
    fn = (pos && kw && g) ? PyObject_GetAttrString(g, "check_call") : NULL;
    why = fn ? PyObject_CallFunctionObjArgs(fn, np_fn, pos, kw, traced,
                                            strict ? Py_True : Py_False, NULL) : NULL;
    if (why == NULL || why == Py_None) {
        st = why ? TR_OK : TR_ERROR;
    }
    else if (PyUnicode_Check(why)) {
        st = cdyn_tx_unsupported(tx, "numpy: %U", why);
    }
    else if (PyTuple_Check(why) && PyTuple_GET_SIZE(why) == 2) {
        st = apply_fix(res, PyTuple_GET_ITEM(why, 0), PyTuple_GET_ITEM(why, 1));
    }
    else {
        st = cdyn_tx_unsupported(tx, "numpy: %R gives a %R", np_fn, why);
    }
done:
    Py_XDECREF(pos);
    Py_XDECREF(kw);
    Py_XDECREF(fn);
    Py_XDECREF(why);
    Py_XDECREF(traced);
    return st;
}

/* numpy.dtype / iinfo / finfo of constants (numpy scalar types among them): built now and
 * used through a constant source (torch._dynamo folds them too). */
static tr_status
construct(cdyn_tx *tx, PyObject *cls, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames, PyObject **out)
{
    PyObject *objs[8], *real = NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    tr_status st;
    if (nargs > 8) {
        return cdyn_tx_unsupported(tx, "numpy: %R with too many arguments", cls);
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        objs[i] = is_fixed(args[i]) ? cdyn_v_real(args[i]) : NULL;
        if (objs[i] == NULL) {
            return cdyn_tx_unsupported(tx, "numpy: %R of a non-constant", cls);
        }
    }
    real = PyObject_Vectorcall(cls, objs, nargs - nkw, kwnames);
    if (real == NULL) {
        return cdyn_tx_unsupported(tx, "numpy: %R(...) raises", cls);
    }
    if (cdyn_is_constant(real)) {
        *out = cdyn_value_const_steal(real);
        return *out ? TR_OK : TR_ERROR;
    }
    st = cdyn_tx_wrap_fixed(tx, real, Py_None, out);
    Py_DECREF(real);
    return st;
}

/* Rename numpy's keyword names that torch._numpy spells differently (clip's a_min/a_max):
 * *renamed a new tuple, or NULL when nothing changes. 0 / -1. */
static int
patch_kwnames(PyObject *tnp_name, PyObject *kwnames, PyObject **renamed)
{
    Py_ssize_t n = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    *renamed = NULL;
    if (n == 0 || !PyUnicode_Check(tnp_name) || !cdyn_name_is(tnp_name, "clip")) {
        return 0;
    }
    *renamed = PyTuple_New(n);
    for (Py_ssize_t i = 0; *renamed && i < n; i++) {
        PyObject *k = PyTuple_GET_ITEM(kwnames, i);
        PyObject *nk = cdyn_name_is(k, "a_min") ? PyUnicode_FromString("min")
                       : cdyn_name_is(k, "a_max") ? PyUnicode_FromString("max") : Py_NewRef(k);
        if (nk == NULL) {
            Py_CLEAR(*renamed);
            break;
        }
        PyTuple_SET_ITEM(*renamed, i, nk);
    }
    return *renamed ? 0 : -1;
}

/* numpy returns the array passed as out= itself (or the tuple of them): *out (new,
 * replaced) becomes that value when the traced result is an array (or a sequence holding
 * one) and so is out=, so `res is out` holds as in eager. The recorded call wrote the
 * result into out's tensor. */
static int
holds_array(PyObject *v)
{
    PyObject *items = V(v)->u.seq.items;
    if (V(v)->kind == VK_NDARRAY) {
        return 1;
    }
    if ((V(v)->kind != VK_TUPLE && V(v)->kind != VK_LIST) || items == NULL) {
        return 0;
    }
    return cdyn_any_ndarray(&PyList_GET_ITEM(items, 0), PyList_GET_SIZE(items));
}

static void
returned_out(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t j = 0; j < nkw; j++) {
        PyObject *o = args[nargs - nkw + j];
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, j), "out") == 0) {
            if (holds_array(*out) && holds_array(o)) {
                Py_SETREF(*out, Py_NewRef(o));
            }
            return;
        }
    }
}

/* A numpy callable: dtype/iinfo/finfo/scalar types of constants are built now; a function on
 * constants folds when it gives constants; otherwise (arrays among the arguments, an array of
 * constants, numpy.random) it is recorded as torch._numpy's counterpart and checked. */
static tr_status
npfn_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames, PyObject **out)
{
    PyObject *obj = V(fn)->u.obj.obj, *tfn = NULL, *coll = NULL, *rnd = NULL, *name = NULL,
             *kw2 = NULL;
    tr_status st;
    int arrays;
    (void)fs;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (cdyn_sym_is_numpy(args[i])) {   /* it runs in Python on the numpy scalar */
            return cdyn_tx_unsupported(tx, "numpy: %R of a numpy scalar input made dynamic", obj);
        }
    }
    coll = glue_call("constant_collection", obj, NULL);
    if (coll == NULL) {
        return TR_ERROR;
    }
    Py_DECREF(coll);
    if (coll == Py_True) {
        return construct(tx, obj, args, nargs, kwnames, out);
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        st = cdyn_tx_materialize(tx, args[i]);
        if (st != TR_OK) {
            return st;
        }
    }
    tfn = glue_call("tnp_counterpart", obj, NULL);
    rnd = tfn ? glue_call("is_random", tfn, NULL) : NULL;
    if (rnd == NULL) {
        Py_XDECREF(tfn);
        return TR_ERROR;
    }
    arrays = array_args(args, nargs);
    if (tfn == Py_None) {
        st = cdyn_tx_unsupported(tx, "numpy: %R has no torch._numpy counterpart", obj);
    }
    else if ((arrays != 0 || rnd == Py_True) && trace_numpy() != 1) {
        PyErr_Clear();
        st = cdyn_tx_unsupported(tx, "numpy: call to %R is not traced "
                                     "(cdynamo.config.trace_numpy is off)", obj);
    }
    else if (arrays == 0 && rnd != Py_True) {
        st = fold(tx, obj, args, nargs, kwnames, out);
        if (st != TR_OK || *out != NULL) {
            Py_DECREF(tfn);
            Py_DECREF(rnd);
            return st;
        }
        if (trace_numpy() != 1) {   /* an array of constants (np.ones(3)): traced if on */
            PyErr_Clear();
            st = cdyn_tx_unsupported(tx, "numpy: call to %R is not traced "
                                         "(cdynamo.config.trace_numpy is off)", obj);
        }
    }
    else {
        st = TR_OK;
    }
    name = st == TR_OK ? PyObject_GetAttrString(tfn, "__name__") : NULL;
    if (st == TR_OK && (name == NULL || patch_kwnames(name, kwnames, &kw2) < 0)) {
        st = TR_ERROR;
    }
    if (st == TR_OK) {
        st = record_wrapped(tx, "function_target", tfn, args, nargs, kw2 ? kw2 : kwnames, out);
    }
    if (st == TR_OK && rnd != Py_True) {   /* (numpy.random is not run: it has a state) */
        st = verify(tx, obj, args, nargs, kwnames, *out, (arrays & 2) != 0);
        if (st != TR_OK) {
            Py_CLEAR(*out);
        }
    }
    if (st == TR_OK) {
        returned_out(args, nargs, kwnames, out);
    }
    Py_XDECREF(name);
    Py_XDECREF(kw2);
    Py_DECREF(tfn);
    Py_DECREF(rnd);
    return st;
}

/* np.linalg.norm.__name__ and the like: read from the real object, guarded. */
static tr_status
npfn_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    return cdyn_getattr_real(tx, v, name, 0, out);
}

static tr_status
npfn_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    (void)tx;
    (void)v;
    *out = 1;
    return TR_OK;
}

/* a.dtype == np.float32, np.float32 is np.float64: folded on the real objects (both fixed by
 * their guards). */
static tr_status
npfn_compare(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    PyObject *r;
    if (!is_fixed(a) || !is_fixed(b)) {
        return TR_NOTIMPL;
    }
    r = PyObject_RichCompare(cdyn_v_real(a), cdyn_v_real(b), op);
    if (r == NULL) {
        return cdyn_tx_unsupported(tx, "numpy: comparison raises");
    }
    if (!cdyn_is_constant(r)) {
        Py_DECREF(r);
        return cdyn_tx_unsupported(tx, "numpy: comparison gives a %s", Py_TYPE(r)->tp_name);
    }
    *out = cdyn_value_const_steal(r);
    return *out ? TR_OK : TR_ERROR;
}

const cdyn_vtable cdyn_npfn_vt = {
    .name = "NumpyVariable",
    .getattr = npfn_getattr,
    .call = npfn_call,
    .compare = npfn_compare,
    .truth = npfn_truth,
    .python_type = cdyn_python_type_obj,
    .collect = cdyn_collect_nothing,
    .reconstruct = cdyn_reconstruct_obj,
};

/* ---- ndarrays (NDARRAY) ----------------------------------------------------------------- */

static PyObject *
fake(PyObject *v)
{
    return V(v)->u.tensor.fake;
}

/* Metadata as constants, .T/.real/.imag recorded, methods as METHOD values. */
static tr_status
ndarray_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    static const char *const meta[] = {"shape", "ndim", "size", "itemsize", "nbytes", "strides",
                                       "dtype", NULL};
    static const char *const views[] = {"T", "real", "imag", NULL};
    PyObject *attr, *args[2] = {v, NULL};
    tr_status st;
    if (cdyn_name_in(name, meta)) {
        PyObject *r = glue_call("ndarray_attribute", fake(v), name);
        if (r == NULL) {
            return cdyn_tx_unsupported(tx, "numpy: ndarray.%U", name);
        }
        *out = cdyn_value_const_steal(r);
        return *out ? TR_OK : TR_ERROR;
    }
    if (cdyn_name_in(name, views)) {
        PyObject *g = glue(), *fn = g ? PyObject_GetAttrString(g, "numpy_attr") : NULL;
        if (fn == NULL || (args[1] = cdyn_value_const(name)) == NULL) {
            Py_XDECREF(fn);
            return TR_ERROR;
        }
        st = record(tx, fn, args, 2, NULL, out);
        Py_DECREF(fn);
        Py_DECREF(args[1]);
        if (st == TR_OK && is_scalar(v) && V(*out)->kind == VK_NDARRAY) {
            V(*out)->bits |= NDARRAY_SCALAR;   /* a numpy scalar's .T / .real / .imag */
        }
        return st;
    }
    attr = numpy_loaded() ? _PyType_Lookup((PyTypeObject *)np_ndarray, name) : NULL;
    if (attr == NULL || !PyCallable_Check(attr) || Py_TYPE(attr) == &PyGetSetDescr_Type ||
        Py_TYPE(attr) == &PyMemberDescr_Type) {
        return cdyn_tx_unsupported(tx, "numpy: ndarray attribute %U is not traced", name);
    }
    *out = cdyn_value_method(NULL, name, v);
    return *out ? TR_OK : TR_ERROR;
}

/* A method recorded as the ndarray method of torch._numpy and checked against numpy's;
 * methods that need the data are breaks. */
static tr_status
ndarray_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *self, PyObject *name,
                    PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    static const char *const bad[] = {"item", "tolist", "tobytes", "tostring", "tofile", "dump",
                                      "dumps", "__array__", "__bool__", "__int__", "__float__",
                                      "__complex__", "__index__", "__iter__", "__str__",
                                      "__repr__", "__format__", "__reduce__", "__reduce_ex__",
                                      "__setstate__", "__deepcopy__", "__copy__", "__hash__",
                                      "setflags", "itemset", "__array_function__",
                                      "__array_ufunc__", "__dlpack__", "__class_getitem__",
                                      NULL};
    PyObject *all[65], *kw2 = NULL;
    tr_status st;
    (void)fs;
    if (cdyn_name_in(name, bad)) {
        return cdyn_tx_unsupported(tx, "numpy: ndarray.%U() needs the array's data", name);
    }
    if (nargs > 64) {
        return cdyn_tx_unsupported(tx, "numpy: too many arguments");
    }
    if (patch_kwnames(name, kwnames, &kw2) < 0) {
        return TR_ERROR;
    }
    all[0] = self;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        all[i + 1] = args[i];
    }
    st = record_wrapped(tx, "method_target", name, all, nargs + 1, kw2 ? kw2 : kwnames, out);
    Py_XDECREF(kw2);
    if (st == TR_OK) {   /* against numpy's own method */
        PyObject *caller = glue_call("method_caller", name, NULL);
        st = caller ? verify(tx, caller, all, nargs + 1, kwnames, *out, 0) : TR_ERROR;
        Py_XDECREF(caller);
        if (st != TR_OK) {
            Py_CLEAR(*out);
        }
    }
    return st;
}

static tr_status
ndarray_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    (void)v;
    (void)out;
    return cdyn_tx_unsupported(tx, "numpy: truth value of an ndarray needs the array's data");
}

/* An operator (operator.add, getitem, ...) on ndarray operands (and constants). */
static tr_status
operator_call(cdyn_tx *tx, PyObject *op, PyObject *const *args, Py_ssize_t n, PyObject **out)
{
    tr_status st;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (V(args[i])->kind == VK_TENSOR) {
            /* eager gives a tensor or raises, depending on the side: run it in Python */
            return cdyn_tx_unsupported(tx, "numpy: operator %R mixing an ndarray and a tensor",
                                       op);
        }
    }
    st = record_wrapped(tx, "operator_target", op, args, n, NULL, out);
    if (st == TR_OK) {   /* against numpy's own operator */
        st = verify(tx, op, args, n, NULL, *out, 0);
        if (st != TR_OK) {
            Py_CLEAR(*out);
        }
    }
    return st;
}

static tr_status
ndarray_binop(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    PyObject *args[2] = {a, b};
    if (V(a)->kind != VK_NDARRAY && V(b)->kind != VK_NDARRAY) {
        return TR_NOTIMPL;
    }
    if (op >= 13 && V(a)->kind != VK_NDARRAY) {
        op -= 13;   /* c += a with c not an array: c = c + a */
    }
    return operator_call(tx, cdyn_G.binop_fns[op], args, 2, out);
}

static tr_status
ndarray_compare(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    PyObject *args[2] = {a, b};
    if (V(a)->kind != VK_NDARRAY && V(b)->kind != VK_NDARRAY) {
        return TR_NOTIMPL;
    }
    return operator_call(tx, cdyn_G.cmp_fns[op], args, 2, out);
}

static tr_status
ndarray_unary(cdyn_tx *tx, int opcode, PyObject *v, PyObject **out)
{
    PyObject *fn = opcode == UNARY_NEGATIVE ? cdyn_G.neg
                   : opcode == UNARY_POSITIVE ? cdyn_G.pos : cdyn_G.invert;
    return operator_call(tx, fn, &v, 1, out);
}

static tr_status
ndarray_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out)
{
    PyObject *args[2] = {v, key};
    return operator_call(tx, cdyn_G.getitem_fn, args, 2, out);
}

static tr_status
ndarray_store_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value)
{
    PyObject *args[3] = {v, key, value}, *res = NULL;
    tr_status st = operator_call(tx, cdyn_G.setitem_fn, args, 3, &res);
    Py_XDECREF(res);
    return st;
}

static tr_status
ndarray_len(cdyn_tx *tx, PyObject *v, Py_ssize_t *out)
{
    Py_ssize_t n = PyObject_Length(fake(v));
    if (n < 0) {
        PyErr_Clear();
        return cdyn_tx_unsupported(tx, "numpy: len() of a 0-d ndarray");
    }
    *out = n;
    return TR_OK;
}

/* Iterating an ndarray unrolls over its first dimension: a[0], a[1], ... */
static tr_status
ndarray_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    Py_ssize_t n = 0;
    PyObject *l;
    tr_status st = ndarray_len(tx, v, &n);
    if (st != TR_OK) {
        return st;
    }
    l = PyList_New(n);
    for (Py_ssize_t i = 0; l && i < n; i++) {
        PyObject *idx = cdyn_value_const_steal(PyLong_FromSsize_t(i)), *r = NULL;
        st = idx ? ndarray_subscr(tx, v, idx, &r) : TR_ERROR;
        Py_XDECREF(idx);
        if (st != TR_OK) {
            Py_DECREF(l);
            return st;
        }
        PyList_SET_ITEM(l, i, r);
    }
    *out_list = l;
    return l ? TR_OK : TR_ERROR;
}

static tr_status
ndarray_graph_arg(cdyn_tx *tx, PyObject *v, PyObject **fk, PyObject **node)
{
    (void)v;
    (void)fk;
    (void)node;
    return cdyn_tx_unsupported(tx, "numpy: a numpy ndarray as an argument to a torch "
                                   "operation");
}

static PyTypeObject *
ndarray_python_type(PyObject *v)
{
    static PyObject *scalar_types;   /* dict: torch dtype -> numpy scalar type (kept alive) */
    PyObject *dt, *t;
    if (!numpy_loaded()) {
        return NULL;
    }
    if (!is_scalar(v)) {
        return (PyTypeObject *)np_ndarray;
    }
    if (scalar_types == NULL && (scalar_types = PyDict_New()) == NULL) {
        PyErr_Clear();
        return NULL;
    }
    dt = PyObject_GetAttrString(fake(v), "dtype");
    t = dt ? PyDict_GetItemWithError(scalar_types, dt) : NULL;
    if (dt != NULL && t == NULL && !PyErr_Occurred()) {
        PyObject *nt = glue_call("scalar_type", dt, NULL);
        if (nt != NULL && PyType_Check(nt) && PyDict_SetItem(scalar_types, dt, nt) == 0) {
            t = nt;
        }
        Py_XDECREF(nt);   /* the dict keeps it */
    }
    Py_XDECREF(dt);
    PyErr_Clear();
    return (PyTypeObject *)t;
}

static tr_status
ndarray_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    (void)tx;
    if (V(v)->source != NULL) {
        return TR_OK;
    }
    return cdyn_cg_add_output(cg, V(v)->u.tensor.node) < 0 ? TR_ERROR : TR_OK;
}

/* An input array is its source; an array made in the graph is to_numpy(<its tensor>), built
 * once (every use is the same object). */
static int
ndarray_reconstruct(cdyn_cg *cg, PyObject *v)
{
    PyObject *g, *fn;
    int r;
    if (V(v)->source != NULL) {
        return cdyn_cg_source(cg, V(v)->source);
    }
    r = cdyn_cg_memo_load(cg, v);
    if (r != 0) {
        return r < 0 ? -1 : 0;
    }
    g = glue();
    fn = g ? PyObject_GetAttrString(g, is_scalar(v) ? "to_numpy_scalar" : "to_numpy") : NULL;
    r = fn == NULL || cdyn_cg_push_callable(cg, fn) < 0 ||
        cdyn_cg_load_output(cg, V(v)->u.tensor.node) < 0 || cdyn_cg_call(cg, 1) < 0;
    Py_XDECREF(fn);
    return r ? -1 : cdyn_cg_memo_store(cg, v, "ndarray");
}

const cdyn_vtable cdyn_ndarray_vt = {
    .name = "NumpyNdarrayVariable",
    .getattr = ndarray_getattr,
    .call_method = ndarray_call_method,
    .truth = ndarray_truth,
    .unpack = ndarray_unpack,
    .subscr = ndarray_subscr,
    .store_subscr = ndarray_store_subscr,
    .binop = ndarray_binop,
    .compare = ndarray_compare,
    .unary = ndarray_unary,
    .len = ndarray_len,
    .graph_arg = ndarray_graph_arg,
    .python_type = ndarray_python_type,
    .collect = ndarray_collect,
    .reconstruct = ndarray_reconstruct,
};
