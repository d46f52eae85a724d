// Running a call's shares on a framework's thread pool with the calling thread (the TF
// plugin's tf_pool.cc on TF's intra-op pool, the JAX front's jax_ffi.cc on XLA's; C++, header
// only: each is built against its own framework's headers).
//
// fn(arg, s, n) for every share s of n: the calling thread claims shares one at a time, and so
// do up to ``helpers`` tasks scheduled on the pool, so that a share the busy pool has not
// reached yet runs on the caller (no deadlock when the caller is itself a pool thread);
// returns when all have returned. A helper that starts after every share is claimed returns
// at once: it holds the job, never the caller's data, which may be gone by then.
#ifndef TFCOMPAT_POOL_CLAIM_H
#define TFCOMPAT_POOL_CLAIM_H

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

namespace tfcompat {

struct ClaimJob {
  void (*fn)(void*, int, int);
  void* arg;
  int n;
  std::atomic<int> next{0};
  std::atomic<int> done{0};
  std::mutex m;
  std::condition_variable finished;
};

inline void claim(ClaimJob* job) {
  for (int s; (s = job->next.fetch_add(1)) < job->n;) {
    job->fn(job->arg, s, job->n);
    if (job->done.fetch_add(1) + 1 == job->n) {
      std::lock_guard<std::mutex> lock(job->m);
      job->finished.notify_all();
    }
  }
}

// schedule(task): runs task() on the pool, later, on any of its threads
template <typename Schedule>
void run_claimed(void (*fn)(void*, int, int), void* arg, int n, int helpers,
                 Schedule schedule) {
  auto job = std::make_shared<ClaimJob>();
  job->fn = fn;
  job->arg = arg;
  job->n = n;
  for (int i = 0; i < helpers && i < n - 1; i++) schedule([job] { claim(job.get()); });
  claim(job.get());
  std::unique_lock<std::mutex> lock(job->m);
  job->finished.wait(lock, [&] { return job->done.load() == job->n; });
}

}  // namespace tfcompat

#endif
