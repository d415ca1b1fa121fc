/* values/user.c: user-defined classes and objects (the family's files: values/user.h).
 *
 *   CLASS   a class that is not a builtin type, ID_MATCHed through its source. Its
 *           attributes are read through that source (guarded; unguarded for torch's own
 *           classes and for classes without a source); calling it constructs an object in
 *           the trace (newobj.c); Enum classes fold lookups of their members.
 *   OBJECT  an object read from the frame: specialised on its type (TYPE_MATCH); what is
 *           read through it is guarded at its own source; attribute and item stores are
 *           side effects replayed by the transformed code (userobj.c).
 *   NEWOBJ  an object made while tracing: symbolic attributes, rebuilt into a real object
 *           when it outlives the trace (newobj.c).
 *   SUPER   super(cls, self): the MRO of self's type searched after cls.
 *   OBJFN   a builtin slot function of object/dict/tuple or a dataclasses helper, maybe
 *           bound to a value (newobj.c, dataclass.c).
 */
#include "user.h"
#include "../codegen.h"
#include "../trace_rules.h"

cdyn_user_globals cdyn_U;

PyTypeObject *
cdyn_user_type(PyObject *v)
{
    if (V(v)->kind == VK_NEWOBJ) {
        return (PyTypeObject *)cdyn_v_real(V(v)->u.uobj.cls);
    }
    return Py_TYPE(V(v)->u.obj.obj);
}

tr_status
cdyn_user_class_value(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    PyObject *src = NULL;
    PyTypeObject *t;
    tr_status st;
    if (V(v)->kind == VK_NEWOBJ) {
        *out = Py_NewRef(V(v)->u.uobj.cls);
        return TR_OK;
    }
    t = cdyn_v_python_type(v);
    if (t == NULL) {
        return cdyn_tx_unsupported(tx, "type of %S", v);
    }
    if (V(v)->kind == VK_OBJECT && V(v)->source != NULL &&
        (src = cdyn_source_attr(V(v)->source, cdyn_U.s_class)) == NULL) {
        return TR_ERROR;
    }
    st = cdyn_tx_wrap_real(tx, (PyObject *)t, src, out);
    Py_XDECREF(src);
    return st;
}

tr_status
cdyn_user_type_of(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    return cdyn_user_class_value(tx, v, out);
}

/* 1 when t is a torch class whose module's code is traced when called (trace rule INLINE
 * or COMPILE: torch.nn.utils.weight_norm's WeightNorm pre-hook, ...): its instances'
 * __call__ is inlined like a user class's. */
static int
traced_torch_class(PyTypeObject *t)
{
    PyObject *mod = PyDict_GetItemWithError(cdyn_type_dict(t), cdyn_G.s_module);
    cdyn_rule r;
    if (mod == NULL || !PyUnicode_Check(mod)) {
        PyErr_Clear();
        return 0;
    }
    r = cdyn_rules_for_module(mod);
    return r == CDYN_RULE_INLINE || r == CDYN_RULE_COMPILE;
}

int
cdyn_user_is_callable_object(PyObject *obj)
{
    PyTypeObject *t = Py_TYPE(obj);
    PyObject *c;
    if (cdyn_U.object_new == NULL || !(t->tp_flags & Py_TPFLAGS_HEAPTYPE) || PyType_Check(obj) ||
        PyFunction_Check(obj) || PyMethod_Check(obj) || cdyn_is_nn_module(obj) ||
        cdyn_is_tensor(obj) ||
        (cdyn_module_startswith((PyObject *)t, "torch") && !traced_torch_class(t))) {
        return 0;
    }
    c = _PyType_Lookup(t, cdyn_U.s_call);
    return c != NULL && PyFunction_Check(c);
}

/* ---- identity ------------------------------------------------------------------------------ */

tr_status
cdyn_user_is(cdyn_tx *tx, PyObject *a, PyObject *b, int *out)
{
    PyObject *ops[2] = {a, b}, *ra, *rb;
    int nobj = 0;
    if (V(a)->vt != &cdyn_user_vt && V(b)->vt != &cdyn_user_vt) {
        return TR_NOTIMPL;
    }
    if (a == b) {
        *out = 1;
        return TR_OK;
    }
    for (int i = 0; i < 2; i++) {
        cdyn_vkind k = V(ops[i])->kind;
        /* an object made while tracing, a super() proxy or a bound slot function is a new
           object: no other value is it */
        if (k == VK_NEWOBJ || k == VK_SUPER || (k == VK_OBJFN && V(ops[i])->u.ofn.self)) {
            *out = 0;
            return TR_OK;
        }
        nobj += k == VK_OBJECT;
    }
    if (nobj == 1) {
        /* values are classified by their object: an object of another kind (a constant, a
           class, a tensor, a container, a function) is never an OBJECT's object */
        *out = 0;
        return TR_OK;
    }
    ra = V(a)->kind == VK_OBJFN ? V(a)->u.ofn.fn : cdyn_v_real(a);
    rb = V(b)->kind == VK_OBJFN ? V(b)->u.ofn.fn : cdyn_v_real(b);
    if (ra == NULL || rb == NULL) {
        *out = 0;
        return TR_OK;
    }
    /* two objects read from the frame: their identities become part of the guards */
    for (int i = 0; nobj == 2 && i < 2; i++) {
        PyObject *v = ops[i];
        if (V(v)->source != NULL &&
            cdyn_guards_add_id(tx->guards, V(v)->source, V(v)->u.obj.obj, 0) < 0) {
            return TR_ERROR;
        }
    }
    *out = ra == rb;
    return TR_OK;
}

/* ---- super() ------------------------------------------------------------------------------- */

/* The type whose MRO super() searches: self's type, or self itself for a class (super() in
 * a classmethod). Borrowed or NULL. */
static PyTypeObject *
super_start(PyObject *self, PyObject *c)
{
    PyTypeObject *t;
    switch (V(self)->kind) {
    case VK_CLASS:
        t = (PyTypeObject *)V(self)->u.obj.obj;
        if (c != NULL && PyType_Check(c) && !PyType_IsSubtype(t, (PyTypeObject *)c) &&
            PyObject_TypeCheck((PyObject *)t, (PyTypeObject *)c)) {
            return Py_TYPE(t);   /* super() in a metaclass method: the metaclass's MRO */
        }
        return t;
    case VK_OBJECT: case VK_NEWOBJ: case VK_NNMODULE:
        return cdyn_v_python_type(self);
    case VK_TUPLE:
        return V(self)->u.seq.nt_type ? (PyTypeObject *)V(self)->u.seq.nt_type : NULL;
    default:
        return NULL;
    }
}

tr_status
cdyn_user_super(cdyn_tx *tx, PyObject *cls, PyObject *self, PyObject **out)
{
    PyObject *c = cdyn_v_real(cls);
    PyTypeObject *start = super_start(self, c);
    if (c == NULL || !PyType_Check(c) || start == NULL ||
        !PyType_IsSubtype(start, (PyTypeObject *)c)) {
        return cdyn_tx_unsupported(tx, "super(%S, %S)", cls, self);
    }
    *out = cdyn_value_alloc(VK_SUPER, NULL);
    if (*out == NULL) {
        return TR_ERROR;
    }
    V(*out)->u.super.obj = Py_NewRef(c);
    V(*out)->u.super.self = Py_NewRef(self);
    return TR_OK;
}

/* Pin what super().name found in type(self).__mro__[i] through
 * <class of self>.__mro__[i].name (unguarded when self's class has no source). */
static tr_status
super_guard(cdyn_tx *tx, PyObject *self, PyObject *c, Py_ssize_t i, PyObject *name)
{
    PyObject *csrc = cdyn_uobj_class_source(self), *msrc = NULL, *isrc = NULL, *idx = NULL;
    PyTypeObject *start = super_start(self, c);
    tr_status st = TR_ERROR;
    if (csrc == NULL || start == NULL ||
        (V(self)->kind == VK_CLASS && start != (PyTypeObject *)V(self)->u.obj.obj)) {
        /* (in a metaclass method the MRO is the metaclass's: not pinned) */
        Py_XDECREF(csrc);
        return TR_OK;
    }
    if ((msrc = cdyn_source_attr(csrc, cdyn_U.s_mro)) != NULL &&
        (idx = PyLong_FromSsize_t(i)) != NULL &&
        (isrc = cdyn_source_item(msrc, idx)) != NULL) {
        st = cdyn_uobj_guard_member(tx, isrc,
                                    (PyTypeObject *)PyTuple_GET_ITEM(start->tp_mro, i), name);
    }
    Py_XDECREF(isrc);
    Py_XDECREF(idx);
    Py_XDECREF(msrc);
    Py_DECREF(csrc);
    return st;
}

/* super().name: the first class after cls in the MRO of self's type that defines name. */
static tr_status
super_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *self = V(v)->u.super.self, *cls = V(v)->u.super.obj, *mro;
    PyTypeObject *start = super_start(self, cls);
    Py_ssize_t i = 0, n;
    if (start == NULL || (mro = start->tp_mro) == NULL) {
        return cdyn_tx_unsupported(tx, "super() of %S", self);
    }
    n = PyTuple_GET_SIZE(mro);
    while (i < n && PyTuple_GET_ITEM(mro, i) != cls) {
        i++;
    }
    for (i++; i < n; i++) {
        PyObject *d = cdyn_type_dict((PyTypeObject *)PyTuple_GET_ITEM(mro, i));
        PyObject *descr = d ? PyDict_GetItemWithError(d, name) : NULL;
        if (descr != NULL && V(self)->kind == VK_CLASS &&
            start != (PyTypeObject *)V(self)->u.obj.obj) {
            /* in a metaclass method: bound to the class as an instance of the metaclass */
            if (PyFunction_Check(descr)) {
                *out = cdyn_value_method(descr, name, self);
            }
            else if (cdyn_objfn_known(descr)) {
                *out = cdyn_objfn_new(descr, self);
            }
            else {
                return cdyn_tx_unsupported(tx, "super().%U in a metaclass", name);
            }
            return *out ? TR_OK : TR_ERROR;
        }
        if (descr != NULL) {
            tr_status st = super_guard(tx, self, cls, i, name);
            return st != TR_OK ? st : cdyn_uobj_bind(tx, self, NULL, descr, name, out);
        }
        if (PyErr_Occurred()) {
            return TR_ERROR;
        }
    }
    return cdyn_tx_unsupported(tx, "super() has no attribute %U", name);
}

/* ---- classes -------------------------------------------------------------------------------- */

/* Attribute of a class: guarded through the class's source (torch's classes trusted). */
static tr_status
class_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *cls = V(v)->u.obj.obj;
    /* a class from the frame: what is read from it is guarded (class attributes change);
       torch's own classes and classes reached without a source are trusted */
    int trusted = V(v)->source == NULL || cdyn_module_startswith(cls, "torch");
    tr_status st = cdyn_namedtuple_class_getattr(tx, v, name, out);   /* NT._make */
    if (st != TR_NOTIMPL) {
        return st;
    }
    return cdyn_getattr_real(tx, v, name, trusted, out);
}

/* cls(...): an Enum lookup folded, else an object constructed in the trace. */
static tr_status
class_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames, PyObject **out)
{
    PyObject *cls = V(fn)->u.obj.obj;
    if (cdyn_refuse_forbidden(cls) < 0) {
        return TR_ERROR;   /* torch._dynamo.set_stance: a class torch forbids in a trace */
    }
    if (cdyn_is_enum_class(cls)) {
        return cdyn_enum_class_call(tx, fn, args, nargs, kwnames, out);
    }
    return cdyn_newobj_construct(tx, fs, fn, args, nargs, kwnames, out);
}

/* Enum classes: Color["RED"], list(Color), len(Color), folded (the class is ID_MATCHed). */
static tr_status
enum_fold(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out_obj)
{
    PyObject *cls = V(v)->u.obj.obj;
    if (V(v)->kind != VK_CLASS || !cdyn_is_enum_class(cls)) {
        return cdyn_tx_unsupported(tx, "%s of %S", key ? "subscript" : "iteration", v);
    }
    if (key != NULL && V(key)->kind != VK_CONST) {
        return cdyn_tx_unsupported(tx, "Enum lookup with a non-constant key");
    }
    *out_obj = key ? PyObject_GetItem(cls, V(key)->u.cnst.value) : PySequence_Tuple(cls);
    return *out_obj ? TR_OK : cdyn_tx_unsupported(tx, "Enum lookup failed");
}

/* ---- the family table --------------------------------------------------------------------- */

/* f.__name__, f.__qualname__, f.__doc__ of a slot function (list.count, set.__or__, ...):
 * what the real function has; f.__self__ of a bound one: the value. */
static tr_status
objfn_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    static const char *const fixed[] = {"__name__", "__qualname__", "__doc__", NULL};
    if (cdyn_name_is(name, "__self__") && V(v)->u.ofn.self != NULL) {
        *out = Py_NewRef(V(v)->u.ofn.self);
        return TR_OK;
    }
    if (!cdyn_name_in(name, fixed)) {
        return cdyn_tx_unsupported(tx, "attribute %U of %S", name, v);
    }
    return cdyn_constant_attr(tx, v, V(v)->u.ofn.fn, name, out);
}

/* The family's getattr: classes, super(), instances (slot functions: their names). */
static tr_status
user_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    switch (V(v)->kind) {
    case VK_CLASS:
        return class_getattr(tx, v, name, out);
    case VK_SUPER:
        return super_getattr(tx, v, name, out);
    case VK_OBJFN:
        return objfn_getattr(tx, v, name, out);
    default:
        return cdyn_uobj_getattr(tx, v, name, out);
    }
}

/* obj.name = value on instances; Cls.name = value on a class from the frame, replayed. */
static tr_status
user_setattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    if (cdyn_user_is_instance(v)) {
        return cdyn_uobj_setattr(tx, v, name, value);
    }
    if (V(v)->kind == VK_CLASS && V(v)->source != NULL &&
        !cdyn_module_startswith(V(v)->u.obj.obj, "torch")) {
        return cdyn_setattr_replayed(tx, v, name, value);   /* Cls.counter = ... */
    }
    return cdyn_tx_unsupported(tx, "STORE_ATTR %U on %S (side effect)", name, v);
}

/* Calls: a class constructs, a slot function runs, an instance's __call__ is inlined. */
static tr_status
user_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames, PyObject **out)
{
    switch (V(fn)->kind) {
    case VK_CLASS:
        return class_call(tx, fs, fn, args, nargs, kwnames, out);
    case VK_OBJFN:
        return cdyn_objfn_call(tx, fs, fn, args, nargs, kwnames, out);
    case VK_OBJECT: case VK_NEWOBJ:
        return cdyn_uobj_call(tx, fs, fn, args, nargs, kwnames, out);
    default:
        return cdyn_tx_unsupported(tx, "call to %S", fn);
    }
}

/* Truth: an instance's __bool__/__len__; classes and functions are true. */
static tr_status
user_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    if (cdyn_user_is_instance(v)) {
        return cdyn_uobj_truth(tx, v, out);
    }
    if (V(v)->kind == VK_CLASS && cdyn_is_enum_class(V(v)->u.obj.obj)) {
        return cdyn_tx_unsupported(tx, "truth value of an Enum class");
    }
    *out = 1;
    return TR_OK;
}

/* Iteration: an instance's __iter__, an Enum class's members. */
static tr_status
user_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    PyObject *t = NULL, *c = NULL;
    tr_status st;
    if (cdyn_user_is_instance(v)) {
        return cdyn_uobj_unpack(tx, v, out_list);
    }
    st = enum_fold(tx, v, NULL, &t);
    if (st != TR_OK) {
        return st;
    }
    c = cdyn_value_const_steal(t);
    st = c ? cdyn_v_unpack(tx, c, out_list) : TR_ERROR;
    Py_XDECREF(c);
    return st;
}

/* obj[key]: an instance's __getitem__, Color["RED"] on an Enum class. */
static tr_status
user_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out)
{
    PyObject *r = NULL;
    int handled = 0;
    tr_status st;
    if (cdyn_user_is_instance(v)) {
        return cdyn_uobj_subscr(tx, v, key, out);
    }
    if (V(v)->kind == VK_CLASS &&
        ((st = cdyn_uobj_generic_alias(tx, v, key, out, &handled)) != TR_OK || handled)) {
        return st;
    }
    st = enum_fold(tx, v, key, &r);
    if (st == TR_OK) {
        *out = cdyn_value_const_steal(r);
        st = *out ? TR_OK : TR_ERROR;
    }
    return st;
}

/* obj[key] = value on instances. */
static tr_status
user_store_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value)
{
    if (!cdyn_user_is_instance(v)) {
        return cdyn_tx_unsupported(tx, "STORE_SUBSCR into %S", v);
    }
    return cdyn_uobj_store_subscr(tx, v, key, value);
}

/* del obj[key] on instances. */
static tr_status
user_delete_subscr(cdyn_tx *tx, PyObject *v, PyObject *key)
{
    if (!cdyn_user_is_instance(v)) {
        return cdyn_tx_unsupported(tx, "DELETE_SUBSCR of %S", v);
    }
    return cdyn_uobj_delete_subscr(tx, v, key);
}

/* item in obj on instances. */
static tr_status
user_contains(cdyn_tx *tx, PyObject *v, PyObject *item, int *out)
{
    if (!cdyn_user_is_instance(v)) {
        return cdyn_tx_unsupported(tx, "'in' of %S", v);
    }
    return cdyn_uobj_contains(tx, v, item, out);
}

/* obj.name(*args) called by name on instances (a mappingproxy's methods). */
static tr_status
user_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *name, PyObject *const *args,
                 Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    if (!cdyn_user_is_instance(v)) {
        return cdyn_tx_unsupported(tx, "method %U of %S is not supported", name, v);
    }
    return cdyn_uobj_call_method(tx, fs, v, name, args, nargs, kwnames, out);
}

/* -obj, +obj, ~obj on instances. */
static tr_status
user_unary(cdyn_tx *tx, int opcode, PyObject *v, PyObject **out)
{
    if (!cdyn_user_is_instance(v)) {
        return cdyn_tx_unsupported(tx, "unary operator on %S", v);
    }
    return cdyn_uobj_unary(tx, opcode, v, out);
}

/* len(obj): an instance's __len__, an Enum class's number of members. */
static tr_status
user_len(cdyn_tx *tx, PyObject *v, Py_ssize_t *out)
{
    PyObject *t = NULL;
    tr_status st;
    if (cdyn_user_is_instance(v)) {
        return cdyn_uobj_len(tx, v, out);
    }
    st = enum_fold(tx, v, NULL, &t);
    if (st == TR_OK) {
        *out = PyTuple_GET_SIZE(t);
        Py_DECREF(t);
    }
    return st;
}

/* with obj: an instance's __enter__/__exit__. */
static tr_status
user_enter(cdyn_tx *tx, PyObject *v, PyObject **exit_fn, PyObject **result)
{
    if (!cdyn_user_is_instance(v)) {
        return cdyn_tx_unsupported(tx, "with-block over %S", v);
    }
    return cdyn_uobj_enter(tx, v, exit_fn, result);
}

/* The real type of a value of the family (borrowed). */
static PyTypeObject *
user_python_type(PyObject *v)
{
    switch (V(v)->kind) {
    case VK_SUPER:
        return &PySuper_Type;
    case VK_NEWOBJ:
        return cdyn_user_type(v);
    case VK_OBJFN:
        return V(v)->u.ofn.self ? &PyMethod_Type : Py_TYPE(V(v)->u.ofn.fn);
    default:
        return Py_TYPE(V(v)->u.obj.obj);
    }
}

/* What rebuilding needs: objects made while tracing, bound slot functions. */
static tr_status
user_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    switch (V(v)->kind) {
    case VK_SUPER:
        return cdyn_tx_unsupported(tx, "cannot rebuild %S", v);
    case VK_NEWOBJ:
        return cdyn_newobj_collect(tx, cg, v);
    case VK_OBJFN:
        return cdyn_objfn_collect(tx, cg, v);
    default:
        return TR_OK;
    }
}

/* Rebuild: objects made while tracing, slot functions; others from their source. */
static int
user_reconstruct(cdyn_cg *cg, PyObject *v)
{
    switch (V(v)->kind) {
    case VK_NEWOBJ:
        return cdyn_newobj_reconstruct(cg, v);
    case VK_OBJFN:
        return cdyn_objfn_reconstruct(cg, v);
    default:
        return cdyn_reconstruct_obj(cg, v);
    }
}

const cdyn_vtable cdyn_user_vt = {
    .name = "UserDefinedVariable",
    .getattr = user_getattr,
    .setattr = user_setattr,
    .call = user_call,
    .truth = user_truth,
    .unpack = user_unpack,
    .subscr = user_subscr,
    .store_subscr = user_store_subscr,
    .delete_subscr = user_delete_subscr,
    .contains = user_contains,
    .call_method = user_call_method,
    .binop = cdyn_uobj_binop,
    .compare = cdyn_uobj_compare,
    .unary = user_unary,
    .len = user_len,
    .next = cdyn_uobj_next,
    .iter = cdyn_uobj_iter,
    .is_iterator = cdyn_uobj_is_iterator,
    .graph_arg = cdyn_dataclass_graph_arg,
    .enter = user_enter,
    .python_type = user_python_type,
    .collect = user_collect,
    .reconstruct = user_reconstruct,
};

/* ---- hasattr ------------------------------------------------------------------------------ */

tr_status
cdyn_user_hasattr(cdyn_tx *tx, PyObject *v, PyObject *name, int *out)
{
    PyObject *d;
    PyTypeObject *t;
    if (V(v)->kind != VK_NEWOBJ) {
        return TR_NOTIMPL;   /* objects from the frame: builtins.c (HASATTR guards) */
    }
    t = cdyn_user_type(v);
    if (cdyn_newobj_attr(v, name) != NULL ||
        PyUnicode_Compare(name, cdyn_U.s_class) == 0) {
        *out = 1;
        return TR_OK;
    }
    d = _PyType_Lookup(t, name);
    if (d != NULL && !PyObject_TypeCheck(d, &PyProperty_Type) &&
        !PyObject_TypeCheck(d, &PyMemberDescr_Type)) {
        *out = 1;
        return TR_OK;
    }
    if (d == NULL && _PyType_Lookup(t, cdyn_U.s_getattr) == NULL) {
        *out = 0;
        return TR_OK;
    }
    return cdyn_tx_unsupported(tx, "hasattr(%S, %R) (a property, slot or __getattr__)", v, name);
}

/* ---- init ------------------------------------------------------------------------------------ */

int
cdyn_user_init(void)
{
    static const struct { PyObject **var; const char *text; } strs[] = {
        {&cdyn_U.s_init, "__init__"}, {&cdyn_U.s_new, "__new__"}, {&cdyn_U.s_class, "__class__"},
        {&cdyn_U.s_call, "__call__"}, {&cdyn_U.s_getattr, "__getattr__"},
        {&cdyn_U.s_getitem, "__getitem__"}, {&cdyn_U.s_setitem, "__setitem__"},
        {&cdyn_U.s_delitem, "__delitem__"}, {&cdyn_U.s_contains, "__contains__"},
        {&cdyn_U.s_len, "__len__"}, {&cdyn_U.s_iter, "__iter__"}, {&cdyn_U.s_bool, "__bool__"},
        {&cdyn_U.s_enter, "__enter__"}, {&cdyn_U.s_exit, "__exit__"},
        {&cdyn_U.s_setattr, "__setattr__"}, {&cdyn_U.s_getattribute, "__getattribute__"},
        {&cdyn_U.s_fields, "_fields"}, {&cdyn_U.s_replace, "_replace"},
        {&cdyn_U.s_asdict, "_asdict"}, {&cdyn_U.s_field_type, "_field_type"},
        {&cdyn_U.s_del, "__del__"}, {&cdyn_U.s_dict, "__dict__"}, {&cdyn_U.s_next, "__next__"},
        {&cdyn_U.s_hash, "__hash__"}, {&cdyn_U.s_func, "__func__"}, {&cdyn_U.s_mro, "__mro__"},
        {&cdyn_U.s_delattr, "__delattr__"}, {&cdyn_U.s_dunder_get, "__get__"},
    };
    static const struct { PyObject **var; const char *mod, *attr, *sub; } objs[] = {
        {&cdyn_U.object_new, "builtins", "object", "__new__"},
        {&cdyn_U.object_init, "builtins", "object", "__init__"},
        {&cdyn_U.object_setattr, "builtins", "object", "__setattr__"},
        {&cdyn_U.object_getattribute, "builtins", "object", "__getattribute__"},
        {&cdyn_U.object_delattr, "builtins", "object", "__delattr__"},
        {&cdyn_U.object_eq, "builtins", "object", "__eq__"},
        {&cdyn_U.type_call, "builtins", "type", "__call__"},
        {&cdyn_U.object_ne, "builtins", "object", "__ne__"},
        {&cdyn_U.dict_new, "builtins", "dict", "__new__"},
        {&cdyn_U.tuple_new, "builtins", "tuple", "__new__"},
        {&cdyn_U.list_new, "builtins", "list", "__new__"},
        {&cdyn_U.set_new, "builtins", "set", "__new__"},
        {&cdyn_U.frozenset_new, "builtins", "frozenset", "__new__"},
        {&cdyn_U.odict_type, "collections", "OrderedDict", NULL},
        {&cdyn_U.odict_new, "collections", "OrderedDict", "__new__"},
        {&cdyn_U.enum_type, "enum", "Enum", NULL},
        {&cdyn_U.enum_meta, "enum", "EnumMeta", NULL},
        {&cdyn_U.method_type, "types", "MethodType", NULL},
        {&cdyn_U.dc_fields, "dataclasses", "fields", NULL},
        {&cdyn_U.dc_replace, "dataclasses", "replace", NULL},
        {&cdyn_U.dc_is_dataclass, "dataclasses", "is_dataclass", NULL},
        {&cdyn_U.dc_field_marker, "dataclasses", "_FIELD", NULL},
        {&cdyn_U.dc_fields_attr, "dataclasses", "_FIELDS", NULL},
        {&cdyn_U.cached_property, "functools", "cached_property", NULL},
    };
    if (cdyn_U.object_new != NULL) {
        return 0;
    }
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        if ((*strs[i].var = PyUnicode_InternFromString(strs[i].text)) == NULL) {
            return -1;
        }
    }
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++) {
        PyObject *m = PyImport_ImportModule(objs[i].mod), *o = NULL;
        o = m ? PyObject_GetAttrString(m, objs[i].attr) : NULL;
        Py_XDECREF(m);
        if (o != NULL && objs[i].sub != NULL) {
            Py_SETREF(o, PyObject_GetAttrString(o, objs[i].sub));
        }
        if (o == NULL) {
            return -1;
        }
        *objs[i].var = o;   /* kept for the process */
    }
    return 0;
}
