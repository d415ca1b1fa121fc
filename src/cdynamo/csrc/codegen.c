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
 *     <rebuild the return value from graph outputs, constants and sources>
 *     RETURN_VALUE
 * It takes every argument slot of the original frame as a plain positional parameter
 * (translate.h), has no cell variables, and keeps the original free variables.
 */
#include "tx.h"
#include "analysis.h"
#include "resume.h"

typedef struct {
    cdyn_instr_list out;
    PyObject *consts;     /* list */
    PyObject *names;      /* list of str */
    PyObject *outputs;    /* dict: node -> output index */
    PyObject *memo;       /* dict: id(container value) -> temp slot (int); aliasing kept */
    PyObject *varnames;   /* list of str: the new code's varnames (temps appended) */
    PyObject *free_fixups;/* list of instruction indices whose oparg is a free-variable
                             number: the slot is known only once all temporaries exist,
                             so cg_close adds the final number of varnames to them */
    int lineno;
} cg_state;

/* A new temporary local slot named prefix_N; returns its index or -1. */
static int
new_temp(cg_state *cg, const char *prefix)
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

static int
emit(cg_state *cg, int opcode, int oparg)
{
    cdyn_instr ins = cdyn_instr_make(opcode, oparg);
    ins.lineno = ins.end_lineno = cg->lineno;
    return cdyn_instrs_append(&cg->out, &ins) < 0 ? -1 : 0;
}

/* Index of obj in the consts list (identity; equal ints and bools stay distinct). */
static int
const_index(cg_state *cg, PyObject *obj)
{
    Py_ssize_t n = PyList_GET_SIZE(cg->consts);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyList_GET_ITEM(cg->consts, i) == obj) {
            return (int)i;
        }
    }
    if (PyList_Append(cg->consts, obj) < 0) {
        return -1;
    }
    return (int)n;
}

static int
name_index(cg_state *cg, PyObject *name)
{
    Py_ssize_t n = PyList_GET_SIZE(cg->names);
    for (Py_ssize_t i = 0; i < n; i++) {
        int r = PyUnicode_Compare(PyList_GET_ITEM(cg->names, i), name);
        if (r == 0) {
            return (int)i;
        }
    }
    if (PyList_Append(cg->names, name) < 0) {
        return -1;
    }
    return (int)n;
}

/* Install value under name in the frame's globals (the transformed code loads it from
 * there, as torch._dynamo's __compiled_fn_N); removable ones are removed by
 * cdynamo.reset(). */
static int
install_global(cdyn_tx *tx, PyObject *name, PyObject *value, int removable)
{
    PyObject *r = PyObject_CallMethod(tx->glue, "install_global", "OOOO", tx->frame->f_globals,
                                      name, value, removable ? Py_True : Py_False);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* Emit an instruction on free variable k (LOAD_DEREF / LOAD_CLOSURE); fixed up later. */
static int
emit_free(cg_state *cg, int opcode, int k)
{
    PyObject *idx = PyLong_FromSsize_t(cg->out.len);
    int e = idx == NULL || PyList_Append(cg->free_fixups, idx) < 0 || emit(cg, opcode, k) < 0;
    Py_XDECREF(idx);
    return e ? -1 : 0;
}

/* Emit bytecode that pushes the value of a source. 0 / -1. */
static int
emit_source(cg_state *cg, PyObject *s)
{
    cdyn_source *src = (cdyn_source *)s;
    int i;
    switch (src->kind) {
    case CDYN_SRC_LOCAL:
        return emit(cg, LOAD_FAST, src->index);
    case CDYN_SRC_GLOBAL:
        i = name_index(cg, src->name);
        return i < 0 ? -1 : emit(cg, LOAD_GLOBAL, i << 1);
    case CDYN_SRC_CLOSURE:
        return emit_free(cg, LOAD_DEREF, src->index);
    case CDYN_SRC_ATTR:
        if (emit_source(cg, (PyObject *)src->base) < 0) {
            return -1;
        }
        i = name_index(cg, src->name);
        return i < 0 ? -1 : emit(cg, LOAD_ATTR, i);
    case CDYN_SRC_ITEM:
        if (emit_source(cg, (PyObject *)src->base) < 0) {
            return -1;
        }
        i = const_index(cg, src->name);
        if (i < 0 || emit(cg, LOAD_CONST, i) < 0) {
            return -1;
        }
        return emit(cg, BINARY_SUBSCR, 0);
    case CDYN_SRC_CONST:
        i = const_index(cg, src->name);
        return i < 0 ? -1 : emit(cg, LOAD_CONST, i);
    }
    PyErr_SetString(PyExc_SystemError, "cdynamo: unknown source kind");
    return -1;
}

/* Collect graph outputs in the return value and check it can be rebuilt. */
static tr_status
collect(cdyn_tx *tx, PyObject *v, PyObject *outputs, PyObject *out_nodes)
{
    cdyn_value *x = V(v);
    switch (x->kind) {
    case VK_CONST:
        return TR_OK;
    case VK_TENSOR:
        if (x->source != NULL) {
            return TR_OK;
        }
        if (PyDict_Contains(outputs, x->node)) {
            return TR_OK;
        }
        {
            PyObject *idx = PyLong_FromSsize_t(PyList_GET_SIZE(out_nodes));
            int e = idx == NULL || PyDict_SetItem(outputs, x->node, idx) < 0 ||
                    PyList_Append(out_nodes, x->node) < 0;
            Py_XDECREF(idx);
            return e ? TR_ERROR : TR_OK;
        }
    case VK_TUPLE:
    case VK_LIST:
    case VK_DICT:
        if (x->source != NULL) {
            return TR_OK;   /* rebuilt from its source */
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(x->items); i++) {
            tr_status st = collect(tx, PyList_GET_ITEM(x->items, i), outputs, out_nodes);
            if (st != TR_OK) {
                return st;
            }
        }
        return TR_OK;
    case VK_NULL:
        return TR_OK;
    case VK_METHOD:
        if (x->flag && !PyFunction_Check(x->obj)) {
            return cdyn_tx_unsupported(tx, "cannot rebuild %S", v);
        }
        return collect(tx, PyList_GET_ITEM(x->items, 0), outputs, out_nodes);
    case VK_CALLABLE:
    case VK_PYMODULE:
    case VK_NNMODULE:
    case VK_OBJECT:
    case VK_GRADEXIT:
        return TR_OK;   /* from its source, or as a constant of the code object */
    case VK_FUNCTION:
        /* a function made in the frame (e.g. a comprehension): rebuilt by MAKE_FUNCTION when
           it has no defaults, no closure and the frame's own globals */
        if (x->flag != 1 || PyList_GET_ITEM(x->items, 0) != Py_None ||
            PyList_GET_ITEM(x->items, 1) != Py_None || PyList_GET_ITEM(x->items, 2) != Py_None) {
            return cdyn_tx_unsupported(tx, "cannot rebuild %S", v);
        }
        return TR_OK;
    case VK_ITER: {
        /* rebuilt as iter(tuple of the remaining items) */
        for (Py_ssize_t i = x->pos; i < PyList_GET_SIZE(x->items); i++) {
            tr_status st = collect(tx, PyList_GET_ITEM(x->items, i), outputs, out_nodes);
            if (st != TR_OK) {
                return st;
            }
        }
        return TR_OK;
    }
    default:
        if (x->source != NULL) {
            return TR_OK;
        }
        return cdyn_tx_unsupported(tx, "cannot rebuild %S", v);
    }
}

/* Values rebuilt once per transformed code (mutable containers, iterators): when v was
 * already built, emit its load and return 1; 0 when it must be built; -1 on error. */
static int
memo_load(cg_state *cg, PyObject *v)
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
    return emit(cg, LOAD_FAST, (int)PyLong_AsLong(slot)) < 0 ? -1 : 1;
}

/* The value v just built on the stack: keep it there and in a new temporary for later
 * memo_load calls. 0 / -1. */
static int
memo_store(cg_state *cg, PyObject *v, const char *prefix)
{
    PyObject *key = PyLong_FromVoidPtr(v), *slot = NULL;
    int tmp = new_temp(cg, prefix), e;
    slot = tmp < 0 ? NULL : PyLong_FromLong(tmp);
    e = key == NULL || slot == NULL || PyDict_SetItem(cg->memo, key, slot) < 0 ||
        emit(cg, COPY, 1) < 0 || emit(cg, STORE_FAST, tmp) < 0;
    Py_XDECREF(key);
    Py_XDECREF(slot);
    return e ? -1 : 0;
}

/* Emit code that rebuilds value v. */
static int
emit_value(cg_state *cg, int first_tmp, PyObject *v)
{
    cdyn_value *x = V(v);
    Py_ssize_t n;
    int i;
    switch (x->kind) {
    case VK_CONST:
        i = const_index(cg, x->obj);
        return i < 0 ? -1 : emit(cg, LOAD_CONST, i);
    case VK_TENSOR:
        if (x->source != NULL) {
            return emit_source(cg, x->source);
        }
        {
            PyObject *idx = PyDict_GetItemWithError(cg->outputs, x->node);
            if (idx == NULL) {
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_SystemError, "cdynamo: tensor is not a graph output");
                }
                return -1;
            }
            return emit(cg, LOAD_FAST, first_tmp + (int)PyLong_AsLong(idx));
        }
    case VK_TUPLE:
        if (x->source != NULL) {
            return emit_source(cg, x->source);
        }
        if (x->flag == 4) {
            /* a named tuple: its type's _make (namedtuple) or the type itself (structseq),
               called on the plain tuple */
            PyObject *maker = PyObject_GetAttrString(x->obj, "_make");
            if (maker == NULL) {
                PyErr_Clear();
                maker = Py_NewRef(x->obj);
            }
            i = const_index(cg, maker);
            Py_DECREF(maker);
            if (i < 0 || emit(cg, PUSH_NULL, 0) < 0 || emit(cg, LOAD_CONST, i) < 0) {
                return -1;
            }
        }
        n = PyList_GET_SIZE(x->items);
        for (Py_ssize_t k = 0; k < n; k++) {
            if (emit_value(cg, first_tmp, PyList_GET_ITEM(x->items, k)) < 0) {
                return -1;
            }
        }
        if (emit(cg, BUILD_TUPLE, (int)n) < 0) {
            return -1;
        }
        if (x->flag == 4 && (emit(cg, PRECALL, 1) < 0 || emit(cg, CALL, 1) < 0)) {
            return -1;
        }
        return 0;
    case VK_LIST:
    case VK_DICT:
        if (x->source != NULL) {   /* the real container (side effects replayed on it) */
            return emit_source(cg, x->source);
        }
        /* mutable: built once into a temporary so every use sees the same object */
        i = memo_load(cg, v);
        if (i != 0) {
            return i < 0 ? -1 : 0;
        }
        n = PyList_GET_SIZE(x->items);
        for (Py_ssize_t k = 0; k < n; k++) {
            if (x->kind == VK_DICT) {
                i = const_index(cg, PyList_GET_ITEM(x->obj, k));
                if (i < 0 || emit(cg, LOAD_CONST, i) < 0) {
                    return -1;
                }
            }
            if (emit_value(cg, first_tmp, PyList_GET_ITEM(x->items, k)) < 0) {
                return -1;
            }
        }
        if (emit(cg, x->kind == VK_LIST ? BUILD_LIST : BUILD_MAP, (int)n) < 0) {
            return -1;
        }
        return memo_store(cg, v, "obj");
    case VK_NULL:
        return emit(cg, PUSH_NULL, 0);
    case VK_FUNCTION:
        i = const_index(cg, x->obj);
        return (i < 0 || emit(cg, LOAD_CONST, i) < 0) ? -1 : emit(cg, MAKE_FUNCTION, 0);
    case VK_ITER:
        /* iter(tuple of the remaining items), built once (an iterator is stateful) */
        i = memo_load(cg, v);
        if (i != 0) {
            return i < 0 ? -1 : 0;
        }
        n = PyList_GET_SIZE(x->items) - x->pos;
        for (Py_ssize_t k = x->pos; k < PyList_GET_SIZE(x->items); k++) {
            if (emit_value(cg, first_tmp, PyList_GET_ITEM(x->items, k)) < 0) {
                return -1;
            }
        }
        if (emit(cg, BUILD_TUPLE, (int)n) < 0 || emit(cg, GET_ITER, 0) < 0) {
            return -1;
        }
        return memo_store(cg, v, "iter");
    case VK_GRADEXIT:
        /* GradModeExit(prev): restores grad mode at the end of a block split by a break */
        i = const_index(cg, cdyn_G.grad_mode_exit_type);
        if (i < 0 || emit(cg, PUSH_NULL, 0) < 0 || emit(cg, LOAD_CONST, i) < 0) {
            return -1;
        }
        i = const_index(cg, x->flag ? Py_True : Py_False);
        if (i < 0 || emit(cg, LOAD_CONST, i) < 0 || emit(cg, PRECALL, 1) < 0) {
            return -1;
        }
        return emit(cg, CALL, 1);
    case VK_METHOD: {
        PyObject *name = x->flag ? ((PyFunctionObject *)x->obj)->func_name : x->obj;
        if (emit_value(cg, first_tmp, PyList_GET_ITEM(x->items, 0)) < 0) {
            return -1;
        }
        i = name_index(cg, name);
        return i < 0 ? -1 : emit(cg, LOAD_ATTR, i);
    }
    default:
        if (x->source != NULL) {
            return emit_source(cg, x->source);
        }
        assert(x->obj != NULL);
        i = const_index(cg, x->obj);
        return i < 0 ? -1 : emit(cg, LOAD_CONST, i);
    }
}

/* Pre-build every mutable container reachable from v (so branches can share them). */
static int
emit_containers(cg_state *cg, int first_tmp, PyObject *v)
{
    cdyn_value *x = V(v);
    if ((x->kind == VK_TUPLE || x->kind == VK_LIST || x->kind == VK_DICT) && x->source == NULL) {
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(x->items); k++) {
            if (emit_containers(cg, first_tmp, PyList_GET_ITEM(x->items, k)) < 0) {
                return -1;
            }
        }
        if (x->kind != VK_TUPLE && x->source == NULL &&
            (emit_value(cg, first_tmp, v) < 0 || emit(cg, POP_TOP, 0) < 0)) {
            return -1;
        }
    }
    else if (x->kind == VK_METHOD) {
        return emit_containers(cg, first_tmp, PyList_GET_ITEM(x->items, 0));
    }
    else if (x->kind == VK_ITER) {
        for (Py_ssize_t k = x->pos; k < PyList_GET_SIZE(x->items); k++) {
            if (emit_containers(cg, first_tmp, PyList_GET_ITEM(x->items, k)) < 0) {
                return -1;
            }
        }
        return (emit_value(cg, first_tmp, v) < 0 || emit(cg, POP_TOP, 0) < 0) ? -1 : 0;
    }
    return 0;
}

/* Collect graph outputs needed by the recorded side effects. */
static tr_status
collect_effects(cdyn_tx *tx, PyObject *outputs, PyObject *out_nodes)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tx->effects); i++) {
        PyObject *e = PyList_GET_ITEM(tx->effects, i);
        PyObject *target = PyTuple_GET_ITEM(e, 1);
        tr_status st = collect(tx, PyTuple_GET_ITEM(e, 3), outputs, out_nodes);
        if (st == TR_OK && target != Py_None) {
            st = collect(tx, target, outputs, out_nodes);
        }
        if (st != TR_OK) {
            return st;
        }
    }
    return TR_OK;
}

/* Replay the side effects in program order. 0 / -1. */
static int
emit_effects(cdyn_tx *tx, cg_state *cg, int first_tmp)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tx->effects); i++) {
        PyObject *e = PyList_GET_ITEM(tx->effects, i);
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(e, 0));
        PyObject *target = PyTuple_GET_ITEM(e, 1), *key = PyTuple_GET_ITEM(e, 2);
        PyObject *value = PyTuple_GET_ITEM(e, 3);
        int k;
        if (kind == EFF_APPEND) {
            k = name_index(cg, key);
            if (emit_value(cg, first_tmp, target) < 0 || k < 0 || emit(cg, LOAD_METHOD, k) < 0 ||
                emit_value(cg, first_tmp, value) < 0 || emit(cg, PRECALL, 1) < 0 ||
                emit(cg, CALL, 1) < 0 || emit(cg, POP_TOP, 0) < 0) {
                return -1;
            }
            continue;
        }
        if (kind == EFF_DELETE_SUBSCR) {
            k = const_index(cg, key);
            if (emit_value(cg, first_tmp, target) < 0 || k < 0 || emit(cg, LOAD_CONST, k) < 0 ||
                emit(cg, DELETE_SUBSCR, 0) < 0) {
                return -1;
            }
            continue;
        }
        if (emit_value(cg, first_tmp, value) < 0) {
            return -1;
        }
        switch (kind) {
        case EFF_STORE_SUBSCR:
            k = const_index(cg, key);
            if (emit_value(cg, first_tmp, target) < 0 || k < 0 || emit(cg, LOAD_CONST, k) < 0 ||
                emit(cg, STORE_SUBSCR, 0) < 0) {
                return -1;
            }
            break;
        case EFF_STORE_ATTR:
            k = name_index(cg, key);
            if (emit_value(cg, first_tmp, target) < 0 || k < 0 || emit(cg, STORE_ATTR, k) < 0) {
                return -1;
            }
            break;
        default:
            k = name_index(cg, key);
            if (k < 0 || emit(cg, STORE_GLOBAL, k) < 0) {
                return -1;
            }
            break;
        }
    }
    return 0;
}

/* Number of argument slots of code: positional, keyword-only, *args, **kwargs. */
static int
n_arg_slots(PyCodeObject *co)
{
    return co->co_argcount + co->co_kwonlyargcount + ((co->co_flags & CO_VARARGS) ? 1 : 0) +
           ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
}

static void
cg_clear(cg_state *cg)
{
    cdyn_instrs_clear(&cg->out);
    Py_CLEAR(cg->consts);
    Py_CLEAR(cg->names);
    Py_CLEAR(cg->outputs);
    Py_CLEAR(cg->memo);
    Py_CLEAR(cg->varnames);
    Py_CLEAR(cg->free_fixups);
}

/* Start the transformed code: state, varnames, prefix. 0 / -1. */
static int
cg_open(cg_state *cg, PyCodeObject *co)
{
    PyObject *orig = NULL;
    memset(cg, 0, sizeof(*cg));
    cdyn_instrs_init(&cg->out);
    cg->lineno = co->co_firstlineno;
    cg->consts = PyList_New(0);
    cg->names = PyList_New(0);
    cg->outputs = PyDict_New();
    cg->memo = PyDict_New();
    cg->free_fixups = PyList_New(0);
    orig = PyCode_GetVarnames(co);
    if (!cg->consts || !cg->names || !cg->outputs || !cg->memo || !cg->free_fixups || !orig) {
        Py_XDECREF(orig);
        return -1;
    }
    cg->varnames = PySequence_List(orig);
    Py_DECREF(orig);
    /* None first, as CPython's compiler does (co_consts[0] is the docstring or None). */
    if (cg->varnames == NULL || PyList_Append(cg->consts, Py_None) < 0) {
        return -1;
    }
    if (co->co_nfreevars > 0 && emit(cg, COPY_FREE_VARS, co->co_nfreevars) < 0) {
        return -1;
    }
    return emit(cg, RESUME, 0);
}

/* Collect what the side effects need, compile the graph (when it has operations or
 * outputs) and emit its call, storing the outputs in temporaries; *first_tmp gets the
 * first temporary's slot. */
static tr_status
cg_graph_call(cdyn_tx *tx, cg_state *cg, PyObject *out_nodes, int *first_tmp,
              PyObject **gname, PyObject **gm)
{
    Py_ssize_t nin = PyList_GET_SIZE(tx->input_sources), nout;
    PyObject *outs = NULL, *res = NULL;
    int gi;
    tr_status st = collect_effects(tx, cg->outputs, out_nodes);
    if (st != TR_OK) {
        return st;
    }
    nout = PyList_GET_SIZE(out_nodes);
    *first_tmp = (int)PyList_GET_SIZE(cg->varnames);
    for (Py_ssize_t i = 0; i < nout; i++) {
        if (new_temp(cg, "graph_out") < 0) {
            return TR_ERROR;
        }
    }
    if (tx->n_call_nodes == 0 && nout == 0) {
        return TR_OK;
    }
    outs = PyList_AsTuple(out_nodes);
    if (outs == NULL) {
        return TR_ERROR;
    }
    res = PyObject_CallMethod(tx->glue, "compile_graph", "OOOON", tx->options, tx->graph,
                              tx->root, tx->input_values, outs);
    if (res == NULL) {
        return TR_ERROR;   /* a backend failure reaches the user */
    }
    *gname = Py_NewRef(PyTuple_GET_ITEM(res, 0));
    *gm = Py_NewRef(PyTuple_GET_ITEM(res, 2));
    if (install_global(tx, *gname, PyTuple_GET_ITEM(res, 1), 1) < 0) {
        Py_DECREF(res);
        return TR_ERROR;
    }
    Py_DECREF(res);
    gi = name_index(cg, *gname);
    if (gi < 0 || emit(cg, LOAD_GLOBAL, (gi << 1) | 1) < 0) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < nin; i++) {
        if (emit_source(cg, PyList_GET_ITEM(tx->input_sources, i)) < 0) {
            return TR_ERROR;
        }
    }
    if (emit(cg, PRECALL, (int)nin) < 0 || emit(cg, CALL, (int)nin) < 0) {
        return TR_ERROR;
    }
    if (nout == 0) {
        return emit(cg, POP_TOP, 0) < 0 ? TR_ERROR : TR_OK;
    }
    if (emit(cg, UNPACK_SEQUENCE, (int)nout) < 0) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < nout; i++) {
        if (emit(cg, STORE_FAST, *first_tmp + (int)i) < 0) {
            return TR_ERROR;
        }
    }
    return TR_OK;
}

/* Assemble the transformed code and print the output_code report. New ref or NULL. */
static PyObject *
cg_close(cdyn_tx *tx, cg_state *cg, PyObject *gname, PyObject *gm)
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

tr_status
cdyn_tx_finish(cdyn_tx *tx, PyObject *ret, PyObject **code_out)
{
    cg_state cg;
    PyObject *out_nodes = NULL, *gname = NULL, *gm = NULL;
    tr_status st = TR_ERROR;
    int first_tmp = 0;
    if (cg_open(&cg, tx->code) < 0) {
        goto done;
    }
    out_nodes = PyList_New(0);
    if (out_nodes == NULL) {
        goto done;
    }
    st = collect(tx, ret, cg.outputs, out_nodes);
    if (st != TR_OK) {
        goto done;
    }
    st = cg_graph_call(tx, &cg, out_nodes, &first_tmp, &gname, &gm);
    if (st != TR_OK) {
        goto done;
    }
    st = TR_ERROR;
    if (emit_effects(tx, &cg, first_tmp) < 0 || emit_value(&cg, first_tmp, ret) < 0 ||
        emit(&cg, RETURN_VALUE, 0) < 0) {
        goto done;
    }
    *code_out = cg_close(tx, &cg, gname, gm);
    st = *code_out ? TR_OK : TR_ERROR;
done:
    cg_clear(&cg);
    Py_XDECREF(out_nodes);
    Py_XDECREF(gname);
    Py_XDECREF(gm);
    return st;
}

/* ---- graph breaks -------------------------------------------------------------------- */

static PyObject *resume_names;   /* dict: resume code -> global name (str) */
static long resume_serial;

/* Live locals at instruction `target` of the top frame: a new list of slot indices
 * (bound in the symbolic state, or untouched arguments), free variables excluded. */
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
    out = PyList_New(0);
    for (int i = n - nfree; i < n && co->co_argcount > 0; i++) {
        /* zero-argument super() reads the first argument implicitly: keep it first */
        if (i >= n - nfree && PyUnicode_CompareWithASCIIString(
                                  PyTuple_GET_ITEM(co->co_localsplusnames, i), "__class__") == 0) {
            live[0] = 1;
        }
    }
    for (int i = 0; out != NULL && i < n - nfree; i++) {
        int bound = fs->locals[i] != NULL || (i < n_arg_slots(co) && tx->frame->localsplus[i]);
        if (live[i] && bound) {
            PyObject *k = PyLong_FromLong(i);
            if (k == NULL || PyList_Append(out, k) < 0) {
                Py_XDECREF(k);
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
        return PyList_GET_SIZE(V(v)->items) ? PyList_GET_ITEM(V(v)->items, 0) : NULL;
    }
    return v;
}

/* Emit a call of the resume function for (target, stack) and RETURN_VALUE. stack: list of
 * values (VK_NULL for NULL slots); result_tmp >= 0 stands for a final stack slot held in
 * that temporary (the result of the breaking call). */
static tr_status
emit_resume_call(cdyn_tx *tx, cdyn_fs *fs, cg_state *cg, int first_tmp, Py_ssize_t target,
                 PyObject *stack, int result_tmp)
{
    PyCodeObject *co = tx->code;
    Py_ssize_t nstack = PyList_GET_SIZE(stack) + (result_tmp >= 0 ? 1 : 0);
    unsigned char *mask = PyMem_Calloc(nstack + 1, 1);
    PyObject *slots = NULL, *names = NULL, *code = NULL, *gname = NULL, *fn = NULL;
    tr_status st = TR_ERROR;
    int nparams = 0, i;
    if (mask == NULL) {
        PyErr_NoMemory();
        return TR_ERROR;
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(stack); k++) {
        mask[k] = V(PyList_GET_ITEM(stack, k))->kind == VK_NULL;
    }
    slots = live_slots(tx, fs, target);
    if (slots == NULL) {
        goto done;
    }
    names = PyTuple_New(PyList_GET_SIZE(slots));
    if (names == NULL) {
        goto done;
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(slots); k++) {
        int idx = (int)PyLong_AsLong(PyList_GET_ITEM(slots, k));
        PyTuple_SET_ITEM(names, k, Py_NewRef(PyTuple_GET_ITEM(co->co_localsplusnames, idx)));
    }
    code = cdyn_resume_code(co, (int)target, (int)nstack, mask, names);
    if (code == NULL || PyList_Append(tx->resume_codes, code) < 0) {
        goto done;
    }
    if (co->co_nfreevars == 0) {
        gname = PyDict_GetItemWithError(resume_names, code);
        if (gname == NULL) {
            if (PyErr_Occurred()) {
                goto done;
            }
            gname = PyUnicode_FromFormat("__resume_at_%d_%ld",
                                         fs->instrs.items[target].offset * 2, resume_serial++);
            if (gname == NULL || PyDict_SetItem(resume_names, code, gname) < 0) {
                goto done;
            }
        }
        else {
            Py_INCREF(gname);
        }
        fn = PyFunction_New(code, tx->frame->f_globals);
        if (fn == NULL || install_global(tx, gname, fn, 0) < 0) {
            goto done;
        }
        i = name_index(cg, gname);
        if (i < 0 || emit(cg, LOAD_GLOBAL, (i << 1) | 1) < 0) {
            goto done;
        }
    }
    else {
        if (emit(cg, PUSH_NULL, 0) < 0) {
            goto done;
        }
        for (int k = 0; k < co->co_nfreevars; k++) {
            if (emit_free(cg, LOAD_CLOSURE, k) < 0) {
                goto done;
            }
        }
        i = const_index(cg, code);
        if (emit(cg, BUILD_TUPLE, co->co_nfreevars) < 0 || i < 0 ||
            emit(cg, LOAD_CONST, i) < 0 || emit(cg, MAKE_FUNCTION, 0x08) < 0) {
            goto done;
        }
    }
    /* parameters: the live locals, then the stack values (resume.h) */
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(slots); k++) {
        int idx = (int)PyLong_AsLong(PyList_GET_ITEM(slots, k));
        PyObject *v = live_value(fs, idx);
        if (v == NULL) {
            if (fs->locals[idx] != NULL) {   /* an empty cell */
                PyErr_SetString(PyExc_SystemError, "cdynamo: live empty cell");
                goto done;
            }
            if (emit(cg, LOAD_FAST, idx) < 0) {   /* an argument never loaded */
                goto done;
            }
        }
        else if (emit_value(cg, first_tmp, v) < 0) {
            goto done;
        }
        nparams++;
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(stack); k++) {
        PyObject *v = PyList_GET_ITEM(stack, k);
        if (V(v)->kind == VK_NULL) {
            continue;
        }
        if (emit_value(cg, first_tmp, v) < 0) {
            goto done;
        }
        nparams++;
    }
    if (result_tmp >= 0) {
        if (emit(cg, LOAD_FAST, result_tmp) < 0) {
            goto done;
        }
        nparams++;
    }
    if (emit(cg, PRECALL, nparams) < 0 || emit(cg, CALL, nparams) < 0 ||
        emit(cg, RETURN_VALUE, 0) < 0) {
        goto done;
    }
    st = TR_OK;
done:
    PyMem_Free(mask);
    Py_XDECREF(slots);
    Py_XDECREF(names);
    Py_XDECREF(code);
    Py_XDECREF(gname);
    Py_XDECREF(fn);
    return st;
}

/* Values the break code must rebuild: the stack and the live locals of every target. */
static tr_status
collect_break(cdyn_tx *tx, cdyn_fs *fs, cg_state *cg, PyObject *out_nodes,
              Py_ssize_t t1, Py_ssize_t t2)
{
    tr_status st;
    Py_ssize_t targets[2] = {t1, t2};
    for (int k = 0; k < fs->sp; k++) {
        st = collect(tx, fs->stack[k], cg->outputs, out_nodes);
        if (st != TR_OK) {
            return st;
        }
    }
    for (int t = 0; t < 2; t++) {
        PyObject *slots = NULL;
        if (targets[t] < 0) {
            continue;
        }
        slots = live_slots(tx, fs, targets[t]);
        if (slots == NULL) {
            return TR_ERROR;
        }
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(slots); k++) {
            int idx = (int)PyLong_AsLong(PyList_GET_ITEM(slots, k));
            PyObject *v = live_value(fs, idx);
            if (fs->locals[idx] != NULL && V(fs->locals[idx])->kind == VK_CELL &&
                V(fs->locals[idx])->obj != NULL) {
                Py_DECREF(slots);
                return cdyn_tx_unsupported(tx, "graph break with a live free variable cell");
            }
            if (v != NULL) {
                st = collect(tx, v, cg->outputs, out_nodes);
                if (st != TR_OK) {
                    Py_DECREF(slots);
                    return st;
                }
            }
        }
        Py_DECREF(slots);
    }
    return TR_OK;
}

tr_status
cdyn_tx_finish_break(cdyn_tx *tx, cdyn_fs *fs, PyObject **code_out)
{
    cg_state cg;
    PyObject *out_nodes = NULL, *gname = NULL, *gm = NULL, *below = NULL, *with_cond = NULL;
    const cdyn_instr *ins = &fs->instrs.items[tx->break_pc];
    Py_ssize_t next = tx->break_pc + 1, jump_to = -1;
    tr_status st = TR_ERROR;
    int first_tmp = 0, ncall = 0;
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
    out_nodes = PyList_New(0);
    if (out_nodes == NULL) {
        goto done;
    }
    if (tx->break_kind == BRK_JUMP) {
        jump_to = ins->target;
    }
    st = collect_break(tx, fs, &cg, out_nodes, next, jump_to);
    if (st != TR_OK) {
        goto done;
    }
    st = cg_graph_call(tx, &cg, out_nodes, &first_tmp, &gname, &gm);
    if (st != TR_OK) {
        goto done;
    }
    st = TR_ERROR;
    if (tx->grad_enabled != tx->grad_enabled_at_start) {
        /* The break sits inside a grad-mode block: set the mode the block runs under (the
           compiled graph need not leave global state behind). */
        int fi = const_index(&cg, cdyn_G.set_grad_enabled);
        int bi = const_index(&cg, tx->grad_enabled ? Py_True : Py_False);
        if (fi < 0 || bi < 0 || emit(&cg, PUSH_NULL, 0) < 0 || emit(&cg, LOAD_CONST, fi) < 0 ||
            emit(&cg, LOAD_CONST, bi) < 0 || emit(&cg, PRECALL, 1) < 0 ||
            emit(&cg, CALL, 1) < 0 || emit(&cg, POP_TOP, 0) < 0) {
            goto done;
        }
    }
    if (emit_effects(tx, &cg, first_tmp) < 0) {
        goto done;
    }
    for (int k = 0; k < fs->sp; k++) {
        if (emit_containers(&cg, first_tmp, fs->stack[k]) < 0) {
            goto done;
        }
    }
    {
        PyObject *slots = live_slots(tx, fs, next);
        if (slots == NULL) {
            goto done;
        }
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(slots); k++) {
            PyObject *v = live_value(fs, (int)PyLong_AsLong(PyList_GET_ITEM(slots, k)));
            if (v != NULL && emit_containers(&cg, first_tmp, v) < 0) {
                Py_DECREF(slots);
                goto done;
            }
        }
        Py_DECREF(slots);
    }
    if (tx->break_kind == BRK_JUMP) {
        PyObject *cond = fs->stack[fs->sp - 1];
        int op = ins->opcode, jump_if_true, keep;
        Py_ssize_t b_label;
        cdyn_instr *jmp;
        jump_if_true = op == POP_JUMP_FORWARD_IF_TRUE || op == POP_JUMP_BACKWARD_IF_TRUE ||
                       op == JUMP_IF_TRUE_OR_POP;
        keep = op == JUMP_IF_TRUE_OR_POP || op == JUMP_IF_FALSE_OR_POP;
        below = PyList_New(fs->sp - 1);
        if (below == NULL) {
            goto done;
        }
        for (int k = 0; k < fs->sp - 1; k++) {
            PyList_SET_ITEM(below, k, Py_NewRef(fs->stack[k]));
        }
        if (emit_value(&cg, first_tmp, cond) < 0 ||
            emit(&cg, jump_if_true ? POP_JUMP_FORWARD_IF_TRUE : POP_JUMP_FORWARD_IF_FALSE, 0) < 0) {
            goto done;
        }
        b_label = cg.out.len - 1;
        if (emit_resume_call(tx, fs, &cg, first_tmp, next, below, -1) != TR_OK) {
            goto done;
        }
        jmp = &cg.out.items[b_label];
        jmp->target = (int)cg.out.len;
        if (keep) {
            with_cond = PyList_GetSlice(below, 0, PyList_GET_SIZE(below));
            if (with_cond == NULL || PyList_Append(with_cond, cond) < 0) {
                goto done;
            }
        }
        if (emit_resume_call(tx, fs, &cg, first_tmp, jump_to, keep ? with_cond : below, -1) !=
            TR_OK) {
            goto done;
        }
    }
    else {
        int nslots, result_tmp;
        if (tx->break_kind == BRK_CALL) {
            nslots = tx->break_arg + 2;
        }
        else {
            nslots = 2 + (tx->break_arg & 1);
            if (fs->sp - nslots - 1 >= 0 && V(fs->stack[fs->sp - nslots - 1])->kind == VK_NULL) {
                nslots++;
            }
        }
        ncall = nslots;
        below = PyList_New(fs->sp - ncall);
        if (below == NULL) {
            goto done;
        }
        for (int k = 0; k < fs->sp - ncall; k++) {
            PyList_SET_ITEM(below, k, Py_NewRef(fs->stack[k]));
        }
        for (int k = fs->sp - ncall; k < fs->sp; k++) {
            if (emit_value(&cg, first_tmp, fs->stack[k]) < 0) {
                goto done;
            }
        }
        if (tx->break_kind == BRK_CALL) {
            if (tx->break_kwnames != NULL) {
                int ki = const_index(&cg, tx->break_kwnames);
                if (ki < 0 || emit(&cg, KW_NAMES, ki) < 0) {
                    goto done;
                }
            }
            if (emit(&cg, PRECALL, tx->break_arg) < 0 || emit(&cg, CALL, tx->break_arg) < 0) {
                goto done;
            }
        }
        else if (emit(&cg, CALL_FUNCTION_EX, tx->break_arg) < 0) {
            goto done;
        }
        result_tmp = new_temp(&cg, "call_result");
        if (result_tmp < 0 || emit(&cg, STORE_FAST, result_tmp) < 0) {
            goto done;
        }
        if (emit_resume_call(tx, fs, &cg, first_tmp, next, below, result_tmp) != TR_OK) {
            goto done;
        }
    }
    *code_out = cg_close(tx, &cg, gname, gm);
    st = *code_out ? TR_OK : TR_ERROR;
done:
    cg_clear(&cg);
    Py_XDECREF(out_nodes);
    Py_XDECREF(gname);
    Py_XDECREF(gm);
    Py_XDECREF(below);
    Py_XDECREF(with_cond);
    return st;
}
