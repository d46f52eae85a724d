/* A benchmark instrument, not a kernel: this CPU's float32 multiply-add peak.
 *
 * Independent chains of vector fused multiply-adds (acc = acc * b + c), all in registers: no
 * loads, no stores, nothing else in the loop. Enough chains to cover the instruction's latency
 * on the x86-64 cores we know (latency 4-5 cycles, two FMA pipes: 8-10 in flight), and few
 * enough to stay in the registers (32 zmm, 16 ymm). No GEMM or conv multiplies faster than this.
 * With b = 0.5 and c = 1 every chain settles at 2.0: no overflow, no subnormals.
 *
 * Built on x86-64 with GCC or Clang, whatever the flags of the module: each function carries its
 * own target, and the caller runs only the one this CPU supports.
 */
#ifndef TFCOMPAT_PEAK_H
#define TFCOMPAT_PEAK_H

#include <Python.h>

/* float32 operations per round: chains x lanes x 2 (a multiply and an add) */
#define TFC_PEAK_FLOPS_512 (16 * 16 * 2)
#define TFC_PEAK_FLOPS_256 (12 * 8 * 2)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TFC_PEAK_BUILT 1

static __attribute__((target("avx512f"), noinline)) float tfc_fma_rounds_512(Py_ssize_t rounds) {
    __m512 a[16];
    const __m512 b = _mm512_set1_ps(0.5f), c = _mm512_set1_ps(1.0f);
    for (int i = 0; i < 16; i++) a[i] = _mm512_set1_ps((float)i);
    for (Py_ssize_t r = 0; r < rounds; r++) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) a[i] = _mm512_fmadd_ps(a[i], b, c);
    }
    for (int i = 1; i < 16; i++) a[0] = _mm512_add_ps(a[0], a[i]);
    return _mm512_reduce_add_ps(a[0]);
}

static __attribute__((target("avx2,fma"), noinline)) float tfc_fma_rounds_256(Py_ssize_t rounds) {
    __m256 a[12];
    const __m256 b = _mm256_set1_ps(0.5f), c = _mm256_set1_ps(1.0f);
    float s[8];
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    for (Py_ssize_t r = 0; r < rounds; r++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], b, c);
    }
    for (int i = 1; i < 12; i++) a[0] = _mm256_add_ps(a[0], a[i]);
    _mm256_storeu_ps(s, a[0]);
    return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

#else
#define TFC_PEAK_BUILT 0
static float tfc_fma_rounds_512(Py_ssize_t rounds) { (void)rounds; return 0.0f; }
static float tfc_fma_rounds_256(Py_ssize_t rounds) { (void)rounds; return 0.0f; }
#endif

#endif
