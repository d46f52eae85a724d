# Instruments: not kernels. What asv_benchmarks times beside the kernels (stream.h, peak.h).

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


cdef extern from "peak.h":
    int TFC_PEAK_BUILT, TFC_PEAK_FLOPS_512, TFC_PEAK_FLOPS_256
    float fma_rounds_512 "tfc_fma_rounds_512"(Py_ssize_t rounds) noexcept nogil
    float fma_rounds_256 "tfc_fma_rounds_256"(Py_ssize_t rounds) noexcept nogil


def instrument_fma_peak_built():
    """Whether peak.h's multiply-add chains are compiled in (x86-64, GCC or Clang)."""
    return bool(TFC_PEAK_BUILT)


def instrument_fma_round_flops(int width):
    """float32 operations in one round of peak.h's chains of ``width`` bits, on one thread."""
    return TFC_PEAK_FLOPS_512 if width == 512 else TFC_PEAK_FLOPS_256


def instrument_fma_peak(Py_ssize_t rounds, int width, int num_threads):
    """The compute floor of a float32 conv (asv_benchmarks/impls.py): each of ``num_threads``
    threads runs ``rounds`` rounds of independent vector multiply-add chains (peak.h), AVX-512
    for ``width`` 512, AVX2 with FMA for 256. Returns (float32 operations done, the sum of
    every thread's chains: 2.0 per lane once the chains have settled, after about 30 rounds).
    Preconditions (the caller's): the instrument is built, this CPU runs ``width``'s
    instructions, rounds >= 1, num_threads >= 1."""
    cdef int t
    cdef double total = 0
    TFC_CHECK(TFC_PEAK_BUILT and (width == 512 or width == 256) and rounds >= 1
              and num_threads >= 1)
    with nogil:
        for t in prange(num_threads, schedule='static', num_threads=num_threads):
            total += fma_rounds_512(rounds) if width == 512 else fma_rounds_256(rounds)
    return float(instrument_fma_round_flops(width)) * rounds * num_threads, total
