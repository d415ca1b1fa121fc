"""Build of cdynamo's C engine (the extension cdynamo._C) by the package's own build.

Environment variables:
  CDYNAMO_DEBUG=1  -O0 -g with assert() checks on.
  CDYNAMO_ASAN=1   AddressSanitizer + UndefinedBehaviorSanitizer (-O1 -g, assert() on); the
                   Python process must preload the ASan runtime (see `make test-asan`).
"""
import glob
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

setup(ext_modules=[ext])
