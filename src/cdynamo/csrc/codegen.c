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

typedef struct {
    cdyn_instr_list out;
    PyObject *consts;     /* list */
    PyObject *names;      /* list of str */
    PyObject *outputs;    /* dict: node -> output index */
    int first_free;       /* localsplus index of the first free variable in the new code */
    int lineno;
} cg_state;

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
        return emit(cg, LOAD_DEREF, cg->first_free + src->index);
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
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(x->items); i++) {
            tr_status st = collect(tx, PyList_GET_ITEM(x->items, i), outputs, out_nodes);
            if (st != TR_OK) {
                return st;
            }
        }
        return TR_OK;
    default:
        if (x->source != NULL) {
            return TR_OK;
        }
        return cdyn_tx_unsupported(tx, "cannot rebuild a returned %S", v);
    }
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
    case VK_LIST:
        n = PyList_GET_SIZE(x->items);
        for (Py_ssize_t k = 0; k < n; k++) {
            if (emit_value(cg, first_tmp, PyList_GET_ITEM(x->items, k)) < 0) {
                return -1;
            }
        }
        return emit(cg, x->kind == VK_TUPLE ? BUILD_TUPLE : BUILD_LIST, (int)n);
    case VK_DICT:
        n = PyList_GET_SIZE(x->items);
        for (Py_ssize_t k = 0; k < n; k++) {
            i = const_index(cg, PyList_GET_ITEM(x->obj, k));
            if (i < 0 || emit(cg, LOAD_CONST, i) < 0 ||
                emit_value(cg, first_tmp, PyList_GET_ITEM(x->items, k)) < 0) {
                return -1;
            }
        }
        return emit(cg, BUILD_MAP, (int)n);
    default:
        assert(x->source != NULL);
        return emit_source(cg, x->source);
    }
}

/* Number of argument slots of code: positional, keyword-only, *args, **kwargs. */
static int
n_arg_slots(PyCodeObject *co)
{
    return co->co_argcount + co->co_kwonlyargcount + ((co->co_flags & CO_VARARGS) ? 1 : 0) +
           ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
}

tr_status
cdyn_tx_finish(cdyn_tx *tx, PyObject *ret, PyObject **code_out)
{
    PyCodeObject *co = tx->code;
    cg_state cg;
    PyObject *out_nodes = NULL, *res = NULL, *gname = NULL, *gm = NULL, *varnames = NULL,
             *consts = NULL, *names = NULL, *empty = NULL, *newcode = NULL, *guard_strs = NULL,
             *rep = NULL;
    tr_status st = TR_ERROR;
    int nargs = n_arg_slots(co), first_tmp, ntmp = 0;

    memset(&cg, 0, sizeof(cg));
    cdyn_instrs_init(&cg.out);
    cg.lineno = co->co_firstlineno;
    cg.consts = PyList_New(0);
    cg.names = PyList_New(0);
    cg.outputs = PyDict_New();
    out_nodes = PyList_New(0);
    if (!cg.consts || !cg.names || !cg.outputs || !out_nodes) {
        goto done;
    }
    /* None first, as CPython's compiler does for functions (co_consts[0] is the docstring
       or None). */
    if (PyList_Append(cg.consts, Py_None) < 0) {
        goto done;
    }
    st = collect(tx, ret, cg.outputs, out_nodes);
    if (st != TR_OK) {
        goto done;
    }
    st = TR_ERROR;
    ntmp = (int)PyList_GET_SIZE(out_nodes);
    /* varnames: the original ones, then the graph-output temporaries */
    {
        PyObject *orig = PyCode_GetVarnames(co);
        if (orig == NULL) {
            goto done;
        }
        varnames = PyList_New(0);
        if (varnames == NULL) {
            Py_DECREF(orig);
            goto done;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(orig); i++) {
            PyList_Append(varnames, PyTuple_GET_ITEM(orig, i));
        }
        Py_DECREF(orig);
        first_tmp = (int)PyList_GET_SIZE(varnames);
        for (int i = 0; i < ntmp; i++) {
            PyObject *nm = PyUnicode_FromFormat("___graph_out_%d", i);
            if (nm == NULL || PyList_Append(varnames, nm) < 0) {
                Py_XDECREF(nm);
                goto done;
            }
            Py_DECREF(nm);
        }
        cg.first_free = (int)PyList_GET_SIZE(varnames);   /* no cell variables */
    }
    /* prefix */
    if (co->co_nfreevars > 0 && emit(&cg, COPY_FREE_VARS, co->co_nfreevars) < 0) {
        goto done;
    }
    if (emit(&cg, RESUME, 0) < 0) {
        goto done;
    }
    if (tx->n_call_nodes > 0 || ntmp > 0) {
        Py_ssize_t nin = PyList_GET_SIZE(tx->input_sources);
        PyObject *outs = PyList_AsTuple(out_nodes);
        if (outs == NULL) {
            goto done;
        }
        res = PyObject_CallMethod(tx->glue, "compile_graph", "OOOON", tx->options, tx->graph,
                                  tx->root, tx->input_values, outs);
        if (res == NULL) {
            goto done;   /* backend failure reaches the user */
        }
        gname = Py_NewRef(PyTuple_GET_ITEM(res, 0));
        gm = Py_NewRef(PyTuple_GET_ITEM(res, 2));
        if (PyDict_SetItem(tx->frame->f_globals, gname, PyTuple_GET_ITEM(res, 1)) < 0) {
            goto done;
        }
        int gi = name_index(&cg, gname);
        if (gi < 0 || emit(&cg, LOAD_GLOBAL, (gi << 1) | 1) < 0) {
            goto done;
        }
        for (Py_ssize_t i = 0; i < nin; i++) {
            if (emit_source(&cg, PyList_GET_ITEM(tx->input_sources, i)) < 0) {
                goto done;
            }
        }
        if (emit(&cg, PRECALL, (int)nin) < 0 || emit(&cg, CALL, (int)nin) < 0) {
            goto done;
        }
        if (ntmp > 0) {
            if (emit(&cg, UNPACK_SEQUENCE, ntmp) < 0) {
                goto done;
            }
            for (int i = 0; i < ntmp; i++) {
                if (emit(&cg, STORE_FAST, first_tmp + i) < 0) {
                    goto done;
                }
            }
        }
        else if (emit(&cg, POP_TOP, 0) < 0) {
            goto done;
        }
    }
    if (emit_value(&cg, first_tmp, ret) < 0 || emit(&cg, RETURN_VALUE, 0) < 0) {
        goto done;
    }
    consts = PyList_AsTuple(cg.consts);
    names = PyList_AsTuple(cg.names);
    {
        PyObject *vt = PyList_AsTuple(varnames);
        Py_SETREF(varnames, vt);
    }
    empty = PyTuple_New(0);
    if (!consts || !names || !varnames || !empty) {
        goto done;
    }
    {
        cdyn_code_spec spec;
        PyObject *freevars = PyCode_GetFreevars(co);
        if (freevars == NULL) {
            goto done;
        }
        memset(&spec, 0, sizeof(spec));
        spec.base = co;
        spec.argcount = nargs;
        spec.posonlyargcount = 0;
        spec.kwonlyargcount = 0;
        spec.flags = co->co_flags & ~(CO_VARARGS | CO_VARKEYWORDS);
        spec.consts = consts;
        spec.names = names;
        spec.varnames = varnames;
        spec.cellvars = empty;
        spec.freevars = freevars;
        spec.name = NULL;
        spec.qualname = NULL;
        spec.firstlineno = -1;
        newcode = cdyn_assemble(&cg.out, &spec);
        Py_DECREF(freevars);
        if (newcode == NULL) {
            goto done;
        }
    }
    guard_strs = cdyn_guards_describe(tx->guards);
    if (guard_strs == NULL) {
        goto done;
    }
    rep = PyObject_CallMethod(tx->glue, "report", "OOOOO", gname ? gname : Py_None,
                              gm ? gm : Py_None, (PyObject *)co, newcode, guard_strs);
    if (rep == NULL) {
        goto done;
    }
    cdyn_log(20, "done tracing %U (%d ops, %zd inputs)", co->co_qualname, tx->n_call_nodes,
             PyList_GET_SIZE(tx->input_sources));
    *code_out = newcode;
    newcode = NULL;
    st = TR_OK;
done:
    cdyn_instrs_clear(&cg.out);
    Py_XDECREF(cg.consts);
    Py_XDECREF(cg.names);
    Py_XDECREF(cg.outputs);
    Py_XDECREF(out_nodes);
    Py_XDECREF(res);
    Py_XDECREF(gname);
    Py_XDECREF(gm);
    Py_XDECREF(varnames);
    Py_XDECREF(consts);
    Py_XDECREF(names);
    Py_XDECREF(empty);
    Py_XDECREF(newcode);
    Py_XDECREF(guard_strs);
    Py_XDECREF(rep);
    return st;
}
