"""The output buffer pool of the cython backend.

Large outputs (>= 1 MiB) are allocated from a small cache of recently freed blocks (at most
8 blocks and ``TFCOMPAT_POOL_MB`` MiB, default 1024), so a training loop that calls a kernel
repeatedly with the same shapes does not pay page faults on every call, as TensorFlow's own
allocator does not. Only arrays returned by tfcompat use it; their memory goes back to the
cache when they are freed. ``set_memory_pool_limit(0)`` turns caching off.
"""
import os

from ._simd import kernels as _kernels


def _env_limit():
    try:
        return max(0, int(float(os.environ.get("TFCOMPAT_POOL_MB", "1024")) * 2 ** 20))
    except ValueError:
        return 2 ** 30


def set_memory_pool_limit(nbytes):
    """Cap the bytes the output pool may keep cached (0 disables it and frees the cache)."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise ValueError(f"nbytes: got {nbytes!r}; expected a non-negative int")
    _kernels.set_pool_limit(nbytes)


def release_memory():
    """Free the blocks the output pool holds; returns the number of bytes freed."""
    return _kernels.release_pool()


def memory_pool_stats():
    return _kernels.pool_stats()


empty = _kernels.pooled_empty
_kernels.set_pool_limit(_env_limit())
