/* stance.c: torch.compiler.set_stance for cdynamo's compiled calls (see stance.h). */
#include "stance.h"

static PyObject *ef_dict;        /* strong: torch._dynamo.eval_frame.__dict__, once imported */
static PyObject *str_ef_module;  /* strong interned "torch._dynamo.eval_frame" */
static PyObject *str_stance;     /* strong interned "_stance" */
static PyObject *last_stance;    /* strong: the stance object of the cached plan, or NULL */
static PyObject *last_backend;   /* strong: its force_backend (aot_eager_then_compile: the
                                    backend of first misses), or NULL (the wrapper's options) */
static PyObject *last_opts;      /* strong: wrapper options last resolved with last_backend */
static PyObject *last_forced;    /* strong: the options they compile with under force_backend */
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

/* Call cdynamo._glue.<name>(a, b): new reference or NULL with an exception. */
static PyObject *
call_glue(const char *name, PyObject *a, PyObject *b)
{
    PyObject *glue = PyImport_ImportModule("cdynamo._glue"), *r = NULL;
    if (glue != NULL) {
        r = b != NULL ? PyObject_CallMethod(glue, name, "OO", a, b)
                      : PyObject_CallMethod(glue, name, "O", a);
        Py_DECREF(glue);
    }
    return r;
}

/* Ask cdynamo._glue.stance_plan(stance) -> (mode: int, skip_guards: bool, force_backend or
 * None) and cache the answer for this stance object. Options-independent, so a new compiled
 * function under an already-seen stance runs no Python here. 0 or -1 with an exception. */
static int
plan_for(PyObject *stance)
{
    PyObject *r = call_glue("stance_plan", stance, NULL);
    int rc = -1, mode, skip;
    if (r == NULL) {
        return -1;
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
    assert(mode >= CDYN_STANCE_DEFAULT && mode <= CDYN_STANCE_AOT_EAGER_THEN_COMPILE);
    Py_XSETREF(last_stance, Py_NewRef(stance));
    Py_XSETREF(last_backend, PyTuple_GET_ITEM(r, 2) == Py_None
                                 ? NULL : Py_NewRef(PyTuple_GET_ITEM(r, 2)));
    Py_CLEAR(last_opts);
    Py_CLEAR(last_forced);
    last_mode = (cdyn_stance_mode)mode;
    last_skip = skip;
    rc = 0;
cleanup:
    Py_DECREF(r);
    return rc;
}

int
cdyn_stance_get(PyObject *opts, cdyn_stance *s)
{
    PyObject *stance;
    s->mode = CDYN_STANCE_DEFAULT;
    s->skip_guards = 0;
    s->options = opts;
    s->first_options = NULL;
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
    if (stance != last_stance && plan_for(stance) < 0) {
        return -1;
    }
    s->mode = last_mode;
    s->skip_guards = last_skip;
    if (last_backend != NULL) {   /* options with that backend */
        if (opts != last_opts) {
            PyObject *forced = call_glue("stance_options", opts, last_backend);
            if (forced == NULL) {
                return -1;
            }
            Py_XSETREF(last_opts, Py_NewRef(opts));
            Py_XSETREF(last_forced, forced);
        }
        if (last_mode == CDYN_STANCE_AOT_EAGER_THEN_COMPILE) {
            s->first_options = last_forced;
        }
        else {
            s->options = last_forced;   /* set_stance(force_backend=...) */
        }
    }
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
    Py_CLEAR(last_opts);     /* the stance plan stays: it holds no compiled function */
    Py_CLEAR(last_forced);
}
