"""Which build of the compiled kernels runs.

``tfcompat/_kernels.pyx`` is compiled twice: for the x86-64 baseline (SSE2) as
``_kernels``, and with ``-mavx2`` as ``_kernels_avx2`` (numpy's approach: one source, several
instruction sets, chosen at run time). Both use IEEE single/double arithmetic with no FMA
contraction, so they return the same bits; AVX2 only does twice as many lanes per instruction.

``TFCOMPAT_SIMD=baseline`` forces the baseline build, ``avx2`` requires the AVX2 build (an
ImportError if this CPU or build cannot run it), ``auto`` (the default) picks the widest one
that runs here.
"""
import functools
import os

from . import _kernels as _baseline


@functools.lru_cache(maxsize=None)
def cpu_has(feature):
    """Whether this CPU (and OS) runs ``feature``, a NumPy CPU feature name such as 'AVX2' or
    'AVX512F': NumPy also checks that the OS saves the registers' state."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:  # numpy < 2
        from numpy.core._multiarray_umath import __cpu_features__
    return bool(__cpu_features__.get(feature))


def _cpu_has_avx2():
    return cpu_has("AVX2")


def _load_avx2():
    try:
        from . import _kernels_avx2
    except ImportError:  # not an x86-64 build
        return None
    return _kernels_avx2


def _select(choice):
    if choice not in ("auto", "baseline", "avx2"):
        raise ValueError(f"TFCOMPAT_SIMD: got {choice!r}; expected 'auto', 'baseline' or 'avx2'")
    if choice == "baseline":
        return _baseline, "baseline"
    avx2 = _load_avx2() if _cpu_has_avx2() else None
    if avx2 is not None:
        return avx2, "avx2"
    if choice == "avx2":
        raise ImportError("TFCOMPAT_SIMD=avx2, but this CPU has no AVX2 or tfcompat was built "
                          "without its AVX2 kernels")
    return _baseline, "baseline"


kernels, build = _select(os.environ.get("TFCOMPAT_SIMD", "auto").strip().lower() or "auto")


def kernel_build():
    """The instruction set of the kernels in use: 'avx2' or 'baseline' (x86-64 SSE2)."""
    return build
