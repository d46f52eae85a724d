/* The bilinear forward's last step over an output row, with streaming stores for a large
 * output (forward.pxi).
 *
 * o[k] = t[k] + (b[k] - t[k]) * w for k < n: TF's compute_lerp in float32, no fused multiply-add
 * (the extension is compiled with -ffp-contract=off), so the same bits as forward.pxi's plain
 * loop. With ``stream`` the lines of o are written by non-temporal stores: an output too large
 * to stay in the cache goes to memory without each line being read into the cache first, and
 * without evicting the input rows still to be read. The caller's barrier follows the fence.
 */
#ifndef TFCOMPAT_LERP_H
#define TFCOMPAT_LERP_H

#include <stdint.h>
#include <Python.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

static inline void tfc_lerp_row_stream(const float *t, const float *b, float w, float *o,
                                       Py_ssize_t n) {
    Py_ssize_t k = 0;
#ifdef __AVX__
    for (; k < n && ((uintptr_t)(o + k) & 31); k++) o[k] = t[k] + (b[k] - t[k]) * w;
    __m256 w8 = _mm256_set1_ps(w);
    for (; k + 8 <= n; k += 8) {
        __m256 tv = _mm256_loadu_ps(t + k), bv = _mm256_loadu_ps(b + k);
        _mm256_stream_ps(o + k, _mm256_add_ps(tv, _mm256_mul_ps(_mm256_sub_ps(bv, tv), w8)));
    }
#else
    for (; k < n && ((uintptr_t)(o + k) & 15); k++) o[k] = t[k] + (b[k] - t[k]) * w;
    __m128 w4 = _mm_set1_ps(w);
    for (; k + 4 <= n; k += 4) {
        __m128 tv = _mm_loadu_ps(t + k), bv = _mm_loadu_ps(b + k);
        _mm_stream_ps(o + k, _mm_add_ps(tv, _mm_mul_ps(_mm_sub_ps(bv, tv), w4)));
    }
#endif
    for (; k < n; k++) o[k] = t[k] + (b[k] - t[k]) * w;
    _mm_sfence();
}

#else

static inline void tfc_lerp_row_stream(const float *t, const float *b, float w, float *o,
                                       Py_ssize_t n) {
    for (Py_ssize_t k = 0; k < n; k++) o[k] = t[k] + (b[k] - t[k]) * w;
}

#endif
#endif
