/* stance.c: torch.compiler.set_stance for cdynamo's compiled calls (see stance.h). */
#include "stance.h"

static PyObject *ef_dict;        /* strong: torch._dynamo.eval_frame.__dict__, once imported */
static PyObject *str_ef_module;  /* strong interned "torch._dynamo.eval_frame" */
static PyObject *str_stance;     /* strong interned "_stance" */
static PyObject *last_stance;    /* strong: the stance object of the cached plan, or NULL */
static PyObject *last_opts;      /* strong: the wrapper options of the cached plan */
static PyObject *last_plan_opts; /* strong: the options the plan compiles with */
static cdyn_stance_mode last_mode;
static int last_skip;

static int
intern_names(void)
{
    if (str_stance == NULL) {
        str_ef_module = PyUnicode_InternFromString("torch._dynamo.eval_frame");
        str_stance = PyUnicode_InternFromString("_stance");
        if (str_ef_module == NULL || str_stance == NULL) {
            Py_CLEAR(str_ef_module);
            Py_CLEAR(str_stance);
            return -1;
        }
    }
    return 0;
}

/* Ask cdynamo._glue.stance_plan(stance, opts) -> (mode: int, skip_guards: bool, options) and
 * cache the answer for this (stance, opts) pair. 0 or -1 with an exception. */
static int
plan_for(PyObject *stance, PyObject *opts)
{
    PyObject *glue = NULL, *r = NULL;
    int rc = -1, mode, skip;
    glue = PyImport_ImportModule("cdynamo._glue");
    if (glue == NULL) {
        goto cleanup;
    }
    r = PyObject_CallMethod(glue, "stance_plan", "OO", stance, opts);
    if (r == NULL) {
        goto cleanup;
    }
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 3) {
        PyErr_SetString(PyExc_SystemError, "cdynamo: stance_plan must return a 3-tuple");
        goto cleanup;
    }
    mode = (int)PyLong_AsLong(PyTuple_GET_ITEM(r, 0));
    skip = PyObject_IsTrue(PyTuple_GET_ITEM(r, 1));
    if ((mode == -1 && PyErr_Occurred()) || skip < 0) {
        goto cleanup;
    }
    assert(mode >= CDYN_STANCE_DEFAULT && mode <= CDYN_STANCE_EAGER_THEN_COMPILE);
    Py_XSETREF(last_stance, Py_NewRef(stance));
    Py_XSETREF(last_opts, Py_NewRef(opts));
    Py_XSETREF(last_plan_opts, Py_NewRef(PyTuple_GET_ITEM(r, 2)));
    last_mode = (cdyn_stance_mode)mode;
    last_skip = skip;
    rc = 0;
cleanup:
    Py_XDECREF(glue);
    Py_XDECREF(r);
    return rc;
}

int
cdyn_stance_get(PyObject *opts, cdyn_stance *s)
{
    PyObject *stance;
    s->mode = CDYN_STANCE_DEFAULT;
    s->skip_guards = 0;
    s->options = opts;
    if (ef_dict == NULL) {
        PyObject *m;
        if (intern_names() < 0) {
            return -1;
        }
        m = PyDict_GetItemWithError(PyImport_GetModuleDict(), str_ef_module);   /* borrowed */
        if (m == NULL || !PyModule_Check(m)) {
            return PyErr_Occurred() ? -1 : 0;   /* torch._dynamo not loaded: the default */
        }
        ef_dict = Py_NewRef(PyModule_GetDict(m));
    }
    stance = PyDict_GetItemWithError(ef_dict, str_stance);   /* borrowed */
    if (stance == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    if ((stance != last_stance || opts != last_opts) && plan_for(stance, opts) < 0) {
        return -1;
    }
    s->mode = last_mode;
    s->skip_guards = last_skip;
    s->options = last_plan_opts;
    return 0;
}

PyObject *
cdyn_stance_fail(PyCodeObject *code, int lineno, PyObject *reason)
{
    PyObject *glue = PyImport_ImportModule("cdynamo._glue");
    PyObject *r = NULL;
    if (glue != NULL) {
        r = PyObject_CallMethod(glue, "stance_fail", "OOiO", code->co_name, code->co_filename,
                                lineno, reason != NULL ? reason : Py_None);
        Py_DECREF(glue);
    }
    Py_XDECREF(r);
    if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_SystemError, "cdynamo: stance_fail returned without raising");
    }
    return NULL;
}

void
cdyn_stance_clear(void)
{
    Py_CLEAR(last_stance);
    Py_CLEAR(last_opts);
    Py_CLEAR(last_plan_opts);
}
