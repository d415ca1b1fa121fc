/* trace_rules.h: the engine's copy of cdynamo.trace_rules (what is never traced).
 *
 * The table lives in Python (src/cdynamo/trace_rules.py, documented there). That module
 * pushes a snapshot here at import and again whenever the table changes
 * (cdyn_rules_set): the file-prefix rules, the module-prefix rules and its per-callable
 * lookup function. The hook decides once per code object whether its frames are
 * translated (cdyn_rules_for_code, cached in the code's extra, see cache.h), so no Python
 * code runs on the per-frame path. Everything here runs with the GIL held.
 */
#ifndef CDYN_TRACE_RULES_H
#define CDYN_TRACE_RULES_H
#include "cdynamo.h"

/* The rules, in the order of trace_rules.RULE_NAMES. CDYN_RULE_NONE: no rule matched
 * (user code): frames are translated, calls inlined. */
typedef enum {
    CDYN_RULE_NONE = 0,
    CDYN_RULE_COMPILE,   /* translated like user code, even under a skipped prefix */
    CDYN_RULE_SKIP,      /* frames run unmodified; never inlined (an opaque call) */
    CDYN_RULE_INLINE,    /* frames run unmodified; inlined when traced code calls it */
    CDYN_RULE_GRAPH,     /* a call becomes a call_function node of the FX graph */
    CDYN_RULE_CONSTANT,  /* a call is folded to a constant at trace time */
    CDYN_RULE_POLYFILL,  /* a call is replaced by a plain-Python version, inlined */
    CDYN_RULE_BREAK,     /* a call is a graph break (run eagerly between graphs) */
    CDYN_RULE_FOLD,      /* a call on constants is made at trace time (values/torch.c) */
    CDYN_RULE_COUNT
} cdyn_rule;

/* Bumped by every cdyn_rules_set: cached decisions older than this are stale. */
extern unsigned long cdyn_rules_generation;

/* Replace the snapshot. file_rules and module_rules: borrowed sequences of (str key,
 * str rule name) pairs; lookup: borrowed callable lookup_callable(obj) -> None or
 * (rule name, value), or None. File keys are path prefixes; module keys are dotted names
 * matching the name itself and its submodules, or, ending with "*", any name starting
 * with the text before it. The longest matching key wins. Forgets every cached frame
 * decision. 0, or -1 with TypeError/ValueError (the old snapshot is kept). */
int cdyn_rules_set(PyObject *file_rules, PyObject *module_rules, PyObject *lookup);

/* Frame rule of code (borrowed) whose frames run with globals (borrowed dict or NULL):
 * "<frozen ...>" files are CDYN_RULE_SKIP; otherwise the longest file prefix rule; for
 * files that are not paths ("<string>", "<eval_with_key>...") the module rule of
 * globals["__name__"]. Never fails (CDYN_RULE_NONE when nothing matches). */
cdyn_rule cdyn_rules_for_code(PyCodeObject *code, PyObject *globals);

/* Module rule of a dotted module name (borrowed str); CDYN_RULE_NONE when none. */
cdyn_rule cdyn_rules_for_module(PyObject *name);

/* 1 when frames under rule r are run unmodified by the hook (every rule except NONE and
 * COMPILE). */
static inline int
cdyn_rule_skips_frame(cdyn_rule r)
{
    return r != CDYN_RULE_NONE && r != CDYN_RULE_COMPILE;
}

/* Per-callable rule of obj (borrowed), through trace_rules.lookup_callable (runs Python:
 * trace time only). *value: new reference to the rule's value (the folded constant, the
 * polyfill; Py_None for other rules) when a rule matched, else NULL. Returns the rule
 * (CDYN_RULE_NONE when none) or -1 with an exception (*value NULL). */
int cdyn_rules_for_callable(PyObject *obj, PyObject **value);

/* Borrowed static string: the name of rule r ("none", "compile", "skip", ...). */
const char *cdyn_rule_name(cdyn_rule r);

/* Drop the snapshot (module teardown, tests). */
void cdyn_rules_clear(void);

#endif
