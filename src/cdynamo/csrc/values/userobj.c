/* values/userobj.c: the instance protocol of user objects: objects read from the frame
 * (OBJECT) and objects made while tracing (NEWOBJ).
 *
 * Attributes follow Python's lookup: data descriptors of the type first (a property's
 * getter and setter are inlined), then the instance's attributes (read through the
 * object's source, or the symbolic attributes of a NEWOBJ), then the type's attributes
 * (functions bind as methods, classmethods to the class, builtin slot functions as OBJFN),
 * then __getattr__. Special methods are looked up on the type and inlined when they are
 * Python functions: __getitem__, __setitem__, __delitem__, __contains__, __len__,
 * __iter__, __bool__, __call__, __enter__/__exit__, the binary, comparison and unary
 * operators (with NotImplemented and the reflected forms). A dict subclass made while
 * tracing keeps its items in a DICT value: the builtin slots it does not override act on
 * that value. Objects of the frame whose type overrides __setattr__, __delattr__ or
 * __getattribute__ have those inlined (the custom __getattribute__ once the trace stored into
 * the object; before, reads go through the real protocol and are guarded through sources);
 * the object's slot functions they reach (object.__setattr__, super().__setitem__ of a dict
 * subclass, object.__getattribute__) are side effects and generic reads (see "the generic
 * protocol" below). A mappingproxy of the frame answers len() and constant subscripts.
 * Anything else is unsupported (a graph break runs it in Python). */
#include "user.h"
#include "../codegen.h"
#include "../hook.h"
#include "../trace_rules.h"

enum { DUNDER_DEFAULT = 0, DUNDER_PYTHON = 1, DUNDER_OTHER = 2 };

/* How type t defines special method `name`: object's default (or not at all), a Python
 * function, or anything else (a builtin slot); *descr gets what was found (borrowed). */
static int
dunder_kind(PyTypeObject *t, PyObject *name, PyObject **descr)
{
    PyObject *d = _PyType_Lookup(t, name);
    *descr = d;
    if (d == NULL || d == _PyType_Lookup(&PyBaseObject_Type, name)) {
        return DUNDER_DEFAULT;
    }
    return PyFunction_Check(d) ? DUNDER_PYTHON : DUNDER_OTHER;
}

/* 1 when attribute reads on instances of t are the generic ones (object's or dict's
 * __getattribute__, PyObject_GenericGetAttr). */
static int
generic_getattribute(PyTypeObject *t)
{
    PyObject *d = _PyType_Lookup(t, cdyn_U.s_getattribute);
    return d == cdyn_U.object_getattribute ||
           (d != NULL && Py_TYPE(d) == &PyWrapperDescr_Type &&
            ((PyWrapperDescrObject *)d)->d_wrapped == (void *)PyObject_GenericGetAttr);
}

/* The DICT value holding the items of a dict subclass made while tracing, when the type
 * does not override `name` with a Python function (borrowed), else NULL. */
static PyObject *
builtin_base(PyObject *v, PyObject *name)
{
    PyObject *d;
    if (V(v)->kind != VK_NEWOBJ || V(v)->u.uobj.base == NULL) {
        return NULL;
    }
    d = _PyType_Lookup(cdyn_user_type(v), name);
    return d != NULL && !PyFunction_Check(d) ? V(v)->u.uobj.base : NULL;
}

/* 1 when the items of obj, a list or tuple subclass's instance, are read as its builtin
 * base reads them: iteration, subscription and length are the base's (transformers'
 * LogitsProcessorList, StoppingCriteriaList). */
static int
plain_sequence_protocol(PyObject *obj)
{
    PyTypeObject *t = Py_TYPE(obj), *base = PyList_Check(obj) ? &PyList_Type : &PyTuple_Type;
    PyObject *names[3] = {cdyn_U.s_iter, cdyn_U.s_len, cdyn_U.s_getitem};
    for (int i = 0; i < 3; i++) {
        if (_PyType_Lookup(t, names[i]) != _PyType_Lookup(base, names[i])) {
            return 0;
        }
    }
    return 1;
}

/* 1 when the items of obj, a dict subclass's instance, are read as its builtin base (dict
 * or OrderedDict) reads them: iteration and subscription are the base's, and no class of
 * its MRO has __missing__ (defaultdict, Counter). */
static int
plain_item_protocol(PyObject *obj)
{
    PyTypeObject *t = Py_TYPE(obj);
    PyTypeObject *base = PyODict_Check(obj) ? (PyTypeObject *)cdyn_U.odict_type : &PyDict_Type;
    static const char *const names[] = {"__iter__", "__getitem__", NULL};
    for (int i = 0; names[i] != NULL; i++) {
        PyObject *n = PyUnicode_InternFromString(names[i]);
        int same = n != NULL && _PyType_Lookup(t, n) == _PyType_Lookup(base, n);
        Py_XDECREF(n);
        if (!same) {
            PyErr_Clear();
            return 0;
        }
    }
    return PyObject_HasAttrString((PyObject *)t, "__missing__") == 0;
}

/* The lazy input container d (stolen) read now and kept as the mirror of the items of the
 * OBJECT v: *out a new reference to it. */
static tr_status
keep_mirror(cdyn_tx *tx, PyObject *v, PyObject *d, PyObject **out)
{
    tr_status st = cdyn_tx_materialize(tx, d);
    if (st != TR_OK) {
        Py_DECREF(d);
        return st;
    }
    V(v)->u.dobj.items = Py_NewRef(d);
    *out = d;
    return TR_OK;
}

static tr_status copy_mirror(cdyn_tx *tx, PyObject *v, PyObject **out);

tr_status
cdyn_uobj_items(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    PyObject *obj, *d;
    tr_status st = cdyn_mo_items(tx, v, out);
    if (st != TR_NOTIMPL) {
        return st;
    }
    if (V(v)->kind != VK_OBJECT || V(v)->source == NULL ||
        !(PyDict_Check(V(v)->u.obj.obj) || PyList_Check(V(v)->u.obj.obj) ||
          PyTuple_Check(V(v)->u.obj.obj))) {
        return TR_NOTIMPL;
    }
    obj = V(v)->u.obj.obj;
    if (V(v)->u.dobj.items != NULL) {
        *out = Py_NewRef(V(v)->u.dobj.items);
        return TR_OK;
    }
    if (!PyDict_Check(obj)) {
        /* a list / tuple subclass: an input list/tuple at the object's source (its length
           guarded, items by ITEM sources), read only (a mutating method is not traced) */
        if (!plain_sequence_protocol(obj)) {
            return copy_mirror(tx, v, out);
        }
        d = cdyn_value_alloc(PyList_Check(obj) ? VK_LIST : VK_TUPLE, V(v)->source);
        if (d == NULL) {
            return TR_ERROR;
        }
        V(d)->bits = SEQ_LAZY;
        V(d)->u.seq.real = Py_NewRef(obj);
        return keep_mirror(tx, v, d, out);
    }
    if (!plain_item_protocol(obj)) {
        return TR_NOTIMPL;
    }
    if (V(v)->bits & OBJ_ITEMS_MUTATED) {
        return cdyn_tx_unsupported(tx, "items of %S changed while tracing", v);
    }
    /* an input dict at the object's source (DICT_KEYS guard, values by ITEM sources), never
       written back: item stores are replayed on the object and change it alike */
    d = cdyn_value_alloc(VK_DICT, V(v)->source);
    if (d == NULL) {
        return TR_ERROR;
    }
    V(d)->bits = SEQ_LAZY | DICT_MIRROR;
    V(d)->u.dict.real = Py_NewRef(obj);
    V(d)->u.dict.type = PyODict_Check(obj) ? Py_NewRef(cdyn_U.odict_type) : NULL;
    return keep_mirror(tx, v, d, out);
}

tr_status
cdyn_dict_subclass_items(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    tr_status st;
    if (cdyn_newobj_has_items(v) && V(V(v)->u.uobj.base)->kind == VK_DICT) {
        *out = Py_NewRef(V(v)->u.uobj.base);
        return TR_OK;
    }
    st = V(v)->kind == VK_OBJECT && PyDict_Check(V(v)->u.obj.obj) ? cdyn_uobj_items(tx, v, out)
                                                                  : TR_NOTIMPL;
    if (st == TR_OK && V(*out)->kind != VK_DICT) {
        Py_CLEAR(*out);
        st = TR_NOTIMPL;
    }
    return st == TR_NOTIMPL ? cdyn_tx_unsupported(tx, "the items of %S (a dict subclass)", v)
                            : st;
}

/* ___seq_items(obj): the items of a list / tuple (subclass) instance as the base type holds
 * them, a new plain list / tuple (no override of the subclass runs); a guard's source. */
static PyObject *
seq_items(PyObject *Py_UNUSED(self), PyObject *obj)
{
    if (PyList_Check(obj)) {
        return PyList_GetSlice(obj, 0, PyList_GET_SIZE(obj));
    }
    if (PyTuple_Check(obj)) {
        return PyTuple_GetSlice(obj, 0, PyTuple_GET_SIZE(obj));
    }
    PyErr_Format(PyExc_TypeError, "___seq_items: %.100s is not a list or tuple",
                 Py_TYPE(obj)->tp_name);
    return NULL;
}

static PyMethodDef seq_items_def = {"___seq_items", seq_items, METH_O, NULL};

tr_status
cdyn_wrap_seq_copy(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    static PyObject *fn;
    PyObject *copy = NULL, *src = NULL, *d;
    tr_status st = TR_ERROR;
    if (fn == NULL && (fn = PyCFunction_New(&seq_items_def, NULL)) == NULL) {
        return TR_ERROR;
    }
    copy = seq_items(NULL, obj);
    src = copy ? cdyn_source_call(fn, source, "___seq_items") : NULL;
    d = src ? cdyn_value_alloc(PyList_Check(obj) ? VK_LIST : VK_TUPLE, src) : NULL;
    if (d != NULL) {
        V(d)->bits = SEQ_LAZY;
        V(d)->u.seq.real = Py_NewRef(copy);
        st = cdyn_tx_materialize(tx, d);   /* read now, under the copy's source */
    }
    if (st == TR_OK) {
        Py_SETREF(V(d)->source, Py_NewRef(source));
        *out = d;
    }
    else {
        Py_XDECREF(d);
    }
    Py_XDECREF(copy);
    Py_XDECREF(src);
    return st;
}

int
cdyn_seq_protocol_in_python(PyObject *obj)
{
    PyObject *names[3] = {cdyn_U.s_iter, cdyn_U.s_len, cdyn_U.s_getitem};
    for (int i = 0; i < 3; i++) {
        PyObject *d = _PyType_Lookup(Py_TYPE(obj), names[i]);
        if (d != NULL && PyFunction_Check(d)) {
            return 1;
        }
    }
    return 0;
}

/* The mirror of the items of OBJECT v, a list / tuple subclass's instance whose class
 * overrides __iter__, __len__ or __getitem__ (cdyn_wrap_seq_copy), standing for the object
 * itself (its source: a list's write-back is `obj[:] = items`). Only while the trace has
 * not changed the object. */
static tr_status
copy_mirror(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    PyObject *d = NULL;
    tr_status st;
    if (V(v)->bits & (OBJ_MUTATED | OBJ_ITEMS_MUTATED)) {
        return cdyn_tx_unsupported(tx, "the items of %S after a store into it", v);
    }
    st = cdyn_wrap_seq_copy(tx, V(v)->u.obj.obj, V(v)->source, &d);
    if (st != TR_OK) {
        return st;
    }
    V(v)->u.dobj.items = Py_NewRef(d);
    *out = d;
    return TR_OK;
}

/* The mirror of the items of an OBJECT of the frame (a ModelOutput: cdyn_mo_items; a dict,
 * list or tuple subclass's instance: cdyn_uobj_items), to read or change them with the
 * builtin's own `name` (its type does not override it with a Python function): *out new;
 * TR_NOTIMPL for any other value. */
static tr_status
mirror_for(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *d;
    if (V(v)->kind != VK_OBJECT) {
        return TR_NOTIMPL;
    }
    d = _PyType_Lookup(cdyn_user_type(v), name);
    if (d == NULL || PyFunction_Check(d)) {
        return TR_NOTIMPL;
    }
    return cdyn_uobj_items(tx, v, out);
}

/* fn(self, *args) for a Python function fn found on self's type: modelled natively when
 * the family knows it (cdyn_user_native_method), else inlined. */
static tr_status
call_type_function(cdyn_tx *tx, PyObject *fn, PyObject *self, PyObject *const *args,
                   Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyObject *m;
    tr_status st;
    if (!cdyn_user_native_method(fn)) {
        return cdyn_tx_inline_function(tx, fn, NULL, self, args, nargs, kwnames, out);
    }
    m = cdyn_objfn_new(fn, self);
    st = m ? cdyn_objfn_call(tx, NULL, m, args, nargs, kwnames, out) : TR_ERROR;
    Py_XDECREF(m);
    return st;
}

tr_status
cdyn_uobj_call_dunder(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *const *args,
                      Py_ssize_t nargs, PyObject **out, int *found)
{
    PyObject *d = _PyType_Lookup(cdyn_user_type(v), name);
    tr_status st;
    *found = d != NULL && PyFunction_Check(d);
    if (!*found) {
        return TR_OK;
    }
    st = cdyn_uobj_guard_type_member(tx, v, name);
    return st != TR_OK ? st : call_type_function(tx, d, v, args, nargs, NULL, out);
}

/* fn(self, *args) for a Python function fn (borrowed), or for a builtin with a polyfill (a C
 * property getter such as ProcessGroup.group_name's: cdynamo.polyfills.distributed) that
 * polyfill, else unsupported. */
static tr_status
inline_on(cdyn_tx *tx, PyObject *fn, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
          const char *what, PyObject **out)
{
    PyObject *pf = fn != NULL && PyCFunction_Check(fn) ? cdyn_polyfill_of(fn) : NULL;
    if (pf != NULL && PyFunction_Check(pf)) {
        return call_type_function(tx, pf, self, args, nargs, NULL, out);
    }
    if (fn == NULL || !PyFunction_Check(fn)) {
        return cdyn_tx_unsupported(tx, "%s of %S is not a Python function", what, self);
    }
    return call_type_function(tx, fn, self, args, nargs, NULL, out);
}

/* The getter or setter (which: "fget"/"fset") of a property, a new reference (None when
 * missing). */
static PyObject *
property_part(PyObject *prop, const char *which)
{
    return PyObject_GetAttrString(prop, which);
}

static tr_status inline_member(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *descr,
                               const char *part, const char *what, PyObject **out);

/* ---- guards on what a class defines ----------------------------------------------------------- */

PyObject *
cdyn_uobj_class_source(PyObject *v)
{
    PyObject *cls = NULL, *src = NULL;
    switch (V(v)->kind) {
    case VK_CLASS:
        cls = V(v)->u.obj.obj;
        src = Py_XNewRef(V(v)->source);
        break;
    case VK_NEWOBJ:
        cls = cdyn_v_real(V(v)->u.uobj.cls);
        src = Py_XNewRef(V(V(v)->u.uobj.cls)->source);
        break;
    case VK_OBJECT:
        cls = (PyObject *)Py_TYPE(V(v)->u.obj.obj);
        src = V(v)->source ? cdyn_source_attr(V(v)->source, cdyn_U.s_class) : NULL;
        PyErr_Clear();   /* (a failed source is no source: the caller stays unguarded) */
        break;
    default:
        return NULL;
    }
    if (cls == NULL || cdyn_module_startswith(cls, "torch")) {
        Py_CLEAR(src);
    }
    return src;
}

tr_status
cdyn_uobj_guard_member(cdyn_tx *tx, PyObject *cls_src, PyTypeObject *cls, PyObject *name)
{
    PyObject *real = NULL, *src = NULL, *fsrc = NULL;
    int r = 0;
    if (cls_src == NULL) {
        return TR_OK;
    }
    real = PyObject_GetAttr((PyObject *)cls, name);
    if (real == NULL) {
        PyErr_Clear();
        return cdyn_tx_unsupported(tx, "class attribute %U of %s", name, cls->tp_name);
    }
    src = cdyn_source_attr(cls_src, name);
    if (src == NULL) {
        r = -1;
    }
    else if (PyFunction_Check(real)) {
        r = cdyn_guards_add_id(tx->guards, src, real, 1);
    }
    else if (PyMethod_Check(real) && PyMethod_GET_SELF(real) == (PyObject *)cls &&
             PyFunction_Check(PyMethod_GET_FUNCTION(real))) {
        /* a classmethod: bound anew at each read; its function is what stays */
        fsrc = cdyn_source_attr(src, cdyn_U.s_func);
        r = fsrc ? cdyn_guards_add_id(tx->guards, fsrc, PyMethod_GET_FUNCTION(real), 1) : -1;
    }
    else if (cdyn_is_constant(real)) {
        r = cdyn_guards_add_equals(tx->guards, src, real);
    }
    else if (real == _PyType_Lookup(cls, name)) {
        r = cdyn_guards_add_id(tx->guards, src, real, 0);   /* a property, a cached_property */
    }
    Py_XDECREF(fsrc);
    Py_XDECREF(src);
    Py_DECREF(real);
    return r < 0 ? TR_ERROR : TR_OK;
}

tr_status
cdyn_uobj_guard_type_member(cdyn_tx *tx, PyObject *v, PyObject *name)
{
    PyObject *src = cdyn_uobj_class_source(v);
    tr_status st = TR_OK;
    if (src != NULL) {
        st = cdyn_uobj_guard_member(tx, src,
                                    V(v)->kind == VK_CLASS ? (PyTypeObject *)V(v)->u.obj.obj
                                                           : cdyn_user_type(v),
                                    name);
        Py_DECREF(src);
    }
    return st;
}

/* descr.<part> (a property's "fget", a cached_property's "func") inlined on v, with the
 * class member `name` pinned through the class (not run at trace time, not guarded as a
 * value). */
static tr_status
inline_member(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *descr, const char *part,
              const char *what, PyObject **out)
{
    PyObject *f;
    tr_status st = cdyn_uobj_guard_type_member(tx, v, name);
    if (st != TR_OK) {
        return st;
    }
    f = PyObject_GetAttrString(descr, part);
    st = f ? inline_on(tx, f, v, NULL, 0, what, out) : TR_ERROR;
    Py_XDECREF(f);
    return st;
}

/* ---- binding what the type defines ----------------------------------------------------------- */

/* A non-data descriptor of a Python class (one defining __get__ in Python, e.g.
 * torch.distributions' lazy_property) read on an instance self: its __get__(descr, self,
 * type(self)) inlined; the descriptor object is read through a constant source (its
 * attributes that __get__ reads are guarded). Any other
 * descriptor is unsupported. */
static tr_status
user_descriptor_get(cdyn_tx *tx, PyObject *self, PyObject *descr, PyObject *name, int on_class,
                    PyObject **out)
{
    PyTypeObject *dt = Py_TYPE(descr);
    PyObject *get = NULL, *src = NULL, *dv = NULL, *cv = NULL, *args[2];
    tr_status st;
    if (!on_class && (dt->tp_flags & Py_TPFLAGS_HEAPTYPE) && dt->tp_descr_set == NULL) {
        get = _PyType_Lookup(dt, cdyn_U.s_dunder_get);
    }
    if (get == NULL || !PyFunction_Check(get)) {
        return cdyn_tx_unsupported(tx, "attribute %U: a %s descriptor", name, dt->tp_name);
    }
    Py_INCREF(get);   /* _PyType_Lookup's reference is borrowed from the type's cache */
    src = cdyn_source_const(descr, name);   /* what __get__ reads of it is guarded */
    st = src == NULL ? TR_ERROR : cdyn_tx_wrap_real(tx, descr, src, &dv);
    if (st == TR_OK) {
        st = cdyn_user_class_value(tx, self, &cv);
    }
    if (st == TR_OK) {
        args[0] = self;
        args[1] = cv;
        st = cdyn_tx_inline_function(tx, get, NULL, dv, args, 2, NULL, out);
    }
    Py_XDECREF(cv);
    Py_XDECREF(dv);
    Py_XDECREF(src);
    Py_DECREF(get);
    return st;
}

tr_status
cdyn_uobj_bind(cdyn_tx *tx, PyObject *self, PyObject *clsv, PyObject *descr, PyObject *name,
               PyObject **out)
{
    PyTypeObject *dt = Py_TYPE(descr);
    int on_class = V(self)->kind == VK_CLASS;
    PyObject *f = NULL, *cv = NULL;
    tr_status st;
    if (clsv != NULL && dt->tp_descr_get != NULL &&
        (st = cdyn_uobj_guard_type_member(tx, clsv, name)) != TR_OK) {
        return st;   /* a method or descriptor of the class: pinned through its source */
    }
    if (PyFunction_Check(descr)) {
        *out = on_class ? cdyn_value_obj(VK_USERFN, descr, NULL)
               : cdyn_user_native_method(descr) ? cdyn_objfn_new(descr, self)
                                                : cdyn_value_method(descr, name, self);
        return *out ? TR_OK : TR_ERROR;
    }
    if (dt == &PyClassMethod_Type || dt == &PyStaticMethod_Type) {
        f = PyObject_GetAttrString(descr, "__func__");
        if (f == NULL) {
            return TR_ERROR;
        }
        if (!PyFunction_Check(f)) {
            st = cdyn_tx_unsupported(tx, "%U: a class/static method of a non-function", name);
        }
        else if (dt == &PyStaticMethod_Type) {
            st = cdyn_tx_wrap_real(tx, f, NULL, out);
        }
        else if ((st = on_class ? (cv = Py_NewRef(self), TR_OK)
                                : cdyn_user_class_value(tx, self, &cv)) == TR_OK) {
            *out = cdyn_value_method(f, name, cv);
            st = *out ? TR_OK : TR_ERROR;
        }
        Py_DECREF(f);
        Py_XDECREF(cv);
        return st;
    }
    if (dt == &PyProperty_Type && !on_class) {
        f = property_part(descr, "fget");
        st = f ? inline_on(tx, f, self, NULL, 0, "property getter", out) : TR_ERROR;
        Py_XDECREF(f);
        return st;
    }
    if (cdyn_objfn_known(descr)) {
        /* __new__ is static; other slot functions bind to an instance */
        int bind = !on_class && !PyCFunction_Check(descr);
        *out = cdyn_objfn_new(descr, bind ? self : NULL);
        return *out ? TR_OK : TR_ERROR;
    }
    if ((PyObject *)dt == cdyn_U.cached_property && V(self)->kind == VK_NEWOBJ) {
        /* functools.cached_property: its function runs once, the value is kept in the
           instance's __dict__ (read from there next time) */
        PyObject *an = PyObject_GetAttrString(descr, "attrname");
        f = an ? PyObject_GetAttrString(descr, "func") : NULL;
        st = f == NULL ? TR_ERROR
             : !PyFunction_Check(f) || !PyUnicode_Check(an)
                 ? cdyn_tx_unsupported(tx, "cached_property %U", name)
                 : call_type_function(tx, f, self, NULL, 0, NULL, out);
        if (st == TR_OK && (st = cdyn_newobj_store(tx, self, an, *out)) != TR_OK) {
            Py_CLEAR(*out);
        }
        Py_XDECREF(an);
        Py_XDECREF(f);
        return st;
    }
    if (dt->tp_descr_get != NULL) {
        return user_descriptor_get(tx, self, descr, name, on_class, out);
    }
    /* a plain class attribute: read through the class (guarded when it has a source) */
    if (clsv != NULL) {
        return cdyn_v_getattr(tx, clsv, name, out);
    }
    return cdyn_tx_wrap_real(tx, descr, NULL, out);
}

/* ---- attributes of objects read from the frame ------------------------------------------------- */

/* Attributes of an OBJECT without source that is fixed metadata (dataclass fields):
 * read unguarded; objects among them are trusted in turn. */
static tr_status
trusted_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *attr = PyObject_GetAttr(V(v)->u.obj.obj, name);
    tr_status st;
    if (attr == NULL) {
        return cdyn_tx_unsupported(tx, "attribute %U", name);
    }
    st = cdyn_tx_wrap_real(tx, attr, NULL, out);
    Py_DECREF(attr);
    if (st == TR_OK && V(*out)->kind == VK_OBJECT) {
        V(*out)->bits |= OBJ_TRUSTED;
    }
    return st;
}

/* 1 when the getter of property prop is Python code that trace_rules never traces (a
 * library's internals, e.g. numpy's iinfo.max): it is read at trace time as any attribute,
 * its value guarded through its source. */
static int
getter_is_library_code(PyObject *prop)
{
    PyObject *f = property_part(prop, "fget");
    int r = 0, rule;
    if (f == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (PyFunction_Check(f)) {
        rule = cdyn_code_trace_rule((PyCodeObject *)PyFunction_GET_CODE(f),
                                    PyFunction_GET_GLOBALS(f));
        r = rule == CDYN_RULE_SKIP || rule == CDYN_RULE_BREAK;
    }
    Py_DECREF(f);
    return r;
}

static tr_status inline_getattribute(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out);

/* A property read on an object of the frame whose type's __getattribute__ is a known
 * delegation to object's (transformers' configs; source.h cdyn_source_getattr_steps) that
 * reaches the property plainly for this object: the delegation pinned by guards (the
 * instance has no `_heterogeneity_spec`: HASATTR absent; name not in its `attribute_map`),
 * the overrides and the property pinned through the class, and the getter inlined as on a
 * type with object's lookup (no Python __getattribute__ or getter in the guards).
 * TR_NOTIMPL (nothing changed) when the delegation does not reach it plainly. */
static tr_status
delegated_property(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *descr, PyObject **out)
{
    PyObject *obj = V(v)->u.obj.obj, *am = NULL, *src = NULL, *f = NULL;
    int steps = cdyn_source_getattr_steps(Py_TYPE(obj)), has = 0;
    tr_status st = TR_NOTIMPL;
    if (steps <= 0 || V(v)->source == NULL || getter_is_library_code(descr) ||
        PyUnicode_CompareWithASCIIString(name, "attribute_map") == 0) {
        return TR_NOTIMPL;
    }
    if (steps & CDYN_GA_HETERO) {
        if ((has = PyObject_HasAttrString(obj, "_heterogeneity_spec")) != 0) {
            return TR_NOTIMPL;
        }
    }
    if (steps & CDYN_GA_ALIAS) {
        am = PyObject_GetAttrString(obj, "attribute_map");
        has = am != NULL && PyDict_Check(am) ? PyDict_Contains(am, name) : -1;
        Py_XDECREF(am);
        if (has != 0) {
            PyErr_Clear();
            return TR_NOTIMPL;
        }
    }
    st = cdyn_uobj_guard_type_member(tx, v, cdyn_U.s_getattribute);
    if (st == TR_OK && (steps & CDYN_GA_HETERO)) {
        src = PyUnicode_FromString("_heterogeneity_spec");
        PyObject *asrc = src ? cdyn_source_attr(V(v)->source, src) : NULL;
        st = asrc != NULL && cdyn_guards_add_hasattr(tx->guards, asrc, 0) == 0 ? TR_OK : TR_ERROR;
        Py_XDECREF(asrc);
        Py_CLEAR(src);
    }
    if (st == TR_OK && (steps & CDYN_GA_ALIAS)) {
        PyObject *key = PyUnicode_FromString("attribute_map");
        src = key ? cdyn_source_attr(V(v)->source, key) : NULL;
        st = src != NULL ? cdyn_guard_dict_has(tx, src, name, 0) : TR_ERROR;
        Py_XDECREF(key);
    }
    if (st == TR_OK) {
        st = cdyn_uobj_guard_type_member(tx, v, name);
    }
    if (st == TR_OK) {
        f = property_part(descr, "fget");
        st = f ? inline_on(tx, f, v, NULL, 0, "property getter", out) : TR_ERROR;
    }
    Py_XDECREF(f);
    Py_XDECREF(src);
    return st;
}

/* ---- the generic protocol on objects of the frame ---------------------------------------------
 * object.__setattr__ / object.__delattr__ on an object of the frame (an OBJECT with a source)
 * are side effects replayed after the graph by those same slot functions (EFF_CALL), so no
 * override of the type runs again; later reads in the trace see them (tx->by_source, keyed by
 * the attribute's source; a deletion by "del:" + that key). object.__getattribute__ on a type
 * that overrides __getattribute__ reads through a source that bypasses the override
 * (_glue.generic_attr_reader), so guards check what the trace read. */

/* The source of object.__getattribute__(v, name) for an OBJECT v with a source: <src>.name
 * when its type reads attributes generically, else generic_attr_reader(name)(<src>). New
 * reference; NULL with an exception. */
static PyObject *
generic_attr_source(PyObject *v, PyObject *name)
{
    PyObject *fn, *label, *src;
    if (generic_getattribute(cdyn_user_type(v))) {
        return cdyn_source_attr(V(v)->source, name);
    }
    fn = PyObject_CallMethod(cdyn_G.glue, "generic_attr_reader", "O", name);
    label = fn ? PyUnicode_FromFormat("object.__getattribute__.%U", name) : NULL;
    src = label ? cdyn_source_call(fn, V(v)->source, PyUnicode_AsUTF8(label)) : NULL;
    Py_XDECREF(fn);
    Py_XDECREF(label);
    return src;
}

/* The by_source key that marks attribute source src deleted while tracing (new str). */
static PyObject *
deleted_key(PyObject *src)
{
    return PyUnicode_FromFormat("del:%U", cdyn_source_repr(src));
}

/* Attribute `name` (source src) of OBJECT v when the trace deleted it: the class attribute
 * (bound to v) or unsupported; TR_NOTIMPL when it was not deleted. */
static tr_status
deleted_attr(cdyn_tx *tx, PyObject *v, PyObject *src, PyObject *name, PyObject **out)
{
    PyObject *key = deleted_key(src), *descr, *clsv = NULL;
    int gone;
    tr_status st;
    if (key == NULL) {
        return TR_ERROR;
    }
    gone = PyDict_Contains(tx->by_source, key);
    Py_DECREF(key);
    if (gone <= 0) {
        return gone < 0 ? TR_ERROR : TR_NOTIMPL;
    }
    descr = _PyType_Lookup(cdyn_user_type(v), name);
    if (descr == NULL) {
        return cdyn_tx_unsupported(tx, "attribute %U deleted while tracing", name);
    }
    st = cdyn_user_class_value(tx, v, &clsv);
    if (st == TR_OK) {
        st = cdyn_uobj_bind(tx, v, clsv, descr, name, out);
    }
    Py_XDECREF(clsv);
    return st;
}

/* The value the trace read for the instance __dict__ of OBJECT v (borrowed), through either
 * obj.__dict__ or object.__getattribute__(obj, "__dict__"); NULL when it was not read. Once
 * read, the attributes of v live in it: reads and stores go through it. */
static PyObject *
materialized_dict(cdyn_tx *tx, PyObject *v)
{
    PyObject *src, *d = NULL;
    for (int generic = 0; d == NULL && generic < 2 && V(v)->source != NULL; generic++) {
        src = generic ? generic_attr_source(v, cdyn_U.s_dict)
                      : cdyn_source_attr(V(v)->source, cdyn_U.s_dict);
        d = src ? PyDict_GetItemWithError(tx->by_source, cdyn_source_repr(src)) : NULL;
        Py_XDECREF(src);
        PyErr_Clear();
    }
    return d;
}

/* The key of tx->by_source under which the names of the attributes stored into or deleted
 * from OBJECT v while tracing are kept (a tuple of str): "stored:" + its source. New str. */
static PyObject *
stored_key(PyObject *v)
{
    return PyUnicode_FromFormat("stored:%U", cdyn_source_repr(V(v)->source));
}

/* The names stored into or deleted from OBJECT v while tracing (a tuple; borrowed), an
 * empty tuple when none, or NULL + exception. */
static PyObject *
stored_names(cdyn_tx *tx, PyObject *v)
{
    PyObject *key = stored_key(v), *l;
    if (key == NULL) {
        return NULL;
    }
    l = PyDict_GetItemWithError(tx->by_source, key);
    Py_DECREF(key);
    if (l == NULL && !PyErr_Occurred()) {
        static PyObject *empty;
        if (empty == NULL) {
            empty = PyTuple_New(0);
        }
        l = empty;
    }
    return l;
}

/* Note that attribute name of OBJECT v was stored or deleted (a new tuple written through
 * the undo log: a rollback forgets it). 0 / -1. */
static int
note_stored(cdyn_tx *tx, PyObject *v, PyObject *name)
{
    PyObject *l = stored_names(tx, v), *key = NULL, *more = NULL, *one = NULL;
    int has = l ? PySequence_Contains(l, name) : -1, r = -1;
    if (has != 0) {
        return has < 0 ? -1 : 0;
    }
    key = stored_key(v);
    one = PyTuple_Pack(1, name);
    more = one ? PySequence_Concat(l, one) : NULL;
    if (key != NULL && more != NULL) {
        r = cdyn_tx_memo_write(tx, key, more);
    }
    Py_XDECREF(key);
    Py_XDECREF(one);
    Py_XDECREF(more);
    return r;
}

/* obj.__dict__ (generic: object.__getattribute__(obj, "__dict__")) of OBJECT v after the trace
 * stored into its attributes: the real dict read through its source, with those stores and
 * deletions applied to it (its family then writes it back: the final contents). */
static tr_status
dict_after_stores(cdyn_tx *tx, PyObject *v, int generic, PyObject **out)
{
    PyObject *src = generic ? generic_attr_source(v, cdyn_U.s_dict)
                            : cdyn_source_attr(V(v)->source, cdyn_U.s_dict);
    PyObject *real = NULL, *names = NULL, *d = NULL;
    tr_status st = TR_ERROR;
    if (src == NULL || (real = PyObject_GenericGetAttr(V(v)->u.obj.obj, cdyn_U.s_dict)) == NULL ||
        (names = Py_XNewRef(stored_names(tx, v))) == NULL) {
        goto done;
    }
    if (!PyDict_CheckExact(real)) {
        st = cdyn_tx_unsupported(tx, "__dict__ of %S", v);
        goto done;
    }
    st = cdyn_tx_wrap_real(tx, real, src, &d);
    for (Py_ssize_t i = 0; st == TR_OK && i < PyTuple_GET_SIZE(names); i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i), *asrc = generic_attr_source(v, name);
        PyObject *hit = asrc ? PyDict_GetItemWithError(tx->by_source, cdyn_source_repr(asrc)) : NULL;
        PyObject *nv = asrc && !PyErr_Occurred() ? cdyn_value_const(name) : NULL;
        int has = 0;
        st = nv == NULL ? TR_ERROR
             : hit ? cdyn_v_store_subscr(tx, d, nv, hit) : cdyn_v_contains(tx, d, nv, &has);
        if (st == TR_OK && hit == NULL && has) {
            st = cdyn_v_delete_subscr(tx, d, nv);   /* deleted while tracing */
        }
        Py_XDECREF(nv);
        Py_XDECREF(asrc);
    }
    if (st == TR_OK) {
        *out = d;
        d = NULL;
    }
done:
    Py_XDECREF(src);
    Py_XDECREF(real);
    Py_XDECREF(names);
    Py_XDECREF(d);
    return st;
}

/* Attribute `name` of OBJECT v when its __dict__ was read into the trace (no data
 * descriptor of that name): the dict's item, else the class attribute. TR_NOTIMPL when the
 * __dict__ was not read. */
static tr_status
attr_from_dict(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *d = materialized_dict(tx, v), *nv, *descr, *clsv = NULL;
    int has = 0;
    tr_status st;
    if (d == NULL) {
        return TR_NOTIMPL;
    }
    if (PyUnicode_Compare(name, cdyn_U.s_dict) == 0) {
        *out = Py_NewRef(d);
        return TR_OK;
    }
    descr = _PyType_Lookup(cdyn_user_type(v), name);
    if (descr != NULL && Py_TYPE(descr)->tp_descr_set != NULL) {
        return TR_NOTIMPL;   /* a data descriptor (__class__, a property) comes first */
    }
    if (cdyn_v_python_type(d) != &PyDict_Type || (nv = cdyn_value_const(name)) == NULL) {
        return PyErr_Occurred() ? TR_ERROR : cdyn_tx_unsupported(tx, "__dict__ of %S", v);
    }
    st = cdyn_v_contains(tx, d, nv, &has);
    if (st == TR_OK && has) {
        st = cdyn_v_subscr(tx, d, nv, out);
    }
    else if (st == TR_OK) {
        /* neither in the (guarded) dict nor on the class: AttributeError, as Python */
        st = descr == NULL ? cdyn_tx_raise(tx, PyExc_AttributeError, &nv, 1)
                           : cdyn_user_class_value(tx, v, &clsv);
        if (st == TR_OK && descr != NULL) {
            st = cdyn_uobj_bind(tx, v, clsv, descr, name, out);
        }
    }
    Py_DECREF(nv);
    Py_XDECREF(clsv);
    return st;
}

/* A store (value) or deletion (NULL) of attribute name of OBJECT v whose __dict__ the trace
 * read: done on that dict (its family writes the real one back); TR_NOTIMPL when the
 * __dict__ was not read. */
static tr_status
store_into_dict(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    PyObject *d = materialized_dict(tx, v), *nv;
    tr_status st;
    if (d == NULL) {
        return TR_NOTIMPL;
    }
    if (cdyn_v_python_type(d) != &PyDict_Type) {
        return cdyn_tx_unsupported(tx, "store into %S whose __dict__ was read", v);
    }
    if ((nv = cdyn_value_const(name)) == NULL) {
        return TR_ERROR;
    }
    st = value ? cdyn_v_store_subscr(tx, d, nv, value) : cdyn_v_delete_subscr(tx, d, nv);
    Py_DECREF(nv);
    if (st == TR_OK) {
        cdyn_tx_mutated(tx, v);
        V(v)->bits |= OBJ_ATTRS_STORED;
    }
    return st;
}

/* Record object.__setattr__(v, name, value) (value NULL: object.__delattr__(v, name)) on an
 * OBJECT with a source: replayed by that slot function; later reads see it. */
static tr_status
generic_store_replayed(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    PyObject *src, *dkey = NULL, *ekey = NULL;
    int e;
    tr_status st = store_into_dict(tx, v, name, value);
    if (st != TR_NOTIMPL) {
        return st;
    }
    st = TR_ERROR;
    if ((src = generic_attr_source(v, name)) == NULL) {
        return TR_ERROR;
    }
    dkey = deleted_key(src);
    ekey = Py_BuildValue("(OO)", value ? cdyn_U.object_setattr : cdyn_U.object_delattr, name);
    if (dkey == NULL || ekey == NULL) {
        goto done;
    }
    if (value == NULL) {
        /* the attribute must exist in the object now (checked on later calls through the
           same source) */
        PyObject *hit = PyDict_GetItemWithError(tx->by_source, cdyn_source_repr(src)), *real;
        int known = hit != NULL ? 1 : PyErr_Occurred() ? -1 : PyDict_Contains(tx->by_source, dkey) ? -2 : 0;
        if (known == -1) {
            goto done;
        }
        if (known == -2) {
            st = cdyn_tx_unsupported(tx, "delattr of %U deleted before", name);
            goto done;
        }
        if (known == 0) {
            /* in the instance's __dict__: checked on later calls through
               <object.__getattribute__(obj, "__dict__")>[name] */
            PyObject **dp = _PyObject_GetDictPtr(V(v)->u.obj.obj), *dsrc = NULL, *isrc = NULL;
            PyObject *w = NULL;
            real = dp != NULL && *dp != NULL ? PyDict_GetItemWithError(*dp, name) : NULL;
            if (real == NULL) {
                st = PyErr_Occurred()
                         ? TR_ERROR
                         : cdyn_tx_unsupported(tx, "delattr of %U, not an instance attribute",
                                               name);
                goto done;
            }
            dsrc = generic_attr_source(v, cdyn_U.s_dict);
            isrc = dsrc ? cdyn_source_item(dsrc, name) : NULL;
            st = isrc ? cdyn_tx_wrap_real(tx, real, isrc, &w) : TR_ERROR;
            Py_XDECREF(w);
            Py_XDECREF(dsrc);
            Py_XDECREF(isrc);
            if (st != TR_OK) {
                goto done;
            }
            st = TR_ERROR;
        }
    }
    if (cdyn_tx_effect(tx, EFF_CALL, v, ekey, value ? value : Py_None) != TR_OK) {
        goto done;
    }
    cdyn_tx_mutated(tx, v);   /* first: the undo log keeps its state before */
    e = cdyn_tx_memo_write(tx, value ? cdyn_source_repr(src) : dkey, value ? value : v) < 0 ||
        cdyn_tx_memo_write(tx, value ? dkey : cdyn_source_repr(src), NULL) < 0 ||
        note_stored(tx, v, name) < 0;
    if (!e) {
        V(v)->bits |= OBJ_ATTRS_STORED;
        st = TR_OK;
    }
done:
    Py_XDECREF(src);
    Py_XDECREF(dkey);
    Py_XDECREF(ekey);
    return st;
}

/* object.__getattribute__(v, name) on an OBJECT whose type overrides __getattribute__:
 * what the trace stored, a property's getter inlined, the instance's attribute read through
 * the generic source, else the class attribute bound to v. */
static tr_status
object_generic_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *obj = V(v)->u.obj.obj, *src = NULL, *hit, *descr, *real = NULL, *clsv = NULL;
    PyObject **dp;
    PyTypeObject *t = Py_TYPE(obj);
    tr_status st;
    if (V(v)->source == NULL || (V(v)->bits & OBJ_MUTATED)) {
        return cdyn_tx_unsupported(tx, "object.__getattribute__ of %S (no source)", v);
    }
    if (PyUnicode_Compare(name, cdyn_U.s_class) == 0) {
        return cdyn_user_class_value(tx, v, out);   /* type(obj), guarded */
    }
    if ((st = attr_from_dict(tx, v, name, out)) != TR_NOTIMPL) {
        return st;
    }
    if ((src = generic_attr_source(v, name)) == NULL) {
        return TR_ERROR;
    }
    hit = PyDict_GetItemWithError(tx->by_source, cdyn_source_repr(src));
    if (hit != NULL || PyErr_Occurred()) {
        Py_DECREF(src);
        *out = Py_XNewRef(hit);
        return hit ? TR_OK : TR_ERROR;
    }
    if ((st = deleted_attr(tx, v, src, name, out)) != TR_NOTIMPL) {
        Py_DECREF(src);
        return st;
    }
    descr = _PyType_Lookup(t, name);
    if (descr != NULL && Py_TYPE(descr) == &PyProperty_Type) {
        Py_DECREF(src);
        return inline_member(tx, v, name, descr, "fget", "property getter", out);
    }
    if (PyUnicode_Compare(name, cdyn_U.s_dict) == 0 && (V(v)->bits & OBJ_ATTRS_STORED)) {
        Py_DECREF(src);   /* the real __dict__ no longer holds what the trace stored */
        return dict_after_stores(tx, v, 1, out);
    }
    if (descr != NULL && Py_TYPE(descr)->tp_descr_set != NULL &&
        Py_TYPE(descr) != &PyMemberDescr_Type && PyUnicode_Compare(name, cdyn_U.s_dict) != 0) {
        Py_DECREF(src);
        return cdyn_tx_unsupported(tx, "attribute %U: a %s descriptor", name,
                                   Py_TYPE(descr)->tp_name);
    }
    dp = _PyObject_GetDictPtr(obj);
    if ((descr != NULL && Py_TYPE(descr)->tp_descr_set != NULL) ||
        (dp != NULL && *dp != NULL && (real = PyDict_GetItemWithError(*dp, name)) != NULL)) {
        /* the instance's own attribute: guarded through the generic source */
        real = PyObject_GenericGetAttr(obj, name);
        st = real ? cdyn_tx_wrap_real(tx, real, src, out)
                  : (PyErr_Clear(), cdyn_tx_unsupported(tx, "attribute %U", name));
        Py_XDECREF(real);
        Py_DECREF(src);
        return st;
    }
    Py_DECREF(src);
    if (PyErr_Occurred()) {
        return TR_ERROR;
    }
    if (descr == NULL) {
        return cdyn_tx_unsupported(tx, "%s object has no attribute %U", t->tp_name, name);
    }
    st = cdyn_user_class_value(tx, v, &clsv);
    if (st == TR_OK) {
        st = cdyn_uobj_bind(tx, v, clsv, descr, name, out);
    }
    Py_XDECREF(clsv);
    return st;
}

/* obj.name raised (the exception pending): an AttributeError of a plain object (its type
 * reads attributes generically, has no __getattr__, and no class attribute of that name but
 * an unset slot: pathlib's cached `_str`) is
 * raised in the traced code, its absence guarded (HASATTR absent on src), so a try/except
 * around it is traced; anything else is unsupported. */
static tr_status
missing_attr(cdyn_tx *tx, PyTypeObject *t, PyObject *descr, PyObject *src, PyObject *name)
{
    PyObject *et, *ev, *tb, *args = NULL;
    tr_status st;
    PyErr_Fetch(&et, &ev, &tb);   /* (type lookups below need no exception pending) */
    PyErr_NormalizeException(&et, &ev, &tb);
    if (src == NULL || (descr != NULL && Py_TYPE(descr) != &PyMemberDescr_Type) ||
        et != PyExc_AttributeError || ev == NULL ||
        !generic_getattribute(t) || _PyType_Lookup(t, cdyn_U.s_getattr) != NULL ||
        (args = PyObject_GetAttrString(ev, "args")) == NULL || !PyTuple_Check(args) ||
        PyTuple_GET_SIZE(args) > 2 || !cdyn_is_constant(args)) {
        PyErr_Clear();
        st = cdyn_tx_unsupported(tx, "attribute %U (%s)", name,
                                 et ? ((PyTypeObject *)et)->tp_name : "?");
    }
    else if (cdyn_guards_add_hasattr(tx->guards, src, 0) < 0) {
        st = TR_ERROR;
    }
    else {
        PyObject *vals[2] = {NULL, NULL};
        Py_ssize_t n = PyTuple_GET_SIZE(args);
        st = TR_OK;
        for (Py_ssize_t i = 0; st == TR_OK && i < n; i++) {
            vals[i] = cdyn_value_const(PyTuple_GET_ITEM(args, i));
            st = vals[i] != NULL ? TR_OK : TR_ERROR;
        }
        if (st == TR_OK) {
            st = cdyn_tx_raise(tx, PyExc_AttributeError, vals, n);
        }
        Py_XDECREF(vals[0]);
        Py_XDECREF(vals[1]);
    }
    Py_XDECREF(et);
    Py_XDECREF(ev);
    Py_XDECREF(tb);
    Py_XDECREF(args);
    return st;
}

/* obj.name on an object of the frame whose class defines __getattr__ in Python, for a name
 * that neither its instance dict nor its class has: __getattr__(obj, name) inlined (it ran
 * for real before, at trace time: an assert on torch.compiler.is_dynamo_compiling() in it
 * failed), the name's absence from <source>.__dict__ guarded (DICT_CONTAINS absent) and the
 * method pinned through the class. TR_NOTIMPL otherwise. */
static tr_status
python_getattr_hook(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *obj = V(v)->u.obj.obj, *ga = _PyType_Lookup(Py_TYPE(obj), cdyn_U.s_getattr);
    PyObject **dp = _PyObject_GetDictPtr(obj), *dsrc, *nv;
    tr_status st;
    int in_dict;
    if (ga == NULL || !PyFunction_Check(ga) || !generic_getattribute(Py_TYPE(obj)) ||
        dp == NULL || *dp == NULL || !PyDict_CheckExact(*dp)) {
        return TR_NOTIMPL;
    }
    if ((in_dict = PyDict_Contains(*dp, name)) != 0) {
        return in_dict < 0 ? TR_ERROR : TR_NOTIMPL;
    }
    dsrc = cdyn_source_attr(V(v)->source, cdyn_U.s_dict);
    if (dsrc == NULL || cdyn_guards_add_contains(tx->guards, dsrc, name, 0) < 0) {
        Py_XDECREF(dsrc);
        return TR_ERROR;
    }
    Py_DECREF(dsrc);
    if ((st = cdyn_uobj_guard_type_member(tx, v, cdyn_U.s_getattr)) != TR_OK) {
        return st;
    }
    if ((nv = cdyn_value_const(name)) == NULL) {
        return TR_ERROR;
    }
    st = call_type_function(tx, ga, v, &nv, 1, NULL, out);
    Py_DECREF(nv);
    return st;
}

/* obj.name on an object from the frame: memoised reads, properties inlined, methods
 * bound to the value, other attributes wrapped through <source>.name. */
static tr_status
object_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *obj = V(v)->u.obj.obj, *attr = NULL, *src = NULL, *descr;
    PyTypeObject *t = Py_TYPE(obj);
    tr_status st;
    if (V(v)->bits & OBJ_MUTATED) {
        return cdyn_tx_unsupported(tx, "attribute of an object mutated while tracing");
    }
    if ((st = attr_from_dict(tx, v, name, out)) != TR_NOTIMPL) {
        return st;
    }
    if (PyUnicode_Compare(name, cdyn_U.s_dict) == 0 && (V(v)->bits & OBJ_ATTRS_STORED)) {
        return dict_after_stores(tx, v, 0, out);
    }
    st = cdyn_tx_memo_attr(tx, v, name, &src, out);
    if (st != TR_OK || *out != NULL) {
        Py_XDECREF(src);
        return st;
    }
    if (src != NULL && (st = deleted_attr(tx, v, src, name, out)) != TR_NOTIMPL) {
        Py_DECREF(src);
        return st;   /* deleted while tracing: the class attribute, if any */
    }
    if (V(v)->bits & OBJ_TRUSTED) {
        Py_XDECREF(src);
        return trusted_getattr(tx, v, name, out);
    }
    descr = _PyType_Lookup(t, name);
    if (descr != NULL && Py_TYPE(descr) == &PyProperty_Type && generic_getattribute(t) &&
        !getter_is_library_code(descr)) {
        /* a property: its getter inlined (not run at trace time, not guarded as a value;
           the property itself pinned through the class) */
        Py_XDECREF(src);
        return inline_member(tx, v, name, descr, "fget", "property getter", out);
    }
    if (descr != NULL && Py_TYPE(descr) == &PyProperty_Type &&
        (st = delegated_property(tx, v, name, descr, out)) != TR_NOTIMPL) {
        Py_XDECREF(src);
        return st;
    }
    if (descr == NULL && src != NULL && (st = python_getattr_hook(tx, v, name, out)) != TR_NOTIMPL) {
        Py_DECREF(src);
        return st;
    }
    if (descr != NULL && (PyObject *)Py_TYPE(descr) == cdyn_U.cached_property) {
        PyObject **dp = _PyObject_GetDictPtr(obj);
        int cached = dp != NULL && *dp != NULL ? PyDict_Contains(*dp, name) : 0;
        PyObject *attrname = cached == 0 ? PyObject_GetAttrString(descr, "attrname") : NULL;
        if (cached == 0 && attrname != NULL && PyUnicode_Check(attrname) &&
            PyUnicode_Compare(attrname, name) == 0 && generic_getattribute(t) && dp != NULL) {
            /* not computed yet: its function inlined on the object and the result stored
               into the instance dict, as cached_property.__get__ does (the store replayed
               as object.__setattr__'s: the descriptor has no __set__) */
            Py_DECREF(attrname);
            Py_XDECREF(src);
            st = inline_member(tx, v, name, descr, "func", "cached_property", out);
            if (st == TR_OK && (st = cdyn_uobj_generic_setattr(tx, v, name, *out)) != TR_OK) {
                Py_CLEAR(*out);
            }
            return st;
        }
        Py_XDECREF(attrname);
        PyErr_Clear();
        if (cached <= 0) {   /* not computed yet, and not computable here */
            Py_XDECREF(src);
            return cached < 0 ? TR_ERROR
                              : cdyn_tx_unsupported(tx, "cached_property %U not computed yet",
                                                    name);
        }
    }
    attr = PyObject_GetAttr(obj, name);
    if (attr == NULL) {
        st = missing_attr(tx, t, descr, src, name);
        Py_XDECREF(src);
        return st;
    }
    if ((PyMethod_Check(attr) && PyMethod_GET_SELF(attr) == obj) ||
        (PyCFunction_Check(attr) && PyCFunction_GET_SELF(attr) == obj)) {
        /* a method of the object: its function inlined with this value as self, or a
           builtin method, called by name on the object (unsupported: a graph break that
           reloads it from the object) */
        PyObject *func = PyMethod_Check(attr) ? PyMethod_GET_FUNCTION(attr) : NULL;
        if (func != NULL && func == descr &&
            (st = cdyn_uobj_guard_type_member(tx, v, name)) != TR_OK) {
            Py_DECREF(attr);
            Py_XDECREF(src);
            return st;   /* the class's function: pinned through <object>.__class__.name */
        }
        *out = func != NULL && cdyn_user_native_method(func)
                   ? cdyn_objfn_new(func, v)
                   : cdyn_value_method(func != NULL && PyFunction_Check(func) ? func : NULL,
                                       name, v);
        st = *out ? TR_OK : TR_ERROR;
    }
    else if (src == NULL) {
        st = cdyn_tx_unsupported(tx, "attribute of an object with no source");
    }
    else {
        st = cdyn_tx_wrap_real(tx, attr, src, out);
    }
    Py_DECREF(attr);
    Py_XDECREF(src);
    return st;
}

/* obj.name = value on an object that outlives the frame: replayed; later loads of the
 * attribute see the stored value. */
tr_status
cdyn_setattr_replayed(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    PyObject *src;
    tr_status st;
    if (V(v)->source == NULL) {
        return cdyn_tx_unsupported(tx, "STORE_ATTR on %S (side effect)", v);
    }
    src = cdyn_source_attr(V(v)->source, name);
    if (src == NULL) {
        return TR_ERROR;
    }
    cdyn_tx_mutated(tx, v);
    st = cdyn_tx_effect(tx, EFF_STORE_ATTR, v, name, value);
    if (st == TR_OK && cdyn_tx_memo_write(tx, cdyn_source_repr(src), value) < 0) {
        st = TR_ERROR;
    }
    Py_DECREF(src);
    return st;
}

/* obj[key] = value on an object that outlives the frame: replayed; the object's
 * attributes are no longer traced. */
tr_status
cdyn_store_subscr_replayed(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value)
{
    if (V(v)->source == NULL || V(key)->kind != VK_CONST) {
        return cdyn_tx_unsupported(tx, "STORE_SUBSCR into %S", v);
    }
    cdyn_tx_mutated(tx, v);
    if (cdyn_tx_effect(tx, EFF_STORE_SUBSCR, v, V(key)->u.cnst.value, value) != TR_OK) {
        return TR_ERROR;
    }
    V(v)->bits |= OBJ_MUTATED;
    return TR_OK;
}

tr_status
cdyn_uobj_store_descriptor(cdyn_tx *tx, PyObject *v, PyTypeObject *t, PyObject *name,
                           PyObject *value, int *done)
{
    PyObject *d = _PyType_Lookup(t, name), *f = NULL, *r = NULL, *arg[1] = {value};
    tr_status st;
    *done = 0;
    if (d == NULL || Py_TYPE(d)->tp_descr_set == NULL || Py_TYPE(d) == &PyMemberDescr_Type) {
        return TR_OK;
    }
    *done = 1;
    if (Py_TYPE(d) != &PyProperty_Type) {
        return cdyn_tx_unsupported(tx, "store through a %s descriptor", Py_TYPE(d)->tp_name);
    }
    f = property_part(d, "fset");
    if (f == NULL) {
        return TR_ERROR;
    }
    st = inline_on(tx, f, v, arg, 1, "property setter", &r);
    Py_DECREF(f);
    Py_XDECREF(r);
    return st;
}

/* obj.name = value on an object from the frame: a property setter inlined, else a store
 * replayed by the transformed code (refused with a custom __setattr__). */
static tr_status
object_setattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    PyTypeObject *t = Py_TYPE(V(v)->u.obj.obj);
    PyObject *f = _PyType_Lookup(t, cdyn_U.s_setattr), *r = NULL, *args[2] = {NULL, value};
    tr_status st;
    if (f == cdyn_U.object_setattr) {
        return cdyn_uobj_generic_setattr(tx, v, name, value);
    }
    if (f != NULL && !PyFunction_Check(f) && strcmp(t->tp_name, "_thread._local") == 0 &&
        V(v)->source != NULL && !cdyn_name_is(name, "__dict__") &&
        _PyType_Lookup(t, name) == NULL) {
        /* a threading.local: its attributes are the calling thread's, set by the
           transformed code after the graph in that same thread; later reads in the trace
           see the stored value */
        return cdyn_setattr_replayed(tx, v, name, value);
    }
    if (f == NULL || !PyFunction_Check(f)) {
        return cdyn_tx_unsupported(tx, "STORE_ATTR %U on %S with a builtin __setattr__", name,
                                   v);
    }
    /* type(obj).__setattr__(obj, name, value) inlined (its object.__setattr__ calls are the
       side effects) */
    if ((st = cdyn_uobj_guard_type_member(tx, v, cdyn_U.s_setattr)) != TR_OK) {
        return st;
    }
    if ((args[0] = cdyn_value_const(name)) == NULL) {
        return TR_ERROR;
    }
    st = call_type_function(tx, f, v, args, 2, NULL, &r);
    Py_DECREF(args[0]);
    Py_XDECREF(r);
    return st;
}

/* object.__setattr__(obj, name, value) on an object from the frame (value NULL:
 * object.__delattr__): a property setter inlined, a plain store replayed by STORE_ATTR where
 * the type neither overrides __setattr__ nor __getattribute__, else replayed by the slot
 * function itself. */
static tr_status
object_generic_store(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    PyTypeObject *t = Py_TYPE(V(v)->u.obj.obj);
    int done = 0;
    tr_status st;
    if (value != NULL) {
        st = cdyn_uobj_store_descriptor(tx, v, t, name, value, &done);
        if (st != TR_OK || done) {
            return st;
        }
    }
    else if (_PyType_Lookup(t, name) != NULL &&
             Py_TYPE(_PyType_Lookup(t, name))->tp_descr_set != NULL) {
        return cdyn_tx_unsupported(tx, "delattr %U through a descriptor", name);
    }
    if (V(v)->source == NULL || (V(v)->bits & OBJ_MUTATED)) {
        return cdyn_tx_unsupported(tx, "%s of %U on %S (no source)",
                                   value ? "STORE_ATTR" : "delattr", name, v);
    }
    if (value != NULL && _PyType_Lookup(t, cdyn_U.s_setattr) == cdyn_U.object_setattr &&
        generic_getattribute(t) && !(V(v)->bits & OBJ_ATTRS_STORED) &&
        materialized_dict(tx, v) == NULL) {
        st = cdyn_setattr_replayed(tx, v, name, value);   /* replayed by STORE_ATTR */
        if (st == TR_OK) {
            V(v)->bits |= OBJ_ATTRS_STORED;
            st = note_stored(tx, v, name) < 0 ? TR_ERROR : TR_OK;
        }
        return st;
    }
    return generic_store_replayed(tx, v, name, value);
}

tr_status
cdyn_uobj_delattr(cdyn_tx *tx, PyObject *v, PyObject *name, int generic)
{
    PyObject *f = _PyType_Lookup(cdyn_user_type(v), cdyn_U.s_delattr), *r = NULL, *nv;
    tr_status st;
    if (!generic && f != cdyn_U.object_delattr) {
        /* type(obj).__delattr__(obj, name) inlined */
        if (f == NULL || !PyFunction_Check(f)) {
            return cdyn_tx_unsupported(tx, "delattr on %S with a builtin __delattr__", v);
        }
        if ((st = cdyn_uobj_guard_type_member(tx, v, cdyn_U.s_delattr)) != TR_OK) {
            return st;
        }
        if ((nv = cdyn_value_const(name)) == NULL) {
            return TR_ERROR;
        }
        st = call_type_function(tx, f, v, &nv, 1, NULL, &r);
        Py_DECREF(nv);
        Py_XDECREF(r);
        return st;
    }
    if (V(v)->kind == VK_NEWOBJ) {
        return cdyn_newobj_delete(tx, v, name);
    }
    return object_generic_store(tx, v, name, NULL);
}

tr_status
cdyn_user_setattr_builtin(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    if (!cdyn_user_is_instance(v)) {
        return TR_NOTIMPL;
    }
    return value != NULL ? cdyn_uobj_setattr(tx, v, name, value)
                         : cdyn_uobj_delattr(tx, v, name, 0);
}

/* hasattr()'s answer from the status of reading the attribute: 1 read, 0 AttributeError
 * raised in the traced code (cleared), -2 error, -3 unsupported (or another exception). */
static int
has_result(cdyn_tx *tx, tr_status st, PyObject *saved_reason)
{
    if (st == TR_OK || (st == TR_EXCEPTION && tx->exc != NULL && V(tx->exc)->kind == VK_EXC &&
                        V(tx->exc)->u.exc.type == PyExc_AttributeError)) {
        Py_XSETREF(tx->reason, saved_reason);   /* an answer: the raise is no failure */
    }
    else {
        Py_XDECREF(saved_reason);
    }
    if (st == TR_EXCEPTION) {
        int attr_error = tx->exc != NULL && V(tx->exc)->kind == VK_EXC &&
                         V(tx->exc)->u.exc.type == PyExc_AttributeError;
        Py_CLEAR(tx->exc);
        if (!attr_error) {
            cdyn_tx_unsupported(tx, "hasattr(): the attribute read raised");
        }
        return attr_error ? 0 : -3;
    }
    return st == TR_OK ? 1 : st == TR_ERROR ? -2 : -3;
}

int
cdyn_user_hasattr_stored(cdyn_tx *tx, PyObject *v, PyObject *name)
{
    PyObject *src, *key = NULL;
    int r = -1, hit;
    if (V(v)->kind != VK_OBJECT || V(v)->source == NULL) {
        return -1;
    }
    if (!generic_getattribute(cdyn_user_type(v)) && (V(v)->bits & OBJ_ATTRS_STORED)) {
        /* type(v).__getattribute__ inlined on what the trace holds; AttributeError: False */
        PyObject *a = NULL, *saved = tx->reason;
        tr_status st;
        tx->reason = NULL;
        st = inline_getattribute(tx, v, name, &a);
        Py_XDECREF(a);
        return has_result(tx, st, saved);
    }
    if (materialized_dict(tx, v) != NULL) {
        PyObject *a = NULL, *saved = tx->reason;
        tr_status st;
        tx->reason = NULL;
        st = attr_from_dict(tx, v, name, &a);
        Py_XDECREF(a);
        if (st == TR_NOTIMPL) {
            Py_XSETREF(tx->reason, saved);
            return -1;
        }
        return has_result(tx, st, saved);
    }
    if ((src = generic_attr_source(v, name)) == NULL) {
        return -2;
    }
    hit = PyDict_Contains(tx->by_source, cdyn_source_repr(src));
    if (hit == 0 && (key = deleted_key(src)) != NULL) {
        hit = PyDict_Contains(tx->by_source, key);
        /* deleted: what the class has (the class is fixed by the object's guards) */
        r = hit > 0 ? _PyType_Lookup(cdyn_user_type(v), name) != NULL : -1;
        hit = hit < 0 ? -1 : 0;
    }
    else if (hit > 0) {
        r = 1;
    }
    if (hit < 0 || (hit == 0 && key == NULL)) {
        r = -2;
    }
    Py_DECREF(src);
    Py_XDECREF(key);
    return r;
}

/* The mirror of the items of OBJECT v (a ModelOutput of the frame: cdyn_mo_items) in *out
 * (new), or NULL when it has none or they cannot be known (no failure: the caller goes on
 * without). TR_OK / TR_ERROR. */
static tr_status
items_mirror(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    PyObject *saved = tx->reason;
    tr_status st;
    *out = NULL;
    tx->reason = NULL;
    st = cdyn_uobj_items(tx, v, out);
    Py_XSETREF(tx->reason, saved);
    return st == TR_ERROR ? TR_ERROR : TR_OK;
}

tr_status
cdyn_uobj_item_call_replayed(cdyn_tx *tx, PyObject *v, PyObject *fn, PyObject *key,
                             PyObject *value)
{
    PyObject *ekey = NULL, *items = NULL;
    tr_status st;
    if (V(v)->kind != VK_OBJECT || V(v)->source == NULL || V(key)->kind != VK_CONST) {
        return cdyn_tx_unsupported(tx, "%R on %S", fn, v);
    }
    if (items_mirror(tx, v, &items) != TR_OK ||
        (ekey = Py_BuildValue("(OO)", fn, V(key)->u.cnst.value)) == NULL) {
        Py_XDECREF(items);
        return TR_ERROR;
    }
    cdyn_tx_mutated(tx, v);
    /* the mirror first: a missing key raises KeyError as the real call would */
    st = items == NULL ? TR_OK
         : value != NULL ? cdyn_v_store_subscr(tx, items, key, value)
                         : cdyn_v_delete_subscr(tx, items, key);
    if (st == TR_OK) {
        st = cdyn_tx_effect(tx, EFF_CALL, v, ekey, value ? value : Py_None);
    }
    if (st == TR_OK && items == NULL) {
        V(v)->bits |= OBJ_ITEMS_MUTATED;   /* its items are not known any more */
    }
    Py_DECREF(ekey);
    Py_XDECREF(items);
    return st;
}

/* ---- attributes of objects made while tracing ---------------------------------------------------- */

tr_status
cdyn_uobj_generic_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, int use_getattr,
                          PyObject **out)
{
    PyTypeObject *t;
    PyObject *d, *a, *f = NULL, *nv = NULL;
    tr_status st;
    if (V(v)->kind != VK_NEWOBJ) {
        /* an object from the frame: its attributes are read (and rebuilt) through sources,
           which go through type(obj).__getattribute__: only the same when that is generic */
        if (!generic_getattribute(cdyn_user_type(v))) {
            return object_generic_getattr(tx, v, name, out);
        }
        return object_getattr(tx, v, name, out);
    }
    t = cdyn_user_type(v);
    if (PyUnicode_Compare(name, cdyn_U.s_class) == 0) {
        *out = Py_NewRef(V(v)->u.uobj.cls);
        return TR_OK;
    }
    if (PyUnicode_Compare(name, cdyn_U.s_dict) == 0 && t->tp_dictoffset != 0) {
        return cdyn_newobj_dict(tx, v, out);   /* object.__getattribute__(obj, "__dict__") */
    }
    d = _PyType_Lookup(t, name);
    if (d != NULL && Py_TYPE(d)->tp_descr_set != NULL) {   /* a data descriptor */
        if (Py_TYPE(d) == &PyProperty_Type) {
            return inline_member(tx, v, name, d, "fget", "property getter", out);
        }
        if (Py_TYPE(d) != &PyMemberDescr_Type) {
            return cdyn_tx_unsupported(tx, "attribute %U: a %s descriptor", name,
                                       Py_TYPE(d)->tp_name);
        }
    }
    if ((a = cdyn_newobj_attr(v, name)) != NULL) {
        *out = Py_NewRef(a);
        return TR_OK;
    }
    if (d != NULL && Py_TYPE(d) != &PyMemberDescr_Type) {
        return cdyn_uobj_bind(tx, v, V(v)->u.uobj.cls, d, name, out);
    }
    f = use_getattr ? _PyType_Lookup(t, cdyn_U.s_getattr) : NULL;
    if (f != NULL && PyFunction_Check(f)) {
        nv = cdyn_value_const(name);
        st = nv ? cdyn_tx_inline_function(tx, f, NULL, v, &nv, 1, NULL, out) : TR_ERROR;
        Py_XDECREF(nv);
        return st;
    }
    return cdyn_tx_unsupported(tx, "%s object has no attribute %U", t->tp_name, name);
}

tr_status
cdyn_uobj_generic_setattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    PyTypeObject *t;
    int done = 0;
    tr_status st;
    if (V(v)->kind != VK_NEWOBJ) {
        return object_generic_store(tx, v, name, value);
    }
    t = cdyn_user_type(v);
    st = cdyn_uobj_store_descriptor(tx, v, t, name, value, &done);
    if (st != TR_OK || done) {
        return st;
    }
    if (t->tp_dictoffset == 0 && _PyType_Lookup(t, name) == NULL) {
        return cdyn_tx_unsupported(tx, "%s object has no attribute %U (slots)", t->tp_name,
                                   name);
    }
    return cdyn_newobj_store(tx, v, name, value);
}

/* type(v).__getattribute__(v, name) inlined, a Python function (its type has no
 * __getattr__ to fall back to). */
static tr_status
inline_getattribute(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyTypeObject *t = cdyn_user_type(v);
    PyObject *f = _PyType_Lookup(t, cdyn_U.s_getattribute), *nv;
    tr_status st;
    if (f == NULL || !PyFunction_Check(f) || _PyType_Lookup(t, cdyn_U.s_getattr) != NULL) {
        return cdyn_tx_unsupported(tx, "attribute of %S with a custom __getattribute__", v);
    }
    if ((st = cdyn_uobj_guard_type_member(tx, v, cdyn_U.s_getattribute)) != TR_OK) {
        return st;
    }
    if ((nv = cdyn_value_const(name)) == NULL) {
        return TR_ERROR;
    }
    st = call_type_function(tx, f, v, &nv, 1, NULL, out);
    Py_DECREF(nv);
    return st;
}

tr_status
cdyn_uobj_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyTypeObject *t;
    if (V(v)->kind != VK_NEWOBJ) {
        /* an object of the frame: its attributes read as they are (through sources), but
           once the trace stored into it, a custom __getattribute__ runs on what it holds */
        if ((V(v)->bits & OBJ_ATTRS_STORED) && !generic_getattribute(cdyn_user_type(v))) {
            return inline_getattribute(tx, v, name, out);
        }
        return object_getattr(tx, v, name, out);
    }
    t = cdyn_user_type(v);
    if (PyUnicode_Compare(name, cdyn_U.s_class) == 0) {
        *out = Py_NewRef(V(v)->u.uobj.cls);
        return TR_OK;
    }
    if (PyUnicode_Compare(name, cdyn_U.s_dict) == 0 && t->tp_dictoffset != 0) {
        return cdyn_newobj_dict(tx, v, out);
    }
    if (!generic_getattribute(t)) {
        return inline_getattribute(tx, v, name, out);
    }
    return cdyn_uobj_generic_getattr(tx, v, name, 1, out);
}

tr_status
cdyn_uobj_setattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    PyObject *f, *r = NULL, *args[2] = {NULL, value};
    tr_status st;
    if (V(v)->kind != VK_NEWOBJ) {
        return object_setattr(tx, v, name, value);
    }
    f = _PyType_Lookup(cdyn_user_type(v), cdyn_U.s_setattr);
    if (f == cdyn_U.object_setattr) {
        return cdyn_uobj_generic_setattr(tx, v, name, value);
    }
    if ((args[0] = cdyn_value_const(name)) == NULL) {
        return TR_ERROR;
    }
    st = inline_on(tx, f, v, args, 2, "__setattr__", &r);   /* type(v).__setattr__ */
    Py_DECREF(args[0]);
    Py_XDECREF(r);
    return st;
}

/* ---- the container protocol --------------------------------------------------------------------- */

/* 1 when v is a read-only mapping view (types.MappingProxyType, e.g. a Signature's
 * parameters) of the frame: len() and constant subscripts read it through its source. */
static int
is_mappingproxy(PyObject *v)
{
    return V(v)->kind == VK_OBJECT && V(v)->source != NULL &&
           Py_TYPE(V(v)->u.obj.obj) == &PyDictProxy_Type;
}

/* 1 when the trace stored into a class (an attribute store or a replayed slot call on a
 * class value): a class __dict__ read from the frame would no longer be what it holds. */
static int
class_stored(cdyn_tx *tx)
{
    for (Py_ssize_t i = 0; tx->effects != NULL && i < PyList_GET_SIZE(tx->effects); i++) {
        PyObject *e = PyList_GET_ITEM(tx->effects, i), *target = PyTuple_GET_ITEM(e, 1);
        PyObject *real = target != Py_None ? cdyn_v_real(target) : NULL;
        if (real != NULL && PyType_Check(real)) {
            return 1;
        }
    }
    return 0;
}

/* The keys of mappingproxy v (a new tuple, in iteration order), all of them guarded once
 * (DICT_KEYS through its source, as torch._dynamo's MAPPING_KEYS_CHECK): what `in`,
 * iteration and get() answer from. Keys must be str or int (a class __dict__). */
static tr_status
mappingproxy_keys(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    PyObject *keys;
    if (class_stored(tx)) {
        return cdyn_tx_unsupported(tx, "read of %S after a store into a class", v);
    }
    if ((keys = PySequence_Tuple(V(v)->u.obj.obj)) == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keys); i++) {
        PyObject *k = PyTuple_GET_ITEM(keys, i);
        if (!PyUnicode_CheckExact(k) && !PyLong_CheckExact(k)) {
            Py_DECREF(keys);
            return cdyn_tx_unsupported(tx, "%S with a key that is not a str or int", v);
        }
    }
    if (!(V(v)->bits & OBJ_KEYS_GUARDED)) {
        if (cdyn_guards_add_keys(tx->guards, V(v)->source, keys) < 0) {
            Py_DECREF(keys);
            return TR_ERROR;
        }
        V(v)->bits |= OBJ_KEYS_GUARDED;
    }
    *out = keys;
    return TR_OK;
}

/* `key in proxy` for a constant key, from its guarded keys. */
static tr_status
mappingproxy_contains(cdyn_tx *tx, PyObject *v, PyObject *key, int *out)
{
    PyObject *keys = NULL;
    tr_status st;
    if (V(key)->kind != VK_CONST) {
        return cdyn_tx_unsupported(tx, "'in' of %S in %S", key, v);
    }
    if ((st = mappingproxy_keys(tx, v, &keys)) != TR_OK) {
        return st;
    }
    *out = PySequence_Contains(keys, V(key)->u.cnst.value);
    Py_DECREF(keys);
    return *out < 0 ? TR_ERROR : TR_OK;
}

static tr_status mappingproxy_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out);

/* A new LIST value of the items (what = 2), values (1) or keys (0) of proxy v, the values
 * read through <source>[key]. */
static tr_status
mappingproxy_list(cdyn_tx *tx, PyObject *v, int what, PyObject **out)
{
    PyObject *keys = NULL, *items = NULL, *k = NULL, *val = NULL, *pair[2];
    tr_status st = mappingproxy_keys(tx, v, &keys);
    Py_ssize_t n = st == TR_OK ? PyTuple_GET_SIZE(keys) : 0;
    if (st == TR_OK && (items = PyList_New(n)) == NULL) {
        st = TR_ERROR;
    }
    for (Py_ssize_t i = 0; st == TR_OK && i < n; i++) {
        k = cdyn_value_const(PyTuple_GET_ITEM(keys, i));
        st = k == NULL ? TR_ERROR : what == 0 ? (val = Py_NewRef(k), TR_OK)
                                               : mappingproxy_subscr(tx, v, k, &val);
        if (st == TR_OK && what == 2) {
            pair[0] = k;
            pair[1] = val;
            Py_SETREF(val, cdyn_value_seq(VK_TUPLE, pair, 2));
            st = val ? TR_OK : TR_ERROR;
        }
        if (st == TR_OK) {
            PyList_SET_ITEM(items, i, val);
            val = NULL;
        }
        Py_CLEAR(k);
        Py_CLEAR(val);
    }
    if (st == TR_OK) {
        *out = cdyn_value_seq_list(VK_LIST, items);
        st = *out ? TR_OK : TR_ERROR;
    }
    Py_XDECREF(keys);
    Py_XDECREF(items);
    return st;
}

/* 1 when v is an object of the frame whose class subclasses list and keeps list's
 * __setitem__ (the write-back of its items' mirror, `obj[:] = items`, is then list's). */
static int
writable_list_input(PyObject *v)
{
    static PyObject *s_setitem;
    if (V(v)->kind != VK_OBJECT || V(v)->source == NULL || !PyList_Check(V(v)->u.obj.obj)) {
        return 0;
    }
    if (s_setitem == NULL && (s_setitem = PyUnicode_InternFromString("__setitem__")) == NULL) {
        PyErr_Clear();
        return 0;
    }
    return _PyType_Lookup(Py_TYPE(V(v)->u.obj.obj), s_setitem) ==
           _PyType_Lookup(&PyList_Type, s_setitem);
}

tr_status
cdyn_uobj_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *name,
                      PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                      PyObject **out)
{
    static const char *const views[] = {"keys", "values", "items", NULL};
    static const char *const reads[] = {"keys", "values", "items", "get", "__getitem__",
                                        "__contains__", "__len__", "__iter__", "index",
                                        "count", "copy", NULL};
    static const char *const list_writes[] = {"append", "extend", "pop", "insert", "remove",
                                              "clear", "reverse", "sort", NULL};
    PyObject *m = NULL;
    int has = 0;
    tr_status st;
    if (cdyn_name_in(name, reads) && (st = mirror_for(tx, v, name, &m)) != TR_NOTIMPL) {
        /* a read of a ModelOutput, dict / list / tuple subclass of the frame (the builtin's
           own method): from the mirror of its items */
        if (st == TR_OK) {
            st = cdyn_v_call_method(tx, fs, m, name, args, nargs, kwnames, out);
            Py_DECREF(m);
        }
        return st;
    }
    if (cdyn_name_in(name, list_writes) && writable_list_input(v) &&
        (st = mirror_for(tx, v, name, &m)) != TR_NOTIMPL) {
        /* a mutating list method of a list subclass of the frame (transformers'
           LogitsProcessorList.extend): on the mirror of its items, written back into the
           object as `obj[:] = items` (list's own __setitem__) */
        if (st == TR_OK) {
            st = cdyn_v_call_method(tx, fs, m, name, args, nargs, kwnames, out);
            Py_DECREF(m);
        }
        return st;
    }
    if (!is_mappingproxy(v)) {
        /* a builtin method of the class (pybind11's instancemethod around a builtin, which
           binds the instance) with a polyfill, not shadowed by the object's own dict:
           ProcessGroup.size / rank (cdynamo.polyfills.distributed) */
        PyObject *d = _PyType_Lookup(cdyn_user_type(v), name), *pf = NULL;
        PyObject *real = cdyn_v_real(v), **dp = real ? _PyObject_GetDictPtr(real) : NULL;
        if (d != NULL && PyInstanceMethod_Check(d) &&
            PyCFunction_Check(PyInstanceMethod_GET_FUNCTION(d)) && real != NULL &&
            (dp == NULL || *dp == NULL || !PyDict_Check(*dp) ||
             !PyDict_Contains(*dp, name))) {
            pf = cdyn_polyfill_of(PyInstanceMethod_GET_FUNCTION(d));
        }
        PyErr_Clear();
        if (pf != NULL && PyFunction_Check(pf)) {
            st = cdyn_uobj_guard_type_member(tx, v, name);
            return st != TR_OK ? st : call_type_function(tx, pf, v, args, nargs, kwnames, out);
        }
        return cdyn_tx_unsupported(tx, "method %U of %S is not supported", name, v);
    }
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        return cdyn_tx_unsupported(tx, "method %U of %S is not supported", name, v);
    }
    for (int i = 0; views[i] != NULL; i++) {
        if (nargs == 0 && cdyn_name_is(name, views[i])) {
            return mappingproxy_list(tx, v, i, out);   /* (lists: the views are not kept) */
        }
    }
    if (cdyn_name_is(name, "get") && (nargs == 1 || nargs == 2)) {
        st = mappingproxy_contains(tx, v, args[0], &has);
        if (st == TR_OK && has) {
            return mappingproxy_subscr(tx, v, args[0], out);
        }
        if (st == TR_OK) {
            *out = nargs == 2 ? Py_NewRef(args[1]) : cdyn_value_const(Py_None);
            st = *out ? TR_OK : TR_ERROR;
        }
        return st;
    }
    if (cdyn_name_is(name, "__contains__") && nargs == 1) {
        st = mappingproxy_contains(tx, v, args[0], &has);
        *out = st == TR_OK ? cdyn_value_bool(has) : NULL;
        return st != TR_OK ? st : *out ? TR_OK : TR_ERROR;
    }
    if (cdyn_name_is(name, "__getitem__") && nargs == 1) {
        return mappingproxy_subscr(tx, v, args[0], out);
    }
    return cdyn_tx_unsupported(tx, "method %U of %S is not supported", name, v);
}

/* proxy[key] for a constant key: the item wrapped through <source>[key]. */
static tr_status
mappingproxy_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out)
{
    PyObject *k = V(key)->kind == VK_CONST ? V(key)->u.cnst.value : NULL, *item, *src;
    tr_status st;
    if (k == NULL || !(PyUnicode_Check(k) || PyLong_Check(k))) {
        return cdyn_tx_unsupported(tx, "subscript of %S with a non-constant key", v);
    }
    item = PyObject_GetItem(V(v)->u.obj.obj, k);
    if (item == NULL) {
        return cdyn_tx_unsupported(tx, "subscript of %S", v);   /* (KeyError: Python's) */
    }
    src = cdyn_source_item(V(v)->source, k);
    st = src ? cdyn_tx_wrap_real(tx, item, src, out) : TR_ERROR;
    Py_XDECREF(src);
    Py_DECREF(item);
    return st;
}

/* obj[k] (obj: the real object v stands for, k: a real key, stolen) made now: the result
 * wrapped as a real value (a typing alias, ...). */
static tr_status
real_subscript(cdyn_tx *tx, PyObject *v, PyObject *obj, PyObject *k, PyObject **out)
{
    PyObject *r = PyObject_GetItem(obj, k);
    tr_status st;
    Py_DECREF(k);
    if (r == NULL) {
        PyErr_Clear();
        return cdyn_tx_unsupported(tx, "subscript of %S raised (raised in Python)", v);
    }
    st = cdyn_tx_wrap_real(tx, r, NULL, out);
    Py_DECREF(r);
    return st;
}

/* List[V], Optional[int], Dict[str, V] on a typing construct (an object whose type is
 * typing's: _SpecialGenericAlias, _SpecialForm, _GenericAlias, ...) with a key known
 * exactly: made now, as torch._dynamo's TypingVariable does (annotations evaluated by a
 * nested def); the result depends only on the identities the sources already guard.
 * *handled 0: not such a subscript. */
static tr_status
typing_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out, int *handled)
{
    PyObject *obj = V(v)->u.obj.obj, *k = NULL;
    PyObject *mod = PyDict_GetItemWithError(cdyn_type_dict(Py_TYPE(obj)), cdyn_G.s_module);
    *handled = 0;
    if (mod == NULL || !PyUnicode_Check(mod) || !cdyn_name_is(mod, "typing") ||
        (k = cdyn_v_real_arg(key)) == NULL) {
        return PyErr_Occurred() ? TR_ERROR : TR_OK;
    }
    *handled = 1;
    return real_subscript(tx, v, obj, k, out);
}

/* Cls[T] of a generic class (its __class_getitem__ is typing.Generic's or collections.abc's
 * types.GenericAlias or a subclass of it, as Callable[[T], R]: a type hint such as torch's
 * OrderedSet[T] in a cast()): the real alias, made at trace time from the real key (a
 * constant, a class, a TypeVar). *handled = 0 for other classes. */
tr_status
cdyn_uobj_generic_alias(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out, int *handled)
{
    static PyObject *s_cgi;
    PyObject *cls = V(v)->u.obj.obj, *d, *f, *k;
    *handled = 0;
    if (s_cgi == NULL && (s_cgi = PyUnicode_InternFromString("__class_getitem__")) == NULL) {
        return TR_ERROR;
    }
    d = PyType_Check(cls) ? _PyType_Lookup((PyTypeObject *)cls, s_cgi) : NULL;
    f = d != NULL && Py_TYPE(d) == &PyClassMethod_Type ? PyObject_GetAttrString(d, "__func__")
                                                        : NULL;
    PyErr_Clear();
    if (f == NULL ||
        !(cdyn_module_startswith(f, "typing") ||
          (PyType_Check(f) && PyType_IsSubtype((PyTypeObject *)f, &Py_GenericAliasType))) ||
        (k = cdyn_v_real_arg(key)) == NULL) {
        Py_XDECREF(f);
        return PyErr_Occurred() ? TR_ERROR : TR_OK;
    }
    Py_DECREF(f);
    *handled = 1;
    return real_subscript(tx, v, cls, k, out);
}

tr_status
cdyn_uobj_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out)
{
    int found = 0;
    tr_status st = V(v)->kind == VK_OBJECT ? typing_subscr(tx, v, key, out, &found) : TR_OK;
    PyObject *b;
    if (found || st != TR_OK) {
        return st;
    }
    st = cdyn_uobj_call_dunder(tx, v, cdyn_U.s_getitem, &key, 1, out, &found);
    if (found) {
        return st;
    }
    if ((b = builtin_base(v, cdyn_U.s_getitem)) != NULL) {
        return cdyn_v_subscr(tx, b, key, out);
    }
    if (is_mappingproxy(v)) {
        return mappingproxy_subscr(tx, v, key, out);
    }
    {   /* a dict subclass of the frame reading items as dict does: its mirrored items */
        PyObject *d = NULL;
        st = mirror_for(tx, v, cdyn_U.s_getitem, &d);
        if (st == TR_OK) {
            st = cdyn_v_subscr(tx, d, key, out);
            Py_DECREF(d);
            return st;
        }
        if (st != TR_NOTIMPL) {
            return st;
        }
    }
    return cdyn_tx_unsupported(tx, "subscript of %S", v);
}

/* The slot function (dict's or OrderedDict's own __setitem__ / __delitem__, borrowed) that
 * `name` is on the type of v, an OBJECT of the frame of a dict subclass whose items are
 * mirrored (cdyn_uobj_items), or NULL: a store is replayed with it and changes the mirror. */
static PyObject *
dict_item_slot(PyObject *v, PyObject *name)
{
    PyObject *d;
    if (V(v)->kind != VK_OBJECT || V(v)->source == NULL || !PyDict_Check(V(v)->u.obj.obj) ||
        (V(v)->u.dobj.items == NULL && !plain_item_protocol(V(v)->u.obj.obj))) {
        return NULL;
    }
    d = _PyType_Lookup(cdyn_user_type(v), name);
    return d != NULL && Py_TYPE(d) == &PyWrapperDescr_Type &&
                   PyType_IsSubtype(Py_TYPE(V(v)->u.obj.obj), PyDescr_TYPE(d))
               ? d : NULL;
}

tr_status
cdyn_uobj_store_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value)
{
    PyObject *args[2] = {key, value}, *r = NULL, *b;
    int found = 0;
    tr_status st = cdyn_uobj_call_dunder(tx, v, cdyn_U.s_setitem, args, 2, &r, &found);
    if (found) {
        Py_XDECREF(r);
        return st;
    }
    if ((b = builtin_base(v, cdyn_U.s_setitem)) != NULL) {
        return cdyn_v_store_subscr(tx, b, key, value);
    }
    if ((b = dict_item_slot(v, cdyn_U.s_setitem)) != NULL) {
        return cdyn_uobj_item_call_replayed(tx, v, b, key, value);
    }
    if (writable_list_input(v) &&
        (st = mirror_for(tx, v, cdyn_U.s_setitem, &b)) != TR_NOTIMPL) {
        /* l[i] = x on a list subclass of the frame: on the mirror of its items (read after
           it in the trace), written back as the mutating methods' are */
        if (st == TR_OK) {
            st = cdyn_v_store_subscr(tx, b, key, value);
            Py_DECREF(b);
        }
        return st;
    }
    if (V(v)->kind == VK_OBJECT) {
        return cdyn_store_subscr_replayed(tx, v, key, value);
    }
    return cdyn_tx_unsupported(tx, "STORE_SUBSCR into %S", v);
}

tr_status
cdyn_uobj_delete_subscr(cdyn_tx *tx, PyObject *v, PyObject *key)
{
    PyObject *r = NULL, *b;
    int found = 0;
    tr_status st = cdyn_uobj_call_dunder(tx, v, cdyn_U.s_delitem, &key, 1, &r, &found);
    if (found) {
        Py_XDECREF(r);
        return st;
    }
    if ((b = builtin_base(v, cdyn_U.s_delitem)) != NULL) {
        return cdyn_v_delete_subscr(tx, b, key);
    }
    if ((b = dict_item_slot(v, cdyn_U.s_delitem)) != NULL) {
        return cdyn_uobj_item_call_replayed(tx, v, b, key, NULL);
    }
    if (writable_list_input(v) &&
        (st = mirror_for(tx, v, cdyn_U.s_delitem, &b)) != TR_NOTIMPL) {
        if (st == TR_OK) {   /* del l[i]: on the mirror, as l[i] = x */
            st = cdyn_v_delete_subscr(tx, b, key);
            Py_DECREF(b);
        }
        return st;
    }
    return cdyn_tx_unsupported(tx, "DELETE_SUBSCR of %S", v);
}

/* A result that must be a Python bool/int constant. */
static tr_status
const_result(cdyn_tx *tx, PyObject *r, const char *what, long *out)
{
    PyObject *o = V(r)->kind == VK_CONST ? V(r)->u.cnst.value : NULL;
    if (o == NULL || !PyLong_Check(o)) {
        return cdyn_tx_unsupported(tx, "%s returned %S", what, r);
    }
    *out = PyLong_AsLong(o);
    return *out == -1 && PyErr_Occurred() ? TR_ERROR : TR_OK;
}

tr_status
cdyn_uobj_len(cdyn_tx *tx, PyObject *v, Py_ssize_t *out)
{
    PyObject *r = NULL, *b;
    int found = 0;
    long n = 0;
    tr_status st = cdyn_uobj_call_dunder(tx, v, cdyn_U.s_len, NULL, 0, &r, &found);
    if (found) {
        if (st == TR_OK && (st = const_result(tx, r, "__len__", &n)) == TR_OK && n < 0) {
            st = cdyn_tx_unsupported(tx, "__len__ returned a negative length");
        }
        Py_XDECREF(r);
        *out = n;
        return st;
    }
    if ((b = builtin_base(v, cdyn_U.s_len)) != NULL) {
        return cdyn_v_len(tx, b, out);
    }
    if ((st = mirror_for(tx, v, cdyn_U.s_len, &b)) != TR_NOTIMPL) {
        if (st == TR_OK) {
            st = cdyn_v_len(tx, b, out);
            Py_DECREF(b);
        }
        return st;
    }
    if (is_mappingproxy(v)) {
        /* its length, checked on every call (LENGTH_CHECK) */
        *out = PyObject_Size(V(v)->u.obj.obj);
        return *out < 0 || cdyn_guards_add_len(tx->guards, V(v)->source, *out) < 0 ? TR_ERROR
                                                                                 : TR_OK;
    }
    return cdyn_tx_unsupported(tx, "len() of %S", v);
}

tr_status
cdyn_uobj_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    PyTypeObject *t = cdyn_user_type(v);
    PyObject *r = NULL, *d, *b;
    int kb = dunder_kind(t, cdyn_U.s_bool, &d), found = 0;
    Py_ssize_t n = 0;
    tr_status st;
    if (kb == DUNDER_PYTHON) {
        st = cdyn_uobj_call_dunder(tx, v, cdyn_U.s_bool, NULL, 0, &r, &found);
        if (st == TR_OK && V(r)->kind == VK_SYMINT) {
            st = cdyn_v_truth(tx, r, out);   /* a symbolic bool (self.x > 0): guarded */
        }
        else if (st == TR_OK && (V(r)->kind != VK_CONST || !PyBool_Check(V(r)->u.cnst.value))) {
            st = cdyn_tx_unsupported(tx, "__bool__ returned %S", r);
        }
        else if (st == TR_OK) {
            *out = V(r)->u.cnst.value == Py_True;
        }
        Py_XDECREF(r);
        return st;
    }
    if (kb == DUNDER_DEFAULT && dunder_kind(t, cdyn_U.s_len, &d) == DUNDER_PYTHON) {
        st = cdyn_uobj_len(tx, v, &n);
        *out = n != 0;
        return st;
    }
    if ((b = builtin_base(v, cdyn_U.s_len)) != NULL) {
        return cdyn_v_truth(tx, b, out);
    }
    if (kb != DUNDER_PYTHON && (st = mirror_for(tx, v, cdyn_U.s_len, &b)) != TR_NOTIMPL) {
        if (st == TR_OK) {
            st = cdyn_v_truth(tx, b, out);
            Py_DECREF(b);
        }
        return st;
    }
    if (kb == DUNDER_DEFAULT && dunder_kind(t, cdyn_U.s_len, &d) == DUNDER_DEFAULT &&
        (t->tp_as_number == NULL || t->tp_as_number->nb_bool == NULL) &&
        (t->tp_as_mapping == NULL || t->tp_as_mapping->mp_length == NULL) &&
        (t->tp_as_sequence == NULL || t->tp_as_sequence->sq_length == NULL)) {
        *out = 1;   /* neither __bool__ nor __len__: true (the type is guarded) */
        return TR_OK;
    }
    return cdyn_tx_unsupported(tx, "truth value of %S", v);
}

/* ---- user iterators: a class with a Python __next__ --------------------------------------
 * iter(obj) inlines obj's __iter__; when it gives an iterator (itself, as a class defining
 * both usually does, or another such object), FOR_ITER / next() inline its __next__, one
 * item per step, interleaved with the loop body as in eager; a StopIteration raised by it
 * ends the iteration. */

int
cdyn_uobj_is_iterator(PyObject *v)
{
    PyTypeObject *t = cdyn_user_is_instance(v) ? cdyn_user_type(v) : NULL;
    PyObject *d = t != NULL ? _PyType_Lookup(t, cdyn_U.s_next) : NULL;
    return d != NULL && PyFunction_Check(d);
}

tr_status
cdyn_uobj_next(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    int found = 0, stop;
    tr_status st = cdyn_uobj_call_dunder(tx, v, cdyn_U.s_next, NULL, 0, out, &found);
    if (!found) {
        return cdyn_tx_unsupported(tx, "next() of %S", v);
    }
    if (st != TR_EXCEPTION) {
        return st;
    }
    stop = tx->exc != NULL && V(tx->exc)->kind == VK_EXC &&
           PyType_Check(V(tx->exc)->u.exc.type) &&
           PyType_IsSubtype((PyTypeObject *)V(tx->exc)->u.exc.type,
                            (PyTypeObject *)PyExc_StopIteration);
    if (!stop) {
        return TR_EXCEPTION;
    }
    Py_CLEAR(tx->exc);   /* exhausted */
    Py_CLEAR(tx->reason);
    *out = NULL;
    return TR_OK;
}

tr_status
cdyn_uobj_iter(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    PyObject *r = NULL;
    int found = 0;
    tr_status st;
    if (!cdyn_user_is_instance(v)) {
        return TR_NOTIMPL;
    }
    st = cdyn_uobj_call_dunder(tx, v, cdyn_U.s_iter, NULL, 0, &r, &found);
    if (!found) {
        return TR_NOTIMPL;   /* a builtin base's or a mirror's items (cdyn_uobj_unpack) */
    }
    if (st != TR_OK) {
        return st;
    }
    if (cdyn_v_is_iterator(r)) {
        *out = r;
        return TR_OK;
    }
    st = cdyn_v_iter(tx, r, out);
    Py_DECREF(r);
    return st;
}

/* The items an iterator value gives until it is exhausted (at most 100000: an endless one is
 * a graph break). *out_list a new list. */
static tr_status
drain(cdyn_tx *tx, PyObject *it, PyObject **out_list)
{
    PyObject *items = PyList_New(0), *x = NULL;
    tr_status st = items != NULL ? TR_OK : TR_ERROR;
    for (int n = 0; st == TR_OK; n++) {
        if (n == 100000) {
            st = cdyn_tx_unsupported(tx, "iteration over %S (no end found)", it);
            break;
        }
        st = cdyn_v_next(tx, it, &x);
        if (st != TR_OK || x == NULL) {
            break;
        }
        if (PyList_Append(items, x) < 0) {
            st = TR_ERROR;
        }
        Py_CLEAR(x);
    }
    if (st != TR_OK) {
        Py_XDECREF(items);
        return st;
    }
    *out_list = items;
    return TR_OK;
}

tr_status
cdyn_uobj_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    PyObject *r = NULL, *b;
    int found = 0;
    tr_status st = cdyn_uobj_call_dunder(tx, v, cdyn_U.s_iter, NULL, 0, &r, &found);
    if (found) {
        if (st == TR_OK) {
            st = cdyn_v_is_iterator(r) ? drain(tx, r, out_list) : cdyn_v_unpack(tx, r, out_list);
        }
        Py_XDECREF(r);
        return st;
    }
    if ((b = builtin_base(v, cdyn_U.s_iter)) != NULL) {
        return cdyn_v_unpack(tx, b, out_list);
    }
    if ((st = mirror_for(tx, v, cdyn_U.s_iter, &b)) != TR_NOTIMPL) {
        if (st == TR_OK) {
            st = cdyn_v_unpack(tx, b, out_list);
            Py_DECREF(b);
        }
        return st;
    }
    if (is_mappingproxy(v)) {   /* its keys, guarded */
        st = mappingproxy_list(tx, v, 0, &r);
        if (st == TR_OK) {
            st = cdyn_v_unpack(tx, r, out_list);
        }
        Py_XDECREF(r);
        return st;
    }
    return cdyn_tx_unsupported(tx, "iteration over %S", v);
}

tr_status
cdyn_uobj_contains(cdyn_tx *tx, PyObject *v, PyObject *item, int *out)
{
    PyObject *r = NULL, *items = NULL, *b;
    int found = 0;
    tr_status st = cdyn_uobj_call_dunder(tx, v, cdyn_U.s_contains, &item, 1, &r, &found);
    if (found) {
        if (st == TR_OK) {
            st = cdyn_v_truth(tx, r, out);
        }
        Py_XDECREF(r);
        return st;
    }
    if ((b = builtin_base(v, cdyn_U.s_contains)) != NULL) {
        return cdyn_v_contains(tx, b, item, out);
    }
    if ((st = mirror_for(tx, v, cdyn_U.s_contains, &b)) != TR_NOTIMPL) {
        if (st == TR_OK) {
            st = cdyn_v_contains(tx, b, item, out);
            Py_DECREF(b);
        }
        return st;
    }
    if (is_mappingproxy(v)) {
        return mappingproxy_contains(tx, v, item, out);
    }
    if (_PyType_Lookup(cdyn_user_type(v), cdyn_U.s_iter) == NULL) {
        return cdyn_tx_unsupported(tx, "'in' of %S", v);
    }
    /* no __contains__: iterate, comparing by identity then == (as PySequence_Contains) */
    st = cdyn_uobj_unpack(tx, v, &items);
    *out = 0;
    for (Py_ssize_t i = 0; st == TR_OK && !*out && i < PyList_GET_SIZE(items); i++) {
        PyObject *e = PyList_GET_ITEM(items, i), *eq = NULL, *saved = tx->reason;
        int same = 0;
        tx->reason = NULL;   /* an undecidable identity is no failure here */
        if (cdyn_v_is(tx, e, item, &same) == TR_OK && same) {
            Py_XSETREF(tx->reason, saved);
            *out = 1;
            break;
        }
        Py_XSETREF(tx->reason, saved);
        st = cdyn_v_compare(tx, Py_EQ, e, item, &eq);
        if (st == TR_OK) {
            st = cdyn_v_truth(tx, eq, out);
        }
        Py_XDECREF(eq);
    }
    Py_XDECREF(items);
    return st;
}

tr_status
cdyn_user_hash(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    int found = 0;
    tr_status st;
    if (!cdyn_user_is_instance(v)) {
        return cdyn_tx_unsupported(tx, "hash() of %S", v);
    }
    st = cdyn_uobj_call_dunder(tx, v, cdyn_U.s_hash, NULL, 0, out, &found);
    if (!found) {
        return cdyn_tx_unsupported(tx, "hash() of %S (an identity hash)", v);
    }
    if (st == TR_OK && (V(*out)->kind != VK_CONST || !PyLong_Check(V(*out)->u.cnst.value))) {
        Py_CLEAR(*out);
        return cdyn_tx_unsupported(tx, "__hash__ of %S did not return an int", v);
    }
    if (st == TR_OK) {
        /* hash() reduces the int as the slot does: the int's own hash (-1 becomes -2) */
        Py_hash_t h = PyObject_Hash(V(*out)->u.cnst.value);
        Py_SETREF(*out, h == -1 ? NULL : cdyn_value_const_steal(PyLong_FromSsize_t(h)));
        st = *out ? TR_OK : TR_ERROR;
    }
    return st;
}

tr_status
cdyn_uobj_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames, PyObject **out)
{
    PyObject *f = _PyType_Lookup(cdyn_user_type(v), cdyn_U.s_call);
    tr_status st;
    if (cdyn_newmod_is_module(v)) {
        return cdyn_newmod_call(tx, fs, v, args, nargs, kwnames, out);   /* newmodule.c */
    }
    if (f == NULL || !PyFunction_Check(f)) {
        return cdyn_tx_unsupported(tx, "call to %S", v);
    }
    if ((st = cdyn_uobj_guard_type_member(tx, v, cdyn_U.s_call)) != TR_OK) {
        return st;
    }
    return cdyn_tx_inline_function(tx, f, NULL, v, args, nargs, kwnames, out);
}

tr_status
cdyn_uobj_enter(cdyn_tx *tx, PyObject *v, PyObject **exit_fn, PyObject **result)
{
    PyTypeObject *t = cdyn_user_type(v);
    PyObject *en = _PyType_Lookup(t, cdyn_U.s_enter), *ex = _PyType_Lookup(t, cdyn_U.s_exit);
    tr_status st;
    if (en == NULL || ex == NULL || !PyFunction_Check(en) || !PyFunction_Check(ex)) {
        return cdyn_tx_unsupported(tx, "with-block over %S (no Python __enter__/__exit__)", v);
    }
    if ((st = cdyn_uobj_guard_type_member(tx, v, cdyn_U.s_enter)) != TR_OK ||
        (st = cdyn_uobj_guard_type_member(tx, v, cdyn_U.s_exit)) != TR_OK) {
        return st;
    }
    st = cdyn_tx_inline_function(tx, en, NULL, v, NULL, 0, NULL, result);
    if (st != TR_OK) {
        return st;
    }
    *exit_fn = cdyn_value_method(ex, cdyn_U.s_exit, v);
    if (*exit_fn == NULL) {
        Py_CLEAR(*result);
        return TR_ERROR;
    }
    return TR_OK;
}

/* ---- operators ------------------------------------------------------------------------------------ */

static const char *const binop_names[13] = {"add", "and", "floordiv", "lshift", "matmul", "mul",
                                            "mod", "or", "pow", "rshift", "sub", "truediv",
                                            "xor"};

/* Try type(self).<name>(self, other): *done = 1 with *out set when it returned something
 * other than NotImplemented. A builtin slot of that name is unsupported. */
static tr_status
try_operator(cdyn_tx *tx, PyObject *self, const char *fmt, const char *op, PyObject *other,
             PyObject **out, int *done)
{
    PyObject *name = PyUnicode_FromFormat(fmt, op), *d = NULL, *r = NULL;
    int k;
    tr_status st = TR_OK;
    *done = 0;
    if (name == NULL) {
        return TR_ERROR;
    }
    k = dunder_kind(cdyn_user_type(self), name, &d);
    if (k == DUNDER_OTHER && builtin_base(self, name) == NULL) {
        st = cdyn_tx_unsupported(tx, "%U of %S is a builtin slot", name, self);
    }
    else if (k == DUNDER_PYTHON && (st = cdyn_uobj_guard_type_member(tx, self, name)) == TR_OK) {
        st = cdyn_tx_inline_function(tx, d, NULL, self, &other, 1, NULL, &r);
        if (st == TR_OK && !(V(r)->kind == VK_CONST && V(r)->u.cnst.value == Py_NotImplemented)) {
            *out = r;
            r = NULL;
            *done = 1;
        }
        Py_XDECREF(r);
    }
    Py_DECREF(name);
    return st;
}

/* For an operator on v: v itself when it is not an instance value, the value holding its
 * items when it is a NEWOBJ of a list/set/dict subclass whose type defines none of the
 * operator's dunders (fmt1, fmt2 formatted with op; fmt2 may be NULL) in Python (borrowed),
 * else NULL. */
static PyObject *
operator_operand(PyObject *v, const char *fmt1, const char *fmt2, const char *op)
{
    const char *fmts[2] = {fmt1, fmt2};
    PyObject *b;
    if (!cdyn_user_is_instance(v)) {
        return v;
    }
    if (V(v)->kind != VK_NEWOBJ || (b = V(v)->u.uobj.base) == NULL) {
        return NULL;
    }
    for (int i = 0; i < 2 && fmts[i] != NULL; i++) {
        PyObject *name = PyUnicode_FromFormat(fmts[i], op), *d;
        if (name == NULL) {
            PyErr_Clear();
            return NULL;
        }
        d = _PyType_Lookup(cdyn_user_type(v), name);
        Py_DECREF(name);
        if (d != NULL && PyFunction_Check(d)) {
            return NULL;
        }
    }
    return b;
}

/* The operator symbols of binop_names, as CPython's TypeError names them. */
static const char *const binop_symbols[13] = {"+", "&", "//", "<<", "@", "*", "%", "|",
                                              "** or pow()", ">>", "-", "/", "^"};

/* 1 when an operator between the user instance `inst` and `other` can only end in
 * CPython's TypeError once inst's dunders gave NotImplemented: other is of an exact builtin
 * type whose operators give NotImplemented for a foreign operand (an int, a tuple, a list,
 * ...; cdyn_type_decides_operators) and inst's class derives from no builtin type and has no
 * __index__ (a repetition `[1] * inst`). other_left: other is the left operand of a binary
 * operator, where a str, bytes, list or tuple words its own error ("can only concatenate
 * ..."): 0 then. */
static int
only_type_error(PyObject *inst, PyObject *other, int other_left)
{
    PyTypeObject *t = cdyn_user_type(inst), *ot = cdyn_v_python_type(other);
    if (t == NULL || ot == NULL || t->tp_mro == NULL || !cdyn_type_decides_operators(ot) ||
        (t->tp_as_number != NULL && t->tp_as_number->nb_index != NULL) ||
        (other_left && (ot == &PyUnicode_Type || ot == &PyBytes_Type || ot == &PyList_Type ||
                        ot == &PyTuple_Type))) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t->tp_mro); i++) {
        PyTypeObject *m = (PyTypeObject *)PyTuple_GET_ITEM(t->tp_mro, i);
        if (!(m->tp_flags & Py_TPFLAGS_HEAPTYPE) && m != &PyBaseObject_Type) {
            return 0;   /* a builtin base (int, list, ...) may take the operator */
        }
    }
    return 1;
}

tr_status
cdyn_uobj_binop(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    int ia = cdyn_user_is_instance(a), ib = cdyn_user_is_instance(b), done = 0;
    int inplace = op >= 13, same;
    const char *nm = binop_names[inplace ? op - 13 : op];
    PyObject *ba, *bb;
    tr_status st = TR_OK;
    if (!ia && !ib) {
        return TR_NOTIMPL;
    }
    ba = operator_operand(a, inplace ? "__i%s__" : "__%s__", inplace ? "__%s__" : NULL, nm);
    bb = operator_operand(b, "__r%s__", "__%s__", nm);
    if (ba != NULL && bb != NULL) {
        /* list/set/dict subclasses leaving the operator to their builtin base: the base's
           operator on the items (a new plain container; in place: the object itself) */
        st = cdyn_v_binop(tx, op, ba, bb, out);
        if (st == TR_OK && *out == ba && ba != a) {
            Py_SETREF(*out, Py_NewRef(a));
        }
        return st;
    }
    same = ia && ib && cdyn_user_type(a) == cdyn_user_type(b);
    if (ia && inplace) {
        st = try_operator(tx, a, "__i%s__", nm, b, out, &done);
    }
    if (st == TR_OK && !done && ia) {
        st = try_operator(tx, a, "__%s__", nm, b, out, &done);
    }
    if (st == TR_OK && !done && ib && !same) {
        st = try_operator(tx, b, "__r%s__", nm, a, out, &done);
    }
    if (st == TR_OK && !done && ia != ib && only_type_error(ia ? a : b, ia ? b : a, ib)) {
        /* NotImplemented both ways: eager's TypeError, in the traced code */
        PyTypeObject *ta = cdyn_v_python_type(a), *tb = cdyn_v_python_type(b);
        return cdyn_tx_raise_text(tx, PyExc_TypeError,
                                  "unsupported operand type(s) for %s%s: '%s' and '%s'",
                                  binop_symbols[inplace ? op - 13 : op], inplace ? "=" : "",
                                  ta->tp_name, tb->tp_name);
    }
    if (st == TR_OK && !done) {
        return cdyn_tx_unsupported(tx, "operator %s on %S and %S", nm, a, b);
    }
    return st;
}

static const char *const cmp_names[6] = {"lt", "le", "eq", "ne", "gt", "ge"};

/* One side of a rich comparison: type(self).__op__(self, other), with object.__ne__
 * inverting __eq__. *done = 1 when it gave something other than NotImplemented. */
static tr_status
compare_side(cdyn_tx *tx, PyObject *self, int op, PyObject *other, PyObject **out, int *done)
{
    PyObject *name = PyUnicode_FromFormat("__%s__", cmp_names[op]), *d = NULL, *r = NULL;
    int k, truth = 0;
    tr_status st;
    if (name == NULL) {
        return TR_ERROR;
    }
    k = dunder_kind(cdyn_user_type(self), name, &d);
    Py_DECREF(name);
    if (op != Py_NE || k != DUNDER_DEFAULT) {
        return try_operator(tx, self, "__%s__", cmp_names[op], other, out, done);
    }
    st = try_operator(tx, self, "__%s__", "eq", other, &r, done);
    if (st == TR_OK && *done) {
        st = cdyn_v_truth(tx, r, &truth);
        *out = st == TR_OK ? cdyn_value_bool(!truth) : NULL;
        if (st == TR_OK && *out == NULL) {
            st = TR_ERROR;
        }
    }
    Py_XDECREF(r);
    return st;
}

/* operator_operand for a comparison, also seeing through an OBJECT of the frame that is a
 * list / tuple subclass's instance whose class defines no Python `name_op` dunder: the
 * mirror of its items (cdyn_uobj_items), so MyTuple(...) != MyTuple(...) compares the
 * items as tuple's own comparison does. *out borrowed (NULL: no such operand). */
static tr_status
compare_operand(cdyn_tx *tx, PyObject *v, const char *op, PyObject **out)
{
    PyObject *obj, *name, *d, *items = NULL;
    tr_status st;
    *out = operator_operand(v, "__%s__", NULL, op);
    if (*out != NULL || V(v)->kind != VK_OBJECT || V(v)->source == NULL) {
        return TR_OK;
    }
    obj = V(v)->u.obj.obj;
    if (!PyList_Check(obj) && !PyTuple_Check(obj)) {
        return TR_OK;
    }
    if ((name = PyUnicode_FromFormat("__%s__", op)) == NULL) {
        return TR_ERROR;
    }
    d = _PyType_Lookup(Py_TYPE(obj), name);
    Py_DECREF(name);
    if (d != NULL && PyFunction_Check(d)) {
        return TR_OK;
    }
    st = cdyn_uobj_items(tx, v, &items);
    if (st == TR_OK) {
        *out = items;     /* held by v (u.dobj.items) */
        Py_DECREF(items);
    }
    return st == TR_NOTIMPL ? TR_OK : st;
}

tr_status
cdyn_uobj_compare(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    static const int swapped[6] = {Py_GT, Py_GE, Py_EQ, Py_NE, Py_LT, Py_LE};
    int ia = cdyn_user_is_instance(a), ib = cdyn_user_is_instance(b), done = 0, same = 0;
    PyObject *ba, *bb;
    tr_status st = TR_OK;
    if (!ia && !ib) {
        return TR_NOTIMPL;
    }
    if ((st = compare_operand(tx, a, cmp_names[op], &ba)) != TR_OK ||
        (st = compare_operand(tx, b, cmp_names[swapped[op]], &bb)) != TR_OK) {
        return st;
    }
    if (ba != NULL && bb != NULL) {
        return cdyn_v_compare(tx, op, ba, bb, out);   /* the builtin bases' comparison */
    }
    if (ia) {
        st = compare_side(tx, a, op, b, out, &done);
    }
    if (st == TR_OK && !done && ib) {
        st = compare_side(tx, b, swapped[op], a, out, &done);
    }
    if (st != TR_OK || done) {
        return st;
    }
    if (op != Py_EQ && op != Py_NE && ia != ib && only_type_error(ia ? a : b, ia ? b : a, 0)) {
        static const char *const symbols[6] = {"<", "<=", "==", "!=", ">", ">="};
        return cdyn_tx_raise_text(tx, PyExc_TypeError,
                                  "'%s' not supported between instances of '%s' and '%s'",
                                  symbols[op], cdyn_v_python_type(a)->tp_name,
                                  cdyn_v_python_type(b)->tp_name);
    }
    if (op != Py_EQ && op != Py_NE) {
        return cdyn_tx_unsupported(tx, "comparison %s of %S and %S", cmp_names[op], a, b);
    }
    /* object's default: identity */
    st = cdyn_user_is(tx, a, b, &same);
    if (st == TR_NOTIMPL) {
        return cdyn_tx_unsupported(tx, "comparison of %S and %S", a, b);
    }
    if (st == TR_OK) {
        *out = cdyn_value_bool((op == Py_EQ) == (same != 0));
        st = *out ? TR_OK : TR_ERROR;
    }
    return st;
}

tr_status
cdyn_uobj_unary(cdyn_tx *tx, int opcode, PyObject *v, PyObject **out)
{
    const char *nm = opcode == UNARY_NEGATIVE ? "__neg__"
                     : opcode == UNARY_POSITIVE ? "__pos__" : "__invert__";
    PyObject *name = PyUnicode_FromString(nm);
    int found = 0;
    tr_status st;
    if (name == NULL) {
        return TR_ERROR;
    }
    st = cdyn_uobj_call_dunder(tx, v, name, NULL, 0, out, &found);
    Py_DECREF(name);
    if (!found) {
        return cdyn_tx_unsupported(tx, "%s of %S", nm, v);
    }
    return st;
}
