/* value.h: symbolic values of the translator.
 *
 * Every slot of the symbolic stack and of the symbolic locals holds a value: a Python
 * object of type cdynamo._C.Value (so ownership is ordinary reference counting). A value
 * has a kind, and kind-specific fields:
 *
 *   kind            obj                         node       items            other
 *   VK_NULL         -                           -          -                the NULL of the call protocol
 *   VK_CONST        the constant                -          -                int, float, bool, str, None, tuple of
 *                                                                           constants, slice, range, torch.Size,
 *                                                                           dtype, device, code objects
 *   VK_TENSOR       fake tensor (example value) fx.Node    -
 *   VK_TUPLE        - or the named-tuple type   -          list of values   flag 4: obj is the type of a named
 *                                                                           tuple (torch.return_types.*)
 *   VK_LIST         -                           -          list of values   (TUPLE/LIST/DICT with a source:
 *                                                                           flag 2 = items not read yet, obj =
 *                                                                           the real container; 3 = the same
 *                                                                           after an append replayed on it)
 *   VK_DICT         list of constant keys       -          list of values   keys[i] maps to items[i]
 *   VK_PYMODULE     the module                  -          -
 *   VK_CALLABLE     the callable                -          -                torch functions, builtins, user
 *                                                                           functions, classes
 *   VK_NNMODULE     the nn.Module               -          -
 *   VK_METHOD       method name (str) or func   -          [self value]     flag 1: obj is a function to inline
 *                                                                           with self; 0: attribute name
 *   VK_ITER         -                           -          list of values   pos = next index
 *   VK_CELL         -                           -          [contents] or [] a closure cell made in the frame
 *   VK_FUNCTION     code object                 globals    [defaults tuple value or None, closure tuple
 *                                                          value or None, kwdefaults dict value or None,
 *                                                          source of the globals dict or None]
 *                                                                           a function made by MAKE_FUNCTION;
 *                                                                           flag 1: globals are the top frame's
 *   VK_GRADCTX      -                           -          -                flag = grad mode it sets
 *   VK_GRADEXIT     -                           -          -                flag = grad mode it restores
 *   VK_OBJECT       the object                  -          [self value] for any other object (opaque); flag 1:
 *                                                          flag 5           mutated while tracing; flag 5: a
 *                                                                           super(cls, self) proxy
 *
 * source (may be NULL) is where the value came from in the frame (source.h); values made
 * during tracing have none.
 */
#ifndef CDYN_VALUE_H
#define CDYN_VALUE_H
#include "cdynamo.h"

typedef enum {
    VK_NULL, VK_CONST, VK_TENSOR, VK_TUPLE, VK_LIST, VK_DICT, VK_PYMODULE, VK_CALLABLE,
    VK_NNMODULE, VK_METHOD, VK_ITER, VK_CELL, VK_FUNCTION, VK_GRADCTX, VK_GRADEXIT,
    VK_OBJECT,
} cdyn_vkind;

typedef struct {
    PyObject_HEAD
    cdyn_vkind kind;
    PyObject *obj;      /* strong or NULL */
    PyObject *node;     /* strong or NULL */
    PyObject *items;    /* strong list or NULL */
    PyObject *source;   /* strong cdyn_source or NULL */
    int flag;
    Py_ssize_t pos;
    long long serial;   /* creation order, for rollback checks (cdyn_value_serial) */
} cdyn_value;

/* Serial number the next value will get (increases monotonically). */
extern long long cdyn_value_serial;

extern PyTypeObject cdyn_ValueType;
#define V(o) ((cdyn_value *)(o))

/* New value of the given kind. obj, node, items, source: borrowed (the value takes its
 * own references; any may be NULL). Returns a new reference or NULL + MemoryError. */
PyObject *cdyn_value_new(cdyn_vkind kind, PyObject *obj, PyObject *node, PyObject *items,
                         PyObject *source);
/* New VK_CONST of obj (borrowed). */
PyObject *cdyn_value_const(PyObject *obj);
/* New VK_CONST whose object reference is stolen (NULL obj passes NULL through). */
PyObject *cdyn_value_const_steal(PyObject *obj);
/* New sequence value (VK_TUPLE or VK_LIST) over a fresh list holding the n values of
 * vals (borrowed). */
PyObject *cdyn_value_seq(cdyn_vkind kind, PyObject *const *vals, Py_ssize_t n);
/* Readable short form for logs, e.g. "TensorVariable(add)", "ConstantVariable(3)". New ref. */
PyObject *cdyn_value_repr(PyObject *v);

int cdyn_value_init(PyObject *module);

#endif
