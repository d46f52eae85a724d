# ConvPlan: one Conv2DBackpropInput call's geometry, tables and strategy, built by the Python
# layer (tfcompat/conv/plans.py), which has proven every precondition. Its entry is chosen
# when it is made: the col2im's (per image or one image, float32 or float64), or the phase
# strategies' one loop over units, which calls the strategy's unit through a function pointer.

cpdef enum ConvKind:
    CONV_COL2IM = 0
    CONV_BLAS_GATHER = 1
    CONV_ONEDNN_GATHER = 2
    CONV_CHANNEL_TILES = 3
    CONV_LANE_TILES = 4


# a phase strategy's unit: image n's band from phase row j0 of phase p (the first phase of
# its row phase for oneDNN's gather), dx columns cb <= c < ce, by worker t in its ``work``;
# ``own``: the strategy's argument struct
ctypedef void (*conv_unit_f)(const ConvCore* c, const void* own, const void* dy, void* work,
                             void* dx, Py_ssize_t n, Py_ssize_t p, Py_ssize_t j0,
                             Py_ssize_t t, Py_ssize_t cb, Py_ssize_t ce) noexcept nogil
# before a worker's first unit of a call (NULL: nothing to do)
ctypedef void (*conv_start_f)(const ConvCore* c, const void* own, void* work) noexcept nogil


cdef struct ConvPlanArgs:
    ConvCore core
    Col2imArgs col
    TileArgs tile
    DnnlArgs dn
    conv_unit_f unit
    conv_start_f start
    const void* own             # the strategy's struct among the above


ctypedef void (*conv_entry)(const ConvPlanArgs* a, const void* dy, const void* w2, void* work,
                            void* dx, int num_threads) noexcept nogil


cdef struct UnitsJob:
    const ConvPlanArgs* a
    const void* dy
    void* work
    void* dx


cdef void _units_share(void* ctx, int t, int num_threads) noexcept nogil:
    """Share t: the t-th of num_threads consecutive runs of units (a unit: one band of one
    image, for one group of group_cols columns, or all of them in one group), group by group:
    consecutive bands of an image stay in one share where they can, and a filter too large
    for L2 is split among the shares by its column groups rather than read whole by each;
    every unit is computed the same way whichever thread runs it."""
    cdef UnitsJob* j = <UnitsJob*>ctx
    cdef const ConvPlanArgs* a = j.a
    cdef const ConvCore* c = &a.core
    cdef Py_ssize_t n, last, cb, ce, p, band, per_group = c.N * c.units
    cdef Py_ssize_t total = _groups(c) * per_group
    cdef char* mine = <char*>j.work + t * c.work_per_thread * c.value_size
    if a.start != NULL:
        a.start(c, a.own, mine)
    n = total * t // num_threads
    last = total * (t + 1) // num_threads
    while n < last:
        cb = n // per_group * c.group_cols
        ce = min(cb + c.group_cols, c.cols)
        p = _unit_phase(c, n % c.units, &band)
        a.unit(c, a.own, j.dy, mine, j.dx, n % per_group // c.units, p,
               band * c.ph_info[p * PH_WIDTH + 6], t, cb, ce)
        n = n + 1


cdef void _run_units(const ConvPlanArgs* a, const void* dy, const void* w2, void* work,
                     void* dx, int num_threads) noexcept nogil:
    cdef UnitsJob j
    j.a, j.dy, j.work, j.dx = a, dy, work, dx
    tfc_parallel(_units_share, &j, num_threads)


cdef void _images_f32(const ConvPlanArgs* a, const void* dy, const void* w2, void* work,
                      void* dx, int num_threads) noexcept nogil:
    _col2im_images(dy, w2, work, dx, &a.core, &a.col, num_threads)


cdef void _images_f64(const ConvPlanArgs* a, const void* dy, const void* w2, void* work,
                      void* dx, int num_threads) noexcept nogil:
    _col2im_images(dy, w2, work, dx, &a.core, &a.col, num_threads)


cdef void _one_f32(const ConvPlanArgs* a, const void* dy, const void* w2, void* work,
                   void* dx, int num_threads) noexcept nogil:
    _col2im_one(dy, <const float*>w2, <float*>work, dx, &a.core, &a.col, num_threads)


cdef void _one_f64(const ConvPlanArgs* a, const void* dy, const void* w2, void* work,
                   void* dx, int num_threads) noexcept nogil:
    _col2im_one(dy, <const double*>w2, <double*>work, dx, &a.core, &a.col, num_threads)


cdef class ConvPlan:
    """A conv's plan. ``ConvPlan(kind, sizes, storage, float64)``, with sizes (N, H, W, C, OH,
    OW, OC, fh, fw), then, by kind, ``col2im(...)``, or ``phases(...)`` and ``blas_gather``,
    ``onednn`` (and ``use_dnnl``) or ``tiles``; then ``units``, ``workspace`` and ``run``."""
    cdef ConvPlanArgs args
    cdef conv_entry entry
    cdef readonly object tables
    cdef readonly ConvKind kind
    cdef readonly bint float64
    cdef bint ready

    def __cinit__(self, ConvKind kind, sizes, int storage, bint float64):
        c = &self.args.core
        (c.N, c.H, c.W, c.C, c.OH, c.OW, c.OC, c.fh, c.fw) = sizes
        c.storage = storage
        c.value_size = 8 if float64 else 4
        c.group_cols = c.cols = c.C
        c.work_per_thread = 0
        self.kind, self.float64, self.tables, self.ready = kind, float64, (), False
        self.args.unit = NULL
        self.args.start = NULL
        self.args.own = NULL
        TFC_CHECK(not float64 or (storage == STORE_NATIVE and kind <= CONV_BLAS_GATHER))

    def col2im(self, h_table, w_table, bint per_image, bint direct, Py_ssize_t band,
               Py_ssize_t cap):
        """The col2im: the axis tables (conv_axis_table), per image (N >= 2) or one image,
        ``direct`` for a 1x1, stride-1, unpadded conv, the ring's band and cap rows."""
        c, g = &self.args.core, &self.args.col
        TFC_CHECK(self.kind == CONV_COL2IM and (per_image or c.N == 1))
        self.tables = (h_table, w_table)
        g.h_off = <const int32_t*>_data(h_table[0])
        g.h_out = <const int32_t*>_data(h_table[1])
        g.h_tap = <const int32_t*>_data(h_table[2])
        g.w_off = <const int32_t*>_data(w_table[0])
        g.w_out = <const int32_t*>_data(w_table[1])
        g.w_tap = <const int32_t*>_data(w_table[2])
        g.direct, g.band, g.cap = direct, band, cap
        if per_image:
            c.work_per_thread = _col2im_image_work(c, g)
            self.entry = _images_f64 if self.float64 else _images_f32
        else:
            c.units = 0
            self.entry = _one_f64 if self.float64 else _one_f32
        self.ready = True

    def phases(self, gather):
        """The stride phases' tables: (strides, phase info, offy, offx, filter taps (raw
        channel tiles: the filter), A floats, output floats, merged row phases, the taps'
        indices in the filter), built and checked by tfcompat/conv/tables.py."""
        c = &self.args.core
        TFC_CHECK(self.kind != CONV_COL2IM)
        self.tables = (gather,)
        ((c.sh, c.sw), info, offy, offx, taps, c.a_floats, out_floats, merged,
         tap_rows) = gather
        c.phases = info.shape[0]
        c.ph_info = <const int32_t*>_data(info)
        c.ph_offy = <const int32_t*>_data(offy)
        c.ph_offx = <const int32_t*>_data(offx)
        c.ph_b = _data(taps)
        if TFC_CHECKS_ON:   # these read Python objects, which Cython evaluates even where
                            # TFC_CHECK compiles away
            TFC_CHECK(merged.shape[0] == min(c.sh, c.H) and info.shape[1] == PH_WIDTH)
        c.work_per_thread = c.a_floats + out_floats
        c.step = c.sw if self.kind == CONV_ONEDNN_GATHER else 1
        starts = _unit_starts(c, c.step)
        c.unit_starts = <const Py_ssize_t*>_data(starts)
        c.units = starts[starts.shape[0] - 1]
        self.tables = self.tables + (starts,)
        self.entry = _run_units

    def blas_gather(self, Py_ssize_t split_units, Py_ssize_t split_cols):
        """Our gather, its GEMMs' columns split for fewer units than split_units
        (conv_gather.pxi's _gather_cols)."""
        c = &self.args.core
        TFC_CHECK(self.kind == CONV_BLAS_GATHER and self.tables != ())
        c.group_cols = _gather_cols(c.N * c.units, c.C, split_units, split_cols)
        self.args.unit = _blas_unit_f64 if self.float64 else _blas_unit_f32
        self.ready = True

    def tiles(self, Py_ssize_t group_cols, bint raw, bint stream, bint runs,
              Py_ssize_t wide_values, bint pixels=True):
        """The tile kernels (kind CONV_CHANNEL_TILES or CONV_LANE_TILES): dx columns per group,
        ``raw`` (workers copy their groups' taps from the filter), ``stream`` (float32 dx
        stored with streaming stores), ``runs`` (narrow rows in runs), the values of a half
        type's widened window, ``pixels`` (the lane tiles' dx pixels in the lanes for few
        output channels; conv_tiles.pxi)."""
        c, t = &self.args.core, &self.args.tile
        cdef bint lanes = self.kind == CONV_LANE_TILES
        TFC_CHECK((lanes or self.kind == CONV_CHANNEL_TILES) and self.tables != ()
                  and tfc_tiles_built() and not self.float64
                  and (not lanes or c.C <= TFC_OC_MAX_C))
        taps, tap_rows = self.tables[0][4], self.tables[0][8]
        t.lanes = lanes
        t.tile_c = c.C if lanes else (c.C + 15) // 16 * 16
        t.tile_k = (c.OC + 15) // 16 * 16 if lanes else c.OC
        t.raw = raw and not lanes
        t.stream = stream and not lanes and c.storage == STORE_NATIVE
        t.runs = runs
        t.pixels = pixels
        c.cols = t.tile_c
        c.group_cols = t.tile_c if lanes else group_cols
        t.rows = <const int32_t*>_data(tap_rows)
        t.taps_n = tap_rows.shape[0]
        if TFC_CHECKS_ON:
            TFC_CHECK(c.work_per_thread % 2 == 0 and (lanes or group_cols % TFC_TILE_C == 0)
                      and c.a_floats >= _tile_scratch(c.fh * c.fw, c.OC, c.W)
                      and t.taps_n <= c.fh * c.fw
                      and (t.taps_n == 0 or (0 <= tap_rows.min()
                                             and tap_rows.max() < c.fh * c.fw))
                      and taps.size >= (c.fh * c.fw * t.tile_c * c.OC if t.raw
                                        else _tile_taps(c, t))
                      and (not t.raw
                           or taps.itemsize == (4 if c.storage == STORE_NATIVE else 2)))
        # a half type's widened dy rows (_tile_phase_band) and the worker's state, then a
        # worker's group of taps (_tile_group_taps), after the scratch
        t.window = _tile_window(c, t, wide_values)
        c.work_per_thread += _tile_widened(c, t) + _tile_widened(c, t) % 2
        if t.raw:
            c.work_per_thread += 16 + t.taps_n * c.OC * c.group_cols
        self.args.unit = _tile_unit
        self.args.start = _tile_start
        self.args.own = t
        self.ready = True

    def onednn(self, bint avx512, bint stream):
        """oneDNN's gather: dx rows copied or rounded in AVX-512 instructions (``avx512``: the
        Python layer checked the CPU) and stored with streaming stores (``stream``); its
        matmuls come with use_dnnl."""
        c, d = &self.args.core, &self.args.dn
        TFC_CHECK(self.kind == CONV_ONEDNN_GATHER and self.tables != () and not self.float64
                  and c.sw <= c.W and (not avx512 or tfc_tiles_built()))
        merged = self.tables[0][7]
        d.merged = <const int32_t*>_data(merged)
        d.avx512 = avx512
        d.stream = avx512 and stream
        self.args.unit = _dnnl_unit
        self.args.own = d

    def use_dnnl(self, size_t execute, size_t wait, size_t set_handle, cnp.ndarray prims,
                 cnp.ndarray streams, cnp.ndarray args, cnp.ndarray status, bint bits):
        """Run the gather's GEMMs with oneDNN (``bits``: the matmuls read dy's 16-bit values,
        else float32; the filter's taps, the gather tables', are of the matmuls' type): the
        addresses of ``dnnl_primitive_execute``, ``dnnl_stream_wait`` and
        ``dnnl_memory_set_data_handle``, [phases, 4] primitives and a stream per worker
        (intptr arrays), the [workers, phases, 4, 4] ``dnnl_exec_arg_t`` lists (each worker's
        memory objects; the kernel points a, b and out at this call's data) and an int32
        status per worker, all built by tfcompat/conv/onednn.py (see _dnnl_band)."""
        c, d = &self.args.core, &self.args.dn
        TFC_CHECK(self.kind == CONV_ONEDNN_GATHER and self.args.own == <const void*>d
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
        d.execute = <dnnl_execute_f>execute
        d.wait = <dnnl_wait_f>wait
        d.set_handle = <dnnl_set_handle_f>set_handle
        d.prims = <const intptr_t*>_data(prims)
        d.streams = <const intptr_t*>_data(streams)
        d.args = <const DnnlExecArg*>_data(args)
        d.status = <int32_t*>cnp.PyArray_DATA(status)
        d.bits = bits
        d.b_size = 2 if bits else 4
        self.ready = True

    def units(self):
        """How many units of work the threads can share: the bands of every image (the phase
        strategies, once per group of group_cols columns), the images (the per-image
        col2im), or 1."""
        c = &self.args.core
        if self.kind != CONV_COL2IM:
            return c.N * c.units * _groups(c)
        return c.N if self.entry != _one_f32 and self.entry != _one_f64 else 1

    def workspace(self, int num_threads):
        """Values of the compute type that ``run`` needs as scratch with that many threads."""
        c = &self.args.core
        if self.kind == CONV_COL2IM and (self.entry == _one_f32 or self.entry == _one_f64):
            return _col2im_one_work(c, &self.args.col, num_threads)
        return c.work_per_thread * num_threads

    def run(self, cnp.ndarray dy, cnp.ndarray w2, cnp.ndarray dx, int num_threads,
            cnp.ndarray work=None):
        """dx (NHWC, C-contiguous) from dy (NHWC, C-contiguous) and w2 ([fh * fw * C, OC] of
        the compute type; unread, and may be empty, for the phase strategies); work:
        ``workspace(num_threads)`` values, or None when that is 0."""
        cdef const void* s = cnp.PyArray_DATA(dy)
        cdef void* d = cnp.PyArray_DATA(dx)
        cdef const void* w = cnp.PyArray_DATA(w2)
        cdef void* scratch = NULL if work is None else cnp.PyArray_DATA(work)
        c = &self.args.core
        TFC_CHECK(self.ready and cnp.PyArray_SIZE(dy) == c.N * c.OH * c.OW * c.OC
                  and cnp.PyArray_SIZE(dx) == c.N * c.H * c.W * c.C
                  and (self.kind != CONV_COL2IM
                       or cnp.PyArray_SIZE(w2) == c.fh * c.fw * c.C * c.OC))
        with nogil:
            self.entry(&self.args, s, w, scratch, d, num_threads)
