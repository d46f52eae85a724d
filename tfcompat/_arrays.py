"""Array conversions the cython backend's kernels share: half types widened to float32 and
rounded back once (both exact or nearest-even, in parallel), and [n, r, s] -> [n, s, r]
transposes (NCHW's dy and dx)."""
import functools

import numpy as np

from . import _checks as ck, _memory
from ._simd import cpu_has, kernels as _kernels

F32 = np.dtype(np.float32)


def half_kind(dtype):
    """True for bfloat16, False for float16, None for any other dtype."""
    if dtype == ck.BFLOAT16:
        return True
    if dtype == ck.FLOAT16:
        return False
    return None


def to_float32(arr, nthreads):
    """A C-contiguous float32 copy of a float16/bfloat16 array (exact), in parallel."""
    src = np.ascontiguousarray(arr)
    out = np.empty(src.shape, F32)
    _kernels.to_float32(src, out, half_kind(arr.dtype), nthreads)
    return out


def round_to(dx, dtype, nthreads, out=None):
    """The float32 array ``dx`` rounded once to ``dtype`` (nearest even), in parallel where
    ``dtype`` is float16 or bfloat16; written into ``out`` (C-contiguous, of ``dtype`` and
    dx's shape) when given."""
    kind = half_kind(dtype)
    if kind is None or dx.dtype != F32:
        if out is None:
            return dx.astype(dtype)
        out[...] = dx
        return out
    src = np.ascontiguousarray(dx)
    if out is None:
        out = _memory.empty(src.shape, dtype)
    _kernels.from_float32(src, out, kind, nthreads)
    return out


@functools.lru_cache(maxsize=None)
def avx512_kernels():
    """Whether tiles.h's AVX-512 code (the tile kernels, its transposes and row stores) is
    compiled in and this CPU has AVX512F (asked once: it is on every conv's path)."""
    return bool(_kernels.conv_tiles_built()) and cpu_has("AVX512F")


def swap_inner_axes(arr, nthreads):
    """arr [n, r, s] as a C-contiguous [n, s, r] array of the same dtype (its elements'
    bits), copied by ``nthreads`` threads in 16 x 16 tiles (conv_filter_taps: a batch of
    transposes), several times faster than NumPy's copy of the transposed view."""
    src = np.ascontiguousarray(arr)
    n, r, s = src.shape
    out = _memory.empty((n, s, r), src.dtype)
    _kernels.conv_filter_taps(src, np.arange(n, dtype=np.int32), out, nthreads, 0,
                              avx512_kernels())
    return out
