/* frame.c: releasing a frame the hook replaced (see frame.h). */
#include "frame.h"

#if PY_VERSION_HEX >= 0x030D0000
/* Exported by CPython 3.13 (Python/ceval.c): clears the frame and pops it. */
PyAPI_FUNC(void) _PyEval_FrameClearAndPop(PyThreadState *tstate, cdyn_frame *frame);
#endif

#if CDYN_HOOK_RELEASES_FRAME
void
cdyn_frame_release(PyThreadState *ts, cdyn_frame *f)
{
#if PY_VERSION_HEX >= 0x030D0000
    assert(f->frame_obj == NULL);
    _PyEval_FrameClearAndPop(ts, f);
#elif PY_VERSION_HEX >= 0x030C0000
    /* 3.12 exports neither its frame clear nor its frame pop: the same steps here. A new
     * frame holds its slots up to stacktop, its function, code and locals mapping. */
    assert(f->frame_obj == NULL);
    for (int i = 0; i < f->stacktop; i++) {
        Py_XDECREF(f->localsplus[i]);
    }
    f->stacktop = 0;
    Py_XDECREF(f->f_locals);
    Py_DECREF(f->f_funcobj);
    Py_DECREF(f->f_code);
    /* Pop: the frame is the top of the thread's data stack. When it starts a chunk of its
     * own, that chunk is given back to the arena allocator and the previous one is current
     * again (the root chunk is never popped: a frame at its start is the first frame). */
    PyObject **base = (PyObject **)f;
    _PyStackChunk *chunk = ts->datastack_chunk;
    if (base == &chunk->data[0] && chunk->previous != NULL) {
        _PyStackChunk *prev = chunk->previous;
        PyObjectArenaAllocator arena;
        ts->datastack_top = &prev->data[prev->top];
        ts->datastack_chunk = prev;
        ts->datastack_limit = (PyObject **)(((char *)prev) + prev->size);
        PyObject_GetArenaAllocator(&arena);
        arena.free(arena.ctx, chunk, chunk->size);
    }
    else {
        ts->datastack_top = base;
    }
#endif
}
#endif

uint64_t
cdyn_dict_version_tracked(PyObject *d)
{
#if PY_VERSION_HEX >= 0x030D0000
    if (((PyDictObject *)d)->ma_values != NULL) {
        /* A split table (an object's attributes kept in its inline values): 3.13 stores an
         * attribute there without moving the dict's tag. A key that is no str makes the
         * table combined (the object then stores through its dict, which moves the tag);
         * taken out again at once, the dict's contents and order are as they were. */
        PyObject *k = PyLong_FromLong(0);
        int e = k == NULL || PyDict_SetItem(d, k, Py_None) < 0 || PyDict_DelItem(d, k) < 0;
        Py_XDECREF(k);
        if (e) {
            PyErr_Clear();
            return 0;   /* never a recorded tag's value: the cache does not hit */
        }
    }
#endif
    return cdyn_dict_version(d);
}
