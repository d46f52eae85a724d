"""The ``torch`` peer: PyTorch's own CPU backward ops (``pip install 'tfcompat[torch]'``).

The forward resizes (ResizeBilinear, ResizeNearestNeighbor) run ``F.interpolate`` on the
NHWC image as a channels-last tensor, in the image's dtype; a bilinear result is returned as
float32, as TF returns it (a half-type result converted exactly, not recomputed).
Resizes run ``torch.ops.aten.upsample_*_backward`` directly (what autograd calls for
``F.interpolate``); the conv runs ``torch.nn.grad.conv2d_input``. Attribute mapping, each one
checked on a small hand-worked case in tests/test_peers.py:

- bilinear / linear / trilinear: TF/oneDNN half pixel -> ``align_corners=False``; align corners
  -> ``align_corners=True``; TF's legacy (asymmetric) mapping has no PyTorch mode.
  ``pytorch_half_pixel`` and ``tf_half_pixel_for_nn`` -> ``align_corners=False``.
- nearest: legacy / asymmetric -> ``'nearest'`` (``floor(x * scale)``); half pixel ->
  ``'nearest-exact'`` (``floor((x + 0.5) * scale)``); align corners has no PyTorch mode.
- ONNX Runtime's ResizeGrad: ``scales`` -> the op's ``scales_h``/``scales_w`` (PyTorch then maps
  with ``1 / scale``, as ORT does); align corners -> ``align_corners=True``.
- Conv2DBackpropInput: strides, dilations and NHWC/NCHW map directly. PyTorch pads both sides
  alike, so a padding with a different bottom or right (TF's SAME with an odd total, or
  explicit pads) takes the gradient of the conv over the padded input and crops it: the
  definition of padding, not a change of PyTorch's arithmetic.

Inputs are passed to PyTorch as views where the layouts allow (NHWC data as channels-last
NCHW tensors) and computed in the grads' dtype; an output whose dtype differs from the grads'
(TF's float32 grads into a float16 image) is rounded once at the end.
"""
import numpy as np

from tfcompat import _forward as fw, _resample as rs
from tfcompat.conv import problem as _conv
from tfcompat._resample import Rule
from tfcompat.kernel_names import (CONV2D_BACKPROP_INPUT, INTERPOLATE_BACKWARD,
                                   RESIZE_BILINEAR, RESIZE_BILINEAR_GRAD, RESIZE_GRAD,
                                   RESIZE_NEAREST_NEIGHBOR, RESIZE_NEAREST_NEIGHBOR_GRAD)
from tfcompat.registry import KernelConfig, UnsupportedError

BACKEND = "torch"


def _torch():
    try:
        import torch
    except ImportError:
        raise UnsupportedError("PyTorch is not installed: pip install 'tfcompat[torch]'") from None
    return torch


def missing():
    try:
        _torch()
    except UnsupportedError as exc:
        return str(exc)
    return None


# TF's and oneDNN's coordinate rules as PyTorch's interpolate modes, (mode, align_corners),
# for 1-D ('linear' is 'bilinear' and 'trilinear' in 2-D and 3-D; nearest takes no flag): the
# one mapping the peer and the PyTorch oracle (conformance/oracles.py) share
TORCH_MODES = {Rule.LINEAR_HALF_PIXEL: ("linear", False),
               Rule.LINEAR_ALIGN_CORNERS: ("linear", True),
               Rule.LINEAR_PYTORCH_HALF_PIXEL: ("linear", False),
               Rule.LINEAR_ORT_HALF_PIXEL: ("linear", False),
               Rule.LINEAR_ORT_ALIGN_CORNERS: ("linear", True),
               Rule.NEAREST_ASYMMETRIC: ("nearest", None),
               Rule.NEAREST_HALF_PIXEL: ("nearest-exact", None)}
# where PyTorch's mode is the rule's but for an edge case (its own finding, which the peer
# shows): the PyTorch oracle, which stands in for TF, does not judge these
DIFFERS = {Rule.LINEAR_PYTORCH_HALF_PIXEL: "PyTorch's align_corners=False maps an axis resized "
                                           "to 1 to its centre, pytorch_half_pixel to 0"}
_NAMES = {Rule.LINEAR_ASYMMETRIC: "TF's legacy (asymmetric) linear mapping",
          Rule.NEAREST_ALIGN_CORNERS: "align_corners for nearest",
          Rule.NEAREST_ALIGN_HALF: "align_corners with half-pixel nearest"}
_LINEAR_OP = {1: "upsample_linear1d_backward", 2: "upsample_bilinear2d_backward",
              3: "upsample_trilinear3d_backward"}
_NEAREST_OP = {"nearest": "upsample_nearest{d}d_backward",
               "nearest-exact": "_upsample_nearest_exact{d}d_backward"}


def torch_mode(problem):
    """(mode, align_corners) of ``F.interpolate`` for a resampling problem
    (tfcompat._resample's), its linear mode named for its axes; UnsupportedError where
    PyTorch has none."""
    axes = problem.layout.axes
    rule = axes[0].rule
    if any(a.rule != rule for a in axes):
        raise UnsupportedError("PyTorch takes one coordinate mode for all axes")
    if rule not in TORCH_MODES:
        raise UnsupportedError(f"PyTorch has no {_NAMES.get(rule, rule.name)}")
    name, align = TORCH_MODES[rule]
    if name == "linear":
        name = {1: "linear", 2: "bilinear", 3: "trilinear"}[len(axes)]
    return name, align


def _tensor(torch, arr):
    """A torch view of a NumPy array (a copy only for bfloat16, which NumPy lacks natively)."""
    arr = np.asarray(arr)
    if arr.dtype.name == "bfloat16":
        return torch.from_numpy(arr.view(np.uint16).astype(np.int32) << 16).view(
            torch.float32).to(torch.bfloat16)
    if not arr.flags.writeable:
        arr = arr.copy()
    return torch.from_numpy(arr)


def _numpy(torch, t, dtype):
    t = t.detach()
    if t.dtype == torch.bfloat16:
        out = t.to(torch.float32).numpy()
    else:
        out = t.numpy()
    return out.astype(dtype, copy=False)


def _resample(problem):
    torch = _torch()
    name, align = torch_mode(problem)
    axes = problem.layout.axes
    rule = axes[0].rule
    dims = len(axes)
    dy = np.asarray(problem.dy)
    if dy.dtype.kind in "iu":
        raise UnsupportedError(f"PyTorch's upsample backward has no {dy.dtype} kernel")
    g = _tensor(torch, dy)
    if problem.channels_last:
        g = g.movedim(-1, 1)  # a channels-last NC... view
    out_size = [a.out_size for a in axes]
    in_size = [problem.batch, problem.channels] + [a.in_size for a in axes]
    scales = [None] * dims
    if rule == Rule.LINEAR_ORT_HALF_PIXEL and any(a.ort_scale > 0 for a in axes):
        scales = [a.ort_scale or None for a in axes]
    if problem.linear:
        op = getattr(torch.ops.aten, _LINEAR_OP[dims])
        out = op(g, out_size, in_size, align, *scales)
    else:
        op = getattr(torch.ops.aten, _NEAREST_OP[name].format(d=dims))
        out = op(g, out_size, in_size, *scales)
    if problem.channels_last:
        out = out.movedim(1, -1)
    return _numpy(torch, out, problem.out_dtype)


def _forward(problem):
    torch = _torch()
    import torch.nn.functional as F
    rule = problem.axes[0].rule
    if rule not in TORCH_MODES:
        raise UnsupportedError(f"PyTorch has no {_NAMES.get(rule, rule.name)}")
    name, align = TORCH_MODES[rule]
    images = np.asarray(problem.images)
    if problem.linear and images.dtype.kind in "iu":
        raise UnsupportedError(f"PyTorch's bilinear interpolate has no {images.dtype} kernel")
    x = _tensor(torch, images).permute(0, 3, 1, 2)     # a channels-last NCHW view
    kw = {} if align is None else {"align_corners": align}
    try:
        out = F.interpolate(x, size=[a.out_size for a in problem.axes],
                            mode="bilinear" if name == "linear" else name, **kw)
    except RuntimeError as exc:     # a dtype PyTorch's CPU kernel lacks
        if "not implemented" in str(exc):
            raise UnsupportedError(f"PyTorch: {str(exc).splitlines()[0]}") from None
        raise
    return np.ascontiguousarray(_numpy(torch, out.permute(0, 2, 3, 1), problem.out_dtype))


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


def conv2d_backprop_input(inputs, attrs):
    p = _conv.conv_problem(inputs, attrs)
    torch = _torch()
    dy = _tensor(torch, p.dy)
    w = _tensor(torch, p.filter).permute(3, 2, 0, 1)  # HWIO -> OIHW
    if p.channels_last:
        dy = dy.permute(0, 3, 1, 2)
    # the gradient over the padded input, then the crop that removes the padding
    padded = (p.N, p.C, p.pad_top + p.H + p.pad_bottom, p.pad_left + p.W + p.pad_right)
    symmetric = p.pad_top == p.pad_bottom and p.pad_left == p.pad_right
    try:
        if symmetric:
            dx = torch.nn.grad.conv2d_input((p.N, p.C, p.H, p.W), w, dy, stride=(p.sh, p.sw),
                                            padding=(p.pad_top, p.pad_left),
                                            dilation=(p.dh, p.dw))
        else:
            dx = torch.nn.grad.conv2d_input(padded, w, dy, stride=(p.sh, p.sw), padding=0,
                                            dilation=(p.dh, p.dw))
            dx = dx[:, :, p.pad_top:p.pad_top + p.H, p.pad_left:p.pad_left + p.W]
    except RuntimeError as exc:  # a dtype PyTorch's CPU conv lacks
        if "not implemented" in str(exc):
            raise UnsupportedError(f"PyTorch: {str(exc).splitlines()[0]}") from None
        raise
    if p.channels_last:
        dx = dx.permute(0, 2, 3, 1)
    return np.ascontiguousarray(_numpy(torch, dx, p.dtype))


KERNEL_CONFIGS = (
    KernelConfig(RESIZE_BILINEAR_GRAD, BACKEND, resize_bilinear_grad),
    KernelConfig(RESIZE_NEAREST_NEIGHBOR_GRAD, BACKEND, resize_nearest_neighbor_grad),
    KernelConfig(CONV2D_BACKPROP_INPUT, BACKEND, conv2d_backprop_input),
    KernelConfig(INTERPOLATE_BACKWARD, BACKEND, interpolate_backward),
    KernelConfig(RESIZE_GRAD, BACKEND, resize_grad),
    KernelConfig(RESIZE_BILINEAR, BACKEND, resize_bilinear),
    KernelConfig(RESIZE_NEAREST_NEIGHBOR, BACKEND, resize_nearest_neighbor),
)
