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

/* The shares of a call too large for TF's calling thread alone (the plan says: plan_serial):
 * one per thread of TF's intra-op pool, which runs them with the calling thread (tf_pool.cc:
 * a share the busy pool has not reached runs on the caller). Four shares per thread were no
 * faster inside Keras steps (docs/performance.md#inside-tensorflow). */
static int use_pool(TF_OpKernelContext* ctx) {
    int threads = 0;
    void* pool = tfc_tf_pool(ctx, &threads);
    if (pool == NULL || threads < 2) return 1;
    api->set_thread_pool(tfc_tf_pool_run, pool);
    return threads;
}

/* An op's arguments and attributes as tfcompat/tf.py registers them (the op table's record:
 * each argument's C entry kind; each attribute's TF name, kind and, for a choice, its
 * strings), by kernel code */
#define TFC_MAX_ATTRS 16
typedef struct {
    int n_args, n_attrs;
    int kinds[TFC_MAX_ARGS];
    char attrs[TFC_MAX_ATTRS][64];
    int attr_kinds[TFC_MAX_ATTRS];
    char choices[TFC_MAX_ATTRS][8][32];     /* a choice attribute's strings */
    int n_choices[TFC_MAX_ATTRS];
} Spec;
static Spec specs[16];

/* a kernel instance: its code and its attributes as a signature keeps them (capi.h) */
typedef struct {
    int kernel;
    int n;
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

/* a list attribute's length, then its first TFC_MAX_LIST values, at k->attrs + k->n */
static void int_list(TF_OpKernelConstruction* ctx, const char* name, Kernel* k, TF_Status* s) {
    int32_t n = 0, total = 0;
    TF_OpKernelConstruction_GetAttrSize(ctx, name, &n, &total, s);
    if (TF_GetCode(s) != TF_OK) return;
    k->attrs[k->n++] = n;
    if (n <= 0) return;
    int64_t* all = (int64_t*)calloc((size_t)n, sizeof(int64_t));
    if (all == NULL) {
        TF_SetStatus(s, TF_RESOURCE_EXHAUSTED, "tfcompat: out of memory for an attribute");
        return;
    }
    TF_OpKernelConstruction_GetAttrInt64List(ctx, name, all, n, s);
    for (int i = 0; i < n && i < TFC_MAX_LIST; i++) k->attrs[k->n++] = all[i];
    free(all);
}

/* A kernel of code ``kernel``: its attributes read once, each as its kind keeps it. */
static void* create(TF_OpKernelConstruction* ctx, int kernel) {
    const Spec* sp = &specs[kernel];
    Kernel* k = (Kernel*)calloc(1, sizeof(Kernel));
    TF_Status* s = TF_NewStatus();
    if (k == NULL) {
        TF_SetStatus(s, TF_RESOURCE_EXHAUSTED, "tfcompat: out of memory for a kernel");
        TF_OpKernelConstruction_Failure(ctx, s);
        TF_DeleteStatus(s);
        return NULL;
    }
    k->kernel = kernel;
    for (int i = 0; i < sp->n_attrs && TF_GetCode(s) == TF_OK; i++) {
        const char* name = sp->attrs[i];
        if (sp->attr_kinds[i] == TFC_ATTR_BOOL) {
            TF_Bool v = 0;
            TF_OpKernelConstruction_GetAttrBool(ctx, name, &v, s);
            k->attrs[k->n++] = v;
        } else if (sp->attr_kinds[i] == TFC_ATTR_INT) {
            int64_t v = 0;
            TF_OpKernelConstruction_GetAttrInt64(ctx, name, &v, s);
            k->attrs[k->n++] = v;
        } else if (sp->attr_kinds[i] == TFC_ATTR_FLOAT) {
            float v = 0;
            double d;
            TF_OpKernelConstruction_GetAttrFloat(ctx, name, &v, s);
            d = v;
            memcpy(&k->attrs[k->n++], &d, sizeof d);
        } else if (sp->attr_kinds[i] == TFC_ATTR_INTS) {
            int_list(ctx, name, k, s);
        } else {    /* a choice: its index among the record's strings (TF's op allows only those) */
            char text[32];
            int64_t index = -1;
            memset(text, 0, sizeof text);
            TF_OpKernelConstruction_GetAttrString(ctx, name, text, sizeof text - 1, s);
            for (int j = 0; j < sp->n_choices[i]; j++)
                if (strcmp(text, sp->choices[i][j]) == 0) index = j;
            k->attrs[k->n++] = index;
        }
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
 * argument's first TFC_MAX_LIST int32, int64 or float elements into the signature's values,
 * then the attributes), its plan found, its output allocated with the plan's dims and dtype,
 * and run. */
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
    int nv = 0;
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
            TF_DataType t = TF_TensorType(in[i]);
            const void* v = TF_TensorData(in[i]);
            for (int64_t j = 0; j < n && j < TFC_MAX_LIST && nv < TFC_MAX_VALUES; j++) {
                if (t == TF_INT64) {
                    sig.values[nv++] = ((const int64_t*)v)[j];
                } else if (t == TF_INT32) {
                    sig.values[nv++] = ((const int32_t*)v)[j];
                } else {    /* a float: its double's bits */
                    double d = t == TF_DOUBLE ? ((const double*)v)[j] : ((const float*)v)[j];
                    memcpy(&sig.values[nv++], &d, sizeof d);
                }
            }
        }
        if (a->kind != TFC_ARG_VALUES && a->dtype < 0) {
            TF_SetStatus(s, TF_INVALID_ARGUMENT,
                         "tfcompat: a dtype this kernel was not registered for");
            goto fail;
        }
    }
    for (int i = 0; i < k->n && nv < TFC_MAX_VALUES; i++) sig.values[nv++] = k->attrs[i];
    sig.n_values = nv;
    int rc = api->op_plan(&sig, &plan, err, sizeof err);
    if (rc != 0) {
        /* TF answers an output it cannot allocate with ResourceExhausted */
        TF_SetStatus(s, rc == 1 ? TF_INVALID_ARGUMENT : rc == 2 ? TF_RESOURCE_EXHAUSTED
                                                               : TF_UNAVAILABLE, err);
        goto fail;
    }
    int64_t dims[TFC_MAX_DIMS];
    int rank = api->plan_out_dims(plan, dims);
    TF_DataType out_type = tf_dtype(api->plan_out_dtype(plan));
    out = TF_AllocateOutput(ctx, 0, out_type, dims, rank, (size_t)api->plan_out_bytes(plan),
                            s);
    if (TF_GetCode(s) != TF_OK) goto fail;
    void* outputs[1] = {TF_TensorData(out)};
    int threads = api->plan_serial(plan) ? 1 : use_pool(ctx);
    rc = api->op_run(plan, data, outputs, threads, err, sizeof err);
    api->set_thread_pool(NULL, NULL);
    if (rc != 0) {
        TF_SetStatus(s, rc == 2 ? TF_RESOURCE_EXHAUSTED : rc == 3 ? TF_UNAVAILABLE
                                                                 : TF_INTERNAL, err);
        goto fail;
    }
    count(k->kernel, out_type);
    if (!api->plan_in_c(plan)) atomic_fetch_add(&python_convs, 1);
    goto done;
fail:
    TF_OpKernelContext_Failure(ctx, s);
done:
    if (plan != NULL) api->plan_release(plan);
    for (int i = 0; i < TFC_MAX_ARGS; i++) TF_DeleteTensor(in[i]);
    TF_DeleteTensor(out);
    TF_DeleteStatus(s);
}

static int add(const char* op, const char* name, void* (*create_fn)(TF_OpKernelConstruction*),
               TF_DataType dtype, const char* label, const char* const* host, int n_host,
               char* err, size_t errlen) {
    TF_Status* s = TF_NewStatus();
    TF_KernelBuilder* b = TF_NewKernelBuilder(op, "CPU", create_fn, compute, delete_kernel);
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
 * TF_DataType its op allows: tfcompat/tf.py's COVERED) with the C entry ``capi`` (a TfcApi),
 * as its op table record describes it: its arguments in TF's order (``arg_names``, their C
 * entry kinds ``arg_kinds``: VALUES ones are read in host memory) and its attributes (TF's
 * names, their kinds, and a choice's strings joined by '|', else NULL). ``alias_op``: NULL, or
 * another op TF hands such calls to under ``alias_label`` (TF's oneDNN rewrite of the conv,
 * _MklNativeConv2DBackpropInput): ours is registered for that op too. Once per kernel and
 * dtype (the caller keeps count). 0, or non-zero with a message in err. */
int tfc_plugin_register(const void* capi, int kernel, const char* op, int dtype,
                        const char* alias_op, const char* alias_label,
                        const char* const* arg_names, const int* arg_kinds, int n_args,
                        const char* const* attr_names, const int* attr_kinds,
                        const char* const* attr_choices, int n_attrs, char* err,
                        size_t errlen) {
    const TfcApi* a = (const TfcApi*)capi;
    TF_DataType t = (TF_DataType)dtype;
    char name[128];
    if (a == NULL || a->abi_version != TFC_ABI_VERSION) {
        set_error(err, errlen, "tfcompat: the kernel extension's C entry has another ABI version");
        return 1;
    }
    api = a;
    if (kernel < 0 || kernel >= TFC_KERNEL_COUNT || n_args <= 0 || n_args > TFC_MAX_ARGS ||
        n_attrs < 0 || n_attrs > TFC_MAX_ATTRS) {
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
        sp->attr_kinds[i] = attr_kinds[i];
        sp->n_choices[i] = 0;
        for (const char* c = attr_choices[i]; c != NULL && *c && sp->n_choices[i] < 8;) {
            const char* end = strchr(c, '|');
            size_t len = end ? (size_t)(end - c) : strlen(c);
            if (len > sizeof sp->choices[i][0] - 1) len = sizeof sp->choices[i][0] - 1;
            memcpy(sp->choices[i][sp->n_choices[i]], c, len);
            sp->choices[i][sp->n_choices[i]++][len] = 0;
            c = end ? end + 1 : c + len;
        }
    }
    snprintf(name, sizeof name, "Tfcompat%s", op);
    if (add(op, name, creators[kernel], t, NULL, host, n_host, err, errlen)) return 1;
    if (alias_op == NULL) return 0;
    snprintf(name, sizeof name, "Tfcompat%s", alias_op);
    return add(alias_op, name, creators[kernel], t, alias_label, host, n_host, err, errlen);
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
