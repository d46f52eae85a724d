"""The ``tensorflow`` backend: the kernels delegating to TensorFlow's own ops.

TensorFlow is imported on the first call, never on ``import tfcompat``. Ops run where TF
places them (a GPU when TF has one) unless :func:`on_device` says otherwise.

* ResizeBilinearGrad / ResizeNearestNeighborGrad / Conv2DBackpropInput: TF's raw grad ops;
  ResizeBilinear / ResizeNearestNeighbor: TF's raw forward ops.
* InterpolateBackward: the raw grad op for 2-D channels-last; otherwise the gradient, taken
  with ``tf.GradientTape``, of a chain of one-axis resizes (each a 2-D TF resize whose other
  axis is resized to its own size, which is the identity in every TF mapping).
* ResizeGrad: TF's half-pixel / align-corners bilinear grad, which is ORT's mapping whenever
  ORT's scale equals TF's size ratio; other ``scales`` raise ``tfcompat.UnsupportedError``.
"""
import contextlib

import numpy as np

from .. import _checks as ck, _forward as fw, _resample as rs
from ..conv import problem as _conv
from .._resample import Rule
from ..kernel_names import (CONV2D_BACKPROP_INPUT, INTERPOLATE_BACKWARD, RESIZE_BILINEAR,
                            RESIZE_BILINEAR_GRAD, RESIZE_GRAD, RESIZE_NEAREST_NEIGHBOR,
                            RESIZE_NEAREST_NEIGHBOR_GRAD)
from ..registry import KernelConfig, UnsupportedError

BACKEND = "tensorflow"
_device = None


def _tf():
    try:
        import tensorflow as tf
    except ImportError as exc:
        raise ImportError("the 'tensorflow' backend needs TensorFlow: pip install "
                          "'tfcompat[tf]' (tensorflow-cpu)") from exc
    return tf


@contextlib.contextmanager
def on_device(device):
    """Run this backend's kernels under ``tf.device(device)`` (e.g. '/CPU:0', '/GPU:0')."""
    global _device
    old, _device = _device, device
    try:
        yield
    finally:
        _device = old


def _scope(tf):
    return tf.device(_device) if _device else contextlib.nullcontext()


def _to_numpy(t, dtype):
    return np.asarray(t.numpy()).astype(dtype, copy=False)


# rule -> TF's (align_corners, half_pixel_centers)
_TF_LINEAR = {Rule.LINEAR_HALF_PIXEL: (False, True), Rule.LINEAR_ALIGN_CORNERS: (True, False),
              Rule.LINEAR_ASYMMETRIC: (False, False)}
_TF_NEAREST = {Rule.NEAREST_HALF_PIXEL: (False, True), Rule.NEAREST_ALIGN_CORNERS: (True, False),
               Rule.NEAREST_ASYMMETRIC: (False, False), Rule.NEAREST_ALIGN_HALF: (True, True)}


def _raw_resize_grad(tf, problem, dy_nhwc, align, half):
    if problem.linear:
        img = tf.zeros((problem.batch,) + tuple(a.in_size for a in problem.axes)
                       + (problem.channels,), dtype=tf.as_dtype(problem.out_dtype))
        return tf.raw_ops.ResizeBilinearGrad(grads=dy_nhwc, original_image=img,
                                             align_corners=align, half_pixel_centers=half)
    return tf.raw_ops.ResizeNearestNeighborGrad(
        grads=dy_nhwc, size=[a.in_size for a in problem.axes], align_corners=align,
        half_pixel_centers=half)


def _tf_pair(problem):
    tf = _tf()
    if problem.linear and problem.dy.dtype != ck.FLOAT32:
        raise UnsupportedError("TF's ResizeBilinearGrad takes float32 grads only")
    align, half = (_TF_LINEAR if problem.linear else _TF_NEAREST)[problem.axes[0].rule]
    with _scope(tf):
        out = _raw_resize_grad(tf, problem, tf.constant(problem.dy), align, half)
    return _to_numpy(out, problem.out_dtype)


def _axis_rule(axis):
    if axis.rule == Rule.LINEAR_PYTORCH_HALF_PIXEL:
        if axis.out_size == 1 and axis.in_size > 1:
            raise UnsupportedError("pytorch_half_pixel with a resized size of 1 has no TF op")
        return True, _TF_LINEAR[Rule.LINEAR_HALF_PIXEL]
    if axis.linear:
        return True, _TF_LINEAR[axis.rule]
    if axis.rule == Rule.NEAREST_ALIGN_HALF:
        raise UnsupportedError("align_corners with half_pixel nearest has no TF forward op")
    return False, _TF_NEAREST[axis.rule]


def _interpolate(problem):
    tf = _tf()
    rules = [_axis_rule(a) for a in problem.axes]
    dtype = tf.as_dtype(problem.compute_dtype if problem.out_dtype in ck.HALF_DTYPES
                        else problem.out_dtype)
    with _scope(tf):
        if (len(problem.axes) == 2 and problem.channels_last and problem.dy.dtype == ck.FLOAT32
                and problem.axes[0].rule == problem.axes[1].rule
                and problem.axes[0].rule != Rule.LINEAR_PYTORCH_HALF_PIXEL):
            align, half = rules[0][1]
            out = _raw_resize_grad(tf, problem, tf.constant(problem.dy), align, half)
            return _to_numpy(out, problem.out_dtype)
        x = tf.zeros(problem.out_shape, dtype=dtype)
        first = 1 if problem.channels_last else 2
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = x
            for k, (axis, (linear, (align, half))) in enumerate(zip(problem.axes, rules)):
                shape = y.shape.as_list()
                pos = first + k
                before = int(np.prod(shape[:pos]))
                after = int(np.prod(shape[pos + 1:]))
                y4 = tf.reshape(y, (before, shape[pos], after, 1))
                size = (axis.out_size, after)
                if linear:
                    y4 = tf.compat.v1.image.resize_bilinear(y4, size, align_corners=align,
                                                            half_pixel_centers=half)
                else:
                    y4 = tf.compat.v1.image.resize_nearest_neighbor(
                        y4, size, align_corners=align, half_pixel_centers=half)
                shape[pos] = axis.out_size
                y = tf.reshape(tf.cast(y4, dtype), shape)
        g = tape.gradient(y, x, output_gradients=tf.constant(problem.dy.astype(
            problem.compute_dtype if problem.dy.dtype in ck.HALF_DTYPES else problem.dy.dtype)))
    return _to_numpy(g, problem.out_dtype)


def _resize_grad(problem):
    tf = _tf()
    for a in problem.axes:
        if a.ort_scale > 0 and a.rule == Rule.LINEAR_ORT_HALF_PIXEL and \
                np.float32(1) / np.float32(a.ort_scale) != np.float32(a.in_size) / np.float32(a.out_size):
            raise UnsupportedError("ORT scales that differ from the size ratio have no TF op")
    align = problem.axes[0].rule == Rule.LINEAR_ORT_ALIGN_CORNERS
    dy = np.ascontiguousarray(problem.dy.transpose(0, 2, 3, 1), dtype=np.float32)
    with _scope(tf):
        img = tf.zeros((problem.batch,) + tuple(a.in_size for a in problem.axes)
                       + (problem.channels,), dtype=tf.float32)
        out = tf.raw_ops.ResizeBilinearGrad(grads=tf.constant(dy), original_image=img,
                                            align_corners=align, half_pixel_centers=not align)
    return _to_numpy(out, np.float64).transpose(0, 3, 1, 2).astype(problem.out_dtype)


def _conv_grad(problem):
    tf = _tf()
    p = problem
    pb, pr = p.floor_pads()  # TF's EXPLICIT output size floors
    if p.channels_last:
        pads = [0, 0, p.pad_top, pb, p.pad_left, pr, 0, 0]
        strides, dil = [1, p.sh, p.sw, 1], [1, p.dh, p.dw, 1]
    else:
        pads = [0, 0, 0, 0, p.pad_top, pb, p.pad_left, pr]
        strides, dil = [1, 1, p.sh, p.sw], [1, 1, p.dh, p.dw]
    with _scope(tf):
        out = tf.raw_ops.Conv2DBackpropInput(
            input_sizes=list(p.out_shape), filter=tf.constant(p.filter),
            out_backprop=tf.constant(p.dy), strides=strides, padding="EXPLICIT",
            explicit_paddings=pads, data_format="NHWC" if p.channels_last else "NCHW",
            dilations=dil)
    return _to_numpy(out, p.dtype)


def _run(parser, compute, inputs, attrs):
    problem = parser(inputs, attrs)
    if problem.empty:
        return np.zeros(problem.out_shape, dtype=problem.out_dtype)
    return compute(problem)


def resize_bilinear_grad(inputs, attrs):
    return _run(rs.resize_bilinear_grad_problem, _tf_pair, inputs, attrs)


def resize_nearest_neighbor_grad(inputs, attrs):
    return _run(rs.resize_nearest_neighbor_grad_problem, _tf_pair, inputs, attrs)


def conv2d_backprop_input(inputs, attrs):
    return _run(_conv.conv_problem, _conv_grad, inputs, attrs)


def interpolate_backward(inputs, attrs):
    return _run(rs.interpolate_backward_problem, _interpolate, inputs, attrs)


def resize_grad(inputs, attrs):
    return _run(rs.resize_grad_problem, _resize_grad, inputs, attrs)


def _forward(problem):
    tf = _tf()
    op = tf.raw_ops.ResizeBilinear if problem.linear else tf.raw_ops.ResizeNearestNeighbor
    rule = problem.axes[0].rule
    align, half = (_TF_LINEAR if problem.linear else _TF_NEAREST)[rule]
    with _scope(tf):
        out = op(images=tf.constant(problem.images),
                 size=[a.out_size for a in problem.axes], align_corners=align,
                 half_pixel_centers=half)
    return _to_numpy(out, problem.out_dtype)


def resize_bilinear(inputs, attrs):
    return _run(fw.resize_bilinear_problem, _forward, inputs, attrs)


def resize_nearest_neighbor(inputs, attrs):
    return _run(fw.resize_nearest_neighbor_problem, _forward, inputs, attrs)


KERNEL_CONFIGS = (
    KernelConfig(RESIZE_BILINEAR, BACKEND, resize_bilinear),
    KernelConfig(RESIZE_NEAREST_NEIGHBOR, BACKEND, resize_nearest_neighbor),
    KernelConfig(RESIZE_BILINEAR_GRAD, BACKEND, resize_bilinear_grad),
    KernelConfig(RESIZE_NEAREST_NEIGHBOR_GRAD, BACKEND, resize_nearest_neighbor_grad),
    KernelConfig(CONV2D_BACKPROP_INPUT, BACKEND, conv2d_backprop_input),
    KernelConfig(INTERPOLATE_BACKWARD, BACKEND, interpolate_backward),
    KernelConfig(RESIZE_GRAD, BACKEND, resize_grad),
)
