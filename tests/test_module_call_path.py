"""The nn.Module call fast path of a compiled module (csrc/modcall.c, issue 9 point 7).

Calling a compiled module calls its forward directly, without nn.Module.__call__'s two
Python frames (_wrapped_call_impl, _call_impl), exactly when those frames would only call
`self.forward(*args, **kwargs)`: no module or global hook, no `_compiled_call_impl`, no
patched call protocol, no JIT trace. Each test checks that a change which makes
nn.Module.__call__ do more is seen on the very next call, with eager's result.
"""
import sys
import warnings

import pytest
import torch
import torch.nn as nn

import cdynamo
from helpers import CountingBackend


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, scale=1.0):
        return torch.relu(self.fc(x)) * scale


def _compiled(mod):
    cdynamo.reset()
    counter = CountingBackend()
    return cdynamo.compile(mod, backend=counter), counter


def _module_call_frames(fn, *args, **kwargs):
    """Number of nn.Module._wrapped_call_impl / _call_impl frames run by fn(*args, **kwargs),
    and its result."""
    names = {nn.Module._wrapped_call_impl.__code__, nn.Module._call_impl.__code__}
    seen = []

    def prof(frame, event, arg):
        if event == "call" and frame.f_code in names:
            seen.append(frame.f_code.co_name)
    sys.setprofile(prof)
    try:
        out = fn(*args, **kwargs)
    finally:
        sys.setprofile(None)
    return len(seen), out


def test_plain_module_skips_module_call_frames():
    m = Net()
    c, counter = _compiled(m)
    x = torch.randn(2, 4)
    c(x)
    frames, out = _module_call_frames(c, x)
    assert frames == 0
    assert torch.equal(out, m(x))
    frames, out = _module_call_frames(c, x, scale=2.0)    # keywords go through too
    assert frames == 0
    assert torch.allclose(out, m(x, scale=2.0))
    assert counter.frame_count >= 1


def test_forward_hook_added_after_compile_runs():
    m = Net()
    c, _ = _compiled(m)
    x = torch.randn(2, 4)
    c(x)
    h = m.register_forward_hook(lambda mod, args, out: out + 100)
    frames, out = _module_call_frames(c, x)
    assert frames == 2
    assert torch.equal(out, m(x))
    assert out.min() >= 100 - 1e-3
    h.remove()
    frames, out = _module_call_frames(c, x)
    assert frames == 0 and torch.equal(out, m(x))


def test_forward_pre_hook_added_after_compile_runs():
    m = Net()
    c, _ = _compiled(m)
    x = torch.randn(2, 4)
    c(x)
    h = m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    out = c(x)
    assert torch.equal(out, m(x))
    assert torch.equal(out, torch.relu(m.fc(torch.zeros_like(x))))
    h.remove()
    assert torch.equal(c(x), m(x))


def test_global_forward_hook_runs():
    m = Net()
    c, _ = _compiled(m)
    x = torch.randn(2, 4)
    c(x)
    calls = []
    h = nn.modules.module.register_module_forward_hook(lambda mod, a, out: calls.append(mod))
    try:
        c(x)
    finally:
        h.remove()
    assert m in calls
    calls.clear()
    c(x)
    assert calls == []


def test_backward_hook_registered_after_compile_runs():
    m = Net()
    c, _ = _compiled(m)
    x = torch.randn(2, 4, requires_grad=True)
    c(x)
    grads = []
    h = m.register_full_backward_hook(lambda mod, gin, gout: grads.append(gout))
    c(x).sum().backward()
    h.remove()
    assert len(grads) == 1


def test_forward_set_on_instance_is_called():
    m = Net()
    c, _ = _compiled(m)
    x = torch.randn(2, 4)
    c(x)
    m.forward = lambda x, scale=1.0: x * 3
    assert torch.equal(c(x), x * 3)
    del m.forward
    assert torch.equal(c(x), m(x))


def test_class_call_patched_is_honoured():
    class Patched(Net):
        pass

    m = Patched()
    c, _ = _compiled(m)
    x = torch.randn(2, 4)
    c(x)
    Patched.__call__ = lambda self, *a, **k: "patched"
    try:
        assert c(x) == "patched"
    finally:
        del Patched.__call__
    assert torch.equal(c(x), m(x))


def test_compiled_call_impl_is_used():
    m = Net()
    c, _ = _compiled(m)
    x = torch.randn(2, 4)
    c(x)
    m._compiled_call_impl = lambda *a, **k: "compiled impl"
    assert c(x) == "compiled impl"
    m._compiled_call_impl = None
    assert torch.equal(c(x), m(x))


def test_forward_redefined_on_class_is_followed():
    class Redef(nn.Module):
        def forward(self, x):
            return x + 1

    m = Redef()
    c, _ = _compiled(m)
    x = torch.randn(3)
    assert torch.equal(c(x), x + 1)
    Redef.forward = lambda self, x: x - 1
    assert torch.equal(c(x), x - 1)


def test_jit_trace_of_a_module_still_records_scopes():
    # under torch.jit.trace of a module, nn.Module.__call__ calls _slow_forward, which
    # records scope names while torch.jit._trace._trace_module_map is set: the fast path is
    # not taken then (under a trace of a plain function _slow_forward only calls forward)
    m = Net()
    c, _ = _compiled(m)
    x = torch.randn(2, 4)
    c(x)

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = m

        def forward(self, t):
            return c(t)

    seen = []
    orig = nn.Module._slow_forward

    def spy(self, *a, **k):
        seen.append(self)
        return orig(self, *a, **k)
    nn.Module._slow_forward = spy
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traced = torch.jit.trace(Outer(), (x,), check_trace=False)
    finally:
        nn.Module._slow_forward = orig
    assert m in seen
    assert torch.equal(traced(x), m(x))
    frames, out = _module_call_frames(c, x)    # the trace is over: the fast path again
    assert frames == 0 and torch.equal(out, m(x))


def test_getattr_and_state_dict_still_reach_the_module():
    m = Net()
    c, _ = _compiled(m)
    assert c.fc is m.fc
    assert set(c.state_dict()) == set(m.state_dict())
    assert type(c).__call__ is not None
    # the unbound descriptor binds like a method
    bound = type(c).__call__.__get__(c, type(c))
    x = torch.randn(2, 4)
    assert torch.equal(bound(x), m(x))
