"""The output buffer pool of the cython backend.

Large outputs (>= 1 MiB) are allocated from a small cache of recently freed blocks (at most
8 blocks and ``TFCOMPAT_POOL_MB`` MiB, default 1024), so a training loop that calls a kernel
repeatedly with the same shapes does not pay page faults on every call, as TensorFlow's own
allocator does not. Only arrays returned by tfcompat and its kernels' own buffers (a conv's
copy of its filter's taps) use it; their memory goes back to the cache when they are freed.
Every array it gives starts on a 64-byte boundary. ``set_memory_pool_limit(0)`` turns caching
off.
"""
import os

import numpy as np

from ._simd import kernels as _kernels


def _env_limit():
    try:
        mb = float(os.environ.get("TFCOMPAT_POOL_MB", "1024"))
    except ValueError:
        return 2 ** 30
    if mb != mb:   # NaN
        return 2 ** 30
    return int(min(max(0.0, mb) * 2 ** 20, 2.0 ** 63))   # inf or 1e30: no cap to speak of


def set_memory_pool_limit(nbytes):
    """Cap the bytes the output pool may keep cached (0 disables it and frees the cache)."""
    if isinstance(nbytes, (bool, np.bool_)) or not isinstance(nbytes, (int, np.integer)):
        raise TypeError(f"nbytes: got {nbytes!r}; expected a non-negative int")
    if nbytes < 0:
        raise ValueError(f"nbytes: got {nbytes!r}; expected a non-negative int")
    # a cap beyond what a size_t holds caps nothing either
    _kernels.set_pool_limit(min(int(nbytes), 2 ** 63))


def release_memory():
    """Free the blocks the output pool holds; returns the number of bytes freed."""
    return _kernels.release_pool()


def memory_pool_stats():
    return _kernels.pool_stats()


empty = _kernels.pooled_empty
_kernels.set_pool_limit(_env_limit())
