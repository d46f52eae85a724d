# Instruments: not kernels. What asv_benchmarks times beside the kernels (stream.h).

cdef extern from "stream.h":
    void stream_chunk "tfc_stream_chunk"(const float* s, Py_ssize_t ns, float* d,
                                          Py_ssize_t nd) noexcept nogil


def instrument_stream_floor(cnp.ndarray src, cnp.ndarray dst, Py_ssize_t chunks,
                            int num_threads):
    """The floor of a resize workload (asv_benchmarks/impls.py): reads every float of ``src``
    once and writes every float of ``dst`` once, in ``chunks`` matching pieces split
    statically over ``num_threads`` threads (chunk k of each array: [k*n/chunks,
    (k+1)*n/chunks); every float of destination chunk k gets the bitwise OR of the bits of
    source chunk k). A resampling backward must at least read |dy| and write |dx|; this does
    only that, with the same threads. Preconditions (the caller's): both float32 and
    C-contiguous, 1 <= chunks <= min(len(src), len(dst))."""
    cdef Py_ssize_t ns = cnp.PyArray_SIZE(src), nd = cnp.PyArray_SIZE(dst), k
    cdef const float* ps = <const float*>cnp.PyArray_DATA(src)
    cdef float* pd = <float*>cnp.PyArray_DATA(dst)
    TFC_CHECK(1 <= chunks and chunks <= ns and chunks <= nd)
    with nogil:
        for k in prange(chunks, schedule='static', num_threads=num_threads):
            stream_chunk(ps + k * ns // chunks, (k + 1) * ns // chunks - k * ns // chunks,
                         pd + k * nd // chunks, (k + 1) * nd // chunks - k * nd // chunks)
