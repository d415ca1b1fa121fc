/* values/mproxy.c: types.MappingProxyType made in the trace (MPROXY).
 *
 * A proxy value holds the DICT value it shows (u.mproxy.dict): reads go to that dict as it
 * is at the time of the read (a later change of the dict shows through, as the real proxy
 * shows its mapping), writes raise the TypeError eager raises. Made by
 * `types.MappingProxyType(d)` of a dict value and by `d.keys().mapping` (values().mapping,
 * items().mapping); rebuilt as `types.MappingProxyType(<the dict>)`. A proxy of the frame
 * (a class __dict__) is userobj.c's. Ownership as everywhere: value arguments borrowed,
 * *out new on TR_OK. */
#include "../tx.h"
#include "../codegen.h"

static PyObject *
pdict(PyObject *v)
{
    return V(v)->u.mproxy.dict;
}

tr_status
cdyn_mproxy_new(cdyn_tx *tx, PyObject *d, PyObject **out)
{
    if (V(d)->kind != VK_DICT) {
        return cdyn_tx_unsupported(tx, "types.MappingProxyType of %S", d);
    }
    *out = cdyn_value_alloc(VK_MPROXY, NULL);
    if (*out == NULL) {
        return TR_ERROR;
    }
    V(*out)->u.mproxy.dict = Py_NewRef(d);
    return TR_OK;
}

/* The methods of mappingproxy: all read its mapping. */
static const char *const reads[] = {"get", "keys", "values", "items", "copy", "__getitem__",
                                    "__contains__", "__len__", "__iter__", "__reversed__",
                                    "__or__", "__ror__", NULL};

static tr_status
mproxy_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    return cdyn_container_getattr(tx, v, &PyDictProxy_Type, name, out);
}

static tr_status
mproxy_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *name, PyObject *const *args,
                   Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    if (!cdyn_name_in(name, reads)) {
        return cdyn_tx_unsupported(tx, "method %U of a mappingproxy", name);
    }
    return cdyn_v_call_method(tx, fs, pdict(v), name, args, nargs, kwnames, out);
}

static tr_status
mproxy_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    return cdyn_v_truth(tx, pdict(v), out);
}

static tr_status
mproxy_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    return cdyn_v_unpack(tx, pdict(v), out_list);
}

static tr_status
mproxy_len(cdyn_tx *tx, PyObject *v, Py_ssize_t *out)
{
    return cdyn_v_len(tx, pdict(v), out);
}

static tr_status
mproxy_contains(cdyn_tx *tx, PyObject *v, PyObject *item, int *out)
{
    return cdyn_v_contains(tx, pdict(v), item, out);
}

static tr_status
mproxy_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject **out)
{
    return cdyn_v_subscr(tx, pdict(v), key, out);
}

static tr_status
mproxy_store_subscr(cdyn_tx *tx, PyObject *v, PyObject *key, PyObject *value)
{
    (void)v;
    (void)key;
    (void)value;
    return cdyn_tx_raise_text(tx, PyExc_TypeError,
                              "'mappingproxy' object does not support item assignment");
}

static tr_status
mproxy_delete_subscr(cdyn_tx *tx, PyObject *v, PyObject *key)
{
    (void)v;
    (void)key;
    return cdyn_tx_raise_text(tx, PyExc_TypeError,
                              "'mappingproxy' object does not support item deletion");
}

/* proxy == x compares its mapping (mappingproxy's richcompare delegates); proxy | x is
 * a new dict, as the mapping's `|`. */
static tr_status
mproxy_compare(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    return cdyn_v_compare(tx, op, V(a)->kind == VK_MPROXY ? pdict(a) : a,
                          V(b)->kind == VK_MPROXY ? pdict(b) : b, out);
}

static tr_status
mproxy_binop(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    if (op != NB_OR || (V(a)->kind == VK_MPROXY && V(b)->kind == VK_MPROXY)) {
        return TR_NOTIMPL;
    }
    return cdyn_v_binop(tx, op, V(a)->kind == VK_MPROXY ? pdict(a) : a,
                        V(b)->kind == VK_MPROXY ? pdict(b) : b, out);
}

static PyTypeObject *
mproxy_python_type(PyObject *v)
{
    (void)v;
    return &PyDictProxy_Type;
}

static tr_status
mproxy_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    return cdyn_cg_collect(tx, cg, pdict(v));
}

/* types.MappingProxyType(<the dict>) */
static int
mproxy_reconstruct(cdyn_cg *cg, PyObject *v)
{
    int r = cdyn_cg_memo_load(cg, v);
    if (r != 0) {
        return r < 0 ? -1 : 0;
    }
    if (cdyn_cg_push_callable(cg, (PyObject *)&PyDictProxy_Type) < 0 ||
        cdyn_cg_value(cg, pdict(v)) < 0 || cdyn_cg_call(cg, 1) < 0) {
        return -1;
    }
    return cdyn_cg_memo_store(cg, v, "obj");
}

const cdyn_vtable cdyn_mproxy_vt = {
    .name = "MappingProxyVariable",
    .getattr = mproxy_getattr,
    .call_method = mproxy_call_method,
    .truth = mproxy_truth,
    .unpack = mproxy_unpack,
    .subscr = mproxy_subscr,
    .store_subscr = mproxy_store_subscr,
    .delete_subscr = mproxy_delete_subscr,
    .contains = mproxy_contains,
    .binop = mproxy_binop,
    .compare = mproxy_compare,
    .len = mproxy_len,
    .python_type = mproxy_python_type,
    .collect = mproxy_collect,
    .reconstruct = mproxy_reconstruct,
};
