# Linear (bi-, trilinear) resampling backward (docs/semantics.md: ResizeBilinearGrad,
# InterpolateBackward, ResizeGrad). The row walk is in rows.pxi. Three row kernels:
#   _linear_row          NXC rows: a window of registers (float32, 8 <= C <= 64), otherwise a
#                        scatter over the channels;
#   _linear_rows_c1      NCX (C = 1), float64 or float32 -> float64: C1_GROUP channels that
#                        share every table at once, their two live dx elements in registers;
#   _linear_rows_c8_f32  NCX float32: eight channels transposed into the NXC window.
# Every one adds the terms of each dx element in TF's order, so all give the same bits.

cdef enum:
    C1_GROUP = 4   # NCX channels walked together by _linear_rows_c1


cdef void _linear_row(const real_src* dy, real_acc* dx, Py_ssize_t row,
                      const ResampleArgs* r) noexcept nogil:
    cdef Py_ssize_t Iz = r.Iz, Iy = r.Iy, Ix = r.Ix, Oz = r.Oz, Oy = r.Oy, Ox = r.Ox, C = r.C
    cdef const RowTables* t = &r.t
    cdef const int32_t* x_lo = r.x_lo
    cdef const int32_t* x_hi = r.x_hi
    cdef const float* x_wlo = r.x_wlo
    cdef const float* x_whi = r.x_whi
    cdef Py_ssize_t b = row // (Iz * Iy)
    cdef Py_ssize_t iz = (row // Iy) % Iz
    cdef Py_ssize_t iy = row % Iy
    cdef real_acc* dst = dx + row * Ix * C
    cdef const real_src* src
    cdef const real_src* s
    cdef Py_ssize_t gz, gy, x, nr
    cdef real_src wr[4]
    cdef float wl, wh
    cdef Blocks bl
    cdef Ahead ahead
    cdef Py_ssize_t sweep = 0
    # the window wins on short channel rows; from C = 256 on (R4) the scatter's long channel
    # loops are faster (docs/performance.md)
    cdef bint window = (real_src is float and real_acc is float and 8 <= C <= WINDOW_MAX_C)
    if window:
        _row_blocks(&bl, C)
    _plan_ahead(&ahead, r, <const char*>dy, b, iy, Ox * C * <Py_ssize_t>sizeof(real_src),
                (t.y_off[iy + 1] - t.y_off[iy]) * (bl.n if window else 1) * Ox)
    memset(dst, 0, Ix * C * sizeof(real_acc))
    for gz in range(t.z_off[iz], t.z_off[iz + 1]):
        TFC_CHECK(0 <= t.z_src[gz] < Oz and 1 <= t.z_cnt[gz] <= 2)
        for gy in range(t.y_off[iy], t.y_off[iy + 1]):
            TFC_CHECK(0 <= t.y_src[gy] < Oy and 1 <= t.y_cnt[gy] <= 2)
            nr = _row_weights(t, gz, gy, wr)
            src = dy + ((b * Oz + t.z_src[gz]) * Oy + t.y_src[gy]) * Ox * C
            if real_src is float and real_acc is float:
                if window:
                    _window_row_f32(src, dst, Ox, Ix, C, &bl, wr, nr, x_lo, x_hi, x_wlo, x_whi,
                                    &ahead, sweep * bl.n * Ox)
                    sweep = sweep + 1
                    continue
            x = 0
            while x < Ox:
                prefetch_lines(ahead.base, ahead.lines, ahead.q, (sweep * Ox + x) * ahead.q)
                s = src + x * C
                wl = x_wlo[x]
                wh = x_whi[x]
                TFC_CHECK(0 <= x_lo[x] < Ix and 0 <= x_hi[x] < Ix)
                if (nr == 1 and x + 1 < Ox and x_lo[x] != x_hi[x] and x_lo[x + 1] == x_lo[x]
                        and x_hi[x + 1] == x_hi[x]):
                    # two pixels on the same pair of elements (every other pixel of a 2x
                    # upsampling): one read-modify-write of each element for both
                    prefetch_lines(ahead.base, ahead.lines, ahead.q,
                                   (sweep * Ox + x + 1) * ahead.q)
                    _two_pixels(dst + x_lo[x] * C, dst + x_hi[x] * C, s, s + C, C, wr[0],
                                wl, wh, x_wlo[x + 1], x_whi[x + 1])
                    x = x + 2
                    continue
                if x_lo[x] == x_hi[x]:
                    # both x taps land on one element: one read-modify-write, terms in TF order
                    _both_taps(dst + x_lo[x] * C, s, C, wr, nr, wl, wh)
                else:
                    _two_taps(dst + x_lo[x] * C, dst + x_hi[x] * C, s, C, wr, nr, wl, wh)
                x = x + 1
            sweep = sweep + 1


cdef inline void _two_taps(real_acc* dl, real_acc* dh, const real_src* s, Py_ssize_t C,
                           real_src* wr, Py_ssize_t nr, real_src wl, real_src wh) noexcept nogil:
    """dl[c] += (s[c] * wr[k]) * wl and dh[c] += (s[c] * wr[k]) * wh for k = 0..nr-1, in that
    order, in one pass over the channels that shares the load of s[c] and s[c] * wr[k]. dl and
    dh are different elements (lo != hi)."""
    cdef Py_ssize_t c, k
    cdef real_src w0 = wr[0], w1 = wr[1]
    cdef real_src v0, v1
    if nr == 1:
        for c in range(C):
            v0 = s[c] * w0
            dl[c] = dl[c] + <real_acc>(v0 * wl)
            dh[c] = dh[c] + <real_acc>(v0 * wh)
    elif nr == 2:
        for c in range(C):
            v0 = s[c] * w0
            v1 = s[c] * w1
            dl[c] = (dl[c] + <real_acc>(v0 * wl)) + <real_acc>(v1 * wl)
            dh[c] = (dh[c] + <real_acc>(v0 * wh)) + <real_acc>(v1 * wh)
    else:
        for k in range(nr):
            w0 = wr[k]
            for c in range(C):
                v0 = s[c] * w0
                dl[c] = dl[c] + <real_acc>(v0 * wl)
                dh[c] = dh[c] + <real_acc>(v0 * wh)


cdef inline void _two_pixels(real_acc* dl, real_acc* dh, const real_src* s1,
                             const real_src* s2, Py_ssize_t C, real_src w, real_src wl1,
                             real_src wh1, real_src wl2, real_src wh2) noexcept nogil:
    """_two_taps for pixel s1, then for pixel s2, both with one y weight w and the same dl,
    dh, in one pass: each element still gets s1's term, then s2's."""
    cdef Py_ssize_t c
    cdef real_src v1, v2
    for c in range(C):
        v1 = s1[c] * w
        v2 = s2[c] * w
        dl[c] = (dl[c] + <real_acc>(v1 * wl1)) + <real_acc>(v2 * wl2)
        dh[c] = (dh[c] + <real_acc>(v1 * wh1)) + <real_acc>(v2 * wh2)


cdef inline void _both_taps(real_acc* d, const real_src* s, Py_ssize_t C, real_src* wr,
                            Py_ssize_t nr, real_src wl, real_src wh) noexcept nogil:
    """For k = 0..nr-1: d[c] += (s[c]*wr[k])*wl, then d[c] += (s[c]*wr[k])*wh."""
    cdef Py_ssize_t c, k
    cdef real_src w0 = wr[0], w1 = wr[1]
    cdef real_src v0, v1
    if nr == 1:
        for c in range(C):
            v0 = s[c] * w0
            d[c] = (d[c] + <real_acc>(v0 * wl)) + <real_acc>(v0 * wh)
    elif nr == 2:
        for c in range(C):
            v0 = s[c] * w0
            v1 = s[c] * w1
            d[c] = (((d[c] + <real_acc>(v0 * wl)) + <real_acc>(v0 * wh))
                    + <real_acc>(v1 * wl)) + <real_acc>(v1 * wh)
    else:
        for k in range(nr):
            w0 = wr[k]
            for c in range(C):
                v0 = s[c] * w0
                d[c] = (d[c] + <real_acc>(v0 * wl)) + <real_acc>(v0 * wh)


# ---------------------------------------------------------------------------------------
# The window: float32 rows of 8 <= C <= 64 channels
# ---------------------------------------------------------------------------------------
# Along x with dst[lo] and dst[lo + 1] in registers (lo never decreases and hi is lo or
# lo + 1), over blocks of up to 32 channels as 8-lane vectors: per tap this saves the load and
# store of dst that the scatter pays.

cdef inline void _window_row_f32(const float* src, float* dst, Py_ssize_t Ox, Py_ssize_t Ix,
                                 Py_ssize_t C, const Blocks* bl, const float* wr, Py_ssize_t nr,
                                 const int32_t* x_lo, const int32_t* x_hi, const float* x_wlo,
                                 const float* x_whi, const Ahead* ah,
                                 Py_ssize_t step0) noexcept nogil:
    """One dy row's terms on one dx row, block by block; block k takes the plan's steps
    step0 + k * Ox on."""
    cdef Py_ssize_t k, c0, sk
    for k in range(bl.n):
        c0 = bl.c0[k]
        sk = step0 + k * Ox
        if _full_block(bl, k) and k == 0 and bl.n > 1:
            # the first block of a wider row also prefetches the rest of each pixel: alone,
            # each block's sweep reads every pixel's lines with gaps the prefetchers follow
            # badly when dy is 64-byte aligned (docs/performance.md)
            _window_block(src + c0, dst + c0, Ox, Ix, C, 4, 8, 16, 24,
                          wr, nr, x_lo, x_hi, x_wlo, x_whi, 1, ah, sk)
        elif _full_block(bl, k) and ah.lines == 0:
            # no prefetch plan (3-D rows, I1): a copy without its arithmetic
            _window_block(src + c0, dst + c0, Ox, Ix, C, 4, 8, 16, 24,
                          wr, nr, x_lo, x_hi, x_wlo, x_whi, 0, NULL, 0)
        elif _full_block(bl, k):
            _window_block(src + c0, dst + c0, Ox, Ix, C, 4, 8, 16, 24,
                          wr, nr, x_lo, x_hi, x_wlo, x_whi, 0, ah, sk)
        else:
            _window_tail(src + c0, dst + c0, Ox, Ix, C, bl.nv[k], bl.o1[k], bl.o2[k], bl.o3[k],
                         wr, nr, x_lo, x_hi, x_wlo, x_whi, ah, sk)


cdef inline void _window_tail(const float* src, float* dst, Py_ssize_t Ox, Py_ssize_t Ix,
                              Py_ssize_t C, Py_ssize_t nv, Py_ssize_t o1, Py_ssize_t o2,
                              Py_ssize_t o3, const float* wr, Py_ssize_t nr,
                              const int32_t* x_lo, const int32_t* x_hi, const float* x_wlo,
                              const float* x_whi, const Ahead* ah,
                              Py_ssize_t step0) noexcept nogil:
    """_window_block with its vector count as a literal, so that each call compiles without
    the count's tests in its loop (R3's C = 21 is such a block: docs/performance.md)."""
    if nv == 1:
        _window_block(src, dst, Ox, Ix, C, 1, o1, o2, o3, wr, nr, x_lo, x_hi, x_wlo, x_whi,
                      0, ah, step0)
    elif nv == 2:
        _window_block(src, dst, Ox, Ix, C, 2, o1, o2, o3, wr, nr, x_lo, x_hi, x_wlo, x_whi,
                      0, ah, step0)
    elif nv == 3:
        _window_block(src, dst, Ox, Ix, C, 3, o1, o2, o3, wr, nr, x_lo, x_hi, x_wlo, x_whi,
                      0, ah, step0)
    else:
        _window_block(src, dst, Ox, Ix, C, 4, o1, o2, o3, wr, nr, x_lo, x_hi, x_wlo, x_whi,
                      0, ah, step0)


cdef inline void _load_block(const float* d, Py_ssize_t nv, Py_ssize_t o1, Py_ssize_t o2,
                             Py_ssize_t o3, v8f* v0, v8f* v1, v8f* v2, v8f* v3) noexcept nogil:
    v0[0] = load8(d)
    if nv > 1:
        v1[0] = load8(d + o1)
    if nv > 2:
        v2[0] = load8(d + o2)
    if nv > 3:
        v3[0] = load8(d + o3)


cdef inline void _store_block(float* d, Py_ssize_t nv, Py_ssize_t o1, Py_ssize_t o2,
                              Py_ssize_t o3, v8f v0, v8f v1, v8f v2, v8f v3) noexcept nogil:
    store8(d, v0)
    if nv > 1:
        store8(d + o1, v1)
    if nv > 2:
        store8(d + o2, v2)
    if nv > 3:
        store8(d + o3, v3)


cdef inline void _window_block(const float* src, float* dst, Py_ssize_t Ox, Py_ssize_t Ix,
                               Py_ssize_t C, Py_ssize_t nv, Py_ssize_t o1, Py_ssize_t o2,
                               Py_ssize_t o3, const float* wr, Py_ssize_t nr,
                               const int32_t* x_lo, const int32_t* x_hi, const float* x_wlo,
                               const float* x_whi, bint ahead, const Ahead* ah,
                               Py_ssize_t step0) noexcept nogil:
    """The window on nv = 1..4 vectors at channel offsets 0, o1, o2, o3 (up to eight
    independent chains of adds). ``ahead``: also prefetch the 128 bytes of the pixel that follow
    the block (the first block of a wider row). ``ah`` (or NULL): a prefetch plan, whose steps
    step0 on are this sweep's."""
    cdef Py_ssize_t x, q, lo, cur = x_lo[0]
    cdef v8f zero = splat8(0)
    cdef v8f a0 = zero, a1 = zero, a2 = zero, a3 = zero, b0 = zero, b1 = zero, b2 = zero
    cdef v8f b3 = zero, s0 = zero, s1 = zero, s2 = zero, s3 = zero, w, wl, wh, v
    cdef const float* p
    TFC_CHECK(0 <= cur < Ix and 1 <= nv <= 4 and (nv == 1 or 0 < o1 <= o2 <= o3)
              and 8 * (nv == 1) + o3 * (nv > 1) + 8 * (nv > 1) <= C)
    _load_block(dst + cur * C, nv, o1, o2, o3, &a0, &a1, &a2, &a3)
    if cur + 1 < Ix:
        _load_block(dst + (cur + 1) * C, nv, o1, o2, o3, &b0, &b1, &b2, &b3)
    for x in range(Ox):
        lo = x_lo[x]
        TFC_CHECK(cur <= lo < Ix and (x_hi[x] == lo or x_hi[x] == lo + 1) and x_hi[x] < Ix)
        if lo != cur:
            _store_block(dst + cur * C, nv, o1, o2, o3, a0, a1, a2, a3)
            if lo == cur + 1:
                a0 = b0; a1 = b1; a2 = b2; a3 = b3
            else:
                if cur + 1 < Ix:
                    _store_block(dst + (cur + 1) * C, nv, o1, o2, o3, b0, b1, b2, b3)
                _load_block(dst + lo * C, nv, o1, o2, o3, &a0, &a1, &a2, &a3)
            cur = lo
            b0 = zero; b1 = zero; b2 = zero; b3 = zero
            if cur + 1 < Ix:
                _load_block(dst + (cur + 1) * C, nv, o1, o2, o3, &b0, &b1, &b2, &b3)
        wl = splat8(x_wlo[x])
        wh = splat8(x_whi[x])
        p = src + x * C
        if ah != NULL:
            prefetch_lines(ah.base, ah.lines, ah.q, (step0 + x) * ah.q)
        if ahead:
            # the next block's lines of this pixel (C > 32). A prefetch is a hint that never
            # faults; on the last pixel of dy, p + 48 may point past its end (C < 64)
            prefetch(p + 32)
            prefetch(p + 48)
        if nr == 1 and x_hi[x] != lo:
            # the common case, written so that only one source vector is live at a time
            w = splat8(wr[0])
            v = load8(p) * w
            a0 = a0 + v * wl
            b0 = b0 + v * wh
            if nv > 1:
                v = load8(p + o1) * w
                a1 = a1 + v * wl
                b1 = b1 + v * wh
            if nv > 2:
                v = load8(p + o2) * w
                a2 = a2 + v * wl
                b2 = b2 + v * wh
            if nv > 3:
                v = load8(p + o3) * w
                a3 = a3 + v * wl
                b3 = b3 + v * wh
            continue
        _load_block(p, nv, o1, o2, o3, &s0, &s1, &s2, &s3)
        for q in range(nr):
            w = splat8(wr[q])
            if x_hi[x] == lo:
                a0 = (a0 + (s0 * w) * wl) + (s0 * w) * wh
                if nv > 1:
                    a1 = (a1 + (s1 * w) * wl) + (s1 * w) * wh
                if nv > 2:
                    a2 = (a2 + (s2 * w) * wl) + (s2 * w) * wh
                if nv > 3:
                    a3 = (a3 + (s3 * w) * wl) + (s3 * w) * wh
            else:
                a0 = a0 + (s0 * w) * wl
                b0 = b0 + (s0 * w) * wh
                if nv > 1:
                    a1 = a1 + (s1 * w) * wl
                    b1 = b1 + (s1 * w) * wh
                if nv > 2:
                    a2 = a2 + (s2 * w) * wl
                    b2 = b2 + (s2 * w) * wh
                if nv > 3:
                    a3 = a3 + (s3 * w) * wl
                    b3 = b3 + (s3 * w) * wh
    _store_block(dst + cur * C, nv, o1, o2, o3, a0, a1, a2, a3)
    if cur + 1 < Ix:
        _store_block(dst + (cur + 1) * C, nv, o1, o2, o3, b0, b1, b2, b3)


# ---------------------------------------------------------------------------------------
# NCX rows
# ---------------------------------------------------------------------------------------

cdef inline void _c1_get(const real_acc* dst, Py_ssize_t dp, Py_ssize_t G, Py_ssize_t i,
                         Py_ssize_t Ix, real_acc* a0, real_acc* a1, real_acc* a2,
                         real_acc* a3) noexcept nogil:
    """a_k = dst[k * dp + i] for the G channels, or 0 past the row's end."""
    if i >= Ix:
        a0[0] = 0; a1[0] = 0; a2[0] = 0; a3[0] = 0
        return
    a0[0] = dst[i]
    if G > 1:
        a1[0] = dst[dp + i]
    if G > 2:
        a2[0] = dst[2 * dp + i]
    if G > 3:
        a3[0] = dst[3 * dp + i]


cdef inline void _c1_put(real_acc* dst, Py_ssize_t dp, Py_ssize_t G, Py_ssize_t i, real_acc a0,
                         real_acc a1, real_acc a2, real_acc a3) noexcept nogil:
    dst[i] = a0
    if G > 1:
        dst[dp + i] = a1
    if G > 2:
        dst[2 * dp + i] = a2
    if G > 3:
        dst[3 * dp + i] = a3


cdef inline void _c1_source_row(const real_src* src, Py_ssize_t sp, real_acc* dst,
                                Py_ssize_t dp, Py_ssize_t G, Py_ssize_t Ox, Py_ssize_t Ix,
                                const real_src* wr, Py_ssize_t nr, const int32_t* x_lo,
                                const int32_t* x_hi, const float* x_wlo,
                                const float* x_whi) noexcept nogil:
    """G = 1..C1_GROUP channels (planes sp apart in dy, dp in dx) of one dy row: for each,
    dst[lo] += (s*wr[q])*wl and dst[hi] += (s*wr[q])*wh, x ascending, q inner. A channel row
    of length 1 costs more than its body and forms one chain of adds through memory, so the
    G channels run together, dst[lo] and dst[lo + 1] of channel k in registers pk and nk
    while lo stays put (lo never decreases; hi is lo or lo + 1)."""
    cdef Py_ssize_t x, q, lo, cur = x_lo[0]
    cdef real_acc p0 = 0, p1 = 0, p2 = 0, p3 = 0, n0 = 0, n1 = 0, n2 = 0, n3 = 0
    cdef real_src w, wl, wh, v0, v1 = 0, v2 = 0, v3 = 0
    TFC_CHECK(0 <= cur < Ix and 1 <= G <= C1_GROUP)
    _c1_get(dst, dp, G, cur, Ix, &p0, &p1, &p2, &p3)
    _c1_get(dst, dp, G, cur + 1, Ix, &n0, &n1, &n2, &n3)
    for x in range(Ox):
        lo = x_lo[x]
        TFC_CHECK(cur <= lo < Ix and (x_hi[x] == lo or x_hi[x] == lo + 1) and x_hi[x] < Ix)
        if lo != cur:
            _c1_put(dst, dp, G, cur, p0, p1, p2, p3)
            if lo == cur + 1:
                p0 = n0; p1 = n1; p2 = n2; p3 = n3
            else:
                if cur + 1 < Ix:
                    _c1_put(dst, dp, G, cur + 1, n0, n1, n2, n3)
                _c1_get(dst, dp, G, lo, Ix, &p0, &p1, &p2, &p3)
            _c1_get(dst, dp, G, lo + 1, Ix, &n0, &n1, &n2, &n3)
            cur = lo
        wl = x_wlo[x]
        wh = x_whi[x]
        for q in range(nr):
            w = wr[q]
            v0 = src[x] * w
            if G > 1:
                v1 = src[sp + x] * w
            if G > 2:
                v2 = src[2 * sp + x] * w
            if G > 3:
                v3 = src[3 * sp + x] * w
            if x_hi[x] == lo:
                p0 = (p0 + <real_acc>(v0 * wl)) + <real_acc>(v0 * wh)
                p1 = (p1 + <real_acc>(v1 * wl)) + <real_acc>(v1 * wh)
                p2 = (p2 + <real_acc>(v2 * wl)) + <real_acc>(v2 * wh)
                p3 = (p3 + <real_acc>(v3 * wl)) + <real_acc>(v3 * wh)
            else:
                p0 = p0 + <real_acc>(v0 * wl)
                n0 = n0 + <real_acc>(v0 * wh)
                p1 = p1 + <real_acc>(v1 * wl)
                n1 = n1 + <real_acc>(v1 * wh)
                p2 = p2 + <real_acc>(v2 * wl)
                n2 = n2 + <real_acc>(v2 * wh)
                p3 = p3 + <real_acc>(v3 * wl)
                n3 = n3 + <real_acc>(v3 * wh)
    _c1_put(dst, dp, G, cur, p0, p1, p2, p3)
    if cur + 1 < Ix:
        _c1_put(dst, dp, G, cur + 1, n0, n1, n2, n3)


cdef void _linear_rows_c1(const real_src* dy, real_acc* dx, Py_ssize_t item,
                          const ResampleArgs* r) noexcept nogil:
    """Row (iz, iy) of the channels c0 .. c0 + G - 1 (item = channel group * Iz*Iy + iz*Iy + iy)."""
    cdef Py_ssize_t Iz = r.Iz, Iy = r.Iy, Ix = r.Ix, Oz = r.Oz, Oy = r.Oy, Ox = r.Ox
    cdef const RowTables* t = &r.t
    cdef Py_ssize_t sp = item % (Iz * Iy), c0 = (item // (Iz * Iy)) * C1_GROUP
    cdef Py_ssize_t iz = sp // Iy, iy = sp % Iy, G = min(<Py_ssize_t>C1_GROUP, r.rows_b - c0)
    cdef Py_ssize_t in_plane = Iz * Iy * Ix, out_plane = Oz * Oy * Ox
    cdef real_acc* dst = dx + c0 * in_plane + sp * Ix
    cdef const real_src* src
    cdef Py_ssize_t gz, gy, nr, k
    cdef real_src wr[4]
    for k in range(G):
        memset(dst + k * in_plane, 0, Ix * sizeof(real_acc))
    for gz in range(t.z_off[iz], t.z_off[iz + 1]):
        TFC_CHECK(0 <= t.z_src[gz] < Oz and 1 <= t.z_cnt[gz] <= 2)
        for gy in range(t.y_off[iy], t.y_off[iy + 1]):
            TFC_CHECK(0 <= t.y_src[gy] < Oy and 1 <= t.y_cnt[gy] <= 2)
            nr = _row_weights(t, gz, gy, wr)
            src = dy + c0 * out_plane + (t.z_src[gz] * Oy + t.y_src[gy]) * Ox
            if G == C1_GROUP and nr == 1:
                # literal counts: the common case compiles without the loops' tests
                _c1_source_row(src, out_plane, dst, in_plane, C1_GROUP, Ox, Ix, wr, 1,
                               r.x_lo, r.x_hi, r.x_wlo, r.x_whi)
            else:
                _c1_source_row(src, out_plane, dst, in_plane, G, Ox, Ix, wr, nr,
                               r.x_lo, r.x_hi, r.x_wlo, r.x_whi)


cdef void _linear_rows_c8_f32(const float* dy, float* dx, Py_ssize_t item,
                              const ResampleArgs* r, float* work) noexcept nogil:
    """NCX float32, row (iz, iy) of the channels c0 .. c0 + 7 (item = channel group * Iz*Iy +
    iz*Iy + iy), through the NXC window: each contributing dy row of the eight channels is
    transposed into an [Ox, 8] block (missing channels of a last, short group are zeros), the
    window accumulates the [Ix, 8] dx block, which is transposed back into the eight dx rows.
    The window adds every element's terms in the NXC order, which is also the NCX order.
    ``work``: this thread's r.work_per_thread = (Ox + Ix) * 8 floats."""
    cdef Py_ssize_t Iz = r.Iz, Iy = r.Iy, Ix = r.Ix, Oz = r.Oz, Oy = r.Oy, Ox = r.Ox
    cdef const RowTables* t = &r.t
    cdef Py_ssize_t sp = item % (Iz * Iy), c0 = (item // (Iz * Iy)) * 8
    cdef Py_ssize_t iz = sp // Iy, iy = sp % Iy, G = min(<Py_ssize_t>8, r.rows_b - c0)
    cdef Py_ssize_t in_plane = Iz * Iy * Ix, out_plane = Oz * Oy * Ox
    cdef float* sbuf = work
    cdef float* dbuf = work + Ox * 8
    cdef const float* src
    cdef Py_ssize_t gz, gy, nr, k, x
    cdef float wr[4]
    TFC_CHECK(r.work_per_thread >= (Ox + Ix) * 8)
    memset(dbuf, 0, Ix * 8 * sizeof(float))
    if G < 8:
        memset(sbuf, 0, Ox * 8 * sizeof(float))
    for gz in range(t.z_off[iz], t.z_off[iz + 1]):
        TFC_CHECK(0 <= t.z_src[gz] < Oz and 1 <= t.z_cnt[gz] <= 2)
        for gy in range(t.y_off[iy], t.y_off[iy + 1]):
            TFC_CHECK(0 <= t.y_src[gy] < Oy and 1 <= t.y_cnt[gy] <= 2)
            nr = _row_weights(t, gz, gy, wr)
            src = dy + c0 * out_plane + (t.z_src[gz] * Oy + t.y_src[gy]) * Ox
            interleave8(src, out_plane, sbuf, Ox, G)
            _window_block(sbuf, dbuf, Ox, Ix, 8, 1, 0, 0, 0, wr, nr, r.x_lo, r.x_hi, r.x_wlo,
                          r.x_whi, 0, NULL, 0)
    for k in range(G):
        for x in range(Ix):
            dx[(c0 + k) * in_plane + sp * Ix + x] = dbuf[x * 8 + k]


# ---------------------------------------------------------------------------------------
# The entry: every row in parallel
# ---------------------------------------------------------------------------------------

cdef void _linear_share(const real_src* dy, real_acc* dx, const ResampleArgs* r, float* work,
                        int s, int n) noexcept nogil:
    """Share s of n of dx from dy; ``work`` holds n * r.work_per_thread floats."""
    cdef Py_ssize_t row, nrows = r.rows_b * r.Iz * r.Iy
    # NCX: channel groups of 8 (float32, through the window) or C1_GROUP, times the rows
    cdef Py_ssize_t group = 8 if (real_src is float and real_acc is float) else C1_GROUP
    cdef Py_ssize_t items = ((r.rows_b + group - 1) // group) * r.Iz * r.Iy
    if r.C == 1:
        if real_src is float and real_acc is float:
            for row in range(_lo(items, s, n), _lo(items, s + 1, n)):
                _linear_rows_c8_f32(dy, dx, row, r, work + s * r.work_per_thread)
        else:
            for row in range(_lo(items, s, n), _lo(items, s + 1, n)):
                _linear_rows_c1(dy, dx, row, r)
    else:
        for row in range(_lo(nrows, s, n), _lo(nrows, s + 1, n)):
            _linear_row(dy, dx, row, r)
