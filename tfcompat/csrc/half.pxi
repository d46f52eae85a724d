# float16 / bfloat16 storage <-> float32 compute (half.h).

cdef extern from "half.h":
    void to_f32 "tfc_to_f32"(const uint16_t* s, float* d, Py_ssize_t n, int bf) noexcept nogil
    void from_f32 "tfc_from_f32"(const float* s, uint16_t* d, Py_ssize_t n,
                                 int bf) noexcept nogil

cdef enum:
    CONVERT_CHUNK = 16384   # elements per parallel chunk


cdef void _convert(const void* src, void* dst, Py_ssize_t n, bint bfloat16, bint widen,
                   int num_threads) noexcept nogil:
    """Chunks of CONVERT_CHUNK elements in parallel: widen uint16 bits to float32, or round
    float32 to uint16 bits."""
    cdef Py_ssize_t k, lo, nchunks = (n + CONVERT_CHUNK - 1) // CONVERT_CHUNK
    for k in prange(nchunks, schedule='static', num_threads=num_threads):
        lo = k * CONVERT_CHUNK
        if widen:
            to_f32(<const uint16_t*>src + lo, <float*>dst + lo, min(<Py_ssize_t>CONVERT_CHUNK, n - lo),
                   bfloat16)
        else:
            from_f32(<const float*>src + lo, <uint16_t*>dst + lo,
                     min(<Py_ssize_t>CONVERT_CHUNK, n - lo), bfloat16)


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
