# Conv2DBackpropInput (docs/semantics.md): dx = col2im(dy @ w^T), NHWC.
#
# The columns of one image, cols[(oy, ox), (ky, kx, ci)] = sum over co of dy[oy, ox, co] *
# w[ky, kx, ci, co], are one GEMM (BLAS, scipy.linalg.cython_blas); dx is their col2im, done as
# a gather: each dx row (n, iy) sums its column entries, listed by the axis tables, in one
# thread and one fixed order, so the result does not depend on the thread count.
#
# Two strategies, chosen by the Python layer from the batch alone:
#   per image (N >= 2): thread t does images t, t + num_threads, ... with single-threaded BLAS
#     inside; each image's columns are computed in bands of ``band`` output rows into a ring of
#     ``cap`` rows just ahead of the dx rows that gather from them, so the columns are read
#     back from cache;
#   one image (N == 1): one GEMM with BLAS's own threads, then the dx rows in parallel.
# float16/bfloat16 are computed in float32 and rounded once: the dy of an image is widened
# into scratch, and each dx row is rounded as it is finished, so no float32 copy of the whole
# dy or dx exists.

cdef enum:
    STORE_NATIVE = 0        # dy and dx hold the compute type
    STORE_FLOAT16 = 1       # dy and dx hold float16 bits; compute in float32
    STORE_BFLOAT16 = 2      # dy and dx hold bfloat16 bits; compute in float32


def conv_axis_table(Py_ssize_t in_size, Py_ssize_t out_size, Py_ssize_t ksize,
                    Py_ssize_t stride, Py_ssize_t dilation, Py_ssize_t pad_before):
    """For every input index i, the (output index o, tap k) pairs with
    ``o * stride - pad_before + k * dilation == i`` (CSR, ascending o)."""
    cdef Py_ssize_t o, k, i, g
    offsets_a = np.zeros(in_size + 1, dtype=np.int32)
    cdef int32_t[::1] offsets = offsets_a
    for o in range(out_size):
        for k in range(ksize):
            i = o * stride - pad_before + k * dilation
            if 0 <= i < in_size:
                offsets[i + 1] += 1
    for i in range(in_size):
        offsets[i + 1] += offsets[i]
    n = offsets[in_size]
    out_a = np.empty(n, dtype=np.int32)
    tap_a = np.empty(n, dtype=np.int32)
    cdef int32_t[::1] out_idx = out_a, tap = tap_a
    cursor_a = offsets_a[:-1].copy()
    cdef int32_t[::1] cursor = cursor_a
    for o in range(out_size):
        for k in range(ksize):
            i = o * stride - pad_before + k * dilation
            if 0 <= i < in_size:
                g = cursor[i]
                cursor[i] += 1
                out_idx[g] = <int32_t>o
                tap[g] = <int32_t>k
    return offsets_a, out_a, tap_a


cdef struct ConvArgs:
    Py_ssize_t N, H, W, C, OH, OW, OC, fh, fw
    # conv_axis_table of each axis
    const int32_t* h_off
    const int32_t* h_out
    const int32_t* h_tap
    const int32_t* w_off
    const int32_t* w_out
    const int32_t* w_tap
    bint per_image
    bint direct             # 1x1, stride 1, no padding: the GEMM writes dx itself
    Py_ssize_t band, cap    # the per-image column ring (see above); band = cap = OH: whole
    int storage
    Py_ssize_t work_per_thread


cdef void _col2im_row(const real_acc* cols, real_acc* dst, Py_ssize_t iy, const ConvArgs* c,
                      Py_ssize_t ring) noexcept nogil:
    """dst = dx row iy of one image: W * C values, each the sum of its column entries, in
    ascending (oy, ox) order. Column row oy of that image is at ``cols + (oy % ring) * OW * K``:
    ``ring`` is the number of output rows ``cols`` holds (all of them, or a ring of the most
    recent ones)."""
    cdef Py_ssize_t W = c.W, C = c.C, OW = c.OW, fw = c.fw
    cdef Py_ssize_t K = c.fh * fw * C
    cdef Py_ssize_t gh, ix, gw, ch
    cdef real_acc* d
    cdef const real_acc* src
    cdef const real_acc* s
    memset(dst, 0, W * C * sizeof(real_acc))
    for gh in range(c.h_off[iy], c.h_off[iy + 1]):
        TFC_CHECK(0 <= c.h_out[gh] < c.OH and 0 <= c.h_tap[gh] < c.fh)
        src = cols + (c.h_out[gh] % ring) * OW * K + c.h_tap[gh] * fw * C
        for ix in range(W):
            d = dst + ix * C
            for gw in range(c.w_off[ix], c.w_off[ix + 1]):
                TFC_CHECK(0 <= c.w_out[gw] < OW and 0 <= c.w_tap[gw] < fw)
                s = src + c.w_out[gw] * K + c.w_tap[gw] * C
                for ch in range(C):
                    d[ch] += s[ch]


cdef inline void _gemm_cols(const real_acc* dy, const real_acc* w2, real_acc* cols, int M, int K,
                            int OC) noexcept nogil:
    """cols[M, K] = dy[M, OC] @ w2[K, OC]^T, all row-major (BLAS sees the transposes)."""
    cdef char ta = b'T'
    cdef char tb = b'N'
    cdef real_acc one = 1
    cdef real_acc zero = 0
    if real_acc is float:
        sgemm(&ta, &tb, &K, &M, &OC, &one, <float*>w2, &OC, <float*>dy, &OC, &zero, cols, &K)
    else:
        dgemm(&ta, &tb, &K, &M, &OC, &one, <double*>w2, &OC, <double*>dy, &OC, &zero, cols, &K)


cdef inline Py_ssize_t _columns_up_to(const real_acc* dy, const real_acc* w2, real_acc* ring,
                                      Py_ssize_t next_oy, Py_ssize_t need,
                                      const ConvArgs* c) noexcept nogil:
    """Compute one image's column rows next_oy .. need (whole bands of ``band`` output rows,
    one GEMM each) into the ring of ``cap`` rows; returns the first row not computed."""
    cdef Py_ssize_t b, OW = c.OW, OC = c.OC, K = c.fh * c.fw * c.C
    while next_oy <= need:
        b = min(c.band, c.OH - next_oy)
        TFC_CHECK(next_oy % c.band == 0 and next_oy % c.cap + b <= c.cap)
        _gemm_cols(dy + next_oy * OW * OC, w2, ring + (next_oy % c.cap) * OW * K, <int>(b * OW),
                   <int>K, <int>OC)
        next_oy = next_oy + b
    return next_oy


cdef inline Py_ssize_t _last_out_row(const ConvArgs* c, Py_ssize_t iy) noexcept nogil:
    """The largest output row that dx row iy gathers from (-1: none); the table lists them in
    ascending order."""
    if c.h_off[iy] == c.h_off[iy + 1]:
        return -1
    return c.h_out[c.h_off[iy + 1] - 1]


cdef void _conv_image(const void* dy, const real_acc* w2, real_acc* work, void* dx,
                      Py_ssize_t n, const ConvArgs* c) noexcept nogil:
    """Image n, single-threaded, in ``work`` (c.work_per_thread values)."""
    cdef Py_ssize_t M = c.OH * c.OW, K = c.fh * c.fw * c.C, row = c.W * c.C, iy, next_oy = 0
    cdef const real_acc* dyf
    cdef real_acc* ring
    cdef real_acc* rowbuf = NULL
    cdef bint bf = c.storage == STORE_BFLOAT16
    dyf = <const real_acc*>dy + n * M * c.OC
    ring = work
    if real_acc is float:
        if c.storage != STORE_NATIVE:
            dyf = work
            to_f32(<const uint16_t*>dy + n * M * c.OC, work, M * c.OC, bf)
            ring = work + M * c.OC
            rowbuf = ring + (c.OH if c.direct else c.cap) * c.OW * K
    if c.direct:
        if rowbuf == NULL:
            _gemm_cols(dyf, w2, <real_acc*>dx + n * M * K, <int>M, <int>K, <int>c.OC)
        elif real_acc is float:
            _gemm_cols(dyf, w2, ring, <int>M, <int>K, <int>c.OC)
            from_f32(ring, <uint16_t*>dx + n * M * K, M * K, bf)
        return
    for iy in range(c.H):
        next_oy = _columns_up_to(dyf, w2, ring, next_oy, _last_out_row(c, iy), c)
        if rowbuf == NULL:
            _col2im_row(ring, <real_acc*>dx + (n * c.H + iy) * row, iy, c, c.cap)
        elif real_acc is float:
            _col2im_row(ring, rowbuf, iy, c, c.cap)
            from_f32(rowbuf, <uint16_t*>dx + (n * c.H + iy) * row, row, bf)


cdef void _conv_run(const void* dy, const real_acc* w2, real_acc* work, void* dx,
                    const ConvArgs* c, int num_threads) noexcept nogil:
    cdef Py_ssize_t t, n, iy, M = c.OH * c.OW, K = c.fh * c.fw * c.C, row = c.W * c.C
    cdef bint half = c.storage != STORE_NATIVE
    cdef bint bf = c.storage == STORE_BFLOAT16
    cdef const real_acc* dyf
    cdef real_acc* cols
    cdef real_acc* mine
    if c.per_image:
        # thread t: images t, t + num_threads, ...; every image is computed the same way
        # whichever thread runs it
        for t in prange(num_threads, schedule='static', num_threads=num_threads):
            n = t
            while n < c.N:
                _conv_image(dy, w2, work + t * c.work_per_thread, dx, n, c)
                n = n + num_threads
        return
    # one image: work holds [widened dy (half types)] [cols: M * K] [a dx row per thread]
    TFC_CHECK(c.N == 1)
    dyf = <const real_acc*>dy
    cols = work
    if real_acc is float:
        if half:
            _convert(dy, work, M * c.OC, bf, True, num_threads)
            dyf = work
            cols = work + M * c.OC
    if c.direct and not half:
        _gemm_cols(dyf, w2, <real_acc*>dx, <int>M, <int>K, <int>c.OC)
        return
    _gemm_cols(dyf, w2, cols, <int>M, <int>K, <int>c.OC)
    if c.direct:
        if real_acc is float:
            _convert(cols, dx, M * K, bf, False, num_threads)
        return
    with parallel(num_threads=num_threads):
        mine = cols + M * K + threadid() * row
        for iy in prange(c.H, schedule='static'):
            if half:
                if real_acc is float:
                    _col2im_row(cols, mine, iy, c, c.OH)
                    from_f32(mine, <uint16_t*>dx + iy * row, row, bf)
            else:
                _col2im_row(cols, <real_acc*>dx + iy * row, iy, c, c.OH)


cdef class ConvPlan:
    """One Conv2DBackpropInput call's geometry, tables and strategy (see above); built by
    tfcompat/backends/cython_backend.py, which has proven every precondition."""
    cdef ConvArgs args
    cdef readonly object tables
    cdef readonly bint float64

    def __cinit__(self, sizes, h_table, w_table, bint per_image, bint direct, Py_ssize_t band,
                  Py_ssize_t cap, int storage, bint float64):
        c = &self.args
        (c.N, c.H, c.W, c.C, c.OH, c.OW, c.OC, c.fh, c.fw) = sizes
        self.tables = (h_table, w_table)
        c.h_off = <const int32_t*>_data(h_table[0])
        c.h_out = <const int32_t*>_data(h_table[1])
        c.h_tap = <const int32_t*>_data(h_table[2])
        c.w_off = <const int32_t*>_data(w_table[0])
        c.w_out = <const int32_t*>_data(w_table[1])
        c.w_tap = <const int32_t*>_data(w_table[2])
        c.per_image, c.direct, c.band, c.cap, c.storage = per_image, direct, band, cap, storage
        self.float64 = float64
        cdef Py_ssize_t M = c.OH * c.OW, K = c.fh * c.fw * c.C
        if per_image:
            c.work_per_thread = (0 if c.direct else c.cap * c.OW * K)
            if storage != STORE_NATIVE:
                c.work_per_thread = M * c.OC + (c.OH if c.direct else c.cap) * c.OW * K + c.W * c.C
        else:
            c.work_per_thread = 0

    def workspace(self, int num_threads):
        """Values of the compute type that ``run`` needs as scratch with that many threads."""
        c = &self.args
        cdef Py_ssize_t M = c.OH * c.OW, K = c.fh * c.fw * c.C
        if c.per_image:
            return c.work_per_thread * num_threads
        half = c.storage != STORE_NATIVE
        if c.direct and not half:
            return 0
        return (M * c.OC if half else 0) + M * K + (num_threads * c.W * c.C if half else 0)

    def run(self, cnp.ndarray dy, cnp.ndarray w2, cnp.ndarray dx, int num_threads,
            cnp.ndarray work=None):
        """dx (NHWC, C-contiguous) from dy (NHWC, C-contiguous) and w2 ([fh * fw * C, OC] of
        the compute type); work: ``workspace(num_threads)`` values, or None when that is 0."""
        cdef const void* s = cnp.PyArray_DATA(dy)
        cdef void* d = cnp.PyArray_DATA(dx)
        cdef const void* w = cnp.PyArray_DATA(w2)
        cdef void* scratch = NULL if work is None else cnp.PyArray_DATA(work)
        cdef ConvArgs* c = &self.args
        TFC_CHECK(cnp.PyArray_SIZE(dy) == c.N * c.OH * c.OW * c.OC
                  and cnp.PyArray_SIZE(dx) == c.N * c.H * c.W * c.C
                  and cnp.PyArray_SIZE(w2) == c.fh * c.fw * c.C * c.OC)
        with nogil:
            if self.float64:
                _conv_run(s, <const double*>w, <double*>scratch, d, c, num_threads)
            else:
                _conv_run(s, <const float*>w, <float*>scratch, d, c, num_threads)
