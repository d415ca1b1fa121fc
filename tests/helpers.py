"""Shared test helpers: a counting backend and compare(), which runs a function in eager,
under torch._dynamo and under cdynamo and checks that the results agree."""
import copy

import torch
import torch._dynamo

import cdynamo

CALL_OPS = ("call_function", "call_method", "call_module")


class CountingBackend:
    """A backend that counts the graphs handed to it and their call nodes, then runs each
    graph as it is (returns gm.forward)."""

    def __init__(self, inner=None):
        self.graphs = []
        self.inner = inner

    __name__ = "counting_backend"

    @property
    def frame_count(self):
        return len(self.graphs)

    @property
    def op_count(self):
        return sum(sum(1 for n in gm.graph.nodes if n.op in CALL_OPS) for gm in self.graphs)

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        if self.inner is not None:
            return self.inner(gm, example_inputs)
        return gm.forward


def assert_same(actual, expected, path="result", exact=True, atol=1e-5, rtol=1e-4):
    """Equality through tuples, lists and dicts: torch.equal for tensors (exact) or allclose."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: expected a tensor, got {type(actual).__name__}"
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        if exact:
            assert torch.equal(actual, expected), f"{path}: tensors differ (max abs diff " \
                f"{(actual.double() - expected.double()).abs().max().item() if actual.numel() else 0})"
        else:
            assert torch.allclose(actual, expected, atol=atol, rtol=rtol), \
                f"{path}: not allclose (max abs diff {(actual - expected).abs().max().item()})"
    elif isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{i}]", exact, atol, rtol)
    elif isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: expected a dict, got {type(actual).__name__}"
        assert list(actual.keys()) == list(expected.keys()), f"{path}: keys {list(actual)} != {list(expected)}"
        for k in expected:
            assert_same(actual[k], expected[k], f"{path}[{k!r}]", exact, atol, rtol)
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def _clone_args(args):
    return tuple(a.clone() if isinstance(a, torch.Tensor) else copy.deepcopy(a) for a in args)


def run_torch_dynamo(fn, *args, backend=None, **kwargs):
    """fn under torch.compile with a counting backend (after torch._dynamo.reset())."""
    counter = CountingBackend(backend)
    torch._dynamo.reset()
    out = torch.compile(fn, backend=counter)(*args, **kwargs)
    torch._dynamo.reset()
    return out, counter


def run_cdynamo(fn, *args, backend=None, **kwargs):
    """fn under cdynamo.compile with a counting backend (after cdynamo.reset())."""
    counter = CountingBackend(backend)
    cdynamo.reset()
    out = cdynamo.compile(fn, backend=counter)(*args, **kwargs)
    return out, counter


def check_against_eager(fn, *args, calls=2):
    """fn eagerly, then under cdynamo.compile with a counting backend (after cdynamo.reset())
    `calls` times on the same arguments: each result equals eager's (assert_same). Returns
    the counting backend."""
    expected = fn(*args)
    counter = CountingBackend()
    cdynamo.reset()
    compiled = cdynamo.compile(fn, backend=counter)
    for i in range(calls):
        assert_same(compiled(*args), expected, f"call {i}")
    return counter


def compare(fn, *args, exact=True, calls=2, **kwargs):
    """Run fn eagerly, under torch._dynamo and under cdynamo on copies of the same inputs.

    Asserts the cdynamo result equals eager's (bitwise unless exact=False) on each of `calls`
    calls (the second one hits the cache), and that cdynamo handed as many graphs to its
    backend as torch._dynamo did. Returns the cdynamo counting backend."""
    expected = fn(*_clone_args(args), **kwargs)
    _, dyn_counter = run_torch_dynamo(fn, *_clone_args(args), **kwargs)
    counter = CountingBackend()
    cdynamo.reset()
    compiled = cdynamo.compile(fn, backend=counter)
    for i in range(calls):
        out = compiled(*_clone_args(args), **kwargs)
        assert_same(out, expected, f"call {i}", exact=exact)
    assert counter.frame_count == dyn_counter.frame_count, (
        f"cdynamo compiled {counter.frame_count} graphs, torch._dynamo {dyn_counter.frame_count}")
    return counter


def compare_at_least(fn, *args, calls=2):
    """fn under cdynamo against eager (each of `calls` calls equals eager's result,
    assert_same) and against torch._dynamo of the same torch: where torch._dynamo made graphs,
    cdynamo makes no more graphs and captures no fewer ops (where it gave up on the frame, 0
    graphs, only eager's results count). Returns (cdynamo counter, torch._dynamo counter)."""
    counter = check_against_eager(fn, *args, calls=calls)
    _, dyn = run_torch_dynamo(fn, *_clone_args(args))
    if dyn.frame_count > 0:
        assert counter.frame_count <= dyn.frame_count, (
            f"cdynamo compiled {counter.frame_count} graphs, torch._dynamo {dyn.frame_count}")
        assert counter.op_count >= dyn.op_count, (
            f"cdynamo captured {counter.op_count} ops, torch._dynamo {dyn.op_count}")
    return counter, dyn
