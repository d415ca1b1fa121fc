/* values/constant.c: Python constants (int, float, bool, str, None, bytes, complex, slice,
 * range, tuples and frozensets of constants, torch.Size/dtype/device, code objects).
 * Operations on constants are folded at trace time (a3 = a0 + a1 + a2 becomes 3). */
#include "../tx.h"
#include "../codegen.h"

#define MAX_CONST_ITER 100000

static PyObject *
cobj(PyObject *v)
{
    return V(v)->u.cnst.value;
}

/* 1 when a constant prints as valid Python in FX code (and can be an FX argument). */
static int
fx_printable(PyObject *obj)
{
    PyTypeObject *t = Py_TYPE(obj);
    if (obj == Py_None || obj == Py_Ellipsis || PyBool_Check(obj) || PyLong_CheckExact(obj) ||
        PyFloat_CheckExact(obj) || PyUnicode_CheckExact(obj) || PyComplex_CheckExact(obj)) {
        return 1;
    }
    if (t == (PyTypeObject *)cdyn_G.torch_dtype_type ||
        t == (PyTypeObject *)cdyn_G.torch_device_type ||
        t == (PyTypeObject *)cdyn_G.torch_size_type) {
        return 1;
    }
    if (PySlice_Check(obj)) {
        PySliceObject *s = (PySliceObject *)obj;
        return fx_printable(s->start) && fx_printable(s->stop) && fx_printable(s->step);
    }
    if (PyRange_Check(obj)) {
        return 1;   /* printed as range(a, b[, c]), a builtin name */
    }
    if (PyTuple_CheckExact(obj)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj); i++) {
            if (!fx_printable(PyTuple_GET_ITEM(obj, i))) {
                return 0;
            }
        }
        return 1;
    }
    /* torch.layout, torch.memory_format: printed by FX as torch.<name> */
    {
        const char *tn = t->tp_name;
        return strcmp(tn, "torch.layout") == 0 || strcmp(tn, "torch.memory_format") == 0;
    }
}

static tr_status
const_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *attr;
    if (cdyn_container_dunder(Py_TYPE(cobj(v)), name)) {
        /* range(n).__iter__(), (1, 2).__len__() called directly: methods called by name,
           as iter(r), len(r), x in r, r[i] (a method-wrapper is not always folded, and an
           iterator is no constant) */
        *out = cdyn_value_method(NULL, name, v);
        return *out ? TR_OK : TR_ERROR;
    }
    attr = PyObject_GetAttr(cobj(v), name);
    if (attr == NULL) {
        return cdyn_tx_unsupported(tx, "constant attribute %U", name);
    }
    if (cdyn_is_constant(attr)) {
        *out = cdyn_value_const_steal(attr);
    }
    else if (PyCallable_Check(attr)) {
        /* a method of the constant ("a,b".split, x.shape.numel): folded when called */
        *out = cdyn_value_obj(VK_BUILTIN, attr, NULL);
        Py_DECREF(attr);
    }
    else {
        Py_DECREF(attr);
        return cdyn_tx_unsupported(tx, "constant attribute %U is not a constant", name);
    }
    return *out ? TR_OK : TR_ERROR;
}

static tr_status
const_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    int r = PyObject_IsTrue(cobj(v));
    if (r < 0) {
        return cdyn_tx_unsupported(tx, "truth value failed");
    }
    *out = r;
    return TR_OK;
}

static tr_status
const_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    PyObject *obj = cobj(v), *seq = NULL, *l = NULL;
    if (!(PyTuple_Check(obj) || PyList_Check(obj) || PyRange_Check(obj) || PyUnicode_Check(obj) ||
          PyFrozenSet_Check(obj) || PyBytes_Check(obj))) {
        if (Py_TYPE(obj)->tp_iter == NULL && !PySequence_Check(obj)) {
            /* not iterable (an int, None): the TypeError eager raises, in the traced code */
            return cdyn_tx_raise_text(tx, PyExc_TypeError, "'%s' object is not iterable",
                                      Py_TYPE(obj)->tp_name);
        }
        return cdyn_tx_unsupported(tx, "iteration over a %s", Py_TYPE(obj)->tp_name);
    }
    if (PyObject_Length(obj) > MAX_CONST_ITER) {
        PyErr_Clear();
        return cdyn_tx_unsupported(tx, "iteration over more than %d constants", MAX_CONST_ITER);
    }
    seq = PySequence_List(obj);
    if (seq == NULL) {
        return TR_ERROR;
    }
    l = PyList_New(PyList_GET_SIZE(seq));
    for (Py_ssize_t i = 0; l && i < PyList_GET_SIZE(seq); i++) {
        PyObject *c = cdyn_value_const(PyList_GET_ITEM(seq, i));
        if (c == NULL) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, i, c);
    }
    Py_DECREF(seq);
    *out_list = l;
    return l ? TR_OK : TR_ERROR;
}

static tr_status
const_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out)
{
    PyObject *r, *k = NULL;
    tr_status st;
    if (V(key)->kind == VK_SYMINT || V(key)->kind == VK_SYMSLICE) {
        /* "abcdef"[:n % 4]: on the sizes' values, guarded (as torch._dynamo) */
        if ((st = cdyn_sym_specialize(tx, key, &k)) != TR_OK) {
            return st;
        }
        st = const_subscr(tx, v, k, out);
        Py_DECREF(k);
        return st;
    }
    if (V(key)->kind != VK_CONST) {
        k = cdyn_tensor_constant_index(key);   /* (1, 2)[torch.tensor(1)] */
        if (k == NULL) {
            return PyErr_Occurred() ? TR_ERROR
                                    : cdyn_tx_unsupported(tx, "subscript of a constant with %S",
                                                          key);
        }
        st = const_subscr(tx, v, k, out);
        Py_DECREF(k);
        return st;
    }
    r = PyObject_GetItem(cobj(v), cobj(key));
    if (r == NULL) {
        return cdyn_tx_unsupported(tx, "constant subscript failed");
    }
    *out = cdyn_value_const_steal(r);
    return *out ? TR_OK : TR_ERROR;
}

/* `item in tup` for a constant tuple and an item that is not a constant (a list, a user
 * object): `elem == item` for each element in order, as tuple.__contains__, each
 * comparison a constant bool (a tensor item is a break). */
static tr_status
tuple_contains_value(cdyn_tx *tx, PyObject *tup, PyObject *item, int *out)
{
    PyTypeObject *it = cdyn_v_python_type(item);
    tr_status st = TR_OK;
    if (it == NULL || PyType_IsSubtype(it, (PyTypeObject *)cdyn_G.torch_tensor_type)) {
        return cdyn_tx_unsupported(tx, "'in' of %S in a constant", item);
    }
    *out = 0;
    for (Py_ssize_t i = 0; st == TR_OK && !*out && i < PyTuple_GET_SIZE(tup); i++) {
        PyObject *ev = cdyn_value_const(PyTuple_GET_ITEM(tup, i)), *r = NULL;
        st = ev ? cdyn_v_compare(tx, Py_EQ, ev, item, &r) : TR_ERROR;
        if (st == TR_OK && (V(r)->kind != VK_CONST || !PyBool_Check(V(r)->u.cnst.value))) {
            st = cdyn_tx_unsupported(tx, "'in' of %S in a constant: == gave %S", item, r);
        }
        if (st == TR_OK) {
            *out = V(r)->u.cnst.value == Py_True;
        }
        Py_XDECREF(r);
        Py_XDECREF(ev);
    }
    return st;
}

static tr_status
const_contains(cdyn_tx *tx, PyObject *v, PyObject *item, int *out)
{
    int r;
    if (V(item)->kind != VK_CONST && PyTuple_CheckExact(cobj(v))) {
        return tuple_contains_value(tx, cobj(v), item, out);
    }
    if (V(item)->kind != VK_CONST) {
        return cdyn_tx_unsupported(tx, "'in' of %S in a constant", item);
    }
    r = PySequence_Contains(cobj(v), cobj(item));
    if (r < 0) {
        return cdyn_tx_unsupported(tx, "constant 'in' failed");
    }
    *out = r;
    return TR_OK;
}

static tr_status
const_binop(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    PyObject *res, *c;
    if (V(a)->kind == VK_CONST && (op == NB_REMAINDER || op == NB_INPLACE_REMAINDER) &&
        (PyUnicode_Check(cobj(a)) || PyBytes_Check(cobj(a))) && V(b)->kind != VK_CONST) {
        /* "%s_%d" % (a, b) with a tuple (or dict) of constants: formatted now */
        c = cdyn_v_as_constant(b);
        if (c == NULL) {
            return PyErr_Occurred() ? TR_ERROR : TR_NOTIMPL;
        }
        res = PyNumber_Remainder(cobj(a), c);
        Py_DECREF(c);
        if (res == NULL) {
            return cdyn_tx_unsupported(tx, "%%-formatting failed");
        }
        *out = cdyn_value_const_steal(res);
        return *out ? TR_OK : TR_ERROR;
    }
    if (V(a)->kind != VK_CONST || V(b)->kind != VK_CONST) {
        return TR_NOTIMPL;
    }
    res = PyObject_CallFunctionObjArgs(cdyn_G.binop_fns[op], cobj(a), cobj(b), NULL);
    if (res == NULL) {
        return cdyn_tx_unsupported(tx, "constant binary op failed");
    }
    *out = cdyn_value_const_steal(res);
    return *out ? TR_OK : TR_ERROR;
}

static tr_status
const_compare(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    PyObject *res;
    if (V(a)->kind != VK_CONST || V(b)->kind != VK_CONST) {
        return TR_NOTIMPL;
    }
    res = PyObject_RichCompare(cobj(a), cobj(b), op);
    if (res == NULL) {
        return cdyn_tx_unsupported(tx, "constant comparison failed");
    }
    *out = cdyn_value_const_steal(res);
    return *out ? TR_OK : TR_ERROR;
}

static tr_status
const_unary(cdyn_tx *tx, int opcode, PyObject *v, PyObject **out)
{
    PyObject *fn = opcode == UNARY_NEGATIVE ? cdyn_G.neg
                   : opcode == UNARY_POSITIVE ? cdyn_G.pos : cdyn_G.invert;
    PyObject *res = PyObject_CallOneArg(fn, cobj(v));
    if (res == NULL) {
        return cdyn_tx_unsupported(tx, "constant unary op failed");
    }
    *out = cdyn_value_const_steal(res);
    return *out ? TR_OK : TR_ERROR;
}

static tr_status
const_len(cdyn_tx *tx, PyObject *v, Py_ssize_t *out)
{
    Py_ssize_t n = PyObject_Length(cobj(v));
    if (n < 0) {
        return cdyn_tx_unsupported(tx, "len() of %S", v);
    }
    *out = n;
    return TR_OK;
}

/* obj with each int / float subclass instance (an IntEnum member) made the plain number it
 * stands for, through slices and tuples, as torch takes it: a new reference; NULL with an
 * exception on error. */
static PyObject *
plain_numbers(PyObject *obj)
{
    if (PyLong_Check(obj) && !PyLong_CheckExact(obj) && !PyBool_Check(obj)) {
        return PyNumber_Long(obj);
    }
    if (PyFloat_Check(obj) && !PyFloat_CheckExact(obj)) {
        return PyFloat_FromDouble(PyFloat_AS_DOUBLE(obj));
    }
    if (PySlice_Check(obj)) {
        PySliceObject *sl = (PySliceObject *)obj;
        PyObject *a = plain_numbers(sl->start), *b = a ? plain_numbers(sl->stop) : NULL;
        PyObject *c = b ? plain_numbers(sl->step) : NULL, *r = c ? PySlice_New(a, b, c) : NULL;
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_XDECREF(c);
        return r;
    }
    if (PyTuple_CheckExact(obj)) {
        PyObject *t = PyTuple_New(PyTuple_GET_SIZE(obj));
        for (Py_ssize_t i = 0; t != NULL && i < PyTuple_GET_SIZE(obj); i++) {
            PyObject *x = plain_numbers(PyTuple_GET_ITEM(obj, i));
            if (x == NULL) {
                Py_CLEAR(t);
                break;
            }
            PyTuple_SET_ITEM(t, i, x);
        }
        return t;
    }
    return Py_NewRef(obj);
}

static tr_status
const_graph_arg(cdyn_tx *tx, PyObject *v, PyObject **fake, PyObject **node)
{
    PyObject *plain;
    if (cdyn_is_numpy_scalar(cobj(v))) {
        /* torch takes a numpy scalar as the Python number it holds (which prints in FX) */
        *fake = PyObject_CallMethod(cobj(v), "item", NULL);
        *node = Py_XNewRef(*fake);
        return *fake ? TR_OK : TR_ERROR;
    }
    if (fx_printable(cobj(v))) {
        *fake = Py_NewRef(cobj(v));
        *node = Py_NewRef(cobj(v));
        return TR_OK;
    }
    plain = plain_numbers(cobj(v));   /* x[Index.X:2] with an IntEnum member */
    if (plain == NULL) {
        return TR_ERROR;
    }
    if (!fx_printable(plain)) {
        Py_DECREF(plain);
        return cdyn_tx_unsupported(tx, "constant %R cannot be an argument in the graph",
                                   cobj(v));
    }
    *fake = plain;
    *node = Py_NewRef(plain);
    return TR_OK;
}

static PyTypeObject *
const_python_type(PyObject *v)
{
    return Py_TYPE(cobj(v));
}

static int
const_reconstruct(cdyn_cg *cg, PyObject *v)
{
    return cdyn_cg_load_const(cg, cobj(v));
}

const cdyn_vtable cdyn_const_vt = {
    .name = "ConstantVariable",
    .getattr = const_getattr,
    .truth = const_truth,
    .unpack = const_unpack,
    .subscr = const_subscr,
    .contains = const_contains,
    .binop = const_binop,
    .compare = const_compare,
    .unary = const_unary,
    .len = const_len,
    .graph_arg = const_graph_arg,
    .python_type = const_python_type,
    .collect = cdyn_collect_nothing,
    .reconstruct = const_reconstruct,
};
