/* modcall.h: the nn.Module call fast path of a compiled module.
 *
 * Calling an nn.Module runs nn.Module.__call__ (_wrapped_call_impl, then _call_impl): two
 * Python frames that, when the module has no hooks, no compiled call_impl and no JIT trace
 * of a module is running, only call `self.forward(*args, **kwargs)`. A compiled module's wrapper calls
 * that forward itself when those conditions hold (checked in C on every call, the type's
 * part cached on its version tag), so the compiled forward runs through the wrapper's
 * direct path (hook.c direct_call) without the two frames; otherwise the module is called
 * as usual. Also the `__call__` of cdynamo's CompiledModule class (a method descriptor
 * implemented in C, so calling the compiled module costs no Python frame of its own).
 */
#ifndef CDYN_MODCALL_H
#define CDYN_MODCALL_H
#include "cdynamo.h"

/* Per-wrapper cache of the type-level part of the check. Zero-initialise; release with
 * cdyn_modcall_clear. */
typedef struct {
    PyTypeObject *type;    /* strong or NULL: the module type last checked */
    unsigned int tag;      /* type's tp_version_tag when checked (nonzero) */
    PyObject *forward;     /* strong or NULL: type's forward function when the type's call
                              protocol is nn.Module's, else NULL */
    /* the instance dict last found plain (address compared only) and its PEP 509 tag
     * then; while the tag is unchanged, inst_forward and hooks[] are what it holds */
    PyObject *idict;
    uint64_t idict_tag;
    PyObject *inst_forward;   /* borrowed from idict: a forward set on the instance, or NULL */
    PyObject *hooks[4];       /* borrowed from idict: the four hook dicts */
} cdyn_modcall_cache;

/* What nn.Module.__call__ on mod (borrowed) would call: 1 with *fwd (borrowed, valid while
 * mod and c live) and *prepend (1: fwd is a function to call with mod as its first
 * argument; 0: a callable from mod's instance dict, called with the arguments alone), 0
 * when the module must be called as usual (hooks, a patched call protocol, a JIT trace of
 * a module, anything else). Never fails. */
int cdyn_modcall_forward(cdyn_modcall_cache *c, PyObject *mod, PyObject **fwd, int *prepend);

/* The parts of that check that do not depend on an instance, for a module made while
 * tracing (values/newmodule.c checks its instance part symbolically):
 * cdyn_modcall_type_plain: 1 when tp's call protocol is nn.Module's own (`__call__`,
 * `_call_impl`, `_slow_forward`, generic attribute reads, a Python forward,
 * `_compiled_call_impl` None, the hook dicts not shadowed), else 0;
 * cdyn_modcall_process_plain: 1 when no global module hook is registered and no JIT trace
 * of a module runs, else 0. Neither fails. */
int cdyn_modcall_type_plain(PyTypeObject *tp);
int cdyn_modcall_process_plain(void);

/* Release the cache's references (GC clear and dealloc). */
void cdyn_modcall_clear(cdyn_modcall_cache *c);

/* Ready the CompiledModuleCall type and add an instance as `compiled_module_call` to the
 * module; 0 or -1. */
int cdyn_modcall_init(PyObject *module);

#endif
