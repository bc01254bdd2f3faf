"""Build the Cython kernels in dpcore/ into the package dpcore (Python sources in python/dpcore/)."""
import os
import pathlib
import sys

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

# Every dpcore/_<name>.pyx is a kernel, built as dpcore._<name>.
KERNELS = sorted(path.stem for path in pathlib.Path(__file__).parent.joinpath("dpcore").glob("_*.pyx"))

# IEEE semantics the privacy proofs rely on: no FMA contraction, no reassociation.
FP_FLAGS = [] if os.name == "nt" else ["-O3", "-fno-fast-math", "-ffp-contract=off"]
DEBUG = os.environ.get("DPCORE_DEBUG") == "1"
# Cythonize and compile the kernels in parallel (pip builds give no -j): about half the install
# time on 2 cores. DPCORE_BUILD_JOBS overrides the count.
def _cores():
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


JOBS = int(os.environ.get("DPCORE_BUILD_JOBS", 0)) or _cores()

extensions = [
    Extension(
        f"dpcore.{name}",
        [f"dpcore/{name}.pyx"],
        include_dirs=[numpy.get_include(), "dpcore"],
        extra_compile_args=FP_FLAGS,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_2_0_API_VERSION")],
    )
    for name in KERNELS
    if name in os.environ.get("DPCORE_KERNELS", name).split(",")  # dev: build a subset
]

setup(
    options={"build_ext": {"parallel": JOBS}},
    ext_modules=cythonize(
        extensions,
        nthreads=JOBS if sys.platform.startswith("linux") else 0,  # a fork-based pool
        include_path=["."],
        language_level=3,
        compiler_directives={
            "boundscheck": DEBUG,
            "wraparound": DEBUG,
            "cdivision": True,
            "initializedcheck": DEBUG,
        },
    ),
)
