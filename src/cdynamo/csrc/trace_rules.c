/* trace_rules.c: the engine's snapshot of cdynamo.trace_rules (see trace_rules.h).
 *
 * Two lists of (key, rule) owned here: file-path prefixes and dotted module prefixes,
 * matched by a linear scan keeping the longest key (slow path: once per code object, the
 * result is cached by the hook). A strong reference to trace_rules.lookup_callable answers
 * per-callable questions at trace time.
 */
#include "trace_rules.h"
#include "cache.h"

typedef struct {
    Py_ssize_t n;
    PyObject **keys;        /* n strong str */
    unsigned char *rules;   /* n cdyn_rule */
} rule_list;

static rule_list file_list, module_list;
static PyObject *lookup_fn;          /* strong callable or NULL */
static PyObject *str_name;           /* strong interned "__name__" */
unsigned long cdyn_rules_generation;

static const char *const rule_names[CDYN_RULE_COUNT] = {
    "none", "compile", "skip", "inline", "graph", "constant", "polyfill", "break",
    "fold",
};

const char *
cdyn_rule_name(cdyn_rule r)
{
    return (unsigned)r < CDYN_RULE_COUNT ? rule_names[r] : "?";
}

/* Rule named by name (borrowed str); -1 with ValueError when unknown. */
static int
rule_from_name(PyObject *name)
{
    for (int i = 0; i < CDYN_RULE_COUNT; i++) {
        if (PyUnicode_CompareWithASCIIString(name, rule_names[i]) == 0) {
            return i;
        }
    }
    PyErr_Format(PyExc_ValueError, "trace rules: unknown rule %R", name);
    return -1;
}

/* Free what l owns and empty it. */
static void
list_clear(rule_list *l)
{
    for (Py_ssize_t i = 0; i < l->n; i++) {
        Py_DECREF(l->keys[i]);
    }
    PyMem_Free(l->keys);
    PyMem_Free(l->rules);
    l->n = 0;
    l->keys = NULL;
    l->rules = NULL;
}

/* Fill out (empty) from seq (borrowed) of (str, rule name) pairs; 0 or -1 with an
 * exception (out left empty). */
static int
list_build(PyObject *seq, rule_list *out, const char *what)
{
    PyObject *fast = PySequence_Fast(seq, "trace rules: expected a sequence of pairs");
    int rc = -1;
    if (fast == NULL) {
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    out->keys = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(PyObject *));
    out->rules = PyMem_Calloc((size_t)(n > 0 ? n : 1), 1);
    if (out->keys == NULL || out->rules == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            !PyUnicode_Check(PyTuple_GET_ITEM(pair, 0)) ||
            !PyUnicode_Check(PyTuple_GET_ITEM(pair, 1))) {
            PyErr_Format(PyExc_TypeError, "trace rules: %s rules must be (str, str) pairs, "
                         "got %R", what, pair);
            goto done;
        }
        int r = rule_from_name(PyTuple_GET_ITEM(pair, 1));
        if (r < 0) {
            goto done;
        }
        out->keys[out->n] = Py_NewRef(PyTuple_GET_ITEM(pair, 0));
        out->rules[out->n] = (unsigned char)r;
        out->n++;
    }
    rc = 0;
done:
    if (rc < 0) {
        list_clear(out);
    }
    Py_DECREF(fast);
    return rc;
}

int
cdyn_rules_set(PyObject *file_rules, PyObject *module_rules, PyObject *lookup)
{
    rule_list files = {0, NULL, NULL}, modules = {0, NULL, NULL};
    int rc = -1;
    if (str_name == NULL && (str_name = PyUnicode_InternFromString("__name__")) == NULL) {
        goto done;
    }
    if (lookup != Py_None && !PyCallable_Check(lookup)) {
        PyErr_SetString(PyExc_TypeError, "trace rules: lookup must be callable or None");
        goto done;
    }
    if (list_build(file_rules, &files, "file") < 0 ||
        list_build(module_rules, &modules, "module") < 0) {
        goto done;
    }
    list_clear(&file_list);
    list_clear(&module_list);
    file_list = files;
    module_list = modules;
    files.n = modules.n = 0;
    files.keys = modules.keys = NULL;
    files.rules = modules.rules = NULL;
    Py_XSETREF(lookup_fn, lookup == Py_None ? NULL : Py_NewRef(lookup));
    cdyn_rules_generation++;
    cdyn_cache_forget_decisions();
    rc = 0;
done:
    list_clear(&files);
    list_clear(&modules);
    return rc;
}

void
cdyn_rules_clear(void)
{
    list_clear(&file_list);
    list_clear(&module_list);
    Py_CLEAR(lookup_fn);
    cdyn_rules_generation++;
}

/* Longest file-prefix rule of filename (borrowed str). */
static cdyn_rule
file_rule(PyObject *filename)
{
    Py_ssize_t best_len = -1;
    cdyn_rule best = CDYN_RULE_NONE;
    for (Py_ssize_t i = 0; i < file_list.n; i++) {
        PyObject *key = file_list.keys[i];
        Py_ssize_t klen = PyUnicode_GET_LENGTH(key);
        if (klen <= best_len) {
            continue;
        }
        Py_ssize_t r = PyUnicode_Tailmatch(filename, key, 0, PY_SSIZE_T_MAX, -1);
        if (r < 0) {
            PyErr_Clear();
        }
        else if (r == 1) {
            best_len = klen;
            best = (cdyn_rule)file_list.rules[i];
        }
    }
    return best;
}

cdyn_rule
cdyn_rules_for_module(PyObject *name)
{
    Py_ssize_t best_len = -1;
    cdyn_rule best = CDYN_RULE_NONE;
    if (name == NULL || !PyUnicode_Check(name)) {
        return CDYN_RULE_NONE;
    }
    Py_ssize_t nlen = PyUnicode_GET_LENGTH(name);
    for (Py_ssize_t i = 0; i < module_list.n; i++) {
        PyObject *key = module_list.keys[i];
        Py_ssize_t klen = PyUnicode_GET_LENGTH(key);
        int raw = klen > 0 && PyUnicode_READ_CHAR(key, klen - 1) == '*';
        Py_ssize_t plen = raw ? klen - 1 : klen;
        if (plen <= best_len || plen > nlen) {
            continue;
        }
        /* key (without its '*') must be a prefix of name */
        int match = 1;
        for (Py_ssize_t j = 0; j < plen && match; j++) {
            match = PyUnicode_READ_CHAR(key, j) == PyUnicode_READ_CHAR(name, j);
        }
        /* a dotted key matches the module itself and its submodules only */
        if (match && !raw && plen < nlen && PyUnicode_READ_CHAR(name, plen) != '.') {
            match = 0;
        }
        if (match) {
            best_len = plen;
            best = (cdyn_rule)module_list.rules[i];
        }
    }
    return best;
}

cdyn_rule
cdyn_rules_for_code(PyCodeObject *code, PyObject *globals)
{
    PyObject *filename = code->co_filename;
    if (!PyUnicode_Check(filename)) {
        return CDYN_RULE_NONE;
    }
    Py_ssize_t len = PyUnicode_GET_LENGTH(filename);
    int not_a_path = len > 0 && PyUnicode_READ_CHAR(filename, 0) == '<';
    if (not_a_path && len >= 8) {
        /* frozen standard-library modules (importlib, os, ...) */
        static const char frozen[] = "<frozen ";
        int match = 1;
        for (Py_ssize_t j = 0; j < 8 && match; j++) {
            match = PyUnicode_READ_CHAR(filename, j) == (Py_UCS4)frozen[j];
        }
        if (match) {
            /* the rule of the frozen module's name ("<frozen _collections_abc>"): the
               standard library's SKIP unless a module rule says otherwise */
            PyObject *mod = PyUnicode_Substring(filename, 8, len - 1);
            cdyn_rule fr = mod != NULL ? cdyn_rules_for_module(mod) : CDYN_RULE_NONE;
            Py_XDECREF(mod);
            PyErr_Clear();
            return fr != CDYN_RULE_NONE ? fr : CDYN_RULE_SKIP;
        }
    }
    cdyn_rule r = file_rule(filename);
    if (r == CDYN_RULE_NONE && not_a_path && globals != NULL && PyDict_Check(globals) &&
        str_name != NULL) {
        /* generated code ("<string>": dataclass and namedtuple methods, exec'd text):
         * the module whose globals it runs with */
        PyObject *name = PyDict_GetItemWithError(globals, str_name);
        if (name == NULL) {
            PyErr_Clear();
        }
        r = cdyn_rules_for_module(name);
    }
    return r;
}

int
cdyn_rules_for_callable(PyObject *obj, PyObject **value)
{
    *value = NULL;
    if (lookup_fn == NULL) {
        return CDYN_RULE_NONE;
    }
    PyObject *res = PyObject_CallOneArg(lookup_fn, obj);
    int rc = -1;
    if (res == NULL) {
        return -1;
    }
    if (res == Py_None) {
        rc = CDYN_RULE_NONE;
        goto done;
    }
    if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) < 2 ||
        !PyUnicode_Check(PyTuple_GET_ITEM(res, 0))) {
        PyErr_Format(PyExc_TypeError, "trace rules: lookup_callable must return None or "
                     "(rule, value), got %R", res);
        goto done;
    }
    rc = rule_from_name(PyTuple_GET_ITEM(res, 0));
    if (rc >= 0) {
        *value = Py_NewRef(PyTuple_GET_ITEM(res, 1));
    }
done:
    Py_DECREF(res);
    return rc;
}
