// tfcompat's XLA FFI handler for the JAX front (tfcompat.jax; docs/architecture.md#inside-jax).
//
// Built on first use against the installed jaxlib's FFI headers (xla/ffi/api/ffi.h) and
// registered with jax.ffi.register_ffi_target as "tfcompat_resize" on the CPU. One handler runs
// every op the front calls (the op table's records with a JAX front), named by the attribute
// ``kernel`` (its code, capi.h) and described by ``kinds``, ``counts`` and ``values`` (its
// arguments, as the record lists them). It reads the operands' and result's shapes and dtypes
// into an op signature and gets its plan through tfcompat's C entry (csrc/capi.h, with
// front = 1: every tensor of the input's dtype): a lookup in the C entry's cache, or once per
// signature tfcompat's Python policy layer under the GIL. No plan's address is ever part of the
// compiled computation, so an executable from JAX's persistent compilation cache finds its
// plans the same way. Leading dimensions beyond [B, H, W, C] (vmap's) fold into the batch.
// The shares of a large call run on XLA's intra-op pool with the calling thread, as the TF
// plugin's run on TF's (tf_pool.cc).
#include <algorithm>
#include <atomic>
#include <cstring>

#include "xla/ffi/api/ffi.h"

#include "capi.h"
#include "pool_claim.h"

namespace ffi = xla::ffi;

namespace {

const TfcApi* api = nullptr;
std::atomic<long> calls[TFC_KERNEL_COUNT];


int code(ffi::DataType t) {
  switch (t) {
    case ffi::DataType::F32: return TFC_F32;
    case ffi::DataType::F64: return TFC_F64;
    case ffi::DataType::F16: return TFC_F16;
    case ffi::DataType::BF16: return TFC_BF16;
    case ffi::DataType::S8: return TFC_I8;
    case ffi::DataType::U8: return TFC_U8;
    case ffi::DataType::S16: return TFC_I16;
    case ffi::DataType::U16: return TFC_U16;
    case ffi::DataType::S32: return TFC_I32;
    case ffi::DataType::S64: return TFC_I64;
    default: return -1;
  }
}

// dims as [B, H, W, C], every leading dimension folded into B; false below rank 4 or above
// TFC_MAX_DIMS
bool fold(ffi::AnyBuffer::Dimensions dims, int32_t* rank, int64_t* out) {
  size_t n = dims.size();
  if (n < 4 || n > TFC_MAX_DIMS) return false;
  int64_t b = 1;
  for (size_t i = 0; i + 3 < n; i++) b *= dims[i];
  out[0] = b;
  out[1] = dims[n - 3];
  out[2] = dims[n - 2];
  out[3] = dims[n - 1];
  *rank = 4;
  return true;
}

// fn(arg, s, n) for every share s of n, on the caller and up to n - 1 helpers of XLA's pool
// (pool_claim.h); returns when all have returned.
void pool_run(void* pool, void (*fn)(void*, int, int), void* arg, int n) {
  auto* p = static_cast<ffi::ThreadPool*>(pool);
  tfcompat::run_claimed(fn, arg, n, static_cast<int>(p->num_threads()),
                        [p](auto task) { p->Schedule(std::move(task)); });
}

// The handler of every op the front calls: kernel, the op's code; kinds, the C entry's kind of
// each of its arguments (the op table's record: a TENSOR takes the next operand, a SHAPE has
// the result's shape and dtype, a VALUES argument the next of counts' lengths from values);
// values, those arguments' values and then the op's attributes.
ffi::Error Run(ffi::ThreadPool pool, ffi::RemainingArgs operands, ffi::Result<ffi::AnyBuffer> y,
               int32_t kernel, ffi::Span<const int64_t> kinds, ffi::Span<const int64_t> counts,
               ffi::Span<const int64_t> values) {
  if (api == nullptr) return ffi::Error::Internal("tfcompat: the JAX front is not loaded");
  if (kernel < 0 || kernel >= TFC_KERNEL_COUNT || kinds.size() > TFC_MAX_ARGS ||
      values.size() > TFC_MAX_VALUES)
    return ffi::Error::InvalidArgument("tfcompat.jax: expected an op's kernel code (capi.h)");
  TfcOpSig sig;
  std::memset(&sig, 0, sizeof sig);
  sig.kernel = kernel;
  sig.front = 1;
  sig.layout = TFC_NHWC;
  sig.n_args = static_cast<int32_t>(kinds.size());
  const void* data[TFC_MAX_ARGS] = {nullptr};
  size_t operand = 0, count = 0;
  int32_t out_rank = 0;
  int64_t out_dims[TFC_MAX_DIMS];
  int out_dtype = code(y->element_type());
  if (!fold(y->dimensions(), &out_rank, out_dims) || out_dtype < 0)
    return ffi::Error::InvalidArgument(
        "tfcompat.jax: expected a result [..., batch, height, width, channels] of a dtype the "
        "C entry has a code for");
  for (size_t i = 0; i < kinds.size(); i++) {
    TfcArgSig* a = &sig.args[i];
    a->kind = static_cast<int32_t>(kinds[i]);
    if (a->kind == TFC_ARG_TENSOR) {
      if (operand >= operands.size())
        return ffi::Error::InvalidArgument("tfcompat.jax: fewer operands than the op has");
      auto x = operands.get<ffi::AnyBuffer>(operand++);
      if (x.has_error()) return x.error();
      a->dtype = code(x->element_type());
      if (a->dtype < 0)
        return ffi::Error::InvalidArgument(
            "tfcompat.jax: an operand of a dtype the C entry has no code for");
      if (!fold(x->dimensions(), &a->rank, a->dims))
        return ffi::Error::InvalidArgument(
            "tfcompat.jax: expected arrays [..., batch, height, width, channels]");
      data[i] = x->untyped_data();
    } else if (a->kind == TFC_ARG_SHAPE) {
      a->dtype = out_dtype;
      a->rank = out_rank;
      std::memcpy(a->dims, out_dims, sizeof out_dims);
    } else {
      if (count >= counts.size())
        return ffi::Error::InvalidArgument("tfcompat.jax: a values argument without a count");
      a->dtype = TFC_I64;
      a->rank = 1;
      a->dims[0] = counts[count++];
    }
  }
  sig.n_values = static_cast<int32_t>(values.size());
  for (size_t i = 0; i < values.size(); i++) sig.values[i] = values[i];
  char err[2048];
  TfcPlan* plan = nullptr;
  int rc = api->op_plan(&sig, &plan, err, sizeof err);
  if (rc != 0)
    return rc == 2 ? ffi::Error(ffi::ErrorCode::kResourceExhausted, err)
                   : ffi::Error::InvalidArgument(err);
  // shares: tfcompat's thread count (set_num_threads), at most the pool's threads; no pool
  // (an XLA without one): tfcompat's team
  int threads = 1;
  if (!api->plan_serial(plan)) {
    int64_t n = pool.num_threads();
    threads = api->num_threads();
    if (n >= 2 && threads >= 2) {
      threads = static_cast<int>(std::min<int64_t>(n, threads));
      api->set_thread_pool(pool_run, &pool);
    }
  }
  void* outputs[1] = {y->untyped_data()};
  rc = api->op_run(plan, data, outputs, threads, err, sizeof err);
  api->set_thread_pool(nullptr, nullptr);
  api->plan_release(plan);
  if (rc != 0) return ffi::Error(ffi::ErrorCode::kResourceExhausted, err);
  calls[kernel].fetch_add(1, std::memory_order_relaxed);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(TfcRun, Run,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .RemainingArgs()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<int32_t>("kernel")
                                  .Attr<ffi::Span<const int64_t>>("kinds")
                                  .Attr<ffi::Span<const int64_t>>("counts")
                                  .Attr<ffi::Span<const int64_t>>("values"));

extern "C" {

// Keep tfcompat's C entry (the capsule's TfcApi); 1 for another ABI version.
int tfc_jax_init(const TfcApi* a) {
  if (a == nullptr || a->abi_version != TFC_ABI_VERSION) return 1;
  api = a;
  return 0;
}

// the calls the handler has run of a kernel (TFC_RESIZE_*)
long tfc_jax_calls(int kernel) {
  return kernel >= 0 && kernel < TFC_KERNEL_COUNT ? calls[kernel].load() : -1;
}

}  // extern "C"
