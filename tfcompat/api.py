"""The functional API: snake_case functions with ``tf.raw_ops`` argument names.

Each function maps its arguments onto the registry's tfjs-style ``inputs``/``attrs`` and calls
the kernel of the chosen backend, so a backend registered by a user works here too.
"""
import re

import numpy as np

from . import _checks as ck
from .conv import problem as _conv
from .kernel_names import (CONV2D_BACKPROP_INPUT, INTERPOLATE_BACKWARD, RESIZE_BILINEAR,
                           RESIZE_BILINEAR_GRAD, RESIZE_GRAD, RESIZE_NEAREST_NEIGHBOR,
                           RESIZE_NEAREST_NEIGHBOR_GRAD)
from . import registry
from .ops import OPS
from .registry import get_kernel


# The registry's input and attribute names (tfjs's) as each function's own, for its errors
_NAMES = {name: op.renames for name, op in OPS.items() if op.renames}
_PATTERNS = {k: re.compile(r"(?<![\w.'\"])(" + "|".join(map(re.escape, v)) + r")(?![\w])")
             for k, v in _NAMES.items()}
# a string pad is TF's ``padding`` attribute, not its explicit_paddings
_PAD_STRING = re.compile(r"(?<![\w.'\"])pad '(same|valid)'")


def _run(kernel_name, backend, inputs, attrs):
    config = registry._registry.get((backend or registry._default_backend, kernel_name))
    if config is None:
        config = get_kernel(kernel_name, backend)  # raises, naming what is registered
    try:
        return config.kernel_func(inputs, attrs)
    except (ValueError, TypeError, MemoryError) as exc:
        if type(exc) not in (ValueError, TypeError, MemoryError) or kernel_name not in _NAMES:
            raise
        message = rename(kernel_name, str(exc))
        if message == str(exc):
            raise
        raise type(exc)(message) from None


def rename(kernel_name, message):
    """A policy-layer message with the registry's input and attribute names (tfjs's) replaced
    by the op's own (TF's)."""
    if kernel_name not in _NAMES:
        return message
    names = _NAMES[kernel_name]
    if kernel_name == CONV2D_BACKPROP_INPUT:
        message = _PAD_STRING.sub(lambda m: f"padding '{m.group(1).upper()}'", message)
    return _PATTERNS[kernel_name].sub(lambda m: names[m.group(1)], message)


def resize_bilinear(images, size, *, align_corners=False, half_pixel_centers=False,
                    backend=None):
    """TF's bilinear resize (``tf.raw_ops.ResizeBilinear``), bit for bit on the CPU.

    ``out = top + (bottom - top) * y_lerp`` with ``top = tl + (tr - tl) * x_lerp`` (and
    ``bottom`` likewise) over the four source pixels of each output pixel, in float32 with
    TF's float32 coordinates (docs/semantics.md §12).

    Parameters
    ----------
    images : array-like, shape [B, I_h, I_w, C]: float16, bfloat16, float32, float64, int8,
        uint8, int16, uint16, int32 or int64 (each value read as float32, as TF reads it).
    size : two positive ints, [O_h, O_w].
    align_corners, half_pixel_centers : bool
        As in ``tf.raw_ops.ResizeBilinear``; both True is an error.

    Returns
    -------
    numpy.ndarray, float32, of shape [B, O_h, O_w, C].
    """
    return _run(RESIZE_BILINEAR, backend, {"images": images},
                {"size": size, "alignCorners": align_corners,
                 "halfPixelCenters": half_pixel_centers})


def resize_nearest_neighbor(images, size, *, align_corners=False, half_pixel_centers=False,
                            backend=None):
    """TF's nearest-neighbour resize (``tf.raw_ops.ResizeNearestNeighbor``): each output
    pixel a copy of the source pixel TF's float32 coordinates pick (docs/semantics.md §12).

    Parameters
    ----------
    images : array-like, shape [B, I_h, I_w, C], of the dtypes of :func:`resize_bilinear`;
        height and width below 2^24.
    size : two positive ints, [O_h, O_w].
    align_corners, half_pixel_centers : bool
        As in ``tf.raw_ops.ResizeNearestNeighbor``; both True is an error.

    Returns
    -------
    numpy.ndarray of the images' dtype and shape [B, O_h, O_w, C].
    """
    return _run(RESIZE_NEAREST_NEIGHBOR, backend, {"images": images},
                {"size": size, "alignCorners": align_corners,
                 "halfPixelCenters": half_pixel_centers})


def resize_bilinear_grad(grads, original_image, *, align_corners=False, half_pixel_centers=False,
                         backend=None):
    """Gradient of a bilinear resize with respect to the original image.

    ``dx[b, lo_y|hi_y, lo_x|hi_x, c] += (grads[b, y, x, c] * w_y) * w_x`` over the four corners
    of every resized pixel, with TF's float32 coordinates (docs/semantics.md).

    Parameters
    ----------
    grads : array-like, float32 (or float64, an extension), shape [B, O_h, O_w, C]
    original_image : array-like, shape [B, I_h, I_w, C]; only its shape and dtype are used.
        The output has its dtype (float16, bfloat16, float32 or float64).
    align_corners, half_pixel_centers : bool
        As in ``tf.raw_ops.ResizeBilinearGrad``; both True is an error.

    Returns
    -------
    numpy.ndarray of shape [B, I_h, I_w, C].
    """
    return _run(RESIZE_BILINEAR_GRAD, backend, {"dy": grads, "images": original_image},
                {"alignCorners": align_corners, "halfPixelCenters": half_pixel_centers})


def resize_nearest_neighbor_grad(grads, size, *, align_corners=False, half_pixel_centers=False,
                                 backend=None):
    """Gradient of a nearest-neighbour resize: each ``grads`` element is added to the one
    original pixel it was copied from (docs/semantics.md).

    ``size`` is ``[I_h, I_w]``. dtypes: uint8, int8, int32 (sums wrap as in TF), float16,
    bfloat16 (summed in float32, rounded once), float32, float64. Both flags True is accepted,
    as TF's grad accepts it: the index is ``roundf((x + 0.5) * scale)`` with the align-corners
    scale.
    """
    if (type(grads) is np.ndarray and type(size) in (list, tuple) and len(size) == 2
            and type(size[0]) is int and type(size[1]) is int and grads.ndim == 4
            and grads.dtype in _NEAREST_DTYPES and size[0] > 0 and size[1] > 0
            and size[0] * size[1] <= _FAST_PIXELS):
        # the common call, with its checks inline: with the interpreter's caches cold (other
        # frameworks running between our calls) each function call costs microseconds
        # (docs/performance.md); the parser checks the rest
        shape = (grads.shape[0], size[0], size[1], grads.shape[3])
        return _run(RESIZE_NEAREST_NEIGHBOR_GRAD, backend,
                    {"dy": grads, "images": np.ndarray(shape, grads.dtype, _ZEROS, 0, _STRIDES0)},
                    {"alignCorners": align_corners, "halfPixelCenters": half_pixel_centers})
    grads = ck.as_array(grads, "grads")
    size = ck.as_int_tuple(size, "size", (2,))
    ck.check_rank(grads, "grads", 4, "[batch, height, width, channels]")
    if min(size) < 1:
        raise ValueError(f"size: got {list(size)}; spatial dimension {size.index(min(size))} is "
                         f"{min(size)}, expected >= 1")
    shape = (grads.shape[0], size[0], size[1], grads.shape[3])
    ck.check_size(shape, "size", max(grads.dtype.itemsize, 4))
    return _run(RESIZE_NEAREST_NEIGHBOR_GRAD, backend,
                {"dy": grads, "images": _shape_only(shape, grads.dtype)},
                {"alignCorners": align_corners, "halfPixelCenters": half_pixel_centers})


_ZEROS = bytes(16)
_STRIDES0 = (0, 0, 0, 0)
_NEAREST_DTYPES = frozenset(OPS[RESIZE_NEAREST_NEIGHBOR_GRAD].dtypes("dy"))
_FAST_PIXELS = 1 << 30  # larger sizes take the checks that name them (and the machine's memory)


def _shape_only(shape, dtype):
    """The registry's ``images`` input for a call that has only its size: a read-only array of
    zeros with no memory of its own (only its shape and dtype are used)."""
    return np.ndarray(shape, dtype, buffer=_ZEROS, strides=(0,) * len(shape))


def conv2d_backprop_input(input_sizes, filter, out_backprop, *, strides, padding,
                          explicit_paddings=(), data_format="NHWC", dilations=(1, 1, 1, 1),
                          backend=None):
    """Gradient of ``conv2d`` with respect to its input, as ``tf.raw_ops.Conv2DBackpropInput``.

    ``dx[n, oy*sh - pad_top + ky*dh, ox*sw - pad_left + kx*dw, ci] += dy[n, oy, ox, co] *
    filter[ky, kx, ci, co]``. ``input_sizes`` has 4 values, or 2 ([H, W]: N from
    ``out_backprop``, C from ``filter.shape[2]``). ``padding`` is 'SAME', 'VALID' or 'EXPLICIT'
    (with 8 ``explicit_paddings`` in data order). NHWC and NCHW, dilations and strides together,
    on every CPU. dtypes float16, bfloat16 (computed in float32), float32, float64.
    """
    filter, out_backprop = _one_type(filter, out_backprop)
    attrs = _conv.functional_attrs(input_sizes, filter, out_backprop, strides, padding,
                                   explicit_paddings, data_format, dilations)
    return _run(CONV2D_BACKPROP_INPUT, backend, {"dy": out_backprop, "filter": filter}, attrs)


def _one_type(*values):
    """Inputs of one type attribute (the conv's T: filter, then out_backprop) as TF's raw op
    binds them when one is a Python list, tuple or number: T is the dtype of the first TF
    tensor among them, else of the first input (a Python value: float32), and the others are
    converted to it (a list beside a float64 filter is float64). Without a Python value the
    dtypes must agree (tfcompat's TypeError; TF would cast a NumPy array)."""
    python = [isinstance(v, (list, tuple, int, float)) and not isinstance(v, bool)
              for v in values]
    if not any(python):
        return values
    arrays = [ck.as_array(v, name) for v, name in zip(values, ("filter", "out_backprop"))]
    tensors = [a for v, a in zip(values, arrays) if type(v).__module__.startswith("tensorflow")]
    dtype = (tensors or arrays)[0].dtype
    if dtype not in ck.FLOAT_DTYPES:     # (the conv's dtype error names it)
        return values
    # a Python value straight to T, as TF converts it (not through float32)
    return tuple(np.asarray(v, dtype) if p else a.astype(dtype, copy=False)
                 for v, a, p in zip(values, arrays, python))


def conv_strategy(input_sizes, filter, out_backprop, *, strides, padding, explicit_paddings=(),
                  data_format="NHWC", dilations=(1, 1, 1, 1)):
    """Which of the cython backend's conv strategies ``conv2d_backprop_input`` with these
    arguments runs on this machine, with the current thread count and TFCOMPAT_CONV_STRATEGY,
    and why each strategy before it declined: a ``tfcompat.conv.ConvChoice`` (``name``,
    ``declined``: (name, reason) pairs; docs/architecture.md#the-conv-strategies).
    """
    from .conv.run import strategy_of
    attrs = _conv.functional_attrs(input_sizes, filter, out_backprop, strides, padding,
                                   explicit_paddings, data_format, dilations)
    return strategy_of(_conv.conv_problem({"dy": out_backprop, "filter": filter}, attrs))


def interpolate_backward(src, diff_dst, *, mode, coordinate_transformation_mode="half_pixel",
                         sizes=None, scales=None, data_format="NXC", backend=None):
    """oneDNN graph ``InterpolateBackward``: the gradient of an N-D (1 to 3 spatial axes)
    nearest or linear interpolation, NXC or NCX (docs/semantics.md).

    ``mode``: 'nearest', 'linear', 'bilinear' (2-D), 'trilinear' (3-D).
    ``coordinate_transformation_mode``: 'half_pixel', 'align_corners', and the extensions
    'asymmetric', 'pytorch_half_pixel', 'tf_half_pixel_for_nn'. ``sizes``/``scales`` describe
    the resized shape only and are checked against ``diff_dst`` (sizes win). The output has
    the shape and dtype of ``src`` (float16, bfloat16, float32, float64).
    """
    attrs = {"mode": mode, "coordinate_transformation_mode": coordinate_transformation_mode,
             "data_format": data_format}
    if sizes is not None:
        attrs["sizes"] = sizes
    if scales is not None:
        attrs["scales"] = scales
    return _run(INTERPOLATE_BACKWARD, backend, {"src": src, "diff_dst": diff_dst}, attrs)


def resize_grad(dy, x, *, roi=None, scales=None, mode="linear",
                coordinate_transformation_mode="half_pixel", backend=None):
    """ONNX Runtime training ``ResizeGrad`` (com.microsoft): NCHW linear, with ORT's source
    index ``max(0, scale*(x+0.5) - 0.5)`` and ``scale = 1/scales[i]`` when ``scales`` are
    given (docs/semantics.md). ``roi`` is accepted and ignored, as in ORT. Deterministic, on
    the CPU.
    """
    inputs = {"dY": dy, "X": x, "roi": roi, "scales": scales}
    return _run(RESIZE_GRAD, backend, inputs,
                {"mode": mode, "coordinate_transformation_mode": coordinate_transformation_mode})
