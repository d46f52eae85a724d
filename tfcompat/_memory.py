"""The output buffer pool of the cython backend, and the check of a call's peak memory
against what the process can still allocate (docs/semantics.md §11).

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


# A call whose peak takes at least this many bytes checks it against the memory available
# before it allocates anything (reading /proc costs ~20 us, which smaller calls do not pay)
CHECK_FROM_BYTES = 64 << 20


def _proc_kib(path, key):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def available_bytes():
    """Bytes this process may still allocate, or None where it cannot tell: the kernel's
    MemAvailable and, under an address-space limit (RLIMIT_AS), what is left of that limit.
    The output pool's cached blocks are not counted (see :func:`check_peak`)."""
    avail = _proc_kib("/proc/meminfo", "MemAvailable:")
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):
        soft = None
    if soft is not None and soft != resource.RLIM_INFINITY:
        used = _proc_kib("/proc/self/status", "VmSize:")
        if used is not None:
            left = max(0, soft - used)
            avail = left if avail is None else min(avail, left)
    return avail


def check_peak(nbytes, name, detail):
    """A MemoryError naming ``name`` where a call's peak of ``nbytes`` (``detail``: what makes
    it up) exceeds what this process can still allocate, once the output pool has handed its
    cached blocks back: an honest error before any allocation, instead of a process killed
    by the kernel's OOM killer halfway through."""
    if nbytes < CHECK_FROM_BYTES:
        return
    avail = available_bytes()
    if avail is not None and nbytes > avail and memory_pool_stats()["cached_bytes"]:
        release_memory()
        avail = available_bytes()
    if avail is not None and nbytes > avail:
        raise MemoryError(f"{name}: this call needs {nbytes / 2**30:.2f} GiB at its peak "
                          f"({detail}); {avail / 2**30:.2f} GiB are available")
