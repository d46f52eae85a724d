# Coordinate rules and the per-axis tables built from them (docs/semantics.md, "Resize-type
# kernels"). The arithmetic is float32 in TensorFlow's evaluation order: every literal is cast
# to float so that C does not promote the expression to double.

cdef extern from "rules.h":
    cpdef enum Rule "tfc_rule":
        LINEAR_HALF_PIXEL "TFC_LINEAR_HALF_PIXEL"
        LINEAR_ALIGN_CORNERS "TFC_LINEAR_ALIGN_CORNERS"
        LINEAR_ASYMMETRIC "TFC_LINEAR_ASYMMETRIC"
        LINEAR_PYTORCH_HALF_PIXEL "TFC_LINEAR_PYTORCH_HALF_PIXEL"
        LINEAR_ORT_HALF_PIXEL "TFC_LINEAR_ORT_HALF_PIXEL"
        LINEAR_ORT_ALIGN_CORNERS "TFC_LINEAR_ORT_ALIGN_CORNERS"
        NEAREST_HALF_PIXEL "TFC_NEAREST_HALF_PIXEL"
        NEAREST_ALIGN_CORNERS "TFC_NEAREST_ALIGN_CORNERS"
        NEAREST_ASYMMETRIC "TFC_NEAREST_ASYMMETRIC"
        NEAREST_ALIGN_HALF "TFC_NEAREST_ALIGN_HALF"


cdef inline float _tf_scale(Py_ssize_t in_size, Py_ssize_t out_size, bint align) noexcept nogil:
    # TF CalculateResizeScale; TF 2.21's grads use in/out whenever in == 1 (docs/semantics.md)
    if align and out_size > 1 and in_size != 1:
        return <float>(in_size - 1) / <float>(out_size - 1)
    return <float>in_size / <float>out_size


cdef inline Py_ssize_t _clamp(Py_ssize_t i, Py_ssize_t hi) noexcept nogil:
    if i < 0:
        return 0
    if i > hi:
        return hi
    return i


def linear_axis_map(Rule rule, Py_ssize_t in_size, Py_ssize_t out_size, double ort_scale,
                    int32_t[::1] lo, int32_t[::1] hi, float[::1] w_lo, float[::1] w_hi):
    """Fill, for every resized index x, its two source indices and their weights.

    ``ort_scale`` (an ORT ``scales`` entry) is used when it is > 0, as ``1 / ort_scale``
    computed in float32; otherwise the scale comes from the sizes. The four arrays hold
    ``out_size`` entries (the caller's precondition).
    """
    cdef Py_ssize_t x, i0, last = in_size - 1
    cdef float scale, s, fl, lerp
    if rule == LINEAR_ALIGN_CORNERS:
        scale = _tf_scale(in_size, out_size, True)
    elif rule == LINEAR_ORT_ALIGN_CORNERS:
        scale = <float>(in_size - 1) / <float>(out_size - 1) if out_size > 1 else <float>0.0
    elif rule == LINEAR_ORT_HALF_PIXEL and ort_scale > 0:
        scale = <float>1.0 / <float>ort_scale
    else:
        scale = _tf_scale(in_size, out_size, False)
    with nogil:
        for x in range(out_size):
            if rule == LINEAR_ORT_HALF_PIXEL or rule == LINEAR_ORT_ALIGN_CORNERS:
                # ORT/PyTorch area_pixel_compute_source_index: i0 = int(s), i1 = i0 + (i0 < I-1)
                if rule == LINEAR_ORT_ALIGN_CORNERS:
                    s = scale * <float>x
                else:
                    s = scale * (<float>x + <float>0.5) - <float>0.5
                    if s < 0:
                        s = <float>0.0
                i0 = _clamp(<Py_ssize_t>s, last)
                lo[x] = <int32_t>i0
                hi[x] = <int32_t>(i0 + 1 if i0 < last else i0)
                lerp = s - <float>i0
                w_lo[x] = <float>1.0 - lerp
                w_hi[x] = lerp
                continue
            if rule == LINEAR_HALF_PIXEL:
                s = (<float>x + <float>0.5) * scale - <float>0.5
            elif rule == LINEAR_PYTORCH_HALF_PIXEL:
                s = (<float>x + <float>0.5) * scale - <float>0.5 if out_size > 1 else <float>0.0
            else:
                s = <float>x * scale
            # TF: lerp is not clamped, so at a half-pixel edge both taps land on pixel 0
            fl = floorf(s)
            lo[x] = <int32_t>_clamp(<Py_ssize_t>fl, last)
            hi[x] = <int32_t>_clamp(<Py_ssize_t>ceilf(s), last)
            lerp = s - fl
            w_lo[x] = <float>1.0 - lerp
            w_hi[x] = lerp


def nearest_axis_map(Rule rule, Py_ssize_t in_size, Py_ssize_t out_size, int32_t[::1] index):
    """Fill, for every resized index x, the one source index it was copied from."""
    cdef Py_ssize_t x, last = in_size - 1
    cdef float scale = _tf_scale(in_size, out_size,
                                 rule == NEAREST_ALIGN_CORNERS or rule == NEAREST_ALIGN_HALF)
    with nogil:
        for x in range(out_size):
            if rule == NEAREST_HALF_PIXEL:
                index[x] = <int32_t>_clamp(<Py_ssize_t>floorf((<float>x + <float>0.5) * scale), last)
            elif rule == NEAREST_ALIGN_CORNERS:
                # C roundf: halves away from zero, as TF
                index[x] = <int32_t>_clamp(<Py_ssize_t>roundf(<float>x * scale), last)
            elif rule == NEAREST_ALIGN_HALF:
                index[x] = <int32_t>_clamp(<Py_ssize_t>roundf((<float>x + <float>0.5) * scale), last)
            else:
                index[x] = <int32_t>_clamp(<Py_ssize_t>floorf(<float>x * scale), last)


def invert_axis_map(Py_ssize_t in_size, const int32_t[::1] lo, const int32_t[::1] hi,
                    const float[::1] w_lo, const float[::1] w_hi, bint two_taps):
    """Invert a forward map into a gather table (CSR), in ascending resized index.

    Returns ``offsets[in_size + 1], source[n], count[n], w0[n], w1[n]``: source index i
    receives from resized index ``source[g]`` for ``g`` in ``offsets[i]:offsets[i+1]``, with
    one weight (count 1) or, when both taps of that x land on i, two (low tap first, as TF
    adds top before bottom). The indices of the map are in [0, in_size) (the caller's
    precondition: the maps above build them so).
    """
    cdef Py_ssize_t out_size = lo.shape[0], x, g, i
    offsets_a = np.zeros(in_size + 1, dtype=np.int32)
    cdef int32_t[::1] offsets = offsets_a
    for x in range(out_size):
        offsets[lo[x] + 1] += 1
        if two_taps and hi[x] != lo[x]:
            offsets[hi[x] + 1] += 1
    for i in range(in_size):
        offsets[i + 1] += offsets[i]
    n = offsets[in_size]
    source_a = np.empty(n, dtype=np.int32)
    count_a = np.empty(n, dtype=np.int32)
    w0_a = np.zeros(n, dtype=np.float32)
    w1_a = np.zeros(n, dtype=np.float32)
    cdef int32_t[::1] source = source_a, count = count_a
    cdef float[::1] w0 = w0_a, w1 = w1_a
    cursor_a = offsets_a[:in_size].copy()
    cdef int32_t[::1] cursor = cursor_a
    for x in range(out_size):
        g = cursor[lo[x]]
        cursor[lo[x]] += 1
        source[g] = <int32_t>x
        w0[g] = w_lo[x]
        count[g] = 1
        if two_taps:
            if hi[x] == lo[x]:
                count[g] = 2
                w1[g] = w_hi[x]
            else:
                g = cursor[hi[x]]
                cursor[hi[x]] += 1
                source[g] = <int32_t>x
                w0[g] = w_hi[x]
                count[g] = 1
    return offsets_a, source_a, count_a, w0_a, w1_a
