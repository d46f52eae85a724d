# oneDNN's gather strategy (docs/architecture.md#the-conv-strategies): the BLAS gather's stride
# phases with oneDNN's single-threaded matmuls, one per tap row of each band, on float32 or on
# dy's own 16-bit values (bfloat16, float16), or, where a phase's taps read runs of dy's pixels,
# per column class on dy itself (mostly in place, no gather); a row phase whose stride phases
# each take one tap at their own dy position (merged) runs one matmul per dy row that writes a
# whole dx row. The threads share out the bands of every image; a band of a row phase py
# computes every px.
#
# oneDNN's C API (include/oneapi/dnnl/dnnl.h): the Python layer (tfcompat/conv/onednn.py,
# tfcompat/_dnnl.py) creates single-threaded matmul primitives, a stream per worker and the
# argument lists, and passes the addresses of the three functions the kernel calls.
ctypedef int (*dnnl_execute_f)(const void* primitive, void* stream, int nargs,
                               const void* args) noexcept nogil
ctypedef int (*dnnl_wait_f)(void* stream) noexcept nogil
ctypedef int (*dnnl_set_handle_f)(void* memory, void* handle) noexcept nogil


cdef struct DnnlExecArg:    # dnnl_exec_arg_t
    int arg
    void* memory


cdef struct DnnlArgs:
    # per row phase py, -1 or where in ph_b its merged taps start: every phase (py, px) takes
    # one tap, read at its own dy position, and the sw phases fill dx's rows whole, so one
    # GEMM per dy row (its taps side by side, [OC, sw * C]) writes a dx row
    const int32_t* merged
    # with bits the gathered dy keeps dy's 16-bit values, else it is float32; the filter's
    # taps are values of b_size bytes. A band of phase p is one GEMM per tap row (inner
    # dimension taps_x * OC), the first writing the output and the others adding to it; kind
    # k = tail * 2 + add (tail: the phase's last, shorter band) is run by primitive
    # prims[p * 4 + k] with worker t's memory objects (a, b, out, scratchpad)
    # args[((t * phases + p) * 4 + k) * 4 ...], on stream streams[t]; a failed call leaves its
    # status in status[t]
    bint bits
    bint avx512             # dx rows copied or rounded in AVX-512 instructions (_dnnl_row_out)
    bint stream             # ... and stored by streaming stores
    Py_ssize_t b_size
    dnnl_execute_f execute
    dnnl_wait_f wait
    dnnl_set_handle_f set_handle
    const intptr_t* prims
    const intptr_t* streams
    const DnnlExecArg* args
    int32_t* status


cdef void _gather_band_bits(const uint16_t* dy, uint16_t* a, Py_ssize_t n, Py_ssize_t j0,
                            Py_ssize_t rows, const int32_t* info, const int32_t* offy,
                            const int32_t* offx, const ConvCore* c) noexcept nogil:
    """_gather_band's A for oneDNN's bfloat16 GEMMs: the bits of dy, not widened; tap by tap,
    so that the inner loop walks one dy row (its OC-value segments go K2 apart in A)."""
    cdef Py_ssize_t Wp = info[3], nty = info[4], ntx = info[5], OC = c.OC
    cdef Py_ssize_t K2 = nty * ntx * OC, j, i, ta, tb, oy, ox, k, lo, hi
    cdef uint16_t* d
    cdef const uint16_t* s
    for j in range(j0, j0 + rows):
        for ta in range(nty):
            oy = j + offy[ta]
            for tb in range(ntx):
                d = a + (j - j0) * Wp * K2 + (ta * ntx + tb) * OC
                s = dy
                if not (0 <= oy < c.OH):
                    lo = hi = Wp
                else:
                    # the positions i whose tap reads inside dy: 0 <= i + offx[tb] < OW
                    lo = min(Wp, max(0, -offx[tb]))
                    hi = max(lo, min(Wp, c.OW - offx[tb]))
                    s = dy + (n * c.OH + oy) * c.OW * OC    # dy's row oy
                for i in range(Wp):
                    if lo <= i < hi:
                        for k in range(OC):
                            d[k] = s[(i + offx[tb]) * OC + k]
                    else:
                        for k in range(OC):
                            d[k] = 0
                    d = d + K2


cdef void _shifted_rows(const char* dy, char* a, Py_ssize_t n, Py_ssize_t oy0,
                        Py_ssize_t count, Py_ssize_t shift, Py_ssize_t size,
                        const ConvCore* c) noexcept nogil:
    """a[k, p] = dy[n, oy0 + k, p + shift] (OC values of ``size`` bytes), or 0 outside dy, for
    k < count and p < OW: dy's rows shifted by ``shift`` columns, a column class's A."""
    cdef Py_ssize_t pix = c.OC * size, row = c.OW * pix, k, oy
    # the columns p that read inside dy: 0 <= p + shift < OW
    cdef Py_ssize_t lo = min(c.OW, max(0, -shift))
    cdef Py_ssize_t hi = max(lo, min(c.OW, c.OW - shift))
    cdef char* d
    for k in range(count):
        oy = oy0 + k
        d = a + k * row
        if not (0 <= oy < c.OH):
            memset(d, 0, row)
            continue
        memset(d, 0, lo * pix)
        memcpy(d + lo * pix, dy + ((n * c.OH + oy) * c.OW + lo + shift) * pix, (hi - lo) * pix)
        memset(d + hi * pix, 0, (c.OW - hi) * pix)


cdef void _place_phase(const ConvCore* c, void* dx, float* band_out, const float* ph_out,
                       Py_ssize_t n, Py_ssize_t py, Py_ssize_t px, Py_ssize_t j0,
                       Py_ssize_t rows, Py_ssize_t Wq, Py_ssize_t classes, Py_ssize_t r,
                       bint scatter) noexcept nogil:
    """Put phase (py, px)'s band output ph_out (or zeros, when NULL) where it belongs: column
    class r of ``classes`` (output q: row q // m, column classes * (q % m) + r, m = Wq /
    classes), straight into dx (``scatter``) or into the band's row buffer band_out, whose
    rows are laid out as dx's, Wq * sw positions each."""
    cdef Py_ssize_t m = Wq // classes, q, jj, i, col
    cdef float* d
    for q in range(rows * m):
        jj = q // m
        i = classes * (q % m) + r
        if scatter:
            col = px + c.sw * i
            if col >= c.W:
                continue    # the padding column
            d = <float*>dx + ((n * c.H + py + c.sh * (j0 + jj)) * c.W + col) * c.C
        else:
            d = band_out + ((jj * Wq + i) * c.sw + px) * c.C
        if ph_out == NULL:
            memset(d, 0, c.C * sizeof(float))
        else:
            memcpy(d, ph_out + q * c.C, c.C * sizeof(float))


cdef inline void _dnnl_gemm(const ConvCore* c, const DnnlArgs* dn, Py_ssize_t p, Py_ssize_t t,
                            bint tail, bint add, const void* a, Py_ssize_t ta,
                            void* out) noexcept nogil:
    """Worker t's GEMM of a band of phase p (``tail``: its last, shorter band) for tap row ta:
    out (float32) = a @ the phase's taps of that row, or out += that (``add``)."""
    cdef const int32_t* info = c.ph_info + p * PH_WIDTH
    _dnnl_exec(c, dn, p, t, tail * 2 + add, a, <const char*>c.ph_b
               + (info[7] + ta * info[5] * c.OC * c.C) * dn.b_size, out)


cdef inline void _dnnl_exec(const ConvCore* c, const DnnlArgs* dn, Py_ssize_t p, Py_ssize_t t,
                            Py_ssize_t kind, const void* a, const void* b,
                            void* out) noexcept nogil:
    """Worker t runs primitive prims[p * 4 + kind] on a, b and out: its memory objects
    for it are pointed at the three (its scratchpad stays bound)."""
    cdef void* stream = <void*>dn.streams[t]
    cdef const DnnlExecArg* args = dn.args + ((t * c.phases + p) * 4 + kind) * 4
    cdef int status = dn.set_handle(args[0].memory, <void*>a)
    if status == 0:
        status = dn.set_handle(args[1].memory, <void*>b)
    if status == 0:
        status = dn.set_handle(args[2].memory, out)
    if status == 0:
        status = dn.execute(<const void*>dn.prims[p * 4 + kind], stream, 4, args)
    if status == 0:
        status = dn.wait(stream)
    if status != 0 and dn.status[t] == 0:
        dn.status[t] = status


cdef inline void _dnnl_row_out(const ConvCore* c, const DnnlArgs* dn, const float* row,
                               void* dx, Py_ssize_t r) noexcept nogil:
    """A dx row at value r from the float32 ``row`` of oneDNN's output: copied (float32), or
    rounded once, with AVX-512 instructions where the CPU has them (avx512: tiles_common.h's
    tfc_store_row), by streaming stores with ``stream``."""
    cdef int half = c.storage   # tfc_store_row's ``half``: the storage codes, 0 float32
    if dn.avx512 and (half or dn.stream):
        store_row(row, <char*>dx + r * (2 if half else 4), c.W * c.C, half, dn.stream)
    elif half:
        from_f32(row, <uint16_t*>dx + r, c.W * c.C, half == 2)
    else:
        memcpy(<float*>dx + r, row, c.W * c.C * sizeof(float))


cdef void _dnnl_band(const void* dy, float* work, void* dx, Py_ssize_t n, Py_ssize_t py,
                     Py_ssize_t j0, Py_ssize_t t, const ConvCore* c,
                     const DnnlArgs* dn) noexcept nogil:
    """One band of the gather with oneDNN's matmul, by worker t: dx rows
    py + sh j, j from j0, of image n, for every px. A band of a phase
    gathers, for each dy row it reads, the row's taps_x taps ([rows + span, Wq, taps_x * OC]:
    a tap row ta of dx row j reads dy row j + offy[ta]), and runs one GEMM per tap row on the
    rows that tap row reads, summed into the band's output: each dy value is gathered
    taps_x times instead of taps_y * taps_x times. Every phase has
    Wq = ceil(W / sw) columns (the Python layer pads the narrower ones: their last column
    lands beyond dx and is computed but not kept), so the sw phases (py, px) of a band of
    phase rows share one float32 buffer laid out as dx's rows py + sh j, Wq * sw positions
    each: phase px's GEMM output (contiguous: oneDNN 3.2's fast matmuls need a dense output)
    goes to column px, sw * C apart, and each dx row is rounded from one contiguous run, or
    copied (float32; with sw > 1 float32 phase outputs go straight to their dx positions
    instead); with stride 1 the GEMM writes that buffer itself, and dx too for float32. All
    phases of a py have the same band. A phase with column classes (info[8] > 0, the Python
    layer's _column_classes) gathers nothing: class k (its columns i = k, k + taps_x, ...)
    runs its GEMMs, 1 / classes of the band's rows each, on dy's rows shifted by
    offx[0] + k columns, whose runs of taps_x pixels, taps_x apart, are its A rows: dy itself
    for the class with no shift, where the band's dy rows are inside dy, else a copy
    (_shifted_rows). Each dx element is one GEMM output, summed by oneDNN's
    single-threaded matmul in its own order: the same on the same shapes whichever worker
    runs it."""
    cdef Py_ssize_t px, p, rows, Hp, Wq, K2, r, jj, ta, lo, hi, k, shift, classes, a_row
    cdef Py_ssize_t C = c.C
    cdef const int32_t* info
    cdef const int32_t* offy
    cdef const int32_t* offx
    cdef int32_t row_info[PH_WIDTH]
    cdef int32_t zero = 0
    cdef float* a = work
    cdef float* out = work + c.a_floats
    cdef float* band_out
    cdef float* ph_out
    cdef bint tail
    cdef const char* src
    cdef bint native = c.storage == STORE_NATIVE
    cdef bint into_dx = native and c.sh == 1 and c.sw == 1
    cdef bint scatter = native and c.sw > 1
    # dy's rows are the GEMM's A when the matmul reads dy's own type
    cdef bint dy_is_a = native or dn.bits
    cdef Py_ssize_t dy_size = 4 if native else 2
    cdef Py_ssize_t a_size = 2 if dn.bits else 4
    info = c.ph_info + py * c.sw * PH_WIDTH
    Hp, Wq = info[2], info[3]
    rows = min(<Py_ssize_t>info[6], Hp - j0)
    tail = rows != info[6]
    if dn.merged[py] >= 0:
        # one GEMM per dy row j (primitive kind 0 of phase (py, 0): [Wq, OC] @ [OC, sw * C]),
        # its output dx row py + sh j itself, or rounded into it
        for jj in range(rows):
            r = (n * c.H + py + c.sh * (j0 + jj)) * c.W * C
            src = <const char*>dy + (n * c.OH + j0 + jj) * c.OW * c.OC * dy_size
            if not dy_is_a:     # a 16-bit dy row widened for float32 GEMMs
                to_f32(<const uint16_t*>src, a, c.OW * c.OC, c.storage == STORE_BFLOAT16)
                src = <const char*>a
            _dnnl_exec(c, dn, py * c.sw, t, 0, src,
                       <const char*>c.ph_b + <Py_ssize_t>dn.merged[py] * dn.b_size,
                       <float*>dx + r if native else out)
            if not native:
                _dnnl_row_out(c, dn, out, dx, r)
        return
    band_out = <float*>dx + (n * c.H + j0) * c.W * C if into_dx else out
    # a phase's own output, when the sw phases interleave (after the row buffer)
    ph_out = band_out if c.sw == 1 else out + info[6] * Wq * c.sw * C
    for px in range(c.sw):
        p = py * c.sw + px
        info = c.ph_info + p * PH_WIDTH
        K2 = info[4] * info[5] * c.OC
        offy = c.ph_offy + p * c.fh
        offx = c.ph_offx + p * c.fw
        if K2 == 0:
            # no tap reaches this phase: its dx elements are zero
            _place_phase(c, dx, band_out, NULL, n, py, px, j0, rows, Wq, 1, 0, scatter)
            continue
        # the band's tap rows read dy rows j0 + lo .. j0 + rows - 1 + hi (tap row ta of
        # phase row j: dy row j + offy[ta])
        lo = _tap_rows(offy, info[4], &hi)
        # A per tap row: the gather's dy rows with their taps_x taps each (classes 0, one
        # tap row, offy = 0), or column class k's dy rows shifted by offx[0] + k columns
        # (the Python layer's _column_classes; dy_is_a), read in place where that is 0 and
        # the rows are inside dy, else copied; a_row: the bytes of one dy row's A
        classes = max(1, info[8])
        a_row = Wq * info[5] * c.OC * a_size if info[8] == 0 else c.OW * c.OC * dy_size
        for k in range(classes):
            shift = offx[0] + k
            src = <const char*>a
            if info[8] == 0:
                memcpy(row_info, info, PH_WIDTH * sizeof(int32_t))
                row_info[4] = 1
                if dn.bits:
                    _gather_band_bits(<const uint16_t*>dy, <uint16_t*>a, n, j0 + lo,
                                      rows + hi - lo, row_info, &zero, offx, c)
                else:
                    _gather_band(dy, a, n, j0 + lo, rows + hi - lo, row_info, &zero, offx, c)
            elif shift == 0 and j0 + lo >= 0 and j0 + rows - 1 + hi < c.OH:
                src = <const char*>dy + (n * c.OH + j0 + lo) * c.OW * c.OC * dy_size
            else:
                _shifted_rows(<const char*>dy, <char*>a, n, j0 + lo, rows + hi - lo, shift,
                              dy_size, c)
            for ta in range(info[4]):
                _dnnl_gemm(c, dn, p, t, tail, ta > 0, src + (offy[ta] - lo) * a_row, ta,
                           ph_out)
            if c.sw > 1:
                _place_phase(c, dx, band_out, ph_out, n, py, px, j0, rows, Wq, classes, k,
                             scatter)
    if not (into_dx or scatter):
        for jj in range(rows):
            r = (n * c.H + py + c.sh * (j0 + jj)) * c.W * C
            _dnnl_row_out(c, dn, out + jj * Wq * c.sw * C, dx, r)


cdef void _dnnl_unit(const ConvCore* c, const void* own, const void* dy, void* work, void* dx,
                     Py_ssize_t n, Py_ssize_t p, Py_ssize_t j0, Py_ssize_t t, Py_ssize_t cb,
                     Py_ssize_t ce) noexcept nogil:
    _dnnl_band(dy, <float*>work, dx, n, p // c.sw, j0, t, c, <const DnnlArgs*>own)
