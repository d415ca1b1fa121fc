/* values/newobj.c: objects made while tracing (NEWOBJ) and the builtin slot functions of
 * object, dict and tuple (OBJFN).
 *
 * cls(*args, **kwargs) on a user class inlines type.__call__: __new__ (a Python __new__
 * inlined; object.__new__ / dict.__new__ / list.__new__ / set.__new__ make an empty NEWOBJ,
 * frozenset.__new__ / tuple.__new__ one holding its items) and then, when the result is an instance of
 * cls, __init__ (inlined; object.__init__ and the builtin bases' __init__ done here). A
 * NEWOBJ holds its class value, its attributes (name -> value) and, for a subclass of
 * dict, list, set or frozenset, a DICT / LIST / SET / FROZENSET value with its items (the
 * "base": the builtin methods and slots it does not override act on it). Nothing exists
 * at run time until the object outlives the trace (returned, stored into an object or
 * container of the frame, live at a graph break): then the transformed code rebuilds it,
 * once, as
 *     obj = object.__new__(cls)             (dict/list/set.__new__(cls) for those bases,
 *                                            frozenset/tuple.__new__(cls, items))
 *     object.__setattr__(obj, "__dict__", {name: value, ...})   (slots: one by one)
 *     dict.update(obj, {key: value, ...})   the items of a dict subclass (an OrderedDict
 *                                           subclass through OrderedDict.__setitem__);
 *                                           list.extend / set.update for those bases
 * so no user code (__init__, __setattr__, a frozen dataclass's guard) runs again. The
 * class is guarded where it was read (ID_MATCH); the object itself needs no guard.
 *
 * Classes that are not modelled (their construction is unsupported, a graph break): torch
 * classes other than torch.nn's modules (nn.Modules: values/newmodule.c) and
 * torch.distributions' plain-Python distributions and constraints, exceptions,
 * extension types, abstract classes, classes with
 * __del__, a metaclass whose __call__ is not Python, and subclasses of builtins other than
 * dict/OrderedDict, list, set, frozenset and tuple (named tuples are dataclass.c's; a plain
 * tuple subclass's tuple.__new__(cls, items) comes here through cdyn_newobj_tuple_new). A
 * metaclass's Python __call__ is inlined with the class as self; its super().__call__ is
 * type.__call__, the construction itself. */
#include "user.h"
#include "../codegen.h"

/* The first builtin (non-heap) type among t and its bases: object, dict, ... */
static PyTypeObject *
solid_base(PyTypeObject *t)
{
    while (t != NULL && (t->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        t = t->tp_base;
    }
    return t;
}

/* 1 when b is dict or OrderedDict. */
static int
is_dict_base(PyTypeObject *b)
{
    return b == &PyDict_Type || b == (PyTypeObject *)cdyn_U.odict_type;
}

/* The kind of value holding the items of instances whose first builtin type is b: DICT,
 * LIST, SET, FROZENSET, TUPLE, or VK_NULL (object: none). */
static cdyn_vkind
base_kind(PyTypeObject *b)
{
    return is_dict_base(b) ? VK_DICT
           : b == &PyList_Type ? VK_LIST
           : b == &PySet_Type ? VK_SET
           : b == &PyFrozenSet_Type ? VK_FROZENSET
           : b == &PyTuple_Type ? VK_TUPLE : VK_NULL;
}

/* TR_OK when instances of cls can be made and tracked in the trace. */
static tr_status
check_class(cdyn_tx *tx, PyTypeObject *cls)
{
    PyTypeObject *base = solid_base(cls);
    const char *why = NULL;
    if (!(cls->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        why = "a builtin or extension class";
    }
    else if (cls->tp_flags & Py_TPFLAGS_IS_ABSTRACT) {
        why = "an abstract class";
    }
    else if (PyType_IsSubtype(cls, (PyTypeObject *)PyExc_BaseException)) {
        why = "an exception class";
    }
    else if (PyType_IsSubtype(cls, (PyTypeObject *)cdyn_G.nn_module_type)
                 ? !cdyn_newmod_class_ok(cls)
                 : (PyType_IsSubtype(cls, (PyTypeObject *)cdyn_G.torch_tensor_type) ||
                    (cdyn_module_startswith((PyObject *)cls, "torch") &&
                     !cdyn_module_startswith((PyObject *)cls, "torch.distributions") &&
                     !cdyn_module_startswith((PyObject *)cls, "torch.utils._pytree") &&
                     !cdyn_module_startswith((PyObject *)cls, "torch.utils._ordered_set") &&
                     !(cdyn_module_startswith((PyObject *)cls, "torch.optim") &&
                       cls->tp_name[0] == '_')))) {
        /* (torch.optim's private helpers, e.g. the LR scheduler's _enable_get_lr_call
           context manager, are plain Python objects: traced) */
        why = "a torch class";   /* nn.Modules: values/newmodule.c */
    }
    else if (_PyType_Lookup(cls, cdyn_U.s_del) != NULL) {
        why = "a class with __del__";
    }
    else if (base != &PyBaseObject_Type && base_kind(base) == VK_NULL) {
        why = "a subclass of a builtin other than dict, list, set, frozenset, tuple";
    }
    if (why != NULL) {
        return cdyn_tx_unsupported(tx, "construction of %s (%s)", cls->tp_name, why);
    }
    return TR_OK;
}

/* A new empty DICT value; NULL on error. */
static PyObject *
empty_dict(void)
{
    PyObject *keys = PyList_New(0), *vals = PyList_New(0), *d = NULL;
    if (keys != NULL && vals != NULL) {
        d = cdyn_value_dict(keys, vals);
    }
    Py_XDECREF(keys);
    Py_XDECREF(vals);
    return d;
}

/* A new empty value of kind k (DICT, LIST, SET, FROZENSET, TUPLE); NULL on error. */
static PyObject *
empty_base(cdyn_tx *tx, cdyn_vkind k)
{
    PyObject *items, *r = NULL;
    if (k == VK_DICT) {
        return empty_dict();
    }
    if ((items = PyList_New(0)) == NULL) {
        return NULL;
    }
    if (k == VK_LIST || k == VK_TUPLE) {
        r = cdyn_value_seq_list(k, items);
    }
    else if (cdyn_set_build(tx, k, items, &r) != TR_OK) {
        Py_CLEAR(r);
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_RuntimeError, "cdynamo: an empty set value");
        }
    }
    Py_DECREF(items);
    return r;
}

tr_status
cdyn_newobj_alloc(cdyn_tx *tx, PyObject *clsv, PyObject **out)
{
    PyObject *cls = cdyn_v_real(clsv), *v = NULL;
    cdyn_vkind bk;
    tr_status st;
    if (V(clsv)->kind != VK_CLASS || cls == NULL || !PyType_Check(cls)) {
        return cdyn_tx_unsupported(tx, "__new__ of %S", clsv);
    }
    st = check_class(tx, (PyTypeObject *)cls);
    if (st != TR_OK) {
        return st;
    }
    v = cdyn_value_alloc(VK_NEWOBJ, NULL);
    if (v == NULL || (V(v)->u.uobj.attrs = empty_dict()) == NULL) {
        Py_XDECREF(v);
        return TR_ERROR;
    }
    V(v)->u.uobj.cls = Py_NewRef(clsv);
    bk = base_kind(solid_base((PyTypeObject *)cls));
    if (bk != VK_NULL && (V(v)->u.uobj.base = empty_base(tx, bk)) == NULL) {
        Py_DECREF(v);
        return TR_ERROR;
    }
    *out = v;
    return TR_OK;
}

/* ---- attributes: the DICT value u.uobj.attrs (name -> value) ------------------------------------ */

/* Index of attribute name in the attrs DICT, or -1. */
static Py_ssize_t
attr_index(PyObject *v, PyObject *name)
{
    PyObject *keys = V(V(v)->u.uobj.attrs)->u.dict.keys;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
        PyObject *k = PyList_GET_ITEM(keys, i);
        if (k == name || (PyUnicode_Check(k) && PyUnicode_Compare(k, name) == 0)) {
            return i;
        }
    }
    return -1;
}

PyObject *
cdyn_newobj_attr(PyObject *v, PyObject *name)
{
    Py_ssize_t i = attr_index(v, name);
    return i < 0 ? NULL : PyList_GET_ITEM(V(V(v)->u.uobj.attrs)->u.dict.vals, i);
}

/* 1 when instances of heap type t keep some attribute in a slot (__slots__ member). */
static int
type_has_slots(PyTypeObject *t)
{
    PyObject *mro = t->tp_mro, *k, *d;
    Py_ssize_t pos;
    for (Py_ssize_t i = 0; mro != NULL && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *b = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        pos = 0;
        while ((b->tp_flags & Py_TPFLAGS_HEAPTYPE) && PyDict_Next(cdyn_type_dict(b), &pos, &k, &d)) {
            if (Py_TYPE(d) == &PyMemberDescr_Type) {
                return 1;
            }
        }
    }
    return 0;
}

tr_status
cdyn_newobj_dict(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    PyTypeObject *t = cdyn_user_type(v);
    if (t->tp_dictoffset == 0 || type_has_slots(t)) {
        return cdyn_tx_unsupported(tx, "__dict__ of %s made while tracing (slots)", t->tp_name);
    }
    *out = Py_NewRef(V(v)->u.uobj.attrs);   /* the live attributes */
    return TR_OK;
}

tr_status
cdyn_newobj_store(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    PyObject *d = V(v)->u.uobj.attrs;
    Py_ssize_t i = attr_index(v, name);
    cdyn_tx_mutated(tx, d);
    if (i >= 0) {
        return PyList_SetItem(V(d)->u.dict.vals, i, Py_NewRef(value)) < 0 ? TR_ERROR : TR_OK;
    }
    if (PyList_Append(V(d)->u.dict.keys, name) < 0) {
        return TR_ERROR;
    }
    if (PyList_Append(V(d)->u.dict.vals, value) < 0) {
        PyList_SetSlice(V(d)->u.dict.keys, PyList_GET_SIZE(V(d)->u.dict.keys) - 1,
                        PY_SSIZE_T_MAX, NULL);
        return TR_ERROR;
    }
    return TR_OK;
}

tr_status
cdyn_newobj_delete(cdyn_tx *tx, PyObject *v, PyObject *name)
{
    PyObject *d = V(v)->u.uobj.attrs;
    Py_ssize_t i = attr_index(v, name);
    if (i < 0) {
        return cdyn_tx_unsupported(tx, "del of a missing attribute %U", name);
    }
    cdyn_tx_mutated(tx, d);
    if (PyList_SetSlice(V(d)->u.dict.keys, i, i + 1, NULL) < 0 ||
        PyList_SetSlice(V(d)->u.dict.vals, i, i + 1, NULL) < 0) {
        return TR_ERROR;
    }
    return TR_OK;
}

/* ---- construction ------------------------------------------------------------------------------ */

/* dict.__init__(self, [mapping or iterable of pairs], **kwargs) on the DICT value base. */
static tr_status
dict_init(cdyn_tx *tx, PyObject *base, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    PyObject *items = NULL;
    tr_status st = TR_OK;
    if (npos > 1) {
        return cdyn_tx_unsupported(tx, "dict.__init__ with %zd positional arguments", npos);
    }
    if (npos == 1) {
        PyObject *src = args[0], *view = NULL;
        /* a mapping's items, or the pairs of an iterable */
        if (cdyn_v_python_type(src) == &PyDict_Type) {
            PyObject *name = PyUnicode_FromString("items");
            st = name ? cdyn_v_call_method(tx, NULL, src, name, NULL, 0, NULL, &view) : TR_ERROR;
            Py_XDECREF(name);
            src = view;
        }
        if (st == TR_OK) {
            st = cdyn_v_unpack(tx, src, &items);
        }
        Py_XDECREF(view);
        for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(items); i++) {
            PyObject *pair = NULL;
            st = cdyn_v_unpack(tx, PyList_GET_ITEM(items, i), &pair);
            if (st == TR_OK && PyList_GET_SIZE(pair) != 2) {
                st = cdyn_tx_unsupported(tx, "dict.__init__ item that is not a pair");
            }
            if (st == TR_OK) {
                st = cdyn_v_store_subscr(tx, base, PyList_GET_ITEM(pair, 0),
                                         PyList_GET_ITEM(pair, 1));
            }
            Py_XDECREF(pair);
        }
        Py_XDECREF(items);
    }
    for (Py_ssize_t k = 0; st == TR_OK && k < nkw; k++) {
        PyObject *kv = cdyn_value_const(PyTuple_GET_ITEM(kwnames, k));
        st = kv ? cdyn_v_store_subscr(tx, base, kv, args[npos + k]) : TR_ERROR;
        Py_XDECREF(kv);
    }
    return st;
}

/* The builtin base's __init__ on the value holding the items (dict.__init__, list.__init__:
 * clear then extend, set.__init__: clear then update; frozenset's is object's: its items
 * came with __new__). */
static tr_status
base_init(cdyn_tx *tx, PyObject *base, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames)
{
    cdyn_vkind k = V(base)->kind;
    PyObject *name, *r = NULL;
    tr_status st;
    if (k == VK_DICT) {
        return dict_init(tx, base, args, nargs, kwnames);
    }
    if (k == VK_FROZENSET || k == VK_TUPLE) {
        return TR_OK;   /* object.__init__: the items came with __new__ */
    }
    if (kwnames != NULL || nargs > 1) {
        return cdyn_tx_unsupported(tx, "%s.__init__ with these arguments",
                                   k == VK_LIST ? "list" : "set");
    }
    name = PyUnicode_FromString("clear");
    st = name ? cdyn_v_call_method(tx, NULL, base, name, NULL, 0, NULL, &r) : TR_ERROR;
    Py_XDECREF(name);
    Py_CLEAR(r);
    if (st == TR_OK && nargs == 1) {
        name = PyUnicode_FromString(k == VK_LIST ? "extend" : "update");
        st = name ? cdyn_v_call_method(tx, NULL, base, name, args, 1, NULL, &r) : TR_ERROR;
        Py_XDECREF(name);
        Py_XDECREF(r);
    }
    return st;
}

/* Run type(obj).__init__(obj, *args, **kwargs) after __new__ (newfn: the __new__ used). */
static tr_status
run_init(cdyn_tx *tx, PyObject *obj, PyObject *newfn, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames)
{
    PyTypeObject *t = cdyn_v_python_type(obj);
    PyObject *init = _PyType_Lookup(t, cdyn_U.s_init), *r = NULL;
    tr_status st;
    if (init != NULL && PyFunction_Check(init)) {
        st = cdyn_tx_inline_function(tx, init, NULL, obj, args, nargs, kwnames, &r);
        if (st == TR_OK && !cdyn_v_is_none(r)) {
            st = cdyn_tx_unsupported(tx, "__init__ returned %S", r);
        }
        Py_XDECREF(r);
        return st;
    }
    if (init == cdyn_U.object_init) {
        /* object.__init__ refuses arguments unless __new__ is overridden */
        if (nargs > 0 && newfn == cdyn_U.object_new) {
            return cdyn_tx_unsupported(tx, "%s() takes no arguments", t->tp_name);
        }
        return TR_OK;
    }
    if (init != NULL && V(obj)->kind == VK_NEWOBJ && V(obj)->u.uobj.base != NULL &&
        Py_TYPE(init) == &PyWrapperDescr_Type &&
        base_kind(((PyDescrObject *)init)->d_type) != VK_NULL) {
        return base_init(tx, V(obj)->u.uobj.base, args, nargs, kwnames);
    }
    return cdyn_tx_unsupported(tx, "__init__ of %s is not a Python function", t->tp_name);
}

/* frozenset.__new__(cls, [iterable]) / tuple.__new__(cls, [iterable]) (kind: FROZENSET /
 * TUPLE) for a subclass: a NEWOBJ holding the items. */
static tr_status
immutable_alloc(cdyn_tx *tx, cdyn_vkind kind, PyObject *clsv, PyObject *const *args,
                Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyObject *items = NULL, *l = NULL;
    tr_status st;
    if (kwnames != NULL || nargs > 1) {
        return cdyn_tx_unsupported(tx, "%s.__new__ with these arguments",
                                   kind == VK_TUPLE ? "tuple" : "frozenset");
    }
    if (kind == VK_FROZENSET) {
        st = cdyn_set_construct(tx, VK_FROZENSET, args, nargs, NULL, &items);
    }
    else {
        st = nargs == 1 ? cdyn_v_unpack(tx, args[0], &l)
                        : ((l = PyList_New(0)) ? TR_OK : TR_ERROR);
        items = st == TR_OK ? cdyn_value_seq_list(VK_TUPLE, l) : NULL;
        st = st == TR_OK && items == NULL ? TR_ERROR : st;
        Py_XDECREF(l);
    }
    if (st == TR_OK) {
        st = cdyn_newobj_alloc(tx, clsv, out);
    }
    if (st == TR_OK) {
        Py_SETREF(V(*out)->u.uobj.base, items);
        items = NULL;
    }
    Py_XDECREF(items);
    return st;
}

tr_status
cdyn_newobj_tuple_new(cdyn_tx *tx, PyObject *clsv, PyObject *const *args, Py_ssize_t nargs,
                      PyObject **out)
{
    tr_status st = check_class(tx, (PyTypeObject *)cdyn_v_real(clsv));
    return st == TR_OK ? immutable_alloc(tx, VK_TUPLE, clsv, args, nargs, NULL, out) : st;
}

/* cls(*args, **kw) as type.__call__ makes it: __new__, then __init__ when __new__ gave an
 * instance of cls. */
static tr_status
type_call(cdyn_tx *tx, PyObject *clsv, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames, PyObject **out);

tr_status
cdyn_newobj_construct(cdyn_tx *tx, cdyn_fs *fs, PyObject *clsv, PyObject *const *args,
                      Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyTypeObject *cls = (PyTypeObject *)cdyn_v_real(clsv);
    PyObject *call;
    if (Py_TYPE(cls)->tp_call == PyType_Type.tp_call) {
        return type_call(tx, clsv, args, nargs, kwnames, out);
    }
    /* a metaclass with its own __call__ (a singleton or registry metaclass): inlined with
       the class as self; its super().__call__(...) is type.__call__ (object_slot_call) */
    call = _PyType_Lookup(Py_TYPE(cls), cdyn_U.s_call);
    if (call == (PyObject *)&PyDict_Type) {
        /* a TypedDict class: typing's metaclass makes its __call__ dict itself, so
           Cls(**kw) is dict(**kw), a plain dict */
        PyObject *dv = NULL;
        tr_status st = cdyn_tx_wrap_real(tx, call, NULL, &dv);
        if (st == TR_OK) {
            st = cdyn_v_call(tx, fs, dv, args, nargs, kwnames, out);
            Py_DECREF(dv);
        }
        return st;
    }
    if (call == NULL || !PyFunction_Check(call)) {
        return cdyn_tx_unsupported(tx, "construction of %s (its metaclass's __call__ is not "
                                       "Python)", cls->tp_name);
    }
    return cdyn_tx_inline_function(tx, call, NULL, clsv, args, nargs, kwnames, out);
}

/* weakref.ref(obj) of an object the trace knows exactly (a module, a user object or a
   function read from the frame): the real weak reference, made now (CPython hands back the
   same one on each call without a callback), a fixed value whose call gives the referent
   (values/misc.c); obj's identity is pinned. A callback, a value the trace made (a tensor,
   a new object) or an object without weak references is a graph break (eager then runs the
   call, raising its TypeError where there is one). */
static tr_status
weakref_construct(cdyn_tx *tx, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                  PyObject **out)
{
    PyObject *real = nargs == 1 && kwnames == NULL && V(args[0])->kind != VK_CONST
                         ? cdyn_v_real(args[0]) : NULL;
    PyObject *ref = NULL;
    tr_status st;
    if (real == NULL) {
        return cdyn_tx_unsupported(tx, "weakref.ref of %S (a callback, or a value the trace "
                                       "made)", nargs ? args[0] : Py_None);
    }
    st = cdyn_v_pin_identity(tx, args[0]);
    if (st != TR_OK) {
        return st;
    }
    ref = PyWeakref_NewRef(real, NULL);
    if (ref == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) {
            return TR_ERROR;
        }
        PyErr_Clear();
        return cdyn_tx_unsupported(tx, "weakref.ref of %s (no weak references)",
                                   Py_TYPE(real)->tp_name);
    }
    st = cdyn_tx_wrap_fixed(tx, ref, Py_None, out);
    Py_DECREF(ref);
    return st;
}

/* A structseq class (torch.return_types.max, os.stat_result) called on one sequence of
 * exactly its visible fields: a tuple value typed as the class (rebuilt by calling it on
 * the items), as the call makes one. Other item counts are a graph break. */
static tr_status
structseq_new(cdyn_tx *tx, PyTypeObject *cls, PyObject *seq, PyObject **out)
{
    PyObject *items = NULL, *n = PyDict_GetItemString(cls->tp_dict, "n_sequence_fields");
    PyObject *nf = PyDict_GetItemString(cls->tp_dict, "n_fields");
    tr_status st = cdyn_v_unpack(tx, seq, &items);
    if (st != TR_OK) {
        return st;
    }
    if (n == NULL || nf == NULL || PyObject_RichCompareBool(n, nf, Py_EQ) != 1 ||
        PyLong_AsSsize_t(n) != PyList_GET_SIZE(items)) {
        PyErr_Clear();
        Py_DECREF(items);
        return cdyn_tx_unsupported(tx, "construction of %s from %zd items", cls->tp_name,
                                   PyList_GET_SIZE(items));
    }
    *out = cdyn_value_seq_list(VK_TUPLE, items);
    Py_DECREF(items);
    if (*out == NULL) {
        return TR_ERROR;
    }
    V(*out)->u.seq.nt_type = Py_NewRef((PyObject *)cls);
    return TR_OK;
}

static tr_status
type_call(cdyn_tx *tx, PyObject *clsv, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames, PyObject **out)
{
    PyTypeObject *cls = (PyTypeObject *)cdyn_v_real(clsv), *t;
    PyObject *newfn = _PyType_Lookup(cls, cdyn_U.s_new), *obj = NULL, *fn = NULL;
    tr_status st;
    int handled = 0;
    st = cdyn_polyfill_call(tx, (PyObject *)cls, args, nargs, kwnames, out, &handled);
    if (handled || st != TR_OK) {   /* a class with a polyfill (torch.LongTensor(data)) */
        return st;
    }
    if (cls == &_PyWeakref_RefType) {
        return weakref_construct(tx, args, nargs, kwnames, out);
    }
    if (cls == &PyMethod_Type && nargs == 2 && kwnames == NULL &&
        cdyn_v_real(args[0]) != NULL && PyFunction_Check(cdyn_v_real(args[0]))) {
        /* types.MethodType(func, obj) of a Python function (contextlib.ExitStack binds each
           context manager's __exit__ so): a bound method value, inlined when called */
        PyObject *f = cdyn_v_real(args[0]);
        *out = cdyn_value_method(f, ((PyFunctionObject *)f)->func_name, args[1]);
        return *out ? TR_OK : TR_ERROR;
    }
    if (cdyn_is_deque_type((PyObject *)cls)) {
        return cdyn_deque_construct(tx, args, nargs, kwnames, out);   /* values/deque.c */
    }
    if (cls == &PyDictProxy_Type && nargs == 1 && kwnames == NULL &&
        V(args[0])->kind == VK_DICT) {
        return cdyn_mproxy_new(tx, args[0], out);   /* values/mproxy.c */
    }
    if (nargs == 1 && kwnames == NULL && PyType_IsSubtype(cls, &PyTuple_Type) &&
        PyDict_GetItemString(cls->tp_dict, "n_sequence_fields") != NULL) {
        return structseq_new(tx, cls, args[0], out);
    }
    if (newfn != NULL && Py_TYPE(newfn) == &PyStaticMethod_Type) {
        fn = PyObject_GetAttrString(newfn, "__func__");
        if (fn == NULL) {
            return TR_ERROR;
        }
    }
    if (PyType_IsSubtype(cls, (PyTypeObject *)cdyn_G.torch_tensor_type) &&
        (fn == NULL || !PyFunction_Check(fn) || cdyn_is_wrapper_subclass(cls) ||
         PyType_IsSubtype(cls, (PyTypeObject *)cdyn_G.nn_parameter_type) ||
         cdyn_module_startswith((PyObject *)cls, "torch"))) {
        /* nn.Parameter(t), nn.Buffer(t): a module creating parameters is built in Python;
           a subclass whose own Python __new__ makes it (torchvision's tv_tensors.Image:
           as_tensor(data).as_subclass(cls)) is inlined below */
        Py_XDECREF(fn);
        return cdyn_tx_unsupported(tx, "construction of %s (a tensor subclass)", cls->tp_name);
    }
    if (fn != NULL && PyFunction_Check(fn)) {
        st = cdyn_tx_inline_function(tx, fn, NULL, clsv, args, nargs, kwnames, &obj);
    }
    else if (newfn == cdyn_U.object_new || newfn == cdyn_U.dict_new ||
             newfn == cdyn_U.list_new || newfn == cdyn_U.set_new) {
        st = cdyn_newobj_alloc(tx, clsv, &obj);
    }
    else if (newfn == cdyn_U.frozenset_new || newfn == cdyn_U.tuple_new) {
        st = immutable_alloc(tx, newfn == cdyn_U.tuple_new ? VK_TUPLE : VK_FROZENSET, clsv,
                             args, nargs, kwnames, &obj);
    }
    else {
        st = cdyn_tx_unsupported(tx, "construction of %s (its __new__ is not modelled)",
                                 cls->tp_name);
    }
    Py_XDECREF(fn);
    if (st != TR_OK) {
        return st;
    }
    t = cdyn_v_python_type(obj);
    if (t != NULL && PyType_IsSubtype(t, cls)) {
        st = run_init(tx, obj, newfn, args, nargs, kwnames);
    }
    else if (t == NULL) {
        st = cdyn_tx_unsupported(tx, "__new__ of %s returned %S", cls->tp_name, obj);
    }
    if (st != TR_OK) {
        Py_DECREF(obj);
        return st;
    }
    *out = obj;
    return TR_OK;
}

/* ---- rebuilding ----------------------------------------------------------------------------------- */

tr_status
cdyn_newobj_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    PyObject *base = V(v)->u.uobj.base;
    tr_status st;
    if (V(v)->bits & UOBJ_VISITING) {
        return TR_OK;   /* an attribute refers back to the object */
    }
    V(v)->bits |= UOBJ_VISITING;
    st = cdyn_cg_collect(tx, cg, V(v)->u.uobj.cls);
    if (st == TR_OK) {
        st = cdyn_cg_collect(tx, cg, V(v)->u.uobj.attrs);
    }
    if (st == TR_OK && base != NULL) {
        st = cdyn_cg_collect(tx, cg, base);
    }
    V(v)->bits &= ~UOBJ_VISITING;
    return st;
}

/* Emit fn(obj, key, value); POP_TOP (obj reloaded from its temporary). 0 / -1. */
static int
emit_store(cdyn_cg *cg, PyObject *fn, PyObject *obj, PyObject *key, PyObject *value)
{
    if (cdyn_cg_push_callable(cg, fn) < 0 || cdyn_cg_memo_load(cg, obj) != 1 ||
        cdyn_cg_load_const(cg, key) < 0 || cdyn_cg_value(cg, value) < 0 ||
        cdyn_cg_call(cg, 3) < 0) {
        return -1;
    }
    return cdyn_cg_emit(cg, POP_TOP, 0);
}

/* 1 when some attribute of v is a slot (stored through its member descriptor). */
static int
has_slot_attrs(PyObject *v)
{
    PyObject *keys = V(V(v)->u.uobj.attrs)->u.dict.keys;
    PyTypeObject *t = cdyn_user_type(v);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
        PyObject *d = _PyType_Lookup(t, PyList_GET_ITEM(keys, i));
        if (d != NULL && Py_TYPE(d) == &PyMemberDescr_Type) {
            return 1;
        }
    }
    return 0;
}

/* The __new__ that makes an empty instance holding items in base (NULL: object's). */
static PyObject *
new_fn(PyObject *base)
{
    switch (base ? V(base)->kind : VK_NULL) {
    case VK_DICT: return cdyn_U.dict_new;
    case VK_LIST: return cdyn_U.list_new;
    case VK_SET: return cdyn_U.set_new;
    case VK_FROZENSET: return cdyn_U.frozenset_new;
    case VK_TUPLE: return cdyn_U.tuple_new;
    default: return cdyn_U.object_new;
    }
}

int
cdyn_newobj_reconstruct(cdyn_cg *cg, PyObject *v)
{
    PyObject *attrs = V(v)->u.uobj.attrs, *base = V(v)->u.uobj.base, *fill = NULL;
    PyObject *keys = V(attrs)->u.dict.keys, *vals = V(attrs)->u.dict.vals;
    PyTypeObject *t = cdyn_user_type(v);
    int r = cdyn_cg_memo_load(cg, v), e = 0;
    int frozen = base != NULL && (V(base)->kind == VK_FROZENSET || V(base)->kind == VK_TUPLE);
    if (r != 0) {
        return r < 0 ? -1 : 0;
    }
    /* built once and kept in a temporary before its attributes, so that attributes that
       refer back to the object load that temporary */
    if (cdyn_cg_push_callable(cg, new_fn(base)) < 0 || cdyn_cg_value(cg, V(v)->u.uobj.cls) < 0 ||
        (frozen && cdyn_cg_value(cg, base) < 0) || cdyn_cg_call(cg, 1 + frozen) < 0 ||
        cdyn_cg_memo_store(cg, v, "obj") < 0) {
        return -1;
    }
    if (t->tp_dictoffset != 0 && !has_slot_attrs(v)) {
        /* its __dict__ is the rebuilt attrs dict itself (obj.__dict__ may have escaped) */
        e = emit_store(cg, cdyn_U.object_setattr, v, cdyn_U.s_dict, attrs) < 0;
    }
    else {
        for (Py_ssize_t i = 0; !e && i < PyList_GET_SIZE(keys); i++) {
            e = emit_store(cg, cdyn_U.object_setattr, v, PyList_GET_ITEM(keys, i),
                           PyList_GET_ITEM(vals, i)) < 0;
        }
    }
    if (!e && base != NULL && !frozen) {
        /* the items: dict.update(obj, items) (no override runs), or for an OrderedDict
           through OrderedDict.__setitem__ (_glue.fill_ordered_dict); list.extend,
           set.update */
        PyTypeObject *sb = solid_base(t);
        fill = sb == &PyDict_Type ? PyObject_GetAttrString((PyObject *)&PyDict_Type, "update")
               : sb == &PyList_Type ? PyObject_GetAttrString((PyObject *)&PyList_Type, "extend")
               : sb == &PySet_Type ? PyObject_GetAttrString((PyObject *)&PySet_Type, "update")
                                   : PyObject_GetAttrString(cdyn_G.glue, "fill_ordered_dict");
        e = fill == NULL || cdyn_cg_push_callable(cg, fill) < 0 ||
            cdyn_cg_memo_load(cg, v) != 1 || cdyn_cg_value(cg, base) < 0 ||
            cdyn_cg_call(cg, 2) < 0 || cdyn_cg_emit(cg, POP_TOP, 0) < 0;
        Py_XDECREF(fill);
    }
    return e ? -1 : 0;
}

int
cdyn_newobj_has_items(PyObject *v)
{
    return V(v)->kind == VK_NEWOBJ && V(v)->u.uobj.base != NULL;
}

PyObject *
cdyn_newobj_items_copy(PyObject *v)
{
    PyObject *items = cdyn_newobj_has_items(v) ? cdyn_v_as_constant(V(v)->u.uobj.base) : NULL;
    PyObject *cls = cdyn_v_real(V(v)->u.uobj.cls), *obj = NULL, *r = NULL;
    cdyn_vkind k;
    if (items == NULL || cls == NULL) {
        Py_XDECREF(items);
        return NULL;
    }
    k = V(V(v)->u.uobj.base)->kind;
    obj = k == VK_FROZENSET || k == VK_TUPLE
              ? PyObject_CallFunctionObjArgs(new_fn(V(v)->u.uobj.base), cls, items, NULL)
              : PyObject_CallOneArg(new_fn(V(v)->u.uobj.base), cls);
    if (obj != NULL && k != VK_FROZENSET && k != VK_TUPLE) {
        const char *fill = k == VK_LIST ? "extend" : "update";
        PyTypeObject *bt = k == VK_LIST ? &PyList_Type : k == VK_DICT ? &PyDict_Type : &PySet_Type;
        PyObject *f = PyObject_GetAttrString((PyObject *)bt, fill);
        r = f ? PyObject_CallFunctionObjArgs(f, obj, items, NULL) : NULL;
        Py_XDECREF(f);
        if (r == NULL) {
            Py_CLEAR(obj);
        }
        Py_XDECREF(r);
    }
    Py_DECREF(items);
    if (obj == NULL) {
        PyErr_Clear();
    }
    return obj;
}

/* ---- OBJFN: builtin slot functions ------------------------------------------------------------------ */

/* 1 when d is a slot function or method descriptor of dict or OrderedDict. */
static int
is_dict_slot(PyObject *d)
{
    return (Py_TYPE(d) == &PyWrapperDescr_Type || Py_TYPE(d) == &PyMethodDescr_Type) &&
           is_dict_base(((PyDescrObject *)d)->d_type);
}

/* 1 when d is a slot function or method descriptor of list, set or frozenset. */
static int
is_seq_slot(PyObject *d)
{
    return (Py_TYPE(d) == &PyWrapperDescr_Type || Py_TYPE(d) == &PyMethodDescr_Type) &&
           base_kind(((PyDescrObject *)d)->d_type) != VK_NULL &&
           !is_dict_base(((PyDescrObject *)d)->d_type);
}

/* 1 when d, a list / tuple method or slot (is_seq_slot), only reads its object. */
static int
seq_read_slot(PyObject *d)
{
    static const char *const reads[] = {
        "__contains__", "__getitem__", "__len__", "__iter__", "__reversed__", "count", "index",
        "copy", "__add__", "__mul__", "__rmul__", "__eq__", "__ne__", "__lt__", "__le__",
        "__gt__", "__ge__", "__repr__", NULL};
    return cdyn_name_in(((PyDescrObject *)d)->d_name, reads);
}

int
cdyn_objfn_known(PyObject *obj)
{
    return obj == cdyn_U.object_new || obj == cdyn_U.object_init ||
           obj == cdyn_U.object_setattr || obj == cdyn_U.object_getattribute ||
           obj == cdyn_U.object_delattr || obj == cdyn_U.object_eq || obj == cdyn_U.object_ne ||
           obj == cdyn_U.type_call ||
           obj == cdyn_U.dict_new || obj == cdyn_U.tuple_new ||
           obj == cdyn_U.dc_fields || obj == cdyn_U.dc_replace ||
           obj == cdyn_U.dc_is_dataclass || obj == cdyn_U.list_new || obj == cdyn_U.set_new ||
           is_dict_slot(obj) || is_seq_slot(obj);
}

int
cdyn_user_is_objfn(PyObject *obj)
{
    return cdyn_U.object_new != NULL && cdyn_objfn_known(obj);
}

PyObject *
cdyn_objfn_new(PyObject *fn, PyObject *self)
{
    PyObject *v = cdyn_value_alloc(VK_OBJFN, NULL);
    if (v != NULL) {
        V(v)->u.ofn.fn = Py_NewRef(fn);
        V(v)->u.ofn.self = Py_XNewRef(self);
    }
    return v;
}

/* The DICT value a dict slot function acts on: a dict subclass's items or a dict. */
static PyObject *
dict_target(PyObject *v)
{
    if (V(v)->kind == VK_NEWOBJ) {
        return V(v)->u.uobj.base;
    }
    return V(v)->kind == VK_DICT ? v : NULL;
}

/* dict.<name>(self, *args) on a DICT value d. */
static tr_status
dict_slot_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *d, PyObject *const *args,
               Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyObject *name = ((PyDescrObject *)fn)->d_name;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    tr_status st;
    int b = 0;
    Py_ssize_t n = 0;
    if (cdyn_name_is(name, "__init__")) {
        st = dict_init(tx, d, args, nargs, kwnames);
        *out = st == TR_OK ? cdyn_value_const(Py_None) : NULL;
        return st == TR_OK && *out == NULL ? TR_ERROR : st;
    }
    if (nkw > 0 && !cdyn_name_is(name, "update")) {   /* (update(**kw): the DICT's own) */
        return cdyn_tx_unsupported(tx, "dict.%U with keyword arguments", name);
    }
    if (cdyn_name_is(name, "__getitem__") && nargs == 1) {
        return cdyn_v_subscr(tx, d, args[0], out);
    }
    if ((cdyn_name_is(name, "__setitem__") && nargs == 2) ||
        (cdyn_name_is(name, "__delitem__") && nargs == 1)) {
        st = nargs == 2 ? cdyn_v_store_subscr(tx, d, args[0], args[1])
                        : cdyn_v_delete_subscr(tx, d, args[0]);
        *out = st == TR_OK ? cdyn_value_const(Py_None) : NULL;
        return st == TR_OK && *out == NULL ? TR_ERROR : st;
    }
    if (cdyn_name_is(name, "__contains__") && nargs == 1) {
        st = cdyn_v_contains(tx, d, args[0], &b);
        *out = st == TR_OK ? cdyn_value_bool(b) : NULL;
        return st == TR_OK && *out == NULL ? TR_ERROR : st;
    }
    if (cdyn_name_is(name, "__len__") && nargs == 0) {
        st = cdyn_v_len(tx, d, &n);
        *out = st == TR_OK ? cdyn_value_const_steal(PyLong_FromSsize_t(n)) : NULL;
        return st == TR_OK && *out == NULL ? TR_ERROR : st;
    }
    if (cdyn_name_is(name, "__iter__") && nargs == 0) {
        return cdyn_v_iter(tx, d, out);
    }
    /* other dunders (__or__, __ior__, __eq__, ...: value.c's builtin dunders) and the
       named methods: the DICT value's */
    return cdyn_v_call_method(tx, fs, d, name, args, nargs, kwnames, out);
}

/* list.<name>(self, *args) / set.<name> / frozenset.<name> (fn) on self, a NEWOBJ of a
 * subclass whose items are in base: the base's own method or operator; what returns the
 * base itself (an in-place operator) returns self. */
static tr_status
seq_slot_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *self, PyObject *base,
              PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyObject *name = ((PyDescrObject *)fn)->d_name;
    tr_status st;
    if (cdyn_name_is(name, "__init__")) {
        st = base_init(tx, base, args, nargs, kwnames);
        *out = st == TR_OK ? cdyn_value_const(Py_None) : NULL;
        return st == TR_OK && *out == NULL ? TR_ERROR : st;
    }
    st = cdyn_v_call_method(tx, fs, base, name, args, nargs, kwnames, out);
    if (st == TR_OK && *out == base) {
        Py_SETREF(*out, Py_NewRef(self));
    }
    return st;
}

/* object.__eq__(self, other): True when other is self, else NotImplemented; object.__ne__
 * (super().__ne__(other) of a class defining __eq__): the inverse of type(self).__eq__'s
 * answer, NotImplemented when that is NotImplemented (CPython's object_richcompare). */
static tr_status
object_equality(cdyn_tx *tx, int ne, PyObject *self, PyObject *other, PyObject **out)
{
    static PyObject *s_eq;
    PyObject *r = NULL;
    int found = 0, truth = 0;
    tr_status st = TR_OK;
    if (s_eq == NULL && (s_eq = PyUnicode_InternFromString("__eq__")) == NULL) {
        return TR_ERROR;
    }
    if (ne) {   /* type(self).__eq__ when it is Python code */
        st = cdyn_uobj_call_dunder(tx, self, s_eq, &other, 1, &r, &found);
    }
    if (st == TR_OK && !found) {   /* object's own __eq__: identity */
        st = cdyn_user_is(tx, self, other, &truth);
        if (st == TR_NOTIMPL) {
            return cdyn_tx_unsupported(tx, "object.__eq__ of %S and %S", self, other);
        }
        if (st == TR_OK && (r = cdyn_value_const(truth ? Py_True : Py_NotImplemented)) == NULL) {
            st = TR_ERROR;
        }
    }
    if (st != TR_OK || !ne ||
        (V(r)->kind == VK_CONST && V(r)->u.cnst.value == Py_NotImplemented)) {
        *out = st == TR_OK ? r : NULL;   /* (NotImplemented passes through __ne__) */
        if (st != TR_OK) {
            Py_XDECREF(r);
        }
        return st;
    }
    st = cdyn_v_truth(tx, r, &truth);
    Py_DECREF(r);
    *out = st == TR_OK ? cdyn_value_bool(!truth) : NULL;
    return st == TR_OK && *out == NULL ? TR_ERROR : st;
}

/* The slot functions of object and tuple: __new__, __init__, __setattr__, ... */
static tr_status
object_slot_call(cdyn_tx *tx, PyObject *fn, PyObject *const *a, Py_ssize_t n,
                 PyObject *kwnames, PyObject **out)
{
    PyObject *name = n >= 2 && V(a[1])->kind == VK_CONST ? V(a[1])->u.cnst.value : NULL;
    tr_status st;
    if (n < 1) {
        return cdyn_tx_unsupported(tx, "%R without arguments", fn);
    }
    if (fn == cdyn_U.tuple_new) {
        return kwnames ? cdyn_tx_unsupported(tx, "tuple.__new__ with keywords")
                       : cdyn_namedtuple_new(tx, a[0], a + 1, n - 1, out);
    }
    if (fn == cdyn_U.type_call) {   /* type.__call__(cls, ...): super().__call__ of a metaclass */
        PyObject *cls = cdyn_v_real(a[0]);
        if (V(a[0])->kind != VK_CLASS || cls == NULL || !PyType_Check(cls)) {
            return cdyn_tx_unsupported(tx, "type.__call__ of %S", a[0]);
        }
        return type_call(tx, a[0], a + 1, n - 1, kwnames, out);
    }
    if (fn == cdyn_U.object_new || fn == cdyn_U.dict_new || fn == cdyn_U.list_new ||
        fn == cdyn_U.set_new) {
        PyObject *cls = cdyn_v_real(a[0]);
        if (fn == cdyn_U.dict_new && cls == (PyObject *)&PyDict_Type && n == 1 && !kwnames) {
            *out = cdyn_dict_new(NULL);   /* dict.__new__(dict): an empty dict */
            return *out ? TR_OK : TR_ERROR;
        }
        if (fn == cdyn_U.list_new && cls == (PyObject *)&PyList_Type) {
            *out = empty_base(tx, VK_LIST);   /* list.__new__(list, ...): an empty list, */
            return *out ? TR_OK : TR_ERROR;   /* its other arguments ignored, as CPython */
        }
        if (cls == NULL || !PyType_Check(cls) ||
            (fn != cdyn_U.dict_new && fn != cdyn_U.object_new &&
             base_kind(solid_base((PyTypeObject *)cls)) == VK_NULL) ||
            (fn == cdyn_U.object_new && n > 1 &&
             _PyType_Lookup((PyTypeObject *)cls, cdyn_U.s_init) == cdyn_U.object_init)) {
            return cdyn_tx_unsupported(tx, "%R of %S", fn, a[0]);
        }
        return cdyn_newobj_alloc(tx, a[0], out);
    }
    if (!cdyn_user_is_instance(a[0])) {
        return cdyn_tx_unsupported(tx, "%R on %S", fn, a[0]);
    }
    if (fn == cdyn_U.object_init) {
        *out = cdyn_value_const(Py_None);
        return *out ? TR_OK : TR_ERROR;
    }
    if ((fn == cdyn_U.object_eq || fn == cdyn_U.object_ne) && n == 2 && kwnames == NULL) {
        return object_equality(tx, fn == cdyn_U.object_ne, a[0], a[1], out);
    }
    if (name == NULL || !PyUnicode_Check(name) || kwnames != NULL) {
        return cdyn_tx_unsupported(tx, "%R with a non-constant name", fn);
    }
    if (fn == cdyn_U.object_getattribute && n == 2) {
        return cdyn_uobj_generic_getattr(tx, a[0], name, 0, out);
    }
    if (fn == cdyn_U.object_setattr && n == 3) {
        st = cdyn_uobj_generic_setattr(tx, a[0], name, a[2]);
    }
    else if (fn == cdyn_U.object_delattr && n == 2) {
        st = cdyn_uobj_delattr(tx, a[0], name, 1);
    }
    else {
        return cdyn_tx_unsupported(tx, "%R with these arguments", fn);
    }
    *out = st == TR_OK ? cdyn_value_const(Py_None) : NULL;
    return st == TR_OK && *out == NULL ? TR_ERROR : st;
}

/* 1 when fn, a dict slot function, only reads the items of OBJECT v (keys(), get(), len(),
 * ...) and is what v's type has for that name. */
static int
mirror_read(PyObject *v, PyObject *fn)
{
    static const char *const reads[] = {"keys", "values", "items", "get", "__getitem__",
                                        "__contains__", "__len__", "__iter__", NULL};
    PyObject *name = ((PyDescrObject *)fn)->d_name;
    return cdyn_name_in(name, reads) && _PyType_Lookup(cdyn_user_type(v), name) == fn;
}

tr_status
cdyn_objfn_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *const *args, Py_ssize_t nargs,
                PyObject *kwnames, PyObject **out)
{
    PyObject *fn = V(v)->u.ofn.fn, *self = V(v)->u.ofn.self, *all[32], *d;
    Py_ssize_t n = 0;
    int handled = 0;
    tr_status st = cdyn_dataclass_call(tx, fs, fn, self, args, nargs, kwnames, out, &handled);
    if (handled) {
        return st;
    }
    if (nargs + 1 > 32) {
        return cdyn_tx_unsupported(tx, "too many arguments to %R", fn);
    }
    if (self != NULL) {
        all[n++] = self;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        all[n++] = args[i];
    }
    if (is_dict_slot(fn) && self == NULL && n >= 1 && V(all[0])->vt != &cdyn_user_vt &&
        cdyn_is_builtin(fn)) {
        /* dict.get(d, k) on a container value: the containers' own method (values/dict.c,
           through the builtins family); the user family keeps dict subclasses' objects */
        PyObject *b = cdyn_value_obj(VK_BUILTIN, fn, NULL);
        if (b == NULL) {
            return TR_ERROR;
        }
        st = cdyn_v_call(tx, fs, b, args, nargs, kwnames, out);
        Py_DECREF(b);
        return st;
    }
    if (is_dict_slot(fn)) {
        if (n >= 1 && V(all[0])->kind == VK_OBJECT && mirror_read(all[0], fn)) {
            /* a read of a ModelOutput of the frame: from the mirror of its items */
            st = cdyn_uobj_items(tx, all[0], &d);
            if (st == TR_OK) {
                st = dict_slot_call(tx, fs, fn, d, all + 1, n - 1, kwnames, out);
                Py_DECREF(d);
            }
            if (st != TR_NOTIMPL) {
                return st;
            }
        }
        if (n >= 1 && V(all[0])->kind == VK_OBJECT && kwnames == NULL &&
            ((n == 3 && cdyn_name_is(((PyDescrObject *)fn)->d_name, "__setitem__")) ||
             (n == 2 && cdyn_name_is(((PyDescrObject *)fn)->d_name, "__delitem__"))) &&
            PyObject_TypeCheck(V(all[0])->u.obj.obj, ((PyDescrObject *)fn)->d_type)) {
            /* super().__setitem__(k, v) on a dict subclass's object of the frame */
            st = cdyn_uobj_item_call_replayed(tx, all[0], fn, all[1], n == 3 ? all[2] : NULL);
            *out = st == TR_OK ? cdyn_value_const(Py_None) : NULL;
            return st == TR_OK && *out == NULL ? TR_ERROR : st;
        }
        if (n < 1 || (d = dict_target(all[0])) == NULL) {
            st = cdyn_builtin_dict_read(tx, fn, all, n, kwnames, out);   /* values/builtin.c */
            if (st != TR_NOTIMPL) {
                return st;
            }
            return cdyn_tx_unsupported(tx, "%R on %S", fn, n ? all[0] : Py_None);
        }
        st = dict_slot_call(tx, fs, fn, d, all + 1, n - 1, kwnames, out);
        if (st == TR_OK && *out == d && d != all[0]) {
            Py_SETREF(*out, Py_NewRef(all[0]));   /* an in-place operator gives the object */
        }
        return st;
    }
    if (is_seq_slot(fn)) {
        PyTypeObject *dt = ((PyDescrObject *)fn)->d_type;
        PyObject *b = n >= 1 && V(all[0])->kind == VK_NEWOBJ ? V(all[0])->u.uobj.base : NULL;
        if (self == NULL && n >= 1 && V(all[0])->vt != &cdyn_user_vt && cdyn_is_builtin(fn)) {
            /* list.append(l, x) on a container value: the builtins family's */
            PyObject *bv = cdyn_value_obj(VK_BUILTIN, fn, NULL);
            st = bv ? cdyn_v_call(tx, fs, bv, args, nargs, kwnames, out) : TR_ERROR;
            Py_XDECREF(bv);
            return st;
        }
        if (b == NULL && n >= 1 && V(all[0])->kind == VK_OBJECT && seq_read_slot(fn) &&
            PyObject_TypeCheck(V(all[0])->u.obj.obj, dt)) {
            /* super().__contains__(x) on a list / tuple subclass of the frame: its items */
            PyObject *m = NULL;
            st = cdyn_uobj_items(tx, all[0], &m);
            if (st == TR_OK && base_kind(dt) == V(m)->kind) {
                st = cdyn_v_base_dunder(tx, m, dt, ((PyDescrObject *)fn)->d_name, all + 1,
                                        n - 1, kwnames, out);
                st = st == TR_NOTIMPL ? seq_slot_call(tx, fs, fn, all[0], m, all + 1, n - 1,
                                                      kwnames, out)
                                      : st;
            }
            else if (st == TR_OK || st == TR_NOTIMPL) {
                st = cdyn_tx_unsupported(tx, "%R on %S", fn, all[0]);
            }
            Py_XDECREF(m);
            return st;
        }
        if (b == NULL || base_kind(dt) != V(b)->kind) {
            return cdyn_tx_unsupported(tx, "%R on %S", fn, n ? all[0] : Py_None);
        }
        return seq_slot_call(tx, fs, fn, all[0], b, all + 1, n - 1, kwnames, out);
    }
    return object_slot_call(tx, fn, all, n, kwnames, out);
}

tr_status
cdyn_objfn_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    return V(v)->u.ofn.self ? cdyn_cg_collect(tx, cg, V(v)->u.ofn.self) : TR_OK;
}

int
cdyn_objfn_reconstruct(cdyn_cg *cg, PyObject *v)
{
    if (V(v)->u.ofn.self == NULL) {
        return cdyn_cg_load_const(cg, V(v)->u.ofn.fn);
    }
    /* types.MethodType(fn, self): exactly this slot function, bound */
    if (cdyn_cg_push_callable(cg, cdyn_U.method_type) < 0 ||
        cdyn_cg_load_const(cg, V(v)->u.ofn.fn) < 0 || cdyn_cg_value(cg, V(v)->u.ofn.self) < 0) {
        return -1;
    }
    return cdyn_cg_call(cg, 2);
}
