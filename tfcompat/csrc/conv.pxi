# Conv2DBackpropInput (docs/semantics.md): dx = col2im(dy @ w^T), NHWC.
#
# The columns of one image, cols[(oy, ox), (ky, kx, ci)] = sum over co of dy[oy, ox, co] *
# w[ky, kx, ci, co], are one GEMM (BLAS, scipy.linalg.cython_blas); dx is their col2im, done as
# a gather: each dx row (n, iy) sums its column entries, listed by the axis tables, in one
# thread and one fixed order, so the result does not depend on the thread count.
#
# Strategies, chosen by the Python layer from the shapes alone (never the thread count):
#   per image (N >= 2): thread t does images t, t + num_threads, ... with single-threaded BLAS
#     inside; each image's columns are computed in bands of ``band`` output rows into a ring of
#     ``cap`` rows just ahead of the dx rows that gather from them, so the columns are read
#     back from cache;
#   one image (N == 1, a float32/float64 1x1 conv without oneDNN, or
#     TFCOMPAT_CONV_STRATEGY=col2im): one GEMM with BLAS's own threads, then the dx rows in
#     parallel;
#   gather (_gather_phase_band; the threads share out the bands of every image, so any N): the
#     transposed convolution as GEMMs of gathered dy against the filter, one per stride phase,
#     whose inner dimension is taps * out_c instead of out_c (docs/performance.md); with
#     fewer than GATHER_SPLIT_UNITS bands in all, each band's GEMM is split into groups of
#     columns (_gather_cols) that the threads share too;
#   oneDNN (_dnnl_band; any N: the threads share out the bands of every image): the gather
#     with oneDNN's single-threaded matmuls, one per tap row of each band, on float32 or on
#     dy's own 16-bit values (bfloat16, float16), or, where a phase's taps read runs of dy's
#     pixels, per column class on dy itself (mostly in place, no gather); a row phase whose
#     stride phases each take one tap at their own dy position (ph_merged) runs one matmul
#     per dy row that writes a whole dx row. (A 1x1 half-type conv multiplied in its own type
#     is one oneDNN matmul over the whole batch, run by the Python layer.)
#   tiles (_tile_phase_band, tiles.h; float32, AVX512F, the C the Python layer's _use_tiles
#     takes; any N: the threads share out the bands of every image): the gather's stride
#     phases without a gather or a GEMM: each tile of 6 dx pixels by 64 channels sums its taps'
#     products from dy in place, in registers, and is stored at its dx positions (by streaming
#     stores into a float32 dx of TILE_STREAM_BYTES or more). A C that is
#     not a multiple of 16 has its filter's taps padded with zero columns up to the next one
#     (tile_c), and the last vector of each pixel stores only its dx channels; with C <= 6
#     (float32 at stride 1: 10; oc_lanes, tfc_oc_rows) the tiles put 16 of dy's output
#     channels in the lanes instead and sum each dx value's lanes at the end. Where the
#     filter's taps for all of C take more than TILE_FILTER_BYTES, the bands run once per
#     group of column blocks whose taps fit (group_cols), so that group stays in L2 for all of
#     a thread's images instead of the whole filter passing through it on every row; the
#     threads share out the groups (each its own run of them) and, for groups of at most
#     TILE_RAW_BYTES, each copies the taps of the groups it runs from the filter itself
#     (tile_raw).
# float16/bfloat16 are computed in float32 and rounded once: the dy of an image is widened
# into scratch (but for oneDNN's 16-bit matmuls, which read dy's values), and each dx row is
# rounded as it is finished, so no float32 copy of the whole dy or dx exists.

cdef enum:
    STORE_NATIVE = 0        # dy and dx hold the compute type
    STORE_FLOAT16 = 1       # dy and dx hold float16 bits; compute in float32
    STORE_BFLOAT16 = 2      # dy and dx hold bfloat16 bits; compute in float32

# oneDNN's C API (include/oneapi/dnnl/dnnl.h), for the gather strategy's oneDNN GEMMs: the
# Python layer (tfcompat/_dnnl.py, tfcompat/backends/cython_backend.py) creates single-threaded
# matmul primitives, a stream per worker and the argument lists, and passes the addresses of
# the three functions the kernel calls.
ctypedef int (*dnnl_execute_f)(const void* primitive, void* stream, int nargs,
                               const void* args) noexcept nogil
ctypedef int (*dnnl_wait_f)(void* stream) noexcept nogil
ctypedef int (*dnnl_set_handle_f)(void* memory, void* handle) noexcept nogil

cdef extern from "tiles.h":
    enum: TFC_TILE_M
    enum: TFC_TILE_M2
    enum: TFC_TILE_C
    enum: TFC_TILE_SEGS
    int tfc_tiles_built() noexcept nogil
    void transpose16 "tfc_transpose16"(const float* src, Py_ssize_t lss, float* dst,
                                       Py_ssize_t lds) noexcept nogil
    void transpose16_8 "tfc_transpose16_8"(const double* src, Py_ssize_t lss, double* dst,
                                           Py_ssize_t lds) noexcept nogil
    void transpose16_wide "tfc_transpose16_wide"(const uint16_t* src, Py_ssize_t lss,
                                                 float* dst, Py_ssize_t lds,
                                                 int half) noexcept nogil
    void tile_rows "tfc_tile_rows"(const float* const* rows, Py_ssize_t nrows,
                                   const int32_t* cols, const float* const* b, Py_ssize_t taps,
                                   Py_ssize_t OW, Py_ssize_t K, Py_ssize_t cb, Py_ssize_t ce,
                                   Py_ssize_t C, const float* zero, const float** a, float* buf,
                                   void* out, Py_ssize_t width, Py_ssize_t ps,
                                   Py_ssize_t rs, int half) noexcept nogil
    enum: TFC_OC_MAX_C
    enum: TFC_PX_MAX_K
    void oc_rows "tfc_oc_rows"(const void* const* rows, const int32_t* cols,
                               const float* const* b, Py_ssize_t taps, Py_ssize_t OW,
                               Py_ssize_t K, Py_ssize_t C, void* out, Py_ssize_t width,
                               Py_ssize_t ps, int storage) noexcept nogil
    void store_row "tfc_store_row"(const float* s, void* d, Py_ssize_t n, int half,
                                   int stream) noexcept nogil


def conv_tiles_built():
    """True where the conv's AVX-512 tile kernel (tiles.h) is compiled in (x86-64, GCC or
    Clang); the Python layer also checks that the CPU has AVX512F before it plans one."""
    return bool(tfc_tiles_built())


# The bytes of filter taps (all of a conv's taps, a group of 64-column blocks) the tile kernel
# keeps for one pass over a thread's images: half of an L2 of 2 MiB (docs/performance.md).
cdef extern from *:
    """
    #ifndef TFC_TILE_FILTER_BYTES
    #define TFC_TILE_FILTER_BYTES (1 << 20)
    #endif
    """
    enum: TILE_FILTER_BYTES "TFC_TILE_FILTER_BYTES"

# The most bytes of one group's taps for which each worker copies its groups' taps itself
# (ConvArgs.tile_raw): the copy is per worker, like a half type's widened window (2 MiB);
# larger groups (one block of 64 columns over it: 3x3 with OC > 910) keep the one copy of the
# whole filter made before the threads start.
cdef extern from *:
    """
    #define TFC_TILE_RAW_BYTES (2 << 20)
    """
    enum: TILE_RAW_BYTES "TFC_TILE_RAW_BYTES"

# Phase rows whose tiles would average 4 pixels or fewer (widths 1-4, 7, 8) go to the tile
# kernel as runs of up to TILE_RUN_PIXELS pixels (at most TILE_RUN_ROWS rows): fuller
# tiles, each step's filter block read from L1 by all of them instead of by one row's two, at
# the price of multiplying the zeros outside dy (docs/performance.md).
cdef extern from *:
    """
    #define TFC_TILE_RUN_PIXELS 192
    #define TFC_TILE_RUN_ROWS 32
    """
    enum: TILE_RUN_PIXELS "TFC_TILE_RUN_PIXELS"
    enum: TILE_RUN_ROWS "TFC_TILE_RUN_ROWS"

# the tile kernel's filter blocks' columns (conv_filter_taps's ``block``)
CONV_TILE_BLOCK = TFC_TILE_C


cdef inline Py_ssize_t _tile_cols(Py_ssize_t taps, Py_ssize_t OC) noexcept nogil:
    """The dx columns of one group of the channel tile kernel's passes: as many blocks of
    TFC_TILE_C columns as have taps (taps * OC values a column) within TILE_FILTER_BYTES,
    at least one."""
    return TFC_TILE_C * max(1, TILE_FILTER_BYTES // (taps * OC * TFC_TILE_C * 4))


cdef inline bint _tile_raw(Py_ssize_t taps, Py_ssize_t C, Py_ssize_t OC) noexcept nogil:
    """Whether the workers copy the channel tile kernel's taps group by group
    (ConvArgs.tile_raw) for a conv of C input channels, OC output channels and ``taps``
    filter taps: where its filter runs in more than one group of columns (_tile_cols), each
    group's taps within TILE_RAW_BYTES."""
    cdef Py_ssize_t cols = _tile_cols(taps, OC)
    return cols < (C + 15) // 16 * 16 and taps * OC * cols * 4 <= TILE_RAW_BYTES


def conv_tile_raw(Py_ssize_t taps, Py_ssize_t C, Py_ssize_t OC):
    """_tile_raw: where it holds, ConvPlan takes the filter itself, not its taps."""
    return bool(_tile_raw(taps, C, OC))


# Our gather (without oneDNN or the tile kernel) of fewer units than this, the bands of all
# its images (one small image: one band), splits its GEMMs' columns into groups of at least
# GATHER_SPLIT_COLS, as many as bring it to this many units, for the threads to share: else
# one thread runs them all (docs/performance.md). The groups depend on the shapes only.
cdef enum:
    GATHER_SPLIT_UNITS = 4
    GATHER_SPLIT_COLS = 128


cdef inline Py_ssize_t _gather_cols(Py_ssize_t units, Py_ssize_t C) noexcept nogil:
    """The dx columns of each of our gather's GEMMs (its units: the bands of all images):
    C, or a multiple of 16 that splits C into groups (GATHER_SPLIT_UNITS)."""
    cdef Py_ssize_t groups = min((GATHER_SPLIT_UNITS + units - 1) // units,
                                 C // GATHER_SPLIT_COLS)
    if units >= GATHER_SPLIT_UNITS or groups <= 1:
        return C
    return ((C + groups - 1) // groups + 15) // 16 * 16


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
    """Floats of scratch per worker the tile kernel needs (_tile_scratch)."""
    return _tile_scratch(taps, OC, W)


cdef struct DnnlExecArg:    # dnnl_exec_arg_t
    int arg
    void* memory


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
    PH_WIDTH = 9    # values per phase in ConvArgs.ph_info

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


cdef void _filter_taps(const word_t* w, const int32_t* rows, word_t* out, Py_ssize_t taps,
                       Py_ssize_t C, Py_ssize_t OC, Py_ssize_t bw, bint simd,
                       int num_threads) noexcept nogil:
    cdef Py_ssize_t u, i, blocks = (OC + TAP_TILE - 1) // TAP_TILE
    for u in prange(taps * blocks, schedule='static', num_threads=num_threads):
        i = u // blocks
        _tap_block(w + rows[i] * C * OC, out + i * OC * C, C, OC, (u % blocks) * TAP_TILE, bw,
                   simd, 0)


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
    with nogil:
        if size == 2:
            _filter_taps(<const uint16_t*>s, r, <uint16_t*>d, taps, C, OC, bw, simd, num_threads)
        elif size == 4:
            _filter_taps(<const uint32_t*>s, r, <uint32_t*>d, taps, C, OC, bw, simd, num_threads)
        else:
            _filter_taps(<const uint64_t*>s, r, <uint64_t*>d, taps, C, OC, bw, simd, num_threads)


cdef struct ConvArgs:
    Py_ssize_t N, H, W, C, OH, OW, OC, fh, fw
    # conv_axis_table of each axis
    const int32_t* h_off
    const int32_t* h_out
    const int32_t* h_tap
    const int32_t* w_off
    const int32_t* w_out
    const int32_t* w_tap
    bint per_image
    bint direct             # 1x1, stride 1, no padding: the GEMM writes dx itself
    Py_ssize_t band, cap    # the per-image column ring (see above); band = cap = OH: whole
    int storage
    Py_ssize_t work_per_thread
    # the gather strategy: per stride phase (py, px) (py < H and px < W: the others hold no
    # dx pixels), the dx positions (py + sh j, px + sw i) and the taps that reach them (see
    # _gather_phase_band)
    bint gather
    Py_ssize_t sh, sw, phases, a_floats
    Py_ssize_t units        # the gather's units of work (bands) in one image
    # [phases / step + 1]: the first unit of each phase (oneDNN: of each row phase) in one
    # image, and units last, so that _gather_unit finds a unit's phase by bisection
    const Py_ssize_t* unit_starts
    # [phases, PH_WIDTH]: py, px, Hp, Wp, taps_y, taps_x, band, b_offset, column classes
    # (oneDNN only, _dnnl_band; 0: none)
    const int32_t* ph_info
    const int32_t* ph_offy      # [phases, fh]: tap a of the phase reads dy row j + offy[a]
    const int32_t* ph_offx      # [phases, fw]
    const void* ph_b            # per phase [taps_y * taps_x * OC, C]: the filter's taps
    # per row phase py, -1 or (oneDNN only) where in ph_b its merged taps start: every phase
    # (py, px) takes one tap, read at its own dy position, and the sw phases fill dx's rows
    # whole, so one GEMM per dy row (its taps side by side, [OC, sw * C]) writes a dx row
    const int32_t* ph_merged
    # the tile kernel (_tile_phase_band; no GEMM, no gathered copy)
    bint tiles
    bint oc_lanes           # the tile kernel for few channels (tfc_oc_rows); taps [C, tile_k]
    # dx columns per group: per pass of the tile kernel (see above), or per GEMM of our
    # gather where it splits them (_gather_cols); else C (one group). Units: _groups
    Py_ssize_t group_cols
    Py_ssize_t tile_c       # the tile kernel's filter columns, C rounded up to 16; else C
    Py_ssize_t tile_k       # oc_lanes: OC rounded up to 16, each tap's [C, tile_k]; else OC
    Py_ssize_t tile_window  # a half type's widened dy rows per worker (_tile_window); else 0
    # more than one group of group_cols columns: ph_b is the filter itself ([fh * fw, tile_c,
    # OC], dy's type, zeros from C on), whose taps tile_rows[i] each worker transposes (and
    # widens) for one group at a time (_tile_group_taps); else ph_b holds every tap's matrix
    bint tile_raw
    bint tile_stream        # float32 dx streamed (TILE_STREAM_BYTES)
    const int32_t* tile_rows
    Py_ssize_t tile_taps_n  # the taps of all phases: tile_rows' length
    # the gather with oneDNN's matmul (-> float32, _dnnl_band): with dn_bits the
    # gathered dy keeps dy's 16-bit values, else it is float32; the filter's taps are values
    # of dn_b_size bytes. A band of phase p is one GEMM per tap row (inner dimension
    # taps_x * OC), the first writing the output and the others adding to it; kind
    # k = tail * 2 + add (tail: the phase's last, shorter band) is run by primitive
    # dn_prims[p * 4 + k] with worker t's memory objects (a, b, out, scratchpad)
    # dn_args[((t * phases + p) * 4 + k) * 4 ...], on stream dn_streams[t]; a failed call
    # leaves its status in dn_status[t]
    bint dnnl
    bint dn_bits
    bint dn_avx512          # dx rows copied or rounded in AVX-512 instructions (_dnnl_row_out)
    bint dn_stream          # ... and stored by streaming stores
    Py_ssize_t dn_b_size
    dnnl_execute_f dn_execute
    dnnl_wait_f dn_wait
    dnnl_set_handle_f dn_set_handle
    const intptr_t* dn_prims
    const intptr_t* dn_streams
    const DnnlExecArg* dn_args
    int32_t* dn_status


cdef void _col2im_row(const real_acc* cols, real_acc* dst, Py_ssize_t iy, const ConvArgs* c,
                      Py_ssize_t ring) noexcept nogil:
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
    for gh in range(c.h_off[iy], c.h_off[iy + 1]):
        TFC_CHECK(0 <= c.h_out[gh] < c.OH and 0 <= c.h_tap[gh] < c.fh)
        src = cols + (c.h_out[gh] % ring) * OW * K + c.h_tap[gh] * fw * C
        for ix in range(W):
            d = dst + ix * C
            for gw in range(c.w_off[ix], c.w_off[ix + 1]):
                TFC_CHECK(0 <= c.w_out[gw] < OW and 0 <= c.w_tap[gw] < fw)
                s = src + c.w_out[gw] * K + c.w_tap[gw] * C
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
                                      Py_ssize_t next_oy, Py_ssize_t need,
                                      const ConvArgs* c) noexcept nogil:
    """Compute one image's column rows next_oy .. need (whole bands of ``band`` output rows,
    one GEMM each) into the ring of ``cap`` rows; returns the first row not computed."""
    cdef Py_ssize_t b, OW = c.OW, OC = c.OC, K = c.fh * c.fw * c.C
    while next_oy <= need:
        b = min(c.band, c.OH - next_oy)
        TFC_CHECK(next_oy % c.band == 0 and next_oy % c.cap + b <= c.cap)
        _gemm_cols(dy + next_oy * OW * OC, w2, ring + (next_oy % c.cap) * OW * K, <int>(b * OW),
                   <int>K, <int>OC)
        next_oy = next_oy + b
    return next_oy


cdef inline Py_ssize_t _last_out_row(const ConvArgs* c, Py_ssize_t iy) noexcept nogil:
    """The largest output row that dx row iy gathers from (-1: none); the table lists them in
    ascending order."""
    if c.h_off[iy] == c.h_off[iy + 1]:
        return -1
    return c.h_out[c.h_off[iy + 1] - 1]


cdef void _conv_image(const void* dy, const real_acc* w2, real_acc* work, void* dx,
                      Py_ssize_t n, const ConvArgs* c) noexcept nogil:
    """Image n, single-threaded, in ``work`` (c.work_per_thread values)."""
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
            rowbuf = ring + (c.OH if c.direct else c.cap) * c.OW * K
    if c.direct:
        if rowbuf == NULL:
            _gemm_cols(dyf, w2, <real_acc*>dx + n * M * K, <int>M, <int>K, <int>c.OC)
        elif real_acc is float:
            _gemm_cols(dyf, w2, ring, <int>M, <int>K, <int>c.OC)
            from_f32(ring, <uint16_t*>dx + n * M * K, M * K, bf)
        return
    for iy in range(c.H):
        next_oy = _columns_up_to(dyf, w2, ring, next_oy, _last_out_row(c, iy), c)
        if rowbuf == NULL:
            _col2im_row(ring, <real_acc*>dx + (n * c.H + iy) * row, iy, c, c.cap)
        elif real_acc is float:
            _col2im_row(ring, rowbuf, iy, c, c.cap)
            from_f32(rowbuf, <uint16_t*>dx + (n * c.H + iy) * row, row, bf)


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
                       const int32_t* offx, const ConvArgs* c) noexcept nogil:
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


cdef void _gather_band_bits(const uint16_t* dy, uint16_t* a, Py_ssize_t n, Py_ssize_t j0,
                            Py_ssize_t rows, const int32_t* info, const int32_t* offy,
                            const int32_t* offx, const ConvArgs* c) noexcept nogil:
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
                        const ConvArgs* c) noexcept nogil:
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


cdef void _place_phase(const ConvArgs* c, void* dx, float* band_out, const float* ph_out,
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


cdef inline void _dnnl_gemm(const ConvArgs* c, Py_ssize_t p, Py_ssize_t t, bint tail,
                            bint add, const void* a, Py_ssize_t ta, void* out) noexcept nogil:
    """Worker t's GEMM of a band of phase p (``tail``: its last, shorter band) for tap row ta:
    out (float32) = a @ the phase's taps of that row, or out += that (``add``)."""
    cdef const int32_t* info = c.ph_info + p * PH_WIDTH
    _dnnl_exec(c, p, t, tail * 2 + add, a, <const char*>c.ph_b
               + (info[7] + ta * info[5] * c.OC * c.C) * c.dn_b_size, out)


cdef inline void _dnnl_exec(const ConvArgs* c, Py_ssize_t p, Py_ssize_t t, Py_ssize_t kind,
                            const void* a, const void* b, void* out) noexcept nogil:
    """Worker t runs primitive dn_prims[p * 4 + kind] on a, b and out: its memory objects
    for it are pointed at the three (its scratchpad stays bound)."""
    cdef void* stream = <void*>c.dn_streams[t]
    cdef const DnnlExecArg* args = c.dn_args + ((t * c.phases + p) * 4 + kind) * 4
    cdef int status = c.dn_set_handle(args[0].memory, <void*>a)
    if status == 0:
        status = c.dn_set_handle(args[1].memory, <void*>b)
    if status == 0:
        status = c.dn_set_handle(args[2].memory, out)
    if status == 0:
        status = c.dn_execute(<const void*>c.dn_prims[p * 4 + kind], stream, 4, args)
    if status == 0:
        status = c.dn_wait(stream)
    if status != 0 and c.dn_status[t] == 0:
        c.dn_status[t] = status


cdef void _gather_phase_band(const void* dy, real_acc* work, void* dx, Py_ssize_t n,
                             Py_ssize_t p, Py_ssize_t j0, Py_ssize_t cb, Py_ssize_t ce,
                             const ConvArgs* c) noexcept nogil:
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


cdef inline void _dnnl_row_out(const ConvArgs* c, const float* row, void* dx,
                               Py_ssize_t r) noexcept nogil:
    """A dx row at value r from the float32 ``row`` of oneDNN's output: copied (float32), or
    rounded once, with AVX-512 instructions where the CPU has them (dn_avx512: tiles.h's
    tfc_store_row), by streaming stores with dn_stream."""
    cdef int half = c.storage   # tiles.h's ``half``: the storage codes, 0 float32
    if c.dn_avx512 and (half or c.dn_stream):
        store_row(row, <char*>dx + r * (2 if half else 4), c.W * c.C, half, c.dn_stream)
    elif half:
        from_f32(row, <uint16_t*>dx + r, c.W * c.C, half == 2)
    else:
        memcpy(<float*>dx + r, row, c.W * c.C * sizeof(float))


cdef void _dnnl_band(const void* dy, float* work, void* dx, Py_ssize_t n, Py_ssize_t py,
                     Py_ssize_t j0, Py_ssize_t t, const ConvArgs* c) noexcept nogil:
    """One band of the gather with oneDNN's matmul (c.dnnl), by worker t: dx rows
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
    cdef bint dy_is_a = native or c.dn_bits
    cdef Py_ssize_t dy_size = 4 if native else 2
    cdef Py_ssize_t a_size = 2 if c.dn_bits else 4
    info = c.ph_info + py * c.sw * PH_WIDTH
    Hp, Wq = info[2], info[3]
    rows = min(<Py_ssize_t>info[6], Hp - j0)
    tail = rows != info[6]
    if c.ph_merged[py] >= 0:
        # one GEMM per dy row j (primitive kind 0 of phase (py, 0): [Wq, OC] @ [OC, sw * C]),
        # its output dx row py + sh j itself, or rounded into it
        for jj in range(rows):
            r = (n * c.H + py + c.sh * (j0 + jj)) * c.W * C
            src = <const char*>dy + (n * c.OH + j0 + jj) * c.OW * c.OC * dy_size
            if not dy_is_a:     # a 16-bit dy row widened for float32 GEMMs
                to_f32(<const uint16_t*>src, a, c.OW * c.OC, c.storage == STORE_BFLOAT16)
                src = <const char*>a
            _dnnl_exec(c, py * c.sw, t, 0, src,
                       <const char*>c.ph_b + <Py_ssize_t>c.ph_merged[py] * c.dn_b_size,
                       <float*>dx + r if native else out)
            if not native:
                _dnnl_row_out(c, out, dx, r)
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
                if c.dn_bits:
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
                _dnnl_gemm(c, p, t, tail, ta > 0, src + (offy[ta] - lo) * a_row, ta, ph_out)
            if c.sw > 1:
                _place_phase(c, dx, band_out, ph_out, n, py, px, j0, rows, Wq, classes, k,
                             scatter)
    if not (into_dx or scatter):
        for jj in range(rows):
            r = (n * c.H + py + c.sh * (j0 + jj)) * c.W * C
            _dnnl_row_out(c, out + jj * Wq * c.sw * C, dx, r)


cdef inline bint _tile_rows_run(Py_ssize_t width) noexcept nogil:
    """Whether phase rows of ``width`` pixels go to the tile kernel in runs of rows: where
    their own tiles would average 4 pixels or fewer (TILE_RUN_PIXELS)."""
    return width <= 4 * ((width + TFC_TILE_M - 1) // TFC_TILE_M)


def conv_tile_rows_run(Py_ssize_t width):
    """_tile_rows_run, for the Python layer's bands."""
    return bool(_tile_rows_run(width))


# A half type on the channel tile kernel widens dy to float32 rows a window at a time, per
# worker, kept across the bands and phases that read it: up to this many values, and never
# fewer rows than a band reads (the Python layer cuts bands to fit it, unless one row alone is
# larger: docs/performance.md)
cdef extern from *:
    """
    #define TFC_TILE_WIDE_VALUES (1 << 19)
    """
    enum: TILE_WIDE_VALUES "TFC_TILE_WIDE_VALUES"

# A dx of at least this many bytes is stored with streaming stores (tiles.h's TFC_STORE_STREAM
# and tfc_store_row) by the channel tile kernel (float32, C a multiple of 16) and, on CPUs
# with AVX512F, where oneDNN's gather copies or rounds its output rows into dx
# (_dnnl_row_out): a plain store first reads each line it writes into the cache (from memory,
# where the cache holds other data since dx's last use), and a dx this large would evict much
# of what the cache holds; streaming stores write whole lines without reading them. Below it,
# they gained nothing (docs/performance.md)
cdef extern from *:
    """
    #define TFC_TILE_STREAM_BYTES (4 << 20)
    """
    enum: TILE_STREAM_BYTES "TFC_TILE_STREAM_BYTES"
    enum: STORE_STREAM "TFC_STORE_STREAM"

CONV_TILE_WIDE_VALUES = TILE_WIDE_VALUES
CONV_TILE_STREAM_BYTES = TILE_STREAM_BYTES
# the most output channels whose dx pixels share a vector in the tile kernel for few channels
# (tiles.h's tfc_px_row)
CONV_PIXEL_LANES_MAX_OC = TFC_PX_MAX_K
# the most input channels the tile kernel for few channels takes (tiles.h's tfc_oc_rows)
CONV_LANES_MAX_C = TFC_OC_MAX_C


cdef inline Py_ssize_t _tile_window(const ConvArgs* c) noexcept nogil:
    """The dy rows of a half type's widened window (see TILE_WIDE_VALUES): as many as fit, at
    least every band's rows and the span of its taps' rows, at most OH; 0 for float32 and the
    tile kernel for few channels (which reads 16-bit dy values itself)."""
    cdef Py_ssize_t p, lo, hi, most
    cdef const int32_t* info
    if c.storage == STORE_NATIVE or c.oc_lanes or not c.tiles:
        return 0
    most = TILE_WIDE_VALUES // max(1, c.OW * c.OC)
    for p in range(c.phases):
        info = c.ph_info + p * PH_WIDTH
        if info[4] == 0:
            continue
        lo = _tap_rows(c.ph_offy + p * c.fh, info[4], &hi)
        most = max(most, info[6] + hi - lo)
    return max(1, min(most, c.OH))


cdef inline Py_ssize_t _tile_widened(const ConvArgs* c) noexcept nogil:
    """The floats after _tile_scratch's for a half type's widened window: 16 to reach a
    64-byte boundary, 16 for its header (the image and dy rows it holds), its rows."""
    return 32 + c.tile_window * c.OW * c.OC if c.tile_window else 0


cdef inline Py_ssize_t* _tile_window_header(float* work, const ConvArgs* c) noexcept nogil:
    """A worker's widened window's header [image, first row, end row], 64-byte aligned after
    _tile_scratch's floats; its rows follow 16 floats on."""
    return <Py_ssize_t*>((<intptr_t>(work + _tile_scratch(c.fh * c.fw, c.OC, c.W)) + 63)
                         & ~(<intptr_t>63))


cdef inline float* _tile_group(float* work, const ConvArgs* c) noexcept nogil:
    """A worker's group of filter taps (tile_raw), 64-byte aligned after _tile_scratch's and
    _tile_widened's floats: tile_taps_n taps, [tile_k, ce - cb] each, in blocks of TFC_TILE_C
    columns as conv_filter_taps lays them out."""
    return <float*>((<intptr_t>(work + _tile_scratch(c.fh * c.fw, c.OC, c.W) + _tile_widened(c))
                     + 63) & ~(<intptr_t>63))


cdef void _tile_group_taps(float* work, Py_ssize_t cb, Py_ssize_t ce,
                           const ConvArgs* c) noexcept nogil:
    """The worker's group of taps (_tile_group) for dx columns cb <= c < ce, transposed from
    the filter itself (tile_raw; a half type's widened to float32 as it is copied): each worker
    copies the taps of the groups it runs, as it comes to them, so a filter too large for L2
    is read once, in the worker that uses it, rather than copied whole before the threads
    start and read back."""
    cdef float* out = _tile_group(work, c)
    cdef Py_ssize_t i, o0, at
    for i in range(c.tile_taps_n):
        at = (c.tile_rows[i] * c.tile_c + cb) * c.OC
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
                           const ConvArgs* c) noexcept nogil:
    """The band of phase p from phase row j0 of image n by the tile kernel (tiles.h): dx at
    (py + sh j, px + sw i), channels cb <= c < ce, sums, over the phase's taps (ta, tb),
    dy[j + offy[ta], i + offx[tb]] times the tap's [OC, C] matrix (tfc_tile_rows's order of
    sums), stored straight into dx (a half type's rounded once from its float32 sum; its dy
    rows the band reads widened to float32 first, into the scratch after _tile_scratch's). A
    row whose tiles would average more than 4 pixels goes alone and takes only the taps whose
    dy row is inside dy; narrower rows go in runs (see TILE_RUN_PIXELS) that take every tap,
    reading zeros outside dy (but for a tile's first and last pixel: tiles.h). With oc_lanes
    (few channels), every row goes alone to tfc_oc_rows, in its order of sums, which reads
    16-bit dy values itself.
    work: _tile_scratch's floats, laid out as it says, then _tile_widened's (its header
    reset by _conv_run for each call)."""
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
    cdef const float* taps_b = <const float*>c.ph_b + info[7] + c.tile_k * cb
    cdef Py_ssize_t tap_step = c.tile_k * c.tile_c
    cdef Py_ssize_t width = info[3], ps = c.sw * c.C, rs = c.sh * c.W * c.C
    cdef Py_ssize_t size = 4 if c.storage == STORE_NATIVE else 2
    cdef Py_ssize_t pix = c.OW * c.OC, lo = 0, hi
    cdef int half = 0 if c.oc_lanes else c.storage
    cdef int store = STORE_STREAM if c.tile_stream else half    # tile_rows's ``half``
    # dy row oy is at rbase + (oy - lo) * pix values of rsize bytes: image n's own rows, or
    # the widened ones from row lo
    cdef const char* rbase = <const char*>dy + n * c.OH * pix * size
    cdef Py_ssize_t rsize = size
    cdef float* wide
    cdef Py_ssize_t* header
    if width == 0:      # an image narrower than the stride: this phase has no dx columns
        return
    if c.tile_raw:      # the worker's group of taps, columns cb <= c < ce only
        taps_b = _tile_group(work, c) + info[7] // c.tile_c * (ce - cb)
        tap_step = c.tile_k * (ce - cb)
    memset(zero, 0, c.OC * sizeof(float))
    rows_left = min(<Py_ssize_t>info[6], info[2] - j0)
    if half and info[4] > 0:
        # the dy rows [lo, hi) this band reads, widened unless the worker's window holds them
        lo = _tap_rows(offy, info[4], &hi)
        lo = max(0, j0 + lo)
        hi = min(c.OH, j0 + rows_left + hi)
        header = _tile_window_header(work, c)
        wide = <float*>(header) + 16
        if not (header[0] == n and header[1] <= lo and hi <= header[2]):
            header[0], header[1] = n, lo
            header[2] = min(c.OH, lo + c.tile_window)
            to_f32(<const uint16_t*>rbase + lo * pix, wide, (header[2] - lo) * pix,
                   c.storage == STORE_BFLOAT16)
        lo = header[1]
        rbase = <const char*>wide
        rsize = 4
    j = j0
    if not c.oc_lanes and _tile_rows_run(width):
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
        if c.oc_lanes:
            oc_rows(<const void* const*>rows, cols, b, taps, c.OW, c.OC, c.C,
                    <char*>dx + out * size, width, ps, c.storage)
        else:
            tile_rows(rows, 1, cols, b, taps, c.OW, c.OC, cb, ce, c.C, zero, a, buf,
                      <char*>dx + out * size, width, ps, rs, store)


cdef Py_ssize_t _tile_taps(const ConvArgs* c) noexcept nogil:
    """The values of the tile kernel's filter taps: each phase's taps, [tile_k, tile_c] each
    ([C, tile_k] for few channels), from its offset (info[7])."""
    cdef Py_ssize_t p, end = 0
    cdef const int32_t* info
    for p in range(c.phases):
        info = c.ph_info + p * PH_WIDTH
        end = max(end, info[7] + info[4] * info[5] * c.tile_k * c.tile_c)
    return end


cdef inline Py_ssize_t _bands(const int32_t* info) noexcept nogil:
    """A phase's bands in one image: ceil(Hp / band)."""
    return (info[2] + info[6] - 1) // info[6]


cdef object _unit_starts(const ConvArgs* c, Py_ssize_t step):
    """ConvArgs.unit_starts for phases 0, step, ... (an intp array): the gather's units of
    work in one image are the bands of every phase p = 0, step, ... (step 1: each phase its
    own; sw: the phases of a row phase py together), its last entry their number."""
    cdef Py_ssize_t g, groups = (c.phases + step - 1) // step
    starts_a = np.zeros(groups + 1, dtype=np.intp)
    cdef Py_ssize_t[::1] starts = starts_a
    for g in range(groups):
        starts[g + 1] = starts[g] + _bands(c.ph_info + g * step * PH_WIDTH)
    return starts_a


cdef void _gather_unit(const void* dy, real_acc* work, void* dx, Py_ssize_t u, Py_ssize_t t,
                       Py_ssize_t cb, Py_ssize_t ce, const ConvArgs* c) noexcept nogil:
    """Unit u of the gather: image u // units, and its band u % units, counted over the
    phases in order, or with oneDNN over the row phases py (each has ceil(Hp / band) bands);
    the tile kernel computes dx's columns cb <= c < ce of it, the others all of them. The
    phase is the last g with unit_starts[g] <= k (a phase without bands is passed over)."""
    cdef Py_ssize_t step = c.sw if c.dnnl else 1, k = u % c.units, mid, p
    cdef Py_ssize_t lo = 0, hi = (c.phases + step - 1) // step
    cdef const int32_t* info
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if c.unit_starts[mid] <= k:
            lo = mid
        else:
            hi = mid
    p = lo * step
    info = c.ph_info + p * PH_WIDTH
    k = k - c.unit_starts[lo]
    if c.tiles:
        if real_acc is float:
            _tile_phase_band(dy, work, dx, u // c.units, p, k * info[6], cb, ce, c)
    elif not c.dnnl:
        _gather_phase_band(dy, work, dx, u // c.units, p, k * info[6], cb, ce, c)
    elif real_acc is float:
        _dnnl_band(dy, work, dx, u // c.units, p // step, k * info[6], t, c)


cdef inline Py_ssize_t _groups(const ConvArgs* c) noexcept nogil:
    """The gather's groups of group_cols dx columns (tile_c of them in all): each band of
    each image is a unit of work once per group."""
    return (c.tile_c + c.group_cols - 1) // c.group_cols


cdef void _conv_run(const void* dy, const real_acc* w2, real_acc* work, void* dx,
                    const ConvArgs* c, int num_threads) noexcept nogil:
    cdef Py_ssize_t t, n, last, iy, cb, ce, groups = _groups(c), have
    cdef Py_ssize_t M = c.OH * c.OW, K = c.fh * c.fw * c.C, row = c.W * c.C
    cdef bint half = c.storage != STORE_NATIVE
    cdef bint bf = c.storage == STORE_BFLOAT16
    cdef const real_acc* dyf
    cdef real_acc* cols
    cdef real_acc* mine
    if c.gather:
        # thread t: the t-th of num_threads consecutive runs of units (a unit: one band of one
        # image, for one group of group_cols columns, or all of them in one group),
        # group by group: consecutive bands of an image stay in one thread where they can,
        # and a filter too large for L2 is split among the threads by its column groups
        # rather than read whole by each; every unit is computed the same way whichever
        # thread runs it
        for t in prange(num_threads, schedule='static', num_threads=num_threads):
            if real_acc is float:
                if c.tile_window:
                    # this call's dy is not yet in the worker's widened window
                    _tile_window_header(work + t * c.work_per_thread, c)[0] = -1
            n = groups * c.N * c.units * t // num_threads
            last = groups * c.N * c.units * (t + 1) // num_threads
            have = -1
            while n < last:
                cb = n // (c.N * c.units) * c.group_cols
                ce = min(cb + c.group_cols, c.tile_c)
                if real_acc is float:
                    if c.tile_raw and cb != have:
                        _tile_group_taps(work + t * c.work_per_thread, cb, ce, c)
                        have = cb
                _gather_unit(dy, work + t * c.work_per_thread, dx, n % (c.N * c.units), t, cb,
                             ce, c)
                n = n + 1
        return
    if c.per_image:
        # thread t: images t, t + num_threads, ...; every image is computed the same way
        # whichever thread runs it
        for t in prange(num_threads, schedule='static', num_threads=num_threads):
            n = t
            while n < c.N:
                _conv_image(dy, w2, work + t * c.work_per_thread, dx, n, c)
                n = n + num_threads
        return
    # one image: work holds [widened dy (half types)] [cols: M * K] [a dx row per thread]
    TFC_CHECK(c.N == 1)
    dyf = <const real_acc*>dy
    cols = work
    if real_acc is float:
        if half:
            _convert(dy, work, M * c.OC, bf, True, num_threads)
            dyf = work
            cols = work + M * c.OC
    if c.direct and not half:
        _gemm_cols(dyf, w2, <real_acc*>dx, <int>M, <int>K, <int>c.OC)
        return
    _gemm_cols(dyf, w2, cols, <int>M, <int>K, <int>c.OC)
    if c.direct:
        if real_acc is float:
            _convert(cols, dx, M * K, bf, False, num_threads)
        return
    with parallel(num_threads=num_threads):
        mine = cols + M * K + threadid() * row
        for iy in prange(c.H, schedule='static'):
            if half:
                if real_acc is float:
                    _col2im_row(cols, mine, iy, c, c.OH)
                    from_f32(mine, <uint16_t*>dx + iy * row, row, bf)
            else:
                _col2im_row(cols, <real_acc*>dx + iy * row, iy, c, c.OH)


cdef class ConvPlan:
    """One Conv2DBackpropInput call's geometry, tables and strategy (see above); built by
    tfcompat/backends/cython_backend.py, which has proven every precondition."""
    cdef ConvArgs args
    cdef readonly object tables
    cdef readonly bint float64
    cdef readonly bint dnnl     # planned for use_dnnl

    def __cinit__(self, sizes, h_table, w_table, bint per_image, bint direct, Py_ssize_t band,
                  Py_ssize_t cap, int storage, bint float64, gather=None, bint dnnl=False,
                  bint tiles=False, bint oc_lanes=False, bint avx512=False):
        c = &self.args
        (c.N, c.H, c.W, c.C, c.OH, c.OW, c.OC, c.fh, c.fw) = sizes
        self.tables = (h_table, w_table)
        c.h_off = <const int32_t*>_data(h_table[0])
        c.h_out = <const int32_t*>_data(h_table[1])
        c.h_tap = <const int32_t*>_data(h_table[2])
        c.w_off = <const int32_t*>_data(w_table[0])
        c.w_out = <const int32_t*>_data(w_table[1])
        c.w_tap = <const int32_t*>_data(w_table[2])
        c.per_image, c.direct, c.band, c.cap, c.storage = per_image, direct, band, cap, storage
        self.float64 = float64
        cdef Py_ssize_t M = c.OH * c.OW, K = c.fh * c.fw * c.C
        c.gather = gather is not None
        c.dnnl = False
        c.tiles = c.oc_lanes = False
        c.group_cols = c.tile_c = c.C
        c.tile_k = c.OC
        c.tile_window = 0
        # a dx streamed past the caches where a kernel can (TILE_STREAM_BYTES)
        cdef bint large = (c.N * c.H * c.W * c.C * (4 if storage == STORE_NATIVE else 2)
                           >= TILE_STREAM_BYTES)
        c.tile_raw = c.tile_stream = False
        # oneDNN's gather copies or rounds its output rows into dx in AVX-512 instructions
        # where the CPU has them (``avx512``: checked by the Python layer), streamed into a
        # large dx
        TFC_CHECK(not avx512 or tfc_tiles_built())
        c.dn_avx512 = dnnl and avx512
        c.dn_stream = c.dn_avx512 and large
        c.tile_taps_n = 0
        self.dnnl = dnnl
        if c.gather:
            # (strides, phase info, offy, offx, filter taps (tile_raw: the filter), A floats,
            # output floats, merged row phases, the taps' indices in the filter): built and
            # checked by tfcompat/backends/cython_backend.py
            self.tables = self.tables + (gather,)
            ((c.sh, c.sw), info, offy, offx, taps, c.a_floats, out_floats, merged,
             tap_rows) = gather
            c.phases = info.shape[0]
            c.ph_info = <const int32_t*>_data(info)
            c.ph_offy = <const int32_t*>_data(offy)
            c.ph_offx = <const int32_t*>_data(offx)
            c.ph_b = _data(taps)
            c.ph_merged = <const int32_t*>_data(merged)
            if TFC_CHECKS_ON:   # these read Python objects, which Cython evaluates even where
                                # TFC_CHECK compiles away
                TFC_CHECK(merged.shape[0] == min(c.sh, c.H) and info.shape[1] == PH_WIDTH
                          and (not dnnl or c.sw <= c.W))
            c.work_per_thread = c.a_floats + out_floats
            c.tiles = tiles
            c.oc_lanes = oc_lanes
            TFC_CHECK(not oc_lanes or (tiles and c.C <= TFC_OC_MAX_C))
            if tiles:
                if oc_lanes:
                    c.tile_k = (c.OC + 15) // 16 * 16
                else:
                    c.tile_c = (c.C + 15) // 16 * 16
                    c.group_cols = _tile_cols(c.fh * c.fw, c.OC)
                    c.tile_raw = _tile_raw(c.fh * c.fw, c.C, c.OC)
                    c.tile_stream = storage == STORE_NATIVE and large
                c.tile_rows = <const int32_t*>_data(tap_rows)
                c.tile_taps_n = tap_rows.shape[0]
                if TFC_CHECKS_ON:
                    TFC_CHECK(tfc_tiles_built() and not dnnl and not float64
                              and c.work_per_thread % 2 == 0
                              and c.a_floats >= _tile_scratch(c.fh * c.fw, c.OC, c.W)
                              and c.tile_taps_n <= c.fh * c.fw
                              and (c.tile_taps_n == 0 or (0 <= tap_rows.min()
                                                          and tap_rows.max() < c.fh * c.fw))
                              and taps.size >= (c.fh * c.fw * c.tile_c * c.OC if c.tile_raw
                                                else _tile_taps(c))
                              and (not c.tile_raw
                                   or taps.itemsize == (4 if storage == STORE_NATIVE else 2)))
                # a half type's widened dy rows (_tile_phase_band), then a worker's group
                # of taps (_tile_group_taps), after the scratch
                c.tile_window = _tile_window(c)
                c.work_per_thread += _tile_widened(c) + _tile_widened(c) % 2
                if c.tile_raw:
                    c.work_per_thread += 16 + c.tile_taps_n * c.OC * c.group_cols
            # oneDNN's gather (``dnnl``: use_dnnl must follow) takes the phases of a row
            # phase py together
            starts = _unit_starts(c, c.sw if dnnl else 1)
            c.unit_starts = <const Py_ssize_t*>_data(starts)
            c.units = starts[starts.shape[0] - 1]
            self.tables = self.tables + (starts,)
            if not tiles and not dnnl:
                c.group_cols = _gather_cols(c.N * c.units, c.C)
            return
        if per_image:
            c.work_per_thread = (0 if c.direct else c.cap * c.OW * K)
            if storage != STORE_NATIVE:
                c.work_per_thread = M * c.OC + (c.OH if c.direct else c.cap) * c.OW * K + c.W * c.C
        else:
            c.work_per_thread = 0

    def use_dnnl(self, size_t execute, size_t wait, size_t set_handle, cnp.ndarray prims,
                 cnp.ndarray streams, cnp.ndarray args, cnp.ndarray status, bint bits):
        """Run the gather's GEMMs with oneDNN (``bits``: the matmuls read dy's 16-bit values,
        else float32; the filter's taps, the gather tables', are of the matmuls' type): the
        addresses of
        ``dnnl_primitive_execute``, ``dnnl_stream_wait`` and ``dnnl_memory_set_data_handle``,
        [phases, 4] primitives and a stream per worker (intptr arrays), the
        [workers, phases, 4, 4] ``dnnl_exec_arg_t`` lists (each worker's memory objects; the
        kernel points a, b and out at this call's data) and an int32 status per worker, all
        built by tfcompat/backends/cython_backend.py (see _dnnl_band)."""
        c = &self.args
        TFC_CHECK(c.gather and self.dnnl and not self.float64
                  and not (bits and c.storage == STORE_NATIVE)
                  and cnp.PyArray_SIZE(prims) == c.phases * 4
                  and <size_t>cnp.PyArray_NBYTES(args) == <size_t>(cnp.PyArray_SIZE(streams)
                                                                   * c.phases * 16)
                  * sizeof(DnnlExecArg)
                  and cnp.PyArray_SIZE(status) == cnp.PyArray_SIZE(streams))
        cdef Py_ssize_t p
        for p in range(c.phases):
            # column classes read dy's own values (_dnnl_band)
            TFC_CHECK(c.ph_info[p * PH_WIDTH + 8] == 0 or bits or c.storage == STORE_NATIVE)
        self.tables = self.tables + (prims, streams, args, status)
        c.dn_execute = <dnnl_execute_f>execute
        c.dn_wait = <dnnl_wait_f>wait
        c.dn_set_handle = <dnnl_set_handle_f>set_handle
        c.dn_prims = <const intptr_t*>_data(prims)
        c.dn_streams = <const intptr_t*>_data(streams)
        c.dn_args = <const DnnlExecArg*>_data(args)
        c.dn_status = <int32_t*>cnp.PyArray_DATA(status)
        c.dn_bits = bits
        c.dn_b_size = 2 if bits else 4
        c.dnnl = True

    def units(self):
        """How many units of work the threads can share: the bands of every image (the
        gathers, once per group of group_cols columns), the images (the per-image col2im), or
        1."""
        c = &self.args
        if c.gather:
            return c.N * c.units * _groups(c)
        return c.N if c.per_image else 1

    def workspace(self, int num_threads):
        """Values of the compute type that ``run`` needs as scratch with that many threads."""
        c = &self.args
        cdef Py_ssize_t M = c.OH * c.OW, K = c.fh * c.fw * c.C
        if c.per_image or c.gather:
            return c.work_per_thread * num_threads
        half = c.storage != STORE_NATIVE
        if c.direct and not half:
            return 0
        return (M * c.OC if half else 0) + M * K + (num_threads * c.W * c.C if half else 0)

    def run(self, cnp.ndarray dy, cnp.ndarray w2, cnp.ndarray dx, int num_threads,
            cnp.ndarray work=None):
        """dx (NHWC, C-contiguous) from dy (NHWC, C-contiguous) and w2 ([fh * fw * C, OC] of
        the compute type; unread, and may be empty, with the gather strategy's tables); work:
        ``workspace(num_threads)`` values, or None when that is 0."""
        cdef const void* s = cnp.PyArray_DATA(dy)
        cdef void* d = cnp.PyArray_DATA(dx)
        cdef const void* w = cnp.PyArray_DATA(w2)
        cdef void* scratch = NULL if work is None else cnp.PyArray_DATA(work)
        cdef ConvArgs* c = &self.args
        TFC_CHECK(self.dnnl == c.dnnl and cnp.PyArray_SIZE(dy) == c.N * c.OH * c.OW * c.OC
                  and cnp.PyArray_SIZE(dx) == c.N * c.H * c.W * c.C
                  and (c.gather or cnp.PyArray_SIZE(w2) == c.fh * c.fw * c.C * c.OC))
        with nogil:
            if self.float64:
                _conv_run(s, <const double*>w, <double*>scratch, d, c, num_threads)
            else:
                _conv_run(s, <const float*>w, <float*>scratch, d, c, num_threads)
