"""The kernels: their registry names, and their inputs and attributes as TypedDicts. The five
backward kernels, and TF's two forward resizes.

Names and keys are tfjs's (``dy``, ``alignCorners``, ...) for the TF kernels, oneDNN graph
API's for ``InterpolateBackward`` and ONNX Runtime's for ``ResizeGrad``. The semantics of every
input and attribute are in docs/semantics.md. A backend's ``kernel_func(inputs, attrs)``
receives these dicts; the functional API (tfcompat/api.py) builds them from ``tf.raw_ops``
argument names.
"""
from typing import Any, Literal, Sequence, TypedDict, Union

ArrayLike = Any  # a NumPy array, or anything np.asarray takes (lists, TF tensors, ...)

# the names, and the lists made of them, come from the op table (tfcompat/ops/table.py)
from .ops.table import (CONV2D_BACKPROP_INPUT, FORWARD_KERNEL_NAMES,  # noqa: E402,F401
                        INTERPOLATE_BACKWARD, KERNEL_NAMES, PARAMETER_INPUTS, RESIZE_BILINEAR,
                        RESIZE_BILINEAR_GRAD, RESIZE_GRAD, RESIZE_NEAREST_NEIGHBOR,
                        RESIZE_NEAREST_NEIGHBOR_GRAD)


class ResizeBilinearInputs(TypedDict):
    images: ArrayLike       # [B, I_h, I_w, C]: float, integer (not uint32/uint64) or half types


class ResizeBilinearAttrs(TypedDict, total=False):
    size: Sequence[int]     # [O_h, O_w] (required)
    alignCorners: bool
    halfPixelCenters: bool


ResizeNearestNeighborInputs = ResizeBilinearInputs
ResizeNearestNeighborAttrs = ResizeBilinearAttrs


class ResizeBilinearGradInputs(TypedDict):
    dy: ArrayLike           # [B, O_h, O_w, C], float32 (float64 accepted)
    images: ArrayLike       # [B, I_h, I_w, C]; its shape and dtype only


class ResizeBilinearGradAttrs(TypedDict, total=False):
    alignCorners: bool
    halfPixelCenters: bool


class ResizeNearestNeighborGradInputs(TypedDict):
    dy: ArrayLike           # [B, O_h, O_w, C]
    images: ArrayLike       # [B, I_h, I_w, C], dy's dtype; its shape and dtype only


ResizeNearestNeighborGradAttrs = ResizeBilinearGradAttrs


class Conv2DBackpropInputInputs(TypedDict):
    dy: ArrayLike           # the gradient of the conv's output, in dataFormat
    filter: ArrayLike       # [fh, fw, in_c, out_c] (HWIO)


class Conv2DBackpropInputAttrs(TypedDict, total=False):
    inputShape: Sequence[int]                   # the 4-D shape of x, in dataFormat (required)
    strides: Union[int, Sequence[int]]          # [sh, sw], one number, or 4 in data order
    pad: Union[Literal["valid", "same"], int, Sequence[Sequence[int]]]
    dataFormat: Literal["NHWC", "NCHW"]
    dimRoundingMode: Literal["floor", "round", "ceil"]   # with a numeric or explicit pad only
    dilations: Union[int, Sequence[int]]        # an extension of tfjs's attrs; default 1


class InterpolateBackwardInputs(TypedDict, total=False):
    src: ArrayLike          # the forward input; its shape and dtype only (required)
    diff_dst: ArrayLike     # the gradient of the forward output (required)
    sizes: Sequence[int]    # the resized spatial shape (checked against diff_dst)


class InterpolateBackwardAttrs(TypedDict, total=False):
    mode: Literal["nearest", "linear", "bilinear", "trilinear"]   # required
    coordinate_transformation_mode: Literal["half_pixel", "align_corners", "asymmetric",
                                            "pytorch_half_pixel", "tf_half_pixel_for_nn"]
    sizes: Sequence[int]
    scales: Sequence[float]
    data_format: Literal["NXC", "NCX"]


class ResizeGradInputs(TypedDict, total=False):
    dY: ArrayLike           # [N, C, H_out, W_out] (required)
    X: ArrayLike            # [N, C, H, W]; its shape and dtype only (required)
    roi: ArrayLike          # accepted and ignored, as in ONNX Runtime
    scales: ArrayLike       # 4 floats, [1, 1, s_h, s_w]; change the mapping (1 / scale)


class ResizeGradAttrs(TypedDict, total=False):
    mode: Literal["linear"]
    coordinate_transformation_mode: Literal["half_pixel", "align_corners"]

