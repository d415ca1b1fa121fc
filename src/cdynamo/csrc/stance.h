/* stance.h: torch.compiler.set_stance honoured by cdynamo's compiled calls.
 *
 * torch keeps the stance in the module global torch._dynamo.eval_frame._stance (a
 * DynamoStance, replaced by every set_stance). Each compiled call reads that global (one
 * dict lookup; nothing when torch._dynamo was never imported) and, for a stance object it
 * has not seen, asks cdynamo._glue.stance_plan what it means; the answer is cached by the
 * object's identity, so the default stance costs a pointer compare per call and no Python
 * runs for it (only set_stance's force_backend makes options per compiled function).
 */
#ifndef CDYN_STANCE_H
#define CDYN_STANCE_H
#include "cdynamo.h"

typedef enum {
    CDYN_STANCE_DEFAULT = 0,       /* compile as usual */
    CDYN_STANCE_FORCE_EAGER,       /* run the original callable, nothing compiled or looked up */
    CDYN_STANCE_EAGER_ON_RECOMPILE,/* cache entries run; a miss runs the frame unmodified */
    CDYN_STANCE_FAIL_ON_RECOMPILE, /* a miss of a frame with tensors raises RuntimeError */
    CDYN_STANCE_EAGER_THEN_COMPILE,/* a code object's first miss runs unmodified, later ones
                                      compile */
    CDYN_STANCE_AOT_EAGER_THEN_COMPILE /* a code object's first miss compiles with aot_eager,
                                      later ones with the wrapper's backend */
} cdyn_stance_mode;

typedef struct {
    cdyn_stance_mode mode;
    int skip_guards;       /* skip_guard_eval_unsafe: a code with one entry runs it unchecked */
    PyObject *options;     /* borrowed: the CompileOptions to compile with (the wrapper's, or
                              those of set_stance's force_backend); valid for the call */
    PyObject *first_options; /* borrowed: aot_eager_then_compile's options for a code's first
                              miss (the wrapper's with backend aot_eager), else NULL */
} cdyn_stance;

/* Fill *s for a compiled call whose wrapper has options opts (borrowed). 0, or -1 with an
 * exception (an invalid stance, as torch raises). */
int cdyn_stance_get(PyObject *opts, cdyn_stance *s);

/* Set the fail_on_recompile RuntimeError for a miss of code at line lineno; reason (borrowed,
 * may be NULL) is the guard that failed. Always returns NULL. */
PyObject *cdyn_stance_fail(PyCodeObject *code, int lineno, PyObject *reason);

/* Drop the options cached for force_backend (cdynamo.reset()). */
void cdyn_stance_clear(void);

#endif
