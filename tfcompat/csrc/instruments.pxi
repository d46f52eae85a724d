# Instruments: not kernels. What asv_benchmarks times beside the kernels (stream.h, peak.h).

cdef extern from "stream.h":
    void stream_chunk "tfc_stream_chunk"(const float* s, Py_ssize_t ns, float* d,
                                          Py_ssize_t nd) noexcept nogil


cdef struct StreamJob:
    const float* ps
    float* pd
    Py_ssize_t ns, nd, chunks


cdef void _stream_share(void* ctx, int s, int n) noexcept nogil:
    cdef StreamJob* j = <StreamJob*>ctx
    cdef Py_ssize_t k, ns = j.ns, nd = j.nd, chunks = j.chunks
    for k in range(_lo(chunks, s, n), _lo(chunks, s + 1, n)):
        stream_chunk(j.ps + k * ns // chunks, (k + 1) * ns // chunks - k * ns // chunks,
                     j.pd + k * nd // chunks, (k + 1) * nd // chunks - k * nd // chunks)


def instrument_stream_floor(cnp.ndarray src, cnp.ndarray dst, Py_ssize_t chunks,
                            int num_threads):
    """The floor of a resize workload (asv_benchmarks/impls.py): reads every float of ``src``
    once and writes every float of ``dst`` once, in ``chunks`` matching pieces split
    statically over ``num_threads`` threads (chunk k of each array: [k*n/chunks,
    (k+1)*n/chunks); every float of destination chunk k gets the bitwise OR of the bits of
    source chunk k). A resampling backward must at least read |dy| and write |dx|; this does
    only that, with the same threads. Preconditions (the caller's): both float32 and
    C-contiguous, 1 <= chunks <= min(len(src), len(dst))."""
    cdef StreamJob j
    j.ns, j.nd, j.chunks = cnp.PyArray_SIZE(src), cnp.PyArray_SIZE(dst), chunks
    j.ps = <const float*>cnp.PyArray_DATA(src)
    j.pd = <float*>cnp.PyArray_DATA(dst)
    TFC_CHECK(1 <= chunks and chunks <= j.ns and chunks <= j.nd)
    with nogil:
        tfc_parallel(_stream_share, &j, <int>min(<Py_ssize_t>num_threads, chunks))


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


cdef struct PeakJob:
    Py_ssize_t rounds
    int width
    double* sums            # one per share


cdef void _peak_share(void* ctx, int s, int n) noexcept nogil:
    cdef PeakJob* j = <PeakJob*>ctx
    j.sums[s] = fma_rounds_512(j.rounds) if j.width == 512 else fma_rounds_256(j.rounds)


def instrument_fma_peak(Py_ssize_t rounds, int width, int num_threads):
    """The compute floor of a float32 conv (asv_benchmarks/impls.py): each of ``num_threads``
    threads runs ``rounds`` rounds of independent vector multiply-add chains (peak.h), AVX-512
    for ``width`` 512, AVX2 with FMA for 256. Returns (float32 operations done, the sum of
    every thread's chains: 2.0 per lane once the chains have settled, after about 30 rounds).
    Preconditions (the caller's): the instrument is built, this CPU runs ``width``'s
    instructions, rounds >= 1, num_threads >= 1."""
    TFC_CHECK(TFC_PEAK_BUILT and (width == 512 or width == 256) and rounds >= 1
              and num_threads >= 1)
    sums = np.zeros(num_threads)
    cdef PeakJob j
    j.rounds, j.width, j.sums = rounds, width, <double*>cnp.PyArray_DATA(sums)
    with nogil:
        tfc_parallel(_peak_share, &j, num_threads)
    cdef double total = sums.sum()
    return float(instrument_fma_round_flops(width)) * rounds * num_threads, total
