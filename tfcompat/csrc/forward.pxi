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


cdef void _bilinear_span(const fwd_src* src, fwd_acc* dst, Py_ssize_t r0, Py_ssize_t r1,
                         Py_ssize_t IH, Py_ssize_t IW, Py_ssize_t OH, Py_ssize_t OW,
                         Py_ssize_t C, const int32_t* y_lo, const int32_t* y_hi,
                         const float* y_lerp, const int32_t* x_lo, const int32_t* x_hi,
                         const float* x_lerp, fwd_acc* top, fwd_acc* bot) noexcept nogil:
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
        for k in range(n):
            o[k] = top[k] + (bot[k] - top[k]) * yl


cdef void _bilinear_rows(const fwd_src* src, fwd_acc* dst, Py_ssize_t B, Py_ssize_t IH,
                         Py_ssize_t IW, Py_ssize_t OH, Py_ssize_t OW, Py_ssize_t C,
                         const int32_t* y_lo, const int32_t* y_hi, const float* y_lerp,
                         const int32_t* x_lo, const int32_t* x_hi, const float* x_lerp,
                         fwd_acc* work, int num_threads) noexcept nogil:
    """dst [B, OH, OW, C] from src [B, IH, IW, C]: the output rows in ``num_threads`` spans of
    consecutive rows, one per thread. ``work``: 2 * OW * C values per span."""
    cdef Py_ssize_t rows = B * OH, k, n = OW * C
    for k in prange(num_threads, schedule='static', num_threads=num_threads):
        _bilinear_span(src, dst, k * rows // num_threads, (k + 1) * rows // num_threads, IH,
                       IW, OH, OW, C, y_lo, y_hi, y_lerp, x_lo, x_hi, x_lerp,
                       work + 2 * n * k, work + 2 * n * k + n)


ctypedef fused pixel_t:
    uint8_t
    uint16_t
    uint32_t
    uint64_t


cdef void _nearest_typed(const pixel_t* src, pixel_t* dst, Py_ssize_t B, Py_ssize_t IH,
                         Py_ssize_t IW, Py_ssize_t OH, Py_ssize_t OW, const int32_t* y_idx,
                         const int32_t* x_idx, int num_threads) noexcept nogil:
    """_nearest_rows for a pixel of one 1-, 2-, 4- or 8-byte value: a typed gather, not a
    memcpy call per pixel (a PyTorch NCHW image is one value per pixel of the kernel's view)."""
    cdef Py_ssize_t r, b, y, x
    cdef const pixel_t* row
    cdef pixel_t* o
    for r in prange(B * OH, schedule='static', num_threads=num_threads, nogil=True):
        b = r // OH
        y = r - b * OH
        row = src + (b * IH + y_idx[y]) * IW
        o = dst + r * OW
        for x in range(OW):
            o[x] = row[x_idx[x]]


cdef void _nearest_rows(const char* src, char* dst, Py_ssize_t B, Py_ssize_t IH, Py_ssize_t IW,
                        Py_ssize_t OH, Py_ssize_t OW, Py_ssize_t pixel, const int32_t* y_idx,
                        const int32_t* x_idx, int num_threads) noexcept nogil:
    """dst [B, OH, OW] of ``pixel``-byte pixels: each src [b, y_idx[y], x_idx[x]]."""
    cdef Py_ssize_t r, b, y, x
    cdef const char* row
    cdef char* o
    for r in prange(B * OH, schedule='static', num_threads=num_threads, nogil=True):
        b = r // OH
        y = r - b * OH
        row = src + (b * IH + y_idx[y]) * IW * pixel
        o = dst + r * OW * pixel
        for x in range(OW):
            memcpy(o + x * pixel, row + x_idx[x] * pixel, pixel)


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
    cdef int nt = max(1, min(num_threads, B * OH))
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
    work_a = np.empty(max(1, 2 * OW * C * nt), np.float64 if wide else np.float32)
    cdef float* w = <float*>cnp.PyArray_DATA(work_a)
    cdef const int32_t* ylo = &y_lo[0]
    cdef const int32_t* yhi = &y_hi[0]
    cdef const float* yl = &y_lerp[0]
    cdef const int32_t* xlo = &x_lo[0]
    cdef const int32_t* xhi = &x_hi[0]
    cdef const float* xl = &x_lerp[0]
    cdef float* f = <float*>d
    with nogil:
        if wide:
            _bilinear_rows(<const double*>s, <double*>d, B, IH, IW, OH, OW, C, ylo, yhi, yl,
                           xlo, xhi, xl, <double*>w, nt)
        elif num == cnp.NPY_FLOAT32:
            _bilinear_rows(<const float*>s, f, B, IH, IW, OH, OW, C, ylo, yhi, yl, xlo, xhi,
                           xl, w, nt)
        elif num == cnp.NPY_FLOAT64:
            _bilinear_rows(<const double*>s, f, B, IH, IW, OH, OW, C, ylo, yhi, yl, xlo, xhi,
                           xl, w, nt)
        elif num == cnp.NPY_INT8:
            _bilinear_rows(<const signed char*>s, f, B, IH, IW, OH, OW, C, ylo, yhi, yl, xlo,
                           xhi, xl, w, nt)
        elif num == cnp.NPY_UINT8:
            _bilinear_rows(<const unsigned char*>s, f, B, IH, IW, OH, OW, C, ylo, yhi, yl, xlo,
                           xhi, xl, w, nt)
        elif num == cnp.NPY_INT16:
            _bilinear_rows(<const short*>s, f, B, IH, IW, OH, OW, C, ylo, yhi, yl, xlo, xhi,
                           xl, w, nt)
        elif num == cnp.NPY_UINT16:
            _bilinear_rows(<const unsigned short*>s, f, B, IH, IW, OH, OW, C, ylo, yhi, yl,
                           xlo, xhi, xl, w, nt)
        elif num == cnp.NPY_INT32:
            _bilinear_rows(<const int*>s, f, B, IH, IW, OH, OW, C, ylo, yhi, yl, xlo, xhi, xl,
                           w, nt)
        else:
            TFC_CHECK(cnp.PyArray_ITEMSIZE(src) == 8)
            _bilinear_rows(<const long long*>s, f, B, IH, IW, OH, OW, C, ylo, yhi, yl, xlo,
                           xhi, xl, w, nt)


def nearest_forward(cnp.ndarray src, cnp.ndarray dst, const int32_t[::1] y_idx,
                    const int32_t[::1] x_idx, int num_threads):
    """dst [B, OH, OW, C] = src [B, IH, IW, C] at (y_idx[y], x_idx[x]): any dtype, both
    C-contiguous, of one item size; every index in range (the caller's precondition)."""
    cdef Py_ssize_t B = src.shape[0], IH = src.shape[1], IW = src.shape[2]
    cdef Py_ssize_t OH = dst.shape[1], OW = dst.shape[2]
    cdef Py_ssize_t pixel = src.shape[3] * cnp.PyArray_ITEMSIZE(src)
    cdef int nt = max(1, min(num_threads, B * OH))
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
    cdef const int32_t* yi = &y_idx[0]
    cdef const int32_t* xi = &x_idx[0]
    with nogil:
        if pixel == 1:
            _nearest_typed(<const uint8_t*>s, <uint8_t*>d, B, IH, IW, OH, OW, yi, xi, nt)
        elif pixel == 2:
            _nearest_typed(<const uint16_t*>s, <uint16_t*>d, B, IH, IW, OH, OW, yi, xi, nt)
        elif pixel == 4:
            _nearest_typed(<const uint32_t*>s, <uint32_t*>d, B, IH, IW, OH, OW, yi, xi, nt)
        elif pixel == 8:
            _nearest_typed(<const uint64_t*>s, <uint64_t*>d, B, IH, IW, OH, OW, yi, xi, nt)
        else:
            _nearest_rows(s, d, B, IH, IW, OH, OW, pixel, yi, xi, nt)


cdef class ForwardKernel:
    """One forward resize of fixed sizes and types, prepared once, run on raw pointers (the
    PyTorch front's tensors): ``run_ptr(src, dst, num_threads)`` with src [B, IH, IW, C] of
    NumPy type number ``src_type`` and dst [B, OH, OW, C], both C-contiguous and aligned.

    ``tables``: bilinear_forward's six axis tables (``wide``: dst float64 from a float64 src,
    else float32), or nearest_forward's two (dst of src's type, any item size). The kernel
    keeps them alive; every index in them is in range and the sizes are the tables' (the
    caller's precondition; the bounds-checked build proves both here)."""
    cdef readonly object tables
    cdef Py_ssize_t B, IH, IW, C, OH, OW, item
    cdef int src_type
    cdef bint linear, wide
    cdef const int32_t* t[4]
    cdef const float* lerp[2]

    def __cinit__(self, bint linear, int src_type, Py_ssize_t item, bint wide, sizes, tables):
        (self.B, self.IH, self.IW, self.C, self.OH, self.OW) = sizes
        self.linear, self.src_type, self.item, self.wide = linear, src_type, item, wide
        self.tables = tuple(np.ascontiguousarray(a) for a in tables)
        cdef Py_ssize_t k
        if linear:
            TFC_CHECK(len(self.tables) == 6 and self.tables[0].size >= self.OH
                      and self.tables[3].size >= self.OW)
            for k, i in enumerate((0, 1, 3, 4)):
                self.t[k] = <const int32_t*>cnp.PyArray_DATA(self.tables[i])
            self.lerp[0] = <const float*>cnp.PyArray_DATA(self.tables[2])
            self.lerp[1] = <const float*>cnp.PyArray_DATA(self.tables[5])
        else:
            TFC_CHECK(len(self.tables) == 2 and self.tables[0].size >= self.OH
                      and self.tables[1].size >= self.OW)
            self.t[0] = <const int32_t*>cnp.PyArray_DATA(self.tables[0])
            self.t[2] = <const int32_t*>cnp.PyArray_DATA(self.tables[1])
        if TFC_CHECKS_ON:   # the checked build proves every table index in range
            for k in range(self.OH):
                TFC_CHECK(0 <= self.t[0][k] < self.IH
                          and (not linear or 0 <= self.t[1][k] < self.IH))
            for k in range(self.OW):
                TFC_CHECK(0 <= self.t[2][k] < self.IW
                          and (not linear or 0 <= self.t[3][k] < self.IW))

    def run_ptr(self, intptr_t src, intptr_t dst, int num_threads):
        cdef int nt = max(1, min(num_threads, self.B * self.OH))
        cdef const void* s = <const void*>src
        cdef void* d = <void*>dst
        cdef Py_ssize_t B = self.B, IH = self.IH, IW = self.IW, C = self.C, OH = self.OH
        cdef Py_ssize_t OW = self.OW, pixel = self.C * self.item
        cdef const int32_t* yl = self.t[0]
        cdef const int32_t* yh = self.t[1]
        cdef const int32_t* xl = self.t[2]
        cdef const int32_t* xh = self.t[3]
        cdef const float* ly = self.lerp[0]
        cdef const float* lx = self.lerp[1]
        cdef int num = self.src_type
        cdef void* w = NULL
        if self.linear:
            w = malloc(max(1, 2 * OW * C * nt) * (8 if self.wide else 4))
            if w == NULL:
                raise MemoryError("the forward resize's two lerped rows per thread")
        with nogil:
            if not self.linear:
                if pixel == 1:
                    _nearest_typed(<const uint8_t*>s, <uint8_t*>d, B, IH, IW, OH, OW, yl, xl, nt)
                elif pixel == 2:
                    _nearest_typed(<const uint16_t*>s, <uint16_t*>d, B, IH, IW, OH, OW, yl, xl,
                                   nt)
                elif pixel == 4:
                    _nearest_typed(<const uint32_t*>s, <uint32_t*>d, B, IH, IW, OH, OW, yl, xl,
                                   nt)
                elif pixel == 8:
                    _nearest_typed(<const uint64_t*>s, <uint64_t*>d, B, IH, IW, OH, OW, yl, xl,
                                   nt)
                else:
                    _nearest_rows(<const char*>s, <char*>d, B, IH, IW, OH, OW, pixel, yl, xl, nt)
            elif self.wide:
                _bilinear_rows(<const double*>s, <double*>d, B, IH, IW, OH, OW, C, yl, yh, ly,
                               xl, xh, lx, <double*>w, nt)
            elif num == cnp.NPY_FLOAT32:
                _bilinear_rows(<const float*>s, <float*>d, B, IH, IW, OH, OW, C, yl, yh, ly, xl,
                               xh, lx, <float*>w, nt)
            elif num == cnp.NPY_FLOAT64:
                _bilinear_rows(<const double*>s, <float*>d, B, IH, IW, OH, OW, C, yl, yh, ly, xl,
                               xh, lx, <float*>w, nt)
            elif num == cnp.NPY_INT8:
                _bilinear_rows(<const signed char*>s, <float*>d, B, IH, IW, OH, OW, C, yl, yh,
                               ly, xl, xh, lx, <float*>w, nt)
            elif num == cnp.NPY_UINT8:
                _bilinear_rows(<const unsigned char*>s, <float*>d, B, IH, IW, OH, OW, C, yl, yh,
                               ly, xl, xh, lx, <float*>w, nt)
            elif num == cnp.NPY_INT16:
                _bilinear_rows(<const short*>s, <float*>d, B, IH, IW, OH, OW, C, yl, yh, ly, xl,
                               xh, lx, <float*>w, nt)
            elif num == cnp.NPY_UINT16:
                _bilinear_rows(<const unsigned short*>s, <float*>d, B, IH, IW, OH, OW, C, yl, yh,
                               ly, xl, xh, lx, <float*>w, nt)
            elif num == cnp.NPY_INT32:
                _bilinear_rows(<const int*>s, <float*>d, B, IH, IW, OH, OW, C, yl, yh, ly, xl,
                               xh, lx, <float*>w, nt)
            else:
                _bilinear_rows(<const long long*>s, <float*>d, B, IH, IW, OH, OW, C, yl, yh, ly,
                               xl, xh, lx, <float*>w, nt)
        free(w)
