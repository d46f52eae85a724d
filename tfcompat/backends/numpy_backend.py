"""The ``numpy`` backend: a readable float64 reference that never touches TensorFlow.

Coordinates are computed here from docs/semantics.md, independently of the Cython tables, in float32
NumPy arithmetic (``np.float32`` scalars and arrays, so nothing is promoted to float64). The
sums are taken in float64 (int64 for integer nearest-neighbour grads, wrapped on the final
cast) and rounded once to the output dtype. Resampling is applied one spatial axis at a time:
``dx = dy x_1 M_1^T x_2 M_2^T ...`` where ``M_k`` is that axis's [resized, original] weight
matrix, stored as index/weight pairs.
"""
import numpy as np

from .. import _forward as fw, _resample as rs
from ..conv import problem as _conv
from .._resample import Rule
from ..kernel_names import (CONV2D_BACKPROP_INPUT, INTERPOLATE_BACKWARD, RESIZE_BILINEAR,
                            RESIZE_BILINEAR_GRAD, RESIZE_GRAD, RESIZE_NEAREST_NEIGHBOR,
                            RESIZE_NEAREST_NEIGHBOR_GRAD)
from ..registry import KernelConfig

F32 = np.float32
BACKEND = "numpy"


def _tf_scale(in_size, out_size, align):
    # TF CalculateResizeScale; TF 2.21's grads use in/out when in == 1 (docs/semantics.md)
    if align and out_size > 1 and in_size != 1:
        return F32(in_size - 1) / F32(out_size - 1)
    return F32(in_size) / F32(out_size)


def _roundf(s):
    """C roundf (halves away from zero), exact: done in float64 on float32 values."""
    s = s.astype(np.float64)
    return np.sign(s) * np.floor(np.abs(s) + 0.5)


def axis_taps(axis):
    """[(index array, float32 weight array)] for one axis: one pair per tap."""
    I, O, rule = axis.in_size, axis.out_size, axis.rule
    x = np.arange(O, dtype=F32)
    half = F32(0.5)
    if not axis.linear:
        scale = _tf_scale(I, O, rule in (Rule.NEAREST_ALIGN_CORNERS, Rule.NEAREST_ALIGN_HALF))
        if rule == Rule.NEAREST_HALF_PIXEL:
            idx = np.floor((x + half) * scale)
        elif rule == Rule.NEAREST_ASYMMETRIC:
            idx = np.floor(x * scale)
        elif rule == Rule.NEAREST_ALIGN_CORNERS:
            idx = _roundf(x * scale)
        else:
            idx = _roundf((x + half) * scale)
        idx = np.minimum(idx.astype(np.int64), I - 1)
        return [(idx, np.ones(O, dtype=F32))]
    if rule in (Rule.LINEAR_ORT_HALF_PIXEL, Rule.LINEAR_ORT_ALIGN_CORNERS):
        if rule == Rule.LINEAR_ORT_ALIGN_CORNERS:
            scale = F32(I - 1) / F32(O - 1) if O > 1 else F32(0)
            s = scale * x
        else:
            scale = F32(1) / F32(axis.ort_scale) if axis.ort_scale > 0 else F32(I) / F32(O)
            s = np.maximum(scale * (x + half) - half, F32(0))
        i0 = np.minimum(s.astype(np.int64), I - 1)
        i1 = np.where(i0 < I - 1, i0 + 1, i0)
        l1 = s - i0.astype(F32)
        return [(i0, F32(1) - l1), (i1, l1)]
    scale = _tf_scale(I, O, rule == Rule.LINEAR_ALIGN_CORNERS)
    if rule == Rule.LINEAR_HALF_PIXEL or (rule == Rule.LINEAR_PYTORCH_HALF_PIXEL and O > 1):
        s = (x + half) * scale - half
    elif rule == Rule.LINEAR_PYTORCH_HALF_PIXEL:
        s = np.zeros(O, dtype=F32)
    else:
        s = x * scale
    fl = np.floor(s)
    lo = np.maximum(fl.astype(np.int64), 0)
    hi = np.minimum(np.ceil(s).astype(np.int64), I - 1)
    lerp = s - fl
    return [(lo, F32(1) - lerp), (hi, lerp)]


def _apply_axis(data, axis_pos, in_size, taps, weigh=True):
    """Sum ``data`` along ``axis_pos`` into ``in_size`` slots: out[idx[x]] += data[x] * w[x]."""
    moved = np.moveaxis(data, axis_pos, 0)
    rest = moved.shape[1:]
    flat = moved.reshape(moved.shape[0], -1)
    out = np.zeros((in_size, flat.shape[1]), dtype=flat.dtype)
    if flat.size:
        # IEEE arithmetic, as TF's kernels do it: an inf grad times a zero weight is NaN in
        # the result, not a warning
        with np.errstate(invalid="ignore", over="ignore"):
            for idx, w in taps:
                _segment_add(out, idx, flat * w.astype(np.float64)[:, None] if weigh else flat)
    return np.moveaxis(out.reshape((in_size,) + rest), 0, axis_pos)


def _segment_add(out, idx, contrib):
    order = np.argsort(idx, kind="stable")
    sidx = idx[order]
    starts = np.flatnonzero(np.r_[True, sidx[1:] != sidx[:-1]])
    out[sidx[starts]] += np.add.reduceat(contrib[order], starts, axis=0)


def resample(problem, absolute=False):
    """Reference result of any resize-type problem. ``absolute=True`` applies the same
    backward to |dy| (the conformance metric's magnitude sum, docs/semantics.md)."""
    if problem.empty:
        return np.zeros(problem.out_shape, dtype=problem.out_dtype)
    integer = problem.dy.dtype.kind in "iu"
    data = problem.dy.astype(np.int64 if integer else np.float64)
    if absolute:
        data = np.abs(data)
    first = 1 if problem.channels_last else 2
    for k, axis in enumerate(problem.axes):
        data = _apply_axis(data, first + k, axis.in_size, axis_taps(axis), weigh=not integer)
    return data.astype(problem.out_dtype)  # integers wrap like TF's int8/int32 sums


def _tap_span(out_size, in_size, stride, dilation, pad, k):
    """(dy slice, dx slice) of one axis for tap k: the dy indices o whose position
    o * stride - pad + k * dilation lies inside dx, and those positions (None if there are
    none). Slices, so that no padded copy of dx is made, however large the stride or pad."""
    shift = k * dilation - pad                       # position of o = 0
    first = max(0, -(shift // stride))               # the least o with a position >= 0
    last = min(out_size - 1, (in_size - 1 - shift) // stride)
    if last < first:
        return None
    start = first * stride + shift
    return slice(first, last + 1), slice(start, start + (last - first) * stride + 1, stride)


def conv_backprop_input(problem, absolute=False):
    """dx[n, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw, ci] += dy[n, oy, ox, co] * w[ky, kx, ci, co]."""
    p = problem
    if p.empty:
        return np.zeros(p.out_shape, dtype=p.dtype)
    dy = p.dy.astype(np.float64)
    w = p.filter.astype(np.float64)
    if absolute:
        dy, w = np.abs(dy), np.abs(w)
    if not p.channels_last:
        dy = dy.transpose(0, 2, 3, 1)
    dx = np.zeros((p.N, p.H, p.W, p.C), dtype=np.float64)
    for ky in range(p.fh):
        rows = _tap_span(p.OH, p.H, p.sh, p.dh, p.pad_top, ky)
        for kx in range(p.fw):
            cols = _tap_span(p.OW, p.W, p.sw, p.dw, p.pad_left, kx)
            if rows is not None and cols is not None:
                dx[:, rows[1], cols[1], :] += dy[:, rows[0], cols[0], :] @ w[ky, kx].T
    if not p.channels_last:
        dx = dx.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(dx).astype(p.dtype)


def resize_bilinear_grad(inputs, attrs):
    return resample(rs.resize_bilinear_grad_problem(inputs, attrs))


def resize_nearest_neighbor_grad(inputs, attrs):
    return resample(rs.resize_nearest_neighbor_grad_problem(inputs, attrs))


def conv2d_backprop_input(inputs, attrs):
    return conv_backprop_input(_conv.conv_problem(inputs, attrs))


def interpolate_backward(inputs, attrs):
    return resample(rs.interpolate_backward_problem(inputs, attrs))


def resize_grad(inputs, attrs):
    return resample(rs.resize_grad_problem(inputs, attrs))


def forward(problem, absolute=False):
    """Reference forward resize: each output the sum over its taps (the same taps as the
    backward's, axis_taps) of w_y * w_x * image, in float64 (the images read as float32 for
    the bilinear resize, as TF reads them), so within tolerance of TF's float32 lerps, not
    their bits; nearest is a copy. An image resized to its own size is the image (TF's cast).
    ``absolute=True``: the same of |image| (the metric's magnitude)."""
    if problem.empty:
        return np.zeros(problem.out_shape, dtype=problem.out_dtype)
    data = problem.images
    if problem.linear:
        data = data.astype(F32).astype(np.float64)
        if absolute:
            data = np.abs(data)
        if problem.identity:
            return data.astype(problem.out_dtype)
    elif absolute:
        data = np.abs(data.astype(np.float64))
    for k, axis in enumerate(problem.axes):
        taps = axis_taps(axis)
        moved = np.moveaxis(data, 1 + k, 0)
        if problem.linear:
            out = sum(moved[idx] * w.astype(np.float64).reshape((-1,) + (1,) * (moved.ndim - 1))
                      for idx, w in taps)
        else:
            out = moved[taps[0][0]]
        data = np.moveaxis(out, 0, 1 + k)
    return np.ascontiguousarray(data).astype(problem.out_dtype)


def resize_bilinear(inputs, attrs):
    return forward(fw.resize_bilinear_problem(inputs, attrs))


def resize_nearest_neighbor(inputs, attrs):
    return forward(fw.resize_nearest_neighbor_problem(inputs, attrs))


KERNEL_CONFIGS = (
    KernelConfig(RESIZE_BILINEAR, BACKEND, resize_bilinear),
    KernelConfig(RESIZE_NEAREST_NEIGHBOR, BACKEND, resize_nearest_neighbor),
    KernelConfig(RESIZE_BILINEAR_GRAD, BACKEND, resize_bilinear_grad),
    KernelConfig(RESIZE_NEAREST_NEIGHBOR_GRAD, BACKEND, resize_nearest_neighbor_grad),
    KernelConfig(CONV2D_BACKPROP_INPUT, BACKEND, conv2d_backprop_input),
    KernelConfig(INTERPOLATE_BACKWARD, BACKEND, interpolate_backward),
    KernelConfig(RESIZE_GRAD, BACKEND, resize_grad),
)
