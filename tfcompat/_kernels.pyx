# cython: language_level=3
"""Compiled kernels of tfcompat.

Policy lives in Python (tfcompat/_resample.py, tfcompat/_conv.py): every argument here has
been validated, every array is C-contiguous and every index in the tables has been proven in
range before these functions run. The kernels themselves never validate, never allocate in
their loops and never raise.

Parallelism: ``prange`` over rows of the *output* (``dx``); each row is owned by one thread
and summed in a fixed order, so results do not depend on the number of threads.

Float32 coordinate math follows TensorFlow's evaluation order (SPEC.md section 0): every
literal below is cast to ``float`` so that C does not promote the expression to double, and the
extension is compiled with ``-ffp-contract=off``.
"""
from cython.parallel cimport prange, parallel
from libc.math cimport floorf, ceilf, roundf
from libc.string cimport memset
from libc.stdlib cimport malloc, free
from libc.stdint cimport int32_t, uint16_t
from scipy.linalg.cython_blas cimport sgemm, dgemm

import numpy as np
cimport numpy as cnp

cnp.import_array()

cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    #define TFCOMPAT_HAVE_OPENMP 1
    #else
    #define TFCOMPAT_HAVE_OPENMP 0
    #endif
    """
    int TFCOMPAT_HAVE_OPENMP

cdef extern from *:
    """
    /* Index checks for the bounds-checked debug build (TFCOMPAT_BOUNDSCHECK=1): the hot loops
       use raw pointers, which Cython's boundscheck does not see. A failed check prints the
       condition and aborts the process before the access it guards: a kernel that went on
       would write where it must not (until 2026-11 a failed check only set a flag for an
       IndexError afterwards, and the test that provokes one wrote past a 64-byte buffer, the
       heap corruption behind CI's crashes at exit). Normal builds compile the checks away. */
    #ifdef TFCOMPAT_CHECK_BOUNDS
    #include <stdio.h>
    #include <stdlib.h>
    static void tfc_check_failed(const char *cond, const char *file, int line) {
        fprintf(stderr, "tfcompat: index check failed: %s (%s:%d)\\n", cond, file, line);
        fflush(stderr);
        abort();
    }
    #define TFC_CHECK(c) do { if (!(c)) tfc_check_failed(#c, __FILE__, __LINE__); } while (0)
    #define TFC_CHECKS_ON 1
    #else
    #define TFC_CHECK(c) ((void)0)
    #define TFC_CHECKS_ON 0
    #endif
    static volatile int tfc_nomem = 0;
    static void tfc_alloc_failed(void) { tfc_nomem = 1; }
    static int tfc_take_alloc_failed(void) { int v = tfc_nomem; tfc_nomem = 0; return v; }
    """
    void TFC_CHECK(bint) noexcept nogil
    void tfc_alloc_failed() noexcept nogil
    int tfc_take_alloc_failed() noexcept nogil
    int TFC_CHECKS_ON


cdef extern from *:
    """
    /* Eight float lanes as a GCC/Clang vector: one AVX register in the AVX2 build, two SSE
       registers in the baseline build. Lane-wise IEEE arithmetic, so the same bits either way. */
    typedef float tfc_v8f __attribute__((vector_size(32)));
    static inline tfc_v8f tfc_load8(const float *p) { tfc_v8f v; memcpy(&v, p, sizeof v); return v; }
    static inline void tfc_store8(float *p, tfc_v8f v) { memcpy(p, &v, sizeof v); }
    static inline tfc_v8f tfc_splat8(float x) { tfc_v8f v = {x, x, x, x, x, x, x, x}; return v; }
    static inline void tfc_prefetch(const void *p) { __builtin_prefetch(p, 0, 3); }
    /* Lines k .. k + q - 1 of ``lines`` 64-byte lines from base, as prefetcht2: lines wanted
       in some microseconds, not in the next few steps. In C and always inlined: gcc finds a
       function that does nothing but prefetch free of side effects and drops its calls, as
       it did with this one written in Cython. */
    static inline __attribute__((always_inline)) void tfc_prefetch_lines(
            const char *base, Py_ssize_t lines, Py_ssize_t q, Py_ssize_t k) {
        for (Py_ssize_t e = k + q < lines ? k + q : lines; k < e; k++)
            __builtin_prefetch(base + k * 64, 0, 1);
    }
    typedef int tfc_v8i __attribute__((vector_size(32)));
    /* d[x*8 + k] = s[k*sp + x] for k < g <= 8, x < n: g rows, sp floats apart, interleaved
       into pixels of eight lanes (lanes g..7 untouched). Eight rows go by 8x8 transposes,
       eight pixels at a time. Moves only, so the same bits in both builds. */
    static inline void tfc_interleave8(const float *s, Py_ssize_t sp, float *d, Py_ssize_t n,
                                       Py_ssize_t g) {
        const tfc_v8i lo = {0, 8, 1, 9, 4, 12, 5, 13}, hi = {2, 10, 3, 11, 6, 14, 7, 15};
        const tfc_v8i lo2 = {0, 1, 8, 9, 4, 5, 12, 13}, hi2 = {2, 3, 10, 11, 6, 7, 14, 15};
        const tfc_v8i lo4 = {0, 1, 2, 3, 8, 9, 10, 11}, hi4 = {4, 5, 6, 7, 12, 13, 14, 15};
        Py_ssize_t x = 0, k;
        if (g == 8) for (; x + 8 <= n; x += 8) {
            tfc_v8f r0 = tfc_load8(s + x), r1 = tfc_load8(s + sp + x);
            tfc_v8f r2 = tfc_load8(s + 2 * sp + x), r3 = tfc_load8(s + 3 * sp + x);
            tfc_v8f r4 = tfc_load8(s + 4 * sp + x), r5 = tfc_load8(s + 5 * sp + x);
            tfc_v8f r6 = tfc_load8(s + 6 * sp + x), r7 = tfc_load8(s + 7 * sp + x);
            tfc_v8f t0 = __builtin_shuffle(r0, r1, lo), t1 = __builtin_shuffle(r0, r1, hi);
            tfc_v8f t2 = __builtin_shuffle(r2, r3, lo), t3 = __builtin_shuffle(r2, r3, hi);
            tfc_v8f t4 = __builtin_shuffle(r4, r5, lo), t5 = __builtin_shuffle(r4, r5, hi);
            tfc_v8f t6 = __builtin_shuffle(r6, r7, lo), t7 = __builtin_shuffle(r6, r7, hi);
            tfc_v8f u0 = __builtin_shuffle(t0, t2, lo2), u1 = __builtin_shuffle(t0, t2, hi2);
            tfc_v8f u2 = __builtin_shuffle(t1, t3, lo2), u3 = __builtin_shuffle(t1, t3, hi2);
            tfc_v8f u4 = __builtin_shuffle(t4, t6, lo2), u5 = __builtin_shuffle(t4, t6, hi2);
            tfc_v8f u6 = __builtin_shuffle(t5, t7, lo2), u7 = __builtin_shuffle(t5, t7, hi2);
            float *o = d + x * 8;
            tfc_store8(o, __builtin_shuffle(u0, u4, lo4));
            tfc_store8(o + 8, __builtin_shuffle(u1, u5, lo4));
            tfc_store8(o + 16, __builtin_shuffle(u2, u6, lo4));
            tfc_store8(o + 24, __builtin_shuffle(u3, u7, lo4));
            tfc_store8(o + 32, __builtin_shuffle(u0, u4, hi4));
            tfc_store8(o + 40, __builtin_shuffle(u1, u5, hi4));
            tfc_store8(o + 48, __builtin_shuffle(u2, u6, hi4));
            tfc_store8(o + 56, __builtin_shuffle(u3, u7, hi4));
        }
        if (g == 8) {
            for (; x < n; x++)
                for (k = 0; k < 8; k++) d[x * 8 + k] = s[k * sp + x];
        } else {
            for (k = 0; k < g; k++)
                for (x = 0; x < n; x++) d[x * 8 + k] = s[k * sp + x];
        }
    }
    """
    ctypedef float v8f "tfc_v8f"
    v8f load8 "tfc_load8"(const float* p) noexcept nogil
    void store8 "tfc_store8"(float* p, v8f v) noexcept nogil
    v8f splat8 "tfc_splat8"(float x) noexcept nogil
    void prefetch "tfc_prefetch"(const void* p) noexcept nogil
    void prefetch_lines "tfc_prefetch_lines"(const char* base, Py_ssize_t lines, Py_ssize_t q,
                                             Py_ssize_t k) noexcept nogil
    void interleave8 "tfc_interleave8"(const float* s, Py_ssize_t sp, float* d, Py_ssize_t n,
                                       Py_ssize_t g) noexcept nogil


cdef extern from *:
    """
    /* float16 and bfloat16 <-> float32, branch-free so that GCC vectorizes the loops below;
       plain integer and IEEE float operations only, so both builds give the same bits.
       float16: Fabian Giesen's half_to_float / float_to_half_rtne (public domain); round to
       nearest even, subnormals kept, every NaN becomes the quiet NaN 0x7e00 with its sign.
       bfloat16: Eigen's (and so TF's and ml_dtypes') rounding: round to nearest even, NaN
       becomes 0x7fc0 with its sign. */
    #include <stdint.h>
    static inline uint32_t tfc_fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
    static inline float tfc_bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
    static inline float tfc_h2f(uint16_t h) {
        uint32_t o = (uint32_t)(h & 0x7fffu) << 13;
        uint32_t e = o & (0x7c00u << 13);
        uint32_t n = o + ((uint32_t)(127 - 15) << 23);
        uint32_t inf = n + ((uint32_t)(128 - 16) << 23);
        /* subnormal: m * 2^-24, both factors normal floats, so exact even under FTZ/DAZ */
        uint32_t sub = tfc_fbits((float)(int32_t)(h & 0x3ffu) * 5.9604644775390625e-08f);
        uint32_t m_inf = 0u - (uint32_t)(e == (0x7c00u << 13));
        uint32_t m_sub = 0u - (uint32_t)(e == 0);
        o = (inf & m_inf) | (sub & m_sub) | (n & ~(m_inf | m_sub));
        return tfc_bitsf(o | ((uint32_t)(h & 0x8000u) << 16));
    }
    static inline uint16_t tfc_f2h(float f) {
        uint32_t u = tfc_fbits(f);
        uint32_t sign = u & 0x80000000u;
        u ^= sign;
        uint32_t big = u > (255u << 23) ? 0x7e00u : 0x7c00u;
        uint32_t sub = tfc_fbits(tfc_bitsf(u) + tfc_bitsf(126u << 23)) - (126u << 23);
        uint32_t nrm = (u + ((uint32_t)(15 - 127) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
        /* masks, not ?:, so that GCC computes every candidate and vectorizes the loop */
        uint32_t m_big = 0u - (uint32_t)(u >= ((127u + 16u) << 23));
        uint32_t m_sub = 0u - (uint32_t)(u < (113u << 23));
        uint32_t o = (big & m_big) | (sub & m_sub) | (nrm & ~(m_big | m_sub));
        return (uint16_t)(o | (sign >> 16));
    }
    static inline float tfc_bf2f(uint16_t b) { return tfc_bitsf((uint32_t)b << 16); }
    static inline uint16_t tfc_f2bf(float f) {
        uint32_t u = tfc_fbits(f);
        uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
        uint32_t nan = ((u >> 16) & 0x8000u) | 0x7fc0u;
        uint32_t m_nan = 0u - (uint32_t)((u & 0x7fffffffu) > 0x7f800000u);
        return (uint16_t)((nan & m_nan) | (r & ~m_nan));
    }
    static inline void tfc_to_f32(const uint16_t *s, float *d, Py_ssize_t n, int bf) {
        Py_ssize_t i;
        if (bf) { for (i = 0; i < n; i++) d[i] = tfc_bf2f(s[i]); }
        else { for (i = 0; i < n; i++) d[i] = tfc_h2f(s[i]); }
    }
    static inline void tfc_from_f32(const float *s, uint16_t *d, Py_ssize_t n, int bf) {
        Py_ssize_t i;
        if (bf) { for (i = 0; i < n; i++) d[i] = tfc_f2bf(s[i]); }
        else { for (i = 0; i < n; i++) d[i] = tfc_f2h(s[i]); }
    }
    """
    void to_f32 "tfc_to_f32"(const uint16_t* s, float* d, Py_ssize_t n, int bf) noexcept nogil
    void from_f32 "tfc_from_f32"(const float* s, uint16_t* d, Py_ssize_t n, int bf) noexcept nogil


def index_checks_enabled():
    """True in the bounds-checked debug build (TFCOMPAT_BOUNDSCHECK=1)."""
    return bool(TFC_CHECKS_ON)


def openmp_enabled():
    """True when this extension was compiled with OpenMP."""
    return bool(TFCOMPAT_HAVE_OPENMP)


# ---------------------------------------------------------------------------------------
# Output buffer pool (a NumPy NEP 49 data-memory handler)
# ---------------------------------------------------------------------------------------
# A fresh large np.empty is mmapped, and its first touch costs page faults that, on some
# virtual machines, cost more than the kernel itself and contend between threads. TF avoids
# this with its BFC allocator; we keep a few recently freed large blocks of *our outputs* and
# hand them out again. The handler is installed only around our own np.empty calls (NumPy
# scopes handlers with a context variable), so no other array in the process is affected.
cdef extern from *:
    """
    #include <stdlib.h>
    #include <string.h>
    #include <pthread.h>
    #define TFC_POOL_SLOTS 8
    #define TFC_POOL_MIN ((size_t)1 << 20)     /* blocks below 1 MiB use plain malloc */
    #define TFC_HDR 64         /* header: capacity, pooled flag; keeps 64-byte alignment */
    typedef struct { void *base; size_t cap; size_t stamp; } tfc_block;
    static tfc_block tfc_slots[TFC_POOL_SLOTS];
    static size_t tfc_cached = 0, tfc_limit = (size_t)1 << 30, tfc_hits = 0, tfc_misses = 0;
    static size_t tfc_clock = 0;
    static pthread_mutex_t tfc_lock = PTHREAD_MUTEX_INITIALIZER;

    static void *tfc_new_block(size_t size) {
        size_t cap = size + TFC_HDR;
        void *base = NULL;
        if (posix_memalign(&base, 4096, cap) != 0) return NULL;
        ((size_t *)base)[0] = cap;
        ((size_t *)base)[1] = 1;                /* pooled */
        return (char *)base + TFC_HDR;
    }
    static void *tfc_malloc(void *ctx, size_t size) {
        (void)ctx;
        if (size < TFC_POOL_MIN) {
            char *p = (char *)malloc(size + TFC_HDR);
            if (!p) return NULL;
            ((size_t *)p)[0] = size + TFC_HDR;
            ((size_t *)p)[1] = 0;               /* not pooled: back to free() */
            return p + TFC_HDR;
        }
        pthread_mutex_lock(&tfc_lock);
        int best = -1;
        for (int i = 0; i < TFC_POOL_SLOTS; i++) {
            size_t cap = tfc_slots[i].cap;
            if (tfc_slots[i].base && cap >= size + TFC_HDR && cap <= 2 * (size + TFC_HDR) &&
                (best < 0 || cap < tfc_slots[best].cap)) best = i;
        }
        if (best >= 0) {
            void *base = tfc_slots[best].base;
            tfc_cached -= tfc_slots[best].cap;
            tfc_slots[best].base = NULL; tfc_slots[best].cap = 0;
            tfc_hits++;
            pthread_mutex_unlock(&tfc_lock);
            return (char *)base + TFC_HDR;
        }
        tfc_misses++;
        pthread_mutex_unlock(&tfc_lock);
        return tfc_new_block(size);
    }
    static void *tfc_calloc(void *ctx, size_t n, size_t elsize) {
        size_t size = n * elsize;
        if (elsize && size / elsize != n) return NULL;
        void *p = tfc_malloc(ctx, size);
        if (p) memset(p, 0, size);
        return p;
    }
    static void tfc_free(void *ctx, void *ptr, size_t size) {
        (void)ctx; (void)size;
        if (!ptr) return;
        char *base = (char *)ptr - TFC_HDR;
        size_t cap = ((size_t *)base)[0];
        if (!((size_t *)base)[1] || cap > tfc_limit) { free(base); return; }
        /* keep the block just freed, evicting the least recently cached ones to make room: a
           loop that calls kernels with the same shapes wants its newest blocks back */
        void *evicted[TFC_POOL_SLOTS];
        int n_evicted = 0;
        pthread_mutex_lock(&tfc_lock);
        for (;;) {
            int empty = -1, oldest = -1;
            for (int i = 0; i < TFC_POOL_SLOTS; i++) {
                if (!tfc_slots[i].base) { if (empty < 0) empty = i; }
                else if (oldest < 0 || tfc_slots[i].stamp < tfc_slots[oldest].stamp) oldest = i;
            }
            if (empty >= 0 && tfc_cached + cap <= tfc_limit) {
                tfc_slots[empty].base = base; tfc_slots[empty].cap = cap;
                tfc_slots[empty].stamp = ++tfc_clock;
                tfc_cached += cap;
                break;
            }
            evicted[n_evicted++] = tfc_slots[oldest].base;
            tfc_cached -= tfc_slots[oldest].cap;
            tfc_slots[oldest].base = NULL; tfc_slots[oldest].cap = 0;
        }
        pthread_mutex_unlock(&tfc_lock);
        for (int i = 0; i < n_evicted; i++) free(evicted[i]);
    }
    static void *tfc_realloc(void *ctx, void *ptr, size_t new_size) {
        if (!ptr) return tfc_malloc(ctx, new_size);
        size_t old = ((size_t *)((char *)ptr - TFC_HDR))[0] - TFC_HDR;
        void *q = tfc_malloc(ctx, new_size);
        if (!q) return NULL;
        memcpy(q, ptr, old < new_size ? old : new_size);
        tfc_free(ctx, ptr, 0);
        return q;
    }
    static size_t tfc_release(void) {
        size_t freed = 0;
        pthread_mutex_lock(&tfc_lock);
        for (int i = 0; i < TFC_POOL_SLOTS; i++) if (tfc_slots[i].base) {
            free(tfc_slots[i].base); freed += tfc_slots[i].cap;
            tfc_slots[i].base = NULL; tfc_slots[i].cap = 0;
        }
        tfc_cached = 0;
        pthread_mutex_unlock(&tfc_lock);
        return freed;
    }
    static PyDataMem_Handler tfc_handler = {
        "tfcompat_output_pool", 1,
        {NULL, tfc_malloc, tfc_calloc, tfc_realloc, tfc_free}
    };
    static PyObject *tfc_handler_capsule(void) {
        return PyCapsule_New(&tfc_handler, "mem_handler", NULL);
    }
    """
    object tfc_handler_capsule()
    object PyDataMem_SetHandler(object handler)
    size_t tfc_release() nogil
    size_t tfc_cached, tfc_limit, tfc_hits, tfc_misses

_POOL_HANDLER = tfc_handler_capsule()


def pooled_empty(shape, dtype):
    """``np.empty`` whose memory comes from (and returns to) tfcompat's output pool."""
    old = PyDataMem_SetHandler(_POOL_HANDLER)
    try:
        return np.empty(shape, dtype=dtype)
    finally:
        PyDataMem_SetHandler(old)


def pool_stats():
    """Bytes cached, cap in bytes, hits and misses of the output pool."""
    return {"cached_bytes": tfc_cached, "limit_bytes": tfc_limit, "hits": tfc_hits,
            "misses": tfc_misses}


def set_pool_limit(size_t nbytes):
    global tfc_limit
    tfc_limit = nbytes
    if nbytes == 0:
        tfc_release()


def release_pool():
    """Free every cached block; returns the number of bytes freed."""
    return tfc_release()


# ---------------------------------------------------------------------------------------
# float16 / bfloat16 storage <-> float32 compute
# ---------------------------------------------------------------------------------------
DEF CONVERT_CHUNK = 16384


cdef void _convert(const void* src, void* dst, Py_ssize_t n, bint bfloat16, bint widen,
                   int num_threads) noexcept nogil:
    """Chunks of CONVERT_CHUNK elements in parallel: widen uint16 bits to float32, or round
    float32 to uint16 bits."""
    cdef Py_ssize_t k, lo, nchunks = (n + CONVERT_CHUNK - 1) // CONVERT_CHUNK
    for k in prange(nchunks, schedule='static', num_threads=num_threads):
        lo = k * CONVERT_CHUNK
        if widen:
            to_f32(<const uint16_t*>src + lo, <float*>dst + lo, min(CONVERT_CHUNK, n - lo),
                   bfloat16)
        else:
            from_f32(<const float*>src + lo, <uint16_t*>dst + lo, min(CONVERT_CHUNK, n - lo),
                     bfloat16)


def to_float32(const uint16_t[::1] src, float[::1] dst, bint bfloat16, int num_threads):
    """dst = src (float16 or bfloat16 bits) as float32, exactly; in parallel."""
    if dst.shape[0] != src.shape[0]:
        raise ValueError(f"dst: got {dst.shape[0]} elements; expected {src.shape[0]}")
    if src.shape[0]:
        with nogil:
            _convert(&src[0], &dst[0], src.shape[0], bfloat16, True, num_threads)


def from_float32(const float[::1] src, uint16_t[::1] dst, bint bfloat16, int num_threads):
    """dst = src rounded to float16 or bfloat16 (nearest even; NaN stays NaN); in parallel."""
    if dst.shape[0] != src.shape[0]:
        raise ValueError(f"dst: got {dst.shape[0]} elements; expected {src.shape[0]}")
    if src.shape[0]:
        with nogil:
            _convert(&src[0], &dst[0], src.shape[0], bfloat16, False, num_threads)


# ---------------------------------------------------------------------------------------
# Per-axis coordinate tables
# ---------------------------------------------------------------------------------------
# Rule codes; tfcompat/_resample.py holds the same numbers with their names.
cdef enum:
    LIN_TF_HALF = 0        # TF HalfPixelScaler:  s = (x + 0.5f) * scale - 0.5f
    LIN_TF_ALIGN = 1       # TF LegacyScaler with the align-corners scale
    LIN_TF_ASYM = 2        # TF LegacyScaler:     s = x * scale
    LIN_PT_HALF = 3        # half pixel, but s = 0 when the resized axis has length 1
    LIN_ORT_HALF = 4       # ORT/PyTorch area_pixel_compute_source_index, half pixel
    LIN_ORT_ALIGN = 5      # ORT/PyTorch, align corners
    NN_HALF = 10           # TF HalfPixelScalerForNN then floorf
    NN_ALIGN = 11          # TF LegacyScaler then roundf
    NN_ASYM = 12           # TF LegacyScaler then floorf
    NN_ALIGN_HALF = 13     # TF grad with both flags: roundf((x + 0.5f) * scale)


cdef inline float _tf_scale(Py_ssize_t in_size, Py_ssize_t out_size, bint align) noexcept nogil:
    # TF CalculateResizeScale; TF 2.21's grads use in/out whenever in == 1 (SPEC.md 1).
    if align and out_size > 1 and in_size != 1:
        return <float>(in_size - 1) / <float>(out_size - 1)
    return <float>in_size / <float>out_size


cdef inline Py_ssize_t _clamp(Py_ssize_t i, Py_ssize_t hi) noexcept nogil:
    if i < 0:
        return 0
    if i > hi:
        return hi
    return i


def linear_axis_map(int rule, Py_ssize_t in_size, Py_ssize_t out_size, double scale_override,
                    int32_t[::1] lo, int32_t[::1] hi, float[::1] w_lo, float[::1] w_hi):
    """Fill, for every resized index x, its two source indices and their weights.

    ``scale_override`` (ORT ``scales``) is used when it is > 0, as ``1 / scale_override``
    computed in float32; otherwise the scale comes from the sizes.
    """
    cdef Py_ssize_t x, i0, last = in_size - 1
    cdef float scale, s, fl, lerp
    if rule == LIN_TF_HALF or rule == LIN_TF_ASYM or rule == LIN_PT_HALF:
        scale = _tf_scale(in_size, out_size, False)
    elif rule == LIN_TF_ALIGN:
        scale = _tf_scale(in_size, out_size, True)
    elif rule == LIN_ORT_ALIGN:
        scale = <float>(in_size - 1) / <float>(out_size - 1) if out_size > 1 else <float>0.0
    else:
        if scale_override > 0:
            scale = <float>1.0 / <float>scale_override
        else:
            scale = <float>in_size / <float>out_size
    with nogil:
        for x in range(out_size):
            if rule == LIN_ORT_HALF or rule == LIN_ORT_ALIGN:
                if rule == LIN_ORT_ALIGN:
                    s = scale * <float>x
                else:
                    s = scale * (<float>x + <float>0.5) - <float>0.5
                    if s < 0:
                        s = <float>0.0
                i0 = _clamp(<Py_ssize_t>s, last)
                lo[x] = <int32_t>i0
                hi[x] = <int32_t>(i0 + 1 if i0 < last else i0)
                lerp = s - <float>i0
                w_lo[x] = <float>1.0 - lerp
                w_hi[x] = lerp
                continue
            if rule == LIN_TF_HALF:
                s = (<float>x + <float>0.5) * scale - <float>0.5
            elif rule == LIN_PT_HALF:
                s = (<float>x + <float>0.5) * scale - <float>0.5 if out_size > 1 else <float>0.0
            else:
                s = <float>x * scale
            fl = floorf(s)
            lo[x] = <int32_t>_clamp(<Py_ssize_t>fl, last)
            hi[x] = <int32_t>_clamp(<Py_ssize_t>ceilf(s), last)
            lerp = s - fl
            w_lo[x] = <float>1.0 - lerp
            w_hi[x] = lerp


def nearest_axis_map(int rule, Py_ssize_t in_size, Py_ssize_t out_size, int32_t[::1] index):
    """Fill, for every resized index x, the one source index it was copied from."""
    cdef Py_ssize_t x, last = in_size - 1
    cdef float scale, s
    scale = _tf_scale(in_size, out_size, rule == NN_ALIGN or rule == NN_ALIGN_HALF)
    with nogil:
        for x in range(out_size):
            if rule == NN_HALF:
                index[x] = <int32_t>_clamp(<Py_ssize_t>floorf((<float>x + <float>0.5) * scale), last)
            elif rule == NN_ALIGN:
                index[x] = <int32_t>_clamp(<Py_ssize_t>roundf(<float>x * scale), last)
            elif rule == NN_ALIGN_HALF:
                index[x] = <int32_t>_clamp(<Py_ssize_t>roundf((<float>x + <float>0.5) * scale), last)
            else:
                index[x] = <int32_t>_clamp(<Py_ssize_t>floorf(<float>x * scale), last)


def invert_axis_map(Py_ssize_t in_size, const int32_t[::1] lo, const int32_t[::1] hi,
                    const float[::1] w_lo, const float[::1] w_hi, bint two_taps):
    """Invert a forward map into a gather table (CSR), in ascending resized index.

    Returns ``offsets[in_size + 1], source[n], count[n], w0[n], w1[n]``: source index i
    receives from resized index ``source[g]`` for ``g`` in ``offsets[i]:offsets[i+1]``, with
    one weight (count 1) or, when both taps of that x land on i, two (low tap first, as TF
    adds top before bottom).
    """
    cdef Py_ssize_t out_size = lo.shape[0], x, g, i
    offsets_a = np.zeros(in_size + 1, dtype=np.int32)
    cdef int32_t[::1] offsets = offsets_a
    for x in range(out_size):
        offsets[lo[x] + 1] += 1
        if two_taps and hi[x] != lo[x]:
            offsets[hi[x] + 1] += 1
    for i in range(in_size):
        offsets[i + 1] += offsets[i]
    n = offsets[in_size]
    source_a = np.empty(n, dtype=np.int32)
    count_a = np.empty(n, dtype=np.int32)
    w0_a = np.zeros(n, dtype=np.float32)
    w1_a = np.zeros(n, dtype=np.float32)
    cdef int32_t[::1] source = source_a, count = count_a
    cdef float[::1] w0 = w0_a, w1 = w1_a
    cursor_a = offsets_a[:-1].copy()
    cdef int32_t[::1] cursor = cursor_a
    for x in range(out_size):
        g = cursor[lo[x]]
        cursor[lo[x]] += 1
        source[g] = <int32_t>x
        w0[g] = w_lo[x]
        count[g] = 1
        if two_taps:
            if hi[x] == lo[x]:
                count[g] = 2
                w1[g] = w_hi[x]
            else:
                g = cursor[hi[x]]
                cursor[hi[x]] += 1
                source[g] = <int32_t>x
                w0[g] = w_hi[x]
                count[g] = 1
    return offsets_a, source_a, count_a, w0_a, w1_a


# ---------------------------------------------------------------------------------------
# Resampling backward: gather over rows of dx
# ---------------------------------------------------------------------------------------
# Canonical layout: dy [rows_b, Oz, Oy, Ox, C] and dx [rows_b, Iz, Iy, Ix, C], C-contiguous.
# NCX data is passed as rows_b = batch * channels and C = 1. Each dx row (b, iz, iy) is owned by
# one thread: it gathers the dy rows (z, y) listed in the z and y tables and, inside that private
# row, scatters along x with the forward x map. For one dx element the terms arrive in TF's
# order: (z, y, x) raster, then the corners (top before bottom, left before right).

ctypedef fused real_src:
    float
    double

ctypedef fused real_acc:
    float
    double

ctypedef fused nn_t:
    float
    double
    unsigned char
    unsigned int


cdef struct RowTables:
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


cdef inline Py_ssize_t _row_weights(RowTables* t, Py_ssize_t gz, Py_ssize_t gy,
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


DEF WINDOW_MAX_C = 64


cdef struct Ahead:
    # the dy rows that the next dx row reads and this one does not, fetched a few lines per
    # step of this row's sweeps (see _plan_ahead): ``lines`` 64-byte lines from ``base``,
    # ``q`` per step, step j of the row (sweeps numbered in order) from line j * q on
    const char* base
    Py_ssize_t lines
    Py_ssize_t q


cdef inline void _plan_ahead(Ahead* a, RowTables* t, const char* dy, Py_ssize_t b,
                             Py_ssize_t iy, Py_ssize_t rows_b, Py_ssize_t Iz, Py_ssize_t Iy,
                             Py_ssize_t Oz, Py_ssize_t Oy, Py_ssize_t row_bytes,
                             Py_ssize_t steps) noexcept nogil:
    """2-D (Iz == Oz == 1; otherwise, or with no steps, an empty plan): the dy rows of the next dx row (iy + 1, or row 0 of the next image) that this row
    (b, iy) does not read, as a plan of ``steps`` steps. A row's dy rows ascend (TF's order),
    so they are the ones past this row's last. Without such a plan half the sweeps of an
    upsampling row wait on memory (the new rows) and the other half leave it idle (rows the
    row before already brought in). ``row_bytes``: the bytes of one dy row."""
    cdef Py_ssize_t r0, r1, nb = b, n0, n1
    a.base = NULL
    a.lines = 0
    a.q = 1
    if steps <= 0 or Iz != 1 or Oz != 1:
        return
    if iy + 1 < Iy:
        n0 = t.y_off[iy + 1]
        n1 = t.y_off[iy + 2]
    elif b + 1 < rows_b:
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
    TFC_CHECK(0 <= r0 and r1 < Oy)
    # prefetches never fault, but the plan stays inside dy all the same (its last line may
    # reach past dy's last byte only within that line)
    a.base = dy + (nb * Oy + r0) * row_bytes
    a.lines = ((r1 - r0 + 1) * row_bytes + 63) // 64
    a.q = (a.lines + steps - 1) // steps


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
    Blocks never overlap each other; only the vectors inside one block do. 8 <= C <= 64."""
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


cdef void _linear_row(const real_src* dy, real_acc* dx, Py_ssize_t row, Py_ssize_t rows_b,
                      Py_ssize_t Iz, Py_ssize_t Iy, Py_ssize_t Ix,
                      Py_ssize_t Oz, Py_ssize_t Oy, Py_ssize_t Ox, Py_ssize_t C,
                      RowTables* t, const int32_t* x_lo, const int32_t* x_hi,
                      const float* x_wlo, const float* x_whi) noexcept nogil:
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
    cdef bint window = (real_src is float and real_acc is float and 8 <= C <= WINDOW_MAX_C)
    if window:
        _row_blocks(&bl, C)
    # measured against no plan, interleaved, 2 threads, caches evicted: R1 bilinear 1.11-1.34x,
    # R3 1.13-1.21x, R2 1.09-1.12x, R4 (the scatter) 1.09-1.12x; in the comparison command's
    # order R1 1.01-1.06x, R4 1.03-1.08x; R4 in cache 0.91-0.93x
    _plan_ahead(&ahead, t, <const char*>dy, b, iy, rows_b, Iz, Iy, Oz, Oy,
                Ox * C * <Py_ssize_t>sizeof(real_src),
                (t.y_off[iy + 1] - t.y_off[iy]) * (bl.n if window else 1) * Ox)
    memset(dst, 0, Ix * C * sizeof(real_acc))
    for gz in range(t.z_off[iz], t.z_off[iz + 1]):
        TFC_CHECK(0 <= t.z_src[gz] < Oz and 1 <= t.z_cnt[gz] <= 2)
        for gy in range(t.y_off[iy], t.y_off[iy + 1]):
            TFC_CHECK(0 <= t.y_src[gy] < Oy and 1 <= t.y_cnt[gy] <= 2)
            nr = _row_weights(t, gz, gy, wr)
            src = dy + ((b * Oz + t.z_src[gz]) * Oy + t.y_src[gy]) * Ox * C
            if real_src is float and real_acc is float:
                # measured: the window wins on short channel rows (I1, C=32: 1.5x; R1, C=64:
                # 1.1x; R3, C=21: 2.3x); from C=256 on (R4) the plain scatter's long channel
                # loops are faster
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
                    # upsampling): one pass, one read-modify-write of each element for both;
                    # measured 1.03-1.12x on R4 (C = 256)
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


# NCX (C == 1): a channel loop of length 1 costs more than its body, and one row's adds form
# a chain through memory. So G channels that share every table run together, x ascending, and
# dst[lo], dst[lo + 1] of each live in registers (a0, a1) while lo stays put: lo never
# decreases and hi is lo or lo + 1. Every element still receives its terms in TF's order.
DEF C1_GROUP = 4


cdef inline void _c1_source_row(const real_src* src, real_acc* dst, Py_ssize_t Ox, Py_ssize_t Ix,
                                const real_src* wr, Py_ssize_t nr, const int32_t* x_lo,
                                const int32_t* x_hi, const float* x_wlo,
                                const float* x_whi) noexcept nogil:
    """One channel: dst[lo] += (s*wr[q])*wl, dst[hi] += (s*wr[q])*wh, x ascending, q inner."""
    cdef Py_ssize_t x, q, lo, cur = x_lo[0]
    cdef real_acc a0, a1 = 0
    cdef real_src s, v, wl, wh
    TFC_CHECK(0 <= cur < Ix)
    a0 = dst[cur]
    if cur + 1 < Ix:
        a1 = dst[cur + 1]
    for x in range(Ox):
        lo = x_lo[x]
        TFC_CHECK(cur <= lo < Ix and (x_hi[x] == lo or x_hi[x] == lo + 1) and x_hi[x] < Ix)
        if lo != cur:
            dst[cur] = a0
            if lo == cur + 1:
                a0 = a1
            else:
                if cur + 1 < Ix:
                    dst[cur + 1] = a1
                a0 = dst[lo]
            cur = lo
            a1 = dst[cur + 1] if cur + 1 < Ix else 0
        s = src[x]
        wl = x_wlo[x]
        wh = x_whi[x]
        if x_hi[x] == lo:
            for q in range(nr):
                v = s * wr[q]
                a0 = (a0 + <real_acc>(v * wl)) + <real_acc>(v * wh)
        else:
            for q in range(nr):
                a0 = a0 + <real_acc>((s * wr[q]) * wl)
            for q in range(nr):
                a1 = a1 + <real_acc>((s * wr[q]) * wh)
    dst[cur] = a0
    if cur + 1 < Ix:
        dst[cur + 1] = a1


cdef inline void _c1_source_row4(const real_src* src, Py_ssize_t sp, real_acc* dst,
                                 Py_ssize_t dp, Py_ssize_t Ox, Py_ssize_t Ix, real_src w,
                                 const int32_t* x_lo, const int32_t* x_hi, const float* x_wlo,
                                 const float* x_whi) noexcept nogil:
    """_c1_source_row for four channels (planes sp apart in dy, dp in dx) and one row weight,
    written out so that the eight running sums stay in registers."""
    cdef Py_ssize_t x, lo, cur = x_lo[0]
    cdef real_acc p0, p1, p2, p3, q0 = 0, q1 = 0, q2 = 0, q3 = 0
    cdef real_src v0, v1, v2, v3, wl, wh
    TFC_CHECK(0 <= cur < Ix)
    p0 = dst[cur]; p1 = dst[dp + cur]; p2 = dst[2 * dp + cur]; p3 = dst[3 * dp + cur]
    if cur + 1 < Ix:
        q0 = dst[cur + 1]; q1 = dst[dp + cur + 1]
        q2 = dst[2 * dp + cur + 1]; q3 = dst[3 * dp + cur + 1]
    for x in range(Ox):
        lo = x_lo[x]
        TFC_CHECK(cur <= lo < Ix and (x_hi[x] == lo or x_hi[x] == lo + 1) and x_hi[x] < Ix)
        if lo != cur:
            dst[cur] = p0; dst[dp + cur] = p1; dst[2 * dp + cur] = p2; dst[3 * dp + cur] = p3
            if lo == cur + 1:
                p0 = q0; p1 = q1; p2 = q2; p3 = q3
            else:
                if cur + 1 < Ix:
                    dst[cur + 1] = q0; dst[dp + cur + 1] = q1
                    dst[2 * dp + cur + 1] = q2; dst[3 * dp + cur + 1] = q3
                p0 = dst[lo]; p1 = dst[dp + lo]; p2 = dst[2 * dp + lo]; p3 = dst[3 * dp + lo]
            cur = lo
            if cur + 1 < Ix:
                q0 = dst[cur + 1]; q1 = dst[dp + cur + 1]
                q2 = dst[2 * dp + cur + 1]; q3 = dst[3 * dp + cur + 1]
        wl = x_wlo[x]
        wh = x_whi[x]
        v0 = src[x] * w
        v1 = src[sp + x] * w
        v2 = src[2 * sp + x] * w
        v3 = src[3 * sp + x] * w
        if x_hi[x] == lo:
            p0 = (p0 + <real_acc>(v0 * wl)) + <real_acc>(v0 * wh)
            p1 = (p1 + <real_acc>(v1 * wl)) + <real_acc>(v1 * wh)
            p2 = (p2 + <real_acc>(v2 * wl)) + <real_acc>(v2 * wh)
            p3 = (p3 + <real_acc>(v3 * wl)) + <real_acc>(v3 * wh)
        else:
            p0 = p0 + <real_acc>(v0 * wl); q0 = q0 + <real_acc>(v0 * wh)
            p1 = p1 + <real_acc>(v1 * wl); q1 = q1 + <real_acc>(v1 * wh)
            p2 = p2 + <real_acc>(v2 * wl); q2 = q2 + <real_acc>(v2 * wh)
            p3 = p3 + <real_acc>(v3 * wl); q3 = q3 + <real_acc>(v3 * wh)
    dst[cur] = p0; dst[dp + cur] = p1; dst[2 * dp + cur] = p2; dst[3 * dp + cur] = p3
    if cur + 1 < Ix:
        dst[cur + 1] = q0; dst[dp + cur + 1] = q1
        dst[2 * dp + cur + 1] = q2; dst[3 * dp + cur + 1] = q3


cdef void _linear_rows_c1(const real_src* dy, real_acc* dx, Py_ssize_t item, Py_ssize_t rows_b,
                          Py_ssize_t Iz, Py_ssize_t Iy, Py_ssize_t Ix,
                          Py_ssize_t Oz, Py_ssize_t Oy, Py_ssize_t Ox,
                          RowTables* t, const int32_t* x_lo, const int32_t* x_hi,
                          const float* x_wlo, const float* x_whi) noexcept nogil:
    """Row (iz, iy) of the channels c0 .. c0 + G - 1 (item = channel group * Iz*Iy + iz*Iy + iy)."""
    cdef Py_ssize_t sp = item % (Iz * Iy), c0 = (item // (Iz * Iy)) * C1_GROUP
    cdef Py_ssize_t iz = sp // Iy, iy = sp % Iy, G = min(<Py_ssize_t>C1_GROUP, rows_b - c0)
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
                _c1_source_row4(src, out_plane, dst, in_plane, Ox, Ix, wr[0],
                                x_lo, x_hi, x_wlo, x_whi)
            else:
                for k in range(G):
                    _c1_source_row(src + k * out_plane, dst + k * in_plane, Ox, Ix, wr, nr,
                                   x_lo, x_hi, x_wlo, x_whi)


# NCX float32: eight channels at a time through the NXC window kernel. Each contributing dy row
# of the eight channels is transposed into an [Ox, 8] block (missing channels of a last, short
# group are zeros), _window_block8 accumulates the [Ix, 8] dx block, which is transposed back
# into the eight dx rows. The window adds every element's terms in the NXC order, which the
# tests prove equal to the NCX order (and to TF's).
cdef void _linear_rows_c8_f32(const float* dy, float* dx, Py_ssize_t item, Py_ssize_t rows_b,
                              Py_ssize_t Iz, Py_ssize_t Iy, Py_ssize_t Ix,
                              Py_ssize_t Oz, Py_ssize_t Oy, Py_ssize_t Ox,
                              RowTables* t, const int32_t* x_lo, const int32_t* x_hi,
                              const float* x_wlo, const float* x_whi, float* sbuf,
                              float* dbuf) noexcept nogil:
    """Row (iz, iy) of the channels c0 .. c0 + 7 (item = channel group * Iz*Iy + iz*Iy + iy);
    ``sbuf`` holds Ox * 8 floats and ``dbuf`` Ix * 8."""
    cdef Py_ssize_t sp = item % (Iz * Iy), c0 = (item // (Iz * Iy)) * 8
    cdef Py_ssize_t iz = sp // Iy, iy = sp % Iy, G = min(<Py_ssize_t>8, rows_b - c0)
    cdef Py_ssize_t in_plane = Iz * Iy * Ix, out_plane = Oz * Oy * Ox
    cdef const float* src
    cdef Py_ssize_t gz, gy, nr, k, x
    cdef float wr[4]
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
            _window_block8(sbuf, dbuf, Ox, Ix, 8, wr, nr, x_lo, x_hi, x_wlo, x_whi, NULL, 0)
    for k in range(G):
        for x in range(Ix):
            dx[(c0 + k) * in_plane + sp * Ix + x] = dbuf[x * 8 + k]


# float32 NXC rows with 8 <= C <= 64: the same walk as the NCX kernel above, along x with
# dst[lo] and dst[lo + 1] in registers, over blocks of up to 32 channels as 8-lane vectors.
# Per tap this saves the load and store of dst that the plain scatter pays. When C is not a
# multiple of 8 the last vector of a block overlaps the one before it (C = 21: lanes 0, 8, 13).
# The shared lanes of two vectors of one block are loaded together, receive the same terms in
# the same order and are stored with the same bits, so the overlap changes nothing.
cdef inline void _window_row_f32(const float* src, float* dst, Py_ssize_t Ox, Py_ssize_t Ix,
                                 Py_ssize_t C, Blocks* bl, const float* wr, Py_ssize_t nr,
                                 const int32_t* x_lo, const int32_t* x_hi, const float* x_wlo,
                                 const float* x_whi, const Ahead* ah,
                                 Py_ssize_t step0) noexcept nogil:
    """One dy row's terms on one dx row, block by block; block k takes the plan's steps
    step0 + k * Ox on."""
    cdef Py_ssize_t k, c0, sk
    for k in range(bl.n):
        c0 = bl.c0[k]
        sk = step0 + k * Ox
        # literal vector counts (and offsets for a full block of 32), so that each call
        # compiles without the nv tests in its loop: measured 5-8 % on I1 and R1
        if bl.nv[k] == 4 and bl.o3[k] == 24 and k == 0 and bl.n > 1:
            # the first block of a row of several also prefetches the rest of each pixel:
            # alone, each block's sweep reads every pixel's lines with gaps between them,
            # which the prefetchers follow badly when dy is 64-byte aligned (as TF and torch
            # tensors are): measured 1.29-1.46x on R1 with aligned dy, 1.0-1.2x with
            # NumPy's 16-byte offset, where the vector loads that straddle lines had done
            # much the same by accident
            _window_block32(src + c0, dst + c0, Ox, Ix, C, 4, 8, 16, 24,
                            wr, nr, x_lo, x_hi, x_wlo, x_whi, 1, ah, sk)
        elif bl.nv[k] == 4 and bl.o3[k] == 24 and ah.lines == 0:
            # no plan (3-D: I1's rows of 32 channels): a copy without its arithmetic,
            # which cost I1 NXC 3-14 %
            _window_block32(src + c0, dst + c0, Ox, Ix, C, 4, 8, 16, 24,
                            wr, nr, x_lo, x_hi, x_wlo, x_whi, 0, NULL, 0)
        elif bl.nv[k] == 4 and bl.o3[k] == 24:
            _window_block32(src + c0, dst + c0, Ox, Ix, C, 4, 8, 16, 24,
                            wr, nr, x_lo, x_hi, x_wlo, x_whi, 0, ah, sk)
        elif bl.nv[k] == 4:
            _window_block32(src + c0, dst + c0, Ox, Ix, C, 4, bl.o1[k], bl.o2[k], bl.o3[k],
                            wr, nr, x_lo, x_hi, x_wlo, x_whi, 0, ah, sk)
        elif bl.nv[k] == 3:
            _window_block32(src + c0, dst + c0, Ox, Ix, C, 3, bl.o1[k], bl.o2[k], bl.o3[k],
                            wr, nr, x_lo, x_hi, x_wlo, x_whi, 0, ah, sk)
        elif bl.nv[k] == 2:
            _window_block32(src + c0, dst + c0, Ox, Ix, C, 2, bl.o1[k], bl.o2[k], bl.o3[k],
                            wr, nr, x_lo, x_hi, x_wlo, x_whi, 0, ah, sk)
        else:
            _window_block8(src + c0, dst + c0, Ox, Ix, C, wr, nr, x_lo, x_hi, x_wlo, x_whi,
                           ah, sk)


cdef inline void _window_block8(const float* src, float* dst, Py_ssize_t Ox, Py_ssize_t Ix,
                                Py_ssize_t C, const float* wr, Py_ssize_t nr,
                                const int32_t* x_lo, const int32_t* x_hi, const float* x_wlo,
                                const float* x_whi, const Ahead* ah,
                                Py_ssize_t step0) noexcept nogil:
    """The window on 8 channels; ``ah`` (or NULL): a prefetch plan, whose steps step0 on
    are this sweep's."""
    cdef Py_ssize_t x, q, lo, cur = x_lo[0]
    cdef v8f a0, a1, s, v, wl, wh
    TFC_CHECK(0 <= cur < Ix)
    a0 = load8(dst + cur * C)
    a1 = load8(dst + (cur + 1) * C) if cur + 1 < Ix else splat8(0)
    for x in range(Ox):
        lo = x_lo[x]
        TFC_CHECK(cur <= lo < Ix and (x_hi[x] == lo or x_hi[x] == lo + 1) and x_hi[x] < Ix)
        if lo != cur:
            store8(dst + cur * C, a0)
            if lo == cur + 1:
                a0 = a1
            else:
                if cur + 1 < Ix:
                    store8(dst + (cur + 1) * C, a1)
                a0 = load8(dst + lo * C)
            cur = lo
            a1 = load8(dst + (cur + 1) * C) if cur + 1 < Ix else splat8(0)
        if ah != NULL:
            prefetch_lines(ah.base, ah.lines, ah.q, (step0 + x) * ah.q)
        s = load8(src + x * C)
        wl = splat8(x_wlo[x])
        wh = splat8(x_whi[x])
        if x_hi[x] == lo:
            for q in range(nr):
                v = s * splat8(wr[q])
                a0 = (a0 + v * wl) + v * wh
        else:
            for q in range(nr):
                a0 = a0 + (s * splat8(wr[q])) * wl
            for q in range(nr):
                a1 = a1 + (s * splat8(wr[q])) * wh
    store8(dst + cur * C, a0)
    if cur + 1 < Ix:
        store8(dst + (cur + 1) * C, a1)


cdef inline void _load_block(const float* d, Py_ssize_t nv, Py_ssize_t o1, Py_ssize_t o2,
                             Py_ssize_t o3, v8f* v0, v8f* v1, v8f* v2, v8f* v3) noexcept nogil:
    v0[0] = load8(d)
    v1[0] = load8(d + o1)
    if nv > 2:
        v2[0] = load8(d + o2)
    if nv > 3:
        v3[0] = load8(d + o3)


cdef inline void _store_block(float* d, Py_ssize_t nv, Py_ssize_t o1, Py_ssize_t o2,
                              Py_ssize_t o3, v8f v0, v8f v1, v8f v2, v8f v3) noexcept nogil:
    store8(d, v0)
    store8(d + o1, v1)
    if nv > 2:
        store8(d + o2, v2)
    if nv > 3:
        store8(d + o3, v3)


cdef inline void _window_block32(const float* src, float* dst, Py_ssize_t Ox, Py_ssize_t Ix,
                                 Py_ssize_t C, Py_ssize_t nv, Py_ssize_t o1, Py_ssize_t o2,
                                 Py_ssize_t o3, const float* wr, Py_ssize_t nr,
                                 const int32_t* x_lo, const int32_t* x_hi, const float* x_wlo,
                                 const float* x_whi, bint ahead, const Ahead* ah,
                                 Py_ssize_t step0) noexcept nogil:
    """_window_block8 on nv = 2..4 vectors at once, at channel offsets 0, o1, o2, o3 (up to
    eight independent chains of adds). ``ahead``: also prefetch the 128 bytes of the pixel that
    follow the block (the first block of a wider row). ``ah`` (or NULL), ``step0``: as in
    _window_block8."""
    cdef Py_ssize_t x, q, lo, cur = x_lo[0]
    cdef v8f zero = splat8(0)
    cdef v8f a0 = zero, a1 = zero, a2 = zero, a3 = zero, b0 = zero, b1 = zero, b2 = zero
    cdef v8f b3 = zero, s0 = zero, s1 = zero, s2 = zero, s3 = zero, w, wl, wh, v
    cdef const float* p
    TFC_CHECK(0 <= cur < Ix and 2 <= nv <= 4 and 0 < o1 <= o2 <= o3 and o3 + 8 <= C)
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
                a1 = (a1 + (s1 * w) * wl) + (s1 * w) * wh
                if nv > 2:
                    a2 = (a2 + (s2 * w) * wl) + (s2 * w) * wh
                if nv > 3:
                    a3 = (a3 + (s3 * w) * wl) + (s3 * w) * wh
            else:
                a0 = a0 + (s0 * w) * wl
                a1 = a1 + (s1 * w) * wl
                b0 = b0 + (s0 * w) * wh
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


def linear_backward(const real_src[::1] dy, real_acc[::1] dx, Py_ssize_t rows_b,
                    Py_ssize_t Iz, Py_ssize_t Iy, Py_ssize_t Ix,
                    Py_ssize_t Oz, Py_ssize_t Oy, Py_ssize_t Ox, Py_ssize_t C,
                    const int32_t[::1] z_off, const int32_t[::1] z_src, const int32_t[::1] z_cnt,
                    const float[::1] z_w0, const float[::1] z_w1,
                    const int32_t[::1] y_off, const int32_t[::1] y_src, const int32_t[::1] y_cnt,
                    const float[::1] y_w0, const float[::1] y_w1,
                    const int32_t[::1] x_lo, const int32_t[::1] x_hi,
                    const float[::1] x_wlo, const float[::1] x_whi, int num_threads):
    """Linear (bi-, trilinear) resampling backward; see the comment block above."""
    cdef RowTables t
    t.z_off = &z_off[0]; t.z_src = &z_src[0]; t.z_cnt = &z_cnt[0]
    t.z_w0 = &z_w0[0]; t.z_w1 = &z_w1[0]
    t.y_off = &y_off[0]; t.y_src = &y_src[0]; t.y_cnt = &y_cnt[0]
    t.y_w0 = &y_w0[0]; t.y_w1 = &y_w1[0]
    TFC_CHECK(dy.shape[0] == rows_b * Oz * Oy * Ox * C and dx.shape[0] == rows_b * Iz * Iy * Ix * C)
    TFC_CHECK(z_off.shape[0] == Iz + 1 and y_off.shape[0] == Iy + 1 and x_lo.shape[0] == Ox)
    _linear_run(&dy[0], &dx[0], rows_b, Iz, Iy, Ix, Oz, Oy, Ox, C, &t, &x_lo[0], &x_hi[0],
                &x_wlo[0], &x_whi[0], num_threads)


cdef int _linear_run(const real_src* pdy, real_acc* pdx, Py_ssize_t rows_b,
                     Py_ssize_t Iz, Py_ssize_t Iy, Py_ssize_t Ix,
                     Py_ssize_t Oz, Py_ssize_t Oy, Py_ssize_t Ox, Py_ssize_t C, RowTables* t,
                     const int32_t* plo, const int32_t* phi, const float* pwl, const float* pwh,
                     int num_threads) except -1:
    """linear_backward on pointers: its caller has checked the sizes against the tables."""
    cdef Py_ssize_t row, nrows = rows_b * Iz * Iy
    # NCX: channel groups of 8 (float32, through the window) or C1_GROUP, times the rows
    cdef Py_ssize_t group = 8 if (real_src is float and real_acc is float) else C1_GROUP
    cdef Py_ssize_t items = ((rows_b + group - 1) // group) * Iz * Iy
    cdef float* sbuf
    cdef float* dbuf
    if real_src is float and real_acc is float:
        if C == 1:
            with nogil, parallel(num_threads=num_threads):
                sbuf = <float*>malloc(Ox * 8 * sizeof(float))
                dbuf = <float*>malloc(Ix * 8 * sizeof(float))
                if sbuf != NULL and dbuf != NULL:
                    for row in prange(items, schedule='static'):
                        _linear_rows_c8_f32(pdy, pdx, row, rows_b, Iz, Iy, Ix, Oz, Oy, Ox, t,
                                            plo, phi, pwl, pwh, sbuf, dbuf)
                else:
                    tfc_alloc_failed()
                free(sbuf)
                free(dbuf)
            if tfc_take_alloc_failed():
                raise MemoryError("linear_backward: no memory for the per-thread channel blocks")
            return 0
    with nogil:
        if C == 1:
            for row in prange(items, schedule='static', num_threads=num_threads):
                _linear_rows_c1(pdy, pdx, row, rows_b, Iz, Iy, Ix, Oz, Oy, Ox, t,
                                plo, phi, pwl, pwh)
        else:
            for row in prange(nrows, schedule='static', num_threads=num_threads):
                _linear_row(pdy, pdx, row, rows_b, Iz, Iy, Ix, Oz, Oy, Ox, C, t, plo, phi, pwl,
                            pwh)
    return 0


cdef inline void _nearest_runs_f32(const float* src, float* dst, Py_ssize_t Ox, Py_ssize_t Ix,
                                   Py_ssize_t C, Blocks* bl,
                                   const int32_t* x_idx) noexcept nogil:
    """dst[x_idx[x]] += src[x] for x ascending, float32, 8 <= C <= 64 in the blocks of
    _row_blocks: each run of x with one index loads and stores its dst element once per
    vector instead of once per x (R3's 8x: 8 adds per load and store). When C % 8 != 0 the
    last vector of a block overlaps the one before it; the shared lanes receive the same
    terms in the same order, so both stores write the same bits."""
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
            # the block's vectors side by side (one dependent chain of adds at a time waited
            # on its adds: R3's runs of 8 ran at 4 floats per ns), with literal vector counts
            # as in _window_row_f32
            if bl.nv[k] == 4 and bl.o3[k] == 24:
                _gather_block(&s, 1, 0, n, C, c0, d + c0, 4, 8, 16, 24, 1)
            elif bl.nv[k] == 4:
                _gather_block(&s, 1, 0, n, C, c0, d + c0, 4, bl.o1[k], bl.o2[k], bl.o3[k], 1)
            elif bl.nv[k] == 3:
                _gather_block(&s, 1, 0, n, C, c0, d + c0, 3, bl.o1[k], bl.o2[k], 0, 1)
            elif bl.nv[k] == 2:
                _gather_block(&s, 1, 0, n, C, c0, d + c0, 2, bl.o1[k], 0, 0, 1)
            else:
                _gather_block(&s, 1, 0, n, C, c0, d + c0, 1, 0, 0, 0, 1)
        x0 = x1


cdef void _nearest_row(const nn_t* dy, nn_t* dx, Py_ssize_t row, Py_ssize_t rows_b,
                       Py_ssize_t Iz, Py_ssize_t Iy, Py_ssize_t Ix,
                       Py_ssize_t Oz, Py_ssize_t Oy, Py_ssize_t Ox, Py_ssize_t C,
                       RowTables* t, const int32_t* x_idx) noexcept nogil:
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
    cdef bint runs = nn_t is float and 8 <= C <= WINDOW_MAX_C
    if runs:
        _row_blocks(&bl, C)
    # as in _linear_row, for the scatter only (no steps for the runs): measured in the
    # comparison command's order R4 (C = 256) 1.13-1.18x. A nearest row reads no dy row twice,
    # so the next row's dy rows just continue this row's stream; with R3's runs (C = 21) the
    # plan cost 0.70x single-threaded and 0.90x on two threads (caches evicted)
    _plan_ahead(&ahead, t, <const char*>dy, b, iy, rows_b, Iz, Iy, Oz, Oy,
                Ox * C * <Py_ssize_t>sizeof(nn_t),
                0 if runs else (t.y_off[iy + 1] - t.y_off[iy]) * Ox)
    memset(dst, 0, Ix * C * sizeof(nn_t))
    for gz in range(t.z_off[iz], t.z_off[iz + 1]):
        for gy in range(t.y_off[iy], t.y_off[iy + 1]):
            TFC_CHECK(0 <= t.z_src[gz] < Oz and 0 <= t.y_src[gy] < Oy)
            src = dy + ((b * Oz + t.z_src[gz]) * Oy + t.y_src[gy]) * Ox * C
            if nn_t is float:
                # measured: 1.1-1.5x on R1 and R3 (C = 64, 21); at C = 128 and 256 (R4)
                # 1.14-1.18x with dy in cache but 0.72-0.89x with dy out of it, where the
                # scatter's one stream through dy reads faster
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


# float32, 8 <= C <= 64, at most GATHER_MAX_ROWS dy rows per dx row: a gather. Each dx element
# is summed in registers over its dy rows (ascending) and, in each, its run of x (ascending; the
# map is monotonic, so the x of one element are contiguous), starting from +0.0 as TF's zeroed
# output does, and stored once: no memset and no read-modify-write passes over the dx row.
# The terms and their order are those of the scatter above, so the bits are too.
# Measured against the scatter (interleaved A/B, 2 threads): R1 and R2 (1 or 2 dy rows per dx
# row) 1.13-1.17x with dy in cache and 1.00-1.09x with it evicted; R3 (8 rows, read as eight
# concurrent streams) 1.05-1.25x in cache but 0.85-0.93x evicted; R4 (C = 256, a pixel in
# four 256-byte pieces) 1.32x in cache, 0.76x evicted. Hence the two limits.
DEF GATHER_MAX_ROWS = 4


cdef inline void _gather_block(const float** rows, Py_ssize_t nrows, Py_ssize_t x0,
                               Py_ssize_t n, Py_ssize_t C, Py_ssize_t c0, float* d,
                               Py_ssize_t nv, Py_ssize_t o1, Py_ssize_t o2,
                               Py_ssize_t o3, bint onto) noexcept nogil:
    """d[0, o1, o2, o3 (nv vectors)] = +0.0 (or, ``onto``, d's own values) plus the sum over
    the rows, then x0 .. x0 + n - 1, of the vectors at channels c0, c0 + o1, c0 + o2, c0 + o3
    of pixel x, in that order: nv chains of adds side by side."""
    cdef Py_ssize_t k, x
    cdef v8f a0 = splat8(0), a1 = splat8(0), a2 = splat8(0), a3 = splat8(0)
    cdef const float* p
    if onto:
        a0 = load8(d)
        if nv > 1:
            a1 = load8(d + o1)
        if nv > 2:
            a2 = load8(d + o2)
        if nv > 3:
            a3 = load8(d + o3)
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
            p = p + C
    store8(d, a0)
    if nv > 1:
        store8(d + o1, a1)
    if nv > 2:
        store8(d + o2, a2)
    if nv > 3:
        store8(d + o3, a3)


cdef inline void _gather_block64(const float** rows, Py_ssize_t nrows, Py_ssize_t x0,
                                 Py_ssize_t n, Py_ssize_t C, Py_ssize_t c0,
                                 float* d) noexcept nogil:
    """_gather_block on eight vectors (channels c0 .. c0 + 63): a whole 256-byte piece of
    each pixel per step, so that C = 64 (R1, R2) is one block."""
    cdef Py_ssize_t k, x
    cdef v8f a0 = splat8(0), a1 = splat8(0), a2 = splat8(0), a3 = splat8(0)
    cdef v8f a4 = splat8(0), a5 = splat8(0), a6 = splat8(0), a7 = splat8(0)
    cdef const float* p
    for k in range(nrows):
        p = rows[k] + x0 * C + c0
        for x in range(n):
            a0 = a0 + load8(p)
            a1 = a1 + load8(p + 8)
            a2 = a2 + load8(p + 16)
            a3 = a3 + load8(p + 24)
            a4 = a4 + load8(p + 32)
            a5 = a5 + load8(p + 40)
            a6 = a6 + load8(p + 48)
            a7 = a7 + load8(p + 56)
            p = p + C
    store8(d, a0)
    store8(d + 8, a1)
    store8(d + 16, a2)
    store8(d + 24, a3)
    store8(d + 32, a4)
    store8(d + 40, a5)
    store8(d + 48, a6)
    store8(d + 56, a7)


cdef void _nearest_gather_row_f32(const float* dy, float* dx, Py_ssize_t row,
                                  Py_ssize_t Iz, Py_ssize_t Iy, Py_ssize_t Ix,
                                  Py_ssize_t Oz, Py_ssize_t Oy, Py_ssize_t Ox, Py_ssize_t C,
                                  RowTables* t, const int32_t* x_off) noexcept nogil:
    cdef Py_ssize_t b = row // (Iz * Iy)
    cdef Py_ssize_t iz = (row // Iy) % Iz
    cdef Py_ssize_t iy = row % Iy
    cdef float* dst = dx + row * Ix * C
    cdef const float* rows[GATHER_MAX_ROWS]
    cdef Py_ssize_t nrows = 0, gz, gy, i, x0, n, c0, r, nv
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
        # blocks of 64 channels, then of 32; the last 1 to 31 as one block of up to four vectors whose
        # last one ends at C (it may overlap the vector before it, or the block before: every
        # store of a lane writes the same sum, and nothing here reads dx)
        c0 = 0
        while c0 + 64 <= C:
            _gather_block64(rows, nrows, x0, n, C, c0, dst + i * C + c0)
            c0 += 64
        while c0 + 32 <= C:
            _gather_block(rows, nrows, x0, n, C, c0, dst + i * C + c0, 4, 8, 16, 24, 0)
            c0 += 32
        r = C - c0
        if r > 0:
            nv = (r + 7) // 8
            c0 = C - 8 * nv if r < 8 else c0
            r = C - c0
            if nv == 1:
                _gather_block(rows, nrows, x0, n, C, c0, dst + i * C + c0, 1, 0, 0, 0, 0)
            elif nv == 2:
                _gather_block(rows, nrows, x0, n, C, c0, dst + i * C + c0, 2, r - 8, 0, 0, 0)
            elif nv == 3:
                _gather_block(rows, nrows, x0, n, C, c0, dst + i * C + c0, 3, 8, r - 8, 0, 0)
            else:
                _gather_block(rows, nrows, x0, n, C, c0, dst + i * C + c0, 4, 8, 16, r - 8, 0)


cdef Py_ssize_t _most_per_entry(const int32_t[::1] off):
    """The largest off[i + 1] - off[i] of a CSR offset table: dy rows per dx row, per axis."""
    cdef Py_ssize_t i, most = 0
    for i in range(off.shape[0] - 1):
        most = max(most, <Py_ssize_t>(off[i + 1] - off[i]))
    return most


cdef bint _non_decreasing(const int32_t[::1] a):
    cdef Py_ssize_t i
    for i in range(1, a.shape[0]):
        if a[i] < a[i - 1]:
            return False
    return True


cdef object _gather_offsets(Py_ssize_t C, Py_ssize_t Ix, const int32_t[::1] z_off,
                            const int32_t[::1] y_off, const int32_t[::1] x_idx):
    """For the float32 gather: the run of dx column i is x_off[i] <= x < x_off[i + 1] (an int32
    array of Ix + 1), or None where the gather does not apply. The gather needs each dx column's
    x to be contiguous: x_idx never decreases for the maps nearest_axis_map builds, and the check
    keeps that an assumption no caller can break."""
    if (8 <= C <= WINDOW_MAX_C
            and _most_per_entry(z_off) * _most_per_entry(y_off) <= GATHER_MAX_ROWS
            and _non_decreasing(x_idx)):
        return np.searchsorted(np.asarray(x_idx), np.arange(Ix + 1)).astype(np.int32)
    return None


def nearest_backward(const nn_t[::1] dy, nn_t[::1] dx, Py_ssize_t rows_b,
                     Py_ssize_t Iz, Py_ssize_t Iy, Py_ssize_t Ix,
                     Py_ssize_t Oz, Py_ssize_t Oy, Py_ssize_t Ox, Py_ssize_t C,
                     const int32_t[::1] z_off, const int32_t[::1] z_src,
                     const int32_t[::1] y_off, const int32_t[::1] y_src,
                     const int32_t[::1] x_idx, int num_threads):
    """Nearest-neighbour resampling backward: every dy element lands on one dx element."""
    cdef RowTables t
    t.z_off = &z_off[0]; t.z_src = &z_src[0]
    t.y_off = &y_off[0]; t.y_src = &y_src[0]
    TFC_CHECK(dy.shape[0] == rows_b * Oz * Oy * Ox * C and dx.shape[0] == rows_b * Iz * Iy * Ix * C)
    TFC_CHECK(z_off.shape[0] == Iz + 1 and y_off.shape[0] == Iy + 1 and x_idx.shape[0] == Ox)
    cdef int32_t[::1] x_off
    cdef const int32_t* poff = NULL
    if nn_t is float:
        gather = _gather_offsets(C, Ix, z_off, y_off, x_idx)
        if gather is not None:
            x_off = gather
            poff = &x_off[0]
    _nearest_run(&dy[0], &dx[0], rows_b, Iz, Iy, Ix, Oz, Oy, Ox, C, &t, &x_idx[0], poff,
                 num_threads)


cdef void _nearest_run(const nn_t* pdy, nn_t* pdx, Py_ssize_t rows_b,
                       Py_ssize_t Iz, Py_ssize_t Iy, Py_ssize_t Ix,
                       Py_ssize_t Oz, Py_ssize_t Oy, Py_ssize_t Ox, Py_ssize_t C, RowTables* t,
                       const int32_t* pidx, const int32_t* poff, int num_threads) noexcept:
    """nearest_backward on pointers: ``poff`` is _gather_offsets' table (float32 only) or NULL;
    its caller has checked the sizes against the tables."""
    cdef Py_ssize_t row, nrows = rows_b * Iz * Iy
    if nn_t is float:
        if poff != NULL:
            with nogil:
                for row in prange(nrows, schedule='static', num_threads=num_threads):
                    _nearest_gather_row_f32(pdy, pdx, row, Iz, Iy, Ix, Oz, Oy, Ox, C, t, poff)
            return
    with nogil:
        for row in prange(nrows, schedule='static', num_threads=num_threads):
            _nearest_row(pdy, pdx, row, rows_b, Iz, Iy, Ix, Oz, Oy, Ox, C, t, pidx)


# ---------------------------------------------------------------------------------------
# A prepared call: one layout's kernel, run with no Python-level work per call
# ---------------------------------------------------------------------------------------
# Why: in the comparison command's order (TF and PyTorch run between our calls and leave the
# interpreter's caches cold) the Python layers between a functional call and the kernel, the
# fused-type dispatch of linear_backward/nearest_backward, their 16-20 memoryview arguments and
# the gather table built on each call cost 80-100 us of a 0.24 ms R4 nearest call (SPEC.md 7).
cdef enum:
    RUN_LINEAR_F32_F32, RUN_LINEAR_F32_F64, RUN_LINEAR_F64_F64
    RUN_NEAREST_F32, RUN_NEAREST_F64, RUN_NEAREST_U8, RUN_NEAREST_U32

# (linear, the type the kernel reads, the type it sums in): the combinations _plan builds
# (float64 grads always sum in float64)
_RUN_KINDS = {
    (True, "float32", "float32"): RUN_LINEAR_F32_F32,
    (True, "float32", "float64"): RUN_LINEAR_F32_F64,
    (True, "float64", "float64"): RUN_LINEAR_F64_F64,
    (False, "float32", "float32"): RUN_NEAREST_F32,
    (False, "float64", "float64"): RUN_NEAREST_F64,
    (False, "uint8", "uint8"): RUN_NEAREST_U8,
    (False, "uint32", "uint32"): RUN_NEAREST_U32,
}


cdef class Resampler:
    """One layout's resampling backward, prepared once: the kernel's sizes, its tables (kept
    here, read through C pointers), the float32 gather's column runs, dy's dtype and dx's shape
    and dtype. ``run(dy, num_threads)`` checks dy, allocates dx from the output pool and calls
    the kernel. The tables are the ones linear_backward/nearest_backward take, built and
    proven in range by the same code (tfcompat/backends/cython_backend.py).

    ``src``/``acc`` are the types the kernel reads and sums in; ``dy_dtype`` and ``out_dtype``
    are the caller's, of the same item sizes (int8 and int32 are summed as uint8 and uint32,
    whose sums wrap as TF's do)."""
    cdef readonly bint linear
    cdef int kind, dy_type, dx_type, ndim
    cdef Py_ssize_t rows_b, Iz, Iy, Ix, Oz, Oy, Ox, C, dy_size
    cdef cnp.npy_intp dims[5]
    cdef RowTables t
    cdef const int32_t* x0      # x_lo (linear) or x_idx (nearest)
    cdef const int32_t* x1      # x_hi (linear)
    cdef const float* w0        # x_wlo (linear)
    cdef const float* w1        # x_whi (linear)
    cdef const int32_t* poff    # the float32 gather's column runs, or NULL
    cdef object keep

    def __init__(self, bint linear, sizes, tables, src_dtype, acc_dtype, dy_dtype, out_shape,
                 out_dtype):
        src_dtype, acc_dtype = np.dtype(src_dtype), np.dtype(acc_dtype)
        dy_dtype, out_dtype = np.dtype(dy_dtype), np.dtype(out_dtype)
        key = (bool(linear), src_dtype.name, acc_dtype.name)
        if key not in _RUN_KINDS:
            raise ValueError(f"Resampler: no kernel for {key}")
        if dy_dtype.itemsize != src_dtype.itemsize or out_dtype.itemsize != acc_dtype.itemsize:
            raise ValueError(f"Resampler: dy {dy_dtype} / dx {out_dtype} do not have the item "
                             f"sizes of the kernel's {src_dtype} / {acc_dtype}")
        if not (dy_dtype.isnative and out_dtype.isnative):
            raise ValueError("Resampler: dy and dx must be of native byte order")
        self.linear = linear
        self.kind = _RUN_KINDS[key]
        self.dy_type = dy_dtype.num
        self.dx_type = out_dtype.num
        self.rows_b, self.Iz, self.Iy, self.Ix, self.Oz, self.Oy, self.Ox, self.C = sizes
        out_shape = tuple(out_shape)
        if not 1 <= len(out_shape) <= 5:
            raise ValueError(f"Resampler: out_shape {out_shape} has more than 5 axes")
        self.ndim = len(out_shape)
        cdef Py_ssize_t i, dx_size = 1
        for i in range(self.ndim):
            self.dims[i] = out_shape[i]
            dx_size *= out_shape[i]
        self.dy_size = self.rows_b * self.Oz * self.Oy * self.Ox * self.C
        if dx_size != self.rows_b * self.Iz * self.Iy * self.Ix * self.C or dx_size < 1 \
                or self.dy_size < 1:
            raise ValueError(f"Resampler: out_shape {out_shape} does not match sizes {sizes}")
        self.keep = tuple(tables)
        n_tables = 14 if linear else 5
        if len(self.keep) != n_tables:
            raise ValueError(f"Resampler: got {len(self.keep)} tables, expected {n_tables}")
        self._bind(self.keep)

    cdef _bind(self, tuple tab):
        cdef const int32_t[::1] z_off, z_src, z_cnt, y_off, y_src, y_cnt, xa, xb
        cdef const float[::1] z_w0, z_w1, y_w0, y_w1, wa, wb
        cdef const int32_t[::1] x_off
        if self.linear:
            z_off, z_src, z_cnt, z_w0, z_w1, y_off, y_src, y_cnt, y_w0, y_w1, xa, xb, wa, wb = tab
            self.t.z_cnt = &z_cnt[0]; self.t.z_w0 = &z_w0[0]; self.t.z_w1 = &z_w1[0]
            self.t.y_cnt = &y_cnt[0]; self.t.y_w0 = &y_w0[0]; self.t.y_w1 = &y_w1[0]
            self.x1 = &xb[0]; self.w0 = &wa[0]; self.w1 = &wb[0]
            if not (xb.shape[0] == wa.shape[0] == wb.shape[0] == self.Ox):
                raise ValueError("Resampler: the x tables do not have Ox entries")
        else:
            z_off, z_src, y_off, y_src, xa = tab
            if self.kind == RUN_NEAREST_F32:
                gather = _gather_offsets(self.C, self.Ix, z_off, y_off, xa)
                if gather is not None:
                    self.keep = self.keep + (gather,)
                    x_off = gather
                    self.poff = &x_off[0]
        if not (z_off.shape[0] == self.Iz + 1 and y_off.shape[0] == self.Iy + 1
                and xa.shape[0] == self.Ox):
            raise ValueError("Resampler: the tables do not match the sizes")
        self.t.z_off = &z_off[0]; self.t.z_src = &z_src[0]
        self.t.y_off = &y_off[0]; self.t.y_src = &y_src[0]
        self.x0 = &xa[0]

    def run(self, dy, int num_threads):
        """dx for ``dy``, or None when dy is not an aligned, C-contiguous, native-order ndarray
        of this layout's dtype and size (the caller then takes the general path)."""
        if type(dy) is not np.ndarray:
            return None
        cdef cnp.ndarray a = <cnp.ndarray>dy
        if (cnp.PyArray_TYPE(a) != self.dy_type or cnp.PyArray_SIZE(a) != self.dy_size
                or not cnp.PyArray_IS_C_CONTIGUOUS(a) or not cnp.PyArray_ISALIGNED(a)
                or not cnp.PyArray_ISNOTSWAPPED(a)):
            return None
        old = PyDataMem_SetHandler(_POOL_HANDLER)
        try:
            dx = cnp.PyArray_EMPTY(self.ndim, self.dims, self.dx_type, 0)
        finally:
            PyDataMem_SetHandler(old)
        self._run(cnp.PyArray_DATA(a), cnp.PyArray_DATA(<cnp.ndarray>dx), num_threads)
        return dx

    cdef int _run(self, const void* s, void* d, int nt) except -1:
        cdef RowTables* t = &self.t
        k = self.kind
        if k == RUN_LINEAR_F32_F32:
            _linear_run(<const float*>s, <float*>d, self.rows_b, self.Iz, self.Iy, self.Ix,
                        self.Oz, self.Oy, self.Ox, self.C, t, self.x0, self.x1, self.w0, self.w1, nt)
        elif k == RUN_LINEAR_F32_F64:
            _linear_run(<const float*>s, <double*>d, self.rows_b, self.Iz, self.Iy, self.Ix,
                        self.Oz, self.Oy, self.Ox, self.C, t, self.x0, self.x1, self.w0, self.w1, nt)
        elif k == RUN_LINEAR_F64_F64:
            _linear_run(<const double*>s, <double*>d, self.rows_b, self.Iz, self.Iy, self.Ix,
                        self.Oz, self.Oy, self.Ox, self.C, t, self.x0, self.x1, self.w0, self.w1, nt)
        elif k == RUN_NEAREST_F32:
            _nearest_run(<const float*>s, <float*>d, self.rows_b, self.Iz, self.Iy, self.Ix,
                         self.Oz, self.Oy, self.Ox, self.C, t, self.x0, self.poff, nt)
        elif k == RUN_NEAREST_F64:
            _nearest_run(<const double*>s, <double*>d, self.rows_b, self.Iz, self.Iy, self.Ix,
                         self.Oz, self.Oy, self.Ox, self.C, t, self.x0, NULL, nt)
        elif k == RUN_NEAREST_U8:
            _nearest_run(<const unsigned char*>s, <unsigned char*>d, self.rows_b, self.Iz,
                         self.Iy, self.Ix, self.Oz, self.Oy, self.Ox, self.C, t, self.x0, NULL, nt)
        else:
            _nearest_run(<const unsigned int*>s, <unsigned int*>d, self.rows_b, self.Iz,
                         self.Iy, self.Ix, self.Oz, self.Oy, self.Ox, self.C, t, self.x0, NULL, nt)
        return 0


def tf_pair_key(inputs, attrs):
    """The cache key of a ResizeBilinearGrad / ResizeNearestNeighborGrad registry call:
    (dy's type number and shape, images' type number and shape, alignCorners,
    halfPixelCenters), or None for a call that is not made of a dict of two native-order
    ndarrays and a dict of at most those two attributes as Python bools. Everything the
    parser checks is in the key, so a key that once passed the checks passes them again."""
    if type(inputs) is not dict or type(attrs) is not dict:
        return None
    dy = (<dict>inputs).get("dy")
    img = (<dict>inputs).get("images")
    if type(dy) is not np.ndarray or type(img) is not np.ndarray:
        return None
    if not cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>dy) or not cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>img):
        return None
    align = (<dict>attrs).get("alignCorners", False)
    half = (<dict>attrs).get("halfPixelCenters", False)
    if (align is not True and align is not False) or (half is not True and half is not False):
        return None
    if ("alignCorners" in <dict>attrs) + ("halfPixelCenters" in <dict>attrs) != len(<dict>attrs):
        return None
    return (cnp.PyArray_TYPE(<cnp.ndarray>dy), dy.shape, cnp.PyArray_TYPE(<cnp.ndarray>img),
            img.shape, align, half)


def tf_pair_cached(dict cache, inputs, attrs, int num_threads):
    """dx from the Resampler ``cache`` holds for this call's tf_pair_key, or None."""
    key = tf_pair_key(inputs, attrs)
    if key is None:
        return None
    r = cache.get(key)
    if r is None:
        return None
    return (<Resampler>r).run((<dict>inputs)["dy"], num_threads)


# ---------------------------------------------------------------------------------------
# A benchmark instrument: the memory floor of a resampling backward
# ---------------------------------------------------------------------------------------

cdef extern from *:
    """
    /* Chunk k of an array of n floats is [k*n/chunks, (k+1)*n/chunks). Every float of the
       source chunk is read once (8-lane loads, four independent ORs) and every float of the
       destination chunk is written once with the OR of the source chunk's bits: a result
       that needs every read and no arithmetic whose speed or order could matter. */
    static void tfc_stream_chunk(const float *s, Py_ssize_t ns, float *d, Py_ssize_t nd) {
        tfc_v8i a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, v;
        Py_ssize_t i = 0;
        uint32_t r = 0, u;
        for (; i + 32 <= ns; i += 32) {
            memcpy(&v, s + i, 32); a0 |= v;
            memcpy(&v, s + i + 8, 32); a1 |= v;
            memcpy(&v, s + i + 16, 32); a2 |= v;
            memcpy(&v, s + i + 24, 32); a3 |= v;
        }
        for (; i + 8 <= ns; i += 8) { memcpy(&v, s + i, 32); a0 |= v; }
        a0 |= a1 | a2 | a3;
        for (int k = 0; k < 8; k++) r |= (uint32_t)a0[k];
        for (; i < ns; i++) { memcpy(&u, s + i, 4); r |= u; }
        tfc_v8i o = {(int)r, (int)r, (int)r, (int)r, (int)r, (int)r, (int)r, (int)r};
        for (i = 0; i + 8 <= nd; i += 8) memcpy(d + i, &o, 32);
        for (; i < nd; i++) memcpy(d + i, &r, 4);
    }
    """
    void stream_chunk "tfc_stream_chunk"(const float* s, Py_ssize_t ns, float* d,
                                          Py_ssize_t nd) noexcept nogil


def stream_floor(const float[::1] src, float[::1] dst, Py_ssize_t chunks, int num_threads):
    """Not a kernel: what asv_benchmarks.compare times as the floor of a resize workload.

    Reads every float of ``src`` once and writes every float of ``dst`` once, in ``chunks``
    matching pieces split statically over ``num_threads`` threads (chunk k of each array:
    [k*n/chunks, (k+1)*n/chunks); every float of destination chunk k gets the bitwise OR of
    the bits of source chunk k). A resampling backward must at least read |dy| and write
    |dx|; this does only that, with the same threads, so no such kernel can beat its time
    by much. 1 <= chunks <= min(len(src), len(dst))."""
    cdef Py_ssize_t ns = src.shape[0], nd = dst.shape[0], k
    if not 1 <= chunks <= min(ns, nd):
        raise ValueError(f"chunks: got {chunks}; expected 1 <= chunks <= {min(ns, nd)} "
                         f"(the shorter array's length)")
    cdef const float* ps = &src[0]
    cdef float* pd = &dst[0]
    with nogil:
        for k in prange(chunks, schedule='static', num_threads=num_threads):
            stream_chunk(ps + k * ns // chunks, (k + 1) * ns // chunks - k * ns // chunks,
                         pd + k * nd // chunks, (k + 1) * nd // chunks - k * nd // chunks)


# ---------------------------------------------------------------------------------------
# Conv2DBackpropInput: col2im as a gather
# ---------------------------------------------------------------------------------------

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
    cursor_a = offsets_a[:-1].copy()
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


cdef struct ConvTables:
    const int32_t* h_off
    const int32_t* h_out
    const int32_t* h_tap
    const int32_t* w_off
    const int32_t* w_out
    const int32_t* w_tap


cdef ConvTables _conv_tables(const int32_t[::1] h_off, const int32_t[::1] h_out,
                             const int32_t[::1] h_tap, const int32_t[::1] w_off,
                             const int32_t[::1] w_out, const int32_t[::1] w_tap):
    cdef ConvTables t
    t.h_off = &h_off[0]
    t.h_out = &h_out[0] if h_out.shape[0] else NULL
    t.h_tap = &h_tap[0] if h_tap.shape[0] else NULL
    t.w_off = &w_off[0]
    t.w_out = &w_out[0] if w_out.shape[0] else NULL
    t.w_tap = &w_tap[0] if w_tap.shape[0] else NULL
    return t


cdef void _col2im_gather(const real_acc* cols, real_acc* dst, Py_ssize_t n, Py_ssize_t iy,
                         Py_ssize_t W, Py_ssize_t C, Py_ssize_t OH, Py_ssize_t OW,
                         Py_ssize_t fw, Py_ssize_t ncol, ConvTables* tab,
                         Py_ssize_t ring) noexcept nogil:
    """dst = dx row (n, iy): W * C values, each the sum of its column entries. Column row r
    (r = n * OH + oy) is at ``cols + (r % ring) * OW * ncol``: ``ring`` is the number of
    output rows ``cols`` holds (all of them, or a ring of the most recent ones)."""
    cdef const int32_t* h_off = tab.h_off
    cdef const int32_t* h_out = tab.h_out
    cdef const int32_t* h_tap = tab.h_tap
    cdef const int32_t* w_off = tab.w_off
    cdef const int32_t* w_out = tab.w_out
    cdef const int32_t* w_tap = tab.w_tap
    cdef Py_ssize_t gh, ix, gw, c
    cdef real_acc* d
    cdef const real_acc* src
    cdef const real_acc* s
    memset(dst, 0, W * C * sizeof(real_acc))
    for gh in range(h_off[iy], h_off[iy + 1]):
        TFC_CHECK(0 <= h_out[gh] < OH and 0 <= h_tap[gh] < ncol // (fw * C))
        src = cols + ((n * OH + h_out[gh]) % ring) * OW * ncol + h_tap[gh] * fw * C
        for ix in range(W):
            d = dst + ix * C
            for gw in range(w_off[ix], w_off[ix + 1]):
                TFC_CHECK(0 <= w_out[gw] < OW and 0 <= w_tap[gw] < fw)
                s = src + w_out[gw] * ncol + w_tap[gw] * C
                for c in range(C):
                    d[c] += s[c]


def col2im_nhwc(const real_acc[::1] cols, real_acc[::1] dx, Py_ssize_t N,
                Py_ssize_t H, Py_ssize_t W, Py_ssize_t C, Py_ssize_t OH, Py_ssize_t OW,
                Py_ssize_t fh, Py_ssize_t fw,
                const int32_t[::1] h_off, const int32_t[::1] h_out, const int32_t[::1] h_tap,
                const int32_t[::1] w_off, const int32_t[::1] w_out, const int32_t[::1] w_tap,
                int num_threads):
    """dx[n, iy, ix, c] = sum of cols[(n, oy, ox), (ky, kx, c)] over the table pairs.

    ``cols`` is [N * OH * OW, fh * fw * C]. Each dx row (n, iy) is owned by one thread.
    """
    cdef Py_ssize_t row, nrows = N * H
    cdef Py_ssize_t ncol = fh * fw * C
    cdef const real_acc* pc = &cols[0]
    cdef real_acc* pdx = &dx[0]
    cdef ConvTables tab = _conv_tables(h_off, h_out, h_tap, w_off, w_out, w_tap)
    TFC_CHECK(cols.shape[0] == N * OH * OW * ncol and dx.shape[0] == nrows * W * C)
    TFC_CHECK(h_off.shape[0] == H + 1 and w_off.shape[0] == W + 1)
    with nogil:
        for row in prange(nrows, schedule='static', num_threads=num_threads):
            _col2im_gather(pc, pdx + row * W * C, row // H, row % H, W, C, OH, OW, fw, ncol,
                           &tab, N * OH)


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
                                      Py_ssize_t next_oy, Py_ssize_t need, Py_ssize_t OH,
                                      Py_ssize_t OW, Py_ssize_t K, Py_ssize_t OC,
                                      Py_ssize_t band, Py_ssize_t cap) noexcept nogil:
    """Compute one image's column rows next_oy .. need (whole bands of ``band`` output rows,
    one GEMM each) into the ring of ``cap`` rows; returns the first row not computed."""
    cdef Py_ssize_t b
    while next_oy <= need:
        b = min(band, OH - next_oy)
        TFC_CHECK(next_oy % band == 0 and next_oy % cap + b <= cap)
        _gemm_cols(dy + next_oy * OW * OC, w2, ring + (next_oy % cap) * OW * K, <int>(b * OW),
                   <int>K, <int>OC)
        next_oy = next_oy + b
    return next_oy


cdef inline void _check_ring(bint direct, Py_ssize_t band, Py_ssize_t cap, Py_ssize_t OH) except *:
    """The ring's shape is arithmetic the kernel divides by: refuse one it cannot use."""
    if not direct and not (1 <= band <= OH and cap >= band and cap % band == 0):
        raise ValueError(f"band, cap: got {band}, {cap} for {OH} output rows; expected "
                         "1 <= band <= output rows and cap a multiple of band, at least band")


cdef inline Py_ssize_t _last_out_row(ConvTables* tab, Py_ssize_t iy) noexcept nogil:
    """The largest output row that dx row iy gathers from (-1: none); the table lists them in
    ascending order."""
    if tab.h_off[iy] == tab.h_off[iy + 1]:
        return -1
    return tab.h_out[tab.h_off[iy + 1] - 1]


def conv_backward_per_image(const real_acc[::1] dy, const real_acc[::1] w2, real_acc[::1] cols,
                            real_acc[::1] dx, Py_ssize_t N, Py_ssize_t H, Py_ssize_t W,
                            Py_ssize_t C, Py_ssize_t OH, Py_ssize_t OW, Py_ssize_t OC,
                            Py_ssize_t fh, Py_ssize_t fw,
                            const int32_t[::1] h_off, const int32_t[::1] h_out,
                            const int32_t[::1] h_tap, const int32_t[::1] w_off,
                            const int32_t[::1] w_out, const int32_t[::1] w_tap, int num_threads,
                            bint direct, Py_ssize_t band, Py_ssize_t cap):
    """Conv2DBackpropInput, one image per thread. Thread t does images t, t + num_threads, ...;
    every image is computed the same way whichever thread runs it, so the result does not
    depend on the thread count. The caller limits BLAS to one thread for the duration.

    The columns of an image are computed in bands of ``band`` output rows (one single-threaded
    GEMM each) into a ring of ``cap`` rows per thread (``cols`` holds ``num_threads`` rings of
    ``cap * OW * fh * fw * C``), just ahead of the dx rows that gather from them, so the
    columns are read back from cache. ``cap >= band + span - 1`` (span: the most output rows
    a dx row reads, counted back from the newest output row any earlier dx row needed) and
    a multiple of ``band``, or ``band = cap = OH`` (the whole image).
    ``direct`` (1x1, stride 1, no padding): the GEMM writes the image's dx itself."""
    cdef Py_ssize_t t, n, iy, next_oy
    cdef Py_ssize_t M = OH * OW, K = fh * fw * C
    cdef const real_acc* pdy = &dy[0]
    cdef const real_acc* pw = &w2[0]
    cdef real_acc* pc = &cols[0] if cols.shape[0] else NULL
    cdef real_acc* ring
    cdef real_acc* pdx = &dx[0]
    _check_ring(direct, band, cap, OH)
    cdef ConvTables tab = _conv_tables(h_off, h_out, h_tap, w_off, w_out, w_tap)
    TFC_CHECK(dy.shape[0] == N * M * OC and w2.shape[0] == K * OC)
    TFC_CHECK((direct or cols.shape[0] >= num_threads * cap * OW * K) and dx.shape[0] == N * H * W * C)
    TFC_CHECK(h_off.shape[0] == H + 1 and w_off.shape[0] == W + 1)
    with nogil:
        for t in prange(num_threads, schedule='static', num_threads=num_threads):
            ring = pc + t * cap * OW * K
            n = t
            while n < N:
                if direct:
                    _gemm_cols(pdy + n * M * OC, pw, pdx + n * M * K, <int>M, <int>K, <int>OC)
                    n = n + num_threads
                    continue
                next_oy = 0
                for iy in range(H):
                    next_oy = _columns_up_to(pdy + n * M * OC, pw, ring, next_oy,
                                             _last_out_row(&tab, iy), OH, OW, K, OC, band, cap)
                    _col2im_gather(ring, pdx + (n * H + iy) * W * C, 0, iy, W, C, OH, OW, fw, K,
                                   &tab, cap)
                n = n + num_threads


def conv_backward_per_image_16(const uint16_t[::1] dy, const float[::1] w2, float[::1] work,
                               uint16_t[::1] dx, Py_ssize_t N, Py_ssize_t H, Py_ssize_t W,
                               Py_ssize_t C, Py_ssize_t OH, Py_ssize_t OW, Py_ssize_t OC,
                               Py_ssize_t fh, Py_ssize_t fw,
                               const int32_t[::1] h_off, const int32_t[::1] h_out,
                               const int32_t[::1] h_tap, const int32_t[::1] w_off,
                               const int32_t[::1] w_out, const int32_t[::1] w_tap,
                               int num_threads, bint direct, bint bfloat16, Py_ssize_t band,
                               Py_ssize_t cap):
    """``conv_backward_per_image`` for float16 / bfloat16 data (``bfloat16`` picks which) held
    as uint16 bits, computed in float32 and rounded once: each thread widens its image's dy
    into its part of ``work``, computes the float32 columns and col2im there, and rounds each
    dx row as it completes. ``work`` holds ``num_threads`` blocks of ``conv16_work_size``
    floats, so no float32 copy of the whole dy or dx exists."""
    cdef Py_ssize_t t, n, iy, next_oy
    cdef Py_ssize_t M = OH * OW, K = fh * fw * C
    cdef Py_ssize_t per = conv16_work_size(OH, OW, OC, K, W * C, direct, cap)
    cdef const uint16_t* pdy = &dy[0]
    cdef const float* pw = &w2[0]
    cdef float* pwork = &work[0]
    cdef float* dyf
    cdef float* ring
    cdef float* rowbuf
    cdef uint16_t* pdx = &dx[0]
    _check_ring(direct, band, cap, OH)
    cdef ConvTables tab = _conv_tables(h_off, h_out, h_tap, w_off, w_out, w_tap)
    TFC_CHECK(dy.shape[0] == N * M * OC and w2.shape[0] == K * OC)
    TFC_CHECK(work.shape[0] >= num_threads * per and dx.shape[0] == N * H * W * C)
    TFC_CHECK(h_off.shape[0] == H + 1 and w_off.shape[0] == W + 1)
    TFC_CHECK(not direct or M * K == H * W * C)
    with nogil:
        for t in prange(num_threads, schedule='static', num_threads=num_threads):
            dyf = pwork + t * per
            ring = dyf + M * OC
            rowbuf = ring + (OH if direct else cap) * OW * K
            n = t
            while n < N:
                to_f32(pdy + n * M * OC, dyf, M * OC, bfloat16)
                if direct:
                    _gemm_cols(dyf, pw, ring, <int>M, <int>K, <int>OC)
                    from_f32(ring, pdx + n * M * K, M * K, bfloat16)
                    n = n + num_threads
                    continue
                next_oy = 0
                for iy in range(H):
                    next_oy = _columns_up_to(dyf, pw, ring, next_oy, _last_out_row(&tab, iy),
                                             OH, OW, K, OC, band, cap)
                    _col2im_gather(ring, rowbuf, 0, iy, W, C, OH, OW, fw, K, &tab, cap)
                    from_f32(rowbuf, pdx + (n * H + iy) * W * C, W * C, bfloat16)
                n = n + num_threads


cpdef Py_ssize_t conv16_work_size(Py_ssize_t OH, Py_ssize_t OW, Py_ssize_t OC, Py_ssize_t K,
                                  Py_ssize_t row, bint direct, Py_ssize_t cap) noexcept nogil:
    """Floats one thread of ``conv_backward_per_image_16`` needs: its image's dy, the column
    ring (the whole image's dx when ``direct``) and one dx row of ``row`` floats."""
    return OH * OW * OC + (OH if direct else cap) * OW * K + row
