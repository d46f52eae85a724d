# The tile strategies (docs/architecture.md#the-conv-strategies; tiles_channel.h,
# tiles_lanes.h): the stride phases of the gathers without a gather or a GEMM. The channel
# tiles: each tile of 6 dx pixels by 64 channels sums its taps' products from dy in place, in
# registers, and is stored at its dx positions (by streaming stores into a large float32 dx).
# A C that is not a multiple of 16 has its filter's taps padded with zero columns up to the
# next one (tile_c), and the last vector of each pixel stores only its dx channels. Where the
# filter's taps for all of C overflow the Python layer's budget, the bands run once per group
# of column blocks whose taps fit (ConvCore.group_cols), so that group stays in L2 for all of a
# thread's images; the threads share out the groups (each its own run of them) and, with
# ``raw``, each copies the taps of the groups it runs from the filter itself. The lane tiles
# (few input channels, tfc_oc_rows): 16 of dy's output channels in the lanes instead, each dx
# value's lanes summed at the end (with at most 8 output channels, 16 // OC dx pixels a vector:
# tfc_px_row). A half type is widened to float32 as dy is read (the lane tiles) or a window of
# rows at a time per worker (the channel tiles), and each dx value rounded once.

cdef extern from "tiles_channel.h":
    enum: TFC_TILE_M
    enum: TFC_TILE_M2
    enum: TFC_TILE_C
    enum: TFC_TILE_SEGS
    void tile_rows "tfc_tile_rows"(const float* const* rows, Py_ssize_t nrows,
                                   const int32_t* cols, const float* const* b, Py_ssize_t taps,
                                   Py_ssize_t OW, Py_ssize_t K, Py_ssize_t cb, Py_ssize_t ce,
                                   Py_ssize_t C, const float* zero, const float** a, float* buf,
                                   void* out, Py_ssize_t width, Py_ssize_t ps,
                                   Py_ssize_t rs, int half) noexcept nogil

cdef extern from "tiles_lanes.h":
    enum: TFC_OC_MAX_C
    enum: TFC_PX_MAX_K
    void oc_rows "tfc_oc_rows"(const void* const* rows, const int32_t* cols,
                               const float* const* b, Py_ssize_t taps, Py_ssize_t OW,
                               Py_ssize_t K, Py_ssize_t C, void* out, Py_ssize_t width,
                               Py_ssize_t ps, int storage, int pixels) noexcept nogil

# Phase rows whose tiles would average 4 pixels or fewer (widths 1-4, 7, 8) go to the channel
# tiles as runs of up to TILE_RUN_PIXELS pixels (at most TILE_RUN_ROWS rows), where ``runs``:
# fuller tiles, each step's filter block read from L1 by all of them instead of by one row's
# two, at the price of multiplying the zeros outside dy (docs/performance.md#channel-tiles);
# the sizes of each worker's scratch (_tile_scratch)
cdef enum:
    TILE_RUN_PIXELS = 192
    TILE_RUN_ROWS = 32

# the channel tiles' filter blocks' columns (conv_filter_taps's ``block``)
CONV_TILE_BLOCK = TFC_TILE_C
# the most input channels of the lane tiles, and the most output channels whose dx pixels
# share a vector (tfc_px_row)
CONV_LANES_MAX_C = TFC_OC_MAX_C
CONV_PIXEL_LANES_MAX_OC = TFC_PX_MAX_K


cdef struct TileArgs:
    bint lanes              # the lane tiles (tfc_oc_rows); taps [C, tile_k]
    Py_ssize_t tile_c       # the channel tiles' filter columns, C rounded up to 16; else C
    Py_ssize_t tile_k       # lanes: OC rounded up to 16, each tap's [C, tile_k]; else OC
    Py_ssize_t window       # a half type's widened dy rows per worker (_tile_window); else 0
    # more than one group of group_cols columns, copied by each worker: ph_b is the filter
    # itself ([fh * fw, tile_c, OC], dy's type, zeros from C on), whose taps rows[i] each worker
    # transposes (and widens) for one group at a time (_tile_group_taps); else ph_b holds every
    # tap's matrix
    bint raw
    bint stream             # float32 dx stored with streaming stores
    bint runs               # narrow rows go in runs (TILE_RUN_PIXELS)
    bint pixels             # the lane tiles hold dx pixels in the lanes for OC <= 8
    const int32_t* rows
    Py_ssize_t taps_n       # the taps of all phases: rows' length


cdef inline bint _tile_rows_run(Py_ssize_t width) noexcept nogil:
    """Whether phase rows of ``width`` pixels are narrow enough for runs of rows: where their
    own tiles would average 4 pixels or fewer."""
    return width <= 4 * ((width + TFC_TILE_M - 1) // TFC_TILE_M)


def conv_tile_rows_run(Py_ssize_t width):
    """_tile_rows_run, for the Python layer's bands."""
    return bool(_tile_rows_run(width))


cdef inline Py_ssize_t _tile_scratch(Py_ssize_t T, Py_ssize_t OC, Py_ssize_t W) noexcept nogil:
    """The floats of _tile_phase_band's scratch for T = fh * fw taps: the dy row pointers of
    TILE_RUN_ROWS rows, a pointer to each tap's filter, a tile's pointers (2 floats each), an
    int32 column per tap, OC zeros, then the running totals of max(W, TILE_RUN_PIXELS)
    pixels from the next 64-byte boundary; even, so that every worker's pointers are 8-byte
    aligned."""
    cdef Py_ssize_t n = (2 * (T * TILE_RUN_ROWS + T + TFC_TILE_SEGS * TFC_TILE_M2) + T + OC + 16
                         + TFC_TILE_C * max(W, TILE_RUN_PIXELS))
    return n + n % 2


def conv_tile_scratch(Py_ssize_t taps, Py_ssize_t OC, Py_ssize_t W):
    """Floats of scratch per worker the tile kernels need (_tile_scratch)."""
    return _tile_scratch(taps, OC, W)


cdef inline Py_ssize_t _tile_window(const ConvCore* c, const TileArgs* t,
                                    Py_ssize_t wide_values) noexcept nogil:
    """The dy rows of a half type's widened window (the channel tiles): as many as fit in
    wide_values, at least every band's rows and the span of its taps' rows, at most OH; 0 for
    float32 and the lane tiles (which read 16-bit dy values themselves)."""
    cdef Py_ssize_t p, lo, hi, most
    cdef const int32_t* info
    if c.storage == STORE_NATIVE or t.lanes:
        return 0
    most = wide_values // max(1, c.OW * c.OC)
    for p in range(c.phases):
        info = c.ph_info + p * PH_WIDTH
        if info[4] == 0:
            continue
        lo = _tap_rows(c.ph_offy + p * c.fh, info[4], &hi)
        most = max(most, info[6] + hi - lo)
    return max(1, min(most, c.OH))


cdef inline Py_ssize_t* _tile_state(float* work, const ConvCore* c) noexcept nogil:
    """A worker's state, 64-byte aligned after _tile_scratch's floats: [image, first row, end
    row] of its widened window, and the first column of the group whose taps it holds; the
    window's rows follow 16 floats on."""
    return <Py_ssize_t*>((<intptr_t>(work + _tile_scratch(c.fh * c.fw, c.OC, c.W)) + 63)
                         & ~(<intptr_t>63))


cdef inline Py_ssize_t _tile_widened(const ConvCore* c, const TileArgs* t) noexcept nogil:
    """The floats after _tile_scratch's: 16 to reach a 64-byte boundary, 16 for the state
    (_tile_state), then the widened window's rows."""
    return 32 + t.window * c.OW * c.OC


cdef inline float* _tile_group(float* work, const ConvCore* c,
                               const TileArgs* t) noexcept nogil:
    """A worker's group of filter taps (raw), 64-byte aligned after _tile_scratch's and
    _tile_widened's floats: taps_n taps, [tile_k, ce - cb] each, in blocks of TFC_TILE_C
    columns as conv_filter_taps lays them out."""
    return <float*>((<intptr_t>(work + _tile_scratch(c.fh * c.fw, c.OC, c.W)
                                + _tile_widened(c, t)) + 63) & ~(<intptr_t>63))


cdef void _tile_group_taps(float* work, Py_ssize_t cb, Py_ssize_t ce, const ConvCore* c,
                           const TileArgs* t) noexcept nogil:
    """The worker's group of taps (_tile_group) for dx columns cb <= c < ce, transposed from
    the filter itself (raw; a half type's widened to float32 as it is copied): each worker
    copies the taps of the groups it runs, as it comes to them, so a filter too large for L2
    is read once, in the worker that uses it, rather than copied whole before the threads
    start and read back."""
    cdef float* out = _tile_group(work, c, t)
    cdef Py_ssize_t i, o0, at
    for i in range(t.taps_n):
        at = (t.rows[i] * t.tile_c + cb) * c.OC
        o0 = 0
        while o0 < c.OC:
            if c.storage == STORE_NATIVE:
                _tap_block(<const uint32_t*>c.ph_b + at, out + i * c.OC * (ce - cb), ce - cb,
                           c.OC, o0, TFC_TILE_C, True, 0)
            else:
                _tap_block(<const uint16_t*>c.ph_b + at, out + i * c.OC * (ce - cb), ce - cb,
                           c.OC, o0, TFC_TILE_C, True, c.storage)
            o0 += TAP_TILE


cdef void _tile_phase_band(const void* dy, float* work, void* dx, Py_ssize_t n, Py_ssize_t p,
                           Py_ssize_t j0, Py_ssize_t cb, Py_ssize_t ce,
                           const ConvCore* c, const TileArgs* t) noexcept nogil:
    """The band of phase p from phase row j0 of image n by the tile kernels (tiles_channel.h, tiles_lanes.h): dx at
    (py + sh j, px + sw i), channels cb <= c < ce, sums, over the phase's taps (ta, tb),
    dy[j + offy[ta], i + offx[tb]] times the tap's [OC, C] matrix (tfc_tile_rows's order of
    sums), stored straight into dx (a half type's rounded once from its float32 sum; its dy
    rows the band reads widened to float32 first, into the scratch after _tile_scratch's). A
    row whose tiles would average more than 4 pixels goes alone and takes only the taps whose
    dy row is inside dy; narrower rows go in runs (see TILE_RUN_PIXELS) that take every tap,
    reading zeros outside dy (but for a tile's first and last pixel: tiles_channel.h). With ``lanes``
    (the lane tiles), every row goes alone to tfc_oc_rows, in its order of sums, which reads
    16-bit dy values itself.
    work: _tile_scratch's floats, laid out as it says, then _tile_widened's (its state
    reset by _tile_start for each call)."""
    cdef const int32_t* info = c.ph_info + p * PH_WIDTH
    cdef const int32_t* offy = c.ph_offy + p * c.fh
    cdef const int32_t* offx = c.ph_offx + p * c.fw
    cdef Py_ssize_t T = c.fh * c.fw, taps, ta, tb, jj, j, oy, rows_left, run, r, out
    cdef const float** rows = <const float**>work
    cdef const float** b = rows + T * TILE_RUN_ROWS
    cdef const float** a = b + T
    cdef int32_t* cols = <int32_t*>(a + TFC_TILE_SEGS * TFC_TILE_M2)
    cdef float* zero = <float*>(cols + T)
    # the running totals on a 64-byte boundary, each vector in one cache line
    cdef float* buf = <float*>((<intptr_t>(zero + c.OC) + 63) & ~(<intptr_t>63))
    # the phase's first tap's block cb, and the values from one tap's to the next's
    cdef const float* taps_b = <const float*>c.ph_b + info[7] + t.tile_k * cb
    cdef Py_ssize_t tap_step = t.tile_k * t.tile_c
    cdef Py_ssize_t width = info[3], ps = c.sw * c.C, rs = c.sh * c.W * c.C
    cdef Py_ssize_t size = 4 if c.storage == STORE_NATIVE else 2
    cdef Py_ssize_t pix = c.OW * c.OC, lo = 0, hi
    cdef int half = 0 if t.lanes else c.storage
    cdef int store = TFC_STORE_STREAM if t.stream else half    # tile_rows's ``half``
    # dy row oy is at rbase + (oy - lo) * pix values of rsize bytes: image n's own rows, or
    # the widened ones from row lo
    cdef const char* rbase = <const char*>dy + n * c.OH * pix * size
    cdef Py_ssize_t rsize = size
    cdef float* wide
    cdef Py_ssize_t* header
    if width == 0:      # an image narrower than the stride: this phase has no dx columns
        return
    if t.raw:      # the worker's group of taps, columns cb <= c < ce only
        taps_b = _tile_group(work, c, t) + info[7] // t.tile_c * (ce - cb)
        tap_step = t.tile_k * (ce - cb)
    memset(zero, 0, c.OC * sizeof(float))
    rows_left = min(<Py_ssize_t>info[6], info[2] - j0)
    if half and info[4] > 0:
        # the dy rows [lo, hi) this band reads, widened unless the worker's window holds them
        lo = _tap_rows(offy, info[4], &hi)
        lo = max(0, j0 + lo)
        hi = min(c.OH, j0 + rows_left + hi)
        header = _tile_state(work, c)
        wide = <float*>(header) + 16
        if not (header[0] == n and header[1] <= lo and hi <= header[2]):
            header[0], header[1] = n, lo
            header[2] = min(c.OH, lo + t.window)
            to_f32(<const uint16_t*>rbase + lo * pix, wide, (header[2] - lo) * pix,
                   c.storage == STORE_BFLOAT16)
        lo = header[1]
        rbase = <const char*>wide
        rsize = 4
    j = j0
    if not t.lanes and t.runs and _tile_rows_run(width):
        taps = info[4] * info[5]
        for ta in range(info[4]):
            for tb in range(info[5]):
                cols[ta * info[5] + tb] = offx[tb]
                b[ta * info[5] + tb] = taps_b + (ta * info[5] + tb) * tap_step
        while rows_left > 0:
            run = min(rows_left, TILE_RUN_ROWS, max(1, TILE_RUN_PIXELS // width))
            for r in range(run):
                for ta in range(info[4]):
                    oy = j + r + offy[ta]
                    for tb in range(info[5]):
                        rows[r * taps + ta * info[5] + tb] = (
                            <const float*>(rbase + (oy - lo) * pix * rsize)
                            if 0 <= oy < c.OH else NULL)
            tile_rows(rows, run, cols, b, taps, c.OW, c.OC, cb, ce, c.C, zero, a, buf,
                      <char*>dx + ((n * c.H + info[0] + c.sh * j) * c.W + info[1]) * c.C * size,
                      width, ps, rs, store)
            j += run
            rows_left -= run
        return
    for jj in range(rows_left):
        j = j0 + jj
        out = ((n * c.H + info[0] + c.sh * j) * c.W + info[1]) * c.C     # dx's row, in values
        taps = 0
        for ta in range(info[4]):
            oy = j + offy[ta]
            if 0 <= oy < c.OH:
                for tb in range(info[5]):
                    # dy's values are float32, or 16-bit (few channels: oc_lanes)
                    rows[taps] = <const float*>(rbase + (oy - lo) * pix * rsize)
                    cols[taps] = offx[tb]
                    b[taps] = taps_b + (ta * info[5] + tb) * tap_step
                    taps += 1
        if t.lanes:
            oc_rows(<const void* const*>rows, cols, b, taps, c.OW, c.OC, c.C,
                    <char*>dx + out * size, width, ps, c.storage, t.pixels)
        else:
            tile_rows(rows, 1, cols, b, taps, c.OW, c.OC, cb, ce, c.C, zero, a, buf,
                      <char*>dx + out * size, width, ps, rs, store)


cdef Py_ssize_t _tile_taps(const ConvCore* c, const TileArgs* t) noexcept nogil:
    """The values of the tile kernel's filter taps: each phase's taps, [tile_k, tile_c] each
    ([C, tile_k] for few channels), from its offset (info[7])."""
    cdef Py_ssize_t p, end = 0
    cdef const int32_t* info
    for p in range(c.phases):
        info = c.ph_info + p * PH_WIDTH
        end = max(end, info[7] + info[4] * info[5] * t.tile_k * t.tile_c)
    return end



cdef void _tile_start(const ConvCore* c, const void* own, void* work) noexcept nogil:
    """Before a worker's first unit of a call: its window holds no dy rows of this call, and
    it holds no group's taps."""
    cdef Py_ssize_t* state = _tile_state(<float*>work, c)
    state[0] = -1
    state[3] = -1


cdef void _tile_unit(const ConvCore* c, const void* own, const void* dy, void* work, void* dx,
                     Py_ssize_t n, Py_ssize_t p, Py_ssize_t j0, Py_ssize_t t, Py_ssize_t cb,
                     Py_ssize_t ce) noexcept nogil:
    cdef const TileArgs* ta = <const TileArgs*>own
    cdef Py_ssize_t* state
    if ta.raw:
        state = _tile_state(<float*>work, c)
        if state[3] != cb:
            _tile_group_taps(<float*>work, cb, ce, c, ta)
            state[3] = cb
    _tile_phase_band(dy, <float*>work, dx, n, p, j0, cb, ce, c, ta)
