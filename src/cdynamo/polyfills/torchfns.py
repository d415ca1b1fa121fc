"""Polyfills of torch helpers written in Python whose own code the engine does not trace:
torch._refs._broadcast_shapes (behind torch.broadcast_shapes), plain comparisons of sizes
(guarded as any branch on a size) instead of torch's guard_or_false; torch.sym_max, sym_min,
sym_int and sym_float as the builtins they stand for (symbolic operands make graph nodes);
mark_static called inside a compiled function specialises the sizes it names."""
import math as _math

import torch as _torch
import torch._refs as _refs

import cdynamo._api as _cd_api
import torch._dynamo as _dynamo

from . import call_with_parameters, force_static, substitute_for, unsupported


@substitute_for(_refs._broadcast_shapes)
def _broadcast_shapes(*_shapes):
    """The broadcast shape of the given shapes (a list), None for none, as torch's."""
    shapes = []
    for x in _shapes:
        if x is None:
            continue
        shapes.append((x,) if isinstance(x, (int, _torch.SymInt)) else x)
    if len(shapes) == 0:
        return None
    ndim = 0
    for shape in shapes:
        if len(shape) > ndim:
            ndim = len(shape)
    common = [1] * ndim
    for arg_idx, shape in enumerate(shapes):
        for idx in range(-1, -1 - len(shape), -1):
            if shape[idx] == common[idx]:
                continue
            if common[idx] == 1:
                if shape[idx] < 0:
                    raise ValueError("Attempting to broadcast a dimension with negative length!")
                common[idx] = shape[idx]
                continue
            if shape[idx] == 1:
                continue
            raise RuntimeError(
                f"Attempting to broadcast a dimension of length {shape[idx]} at {idx}! "
                f"Mismatching argument at index {arg_idx} had {shape}; but expected shape "
                f"should be broadcastable to {common}")
    return common


@substitute_for(_torch.sym_max)
def sym_max(a, b):
    """torch.sym_max(a, b) of ints and floats: max() (a torch.sym_max node for symbolic
    operands, no guard on their order); a float when either is a float, as torch's."""
    r = max(a, b)
    if isinstance(a, float) or isinstance(b, float):
        return float(r)
    return r


@substitute_for(_torch.sym_min)
def sym_min(a, b):
    """torch.sym_min(a, b): as sym_max, with min()."""
    r = min(a, b)
    if isinstance(a, float) or isinstance(b, float):
        return float(r)
    return r


@substitute_for(_torch.sym_int)
def sym_int(a):
    """torch.sym_int(a): a float truncated toward zero (math.trunc), anything else int(a)."""
    if isinstance(a, float):
        return _math.trunc(a)
    return int(a)


@substitute_for(_torch.sym_float)
def sym_float(a):
    """torch.sym_float(a): float(a)."""
    return float(a)


@substitute_for(_dynamo.mark_static, _cd_api.mark_static)
def mark_static(t, index=None):
    """torch._dynamo.mark_static(t, index) / cdynamo.mark_static called while tracing: the
    sizes it names (every size of t when index is None; an int or a list of ints) are
    specialised to their values, as torch._dynamo does inside a graph (the tensor object is
    not marked)."""
    if not isinstance(t, _torch.Tensor):
        unsupported("mark_static of a non-tensor inside a compiled function")
    if index is None:
        for s in t.size():
            force_static(s)
    elif isinstance(index, (list, tuple)):
        for i in index:
            force_static(t.size(i))
    else:
        force_static(t.size(index))


@substitute_for(_torch._C._group_tensors_by_device_and_dtype)
def _group_tensors_by_device_and_dtype(tensorlistlist, with_indices=False):
    """torch._C._group_tensors_by_device_and_dtype, as torch._dynamo traces it: the tensors
    of the lists grouped by the (device, dtype) of the first list's tensor at each index, in
    first-seen order: {(device, dtype): ([one list per input list], [indices])} (indices
    empty unless with_indices). Grouping reads only metadata, which the trace knows."""
    groups = {}
    first = tensorlistlist[0]
    for i in range(len(first)):
        t = first[i]
        key = (t.device, t.dtype)
        if key not in groups:
            groups[key] = ([[] for _ in tensorlistlist], [])
        lists, indices = groups[key]
        for j in range(len(tensorlistlist)):
            lists[j].append(tensorlistlist[j][i])
        if with_indices:
            indices.append(i)
    return groups


@substitute_for(_torch.func.functional_call)
def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """torch.func.functional_call(module, tensors, args, kwargs): module called with the
    given tensors in place of its parameters and buffers (names tied to a given one follow
    it, as tie_weights=True), traced into the graph as torch._dynamo traces it; the module
    itself is not changed. strict=True or tie_weights=False are a graph break.
    parameter_and_buffer_dicts: a dict, or a tuple/list of dicts (merged)."""
    if strict or not tie_weights:
        unsupported("torch.func.functional_call with strict=True or tie_weights=False")
    if isinstance(parameter_and_buffer_dicts, dict):
        tensors = parameter_and_buffer_dicts
    else:
        tensors = {}
        for d in parameter_and_buffer_dicts:
            tensors.update(d)
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    if kwargs is None:
        kwargs = {}
    return call_with_parameters(module, tensors, args, kwargs)


# The legacy tensor types (torch.FloatTensor, torch.LongTensor, ...) called as constructors.
_LEGACY_TYPES = {
    "FloatTensor": _torch.float32, "DoubleTensor": _torch.float64, "HalfTensor": _torch.float16,
    "BFloat16Tensor": _torch.bfloat16, "LongTensor": _torch.int64, "IntTensor": _torch.int32,
    "ShortTensor": _torch.int16, "CharTensor": _torch.int8, "ByteTensor": _torch.uint8,
    "BoolTensor": _torch.bool,
}


def _legacy_constructor(dtype):
    def legacy_tensor_constructor(*args, **kwargs):
        """torch.<Type>Tensor(data) of a list or tuple of numbers: a new CPU tensor of the
        type's dtype, as torch.tensor(data, dtype=...) (what the legacy constructor makes);
        torch.<Type>Tensor() an empty one. Sizes, a tensor, a storage or keyword arguments
        are a graph break."""
        if kwargs or len(args) > 1:
            unsupported("a legacy tensor constructor with sizes or keyword arguments")
        if not args:
            return _torch.empty(0, dtype=dtype)
        if not isinstance(args[0], (list, tuple)):
            unsupported("a legacy tensor constructor of something other than a list or tuple")
        return _torch.tensor(args[0], dtype=dtype)
    return legacy_tensor_constructor


for _name, _dtype in _LEGACY_TYPES.items():
    substitute_for(getattr(_torch, _name))(_legacy_constructor(_dtype))
