"""Polyfills of torch helpers written in Python whose own code the engine does not trace:
torch._refs._broadcast_shapes (behind torch.broadcast_shapes), plain comparisons of sizes
(guarded as any branch on a size) instead of torch's guard_or_false."""
import torch as _torch
import torch._refs as _refs

from . import substitute_for


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
