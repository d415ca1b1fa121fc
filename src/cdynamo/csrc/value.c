/* value.c: the symbolic value type, its constructors, and the dispatch entry points that
 * call through each value's family table (see value.h). */
#include "tx.h"

long long cdyn_value_serial = 0;

static const cdyn_vtable *const family_of[VK__COUNT] = {
    [VK_NULL] = &cdyn_misc_vt,      [VK_PYMODULE] = &cdyn_misc_vt,
    [VK_CELL] = &cdyn_misc_vt,      [VK_OPAQUE] = &cdyn_misc_vt,
    [VK_CONST] = &cdyn_const_vt,    [VK_TENSOR] = &cdyn_tensor_vt,
    [VK_TUPLE] = &cdyn_seq_vt,      [VK_LIST] = &cdyn_seq_vt,
    [VK_DICT] = &cdyn_dict_vt,      [VK_DICTVIEW] = &cdyn_dict_vt,
    [VK_FUNCTION] = &cdyn_function_vt,
    [VK_USERFN] = &cdyn_function_vt, [VK_METHOD] = &cdyn_function_vt,
    [VK_BUILTIN] = &cdyn_builtin_vt, [VK_TORCHFN] = &cdyn_torch_vt,
    [VK_CLASS] = &cdyn_user_vt,     [VK_OBJECT] = &cdyn_user_vt,
    [VK_SUPER] = &cdyn_user_vt,     [VK_NNMODULE] = &cdyn_nnmodule_vt,
    [VK_ITER] = &cdyn_iter_vt,      [VK_GRADCTX] = &cdyn_ctx_vt,
    [VK_GRADEXIT] = &cdyn_ctx_vt,   [VK_GRADFN] = &cdyn_ctx_vt,
    [VK_AUTOCAST] = &cdyn_ctx_vt,
    [VK_AUTOCAST_EXIT] = &cdyn_ctx_vt, [VK_NULLCTX] = &cdyn_ctx_vt,
    [VK_SYMINT] = &cdyn_symint_vt, [VK_SYMSLICE] = &cdyn_symint_vt,
    [VK_EXCTYPE] = &cdyn_exc_vt,    [VK_EXC] = &cdyn_exc_vt,
    [VK_NDARRAY] = &cdyn_ndarray_vt, [VK_NPFN] = &cdyn_npfn_vt,
    [VK_GENERATOR] = &cdyn_generator_vt,
    [VK_PARTIAL] = &cdyn_function_vt, [VK_WRAPPER] = &cdyn_function_vt,
    [VK_NEWOBJ] = &cdyn_user_vt,    [VK_OBJFN] = &cdyn_user_vt,
    [VK_SET] = &cdyn_set_vt,        [VK_FROZENSET] = &cdyn_set_vt,
    [VK_HOP] = &cdyn_hop_vt,        [VK_SUBGRAPH] = &cdyn_hop_vt,
    [VK_FNCTX] = &cdyn_hop_vt,      [VK_DEQUE] = &cdyn_deque_vt,
    [VK_MPROXY] = &cdyn_mproxy_vt,
};

static const char *const kind_names[VK__COUNT] = {
    [VK_NULL] = "Null", [VK_PYMODULE] = "PythonModule", [VK_CELL] = "Cell",
    [VK_OPAQUE] = "Opaque", [VK_CONST] = "Constant", [VK_TENSOR] = "Tensor",
    [VK_TUPLE] = "Tuple", [VK_LIST] = "List", [VK_DICT] = "Dict", [VK_DICTVIEW] = "DictView",
    [VK_FUNCTION] = "NestedUserFunction", [VK_USERFN] = "UserFunction",
    [VK_METHOD] = "Method", [VK_BUILTIN] = "Builtin", [VK_TORCHFN] = "TorchFunction",
    [VK_CLASS] = "UserDefinedClass", [VK_OBJECT] = "UserDefinedObject", [VK_SUPER] = "Super",
    [VK_NNMODULE] = "NNModule", [VK_ITER] = "Iterator", [VK_GRADCTX] = "GradModeContext",
    [VK_GRADEXIT] = "GradModeExit", [VK_GRADFN] = "GradModeDecoratedFunction",
    [VK_AUTOCAST] = "AutocastMode",
    [VK_AUTOCAST_EXIT] = "AutocastExit", [VK_NULLCTX] = "NullContext",
    [VK_SYMINT] = "SymNode", [VK_SYMSLICE] = "Slice",
    [VK_EXCTYPE] = "ExceptionClass", [VK_EXC] = "Exception",
    [VK_NDARRAY] = "NumpyNdarray", [VK_NPFN] = "Numpy",
    [VK_GENERATOR] = "LocalGenerator", [VK_PARTIAL] = "FunctoolsPartial",
    [VK_WRAPPER] = "WrappedUserFunction",
    [VK_NEWOBJ] = "UserDefinedObject(new)", [VK_OBJFN] = "SlotFunction",
    [VK_SET] = "Set", [VK_FROZENSET] = "FrozenSet",
    [VK_HOP] = "HigherOrderOp", [VK_SUBGRAPH] = "Subgraph", [VK_FNCTX] = "AutogradFunctionContext",
    [VK_DEQUE] = "Deque", [VK_MPROXY] = "MappingProxy",
};

/* Visit the payload and the source (values can form cycles: an object made while
 * tracing whose attribute is itself, a list holding itself). */
static int
value_traverse(PyObject *self, visitproc visit, void *arg)
{
    cdyn_value *v = V(self);
    for (int i = 0; i < CDYN_VREFS; i++) {
        Py_VISIT(v->u.ref[i]);
    }
    Py_VISIT(v->source);
    return 0;
}

/* Break cycles: release the payload (the value is garbage). */
static int
value_clear(PyObject *self)
{
    cdyn_value *v = V(self);
    for (int i = 0; i < CDYN_VREFS; i++) {
        Py_CLEAR(v->u.ref[i]);
    }
    return 0;
}

/* Release the payload and the source; the payload is CDYN_VREFS references. */
static void
value_dealloc(PyObject *self)
{
    cdyn_value *v = V(self);
    PyObject_GC_UnTrack(self);
    for (int i = 0; i < CDYN_VREFS; i++) {
        Py_CLEAR(v->u.ref[i]);
    }
    Py_CLEAR(v->source);
    Py_TYPE(self)->tp_free(self);
    cdyn_live.values--;
}

/* Contract: a short readable form; never fails except on MemoryError. */
PyObject *
cdyn_value_repr(PyObject *self)
{
    cdyn_value *v = V(self);
    const char *k = kind_names[v->kind];
    switch (v->kind) {
    case VK_CONST:
        return PyUnicode_FromFormat("%sVariable(%R)", k, v->u.cnst.value);
    case VK_TENSOR:
    case VK_NDARRAY:
        return PyUnicode_FromFormat("%sVariable(%S)", k,
                                    v->u.tensor.node ? v->u.tensor.node : Py_None);
    case VK_TUPLE:
    case VK_LIST:
        return PyUnicode_FromFormat("%sVariable(len=%zd)", k,
                                    v->u.seq.items ? PyList_GET_SIZE(v->u.seq.items)
                                                   : (Py_ssize_t)-1);
    case VK_DICT:
        return PyUnicode_FromFormat("%sVariable(len=%zd)", k,
                                    v->u.dict.vals ? PyList_GET_SIZE(v->u.dict.vals)
                                                   : (Py_ssize_t)-1);
    case VK_SET:
    case VK_FROZENSET:
        return PyUnicode_FromFormat("%sVariable(len=%zd)", k,
                                    v->u.set.map ? PyDict_GET_SIZE(v->u.set.map)
                                                 : (Py_ssize_t)-1);
    case VK_ITER:
        return PyUnicode_FromFormat("%sVariable(%zd of %zd)", k, v->pos,
                                    PyList_GET_SIZE(v->u.iter.items));
    case VK_METHOD:
        return PyUnicode_FromFormat("%sVariable(%U)", k, v->u.method.name);
    case VK_FUNCTION:
        return PyUnicode_FromFormat("%sVariable(%U)", k,
                                    ((PyCodeObject *)v->u.func.code)->co_qualname);
    default:
        if (v->u.ref[0] != NULL) {
            /* a repr that raises (an nn.Module whose __init__ has not run yet) names the
               type instead: a reason must not be lost to its formatting */
            PyObject *r = PyObject_Repr(v->u.ref[0]), *res;
            if (r == NULL) {
                PyErr_Clear();
                return PyUnicode_FromFormat("%sVariable(<%s object at %p>)", k,
                                            Py_TYPE(v->u.ref[0])->tp_name, (void *)v->u.ref[0]);
            }
            res = PyUnicode_FromFormat("%sVariable(%.60U)", k, r);
            Py_DECREF(r);
            return res;
        }
        return PyUnicode_FromFormat("%sVariable()", k);
    }
}

PyTypeObject cdyn_ValueType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cdynamo._C.Value",
    .tp_basicsize = sizeof(cdyn_value),
    .tp_dealloc = value_dealloc,
    .tp_repr = cdyn_value_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = value_traverse,
    .tp_clear = value_clear,
    .tp_doc = "A symbolic value of cdynamo's translator (internal).",
};

/* ---- constructors ------------------------------------------------------------------- */

PyObject *
cdyn_value_alloc(cdyn_vkind kind, PyObject *source)
{
    cdyn_value *v = PyObject_GC_New(cdyn_value, &cdyn_ValueType);
    if (v == NULL) {
        return NULL;
    }
    assert(kind >= 0 && kind < VK__COUNT && family_of[kind] != NULL);
    v->vt = family_of[kind];
    v->kind = kind;
    v->bits = 0;
    v->pos = 0;
    v->serial = cdyn_value_serial++;
    v->undo_epoch = 0;
    v->source = Py_XNewRef(source);
    memset(&v->u, 0, sizeof(v->u));
    PyObject_GC_Track((PyObject *)v);
    cdyn_live.values++;
    return (PyObject *)v;
}

PyObject *
cdyn_value_obj(cdyn_vkind kind, PyObject *obj, PyObject *source)
{
    PyObject *v = cdyn_value_alloc(kind, source);
    if (v != NULL) {
        V(v)->u.ref[0] = Py_XNewRef(obj);
    }
    return v;
}

PyObject *
cdyn_value_const(PyObject *obj)
{
    return cdyn_value_obj(VK_CONST, obj, NULL);
}

PyObject *
cdyn_value_const_steal(PyObject *obj)
{
    PyObject *v = NULL;
    if (obj == NULL) {
        return NULL;
    }
    v = cdyn_value_const(obj);
    Py_DECREF(obj);
    return v;
}

PyObject *
cdyn_value_bool(int b)
{
    return cdyn_value_const(b ? Py_True : Py_False);
}

PyObject *
cdyn_value_seq_list(cdyn_vkind kind, PyObject *items)
{
    PyObject *v = cdyn_value_alloc(kind, NULL);
    if (v != NULL) {
        V(v)->u.seq.items = Py_NewRef(items);
    }
    return v;
}

PyObject *
cdyn_value_seq(cdyn_vkind kind, PyObject *const *vals, Py_ssize_t n)
{
    PyObject *list = PyList_New(n), *v = NULL;
    if (list == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyList_SET_ITEM(list, i, Py_NewRef(vals[i]));
    }
    v = cdyn_value_seq_list(kind, list);
    Py_DECREF(list);
    return v;
}

PyObject *
cdyn_value_dict(PyObject *keys, PyObject *vals)
{
    PyObject *v = cdyn_value_alloc(VK_DICT, NULL);
    if (v != NULL) {
        V(v)->u.dict.keys = Py_NewRef(keys);
        V(v)->u.dict.vals = Py_NewRef(vals);
    }
    return v;
}

PyObject *
cdyn_value_iter(PyObject *items)
{
    PyObject *v = cdyn_value_alloc(VK_ITER, NULL);
    if (v != NULL) {
        V(v)->u.iter.items = Py_NewRef(items);
    }
    return v;
}

PyObject *
cdyn_value_iter_typed(PyObject *items, PyTypeObject *type)
{
    PyObject *v = cdyn_value_iter(items);
    if (v != NULL) {
        V(v)->u.iter.type = Py_XNewRef((PyObject *)type);
    }
    return v;
}

PyObject *
cdyn_value_tensor(PyObject *fake, PyObject *node, PyObject *source)
{
    PyObject *v = cdyn_value_alloc(VK_TENSOR, source);
    PyTypeObject *t = Py_TYPE(fake);
    if (v != NULL) {
        V(v)->u.tensor.fake = Py_NewRef(fake);
        V(v)->u.tensor.node = Py_NewRef(node);
        if (cdyn_is_wrapper_subclass(t)) {
            /* a traceable wrapper subclass (TwoTensor, a quantized tensor): its fake is of
               that type itself (over fake inner tensors), as the real value will be */
            V(v)->u.tensor.type = Py_NewRef((PyObject *)t);
        }
    }
    return v;
}

PyObject *
cdyn_value_method(PyObject *func, PyObject *name, PyObject *self)
{
    PyObject *v = cdyn_value_alloc(VK_METHOD, NULL);
    if (v != NULL) {
        V(v)->u.method.func = Py_XNewRef(func);
        V(v)->u.method.name = Py_NewRef(name);
        V(v)->u.method.self = Py_NewRef(self);
    }
    return v;
}

static PyObject *null_value;   /* the shared NULL value */

PyObject *
cdyn_value_null(void)
{
    return Py_NewRef(null_value);
}

PyObject *
cdyn_v_real(PyObject *v)
{
    switch (V(v)->kind) {
    case VK_CONST: case VK_PYMODULE: case VK_OPAQUE: case VK_USERFN: case VK_BUILTIN:
    case VK_TORCHFN: case VK_CLASS: case VK_OBJECT: case VK_NNMODULE: case VK_EXCTYPE:
    case VK_NPFN:
    case VK_WRAPPER:
        return V(v)->u.obj.obj;
    default:
        return NULL;
    }
}

/* ---- dispatch -------------------------------------------------------------------------- */

/* The reason for a missing handler: "<what> of <value>". */
static tr_status
missing(cdyn_tx *tx, const char *what, PyObject *v)
{
    return cdyn_tx_unsupported(tx, "%s of %S is not supported", what, v);
}

tr_status
cdyn_v_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    if (V(v)->vt->getattr == NULL) {
        return cdyn_tx_unsupported(tx, "attribute %U of %S is not supported", name, v);
    }
    return V(v)->vt->getattr(tx, v, name, out);
}

tr_status
cdyn_v_setattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    if (V(v)->vt->setattr == NULL) {
        return cdyn_tx_unsupported(tx, "STORE_ATTR %U on %S (side effect)", name, v);
    }
    return V(v)->vt->setattr(tx, v, name, value);
}

tr_status
cdyn_v_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames, PyObject **out)
{
    if (V(fn)->vt->call == NULL) {
        return missing(tx, "call", fn);
    }
    return V(fn)->vt->call(tx, fs, fn, args, nargs, kwnames, out);
}

static tr_status raise_as_real(cdyn_tx *tx, tr_status st, PyObject *fn, PyObject *name,
                               PyObject *const *vals, Py_ssize_t n, PyObject *kwnames);

/* The operator dunders of the builtin containers (set.__or__, list.__add__, dict.__eq__,
 * s.__ior__, ...) called directly on self (of builtin type t) with other: the operator
 * itself. An operand the slot would not take gives NotImplemented, as the slot does
 * (sets and dicts) or is unsupported (lists and tuples raise). TR_NOTIMPL: not such a name. */
static tr_status
builtin_operator_dunder(cdyn_tx *tx, PyObject *self, PyTypeObject *t, PyObject *name,
                        PyObject *other, PyObject **out)
{
    PyTypeObject *ot = cdyn_v_python_type(other);
    int setlike = t == &PySet_Type || t == &PyFrozenSet_Type, ok;
    int cmp = cdyn_dunder_compare(name), op = cmp < 0 ? cdyn_dunder_binop(name) : -1;
    if (ot == NULL || (cmp < 0 && op < 0)) {
        return TR_NOTIMPL;
    }
    ok = setlike ? PyType_IsSubtype(ot, &PySet_Type) || PyType_IsSubtype(ot, &PyFrozenSet_Type)
                 : PyType_IsSubtype(ot, t) || (t == &PyDict_Type && op == NB_INPLACE_OR);
    if (op == NB_MULTIPLY || op == NB_INPLACE_MULTIPLY) {
        ok = ot == &PyLong_Type || ot == &PyBool_Type;   /* seq * n */
    }
    if (!ok && (setlike || t == &PyDict_Type || cmp == Py_EQ || cmp == Py_NE)) {
        *out = cdyn_value_const(Py_NotImplemented);
        return *out ? TR_OK : TR_ERROR;
    }
    if (!ok && op >= 0) {
        return cdyn_tx_unsupported(tx, "%s.%U of %S", t->tp_name, name, other);
    }
    return cmp >= 0 ? cdyn_v_compare(tx, cmp, self, other, out)
                    : cdyn_v_binop(tx, op, self, other, out);
}

/* 1 for the exact builtin containers whose dunder methods builtin_dunder models. */
static int
dunder_container_type(PyTypeObject *t)
{
    return t == &PyList_Type || t == &PyTuple_Type || t == &PyDict_Type || t == &PySet_Type ||
           t == &PyFrozenSet_Type || t == &PyRange_Type;
}

int
cdyn_container_dunder(PyTypeObject *t, PyObject *name)
{
    return dunder_container_type(t) && PyUnicode_Check(name) &&
           (cdyn_name_is(name, "__iter__") || cdyn_name_is(name, "__len__") ||
            cdyn_name_is(name, "__contains__") || cdyn_name_is(name, "__getitem__"));
}

/* A dunder method of an exact builtin container called directly (l.__contains__(x),
 * d.__getitem__(k), s.__len__()): the operation it implements (cdyn_v_base_dunder).
 * TR_NOTIMPL for others. */
static tr_status
builtin_dunder(cdyn_tx *tx, PyObject *self, PyObject *name, PyObject *const *args,
               Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyTypeObject *t = cdyn_v_python_type(self);
    if (t != NULL && t != &PyDict_Type && V(self)->vt == &cdyn_dict_vt &&
        PyType_IsSubtype(t, &PyDict_Type)) {
        t = &PyDict_Type;   /* an OrderedDict / defaultdict / Counter value: dict's slots */
    }
    return cdyn_v_base_dunder(tx, self, t, name, args, nargs, kwnames, out);
}

tr_status
cdyn_v_base_dunder(cdyn_tx *tx, PyObject *self, PyTypeObject *t, PyObject *name,
                   PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    tr_status st;
    int in = 0;
    Py_ssize_t n = 0;
    if (kwnames != NULL || !PyUnicode_Check(name) || !dunder_container_type(t)) {
        return TR_NOTIMPL;
    }
    st = cdyn_seq_base_dunder(tx, self, name, args, nargs, out);
    if (st != TR_NOTIMPL) {
        return st;
    }
    if (nargs == 1 && cdyn_name_is(name, "__contains__")) {
        st = cdyn_v_contains(tx, self, args[0], &in);
        return st != TR_OK ? st : (*out = cdyn_value_bool(in)) ? TR_OK : TR_ERROR;
    }
    if (nargs == 0 && cdyn_name_is(name, "__len__")) {
        st = cdyn_v_len(tx, self, &n);
        return st != TR_OK ? st
                           : (*out = cdyn_value_const_steal(PyLong_FromSsize_t(n))) ? TR_OK
                                                                                    : TR_ERROR;
    }
    if (nargs == 1 && cdyn_name_is(name, "__getitem__")) {
        return cdyn_v_subscr(tx, self, args[0], out);
    }
    if (nargs == 0 && cdyn_name_is(name, "__iter__")) {
        return cdyn_v_iter(tx, self, out);
    }
    if ((nargs == 2 && cdyn_name_is(name, "__setitem__")) ||
        (nargs == 1 && cdyn_name_is(name, "__delitem__"))) {
        st = nargs == 2 ? cdyn_v_store_subscr(tx, self, args[0], args[1])
                        : cdyn_v_delete_subscr(tx, self, args[0]);
        return st != TR_OK ? st : (*out = cdyn_value_const(Py_None)) ? TR_OK : TR_ERROR;
    }
    return nargs == 1 ? builtin_operator_dunder(tx, self, t, name, args[0], out) : TR_NOTIMPL;
}

tr_status
cdyn_v_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *self, PyObject *name,
                   PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    tr_status st = builtin_dunder(tx, self, name, args, nargs, kwnames, out);
    if (st == TR_NOTIMPL && V(self)->vt->call_method == NULL && V(self)->kind == VK_CONST) {
        /* a method of a constant called by name (a bound "/".join kept in an attribute,
           as pathlib's flavour does): its attribute, then the call */
        PyObject *bound = NULL;
        st = cdyn_v_getattr(tx, self, name, &bound);
        if (st == TR_OK) {
            st = cdyn_v_call(tx, fs, bound, args, nargs, kwnames, out);
            Py_DECREF(bound);
        }
        return st;
    }
    if (st == TR_NOTIMPL && V(self)->vt->call_method == NULL) {
        st = cdyn_tx_unsupported(tx, "method %U of %S is not supported", name, self);
    }
    else if (st == TR_NOTIMPL) {
        st = V(self)->vt->call_method(tx, fs, self, name, args, nargs, kwnames, out);
    }
    if (st == TR_UNSUPPORTED && nargs < 8) {
        PyObject *all[8];
        all[0] = self;
        for (Py_ssize_t i = 0; i < nargs; i++) {
            all[i + 1] = args[i];
        }
        st = raise_as_real(tx, st, NULL, name, all, nargs + 1, kwnames);
    }
    return st;
}

tr_status
cdyn_v_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    tr_status st = cdyn_tx_materialize(tx, v);
    if (st != TR_OK) {
        return st;
    }
    if (V(v)->vt->truth == NULL) {
        return missing(tx, "truth value", v);
    }
    return V(v)->vt->truth(tx, v, out);
}

tr_status
cdyn_v_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    tr_status st = cdyn_tx_materialize(tx, v);
    if (st != TR_OK) {
        return st;
    }
    if (V(v)->vt->unpack == NULL) {
        return missing(tx, "iteration", v);
    }
    return V(v)->vt->unpack(tx, v, out_list);
}

/* The type of iter(x) for a value whose type is t (borrowed), or NULL when unknown: the
 * iterator type of an empty instance of t (list_iterator, range_iterator, ...). */
static PyTypeObject *
iterator_type_of(PyObject *v)
{
    static const char *const views[] = {"keys", "values", "items"};
    PyObject *real = V(v)->kind == VK_CONST ? V(v)->u.cnst.value : NULL, *probe = NULL, *it;
    PyTypeObject *t = cdyn_v_python_type(v), *r = NULL, *b = t;
    while (b != NULL && (b->tp_flags & Py_TPFLAGS_HEAPTYPE) && b->tp_iter == b->tp_base->tp_iter) {
        b = b->tp_base;   /* a subclass iterating as its builtin base (a ModelOutput) */
    }
    if (real != NULL) {
        probe = Py_NewRef(real);
    }
    else if (b == &PyList_Type || b == &PyTuple_Type || b == &PyDict_Type || b == &PySet_Type ||
             b == &PyFrozenSet_Type || b == &PyUnicode_Type || b == &PyODict_Type) {
        probe = PyObject_CallNoArgs((PyObject *)b);
    }
    for (int base = 0; probe == NULL && t != NULL && base < 2 &&
                       (PyType_IsSubtype(t, &PyDictKeys_Type) ||
                        PyType_IsSubtype(t, &PyDictValues_Type) ||
                        PyType_IsSubtype(t, &PyDictItems_Type)); base++) {
        /* a view of a dict / OrderedDict: dict_keyiterator, odict_iterator, ... */
        PyObject *d = PyObject_CallNoArgs(base ? (PyObject *)&PyODict_Type
                                               : (PyObject *)&PyDict_Type);
        for (int i = 0; d != NULL && probe == NULL && i < 3; i++) {
            PyObject *view = PyObject_CallMethod(d, views[i], NULL);
            if (view != NULL && Py_TYPE(view) == t) {
                probe = Py_NewRef(view);
            }
            Py_XDECREF(view);
        }
        Py_XDECREF(d);
    }
    it = probe ? PyObject_GetIter(probe) : NULL;
    if (it != NULL) {
        r = Py_TYPE(it);   /* builtin iterator types live for the process */
    }
    Py_XDECREF(it);
    Py_XDECREF(probe);
    PyErr_Clear();
    return r;
}

tr_status
cdyn_v_iter(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    PyObject *items = NULL;
    tr_status st = V(v)->vt->iter != NULL ? V(v)->vt->iter(tx, v, out) : TR_NOTIMPL;
    if (st != TR_NOTIMPL) {
        return st;
    }
    if (V(v)->kind == VK_ITER || cdyn_v_is_iterator(v)) {   /* iterators: themselves */
        *out = Py_NewRef(v);
        return TR_OK;
    }
    st = cdyn_v_unpack(tx, v, &items);
    if (st != TR_OK) {
        return st;
    }
    *out = cdyn_value_iter_typed(items, iterator_type_of(v));
    Py_DECREF(items);
    return *out ? TR_OK : TR_ERROR;
}

tr_status
cdyn_v_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out)
{
    tr_status st = V(v)->vt->subscr_lazy ? V(v)->vt->subscr_lazy(tx, v, key, out) : TR_NOTIMPL;
    if (st != TR_NOTIMPL) {
        return st;
    }
    st = cdyn_tx_materialize(tx, v);
    if (st != TR_OK) {
        return st;
    }
    if (V(v)->vt->subscr == NULL) {
        return missing(tx, "subscript", v);
    }
    if (V(key)->kind == VK_SYMINT && V(v)->kind != VK_TENSOR) {
        /* a container indexed by a symbolic int: by its value (guarded) */
        PyObject *k = NULL;
        st = cdyn_sym_specialize(tx, key, &k);
        if (st == TR_OK) {
            st = V(v)->vt->subscr(tx, v, k, out);
            Py_DECREF(k);
        }
        return st;
    }
    return V(v)->vt->subscr(tx, v, key, out);
}

tr_status
cdyn_v_store_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value)
{
    tr_status st = V(v)->vt->store_subscr_lazy ? V(v)->vt->store_subscr_lazy(tx, v, key, value)
                                               : TR_NOTIMPL;
    if (st != TR_NOTIMPL) {
        return st;
    }
    st = cdyn_tx_materialize(tx, v);
    if (st != TR_OK) {
        return st;
    }
    if (V(v)->vt->store_subscr == NULL) {
        return missing(tx, "STORE_SUBSCR", v);
    }
    return V(v)->vt->store_subscr(tx, v, key, value);
}

tr_status
cdyn_v_delete_subscr(cdyn_tx *tx, PyObject *v, PyObject *key)
{
    tr_status st = cdyn_tx_materialize(tx, v);
    if (st != TR_OK) {
        return st;
    }
    if (V(v)->vt->delete_subscr == NULL) {
        return missing(tx, "DELETE_SUBSCR", v);
    }
    return V(v)->vt->delete_subscr(tx, v, key);
}

/* `item in it` of an iterator, as CPython does it: items taken from it until one equals
 * item (it stays advanced past that one) or it is exhausted. */
static tr_status
iterator_contains(cdyn_tx *tx, PyObject *it, PyObject *item, int *out)
{
    tr_status st = TR_OK;
    *out = 0;
    for (int n = 0; st == TR_OK && !*out; n++) {
        PyObject *x = NULL;
        if (n == 100000) {
            return cdyn_tx_unsupported(tx, "'in' of %S (no end found)", it);
        }
        st = cdyn_v_next(tx, it, &x);
        if (st != TR_OK || x == NULL) {
            break;
        }
        st = x == item ? (*out = 1, TR_OK) : cdyn_values_equal(tx, x, item, out);
        Py_DECREF(x);
    }
    return st;
}

tr_status
cdyn_v_contains(cdyn_tx *tx, PyObject *container, PyObject *item, int *out)
{
    tr_status st = V(container)->vt->contains_lazy
                       ? V(container)->vt->contains_lazy(tx, container, item, out)
                       : TR_NOTIMPL;
    if (st != TR_NOTIMPL) {
        return st;
    }
    st = cdyn_tx_materialize(tx, container);
    if (st != TR_OK) {
        return st;
    }
    if (V(container)->vt->contains == NULL && cdyn_v_is_iterator(container)) {
        return iterator_contains(tx, container, item, out);
    }
    if (V(container)->vt->contains == NULL) {
        return missing(tx, "'in'", container);
    }
    return V(container)->vt->contains(tx, container, item, out);
}

/* 1 when v stands for a class (whose identity a guard can pin), a generic alias
 * (`list[int]`), a union or None: an operand of a type union `int | None`. */
static int
union_operand(PyObject *v)
{
    PyObject *r = cdyn_v_real(v);
    return cdyn_v_is_none(v) ||
           (r != NULL && V(v)->kind != VK_CONST &&
            ((PyType_Check(r) && V(v)->kind != VK_OBJECT) ||
             Py_IS_TYPE(r, &Py_GenericAliasType) ||
             strcmp(Py_TYPE(r)->tp_name, "types.UnionType") == 0));   /* list[int], A | B */
}

/* `A | B` of classes and None (`int | None`, PEP 604): folded to the real types.UnionType,
 * with both classes' identities pinned; TR_NOTIMPL for anything else. */
static tr_status
type_union(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    PyObject *r;
    tr_status st;
    if ((op != NB_OR && op != NB_INPLACE_OR) || !union_operand(a) || !union_operand(b) ||
        (cdyn_v_is_none(a) && cdyn_v_is_none(b))) {
        return TR_NOTIMPL;
    }
    if ((!cdyn_v_is_none(a) && cdyn_v_pin_identity(tx, a) != TR_OK) ||
        (!cdyn_v_is_none(b) && cdyn_v_pin_identity(tx, b) != TR_OK)) {
        return TR_ERROR;
    }
    r = PyNumber_Or(cdyn_v_real(a), cdyn_v_real(b));
    if (r == NULL) {
        PyErr_Clear();
        return TR_NOTIMPL;
    }
    st = cdyn_tx_wrap_real(tx, r, NULL, out);
    Py_DECREF(r);
    return st;
}

tr_status
cdyn_constant_attr(cdyn_tx *tx, PyObject *v, PyObject *obj, PyObject *name, PyObject **out)
{
    PyObject *r = PyObject_GetAttr(obj, name);
    if (r == NULL || !cdyn_is_constant(r)) {
        Py_XDECREF(r);
        PyErr_Clear();
        return cdyn_tx_unsupported(tx, "attribute %U of %S", name, v);
    }
    *out = cdyn_value_const_steal(r);
    return *out ? TR_OK : TR_ERROR;
}

/* A real object equal to v when v is a constant or a container of constants (a fresh copy:
 * mutating it changes nothing of the trace); NULL (no exception) otherwise. */
static PyObject *
constant_copy(PyObject *v)
{
    if (V(v)->kind == VK_CONST) {
        return Py_NewRef(V(v)->u.cnst.value);
    }
    return V(v)->vt->as_constant != NULL ? V(v)->vt->as_constant(v) : NULL;
}

/* An operation the families did not model (st: TR_UNSUPPORTED, tx->reason set) on
 * constants and containers of constants: run for real on copies of them (fn(*vals), or
 * getattr(vals[0], name)(*vals[1:]) when name is not NULL); when it raises a builtin error
 * (a bad argument: TypeError, ValueError, ...) the traced code raises it, as eager would,
 * so an `except` around it works. Anything else keeps st. */
static tr_status
raise_as_real(cdyn_tx *tx, tr_status st, PyObject *fn, PyObject *name, PyObject *const *vals,
              Py_ssize_t n, PyObject *kwnames)
{
    PyObject *real[8] = {NULL}, *callee = NULL, *res = NULL;
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, i;
    tr_status raised;
    if (st != TR_UNSUPPORTED || n > 8 || n < 1 || PyErr_Occurred()) {
        return st;
    }
    for (i = 0; i < n; i++) {
        if ((real[i] = constant_copy(vals[i])) == NULL) {
            PyErr_Clear();
            goto done;
        }
    }
    callee = name != NULL ? PyObject_GetAttr(real[0], name) : Py_NewRef(fn);
    if (callee != NULL) {
        res = name != NULL ? PyObject_Vectorcall(callee, real + 1, (size_t)(n - 1 - nk), kwnames)
                           : PyObject_Vectorcall(callee, real, (size_t)(n - nk), kwnames);
    }
    if (res != NULL || !PyErr_Occurred()) {
        goto done;
    }
    raised = cdyn_tx_raise_pending(tx);
    st = raised == TR_NOTIMPL ? st : raised;
done:
    for (i = 0; i < 8; i++) {
        Py_XDECREF(real[i]);
    }
    Py_XDECREF(callee);
    Py_XDECREF(res);
    return st;
}

/* The binary operators in BINARY_OP oparg order (0..12; the in-place forms are 13 + i). */
static const char *const binop_words[13] = {"add", "and", "floordiv", "lshift", "matmul",
                                            "mul", "mod", "or", "pow", "rshift", "sub",
                                            "truediv", "xor"};

PyObject *
cdyn_binop_dunder_name(int op, int reflected)
{
    if (op < 0 || op > 25) {
        PyErr_Format(PyExc_SystemError, "cdynamo: BINARY_OP %d has no dunder", op);
        return NULL;
    }
    return PyUnicode_FromFormat("__%s%s__", op >= 13 ? "i" : reflected ? "r" : "",
                                binop_words[op % 13]);
}

int
cdyn_dunder_binop(PyObject *name)
{
    const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    size_t n = s ? strlen(s) : 0;
    if (s == NULL || n < 5 || strncmp(s, "__", 2) != 0 || strcmp(s + n - 2, "__") != 0) {
        PyErr_Clear();
        return -1;
    }
    for (int i = 0; i < 13; i++) {
        size_t w = strlen(binop_words[i]);
        if (n == w + 4 && strncmp(s + 2, binop_words[i], w) == 0) {
            return i;
        }
        if (n == w + 5 && s[2] == 'i' && strncmp(s + 3, binop_words[i], w) == 0) {
            return 13 + i;
        }
    }
    return -1;
}

int
cdyn_dunder_compare(PyObject *name)
{
    static const char *const cmps[6] = {"__lt__", "__le__", "__eq__", "__ne__", "__gt__",
                                        "__ge__"};
    for (int i = 0; i < 6; i++) {
        if (cdyn_name_is(name, cmps[i])) {
            return Py_LT + i;
        }
    }
    return -1;
}

/* 1 when the type of v defines (or may define: unknown type) the in-place form of binary
 * operator op (0..12), e.g. __iand__ for NB_AND. */
static int
has_inplace_slot(PyObject *v, int op)
{
    PyTypeObject *t = cdyn_v_python_type(v);
    PyObject *name;
    int has;
    if (t == NULL || (name = PyUnicode_FromFormat("__i%s__", binop_words[op])) == NULL) {
        PyErr_Clear();
        return 1;
    }
    has = _PyType_Lookup(t, name) != NULL;
    Py_DECREF(name);
    return has;
}

int
cdyn_type_decides_operators(PyTypeObject *t)
{
    return t == &PyDict_Type || t == &PyList_Type || t == &PyTuple_Type || t == &PySet_Type ||
           t == &PyFrozenSet_Type || t == &PyLong_Type || t == &PyFloat_Type ||
           t == &PyUnicode_Type || t == &PyBytes_Type || t == &PyBool_Type ||
           t == &PyComplex_Type || t == Py_TYPE(Py_None);
}

/* A binary operator the families did not model (st: TR_UNSUPPORTED) on values a, b of exact
 * builtin types whose operators decide by type: when neither type implements it for the
 * other (`{...} | 1`, `[...] - []`), the TypeError eager raises ("unsupported operand
 * type(s) for |: 'dict' and 'int'"), raised in the traced code. Found by applying the
 * operator to empty instances of the two types; any other outcome keeps st. */
static tr_status
operand_type_error(cdyn_tx *tx, tr_status st, int op, PyObject *a, PyObject *b)
{
    PyTypeObject *ta = cdyn_v_python_type(a), *tb = cdyn_v_python_type(b);
    PyObject *ea = NULL, *eb = NULL, *r = NULL;
    if (ta == NULL || tb == NULL || !cdyn_type_decides_operators(ta) || !cdyn_type_decides_operators(tb) ||
        PyErr_Occurred()) {
        return st;
    }
    ea = ta == Py_TYPE(Py_None) ? Py_NewRef(Py_None) : PyObject_CallNoArgs((PyObject *)ta);
    eb = tb == Py_TYPE(Py_None) ? Py_NewRef(Py_None) : PyObject_CallNoArgs((PyObject *)tb);
    if (ea != NULL && eb != NULL) {
        r = PyObject_CallFunctionObjArgs(cdyn_G.binop_fns[op], ea, eb, NULL);
    }
    if (r == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyObject *et, *ev, *tb_ = NULL, *msg;
        PyErr_Fetch(&et, &ev, &tb_);
        PyErr_NormalizeException(&et, &ev, &tb_);
        msg = ev ? PyObject_Str(ev) : NULL;
        const char *text = msg != NULL && PyUnicode_Check(msg) ? PyUnicode_AsUTF8(msg) : NULL;
        if (text != NULL && strncmp(text, "unsupported operand type(s)", 27) == 0) {
            Py_CLEAR(tx->reason);
            st = cdyn_tx_raise_text(tx, PyExc_TypeError, "%U", msg);
        }
        Py_XDECREF(msg);
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(tb_);
    }
    PyErr_Clear();
    Py_XDECREF(r);
    Py_XDECREF(ea);
    Py_XDECREF(eb);
    return st;
}

tr_status
cdyn_v_binop(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    tr_status st = TR_NOTIMPL;
    if (op < 0 || op > 25) {
        return cdyn_tx_unsupported(tx, "BINARY_OP %d", op);
    }
    st = type_union(tx, op, a, b, out);   /* (a union value is a plain OBJECT) */
    if (st == TR_NOTIMPL && V(a)->vt->binop != NULL) {
        st = V(a)->vt->binop(tx, op, a, b, out);
    }
    if (st == TR_NOTIMPL && V(b)->vt != V(a)->vt && V(b)->vt->binop != NULL) {
        st = V(b)->vt->binop(tx, op, a, b, out);
    }
    if (st == TR_NOTIMPL && op >= 13 && !has_inplace_slot(a, op - 13)) {
        /* no in-place form (a dict view, a frozenset, ...): the binary operator, as Python
           falls back from __iand__ to __and__ */
        return cdyn_v_binop(tx, op - 13, a, b, out);
    }
    if (st == TR_NOTIMPL) {
        st = cdyn_tx_unsupported(tx, "BINARY_OP %d on %S and %S", op, a, b);
    }
    if (st == TR_UNSUPPORTED) {
        PyObject *ab[2] = {a, b};
        st = raise_as_real(tx, st, cdyn_G.binop_fns[op], NULL, ab, 2, NULL);
    }
    if (st == TR_UNSUPPORTED && V(a)->kind != VK_TENSOR && V(b)->kind != VK_TENSOR) {
        st = operand_type_error(tx, st, op, a, b);
    }
    return st;
}

/* The equality group of builtin type t: values of exact builtin types in different groups
 * never compare equal (their __eq__ returns NotImplemented both ways); 0 for other types. */
static int
eq_group(PyTypeObject *t)
{
    static PyTypeObject *const groups[][4] = {
        {&PyList_Type}, {&PyTuple_Type}, {&PyDict_Type}, {&PyUnicode_Type}, {&PyBytes_Type},
        {&PyLong_Type, &PyFloat_Type, &PyBool_Type, &PyComplex_Type},
        {&PySet_Type, &PyFrozenSet_Type},
    };
    enum { NGROUPS = sizeof groups / sizeof groups[0] };
    if (t == Py_TYPE(Py_None)) {
        return NGROUPS + 1;   /* NoneType (no exported type object name since 3.13) */
    }
    for (size_t g = 0; t != NULL && g < NGROUPS; g++) {
        for (int i = 0; i < 4 && groups[g][i] != NULL; i++) {
            if (groups[g][i] == t) {
                return (int)g + 1;
            }
        }
    }
    return 0;
}

/* 1 when obj (may be NULL) is a class whose metaclass compares by identity (type's own ==):
 * it never equals a value of a builtin type (type(x) == "Tensor"). */
static int
plain_class(PyObject *obj)
{
    return obj != NULL && PyType_Check(obj) &&
           Py_TYPE(obj)->tp_richcompare == PyType_Type.tp_richcompare;
}

/* == / != decided without calling __eq__: identities fixed by guards, None, values of
 * builtin types that never compare equal (a list and a str), a class and such a value. */
static tr_status
compare_identity(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    PyObject *ra = cdyn_v_real(a), *rb = cdyn_v_real(b);
    int ga, gb;
    if (op != Py_EQ && op != Py_NE) {
        return TR_NOTIMPL;
    }
    if (ra != NULL && rb != NULL && V(a)->kind != VK_CONST && V(b)->kind != VK_CONST &&
        V(a)->kind != VK_OBJECT && V(b)->kind != VK_OBJECT) {
        if (cdyn_v_pin_identity(tx, a) != TR_OK || cdyn_v_pin_identity(tx, b) != TR_OK) {
            return TR_ERROR;
        }
        *out = cdyn_value_bool((op == Py_EQ) == (ra == rb));
        return *out ? TR_OK : TR_ERROR;
    }
    if (cdyn_v_is_none(a) || cdyn_v_is_none(b)) {
        *out = cdyn_value_bool(op == Py_NE);
        return *out ? TR_OK : TR_ERROR;
    }
    ga = eq_group(cdyn_v_python_type(a));
    gb = eq_group(cdyn_v_python_type(b));
    if ((ga != 0 && gb != 0 && ga != gb) || (gb != 0 && plain_class(ra)) ||
        (ga != 0 && plain_class(rb))) {
        *out = cdyn_value_bool(op == Py_NE);
        return *out ? TR_OK : TR_ERROR;
    }
    return TR_NOTIMPL;
}

tr_status
cdyn_v_compare(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    tr_status st = TR_NOTIMPL;
    if (op < Py_LT || op > Py_GE) {
        return cdyn_tx_unsupported(tx, "COMPARE_OP %d", op);
    }
    if (V(a)->vt->compare != NULL) {
        st = V(a)->vt->compare(tx, op, a, b, out);
    }
    if (st == TR_NOTIMPL && V(b)->vt != V(a)->vt && V(b)->vt->compare != NULL) {
        st = V(b)->vt->compare(tx, op, a, b, out);
    }
    if (st == TR_NOTIMPL) {
        st = compare_identity(tx, op, a, b, out);
    }
    if (st == TR_NOTIMPL) {
        st = cdyn_tx_unsupported(tx, "COMPARE_OP on %S and %S", a, b);
    }
    if (st == TR_UNSUPPORTED) {
        PyObject *ab[2] = {a, b};
        st = raise_as_real(tx, st, cdyn_G.cmp_fns[op], NULL, ab, 2, NULL);
    }
    return st;
}

tr_status
cdyn_v_unary(cdyn_tx *tx, int opcode, PyObject *v, PyObject **out)
{
    if (V(v)->vt->unary == NULL) {
        return missing(tx, "unary operator", v);
    }
    return V(v)->vt->unary(tx, opcode, v, out);
}

static int
is_container_kind(cdyn_vkind k)
{
    return k == VK_LIST || k == VK_DICT || k == VK_TUPLE || k == VK_SET;
}

tr_status
cdyn_v_is(cdyn_tx *tx, PyObject *a, PyObject *b, int *out)
{
    cdyn_value *va = V(a), *vb = V(b);
    PyObject *ra = cdyn_v_real(a), *rb = cdyn_v_real(b);
    if (a == b) {
        *out = 1;
        return TR_OK;
    }
    if (va->vt == &cdyn_user_vt || vb->vt == &cdyn_user_vt) {
        tr_status st = cdyn_user_is(tx, a, b, out);   /* objects, classes, slot functions */
        if (st != TR_NOTIMPL) {
            return st;
        }
    }
    if (va->kind == VK_CONST && vb->kind == VK_CONST) {
        *out = ra == rb;
        return TR_OK;
    }
    if (va->kind == VK_TENSOR && vb->kind == VK_TENSOR) {
        *out = va->u.tensor.node == vb->u.tensor.node;
        return TR_OK;
    }
    if (va->kind == VK_EXC && vb->kind == VK_EXC && va->u.exc.type != vb->u.exc.type) {
        *out = 0;   /* exceptions of two types are two objects */
        return TR_OK;
    }
    if (is_container_kind(va->kind) && is_container_kind(vb->kind)) {
        if (va->source != NULL || vb->source != NULL) {
            return cdyn_tx_unsupported(tx, "identity of input containers");
        }
        *out = 0;   /* two containers made in the frame are distinct objects */
        return TR_OK;
    }
    /* A constant against a non-constant: only None/True/False are decidable, or a real
       object held by the other value (never a constant: constants are wrapped as such). */
    if ((va->kind == VK_CONST && (ra == Py_None || PyBool_Check(ra))) ||
        (vb->kind == VK_CONST && (rb == Py_None || PyBool_Check(rb)))) {
        *out = 0;
        return TR_OK;
    }
    if ((va->kind == VK_CONST) != (vb->kind == VK_CONST) && ra != NULL && rb != NULL) {
        *out = ra == rb;
        return TR_OK;
    }
    /* a symbolic number against a container (or a tensor): objects of two types */
    if ((va->kind == VK_SYMINT && (is_container_kind(vb->kind) || vb->kind == VK_TENSOR)) ||
        (vb->kind == VK_SYMINT && (is_container_kind(va->kind) || va->kind == VK_TENSOR))) {
        *out = 0;
        return TR_OK;
    }
    /* a tensor is never a value of another family (tensors are always wrapped as such) */
    if ((va->kind == VK_TENSOR) != (vb->kind == VK_TENSOR) && va->kind != VK_NULL &&
        vb->kind != VK_NULL) {
        *out = 0;
        return TR_OK;
    }
    if (ra != NULL && rb != NULL && va->kind != VK_CONST && vb->kind != VK_CONST &&
        va->kind != VK_OBJECT && vb->kind != VK_OBJECT) {
        if (cdyn_v_pin_identity(tx, a) != TR_OK || cdyn_v_pin_identity(tx, b) != TR_OK) {
            return TR_ERROR;
        }
        *out = ra == rb;   /* identities fixed by ID/FUNCTION_MATCH guards */
        return TR_OK;
    }
    return cdyn_tx_unsupported(tx, "IS_OP on undecidable values %S and %S", a, b);
}

tr_status
cdyn_v_len(cdyn_tx *tx, PyObject *v, Py_ssize_t *out)
{
    tr_status st = cdyn_tx_materialize(tx, v);
    if (st != TR_OK) {
        return st;
    }
    if (V(v)->vt->len == NULL) {
        return missing(tx, "len()", v);
    }
    return V(v)->vt->len(tx, v, out);
}

int
cdyn_v_is_iterator(PyObject *v)
{
    const cdyn_vtable *vt = V(v)->vt;
    return vt->next != NULL && (vt->is_iterator == NULL || vt->is_iterator(v));
}

tr_status
cdyn_v_next(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    if (!cdyn_v_is_iterator(v)) {
        return missing(tx, "next()", v);
    }
    return V(v)->vt->next(tx, v, out);
}

tr_status
cdyn_v_enter(cdyn_tx *tx, PyObject *v, PyObject **exit_fn, PyObject **result)
{
    if (V(v)->vt->enter == NULL) {
        return cdyn_tx_unsupported(tx, "with-block over %S (an unsupported context manager)", v);
    }
    return V(v)->vt->enter(tx, v, exit_fn, result);
}

tr_status
cdyn_v_graph_arg(cdyn_tx *tx, PyObject *v, PyObject **fake, PyObject **node)
{
    tr_status st = cdyn_tx_materialize(tx, v);
    *fake = *node = NULL;
    if (st != TR_OK) {
        return st;
    }
    if (V(v)->vt->graph_arg == NULL) {
        return cdyn_tx_unsupported(tx, "%S as an argument to a torch operation", v);
    }
    return V(v)->vt->graph_arg(tx, v, fake, node);
}

PyTypeObject *
cdyn_v_python_type(PyObject *v)
{
    if (V(v)->vt->python_type == NULL) {
        return NULL;
    }
    return V(v)->vt->python_type(v);
}

tr_status
cdyn_v_pin_identity(cdyn_tx *tx, PyObject *v)
{
    unsigned bit = V(v)->kind == VK_USERFN ? FUNC_CODE_GUARDED
                   : V(v)->kind == VK_NNMODULE ? MOD_BY_TYPE : 0;
    if (bit == 0 || !(V(v)->bits & bit) || V(v)->source == NULL) {
        return TR_OK;
    }
    if (cdyn_guards_add_id(tx->guards, V(v)->source, V(v)->u.obj.obj,
                           V(v)->kind == VK_USERFN) < 0) {
        return TR_ERROR;
    }
    V(v)->bits &= ~bit;
    return TR_OK;
}

PyObject *
cdyn_v_as_constant(PyObject *v)
{
    PyObject *r;
    if (V(v)->kind == VK_CONST) {
        return Py_NewRef(V(v)->u.cnst.value);
    }
    if (V(v)->vt->as_constant == NULL) {
        return NULL;
    }
    r = V(v)->vt->as_constant(v);
    if (r == NULL) {
        PyErr_Clear();
    }
    return r;
}

PyObject *
cdyn_v_real_arg(PyObject *v)
{
    PyObject *r = cdyn_v_real(v), *items;
    int is_tuple = V(v)->kind == VK_TUPLE;
    if (r != NULL) {
        return Py_NewRef(r);
    }
    if ((!is_tuple && V(v)->kind != VK_LIST) || (is_tuple && V(v)->u.seq.nt_type != NULL) ||
        V(v)->u.seq.items == NULL) {
        return cdyn_v_as_constant(v);   /* (a lazy tuple of the frame: only constants) */
    }
    items = V(v)->u.seq.items;
    r = is_tuple ? PyTuple_New(PyList_GET_SIZE(items)) : PyList_New(PyList_GET_SIZE(items));
    for (Py_ssize_t i = 0; r != NULL && i < PyList_GET_SIZE(items); i++) {
        PyObject *item = cdyn_v_real_arg(PyList_GET_ITEM(items, i));
        if (item == NULL) {
            Py_CLEAR(r);
            break;
        }
        if (is_tuple) {
            PyTuple_SET_ITEM(r, i, item);
        }
        else {
            PyList_SET_ITEM(r, i, item);
        }
    }
    return r;
}

int
cdyn_value_init(PyObject *module)
{
    (void)module;
    if (PyType_Ready(&cdyn_ValueType) < 0) {
        return -1;
    }
    if (null_value == NULL) {
        null_value = cdyn_value_alloc(VK_NULL, NULL);
        if (null_value == NULL) {
            return -1;
        }
        cdyn_live.values--;   /* the shared NULL lives for the process: not counted */
    }
    return 0;
}
