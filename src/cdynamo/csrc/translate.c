/* translate.c: the symbolic interpreter of CPython 3.11 bytecode.
 *
 * Pipeline for one frame: decode the code object (bytecode.c), interpret it instruction by
 * instruction on symbolic values (value.h; each family of values in values/) while
 * recording torch operations into a torch.fx.Graph (graph.c), then hand the graph to the
 * backend and generate the transformed code (codegen.c).
 *
 * Each opcode has a short handler (op_table). Handlers work on the values in place and pop
 * their operands only once they succeeded, so that an instruction the interpreter cannot
 * model leaves the symbolic stack intact: in the top frame it then becomes a graph break at
 * that instruction (the graph so far compiled, the instruction run by Python, a resume
 * function after it); in an inlined call it fails the inlining (the caller breaks at its
 * call site). Only where no state can be rebuilt does the whole frame run unmodified, with
 * the reason logged. An internal error while translating makes the frame run unmodified
 * (logged at WARNING; raised instead under cdynamo.config.raise_internal_errors); errors
 * that belong to the user (fullgraph errors, backend failures) reach the user.
 */
#include "translate.h"
#include "analysis.h"
#include "cache.h"
#include "tx.h"

cdyn_tx_globals cdyn_G;
int cdyn_raise_internal_errors = 0;

int cdyn_builtin_init(void);
int cdyn_torch_init(void);
int cdyn_hop_init(void);
int cdyn_ctx_init(void);
int cdyn_polyfill_init(void);

#define MAX_STEPS 1000000

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
        tx->reason_eogb = tx->eogb;
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

/* ---- stack and locals ------------------------------------------------------------------ */

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

/* Drop the top n values. */
static void
drop(cdyn_fs *fs, int n)
{
    for (int i = 0; i < n; i++) {
        Py_DECREF(pop(fs));
    }
}

/* Borrowed value i slots below the top (0 = top). */
static PyObject *
peek(cdyn_fs *fs, int i)
{
    assert(fs->sp - 1 - i >= 0);
    return fs->stack[fs->sp - 1 - i];
}

/* Pop n values, push r (stolen; TR_ERROR when NULL). */
static tr_status
replace(cdyn_fs *fs, int n, PyObject *r)
{
    if (r == NULL) {
        return TR_ERROR;
    }
    drop(fs, n);
    return push(fs, r);
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

static PyObject *
localsplus_name(PyCodeObject *co, int i)
{
    return PyTuple_GET_ITEM(co->co_localsplusnames, i);
}

/* Borrowed value of local i, wrapping a top-frame argument on first use. */
static tr_status
load_local(cdyn_tx *tx, cdyn_fs *fs, int i, PyObject **out)
{
    if (fs->locals[i] == NULL && fs->is_top && i < fs->code->co_nlocalsplus) {
        PyObject *real = cdyn_frame_slots(tx->frame)[i];
        _PyLocals_Kind k = _PyLocals_GetKind(fs->code->co_localspluskinds, i);
        if (real != NULL && (k & CO_FAST_LOCAL) && !(k & CO_FAST_FREE)) {
            PyObject *src = cdyn_source_local(i, localsplus_name(fs->code, i));
            tr_status st;
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

/* Contents of a cell value (borrowed), wrapping a real cell's contents on first use. */
static tr_status
cell_get(cdyn_tx *tx, PyObject *cell, PyObject **out)
{
    return cdyn_cell_get(tx, cell, out);
}

/* The source of global `name` of fs's code (new reference): G[name] in the top frame's
 * module, <globals of another module>[name] for an inlined function of a module whose
 * globals are guarded; NULL without an exception for trusted globals (torch's own modules,
 * the polyfills: not guarded, not tracked), NULL with one on error. */
static PyObject *
global_source(cdyn_fs *fs, PyObject *name)
{
    if (fs->top_globals) {
        return cdyn_source_global(name);
    }
    return fs->globals_source != NULL ? cdyn_source_item(fs->globals_source, name) : NULL;
}

/* The source of trusted global `name` of fs's globals (torch's own modules, whose loads
 * are not guarded): an item of the globals dict's constant source (G[name] if they are
 * the top frame's). New reference, NULL + exception. */
static PyObject *
trusted_global_source(cdyn_tx *tx, cdyn_fs *fs, PyObject *name)
{
    if (fs->globals == cdyn_frame_globals(tx->frame)) {
        return cdyn_source_global(name);
    }
    return cdyn_tx_module_global_source(fs->globals, name);
}

/* Builtin `name` (obj, borrowed) of a frame whose globals are guarded: a callable is
 * guarded by identity, as torch._dynamo's BUILTIN_MATCH (a patched builtins.isinstance, or
 * one restored, recompiles), through G[name] in the top frame (which falls back to the
 * builtins, so a global defined later that shadows it recompiles too), else through the
 * builtins dict's item. Other builtins (constants such as None, Ellipsis, __debug__) and
 * those of trusted modules are not guarded. *out new. */
static tr_status
load_builtin(cdyn_tx *tx, cdyn_fs *fs, PyObject *name, PyObject *obj, PyObject **out)
{
    PyObject *src = NULL;
    tr_status st;
    if (PyCallable_Check(obj) && (fs->top_globals || fs->globals_source != NULL)) {
        src = fs->top_globals ? cdyn_source_global(name)
                              : cdyn_tx_module_global_source(fs->builtins, name);
        if (src == NULL) {
            return TR_ERROR;
        }
    }
    st = cdyn_tx_wrap_real(tx, obj, src, out);
    Py_XDECREF(src);
    return st;
}

/* Value of a global name: what the trace stored there, else globals then builtins, with a
 * source. *out new. */
static tr_status
load_global(cdyn_tx *tx, cdyn_fs *fs, PyObject *name, PyObject **out)
{
    PyObject *obj = NULL, *memo = NULL, *src = global_source(fs, name);
    tr_status st = TR_ERROR;
    if (src == NULL && PyErr_Occurred()) {
        return TR_ERROR;
    }
    if (src == NULL && cdyn_tx_globals_stored(tx, fs->globals)) {
        /* trusted globals that the trace stored into are read through sources from then
           on: a value is one value (parametrize's _cache dict, filled by the trace) */
        src = trusted_global_source(tx, fs, name);
        if (src == NULL) {
            return TR_ERROR;
        }
    }
    if (src != NULL) {   /* a global stored earlier in this trace (STORE_GLOBAL) */
        memo = PyDict_GetItemWithError(tx->by_source, cdyn_source_repr(src));
        if (memo != NULL || PyErr_Occurred()) {
            Py_DECREF(src);
            *out = Py_XNewRef(memo);
            return memo != NULL ? TR_OK : TR_ERROR;
        }
    }
    obj = PyDict_GetItemWithError(fs->globals, name);   /* borrowed */
    if (obj == NULL) {
        Py_XDECREF(src);
        if (PyErr_Occurred()) {
            return TR_ERROR;
        }
        obj = PyDict_GetItemWithError(fs->builtins, name);
        if (obj == NULL) {
            return PyErr_Occurred() ? TR_ERROR
                                    : cdyn_tx_unsupported(tx, "name '%U' is not defined", name);
        }
        return load_builtin(tx, fs, name, obj, out);
    }
    st = cdyn_tx_wrap_real(tx, obj, src, out);   /* src NULL: trusted globals, not guarded */
    Py_XDECREF(src);
    return st;
}

/* ---- opcode handlers ---------------------------------------------------------------------
 * Each handler interprets one instruction; on TR_UNSUPPORTED the stack is as it was. */

typedef tr_status (*op_fn)(cdyn_tx *tx, cdyn_fs *fs, const cdyn_instr *ins);

#define OP(name) static tr_status op_##name(cdyn_tx *tx, cdyn_fs *fs, const cdyn_instr *ins)
#define UNUSED_OP_ARGS() ((void)tx, (void)fs, (void)ins)

OP(nop)
{
    UNUSED_OP_ARGS();
    return TR_OK;
}

OP(pop_top)
{
    UNUSED_OP_ARGS();
    drop(fs, 1);
    return TR_OK;
}

OP(push_null)
{
    UNUSED_OP_ARGS();
    return push(fs, cdyn_value_null());
}

OP(copy)
{
    (void)tx;
    return push(fs, Py_NewRef(peek(fs, ins->oparg - 1)));
}

OP(swap)
{
    PyObject *tmp = fs->stack[fs->sp - 1];
    (void)tx;
    fs->stack[fs->sp - 1] = fs->stack[fs->sp - ins->oparg];
    fs->stack[fs->sp - ins->oparg] = tmp;
    return TR_OK;
}

OP(kw_names)
{
    (void)tx;
    Py_XSETREF(fs->kw_names, Py_NewRef(PyTuple_GET_ITEM(fs->code->co_consts, ins->oparg)));
    return TR_OK;
}

OP(load_const)
{
    (void)tx;
    return push(fs, cdyn_value_const(PyTuple_GET_ITEM(fs->code->co_consts, ins->oparg)));
}

OP(load_fast)
{
    PyObject *v = NULL;
    tr_status st = load_local(tx, fs, ins->oparg, &v);
    return st == TR_OK ? push(fs, Py_NewRef(v)) : st;
}

OP(store_fast)
{
    PyObject *v = pop(fs);
    (void)tx;
    if (V(v)->kind == VK_NULL) {   /* a variable LOAD_FAST_AND_CLEAR found unbound */
        Py_CLEAR(v);
    }
    else if (V(v)->kind == VK_TENSOR &&
             cdyn_tensor_name_hint(v, PyTuple_GET_ITEM(fs->code->co_localsplusnames,
                                                        ins->oparg)) < 0) {
        Py_DECREF(v);
        return TR_ERROR;
    }
    Py_XSETREF(fs->locals[ins->oparg], v);
    return TR_OK;
}

/* LOAD_FAST_AND_CLEAR (3.12+, around an inlined comprehension): push the variable (a NULL
 * when unbound) and unbind it. */
OP(load_fast_and_clear)
{
    PyObject *v = NULL;
    int i = ins->oparg;
    tr_status st;
    if (fs->locals[i] == NULL && !(fs->is_top && cdyn_frame_slots(tx->frame)[i] != NULL)) {
        return push(fs, cdyn_value_null());
    }
    st = load_local(tx, fs, i, &v);
    if (st != TR_OK) {
        return st;
    }
    st = push(fs, Py_NewRef(v));
    if (st == TR_OK) {
        Py_CLEAR(fs->locals[i]);
    }
    return st;
}

OP(delete_fast)
{
    (void)tx;
    Py_CLEAR(fs->locals[ins->oparg]);
    return TR_OK;
}

OP(make_cell)
{
    PyObject *cell = NULL, *v = NULL;
    int i = ins->oparg;
    if (fs->is_top && fs->locals[i] == NULL && cdyn_frame_slots(tx->frame)[i] != NULL) {
        tr_status st = load_local(tx, fs, i, &v);   /* a cell argument: wrap it first */
        if (st != TR_OK) {
            return st;
        }
    }
    cell = cdyn_value_alloc(VK_CELL, NULL);
    if (cell == NULL || cdyn_tx_note_cyclic(tx, cell) < 0) {
        Py_XDECREF(cell);
        return TR_ERROR;
    }
    V(cell)->u.cell.contents = Py_XNewRef(fs->locals[i]);
    if (fs->is_top) {   /* a variable of the frame (closures rebuilt at a break: function.c) */
        V(cell)->bits |= CELL_TOP;
        V(cell)->pos = i;
    }
    Py_XSETREF(fs->locals[i], cell);
    return TR_OK;
}

OP(load_closure)
{
    if (fs->locals[ins->oparg] == NULL) {
        return cdyn_tx_unsupported(tx, "LOAD_CLOSURE of an unmade cell");
    }
    return push(fs, Py_NewRef(fs->locals[ins->oparg]));
}

OP(load_deref)
{
    PyObject *v = NULL;
    tr_status st;
    if (fs->locals[ins->oparg] == NULL) {
        return cdyn_tx_unsupported(tx, "LOAD_DEREF of an unmade cell");
    }
    st = cell_get(tx, fs->locals[ins->oparg], &v);
    return st == TR_OK ? push(fs, Py_NewRef(v)) : st;
}

OP(store_deref)
{
    /* a real cell (of an outer frame) is a side effect written back after the graph */
    tr_status st;
    if (fs->locals[ins->oparg] == NULL) {
        return cdyn_tx_unsupported(tx, "STORE_DEREF to an unmade cell");
    }
    st = cdyn_cell_store(tx, fs->locals[ins->oparg], peek(fs, 0));
    if (st == TR_OK) {
        drop(fs, 1);
    }
    return st;
}

/* Push callable r (stolen) with the NULL of the call protocol on the side the version
 * puts it (CDYN_NULL_FIRST: NULL below the callable; 3.13: above it). */
static tr_status
push_with_null(cdyn_fs *fs, PyObject *r)
{
    tr_status st = push(fs, CDYN_NULL_FIRST ? cdyn_value_null() : r);
    if (st != TR_OK) {
        if (CDYN_NULL_FIRST) {
            Py_DECREF(r);
        }
        return st;
    }
    return push(fs, CDYN_NULL_FIRST ? r : cdyn_value_null());
}

OP(load_global)
{
    PyObject *name = PyTuple_GET_ITEM(fs->code->co_names, ins->oparg >> 1), *r = NULL;
    tr_status st = load_global(tx, fs, name, &r);
    if (st != TR_OK) {
        return st;
    }
    return (ins->oparg & 1) ? push_with_null(fs, r) : push(fs, r);
}

/* LOAD_ATTR and LOAD_METHOD. LOAD_METHOD always leaves the bound attribute with a NULL
 * (push_with_null): the families bind methods themselves. */
OP(load_attr)
{
    PyObject *r = NULL;
    tr_status st = cdyn_v_getattr(tx, peek(fs, 0), PyTuple_GET_ITEM(fs->code->co_names, ins->oparg),
                                  &r);
    if (st != TR_OK) {
        return st;
    }
    drop(fs, 1);
    return ins->opcode == LOAD_METHOD ? push_with_null(fs, r) : push(fs, r);
}

OP(store_attr)
{
    /* [.., value, obj] */
    tr_status st = cdyn_v_setattr(tx, peek(fs, 0), PyTuple_GET_ITEM(fs->code->co_names, ins->oparg),
                                  peek(fs, 1));
    if (st == TR_OK) {
        drop(fs, 2);
    }
    return st;
}

/* DELETE_ATTR: `del obj.name`, as delattr(obj, name) (values/userobj.c: the type's
 * __delattr__ inlined, object's recorded as a side effect); a break on other values. */
OP(delete_attr)
{
    /* [.., obj] */
    PyObject *name = PyTuple_GET_ITEM(fs->code->co_names, ins->oparg);
    tr_status st = cdyn_user_setattr_builtin(tx, peek(fs, 0), name, NULL);
    if (st == TR_NOTIMPL) {
        return cdyn_tx_unsupported(tx, "DELETE_ATTR %U on %S", name, peek(fs, 0));
    }
    if (st == TR_OK) {
        drop(fs, 1);
    }
    return st;
}

/* STORE_GLOBAL: a side effect replayed after the graph (STORE_GLOBAL in the top frame's
 * module, a store into the globals dict of another module), and what later loads of the
 * trace see (tx->by_source, keyed by the global's source). A store into trusted globals
 * (torch's own modules: torch.nn.utils.parametrize.cached()'s `_cache_enabled += 1`) is
 * tracked the same way; their loads are not guarded, so the value the store replaces is,
 * when it is a constant (what the trace may have computed from, as torch._dynamo's
 * CONSTANT_MATCH of a global). */
OP(store_global)
{
    PyObject *name = PyTuple_GET_ITEM(fs->code->co_names, ins->oparg);
    PyObject *src = global_source(fs, name), *old;
    int top = fs->top_globals;
    tr_status st = TR_ERROR;
    if (src == NULL && PyErr_Occurred()) {
        return TR_ERROR;
    }
    if (src == NULL) {
        src = trusted_global_source(tx, fs, name);
        if (src == NULL) {
            return TR_ERROR;
        }
        top = fs->globals == cdyn_frame_globals(tx->frame);
        if (!cdyn_tx_globals_stored(tx, fs->globals) &&
            ((tx->stored_globals == NULL && (tx->stored_globals = PyList_New(0)) == NULL) ||
             PyList_Append(tx->stored_globals, fs->globals) < 0)) {
            goto done;
        }
        /* the value before the trace stored into it (not a store of this trace) */
        if (PyDict_GetItemWithError(tx->by_source, cdyn_source_repr(src)) == NULL) {
            if (PyErr_Occurred()) {
                goto done;
            }
            old = PyDict_GetItemWithError(fs->globals, name);
            if (old == NULL && PyErr_Occurred()) {
                goto done;
            }
            if (old != NULL && (old == Py_None || PyLong_CheckExact(old) || PyBool_Check(old) ||
                                PyFloat_CheckExact(old) || PyUnicode_CheckExact(old)) &&
                cdyn_guards_add_equals(tx->guards, src, old) < 0) {
                goto done;
            }
        }
    }
    /* the effect's key: the name (top frame's module) or the ITEM source of the other
       module's globals dict (codegen.c emit_effects) */
    st = cdyn_tx_effect(tx, EFF_STORE_GLOBAL, NULL, top ? name : src, peek(fs, 0));
    if (st == TR_OK && cdyn_tx_memo_write(tx, cdyn_source_repr(src), peek(fs, 0)) < 0) {
        st = TR_ERROR;
    }
    if (st == TR_OK) {
        tx->mutations++;   /* a side effect (undone with the memo by a rollback) */
        drop(fs, 1);
    }
done:
    Py_DECREF(src);
    return st;
}

OP(build_seq)
{
    PyObject *items = pop_n(fs, ins->oparg), *r;
    (void)tx;
    if (items == NULL) {
        return TR_ERROR;
    }
    r = cdyn_value_seq_list(ins->opcode == BUILD_TUPLE ? VK_TUPLE : VK_LIST, items);
    Py_DECREF(items);
    return push(fs, r);
}

OP(list_to_tuple)
{
    PyObject *l = peek(fs, 0), *items;
    UNUSED_OP_ARGS();
    if (V(l)->kind != VK_LIST) {
        return cdyn_tx_unsupported(tx, "LIST_TO_TUPLE of %S", l);
    }
    /* a list handed to a resume function on its stack (a break between LIST_EXTEND and
     * LIST_TO_TUPLE) is an input list, wrapped lazily */
    tr_status st = cdyn_tx_materialize(tx, l);
    if (st != TR_OK) {
        return st;
    }
    items = PyList_GetSlice(V(l)->u.seq.items, 0, PY_SSIZE_T_MAX);
    if (items == NULL) {
        return TR_ERROR;
    }
    l = cdyn_value_seq_list(VK_TUPLE, items);
    Py_DECREF(items);
    return replace(fs, 1, l);
}

/* LIST_APPEND / LIST_EXTEND i: [.., list, .. i-1 .., v] */
OP(list_add)
{
    PyObject *lst = peek(fs, ins->oparg), *v = peek(fs, 0), *more = NULL;
    Py_ssize_t n;
    tr_status st;
    if (V(lst)->kind != VK_LIST || V(lst)->source != NULL) {
        return cdyn_tx_unsupported(tx, "%s to %S", cdyn_opname(ins->opcode), lst);
    }
    if (ins->opcode == LIST_APPEND) {
        cdyn_tx_mutated(tx, lst);
        if (PyList_Append(V(lst)->u.seq.items, v) < 0) {
            return TR_ERROR;
        }
        drop(fs, 1);
        return TR_OK;
    }
    st = cdyn_v_unpack(tx, v, &more);
    if (st != TR_OK) {
        return st;
    }
    cdyn_tx_mutated(tx, lst);
    n = PyList_GET_SIZE(V(lst)->u.seq.items);
    st = PyList_SetSlice(V(lst)->u.seq.items, n, n, more) < 0 ? TR_ERROR : TR_OK;
    Py_DECREF(more);
    if (st == TR_OK) {
        drop(fs, 1);
    }
    return st;
}

/* BUILD_MAP n: [k0, v0, .., kn, vn]; BUILD_CONST_KEY_MAP n: [v0 .. vn, keys] */
OP(build_map)
{
    int n = ins->oparg, ck = ins->opcode == BUILD_CONST_KEY_MAP;
    PyObject *d = NULL, *kt = ck ? peek(fs, 0) : NULL;
    tr_status st = TR_OK;
    if (ck && (V(kt)->kind != VK_CONST || !PyTuple_Check(V(kt)->u.cnst.value))) {
        return cdyn_tx_unsupported(tx, "BUILD_CONST_KEY_MAP with non-constant keys");
    }
    d = cdyn_dict_new(NULL);
    if (d == NULL) {
        return TR_ERROR;
    }
    for (int i = 0; st == TR_OK && i < n; i++) {
        PyObject *k = ck ? cdyn_value_const(PyTuple_GET_ITEM(V(kt)->u.cnst.value, i))
                         : Py_NewRef(fs->stack[fs->sp - 2 * n + 2 * i]);
        PyObject *v = ck ? fs->stack[fs->sp - 1 - n + i] : fs->stack[fs->sp - 2 * n + 2 * i + 1];
        st = k ? cdyn_dict_set(tx, d, k, v) : TR_ERROR;
        Py_XDECREF(k);
    }
    if (st != TR_OK) {
        Py_DECREF(d);
        return st;
    }
    return replace(fs, ck ? n + 1 : 2 * n, d);
}

/* MAP_ADD i: [.., dict, .. i-1 .., key, value] */
OP(map_add)
{
    PyObject *d = peek(fs, ins->oparg + 1);
    tr_status st;
    if (V(d)->kind != VK_DICT || V(d)->source != NULL) {
        return cdyn_tx_unsupported(tx, "MAP_ADD to %S", d);
    }
    st = cdyn_v_store_subscr(tx, d, peek(fs, 1), peek(fs, 0));
    if (st == TR_OK) {
        drop(fs, 2);
    }
    return st;
}

/* DICT_MERGE / DICT_UPDATE i: [.., dict, .. i-1 .., other]. A duplicate key in DICT_MERGE
 * (f(**a, **b)) raises TypeError in Python: left to Python. */
OP(dict_update)
{
    tr_status st = cdyn_dict_update_op(tx, peek(fs, ins->oparg), peek(fs, 0),
                                       ins->opcode == DICT_MERGE);
    if (st == TR_OK) {
        drop(fs, 1);
    }
    return st;
}

/* BUILD_SET n: [v0 .. vn] */
OP(build_set)
{
    PyObject *items = PyList_New(ins->oparg), *r = NULL;
    tr_status st;
    if (items == NULL) {
        return TR_ERROR;
    }
    for (int i = 0; i < ins->oparg; i++) {
        PyList_SET_ITEM(items, i, Py_NewRef(fs->stack[fs->sp - ins->oparg + i]));
    }
    st = cdyn_set_build(tx, VK_SET, items, &r);
    Py_DECREF(items);
    return st == TR_OK ? replace(fs, ins->oparg, r) : st;
}

/* SET_ADD / SET_UPDATE i: [.., set, .. i-1 .., v] */
OP(set_add)
{
    PyObject *s = peek(fs, ins->oparg);
    tr_status st = ins->opcode == SET_ADD ? cdyn_set_add_op(tx, s, peek(fs, 0))
                                          : cdyn_set_update_op(tx, s, peek(fs, 0));
    if (st == TR_OK) {
        drop(fs, 1);
    }
    return st;
}

/* A slice value of the n (2 or 3) bound values at items (borrowed): *out new on TR_OK. */
static tr_status
make_slice(cdyn_tx *tx, PyObject **items, int n, PyObject **out)
{
    PyObject *objs[3] = {Py_None, Py_None, Py_None};
    int tensor_bound = 0;
    for (int i = 0; i < n; i++) {
        tensor_bound |= V(items[i])->kind == VK_TENSOR;
    }
    /* x[:n] with a symbolic n, x[i:] with a tensor i (the subscript is then a break at its
       data-dependent index, as torch._dynamo's, not here) */
    if (tensor_bound || cdyn_any_sym(items, n)) {
        return cdyn_sym_build_slice(tx, items, n, out);
    }
    for (int i = 0; i < n; i++) {
        if (V(items[i])->kind != VK_CONST) {
            return cdyn_tx_unsupported(tx, "slice with a non-constant bound");
        }
        objs[i] = V(items[i])->u.cnst.value;
    }
    *out = cdyn_value_const_steal(PySlice_New(objs[0], objs[1], objs[2]));
    return *out != NULL ? TR_OK : TR_ERROR;
}

/* BUILD_SLICE / BUILD_STRING / FORMAT_VALUE: on constants only. */
OP(build_slice)
{
    PyObject *r = NULL;
    tr_status st = make_slice(tx, &fs->stack[fs->sp - ins->oparg], ins->oparg, &r);
    return st == TR_OK ? replace(fs, ins->oparg, r) : st;
}

/* BINARY_SLICE (3.12+): [container, start, end] -> container[start:end] */
OP(binary_slice)
{
    PyObject *sl = NULL, *r = NULL;
    tr_status st = make_slice(tx, &fs->stack[fs->sp - 2], 2, &sl);
    (void)ins;
    if (st == TR_OK) {
        st = cdyn_v_subscr(tx, peek(fs, 2), sl, &r);
    }
    Py_XDECREF(sl);
    return st == TR_OK ? replace(fs, 3, r) : st;
}

/* STORE_SLICE (3.12+): [value, container, start, end]: container[start:end] = value */
OP(store_slice)
{
    PyObject *sl = NULL;
    tr_status st = make_slice(tx, &fs->stack[fs->sp - 2], 2, &sl);
    (void)ins;
    if (st == TR_OK) {
        st = cdyn_v_store_subscr(tx, peek(fs, 2), sl, peek(fs, 3));
    }
    Py_XDECREF(sl);
    if (st == TR_OK) {
        drop(fs, 4);
    }
    return st;
}

OP(build_string)
{
    int n = ins->oparg;
    PyObject *strs = PyList_New(n), *empty = NULL, *r = NULL;
    if (strs == NULL) {
        return TR_ERROR;
    }
    for (int i = 0; i < n; i++) {
        PyObject *p = fs->stack[fs->sp - n + i];
        if (V(p)->kind != VK_CONST || !PyUnicode_Check(V(p)->u.cnst.value)) {
            Py_DECREF(strs);
            return cdyn_tx_unsupported(tx, "BUILD_STRING of non-constants");
        }
        PyList_SET_ITEM(strs, i, Py_NewRef(V(p)->u.cnst.value));
    }
    empty = PyUnicode_New(0, 0);
    r = empty ? PyUnicode_Join(empty, strs) : NULL;
    Py_XDECREF(empty);
    Py_DECREF(strs);
    return replace(fs, n, cdyn_value_const_steal(r));
}

/* FORMAT_VALUE of a value that is not a constant: f"{x}", f"{x!s}", f"{x!r}" without a
 * format spec (or an empty one) where the text is fixed by the trace (cdyn_text_of; for
 * f"{x}" only when type(x) formats with object.__format__, which is str(x)). */
static tr_status
format_text(cdyn_tx *tx, cdyn_fs *fs, const cdyn_instr *ins, PyObject *a, PyObject *spec)
{
    static PyObject *s_format;
    PyTypeObject *t = cdyn_v_python_type(a);
    PyObject *s = NULL, *object_format;
    Py_ssize_t speclen = spec != NULL ? PyObject_Length(V(spec)->u.cnst.value) : 0;
    int conv = ins->oparg & 0x03;
    tr_status st;
    if (s_format == NULL && (s_format = PyUnicode_InternFromString("__format__")) == NULL) {
        return TR_ERROR;
    }
    object_format = PyDict_GetItemWithError(cdyn_type_dict(&PyBaseObject_Type), s_format);
    if (speclen < 0 || object_format == NULL) {
        return TR_ERROR;
    }
    if (speclen != 0 || conv == 3 || t == NULL ||
        (conv == 0 && _PyType_Lookup(t, s_format) != object_format)) {
        return cdyn_tx_unsupported(tx, "FORMAT_VALUE of a non-constant");
    }
    st = cdyn_text_of(tx, a, conv == 2, &s);
    if (st != TR_OK) {
        return st;
    }
    return replace(fs, 1 + (spec != NULL), s);
}

OP(format_value)
{
    int has_spec = (ins->oparg & 0x04) != 0;
    PyObject *spec = has_spec ? peek(fs, 0) : NULL, *a = peek(fs, has_spec), *conv = NULL,
             *s = NULL;
    if (V(a)->kind != VK_CONST && (spec == NULL || V(spec)->kind == VK_CONST)) {
        return format_text(tx, fs, ins, a, spec);
    }
    if (V(a)->kind != VK_CONST || (spec != NULL && V(spec)->kind != VK_CONST)) {
        return cdyn_tx_unsupported(tx, "FORMAT_VALUE of a non-constant");
    }
    switch (ins->oparg & 0x03) {
    case 1: conv = PyObject_Str(V(a)->u.cnst.value); break;
    case 2: conv = PyObject_Repr(V(a)->u.cnst.value); break;
    case 3: conv = PyObject_ASCII(V(a)->u.cnst.value); break;
    default: conv = Py_NewRef(V(a)->u.cnst.value); break;
    }
    if (conv != NULL) {
        s = PyObject_Format(conv, spec ? V(spec)->u.cnst.value : NULL);
        Py_DECREF(conv);
    }
    if (s == NULL) {
        return cdyn_tx_unsupported(tx, "FORMAT_VALUE failed");
    }
    return replace(fs, 1 + has_spec, cdyn_value_const_steal(s));
}

OP(unpack_sequence)
{
    PyObject *lst = NULL;
    tr_status st = cdyn_v_unpack(tx, peek(fs, 0), &lst);
    if (st != TR_OK) {
        return st;
    }
    if (PyList_GET_SIZE(lst) != ins->oparg) {
        Py_DECREF(lst);
        return cdyn_tx_unsupported(tx, "UNPACK_SEQUENCE length mismatch");
    }
    drop(fs, 1);
    for (int i = ins->oparg - 1; i >= 0 && st == TR_OK; i--) {
        st = push(fs, Py_NewRef(PyList_GET_ITEM(lst, i)));
    }
    Py_DECREF(lst);
    return st;
}

OP(unpack_ex)
{
    PyObject *lst = NULL, *rest = NULL;
    int before = ins->oparg & 0xFF, after = ins->oparg >> 8;
    Py_ssize_t n;
    tr_status st = cdyn_v_unpack(tx, peek(fs, 0), &lst);
    if (st != TR_OK) {
        return st;
    }
    n = PyList_GET_SIZE(lst);
    if (n < before + after) {
        Py_DECREF(lst);
        return cdyn_tx_unsupported(tx, "UNPACK_EX: not enough values");
    }
    drop(fs, 1);
    for (Py_ssize_t i = n - 1; i >= n - after && st == TR_OK; i--) {
        st = push(fs, Py_NewRef(PyList_GET_ITEM(lst, i)));
    }
    rest = PyList_GetSlice(lst, before, n - after);
    if (st == TR_OK) {
        st = rest ? push(fs, cdyn_value_seq_list(VK_LIST, rest)) : TR_ERROR;
    }
    Py_XDECREF(rest);
    for (int i = before - 1; i >= 0 && st == TR_OK; i--) {
        st = push(fs, Py_NewRef(PyList_GET_ITEM(lst, i)));
    }
    Py_DECREF(lst);
    return st;
}

OP(store_subscr)
{
    /* [.., value, container, key] */
    tr_status st = cdyn_v_store_subscr(tx, peek(fs, 1), peek(fs, 0), peek(fs, 2));
    (void)ins;
    if (st == TR_OK) {
        drop(fs, 3);
    }
    return st;
}

OP(delete_subscr)
{
    tr_status st = cdyn_v_delete_subscr(tx, peek(fs, 1), peek(fs, 0));
    (void)ins;
    if (st == TR_OK) {
        drop(fs, 2);
    }
    return st;
}

/* BINARY_SUBSCR, BINARY_OP, COMPARE_OP: [a, b] -> [a OP b] */
OP(binary)
{
    PyObject *a = peek(fs, 1), *b = peek(fs, 0), *r = NULL;
    tr_status st;
    if (ins->opcode == BINARY_SUBSCR) {
        st = cdyn_v_subscr(tx, a, b, &r);
    }
    else if (ins->opcode == COMPARE_OP) {
        st = cdyn_v_compare(tx, cdyn_compare_kind(ins->oparg), a, b, &r);
    }
    else {
        st = cdyn_v_binop(tx, ins->oparg, a, b, &r);
    }
    return st == TR_OK ? replace(fs, 2, r) : st;
}

OP(unary)
{
    PyObject *r = NULL;
    tr_status st;
    if (ins->opcode == UNARY_NOT) {
        int truth = 0;
        st = cdyn_v_truth(tx, peek(fs, 0), &truth);
        r = st == TR_OK ? cdyn_value_bool(!truth) : NULL;
    }
    else {
        st = cdyn_v_unary(tx, ins->opcode, peek(fs, 0), &r);
    }
    return st == TR_OK ? replace(fs, 1, r) : st;
}

/* IS_OP / CONTAINS_OP: [a, b]; oparg 1 inverts (`is not`, `not in`). */
OP(is_contains)
{
    int truth = 0;
    tr_status st = ins->opcode == IS_OP ? cdyn_v_is(tx, peek(fs, 1), peek(fs, 0), &truth)
                                        : cdyn_v_contains(tx, peek(fs, 0), peek(fs, 1), &truth);
    if (st != TR_OK) {
        return st;
    }
    return replace(fs, 2, cdyn_value_bool(truth ^ ins->oparg));
}

OP(get_iter)
{
    PyObject *it = NULL;
    tr_status st = cdyn_v_iter(tx, peek(fs, 0), &it);
    (void)ins;
    return st == TR_OK ? replace(fs, 1, it) : st;
}

OP(for_iter)
{
    PyObject *item = NULL;
    tr_status st = cdyn_v_next(tx, peek(fs, 0), &item);
    if (st != TR_OK) {
        return st;
    }
    if (item != NULL) {
        return push(fs, item);
    }
    drop(fs, 1);
    fs->pc = cdyn_for_iter_exit(&fs->instrs, ins->target);
    return TR_OK;
}

OP(jump)
{
    (void)tx;
    fs->pc = ins->target;
    return TR_OK;
}

/* The message of the `assert` statement whose failing branch starts at fs->pc: a new str
 * (its constant message, or "assertion error" without one), or NULL (no exception set)
 * when the instructions there are not LOAD_ASSERTION_ERROR [LOAD_CONST msg [PRECALL] CALL 0]
 * RAISE_VARARGS 1, as the compiler emits for `assert cond[, "msg"]`. */
static PyObject *
assert_message(cdyn_fs *fs)
{
    const cdyn_instr *in = fs->instrs.items + fs->pc;
    Py_ssize_t left = fs->instrs.len - fs->pc, i = 1;
    PyObject *msg = NULL;
    if (left < 2 || in[0].opcode != LOAD_ASSERTION_ERROR) {
        return NULL;
    }
    if (in[1].opcode == LOAD_CONST) {
        msg = PyTuple_GET_ITEM(fs->code->co_consts, in[1].oparg);
        i = 2 + (left > 2 && in[2].opcode == PRECALL);   /* 3.11's PRECALL 0 */
        if (!PyUnicode_Check(msg) || i + 1 >= left || in[i].opcode != CALL || in[i].oparg != 0) {
            return NULL;
        }
        i++;
    }
    if (i >= left || in[i].opcode != RAISE_VARARGS || in[i].oparg != 1) {
        return NULL;
    }
    return msg != NULL ? Py_NewRef(msg) : PyUnicode_FromString("assertion error");
}

/* `assert t[, "msg"]` with t a one-element tensor: a torch.ops.cdynamo.assert_true(t, msg)
 * node (_glue.assert_op) and the trace goes on past the statement, as torch._dynamo keeps
 * such an assert in its graph (rewrite_assert_with_torch_assert); a failing assertion
 * raises AssertionError(msg) when the graph runs, as eager (torch._dynamo's
 * torch._assert_async raises RuntimeError). TR_NOTIMPL when the jump is not such an
 * assert. */
static tr_status
tensor_assert(cdyn_tx *tx, cdyn_fs *fs, const cdyn_instr *ins)
{
    static PyObject *assert_op;
    PyObject *cond = peek(fs, 0), *msg = NULL, *args[2] = {cond, NULL}, *r = NULL, *n = NULL;
    tr_status st = TR_NOTIMPL;
    Py_ssize_t numel;
    if (ins->opcode != POP_JUMP_IF_TRUE || V(cond)->kind != VK_TENSOR ||
        (msg = assert_message(fs)) == NULL) {
        return PyErr_Occurred() ? TR_ERROR : TR_NOTIMPL;
    }
    n = PyObject_CallMethod(V(cond)->u.tensor.fake, "numel", NULL);
    numel = n != NULL && PyLong_CheckExact(n) ? PyLong_AsSsize_t(n) : -1;
    PyErr_Clear();
    if (numel == 1 && (assert_op != NULL ||
                       (assert_op = PyObject_CallMethod(cdyn_G.glue, "assert_op", NULL)))) {
        args[1] = cdyn_value_const(msg);
        st = args[1] != NULL ? cdyn_tx_graph_call(tx, "call_function", assert_op, NULL, args,
                                                  2, NULL, &r)
                             : TR_ERROR;
        Py_XDECREF(args[1]);
        Py_XDECREF(r);
        if (st == TR_OK) {
            drop(fs, 1);
            fs->pc = ins->target;
        }
    }
    PyErr_Clear();
    Py_XDECREF(n);
    Py_DECREF(msg);
    return st == TR_OK ? TR_OK : TR_NOTIMPL;
}

OP(pop_jump_if)
{
    int want = ins->opcode == POP_JUMP_IF_TRUE;
    int truth = 0;
    tr_status st = tensor_assert(tx, fs, ins);
    if (st != TR_NOTIMPL) {
        return st;
    }
    st = cdyn_v_truth(tx, peek(fs, 0), &truth);
    if (st != TR_OK) {
        return st;
    }
    drop(fs, 1);
    if (truth == want) {
        fs->pc = ins->target;
    }
    return TR_OK;
}

OP(pop_jump_if_none)
{
    int want_none = ins->opcode == POP_JUMP_IF_NONE;
    int is_none = cdyn_v_is_none(peek(fs, 0));   /* None is always a constant value */
    (void)tx;
    drop(fs, 1);
    if (is_none == want_none) {
        fs->pc = ins->target;
    }
    return TR_OK;
}

OP(jump_if_or_pop)
{
    int want = ins->opcode == JUMP_IF_TRUE_OR_POP, truth = 0;
    tr_status st = cdyn_v_truth(tx, peek(fs, 0), &truth);
    if (st != TR_OK) {
        return st;
    }
    if (truth == want) {
        fs->pc = ins->target;
    }
    else {
        drop(fs, 1);
    }
    return TR_OK;
}

OP(before_with)
{
    PyObject *exit_fn = NULL, *result = NULL;
    tr_status st = cdyn_v_enter(tx, peek(fs, 0), &exit_fn, &result);
    (void)ins;
    if (st != TR_OK) {
        return st;
    }
    drop(fs, 1);
    st = push(fs, exit_fn);
    if (st != TR_OK) {
        Py_DECREF(result);
        return st;
    }
    return push(fs, result);
}

OP(make_function)
{
    int flags = ins->oparg, nin = 1;
    PyObject *parts[3] = {Py_None, Py_None, Py_None}, *code = peek(fs, 0), *fn = NULL;
    PyObject *plist = NULL;
    int at = 1;
    if (V(code)->kind != VK_CONST || !PyCode_Check(V(code)->u.cnst.value)) {
        return cdyn_tx_unsupported(tx, "MAKE_FUNCTION without a constant code object");
    }
    if (flags & 0x08) {
        parts[1] = peek(fs, at++);   /* closure */
    }
    if (flags & 0x04) {
        at++;                        /* annotations: ignored */
    }
    if (flags & 0x02) {
        parts[2] = peek(fs, at++);   /* kwdefaults */
    }
    if (flags & 0x01) {
        parts[0] = peek(fs, at++);   /* defaults */
    }
    nin = at;
    plist = PyList_New(3);
    fn = cdyn_value_alloc(VK_FUNCTION, NULL);
    if (plist == NULL || fn == NULL) {
        Py_XDECREF(plist);
        Py_XDECREF(fn);
        return TR_ERROR;
    }
    for (int i = 0; i < 3; i++) {
        PyList_SET_ITEM(plist, i, Py_NewRef(parts[i]));
    }
    V(fn)->u.func.code = Py_NewRef(V(code)->u.cnst.value);
    V(fn)->u.func.globals = Py_NewRef(fs->globals);
    V(fn)->u.func.parts = plist;
    V(fn)->u.func.gsource = Py_NewRef(fs->globals_source ? fs->globals_source : Py_None);
    V(fn)->bits = fs->top_globals ? FUNC_TOP_GLOBALS : 0;
    return replace(fs, nin, fn);
}

/* Push the values of __class__ (a free variable of a method using super()) and of the
 * frame's first argument: zero-argument super() made explicit, so it means the same in
 * any code we generate. */
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
    if (st == TR_OK) {
        st = load_local(tx, fs, 0, &self);
    }
    if (st == TR_OK && V(self)->kind == VK_CELL) {
        st = cell_get(tx, self, &self);
    }
    if (st != TR_OK) {
        return st;
    }
    st = push(fs, Py_NewRef(cls));
    return st == TR_OK ? push(fs, Py_NewRef(self)) : st;
}

/* CALL n: [.., X, Y, args(n)]: with the NULL in X (Y on 3.13) the other one is called on
 * args, else X(Y, args). */
OP(call)
{
    PyObject *res = NULL, *kwn = fs->kw_names, **base;
    Py_ssize_t pos[16];
    int n = ins->oparg, nslots;
    tr_status st;
    fs->kw_names = NULL;
    if (n == 0 && kwn == NULL && V(peek(fs, CDYN_NULL_FIRST))->kind == VK_NULL &&
        cdyn_v_real(peek(fs, !CDYN_NULL_FIRST)) == (PyObject *)&PySuper_Type) {
        if ((st = explicit_super_args(tx, fs)) != TR_OK) {
            return st;
        }
        n = 2;
    }
    fs->call_n = n;
    base = &fs->stack[fs->sp - n - 2];
    /* iterators among the call's stack slots (e.g. a comprehension's): their positions are
       restored if the call becomes a graph break */
    nslots = n + 2 < 16 ? n + 2 : 16;
    for (int i = 0; i < nslots; i++) {
        pos[i] = V(base[i])->kind == VK_ITER ? V(base[i])->pos : -1;
    }
    if (V(base[!CDYN_NULL_FIRST])->kind == VK_NULL) {   /* [NULL, f] or [f, NULL] */
        st = cdyn_v_call(tx, fs, base[CDYN_NULL_FIRST], base + 2, n, kwn, &res);
    }
    else {
        st = cdyn_v_call(tx, fs, base[0], base + 1, n + 1, kwn, &res);
    }
    if (st != TR_OK) {
        for (int i = 0; i < nslots; i++) {
            if (pos[i] >= 0) {
                V(base[i])->pos = pos[i];
            }
        }
        fs->kw_names = kwn;   /* kept for a graph break at this call */
        return st;
    }
    Py_XDECREF(kwn);
    return replace(fs, n + 2, res);
}

/* CALL_FUNCTION_EX flags: [NULL, fn, args, (kwargs)] ([fn, NULL, args, (kwargs)] on 3.13). */
OP(call_function_ex)
{
    int flags = ins->oparg, k = flags & 1;
    PyObject *kw = k ? peek(fs, 0) : NULL;
    PyObject *args = peek(fs, k), *fn = peek(fs, k + 1 + !CDYN_NULL_FIRST);
    PyObject *all = NULL, *kwnames = NULL, *res = NULL;
    tr_status st = cdyn_v_unpack(tx, args, &all);
    if (st == TR_OK && kw != NULL) {
        st = cdyn_dict_kwargs(tx, kw, all, &kwnames);
    }
    if (st == TR_OK) {
        st = cdyn_v_call(tx, fs, fn, &PyList_GET_ITEM(all, 0), PyList_GET_SIZE(all), kwnames,
                         &res);
    }
    Py_XDECREF(all);
    Py_XDECREF(kwnames);
    if (st != TR_OK) {
        return st;
    }
    drop(fs, 2 + k + !CDYN_NULL_FIRST);
    if (CDYN_NULL_FIRST && fs->sp > 0 && V(peek(fs, 0))->kind == VK_NULL) {
        drop(fs, 1);
    }
    return push(fs, res);
}

OP(return_value)
{
    (void)tx;
    (void)ins;
    fs->retval = pop(fs);
    return TR_OK;
}

/* RETURN_CONST (3.12+): LOAD_CONST and RETURN_VALUE in one. */
OP(return_const)
{
    (void)tx;
    fs->retval = cdyn_value_const(PyTuple_GET_ITEM(fs->code->co_consts, ins->oparg));
    return fs->retval != NULL ? TR_OK : TR_ERROR;
}

/* END_FOR (3.12+): the end of a loop, reached only when jumped to (an exhausted FOR_ITER
 * skips it): pops what its version's END_FOR pops. */
OP(end_for)
{
    UNUSED_OP_ARGS();
    drop(fs, CDYN_END_FOR_POPS);
    return TR_OK;
}

/* CALL_INTRINSIC_1 (3.12+): the intrinsics of traced code; others are unsupported. */
OP(call_intrinsic_1)
{
    PyObject *r = NULL;
    tr_status st;
    switch (ins->oparg) {
    case CDYN_INTRINSIC_UNARY_POSITIVE:
        st = cdyn_v_unary(tx, UNARY_POSITIVE, peek(fs, 0), &r);
        return st == TR_OK ? replace(fs, 1, r) : st;
    case CDYN_INTRINSIC_LIST_TO_TUPLE:
        return op_list_to_tuple(tx, fs, ins);
    case CDYN_INTRINSIC_STOPITERATION_ERROR:
        /* the handler 3.12+ wraps a generator's body in: the exception leaves the body as
           it is, and the generator family turns an escaping StopIteration into the
           RuntimeError, as for 3.11's generators */
        return TR_OK;
    default:
        return cdyn_tx_unsupported(tx, "CALL_INTRINSIC_1 %d", ins->oparg);
    }
}

/* CONVERT_VALUE / FORMAT_SIMPLE / FORMAT_WITH_SPEC (3.13): FORMAT_VALUE in three steps;
 * each is the FORMAT_VALUE of its part (a conversion alone is a format with no spec). */
OP(format_313)
{
    cdyn_instr as = *ins;
    as.opcode = FORMAT_VALUE;
    as.oparg = ins->opcode == CONVERT_VALUE ? ins->oparg : ins->opcode == FORMAT_WITH_SPEC ? 4 : 0;
    return op_format_value(tx, fs, &as);
}

/* ---- the match statement (PEP 634) ---- */

/* MATCH_MAPPING / MATCH_SEQUENCE: push whether the subject's type is a mapping / sequence
 * for pattern matching (its Py_TPFLAGS_MAPPING / _SEQUENCE flag, set by collections.abc's
 * registrations), the subject staying. */
OP(match_kind)
{
    PyTypeObject *tp = cdyn_v_python_type(peek(fs, 0));
    unsigned long flag = ins->opcode == MATCH_MAPPING ? Py_TPFLAGS_MAPPING : Py_TPFLAGS_SEQUENCE;
    if (tp == NULL) {
        return cdyn_tx_unsupported(tx, "%s of a value of unknown type",
                                   ins->opcode == MATCH_MAPPING ? "MATCH_MAPPING"
                                                                : "MATCH_SEQUENCE");
    }
    return push(fs, cdyn_value_bool((PyType_GetFlags(tp) & flag) != 0));
}

/* GET_LEN: push len(subject), the subject staying. */
OP(get_len)
{
    Py_ssize_t n = 0;
    tr_status st = cdyn_v_len(tx, peek(fs, 0), &n);
    (void)ins;
    return st != TR_OK ? st : push(fs, cdyn_value_const_steal(PyLong_FromSsize_t(n)));
}

/* MATCH_CLASS(count): [subject, cls, kw names] -> the tuple of matched attributes or None;
 * MATCH_KEYS: [subject, keys] -> [subject, keys, values or None]. Each inlines its
 * cdynamo.polyfills.match function. (`**rest` is BUILD_MAP, DICT_UPDATE and DELETE_SUBSCR
 * since 3.11.) */
OP(match_call)
{
    PyObject *args[4], *res = NULL;
    tr_status st;
    if (ins->opcode == MATCH_CLASS) {
        PyObject *count = cdyn_value_const_steal(PyLong_FromLong(ins->oparg));
        if (count == NULL) {
            return TR_ERROR;
        }
        args[0] = peek(fs, 2);
        args[1] = peek(fs, 1);
        args[2] = count;
        args[3] = peek(fs, 0);
        st = cdyn_polyfill_inline_named(tx, "match_class", args, 4, &res);
        Py_DECREF(count);
        return st != TR_OK ? st : replace(fs, 3, res);
    }
    args[0] = peek(fs, 1);
    args[1] = peek(fs, 0);
    st = cdyn_polyfill_inline_named(tx, "match_keys", args, 2, &res);
    return st != TR_OK ? st : push(fs, res);
}

/* LOAD_SUPER_ATTR (3.12+): [super, class, self] -> super(class, self).name; with the low bit
 * a method load (the bound attribute and a NULL, as LOAD_METHOD). */
OP(load_super_attr)
{
    PyObject *sup = NULL, *r = NULL;
    PyObject *name = PyTuple_GET_ITEM(fs->code->co_names, ins->oparg >> 2);
    tr_status st = cdyn_v_call(tx, fs, peek(fs, 2), &fs->stack[fs->sp - 2], 2, NULL, &sup);
    if (st == TR_OK) {
        st = cdyn_v_getattr(tx, sup, name, &r);
    }
    Py_XDECREF(sup);
    if (st != TR_OK) {
        return st;
    }
    drop(fs, 3);
    return (ins->oparg & 1) ? push_with_null(fs, r) : push(fs, r);
}

/* LOAD_BUILD_CLASS / LOAD_ASSERTION_ERROR: the builtin objects. */
OP(load_builtin_obj)
{
    PyObject *obj = ins->opcode == LOAD_BUILD_CLASS
                        ? PyDict_GetItemString(fs->builtins, "__build_class__")
                        : PyExc_AssertionError;
    PyObject *r = NULL;
    tr_status st;
    if (obj == NULL) {
        return cdyn_tx_unsupported(tx, "__build_class__ not found");
    }
    st = cdyn_tx_wrap_real(tx, obj, NULL, &r);
    return st == TR_OK ? push(fs, r) : st;
}

/* `from .<name> import a, b` (level > 0): the module the frame's package names, when it is
 * imported already and has every name of fromlist (no import runs at trace time), pinned
 * through a constant source; anything else runs in Python (a graph break). */
static tr_status
import_relative(cdyn_tx *tx, cdyn_fs *fs, PyObject *name, PyObject *level, PyObject *fromlist)
{
    PyObject *pkg = PyDict_GetItemString(fs->globals, "__package__"), *util = NULL,
             *rel = NULL, *abs = NULL, *mod, *r = NULL, *label = NULL;
    tr_status st = TR_ERROR;
    long n = PyLong_AsLong(level);
    if (pkg == NULL || !PyUnicode_Check(pkg) || !PyTuple_Check(fromlist) ||
        PyTuple_GET_SIZE(fromlist) == 0 || n <= 0 || n > 16) {
        return cdyn_tx_unsupported(tx, "relative import of %U", name);
    }
    util = PyImport_ImportModule("importlib.util");
    {
        char dots[17];
        memset(dots, '.', (size_t)n);
        dots[n] = '\0';
        rel = PyUnicode_FromFormat("%s%U", dots, name);
    }
    abs = util && rel ? PyObject_CallMethod(util, "resolve_name", "OO", rel, pkg) : NULL;
    if (abs == NULL) {
        PyErr_Clear();
        st = cdyn_tx_unsupported(tx, "relative import of %U", name);
        goto done;
    }
    mod = PyDict_GetItemWithError(PyImport_GetModuleDict(), abs);   /* borrowed */
    for (Py_ssize_t i = 0; mod != NULL && i < PyTuple_GET_SIZE(fromlist); i++) {
        PyObject *item = PyTuple_GET_ITEM(fromlist, i);
        if (!PyUnicode_Check(item) || PyObject_HasAttr(mod, item) != 1) {
            mod = NULL;
        }
    }
    if (mod == NULL) {
        st = PyErr_Occurred() ? TR_ERROR
                              : cdyn_tx_unsupported(tx, "relative import of %U (%U not imported "
                                                        "yet)", name, abs);
        goto done;
    }
    label = PyUnicode_FromFormat("sys.modules[%R]", abs);
    st = label ? cdyn_tx_wrap_fixed(tx, mod, label, &r) : TR_ERROR;
    if (st == TR_OK) {
        st = replace(fs, 2, r);
    }
done:
    Py_XDECREF(util);
    Py_XDECREF(rel);
    Py_XDECREF(abs);
    Py_XDECREF(label);
    return st;
}

/* IMPORT_NAME: [level, fromlist] -> module. A module already imported is imported again at
 * trace time (no side effect) and guarded through a constant source; anything else runs in
 * Python (a graph break). */
OP(import_name)
{
    PyObject *name = PyTuple_GET_ITEM(fs->code->co_names, ins->oparg), *level = peek(fs, 1);
    PyObject *fromlist = peek(fs, 0), *mod = NULL, *r = NULL, *modules, *label;
    tr_status st;
    if (V(level)->kind != VK_CONST || V(fromlist)->kind != VK_CONST ||
        !PyLong_Check(V(level)->u.cnst.value)) {
        return cdyn_tx_unsupported(tx, "import of %U (non-constant)", name);
    }
    if (PyLong_AsLong(V(level)->u.cnst.value) != 0) {
        return import_relative(tx, fs, name, V(level)->u.cnst.value, V(fromlist)->u.cnst.value);
    }
    modules = PyImport_GetModuleDict();
    if (PyDict_GetItemWithError(modules, name) == NULL) {
        return PyErr_Occurred() ? TR_ERROR
                                : cdyn_tx_unsupported(tx, "import of %U (not imported yet)", name);
    }
    mod = PyImport_ImportModuleLevelObject(name, fs->globals, NULL, V(fromlist)->u.cnst.value, 0);
    if (mod == NULL) {
        return cdyn_tx_unsupported(tx, "import of %U failed", name);
    }
    /* "sys.modules['name']": never the label of a module's globals dict (inline.c) */
    r = PyModule_Check(mod) ? PyModule_GetNameObject(mod) : NULL;
    label = r != NULL ? PyUnicode_FromFormat("sys.modules[%R]", r) : NULL;
    Py_CLEAR(r);
    PyErr_Clear();
    st = cdyn_tx_wrap_fixed(tx, mod, label ? label : Py_None, &r);
    Py_XDECREF(label);
    Py_DECREF(mod);
    return st == TR_OK ? replace(fs, 2, r) : st;
}

OP(import_from)
{
    PyObject *r = NULL;
    tr_status st = cdyn_v_getattr(tx, peek(fs, 0), PyTuple_GET_ITEM(fs->code->co_names, ins->oparg),
                                  &r);
    return st == TR_OK ? push(fs, r) : st;
}

/* ---- exceptions raised and caught in the traced code (values/exception.c) --------------- */

/* RAISE_VARARGS n: 0 re-raises the exception being handled, 1 raises TOS, 2 TOS1 from TOS. */
OP(raise_varargs)
{
    Py_ssize_t n = PyList_GET_SIZE(tx->exc_info);
    if (ins->oparg == 0) {
        if (n == 0) {
            return cdyn_tx_unsupported(tx, "bare raise with no exception being handled");
        }
        return cdyn_tx_reraise(tx, PyList_GET_ITEM(tx->exc_info, n - 1));
    }
    if (ins->oparg == 2) {
        return cdyn_tx_raise_from(tx, peek(fs, 1), peek(fs, 0));
    }
    return cdyn_tx_raise_value(tx, peek(fs, 0));
}

OP(reraise)
{
    (void)ins;
    return cdyn_tx_reraise(tx, peek(fs, 0));
}

/* CLEANUP_THROW (3.12+, the handler of a yield from that an exception was thrown into):
 * [sub_iter, last_sent, exc]: the exception goes on (a StopIteration, which would end the
 * yield from with its value, is not modelled). */
OP(cleanup_throw)
{
    PyTypeObject *t = cdyn_v_python_type(peek(fs, 0));
    (void)ins;
    if (t == NULL || PyType_IsSubtype(t, (PyTypeObject *)PyExc_StopIteration)) {
        return cdyn_tx_unsupported(tx, "a StopIteration thrown into a yield from");
    }
    return cdyn_tx_reraise(tx, peek(fs, 0));
}

/* PUSH_EXC_INFO: [.., exc] -> [.., previous exception (or None), exc]. */
OP(push_exc_info)
{
    PyObject *exc = peek(fs, 0), *prev;
    Py_ssize_t n = PyList_GET_SIZE(tx->exc_info);
    (void)ins;
    prev = n ? Py_NewRef(PyList_GET_ITEM(tx->exc_info, n - 1)) : cdyn_value_const(Py_None);
    if (prev == NULL || PyList_Append(tx->exc_info, exc) < 0) {
        Py_XDECREF(prev);
        return TR_ERROR;
    }
    fs->stack[fs->sp - 1] = prev;   /* the stack's reference to exc moves up */
    return push(fs, exc);
}

/* POP_EXCEPT: [.., previous] -> [..]; the handled exception is done. */
OP(pop_except)
{
    Py_ssize_t n = PyList_GET_SIZE(tx->exc_info);
    (void)ins;
    if (n == 0) {
        return cdyn_tx_unsupported(tx, "POP_EXCEPT with no exception being handled");
    }
    if (PyList_SetSlice(tx->exc_info, n - 1, n, NULL) < 0) {
        return TR_ERROR;
    }
    drop(fs, 1);
    return TR_OK;
}

/* CHECK_EXC_MATCH: [.., exc, type] -> [.., exc, exc matches type]. */
OP(check_exc_match)
{
    int r = cdyn_exc_matches(peek(fs, 1), peek(fs, 0));
    (void)ins;
    if (r < 0) {
        return cdyn_tx_unsupported(tx, "except clause over %S", peek(fs, 0));
    }
    return replace(fs, 1, cdyn_value_bool(r));
}

/* WITH_EXCEPT_START: [exit, lasti, prev, exc] -> [.., exit(type(exc), exc, None)]. */
OP(with_except_start)
{
    PyObject *exc = peek(fs, 0), *args[3] = {NULL, exc, NULL}, *res = NULL;
    tr_status st = TR_ERROR;
    PyTypeObject *t = cdyn_v_python_type(exc);
    (void)ins;
    args[0] = t ? cdyn_value_obj(VK_EXCTYPE, (PyObject *)t, NULL) : NULL;
    args[2] = cdyn_value_const(Py_None);
    if (args[0] != NULL && args[2] != NULL) {
        st = cdyn_v_call(tx, fs, peek(fs, 3), args, 3, NULL, &res);
    }
    Py_XDECREF(args[0]);
    Py_XDECREF(args[2]);
    return st == TR_OK ? push(fs, res) : st;
}

/* The traced code raised tx->exc at instruction ins of fs: unwind to its handler in fs
 * (stack cut to the handler's depth, lasti, the exception pushed), or TR_EXCEPTION when fs
 * has none (the caller's frame handles it). */
static tr_status
unwind(cdyn_tx *tx, cdyn_fs *fs, const cdyn_instr *ins)
{
    tr_status st;
    if (ins->exc_handler < 0) {
        return TR_EXCEPTION;   /* kw_names kept: the call may become a graph break */
    }
    Py_CLEAR(fs->kw_names);
    while (fs->sp > ins->exc_depth) {
        Py_DECREF(pop(fs));
    }
    if (ins->exc_lasti && (st = push(fs, cdyn_value_const_steal(PyLong_FromLong(ins->offset)))) !=
                              TR_OK) {
        return st;
    }
    st = push(fs, tx->exc);
    tx->exc = NULL;
    Py_CLEAR(tx->reason);   /* caught: not a reason for anything */
    fs->pc = ins->exc_handler;
    return st;
}

tr_status
cdyn_tx_throw_at(cdyn_tx *tx, cdyn_fs *fs, Py_ssize_t pc)
{
    assert(pc >= 0 && pc < fs->instrs.len && tx->exc != NULL);
    return unwind(tx, fs, &fs->instrs.items[pc]);
}

/* YIELD_VALUE / RETURN_GENERATOR in a generator's frame (values/generator.c): suspend it,
 * with the yielded value (None for the RETURN_GENERATOR of its prologue) in retval. */
OP(yield_value)
{
    PyObject *v = NULL;
    if (fs->is_top) {
        return cdyn_tx_unsupported(tx, "%s in a traced frame", cdyn_opname(ins->opcode));
    }
    v = ins->opcode == YIELD_VALUE ? pop(fs) : cdyn_value_const(Py_None);
    if (v == NULL) {
        return TR_ERROR;
    }
    fs->retval = v;
    fs->yielded = 1;
    return TR_OK;
}

/* SEND (yield from): [receiver, None] -> [receiver, item], or [return value] and a jump
 * when the receiver is exhausted. */
OP(send)
{
    PyObject *item = NULL, *rv = NULL;
    tr_status st;
    if (!cdyn_v_is_none(peek(fs, 0))) {
        return cdyn_tx_unsupported(tx, "send() of a value to a generator");
    }
    st = cdyn_v_next(tx, peek(fs, 1), &item);
    if (st != TR_OK) {
        return st;
    }
    if (item != NULL) {
        return replace(fs, 1, item);
    }
    rv = cdyn_generator_retval(peek(fs, 1));
    rv = rv != NULL ? Py_NewRef(rv) : cdyn_value_const(Py_None);
    if (rv == NULL) {
        return TR_ERROR;
    }
    fs->pc = ins->target;
    /* 3.11: [receiver, value] -> [result]; since 3.12 the receiver stays for END_SEND */
    return replace(fs, CDYN_SEND_KEEPS_RECEIVER ? 1 : 2, rv);
}

/* END_SEND (3.12+): [receiver, value] -> [value] */
OP(end_send)
{
    PyObject *v = pop(fs);
    UNUSED_OP_ARGS();
    drop(fs, 1);
    return push(fs, v);
}

/* GET_YIELD_FROM_ITER: iter(TOS), generators kept as they are. */
OP(get_yield_from_iter)
{
    if (V(peek(fs, 0))->kind == VK_GENERATOR) {
        UNUSED_OP_ARGS();
        return TR_OK;
    }
    return op_get_iter(tx, fs, ins);
}

static op_fn op_table[CDYN_NOPS];

static void
op_table_init(void)
{
    static const struct { int opcode; op_fn fn; } ops[] = {
        {NOP, op_nop}, {RESUME, op_nop}, {PRECALL, op_nop}, {EXTENDED_ARG, op_nop},
        {CACHE, op_nop}, {COPY_FREE_VARS, op_nop}, {POP_TOP, op_pop_top},
        {PUSH_NULL, op_push_null}, {COPY, op_copy}, {SWAP, op_swap}, {KW_NAMES, op_kw_names},
        {LOAD_CONST, op_load_const}, {LOAD_FAST, op_load_fast}, {STORE_FAST, op_store_fast},
        {DELETE_FAST, op_delete_fast}, {MAKE_CELL, op_make_cell},
        {LOAD_CLOSURE, op_load_closure}, {LOAD_DEREF, op_load_deref},
        {STORE_DEREF, op_store_deref}, {LOAD_GLOBAL, op_load_global},
        {LOAD_ATTR, op_load_attr}, {LOAD_METHOD, op_load_attr}, {STORE_ATTR, op_store_attr},
        {DELETE_ATTR, op_delete_attr},
        {STORE_GLOBAL, op_store_global}, {BUILD_TUPLE, op_build_seq},
        {BUILD_LIST, op_build_seq}, {LIST_TO_TUPLE, op_list_to_tuple},
        {LIST_APPEND, op_list_add}, {LIST_EXTEND, op_list_add}, {BUILD_MAP, op_build_map},
        {BUILD_CONST_KEY_MAP, op_build_map}, {MAP_ADD, op_map_add},
        {DICT_MERGE, op_dict_update}, {DICT_UPDATE, op_dict_update},
        {BUILD_SET, op_build_set}, {SET_ADD, op_set_add}, {SET_UPDATE, op_set_add},
        {BUILD_SLICE, op_build_slice}, {BUILD_STRING, op_build_string},
        {FORMAT_VALUE, op_format_value}, {UNPACK_SEQUENCE, op_unpack_sequence},
        {UNPACK_EX, op_unpack_ex}, {STORE_SUBSCR, op_store_subscr},
        {DELETE_SUBSCR, op_delete_subscr}, {BINARY_SUBSCR, op_binary}, {BINARY_OP, op_binary},
        {COMPARE_OP, op_binary}, {UNARY_NEGATIVE, op_unary}, {UNARY_POSITIVE, op_unary},
        {UNARY_INVERT, op_unary}, {UNARY_NOT, op_unary}, {IS_OP, op_is_contains},
        {CONTAINS_OP, op_is_contains}, {GET_ITER, op_get_iter}, {FOR_ITER, op_for_iter},
        {JUMP_FORWARD, op_jump}, {JUMP_BACKWARD, op_jump},
        {JUMP_BACKWARD_NO_INTERRUPT, op_jump}, {POP_JUMP_IF_FALSE, op_pop_jump_if},
        {POP_JUMP_IF_TRUE, op_pop_jump_if}, {POP_JUMP_IF_NONE, op_pop_jump_if_none},
        {POP_JUMP_IF_NOT_NONE, op_pop_jump_if_none},
        {JUMP_IF_FALSE_OR_POP, op_jump_if_or_pop}, {JUMP_IF_TRUE_OR_POP, op_jump_if_or_pop},
        {BEFORE_WITH, op_before_with}, {MAKE_FUNCTION, op_make_function}, {CALL, op_call},
        {CALL_FUNCTION_EX, op_call_function_ex}, {RETURN_VALUE, op_return_value},
        {LOAD_BUILD_CLASS, op_load_builtin_obj}, {LOAD_ASSERTION_ERROR, op_load_builtin_obj},
        {IMPORT_NAME, op_import_name}, {IMPORT_FROM, op_import_from},
        {RAISE_VARARGS, op_raise_varargs}, {RERAISE, op_reraise},
        {PUSH_EXC_INFO, op_push_exc_info}, {POP_EXCEPT, op_pop_except},
        {CHECK_EXC_MATCH, op_check_exc_match}, {WITH_EXCEPT_START, op_with_except_start},
        {YIELD_VALUE, op_yield_value}, {RETURN_GENERATOR, op_yield_value}, {SEND, op_send},
        {GET_YIELD_FROM_ITER, op_get_yield_from_iter},
        {MATCH_MAPPING, op_match_kind}, {MATCH_SEQUENCE, op_match_kind}, {GET_LEN, op_get_len},
        {MATCH_CLASS, op_match_call}, {MATCH_KEYS, op_match_call},
        /* 3.12+ */
        {RETURN_CONST, op_return_const}, {LOAD_FAST_CHECK, op_load_fast},
        {LOAD_FAST_AND_CLEAR, op_load_fast_and_clear}, {END_FOR, op_end_for},
        {BINARY_SLICE, op_binary_slice}, {STORE_SLICE, op_store_slice},
        {CALL_INTRINSIC_1, op_call_intrinsic_1}, {LOAD_SUPER_ATTR, op_load_super_attr},
        {END_SEND, op_end_send}, {CLEANUP_THROW, op_cleanup_throw},
        /* 3.13 */
        {TO_BOOL, op_nop}, {CONVERT_VALUE, op_format_313}, {FORMAT_SIMPLE, op_format_313},
        {FORMAT_WITH_SPEC, op_format_313},
    };
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        op_table[ops[i].opcode] = ops[i].fn;
    }
}

/* ---- graph breaks ---------------------------------------------------------------------- */

/* Line of instruction index pc of fs (or the first line). */
static int
instr_line(cdyn_fs *fs, Py_ssize_t pc)
{
    int line = fs->instrs.items[pc].lineno;
    return line >= 0 ? line : fs->code->co_firstlineno;
}

/* The kind of graph break an unsupported instruction of the top frame becomes, or BRK_NONE
 * when it cannot be run by Python in the generated code (it uses local slots or jumps in
 * a way a resume function cannot continue from). */
static brk_kind
break_kind_of(const cdyn_instr *ins)
{
    switch (ins->opcode) {
    case POP_JUMP_IF_FALSE: case POP_JUMP_IF_TRUE:
    case JUMP_IF_FALSE_OR_POP: case JUMP_IF_TRUE_OR_POP:
        return BRK_JUMP;
    case CALL:
        return BRK_CALL;
    case CALL_FUNCTION_EX:
        return BRK_CALL_EX;
    case FOR_ITER:
        return BRK_FOR_ITER;
    default:
        return cdyn_break_shape(ins, NULL) ? BRK_INSTR : BRK_NONE;
    }
}

/* Turn the pending unsupported reason into a graph break at instruction pc of the top
 * frame (stack intact), or keep it unsupported when that is impossible. A break inside a
 * loop is a break like any other (torch._dynamo skips the frame there): its resume
 * functions bounce through a trampoline (resume.h), one iteration per call; with
 * cdynamo.config.graph_break_in_loops off the frame is skipped, as torch._dynamo. */
static tr_status
begin_break(cdyn_tx *tx, cdyn_fs *fs, Py_ssize_t pc)
{
    const cdyn_instr *ins = &fs->instrs.items[pc];
    brk_kind kind = break_kind_of(ins);
    PyObject *r;
    if (kind == BRK_NONE) {
        return TR_UNSUPPORTED;
    }
    if (PyList_GET_SIZE(tx->open_modes) > 0) {
        /* the open autocast blocks are rebuilt when they are all the top frame's */
        PyObject *exits = cdyn_ctx_open_autocast_exits(tx, fs), *msg = NULL;
        int ok = exits != NULL && exits != Py_None;
        if (exits == NULL) {
            return TR_ERROR;
        }
        Py_DECREF(exits);
        if (!ok) {
            msg = PyUnicode_FromFormat("graph break inside torch.autocast / inference_mode (%U)",
                                       tx->reason ? tx->reason : Py_None);
            if (msg == NULL) {
                return TR_ERROR;
            }
            Py_XSETREF(tx->reason, msg);
            return TR_UNSUPPORTED;
        }
    }
    if (PyList_GET_SIZE(tx->exc_info) > 0) {
        /* the resume function would run the rest of the handler with no exception being
           handled: a bare `raise`, sys.exc_info(), logging.exception() and the implicit
           __context__ of a new exception would differ from eager */
        PyObject *msg = PyUnicode_FromFormat("graph break inside an exception handler (%U)",
                                             tx->reason ? tx->reason : Py_None);
        if (msg == NULL) {
            return TR_ERROR;
        }
        Py_XSETREF(tx->reason, msg);
        return TR_UNSUPPORTED;
    }
    if (cdyn_in_loop(&fs->instrs, pc)) {
        int on = cdyn_config_bool("graph_break_in_loops");
        PyObject *msg = on ? NULL : PyUnicode_FromFormat("graph break in a for/while loop, "
                                                         "skipping the frame (%U)",
                                                         tx->reason ? tx->reason : Py_None);
        if (on < 0 || (!on && msg == NULL)) {
            return TR_ERROR;
        }
        if (!on) {
            Py_XSETREF(tx->reason, msg);
            return TR_UNSUPPORTED;
        }
    }
    tx->break_kind = kind;
    tx->break_pc = pc;
    tx->break_in_loop = cdyn_in_loop(&fs->instrs, pc);
    tx->break_arg = kind == BRK_CALL ? fs->call_n : ins->oparg;
    Py_XSETREF(tx->break_kwnames, kind == BRK_CALL ? Py_XNewRef(fs->kw_names) : NULL);
    r = PyObject_CallMethod(tx->glue, "record_break", "OOOi", tx->reason ? tx->reason : Py_None,
                            fs->code->co_qualname, fs->code->co_filename, instr_line(fs, pc));
    if (r == NULL) {
        return TR_ERROR;
    }
    Py_DECREF(r);
    return TR_BREAK;
}

/* ---- the interpreter loop ---------------------------------------------------------------- */

tr_status
cdyn_tx_run(cdyn_tx *tx, cdyn_fs *fs)
{
    while (fs->retval == NULL) {
        const cdyn_instr *ins;
        op_fn handler;
        cdyn_ckpt ck;
        tr_status st;
        if (fs->pc < 0 || fs->pc >= fs->instrs.len) {
            return cdyn_tx_unsupported(tx, "ran off the end of the code");
        }
        if (++tx->steps > MAX_STEPS) {
            return cdyn_tx_unsupported(tx, "trace too long (more than %d instructions)",
                                       MAX_STEPS);
        }
        ins = &fs->instrs.items[fs->pc++];
        tx->cur_fs = fs;
        handler = op_table[ins->opcode];
        if (fs->is_top) {
            cdyn_undo_step(tx);
            cdyn_tx_ckpt_take(tx, &ck);
        }
        st = handler != NULL ? handler(tx, fs, ins)
                             : cdyn_tx_unsupported(tx, "unsupported opcode %s",
                                                   cdyn_opname(ins->opcode));
        if (st == TR_OK && tx->n_gen_in_try > 0) {   /* generators dropped by it */
            st = cdyn_generator_release_dropped(tx, fs);
        }
        if (st == TR_EXCEPTION) {
            st = unwind(tx, fs, ins);
            if (st == TR_EXCEPTION && fs->is_top) {
                /* nothing traced catches it: Python raises it at this instruction */
                Py_CLEAR(tx->exc);
                st = TR_UNSUPPORTED;
            }
        }
        if (st == TR_UNSUPPORTED && fs->is_top) {
            st = cdyn_tx_ckpt_restore(tx, &ck);
            if (st == TR_OK) {
                st = begin_break(tx, fs, fs->pc - 1);
            }
        }
        if (fs->is_top) {
            cdyn_tx_ckpt_clear(&ck);
        }
        if (st != TR_OK) {
            return st;
        }
    }
    return TR_OK;
}

/* ---- entry point --------------------------------------------------------------------------- */

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
    Py_CLEAR(tx->last_node);
    cdyn_tx_exit_modes(tx, 0);
    Py_CLEAR(tx->open_modes);
    Py_CLEAR(tx->param_overrides);
    Py_CLEAR(tx->exc);
    Py_CLEAR(tx->exc_info);
    Py_CLEAR(tx->reason);
    Py_CLEAR(tx->break_kwnames);
    Py_CLEAR(tx->effects);
    Py_CLEAR(tx->regions);
    Py_CLEAR(tx->stored_globals);
    Py_CLEAR(tx->resume_codes);
    Py_CLEAR(tx->undo);
    if (tx->cyclic != NULL) {   /* break the cycles through cells and generator frames */
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tx->cyclic); i++) {
            cdyn_value *v = V(PyList_GET_ITEM(tx->cyclic, i));
            for (int k = 0; k < CDYN_VREFS; k++) {
                Py_CLEAR(v->u.ref[k]);
            }
        }
        Py_CLEAR(tx->cyclic);
    }
    cdyn_sym_clear(tx);
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

/* torch's saved-tensor hooks (torch.autograd.graph.saved_tensors_hooks) marked as tracing
 * (on: 1) or not (0), as torch._dynamo marks them while it runs fake tensors: autograd then
 * does not call the user's pack hook on the fake tensors of a trace, and the hook runs once,
 * when the compiled graph runs, as in eager. Returns the previous mark (0 / 1), or -1 with
 * an exception. Keeps a pending exception when restoring (on is the previous mark). */
static int
set_saved_hooks_tracing(int on, int restoring)
{
    PyObject *et = NULL, *ev = NULL, *tb = NULL, *r;
    int prev;
    if (restoring) {
        PyErr_Fetch(&et, &ev, &tb);
    }
    r = PyObject_CallOneArg(cdyn_G.saved_hooks_set_tracing, on ? Py_True : Py_False);
    prev = r == NULL ? -1 : r == Py_True;
    Py_XDECREF(r);
    if (restoring) {
        PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
    return prev;
}

/* Set up tx and the top frame state fs for frame. 0 / -1. */
static int
tx_open(cdyn_tx *tx, cdyn_fs *fs, cdyn_frame *frame, PyObject *options)
{
    PyCodeObject *co = cdyn_frame_code(frame);
    PyObject *pair = NULL;
    int state;
    memset(tx, 0, sizeof(*tx));
    memset(fs, 0, sizeof(*fs));
    tx->options = options;
    tx->frame = frame;
    tx->code = co;
    tx->glue = Py_NewRef(cdyn_G.glue);
    state = cdyn_guards_global_state();
    if (state < 0) {
        return -1;
    }
    tx->grad_enabled = tx->grad_enabled_at_start = state & 1;
    pair = PyObject_CallMethod(tx->glue, "new_trace", NULL);
    if (pair == NULL) {
        return -1;
    }
    tx->graph = Py_NewRef(PyTuple_GET_ITEM(pair, 0));
    tx->fake_mode = Py_NewRef(PyTuple_GET_ITEM(pair, 1));
    tx->shapes = Py_NewRef(PyTuple_GET_ITEM(pair, 2));
    Py_DECREF(pair);
    if (cdyn_sym_open(tx) < 0) {
        return -1;
    }
    tx->root = PyDict_New();
    tx->input_sources = PyList_New(0);
    tx->input_values = PyList_New(0);
    tx->by_source = PyDict_New();
    tx->by_id = PyDict_New();
    tx->effects = PyList_New(0);
    tx->regions = PyList_New(0);
    tx->resume_codes = PyList_New(0);
    tx->open_modes = PyList_New(0);
    tx->exc_info = PyList_New(0);
    tx->undo = PyList_New(0);
    tx->cyclic = PyList_New(0);
    tx->guards = cdyn_guards_new();
    if (!tx->root || !tx->input_sources || !tx->input_values || !tx->by_source || !tx->by_id ||
        !tx->guards || !tx->effects || !tx->regions || !tx->resume_codes || !tx->open_modes || !tx->exc_info ||
        !tx->undo || !tx->cyclic || cdyn_guards_add_grad_mode(tx->guards, state) < 0) {
        return -1;
    }
    if (cdyn_fs_init(fs, co, cdyn_frame_globals(frame), cdyn_frame_builtins(frame)) < 0) {
        return -1;
    }
    fs->is_top = 1;
    fs->top_globals = 1;
    /* Free variables of the top frame: lazily wrapped real cells with closure sources. */
    if (co->co_nfreevars > 0) {
        PyObject *closure = ((PyFunctionObject *)cdyn_frame_func(frame))->func_closure;
        int first = co->co_nlocalsplus - co->co_nfreevars;
        for (int k = 0; k < co->co_nfreevars; k++) {
            PyObject *name = localsplus_name(co, first + k), *cell = NULL;
            PyObject *src = cdyn_source_closure(k, name), *csrc = cdyn_source_cell(k, name);
            tr_status st = src && csrc ? cdyn_cell_of_real(tx, PyTuple_GET_ITEM(closure, k), csrc,
                                                           src, &cell)
                                       : TR_ERROR;
            Py_XDECREF(src);
            Py_XDECREF(csrc);
            if (st != TR_OK) {
                if (st != TR_ERROR) {
                    PyErr_SetString(PyExc_SystemError, "cdynamo: closure cell not wrapped");
                }
                return -1;
            }
            fs->locals[first + k] = cell;
        }
    }
    return 0;
}

/* 1 when the frame is compiled with fullgraph=True, 0 when not, -1 on error. */
static int
fullgraph_on(cdyn_tx *tx)
{
    PyObject *fullgraph = PyObject_GetAttrString(tx->options, "fullgraph");
    int on;
    if (fullgraph == NULL) {
        return -1;
    }
    on = PyObject_IsTrue(fullgraph);
    Py_DECREF(fullgraph);
    return on;
}

/* fullgraph=True or error_on_graph_break: raise the error naming the reason and the source
 * line(s). Returns 1 when it raised (a user-facing error), 0 when both are off, -1 on an
 * internal error. */
static int
fullgraph_check(cdyn_tx *tx, cdyn_fs *fs, tr_status st)
{
    PyObject *r = NULL, *active = NULL;
    Py_ssize_t pc = st == TR_BREAK ? tx->break_pc : fs->pc - 1;
    int on = fullgraph_on(tx);
    int eogb = tx->reason != NULL ? tx->reason_eogb : tx->eogb;
    if (on == 0 && eogb != 0) {
        on = eogb == 2 ? 2 : 0;   /* an error_on_graph_break block of the trace */
    }
    else if (on == 0) {
        /* torch._dynamo.error_on_graph_break(True) / cdynamo.config.error_on_graph_break */
        active = PyObject_CallMethod(tx->glue, "error_on_graph_break_active", NULL);
        on = active != NULL ? PyObject_IsTrue(active) : -1;
        Py_XDECREF(active);
        on = on > 0 ? 2 : on;
    }
    if (on <= 0) {
        return on;
    }
    if (pc < 0 || pc >= fs->instrs.len) {
        pc = 0;
    }
    r = PyObject_CallMethod(tx->glue, "fullgraph_error", "OOOiOii", tx->reason ? tx->reason : Py_None,
                            tx->code->co_qualname, tx->code->co_filename, instr_line(fs, pc),
                            tx->reason_file ? tx->reason_file : Py_None, tx->reason_line,
                            on == 2);
    Py_XDECREF(r);
    return 1;
}

/* Record for explain() that the frame runs unmodified (the glue logs it at INFO): named by
 * the frame's own location, the line of the instruction it stopped at (a call whose
 * inlining failed: the call site), with where the reason arose when that is elsewhere (inside
 * an inlined call). */
static void
note_unmodified(cdyn_tx *tx, cdyn_fs *fs)
{
    PyCodeObject *co = tx->code;
    Py_ssize_t pc = tx->break_kind != BRK_NONE ? tx->break_pc : fs->pc - 1;
    int line = fs->instrs.len > 0 && pc >= 0 && pc < fs->instrs.len ? instr_line(fs, pc)
                                                                      : co->co_firstlineno;
    PyObject *r;
    r = PyObject_CallMethod(tx->glue, "record_unmodified", "OOOiOi",
                            tx->reason ? tx->reason : Py_None, co->co_qualname, co->co_filename,
                            line, tx->reason_file ? tx->reason_file : Py_None, tx->reason_line);
    Py_XDECREF(r);
    PyErr_Clear();
}

/* An exception raised while translating: the user's (fullgraph error, backend failure,
 * KeyboardInterrupt, MemoryError) stays raised (returns -1); an internal one is logged at
 * WARNING and cleared, and the frame runs unmodified (returns 0), unless
 * cdynamo.config.raise_internal_errors is set. */
static int
internal_error(cdyn_tx *tx, cdyn_fs *fs, int user_error)
{
    PyObject *et, *ev, *tb;
    if (user_error || cdyn_raise_internal_errors ||
        PyErr_ExceptionMatches(PyExc_KeyboardInterrupt) ||
        PyErr_ExceptionMatches(PyExc_SystemExit) || PyErr_ExceptionMatches(PyExc_MemoryError) ||
        PyErr_ExceptionMatches(cdyn_G.user_errors) || cdyn_sym_user_error()) {
        return -1;
    }
    PyErr_Fetch(&et, &ev, &tb);
    PyErr_NormalizeException(&et, &ev, &tb);
    cdyn_log(30, "internal error while translating %U (%U:%d), running it unmodified: %s: %S",
             tx->code->co_qualname, tx->code->co_filename, tx->code->co_firstlineno,
             et ? ((PyTypeObject *)et)->tp_name : "?", ev ? ev : Py_None);
    Py_XSETREF(tx->reason, PyUnicode_FromFormat("internal error (see the WARNING log): %s: %S",
                                                et ? ((PyTypeObject *)et)->tp_name : "?",
                                                ev ? ev : Py_None));
    Py_XDECREF(et);
    Py_XDECREF(ev);
    Py_XDECREF(tb);
    PyErr_Clear();
    if (tx->options != NULL && fs->instrs.len > 0 && fullgraph_check(tx, fs, TR_UNSUPPORTED)) {
        /* fullgraph=True: the frame may not run unmodified either */
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_SystemError, "cdynamo: fullgraph check failed");
        }
        return -1;
    }
    note_unmodified(tx, fs);
    return 0;
}

/* A frame called while a torch.func transform runs (the function vmap/grad calls, in
 * eager) sees wrapped tensors: it runs unmodified (TR_UNSUPPORTED), TR_OK otherwise. */
static tr_status
functorch_check(cdyn_tx *tx)
{
    PyObject *r = PyObject_CallMethod(tx->glue, "functorch_active", NULL);
    int active = r == Py_True;
    Py_XDECREF(r);
    if (r == NULL) {
        return TR_ERROR;
    }
    return active ? cdyn_tx_unsupported(tx, "called inside a running torch.func transform "
                                            "(vmap/grad)")
                  : TR_OK;
}

/* The backend's AOTAutograd could not turn the float inputs named by the pending
 * cdynamo._glue.RestartTrace into tensors (torch's TensorifyScalarRestartAnalysis): they are
 * marked static in the code's frame state (cdyn_sym_float_input reads it) and the error is
 * cleared. 1 when it was that error, 0 otherwise (the error stays), -1 on a new error. */
static int
note_restart(cdyn_tx *tx)
{
    PyObject *et, *ev, *tb, *srcs;
    int rc = 1;
    if (tx->frame_state == NULL || !PyErr_ExceptionMatches(cdyn_G.restart_trace)) {
        return 0;
    }
    PyErr_Fetch(&et, &ev, &tb);
    PyErr_NormalizeException(&et, &ev, &tb);
    srcs = ev ? PyObject_GetAttrString(ev, "sources") : NULL;
    if (srcs == NULL || !PyTuple_Check(srcs)) {
        rc = -1;
    }
    for (Py_ssize_t i = 0; rc == 1 && i < PyTuple_GET_SIZE(srcs); i++) {
        if (cdyn_sym_mark_float_static(tx, PyTuple_GET_ITEM(srcs, i)) < 0) {
            rc = -1;
        }
    }
    Py_XDECREF(srcs);
    Py_XDECREF(et);
    Py_XDECREF(ev);
    Py_XDECREF(tb);
    if (rc < 0 && !PyErr_Occurred()) {
        PyErr_SetString(PyExc_SystemError, "cdynamo: bad RestartTrace");
    }
    return rc;
}

static int translate_once(cdyn_frame *frame, PyObject *options,
                          cdyn_translation *out, int *restart);

/* 1 when code has a cache entry. */
static int
has_entries(PyCodeObject *code)
{
    cdyn_extra *x = cdyn_cache_get(code);
    return x != NULL && x->nentries > 0;
}

int
cdyn_translate_frame(cdyn_frame *frame, PyObject *options,
                     cdyn_translation *out)
{
    /* a few restarts: each marks at least one more float input static */
    for (int attempt = 0;; attempt++) {
        int restart = 0;
        int rc = translate_once(frame, options, out, attempt < 4 ? &restart : NULL);
        if (!restart) {
            return rc;
        }
        cdyn_log(20, "restarting the trace of %U: float inputs made static",
                 cdyn_frame_code(frame)->co_qualname);
    }
}

/* torch.compile(options={"guard_filter_fn": fn}): the compiled function's filter applied
 * to the guards of tx (cdyn_guards_filter) with the values of frame. 0 or -1. */
static int
filter_guards(cdyn_tx *tx, cdyn_frame *frame)
{
    PyObject *fn = PyObject_GetAttrString(tx->options, "guard_filter_fn");
    int rc = fn == NULL ? -1 : 0;
    if (fn != NULL && fn != Py_None) {
        rc = cdyn_guards_filter(tx->guards, fn, cdyn_frame_slots(frame), cdyn_frame_func(frame),
                                cdyn_frame_globals(frame), cdyn_frame_builtins(frame));
    }
    Py_XDECREF(fn);
    return rc;
}

/* One trace of the frame; *restart set (when restart is not NULL) when the trace must be
 * made again (note_restart). */
static int
translate_once(cdyn_frame *frame, PyObject *options, cdyn_translation *out,
               int *restart)
{
    cdyn_tx tx;
    cdyn_fs fs;
    PyObject *code_out = NULL;
    tr_status st = TR_ERROR;
    int rc = -1, user_error = 0, hooks_tracing;

    out->code = NULL;
    out->guards = NULL;
    out->no_ops = 0;
    hooks_tracing = set_saved_hooks_tracing(1, 0);
    if (hooks_tracing < 0) {
        return -1;
    }
    if (tx_open(&tx, &fs, frame, options) < 0) {
        goto done;
    }
    cdyn_log(20, "start tracing %U %U:%d", tx.code->co_qualname, tx.code->co_filename,
             tx.code->co_firstlineno);
    st = functorch_check(&tx);
    if (st == TR_OK) {
        st = cdyn_tx_run(&tx, &fs);
    }
    if (st == TR_UNSUPPORTED || st == TR_BREAK) {
        int fg = fullgraph_check(&tx, &fs, st);
        if (fg != 0) {
            user_error = fg > 0;
            goto done;
        }
    }
    if (st == TR_OK && tx.n_call_nodes == 0 && !has_entries(tx.code)) {
        /* as torch._dynamo: a frame that returns without one operation in its graph runs as
           it is, and from then on is not traced again (unless fullgraph=True asks for its
           graph). A code with cache entries keeps them and gets one more, without a graph
           (torch._dynamo would stop running the compiled ones) */
        int fg = fullgraph_on(&tx);
        if (fg < 0) {
            goto done;
        }
        if (fg == 0) {
            cdyn_log(20, "skipping %U (%U:%d): no operation traced, it runs as it is",
                     tx.code->co_qualname, tx.code->co_filename, tx.code->co_firstlineno);
            out->no_ops = 1;
            rc = 0;
            goto done;
        }
        tx.output_bare_input = 1;
    }
    if (st == TR_OK) {
        st = cdyn_tx_finish(&tx, fs.retval, &code_out);
    }
    else if (st == TR_BREAK) {
        /* the break is recorded: what makes the frame run unmodified now, if anything, is
           the reason of its code generation */
        Py_CLEAR(tx.reason);
        tx.reason_file = NULL;
        tx.reason_line = 0;
        st = cdyn_tx_finish_break(&tx, &fs, &code_out);
    }
    if (st == TR_UNSUPPORTED) {
        /* the code generation gave up (what is returned or live at the break cannot be
           rebuilt): the frame would run unmodified, which fullgraph=True forbids too */
        int fg = fullgraph_check(&tx, &fs, st);
        if (fg != 0) {
            user_error = fg > 0;
            goto done;
        }
    }
    if (st == TR_ERROR) {
        goto done;
    }
    rc = 0;
    if (st == TR_UNSUPPORTED) {
        note_unmodified(&tx, &fs);
        goto done;
    }
    if (filter_guards(&tx, frame) < 0) {
        rc = -1;
        user_error = 1;   /* the user's guard_filter_fn raised: the call raises it */
        goto done;
    }
    out->code = code_out;
    code_out = NULL;
    out->guards = tx.guards;
    tx.guards = NULL;
done:
    if (rc < 0 && restart != NULL) {
        int r = note_restart(&tx);
        if (r > 0) {
            *restart = 1;
            rc = 0;
        }
    }
    if (rc < 0) {
        assert(PyErr_Occurred());
        rc = internal_error(&tx, &fs, user_error);
    }
    restore_grad_mode(tx.grad_enabled_at_start);
    set_saved_hooks_tracing(hooks_tracing, 1);
    cdyn_fs_clear(&fs);
    tx_clear(&tx);
    Py_XDECREF(code_out);
    return rc;
}

/* has_tensor of cdyn_frame_has_torch, depth-limited (containers nested deeper count as
 * holding none). */
static int
holds_torch(PyObject *obj, int depth)
{
    if (obj == NULL || depth > 8) {
        return 0;
    }
    if (PyObject_TypeCheck(obj, (PyTypeObject *)cdyn_G.torch_tensor_type) ||
        PyObject_TypeCheck(obj, (PyTypeObject *)cdyn_G.nn_module_type) ||
        (PyType_Check(obj) &&
         PyType_IsSubtype((PyTypeObject *)obj, (PyTypeObject *)cdyn_G.nn_module_type))) {
        return 1;
    }
    if (PyList_CheckExact(obj) || PyTuple_Check(obj)) {
        if (PyTuple_Check(obj) && !PyTuple_CheckExact(obj) &&
            !PyObject_HasAttrString(obj, "_fields")) {
            return 0;   /* a tuple subclass other than a named tuple: not looked into */
        }
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(obj); i++) {
            if (holds_torch(PySequence_Fast_GET_ITEM(obj, i), depth + 1)) {
                return 1;
            }
        }
        return 0;
    }
    if (PyDict_CheckExact(obj)) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(obj, &pos, &k, &v)) {
            if (holds_torch(v, depth + 1)) {
                return 1;
            }
        }
    }
    return 0;
}

int
cdyn_frame_has_torch(cdyn_frame *frame)
{
    PyCodeObject *co = cdyn_frame_code(frame);
    PyObject *globals = cdyn_frame_globals(frame), **slots = cdyn_frame_slots(frame);
    int nargs = co->co_argcount + co->co_kwonlyargcount +
                ((co->co_flags & CO_VARARGS) != 0) + ((co->co_flags & CO_VARKEYWORDS) != 0);
    for (Py_ssize_t i = 0; PyDict_Check(globals) && i < PyTuple_GET_SIZE(co->co_names); i++) {
        PyObject *g = PyDict_GetItemWithError(globals, PyTuple_GET_ITEM(co->co_names, i));
        const char *mname = g != NULL && PyModule_Check(g) ? PyModule_GetName(g) : NULL;
        if (mname != NULL && cdyn_startswith(mname, "torch")) {   /* torch or torch.* */
            return 1;
        }
        PyErr_Clear();
    }
    for (int i = 0; i < nargs && i < co->co_nlocalsplus; i++) {
        if (holds_torch(slots[i], 0)) {
            return 1;
        }
    }
    PyErr_Clear();
    return 0;
}

/* ---- init ------------------------------------------------------------------------------- */

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

/* set_raise_internal_errors(flag): internal translation errors raise instead of making
 * the frame run unmodified (cdynamo.config.raise_internal_errors). */
static PyObject *
py_set_raise_internal_errors(PyObject *Py_UNUSED(m), PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0) {
        return NULL;
    }
    cdyn_raise_internal_errors = on;
    Py_RETURN_NONE;
}

PyMethodDef cdyn_translate_methods[] = {
    {"set_raise_internal_errors", py_set_raise_internal_errors, METH_O,
     "set_raise_internal_errors(flag)"},
    {NULL, NULL, 0, NULL},
};

/* Interned strings of cdyn_G; 0 / -1. */
static int
init_strings(void)
{
    static const struct { PyObject **var; const char *text; } strs[] = {
        {&cdyn_G.s_self, "__self__"}, {&cdyn_G.s_closure, "__closure__"},
        {&cdyn_G.s_cell_contents, "cell_contents"}, {&cdyn_G.s_parameters, "_parameters"},
        {&cdyn_G.s_buffers, "_buffers"}, {&cdyn_G.s_modules, "_modules"},
        {&cdyn_G.s_forward, "forward"}, {&cdyn_G.s_module, "__module__"},
        {&cdyn_G.s_placeholder, "placeholder"}, {&cdyn_G.s_create_node, "create_node"},
        {&cdyn_G.s_fake_from_tensor, "fake_from_tensor"}, {&cdyn_G.s_fake_call, "fake_call"},
        {&cdyn_G.s_fake_call_method, "fake_call_method"}, {&cdyn_G.s_set_example, "set_example"},
        {&cdyn_G.s_get_attr, "get_attr"}, {&cdyn_G.s_forward_hooks, "_forward_hooks"},
        {&cdyn_G.s_forward_pre_hooks, "_forward_pre_hooks"}, {&cdyn_G.s_prev, "prev"},
        {&cdyn_G.s_exit, "__exit__"}, {&cdyn_G.s_dynamo_forbidden, "_dynamo_forbidden"},
        {&cdyn_G.s_match_args, "__match_args__"}, {&cdyn_G.s_make, "_make"},
    };
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        if ((*strs[i].var = PyUnicode_InternFromString(strs[i].text)) == NULL) {
            return -1;
        }
    }
    return 0;
}

int
cdyn_translate_init(PyObject *module)
{
    static const char *const binops[13] = {"add", "and_", "floordiv", "lshift", "matmul", "mul",
                                           "mod", "or_", "pow", "rshift", "sub", "truediv",
                                           "xor"};
    static const char *const ibinops[13] = {"iadd", "iand", "ifloordiv", "ilshift", "imatmul",
                                            "imul", "imod", "ior", "ipow", "irshift", "isub",
                                            "itruediv", "ixor"};
    static const char *const cmps[6] = {"lt", "le", "eq", "ne", "gt", "ge"};
    static const struct { PyObject **field; const char *mod, *attr; } imports[] = {
        {&cdyn_G.torch, "torch", NULL}, {&cdyn_G.torch_tensor_type, "torch", "Tensor"},
        {&cdyn_G.torch_size_type, "torch", "Size"}, {&cdyn_G.torch_dtype_type, "torch", "dtype"},
        {&cdyn_G.torch_device_type, "torch", "device"},
        {&cdyn_G.torch_memory_format_type, "torch", "memory_format"},
        {&cdyn_G.torch_layout_type, "torch", "layout"},
        {&cdyn_G.re_pattern_type, "re", "Pattern"}, {&cdyn_G.re_match_type, "re", "Match"},
        {&cdyn_G.nn_module_type, "torch.nn", "Module"},
        {&cdyn_G.nn_parameter_type, "torch.nn", "Parameter"},
        {&cdyn_G.sequential_type, "torch.nn", "Sequential"},
        {&cdyn_G.modulelist_type, "torch.nn", "ModuleList"},
        {&cdyn_G.moduledict_type, "torch.nn", "ModuleDict"},
        {&cdyn_G.fx_graph_type, "torch.fx", "Graph"}, {&cdyn_G.operator_mod, "operator", NULL},
        {&cdyn_G.builtins_mod, "builtins", NULL}, {&cdyn_G.math_mod, "math", NULL},
        {&cdyn_G.glue, "cdynamo._glue", NULL}, {&cdyn_G.getattr_fn, "builtins", "getattr"},
        {&cdyn_G.getitem_fn, "operator", "getitem"}, {&cdyn_G.setitem_fn, "operator", "setitem"},
        {&cdyn_G.set_grad_enabled, "torch._C", "_set_grad_enabled"},
        {&cdyn_G.saved_hooks_set_tracing, "torch._C._autograd", "_saved_tensors_hooks_set_tracing"},
        {&cdyn_G.is_grad_enabled, "torch", "is_grad_enabled"},
        {&cdyn_G.no_grad, "torch", "no_grad"}, {&cdyn_G.enable_grad, "torch", "enable_grad"},
        {&cdyn_G.set_grad_enabled_cls, "torch", "set_grad_enabled"},
        {&cdyn_G.neg, "operator", "neg"}, {&cdyn_G.pos, "operator", "pos"},
        {&cdyn_G.invert, "operator", "invert"}, {&cdyn_G.not_, "operator", "not_"},
        {&cdyn_G.contains, "operator", "contains"},
        {&cdyn_G.grad_mode_exit_type, "cdynamo._glue", "GradModeExit"},
        {&cdyn_G.eogb_exit_type, "cdynamo._glue", "ErrorOnGraphBreakExit"},
        {&cdyn_G.autocast_exit_type, "cdynamo._glue", "AutocastExit"},
        {&cdyn_G.autocast_enter_type, "cdynamo._glue", "AutocastEnter"},
        {&cdyn_G.user_errors, "cdynamo._glue", "USER_ERRORS"},
        {&cdyn_G.restart_trace, "cdynamo._glue", "RestartTrace"},
        {&cdyn_G.enter_autocast, "torch.amp.autocast_mode", "_enter_autocast"},
        {&cdyn_G.exit_autocast, "torch.amp.autocast_mode", "_exit_autocast"},
        {&cdyn_G.enter_inference_mode, "torch.autograd.grad_mode", "_enter_inference_mode"},
        {&cdyn_G.exit_inference_mode, "torch.autograd.grad_mode", "_exit_inference_mode"},
        {&cdyn_G.inference_mode_type, "torch", "inference_mode"},
        {&cdyn_G.inference_exit_type, "cdynamo._glue", "InferenceModeExit"},
        {&cdyn_G.inference_enter_type, "cdynamo._glue", "InferenceModeEnter"},
        {&cdyn_G.sdpa_kernel_fn, "torch.nn.attention", "sdpa_kernel"},
        {&cdyn_G.sdpa_backend_type, "torch.nn.attention", "SDPBackend"},
        {&cdyn_G.sdpa_enter, "cdynamo._glue", "sdpa_kernel_enter"},
        {&cdyn_G.sdpa_exit, "cdynamo._glue", "sdpa_kernel_exit"},
        {&cdyn_G.sdpa_exit_type, "cdynamo._glue", "SdpaKernelExit"},
        {&cdyn_G.sdpa_enter_type, "cdynamo._glue", "SdpaKernelEnter"},
    };
    if (cdyn_value_init(module) < 0 || init_strings() < 0) {
        return -1;
    }
    for (size_t i = 0; i < sizeof(imports) / sizeof(imports[0]); i++) {
        if ((*imports[i].field = import_attr(imports[i].mod, imports[i].attr)) == NULL) {
            return -1;
        }
    }
    for (int i = 0; i < 13; i++) {
        if ((cdyn_G.binop_fns[i] = import_attr("operator", binops[i])) == NULL ||
            (cdyn_G.binop_fns[13 + i] = import_attr("operator", ibinops[i])) == NULL) {
            return -1;
        }
    }
    for (int i = 0; i < 6; i++) {
        if ((cdyn_G.cmp_fns[i] = import_attr("operator", cmps[i])) == NULL) {
            return -1;
        }
    }
    op_table_init();
    static const struct { const char *name; int (*fn)(void); } parts[] = {
        {"user", cdyn_user_init}, {"builtin", cdyn_builtin_init}, {"ctx", cdyn_ctx_init},
        {"torch", cdyn_torch_init}, {"polyfill", cdyn_polyfill_init}, {"hop", cdyn_hop_init},
    };
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        if (parts[i].fn() < 0) {
            if (!PyErr_Occurred()) {   /* an init that failed without saying why */
                PyErr_Format(PyExc_ImportError, "cdynamo._C: initialising the %s family failed",
                             parts[i].name);
            }
            return -1;
        }
    }
    return 0;
}
