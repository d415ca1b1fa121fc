/* cache.c: per-code-object state in co_extra (see cache.h).
 *
 * The extra is freed by CPython (through extra_free) when its code object dies or the slot
 * is overwritten; extra_free unlinks it from the registry, so the registry only ever holds
 * live code objects.
 */
#include "cache.h"

static Py_ssize_t extra_index = -1;
static cdyn_extra *registry;         /* doubly linked list of every live extra */
static PyObject *frame_states;       /* dict: code identity -> frame-state dict, or NULL */
unsigned long cdyn_cache_generation;
unsigned long cdyn_cache_order;

void
cdyn_plan_release(cdyn_plan_box *box)
{
    if (box != NULL && --box->refs == 0) {
        PyMem_Free(box);
    }
}

/* Free one entry and what it owns (may run finalizers). */
static void
entry_free(cdyn_cache_entry *e)
{
    cdyn_cache_generation++;
    cdyn_plan_release(e->plan);
    cdyn_guards_free(e->guards);
    Py_XDECREF(e->code);
    Py_XDECREF(e->func);
    Py_XDECREF(e->reason);
    Py_XDECREF(e->backend);
    PyMem_Free(e);
    cdyn_live.cache_entries--;
}

/* Free a detached list of entries. */
static void
entries_free(cdyn_cache_entry *e)
{
    while (e != NULL) {
        cdyn_cache_entry *next = e->next;
        entry_free(e);
        e = next;
    }
}

/* co_extra free function: unlink x from the registry, then free its entries and x. */
static void
extra_free(void *p)
{
    cdyn_extra *x = p;
    cdyn_cache_entry *entries = NULL;
    if (x == NULL) {
        /* CPython calls every registered free function, also for code objects that
           only carry another user's extra (e.g. torch._dynamo's). */
        return;
    }
    cdyn_cache_generation++;
    entries = x->entries;
    PyObject *frame_state = x->frame_state;
    if (x->reg_prev != NULL) {
        x->reg_prev->reg_next = x->reg_next;
    }
    else {
        assert(registry == x);
        registry = x->reg_next;
    }
    if (x->reg_next != NULL) {
        x->reg_next->reg_prev = x->reg_prev;
    }
    PyMem_Free(x);
    entries_free(entries);
    Py_XDECREF(frame_state);
}

int
cdyn_cache_init(void)
{
    if (extra_index >= 0) {
        return 0;
    }
    extra_index = cdyn_request_code_extra_index(extra_free);
    if (extra_index < 0) {
        PyErr_SetString(PyExc_RuntimeError, "cdynamo: no co_extra index left");
        return -1;
    }
    return 0;
}

cdyn_extra *
cdyn_cache_get(PyCodeObject *code)
{
    void *p = NULL;
    if (cdyn_code_get_extra((PyObject *)code, extra_index, &p) < 0) {
        PyErr_Clear();
        return NULL;
    }
    return p;
}

cdyn_extra *
cdyn_cache_ensure(PyCodeObject *code)
{
    cdyn_extra *x = cdyn_cache_get(code);
    if (x != NULL) {
        return x;
    }
    x = PyMem_Calloc(1, sizeof(cdyn_extra));
    if (x == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    x->code = (PyObject *)code;
    if (cdyn_code_set_extra((PyObject *)code, extra_index, x) < 0) {
        PyMem_Free(x);
        return NULL;
    }
    x->reg_next = registry;
    if (registry != NULL) {
        registry->reg_prev = x;
    }
    registry = x;
    return x;
}

cdyn_cache_entry *
cdyn_cache_insert(cdyn_extra *x, cdyn_guards *guards, PyObject *code)
{
    cdyn_cache_entry *e = PyMem_Calloc(1, sizeof(cdyn_cache_entry));
    if (e == NULL) {
        cdyn_guards_free(guards);
        PyErr_NoMemory();
        return NULL;
    }
    cdyn_live.cache_entries++;
    e->guards = guards;
    e->code = Py_NewRef(code);
    e->next = x->entries;
    x->entries = e;
    x->nentries++;
    cdyn_cache_order++;
    return e;
}

void
cdyn_cache_move_to_front(cdyn_extra *x, cdyn_cache_entry *prev, cdyn_cache_entry *e)
{
    if (prev == NULL ? x->entries != e : prev->next != e) {
        /* Another thread reordered the list while e's guards ran (they may run Python code,
         * which can switch threads): find e's predecessor again. */
        cdyn_cache_entry *p = x->entries;
        prev = NULL;
        while (p != NULL && p != e) {
            prev = p;
            p = p->next;
        }
        if (p == NULL) {
            return;
        }
    }
    if (prev == NULL) {
        assert(x->entries == e);
        return;
    }
    assert(prev->next == e);
    prev->next = e->next;
    e->next = x->entries;
    x->entries = e;
    cdyn_cache_order++;
}

PyObject *
cdyn_cache_entry_func(cdyn_cache_entry *e, PyObject *globals, PyObject *closure)
{
    PyFunctionObject *f = (PyFunctionObject *)e->func;
    PyObject *nf = NULL;
    if (f != NULL && f->func_globals == globals && f->func_closure == closure) {
        return Py_NewRef(f);
    }
    unsigned long gen = cdyn_cache_generation;
    nf = PyFunction_New(e->code, globals);
    if (nf == NULL) {
        return NULL;
    }
    if (closure != NULL && PyFunction_SetClosure(nf, closure) < 0) {
        Py_DECREF(nf);
        return NULL;
    }
    if (gen != cdyn_cache_generation) {
        /* The allocations ran the GC, whose finalizers may have freed e (a reset, another
         * thread): e is not touched again; the caller holds the code by itself. */
        return nf;
    }
    /* Swap in before releasing the old one: its finalizers may re-enter. */
    PyObject *old = e->func;
    e->func = Py_NewRef(nf);
    Py_XDECREF(old);
    return nf;
}

/* Detach and return x's entries and decisions (the frame state is dropped); the caller
 * frees the list. */
static cdyn_cache_entry *
extra_detach(cdyn_extra *x)
{
    cdyn_cache_entry *entries = x->entries;
    Py_CLEAR(x->frame_state);
    x->entries = NULL;
    x->nentries = 0;
    x->skip = 0;
    x->decided = 0;
    x->limit_logged = 0;
    x->nunmodified = 0;
    return entries;
}

void
cdyn_cache_reset(void)
{
    Py_CLEAR(frame_states);
    /* Clearing one extra may free other code objects (and their extras), so restart the
     * walk from the head after every clear; a cleared extra is either gone or empty. */
    for (;;) {
        cdyn_extra *x = registry;
        while (x != NULL && x->force && x->entries == NULL && !x->skip && !x->decided &&
               !x->limit_logged && x->frame_state == NULL) {
            x = x->reg_next;
        }
        if (x == NULL) {
            break;
        }
        PyObject *code = Py_NewRef(x->code);
        cdyn_cache_entry *entries = extra_detach(x);
        if (!x->force) {
            /* Frees x through extra_free. */
            if (cdyn_code_set_extra(code, extra_index, NULL) < 0) {
                PyErr_Clear();
            }
        }
        entries_free(entries);
        Py_DECREF(code);
    }
}

void
cdyn_cache_forget_decisions(void)
{
    for (cdyn_extra *x = registry; x != NULL; x = x->reg_next) {
        x->skip = 0;
        x->decided = 0;
    }
}

/* Borrowed: the frame-state dict registered under key (made empty when missing). */
static PyObject *
frame_state_of(PyObject *key)
{
    PyObject *fs = NULL;
    if (frame_states == NULL && (frame_states = PyDict_New()) == NULL) {
        return NULL;
    }
    fs = PyDict_GetItemWithError(frame_states, key);
    if (fs != NULL || PyErr_Occurred()) {
        return fs;
    }
    fs = PyDict_New();
    if (fs == NULL || PyDict_SetItem(frame_states, key, fs) < 0) {
        Py_XDECREF(fs);
        return NULL;
    }
    Py_DECREF(fs);
    return fs;
}

int
cdyn_cache_share_frame_state(PyCodeObject *code, PyObject *key)
{
    cdyn_extra *x = cdyn_cache_ensure(code);
    PyObject *fs = x ? frame_state_of(key) : NULL;
    if (fs == NULL) {
        return -1;
    }
    Py_XSETREF(x->frame_state, Py_NewRef(fs));
    return 0;
}

PyObject *
cdyn_cache_frame_state(PyCodeObject *code)
{
    cdyn_extra *x = cdyn_cache_ensure(code);
    PyObject *key = NULL, *fs = NULL;
    if (x == NULL) {
        return NULL;
    }
    if (x->frame_state != NULL) {
        return x->frame_state;
    }
    key = Py_BuildValue("(OiO)", code->co_filename, code->co_firstlineno, code->co_qualname);
    fs = key ? frame_state_of(key) : NULL;
    Py_XDECREF(key);
    if (fs == NULL) {
        return NULL;
    }
    x->frame_state = Py_NewRef(fs);
    return fs;
}

PyObject *
cdyn_cache_entries_list(PyCodeObject *code)
{
    PyObject *list = PyList_New(0), *desc = NULL, *item = NULL;
    if (list == NULL) {
        return NULL;
    }
    cdyn_extra *x = cdyn_cache_get(code);
    unsigned long gen = cdyn_cache_generation;
    for (cdyn_cache_entry *e = x ? x->entries : NULL; e != NULL; e = e->next) {
        desc = cdyn_guards_describe(e->guards);   /* may run Python (repr of values) */
        if (desc == NULL) {
            goto error;
        }
        if (gen != cdyn_cache_generation) {
            Py_CLEAR(desc);
            PyErr_SetString(PyExc_RuntimeError, "cache_entries: the cache changed meanwhile");
            goto error;
        }
        item = PyTuple_Pack(3, desc, e->code, e->reason ? e->reason : Py_None);
        Py_CLEAR(desc);
        if (item == NULL || PyList_Append(list, item) < 0) {
            goto error;
        }
        Py_CLEAR(item);
    }
    return list;
error:
    Py_XDECREF(item);
    Py_DECREF(list);
    return NULL;
}
