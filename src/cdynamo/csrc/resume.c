/* resume.c: generate resume functions (see resume.h for the layout and the contract).
 *
 * Build order of one resume code:
 *   map a resume code back to its original -> cache lookup -> decode the original ->
 *   new varnames and localsplus layout (mirroring PyCode_NewWithPosOnlyArgs of 3.11.7,
 *   which merges a cellvar that is also a varname into the varname's slot) -> prologue ->
 *   remapped copy of the original -> cdyn_assemble -> check the layout CPython built ->
 *   record the origin in co_extra -> cache.
 */
#include "resume.h"
#include "bytecode.h"
#include "analysis.h"

/* Origin record of a resume code, owned by the code object's co_extra slot. */
typedef struct {
    PyObject *orig;        /* strong reference to the original code */
    int prologue_len;
    int bounces;           /* its target lies in a loop of the original: called through
                              cdyn_resume_trampoline, it may return a bounce */
} resume_origin;

static Py_ssize_t origin_extra_index = -1;   /* co_extra index, -1 until first use */
static PyObject *resume_cache = NULL;        /* dict: (id(orig), target, mask bytes, live)
                                                -> (orig, resume code); owned */

/* freefunc of the co_extra slot: drop the record when the resume code dies. */
static void
origin_free(void *p)
{
    resume_origin *rec = (resume_origin *)p;
    if (rec != NULL) {
        Py_XDECREF(rec->orig);
        PyMem_Free(rec);
    }
}

/* Contract: see resume.h. Reads the co_extra record; a failing read counts as "not a
 * resume code" and leaves no exception behind. */
int
cdyn_resume_origin(PyCodeObject *code, PyCodeObject **orig, int *prologue_len)
{
    void *p = NULL;
    resume_origin *rec = NULL;
    int rc = 0;

    if (origin_extra_index < 0 || code == NULL) {
        goto cleanup;
    }
    if (cdyn_code_get_extra((PyObject *)code, origin_extra_index, &p) < 0) {
        PyErr_Clear();
        goto cleanup;
    }
    rec = (resume_origin *)p;
    if (rec == NULL) {
        goto cleanup;
    }
    assert(rec->orig != NULL && PyCode_Check(rec->orig));
    *orig = (PyCodeObject *)rec->orig;
    *prologue_len = rec->prologue_len;
    rc = 1;

cleanup:
    return rc;
}

/* Contract: see resume.h. */
int
cdyn_resume_bounces(PyCodeObject *code)
{
    void *p = NULL;
    if (origin_extra_index < 0 || code == NULL ||
        cdyn_code_get_extra((PyObject *)code, origin_extra_index, &p) < 0) {
        PyErr_Clear();
        return 0;
    }
    return p != NULL && ((resume_origin *)p)->bounces;
}

/* The first item of a bounce tuple: a private object no user code can see. */
static PyObject *bounce_marker;

/* Contract: see resume.h. */
PyObject *
cdyn_resume_bounce_marker(void)
{
    if (bounce_marker == NULL) {
        bounce_marker = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    }
    return bounce_marker;
}

/* _resume_trampoline(fn, *args): call fn(*args), then, while the result is a bounce
 * (marker, fn2, *args2) made by the generated code of a resume function in a loop, call
 * fn2(*args2) in its place. Returns the first result that is not a bounce (new). */
static PyObject *
py_resume_trampoline(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *r = NULL;
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "_resume_trampoline: expected a function");
        return NULL;
    }
    r = PyObject_Vectorcall(args[0], args + 1, nargs - 1, NULL);
    while (r != NULL && PyTuple_CheckExact(r) && PyTuple_GET_SIZE(r) >= 2 &&
           PyTuple_GET_ITEM(r, 0) == bounce_marker && bounce_marker != NULL) {
        PyObject *next = PyObject_Vectorcall(PyTuple_GET_ITEM(r, 1), &PyTuple_GET_ITEM(r, 2),
                                             PyTuple_GET_SIZE(r) - 2, NULL);
        Py_DECREF(r);
        r = next;
    }
    return r;
}

static PyMethodDef trampoline_def = {
    "_resume_trampoline", (PyCFunction)(void (*)(void))py_resume_trampoline, METH_FASTCALL,
    "_resume_trampoline(fn, *args): fn(*args), following the bounces of resume functions "
    "in loops"};

/* Contract: see resume.h. */
PyObject *
cdyn_resume_trampoline(void)
{
    static PyObject *fn;
    if (fn == NULL) {
        fn = PyCFunction_New(&trampoline_def, NULL);
    }
    return fn;
}

/* Contract: see resume.h. */
void
cdyn_resume_reset(void)
{
    Py_CLEAR(resume_cache);
}

/* Record orig (borrowed; a new reference is kept) as the origin of code. 0, or -1 with an
 * exception. */
static int
origin_set(PyObject *code, PyObject *orig, int prologue_len, int bounces)
{
    resume_origin *rec = NULL;
    int rc = -1;

    if (origin_extra_index < 0) {
        origin_extra_index = cdyn_request_code_extra_index(origin_free);
        if (origin_extra_index < 0) {
            PyErr_SetString(PyExc_RuntimeError, "cdynamo: no co_extra index left");
            goto cleanup;
        }
    }
    rec = PyMem_Malloc(sizeof(*rec));
    if (rec == NULL) {
        PyErr_NoMemory();
        goto cleanup;
    }
    rec->orig = Py_NewRef(orig);
    rec->prologue_len = prologue_len;
    rec->bounces = bounces;
    if (cdyn_code_set_extra(code, origin_extra_index, rec) < 0) {
        goto cleanup;
    }
    rec = NULL;   /* owned by the code object now */
    rc = 0;

cleanup:
    origin_free(rec);
    return rc;
}

/* 1 when name (str) is in tuple t, 0 when not, -1 with an exception. */
static int
tuple_has(PyObject *t, PyObject *name)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++) {
        int r = PyUnicode_Compare(PyTuple_GET_ITEM(t, i), name);
        if (r == 0) {
            return 1;
        }
        if (r == -1 && PyErr_Occurred()) {
            return -1;
        }
    }
    return 0;
}

/* Check live (borrowed) against orig: a tuple of distinct str naming local or cell slots
 * of orig, none spelled like a stack parameter. 0, or -1 with TypeError/ValueError. */
static int
check_live(PyCodeObject *orig, PyObject *live)
{
    PyObject *names = orig->co_localsplusnames;
    PyObject *kinds = orig->co_localspluskinds;
    Py_ssize_t n = PyTuple_GET_SIZE(live);
    int rc = -1;

    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *nm = PyTuple_GET_ITEM(live, i);
        Py_ssize_t slot = -1;
        if (!PyUnicode_Check(nm)) {
            PyErr_Format(PyExc_TypeError, "resume: live names must be str, not %.100s",
                         Py_TYPE(nm)->tp_name);
            goto cleanup;
        }
        for (Py_ssize_t j = 0; j < i; j++) {
            int r = PyUnicode_Compare(PyTuple_GET_ITEM(live, j), nm);
            if (r == 0) {
                PyErr_Format(PyExc_ValueError, "resume: live name %R given twice", nm);
                goto cleanup;
            }
            if (r == -1 && PyErr_Occurred()) {
                goto cleanup;
            }
        }
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(names); j++) {
            int r = PyUnicode_Compare(PyTuple_GET_ITEM(names, j), nm);
            if (r == 0) {
                slot = j;
                break;
            }
            if (r == -1 && PyErr_Occurred()) {
                goto cleanup;
            }
        }
        if (slot < 0) {
            PyErr_Format(PyExc_ValueError, "resume: %R is not a local variable of %U", nm,
                         orig->co_qualname);
            goto cleanup;
        }
        if (_PyLocals_GetKind(kinds, (int)slot) & CO_FAST_FREE) {
            PyErr_Format(PyExc_ValueError,
                         "resume: %R is a free variable of %U (it comes from the closure)",
                         nm, orig->co_qualname);
            goto cleanup;
        }
    }
    rc = 0;

cleanup:
    return rc;
}

/* New varnames tuple: live, then ___stack0..___stack{nparams-1}, then orig's varnames not
 * in live. Live locals come first so that, when orig's first argument is live, it stays
 * the first local (zero-argument super() reads it). NULL with an exception (ValueError when orig already uses a ___stackK name). */
static PyObject *
build_varnames(PyCodeObject *orig, int nparams, PyObject *live)
{
    PyObject *ov = NULL, *list = NULL, *nm = NULL, *res = NULL;

    ov = PyCode_GetVarnames(orig);
    list = PyList_New(0);
    if (ov == NULL || list == NULL) {
        goto cleanup;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(live); i++) {
        if (PyList_Append(list, PyTuple_GET_ITEM(live, i)) < 0) {
            goto cleanup;
        }
    }
    for (int k = 0; k < nparams; k++) {
        int r;
        nm = PyUnicode_FromFormat("___stack%d", k);
        if (nm == NULL) {
            goto cleanup;
        }
        r = tuple_has(orig->co_localsplusnames, nm);
        if (r != 0) {
            if (r > 0) {
                PyErr_Format(PyExc_ValueError, "resume: %U already names a variable of %U",
                             nm, orig->co_qualname);
            }
            goto cleanup;
        }
        if (PyList_Append(list, nm) < 0) {
            goto cleanup;
        }
        Py_CLEAR(nm);
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(ov); i++) {
        int r = tuple_has(live, PyTuple_GET_ITEM(ov, i));
        if (r < 0) {
            goto cleanup;
        }
        if (r == 0 && PyList_Append(list, PyTuple_GET_ITEM(ov, i)) < 0) {
            goto cleanup;
        }
    }
    res = PyList_AsTuple(list);

cleanup:
    Py_XDECREF(ov);
    Py_XDECREF(list);
    Py_XDECREF(nm);
    return res;
}

/* The localsplus names CPython 3.11.7 builds from (varnames, cellvars, freevars): the
 * varnames, then each cellvar not among the varnames, then the freevars. New tuple, or
 * NULL with an exception. */
static PyObject *
expected_localsplus(PyObject *varnames, PyObject *cellvars, PyObject *freevars)
{
    PyObject *list = NULL, *res = NULL;

    list = PySequence_List(varnames);
    if (list == NULL) {
        goto cleanup;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(cellvars); i++) {
        PyObject *nm = PyTuple_GET_ITEM(cellvars, i);
        int r = tuple_has(varnames, nm);
        if (r < 0 || (r == 0 && PyList_Append(list, nm) < 0)) {
            goto cleanup;
        }
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(freevars); i++) {
        if (PyList_Append(list, PyTuple_GET_ITEM(freevars, i)) < 0) {
            goto cleanup;
        }
    }
    res = PyList_AsTuple(list);

cleanup:
    Py_XDECREF(list);
    return res;
}

/* Index of name in tuple t, or -1 (no exception: names are exact str from code objects). */
static int
index_in(PyObject *t, PyObject *name)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++) {
        if (PyUnicode_Compare(PyTuple_GET_ITEM(t, i), name) == 0) {
            return (int)i;
        }
    }
    return -1;
}

/* Append an instruction with the positions of `pos` (may be NULL: no position). 0 / -1. */
static int
emit(cdyn_instr_list *out, int opcode, int oparg, int target, const cdyn_instr *pos)
{
    cdyn_instr ins = cdyn_instr_make(opcode, oparg);
    ins.target = target;
    if (pos != NULL) {
        ins.lineno = pos->lineno;
        ins.end_lineno = pos->end_lineno;
    }
    return cdyn_instrs_append(out, &ins) < 0 ? -1 : 0;
}

/* Emit the prologue of a resume code (resume.h): MAKE_CELL per cell slot of `layout`,
 * COPY_FREE_VARS, RETURN_GENERATOR + POP_TOP for generators, RESUME, the restored stack
 * (PUSH_NULL, LOAD_FAST ___stackK, or PUSH_NULL LOAD_FAST ___stackK PRECALL 0 CALL 0 for a
 * CDYN_SLOT_CALL; the locals follow the nlive live ones) and the jump
 * to instruction `jump_to`. Positions from tpos. 0 / -1. */
static int
emit_prologue(cdyn_instr_list *out, PyObject *layout, PyObject *cellvars, int nfree, int is_gen,
              int nstack, const unsigned char *null_mask, int nlive, int jump_to,
              const cdyn_instr *tpos)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(layout); i++) {
        if (index_in(cellvars, PyTuple_GET_ITEM(layout, i)) >= 0 &&
            emit(out, MAKE_CELL, (int)i, -1, tpos) < 0) {
            return -1;
        }
    }
    if (nfree > 0 && emit(out, COPY_FREE_VARS, nfree, -1, tpos) < 0) {
        return -1;
    }
    if (is_gen && (emit(out, RETURN_GENERATOR, 0, -1, tpos) < 0 ||
                   emit(out, POP_TOP, 0, -1, tpos) < 0)) {
        return -1;
    }
    if (emit(out, RESUME, 0, -1, tpos) < 0) {
        return -1;
    }
    /* ___stackK is local number nlive + K (build_varnames) */
    for (int i = 0, k = nlive; i < nstack; i++) {
        int is_null = null_mask[i] == CDYN_SLOT_NULL;
        if (CDYN_NULL_FIRST && null_mask[i] == CDYN_SLOT_CALL && emit(out, PUSH_NULL, 0, -1, tpos) < 0) {
            return -1;
        }
        if (emit(out, is_null ? PUSH_NULL : LOAD_FAST, is_null ? 0 : k, -1, tpos) < 0) {
            return -1;
        }
        if (!CDYN_NULL_FIRST && null_mask[i] == CDYN_SLOT_CALL && emit(out, PUSH_NULL, 0, -1, tpos) < 0) {
            return -1;
        }
        if (null_mask[i] == CDYN_SLOT_CALL &&
            ((CDYN_HAS_PRECALL && emit(out, PRECALL, 0, -1, tpos) < 0) ||
             emit(out, CALL, 0, -1, tpos) < 0)) {
            return -1;
        }
        k += is_null ? 0 : 1;
    }
    return emit(out, JUMP_FORWARD, 0, jump_to, tpos);
}

/* Generate the resume code for an original code (no cache, no mapping): the work of
 * cdyn_resume_code once its arguments are checked. New reference, or NULL with an
 * exception. */
static PyObject *
generate(PyCodeObject *orig, int target, int nstack, const unsigned char *null_mask,
         PyObject *live)
{
    cdyn_instr_list src, out;
    cdyn_code_spec spec;
    PyObject *varnames = NULL, *cellvars = NULL, *freevars = NULL, *layout = NULL,
             *qualname = NULL, *code = NULL, *res = NULL;
    int *slot_map = NULL;
    int nparams = 0, nlocalsplus_orig = (int)PyTuple_GET_SIZE(orig->co_localsplusnames);
    int resume_at = -1, prologue_len, ncells = 0, is_gen, nfree;
    const cdyn_instr *tpos = NULL;

    cdyn_instrs_init(&src);
    cdyn_instrs_init(&out);
    if (cdyn_decode(orig, &src) < 0) {
        goto cleanup;
    }
    for (Py_ssize_t i = 0; i < src.len; i++) {
        if (src.items[i].opcode == RESUME) {
            resume_at = (int)i;
            break;
        }
    }
    if (resume_at < 0 || target < resume_at || target >= src.len) {
        PyErr_Format(PyExc_ValueError,
                     "resume: target %d of %U is outside [%d, %zd) (the body after the "
                     "prefix)", target, orig->co_qualname, resume_at, src.len);
        goto cleanup;
    }
    if (target > 0 && src.items[target - 1].opcode == KW_NAMES) {
        PyErr_Format(PyExc_ValueError,
                     "resume: target %d of %U separates KW_NAMES from its call", target,
                     orig->co_qualname);
        goto cleanup;
    }
    for (int i = 0; i < nstack; i++) {
        nparams += null_mask[i] == CDYN_SLOT_NULL ? 0 : 1;
    }
    varnames = build_varnames(orig, nparams, live);
    cellvars = PyCode_GetCellvars(orig);
    freevars = PyCode_GetFreevars(orig);
    if (varnames == NULL || cellvars == NULL || freevars == NULL) {
        goto cleanup;
    }
    layout = expected_localsplus(varnames, cellvars, freevars);
    if (layout == NULL) {
        goto cleanup;
    }
    /* orig localsplus index -> new localsplus index, by name */
    slot_map = PyMem_Malloc(sizeof(int) * (size_t)(nlocalsplus_orig > 0 ? nlocalsplus_orig : 1));
    if (slot_map == NULL) {
        PyErr_NoMemory();
        goto cleanup;
    }
    for (int i = 0; i < nlocalsplus_orig; i++) {
        slot_map[i] = index_in(layout, PyTuple_GET_ITEM(orig->co_localsplusnames, i));
        assert(slot_map[i] >= 0);
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(layout); i++) {
        ncells += index_in(cellvars, PyTuple_GET_ITEM(layout, i)) >= 0 ? 1 : 0;
    }
    nfree = (int)PyTuple_GET_SIZE(freevars);
    is_gen = (orig->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) != 0;
    prologue_len = ncells + (nfree > 0 ? 1 : 0) + (is_gen ? 2 : 0) + 1 + nstack + 1;
    for (int i = 0; i < nstack; i++) {
        /* PUSH_NULL, [PRECALL,] CALL: the prologue's length as decoded again (a resume
           function's own breaks find the original's instructions past it) */
        prologue_len += null_mask[i] == CDYN_SLOT_CALL ? 2 + CDYN_HAS_PRECALL : 0;
    }

    /* prologue */
    tpos = &src.items[target];
    if (emit_prologue(&out, layout, cellvars, nfree, is_gen, nstack, null_mask,
                      (int)PyTuple_GET_SIZE(live), prologue_len + target, tpos) < 0) {
        goto cleanup;
    }
    assert(out.len == prologue_len);

    /* the original, remapped */
    for (Py_ssize_t i = 0; i < src.len; i++) {
        cdyn_instr ins = src.items[i];
        if (cdyn_op_local_slot(ins.opcode)) {
            if (ins.oparg < 0 || ins.oparg >= nlocalsplus_orig) {
                PyErr_Format(PyExc_ValueError, "resume: instruction %zd of %U: bad slot %d",
                             i, orig->co_qualname, ins.oparg);
                goto cleanup;
            }
            ins.oparg = slot_map[ins.oparg];
        }
        if (ins.target >= 0) {
            ins.target += prologue_len;
        }
        if (ins.exc_handler >= 0) {
            ins.exc_handler += prologue_len;
        }
        if (cdyn_instrs_append(&out, &ins) < 0) {
            goto cleanup;
        }
    }

    qualname = PyUnicode_FromFormat("<resume in %U>", orig->co_qualname);
    if (qualname == NULL) {
        goto cleanup;
    }
    memset(&spec, 0, sizeof(spec));
    spec.base = orig;
    spec.argcount = nparams + (int)PyTuple_GET_SIZE(live);
    spec.posonlyargcount = 0;
    spec.kwonlyargcount = 0;
    spec.flags = orig->co_flags & ~(CO_VARARGS | CO_VARKEYWORDS);
    spec.varnames = varnames;
    spec.cellvars = cellvars;
    spec.freevars = freevars;
    spec.qualname = qualname;
    spec.firstlineno = -1;
    code = cdyn_assemble(&out, &spec);
    if (code == NULL) {
        goto cleanup;
    }
    {
        int same = PyObject_RichCompareBool(((PyCodeObject *)code)->co_localsplusnames,
                                            layout, Py_EQ);
        if (same < 0) {
            goto cleanup;
        }
        if (!same) {
            PyErr_Format(PyExc_SystemError,
                         "resume: CPython laid out the locals of %U as %R, expected %R",
                         orig->co_qualname, ((PyCodeObject *)code)->co_localsplusnames,
                         layout);
            goto cleanup;
        }
    }
    if (origin_set(code, (PyObject *)orig, prologue_len, cdyn_in_loop(&src, target)) < 0) {
        goto cleanup;
    }
    res = Py_NewRef(code);

cleanup:
    cdyn_instrs_clear(&src);
    cdyn_instrs_clear(&out);
    PyMem_Free(slot_map);
    Py_XDECREF(varnames);
    Py_XDECREF(cellvars);
    Py_XDECREF(freevars);
    Py_XDECREF(layout);
    Py_XDECREF(qualname);
    Py_XDECREF(code);
    return res;
}

/* Contract: see resume.h. */
PyObject *
cdyn_resume_code(PyCodeObject *orig, int target, int nstack,
                 const unsigned char *null_mask, PyObject *live)
{
    PyObject *key = NULL, *id = NULL, *mask = NULL, *hit = NULL, *entry = NULL,
             *code = NULL, *res = NULL;
    PyCodeObject *base = NULL;
    int plen = 0;

    if (orig == NULL || !PyCode_Check(orig)) {
        PyErr_SetString(PyExc_TypeError, "resume: expected a code object");
        goto cleanup;
    }
    if (live == NULL || !PyTuple_Check(live)) {
        PyErr_SetString(PyExc_TypeError, "resume: live must be a tuple of str");
        goto cleanup;
    }
    if (nstack < 0 || (nstack > 0 && null_mask == NULL)) {
        PyErr_SetString(PyExc_ValueError, "resume: bad stack layout");
        goto cleanup;
    }
    if (cdyn_resume_origin(orig, &base, &plen)) {
        orig = base;
        target -= plen;
    }
    if (check_live(orig, live) < 0) {
        goto cleanup;
    }
    id = PyLong_FromVoidPtr(orig);
    mask = PyBytes_FromStringAndSize(NULL, nstack);
    if (id == NULL || mask == NULL) {
        goto cleanup;
    }
    for (int i = 0; i < nstack; i++) {
        if (null_mask[i] > CDYN_SLOT_CALL) {
            PyErr_SetString(PyExc_ValueError, "resume: bad stack slot kind");
            goto cleanup;
        }
        PyBytes_AS_STRING(mask)[i] = (char)null_mask[i];
    }
    key = Py_BuildValue("(OiOO)", id, target, mask, live);
    if (key == NULL) {
        goto cleanup;
    }
    if (resume_cache == NULL) {
        resume_cache = PyDict_New();
        if (resume_cache == NULL) {
            goto cleanup;
        }
    }
    hit = PyDict_GetItemWithError(resume_cache, key);   /* borrowed */
    if (hit != NULL) {
        assert(PyTuple_GET_ITEM(hit, 0) == (PyObject *)orig);
        res = Py_NewRef(PyTuple_GET_ITEM(hit, 1));
        goto cleanup;
    }
    if (PyErr_Occurred()) {
        goto cleanup;
    }
    code = generate(orig, target, nstack, null_mask, live);
    if (code == NULL) {
        goto cleanup;
    }
    /* the entry holds orig so that its id in the key is never reused while cached */
    entry = PyTuple_Pack(2, (PyObject *)orig, code);
    if (entry == NULL || PyDict_SetItem(resume_cache, key, entry) < 0) {
        goto cleanup;
    }
    res = Py_NewRef(code);

cleanup:
    Py_XDECREF(key);
    Py_XDECREF(id);
    Py_XDECREF(mask);
    Py_XDECREF(entry);
    Py_XDECREF(code);
    return res;
}

/* ---------------------------------------------------------------- Python test helpers */

/* _resume_code(code, target_index, stack_null_mask, live) -> new code. */
static PyObject *
py_resume_code(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *seq = NULL, *res = NULL;
    unsigned char *mask = NULL;
    Py_ssize_t n = 0;
    int target;

    if (!_PyArg_CheckPositional("_resume_code", nargs, 4, 4)) {
        goto cleanup;
    }
    if (!PyCode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "_resume_code: expected a code object");
        goto cleanup;
    }
    target = cdyn_long_as_int(args[1]);
    if (target == -1 && PyErr_Occurred()) {
        goto cleanup;
    }
    seq = PySequence_Tuple(args[2]);
    if (seq == NULL) {
        goto cleanup;
    }
    n = PyTuple_GET_SIZE(seq);
    if (n > INT_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "_resume_code: stack too deep");
        goto cleanup;
    }
    mask = PyMem_Malloc((size_t)(n > 0 ? n : 1));
    if (mask == NULL) {
        PyErr_NoMemory();
        goto cleanup;
    }
    for (Py_ssize_t i = 0; i < n; i++) {   /* bools, or CDYN_SLOT_* ints */
        long t = PyLong_AsLong(PyTuple_GET_ITEM(seq, i));
        if (t == -1 && PyErr_Occurred()) {
            goto cleanup;
        }
        mask[i] = (unsigned char)(t < 0 || t > CDYN_SLOT_CALL ? 255 : t);
    }
    res = cdyn_resume_code((PyCodeObject *)args[0], target, (int)n, mask, args[3]);

cleanup:
    Py_XDECREF(seq);
    PyMem_Free(mask);
    return res;
}

/* _resume_origin(code) -> (orig, prologue_len) or None. */
static PyObject *
py_resume_origin(PyObject *Py_UNUSED(self), PyObject *arg)
{
    PyCodeObject *orig = NULL;
    int plen = 0;

    if (!PyCode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "_resume_origin: expected a code object");
        return NULL;
    }
    if (!cdyn_resume_origin((PyCodeObject *)arg, &orig, &plen)) {
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(Oi)", (PyObject *)orig, plen);
}

/* _resume_reset() -> None. */
static PyObject *
py_resume_reset(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(ignored))
{
    cdyn_resume_reset();
    Py_RETURN_NONE;
}

PyMethodDef cdyn_resume_methods[] = {
    {"_resume_code", (PyCFunction)(void (*)(void))py_resume_code, METH_FASTCALL,
     "_resume_code(code, target_index, stack_null_mask, live) -> resume code (mask items: "
     "bools, or 0 value / 1 NULL / 2 called slot)"},
    {"_resume_origin", py_resume_origin, METH_O,
     "_resume_origin(code) -> (original code, prologue length) or None"},
    {"_resume_reset", py_resume_reset, METH_NOARGS, "_resume_reset(): drop the resume cache"},
    {NULL, NULL, 0, NULL},
};
