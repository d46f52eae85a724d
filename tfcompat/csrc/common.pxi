# Shared by every section: build facts, index checks, the 8-lane vector type and the fused
# types of the kernels' data.

cdef extern from "checks.h":
    int TFC_CHECKS_ON
    void TFC_CHECK(bint) noexcept nogil

cdef extern from "simd.h":
    ctypedef float v8f "tfc_v8f"
    v8f load8 "tfc_load8"(const float* p) noexcept nogil
    void store8 "tfc_store8"(float* p, v8f v) noexcept nogil
    v8f splat8 "tfc_splat8"(float x) noexcept nogil
    void prefetch "tfc_prefetch"(const void* p) noexcept nogil
    void prefetch_lines "tfc_prefetch_lines"(const char* base, Py_ssize_t lines, Py_ssize_t q,
                                             Py_ssize_t k) noexcept nogil
    void interleave8 "tfc_interleave8"(const float* s, Py_ssize_t sp, float* d, Py_ssize_t n,
                                       Py_ssize_t g) noexcept nogil

# The types a linear backward reads (dy) and sums in (dx): float32 grads may sum in float64
# (TF's float64 image), float64 grads always do.
ctypedef fused real_src:
    float
    double

ctypedef fused real_acc:
    float
    double

# The types a nearest backward sums in, each the type it reads: int8/int32 grads are summed as
# uint8/uint32, whose sums wrap as TF's do.
ctypedef fused nn_t:
    float
    double
    unsigned char
    unsigned int


def index_checks_enabled():
    """True in the bounds-checked debug build (TFCOMPAT_BOUNDSCHECK=1)."""
    return bool(TFC_CHECKS_ON)

