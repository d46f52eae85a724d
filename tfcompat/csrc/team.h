/* tfcompat's team of threads: the one way a kernel runs in parallel.
 *
 * A job is split into n shares, fixed by the caller (share s of n: the s-th of n consecutive
 * parts of the work, with its own scratch); every share is computed the same way whichever
 * thread runs it, so results never depend on the threads. The calling thread takes shares
 * too, and takes every share no worker has claimed yet: a job never waits for a worker that
 * is asleep or descheduled, only for shares already running.
 *
 * Why not OpenMP: GNU OpenMP gives every thread that starts a parallel region its own pool of
 * threads. Once two threads of a process have started regions (TensorFlow's executor threads,
 * a Python thread beside the main one), the pools' threads outnumber the CPUs, libgomp stops
 * spinning and sleeps, and each region costs 37 us instead of 0.84 us on 2 cores
 * (docs/performance.md#threads). Here there is one team per process: a job that finds it busy
 * runs its shares on its own thread, in order.
 *
 * The team is created on first use and after fork() again in the child (pthread_atfork). */
#ifndef TFC_TEAM_H
#define TFC_TEAM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

typedef void (*tfc_share_fn)(void *ctx, int share, int nshares);

/* How long an idle worker spins for the next job before it sleeps: a sleeping worker woke
 * 270 us late on the 2-core VM, and a job of two 0.5 ms shares then ran at one thread's speed
 * (the caller had taken both); 1 ms of spin keeps the workers of back-to-back calls, with
 * another framework's call between them, awake (docs/performance.md#threads). And how long a
 * caller spins for shares still running before it sleeps. */
#ifndef TFC_WORKER_SPIN_NS
#define TFC_WORKER_SPIN_NS 1000000
#endif
#ifndef TFC_CALLER_SPIN_NS
#define TFC_CALLER_SPIN_NS 20000
#endif
#define TFC_TEAM_MAX 1024

#define TFC_JOB_SHIFT 16           /* the job word: (job << 16) | its number of shares */

typedef struct {
    pthread_cond_t wake;
    int sleeping;
} TfcWorker;

typedef struct {
    pthread_mutex_t busy;         /* held by the caller whose job the team runs */
    pthread_mutex_t m;            /* guards sleeping workers, their wakes, caller_waiting */
    pthread_cond_t done;
    _Atomic uint64_t job;         /* (job << TFC_JOB_SHIFT) | shares; jobs count from 1 */
    _Atomic int left;             /* shares of the job not yet finished */
    _Atomic(tfc_share_fn) fn;
    _Atomic(void *) ctx;
    int workers, caller_waiting, failed, atfork;
    uint64_t base;                /* the last job before the newest workers started */
    _Atomic uint64_t tag[TFC_TEAM_MAX + 1];  /* the last job that claimed each share */
    TfcWorker w[TFC_TEAM_MAX];
} TfcTeam;

static TfcTeam tfc_team = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
                           PTHREAD_COND_INITIALIZER};

static inline void tfc_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline int64_t tfc_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Run the shares of job ``job`` (of ``n``) that nobody has claimed, starting with ``first``
 * and going by ``step``: a worker starts with its own share, so that a thread keeps its part
 * of the data from one job to the next; the caller takes share 0, then steals from the end.
 * A claim succeeds only while the job runs (its share is unclaimed, so the job cannot have
 * ended): fn and ctx, read after it, are the job's. */
static void tfc_take_shares(TfcTeam *t, uint64_t job, int n, int first, int step) {
    for (int k = 0; k < n; k++) {
        int s = ((first + k * step) % n + n) % n;
        uint64_t old = atomic_load_explicit(&t->tag[s], memory_order_relaxed);
        if (old >= job ||
            !atomic_compare_exchange_strong_explicit(&t->tag[s], &old, job,
                                                     memory_order_acq_rel,
                                                     memory_order_relaxed))
            continue;
        tfc_share_fn fn = atomic_load_explicit(&t->fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&t->ctx, memory_order_relaxed);
        fn(ctx, s, n);
        if (atomic_fetch_sub_explicit(&t->left, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&t->m);
            if (t->caller_waiting) pthread_cond_signal(&t->done);
            pthread_mutex_unlock(&t->m);
        }
    }
}

static void *tfc_worker(void *arg) {
    TfcTeam *t = &tfc_team;
    int id = (int)(intptr_t)arg;
    TfcWorker *me = &t->w[id];
    uint64_t seen = t->base, word;
    for (;;) {
        int64_t until = tfc_now_ns() + TFC_WORKER_SPIN_NS;
        unsigned k = 0;
        while (((word = atomic_load_explicit(&t->job, memory_order_acquire)) >> TFC_JOB_SHIFT)
               == seen) {
            tfc_relax();
            if ((++k & 63) == 0 && tfc_now_ns() > until) {
                pthread_mutex_lock(&t->m);
                me->sleeping = 1;
                while ((atomic_load(&t->job) >> TFC_JOB_SHIFT) == seen)
                    pthread_cond_wait(&me->wake, &t->m);
                me->sleeping = 0;
                pthread_mutex_unlock(&t->m);
                until = tfc_now_ns() + TFC_WORKER_SPIN_NS;
            }
        }
        seen = word >> TFC_JOB_SHIFT;
        int n = (int)(word & ((1u << TFC_JOB_SHIFT) - 1));
        if (id + 1 < n) tfc_take_shares(t, seen, n, id + 1, 1);
    }
    return NULL;
}

/* In a child forked while the team existed: its workers are gone, and a lock another thread
 * held is held for ever; start again from nothing. */
static void tfc_team_child(void) {
    TfcTeam *t = &tfc_team;
    pthread_mutex_init(&t->busy, NULL);
    pthread_mutex_init(&t->m, NULL);
    pthread_cond_init(&t->done, NULL);
    t->workers = t->caller_waiting = t->failed = 0;
}

/* Start workers up to ``want`` (the caller holds busy). A thread that cannot be created
 * leaves fewer workers: the caller takes their shares. */
static void tfc_team_grow(TfcTeam *t, int want) {
    if (want > TFC_TEAM_MAX) want = TFC_TEAM_MAX;
    if (t->workers >= want || t->failed) return;
    if (!t->atfork) {
        t->atfork = 1;
        pthread_atfork(NULL, NULL, tfc_team_child);
    }
    t->base = atomic_load(&t->job) >> TFC_JOB_SHIFT;
    while (t->workers < want) {
        pthread_attr_t attr;
        pthread_t th;
        TfcWorker *w = &t->w[t->workers];
        pthread_cond_init(&w->wake, NULL);
        w->sleeping = 0;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int err = pthread_create(&th, &attr, tfc_worker, (void *)(intptr_t)t->workers);
        pthread_attr_destroy(&attr);
        if (err != 0) {
            t->failed = 1;
            return;
        }
        t->workers++;
    }
}

/* Another framework's pool, set for the calls of one thread (the C entry's set_thread_pool:
 * TF's kernels run ours on TF's intra-op pool, beside TF's own kernels, instead of a second
 * set of threads competing with it for the cores): run(pool, fn, ctx, n) calls fn(ctx, s, n)
 * for every share s and returns when all have returned. */
typedef void (*tfc_pool_run_fn)(void *pool, tfc_share_fn fn, void *ctx, int nshares);
static __thread tfc_pool_run_fn tfc_pool_run = NULL;
static __thread void *tfc_pool = NULL;

static void tfc_set_thread_pool(tfc_pool_run_fn run, void *pool) {
    tfc_pool_run = run;
    tfc_pool = pool;
}

/* fn(ctx, s, nshares) for every share s (nshares at most TFC_TEAM_MAX + 1), on this thread's
 * pool where one is set, else on the team where it is free (else all on the calling thread,
 * in order); returns when all have finished. */
static void tfc_parallel(tfc_share_fn fn, void *ctx, int nshares) {
    TfcTeam *t = &tfc_team;
    int s;
    if (nshares > 1 && tfc_pool_run != NULL) {
        tfc_pool_run(tfc_pool, fn, ctx, nshares);
        return;
    }
    if (nshares <= 1 || pthread_mutex_trylock(&t->busy) != 0) {
        for (s = 0; s < nshares; s++) fn(ctx, s, nshares);
        return;
    }
    if (nshares > TFC_TEAM_MAX + 1) nshares = TFC_TEAM_MAX + 1;
    tfc_team_grow(t, nshares - 1);
    uint64_t job = (atomic_load(&t->job) >> TFC_JOB_SHIFT) + 1;
    atomic_store_explicit(&t->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&t->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&t->left, nshares, memory_order_relaxed);
    atomic_store_explicit(&t->job, (job << TFC_JOB_SHIFT) | (uint64_t)nshares,
                          memory_order_release);
    pthread_mutex_lock(&t->m);
    for (s = 0; s < t->workers && s < nshares - 1; s++)
        if (t->w[s].sleeping) pthread_cond_signal(&t->w[s].wake);
    pthread_mutex_unlock(&t->m);
    tfc_take_shares(t, job, nshares, 0, -1);
    if (atomic_load_explicit(&t->left, memory_order_acquire) > 0) {
        int64_t until = tfc_now_ns() + TFC_CALLER_SPIN_NS;
        unsigned k = 0;
        while (atomic_load_explicit(&t->left, memory_order_acquire) > 0) {
            tfc_relax();
            if ((++k & 63) == 0 && tfc_now_ns() > until) {
                pthread_mutex_lock(&t->m);
                t->caller_waiting = 1;
                while (atomic_load(&t->left) > 0) pthread_cond_wait(&t->done, &t->m);
                t->caller_waiting = 0;
                pthread_mutex_unlock(&t->m);
            }
        }
    }
    pthread_mutex_unlock(&t->busy);
}

/* The s-th of n consecutive parts of [0, total). */
static inline int64_t tfc_share_begin(int64_t total, int s, int n) {
    return (int64_t)((__int128)total * s / n);
}

#endif
