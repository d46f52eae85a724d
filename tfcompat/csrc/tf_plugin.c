/* tfcompat's TensorFlow kernel library (tfcompat.tf.enable(); docs/architecture.md#inside-tensorflow).
 *
 * Built on first use against the installed TF's C kernel API (tensorflow/c/kernels.h) and
 * loaded with ctypes; tfc_plugin_register then registers, at priority 1 on the CPU (above TF's
 * own kernels, at 0), one kernel and dtype at a time: ResizeBilinearGrad and
 * ResizeNearestNeighborGrad in any dtype their op definitions allow, Conv2DBackpropInput in
 * float16, bfloat16, float32 and float64 (TF's int32 stays TF's). With TF's oneDNN
 * optimizations on (x86's default), TF rewrites a Conv2DBackpropInput of a dtype oneDNN runs on
 * this CPU (float32, bfloat16, and float16 where the CPU has AVX512-FP16 or AMX-FP16) into
 * _MklNativeConv2DBackpropInput before it looks for a kernel, in eager mode and in graphs; ours
 * is registered for that op too, for every dtype TF registers it for and under the label TF's
 * kernels of it carry (tfcompat/tf.py reads both from TF's kernel registry). Each call reads its
 * inputs' shapes and dtypes into a signature, gets the plan of that signature through
 * tfcompat's C entry (csrc/capi.h: a cache lookup, or once per signature the policy layer
 * under the GIL, whose ValueError/TypeError message becomes TF's InvalidArgument), asks TF for
 * the output and runs the plan on the tensors' memory, its shares on TF's intra-op pool
 * (tf_pool.cc). Nothing here validates beyond what a signature needs to be read safely.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensorflow/c/kernels.h"
#include "tensorflow/c/tf_datatype.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"

#include "capi.h"

/* tf_pool.cc: TF's intra-op pool of the kernel's device, and running shares on it */
void* tfc_tf_pool(TF_OpKernelContext* ctx, int* threads);
void tfc_tf_pool_run(void* pool, void (*fn)(void*, int, int), void* arg, int n);

/* a conv of fewer products than this runs on TF's calling thread (as TFC_SERIAL_VALUES) */
#define TFC_SERIAL_PRODUCTS ((int64_t)1 << 18)

static const TfcApi* api = NULL;
/* each kernel's calls (by its code, capi.h), and the convs run through tfcompat's Python conv */
static atomic_long calls[TFC_KERNEL_COUNT];
static atomic_long python_convs;
/* each kernel's calls by TF_DataType (of its output): what enable() checks, one dtype at a
 * time, to report only the kernels that ran */
#define TFC_DTYPE_SLOTS 64
static atomic_long dtype_calls[TFC_KERNEL_COUNT][TFC_DTYPE_SLOTS];

static void count(int kernel, TF_DataType t) {
    atomic_fetch_add(&calls[kernel], 1);
    if ((int)t >= 0 && (int)t < TFC_DTYPE_SLOTS) atomic_fetch_add(&dtype_calls[kernel][t], 1);
}

/* The shares a call of this much work is split into: 1 (run on TF's calling thread) below
 * ``serial``, else one per thread of TF's intra-op pool, which runs them with the calling
 * thread (tf_pool.cc: a share the busy pool has not reached runs on the caller). Four shares
 * per thread were no faster inside Keras steps (docs/performance.md#inside-tensorflow). */
static int use_pool(TF_OpKernelContext* ctx, int64_t work, int64_t serial) {
    int threads = 0;
    void* pool = work < serial ? NULL : tfc_tf_pool(ctx, &threads);
    if (pool == NULL || threads < 2) return 1;
    api->set_thread_pool(tfc_tf_pool_run, pool);
    return threads;
}

/* An op's arguments and attributes as tfcompat/tf.py registers them (the op table's record:
 * each argument's name and C entry kind, the names of its bool attributes), by kernel code */
typedef struct {
    int n_args, n_attrs;
    int kinds[TFC_MAX_ARGS];
    char attrs[TFC_MAX_VALUES][64];
} Spec;
static Spec specs[TFC_KERNEL_COUNT];

/* a kernel instance: its code and its attributes' values */
typedef struct {
    int kernel;
    int64_t attrs[TFC_MAX_VALUES];
} Kernel;

static int tfc_dtype(TF_DataType t) {
    switch (t) {
        case TF_FLOAT: return TFC_F32;
        case TF_DOUBLE: return TFC_F64;
        case TF_HALF: return TFC_F16;
        case TF_BFLOAT16: return TFC_BF16;
        case TF_UINT8: return TFC_U8;
        case TF_INT8: return TFC_I8;
        case TF_INT32: return TFC_I32;
        case TF_INT16: return TFC_I16;
        case TF_UINT16: return TFC_U16;
        case TF_INT64: return TFC_I64;
        default: return -1;
    }
}

static TF_DataType tf_dtype(int code) {
    switch (code) {
        case TFC_F32: return TF_FLOAT;
        case TFC_F64: return TF_DOUBLE;
        case TFC_F16: return TF_HALF;
        case TFC_BF16: return TF_BFLOAT16;
        case TFC_U8: return TF_UINT8;
        case TFC_I8: return TF_INT8;
        case TFC_I32: return TF_INT32;
        case TFC_I16: return TF_INT16;
        case TFC_U16: return TF_UINT16;
        default: return TF_INT64;
    }
}

static void* create(TF_OpKernelConstruction* ctx, int kernel) {
    Kernel* k = (Kernel*)calloc(1, sizeof(Kernel));
    TF_Status* s = TF_NewStatus();
    if (k == NULL) {
        TF_SetStatus(s, TF_RESOURCE_EXHAUSTED, "tfcompat: out of memory for a kernel");
        TF_OpKernelConstruction_Failure(ctx, s);
        TF_DeleteStatus(s);
        return NULL;
    }
    k->kernel = kernel;
    for (int i = 0; i < specs[kernel].n_attrs && TF_GetCode(s) == TF_OK; i++) {
        TF_Bool v = 0;
        TF_OpKernelConstruction_GetAttrBool(ctx, specs[kernel].attrs[i], &v, s);
        k->attrs[i] = v;
    }
    if (TF_GetCode(s) != TF_OK) TF_OpKernelConstruction_Failure(ctx, s);
    TF_DeleteStatus(s);
    return k;
}

/* TF's create functions take no argument of ours: one per kernel code, for up to 16 codes */
#define TFC_CREATE(K) static void* create_##K(TF_OpKernelConstruction* c) { return create(c, K); }
TFC_CREATE(0) TFC_CREATE(1) TFC_CREATE(2) TFC_CREATE(3) TFC_CREATE(4) TFC_CREATE(5)
TFC_CREATE(6) TFC_CREATE(7) TFC_CREATE(8) TFC_CREATE(9) TFC_CREATE(10) TFC_CREATE(11)
TFC_CREATE(12) TFC_CREATE(13) TFC_CREATE(14) TFC_CREATE(15)
static void* (*const creators[])(TF_OpKernelConstruction*) = {
    create_0, create_1, create_2, create_3, create_4, create_5, create_6, create_7, create_8,
    create_9, create_10, create_11, create_12, create_13, create_14, create_15};
_Static_assert(sizeof creators / sizeof creators[0] >= TFC_KERNEL_COUNT,
               "a create function per kernel code: add TFC_CREATE lines");

static void delete_kernel(void* k) { free(k); }

static void read_dims(const TF_Tensor* t, int32_t* rank, int64_t* dims) {
    int n = TF_NumDims(t);
    *rank = n;
    for (int i = 0; i < n && i < TFC_MAX_DIMS; i++) dims[i] = TF_Dim(t, i);
}

/* Any op of the table through the C entry: its arguments read as its spec says (a VALUES
 * argument's int32 or int64 elements into the signature's values, then the attributes), its
 * plan found, its output allocated with the plan's dims and dtype, and run. */
static void compute(void* kp, TF_OpKernelContext* ctx) {
    Kernel* k = (Kernel*)kp;
    const Spec* sp = &specs[k->kernel];
    TF_Status* s = TF_NewStatus();
    TF_Tensor* in[TFC_MAX_ARGS] = {NULL};
    const void* data[TFC_MAX_ARGS] = {NULL};
    TF_Tensor* out = NULL;
    TfcPlan* plan = NULL;
    char err[2048];
    TfcOpSig sig;
    memset(&sig, 0, sizeof sig);
    if (api == NULL) {
        TF_SetStatus(s, TF_FAILED_PRECONDITION, "tfcompat: the kernel library is not enabled");
        goto fail;
    }
    sig.kernel = k->kernel;
    sig.layout = TFC_NHWC;
    sig.n_args = sp->n_args;
    int64_t nv = 0;
    for (int i = 0; i < sp->n_args; i++) {
        TfcArgSig* a = &sig.args[i];
        TF_GetInput(ctx, i, &in[i], s);
        if (TF_GetCode(s) != TF_OK) goto fail;
        a->kind = sp->kinds[i];
        a->dtype = tfc_dtype(TF_TensorType(in[i]));
        read_dims(in[i], &a->rank, a->dims);
        if (a->kind == TFC_ARG_TENSOR) {
            data[i] = TF_TensorData(in[i]);
        } else if (a->kind == TFC_ARG_VALUES) {
            int64_t n = TF_TensorElementCount(in[i]);
            int wide = TF_TensorType(in[i]) == TF_INT64;
            const void* v = TF_TensorData(in[i]);
            for (int64_t j = 0; j < n; j++, nv++)
                if (nv < TFC_MAX_VALUES)
                    sig.values[nv] = wide ? ((const int64_t*)v)[j] : ((const int32_t*)v)[j];
        }
        if (a->kind != TFC_ARG_VALUES && a->dtype < 0) {
            TF_SetStatus(s, TF_INVALID_ARGUMENT,
                         "tfcompat: a dtype this kernel was not registered for");
            goto fail;
        }
    }
    for (int i = 0; i < sp->n_attrs; i++, nv++)
        if (nv < TFC_MAX_VALUES) sig.values[nv] = k->attrs[i];
    sig.n_values = (int32_t)(nv < (1 << 30) ? nv : (1 << 30));
    int rc = api->op_plan(&sig, &plan, err, sizeof err);
    if (rc != 0) {
        /* TF answers an output it cannot allocate with ResourceExhausted */
        TF_SetStatus(s, rc == 2 ? TF_RESOURCE_EXHAUSTED : TF_INVALID_ARGUMENT, err);
        goto fail;
    }
    int64_t dims[TFC_MAX_DIMS];
    int rank = api->plan_out_dims(plan, dims);
    TF_DataType out_type = tf_dtype(api->plan_out_dtype(plan));
    out = TF_AllocateOutput(ctx, 0, out_type, dims, rank, (size_t)api->plan_out_bytes(plan),
                            s);
    if (TF_GetCode(s) != TF_OK) goto fail;
    void* outputs[1] = {TF_TensorData(out)};
    int threads = use_pool(ctx, TF_TensorElementCount(out), TFC_SERIAL_VALUES);
    rc = api->op_run(plan, data, outputs, threads, err, sizeof err);
    api->set_thread_pool(NULL, NULL);
    if (rc != 0) {
        TF_SetStatus(s, TF_RESOURCE_EXHAUSTED, err);
        goto fail;
    }
    count(k->kernel, out_type);
    goto done;
fail:
    TF_OpKernelContext_Failure(ctx, s);
done:
    if (plan != NULL) api->plan_release(plan);
    for (int i = 0; i < TFC_MAX_ARGS; i++) TF_DeleteTensor(in[i]);
    TF_DeleteTensor(out);
    TF_DeleteStatus(s);
}

/* Conv2DBackpropInput's attributes, read once per kernel */
typedef struct {
    int data_format, padding;
    int32_t strides_count, dilations_count, paddings_count;
    int64_t strides[TFC_MAX_DIMS], dilations[TFC_MAX_DIMS];
    int64_t explicit_paddings[2 * TFC_MAX_DIMS];
} ConvKernel;

/* a list attribute's values (at most cap kept) and its length */
static void int_list(TF_OpKernelConstruction* ctx, const char* name, int64_t* values, int cap,
                     int32_t* count, TF_Status* s) {
    int32_t n = 0, total = 0;
    TF_OpKernelConstruction_GetAttrSize(ctx, name, &n, &total, s);
    if (TF_GetCode(s) != TF_OK) return;
    *count = n;
    if (n <= 0) return;
    int64_t* all = (int64_t*)calloc((size_t)n, sizeof(int64_t));
    if (all == NULL) {
        TF_SetStatus(s, TF_RESOURCE_EXHAUSTED, "tfcompat: out of memory for an attribute");
        return;
    }
    TF_OpKernelConstruction_GetAttrInt64List(ctx, name, all, n, s);
    for (int i = 0; i < n && i < cap; i++) values[i] = all[i];
    free(all);
}

static void* create_conv(TF_OpKernelConstruction* ctx) {
    ConvKernel* k = (ConvKernel*)calloc(1, sizeof(ConvKernel));
    TF_Status* s = TF_NewStatus();
    char text[16];
    if (k == NULL) {
        TF_SetStatus(s, TF_RESOURCE_EXHAUSTED, "tfcompat: out of memory for a kernel");
        TF_OpKernelConstruction_Failure(ctx, s);
        TF_DeleteStatus(s);
        return NULL;
    }
    /* TF's op definition allows only these strings */
    memset(text, 0, sizeof text);
    TF_OpKernelConstruction_GetAttrString(ctx, "data_format", text, sizeof text - 1, s);
    k->data_format = strcmp(text, "NCHW") == 0;
    if (TF_GetCode(s) == TF_OK) {
        memset(text, 0, sizeof text);
        TF_OpKernelConstruction_GetAttrString(ctx, "padding", text, sizeof text - 1, s);
        k->padding = strcmp(text, "SAME") == 0 ? 0 : strcmp(text, "VALID") == 0 ? 1 : 2;
    }
    if (TF_GetCode(s) == TF_OK)
        int_list(ctx, "strides", k->strides, TFC_MAX_DIMS, &k->strides_count, s);
    if (TF_GetCode(s) == TF_OK)
        int_list(ctx, "dilations", k->dilations, TFC_MAX_DIMS, &k->dilations_count, s);
    if (TF_GetCode(s) == TF_OK)
        int_list(ctx, "explicit_paddings", k->explicit_paddings, 2 * TFC_MAX_DIMS,
                 &k->paddings_count, s);
    if (TF_GetCode(s) != TF_OK) TF_OpKernelConstruction_Failure(ctx, s);
    TF_DeleteStatus(s);
    return k;
}

static void compute_conv(void* kp, TF_OpKernelContext* ctx) {
    ConvKernel* k = (ConvKernel*)kp;
    TF_Status* s = TF_NewStatus();
    TF_Tensor* sizes = NULL;
    TF_Tensor* filter = NULL;
    TF_Tensor* dy = NULL;
    TF_Tensor* out = NULL;
    TfcPlan* plan = NULL;
    char err[2048];
    int in_c = 0;
    TfcConvSig sig;
    memset(&sig, 0, sizeof sig);
    if (api == NULL) {
        TF_SetStatus(s, TF_FAILED_PRECONDITION, "tfcompat: the kernel library is not enabled");
        goto fail;
    }
    TF_GetInput(ctx, 0, &sizes, s);
    if (TF_GetCode(s) == TF_OK) TF_GetInput(ctx, 1, &filter, s);
    if (TF_GetCode(s) == TF_OK) TF_GetInput(ctx, 2, &dy, s);
    if (TF_GetCode(s) != TF_OK) goto fail;
    sig.kernel = TFC_CONV2D_BACKPROP_INPUT;
    TF_DataType type = TF_TensorType(dy);
    sig.dtype = tfc_dtype(type);
    if (sig.dtype < 0 || TF_TensorType(filter) != type || TF_TensorType(sizes) != TF_INT32) {
        TF_SetStatus(s, TF_INVALID_ARGUMENT,
                     "tfcompat: a dtype this kernel was not registered for");
        goto fail;
    }
    read_dims(dy, &sig.dy_rank, sig.dy_dims);
    read_dims(filter, &sig.filter_rank, sig.filter_dims);
    sig.sizes_rank = TF_NumDims(sizes);
    int64_t n = TF_TensorElementCount(sizes);
    const int32_t* values = (const int32_t*)TF_TensorData(sizes);
    sig.sizes_count = (int32_t)(n < 1024 ? n : 1024);
    for (int64_t i = 0; i < n && i < TFC_MAX_DIMS; i++) sig.input_sizes[i] = values[i];
    sig.data_format = k->data_format;
    sig.padding = k->padding;
    sig.strides_count = k->strides_count;
    sig.dilations_count = k->dilations_count;
    sig.paddings_count = k->paddings_count;
    memcpy(sig.strides, k->strides, sizeof sig.strides);
    memcpy(sig.dilations, k->dilations, sizeof sig.dilations);
    memcpy(sig.explicit_paddings, k->explicit_paddings, sizeof sig.explicit_paddings);
    int rc = api->conv_plan(&sig, &plan, &in_c, err, sizeof err);
    if (rc != 0) {
        TF_SetStatus(s, rc == 1 ? TF_INVALID_ARGUMENT : rc == 2 ? TF_RESOURCE_EXHAUSTED
                                                               : TF_UNAVAILABLE, err);
        goto fail;
    }
    int64_t dims[4];
    api->plan_out_dims(plan, dims);
    out = TF_AllocateOutput(ctx, 0, type, dims, 4, (size_t)api->plan_out_bytes(plan), s);
    if (TF_GetCode(s) != TF_OK) goto fail;
    /* the policy layer proved the shapes: dy's values times the filter's taps and channels */
    int64_t products = TF_TensorElementCount(dy) * sig.filter_dims[0] * sig.filter_dims[1] *
                       sig.filter_dims[2];
    int threads = use_pool(ctx, products, TFC_SERIAL_PRODUCTS);
    rc = api->conv_run(plan, TF_TensorData(dy), TF_TensorData(filter), TF_TensorData(out),
                       threads, err, sizeof err);
    api->set_thread_pool(NULL, NULL);
    if (rc != 0) {
        TF_SetStatus(s, rc == 2 ? TF_RESOURCE_EXHAUSTED : rc == 3 ? TF_UNAVAILABLE
                                                                 : TF_INTERNAL, err);
        goto fail;
    }
    count(TFC_CONV2D_BACKPROP_INPUT, type);
    if (!in_c) atomic_fetch_add(&python_convs, 1);
    goto done;
fail:
    TF_OpKernelContext_Failure(ctx, s);
done:
    if (plan != NULL) api->plan_release(plan);
    TF_DeleteTensor(sizes);
    TF_DeleteTensor(filter);
    TF_DeleteTensor(dy);
    TF_DeleteTensor(out);
    TF_DeleteStatus(s);
}

static int add(const char* op, const char* name, void* (*create_fn)(TF_OpKernelConstruction*),
               TF_DataType dtype, const char* label, const char* const* host, int n_host,
               char* err, size_t errlen) {
    int conv = create_fn == create_conv;
    TF_Status* s = TF_NewStatus();
    TF_KernelBuilder* b = TF_NewKernelBuilder(op, "CPU", create_fn,
                                              conv ? compute_conv : compute, delete_kernel);
    TF_KernelBuilder_TypeConstraint(b, "T", dtype, s);
    if (TF_GetCode(s) == TF_OK) {
        for (int i = 0; i < n_host; i++) TF_KernelBuilder_HostMemory(b, host[i]);
        /* the label TF's graph and eager rewrites give the oneDNN ops they make */
        if (label != NULL && label[0] != 0) TF_KernelBuilder_Label(b, label);
        TF_KernelBuilder_Priority(b, 1);
        TF_RegisterKernelBuilder(name, b, s);
    } else {
        TF_DeleteKernelBuilder(b);
    }
    int rc = TF_GetCode(s) != TF_OK;
    if (rc && errlen) {
        strncpy(err, TF_Message(s), errlen - 1);
        err[errlen - 1] = 0;
    }
    TF_DeleteStatus(s);
    return rc;
}

static void set_error(char* err, size_t errlen, const char* msg) {
    if (errlen) {
        strncpy(err, msg, errlen - 1);
        err[errlen - 1] = 0;
    }
}

/* Register kernel ``kernel`` (its code, capi.h) for TF's op ``op`` in dtype ``dtype`` (a
 * TF_DataType its op allows: tfcompat/tf.py's COVERED) with the C entry ``capi`` (a TfcApi).
 * An op the C entry plans (every one but the conv) comes with its record's arguments, in
 * TF's order (``arg_names``, their C entry kinds ``arg_kinds``: VALUES ones are read in host
 * memory) and the names of its bool attributes; the conv has its own kernel (n_args 0).
 * ``onednn_label``: NULL, or (the conv) the label of TF's _MklNativeConv2DBackpropInput kernel
 * of this dtype, which TF's oneDNN rewrite hands a Conv2DBackpropInput of this dtype to: ours
 * is registered for that op too. Once per kernel and dtype (the caller keeps count). 0, or
 * non-zero with a message in err. */
int tfc_plugin_register(const void* capi, int kernel, const char* op, int dtype,
                        const char* onednn_label, const char* const* arg_names,
                        const int* arg_kinds, int n_args, const char* const* attr_names,
                        int n_attrs, char* err, size_t errlen) {
    const TfcApi* a = (const TfcApi*)capi;
    TF_DataType t = (TF_DataType)dtype;
    char name[128];
    if (a == NULL || a->abi_version != TFC_ABI_VERSION) {
        set_error(err, errlen, "tfcompat: the kernel extension's C entry has another ABI version");
        return 1;
    }
    api = a;
    snprintf(name, sizeof name, "Tfcompat%s", op);
    if (kernel == TFC_CONV2D_BACKPROP_INPUT && n_args == 0) {
        const char* host[1] = {"input_sizes"};
        if (add(op, name, create_conv, t, NULL, host, 1, err, errlen)) return 1;
        if (onednn_label != NULL)
            return add("_MklNativeConv2DBackpropInput", "TfcompatMklNativeConv2DBackpropInput",
                       create_conv, t, onednn_label, host, 1, err, errlen);
        return 0;
    }
    if (kernel < 0 || kernel >= TFC_KERNEL_COUNT || kernel == TFC_CONV2D_BACKPROP_INPUT ||
        n_args <= 0 || n_args > TFC_MAX_ARGS || n_attrs < 0 || n_attrs > TFC_MAX_VALUES) {
        set_error(err, errlen, "tfcompat: no TF kernel of this library has that kernel code");
        return 1;
    }
    Spec* sp = &specs[kernel];
    const char* host[TFC_MAX_ARGS];
    int n_host = 0;
    sp->n_args = n_args;
    sp->n_attrs = n_attrs;
    for (int i = 0; i < n_args; i++) {
        sp->kinds[i] = arg_kinds[i];
        if (arg_kinds[i] == TFC_ARG_VALUES) host[n_host++] = arg_names[i];
    }
    for (int i = 0; i < n_attrs; i++) {
        strncpy(sp->attrs[i], attr_names[i], sizeof sp->attrs[i] - 1);
        sp->attrs[i][sizeof sp->attrs[i] - 1] = 0;
    }
    return add(op, name, creators[kernel], t, NULL, host, n_host, err, errlen);
}

/* How many calls kernel ``kernel`` (its code) has run: what tells a test ours ran. */
long tfc_plugin_calls(int kernel) {
    return kernel >= 0 && kernel < TFC_KERNEL_COUNT ? atomic_load(&calls[kernel]) : -1;
}

/* How many of the convs ran through tfcompat's Python conv (not in C). */
long tfc_plugin_python_convs(void) { return atomic_load(&python_convs); }

/* How many calls kernel ``kernel`` has run whose output had TF_DataType ``dtype``. */
long tfc_plugin_dtype_calls(int kernel, int dtype) {
    if (kernel < 0 || kernel >= TFC_KERNEL_COUNT || dtype < 0 || dtype >= TFC_DTYPE_SLOTS)
        return -1;
    return atomic_load(&dtype_calls[kernel][dtype]);
}
