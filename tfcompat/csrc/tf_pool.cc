// TF's intra-op thread pool for tfcompat's kernels inside TensorFlow (tf_plugin.c;
// docs/architecture.md#inside-tensorflow).
//
// TF's own CPU kernels split their work over the device's intra-op pool (Eigen's), which its
// concurrent ops share. tfcompat's kernels run their shares there too, through the C entry's
// set_thread_pool: a second set of threads beside TF's (tfcompat's team) outnumbered the
// cores whenever TF ran another op at the same time, and a kernel whose half was on a
// descheduled thread waited for it. TF's C kernel API has no pool; TF_OpKernelContext is
// TF's OpKernelContext (its C API's own implementation casts it so), whose device gives the
// pool. Built against the installed TF's headers with tf.sysconfig's flags.
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "tensorflow/c/kernels.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace {

using Pool = tsl::thread::ThreadPool;

// A job's shares, claimed one at a time by the calling thread and by helpers on the pool; a
// helper that starts after every share is claimed returns at once (it holds the job, never
// the caller's data, which may be gone by then).
struct Job {
  void (*fn)(void*, int, int);
  void* arg;
  int n;
  std::atomic<int> next{0};
  std::atomic<int> done{0};
  std::mutex m;
  std::condition_variable finished;
};

void claim(Job* job) {
  for (int s; (s = job->next.fetch_add(1)) < job->n;) {
    job->fn(job->arg, s, job->n);
    if (job->done.fetch_add(1) + 1 == job->n) {
      std::lock_guard<std::mutex> lock(job->m);
      job->finished.notify_all();
    }
  }
}

}  // namespace

extern "C" {

// The intra-op pool of the kernel's device, or NULL; *threads: its threads.
void* tfc_tf_pool(TF_OpKernelContext* ctx, int* threads) {
  auto* c = reinterpret_cast<tensorflow::OpKernelContext*>(ctx);
  const auto* workers = c->device()->tensorflow_cpu_worker_threads();
  if (workers == nullptr || workers->workers == nullptr) return nullptr;
  *threads = workers->num_threads;
  return workers->workers;
}

// fn(arg, s, n) for every share s of n: the calling thread claims shares one at a time, and
// so do up to n - 1 helpers scheduled on the pool, so that shares a busy pool has not reached
// yet run on the caller; returns when all have returned.
void tfc_tf_pool_run(void* pool, void (*fn)(void*, int, int), void* arg, int n) {
  auto job = std::make_shared<Job>();
  job->fn = fn;
  job->arg = arg;
  job->n = n;
  auto* p = static_cast<Pool*>(pool);
  int helpers = std::min(n - 1, p->NumThreads());
  for (int i = 0; i < helpers; i++) p->Schedule([job] { claim(job.get()); });
  claim(job.get());
  std::unique_lock<std::mutex> lock(job->m);
  job->finished.wait(lock, [&] { return job->done.load() == n; });
}

}  // extern "C"
