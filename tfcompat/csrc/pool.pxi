# The output buffer pool (pool.h): large outputs come from a few recently freed blocks.

cdef extern from "pool.h":
    object tfc_handler_capsule()
    size_t tfc_release() nogil
    void tfc_set_limit(size_t nbytes) nogil
    size_t tfc_cached, tfc_limit, tfc_hits, tfc_misses

cdef extern from "numpy/arrayobject.h":
    object PyDataMem_SetHandler(object handler)

_POOL_HANDLER = tfc_handler_capsule()


def pooled_empty(shape, dtype):
    """``np.empty`` whose memory comes from (and returns to) tfcompat's output pool."""
    old = PyDataMem_SetHandler(_POOL_HANDLER)
    try:
        return np.empty(shape, dtype=dtype)
    finally:
        PyDataMem_SetHandler(old)


def pool_stats():
    """Bytes cached, cap in bytes, hits and misses of the output pool."""
    return {"cached_bytes": tfc_cached, "limit_bytes": tfc_limit, "hits": tfc_hits,
            "misses": tfc_misses}


def set_pool_limit(size_t nbytes):
    """Cap the bytes the pool may keep (0: keep none, and free what it holds)."""
    tfc_set_limit(nbytes)


def release_pool():
    """Free every cached block; returns the number of bytes freed."""
    return tfc_release()
