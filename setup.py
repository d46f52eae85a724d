"""Build of tfcompat._kernels (and its AVX2 twin, tfcompat._kernels_avx2).

The build_ext below probes the compiler with setuptools' own compiler object, compiling,
linking and running a small program for each feature:

  AVX2        -mavx2 for tfcompat._kernels_avx2 (x86-64 only; tfcompat/_simd.py loads it on
              CPUs with AVX2; the results are bit for bit the baseline's).
  codegen     -fno-code-hoisting and -falign-loops=32 where the compiler takes them (why:
              docs/performance.md).

Environment switches:
  TFCOMPAT_BOUNDSCHECK=1     Cython's bounds checks on, and the kernels' own index checks
                             (tfcompat/csrc/checks.h): a failed check aborts. Negative
                             indices stay unwrapped, as in the normal build, so that one
                             fails the check instead of reading from the end
  TFCOMPAT_NO_AVX2=1         build only the baseline kernels
  TFCOMPAT_STRICT_CYTHON=1   Cython's warnings are errors (CI): a negative index under
                             wraparound=False, say, is undefined and differs between Cython
                             and NumPy versions
"""
import os
import platform
import shutil
import tempfile

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

_AVX2_PROBE = r"""
#include <immintrin.h>
int main(void) {
    __m256 a = _mm256_set1_ps(1.0f);
    return (int)_mm256_cvtss_f32(_mm256_add_ps(a, a)) == 2 ? 0 : 1;
}
"""

_EMPTY = "int main(void) { return 0; }\n"


def _flag(name):
    return os.environ.get(name, "") not in ("", "0")


class ProbingBuildExt(build_ext):
    """build_ext that decides the compiler flags by compiling and running probe programs."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            # the baseline and AVX2 extensions compile side by side (each takes ~50 s)
            self.parallel = os.cpu_count() or 1

    def _runs(self, source, flags, run=True):
        """True when ``source`` compiles and links with ``flags`` (and, with ``run``, exits 0)."""
        tmp = tempfile.mkdtemp(prefix="tfcompat-probe-")
        try:
            src = os.path.join(tmp, "probe.c")
            with open(src, "w") as f:
                f.write(source)
            try:
                objs = self.compiler.compile([src], output_dir=tmp, extra_postargs=flags)
                exe = os.path.join(tmp, "probe")
                self.compiler.link_executable(objs, exe, extra_postargs=flags)
            except Exception:  # CompileError, LinkError: the flag or header is not there
                return False
            if not run:
                return True
            import subprocess
            try:
                return subprocess.run([exe], capture_output=True, timeout=60).returncode == 0
            except (OSError, subprocess.SubprocessError):
                return False
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def build_extensions(self):
        codegen = [f for f in ("-fno-code-hoisting", "-falign-loops=32")
                   if self._runs(_EMPTY, [f, "-Werror"], run=False)]
        avx2 = (not _flag("TFCOMPAT_NO_AVX2")
                and platform.machine().lower() in ("x86_64", "amd64")
                and self._runs(_AVX2_PROBE, ["-mavx2"], run=False))
        for ext in list(self.extensions):
            if ext.name.endswith("_avx2"):
                if not avx2:
                    self.extensions.remove(ext)
                    continue
                ext.extra_compile_args = ext.extra_compile_args + ["-mavx2"]
            ext.extra_compile_args = ext.extra_compile_args + codegen
        super().build_extensions()


bounds = _flag("TFCOMPAT_BOUNDSCHECK")
if _flag("TFCOMPAT_STRICT_CYTHON"):
    from Cython.Compiler import Options
    Options.warning_errors = True
directives = {
    "language_level": 3,
    "boundscheck": bounds,
    "wraparound": False,
    "initializedcheck": bounds,
    "cdivision": True,
    "embedsignature": True,
}
CSRC = os.path.join("tfcompat", "csrc")
DEPENDS = [os.path.join(CSRC, f) for f in sorted(os.listdir(CSRC))] if os.path.isdir(CSRC) else []


def _extension(name):
    return Extension(
        name,
        [name.replace(".", "/") + ".pyx"],
        include_dirs=[np.get_include(), CSRC],
        depends=DEPENDS,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
        + ([("TFCOMPAT_CHECK_BOUNDS", "1")] if bounds else []),
        # no -march=native and no fast-math: the same results on every x86-64;
        # -ffp-contract=off keeps gcc from fusing a*b+c into an FMA (TF's wheels do not)
        extra_compile_args=["-O3", "-ffp-contract=off", "-fno-fast-math", "-pthread"],
        # the kernels' team of threads (tfcompat/csrc/team.h)
        extra_link_args=["-pthread"],
    )


setup(
    ext_modules=cythonize([_extension("tfcompat._kernels"), _extension("tfcompat._kernels_avx2")],
                          compiler_directives=directives, nthreads=os.cpu_count() or 1),
    cmdclass={"build_ext": ProbingBuildExt},
)
