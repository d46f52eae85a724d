/* The output buffer pool: a NumPy NEP 49 data-memory handler.
 *
 * A fresh large np.empty is mmapped, and its first touch costs page faults that, on some
 * virtual machines, cost more than the kernel itself and contend between threads. TF avoids
 * this with its BFC allocator; we keep a few recently freed large blocks of *our outputs* and
 * hand them out again. The handler is installed only around our own np.empty calls (NumPy
 * scopes handlers with a context variable), so no other array in the process is affected.
 * Every block carries a 64-byte header (its capacity and whether it is pooled), so that a
 * block is freed the way it was allocated whatever handler is current when it dies, and
 * every block's data starts on a 64-byte boundary, small ones too.
 */
#ifndef TFCOMPAT_POOL_H
#define TFCOMPAT_POOL_H

#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <Python.h>
#include <numpy/arrayobject.h>

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
        /* 64-byte aligned as the pooled blocks are: a conv's filter taps come from here, so
           that each vector load of them lies in one cache line (docs/performance.md) */
        void *base = NULL;
        if (posix_memalign(&base, 64, size + TFC_HDR) != 0) return NULL;
        char *p = (char *)base;
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

static void tfc_set_limit(size_t nbytes) {
    tfc_limit = nbytes;
    if (nbytes == 0) tfc_release();
}

static PyDataMem_Handler tfc_handler = {
    "tfcompat_output_pool", 1,
    {NULL, tfc_malloc, tfc_calloc, tfc_realloc, tfc_free}
};

static PyObject *tfc_handler_capsule(void) {
    return PyCapsule_New(&tfc_handler, "mem_handler", NULL);
}

#endif
