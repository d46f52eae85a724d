"""The ``onednn`` peer: oneDNN's own CPU primitives through its C API, loaded with ctypes
(``pip install 'tfcompat[onednn]'``: PyPI's ``onednn-cpu-gomp==2023.2.0``, oneDNN 3.2, a
``libdnnl.so.3`` in the environment's ``lib/``; ``TFCOMPAT_DNNL_LIB`` names another file).

- The resampling backward primitive (``dnnl_resampling_backward_primitive_desc_create``),
  algorithm ``resampling_nearest`` or ``resampling_linear``, 1 to 3 spatial axes, NCX and NXC.
  oneDNN's resampling has one coordinate mapping, half-pixel centres, and no align-corners:
  InterpolateBackward ``half_pixel`` (and ``tf_half_pixel_for_nn``), and the half-pixel modes of
  ResizeBilinearGrad and ResizeNearestNeighborGrad; everything else is unsupported.
  ResizeGrad's ``scales`` become the primitive's ``factors``.
- Convolution backward data (``dnnl_convolution_backward_data_primitive_desc_create``,
  ``convolution_direct``): strides, dilations (oneDNN counts them from 0), asymmetric padding,
  NHWC and NCHW. The primitive picks its own memory formats (``format_tag_any``) and the data
  is reordered to and from the caller's, as a framework does.
- dtypes: float32, bfloat16, float16 where the CPU's oneDNN implements them; float64 and
  integers are unsupported (oneDNN has no such kernels).

The bindings are tfcompat/_dnnl.py's.
"""
import ctypes
import functools

import numpy as np

from .. import _conv, _resample as rs
from .._dnnl import (ARG_DIFF_DST, ARG_DIFF_SRC, ARG_DST, ARG_SRC, ARG_WEIGHTS, BF16,
                     CONVOLUTION_DIRECT, F16, F32, FORWARD_TRAINING, QUERY_DIFF_DST_MD,
                     QUERY_DIFF_SRC_MD, QUERY_WEIGHTS_MD, RESAMPLING_LINEAR, RESAMPLING_NEAREST,
                     Dims, library, missing, plain_strides, ptr)  # noqa: F401 (missing: the peer's)
from .._resample import Rule
from ..kernel_names import (CONV2D_BACKPROP_INPUT, INTERPOLATE_BACKWARD, RESIZE_BILINEAR_GRAD,
                            RESIZE_GRAD, RESIZE_NEAREST_NEIGHBOR_GRAD)
from ..registry import KernelConfig, UnsupportedError

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


def _data_order(ndim, channels_last):
    """Storage order of logical (N, C, spatial...) dims for NCX or NXC data."""
    if channels_last:
        return [0] + list(range(2, ndim)) + [1]
    return list(range(ndim))


class _Step:
    """A created primitive with its memory descriptors: the user's and the primitive's."""

    def __init__(self, prim, impl, user, want):
        self.prim, self.impl, self.user, self.want = prim, impl, user, want


@functools.lru_cache(maxsize=64)
def _resampling(alg, in_logical, out_logical, dtype, channels_last, factors):
    L = library()
    ndim = len(in_logical)
    order = _data_order(ndim, channels_last)
    src = L.md(in_logical, dtype, plain_strides(in_logical, order))
    dst = L.md(out_logical, dtype, plain_strides(out_logical, order))
    fac = (ctypes.c_float * len(factors))(*factors) if factors else None
    fwd = ctypes.c_void_p()
    L._ok(L.lib.dnnl_resampling_forward_primitive_desc_create(
        ctypes.byref(fwd), L.engine, FORWARD_TRAINING, alg, fac, src, dst, None),
        "resampling_forward_primitive_desc_create")
    pd = ctypes.c_void_p()
    L._ok(L.lib.dnnl_resampling_backward_primitive_desc_create(
        ctypes.byref(pd), L.engine, alg, fac, src, dst, fwd, None),
        "resampling_backward_primitive_desc_create")
    return L.primitive(pd), L.impl(pd), src, dst


_HALF = (Rule.LINEAR_HALF_PIXEL, Rule.NEAREST_HALF_PIXEL, Rule.LINEAR_ORT_HALF_PIXEL)


def _resample(problem):
    L = library()
    axes = problem.layout.axes
    rule = axes[0].rule
    if rule not in _HALF:
        raise UnsupportedError("oneDNN's resampling has half-pixel centres only, no "
                               f"align_corners or asymmetric mapping (got {axes[0].describe()})")
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
    with L.lock:
        prim, impl, src, dst = _resampling(alg, in_logical, out_logical, dtype,
                                           problem.channels_last, factors)
        LAST_IMPL[problem.kernel] = impl
        m_dy = L.memory(dst.value, ptr(dy))
        m_dx = L.memory(src.value, ptr(dx))
        try:
            L.execute(prim, [(ARG_DIFF_DST, m_dy), (ARG_DIFF_SRC, m_dx)])
        finally:
            L.lib.dnnl_memory_destroy(m_dy)
            L.lib.dnnl_memory_destroy(m_dx)
    return dx


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
    and the caller's plain layouts."""
    L = library()
    order = _data_order(4, channels_last)
    user_dx = L.md(x_logical, dtype, plain_strides(x_logical, order))
    user_dy = L.md(y_logical, dtype, plain_strides(y_logical, order))
    # the caller's HWIO filter seen as oneDNN's logical (O, I, H, W)
    user_w = L.md(w_logical, dtype, plain_strides(w_logical, [2, 3, 1, 0]))
    any_x, any_w, any_y = (L.md(s, dtype) for s in (x_logical, w_logical, y_logical))
    args = (Dims(*strides), Dims(*dilates), Dims(*pad_l), Dims(*pad_r))
    fwd = ctypes.c_void_p()
    L._ok(L.lib.dnnl_convolution_forward_primitive_desc_create(
        ctypes.byref(fwd), L.engine, FORWARD_TRAINING, CONVOLUTION_DIRECT, any_x, any_w, None,
        any_y, *args, None), "convolution_forward_primitive_desc_create")
    pd = ctypes.c_void_p()
    L._ok(L.lib.dnnl_convolution_backward_data_primitive_desc_create(
        ctypes.byref(pd), L.engine, CONVOLUTION_DIRECT, any_x, any_w, any_y, *args, fwd, None),
        "convolution_backward_data_primitive_desc_create")
    want = {q: L.lib.dnnl_primitive_desc_query_md(pd, q, 0)
            for q in (QUERY_DIFF_SRC_MD, QUERY_WEIGHTS_MD, QUERY_DIFF_DST_MD)}
    steps = {}
    for q, user in ((QUERY_DIFF_SRC_MD, user_dx), (QUERY_WEIGHTS_MD, user_w),
                    (QUERY_DIFF_DST_MD, user_dy)):
        if L.same(user.value, want[q]):
            steps[q] = None
        elif q == QUERY_DIFF_SRC_MD:
            steps[q] = (L.reorder(want[q], user.value), L.size(want[q]))
        else:
            steps[q] = (L.reorder(user.value, want[q]), L.size(want[q]))
    return L.primitive(pd), L.impl(pd), want, (user_dx, user_w, user_dy), steps


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
        prim, impl, want, users, steps = _conv_steps(
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
)
