"""Policy for the four resize-type kernels.

Each parser turns the tfjs-style ``inputs``/``attrs`` of one kernel into a
:class:`ResampleProblem`: the validated ``dy`` and its :class:`ResampleLayout` (batch, channels,
layout, dtypes, and one :class:`Axis` per spatial axis naming its coordinate rule). Backends
only compute; everything that can fail is here. The formulas are in docs/semantics.md.
"""
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from . import _checks as ck
from ._simd import kernels as _kernels
from .kernel_names import (INTERPOLATE_BACKWARD, RESIZE_BILINEAR_GRAD, RESIZE_GRAD,
                           RESIZE_NEAREST_NEIGHBOR_GRAD)
from .ops import OPS

# The coordinate rules: one definition, in tfcompat/csrc/rules.h, exported by the extension.
Rule = _kernels.Rule
LINEAR_RULES = frozenset(r for r in Rule if r.name.startswith("LINEAR_"))


def tf_rule(nearest, align_corners, half_pixel_centers):
    """The coordinate rule of TF's resize flags (both True: the nearest grad's, which TF's
    gradient kernel accepts; every other op refuses them first)."""
    if nearest:
        return (Rule.NEAREST_ALIGN_HALF if align_corners and half_pixel_centers
                else Rule.NEAREST_ALIGN_CORNERS if align_corners
                else Rule.NEAREST_HALF_PIXEL if half_pixel_centers else Rule.NEAREST_ASYMMETRIC)
    return (Rule.LINEAR_ALIGN_CORNERS if align_corners else Rule.LINEAR_HALF_PIXEL
            if half_pixel_centers else Rule.LINEAR_ASYMMETRIC)


@dataclass(frozen=True)
class Axis:
    """One spatial axis: original size, resized size, coordinate rule, and for ORT the
    user's ``scales`` entry (0.0 when the scale comes from the sizes)."""
    in_size: int
    out_size: int
    rule: int
    ort_scale: float = 0.0

    @property
    def linear(self):
        return self.rule in LINEAR_RULES

    def describe(self):
        """'linear/half_pixel' and the like: the rule in words, for reports."""
        family, _, mode = self.rule.name.lower().partition("_")
        return f"{family}/{mode}"


class ArrayMeta(NamedTuple):
    """The shape and dtype of an array: all that the checks read, and hashable."""
    shape: tuple
    dtype: np.dtype

    @property
    def ndim(self):
        return len(self.shape)


def _meta(arr):
    return ArrayMeta(arr.shape, arr.dtype)


@dataclass(frozen=True)
class ResampleLayout:
    """Everything about a validated call except dy's values. Hashable, so that backends can
    cache what they derive from it."""
    kernel: str
    dy_dtype: np.dtype
    batch: int
    channels: int
    channels_last: bool
    axes: tuple             # of Axis, 1 to 3
    out_dtype: np.dtype

    @property
    def linear(self):
        return self.axes[0].linear

    @property
    def out_shape(self):
        spatial = tuple(a.in_size for a in self.axes)
        if self.channels_last:
            return (self.batch,) + spatial + (self.channels,)
        return (self.batch, self.channels) + spatial

    @property
    def compute_dtype(self):
        """float64 when dy or the output is float64, else float32 (integers: their own)."""
        if self.dy_dtype.kind in "iu":
            return self.dy_dtype
        if ck.FLOAT64 in (self.dy_dtype, self.out_dtype):
            return ck.FLOAT64
        return ck.FLOAT32

    @property
    def empty(self):
        """No dy values: the result is zeros (TF's nearest grad of an empty grads too)."""
        return self.batch == 0 or self.channels == 0 or any(a.out_size == 0 for a in self.axes)


class ResampleProblem:
    """A validated call: ``dy`` (any strides, dtype checked) and its :class:`ResampleLayout`,
    whose fields it also answers for."""
    __slots__ = ("dy", "layout")

    def __init__(self, dy, layout):
        self.dy = dy
        self.layout = layout

    kernel = property(lambda self: self.layout.kernel)
    batch = property(lambda self: self.layout.batch)
    channels = property(lambda self: self.layout.channels)
    channels_last = property(lambda self: self.layout.channels_last)
    axes = property(lambda self: self.layout.axes)
    out_dtype = property(lambda self: self.layout.out_dtype)
    linear = property(lambda self: self.layout.linear)
    out_shape = property(lambda self: self.layout.out_shape)
    compute_dtype = property(lambda self: self.layout.compute_dtype)
    empty = property(lambda self: self.layout.empty)


def _spatial(shape, channels_last):
    return tuple(shape[1:-1]) if channels_last else tuple(shape[2:])


def _check_positive_spatial(shape, name, channels_last):
    for i, d in enumerate(_spatial(shape, channels_last)):
        if d < 1:
            raise ValueError(f"{name}: got shape {tuple(shape)}; spatial dimension {i} is {d}, "
                             "expected >= 1")


def _check_batch_channels(dy, img_shape, dy_name, img_name, channels_last):
    c_axis = -1 if channels_last else 1
    if dy.shape[0] != img_shape[0]:
        raise ValueError(f"{dy_name}: batch {dy.shape[0]} (shape {tuple(dy.shape)}) does not match "
                         f"{img_name} batch {img_shape[0]} (shape {tuple(img_shape)})")
    if dy.shape[c_axis] != img_shape[c_axis]:
        raise ValueError(f"{dy_name}: {dy.shape[c_axis]} channels (shape {tuple(dy.shape)}) do not "
                         f"match {img_name}'s {img_shape[c_axis]} (shape {tuple(img_shape)})")


def _shape_of(value, name):
    """The forward input is used for its shape and dtype only: accept anything with both (a
    dtype in either byte order: dx comes out in the machine's)."""
    if type(value) is np.ndarray:
        return value.shape, value.dtype.newbyteorder("=")
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        try:
            shape = tuple(ck.as_int(d, f"{name}.shape[{i}]") for i, d in enumerate(value.shape))
            dtype = np.dtype(value.dtype.as_numpy_dtype if hasattr(value.dtype, "as_numpy_dtype")
                             else value.dtype)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, TypeError) and ".shape[" in str(exc):
                raise   # a shape with a non-integer size: refused, not truncated
        else:
            return shape, dtype.newbyteorder("=")
    arr = ck.as_array(value, name)
    return arr.shape, arr.dtype


def _tf_pair_problem(kernel, inputs, attrs, nearest):
    ck.check_attrs(attrs, kernel, OPS[kernel].attr_keys)
    dy = ck.as_array(ck.get_input(inputs, "dy", kernel), "dy")
    img_shape, img_dtype = _shape_of(ck.get_input(inputs, "images", kernel), "images")
    align = ck.as_bool(attrs.get("alignCorners", False), "alignCorners")
    half = ck.as_bool(attrs.get("halfPixelCenters", False), "halfPixelCenters")
    return ResampleProblem(dy, _tf_pair_layout(kernel, _meta(dy), img_shape, img_dtype, align,
                                               half, nearest))


def _tf_pair_layout(kernel, dy, img_shape, img_dtype, align, half, nearest):
    ck.check_rank(dy, "dy", 4, "[batch, height, width, channels]")
    if len(img_shape) != 4:
        raise ValueError(f"images: got shape {img_shape} (rank {len(img_shape)}); expected rank 4 "
                         "([batch, height, width, channels])")
    op = OPS[kernel]
    if nearest:
        ck.check_dtype(dy, "dy", op.dtypes("dy"))
        if img_dtype != dy.dtype:
            raise TypeError(f"images: got dtype {img_dtype}; expected the dtype of dy ({dy.dtype}), "
                            "as TF's ResizeNearestNeighborGrad has one type T")
    else:
        ck.check_align_half(align, half)
        ck.check_dtype(dy, "dy", op.dtypes("dy"))
        if img_dtype not in op.dtypes("images"):
            raise TypeError(f"images: got dtype {img_dtype}; expected one of "
                            f"{ck.dtype_names(op.dtypes('images'))}")
    rule = tf_rule(nearest, align, half)
    _check_batch_channels(dy, img_shape, "dy", "images", True)
    if not nearest:
        # TF's bilinear grad refuses an empty dy ("resized dimensions must be positive"); its
        # nearest grad returns zeros
        _check_positive_spatial(dy.shape, "dy", True)
    _check_positive_spatial(img_shape, "images", True)
    ck.check_size(img_shape, "images", max(np.dtype(img_dtype).itemsize, 4))
    axes = tuple(Axis(int(i), int(o), rule) for i, o in zip(img_shape[1:3], dy.shape[1:3]))
    out_dtype = op.output_dtype({"dy": dy.dtype, "images": img_dtype})
    return ResampleLayout(kernel, dy.dtype, int(dy.shape[0]), int(dy.shape[3]), True, axes,
                          out_dtype)


def resize_bilinear_grad_problem(inputs, attrs):
    return _tf_pair_problem(RESIZE_BILINEAR_GRAD, inputs, attrs, nearest=False)


def resize_nearest_neighbor_grad_problem(inputs, attrs):
    return _tf_pair_problem(RESIZE_NEAREST_NEIGHBOR_GRAD, inputs, attrs, nearest=True)


# each mode's spatial ranks (its choices: the op table's)
INTERP_MODES = {"nearest": (1, 2, 3), "linear": (1, 2, 3), "bilinear": (2,), "trilinear": (3,)}
_INTERP_LINEAR_RULE = {"half_pixel": Rule.LINEAR_HALF_PIXEL,
                       "align_corners": Rule.LINEAR_ALIGN_CORNERS,
                       "asymmetric": Rule.LINEAR_ASYMMETRIC,
                       "pytorch_half_pixel": Rule.LINEAR_PYTORCH_HALF_PIXEL,
                       "tf_half_pixel_for_nn": Rule.LINEAR_HALF_PIXEL}
_INTERP_NEAREST_RULE = {"half_pixel": Rule.NEAREST_HALF_PIXEL,
                        "align_corners": Rule.NEAREST_ALIGN_CORNERS,
                        "asymmetric": Rule.NEAREST_ASYMMETRIC,
                        "pytorch_half_pixel": Rule.NEAREST_HALF_PIXEL,
                        "tf_half_pixel_for_nn": Rule.NEAREST_HALF_PIXEL}


def _choice(op, attrs, key):
    """An attribute among the op table's choices, or its default there."""
    a = op.attr(key)
    return ck.choice(attrs.get(key, a.default), key, a.choices)


def interpolate_backward_problem(inputs, attrs):
    kernel = INTERPOLATE_BACKWARD
    op = OPS[kernel]
    ck.check_attrs(attrs, kernel, op.attr_keys)
    diff_dst = ck.as_array(ck.get_input(inputs, "diff_dst", kernel), "diff_dst")
    src_shape, src_dtype = _shape_of(ck.get_input(inputs, "src", kernel), "src")
    mode = _choice(op, attrs, "mode")
    transform = _choice(op, attrs, "coordinate_transformation_mode")
    data_format = _choice(op, attrs, "data_format")
    layout = _interpolate_layout(_meta(diff_dst), src_shape, src_dtype, mode, transform,
                                 data_format)
    # sizes and scales only describe the resized shape (docs/semantics.md): checked last
    in_sp = tuple(a.in_size for a in layout.axes)
    out_sp = _spatial(diff_dst.shape, layout.channels_last)
    sizes = inputs.get("sizes") if inputs.get("sizes") is not None else attrs.get("sizes")
    scales = attrs.get("scales")
    if sizes is not None:
        sizes = ck.as_int_tuple(sizes, "sizes", (len(in_sp),))
        if sizes != tuple(out_sp):
            raise ValueError(f"sizes: got {list(sizes)}; expected the spatial shape of diff_dst "
                             f"{list(out_sp)}")
    elif scales is not None:
        scales = ck.as_float_tuple(scales, "scales", len(in_sp))
        want = tuple(int(np.floor(i * s)) for i, s in zip(in_sp, scales))
        if want != tuple(out_sp):
            raise ValueError(f"scales: got {list(scales)}, giving resized spatial shape "
                             f"{list(want)} = floor(src_size * scale); diff_dst's is {list(out_sp)}")
    return ResampleProblem(diff_dst, layout)


def _interpolate_layout(diff_dst, src_shape, src_dtype, mode, transform, data_format):
    kernel = INTERPOLATE_BACKWARD
    channels_last = data_format == "NXC"
    ck.check_dtype(diff_dst, "diff_dst", OPS[kernel].dtypes("diff_dst"))
    if src_dtype != diff_dst.dtype:
        raise TypeError(f"src: got dtype {src_dtype}; expected the dtype of diff_dst "
                        f"({diff_dst.dtype})")
    ranks = tuple(r + 2 for r in INTERP_MODES[mode])
    if diff_dst.ndim not in ranks:
        raise ValueError(f"diff_dst: got shape {tuple(diff_dst.shape)} (rank {diff_dst.ndim}); mode "
                         f"{mode!r} expects rank {' or '.join(map(str, ranks))} "
                         f"({data_format}: batch, {'spatial..., channels' if channels_last else 'channels, spatial...'})")
    if len(src_shape) != diff_dst.ndim:
        raise ValueError(f"src: got shape {src_shape} (rank {len(src_shape)}); expected rank "
                         f"{diff_dst.ndim}, the rank of diff_dst {tuple(diff_dst.shape)}")
    _check_batch_channels(diff_dst, src_shape, "diff_dst", "src", channels_last)
    _check_positive_spatial(src_shape, "src", channels_last)
    _check_positive_spatial(diff_dst.shape, "diff_dst", channels_last)
    ck.check_size(src_shape, "src", max(np.dtype(src_dtype).itemsize, 4))
    in_sp = _spatial(src_shape, channels_last)
    out_sp = _spatial(diff_dst.shape, channels_last)
    table = _INTERP_NEAREST_RULE if mode == "nearest" else _INTERP_LINEAR_RULE
    axes = tuple(Axis(int(i), int(o), table[transform]) for i, o in zip(in_sp, out_sp))
    c = diff_dst.shape[-1] if channels_last else diff_dst.shape[1]
    return ResampleLayout(kernel, diff_dst.dtype, int(diff_dst.shape[0]), int(c), channels_last,
                          axes, src_dtype)


def resize_grad_problem(inputs, attrs):
    kernel = RESIZE_GRAD
    op = OPS[kernel]
    ck.check_attrs(attrs, kernel, op.attr_keys)
    dy = ck.as_array(ck.get_input(inputs, "dY", kernel), "dY")
    x_shape, x_dtype = _shape_of(ck.get_input(inputs, "X", kernel), "X")
    _choice(op, attrs, "mode")
    transform = _choice(op, attrs, "coordinate_transformation_mode")
    ck.check_dtype(dy, "dY", op.dtypes("dY"))
    if x_dtype != dy.dtype:
        raise TypeError(f"X: got dtype {x_dtype}; expected the dtype of dY ({dy.dtype})")
    ck.check_rank(dy, "dY", 4, "NCHW")
    if len(x_shape) != 4:
        raise ValueError(f"X: got shape {x_shape} (rank {len(x_shape)}); expected rank 4 (NCHW)")
    _check_batch_channels(dy, x_shape, "dY", "X", False)
    _check_positive_spatial(x_shape, "X", False)
    _check_positive_spatial(dy.shape, "dY", False)
    ck.check_size(x_shape, "X", max(np.dtype(x_dtype).itemsize, 4))
    scales = inputs.get("scales")
    if scales is not None and np.size(scales) == 0:
        scales = None  # ORT passes an empty tensor for "no scales"
    ort_scales = (0.0, 0.0)
    if scales is not None:
        scales = ck.as_float_tuple(scales, "scales", 4)
        if scales[0] != 1.0 or scales[1] != 1.0:
            raise ValueError(f"scales: got {list(scales)}; expected 1.0 for N and C (NCHW)")
        want = tuple(int(np.floor(i * np.float32(s))) for i, s in zip(x_shape[2:], scales[2:]))
        if want != tuple(dy.shape[2:]):
            raise ValueError(f"scales: got {list(scales)}, giving resized spatial shape {list(want)} "
                             f"= floor(X size * scale); dY's is {list(dy.shape[2:])}")
        ort_scales = scales[2:]
    rule = (Rule.LINEAR_ORT_ALIGN_CORNERS if transform == "align_corners"
            else Rule.LINEAR_ORT_HALF_PIXEL)
    axes = tuple(Axis(int(i), int(o), rule, float(s))
                 for i, o, s in zip(x_shape[2:], dy.shape[2:], ort_scales))
    return ResampleProblem(dy, ResampleLayout(kernel, dy.dtype, int(dy.shape[0]),
                                              int(dy.shape[1]), False, axes, x_dtype))


PARSERS = {
    RESIZE_BILINEAR_GRAD: resize_bilinear_grad_problem,
    RESIZE_NEAREST_NEIGHBOR_GRAD: resize_nearest_neighbor_grad_problem,
    INTERPOLATE_BACKWARD: interpolate_backward_problem,
    RESIZE_GRAD: resize_grad_problem,
}
