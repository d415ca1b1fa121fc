"""TENSOR_MATCH through cdynamo._tensor_meta (torch's C++ API, csrc/tensor_meta.cpp).

With the extension built (always, where torch is installed at build time), a tensor guard
reads dtype, device, requires_grad, sizes, strides and dispatch keys through at::Tensor's
accessors instead of torch's Python getters and TensorGuards. Each test compiles with the
C++ path and checks the guard's answers against eager and against the recompiles
torch._dynamo makes; the last test runs the guard tests again with CDYNAMO_TENSOR_META=0
(the Python-getter and TensorGuards path) in a subprocess, so both paths stay covered.
"""
import os
import subprocess
import sys

import pytest
import torch
import torch._dynamo.testing

import cdynamo
from cdynamo import _C


def _mul2(x):
    return x * 2


def _dynamo_frames(fn, calls):
    """Frames torch._dynamo compiles over calls (each an argument tuple), backend eager."""
    torch._dynamo.reset()
    cnt = torch._dynamo.testing.CompileCounter()
    c = torch.compile(fn, backend=cnt)
    for args in calls:
        c(*args)
    torch._dynamo.reset()
    return cnt.frame_count


def _cdynamo_frames(fn, calls, **kw):
    cnt = torch._dynamo.testing.CompileCounter()
    c = cdynamo.compile(fn, backend=cnt, **kw)
    for args in calls:
        assert torch.equal(c(*args), fn(*args))
    return cnt.frame_count


def test_tensor_meta_is_built_and_used():
    # `make test` installs the package with its C++ extension: the fast path must be on here
    import cdynamo._tensor_meta as tm
    assert type(tm.api).__name__ == "PyCapsule"
    assert _C.tensor_meta_active()


def test_grad_mode_read_through_the_extension_recompiles_on_a_change():
    x = torch.randn(3, requires_grad=True)
    cnt = torch._dynamo.testing.CompileCounter()
    c = cdynamo.compile(_mul2, backend=cnt)
    assert c(x).requires_grad
    with torch.no_grad():
        assert not c(x).requires_grad
        assert not c(x).requires_grad
    assert c(x).requires_grad
    assert cnt.frame_count == 2


_CPLX = torch.randn(2, 3, dtype=torch.complex64)


@pytest.mark.parametrize("name, base, changed", [
    ("size", torch.randn(2, 3), torch.randn(4, 3)),
    ("stride", torch.randn(2, 3), torch.randn(3, 2).t()),
    ("dtype", torch.randn(2, 3), torch.randn(2, 3).double()),
    ("requires_grad", torch.randn(2, 3), torch.randn(2, 3).requires_grad_()),
    ("Parameter type", torch.randn(2, 3), torch.nn.Parameter(torch.randn(2, 3))),
    ("conjugate view (dispatch keys only)", _CPLX, _CPLX.conj()),
    ("ndim", torch.randn(2, 3), torch.randn(6)),
    ("0-d", torch.randn(2, 3), torch.tensor(1.0)),
])
def test_each_property_recompiles_as_torch_dynamo(name, base, changed):
    calls = [(base,), (base,), (changed,), (changed,), (base,)]
    got = _cdynamo_frames(_mul2, calls, dynamic=False)
    assert got == 2 and got == _dynamo_frames(_mul2, calls), name


def test_meta_device_input_is_a_miss():
    cnt = torch._dynamo.testing.CompileCounter()
    c = cdynamo.compile(_mul2, backend=cnt)
    x, m = torch.randn(2, 3), torch.empty(2, 3, device="meta")
    for t in (x, x, m, m):
        out = c(t)
        assert out.device == t.device and out.shape == t.shape
    assert torch.equal(c(x), _mul2(x))
    assert cnt.frame_count == 2


def test_sparse_input_recompiles_and_matches_eager():
    """A sparse input fails the dense entry's guard; the operation on it gives a sparse
    tensor, a graph break as in torch._dynamo (no graph for it), and eager's result."""
    x = torch.randn(3, 3)
    cnt = torch._dynamo.testing.CompileCounter()
    c = cdynamo.compile(_mul2, backend=cnt)
    for _ in range(3):
        assert torch.equal(c(x), _mul2(x))
    s = x.to_sparse()
    for _ in range(2):
        assert torch.equal(c(s).to_dense(), _mul2(s).to_dense())
    assert torch.equal(c(x), _mul2(x))
    assert cnt.frame_count == 1


_NESTED_SCRIPT = r"""
import warnings, torch, cdynamo
warnings.simplefilter("ignore")
def f(x):
    return x * 2
x = torch.randn(3, 3)
n = torch.nested.nested_tensor([torch.randn(2), torch.randn(3)])
c = cdynamo.compile(f, backend="eager")
for t in (x, x, x.to_sparse(), x.to_sparse()):
    c(t)
got, want = c(n), f(n)
assert all(torch.equal(a, b) for a, b in zip(got.unbind(), want.unbind()))
assert torch.equal(c(x), f(x))
print("ok")
"""


@pytest.mark.parametrize("tensor_meta", ["1", "0"])
def test_nested_input_after_entries_is_a_miss_not_a_crash(tensor_meta):
    # torch's TensorGuards reads a nested tensor's sizes with a C++ exception that ends the
    # process (std::terminate); the guards answer a miss before it is called, and the frame
    # runs as eager (cdynamo cannot trace a strided nested tensor: run unmodified)
    env = dict(os.environ, CDYNAMO_TENSOR_META=tensor_meta)
    env.pop("CDYNAMO_RAISE_INTERNAL_ERRORS", None)
    r = subprocess.run([sys.executable, "-c", _NESTED_SCRIPT], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "ok"


def test_aliasing_two_inputs_is_a_miss():
    def h(a, b):
        if a is b:
            return a * 3
        return a + b
    x, y = torch.ones(3), torch.zeros(3)
    cnt = torch._dynamo.testing.CompileCounter()
    c = cdynamo.compile(h, backend=cnt)
    for _ in range(3):
        assert torch.equal(c(x, y), h(x, y))
    assert torch.equal(c(x, x), h(x, x))
    assert torch.equal(c(y, y), h(y, y))
    assert cnt.frame_count == 2


def test_dynamic_dims_fill_shape_guard_slots():
    # a symbolic size read through the extension feeds the SHAPE_GUARD program
    def f(x):
        return x.view(x.size(0) // 2, -1) * 2
    cnt = torch._dynamo.testing.CompileCounter()
    c = cdynamo.compile(f, backend=cnt)
    for n in (4, 6, 8, 10, 12):
        x = torch.randn(n, 3)
        assert torch.equal(c(x), f(x))
    assert cnt.frame_count == 2
    x = torch.randn(7, 2)     # 7 // 2 * k != 14: eager raises, and so does the compiled call
    with pytest.raises(RuntimeError):
        f(x)
    with pytest.raises(RuntimeError):
        c(x)


def test_inputs_under_vmap_do_not_hit_the_entry_made_outside():
    cnt = torch._dynamo.testing.CompileCounter()
    c = cdynamo.compile(_mul2, backend=cnt)
    x = torch.randn(4, 3)
    for _ in range(2):
        assert torch.equal(c(x), _mul2(x))
    out = torch.vmap(c)(x)
    assert torch.equal(out, _mul2(x))


def test_many_inputs_each_property():
    def six(a, b, c, d, e, f):
        return a * 2 + b + c + d + e + f
    xs = [torch.randn(2, 3) for _ in range(6)]
    cnt = torch._dynamo.testing.CompileCounter()
    c = cdynamo.compile(six, backend=cnt, dynamic=False)
    for _ in range(3):
        assert torch.equal(c(*xs), six(*xs))
    for i, t in enumerate([xs[3].double(), xs[3].clone().requires_grad_(),
                           torch.randn(3, 2).t()]):
        args = xs[:3] + [t] + xs[4:]
        assert torch.equal(c(*args), six(*args))
        assert cnt.frame_count == i + 2
    assert torch.equal(c(*xs), six(*xs))
    assert cnt.frame_count == 4


def test_guard_tests_pass_on_the_python_getter_path():
    # CDYNAMO_TENSOR_META=0: the same guard tests through torch's Python getters and
    # TensorGuards / the guard tree, as where the extension is not built
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, CDYNAMO_TENSOR_META="0")
    code = ("import cdynamo, sys; from cdynamo import _C; "
            "assert not _C.tensor_meta_active(); import pytest; "
            f"sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', "
            f"{os.path.join(here, 'test_guard_fastpath.py')!r}, "
            f"{os.path.join(here, 'test_guards.py')!r}, "
            f"{os.path.abspath(__file__)!r}, '-k', 'not python_getter_path and not is_built']))")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=600, cwd=here)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert " passed" in r.stdout
