/* values/tensor.c: tensors. A tensor value is a fake tensor (its metadata, the example
 * value) and the FX node that computes it. Operations on tensors become graph nodes;
 * metadata reads (shape, dtype, size(), dim(), ...) are constants taken from the fake
 * tensor; anything that needs the data (.item(), .tolist(), a branch on a value) is
 * unsupported: a graph break. */
#include "../tx.h"
#include "../codegen.h"

static PyObject *
fake(PyObject *v)
{
    return V(v)->u.tensor.fake;
}

/* The int a 0-d integer tensor value stands for when the trace made it from constants
 * only (torch.as_tensor(2): its fake tensor carries the constant), as a CONST value (new
 * reference); NULL without an exception otherwise. */
PyObject *
cdyn_tensor_constant_index(PyObject *key)
{
    PyObject *c, *i = NULL;
    if (V(key)->kind != VK_TENSOR) {
        return NULL;
    }
    c = PyObject_GetAttrString(fake(key), "constant");
    if (c != NULL && c != Py_None) {
        PyObject *dim = PyObject_CallMethod(c, "dim", NULL);
        PyObject *fp = PyObject_CallMethod(c, "is_floating_point", NULL);
        if (dim != NULL && fp == Py_False && PyLong_Check(dim) && PyLong_AsLong(dim) == 0) {
            i = PyNumber_Index(c);   /* bool and complex tensors raise: no index */
        }
        Py_XDECREF(dim);
        Py_XDECREF(fp);
    }
    Py_XDECREF(c);
    PyErr_Clear();
    return i ? cdyn_value_const_steal(i) : NULL;
}

/* A tensor attribute read as a graph node getattr(x, name) (views such as x.T). */
static tr_status
getattr_node(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *nv = cdyn_value_const(name);
    PyObject *args[2] = {v, nv};
    tr_status st;
    if (nv == NULL) {
        return TR_ERROR;
    }
    st = cdyn_tx_graph_call(tx, "call_function", cdyn_G.getattr_fn, NULL, args, 2, NULL, out);
    Py_DECREF(nv);
    return st;
}

int
cdyn_is_wrapper_subclass(PyTypeObject *t)
{
    static PyObject *s_flatten;
    if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        return 0;   /* torch.Tensor itself and extension types */
    }
    if (s_flatten == NULL &&
        (s_flatten = PyUnicode_InternFromString("__tensor_flatten__")) == NULL) {
        PyErr_Clear();
        return 0;
    }
    return _PyType_Lookup(t, s_flatten) != NULL;
}

/* 1 when name is an inner tensor of v, a tensor of a traceable wrapper subclass (one of the
 * attributes its __tensor_flatten__ names): x.a of a TwoTensor, the int data of a
 * quantized tensor; read in the graph as torch._dynamo reads it (a getattr node). */
static int
inner_tensor_name(PyObject *v, PyObject *name)
{
    PyObject *flat, *attrs;
    int found = 0;
    if (!cdyn_is_wrapper_subclass(Py_TYPE(fake(v)))) {
        return 0;
    }
    flat = PyObject_CallMethod(fake(v), "__tensor_flatten__", NULL);
    attrs = flat && PyTuple_Check(flat) && PyTuple_GET_SIZE(flat) == 2 ? PyTuple_GET_ITEM(flat, 0)
                                                                       : NULL;
    if (attrs != NULL && PyList_Check(attrs)) {
        found = PySequence_Contains(attrs, name) == 1;
    }
    PyErr_Clear();
    Py_XDECREF(flat);
    return found;
}

/* The real tensor the TENSOR value v (with a source) stands for, read again through its
 * source in the traced frame: a new reference, or NULL with an exception. */
static PyObject *
frame_tensor(cdyn_tx *tx, PyObject *v)
{
    return cdyn_tx_frame_object(tx, V(v)->source);
}

int
cdyn_tensor_hasattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **inst)
{
    PyTypeObject *tp = (PyTypeObject *)(V(v)->u.tensor.type ? V(v)->u.tensor.type
                                                             : cdyn_G.torch_tensor_type);
    PyObject *real = NULL, **dictp, *val = NULL, *src = NULL;
    int r = -2;
    if (inst != NULL) {
        *inst = NULL;
    }
    if (tp->tp_getattro != PyObject_GenericGetAttr) {
        return -1;
    }
    if (_PyType_Lookup(tp, name) != NULL) {
        return 1;
    }
    if (V(v)->u.tensor.attrs != NULL) {   /* stored by the trace (own_attr_store) */
        int has = PyDict_Contains(V(v)->u.tensor.attrs, name);
        if (has != 0) {
            return has < 0 ? -2 : 1;
        }
    }
    if (V(v)->source == NULL) {
        return 0;
    }
    real = frame_tensor(tx, v);
    if (real == NULL) {
        PyErr_Clear();
        return -1;
    }
    dictp = _PyObject_GetDictPtr(real);
    if (dictp != NULL && *dictp != NULL &&
        (val = PyDict_GetItemWithError(*dictp, name)) == NULL && PyErr_Occurred()) {
        goto done;
    }
    if (inst != NULL && val != NULL) {
        /* the caller wraps the value under <source>.<name>: that guard fails when the
           attribute is gone, so no HASATTR is added for it */
        *inst = Py_NewRef(val);
        r = 1;
        goto done;
    }
    src = cdyn_source_attr(V(v)->source, name);
    if (src == NULL || cdyn_guards_add_hasattr(tx->guards, src, val != NULL) < 0) {
        goto done;
    }
    r = val != NULL;
done:
    Py_XDECREF(src);
    Py_XDECREF(real);
    return r;
}

/* An attribute of the tensor value v that its type does not have: the value stored in the
 * real tensor's instance dict (t.my_flag = True), read through v's source and guarded as
 * any attribute read. Unsupported when absent or unknown. */
static tr_status
instance_attr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *val = NULL, *src = NULL;
    tr_status st;
    int r = cdyn_tensor_hasattr(tx, v, name, &val);
    if (r == -2) {
        return TR_ERROR;
    }
    if (r != 1 || val == NULL) {
        Py_XDECREF(val);
        return cdyn_tx_unsupported(tx, "Tensor attribute %U", name);
    }
    src = cdyn_source_attr(V(v)->source, name);
    st = src != NULL ? cdyn_tx_wrap_real(tx, val, src, out) : TR_ERROR;
    Py_XDECREF(src);
    Py_DECREF(val);
    return st;
}

/* t.grad of a tensor of the frame (a parameter, an input): what the trace stored there
 * (t.grad = None, replayed after the graph), else the real gradient read through
 * <source>.grad: a graph input (TENSOR_MATCH) or None (guarded), as torch._dynamo reads it.
 * A tensor the graph makes is not traced (its grad needs a backward pass). */
static tr_status
grad_read(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *src = NULL, *real = NULL, *g = NULL;
    tr_status st;
    if (V(v)->source == NULL) {
        return cdyn_tx_unsupported(tx, "Tensor.grad of a tensor the graph makes");
    }
    st = cdyn_tx_memo_attr(tx, v, name, &src, out);
    if (st != TR_OK || *out != NULL) {
        Py_XDECREF(src);
        return st;
    }
    real = frame_tensor(tx, v);
    g = real != NULL ? PyObject_GetAttr(real, name) : NULL;
    if (g == NULL) {
        PyErr_Clear();
        st = cdyn_tx_unsupported(tx, "Tensor.grad of %S cannot be read again", v);
    }
    else if (g != Py_None && !cdyn_is_tensor(g)) {
        st = cdyn_tx_unsupported(tx, "Tensor.grad is a %s", Py_TYPE(g)->tp_name);
    }
    else {
        st = cdyn_tx_wrap_real(tx, g, src, out);
    }
    Py_XDECREF(g);
    Py_XDECREF(real);
    Py_XDECREF(src);
    return st;
}

/* t.data = value on a tensor of the frame, as torch._dynamo traces it: under no_grad, a
 * torch.Tensor.set_(t, value) node (t takes value's storage, sizes and strides; later
 * nodes reading t see them, in the graph and in its fake tensor), then a node that lowers
 * t's version counter by the one set_ added (eager's t.data = does not bump it). t keeps
 * its identity and requires_grad. Unsupported where AOTAutograd cannot take the set_
 * (_glue.data_set_refusal: value an input, sharing memory, of another dtype or device, or
 * resizing a tensor that requires grad) and on a tensor the graph makes. */
static tr_status
data_setattr(cdyn_tx *tx, PyObject *v, PyObject *value)
{
    static PyObject *set_fn, *undo_bump;
    PyObject *args[2] = {v, value}, *r = NULL, *r2 = NULL, *why = NULL;
    int mode = tx->grad_enabled;
    tr_status st;
    if (V(v)->source == NULL || V(value)->kind != VK_TENSOR) {
        return cdyn_tx_unsupported(tx, "STORE_ATTR data on %S (a tensor the graph makes, or "
                                   "not a tensor)", v);
    }
    why = PyObject_CallMethod(cdyn_G.glue, "data_set_refusal", "OOO", fake(v), fake(value),
                              V(value)->source != NULL ? Py_True : Py_False);
    if (why == NULL) {
        return TR_ERROR;
    }
    if (why != Py_None) {
        st = cdyn_tx_unsupported(tx, "STORE_ATTR data on %S: %U", v, why);
        Py_DECREF(why);
        return st;
    }
    Py_DECREF(why);
    if (set_fn == NULL &&
        (set_fn = PyObject_GetAttrString(cdyn_G.torch_tensor_type, "set_")) == NULL) {
        return TR_ERROR;
    }
    if (undo_bump == NULL &&
        (undo_bump = PyObject_GetAttrString(cdyn_G.glue, "undo_version_bump")) == NULL) {
        return TR_ERROR;
    }
    st = cdyn_ctx_set_grad(tx, 0);
    if (st == TR_OK) {
        st = cdyn_tx_graph_call(tx, "call_function", set_fn, NULL, args, 2, NULL, &r);
    }
    if (st == TR_OK) {
        st = cdyn_ctx_set_grad(tx, mode);
    }
    if (st == TR_OK) {
        st = cdyn_tx_graph_call(tx, "call_function", undo_bump, NULL, &r, 1, NULL, &r2);
    }
    Py_XDECREF(r);
    Py_XDECREF(r2);
    return st;
}

static PyTypeObject *tensor_python_type(PyObject *v);

int
cdyn_tensor_name_hint(PyObject *v, PyObject *name)
{
    static PyObject *s_rename;
    PyObject *node = V(v)->u.tensor.node, *r;
    if (V(v)->kind != VK_TENSOR || (V(v)->bits & TENSOR_NAMED) || node == NULL ||
        V(v)->source != NULL || !PyUnicode_Check(name)) {
        return 0;
    }
    V(v)->bits |= TENSOR_NAMED;
    if (s_rename == NULL && (s_rename = PyUnicode_InternFromString("_rename")) == NULL) {
        return -1;
    }
    r = PyObject_CallMethodOneArg(node, s_rename, name);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* t.name = value on a tensor the trace made (torchvision's tv_tensors set `format` and
 * `canvas_size` on a BoundingBoxes made with as_subclass): kept on the value (u.tensor.attrs,
 * a new dict per store, so a rollback restores the old one), read back by getattr and set
 * on the rebuilt object (tensor_reconstruct). A name the tensor's class defines as a data
 * descriptor (a property, Tensor's own attributes) is a graph break, except `grad` set to a
 * tensor or None (set on the rebuilt tensor the same way). */
static tr_status
own_attr_store(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    PyObject *d = _PyType_Lookup(tensor_python_type(v), name), *attrs;
    int grad = cdyn_name_is(name, "grad") &&
               (cdyn_v_is_none(value) || V(value)->kind == VK_TENSOR);   /* y.grad = g */
    if (d != NULL && Py_TYPE(d)->tp_descr_set != NULL && !grad) {
        return cdyn_tx_unsupported(tx, "STORE_ATTR %U on %S (a descriptor of its class)",
                                   name, v);
    }
    attrs = V(v)->u.tensor.attrs ? PyDict_Copy(V(v)->u.tensor.attrs) : PyDict_New();
    if (attrs == NULL || PyDict_SetItem(attrs, name, value) < 0) {
        Py_XDECREF(attrs);
        return TR_ERROR;
    }
    cdyn_tx_mutated(tx, v);
    Py_XSETREF(V(v)->u.tensor.attrs, attrs);
    return TR_OK;
}

/* t.grad = None / a tensor, on a tensor of the frame: replayed after the graph, later
 * reads in the trace see it (zero_grad(set_to_none=True), p.grad = g). t.data = value:
 * data_setattr. */
/* "grad" (borrowed, interned) for t._grad, which is t.grad under another name: a store to
 * one is read back through the other, as in eager; name itself otherwise. */
static PyObject *
grad_alias(PyObject *name)
{
    static PyObject *grad;
    if (!cdyn_name_is(name, "_grad")) {
        return name;
    }
    if (grad == NULL && (grad = PyUnicode_InternFromString("grad")) == NULL) {
        PyErr_Clear();
        return name;
    }
    return grad;
}

static tr_status
tensor_setattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    if (V(v)->source != NULL) {
        name = grad_alias(name);
    }
    if (cdyn_name_is(name, "data")) {
        return data_setattr(tx, v, value);
    }
    if (V(v)->source == NULL && V(v)->kind == VK_TENSOR) {
        return own_attr_store(tx, v, name, value);
    }
    if (V(v)->source != NULL && V(v)->kind == VK_TENSOR && !cdyn_name_is(name, "grad") &&
        _PyType_Lookup(tensor_python_type(v), name) == NULL) {
        /* x.flag = value on a tensor of the frame (an attribute its class does not define):
           replayed on it after the graph, and seen by later reads and hasattr() in the
           trace (kept in u.tensor.attrs too), as torch._dynamo's attribute mutation */
        tr_status st = own_attr_store(tx, v, name, value);
        return st != TR_OK ? st : cdyn_tx_effect(tx, EFF_STORE_ATTR, v, name, value);
    }
    if (!cdyn_name_is(name, "grad") || V(v)->source == NULL ||
        !(cdyn_v_is_none(value) || V(value)->kind == VK_TENSOR)) {
        return cdyn_tx_unsupported(tx, "STORE_ATTR %U on %S (side effect)", name, v);
    }
    return cdyn_setattr_replayed(tx, v, name, value);
}

static tr_status
tensor_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    static const char *const meta[] = {"shape", "dtype", "device", "ndim", "requires_grad",
                                       "is_cuda", "layout", "is_sparse", "is_quantized",
                                       "is_meta", "is_cpu", NULL};
    static const char *const views[] = {"T", "mT", "H", "mH", "real", "imag", NULL};
    static const char *const bad[] = {"data", "grad", "grad_fn", "_base", "_version", NULL};
    static PyObject *get_data;   /* torch._C._autograd._get_data_attr, kept for the process */
    PyObject *attr;
    if (V(v)->u.tensor.attrs != NULL &&
        (attr = PyDict_GetItemWithError(V(v)->u.tensor.attrs, name)) != NULL) {
        *out = Py_NewRef(attr);   /* stored on it in the trace (own_attr_store) */
        return TR_OK;
    }
    if (PyErr_Occurred()) {
        return TR_ERROR;
    }
    if (cdyn_name_in(name, meta)) {
        PyObject *r;
        if (cdyn_name_is(name, "requires_grad")) {
            cdyn_guards_note_requires_grad(tx->guards);
        }
        r = PyObject_GetAttr(fake(v), name);
        tr_status st;
        if (r == NULL) {
            return cdyn_tx_unsupported(tx, "tensor attribute failed");
        }
        st = cdyn_sym_meta(tx, v, r, "size", NULL, out);   /* x.shape: symbolic sizes */
        Py_DECREF(r);
        return st;
    }
    if (cdyn_name_in(name, views)) {
        return getattr_node(tx, v, name, out);
    }
    if (cdyn_name_is(name, "grad") || (V(v)->source != NULL && cdyn_name_is(name, "_grad"))) {
        return grad_read(tx, v, grad_alias(name), out);
    }
    if (cdyn_name_is(name, "data")) {
        /* x.data: a tensor sharing x's data outside autograd, a node of the graph as
           torch._dynamo makes it (torch._C._autograd._get_data_attr) */
        if (get_data == NULL) {
            PyObject *ag = PyObject_GetAttrString(cdyn_G.torch, "_C");
            Py_XSETREF(ag, ag ? PyObject_GetAttrString(ag, "_autograd") : NULL);
            get_data = ag ? PyObject_GetAttrString(ag, "_get_data_attr") : NULL;
            Py_XDECREF(ag);
            if (get_data == NULL) {
                PyErr_Clear();
                return cdyn_tx_unsupported(tx, "Tensor.data (no _get_data_attr in this torch)");
            }
        }
        return cdyn_tx_graph_call(tx, "call_function", get_data, NULL, &v, 1, NULL, out);
    }
    if (cdyn_name_in(name, bad)) {
        return cdyn_tx_unsupported(tx, "Tensor.%U is not traced", name);
    }
    if (cdyn_name_is(name, "__class__")) {   /* x.__class__ is type(x), as type() answers it */
        return cdyn_user_type_of(tx, v, out);
    }
    /* a method of torch.Tensor; a data attribute (property / getset) is read from the fake
       tensor when it is a constant (is_nested, is_sparse, ...); anything else (an attribute
       error included) is left to plain Python */
    attr = _PyType_Lookup((PyTypeObject *)cdyn_G.torch_tensor_type, name);
    if (attr != NULL && (PyObject_TypeCheck(attr, &PyProperty_Type) ||
                         Py_TYPE(attr) == &PyGetSetDescr_Type ||
                         Py_TYPE(attr) == &PyMemberDescr_Type)) {
        PyObject *val;
        cdyn_guards_note_requires_grad(tx->guards);   /* is_leaf, ...: autograd state */
        val = PyObject_GetAttr(fake(v), name);
        if (val == NULL) {
            return cdyn_tx_unsupported(tx, "Tensor attribute %U", name);
        }
        if (!cdyn_is_constant(val)) {
            Py_DECREF(val);
            return cdyn_tx_unsupported(tx, "Tensor attribute %U is not a constant", name);
        }
        *out = cdyn_value_const_steal(val);
        return *out ? TR_OK : TR_ERROR;
    }
    if (attr == NULL && inner_tensor_name(v, name)) {
        return getattr_node(tx, v, name, out);   /* an inner tensor of a wrapper subclass */
    }
    if (attr == NULL) {
        return instance_attr(tx, v, name, out);
    }
    if (!PyCallable_Check(attr)) {
        return cdyn_tx_unsupported(tx, "Tensor attribute %U", name);
    }
    *out = cdyn_value_method(NULL, name, v);
    return *out ? TR_OK : TR_ERROR;
}

/* Metadata methods answered from the fake tensor as constants. */
static tr_status
call_meta_method(cdyn_tx *tx, PyObject *self, PyObject *name, PyObject *const *args,
                 Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyObject *m = NULL, *objs[64], *res = NULL, *spec[64] = {NULL};
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    tr_status st = TR_OK;
    if (nargs > 64) {
        return cdyn_tx_unsupported(tx, "Tensor.%U with too many arguments", name);
    }
    for (Py_ssize_t j = 0; j < nargs && st == TR_OK; j++) {
        /* a dynamic int argument (x.size(dim) with dim an input) is specialised: guarded */
        st = cdyn_sym_specialize(tx, args[j], &spec[j]);
        if (st == TR_OK && V(spec[j])->kind != VK_CONST) {
            st = cdyn_tx_unsupported(tx, "Tensor.%U with non-constant arguments", name);
        }
        objs[j] = st == TR_OK ? V(spec[j])->u.cnst.value : NULL;
    }
    if (st == TR_OK) {
        m = PyObject_GetAttr(fake(self), name);
        res = m ? PyObject_Vectorcall(m, objs, nargs - nkw, kwnames) : NULL;
        Py_XDECREF(m);
    }
    for (Py_ssize_t j = 0; j < nargs; j++) {
        Py_XDECREF(spec[j]);
    }
    if (st != TR_OK) {
        return st;
    }
    if (res == NULL) {
        return cdyn_tx_unsupported(tx, "Tensor.%U failed", name);
    }
    {
        /* symbolic sizes: read again in the graph as x.size(d) / x.stride(d) / x.numel() */
        const char *mname = PyUnicode_AsUTF8(name);
        int len = cdyn_name_is(name, "__len__");
        PyObject *zero = len ? PyLong_FromLong(0) : NULL;
        tr_status st = cdyn_sym_meta(tx, self, res, len ? "size" : mname,
                                     len ? zero : (nargs - nkw == 1 ? objs[0] : NULL), out);
        Py_XDECREF(zero);
        Py_DECREF(res);
        return st;
    }
}

/* t.new_tensor(n) of a symbolic number: torch._refs.tensor(n, dtype=t.dtype,
 * device=t.device), which keeps it symbolic (new_tensor would specialise it), as
 * torch.tensor of sizes (values/torch.c). */
static tr_status
new_tensor_of_symbol(cdyn_tx *tx, PyObject *self, PyObject *n, PyObject **out)
{
    static PyObject *kw;   /* ("dtype", "device") */
    PyObject *a[3] = {n, NULL, NULL}, *s_dtype, *s_device;
    PyObject *refs_tensor = cdyn_torch_refs_tensor();
    tr_status st;
    if (refs_tensor == NULL) {
        return cdyn_tx_unsupported(tx, "Tensor.new_tensor of a symbolic value");
    }
    if (kw == NULL && (kw = Py_BuildValue("(ss)", "dtype", "device")) == NULL) {
        return TR_ERROR;
    }
    s_dtype = PyTuple_GET_ITEM(kw, 0);
    s_device = PyTuple_GET_ITEM(kw, 1);
    st = cdyn_v_getattr(tx, self, s_dtype, &a[1]);
    if (st == TR_OK) {
        st = cdyn_v_getattr(tx, self, s_device, &a[2]);
    }
    if (st == TR_OK) {
        st = cdyn_tx_graph_call(tx, "call_function", refs_tensor, NULL, a, 3, kw, out);
    }
    Py_XDECREF(a[1]);
    Py_XDECREF(a[2]);
    return st;
}

static tr_status as_subclass(cdyn_tx *tx, PyObject *self, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames, PyObject **out);

/* t.addcdiv_(a, b, value=v) / t.addcmul_(a, b, value=v) decomposed as torch._dynamo
 * decomposes them (enable_dynamo_decompositions): the quotient (product) a / b, then t plus
 * v times it, copied into t: t.copy_(torch.addcmul(t, a / b, v)) for a tensor v (an
 * optimizer's step size while compiling: eager would read its value with .item()),
 * t.copy_(torch.add(t, a / b, alpha=v)) for a number. Three nodes either way, as torch's
 * (div or mul, fma, copy_). TR_NOTIMPL for other calls. */
static tr_status
addc_decomposed(cdyn_tx *tx, PyObject *self, PyObject *name, PyObject *const *args,
                  Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    static PyObject *div, *mul, *addcmul, *add, *s_copy, *s_alpha;
    PyObject *part = NULL, *res = NULL;
    tr_status st;
    int is_div = cdyn_name_is(name, "addcdiv_");
    if ((!is_div && !cdyn_name_is(name, "addcmul_")) || nargs != 3 || kwnames == NULL ||
        PyTuple_GET_SIZE(kwnames) != 1 || !cdyn_name_is(PyTuple_GET_ITEM(kwnames, 0), "value") ||
        V(args[0])->kind != VK_TENSOR || V(args[1])->kind != VK_TENSOR) {
        return TR_NOTIMPL;
    }
    if (s_alpha == NULL) {
        div = PyObject_GetAttrString(cdyn_G.torch, "div");
        mul = PyObject_GetAttrString(cdyn_G.torch, "mul");
        addcmul = PyObject_GetAttrString(cdyn_G.torch, "addcmul");
        add = PyObject_GetAttrString(cdyn_G.torch, "add");
        PyObject *alpha = PyUnicode_InternFromString("alpha");
        s_copy = PyUnicode_InternFromString("copy_");
        s_alpha = alpha ? PyTuple_Pack(1, alpha) : NULL;
        Py_XDECREF(alpha);
        if (div == NULL || mul == NULL || addcmul == NULL || add == NULL || s_copy == NULL ||
            s_alpha == NULL) {
            return TR_ERROR;
        }
    }
    st = cdyn_tx_graph_call(tx, "call_function", is_div ? div : mul, NULL, args, 2, NULL, &part);
    if (st == TR_OK) {
        PyObject *a3[3] = {self, part, args[2]};
        int tensor_value = V(args[2])->kind == VK_TENSOR;
        st = cdyn_tx_graph_call(tx, "call_function", tensor_value ? addcmul : add, NULL, a3, 3,
                                tensor_value ? NULL : s_alpha, &res);
    }
    if (st == TR_OK) {
        PyObject *a2[2] = {self, res};
        st = cdyn_tx_graph_call(tx, "call_method", s_copy, NULL, a2, 2, NULL, out);
    }
    Py_XDECREF(part);
    Py_XDECREF(res);
    return st;
}

/* t.tolist() through the polyfill tensor_tolist with scalar outputs allowed for its
 * duration (tx->capture_scalars and the fake mode's allow_scalar_outputs, restored after). */
static tr_status
tolist_captured(cdyn_tx *tx, PyObject *self, PyObject **out)
{
    PyObject *mode = PyObject_GetAttrString(tx->shapes, "fake_mode"), *old = NULL;
    int saved = tx->capture_scalars;
    tr_status st;
    if (mode == NULL || (old = PyObject_GetAttrString(mode, "allow_scalar_outputs")) == NULL ||
        PyObject_SetAttrString(mode, "allow_scalar_outputs", Py_True) < 0) {
        Py_XDECREF(mode);
        Py_XDECREF(old);
        return TR_ERROR;
    }
    tx->capture_scalars = 1;
    st = cdyn_polyfill_inline_named(tx, "tensor_tolist", &self, 1, out);
    tx->capture_scalars = saved;
    {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);   /* (a failed trace's error stays the error) */
        if (PyObject_SetAttrString(mode, "allow_scalar_outputs", old) < 0 && st == TR_OK) {
            Py_CLEAR(*out);
            st = TR_ERROR;
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(tb);
        }
        else {
            PyErr_Restore(et, ev, tb);
        }
    }
    Py_DECREF(mode);
    Py_DECREF(old);
    return st;
}

/* 1 when cls is one of torch's legacy tensor types (torch.FloatTensor, torch.cuda.HalfTensor:
 * their metaclass is the type of torch.FloatTensor, read once for the process); 0 when not,
 * -1 with an exception when torch has no FloatTensor. */
static int
is_legacy_tensor_type(PyObject *cls)
{
    static PyObject *legacy_meta;   /* type(torch.FloatTensor), kept for the process */
    if (legacy_meta == NULL) {
        PyObject *ft = PyObject_GetAttrString(cdyn_G.torch, "FloatTensor");
        if (ft == NULL) {
            return -1;
        }
        legacy_meta = Py_NewRef((PyObject *)Py_TYPE(ft));
        Py_DECREF(ft);
    }
    return (PyObject *)Py_TYPE(cls) == legacy_meta;
}

/* t.type(torch.HalfTensor): a legacy tensor type (of metaclass torch.tensortype) names the
 * same conversion as its text, t.type("torch.HalfTensor"), which is the node recorded (a
 * class is no argument of a graph node). */
static tr_status
type_by_legacy_class(cdyn_tx *tx, PyObject *self, PyObject *name, PyObject *cls,
                     PyObject **out)
{
    PyObject *mod = PyObject_GetAttrString(cls, "__module__");
    PyObject *cname = mod ? PyObject_GetAttrString(cls, "__name__") : NULL;
    PyObject *text = NULL, *arg = NULL, *all[2];
    tr_status st = TR_ERROR;
    if (cname == NULL || !PyUnicode_Check(mod) || !PyUnicode_Check(cname) ||
        (text = PyUnicode_FromFormat("%U.%U", mod, cname)) == NULL ||
        (arg = cdyn_value_const(text)) == NULL) {
        goto done;
    }
    all[0] = self;
    all[1] = arg;
    st = cdyn_tx_graph_call(tx, "call_method", name, NULL, all, 2, NULL, out);
done:
    Py_XDECREF(mod);
    Py_XDECREF(cname);
    Py_XDECREF(text);
    Py_XDECREF(arg);
    return st;
}

static tr_status
tensor_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *self, PyObject *name,
                   PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    static const char *const meta[] = {"size", "dim", "ndimension", "numel", "nelement",
                                       "stride", "is_contiguous", "is_floating_point",
                                       "is_complex", "element_size", "get_device", "__len__",
                                       NULL};
    static const char *const bad[] = {"item", "tolist", "backward", "__index__",
                                      "data_ptr", "__bool__", "__int__", "__float__",
                                      "register_hook", "retain_grad", NULL};
    PyObject *all[65];
    (void)fs;
    if (nargs == 0 && kwnames == NULL && cdyn_name_is(name, "__iter__")) {
        return cdyn_v_iter(tx, self, out);   /* x.__iter__() is iter(x) */
    }
    if (cdyn_name_in(name, meta)) {
        return call_meta_method(tx, self, name, args, nargs, kwnames, out);
    }
    if (tx->capture_scalars && cdyn_name_is(name, "item") && nargs == 0) {
        /* cdynamo.config.capture_scalar_outputs: an unbacked symbol, as torch._dynamo */
        return cdyn_tx_graph_call(tx, "call_method", name, NULL, &self, 1, NULL, out);
    }
    if (cdyn_name_is(name, "tolist") && nargs == 0 && kwnames == NULL) {
        /* a (nested) list of .item()s of an integer tensor of static shape: unbacked
           symbols, captured for this call even without capture_scalar_outputs, as
           torch._dynamo's tolist does */
        return tolist_captured(tx, self, out);
    }
    if (cdyn_name_in(name, bad)) {
        return cdyn_tx_unsupported(tx, "Tensor.%U() needs the tensor's data", name);
    }
    if (cdyn_name_is(name, "is_inference")) {
        if (V(self)->source == NULL) {
            /* made by the graph: an inference tensor when the graph runs in inference mode,
               which the fake tensors (never inference tensors) do not show */
            return cdyn_tx_unsupported(tx, "Tensor.is_inference() of a tensor the graph makes");
        }
        if (nargs == 0 && kwnames == NULL) {
            /* a graph input: the real tensor's answer (the fakes are never inference
               tensors), guarded by its TENSOR_MATCH, which compares is_inference() */
            *out = cdyn_value_const((V(self)->bits & TENSOR_INFERENCE) ? Py_True : Py_False);
            return *out != NULL ? TR_OK : TR_ERROR;
        }
    }
    if (cdyn_name_is(name, "numpy")) {
        return cdyn_ndarray_from_tensor(tx, self, args, nargs, kwnames, out);
    }
    if (cdyn_name_is(name, "as_subclass")) {
        return as_subclass(tx, self, args, nargs, kwnames, out);
    }
    if (cdyn_name_is(name, "type") && nargs == 1 && kwnames == NULL &&
        V(args[0])->kind != VK_CONST && cdyn_v_real(args[0]) != NULL) {
        int legacy = is_legacy_tensor_type(cdyn_v_real(args[0]));
        if (legacy != 0) {
            return legacy < 0 ? TR_ERROR
                              : type_by_legacy_class(tx, self, name, cdyn_v_real(args[0]), out);
        }
    }
    {
        tr_status st = addc_decomposed(tx, self, name, args, nargs, kwnames, out);
        if (st != TR_NOTIMPL) {
            return st;
        }
    }
    if (cdyn_name_is(name, "new_tensor") && nargs == 1 && kwnames == NULL &&
        V(args[0])->kind == VK_SYMINT) {
        return new_tensor_of_symbol(tx, self, args[0], out);
    }
    if (nargs > 64) {
        return cdyn_tx_unsupported(tx, "too many arguments");
    }
    all[0] = self;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        all[i + 1] = args[i];
    }
    return cdyn_tx_graph_call(tx, "call_method", name, NULL, all, nargs + 1, kwnames, out);
}

static tr_status
tensor_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    (void)v;
    (void)out;
    return cdyn_tx_unsupported(tx, "generic_jump on a tensor value (data-dependent control "
                                   "flow)");
}

/* Iterating a tensor unrolls over its first dimension: x[0], x[1], ... */
static tr_status
tensor_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    PyObject *shape = PyObject_GetAttrString(fake(v), "shape"), *l = NULL;
    Py_ssize_t n;
    if (shape == NULL) {
        return TR_ERROR;
    }
    if (PyTuple_GET_SIZE(shape) == 0) {
        Py_DECREF(shape);
        return cdyn_tx_unsupported(tx, "iteration over a 0-d tensor");
    }
    /* a symbolic first dim is specialised (__index__: the ShapeEnv guards its value) */
    n = PyNumber_AsSsize_t(PyTuple_GET_ITEM(shape, 0), PyExc_OverflowError);
    Py_DECREF(shape);
    if (n < 0) {
        return cdyn_tx_unsupported(tx, "iteration over a tensor of unknown length");
    }
    l = PyList_New(0);
    for (Py_ssize_t i = 0; l && i < n; i++) {
        PyObject *idx = cdyn_value_const_steal(PyLong_FromSsize_t(i)), *r = NULL;
        PyObject *args[2] = {v, idx};
        tr_status st;
        if (idx == NULL) {
            Py_CLEAR(l);
            return TR_ERROR;
        }
        st = cdyn_tx_graph_call(tx, "call_function", cdyn_G.getitem_fn, NULL, args, 2, NULL,
                                &r);
        Py_DECREF(idx);
        if (st != TR_OK) {
            Py_DECREF(l);
            return st;
        }
        if (PyList_Append(l, r) < 0) {
            Py_DECREF(r);
            Py_DECREF(l);
            return TR_ERROR;
        }
        Py_DECREF(r);
    }
    *out_list = l;
    return l ? TR_OK : TR_ERROR;
}

/* t[i]: operator.getitem; with i a symbolic int, torch.select(t, 0, i) (indexing would call
 * i.__index__ and specialise it), as torch._dynamo. */
static tr_status
tensor_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out)
{
    static PyObject *select_fn;   /* torch.select (process lifetime) */
    PyObject *args[3] = {v, key, NULL};
    tr_status st;
    if (V(key)->kind == VK_SYMINT && cdyn_v_python_type(key) == &PyLong_Type) {
        if (select_fn == NULL && (select_fn = PyObject_GetAttrString(cdyn_G.torch, "select")) == NULL) {
            return TR_ERROR;
        }
        if ((args[1] = cdyn_value_const_steal(PyLong_FromLong(0))) == NULL) {
            return TR_ERROR;
        }
        args[2] = key;
        st = cdyn_tx_graph_call(tx, "call_function", select_fn, NULL, args, 3, NULL, out);
        Py_DECREF(args[1]);
        return st;
    }
    return cdyn_tx_graph_call(tx, "call_function", cdyn_G.getitem_fn, NULL, args, 2, NULL, out);
}

static tr_status
tensor_store_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value)
{
    PyObject *args[3] = {v, key, value}, *res = NULL;
    tr_status st = cdyn_tx_graph_call(tx, "call_function", cdyn_G.setitem_fn, NULL, args, 3,
                                      NULL, &res);
    Py_XDECREF(res);
    return st;
}

/* Binary operators with a tensor on either side. `acc += t` with a non-tensor acc is
 * acc = acc + t (Python falls back to __add__ / __radd__; the in-place form would print
 * as invalid FX code). */
static tr_status
tensor_binop(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    PyObject *args[2] = {a, b};
    if (V(a)->kind != VK_TENSOR && V(b)->kind != VK_TENSOR) {
        return TR_NOTIMPL;
    }
    if (op >= 13 && V(a)->kind != VK_TENSOR) {
        op -= 13;
    }
    return cdyn_tx_graph_call(tx, "call_function", cdyn_G.binop_fns[op], NULL, args, 2, NULL,
                              out);
}

static tr_status
tensor_compare(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    PyObject *args[2] = {a, b};
    if (V(a)->kind != VK_TENSOR && V(b)->kind != VK_TENSOR) {
        return TR_NOTIMPL;
    }
    return cdyn_tx_graph_call(tx, "call_function", cdyn_G.cmp_fns[op], NULL, args, 2, NULL, out);
}

static tr_status
tensor_unary(cdyn_tx *tx, int opcode, PyObject *v, PyObject **out)
{
    PyObject *fn = opcode == UNARY_NEGATIVE ? cdyn_G.neg
                   : opcode == UNARY_POSITIVE ? cdyn_G.pos : cdyn_G.invert;
    return cdyn_tx_graph_call(tx, "call_function", fn, NULL, &v, 1, NULL, out);
}

static tr_status
tensor_len(cdyn_tx *tx, PyObject *v, Py_ssize_t *out)
{
    Py_ssize_t n = PyObject_Length(fake(v));
    if (n < 0) {
        return cdyn_tx_unsupported(tx, "len() of a 0-d tensor");
    }
    *out = n;
    return TR_OK;
}

static tr_status
tensor_graph_arg(cdyn_tx *tx, PyObject *v, PyObject **fk, PyObject **node)
{
    /* inside a higher-order op's body, a tensor of an enclosing level is lifted (graph.c) */
    tr_status st = cdyn_tx_lift(tx, V(v)->u.tensor.node, fake(v), node);
    if (st == TR_OK) {
        *fk = Py_NewRef(fake(v));
    }
    return st;
}

/* How a tensor class dispatches __torch_function__: 0 it has none of its own (torch.Tensor,
 * a class whose __torch_function__ is torch's disabled one, as nn.Parameter), 1 torch.Tensor's
 * default (results converted to the class), 2 overridden; -1 with an exception. */
static int
tf_kind(PyObject *cls)
{
    static PyObject *disabled_impl, *default_fn;   /* kept for the process */
    PyObject *attr = NULL;
    int r = -1;
    if (cls == NULL || cls == cdyn_G.torch_tensor_type) {
        return 0;
    }
    if (default_fn == NULL) {
        PyObject *m = PyObject_GetAttrString(cdyn_G.torch_tensor_type, "__torch_function__");
        PyObject *tc = PyObject_GetAttrString(cdyn_G.torch, "_C");
        disabled_impl = tc ? PyObject_GetAttrString(tc, "_disabled_torch_function_impl") : NULL;
        Py_XDECREF(tc);
        if (m == NULL || disabled_impl == NULL || !PyMethod_Check(m)) {
            Py_XDECREF(m);
            Py_CLEAR(disabled_impl);
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_RuntimeError, "torch.Tensor.__torch_function__ is not "
                                                    "a classmethod");
            }
            return -1;
        }
        default_fn = Py_NewRef(PyMethod_GET_FUNCTION(m));
        Py_DECREF(m);
    }
    attr = PyObject_GetAttrString(cls, "__torch_function__");
    if (attr == NULL) {
        goto done;
    }
    if (attr == disabled_impl) {
        r = 0;
    }
    else {
        r = PyMethod_Check(attr) && PyMethod_GET_FUNCTION(attr) == default_fn ? 1 : 2;
    }
done:
    Py_XDECREF(attr);
    return r;
}

/* One argument of cdyn_tensor_tf_class: a TENSOR value's class joins the overloaded types
 * (a list, most derived first: a class goes before the first of its bases already there,
 * as torch orders them); *override set when its class overrides __torch_function__. */
static tr_status
tf_class_of(PyObject *v, PyObject *types, int *override)
{
    PyObject *t = V(v)->kind == VK_TENSOR ? V(v)->u.tensor.type : NULL;
    Py_ssize_t n = PyList_GET_SIZE(types), at = n;
    int k;
    if (t == NULL || PySequence_Contains(types, t) != 0) {
        return PyErr_Occurred() ? TR_ERROR : TR_OK;
    }
    k = tf_kind(t);
    if (k <= 0) {
        return k < 0 ? TR_ERROR : TR_OK;
    }
    *override |= k == 2;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyType_IsSubtype((PyTypeObject *)t, (PyTypeObject *)PyList_GET_ITEM(types, i))) {
            at = i;
            break;
        }
    }
    return PyList_Insert(types, at, t) < 0 ? TR_ERROR : TR_OK;
}

/* 1 when an argument (or an item of a TUPLE / LIST argument) is a TENSOR value with a
 * Python type other than torch.Tensor. */
static int
any_typed_tensor(PyObject *const *args, Py_ssize_t nargs)
{
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *v = args[i], *items;
        if (V(v)->kind == VK_TENSOR && V(v)->u.tensor.type != NULL) {
            return 1;
        }
        items = V(v)->kind == VK_TUPLE || V(v)->kind == VK_LIST ? V(v)->u.seq.items : NULL;
        if (items != NULL && any_typed_tensor(&PyList_GET_ITEM(items, 0), PyList_GET_SIZE(items))) {
            return 1;
        }
    }
    return 0;
}

tr_status
cdyn_tensor_tf_class(cdyn_tx *tx, PyObject *const *args, Py_ssize_t nargs, PyObject **cls,
                     PyObject **types)
{
    PyObject *found = NULL;
    int override = 0;
    tr_status st = TR_OK;
    *cls = NULL;
    *types = NULL;
    if (tx->tf_subclass_off || !any_typed_tensor(args, nargs)) {
        return TR_OK;   /* (every graph call asks: most have plain tensors only) */
    }
    found = PyList_New(0);
    if (found == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; st == TR_OK && i < nargs; i++) {
        PyObject *v = args[i];
        if (V(v)->kind == VK_TUPLE || V(v)->kind == VK_LIST) {
            PyObject *items = V(v)->u.seq.items;
            for (Py_ssize_t j = 0; st == TR_OK && items && j < PyList_GET_SIZE(items); j++) {
                st = tf_class_of(PyList_GET_ITEM(items, j), found, &override);
            }
        }
        else {
            st = tf_class_of(v, found, &override);
        }
    }
    if (st != TR_OK || PyList_GET_SIZE(found) == 0) {
        goto done;
    }
    if (override) {
        *types = PyList_AsTuple(found);
        st = *types ? TR_OK : TR_ERROR;
        goto done;
    }
    /* torch.Tensor's default: the first class's returns NotImplemented unless it is a
       subclass of every other */
    *cls = PyList_GET_ITEM(found, 0);
    for (Py_ssize_t i = 1; i < PyList_GET_SIZE(found); i++) {
        if (!PyType_IsSubtype((PyTypeObject *)*cls, (PyTypeObject *)PyList_GET_ITEM(found, i))) {
            *cls = NULL;
            st = cdyn_tx_unsupported(tx, "tensor subclasses %s and %s in one call",
                                     ((PyTypeObject *)PyList_GET_ITEM(found, 0))->tp_name,
                                     ((PyTypeObject *)PyList_GET_ITEM(found, i))->tp_name);
            break;
        }
    }
done:
    Py_DECREF(found);   /* *cls stays alive: a TENSOR value holds it */
    return st;
}

/* The function eager hands to __torch_function__ for the graph call (op, target) with
 * arguments args (positional and keyword values), the arguments as it orders them into
 * *order (a new list of values): a torch function itself; torch.Tensor.<name> for a
 * method call; for an operator what cdynamo._glue.torch_function_operator found (1 + t
 * is Tensor.add(t, 1)). New reference, or NULL with TR_UNSUPPORTED (or TR_ERROR) in *st
 * when unknown (an attribute read). */
PyObject *
cdyn_tensor_tf_func(cdyn_tx *tx, const char *op, PyObject *target, PyObject *const *args,
                    Py_ssize_t npos, PyObject **order, tr_status *st)
{
    PyObject *func = NULL;
    int swap = 0;
    *st = TR_ERROR;
    *order = NULL;
    if (strcmp(op, "call_method") == 0 && PyUnicode_Check(target)) {
        func = PyObject_GetAttr(cdyn_G.torch_tensor_type, target);
        if (func == NULL) {
            PyErr_Clear();
        }
    }
    else if (strcmp(op, "call_function") == 0 && cdyn_module_startswith(target, "_operator")) {
        /* what torch hands the override for the operator (a probe found it: glue) */
        int first = npos > 0 && V(args[0])->kind == VK_TENSOR;
        PyObject *r = PyObject_CallMethod(cdyn_G.glue, "torch_function_operator", "OO", target,
                                          first ? Py_True : Py_False);
        if (r == NULL) {
            return NULL;
        }
        if (PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2) {
            func = Py_NewRef(PyTuple_GET_ITEM(r, 0));
            swap = !first && npos == 2 && PyLong_AsLong(PyTuple_GET_ITEM(r, 1)) == 0;
        }
        Py_DECREF(r);
    }
    else if (strcmp(op, "call_function") == 0 && target != cdyn_G.getattr_fn) {
        func = Py_NewRef(target);
    }
    if (func == NULL) {
        *st = PyErr_Occurred() ? TR_ERROR
                               : cdyn_tx_unsupported(tx, "%s %R on a tensor subclass that "
                                                         "overrides __torch_function__", op, target);
        return NULL;
    }
    *order = PyList_New(npos);
    if (*order == NULL) {
        Py_DECREF(func);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < npos; i++) {
        PyList_SET_ITEM(*order, i, Py_NewRef(args[swap ? npos - 1 - i : i]));
    }
    *st = TR_OK;
    return func;
}

void
cdyn_tensor_tf_convert(PyObject *v, PyObject *cls)
{
    PyObject *t = V(v)->u.tensor.type;
    if (V(v)->kind != VK_TENSOR ||
        (t != NULL && PyType_IsSubtype((PyTypeObject *)t, (PyTypeObject *)cls))) {
        return;
    }
    Py_XSETREF(V(v)->u.tensor.type, Py_NewRef(cls));
}

/* t.as_subclass(cls): the same graph value under another Python type (no graph node, as
 * torch._dynamo): torch.Tensor itself, or a subclass without __torch_dispatch__ of its own
 * (a __torch_function__ subclass or a plain one). Other classes are a graph break. */
static tr_status
as_subclass(cdyn_tx *tx, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames, PyObject **out)
{
    static PyObject *base_dispatch;   /* torch.Tensor.__torch_dispatch__, for the process */
    PyObject *cls = nargs == 1 && kwnames == NULL ? cdyn_v_real(args[0]) : NULL, *disp = NULL;
    int plain;
    if (cls == NULL || !PyType_Check(cls) ||
        !PyType_IsSubtype((PyTypeObject *)cls, (PyTypeObject *)cdyn_G.torch_tensor_type)) {
        return cdyn_tx_unsupported(tx, "Tensor.as_subclass() of something not a known tensor "
                                       "class");
    }
    if (base_dispatch == NULL &&
        (base_dispatch = PyObject_GetAttrString(cdyn_G.torch_tensor_type,
                                                "__torch_dispatch__")) == NULL) {
        return TR_ERROR;
    }
    disp = PyObject_GetAttrString(cls, "__torch_dispatch__");
    if (disp == NULL) {
        return TR_ERROR;
    }
    plain = PyObject_RichCompareBool(disp, base_dispatch, Py_EQ);
    Py_DECREF(disp);
    if (plain < 0) {
        return TR_ERROR;
    }
    if (!plain) {
        return cdyn_tx_unsupported(tx, "Tensor.as_subclass(%s): a __torch_dispatch__ subclass",
                                   ((PyTypeObject *)cls)->tp_name);
    }
    *out = cdyn_value_tensor(fake(self), V(self)->u.tensor.node, NULL);
    if (*out == NULL) {
        return TR_ERROR;
    }
    if (cls != cdyn_G.torch_tensor_type) {
        V(*out)->u.tensor.type = Py_NewRef(cls);
    }
    return TR_OK;
}

static PyTypeObject *
tensor_python_type(PyObject *v)
{
    return (PyTypeObject *)(V(v)->u.tensor.type != NULL ? V(v)->u.tensor.type
                                                        : cdyn_G.torch_tensor_type);
}

/* isinstance() of a tensor is decided by its Python type (an input's exact type, guarded),
 * except against torch's legacy tensor types (torch.FloatTensor, torch.cuda.LongTensor, ...):
 * their metaclass compares the tensor's dtype and device, which its fake tensor has. */
int
cdyn_tensor_isinstance(PyObject *v, PyObject *cls)
{
    int legacy;
    if (PyTuple_Check(cls)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(cls); i++) {
            int r = cdyn_tensor_isinstance(v, PyTuple_GET_ITEM(cls, i));
            if (r != 0) {
                return r;
            }
        }
        return 0;
    }
    if ((legacy = is_legacy_tensor_type(cls)) != 0) {
        return legacy < 0 ? -1 : PyObject_IsInstance(fake(v), cls);
    }
    return PyObject_IsSubclass((PyObject *)tensor_python_type(v), cls);
}

static tr_status
tensor_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    PyObject *key, *val;
    Py_ssize_t pos = 0;
    if (V(v)->source != NULL) {
        return TR_OK;
    }
    if (cdyn_cg_add_output(cg, V(v)->u.tensor.node) < 0) {
        return TR_ERROR;
    }
    while (V(v)->u.tensor.attrs != NULL && PyDict_Next(V(v)->u.tensor.attrs, &pos, &key, &val)) {
        tr_status st = cdyn_cg_collect(tx, cg, val);
        if (st != TR_OK) {
            return st;
        }
    }
    return TR_OK;
}

static int
tensor_reconstruct(cdyn_cg *cg, PyObject *v)
{
    static PyObject *as_subclass_fn;   /* torch.Tensor.as_subclass, for the process */
    PyObject *key, *val;
    Py_ssize_t pos = 0;
    int r;
    if (V(v)->source != NULL) {
        return cdyn_cg_source(cg, V(v)->source);
    }
    if (V(v)->u.tensor.type == NULL && V(v)->u.tensor.attrs == NULL) {
        return cdyn_cg_load_output(cg, V(v)->u.tensor.node);
    }
    /* the graph gives plain tensors: torch.Tensor.as_subclass(<output>, cls), made once per
       value (each as_subclass call is a new object: a value on the stack and in a local at a
       break, or returned twice, is one object, as in eager), then the attributes the trace
       stored on it */
    if ((r = cdyn_cg_memo_load(cg, v)) != 0) {
        return r < 0 ? -1 : 0;
    }
    if (as_subclass_fn == NULL &&
        (as_subclass_fn = PyObject_GetAttrString(cdyn_G.torch_tensor_type, "as_subclass")) == NULL) {
        return -1;
    }
    if (V(v)->u.tensor.type == NULL ? cdyn_cg_load_output(cg, V(v)->u.tensor.node) < 0
        : (cdyn_cg_push_callable(cg, as_subclass_fn) < 0 ||
           cdyn_cg_load_output(cg, V(v)->u.tensor.node) < 0 ||
           cdyn_cg_load_const(cg, V(v)->u.tensor.type) < 0 || cdyn_cg_call(cg, 2) < 0)) {
        return -1;
    }
    if (cdyn_cg_memo_store(cg, v, "sub") < 0) {
        return -1;
    }
    while (V(v)->u.tensor.attrs != NULL && PyDict_Next(V(v)->u.tensor.attrs, &pos, &key, &val)) {
        int k = cdyn_cg_name(cg, key);   /* value, object; STORE_ATTR name */
        if (k < 0 || cdyn_cg_value(cg, val) < 0 || cdyn_cg_memo_load(cg, v) != 1 ||
            cdyn_cg_emit(cg, STORE_ATTR, k) < 0) {
            return -1;
        }
    }
    return 0;
}

const cdyn_vtable cdyn_tensor_vt = {
    .name = "TensorVariable",
    .getattr = tensor_getattr,
    .setattr = tensor_setattr,
    .call_method = tensor_call_method,
    .truth = tensor_truth,
    .unpack = tensor_unpack,
    .subscr = tensor_subscr,
    .store_subscr = tensor_store_subscr,
    .binop = tensor_binop,
    .compare = tensor_compare,
    .unary = tensor_unary,
    .len = tensor_len,
    .graph_arg = tensor_graph_arg,
    .python_type = tensor_python_type,
    .collect = tensor_collect,
    .reconstruct = tensor_reconstruct,
};
