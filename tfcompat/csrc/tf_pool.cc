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
#include "tensorflow/c/kernels.h"
#include "tensorflow/core/framework/op_kernel.h"

#include "pool_claim.h"

namespace {

using Pool = tsl::thread::ThreadPool;

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

// fn(arg, s, n) for every share s of n, on the caller and up to n - 1 helpers of the pool
// (pool_claim.h); returns when all have returned.
void tfc_tf_pool_run(void* pool, void (*fn)(void*, int, int), void* arg, int n) {
  auto* p = static_cast<Pool*>(pool);
  tfcompat::run_claimed(fn, arg, n, p->NumThreads(),
                        [p](std::function<void()> task) { p->Schedule(std::move(task)); });
}

}  // extern "C"
