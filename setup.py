"""Build of tfcompat._kernels.

OpenMP is probed: where the compiler cannot build an OpenMP program the extension is
built serially (``prange`` becomes a plain loop) and a warning is printed.

Environment switches:
  TFCOMPAT_BOUNDSCHECK=1   compile with Cython bounds and wraparound checks on (debugging,
                           and the CI step that proves the kernels never index out of range)
  TFCOMPAT_NO_OPENMP=1     skip the probe and build serially
  TFCOMPAT_NO_AVX2=1       build only the baseline kernels (no _kernels_avx2)

On x86-64 the same kernels are also compiled with -mavx2 as tfcompat._kernels_avx2, which
tfcompat/_simd.py loads on CPUs with AVX2 (the results are bit for bit those of the baseline).
"""
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import warnings

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

_PROBE = r"""
#include <omp.h>
int main(void) {
    int n = 0;
    #pragma omp parallel reduction(+:n)
    n += 1;
    return n > 0 ? 0 : 1;
}
"""


_AVX2_PROBE = r"""
#include <immintrin.h>
int main(void) {
    __m256 a = _mm256_set1_ps(1.0f);
    return (int)_mm256_cvtss_f32(_mm256_add_ps(a, a)) == 2 ? 0 : 1;
}
"""


def _compiles(flags, source):
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    cc = cc.split()
    if shutil.which(cc[0]) is None:
        return False
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "probe.c")
        with open(src, "w") as f:
            f.write(source)
        try:
            res = subprocess.run(cc + flags + [src, "-o", os.path.join(tmp, "probe")],
                                 capture_output=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            return False
    return res.returncode == 0


def _openmp_flags():
    if os.environ.get("TFCOMPAT_NO_OPENMP"):
        return None
    return ["-fopenmp"] if _compiles(["-fopenmp"], _PROBE) else None


def _avx2_flags():
    if os.environ.get("TFCOMPAT_NO_AVX2"):
        return None
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    return ["-mavx2"] if _compiles(["-mavx2"], _AVX2_PROBE) else None


omp = _openmp_flags()
if omp is None:
    warnings.warn("tfcompat: the compiler has no usable OpenMP; building a serial "
                  "_kernels extension (results are identical, only slower)")
    print("WARNING: tfcompat is built without OpenMP", file=sys.stderr)

bounds = os.environ.get("TFCOMPAT_BOUNDSCHECK", "") not in ("", "0")
directives = {
    "language_level": 3,
    "boundscheck": bounds,
    "wraparound": bounds,
    "initializedcheck": bounds,
    "cdivision": True,
    "embedsignature": True,
}

# No -march=native and no fast-math: results must be the same on every x86-64, and
# -ffp-contract=off keeps gcc from fusing a*b+c into an FMA (TF's wheels do not).
# -fno-code-hoisting: in the resampling window gcc hoisted the source loads of the rare
# (edge) path above the branch into the common one and spilled them to the stack on every
# pixel; without hoisting I1 runs 16 % fewer instructions and 1.08-1.17x faster, R1 1.05-1.17x
# (interleaved, this VM), and no other kernel is slower. It does not change any arithmetic.
_NO_HOIST = ["-fno-code-hoisting"] if _compiles(["-fno-code-hoisting", "-Werror"],
                                                 "int main(void) { return 0; }\n") else []
# -falign-loops=32: the kernels' hottest loops are 20-30 bytes long; gcc's default alignment
# let an unrelated change in the window move R4's channel loop across a 64-byte boundary, and
# R4 bilinear ran 0.75-0.82x as fast (same instructions, callgrind). Starting every loop on a
# 32-byte boundary keeps such loops inside one 64-byte fetch block.
_ALIGN = ["-falign-loops=32"] if _compiles(["-falign-loops=32", "-Werror"],
                                            "int main(void) { return 0; }\n") else []
compile_args = ["-O3", "-ffp-contract=off", "-fno-fast-math"] + _NO_HOIST + _ALIGN + (omp or [])
link_args = list(omp or [])


def _extension(name, isa_flags):
    return Extension(
        name,
        [name.replace(".", "/") + ".pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
        + ([("TFCOMPAT_CHECK_BOUNDS", "1")] if bounds else []),
        extra_compile_args=compile_args + isa_flags,
        extra_link_args=link_args,
    )


extensions = [_extension("tfcompat._kernels", [])]
avx2 = _avx2_flags()
if avx2 is not None:
    extensions.append(_extension("tfcompat._kernels_avx2", avx2))

setup(ext_modules=cythonize(extensions, compiler_directives=directives,
                            compile_time_env={"TFCOMPAT_OPENMP": omp is not None}))
