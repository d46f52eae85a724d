# float16 / bfloat16 storage <-> float32 compute (half.h).

cdef extern from "half.h":
    void to_f32 "tfc_to_f32"(const uint16_t* s, float* d, Py_ssize_t n, int bf) noexcept nogil
    void from_f32 "tfc_from_f32"(const float* s, uint16_t* d, Py_ssize_t n,
                                 int bf) noexcept nogil

cdef enum:
    CONVERT_CHUNK = 16384   # elements per parallel chunk


cdef struct ConvertJob:
    const void* src
    void* dst
    Py_ssize_t n
    bint bfloat16
    bint widen


cdef void _convert_share(void* ctx, int s, int nshares) noexcept nogil:
    cdef ConvertJob* j = <ConvertJob*>ctx
    cdef Py_ssize_t k, lo, nchunks = (j.n + CONVERT_CHUNK - 1) // CONVERT_CHUNK
    for k in range(_lo(nchunks, s, nshares), _lo(nchunks, s + 1, nshares)):
        lo = k * CONVERT_CHUNK
        if j.widen:
            to_f32(<const uint16_t*>j.src + lo, <float*>j.dst + lo,
                   min(<Py_ssize_t>CONVERT_CHUNK, j.n - lo), j.bfloat16)
        else:
            from_f32(<const float*>j.src + lo, <uint16_t*>j.dst + lo,
                     min(<Py_ssize_t>CONVERT_CHUNK, j.n - lo), j.bfloat16)


cdef void _convert(const void* src, void* dst, Py_ssize_t n, bint bfloat16, bint widen,
                   int num_threads) noexcept nogil:
    """Chunks of CONVERT_CHUNK elements in parallel: widen uint16 bits to float32, or round
    float32 to uint16 bits."""
    cdef ConvertJob j
    j.src = src
    j.dst = dst
    j.n = n
    j.bfloat16 = bfloat16
    j.widen = widen
    tfc_parallel(_convert_share, &j, <int>min(<Py_ssize_t>num_threads,
                                               (n + CONVERT_CHUNK - 1) // CONVERT_CHUNK))


def to_float32(cnp.ndarray src, cnp.ndarray dst, bint bfloat16, int num_threads):
    """dst = src (float16 or bfloat16 bits) as float32, exactly; in parallel. Both arrays are
    C-contiguous with the same number of elements (the caller's precondition)."""
    cdef Py_ssize_t n = cnp.PyArray_SIZE(src)
    cdef const void* s = cnp.PyArray_DATA(src)
    cdef void* d = cnp.PyArray_DATA(dst)
    TFC_CHECK(cnp.PyArray_SIZE(dst) == n and cnp.PyArray_ITEMSIZE(src) == 2
              and cnp.PyArray_ITEMSIZE(dst) == 4)
    with nogil:
        _convert(s, d, n, bfloat16, True, num_threads)


def from_float32(cnp.ndarray src, cnp.ndarray dst, bint bfloat16, int num_threads):
    """dst = src rounded to float16 or bfloat16 (nearest even; NaN stays NaN); in parallel.
    Both arrays are C-contiguous with the same number of elements (the caller's precondition)."""
    cdef Py_ssize_t n = cnp.PyArray_SIZE(src)
    cdef const void* s = cnp.PyArray_DATA(src)
    cdef void* d = cnp.PyArray_DATA(dst)
    TFC_CHECK(cnp.PyArray_SIZE(dst) == n and cnp.PyArray_ITEMSIZE(src) == 4
              and cnp.PyArray_ITEMSIZE(dst) == 2)
    with nogil:
        _convert(s, d, n, bfloat16, False, num_threads)
