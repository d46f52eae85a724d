# The col2im strategy (docs/architecture.md#the-conv-strategies): the columns of one image,
# cols[(oy, ox), (ky, kx, ci)] = sum over co of dy[oy, ox, co] * w[ky, kx, ci, co], are one GEMM
# (BLAS, scipy.linalg.cython_blas); dx is their col2im, done as a gather: each dx row (n, iy)
# sums its column entries, listed by the axis tables, in one thread and one fixed order.
#
#   per image (N >= 2): thread t does images t, t + num_threads, ... with single-threaded BLAS
#     inside; each image's columns are computed in bands of ``band`` output rows into a ring of
#     ``cap`` rows just ahead of the dx rows that gather from them, so the columns are read
#     back from cache;
#   one image: one GEMM with BLAS's own threads, then the dx rows in parallel.
# A 1x1, stride-1, unpadded conv (``direct``) is its GEMM alone, written into dx.


cdef struct Col2imArgs:
    # conv_axis_table of each axis
    const int32_t* h_off
    const int32_t* h_out
    const int32_t* h_tap
    const int32_t* w_off
    const int32_t* w_out
    const int32_t* w_tap
    bint direct             # 1x1, stride 1, no padding: the GEMM writes dx itself
    Py_ssize_t band, cap    # the per-image column ring (see above); band = cap = OH: whole


cdef void _col2im_row(const real_acc* cols, real_acc* dst, Py_ssize_t iy, const ConvCore* c,
                      const Col2imArgs* g, Py_ssize_t ring) noexcept nogil:
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
    for gh in range(g.h_off[iy], g.h_off[iy + 1]):
        TFC_CHECK(0 <= g.h_out[gh] < c.OH and 0 <= g.h_tap[gh] < c.fh)
        src = cols + (g.h_out[gh] % ring) * OW * K + g.h_tap[gh] * fw * C
        for ix in range(W):
            d = dst + ix * C
            for gw in range(g.w_off[ix], g.w_off[ix + 1]):
                TFC_CHECK(0 <= g.w_out[gw] < OW and 0 <= g.w_tap[gw] < fw)
                s = src + g.w_out[gw] * K + g.w_tap[gw] * C
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
                                      Py_ssize_t next_oy, Py_ssize_t need, const ConvCore* c,
                                      const Col2imArgs* g) noexcept nogil:
    """Compute one image's column rows next_oy .. need (whole bands of ``band`` output rows,
    one GEMM each) into the ring of ``cap`` rows; returns the first row not computed."""
    cdef Py_ssize_t b, OW = c.OW, OC = c.OC, K = c.fh * c.fw * c.C
    while next_oy <= need:
        b = min(g.band, c.OH - next_oy)
        TFC_CHECK(next_oy % g.band == 0 and next_oy % g.cap + b <= g.cap)
        _gemm_cols(dy + next_oy * OW * OC, w2, ring + (next_oy % g.cap) * OW * K, <int>(b * OW),
                   <int>K, <int>OC)
        next_oy = next_oy + b
    return next_oy


cdef inline Py_ssize_t _last_out_row(const Col2imArgs* g, Py_ssize_t iy) noexcept nogil:
    """The largest output row that dx row iy gathers from (-1: none); the table lists them in
    ascending order."""
    if g.h_off[iy] == g.h_off[iy + 1]:
        return -1
    return g.h_out[g.h_off[iy + 1] - 1]


cdef Py_ssize_t _col2im_image_work(const ConvCore* c, const Col2imArgs* g) noexcept nogil:
    """The values of one worker's scratch for the per-image col2im: the ring of columns; for a
    half type also the image's widened dy before it and a dx row after it."""
    cdef Py_ssize_t ring = (c.OH if g.direct else g.cap) * c.OW * c.fh * c.fw * c.C
    if c.storage == STORE_NATIVE:
        return 0 if g.direct else ring
    return c.OH * c.OW * c.OC + ring + c.W * c.C


cdef void _conv_image(const void* dy, const real_acc* w2, real_acc* work, void* dx,
                      Py_ssize_t n, const ConvCore* c, const Col2imArgs* g) noexcept nogil:
    """Image n, single-threaded, in ``work`` (_col2im_image_work's values)."""
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
            rowbuf = ring + (c.OH if g.direct else g.cap) * c.OW * K
    if g.direct:
        if rowbuf == NULL:
            _gemm_cols(dyf, w2, <real_acc*>dx + n * M * K, <int>M, <int>K, <int>c.OC)
        elif real_acc is float:
            _gemm_cols(dyf, w2, ring, <int>M, <int>K, <int>c.OC)
            from_f32(ring, <uint16_t*>dx + n * M * K, M * K, bf)
        return
    for iy in range(c.H):
        next_oy = _columns_up_to(dyf, w2, ring, next_oy, _last_out_row(g, iy), c, g)
        if rowbuf == NULL:
            _col2im_row(ring, <real_acc*>dx + (n * c.H + iy) * row, iy, c, g, g.cap)
        elif real_acc is float:
            _col2im_row(ring, rowbuf, iy, c, g, g.cap)
            from_f32(rowbuf, <uint16_t*>dx + (n * c.H + iy) * row, row, bf)


cdef struct Col2imJob:
    const void* dy
    const void* w2
    void* work
    void* dx
    const ConvCore* c
    const Col2imArgs* g
    void* cols                  # the one-image col2im: its columns


cdef void _images_share(void* ctx, int t, int n) noexcept nogil:
    """Share t of n: images t, t + n, ...; every image is computed the same way whichever share
    runs it."""
    cdef Col2imJob* j = <Col2imJob*>ctx
    cdef const ConvCore* c = j.c
    cdef Py_ssize_t i = t
    while i < c.N:
        if c.value_size == 8:
            _conv_image(j.dy, <const double*>j.w2, <double*>j.work + t * c.work_per_thread, j.dx,
                        i, c, j.g)
        else:
            _conv_image(j.dy, <const float*>j.w2, <float*>j.work + t * c.work_per_thread, j.dx,
                        i, c, j.g)
        i = i + n


cdef void _col2im_images(const void* dy, const void* w2, void* work, void* dx,
                         const ConvCore* c, const Col2imArgs* g, int num_threads) noexcept nogil:
    cdef Col2imJob j
    j.dy, j.w2, j.work, j.dx, j.c, j.g = dy, w2, work, dx, c, g
    tfc_parallel(_images_share, &j, num_threads)


cdef void _one_rows(const real_acc* cols, real_acc* mine, void* dx, Py_ssize_t iy,
                    const ConvCore* c, const Col2imArgs* g) noexcept nogil:
    """dx row iy of the one-image col2im (``mine``: a float32 row, for a half type)."""
    cdef Py_ssize_t row = c.W * c.C
    if c.storage != STORE_NATIVE:
        if real_acc is float:
            _col2im_row(cols, mine, iy, c, g, c.OH)
            from_f32(mine, <uint16_t*>dx + iy * row, row, c.storage == STORE_BFLOAT16)
    else:
        _col2im_row(cols, <real_acc*>dx + iy * row, iy, c, g, c.OH)


cdef void _one_share(void* ctx, int t, int n) noexcept nogil:
    """Share t of n of the one-image col2im's dx rows (row buffer t: a half type's)."""
    cdef Col2imJob* j = <Col2imJob*>ctx
    cdef const ConvCore* c = j.c
    cdef Py_ssize_t iy, M = c.OH * c.OW, K = c.fh * c.fw * c.C
    for iy in range(_lo(c.H, t, n), _lo(c.H, t + 1, n)):
        if c.value_size == 8:
            _one_rows(<const double*>j.cols, <double*>NULL, j.dx, iy, c, j.g)
        else:
            _one_rows(<const float*>j.cols, <float*>j.cols + M * K + t * c.W * c.C, j.dx, iy, c,
                      j.g)


cdef Py_ssize_t _col2im_one_work(const ConvCore* c, const Col2imArgs* g,
                                 Py_ssize_t num_threads) noexcept nogil:
    """The values of the one-image col2im's scratch: [widened dy (half types)] [cols: M * K]
    [a dx row per thread (half types)]."""
    cdef Py_ssize_t M = c.OH * c.OW, K = c.fh * c.fw * c.C
    cdef bint half = c.storage != STORE_NATIVE
    if g.direct and not half:
        return 0
    return (M * c.OC if half else 0) + M * K + (num_threads * c.W * c.C if half else 0)


cdef void _col2im_one(const void* dy, const real_acc* w2, real_acc* work, void* dx,
                      const ConvCore* c, const Col2imArgs* g, int num_threads) noexcept nogil:
    """One image: its GEMM on BLAS's own threads, then its dx rows in parallel; work:
    _col2im_one_work's values."""
    cdef Py_ssize_t M = c.OH * c.OW, K = c.fh * c.fw * c.C
    cdef bint half = c.storage != STORE_NATIVE
    cdef bint bf = c.storage == STORE_BFLOAT16
    cdef const real_acc* dyf = <const real_acc*>dy
    cdef real_acc* cols = work
    TFC_CHECK(c.N == 1)
    if real_acc is float:
        if half:
            _convert(dy, work, M * c.OC, bf, True, num_threads)
            dyf = work
            cols = work + M * c.OC
    if g.direct and not half:
        _gemm_cols(dyf, w2, <real_acc*>dx, <int>M, <int>K, <int>c.OC)
        return
    _gemm_cols(dyf, w2, cols, <int>M, <int>K, <int>c.OC)
    if g.direct:
        if real_acc is float:
            _convert(cols, dx, M * K, bf, False, num_threads)
        return
    cdef Col2imJob j
    j.dx, j.c, j.g, j.cols = dx, c, g, cols
    tfc_parallel(_one_share, &j, num_threads)
