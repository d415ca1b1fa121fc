/* log.c: cdyn_log, logging through Python's logging module, and cdyn_config_bool, reading
 * cdynamo.config (slow paths only). */
#include "cdynamo.h"

#include <stdarg.h>

static PyObject *logger;    /* strong: logging.getLogger("cdynamo"), fetched on first use */

/* New reference to the cdynamo logger (cached), or NULL with an exception. */
static PyObject *
get_logger(void)
{
    PyObject *logging = NULL;
    if (logger == NULL) {
        logging = PyImport_ImportModule("logging");
        if (logging == NULL) {
            return NULL;
        }
        logger = PyObject_CallMethod(logging, "getLogger", "s", "cdynamo");
        Py_DECREF(logging);
        if (logger == NULL) {
            return NULL;
        }
    }
    return Py_NewRef(logger);
}

void
cdyn_log(int level, const char *fmt, ...)
{
    PyObject *exc = NULL, *val = NULL, *tb = NULL;
    PyObject *lg = NULL, *enabled = NULL, *msg = NULL, *r = NULL;
    va_list va;

    PyErr_Fetch(&exc, &val, &tb);
    lg = get_logger();
    if (lg == NULL) {
        goto cleanup;
    }
    enabled = PyObject_CallMethod(lg, "isEnabledFor", "i", level);
    if (enabled == NULL || !PyObject_IsTrue(enabled)) {
        goto cleanup;
    }
    va_start(va, fmt);
    msg = PyUnicode_FromFormatV(fmt, va);
    va_end(va);
    if (msg == NULL) {
        goto cleanup;
    }
    r = PyObject_CallMethod(lg, "log", "iO", level, msg);
cleanup:
    Py_XDECREF(lg);
    Py_XDECREF(enabled);
    Py_XDECREF(msg);
    Py_XDECREF(r);
    PyErr_Clear();
    PyErr_Restore(exc, val, tb);
}

static PyObject *events;    /* strong: the cdynamo._events module, imported on first use */

void
cdyn_event(const char *name, const char *fmt, ...)
{
    PyObject *exc = NULL, *val = NULL, *tb = NULL;
    PyObject *fn = NULL, *args = NULL, *r = NULL;
    va_list va;

    PyErr_Fetch(&exc, &val, &tb);
    if (events == NULL && (events = PyImport_ImportModule("cdynamo._events")) == NULL) {
        goto cleanup;
    }
    fn = PyObject_GetAttrString(events, name);
    if (fn == NULL) {
        goto cleanup;
    }
    va_start(va, fmt);
    args = Py_VaBuildValue(fmt, va);
    va_end(va);
    if (args == NULL || !PyTuple_Check(args)) {
        goto cleanup;
    }
    r = PyObject_Call(fn, args, NULL);
cleanup:
    Py_XDECREF(fn);
    Py_XDECREF(args);
    Py_XDECREF(r);
    PyErr_Clear();
    PyErr_Restore(exc, val, tb);
}

int
cdyn_config_bool(const char *name)
{
    static PyObject *config;   /* strong: the cdynamo.config module, imported on first use */
    PyObject *on = NULL;
    int r;
    if (config == NULL && (config = PyImport_ImportModule("cdynamo.config")) == NULL) {
        return -1;
    }
    on = PyObject_GetAttrString(config, name);
    r = on ? PyObject_IsTrue(on) : -1;
    Py_XDECREF(on);
    return r;
}
