/* value.c: the symbolic value type (see value.h). */
#include "value.h"

static void
value_dealloc(PyObject *self)
{
    cdyn_value *v = V(self);
    Py_CLEAR(v->obj);
    Py_CLEAR(v->node);
    Py_CLEAR(v->items);
    Py_CLEAR(v->source);
    Py_TYPE(self)->tp_free(self);
    cdyn_live.values--;
}

static const char *kind_names[] = {
    "Null", "Constant", "Tensor", "Tuple", "List", "Dict", "PythonModule", "Callable",
    "NNModule", "Method", "Iterator", "Cell", "Function", "GradModeContext", "GradModeExit",
    "Object",
};

/* Contract: a short readable form; never fails except on MemoryError. */
PyObject *
cdyn_value_repr(PyObject *self)
{
    cdyn_value *v = V(self);
    const char *k = kind_names[v->kind];
    switch (v->kind) {
    case VK_CONST:
        return PyUnicode_FromFormat("%sVariable(%R)", k, v->obj);
    case VK_TENSOR:
        return PyUnicode_FromFormat("%sVariable(%S)", k, v->node ? v->node : Py_None);
    case VK_TUPLE:
    case VK_LIST:
    case VK_DICT:
    case VK_ITER:
        return PyUnicode_FromFormat("%sVariable(len=%zd)", k,
                                    v->items ? PyList_GET_SIZE(v->items) : (Py_ssize_t)0);
    default:
        if (v->obj != NULL) {
            return PyUnicode_FromFormat("%sVariable(%.60R)", k, v->obj);
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
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A symbolic value of cdynamo's translator (internal).",
};

long long cdyn_value_serial = 0;

PyObject *
cdyn_value_new(cdyn_vkind kind, PyObject *obj, PyObject *node, PyObject *items,
               PyObject *source)
{
    cdyn_value *v = PyObject_New(cdyn_value, &cdyn_ValueType);
    if (v == NULL) {
        return NULL;
    }
    v->kind = kind;
    v->obj = Py_XNewRef(obj);
    v->node = Py_XNewRef(node);
    v->items = Py_XNewRef(items);
    v->source = Py_XNewRef(source);
    v->flag = 0;
    v->pos = 0;
    v->serial = cdyn_value_serial++;
    cdyn_live.values++;
    return (PyObject *)v;
}

PyObject *
cdyn_value_const(PyObject *obj)
{
    return cdyn_value_new(VK_CONST, obj, NULL, NULL, NULL);
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
cdyn_value_seq(cdyn_vkind kind, PyObject *const *vals, Py_ssize_t n)
{
    PyObject *list = PyList_New(n);
    PyObject *v = NULL;
    if (list == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyList_SET_ITEM(list, i, Py_NewRef(vals[i]));
    }
    v = cdyn_value_new(kind, NULL, NULL, list, NULL);
    Py_DECREF(list);
    return v;
}

int
cdyn_value_init(PyObject *module)
{
    (void)module;
    return PyType_Ready(&cdyn_ValueType);
}
