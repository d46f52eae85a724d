/* tfcompat's C entry into its compiled kernels (docs/architecture.md#the-c-entry).
 *
 * The kernel extension exports a PyCapsule, tfcompat._kernels.C_API (name "tfcompat.C_API"),
 * holding a TfcApi. A caller (the TensorFlow plugin, tfcompat/csrc/tf_plugin.c; the JAX
 * handler, jax_ffi.cc; the PyTorch front, through tfcompat._kernels.CEntryPlan) builds a plan
 * once per call signature with op_plan and runs it on raw pointers with op_run: no Python
 * and no GIL (a conv whose strategy runs only from Python takes the GIL for each call:
 * plan_in_c says which). A signature seen before is found in a C-side cache
 * (bounded in count and bytes); a new one takes the GIL once, and tfcompat's Python policy
 * layer validates it against the op table's record of its kernel and builds the plan (its
 * errors come back as the message TF raises).
 *
 * ABI: a caller checks abi_version == TFC_ABI_VERSION and refuses another. Add fields at the
 * end only, and raise the version when a field's meaning changes.
 */
#ifndef TFCOMPAT_CAPI_H
#define TFCOMPAT_CAPI_H

#include <stddef.h>
#include <stdint.h>

#define TFC_ABI_VERSION 4
#define TFC_MAX_DIMS 8
/* an op's arguments, and the values of its value arguments and attributes, a signature holds */
#define TFC_MAX_ARGS 4
#define TFC_MAX_VALUES 96
/* the elements of a list (a values argument, an ints attribute) a signature keeps */
#define TFC_MAX_LIST 16

/* the kernels: their codes are defined here only (Python reads them as
 * tfcompat._kernels.KernelCode, named as the registry names the kernel) */
enum tfc_kernel { TFC_RESIZE_BILINEAR_GRAD = 0, TFC_RESIZE_NEAREST_NEIGHBOR_GRAD = 1,
                  TFC_CONV2D_BACKPROP_INPUT = 2, TFC_RESIZE_BILINEAR = 3,
                  TFC_RESIZE_NEAREST_NEIGHBOR = 4 };
/* how many codes there are (a table indexed by code has this many rows) */
#define TFC_KERNEL_COUNT 5
/* below this many output values a front's call runs on its caller's thread: a share would
 * take less than waking a sleeping worker (about 5 us on 2 cores; beside PyTorch's own pool a
 * team's start costs 20-40 us: docs/performance.md#the-pytorch-front) */
#define TFC_SERIAL_VALUES (1 << 15)
/* ... and a conv of fewer products (dy's values times the filter's taps and input channels) */
#define TFC_SERIAL_PRODUCTS ((int64_t)1 << 18)
/* dtypes, tfcompat's codes (not TF's DataType numbers) */
enum { TFC_F32 = 0, TFC_F64 = 1, TFC_F16 = 2, TFC_BF16 = 3, TFC_U8 = 4, TFC_I8 = 5,
       TFC_I32 = 6, TFC_I16 = 7, TFC_U16 = 8, TFC_I64 = 9 };
/* the order of a signature's dims: TF's and JAX's NHWC, PyTorch's NCHW */
enum { TFC_NHWC = 0, TFC_NCHW = 1 };
/* what an argument is: data the run reads, a tensor of which only the shape and dtype count,
 * or values the plan depends on (a host-memory input: TF's ``size``, ``input_sizes``) */
enum { TFC_ARG_TENSOR = 0, TFC_ARG_SHAPE = 1, TFC_ARG_VALUES = 2 };
/* an attribute's kind, and how it is kept in a signature's values: a bool or an int as one
 * value; a float as its double's bits; a list of ints as its length, then its first
 * TFC_MAX_LIST elements; a string of a known set as its index there (-1: not in it) */
enum { TFC_ATTR_BOOL = 0, TFC_ATTR_INT = 1, TFC_ATTR_FLOAT = 2, TFC_ATTR_INTS = 3,
       TFC_ATTR_CHOICE = 4 };

/* One argument of a call, in the op's (TF's) argument order. strides: in elements, in the
 * dims' order; all 0 for a C-contiguous tensor. A VALUES argument's first TFC_MAX_LIST
 * elements (ints as int64, floats as their double's bits; its dims say how many it has)
 * follow the previous ones' in TfcOpSig.values. */
typedef struct {
    int32_t kind;
    int32_t dtype;
    int32_t rank;
    int32_t reserved;
    int64_t dims[TFC_MAX_DIMS];
    int64_t strides[TFC_MAX_DIMS];
} TfcArgSig;

/* An op's call signature (ABI 4). Zero it before filling it in: it is compared as bytes.
 * kernel: the op's code; front 0: TF's op with TF's checks and dtypes; 1: a framework's front
 * (tfcompat.jax, tfcompat.torch): every tensor of the input's dtype, TF's float32 arithmetic
 * rounded once for a half type, float64 computed in float64. layout: the dims' order (the
 * memory's is the strides'; a front's NCHW tensor may be contiguous or channels_last, and the
 * output has the first argument's memory order). threads: 0 (the C entry sets it where a
 * plan depends on the thread count: the conv's strategy). values: each VALUES argument's,
 * then the op's attributes in its record's order, each kept as its kind says, n_values of
 * them. The op table's record of the kernel (c_args, c_attrs) says which arguments and
 * attributes it has. */
typedef struct {
    int32_t kernel;
    int32_t front;
    int32_t layout;
    int32_t n_args;
    TfcArgSig args[TFC_MAX_ARGS];
    int32_t n_values;
    int32_t threads;
    int64_t values[TFC_MAX_VALUES];
} TfcOpSig;

/* Conv2DBackpropInput's plan key (capi_conv.pxi makes it from an op signature). The dims and
 * lists as TF gives them, each with its count (at most TFC_MAX_DIMS values kept; a longer
 * one is refused by the policy layer, which sees its count); data_format 0 NHWC, 1 NCHW;
 * padding 0 SAME, 1 VALID, 2 EXPLICIT; threads: the thread count its strategy is chosen
 * for. */
typedef struct {
    int32_t kernel;             /* TFC_CONV2D_BACKPROP_INPUT */
    int32_t dtype;
    int32_t dy_rank;
    int32_t filter_rank;
    int64_t dy_dims[TFC_MAX_DIMS];
    int64_t filter_dims[TFC_MAX_DIMS];
    int32_t sizes_rank;         /* input_sizes: its rank and element count, and its values */
    int32_t sizes_count;
    int64_t input_sizes[TFC_MAX_DIMS];
    int32_t data_format;
    int32_t padding;
    int32_t strides_count;
    int32_t dilations_count;
    int64_t strides[TFC_MAX_DIMS];
    int64_t dilations[TFC_MAX_DIMS];
    int32_t paddings_count;
    int32_t threads;
    int64_t explicit_paddings[2 * TFC_MAX_DIMS];
} TfcConvSig;

typedef struct TfcPlan TfcPlan;

typedef struct {
    int32_t abi_version;
    /* ABI 4: the plan of an op's signature, with a reference the caller gives back with
     * plan_release. Returns 0, or non-zero with a message in err and *plan NULL: 1, the
     * policy layer's ValueError or TypeError (the input is invalid); 2, its MemoryError (the
     * output cannot fit in this machine's memory); 3, the interpreter is finalizing (a cache
     * miss then takes no GIL). Takes the GIL on a cache miss. */
    int (*op_plan)(const TfcOpSig* sig, TfcPlan** plan, char* err, size_t errlen);
    /* outputs[0] = the plan's op of args (a pointer per argument of the signature, NULL for
     * a SHAPE or VALUES one) on num_threads threads; the tensors in the signature's memory
     * order, any alignment of their element type. Returns 0, or non-zero with a message in
     * err: 2, scratch memory could not be allocated; 3, the interpreter is finalizing (a run
     * that needs Python); 1, tfcompat's Python conv raised. No GIL (but plan_in_c's). */
    int (*op_run)(TfcPlan* plan, const void* const* args, void* const* outputs,
                  int num_threads, char* err, size_t errlen);
    void (*plan_release)(TfcPlan* plan);
    /* bytes of dx (the output's TF allocates) */
    int64_t (*plan_out_bytes)(const TfcPlan* plan);
    /* tfcompat's thread count now (set_num_threads / OMP_NUM_THREADS) */
    int (*num_threads)(void);
    /* 1 where op_run runs the plan with no Python (every plan but a conv's whose strategy
     * runs from Python, or NCHW: each run then takes the GIL) */
    int (*plan_in_c)(const TfcPlan* plan);
    /* 1 where a call is small enough to run on the caller's thread (a resize of fewer than
     * TFC_SERIAL_VALUES output values, a conv of fewer than TFC_SERIAL_PRODUCTS products) */
    int (*plan_serial)(const TfcPlan* plan);
    /* the output's dims (an op plan's in its signature's layout; a conv's dx: its
     * input_sizes as 4 dims); returns the rank */
    int (*plan_out_dims)(const TfcPlan* plan, int64_t* dims);
    /* Run the parallel shares of this thread's calls on the caller's pool (TF's intra-op
     * pool) instead of tfcompat's team: run(pool, fn, ctx, n) calls fn(ctx, s, n) for every
     * s in [0, n), in any order and on any threads, and returns when all have returned.
     * run NULL: the team again. Per calling thread. */
    void (*set_thread_pool)(void (*run)(void* pool, void (*fn)(void* ctx, int s, int n),
                                        void* ctx, int n), void* pool);
    /* ABI 4: the output's dtype code (an op plan's; a conv's is its signature's) */
    int (*plan_out_dtype)(const TfcPlan* plan);
} TfcApi;

#endif
