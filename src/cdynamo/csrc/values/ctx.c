/* values/ctx.c: context managers.
 *
 *   GRADCTX   torch.no_grad() / enable_grad() / set_grad_enabled(m): entering sets the
 *             grad mode in the graph (a _set_grad_enabled node) and gives a GRADEXIT.
 *   GRADEXIT  the __exit__ of such a block: restores the mode it remembers. When a graph
 *             break splits the block, it is rebuilt as cdynamo._glue.GradModeExit(prev) and
 *             handed to the resume function, which calls it at the end of the block.
 *   AUTOCAST  torch.autocast(device_type, dtype, enabled, cache_enabled) (and the
 *             torch.cpu/cuda.amp forms): entering records torch.amp._enter_autocast(...) in
 *             the graph and enters the same autocast at trace time, so the fake tensors get
 *             the dtypes the graph will compute; AUTOCAST_EXIT records _exit_autocast(node)
 *             and leaves it. A graph break inside such a block ends the graph with the
 *             _exit_autocast of every open block, and the break's code makes
 *             cdynamo._glue.AutocastExit(*args) (entering the same autocast in Python)
 *             before the instruction it runs; resume functions receive it on their stack
 *             (an AUTOCAST_EXIT with a source and no node), and calling it there is a
 *             graph break (it runs in Python).
 *             torch.inference_mode(mode) is an AUTOCAST of the other family (AMP_INFERENCE,
 *             args (mode,)): _enter_inference_mode(mode) / _exit_inference_mode(node) in the
 *             graph, as torch._dynamo; at trace time the block only sets grad mode to
 *             `not mode` (fake tensors are never inference tensors, as torch._dynamo's
 *             fake_tensor_disable_inference_mode); a break inside it is handled as
 *             autocast's, with InferenceModeExit / InferenceModeEnter.
 *   NULLCTX   contextlib.nullcontext(enter_result). Also torch._C.DisableTorchFunctionSubclass()
 *             and DisableTorchFunction() (NULLCTX_TF_OFF): no graph node; inside, calls on
 *             tensor subclasses are traced as on plain tensors (tx->tf_subclass_off); a
 *             break inside such a block is not rebuilt. Also the torch profiler's context
 *             managers (torch.profiler.profile, torch.autograd.profiler.profile,
 *             record_function), which torch._dynamo ignores (capture_profiler_record_function
 *             off): a nullcontext whose __enter__ gives the object itself, which cannot be
 *             rebuilt (NULLCTX_PROFILER); a break inside the block runs without profiling.
 *   GRADFN    a function decorated by a grad-mode context (torch.no_grad()(f),
 *             @torch.enable_grad, @torch.set_grad_enabled(m)): a call sets the mode in
 *             the graph, inlines f and restores the mode from before the call, also when f
 *             raises; rebuilt as torch.no_grad(f) / torch.enable_grad(f).
 */
#include "../tx.h"
#include "../codegen.h"
#include "hop.h"

tr_status
cdyn_ctx_set_grad(cdyn_tx *tx, int mode)
{
    return mode == tx->grad_enabled ? TR_OK : cdyn_hop_set_grad(tx, mode);
}



static PyObject *autocast_type, *nullcontext_type;   /* resolved by cdyn_ctx_init */

/* The blocks entered by one graph node and left by another; the AMP_* bit of each. */
static const cdyn_mode_family families[] = {
    {"torch.autocast", &cdyn_G.enter_autocast, &cdyn_G.exit_autocast,
     &cdyn_G.autocast_exit_type, &cdyn_G.autocast_enter_type},
    {"torch.inference_mode", &cdyn_G.enter_inference_mode, &cdyn_G.exit_inference_mode,
     &cdyn_G.inference_exit_type, &cdyn_G.inference_enter_type},
    {"torch.nn.attention.sdpa_kernel", &cdyn_G.sdpa_enter, &cdyn_G.sdpa_exit,
     &cdyn_G.sdpa_exit_type, &cdyn_G.sdpa_enter_type},
};
static const unsigned int family_bits[] = {0, AMP_INFERENCE, AMP_SDPA};
#define N_FAMILIES ((int)(sizeof families / sizeof *families))

int
cdyn_ctx_changes_state(PyObject *target)
{
    if (target == cdyn_G.set_grad_enabled) {
        return 1;
    }
    for (int f = 0; f < N_FAMILIES; f++) {
        if (target == *families[f].enter || target == *families[f].exit) {
            return 1;
        }
    }
    return 0;
}

const cdyn_mode_family *
cdyn_ctx_family(PyObject *v)
{
    unsigned int bits = V(v)->bits & AMP_FAMILY;
    assert(V(v)->kind == VK_AUTOCAST || V(v)->kind == VK_AUTOCAST_EXIT);
    for (int f = 1; f < N_FAMILIES; f++) {
        if (bits == family_bits[f]) {
            return &families[f];
        }
    }
    return &families[0];
}
static PyObject *profiler_types[3];   /* the profiler's context managers (cdyn_ctx_init) */
static PyObject *eogb_fn;             /* torch._dynamo.error_on_graph_break (cdyn_ctx_init) */
static PyObject *eogb_type;           /* the context manager class it returns */
static PyObject *ctx_call_code;       /* code of torch's wrap_dunder_call_ctx_manager wrapper */

int
cdyn_ctx_eogb_wrapper(PyObject *func, PyObject **target, int *on)
{
    PyObject *closure, *freevars, *ctx = NULL, *fn = NULL;
    if (ctx_call_code == NULL || !PyFunction_Check(func) ||
        PyFunction_GET_CODE(func) != ctx_call_code) {
        return 0;
    }
    closure = PyFunction_GET_CLOSURE(func);
    freevars = PyCode_GetFreevars((PyCodeObject *)ctx_call_code);   /* new */
    if (freevars == NULL) {
        PyErr_Clear();
        return 0;
    }
    for (Py_ssize_t i = 0; closure != NULL && PyTuple_Check(closure) &&
                           i < PyTuple_GET_SIZE(closure) && i < PyTuple_GET_SIZE(freevars); i++) {
        PyObject *name = PyTuple_GET_ITEM(freevars, i);
        PyObject *cell = PyTuple_GET_ITEM(closure, i);
        PyObject *v = PyCell_Check(cell) ? PyCell_GET(cell) : NULL;
        if (cdyn_name_is(name, "self")) {
            ctx = v;
        }
        else if (cdyn_name_is(name, "func")) {
            fn = v;
        }
    }
    Py_DECREF(freevars);
    if (ctx == NULL || fn == NULL || eogb_type == NULL || !PyFunction_Check(fn) ||
        !PyObject_TypeCheck(ctx, (PyTypeObject *)eogb_type)) {
        return 0;
    }
    PyObject *flag = PyObject_GetAttrString(ctx, "error_on_graph_break");
    int truth = flag != NULL ? PyObject_IsTrue(flag) : -1;
    Py_XDECREF(flag);
    if (truth < 0) {
        PyErr_Clear();
        return 0;
    }
    *target = fn;
    *on = truth;
    return 1;
}
static PyObject *tf_off_types[2];     /* torch._C.DisableTorchFunctionSubclass, ...Function */

static int
is_tf_off_ctx(PyObject *obj)
{
    return obj == tf_off_types[0] || obj == tf_off_types[1];
}

static int
is_profiler_ctx(PyObject *obj)
{
    for (size_t i = 0; i < sizeof profiler_types / sizeof *profiler_types; i++) {
        if (obj == profiler_types[i]) {
            return 1;
        }
    }
    return 0;
}

int
cdyn_is_ctx_factory(PyObject *obj)
{
    return (PyType_Check(obj) &&
            ((autocast_type && PyType_IsSubtype((PyTypeObject *)obj, (PyTypeObject *)autocast_type)) ||
             obj == nullcontext_type || obj == cdyn_G.inference_mode_type || is_profiler_ctx(obj) ||
             is_tf_off_ctx(obj))) ||
           obj == cdyn_G.sdpa_kernel_fn || (eogb_fn != NULL && obj == eogb_fn);
}

/* A new AUTOCAST of family `bits` with args (stolen; NULL: error). */
static tr_status
family_value(unsigned int bits, PyObject *args, PyObject **out)
{
    *out = args ? cdyn_value_alloc(VK_AUTOCAST, NULL) : NULL;
    if (*out == NULL) {
        Py_XDECREF(args);
        return TR_ERROR;
    }
    V(*out)->bits |= bits;
    V(*out)->u.amp.args = args;
    return TR_OK;
}

/* The name of the SDPBackend member value v stands for (a new str), pinned by ID_MATCH when
 * v comes from a source (without one, it was read from a module or class the trace knows
 * exactly); NULL without an exception when v is not known to be one. */
static PyObject *
sdpa_backend_name(cdyn_tx *tx, PyObject *v)
{
    PyObject *obj = cdyn_v_real(v);
    if (obj == NULL || !PyObject_TypeCheck(obj, (PyTypeObject *)cdyn_G.sdpa_backend_type)) {
        return NULL;
    }
    if (V(v)->kind != VK_CONST && V(v)->source != NULL &&
        cdyn_guards_add_id(tx->guards, V(v)->source, obj, 0) < 0) {
        return NULL;
    }
    return PyObject_GetAttrString(obj, "name");
}

/* torch.nn.attention.sdpa_kernel(backends, set_priority=False) of SDPBackend members known
 * at trace time (guarded): args (names, set_priority), the names deduplicated in order as
 * sdpa_kernel does (a bad argument is a break: eager raises its error there). */
static tr_status
sdpa_kernel_factory(cdyn_tx *tx, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                    PyObject **out)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    PyObject *names = NULL, *items = NULL, *prio = Py_False, *tup = NULL;
    tr_status st = TR_UNSUPPORTED;
    if (npos < 1 || npos > 2 || nkw > 1 ||
        (nkw == 1 && (npos != 1 || !cdyn_name_is(PyTuple_GET_ITEM(kwnames, 0), "set_priority")))) {
        return cdyn_tx_unsupported(tx, "sdpa_kernel with these arguments");
    }
    if (nargs == 2) {
        prio = cdyn_all_const(args + 1, 1) ? V(args[1])->u.cnst.value : NULL;
        if (prio == NULL || !PyBool_Check(prio)) {
            return cdyn_tx_unsupported(tx, "sdpa_kernel with a non-constant set_priority");
        }
    }
    if (cdyn_v_python_type(args[0]) == &PyList_Type) {
        st = cdyn_v_unpack(tx, args[0], &items);
        if (st != TR_OK) {
            return st;
        }
        st = TR_UNSUPPORTED;
    }
    else {
        items = PyList_New(1);
        if (items == NULL) {
            return TR_ERROR;
        }
        PyList_SET_ITEM(items, 0, Py_NewRef(args[0]));
    }
    names = PyList_New(0);
    for (Py_ssize_t i = 0; names != NULL && i < PyList_GET_SIZE(items); i++) {
        PyObject *name = sdpa_backend_name(tx, PyList_GET_ITEM(items, i));
        if (name == NULL) {
            goto done;
        }
        if (PySequence_Contains(names, name) == 0 && PyList_Append(names, name) < 0) {
            Py_CLEAR(names);
        }
        Py_DECREF(name);
    }
    tup = names ? PyList_AsTuple(names) : NULL;
    st = tup ? family_value(AMP_SDPA, PyTuple_Pack(2, tup, prio), out) : TR_ERROR;
done:
    Py_XDECREF(items);
    Py_XDECREF(names);
    Py_XDECREF(tup);
    if (st == TR_UNSUPPORTED && PyErr_Occurred()) {
        st = TR_ERROR;
    }
    return st == TR_UNSUPPORTED
               ? cdyn_tx_unsupported(tx, "sdpa_kernel(%S): not SDPBackend members", args[0])
               : st;
}

/* torch.inference_mode(mode=True) of a constant bool: an AUTOCAST of the inference family
 * (the bare decorator form, inference_mode(f), is refused: a break). */
static tr_status
inference_mode_factory(cdyn_tx *tx, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                       PyObject **out)
{
    PyObject *mode = Py_True;
    if (nargs > 1 || (kwnames != NULL && (PyTuple_GET_SIZE(kwnames) != 1 ||
                                          !cdyn_name_is(PyTuple_GET_ITEM(kwnames, 0), "mode")))) {
        return cdyn_tx_unsupported(tx, "torch.inference_mode with these arguments");
    }
    if (nargs == 1) {
        mode = cdyn_all_const(args, 1) ? V(args[0])->u.cnst.value : NULL;
        if (mode == NULL || !PyBool_Check(mode)) {
            return cdyn_tx_unsupported(tx, "torch.inference_mode(%S): not a constant bool", args[0]);
        }
    }
    return family_value(AMP_INFERENCE, PyTuple_Pack(1, mode), out);
}

tr_status
cdyn_ctx_factory(cdyn_tx *tx, PyObject *obj, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames, PyObject **out, int *handled)
{
    PyObject *objs[8], *argt = NULL, *kw = NULL, *bound = NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    *handled = cdyn_is_ctx_factory(obj);
    if (!*handled) {
        return TR_OK;
    }
    if (obj == cdyn_G.inference_mode_type) {
        return inference_mode_factory(tx, args, nargs, kwnames, out);
    }
    if (obj == cdyn_G.sdpa_kernel_fn) {
        return sdpa_kernel_factory(tx, args, nargs, kwnames, out);
    }
    if (is_profiler_ctx(obj)) {   /* its arguments are ignored with it */
        *out = cdyn_value_alloc(VK_NULLCTX, NULL);
        if (*out != NULL) {
            V(*out)->bits |= NULLCTX_PROFILER;
            V(*out)->u.nullctx.enter_result = cdyn_value_const(Py_None);
        }
        return *out ? TR_OK : TR_ERROR;
    }
    if (obj == eogb_fn) {
        /* torch._dynamo.error_on_graph_break(flag): switches, for the block, whether a graph
           break raises, at trace time (as torch._dynamo); nothing in the graph */
        int on = nargs == 1 && nkw == 0 && cdyn_all_const(args, 1)
                     ? PyObject_IsTrue(V(args[0])->u.cnst.value) : -2;
        if (on == -1) {
            return TR_ERROR;
        }
        if (on == -2) {
            return cdyn_tx_unsupported(tx, "torch._dynamo.error_on_graph_break with a "
                                           "non-constant argument");
        }
        *out = cdyn_value_alloc(VK_NULLCTX, NULL);
        if (*out != NULL) {
            V(*out)->bits |= NULLCTX_EOGB | (on ? NULLCTX_EOGB_ON : 0);
            V(*out)->u.nullctx.enter_result = cdyn_value_const(Py_None);
        }
        return *out ? TR_OK : TR_ERROR;
    }
    if (is_tf_off_ctx(obj)) {
        if (nargs > 0) {
            return cdyn_tx_unsupported(tx, "%R with arguments", obj);
        }
        *out = cdyn_value_alloc(VK_NULLCTX, NULL);
        if (*out != NULL) {
            V(*out)->bits |= NULLCTX_TF_OFF;
            V(*out)->u.nullctx.enter_result = cdyn_value_const(Py_None);
        }
        return *out ? TR_OK : TR_ERROR;
    }
    if (obj == nullcontext_type) {
        if (nargs > 1) {
            return cdyn_tx_unsupported(tx, "nullcontext with %zd arguments", nargs);
        }
        *out = cdyn_value_alloc(VK_NULLCTX, NULL);
        if (*out != NULL) {
            V(*out)->u.nullctx.enter_result = nargs ? Py_NewRef(args[0]) : cdyn_value_const(Py_None);
        }
        return *out ? TR_OK : TR_ERROR;
    }
    if (!cdyn_all_const(args, nargs) || nargs > 8) {
        return cdyn_tx_unsupported(tx, "torch.autocast with non-constant arguments");
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        objs[i] = V(args[i])->u.cnst.value;
    }
    argt = PyTuple_New(nargs - nkw);
    kw = PyDict_New();
    for (Py_ssize_t i = 0; argt && kw && i < nargs; i++) {
        if (i < nargs - nkw) {
            PyTuple_SET_ITEM(argt, i, Py_NewRef(objs[i]));
        }
        else if (PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i - (nargs - nkw)), objs[i]) < 0) {
            Py_CLEAR(kw);
        }
    }
    bound = argt && kw ? PyObject_CallMethod(cdyn_G.glue, "autocast_args", "OOO", obj, argt, kw)
                       : NULL;
    Py_XDECREF(argt);
    Py_XDECREF(kw);
    if (bound == NULL) {
        return cdyn_tx_unsupported(tx, "torch.autocast arguments");
    }
    *out = cdyn_value_alloc(VK_AUTOCAST, NULL);
    if (*out == NULL) {
        Py_DECREF(bound);
        return TR_ERROR;
    }
    V(*out)->u.amp.args = bound;
    return TR_OK;
}

/* Enter the block at trace time; *entry (new): what tx->open_modes keeps for it, a pair
 * (fn, arg) that cdyn_tx_exit_modes calls to leave it. torch.autocast and sdpa_kernel are
 * entered for real (the fake runs see their state); torch.inference_mode(m) only sets grad
 * mode to `not m`. */
static tr_status
trace_enter(cdyn_tx *tx, PyObject *v, PyObject **entry)
{
    const cdyn_mode_family *fam = cdyn_ctx_family(v);
    PyObject *args = V(v)->u.amp.args, *r;
    int mode;
    if (!(V(v)->bits & AMP_INFERENCE)) {
        r = PyObject_Call(*fam->enter, args, NULL);
        if (r == NULL) {
            return cdyn_tx_unsupported(tx, "%s%R failed", fam->what, args);
        }
        *entry = PyTuple_Pack(2, *fam->exit, r);
        Py_DECREF(r);
        return *entry ? TR_OK : TR_ERROR;
    }
    mode = PyTuple_GET_ITEM(args, 0) == Py_True;
    *entry = PyTuple_Pack(2, cdyn_G.set_grad_enabled, tx->grad_enabled ? Py_True : Py_False);
    r = *entry ? PyObject_CallOneArg(cdyn_G.set_grad_enabled, mode ? Py_False : Py_True) : NULL;
    if (r == NULL) {
        Py_CLEAR(*entry);
        return TR_ERROR;
    }
    Py_DECREF(r);
    tx->grad_enabled = !mode;
    if (tx->grad_enabled) {
        cdyn_guards_note_requires_grad(tx->guards);
    }
    return TR_OK;
}

/* Enter a block of a mode family: its enter node, and the block entered at trace time. */
static tr_status
mode_enter(cdyn_tx *tx, PyObject *v, PyObject **exit_fn, PyObject **result)
{
    PyObject *args = V(v)->u.amp.args, *node = NULL, *entry = NULL;
    tr_status st = cdyn_tx_graph_raw(tx, *cdyn_ctx_family(v)->enter, args, &node);
    if (st != TR_OK) {
        return st;
    }
    st = trace_enter(tx, v, &entry);
    if (st != TR_OK || PyList_Append(tx->open_modes, entry) < 0) {
        if (st == TR_OK) {   /* not kept: leave it again at once */
            Py_XDECREF(PyObject_CallOneArg(PyTuple_GET_ITEM(entry, 0), PyTuple_GET_ITEM(entry, 1)));
            st = TR_ERROR;
        }
        Py_XDECREF(entry);
        Py_DECREF(node);
        return st;
    }
    *exit_fn = cdyn_value_alloc(VK_AUTOCAST_EXIT, NULL);
    /* sdpa_kernel's generator yields {} */
    *result = (V(v)->bits & AMP_SDPA) ? cdyn_dict_new(NULL) : cdyn_value_const(Py_None);
    if (*exit_fn == NULL || *result == NULL) {
        Py_CLEAR(*exit_fn);
        Py_CLEAR(*result);
        Py_DECREF(node);
        Py_DECREF(entry);
        return TR_ERROR;
    }
    V(*exit_fn)->bits = V(v)->bits & AMP_FAMILY;
    V(*exit_fn)->u.amp.node = node;
    V(*exit_fn)->u.amp.mode = entry;
    V(*exit_fn)->u.amp.args = Py_NewRef(args);
    return TR_OK;
}

/* Leave a block entered by mode_enter (the innermost one). */
static tr_status
mode_exit(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    PyObject *args = PyTuple_Pack(1, V(v)->u.amp.node), *node = NULL;
    Py_ssize_t n = PyList_GET_SIZE(tx->open_modes);
    tr_status st;
    if (args == NULL) {
        return TR_ERROR;
    }
    if (n == 0 || PyList_GET_ITEM(tx->open_modes, n - 1) != V(v)->u.amp.mode) {
        Py_DECREF(args);
        return cdyn_tx_unsupported(tx, "%s blocks exited out of order", cdyn_ctx_family(v)->what);
    }
    st = cdyn_tx_graph_raw(tx, *cdyn_ctx_family(v)->exit, args, &node);
    Py_DECREF(args);
    Py_XDECREF(node);
    if (st != TR_OK) {
        return st;
    }
    cdyn_tx_exit_modes(tx, n - 1);
    *out = cdyn_value_const(Py_None);
    return *out ? TR_OK : TR_ERROR;
}

static tr_status
ctx_enter(cdyn_tx *tx, PyObject *v, PyObject **exit_fn, PyObject **result)
{
    cdyn_value *c = V(v);
    int restore;
    tr_status st = TR_OK;
    if (c->kind == VK_AUTOCAST) {
        return mode_enter(tx, v, exit_fn, result);
    }
    if (c->kind == VK_NULLCTX) {
        *exit_fn = cdyn_value_alloc(VK_NULLCTX, NULL);   /* its exit does nothing */
        if (*exit_fn == NULL) {
            return TR_ERROR;
        }
        V(*exit_fn)->bits |= NULLCTX_EXIT | (c->bits & (NULLCTX_TF_OFF | NULLCTX_EOGB |
                                                         NULLCTX_EOGB_ON));
        V(*exit_fn)->u.nullctx.enter_result = cdyn_value_const(Py_None);
        if (c->bits & NULLCTX_TF_OFF) {
            tx->tf_subclass_off++;
        }
        if (c->bits & NULLCTX_EOGB) {
            V(*exit_fn)->bits |= (unsigned)tx->eogb << NULLCTX_EOGB_PREV_SHIFT;
            tx->eogb = (c->bits & NULLCTX_EOGB_ON) ? 2 : 1;
        }
        *result = Py_NewRef((c->bits & NULLCTX_PROFILER) ? v : c->u.nullctx.enter_result);
        return TR_OK;
    }
    if (c->kind != VK_GRADCTX) {
        return cdyn_tx_unsupported(tx, "with-block over %S", v);
    }
    if (c->bits & GRAD_APPLIED) {
        /* torch.set_grad_enabled(m): the mode was set by the call; restore the mode from
           before it on exit */
        restore = (c->bits & GRAD_PREV_ON) != 0;
    }
    else {
        restore = tx->grad_enabled;
        st = cdyn_ctx_set_grad(tx, (c->bits & GRAD_MODE_ON) != 0);
    }
    if (st != TR_OK) {
        return st;
    }
    *exit_fn = cdyn_value_alloc(VK_GRADEXIT, NULL);
    *result = cdyn_value_const(Py_None);
    if (*exit_fn == NULL || *result == NULL) {
        Py_CLEAR(*exit_fn);
        Py_CLEAR(*result);
        return TR_ERROR;
    }
    V(*exit_fn)->bits = restore ? GRAD_MODE_ON : 0;
    return TR_OK;
}

tr_status
cdyn_ctx_grad_fn(cdyn_tx *tx, PyObject *fn, int mode, PyObject **out)
{
    PyObject *real = V(fn)->kind == VK_USERFN ? cdyn_v_real(fn) : NULL;
    PyCodeObject *code = V(fn)->kind == VK_FUNCTION ? (PyCodeObject *)V(fn)->u.func.code
                         : real != NULL && PyFunction_Check(real)
                             ? (PyCodeObject *)PyFunction_GET_CODE(real) : NULL;
    if (code == NULL || (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR))) {
        return cdyn_tx_unsupported(tx, "grad-mode context decorating %S", fn);
    }
    *out = cdyn_value_alloc(VK_GRADFN, NULL);
    if (*out == NULL) {
        return TR_ERROR;
    }
    V(*out)->u.gradfn.fn = Py_NewRef(fn);
    V(*out)->bits = mode ? GRAD_MODE_ON : 0;
    return TR_OK;
}

/* A call of a GRADFN: f inlined in its mode, the mode from before restored after it (also
 * when it raises, as the `with` block of torch's decorator). */
static tr_status
grad_fn_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames, PyObject **out)
{
    int prev = tx->grad_enabled;
    tr_status st = cdyn_ctx_set_grad(tx, (V(fn)->bits & GRAD_MODE_ON) != 0), rst;
    if (st != TR_OK) {
        return st;
    }
    st = cdyn_v_call(tx, fs, V(fn)->u.gradfn.fn, args, nargs, kwnames, out);
    if (st == TR_OK || st == TR_EXCEPTION) {
        rst = cdyn_ctx_set_grad(tx, prev);
        if (rst != TR_OK) {
            if (st == TR_OK) {
                Py_CLEAR(*out);
            }
            st = rst;
        }
    }
    return st;
}

/* ctx(f) for a GRADCTX: f decorated. torch.set_grad_enabled(m) set the mode when it was
 * made; using it as a decorator puts the mode from before it back (eager's __call__). */
static tr_status
grad_ctx_decorate(cdyn_tx *tx, PyObject *ctx, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames, PyObject **out)
{
    tr_status st = TR_OK;
    if (nargs != 1 || kwnames != NULL) {
        return cdyn_tx_unsupported(tx, "call of %S with %zd arguments", ctx, nargs);
    }
    if (V(ctx)->bits & GRAD_APPLIED) {
        st = cdyn_ctx_set_grad(tx, (V(ctx)->bits & GRAD_PREV_ON) != 0);
    }
    return st == TR_OK ? cdyn_ctx_grad_fn(tx, args[0], (V(ctx)->bits & GRAD_MODE_ON) != 0, out)
                       : st;
}

static tr_status
ctx_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames, PyObject **out)
{
    tr_status st;
    if (V(fn)->kind == VK_AUTOCAST && (V(fn)->bits & AMP_REENTER) && nargs == 0 && kwnames == NULL) {
        /* AutocastEnter() in a resume function's prologue: the block entered again */
        PyObject *result = NULL;
        st = mode_enter(tx, fn, out, &result);
        Py_XDECREF(result);
        return st;
    }
    if (V(fn)->kind == VK_AUTOCAST_EXIT) {
        if (V(fn)->u.amp.node == NULL) {   /* a block entered before a graph break */
            return cdyn_tx_unsupported(tx, "exit of a %s block split by a graph break (runs "
                                           "in Python)", cdyn_ctx_family(fn)->what);
        }
        return mode_exit(tx, fn, out);
    }
    if (V(fn)->kind == VK_NULLCTX) {
        if ((V(fn)->bits & (NULLCTX_TF_OFF | NULLCTX_EXIT)) == (NULLCTX_TF_OFF | NULLCTX_EXIT)) {
            if (tx->tf_subclass_off <= 0) {
                return cdyn_tx_unsupported(tx, "exit of a DisableTorchFunctionSubclass block "
                                               "not entered in this trace");
            }
            tx->tf_subclass_off--;
        }
        if ((V(fn)->bits & (NULLCTX_EOGB | NULLCTX_EXIT)) == (NULLCTX_EOGB | NULLCTX_EXIT)) {
            tx->eogb = (int)((V(fn)->bits >> NULLCTX_EOGB_PREV_SHIFT) & 3u);
        }
        *out = cdyn_value_const(Py_None);
        return *out ? TR_OK : TR_ERROR;
    }
    if (V(fn)->kind == VK_GRADFN) {
        return grad_fn_call(tx, fs, fn, args, nargs, kwnames, out);
    }
    if (V(fn)->kind == VK_GRADCTX) {
        return grad_ctx_decorate(tx, fn, args, nargs, kwnames, out);
    }
    if (V(fn)->kind != VK_GRADEXIT) {
        return cdyn_tx_unsupported(tx, "call of %S", fn);
    }
    st = cdyn_ctx_set_grad(tx, (V(fn)->bits & GRAD_MODE_ON) != 0);
    if (st != TR_OK) {
        return st;
    }
    *out = cdyn_value_const(Py_None);
    return *out ? TR_OK : TR_ERROR;
}

/* ctx.__enter__ / ctx.__exit__ of a grad-mode context manager, bound. */
static tr_status
ctx_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    if (V(v)->kind == VK_GRADCTX &&
        (cdyn_name_is(name, "__enter__") || cdyn_name_is(name, "__exit__"))) {
        *out = cdyn_value_method(NULL, name, v);
        return *out ? TR_OK : TR_ERROR;
    }
    return cdyn_tx_unsupported(tx, "attribute %U of %S is not supported", name, v);
}

/* ctx.__enter__() / ctx.__exit__(*exc) called directly on a grad-mode context manager (as
 * a with-block would, torch's own objects remembering the mode to restore): the mode set
 * in the graph, the one to restore kept on the value. */
static tr_status
ctx_call_method(cdyn_tx *tx, cdyn_fs *fs, PyObject *self, PyObject *name,
                PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyObject *exit_fn = NULL;
    tr_status st;
    (void)fs;
    (void)args;
    if (V(self)->kind != VK_GRADCTX || kwnames != NULL) {
        return cdyn_tx_unsupported(tx, "method %U of %S is not supported", name, self);
    }
    if (cdyn_name_is(name, "__enter__") && nargs == 0) {
        st = ctx_enter(tx, self, &exit_fn, out);
        if (st == TR_OK) {
            V(self)->bits = (V(self)->bits & ~GRAD_EXIT_ON) | GRAD_ENTERED |
                            ((V(exit_fn)->bits & GRAD_MODE_ON) ? GRAD_EXIT_ON : 0);
            Py_DECREF(exit_fn);
        }
        return st;
    }
    if (cdyn_name_is(name, "__exit__") && nargs == 3 && (V(self)->bits & GRAD_ENTERED)) {
        st = cdyn_ctx_set_grad(tx, (V(self)->bits & GRAD_EXIT_ON) != 0);
        if (st != TR_OK) {
            return st;
        }
        V(self)->bits &= ~(GRAD_ENTERED | GRAD_EXIT_ON);
        *out = cdyn_value_const(Py_None);
        return *out ? TR_OK : TR_ERROR;
    }
    return cdyn_tx_unsupported(tx, "method %U of %S is not supported", name, self);
}

static tr_status
ctx_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    (void)cg;
    if (V(v)->kind == VK_GRADEXIT || V(v)->kind == VK_AUTOCAST_EXIT) {
        return TR_OK;
    }
    if (V(v)->kind == VK_NULLCTX && (V(v)->bits & NULLCTX_TF_OFF)) {
        return cdyn_tx_unsupported(tx, "a graph break inside torch._C.DisableTorchFunctionSubclass"
                                       "() (not rebuilt: the rest would run with tensor "
                                       "subclasses dispatched)");
    }
    if (V(v)->kind == VK_NULLCTX && (V(v)->bits & NULLCTX_PROFILER)) {
        return cdyn_tx_unsupported(tx, "cannot rebuild a torch profiler context manager made "
                                       "in the trace (ignored in the graph)");
    }
    if (V(v)->kind == VK_NULLCTX) {
        return cdyn_cg_collect(tx, cg, V(v)->u.nullctx.enter_result);
    }
    if (V(v)->kind == VK_GRADFN) {
        return cdyn_cg_collect(tx, cg, V(v)->u.gradfn.fn);
    }
    return cdyn_tx_unsupported(tx, "cannot rebuild %S", v);
}

/* The exit of an autocast block traced here, at a break inside it: AutocastEnter(*args),
 * which the resume function calls to enter the block again (cdyn_ctx_reentered_in_resume);
 * an AutocastExit handed in is loaded through its source. */
static int
autocast_exit_reconstruct(cdyn_cg *cg, PyObject *v)
{
    PyObject *args = V(v)->u.amp.args;
    if (args == NULL) {
        return cdyn_cg_source(cg, V(v)->source);
    }
    if (cdyn_cg_push_callable(cg, *cdyn_ctx_family(v)->enter_type) < 0) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
        if (cdyn_cg_load_const(cg, PyTuple_GET_ITEM(args, i)) < 0) {
            return -1;
        }
    }
    return cdyn_cg_call(cg, (int)PyTuple_GET_SIZE(args));
}

int
cdyn_ctx_reentered_in_resume(PyObject *v)
{
    return V(v)->kind == VK_AUTOCAST_EXIT && V(v)->u.amp.node != NULL;
}

/* GradModeExit(prev): restores grad mode at the end of a block split by a break. */
static int
ctx_reconstruct(cdyn_cg *cg, PyObject *v)
{
    if (V(v)->kind == VK_AUTOCAST_EXIT) {
        return autocast_exit_reconstruct(cg, v);
    }
    if (V(v)->kind == VK_NULLCTX && (V(v)->bits & (NULLCTX_EXIT | NULLCTX_EOGB)) ==
                                        (NULLCTX_EXIT | NULLCTX_EOGB)) {
        /* an error_on_graph_break block's exit: ErrorOnGraphBreakExit(flag, prev) */
        PyObject *flag = PyLong_FromLong((V(v)->bits & NULLCTX_EOGB_ON) ? 2 : 1);
        PyObject *prev = PyLong_FromLong((long)((V(v)->bits >> NULLCTX_EOGB_PREV_SHIFT) & 3u));
        int rc = flag && prev && cdyn_cg_push_callable(cg, cdyn_G.eogb_exit_type) == 0 &&
                         cdyn_cg_load_const(cg, flag) == 0 && cdyn_cg_load_const(cg, prev) == 0
                     ? cdyn_cg_call(cg, 2)
                     : -1;
        Py_XDECREF(flag);
        Py_XDECREF(prev);
        return rc;
    }
    if (V(v)->kind == VK_NULLCTX) {   /* nullcontext(enter_result), or its __exit__ */
        int exit = (V(v)->bits & NULLCTX_EXIT) != 0, name;
        if (cdyn_cg_push_callable(cg, nullcontext_type) < 0 ||
            (!exit && cdyn_cg_value(cg, V(v)->u.nullctx.enter_result) < 0) ||
            cdyn_cg_call(cg, exit ? 0 : 1) < 0) {
            return -1;
        }
        name = exit ? cdyn_cg_name(cg, cdyn_G.s_exit) : 0;
        return name < 0 || (exit && cdyn_cg_emit(cg, LOAD_ATTR, name) < 0) ? -1 : 0;
    }
    if (V(v)->kind == VK_GRADFN) {   /* torch.enable_grad(f) / torch.no_grad(f) */
        return cdyn_cg_push_callable(cg, (V(v)->bits & GRAD_MODE_ON) ? cdyn_G.enable_grad
                                                                     : cdyn_G.no_grad) < 0 ||
                       cdyn_cg_value(cg, V(v)->u.gradfn.fn) < 0
                   ? -1
                   : cdyn_cg_call(cg, 1);
    }
    if (V(v)->kind != VK_GRADEXIT) {
        PyErr_Format(PyExc_SystemError, "cdynamo: no way to rebuild %R", v);
        return -1;
    }
    if (cdyn_cg_push_callable(cg, cdyn_G.grad_mode_exit_type) < 0 ||
        cdyn_cg_load_const(cg, (V(v)->bits & GRAD_MODE_ON) ? Py_True : Py_False) < 0) {
        return -1;
    }
    return cdyn_cg_call(cg, 1);
}

PyObject *
cdyn_ctx_open_autocast_exits(cdyn_tx *tx, cdyn_fs *fs)
{
    PyObject *exits = PyList_New(0);
    Py_ssize_t n = PyList_GET_SIZE(tx->open_modes);
    for (int k = 0; exits != NULL && k < fs->sp; k++) {
        PyObject *v = fs->stack[k];
        if (V(v)->kind == VK_AUTOCAST_EXIT && V(v)->u.amp.node != NULL) {
            Py_ssize_t i = PyList_GET_SIZE(exits);
            if (i >= n || PyList_GET_ITEM(tx->open_modes, i) != V(v)->u.amp.mode) {
                Py_DECREF(exits);
                Py_RETURN_NONE;
            }
            if (PyList_Append(exits, v) < 0) {
                Py_CLEAR(exits);
            }
        }
    }
    if (exits != NULL && PyList_GET_SIZE(exits) != n) {
        Py_DECREF(exits);
        Py_RETURN_NONE;
    }
    return exits;
}

/* Which glue object of the mode families obj is: 1 + 2*family for an ...Enter, 2 + 2*family
 * for an ...Exit, 0 for none. */
static int
mode_glue_kind(PyObject *obj)
{
    PyObject *t = (PyObject *)Py_TYPE(obj);
    for (int f = 0; f < N_FAMILIES; f++) {
        if (t == *families[f].enter_type || t == *families[f].exit_type) {
            return 1 + 2 * f + (t == *families[f].exit_type);
        }
    }
    return 0;
}

tr_status
cdyn_ctx_wrap_eogb_exit(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    PyObject *flag = PyObject_GetAttrString(obj, "flag");
    PyObject *prev = flag ? PyObject_GetAttrString(obj, "prev") : NULL;
    long f = prev ? PyLong_AsLong(flag) : -1, p = prev ? PyLong_AsLong(prev) : -1;
    tr_status st = TR_ERROR;
    if (f < 1 || f > 2 || p < 0 || p > 2) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "cdynamo: bad ErrorOnGraphBreakExit");
        }
        goto done;
    }
    if (source != NULL) {   /* its type, flag and prev */
        PyObject *names[2] = {PyUnicode_InternFromString("flag"), PyUnicode_InternFromString("prev")};
        PyObject *vals[2] = {flag, prev};
        int bad = cdyn_guards_add_type(tx->guards, source, Py_TYPE(obj)) < 0;
        for (int i = 0; i < 2; i++) {
            PyObject *asrc = !bad && names[i] ? cdyn_source_attr(source, names[i]) : NULL;
            bad = bad || asrc == NULL || cdyn_guards_add_equals(tx->guards, asrc, vals[i]) < 0;
            Py_XDECREF(asrc);
            Py_XDECREF(names[i]);
        }
        if (bad) {
            goto done;
        }
    }
    *out = cdyn_value_alloc(VK_NULLCTX, source);
    if (*out == NULL) {
        goto done;
    }
    V(*out)->bits |= NULLCTX_EXIT | NULLCTX_EOGB | (f == 2 ? NULLCTX_EOGB_ON : 0) |
                     ((unsigned)p << NULLCTX_EOGB_PREV_SHIFT);
    V(*out)->u.nullctx.enter_result = cdyn_value_const(Py_None);
    tx->eogb = (int)f;   /* the block's setting from the resume function's start */
    st = TR_OK;
done:
    Py_XDECREF(flag);
    Py_XDECREF(prev);
    return st;
}

int
cdyn_ctx_is_mode_glue(PyObject *obj)
{
    return mode_glue_kind(obj) != 0;
}

tr_status
cdyn_ctx_wrap_mode_glue(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    PyObject *args = NULL, *asrc = NULL, *name = NULL;
    int kind = mode_glue_kind(obj), e;
    unsigned int family = kind > 0 ? family_bits[(kind - 1) / 2] : 0;
    assert(kind != 0);
    if (source != NULL && cdyn_guards_add_type(tx->guards, source, Py_TYPE(obj)) < 0) {
        return TR_ERROR;
    }
    if (kind % 2 == 0) {
        /* the exit of a block split by a break: calling it is a break (ctx_call) */
        *out = cdyn_value_alloc(VK_AUTOCAST_EXIT, source);
        if (*out != NULL) {
            V(*out)->bits |= family;
        }
        return *out ? TR_OK : TR_ERROR;
    }
    args = PyObject_GetAttrString(obj, "args");
    e = args == NULL || !PyTuple_Check(args);
    if (!e && source != NULL) {
        name = PyUnicode_InternFromString("args");
        asrc = name ? cdyn_source_attr(source, name) : NULL;
        e = asrc == NULL || cdyn_guards_add_equals(tx->guards, asrc, args) < 0;
    }
    if (!e) {
        *out = cdyn_value_alloc(VK_AUTOCAST, source);
        e = *out == NULL;
    }
    if (!e) {
        V(*out)->u.amp.args = Py_NewRef(args);
        V(*out)->bits |= AMP_REENTER | family;
    }
    Py_XDECREF(args);
    Py_XDECREF(asrc);
    Py_XDECREF(name);
    if (e && !PyErr_Occurred()) {
        PyErr_SetString(PyExc_TypeError, "cdynamo: bad AutocastEnter");
    }
    return e ? TR_ERROR : TR_OK;
}

/* getattr(import module, name): a new reference, NULL + exception. */
static PyObject *
import_attr(const char *module, const char *name)
{
    PyObject *m = PyImport_ImportModule(module), *r;
    if (m == NULL) {
        return NULL;
    }
    r = PyObject_GetAttrString(m, name);
    Py_DECREF(m);
    return r;
}

int cdyn_ctx_init(void);

/* Resolve the context-manager factories; 0 / -1. */
int
cdyn_ctx_init(void)
{
    PyObject *amp = PyImport_ImportModule("torch.amp.autocast_mode");
    PyObject *cl = PyImport_ImportModule("contextlib");
    if (amp == NULL || cl == NULL) {
        Py_XDECREF(amp);
        Py_XDECREF(cl);
        return -1;
    }
    autocast_type = PyObject_GetAttrString(amp, "autocast");
    nullcontext_type = PyObject_GetAttrString(cl, "nullcontext");
    Py_DECREF(amp);
    Py_DECREF(cl);
    if (autocast_type == NULL || nullcontext_type == NULL) {
        return -1;
    }
    profiler_types[0] = import_attr("torch.profiler.profiler", "profile");
    profiler_types[1] = import_attr("torch.autograd.profiler", "profile");
    profiler_types[2] = import_attr("torch.autograd.profiler", "record_function");
    tf_off_types[0] = import_attr("torch._C", "DisableTorchFunctionSubclass");
    tf_off_types[1] = import_attr("torch._C", "DisableTorchFunction");
    eogb_fn = import_attr("torch._dynamo.decorators", "error_on_graph_break");
    eogb_type = import_attr("torch._dynamo.decorators", "ErrorOnGraphBreakDecoratorContextManager");
    {
        PyObject *wrap = import_attr("torch._dynamo.external_utils", "wrap_dunder_call_ctx_manager");
        PyObject *inner = wrap ? PyObject_CallFunction(wrap, "OO", Py_None, Py_None) : NULL;
        ctx_call_code = inner && PyFunction_Check(inner) ? Py_NewRef(PyFunction_GET_CODE(inner)) : NULL;
        Py_XDECREF(inner);
        Py_XDECREF(wrap);
    }
    PyErr_Clear();   /* optional: a torch without them has no such blocks */
    return profiler_types[0] && profiler_types[1] && profiler_types[2] && tf_off_types[0] &&
                   tf_off_types[1]
               ? 0
               : -1;
}

/* A decorated function is a function (eager's functools.wraps wrapper); the context
 * managers have no type here. */
static PyTypeObject *
ctx_python_type(PyObject *v)
{
    return V(v)->kind == VK_GRADFN ? &PyFunction_Type : NULL;
}

const cdyn_vtable cdyn_ctx_vt = {
    .name = "ContextManagerVariable",
    .call = ctx_call,
    .getattr = ctx_getattr,
    .call_method = ctx_call_method,
    .python_type = ctx_python_type,
    .enter = ctx_enter,
    .collect = ctx_collect,
    .reconstruct = ctx_reconstruct,
};
