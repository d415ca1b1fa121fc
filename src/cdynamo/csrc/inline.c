/* inline.c: inlined calls. A call of a Python function while tracing binds the argument
 * values to the callee's parameters (defaults, *args, **kwargs, keyword-only) and
 * interprets the callee's bytecode in a nested frame state; its return value is the call's
 * value. Anything the callee cannot trace fails the whole inlining (the caller breaks at
 * the call site, and the callee is compiled as a frame of its own when it runs). */
#include "tx.h"
#include "hook.h"
#include "trace_rules.h"

#define MAX_INLINE_DEPTH 32

int
cdyn_fs_init(cdyn_fs *fs, PyCodeObject *code, PyObject *globals, PyObject *builtins)
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

void
cdyn_fs_clear(cdyn_fs *fs)
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

static void
release_locals(PyObject **locals, int n)
{
    for (int i = 0; i < n; i++) {
        Py_XDECREF(locals[i]);
    }
}

/* Set up fs (zeroed) for code with the bound locals (array of co_nlocalsplus
 * strong-or-NULL, stolen) and closure cells (list of CELL values or NULL). 0 / -1 (fs is
 * cleared by the caller either way). */
static int
fs_setup(cdyn_fs *fs, PyCodeObject *code, PyObject **locals, PyObject *closure_cells,
         PyObject *globals, PyObject *builtins, PyObject *globals_source, int top_globals)
{
    int n = code->co_nlocalsplus;
    if (cdyn_fs_init(fs, code, globals, builtins) < 0) {
        release_locals(locals, n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        fs->locals[i] = locals[i];   /* stolen */
    }
    fs->globals_source = Py_XNewRef(globals_source);
    fs->top_globals = top_globals;
    if (closure_cells != NULL) {   /* free variables occupy the last slots */
        Py_ssize_t nfree = PyList_GET_SIZE(closure_cells);
        for (Py_ssize_t k = 0; k < nfree; k++) {
            Py_XSETREF(fs->locals[n - nfree + k], Py_NewRef(PyList_GET_ITEM(closure_cells, k)));
        }
    }
    return 0;
}

/* A call of a generator function: a generator value over a frame state of its own,
 * suspended before its first instruction (values/generator.c). */
static tr_status
make_generator(cdyn_tx *tx, PyCodeObject *code, PyObject **locals, PyObject *closure_cells,
               PyObject *globals, PyObject *builtins, PyObject *globals_source,
               int top_globals, PyObject **out)
{
    cdyn_fs *fs = cdyn_generator_frame_alloc();
    if (fs == NULL) {
        release_locals(locals, code->co_nlocalsplus);
        return TR_ERROR;
    }
    if (fs_setup(fs, code, locals, closure_cells, globals, builtins, globals_source,
                 top_globals) < 0) {
        cdyn_fs_free(fs);
        return TR_ERROR;
    }
    return cdyn_generator_new(tx, fs, out);
}

/* Interpret code with the bound locals (array of co_nlocalsplus strong-or-NULL, stolen)
 * and closure cells (list of CELL values or NULL). */
static tr_status
run_inlined(cdyn_tx *tx, PyCodeObject *code, PyObject **locals, PyObject *closure_cells,
            PyObject *globals, PyObject *builtins, PyObject *globals_source, int top_globals,
            PyObject **out)
{
    cdyn_fs fs;
    cdyn_fs *caller = tx->cur_fs;
    tr_status st;
    int n = code->co_nlocalsplus;
    if (tx->depth >= MAX_INLINE_DEPTH) {
        release_locals(locals, n);
        return cdyn_tx_unsupported(tx, "inlining too deep (recursion?)");
    }
    if (code->co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)) {
        release_locals(locals, n);
        return cdyn_tx_unsupported(tx, "call of a coroutine or async generator function");
    }
    if (code->co_flags & CO_GENERATOR) {
        return make_generator(tx, code, locals, closure_cells, globals, builtins,
                              globals_source, top_globals, out);
    }
    memset(&fs, 0, sizeof(fs));
    if (fs_setup(&fs, code, locals, closure_cells, globals, builtins, globals_source,
                 top_globals) < 0) {
        cdyn_fs_clear(&fs);
        return TR_ERROR;
    }
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
    cdyn_fs_clear(&fs);
    return st;
}

/* Slot of keyword argument kname among code's parameters that may be passed by keyword,
 * or -1. */
static int
keyword_slot(PyCodeObject *code, PyObject *kname)
{
    for (int i = code->co_posonlyargcount; i < code->co_argcount + code->co_kwonlyargcount; i++) {
        if (PyUnicode_Compare(PyTuple_GET_ITEM(code->co_localsplusnames, i), kname) == 0) {
            return i;
        }
    }
    return -1;
}

/* The TypeError CPython raises for a call missing parameters (the positional ones, or with
 * kwonly the keyword-only ones): "f() missing 2 required positional arguments: 'a' and
 * 'b'", raised in the traced code (the caller's except sees it, as in eager). */
static tr_status
missing_arguments(cdyn_tx *tx, PyCodeObject *code, PyObject **locals, int kwonly)
{
    int lo = kwonly ? code->co_argcount : 0;
    int hi = kwonly ? code->co_argcount + code->co_kwonlyargcount : code->co_argcount;
    PyObject *names = PyList_New(0), *text = NULL, *sep, *last;
    PyObject *const *pnames = &PyTuple_GET_ITEM(code->co_localsplusnames, 0);
    Py_ssize_t n;
    tr_status st = TR_ERROR;
    for (int i = lo; names != NULL && i < hi; i++) {
        PyObject *q = locals[i] == NULL ? PyUnicode_FromFormat("'%U'", pnames[i]) : NULL;
        if ((q != NULL && PyList_Append(names, q) < 0) || (q == NULL && locals[i] == NULL)) {
            Py_CLEAR(names);
        }
        Py_XDECREF(q);
    }
    if (names == NULL || (n = PyList_GET_SIZE(names)) == 0) {
        goto done;
    }
    /* 'a', 'b' and 'c' */
    last = Py_NewRef(PyList_GET_ITEM(names, n - 1));
    sep = PyUnicode_FromString(", ");
    if (sep != NULL && PyList_SetSlice(names, n - 1, n, NULL) == 0) {
        PyObject *head = PyUnicode_Join(sep, names);
        text = head == NULL ? NULL
               : n == 1 ? Py_NewRef(last) : PyUnicode_FromFormat("%U and %U", head, last);
        Py_XDECREF(head);
    }
    Py_XDECREF(sep);
    Py_DECREF(last);
    if (text != NULL) {
        st = cdyn_tx_raise_text(tx, PyExc_TypeError,
                                "%U() missing %zd required %s argument%s: %U", code->co_qualname,
                                n, kwonly ? "keyword-only" : "positional", n == 1 ? "" : "s",
                                text);
    }
done:
    Py_XDECREF(names);
    Py_XDECREF(text);
    return st;
}

/* Fill missing parameters from defaults (list of values) and kwdefaults (dict). */
static tr_status
apply_defaults(cdyn_tx *tx, PyCodeObject *code, PyObject **locals, PyObject *defaults,
               PyObject *kwdefaults)
{
    int argc = code->co_argcount, kwonly = code->co_kwonlyargcount;
    if (defaults != NULL) {
        Py_ssize_t nd = PyList_GET_SIZE(defaults);
        for (Py_ssize_t j = 0; j < nd; j++) {
            Py_ssize_t i = argc - nd + j;
            if (i >= 0 && locals[i] == NULL) {
                locals[i] = Py_NewRef(PyList_GET_ITEM(defaults, j));
            }
        }
    }
    for (int i = argc; i < argc + kwonly; i++) {
        if (locals[i] == NULL && kwdefaults != NULL) {
            PyObject *d = PyDict_GetItemWithError(kwdefaults,
                                                  PyTuple_GET_ITEM(code->co_localsplusnames, i));
            if (d != NULL) {
                locals[i] = Py_NewRef(d);
            }
            else if (PyErr_Occurred()) {
                return TR_ERROR;
            }
        }
    }
    for (int i = 0; i < argc + kwonly; i++) {
        if (locals[i] == NULL) {
            return missing_arguments(tx, code, locals, i >= argc);
        }
    }
    return TR_OK;
}

/* Positional argument i of self + args (borrowed). */
static inline PyObject *
positional(PyObject *self, PyObject *const *args, Py_ssize_t i)
{
    if (self == NULL) {
        return args[i];
    }
    return i == 0 ? self : args[i - 1];
}

/* Bind self + args to code's parameters into locals (zeroed, co_nlocalsplus + 1). */
static tr_status
bind_arguments(cdyn_tx *tx, PyCodeObject *code, PyObject *self, PyObject *const *args,
               Py_ssize_t nargs, PyObject *kwnames, PyObject **locals)
{
    int argc = code->co_argcount, kwonly = code->co_kwonlyargcount;
    int has_varargs = (code->co_flags & CO_VARARGS) != 0;
    int has_varkw = (code->co_flags & CO_VARKEYWORDS) != 0;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    Py_ssize_t total = npos + (self != NULL);
    PyObject *kw_keys = NULL, *kw_vals = NULL, *rest = NULL;
    tr_status st = TR_ERROR;
    for (Py_ssize_t i = 0; i < total && i < argc; i++) {
        locals[i] = Py_NewRef(positional(self, args, i));
    }
    if (has_varargs) {
        rest = PyList_New(0);
        for (Py_ssize_t i = argc; rest != NULL && i < total; i++) {
            if (PyList_Append(rest, positional(self, args, i)) < 0) {
                Py_CLEAR(rest);
            }
        }
        locals[argc + kwonly] = rest ? cdyn_value_seq_list(VK_TUPLE, rest) : NULL;
        if (locals[argc + kwonly] == NULL) {
            goto done;
        }
    }
    else if (total > argc) {
        /* CPython's TypeError, raised in the traced code */
        st = cdyn_tx_raise_text(tx, PyExc_TypeError,
                                "%U() takes %d positional argument%s but %zd %s given",
                                code->co_qualname, argc, argc == 1 ? "" : "s", total,
                                total == 1 ? "was" : "were");
        goto done;
    }
    if (has_varkw && ((kw_keys = PyList_New(0)) == NULL || (kw_vals = PyList_New(0)) == NULL)) {
        goto done;
    }
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *kname = PyTuple_GET_ITEM(kwnames, k);
        int slot = keyword_slot(code, kname);
        if (slot >= 0 && locals[slot] == NULL) {
            locals[slot] = Py_NewRef(args[npos + k]);
        }
        else if (slot < 0 && has_varkw) {
            if (PyList_Append(kw_keys, kname) < 0 || PyList_Append(kw_vals, args[npos + k]) < 0) {
                goto done;
            }
        }
        else {
            st = cdyn_tx_unsupported(tx, "bad keyword argument %U to %U", kname,
                                     code->co_qualname);
            goto done;
        }
    }
    if (has_varkw) {
        int slot = argc + kwonly + has_varargs;
        locals[slot] = cdyn_value_dict(kw_keys, kw_vals);
        if (locals[slot] == NULL) {
            goto done;
        }
    }
    st = TR_OK;
done:
    Py_XDECREF(rest);
    Py_XDECREF(kw_keys);
    Py_XDECREF(kw_vals);
    return st;
}

tr_status
cdyn_tx_inline_code(cdyn_tx *tx, PyCodeObject *code, PyObject *self, PyObject *const *args,
                    Py_ssize_t nargs, PyObject *kwnames, PyObject *defaults,
                    PyObject *kwdefaults, PyObject *closure_cells, PyObject *globals,
                    PyObject *builtins, PyObject *globals_source, int top_globals,
                    PyObject **out)
{
    int n = code->co_nlocalsplus;
    PyObject **locals = PyMem_Calloc(n + 1, sizeof(PyObject *));
    tr_status st;
    if (locals == NULL) {
        PyErr_NoMemory();
        return TR_ERROR;
    }
    st = bind_arguments(tx, code, self, args, nargs, kwnames, locals);
    if (st == TR_OK) {
        st = apply_defaults(tx, code, locals, defaults, kwdefaults);
    }
    if (st != TR_OK) {
        release_locals(locals, n);
        PyMem_Free(locals);
        return st;
    }
    st = run_inlined(tx, code, locals, closure_cells, globals, builtins, globals_source,
                     top_globals, out);
    PyMem_Free(locals);
    return st;
}

/* A constant source on the function object f (new reference): labelled by its qualified
 * name and address, since two functions made by one `def` or `lambda` (a closure built per
 * item of a loop) share a qualified name but not their defaults or cells. NULL on error. */
static PyObject *
fn_const_source(PyFunctionObject *f)
{
    PyObject *label = PyUnicode_FromFormat("%U@%p", f->func_qualname, (void *)f);
    PyObject *src = label ? cdyn_source_const((PyObject *)f, label) : NULL;
    Py_XDECREF(label);
    return src;
}

/* Wrap default `value` of the inlined function f found at f.<attr>[key]: a constant as it
 * is; anything else (a mutable default such as a cache dict) through a source on the
 * function itself, so its mutations are replayed and it is guarded. */
static tr_status
wrap_default(cdyn_tx *tx, PyFunctionObject *f, const char *attr, PyObject *key, PyObject *value,
             PyObject **out)
{
    PyObject *fsrc = NULL, *asrc = NULL, *src = NULL, *name = NULL;
    tr_status st;
    if (cdyn_is_constant(value)) {
        return cdyn_tx_wrap_real(tx, value, NULL, out);
    }
    name = PyUnicode_FromString(attr);
    fsrc = name ? fn_const_source(f) : NULL;
    asrc = fsrc ? cdyn_source_attr(fsrc, name) : NULL;
    src = asrc ? cdyn_source_item(asrc, key) : NULL;
    st = src ? cdyn_tx_wrap_real(tx, value, src, out) : TR_ERROR;
    Py_XDECREF(name);
    Py_XDECREF(fsrc);
    Py_XDECREF(asrc);
    Py_XDECREF(src);
    return st;
}

/* The defaults of a real function: a list of values and a dict name -> value. */
static tr_status
wrap_defaults(cdyn_tx *tx, PyFunctionObject *f, PyObject **defaults, PyObject **kwdefaults)
{
    PyObject *k, *d;
    Py_ssize_t pos = 0;
    if (f->func_defaults != NULL) {
        Py_ssize_t nd = PyTuple_GET_SIZE(f->func_defaults);
        if ((*defaults = PyList_New(nd)) == NULL) {
            return TR_ERROR;
        }
        for (Py_ssize_t i = 0; i < nd; i++) {
            PyObject *v = NULL, *key = PyLong_FromSsize_t(i);
            tr_status st = key ? wrap_default(tx, f, "__defaults__", key,
                                              PyTuple_GET_ITEM(f->func_defaults, i), &v)
                               : TR_ERROR;
            Py_XDECREF(key);
            if (st != TR_OK) {
                return st;
            }
            PyList_SET_ITEM(*defaults, i, v);
        }
    }
    if (f->func_kwdefaults == NULL || !PyDict_Check(f->func_kwdefaults)) {
        return TR_OK;
    }
    if ((*kwdefaults = PyDict_New()) == NULL) {
        return TR_ERROR;
    }
    while (PyDict_Next(f->func_kwdefaults, &pos, &k, &d)) {
        PyObject *v = NULL;
        tr_status st = wrap_default(tx, f, "__kwdefaults__", k, d, &v);
        int e;
        if (st != TR_OK) {
            return st;
        }
        e = PyDict_SetItem(*kwdefaults, k, v);
        Py_DECREF(v);
        if (e < 0) {
            return TR_ERROR;
        }
    }
    return TR_OK;
}

/* The closure of a real function as CELL values (one per real cell in the trace,
 * values/misc.c) whose contents are read (and guarded) through
 * fn_source.__closure__[i].cell_contents when the function has a source. */
static tr_status
wrap_closure(cdyn_tx *tx, PyFunctionObject *f, PyObject *fn_source, PyObject **cells)
{
    PyObject *csrc = NULL, *fsrc = NULL;
    Py_ssize_t nc;
    tr_status st = TR_ERROR;
    if (f->func_closure == NULL) {
        return TR_OK;
    }
    nc = PyTuple_GET_SIZE(f->func_closure);
    if ((*cells = PyList_New(nc)) == NULL) {
        return TR_ERROR;
    }
    /* without a source of its own, the function is fixed by the trace: read its cells
       through a constant source on the function object, so their contents are guarded
       (torch's own functions are trusted, as their globals) */
    if (fn_source == NULL && !cdyn_module_startswith((PyObject *)f, "torch")) {
        fsrc = fn_const_source(f);
        if (fsrc == NULL) {
            return TR_ERROR;
        }
        fn_source = fsrc;
    }
    if (fn_source != NULL && (csrc = cdyn_source_attr(fn_source, cdyn_G.s_closure)) == NULL) {
        Py_XDECREF(fsrc);
        return TR_ERROR;
    }
    Py_XDECREF(fsrc);
    for (Py_ssize_t i = 0; i < nc; i++) {
        PyObject *isrc = NULL, *src = NULL, *idx = NULL, *cell = NULL;
        if (csrc != NULL) {
            idx = PyLong_FromSsize_t(i);
            isrc = idx ? cdyn_source_item(csrc, idx) : NULL;
            src = isrc ? cdyn_source_attr(isrc, cdyn_G.s_cell_contents) : NULL;
            Py_XDECREF(idx);
            if (src == NULL) {
                Py_XDECREF(isrc);
                goto done;
            }
        }
        st = cdyn_cell_of_real(tx, PyTuple_GET_ITEM(f->func_closure, i), isrc, src, &cell);
        Py_XDECREF(isrc);
        Py_XDECREF(src);
        if (st != TR_OK) {
            goto done;
        }
        PyList_SET_ITEM(*cells, i, cell);
    }
    st = TR_OK;
done:
    Py_XDECREF(csrc);
    return st;
}

/* Attribute `name` (C string) of a function read through fn_source, wrapped (and guarded)
 * through fn_source.<name>. *out new. */
static tr_status
wrap_fn_attr(cdyn_tx *tx, PyObject *obj, PyObject *fn_source, const char *name, PyObject **out)
{
    PyObject *nm = PyUnicode_InternFromString(name), *src = NULL;
    tr_status st = TR_ERROR;
    src = nm ? cdyn_source_attr(fn_source, nm) : NULL;
    if (src != NULL) {
        st = cdyn_tx_wrap_real(tx, obj, src, out);
    }
    Py_XDECREF(nm);
    Py_XDECREF(src);
    return st;
}

/* The defaults of a function guarded by its code only: read (and guarded) through
 * fn_source.__defaults__ / .__kwdefaults__, and its globals dict pinned by ID_MATCH. */
static tr_status
wrap_defaults_guarded(cdyn_tx *tx, PyFunctionObject *f, PyObject *fn_source,
                      PyObject **defaults, PyObject **kwdefaults)
{
    PyObject *dv = NULL, *kv = NULL, *gname = NULL, *gsrc = NULL;
    tr_status st = wrap_fn_attr(tx, f->func_defaults ? f->func_defaults : Py_None, fn_source,
                                "__defaults__", &dv);
    if (st == TR_OK && !cdyn_v_is_none(dv)) {
        st = cdyn_v_unpack(tx, dv, defaults);
    }
    if (st == TR_OK) {
        st = wrap_fn_attr(tx, f->func_kwdefaults ? f->func_kwdefaults : Py_None, fn_source,
                          "__kwdefaults__", &kv);
    }
    if (st == TR_OK && !cdyn_v_is_none(kv)) {
        st = cdyn_tx_materialize(tx, kv);
        if (st == TR_OK && V(kv)->kind != VK_DICT) {
            st = cdyn_tx_unsupported(tx, "__kwdefaults__ that is not a dict");
        }
        if (st == TR_OK && (*kwdefaults = PyDict_New()) == NULL) {
            st = TR_ERROR;
        }
        for (Py_ssize_t i = 0; st == TR_OK && i < PyList_GET_SIZE(V(kv)->u.dict.keys); i++) {
            if (PyDict_SetItem(*kwdefaults, PyList_GET_ITEM(V(kv)->u.dict.keys, i),
                               PyList_GET_ITEM(V(kv)->u.dict.vals, i)) < 0) {
                st = TR_ERROR;
            }
        }
    }
    if (st == TR_OK) {   /* the globals its loads are guarded against */
        gname = PyUnicode_InternFromString("__globals__");
        gsrc = gname ? cdyn_source_attr(fn_source, gname) : NULL;
        st = gsrc != NULL && cdyn_guards_add_id(tx->guards, gsrc, f->func_globals, 0) == 0
                 ? TR_OK : TR_ERROR;
    }
    Py_XDECREF(dv);
    Py_XDECREF(kv);
    Py_XDECREF(gname);
    Py_XDECREF(gsrc);
    return st;
}

/* The label of a globals dict's constant source (borrowed): the name of the module whose
 * __dict__ it is, or None (then named by its address). Not the function's __module__, which
 * functools.wraps copies from the wrapped function: two globals dicts labelled alike would be
 * one node of the guards. */
static PyObject *
globals_label(PyObject *globals)
{
    PyObject *name = PyDict_GetItemString(globals, "__name__");
    PyObject *mod = name != NULL && PyUnicode_Check(name) ? PyImport_GetModule(name) : NULL;
    int own = mod != NULL && PyModule_Check(mod) && PyModule_GetDict(mod) == globals;
    PyErr_Clear();
    Py_XDECREF(mod);
    return own ? name : Py_None;
}

PyObject *
cdyn_tx_module_global_source(PyObject *globals, PyObject *name)
{
    PyObject *gsrc = cdyn_source_const(globals, globals_label(globals));
    PyObject *src = gsrc != NULL ? cdyn_source_item(gsrc, name) : NULL;
    Py_XDECREF(gsrc);
    return src;
}

int
cdyn_tx_globals_stored(cdyn_tx *tx, PyObject *globals)
{
    if (tx->stored_globals == NULL) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tx->stored_globals); i++) {
        if (PyList_GET_ITEM(tx->stored_globals, i) == globals) {
            return 1;
        }
    }
    return 0;
}

PyObject *
cdyn_tx_global_key(cdyn_tx *tx, PyObject *globals, PyObject *name)
{
    PyObject *src, *key;
    if (globals == cdyn_frame_globals(tx->frame)) {
        src = cdyn_source_global(name);
    }
    else {
        src = cdyn_tx_module_global_source(globals, name);
    }
    key = src != NULL ? Py_NewRef(cdyn_source_repr(src)) : NULL;
    Py_XDECREF(src);
    return key;
}

/* The Python function a torch wrapper func stands for, by the marks torch puts in the
 * wrapper's __dict__: orig_key's value when mark_key's is True and it is a Python function
 * other than func. Borrowed (held by that __dict__, which nothing rebinds) or NULL. */
static PyObject *
marked_original(PyObject *func, const char *mark_key, const char *orig_key)
{
    PyObject *d = ((PyFunctionObject *)func)->func_dict, *orig;
    if (d == NULL || !PyDict_CheckExact(d) || PyDict_GetItemString(d, mark_key) != Py_True) {
        return NULL;
    }
    orig = PyDict_GetItemString(d, orig_key);
    return orig != NULL && PyFunction_Check(orig) && orig != func ? orig : NULL;
}

/* What a skipped torch wrapper func runs, traced in its place, or NULL (borrowed):
 * - torch.jit.script_if_tracing(fn)'s wrapper: outside torch.jit tracing it calls fn, as
 *   torch._dynamo traces it;
 * - torch._dynamo.disable(SGD._init_group)'s wrapper, which torch.compile's first use in a
 *   process puts on every torch.optim optimizer class (TorchPatcher: torch._dynamo traces
 *   _init_group its own way, never through the wrapper): the _init_group of torch.optim it
 *   wraps, so that a trace runs it as in a process where torch.compile never ran (primed,
 *   then inlined); a disabled function of any other kind stays opaque. */
static PyObject *
wrapped_original(PyObject *func)
{
    PyObject *orig = marked_original(func, "__script_if_tracing_wrapper", "__original_fn");
    if (orig != NULL) {
        return orig;
    }
    orig = marked_original(func, "_torchdynamo_disable", "_torchdynamo_orig_callable");
    return orig != NULL &&
                   cdyn_name_is(((PyCodeObject *)PyFunction_GET_CODE(orig))->co_name,
                                "_init_group") &&
                   cdyn_module_startswith(orig, "torch.optim")
               ? orig
               : NULL;
}

/* torch.optim: before a traced call of an optimizer's _init_group (the lazy creation of its
 * state: step counters, moment buffers), the real method runs once now on each of the
 * optimizer's real param_groups, with throwaway lists, as torch._dynamo runs _init_group
 * eagerly: the trace then reads the state through its sources instead of creating it in a
 * graph that the next step would replace. Only the state of parameters that have a
 * gradient is made, with the values eager would give it at the same step (zeros). A
 * failure leaves the state as it was and the call is traced as it is. */
static void
prime_optimizer_state(PyObject *func, PyObject *self)
{
    static PyObject *optimizer_type;
    PyObject *opt = self != NULL ? cdyn_v_real(self) : NULL, *groups = NULL;
    PyCodeObject *co = (PyCodeObject *)PyFunction_GET_CODE(func);
    if (opt == NULL || !cdyn_name_is(co->co_name, "_init_group") || co->co_argcount < 2 ||
        !cdyn_module_startswith(func, "torch.optim")) {
        return;
    }
    if (optimizer_type == NULL) {
        PyObject *m = PyImport_ImportModule("torch.optim");
        optimizer_type = m ? PyObject_GetAttrString(m, "Optimizer") : NULL;
        Py_XDECREF(m);
        if (optimizer_type == NULL) {
            PyErr_Clear();
            return;
        }
    }
    if (PyObject_IsInstance(opt, optimizer_type) != 1 ||
        (groups = PyObject_GetAttrString(opt, "param_groups")) == NULL || !PyList_Check(groups)) {
        Py_XDECREF(groups);
        PyErr_Clear();
        return;
    }
    for (Py_ssize_t g = 0; g < PyList_GET_SIZE(groups); g++) {
        PyObject *args = PyTuple_New(co->co_argcount - 1), *r = NULL;
        for (int i = 0; args != NULL && i < co->co_argcount - 1; i++) {
            PyObject *a = i == 0 ? Py_NewRef(PyList_GET_ITEM(groups, g)) : PyList_New(0);
            if (a == NULL) {
                Py_CLEAR(args);
                break;
            }
            PyTuple_SET_ITEM(args, i, a);
        }
        if (args != NULL) {
            PyObject *m = PyObject_GetAttr(opt, co->co_name);
            r = m != NULL ? PyObject_Call(m, args, NULL) : NULL;
            Py_XDECREF(m);
            Py_XDECREF(r);
        }
        Py_XDECREF(args);
        PyErr_Clear();
    }
    Py_DECREF(groups);
}

/* functools.singledispatch's wrapper (a "wrapper" of functools with dispatch and registry
 * attributes) called on a first argument of a known type: the implementation it would pick,
 * wrapper.dispatch(type(arg0)), chosen now (*impl new) and inlined by the caller, as
 * torch._dynamo traces it. Guards: the wrapper by identity, its registry's length (a
 * registration adds a type) and the first argument's type. TR_NOTIMPL for other calls. */
static tr_status
singledispatch_impl(cdyn_tx *tx, PyObject *func, PyObject *fn_source, PyObject *const *args,
                    Py_ssize_t nargs, PyObject *kwnames, PyObject **impl)
{
    PyObject *d = ((PyFunctionObject *)func)->func_dict, *reg, *rsrc, *name;
    PyTypeObject *t;
    Py_ssize_t npos = nargs - (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    if (d == NULL || npos < 1 || fn_source == NULL ||
        !cdyn_name_is(((PyCodeObject *)PyFunction_GET_CODE(func))->co_name, "wrapper") ||
        (name = PyDict_GetItemString(PyFunction_GET_GLOBALS(func), "__name__")) == NULL ||
        !PyUnicode_Check(name) || !cdyn_name_is(name, "functools") ||
        PyDict_GetItemString(d, "dispatch") == NULL ||
        (reg = PyDict_GetItemString(d, "registry")) == NULL ||
        (t = cdyn_v_python_type(args[0])) == NULL) {
        return TR_NOTIMPL;
    }
    *impl = PyObject_CallMethod(func, "dispatch", "O", (PyObject *)t);
    if (*impl == NULL) {
        return TR_ERROR;
    }
    if (!PyFunction_Check(*impl)) {
        Py_CLEAR(*impl);
        return TR_NOTIMPL;
    }
    name = PyUnicode_FromString("registry");
    rsrc = name != NULL ? cdyn_source_attr(fn_source, name) : NULL;
    Py_XDECREF(name);
    if (rsrc == NULL || cdyn_guards_add_id(tx->guards, fn_source, func, 1) < 0 ||
        cdyn_guards_add_len(tx->guards, rsrc, PyObject_Length(reg)) < 0 ||
        (V(args[0])->source != NULL &&
         cdyn_guards_add_type(tx->guards, V(args[0])->source, t) < 0)) {
        Py_XDECREF(rsrc);
        Py_CLEAR(*impl);
        return TR_ERROR;
    }
    Py_DECREF(rsrc);
    return TR_OK;
}

/* Inline the real function func; guarded: it is guarded by its code only, so its defaults
 * and globals are guarded through fn_source. */
static tr_status
inline_real(cdyn_tx *tx, PyObject *func, PyObject *fn_source, int guarded, PyObject *self,
            PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyFunctionObject *f = (PyFunctionObject *)func;
    PyObject *defaults = NULL, *kwdefaults = NULL, *cells = NULL, *gsrc = NULL;
    int top = f->func_globals == cdyn_frame_globals(tx->frame);
    int rule = cdyn_code_trace_rule((PyCodeObject *)f->func_code, f->func_globals);
    PyObject *pf = cdyn_polyfill_of(func);
    tr_status st;
    assert(PyFunction_Check(func));
    if (cdyn_refuse_forbidden(func) < 0) {
        /* torch marks it _dynamo_forbidden (torch.compiler.set_stance, a function decorated
           with it): the user's error, as torch._dynamo raises it */
        return TR_ERROR;
    }
    prime_optimizer_state(func, self);
    if (cdyn_is_marked_constant(func)) {
        /* torch._dynamo.assume_constant_result: called now, its result a constant
           (values/function.c), whatever the trace rule of its module; a closure guarded by
           its code only is pinned by identity (its cells were not read by a trace) */
        if (guarded && fn_source != NULL && cdyn_guards_add_id(tx->guards, fn_source, func, 1) < 0) {
            return TR_ERROR;
        }
        return cdyn_marked_constant_call(tx, func, self, args, nargs, kwnames, out);
    }
    if (pf != NULL && pf != func && PyFunction_Check(pf)) {
        /* a Python function with a polyfill, called directly or reached through a slot
           (contextlib's _GeneratorContextManager.__enter__, os.environ[k], iteration of a
           collections.abc.Sequence): its polyfill is inlined instead, with its own
           defaults and cells */
        return inline_real(tx, pf, NULL, 0, self, args, nargs, kwnames, out);
    }
    if (rule == CDYN_RULE_SKIP || rule == CDYN_RULE_BREAK) {
        PyObject *wrapped = NULL;
        int on = 0;
        if (cdyn_ctx_eogb_wrapper(func, &wrapped, &on)) {
            /* a function decorated with torch._dynamo.error_on_graph_break(flag): inlined
               with the flag deciding at a break inside it, as torch._dynamo */
            int saved = tx->eogb;
            if (guarded && fn_source != NULL &&
                cdyn_guards_add_id(tx->guards, fn_source, func, 1) < 0) {
                return TR_ERROR;
            }
            tx->eogb = on ? 2 : 1;
            st = inline_real(tx, wrapped, NULL, 0, self, args, nargs, kwnames, out);
            tx->eogb = saved;
            return st;
        }
    }
    if ((rule == CDYN_RULE_SKIP || rule == CDYN_RULE_BREAK) && self == NULL) {
        PyObject *impl = NULL;
        st = singledispatch_impl(tx, func, fn_source, args, nargs, kwnames, &impl);
        if (st != TR_NOTIMPL) {
            if (st == TR_OK) {
                st = inline_real(tx, impl, NULL, 0, NULL, args, nargs, kwnames, out);
                Py_DECREF(impl);
            }
            return st;
        }
    }
    if (rule == CDYN_RULE_SKIP || rule == CDYN_RULE_BREAK) {
        PyObject *orig = wrapped_original(func);
        if (orig != NULL) {
            /* every wrapper has the same code: one guarded by its code is pinned by
               identity, which fixes the function it wraps */
            if (guarded && fn_source != NULL &&
                cdyn_guards_add_id(tx->guards, fn_source, func, 1) < 0) {
                return TR_ERROR;
            }
            return inline_real(tx, orig, NULL, 0, self, args, nargs, kwnames, out);
        }
    }
    if (rule == CDYN_RULE_SKIP || rule == CDYN_RULE_BREAK) {
        /* a per-callable INLINE entry of trace_rules overrides its file's rule
           (torch.backends.mha.get_fastpath_enabled) */
        PyObject *value = NULL, *unpatched = cdyn_newmod_unpatched_init(func);
        int crule;
        if (unpatched != NULL) {   /* torch._dynamo's nn.Module.__init__: what it wraps */
            return inline_real(tx, unpatched, NULL, 0, self, args, nargs, kwnames, out);
        }
        crule = cdyn_rules_for_callable(func, &value);
        if (crule == CDYN_RULE_CONSTANT) {   /* torch.compiler.is_exporting(): folded */
            *out = cdyn_value_const(value);
            Py_DECREF(value);
            return *out ? TR_OK : TR_ERROR;
        }
        Py_XDECREF(value);
        if (crule < 0) {
            return TR_ERROR;
        }
        if (crule == CDYN_RULE_INLINE) {
            rule = CDYN_RULE_INLINE;
        }
        if (crule == CDYN_RULE_FOLD) {   /* torch.cuda.is_available(): called now */
            int handled = 0;
            st = cdyn_tx_fold_call(tx, func, args, nargs, kwnames, out, &handled);
            if (handled || st != TR_OK) {
                return st;
            }
        }
    }
    if (rule == CDYN_RULE_SKIP || rule == CDYN_RULE_BREAK) {
        /* trace_rules: library internals are never traced, not even inlined */
        return cdyn_tx_unsupported(tx, "call to %R (trace rule \"%s\": never traced)", func,
                                   cdyn_rule_name((cdyn_rule)rule));
    }
    st = guarded && fn_source != NULL
             ? wrap_defaults_guarded(tx, f, fn_source, &defaults, &kwdefaults)
             : wrap_defaults(tx, f, &defaults, &kwdefaults);
    if (st == TR_OK) {
        st = wrap_closure(tx, f, fn_source, &cells);
    }
    if (st == TR_OK && !top &&
        (!cdyn_module_startswith(func, "torch") ||
         cdyn_module_startswith(func, "torch.utils._pytree")) &&
        !cdyn_module_startswith(func, "cdynamo.polyfills")) {
        /* another module's globals, guarded through a constant source; torch's own module
           globals (F, math, ...) and the polyfills' are trusted, not guarded, except
           pytree's, whose objects (_LEAF_SPEC, SUPPORTED_NODES) are read by attribute and
           item as torch._dynamo reads them */
        gsrc = cdyn_source_const(f->func_globals, globals_label(f->func_globals));
        st = gsrc ? TR_OK : TR_ERROR;
    }
    if (st == TR_OK) {
        /* CPython moves a Python function's arguments from the caller's stack into its frame
           (not a polyfill's: the builtin it stands for borrows them) */
        int moved = !cdyn_module_startswith(func, "cdynamo.polyfills") &&
                    cdyn_generator_push_moved_args(tx->cur_fs, args, nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0));
        st = cdyn_tx_inline_code(tx, (PyCodeObject *)f->func_code, self, args, nargs, kwnames,
                                 defaults, kwdefaults, cells, f->func_globals, f->func_builtins,
                                 gsrc, top, out);
        if (moved) {
            cdyn_generator_pop_moved_args();
        }
    }
    Py_XDECREF(defaults);
    Py_XDECREF(kwdefaults);
    Py_XDECREF(cells);
    Py_XDECREF(gsrc);
    return st;
}

tr_status
cdyn_tx_inline_function(cdyn_tx *tx, PyObject *func, PyObject *fn_source, PyObject *self,
                        PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                        PyObject **out)
{
    return inline_real(tx, func, fn_source, 0, self, args, nargs, kwnames, out);
}

tr_status
cdyn_tx_inline_userfn(cdyn_tx *tx, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames, PyObject **out)
{
    assert(V(fn)->kind == VK_USERFN);
    return inline_real(tx, V(fn)->u.obj.obj, V(fn)->source,
                       (V(fn)->bits & FUNC_CODE_GUARDED) != 0, NULL, args, nargs, kwnames, out);
}
