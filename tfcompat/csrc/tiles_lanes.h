/* The conv's lane tiles (conv_tiles.pxi's _tile_phase_band with ``lanes``), for few input
 * channels: described at tfc_oc_rows's comment below. Compiled for AVX-512F by a function
 * attribute, in both builds of the extension; the Python layer runs it only where NumPy reports
 * AVX512F and tfc_tiles_built() says it is compiled.
 */
#ifndef TFCOMPAT_TILES_LANES_H
#define TFCOMPAT_TILES_LANES_H

#include "tiles_common.h"

/* the most input channels of the lane tiles, and the most output channels whose dx pixels
   share a vector (both below); defined on every build, as conv_tiles.pxi reads them */
#define TFC_OC_MAX_C 10
#define TFC_PX_MAX_K 8

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

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

/* storage: 0 float32, 1 float16, 2 bfloat16 (conv_core.pxi's STORE_*); K not a multiple of 16
   runs the version with a partial last vector (3-5); K <= TFC_PX_MAX_K, with ``pixels``,
   tfc_px_row (the same sums, in the same order) */
static void tfc_oc_rows(const void *const *rows, const int32_t *cols, const float *const *b,
                        Py_ssize_t taps, Py_ssize_t OW, Py_ssize_t K, Py_ssize_t C, void *out,
                        Py_ssize_t width, Py_ssize_t ps, int storage, int pixels) {
    if (pixels && K <= TFC_PX_MAX_K)
        tfc_px_fns[storage][K == 1 ? 1 : K == 2 ? 2 : K == 4 ? 3 : K == 8 ? 4 : 0][C](
            rows, cols, b, taps, OW, out, width, ps, (int)K);
    else
        tfc_oc_fns[K % 16 ? storage + 3 : storage][C](rows, cols, b, taps, OW, K, out, width,
                                                      ps);
}

#else

static void tfc_oc_rows(const void *const *rows, const int32_t *cols, const float *const *b,
                        Py_ssize_t taps, Py_ssize_t OW, Py_ssize_t K, Py_ssize_t C, void *out,
                        Py_ssize_t width, Py_ssize_t ps, int storage, int pixels) {
    (void)rows; (void)cols; (void)b; (void)taps; (void)OW; (void)K; (void)C; (void)out;
    (void)width; (void)ps; (void)storage; (void)pixels;
}

#endif
#endif
