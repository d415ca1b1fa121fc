"""Build of cdynamo's C engine (the extension cdynamo._C) by the package's own build.

Environment variables:
  CDYNAMO_DEBUG=1  -O0 -g with assert() checks on.
  CDYNAMO_ASAN=1   AddressSanitizer + UndefinedBehaviorSanitizer (-O1 -g, assert() on); the
                   Python process must preload the ASan runtime (see `make test-asan`).

Two extensions: cdynamo._C, the engine (C11), and cdynamo._tensor_meta (C++, one file:
csrc/tensor_meta.cpp), which reads the metadata TENSOR_MATCH compares through torch's C++ API
and hands it to _C as a capsule (csrc/tensor_meta.h). Its C++ standard is the one the
installed torch's headers need, as cdynamo._compat.cxx_std says: C++17 for torch 2.13, C++20
for 2.14 and later (torch's own cpp_extension passes -std=c++20 for all of them). It is built
against the torch installed in the build environment (its headers and libraries, as torch's
own cpp_extension builds); without torch there, it is left out and _C checks tensors through
torch's Python getters and TensorGuards instead.
"""
import glob
import importlib.util
import os

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
CSRC = os.path.join("src", "cdynamo", "csrc")

debug = os.environ.get("CDYNAMO_DEBUG", "") == "1"
asan = os.environ.get("CDYNAMO_ASAN", "") == "1"
SAN = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer",
       "-fno-sanitize-recover=undefined"]
if asan:
    opt = ["-O1", "-g", "-UNDEBUG"] + SAN
elif debug:
    opt = ["-O0", "-g", "-UNDEBUG"]
else:
    opt = ["-O2"]
ext = Extension(
    "cdynamo._C",
    sources=sorted(glob.glob(os.path.join(CSRC, "*.c")) + glob.glob(os.path.join(CSRC, "values", "*.c"))),
    depends=sorted(glob.glob(os.path.join(CSRC, "*.h")) + glob.glob(os.path.join(CSRC, "values", "*.h"))),
    include_dirs=[CSRC],
    extra_compile_args=["-std=c11", "-Wall", "-Wextra"] + opt,
    extra_link_args=SAN if asan else [],
)



def load_compat():
    """cdynamo/_compat.py loaded on its own (the package itself needs _C, not built yet)."""
    spec = importlib.util.spec_from_file_location(
        "_cdynamo_compat_build", os.path.join(HERE, "src", "cdynamo", "_compat.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tensor_meta_ext():
    """cdynamo._tensor_meta, or None when torch is not importable in the build."""
    try:
        import torch
        from torch.utils.cpp_extension import include_paths, library_paths
    except ImportError:
        return None
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    std = load_compat().cxx_std(torch.__version__)   # the standard torch's headers need
    # torch's headers as system headers: -Wall -Wextra apply to our file only
    isystem = [a for p in include_paths() for a in ("-isystem", p)]
    libs = library_paths()
    return Extension(
        "cdynamo._tensor_meta",
        sources=[os.path.join(CSRC, "tensor_meta.cpp")],
        depends=[os.path.join(CSRC, "tensor_meta.h")],
        include_dirs=[CSRC],
        language="c++",
        extra_compile_args=[f"-std={std}", "-Wall", "-Wextra", f"-D_GLIBCXX_USE_CXX11_ABI={abi}"]
        + isystem + opt,
        library_dirs=libs,
        runtime_library_dirs=libs,
        libraries=["c10", "torch", "torch_cpu", "torch_python"],
        extra_link_args=SAN if asan else [],
    )


tm = tensor_meta_ext()
setup(ext_modules=[ext] + ([tm] if tm is not None else []))
