"""Build of cdynamo's C engine (the extension cdynamo._C) by the package's own build."""
import glob
import os

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
CSRC = os.path.join("src", "cdynamo", "csrc")

debug = os.environ.get("CDYNAMO_DEBUG", "") == "1"
ext = Extension(
    "cdynamo._C",
    sources=sorted(glob.glob(os.path.join(CSRC, "*.c")) + glob.glob(os.path.join(CSRC, "values", "*.c"))),
    depends=sorted(glob.glob(os.path.join(CSRC, "*.h")) + glob.glob(os.path.join(CSRC, "values", "*.h"))),
    include_dirs=[CSRC],
    extra_compile_args=["-std=c11", "-Wall", "-Wextra"]
    + (["-O0", "-g", "-UNDEBUG"] if debug else ["-O2"]),
)

setup(ext_modules=[ext])
