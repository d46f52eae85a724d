/* A benchmark instrument, not a kernel: the memory floor of a resampling backward.
 *
 * Chunk k of an array of n floats is [k*n/chunks, (k+1)*n/chunks). Every float of the source
 * chunk is read once (8-lane loads, four independent ORs) and every float of the destination
 * chunk is written once with the OR of the source chunk's bits: a result that needs every read
 * and no arithmetic whose speed or order could matter.
 */
#ifndef TFCOMPAT_STREAM_H
#define TFCOMPAT_STREAM_H

#include <stdint.h>
#include <string.h>
#include "simd.h"

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

#endif
