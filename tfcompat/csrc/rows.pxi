# The row walk shared by the linear and nearest backward kernels.
#
# Canonical layout: dy [rows_b, Oz, Oy, Ox, C] and dx [rows_b, Iz, Iy, Ix, C], C-contiguous.
# NCX data is passed as rows_b = batch * channels and C = 1; 1-D and 2-D problems have trivial
# leading axes (size 1 -> 1, weight exactly 1.0f). Each dx row (b, iz, iy) is owned by one
# thread: it gathers the dy rows (z, y) listed in the z and y tables and, inside that private
# row, adds along x with the forward x map. For one dx element the terms arrive in TF's order:
# (z, y, x) raster, then the corners (top before bottom, left before right). So no atomics, and
# the result does not depend on the number of threads.

cdef enum:
    WINDOW_MAX_C = 64      # the float32 window and runs take rows of 8 to 64 channels


cdef struct RowTables:
    # z and y: gather tables (CSR in ascending resized index, tfcompat/csrc/coords.pxi's
    # invert_axis_map); a nearest plan has no counts and weights
    const int32_t* z_off
    const int32_t* z_src
    const int32_t* z_cnt
    const float* z_w0
    const float* z_w1
    const int32_t* y_off
    const int32_t* y_src
    const int32_t* y_cnt
    const float* y_w0
    const float* y_w1


cdef struct ResampleArgs:
    Py_ssize_t rows_b, Iz, Iy, Ix, Oz, Oy, Ox, C
    RowTables t
    # x: the forward map; linear: lo, hi, w_lo, w_hi; nearest: the index in x_lo
    const int32_t* x_lo
    const int32_t* x_hi
    const float* x_wlo
    const float* x_whi
    # nearest float32 gather: dx column i takes the x in [x_off[i], x_off[i + 1]); or NULL
    const int32_t* x_off
    # floats of per-thread scratch the kernel uses (NCX float32 linear), 0 otherwise
    Py_ssize_t work_per_thread


cdef inline Py_ssize_t _row_weights(const RowTables* t, Py_ssize_t gz, Py_ssize_t gy,
                                    real_src* wr) noexcept nogil:
    """The weights of dy row (z_src[gz], y_src[gy]) on this dx row, z tap outer, y tap inner
    (TF's top before bottom), in the data's precision (float: TF's rounding). Returns how many.
    In 2-D the z weight is exactly 1.0f, so wr is the y weight bit for bit."""
    cdef float wz[2]
    cdef float wy[2]
    cdef Py_ssize_t a, q, nr = 0
    wz[0] = t.z_w0[gz]
    wz[1] = t.z_w1[gz]
    wy[0] = t.y_w0[gy]
    wy[1] = t.y_w1[gy]
    for a in range(t.z_cnt[gz]):
        for q in range(t.y_cnt[gy]):
            wr[nr] = <real_src>wz[a] * <real_src>wy[q]
            nr = nr + 1
    return nr


cdef struct Blocks:
    # a float32 row of C channels as blocks of nv = 1..4 vectors: block k starts at channel
    # c0[k] and its vectors at c0[k] + (0, o1[k], o2[k], o3[k])
    Py_ssize_t n
    Py_ssize_t c0[4]
    Py_ssize_t nv[4]
    Py_ssize_t o1[4]
    Py_ssize_t o2[4]
    Py_ssize_t o3[4]


cdef inline void _add_block(Blocks* bl, Py_ssize_t c0, Py_ssize_t r) noexcept nogil:
    """Channels c0 .. c0 + r - 1 (8 <= r <= 32) as one block; its last vector ends at r."""
    cdef Py_ssize_t k = bl.n
    bl.c0[k] = c0
    bl.nv[k] = (r + 7) // 8
    bl.o1[k] = min(<Py_ssize_t>8, r - 8)
    bl.o2[k] = min(<Py_ssize_t>16, r - 8)
    bl.o3[k] = min(<Py_ssize_t>24, r - 8)
    bl.n = k + 1


cdef inline void _row_blocks(Blocks* bl, Py_ssize_t C) noexcept nogil:
    """Blocks of 32 channels, then a last block of 8 to 32 (33 to 39 left: 16, then the rest).
    Blocks never overlap each other; only the vectors inside one block do (when C % 8 != 0 the
    last vector of a block overlaps the one before it: C = 21 gives lanes 0, 8, 13; the shared
    lanes receive the same terms in the same order, so both stores write the same bits).
    8 <= C <= 64."""
    cdef Py_ssize_t c0 = 0
    TFC_CHECK(8 <= C <= WINDOW_MAX_C)
    bl.n = 0
    while C - c0 >= 40:
        _add_block(bl, c0, 32)
        c0 += 32
    if C - c0 > 32:
        _add_block(bl, c0, 16)
        c0 += 16
    _add_block(bl, c0, C - c0)


cdef inline bint _full_block(const Blocks* bl, Py_ssize_t k) noexcept nogil:
    """Block k is 32 channels at offsets 0, 8, 16, 24: the callers pass those as literals, so
    that the inlined block loop compiles without its vector-count tests (docs/performance.md)."""
    return bl.nv[k] == 4 and bl.o3[k] == 24


cdef struct Ahead:
    # the dy rows that the next dx row reads and this one does not, fetched a few lines per
    # step of this row's sweeps (see _plan_ahead): ``lines`` 64-byte lines from ``base``,
    # ``q`` per step, step j of the row (sweeps numbered in order) from line j * q on
    const char* base
    Py_ssize_t lines
    Py_ssize_t q


cdef inline void _plan_ahead(Ahead* a, const ResampleArgs* r, const char* dy, Py_ssize_t b,
                             Py_ssize_t iy, Py_ssize_t row_bytes, Py_ssize_t steps) noexcept nogil:
    """2-D only (Iz == Oz == 1; otherwise, or with no steps, an empty plan): the dy rows of
    the next dx row (iy + 1, or row 0 of the next image) that this row (b, iy) does not read,
    as a plan of ``steps`` steps. A row's dy rows ascend (TF's order), so they are the ones
    past this row's last. Without such a plan half the sweeps of an upsampling row wait on
    memory (the new rows) and the other half leave it idle (rows the row before already
    brought in). ``row_bytes``: the bytes of one dy row. See docs/performance.md."""
    cdef const RowTables* t = &r.t
    cdef Py_ssize_t r0, r1, nb = b, n0, n1
    a.base = NULL
    a.lines = 0
    a.q = 1
    if steps <= 0 or r.Iz != 1 or r.Oz != 1:
        return
    if iy + 1 < r.Iy:
        n0 = t.y_off[iy + 1]
        n1 = t.y_off[iy + 2]
    elif b + 1 < r.rows_b:
        nb = b + 1
        n0 = t.y_off[0]
        n1 = t.y_off[1]
    else:
        return
    if n1 <= n0:
        return  # the next row reads no dy row (downsampling)
    r0 = t.y_src[n0]
    r1 = t.y_src[n1 - 1]
    if nb == b and t.y_off[iy] < n0:
        r0 = max(r0, t.y_src[n0 - 1] + 1)  # past this row's last
    if r1 < r0:
        return
    TFC_CHECK(0 <= r0 and r1 < r.Oy)
    # prefetches never fault, but the plan stays inside dy all the same (its last line may
    # reach past dy's last byte only within that line)
    a.base = dy + (nb * r.Oy + r0) * row_bytes
    a.lines = ((r1 - r0 + 1) * row_bytes + 63) // 64
    a.q = (a.lines + steps - 1) // steps
