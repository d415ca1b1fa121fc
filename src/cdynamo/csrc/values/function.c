/* values/function.c: functions and methods.
 *
 *   FUNCTION  a function made by MAKE_FUNCTION while tracing (a closure, a lambda, a
 *             comprehension's function): code, globals, defaults, closure cells as values;
 *             calls are inlined. Rebuilt (a return, a graph break) by MAKE_FUNCTION over
 *             new cells holding the cells' contents (closures share their cells).
 *   USERFN    a real Python function (a global, an attribute): inlined, its closure cells
 *             read (and guarded) through the function's source. A closure, or a function
 *             passed in, is guarded by its __code__ (plus the cells, defaults and globals
 *             its trace reads), so a closure built anew on every call reuses the trace.
 *   METHOD    a method bound to a value: with u.method.func, that Python function inlined
 *             with self; without, the method name called on self's family (list.append,
 *             Tensor.add, ...).
 *   PARTIAL   functools.partial(func, *args, **kw): calls go to func with the arguments
 *             merged; made in the trace or read from the frame (guarded through its
 *             .func/.args/.keywords); rebuilt as functools.partial(func, *args, **kw).
 *   WRAPPER   a functools.lru_cache / functools.cache wrapper: calls inline __wrapped__
 *             (the cache is bypassed while tracing, as torch._dynamo does).
 * A function or wrapper marked by assume_constant_result is called while tracing instead
 * (see "assume_constant_result" below).
 */
#include "../tx.h"
#include "../codegen.h"
#include "../trace_rules.h"

static PyObject *partial_type;     /* functools.partial */
static PyObject *cache_wrapper_type;   /* functools._lru_cache_wrapper */

/* Look the functools types up once; 0 / -1. */
static int
functools_types(void)
{
    PyObject *ft = NULL;
    if (partial_type != NULL) {
        return 0;
    }
    ft = PyImport_ImportModule("functools");
    if (ft == NULL) {
        return -1;
    }
    partial_type = PyObject_GetAttrString(ft, "partial");
    cache_wrapper_type = PyObject_GetAttrString(ft, "_lru_cache_wrapper");
    Py_DECREF(ft);
    if (partial_type == NULL || cache_wrapper_type == NULL) {
        Py_CLEAR(partial_type);
        Py_CLEAR(cache_wrapper_type);
        return -1;
    }
    return 0;
}

int
cdyn_is_partial(PyObject *obj)
{
    if (functools_types() < 0) {
        PyErr_Clear();
        return 0;
    }
    return (PyObject *)Py_TYPE(obj) == partial_type;
}

int
cdyn_is_cache_wrapper(PyObject *obj)
{
    if (functools_types() < 0) {
        PyErr_Clear();
        return 0;
    }
    return (PyObject *)Py_TYPE(obj) == cache_wrapper_type;
}

/* The parts of a FUNCTION: defaults (list of values or NULL), kwdefaults (dict name ->
 * value or NULL), closure cells (list of CELL values or NULL). New refs. */
static tr_status
function_parts(cdyn_tx *tx, PyObject *fn, PyObject **defaults, PyObject **kwdefaults,
               PyObject **cells)
{
    PyObject *parts = V(fn)->u.func.parts;
    PyObject *dv = PyList_GET_ITEM(parts, 0), *cv = PyList_GET_ITEM(parts, 1);
    PyObject *kv = PyList_GET_ITEM(parts, 2);
    tr_status st = TR_OK;
    *defaults = *kwdefaults = *cells = NULL;
    if (dv != Py_None) {
        st = cdyn_v_unpack(tx, dv, defaults);
    }
    if (st == TR_OK && kv != Py_None) {
        if (V(kv)->kind != VK_DICT) {
            st = cdyn_tx_unsupported(tx, "keyword defaults that are not a dict");
        }
        else if ((*kwdefaults = PyDict_New()) == NULL) {
            st = TR_ERROR;
        }
        for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(V(kv)->u.dict.keys); i++) {
            if (PyDict_SetItem(*kwdefaults, PyList_GET_ITEM(V(kv)->u.dict.keys, i),
                               PyList_GET_ITEM(V(kv)->u.dict.vals, i)) < 0) {
                st = TR_ERROR;
            }
        }
    }
    if (st == TR_OK && cv != Py_None) {
        st = cdyn_v_unpack(tx, cv, cells);
    }
    if (st != TR_OK) {
        Py_CLEAR(*defaults);
        Py_CLEAR(*kwdefaults);
        Py_CLEAR(*cells);
    }
    return st;
}

static tr_status
nested_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames, PyObject **out)
{
    PyObject *defaults = NULL, *kwdefaults = NULL, *cells = NULL, *gsrc = V(fn)->u.func.gsource;
    tr_status st = function_parts(tx, fn, &defaults, &kwdefaults, &cells);
    if (st != TR_OK) {
        return st;
    }
    st = cdyn_tx_inline_code(tx, (PyCodeObject *)V(fn)->u.func.code, NULL, args, nargs,
                             kwnames, defaults, kwdefaults, cells, V(fn)->u.func.globals,
                             fs->builtins, gsrc == Py_None ? NULL : gsrc,
                             (V(fn)->bits & FUNC_TOP_GLOBALS) != 0, out);
    Py_XDECREF(defaults);
    Py_XDECREF(kwdefaults);
    Py_XDECREF(cells);
    return st;
}

/* ---- functools.partial --------------------------------------------------------------- */

/* A new PARTIAL over func (borrowed value), args (list of values, stolen), keywords as
 * kwkeys / kwvals lists (stolen). NULL on error (the lists are released). */
static PyObject *
partial_make(PyObject *func, PyObject *args, PyObject *kwkeys, PyObject *kwvals)
{
    PyObject *v = NULL;
    if (args != NULL && kwkeys != NULL && kwvals != NULL) {
        v = cdyn_value_alloc(VK_PARTIAL, NULL);
    }
    if (v == NULL) {
        Py_XDECREF(args);
        Py_XDECREF(kwkeys);
        Py_XDECREF(kwvals);
        return NULL;
    }
    V(v)->u.partial.func = Py_NewRef(func);
    V(v)->u.partial.args = args;
    V(v)->u.partial.kwkeys = kwkeys;
    V(v)->u.partial.kwvals = kwvals;
    return v;
}

/* Set keyword key (str) to val in the parallel lists keys/vals (replacing in place, as a
 * dict update keeps the first position). 0 / -1. */
static int
kw_set(PyObject *keys, PyObject *vals, PyObject *key, PyObject *val)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
        int eq = PyUnicode_Compare(PyList_GET_ITEM(keys, i), key) == 0;
        if (eq) {
            return PyList_SetItem(vals, i, Py_NewRef(val));
        }
    }
    return PyList_Append(keys, key) < 0 || PyList_Append(vals, val) < 0 ? -1 : 0;
}

tr_status
cdyn_partial_new(cdyn_tx *tx, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                 PyObject **out)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    PyObject *func = NULL, *pargs = NULL, *keys = NULL, *vals = NULL;
    if (npos < 1) {
        return cdyn_tx_unsupported(tx, "functools.partial() without a function");
    }
    func = args[0];
    if (V(func)->kind == VK_CONST || V(func)->kind == VK_TENSOR) {
        return cdyn_tx_unsupported(tx, "functools.partial() of %S (not callable)", func);
    }
    if (V(func)->kind == VK_PARTIAL) {   /* partial(partial(f, a), b) is partial(f, a, b) */
        pargs = PyList_GetSlice(V(func)->u.partial.args, 0, PY_SSIZE_T_MAX);
        keys = PyList_GetSlice(V(func)->u.partial.kwkeys, 0, PY_SSIZE_T_MAX);
        vals = PyList_GetSlice(V(func)->u.partial.kwvals, 0, PY_SSIZE_T_MAX);
        func = V(func)->u.partial.func;
    }
    else {
        pargs = PyList_New(0);
        keys = PyList_New(0);
        vals = PyList_New(0);
    }
    for (Py_ssize_t i = 1; pargs != NULL && i < npos; i++) {
        if (PyList_Append(pargs, args[i]) < 0) {
            Py_CLEAR(pargs);
        }
    }
    for (Py_ssize_t k = 0; keys != NULL && vals != NULL && k < nkw; k++) {
        if (kw_set(keys, vals, PyTuple_GET_ITEM(kwnames, k), args[npos + k]) < 0) {
            Py_CLEAR(keys);
        }
    }
    *out = partial_make(func, pargs, keys, vals);
    return *out ? TR_OK : TR_ERROR;
}

/* Call a partial: func(*p.args, *args, **{**p.keywords, **kw}). */
static tr_status
partial_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames, PyObject **out)
{
    cdyn_value *p = V(fn);
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    PyObject *all = PyList_GetSlice(p->u.partial.args, 0, PY_SSIZE_T_MAX);
    PyObject *keys = PyList_GetSlice(p->u.partial.kwkeys, 0, PY_SSIZE_T_MAX);
    PyObject *vals = PyList_GetSlice(p->u.partial.kwvals, 0, PY_SSIZE_T_MAX);
    PyObject *names = NULL;
    tr_status st = TR_ERROR;
    if (all == NULL || keys == NULL || vals == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < npos; i++) {
        if (PyList_Append(all, args[i]) < 0) {
            goto done;
        }
    }
    for (Py_ssize_t k = 0; k < nkw; k++) {
        if (kw_set(keys, vals, PyTuple_GET_ITEM(kwnames, k), args[npos + k]) < 0) {
            goto done;
        }
    }
    if (PyList_SetSlice(all, PyList_GET_SIZE(all), PyList_GET_SIZE(all), vals) < 0) {
        goto done;
    }
    if (PyList_GET_SIZE(keys) > 0 && (names = PyList_AsTuple(keys)) == NULL) {
        goto done;
    }
    st = cdyn_v_call(tx, fs, p->u.partial.func, &PyList_GET_ITEM(all, 0), PyList_GET_SIZE(all),
                     names, out);
done:
    Py_XDECREF(all);
    Py_XDECREF(keys);
    Py_XDECREF(vals);
    Py_XDECREF(names);
    return st;
}

/* Attribute `name` (C string) of obj wrapped through source.<name> (or without a source).
 * *out new. */
static tr_status
wrap_attr(cdyn_tx *tx, PyObject *obj, PyObject *source, const char *name, PyObject **out)
{
    PyObject *nm = PyUnicode_InternFromString(name), *attr = NULL, *src = NULL;
    tr_status st = TR_ERROR;
    if (nm == NULL) {
        return TR_ERROR;
    }
    attr = PyObject_GetAttr(obj, nm);
    if (attr != NULL && (source == NULL || (src = cdyn_source_attr(source, nm)) != NULL)) {
        st = cdyn_tx_wrap_real(tx, attr, src, out);
    }
    Py_DECREF(nm);
    Py_XDECREF(attr);
    Py_XDECREF(src);
    return st;
}

tr_status
cdyn_partial_wrap(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    PyObject *fv = NULL, *av = NULL, *kv = NULL, *items = NULL, *keys = NULL, *vals = NULL;
    tr_status st = TR_OK;
    if (source != NULL && cdyn_guards_add_type(tx->guards, source, Py_TYPE(obj)) < 0) {
        return TR_ERROR;
    }
    st = wrap_attr(tx, obj, source, "func", &fv);
    if (st == TR_OK) {
        st = wrap_attr(tx, obj, source, "args", &av);
    }
    if (st == TR_OK) {
        st = cdyn_v_unpack(tx, av, &items);
    }
    if (st == TR_OK) {
        st = wrap_attr(tx, obj, source, "keywords", &kv);
    }
    if (st == TR_OK) {
        st = cdyn_tx_materialize(tx, kv);
    }
    if (st == TR_OK && V(kv)->kind != VK_DICT) {
        st = cdyn_tx_unsupported(tx, "functools.partial keywords that are not a dict");
    }
    if (st == TR_OK) {
        keys = PyList_GetSlice(V(kv)->u.dict.keys, 0, PY_SSIZE_T_MAX);
        vals = PyList_GetSlice(V(kv)->u.dict.vals, 0, PY_SSIZE_T_MAX);
        *out = partial_make(fv, items, keys, vals);
        items = NULL;
        st = *out ? TR_OK : TR_ERROR;
        if (*out != NULL && source != NULL) {
            V(*out)->source = Py_NewRef(source);
        }
    }
    Py_XDECREF(fv);
    Py_XDECREF(av);
    Py_XDECREF(kv);
    Py_XDECREF(items);
    return st;
}

/* p.func, p.args (a tuple), p.keywords (a new dict), as functools.partial has them. */
static tr_status
partial_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    cdyn_value *p = V(v);
    if (cdyn_name_is(name, "func")) {
        *out = Py_NewRef(p->u.partial.func);
        return TR_OK;
    }
    if (cdyn_name_is(name, "args")) {
        *out = cdyn_value_seq(VK_TUPLE, &PyList_GET_ITEM(p->u.partial.args, 0),
                              PyList_GET_SIZE(p->u.partial.args));
        return *out ? TR_OK : TR_ERROR;
    }
    if (cdyn_name_is(name, "keywords")) {
        PyObject *keys = PyList_GetSlice(p->u.partial.kwkeys, 0, PY_SSIZE_T_MAX);
        PyObject *vals = PyList_GetSlice(p->u.partial.kwvals, 0, PY_SSIZE_T_MAX);
        *out = keys && vals ? cdyn_value_dict(keys, vals) : NULL;
        Py_XDECREF(keys);
        Py_XDECREF(vals);
        return *out ? TR_OK : TR_ERROR;
    }
    return cdyn_tx_unsupported(tx, "attribute %U of functools.partial", name);
}

/* ---- closures rebuilt ------------------------------------------------------------------ */

/* Number of STORE_DEREF / DELETE_DEREF of variable `name` in code at instruction indices
 * [lo, hi] and in the codes nested in its constants (all of theirs: a call can run them at
 * any time; slot: its index in code, or -1 to match by name). -1 on error. */
static Py_ssize_t
deref_stores(PyCodeObject *co, int slot, PyObject *name, Py_ssize_t lo, Py_ssize_t hi)
{
    cdyn_instr_list il;
    Py_ssize_t n = 0;
    cdyn_instrs_init(&il);
    if (cdyn_decode(co, &il) < 0) {
        cdyn_instrs_clear(&il);
        return -1;
    }
    for (Py_ssize_t i = lo; i < il.len && i <= hi; i++) {
        const cdyn_instr *ins = &il.items[i];
        if ((ins->opcode == STORE_DEREF || ins->opcode == DELETE_DEREF) &&
            (ins->oparg == slot ||
             (slot < 0 && ins->oparg < co->co_nlocalsplus &&
              PyUnicode_Compare(PyTuple_GET_ITEM(co->co_localsplusnames, ins->oparg), name) == 0))) {
            n++;
        }
    }
    cdyn_instrs_clear(&il);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(co->co_consts); i++) {
        PyObject *c = PyTuple_GET_ITEM(co->co_consts, i);
        if (PyCode_Check(c)) {
            Py_ssize_t m = deref_stores((PyCodeObject *)c, -1, name, 0, PY_SSIZE_T_MAX);
            if (m < 0) {
                return -1;
            }
            n += m;
        }
    }
    return n;
}

/* The instruction indices [*lo, *hi] of the outermost loop around instruction pc of co
 * (backward jumps at or after pc to at or before it). 0 / -1. */
static int
loop_span(PyCodeObject *co, Py_ssize_t pc, Py_ssize_t *lo, Py_ssize_t *hi)
{
    cdyn_instr_list il;
    cdyn_instrs_init(&il);
    if (cdyn_decode(co, &il) < 0) {
        cdyn_instrs_clear(&il);
        return -1;
    }
    *lo = pc;
    *hi = pc;
    for (Py_ssize_t j = pc; j < il.len; j++) {
        const cdyn_instr *in = &il.items[j];
        if (cdyn_is_jump(in->opcode) && in->target >= 0 && in->target <= pc) {
            *lo = in->target < *lo ? in->target : *lo;
            *hi = j;
        }
    }
    cdyn_instrs_clear(&il);
    return 0;
}

/* A cell of a closure rebuilt at a graph break gets a new cell object, while the frame's
 * variable lives on in the resume function: refuse when that variable is written after the
 * break (the two would part): written after its first assignment, not yet assigned, or
 * written inside the loop around the break (the store may run again after it). */
static tr_status
check_cell_at_break(cdyn_tx *tx, PyObject *cell)
{
    PyCodeObject *co = tx->code;
    int slot = (int)V(cell)->pos;
    int nargs = co->co_argcount + co->co_kwonlyargcount +
                ((co->co_flags & CO_VARARGS) != 0) + ((co->co_flags & CO_VARKEYWORDS) != 0);
    PyObject *name = NULL;
    Py_ssize_t n, lo = 0, hi = 0;
    if (tx->break_kind == BRK_NONE || !(V(cell)->bits & CELL_TOP) || V(cell)->u.cell.real) {
        return TR_OK;
    }
    name = PyTuple_GET_ITEM(co->co_localsplusnames, slot);
    n = deref_stores(co, slot, name, 0, PY_SSIZE_T_MAX);
    if (n < 0) {
        return TR_ERROR;
    }
    /* one store is allowed when it has run: a cell still empty at the break is assigned in
       the resume function, whose cell is not the one this closure is rebuilt over */
    n = n > (slot < nargs || V(cell)->u.cell.contents == NULL ? 0 : 1) ? n : 0;
    if (n == 0 && tx->break_in_loop &&
        (loop_span(co, tx->break_pc, &lo, &hi) < 0 ||
         (n = deref_stores(co, slot, name, lo, hi)) < 0)) {
        return TR_ERROR;
    }
    if (n > 0) {
        return cdyn_tx_unsupported(tx, "closure over variable %U, which is reassigned, live at "
                                       "a graph break", name);
    }
    return TR_OK;
}

/* The cells of a FUNCTION's closure (borrowed list of CELL values) or NULL. */
static PyObject *
closure_cells(PyObject *fn)
{
    PyObject *cv = PyList_GET_ITEM(V(fn)->u.func.parts, 1);
    if (cv == Py_None || V(cv)->kind != VK_TUPLE) {
        return NULL;
    }
    return V(cv)->u.seq.items;
}

/* What rebuilding a FUNCTION needs: its defaults, keyword defaults and the contents of
 * the cells it makes. */
static tr_status
collect_nested(cdyn_tx *tx, cdyn_cg *cg, PyObject *fn)
{
    PyObject *parts = V(fn)->u.func.parts, *cells;
    PyObject *dv = PyList_GET_ITEM(parts, 0), *cv = PyList_GET_ITEM(parts, 1);
    PyObject *kv = PyList_GET_ITEM(parts, 2);
    tr_status st = TR_OK;
    if (dv != Py_None) {
        st = cdyn_cg_collect(tx, cg, dv);
    }
    if (st == TR_OK && kv != Py_None) {
        st = cdyn_cg_collect(tx, cg, kv);
    }
    if (st != TR_OK || cv == Py_None) {
        return st;
    }
    if ((cells = closure_cells(fn)) == NULL) {
        return cdyn_tx_unsupported(tx, "cannot rebuild %S: its closure is not a tuple", fn);
    }
    for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(cells); i++) {
        PyObject *c = PyList_GET_ITEM(cells, i);
        if (V(c)->kind != VK_CELL) {
            return cdyn_tx_unsupported(tx, "cannot rebuild %S: closure of non-cells", fn);
        }
        st = check_cell_at_break(tx, c);
        if (st == TR_OK && V(c)->u.cell.real == NULL && V(c)->u.cell.contents != NULL) {
            st = cdyn_cg_collect(tx, cg, V(c)->u.cell.contents);
        }
    }
    return st;
}

/* Push a cell: the real one (a free variable of the frame, a cell of a function read
 * through its source, or a constant), or a new one holding the contents, made once. */
static int
emit_cell(cdyn_cg *cg, PyObject *cell)
{
    cdyn_value *c = V(cell);
    int r;
    if (c->u.cell.real != NULL) {   /* its source is the cell object (values/misc.c) */
        return c->source != NULL ? cdyn_cg_source(cg, c->source)
                                 : cdyn_cg_load_const(cg, c->u.cell.real);
    }
    if ((r = cdyn_cg_memo_load(cg, cell)) != 0) {
        return r < 0 ? -1 : 0;
    }
    if (cdyn_cg_push_callable(cg, (PyObject *)&PyCell_Type) < 0 ||
        (c->u.cell.contents != NULL && cdyn_cg_value(cg, c->u.cell.contents) < 0) ||
        cdyn_cg_call(cg, c->u.cell.contents != NULL) < 0) {
        return -1;
    }
    return cdyn_cg_memo_store(cg, cell, "cell");
}

/* Push the closure tuple of a FUNCTION made in the trace (cells != NULL). 0 / -1. */
static int
emit_closure(cdyn_cg *cg, PyObject *cells)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(cells); i++) {
        if (emit_cell(cg, PyList_GET_ITEM(cells, i)) < 0) {
            return -1;
        }
    }
    return cdyn_cg_emit(cg, BUILD_TUPLE, (int)PyList_GET_SIZE(cells));
}

/* [fn] -> the temporary of fn, then the attributes the trace stored on it set
 * (_glue.set_function_attrs(fn, {name: value})). 0 / -1. */
static int
store_with_attrs(cdyn_cg *cg, PyObject *fn)
{
    PyObject *attrs = V(fn)->u.func.attrs, *setter;
    int e;
    if (cdyn_cg_memo_store(cg, fn, "fn") < 0) {
        return -1;
    }
    if (attrs == NULL || PyList_GET_SIZE(V(attrs)->u.dict.keys) == 0) {
        return 0;
    }
    setter = PyObject_GetAttrString(cdyn_G.glue, "set_function_attrs");
    e = setter == NULL || cdyn_cg_push_callable(cg, setter) < 0 ||
        cdyn_cg_memo_load(cg, fn) != 1 || cdyn_cg_value(cg, attrs) < 0 ||
        cdyn_cg_call(cg, 2) < 0 || cdyn_cg_emit(cg, POP_TOP, 0) < 0;
    Py_XDECREF(setter);
    return e ? -1 : 0;
}

/* A function made by an inlined function of another module (its globals are that
 * module's, not the frame's, so no MAKE_FUNCTION): types.FunctionType(code, globals, None,
 * defaults, closure), then its __kwdefaults__ stored. 0 / -1. */
static int
reconstruct_foreign(cdyn_cg *cg, PyObject *fn)
{
    PyObject *parts = V(fn)->u.func.parts, *cells = closure_cells(fn);
    PyObject *dv = PyList_GET_ITEM(parts, 0), *kv = PyList_GET_ITEM(parts, 2), *attr;
    int k;
    if (cdyn_cg_push_callable(cg, (PyObject *)&PyFunction_Type) < 0 ||
        cdyn_cg_load_const(cg, V(fn)->u.func.code) < 0 ||
        cdyn_cg_load_const(cg, V(fn)->u.func.globals) < 0 || cdyn_cg_load_const(cg, Py_None) < 0 ||
        (dv != Py_None ? cdyn_cg_value(cg, dv) : cdyn_cg_load_const(cg, Py_None)) < 0 ||
        (cells != NULL ? emit_closure(cg, cells) : cdyn_cg_load_const(cg, Py_None)) < 0 ||
        cdyn_cg_call(cg, 5) < 0) {
        return -1;
    }
    if (kv != Py_None) {   /* [fn] -> [fn, kwdefaults, fn] -> STORE_ATTR -> [fn] */
        attr = PyUnicode_FromString("__kwdefaults__");
        k = attr != NULL ? cdyn_cg_name(cg, attr) : -1;
        Py_XDECREF(attr);
        if (k < 0 || cdyn_cg_emit(cg, COPY, 1) < 0 || cdyn_cg_value(cg, kv) < 0 ||
            cdyn_cg_emit(cg, SWAP, 2) < 0 || cdyn_cg_emit(cg, STORE_ATTR, k) < 0) {
            return -1;
        }
    }
    return store_with_attrs(cg, fn);
}

/* MAKE_FUNCTION over the rebuilt defaults, keyword defaults and closure; made once. */
static int
reconstruct_nested(cdyn_cg *cg, PyObject *fn)
{
    PyObject *parts = V(fn)->u.func.parts, *cells = closure_cells(fn);
    PyObject *dv = PyList_GET_ITEM(parts, 0), *kv = PyList_GET_ITEM(parts, 2);
    int flags = 0, r = cdyn_cg_memo_load(cg, fn);
    if (r != 0) {
        return r < 0 ? -1 : 0;
    }
    if (!(V(fn)->bits & FUNC_TOP_GLOBALS)) {
        return reconstruct_foreign(cg, fn);
    }
    if (dv != Py_None) {
        if (cdyn_cg_value(cg, dv) < 0) {
            return -1;
        }
        flags |= 0x01;
    }
    if (kv != Py_None) {
        if (cdyn_cg_value(cg, kv) < 0) {
            return -1;
        }
        flags |= 0x02;
    }
    if (cells != NULL) {
        if (emit_closure(cg, cells) < 0) {
            return -1;
        }
        flags |= 0x08;
    }
    if (cdyn_cg_load_const(cg, V(fn)->u.func.code) < 0 ||
        cdyn_cg_emit(cg, MAKE_FUNCTION, flags) < 0) {
        return -1;
    }
    return store_with_attrs(cg, fn);
}

/* Attributes of a function made in the trace that MAKE_FUNCTION fixes. */
/* 1 when every Python function has attribute name (its type's, or an instance slot). */
static int
is_function_attribute(PyObject *name)
{
    static const char *const slots[] = {"__closure__", "__globals__", "__builtins__",
                                        "__kwdefaults__", "__dict__", NULL};
    return _PyType_Lookup(&PyFunction_Type, name) != NULL || cdyn_name_in(name, slots);
}

static tr_status
nested_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyCodeObject *co = (PyCodeObject *)V(v)->u.func.code;
    PyObject *r = NULL;
    if (cdyn_name_is(name, "__name__")) {
        r = co->co_name;
    }
    else if (cdyn_name_is(name, "__qualname__")) {
        r = co->co_qualname;
    }
    else if (cdyn_name_is(name, "__code__")) {
        r = (PyObject *)co;
    }
    else if (cdyn_name_is(name, "__module__")) {
        r = PyDict_GetItemString(V(v)->u.func.globals, "__name__");
    }
    else if (cdyn_name_is(name, "__doc__")) {
        r = PyTuple_GET_SIZE(co->co_consts) > 0 &&
                    PyUnicode_Check(PyTuple_GET_ITEM(co->co_consts, 0))
                ? PyTuple_GET_ITEM(co->co_consts, 0) : Py_None;
    }
    else if (cdyn_name_is(name, "__defaults__")) {
        *out = Py_NewRef(PyList_GET_ITEM(V(v)->u.func.parts, 0));
        if (*out == Py_None) {
            Py_DECREF(*out);
            *out = cdyn_value_const(Py_None);
        }
        return *out ? TR_OK : TR_ERROR;
    }
    else if (cdyn_name_is(name, "__annotations__")) {
        /* (MAKE_FUNCTION's annotations are not kept: the rebuilt function has none) */
        *out = cdyn_dict_new(NULL);
        return *out ? TR_OK : TR_ERROR;
    }
    else if (cdyn_name_is(name, "__type_params__")) {
        r = PyTuple_New(0);
        *out = r ? cdyn_value_const_steal(r) : NULL;
        return *out ? TR_OK : TR_ERROR;
    }
    else if (cdyn_name_is(name, "__dict__")) {
        /* its attributes: the live DICT the trace stores them in (rebuilt onto it) */
        if (V(v)->u.func.attrs == NULL) {
            cdyn_tx_mutated(tx, v);
            if ((V(v)->u.func.attrs = cdyn_dict_new(NULL)) == NULL) {
                return TR_ERROR;
            }
        }
        *out = Py_NewRef(V(v)->u.func.attrs);
        return TR_OK;
    }
    if (r == NULL && !is_function_attribute(name)) {
        /* no such attribute on a function: eager's AttributeError, in the traced code */
        return cdyn_tx_raise_text(tx, PyExc_AttributeError,
                                  "'function' object has no attribute '%U'", name);
    }
    if (r == NULL) {
        return cdyn_tx_unsupported(tx, "attribute %U of %S", name, v);
    }
    *out = cdyn_value_const(r);
    return *out ? TR_OK : TR_ERROR;
}

/* ---- guards of real functions ------------------------------------------------------------- */

tr_status
cdyn_guard_function(cdyn_tx *tx, PyObject *func, PyObject *source, PyObject *v)
{
    cdyn_source *src = (cdyn_source *)source;
    PyObject *name = NULL, *csrc = NULL;
    int by_code;
    if (source == NULL) {
        return TR_OK;
    }
    /* closures, and functions passed in (an argument, an item of an argument, the func of
       a partial passed in: lambdas made per call) or read by position (an nn.Module's hook,
       values/nnmodule.c: a lambda registered on each layer); a global or an attribute
       without a closure keeps its identity guard (one pointer compare) */
    int entry = src->kind == CDYN_SRC_ENTRY;
    while ((src->kind == CDYN_SRC_ITEM ||
            (src->kind == CDYN_SRC_ATTR && cdyn_name_is(src->name, "func"))) &&
           src->base != NULL) {
        src = src->base;
    }
    by_code = PyFunction_Check(func) &&
              (((PyFunctionObject *)func)->func_closure != NULL || src->kind == CDYN_SRC_LOCAL ||
               entry);
    if (!by_code) {
        return cdyn_guards_add_id(tx->guards, source, func, 1) < 0 ? TR_ERROR : TR_OK;
    }
    name = PyUnicode_InternFromString("__code__");
    csrc = name ? cdyn_source_attr(source, name) : NULL;
    if (csrc == NULL || cdyn_guards_add_type(tx->guards, source, &PyFunction_Type) < 0 ||
        cdyn_guards_add_id(tx->guards, csrc, ((PyFunctionObject *)func)->func_code, 0) < 0) {
        Py_XDECREF(name);
        Py_XDECREF(csrc);
        return TR_ERROR;
    }
    Py_DECREF(name);
    Py_DECREF(csrc);
    V(v)->bits |= FUNC_CODE_GUARDED;
    return TR_OK;
}

/* ---- assume_constant_result ---------------------------------------------------------------
 * A function marked by torch._dynamo.assume_constant_result (the attribute
 * `_dynamo_marked_constant`, which cdynamo.assume_constant_result sets too) is called at trace
 * time and its result used as a constant, as torch._dynamo does: transformers marks its
 * install probes (is_torch_available, is_torch_distributed_available, ...) this way, under
 * @lru_cache, whose wrapper carries the mark as well (functools.update_wrapper copies the
 * __dict__). The result is not guarded: that is the promise the mark makes. */

int
cdyn_is_marked_constant(PyObject *callable)
{
    static PyObject *s_marked;
    PyObject **dp = _PyObject_GetDictPtr(callable), *flag;
    int r;
    if (dp == NULL || *dp == NULL || !PyDict_Check(*dp) || PyDict_GET_SIZE(*dp) == 0) {
        return 0;
    }
    if (s_marked == NULL && (s_marked = PyUnicode_InternFromString("_dynamo_marked_constant")) == NULL) {
        PyErr_Clear();
        return 0;
    }
    flag = PyDict_GetItemWithError(*dp, s_marked);
    if (flag == NULL || !(PyBool_Check(flag) || PyLong_CheckExact(flag))) {
        PyErr_Clear();
        return 0;   /* only a bool or int flag: reading it runs no user code */
    }
    r = PyObject_IsTrue(flag);
    return r > 0;
}

/* The real object passed for value v to a marked function (new reference), pinned by an
 * identity guard when it was read from the frame; NULL + unsupported (or an error) when v has
 * no real object (a tensor, a value made while tracing) or the trace stored into it. */
static PyObject *
marked_arg(cdyn_tx *tx, PyObject *v, tr_status *st)
{
    PyObject *c = cdyn_v_as_constant(v), *real = cdyn_v_real(v);
    int mutated = (V(v)->kind == VK_OBJECT || V(v)->kind == VK_NNMODULE) &&
                  (V(v)->bits & OBJ_MUTATED);
    *st = TR_OK;
    if (c != NULL) {
        return c;   /* a constant, or a container of constants */
    }
    if (real == NULL || mutated) {
        *st = cdyn_tx_unsupported(tx, "%S as an argument of a function marked "
                                  "assume_constant_result (not a constant)", v);
        return NULL;
    }
    if (V(v)->source != NULL &&
        ((*st = cdyn_v_pin_identity(tx, v)) != TR_OK ||
         cdyn_guards_add_id(tx->guards, V(v)->source, real, PyFunction_Check(real)) < 0)) {
        *st = TR_ERROR;
        return NULL;
    }
    return Py_NewRef(real);
}

tr_status
cdyn_marked_constant_call(cdyn_tx *tx, PyObject *callable, PyObject *self,
                          PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                          PyObject **out)
{
    PyObject *objs[32] = {NULL}, *res = NULL, *label = NULL;
    Py_ssize_t n = 0, nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    tr_status st = TR_OK;
    if (nargs + 1 > 32) {
        return cdyn_tx_unsupported(tx, "too many arguments to %R", callable);
    }
    for (Py_ssize_t i = -1; st == TR_OK && i < nargs; i++) {
        PyObject *v = i < 0 ? self : args[i];
        if (v != NULL && (objs[n] = marked_arg(tx, v, &st)) != NULL) {
            n++;
        }
    }
    if (st == TR_OK) {
        res = PyObject_Vectorcall(callable, objs, (size_t)(n - nkw), kwnames);
        if (res == NULL) {
            PyErr_Clear();
            st = cdyn_tx_unsupported(tx, "%R (assume_constant_result) raised at trace time "
                                     "(raised in Python)", callable);
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_DECREF(objs[i]);
    }
    if (st != TR_OK) {
        return st;
    }
    if (cdyn_is_constant(res)) {
        *out = cdyn_value_const_steal(res);   /* no source: no guard */
        return *out ? TR_OK : TR_ERROR;
    }
    /* labelled by the function and the result's address: a labelled constant source is
       memoised by its text (tx->by_source), so two results of one function (two sub-meshes,
       two objects picked by an argument) must not share one */
    label = PyObject_GetAttrString(callable, "__qualname__");
    if (label == NULL || !PyUnicode_Check(label)) {
        PyErr_Clear();
        Py_XSETREF(label, Py_NewRef(Py_None));
    }
    else {
        Py_SETREF(label, PyUnicode_FromFormat("%U()@%p", label, (void *)res));
        if (label == NULL) {
            Py_DECREF(res);
            return TR_ERROR;
        }
    }
    st = cdyn_tx_wrap_fixed(tx, res, label, out);
    Py_DECREF(label);
    Py_DECREF(res);
    return st;
}

/* ---- the family table ------------------------------------------------------------------ */

/* A call of lru_cache wrapper w (borrowed) with a FOLD rule of its own (trace_rules.py:
 * torch.get_device_module), fn its value (borrowed): folded as cdyn_tx_fold_call folds it,
 * with w pinned by identity where it was read (an ID_MATCH on fn's source, or, for a value
 * read without one, as torch's module attributes are, on <module>.__dict__[<name>]), so that
 * a patched torch.get_device_module recompiles instead of giving the folded answer. *handled
 * 0 (TR_OK) when there is no rule, an argument is not a constant or w has no source and is
 * not its module's global of its name (then it is called through __wrapped__). */
static tr_status
fold_wrapper(cdyn_tx *tx, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames, PyObject **out, int *handled)
{
    PyObject *w = V(fn)->u.obj.obj, *value = NULL, *modname = NULL, *name = NULL, *mod = NULL;
    PyObject *src = V(fn)->source != NULL ? Py_NewRef(V(fn)->source) : NULL, *g;
    int rule = cdyn_rules_for_callable(w, &value);
    tr_status st = TR_OK;
    *handled = 0;
    Py_XDECREF(value);
    if (rule != CDYN_RULE_FOLD) {
        Py_XDECREF(src);
        return rule < 0 ? TR_ERROR : TR_OK;
    }
    if (src != NULL) {
        goto fold;   /* read through a source (a closure cell, a global): pinned there */
    }
    modname = PyObject_GetAttrString(w, "__module__");
    name = modname ? PyObject_GetAttrString(w, "__name__") : NULL;
    mod = name && PyUnicode_Check(modname) && PyUnicode_Check(name) ? PyImport_GetModule(modname)
                                                                     : NULL;
    g = mod != NULL && PyModule_Check(mod) ? PyModule_GetDict(mod) : NULL;   /* borrowed */
    PyErr_Clear();
    if (g == NULL || PyDict_GetItemWithError(g, name) != w) {
        PyErr_Clear();
        goto done;   /* not reachable by name: no guard to pin it, not folded */
    }
    src = cdyn_tx_module_global_source(g, name);
    if (src == NULL) {
        st = TR_ERROR;
        goto done;
    }
fold:
    st = cdyn_tx_fold_call(tx, w, args, nargs, kwnames, out, handled);
    if (*handled && st == TR_OK && cdyn_guards_add_id(tx->guards, src, w, 1) < 0) {
        Py_CLEAR(*out);
        st = TR_ERROR;
    }
done:
    Py_XDECREF(modname);
    Py_XDECREF(name);
    Py_XDECREF(mod);
    Py_XDECREF(src);
    return st;
}

/* A lru_cache wrapper: call what it wraps, read (and guarded) through .__wrapped__. */
static tr_status
wrapper_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames, PyObject **out)
{
    PyObject *name = NULL, *w = NULL;
    tr_status st;
    int handled = 0;
    if (cdyn_is_marked_constant(V(fn)->u.obj.obj)) {   /* the mark on the wrapper itself */
        return cdyn_marked_constant_call(tx, V(fn)->u.obj.obj, NULL, args, nargs, kwnames, out);
    }
    /* a FOLD rule for the wrapper itself (torch.get_device_module, an lru_cache of torch) */
    st = fold_wrapper(tx, fn, args, nargs, kwnames, out, &handled);
    if (handled || st != TR_OK) {
        return st;
    }
    name = PyUnicode_InternFromString("__wrapped__");
    st = name ? cdyn_getattr_real(tx, fn, name, 0, &w) : TR_ERROR;
    Py_XDECREF(name);
    if (st != TR_OK) {
        return st;
    }
    st = cdyn_v_call(tx, fs, w, args, nargs, kwnames, out);
    Py_DECREF(w);
    return st;
}

static tr_status
function_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames, PyObject **out)
{
    cdyn_value *f = V(fn);
    switch (f->kind) {
    case VK_FUNCTION:
        return nested_call(tx, fs, fn, args, nargs, kwnames, out);
    case VK_USERFN:
        return cdyn_tx_inline_userfn(tx, fn, args, nargs, kwnames, out);
    case VK_PARTIAL:
        return partial_call(tx, fs, fn, args, nargs, kwnames, out);
    case VK_WRAPPER:
        return wrapper_call(tx, fs, fn, args, nargs, kwnames, out);
    default:   /* VK_METHOD */
        if (f->u.method.func != NULL) {
            return cdyn_tx_inline_function(tx, f->u.method.func, NULL, f->u.method.self, args,
                                           nargs, kwnames, out);
        }
        return cdyn_v_call_method(tx, fs, f->u.method.self, f->u.method.name, args, nargs,
                                  kwnames, out);
    }
}

/* m.__self__, m.__func__, m.__name__, m.__qualname__, m.__doc__ of a bound method (a
 * Python function or a builtin method bound to a value): the bound value, and what the
 * function (or the method the type of self defines under that name) has. */
static tr_status
method_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    static const char *const fixed[] = {"__name__", "__qualname__", "__doc__", "__module__",
                                        NULL};
    PyObject *func = V(v)->u.method.func, *self = V(v)->u.method.self, *d = NULL;
    PyTypeObject *t;
    if (cdyn_name_is(name, "__self__")) {
        *out = Py_NewRef(self);
        return TR_OK;
    }
    if (cdyn_name_is(name, "__func__") && func != NULL) {
        return cdyn_tx_wrap_real(tx, func, NULL, out);
    }
    if (!cdyn_name_in(name, fixed)) {
        return cdyn_tx_unsupported(tx, "attribute %U of %S", name, v);
    }
    if (func == NULL && (t = cdyn_v_python_type(self)) != NULL) {
        d = _PyType_Lookup(t, V(v)->u.method.name);
    }
    if (func == NULL && d == NULL) {
        return cdyn_tx_unsupported(tx, "attribute %U of %S", name, v);
    }
    return cdyn_constant_attr(tx, v, func != NULL ? func : d, name, out);
}

/* f.name = value on a FUNCTION made in the trace: kept in its attrs (a DICT value) and set
 * on the rebuilt function (_glue.set_function_attrs); what MAKE_FUNCTION fixes (code,
 * defaults, closure, globals, __dict__) is unsupported. */
static tr_status
function_setattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject *value)
{
    static const char *const fixed[] = {"__code__", "__defaults__", "__kwdefaults__",
                                        "__closure__", "__globals__", "__dict__",
                                        "__builtins__", NULL};
    PyObject *key;
    tr_status st;
    if (V(v)->kind != VK_FUNCTION || cdyn_name_in(name, fixed)) {
        return cdyn_tx_unsupported(tx, "STORE_ATTR %U on %S", name, v);
    }
    if (V(v)->u.func.attrs == NULL) {
        cdyn_tx_mutated(tx, v);   /* (the undo log keeps the payload before) */
        if ((V(v)->u.func.attrs = cdyn_dict_new(NULL)) == NULL) {
            return TR_ERROR;
        }
    }
    cdyn_tx_mutated(tx, V(v)->u.func.attrs);
    key = cdyn_value_const(name);
    st = key ? cdyn_dict_set(tx, V(v)->u.func.attrs, key, value) : TR_ERROR;
    Py_XDECREF(key);
    return st;
}

/* An attribute the trace stored on FUNCTION v: *out new, or NULL when it has none. */
static tr_status
stored_attr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    PyObject *key;
    int has = 0;
    tr_status st;
    *out = NULL;
    if (V(v)->kind != VK_FUNCTION || V(v)->u.func.attrs == NULL) {
        return TR_OK;
    }
    key = cdyn_value_const(name);
    st = key ? cdyn_v_contains(tx, V(v)->u.func.attrs, key, &has) : TR_ERROR;
    if (st == TR_OK && has) {
        st = cdyn_v_subscr(tx, V(v)->u.func.attrs, key, out);
    }
    Py_XDECREF(key);
    return st;
}

int
cdyn_function_hasattr(cdyn_tx *tx, PyObject *v, PyObject *name)
{
    PyObject *a = NULL;
    tr_status st;
    if (_PyType_Lookup(&PyFunction_Type, name) != NULL) {
        return 1;   /* __name__, __code__, ...: what every function has */
    }
    st = stored_attr(tx, v, name, &a);
    if (st != TR_OK) {
        return st == TR_ERROR ? -2 : -1;
    }
    Py_XDECREF(a);
    return a != NULL;
}

static tr_status
function_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    tr_status st = stored_attr(tx, v, name, out);
    if (st != TR_OK || *out != NULL) {
        return st;
    }
    switch (V(v)->kind) {
    case VK_USERFN:
        return cdyn_getattr_real(tx, v, name, cdyn_module_startswith(V(v)->u.obj.obj, "torch"),
                                 out);
    case VK_WRAPPER:
        return cdyn_getattr_real(tx, v, name, 0, out);
    case VK_FUNCTION:
        return nested_getattr(tx, v, name, out);
    case VK_PARTIAL:
        return partial_getattr(tx, v, name, out);
    case VK_METHOD:
        return method_getattr(tx, v, name, out);
    default:
        return cdyn_tx_unsupported(tx, "attribute %U of %S", name, v);
    }
}

static tr_status
function_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    (void)tx;
    (void)v;
    *out = 1;
    return TR_OK;
}

static PyTypeObject *
function_python_type(PyObject *v)
{
    switch (V(v)->kind) {
    case VK_FUNCTION:
        return &PyFunction_Type;
    case VK_USERFN:
    case VK_WRAPPER:
        return Py_TYPE(V(v)->u.obj.obj);
    case VK_PARTIAL:
        return functools_types() == 0 ? (PyTypeObject *)partial_type : NULL;
    default:
        return V(v)->u.method.func != NULL ? &PyMethod_Type : NULL;
    }
}

static tr_status
function_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    cdyn_value *x = V(v);
    tr_status st = TR_OK;
    switch (x->kind) {
    case VK_FUNCTION:
        if (x->bits & FUNC_VISITING) {
            /* its own closure holds it: the generated code would need the cell made before
               the function and filled after, which it does not emit */
            return cdyn_tx_unsupported(tx, "a nested function whose closure holds the "
                                           "function itself, made in the trace");
        }
        x->bits |= FUNC_VISITING;
        st = collect_nested(tx, cg, v);
        if (st == TR_OK && x->u.func.attrs != NULL) {
            st = cdyn_cg_collect(tx, cg, x->u.func.attrs);
        }
        x->bits &= ~FUNC_VISITING;
        return st;
    case VK_USERFN:
    case VK_WRAPPER:
        return TR_OK;
    case VK_PARTIAL:
        if (x->source != NULL) {
            return TR_OK;
        }
        st = cdyn_cg_collect(tx, cg, x->u.partial.func);
        for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(x->u.partial.args); i++) {
            st = cdyn_cg_collect(tx, cg, PyList_GET_ITEM(x->u.partial.args, i));
        }
        for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(x->u.partial.kwvals); i++) {
            st = cdyn_cg_collect(tx, cg, PyList_GET_ITEM(x->u.partial.kwvals, i));
        }
        return st;
    default:
        return cdyn_cg_collect(tx, cg, x->u.method.self);
    }
}

/* functools.partial(func, *args, **kw), made once. */
static int
reconstruct_partial(cdyn_cg *cg, PyObject *v)
{
    cdyn_value *x = V(v);
    Py_ssize_t na = PyList_GET_SIZE(x->u.partial.args), nk = PyList_GET_SIZE(x->u.partial.kwkeys);
    PyObject *names = NULL;
    int r = cdyn_cg_memo_load(cg, v), e;
    if (r != 0) {
        return r < 0 ? -1 : 0;
    }
    if (functools_types() < 0 || cdyn_cg_push_callable(cg, partial_type) < 0 ||
        cdyn_cg_value(cg, x->u.partial.func) < 0) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < na; i++) {
        if (cdyn_cg_value(cg, PyList_GET_ITEM(x->u.partial.args, i)) < 0) {
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < nk; i++) {
        if (cdyn_cg_value(cg, PyList_GET_ITEM(x->u.partial.kwvals, i)) < 0) {
            return -1;
        }
    }
    if (nk > 0) {
        names = PyList_AsTuple(x->u.partial.kwkeys);
        e = names == NULL || cdyn_cg_emit(cg, KW_NAMES, cdyn_cg_const(cg, names)) < 0;
        Py_XDECREF(names);
        if (e) {
            return -1;
        }
    }
    if (cdyn_cg_call(cg, (int)(1 + na + nk)) < 0) {
        return -1;
    }
    return cdyn_cg_memo_store(cg, v, "partial");
}

static int
function_reconstruct(cdyn_cg *cg, PyObject *v)
{
    cdyn_value *x = V(v);
    switch (x->kind) {
    case VK_FUNCTION:
        return reconstruct_nested(cg, v);
    case VK_USERFN:
    case VK_WRAPPER:
        return cdyn_reconstruct_obj(cg, v);
    case VK_PARTIAL:
        return x->source != NULL ? cdyn_cg_source(cg, x->source) : reconstruct_partial(cg, v);
    default:
        if (x->u.method.func != NULL) {
            /* MethodType(func, self): exactly this function, not whatever self.<name>
               resolves to (an override, for a super() method) */
            if (cdyn_cg_push_callable(cg, (PyObject *)&PyMethod_Type) < 0 ||
                cdyn_cg_load_const(cg, x->u.method.func) < 0 ||
                cdyn_cg_value(cg, x->u.method.self) < 0) {
                return -1;
            }
            return cdyn_cg_call(cg, 2);
        }
        if (cdyn_cg_value(cg, x->u.method.self) < 0) {
            return -1;
        }
        {
            int i = cdyn_cg_name(cg, x->u.method.name);
            return i < 0 ? -1 : cdyn_cg_emit(cg, LOAD_ATTR, i);
        }
    }
}

const cdyn_vtable cdyn_function_vt = {
    .name = "FunctionVariable",
    .getattr = function_getattr,
    .setattr = function_setattr,
    .call = function_call,
    .truth = function_truth,
    .python_type = function_python_type,
    .collect = function_collect,
    .reconstruct = function_reconstruct,
};
