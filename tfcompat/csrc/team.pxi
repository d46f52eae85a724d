# The kernels' one team of threads (team.h): a job of n shares, share s computing the s-th of n
# consecutive parts of its work; the calling thread takes shares too. Every parallel loop
# below is a share function and a job struct.

cdef extern from "team.h":
    ctypedef void (*tfc_share_fn)(void* ctx, int share, int nshares) noexcept nogil
    void tfc_parallel(tfc_share_fn fn, void* ctx, int nshares) noexcept nogil
    int64_t tfc_share_begin(int64_t total, int share, int nshares) noexcept nogil
    ctypedef void (*tfc_pool_run_fn)(void* pool, tfc_share_fn fn, void* ctx,
                                     int nshares) noexcept nogil
    void tfc_set_thread_pool(tfc_pool_run_fn run, void* pool) noexcept nogil


cdef inline Py_ssize_t _lo(Py_ssize_t total, int s, int n) noexcept nogil:
    """The first item of share s of n over ``total`` items (the next share's first ends it)."""
    return <Py_ssize_t>tfc_share_begin(total, s, n)
