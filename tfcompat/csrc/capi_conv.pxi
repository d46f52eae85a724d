# The C entry's Conv2DBackpropInput (csrc/capi.h, docs/architecture.md#the-c-entry), and the
# capsule that holds the whole TfcApi.
#
# A signature seen first takes the GIL: tfcompat/_capi.py validates it and chooses the conv's
# strategy exactly as a Python call would. Where that is a tile strategy on an NHWC conv, the
# plan keeps its ConvPlan (shapes only: the tables) and each run, with no Python, copies this
# call's filter into the taps the kernel reads and runs the ConvPlan's entry. Any other
# strategy, and NCHW, runs through the Python conv, taking the GIL for each call.

from cpython.ref cimport PyObject, Py_INCREF, Py_DECREF
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.buffer cimport PyBUF_READ, PyBUF_WRITE

cdef extern from "pool.h":
    void* tfc_malloc(void* ctx, size_t size) nogil
    void tfc_free(void* ctx, void* ptr, size_t size) nogil


# how a C run makes this call's taps from its filter (the tile strategies' layouts,
# tfcompat/conv/tables.py's phase_tables)
cpdef enum TapsLayout:
    TAPS_FILTER = 0     # the filter itself (the channel tiles' raw taps, C a multiple of 16)
    TAPS_PADDED = 1     # the filter with C padded to tile_c (raw taps)
    TAPS_BLOCKS = 2     # conv_filter_taps of the padded filter, blocks of TFC_TILE_C columns
    TAPS_LANES = 3      # each tap's [C, tile_k] in float32, zeros from OC on (the lane tiles)


cdef struct ConvCPlan:
    TfcConvSig sig          # first: a TfcPlan's kernel is its signature's first field
    int refs
    int empty
    int in_c
    int64_t out_dims[4]
    Py_ssize_t out_bytes, nbytes
    PyObject* owner         # the ConvPlan (in_c) or the Python runner
    # in_c: the ConvPlan's arguments and entry, how its taps are made, its units of work
    ConvPlanArgs args
    conv_entry entry
    TapsLayout layout
    bint simd               # conv_filter_taps in AVX-512
    Py_ssize_t units, value_size, taps_bytes


cdef enum:
    CAPI_MAX_CONV_PLANS = 64

cdef ConvCPlan* _conv_plans[64]
cdef Py_ssize_t _conv_count = 0, _conv_bytes = 0


cdef void _conv_free(ConvCPlan* p) noexcept nogil:
    """Free p, dropping its Python object with the GIL (kept where the interpreter is
    finalizing: the process is ending)."""
    if p.owner != NULL and not tfc_is_finalizing():
        with gil:
            Py_DECREF(<object>p.owner)
    free(p)


cdef void _conv_release(ConvCPlan* p) noexcept nogil:
    if p != NULL and tfc_add_ref(&p.refs, -1) == 0:
        _conv_free(p)


cdef void _capi_release(TfcPlan* p) noexcept nogil:
    if p == NULL:
        return
    if (<const int32_t*>p)[0] == TFC_CONV2D_BACKPROP_INPUT:
        _conv_release(<ConvCPlan*>p)
    else:
        _release(<CPlan*>p)


cdef int _capi_out_dims(const TfcPlan* p, int64_t* dims) noexcept nogil:
    cdef const ConvCPlan* c
    if (<const int32_t*>p)[0] != TFC_CONV2D_BACKPROP_INPUT:
        return _capi_op_out_dims(<const CPlan*>p, dims)
    c = <const ConvCPlan*>p
    memcpy(dims, c.out_dims, 4 * sizeof(int64_t))
    return 4


cdef int _capi_in_c(const TfcPlan* p) noexcept nogil:
    if (<const int32_t*>p)[0] == TFC_CONV2D_BACKPROP_INPUT:
        return (<const ConvCPlan*>p).in_c or (<const ConvCPlan*>p).empty
    return 1


cdef int _capi_serial(const TfcPlan* p) noexcept nogil:
    cdef const TfcConvSig* c
    cdef int64_t products = 1
    cdef int i
    if (<const int32_t*>p)[0] != TFC_CONV2D_BACKPROP_INPUT:
        return _op_serial(<const CPlan*>p)
    # dy's values times the filter's taps and input channels (the policy proved the ranks)
    c = &(<const ConvCPlan*>p).sig
    for i in range(min(c.dy_rank, 8)):
        products *= c.dy_dims[i]
    for i in range(min(c.filter_rank, 3)):
        products *= c.filter_dims[i]
    return products < TFC_SERIAL_PRODUCTS


cdef int _conv_sig(const TfcOpSig* sig, TfcConvSig* c, char* err, size_t errlen) noexcept nogil:
    """The conv's plan key of an op signature of Conv2DBackpropInput (the op table's record:
    input_sizes values, filter, out_backprop; strides, padding, explicit_paddings, data_format,
    dilations); 1 with a message where the signature has not that shape."""
    cdef int i, j, k, at = 0, n
    cdef int32_t counts[3]
    cdef int64_t* lists[3]
    memset(c, 0, sizeof(TfcConvSig))
    if (sig.n_args != 3 or sig.args[0].kind != TFC_ARG_VALUES
            or sig.args[1].kind != TFC_ARG_TENSOR or sig.args[2].kind != TFC_ARG_TENSOR
            or sig.n_values > TFC_MAX_VALUES or sig.front or sig.layout != TFC_NHWC):
        _error(err, errlen, "tfcompat's C entry: Conv2DBackpropInput takes TF's (input_sizes "
               "values, filter, out_backprop) and its attributes")
        return 1
    c.kernel = TFC_CONV2D_BACKPROP_INPUT
    c.dtype = sig.args[2].dtype
    c.dy_rank, c.filter_rank = sig.args[2].rank, sig.args[1].rank
    memcpy(c.dy_dims, sig.args[2].dims, sizeof(c.dy_dims))
    memcpy(c.filter_dims, sig.args[1].dims, sizeof(c.filter_dims))
    c.sizes_rank = sig.args[0].rank
    c.sizes_count = 1
    for i in range(min(max(sig.args[0].rank, 0), 8)):
        c.sizes_count *= sig.args[0].dims[i]
    n = <int>min(max(c.sizes_count, 0), TFC_MAX_LIST)
    for i in range(n):
        if i < 8:
            c.input_sizes[i] = sig.values[at + i]
    at += n
    # strides (ints), padding (choice), explicit_paddings (ints), data_format (choice),
    # dilations (ints): each list as its length, then its first TFC_MAX_LIST values
    lists[0], lists[1], lists[2] = c.strides, c.explicit_paddings, c.dilations
    for k in range(5):
        if at >= sig.n_values:
            _error(err, errlen, "tfcompat's C entry: Conv2DBackpropInput's attributes are "
                   "missing from its signature")
            return 1
        if k == 1 or k == 3:
            if k == 1:
                c.padding = <int32_t>sig.values[at]
            else:
                c.data_format = <int32_t>sig.values[at]
            at += 1
            continue
        i = 0 if k == 0 else 1 if k == 2 else 2
        counts[i] = <int32_t>sig.values[at]
        n = <int>min(max(counts[i], 0), TFC_MAX_LIST)
        for j in range(n):
            if j < (16 if i == 1 else 8):
                lists[i][j] = sig.values[at + 1 + j]
        at += 1 + n
    c.strides_count, c.paddings_count, c.dilations_count = counts[0], counts[1], counts[2]
    return 0


cdef int _capi_out_dtype(const TfcPlan* p) noexcept nogil:
    if (<const int32_t*>p)[0] == TFC_CONV2D_BACKPROP_INPUT:
        return (<const ConvCPlan*>p).sig.dtype
    return (<const CPlan*>p).out_dtype


cdef int64_t _capi_any_out_bytes(const TfcPlan* p) noexcept nogil:
    if (<const int32_t*>p)[0] == TFC_CONV2D_BACKPROP_INPUT:
        return (<const ConvCPlan*>p).out_bytes
    return (<const CPlan*>p).out_bytes


cdef ConvCPlan* _conv_find(const TfcConvSig* sig) noexcept nogil:
    cdef Py_ssize_t i
    cdef ConvCPlan* p = NULL
    tfc_capi_acquire()
    for i in range(_conv_count):
        if memcmp(&_conv_plans[i].sig, sig, sizeof(TfcConvSig)) == 0:
            p = _conv_plans[i]
            tfc_add_ref(&p.refs, 1)
            break
    tfc_capi_unlock()
    return p


cdef void _conv_put(ConvCPlan* p) noexcept nogil:
    """Keep p (one reference for the cache) as _cache_put keeps a resampling plan; the plans
    it drops are released after the lock (freeing one may take the GIL)."""
    global _conv_count, _conv_bytes
    cdef ConvCPlan* dropped[64]
    cdef Py_ssize_t i, ndropped = 0
    if p.nbytes > CAPI_MAX_BYTES:
        return
    tfc_capi_acquire()
    for i in range(_conv_count):
        if memcmp(&_conv_plans[i].sig, &p.sig, sizeof(TfcConvSig)) == 0:
            tfc_capi_unlock()
            return
    while _conv_count > 0 and (_conv_count >= CAPI_MAX_CONV_PLANS
                               or _conv_bytes + p.nbytes > CAPI_MAX_BYTES):
        _conv_bytes -= _conv_plans[0].nbytes
        dropped[ndropped] = _conv_plans[0]
        ndropped += 1
        memmove(&_conv_plans[0], &_conv_plans[1], (_conv_count - 1) * sizeof(ConvCPlan*))
        _conv_count -= 1
    tfc_add_ref(&p.refs, 1)
    _conv_plans[_conv_count] = p
    _conv_count += 1
    _conv_bytes += p.nbytes
    tfc_capi_unlock()
    for i in range(ndropped):
        _conv_release(dropped[i])


cdef tuple _ints(const int64_t* values, int32_t count, int cap=8):
    return tuple(values[i] for i in range(min(max(count, 0), cap)))


cdef int _conv_build(const TfcConvSig* sig, TfcPlan** out, int* in_c, char* err, size_t errlen):
    cdef ConvCPlan* p = NULL
    cdef ConvPlan plan
    cdef int i
    try:
        from tfcompat import _capi
        made = _capi.conv_plan(
            _CODES.get(sig.dtype), _ints(sig.dy_dims, sig.dy_rank),
            _ints(sig.filter_dims, sig.filter_rank), sig.sizes_rank,
            _ints(sig.input_sizes, sig.sizes_count), sig.sizes_count,
            ("SAME", "VALID", "EXPLICIT")[min(max(sig.padding, 0), 2)],
            _ints(sig.strides, sig.strides_count), sig.strides_count,
            _ints(sig.dilations, sig.dilations_count), sig.dilations_count,
            _ints(sig.explicit_paddings, sig.paddings_count, 16), sig.paddings_count,
            "NCHW" if sig.data_format else "NHWC", sig.threads)
        p = <ConvCPlan*>calloc(1, sizeof(ConvCPlan))
        if p == NULL:
            raise MemoryError("tfcompat's C entry: a conv plan")
        memcpy(&p.sig, sig, sizeof(TfcConvSig))
        p.refs = 1
        for i in range(4):
            p.out_dims[i] = made.out_shape[i]
        p.out_bytes = made.out_bytes
        p.nbytes = made.nbytes
        p.empty = made.empty
        if made.plan is not None:
            plan = <ConvPlan?>made.plan
            p.in_c = 1
            p.args = plan.args
            p.entry = plan.entry
            p.layout = made.layout
            p.simd = made.simd
            p.units = plan.units()
            p.value_size = plan.args.core.value_size
            p.taps_bytes = made.taps_bytes
            p.owner = <PyObject*>plan
            Py_INCREF(plan)
        elif made.runner is not None:
            p.owner = <PyObject*>made.runner
            Py_INCREF(made.runner)
    except BaseException as exc:
        if p != NULL:
            _conv_free(p)
        msg = str(exc).encode("utf-8", "replace")
        _error(err, errlen, <const char*>msg)
        out[0] = NULL
        return 2 if isinstance(exc, MemoryError) else 1
    _conv_put(p)
    out[0] = <TfcPlan*>p
    in_c[0] = p.in_c or p.empty
    return 0


cdef int _capi_conv_plan(const TfcConvSig* sig, TfcPlan** out, int* in_c, char* err,
                         size_t errlen) noexcept nogil:
    cdef TfcConvSig key
    memcpy(&key, sig, sizeof(TfcConvSig))
    key.threads = _capi_threads     # a strategy is chosen for a thread count
    cdef ConvCPlan* p = _conv_find(&key)
    if p != NULL:
        out[0] = <TfcPlan*>p
        in_c[0] = p.in_c or p.empty
        return 0
    if tfc_is_finalizing():
        _error(err, errlen, "tfcompat: the Python interpreter is shutting down")
        return 3
    cdef int status
    with gil:
        status = _conv_build(&key, out, in_c, err, errlen)
    return status


cdef void* _conv_taps(const ConvCPlan* p, const void* filt, int nt, void** own) noexcept nogil:
    """This call's filter taps in p's layout (NULL: out of memory); *own: the block to free
    (NULL where the taps are the filter itself)."""
    cdef const ConvCore* c = &p.args.core
    cdef const TileArgs* t = &p.args.tile
    cdef Py_ssize_t taps = c.fh * c.fw, size = 4 if c.storage == STORE_NATIVE else 2
    cdef Py_ssize_t i, k, tc = t.tile_c, n
    cdef char* padded = NULL
    cdef void* blocks
    cdef float* lanes
    cdef TapsJob j
    own[0] = NULL
    if p.layout == TAPS_FILTER:
        return <void*>filt
    if p.layout == TAPS_LANES:
        # tap i's [C, tile_k]: zeros from OC on; a half type widened, exactly
        n = t.taps_n * c.C * t.tile_k
        lanes = <float*>tfc_malloc(NULL, n * 4 + (n * 2 if size == 2 else 0))
        if lanes == NULL:
            return NULL
        padded = <char*>(lanes + n) if size == 2 else <char*>lanes
        memset(padded, 0, n * size)
        for i in range(t.taps_n):
            for k in range(c.C):
                memcpy(padded + ((i * c.C + k) * t.tile_k) * size,
                       <const char*>filt + ((t.rows[i] * c.C + k) * c.OC) * size, c.OC * size)
        if size == 2:
            _convert(padded, lanes, n, c.storage == STORE_BFLOAT16, True, 1)
        own[0] = lanes
        return lanes
    # the channel tiles: the filter with zeros in the columns from C on
    n = taps * tc * c.OC
    if tc != c.C:
        padded = <char*>tfc_malloc(NULL, n * size)
        if padded == NULL:
            return NULL
        memset(padded, 0, n * size)
        for i in range(taps):
            for k in range(c.C):
                memcpy(padded + ((i * tc + k) * c.OC) * size,
                       <const char*>filt + ((i * c.C + k) * c.OC) * size, c.OC * size)
    if p.layout == TAPS_PADDED:
        own[0] = padded
        return padded
    # TAPS_BLOCKS: each tap's [OC, tc] in blocks of TFC_TILE_C columns; a half type's 16-bit
    # taps after the block's float32 ones, which are widened from them
    n = t.taps_n * c.OC * tc
    blocks = tfc_malloc(NULL, n * (4 + (2 if size == 2 else 0)))
    if blocks == NULL:
        tfc_free(NULL, padded, 0)
        return NULL
    j.w = padded if padded != NULL else filt
    j.rows, j.taps, j.C, j.OC, j.bw, j.size, j.simd = t.rows, t.taps_n, tc, c.OC, TFC_TILE_C, \
        size, p.simd
    j.out = <char*>blocks + n * 4 if size == 2 else blocks
    tfc_parallel(_taps_share, &j, <int>max(1, min(<Py_ssize_t>nt,
                                                  t.taps_n * ((c.OC + TAP_TILE - 1) // TAP_TILE))))
    tfc_free(NULL, padded, 0)
    if size == 2:
        _convert(j.out, blocks, n, c.storage == STORE_BFLOAT16, True, nt)
    own[0] = blocks
    return blocks


cdef int _capi_conv_run(TfcPlan* plan, const void* dy, const void* filt, void* dx,
                        int num_threads, char* err, size_t errlen) noexcept nogil:
    cdef ConvCPlan* p = <ConvCPlan*>plan
    cdef ConvPlanArgs args
    cdef void* own = NULL
    cdef void* work = NULL
    cdef const void* taps
    cdef int nt
    cdef Py_ssize_t work_bytes
    if p.empty:
        memset(dx, 0, p.out_bytes)
        return 0
    if not p.in_c:
        return _conv_run_python(p, dy, filt, dx, err, errlen)
    nt = <int>max(1, min(<Py_ssize_t>num_threads, p.units))
    taps = _conv_taps(p, filt, nt, &own)
    if taps == NULL:
        _error(err, errlen, "tfcompat: out of memory for the conv's filter taps")
        return 2
    work_bytes = p.args.core.work_per_thread * nt * p.value_size
    if work_bytes:
        work = tfc_malloc(NULL, work_bytes)
        if work == NULL:
            tfc_free(NULL, own, 0)
            _error(err, errlen, "tfcompat: out of memory for the conv's scratch")
            return 2
    # this call's taps in a copy of the plan's arguments: calls share the plan
    args = p.args
    args.core.ph_b = taps
    p.entry(&args, dy, NULL, work, dx, nt)
    tfc_free(NULL, work, 0)
    tfc_free(NULL, own, 0)
    return 0


cdef int _conv_run_python(ConvCPlan* p, const void* dy, const void* filt, void* dx, char* err,
                          size_t errlen) noexcept nogil:
    if tfc_is_finalizing():
        _error(err, errlen, "tfcompat: the Python interpreter is shutting down")
        return 3
    with gil:
        try:
            runner = <object>p.owner
            runner(_wrap(dy, runner.dy_bytes, False), _wrap(filt, runner.filter_bytes, False),
                   _wrap(dx, p.out_bytes, True))
        except BaseException as exc:
            msg = str(exc).encode("utf-8", "replace")
            _error(err, errlen, <const char*>msg)
            return 2 if isinstance(exc, MemoryError) else 1
    return 0


cdef object _wrap(const void* ptr, Py_ssize_t nbytes, bint writable):
    """A memoryview of nbytes at ptr (read-only unless writable), for the Python runner."""
    return PyMemoryView_FromMemory(<char*>ptr, nbytes, PyBUF_WRITE if writable else PyBUF_READ)


def c_api_capsule():
    """The PyCapsule "tfcompat.C_API" holding this build's TfcApi (csrc/capi.h)."""
    _API.abi_version = TFC_ABI_VERSION
    _API.op_plan = _capi_op_plan
    _API.op_run = _capi_op_run
    _API.plan_release = _capi_release
    _API.plan_out_bytes = _capi_any_out_bytes
    _API.num_threads = _capi_num_threads
    _API.plan_in_c = _capi_in_c
    _API.plan_serial = _capi_serial
    _API.plan_out_dims = _capi_out_dims
    _API.set_thread_pool = tfc_set_thread_pool
    _API.plan_out_dtype = _capi_out_dtype
    return PyCapsule_New(<void*>&_API, b"tfcompat.C_API", NULL)


def capi_cached():
    """(plans, bytes) the C entry's caches hold (resampling grads and convs together)."""
    return _capi_count + _conv_count, _capi_bytes + _conv_bytes
