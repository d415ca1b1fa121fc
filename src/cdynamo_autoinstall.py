"""Install cdynamo as torch.compile when the environment has ``CDYNAMO=1``, as soon as torch
is imported. A top-level module beside the cdynamo package: importing it imports neither
cdynamo nor torch, so a process that never uses torch pays nothing.

Meant for a ``sitecustomize.py`` (on sys.path, e.g. in the venv's site-packages), whose one
line is ``import cdynamo_autoinstall``; see docs/drop-in.md. With CDYNAMO unset or not "1"
importing it does nothing. When torch is already imported, cdynamo is installed at once.
"""
import importlib.abc
import os
import sys

ENV_VAR = "CDYNAMO"


def _install_now():
    import cdynamo
    cdynamo.install()


class _TorchImportHook(importlib.abc.MetaPathFinder):
    """A sys.meta_path finder that finds nothing itself: when the import of the top-level
    package ``torch`` starts, it wraps the real loader so that cdynamo.install() runs right
    after torch's own module code, then removes itself."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)
        import importlib.util
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_then_install(module):
            exec_module(module)
            _install_now()

        loader.exec_module = exec_then_install
        return spec


def enable() -> None:
    """Install cdynamo now if torch is imported, else when it is."""
    if "torch" in sys.modules:
        _install_now()
    elif not any(isinstance(f, _TorchImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchImportHook())


if os.environ.get(ENV_VAR) == "1":
    enable()
