"""Policy for the forward resizes, ResizeBilinear and ResizeNearestNeighbor (docs/semantics.md
§12): tfjs's inputs (``images``) and attributes (``size``, ``alignCorners``,
``halfPixelCenters``) checked as TF's CPU kernels check them, into a :class:`ForwardProblem`.
Backends only compute."""
from dataclasses import dataclass

import numpy as np

from . import _checks as ck
from ._resample import Axis, tf_rule
from .kernel_names import RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR
from .ops import OPS

FORWARD_DTYPES = OPS[RESIZE_BILINEAR].dtypes("images")     # (and the nearest's)
NEAREST_MAX_AXIS = ck.NEAREST_MAX_AXIS


@dataclass(frozen=True)
class ForwardProblem:
    images: np.ndarray      # [B, IH, IW, C], in the machine's byte order
    kernel: str
    axes: tuple             # (Axis of the height, Axis of the width): in = the image's size
    out_dtype: np.dtype     # float32 (bilinear), the images' dtype (nearest)

    @property
    def linear(self):
        return self.kernel == RESIZE_BILINEAR

    @property
    def out_shape(self):
        b, _, _, c = self.images.shape
        return (b, self.axes[0].out_size, self.axes[1].out_size, c)

    @property
    def identity(self):
        """Both axes keep their size: TF's bilinear resize then casts the image to float32
        (no arithmetic: an infinity stays one where the formula would give NaN)."""
        return all(a.in_size == a.out_size for a in self.axes)

    @property
    def empty(self):
        return 0 in self.out_shape

    def with_images(self, images):
        """This problem for other images of the same dtype and shape."""
        return ForwardProblem(images, self.kernel, self.axes, self.out_dtype)


def _size(value):
    size = ck.as_int_tuple(value, "size", (2,))
    if size[0] <= 0 or size[1] <= 0:
        raise ValueError(f"size: got {list(size)}; expected two positive ints (TF: output "
                         "dimensions must be positive)")
    return size


def _problem(kernel, inputs, attrs):
    op = OPS[kernel]
    ck.check_attrs(attrs, kernel, op.attr_keys)
    images = ck.as_array(ck.get_input(inputs, "images", kernel), "images")
    ck.check_rank(images, "images", 4, "[batch, height, width, channels]")
    ck.check_dtype(images, "images", op.dtypes("images"))
    if "size" not in attrs:
        raise ValueError(f"{kernel}: missing attribute 'size'; expected [new_height, new_width]")
    size = _size(attrs["size"])
    align = ck.as_bool(attrs.get("alignCorners", False), "alignCorners")
    half = ck.as_bool(attrs.get("halfPixelCenters", False), "halfPixelCenters")
    ck.check_align_half(align, half)
    b, ih, iw, c = images.shape
    if ih == 0 or iw == 0:
        raise ValueError(f"images: got shape {tuple(images.shape)}; expected a non-zero height "
                         "and width (TF: input image must be of non-zero size)")
    nearest = kernel == RESIZE_NEAREST_NEIGHBOR
    if nearest and max(ih, iw) >= NEAREST_MAX_AXIS:
        raise ValueError(f"images: got shape {tuple(images.shape)}; expected a height and width "
                         f"below 2^24 (TF: nearest neighbor requires max height & width of "
                         "2^24)")
    out_dtype = op.output_dtype({"images": images.dtype})
    ck.check_size((b, size[0], size[1], c), "size", out_dtype.itemsize)
    rule = tf_rule(nearest, align, half)
    axes = (Axis(int(ih), size[0], rule), Axis(int(iw), size[1], rule))
    return ForwardProblem(images, kernel, axes, out_dtype)


def resize_bilinear_problem(inputs, attrs):
    return _problem(RESIZE_BILINEAR, inputs, attrs)


def resize_nearest_neighbor_problem(inputs, attrs):
    return _problem(RESIZE_NEAREST_NEIGHBOR, inputs, attrs)


PARSERS = {RESIZE_BILINEAR: resize_bilinear_problem,
           RESIZE_NEAREST_NEIGHBOR: resize_nearest_neighbor_problem}
