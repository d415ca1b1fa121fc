/* translate.h: the symbolic interpreter entry point used by the hook.
 *
 * cdyn_translate_frame traces one frame that is about to run (its prefix not yet
 * executed), records torch operations into an FX graph, hands the graph to the backend,
 * and generates the transformed code plus its guards.
 */
#ifndef CDYN_TRANSLATE_H
#define CDYN_TRANSLATE_H
#include "cdynamo.h"
#include "frame.h"
#include "guards.h"

typedef struct {
    PyObject *code;        /* new ref: the transformed code object, or NULL: run unmodified */
    cdyn_guards *guards;   /* owned by the receiver; non-NULL iff code != NULL */
    int no_ops;            /* code == NULL because the trace returned with no operation in
                              its graph and the code has no cache entry: the caller skips the
                              code from now on (torch._dynamo's "No ops traced" skip) */
} cdyn_translation;

/* Trace `frame` under the compile options `options` (borrowed Python object with
 * attributes backend, backend_name, fullgraph; see cdynamo/_api.py).
 * The transformed code takes every argument slot of the original frame as a plain
 * positional parameter (co_argcount = argcount + kwonlyargcount + varargs + varkw, no
 * CO_VARARGS/CO_VARKEYWORDS), keeps the closure and cells, and is run as
 * func(localsplus[0..n)) with the same globals and closure.
 * Returns 0 with out filled (out->code == NULL: run the frame unmodified; the reason has
 * been logged), or -1 with an exception set that must reach the user (fullgraph error,
 * backend failure). The caller must have disabled the hook for this thread. */
int cdyn_translate_frame(cdyn_frame *frame, PyObject *options,
                         cdyn_translation *out);

/* 1 when the frame (about to start) has torch bits, as torch._dynamo's has_tensor_in_frame
 * asks before it compiles a frame: a global of its names that is torch or a torch.*
 * module, or an argument holding a tensor or an nn.Module (through lists, tuples, dict
 * values and named tuples); 0 when not. Never fails. */
int cdyn_frame_has_torch(cdyn_frame *frame);

/* Module-level set-up (imports torch.fx etc. lazily is fine); 0 or -1. */
int cdyn_translate_init(PyObject *module);

#endif
