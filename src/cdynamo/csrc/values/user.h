/* values/user.h: internals shared by the files of the user-object family.
 *
 *   user.c       the family table (dispatch on kind), classes (CLASS), super (SUPER),
 *                identity (`is`), type(x)
 *   userobj.c    the instance protocol of objects from the frame (OBJECT) and objects made
 *                while tracing (NEWOBJ): attributes (descriptors, properties, methods,
 *                __getattr__), and the dunder methods inlined for the opcodes
 *   newobj.c     objects made while tracing: construction (__new__ + __init__ inlined),
 *                their symbolic attributes, rebuilding them into real objects; the builtin
 *                slot functions of object/dict/tuple (OBJFN)
 *   dataclass.c  dataclasses.fields/replace/is_dataclass, named tuples (construction,
 *                _replace/_asdict/_fields, inputs), Enum members
 *   newmodule.c  nn.Modules made while tracing: which classes, their call (forward inlined)
 *
 * Ownership as everywhere in the engine: value arguments are borrowed, *out is a new
 * reference on TR_OK. */
#ifndef CDYN_USER_H
#define CDYN_USER_H
#include "../tx.h"

/* Objects the family compares against by identity (borrowed after cdyn_user_init). */
typedef struct {
    PyObject *object_new, *object_init, *object_setattr, *object_getattribute,
        *object_delattr, *object_eq, *object_ne, *type_call, *dict_new, *odict_new, *tuple_new, *list_new, *set_new,
        *frozenset_new, *odict_type, *enum_type, *enum_meta, *method_type, *dc_fields,
        *dc_replace, *dc_is_dataclass, *dc_field_marker, *dc_fields_attr, *cached_property;
    /* interned names */
    PyObject *s_init, *s_new, *s_class, *s_call, *s_getattr, *s_getitem, *s_setitem,
        *s_delitem, *s_contains, *s_len, *s_iter, *s_bool, *s_enter, *s_exit, *s_setattr,
        *s_getattribute, *s_fields, *s_replace, *s_asdict, *s_field_type, *s_del, *s_dict,
        *s_next, *s_hash, *s_func, *s_mro, *s_delattr, *s_dunder_get;
} cdyn_user_globals;
extern cdyn_user_globals cdyn_U;

/* ---- user.c ------------------------------------------------------------------------------ */

/* A value for the class of v (NEWOBJ: its CLASS value; an object with a source: read
 * through <source>.__class__, ID_MATCHed; else the type, unguarded: it is fixed by the
 * value's own guard). */
tr_status cdyn_user_class_value(cdyn_tx *tx, PyObject *v, PyObject **out);
/* 1 when v is an instance value of this family (OBJECT or NEWOBJ). */
static inline int
cdyn_user_is_instance(PyObject *v)
{
    return V(v)->kind == VK_OBJECT || V(v)->kind == VK_NEWOBJ;
}
/* The type of an instance value (borrowed). */
PyTypeObject *cdyn_user_type(PyObject *v);

/* tuple.__new__(cls, [iterable]) for a plain tuple subclass cls (CLASS value, not a named
 * tuple): a NEWOBJ holding the items in a TUPLE value (values/newobj.c). */
tr_status cdyn_newobj_tuple_new(cdyn_tx *tx, PyObject *clsv, PyObject *const *args,
                                Py_ssize_t nargs, PyObject **out);

/* ---- userobj.c --------------------------------------------------------------------------- */

/* Cls[key] of a CLASS value v whose __class_getitem__ is typing.Generic's: the real alias
 * (*handled 1); *handled 0 for any other class. */
tr_status cdyn_uobj_generic_alias(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out,
                                  int *handled);

tr_status cdyn_uobj_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out);
tr_status cdyn_uobj_setattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value);
/* object.__getattribute__ / object.__setattr__ on an instance: descriptors and the
 * instance's own attributes, without the type's __getattribute__/__getattr__/__setattr__. */
tr_status cdyn_uobj_generic_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, int use_getattr,
                                    PyObject **out);
/* A data descriptor of type t for `name` that a store into v must go through: a property
 * (its setter inlined on v) or any other data descriptor but slots (unsupported). *done = 1
 * when the store was handled (or refused), 0 when t has no such descriptor. */
tr_status cdyn_uobj_store_descriptor(cdyn_tx *tx, PyObject *v, PyTypeObject *t, PyObject *name,
                                     PyObject *value, int *done);
tr_status cdyn_uobj_generic_setattr(cdyn_tx *tx, PyObject *v, PyObject *name,
                                    PyObject *value);
/* delattr(v, name) on an instance value: type(v).__delattr__ inlined when it is a Python
 * function (generic = 0), else object.__delattr__ (a NEWOBJ's attribute removed; on an object
 * of the frame a side effect replayed by object.__delattr__ itself). */
tr_status cdyn_uobj_delattr(cdyn_tx *tx, PyObject *v, PyObject *name, int generic);
/* fn(v, key[, value]) (fn: a dict slot function such as OrderedDict.__setitem__, value NULL
 * for __delitem__) on an OBJECT of the frame: a side effect replayed by fn itself; a
 * ModelOutput's mirror of its items (cdyn_mo_items) is changed alike, any other object's
 * items are not read back in this trace (OBJ_ITEMS_MUTATED). */
tr_status cdyn_uobj_item_call_replayed(cdyn_tx *tx, PyObject *v, PyObject *fn, PyObject *key,
                                       PyObject *value);
/* The source of the class of value v (borrowed CLASS / NEWOBJ / OBJECT value), a new
 * reference: the class's own source, or <object source>.__class__; NULL (no error) when
 * there is none or the class is trusted (torch's own). */
PyObject *cdyn_uobj_class_source(PyObject *v);
/* Pin what getattr(cls, name) is (cls: a real class; cls_src: its source, borrowed, or NULL
 * to do nothing): a function FUNCTION_MATCHed at <cls_src>.name, a classmethod's function
 * at <cls_src>.name.__func__, a descriptor that is its own class attribute (property)
 * ID_MATCHed, a constant EQUALS_MATCHed. What a method or dunder found on a user class
 * stands for is then re-checked on every call (a class attribute replaced between calls
 * recompiles). */
tr_status cdyn_uobj_guard_member(cdyn_tx *tx, PyObject *cls_src, PyTypeObject *cls,
                                 PyObject *name);
/* cdyn_uobj_guard_member on the type of value v (on v itself for a CLASS value) through
 * cdyn_uobj_class_source(v). */
tr_status cdyn_uobj_guard_type_member(cdyn_tx *tx, PyObject *v, PyObject *name);
/* Bind a descriptor found on the type of (or on a class after the super() class of) self
 * (an instance value, or a CLASS value for classmethods' super()): functions become
 * methods, properties run their getter, builtin slot functions bind as OBJFN, other
 * objects are the class attribute itself (read through clsv when given, else unguarded). */
tr_status cdyn_uobj_bind(cdyn_tx *tx, PyObject *self, PyObject *clsv, PyObject *descr,
                         PyObject *name, PyObject **out);
/* Inline type(v).<name>(v, *args) when it is a Python function: *found = 0 (and nothing
 * done) when the type has no Python method of that name. */
tr_status cdyn_uobj_call_dunder(cdyn_tx *tx, PyObject *v, PyObject *name,
                                PyObject *const *args, Py_ssize_t nargs, PyObject **out,
                                int *found);
/* The instance protocol (vtable slots of OBJECT and NEWOBJ). */
tr_status cdyn_uobj_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *const *args,
                         Py_ssize_t nargs, PyObject *kwnames, PyObject **out);
tr_status cdyn_uobj_truth(cdyn_tx *tx, PyObject *v, int *out);
tr_status cdyn_uobj_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list);
/* A user iterator (a class with a Python __next__): is_iterator 1 when v is an instance
 * of one; next: its __next__ inlined, *out NULL once it raised StopIteration; iter: the
 * instance's Python __iter__ inlined (the iterator it gives, or an iterator over the items
 * of what it gives), TR_NOTIMPL without one. */
int cdyn_uobj_is_iterator(PyObject *v);
/* An instance of a frozen dataclass made in the trace as an argument of a graph operation
 * (an allow_in_graph function): a call_function node building it from its __init__ fields
 * (their graph arguments), as torch._dynamo passes one; *fake the object built on the
 * fields' fakes. Unsupported for other values. */
tr_status cdyn_dataclass_graph_arg(cdyn_tx *tx, PyObject *v, PyObject **fake, PyObject **node);
tr_status cdyn_uobj_next(cdyn_tx *tx, PyObject *v, PyObject **out);
tr_status cdyn_uobj_iter(cdyn_tx *tx, PyObject *v, PyObject **out);
tr_status cdyn_uobj_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out);
tr_status cdyn_uobj_store_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value);
tr_status cdyn_uobj_delete_subscr(cdyn_tx *tx, PyObject *v, PyObject *key);
tr_status cdyn_uobj_contains(cdyn_tx *tx, PyObject *v, PyObject *item, int *out);
tr_status cdyn_uobj_binop(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out);
tr_status cdyn_uobj_compare(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out);
tr_status cdyn_uobj_unary(cdyn_tx *tx, int opcode, PyObject *v, PyObject **out);
tr_status cdyn_uobj_len(cdyn_tx *tx, PyObject *v, Py_ssize_t *out);
/* Methods called on an instance by name (its type's Python methods are bound by getattr
 * instead): those of a mappingproxy of the frame (a class __dict__: get, keys, values,
 * items, __contains__, __getitem__), answered from its guarded keys, and the dict methods
 * that read a ModelOutput of the frame (keys(), items(), get(), ...), from its mirror. */
tr_status cdyn_uobj_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *name,
                                PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                                PyObject **out);
tr_status cdyn_uobj_enter(cdyn_tx *tx, PyObject *v, PyObject **exit_fn, PyObject **result);

/* ---- newobj.c ---------------------------------------------------------------------------- */

/* cls(*args, **kwargs) for a user class value clsv: __new__ and __init__ inlined. */
tr_status cdyn_newobj_construct(cdyn_tx *tx, cdyn_fs *fs, PyObject *clsv, PyObject *const *args,
                                Py_ssize_t nargs, PyObject *kwnames, PyObject **out);
/* A new empty instance of the class value clsv (object.__new__(cls), dict.__new__(cls));
 * unsupported for classes whose instances cannot be modelled. */
tr_status cdyn_newobj_alloc(cdyn_tx *tx, PyObject *clsv, PyObject **out);
/* The instance attribute `name` of a NEWOBJ (borrowed) or NULL, no exception. */
PyObject *cdyn_newobj_attr(PyObject *v, PyObject *name);
/* obj.__dict__ of a NEWOBJ: its attributes DICT value itself (live: stores into either are
 * seen by both, and the rebuilt object gets that dict); unsupported for classes with
 * __slots__ (their attributes are not all in the dict). */
tr_status cdyn_newobj_dict(cdyn_tx *tx, PyObject *v, PyObject **out);
/* Store / delete an instance attribute of a NEWOBJ (no descriptors involved). */
tr_status cdyn_newobj_store(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value);
tr_status cdyn_newobj_delete(cdyn_tx *tx, PyObject *v, PyObject *name);
tr_status cdyn_newobj_collect(cdyn_tx *tx, struct cdyn_cg *cg, PyObject *v);
int cdyn_newobj_reconstruct(struct cdyn_cg *cg, PyObject *v);
/* OBJFN: 1 when obj is a builtin slot function the family implements. */
int cdyn_objfn_known(PyObject *obj);
/* OBJFN value: fn (borrowed real function) bound to self (borrowed value or NULL). */
PyObject *cdyn_objfn_new(PyObject *fn, PyObject *self);
tr_status cdyn_objfn_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *const *args,
                          Py_ssize_t nargs, PyObject *kwnames, PyObject **out);
tr_status cdyn_objfn_collect(cdyn_tx *tx, struct cdyn_cg *cg, PyObject *v);
int cdyn_objfn_reconstruct(struct cdyn_cg *cg, PyObject *v);

/* ---- newmodule.c ------------------------------------------------------------------------- */

/* 1 when instances of cls, an nn.Module subclass, may be made while tracing (a user's or
 * library's class, or torch.nn's own). */
int cdyn_newmod_class_ok(PyTypeObject *cls);
/* 1 when v is a NEWOBJ of an nn.Module subclass whose __call__ is nn.Module's. */
int cdyn_newmod_is_module(PyObject *v);
/* module(*args, **kwargs) of such a NEWOBJ v: its forward (instance attribute or class
 * method) called when nn.Module.__call__ would only call it; unsupported otherwise. */
tr_status cdyn_newmod_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *const *args,
                           Py_ssize_t nargs, PyObject *kwnames, PyObject **out);

/* ---- dataclass.c ------------------------------------------------------------------------- */

/* dataclasses helpers and named-tuple methods called through OBJFN: *handled = 0 when fn
 * is not one of them. */
tr_status cdyn_dataclass_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *self,
                              PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                              PyObject **out, int *handled);
/* 1 when fn (a function found on an object's type) is modelled natively on objects made
 * while tracing (transformers' ModelOutput methods): call it through an OBJFN. */
int cdyn_user_native_method(PyObject *fn);
/* The DICT value mirroring the items of v, a transformers ModelOutput read from the frame
 * (DICT_MIRROR, u.dobj.items; made on first use from its fields, guarded): *out new.
 * TR_NOTIMPL when v is not one; TR_UNSUPPORTED when its items cannot be known (changed
 * before they were read, or not its fields). */
tr_status cdyn_mo_items(cdyn_tx *tx, PyObject *v, PyObject **out);
/* The value mirroring the items of v, an OBJECT of the frame of a dict subclass: a
 * ModelOutput's (cdyn_mo_items), or, for a subclass reading its items as dict / OrderedDict
 * do (no Python __iter__ / __getitem__, no __missing__), an input dict at v's source
 * (DICT_KEYS guard, values through ITEM sources; DICT_MIRROR, u.dobj.items: item stores
 * replayed on v change it alike); of a list / tuple subclass, a LIST / TUPLE at v's source
 * (length guarded, items through ITEM sources; where the class overrides __iter__, __len__
 * or __getitem__, read through ___seq_items(<source>), a copy of the base's items, so that
 * no override runs in a guard). A list mirror changed by the trace is written back as
 * `obj[:] = items`. *out new; TR_NOTIMPL for other values; TR_UNSUPPORTED when the items
 * were changed before they were read. */
tr_status cdyn_uobj_items(cdyn_tx *tx, PyObject *v, PyObject **out);
/* tuple.__new__(cls, iterable) for a named-tuple class value (or tuple itself). */
tr_status cdyn_namedtuple_new(cdyn_tx *tx, PyObject *clsv, PyObject *const *args,
                              Py_ssize_t nargs, PyObject **out);
/* The hash key of v, an instance of a frozen dataclass made in the trace whose __eq__ and
 * __hash__ are the ones dataclasses generated: (marker, its class, the values of its
 * compare fields), when those are constants, so that it finds equal instances in dicts and
 * sets as eager's field-wise __eq__ does; TR_NOTIMPL for other values (*out new). */
tr_status cdyn_dataclass_hash_key(cdyn_tx *tx, PyObject *v, PyObject *marker, PyObject **out);
/* NT._make of a named-tuple class value; TR_NOTIMPL for other attributes. */
tr_status cdyn_namedtuple_class_getattr(cdyn_tx *tx, PyObject *clsv, PyObject *name,
                                        PyObject **out);
/* Enum classes: Color(1), Color["RED"], iteration and len, folded at trace time. */
tr_status cdyn_enum_class_call(cdyn_tx *tx, PyObject *clsv, PyObject *const *args,
                               Py_ssize_t nargs, PyObject *kwnames, PyObject **out);
int cdyn_is_enum_class(PyObject *cls);

#endif
