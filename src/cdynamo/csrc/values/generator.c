/* values/generator.c: generators, fully inlined.
 *
 *   GENERATOR  the result of calling a generator function (a `def` with `yield`, a
 *              generator expression, a polyfill such as map or itertools.chain) while
 *              tracing. It owns a frame state of its own (cdyn_fs, in a capsule), bound to
 *              the call's arguments and suspended; next() / FOR_ITER / SEND resume it with
 *              the interpreter until its next YIELD_VALUE (the item) or RETURN_VALUE (the
 *              end), so items are made lazily, in the order eager Python makes them, and
 *              side effects interleave as they do in eager.
 *
 * A failure while the frame runs fails the instruction that resumed it (the consumer);
 * the generator is then unusable (GEN_BROKEN). When the failing top-level instruction is
 * rolled back (it becomes a graph break), a generator it started is reset to its state at
 * creation (a snapshot of its bound locals, through the undo log); one that had been started
 * before is put back from a snapshot of its frame state taken before the step advanced it
 * (gen_save / gen_restore, undo.c). Closing a generator suspended in a try block runs its
 * handlers: that cannot be undone (the frame runs unmodified).
 *
 * A yield inside try/finally, try/except or with is inlined too. Such a generator, dropped
 * while suspended there, runs its handlers as CPython does when the last reference goes:
 * after each instruction, a generator suspended in a try block (GEN_IN_TRY) that nothing
 * references any more (its reference count less the trace's own bookkeeping: tx->cyclic,
 * tx->undo, snapshots) is closed: GeneratorExit raised at its yield, its finally/__exit__
 * traced there. The top frame's locals count as dropped when it returns; one still
 * suspended in a try block at that point, or live at a graph break, is not supported (its
 * handlers would run outside the trace). close() and throw() raise into the frame the same
 * way (contextlib.contextmanager's __exit__). A finished generator's frame is cleared, as
 * CPython clears it, so the values it held can be dropped in turn.
 *
 * At a graph break or a return, a live generator is rebuilt as iter(tuple of its
 * remaining items): they are made now (drained ahead into u.gen.buffer) provided that
 * doing so has no side effect (torch._dynamo rebuilds its local generators the same way).
 */
#include "../tx.h"
#include "../codegen.h"

#define GEN_MAX_DEPTH 32        /* as inline.c's inlining depth */
#define GEN_MAX_ITEMS 100000    /* a generator drained past this is taken for infinite */

static const char *const CAPSULE = "cdynamo.generator_frame";

int
cdyn_tx_note_cyclic(cdyn_tx *tx, PyObject *v)
{
    return tx->cyclic != NULL ? PyList_Append(tx->cyclic, v) : 0;
}

/* A generator's frame state and its snapshot at creation (for a reset). fs comes first:
 * a cdyn_fs * of a generator is its gen_frame *. */
typedef struct {
    cdyn_fs fs;
    PyObject **pristine;    /* the locals after the prologue (strong or NULL), or NULL */
    Py_ssize_t pristine_pc;
    int started;            /* resumed at least once since creation or the last reset */
} gen_frame;

cdyn_fs *
cdyn_generator_frame_alloc(void)
{
    gen_frame *gf = PyMem_Calloc(1, sizeof(gen_frame));
    if (gf == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    return &gf->fs;
}

void
cdyn_fs_free(cdyn_fs *fs)
{
    gen_frame *gf = (gen_frame *)fs;
    if (gf == NULL) {
        return;
    }
    if (gf->pristine != NULL) {
        for (int i = 0; i < fs->nlocals; i++) {
            Py_XDECREF(gf->pristine[i]);
        }
        PyMem_Free(gf->pristine);
    }
    cdyn_fs_clear(fs);
    PyMem_Free(gf);
}

/* Capsule destructor: the frame state goes with the capsule. */
static void
capsule_free(PyObject *cap)
{
    cdyn_fs_free(PyCapsule_GetPointer(cap, CAPSULE));
}

/* The frame state of a generator value, or NULL once the trace ended. */
static cdyn_fs *
frame_of(PyObject *v)
{
    PyObject *cap = V(v)->u.gen.frame;
    return cap != NULL ? PyCapsule_GetPointer(cap, CAPSULE) : NULL;
}

/* Run fs (a generator's frame) until it suspends or returns, as a nested frame of the
 * current one. */
static tr_status
run_frame(cdyn_tx *tx, cdyn_fs *fs)
{
    cdyn_fs *caller = tx->cur_fs;
    tr_status st;
    if (tx->depth >= GEN_MAX_DEPTH) {
        return cdyn_tx_unsupported(tx, "generators nested too deep");
    }
    tx->depth++;
    st = cdyn_tx_run(tx, fs);
    tx->depth--;
    tx->cur_fs = caller;
    return st;
}

tr_status
cdyn_generator_new(cdyn_tx *tx, cdyn_fs *fs, PyObject **out)
{
    PyObject *v = NULL, *cap = NULL;
    tr_status st;
    cap = PyCapsule_New(fs, CAPSULE, capsule_free);
    if (cap == NULL) {
        cdyn_fs_free(fs);
        return TR_ERROR;
    }
    v = cdyn_value_alloc(VK_GENERATOR, NULL);
    if (v == NULL || cdyn_tx_note_cyclic(tx, v) < 0) {
        Py_XDECREF(v);
        Py_DECREF(cap);
        return TR_ERROR;
    }
    V(v)->u.gen.frame = cap;   /* owns fs from here */
    /* the prologue (MAKE_CELL, COPY_FREE_VARS) up to RETURN_GENERATOR, which suspends */
    st = run_frame(tx, fs);
    if (st == TR_OK && !fs->yielded) {
        st = cdyn_tx_unsupported(tx, "generator code without RETURN_GENERATOR");
    }
    if (st != TR_OK) {
        Py_DECREF(v);
        return st;
    }
    Py_CLEAR(fs->retval);
    fs->yielded = 0;
    if (fs->sp == 0) {   /* the snapshot a rollback resets it to */
        gen_frame *gf = (gen_frame *)fs;
        gf->pristine = PyMem_Calloc(fs->nlocals + 1, sizeof(PyObject *));
        for (int i = 0; gf->pristine != NULL && i < fs->nlocals; i++) {
            gf->pristine[i] = Py_XNewRef(fs->locals[i]);
        }
        gf->pristine_pc = fs->pc;
    }
    *out = v;
    return TR_OK;
}

/* An exception escaped a generator's body (tx->exc): a StopIteration becomes a
 * RuntimeError, as PEP 479 says. TR_EXCEPTION (or TR_ERROR). */
static tr_status
stop_iteration_escaped(cdyn_tx *tx)
{
    PyObject *t = tx->exc != NULL && V(tx->exc)->kind == VK_EXC ? V(tx->exc)->u.exc.type : NULL;
    PyObject *msg = NULL;
    tr_status st;
    if (t == NULL || !PyType_Check(t) ||
        !PyType_IsSubtype((PyTypeObject *)t, (PyTypeObject *)PyExc_StopIteration)) {
        return TR_EXCEPTION;
    }
    msg = cdyn_value_const_steal(PyUnicode_FromString("generator raised StopIteration"));
    if (msg == NULL) {
        return TR_ERROR;
    }
    st = cdyn_tx_raise(tx, PyExc_RuntimeError, &msg, 1);
    Py_DECREF(msg);
    return st;
}

/* Clear what a finished generator's frame holds (locals, stack), as CPython clears the frame
 * of a generator that returned or raised, so the values it referenced can be dropped; the
 * arrays stay (a rollback reset refills them). */
static void
finish(PyObject *v)
{
    cdyn_fs *fs = frame_of(v);
    V(v)->bits = (V(v)->bits | GEN_DONE) & ~GEN_IN_TRY;
    if (fs == NULL) {
        return;
    }
    for (int i = 0; i < fs->nlocals; i++) {
        Py_CLEAR(fs->locals[i]);
    }
    while (fs->sp > 0) {
        fs->sp--;
        Py_CLEAR(fs->stack[fs->sp]);
    }
    Py_CLEAR(fs->kw_names);
}

/* Run v's frame (fs, ready: a value sent pushed, or an exception's handler reached) until it
 * yields (*out the item, new) or returns (*out NULL; the value kept in u.gen.retval). An
 * exception escaping it finishes it (TR_EXCEPTION, PEP 479 applied). */
static tr_status
run_resumed(cdyn_tx *tx, PyObject *v, cdyn_fs *fs, PyObject **out)
{
    cdyn_value *g = V(v);
    Py_ssize_t n_exc_info = PyList_GET_SIZE(tx->exc_info);
    tr_status st;
    *out = NULL;
    fs->yielded = 0;
    ((gen_frame *)fs)->started = 1;
    g->bits |= GEN_RUNNING;
    st = run_frame(tx, fs);
    g->bits &= ~GEN_RUNNING;
    if (st == TR_EXCEPTION) {   /* raised out of the body: the generator is finished */
        finish(v);
        return stop_iteration_escaped(tx);
    }
    if (st == TR_OK && fs->yielded && PyList_GET_SIZE(tx->exc_info) != n_exc_info) {
        /* suspended inside an except block: the exception it handles would stay the
           caller's current one (CPython keeps it with the generator) */
        st = PyList_SetSlice(tx->exc_info, n_exc_info, PyList_GET_SIZE(tx->exc_info), NULL) < 0
                 ? TR_ERROR
                 : cdyn_tx_unsupported(tx, "yield inside an except block of a generator");
    }
    if (st != TR_OK) {
        g->bits |= GEN_BROKEN;
        return st;
    }
    if (fs->yielded) {
        *out = fs->retval;
        fs->retval = NULL;
        fs->yielded = 0;
        if (!cdyn_in_user_try(&fs->instrs, fs->pc - 1)) {
            g->bits &= ~GEN_IN_TRY;
        }
        else if (!(g->bits & GEN_IN_TRY)) {
            g->bits |= GEN_IN_TRY;
            tx->n_gen_in_try++;
        }
        return TR_OK;
    }
    g->u.gen.retval = fs->retval;   /* returned: keep the value (yield from) */
    fs->retval = NULL;
    finish(v);
    return TR_OK;
}

/* Resume the generator with the value sent (borrowed; NULL: None): *out the next item
 * (new), or NULL when it is exhausted (its return value kept in u.gen.retval). Buffered
 * items come first. */
static tr_status
resume_with(cdyn_tx *tx, PyObject *v, PyObject *sent, PyObject **out)
{
    cdyn_value *g = V(v);
    cdyn_fs *fs = NULL;
    *out = NULL;
    if (g->bits & GEN_BROKEN) {
        return cdyn_tx_unsupported(tx, "generator whose frame failed to trace");
    }
    if (g->bits & GEN_RUNNING) {
        return cdyn_tx_unsupported(tx, "generator already executing");
    }
    if (g->u.gen.buffer != NULL && g->pos < PyList_GET_SIZE(g->u.gen.buffer)) {
        *out = Py_NewRef(PyList_GET_ITEM(g->u.gen.buffer, g->pos));
        g->pos++;
        return TR_OK;
    }
    fs = frame_of(v);
    if ((g->bits & GEN_DONE) || fs == NULL) {
        return TR_OK;
    }
    if (fs->sp >= fs->stack_cap) {
        PyErr_SetString(PyExc_SystemError, "cdynamo: generator stack overflow");
        return TR_ERROR;
    }
    if (sent != NULL && !cdyn_v_is_none(sent) && !((gen_frame *)fs)->started) {
        return cdyn_tx_unsupported(tx, "send() of a value to a just-started generator");
    }
    fs->stack[fs->sp] = sent != NULL ? Py_NewRef(sent) : cdyn_value_const(Py_None);
    if (fs->stack[fs->sp] == NULL) {
        return TR_ERROR;
    }
    fs->sp++;
    return run_resumed(tx, v, fs, out);
}

/* The iterator fs delegates to while suspended in a `yield from` (borrowed: its stack top
 * under the RESUME 2 that follows the yield), or NULL. */
static PyObject *
delegate_of(cdyn_fs *fs)
{
    const cdyn_instr *next = fs->pc < fs->instrs.len ? &fs->instrs.items[fs->pc] : NULL;
    return next != NULL && next->opcode == RESUME && next->oparg == 2 && fs->sp > 0
               ? fs->stack[fs->sp - 1]
               : NULL;
}

/* Raise tx->exc (set: a TR_EXCEPTION pending) in v's frame where it is suspended and run it
 * on as resume_with does. A generator not started, or finished, only raises it (one not
 * started is finished by it, as CPython). */
static tr_status
throw_into(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    cdyn_value *g = V(v);
    cdyn_fs *fs = frame_of(v);
    tr_status st;
    *out = NULL;
    if (g->bits & (GEN_BROKEN | GEN_RUNNING)) {
        Py_CLEAR(tx->exc);
        return cdyn_tx_unsupported(tx, "throw() into a generator that is running or failed");
    }
    if (g->u.gen.buffer != NULL) {
        Py_CLEAR(tx->exc);
        return cdyn_tx_unsupported(tx, "throw() into a generator rebuilt from its items");
    }
    if (fs == NULL || (g->bits & GEN_DONE) || !((gen_frame *)fs)->started) {
        if (fs != NULL) {
            finish(v);
        }
        return TR_EXCEPTION;
    }
    st = cdyn_tx_throw_at(tx, fs, fs->pc - 1);
    if (st == TR_EXCEPTION) {   /* no handler around the yield: it goes through */
        finish(v);
        return stop_iteration_escaped(tx);
    }
    if (st != TR_OK) {
        g->bits |= GEN_BROKEN;
        return st;
    }
    return run_resumed(tx, v, fs, out);
}

/* 1 when tx->exc is an instance of the exception class cls. */
static int
exc_is(cdyn_tx *tx, PyObject *cls)
{
    PyObject *t = tx->exc != NULL && V(tx->exc)->kind == VK_EXC ? V(tx->exc)->u.exc.type : NULL;
    return t != NULL && PyType_Check(t) &&
           PyType_IsSubtype((PyTypeObject *)t, (PyTypeObject *)cls);
}

/* gen.close(): GeneratorExit raised where v is suspended (a no-op for one not started,
 * finished, or suspended outside any try block). dropped: closed because its last
 * reference went, where an exception from its handlers is not the caller's (CPython reports
 * it as unraisable): not supported. */
static tr_status
close_gen(cdyn_tx *tx, PyObject *v, int dropped)
{
    cdyn_value *g = V(v);
    cdyn_fs *fs = frame_of(v);
    PyObject *item = NULL, *inner = NULL;
    tr_status st;
    if (g->bits & (GEN_RUNNING | GEN_BROKEN)) {
        return cdyn_tx_unsupported(tx, "close() of a running generator");
    }
    if (fs != NULL && !(g->bits & GEN_DONE) && g->u.gen.buffer == NULL &&
        (inner = delegate_of(fs)) != NULL && V(inner)->kind == VK_GENERATOR) {
        /* in a `yield from`: the generator it delegates to is closed first (CPython) */
        cdyn_tx_mutated(tx, inner);
        if ((st = close_gen(tx, inner, dropped)) != TR_OK) {
            return st;
        }
    }
    if (g->u.gen.buffer != NULL || (g->bits & GEN_DONE) || fs == NULL ||
        !((gen_frame *)fs)->started || !(g->bits & GEN_IN_TRY)) {
        Py_CLEAR(g->u.gen.buffer);
        finish(v);
        return TR_OK;
    }
    st = cdyn_tx_raise(tx, PyExc_GeneratorExit, NULL, 0);
    if (st == TR_EXCEPTION) {
        st = throw_into(tx, v, &item);
    }
    if (st == TR_EXCEPTION && exc_is(tx, PyExc_GeneratorExit)) {
        Py_CLEAR(tx->exc);
        Py_CLEAR(tx->reason);
        return TR_OK;
    }
    if (st == TR_EXCEPTION && dropped) {
        Py_CLEAR(tx->exc);
        return cdyn_tx_unsupported(tx, "exception in the finally/__exit__ of a dropped generator");
    }
    if (st == TR_OK && item != NULL) {
        Py_DECREF(item);
        g->bits |= GEN_BROKEN;
        return cdyn_tx_unsupported(tx, "generator ignored GeneratorExit");
    }
    return st;
}

/* resume_with None (next()). */
static tr_status
resume(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    return resume_with(tx, v, NULL, out);
}

void
cdyn_generator_reset(PyObject *v)
{
    cdyn_value *g = V(v);
    cdyn_fs *fs = frame_of(v);
    gen_frame *gf = (gen_frame *)fs;
    if (g->kind != VK_GENERATOR || fs == NULL || gf->pristine == NULL) {
        return;
    }
    for (int i = 0; i < fs->nlocals; i++) {
        Py_XSETREF(fs->locals[i], Py_XNewRef(gf->pristine[i]));
    }
    while (fs->sp > 0) {
        fs->sp--;
        Py_CLEAR(fs->stack[fs->sp]);
    }
    Py_CLEAR(fs->retval);
    Py_CLEAR(fs->kw_names);
    fs->pc = gf->pristine_pc;
    fs->yielded = 0;
    gf->started = 0;
    g->bits &= ~(GEN_DONE | GEN_BROKEN | GEN_RUNNING | GEN_IN_TRY | GEN_FRESH);
    Py_CLEAR(g->u.gen.buffer);
    Py_CLEAR(g->u.gen.retval);
    g->pos = 0;
}

/* v is about to advance: a generator made before the checkpoint that had not started is
 * noted in the undo log (a rollback resets it); one that had started is snapshotted (its
 * frame state: gen_save). 0 / -1. */
static int
note_advance(cdyn_tx *tx, PyObject *v)
{
    cdyn_fs *fs = frame_of(v);
    if (V(v)->serial >= tx->ckpt_serial || cdyn_undo_noted(tx, v)) {
        return 0;   /* new, or put back by this step's rollback already */
    }
    if (fs == NULL || ((gen_frame *)fs)->started || ((gen_frame *)fs)->pristine == NULL ||
        V(v)->u.gen.buffer != NULL || tx->undo == NULL) {
        cdyn_tx_mutated(tx, v);
        return 0;
    }
    return cdyn_undo_reset(tx, v);
}

/* 1 when advancing v changes its state. */
static int
advances(PyObject *v)
{
    cdyn_value *g = V(v);
    return !(g->bits & GEN_DONE) ||
           (g->u.gen.buffer != NULL && g->pos < PyList_GET_SIZE(g->u.gen.buffer));
}

/* Every remaining item, as a new list of values. */
static tr_status
drain(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    PyObject *items = PyList_New(0), *item = NULL;
    tr_status st = TR_OK;
    if (items == NULL) {
        return TR_ERROR;
    }
    for (;;) {
        if (PyList_GET_SIZE(items) >= GEN_MAX_ITEMS) {
            st = cdyn_tx_unsupported(tx, "generator with more than %d items (infinite?)",
                                     GEN_MAX_ITEMS);
            break;
        }
        st = resume(tx, v, &item);
        if (st != TR_OK || item == NULL) {
            break;
        }
        if (PyList_Append(items, item) < 0) {
            st = TR_ERROR;
        }
        Py_DECREF(item);
        if (st != TR_OK) {
            break;
        }
    }
    if (st != TR_OK) {
        Py_DECREF(items);
        return st;
    }
    *out_list = items;
    return TR_OK;
}

PyObject *
cdyn_generator_retval(PyObject *v)
{
    return V(v)->kind == VK_GENERATOR ? V(v)->u.gen.retval : NULL;
}

void
cdyn_generator_set_type(PyObject *v, PyObject *type)
{
    if (V(v)->kind == VK_GENERATOR && type != NULL && PyType_Check(type)) {
        Py_XSETREF(V(v)->u.gen.ptype, Py_NewRef(type));
    }
}

/* ---- the family table --------------------------------------------------------------- */

/* next(): the next item (*out NULL when exhausted); advancing counts as a mutation. */
static tr_status
gen_next(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    if (advances(v) && note_advance(tx, v) < 0) {
        return TR_ERROR;
    }
    return resume(tx, v, out);
}

/* Every remaining item (the generator is exhausted after). */
static tr_status
gen_unpack(cdyn_tx *tx, PyObject *v, PyObject **out_list)
{
    if (advances(v) && note_advance(tx, v) < 0) {
        return TR_ERROR;
    }
    return drain(tx, v, out_list);
}

/* A generator is always true. */
static tr_status
gen_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    (void)tx;
    (void)v;
    *out = 1;
    return TR_OK;
}

/* types.GeneratorType, or the polyfilled type it stands for. */
static PyTypeObject *
gen_python_type(PyObject *v)
{
    PyObject *t = V(v)->u.gen.ptype;
    return t != NULL ? (PyTypeObject *)t : &PyGen_Type;
}

/* 1 when a graph node made after `last` (a node or NULL: the graph's start) may write a
 * tensor in place: a method or function whose name ends with "_" (add_, relu_), an
 * in-place operator (iadd, setitem), or an out= / inplace=True argument; or changes global
 * state: grad mode, autocast, inference mode, the SDPA backends (a generator whose body
 * sets them, e.g. a @contextmanager, must run where eager runs it); -1 on error. */
static int
inplace_since(cdyn_tx *tx, PyObject *last)
{
    PyObject *nodes = PyObject_GetAttrString(tx->graph, "nodes"), *lst = NULL;
    int found = 0;
    lst = nodes ? PySequence_List(nodes) : NULL;
    Py_XDECREF(nodes);
    if (lst == NULL) {
        return -1;
    }
    for (Py_ssize_t i = PyList_GET_SIZE(lst) - 1; i >= 0 && !found; i--) {
        PyObject *n = PyList_GET_ITEM(lst, i), *t = NULL, *name = NULL, *kw = NULL;
        const char *s = NULL;
        PyObject *op = NULL;
        int call;
        if (n == last) {
            break;
        }
        op = PyObject_GetAttrString(n, "op");   /* (placeholders are named after sources:
                                                     L_x_ is no in-place method) */
        call = op != NULL && PyUnicode_Check(op) &&
               PyUnicode_CompareWithASCIIString(op, "placeholder") != 0 &&
               PyUnicode_CompareWithASCIIString(op, "get_attr") != 0;
        Py_XDECREF(op);
        if (!call) {
            PyErr_Clear();
            continue;
        }
        t = PyObject_GetAttrString(n, "target");
        kw = PyObject_GetAttrString(n, "kwargs");
        if (t == NULL || kw == NULL) {
            Py_XDECREF(t);
            Py_XDECREF(kw);
            Py_DECREF(lst);
            return -1;
        }
        found = cdyn_ctx_changes_state(t);
        name = PyUnicode_Check(t) ? Py_NewRef(t) : PyObject_GetAttrString(t, "__name__");
        PyErr_Clear();
        s = name != NULL && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        PyErr_Clear();
        if (s != NULL) {
            static const char *const ops[] = {"setitem", "iadd", "iand", "ifloordiv", "ilshift",
                                              "imatmul", "imod", "imul", "ior", "ipow",
                                              "irshift", "isub", "itruediv", "ixor", NULL};
            size_t len = strlen(s);
            found = found || (len > 1 && s[len - 1] == '_' && s[0] != '_');
            for (int k = 0; !found && ops[k] != NULL; k++) {
                found = strcmp(s, ops[k]) == 0;
            }
        }
        if (PyDict_Check(kw) && (PyDict_GetItemString(kw, "out") != NULL ||
                                 PyDict_GetItemString(kw, "inplace") == Py_True)) {
            found = 1;
        }
        Py_XDECREF(name);
        Py_DECREF(t);
        Py_DECREF(kw);
    }
    Py_DECREF(lst);
    return found;
}

/* Make the remaining items now, into the buffer, refusing any side effect (an effect to
 * replay, a store into a value that existed before, an in-place tensor operation). */
static tr_status
drain_ahead(cdyn_tx *tx, PyObject *v)
{
    cdyn_value *g = V(v);
    Py_ssize_t neffects = PyList_GET_SIZE(tx->effects);
    long mutations = tx->mutations;
    long long saved_serial = tx->ckpt_serial;
    PyObject *items = NULL, *last = Py_XNewRef(tx->last_node);
    cdyn_fs *fs = frame_of(v);
    tr_status st;
    int inplace = 0, fresh = fs != NULL && !((gen_frame *)fs)->started;
    tx->ckpt_serial = cdyn_value_serial;
    st = drain(tx, v, &items);
    tx->ckpt_serial = saved_serial;
    if (st == TR_EXCEPTION) {   /* eager raises it when the items are consumed: not here */
        Py_CLEAR(tx->exc);
        st = cdyn_tx_unsupported(tx, "generator that raises, live at a graph break");
    }
    if (st == TR_OK && tx->last_node != last && (inplace = inplace_since(tx, last)) < 0) {
        st = TR_ERROR;
    }
    Py_XDECREF(last);
    if (st != TR_OK) {
        Py_XDECREF(items);
        return st;
    }
    if (PyList_GET_SIZE(tx->effects) != neffects || tx->mutations != mutations || inplace) {
        Py_DECREF(items);
        return cdyn_tx_unsupported(tx, "generator with side effects live at a graph break");
    }
    Py_XSETREF(g->u.gen.buffer, items);
    g->pos = 0;
    g->bits |= GEN_DONE | (fresh ? GEN_FRESH : 0u);
    return TR_OK;
}

/* Drain what is left (without side effects) and collect the items' graph outputs. */
static tr_status
gen_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    cdyn_value *g = V(v);
    tr_status st = TR_OK;
    if (g->bits & (GEN_BROKEN | GEN_RUNNING)) {
        return cdyn_tx_unsupported(tx, "cannot rebuild a generator whose frame failed");
    }
    if (g->bits & GEN_IN_TRY) {   /* its finally/__exit__ would never run */
        return cdyn_tx_unsupported(tx, "generator suspended inside try/with, live at a graph "
                                       "break or returned");
    }
    if (!(g->bits & GEN_DONE)) {
        st = drain_ahead(tx, v);
    }
    for (Py_ssize_t i = g->pos; st == TR_OK && g->u.gen.buffer != NULL &&
                                i < PyList_GET_SIZE(g->u.gen.buffer); i++) {
        st = cdyn_cg_collect(tx, cg, PyList_GET_ITEM(g->u.gen.buffer, i));
    }
    return st;
}

/* _glue.rebuild_iterator(ptype or None, (remaining items), name, qualname, started), built once per
 * generated code: a generator named as the traced one, or an object of the polyfilled type
 * it stands for (zip, map, ...), yielding the items it has left. */
static int
gen_reconstruct(cdyn_cg *cg, PyObject *v)
{
    cdyn_value *g = V(v);
    PyObject *buf = g->u.gen.buffer, *rebuild = NULL;
    cdyn_fs *fs = frame_of(v);
    PyObject *name = fs != NULL && g->u.gen.ptype == NULL ? fs->code->co_name : Py_None;
    PyObject *qualname = fs != NULL && g->u.gen.ptype == NULL ? fs->code->co_qualname : Py_None;
    Py_ssize_t n = buf != NULL ? PyList_GET_SIZE(buf) - g->pos : 0;
    /* resumed before the break (its frame ran, or items were taken): send() accepted */
    int started = g->pos > 0 || !(g->bits & GEN_FRESH);
    int r = cdyn_cg_memo_load(cg, v), e;
    if (r != 0) {
        return r < 0 ? -1 : 0;
    }
    rebuild = PyObject_GetAttrString(cdyn_G.glue, "rebuild_iterator");
    e = rebuild == NULL || cdyn_cg_push_callable(cg, rebuild) < 0 ||
        cdyn_cg_load_const(cg, g->u.gen.ptype != NULL ? g->u.gen.ptype : Py_None) < 0;
    Py_XDECREF(rebuild);
    for (Py_ssize_t k = 0; !e && k < n; k++) {
        e = cdyn_cg_value(cg, PyList_GET_ITEM(buf, g->pos + k)) < 0;
    }
    if (e || cdyn_cg_emit(cg, BUILD_TUPLE, (int)n) < 0 || cdyn_cg_load_const(cg, name) < 0 ||
        cdyn_cg_load_const(cg, qualname) < 0 ||
        cdyn_cg_load_const(cg, started ? Py_True : Py_False) < 0 || cdyn_cg_call(cg, 5) < 0) {
        return -1;
    }
    return cdyn_cg_memo_store(cg, v, "gen");
}

/* `x in gen`: advances until an item equal to x (identity first, as CPython), or to the
 * end. */
static tr_status
gen_contains(cdyn_tx *tx, PyObject *v, PyObject *item, int *out)
{
    PyObject *x = NULL, *eq = NULL;
    tr_status st = TR_OK;
    *out = 0;
    if (advances(v) && note_advance(tx, v) < 0) {
        return TR_ERROR;
    }
    while (st == TR_OK && !*out) {
        st = resume(tx, v, &x);
        if (st != TR_OK || x == NULL) {
            break;
        }
        if (x == item) {
            *out = 1;
        }
        else if ((st = cdyn_v_compare(tx, Py_EQ, x, item, &eq)) == TR_OK) {
            st = cdyn_v_truth(tx, eq, out);
            Py_CLEAR(eq);
        }
        Py_CLEAR(x);
    }
    return st;
}

/* gen.send, gen.close, gen.throw, gen.__next__, gen.__iter__: bound to the generator. */
static tr_status
gen_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    static const char *const methods[] = {"send", "close", "throw", "__next__", "__iter__",
                                          NULL};
    for (int i = 0; methods[i] != NULL; i++) {
        if (cdyn_name_is(name, methods[i])) {
            *out = cdyn_value_method(NULL, name, v);
            return *out ? TR_OK : TR_ERROR;
        }
    }
    return cdyn_tx_unsupported(tx, "attribute %U of a generator", name);
}

/* StopIteration(return value) for a generator that returned: TR_EXCEPTION. */
static tr_status
raise_stop(cdyn_tx *tx, PyObject *v)
{
    PyObject *rv = V(v)->u.gen.retval;
    int has = rv != NULL && !cdyn_v_is_none(rv);
    return cdyn_tx_raise(tx, PyExc_StopIteration, has ? &rv : NULL, has);
}

/* gen.throw(exc) (an exception class or instance; the 3-argument form is not supported):
 * the next item, StopIteration, or the exception the frame lets through. */
static tr_status
gen_throw(cdyn_tx *tx, PyObject *v, PyObject *exc, PyObject **out)
{
    tr_status st;
    if (V(v)->kind != VK_GENERATOR || (V(exc)->kind != VK_EXC && V(exc)->kind != VK_EXCTYPE)) {
        return cdyn_tx_unsupported(tx, "throw() of a value that is not an exception");
    }
    if (frame_of(v) != NULL && !(V(v)->bits & GEN_DONE) && delegate_of(frame_of(v)) != NULL) {
        return cdyn_tx_unsupported(tx, "throw() into a generator suspended in yield from");
    }
    if (advances(v) && note_advance(tx, v) < 0) {
        return TR_ERROR;
    }
    st = cdyn_tx_reraise(tx, exc);
    if (st != TR_EXCEPTION) {
        return st;
    }
    st = throw_into(tx, v, out);
    return st == TR_OK && *out == NULL ? raise_stop(tx, v) : st;
}

/* gen.send(value), gen.__next__(), gen.__iter__(), gen.close(), gen.throw(exc). */
static tr_status
gen_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *v, PyObject *name, PyObject *const *args,
                Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    tr_status st;
    (void)fs;
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        return cdyn_tx_unsupported(tx, "generator method with keywords");
    }
    if (cdyn_name_is(name, "__iter__") && nargs == 0) {
        *out = Py_NewRef(v);
        return TR_OK;
    }
    if (cdyn_name_is(name, "close") && nargs == 0) {
        if (advances(v) && note_advance(tx, v) < 0) {
            return TR_ERROR;
        }
        st = close_gen(tx, v, 0);
        if (st == TR_OK) {
            *out = cdyn_value_const(Py_None);
            st = *out ? TR_OK : TR_ERROR;
        }
        return st;
    }
    if (cdyn_name_is(name, "throw") && nargs == 1) {
        return gen_throw(tx, v, args[0], out);
    }
    if ((cdyn_name_is(name, "send") && nargs == 1) || (cdyn_name_is(name, "__next__") && nargs == 0)) {
        if (V(v)->u.gen.buffer != NULL && nargs == 1 && !cdyn_v_is_none(args[0])) {
            return cdyn_tx_unsupported(tx, "send() to a generator rebuilt from its items");
        }
        if (advances(v) && note_advance(tx, v) < 0) {
            return TR_ERROR;
        }
        st = resume_with(tx, v, nargs == 1 ? args[0] : NULL, out);
        return st == TR_OK && *out == NULL ? raise_stop(tx, v) : st;
    }
    return cdyn_tx_unsupported(tx, "method %U of a generator", name);
}

/* ---- dropped generators ------------------------------------------------------------- */

#define MAX_MOVED 256   /* inlined calls whose arguments are recorded (inlining is shallower) */

static struct { PyObject *const *args; Py_ssize_t n; } moved[MAX_MOVED];
static int n_moved;

int
cdyn_generator_push_moved_args(cdyn_fs *caller, PyObject *const *args, Py_ssize_t n)
{
    uintptr_t a = (uintptr_t)args, lo = caller != NULL ? (uintptr_t)caller->stack : 0;
    if (caller == NULL || n <= 0 || n_moved >= MAX_MOVED || a < lo ||
        a + (size_t)n * sizeof(PyObject *) > lo + (size_t)caller->sp * sizeof(PyObject *)) {
        return 0;
    }
    moved[n_moved].args = args;
    moved[n_moved].n = n;
    n_moved++;
    return 1;
}

void
cdyn_generator_pop_moved_args(void)
{
    assert(n_moved > 0);
    n_moved--;
}

/* References to v that the trace's bookkeeping holds and the real program would not: its
 * entries in tx->cyclic and the undo log (tx->undo: snapshots of values), creation snapshots of generators, the caller's stack
 * slots of the arguments of inlined Python calls under way, and (dying, or NULL) the locals
 * and stack of a frame that has returned. */
static Py_ssize_t
internal_refs(cdyn_tx *tx, PyObject *v, cdyn_fs *dying)
{
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tx->cyclic); i++) {
        PyObject *w = PyList_GET_ITEM(tx->cyclic, i);
        cdyn_fs *wfs = V(w)->kind == VK_GENERATOR ? frame_of(w) : NULL;
        n += w == v;
        for (int k = 0; wfs != NULL && ((gen_frame *)wfs)->pristine != NULL && k < wfs->nlocals;
             k++) {
            n += ((gen_frame *)wfs)->pristine[k] == v;
        }
    }
    n += cdyn_undo_refs(tx, v);
    for (int c = 0; c < n_moved; c++) {
        for (Py_ssize_t k = 0; k < moved[c].n; k++) {
            n += moved[c].args[k] == v;
        }
    }
    for (int k = 0; dying != NULL && k < dying->nlocals; k++) {
        n += dying->locals[k] == v;
    }
    for (int k = 0; dying != NULL && k < dying->sp; k++) {
        n += dying->stack[k] == v;
    }
    return n;
}

/* An upper bound of internal_refs over every generator: 1 (tx->cyclic) + the undo log's +
 * the generators in creation snapshots and in dying's slots. */
static Py_ssize_t
internal_bound(cdyn_tx *tx, cdyn_fs *dying)
{
    Py_ssize_t n = 1 + cdyn_undo_refs(tx, NULL);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tx->cyclic); i++) {
        PyObject *w = PyList_GET_ITEM(tx->cyclic, i);
        gen_frame *gf = V(w)->kind == VK_GENERATOR ? (gen_frame *)frame_of(w) : NULL;
        for (int k = 0; gf != NULL && gf->pristine != NULL && k < gf->fs.nlocals; k++) {
            n += gf->pristine[k] != NULL && V(gf->pristine[k])->kind == VK_GENERATOR;
        }
    }
    for (int c = 0; c < n_moved; c++) {
        n += moved[c].n;
    }
    for (int k = 0; dying != NULL && k < dying->nlocals; k++) {
        n += dying->locals[k] != NULL;
    }
    return n + (dying != NULL ? dying->sp : 0);
}

/* The next generator of tx->cyclic that the program no longer references and that still
 * holds a frame's contents (borrowed), or NULL; *n_in_try counts the live ones suspended
 * in a try block (or running). */
static PyObject *
next_dropped(cdyn_tx *tx, cdyn_fs *dying, int *n_in_try)
{
    Py_ssize_t bound = internal_bound(tx, dying);
    *n_in_try = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tx->cyclic); i++) {
        PyObject *v = PyList_GET_ITEM(tx->cyclic, i);
        cdyn_value *g = V(v);
        if (g->kind != VK_GENERATOR || frame_of(v) == NULL || (g->bits & (GEN_DONE | GEN_BROKEN))) {
            continue;
        }
        if ((g->bits & GEN_RUNNING) || Py_REFCNT(v) > bound ||
            Py_REFCNT(v) > internal_refs(tx, v, dying)) {
            *n_in_try += (g->bits & (GEN_IN_TRY | GEN_RUNNING)) != 0;
            continue;
        }
        return v;
    }
    return NULL;
}

tr_status
cdyn_generator_release_dropped(cdyn_tx *tx, cdyn_fs *fs)
{
    static int releasing;   /* closing runs frames, whose instructions come back here */
    cdyn_fs *dying = fs->is_top && fs->retval != NULL && !fs->yielded ? fs : NULL;
    PyObject *v = NULL;
    int n_in_try = 0;
    tr_status st = TR_OK;
    if (releasing || tx->cyclic == NULL) {
        return TR_OK;
    }
    releasing = 1;
    while (st == TR_OK && (v = next_dropped(tx, dying, &n_in_try)) != NULL) {
        Py_INCREF(v);
        /* its handlers run now: a generator from before the step can no longer be reset by
           a rollback (one made in the step goes with it) */
        if ((V(v)->bits & GEN_IN_TRY) && ((gen_frame *)frame_of(v))->started &&
            V(v)->serial < tx->ckpt_serial) {
            cdyn_tx_mutation_lost(tx);
        }
        st = close_gen(tx, v, 1);
        Py_DECREF(v);
    }
    releasing = 0;
    if (st == TR_OK) {
        tx->n_gen_in_try = n_in_try;
    }
    if (st == TR_OK && dying != NULL && n_in_try > 0) {
        cdyn_tx_mutation_lost(tx);
        st = cdyn_tx_unsupported(tx, "generator suspended inside try/with outlives the frame");
    }
    if (st != TR_OK) {
        cdyn_tx_mutation_lost(tx);
    }
    return st;
}

void
cdyn_generator_forget_since(cdyn_tx *tx, long long serial)
{
    for (Py_ssize_t i = 0; tx->cyclic != NULL && i < PyList_GET_SIZE(tx->cyclic); i++) {
        PyObject *v = PyList_GET_ITEM(tx->cyclic, i);
        if (V(v)->kind == VK_GENERATOR && V(v)->serial >= serial) {
            V(v)->bits = (V(v)->bits | GEN_BROKEN) & ~GEN_IN_TRY;
        }
    }
}

/* NULL as None (the slots of a frame state hold values or NULL). */
static PyObject *
or_none(PyObject *o)
{
    return Py_NewRef(o != NULL ? o : Py_None);
}

static PyObject *
none_as_null(PyObject *o)
{
    return o == Py_None ? NULL : Py_NewRef(o);
}

/* Undo (undo.c): the buffer's items and the frame state of a started generator (locals,
 * stack, position, the flags of its suspension), for a step that resumed it and failed. */
static PyObject *
gen_save(PyObject *v)
{
    cdyn_fs *fs = frame_of(v);
    PyObject *buf = cdyn_undo_copy(V(v)->u.gen.buffer), *locals = NULL, *stack = NULL;
    if (buf == NULL) {
        return NULL;
    }
    if (fs == NULL) {
        return Py_BuildValue("(NO)", buf, Py_None);
    }
    locals = PyTuple_New(fs->nlocals);
    stack = PyTuple_New(fs->sp);
    if (locals == NULL || stack == NULL) {
        Py_DECREF(buf);
        Py_XDECREF(locals);
        Py_XDECREF(stack);
        return NULL;
    }
    for (int i = 0; i < fs->nlocals; i++) {
        PyTuple_SET_ITEM(locals, i, or_none(fs->locals[i]));
    }
    for (int i = 0; i < fs->sp; i++) {
        PyTuple_SET_ITEM(stack, i, or_none(fs->stack[i]));
    }
    return Py_BuildValue("(N(NNnNNiii))", buf, locals, stack, fs->pc, or_none(fs->retval),
                         or_none(fs->kw_names), fs->yielded, fs->call_n,
                         ((gen_frame *)fs)->started);
}

static int
gen_restore(PyObject *v, PyObject *saved)
{
    cdyn_fs *fs = frame_of(v);
    PyObject *f = PyTuple_GET_ITEM(saved, 1), *locals, *stack;
    if (cdyn_undo_refill(V(v)->u.gen.buffer, PyTuple_GET_ITEM(saved, 0)) < 0) {
        return -1;
    }
    if (fs == NULL || f == Py_None) {
        return 0;
    }
    locals = PyTuple_GET_ITEM(f, 0);
    stack = PyTuple_GET_ITEM(f, 1);
    for (int i = 0; i < fs->nlocals; i++) {
        Py_XSETREF(fs->locals[i], none_as_null(PyTuple_GET_ITEM(locals, i)));
    }
    while (fs->sp > 0) {
        fs->sp--;
        Py_CLEAR(fs->stack[fs->sp]);
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(stack); i++) {
        fs->stack[fs->sp++] = none_as_null(PyTuple_GET_ITEM(stack, i));
    }
    fs->pc = PyLong_AsSsize_t(PyTuple_GET_ITEM(f, 2));
    Py_XSETREF(fs->retval, none_as_null(PyTuple_GET_ITEM(f, 3)));
    Py_XSETREF(fs->kw_names, none_as_null(PyTuple_GET_ITEM(f, 4)));
    fs->yielded = (int)PyLong_AsLong(PyTuple_GET_ITEM(f, 5));
    fs->call_n = (int)PyLong_AsLong(PyTuple_GET_ITEM(f, 6));
    ((gen_frame *)fs)->started = (int)PyLong_AsLong(PyTuple_GET_ITEM(f, 7));
    return 0;
}

const cdyn_vtable cdyn_generator_vt = {
    .name = "LocalGeneratorObjectVariable",
    .getattr = gen_getattr,
    .call_method = gen_call_method,
    .contains = gen_contains,
    .truth = gen_truth,
    .unpack = gen_unpack,
    .next = gen_next,
    .python_type = gen_python_type,
    .collect = gen_collect,
    .reconstruct = gen_reconstruct,
    .save = gen_save,
    .restore = gen_restore,
};
