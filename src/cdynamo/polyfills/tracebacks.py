"""Polyfills of traceback: ``traceback.clear_frames``, which unittest's ``assertRaises``
context calls on the traceback of the exception it caught.

An exception raised in traced code has no traceback (None, as torch._dynamo gives it), and
the frames of one raised by a graph's caller are not the trace's to clear; clearing frame
locals changes no result, so the call does nothing while tracing."""
import traceback as _tb

from . import substitute_for


@substitute_for(_tb.clear_frames)
def clear_frames(tb):
    """traceback.clear_frames(tb) while tracing: nothing (see the module). Returns None."""
    return None
