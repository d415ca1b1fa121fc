/* codegen.c: finish a trace: compile the FX graph with the backend and generate the
 * transformed code that calls it.
 *
 * The transformed code (seed 000/004 "MODIFIED BYTECODE"):
 *     COPY_FREE_VARS n            (when the function has free variables)
 *     RESUME 0
 *     LOAD_GLOBAL NULL + __compiled_fn_N
 *     <load each graph input from its source>
 *     PRECALL k; CALL k
 *     UNPACK_SEQUENCE m; STORE_FAST ___graph_out_0 .. m-1
 *     <replay side effects>
 *     <rebuild the return value from graph outputs, constants and sources>
 *     RETURN_VALUE
 * At a graph break, instead of returning: rebuild the stack, run the breaking instruction
 * (a call, a jump on a tensor, any other instruction) in plain Python, and call the resume
 * function(s) (resume.h) with the live locals and the stack. The code takes every argument
 * slot of the original frame as a plain positional parameter (translate.h), has no cell
 * variables, and keeps the original free variables. Values are rebuilt by their families
 * (codegen.h).
 */
#include "tx.h"
#include "codegen.h"
#include "analysis.h"
#include "resume.h"
#include "cache.h"

/* ---- the code generator's primitives -------------------------------------------------- */

/* A new temporary local slot named prefix_N; returns its index or -1. */
static int
new_temp(cdyn_cg *cg, const char *prefix)
{
    Py_ssize_t n = PyList_GET_SIZE(cg->varnames);
    PyObject *nm = PyUnicode_FromFormat("___%s_%zd", prefix, n);
    if (nm == NULL || PyList_Append(cg->varnames, nm) < 0) {
        Py_XDECREF(nm);
        return -1;
    }
    Py_DECREF(nm);
    return (int)n;
}

int
cdyn_cg_emit(cdyn_cg *cg, int opcode, int oparg)
{
    cdyn_instr ins = cdyn_instr_make(opcode, oparg);
    ins.lineno = ins.end_lineno = cg->lineno;
    return cdyn_instrs_append(&cg->out, &ins) < 0 ? -1 : 0;
}

int
cdyn_cg_const(cdyn_cg *cg, PyObject *obj)
{
    Py_ssize_t n = PyList_GET_SIZE(cg->consts);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyList_GET_ITEM(cg->consts, i) == obj) {   /* identity: 1 and True stay apart */
            return (int)i;
        }
    }
    if (PyList_Append(cg->consts, obj) < 0) {
        return -1;
    }
    return (int)n;
}

int
cdyn_cg_name(cdyn_cg *cg, PyObject *name)
{
    Py_ssize_t n = PyList_GET_SIZE(cg->names);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyUnicode_Compare(PyList_GET_ITEM(cg->names, i), name) == 0) {
            return (int)i;
        }
    }
    if (PyList_Append(cg->names, name) < 0) {
        return -1;
    }
    return (int)n;
}

int
cdyn_cg_load_const(cdyn_cg *cg, PyObject *obj)
{
    int i = cdyn_cg_const(cg, obj);
    return i < 0 ? -1 : cdyn_cg_emit(cg, LOAD_CONST, i);
}

int
cdyn_cg_null_before(cdyn_cg *cg)
{
    return CDYN_NULL_FIRST ? cdyn_cg_emit(cg, PUSH_NULL, 0) : 0;
}

int
cdyn_cg_null_after(cdyn_cg *cg)
{
    return CDYN_NULL_FIRST ? 0 : cdyn_cg_emit(cg, PUSH_NULL, 0);
}

int
cdyn_cg_push_callable(cdyn_cg *cg, PyObject *callable)
{
    return cdyn_cg_null_before(cg) < 0 || cdyn_cg_load_const(cg, callable) < 0 ? -1
                                                                             : cdyn_cg_null_after(cg);
}

int
cdyn_cg_call(cdyn_cg *cg, int nargs)
{
    return CDYN_HAS_PRECALL && cdyn_cg_emit(cg, PRECALL, nargs) < 0 ? -1
                                                                  : cdyn_cg_emit(cg, CALL, nargs);
}

int
cdyn_cg_cond_jump(cdyn_cg *cg, int if_true)
{
    if (CDYN_TRUTH_IS_BOOL && cdyn_cg_emit(cg, TO_BOOL, 0) < 0) {
        return -1;
    }
    return cdyn_cg_emit(cg, if_true ? POP_JUMP_IF_TRUE : POP_JUMP_IF_FALSE, 0);
}

/* Emit an instruction on free variable k (LOAD_DEREF / LOAD_CLOSURE); fixed up later. */
static int
emit_free(cdyn_cg *cg, int opcode, int k)
{
    PyObject *idx = PyLong_FromSsize_t(cg->out.len);
    int e = idx == NULL || PyList_Append(cg->free_fixups, idx) < 0 || cdyn_cg_emit(cg, opcode, k) < 0;
    Py_XDECREF(idx);
    return e ? -1 : 0;
}

int
cdyn_cg_load_closure_cell(cdyn_cg *cg, int k)
{
    return emit_free(cg, LOAD_CLOSURE, k);
}

int
cdyn_cg_source(cdyn_cg *cg, PyObject *s)
{
    cdyn_source *src = (cdyn_source *)s;
    int i;
    switch (src->kind) {
    case CDYN_SRC_LOCAL:
        return cdyn_cg_emit(cg, LOAD_FAST, src->index);
    case CDYN_SRC_GLOBAL:
        i = cdyn_cg_name(cg, src->name);
        return i < 0 ? -1 : cdyn_cg_emit(cg, LOAD_GLOBAL, i << 1);
    case CDYN_SRC_CLOSURE:
        return emit_free(cg, LOAD_DEREF, src->index);
    case CDYN_SRC_CELL:
        return emit_free(cg, LOAD_CLOSURE, src->index);
    case CDYN_SRC_ATTR:
        if (cdyn_cg_source(cg, (PyObject *)src->base) < 0) {
            return -1;
        }
        i = cdyn_cg_name(cg, src->name);
        return i < 0 ? -1 : cdyn_cg_emit(cg, LOAD_ATTR, i);
    case CDYN_SRC_ITEM:
        if (cdyn_cg_source(cg, (PyObject *)src->base) < 0 || cdyn_cg_load_const(cg, src->name) < 0) {
            return -1;
        }
        return cdyn_cg_emit(cg, BINARY_SUBSCR, 0);
    case CDYN_SRC_CONST:
        return cdyn_cg_load_const(cg, src->name);
    case CDYN_SRC_CALL:
        if (cdyn_cg_push_callable(cg, src->name) < 0 || cdyn_cg_source(cg, (PyObject *)src->base) < 0) {
            return -1;
        }
        return cdyn_cg_call(cg, 1);
    case CDYN_SRC_TPROP: {   /* base.size(i) / base.stride(i) / base.storage_offset() */
        PyObject *dim = NULL;
        int e;
        i = cdyn_cg_name(cg, src->name);
        if (i < 0 || cdyn_cg_source(cg, (PyObject *)src->base) < 0 ||
            cdyn_cg_emit(cg, LOAD_METHOD, i) < 0) {
            return -1;
        }
        if (src->index < 0) {
            return cdyn_cg_call(cg, 0);
        }
        dim = PyLong_FromLong(src->index);
        e = dim == NULL || cdyn_cg_load_const(cg, dim) < 0 || cdyn_cg_call(cg, 1) < 0;
        Py_XDECREF(dim);
        return e ? -1 : 0;
    }
    case CDYN_SRC_ENTRY: {
        /* list(base.keys())[index] / list(base.values())[index] */
        PyObject *meth = PyUnicode_FromString(PyLong_AsLong(src->name) == 1 ? "values" : "keys");
        PyObject *idx = PyLong_FromLong(src->index);
        i = meth ? cdyn_cg_name(cg, meth) : -1;
        if (i < 0 || idx == NULL || cdyn_cg_push_callable(cg, (PyObject *)&PyList_Type) < 0 ||
            cdyn_cg_source(cg, (PyObject *)src->base) < 0 || cdyn_cg_emit(cg, LOAD_METHOD, i) < 0 ||
            cdyn_cg_call(cg, 0) < 0 || cdyn_cg_call(cg, 1) < 0 || cdyn_cg_load_const(cg, idx) < 0) {
            Py_XDECREF(meth);
            Py_XDECREF(idx);
            return -1;
        }
        Py_DECREF(meth);
        Py_DECREF(idx);   /* the constants keep it */
        return cdyn_cg_emit(cg, BINARY_SUBSCR, 0);
    }
    }
    PyErr_SetString(PyExc_SystemError, "cdynamo: unknown source kind");
    return -1;
}

/* The attribute chain of a graph input read from an nn.Module (a parameter or buffer:
 * L['self'].layers.0.weight): 1 with *names (new tuple of str, outermost first) and *head
 * (borrowed: the source the chain starts from), 0 when the input is not one, -1 error. */
static int
input_chain(cdyn_tx *tx, PyObject *source, PyObject **names, cdyn_source **head)
{
    cdyn_source *s = (cdyn_source *)source, *h = s;
    PyObject *base;
    int n = 0;
    while (h->kind == CDYN_SRC_ATTR) {
        h = h->base;
        n++;
    }
    base = n > 0 ? PyDict_GetItemWithError(tx->by_source, s->base->repr) : NULL;
    if (base == NULL || V(base)->kind != VK_NNMODULE) {
        return PyErr_Occurred() ? -1 : 0;
    }
    if ((*names = PyTuple_New(n)) == NULL) {
        return -1;
    }
    for (int k = n - 1; k >= 0; k--) {   /* names outermost first */
        cdyn_source *step = s;
        for (int j = 0; j < k; j++) {
            step = step->base;
        }
        PyTuple_SET_ITEM(*names, n - 1 - k, Py_NewRef(step->name));
    }
    *head = h;
    return 1;
}

/* Load the graph inputs keep[k0..k1) (indices into tx->input_sources) onto the stack in
 * order; returns the next k to load, or -1. An input read from an nn.Module's registries
 * reads them directly, as the guards do, instead of running nn.Module.__getattr__ in Python
 * at every step: alone, one call of an attribute loader of this load site
 * (cdyn_source_attr_loader); with the inputs after it read from the same object (the
 * parameters of a model), one call of a bulk loader for all of them
 * (cdyn_source_attr_bulk_loader), unpacked. */
static Py_ssize_t
load_inputs(cdyn_tx *tx, cdyn_cg *cg, PyObject *keep, Py_ssize_t k0)
{
    PyObject *names = NULL, *paths = NULL, *fn = NULL;
    cdyn_source *head = NULL, *h2 = NULL;
    Py_ssize_t k = k0, n = PyList_GET_SIZE(keep), res = -1;
    int r = input_chain(tx, PyList_GET_ITEM(tx->input_sources,
                                            PyLong_AsSsize_t(PyList_GET_ITEM(keep, k))),
                        &names, &head);
    if (r <= 0) {
        return r < 0 || cdyn_cg_source(cg, PyList_GET_ITEM(tx->input_sources,
                                        PyLong_AsSsize_t(PyList_GET_ITEM(keep, k)))) < 0
                   ? -1 : k + 1;
    }
    if ((paths = PyList_New(0)) == NULL || PyList_Append(paths, names) < 0) {
        goto done;
    }
    Py_CLEAR(names);
    for (k = k0 + 1; k < n; k++) {
        r = input_chain(tx, PyList_GET_ITEM(tx->input_sources,
                                            PyLong_AsSsize_t(PyList_GET_ITEM(keep, k))),
                        &names, &h2);
        if (r < 0) {
            goto done;
        }
        if (r == 0 || !cdyn_source_equal((PyObject *)h2, (PyObject *)head)) {
            Py_CLEAR(names);
            break;
        }
        if (PyList_Append(paths, names) < 0) {
            goto done;
        }
        Py_CLEAR(names);
    }
    if (PyList_GET_SIZE(paths) == 1) {
        fn = cdyn_source_attr_loader(PyList_GET_ITEM(paths, 0));
    }
    else {
        PyObject *t = PyList_AsTuple(paths);
        fn = t != NULL ? cdyn_source_attr_bulk_loader(t) : NULL;
        Py_XDECREF(t);
    }
    if (fn == NULL || cdyn_cg_push_callable(cg, fn) < 0 ||
        cdyn_cg_source(cg, (PyObject *)head) < 0 || cdyn_cg_call(cg, 1) < 0 ||
        (PyList_GET_SIZE(paths) > 1 &&
         cdyn_cg_emit(cg, UNPACK_SEQUENCE, (int)PyList_GET_SIZE(paths)) < 0)) {
        goto done;
    }
    res = k;
done:
    Py_XDECREF(names);
    Py_XDECREF(paths);
    Py_XDECREF(fn);
    return res;
}

/* A value loaded through a source that side effects may change (an attribute, an item, a
 * global, a closure cell's contents) is loaded before the side effects are replayed, as it
 * was when the trace read it: cg->preload. 0 / -1. */
static int
note_preload(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    cdyn_source_kind k;
    if (V(v)->source == NULL || PyList_GET_SIZE(tx->effects) == 0) {
        return 0;
    }
    k = ((cdyn_source *)V(v)->source)->kind;
    if (k == CDYN_SRC_LOCAL || k == CDYN_SRC_CONST || k == CDYN_SRC_CELL) {
        return 0;
    }
    return PySequence_Contains(cg->preload, v) == 0 ? PyList_Append(cg->preload, v) : 0;
}

/* Emit the preloads (after the graph call, before the side effects). 0 / -1. */
static int
emit_preloads(cdyn_cg *cg)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(cg->preload); i++) {
        PyObject *v = PyList_GET_ITEM(cg->preload, i);
        int r = cdyn_cg_memo_load(cg, v);
        if (r < 0) {
            return -1;
        }
        if (r == 1) {
            if (cdyn_cg_emit(cg, POP_TOP, 0) < 0) {
                return -1;
            }
            continue;
        }
        if (cdyn_cg_source(cg, V(v)->source) < 0 || cdyn_cg_memo_store(cg, v, "pre") < 0 ||
            cdyn_cg_emit(cg, POP_TOP, 0) < 0) {
            return -1;
        }
    }
    return 0;
}

tr_status
cdyn_cg_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    if (note_preload(tx, cg, v) < 0) {
        return TR_ERROR;
    }
    if (V(v)->vt->collect == NULL || V(v)->vt->reconstruct == NULL) {
        if (V(v)->source != NULL) {
            return TR_OK;
        }
        return cdyn_tx_unsupported(tx, "cannot rebuild %S", v);
    }
    return V(v)->vt->collect(tx, cg, v);
}

int
cdyn_cg_value(cdyn_cg *cg, PyObject *v)
{
    if (V(v)->source != NULL && PyList_GET_SIZE(cg->preload) > 0) {
        int r = cdyn_cg_memo_load(cg, v);   /* loaded before the side effects */
        if (r != 0) {
            return r < 0 ? -1 : 0;
        }
    }
    if (V(v)->vt->reconstruct == NULL) {
        if (V(v)->source != NULL) {
            return cdyn_cg_source(cg, V(v)->source);
        }
        PyErr_Format(PyExc_SystemError, "cdynamo: no way to rebuild %R", v);
        return -1;
    }
    return V(v)->vt->reconstruct(cg, v);
}

int
cdyn_cg_add_output(cdyn_cg *cg, PyObject *node)
{
    PyObject *idx;
    int e;
    if (PyDict_Contains(cg->outputs, node)) {
        return 0;
    }
    idx = PyLong_FromSsize_t(PyList_GET_SIZE(cg->out_nodes));
    e = idx == NULL || PyDict_SetItem(cg->outputs, node, idx) < 0 ||
        PyList_Append(cg->out_nodes, node) < 0;
    Py_XDECREF(idx);
    return e ? -1 : 0;
}

int
cdyn_cg_load_output(cdyn_cg *cg, PyObject *node)
{
    PyObject *idx = PyDict_GetItemWithError(cg->outputs, node);
    if (idx == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_SystemError, "cdynamo: tensor is not a graph output");
        }
        return -1;
    }
    return cdyn_cg_emit(cg, LOAD_FAST, cg->first_tmp + (int)PyLong_AsLong(idx));
}

int
cdyn_cg_is_shared(cdyn_cg *cg, PyObject *v)
{
    PyObject *key = PyLong_FromVoidPtr(v);
    int r = key == NULL ? -1 : PySet_Contains(cg->shared, key);
    Py_XDECREF(key);
    return r;
}

int
cdyn_cg_memo_load(cdyn_cg *cg, PyObject *v)
{
    PyObject *key = PyLong_FromVoidPtr(v), *slot = NULL;
    if (key == NULL) {
        return -1;
    }
    slot = PyDict_GetItemWithError(cg->memo, key);
    Py_DECREF(key);
    if (slot == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    return cdyn_cg_emit(cg, LOAD_FAST, (int)PyLong_AsLong(slot)) < 0 ? -1 : 1;
}

int
cdyn_cg_memo_store(cdyn_cg *cg, PyObject *v, const char *prefix)
{
    PyObject *key = PyLong_FromVoidPtr(v), *slot = NULL;
    int tmp = new_temp(cg, prefix), e;
    slot = tmp < 0 ? NULL : PyLong_FromLong(tmp);
    e = key == NULL || slot == NULL || PyDict_SetItem(cg->memo, key, slot) < 0 ||
        cdyn_cg_emit(cg, COPY, 1) < 0 || cdyn_cg_emit(cg, STORE_FAST, tmp) < 0;
    Py_XDECREF(key);
    Py_XDECREF(slot);
    return e ? -1 : 0;
}

/* ---- side effects ------------------------------------------------------------------------- */

static tr_status
collect_effects(cdyn_tx *tx, cdyn_cg *cg)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tx->effects); i++) {
        PyObject *e = PyList_GET_ITEM(tx->effects, i), *target = PyTuple_GET_ITEM(e, 1);
        PyObject *value = PyTuple_GET_ITEM(e, 3), *key = NULL;
        tr_status st = cdyn_Value_Check(value) ? cdyn_cg_collect(tx, cg, value) : TR_OK;
        if (st == TR_OK && cdyn_Value_Check(value) &&
            ((key = PyLong_FromVoidPtr(value)) == NULL || PySet_Add(cg->shared, key) < 0)) {
            st = TR_ERROR;
        }
        Py_XDECREF(key);
        if (st == TR_OK && target != Py_None) {
            st = cdyn_cg_collect(tx, cg, target);
        }
        if (st != TR_OK) {
            return st;
        }
    }
    return TR_OK;
}

/* Replay the side effects in program order. 0 / -1. */
static int
emit_effects(cdyn_tx *tx, cdyn_cg *cg)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tx->effects); i++) {
        PyObject *e = PyList_GET_ITEM(tx->effects, i);
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(e, 0));
        PyObject *target = PyTuple_GET_ITEM(e, 1), *key = PyTuple_GET_ITEM(e, 2);
        PyObject *value = PyTuple_GET_ITEM(e, 3);
        int k, err;
        switch (kind) {
        case EFF_APPEND:
            k = cdyn_cg_name(cg, key);
            err = cdyn_cg_value(cg, target) < 0 || k < 0 || cdyn_cg_emit(cg, LOAD_METHOD, k) < 0 ||
                  cdyn_cg_value(cg, value) < 0 || cdyn_cg_call(cg, 1) < 0 ||
                  cdyn_cg_emit(cg, POP_TOP, 0) < 0;
            break;
        case EFF_SYNC:
            if (V(target)->vt->writeback == NULL) {
                PyErr_Format(PyExc_SystemError, "cdynamo: no write-back for %R", target);
                return -1;
            }
            err = V(target)->vt->writeback(cg, target) < 0;
            break;
        case EFF_DELETE_SUBSCR:
            err = cdyn_cg_value(cg, target) < 0 || cdyn_cg_load_const(cg, key) < 0 ||
                  cdyn_cg_emit(cg, DELETE_SUBSCR, 0) < 0;
            break;
        case EFF_STORE_SUBSCR:
            err = cdyn_cg_value(cg, value) < 0 || cdyn_cg_value(cg, target) < 0 ||
                  cdyn_cg_load_const(cg, key) < 0 || cdyn_cg_emit(cg, STORE_SUBSCR, 0) < 0;
            break;
        case EFF_STORE_ATTR:
            k = cdyn_cg_name(cg, key);
            err = cdyn_cg_value(cg, value) < 0 || cdyn_cg_value(cg, target) < 0 || k < 0 ||
                  cdyn_cg_emit(cg, STORE_ATTR, k) < 0;
            break;
        case EFF_CALL:   /* fn(target, key[, value]) */
            k = cdyn_Value_Check(value) ? 3 : 2;
            err = cdyn_cg_push_callable(cg, PyTuple_GET_ITEM(key, 0)) < 0 ||
                  cdyn_cg_value(cg, target) < 0 ||
                  cdyn_cg_load_const(cg, PyTuple_GET_ITEM(key, 1)) < 0 ||
                  (k == 3 && cdyn_cg_value(cg, value) < 0) || cdyn_cg_call(cg, k) < 0 ||
                  cdyn_cg_emit(cg, POP_TOP, 0) < 0;
            break;
        default:   /* EFF_STORE_GLOBAL: a name, or <globals of another module>[name] */
            if (cdyn_Source_Check(key)) {
                cdyn_source *src = (cdyn_source *)key;
                err = cdyn_cg_value(cg, value) < 0 || cdyn_cg_source(cg, (PyObject *)src->base) < 0 ||
                      cdyn_cg_load_const(cg, src->name) < 0 || cdyn_cg_emit(cg, STORE_SUBSCR, 0) < 0;
                break;
            }
            k = cdyn_cg_name(cg, key);
            err = cdyn_cg_value(cg, value) < 0 || k < 0 || cdyn_cg_emit(cg, STORE_GLOBAL, k) < 0;
            break;
        }
        if (err) {
            return -1;
        }
    }
    return 0;
}

/* ---- opening, the graph call, closing -------------------------------------------------- */

/* Number of argument slots of code: positional, keyword-only, *args, **kwargs. */
static int
n_arg_slots(PyCodeObject *co)
{
    return co->co_argcount + co->co_kwonlyargcount + ((co->co_flags & CO_VARARGS) ? 1 : 0) +
           ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
}

static void
cg_clear(cdyn_cg *cg)
{
    cdyn_instrs_clear(&cg->out);
    Py_CLEAR(cg->consts);
    Py_CLEAR(cg->names);
    Py_CLEAR(cg->outputs);
    Py_CLEAR(cg->out_nodes);
    Py_CLEAR(cg->memo);
    Py_CLEAR(cg->varnames);
    Py_CLEAR(cg->free_fixups);
    Py_CLEAR(cg->preload);
    Py_CLEAR(cg->shared);
}

/* Start the transformed code: state, varnames, prefix. 0 / -1. */
static int
cg_open(cdyn_cg *cg, PyCodeObject *co)
{
    PyObject *orig = NULL;
    memset(cg, 0, sizeof(*cg));
    cdyn_instrs_init(&cg->out);
    cg->lineno = co->co_firstlineno;
    cg->consts = PyList_New(0);
    cg->names = PyList_New(0);
    cg->outputs = PyDict_New();
    cg->out_nodes = PyList_New(0);
    cg->memo = PyDict_New();
    cg->free_fixups = PyList_New(0);
    cg->preload = PyList_New(0);
    cg->shared = PySet_New(NULL);
    orig = PyCode_GetVarnames(co);
    if (!cg->consts || !cg->names || !cg->outputs || !cg->out_nodes || !cg->memo ||
        !cg->free_fixups || !cg->preload || !cg->shared || !orig) {
        Py_XDECREF(orig);
        return -1;
    }
    cg->varnames = PySequence_List(orig);
    Py_DECREF(orig);
    /* None first, as CPython's compiler does (co_consts[0] is the docstring or None). */
    if (cg->varnames == NULL || PyList_Append(cg->consts, Py_None) < 0) {
        return -1;
    }
    if (co->co_nfreevars > 0 && cdyn_cg_emit(cg, COPY_FREE_VARS, co->co_nfreevars) < 0) {
        return -1;
    }
    return cdyn_cg_emit(cg, RESUME, 0);
}

/* Install value under name in the frame's globals (the transformed code loads it from
 * there, as torch._dynamo's __compiled_fn_N); removable ones are removed by
 * cdynamo.reset(). */
static int
install_global(cdyn_tx *tx, PyObject *name, PyObject *value, int removable)
{
    PyObject *r = PyObject_CallMethod(tx->glue, "install_global", "OOOO", cdyn_frame_globals(tx->frame),
                                      name, value, removable ? Py_True : Py_False);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* The guards a trace adds once its graph is compiled: NO_TENSOR_ALIASING over its tensor
 * inputs, then the ShapeEnv's. 0 / -1. */
static int
finish_guards(cdyn_tx *tx)
{
    return cdyn_tx_add_no_aliasing(tx) < 0 ? -1 : cdyn_sym_finish_guards(tx);
}

/* Collect what the side effects need, compile the graph (when it has operations or
 * outputs) and emit its call, storing the outputs in temporaries from cg->first_tmp; then
 * the shape guards of the trace (after the backend: it may add some). */
static tr_status
cg_graph_call(cdyn_tx *tx, cdyn_cg *cg, PyObject **gname, PyObject **gm)
{
    Py_ssize_t nout;
    PyObject *outs = NULL, *res = NULL, *keep = NULL;
    tr_status st = collect_effects(tx, cg);
    if (st != TR_OK) {
        return st;
    }
    nout = PyList_GET_SIZE(cg->out_nodes);
    cg->first_tmp = (int)PyList_GET_SIZE(cg->varnames);
    for (Py_ssize_t i = 0; i < nout; i++) {
        if (new_temp(cg, "graph_out") < 0) {
            return TR_ERROR;
        }
    }
    if (tx->n_call_nodes == 0 && nout == 0) {
        return finish_guards(tx) < 0 ? TR_ERROR : TR_OK;
    }
    outs = PyList_AsTuple(cg->out_nodes);
    if (outs == NULL) {
        return TR_ERROR;
    }
    res = PyObject_CallMethod(tx->glue, "compile_graph", "OOOONOOO", tx->options, tx->graph,
                              tx->root, tx->input_values, outs, tx->shapes, tx->regions,
                              tx->code->co_qualname);
    if (res == NULL) {
        return TR_ERROR;   /* a backend failure (BackendCompilerFailed) reaches the user */
    }
    if (res == Py_None) {   /* nothing left to run once dead symbolic nodes went */
        Py_DECREF(res);
        assert(nout == 0);
        return finish_guards(tx) < 0 ? TR_ERROR : TR_OK;
    }
    *gname = Py_NewRef(PyTuple_GET_ITEM(res, 0));
    *gm = Py_NewRef(PyTuple_GET_ITEM(res, 2));
    keep = Py_NewRef(PyTuple_GET_ITEM(res, 3));   /* indices of the inputs kept, in order */
    cdyn_guards_set_graph_devices(tx->guards, PyTuple_GET_ITEM(res, 4));
    if (install_global(tx, *gname, PyTuple_GET_ITEM(res, 1), 1) < 0) {
        goto fail;
    }
    /* the code holds the compiled graph itself: a reset() from another thread (which
       removes the global) cannot pull it from under a running call */
    if (cdyn_cg_push_callable(cg, PyTuple_GET_ITEM(res, 1)) < 0) {
        goto fail;
    }
    Py_CLEAR(res);
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(keep); k++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyList_GET_ITEM(keep, k));
        if (i < 0 || i >= PyList_GET_SIZE(tx->input_sources)) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_SystemError, "cdynamo: bad graph input index");
            }
            goto fail;
        }
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(keep);) {
        if ((k = load_inputs(tx, cg, keep, k)) < 0) {
            goto fail;
        }
    }
    if (cdyn_cg_call(cg, (int)PyList_GET_SIZE(keep)) < 0) {
        goto fail;
    }
    Py_CLEAR(keep);
    if (finish_guards(tx) < 0) {
        return TR_ERROR;
    }
    if (nout == 0) {
        return cdyn_cg_emit(cg, POP_TOP, 0) < 0 ? TR_ERROR : TR_OK;
    }
    if (cdyn_cg_emit(cg, UNPACK_SEQUENCE, (int)nout) < 0) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < nout; i++) {
        if (cdyn_cg_emit(cg, STORE_FAST, cg->first_tmp + (int)i) < 0) {
            return TR_ERROR;
        }
    }
    return TR_OK;
fail:
    Py_XDECREF(res);
    Py_XDECREF(keep);
    return TR_ERROR;
}

/* Assemble the transformed code and print the output_code report. New ref or NULL. */
static PyObject *
cg_close(cdyn_tx *tx, cdyn_cg *cg, PyObject *gname, PyObject *gm)
{
    PyCodeObject *co = tx->code;
    PyObject *consts = NULL, *names = NULL, *varnames = NULL, *empty = NULL,
             *freevars = NULL, *newcode = NULL, *guard_strs = NULL, *rep = NULL;
    cdyn_code_spec spec;
    consts = PyList_AsTuple(cg->consts);
    names = PyList_AsTuple(cg->names);
    varnames = PyList_AsTuple(cg->varnames);
    empty = PyTuple_New(0);
    freevars = PyCode_GetFreevars(co);
    if (!consts || !names || !varnames || !empty || !freevars) {
        goto done;
    }
    /* free variables follow the varnames (the new code has no cell variables) */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(cg->free_fixups); i++) {
        Py_ssize_t at = PyLong_AsSsize_t(PyList_GET_ITEM(cg->free_fixups, i));
        cg->out.items[at].oparg += (int)PyTuple_GET_SIZE(varnames);
    }
    memset(&spec, 0, sizeof(spec));
    spec.base = co;
    spec.argcount = n_arg_slots(co);
    spec.posonlyargcount = 0;
    spec.kwonlyargcount = 0;
    spec.flags = co->co_flags & ~(CO_VARARGS | CO_VARKEYWORDS);
    spec.consts = consts;
    spec.names = names;
    spec.varnames = varnames;
    spec.cellvars = empty;
    spec.freevars = freevars;
    spec.firstlineno = -1;
    newcode = cdyn_assemble(&cg->out, &spec);
    if (newcode == NULL) {
        goto done;
    }
    guard_strs = cdyn_guards_describe(tx->guards);
    if (guard_strs == NULL) {
        Py_CLEAR(newcode);
        goto done;
    }
    rep = PyObject_CallMethod(tx->glue, "report", "OOOOOO", gname ? gname : Py_None,
                              gm ? gm : Py_None, (PyObject *)co, newcode, guard_strs,
                              tx->resume_codes);
    if (rep == NULL) {
        Py_CLEAR(newcode);
        goto done;
    }
    cdyn_log(20, "done tracing %U (%d ops, %zd inputs)", co->co_qualname, tx->n_call_nodes,
             PyList_GET_SIZE(tx->input_sources));
done:
    Py_XDECREF(consts);
    Py_XDECREF(names);
    Py_XDECREF(varnames);
    Py_XDECREF(empty);
    Py_XDECREF(freevars);
    Py_XDECREF(guard_strs);
    Py_XDECREF(rep);
    return newcode;
}

/* Set the grad mode the trace ended in (the break runs under it; a return leaves it) when
 * it differs from the mode at the start: the compiled graph does not leave global state
 * behind. 0 / -1. */
static int
emit_grad_mode(cdyn_tx *tx, cdyn_cg *cg)
{
    if (tx->grad_enabled == tx->grad_enabled_at_start) {
        return 0;
    }
    if (cdyn_cg_push_callable(cg, cdyn_G.set_grad_enabled) < 0 ||
        cdyn_cg_load_const(cg, tx->grad_enabled ? Py_True : Py_False) < 0 ||
        cdyn_cg_call(cg, 1) < 0) {
        return -1;
    }
    return cdyn_cg_emit(cg, POP_TOP, 0);
}

tr_status
cdyn_tx_finish(cdyn_tx *tx, PyObject *ret, PyObject **code_out)
{
    cdyn_cg cg;
    PyObject *gname = NULL, *gm = NULL;
    tr_status st = TR_ERROR;
    if (cg_open(&cg, tx->code) < 0) {
        goto done;
    }
    st = cdyn_cg_collect(tx, &cg, ret);
    if (st == TR_OK && tx->output_bare_input && V(ret)->kind == VK_TENSOR &&
        V(ret)->u.tensor.node != NULL && PyList_GET_SIZE(tx->effects) == 0 &&
        PyList_GET_SIZE(cg.out_nodes) == 0 &&
        cdyn_cg_add_output(&cg, V(ret)->u.tensor.node) < 0) {
        /* fullgraph=True, no operation: the returned input is the graph's output, as
           torch._dynamo compiles a graph returning a lone input tensor (its frame counts) */
        st = TR_ERROR;
    }
    if (st == TR_OK) {
        st = cg_graph_call(tx, &cg, &gname, &gm);
    }
    if (st != TR_OK) {
        goto done;
    }
    st = TR_ERROR;
    /* a grad-mode change the graph does not make (a graph of no tensor operation is not
       called, e.g. a resume function that only leaves a no_grad block) */
    if (emit_grad_mode(tx, &cg) < 0 || emit_preloads(&cg) < 0 || emit_effects(tx, &cg) < 0 ||
        cdyn_cg_value(&cg, ret) < 0 || cdyn_cg_emit(&cg, RETURN_VALUE, 0) < 0) {
        goto done;
    }
    *code_out = cg_close(tx, &cg, gname, gm);
    st = *code_out ? TR_OK : TR_ERROR;
done:
    cg_clear(&cg);
    Py_XDECREF(gname);
    Py_XDECREF(gm);
    return st;
}

/* ---- graph breaks ------------------------------------------------------------------------- */

int
cdyn_break_shape(const cdyn_instr *ins, cdyn_break_shape_t *shape)
{
    cdyn_break_shape_t s = {0, 0, 0, ins->opcode, ins->oparg, 0, 0};
    int arg = ins->oparg;
    switch (ins->opcode) {
    case BINARY_OP: case BINARY_SUBSCR: case COMPARE_OP: case IS_OP: case CONTAINS_OP:
        s.npop = 2, s.nout = 1;
        break;
    case UNARY_NEGATIVE: case UNARY_POSITIVE: case UNARY_INVERT: case UNARY_NOT: case GET_ITER:
    case LIST_TO_TUPLE: case CALL_INTRINSIC_1: case TO_BOOL: case CONVERT_VALUE:
    case FORMAT_SIMPLE:
        s.npop = 1, s.nout = 1;
        break;
    case FORMAT_WITH_SPEC:
        s.npop = 2, s.nout = 1;
        break;
    case BINARY_SLICE:
        s.npop = 3, s.nout = 1;
        break;
    case STORE_SLICE:
        s.npop = 4;
        break;
    case STORE_SUBSCR:
        s.npop = 3;
        break;
    case DELETE_SUBSCR:
        s.npop = 2;
        break;
    case STORE_ATTR:
        s.npop = 2, s.named = 1;
        break;
    case DELETE_ATTR: case STORE_GLOBAL:
        s.npop = 1, s.named = 1;
        break;
    case DELETE_GLOBAL:
        s.named = 1;
        break;
    case LOAD_ATTR:
        s.npop = 1, s.nout = 1, s.named = 1;
        break;
    case LOAD_METHOD:   /* run as LOAD_ATTR: [NULL, bound method] */
        s.npop = 1, s.nout = 1, s.named = 1, s.null_below = 1, s.opcode = LOAD_ATTR;
        break;
    case LOAD_GLOBAL:   /* the NULL (oparg & 1) is restored by the resume function */
        s.nout = 1, s.named = 1, s.null_below = arg & 1, s.oparg = arg >> 1;
        break;
    case BUILD_STRING: case BUILD_SLICE: case BUILD_SET:
        s.npop = arg, s.nout = 1;
        break;
    case FORMAT_VALUE:
        s.npop = 1 + ((arg & 0x04) != 0), s.nout = 1;
        break;
    case BUILD_MAP:
        s.npop = 2 * arg, s.nout = 1;
        break;
    case BUILD_CONST_KEY_MAP:
        s.npop = arg + 1, s.nout = 1;
        break;
    case UNPACK_SEQUENCE:
        s.npop = 1, s.nout = arg;
        break;
    case UNPACK_EX:
        s.npop = 1, s.nout = (arg & 0xFF) + (arg >> 8) + 1;
        break;
    case LIST_APPEND: case SET_ADD: case LIST_EXTEND: case SET_UPDATE: case DICT_UPDATE:
    case DICT_MERGE:
        s.npop = arg + 1, s.nout = arg;
        break;
    case MAP_ADD:
        s.npop = arg + 2, s.nout = arg;
        break;
    case IMPORT_NAME:
        s.npop = 2, s.nout = 1, s.named = 1;
        break;
    case IMPORT_FROM:
        s.npop = 1, s.nout = 2, s.named = 1;
        break;
    case BEFORE_WITH: case GET_LEN: case MATCH_MAPPING: case MATCH_SEQUENCE:
        s.npop = 1, s.nout = 2;
        break;
    case MATCH_KEYS:
        s.npop = 2, s.nout = 3;
        break;
    case MATCH_CLASS:
        s.npop = 3, s.nout = 1;
        break;
    case RAISE_VARARGS:
        s.npop = arg, s.terminal = 1;
        break;
    default:
        return 0;
    }
    if (shape != NULL) {
        *shape = s;
    }
    return 1;
}

static PyObject *resume_names;   /* dict: resume code -> global name (str) */
static long resume_serial;

/* 1 when local slot i holds a cell made in the trace that is still empty (its variable is
 * not assigned yet: the resume function makes it empty again). */
static int
empty_cell(cdyn_fs *fs, int i)
{
    PyObject *v = fs->locals[i];
    return v != NULL && V(v)->kind == VK_CELL && V(v)->u.cell.contents == NULL &&
           V(v)->u.cell.real == NULL;
}

/* Live locals at instruction `target` of the top frame: a new list of slot indices (bound
 * in the symbolic state, or untouched arguments), free variables excluded. */
static PyObject *
live_slots(cdyn_tx *tx, cdyn_fs *fs, Py_ssize_t target)
{
    PyCodeObject *co = tx->code;
    int n = co->co_nlocalsplus, nfree = co->co_nfreevars;
    unsigned char *live = PyMem_Calloc(n + 1, 1);
    PyObject *out = NULL;
    if (live == NULL) {
        return PyErr_NoMemory();
    }
    if (cdyn_live_locals(&fs->instrs, target, n, live) < 0) {
        goto done;
    }
    for (int i = n - nfree; i < n && co->co_argcount > 0; i++) {
        /* zero-argument super() reads the first argument implicitly: keep it */
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(co->co_localsplusnames, i),
                                             "__class__") == 0) {
            live[0] = 1;
        }
    }
    out = PyList_New(0);
    for (int i = 0; out != NULL && i < n - nfree; i++) {
        int bound = (fs->locals[i] != NULL && !empty_cell(fs, i)) ||
                    (fs->locals[i] == NULL && i < n_arg_slots(co) && cdyn_frame_slots(tx->frame)[i]);
        if (live[i] && bound) {
            PyObject *k = PyLong_FromLong(i);
            if (k == NULL || PyList_Append(out, k) < 0) {
                Py_CLEAR(out);
            }
            Py_XDECREF(k);
        }
    }
done:
    PyMem_Free(live);
    return out;
}

/* The value of live local slot i (borrowed), or NULL for an argument never loaded (it is
 * passed through from the transformed code's own parameter). */
static PyObject *
live_value(cdyn_fs *fs, int i)
{
    PyObject *v = fs->locals[i];
    if (v != NULL && V(v)->kind == VK_CELL) {
        return V(v)->u.cell.contents;
    }
    return v;
}

/* Load (or make) the function object of a resume code: a global __resume_at_N_M, or, for
 * an original with free variables, a new function over its closure; with the NULL of the
 * call protocol below it when `null`. 0 / -1. */
static int
emit_resume_function(cdyn_tx *tx, cdyn_fs *fs, cdyn_cg *cg, PyObject *code, Py_ssize_t target,
                     int null)
{
    PyCodeObject *co = tx->code;
    PyObject *gname = NULL, *fn = NULL;
    int i, rc = -1;
    if (co->co_nfreevars > 0) {
        if (null && cdyn_cg_null_before(cg) < 0) {
            return -1;
        }
        for (int k = 0; k < co->co_nfreevars; k++) {
            if (emit_free(cg, LOAD_CLOSURE, k) < 0) {
                return -1;
            }
        }
        if (cdyn_cg_emit(cg, BUILD_TUPLE, co->co_nfreevars) < 0 || cdyn_cg_load_const(cg, code) < 0 ||
            cdyn_cg_emit(cg, MAKE_FUNCTION, 0x08) < 0) {
            return -1;
        }
        return null ? cdyn_cg_null_after(cg) : 0;
    }
    gname = PyDict_GetItemWithError(resume_names, code);
    if (gname == NULL) {
        if (PyErr_Occurred()) {
            return -1;
        }
        gname = PyUnicode_FromFormat("__resume_at_%d_c%ld", fs->instrs.items[target].offset * 2,
                                     resume_serial++);
        if (gname == NULL || PyDict_SetItem(resume_names, code, gname) < 0) {
            goto done;
        }
    }
    else {
        Py_INCREF(gname);
    }
    fn = PyFunction_New(code, cdyn_frame_globals(tx->frame));
    if (fn == NULL || install_global(tx, gname, fn, 0) < 0) {
        goto done;
    }
    i = cdyn_cg_name(cg, gname);
    rc = i < 0 ? -1 : cdyn_cg_emit(cg, LOAD_GLOBAL, (i << 1) | (null ? 1 : 0));
done:
    Py_XDECREF(gname);
    Py_XDECREF(fn);
    return rc;
}

/* The resume functions of one graph break share one frame state (automatic dynamic
 * shapes), keyed by the original function and the line of the break (a break of a resume
 * function counts as one of its original: the break of a loop body, reached again by every
 * iteration, keeps one state). 0 / -1. */
static int
share_frame_state(cdyn_tx *tx, cdyn_fs *fs, PyObject *code)
{
    const cdyn_instr *ins = &fs->instrs.items[tx->break_pc];
    PyCodeObject *orig = tx->code;
    int plen = 0;
    PyObject *key;
    if (!cdyn_resume_origin(tx->code, &orig, &plen)) {
        orig = tx->code;
    }
    key = Py_BuildValue("(OOsi)", orig->co_filename, orig->co_qualname, "resume", ins->lineno);
    int rc = key ? cdyn_cache_share_frame_state((PyCodeObject *)code, key) : -1;
    Py_XDECREF(key);
    return rc;
}

/* Leave the autocast blocks emit_autocast_enters entered, innermost first. 0 / -1. */
static int
emit_autocast_leaves(cdyn_cg *cg)
{
    for (int k = cg->n_amp - 1; k >= 0; k--) {
        if (cdyn_cg_null_before(cg) < 0 || cdyn_cg_emit(cg, LOAD_FAST, cg->amp_tmps[k]) < 0 ||
            cdyn_cg_null_after(cg) < 0 ||
            cdyn_cg_load_const(cg, Py_None) < 0 || cdyn_cg_load_const(cg, Py_None) < 0 ||
            cdyn_cg_load_const(cg, Py_None) < 0 || cdyn_cg_call(cg, 3) < 0 ||
            cdyn_cg_emit(cg, POP_TOP, 0) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Emit a call of the resume function for (target, stack) and RETURN_VALUE, after leaving
 * the autocast blocks the break's code entered (the resume function enters them again).
 * stack: list of values (NULL values for NULL slots); then `nres` more slots held in the
 * temporaries res_tmps (the results of the instruction run at the break; -1: a NULL slot,
 * the NULL a call protocol leaves after a callable on 3.13). */
static tr_status
emit_resume_call(cdyn_tx *tx, cdyn_fs *fs, cdyn_cg *cg, Py_ssize_t target, PyObject *stack,
                 const int *res_tmps, int nres)
{
    PyCodeObject *co = tx->code;
    Py_ssize_t nstack = PyList_GET_SIZE(stack) + nres;
    unsigned char *mask = PyMem_Calloc(nstack + 1, 1);
    /* a resume at a jump resumes at its target: since 3.12 a loop ends in a conditional
       jump out and a JUMP_BACKWARD, and its continuing branch is then the loop's head, the
       same resume function as the branch into the loop */
    target = cdyn_follow_jumps(&fs->instrs, target);
    PyObject *slots = NULL, *names = NULL, *code = NULL, *lead = NULL;   /* lead borrowed */
    tr_status st = TR_ERROR;
    int nparams = 0, e = 0;
    if (mask == NULL) {
        PyErr_NoMemory();
        return TR_ERROR;
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(stack); k++) {
        PyObject *v = PyList_GET_ITEM(stack, k);
        mask[k] = V(v)->kind == VK_NULL ? CDYN_SLOT_NULL
                  : cdyn_ctx_reentered_in_resume(v) ? CDYN_SLOT_CALL : CDYN_SLOT_VALUE;
    }
    for (int k = 0; k < nres; k++) {
        mask[PyList_GET_SIZE(stack) + k] = res_tmps[k] < 0 ? CDYN_SLOT_NULL : CDYN_SLOT_VALUE;
    }
    if (emit_autocast_leaves(cg) < 0) {
        goto done;
    }
    slots = live_slots(tx, fs, target);
    names = slots ? PyTuple_New(PyList_GET_SIZE(slots)) : NULL;
    if (names == NULL) {
        goto done;
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(slots); k++) {
        int idx = (int)PyLong_AsLong(PyList_GET_ITEM(slots, k));
        PyTuple_SET_ITEM(names, k, Py_NewRef(PyTuple_GET_ITEM(co->co_localsplusnames, idx)));
    }
    code = cdyn_resume_code(co, (int)target, (int)nstack, mask, names);
    if (code == NULL || PyList_Append(tx->resume_codes, code) < 0 ||
        share_frame_state(tx, fs, code) < 0) {
        goto done;
    }
    /* a resume function in a loop is called through the trampoline; the generated code of
       one that is itself called so returns a bounce instead of calling (resume.h) */
    if (cdyn_resume_bounces(co)) {
        lead = cdyn_resume_bounce_marker();
        e = lead == NULL || cdyn_cg_load_const(cg, lead) < 0;
    }
    else if (cdyn_resume_bounces((PyCodeObject *)code)) {
        lead = cdyn_resume_trampoline();
        e = lead == NULL || cdyn_cg_push_callable(cg, lead) < 0;
    }
    if (e || emit_resume_function(tx, fs, cg, code, target, lead == NULL) < 0) {
        goto done;
    }
    /* parameters: the live locals, then the stack values (resume.h) */
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(slots); k++) {
        int idx = (int)PyLong_AsLong(PyList_GET_ITEM(slots, k));
        PyObject *v = live_value(fs, idx);
        if (v == NULL ? cdyn_cg_emit(cg, LOAD_FAST, idx) < 0   /* an argument never loaded */
                      : cdyn_cg_value(cg, v) < 0) {
            goto done;
        }
        nparams++;
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(stack); k++) {
        PyObject *v = PyList_GET_ITEM(stack, k);
        if (V(v)->kind == VK_NULL) {
            continue;
        }
        if (cdyn_cg_value(cg, v) < 0) {
            goto done;
        }
        nparams++;
    }
    for (int k = 0; k < nres; k++) {
        if (res_tmps[k] < 0) {
            continue;    /* a NULL slot */
        }
        if (cdyn_cg_emit(cg, LOAD_FAST, res_tmps[k]) < 0) {
            goto done;
        }
        nparams++;
    }
    if (lead == NULL ? cdyn_cg_call(cg, nparams) < 0
        : lead == cdyn_resume_trampoline() ? cdyn_cg_call(cg, nparams + 1) < 0
        : cdyn_cg_emit(cg, BUILD_TUPLE, nparams + 2) < 0) {
        goto done;
    }
    if (cdyn_cg_emit(cg, RETURN_VALUE, 0) < 0) {
        goto done;
    }
    st = TR_OK;
done:
    PyMem_Free(mask);
    Py_XDECREF(slots);
    Py_XDECREF(names);
    Py_XDECREF(code);
    return st;
}

/* The values of the stack slots [lo, hi) as a new list. */
static PyObject *
stack_slice(cdyn_fs *fs, int lo, int hi)
{
    PyObject *l = PyList_New(hi > lo ? hi - lo : 0);
    for (int k = lo; l != NULL && k < hi; k++) {
        PyList_SET_ITEM(l, k - lo, Py_NewRef(fs->stack[k]));
    }
    return l;
}

/* Values the break code must rebuild: the stack and the live locals of every target
 * (the instruction after the break, a jump target, an exception handler; -1: none). */
static tr_status
collect_break(cdyn_tx *tx, cdyn_fs *fs, cdyn_cg *cg, const Py_ssize_t *targets, int ntargets)
{
    tr_status st;
    for (int k = 0; k < fs->sp; k++) {
        if ((st = cdyn_cg_collect(tx, cg, fs->stack[k])) != TR_OK) {
            return st;
        }
    }
    for (int t = 0; t < ntargets; t++) {
        PyObject *slots = targets[t] < 0 ? NULL : live_slots(tx, fs, targets[t]);
        if (targets[t] < 0) {
            continue;
        }
        if (slots == NULL) {
            return TR_ERROR;
        }
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(slots); k++) {
            int idx = (int)PyLong_AsLong(PyList_GET_ITEM(slots, k));
            PyObject *v = live_value(fs, idx);
            st = TR_OK;
            if (fs->locals[idx] != NULL && V(fs->locals[idx])->kind == VK_CELL &&
                V(fs->locals[idx])->u.cell.real != NULL) {
                st = cdyn_tx_unsupported(tx, "graph break with a live free variable cell");
            }
            else if (v != NULL) {
                st = cdyn_cg_collect(tx, cg, v);
            }
            if (st != TR_OK) {
                Py_DECREF(slots);
                return st;
            }
        }
        Py_DECREF(slots);
    }
    return TR_OK;
}

/* The instruction run at a break is covered by an exception handler of the original code
 * (it sits in a try block or a with block): give the generated instructions [from, to) a
 * handler of their own that passes the exception to a resume function at the original
 * handler, with the stack the handler expects (its depth, lasti, the exception). Emitted
 * after the normal path. memo_at (borrowed; NULL: the current one): the memo of rebuilt
 * objects as it was at `from`; objects first stored after it (by the normal path) do not
 * exist when the instruction raises, so the handler path rebuilds them. */
static tr_status
cover_with_handler(cdyn_tx *tx, cdyn_fs *fs, cdyn_cg *cg, const cdyn_instr *ins,
                   Py_ssize_t from, Py_ssize_t to, PyObject *memo_at)
{
    PyObject *below = NULL, *lasti = NULL;
    Py_ssize_t handler = cg->out.len;
    tr_status st = TR_ERROR;
    int exc_tmp;
    if (ins->exc_handler < 0) {
        return TR_OK;
    }
    if (ins->exc_depth > fs->sp) {
        return cdyn_tx_unsupported(tx, "exception handler deeper than the stack");
    }
    if (memo_at != NULL) {
        PyObject *memo = PyDict_Copy(memo_at);
        if (memo == NULL) {
            return TR_ERROR;
        }
        Py_SETREF(cg->memo, memo);
    }
    for (Py_ssize_t i = from; i < to; i++) {
        cg->out.items[i].exc_handler = (int)handler;
        cg->out.items[i].exc_depth = 0;
        cg->out.items[i].exc_lasti = 0;
    }
    exc_tmp = new_temp(cg, "exception");
    below = stack_slice(fs, 0, ins->exc_depth);
    if (exc_tmp < 0 || below == NULL || cdyn_cg_emit(cg, STORE_FAST, exc_tmp) < 0) {
        goto done;
    }
    if (ins->exc_lasti) {
        /* the offset RERAISE restores: only used for the traceback's line */
        lasti = cdyn_value_const_steal(PyLong_FromLong(0));
        if (lasti == NULL || PyList_Append(below, lasti) < 0) {
            goto done;
        }
    }
    st = emit_resume_call(tx, fs, cg, ins->exc_handler, below, &exc_tmp, 1);
done:
    Py_XDECREF(below);
    Py_XDECREF(lasti);
    return st;
}

/* Start the other branch of the jump at instruction `label` here: the jump lands on the
 * next instruction, and the memo of rebuilt objects is back to `memo` (borrowed; its state
 * at the jump: objects built in the first branch do not exist in the other). 0 / -1. */
static int
other_branch(cdyn_cg *cg, Py_ssize_t label, PyObject *memo)
{
    PyObject *copy = PyDict_Copy(memo);
    if (copy == NULL) {
        return -1;
    }
    cg->out.items[label].target = (int)cg->out.len;
    Py_SETREF(cg->memo, copy);
    return 0;
}

/* A jump on a value the trace cannot decide: test the rebuilt value in Python and call
 * the resume function of the branch taken. */
static tr_status
break_jump(cdyn_tx *tx, cdyn_fs *fs, cdyn_cg *cg, const cdyn_instr *ins)
{
    PyObject *cond = fs->stack[fs->sp - 1], *below = NULL, *with_cond = NULL, *memo = NULL;
    int op = ins->opcode, b_label;
    int jump_if_true = op == POP_JUMP_IF_TRUE || op == JUMP_IF_TRUE_OR_POP;
    int keep = op == JUMP_IF_TRUE_OR_POP || op == JUMP_IF_FALSE_OR_POP;
    tr_status st = TR_ERROR;
    below = stack_slice(fs, 0, fs->sp - 1);
    if (below == NULL || cdyn_cg_value(cg, cond) < 0 ||
        cdyn_cg_cond_jump(cg, jump_if_true) < 0) {
        goto done;
    }
    b_label = (int)cg->out.len - 1;   /* the truth test may raise (__bool__) */
    /* values built before the branch are shared; those built in one branch are not
       visible in the other */
    memo = PyDict_Copy(cg->memo);
    if (memo == NULL || emit_resume_call(tx, fs, cg, tx->break_pc + 1, below, NULL, 0) != TR_OK) {
        goto done;
    }
    if (other_branch(cg, b_label, memo) < 0) {
        goto done;
    }
    if (keep) {
        with_cond = PyList_GetSlice(below, 0, PY_SSIZE_T_MAX);
        if (with_cond == NULL || PyList_Append(with_cond, cond) < 0) {
            goto done;
        }
    }
    st = emit_resume_call(tx, fs, cg, ins->target, keep ? with_cond : below, NULL, 0);
    if (st == TR_OK) {
        st = cover_with_handler(tx, fs, cg, ins, b_label, b_label + 1, memo);
    }
done:
    Py_XDECREF(below);
    Py_XDECREF(with_cond);
    Py_XDECREF(memo);
    return st;
}

/* A FOR_ITER on an iterator the trace cannot advance (a real iterator handed to a resume
 * function): advance the rebuilt iterator in Python; call the resume function after the
 * FOR_ITER with the item, or the one at the loop's exit when it is exhausted. */
static tr_status
break_for_iter(cdyn_tx *tx, cdyn_fs *fs, cdyn_cg *cg, const cdyn_instr *ins)
{
    PyObject *with_it = NULL, *below = NULL, *memo = NULL;
    Py_ssize_t label;
    int item_tmp;
    tr_status st = TR_ERROR;
    with_it = stack_slice(fs, 0, fs->sp);
    below = stack_slice(fs, 0, fs->sp - 1);
    if (with_it == NULL || below == NULL || cdyn_cg_value(cg, fs->stack[fs->sp - 1]) < 0 ||
        cdyn_cg_emit(cg, FOR_ITER, 0) < 0) {
        goto done;
    }
    label = cg->out.len - 1;   /* next() may raise */
    memo = PyDict_Copy(cg->memo);
    item_tmp = new_temp(cg, "item");
    if (memo == NULL || item_tmp < 0 || cdyn_cg_emit(cg, STORE_FAST, item_tmp) < 0 ||
        cdyn_cg_emit(cg, POP_TOP, 0) < 0 ||
        emit_resume_call(tx, fs, cg, tx->break_pc + 1, with_it, &item_tmp, 1) != TR_OK) {
        goto done;
    }
    if (other_branch(cg, label, memo) < 0) {
        goto done;
    }
    /* the loop's end the exhausted FOR_ITER skips (END_FOR [, POP_TOP] since 3.12) */
    for (int k = 0; k < CDYN_FOR_ITER_SKIPS; k++) {
        if (cdyn_cg_emit(cg, k == 0 ? END_FOR : POP_TOP, 0) < 0) {
            goto done;
        }
    }
    st = emit_resume_call(tx, fs, cg, cdyn_for_iter_exit(&fs->instrs, ins->target), below, NULL, 0);
    if (st == TR_OK) {
        st = cover_with_handler(tx, fs, cg, ins, label, label + 1, memo);
    }
done:
    Py_XDECREF(with_it);
    Py_XDECREF(below);
    Py_XDECREF(memo);
    return st;
}

/* A call (CALL / CALL_FUNCTION_EX) run in Python, then the resume function. */
static tr_status
break_call(cdyn_tx *tx, cdyn_fs *fs, cdyn_cg *cg, const cdyn_instr *ins)
{
    int nslots, result_tmp;
    Py_ssize_t from;
    PyObject *below = NULL, *memo_at = NULL;
    tr_status st = TR_ERROR;
    if (tx->break_kind == BRK_CALL) {
        nslots = tx->break_arg + 2;
    }
    else if (!CDYN_NULL_FIRST) {
        nslots = 3 + (tx->break_arg & 1);    /* [fn, NULL, args, (kwargs)] */
    }
    else {
        nslots = 2 + (tx->break_arg & 1);
        if (fs->sp - nslots - 1 >= 0 && V(fs->stack[fs->sp - nslots - 1])->kind == VK_NULL) {
            nslots++;
        }
    }
    below = stack_slice(fs, 0, fs->sp - nslots);
    if (below == NULL) {
        return TR_ERROR;
    }
    for (int k = fs->sp - nslots; k < fs->sp; k++) {
        if (cdyn_cg_value(cg, fs->stack[k]) < 0) {
            goto done;
        }
    }
    from = cg->out.len;
    if (ins->exc_handler >= 0 && (memo_at = PyDict_Copy(cg->memo)) == NULL) {
        goto done;
    }
    if (tx->break_kind == BRK_CALL) {
        if (tx->break_kwnames != NULL &&
            cdyn_cg_emit(cg, KW_NAMES, cdyn_cg_const(cg, tx->break_kwnames)) < 0) {
            goto done;
        }
        if (cdyn_cg_call(cg, tx->break_arg) < 0) {
            goto done;
        }
    }
    else if (cdyn_cg_emit(cg, CALL_FUNCTION_EX, tx->break_arg) < 0) {
        goto done;
    }
    result_tmp = new_temp(cg, "call_result");
    if (result_tmp < 0 || cdyn_cg_emit(cg, STORE_FAST, result_tmp) < 0) {
        goto done;
    }
    {
        Py_ssize_t to = cg->out.len - 1;   /* the call, not the store of its result */
        st = emit_resume_call(tx, fs, cg, tx->break_pc + 1, below, &result_tmp, 1);
        if (st == TR_OK) {
            st = cover_with_handler(tx, fs, cg, ins, from, to, memo_at);
        }
    }
done:
    Py_XDECREF(below);
    Py_XDECREF(memo_at);
    return st;
}

/* Any other instruction run in Python on the rebuilt operands, then the resume function
 * with its results (none after a raise). */
static tr_status
break_instr(cdyn_tx *tx, cdyn_fs *fs, cdyn_cg *cg, const cdyn_instr *ins)
{
    cdyn_break_shape_t s;
    PyObject *below = NULL, *memo_at = NULL;
    int tmps[256], arg, nres;
    tr_status st = TR_ERROR;
    if (!cdyn_break_shape(ins, &s) || s.nout > 255 || s.npop > fs->sp) {
        return cdyn_tx_unsupported(tx, "cannot run %s at a graph break", cdyn_opname(ins->opcode));
    }
    arg = s.oparg;
    if (s.named) {
        arg = cdyn_cg_name(cg, PyTuple_GET_ITEM(tx->code->co_names, s.oparg));
        if (arg < 0) {
            return TR_ERROR;
        }
        if (s.opcode == LOAD_GLOBAL) {
            arg <<= 1;
        }
    }
    for (int k = fs->sp - s.npop; k < fs->sp; k++) {
        if (cdyn_cg_value(cg, fs->stack[k]) < 0) {
            return TR_ERROR;
        }
    }
    if ((CDYN_TRUTH_IS_BOOL && s.opcode == UNARY_NOT && cdyn_cg_emit(cg, TO_BOOL, 0) < 0) ||
        cdyn_cg_emit(cg, s.opcode, arg) < 0) {
        return TR_ERROR;
    }
    if (s.terminal) {
        return cover_with_handler(tx, fs, cg, ins, cg->out.len - 1, cg->out.len, NULL);
    }
    nres = s.nout;
    if (ins->exc_handler >= 0 && (memo_at = PyDict_Copy(cg->memo)) == NULL) {
        return TR_ERROR;
    }
    for (int k = s.nout - 1; k >= 0; k--) {
        if ((tmps[k] = new_temp(cg, "break_out")) < 0 || cdyn_cg_emit(cg, STORE_FAST, tmps[k]) < 0) {
            goto done;
        }
    }
    below = stack_slice(fs, 0, fs->sp - s.npop);
    if (s.null_below && !CDYN_NULL_FIRST) {
        tmps[nres++] = -1;    /* the NULL after the callable */
    }
    else if (below != NULL && s.null_below) {
        PyObject *null = cdyn_value_null();
        if (PyList_Append(below, null) < 0) {
            Py_CLEAR(below);
        }
        Py_DECREF(null);
    }
    if (below != NULL) {
        Py_ssize_t at = cg->out.len - s.nout - 1;   /* the instruction, before its stores */
        st = emit_resume_call(tx, fs, cg, tx->break_pc + 1, below, tmps, nres);
        if (st == TR_OK) {
            st = cover_with_handler(tx, fs, cg, ins, at, at + 1, memo_at);
        }
    }
done:
    Py_XDECREF(below);
    Py_XDECREF(memo_at);
    return st;
}


/* Autocast blocks open at the break (all the top frame's: begin_break checked): end the
 * graph with their _exit_autocast nodes, innermost first, and leave them at trace time.
 * *exits (new): their AUTOCAST_EXIT values, outer first, for emit_autocast_enters. */
static tr_status
close_autocast(cdyn_tx *tx, cdyn_fs *fs, PyObject **exits)
{
    *exits = cdyn_ctx_open_autocast_exits(tx, fs);
    if (*exits == NULL) {
        return TR_ERROR;
    }
    if (*exits == Py_None) {
        Py_CLEAR(*exits);
        return cdyn_tx_unsupported(tx, "graph break inside torch.autocast / inference_mode");
    }
    for (Py_ssize_t k = PyList_GET_SIZE(*exits) - 1; k >= 0; k--) {
        PyObject *ex = PyList_GET_ITEM(*exits, k), *node = NULL;
        PyObject *args = PyTuple_Pack(1, V(ex)->u.amp.node);
        tr_status st = args ? cdyn_tx_graph_raw(tx, *cdyn_ctx_family(ex)->exit, args, &node)
                            : TR_ERROR;
        Py_XDECREF(args);
        Py_XDECREF(node);
        if (st != TR_OK) {
            return st;
        }
    }
    cdyn_tx_exit_modes(tx, 0);
    return TR_OK;
}

/* Enter the autocast blocks of the break again in Python before its instruction runs:
 * AutocastExit(*args) per block, outer first, kept in cg->amp_tmps; emit_resume_call leaves
 * them again (emit_autocast_leaves) on every path after the instruction. 0 / -1. */
static int
emit_autocast_enters(cdyn_cg *cg, PyObject *exits)
{
    if (PyList_GET_SIZE(exits) > (Py_ssize_t)(sizeof(cg->amp_tmps) / sizeof(cg->amp_tmps[0]))) {
        PyErr_SetString(PyExc_SystemError, "cdynamo: too many nested autocast blocks");
        return -1;
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(exits); k++) {
        PyObject *ex = PyList_GET_ITEM(exits, k), *args = V(ex)->u.amp.args;
        int tmp = new_temp(cg, "autocast");
        if (tmp < 0 || cdyn_cg_push_callable(cg, *cdyn_ctx_family(ex)->exit_type) < 0) {
            return -1;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
            if (cdyn_cg_load_const(cg, PyTuple_GET_ITEM(args, i)) < 0) {
                return -1;
            }
        }
        if (cdyn_cg_call(cg, (int)PyTuple_GET_SIZE(args)) < 0 ||
            cdyn_cg_emit(cg, STORE_FAST, tmp) < 0) {
            return -1;
        }
        cg->amp_tmps[cg->n_amp++] = tmp;
    }
    return 0;
}

tr_status
cdyn_tx_finish_break(cdyn_tx *tx, cdyn_fs *fs, PyObject **code_out)
{
    cdyn_cg cg;
    PyObject *gname = NULL, *gm = NULL, *exits = NULL;
    const cdyn_instr *ins = &fs->instrs.items[tx->break_pc];
    tr_status st = TR_ERROR;
    if (resume_names == NULL && (resume_names = PyDict_New()) == NULL) {
        return TR_ERROR;
    }
    if (tx->code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) {
        return cdyn_tx_unsupported(tx, "graph break in a generator");
    }
    if (cg_open(&cg, tx->code) < 0) {
        goto done;
    }
    cg.lineno = ins->lineno >= 0 ? ins->lineno : tx->code->co_firstlineno;
    {
        Py_ssize_t targets[3] = {ins->opcode == RAISE_VARARGS ? -1 : tx->break_pc + 1,
                                 tx->break_kind == BRK_JUMP || tx->break_kind == BRK_FOR_ITER
                                     ? ins->target : -1,
                                 ins->exc_handler};
        st = collect_break(tx, fs, &cg, targets, 3);
    }
    if (st == TR_OK) {
        st = close_autocast(tx, fs, &exits);
    }
    if (st == TR_OK) {
        st = cg_graph_call(tx, &cg, &gname, &gm);
    }
    if (st != TR_OK) {
        goto done;
    }
    st = TR_ERROR;
    if (emit_grad_mode(tx, &cg) < 0 || emit_preloads(&cg) < 0 || emit_effects(tx, &cg) < 0 ||
        emit_autocast_enters(&cg, exits) < 0) {
        goto done;
    }
    switch (tx->break_kind) {
    case BRK_JUMP:
        st = break_jump(tx, fs, &cg, ins);
        break;
    case BRK_CALL:
    case BRK_CALL_EX:
        st = break_call(tx, fs, &cg, ins);
        break;
    case BRK_FOR_ITER:
        st = break_for_iter(tx, fs, &cg, ins);
        break;
    default:
        st = break_instr(tx, fs, &cg, ins);
        break;
    }
    if (st != TR_OK) {
        goto done;
    }
    *code_out = cg_close(tx, &cg, gname, gm);
    st = *code_out ? TR_OK : TR_ERROR;
done:
    cg_clear(&cg);
    Py_XDECREF(gname);
    Py_XDECREF(gm);
    Py_XDECREF(exits);
    return st;
}
