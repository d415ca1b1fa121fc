"""The __torch_function__ protocol of tensor subclasses, traced (as torch._dynamo traces it):
a graph call whose tensor arguments include a subclass that overrides __torch_function__
(values/tensor.c, graph.c) inlines :func:`torch_function_dispatch` with the function eager
hands to the override (``torch.add``, ``torch.Tensor.add``, ``torch.Tensor.__add__``, ...);
the override's own code is traced as user code, its ``super().__torch_function__`` as
:func:`tensor_torch_function` (torch.Tensor's default), and its calls inside
``torch._C.DisableTorchFunctionSubclass()`` as calls on plain tensors."""
import torch as _torch

from . import exact_type, substitute_for

_NotImplementedType = type(NotImplemented)

def torch_function_dispatch(func, types, args, kwargs):
    """func(*args, **kwargs) for arguments of the tensor subclasses `types` (a tuple, most
    derived first, as torch orders them): each class's __torch_function__ in turn until one
    does not return NotImplemented. Raises TypeError when all do, as torch."""
    for t in types:
        ret = t.__torch_function__(func, types, args, kwargs)
        if exact_type(ret) is not _NotImplementedType:   # `is` on a tuple made in the trace
            return ret
    raise TypeError(f"no implementation found for '{func.__module__}.{func.__name__}' on "
                    f"types that implement __torch_function__: {list(types)}")


def _convert(ret, cls):
    if cls is _torch.Tensor:
        return ret
    if isinstance(ret, _torch.Tensor) and not isinstance(ret, cls):
        ret = ret.as_subclass(cls)
    if type(ret) is tuple:
        ret = tuple(_convert(r, cls) for r in ret)
    elif type(ret) is list:
        ret = [_convert(r, cls) for r in ret]
    return ret


@substitute_for(_torch.Tensor.__torch_function__.__func__)
def tensor_torch_function(cls, func, types, args=(), kwargs=None):
    """torch.Tensor.__torch_function__ (a classmethod: cls first): func on plain tensors, the
    tensors of its result converted to cls. torch returns the result of its "nowrap"
    functions (the getters of Tensor._base, .grad, ._grad) unconverted; the engine never
    dispatches an attribute getter (values/tensor.c cdyn_tensor_tf_func), so no func here
    is one of them."""
    if kwargs is None:
        kwargs = {}
    for t in types:
        if not issubclass(cls, t):
            return NotImplemented
    with _torch._C.DisableTorchFunctionSubclass():
        ret = func(*args, **kwargs)
        return _convert(ret, cls)
