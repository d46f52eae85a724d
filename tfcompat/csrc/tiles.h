/* The conv's tile kernel (conv.pxi's _tile_phase_band): dx pixels of one stride phase summed
 * over the phase's taps straight from float32 dy (a half type's widened by the caller), in
 * AVX-512 registers, and stored as float32 or rounded once to float16 or bfloat16.
 *
 * A tile is up to TFC_TILE_M = 6 pixels of one phase row (or of a run of narrow rows, below)
 * by up to TFC_TILE_C = 64 channels: 6 x 4 zmm accumulators, which leave registers for the
 * four filter vectors and a broadcast; a tile 16 channels wide takes up to TFC_TILE_M2 = 8
 * pixels (6 x 1 accumulators could not keep the multiply-adds busy). For each input channel
 * k, every pixel r of the tile adds a[r][k] * b[k][0:64], where a[r] is the dy pixel a tap
 * reads for pixel r and b that tap's [OC, C] filter matrix. A tap that reads outside dy is
 * left out at the tile's first and last pixel (where a padding of one puts it) and reads a row
 * of zeros elsewhere; a row taken alone visits only the taps whose dy row is inside dy. dy is
 * read in place (no gathered copy of it), and each finished tile is stored at its dx
 * position, whatever the stride (no GEMM output to place).
 *
 * The steps (each tap, and each chunk of TFC_TILE_KC input channels of it) run one after the
 * other over every tile of a row, or of a run of rows too narrow to fill tiles of their own
 * (the caller decides), so a step's filter block ([TFC_TILE_KC, 64] floats, 32 KiB) is read
 * from L1 by all of them. Each step sums its products in registers from zero
 * (fused multiply-adds, k ascending) and adds the row's running total, kept in a small buffer,
 * at the end: a dx element is the sum of its steps' partial sums, in step order, as the
 * col2im sums each tap's GEMM, rather than one sum of taps * OC products. The order is fixed
 * by the shapes, so the bits do not depend on the thread count.
 *
 * tfc_transpose16, below, transposes the 16 x 16 tiles of 4-byte values that lay out its filter
 * (and NCHW's dy and dx, conv.pxi's _tap_block).
 *
 * Compiled for AVX-512F by a function attribute, in both builds of the extension; the Python
 * layer runs it only where NumPy reports AVX512F and tfc_tiles_built() says it is compiled.
 */
#ifndef TFCOMPAT_TILES_H
#define TFCOMPAT_TILES_H

#include <Python.h>
#include <string.h>
#include "half.h"

#define TFC_TILE_M 6
#define TFC_TILE_M2 8
#define TFC_TILE_C 64
#ifndef TFC_TILE_KC
#define TFC_TILE_KC 128
#endif
#define TFC_TILE_SEGS 8
/* the most input channels of the tile kernel for few channels, and the most output channels
   whose dx pixels share a vector (both below); defined on every build, as conv.pxi reads them */
#define TFC_OC_MAX_C 10
#define TFC_PX_MAX_K 8
/* tfc_tile_rows's ``half`` for float32 dx stored with non-temporal (streaming) stores: a
   finished tile's whole 64-byte lines go to memory without being read into the cache first
   and without evicting what the cache holds, for a dx too large to stay there (conv.pxi's
   TILE_STREAM_BYTES); the same values as the plain stores */
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
   transposed in registers, for the filter's taps (conv.pxi's _tap_block) and NCHW's
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
   upper half), for a half-type filter's taps in the tile kernel's groups (conv.pxi's
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

/* acc[r * NV + v] += the sum over k < K of ar[r][k] * bg[k * ldb + 16 v ...], for
   R0 <= r < R1 and v < NV (constants after inlining: the accumulators stay in registers). */
static inline __attribute__((target("avx512f"), always_inline)) void tfc_seg(
        __m512 acc[24], const float *const *ar, const float *bg, Py_ssize_t K,
        Py_ssize_t ldb, const int R0, const int R1, const int NV) {
    for (Py_ssize_t k = 0; k < K; k++) {
        __m512 bv[4];
        for (int v = 0; v < NV; v++) bv[v] = _mm512_loadu_ps(bg + k * ldb + 16 * v);
        for (int r = R0; r < R1; r++) {
            __m512 x = _mm512_set1_ps(ar[r][k]);
            for (int v = 0; v < NV; v++)
                acc[r * NV + v] = _mm512_fmadd_ps(x, bv[v], acc[r * NV + v]);
        }
    }
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

/* out[r][16 v ...] = (init[r * ips + 16 v ...] where init is not NULL) + the sum over
   segments g < segs and k < K[g] of a[g * TFC_TILE_M2 + r][k] * b[g][k * ldb + 16 v ...], for
   r < M, v < NV (constants after inlining); of the last vector, only the lanes in ``tail``
   are stored (a C that is not a multiple of 16); with ``half``, out[r] points to float16 (1)
   or bfloat16 (2) values, each sum rounded once (tfc_store_half). Segment g leaves out its
   first row where bit 0 of edge[g] is set and its last where bit 1 is: pixels whose tap reads
   outside dy, which would add zero products (and NaN for an infinite filter value, where the
   col2im adds nothing). */
static inline __attribute__((target("avx512f"), always_inline)) void tfc_tile(
        const float *const *a, const float *const *b, const Py_ssize_t *K, const int *edge,
        int segs, Py_ssize_t ldb, const float *init, Py_ssize_t ips, float *const *out,
        __mmask16 tail, int half, const int M, const int NV) {
    __m512 acc[24];     /* M * NV <= 24 */
    for (int r = 0; r < M; r++)
        for (int v = 0; v < NV; v++) acc[r * NV + v] = _mm512_setzero_ps();
    for (int g = 0; g < segs; g++) {
        const float *const *ar = a + g * TFC_TILE_M2;
        switch (edge[g]) {
            case 0: tfc_seg(acc, ar, b[g], K[g], ldb, 0, M, NV); break;
            case 1: tfc_seg(acc, ar, b[g], K[g], ldb, 1, M, NV); break;
            case 2: tfc_seg(acc, ar, b[g], K[g], ldb, 0, M - 1, NV); break;
            default: tfc_seg(acc, ar, b[g], K[g], ldb, 1, M - 1, NV); break;
        }
    }
    for (int r = 0; r < M; r++)
        for (int v = 0; v < NV; v++) {
            __m512 y = acc[r * NV + v];
            if (init) y = _mm512_add_ps(_mm512_loadu_ps(init + r * ips + 16 * v), y);
            if (half == TFC_STORE_STREAM)
                _mm512_stream_ps(out[r] + 16 * v, y);
            else if (half)
                tfc_store_half((uint16_t *)out[r] + 16 * v, y,
                               v == NV - 1 ? tail : (__mmask16)0xffff, half);
            else if (v == NV - 1)
                _mm512_mask_storeu_ps(out[r] + 16 * v, tail, y);
            else
                _mm512_storeu_ps(out[r] + 16 * v, y);
        }
}

/* tfc_tile for each tile shape, a function of its own, so that the compiler lays out and
   allocates registers for each loop apart from the others' (as cases of one switch, adding
   the 7- and 8-pixel shapes slowed the 2-vector ones: docs/performance.md), with float32's
   stores and the half types' rounding in two copies of its loop, so that float32's has no
   branch; called through tfc_tile_fns[m][nv]: m <= TFC_TILE_M pixels by nv = 1..4 vectors of
   16 channels, or up to TFC_TILE_M2 pixels by one. */
typedef void (*tfc_tile_fn)(const float *const *, const float *const *, const Py_ssize_t *,
                            const int *, int, Py_ssize_t, const float *, Py_ssize_t,
                            float *const *, __mmask16, int);
#define TFC_TILE_FN(m, nv) \
    static __attribute__((target("avx512f"), noinline)) void tfc_tile_##m##_##nv( \
            const float *const *a, const float *const *b, const Py_ssize_t *K, const int *edge, \
            int segs, Py_ssize_t ldb, const float *init, Py_ssize_t ips, float *const *out, \
            __mmask16 tail, int half) { \
        if (half) tfc_tile(a, b, K, edge, segs, ldb, init, ips, out, tail, half, (m), (nv)); \
        else tfc_tile(a, b, K, edge, segs, ldb, init, ips, out, tail, 0, (m), (nv)); \
    }
#define TFC_TILE_FNS(m) TFC_TILE_FN(m, 1) TFC_TILE_FN(m, 2) TFC_TILE_FN(m, 3) TFC_TILE_FN(m, 4)
TFC_TILE_FNS(1) TFC_TILE_FNS(2) TFC_TILE_FNS(3) TFC_TILE_FNS(4) TFC_TILE_FNS(5) TFC_TILE_FNS(6)
TFC_TILE_FN(7, 1) TFC_TILE_FN(8, 1)
#define TFC_TILE_ROW(m) {NULL, tfc_tile_##m##_1, tfc_tile_##m##_2, tfc_tile_##m##_3, \
                         tfc_tile_##m##_4}
static const tfc_tile_fn tfc_tile_fns[TFC_TILE_M2 + 1][5] = {
    {NULL}, TFC_TILE_ROW(1), TFC_TILE_ROW(2), TFC_TILE_ROW(3), TFC_TILE_ROW(4), TFC_TILE_ROW(5),
    TFC_TILE_ROW(6), {NULL, tfc_tile_7_1}, {NULL, tfc_tile_8_1}};

/* nrows phase rows of width pixels each, as one run of pixels q = jj * width + i (row jj,
   column i): channels cb <= c < min(ce, C) (cb a multiple of TFC_TILE_C, ce a multiple of 16
   below C + 16), into out + jj * rs + i * ps + c. Tap t < taps reads, for row jj, dy row
   rows[jj * taps + t] (OW pixels of K values; NULL: a row outside dy) at column i + cols[t];
   outside dy it reads ``zero`` (K zeros). b[t] is the tap's filter [K, Cp] (Cp: C rounded up
   to a multiple of 16, the columns from C on zeros) from column cb on, in blocks of
   TFC_TILE_C columns ([K, 64] each, the last one narrower), block c0 at b[t] + K * (c0 - cb).
   The segments (each tap's input channels, in chunks of at most TFC_TILE_KC) are grouped
   into steps of at most TFC_TILE_KC channels and TFC_TILE_SEGS segments, in order; each step
   runs over every tile of the run, so a tile may take pixels of two rows. Scratch: ``a``,
   TFC_TILE_SEGS * TFC_TILE_M2 pointers; ``buf``, nrows * width * TFC_TILE_C floats. ``half``:
   out holds float32 (0) or float16 (1) or bfloat16 (2) values (positions and strides in
   values), the last step's sums each rounded once; or float32 streamed (TFC_STORE_STREAM),
   where out, ps and rs keep every vector on a 64-byte boundary and C is a multiple of 16
   (else stored as 0 stores it). */
static inline __attribute__((always_inline)) void tfc_tile_rows_body(
        const float *const *rows, Py_ssize_t nrows, const int32_t *cols, const float *const *b,
        Py_ssize_t taps, Py_ssize_t OW, Py_ssize_t K, Py_ssize_t cb, Py_ssize_t ce,
        Py_ssize_t C, const float *zero, const float **a, float *buf, void *out_,
        Py_ssize_t width, Py_ssize_t ps, Py_ssize_t rs, const int one_row, int half) {
    Py_ssize_t pixels = nrows * width;
    /* float32 streamed (TFC_STORE_STREAM) where every vector stored is a whole 64-byte line */
    int nt = half == TFC_STORE_STREAM && C % 16 == 0 && ((uintptr_t)out_ & 63) == 0
             && ps % 16 == 0 && rs % 16 == 0;
    if (half == TFC_STORE_STREAM) half = 0;
    Py_ssize_t chunks = (K + TFC_TILE_KC - 1) / TFC_TILE_KC, total = taps * chunks;
    float *out = (float *)out_;
    uint16_t *out16 = (uint16_t *)out_;
    if (total == 0) {   /* no tap reaches these rows: zeros, whose bits are zero in each type */
        for (Py_ssize_t jj = 0; jj < nrows; jj++)
            for (Py_ssize_t i = 0; i < width; i++)
                memset((char *)out_ + (jj * rs + i * ps + cb) * (half ? 2 : 4), 0,
                       ((ce < C ? ce : C) - cb) * (half ? 2 : 4));
        return;
    }
    for (Py_ssize_t c0 = cb; c0 < ce; c0 += TFC_TILE_C) {
        Py_ssize_t bw = ce - c0 < TFC_TILE_C ? ce - c0 : TFC_TILE_C;
        /* the lanes of the block's last vector that are dx channels: the last step's stores */
        int lanes = (int)((C - c0 < bw ? C - c0 : bw) - (bw - 16));
        __mmask16 tail = (__mmask16)((1u << lanes) - 1);
        /* tiles of up to 6 pixels, or 8 for one vector (enough accumulators to keep the
           multiply-adds busy, few enough pointers to stay in registers), as even as they can
           be (6, 6, 5, 5, 5, 5 for 32 pixels): a narrow last tile would have too few */
        Py_ssize_t mmax = bw > 16 ? TFC_TILE_M : TFC_TILE_M2;
        Py_ssize_t tiles = (pixels + mmax - 1) / mmax;
        Py_ssize_t per_tile = tiles ? pixels / tiles : 0, extra = tiles ? pixels % tiles : 0;
        Py_ssize_t g0 = 0;      /* the step's first segment */
        while (g0 < total) {
            const float *bs[TFC_TILE_SEGS];
            int edge[TFC_TILE_SEGS];
            Py_ssize_t ks[TFC_TILE_SEGS], k0s[TFC_TILE_SEGS], ts[TFC_TILE_SEGS], sum = 0;
            int segs = 0;
            while (g0 + segs < total && segs < TFC_TILE_SEGS) {
                Py_ssize_t g = g0 + segs, t = g / chunks, k0 = (g % chunks) * TFC_TILE_KC;
                Py_ssize_t kc = K - k0 < TFC_TILE_KC ? K - k0 : TFC_TILE_KC;
                if (segs && sum + kc > TFC_TILE_KC) break;
                ts[segs] = t; k0s[segs] = k0; ks[segs] = kc;
                bs[segs] = b[t] + K * (c0 - cb) + k0 * bw;
                sum += kc;
                segs++;
            }
            int first = g0 == 0, last = g0 + segs == total;
            /* the first tile's pixel p0 is at row jj0, column i0 */
            for (Py_ssize_t q = 0, p0 = 0, jj0 = 0, i0 = 0; q < tiles; q++) {
                int m = (int)(per_tile + (q < extra));
                float *dst[TFC_TILE_M2];
                Py_ssize_t pj[TFC_TILE_M2], pi[TFC_TILE_M2];  /* the tile's pixels' rows, columns */
                for (Py_ssize_t r = 0, jj = jj0, i = i0; r < m; r++) {
                    pj[r] = jj * taps; pi[r] = i;
                    /* the first step starts the running total, the last one stores it in dx */
                    dst[r] = !last ? buf + (p0 + r) * bw
                             : half ? (float *)(out16 + jj * rs + i * ps + c0)
                             : out + jj * rs + i * ps + c0;
                    if (++i == width) { i = 0; jj++; }
                }
                for (int j = 0; j < segs; j++) {
                    const float *const *rt = rows + ts[j];
                    const float *z = zero + k0s[j];
                    Py_ssize_t cx = cols[ts[j]], off = k0s[j];
                    const float **aj = a + j * TFC_TILE_M2;
                    if (one_row) {      /* the tile's pixels side by side in one row */
                        const float *row = rt[0];
                        size_t x0 = (size_t)(i0 + cx);      /* below 0 wraps above OW */
                        for (int r = 0; r < m; r++)
                            aj[r] = row && x0 + r < (size_t)OW ? row + (x0 + r) * K + off : z;
                    } else {
                        for (int r = 0; r < m; r++) {
                            const float *row = rt[pj[r]];
                            size_t x = (size_t)(pi[r] + cx);
                            aj[r] = row && x < (size_t)OW ? row + x * K + off : z;
                        }
                    }
                    /* a first or last pixel outside dy is left out of the sums (tfc_tile) */
                    edge[j] = (aj[0] == z) | ((aj[m - 1] == z) << 1);
                }
                tfc_tile_fns[m][bw / 16](a, bs, ks, edge, segs, bw, first ? NULL : buf + p0 * bw,
                                         bw, dst, last ? tail : (__mmask16)0xffff,
                                         last ? (nt ? TFC_STORE_STREAM : half) : 0);
                p0 += m;
                for (i0 += m; i0 >= width; i0 -= width) jj0++;
            }
            g0 += segs;
        }
    }
    if (nt) _mm_sfence();   /* the streamed stores, ordered before the threads' barrier */
}

static void tfc_tile_rows(const float *const *rows, Py_ssize_t nrows, const int32_t *cols,
                          const float *const *b, Py_ssize_t taps, Py_ssize_t OW, Py_ssize_t K,
                          Py_ssize_t cb, Py_ssize_t ce, Py_ssize_t C, const float *zero,
                          const float **a, float *buf, void *out, Py_ssize_t width,
                          Py_ssize_t ps, Py_ssize_t rs, int half) {
    /* one row in a version of its own: its tiles' pixels are side by side, fewer steps to
       each pointer */
    if (nrows == 1)
        tfc_tile_rows_body(rows, 1, cols, b, taps, OW, K, cb, ce, C, zero, a, buf, out, width,
                           ps, rs, 1, half);
    else
        tfc_tile_rows_body(rows, nrows, cols, b, taps, OW, K, cb, ce, C, zero, a, buf, out,
                           width, ps, rs, 0, half);
}

/* The tile kernel for few input channels (C <= TFC_OC_MAX_C): a tile of 16 channels would be
   mostly zeros there, so these tiles put dy's output channels in the lanes instead. One dx row
   of a phase, width pixels, into out + i * ps + c: for each tile of P pixels and each tap t
   (its dy row rows[t], never NULL here, read at column i + cols[t]; a pixel whose tap reads
   outside dy takes nothing from it, as in the col2im), each 16 output channels o of dy's
   pixel are multiplied by the tap's b[t][c * Kp + o] ([C, Kp]: the filter's own layout, K
   rounded up to a multiple Kp of 16, zeros from K on) into acc[r][c], 16 lanes, in the order
   of the taps and then of o; each dx value is the sum of its accumulator's 16 lanes
   (_mm512_reduce_add_ps). dy may end in a partial vector of K % 16 output channels (storage
   3-5, below), read by masked loads: its lanes from K % 16 on are zeros, as are the filter's,
   so they add exact zeros, and nothing past a pixel's K values is read. K <= TFC_PX_MAX_K puts
   16 / K dx pixels in a vector instead (tfc_px_row). */
/* loops over a tile's pixels and channels unrolled whole, so that its accumulators are
   registers: left to its size limits, GCC unrolled fewer of them in the version with a masked
   last vector and kept the accumulators in memory */
#define TFC_UNROLL _Pragma("GCC unroll 24")
/* 16 of dy's values from p (S: 0 float32, 1 float16, 2 bfloat16 bits; 3-5 the same with a
   partial last vector), widened exactly; with PART, only the first n <= 16 are read (mask m:
   n bits) and the other lanes are zeros, 16-bit values (n < 16) by a masked load of n / 2
   pairs and, for odd n, the last one put in its lane (AVX512F has no 16-bit masked load) */
static inline __attribute__((target("avx512f"), always_inline)) __m512 tfc_oc_load(
        const void *p, const int S, const int PART, __mmask16 m, Py_ssize_t n) {
    if (S == 0 || S == 3)
        return PART ? _mm512_maskz_loadu_ps(m, p) : _mm512_loadu_ps((const float *)p);
    __m256i h;
    if (PART) {
        __m512i v = _mm512_maskz_loadu_epi32((__mmask16)((1u << (n >> 1)) - 1), p);
        if (n & 1)
            v = _mm512_mask_mov_epi32(v, (__mmask16)(1u << (n >> 1)),
                                      _mm512_set1_epi32(((const uint16_t *)p)[n - 1]));
        h = _mm512_castsi512_si256(v);
    } else {
        h = _mm256_loadu_si256((const __m256i *)p);
    }
    if (S == 1 || S == 4) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* acc[r * C + c] += px[r][o + j] * w[c][j] for j < 16, r < P and c < C, but pixels whose
   px[r] is NULL (EDGE) take nothing; px[r] holds dy's values of storage S, element o at
   px[r] + o * size; PART: only the first n of them (tfc_oc_load) */
static inline __attribute__((target("avx512f"), always_inline)) void tfc_oc_chunk(
        __m512 acc[24], const char *const *px, const __m512 *w, Py_ssize_t o, const int C,
        const int P, const int EDGE, const int S, const int PART, Py_ssize_t n) {
    const int size = S == 0 || S == 3 ? 4 : 2;
    __mmask16 m = (__mmask16)((1u << n) - 1);
    TFC_UNROLL
    for (int r = 0; r < P; r++) {
        if (EDGE && !px[r]) continue;
        __m512 y = tfc_oc_load(px[r] + o * size, S, PART, m, n);
        /* in a register: the compiler would fold the load into each channel's multiply-add,
           loading it C times (dy is rarely on a 64-byte boundary, so each load spans two
           cache lines) */
        __asm__("" : "+v"(y));
        TFC_UNROLL
        for (int c = 0; c < C; c++)
            acc[r * C + c] = _mm512_fmadd_ps(y, w[c], acc[r * C + c]);
    }
}

/* acc[r * C + c] += the sum over o < K (16 at a time) of px[r][o] * bt[c * Kp + o], for
   r < P and c < C, but pixels whose px[r] is NULL (EDGE) take nothing; px[r] holds dy's
   values of storage S. S = 3-5: dy's last vector is partial, read by masked loads (the
   filter's is whole, zeros past K). */
static inline __attribute__((target("avx512f"), always_inline)) void tfc_oc_tap(
        __m512 acc[24], const char *const *px, const float *bt, Py_ssize_t K, const int C,
        const int P, const int EDGE, const int S) {
    const Py_ssize_t Kp = (K + 15) & ~(Py_ssize_t)15;
    Py_ssize_t o = 0;
    /* float32 with a partial vector: every vector by a masked load, in one loop (faster than
       a loop of whole vectors and a last one) */
    for (; S == 3 ? o < K : o + 16 <= K; o += 16) {
        __m512 w[TFC_OC_MAX_C];
        TFC_UNROLL
        for (int c = 0; c < C; c++) w[c] = _mm512_loadu_ps(bt + c * Kp + o);
        tfc_oc_chunk(acc, px, w, o, C, P, EDGE, S, S == 3, K - o < 16 ? K - o : 16);
    }
    if (S >= 4 && o < K) {
        __m512 w[TFC_OC_MAX_C];
        TFC_UNROLL
        for (int c = 0; c < C; c++) w[c] = _mm512_loadu_ps(bt + c * Kp + o);
        tfc_oc_chunk(acc, px, w, o, C, P, EDGE, S, 1, K - o);
    }
}

/* rows[t] and out hold values of storage S (0 or 3 float32, 1 or 4 float16, 2 or 5 bfloat16;
   dx rounded once from the float32 sum) */
static inline __attribute__((target("avx512f"), always_inline)) void tfc_oc_row(
        const void *const *rows, const int32_t *cols, const float *const *b, Py_ssize_t taps,
        Py_ssize_t OW, Py_ssize_t K, void *out, Py_ssize_t width, Py_ssize_t ps, const int C,
        const int P, const int S) {
    const int size = S == 0 || S == 3 ? 4 : 2;
    for (Py_ssize_t i0 = 0; i0 < width; i0 += P) {
        __m512 acc[24];     /* P * C <= 24 */
        TFC_UNROLL
        for (int q = 0; q < P * C; q++) acc[q] = _mm512_setzero_ps();
        for (Py_ssize_t t = 0; t < taps; t++) {
            const char *px[8], *row = (const char *)rows[t];
            Py_ssize_t x0 = i0 + cols[t];
            if (i0 + P <= width && x0 >= 0 && x0 + P <= OW) {  /* every pixel inside dy */
                TFC_UNROLL
                for (int r = 0; r < P; r++) px[r] = row + (x0 + r) * K * size;
                tfc_oc_tap(acc, px, b[t], K, C, P, 0, S);
            } else {    /* pixels past the row's end, or whose tap reads outside dy */
                TFC_UNROLL
                for (int r = 0; r < P; r++)
                    px[r] = i0 + r < width && x0 + r >= 0 && x0 + r < OW
                            ? row + (x0 + r) * K * size : NULL;
                tfc_oc_tap(acc, px, b[t], K, C, P, 1, S);
            }
        }
        TFC_UNROLL
        for (int r = 0; r < P; r++) {
            if (i0 + r >= width) break;
            TFC_UNROLL
            for (int c = 0; c < C; c++) {
                float v = _mm512_reduce_add_ps(acc[r * C + c]);
                Py_ssize_t at = (i0 + r) * ps + c;
                if (S == 0 || S == 3) ((float *)out)[at] = v;
                else if (S == 1 || S == 4) ((uint16_t *)out)[at] = tfc_f2h(v);
                else ((uint16_t *)out)[at] = tfc_f2bf(v);
            }
        }
    }
}

/* tfc_oc_row for each C, a function of its own (see tfc_tile_fns), P pixels a tile: enough
   accumulators to keep the multiply-adds busy, at most 8 dy pointers */
typedef void (*tfc_oc_fn)(const void *const *, const int32_t *, const float *const *,
                          Py_ssize_t, Py_ssize_t, Py_ssize_t, void *, Py_ssize_t, Py_ssize_t);
#define TFC_OC_FN(c, p, s) \
    static __attribute__((target("avx512f"), noinline)) void tfc_oc_row_##c##_##s( \
            const void *const *rows, const int32_t *cols, const float *const *b, \
            Py_ssize_t taps, Py_ssize_t OW, Py_ssize_t K, void *out, Py_ssize_t width, \
            Py_ssize_t ps) { \
        tfc_oc_row(rows, cols, b, taps, OW, K, out, width, ps, (c), (p), (s)); \
    }
#define TFC_OC_FNS(s) \
    TFC_OC_FN(1, 8, s) TFC_OC_FN(2, 8, s) TFC_OC_FN(3, 8, s) TFC_OC_FN(4, 6, s) \
    TFC_OC_FN(5, 4, s) TFC_OC_FN(6, 4, s) TFC_OC_FN(7, 3, s) TFC_OC_FN(8, 2, s) \
    TFC_OC_FN(9, 2, s) TFC_OC_FN(10, 2, s)
TFC_OC_FNS(0) TFC_OC_FNS(1) TFC_OC_FNS(2) TFC_OC_FNS(3) TFC_OC_FNS(4) TFC_OC_FNS(5)
#define TFC_OC_ROW(s) {NULL, tfc_oc_row_1_##s, tfc_oc_row_2_##s, tfc_oc_row_3_##s, \
                       tfc_oc_row_4_##s, tfc_oc_row_5_##s, tfc_oc_row_6_##s, tfc_oc_row_7_##s, \
                       tfc_oc_row_8_##s, tfc_oc_row_9_##s, tfc_oc_row_10_##s}
static const tfc_oc_fn tfc_oc_fns[6][TFC_OC_MAX_C + 1] = {
    TFC_OC_ROW(0), TFC_OC_ROW(1), TFC_OC_ROW(2), TFC_OC_ROW(3), TFC_OC_ROW(4), TFC_OC_ROW(5)};

/* tfc_px_row: tfc_oc_row with K <= TFC_PX_MAX_K output channels, whose accumulators there
   would leave most of their 16 lanes zeros. Here a vector holds P = 16 / K pixels of the row
   side by side in its first P * K lanes, each pixel its K output channels, V vectors a tile.
   Per tap, dy's values for those pixels are P * K consecutive values (its pixels are K values
   apart, of storage S: 0 float32, 1 float16, 2 bfloat16, widened exactly), read by one load
   (a masked one where a pixel is missing, at a row's ends for 16-bit values one by one),
   and multiplied lane by lane by the tap's weights for channel c (b[t][c * 16 + o], repeated
   for each pixel) into that channel's accumulator; the lanes of a pixel past the row's end,
   or whose tap reads outside dy, are masked off and take nothing. Each dx value is then the
   sum of its pixel's K lanes, added in _mm512_reduce_add_ps's order over a vector whose lanes
   from K on are zeros (lanes i and i + 4, then i and i + 2, then i and i + 1; GCC's
   avx512fintrin.h), which is what tfc_oc_row computes, and a half type's rounded once: the
   same bits. */

/* part[l] = h[l] widened for lo <= l < hi, zeros elsewhere (AVX512F has no 16-bit masked
   load); out of line, as are the stores below: edges only, kept out of the unrolled tiles */
static __attribute__((noinline)) void tfc_px_widen(const uint16_t *h, Py_ssize_t lo,
                                                    Py_ssize_t hi, int bf, float *part) {
    memset(part, 0, 16 * sizeof(float));
    tfc_to_f32(h + lo, part + lo, hi - lo, bf);
}

/* out[at + j * ps] = vals[j] for j < n, of storage S (a half type rounded once, as
   tfc_oc_row rounds) */
static __attribute__((noinline)) void tfc_px_store(const float *vals, Py_ssize_t n, void *out,
                                                    Py_ssize_t at, Py_ssize_t ps, int S) {
    for (Py_ssize_t j = 0; j < n; j++, at += ps) {
        if (S == 0) ((float *)out)[at] = vals[j];
        else if (S == 1) ((uint16_t *)out)[at] = tfc_f2h(vals[j]);
        else ((uint16_t *)out)[at] = tfc_f2bf(vals[j]);
    }
}

/* The lanes of a call of tfc_px_row with K output channels: P = 16 / K pixels a vector in
   its first L = P * K lanes, lane l output channel l % K of pixel l / K. rep: the lane of the
   filter's [16] row each lane takes (l % K); up4, up2, up1: lane l + 4, + 2, + 1; a, b, c:
   the lanes that add lane l + 4, + 2 and + 1 in each pixel's sum (of the channels i = l % K
   with i + 4 < K; i < 2 and i + 2 < K; i = 0 and K > 1), firsts: each pixel's first lane. */
typedef struct {
    int P, L;
    __mmask16 full, a, b, c, firsts;
    __m512i rep, up4, up2, up1;
} tfc_px_lanes;

static inline __attribute__((target("avx512f"), always_inline)) tfc_px_lanes tfc_px_layout(
        int K) {
    tfc_px_lanes z;
    int32_t rep[16], up4[16], up2[16], up1[16];
    z.P = 16 / K;
    z.L = z.P * K;
    z.full = (__mmask16)(z.L == 16 ? 0xFFFF : (1u << z.L) - 1);
    z.a = z.b = z.c = z.firsts = 0;
    for (int l = 0; l < 16; l++) {
        int i = l % K;
        rep[l] = i;
        up4[l] = l + 4 < 16 ? l + 4 : 15;
        up2[l] = l + 2 < 16 ? l + 2 : 15;
        up1[l] = l + 1 < 16 ? l + 1 : 15;
        if (l >= z.L) continue;
        if (i + 4 < K) z.a |= (__mmask16)(1u << l);
        if (i < 2 && i + 2 < K) z.b |= (__mmask16)(1u << l);
        if (i == 0 && K > 1) z.c |= (__mmask16)(1u << l);
        if (i == 0) z.firsts |= (__mmask16)(1u << l);
    }
    z.rep = _mm512_loadu_si512(rep);
    z.up4 = _mm512_loadu_si512(up4);
    z.up2 = _mm512_loadu_si512(up2);
    z.up1 = _mm512_loadu_si512(up1);
    return z;
}

/* each pixel's sum of its K lanes into its first lane, in _mm512_reduce_add_ps's order over
   a vector whose lanes from K on are zeros (its adds of zeros are exact): lanes i and i + 4,
   then i and i + 2, then i and i + 1 */
static inline __attribute__((target("avx512f"), always_inline)) __m512 tfc_px_sum(
        __m512 v, const tfc_px_lanes *z) {
    if (z->a) v = _mm512_mask_add_ps(v, z->a, v, _mm512_permutexvar_ps(z->up4, v));
    if (z->b) v = _mm512_mask_add_ps(v, z->b, v, _mm512_permutexvar_ps(z->up2, v));
    if (z->c) v = _mm512_mask_add_ps(v, z->c, v, _mm512_permutexvar_ps(z->up1, v));
    return v;
}

/* L of dy's values of storage S at p, widened, zeros in the other lanes */
static inline __attribute__((target("avx512f"), always_inline)) __m512 tfc_px_load(
        const char *p, const tfc_px_lanes *z, const int S) {
    if (z->L == 16) return tfc_oc_load(p, S, 0, 0, 16);
    if (S == 0) return _mm512_maskz_loadu_ps(z->full, p);
    return tfc_oc_load(p, S, 1, z->full, z->L);
}

static inline __attribute__((target("avx512f"), always_inline)) void tfc_px_row(
        const void *const *rows, const int32_t *cols, const float *const *b, Py_ssize_t taps,
        Py_ssize_t OW, void *out, Py_ssize_t width, Py_ssize_t ps, int kr, const int KC,
        const int C, const int V, const int S) {
    /* K known when compiled (1, 2, 4, 8: the index arithmetic and lane tables fold), else
       (KC = 0) kr */
    const int K = KC ? KC : kr, size = S == 0 ? 4 : 2;
    const tfc_px_lanes z = tfc_px_layout(K);
    const int P = z.P;
    for (Py_ssize_t i0 = 0; i0 < width; i0 += P * V) {
        __m512 acc[16];     /* V * C <= 16 */
        TFC_UNROLL
        for (int q = 0; q < V * C; q++) acc[q] = _mm512_setzero_ps();
        for (Py_ssize_t t = 0; t < taps; t++) {
            const char *row = (const char *)rows[t];
            __m512 w[TFC_OC_MAX_C];
            TFC_UNROLL
            for (int c = 0; c < C; c++)
                w[c] = K == 1 ? _mm512_set1_ps(b[t][c * 16])
                              : _mm512_permutexvar_ps(z.rep, _mm512_loadu_ps(b[t] + c * 16));
            Py_ssize_t x0 = i0 + cols[t];
            if (i0 + P * V <= width && x0 >= 0 && x0 + P * V <= OW) {  /* all inside dy */
                TFC_UNROLL
                for (int v = 0; v < V; v++) {
                    __m512 y = tfc_px_load(row + (x0 + P * v) * K * size, &z, S);
                    TFC_UNROLL
                    for (int c = 0; c < C; c++)
                        acc[v * C + c] = _mm512_fmadd_ps(y, w[c], acc[v * C + c]);
                }
                continue;
            }
            TFC_UNROLL
            for (int v = 0; v < V; v++) {
                Py_ssize_t i = i0 + P * v, x = i + cols[t];
                /* pixels lo <= j < hi: pixel i + j in the row and dy's x + j inside dy */
                Py_ssize_t lo = x < 0 ? -x : 0, hi = width - i;
                if (OW - x < hi) hi = OW - x;
                if (hi > P) hi = P;
                if (hi <= lo) continue;
                __mmask16 m = (__mmask16)(((1u << hi * K) - 1) & ~((1u << lo * K) - 1));
                __m512 y;
                if (m == z.full) {
                    y = tfc_px_load(row + x * K * size, &z, S);
                } else if (S == 0) {
                    /* masked-off lanes are not read (no fault), so they may lie outside dy */
                    y = _mm512_maskz_loadu_ps(m, (const float *)row + x * K);
                } else {
                    float part[16];
                    tfc_px_widen((const uint16_t *)row + x * K, lo * K, hi * K, S == 2, part);
                    y = _mm512_loadu_ps(part);
                }
                TFC_UNROLL
                for (int c = 0; c < C; c++)
                    acc[v * C + c] = _mm512_mask3_fmadd_ps(y, w[c], acc[v * C + c], m);
            }
        }
        TFC_UNROLL
        for (int v = 0; v < V; v++) {
            Py_ssize_t i = i0 + P * v, n = width - i;
            if (n <= 0) break;
            if (n > P) n = P;
            TFC_UNROLL
            for (int c = 0; c < C; c++) {
                /* each pixel's sum in its first lane, the pixels' sums side by side */
                __m512 r = _mm512_maskz_compress_ps(z.firsts, tfc_px_sum(acc[v * C + c], &z));
                if (S == 0 && C == 1 && ps == 1) {
                    _mm512_mask_storeu_ps((float *)out + i, (__mmask16)((1u << n) - 1), r);
                } else {
                    float vals[16];
                    _mm512_storeu_ps(vals, r);
                    tfc_px_store(vals, n, out, i * ps + c, ps, S);
                }
            }
        }
    }
}

/* tfc_px_row for each K of 1, 2, 4 and 8 (0: K = 3, 5, 6 or 7, an argument), C and storage,
   V vectors of pixels a tile: enough independent accumulators to keep the multiply-adds busy
   (K an argument throughout ran 20-40 % slower) */
typedef void (*tfc_px_fn)(const void *const *, const int32_t *, const float *const *,
                          Py_ssize_t, Py_ssize_t, void *, Py_ssize_t, Py_ssize_t, int);
#define TFC_PX_FN(k, c, v, s) \
    static __attribute__((target("avx512f"), noinline)) void tfc_px_row_##k##_##c##_##s( \
            const void *const *rows, const int32_t *cols, const float *const *b, \
            Py_ssize_t taps, Py_ssize_t OW, void *out, Py_ssize_t width, Py_ssize_t ps, \
            int kr) { \
        tfc_px_row(rows, cols, b, taps, OW, out, width, ps, kr, (k), (c), (v), (s)); \
    }
#define TFC_PX_FNS(k, s) \
    TFC_PX_FN(k, 1, 8, s) TFC_PX_FN(k, 2, 8, s) TFC_PX_FN(k, 3, 5, s) TFC_PX_FN(k, 4, 4, s) \
    TFC_PX_FN(k, 5, 3, s) TFC_PX_FN(k, 6, 2, s) TFC_PX_FN(k, 7, 2, s) TFC_PX_FN(k, 8, 2, s) \
    TFC_PX_FN(k, 9, 1, s) TFC_PX_FN(k, 10, 1, s)
#define TFC_PX_STORAGE(s) TFC_PX_FNS(0, s) TFC_PX_FNS(1, s) TFC_PX_FNS(2, s) TFC_PX_FNS(4, s) \
    TFC_PX_FNS(8, s)
TFC_PX_STORAGE(0) TFC_PX_STORAGE(1) TFC_PX_STORAGE(2)
#define TFC_PX_ROW(k, s) {NULL, tfc_px_row_##k##_1_##s, tfc_px_row_##k##_2_##s, \
                          tfc_px_row_##k##_3_##s, tfc_px_row_##k##_4_##s, \
                          tfc_px_row_##k##_5_##s, tfc_px_row_##k##_6_##s, \
                          tfc_px_row_##k##_7_##s, tfc_px_row_##k##_8_##s, \
                          tfc_px_row_##k##_9_##s, tfc_px_row_##k##_10_##s}
#define TFC_PX_ROWS(s) {TFC_PX_ROW(0, s), TFC_PX_ROW(1, s), TFC_PX_ROW(2, s), \
                        TFC_PX_ROW(4, s), TFC_PX_ROW(8, s)}
/* by storage, then K (0: 3, 5, 6, 7), then C */
static const tfc_px_fn tfc_px_fns[3][5][TFC_OC_MAX_C + 1] = {
    TFC_PX_ROWS(0), TFC_PX_ROWS(1), TFC_PX_ROWS(2)};

/* storage: 0 float32, 1 float16, 2 bfloat16 (conv.pxi's STORE_*); K not a multiple of 16 runs
   the version with a partial last vector (3-5); K <= TFC_PX_MAX_K, tfc_px_row */
static void tfc_oc_rows(const void *const *rows, const int32_t *cols, const float *const *b,
                        Py_ssize_t taps, Py_ssize_t OW, Py_ssize_t K, Py_ssize_t C, void *out,
                        Py_ssize_t width, Py_ssize_t ps, int storage) {
    if (K <= TFC_PX_MAX_K)
        tfc_px_fns[storage][K == 1 ? 1 : K == 2 ? 2 : K == 4 ? 3 : K == 8 ? 4 : 0][C](
            rows, cols, b, taps, OW, out, width, ps, (int)K);
    else
        tfc_oc_fns[K % 16 ? storage + 3 : storage][C](rows, cols, b, taps, OW, K, out, width,
                                                      ps);
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

static void tfc_tile_rows(const float *const *rows, Py_ssize_t nrows, const int32_t *cols,
                          const float *const *b, Py_ssize_t taps, Py_ssize_t OW, Py_ssize_t K,
                          Py_ssize_t cb, Py_ssize_t ce, Py_ssize_t C, const float *zero,
                          const float **a, float *buf, void *out, Py_ssize_t width,
                          Py_ssize_t ps, Py_ssize_t rs, int half) {
    (void)rows; (void)nrows; (void)cols; (void)b; (void)taps; (void)OW; (void)K; (void)cb;
    (void)ce; (void)C; (void)zero; (void)a; (void)buf; (void)out; (void)width; (void)ps; (void)rs;
    (void)half;
}

static void tfc_oc_rows(const void *const *rows, const int32_t *cols, const float *const *b,
                        Py_ssize_t taps, Py_ssize_t OW, Py_ssize_t K, Py_ssize_t C, void *out,
                        Py_ssize_t width, Py_ssize_t ps, int storage) {
    (void)rows; (void)cols; (void)b; (void)taps; (void)OW; (void)K; (void)C; (void)out;
    (void)width; (void)ps; (void)storage;
}

static void tfc_store_row(const float *s, void *d, Py_ssize_t n, int half, int stream) {
    (void)s; (void)d; (void)n; (void)half; (void)stream;
}

#endif
#endif
