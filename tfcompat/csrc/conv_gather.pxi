# The BLAS gather strategy (docs/architecture.md#the-conv-strategies): the transposed
# convolution per stride phase (py, px) as GEMMs of gathered dy against the filter's taps,
# whose inner dimension is taps * out_c instead of out_c; the threads share out the bands of
# every image (any N); with fewer units than the Python layer's split_units, each band's GEMM
# is split into groups of columns (ConvCore.group_cols) that the threads share too.


cdef inline Py_ssize_t _gather_cols(Py_ssize_t units, Py_ssize_t C, Py_ssize_t split_units,
                                    Py_ssize_t split_cols) noexcept nogil:
    """The dx columns of each of our gather's GEMMs (its units: the bands of all images): C,
    or, with fewer than split_units units, a multiple of 16 that splits C into groups of at
    least split_cols, as many as bring it to split_units units."""
    cdef Py_ssize_t groups
    if split_units <= 0 or split_cols <= 0:
        return C
    groups = min((split_units + units - 1) // units, C // split_cols)
    if units >= split_units or groups <= 1:
        return C
    return ((C + groups - 1) // groups + 15) // 16 * 16


cdef inline void _gemm_rows(const real_acc* a, const real_acc* b, real_acc* out, int M, int K,
                           int N, int ldc, int ldb) noexcept nogil:
    """out[M, N] (rows ldc apart) = a[M, K] @ b[K, N] (rows ldb apart), all row-major."""
    cdef char tn = b'N'
    cdef real_acc one = 1
    cdef real_acc zero = 0
    if real_acc is float:
        sgemm(&tn, &tn, &N, &M, &K, &one, <float*>b, &ldb, <float*>a, &K, &zero, out, &ldc)
    else:
        dgemm(&tn, &tn, &N, &M, &K, &one, <double*>b, &ldb, <double*>a, &K, &zero, out, &ldc)


cdef void _gather_band(const void* dy, real_acc* a, Py_ssize_t n, Py_ssize_t j0,
                       Py_ssize_t rows, const int32_t* info, const int32_t* offy,
                       const int32_t* offx, const ConvCore* c) noexcept nogil:
    """A[(j, i), (a, b, co)] = dy[n, j + offy[a], i + offx[b], co], or 0 outside dy, for the
    phase rows j0 .. j0 + rows - 1 (half types widened on the way). When the taps b read
    consecutive dy columns (offx ascending by 1: a dilation of 1), the taps of one (j, i, a)
    are one run of dy's row, copied at once."""
    cdef Py_ssize_t Wp = info[3], nty = info[4], ntx = info[5], OC = c.OC
    cdef Py_ssize_t K2 = nty * ntx * OC, j, i, ta, tb, oy, ox, src, lo, hi
    cdef real_acc* seg
    cdef bint bf = c.storage == STORE_BFLOAT16
    cdef bint runs = True
    for tb in range(1, ntx):
        runs = runs and offx[tb] == offx[tb - 1] + 1
    for j in range(j0, j0 + rows):
        for i in range(Wp):
            seg = a + ((j - j0) * Wp + i) * K2
            for ta in range(nty):
                oy = j + offy[ta]
                if runs:
                    # taps lo .. hi - 1 read dy columns i + offx[0] + tb inside dy
                    lo = hi = ntx
                    if 0 <= oy < c.OH:
                        lo = min(ntx, max(0, -(i + offx[0])))
                        hi = max(lo, min(ntx, c.OW - (i + offx[0])))
                    memset(seg, 0, lo * OC * sizeof(real_acc))
                    if hi > lo:
                        src = ((n * c.OH + oy) * c.OW + i + offx[0] + lo) * OC
                        if c.storage == STORE_NATIVE:
                            memcpy(seg + lo * OC, <const real_acc*>dy + src,
                                   (hi - lo) * OC * sizeof(real_acc))
                        elif real_acc is float:
                            to_f32(<const uint16_t*>dy + src, seg + lo * OC, (hi - lo) * OC, bf)
                    memset(seg + hi * OC, 0, (ntx - hi) * OC * sizeof(real_acc))
                    seg = seg + ntx * OC
                    continue
                for tb in range(ntx):
                    ox = i + offx[tb]
                    if 0 <= oy < c.OH and 0 <= ox < c.OW:
                        src = ((n * c.OH + oy) * c.OW + ox) * OC
                        if c.storage == STORE_NATIVE:
                            memcpy(seg, <const real_acc*>dy + src, OC * sizeof(real_acc))
                        elif real_acc is float:
                            to_f32(<const uint16_t*>dy + src, seg, OC, bf)
                    else:
                        memset(seg, 0, OC * sizeof(real_acc))
                    seg = seg + OC




cdef void _gather_phase_band(const void* dy, real_acc* work, void* dx, Py_ssize_t n,
                             Py_ssize_t p, Py_ssize_t j0, Py_ssize_t cb, Py_ssize_t ce,
                             const ConvCore* c) noexcept nogil:
    """The band of phase p from phase row j0 of image n. dx at (py + sh j, px + sw i) takes,
    from tap (ky, kx) with (py + pad_top - ky dh) divisible by sh (and likewise in x), dy at
    row j + (py + pad_top - ky dh) / sh: a stride-1 convolution per phase, so each phase is
    GEMMs of a band of gathered dy rows [band * Wp, taps * OC] against the phase's taps of the
    filter [taps * OC, C]. With stride 1 and the native type the GEMM writes dx itself;
    otherwise its rows are scattered (and rounded) into dx. Only dx columns cb <= c < ce (a
    group of gather_cols, or all of them): the GEMM takes those columns of the filter's taps.
    Each dx element is one GEMM output, summed by BLAS in its own order (the conv is held to
    a tolerance), the same whichever thread runs it."""
    cdef Py_ssize_t rows, Wp, K2, r, i, j, C = c.C
    cdef const int32_t* info = c.ph_info + p * PH_WIDTH
    cdef real_acc* a = work
    cdef real_acc* out = work + c.a_floats
    cdef real_acc* row
    cdef bint bf = c.storage == STORE_BFLOAT16
    cdef Py_ssize_t d
    Wp = info[3]
    K2 = info[4] * info[5] * c.OC
    rows = min(<Py_ssize_t>info[6], info[2] - j0)
    if K2 == 0:
        # no tap reaches this phase: its dx elements are zero
        memset(out, 0, rows * Wp * C * sizeof(real_acc))
    else:
        _gather_band(dy, a, n, j0, rows, info, c.ph_offy + p * c.fh, c.ph_offx + p * c.fw, c)
        if c.sh == 1 and c.sw == 1 and c.storage == STORE_NATIVE:
            _gemm_rows(a, <const real_acc*>c.ph_b + info[7] + cb,
                       <real_acc*>dx + (n * c.H + j0) * c.W * C + cb, <int>(rows * Wp),
                       <int>K2, <int>(ce - cb), <int>C, <int>C)
            return
        _gemm_rows(a, <const real_acc*>c.ph_b + info[7] + cb, out + cb, <int>(rows * Wp),
                   <int>K2, <int>(ce - cb), <int>C, <int>C)
    for r in range(rows * Wp):
        j = j0 + r // Wp
        i = r % Wp
        d = ((n * c.H + info[0] + c.sh * j) * c.W + info[1] + c.sw * i) * C
        row = out + r * C + cb
        if c.storage == STORE_NATIVE:
            memcpy(<real_acc*>dx + d + cb, row, (ce - cb) * sizeof(real_acc))
        elif real_acc is float:
            from_f32(row, <uint16_t*>dx + d + cb, ce - cb, bf)


cdef void _blas_unit_f32(const ConvCore* c, const void* own, const void* dy, void* work,
                         void* dx, Py_ssize_t n, Py_ssize_t p, Py_ssize_t j0, Py_ssize_t t,
                         Py_ssize_t cb, Py_ssize_t ce) noexcept nogil:
    _gather_phase_band(dy, <float*>work, dx, n, p, j0, cb, ce, c)


cdef void _blas_unit_f64(const ConvCore* c, const void* own, const void* dy, void* work,
                         void* dx, Py_ssize_t n, Py_ssize_t p, Py_ssize_t j0, Py_ssize_t t,
                         Py_ssize_t cb, Py_ssize_t ce) noexcept nogil:
    _gather_phase_band(dy, <double*>work, dx, n, p, j0, cb, ce, c)
