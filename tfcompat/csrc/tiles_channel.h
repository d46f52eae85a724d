/* The conv's channel tiles (conv_tiles.pxi's _tile_phase_band): dx pixels of one stride phase summed
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
 * tiles_common.h's tfc_transpose16 transposes the 16 x 16 tiles of 4-byte values that lay out
 * its filter (conv_core.pxi's _tap_block).
 *
 * Compiled for AVX-512F by a function attribute, in both builds of the extension; the Python
 * layer runs it only where NumPy reports AVX512F and tfc_tiles_built() says it is compiled.
 */
#ifndef TFCOMPAT_TILES_CHANNEL_H
#define TFCOMPAT_TILES_CHANNEL_H

#include "tiles_common.h"

#define TFC_TILE_M 6
#define TFC_TILE_M2 8
#define TFC_TILE_C 64
#ifndef TFC_TILE_KC
#define TFC_TILE_KC 128
#endif
#define TFC_TILE_SEGS 8

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

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

#else

static void tfc_tile_rows(const float *const *rows, Py_ssize_t nrows, const int32_t *cols,
                          const float *const *b, Py_ssize_t taps, Py_ssize_t OW, Py_ssize_t K,
                          Py_ssize_t cb, Py_ssize_t ce, Py_ssize_t C, const float *zero,
                          const float **a, float *buf, void *out, Py_ssize_t width,
                          Py_ssize_t ps, Py_ssize_t rs, int half) {
    (void)rows; (void)nrows; (void)cols; (void)b; (void)taps; (void)OW; (void)K; (void)cb;
    (void)ce; (void)C; (void)zero; (void)a; (void)buf; (void)out; (void)width; (void)ps; (void)rs;
    (void)half;
}

#endif
#endif
