/* values/symint.c: dynamic shapes. Symbolic scalars (SymInt, SymFloat, SymBool from torch's
 * ShapeEnv: a symbolic size, an int input made dynamic, size arithmetic, comparisons) and
 * slices with a symbolic bound, plus the decisions of automatic dynamic shapes.
 *
 * A SYMINT value is the symbolic example value and the FX node that computes it: the
 * placeholder of an input symbol (s77, bound to x.size()[0], or a dynamic int input), or a
 * node of size arithmetic (floordiv = s77 // 2) or a size read (size = z.size(0)).
 * Arithmetic with constants and other SYMINTs records call_function nodes (operator.add,
 * torch.sym_max, ...); a comparison gives a SymBool whose truth value is decided at trace
 * time with the hint and guarded by the ShapeEnv (a SHAPE_GUARD, guards.h); whatever needs
 * a concrete value (range(), str(), an index into a list) specialises the symbol: its hint
 * is used and the ShapeEnv guards it. Across a graph break a SYMINT is a graph output (an
 * int), or read again from its source (x.size(0), an int argument).
 *
 * Automatic dynamic shapes, as torch._dynamo 2.13 (automatic_dynamic_shapes=True,
 * assume_static_by_default=True): the code's frame state (cache.h, per code object, keyed by
 * source) remembers each input's sizes/strides/int value; a trace compiles every dim static
 * until one changes, then that dim (or int) is made symbolic (DimDynamic.DYNAMIC; 0 and 1
 * still specialise in the ShapeEnv). compile(dynamic=True) makes every dim symbolic from the
 * start (duck-sized) and ints dynamic; dynamic=False never makes anything dynamic except
 * mark_dynamic. mark_dynamic / maybe_mark_dynamic / mark_static are read from the tensor's
 * attributes (_dynamo_dynamic_indices, ...), as torch._dynamo reads them.
 */
#include <math.h>

#include "../tx.h"
#include "../codegen.h"
#include "../cache.h"

/* Resolved once (strong, process lifetime). */
static PyObject *symint_type, *symfloat_type, *symbool_type;
static PyObject *fn_sym_float, *fn_sym_int, *fn_sym_max, *fn_sym_min;
static PyObject *b_int, *b_float, *b_bool, *b_min, *b_max, *b_range, *b_slice, *b_str,
    *b_repr, *b_format, *b_ascii, *b_hash, *b_divmod, *b_abs, *b_pow, *layout_strided,
    *constraint_violation;
static PyObject *math_sym_fns;   /* dict: math.sqrt -> torch._sym_sqrt, ... (symbolic-aware) */
static PyObject *s_maybe_as_int, *s_maybe_as_bool, *s_maybe_as_float, *s_node, *s_fake_input,
    *s_lift_symbols, *s_sym_input, *s_bound_node, *s_specialize, *s_guards, *s_call_method,
    *s_call_function, *s_create_node, *s_size, *s_stride, *s_float_input;
static PyObject *str_marks[3];   /* _dynamo_dynamic_indices, _weak_, _static_ */

static tr_status sym_compare(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out);

/* ---- set-up ---------------------------------------------------------------------------- */

/* New reference to mod.attr, or NULL with an exception. */
static PyObject *
import_attr(const char *mod, const char *attr)
{
    PyObject *m = PyImport_ImportModule(mod), *r = NULL;
    if (m == NULL) {
        return NULL;
    }
    r = PyObject_GetAttrString(m, attr);
    Py_DECREF(m);
    return r;
}

static const char *const math_sym_names[] = {"sqrt", "cos", "sin", "tan", "cosh", "sinh",
                                             "tanh", "asin", "acos", "atan", "log2", NULL};

/* Resolve the objects above once; 0 / -1. */
static int
sym_init(void)
{
    static const struct { PyObject **var; const char *mod, *attr; } objs[] = {
        {&symint_type, "torch", "SymInt"}, {&symfloat_type, "torch", "SymFloat"},
        {&symbool_type, "torch", "SymBool"}, {&fn_sym_float, "torch", "sym_float"},
        {&fn_sym_int, "torch", "sym_int"}, {&fn_sym_max, "torch", "sym_max"},
        {&fn_sym_min, "torch", "sym_min"}, {&b_int, "builtins", "int"},
        {&b_float, "builtins", "float"}, {&b_bool, "builtins", "bool"},
        {&b_min, "builtins", "min"}, {&b_max, "builtins", "max"},
        {&b_range, "builtins", "range"}, {&b_slice, "builtins", "slice"},
        {&b_str, "builtins", "str"}, {&b_repr, "builtins", "repr"},
        {&b_format, "builtins", "format"}, {&b_ascii, "builtins", "ascii"},
        {&b_hash, "builtins", "hash"}, {&b_divmod, "builtins", "divmod"},
        {&b_abs, "builtins", "abs"}, {&b_pow, "builtins", "pow"},
        {&layout_strided, "torch", "strided"},
        {&constraint_violation, "torch.fx.experimental.symbolic_shapes",
         "ConstraintViolationError"},
    };
    static const struct { PyObject **var; const char *text; } strs[] = {
        {&s_maybe_as_int, "maybe_as_int"}, {&s_maybe_as_bool, "maybe_as_bool"},
        {&s_maybe_as_float, "maybe_as_float"}, {&s_node, "node"},
        {&s_fake_input, "fake_input"}, {&s_lift_symbols, "lift_symbols"},
        {&s_sym_input, "sym_input"}, {&s_bound_node, "bound_node"},
        {&s_specialize, "specialize"}, {&s_guards, "guards"},
        {&s_call_method, "call_method"}, {&s_call_function, "call_function"},
        {&s_create_node, "create_node"}, {&s_size, "size"}, {&s_stride, "stride"},
        {&s_float_input, "float_input"},
        {&str_marks[0], "_dynamo_dynamic_indices"},
        {&str_marks[1], "_dynamo_weak_dynamic_indices"},
        {&str_marks[2], "_dynamo_static_indices"},
    };
    if (symint_type != NULL) {
        return 0;
    }
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        if ((*strs[i].var = PyUnicode_InternFromString(strs[i].text)) == NULL) {
            return -1;
        }
    }
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++) {
        if ((*objs[i].var = import_attr(objs[i].mod, objs[i].attr)) == NULL) {
            return -1;
        }
    }
    /* math functions of a symbolic number as torch's symbolic versions (math.sqrt on a
       SymInt would call __float__ and specialise it), as torch._dynamo */
    if ((math_sym_fns = PyDict_New()) == NULL) {
        return -1;
    }
    for (const char *const *n = math_sym_names; *n != NULL; n++) {
        char tname[32];
        PyObject *m, *t;
        snprintf(tname, sizeof(tname), "_sym_%s", *n);
        m = import_attr("math", *n);
        t = m ? import_attr("torch", tname) : NULL;
        if (t == NULL || PyDict_SetItem(math_sym_fns, m, t) < 0) {
            Py_XDECREF(m);
            Py_XDECREF(t);
            return -1;
        }
        Py_DECREF(m);
        Py_DECREF(t);
    }
    return 0;
}

int
cdyn_sym_open(cdyn_tx *tx)
{
    PyObject *dyn = NULL, *cap = NULL, *fs = NULL;
    if (sym_init() < 0) {
        return -1;
    }
    dyn = PyObject_GetAttrString(tx->options, "dynamic");
    if (dyn == NULL) {
        PyErr_Clear();
        dyn = Py_NewRef(Py_None);
    }
    tx->dynamic = dyn == Py_None ? -1 : PyObject_IsTrue(dyn) == 1;
    Py_DECREF(dyn);
    cap = PyObject_GetAttrString(tx->shapes, "capture_scalar_outputs");
    if (cap == NULL) {
        return -1;
    }
    tx->capture_scalars = PyObject_IsTrue(cap) == 1;
    Py_DECREF(cap);
    fs = cdyn_cache_frame_state(tx->code);
    if (fs == NULL) {
        return -1;
    }
    tx->frame_state = Py_NewRef(fs);
    tx->sym_sources = PyDict_New();
    return tx->sym_sources ? 0 : -1;
}

void
cdyn_sym_clear(cdyn_tx *tx)
{
    Py_CLEAR(tx->shapes);
    Py_CLEAR(tx->frame_state);
    Py_CLEAR(tx->sym_sources);
}

int
cdyn_sym_user_error(void)
{
    return constraint_violation != NULL && PyErr_ExceptionMatches(constraint_violation);
}

int
cdyn_is_symbolic(PyObject *obj)
{
    PyTypeObject *t = Py_TYPE(obj);
    return symint_type != NULL &&
           (t == (PyTypeObject *)symint_type || t == (PyTypeObject *)symfloat_type ||
            t == (PyTypeObject *)symbool_type || PyObject_TypeCheck(obj, (PyTypeObject *)symint_type) ||
            PyObject_TypeCheck(obj, (PyTypeObject *)symfloat_type) ||
            PyObject_TypeCheck(obj, (PyTypeObject *)symbool_type));
}

int
cdyn_any_sym(PyObject *const *args, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (V(args[i])->kind == VK_SYMINT || V(args[i])->kind == VK_SYMSLICE) {
            return 1;
        }
    }
    return 0;
}

/* 1 when v is a number the symbolic arithmetic takes (a CONST int/float/bool or a SYMINT). */
static int
is_number(PyObject *v)
{
    PyObject *o;
    if (V(v)->kind == VK_SYMINT) {
        return 1;
    }
    if (V(v)->kind != VK_CONST) {
        return 0;
    }
    o = V(v)->u.cnst.value;
    return PyLong_Check(o) || PyFloat_Check(o) || PyBool_Check(o);
}

/* ---- values ---------------------------------------------------------------------------- */

/* The constant a symbolic value is known to equal (after the ShapeEnv's replacements), as a
 * new reference, or NULL (no exception) when it is really symbolic. */
static PyObject *
known_constant(PyObject *fake)
{
    PyObject *node = PyObject_GetAttr(fake, s_node), *r = NULL;
    PyObject *meth = PyObject_TypeCheck(fake, (PyTypeObject *)symint_type) ? s_maybe_as_int
                     : PyObject_TypeCheck(fake, (PyTypeObject *)symbool_type) ? s_maybe_as_bool
                                                                               : s_maybe_as_float;
    if (node != NULL) {
        r = PyObject_CallMethodNoArgs(node, meth);
        Py_DECREF(node);
    }
    if (r == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (r == Py_None) {
        Py_DECREF(r);
        return NULL;
    }
    return r;
}

tr_status
cdyn_sym_value(cdyn_tx *tx, PyObject *fake, PyObject *node, PyObject *source, PyObject **out)
{
    PyObject *c = NULL;
    if (!cdyn_is_symbolic(fake)) {
        if (!(PyLong_Check(fake) || PyFloat_Check(fake) || PyBool_Check(fake))) {
            return cdyn_tx_unsupported(tx, "symbolic operation gave a %s", Py_TYPE(fake)->tp_name);
        }
        *out = cdyn_value_const(fake);
        return *out ? TR_OK : TR_ERROR;
    }
    c = known_constant(fake);
    if (c != NULL) {
        *out = cdyn_value_const_steal(c);
        return *out ? TR_OK : TR_ERROR;
    }
    if (source == NULL && node != NULL) {
        source = PyDict_GetItemWithError(tx->sym_sources, node);   /* borrowed */
        if (source == NULL && PyErr_Occurred()) {
            return TR_ERROR;
        }
    }
    *out = cdyn_value_alloc(VK_SYMINT, source);
    if (*out == NULL) {
        return TR_ERROR;
    }
    V(*out)->u.sym.fake = Py_NewRef(fake);
    V(*out)->u.sym.node = Py_NewRef(node);
    return TR_OK;
}

/* A call_function node of target over the FX arguments nargs (a tuple) with example value
 * res; *node new. */
static tr_status record_node(cdyn_tx *tx, PyObject *kind, PyObject *target, PyObject *nargs,
                             PyObject *nkwargs, PyObject *res, PyObject **node);

static tr_status
make_node(cdyn_tx *tx, PyObject *kind, PyObject *target, PyObject *nargs, PyObject *res,
          PyObject **node)
{
    return record_node(tx, kind, target, nargs, NULL, res, node);
}

tr_status
cdyn_tx_record_node(cdyn_tx *tx, PyObject *target, PyObject *nargs, PyObject *nkwargs,
                    PyObject *res, PyObject **node)
{
    return record_node(tx, s_call_function, target, nargs, nkwargs, res, node);
}

static tr_status
record_node(cdyn_tx *tx, PyObject *kind, PyObject *target, PyObject *nargs, PyObject *nkwargs,
            PyObject *res, PyObject **node)
{
    PyObject *kw = nkwargs != NULL ? Py_NewRef(nkwargs) : PyDict_New(), *r = NULL;
    *node = kw ? PyObject_CallMethodObjArgs(tx->graph, s_create_node, kind, target, nargs, kw,
                                            NULL)
               : NULL;
    Py_XDECREF(kw);
    if (*node == NULL) {
        return TR_ERROR;
    }
    r = PyObject_CallMethodObjArgs(tx->glue, cdyn_G.s_set_example, *node, res, NULL);
    if (r == NULL) {
        Py_CLEAR(*node);
        return TR_ERROR;
    }
    Py_DECREF(r);
    Py_XSETREF(tx->last_node, Py_NewRef(*node));
    tx->n_call_nodes++;
    return TR_OK;
}

/* target(*args) on symbolic / constant values: a constant when the result is one, else a
 * SYMINT computed by a new call_function node. *out new. */
static tr_status
sym_call(cdyn_tx *tx, PyObject *target, PyObject *const *args, Py_ssize_t n, PyObject **out)
{
    PyObject *fargs = PyTuple_New(n), *nargs = PyTuple_New(n), *res = NULL, *node = NULL;
    tr_status st = TR_ERROR;
    if (fargs == NULL || nargs == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *f = NULL, *nd = NULL;
        st = cdyn_v_graph_arg(tx, args[i], &f, &nd);
        if (st != TR_OK) {
            goto done;
        }
        PyTuple_SET_ITEM(fargs, i, f);
        PyTuple_SET_ITEM(nargs, i, nd);
    }
    st = TR_ERROR;
    res = PyObject_Call(target, fargs, NULL);
    if (res == NULL) {
        st = cdyn_tx_unsupported(tx, "symbolic %R failed", target);
        goto done;
    }
    if (!cdyn_is_symbolic(res)) {
        st = cdyn_sym_value(tx, res, NULL, NULL, out);   /* a constant (maybe guarded) */
        goto done;
    }
    {
        PyObject *c = known_constant(res);
        if (c != NULL) {
            *out = cdyn_value_const_steal(c);
            st = *out ? TR_OK : TR_ERROR;
            goto done;
        }
    }
    st = make_node(tx, s_call_function, target, nargs, res, &node);
    if (st == TR_OK) {
        st = cdyn_sym_value(tx, res, node, NULL, out);
    }
done:
    Py_XDECREF(fargs);
    Py_XDECREF(nargs);
    Py_XDECREF(res);
    Py_XDECREF(node);
    return st;
}

tr_status
cdyn_sym_record_effect(cdyn_tx *tx, PyObject *target, PyObject *const *args, Py_ssize_t n)
{
    PyObject *nargs = PyTuple_New(n), *node = NULL;
    tr_status st = nargs != NULL ? TR_OK : TR_ERROR;
    for (Py_ssize_t i = 0; i < n && st == TR_OK; i++) {
        PyObject *f = NULL, *nd = NULL;
        st = cdyn_v_graph_arg(tx, args[i], &f, &nd);
        if (st == TR_OK) {
            Py_DECREF(f);
            PyTuple_SET_ITEM(nargs, i, nd);
        }
    }
    if (st == TR_OK) {
        st = make_node(tx, s_call_function, target, nargs, Py_None, &node);
    }
    Py_XDECREF(nargs);
    Py_XDECREF(node);
    return st;
}

/* A symbolic slice as a constant slice: each symbolic bound specialised; a tensor bound
 * cannot be. */
static tr_status
specialize_slice(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    PyObject *c[3] = {NULL, NULL, NULL}, *r = NULL;
    tr_status st = TR_OK;
    for (int i = 0; st == TR_OK && i < 3; i++) {
        PyObject *p = PyList_GET_ITEM(V(v)->u.slice.parts, i);
        st = V(p)->kind == VK_TENSOR ? cdyn_tx_unsupported(tx, "slice bound %S", p)
                                     : cdyn_sym_specialize(tx, p, &c[i]);
    }
    if (st == TR_OK) {
        r = PySlice_New(cdyn_v_real(c[0]), cdyn_v_real(c[1]), cdyn_v_real(c[2]));
        *out = r ? cdyn_value_const_steal(r) : NULL;
        st = *out ? TR_OK : TR_ERROR;
    }
    for (int i = 0; i < 3; i++) {
        Py_XDECREF(c[i]);
    }
    return st;
}

/* ---- numpy scalars (SYM_NUMPY) ---------------------------------------------------------
 * A numpy int64 / float64 input made dynamic is a SymInt / SymFloat (cdyn_sym_numpy_scalar_
 * input); what arithmetic and comparisons make of it stays a numpy scalar as in eager (numpy's
 * rules with Python numbers: int64 op int -> int64, / or a float -> float64, a comparison ->
 * bool_): such results carry SYM_NUMPY, their type is the numpy type, and they are rebuilt,
 * or specialised, as numpy scalars. */

/* The numpy type (borrowed) of a SYM_NUMPY value of example value fake, or of a Python
 * number constant; NULL when numpy is not loaded. */
static PyObject *
numpy_type_of(PyObject *fake)
{
    if (PyBool_Check(fake) || PyObject_TypeCheck(fake, (PyTypeObject *)symbool_type)) {
        return cdyn_numpy_scalar_type(3);
    }
    if (PyFloat_Check(fake) || PyObject_TypeCheck(fake, (PyTypeObject *)symfloat_type)) {
        return cdyn_numpy_scalar_type(2);
    }
    return cdyn_numpy_scalar_type(1);
}

static int
is_numpy_sym(PyObject *v)
{
    return V(v)->kind == VK_SYMINT && (V(v)->bits & SYM_NUMPY);
}

int
cdyn_sym_is_numpy(PyObject *v)
{
    return is_numpy_sym(v);
}

/* *out (a result of an operation on args): a numpy scalar as eager's when some argument is
 * one: a SYMINT marked SYM_NUMPY, a Python number constant turned into the numpy scalar. */
static tr_status
numpy_result(PyObject *const *args, Py_ssize_t n, PyObject **out)
{
    int any = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        any |= is_numpy_sym(args[i]);
    }
    if (!any) {
        return TR_OK;
    }
    if (V(*out)->kind == VK_SYMINT) {
        V(*out)->bits |= SYM_NUMPY;
        return TR_OK;
    }
    if (V(*out)->kind == VK_CONST) {
        PyObject *c = V(*out)->u.cnst.value, *t = numpy_type_of(c), *r;
        if (t == NULL || !(PyLong_CheckExact(c) || PyFloat_CheckExact(c) || PyBool_Check(c))) {
            return TR_OK;
        }
        r = PyObject_CallOneArg(t, c);
        if (r == NULL) {
            Py_CLEAR(*out);
            return TR_ERROR;
        }
        Py_SETREF(*out, cdyn_value_const_steal(r));
        return *out ? TR_OK : TR_ERROR;
    }
    return TR_OK;
}

tr_status
cdyn_sym_specialize(cdyn_tx *tx, PyObject *v, PyObject **out)
{
    PyObject *r;
    if (V(v)->kind == VK_SYMSLICE) {
        return specialize_slice(tx, v, out);
    }
    if (V(v)->kind != VK_SYMINT) {
        *out = Py_NewRef(v);
        return TR_OK;
    }
    r = PyObject_CallMethodOneArg(tx->shapes, s_specialize, V(v)->u.sym.fake);
    if (r == NULL) {
        return cdyn_tx_unsupported(tx, "cannot specialise the symbolic value %S",
                                   V(v)->u.sym.fake);
    }
    *out = cdyn_value_const_steal(r);
    return *out ? numpy_result(&v, 1, out) : TR_ERROR;
}

/* Specialise every SYMINT of args into a new array of values (vals[i] new refs). */
static tr_status
specialize_all(cdyn_tx *tx, PyObject *const *args, Py_ssize_t n, PyObject **vals)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        tr_status st = cdyn_sym_specialize(tx, args[i], &vals[i]);
        if (st != TR_OK) {
            for (Py_ssize_t j = 0; j < i; j++) {
                Py_CLEAR(vals[j]);
            }
            return st;
        }
    }
    return TR_OK;
}

/* ---- metadata reads of tensors ------------------------------------------------------------ */

/* One symbolic element of a metadata read of tensor t: the input placeholder bound to its
 * symbol, or a new call_method node method(t, arg) (arg NULL: no argument). */
static tr_status
meta_element(cdyn_tx *tx, PyObject *t, PyObject *sym, PyObject *method, PyObject *arg,
             PyObject **out)
{
    PyObject *bound = NULL, *nargs = NULL, *node = NULL, *c = known_constant(sym);
    tr_status st;
    if (c != NULL) {
        *out = cdyn_value_const_steal(c);
        return *out ? TR_OK : TR_ERROR;
    }
    bound = PyObject_CallMethodOneArg(tx->shapes, s_bound_node, sym);
    if (bound == NULL) {
        return TR_ERROR;
    }
    if (bound != Py_None) {
        st = cdyn_sym_value(tx, sym, bound, NULL, out);
        Py_DECREF(bound);
        return st;
    }
    Py_DECREF(bound);
    nargs = arg ? PyTuple_Pack(2, V(t)->u.tensor.node, arg) : PyTuple_Pack(1, V(t)->u.tensor.node);
    if (nargs == NULL) {
        return TR_ERROR;
    }
    st = make_node(tx, s_call_method, method, nargs, sym, &node);
    Py_DECREF(nargs);
    if (st == TR_OK) {
        st = cdyn_sym_value(tx, sym, node, NULL, out);
    }
    Py_XDECREF(node);
    return st;
}

tr_status
cdyn_sym_meta(cdyn_tx *tx, PyObject *t, PyObject *obj, const char *method, PyObject *arg,
              PyObject **out)
{
    PyObject *meth = NULL, *items = NULL;
    tr_status st = TR_ERROR;
    int any = 0;
    if (PyTuple_Check(obj)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj); i++) {
            any |= cdyn_is_symbolic(PyTuple_GET_ITEM(obj, i));
        }
    }
    else {
        any = cdyn_is_symbolic(obj);
    }
    if (!any || symint_type == NULL) {
        *out = cdyn_value_const(obj);
        return *out ? TR_OK : TR_ERROR;
    }
    meth = PyUnicode_FromString(method);
    if (meth == NULL) {
        return TR_ERROR;
    }
    if (!PyTuple_Check(obj)) {
        st = meta_element(tx, t, obj, meth, arg, out);
        goto done;
    }
    items = PyList_New(PyTuple_GET_SIZE(obj));
    for (Py_ssize_t i = 0; items != NULL && i < PyTuple_GET_SIZE(obj); i++) {
        PyObject *e = PyTuple_GET_ITEM(obj, i), *v = NULL, *idx = NULL;
        if (cdyn_is_symbolic(e)) {
            idx = PyLong_FromSsize_t(i);
            st = idx ? meta_element(tx, t, e, meth, idx, &v) : TR_ERROR;
            Py_XDECREF(idx);
            if (st != TR_OK) {
                goto done;
            }
        }
        else if ((v = cdyn_value_const(e)) == NULL) {
            goto done;
        }
        PyList_SET_ITEM(items, i, v);
    }
    if (items == NULL) {
        goto done;
    }
    *out = cdyn_value_seq_list(VK_TUPLE, items);
    if (*out != NULL && Py_TYPE(obj) == (PyTypeObject *)cdyn_G.torch_size_type) {
        V(*out)->u.seq.nt_type = Py_NewRef(cdyn_G.torch_size_type);   /* rebuilt as a Size */
    }
    st = *out ? TR_OK : TR_ERROR;
done:
    Py_XDECREF(meth);
    Py_XDECREF(items);
    return st;
}

/* ---- builtins, slices -------------------------------------------------------------------- */

/* 1 when fn is a builtin function of the operator module (math: 0). */
static int
is_operator_fn(PyObject *fn)
{
    PyObject *self;
    const char *m;
    if (!PyCFunction_Check(fn) || (self = PyCFunction_GET_SELF(fn)) == NULL || !PyModule_Check(self)) {
        return 0;
    }
    m = cdyn_pymodule_name(self);
    return strcmp(m, "_operator") == 0 || strcmp(m, "operator") == 0;
}

/* 1 when fn is a function of the operator or math module (pure, symbolic-aware). */
static int
is_operator_or_math(PyObject *fn)
{
    PyObject *self = PyCFunction_Check(fn) ? PyCFunction_GET_SELF(fn) : NULL;
    return is_operator_fn(fn) || (self != NULL && PyModule_Check(self) &&
                                  strcmp(cdyn_pymodule_name(self), "math") == 0);
}

tr_status
cdyn_sym_build_slice(cdyn_tx *tx, PyObject *const *parts, int n, PyObject **out)
{
    PyObject *l = PyList_New(3);
    if (l == NULL) {
        return TR_ERROR;
    }
    for (int i = 0; i < 3; i++) {
        PyObject *p = i < n ? Py_NewRef(parts[i]) : cdyn_value_const(Py_None);
        if (p == NULL) {
            Py_DECREF(l);
            return TR_ERROR;
        }
        if (V(p)->kind != VK_SYMINT && V(p)->kind != VK_TENSOR && !cdyn_v_is_none(p) &&
            !(V(p)->kind == VK_CONST && PyLong_Check(V(p)->u.cnst.value))) {
            Py_DECREF(p);
            Py_DECREF(l);
            return cdyn_tx_unsupported(tx, "slice bound %S", parts[i]);
        }
        PyList_SET_ITEM(l, i, p);
    }
    *out = cdyn_value_alloc(VK_SYMSLICE, NULL);
    if (*out == NULL) {
        Py_DECREF(l);
        return TR_ERROR;
    }
    V(*out)->u.slice.parts = l;
    return TR_OK;
}

/* min / max of symbolic and constant numbers: torch.sym_min / sym_max pairwise. */
static tr_status
sym_minmax(cdyn_tx *tx, PyObject *target, PyObject *const *args, Py_ssize_t n, PyObject **out)
{
    PyObject *acc = Py_NewRef(args[0]);
    for (Py_ssize_t i = 1; i < n; i++) {
        PyObject *pair[2] = {acc, args[i]}, *r = NULL;
        tr_status st = sym_call(tx, target, pair, 2, &r);
        Py_DECREF(acc);
        if (st != TR_OK) {
            return st;
        }
        acc = r;
    }
    *out = acc;
    return TR_OK;
}

/* divmod(a, b) of symbolic numbers: (a // b, a % b), Python's floor semantics. */
static tr_status
sym_divmod(cdyn_tx *tx, PyObject *const *args, PyObject **out)
{
    PyObject *q = NULL, *r = NULL, *l;
    tr_status st = sym_call(tx, cdyn_G.binop_fns[NB_FLOOR_DIVIDE], args, 2, &q);
    if (st == TR_OK) {
        st = sym_call(tx, cdyn_G.binop_fns[NB_REMAINDER], args, 2, &r);
    }
    if (st != TR_OK) {
        Py_XDECREF(q);
        return st;
    }
    l = PyList_New(2);
    if (l == NULL) {
        Py_DECREF(q);
        Py_DECREF(r);
        return TR_ERROR;
    }
    PyList_SET_ITEM(l, 0, q);
    PyList_SET_ITEM(l, 1, r);
    *out = cdyn_value_seq_list(VK_TUPLE, l);
    Py_DECREF(l);
    return *out ? TR_OK : TR_ERROR;
}

/* A builtin with a numpy scalar among its arguments, as eager: int() / float() / bool() give
 * Python numbers, min() / max() the winning argument itself (decided by comparisons, which
 * the ShapeEnv guards); what else keeps numpy's result type unknown is a break. *handled 0:
 * the generic path (abs, pow, operator.*, math.*, str(), range(), ...; the caller makes the
 * result a numpy scalar where numpy_typed says so). */
static tr_status sym_builtin(cdyn_tx *tx, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames, PyObject **out);

static tr_status
numpy_builtin(cdyn_tx *tx, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames, PyObject **out, int *handled)
{
    PyObject *plain = NULL, *best = NULL;
    tr_status st;
    *handled = 1;
    if ((fn == b_int || fn == b_float || fn == b_bool) && nargs == 1 && kwnames == NULL) {
        st = cdyn_sym_value(tx, V(args[0])->u.sym.fake, V(args[0])->u.sym.node, NULL, &plain);
        if (st == TR_OK) {
            st = cdyn_sym_builtin(tx, fn, &plain, 1, NULL, out);
        }
        Py_XDECREF(plain);
        return st;
    }
    if ((fn == b_min || fn == b_max) && nargs >= 2 && kwnames == NULL) {
        best = Py_NewRef(args[0]);
        for (Py_ssize_t i = 1; i < nargs; i++) {
            PyObject *cmp = NULL;
            int wins = 0;
            st = cdyn_v_compare(tx, fn == b_max ? Py_GT : Py_LT, args[i], best, &cmp);
            if (st == TR_OK) {
                st = cdyn_v_truth(tx, cmp, &wins);
            }
            Py_XDECREF(cmp);
            if (st != TR_OK) {
                Py_DECREF(best);
                return st;
            }
            if (wins) {
                Py_SETREF(best, Py_NewRef(args[i]));
            }
        }
        *out = best;
        return TR_OK;
    }
    if (fn == b_abs || fn == b_pow || is_operator_or_math(fn) || fn == b_str || fn == b_repr ||
        fn == b_format || fn == b_hash || fn == b_range) {
        *handled = 0;
        return TR_OK;
    }
    return cdyn_tx_unsupported(tx, "call to %R with a numpy scalar input made dynamic", fn);
}

/* 1 when fn's result on a numpy scalar is a numpy scalar (abs, pow, operator.*); math.*,
 * str() and the like give Python objects. */
static int
numpy_typed(PyObject *fn)
{
    return fn == b_abs || fn == b_pow || is_operator_fn(fn);
}

tr_status
cdyn_sym_builtin(cdyn_tx *tx, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames, PyObject **out)
{
    int numpy = 0, handled = 0;
    tr_status st;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        numpy |= is_numpy_sym(args[i]);
    }
    if (numpy) {
        st = numpy_builtin(tx, fn, args, nargs, kwnames, out, &handled);
        if (handled) {
            return st;
        }
    }
    st = sym_builtin(tx, fn, args, nargs, kwnames, out);
    return st == TR_OK && numpy && numpy_typed(fn) ? numpy_result(args, nargs, out) : st;
}

static tr_status
sym_builtin(cdyn_tx *tx, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames, PyObject **out)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    PyObject *vals[64];
    tr_status st;
    int numbers = 1;
    if (nargs > 64) {
        return cdyn_tx_unsupported(tx, "too many arguments");
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        numbers &= is_number(args[i]);
    }
    if (fn == b_slice && nkw == 0 && npos >= 1 && npos <= 3) {
        if (npos == 1) {   /* slice(stop) */
            PyObject *none = cdyn_value_const(Py_None), *p[2] = {none, args[0]};
            st = none ? cdyn_sym_build_slice(tx, p, 2, out) : TR_ERROR;
            Py_XDECREF(none);
            return st;
        }
        return cdyn_sym_build_slice(tx, args, (int)npos, out);
    }
    if (numbers && nkw == 0) {
        if (fn == b_int && npos == 1 && V(args[0])->kind == VK_SYMINT &&
            PyObject_TypeCheck(V(args[0])->u.sym.fake, (PyTypeObject *)symint_type)) {
            *out = Py_NewRef(args[0]);   /* int(SymInt) is the same SymInt */
            return TR_OK;
        }
        if (fn == b_int && npos == 1) {
            return sym_call(tx, fn_sym_int, args, 1, out);
        }
        if (fn == b_float && npos == 1) {
            return sym_call(tx, fn_sym_float, args, 1, out);
        }
        if (fn == b_bool && npos == 1 && V(args[0])->kind == VK_SYMINT) {
            /* bool(n % 3): the SymBool n % 3 != 0, decided (and guarded) only where it is
               branched on, as torch._dynamo */
            PyObject *zero;
            if (PyObject_TypeCheck(V(args[0])->u.sym.fake, (PyTypeObject *)symbool_type)) {
                *out = Py_NewRef(args[0]);
                return TR_OK;
            }
            if ((zero = cdyn_value_const_steal(PyLong_FromLong(0))) == NULL) {
                return TR_ERROR;
            }
            st = sym_compare(tx, Py_NE, args[0], zero, out);
            Py_DECREF(zero);
            return st;
        }
        if ((fn == b_min || fn == b_max) && npos >= 2) {
            return sym_minmax(tx, fn == b_min ? fn_sym_min : fn_sym_max, args, npos, out);
        }
        if (fn == b_divmod && npos == 2) {
            return sym_divmod(tx, args, out);
        }
        if (PyDict_GetItemWithError(math_sym_fns, fn) != NULL) {   /* math.sqrt(n), ... */
            return sym_call(tx, PyDict_GetItemWithError(math_sym_fns, fn), args, npos, out);
        }
        if (PyErr_Occurred()) {
            return TR_ERROR;
        }
        if (is_operator_or_math(fn) ||
            (PyCFunction_Check(fn) && PyCFunction_GET_SELF(fn) != NULL &&
             PyModule_Check(PyCFunction_GET_SELF(fn)) &&
             strcmp(cdyn_pymodule_name(PyCFunction_GET_SELF(fn)), "builtins") == 0 &&
             fn != b_hash && fn != b_repr && fn != b_format && fn != b_ascii)) {
            return sym_call(tx, fn, args, npos, out);   /* abs, pow, round, math.floor, ... */
        }
    }
    /* anything else needs concrete values (range(), str(), a type): specialise them */
    if (fn == b_range || fn == b_str || fn == b_repr || fn == b_format || fn == b_ascii ||
        fn == b_hash || cdyn_is_builtin(fn)) {
        for (Py_ssize_t i = 0; i < nargs; i++) {
            if (V(args[i])->kind == VK_SYMSLICE) {
                return cdyn_tx_unsupported(tx, "%R of a symbolic slice", fn);
            }
            if (V(args[i])->kind != VK_SYMINT && V(args[i])->kind != VK_CONST) {
                /* refused before specialising: the ShapeEnv keeps a guard it added, and
                   a break here would leave the sizes static (one graph per size) */
                return cdyn_tx_unsupported(tx, "call to %R with non-constant arguments", fn);
            }
        }
        st = specialize_all(tx, args, nargs, vals);
        if (st != TR_OK) {
            return st;
        }
        st = cdyn_all_const(vals, nargs)
                 ? cdyn_call_on_constants(tx, fn, vals, nargs, kwnames, out)
                 : cdyn_tx_unsupported(tx, "call to %R with non-constant arguments", fn);
        for (Py_ssize_t i = 0; i < nargs; i++) {
            Py_DECREF(vals[i]);
        }
        return st;
    }
    return cdyn_tx_unsupported(tx, "call to %R with a symbolic argument", fn);
}

/* ---- the family ---------------------------------------------------------------------------- */

/* slice.start / .stop / .step of a symbolic slice; nothing else is traced. */
static tr_status
sym_getattr(cdyn_tx *tx, PyObject *v, PyObject *name, PyObject **out)
{
    static const char *const fields[3] = {"start", "stop", "step"};
    if (V(v)->kind == VK_SYMSLICE) {
        for (int i = 0; i < 3; i++) {
            if (cdyn_name_is(name, fields[i])) {
                *out = Py_NewRef(PyList_GET_ITEM(V(v)->u.slice.parts, i));
                return TR_OK;
            }
        }
    }
    if (is_numpy_sym(v)) {   /* t.item(), t.dtype: on the numpy scalar, in Python */
        return cdyn_tx_unsupported(tx, "attribute %U of a numpy scalar input made dynamic", name);
    }
    if (V(v)->kind == VK_SYMINT) {
        /* n.bit_length(), s.is_integer(), ...: on its value (guarded), as for what else
           needs a concrete value */
        PyObject *c = NULL;
        tr_status st = cdyn_sym_specialize(tx, v, &c);
        if (st == TR_OK) {
            st = V(c)->kind == VK_CONST ? cdyn_v_getattr(tx, c, name, out)
                                        : cdyn_tx_unsupported(tx, "attribute %U of a symbolic value",
                                                              name);
        }
        Py_XDECREF(c);
        return st;
    }
    return cdyn_tx_unsupported(tx, "attribute %U of a symbolic value", name);
}

/* bool(v): decided by the current sizes, the ShapeEnv guards the decision. */
static tr_status
sym_truth(cdyn_tx *tx, PyObject *v, int *out)
{
    int r;
    if (V(v)->kind == VK_SYMSLICE) {
        *out = 1;
        return TR_OK;
    }
    r = PyObject_IsTrue(V(v)->u.sym.fake);   /* decided by the hint, guarded by the ShapeEnv */
    if (r < 0) {
        return cdyn_tx_unsupported(tx, "data-dependent branch on %S", V(v)->u.sym.fake);
    }
    *out = r;
    return TR_OK;
}

/* 1 when v is a constant str, bytes or tuple: what a number repeats or formats. */
static int
is_const_sequence(PyObject *v)
{
    PyObject *c = V(v)->kind == VK_CONST ? V(v)->u.cnst.value : NULL;
    return c != NULL && (PyUnicode_Check(c) || PyBytes_Check(c) || PyTuple_Check(c));
}

/* A binary operation of a constant sequence and a symbolic number: on the number's value,
 * guarded (the result is a constant of that value, as torch._dynamo specialises it). */
static tr_status
on_constants(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    PyObject *ca = NULL, *cb = NULL;
    tr_status st = cdyn_sym_specialize(tx, a, &ca);
    if (st == TR_OK) {
        st = cdyn_sym_specialize(tx, b, &cb);
    }
    if (st == TR_OK) {
        st = V(ca)->kind == VK_CONST && V(cb)->kind == VK_CONST
                 ? cdyn_v_binop(tx, op, ca, cb, out)
                 : cdyn_tx_unsupported(tx, "BINARY_OP %d on %S and %S", op, a, b);
    }
    Py_XDECREF(ca);
    Py_XDECREF(cb);
    return st;
}

/* Arithmetic between numbers of which one is symbolic: a node of the graph. */
static tr_status
sym_binop(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    PyObject *args[2] = {a, b};
    tr_status st;
    if (is_const_sequence(a) || is_const_sequence(b)) {
        return on_constants(tx, op, a, b, out);   /* "ab" * n, (1, 2) * n, "%d" % n */
    }
    if (!is_number(a) || !is_number(b)) {
        return TR_NOTIMPL;   /* tensors (and everything else) take it from here */
    }
    if (op >= 13) {
        op -= 13;   /* numbers are immutable: n += 1 is n = n + 1 */
    }
    if (op == 4 /* @ */) {
        return TR_NOTIMPL;
    }
    st = sym_call(tx, cdyn_G.binop_fns[op], args, 2, out);
    return st == TR_OK ? numpy_result(args, 2, out) : st;
}

/* A comparison of numbers: a SymBool (decided and guarded when branched on). */
static tr_status
sym_compare(cdyn_tx *tx, int op, PyObject *a, PyObject *b, PyObject **out)
{
    PyObject *args[2] = {a, b};
    tr_status st;
    if (!is_number(a) || !is_number(b)) {
        return TR_NOTIMPL;
    }
    st = sym_call(tx, cdyn_G.cmp_fns[op], args, 2, out);
    return st == TR_OK ? numpy_result(args, 2, out) : st;
}

/* -n, +n, ~n of a symbolic int. */
static tr_status
sym_unary(cdyn_tx *tx, int opcode, PyObject *v, PyObject **out)
{
    PyObject *fn = opcode == UNARY_NEGATIVE ? cdyn_G.neg
                   : opcode == UNARY_POSITIVE ? cdyn_G.pos : cdyn_G.invert;
    tr_status st;
    if (V(v)->kind != VK_SYMINT) {
        return cdyn_tx_unsupported(tx, "unary operator on a slice");
    }
    st = sym_call(tx, fn, &v, 1, out);
    return st == TR_OK ? numpy_result(&v, 1, out) : st;
}

/* The fake and FX argument of a symbolic value (a slice: slice objects of both). */
static tr_status
sym_graph_arg(cdyn_tx *tx, PyObject *v, PyObject **fake, PyObject **node)
{
    PyObject *f[3] = {NULL, NULL, NULL}, *n[3] = {NULL, NULL, NULL};
    tr_status st = TR_OK;
    if (V(v)->kind == VK_SYMINT) {
        /* a symbol of an enclosing level used in the body of a higher-order op is lifted
           into the body's graph, as tensors are */
        tr_status lst = cdyn_tx_lift(tx, V(v)->u.sym.node, V(v)->u.sym.fake, node);
        if (lst == TR_OK) {
            *fake = Py_NewRef(V(v)->u.sym.fake);
        }
        return lst;
    }
    for (int i = 0; i < 3 && st == TR_OK; i++) {
        st = cdyn_v_graph_arg(tx, PyList_GET_ITEM(V(v)->u.slice.parts, i), &f[i], &n[i]);
    }
    if (st == TR_OK) {
        *fake = PySlice_New(f[0], f[1], f[2]);
        *node = PySlice_New(n[0], n[1], n[2]);
        if (*fake == NULL || *node == NULL) {
            Py_CLEAR(*fake);
            Py_CLEAR(*node);
            st = TR_ERROR;
        }
    }
    for (int i = 0; i < 3; i++) {
        Py_XDECREF(f[i]);
        Py_XDECREF(n[i]);
    }
    return st;
}

/* int, float or bool (the type the value has at run time), or slice. */
static PyTypeObject *
sym_python_type(PyObject *v)
{
    PyObject *f;
    if (V(v)->kind == VK_SYMSLICE) {
        return &PySlice_Type;
    }
    f = V(v)->u.sym.fake;
    if (is_numpy_sym(v) && numpy_type_of(f) != NULL) {
        return (PyTypeObject *)numpy_type_of(f);
    }
    if (PyObject_TypeCheck(f, (PyTypeObject *)symbool_type)) {
        return &PyBool_Type;
    }
    return PyObject_TypeCheck(f, (PyTypeObject *)symfloat_type) ? &PyFloat_Type : &PyLong_Type;
}

/* A symbolic value crossing a break is a graph output unless its source reads it again. */
static tr_status
sym_collect(cdyn_tx *tx, cdyn_cg *cg, PyObject *v)
{
    if (V(v)->kind == VK_SYMSLICE) {
        for (int i = 0; i < 3; i++) {
            tr_status st = cdyn_cg_collect(tx, cg, PyList_GET_ITEM(V(v)->u.slice.parts, i));
            if (st != TR_OK) {
                return st;
            }
        }
        return TR_OK;
    }
    if (V(v)->source != NULL) {
        return TR_OK;   /* read again: x.size(0), an int argument */
    }
    return cdyn_cg_add_output(cg, V(v)->u.sym.node) < 0 ? TR_ERROR : TR_OK;
}

/* Push the value: from its source, the graph output, or BUILD_SLICE of the parts. */
static int
sym_reconstruct(cdyn_cg *cg, PyObject *v)
{
    if (V(v)->kind == VK_SYMSLICE) {
        for (int i = 0; i < 3; i++) {
            if (cdyn_cg_value(cg, PyList_GET_ITEM(V(v)->u.slice.parts, i)) < 0) {
                return -1;
            }
        }
        return cdyn_cg_emit(cg, BUILD_SLICE, 3);
    }
    if (V(v)->source != NULL) {
        return cdyn_cg_source(cg, V(v)->source);
    }
    if (is_numpy_sym(v) && numpy_type_of(V(v)->u.sym.fake) != NULL) {   /* np.int64(<output>) */
        return cdyn_cg_push_callable(cg, numpy_type_of(V(v)->u.sym.fake)) < 0 ||
                       cdyn_cg_load_output(cg, V(v)->u.sym.node) < 0
                   ? -1
                   : cdyn_cg_call(cg, 1);
    }
    return cdyn_cg_load_output(cg, V(v)->u.sym.node);
}

const cdyn_vtable cdyn_symint_vt = {
    .name = "SymNodeVariable",
    .getattr = sym_getattr,
    .truth = sym_truth,
    .binop = sym_binop,
    .compare = sym_compare,
    .unary = sym_unary,
    .graph_arg = sym_graph_arg,
    .python_type = sym_python_type,
    .collect = sym_collect,
    .reconstruct = sym_reconstruct,
};

/* ---- automatic dynamic shapes: the frame state ---------------------------------------------
 * An entry per source repr: a tuple (scalar, size, stride) as torch._dynamo's
 * FrameStateSizeEntry, each Py_Ellipsis (unset), Py_None (dynamic) or the value seen (an int;
 * a tuple of int-or-None for size / stride). Merging keeps equal values and makes differing
 * ones None. */

#define UNSET Py_Ellipsis
#define DYN Py_None

/* Merge of two atoms (new reference) or NULL on error. */
static PyObject *
merge_atom(PyObject *x, PyObject *y)
{
    int eq;
    if (x == UNSET) {
        return Py_NewRef(y);
    }
    if (y == UNSET) {
        return Py_NewRef(x);
    }
    if (x == DYN || y == DYN) {
        return Py_NewRef(DYN);
    }
    eq = PyObject_RichCompareBool(x, y, Py_EQ);
    return eq < 0 ? NULL : Py_NewRef(eq ? x : DYN);
}

/* Merge of two size/stride tuples (new reference) or NULL on error. */
static PyObject *
merge_tuple(PyObject *xs, PyObject *ys)
{
    PyObject *r;
    if (xs == UNSET || ys == UNSET) {
        return Py_NewRef(xs == UNSET ? ys : xs);
    }
    if (xs == DYN || ys == DYN || !PyTuple_Check(xs) || !PyTuple_Check(ys) ||
        PyTuple_GET_SIZE(xs) != PyTuple_GET_SIZE(ys)) {
        return Py_NewRef(DYN);
    }
    r = PyTuple_New(PyTuple_GET_SIZE(xs));
    for (Py_ssize_t i = 0; r != NULL && i < PyTuple_GET_SIZE(xs); i++) {
        PyObject *m = merge_atom(PyTuple_GET_ITEM(xs, i), PyTuple_GET_ITEM(ys, i));
        if (m == NULL) {
            Py_CLEAR(r);
            break;
        }
        PyTuple_SET_ITEM(r, i, m);
    }
    return r;
}

/* Merge entry (borrowed 3-tuple) into the frame state fs (a dict, borrowed) under key;
 * returns the merged entry (borrowed from the dict) or NULL on error. */
static PyObject *
state_merge(PyObject *fs, PyObject *key, PyObject *entry)
{
    PyObject *old = PyDict_GetItemWithError(fs, key), *m = NULL;
    if (old == NULL) {
        if (PyErr_Occurred() || PyDict_SetItem(fs, key, entry) < 0) {
            return NULL;
        }
        return entry;
    }
    m = PyTuple_New(3);
    for (int i = 0; m != NULL && i < 3; i++) {
        PyObject *p = (i == 0 ? merge_atom : merge_tuple)(PyTuple_GET_ITEM(old, i),
                                                          PyTuple_GET_ITEM(entry, i));
        if (p == NULL) {
            Py_CLEAR(m);
            break;
        }
        PyTuple_SET_ITEM(m, i, p);
    }
    if (m == NULL || PyDict_SetItem(fs, key, m) < 0) {
        Py_XDECREF(m);
        return NULL;
    }
    Py_DECREF(m);
    return PyDict_GetItemWithError(fs, key);
}

/* state_merge into the frame state of the code being traced. */
static PyObject *
state_update(cdyn_tx *tx, PyObject *key, PyObject *entry)
{
    return state_merge(tx->frame_state, key, entry);
}

/* The frame-state entry of an input value read through a trace (new reference): a tensor's
 * (DYN, sizes, strides), an int's (value, DYN, DYN); Py_None for any other value (nothing to
 * record); NULL on error. */
static PyObject *
input_entry(PyObject *v)
{
    PyObject *shape = NULL, *sz = NULL, *stride = NULL, *entry = NULL;
    if (PyLong_CheckExact(v)) {
        return PyTuple_Pack(3, v, DYN, DYN);
    }
    if (!cdyn_is_tensor(v)) {
        return Py_NewRef(Py_None);
    }
    shape = PyObject_GetAttrString(v, "shape");
    sz = shape ? PySequence_Tuple(shape) : NULL;
    stride = sz ? PyObject_CallMethodNoArgs(v, s_stride) : NULL;
    entry = stride ? PyTuple_Pack(3, DYN, sz, stride) : NULL;
    Py_XDECREF(shape);
    Py_XDECREF(sz);
    Py_XDECREF(stride);
    return entry;
}

/* Record v (borrowed), read through source (borrowed), into fs as a trace reading it as an
 * input records it; the items of lists, tuples and dicts (str / int keys) too, depth levels
 * down, until *budget values were visited. 0, or -1 with an exception. */
static int
record_input(PyObject *fs, PyObject *v, PyObject *source, int depth, int *budget)
{
    PyObject *entry = NULL, *key = NULL, *item = NULL, *isrc = NULL;
    Py_ssize_t pos = 0;
    int rc = -1;
    if (--*budget < 0) {
        return 0;
    }
    if (PyList_CheckExact(v) || PyTuple_CheckExact(v) || PyDict_CheckExact(v)) {
        PyObject *seq = depth > 0 && !PyDict_CheckExact(v) ? PySequence_Fast(v, "") : NULL;
        Py_ssize_t n = seq ? PySequence_Fast_GET_SIZE(seq) : 0;
        rc = 0;
        for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
            key = PyLong_FromSsize_t(i);
            isrc = key ? cdyn_source_item(source, key) : NULL;
            rc = isrc ? record_input(fs, PySequence_Fast_GET_ITEM(seq, i), isrc, depth - 1,
                                     budget)
                      : -1;
            Py_CLEAR(key);
            Py_CLEAR(isrc);
        }
        Py_XDECREF(seq);
        while (rc == 0 && depth > 0 && PyDict_CheckExact(v) && PyDict_Next(v, &pos, &key, &item)) {
            if (!PyUnicode_CheckExact(key) && !PyLong_CheckExact(key)) {
                continue;
            }
            isrc = cdyn_source_item(source, key);
            rc = isrc ? record_input(fs, item, isrc, depth - 1, budget) : -1;
            Py_CLEAR(isrc);
        }
        return rc;
    }
    entry = input_entry(v);
    if (entry == NULL) {
        goto done;
    }
    if (entry != Py_None && state_merge(fs, cdyn_source_repr(source), entry) == NULL) {
        goto done;
    }
    rc = 0;
done:
    Py_XDECREF(entry);
    return rc;
}

int
cdyn_sym_record_eager_call(PyCodeObject *code, PyObject *const *slots)
{
    PyObject *fs = sym_init() < 0 ? NULL : cdyn_cache_frame_state(code), *src = NULL;
    int nargs = code->co_argcount + code->co_kwonlyargcount +
                !!(code->co_flags & CO_VARARGS) + !!(code->co_flags & CO_VARKEYWORDS);
    int rc = fs ? 0 : -1, budget = 256;   /* values visited at most */
    for (int i = 0; rc == 0 && i < nargs; i++) {
        if (slots[i] == NULL) {
            continue;
        }
        src = cdyn_source_local(i, PyTuple_GET_ITEM(code->co_localsplusnames, i));
        rc = src ? record_input(fs, slots[i], src, 3, &budget) : -1;
        Py_CLEAR(src);
    }
    return rc;
}

/* 1 when entry says dim i of size (which = 1) or stride (which = 2) changed. */
static int
state_dynamic(PyObject *entry, int which, Py_ssize_t i)
{
    PyObject *t = PyTuple_GET_ITEM(entry, which);
    if (which == 2) {
        /* strides become dynamic only while every size is static (as torch._dynamo) */
        PyObject *sz = PyTuple_GET_ITEM(entry, 1);
        if (!PyTuple_Check(sz)) {
            return 0;
        }
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(sz); k++) {
            if (PyTuple_GET_ITEM(sz, k) == DYN) {
                return 0;
            }
        }
    }
    if (t == DYN) {
        return 1;
    }
    if (t == UNSET || !PyTuple_Check(t) || i >= PyTuple_GET_SIZE(t)) {
        return 0;
    }
    return PyTuple_GET_ITEM(t, i) == DYN;
}

/* 1 when source goes through an attribute or item of an nn.Module (module state: static,
 * as torch._dynamo's force_nn_module_property_static_shapes and specialized ints). */
static int
under_nn_module(cdyn_tx *tx, PyObject *source)
{
    cdyn_source *s = (cdyn_source *)source;
    while (s->kind == CDYN_SRC_ATTR || s->kind == CDYN_SRC_ITEM || s->kind == CDYN_SRC_ENTRY) {
        PyObject *v = PyDict_GetItemWithError(tx->by_source, s->base->repr);
        if (v == NULL) {
            PyErr_Clear();
        }
        else if (V(v)->kind == VK_NNMODULE) {
            return 1;
        }
        s = s->base;
    }
    return 0;
}

/* 1 when a tensor read through source from an nn.Module keeps static shapes, as torch._dynamo
 * with inline_inbuilt_nn_modules: a buffer or parameter registry entry of the nearest module
 * (force_parameter_static_shapes), or anything held by a torch.nn module
 * (force_nn_module_property_static_shapes). A plain tensor attribute of a user module (a
 * cache, a mask) follows automatic dynamic shapes. 0 when no module is on the path. */
static int
module_tensor_static(cdyn_tx *tx, PyObject *source)
{
    cdyn_source *s = (cdyn_source *)source;
    while (s->kind == CDYN_SRC_ATTR || s->kind == CDYN_SRC_ITEM || s->kind == CDYN_SRC_ENTRY) {
        PyObject *v = PyDict_GetItemWithError(tx->by_source, s->base->repr), *mod, *regs;
        int r;
        if (v == NULL) {
            PyErr_Clear();
            s = s->base;
            continue;
        }
        if (V(v)->kind != VK_NNMODULE) {
            s = s->base;
            continue;
        }
        mod = V(v)->u.obj.obj;
        if (cdyn_module_startswith((PyObject *)Py_TYPE(mod), "torch.nn") || s->kind != CDYN_SRC_ATTR ||
            cdyn_name_is(s->name, "_buffers") || cdyn_name_is(s->name, "_parameters")) {
            return 1;
        }
        regs = PyObject_GetAttrString(mod, "_buffers");
        r = regs != NULL && PyDict_Check(regs) ? PyDict_Contains(regs, s->name) : 1;
        Py_XDECREF(regs);
        PyErr_Clear();
        return r != 0;
    }
    return 0;
}

/* 1 when source reads an item or entry of a container somewhere on its path. */
static int
in_container(PyObject *source)
{
    for (cdyn_source *s = (cdyn_source *)source; s != NULL; s = s->base) {
        if (s->kind == CDYN_SRC_ITEM || s->kind == CDYN_SRC_ENTRY) {
            return 1;
        }
    }
    return 0;
}

/* 1 when source is base[key] with a str key (a dict entry read by name). */
static int
named_entry(PyObject *source)
{
    cdyn_source *s = (cdyn_source *)source;
    return s->kind == CDYN_SRC_ITEM && s->name != NULL && PyUnicode_Check(s->name);
}

/* 1 when source is item i (an int index) of a tuple read by name from a dict: the floats of
 * an optimizer param group's "betas" (an LR scheduler's momentum cycling changes beta1 every
 * step), automatic dynamic as a float under a name is. */
static int
named_tuple_entry_item(PyObject *source)
{
    cdyn_source *s = (cdyn_source *)source;
    return s->kind == CDYN_SRC_ITEM && s->name != NULL && PyLong_CheckExact(s->name) &&
           s->base != NULL && named_entry((PyObject *)s->base);
}

/* 1 when source starts at a local or a closure cell of the frame (an input). */
static int
rooted_in_frame(PyObject *source)
{
    cdyn_source *s = (cdyn_source *)source;
    while (s->base != NULL) {
        s = s->base;
    }
    return s->kind == CDYN_SRC_LOCAL || s->kind == CDYN_SRC_CLOSURE;
}

/* The dims marked on tensor t by attribute name (a set), as a new reference, or NULL with
 * no exception when there is none. */
static PyObject *
marks_of(PyObject *t, PyObject *name)
{
    PyObject *m = PyObject_GetAttr(t, name);
    if (m == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyAnySet_Check(m)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* 1 when dim i is in the mark set m (may be NULL). */
static int
marked(PyObject *m, Py_ssize_t i)
{
    PyObject *k;
    int r;
    if (m == NULL) {
        return 0;
    }
    k = PyLong_FromSsize_t(i);
    r = k ? PySet_Contains(m, k) : -1;
    Py_XDECREF(k);
    if (r < 0) {
        PyErr_Clear();
        return 0;
    }
    return r;
}

/* A tuple of n ints (new) from codes. */
static PyObject *
codes_tuple(const unsigned char *codes, Py_ssize_t n)
{
    PyObject *t = PyTuple_New(n);
    for (Py_ssize_t i = 0; t != NULL && i < n; i++) {
        PyObject *c = PyLong_FromLong(codes[i]);
        if (c == NULL) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, c);
    }
    return t;
}

static int forced_dynamic(cdyn_tx *tx, PyObject *source, Py_ssize_t dim);

/* Decide the size / stride codes of tensor's dims (see cdynamo/_shapes.py fake_input). */
static int
decide_dims(cdyn_tx *tx, PyObject *tensor, PyObject *source, Py_ssize_t nd, unsigned char *sizes,
            unsigned char *cons, unsigned char *strides)
{
    PyObject *shape = NULL, *stride = NULL, *entry = NULL, *st = NULL, *m[3] = {NULL, NULL, NULL};
    int automatic = tx->dynamic != 0, assume_static = tx->dynamic != 1, rc = -1;
    for (int k = 0; k < 3; k++) {
        m[k] = marks_of(tensor, str_marks[k]);
    }
    shape = PyObject_GetAttrString(tensor, "shape");
    stride = shape ? PyObject_CallMethodNoArgs(tensor, s_stride) : NULL;
    if (stride == NULL) {
        goto done;
    }
    {
        PyObject *sz = PySequence_Tuple(shape);
        entry = sz ? PyTuple_Pack(3, DYN, sz, stride) : NULL;
        Py_XDECREF(sz);
    }
    if (entry == NULL || (st = state_update(tx, cdyn_source_repr(source), entry)) == NULL) {
        goto done;
    }
    if (m[0] != NULL) {   /* mark_dynamic is remembered by the frame state */
        PyObject *ms = PyTuple_New(nd), *me = NULL;
        for (Py_ssize_t i = 0; ms != NULL && i < nd; i++) {
            PyTuple_SET_ITEM(ms, i, Py_NewRef(marked(m[0], i) ? DYN : UNSET));
        }
        me = ms ? PyTuple_Pack(3, UNSET, ms, UNSET) : NULL;
        Py_XDECREF(ms);
        st = me ? state_update(tx, cdyn_source_repr(source), me) : NULL;
        Py_XDECREF(me);
        if (st == NULL) {
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < nd; i++) {
        int mdyn = marked(m[0], i), mweak = marked(m[1], i) || forced_dynamic(tx, source, i);
        int mstatic = marked(m[2], i);
        int asize = automatic && state_dynamic(st, 1, i);
        int astride = automatic && state_dynamic(st, 2, i);
        cons[i] = 0;
        strides[i] = 0;
        if (mdyn) {
            cons[i] = 2;
        }
        else if (!mstatic && (asize || astride)) {
            cons[i] = asize ? 1 : 0;
            strides[i] = (unsigned char)astride;
        }
        if (cons[i] || mdyn || mweak) {
            sizes[i] = 1;   /* DYNAMIC */
        }
        else if (assume_static || mstatic) {
            sizes[i] = 0;   /* STATIC */
        }
        else {
            sizes[i] = 2;   /* DUCK (dynamic=True) */
        }
    }
    rc = 0;
done:
    for (int k = 0; k < 3; k++) {
        Py_XDECREF(m[k]);
    }
    Py_XDECREF(shape);
    Py_XDECREF(stride);
    Py_XDECREF(entry);
    return rc;
}

tr_status
cdyn_sym_tensor_input(cdyn_tx *tx, PyObject *tensor, PyObject *source, PyObject **fake)
{
    unsigned char buf[3 * 64];
    PyObject *t_sizes = NULL, *t_cons = NULL, *t_strides = NULL, *layout = NULL;
    Py_ssize_t nd;
    int static_shapes;
    tr_status st = TR_ERROR;
    *fake = NULL;
    {
        PyObject *d = PyObject_CallMethod(tensor, "dim", NULL);
        if (d == NULL) {
            return cdyn_tx_unsupported(tx, "cannot read the rank of %U", cdyn_source_repr(source));
        }
        nd = PyLong_AsSsize_t(d);
        Py_DECREF(d);
    }
    layout = PyObject_GetAttrString(tensor, "layout");
    if (layout == NULL) {
        return TR_ERROR;
    }
    /* nn.Module registries, parameters wherever they come from (torch._dynamo's
       force_parameter_static_shapes), tensors that are not plain strided tensors and
       traceable wrapper subclasses (__tensor_flatten__: their inner tensors too) keep
       static shapes */
    static_shapes = nd > 64 || layout != layout_strided || module_tensor_static(tx, source) ||
                    Py_TYPE(tensor) == (PyTypeObject *)cdyn_G.nn_parameter_type ||
                    cdyn_is_wrapper_subclass(Py_TYPE(tensor));
    Py_DECREF(layout);
    memset(buf, 0, sizeof(buf));
    if (!static_shapes && decide_dims(tx, tensor, source, nd, buf, buf + 64, buf + 128) < 0) {
        return TR_ERROR;
    }
    t_sizes = codes_tuple(buf, nd < 0 ? 0 : nd);
    t_cons = codes_tuple(buf + 64, nd < 0 ? 0 : nd);
    t_strides = codes_tuple(buf + 128, nd < 0 ? 0 : nd);
    if (t_sizes && t_cons && t_strides) {
        *fake = PyObject_CallMethodObjArgs(tx->shapes, s_fake_input, tensor, source, t_sizes,
                                           t_cons, t_strides, NULL);
        st = *fake ? TR_OK
             : cdyn_sym_user_error()   /* a size outside mark_dynamic's min/max: raised */
                 ? TR_ERROR
                 : cdyn_tx_unsupported(tx, "cannot make a fake tensor for %U",
                                       cdyn_source_repr(source));
    }
    Py_XDECREF(t_sizes);
    Py_XDECREF(t_cons);
    Py_XDECREF(t_strides);
    return st;
}

tr_status
cdyn_sym_lift(cdyn_tx *tx, PyObject *node, PyObject *fake, PyObject *source)
{
    PyObject *lifted = PyObject_CallMethodObjArgs(tx->shapes, s_lift_symbols, tx->graph, node,
                                                  fake, NULL);
    tr_status st = TR_ERROR;
    if (lifted == NULL) {
        return TR_ERROR;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lifted); i++) {
        PyObject *item = PyList_GET_ITEM(lifted, i), *src = NULL;
        PyObject *ph = PyTuple_GET_ITEM(item, 0), *sym = PyTuple_GET_ITEM(item, 1);
        int prop = (int)PyLong_AsLong(PyTuple_GET_ITEM(item, 2));
        int dim = (int)PyLong_AsLong(PyTuple_GET_ITEM(item, 3));
        src = cdyn_source_tprop(source, prop, dim);
        if (src == NULL || PyList_Append(tx->input_sources, src) < 0 ||
            PyList_Append(tx->input_values, sym) < 0 ||
            PyDict_SetItem(tx->sym_sources, ph, src) < 0) {
            Py_XDECREF(src);
            goto done;
        }
        Py_DECREF(src);
    }
    st = TR_OK;
done:
    Py_DECREF(lifted);
    return st;
}

/* 1 when torch.compiler.config.dynamic_sources names source (dim: the tensor dim, -1 for
 * an int), as torch._dynamo's dynamic-sources entries mark it dynamic whatever dynamic= says
 * (_shapes.py dynamic_source); the setting is read once per trace. */
static int
forced_dynamic(cdyn_tx *tx, PyObject *source, Py_ssize_t dim)
{
    PyObject *r;
    int on;
    if (tx->dyn_sources == 0) {
        PyObject *cfg = PyObject_GetAttrString(cdyn_G.torch, "compiler");
        Py_XSETREF(cfg, cfg ? PyObject_GetAttrString(cfg, "config") : NULL);
        Py_XSETREF(cfg, cfg ? PyObject_GetAttrString(cfg, "dynamic_sources") : NULL);
        tx->dyn_sources = cfg != NULL && PyObject_IsTrue(cfg) == 1 ? 2 : 1;
        Py_XDECREF(cfg);
        PyErr_Clear();
    }
    if (tx->dyn_sources != 2 || source == NULL) {
        return 0;
    }
    r = PyObject_CallMethod(tx->shapes, "dynamic_source", "On", cdyn_source_repr(source), dim);
    on = r == Py_True;
    Py_XDECREF(r);
    PyErr_Clear();
    return on;
}

/* Automatic dynamic shapes for a scalar input obj read through source: records it in the
 * frame state; 1 when it is dynamic now (it changed, or dynamic=True), 0 when it stays a
 * constant, -1 on error. */
static int
scalar_dynamic(cdyn_tx *tx, PyObject *obj, PyObject *source)
{
    PyObject *entry = PyTuple_Pack(3, obj, DYN, DYN);
    PyObject *st = entry ? state_update(tx, cdyn_source_repr(source), entry) : NULL;   /* borrowed */
    Py_XDECREF(entry);
    if (st == NULL) {
        return -1;
    }
    return (tx->dynamic != 0 && PyTuple_GET_ITEM(st, 0) == DYN) || tx->dynamic == 1 ||
           forced_dynamic(tx, source, -1);
}

/* The graph input of a dynamic scalar read through source: tx->shapes.<meth>(obj, source,
 * graph, name) gives a tuple whose items ex, val and node are the example input, the
 * symbolic value and its FX node (None: the ShapeEnv keeps it a constant, *out NULL); the
 * input is guarded TYPE_MATCH type. The value is read back through vsource (NULL: source). */
static tr_status
scalar_input(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject *vsource,
                PyObject *meth, PyTypeObject *type, int ex, int val, int node, PyObject **out)
{
    PyObject *name = cdyn_sanitized_name(source), *res = NULL;
    tr_status rc = TR_ERROR;
    res = name ? PyObject_CallMethodObjArgs(tx->shapes, meth, obj, source, tx->graph, name, NULL)
               : NULL;
    if (res == NULL) {
        goto done;
    }
    if (res == Py_None) {
        rc = TR_OK;
        goto done;
    }
    if (cdyn_guards_add_type(tx->guards, source, type) < 0 ||
        PyList_Append(tx->input_sources, source) < 0 ||
        PyList_Append(tx->input_values, PyTuple_GET_ITEM(res, ex)) < 0) {
        goto done;
    }
    rc = cdyn_sym_value(tx, PyTuple_GET_ITEM(res, val), PyTuple_GET_ITEM(res, node),
                        vsource ? vsource : source, out);
done:
    Py_XDECREF(name);
    Py_XDECREF(res);
    return rc;
}

tr_status
cdyn_sym_int_input(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    int dyn;
    *out = NULL;
    if (!PyLong_CheckExact(obj) || source == NULL || tx->shapes == NULL ||
        !rooted_in_frame(source) || under_nn_module(tx, source)) {
        return TR_OK;   /* globals, module state, constants: specialised */
    }
    if ((dyn = scalar_dynamic(tx, obj, source)) <= 0) {
        return dyn < 0 ? TR_ERROR : TR_OK;
    }
    /* (placeholder, SymInt): the placeholder is the int itself */
    return scalar_input(tx, obj, source, NULL, s_sym_input, &PyLong_Type, 1, 1, 0, out);
}

/* The frame-state key saying the float input at source repr r stays static. New ref. */
static PyObject *
float_static_key(PyObject *r)
{
    return PyTuple_Pack(2, s_float_input, r);
}

int
cdyn_sym_mark_float_static(cdyn_tx *tx, PyObject *source)
{
    PyObject *key = cdyn_Source_Check(source) ? float_static_key(cdyn_source_repr(source)) : NULL;
    int rc = key ? PyDict_SetItem(tx->frame_state, key, Py_True) : -1;
    if (key == NULL && !PyErr_Occurred()) {
        PyErr_SetString(PyExc_TypeError, "cdynamo: not a source");
    }
    Py_XDECREF(key);
    return rc;
}

tr_status
cdyn_sym_float_input(cdyn_tx *tx, PyObject *obj, PyObject *source, PyObject **out)
{
    double d;
    int dyn;
    *out = NULL;
    if (!PyFloat_CheckExact(obj) || source == NULL || tx->shapes == NULL ||
        !rooted_in_frame(source) || under_nn_module(tx, source) ||
        (in_container(source) && !named_entry(source) && !named_tuple_entry_item(source))) {
        /* floats inside lists/tuples (a tolist() result) stay constants; a float stored
           under a name in a dict (an optimizer's param_groups[i]["lr"], a config), or in a
           tuple stored so (its "betas"), is automatic dynamic, as torch._dynamo makes it */
        return TR_OK;
    }
    d = PyFloat_AS_DOUBLE(obj);
    if (isnan(d) || isinf(d)) {
        return TR_OK;   /* specialised, as torch._dynamo */
    }
    {
        PyObject *key = float_static_key(cdyn_source_repr(source));
        int marked = key ? PyDict_Contains(tx->frame_state, key) : -1;
        Py_XDECREF(key);
        if (marked != 0) {
            return marked < 0 ? TR_ERROR : TR_OK;   /* the backend could not tensorify it */
        }
    }
    if ((dyn = scalar_dynamic(tx, obj, source)) <= 0) {
        return dyn < 0 ? TR_ERROR : TR_OK;
    }
    /* (placeholder, example tensor, item node, SymFloat): the graph input is the float as a
       0-d tensor (the compiled graph's caller converts it), its value the item() */
    return scalar_input(tx, obj, source, NULL, s_float_input, &PyFloat_Type, 1, 3, 2, out);
}

tr_status
cdyn_sym_numpy_scalar_input(cdyn_tx *tx, PyObject *obj, PyObject *source, int kind,
                            PyObject **out)
{
    PyObject *py = NULL, *csrc = NULL, *key = NULL;
    tr_status rc = TR_ERROR;
    int marked = 0;
    *out = NULL;
    if (source == NULL || tx->shapes == NULL || !rooted_in_frame(source) ||
        under_nn_module(tx, source) || in_container(source)) {
        return TR_OK;
    }
    py = kind == 2 ? PyNumber_Float(obj) : PyNumber_Index(obj);
    if (py == NULL) {
        PyErr_Clear();
        return TR_OK;
    }
    if (kind == 2 && (isnan(PyFloat_AS_DOUBLE(py)) || isinf(PyFloat_AS_DOUBLE(py)))) {
        rc = TR_OK;   /* specialised, as a float's */
        goto done;
    }
    csrc = cdyn_source_call((PyObject *)(kind == 2 ? &PyFloat_Type : &PyLong_Type), source,
                            kind == 2 ? "float" : "int");
    if (csrc == NULL) {
        goto done;
    }
    if (kind == 2) {   /* the backend could not tensorify it before: static */
        key = float_static_key(cdyn_source_repr(csrc));
        marked = key ? PyDict_Contains(tx->frame_state, key) : -1;
        if (marked != 0) {
            rc = marked < 0 ? TR_ERROR : TR_OK;
            goto done;
        }
    }
    if (tx->dynamic == 0) {   /* dynamic=False */
        rc = TR_OK;
        goto done;
    }
    if (cdyn_guards_add_type(tx->guards, source, Py_TYPE(obj)) < 0) {
        goto done;
    }
    rc = kind == 2 ? scalar_input(tx, py, csrc, source, s_float_input, &PyFloat_Type, 1, 3, 2, out)
                   : scalar_input(tx, py, csrc, source, s_sym_input, &PyLong_Type, 1, 1, 0, out);
    if (rc == TR_OK && *out != NULL && V(*out)->kind == VK_SYMINT) {
        V(*out)->bits |= SYM_NUMPY;
    }
done:
    Py_XDECREF(py);
    Py_XDECREF(csrc);
    Py_XDECREF(key);
    return rc;
}

int
cdyn_sym_tuple_dynamic(cdyn_tx *tx, PyObject *obj, PyObject *source)
{
    int any = 0;
    if (source == NULL || tx->shapes == NULL || !PyTuple_Check(obj) || !rooted_in_frame(source) ||
        under_nn_module(tx, source)) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj); i++) {
        PyObject *e = PyTuple_GET_ITEM(obj, i), *key, *isrc, *entry, *st;
        if (!PyLong_CheckExact(e) && !(PyFloat_CheckExact(e) && named_entry(source))) {
            continue;
        }
        key = PyLong_FromSsize_t(i);
        isrc = key ? cdyn_source_item(source, key) : NULL;
        Py_XDECREF(key);
        entry = isrc ? PyTuple_Pack(3, e, DYN, DYN) : NULL;
        st = entry ? state_update(tx, cdyn_source_repr(isrc), entry) : NULL;   /* borrowed */
        Py_XDECREF(entry);
        Py_XDECREF(isrc);
        if (st == NULL) {
            return -1;
        }
        any |= (tx->dynamic != 0 && PyTuple_GET_ITEM(st, 0) == DYN) || tx->dynamic == 1;
    }
    return any;
}

/* ---- shape guards --------------------------------------------------------------------------- */

int
cdyn_sym_finish_guards(cdyn_tx *tx)
{
    PyObject *res = NULL, *masks, *slots, *progs, *names;
    int rc = -1;
    if (tx->shapes == NULL) {
        return 0;
    }
    res = PyObject_CallMethodNoArgs(tx->shapes, s_guards);
    if (res == NULL) {
        return -1;
    }
    if (res == Py_None) {
        Py_DECREF(res);
        return 0;
    }
    masks = PyTuple_GET_ITEM(res, 0);
    slots = PyTuple_GET_ITEM(res, 1);
    progs = PyTuple_GET_ITEM(res, 2);
    names = PyList_AsTuple(PyTuple_GET_ITEM(res, 3));
    if (names == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(masks); i++) {
        PyObject *m = PyList_GET_ITEM(masks, i);
        if (cdyn_guards_tensor_dynamic(tx->guards, PyTuple_GET_ITEM(m, 0), PyTuple_GET_ITEM(m, 1),
                                       PyTuple_GET_ITEM(m, 2)) < 0) {
            goto done;
        }
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(slots); k++) {
        PyObject *s = PyList_GET_ITEM(slots, k);
        if (cdyn_guards_bind_slot(tx->guards, PyTuple_GET_ITEM(s, 0),
                                  (int)PyLong_AsLong(PyTuple_GET_ITEM(s, 1)),
                                  (int)PyLong_AsLong(PyTuple_GET_ITEM(s, 2)), (int)k) < 0) {
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(progs); i++) {
        PyObject *p = PyList_GET_ITEM(progs, i);
        if (cdyn_guards_add_shape(tx->guards, PyTuple_GET_ITEM(p, 0), PyTuple_GET_ITEM(p, 1),
                                  PyTuple_GET_ITEM(p, 2), PyTuple_GET_ITEM(p, 3), names) < 0) {
            goto done;
        }
    }
    rc = 0;
done:
    Py_XDECREF(names);
    Py_DECREF(res);
    return rc;
}
