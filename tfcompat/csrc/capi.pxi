# The C entry (csrc/capi.h, docs/architecture.md#the-c-entry): resizes (TF's grads, and the
# forwards and grads of a framework's front) planned once per signature and run on raw pointers
# with no Python and no GIL, for the TensorFlow plugin and the JAX front (the conv's, and the
# capsule: capi_conv.pxi).
#
# A TfcPlan is a copy of a validated plan's sizes and tables in one block of C memory,
# so that running and freeing it need no Python object. The cache holds up to CAPI_MAX_PLANS
# plans and CAPI_MAX_BYTES of tables (the Python plan cache's bounds); each plan counts its
# references (the cache's and each caller's) and is freed by whoever drops the last.

from cpython.pycapsule cimport PyCapsule_New
from libc.string cimport memcmp, memmove, strncpy
from libc.stdlib cimport calloc

cdef extern from "capi.h":
    # the C entry's kernel codes (capi.h), as the registry names the kernels
    cpdef enum KernelCode "tfc_kernel":
        RESIZE_BILINEAR_GRAD "TFC_RESIZE_BILINEAR_GRAD"
        RESIZE_NEAREST_NEIGHBOR_GRAD "TFC_RESIZE_NEAREST_NEIGHBOR_GRAD"
        CONV2D_BACKPROP_INPUT "TFC_CONV2D_BACKPROP_INPUT"
        RESIZE_BILINEAR "TFC_RESIZE_BILINEAR"
        RESIZE_NEAREST_NEIGHBOR "TFC_RESIZE_NEAREST_NEIGHBOR"


cdef extern from "capi.h":
    int TFC_ABI_VERSION
    int TFC_MAX_DIMS
    int TFC_F32, TFC_F64, TFC_F16, TFC_BF16, TFC_U8, TFC_I8, TFC_I32, TFC_I16, TFC_U16, TFC_I64
    int TFC_MAX_ARGS, TFC_MAX_VALUES, TFC_MAX_LIST
    int TFC_ATTR_BOOL, TFC_ATTR_INT, TFC_ATTR_FLOAT, TFC_ATTR_INTS, TFC_ATTR_CHOICE
    int64_t TFC_SERIAL_PRODUCTS
    int TFC_ARG_TENSOR, TFC_ARG_SHAPE, TFC_ARG_VALUES
    int TFC_NHWC, TFC_NCHW
    ctypedef struct TfcArgSig:
        int32_t kind
        int32_t dtype
        int32_t rank
        int32_t reserved
        int64_t dims[8]
        int64_t strides[8]
    ctypedef struct TfcOpSig:
        int32_t kernel
        int32_t front
        int32_t layout
        int32_t n_args
        TfcArgSig args[4]
        int32_t n_values
        int32_t threads
        int64_t values[96]
    int TFC_CONV2D_BACKPROP_INPUT, TFC_RESIZE_BILINEAR, TFC_RESIZE_NEAREST_NEIGHBOR
    int TFC_KERNEL_COUNT
    int TFC_SERIAL_VALUES
    ctypedef struct TfcConvSig:
        int32_t kernel
        int32_t dtype
        int32_t dy_rank
        int32_t filter_rank
        int64_t dy_dims[8]
        int64_t filter_dims[8]
        int32_t sizes_rank
        int32_t sizes_count
        int64_t input_sizes[8]
        int32_t data_format
        int32_t padding
        int32_t strides_count
        int32_t dilations_count
        int64_t strides[8]
        int64_t dilations[8]
        int32_t paddings_count
        int32_t threads
        int64_t explicit_paddings[16]
    ctypedef struct TfcPlan
    ctypedef struct TfcApi:
        int32_t abi_version
        int (*op_plan)(const TfcOpSig*, TfcPlan**, char*, size_t) noexcept nogil
        int (*op_run)(TfcPlan*, const void* const*, void* const*, int, char*,
                      size_t) noexcept nogil
        void (*plan_release)(TfcPlan*) noexcept nogil
        int64_t (*plan_out_bytes)(const TfcPlan*) noexcept nogil
        int (*num_threads)() noexcept nogil
        int (*plan_in_c)(const TfcPlan*) noexcept nogil
        int (*plan_serial)(const TfcPlan*) noexcept nogil
        int (*plan_out_dims)(const TfcPlan*, int64_t*) noexcept nogil
        void (*set_thread_pool)(tfc_pool_run_fn, void*) noexcept nogil
        int (*plan_out_dtype)(const TfcPlan*) noexcept nogil

cdef extern from *:
    """
    /* Py_IsFinalizing is public from Python 3.13; _Py_IsFinalizing before */
    #if PY_VERSION_HEX >= 0x030D0000
    #define tfc_is_finalizing() Py_IsFinalizing()
    #else
    #define tfc_is_finalizing() _Py_IsFinalizing()
    #endif
    """
    int tfc_is_finalizing() nogil

cdef extern from *:
    """
    #include <pthread.h>
    static pthread_mutex_t tfc_capi_lock = PTHREAD_MUTEX_INITIALIZER;
    static void tfc_capi_acquire(void) { pthread_mutex_lock(&tfc_capi_lock); }
    static void tfc_capi_unlock(void) { pthread_mutex_unlock(&tfc_capi_lock); }
    static int tfc_add_ref(int* refs, int delta) {
        return __atomic_add_fetch(refs, delta, __ATOMIC_ACQ_REL);
    }
    """
    void tfc_capi_acquire() nogil
    void tfc_capi_unlock() nogil
    int tfc_add_ref(int* refs, int delta) nogil


# what a TfcPlan (opaque in capi.h) is
cdef struct CPlan:
    TfcOpSig sig
    ResampleArgs args
    resample_entry entry
    int refs
    int empty
    int widen               # dy is float16 (1) or bfloat16 (2): widened to float32 first
    int round_out           # dx is float16 (1) or bfloat16 (2): summed in float32, rounded
    bint forward            # a forward resize: fwd's job (its src and dst set per call) ...
    bint copy               # ... or a copy (bilinear to the image's own size, which TF casts)
    FwdJob fwd
    Py_ssize_t dy_count, dx_count, out_bytes, nbytes
    char* tables            # the block the args' table pointers point into
    int out_rank, out_dtype
    int64_t out_dims[8]     # in the signature's layout


cdef enum:
    CAPI_MAX_PLANS = 256

cdef Py_ssize_t CAPI_MAX_BYTES = 64 << 20
cdef CPlan* _capi_plans[256]
cdef Py_ssize_t _capi_count = 0, _capi_bytes = 0
cdef int _capi_threads = 1
cdef TfcApi _API

def _dtype_codes():
    import ml_dtypes
    return {TFC_F32: np.dtype(np.float32), TFC_F64: np.dtype(np.float64),
            TFC_F16: np.dtype(np.float16), TFC_BF16: np.dtype(ml_dtypes.bfloat16),
            TFC_U8: np.dtype(np.uint8), TFC_I8: np.dtype(np.int8),
            TFC_I32: np.dtype(np.int32), TFC_I16: np.dtype(np.int16),
            TFC_U16: np.dtype(np.uint16), TFC_I64: np.dtype(np.int64)}


_CODES = _dtype_codes()     # TFC_* code -> NumPy dtype
# NumPy dtype -> the C entry's code (capi.h)
DTYPE_CODES = {d: c for c, d in _CODES.items()}
# an argument's and an attribute's kind (the op table's words) and a signature's layout, as
# capi.h codes them; the elements of a list a signature keeps
ARG_KINDS = {"tensor": TFC_ARG_TENSOR, "shape": TFC_ARG_SHAPE, "values": TFC_ARG_VALUES}
ATTR_KINDS = {"bool": TFC_ATTR_BOOL, "int": TFC_ATTR_INT, "float": TFC_ATTR_FLOAT,
              "ints": TFC_ATTR_INTS, "choice": TFC_ATTR_CHOICE}
LAYOUTS = {"NHWC": TFC_NHWC, "NCHW": TFC_NCHW}
MAX_LIST = TFC_MAX_LIST


cdef void _plan_free(CPlan* p) noexcept nogil:
    free(p.tables)
    free(p)


cdef void _release(CPlan* p) noexcept nogil:
    if p != NULL and tfc_add_ref(&p.refs, -1) == 0:
        _plan_free(p)


cdef int _capi_num_threads() noexcept nogil:
    return _capi_threads


def capi_set_threads(int n):
    """The thread count the C entry reports (tfcompat._threads keeps it current)."""
    global _capi_threads
    _capi_threads = max(1, n)


cdef void _error(char* err, size_t errlen, const char* msg) noexcept nogil:
    if errlen:
        strncpy(err, msg, errlen - 1)
        err[errlen - 1] = 0


cdef CPlan* _cache_find(const TfcOpSig* sig) noexcept nogil:
    """The cached plan of sig with a new reference, or NULL (under the lock)."""
    cdef Py_ssize_t i
    cdef CPlan* p = NULL
    tfc_capi_acquire()
    for i in range(_capi_count):
        if memcmp(&_capi_plans[i].sig, sig, sizeof(TfcOpSig)) == 0:
            p = _capi_plans[i]
            tfc_add_ref(&p.refs, 1)
            break
    tfc_capi_unlock()
    return p


cdef void _cache_put(CPlan* p) noexcept nogil:
    """Keep p (one reference for the cache), dropping the oldest plans to make room; a plan
    larger than the byte bound is not kept."""
    global _capi_count, _capi_bytes
    cdef Py_ssize_t i
    if p.nbytes > CAPI_MAX_BYTES:
        return
    tfc_capi_acquire()
    for i in range(_capi_count):
        if memcmp(&_capi_plans[i].sig, &p.sig, sizeof(TfcOpSig)) == 0:
            tfc_capi_unlock()      # another thread kept the same signature first
            return
    while _capi_count > 0 and (_capi_count >= CAPI_MAX_PLANS
                               or _capi_bytes + p.nbytes > CAPI_MAX_BYTES):
        _capi_bytes -= _capi_plans[0].nbytes
        _release(_capi_plans[0])
        memmove(&_capi_plans[0], &_capi_plans[1], (_capi_count - 1) * sizeof(CPlan*))
        _capi_count -= 1
    tfc_add_ref(&p.refs, 1)
    _capi_plans[_capi_count] = p
    _capi_count += 1
    _capi_bytes += p.nbytes
    tfc_capi_unlock()


cdef Py_ssize_t _table_bytes(object a):
    return 0 if a is None else cnp.PyArray_NBYTES(<cnp.ndarray>a)


cdef char* _copy_table(object a, char** cursor):
    """Copy a table into the block at *cursor (16-byte steps); its new address, or NULL."""
    if a is None:
        return NULL
    cdef cnp.ndarray arr = <cnp.ndarray>a
    cdef char* at = cursor[0]
    cdef Py_ssize_t nb = cnp.PyArray_NBYTES(arr)
    memcpy(at, cnp.PyArray_DATA(arr), nb)
    cursor[0] = at + ((nb + 15) // 16) * 16
    return at


cdef char* _alloc_tables(CPlan* p, object arrays) except NULL:
    """p's one block for ``arrays`` (each at a 16-byte step; None takes none), its size in
    p.nbytes; the block's start, for _copy_table. Frees p when there is no memory."""
    cdef Py_ssize_t total = 0
    for a in arrays:
        total += ((_table_bytes(a) + 15) // 16) * 16
    p.tables = <char*>malloc(max(total, 16))
    if p.tables == NULL:
        free(p)
        raise MemoryError("tfcompat's C entry: a plan's tables")
    p.nbytes = total
    return p.tables


cdef CPlan* _new_plan(object op, const TfcOpSig* sig) except NULL:
    """A zeroed plan of sig with op's (an _capi.OpCPlan's) output (with the GIL)."""
    cdef CPlan* p = <CPlan*>calloc(1, sizeof(CPlan))
    if p == NULL:
        raise MemoryError("tfcompat's C entry: a plan")
    memcpy(&p.sig, sig, sizeof(TfcOpSig))
    p.refs = 1
    p.out_rank = len(op.out_dims)
    for i, d in enumerate(op.out_dims):
        p.out_dims[i] = d
    p.out_dtype = op.out_code
    return p


cdef CPlan* _plan_from(object op, const TfcOpSig* sig) except NULL:
    """A plan copied from a cython-backend ResamplePlan (op.plan; with the GIL)."""
    plan = op.plan
    cdef CPlan* p = _new_plan(op, sig)
    p.empty = plan.empty
    p.out_bytes = math_prod(plan.out_shape) * np.dtype(plan.out_dtype).itemsize
    if p.empty:
        return p
    cdef ResamplePlan k = <ResamplePlan>plan.kernel
    t = k.tables
    names = ("z_off", "z_src", "z_cnt", "z_w0", "z_w1", "y_off", "y_src", "y_cnt", "y_w0",
             "y_w1", "x_lo", "x_hi", "x_wlo", "x_whi", "x_off")
    arrays = [getattr(t, n) for n in names]
    cdef char* cur = _alloc_tables(p, arrays)
    p.args = k.args
    p.entry = k.entry
    p.args.t.z_off = <const int32_t*>_copy_table(arrays[0], &cur)
    p.args.t.z_src = <const int32_t*>_copy_table(arrays[1], &cur)
    p.args.t.z_cnt = <const int32_t*>_copy_table(arrays[2], &cur)
    p.args.t.z_w0 = <const float*>_copy_table(arrays[3], &cur)
    p.args.t.z_w1 = <const float*>_copy_table(arrays[4], &cur)
    p.args.t.y_off = <const int32_t*>_copy_table(arrays[5], &cur)
    p.args.t.y_src = <const int32_t*>_copy_table(arrays[6], &cur)
    p.args.t.y_cnt = <const int32_t*>_copy_table(arrays[7], &cur)
    p.args.t.y_w0 = <const float*>_copy_table(arrays[8], &cur)
    p.args.t.y_w1 = <const float*>_copy_table(arrays[9], &cur)
    p.args.x_lo = <const int32_t*>_copy_table(arrays[10], &cur)
    p.args.x_hi = <const int32_t*>_copy_table(arrays[11], &cur)
    p.args.x_wlo = <const float*>_copy_table(arrays[12], &cur)
    p.args.x_whi = <const float*>_copy_table(arrays[13], &cur)
    p.args.x_off = <const int32_t*>_copy_table(arrays[14], &cur)
    # the half types by the signature's codes: the plan widens dy's (a nearest grad's) and
    # rounds dx's
    p.widen = (0 if not plan.widen else 1 if sig.args[0].dtype == TFC_F16
               else 2 if sig.args[0].dtype == TFC_BF16 else -1)
    p.round_out = (0 if plan.acc_dtype == plan.out_dtype else 1 if p.out_dtype == TFC_F16
                   else 2 if p.out_dtype == TFC_BF16 else -1)
    if p.widen < 0 or p.round_out < 0:
        _plan_free(p)
        raise TypeError("tfcompat's C entry: a conversion it does not run")
    p.dy_count = k.args.rows_b * k.args.Oz * k.args.Oy * k.args.Ox * k.args.C
    p.dx_count = k.args.rows_b * k.args.Iz * k.args.Iy * k.args.Ix * k.args.C
    return p


cdef CPlan* _forward_plan_from(object op, const TfcOpSig* sig) except NULL:
    """A plan copied from a forward resize's _capi.ForwardCPlan (op.plan; with the GIL)."""
    plan = op.plan
    cdef CPlan* p = _new_plan(op, sig)
    p.forward, p.copy, p.empty = True, plan.copy, plan.empty
    p.out_bytes = plan.out_bytes
    p.widen, p.round_out = plan.widen, plan.round_out
    cdef FwdJob* j = &p.fwd
    (j.B, j.IH, j.IW, j.C, j.OH, j.OW) = plan.sizes
    j.linear, j.wide, j.num, j.pixel = plan.linear, plan.wide, plan.src_num, plan.pixel
    p.dy_count = j.B * j.IH * j.IW * j.C
    p.dx_count = j.B * j.OH * j.OW * j.C
    if p.empty or p.copy:
        return p
    cdef char* cur = _alloc_tables(p, plan.tables)
    cdef char* ptrs[6]
    cdef int k = 0
    for a in plan.tables[:6]:
        ptrs[k] = _copy_table(a, &cur)
        k += 1
    if j.linear:    # lo, hi, lerp of y, then of x
        j.yl, j.yh, j.ly = <const int32_t*>ptrs[0], <const int32_t*>ptrs[1], <const float*>ptrs[2]
        j.xl, j.xh, j.lx = <const int32_t*>ptrs[3], <const int32_t*>ptrs[4], <const float*>ptrs[5]
    else:
        j.yl, j.xl = <const int32_t*>ptrs[0], <const int32_t*>ptrs[1]
        j.yh, j.xh = j.yl, j.xl
    cdef Py_ssize_t i
    if TFC_CHECKS_ON:   # the checked build proves every table index in range
        for i in range(j.OH):
            TFC_CHECK(0 <= j.yl[i] < j.IH and 0 <= j.yh[i] < j.IH)
        for i in range(j.OW):
            TFC_CHECK(0 <= j.xl[i] < j.IW and 0 <= j.xh[i] < j.IW)
    return p


def math_prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


cdef int _capi_op_plan(const TfcOpSig* sig, TfcPlan** out, char* err,
                       size_t errlen) noexcept nogil:
    cdef int type_error = 0
    cdef int rc = _op_plan(sig, out, err, errlen, &type_error)
    return 1 if rc == 4 else rc


cdef int _op_plan(const TfcOpSig* sig, TfcPlan** out, char* err, size_t errlen,
                  int* type_error) noexcept nogil:
    """op_plan, and *type_error 1 where the policy's error was a TypeError."""
    cdef TfcConvSig conv
    cdef int in_c = 0
    if sig.kernel == TFC_CONV2D_BACKPROP_INPUT:
        if _conv_sig(sig, &conv, err, errlen):
            return 1
        return _capi_conv_plan(&conv, out, &in_c, err, errlen)
    out[0] = <TfcPlan*>_cache_find(sig)
    if out[0] != NULL:
        return 0
    if tfc_is_finalizing():
        _error(err, errlen, "tfcompat: the Python interpreter is shutting down")
        return 3
    cdef int status = 0
    with gil:
        status = _build_plan(sig, out, err, errlen, type_error)
    return status


cdef object _sig_args(const TfcOpSig* sig):
    """The signature's arguments as (kind, dtype or None, dims, strides) tuples."""
    args = []
    cdef int i, k, rank
    for i in range(min(max(sig.n_args, 0), TFC_MAX_ARGS)):
        rank = min(max(sig.args[i].rank, 0), TFC_MAX_DIMS)
        args.append((sig.args[i].kind, _CODES.get(sig.args[i].dtype),
                     tuple(sig.args[i].dims[k] for k in range(rank)),
                     tuple(sig.args[i].strides[k] for k in range(rank))))
    return args


cdef int _build_plan(const TfcOpSig* sig, TfcPlan** out, char* err, size_t errlen,
                     int* type_error):
    cdef CPlan* p
    cdef int k
    try:
        from tfcompat import _capi
        values = [sig.values[k] for k in range(min(max(sig.n_values, 0), TFC_MAX_VALUES))]
        op = _capi.op_plan(sig.kernel, sig.front, sig.layout, _sig_args(sig), values,
                           sig.n_values, sig.n_args)
        p = _forward_plan_from(op, sig) if op.forward else _plan_from(op, sig)
    except BaseException as exc:
        msg = str(exc).encode("utf-8", "replace")
        _error(err, errlen, <const char*>msg)
        out[0] = NULL
        type_error[0] = isinstance(exc, TypeError)
        return 2 if isinstance(exc, MemoryError) else 1
    _cache_put(p)
    out[0] = <TfcPlan*>p
    return 0


cdef int _capi_op_run(TfcPlan* plan, const void* const* args, void* const* outputs,
                      int num_threads, char* err, size_t errlen) noexcept nogil:
    if (<const int32_t*>plan)[0] == TFC_CONV2D_BACKPROP_INPUT:   # (filter, out_backprop)
        return _capi_conv_run(plan, args[2], args[1], outputs[0], num_threads, err, errlen)
    cdef CPlan* p = <CPlan*>plan
    cdef const void* dy = args[0]
    cdef void* dx = outputs[0]
    cdef const void* src = dy
    cdef void* acc = dx
    cdef float* widened = NULL
    cdef float* summed = NULL
    cdef float* work = NULL
    cdef int nt = max(1, num_threads)
    cdef FwdJob job
    if p.empty:
        memset(dx, 0, p.out_bytes)
        return 0
    if p.copy:
        memcpy(dx, dy, p.out_bytes)
        return 0
    if p.widen:
        widened = <float*>malloc(max(p.dy_count, 1) * sizeof(float))
        if widened == NULL:
            _error(err, errlen, "tfcompat: out of memory for a float32 copy of the grads")
            return 2
        _convert(dy, widened, p.dy_count, p.widen == 2, True, nt)
        src = widened
    if p.round_out:
        summed = <float*>malloc(max(p.dx_count, 1) * sizeof(float))
        if summed == NULL:
            free(widened)
            _error(err, errlen, "tfcompat: out of memory for the float32 sums")
            return 2
        acc = summed
    if p.forward:
        job = p.fwd
        job.src, job.dst = src, acc
        if _fwd_run_nogil(&job, nt):
            free(widened)
            free(summed)
            _error(err, errlen, "tfcompat: out of memory for the resize's lerped rows")
            return 2
    elif p.args.work_per_thread:
        work = <float*>malloc(p.args.work_per_thread * nt * sizeof(float))
        if work == NULL:
            free(widened)
            free(summed)
            _error(err, errlen, "tfcompat: out of memory for the kernel's scratch rows")
            return 2
    if not p.forward:
        _resample_run(p.entry, src, acc, &p.args, work, nt)
    if p.round_out:
        _convert(summed, dx, p.dx_count, p.round_out == 2, False, nt)
    free(widened)
    free(summed)
    free(work)
    return 0


cdef int _op_serial(const CPlan* p) noexcept nogil:
    return p.dx_count < TFC_SERIAL_VALUES


cdef int _capi_op_out_dims(const CPlan* p, int64_t* dims) noexcept nogil:
    memcpy(dims, p.out_dims, p.out_rank * sizeof(int64_t))
    return p.out_rank


cdef class CEntryPlan:
    """An op plan of the C entry, held from Python (the PyTorch front): made by
    :func:`capi_plan`, run on raw pointers by :meth:`run`, its reference given back when it
    is collected."""
    cdef CPlan* p
    cdef readonly tuple out_dims
    cdef readonly Py_ssize_t out_bytes, nbytes
    cdef readonly bint serial      # small enough to run on the caller's thread (capi.h)

    def __dealloc__(self):
        _release(self.p)

    def peak(self, int num_threads):
        """Bytes a run allocates besides its arguments: the output, a half type's float32
        copies of the input and the sums, and the kernel's scratch on num_threads threads."""
        cdef CPlan* p = self.p
        cdef Py_ssize_t nt = max(1, num_threads), scratch = 0
        if p.empty or p.copy:
            return p.out_bytes
        if p.forward:
            scratch = (2 * p.fwd.OW * p.fwd.C * nt * (8 if p.fwd.wide else 4)
                       if p.fwd.linear else 0)
        else:
            scratch = p.args.work_per_thread * nt * 4
        return (p.out_bytes + (p.dy_count * 4 if p.widen else 0)
                + (p.dx_count * 4 if p.round_out else 0) + scratch)

    def run(self, intptr_t src, intptr_t dst, int num_threads):
        """outputs[0] = dst, args[0] = src (the signature's shapes and memory order)."""
        cdef const void* args[1]
        cdef void* outs[1]
        cdef char err[512]
        cdef int rc
        args[0] = <const void*>src
        outs[0] = <void*>dst
        with nogil:
            rc = _capi_op_run(<TfcPlan*>self.p, args, outs, num_threads, err, sizeof(err))
        if rc:
            raise (MemoryError if rc == 2 else RuntimeError)(err.decode("utf-8", "replace"))


def capi_plan(int kernel, int front, int layout, args, values):
    """The C entry's plan of a signature (tfcompat._capi.op_plan's arguments: each argument
    (kind, dtype code, dims, strides), then the values), as a :class:`CEntryPlan`; the policy
    layer's ValueError, TypeError or MemoryError for an invalid one."""
    cdef TfcOpSig sig
    cdef TfcPlan* plan = NULL
    cdef char err[2048]
    cdef int i, k, rc
    memset(&sig, 0, sizeof(sig))
    if len(args) > TFC_MAX_ARGS or len(values) > TFC_MAX_VALUES:
        raise ValueError("tfcompat's C entry: too many arguments or values")
    sig.kernel, sig.front, sig.layout = kernel, front, layout
    sig.n_args, sig.n_values = len(args), len(values)
    for i, (kind, dtype, dims, strides) in enumerate(args):
        if len(dims) > TFC_MAX_DIMS:
            raise ValueError(f"tfcompat's C entry: a tensor of rank {len(dims)}")
        sig.args[i].kind, sig.args[i].dtype, sig.args[i].rank = kind, dtype, len(dims)
        for k in range(len(dims)):
            sig.args[i].dims[k] = dims[k]
            sig.args[i].strides[k] = strides[k] if strides else 0
    for i in range(len(values)):
        sig.values[i] = values[i]
    cdef int type_error = 0
    rc = _op_plan(&sig, &plan, err, sizeof(err), &type_error)
    if rc:
        raise (MemoryError if rc == 2 else RuntimeError if rc == 3 else TypeError if type_error
               else ValueError)(err.decode("utf-8", "replace"))
    if kernel == TFC_CONV2D_BACKPROP_INPUT:
        _capi_release(plan)
        raise ValueError("tfcompat's C entry: a front runs no conv")
    cdef CEntryPlan out = CEntryPlan.__new__(CEntryPlan)
    out.p = <CPlan*>plan
    out.out_dims = tuple(out.p.out_dims[k] for k in range(out.p.out_rank))
    out.out_bytes = out.p.out_bytes
    out.nbytes = out.p.nbytes
    out.serial = _op_serial(out.p)
    return out
