# The forward resizes of TF's CPU kernels (docs/semantics.md §12): ResizeBilinear and
# ResizeNearestNeighbor, NHWC. One output row (a batch and an output y) per unit of work.
#
# Bilinear: every value is read as float32 (TF's `const float top_left(ptr[i])`: a float64,
# integer or half-type input is converted first), then
#     top = tl + (tr - tl) * x_lerp;  bottom = bl + (br - bl) * x_lerp;
#     out = top + (bottom - top) * y_lerp
# in float32, TF's compute_lerp, with no fused multiply-add (-ffp-contract=off). The row's two
# horizontal lerps are per input row, so each is computed once per input row a thread meets and
# reused by the output rows that share it: the same operations on the same values, the same
# bits, on any number of threads.
# As an extension (the PyTorch front's float64), a float64 image can be resized in float64:
# the same formula and float32 lerps, every value and operation float64.
# Nearest: a copy of each output pixel's channels from its source pixel, any item size.

cdef extern from "lerp.h":
    void tfc_lerp_row_stream(const float* t, const float* b, float w, float* o,
                             Py_ssize_t n) noexcept nogil

# a float32 bilinear output of this many bytes or more (more than a large L3 holds) is written
# by streaming stores; below it the plain stores' lines stay in the cache for whoever reads the
# output next (docs/performance.md#the-forward-resizes)
cdef Py_ssize_t FWD_STREAM_BYTES = 32 << 20

# a downscale's rows are made in one pass from pixels of this many channels up; narrower ones
# go row by row, whose long final loop vectorizes better (docs/performance.md)
cdef Py_ssize_t FWD_ONE_PASS_MIN_C = 32


ctypedef fused fwd_src:
    float
    double
    signed char
    unsigned char
    short
    unsigned short
    int
    long long

# the type a bilinear resize computes and writes in: float32 (TF's), or float64 (the extension)
ctypedef fused fwd_acc:
    float
    double


cdef inline void _lerp_row(const fwd_src* row, const int32_t* x_lo, const int32_t* x_hi,
                           const float* x_lerp, Py_ssize_t OW, Py_ssize_t C,
                           fwd_acc* out) noexcept nogil:
    """out[x, c] = tl + (tr - tl) * x_lerp[x], tl and tr that row's pixels x_lo[x], x_hi[x]."""
    cdef Py_ssize_t x, c
    cdef const fwd_src* a
    cdef const fwd_src* b
    cdef fwd_acc l, tl
    if C == 1:   # (a PyTorch NCHW image: one channel per row of the kernel's view)
        for x in range(OW):
            tl = <fwd_acc>row[x_lo[x]]
            out[x] = tl + (<fwd_acc>row[x_hi[x]] - tl) * <fwd_acc>x_lerp[x]
        return
    for x in range(OW):
        a = row + x_lo[x] * C
        b = row + x_hi[x] * C
        l = x_lerp[x]
        for c in range(C):
            tl = <fwd_acc>a[c]
            out[x * C + c] = tl + (<fwd_acc>b[c] - tl) * l


cdef inline void _bilinear_row(const fwd_src* row_a, const fwd_src* row_b, const int32_t* x_lo,
                               const int32_t* x_hi, const float* x_lerp, Py_ssize_t OW,
                               Py_ssize_t C, fwd_acc yl, fwd_acc* out) noexcept nogil:
    """One output row straight from its two input rows, the lerped values never stored: the
    same operations as _lerp_row's top and bottom and the row's final lerp, so the same bits.
    For a row whose input rows no other row of the share reads (a downscale), C >= 32."""
    cdef Py_ssize_t x, c
    cdef const fwd_src* a0
    cdef const fwd_src* a1
    cdef const fwd_src* b0
    cdef const fwd_src* b1
    cdef fwd_acc l, ta, tb, t, u
    for x in range(OW):
        a0 = row_a + x_lo[x] * C
        a1 = row_a + x_hi[x] * C
        b0 = row_b + x_lo[x] * C
        b1 = row_b + x_hi[x] * C
        l = x_lerp[x]
        for c in range(C):
            ta = <fwd_acc>a0[c]
            tb = <fwd_acc>b0[c]
            t = ta + (<fwd_acc>a1[c] - ta) * l
            u = tb + (<fwd_acc>b1[c] - tb) * l
            out[x * C + c] = t + (u - t) * yl


cdef void _bilinear_span(const fwd_src* src, fwd_acc* dst, Py_ssize_t r0, Py_ssize_t r1,
                         Py_ssize_t IH, Py_ssize_t IW, Py_ssize_t OH, Py_ssize_t OW,
                         Py_ssize_t C, const int32_t* y_lo, const int32_t* y_hi,
                         const float* y_lerp, const int32_t* x_lo, const int32_t* x_hi,
                         const float* x_lerp, fwd_acc* top, fwd_acc* bot,
                         bint stream) noexcept nogil:
    """Output rows r0 .. r1 - 1 (r = b * OH + y); ``top`` and ``bot``: OW * C values each, the
    two lerped input rows held."""
    cdef Py_ssize_t r, b, y, k, n = OW * C, row_lo, row_hi, have_top = -1, have_bot = -1, tmp
    cdef fwd_acc* o
    cdef fwd_acc* swap
    cdef fwd_acc yl
    for r in range(r0, r1):
        b = r // OH
        y = r - b * OH
        row_lo = b * IH + y_lo[y]
        row_hi = b * IH + y_hi[y]
        # neither input row held, and the next output row reads neither (a downscale): the
        # output row in one pass, its lerped rows not stored, where pixels are wide enough for
        # the inner loop (docs/performance.md#the-forward-resizes); a streamed output keeps the
        # row path (tfc_lerp_row_stream)
        if (not stream and C >= FWD_ONE_PASS_MIN_C and row_lo != have_top
                and row_lo != have_bot and row_hi != have_top and row_hi != have_bot
                and (r + 1 >= r1 or y + 1 >= OH
                     or (y_lo[y + 1] != y_lo[y] and y_lo[y + 1] != y_hi[y]
                         and y_hi[y + 1] != y_lo[y] and y_hi[y + 1] != y_hi[y]))):
            _bilinear_row(src + row_lo * IW * C, src + row_hi * IW * C, x_lo, x_hi, x_lerp, OW,
                          C, <fwd_acc>y_lerp[y], dst + r * n)
            continue
        # a row lerped for the previous output row is reused: as it was (upscaling repeats
        # rows) or moved from bottom to top (the next pair starts where the last ended)
        if row_lo != have_top:
            if row_lo == have_bot:
                swap = top
                top = bot
                bot = swap
                tmp = have_top
                have_top = have_bot
                have_bot = tmp
            else:
                _lerp_row(src + row_lo * IW * C, x_lo, x_hi, x_lerp, OW, C, top)
                have_top = row_lo
        if row_hi != have_bot:
            if row_hi == have_top:
                memcpy(bot, top, n * sizeof(fwd_acc))
            else:
                _lerp_row(src + row_hi * IW * C, x_lo, x_hi, x_lerp, OW, C, bot)
            have_bot = row_hi
        o = dst + r * n
        yl = y_lerp[y]
        if fwd_acc is float:
            if stream:
                tfc_lerp_row_stream(top, bot, yl, o, n)
                continue
        for k in range(n):
            o[k] = top[k] + (bot[k] - top[k]) * yl


ctypedef fused pixel_t:
    uint8_t
    uint16_t
    uint32_t
    uint64_t


cdef void _nearest_typed(const pixel_t* src, pixel_t* dst, Py_ssize_t r0, Py_ssize_t r1,
                         Py_ssize_t IH, Py_ssize_t IW, Py_ssize_t OH, Py_ssize_t OW,
                         const int32_t* y_idx, const int32_t* x_idx) noexcept nogil:
    """_nearest_rows for a pixel of one 1-, 2-, 4- or 8-byte value: a typed gather, not a
    memcpy call per pixel (a PyTorch NCHW image is one value per pixel of the kernel's view)."""
    cdef Py_ssize_t r, b, y, x
    cdef const pixel_t* row
    cdef pixel_t* o
    for r in range(r0, r1):
        b = r // OH
        y = r - b * OH
        row = src + (b * IH + y_idx[y]) * IW
        o = dst + r * OW
        for x in range(OW):
            o[x] = row[x_idx[x]]


cdef void _nearest_rows(const char* src, char* dst, Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t IH,
                        Py_ssize_t IW, Py_ssize_t OH, Py_ssize_t OW, Py_ssize_t pixel,
                        const int32_t* y_idx, const int32_t* x_idx) noexcept nogil:
    """Output rows r0 .. r1 - 1 of ``pixel``-byte pixels: each src [b, y_idx[y], x_idx[x]]."""
    cdef Py_ssize_t r, b, y, x
    cdef const char* row
    cdef char* o
    for r in range(r0, r1):
        b = r // OH
        y = r - b * OH
        row = src + (b * IH + y_idx[y]) * IW * pixel
        o = dst + r * OW * pixel
        for x in range(OW):
            memcpy(o + x * pixel, row + x_idx[x] * pixel, pixel)


cdef struct FwdJob:
    const void* src
    void* dst
    void* work              # bilinear: 2 * OW * C values of dst's type per share
    bint linear, wide       # wide: a float64 image resized in float64
    bint stream             # a float32 output of FWD_STREAM_BYTES or more: streaming stores
    int num                 # the NumPy type number of src (bilinear)
    Py_ssize_t B, IH, IW, OH, OW, C, pixel
    const int32_t* yl
    const int32_t* yh
    const float* ly
    const int32_t* xl
    const int32_t* xh
    const float* lx


cdef void _fwd_share(void* ctx, int s, int n) noexcept nogil:
    """Share s of n of the output rows (B * OH of them, consecutive)."""
    cdef FwdJob* j = <FwdJob*>ctx
    cdef Py_ssize_t r0 = _lo(j.B * j.OH, s, n), r1 = _lo(j.B * j.OH, s + 1, n)
    cdef Py_ssize_t IH = j.IH, IW = j.IW, OH = j.OH, OW = j.OW, C = j.C, row = OW * C
    cdef const void* src = j.src
    cdef float* f = <float*>j.dst
    cdef float* t = <float*>j.work + 2 * row * s
    cdef float* u = t + row
    cdef int num = j.num
    if not j.linear:
        if j.pixel == 1:
            _nearest_typed(<const uint8_t*>src, <uint8_t*>j.dst, r0, r1, IH, IW, OH, OW, j.yl,
                           j.xl)
        elif j.pixel == 2:
            _nearest_typed(<const uint16_t*>src, <uint16_t*>j.dst, r0, r1, IH, IW, OH, OW, j.yl,
                           j.xl)
        elif j.pixel == 4:
            _nearest_typed(<const uint32_t*>src, <uint32_t*>j.dst, r0, r1, IH, IW, OH, OW, j.yl,
                           j.xl)
        elif j.pixel == 8:
            _nearest_typed(<const uint64_t*>src, <uint64_t*>j.dst, r0, r1, IH, IW, OH, OW, j.yl,
                           j.xl)
        else:
            _nearest_rows(<const char*>src, <char*>j.dst, r0, r1, IH, IW, OH, OW, j.pixel, j.yl,
                          j.xl)
    elif j.wide:
        _bilinear_span(<const double*>src, <double*>j.dst, r0, r1, IH, IW, OH, OW, C, j.yl,
                       j.yh, j.ly, j.xl, j.xh, j.lx, <double*>j.work + 2 * row * s,
                       <double*>j.work + 2 * row * s + row, False)
    elif num == cnp.NPY_FLOAT32:
        _bilinear_span(<const float*>src, f, r0, r1, IH, IW, OH, OW, C, j.yl, j.yh, j.ly, j.xl,
                       j.xh, j.lx, t, u, j.stream)
    elif num == cnp.NPY_FLOAT64:
        _bilinear_span(<const double*>src, f, r0, r1, IH, IW, OH, OW, C, j.yl, j.yh, j.ly, j.xl,
                       j.xh, j.lx, t, u, j.stream)
    elif num == cnp.NPY_INT8:
        _bilinear_span(<const signed char*>src, f, r0, r1, IH, IW, OH, OW, C, j.yl, j.yh, j.ly,
                       j.xl, j.xh, j.lx, t, u, j.stream)
    elif num == cnp.NPY_UINT8:
        _bilinear_span(<const unsigned char*>src, f, r0, r1, IH, IW, OH, OW, C, j.yl, j.yh, j.ly,
                       j.xl, j.xh, j.lx, t, u, j.stream)
    elif num == cnp.NPY_INT16:
        _bilinear_span(<const short*>src, f, r0, r1, IH, IW, OH, OW, C, j.yl, j.yh, j.ly, j.xl,
                       j.xh, j.lx, t, u, j.stream)
    elif num == cnp.NPY_UINT16:
        _bilinear_span(<const unsigned short*>src, f, r0, r1, IH, IW, OH, OW, C, j.yl, j.yh,
                       j.ly, j.xl, j.xh, j.lx, t, u, j.stream)
    elif num == cnp.NPY_INT32:
        _bilinear_span(<const int*>src, f, r0, r1, IH, IW, OH, OW, C, j.yl, j.yh, j.ly, j.xl,
                       j.xh, j.lx, t, u, j.stream)
    else:   # int64 (the caller's precondition: 8-byte integers)
        _bilinear_span(<const long long*>src, f, r0, r1, IH, IW, OH, OW, C, j.yl, j.yh, j.ly,
                       j.xl, j.xh, j.lx, t, u, j.stream)


cdef int _fwd_run_nogil(FwdJob* j, int num_threads) noexcept nogil:
    """The resize on ``num_threads`` shares (at most one per output row), its bilinear rows'
    scratch allocated here; 1 when that scratch could not be allocated (nothing run)."""
    cdef int nt = <int>max(1, min(<Py_ssize_t>num_threads, j.B * j.OH))
    j.stream = j.linear and not j.wide and j.B * j.OH * j.OW * j.C * 4 >= FWD_STREAM_BYTES
    j.work = NULL
    if j.linear:
        j.work = malloc(max(1, 2 * j.OW * j.C * nt) * (8 if j.wide else 4))
        if j.work == NULL:
            return 1
    tfc_parallel(_fwd_share, j, nt)
    free(j.work)
    j.work = NULL
    return 0


cdef int _fwd_run(FwdJob* j, int num_threads) except -1:
    cdef int rc
    with nogil:
        rc = _fwd_run_nogil(j, num_threads)
    if rc:
        raise MemoryError("the forward resize's two lerped rows per thread")
    return 0


def bilinear_forward(cnp.ndarray src, cnp.ndarray dst, const int32_t[::1] y_lo,
                     const int32_t[::1] y_hi, const float[::1] y_lerp, const int32_t[::1] x_lo,
                     const int32_t[::1] x_hi, const float[::1] x_lerp, int num_threads):
    """dst ([B, OH, OW, C]) = TF's ResizeBilinear of src ([B, IH, IW, C]) with the axis tables
    of coords.pxi's linear_axis_map (lo, hi, and w_hi as the lerp), both C-contiguous. dst is
    float32 (TF's arithmetic; src float32, float64, int8, uint8, int16, uint16, int32 or
    int64) or float64 (src float64, computed in float64). Every index in the tables is in range
    (the caller's precondition)."""
    cdef Py_ssize_t B = src.shape[0], IH = src.shape[1], IW = src.shape[2], C = src.shape[3]
    cdef Py_ssize_t OH = dst.shape[1], OW = dst.shape[2]
    cdef const void* s = cnp.PyArray_DATA(src)
    cdef void* d = cnp.PyArray_DATA(dst)
    cdef int num = cnp.PyArray_TYPE(src)
    cdef bint wide = cnp.PyArray_TYPE(dst) == cnp.NPY_FLOAT64
    TFC_CHECK(dst.shape[0] == B and dst.shape[3] == C and y_lo.shape[0] >= OH
              and x_lo.shape[0] >= OW and (cnp.PyArray_TYPE(dst) == cnp.NPY_FLOAT32
                                           or (wide and num == cnp.NPY_FLOAT64)))
    cdef Py_ssize_t k
    if TFC_CHECKS_ON:   # the checked build proves every table index in range
        for k in range(OH):
            TFC_CHECK(0 <= y_lo[k] < IH and 0 <= y_hi[k] < IH)
        for k in range(OW):
            TFC_CHECK(0 <= x_lo[k] < IW and 0 <= x_hi[k] < IW)
    cdef FwdJob j
    j.src, j.dst, j.linear, j.wide, j.num = s, d, True, wide, num
    if not wide and num not in (cnp.NPY_FLOAT32, cnp.NPY_FLOAT64, cnp.NPY_INT8, cnp.NPY_UINT8,
                                cnp.NPY_INT16, cnp.NPY_UINT16, cnp.NPY_INT32):
        TFC_CHECK(cnp.PyArray_ITEMSIZE(src) == 8)
    j.B, j.IH, j.IW, j.OH, j.OW, j.C, j.pixel = B, IH, IW, OH, OW, C, 0
    j.yl, j.yh, j.ly, j.xl, j.xh, j.lx = &y_lo[0], &y_hi[0], &y_lerp[0], &x_lo[0], &x_hi[0], \
        &x_lerp[0]
    _fwd_run(&j, num_threads)


def nearest_forward(cnp.ndarray src, cnp.ndarray dst, const int32_t[::1] y_idx,
                    const int32_t[::1] x_idx, int num_threads):
    """dst [B, OH, OW, C] = src [B, IH, IW, C] at (y_idx[y], x_idx[x]): any dtype, both
    C-contiguous, of one item size; every index in range (the caller's precondition)."""
    cdef Py_ssize_t B = src.shape[0], IH = src.shape[1], IW = src.shape[2]
    cdef Py_ssize_t OH = dst.shape[1], OW = dst.shape[2]
    cdef Py_ssize_t pixel = src.shape[3] * cnp.PyArray_ITEMSIZE(src)
    cdef const char* s = <const char*>cnp.PyArray_DATA(src)
    cdef char* d = <char*>cnp.PyArray_DATA(dst)
    TFC_CHECK(dst.shape[0] == B and dst.shape[3] == src.shape[3]
              and cnp.PyArray_ITEMSIZE(dst) == cnp.PyArray_ITEMSIZE(src)
              and y_idx.shape[0] >= OH and x_idx.shape[0] >= OW)
    cdef Py_ssize_t k
    if TFC_CHECKS_ON:   # the checked build proves every table index in range
        for k in range(OH):
            TFC_CHECK(0 <= y_idx[k] < IH)
        for k in range(OW):
            TFC_CHECK(0 <= x_idx[k] < IW)
    cdef FwdJob j
    j.src, j.dst, j.linear, j.wide, j.num = s, d, False, False, 0
    j.B, j.IH, j.IW, j.OH, j.OW, j.C, j.pixel = B, IH, IW, OH, OW, src.shape[3], pixel
    j.yl, j.xl = &y_idx[0], &x_idx[0]
    _fwd_run(&j, num_threads)
