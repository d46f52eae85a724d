/* Eight float lanes as a GCC/Clang vector, prefetch hints, and an 8-row interleave.
 *
 * tfc_v8f is one AVX register in the AVX2 build and two SSE registers in the baseline build;
 * the arithmetic is lane-wise IEEE single precision either way (no FMA: the extension is
 * compiled with -ffp-contract=off), so both builds return the same bits.
 */
#ifndef TFCOMPAT_SIMD_H
#define TFCOMPAT_SIMD_H

#include <string.h>
#include <Python.h>

typedef float tfc_v8f __attribute__((vector_size(32)));
typedef int tfc_v8i __attribute__((vector_size(32)));

static inline tfc_v8f tfc_load8(const float *p) { tfc_v8f v; memcpy(&v, p, sizeof v); return v; }
static inline void tfc_store8(float *p, tfc_v8f v) { memcpy(p, &v, sizeof v); }
static inline tfc_v8f tfc_splat8(float x) { tfc_v8f v = {x, x, x, x, x, x, x, x}; return v; }
static inline void tfc_prefetch(const void *p) { __builtin_prefetch(p, 0, 3); }

/* Lines k .. k + q - 1 of ``lines`` 64-byte lines from base, as prefetcht2: lines wanted in
   some microseconds, not in the next few steps. In C and always inlined: gcc finds a function
   that does nothing but prefetch free of side effects and drops its calls, as it did with this
   one written in Cython. */
static inline __attribute__((always_inline)) void tfc_prefetch_lines(
        const char *base, Py_ssize_t lines, Py_ssize_t q, Py_ssize_t k) {
    for (Py_ssize_t e = k + q < lines ? k + q : lines; k < e; k++)
        __builtin_prefetch(base + k * 64, 0, 1);
}

/* d[x*8 + k] = s[k*sp + x] for k < g <= 8, x < n: g rows, sp floats apart, interleaved into
   pixels of eight lanes (lanes g..7 untouched). Eight rows go by 8x8 transposes, eight pixels
   at a time. Moves only, so the same bits in both builds. */
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

#endif
