/* float16 and bfloat16 <-> float32, branch-free so that GCC vectorizes the loops; plain
 * integer and IEEE float operations only, so both builds give the same bits.
 *
 * float16: Fabian Giesen's half_to_float / float_to_half_rtne (public domain); round to
 * nearest even, subnormals kept, every NaN becomes the quiet NaN 0x7e00 with its sign.
 * bfloat16: Eigen's (and so TF's and ml_dtypes') rounding: round to nearest even, NaN becomes
 * 0x7fc0 with its sign.
 */
#ifndef TFCOMPAT_HALF_H
#define TFCOMPAT_HALF_H

#include <stdint.h>
#include <string.h>
#include <Python.h>

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

/* n values: d = s widened (bf: bfloat16, else float16), or s rounded */
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

#endif
