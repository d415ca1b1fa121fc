/* values/dataclass.c: dataclasses, named tuples and Enum members.
 *
 * Dataclasses are ordinary classes to the tracer: their generated __init__ (defaults,
 * default_factory, __post_init__, frozen classes' object.__setattr__) is inlined like any
 * __init__ (newobj.c). dataclasses.fields(x) and is_dataclass(x) are answered from the
 * class (guarded where it was read); Field objects are trusted metadata (OBJ_TRUSTED);
 * dataclasses.replace(obj, **changes) calls the class with the fields' current values.
 * asdict/astuple are left to be traced as Python (they deep-copy their leaves).
 *
 * Named tuples are TUPLE values with their type (values/seq.c): construction inlines the
 * generated __new__ down to tuple.__new__(cls, iterable); _replace, _asdict and the
 * class attributes (_fields, ...) are handled here; methods and properties defined on a
 * typing.NamedTuple class are inlined. An input named tuple is an input tuple (wrap.c).
 *
 * transformers' ModelOutput (an OrderedDict subclass that is a dataclass) has its methods
 * modelled on objects made while tracing (below).
 *
 * Enum members are constants (EQUALS_MATCH, folded; wrap.c): `c is Color.RED`, .value,
 * .name, dict keys, IntEnum arithmetic. Enum classes fold Color(1), Color["RED"],
 * iteration and len (user.c). */
#include "user.h"

/* ---- Enum ---------------------------------------------------------------------------------------- */

int
cdyn_is_enum_member(PyObject *obj)
{
    return cdyn_U.enum_type != NULL &&
           PyObject_TypeCheck(obj, (PyTypeObject *)cdyn_U.enum_type);
}

int
cdyn_is_enum_class(PyObject *cls)
{
    return cdyn_U.enum_type != NULL && PyType_Check(cls) &&
           PyType_IsSubtype((PyTypeObject *)cls, (PyTypeObject *)cdyn_U.enum_type);
}

tr_status
cdyn_enum_class_call(cdyn_tx *tx, PyObject *clsv, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames, PyObject **out)
{
    if (!cdyn_all_const(args, nargs)) {
        return cdyn_tx_unsupported(tx, "Enum lookup %S(...) with non-constant arguments", clsv);
    }
    return cdyn_call_on_constants(tx, V(clsv)->u.obj.obj, args, nargs, kwnames, out);
}

/* ---- named tuples --------------------------------------------------------------------------------- */

/* 1 when t is a named tuple class (collections.namedtuple, typing.NamedTuple) or a struct
 * sequence (torch.return_types, os.stat_result). */
static int
is_namedtuple_type(PyTypeObject *t)
{
    static PyObject *s_n_fields;
    PyObject *f;
    if (t == &PyTuple_Type || !PyType_IsSubtype(t, &PyTuple_Type)) {
        return 0;
    }
    if (s_n_fields == NULL && (s_n_fields = PyUnicode_InternFromString("n_fields")) == NULL) {
        PyErr_Clear();
        return 0;
    }
    f = _PyType_Lookup(t, cdyn_U.s_fields);
    if (f != NULL && PyTuple_Check(f)) {
        return 1;
    }
    return _PyType_Lookup(t, s_n_fields) != NULL;
}

PyTypeObject *
cdyn_namedtuple_type_of(PyObject *obj)
{
    if (cdyn_U.object_new == NULL || !PyTuple_Check(obj) || PyTuple_CheckExact(obj)) {
        return NULL;
    }
    return is_namedtuple_type(Py_TYPE(obj)) ? Py_TYPE(obj) : NULL;
}

tr_status
cdyn_namedtuple_new(cdyn_tx *tx, PyObject *clsv, PyObject *const *args, Py_ssize_t nargs,
                    PyObject **out)
{
    PyObject *cls = cdyn_v_real(clsv), *items = NULL;
    tr_status st;
    if (cls != NULL && PyType_Check(cls) && cls != (PyObject *)&PyTuple_Type &&
        !is_namedtuple_type((PyTypeObject *)cls) &&
        PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)) {
        /* a plain tuple subclass (its own __new__ calling super().__new__(cls, items)): an
           object made in the trace holding the items (values/newobj.c) */
        return cdyn_newobj_tuple_new(tx, clsv, args, nargs, out);
    }
    if (cls == NULL || !PyType_Check(cls) ||
        (cls != (PyObject *)&PyTuple_Type && !is_namedtuple_type((PyTypeObject *)cls)) ||
        nargs > 1) {
        return cdyn_tx_unsupported(tx, "tuple.__new__(%S, ...)", clsv);
    }
    if (nargs == 0) {
        items = PyList_New(0);
        st = items ? TR_OK : TR_ERROR;
    }
    else {
        st = cdyn_v_unpack(tx, args[0], &items);
    }
    if (st != TR_OK) {
        return st;
    }
    *out = cdyn_value_seq_list(VK_TUPLE, items);
    Py_DECREF(items);
    if (*out == NULL) {
        return TR_ERROR;
    }
    if (cls != (PyObject *)&PyTuple_Type) {
        V(*out)->u.seq.nt_type = Py_NewRef(cls);
    }
    return TR_OK;
}

/* The field names of a named-tuple type: a new tuple of str, or NULL (no exception). */
static PyObject *
nt_fields(PyObject *nt_type)
{
    PyObject *f = PyObject_GetAttr(nt_type, cdyn_U.s_fields);
    if (f == NULL || !PyTuple_Check(f)) {
        PyErr_Clear();
        Py_XDECREF(f);
        return NULL;
    }
    return f;
}

/* 1 when fn is collections.namedtuple's generated method `name` (all named tuples share
 * its code object): _replace, _asdict, _make (a classmethod's function). */
static int
is_nt_method(PyObject *fn, PyObject *name)
{
    static PyObject *codes[3];
    int which = PyUnicode_Compare(name, cdyn_U.s_replace) == 0 ? 0
                : PyUnicode_Compare(name, cdyn_U.s_asdict) == 0 ? 1
                : PyUnicode_CompareWithASCIIString(name, "_make") == 0 ? 2 : -1;
    if (which < 0 || !PyFunction_Check(fn)) {
        return 0;
    }
    if (codes[which] == NULL) {
        PyObject *coll = PyImport_ImportModule("collections"), *nt = NULL, *t = NULL, *f = NULL;
        nt = coll ? PyObject_GetAttrString(coll, "namedtuple") : NULL;
        t = nt ? PyObject_CallFunction(nt, "ss", "_cdyn_probe", "a") : NULL;
        f = t ? PyObject_GetAttr(t, name) : NULL;
        if (f != NULL && PyMethod_Check(f)) {   /* _make, bound to the class */
            Py_SETREF(f, Py_NewRef(PyMethod_GET_FUNCTION(f)));
        }
        if (f != NULL && PyFunction_Check(f)) {
            codes[which] = Py_NewRef(PyFunction_GET_CODE(f));
        }
        Py_XDECREF(coll);
        Py_XDECREF(nt);
        Py_XDECREF(t);
        Py_XDECREF(f);
        PyErr_Clear();
    }
    return codes[which] != NULL && PyFunction_GET_CODE(fn) == codes[which];
}

tr_status
cdyn_namedtuple_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *t = V(v)->u.seq.nt_type, *d;
    if (t == NULL || V(v)->kind != VK_TUPLE || cdyn_U.object_new == NULL) {
        return TR_NOTIMPL;   /* (a LIST with a type is a slice of a module container) */
    }
    if (PyUnicode_Compare(name, cdyn_U.s_class) == 0) {
        return cdyn_tx_wrap_real(tx, t, NULL, out);   /* fixed by the value's type */
    }
    d = _PyType_Lookup((PyTypeObject *)t, name);
    if (d == NULL || _PyType_Lookup(&PyTuple_Type, name) == d) {
        return TR_NOTIMPL;   /* tuple's own methods (count, index) */
    }
    if (is_nt_method(d, name)) {
        *out = cdyn_objfn_new(d, v);
        return *out ? TR_OK : TR_ERROR;
    }
    if (PyFunction_Check(d) || Py_TYPE(d) == &PyProperty_Type ||
        Py_TYPE(d) == &PyClassMethod_Type || Py_TYPE(d) == &PyStaticMethod_Type) {
        return cdyn_uobj_bind(tx, v, NULL, d, name, out);
    }
    if (Py_TYPE(d)->tp_descr_get != NULL) {
        return TR_NOTIMPL;
    }
    return cdyn_tx_wrap_real(tx, d, NULL, out);   /* _fields, _field_defaults, ... */
}

tr_status
cdyn_namedtuple_class_getattr(cdyn_tx *tx, PyObject *clsv, PyObject *name, PyObject **out)
{
    PyObject *t = V(clsv)->u.obj.obj, *d, *f;
    (void)tx;
    if (!PyType_Check(t) || !is_namedtuple_type((PyTypeObject *)t) ||
        PyUnicode_CompareWithASCIIString(name, "_make") != 0 ||
        (d = _PyType_Lookup((PyTypeObject *)t, name)) == NULL ||
        Py_TYPE(d) != &PyClassMethod_Type) {
        return TR_NOTIMPL;
    }
    f = PyObject_GetAttrString(d, "__func__");
    if (f == NULL) {
        return TR_ERROR;
    }
    *out = is_nt_method(f, name) ? cdyn_objfn_new(f, clsv) : NULL;
    Py_DECREF(f);
    if (*out == NULL) {
        return PyErr_Occurred() ? TR_ERROR : TR_NOTIMPL;
    }
    return TR_OK;
}

/* nt._replace(**changes) and nt._asdict(). */
static tr_status
nt_method_call(cdyn_tx *tx, PyObject *fn, PyObject *self, PyObject *const *args,
               Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyObject *t = V(self)->u.seq.nt_type, *fields = nt_fields(t), *items = NULL, *keys = NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    tr_status st = TR_ERROR;
    if (fields == NULL) {
        return cdyn_tx_unsupported(tx, "named tuple without _fields");
    }
    if (V(self)->u.seq.items == NULL ||
        PyList_GET_SIZE(V(self)->u.seq.items) != PyTuple_GET_SIZE(fields)) {
        st = cdyn_tx_unsupported(tx, "named tuple of the wrong length");
        goto done;
    }
    items = PyList_GetSlice(V(self)->u.seq.items, 0, PY_SSIZE_T_MAX);
    if (items == NULL) {
        goto done;
    }
    if (PyFunction_GET_CODE(fn) == PyFunction_GET_CODE(_PyType_Lookup((PyTypeObject *)t,
                                                                        cdyn_U.s_asdict))) {
        if (nargs != 0) {
            st = cdyn_tx_unsupported(tx, "_asdict() with arguments");
            goto done;
        }
        keys = PySequence_List(fields);
        *out = keys ? cdyn_value_dict(keys, items) : NULL;
        st = *out ? TR_OK : TR_ERROR;
        goto done;
    }
    if (nargs != nkw) {
        st = cdyn_tx_unsupported(tx, "_replace() with positional arguments");
        goto done;
    }
    for (Py_ssize_t k = 0; k < nkw; k++) {
        Py_ssize_t i = PySequence_Index(fields, PyTuple_GET_ITEM(kwnames, k));
        if (i < 0) {
            PyErr_Clear();
            st = cdyn_tx_unsupported(tx, "_replace() of an unknown field");
            goto done;
        }
        Py_INCREF(args[k]);
        PyList_SetItem(items, i, args[k]);
    }
    *out = cdyn_value_seq_list(VK_TUPLE, items);
    if (*out != NULL) {
        V(*out)->u.seq.nt_type = Py_NewRef(t);
    }
    st = *out ? TR_OK : TR_ERROR;
done:
    Py_XDECREF(fields);
    Py_XDECREF(items);
    Py_XDECREF(keys);
    return st;
}

/* ---- dataclasses ---------------------------------------------------------------------------------- */

/* The class a dataclasses helper inspects: a class value's class, else the value's type. */
static PyObject *
class_of(PyObject *v)
{
    if (V(v)->kind == VK_CLASS) {
        return V(v)->u.obj.obj;
    }
    return (PyObject *)cdyn_v_python_type(v);
}

/* dataclasses.fields(x): a tuple of the Field objects of x's class (trusted metadata). */
static tr_status
dc_fields(cdyn_tx *tx, PyObject *x, PyObject **out)
{
    PyObject *cls = class_of(x), *fd = NULL, *items = NULL, *k, *f;
    Py_ssize_t pos = 0;
    tr_status st = TR_ERROR;
    if (cls == NULL || (fd = PyObject_GetAttr(cls, cdyn_U.dc_fields_attr)) == NULL ||
        !PyDict_Check(fd)) {
        Py_XDECREF(fd);
        return cdyn_tx_unsupported(tx, "dataclasses.fields() of %S", x);
    }
    if ((items = PyList_New(0)) == NULL) {
        goto done;
    }
    while (PyDict_Next(fd, &pos, &k, &f)) {
        PyObject *ft = PyObject_GetAttr(f, cdyn_U.s_field_type), *fv = NULL;
        if (ft == NULL) {
            goto done;
        }
        Py_DECREF(ft);
        if (ft != cdyn_U.dc_field_marker) {
            continue;   /* ClassVar and InitVar pseudo-fields */
        }
        fv = cdyn_value_obj(VK_OBJECT, f, NULL);
        if (fv == NULL || PyList_Append(items, fv) < 0) {
            Py_XDECREF(fv);
            goto done;
        }
        V(fv)->bits |= OBJ_TRUSTED;
        Py_DECREF(fv);
    }
    *out = cdyn_value_seq_list(VK_TUPLE, items);
    st = *out ? TR_OK : TR_ERROR;
done:
    Py_XDECREF(fd);
    Py_XDECREF(items);
    return st;
}

/* dataclasses.replace(obj, **changes): the class called with each init field's new or
 * current value. */
static tr_status
dc_replace(cdyn_tx *tx, cdyn_fs *fs, PyObject *obj, PyObject *const *kwvals, PyObject *kwnames,
           PyObject **out)
{
    PyObject *cls = class_of(obj), *fd = NULL, *names = NULL, *vals = NULL, *k, *f;
    PyObject *clsv = NULL, *kn = NULL;
    Py_ssize_t pos = 0, nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, used = 0;
    tr_status st = TR_ERROR;
    if (V(obj)->kind == VK_CLASS || cls == NULL ||
        (fd = PyObject_GetAttr(cls, cdyn_U.dc_fields_attr)) == NULL || !PyDict_Check(fd)) {
        PyErr_Clear();
        Py_XDECREF(fd);
        return cdyn_tx_unsupported(tx, "dataclasses.replace() of %S", obj);
    }
    names = PyList_New(0);
    vals = PyList_New(0);
    if (names == NULL || vals == NULL) {
        goto done;
    }
    while (PyDict_Next(fd, &pos, &k, &f)) {
        PyObject *ft = PyObject_GetAttr(f, cdyn_U.s_field_type), *init = NULL, *v = NULL;
        Py_ssize_t at = -1;
        int is_init;
        for (Py_ssize_t j = 0; j < nkw; j++) {
            if (PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, j), k) == 0) {
                at = j;
            }
        }
        init = PyObject_GetAttrString(f, "init");
        is_init = init == Py_True;
        Py_XDECREF(init);
        Py_XDECREF(ft);
        if (ft != cdyn_U.dc_field_marker || !is_init) {
            if (at >= 0 || ft == NULL) {   /* InitVar, init=False changes: raise in Python */
                st = ft == NULL ? TR_ERROR
                                : cdyn_tx_unsupported(tx, "dataclasses.replace() of field %U", k);
                goto done;
            }
            continue;
        }
        if (at >= 0) {
            v = Py_NewRef(kwvals[at]);
            used++;
        }
        else if ((st = cdyn_v_getattr(tx, obj, k, &v)) != TR_OK) {
            goto done;
        }
        st = TR_ERROR;
        if (PyList_Append(names, k) < 0 || PyList_Append(vals, v) < 0) {
            Py_DECREF(v);
            goto done;
        }
        Py_DECREF(v);
    }
    if (used != nkw) {
        st = cdyn_tx_unsupported(tx, "dataclasses.replace() with an unknown field");
        goto done;
    }
    st = cdyn_user_class_value(tx, obj, &clsv);
    if (st == TR_OK && (kn = PyList_AsTuple(names)) == NULL) {
        st = TR_ERROR;
    }
    if (st == TR_OK) {
        st = cdyn_v_call(tx, fs, clsv, &PyList_GET_ITEM(vals, 0), PyList_GET_SIZE(vals),
                         PyTuple_GET_SIZE(kn) ? kn : NULL, out);
    }
done:
    Py_XDECREF(fd);
    Py_XDECREF(names);
    Py_XDECREF(vals);
    Py_XDECREF(clsv);
    Py_XDECREF(kn);
    return st;
}

/* ---- transformers' ModelOutput ---------------------------------------------------------------------
 * An OrderedDict subclass that is a dataclass: its fields are attributes, and the fields that
 * are not None are also its items, in field order. Its methods use set comprehensions and
 * generator expressions; on objects made while tracing they are modelled here instead of
 * inlined, with the behaviour of transformers' code (utils/generic.py):
 *   __setattr__(name, value)  a field that is not None also becomes an item
 *   __setitem__(key, value)   the item and the attribute
 *   __getitem__(k)            the item k (str), else to_tuple()[k]
 *   to_tuple()                the items' values
 *   __post_init__()           the fields that are not None become items, in order (the form
 *                             whose first field is an iterator of pairs is not modelled)
 * On a ModelOutput read from the frame (one reaching a resume function), its items are
 * mirrored in a DICT value (u.dobj.items, DICT_MIRROR) made on first use from its fields read
 * as guarded attributes (its items must be exactly its fields that are not None; their
 * number is guarded): o[k], to_tuple(), keys()/values()/items(), iteration, len, `in` and
 * get read the mirror, and item stores change it along with the slot call replayed on the
 * object (userobj.c cdyn_uobj_item_call_replayed). Its views read from the frame are views
 * of the mirror (cdyn_tx_wrap_dict_view).
 * Found by identity once transformers.utils.generic is imported (never imported here). */

enum { MO_SETATTR, MO_SETITEM, MO_GETITEM, MO_TO_TUPLE, MO_POST_INIT, MO_COUNT };
static PyObject *mo_fns[MO_COUNT];   /* ModelOutput's functions, strong once resolved */

/* Which ModelOutput method fn is, or -1. */
static int
model_output_method(PyObject *fn)
{
    static const char *const names[MO_COUNT] = {"__setattr__", "__setitem__", "__getitem__",
                                                "to_tuple", "__post_init__"};
    PyObject *m = PyFunction_Check(fn) ? ((PyFunctionObject *)fn)->func_module : NULL;
    if (m == NULL || !PyUnicode_Check(m) ||
        PyUnicode_CompareWithASCIIString(m, "transformers.utils.generic") != 0) {
        return -1;   /* (cheap: most functions are not transformers') */
    }
    if (mo_fns[0] == NULL) {
        PyObject *mod = PyImport_GetModule(m);
        PyObject *cls = mod ? PyObject_GetAttrString(mod, "ModelOutput") : NULL;
        PyErr_Clear();
        for (int i = 0; cls != NULL && i < MO_COUNT; i++) {
            PyObject *d = PyDict_GetItemString(cdyn_type_dict((PyTypeObject *)cls), names[i]);
            mo_fns[i] = d != NULL && PyFunction_Check(d) ? Py_NewRef(d) : NULL;
        }
        Py_XDECREF(mod);
        Py_XDECREF(cls);
        if (mo_fns[0] == NULL) {
            return -1;
        }
    }
    for (int i = 0; i < MO_COUNT; i++) {
        if (fn == mo_fns[i]) {
            return i;
        }
    }
    return -1;
}

int
cdyn_user_native_method(PyObject *fn)
{
    return model_output_method(fn) >= 0;
}

/* 1 when t's attribute `name` is a function that dataclasses generated (exec'd: its code's
 * file is "<string>"), 0 when not. */
static int
generated_by_dataclass(PyTypeObject *t, const char *name)
{
    PyObject *f = PyDict_GetItemString(t->tp_dict, name), *code;
    if (f == NULL || !PyFunction_Check(f)) {
        return 0;
    }
    code = PyFunction_GET_CODE(f);
    return PyUnicode_Check(((PyCodeObject *)code)->co_filename) &&
           PyUnicode_CompareWithASCIIString(((PyCodeObject *)code)->co_filename, "<string>") == 0;
}

tr_status
cdyn_dataclass_hash_key(cdyn_tx *tx, PyObject *v, PyObject *marker, PyObject **out)
{
    PyTypeObject *t = cdyn_v_python_type(v);
    PyObject *params = NULL, *fd = NULL, *key = NULL, *k, *f;
    Py_ssize_t pos = 0;
    tr_status st = TR_NOTIMPL;
    int frozen = 0, eq = 0;
    if (V(v)->kind != VK_NEWOBJ || t == NULL ||
        (params = PyObject_GetAttrString((PyObject *)t, "__dataclass_params__")) == NULL) {
        PyErr_Clear();
        return TR_NOTIMPL;
    }
    {
        PyObject *fr = PyObject_GetAttrString(params, "frozen");
        PyObject *e = PyObject_GetAttrString(params, "eq");
        frozen = fr == Py_True;
        eq = e == Py_True;
        Py_XDECREF(fr);
        Py_XDECREF(e);
        PyErr_Clear();
    }
    if (!frozen || !eq || !generated_by_dataclass(t, "__eq__") ||
        !generated_by_dataclass(t, "__hash__") ||
        (fd = PyObject_GetAttr((PyObject *)t, cdyn_U.dc_fields_attr)) == NULL ||
        !PyDict_Check(fd) || (key = PyList_New(0)) == NULL ||
        PyList_Append(key, marker) < 0 || PyList_Append(key, (PyObject *)t) < 0) {
        st = PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_AttributeError) ? TR_ERROR
                                                                                : TR_NOTIMPL;
        PyErr_Clear();
        goto done;
    }
    st = TR_OK;
    while (st == TR_OK && PyDict_Next(fd, &pos, &k, &f)) {
        PyObject *ft = PyObject_GetAttr(f, cdyn_U.s_field_type);
        PyObject *cmp = ft ? PyObject_GetAttrString(f, "compare") : NULL, *val = NULL;
        if (cmp == NULL) {
            st = TR_ERROR;
        }
        else if (ft == cdyn_U.dc_field_marker && cmp == Py_True) {
            st = cdyn_v_getattr(tx, v, k, &val);
            if (st == TR_OK && V(val)->kind != VK_CONST) {
                st = cdyn_tx_unsupported(tx, "a frozen dataclass with a non-constant field %U "
                                             "as a dict key or set item", k);
            }
            if (st == TR_OK && (PyObject_Hash(V(val)->u.cnst.value) == -1 ||
                                PyList_Append(key, V(val)->u.cnst.value) < 0)) {
                PyErr_Clear();
                st = cdyn_tx_unsupported(tx, "a frozen dataclass with an unhashable field %U",
                                         k);
            }
        }
        Py_XDECREF(val);
        Py_XDECREF(cmp);
        Py_XDECREF(ft);
    }
    if (st == TR_OK) {
        *out = PyList_AsTuple(key);
        st = *out ? TR_OK : TR_ERROR;
    }
done:
    Py_XDECREF(params);
    Py_XDECREF(fd);
    Py_XDECREF(key);
    return st;
}

/* The names of the dataclass fields of type t: a new list of str, NULL with a reason. */
static tr_status
field_names(cdyn_tx *tx, PyTypeObject *t, PyObject **out)
{
    PyObject *fd = PyObject_GetAttr((PyObject *)t, cdyn_U.dc_fields_attr), *k, *f;
    Py_ssize_t pos = 0;
    if (fd == NULL || !PyDict_Check(fd)) {
        Py_XDECREF(fd);
        return cdyn_tx_unsupported(tx, "%s is not a dataclass", t->tp_name);
    }
    *out = PyList_New(0);
    while (*out != NULL && PyDict_Next(fd, &pos, &k, &f)) {
        PyObject *ft = PyObject_GetAttr(f, cdyn_U.s_field_type);
        if (ft == NULL || (ft == cdyn_U.dc_field_marker && PyList_Append(*out, k) < 0)) {
            Py_CLEAR(*out);
        }
        Py_XDECREF(ft);
    }
    Py_DECREF(fd);
    return *out ? TR_OK : TR_ERROR;
}

tr_status
cdyn_dataclass_graph_arg(cdyn_tx *tx, PyObject *v, PyObject **fake, PyObject **node)
{
    PyTypeObject *t = cdyn_v_python_type(v);
    PyObject *params = NULL, *fr = NULL, *names = NULL, *fkw = NULL, *nkw = NULL, *empty = NULL;
    PyObject *fd = NULL;
    tr_status st = TR_ERROR;
    *fake = *node = NULL;
    if (V(v)->kind != VK_NEWOBJ || t == NULL ||
        (params = PyObject_GetAttrString((PyObject *)t, "__dataclass_params__")) == NULL ||
        (fr = PyObject_GetAttrString(params, "frozen")) == NULL || fr != Py_True) {
        PyErr_Clear();
        st = cdyn_tx_unsupported(tx, "%S as an argument to a torch operation", v);
        goto done;
    }
    if ((st = field_names(tx, t, &names)) != TR_OK) {
        goto done;
    }
    st = TR_ERROR;
    fd = PyObject_GetAttr((PyObject *)t, cdyn_U.dc_fields_attr);
    fkw = PyDict_New();
    nkw = PyDict_New();
    empty = PyTuple_New(0);
    if (fd == NULL || fkw == NULL || nkw == NULL || empty == NULL) {
        goto done;
    }
    st = TR_OK;
    for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(names); i++) {
        PyObject *k = PyList_GET_ITEM(names, i), *f = PyDict_GetItemWithError(fd, k);
        PyObject *init = f ? PyObject_GetAttrString(f, "init") : NULL, *val = NULL, *fk = NULL,
                 *nd = NULL;
        if (init == NULL) {
            st = TR_ERROR;
            break;
        }
        if (init == Py_True) {   /* (a field outside __init__ is made again by it) */
            st = cdyn_v_getattr(tx, v, k, &val);
            if (st == TR_OK) {
                st = cdyn_v_graph_arg(tx, val, &fk, &nd);
            }
            if (st == TR_OK && (PyDict_SetItem(fkw, k, fk) < 0 || PyDict_SetItem(nkw, k, nd) < 0)) {
                st = TR_ERROR;
            }
        }
        Py_DECREF(init);
        Py_XDECREF(val);
        Py_XDECREF(fk);
        Py_XDECREF(nd);
    }
    if (st == TR_OK) {
        *fake = PyObject_Call((PyObject *)t, empty, fkw);   /* the object on fake fields */
        st = *fake != NULL ? cdyn_tx_record_node(tx, (PyObject *)t, empty, nkw, *fake, node)
                           : cdyn_tx_unsupported(tx, "%S rebuilt on fake tensors", v);
        PyErr_Clear();
    }
    if (st != TR_OK) {
        Py_CLEAR(*fake);
        Py_CLEAR(*node);
    }
done:
    Py_XDECREF(params);
    Py_XDECREF(fr);
    Py_XDECREF(names);
    Py_XDECREF(fd);
    Py_XDECREF(fkw);
    Py_XDECREF(nkw);
    Py_XDECREF(empty);
    return st;
}

/* ModelOutput's super().__setitem__(key, value): the item of an object made while tracing,
 * or on an object of the frame a side effect replayed by the dict base's __setitem__. */
static tr_status
mo_item_store(cdyn_tx *tx, PyObject *self, PyObject *key, PyObject *value)
{
    PyTypeObject *b = cdyn_user_type(self);
    if (V(self)->kind == VK_NEWOBJ) {
        return cdyn_v_store_subscr(tx, V(self)->u.uobj.base, key, value);
    }
    while (b != NULL && (b->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        b = b->tp_base;   /* OrderedDict (or dict) */
    }
    return cdyn_uobj_item_call_replayed(tx, self, _PyType_Lookup(b, cdyn_U.s_setitem), key,
                                        value);
}

/* A field's value on self: a NEWOBJ's attribute (NULL when unset), or an object of the
 * frame's attribute read as object.__getattribute__ does (guarded). New reference. */
static tr_status
mo_field(cdyn_tx *tx, PyObject *self, PyObject *name, PyObject **out)
{
    if (V(self)->kind == VK_NEWOBJ) {
        *out = Py_XNewRef(cdyn_newobj_attr(self, name));
        return TR_OK;
    }
    return cdyn_uobj_generic_getattr(tx, self, name, 0, out);
}

/* self[key] = value through the object's __setitem__ when it is ModelOutput's. */
static tr_status
mo_setitem(cdyn_tx *tx, PyObject *self, PyObject *key, PyObject *value)
{
    PyObject *f = _PyType_Lookup(cdyn_user_type(self), cdyn_U.s_setitem);
    tr_status st;
    if (model_output_method(f) != MO_SETITEM || V(key)->kind != VK_CONST ||
        !PyUnicode_Check(V(key)->u.cnst.value)) {
        return cdyn_tx_unsupported(tx, "ModelOutput item %S (an override or a non-str key)", key);
    }
    st = mo_item_store(tx, self, key, value);
    return st == TR_OK ? cdyn_uobj_generic_setattr(tx, self, V(key)->u.cnst.value, value) : st;
}

/* to_tuple(): the values of the items (through ModelOutput's own __getitem__). */
static tr_status
mo_to_tuple(cdyn_tx *tx, cdyn_fs *fs, PyObject *self, PyObject **out)
{
    PyObject *name = PyUnicode_FromString("values"), *view = NULL, *items = NULL;
    tr_status st;
    if (model_output_method(_PyType_Lookup(cdyn_user_type(self), cdyn_U.s_getitem)) !=
        MO_GETITEM) {
        Py_XDECREF(name);
        return cdyn_tx_unsupported(tx, "to_tuple() of a ModelOutput overriding __getitem__");
    }
    st = name ? cdyn_v_call_method(tx, fs, V(self)->u.uobj.base, name, NULL, 0, NULL, &view)
              : TR_ERROR;
    if (st == TR_OK) {
        st = cdyn_v_unpack(tx, view, &items);
    }
    if (st == TR_OK) {
        *out = cdyn_value_seq_list(VK_TUPLE, items);
        st = *out ? TR_OK : TR_ERROR;
    }
    Py_XDECREF(name);
    Py_XDECREF(view);
    Py_XDECREF(items);
    return st;
}

/* __post_init__(): the fields that are not None become items, in field order. */
static tr_status
mo_post_init(cdyn_tx *tx, PyObject *self)
{
    PyObject *names = NULL, *first = NULL, *vals = NULL;
    tr_status st = field_names(tx, cdyn_user_type(self), &names);
    int others_none = 1;
    Py_ssize_t n;
    if (st != TR_OK) {
        return st;
    }
    n = PyList_GET_SIZE(names);
    if ((vals = PyList_New(n)) == NULL) {
        Py_DECREF(names);
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; st == TR_OK && i < n; i++) {
        PyObject *a = NULL;
        st = mo_field(tx, self, PyList_GET_ITEM(names, i), &a);
        PyList_SET_ITEM(vals, i, a != NULL ? a : Py_NewRef(Py_None));   /* None: unset */
        others_none &= i == 0 || a == NULL || cdyn_v_is_none(a);
    }
    first = st == TR_OK && n ? PyList_GET_ITEM(vals, 0) : NULL;
    first = first == Py_None ? NULL : first;
    if (st != TR_OK) {
        ;
    }
    else if (first == NULL) {
        st = cdyn_tx_unsupported(tx, "ModelOutput without fields or a first attribute");
    }
    else if (others_none && V(first)->kind != VK_TENSOR) {
        /* a first field that is not a tensor: None adds nothing; an iterator of pairs (or
           anything else) is not modelled */
        if (!cdyn_v_is_none(first)) {
            st = cdyn_tx_unsupported(tx, "ModelOutput whose only field is not a tensor");
        }
    }
    else {
        for (Py_ssize_t i = 0; st == TR_OK && i < n; i++) {
            PyObject *a = PyList_GET_ITEM(vals, i), *k = NULL;
            if (a == Py_None || cdyn_v_is_none(a)) {
                continue;
            }
            k = cdyn_value_const(PyList_GET_ITEM(names, i));
            st = k ? mo_setitem(tx, self, k, a) : TR_ERROR;
            Py_XDECREF(k);
        }
    }
    Py_DECREF(names);
    Py_DECREF(vals);
    return st;
}

/* The items of a ModelOutput read from the frame (OBJECT with a source), as a new DICT
 * value: its fields that are not None, in field order, read (and guarded) as attributes.
 * At trace time the object must hold exactly those items, each the attribute itself (as
 * transformers keeps it); its number of items is guarded (LENGTH_CHECK). */
static tr_status
mo_read_items(cdyn_tx *tx, PyObject *self, PyObject **out)
{
    PyObject *obj = V(self)->u.obj.obj, *names = NULL, *keys = NULL, *vals = NULL;
    Py_ssize_t n;
    tr_status st;
    if (V(self)->source == NULL || !PyDict_Check(obj)) {
        return cdyn_tx_unsupported(tx, "items of a ModelOutput without a source");
    }
    if (V(self)->bits & (OBJ_ITEMS_MUTATED | OBJ_ATTRS_STORED | OBJ_MUTATED)) {
        /* changed before its items were read: they are not known any more */
        return cdyn_tx_unsupported(tx, "items of a ModelOutput changed while tracing");
    }
    st = field_names(tx, Py_TYPE(obj), &names);
    if (st != TR_OK) {
        return st;
    }
    keys = PyList_New(0);
    vals = PyList_New(0);
    st = keys && vals ? TR_OK : TR_ERROR;
    n = PyList_GET_SIZE(names);
    for (Py_ssize_t i = 0; st == TR_OK && i < n; i++) {
        PyObject *k = PyList_GET_ITEM(names, i), *a = PyObject_GetAttr(obj, k), *v = NULL;
        PyObject *item = a ? PyDict_GetItemWithError(obj, k) : NULL;   /* dict storage */
        if (a == NULL || PyErr_Occurred() || (a == Py_None) != (item == NULL) ||
            (item != NULL && item != a)) {
            st = cdyn_tx_unsupported(tx, "a ModelOutput whose items are not its fields");
        }
        Py_XDECREF(a);
        if (st == TR_OK) {
            st = cdyn_v_getattr(tx, self, k, &v);   /* guarded through its source */
        }
        if (st == TR_OK && item != NULL &&
            (PyList_Append(keys, k) < 0 || PyList_Append(vals, v) < 0)) {
            st = TR_ERROR;
        }
        Py_XDECREF(v);
    }
    if (st == TR_OK && PyList_GET_SIZE(keys) != PyDict_GET_SIZE(obj)) {
        st = cdyn_tx_unsupported(tx, "a ModelOutput with items that are not fields");
    }
    if (st == TR_OK && cdyn_guards_add_len(tx->guards, V(self)->source, PyDict_GET_SIZE(obj)) < 0) {
        st = TR_ERROR;
    }
    if (st == TR_OK) {
        *out = cdyn_value_dict(keys, vals);
        st = *out ? TR_OK : TR_ERROR;
    }
    Py_XDECREF(names);
    Py_XDECREF(keys);
    Py_XDECREF(vals);
    return st;
}

/* 1 when v is a ModelOutput read from the frame whose items can be mirrored. */
static int
mo_of_frame(PyObject *v)
{
    return V(v)->kind == VK_OBJECT && V(v)->source != NULL && PyDict_Check(V(v)->u.obj.obj) &&
           model_output_method(_PyType_Lookup(Py_TYPE(V(v)->u.obj.obj), cdyn_U.s_getitem)) ==
               MO_GETITEM;
}

tr_status
cdyn_mo_items(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    PyObject *d = NULL;
    tr_status st;
    if (!mo_of_frame(v)) {
        return TR_NOTIMPL;
    }
    if (V(v)->u.dobj.items != NULL) {
        *out = Py_NewRef(V(v)->u.dobj.items);
        return TR_OK;
    }
    st = mo_read_items(tx, v, &d);
    if (st != TR_OK) {
        return st;
    }
    /* the mirror: rebuilt as the object itself, changed only along with the slot calls
       replayed on it (a cache of what the object holds: reading it changes nothing, so it
       is no mutation, and a rollback may keep it) */
    V(d)->source = Py_NewRef(V(v)->source);
    V(d)->u.dict.type = PyODict_Check(V(v)->u.obj.obj) ? Py_NewRef(cdyn_U.odict_type) : NULL;
    V(d)->bits |= DICT_MIRROR;
    V(v)->u.dobj.items = Py_NewRef(d);
    *out = d;
    return TR_OK;
}

/* ___view_owner(view): the dict a dict view (keys/values/items, of a dict or an
 * OrderedDict) looks at, or None for anything else (it reads a guard's source). */
static PyObject *
view_owner(PyObject *Py_UNUSED(self), PyObject *view)
{
    if (PyObject_TypeCheck(view, &PyDictKeys_Type) || PyObject_TypeCheck(view, &PyDictValues_Type) ||
        PyObject_TypeCheck(view, &PyDictItems_Type)) {
        PyObject *d = cdyn_dict_view_dict(view);
        return Py_NewRef(d != NULL ? d : Py_None);
    }
    Py_RETURN_NONE;
}

static PyMethodDef view_owner_def = {"___view_owner", view_owner, METH_O, NULL};

tr_status
cdyn_tx_wrap_dict_view(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    static const char *const methods[] = {"keys", "values", "items"};
    static PyObject *owner_fn;
    PyObject *owner = NULL, *osrc = NULL, *ov = NULL, *items = NULL, *name = NULL, *probe;
    int is_mo, which = PyObject_TypeCheck(obj, &PyDictKeys_Type) ? 0
                : PyObject_TypeCheck(obj, &PyDictValues_Type) ? 1
                : PyObject_TypeCheck(obj, &PyDictItems_Type) ? 2 : -1;
    tr_status st = TR_NOTIMPL;
    if (which >= 0) {
        owner = cdyn_dict_view_dict(obj);
    }
    if (owner == NULL || !PyDict_Check(owner)) {
        return TR_NOTIMPL;
    }
    is_mo = model_output_method(_PyType_Lookup(Py_TYPE(owner), cdyn_U.s_getitem)) == MO_GETITEM;
    /* only the view the object's own method makes (not dict.keys(o) of an OrderedDict) */
    probe = PyObject_CallMethod(owner, methods[which], NULL);
    if (probe == NULL || Py_TYPE(probe) != Py_TYPE(obj)) {
        Py_XDECREF(probe);
        PyErr_Clear();
        return TR_NOTIMPL;
    }
    Py_DECREF(probe);
    if (owner_fn == NULL && (owner_fn = PyCFunction_New(&view_owner_def, NULL)) == NULL) {
        return TR_ERROR;
    }
    st = cdyn_guards_add_type(tx->guards, source, Py_TYPE(obj)) < 0 ? TR_ERROR : TR_OK;
    osrc = st == TR_OK ? cdyn_source_call(owner_fn, source, "___view_owner") : NULL;
    st = osrc != NULL ? cdyn_tx_wrap_real(tx, owner, osrc, &ov) : TR_ERROR;   /* its object */
    if (st == TR_OK && is_mo) {
        st = cdyn_mo_items(tx, ov, &items);
        st = st == TR_NOTIMPL ? cdyn_tx_unsupported(tx, "a view of %S", ov) : st;
    }
    else if (st == TR_OK) {
        items = Py_NewRef(ov);   /* a dict (or subclass): its own method makes the view */
    }
    if (st == TR_OK) {
        name = PyUnicode_FromString(methods[which]);
        st = name ? cdyn_v_call_method(tx, NULL, items, name, NULL, 0, NULL, out) : TR_ERROR;
    }
    Py_XDECREF(osrc);
    Py_XDECREF(ov);
    Py_XDECREF(items);
    Py_XDECREF(name);
    return st;
}

/* o[k] and o.to_tuple() on a ModelOutput read from the frame. */
static tr_status
mo_input_read(cdyn_tx *tx, cdyn_fs *fs, int which, PyObject *self, PyObject *key, PyObject **out)
{
    PyObject *items = NULL, *name = NULL, *view = NULL, *lst = NULL, *t = NULL;
    tr_status st = cdyn_mo_items(tx, self, &items);
    if (st == TR_NOTIMPL) {
        st = mo_read_items(tx, self, &items);   /* (reports why it is not supported) */
    }
    if (st != TR_OK) {
        return st;
    }
    if (which == MO_GETITEM && V(key)->kind == VK_CONST && PyUnicode_Check(V(key)->u.cnst.value)) {
        st = cdyn_v_subscr(tx, items, key, out);
        Py_DECREF(items);
        return st;
    }
    name = PyUnicode_FromString("values");
    st = name ? cdyn_v_call_method(tx, fs, items, name, NULL, 0, NULL, &view) : TR_ERROR;
    if (st == TR_OK) {
        st = cdyn_v_unpack(tx, view, &lst);
    }
    if (st == TR_OK && (t = cdyn_value_seq_list(VK_TUPLE, lst)) == NULL) {
        st = TR_ERROR;
    }
    if (st == TR_OK) {
        st = which == MO_GETITEM ? cdyn_v_subscr(tx, t, key, out) : (*out = Py_NewRef(t), TR_OK);
    }
    Py_XDECREF(items);
    Py_XDECREF(name);
    Py_XDECREF(view);
    Py_XDECREF(lst);
    Py_XDECREF(t);
    return st;
}

/* A ModelOutput method (which) called on self with args. */
static tr_status
model_output_call(cdyn_tx *tx, cdyn_fs *fs, int which, PyObject *self, PyObject *const *args,
                  Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    static const Py_ssize_t arity[MO_COUNT] = {2, 2, 1, 0, 0};
    PyObject *names = NULL, *t = NULL;
    tr_status st = TR_OK;
    int is_field;
    if (self != NULL && V(self)->kind == VK_OBJECT && kwnames == NULL &&
        nargs == arity[which] && (which == MO_GETITEM || which == MO_TO_TUPLE) &&
        model_output_method(_PyType_Lookup(Py_TYPE(V(self)->u.obj.obj), cdyn_U.s_getitem)) ==
            MO_GETITEM) {
        return mo_input_read(tx, fs, which, self, nargs ? args[0] : NULL, out);
    }
    if (self != NULL && V(self)->kind == VK_OBJECT && V(self)->source != NULL &&
        kwnames == NULL && nargs == arity[which] &&
        (which == MO_SETATTR || which == MO_SETITEM || which == MO_POST_INIT)) {
        ;   /* an object of the frame: its stores are side effects (mo_item_store) */
    }
    else if (self == NULL || V(self)->kind != VK_NEWOBJ || V(self)->u.uobj.base == NULL ||
             kwnames != NULL || nargs != arity[which]) {
        return cdyn_tx_unsupported(tx, "ModelOutput method on %S", self ? self : Py_None);
    }
    switch (which) {
    case MO_GETITEM:
        if (V(args[0])->kind == VK_CONST && PyUnicode_Check(V(args[0])->u.cnst.value)) {
            return cdyn_v_subscr(tx, V(self)->u.uobj.base, args[0], out);
        }
        st = mo_to_tuple(tx, fs, self, &t);
        if (st == TR_OK) {
            st = cdyn_v_subscr(tx, t, args[0], out);
        }
        Py_XDECREF(t);
        return st;
    case MO_TO_TUPLE:
        return mo_to_tuple(tx, fs, self, out);
    case MO_SETITEM:
        st = mo_setitem(tx, self, args[0], args[1]);
        break;
    case MO_SETATTR:
        if (V(args[0])->kind != VK_CONST || !PyUnicode_Check(V(args[0])->u.cnst.value)) {
            return cdyn_tx_unsupported(tx, "ModelOutput attribute with a non-constant name");
        }
        st = field_names(tx, cdyn_user_type(self), &names);
        is_field = st == TR_OK ? PySequence_Contains(names, V(args[0])->u.cnst.value) : 0;
        Py_XDECREF(names);
        if (is_field < 0) {
            return TR_ERROR;
        }
        if (st == TR_OK && is_field && !cdyn_v_is_none(args[1])) {
            st = mo_item_store(tx, self, args[0], args[1]);
        }
        if (st == TR_OK) {
            st = cdyn_uobj_generic_setattr(tx, self, V(args[0])->u.cnst.value, args[1]);
        }
        break;
    default:
        st = mo_post_init(tx, self);
        break;
    }
    *out = st == TR_OK ? cdyn_value_const(Py_None) : NULL;
    return st == TR_OK && *out == NULL ? TR_ERROR : st;
}

tr_status
cdyn_dataclass_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *self,
                    PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out,
                    int *handled)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *cls;
    *handled = 1;
    if (self != NULL && PyFunction_Check(fn) && V(self)->kind == VK_TUPLE &&
        V(self)->u.seq.nt_type != NULL) {
        return nt_method_call(tx, fn, self, args, nargs, kwnames, out);
    }
    if (model_output_method(fn) >= 0) {
        return model_output_call(tx, fs, model_output_method(fn), self, args, nargs, kwnames,
                                 out);
    }
    if (self != NULL && PyFunction_Check(fn) && V(self)->kind == VK_CLASS) {
        /* NT._make(iterable) */
        return nargs == 1 && nkw == 0 ? cdyn_namedtuple_new(tx, self, args, 1, out)
                                      : cdyn_tx_unsupported(tx, "_make() with these arguments");
    }
    if (fn == cdyn_U.dc_fields || fn == cdyn_U.dc_is_dataclass) {
        if (nargs != 1 || nkw != 0) {
            return cdyn_tx_unsupported(tx, "%R with %zd arguments", fn, nargs);
        }
        if (fn == cdyn_U.dc_fields) {
            return dc_fields(tx, args[0], out);
        }
        cls = class_of(args[0]);
        if (cls == NULL) {
            return cdyn_tx_unsupported(tx, "is_dataclass() of %S", args[0]);
        }
        *out = cdyn_value_bool(PyObject_HasAttr(cls, cdyn_U.dc_fields_attr));
        return *out ? TR_OK : TR_ERROR;
    }
    if (fn == cdyn_U.dc_replace) {
        if (nargs - nkw != 1) {
            return cdyn_tx_unsupported(tx, "dataclasses.replace() with %zd positional arguments",
                                       nargs - nkw);
        }
        return dc_replace(tx, fs, args[0], args + 1, kwnames, out);
    }
    *handled = 0;
    return TR_OK;
}
