"""Polyfills of torch.distributed's DeviceMesh: its sub-meshes, groups and sizes, asked for in
compiled code.

A collective on a dimension of a multi-dimensional mesh names its group through the mesh:
``funcol.all_reduce(x, "sum", mesh["dp"])``, ``mesh.get_group("tp")``, ``mesh.size(0)``.
DeviceMesh is torch.distributed's Python (the "skip" trace rule: every such call was a graph
break); what these methods answer depends only on the mesh's layout, fixed once it is made.
They run at trace time on the real mesh (``_mesh_call``, marked ``assume_constant_result``:
the mesh is pinned by an identity guard when it is read from the frame), and their results are
constants of the trace: a sub-mesh or a ProcessGroup that the collectives' polyfills
(cdynamo/_distributed.py) turn into a group name, an int, a tuple; a ProcessGroup's
``group_name``, ``group_desc``, ``size()`` and ``rank()`` are read on the real group. torch._dynamo 2.13 does the
same through its opaque-object registration of DeviceMesh (torch/distributed/device_mesh.py:
``__getitem__`` and ``get_group`` traced, ``size``, ``get_rank``, ``ndim``, ... evaluated on the
real object), where it guards the mesh's layout instead of its identity.
"""
import torch as _torch

from . import substitute_for


def _mesh_call(obj, name, *args):
    """getattr(obj, name)(*args) of a mesh or a group, called at trace time
    (assume_constant_result)."""
    return getattr(obj, name)(*args)


def _real_attr(obj, name):
    """getattr(obj, name), read at trace time (assume_constant_result)."""
    return getattr(obj, name)


_mesh_call._dynamo_marked_constant = True
_real_attr._dynamo_marked_constant = True

if _torch.distributed.is_available():
    from torch.distributed.device_mesh import DeviceMesh as _DeviceMesh

    @substitute_for(_DeviceMesh.__getitem__)
    def mesh_getitem(self, mesh_dim_names):
        return _mesh_call(self, "__getitem__", mesh_dim_names)

    @substitute_for(_DeviceMesh.get_group)
    def mesh_get_group(self, mesh_dim=None):
        return _mesh_call(self, "get_group", mesh_dim)

    @substitute_for(_DeviceMesh.size)
    def mesh_size(self, mesh_dim=None):
        return _mesh_call(self, "size", mesh_dim)

    @substitute_for(_DeviceMesh.get_rank)
    def mesh_get_rank(self):
        return _mesh_call(self, "get_rank")

    @substitute_for(_DeviceMesh.get_local_rank)
    def mesh_get_local_rank(self, mesh_dim=None):
        return _mesh_call(self, "get_local_rank", mesh_dim)

    @substitute_for(_DeviceMesh.get_coordinate)
    def mesh_get_coordinate(self):
        return _mesh_call(self, "get_coordinate")

    # properties (their getters): DeviceMesh's in Python, ProcessGroup's in C (pybind11; the
    # engine asks for the polyfill of a property getter that is a builtin, values/userobj.c)
    from torch.distributed import ProcessGroup as _ProcessGroup

    for _cls, _names in ((_DeviceMesh, ("ndim", "shape", "mesh_dim_names", "device_type")),
                         (_ProcessGroup, ("group_name", "group_desc"))):
        for _name in _names:
            _prop = _cls.__dict__.get(_name)
            if isinstance(_prop, property) and _prop.fget is not None:
                def _getter(self, _name=_name):
                    return _real_attr(self, _name)
                _getter.__name__ = _getter.__qualname__ = f"{_cls.__name__}_{_name}"
                substitute_for(_prop.fget)(_getter)
    del _cls, _names, _name, _prop

    # ProcessGroup's size() and rank(): builtin methods (the engine asks for their polyfill,
    # values/userobj.c), read on the real group
    @substitute_for(_ProcessGroup.size)
    def process_group_size(self):
        return _mesh_call(self, "size")

    @substitute_for(_ProcessGroup.rank)
    def process_group_rank(self):
        return _mesh_call(self, "rank")
