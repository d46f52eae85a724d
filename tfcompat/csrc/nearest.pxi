# Nearest-neighbour resampling backward (docs/semantics.md: ResizeNearestNeighborGrad,
# InterpolateBackward nearest): every dy element lands on one dx element. The row walk is in
# rows.pxi. Three row kernels:
#   _nearest_gather_row_f32  float32, 8 <= C <= 64, at most GATHER_MAX_ROWS dy rows per dx
#                            row: each dx element summed in registers and stored once;
#   _nearest_row (runs)      float32, 8 <= C <= 64, more dy rows per dx row: each run of x
#                            with one index adds into its element once per vector;
#   _nearest_row (scatter)   every other case, integers included (unsigned sums wrap as TF's).
# All add each element's terms in TF's order, so all give the same bits.

cdef enum:
    # the gather reads its dy rows as concurrent streams; beyond 4 (R3's 8) it lost to the
    # runs with dy out of cache (docs/performance.md)
    GATHER_MAX_ROWS = 4


cdef inline void _gather_block(const float** rows, Py_ssize_t nrows, Py_ssize_t x0,
                               Py_ssize_t n, Py_ssize_t C, Py_ssize_t c0, float* d,
                               Py_ssize_t nv, Py_ssize_t o1, Py_ssize_t o2,
                               Py_ssize_t o3, bint onto) noexcept nogil:
    """d's vectors = +0.0 (or, ``onto``, d's own values) plus the sum over the rows, then
    x0 .. x0 + n - 1, of the same vectors of pixel x from channel c0, in that order. The
    vectors: nv = 1..4 at offsets 0, o1, o2, o3, or nv = 8 at those and 32 past them (a whole
    256-byte piece of each pixel per step, so that C = 64 is one block). Up to eight chains of
    adds side by side: one chain at a time waited on its adds (docs/performance.md)."""
    cdef Py_ssize_t k, x
    cdef v8f z = splat8(0)
    cdef v8f a0 = z, a1 = z, a2 = z, a3 = z, a4 = z, a5 = z, a6 = z, a7 = z
    cdef const float* p
    TFC_CHECK(1 <= nv <= 4 or nv == 8)
    if onto:
        a0 = load8(d)
        if nv > 1:
            a1 = load8(d + o1)
        if nv > 2:
            a2 = load8(d + o2)
        if nv > 3:
            a3 = load8(d + o3)
        if nv > 4:
            a4 = load8(d + 32)
            a5 = load8(d + 32 + o1)
            a6 = load8(d + 32 + o2)
            a7 = load8(d + 32 + o3)
    for k in range(nrows):
        p = rows[k] + x0 * C + c0
        for x in range(n):
            a0 = a0 + load8(p)
            if nv > 1:
                a1 = a1 + load8(p + o1)
            if nv > 2:
                a2 = a2 + load8(p + o2)
            if nv > 3:
                a3 = a3 + load8(p + o3)
            if nv > 4:
                a4 = a4 + load8(p + 32)
                a5 = a5 + load8(p + 32 + o1)
                a6 = a6 + load8(p + 32 + o2)
                a7 = a7 + load8(p + 32 + o3)
            p = p + C
    store8(d, a0)
    if nv > 1:
        store8(d + o1, a1)
    if nv > 2:
        store8(d + o2, a2)
    if nv > 3:
        store8(d + o3, a3)
    if nv > 4:
        store8(d + 32, a4)
        store8(d + 32 + o1, a5)
        store8(d + 32 + o2, a6)
        store8(d + 32 + o3, a7)


cdef inline void _gather_tail(const float** rows, Py_ssize_t nrows, Py_ssize_t x0,
                              Py_ssize_t n, Py_ssize_t C, Py_ssize_t c0, float* d,
                              Py_ssize_t nv, Py_ssize_t o1, Py_ssize_t o2,
                              Py_ssize_t o3, bint onto) noexcept nogil:
    """_gather_block of nv = 1..4 vectors with the count as a literal (see _window_tail)."""
    if nv == 1:
        _gather_block(rows, nrows, x0, n, C, c0, d, 1, o1, o2, o3, onto)
    elif nv == 2:
        _gather_block(rows, nrows, x0, n, C, c0, d, 2, o1, o2, o3, onto)
    elif nv == 3:
        _gather_block(rows, nrows, x0, n, C, c0, d, 3, o1, o2, o3, onto)
    else:
        _gather_block(rows, nrows, x0, n, C, c0, d, 4, o1, o2, o3, onto)


cdef inline void _nearest_runs_f32(const float* src, float* dst, Py_ssize_t Ox, Py_ssize_t Ix,
                                   Py_ssize_t C, const Blocks* bl,
                                   const int32_t* x_idx) noexcept nogil:
    """dst[x_idx[x]] += src[x] for x ascending, float32, 8 <= C <= 64 in the blocks of
    _row_blocks: each run of x with one index loads and stores its dst element once per
    vector instead of once per x (R3's 8x: 8 adds per load and store)."""
    cdef Py_ssize_t x0 = 0, x1, n, idx, k, c0
    cdef const float* s
    cdef float* d
    while x0 < Ox:
        idx = x_idx[x0]
        TFC_CHECK(0 <= idx < Ix)
        x1 = x0 + 1
        while x1 < Ox and x_idx[x1] == idx:
            x1 += 1
        n = x1 - x0
        s = src + x0 * C
        d = dst + idx * C
        for k in range(bl.n):
            c0 = bl.c0[k]
            if _full_block(bl, k):
                _gather_block(&s, 1, 0, n, C, c0, d + c0, 4, 8, 16, 24, 1)
            else:
                _gather_tail(&s, 1, 0, n, C, c0, d + c0, bl.nv[k], bl.o1[k], bl.o2[k],
                             bl.o3[k], 1)
        x0 = x1


cdef void _nearest_row(const nn_t* dy, nn_t* dx, Py_ssize_t row,
                       const ResampleArgs* r) noexcept nogil:
    cdef Py_ssize_t Iz = r.Iz, Iy = r.Iy, Ix = r.Ix, Oz = r.Oz, Oy = r.Oy, Ox = r.Ox, C = r.C
    cdef const RowTables* t = &r.t
    cdef const int32_t* x_idx = r.x_lo
    cdef Py_ssize_t b = row // (Iz * Iy)
    cdef Py_ssize_t iz = (row // Iy) % Iz
    cdef Py_ssize_t iy = row % Iy
    cdef nn_t* dst = dx + row * Ix * C
    cdef nn_t* d
    cdef const nn_t* src
    cdef const nn_t* s
    cdef Py_ssize_t gz, gy, x, c, sweep = 0
    cdef Ahead ahead
    cdef Blocks bl
    if C == 1:
        memset(dst, 0, Ix * sizeof(nn_t))
        # one value per pixel (an NCX layout's rows, PyTorch's NCHW): a plain loop, with no
        # per-pixel prefetch or channel loop (docs/performance.md#the-pytorch-front)
        for gz in range(t.z_off[iz], t.z_off[iz + 1]):
            for gy in range(t.y_off[iy], t.y_off[iy + 1]):
                TFC_CHECK(0 <= t.z_src[gz] < Oz and 0 <= t.y_src[gy] < Oy)
                src = dy + ((b * Oz + t.z_src[gz]) * Oy + t.y_src[gy]) * Ox
                for x in range(Ox):
                    TFC_CHECK(0 <= x_idx[x] < Ix)
                    dst[x_idx[x]] = <nn_t>(dst[x_idx[x]] + src[x])
        return
    # the runs win on short float32 rows; at C = 128 and 256 (R4) the scatter's one stream
    # through dy reads faster with dy out of cache (docs/performance.md)
    cdef bint runs = nn_t is float and 8 <= C <= WINDOW_MAX_C
    if runs:
        _row_blocks(&bl, C)
    # the prefetch plan for the scatter only: a nearest row reads no dy row twice, so with the
    # runs the next row's dy rows just continue this row's stream (docs/performance.md)
    _plan_ahead(&ahead, r, <const char*>dy, b, iy, Ox * C * <Py_ssize_t>sizeof(nn_t),
                0 if runs else (t.y_off[iy + 1] - t.y_off[iy]) * Ox)
    memset(dst, 0, Ix * C * sizeof(nn_t))
    for gz in range(t.z_off[iz], t.z_off[iz + 1]):
        for gy in range(t.y_off[iy], t.y_off[iy + 1]):
            TFC_CHECK(0 <= t.z_src[gz] < Oz and 0 <= t.y_src[gy] < Oy)
            src = dy + ((b * Oz + t.z_src[gz]) * Oy + t.y_src[gy]) * Ox * C
            if nn_t is float:
                if runs:
                    _nearest_runs_f32(src, dst, Ox, Ix, C, &bl, x_idx)
                    continue
            for x in range(Ox):
                prefetch_lines(ahead.base, ahead.lines, ahead.q, (sweep * Ox + x) * ahead.q)
                TFC_CHECK(0 <= x_idx[x] < Ix)
                s = src + x * C
                d = dst + x_idx[x] * C
                for c in range(C):
                    # unsigned arithmetic: integer sums wrap as TF's int8/int32 sums do
                    d[c] = <nn_t>(d[c] + s[c])
            sweep = sweep + 1


cdef void _nearest_gather_row_f32(const float* dy, float* dx, Py_ssize_t row,
                                  const ResampleArgs* r) noexcept nogil:
    """The gather: each dx element summed in registers over its dy rows (ascending) and, in
    each, its run of x (ascending; the map is monotonic, so the x of one element are
    contiguous: r.x_off), starting from +0.0 as TF's zeroed output does, and stored once: no
    memset and no read-modify-write passes over the dx row. The terms and their order are the
    scatter's, so the bits are too."""
    cdef Py_ssize_t Iz = r.Iz, Iy = r.Iy, Ix = r.Ix, Oz = r.Oz, Oy = r.Oy, Ox = r.Ox, C = r.C
    cdef const RowTables* t = &r.t
    cdef const int32_t* x_off = r.x_off
    cdef Py_ssize_t b = row // (Iz * Iy)
    cdef Py_ssize_t iz = (row // Iy) % Iz
    cdef Py_ssize_t iy = row % Iy
    cdef float* dst = dx + row * Ix * C
    cdef const float* rows[GATHER_MAX_ROWS]
    cdef Py_ssize_t nrows = 0, gz, gy, i, x0, n, c0, rest, nv
    for gz in range(t.z_off[iz], t.z_off[iz + 1]):
        for gy in range(t.y_off[iy], t.y_off[iy + 1]):
            TFC_CHECK(0 <= t.z_src[gz] < Oz and 0 <= t.y_src[gy] < Oy
                      and nrows < GATHER_MAX_ROWS)
            rows[nrows] = dy + ((b * Oz + t.z_src[gz]) * Oy + t.y_src[gy]) * Ox * C
            nrows = nrows + 1
    for i in range(Ix):
        x0 = x_off[i]
        n = x_off[i + 1] - x0
        TFC_CHECK(0 <= x0 and 0 <= n and x0 + n <= Ox)
        # blocks of 64 channels, then of 32; the last 1 to 31 as one block of up to four
        # vectors whose last one ends at C (it may overlap the vector before it, or the block
        # before: every store of a lane writes the same sum, and nothing here reads dx)
        c0 = 0
        while c0 + 64 <= C:
            _gather_block(rows, nrows, x0, n, C, c0, dst + i * C + c0, 8, 8, 16, 24, 0)
            c0 += 64
        while c0 + 32 <= C:
            _gather_block(rows, nrows, x0, n, C, c0, dst + i * C + c0, 4, 8, 16, 24, 0)
            c0 += 32
        rest = C - c0
        if rest > 0:
            nv = (rest + 7) // 8
            c0 = C - 8 * nv if rest < 8 else c0
            rest = C - c0
            _gather_tail(rows, nrows, x0, n, C, c0, dst + i * C + c0, nv,
                         min(<Py_ssize_t>8, rest - 8), min(<Py_ssize_t>16, rest - 8), rest - 8, 0)


cdef void _nearest_share(const nn_t* dy, nn_t* dx, const ResampleArgs* r, int s,
                         int n) noexcept nogil:
    cdef Py_ssize_t row, nrows = r.rows_b * r.Iz * r.Iy
    if nn_t is float:
        if r.x_off != NULL:
            for row in range(_lo(nrows, s, n), _lo(nrows, s + 1, n)):
                _nearest_gather_row_f32(dy, dx, row, r)
            return
    for row in range(_lo(nrows, s, n), _lo(nrows, s + 1, n)):
        _nearest_row(dy, dx, row, r)
