/* source.c: access paths from a frame to a value (see source.h).
 *
 * A source is an immutable object: its kind, a slot index or a name/key, an optional base
 * source, and its readable form computed once at construction. Evaluation walks the base
 * chain; LOCAL is a direct slot read, so the common guard costs one load and one incref.
 */
#include "source.h"
#include "bytecode.h"

/* ---- the type ---------------------------------------------------------------------- */

/* Release the fields of an unreachable source. Sources cannot form cycles (the base
 * chain is built bottom-up and never mutated), so the type is not tracked by the GC. */
static void
source_dealloc(cdyn_source *self)
{
    Py_XDECREF(self->name);
    Py_XDECREF(self->base);
    Py_XDECREF(self->repr);
    PyObject_Free(self);
}

/* repr(source): new reference to the cached readable form. */
static PyObject *
source_repr_slot(cdyn_source *self)
{
    return Py_NewRef(self->repr);
}

/* Hash of the readable form, so that equal paths hash alike. */
static Py_hash_t
source_hash(cdyn_source *self)
{
    return PyObject_Hash(self->repr);
}

/* ==, != compare readable forms; other operators are not supported. */
static PyObject *
source_richcompare(PyObject *a, PyObject *b, int op)
{
    if (!cdyn_Source_Check(b) || (op != Py_EQ && op != Py_NE)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    int eq = cdyn_source_equal(a, b);
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static const char *const kind_names[] = {"local", "global", "closure", "attr", "item", "const",
                                         "call", "tprop", "entry", "cell"};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == CDYN_SRC_CELL + 1,
               "one name per source kind");

/* source.kind: new str naming the kind. */
static PyObject *
source_get_kind(cdyn_source *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(kind_names[self->kind]);
}

/* source.base: the base source or None (new reference). */
static PyObject *
source_get_base(cdyn_source *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->base ? (PyObject *)self->base : Py_None);
}

/* source.name: the variable name, attribute name or item key (new reference). */
static PyObject *
source_get_name(cdyn_source *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->name ? self->name : Py_None);
}

/* source.index: the slot index (LOCAL, CLOSURE) or -1. */
static PyObject *
source_get_index(cdyn_source *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(self->index);
}

static PyGetSetDef source_getset[] = {
    {"kind", (getter)source_get_kind, NULL,
     "local, global, closure, attr, item, const, call, tprop or entry", NULL},
    {"base", (getter)source_get_base, NULL, "base source (attr, item) or None", NULL},
    {"name", (getter)source_get_name, NULL, "name, item key or the constant", NULL},
    {"index", (getter)source_get_index, NULL, "slot index (local, closure) or -1", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject cdyn_SourceType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cdynamo._C.Source",
    .tp_basicsize = sizeof(cdyn_source),
    .tp_dealloc = (destructor)source_dealloc,
    .tp_repr = (reprfunc)source_repr_slot,
    .tp_str = (reprfunc)source_repr_slot,
    .tp_hash = (hashfunc)source_hash,
    .tp_richcompare = source_richcompare,
    .tp_getset = source_getset,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .tp_doc = "An access path from a frame to a value (immutable).",
};

/* ---- constructors ------------------------------------------------------------------ */

/* Allocate a source. name and base are borrowed (may be NULL); repr is stolen (NULL means
 * a failed format: the error is propagated). Returns a new reference or NULL. */
static PyObject *
source_make(cdyn_source_kind kind, int index, PyObject *name, PyObject *base, PyObject *repr)
{
    cdyn_source *s = NULL;
    if (repr == NULL) {
        return NULL;
    }
    s = PyObject_New(cdyn_source, &cdyn_SourceType);
    if (s == NULL) {
        Py_DECREF(repr);
        return NULL;
    }
    s->kind = kind;
    s->index = index;
    s->name = Py_XNewRef(name);
    s->base = (cdyn_source *)Py_XNewRef(base);
    s->repr = repr;
    return (PyObject *)s;
}

/* 0 when name is a str, else -1 with TypeError naming the constructor. */
static int
require_str(PyObject *name, const char *who)
{
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "%s: name must be str, not %.100s", who,
                     Py_TYPE(name)->tp_name);
        return -1;
    }
    return 0;
}

/* 0 when base is a source, else -1 with TypeError. */
static int
require_source(PyObject *base, const char *who)
{
    if (!cdyn_Source_Check(base)) {
        PyErr_Format(PyExc_TypeError, "%s: base must be a Source, not %.100s", who,
                     Py_TYPE(base)->tp_name);
        return -1;
    }
    return 0;
}

PyObject *
cdyn_source_local(int index, PyObject *name)
{
    if (require_str(name, "cdyn_source_local") < 0) {
        return NULL;
    }
    return source_make(CDYN_SRC_LOCAL, index, name, NULL, PyUnicode_FromFormat("L[%R]", name));
}

PyObject *
cdyn_source_global(PyObject *name)
{
    if (require_str(name, "cdyn_source_global") < 0) {
        return NULL;
    }
    return source_make(CDYN_SRC_GLOBAL, -1, name, NULL, PyUnicode_FromFormat("G[%R]", name));
}

PyObject *
cdyn_source_closure(int index, PyObject *name)
{
    if (require_str(name, "cdyn_source_closure") < 0) {
        return NULL;
    }
    return source_make(CDYN_SRC_CLOSURE, index, name, NULL, PyUnicode_FromFormat("C[%R]", name));
}

PyObject *
cdyn_source_cell(int index, PyObject *name)
{
    if (require_str(name, "cdyn_source_cell") < 0) {
        return NULL;
    }
    return source_make(CDYN_SRC_CELL, index, name, NULL, PyUnicode_FromFormat("CELL[%R]", name));
}

PyObject *
cdyn_source_attr(PyObject *base, PyObject *name)
{
    if (require_source(base, "cdyn_source_attr") < 0 || require_str(name, "cdyn_source_attr") < 0) {
        return NULL;
    }
    PyObject *repr = PyUnicode_FromFormat("%U.%U", cdyn_source_repr(base), name);
    return source_make(CDYN_SRC_ATTR, -1, name, base, repr);
}

/* 1 when repr(key) identifies the key: int, str, float, bytes, None, bool, tuples of them. */
static int
repr_names_key(PyObject *key)
{
    if (PyTuple_CheckExact(key)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(key); i++) {
            if (!repr_names_key(PyTuple_GET_ITEM(key, i))) {
                return 0;
            }
        }
        return 1;
    }
    return PyLong_CheckExact(key) || PyUnicode_CheckExact(key) || PyFloat_CheckExact(key) ||
           PyBytes_CheckExact(key) || key == Py_None || PyBool_Check(key);
}

PyObject *
cdyn_source_entry(PyObject *base, Py_ssize_t index, int value)
{
    PyObject *which, *repr;
    if (require_source(base, "cdyn_source_entry") < 0) {
        return NULL;
    }
    if (index < 0 || index > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "cdyn_source_entry: bad index");
        return NULL;
    }
    which = PyLong_FromLong(value != 0);
    repr = PyUnicode_FromFormat("list(%U.%s())[%zd]", cdyn_source_repr(base),
                                value ? "values" : "keys", index);
    if (which == NULL) {
        Py_XDECREF(repr);
        return NULL;
    }
    PyObject *s = source_make(CDYN_SRC_ENTRY, (int)index, which, base, repr);
    Py_DECREF(which);
    return s;
}

PyObject *
cdyn_source_item(PyObject *base, PyObject *key)
{
    if (require_source(base, "cdyn_source_item") < 0) {
        return NULL;
    }
    if (PyObject_Hash(key) == -1) {
        return NULL;
    }
    /* a key whose repr names it exactly prints as itself; any other (a class, an enum
       member used as a dict key) by its address: the source keeps it alive */
    PyObject *repr = repr_names_key(key)
                         ? PyUnicode_FromFormat("%U[%R]", cdyn_source_repr(base), key)
                         : PyUnicode_FromFormat("%U[<%s at %p>]", cdyn_source_repr(base),
                                                Py_TYPE(key)->tp_name, (void *)key);
    return source_make(CDYN_SRC_ITEM, -1, key, base, repr);
}

PyObject *
cdyn_source_const(PyObject *obj, PyObject *label)
{
    /* Two different objects must never share a readable form (guards are deduplicated by
     * it), so an unnamed constant is named by its address; the source keeps it alive. */
    PyObject *repr = PyUnicode_Check(label) ? PyUnicode_FromFormat("G@%U", label)
                                            : PyUnicode_FromFormat("G@<%s at %p>",
                                                                   Py_TYPE(obj)->tp_name,
                                                                   (void *)obj);
    return source_make(CDYN_SRC_CONST, -1, obj, NULL, repr);
}

PyObject *
cdyn_source_call(PyObject *fn, PyObject *base, const char *label)
{
    if (require_source(base, "cdyn_source_call") < 0) {
        return NULL;
    }
    PyObject *repr = PyUnicode_FromFormat("%s(%U)", label, cdyn_source_repr(base));
    return source_make(CDYN_SRC_CALL, -1, fn, base, repr);
}

PyObject *
cdyn_source_tprop(PyObject *base, int prop, int dim)
{
    static const char *const methods[3] = {"size", "stride", "storage_offset"};
    PyObject *name = NULL, *repr = NULL, *res = NULL;
    if (require_source(base, "cdyn_source_tprop") < 0) {
        return NULL;
    }
    if (prop < 0 || prop > 2 || (prop < 2 && dim < 0)) {
        PyErr_SetString(PyExc_ValueError, "cdyn_source_tprop: bad property");
        return NULL;
    }
    name = PyUnicode_FromString(methods[prop]);
    if (name == NULL) {
        return NULL;
    }
    repr = prop == 2 ? PyUnicode_FromFormat("%U.storage_offset()", cdyn_source_repr(base))
                     : PyUnicode_FromFormat("%U.%s()[%d]", cdyn_source_repr(base), methods[prop],
                                            dim);
    res = source_make(CDYN_SRC_TPROP, prop == 2 ? -1 : dim, name, base, repr);
    Py_DECREF(name);
    return res;
}

int
cdyn_source_equal(PyObject *a, PyObject *b)
{
    PyObject *ra = cdyn_source_repr(a), *rb = cdyn_source_repr(b);
    if (a == b || ra == rb) {
        return 1;
    }
    /* Both are exact str; comparing str never fails. */
    return PyUnicode_Compare(ra, rb) == 0;
}

/* ---- evaluation -------------------------------------------------------------------- */

/* base[key] with a fast path for exact lists and tuples indexed by an int.
 * container and key borrowed; new reference or NULL. */
static PyObject *
item_get(PyObject *container, PyObject *key)
{
    if (PyLong_CheckExact(key) && (PyList_CheckExact(container) || PyTuple_CheckExact(container))) {
        Py_ssize_t i = PyLong_AsSsize_t(key);
        if (i == -1 && PyErr_Occurred()) {
            return NULL;
        }
        Py_ssize_t n = Py_SIZE(container);
        if (i < 0) {
            i += n;
        }
        if (i < 0 || i >= n) {
            PyErr_SetString(PyExc_IndexError, "index out of range");
            return NULL;
        }
        PyObject *v = PyList_CheckExact(container) ? PyList_GET_ITEM(container, i)
                                                   : PyTuple_GET_ITEM(container, i);
        return Py_NewRef(v);
    }
    return PyObject_GetItem(container, key);
}

/* The index-th key (or value) of a dict in iteration order; new reference or NULL with
 * IndexError (or the error of iterating). */
static PyObject *
entry_get(PyObject *d, Py_ssize_t index, int value)
{
    PyObject *k, *v, *it = NULL, *view = NULL, *r = NULL;
    Py_ssize_t pos = 0, i = 0;
    if (PyDict_CheckExact(d)) {
        while (PyDict_Next(d, &pos, &k, &v)) {
            if (i++ == index) {
                return Py_NewRef(value ? v : k);
            }
        }
        PyErr_SetString(PyExc_IndexError, "dict entry index out of range");
        return NULL;
    }
    view = PyObject_CallMethod(d, value ? "values" : "keys", NULL);
    it = view ? PyObject_GetIter(view) : NULL;
    while (it != NULL && (r = PyIter_Next(it)) != NULL && i++ < index) {
        Py_CLEAR(r);
    }
    Py_XDECREF(it);
    Py_XDECREF(view);
    if (r == NULL && !PyErr_Occurred()) {
        PyErr_SetString(PyExc_IndexError, "dict entry index out of range");
    }
    return r;
}

/* mapping[name] for a dict (fast) or any mapping; NULL without an exception when the
 * name is missing, NULL with one on error. Returns a new reference. */
static PyObject *
mapping_lookup(PyObject *mapping, PyObject *name)
{
    PyObject *v = NULL;
    if (PyDict_CheckExact(mapping)) {
        v = PyDict_GetItemWithError(mapping, name);
        return Py_XNewRef(v);
    }
    v = PyObject_GetItem(mapping, name);
    if (v == NULL && PyErr_ExceptionMatches(PyExc_KeyError)) {
        PyErr_Clear();
    }
    return v;
}

/* ---- plain objects: attribute reads that run no Python code --------------------------
 * An object whose type reads attributes with object's generic lookup, or through Python
 * __getattribute__ overrides known to delegate to it (transformers' configs:
 * PreTrainedConfig maps the name through the `attribute_map` dict, then delegates;
 * HeterogeneousConfigMixin delegates while the instance has no `_heterogeneity_spec`), and
 * no __getattr__, reads a name from its type (data descriptors excepted: they run code) and
 * its instance dict. What the read consulted (type version tag, instance dict, attribute_map)
 * is recorded in a cdyn_attr_cache, so that a guard or a loader answers while the tags
 * match, absence included (hasattr), with no Python __getattribute__ call. */

enum { GA_OBJECT = 0, GA_ALIAS = CDYN_GA_ALIAS, GA_HETERO = CDYN_GA_HETERO, GA_UNKNOWN = -1 };

static PyObject *str_getattribute, *str_getattr, *str_dict_attr, *str_attribute_map,
    *str_hetero_spec, *str_class_attr;
static PyObject *object_getattribute;   /* object.__getattribute__ (borrowed from its dict) */
static PyObject *object_class_descr;    /* object.__class__ (borrowed from its dict) */
static PyObject *nn_module_getattr;     /* nn.Module.__getattr__, strong */
static PyObject *type_mro_descr;        /* type.__mro__ (borrowed from its dict) */

/* Which known __getattribute__ f is (GA_*), by identity for object's, else by module,
 * qualified name and the names its code uses (a changed implementation is not recognised). */
static int
ga_kind(PyObject *f)
{
    static const struct {
        const char *module, *qualname;
        int nnames;
        const char *names[7];
        int kind;
    } known[2] = {
        {"transformers.configuration_utils", "PreTrainedConfig.__getattribute__", 2,
         {"super", "__getattribute__"}, GA_ALIAS},
        {"transformers.integrations.heterogeneity.configuration_utils",
         "HeterogeneousConfigMixin.__getattribute__", 7,
         {"super", "__getattribute__", "get", "per_layer_attributes",
          "AmbiguousGlobalPerLayerAttributeError", "logger", "warning_once"}, GA_HETERO},
    };
    if (f == object_getattribute) {
        return GA_OBJECT;
    }
    if (!PyFunction_Check(f)) {
        return GA_UNKNOWN;
    }
    PyFunctionObject *fn = (PyFunctionObject *)f;
    PyCodeObject *co = (PyCodeObject *)fn->func_code;
    for (int k = 0; k < 2; k++) {
        if (fn->func_module == NULL || !PyUnicode_Check(fn->func_module) ||
            PyUnicode_CompareWithASCIIString(fn->func_module, known[k].module) != 0 ||
            !PyUnicode_Check(fn->func_qualname) ||
            PyUnicode_CompareWithASCIIString(fn->func_qualname, known[k].qualname) != 0 ||
            PyTuple_GET_SIZE(co->co_names) != known[k].nnames) {
            continue;
        }
        int same = 1;
        for (int i = 0; i < known[k].nnames && same; i++) {
            same = PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(co->co_names, i),
                                                    known[k].names[i]) == 0;
        }
        return same ? known[k].kind : GA_UNKNOWN;
    }
    return GA_UNKNOWN;
}

/* (source.h) Reads the MRO's class dicts only. */
int
cdyn_source_getattr_steps(PyTypeObject *tp)
{
    PyObject *mro = tp->tp_mro;
    int steps = 0;
    if (tp->tp_getattro == PyObject_GenericGetAttr) {
        return 0;
    }
    if (mro == NULL || !PyTuple_Check(mro) || _PyType_Lookup(tp, str_getattr) != NULL) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
        PyObject *k = PyTuple_GET_ITEM(mro, i);
        PyObject *d = PyType_Check(k) ? cdyn_type_dict((PyTypeObject *)k) : NULL;
        PyObject *f = d != NULL ? PyDict_GetItemWithError(d, str_getattribute) : NULL;
        if (f == NULL) {
            if (PyErr_Occurred()) {
                PyErr_Clear();
                return -1;
            }
            continue;
        }
        int kind = ga_kind(f);
        if (kind == GA_OBJECT) {
            return steps;
        }
        /* its super() must start after the class it was found in (its __class__ cell) */
        PyObject *cl = kind != GA_UNKNOWN ? ((PyFunctionObject *)f)->func_closure : NULL;
        if (kind == GA_UNKNOWN || (steps & kind) || cl == NULL || !PyTuple_Check(cl) ||
            PyTuple_GET_SIZE(cl) != 1 || PyCell_GET(PyTuple_GET_ITEM(cl, 0)) != k) {
            return -1;
        }
        steps |= kind;
    }
    return -1;
}

/* The attribute name a property forwards to, when descr is an exact property with no
 * setter-independent behaviour on reads but `return self.<name>` (a Python function of one
 * argument, no cells, whose code is exactly that): borrowed str, else NULL (no exception).
 * Its read is then the read of <name> on the same object, by object's generic lookup. */
static PyObject *
forwarded_name(PyObject *descr)
{
    static PyObject *getter;   /* "fget" */
    PyObject *fget = NULL, *res = NULL;
    if (Py_TYPE(descr) != &PyProperty_Type ||
        (getter == NULL && (getter = PyUnicode_InternFromString("fget")) == NULL)) {
        PyErr_Clear();
        return NULL;
    }
    fget = PyObject_GetAttr(descr, getter);
    if (fget != NULL && PyFunction_Check(fget)) {
        PyCodeObject *co = (PyCodeObject *)PyFunction_GET_CODE(fget);
        cdyn_instr_list l;
        int fits = co->co_argcount == 1 && co->co_kwonlyargcount == 0 && co->co_nlocalsplus == 1 &&
                   (co->co_flags & CO_OPTIMIZED) &&
                   !(co->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR |
                                     CO_ITERABLE_COROUTINE | CO_VARARGS | CO_VARKEYWORDS)) &&
                   PyTuple_GET_SIZE(co->co_names) == 1;
        /* RESUME 0; LOAD_FAST 0; LOAD_ATTR 0; RETURN_VALUE */
        static const int want[][2] = {{RESUME, 0}, {LOAD_FAST, 0}, {LOAD_ATTR, 0},
                                      {RETURN_VALUE, 0}};
        if (fits && cdyn_decode(co, &l) == 0) {
            int same = l.len == 4;
            for (Py_ssize_t i = 0; same && i < 4; i++) {
                same = l.items[i].opcode == want[i][0] && l.items[i].oparg == want[i][1];
            }
            cdyn_instrs_clear(&l);
            if (same && PyUnicode_CheckExact(PyTuple_GET_ITEM(co->co_names, 0))) {
                res = PyTuple_GET_ITEM(co->co_names, 0);   /* the code object holds it */
            }
        }
    }
    PyErr_Clear();
    Py_XDECREF(fget);
    return res;
}

/* object.__getattribute__(base, name) over the instance dict d (borrowed, may be NULL)
 * without running code: 1 with *out borrowed, 0 absent, -3 with *out the name a forwarding
 * property reads instead (forwarded_name), -2 not modelled (another data descriptor, or a
 * non-data descriptor that would bind), -1 error. */
static int
generic_lookup(PyObject *base, PyObject *d, PyObject *name, PyObject **out)
{
    PyObject *descr = _PyType_Lookup(Py_TYPE(base), name), *v = NULL;
    if (descr != NULL && descr == object_class_descr) {
        *out = (PyObject *)Py_TYPE(base);   /* obj.__class__: the exact type (recorded) */
        return 1;
    }
    if (descr != NULL && Py_TYPE(descr)->tp_descr_set != NULL) {
        if ((*out = forwarded_name(descr)) != NULL) {
            return -3;
        }
        return -2;
    }
    if (d != NULL && (v = PyDict_GetItemWithError(d, name)) != NULL) {
        *out = v;
        return 1;
    }
    if (PyErr_Occurred()) {
        return -1;
    }
    if (descr == NULL) {
        return 0;
    }
    if (Py_TYPE(descr)->tp_descr_get != NULL) {
        return -2;
    }
    *out = descr;
    return 1;
}

/* getattr(base, name) for a plain object (see above), recording what it read in *rec: 1
 * with *out borrowed (held by a dict the record names), 0 absent, -2 not modelled, -1 error. */
static int
plain_attr(PyObject *base, PyObject *name, cdyn_attr_cache *rec, PyObject **out)
{
    PyTypeObject *tp = Py_TYPE(base);
    int steps = cdyn_source_getattr_steps(tp), r;
    PyObject **dictptr, *d, *am = NULL;
    if (steps < 0 || !PyUnicode_CheckExact(name)) {
        return -2;
    }
    dictptr = cdyn_dict_ptr(base);
    d = dictptr != NULL ? *dictptr : NULL;
    if (d != NULL && !PyDict_CheckExact(d)) {
        return -2;
    }
    if ((steps & GA_HETERO) != 0) {
        PyObject *dd = _PyType_Lookup(tp, str_dict_attr);
        PyObject *spec = d != NULL ? PyDict_GetItemWithError(d, str_hetero_spec) : NULL;
        if (dd == NULL || Py_TYPE(dd) != &PyGetSetDescr_Type || (spec != NULL && spec != Py_None)) {
            return PyErr_Occurred() ? -1 : -2;
        }
        if (PyErr_Occurred()) {
            return -1;
        }
    }
    for (int hops = 0;; hops++) {   /* a forwarding property reads another name, once */
        if ((steps & GA_ALIAS) != 0 && PyUnicode_Compare(name, str_attribute_map) != 0) {
            PyObject *alias = NULL;
            r = am != NULL ? 1 : generic_lookup(base, d, str_attribute_map, &am);
            if (r != 1 || !PyDict_CheckExact(am)) {
                return r == -1 ? -1 : -2;
            }
            if ((alias = PyDict_GetItemWithError(am, name)) != NULL) {
                if (!PyUnicode_CheckExact(alias)) {
                    return -2;
                }
                name = alias;
            }
            else if (PyErr_Occurred()) {
                return -1;
            }
        }
        r = generic_lookup(base, d, name, out);
        if (r != -3) {
            break;
        }
        if (hops > 0) {
            return -2;
        }
        name = *out;
    }
    if (r >= 0 && cdyn_type_version_assigned(tp) != 0) {
        /* the lookups ran no Python code (str keys): the tags read now describe them */
        rec->type = tp;
        rec->type_tag = cdyn_type_version(tp);
        rec->dict = (PyDictObject *)d;
        rec->dict_tag = d != NULL ? cdyn_dict_version_tracked(d) : 0;
        rec->nsub = 0;
        if (am != NULL) {
            rec->sub[rec->nsub] = (PyDictObject *)am;
            rec->sub_tag[rec->nsub++] = cdyn_dict_version_tracked(am);
        }
        rec->absent = r == 0;
        rec->value = r == 1 ? *out : NULL;
        rec->stamp = 0;   /* not an nn.Module registry read (no tensor-guard skip) */
    }
    return r;
}

static PyObject *nn_module_type;   /* torch.nn.Module, or NULL when unavailable */
static PyObject *str_nn_dicts[3];   /* "_parameters", "_buffers", "_modules" */

/* Fill the type and instance-dict part of *rec after a read of base that ran no Python
 * code (the tags read now describe what it consulted). 0, or -1 when tp has no valid
 * version tag (nothing may be cached). */
static int
record_base(cdyn_attr_cache *rec, PyTypeObject *tp, PyObject *d)
{
    if (cdyn_type_version_assigned(tp) == 0) {
        return -1;
    }
    rec->type = tp;
    rec->type_tag = cdyn_type_version(tp);
    rec->dict = (PyDictObject *)d;
    rec->dict_tag = d != NULL ? cdyn_dict_version_tracked(d) : 0;
    return 0;
}

/* getattr(module, name) for an nn.Module without running Python code: a name the class
 * defines is read as object's generic lookup reads it (not a data descriptor, not a
 * binding one); any other name from the instance dict, then _parameters / _buffers /
 * _modules, where nn.Module.__getattr__ looks; absent when none has it and __getattr__ is
 * nn.Module's own. Records what it read in *rec (a stamp: see cdyn_attr_cache). 1 with
 * *out borrowed, 0 absent, -2 not modelled, -1 error. */
static int
nn_attr(PyObject *base, PyObject *name, cdyn_attr_cache *rec, PyObject **out)
{
    static uint64_t fills;
    PyTypeObject *tp = Py_TYPE(base);
    PyObject **dictptr = cdyn_dict_ptr(base);
    PyObject *d = dictptr ? *dictptr : NULL, *v = NULL;
    int r = 1;
    if (d == NULL || !PyDict_CheckExact(d) || !PyUnicode_CheckExact(name)) {
        return -2;
    }
    if (_PyType_Lookup(tp, name) != NULL) {
        if (_PyType_Lookup(tp, str_getattribute) != object_getattribute) {
            return -2;
        }
        r = generic_lookup(base, d, name, &v);
        if (r != 1) {
            return r == -1 ? -1 : -2;
        }
    }
    else if ((v = PyDict_GetItemWithError(d, name)) == NULL) {
        for (int i = 0; v == NULL && !PyErr_Occurred() && i < 3; i++) {
            PyObject *sub = PyDict_GetItemWithError(d, str_nn_dicts[i]);
            if (sub != NULL && PyDict_Check(sub)) {
                rec->sub[rec->nsub] = (PyDictObject *)sub;
                rec->sub_tag[rec->nsub++] = cdyn_dict_version_tracked(sub);
                v = PyDict_GetItemWithError(sub, name);
            }
        }
        if (PyErr_Occurred()) {
            return -1;
        }
        if (v == NULL && (_PyType_Lookup(tp, str_getattr) != nn_module_getattr ||
                          _PyType_Lookup(tp, str_getattribute) != object_getattribute)) {
            return -2;
        }
        r = v != NULL;
    }
    if (record_base(rec, tp, d) == 0) {
        rec->value = v;
        rec->absent = r == 0;
        rec->stamp = ++fills;
    }
    *out = v;
    return r;
}

/* getattr(cls, name) for a class whose metaclass reads attributes as type does (no
 * __getattr__): a name of the class's MRO that is a function or a plain value, else a
 * plain value of the metaclass; absent when neither has it. Records the metaclass and the
 * class with their version tags. 1 with *out borrowed, 0 absent, -2 not modelled, -1 error. */
static int
type_attr(PyObject *base, PyObject *name, cdyn_attr_cache *rec, PyObject **out)
{
    PyTypeObject *meta = Py_TYPE(base), *cls = (PyTypeObject *)base;
    PyObject *meta_attr, *attr;
    int r = 1;
    if (meta->tp_getattro != PyType_Type.tp_getattro || !PyUnicode_CheckExact(name)) {
        return -2;
    }
    meta_attr = _PyType_Lookup(meta, name);
    if (meta_attr != NULL && meta_attr == type_mro_descr && cls->tp_mro != NULL) {
        attr = cls->tp_mro;   /* cls.__mro__ (a new MRO changes cls's version tag) */
        *out = attr;
        goto record;
    }
    if (meta_attr != NULL && Py_TYPE(meta_attr)->tp_descr_set != NULL) {
        return -2;
    }
    attr = _PyType_Lookup(cls, name);
    if (attr != NULL) {
        /* read through a class, a function, a property and a method or slot descriptor
           give themselves; classmethod, staticmethod and others make or unwrap objects */
        PyTypeObject *at = Py_TYPE(attr);
        if (at->tp_descr_get != NULL && at != &PyFunction_Type && at != &PyProperty_Type &&
            at != &PyMethodDescr_Type && at != &PyWrapperDescr_Type) {
            return -2;
        }
        *out = attr;
    }
    else if (meta_attr != NULL) {
        if (Py_TYPE(meta_attr)->tp_descr_get != NULL) {
            return -2;
        }
        *out = meta_attr;
    }
    else {
        *out = NULL;
        r = 0;
    }
record:
    if (_PyType_Lookup(cls, str_class_attr) == NULL ||   /* gives cls a version tag */
        cdyn_type_version_assigned(cls) == 0 ||
        record_base(rec, meta, cdyn_type_dict(cls)) < 0) {
        return -2;
    }
    rec->cls = cls;
    rec->cls_tag = cdyn_type_version(cls);
    rec->value = *out;
    rec->absent = r == 0;
    rec->stamp = 0;
    return r;
}

/* getattr(base, name) with a fast path for nn.Module: instance __dict__, then the
 * _parameters / _buffers / _modules dicts, exactly where nn.Module.__getattr__ looks,
 * without running Python code. Used only when the type defines no attribute of that name
 * (so no descriptor can take precedence). Other objects take the plain-object path when
 * their type allows it. When c is not NULL and a fast path answered, *c is filled with
 * what the result depended on (cdyn_attr_cache). New reference; NULL + exception, or NULL
 * without one and *absent = 1 when absent is not NULL and the attribute is missing (an
 * AttributeError of the real read is then suppressed too). */
static PyObject *str_func_fields[5];   /* __code__ __defaults__ __kwdefaults__ __globals__
                                          __closure__ */
static PyObject *str_cell_contents;

/* 1 when the str name is the interned str s. */
static inline int
name_is(PyObject *name, PyObject *s)
{
    return name == s || (!PyUnicode_CHECK_INTERNED(name) && PyUnicode_Compare(name, s) == 0);
}

/* A field of a function or a cell read as its (read-only to lookup: data) descriptor reads
 * it, without the descriptor call: borrowed, or NULL (no exception) when name is not one
 * of them or a cell is empty. The types cannot be changed or subclassed. */
static PyObject *
c_field(PyObject *base, PyObject *name)
{
    if (PyFunction_Check(base)) {
        PyFunctionObject *f = (PyFunctionObject *)base;
        PyObject *vals[5] = {f->func_code, f->func_defaults, f->func_kwdefaults,
                             f->func_globals, f->func_closure};
        for (int i = 0; i < 5; i++) {
            if (name_is(name, str_func_fields[i])) {
                return vals[i] != NULL ? vals[i] : Py_None;
            }
        }
        return NULL;
    }
    if (PyCell_Check(base) && name_is(name, str_cell_contents)) {
        return PyCell_GET(base);
    }
    return NULL;
}

static PyObject *
attr_lookup(PyObject *base, PyObject *name, cdyn_attr_cache *c, int *absent)
{
    cdyn_attr_cache rec = {0};
    PyObject *v = NULL;
    int r;
    if ((PyFunction_Check(base) || PyCell_Check(base)) && PyUnicode_CheckExact(name) &&
        (v = c_field(base, name)) != NULL) {
        return Py_NewRef(v);
    }
    if (nn_module_type != NULL && PyObject_TypeCheck(base, (PyTypeObject *)nn_module_type)) {
        r = nn_attr(base, name, &rec, &v);
    }
    else if (PyType_Check(base)) {
        r = type_attr(base, name, &rec, &v);
    }
    else {
        r = plain_attr(base, name, &rec, &v);
    }
    if (r == -1) {
        return NULL;
    }
    if (r >= 0) {
        if (c != NULL && rec.type != NULL) {
            *c = rec;
        }
        if (r == 1) {
            return Py_NewRef(v);
        }
        if (absent != NULL) {
            *absent = 1;
            return NULL;
        }
        PyErr_SetObject(PyExc_AttributeError, name);
        return NULL;
    }
    if (absent != NULL) {
        if (cdyn_lookup_attr(base, name, &v) == 0) {
            *absent = 1;
        }
        return v;
    }
    return PyObject_GetAttr(base, name);
}

/* getattr(base, name) (see attr_lookup). */
static PyObject *
attr_get(PyObject *base, PyObject *name)
{
    return attr_lookup(base, name, NULL, NULL);
}

/* 1 when *c (filled) still describes base's read: same exact type and version tag, same
 * instance dict with its tag, every sub-dict's tag unchanged. */
static inline int
attr_cache_valid(PyObject *base, const cdyn_attr_cache *c)
{
    PyTypeObject *tp = Py_TYPE(base);
    if (tp != c->type || cdyn_type_version(tp) != c->type_tag || c->type_tag == 0) {
        return 0;
    }
    PyObject **dictptr = cdyn_dict_ptr(base);
    PyDictObject *d = dictptr ? (PyDictObject *)*dictptr : NULL;
    if (d != c->dict || (d != NULL && cdyn_dict_version((PyObject *)d) != c->dict_tag)) {
        return 0;
    }
    if (c->cls != NULL && (c->cls != (PyTypeObject *)base || c->cls_tag == 0 ||
                           cdyn_type_version(c->cls) != c->cls_tag)) {
        return 0;
    }
    /* d unchanged (or the type's dicts): they still hold the sub-dicts recorded */
    for (int i = 0; i < c->nsub; i++) {
        if (cdyn_dict_version((PyObject *)c->sub[i]) != c->sub_tag[i]) {
            return 0;
        }
    }
    return 1;
}

PyObject *
cdyn_source_attr_cached(PyObject *base, PyObject *name, cdyn_attr_cache *c)
{
    if ((c->value != NULL || c->absent) && attr_cache_valid(base, c)) {
        if (c->absent) {
            PyErr_SetObject(PyExc_AttributeError, name);
            return NULL;
        }
        return Py_NewRef(c->value);
    }
    memset(c, 0, sizeof(*c));
    return attr_lookup(base, name, c, NULL);
}

int
cdyn_source_hasattr_cached(PyObject *base, PyObject *name, cdyn_attr_cache *c)
{
    int absent = 0;
    PyObject *v;
    if ((c->value != NULL || c->absent) && attr_cache_valid(base, c)) {
        return !c->absent;
    }
    memset(c, 0, sizeof(*c));
    v = attr_lookup(base, name, c, &absent);
    if (v == NULL) {
        return absent ? 0 : -1;
    }
    Py_DECREF(v);
    return 1;
}

/* An attribute-chain loader: loader(obj) is getattr(getattr(obj, names[0]), names[1])...,
 * each step read as the guards read it (attr_get: nn.Module registries directly, no Python
 * __getattr__) and answered from its own version-tagged cache (cdyn_attr_cache) while the
 * module dicts it read are unchanged: the transformed code loads each parameter of a model at the cost of a few
 * pointer and tag compares per step instead of dict lookups. One per load site. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *names;            /* strong tuple of str, outermost first */
    cdyn_attr_cache *caches;    /* PyMem, one per name */
} attr_loader;

static PyObject *
attr_loader_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    attr_loader *l = (attr_loader *)self;
    PyObject *v;
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "attribute loader takes one object");
        return NULL;
    }
    v = Py_NewRef(args[0]);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(l->names) && v != NULL; i++) {
        PyObject *next = cdyn_source_attr_cached(v, PyTuple_GET_ITEM(l->names, i), &l->caches[i]);
        Py_DECREF(v);
        v = next;
    }
    return v;
}

static void
attr_loader_dealloc(PyObject *self)
{
    attr_loader *l = (attr_loader *)self;
    Py_XDECREF(l->names);
    PyMem_Free(l->caches);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *
attr_loader_repr(PyObject *self)
{
    return PyUnicode_FromFormat("<cdynamo attribute loader %R>", ((attr_loader *)self)->names);
}

static PyTypeObject attr_loader_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cdynamo._C.AttrLoader",
    .tp_basicsize = sizeof(attr_loader),
    .tp_dealloc = attr_loader_dealloc,
    .tp_repr = attr_loader_repr,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(attr_loader, vectorcall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
};

PyObject *
cdyn_source_attr_loader(PyObject *names)
{
    attr_loader *l = NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    if (PyType_Ready(&attr_loader_type) < 0 ||
        (l = PyObject_New(attr_loader, &attr_loader_type)) == NULL) {
        return NULL;
    }
    l->vectorcall = attr_loader_call;
    l->names = Py_NewRef(names);
    l->caches = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(cdyn_attr_cache));
    if (l->caches == NULL) {
        Py_DECREF(l);
        return PyErr_NoMemory();
    }
    return (PyObject *)l;
}

/* A bulk loader: loader(obj) reads several attribute chains of obj (the parameters and
 * buffers of a module tree) in one call, each distinct prefix once (a trie of steps, each
 * with its own version-tagged cache, read as attr_loader reads a step), and returns their
 * values in a tuple in reverse path order, so that UNPACK_SEQUENCE leaves the first path's
 * value deepest on the stack, as one load per path would. */
typedef struct {
    PyObject *name;             /* borrowed from the loader's paths */
    int parent;                 /* the node read before (a parent precedes its children);
                                   -1: the argument */
    cdyn_attr_cache cache;
} bulk_node;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *paths;            /* strong tuple of tuples of str, outermost name first */
    int nnodes;
    bulk_node *nodes;           /* PyMem */
    int *leaf;                  /* PyMem: the node of each path */
} bulk_loader;

#define BULK_STACK_NODES 256

static PyObject *
bulk_loader_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    bulk_loader *l = (bulk_loader *)self;
    PyObject *stack_vals[BULK_STACK_NODES], **vals = stack_vals, *res = NULL;
    Py_ssize_t npaths = PyTuple_GET_SIZE(l->paths);
    int done = 0;
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "attribute loader takes one object");
        return NULL;
    }
    if (l->nnodes > BULK_STACK_NODES &&
        (vals = PyMem_Malloc(sizeof(PyObject *) * (size_t)l->nnodes)) == NULL) {
        return PyErr_NoMemory();
    }
    for (; done < l->nnodes; done++) {
        bulk_node *n = &l->nodes[done];
        PyObject *base = n->parent < 0 ? args[0] : vals[n->parent];
        if ((vals[done] = cdyn_source_attr_cached(base, n->name, &n->cache)) == NULL) {
            goto done;
        }
    }
    if ((res = PyTuple_New(npaths)) != NULL) {
        for (Py_ssize_t k = 0; k < npaths; k++) {
            PyTuple_SET_ITEM(res, npaths - 1 - k, Py_NewRef(vals[l->leaf[k]]));
        }
    }
done:
    for (int i = 0; i < done; i++) {
        Py_DECREF(vals[i]);
    }
    if (vals != stack_vals) {
        PyMem_Free(vals);
    }
    return res;
}

static void
bulk_loader_dealloc(PyObject *self)
{
    bulk_loader *l = (bulk_loader *)self;
    Py_XDECREF(l->paths);
    PyMem_Free(l->nodes);
    PyMem_Free(l->leaf);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *
bulk_loader_repr(PyObject *self)
{
    return PyUnicode_FromFormat("<cdynamo attribute loader of %zd paths>",
                                PyTuple_GET_SIZE(((bulk_loader *)self)->paths));
}

static PyTypeObject bulk_loader_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cdynamo._C.BulkAttrLoader",
    .tp_basicsize = sizeof(bulk_loader),
    .tp_dealloc = bulk_loader_dealloc,
    .tp_repr = bulk_loader_repr,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(bulk_loader, vectorcall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
};

/* Build l's trie from l->paths. 0, or -1 with an exception. */
static int
bulk_build(bulk_loader *l)
{
    Py_ssize_t npaths = PyTuple_GET_SIZE(l->paths), total = 0;
    PyObject *index = PyDict_New();   /* (parent, name) -> node */
    int rc = -1;
    for (Py_ssize_t k = 0; k < npaths; k++) {
        total += PyTuple_GET_SIZE(PyTuple_GET_ITEM(l->paths, k));
    }
    l->nodes = PyMem_Calloc((size_t)(total > 0 ? total : 1), sizeof(bulk_node));
    l->leaf = PyMem_Calloc((size_t)(npaths > 0 ? npaths : 1), sizeof(int));
    if (index == NULL || l->nodes == NULL || l->leaf == NULL) {
        if (index != NULL) {
            PyErr_NoMemory();
        }
        goto done;
    }
    for (Py_ssize_t k = 0; k < npaths; k++) {
        PyObject *path = PyTuple_GET_ITEM(l->paths, k);
        int at = -1;
        if (PyTuple_GET_SIZE(path) == 0) {
            PyErr_SetString(PyExc_ValueError, "attribute loader: empty path");
            goto done;
        }
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(path); j++) {
            PyObject *name = PyTuple_GET_ITEM(path, j);
            PyObject *key = Py_BuildValue("(iO)", at, name), *found = NULL;
            if (key == NULL) {
                goto done;
            }
            found = PyDict_GetItemWithError(index, key);
            if (found != NULL) {
                at = (int)PyLong_AsLong(found);
            }
            else if (!PyErr_Occurred()) {
                PyObject *num = PyLong_FromLong(l->nnodes);
                if (num == NULL || PyDict_SetItem(index, key, num) < 0) {
                    Py_XDECREF(num);
                    Py_DECREF(key);
                    goto done;
                }
                Py_DECREF(num);
                l->nodes[l->nnodes].name = name;
                l->nodes[l->nnodes].parent = at;
                at = l->nnodes++;
            }
            Py_DECREF(key);
            if (PyErr_Occurred()) {
                goto done;
            }
        }
        l->leaf[k] = at;
    }
    rc = 0;
done:
    Py_XDECREF(index);
    return rc;
}

PyObject *
cdyn_source_attr_bulk_loader(PyObject *paths)
{
    bulk_loader *l = NULL;
    if (PyType_Ready(&bulk_loader_type) < 0 ||
        (l = PyObject_New(bulk_loader, &bulk_loader_type)) == NULL) {
        return NULL;
    }
    l->vectorcall = bulk_loader_call;
    l->paths = Py_NewRef(paths);
    l->nnodes = 0;
    l->nodes = NULL;
    l->leaf = NULL;
    if (bulk_build(l) < 0) {
        Py_DECREF(l);
        return NULL;
    }
    return (PyObject *)l;
}

PyObject *
cdyn_source_step(cdyn_source *s, PyObject *base)
{
    switch (s->kind) {
    case CDYN_SRC_ATTR:
        return attr_get(base, s->name);
    case CDYN_SRC_ITEM:
        return item_get(base, s->name);
    case CDYN_SRC_TPROP:
        return s->index >= 0 ? PyObject_CallMethod(base, PyUnicode_AsUTF8(s->name), "i", s->index)
                             : PyObject_CallMethodNoArgs(base, s->name);
    case CDYN_SRC_CALL:
        return PyObject_CallOneArg(s->name, base);
    case CDYN_SRC_ENTRY:
        return entry_get(base, s->index, s->name == Py_True || PyLong_AsLong(s->name) == 1);
    default:
        PyErr_SetString(PyExc_SystemError, "cdyn_source_step: a source without a base");
        return NULL;
    }
}

PyObject *
cdyn_source_eval(cdyn_source *s, PyObject *const *localsplus, PyFunctionObject *func,
                 PyObject *globals, PyObject *builtins)
{
    PyObject *base = NULL, *v = NULL;
    switch (s->kind) {
    case CDYN_SRC_LOCAL:
        v = localsplus[s->index];
        if (v == NULL) {
            PyErr_Format(PyExc_UnboundLocalError, "local %R is unbound", s->name);
            return NULL;
        }
        return Py_NewRef(v);
    case CDYN_SRC_GLOBAL:
        v = mapping_lookup(globals, s->name);
        if (v == NULL && !PyErr_Occurred() && builtins != NULL) {
            v = mapping_lookup(builtins, s->name);
        }
        if (v == NULL && !PyErr_Occurred()) {
            PyErr_Format(PyExc_NameError, "name %R is not defined", s->name);
        }
        return v;
    case CDYN_SRC_CLOSURE:
    case CDYN_SRC_CELL: {
        PyObject *closure = func ? func->func_closure : NULL;
        if (closure == NULL || !PyTuple_Check(closure) || s->index < 0 ||
            s->index >= PyTuple_GET_SIZE(closure)) {
            PyErr_Format(PyExc_ValueError, "no closure cell %d for %R", s->index, s->name);
            return NULL;
        }
        v = PyTuple_GET_ITEM(closure, s->index);
        if (s->kind == CDYN_SRC_CELL) {
            return Py_NewRef(v);
        }
        v = PyCell_GET(v);
        if (v == NULL) {
            PyErr_Format(PyExc_ValueError, "closure cell %R is empty", s->name);
            return NULL;
        }
        return Py_NewRef(v);
    }
    case CDYN_SRC_ATTR:
    case CDYN_SRC_ITEM:
        base = cdyn_source_eval(s->base, localsplus, func, globals, builtins);
        if (base == NULL) {
            return NULL;
        }
        v = s->kind == CDYN_SRC_ATTR ? attr_get(base, s->name) : item_get(base, s->name);
        Py_DECREF(base);
        return v;
    case CDYN_SRC_CONST:
        return Py_NewRef(s->name);
    case CDYN_SRC_TPROP:
    case CDYN_SRC_CALL:
    case CDYN_SRC_ENTRY:
        base = cdyn_source_eval(s->base, localsplus, func, globals, builtins);
        if (base == NULL) {
            return NULL;
        }
        v = cdyn_source_step(s, base);
        Py_DECREF(base);
        return v;
    }
    PyErr_SetString(PyExc_SystemError, "cdyn_source_eval: bad source kind");
    return NULL;
}


/* ---- init -------------------------------------------------------------------------- */

int
cdyn_source_init(PyObject *module)
{
    static const char *dicts[3] = {"_parameters", "_buffers", "_modules"};
    PyObject *nn = NULL;
    if (PyType_Ready(&cdyn_SourceType) < 0) {
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        if ((str_nn_dicts[i] = PyUnicode_InternFromString(dicts[i])) == NULL) {
            return -1;
        }
    }
    if ((str_getattribute = PyUnicode_InternFromString("__getattribute__")) == NULL ||
        (str_getattr = PyUnicode_InternFromString("__getattr__")) == NULL ||
        (str_dict_attr = PyUnicode_InternFromString("__dict__")) == NULL ||
        (str_attribute_map = PyUnicode_InternFromString("attribute_map")) == NULL ||
        (str_hetero_spec = PyUnicode_InternFromString("_heterogeneity_spec")) == NULL ||
        (str_class_attr = PyUnicode_InternFromString("__class__")) == NULL) {
        return -1;
    }
    object_getattribute = PyDict_GetItemWithError(cdyn_type_dict(&PyBaseObject_Type), str_getattribute);
    object_class_descr = PyDict_GetItemWithError(cdyn_type_dict(&PyBaseObject_Type), str_class_attr);
    static const char *fields[5] = {"__code__", "__defaults__", "__kwdefaults__", "__globals__",
                                    "__closure__"};
    for (int i = 0; i < 5; i++) {
        if ((str_func_fields[i] = PyUnicode_InternFromString(fields[i])) == NULL) {
            return -1;
        }
    }
    if ((str_cell_contents = PyUnicode_InternFromString("cell_contents")) == NULL) {
        return -1;
    }
    type_mro_descr = PyDict_GetItemString(cdyn_type_dict(&PyType_Type), "__mro__");
    if (object_getattribute == NULL || object_class_descr == NULL || type_mro_descr == NULL) {
        return -1;
    }
    nn = PyImport_ImportModule("torch.nn");
    if (nn == NULL) {
        return -1;
    }
    nn_module_type = PyObject_GetAttrString(nn, "Module");
    Py_DECREF(nn);
    if (nn_module_type == NULL) {
        return -1;
    }
    nn_module_getattr = PyDict_GetItemWithError(cdyn_type_dict((PyTypeObject *)nn_module_type),
                                                str_getattr);
    if (nn_module_getattr == NULL) {
        return -1;
    }
    Py_INCREF(nn_module_getattr);
    Py_INCREF(&cdyn_SourceType);
    if (PyModule_AddObject(module, "Source", (PyObject *)&cdyn_SourceType) < 0) {
        Py_DECREF(&cdyn_SourceType);
        return -1;
    }
    return 0;
}
