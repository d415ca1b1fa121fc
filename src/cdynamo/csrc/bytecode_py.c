/* bytecode_py.c: Python-facing test helpers for the bytecode layer (see bytecode.h,
 * cdyn_bytecode_methods). They exist for tests and debugging; the engine calls the C API. */
#include "bytecode.h"
#include "analysis.h"

/* Borrowed code object from a Python argument, or NULL with TypeError. */
static PyCodeObject *as_code(PyObject *arg, const char *fn)
{
    if (!PyCode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a code object, got %.100s", fn,
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    return (PyCodeObject *)arg;
}

/* A spec that takes everything from base. */
static cdyn_code_spec spec_from(PyCodeObject *base)
{
    cdyn_code_spec spec;
    memset(&spec, 0, sizeof(spec));
    spec.base = base;
    spec.argcount = spec.posonlyargcount = spec.kwonlyargcount = -1;
    spec.flags = -1;
    spec.firstlineno = -1;
    return spec;
}

/* _bytecode_roundtrip(code) -> new code: decode then assemble, nothing changed. */
static PyObject *py_roundtrip(PyObject *self, PyObject *arg)
{
    cdyn_instr_list l;
    cdyn_code_spec spec;
    PyCodeObject *co = as_code(arg, "_bytecode_roundtrip");
    PyObject *res = NULL;
    (void)self;
    cdyn_instrs_init(&l);
    if (co == NULL || cdyn_decode(co, &l) < 0) {
        goto cleanup;
    }
    spec = spec_from(co);
    res = cdyn_assemble(&l, &spec);

cleanup:
    cdyn_instrs_clear(&l);
    return res;
}

/* _bytecode_decode(code) -> list of (opname, oparg, target or -1, offset, lineno or None). */
static PyObject *py_decode(PyObject *self, PyObject *arg)
{
    cdyn_instr_list l;
    PyCodeObject *co = as_code(arg, "_bytecode_decode");
    PyObject *list = NULL, *item = NULL, *res = NULL;
    (void)self;
    cdyn_instrs_init(&l);
    if (co == NULL || cdyn_decode(co, &l) < 0) {
        goto cleanup;
    }
    list = PyList_New(l.len);
    if (list == NULL) {
        goto cleanup;
    }
    for (Py_ssize_t i = 0; i < l.len; i++) {
        const cdyn_instr *ins = &l.items[i];
        if (ins->lineno >= 0) {
            item = Py_BuildValue("(siiii)", cdyn_opname(ins->opcode), ins->oparg, ins->target,
                                 ins->offset, ins->lineno);
        }
        else {
            item = Py_BuildValue("(siiiO)", cdyn_opname(ins->opcode), ins->oparg, ins->target,
                                 ins->offset, Py_None);
        }
        if (item == NULL) {
            goto cleanup;
        }
        PyList_SET_ITEM(list, i, item);   /* steals item */
        item = NULL;
    }
    res = Py_NewRef(list);

cleanup:
    cdyn_instrs_clear(&l);
    Py_XDECREF(item);
    Py_XDECREF(list);
    return res;
}

/* _bytecode_decode_full(code) -> list of (opname, oparg, target, offset, lineno, end_lineno,
 * col, end_col, exc_handler, exc_depth, exc_lasti): every cdyn_instr field, -1 as is. */
static PyObject *py_decode_full(PyObject *self, PyObject *arg)
{
    cdyn_instr_list l;
    PyCodeObject *co = as_code(arg, "_bytecode_decode_full");
    PyObject *list = NULL, *res = NULL;
    (void)self;
    cdyn_instrs_init(&l);
    if (co == NULL || cdyn_decode(co, &l) < 0) {
        goto cleanup;
    }
    list = PyList_New(l.len);
    if (list == NULL) {
        goto cleanup;
    }
    for (Py_ssize_t i = 0; i < l.len; i++) {
        const cdyn_instr *ins = &l.items[i];
        PyObject *item = Py_BuildValue("(siiiiiiiiiii)", cdyn_opname(ins->opcode), ins->oparg,
                                       ins->target, ins->offset, ins->lineno, ins->end_lineno,
                                       ins->col, ins->end_col, ins->exc_handler,
                                       ins->exc_depth, ins->exc_lasti, ins->fused);
        if (item == NULL) {
            goto cleanup;
        }
        PyList_SET_ITEM(list, i, item);   /* steals item */
    }
    res = Py_NewRef(list);

cleanup:
    cdyn_instrs_clear(&l);
    Py_XDECREF(list);
    return res;
}

/* The op of a name that may stand in an instruction list of this version, or -1. */
static int opcode_by_name(const char *name)
{
    int op = cdyn_op_by_name(name);
    return op >= 0 && cdyn_opcode_known(op) ? op : -1;
}

/* _bytecode_assemble(code, instrs) -> new code: instrs in _bytecode_decode_full's format
 * (offset ignored), everything else taken from code. */
static PyObject *py_assemble(PyObject *self, PyObject *args)
{
    cdyn_instr_list l;
    cdyn_code_spec spec;
    PyObject *codeobj = NULL, *seq = NULL, *fast = NULL, *res = NULL;
    PyCodeObject *co = NULL;
    (void)self;
    cdyn_instrs_init(&l);
    if (!PyArg_ParseTuple(args, "OO:_bytecode_assemble", &codeobj, &seq)) {
        goto cleanup;
    }
    co = as_code(codeobj, "_bytecode_assemble");
    if (co == NULL) {
        goto cleanup;
    }
    fast = PySequence_Fast(seq, "_bytecode_assemble: instrs must be a sequence");
    if (fast == NULL) {
        goto cleanup;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); i++) {
        const char *name = NULL;
        int offset = -1;
        cdyn_instr ins = cdyn_instr_make(NOP, 0);
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "siiiiiiiiii|i", &name,
                              &ins.oparg, &ins.target, &offset, &ins.lineno, &ins.end_lineno,
                              &ins.col, &ins.end_col, &ins.exc_handler, &ins.exc_depth,
                              &ins.exc_lasti, &ins.fused)) {
            goto cleanup;
        }
        ins.opcode = opcode_by_name(name);
        if (ins.opcode < 0) {
            PyErr_Format(PyExc_ValueError, "_bytecode_assemble: instruction %zd: unknown "
                         "opcode %.100s", i, name);
            goto cleanup;
        }
        if (cdyn_instrs_append(&l, &ins) < 0) {
            goto cleanup;
        }
    }
    spec = spec_from(co);
    res = cdyn_assemble(&l, &spec);

cleanup:
    Py_XDECREF(fast);
    cdyn_instrs_clear(&l);
    return res;
}

/* _stackdepth(code) -> int: flow-analysis stack depth of the decoded code. */
static PyObject *py_stackdepth(PyObject *self, PyObject *arg)
{
    cdyn_instr_list l;
    PyCodeObject *co = as_code(arg, "_stackdepth");
    PyObject *res = NULL;
    int depth;
    (void)self;
    cdyn_instrs_init(&l);
    if (co == NULL || cdyn_decode(co, &l) < 0) {
        goto cleanup;
    }
    depth = cdyn_stackdepth(&l);
    if (depth >= 0) {
        res = PyLong_FromLong(depth);
    }

cleanup:
    cdyn_instrs_clear(&l);
    return res;
}

/* 1 when no instruction may be put right before ins: a CALL that follows its PRECALL
 * (specialised PRECALLs skip over the CALL), or a RESUME after a yield (generators read
 * the unit after YIELD_VALUE). */
static int must_stay_adjacent(const cdyn_instr_list *l, Py_ssize_t i)
{
    const cdyn_instr *ins = &l->items[i];
    if ((ins->opcode == RESUME && ins->oparg > 0) || ins->fused) {
        return 1;   /* a fused half stays fused (3.13) */
    }
    if (ins->opcode == END_FOR || (i > 0 && l->items[i - 1].opcode == END_FOR &&
                                   CDYN_FOR_ITER_SKIPS > 1)) {
        return 1;   /* an exhausted FOR_ITER skips the units at its target (3.12+) */
    }
    return ins->opcode == CALL && i > 0 &&
           (l->items[i - 1].opcode == PRECALL || l->items[i - 1].opcode == KW_NAMES);
}

/* _bytecode_insert_nops(code, n, stride=0) -> new code with NOPs inserted (bytecode.h).
 * A NOP copies the position and handler of the instruction it precedes; jumps to that
 * instruction now land on the first NOP. */
static PyObject *py_insert_nops(PyObject *self, PyObject *args)
{
    cdyn_instr_list l, out;
    cdyn_code_spec spec;
    PyObject *codeobj = NULL, *res = NULL;
    PyCodeObject *co = NULL;
    Py_ssize_t *newidx = NULL;
    int n = 0, stride = 0;
    (void)self;
    cdyn_instrs_init(&l);
    cdyn_instrs_init(&out);
    if (!PyArg_ParseTuple(args, "Oi|i:_bytecode_insert_nops", &codeobj, &n, &stride)) {
        goto cleanup;
    }
    co = as_code(codeobj, "_bytecode_insert_nops");
    if (co == NULL || cdyn_decode(co, &l) < 0) {
        goto cleanup;
    }
    if (n < 0 || stride < 0) {
        PyErr_SetString(PyExc_ValueError, "_bytecode_insert_nops: n and stride must be >= 0");
        goto cleanup;
    }
    newidx = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(l.len + 1));
    if (newidx == NULL) {
        PyErr_NoMemory();
        goto cleanup;
    }
    for (Py_ssize_t i = 0; i < l.len; i++) {
        const cdyn_instr *ins = &l.items[i];
        int here = (i == 0 || (stride > 0 && i % stride == 0)) && !must_stay_adjacent(&l, i);
        newidx[i] = out.len;
        for (int k = 0; here && k < n; k++) {
            cdyn_instr nop = *ins;
            nop.opcode = NOP;
            nop.oparg = 0;
            nop.target = -1;
            nop.offset = -1;
            if (cdyn_instrs_append(&out, &nop) < 0) {
                goto cleanup;
            }
        }
        if (cdyn_instrs_append(&out, ins) < 0) {
            goto cleanup;
        }
    }
    for (Py_ssize_t i = 0; i < out.len; i++) {
        cdyn_instr *ins = &out.items[i];
        if (ins->target >= 0) {
            ins->target = (int)newidx[ins->target];
        }
        if (ins->exc_handler >= 0) {
            ins->exc_handler = (int)newidx[ins->exc_handler];
        }
    }
    spec = spec_from(co);
    res = cdyn_assemble(&out, &spec);

cleanup:
    PyMem_Free(newidx);
    cdyn_instrs_clear(&l);
    cdyn_instrs_clear(&out);
    return res;
}

/* _live_locals(code, index) -> tuple of the localsplus slots live at instruction index
 * (an index into _bytecode_decode's list). */
static PyObject *py_live_locals(PyObject *self, PyObject *args)
{
    cdyn_instr_list l;
    PyObject *codeobj = NULL, *res = NULL, *list = NULL;
    PyCodeObject *co = NULL;
    unsigned char *live = NULL;
    Py_ssize_t index = 0;
    (void)self;
    cdyn_instrs_init(&l);
    if (!PyArg_ParseTuple(args, "On:_live_locals", &codeobj, &index)) {
        goto cleanup;
    }
    co = as_code(codeobj, "_live_locals");
    if (co == NULL || cdyn_decode(co, &l) < 0) {
        goto cleanup;
    }
    live = PyMem_Malloc((size_t)co->co_nlocalsplus + 1);
    if (live == NULL) {
        PyErr_NoMemory();
        goto cleanup;
    }
    if (cdyn_live_locals(&l, index, co->co_nlocalsplus, live) < 0) {
        goto cleanup;
    }
    list = PyList_New(0);
    if (list == NULL) {
        goto cleanup;
    }
    for (int s = 0; s < co->co_nlocalsplus; s++) {
        PyObject *v = NULL;
        if (!live[s]) {
            continue;
        }
        v = PyLong_FromLong(s);
        if (v == NULL || PyList_Append(list, v) < 0) {
            Py_XDECREF(v);
            goto cleanup;
        }
        Py_DECREF(v);
    }
    res = PyList_AsTuple(list);

cleanup:
    PyMem_Free(live);
    Py_XDECREF(list);
    cdyn_instrs_clear(&l);
    return res;
}

/* _has_backward_jump(code, index) -> bool: a loop is reachable from instruction index. */
static PyObject *py_has_backward_jump(PyObject *self, PyObject *args)
{
    cdyn_instr_list l;
    PyObject *codeobj = NULL, *res = NULL;
    PyCodeObject *co = NULL;
    Py_ssize_t index = 0;
    int found;
    (void)self;
    cdyn_instrs_init(&l);
    if (!PyArg_ParseTuple(args, "On:_has_backward_jump", &codeobj, &index)) {
        goto cleanup;
    }
    co = as_code(codeobj, "_has_backward_jump");
    if (co == NULL || cdyn_decode(co, &l) < 0) {
        goto cleanup;
    }
    found = cdyn_has_backward_jump(&l, index);
    if (found >= 0) {
        res = PyBool_FromLong(found);
    }

cleanup:
    cdyn_instrs_clear(&l);
    return res;
}

/* New tuple of the n ints of a. */
static PyObject *
ints_tuple(const int *a, int n)
{
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t != NULL && i < n; i++) {
        PyObject *v = PyLong_FromLong(a[i]);
        if (v == NULL) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

/* _direct_plan(code) -> (callee, in_slots, nunpack, ret_positions, ret_tuple) or None; a
 * loader segment of in_slots is (loader, slot, n). */
static PyObject *py_direct_plan(PyObject *self, PyObject *codeobj)
{
    (void)self;
    cdyn_direct_plan p;
    PyObject *in = NULL, *ret = NULL, *res = NULL;
    PyCodeObject *co = as_code(codeobj, "_direct_plan");
    int r = co != NULL ? cdyn_direct_plan_of(co, &p) : -1;
    if (r <= 0) {
        return r < 0 ? NULL : Py_NewRef(Py_None);
    }
    in = ints_tuple(p.in, p.nin);
    for (int i = 0; in != NULL && i < p.nin; i++) {
        if (p.in[i] < 0) {    /* a loader segment: (loader, slot, n) */
            int j = -1 - p.in[i];
            PyObject *seg = Py_BuildValue("(Oii)", p.load[j].fn, p.load[j].slot, p.load[j].n);
            if (seg == NULL) {
                Py_CLEAR(in);
                break;
            }
            Py_SETREF(PyTuple_GET_ITEM(in, i), seg);
        }
    }
    ret = ints_tuple(p.ret, p.nret);
    if (in != NULL && ret != NULL) {
        res = Py_BuildValue("(OOiOO)", p.callee, in, p.nunpack, ret, p.ret_tuple ? Py_True : Py_False);
    }
    Py_XDECREF(in);
    Py_XDECREF(ret);
    return res;
}

PyMethodDef cdyn_bytecode_methods[] = {
    {"_direct_plan", py_direct_plan, METH_O,
     "_direct_plan(code) -> (callee, in_slots, nunpack, ret_positions, ret_tuple) when the hook "
     "runs code without a frame (bytecode.h cdyn_direct_plan_of), else None."},
    {"_bytecode_roundtrip", py_roundtrip, METH_O,
     "_bytecode_roundtrip(code) -> code: decode and re-assemble with nothing changed."},
    {"_bytecode_decode", py_decode, METH_O,
     "_bytecode_decode(code) -> [(opname, oparg, target_index or -1, offset_in_units, "
     "lineno or None)]"},
    {"_bytecode_decode_full", py_decode_full, METH_O,
     "_bytecode_decode_full(code) -> [(opname, oparg, target, offset, lineno, end_lineno, "
     "col, end_col, exc_handler, exc_depth, exc_lasti)]"},
    {"_bytecode_assemble", py_assemble, METH_VARARGS,
     "_bytecode_assemble(code, instrs) -> code built from instrs (decode_full format) and "
     "code's other fields."},
    {"_stackdepth", py_stackdepth, METH_O,
     "_stackdepth(code) -> int: stack depth computed by flow analysis."},
    {"_bytecode_insert_nops", py_insert_nops, METH_VARARGS,
     "_bytecode_insert_nops(code, n, stride=0) -> code with n NOPs before instruction 0 "
     "and every stride-th instruction."},
    {"_live_locals", py_live_locals, METH_VARARGS,
     "_live_locals(code, index) -> tuple of localsplus slots live at instruction index."},
    {"_has_backward_jump", py_has_backward_jump, METH_VARARGS,
     "_has_backward_jump(code, index) -> bool: a backward jump is reachable from index."},
    {NULL, NULL, 0, NULL},
};
