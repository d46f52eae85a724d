/* What the conv's AVX-512 code shares (tiles_channel.h, tiles_lanes.h, and conv_core.pxi's
 * transposes of the filter's taps and of NCHW's dy and dx): 16 x 16 transposes of 4- and
 * 8-byte values (and of 16-bit values widened to float32), and the rounding of float32 rows
 * to float16 or bfloat16 (half.h's bits) with plain or streaming stores.
 *
 * Compiled for AVX-512F by a function attribute, in both builds of the extension; the Python
 * layer runs it only where NumPy reports AVX512F and tfc_tiles_built() says it is compiled.
 */
#ifndef TFCOMPAT_TILES_COMMON_H
#define TFCOMPAT_TILES_COMMON_H

#include <Python.h>
#include <string.h>
#include "half.h"

/* tfc_tile_rows's ``half`` for float32 dx stored with non-temporal (streaming) stores: a
   finished tile's whole 64-byte lines go to memory without being read into the cache first
   and without evicting what the cache holds, for a dx too large to stay there
   (tfcompat/conv/strategies.py's STREAM_BYTES); the same values as the plain stores */
#define TFC_STORE_STREAM 3

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

static int tfc_tiles_built(void) { return 1; }

/* dst[o * lds + c] = r[c][o] for c, o < 16: 16 rows of 16 values in registers transposed
   (unpacks, then in-lane and cross-lane shuffles) and stored. Moves bits only. */
static inline __attribute__((target("avx512f"), always_inline)) void tfc_transpose16_store(
        __m512 r[16], float *dst, Py_ssize_t lds) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int h = 0; h < 16; h += 8)
        for (int i = 0; i < 4; i++) {
            t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
        }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
    for (int i = 0; i < 16; i++) _mm512_storeu_ps(dst + i * lds, r[i]);
}

/* dst[o * lds + c] = src[c * lss + o] for c, o < 16: a 16 x 16 tile of 4-byte values
   transposed in registers, for the filter's taps (conv_core.pxi's _tap_block) and NCHW's
   transposes. Moves bits only. */
static __attribute__((target("avx512f"))) void tfc_transpose16(
        const float *src, Py_ssize_t lss, float *dst, Py_ssize_t lds) {
    __m512 r[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * lss);
    tfc_transpose16_store(r, dst, lds);
}

/* dst[o * lds + c] = src[c * lss + o] for c, o < 8: an 8 x 8 tile of 8-byte values
   transposed in registers (unpacks, then two rounds of 128-bit lane shuffles). */
static inline __attribute__((target("avx512f"), always_inline)) void tfc_transpose8_8(
        const double *src, Py_ssize_t lss, double *dst, Py_ssize_t lds) {
    __m512d r[8], t[8];
    for (int i = 0; i < 8; i++) r[i] = _mm512_loadu_pd(src + i * lss);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm512_unpacklo_pd(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_pd(r[i], r[i + 1]);
    }
    /* r[0..3]: rows 0-3's columns (0, 4), (1, 5), (2, 6), (3, 7); r[4..7]: rows 4-7's */
    for (int h = 0; h < 8; h += 4) {
        r[h] = _mm512_shuffle_f64x2(t[h], t[h + 2], 0x88);
        r[h + 1] = _mm512_shuffle_f64x2(t[h + 1], t[h + 3], 0x88);
        r[h + 2] = _mm512_shuffle_f64x2(t[h], t[h + 2], 0xdd);
        r[h + 3] = _mm512_shuffle_f64x2(t[h + 1], t[h + 3], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
        _mm512_storeu_pd(dst + i * lds, _mm512_shuffle_f64x2(r[i], r[i + 4], 0x88));
        _mm512_storeu_pd(dst + (i + 4) * lds, _mm512_shuffle_f64x2(r[i], r[i + 4], 0xdd));
    }
}

/* tfc_transpose16 for 8-byte values: a 16 x 16 tile as four 8 x 8 ones. Moves bits only. */
static __attribute__((target("avx512f"))) void tfc_transpose16_8(
        const double *src, Py_ssize_t lss, double *dst, Py_ssize_t lds) {
    tfc_transpose8_8(src, lss, dst, lds);
    tfc_transpose8_8(src + 8, lss, dst + 8 * lds, lds);
    tfc_transpose8_8(src + 8 * lss, lss, dst + 8, lds);
    tfc_transpose8_8(src + 8 * lss + 8, lss, dst + 8 * lds + 8, lds);
}

/* tfc_transpose16 of a tile of float16 (half 1) or bfloat16 (half 2) values, each widened
   to float32 exactly as it is loaded (vcvtph2ps; a bfloat16's bits shifted into a float32's
   upper half), for a half-type filter's taps in the channel tiles' groups (conv_core.pxi's
   _tap_block with ``widen``). */
static __attribute__((target("avx512f"))) void tfc_transpose16_wide(
        const uint16_t *src, Py_ssize_t lss, float *dst, Py_ssize_t lds, int half) {
    __m512 r[16];
    for (int i = 0; i < 16; i++) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(src + i * lss));
        r[i] = half == 1 ? _mm512_cvtph_ps(h)
                         : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    tfc_transpose16_store(r, dst, lds);
}

/* y's 16 lanes rounded to float16 (half 1) or bfloat16 (half 2), one 16-bit value in each
   32-bit lane: the same bits as half.h's tfc_f2h and tfc_f2bf (round to nearest even; a NaN
   becomes 0x7e00 or 0x7fc0 with its sign), in AVX512F instructions. */
static inline __attribute__((target("avx512f"), always_inline)) __m512i tfc_round_half(
        __m512 y, int half) {
    __m512i u = _mm512_castps_si512(y);
    __m512i sign = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x8000));
    __mmask16 nan = _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q);
    __m512i r;
    if (half == 2) {
        __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)),
                                               odd), 16);
        r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(sign, _mm512_set1_epi32(0x7fc0)));
    } else {
        r = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT |
                                                     _MM_FROUND_NO_EXC));
        r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(sign, _mm512_set1_epi32(0x7e00)));
    }
    return r;
}

/* y's 16 lanes rounded (tfc_round_half), the lanes in ``keep`` stored at out. */
static inline __attribute__((target("avx512f"), always_inline)) void tfc_store_half(
        uint16_t *out, __m512 y, __mmask16 keep, int half) {
    _mm512_mask_cvtepi32_storeu_epi16(out, keep, tfc_round_half(y, half));
}

/* n float32 values from s into d, copied (half 0, d float32) or rounded to float16 (1) or
   bfloat16 (2) as tfc_round_half rounds them, in AVX-512 instructions, a 64-byte line of d at a
   time, and with ``stream`` by streaming stores (TFC_STORE_STREAM); the values before d's
   first line boundary and after its last by half.h's tfc_from_f32 (the same bits) or memcpy. */
static __attribute__((target("avx512f"))) void tfc_store_row(const float *s, void *d,
                                                               Py_ssize_t n, int half,
                                                               int stream) {
    Py_ssize_t size = half ? 2 : 4, per = 64 / size, i;
    Py_ssize_t head = (Py_ssize_t)(((64 - ((uintptr_t)d & 63)) & 63) / size);
    float *f = (float *)d;
    uint16_t *h = (uint16_t *)d;
    if (head > n) head = n;
    if (half) tfc_from_f32(s, h, head, half == 2);
    else memcpy(f, s, (size_t)head * 4);
    for (i = head; i + per <= n; i += per) {
        if (half) {
            __m256i a = _mm512_cvtepi32_epi16(tfc_round_half(_mm512_loadu_ps(s + i), half));
            __m256i b = _mm512_cvtepi32_epi16(tfc_round_half(_mm512_loadu_ps(s + i + 16), half));
            __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
            if (stream) _mm512_stream_si512((__m512i *)(h + i), v);
            else _mm512_store_si512((__m512i *)(h + i), v);
        } else if (stream) {
            _mm512_stream_ps(f + i, _mm512_loadu_ps(s + i));
        } else {
            _mm512_store_ps(f + i, _mm512_loadu_ps(s + i));
        }
    }
    if (half) tfc_from_f32(s + i, h + i, n - i, half == 2);
    else memcpy(f + i, s + i, (size_t)(n - i) * 4);
    if (stream) _mm_sfence();
}

#else

static int tfc_tiles_built(void) { return 0; }

static void tfc_transpose16(const float *src, Py_ssize_t lss, float *dst, Py_ssize_t lds) {
    (void)src; (void)lss; (void)dst; (void)lds;
}

static void tfc_transpose16_wide(const uint16_t *src, Py_ssize_t lss, float *dst,
                                 Py_ssize_t lds, int half) {
    (void)src; (void)lss; (void)dst; (void)lds; (void)half;
}

static void tfc_transpose16_8(const double *src, Py_ssize_t lss, double *dst, Py_ssize_t lds) {
    (void)src; (void)lss; (void)dst; (void)lds;
}

static void tfc_store_row(const float *s, void *d, Py_ssize_t n, int half, int stream) {
    (void)s; (void)d; (void)n; (void)half; (void)stream;
}

#endif
#endif
