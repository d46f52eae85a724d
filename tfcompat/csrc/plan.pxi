# The resampling plan: one entry point for every resize-type kernel.
#
# A plan is built once per validated layout (tfcompat/backends/cython_backend.py) from the
# sizes, the per-axis tables (tfcompat/_tables.py) and the kind of kernel, which picks the
# specialised entry below once. ``run`` then passes raw pointers: every precondition (dtypes,
# sizes, contiguity, table lengths, indices in range) was proven in Python, and the
# bounds-checked build checks them again.

cpdef enum ResampleKind:
    # (family, type read, type summed in): the combinations the Python layer builds
    LINEAR_F32 = 0          # float32 grads summed in float32 (float16/bfloat16 widened to it)
    LINEAR_F32_F64 = 1      # float32 grads summed in float64 (TF's float64 image)
    LINEAR_F64 = 2          # float64 grads summed in float64
    NEAREST_F32 = 3
    NEAREST_F64 = 4
    NEAREST_U8 = 5          # uint8 and int8 (wrapping sums)
    NEAREST_U32 = 6         # int32 (wrapping sums)

# share s of n of a resampling kernel (team.h)
ctypedef void (*resample_entry)(const void* dy, void* dx, const ResampleArgs* r, float* work,
                                int s, int n) noexcept nogil


cdef void _linear_f32(const void* dy, void* dx, const ResampleArgs* r, float* work, int s,
                      int n) noexcept nogil:
    _linear_share(<const float*>dy, <float*>dx, r, work, s, n)

cdef void _linear_f32_f64(const void* dy, void* dx, const ResampleArgs* r, float* work, int s,
                          int n) noexcept nogil:
    _linear_share(<const float*>dy, <double*>dx, r, work, s, n)

cdef void _linear_f64(const void* dy, void* dx, const ResampleArgs* r, float* work, int s,
                      int n) noexcept nogil:
    _linear_share(<const double*>dy, <double*>dx, r, work, s, n)

cdef void _nearest_f32(const void* dy, void* dx, const ResampleArgs* r, float* work, int s,
                       int n) noexcept nogil:
    _nearest_share(<const float*>dy, <float*>dx, r, s, n)

cdef void _nearest_f64(const void* dy, void* dx, const ResampleArgs* r, float* work, int s,
                       int n) noexcept nogil:
    _nearest_share(<const double*>dy, <double*>dx, r, s, n)

cdef void _nearest_u8(const void* dy, void* dx, const ResampleArgs* r, float* work, int s,
                      int n) noexcept nogil:
    _nearest_share(<const unsigned char*>dy, <unsigned char*>dx, r, s, n)

cdef void _nearest_u32(const void* dy, void* dx, const ResampleArgs* r, float* work, int s,
                       int n) noexcept nogil:
    _nearest_share(<const unsigned int*>dy, <unsigned int*>dx, r, s, n)


cdef struct ResampleJob:
    resample_entry entry
    const void* dy
    void* dx
    const ResampleArgs* r
    float* work


cdef void _resample_share(void* ctx, int s, int n) noexcept nogil:
    cdef ResampleJob* j = <ResampleJob*>ctx
    j.entry(j.dy, j.dx, j.r, j.work, s, n)


cdef void _resample_run(resample_entry entry, const void* dy, void* dx, const ResampleArgs* r,
                        float* work, int num_threads) noexcept nogil:
    """The kernel on ``num_threads`` shares (``work``: num_threads * r.work_per_thread)."""
    cdef ResampleJob j
    j.entry = entry
    j.dy = dy
    j.dx = dx
    j.r = r
    j.work = work
    tfc_parallel(_resample_share, &j, num_threads)


cdef resample_entry _ENTRIES[7]
_ENTRIES[<int>LINEAR_F32] = _linear_f32
_ENTRIES[<int>LINEAR_F32_F64] = _linear_f32_f64
_ENTRIES[<int>LINEAR_F64] = _linear_f64
_ENTRIES[<int>NEAREST_F32] = _nearest_f32
_ENTRIES[<int>NEAREST_F64] = _nearest_f64
_ENTRIES[<int>NEAREST_U8] = _nearest_u8
_ENTRIES[<int>NEAREST_U32] = _nearest_u32


cdef inline const void* _data(object a):
    """An array's data pointer, or NULL for None (a table the kind does not use)."""
    return NULL if a is None else cnp.PyArray_DATA(<cnp.ndarray>a)


cdef class ResamplePlan:
    """One layout's resampling backward, prepared once.

    ``kind``: a :class:`ResampleKind`. ``sizes``: (rows_b, Iz, Iy, Ix, Oz, Oy, Ox, C) of the
    canonical layout (rows.pxi). ``tables``: a tfcompat._tables.ResampleTables, whose arrays
    the plan keeps alive and reads through pointers. ``work_per_thread``: floats of scratch per
    thread that ``run`` must be given (see ``workspace``).
    """
    cdef ResampleArgs args
    cdef resample_entry entry
    cdef readonly object tables
    cdef readonly ResampleKind kind

    def __cinit__(self, ResampleKind kind, sizes, tables, Py_ssize_t work_per_thread):
        self.kind = kind
        self.entry = _ENTRIES[<int>kind]
        self.tables = tables
        a = &self.args
        (a.rows_b, a.Iz, a.Iy, a.Ix, a.Oz, a.Oy, a.Ox, a.C) = sizes
        a.t.z_off = <const int32_t*>_data(tables.z_off)
        a.t.z_src = <const int32_t*>_data(tables.z_src)
        a.t.z_cnt = <const int32_t*>_data(tables.z_cnt)
        a.t.z_w0 = <const float*>_data(tables.z_w0)
        a.t.z_w1 = <const float*>_data(tables.z_w1)
        a.t.y_off = <const int32_t*>_data(tables.y_off)
        a.t.y_src = <const int32_t*>_data(tables.y_src)
        a.t.y_cnt = <const int32_t*>_data(tables.y_cnt)
        a.t.y_w0 = <const float*>_data(tables.y_w0)
        a.t.y_w1 = <const float*>_data(tables.y_w1)
        a.x_lo = <const int32_t*>_data(tables.x_lo)
        a.x_hi = <const int32_t*>_data(tables.x_hi)
        a.x_wlo = <const float*>_data(tables.x_wlo)
        a.x_whi = <const float*>_data(tables.x_whi)
        a.x_off = <const int32_t*>_data(tables.x_off)
        a.work_per_thread = work_per_thread

    def workspace(self, int num_threads):
        """Floats of scratch ``run`` needs with ``num_threads`` threads (0: none)."""
        return self.args.work_per_thread * num_threads

    def run(self, cnp.ndarray dy, cnp.ndarray dx, int num_threads, cnp.ndarray work=None):
        """dx = the backward of dy. dy: C-contiguous, aligned, of the kind's input type (or
        one of its size); dx: C-contiguous, of the type it sums in; work: ``workspace(n)``
        float32 values, or None when that is 0."""
        cdef const void* s = cnp.PyArray_DATA(dy)
        cdef void* d = cnp.PyArray_DATA(dx)
        cdef float* w = NULL if work is None else <float*>cnp.PyArray_DATA(work)
        cdef ResampleArgs* a = &self.args
        TFC_CHECK(cnp.PyArray_SIZE(dy) == a.rows_b * a.Oz * a.Oy * a.Ox * a.C
                  and cnp.PyArray_SIZE(dx) == a.rows_b * a.Iz * a.Iy * a.Ix * a.C
                  and (a.work_per_thread == 0 or
                       (w != NULL and cnp.PyArray_SIZE(work) >= a.work_per_thread * num_threads)))
        with nogil:
            _resample_run(self.entry, s, d, a, w, num_threads)
