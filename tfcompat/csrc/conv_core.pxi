# Conv2DBackpropInput (docs/semantics.md), the part every strategy shares: the sizes, the
# storage of dy and dx, the axis tables of the col2im, the filter's taps transposed, and the
# stride phases with their bands, the units of work the phase strategies' threads share.
#
# The strategies (tfcompat/conv/strategies.py chooses, from the shapes alone, never the thread
# count) each have their own section and argument struct: conv_col2im.pxi, conv_gather.pxi
# (the BLAS gather), conv_onednn.pxi (oneDNN's gather), conv_tiles.pxi (the channel and lane
# tiles); conv_plan.pxi is ConvPlan, which runs the one a plan was made for through function
# pointers chosen when it is made. Every dx value is summed by one thread in one fixed order,
# so the result does not depend on the thread count. float16/bfloat16 are computed in float32
# and rounded once, row by row, so no float32 copy of the whole dy or dx exists (but for
# oneDNN's 16-bit matmuls, which read dy's own values).

cdef extern from "tiles_common.h":
    int tfc_tiles_built() noexcept nogil
    enum: TFC_STORE_STREAM
    void transpose16 "tfc_transpose16"(const float* src, Py_ssize_t lss, float* dst,
                                       Py_ssize_t lds) noexcept nogil
    void transpose16_8 "tfc_transpose16_8"(const double* src, Py_ssize_t lss, double* dst,
                                           Py_ssize_t lds) noexcept nogil
    void transpose16_wide "tfc_transpose16_wide"(const uint16_t* src, Py_ssize_t lss,
                                                 float* dst, Py_ssize_t lds,
                                                 int half) noexcept nogil
    void store_row "tfc_store_row"(const float* s, void* d, Py_ssize_t n, int half,
                                   int stream) noexcept nogil


def conv_tiles_built():
    """True where the conv's AVX-512 code (tiles_*.h) is compiled in (x86-64, GCC or Clang);
    the Python layer also checks that the CPU has AVX512F before it plans with it."""
    return bool(tfc_tiles_built())


cdef enum:
    STORE_NATIVE = 0        # dy and dx hold the compute type
    STORE_FLOAT16 = 1       # dy and dx hold float16 bits; compute in float32
    STORE_BFLOAT16 = 2      # dy and dx hold bfloat16 bits; compute in float32

cdef enum:
    PH_WIDTH = 9    # values per phase in ConvCore.ph_info


cdef struct ConvCore:
    Py_ssize_t N, H, W, C, OH, OW, OC, fh, fw
    int storage
    Py_ssize_t value_size       # bytes of a value of the compute type (work's values)
    Py_ssize_t work_per_thread  # values of scratch per worker
    # the stride phases (py, px) (py < H and px < W: the others hold no dx pixels): the dx
    # positions (py + sh j, px + sw i) and the taps that reach them
    Py_ssize_t sh, sw, phases, a_floats
    # the units of work in one image: the bands of phases 0, step, ... (step 1: each phase its
    # own; oneDNN's gather: sw, the phases of a row phase py together); unit_starts: the first
    # unit of each, and units last, so that a unit's phase is found by bisection
    Py_ssize_t step, units
    const Py_ssize_t* unit_starts
    # [phases, PH_WIDTH]: py, px, Hp, Wp, taps_y, taps_x, band, b_offset, column classes
    # (oneDNN only, conv_onednn.pxi; 0: none)
    const int32_t* ph_info
    const int32_t* ph_offy      # [phases, fh]: tap a of the phase reads dy row j + offy[a]
    const int32_t* ph_offx      # [phases, fw]
    const void* ph_b            # per phase [taps_y * taps_x * OC, C]: the filter's taps
    # dx columns per group (cols of them in all): each band of each image is a unit once per
    # group; one group of all of them but where a strategy splits its columns
    Py_ssize_t group_cols, cols


cdef inline Py_ssize_t _groups(const ConvCore* c) noexcept nogil:
    """The groups of group_cols dx columns: each band of each image is a unit once per group."""
    return (c.cols + c.group_cols - 1) // c.group_cols


cdef inline Py_ssize_t _bands(const int32_t* info) noexcept nogil:
    """A phase's bands in one image: ceil(Hp / band)."""
    return (info[2] + info[6] - 1) // info[6]


cdef object _unit_starts(const ConvCore* c, Py_ssize_t step):
    """ConvCore.unit_starts for phases 0, step, ... (an intp array), its last entry the
    number of units in one image."""
    cdef Py_ssize_t g, groups = (c.phases + step - 1) // step
    starts_a = np.zeros(groups + 1, dtype=np.intp)
    cdef Py_ssize_t[::1] starts = starts_a
    for g in range(groups):
        starts[g + 1] = starts[g] + _bands(c.ph_info + g * step * PH_WIDTH)
    return starts_a


cdef inline Py_ssize_t _unit_phase(const ConvCore* c, Py_ssize_t k, Py_ssize_t* band) noexcept nogil:
    """Unit k of an image (k < units): its phase (the first of its row phase with oneDNN's
    gather), the last g with unit_starts[g] <= k (a phase without bands is passed over); its
    band's index within the phase in band."""
    cdef Py_ssize_t lo = 0, hi = (c.phases + c.step - 1) // c.step, mid
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if c.unit_starts[mid] <= k:
            lo = mid
        else:
            hi = mid
    band[0] = k - c.unit_starts[lo]
    return lo * c.step


cdef inline Py_ssize_t _tap_rows(const int32_t* offy, Py_ssize_t taps,
                                 Py_ssize_t* hi) noexcept nogil:
    """The least of a phase's taps' dy row offsets offy[0:taps] (taps >= 1); the greatest in
    hi."""
    cdef Py_ssize_t ta, lo = offy[0]
    hi[0] = offy[0]
    for ta in range(1, taps):
        lo = min(lo, <Py_ssize_t>offy[ta])
        hi[0] = max(hi[0], <Py_ssize_t>offy[ta])
    return lo


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
    cursor_a = offsets_a[:in_size].copy()
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


# A filter element of any of the conv's dtypes, copied by its bits.
ctypedef fused word_t:
    uint16_t
    uint32_t
    uint64_t

cdef enum:
    TAP_TILE = 16   # the transpose's square tiles: 16 x 16 elements, within L1 on both sides


cdef void _tap_block(const word_t* w, void* out, Py_ssize_t C, Py_ssize_t OC, Py_ssize_t o0,
                     Py_ssize_t bw, bint simd, int widen) noexcept nogil:
    """out[o, c] = w[c, o] for o in o0 .. o0 + TAP_TILE (and below OC), every c: one tap's
    [C, OC] transposed into [OC, C], tile by tile; with column blocks (bw, a multiple of
    TAP_TILE), as [C / bw] blocks of [OC, bw] (the last one narrower). ``simd``: whole tiles
    of 4- and 8-byte values in AVX-512 registers (tiles.h). ``widen`` (2-byte values only):
    float16 (1) or bfloat16 (2) values, each widened to float32 exactly as it is copied, out
    holding float32 (whole tiles in AVX-512 registers with ``simd`` too): the tile kernel's
    groups of taps (_tile_group_taps)."""
    cdef Py_ssize_t c0 = 0, c1, c, o, o1 = min(o0 + TAP_TILE, OC), b0, width, at
    cdef bint whole
    while c0 < C:
        c1 = min(c0 + TAP_TILE, C)
        b0 = c0 - c0 % bw
        width = min(bw, C - b0)
        at = b0 * OC + o0 * width + c0 - b0     # out's (o0, c0), in values
        whole = simd and c1 - c0 == TAP_TILE and o1 - o0 == TAP_TILE
        if word_t is uint16_t and widen and whole:
            transpose16_wide(w + c0 * OC + o0, OC, <float*>out + at, width, widen)
        elif word_t is uint32_t and whole:
            transpose16(<const float*>(w + c0 * OC + o0), OC, <float*>out + at, width)
        elif word_t is uint64_t and whole:
            transpose16_8(<const double*>(w + c0 * OC + o0), OC, <double*>out + at, width)
        elif word_t is uint16_t and widen:
            for o in range(o0, o1):
                for c in range(c0, c1):
                    to_f32(w + c * OC + o, <float*>out + at + (o - o0) * width + c - c0, 1,
                           widen == STORE_BFLOAT16)
        else:
            for o in range(o0, o1):
                for c in range(c0, c1):
                    (<word_t*>out)[at + (o - o0) * width + c - c0] = w[c * OC + o]
        c0 = c1


cdef struct TapsJob:
    const void* w
    const int32_t* rows
    void* out
    Py_ssize_t taps, C, OC, bw, size
    bint simd


cdef void _taps_share(void* ctx, int s, int n) noexcept nogil:
    """Share s of n of the (tap, block of TAP_TILE output channels) pairs."""
    cdef TapsJob* j = <TapsJob*>ctx
    cdef Py_ssize_t u, i, C = j.C, OC = j.OC, blocks = (OC + TAP_TILE - 1) // TAP_TILE
    for u in range(_lo(j.taps * blocks, s, n), _lo(j.taps * blocks, s + 1, n)):
        i = u // blocks
        if j.size == 2:
            _tap_block(<const uint16_t*>j.w + j.rows[i] * C * OC, <uint16_t*>j.out + i * OC * C,
                       C, OC, (u % blocks) * TAP_TILE, j.bw, j.simd, 0)
        elif j.size == 4:
            _tap_block(<const uint32_t*>j.w + j.rows[i] * C * OC, <uint32_t*>j.out + i * OC * C,
                       C, OC, (u % blocks) * TAP_TILE, j.bw, j.simd, 0)
        else:
            _tap_block(<const uint64_t*>j.w + j.rows[i] * C * OC, <uint64_t*>j.out + i * OC * C,
                       C, OC, (u % blocks) * TAP_TILE, j.bw, j.simd, 0)


def conv_filter_taps(cnp.ndarray w, cnp.ndarray rows, cnp.ndarray out, int num_threads,
                     Py_ssize_t block=0, bint simd=False):
    """out[i, o, c] = w[rows[i], c, o]: the filter's taps ``rows`` (indices into its
    fh * fw taps, proven in range by the caller) as [OC, C] matrices, the B of the gather's
    GEMMs; in parallel, a copy of each element's bits. w: [fh * fw, C, OC], out:
    [len(rows), OC, C], C-contiguous, of one element size (2, 4 or 8 bytes). ``block`` (a
    multiple of 16; 0: C): each tap's matrix as column blocks, [OC, block] each (the last one
    narrower), one after the other (the tile kernel's filter, tiles.h). ``simd``: 4- and
    8-byte values in AVX-512 registers, only where tfc_tiles_built() and the CPU has
    AVX512F."""
    cdef Py_ssize_t taps = cnp.PyArray_SIZE(rows), size = cnp.PyArray_ITEMSIZE(w)
    cdef Py_ssize_t C = cnp.PyArray_DIM(w, 1), OC = cnp.PyArray_DIM(w, 2)
    cdef Py_ssize_t bw = block if block > 0 else C
    cdef const void* s = cnp.PyArray_DATA(w)
    cdef const int32_t* r = <const int32_t*>cnp.PyArray_DATA(rows)
    cdef void* d = cnp.PyArray_DATA(out)
    TFC_CHECK(cnp.PyArray_NDIM(w) == 3 and cnp.PyArray_ITEMSIZE(out) == size
              and cnp.PyArray_ITEMSIZE(rows) == 4
              and cnp.PyArray_SIZE(out) == taps * C * OC and size in (2, 4, 8)
              and (bw == C or bw % TAP_TILE == 0) and (not simd or tfc_tiles_built()))
    cdef TapsJob j
    j.w, j.rows, j.out, j.taps, j.C, j.OC, j.bw, j.size, j.simd = s, r, d, taps, C, OC, bw, \
        size, simd
    with nogil:
        tfc_parallel(_taps_share, &j, <int>max(1, min(<Py_ssize_t>num_threads,
                                                      taps * ((OC + TAP_TILE - 1) // TAP_TILE))))

