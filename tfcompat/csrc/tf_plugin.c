/* tfcompat's TensorFlow kernel library (tfcompat.tf.enable(); docs/architecture.md#inside-tensorflow).
 *
 * Built on first use against the installed TF's C kernel API (tensorflow/c/kernels.h) and
 * loaded with ctypes; tfc_plugin_register then registers, at priority 1 on the CPU (above TF's
 * own kernels, at 0), ResizeBilinearGrad and ResizeNearestNeighborGrad for every dtype their op
 * definitions allow. Each call reads its inputs' shapes and dtypes into a signature, gets the
 * plan of that signature through tfcompat's C entry (csrc/capi.h: a cache lookup, or once per
 * signature the policy layer under the GIL, whose ValueError/TypeError message becomes TF's
 * InvalidArgument), asks TF for the output and runs the plan on the tensors' memory with no
 * GIL. Nothing here validates beyond what a signature needs to be read safely.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensorflow/c/kernels.h"
#include "tensorflow/c/tf_datatype.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"

#include "capi.h"

/* below this many output values a call runs on TF's calling thread: a share would take less
 * than waking a sleeping worker of the kernels' team (about 5 us on 2 cores) */
#define TFC_SERIAL_VALUES (1 << 15)

static const TfcApi* api = NULL;
static atomic_long calls[2];
static int registered = 0;

typedef struct {
    int kernel;
    int align_corners, half_pixel_centers;
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
        default: return -1;
    }
}

static void* create(TF_OpKernelConstruction* ctx, int kernel) {
    Kernel* k = (Kernel*)calloc(1, sizeof(Kernel));
    TF_Status* s = TF_NewStatus();
    TF_Bool v = 0;
    if (k == NULL) {
        TF_SetStatus(s, TF_RESOURCE_EXHAUSTED, "tfcompat: out of memory for a kernel");
        TF_OpKernelConstruction_Failure(ctx, s);
        TF_DeleteStatus(s);
        return NULL;
    }
    k->kernel = kernel;
    TF_OpKernelConstruction_GetAttrBool(ctx, "align_corners", &v, s);
    k->align_corners = v;
    if (TF_GetCode(s) == TF_OK) {
        TF_OpKernelConstruction_GetAttrBool(ctx, "half_pixel_centers", &v, s);
        k->half_pixel_centers = v;
    }
    if (TF_GetCode(s) != TF_OK) TF_OpKernelConstruction_Failure(ctx, s);
    TF_DeleteStatus(s);
    return k;
}

static void* create_bilinear(TF_OpKernelConstruction* ctx) {
    return create(ctx, TFC_RESIZE_BILINEAR_GRAD);
}

static void* create_nearest(TF_OpKernelConstruction* ctx) {
    return create(ctx, TFC_RESIZE_NEAREST_NEIGHBOR_GRAD);
}

static void delete_kernel(void* k) { free(k); }

static void read_dims(const TF_Tensor* t, int32_t* rank, int64_t* dims) {
    int n = TF_NumDims(t);
    *rank = n;
    for (int i = 0; i < n && i < TFC_MAX_DIMS; i++) dims[i] = TF_Dim(t, i);
}

static void compute(void* kp, TF_OpKernelContext* ctx) {
    Kernel* k = (Kernel*)kp;
    TF_Status* s = TF_NewStatus();
    TF_Tensor* dy = NULL;
    TF_Tensor* second = NULL;
    TF_Tensor* out = NULL;
    TfcPlan* plan = NULL;
    char err[2048];
    TfcResampleSig sig;
    memset(&sig, 0, sizeof sig);
    if (api == NULL) {
        TF_SetStatus(s, TF_FAILED_PRECONDITION, "tfcompat: the kernel library is not enabled");
        goto fail;
    }
    TF_GetInput(ctx, 0, &dy, s);
    if (TF_GetCode(s) != TF_OK) goto fail;
    TF_GetInput(ctx, 1, &second, s);
    if (TF_GetCode(s) != TF_OK) goto fail;
    sig.kernel = k->kernel;
    sig.align_corners = k->align_corners;
    sig.half_pixel_centers = k->half_pixel_centers;
    sig.dy_dtype = tfc_dtype(TF_TensorType(dy));
    read_dims(dy, &sig.dy_rank, sig.dy_dims);
    TF_DataType out_type;
    if (k->kernel == TFC_RESIZE_BILINEAR_GRAD) {
        out_type = TF_TensorType(second);
        sig.out_dtype = tfc_dtype(out_type);
        read_dims(second, &sig.image_rank, sig.image_dims);
    } else {
        /* size: an int32 vector [new_height, new_width]; the image TF's grad writes is
         * [batch, size..., channels] (a size of another length gets the policy's error) */
        int64_t n = TF_TensorElementCount(second);
        const int32_t* size = (const int32_t*)TF_TensorData(second);
        out_type = TF_TensorType(dy);
        sig.out_dtype = sig.dy_dtype;
        sig.image_rank = (int32_t)(n + 2 < TFC_MAX_DIMS ? n + 2 : TFC_MAX_DIMS);
        sig.image_dims[0] = sig.dy_rank > 0 ? sig.dy_dims[0] : 0;
        for (int64_t i = 0; i < n && i + 1 < TFC_MAX_DIMS; i++) sig.image_dims[i + 1] = size[i];
        if (n + 1 < TFC_MAX_DIMS && sig.dy_rank > 0 && sig.dy_rank <= TFC_MAX_DIMS)
            sig.image_dims[n + 1] = sig.dy_dims[sig.dy_rank - 1];
    }
    if (sig.dy_dtype < 0 || sig.out_dtype < 0) {
        TF_SetStatus(s, TF_INVALID_ARGUMENT, "tfcompat: a dtype this kernel was not registered for");
        goto fail;
    }
    if (api->resample_plan(&sig, &plan, err, sizeof err) != 0) {
        TF_SetStatus(s, TF_INVALID_ARGUMENT, err);
        goto fail;
    }
    /* the policy layer proved the image rank 4 */
    out = TF_AllocateOutput(ctx, 0, out_type, sig.image_dims, 4,
                            (size_t)api->plan_out_bytes(plan), s);
    if (TF_GetCode(s) != TF_OK) goto fail;
    int64_t values = sig.image_dims[0] * sig.image_dims[1] * sig.image_dims[2] *
                     sig.image_dims[3];
    int threads = values < TFC_SERIAL_VALUES ? 1 : api->num_threads();
    if (api->resample_run(plan, TF_TensorData(dy), TF_TensorData(out), threads, err,
                          sizeof err) != 0) {
        TF_SetStatus(s, TF_RESOURCE_EXHAUSTED, err);
        goto fail;
    }
    atomic_fetch_add(&calls[k->kernel], 1);
    goto done;
fail:
    TF_OpKernelContext_Failure(ctx, s);
done:
    if (plan != NULL) api->plan_release(plan);
    TF_DeleteTensor(dy);
    TF_DeleteTensor(second);
    TF_DeleteTensor(out);
    TF_DeleteStatus(s);
}

static int add(const char* op, const char* name, void* (*create_fn)(TF_OpKernelConstruction*),
               TF_DataType dtype, char* err, size_t errlen) {
    TF_Status* s = TF_NewStatus();
    TF_KernelBuilder* b = TF_NewKernelBuilder(op, "CPU", create_fn, compute, delete_kernel);
    TF_KernelBuilder_TypeConstraint(b, "T", dtype, s);
    if (TF_GetCode(s) == TF_OK) {
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

/* Register the kernels (once) with the C entry ``capi`` (a TfcApi). 0, or non-zero with a
 * message in err. */
int tfc_plugin_register(const void* capi, char* err, size_t errlen) {
    const TfcApi* a = (const TfcApi*)capi;
    if (a == NULL || a->abi_version != TFC_ABI_VERSION) {
        if (errlen) {
            strncpy(err, "tfcompat: the kernel extension's C entry has another ABI version",
                    errlen - 1);
            err[errlen - 1] = 0;
        }
        return 1;
    }
    api = a;
    if (registered) return 0;
    static const TF_DataType bilinear[] = {TF_FLOAT, TF_DOUBLE, TF_HALF, TF_BFLOAT16};
    static const TF_DataType nearest[] = {TF_UINT8, TF_INT8, TF_INT32, TF_HALF, TF_FLOAT,
                                          TF_DOUBLE, TF_BFLOAT16};
    for (size_t i = 0; i < sizeof bilinear / sizeof bilinear[0]; i++)
        if (add("ResizeBilinearGrad", "TfcompatResizeBilinearGrad", create_bilinear,
                bilinear[i], err, errlen))
            return 1;
    for (size_t i = 0; i < sizeof nearest / sizeof nearest[0]; i++)
        if (add("ResizeNearestNeighborGrad", "TfcompatResizeNearestNeighborGrad", create_nearest,
                nearest[i], err, errlen))
            return 1;
    registered = 1;
    return 0;
}

/* How many calls each kernel (TFC_RESIZE_*) has run: what tells a test ours ran. */
long tfc_plugin_calls(int kernel) {
    return kernel == 0 || kernel == 1 ? atomic_load(&calls[kernel]) : -1;
}
