/* values/torch.c: torch callables recorded in the graph (torch.add, F.relu, torch.nn.init
 * helpers are not: see cdyn_is_graph_function), and torch's grad-mode functions, which
 * change the symbolic grad mode (torch.no_grad(), enable_grad(), set_grad_enabled(m),
 * is_grad_enabled()). */
#include "../tx.h"
#include "../codegen.h"
#include "../trace_rules.h"

/* torch._dynamo.trace_rules' FunctionIdSets the engine reads (strong once read). */
enum { IDS_ALLOWED, IDS_DISALLOWED, N_IDS };
static const char *const id_set_names[N_IDS] = {"_allowed_callable_ids",
                                                "_disallowed_callable_ids"};
static PyObject *id_sets[N_IDS];

/* 1 when obj's id is in torch._dynamo.trace_rules.<id_set_names[which]>; 0 otherwise, also
 * while torch._dynamo is not loaded (no import of our own) or the set does not exist. */
static int
in_id_set(int which, PyObject *obj)
{
    static PyObject *s_mod;
    PyObject *mod, *ids, *key;
    int r;
    if (id_sets[which] == NULL) {
        if (s_mod == NULL && (s_mod = PyUnicode_InternFromString("torch._dynamo.trace_rules")) == NULL) {
            PyErr_Clear();
            return 0;
        }
        mod = PyImport_GetModule(s_mod);
        id_sets[which] = mod ? PyObject_GetAttrString(mod, id_set_names[which]) : NULL;
        Py_XDECREF(mod);
        if (id_sets[which] == NULL) {
            PyErr_Clear();
            return 0;
        }
    }
    ids = PyObject_GetAttrString(id_sets[which], "function_ids");   /* None until initialised */
    if (ids == NULL || !PyAnySet_Check(ids) || PySet_GET_SIZE(ids) == 0) {
        PyErr_Clear();
        Py_XDECREF(ids);
        return 0;
    }
    key = PyLong_FromVoidPtr(obj);
    r = key ? PySet_Contains(ids, key) : -1;
    Py_XDECREF(key);
    Py_DECREF(ids);
    if (r < 0) {
        PyErr_Clear();
        return 0;
    }
    return r;
}

int
cdyn_allowed_in_graph(PyObject *obj)
{
    /* torch._dynamo.nonstrict_trace registers its function here too: one opaque node */
    return in_id_set(IDS_ALLOWED, obj);
}

int
cdyn_disallowed_in_graph(PyObject *obj)
{
    return in_id_set(IDS_DISALLOWED, obj);
}

int
cdyn_is_graph_function(PyObject *obj)
{
    if (PyType_Check(obj) || PyMethod_Check(obj)) {
        return 0;   /* a bound method (types.MethodType(torch.add, x)) is not torch.add */
    }
    if (PyCFunction_Check(obj) && PyCFunction_GET_SELF(obj) != NULL &&
        !PyModule_Check(PyCFunction_GET_SELF(obj)) && !PyType_Check(PyCFunction_GET_SELF(obj))) {
        return 0;   /* a builtin method bound to an object */
    }
    if (!(PyCFunction_Check(obj) || PyFunction_Check(obj) || Py_TYPE(obj)->tp_call != NULL)) {
        return 0;
    }
    if (PyFunction_Check(obj) && cdyn_allowed_in_graph(obj)) {
        return 1;   /* torch._dynamo.allow_in_graph(fn): one node, as torch._dynamo */
    }
    if (cdyn_disallowed_in_graph(obj)) {
        return 0;   /* torch._dynamo.disallow_in_graph(op): a graph break, as torch._dynamo */
    }
    if (cdyn_module_startswith(obj, "torch._dynamo") || cdyn_module_startswith(obj, "torch.fx") ||
        cdyn_module_startswith(obj, "torch._C._dynamo") ||   /* the frame hook's own C API */
        cdyn_module_startswith(obj, "torch.compiler") ||
        cdyn_module_startswith(obj, "torch.autograd") ||
        (PyFunction_Check(obj) &&
         (cdyn_module_startswith(obj, "torch.distributions") ||
          cdyn_module_startswith(obj, "torch._higher_order_ops.associative_scan") ||
          cdyn_module_startswith(obj, "torch.nn.utils.clip_grad") ||
          cdyn_module_startswith(obj, "torch.nn.utils.parametrize") ||
          cdyn_module_startswith(obj, "torch.utils._foreach_utils") ||
          cdyn_module_startswith(obj, "torch.optim") ||
          cdyn_module_startswith(obj, "torch.utils._ordered_set") ||
          cdyn_module_startswith(obj, "torch.utils._pytree")))) {
        /* torch.distributions', associative_scan's, gradient clipping's, parametrize's
           (cached(), its caching getter), pytree's and OrderedSet's Python is traced op by
           op, as torch._dynamo */
        return 0;
    }
    return cdyn_module_startswith(obj, "torch");
}

/* The constant helpers (torch.jit.is_scripting(), torch.compiler.is_compiling(), ...) are
 * trace_rules' CONSTANT entries, folded where a Python function is inlined (inline.c). */
static PyObject *fn_annotate, *fn_assert, *fn_is_tensor, *fn_is_tensor_like, *fn_check;
static PyObject *fn_check_is_size;   /* torch._check_is_size, or NULL */
/* torch.use_deterministic_algorithms, torch._C._set_deterministic_algorithms and the
 * readers of that state (NULL where absent) */
static PyObject *fn_use_det, *fn_set_det, *fn_det_on, *fn_det_warn;
static PyObject *fn_tensor, *fn_refs_tensor;   /* torch.tensor, torch._refs.tensor (or NULL) */

/* torch._C._log_api_usage_once / _log_api_usage_metadata: usage telemetry that libraries
 * call from forward (torchvision's StochasticDepth, every model's __init__/forward helper).
 * It logs each event once per process, so running it at trace time with its constant
 * arguments is all any later call would do; the call folds to None and is no graph node
 * (torch._dynamo records it as a node of no use, so graph counts are equal). */
static PyObject *fn_usage[2];

static int
is_usage_fn(PyObject *obj)
{
    return obj != NULL && (obj == fn_usage[0] || obj == fn_usage[1]);
}

/* Functions of torch's global autocast state: folded, with a GLOBAL_STATE guard. */
static const char *const state_fn_names[] = {"is_autocast_enabled", "get_autocast_dtype",
                                             "is_autocast_cpu_enabled", "get_autocast_cpu_dtype",
                                             "is_autocast_cache_enabled", NULL};
static PyObject *state_fns[8];

static int
is_state_fn(PyObject *obj)
{
    for (int i = 0; state_fns[i] != NULL; i++) {
        if (obj == state_fns[i]) {
            return 1;
        }
    }
    return 0;
}

/* ---- torch objects made in the frame ----------------------------------------------------
 * torch.finfo/iinfo built from constants are built at trace time (their constructors have
 * no effect but the object, which is immutable) and used through a constant source: the
 * same object serves every call of the compiled code. torch.nn modules made in the frame
 * (nn.Softmax(dim=-1)(x)) are objects made while tracing, their __init__ traced
 * (values/newmodule.c): a new module on every call, as in eager. */
static PyObject *finfo_type, *iinfo_type;

static int
is_trusted_constructor(PyObject *obj)
{
    return obj != NULL && (obj == finfo_type || obj == iinfo_type);
}

tr_status
cdyn_torch_size_of(cdyn_tx *tx, PyObject *seq, PyObject **out)
{
    PyObject *items = NULL;
    tr_status st = cdyn_v_unpack(tx, seq, &items);
    if (st != TR_OK) {
        return st;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *it = PyList_GET_ITEM(items, i);
        if (cdyn_v_python_type(it) != &PyLong_Type ||
            (V(it)->kind != VK_CONST && V(it)->kind != VK_SYMINT)) {
            Py_DECREF(items);
            return cdyn_tx_unsupported(tx, "torch.Size of %S", it);
        }
    }
    *out = cdyn_value_seq_list(VK_TUPLE, items);
    Py_DECREF(items);
    if (*out == NULL) {
        return TR_ERROR;
    }
    V(*out)->u.seq.nt_type = Py_NewRef(cdyn_G.torch_size_type);
    return TR_OK;
}

static tr_status
construct(cdyn_tx *tx, PyObject *cls, PyObject *const *args, Py_ssize_t nargs,
          PyObject *kwnames, PyObject **out)
{
    PyObject *objs[32], *real = NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    tr_status st;
    if (!cdyn_all_const(args, nargs) || nargs > 32) {
        return cdyn_tx_unsupported(tx, "%R with non-constant arguments", cls);
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        objs[i] = V(args[i])->u.cnst.value;
    }
    real = PyObject_Vectorcall(cls, objs, nargs - nkw, kwnames);
    if (real == NULL) {
        return cdyn_tx_unsupported(tx, "%R(...) failed", cls);
    }
    st = cdyn_tx_wrap_fixed(tx, real, Py_None, out);
    Py_DECREF(real);
    return st;
}

/* torch.use_deterministic_algorithms(mode, warn_only=w) on constant bools: a graph node
 * torch._C._set_deterministic_algorithms(mode, warn_only=w), so the state changes where
 * the program changes it, as torch._dynamo records it; the state the trace runs under is
 * left as it was (the frame's GLOBAL_STATE guard holds the state at its entry, and reads of
 * the state are not traced). */
static tr_status
use_deterministic(cdyn_tx *tx, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                  PyObject **out)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *call[2] = {NULL, NULL}, *kwn = NULL, *on = NULL, *warn = NULL, *r = NULL, *res;
    PyObject *et, *ev, *etb;
    tr_status st = TR_ERROR;
    if (nargs - nkw != 1 || nkw > 1 ||
        (nkw == 1 && !cdyn_name_is(PyTuple_GET_ITEM(kwnames, 0), "warn_only")) ||
        V(args[0])->kind != VK_CONST || !PyBool_Check(V(args[0])->u.cnst.value) ||
        (nkw == 1 && (V(args[1])->kind != VK_CONST || !PyBool_Check(V(args[1])->u.cnst.value)))) {
        return cdyn_tx_unsupported(tx, "torch.use_deterministic_algorithms with these arguments");
    }
    call[0] = Py_NewRef(args[0]);
    call[1] = nkw ? Py_NewRef(args[1]) : cdyn_value_bool(0);
    kwn = Py_BuildValue("(s)", "warn_only");
    on = PyObject_CallNoArgs(fn_det_on);
    warn = on ? PyObject_CallNoArgs(fn_det_warn) : NULL;
    if (call[1] == NULL || kwn == NULL || warn == NULL) {
        goto done;
    }
    st = cdyn_tx_graph_call(tx, "call_function", fn_set_det, NULL, call, 2, kwn, &r);
    /* the call ran at trace time: the state the trace runs under is put back */
    PyErr_Fetch(&et, &ev, &etb);
    res = PyObject_Vectorcall(fn_set_det, (PyObject *[]){on, warn}, 1, kwn);
    if (res == NULL) {
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(etb);
        st = TR_ERROR;
        goto done;
    }
    Py_DECREF(res);
    PyErr_Restore(et, ev, etb);
    if (st == TR_OK) {
        *out = cdyn_value_const(Py_None);
        st = *out ? TR_OK : TR_ERROR;
    }
done:
    Py_XDECREF(call[0]);
    Py_XDECREF(call[1]);
    Py_XDECREF(kwn);
    Py_XDECREF(on);
    Py_XDECREF(warn);
    Py_XDECREF(r);
    return st;
}

int
cdyn_is_state_setter(PyObject *obj)
{
    return obj == cdyn_G.set_grad_enabled || (fn_set_det != NULL && obj == fn_set_det);
}

/* 1 when obj is a torch function this family folds or handles specially. */
int
cdyn_is_torch_special(PyObject *obj)
{
    return obj == fn_annotate || obj == fn_assert || obj == fn_is_tensor || obj == fn_check ||
           (fn_check_is_size != NULL && obj == fn_check_is_size) || obj == fn_is_tensor_like ||
           is_state_fn(obj) || (fn_use_det != NULL && obj == fn_use_det) ||
           is_usage_fn(obj) ||
           cdyn_is_ctx_factory(obj) || is_trusted_constructor(obj);
}

/* A usage-telemetry call on constants, run now (see fn_usage); None. */
static tr_status
call_usage_fn(cdyn_tx *tx, PyObject *obj, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames, PyObject **out)
{
    PyObject *objs[8], *r = NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs > 8) {
        return cdyn_tx_unsupported(tx, "%R with %zd arguments", obj, nargs);
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        objs[i] = V(args[i])->u.cnst.value;
    }
    r = PyObject_Vectorcall(obj, objs, (size_t)(nargs - nkw), kwnames);
    if (r == NULL) {
        PyErr_Clear();
        return cdyn_tx_unsupported(tx, "%R raised on its arguments (raised in Python)", obj);
    }
    Py_DECREF(r);
    *out = cdyn_value_const(Py_None);
    return *out ? TR_OK : TR_ERROR;
}

/* torch.overrides.is_tensor_like(x): `type(x) is Tensor or hasattr(x, "__torch_function__")`,
 * decided from x's type (fixed by x's guards): a tensor, or a type with the attribute, is
 * tensor-like; a constant is asked; an object whose instances have no __dict__ is not (the
 * attribute can only come from its type); another object may hold it itself: unsupported. */
static tr_status
is_tensor_like(cdyn_tx *tx, PyObject *arg, PyObject **out)
{
    PyTypeObject *t = cdyn_v_python_type(arg);
    int r;
    if (V(arg)->kind == VK_CONST) {
        r = PyObject_HasAttrString(V(arg)->u.cnst.value, "__torch_function__");
    }
    else if (t == NULL) {
        return cdyn_tx_unsupported(tx, "torch.overrides.is_tensor_like of %S", arg);
    }
    else if (PyType_IsSubtype(t, (PyTypeObject *)cdyn_G.torch_tensor_type) ||
             PyObject_HasAttrString((PyObject *)t, "__torch_function__")) {
        r = 1;
    }
    else if (t->tp_dictoffset == 0) {
        r = 0;
    }
    else {
        return cdyn_tx_unsupported(tx, "torch.overrides.is_tensor_like of %S (an instance "
                                       "attribute may say)", arg);
    }
    *out = cdyn_value_bool(r);
    return *out ? TR_OK : TR_ERROR;
}

PyObject *
cdyn_torch_refs_tensor(void)
{
    return fn_refs_tensor;
}

/* 1 when v is a value of kind k or a list/tuple holding one (depth levels deep). */
static int
holds_kind(PyObject *v, cdyn_vkind k, int depth)
{
    PyObject *items = NULL;
    int r = 0;
    if (V(v)->kind == k) {
        return 1;
    }
    if (depth == 0 || (V(v)->kind != VK_LIST && V(v)->kind != VK_TUPLE) ||
        (V(v)->bits & SEQ_LAZY)) {
        return 0;
    }
    items = V(v)->u.seq.items;
    for (Py_ssize_t i = 0; items != NULL && !r && i < PyList_GET_SIZE(items); i++) {
        r = holds_kind(PyList_GET_ITEM(items, i), k, depth - 1);
    }
    return r;
}

/* 1 when an argument is a value of kind k or a list/tuple (two levels deep) holding one; an
 * input container not read yet may hold anything: 1. */
static int
any_arg_holds(PyObject *const *args, Py_ssize_t n, cdyn_vkind k)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (holds_kind(args[i], k, 2) || (V(args[i])->bits & SEQ_LAZY)) {
            return 1;
        }
    }
    return 0;
}

/* torch._check(cond[, message]): a constant cond checked now; a symbolic bool (a relation
 * between sizes) checked by torch._check itself on its fake, which makes it a shape guard, or,
 * on an unbacked value, a runtime assertion the ShapeEnv defers into the graph, as
 * torch._dynamo. A check that fails is a graph break: torch._check raises in Python. */
static tr_status
call_check(cdyn_tx *tx, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
           PyObject **out)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *cond = nargs - nkw >= 1 ? args[0] : NULL, *r;
    if (cond == NULL || nargs > 2 ||
        (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "message") != 0)) {
        return cdyn_tx_unsupported(tx, "torch._check with these arguments");
    }
    if (V(cond)->kind == VK_CONST && PyBool_Check(V(cond)->u.cnst.value)) {
        if (V(cond)->u.cnst.value != Py_True) {
            return cdyn_tx_unsupported(tx, "torch._check fails (raised in Python)");
        }
    }
    else if (V(cond)->kind == VK_SYMINT && cdyn_v_python_type(cond) == &PyBool_Type) {
        /* checked on the fake first (a failing check is a break, not an error of the graph
           call); then recorded as a torch._check node, as torch._dynamo does: the runtime
           assertion pass (_shapes.py finalize) makes it an _assert_scalar, and the symbols
           it reads are graph inputs, so a backend that re-derives the ShapeEnv's deferred
           assertions (inductor) finds them bound. On an unbacked value (item() with
           capture_scalar_outputs) the ShapeEnv defers the check itself. */
        r = PyObject_CallOneArg(fn_check, V(cond)->u.sym.fake);
        if (r == NULL) {
            PyErr_Clear();
            return cdyn_tx_unsupported(tx, "torch._check fails (raised in Python)");
        }
        Py_DECREF(r);
        tr_status st = cdyn_sym_record_effect(tx, fn_check, &cond, 1);
        if (st != TR_OK) {
            return st;
        }
    }
    else {
        return cdyn_tx_unsupported(tx, "torch._check of %S", cond);
    }
    *out = cdyn_value_const(Py_None);
    return *out ? TR_OK : TR_ERROR;
}

/* torch._check_is_size(i): a constant i checked now (>= 0); on a symbolic int (an
 * unbacked .item()) torch's own check on its fake, a runtime assertion the ShapeEnv defers
 * into the graph (a negative value raises when the graph runs), as torch._dynamo. */
static tr_status
call_check_is_size(cdyn_tx *tx, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                   PyObject **out)
{
    PyObject *arg = NULL, *r;
    if (nargs == 1 && kwnames == NULL && cdyn_v_python_type(args[0]) == &PyLong_Type) {
        arg = V(args[0])->kind == VK_CONST ? V(args[0])->u.cnst.value
              : V(args[0])->kind == VK_SYMINT ? V(args[0])->u.sym.fake : NULL;
    }
    if (arg == NULL) {
        return cdyn_tx_unsupported(tx, "torch._check_is_size with these arguments");
    }
    r = PyObject_CallOneArg(fn_check_is_size, arg);   /* a SymInt's check: deferred */
    if (r == NULL) {
        PyErr_Clear();
        return cdyn_tx_unsupported(tx, "torch._check_is_size fails (raised in Python)");
    }
    Py_DECREF(r);
    *out = cdyn_value_const(Py_None);
    return *out ? TR_OK : TR_ERROR;
}

/* torch.jit.annotate(type, x) is x; torch._assert(cond, msg) on a constant cond is checked
 * now; torch.is_tensor(x) is folded from x's type (fixed by x's guards), never a graph node.
 * *handled = 0 for other functions. */
static tr_status
call_special(cdyn_tx *tx, PyObject *obj, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames, PyObject **out, int *handled)
{
    *handled = 1;
    if (obj == fn_annotate && nargs == 2 && kwnames == NULL) {
        *out = Py_NewRef(args[1]);
        return TR_OK;
    }
    if (obj == fn_is_tensor && nargs == 1 && kwnames == NULL &&
        cdyn_v_python_type(args[0]) != NULL) {
        *out = cdyn_value_bool(PyType_IsSubtype(cdyn_v_python_type(args[0]),
                                                (PyTypeObject *)cdyn_G.torch_tensor_type));
        return *out ? TR_OK : TR_ERROR;
    }
    if (obj == fn_is_tensor_like && nargs == 1 && kwnames == NULL) {
        return is_tensor_like(tx, args[0], out);
    }
    if (obj == fn_assert && nargs == 2 && kwnames == NULL && V(args[0])->kind == VK_CONST) {
        int t = PyObject_IsTrue(V(args[0])->u.cnst.value);
        if (t != 1) {
            PyErr_Clear();
            return cdyn_tx_unsupported(tx, "torch._assert fails (raised in Python)");
        }
        *out = cdyn_value_const(Py_None);
        return *out ? TR_OK : TR_ERROR;
    }
    if (is_usage_fn(obj) && cdyn_all_const(args, nargs)) {
        return call_usage_fn(tx, obj, args, nargs, kwnames, out);
    }
    if (obj == fn_check) {
        return call_check(tx, args, nargs, kwnames, out);
    }
    if (fn_use_det != NULL && obj == fn_use_det) {
        return use_deterministic(tx, args, nargs, kwnames, out);
    }
    if (fn_check_is_size != NULL && obj == fn_check_is_size) {
        return call_check_is_size(tx, args, nargs, kwnames, out);
    }
    *handled = 0;
    return TR_OK;
}

static tr_status
call_state_fn(cdyn_tx *tx, PyObject *obj, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames, PyObject **out, int *handled)
{
    PyObject *argt = NULL, *r = NULL;
    *handled = is_state_fn(obj);
    if (!*handled) {
        return TR_OK;
    }
    if (kwnames != NULL || !cdyn_all_const(args, nargs)) {
        return cdyn_tx_unsupported(tx, "%R with non-constant arguments", obj);
    }
    argt = PyTuple_New(nargs);
    for (Py_ssize_t i = 0; argt && i < nargs; i++) {
        PyTuple_SET_ITEM(argt, i, Py_NewRef(V(args[i])->u.cnst.value));
    }
    r = argt ? PyObject_Call(obj, argt, NULL) : NULL;
    if (r == NULL || !cdyn_is_constant(r) || cdyn_guards_add_call(tx->guards, obj, argt, r) < 0) {
        Py_XDECREF(argt);
        Py_XDECREF(r);
        return cdyn_tx_unsupported(tx, "%R failed", obj);
    }
    Py_DECREF(argt);
    *out = cdyn_value_const_steal(r);
    return *out ? TR_OK : TR_ERROR;
}

/* Call obj now on the constants args (kwnames: the names of the last ones); *res: new
 * result, or NULL when the call raised (cleared: the program's own call raises it). */
static int
call_on_constants(PyObject *obj, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                  PyObject *module, PyObject **argt, PyObject **res)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *kw = nkw || module ? PyDict_New() : NULL;
    *res = NULL;
    *argt = PyTuple_New(nargs - nkw);
    if (*argt == NULL || ((nkw || module) && kw == NULL) ||
        (module != NULL && PyDict_SetItemString(kw, "module", module) < 0)) {
        Py_XDECREF(kw);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *c = V(args[i])->u.cnst.value;
        if (i < nargs - nkw) {
            PyTuple_SET_ITEM(*argt, i, Py_NewRef(c));
        }
        else if (PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i - (nargs - nkw)), c) < 0) {
            Py_DECREF(kw);
            return -1;
        }
    }
    *res = PyObject_Call(obj, *argt, kw);
    Py_XDECREF(kw);
    PyErr_Clear();
    return 0;
}

tr_status
cdyn_tx_fold_call(cdyn_tx *tx, PyObject *obj, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames, PyObject **out, int *handled)
{
    PyObject *value = NULL, *argt = NULL, *r = NULL, *consts[16] = {NULL}, *module = NULL;
    int rule, state;
    tr_status st = TR_ERROR;
    *handled = 0;
    if (!cdyn_all_const(args, nargs)) {
        /* lists / tuples of constants (namedtuple("P", ["a", "b"])): as constants */
        if (nargs > 16) {
            return TR_OK;
        }
        for (Py_ssize_t i = 0; i < nargs; i++) {
            PyObject *c = cdyn_v_as_constant(args[i]);
            consts[i] = c ? cdyn_value_const_steal(c) : NULL;
            if (consts[i] == NULL) {
                for (Py_ssize_t j = 0; j <= i; j++) {
                    Py_XDECREF(consts[j]);
                }
                if (PyErr_Occurred()) {
                    return TR_ERROR;
                }
                return TR_OK;
            }
        }
        st = cdyn_tx_fold_call(tx, obj, consts, nargs, kwnames, out, handled);
        for (Py_ssize_t i = 0; i < nargs; i++) {
            Py_DECREF(consts[i]);
        }
        return st;
    }
    rule = cdyn_rules_for_callable(obj, &value);
    if (rule != CDYN_RULE_FOLD) {
        Py_XDECREF(value);
        return rule < 0 ? TR_ERROR : TR_OK;
    }
    *handled = 1;
    if (PyUnicode_Check(value) && PyUnicode_CompareWithASCIIString(value, "module") == 0) {
        /* collections.namedtuple: its module= (the caller's module in eager, read from the
           calling frame) is the traced caller's __name__ */
        module = tx->cur_fs != NULL ? PyDict_GetItemString(tx->cur_fs->globals, "__name__")
                                    : NULL;
        Py_CLEAR(value);
        value = Py_NewRef(Py_None);
    }
    state = value != Py_None;
    Py_DECREF(value);
    if (state && PyList_GET_SIZE(tx->open_modes) > 0) {
        /* the guard reads the state at the frame's entry; inside an autocast block the
           trace entered, the state read now is the block's */
        return cdyn_tx_unsupported(tx, "%R inside an autocast block (reads global state)", obj);
    }
    if (call_on_constants(obj, args, nargs, kwnames, module, &argt, &r) < 0) {
        goto done;
    }
    if (r != NULL && !state && (PyType_Check(r) || PyModule_CheckExact(r))) {
        /* a class made from constants (a named tuple class), or a module (torch.cpu from
           torch.get_device_module("cpu")): a fixed object of the trace */
        st = cdyn_tx_wrap_fixed(tx, r, Py_None, out);
        goto done;
    }
    if (r == NULL || !cdyn_is_constant(r)) {
        st = cdyn_tx_unsupported(tx, "%R %s", obj,
                                 r ? "gave a non-constant" : "raised (raised in Python)");
        goto done;
    }
    if (state && (kwnames != NULL ||
                  cdyn_guards_add_call(tx->guards, obj, argt, r) < 0)) {
        st = kwnames ? cdyn_tx_unsupported(tx, "%R with keyword arguments", obj) : TR_ERROR;
        goto done;
    }
    *out = cdyn_value_const(r);
    st = *out ? TR_OK : TR_ERROR;
done:
    Py_XDECREF(argt);
    Py_XDECREF(r);
    return st;
}

/* A GRADCTX value setting `mode`; applied: the mode is already set (set_grad_enabled) and
 * prev is the mode before it. */
static PyObject *
grad_ctx(int mode, int applied, int prev)
{
    PyObject *v = cdyn_value_alloc(VK_GRADCTX, NULL);
    if (v != NULL) {
        V(v)->bits = (mode ? GRAD_MODE_ON : 0) | (applied ? GRAD_APPLIED : 0) |
                     (prev ? GRAD_PREV_ON : 0);
    }
    return v;
}

/* torch.set_grad_enabled(mode) sets the mode at once (also usable in a with). */
static tr_status
set_grad_enabled(cdyn_tx *tx, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                 PyObject **out)
{
    int prev = tx->grad_enabled, mode;
    tr_status st;
    if (nargs != 1 || kwnames != NULL ||
        (V(args[0])->kind != VK_CONST && V(args[0])->kind != VK_SYMINT)) {
        return cdyn_tx_unsupported(tx, "torch.set_grad_enabled with a non-constant mode");
    }
    if (V(args[0])->kind == VK_SYMINT) {
        /* set_grad_enabled(x.size(0) > 2): decided by the current sizes, guarded */
        st = cdyn_v_truth(tx, args[0], &mode);
        if (st != TR_OK) {
            return st;
        }
    }
    else if ((mode = PyObject_IsTrue(V(args[0])->u.cnst.value)) < 0) {
        return TR_ERROR;
    }
    st = cdyn_ctx_set_grad(tx, mode);
    if (st != TR_OK) {
        return st;
    }
    *out = grad_ctx(mode, 1, prev);
    return *out ? TR_OK : TR_ERROR;
}

/* The plain-Python version of a Python function of torch.distributed that cdynamo traces in
 * its place (cdynamo._distributed.polyfill_for: the functional collectives and the in-place
 * c10d calls, as _c10d_functional operators on a group name), a new reference; NULL with no
 * error when there is none. */
static PyObject *
collective_polyfill(PyObject *obj)
{
    static PyObject *lookup;
    PyObject *pf;
    if (lookup == NULL) {
        PyObject *mod = PyImport_ImportModule("cdynamo._distributed");
        lookup = mod ? PyObject_GetAttrString(mod, "polyfill_for") : NULL;
        Py_XDECREF(mod);
        if (lookup == NULL) {
            return NULL;
        }
    }
    pf = PyObject_CallOneArg(lookup, obj);
    if (pf == Py_None) {
        Py_DECREF(pf);
        return NULL;
    }
    return pf;
}

/* The Python function a torch.jit.script / torch.jit.trace function was made from (torch
 * keeps it as _torchdynamo_inline for this purpose: torch._dynamo inlines it), a new
 * reference, or NULL (no exception) for any other object. The script function itself is
 * pinned by identity where it was read. */
static PyObject *
script_function_python(PyObject *obj)
{
    static PyObject *script_fn_type;
    PyObject *py = NULL;
    if (script_fn_type == NULL) {
        PyObject *c = PyImport_ImportModule("torch._C");
        script_fn_type = c != NULL ? PyObject_GetAttrString(c, "ScriptFunction") : NULL;
        Py_XDECREF(c);
        if (script_fn_type == NULL) {
            PyErr_Clear();
            return NULL;
        }
    }
    if ((PyObject *)Py_TYPE(obj) != script_fn_type ||
        (py = PyObject_GetAttrString(obj, "_torchdynamo_inline")) == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyFunction_Check(py)) {
        Py_DECREF(py);
        return NULL;
    }
    return py;
}

static tr_status
torch_call(cdyn_tx *tx, cdyn_fs *fs, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames, PyObject **out)
{
    PyObject *obj = V(fn)->u.obj.obj;
    (void)fs;
    if (PyFunction_Check(obj) && cdyn_module_startswith(obj, "torch.distributed")) {
        PyObject *pf = collective_polyfill(obj);
        if (pf != NULL && PyFunction_Check(pf)) {
            tr_status st = cdyn_tx_inline_function(tx, pf, NULL, NULL, args, nargs, kwnames, out);
            Py_DECREF(pf);
            return st;
        }
        Py_XDECREF(pf);
        if (PyErr_Occurred()) {
            return TR_ERROR;
        }
    }
    {
        PyObject *py = script_function_python(obj);
        if (py != NULL) {
            tr_status st = cdyn_tx_inline_function(tx, py, NULL, NULL, args, nargs, kwnames, out);
            Py_DECREF(py);
            return st;
        }
    }
    if (cdyn_any_ndarray(args, nargs)) {   /* torch.from_numpy(a), ... (values/ndarray.c) */
        return cdyn_ndarray_torch_call(tx, obj, args, nargs, kwnames, out);
    }
    if (obj == cdyn_G.no_grad || obj == cdyn_G.enable_grad) {
        if (nargs == 1 && kwnames == NULL) {   /* torch.no_grad(f): the decorator form */
            return cdyn_ctx_grad_fn(tx, args[0], obj == cdyn_G.enable_grad, out);
        }
        if (nargs != 0) {
            return cdyn_tx_unsupported(tx, "grad-mode context with arguments");
        }
        *out = grad_ctx(obj == cdyn_G.enable_grad, 0, 0);
        return *out ? TR_OK : TR_ERROR;
    }
    if (obj == cdyn_G.is_grad_enabled && nargs == 0) {
        *out = cdyn_value_bool(tx->grad_enabled);
        return *out ? TR_OK : TR_ERROR;
    }
    if (obj == cdyn_G.set_grad_enabled_cls) {
        return set_grad_enabled(tx, args, nargs, kwnames, out);
    }
    {
        int handled = 0;
        tr_status st = call_special(tx, obj, args, nargs, kwnames, out, &handled);
        if (!handled) {
            st = cdyn_ctx_factory(tx, obj, args, nargs, kwnames, out, &handled);
        }
        if (!handled) {
            st = call_state_fn(tx, obj, args, nargs, kwnames, out, &handled);
        }
        if (!handled) {   /* torch.get_default_dtype(), torch.promote_types(a, b), ... */
            st = cdyn_tx_fold_call(tx, obj, args, nargs, kwnames, out, &handled);
        }
        if (!handled && is_trusted_constructor(obj)) {
            return construct(tx, obj, args, nargs, kwnames, out);
        }
        if (handled) {
            return st;
        }
    }
    if (obj == fn_tensor && fn_refs_tensor != NULL && nargs >= 1 && holds_kind(args[0], VK_SYMINT, 3)) {
        /* torch.tensor([n, 3]) of a symbolic size: torch._refs.tensor builds it from the
           SymInts (torch.tensor would specialise them), as torch._dynamo */
        return cdyn_tx_graph_call(tx, "call_function", fn_refs_tensor, NULL, args, nargs,
                                  kwnames, out);
    }
    if (PyFunction_Check(obj) && !cdyn_allowed_in_graph(obj) && (cdyn_all_const(args, nargs) ||
                                  (any_arg_holds(args, nargs, VK_SYMINT) &&
                                   !any_arg_holds(args, nargs, VK_TENSOR)))) {
        /* a Python helper of torch on constants (F._none_or_dtype(None), F._canonical_mask
           without a mask) or on sizes only (torch.broadcast_shapes of symbolic shapes) has
           no tensor to record: its body is traced instead (its trace rule permitting), as
           torch._dynamo inlines torch's Python functions */
        return cdyn_tx_inline_function(tx, obj, V(fn)->source, NULL, args, nargs, kwnames, out);
    }
    return cdyn_tx_graph_call(tx, "call_function", obj, NULL, args, nargs, kwnames, out);
}

static tr_status
torch_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    return cdyn_getattr_real(tx, v, name, 1, out);
}

static tr_status
torch_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    (void)tx;
    (void)v;
    *out = 1;
    return TR_OK;
}

int cdyn_torch_init(void);

/* Resolve the special functions; 0 / -1 (a missing helper is skipped). */
int
cdyn_torch_init(void)
{
    if (fn_annotate != NULL) {
        return 0;
    }
    {
        PyObject *jit = PyImport_ImportModule("torch.jit"), *torch = PyImport_ImportModule("torch");
        fn_annotate = jit ? PyObject_GetAttrString(jit, "annotate") : NULL;
        fn_assert = torch ? PyObject_GetAttrString(torch, "_assert") : NULL;
        fn_is_tensor = torch ? PyObject_GetAttrString(torch, "is_tensor") : NULL;
        fn_check = torch ? PyObject_GetAttrString(torch, "_check") : NULL;
        fn_check_is_size = torch ? PyObject_GetAttrString(torch, "_check_is_size") : NULL;
        PyErr_Clear();   /* (not in every torch) */
        {
            PyObject *c = torch ? PyObject_GetAttrString(torch, "_C") : NULL;
            fn_use_det = torch ? PyObject_GetAttrString(torch, "use_deterministic_algorithms") : NULL;
            fn_set_det = c ? PyObject_GetAttrString(c, "_set_deterministic_algorithms") : NULL;
            fn_det_on = c ? PyObject_GetAttrString(c, "_get_deterministic_algorithms") : NULL;
            fn_det_warn = c ? PyObject_GetAttrString(c, "_get_deterministic_algorithms_warn_only")
                            : NULL;
            Py_XDECREF(c);
            PyErr_Clear();
            if (!fn_use_det || !fn_set_det || !fn_det_on || !fn_det_warn) {
                Py_CLEAR(fn_use_det);   /* (all or none: the call stays a break) */
            }
        }
        fn_tensor = torch ? PyObject_GetAttrString(torch, "tensor") : NULL;
        {
            PyObject *refs = PyImport_ImportModule("torch._refs");
            fn_refs_tensor = refs ? PyObject_GetAttrString(refs, "tensor") : NULL;
            Py_XDECREF(refs);
            PyErr_Clear();
        }
        {
            PyObject *ov = PyImport_ImportModule("torch.overrides");
            fn_is_tensor_like = ov ? PyObject_GetAttrString(ov, "is_tensor_like") : NULL;
            Py_XDECREF(ov);
            PyErr_Clear();
        }
        finfo_type = torch ? PyObject_GetAttrString(torch, "finfo") : NULL;
        {
            PyObject *tc = torch ? PyObject_GetAttrString(torch, "_C") : NULL;
            fn_usage[0] = tc ? PyObject_GetAttrString(tc, "_log_api_usage_once") : NULL;
            PyErr_Clear();
            fn_usage[1] = tc ? PyObject_GetAttrString(tc, "_log_api_usage_metadata") : NULL;
            PyErr_Clear();
            Py_XDECREF(tc);
        }
        iinfo_type = torch ? PyObject_GetAttrString(torch, "iinfo") : NULL;
        for (int i = 0, k = 0; torch && state_fn_names[i]; i++) {
            PyObject *f = PyObject_GetAttrString(torch, state_fn_names[i]);
            if (f != NULL) {
                state_fns[k++] = f;
            }
            PyErr_Clear();
        }
        Py_XDECREF(jit);
        Py_XDECREF(torch);
        PyErr_Clear();
    }
    return 0;
}

const cdyn_vtable cdyn_torch_vt = {
    .name = "TorchVariable",
    .getattr = torch_getattr,
    .call = torch_call,
    .truth = torch_truth,
    .python_type = cdyn_python_type_obj,
    .collect = cdyn_collect_nothing,
    .reconstruct = cdyn_reconstruct_obj,
};
