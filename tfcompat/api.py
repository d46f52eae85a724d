"""The functional API: snake_case functions with ``tf.raw_ops`` argument names.

Each function maps its arguments onto the registry's tfjs-style ``inputs``/``attrs`` and calls
the kernel of the chosen backend, so a backend registered by a user works here too.
"""

import numpy as np

from . import _checks as ck, _conv
from ._resample import ArrayMeta
from .registry import (CONV2D_BACKPROP_INPUT, INTERPOLATE_BACKWARD, RESIZE_BILINEAR_GRAD,
                       RESIZE_GRAD, RESIZE_NEAREST_NEIGHBOR_GRAD, _default_funcs, get_backend,
                       get_kernel)


def _run(kernel_name, backend, inputs, attrs):
    if backend is None:
        func = _default_funcs.get(kernel_name)
        if func is not None:
            return func(inputs, attrs)
    name = get_backend() if backend is None else backend
    return get_kernel(kernel_name, name).kernel_func(inputs, attrs)


def resize_bilinear_grad(grads, original_image, *, align_corners=False, half_pixel_centers=False,
                         backend=None):
    """Gradient of a bilinear resize with respect to the original image.

    ``dx[b, lo_y|hi_y, lo_x|hi_x, c] += (grads[b, y, x, c] * w_y) * w_x`` over the four corners
    of every resized pixel, with TF's float32 coordinates (SPEC.md 1).

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
    original pixel it was copied from (SPEC.md 2).

    ``size`` is ``[I_h, I_w]``. dtypes: uint8, int8, int32 (sums wrap as in TF), float16,
    bfloat16 (summed in float32, rounded once), float32, float64. Both flags True is accepted,
    as TF's grad accepts it: the index is ``roundf((x + 0.5) * scale)`` with the align-corners
    scale.
    """
    images = None
    if (type(grads) is np.ndarray and type(size) in (list, tuple) and len(size) == 2
            and type(size[0]) is int and type(size[1]) is int):
        # the common call, looked up with no function call (with the caches cold, the checks'
        # calls cost 5-10 us of an R4 nearest call, SPEC.md 7)
        images = _known_images.get((grads.shape, grads.dtype, size[0], size[1]))
    if images is None:
        grads = ck.as_array(grads, "grads")
        images = _nearest_images(grads.shape, grads.dtype, ck.as_int_tuple(size, "size", (2,)))
    return _run(RESIZE_NEAREST_NEIGHBOR_GRAD, backend, {"dy": grads, "images": images},
                {"alignCorners": align_corners, "halfPixelCenters": half_pixel_centers})


# (grads shape, dtype, size[0], size[1]) -> images, for calls that passed _nearest_images'
# checks; its keys hold the checked int sizes, so only int sizes can match them
_known_images = {}


def _nearest_images(grads_shape, dtype, size):
    """The registry's ``images`` input for ``size``: a read-only array of zeros with no memory
    of its own (only its shape and dtype are used), after the checks that name ``size``.
    Cached on its arguments (at most 64), as the parsers' checks are (see
    tfcompat/_resample.py)."""
    key = (grads_shape, dtype) + tuple(size)
    images = _known_images.get(key)
    if images is not None:
        return images
    ck.check_rank(ArrayMeta(grads_shape, dtype), "grads", 4, "[batch, height, width, channels]")
    if min(size) < 1:
        raise ValueError(f"size: got {list(size)}; spatial dimension {size.index(min(size))} is "
                         f"{min(size)}, expected >= 1")
    shape = (grads_shape[0], size[0], size[1], grads_shape[3])
    ck.check_size(shape, "images", max(dtype.itemsize, 4))
    images = np.broadcast_to(np.zeros((), dtype=dtype), shape)
    if len(_known_images) >= 64:
        _known_images.clear()
    _known_images[key] = images
    return images


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
    attrs = _conv.functional_attrs(input_sizes, filter, out_backprop, strides, padding,
                                   explicit_paddings, data_format, dilations)
    return _run(CONV2D_BACKPROP_INPUT, backend, {"dy": out_backprop, "filter": filter}, attrs)


def interpolate_backward(src, diff_dst, *, mode, coordinate_transformation_mode="half_pixel",
                         sizes=None, scales=None, data_format="NXC", backend=None):
    """oneDNN graph ``InterpolateBackward``: the gradient of an N-D (1 to 3 spatial axes)
    nearest or linear interpolation, NXC or NCX (SPEC.md 4).

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
    given (SPEC.md 4). ``roi`` is accepted and ignored, as in ORT. Deterministic, on the CPU.
    """
    inputs = {"dY": dy, "X": x, "roi": roi, "scales": scales}
    return _run(RESIZE_GRAD, backend, inputs,
                {"mode": mode, "coordinate_transformation_mode": coordinate_transformation_mode})
