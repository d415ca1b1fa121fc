/* translate.c: the symbolic interpreter of CPython 3.11 bytecode.
 *
 * Pipeline for one frame: decode the code object (bytecode.c), interpret it instruction
 * by instruction on symbolic values (value.h) while recording torch operations into a
 * torch.fx.Graph (tcall.c), then hand the graph to the backend and generate the
 * transformed code (codegen.c). Anything this issue does not support ends the trace with
 * a reason (tx->reason) and the frame runs unmodified; nothing raises to the user except
 * fullgraph errors and backend failures.
 */
#include "translate.h"
#include "analysis.h"
#include "tx.h"

cdyn_tx_globals cdyn_G;

int cdyn_tcall_init(void);

#define MAX_STEPS 1000000
#define MAX_INLINE_DEPTH 32

tr_status
cdyn_tx_unsupported(cdyn_tx *tx, const char *fmt, ...)
{
    va_list va;
    PyObject *msg = NULL, *etype = NULL, *evalue = NULL, *etb = NULL;
    PyErr_Fetch(&etype, &evalue, &etb);
    va_start(va, fmt);
    msg = PyUnicode_FromFormatV(fmt, va);
    va_end(va);
    if (msg != NULL && evalue != NULL) {
        PyObject *full = PyUnicode_FromFormat("%U (%s: %S)", msg,
                                              ((PyTypeObject *)etype)->tp_name, evalue);
        Py_XSETREF(msg, full);
    }
    PyErr_Clear();
    if (tx->reason == NULL) {   /* keep the innermost reason, and where it arose */
        tx->reason = msg;
        if (tx->cur_fs != NULL && tx->cur_fs->pc > 0 && tx->cur_fs->pc <= tx->cur_fs->instrs.len) {
            const cdyn_instr *ins = &tx->cur_fs->instrs.items[tx->cur_fs->pc - 1];
            tx->reason_file = tx->cur_fs->code->co_filename;
            tx->reason_line = ins->lineno >= 0 ? ins->lineno : tx->cur_fs->code->co_firstlineno;
        }
    }
    else {
        Py_XDECREF(msg);
    }
    Py_XDECREF(etype);
    Py_XDECREF(evalue);
    Py_XDECREF(etb);
    return TR_UNSUPPORTED;
}

tr_status
cdyn_tx_effect(cdyn_tx *tx, int kind, PyObject *target, PyObject *key, PyObject *value)
{
    PyObject *t = Py_BuildValue("(iOOO)", kind, target ? target : Py_None,
                                key ? key : Py_None, value);
    int e;
    if (t == NULL) {
        return TR_ERROR;
    }
    e = PyList_Append(tx->effects, t);
    Py_DECREF(t);
    return e < 0 ? TR_ERROR : TR_OK;
}

/* ---- stack helpers --------------------------------------------------------------- */

/* Push a value (stolen). TR_ERROR on NULL v (exception set) or overflow. */
static tr_status
push(cdyn_fs *fs, PyObject *v)
{
    if (v == NULL) {
        return TR_ERROR;
    }
    if (fs->sp >= fs->stack_cap) {
        Py_DECREF(v);
        PyErr_SetString(PyExc_SystemError, "cdynamo: symbolic stack overflow");
        return TR_ERROR;
    }
    fs->stack[fs->sp++] = v;
    return TR_OK;
}

/* Pop: returns the owned top value. */
static PyObject *
pop(cdyn_fs *fs)
{
    assert(fs->sp > 0);
    return fs->stack[--fs->sp];
}

/* Borrowed value i slots below the top (0 = top). */
static PyObject *
peek(cdyn_fs *fs, int i)
{
    assert(fs->sp - 1 - i >= 0);
    return fs->stack[fs->sp - 1 - i];
}

static PyObject *null_value;   /* the shared VK_NULL value */

static PyObject *
new_null(void)
{
    return Py_NewRef(null_value);
}

/* ---- locals ---------------------------------------------------------------------- */

static PyObject *
localsplus_name(PyCodeObject *co, int i)
{
    return PyTuple_GET_ITEM(co->co_localsplusnames, i);
}

/* Borrowed value of local i, wrapping a top-frame argument on first use. */
static tr_status
load_local(cdyn_tx *tx, cdyn_fs *fs, int i, PyObject **out)
{
    PyObject *src = NULL;
    tr_status st = TR_OK;
    if (fs->locals[i] == NULL && fs->is_top && i < fs->code->co_nlocalsplus) {
        PyObject *real = tx->frame->localsplus[i];
        _PyLocals_Kind k = _PyLocals_GetKind(fs->code->co_localspluskinds, i);
        if (real != NULL && (k & CO_FAST_LOCAL) && !(k & CO_FAST_FREE)) {
            src = cdyn_source_local(i, localsplus_name(fs->code, i));
            if (src == NULL) {
                return TR_ERROR;
            }
            st = cdyn_tx_wrap_real(tx, real, src, &fs->locals[i]);
            Py_DECREF(src);
            if (st != TR_OK) {
                return st;
            }
        }
    }
    if (fs->locals[i] == NULL) {
        return cdyn_tx_unsupported(tx, "unbound local %U", localsplus_name(fs->code, i));
    }
    *out = fs->locals[i];
    return TR_OK;
}

static void
store_local(cdyn_fs *fs, int i, PyObject *v /* stolen */)
{
    Py_XSETREF(fs->locals[i], v);
}

/* Contents of a cell value (borrowed), wrapping a real cell's contents on first use. */
static tr_status
cell_get(cdyn_tx *tx, PyObject *cell, PyObject **out)
{
    cdyn_value *c = V(cell);
    if (c->kind != VK_CELL) {
        return cdyn_tx_unsupported(tx, "LOAD_DEREF of a non-cell");
    }
    if (PyList_GET_SIZE(c->items) == 0 && c->obj != NULL) {
        PyObject *contents = PyCell_GET(c->obj);
        PyObject *w = NULL;
        tr_status st;
        if (contents == NULL) {
            return cdyn_tx_unsupported(tx, "empty closure cell");
        }
        st = cdyn_tx_wrap_real(tx, contents, c->source, &w);
        if (st != TR_OK) {
            return st;
        }
        if (PyList_Append(c->items, w) < 0) {
            Py_DECREF(w);
            return TR_ERROR;
        }
        Py_DECREF(w);
    }
    if (PyList_GET_SIZE(c->items) == 0) {
        return cdyn_tx_unsupported(tx, "free variable referenced before assignment");
    }
    *out = PyList_GET_ITEM(c->items, 0);
    return TR_OK;
}

/* ---- frame state ------------------------------------------------------------------- */

/* Initialise fs for code (borrowed); locals zeroed. 0 / -1. */
static int
fs_init(cdyn_fs *fs, PyCodeObject *code, PyObject *globals, PyObject *builtins)
{
    memset(fs, 0, sizeof(*fs));
    fs->code = (PyCodeObject *)Py_NewRef(code);
    fs->globals = Py_NewRef(globals);
    fs->builtins = Py_NewRef(builtins);
    fs->nlocals = code->co_nlocalsplus;
    fs->locals = PyMem_Calloc(fs->nlocals + 1, sizeof(PyObject *));
    fs->stack_cap = code->co_stacksize + 8;
    fs->stack = PyMem_Calloc(fs->stack_cap, sizeof(PyObject *));
    if (fs->locals == NULL || fs->stack == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (cdyn_decode(code, &fs->instrs) < 0) {
        return -1;
    }
    return 0;
}

static void
fs_clear(cdyn_fs *fs)
{
    if (fs->locals != NULL) {
        for (int i = 0; i < fs->nlocals; i++) {
            Py_XDECREF(fs->locals[i]);
        }
        PyMem_Free(fs->locals);
    }
    if (fs->stack != NULL) {
        for (int i = 0; i < fs->sp; i++) {
            Py_XDECREF(fs->stack[i]);
        }
        PyMem_Free(fs->stack);
    }
    cdyn_instrs_clear(&fs->instrs);
    Py_XDECREF(fs->code);
    Py_XDECREF(fs->globals);
    Py_XDECREF(fs->builtins);
    Py_XDECREF(fs->globals_source);
    Py_XDECREF(fs->kw_names);
    Py_XDECREF(fs->retval);
    memset(fs, 0, sizeof(*fs));
}

/* ---- opcode helpers ---------------------------------------------------------------- */

/* Value of a global name: globals then builtins, with a source. *out new. */
static tr_status
load_global(cdyn_tx *tx, cdyn_fs *fs, PyObject *name, PyObject **out)
{
    PyObject *obj = NULL, *src = NULL;
    tr_status st = TR_ERROR;
    int in_globals = 1;
    if (fs->top_globals) {
        PyObject *memo = NULL, *gsrc = cdyn_source_global(name);
        if (gsrc == NULL) {
            return TR_ERROR;
        }
        memo = PyDict_GetItemWithError(tx->by_source, cdyn_source_repr(gsrc));
        Py_DECREF(gsrc);
        if (memo != NULL) {
            *out = Py_NewRef(memo);
            return TR_OK;
        }
        if (PyErr_Occurred()) {
            return TR_ERROR;
        }
    }
    obj = PyDict_GetItemWithError(fs->globals, name);   /* borrowed */
    if (obj == NULL) {
        if (PyErr_Occurred()) {
            goto done;
        }
        in_globals = 0;
        obj = PyDict_GetItemWithError(fs->builtins, name);
        if (obj == NULL) {
            if (!PyErr_Occurred()) {
                st = cdyn_tx_unsupported(tx, "name '%U' is not defined", name);
            }
            goto done;
        }
    }
    if (!in_globals) {
        /* Builtins are not guarded (as torch._dynamo, they are assumed unchanged). */
        st = cdyn_tx_wrap_real(tx, obj, NULL, out);
        goto done;
    }
    if (fs->top_globals) {
        src = cdyn_source_global(name);
    }
    else if (fs->globals_source != NULL) {
        src = cdyn_source_item(fs->globals_source, name);
    }
    else {
        /* trusted globals (torch's own modules): not guarded */
        st = cdyn_tx_wrap_real(tx, obj, NULL, out);
        goto done;
    }
    if (src == NULL) {
        goto done;
    }
    st = cdyn_tx_wrap_real(tx, obj, src, out);
done:
    Py_XDECREF(src);
    return st;
}

/* Binary operation on two values (oparg of BINARY_OP). *out new. */
static tr_status
binary_op(cdyn_tx *tx, int oparg, PyObject *a, PyObject *b, PyObject **out)
{
    cdyn_value *va = V(a), *vb = V(b);
    PyObject *fn = cdyn_G.binop_fns[oparg];
    PyObject *res = NULL;
    if (va->kind == VK_TENSOR || vb->kind == VK_TENSOR) {
        PyObject *args[2] = {a, b};
        return cdyn_tx_graph_call(tx, "call_function", fn, NULL, args, 2, NULL, out);
    }
    if (va->kind == VK_CONST && vb->kind == VK_CONST) {
        res = PyObject_CallFunctionObjArgs(fn, va->obj, vb->obj, NULL);
        if (res == NULL) {
            return cdyn_tx_unsupported(tx, "constant binary op failed");
        }
        *out = cdyn_value_const_steal(res);
        return *out ? TR_OK : TR_ERROR;
    }
    /* Sequence concatenation / repetition on tuples and lists (not in place). */
    int opb = oparg >= 13 ? oparg - 13 : oparg;
    if (opb == 0 /* add */ && (va->kind == VK_TUPLE || va->kind == VK_LIST ||
                               va->kind == VK_CONST) &&
        (vb->kind == VK_TUPLE || vb->kind == VK_LIST || vb->kind == VK_CONST)) {
        PyObject *la = NULL, *lb = NULL;
        tr_status st;
        cdyn_vkind k = va->kind == VK_CONST ? (PyList_Check(va->obj) ? VK_LIST : VK_TUPLE)
                                            : va->kind;
        if (oparg >= 13 && va->kind == VK_LIST) {
            /* list += iterable: mutate in place */
            st = cdyn_tx_unpack(tx, b, &lb);
            if (st != TR_OK) {
                return st;
            }
            if (va->source != NULL) {
                Py_DECREF(lb);
                return cdyn_tx_unsupported(tx, "mutation of an input list");
            }
            cdyn_tx_mutated(tx, a);
            Py_ssize_t n = PyList_GET_SIZE(va->items);
            if (PyList_SetSlice(va->items, n, n, lb) < 0) {
                Py_DECREF(lb);
                return TR_ERROR;
            }
            Py_DECREF(lb);
            *out = Py_NewRef(a);
            return TR_OK;
        }
        st = cdyn_tx_unpack(tx, a, &la);
        if (st != TR_OK) {
            return st;
        }
        st = cdyn_tx_unpack(tx, b, &lb);
        if (st != TR_OK) {
            Py_DECREF(la);
            return st;
        }
        Py_ssize_t n = PyList_GET_SIZE(la);
        if (PyList_SetSlice(la, n, n, lb) < 0) {
            Py_DECREF(la);
            Py_DECREF(lb);
            return TR_ERROR;
        }
        Py_DECREF(lb);
        *out = cdyn_value_new(k, NULL, NULL, la, NULL);
        Py_DECREF(la);
        return *out ? TR_OK : TR_ERROR;
    }
    return cdyn_tx_unsupported(tx, "BINARY_OP %d on %s and %s", oparg,
                               Py_TYPE(va->obj ? va->obj : Py_None)->tp_name,
                               Py_TYPE(vb->obj ? vb->obj : Py_None)->tp_name);
}

/* Compare (oparg of COMPARE_OP). */
static tr_status
compare_op(cdyn_tx *tx, int oparg, PyObject *a, PyObject *b, PyObject **out)
{
    cdyn_value *va = V(a), *vb = V(b);
    if (oparg < 0 || oparg > 5) {
        return cdyn_tx_unsupported(tx, "COMPARE_OP %d", oparg);
    }
    if (va->kind == VK_TENSOR || vb->kind == VK_TENSOR) {
        PyObject *args[2] = {a, b};
        return cdyn_tx_graph_call(tx, "call_function", cdyn_G.cmp_fns[oparg], NULL, args, 2,
                                  NULL, out);
    }
    if (va->kind == VK_CONST && vb->kind == VK_CONST) {
        PyObject *res = PyObject_RichCompare(va->obj, vb->obj, oparg);
        if (res == NULL) {
            return cdyn_tx_unsupported(tx, "constant comparison failed");
        }
        *out = cdyn_value_const_steal(res);
        return *out ? TR_OK : TR_ERROR;
    }
    if ((oparg == Py_EQ || oparg == Py_NE) && va->obj != NULL && vb->obj != NULL &&
        va->kind != VK_CONST && vb->kind != VK_CONST && va->kind != VK_OBJECT &&
        vb->kind != VK_OBJECT) {
        int same = va->obj == vb->obj;
        *out = cdyn_value_const((oparg == Py_EQ) == same ? Py_True : Py_False);
        return *out ? TR_OK : TR_ERROR;
    }
    if ((oparg == Py_EQ || oparg == Py_NE) &&
        ((va->kind == VK_CONST && va->obj == Py_None) ||
         (vb->kind == VK_CONST && vb->obj == Py_None))) {
        *out = cdyn_value_const(oparg == Py_NE ? Py_True : Py_False);
        return *out ? TR_OK : TR_ERROR;
    }
    return cdyn_tx_unsupported(tx, "COMPARE_OP on non-constant values");
}

/* `a is b` on values: 0/1 in *res. */
static tr_status
is_op(cdyn_tx *tx, PyObject *a, PyObject *b, int *res)
{
    cdyn_value *va = V(a), *vb = V(b);
    if (a == b) {
        *res = 1;
        return TR_OK;
    }
    if (va->kind == VK_CONST && vb->kind == VK_CONST) {
        *res = va->obj == vb->obj;
        return TR_OK;
    }
    if (va->kind == VK_TENSOR && vb->kind == VK_TENSOR) {
        *res = va->node == vb->node;
        return TR_OK;
    }
    if ((va->kind == VK_LIST || va->kind == VK_DICT || va->kind == VK_TUPLE) &&
        (vb->kind == VK_LIST || vb->kind == VK_DICT || vb->kind == VK_TUPLE)) {
        if (va->source != NULL || vb->source != NULL) {
            return cdyn_tx_unsupported(tx, "identity of input containers");
        }
        *res = 0;   /* two containers made in the frame are distinct objects */
        return TR_OK;
    }
    /* A constant against a non-constant: only None/True/False are decidable. */
    if ((va->kind == VK_CONST && (va->obj == Py_None || PyBool_Check(va->obj))) ||
        (vb->kind == VK_CONST && (vb->obj == Py_None || PyBool_Check(vb->obj)))) {
        *res = 0;
        return TR_OK;
    }
    if (va->obj != NULL && vb->obj != NULL && va->kind != VK_CONST && vb->kind != VK_CONST &&
        va->kind != VK_TENSOR && vb->kind != VK_TENSOR && va->kind != VK_OBJECT &&
        vb->kind != VK_OBJECT) {
        *res = va->obj == vb->obj;   /* identities fixed by ID/FUNCTION_MATCH guards */
        return TR_OK;
    }
    return cdyn_tx_unsupported(tx, "IS_OP on undecidable values");
}

static tr_status
contains_op(cdyn_tx *tx, PyObject *item, PyObject *container, int *res)
{
    cdyn_value *vi = V(item), *vc = V(container);
    if (cdyn_tx_materialize(tx, container) != TR_OK) {
        return PyErr_Occurred() ? TR_ERROR : TR_UNSUPPORTED;
    }
    if (vi->kind == VK_CONST && vc->kind == VK_CONST) {
        int r = PySequence_Contains(vc->obj, vi->obj);
        if (r < 0) {
            return cdyn_tx_unsupported(tx, "constant 'in' failed");
        }
        *res = r;
        return TR_OK;
    }
    if (vi->kind == VK_CONST && vc->kind == VK_DICT) {
        int r = PySequence_Contains(vc->obj, vi->obj);
        if (r < 0) {
            return TR_ERROR;
        }
        *res = r;
        return TR_OK;
    }
    if (vi->kind == VK_CONST && (vc->kind == VK_TUPLE || vc->kind == VK_LIST)) {
        *res = 0;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(vc->items); i++) {
            cdyn_value *e = V(PyList_GET_ITEM(vc->items, i));
            if (e->kind != VK_CONST) {
                return cdyn_tx_unsupported(tx, "'in' over non-constant items");
            }
            int r = PyObject_RichCompareBool(e->obj, vi->obj, Py_EQ);
            if (r < 0) {
                return cdyn_tx_unsupported(tx, "'in' comparison failed");
            }
            if (r) {
                *res = 1;
                break;
            }
        }
        return TR_OK;
    }
    return cdyn_tx_unsupported(tx, "CONTAINS_OP on unsupported values");
}

/* container[key] on values. */
static tr_status
subscr(cdyn_tx *tx, PyObject *c, PyObject *k, PyObject **out)
{
    cdyn_value *vc = V(c), *vk = V(k);
    if (cdyn_tx_materialize(tx, c) != TR_OK) {
        return PyErr_Occurred() ? TR_ERROR : TR_UNSUPPORTED;
    }
    if (vc->kind == VK_TENSOR) {
        PyObject *args[2] = {c, k};
        return cdyn_tx_graph_call(tx, "call_function", cdyn_G.getitem_fn, NULL, args, 2, NULL,
                                  out);
    }
    if (vk->kind != VK_CONST) {
        return cdyn_tx_unsupported(tx, "subscript with a non-constant key");
    }
    if (vc->kind == VK_CONST) {
        PyObject *r = PyObject_GetItem(vc->obj, vk->obj);
        if (r == NULL) {
            return cdyn_tx_unsupported(tx, "constant subscript failed");
        }
        *out = cdyn_value_const_steal(r);
        return *out ? TR_OK : TR_ERROR;
    }
    if (vc->kind == VK_TUPLE || vc->kind == VK_LIST) {
        if (PyLong_Check(vk->obj)) {
            Py_ssize_t n = PyList_GET_SIZE(vc->items);
            Py_ssize_t i = PyLong_AsSsize_t(vk->obj);
            if (i < 0) {
                i += n;
            }
            if (i < 0 || i >= n) {
                return cdyn_tx_unsupported(tx, "index out of range");
            }
            *out = Py_NewRef(PyList_GET_ITEM(vc->items, i));
            return TR_OK;
        }
        if (PySlice_Check(vk->obj)) {
            PyObject *sl = PyObject_GetItem(vc->items, vk->obj);
            if (sl == NULL) {
                return TR_ERROR;
            }
            *out = cdyn_value_new(vc->kind, NULL, NULL, sl, NULL);
            Py_DECREF(sl);
            return *out ? TR_OK : TR_ERROR;
        }
        return cdyn_tx_unsupported(tx, "sequence index of type %s", Py_TYPE(vk->obj)->tp_name);
    }
    if (vc->kind == VK_DICT) {
        Py_ssize_t n = PyList_GET_SIZE(vc->obj);
        for (Py_ssize_t i = 0; i < n; i++) {
            int r = PyObject_RichCompareBool(PyList_GET_ITEM(vc->obj, i), vk->obj, Py_EQ);
            if (r < 0) {
                return TR_ERROR;
            }
            if (r) {
                *out = Py_NewRef(PyList_GET_ITEM(vc->items, i));
                return TR_OK;
            }
        }
        return cdyn_tx_unsupported(tx, "missing dict key %R", vk->obj);
    }
    if (vc->kind == VK_NNMODULE) {
        PyObject *sub = NULL, *src = NULL;
        tr_status st;
        sub = PyObject_GetItem(vc->obj, vk->obj);
        if (sub == NULL) {
            return cdyn_tx_unsupported(tx, "module subscript failed");
        }
        if (!PyObject_TypeCheck(sub, (PyTypeObject *)cdyn_G.nn_module_type)) {
            Py_DECREF(sub);
            return cdyn_tx_unsupported(tx, "module subscript that is not a module");
        }
        if (vc->source != NULL) {
            PyObject *key = PyLong_Check(vk->obj) ? PyObject_Str(vk->obj) : NULL;
            int by_name = 0;
            if (key != NULL) {
                /* the child under its registered name, when that is what [i] returned */
                PyObject *mods = PyObject_GetAttrString(vc->obj, "_modules");
                PyObject *child = mods && PyDict_Check(mods) ? PyDict_GetItemWithError(mods, key)
                                                            : NULL;
                by_name = child == sub;
                Py_XDECREF(mods);
                PyErr_Clear();
            }
            src = by_name ? cdyn_source_attr(vc->source, key) : cdyn_source_item(vc->source, vk->obj);
            Py_XDECREF(key);
            if (src == NULL) {
                Py_DECREF(sub);
                return TR_ERROR;
            }
        }
        st = cdyn_tx_wrap_real(tx, sub, src, out);
        Py_DECREF(sub);
        Py_XDECREF(src);
        return st;
    }
    return cdyn_tx_unsupported(tx, "subscript of %s", Py_TYPE(vc->obj ? vc->obj : Py_None)->tp_name);
}

static tr_status
store_subscr(cdyn_tx *tx, PyObject *c, PyObject *k, PyObject *v)
{
    cdyn_value *vc = V(c), *vk = V(k);
    if (cdyn_tx_materialize(tx, c) != TR_OK) {
        return PyErr_Occurred() ? TR_ERROR : TR_UNSUPPORTED;
    }
    if (vc->kind == VK_TENSOR) {
        PyObject *args[3] = {c, k, v};
        PyObject *res = NULL;
        tr_status st = cdyn_tx_graph_call(tx, "call_function", cdyn_G.setitem_fn, NULL, args, 3,
                                          NULL, &res);
        Py_XDECREF(res);
        return st;
    }
    if (vk->kind != VK_CONST) {
        return cdyn_tx_unsupported(tx, "STORE_SUBSCR with a non-constant key");
    }
    if (vc->source != NULL) {
        /* A container that outlives the frame: replay the store in the transformed code. */
        if (cdyn_tx_effect(tx, EFF_STORE_SUBSCR, c, vk->obj, v) != TR_OK) {
            return TR_ERROR;
        }
        if (vc->kind == VK_OBJECT || vc->kind == VK_NNMODULE) {
            vc->flag = 1;   /* mutated: later reads through it are not traced */
            cdyn_tx_mutated(tx, c);
            return TR_OK;
        }
        if (vc->kind != VK_LIST && vc->kind != VK_DICT) {
            return cdyn_tx_unsupported(tx, "STORE_SUBSCR into %S", c);
        }
    }
    cdyn_tx_mutated(tx, c);
    if (vc->kind == VK_LIST && PyLong_Check(vk->obj)) {
        Py_ssize_t n = PyList_GET_SIZE(vc->items), i = PyLong_AsSsize_t(vk->obj);
        if (i < 0) {
            i += n;
        }
        if (i < 0 || i >= n) {
            return cdyn_tx_unsupported(tx, "list assignment index out of range");
        }
        return PyList_SetItem(vc->items, i, Py_NewRef(v)) < 0 ? TR_ERROR : TR_OK;
    }
    if (vc->kind == VK_DICT) {
        Py_ssize_t n = PyList_GET_SIZE(vc->obj);
        for (Py_ssize_t i = 0; i < n; i++) {
            int r = PyObject_RichCompareBool(PyList_GET_ITEM(vc->obj, i), vk->obj, Py_EQ);
            if (r < 0) {
                return TR_ERROR;
            }
            if (r) {
                return PyList_SetItem(vc->items, i, Py_NewRef(v)) < 0 ? TR_ERROR : TR_OK;
            }
        }
        if (PyList_Append(vc->obj, vk->obj) < 0 || PyList_Append(vc->items, v) < 0) {
            return TR_ERROR;
        }
        return TR_OK;
    }
    return cdyn_tx_unsupported(tx, "STORE_SUBSCR on this value");
}

/* del container[key] on values: local lists and dicts, and input dicts (replayed). */
static tr_status
delete_subscr(cdyn_tx *tx, PyObject *c, PyObject *k)
{
    cdyn_value *vc = V(c), *vk = V(k);
    tr_status st = cdyn_tx_materialize(tx, c);
    if (st != TR_OK) {
        return st;
    }
    if (vk->kind != VK_CONST || (vc->kind != VK_DICT && vc->kind != VK_LIST) ||
        (vc->kind == VK_LIST && (vc->source != NULL || !PyLong_Check(vk->obj)))) {
        return cdyn_tx_unsupported(tx, "DELETE_SUBSCR on %S", c);
    }
    if (vc->kind == VK_LIST) {
        Py_ssize_t n = PyList_GET_SIZE(vc->items), i = PyLong_AsSsize_t(vk->obj);
        if (i < 0) {
            i += n;
        }
        if (i < 0 || i >= n) {
            return cdyn_tx_unsupported(tx, "del of a list index out of range");
        }
        cdyn_tx_mutated(tx, c);
        return PyList_SetSlice(vc->items, i, i + 1, NULL) < 0 ? TR_ERROR : TR_OK;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(vc->obj); i++) {
        int r = PyObject_RichCompareBool(PyList_GET_ITEM(vc->obj, i), vk->obj, Py_EQ);
        if (r < 0) {
            return TR_ERROR;
        }
        if (r) {
            if (vc->source != NULL &&
                cdyn_tx_effect(tx, EFF_DELETE_SUBSCR, c, vk->obj, Py_None) != TR_OK) {
                return TR_ERROR;
            }
            cdyn_tx_mutated(tx, c);
            if (PyList_SetSlice(vc->obj, i, i + 1, NULL) < 0 ||
                PyList_SetSlice(vc->items, i, i + 1, NULL) < 0) {
                return TR_ERROR;
            }
            return TR_OK;
        }
    }
    return cdyn_tx_unsupported(tx, "del of a missing dict key %R", vk->obj);
}

/* Build a VK_DICT from keys (list of const values) and values. */
static PyObject *
make_dict(PyObject *keys, PyObject *vals)
{
    return cdyn_value_new(VK_DICT, keys, NULL, vals, NULL);
}

/* Pops n values into a new list (bottom first). */
static PyObject *
pop_n(cdyn_fs *fs, int n)
{
    PyObject *list = PyList_New(n);
    if (list == NULL) {
        return NULL;
    }
    for (int i = n - 1; i >= 0; i--) {
        PyList_SET_ITEM(list, i, pop(fs));
    }
    return list;
}

/* ---- MAKE_FUNCTION / CALL ----------------------------------------------------------- */

static tr_status
make_function(cdyn_tx *tx, cdyn_fs *fs, int flags)
{
    PyObject *code = NULL, *closure = NULL, *annotations = NULL, *kwdefaults = NULL,
             *defaults = NULL, *items = NULL, *fn = NULL;
    tr_status st = TR_ERROR;
    code = pop(fs);
    if (flags & 0x08) {
        closure = pop(fs);
    }
    if (flags & 0x04) {
        annotations = pop(fs);
    }
    if (flags & 0x02) {
        kwdefaults = pop(fs);
    }
    if (flags & 0x01) {
        defaults = pop(fs);
    }
    if (V(code)->kind != VK_CONST || !PyCode_Check(V(code)->obj)) {
        st = cdyn_tx_unsupported(tx, "MAKE_FUNCTION without a constant code object");
        goto done;
    }
    items = PyList_New(4);
    if (items == NULL) {
        goto done;
    }
    PyList_SET_ITEM(items, 0, Py_NewRef(defaults ? defaults : Py_None));
    PyList_SET_ITEM(items, 1, Py_NewRef(closure ? closure : Py_None));
    PyList_SET_ITEM(items, 2, Py_NewRef(kwdefaults ? kwdefaults : Py_None));
    PyList_SET_ITEM(items, 3, Py_NewRef(fs->globals_source ? fs->globals_source : Py_None));
    fn = cdyn_value_new(VK_FUNCTION, V(code)->obj, NULL, items, NULL);
    if (fn == NULL) {
        goto done;
    }
    /* The function shares the frame's globals. */
    V(fn)->node = Py_NewRef(fs->globals);
    V(fn)->flag = fs->top_globals;
    st = push(fs, fn);
done:
    Py_XDECREF(code);
    Py_XDECREF(closure);
    Py_XDECREF(annotations);
    Py_XDECREF(kwdefaults);
    Py_XDECREF(defaults);
    Py_XDECREF(items);
    return st;
}

int
cdyn_tx_ckpt_take(cdyn_tx *tx, cdyn_ckpt *ck)
{
    ck->nodes = PyObject_CallMethod(tx->glue, "checkpoint", "O", tx->graph);
    ck->mutations = tx->mutations;
    ck->n_call_nodes = tx->n_call_nodes;
    tx->ckpt_serial = cdyn_value_serial;
    return ck->nodes == NULL ? -1 : 0;
}

tr_status
cdyn_tx_ckpt_restore(cdyn_tx *tx, cdyn_ckpt *ck)
{
    PyObject *r = NULL;
    if (tx->mutations != ck->mutations) {
        return TR_UNSUPPORTED;   /* the failed call changed traced state: give up */
    }
    r = PyObject_CallMethod(tx->glue, "rollback", "OO", tx->graph, ck->nodes);
    if (r == NULL) {
        return TR_ERROR;
    }
    Py_DECREF(r);
    tx->n_call_nodes = ck->n_call_nodes;
    return TR_OK;
}

/* Line of instruction index pc of fs (or the first line). */
static int
instr_line(cdyn_fs *fs, Py_ssize_t pc)
{
    int line = fs->instrs.items[pc].lineno;
    return line >= 0 ? line : fs->code->co_firstlineno;
}

/* Turn the pending unsupported reason into a graph break at instruction pc of the top
 * frame (stack intact), or keep it unsupported when that is impossible: a break inside
 * a loop skips the frame, as torch._dynamo does. ck: NULL when nothing must be undone. */
static tr_status
begin_break(cdyn_tx *tx, cdyn_fs *fs, brk_kind kind, Py_ssize_t pc, int arg,
            PyObject *kwnames, cdyn_ckpt *ck)
{
    int loop;
    if (ck != NULL) {
        tr_status rs = cdyn_tx_ckpt_restore(tx, ck);
        if (rs != TR_OK) {
            return rs;
        }
    }
    /* inside a loop: some later backward jump returns to an instruction at or before pc */
    loop = 0;
    for (Py_ssize_t j = pc; j < fs->instrs.len && !loop; j++) {
        const cdyn_instr *ins = &fs->instrs.items[j];
        if (cdyn_is_jump(ins->opcode) && ins->target >= 0 && ins->target <= pc) {
            loop = 1;
        }
    }
    if (loop) {
        PyObject *msg = PyUnicode_FromFormat("graph break in a for/while loop, skipping the "
                                             "frame (%U)", tx->reason ? tx->reason : Py_None);
        if (msg == NULL) {
            return TR_ERROR;
        }
        Py_XSETREF(tx->reason, msg);
        return TR_UNSUPPORTED;
    }
    tx->break_kind = kind;
    tx->break_pc = pc;
    tx->break_arg = arg;
    Py_XSETREF(tx->break_kwnames, Py_XNewRef(kwnames));
    cdyn_log(20, "Graph break in %U at %U:%d: %U", fs->code->co_qualname, fs->code->co_filename,
             instr_line(fs, pc), tx->reason ? tx->reason : Py_None);
    {
        PyObject *r = PyObject_CallMethod(tx->glue, "record_break", "OOOi",
                                          tx->reason ? tx->reason : Py_None,
                                          fs->code->co_qualname, fs->code->co_filename,
                                          instr_line(fs, pc));
        if (r == NULL) {
            return TR_ERROR;
        }
        Py_DECREF(r);
    }
    return TR_BREAK;
}

/* Push the values of __class__ (a free variable of a method using super()) and of the
 * frame's first argument. */
static tr_status
explicit_super_args(cdyn_tx *tx, cdyn_fs *fs)
{
    PyCodeObject *co = fs->code;
    PyObject *cls = NULL, *self = NULL;
    tr_status st;
    int ci = -1;
    for (int i = co->co_nlocalsplus - co->co_nfreevars; i < co->co_nlocalsplus; i++) {
        if (PyUnicode_CompareWithASCIIString(localsplus_name(co, i), "__class__") == 0) {
            ci = i;
        }
    }
    if (ci < 0 || co->co_argcount < 1 || fs->locals[ci] == NULL) {
        return cdyn_tx_unsupported(tx, "super() without __class__ or a first argument");
    }
    st = cell_get(tx, fs->locals[ci], &cls);
    if (st != TR_OK) {
        return st;
    }
    st = load_local(tx, fs, 0, &self);
    if (st != TR_OK) {
        return st;
    }
    if (V(self)->kind == VK_CELL) {
        st = cell_get(tx, self, &self);
        if (st != TR_OK) {
            return st;
        }
    }
    st = push(fs, Py_NewRef(cls));
    if (st == TR_OK) {
        st = push(fs, Py_NewRef(self));
    }
    return st;
}

/* CALL n: [.., X, Y, args(n)] with X NULL -> Y(args) else X(Y, args). */
static tr_status
do_call(cdyn_tx *tx, cdyn_fs *fs, int n)
{
    PyObject *res = NULL, *kwn = fs->kw_names;
    PyObject **base = &fs->stack[fs->sp - n - 2];
    PyObject *fn;
    PyObject *const *args;
    Py_ssize_t nargs;
    tr_status st;
    cdyn_ckpt ck = {NULL, 0, 0};
    fs->kw_names = NULL;
    if (n == 0 && kwn == NULL && V(fs->stack[fs->sp - 2])->kind == VK_NULL &&
        V(fs->stack[fs->sp - 1])->kind == VK_CALLABLE &&
        V(fs->stack[fs->sp - 1])->obj == (PyObject *)&PySuper_Type) {
        /* zero-argument super(): make its implicit arguments (the __class__ cell and the
           first argument) explicit, so it means the same in any code we generate */
        tr_status sst = explicit_super_args(tx, fs);
        if (sst != TR_OK) {
            return sst;
        }
        n = 2;
        base = &fs->stack[fs->sp - n - 2];
    }
    if (fs->is_top && cdyn_tx_ckpt_take(tx, &ck) < 0) {
        Py_XDECREF(kwn);
        return TR_ERROR;
    }
    if (V(base[0])->kind == VK_NULL) {
        fn = base[1];
        args = base + 2;
        nargs = n;
    }
    else {
        fn = base[0];
        args = base + 1;
        nargs = n + 1;
    }
    {
        /* iterators among the call's stack slots (e.g. a comprehension's): their positions
           are restored if the call becomes a graph break */
        Py_ssize_t pos[16];
        int nslots = n + 2 < 16 ? n + 2 : 16;
        for (int i = 0; i < nslots; i++) {
            pos[i] = V(base[i])->kind == VK_ITER ? V(base[i])->pos : -1;
        }
        st = cdyn_tx_call(tx, fs, fn, args, nargs, kwn, &res);
        if (st == TR_UNSUPPORTED && fs->is_top) {
            for (int i = 0; i < nslots; i++) {
                if (pos[i] >= 0) {
                    V(base[i])->pos = pos[i];
                }
            }
            st = begin_break(tx, fs, BRK_CALL, fs->pc - 1, n, kwn, &ck);
        }
    }
    Py_XDECREF(ck.nodes);
    Py_XDECREF(kwn);
    if (st == TR_BREAK) {
        return st;   /* the stack stays as it was before the call */
    }
    for (int i = 0; i < n + 2; i++) {
        Py_DECREF(pop(fs));
    }
    if (st != TR_OK) {
        return st;
    }
    return push(fs, res);
}

/* CALL_FUNCTION_EX flags: [NULL, fn, args, (kwargs)]. The call is traced on the stack
 * slots in place; they are popped only once it succeeded, so that in the top frame an
 * unsupported call becomes a graph break with the stack intact. */
static tr_status
call_function_ex(cdyn_tx *tx, cdyn_fs *fs, int flags)
{
    PyObject *kw = (flags & 1) ? peek(fs, 0) : NULL;
    PyObject *args = peek(fs, (flags & 1) ? 1 : 0), *fn = peek(fs, (flags & 1) ? 2 : 1);
    PyObject *argl = NULL, *kwnames = NULL, *all = NULL, *res = NULL;
    cdyn_ckpt ck = {NULL, 0, 0};
    tr_status st = TR_ERROR;
    if (fs->is_top && cdyn_tx_ckpt_take(tx, &ck) < 0) {
        return TR_ERROR;
    }
    st = cdyn_tx_unpack(tx, args, &argl);
    if (st != TR_OK) {
        goto done;
    }
    st = TR_ERROR;
    all = PyList_GetSlice(argl, 0, PyList_GET_SIZE(argl));
    if (all == NULL) {
        goto done;
    }
    if (kw != NULL) {
        if (V(kw)->kind != VK_DICT) {
            st = cdyn_tx_unsupported(tx, "**kwargs that is not a dict");
            goto done;
        }
        kwnames = PyList_AsTuple(V(kw)->obj);
        if (kwnames == NULL) {
            goto done;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            if (!PyUnicode_Check(PyTuple_GET_ITEM(kwnames, i))) {
                st = cdyn_tx_unsupported(tx, "non-string keyword");
                goto done;
            }
            if (PyList_Append(all, PyList_GET_ITEM(V(kw)->items, i)) < 0) {
                goto done;
            }
        }
        if (PyTuple_GET_SIZE(kwnames) == 0) {
            Py_CLEAR(kwnames);
        }
    }
    st = cdyn_tx_call(tx, fs, fn, &PyList_GET_ITEM(all, 0), PyList_GET_SIZE(all), kwnames,
                      &res);
done:
    if (st == TR_UNSUPPORTED && fs->is_top) {
        st = begin_break(tx, fs, BRK_CALL_EX, fs->pc - 1, flags, NULL, &ck);
    }
    if (st == TR_OK) {
        for (int i = 0; i < 2 + (flags & 1); i++) {
            Py_DECREF(pop(fs));
        }
        if (fs->sp > 0 && V(peek(fs, 0))->kind == VK_NULL) {
            Py_DECREF(pop(fs));
        }
        st = push(fs, res);
        res = NULL;
    }
    Py_XDECREF(ck.nodes);
    Py_XDECREF(argl);
    Py_XDECREF(all);
    Py_XDECREF(kwnames);
    Py_XDECREF(res);
    return st;
}

/* ---- the interpreter loop ---------------------------------------------------------- */

static int
jump_target(cdyn_fs *fs, const cdyn_instr *ins)
{
    (void)fs;    /* read by the assert only */
    assert(ins->target >= 0 && ins->target < fs->instrs.len);
    return ins->target;
}

tr_status
cdyn_tx_run(cdyn_tx *tx, cdyn_fs *fs)
{
    PyCodeObject *co = fs->code;
    tr_status st = TR_OK;
    while (1) {
        PyObject *a = NULL, *b = NULL, *c = NULL, *r = NULL;
        const cdyn_instr *ins;
        int truth = 0;
        if (fs->pc < 0 || fs->pc >= fs->instrs.len) {
            return cdyn_tx_unsupported(tx, "ran off the end of the code");
        }
        if (++tx->steps > MAX_STEPS) {
            return cdyn_tx_unsupported(tx, "trace too long (more than %d instructions)",
                                       MAX_STEPS);
        }
        ins = &fs->instrs.items[fs->pc++];
        tx->cur_fs = fs;
        int arg = ins->oparg;
        switch (ins->opcode) {
        case NOP:
        case RESUME:
        case PRECALL:
        case EXTENDED_ARG:
        case CACHE:
            break;
        case POP_TOP:
            Py_DECREF(pop(fs));
            break;
        case PUSH_NULL:
            st = push(fs, new_null());
            break;
        case COPY:
            st = push(fs, Py_NewRef(peek(fs, arg - 1)));
            break;
        case SWAP: {
            PyObject *tmp = fs->stack[fs->sp - 1];
            fs->stack[fs->sp - 1] = fs->stack[fs->sp - arg];
            fs->stack[fs->sp - arg] = tmp;
            break;
        }
        case KW_NAMES:
            Py_XSETREF(fs->kw_names, Py_NewRef(PyTuple_GET_ITEM(co->co_consts, arg)));
            break;
        case LOAD_CONST:
            st = push(fs, cdyn_value_const(PyTuple_GET_ITEM(co->co_consts, arg)));
            break;
        case LOAD_FAST:
            st = load_local(tx, fs, arg, &a);
            if (st == TR_OK) {
                st = push(fs, Py_NewRef(a));
            }
            break;
        case STORE_FAST:
            store_local(fs, arg, pop(fs));
            break;
        case DELETE_FAST:
            store_local(fs, arg, NULL);
            break;
        case MAKE_CELL: {
            PyObject *items = PyList_New(0), *cell = NULL;
            if (items == NULL) {
                return TR_ERROR;
            }
            if (fs->is_top && fs->locals[arg] == NULL && tx->frame->localsplus[arg] != NULL) {
                st = load_local(tx, fs, arg, &a);   /* a cell argument: wrap it first */
                if (st != TR_OK) {
                    Py_DECREF(items);
                    return st;
                }
            }
            if (fs->locals[arg] != NULL && PyList_Append(items, fs->locals[arg]) < 0) {
                Py_DECREF(items);
                return TR_ERROR;
            }
            cell = cdyn_value_new(VK_CELL, NULL, NULL, items, NULL);
            Py_DECREF(items);
            if (cell == NULL) {
                return TR_ERROR;
            }
            store_local(fs, arg, cell);
            break;
        }
        case COPY_FREE_VARS:
            /* Done when the frame state was made (top: real cells; inlined: bound). */
            break;
        case LOAD_CLOSURE:
            if (fs->locals[arg] == NULL) {
                return cdyn_tx_unsupported(tx, "LOAD_CLOSURE of an unmade cell");
            }
            st = push(fs, Py_NewRef(fs->locals[arg]));
            break;
        case LOAD_DEREF:
            if (fs->locals[arg] == NULL) {
                return cdyn_tx_unsupported(tx, "LOAD_DEREF of an unmade cell");
            }
            st = cell_get(tx, fs->locals[arg], &a);
            if (st == TR_OK) {
                st = push(fs, Py_NewRef(a));
            }
            break;
        case STORE_DEREF: {
            cdyn_value *cell = fs->locals[arg] ? V(fs->locals[arg]) : NULL;
            if (cell == NULL || cell->kind != VK_CELL || cell->obj != NULL) {
                return cdyn_tx_unsupported(tx, "STORE_DEREF to a cell of an outer frame "
                                               "(side effect)");
            }
            a = pop(fs);
            cdyn_tx_mutated(tx, fs->locals[arg]);
            if (PyList_GET_SIZE(cell->items) == 0) {
                st = PyList_Append(cell->items, a) < 0 ? TR_ERROR : TR_OK;
                Py_DECREF(a);
            }
            else {
                st = PyList_SetItem(cell->items, 0, a) < 0 ? TR_ERROR : TR_OK;
            }
            break;
        }
        case LOAD_GLOBAL: {
            PyObject *name = PyTuple_GET_ITEM(co->co_names, arg >> 1);
            if (arg & 1) {
                st = push(fs, new_null());
                if (st != TR_OK) {
                    return st;
                }
            }
            st = load_global(tx, fs, name, &r);
            if (st == TR_OK) {
                st = push(fs, r);
            }
            break;
        }
        case LOAD_ATTR:
        case LOAD_METHOD:
            /* LOAD_METHOD always leaves [NULL, bound attribute]: cdyn_tx_getattr binds
               methods itself. */
            a = pop(fs);
            st = cdyn_tx_getattr(tx, a, PyTuple_GET_ITEM(co->co_names, arg), &r);
            Py_DECREF(a);
            if (st == TR_OK && ins->opcode == LOAD_METHOD) {
                st = push(fs, new_null());
                if (st != TR_OK) {
                    Py_DECREF(r);
                }
            }
            if (st == TR_OK) {
                st = push(fs, r);
            }
            break;
        case STORE_ATTR: {
            PyObject *name = PyTuple_GET_ITEM(co->co_names, arg), *src = NULL;
            a = pop(fs);   /* object */
            b = pop(fs);   /* value */
            if ((V(a)->kind == VK_NNMODULE || V(a)->kind == VK_OBJECT) && V(a)->source != NULL) {
                src = cdyn_source_attr(V(a)->source, name);
                st = src ? cdyn_tx_effect(tx, EFF_STORE_ATTR, a, name, b) : TR_ERROR;
                if (st == TR_OK) {
                    /* later loads of the attribute see the stored value */
                    st = PyDict_SetItem(tx->by_source, cdyn_source_repr(src), b) < 0 ? TR_ERROR
                                                                                    : TR_OK;
                    cdyn_tx_mutated(tx, a);
                }
                Py_XDECREF(src);
            }
            else {
                st = cdyn_tx_unsupported(tx, "STORE_ATTR on %S (side effect)", a);
            }
            Py_DECREF(a);
            Py_DECREF(b);
            break;
        }
        case STORE_GLOBAL: {
            PyObject *name = PyTuple_GET_ITEM(co->co_names, arg), *src = NULL;
            if (!fs->top_globals) {
                return cdyn_tx_unsupported(tx, "STORE_GLOBAL in another module (side effect)");
            }
            a = pop(fs);
            src = cdyn_source_global(name);
            st = src ? cdyn_tx_effect(tx, EFF_STORE_GLOBAL, NULL, name, a) : TR_ERROR;
            if (st == TR_OK) {
                st = PyDict_SetItem(tx->by_source, cdyn_source_repr(src), a) < 0 ? TR_ERROR
                                                                                : TR_OK;
                tx->mutations++;
            }
            Py_XDECREF(src);
            Py_DECREF(a);
            break;
        }
        case DELETE_ATTR:
        case DELETE_GLOBAL:
            return cdyn_tx_unsupported(tx, "%s (side effect)",
                                       ins->opcode == STORE_ATTR ? "STORE_ATTR" :
                                       ins->opcode == DELETE_ATTR ? "DELETE_ATTR" :
                                       ins->opcode == STORE_GLOBAL ? "STORE_GLOBAL" :
                                       "DELETE_GLOBAL");
        case BUILD_TUPLE:
        case BUILD_LIST: {
            PyObject *items = pop_n(fs, arg);
            if (items == NULL) {
                return TR_ERROR;
            }
            r = cdyn_value_new(ins->opcode == BUILD_TUPLE ? VK_TUPLE : VK_LIST, NULL, NULL,
                               items, NULL);
            Py_DECREF(items);
            st = push(fs, r);
            break;
        }
        case LIST_TO_TUPLE:
            a = pop(fs);
            r = cdyn_value_new(VK_TUPLE, NULL, NULL, V(a)->items, NULL);
            Py_DECREF(a);
            st = push(fs, r);
            break;
        case LIST_APPEND:
        case LIST_EXTEND: {
            PyObject *lst = peek(fs, arg);   /* below the popped value */
            a = pop(fs);
            if (V(lst)->kind != VK_LIST) {
                Py_DECREF(a);
                return cdyn_tx_unsupported(tx, "LIST_APPEND to a non-list");
            }
            cdyn_tx_mutated(tx, lst);
            if (ins->opcode == LIST_APPEND) {
                st = PyList_Append(V(lst)->items, a) < 0 ? TR_ERROR : TR_OK;
            }
            else {
                PyObject *more = NULL;
                st = cdyn_tx_unpack(tx, a, &more);
                if (st == TR_OK) {
                    Py_ssize_t n = PyList_GET_SIZE(V(lst)->items);
                    st = PyList_SetSlice(V(lst)->items, n, n, more) < 0 ? TR_ERROR : TR_OK;
                    Py_DECREF(more);
                }
            }
            Py_DECREF(a);
            break;
        }
        case BUILD_MAP: {
            PyObject *kv = pop_n(fs, 2 * arg), *keys = PyList_New(0), *vals = PyList_New(0);
            if (kv == NULL || keys == NULL || vals == NULL) {
                Py_XDECREF(kv);
                Py_XDECREF(keys);
                Py_XDECREF(vals);
                return TR_ERROR;
            }
            for (int i = 0; i < arg && st == TR_OK; i++) {
                cdyn_value *k = V(PyList_GET_ITEM(kv, 2 * i));
                if (k->kind != VK_CONST) {
                    st = cdyn_tx_unsupported(tx, "dict with a non-constant key");
                }
                else if (PyList_Append(keys, k->obj) < 0 ||
                         PyList_Append(vals, PyList_GET_ITEM(kv, 2 * i + 1)) < 0) {
                    st = TR_ERROR;
                }
            }
            Py_DECREF(kv);
            if (st == TR_OK) {
                st = push(fs, make_dict(keys, vals));
            }
            Py_DECREF(keys);
            Py_DECREF(vals);
            break;
        }
        case BUILD_CONST_KEY_MAP: {
            PyObject *kt = pop(fs), *vals = pop_n(fs, arg), *keys = NULL;
            if (V(kt)->kind != VK_CONST || vals == NULL) {
                Py_DECREF(kt);
                Py_XDECREF(vals);
                return vals == NULL ? TR_ERROR : cdyn_tx_unsupported(tx, "BUILD_CONST_KEY_MAP");
            }
            keys = PySequence_List(V(kt)->obj);
            Py_DECREF(kt);
            if (keys == NULL) {
                Py_DECREF(vals);
                return TR_ERROR;
            }
            st = push(fs, make_dict(keys, vals));
            Py_DECREF(keys);
            Py_DECREF(vals);
            break;
        }
        case MAP_ADD: {
            PyObject *d = NULL;
            b = pop(fs);   /* value */
            a = pop(fs);   /* key */
            d = peek(fs, arg - 1);
            if (V(d)->kind != VK_DICT || V(a)->kind != VK_CONST) {
                st = cdyn_tx_unsupported(tx, "MAP_ADD");
            }
            else {
                st = store_subscr(tx, d, a, b);
            }
            Py_DECREF(a);
            Py_DECREF(b);
            break;
        }
        case DICT_MERGE:
        case DICT_UPDATE: {
            PyObject *d = NULL;
            a = pop(fs);
            d = peek(fs, arg - 1);
            st = cdyn_tx_materialize(tx, a);
            if (st != TR_OK) {
                Py_DECREF(a);
                return st;
            }
            if (V(d)->kind != VK_DICT || V(a)->kind != VK_DICT) {
                st = cdyn_tx_unsupported(tx, "DICT_MERGE of non-dict values");
            }
            else {
                for (Py_ssize_t i = 0; i < PyList_GET_SIZE(V(a)->obj) && st == TR_OK; i++) {
                    PyObject *kv = cdyn_value_const(PyList_GET_ITEM(V(a)->obj, i));
                    if (kv == NULL) {
                        st = TR_ERROR;
                        break;
                    }
                    st = store_subscr(tx, d, kv, PyList_GET_ITEM(V(a)->items, i));
                    Py_DECREF(kv);
                }
            }
            Py_DECREF(a);
            break;
        }
        case BUILD_SLICE: {
            PyObject *parts = pop_n(fs, arg), *objs[3] = {Py_None, Py_None, Py_None};
            if (parts == NULL) {
                return TR_ERROR;
            }
            for (int i = 0; i < arg; i++) {
                cdyn_value *p = V(PyList_GET_ITEM(parts, i));
                if (p->kind != VK_CONST) {
                    Py_DECREF(parts);
                    return cdyn_tx_unsupported(tx, "slice with a non-constant bound");
                }
                objs[i] = p->obj;
            }
            r = PySlice_New(objs[0], objs[1], arg == 3 ? objs[2] : Py_None);
            Py_DECREF(parts);
            st = push(fs, cdyn_value_const_steal(r));
            break;
        }
        case BUILD_STRING: {
            PyObject *parts = pop_n(fs, arg), *strs = PyList_New(0), *empty = NULL;
            if (parts == NULL || strs == NULL) {
                Py_XDECREF(parts);
                Py_XDECREF(strs);
                return TR_ERROR;
            }
            for (int i = 0; i < arg && st == TR_OK; i++) {
                cdyn_value *p = V(PyList_GET_ITEM(parts, i));
                if (p->kind != VK_CONST || !PyUnicode_Check(p->obj)) {
                    st = cdyn_tx_unsupported(tx, "BUILD_STRING of non-constants");
                }
                else if (PyList_Append(strs, p->obj) < 0) {
                    st = TR_ERROR;
                }
            }
            if (st == TR_OK) {
                empty = PyUnicode_New(0, 0);
                r = empty ? PyUnicode_Join(empty, strs) : NULL;
                st = push(fs, cdyn_value_const_steal(r));
            }
            Py_XDECREF(empty);
            Py_DECREF(parts);
            Py_DECREF(strs);
            break;
        }
        case FORMAT_VALUE: {
            PyObject *spec = NULL, *conv = NULL, *s = NULL;
            if ((arg & 0x04) == 0x04) {
                spec = pop(fs);
            }
            a = pop(fs);
            if (V(a)->kind != VK_CONST || (spec != NULL && V(spec)->kind != VK_CONST)) {
                Py_DECREF(a);
                Py_XDECREF(spec);
                return cdyn_tx_unsupported(tx, "FORMAT_VALUE of a non-constant");
            }
            switch (arg & 0x03) {
            case 1: conv = PyObject_Str(V(a)->obj); break;
            case 2: conv = PyObject_Repr(V(a)->obj); break;
            case 3: conv = PyObject_ASCII(V(a)->obj); break;
            default: conv = Py_NewRef(V(a)->obj); break;
            }
            if (conv != NULL) {
                s = PyObject_Format(conv, spec ? V(spec)->obj : NULL);
            }
            Py_XDECREF(conv);
            Py_DECREF(a);
            Py_XDECREF(spec);
            st = push(fs, cdyn_value_const_steal(s));
            break;
        }
        case UNPACK_SEQUENCE: {
            PyObject *lst = NULL;
            a = pop(fs);
            st = cdyn_tx_unpack(tx, a, &lst);
            Py_DECREF(a);
            if (st != TR_OK) {
                return st;
            }
            if (PyList_GET_SIZE(lst) != arg) {
                Py_DECREF(lst);
                return cdyn_tx_unsupported(tx, "UNPACK_SEQUENCE length mismatch");
            }
            for (int i = arg - 1; i >= 0 && st == TR_OK; i--) {
                st = push(fs, Py_NewRef(PyList_GET_ITEM(lst, i)));
            }
            Py_DECREF(lst);
            break;
        }
        case UNPACK_EX: {
            PyObject *lst = NULL, *rest = NULL;
            int before = arg & 0xFF, after = arg >> 8;
            a = pop(fs);
            st = cdyn_tx_unpack(tx, a, &lst);
            Py_DECREF(a);
            if (st != TR_OK) {
                return st;
            }
            Py_ssize_t n = PyList_GET_SIZE(lst);
            if (n < before + after) {
                Py_DECREF(lst);
                return cdyn_tx_unsupported(tx, "UNPACK_EX: not enough values");
            }
            for (Py_ssize_t i = n - 1; i >= n - after && st == TR_OK; i--) {
                st = push(fs, Py_NewRef(PyList_GET_ITEM(lst, i)));
            }
            rest = PyList_GetSlice(lst, before, n - after);
            if (st == TR_OK) {
                st = rest ? push(fs, cdyn_value_new(VK_LIST, NULL, NULL, rest, NULL)) : TR_ERROR;
            }
            Py_XDECREF(rest);
            for (int i = before - 1; i >= 0 && st == TR_OK; i--) {
                st = push(fs, Py_NewRef(PyList_GET_ITEM(lst, i)));
            }
            Py_DECREF(lst);
            break;
        }
        case STORE_SUBSCR:
            b = pop(fs);   /* key */
            a = pop(fs);   /* container */
            c = pop(fs);   /* value */
            st = store_subscr(tx, a, b, c);
            Py_DECREF(a);
            Py_DECREF(b);
            Py_DECREF(c);
            break;
        case DELETE_SUBSCR:
            b = pop(fs);   /* key */
            a = pop(fs);   /* container */
            st = delete_subscr(tx, a, b);
            Py_DECREF(a);
            Py_DECREF(b);
            break;
        case BINARY_SUBSCR:
        case BINARY_OP:
        case COMPARE_OP:   /* [a, b] -> [a OP b] */
            b = pop(fs);
            a = pop(fs);
            if (ins->opcode == BINARY_SUBSCR) {
                st = subscr(tx, a, b, &r);
            }
            else if (ins->opcode == COMPARE_OP) {
                st = compare_op(tx, arg, a, b, &r);
            }
            else if (arg < 0 || arg > 25) {
                st = cdyn_tx_unsupported(tx, "BINARY_OP %d", arg);
            }
            else {
                st = binary_op(tx, arg, a, b, &r);
            }
            Py_DECREF(a);
            Py_DECREF(b);
            if (st == TR_OK) {
                st = push(fs, r);
            }
            break;
        case UNARY_NEGATIVE:
        case UNARY_POSITIVE:
        case UNARY_INVERT:
        case UNARY_NOT: {
            PyObject *fn = ins->opcode == UNARY_NEGATIVE ? cdyn_G.neg :
                           ins->opcode == UNARY_POSITIVE ? cdyn_G.pos :
                           ins->opcode == UNARY_INVERT ? cdyn_G.invert : cdyn_G.not_;
            a = pop(fs);
            if (V(a)->kind == VK_TENSOR && ins->opcode != UNARY_NOT) {
                st = cdyn_tx_graph_call(tx, "call_function", fn, NULL, &a, 1, NULL, &r);
            }
            else if (V(a)->kind == VK_CONST) {
                PyObject *res = PyObject_CallOneArg(fn, V(a)->obj);
                st = res ? TR_OK : cdyn_tx_unsupported(tx, "constant unary op failed");
                if (res) {
                    r = cdyn_value_const_steal(res);
                    st = r ? TR_OK : TR_ERROR;
                }
            }
            else if (ins->opcode == UNARY_NOT) {
                st = cdyn_tx_truth(tx, a, &truth);
                if (st == TR_OK) {
                    r = cdyn_value_const(truth ? Py_False : Py_True);
                    st = r ? TR_OK : TR_ERROR;
                }
            }
            else {
                st = cdyn_tx_unsupported(tx, "unary op on a non-constant non-tensor");
            }
            Py_DECREF(a);
            if (st == TR_OK) {
                st = push(fs, r);
            }
            break;
        }
        case IS_OP:
        case CONTAINS_OP:   /* oparg 1 inverts: `is not`, `not in` */
            b = pop(fs);
            a = pop(fs);
            st = ins->opcode == IS_OP ? is_op(tx, a, b, &truth)
                                      : contains_op(tx, a, b, &truth);
            Py_DECREF(a);
            Py_DECREF(b);
            if (st == TR_OK) {
                st = push(fs, cdyn_value_const((truth ^ arg) ? Py_True : Py_False));
            }
            break;
        case GET_ITER: {
            PyObject *lst = NULL;
            a = pop(fs);
            if (V(a)->kind == VK_ITER) {
                st = push(fs, a);
                break;
            }
            st = cdyn_tx_unpack(tx, a, &lst);
            Py_DECREF(a);
            if (st == TR_OK) {
                st = push(fs, cdyn_value_new(VK_ITER, NULL, NULL, lst, NULL));
                Py_DECREF(lst);
            }
            break;
        }
        case FOR_ITER: {
            cdyn_value *it = V(peek(fs, 0));
            if (it->kind != VK_ITER) {
                return cdyn_tx_unsupported(tx, "FOR_ITER over a non-iterator");
            }
            cdyn_tx_mutated(tx, peek(fs, 0));
            if (it->pos < PyList_GET_SIZE(it->items)) {
                st = push(fs, Py_NewRef(PyList_GET_ITEM(it->items, it->pos)));
                it->pos++;
            }
            else {
                Py_DECREF(pop(fs));
                fs->pc = jump_target(fs, ins);
            }
            break;
        }
        case JUMP_FORWARD:
        case JUMP_BACKWARD:
        case JUMP_BACKWARD_NO_INTERRUPT:
            fs->pc = jump_target(fs, ins);
            break;
        case POP_JUMP_FORWARD_IF_FALSE:
        case POP_JUMP_BACKWARD_IF_FALSE:
        case POP_JUMP_FORWARD_IF_TRUE:
        case POP_JUMP_BACKWARD_IF_TRUE: {
            int want = ins->opcode == POP_JUMP_FORWARD_IF_TRUE ||
                       ins->opcode == POP_JUMP_BACKWARD_IF_TRUE;
            if (V(peek(fs, 0))->kind == VK_TENSOR) {
                cdyn_tx_unsupported(tx, "generic_jump on a tensor value (data-dependent "
                                        "control flow)");
                if (!fs->is_top) {
                    return TR_UNSUPPORTED;
                }
                return begin_break(tx, fs, BRK_JUMP, fs->pc - 1, arg, NULL, NULL);
            }
            a = pop(fs);
            st = cdyn_tx_truth(tx, a, &truth);
            Py_DECREF(a);
            if (st == TR_OK && truth == want) {
                fs->pc = jump_target(fs, ins);
            }
            break;
        }
        case POP_JUMP_FORWARD_IF_NONE:
        case POP_JUMP_BACKWARD_IF_NONE:
        case POP_JUMP_FORWARD_IF_NOT_NONE:
        case POP_JUMP_BACKWARD_IF_NOT_NONE: {
            int want_none = ins->opcode == POP_JUMP_FORWARD_IF_NONE ||
                            ins->opcode == POP_JUMP_BACKWARD_IF_NONE;
            a = pop(fs);
            int is_none = V(a)->kind == VK_CONST && V(a)->obj == Py_None;
            Py_DECREF(a);
            if (is_none == want_none) {
                fs->pc = jump_target(fs, ins);
            }
            break;
        }
        case JUMP_IF_FALSE_OR_POP:
        case JUMP_IF_TRUE_OR_POP: {
            int want = ins->opcode == JUMP_IF_TRUE_OR_POP;
            a = peek(fs, 0);
            if (V(a)->kind == VK_TENSOR) {
                cdyn_tx_unsupported(tx, "generic_jump on a tensor value (data-dependent "
                                        "control flow)");
                if (!fs->is_top) {
                    return TR_UNSUPPORTED;
                }
                return begin_break(tx, fs, BRK_JUMP, fs->pc - 1, arg, NULL, NULL);
            }
            st = cdyn_tx_truth(tx, a, &truth);
            if (st == TR_OK) {
                if (truth == want) {
                    fs->pc = jump_target(fs, ins);
                }
                else {
                    Py_DECREF(pop(fs));
                }
            }
            break;
        }
        case BEFORE_WITH: {
            cdyn_value *ctx = NULL;
            a = pop(fs);
            ctx = V(a);
            if (ctx->kind != VK_GRADCTX) {
                Py_DECREF(a);
                return cdyn_tx_unsupported(tx, "with-block over an unsupported context manager");
            }
            PyObject *mode = ctx->flag ? Py_True : Py_False;
            PyObject *mv = cdyn_value_const(mode), *res = NULL;
            if (mv == NULL) {
                Py_DECREF(a);
                return TR_ERROR;
            }
            r = cdyn_value_new(VK_GRADEXIT, NULL, NULL, NULL, NULL);
            if (r == NULL) {
                Py_DECREF(mv);
                Py_DECREF(a);
                return TR_ERROR;
            }
            if (ctx->pos == 1) {
                /* torch.set_grad_enabled(m): the mode was set by the call; restore the
                   mode from before it on exit */
                V(r)->flag = ctx->obj == Py_True;
                st = TR_OK;
            }
            else {
                V(r)->flag = tx->grad_enabled;
                st = cdyn_tx_graph_call(tx, "call_function", cdyn_G.set_grad_enabled, NULL, &mv,
                                        1, NULL, &res);
            }
            Py_DECREF(mv);
            Py_XDECREF(res);
            Py_DECREF(a);
            if (st != TR_OK) {
                Py_DECREF(r);
                return st;
            }
            st = push(fs, r);
            if (st == TR_OK) {
                st = push(fs, cdyn_value_const(Py_None));
            }
            break;
        }
        case MAKE_FUNCTION:
            st = make_function(tx, fs, arg);
            break;
        case CALL:
            st = do_call(tx, fs, arg);
            break;
        case CALL_FUNCTION_EX:
            st = call_function_ex(tx, fs, arg);
            break;
        case RETURN_VALUE:
            fs->retval = pop(fs);
            return TR_OK;
        case RETURN_GENERATOR:
        case YIELD_VALUE:
            return cdyn_tx_unsupported(tx, "generators are not traced");
        default:
            return cdyn_tx_unsupported(tx, "unsupported opcode %s", cdyn_opname(ins->opcode));
        }
        if (st != TR_OK) {
            return st;
        }
    }
}

/* ---- inlining ---------------------------------------------------------------------- */

tr_status
cdyn_tx_inline(cdyn_tx *tx, PyCodeObject *code, PyObject **locals, PyObject *closure_cells,
               PyObject *globals, PyObject *builtins, PyObject *globals_source,
               int top_globals, PyObject **out)
{
    cdyn_fs fs;
    tr_status st = TR_ERROR;
    int n = code->co_nlocalsplus;
    if (tx->depth >= MAX_INLINE_DEPTH) {
        for (int i = 0; i < n; i++) {
            Py_XDECREF(locals[i]);
        }
        return cdyn_tx_unsupported(tx, "inlining too deep (recursion?)");
    }
    if (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) {
        for (int i = 0; i < n; i++) {
            Py_XDECREF(locals[i]);
        }
        return cdyn_tx_unsupported(tx, "call of a generator function");
    }
    if (fs_init(&fs, code, globals, builtins) < 0) {
        for (int i = 0; i < n; i++) {
            Py_XDECREF(locals[i]);
        }
        fs_clear(&fs);
        return TR_ERROR;
    }
    for (int i = 0; i < n; i++) {
        fs.locals[i] = locals[i];   /* stolen */
    }
    fs.globals_source = Py_XNewRef(globals_source);
    fs.top_globals = top_globals;
    /* Free variables occupy the last slots. */
    if (closure_cells != NULL) {
        Py_ssize_t nfree = PyList_GET_SIZE(closure_cells);
        for (Py_ssize_t k = 0; k < nfree; k++) {
            Py_XSETREF(fs.locals[n - nfree + k], Py_NewRef(PyList_GET_ITEM(closure_cells, k)));
        }
    }
    cdyn_fs *caller = tx->cur_fs;
    tx->depth++;
    cdyn_log(10, "INLINING %R", code);
    st = cdyn_tx_run(tx, &fs);
    tx->depth--;
    tx->cur_fs = caller;
    if (st == TR_OK) {
        cdyn_log(10, "DONE INLINING %R", code);
        *out = fs.retval;
        fs.retval = NULL;
    }
    else {
        cdyn_log(10, "FAILED INLINING %R", code);
    }
    fs_clear(&fs);
    return st;
}

/* ---- entry point --------------------------------------------------------------------- */

static void
tx_clear(cdyn_tx *tx)
{
    Py_CLEAR(tx->glue);
    Py_CLEAR(tx->graph);
    Py_CLEAR(tx->fake_mode);
    Py_CLEAR(tx->root);
    Py_CLEAR(tx->input_sources);
    Py_CLEAR(tx->input_values);
    Py_CLEAR(tx->by_source);
    Py_CLEAR(tx->by_id);
    Py_CLEAR(tx->reason);
    Py_CLEAR(tx->break_kwnames);
    Py_CLEAR(tx->effects);
    Py_CLEAR(tx->resume_codes);
    if (tx->guards != NULL) {
        cdyn_guards_free(tx->guards);
        tx->guards = NULL;
    }
}

/* Restore the thread's grad mode to `enabled`; keeps a pending exception. */
static void
restore_grad_mode(int enabled)
{
    PyObject *et, *ev, *tb, *r;
    PyErr_Fetch(&et, &ev, &tb);
    r = PyObject_CallOneArg(cdyn_G.set_grad_enabled, enabled ? Py_True : Py_False);
    Py_XDECREF(r);
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
}

int
cdyn_translate_frame(struct _PyInterpreterFrame *frame, PyObject *options,
                     cdyn_translation *out)
{
    cdyn_tx tx;
    cdyn_fs fs;
    PyObject *pair = NULL, *code_out = NULL, *fullgraph = NULL;
    PyCodeObject *co = frame->f_code;
    tr_status st = TR_ERROR;
    int rc = -1, grad = 0;

    memset(&tx, 0, sizeof(tx));
    memset(&fs, 0, sizeof(fs));
    out->code = NULL;
    out->guards = NULL;
    tx.options = options;
    tx.frame = frame;
    tx.code = co;
    tx.glue = Py_NewRef(cdyn_G.glue);
    {
        PyObject *g = PyObject_CallNoArgs(cdyn_G.is_grad_enabled);
        if (g == NULL) {
            goto done;
        }
        grad = g == Py_True;
        Py_DECREF(g);
    }
    tx.grad_enabled = tx.grad_enabled_at_start = grad;
    pair = PyObject_CallMethod(tx.glue, "new_trace", NULL);
    if (pair == NULL) {
        goto done;
    }
    tx.graph = Py_NewRef(PyTuple_GET_ITEM(pair, 0));
    tx.fake_mode = Py_NewRef(PyTuple_GET_ITEM(pair, 1));
    tx.root = PyDict_New();
    tx.input_sources = PyList_New(0);
    tx.input_values = PyList_New(0);
    tx.by_source = PyDict_New();
    tx.by_id = PyDict_New();
    tx.effects = PyList_New(0);
    tx.resume_codes = PyList_New(0);
    tx.guards = cdyn_guards_new();
    if (!tx.root || !tx.input_sources || !tx.input_values || !tx.by_source || !tx.by_id ||
        !tx.guards || !tx.effects || !tx.resume_codes) {
        goto done;
    }
    if (cdyn_guards_add_grad_mode(tx.guards, grad) < 0) {
        goto done;
    }
    cdyn_log(20, "start tracing %U %U:%d", co->co_qualname, co->co_filename,
             co->co_firstlineno);
    if (fs_init(&fs, co, frame->f_globals, frame->f_builtins) < 0) {
        goto done;
    }
    fs.is_top = 1;
    fs.top_globals = 1;
    /* Free variables of the top frame: lazily wrapped real cells with closure sources. */
    if (co->co_nfreevars > 0) {
        PyObject *closure = ((PyFunctionObject *)frame->f_func)->func_closure;
        int first = co->co_nlocalsplus - co->co_nfreevars;
        for (int k = 0; k < co->co_nfreevars; k++) {
            PyObject *src = NULL, *items = NULL, *cell = NULL;
            src = cdyn_source_closure(k, localsplus_name(co, first + k));
            items = PyList_New(0);
            if (src != NULL && items != NULL) {
                cell = cdyn_value_new(VK_CELL, PyTuple_GET_ITEM(closure, k), NULL, items, src);
            }
            Py_XDECREF(src);
            Py_XDECREF(items);
            if (cell == NULL) {
                goto done;
            }
            fs.locals[first + k] = cell;
        }
    }
    st = cdyn_tx_run(&tx, &fs);
    if (st == TR_UNSUPPORTED || st == TR_BREAK) {
        fullgraph = PyObject_GetAttrString(options, "fullgraph");
        if (fullgraph == NULL) {
            goto done;
        }
        if (PyObject_IsTrue(fullgraph)) {
            Py_ssize_t pc = st == TR_BREAK ? tx.break_pc : fs.pc - 1;
            PyObject *r = NULL;
            if (pc < 0 || pc >= fs.instrs.len) {
                pc = 0;
            }
            r = PyObject_CallMethod(tx.glue, "fullgraph_error", "OOOiOi",
                                    tx.reason ? tx.reason : Py_None, co->co_qualname,
                                    co->co_filename, instr_line(&fs, pc),
                                    tx.reason_file ? tx.reason_file : Py_None, tx.reason_line);
            Py_XDECREF(r);
            goto done;   /* fullgraph_error raised */
        }
    }
    if (st == TR_OK) {
        st = cdyn_tx_finish(&tx, fs.retval, &code_out);
    }
    else if (st == TR_BREAK) {
        st = cdyn_tx_finish_break(&tx, &fs, &code_out);
    }
    if (st == TR_ERROR) {
        goto done;
    }
    if (st == TR_UNSUPPORTED) {
        cdyn_log(10, "running %U (%U:%d) unmodified: %U", co->co_qualname, co->co_filename,
                 co->co_firstlineno, tx.reason ? tx.reason : Py_None);
        rc = 0;
        goto done;
    }
    out->code = code_out;
    code_out = NULL;
    out->guards = tx.guards;
    tx.guards = NULL;
    rc = 0;
done:
    restore_grad_mode(grad);
    fs_clear(&fs);
    tx_clear(&tx);
    Py_XDECREF(pair);
    Py_XDECREF(code_out);
    Py_XDECREF(fullgraph);
    return rc;
}

/* ---- init -------------------------------------------------------------------------- */

static PyObject *
import_attr(const char *mod, const char *attr)
{
    PyObject *m = PyImport_ImportModule(mod), *r = NULL;
    if (m == NULL) {
        return NULL;
    }
    r = attr ? PyObject_GetAttrString(m, attr) : Py_NewRef(m);
    Py_DECREF(m);
    return r;
}

PyMethodDef cdyn_translate_methods[] = {
    {NULL, NULL, 0, NULL},
};

int
cdyn_translate_init(PyObject *module)
{
    static const char *binops[13] = {"add", "and_", "floordiv", "lshift", "matmul", "mul",
                                     "mod", "or_", "pow", "rshift", "sub", "truediv", "xor"};
    static const char *ibinops[13] = {"iadd", "iand", "ifloordiv", "ilshift", "imatmul",
                                      "imul", "imod", "ior", "ipow", "irshift", "isub",
                                      "itruediv", "ixor"};
    static const char *cmps[6] = {"lt", "le", "eq", "ne", "gt", "ge"};
    cdyn_tx_globals *g = &cdyn_G;
    if (cdyn_value_init(module) < 0 || cdyn_tcall_init() < 0) {
        return -1;
    }
    null_value = cdyn_value_new(VK_NULL, NULL, NULL, NULL, NULL);
    if (null_value == NULL) {
        return -1;
    }
    cdyn_live.values--;    /* lives as long as the module: not counted as live */
#define IMP(field, mod, attr)                       \
    do {                                            \
        if ((g->field = import_attr(mod, attr)) == NULL) { \
            return -1;                              \
        }                                           \
    } while (0)
    IMP(torch, "torch", NULL);
    IMP(torch_tensor_type, "torch", "Tensor");
    IMP(torch_size_type, "torch", "Size");
    IMP(torch_dtype_type, "torch", "dtype");
    IMP(torch_device_type, "torch", "device");
    IMP(nn_module_type, "torch.nn", "Module");
    IMP(nn_parameter_type, "torch.nn", "Parameter");
    IMP(sequential_type, "torch.nn", "Sequential");
    IMP(modulelist_type, "torch.nn", "ModuleList");
    IMP(moduledict_type, "torch.nn", "ModuleDict");
    IMP(fx_graph_type, "torch.fx", "Graph");
    IMP(operator_mod, "operator", NULL);
    IMP(builtins_mod, "builtins", NULL);
    IMP(math_mod, "math", NULL);
    IMP(glue, "cdynamo._glue", NULL);
    IMP(getattr_fn, "builtins", "getattr");
    IMP(getitem_fn, "operator", "getitem");
    IMP(setitem_fn, "operator", "setitem");
    IMP(set_grad_enabled, "torch._C", "_set_grad_enabled");
    IMP(is_grad_enabled, "torch", "is_grad_enabled");
    IMP(no_grad, "torch", "no_grad");
    IMP(enable_grad, "torch", "enable_grad");
    IMP(set_grad_enabled_cls, "torch", "set_grad_enabled");
    IMP(neg, "operator", "neg");
    IMP(pos, "operator", "pos");
    IMP(invert, "operator", "invert");
    IMP(not_, "operator", "not_");
    IMP(contains, "operator", "contains");
    IMP(grad_mode_exit_type, "cdynamo._glue", "GradModeExit");
    for (int i = 0; i < 13; i++) {
        IMP(binop_fns[i], "operator", binops[i]);
        IMP(binop_fns[13 + i], "operator", ibinops[i]);
    }
    for (int i = 0; i < 6; i++) {
        IMP(cmp_fns[i], "operator", cmps[i]);
    }
#undef IMP
    return 0;
}
