"""The ``onednn`` peer: oneDNN's own CPU primitives through its C API, loaded with ctypes
(``pip install 'tfcompat[onednn]'``: PyPI's ``onednn-cpu-gomp==2023.2.0``, oneDNN 3.2, a
``libdnnl.so.3`` in the environment's ``lib/``; ``TFCOMPAT_DNNL_LIB`` names another file).

- The resampling backward primitive (``dnnl_resampling_backward_primitive_desc_create``),
  algorithm ``resampling_nearest`` or ``resampling_linear``, 1 to 3 spatial axes, NCX and NXC.
  oneDNN's resampling has one coordinate mapping, half-pixel centres, and no align-corners:
  InterpolateBackward ``half_pixel`` (and ``tf_half_pixel_for_nn``), and the half-pixel modes of
  ResizeBilinearGrad and ResizeNearestNeighborGrad; everything else is unsupported.
  ResizeGrad's ``scales`` become the primitive's ``factors``.
- The resampling forward primitive (the same descriptor, ``forward_training``) for TF's forward
  resizes in half-pixel mode, NHWC, in the image's dtype (a bilinear result returned as float32,
  as TF returns it: a half-type result converted exactly, not recomputed).
- Convolution backward data (``dnnl_convolution_backward_data_primitive_desc_create``,
  ``convolution_direct``): strides, dilations (oneDNN counts them from 0), asymmetric padding,
  NHWC and NCHW. The primitive picks its own memory formats (``format_tag_any``) and the data
  is reordered to and from the caller's, as a framework does.
- dtypes: float32, bfloat16, float16 where the CPU's oneDNN implements them; float64 and
  integers are unsupported (oneDNN has no such kernels).

A second backend, ``onednn-graph``, runs the graph API's own InterpolateBackward op (whose
attributes are this kernel's: mode, coordinate_transformation_mode, sizes or scales,
data_format) as a one-op partition; a partition oneDNN reports as unsupported is n/a.

The bindings are tfcompat/_dnnl.py's.
"""
import ctypes
import functools

import numpy as np

from tfcompat import _forward as fw, _resample as rs
from tfcompat.conv import problem as _conv
# (missing: imported as the peer's own availability check, conformance/peers/__init__.py)
from tfcompat._dnnl import (ARG_DIFF_DST, ARG_DIFF_SRC, ARG_DST, ARG_SRC, ARG_WEIGHTS, BF16,
                     CONVOLUTION_DIRECT, F16, F32, FORWARD_TRAINING, QUERY_DIFF_DST_MD,
                     QUERY_DIFF_SRC_MD, QUERY_WEIGHTS_MD, RESAMPLING_LINEAR, RESAMPLING_NEAREST,
                     Dims, Owner, cpu_isa, library, missing, plain_strides, ptr)  # noqa: F401
from tfcompat._resample import Rule
from tfcompat.kernel_names import (CONV2D_BACKPROP_INPUT, INTERPOLATE_BACKWARD,
                                   RESIZE_BILINEAR, RESIZE_BILINEAR_GRAD, RESIZE_GRAD,
                                   RESIZE_NEAREST_NEIGHBOR, RESIZE_NEAREST_NEIGHBOR_GRAD)
from tfcompat.registry import KernelConfig, UnsupportedError

BACKEND = "onednn"

_DTYPES = {np.dtype(np.float32): F32, np.dtype(np.float16): F16}

#: kernel name -> the oneDNN implementation its last call ran (``impl_info_str``)
LAST_IMPL = {}


def _dnnl_dtype(dtype):
    dtype = np.dtype(dtype)
    if dtype.name == "bfloat16":
        return BF16
    if dtype not in _DTYPES:
        raise UnsupportedError(f"oneDNN has no {dtype} kernels")
    return _DTYPES[dtype]


# the C functions that free what the cached primitives hold (each entry's Owner)
_MD, _PD, _PRIM = "dnnl_memory_desc_destroy", "dnnl_primitive_desc_destroy", "dnnl_primitive_destroy"


def _data_order(ndim, channels_last):
    """Storage order of logical (N, C, spatial...) dims for NCX or NXC data."""
    if channels_last:
        return [0] + list(range(2, ndim)) + [1]
    return list(range(ndim))


@functools.lru_cache(maxsize=64)
def _resampling(alg, in_logical, out_logical, dtype, channels_last, factors, backward=True):
    """(owner of the oneDNN objects, the backward (or forward) primitive, its implementation,
    the src and dst memory descriptors)."""
    L = library()
    own = Owner()
    ndim = len(in_logical)
    order = _data_order(ndim, channels_last)
    src = own.own(_MD, L.md(in_logical, dtype, plain_strides(in_logical, order)))
    dst = own.own(_MD, L.md(out_logical, dtype, plain_strides(out_logical, order)))
    fac = (ctypes.c_float * len(factors))(*factors) if factors else None
    fwd = ctypes.c_void_p()
    L.ok(L.lib.dnnl_resampling_forward_primitive_desc_create(
        ctypes.byref(fwd), L.engine, FORWARD_TRAINING, alg, fac, src, dst, None),
        "resampling_forward_primitive_desc_create")
    own.own(_PD, fwd)
    if backward is False:
        return own, own.own(_PRIM, L.primitive(fwd)), L.impl(fwd), src, dst
    pd = ctypes.c_void_p()
    L.ok(L.lib.dnnl_resampling_backward_primitive_desc_create(
        ctypes.byref(pd), L.engine, alg, fac, src, dst, fwd, None),
        "resampling_backward_primitive_desc_create")
    own.own(_PD, pd)
    return own, own.own(_PRIM, L.primitive(pd)), L.impl(pd), src, dst


_HALF = (Rule.LINEAR_HALF_PIXEL, Rule.NEAREST_HALF_PIXEL, Rule.LINEAR_ORT_HALF_PIXEL)


def _half_pixel(axis):
    """The axis's rule, where oneDNN has it: half-pixel centres only."""
    if axis.rule not in _HALF:
        raise UnsupportedError("oneDNN's resampling has half-pixel centres only, no "
                               f"align_corners or asymmetric mapping (got {axis.describe()})")
    return axis.rule


def _execute(kernel, key, bindings):
    """Run the primitive ``_resampling(*key)`` on [(argument, "src" or "dst", array)]."""
    L = library()
    with L.lock:
        _own, prim, impl, src, dst = _resampling(*key)
        LAST_IMPL[kernel] = impl
        mds = {"src": src, "dst": dst}
        mems = [(arg, L.memory(mds[which].value, ptr(arr))) for arg, which, arr in bindings]
        try:
            L.execute(prim, mems)
        finally:
            for _, m in mems:
                L.lib.dnnl_memory_destroy(m)


def _resample(problem):
    axes = problem.layout.axes
    rule = _half_pixel(axes[0])
    dy = np.asarray(problem.dy)
    dtype = _dnnl_dtype(dy.dtype)
    if np.dtype(problem.out_dtype) != dy.dtype:
        raise UnsupportedError(f"oneDNN's resampling writes the grads' dtype ({dy.dtype}), not "
                               f"{np.dtype(problem.out_dtype)}")
    factors = ()
    if rule == Rule.LINEAR_ORT_HALF_PIXEL and any(a.ort_scale > 0 for a in axes):
        factors = tuple(float(a.ort_scale) for a in axes)
    spatial_in = tuple(a.in_size for a in axes)
    spatial_out = tuple(a.out_size for a in axes)
    in_logical = (problem.batch, problem.channels) + spatial_in
    out_logical = (problem.batch, problem.channels) + spatial_out
    alg = RESAMPLING_LINEAR if problem.linear else RESAMPLING_NEAREST
    dy = np.ascontiguousarray(dy)
    dx = np.empty(problem.out_shape, dy.dtype)
    _execute(problem.kernel, (alg, in_logical, out_logical, dtype, problem.channels_last,
                              factors), [(ARG_DIFF_DST, "dst", dy), (ARG_DIFF_SRC, "src", dx)])
    return dx


def _forward(problem):
    _half_pixel(problem.axes[0])
    images = np.ascontiguousarray(problem.images)
    dtype = _dnnl_dtype(images.dtype)
    b, ih, iw, c = images.shape
    oh, ow = (a.out_size for a in problem.axes)
    out = np.empty((b, oh, ow, c), images.dtype)
    alg = RESAMPLING_LINEAR if problem.linear else RESAMPLING_NEAREST
    _execute(problem.kernel, (alg, (b, c, ih, iw), (b, c, oh, ow), dtype, True, (), False),
             [(ARG_SRC, "src", images), (ARG_DST, "dst", out)])
    return out.astype(problem.out_dtype, copy=False)


def resize_bilinear(inputs, attrs):
    return _forward(fw.resize_bilinear_problem(inputs, attrs))


def resize_nearest_neighbor(inputs, attrs):
    return _forward(fw.resize_nearest_neighbor_problem(inputs, attrs))


def resize_bilinear_grad(inputs, attrs):
    return _resample(rs.resize_bilinear_grad_problem(inputs, attrs))


def resize_nearest_neighbor_grad(inputs, attrs):
    return _resample(rs.resize_nearest_neighbor_grad_problem(inputs, attrs))


def interpolate_backward(inputs, attrs):
    return _resample(rs.interpolate_backward_problem(inputs, attrs))


def resize_grad(inputs, attrs):
    return _resample(rs.resize_grad_problem(inputs, attrs))


@functools.lru_cache(maxsize=64)
def _conv_steps(x_logical, w_logical, y_logical, dtype, channels_last, strides, dilates, pad_l,
                pad_r):
    """The backward-data primitive (formats of its choosing) and the reorders between them
    and the caller's plain layouts: (owner of the oneDNN objects, primitive, implementation,
    the primitive's memory descriptors, the caller's, the reorders)."""
    L = library()
    own = Owner()
    order = _data_order(4, channels_last)
    user_dx = own.own(_MD, L.md(x_logical, dtype, plain_strides(x_logical, order)))
    user_dy = own.own(_MD, L.md(y_logical, dtype, plain_strides(y_logical, order)))
    # the caller's HWIO filter seen as oneDNN's logical (O, I, H, W)
    user_w = own.own(_MD, L.md(w_logical, dtype, plain_strides(w_logical, [2, 3, 1, 0])))
    any_x, any_w, any_y = (own.own(_MD, L.md(s, dtype)) for s in (x_logical, w_logical, y_logical))
    args = (Dims(*strides), Dims(*dilates), Dims(*pad_l), Dims(*pad_r))
    fwd = ctypes.c_void_p()
    L.ok(L.lib.dnnl_convolution_forward_primitive_desc_create(
        ctypes.byref(fwd), L.engine, FORWARD_TRAINING, CONVOLUTION_DIRECT, any_x, any_w, None,
        any_y, *args, None), "convolution_forward_primitive_desc_create")
    own.own(_PD, fwd)
    pd = ctypes.c_void_p()
    L.ok(L.lib.dnnl_convolution_backward_data_primitive_desc_create(
        ctypes.byref(pd), L.engine, CONVOLUTION_DIRECT, any_x, any_w, any_y, *args, fwd, None),
        "convolution_backward_data_primitive_desc_create")
    own.own(_PD, pd)    # owns ``want``, the descriptors queried from it
    want = {q: L.lib.dnnl_primitive_desc_query_md(pd, q, 0)
            for q in (QUERY_DIFF_SRC_MD, QUERY_WEIGHTS_MD, QUERY_DIFF_DST_MD)}
    steps = {}
    for q, user in ((QUERY_DIFF_SRC_MD, user_dx), (QUERY_WEIGHTS_MD, user_w),
                    (QUERY_DIFF_DST_MD, user_dy)):
        if L.same(user.value, want[q]):
            steps[q] = None
        elif q == QUERY_DIFF_SRC_MD:
            steps[q] = (own.own(_PRIM, L.reorder(want[q], user.value)), L.size(want[q]))
        else:
            steps[q] = (own.own(_PRIM, L.reorder(user.value, want[q])), L.size(want[q]))
    return (own, own.own(_PRIM, L.primitive(pd)), L.impl(pd), want, (user_dx, user_w, user_dy),
            steps)


def conv2d_backprop_input(inputs, attrs):
    p = _conv.conv_problem(inputs, attrs)
    L = library()
    dtype = _dnnl_dtype(p.dtype)
    pb, pr = p.floor_pads()  # oneDNN's output size floors
    x_logical = (p.N, p.C, p.H, p.W)
    w_logical = (p.OC, p.C, p.fh, p.fw)
    y_logical = (p.N, p.OC, p.OH, p.OW)
    dy = np.ascontiguousarray(p.dy)
    w = np.ascontiguousarray(p.filter)
    dx = np.empty(p.out_shape, p.dtype)
    with L.lock:
        _own, prim, impl, want, users, steps = _conv_steps(
            x_logical, w_logical, y_logical, dtype, p.channels_last, (p.sh, p.sw),
            (p.dh - 1, p.dw - 1), (p.pad_top, p.pad_left), (pb, pr))
        LAST_IMPL[CONV2D_BACKPROP_INPUT] = impl
        keep, mems = [], []

        def mem(md, arr):
            m = L.memory(md, ptr(arr))
            mems.append(m)
            return m

        try:
            bound = {}
            for q, arr, user in ((QUERY_DIFF_SRC_MD, dx, users[0]), (QUERY_WEIGHTS_MD, w, users[1]),
                                 (QUERY_DIFF_DST_MD, dy, users[2])):
                m_user = mem(user.value, arr)
                if steps[q] is None:
                    bound[q] = (m_user, None)
                    continue
                scratch = np.empty(steps[q][1], np.uint8)
                keep.append(scratch)
                m_want = mem(want[q], scratch)
                if q != QUERY_DIFF_SRC_MD:
                    L.execute(steps[q][0], [(ARG_SRC, m_user), (ARG_DST, m_want)])
                bound[q] = (m_want, m_user)
            L.execute(prim, [(ARG_DIFF_DST, bound[QUERY_DIFF_DST_MD][0]),
                             (ARG_WEIGHTS, bound[QUERY_WEIGHTS_MD][0]),
                             (ARG_DIFF_SRC, bound[QUERY_DIFF_SRC_MD][0])])
            if steps[QUERY_DIFF_SRC_MD] is not None:
                L.execute(steps[QUERY_DIFF_SRC_MD][0],
                          [(ARG_SRC, bound[QUERY_DIFF_SRC_MD][0]),
                           (ARG_DST, bound[QUERY_DIFF_SRC_MD][1])])
        finally:
            for m in mems:
                L.lib.dnnl_memory_destroy(m)
    return dx


KERNEL_CONFIGS = (
    KernelConfig(RESIZE_BILINEAR_GRAD, BACKEND, resize_bilinear_grad),
    KernelConfig(RESIZE_NEAREST_NEIGHBOR_GRAD, BACKEND, resize_nearest_neighbor_grad),
    KernelConfig(CONV2D_BACKPROP_INPUT, BACKEND, conv2d_backprop_input),
    KernelConfig(INTERPOLATE_BACKWARD, BACKEND, interpolate_backward),
    KernelConfig(RESIZE_GRAD, BACKEND, resize_grad),
    KernelConfig(RESIZE_BILINEAR, BACKEND, resize_bilinear),
    KernelConfig(RESIZE_NEAREST_NEIGHBOR, BACKEND, resize_nearest_neighbor),
)


# ------------------------------------------------------------------------------------------
# onednn-graph: the graph API's InterpolateBackward op
# ------------------------------------------------------------------------------------------
# oneDNN 3.2's include/oneapi/dnnl/dnnl_graph_types.h
GRAPH_OP_INTERPOLATE_BACKWARD = 32
GRAPH_ATTR_SCALES, GRAPH_ATTR_SIZES = 0x20, 0x49
GRAPH_ATTR_COORDINATE_MODE, GRAPH_ATTR_DATA_FORMAT, GRAPH_ATTR_MODE = 0x82, 0x83, 0x84
GRAPH_LAYOUT_STRIDED = 2
GRAPH_PROPERTY_VARIABLE = 1
GRAPH_BACKEND = "onednn-graph"


class _LogicalTensor(ctypes.Structure):
    _fields_ = [("id", ctypes.c_size_t), ("ndims", ctypes.c_int), ("dims", Dims),
                ("data_type", ctypes.c_int), ("property", ctypes.c_int),
                ("layout_type", ctypes.c_int), ("strides", Dims)]


def _logical(L, tid, shape, dtype):
    lt = _LogicalTensor()
    L.ok(L.lib.dnnl_graph_logical_tensor_init_with_strides(
        ctypes.byref(lt), ctypes.c_size_t(tid), dtype, len(shape), Dims(*shape),
        Dims(*plain_strides(shape, list(range(len(shape))))), GRAPH_PROPERTY_VARIABLE),
        "graph_logical_tensor_init_with_strides")
    return lt


@functools.lru_cache(maxsize=32)
def _graph_interpolate_backward(src_shape, dst_shape, dtype, mode, transform, data_format,
                                sizes, scales):
    """(owner of the oneDNN objects: the op, its partition, compiled), the compiled partition,
    and the three logical tensors."""
    L = library()
    own = Owner()
    src, ddst, dsrc = (_logical(L, i, s, dtype) for i, s in
                       enumerate((src_shape, dst_shape, src_shape)))
    op = ctypes.c_void_p()
    L.ok(L.lib.dnnl_graph_op_create(ctypes.byref(op), ctypes.c_size_t(0),
                                     GRAPH_OP_INTERPOLATE_BACKWARD, b"interpolate_backward"),
          "graph_op_create")
    own.own("dnnl_graph_op_destroy", op)
    for lt in (src, ddst):
        L.ok(L.lib.dnnl_graph_op_add_input(op, ctypes.byref(lt)), "graph_op_add_input")
    L.ok(L.lib.dnnl_graph_op_add_output(op, ctypes.byref(dsrc)), "graph_op_add_output")
    for attr, text in ((GRAPH_ATTR_MODE, mode), (GRAPH_ATTR_COORDINATE_MODE, transform),
                       (GRAPH_ATTR_DATA_FORMAT, data_format)):
        raw = text.encode()
        L.ok(L.lib.dnnl_graph_op_set_attr_str(op, attr, raw, ctypes.c_size_t(len(raw))),
              "graph_op_set_attr_str")
    if sizes:
        L.ok(L.lib.dnnl_graph_op_set_attr_s64(op, GRAPH_ATTR_SIZES,
                                               (ctypes.c_int64 * len(sizes))(*sizes),
                                               ctypes.c_size_t(len(sizes))), "sizes")
    else:
        L.ok(L.lib.dnnl_graph_op_set_attr_f32(op, GRAPH_ATTR_SCALES,
                                               (ctypes.c_float * len(scales))(*scales),
                                               ctypes.c_size_t(len(scales))), "scales")
    part = ctypes.c_void_p()
    L.ok(L.lib.dnnl_graph_partition_create_with_op(ctypes.byref(part), op, 1),
          "graph_partition_create_with_op")
    own.own("dnnl_graph_partition_destroy", part)
    supported = ctypes.c_uint8()
    L.ok(L.lib.dnnl_graph_partition_is_supported(part, ctypes.byref(supported)),
          "graph_partition_is_supported")
    if not supported.value:
        own.close()
        raise UnsupportedError(f"oneDNN's graph API does not support InterpolateBackward "
                               f"{mode}/{transform} {data_format} "
                               f"{ {F32: 'float32', BF16: 'bfloat16', F16: 'float16'}[dtype] }")
    compiled = ctypes.c_void_p()
    L.ok(L.lib.dnnl_graph_compiled_partition_create(ctypes.byref(compiled), part),
          "graph_compiled_partition_create")
    own.own("dnnl_graph_compiled_partition_destroy", compiled)
    ins = (ctypes.POINTER(_LogicalTensor) * 2)(ctypes.pointer(src), ctypes.pointer(ddst))
    outs = (ctypes.POINTER(_LogicalTensor) * 1)(ctypes.pointer(dsrc))
    L.ok(L.lib.dnnl_graph_partition_compile(part, compiled, ctypes.c_size_t(2), ins,
                                             ctypes.c_size_t(1), outs, L.engine),
          "graph_partition_compile")
    return own, compiled, (src, ddst, dsrc)


def graph_interpolate_backward(inputs, attrs):
    """The graph API's InterpolateBackward, given the attributes as the op names them (this
    kernel's API is the op's): mode, coordinate_transformation_mode, sizes or scales,
    data_format."""
    problem = rs.interpolate_backward_problem(inputs, attrs)  # our checks first
    L = library()
    dy = np.ascontiguousarray(problem.dy)
    dtype = _dnnl_dtype(dy.dtype)
    if dtype == F16:
        # its partition reports float16 as supported, then its compilation throws a C++
        # dnnl::error through the C API, which ends the process (docs/peers.md)
        raise UnsupportedError("float16: oneDNN 3.2's graph API aborts the process compiling "
                               "it on this CPU (an uncaught dnnl::error)")
    if dtype == BF16 and not cpu_isa()[0]:
        # the same for bfloat16 where oneDNN has no AVX512-BF16 kernels (seen on AMD Zen 3:
        # "could not create a primitive descriptor for a resampling forward propagation
        # primitive", thrown through the C API); where it has them (Zen 4) it computes
        raise UnsupportedError("bfloat16: oneDNN 3.2's graph API aborts the process compiling "
                               "it on a CPU without AVX512-BF16 (an uncaught dnnl::error)")
    transform = attrs.get("coordinate_transformation_mode", "half_pixel")
    if transform not in ("half_pixel", "align_corners"):
        raise UnsupportedError(f"oneDNN's graph InterpolateBackward has no {transform!r}")
    out_sp = tuple(a.out_size for a in problem.axes)
    sizes = inputs.get("sizes") if inputs.get("sizes") is not None else attrs.get("sizes")
    scales = () if sizes is not None or attrs.get("scales") is None else tuple(
        float(v) for v in attrs["scales"])
    sizes = () if scales else out_sp
    src_shape = tuple(problem.out_shape)
    dx = np.empty(src_shape, dy.dtype)
    with L.lock:
        _own, compiled, lts = _graph_interpolate_backward(
            src_shape, tuple(dy.shape), dtype, attrs["mode"], transform,
            attrs.get("data_format", "NXC"), sizes, scales)
        src_dummy = np.zeros(1, dy.dtype)  # the op reads src's shape only
        tensors = []
        try:
            for lt, arr in zip(lts, (src_dummy, dy, dx)):
                t = ctypes.c_void_p()
                L.ok(L.lib.dnnl_graph_tensor_create(ctypes.byref(t), ctypes.byref(lt),
                                                     L.engine, ctypes.c_void_p(ptr(arr))),
                      "graph_tensor_create")
                tensors.append(t)
            ins = (ctypes.c_void_p * 2)(tensors[0], tensors[1])
            outs = (ctypes.c_void_p * 1)(tensors[2])
            L.ok(L.lib.dnnl_graph_compiled_partition_execute(
                compiled, L.stream, ctypes.c_size_t(2), ins, ctypes.c_size_t(1), outs),
                "graph_compiled_partition_execute")
            L.ok(L.lib.dnnl_stream_wait(L.stream), "stream_wait")
        finally:
            for t in tensors:
                L.lib.dnnl_graph_tensor_destroy(t)
    return dx


GRAPH_KERNEL_CONFIGS = (KernelConfig(INTERPOLATE_BACKWARD, GRAPH_BACKEND,
                                     graph_interpolate_backward),)
