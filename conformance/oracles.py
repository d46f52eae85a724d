"""Inputs for a case, and the oracles that judge a backend's result.

An :class:`Oracle` is one record: its name, the device it runs on, whether it is available
here, which cases it supports, how it computes a reference, whether float32 results must match
it bit for bit, and which registry backend it *is* (a backend is never graded against itself).
:data:`ORACLES` lists the CPU oracles in order of precedence: TensorFlow's raw grad ops, TF
compositions through tfcompat's tensorflow backend, PyTorch, and the float64 NumPy reference;
:func:`gpu_oracles` adds TF's GPU and PyTorch's CUDA where they exist. Adding an oracle is one
entry in that list. ORT's published ResizeGrad vectors are checked beside whichever oracle
judges those cases.
"""
import zlib
from dataclasses import dataclass
from typing import Callable, Optional

import ml_dtypes
import numpy as np

import tfcompat
from tfcompat import _forward as fw, _resample as rs
from tfcompat.backends import numpy_backend
from tfcompat.conv import problem as _conv

from . import metric

from .cases import DTYPE_TOKENS, FORWARD_OPS, INTERP_T, TF_FLAGS

NP_DTYPES = DTYPE_TOKENS

# ORT's ResizeGrad test vectors (docs/semantics.md §6), keyed by case id.
ORT_VECTORS = {
    "ortrg_b1_i4x4_o6x6_c1_thp_sc1.7x1.7_f32": {
        0: [2.7128, 2.9550, 2.7612, 1.4533], -1: [1.4533, 1.5830, 1.4792, 0.7785]},
    "ortrg_b1_i4x4_o8x8_c1_thp_f32": {0: [4.0] * 4, -1: [4.0] * 4},
    "ortrg_b1_i4x4_o8x8_c1_tac_f32": {0: [2.9388, 3.9184, 3.9184, 2.9388],
                                       1: [3.9184, 5.2245, 5.2245, 3.9184]},
}


class Unsupported(Exception):
    """The oracle has no op for this case (the next one in order judges it)."""


def _rng(case):
    return np.random.default_rng(zlib.crc32(case.id.encode()))


def _data(rng, shape, dtype):
    if dtype.kind in "iu":
        lo, hi = (0, 200) if dtype.kind == "u" else (-100, 100)
        return rng.integers(lo, hi, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def materialize(case):
    """(inputs, attrs) in the registry's tfjs form for ``case``, with seeded data."""
    rng = _rng(case)
    dt = NP_DTYPES[case.dtype]
    if case.op in FORWARD_OPS:
        align, half = TF_FLAGS[case.t]
        return ({"images": _data(rng, (case.b,) + case.i + (case.c,), dt)},
                {"size": list(case.o), "alignCorners": align, "halfPixelCenters": half})
    if case.op in ("rbg", "rnn"):
        align, half = TF_FLAGS[case.t]
        dy_dt = np.dtype(np.float32) if case.op == "rbg" else dt
        dy = _data(rng, (case.b,) + case.o + (case.c,), dy_dt)
        images = np.zeros((case.b,) + case.i + (case.c,), dt)
        return {"dy": dy, "images": images}, {"alignCorners": align, "halfPixelCenters": half}
    if case.op == "conv":
        nhwc = case.l == "nhwc"
        x_shape = (case.b,) + case.i + (case.c,) if nhwc else (case.b, case.c) + case.i
        w = _data(rng, case.k + (case.c, case.oc), dt)
        pad = case.p.lower() if case.p in ("SAME", "VALID") else None
        if pad is None:
            t, b_, l_, r = (int(v) for v in case.p[1:].split("."))
            pad = [[0, 0], [t, b_], [l_, r], [0, 0]] if nhwc else [[0, 0], [0, 0], [t, b_], [l_, r]]
        attrs = {"inputShape": list(x_shape), "strides": list(case.s), "pad": pad,
                 "dataFormat": "NHWC" if nhwc else "NCHW", "dilations": list(case.d)}
        probe = _conv.conv_problem({"dy": np.zeros(_dy_shape_guess(case, x_shape, attrs), dt),
                                    "filter": w}, attrs)
        dy_shape = (case.b, probe.OH, probe.OW, case.oc) if nhwc else (case.b, case.oc, probe.OH, probe.OW)
        return {"dy": _data(rng, dy_shape, dt), "filter": w}, attrs
    if case.op == "interp":
        nxc = case.l == "nxc"
        shape = (lambda sp: (case.b,) + sp + (case.c,)) if nxc else (lambda sp: (case.b, case.c) + sp)
        return ({"src": np.zeros(shape(case.i), dt), "diff_dst": _data(rng, shape(case.o), dt)},
                {"mode": case.m, "coordinate_transformation_mode": INTERP_T[case.t],
                 "data_format": case.l.upper()})
    if case.op == "ortrg":
        dy_shape = (case.b, case.c) + case.o
        dy = np.ones(dy_shape, dt) if case.id in ORT_VECTORS else _data(rng, dy_shape, dt)
        inputs = {"dY": dy, "X": np.zeros((case.b, case.c) + case.i, dt)}
        if case.sc:
            inputs["scales"] = np.array([1.0, 1.0, *case.sc], np.float32)
        return inputs, {"mode": "linear", "coordinate_transformation_mode":
                        "align_corners" if case.t == "ac" else "half_pixel"}
    raise ValueError(case.op)


def _dy_shape_guess(case, x_shape, attrs):
    """dy's shape from the conv's size arithmetic (conv_problem then re-checks it)."""
    pads = attrs["pad"]
    outs = []
    for ax, (i, k, s, d) in enumerate(zip(case.i, case.k, case.s, case.d)):
        if pads in ("same", "valid"):
            outs.append(_conv.conv_output_size(i, k, s, d, pads)[0])
        else:
            pair = pads[1 + ax] if case.l == "nhwc" else pads[2 + ax]
            outs.append(_conv.conv_output_size(i, k, s, d, "explicit", tuple(pair))[0])
    if case.l == "nhwc":
        return (case.b, *outs, case.oc)
    return (case.b, case.oc, *outs)


def problem_of(case, inputs, attrs):
    if case.op in FORWARD_OPS:
        return fw.PARSERS[case.kernel_name](inputs, attrs)
    if case.op == "conv":
        return _conv.conv_problem(inputs, attrs)
    return rs.PARSERS[case.kernel_name](inputs, attrs)


def magnitude(case, inputs, attrs):
    """S of the metric (metric.py): the same backward applied to |dy| (and |filter|)."""
    return metric.magnitude(case.kernel_name, inputs, attrs)


def numpy_reference(case, inputs, attrs):
    p = problem_of(case, inputs, attrs)
    if case.op in FORWARD_OPS:
        return numpy_backend.forward(p)
    if case.op == "conv":
        return numpy_backend.conv_backprop_input(p)
    return numpy_backend.resample(p)


# ------------------------------------------------------------------------------------------
# TensorFlow
# ------------------------------------------------------------------------------------------

def tf_module():
    from ._tf import import_tensorflow
    return import_tensorflow()


def _f32_if_half(a):
    return a.astype(np.float32) if a.dtype in (NP_DTYPES["f16"], NP_DTYPES["bf16"]) else a


def tf_raw(case, inputs, attrs, device):
    """TF's raw grad op (half types computed in float32 on the same values)."""
    tf = tf_module()
    with tf.device(device):
        if case.op in FORWARD_OPS:
            # TF's forward ops take every dtype of the grid as it is
            op = tf.raw_ops.ResizeBilinear if case.op == "rb" else tf.raw_ops.ResizeNearestNeighbor
            return op(images=tf.constant(inputs["images"]), size=attrs["size"],
                      align_corners=attrs["alignCorners"],
                      half_pixel_centers=attrs["halfPixelCenters"]).numpy()
        if case.op == "rbg":
            img = _f32_if_half(inputs["images"])
            return tf.raw_ops.ResizeBilinearGrad(
                grads=inputs["dy"], original_image=tf.constant(img),
                align_corners=attrs["alignCorners"], half_pixel_centers=attrs["halfPixelCenters"]).numpy()
        if case.op == "rnn":
            return tf.raw_ops.ResizeNearestNeighborGrad(
                grads=tf.constant(_f32_if_half(inputs["dy"])), size=list(case.i),
                align_corners=attrs["alignCorners"], half_pixel_centers=attrs["halfPixelCenters"]).numpy()
        if case.op == "conv":
            p = _conv.conv_problem(inputs, attrs)
            pad, explicit = _tf_padding(case, p)
            nhwc = case.l == "nhwc"
            return tf.raw_ops.Conv2DBackpropInput(
                input_sizes=list(p.out_shape), filter=tf.constant(_f32_if_half(inputs["filter"])),
                out_backprop=tf.constant(_f32_if_half(inputs["dy"])),
                strides=[1, *case.s, 1] if nhwc else [1, 1, *case.s], padding=pad,
                explicit_paddings=explicit, data_format="NHWC" if nhwc else "NCHW",
                dilations=[1, *case.d, 1] if nhwc else [1, 1, *case.d]).numpy()
    # InterpolateBackward and ResizeGrad: the tensorflow backend (raw ops and compositions)
    from tfcompat.backends import tensorflow_backend
    kin = dict(inputs)
    for key in ("diff_dst", "dY", "src", "X"):
        if key in kin:
            kin[key] = _f32_if_half(kin[key])
    try:
        with tensorflow_backend.on_device(device):
            return tfcompat.get_kernel(case.kernel_name, "tensorflow").kernel_func(kin, attrs)
    except tfcompat.UnsupportedError as exc:
        raise Unsupported(str(exc)) from None


def _tf_padding(case, p):
    if case.p in ("SAME", "VALID"):
        return case.p, []
    t, b, l_, r = (int(v) for v in case.p[1:].split("."))
    return "EXPLICIT", ([0, 0, t, b, l_, r, 0, 0] if case.l == "nhwc" else [0, 0, 0, 0, t, b, l_, r])


def tf_tape(case, inputs, attrs, device):
    """The gradient TF's GradientTape takes through the forward op, or Unsupported."""
    tf = tf_module()
    if case.op in FORWARD_OPS:
        raise Unsupported("a forward op: no gradient to take")
    if case.op not in ("rbg", "rnn", "conv"):
        raise Unsupported("no single TF forward op")
    with tf.device(device):
        if case.op in ("rbg", "rnn"):
            if inputs["images"].dtype.kind in "iu":
                raise Unsupported("GradientTape does not differentiate integer tensors")
            x = tf.constant(_f32_if_half(inputs["images"]))
            fn = (tf.compat.v1.image.resize_bilinear if case.op == "rbg"
                  else tf.compat.v1.image.resize_nearest_neighbor)
            try:
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    y = fn(x, list(case.o), align_corners=attrs["alignCorners"],
                           half_pixel_centers=attrs["halfPixelCenters"])
                dy = tf.cast(tf.constant(_f32_if_half(inputs["dy"])), y.dtype)
                return tape.gradient(y, x, output_gradients=dy).numpy()
            except (tf.errors.InvalidArgumentError, ValueError) as exc:
                raise Unsupported(f"TF forward rejects it: {str(exc).splitlines()[0][:80]}") from None
        p = _conv.conv_problem(inputs, attrs)
        pad, explicit = _tf_padding(case, p)
        nhwc = case.l == "nhwc"
        x = tf.zeros(p.out_shape, tf.float32 if inputs["dy"].dtype in (NP_DTYPES["f16"], NP_DTYPES["bf16"])
                     else inputs["dy"].dtype)
        w = tf.constant(_f32_if_half(inputs["filter"]))
        try:
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tf.nn.conv2d(x, w, strides=list(case.s), dilations=list(case.d),
                                 padding=pad if pad != "EXPLICIT" else
                                 [[0, 0], [explicit[2], explicit[3]], [explicit[4], explicit[5]], [0, 0]]
                                 if nhwc else [[0, 0], [0, 0], [explicit[4], explicit[5]], [explicit[6], explicit[7]]],
                                 data_format="NHWC" if nhwc else "NCHW")
            return tape.gradient(y, x, output_gradients=tf.constant(_f32_if_half(inputs["dy"]))).numpy()
        except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError, ValueError) as exc:
            raise Unsupported(f"TF forward rejects it: {str(exc).splitlines()[0][:80]}") from None


def tf_gpus():
    try:
        tf = tf_module()
    except ImportError:
        return []
    return [f"/GPU:{k}" for k in range(len(tf.config.list_physical_devices("GPU")))]


# ------------------------------------------------------------------------------------------
# PyTorch
# ------------------------------------------------------------------------------------------

def torch_available(cuda=False):
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() if cuda else True


def torch_oracle(case, inputs, attrs, device="cpu"):
    """PyTorch autograd for the modes it shares with TF/ORT (CPU or CUDA), else Unsupported.

    Where PyTorch stands in for TF, the resizes TF computes in float32 (float32 cases, and every
    ResizeBilinearGrad: its grads are float32) run PyTorch in float32: PyTorch computes sample
    positions in its op-math type (float for float32 input, double for float64), so only
    float32 input comes near TF's float32 positions. Every other case runs in float64, ORT's
    scales too: PyTorch's float32 path multiplies by a rounded 1 / scale where ORT divides, and
    its float64 positions come nearer ORT's. Integer results wrap to the case's dtype, as TF's
    integer sums do (docs/semantics.md); the float64 sums are exact."""
    import torch
    import torch.nn.functional as F
    ref = _torch_oracle(torch, F, case, inputs, attrs, device)
    dt = NP_DTYPES[case.dtype]
    return ref.astype(np.int64).astype(dt) if dt.kind in "iu" else ref


def _torch_oracle(torch, F, case, inputs, attrs, device):
    tf_float32 = _torch_stands_in_for_tf(case) and (case.dtype == "f32" or case.op == "rbg")
    work = np.float32 if tf_float32 else np.float64
    if case.op == "conv":
        p = _conv.conv_problem(inputs, attrs)
        if case.p not in ("VALID",) and not (case.p.startswith("E") and
                                              len(set(case.p[1:].split("."))) == 1):
            raise Unsupported("PyTorch takes symmetric padding only")
        pad = int(case.p[1:].split(".")[0]) if case.p.startswith("E") else 0
        dy = inputs["dy"].astype(np.float64)
        if case.l == "nhwc":
            dy = dy.transpose(0, 3, 1, 2)
        w = torch.tensor(inputs["filter"].astype(np.float64).transpose(3, 2, 0, 1), device=device)
        shape = (p.N, p.C, p.H, p.W)
        out = torch.nn.grad.conv2d_input(shape, w, torch.tensor(np.ascontiguousarray(dy), device=device),
                                         stride=case.s, padding=pad, dilation=case.d)
        out = out.cpu().numpy()
        return out.transpose(0, 2, 3, 1) if case.l == "nhwc" else out
    from .peers.torch_peer import DIFFERS, torch_mode
    problem = rs.PARSERS[case.kernel_name](inputs, attrs)
    if problem.layout.axes[0].rule in DIFFERS:
        raise Unsupported(DIFFERS[problem.layout.axes[0].rule])
    try:
        name, align = torch_mode(problem)
    except tfcompat.UnsupportedError as exc:
        raise Unsupported(str(exc)) from None
    x_shape = (case.b, case.c) + case.i
    if case.op in ("rbg", "rnn"):
        dy = inputs["dy"].astype(work).transpose(0, 3, 1, 2)
        res = _torch_resize_grad(torch, F, x_shape, dy, case.o, (name, align), None, device)
        return res.transpose(0, 2, 3, 1)
    if case.op == "interp":
        dy = inputs["diff_dst"].astype(work)
        if case.l == "nxc":
            dy = np.moveaxis(dy, -1, 1)
        res = _torch_resize_grad(torch, F, x_shape, dy, case.o, (name, align), None, device)
        return np.moveaxis(res, 1, -1) if case.l == "nxc" else res
    if case.op == "ortrg":
        dy = inputs["dY"].astype(work)
        return _torch_resize_grad(torch, F, x_shape, dy, case.o, (name, align),
                                  None if align else (case.sc or None), device)
    raise Unsupported(case.op)


def _torch_resize_grad(torch, F, x_shape, dy, out_size, mode, scales, device):
    dy = torch.tensor(np.ascontiguousarray(dy), device=device)
    x = torch.zeros(x_shape, dtype=dy.dtype, device=device, requires_grad=True)
    name, align = mode
    kw = {} if align is None else {"align_corners": align}
    if scales:
        y = F.interpolate(x, scale_factor=tuple(scales), mode=name, recompute_scale_factor=False, **kw)
    else:
        y = F.interpolate(x, size=tuple(out_size), mode=name, **kw)
    y.backward(dy)
    return x.grad.cpu().numpy().astype(np.float64)



# ------------------------------------------------------------------------------------------
# The oracles
# ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Oracle:
    """One source of reference gradients.

    ``compute(case, inputs, attrs)`` returns the reference or raises :class:`Unsupported`;
    ``supports(case)`` says beforehand which cases it can take; ``bitwise(case)`` whether a
    float32 result of a bitwise backend must equal it exactly; ``backend`` the registry backend
    this oracle is (None when it is independent of every registered backend);
    ``cross_check(case, inputs, attrs, ref)`` an optional second opinion for the report;
    ``finding(case)`` whether a difference from it is a finding about the oracle rather than a
    failure of the backend (it counts only under ``--strict``)."""
    name: str
    device: str
    available: Callable[[], bool]
    supports: Callable[[object], bool]
    compute: Callable[[object, dict, dict], np.ndarray]
    bitwise: Callable[[object], bool] = lambda case: False
    backend: Optional[str] = None
    cross_check: Optional[Callable] = None
    finding: Callable[[object], bool] = lambda case: False


def tf_available():
    try:
        tf_module()
    except ImportError:
        return False
    return True


def _linear_f64_no_tf(case):
    """TF resizes linearly in float32 only, and PyTorch's float64 path computes coordinates in
    float64: float64 linear interpolation is defined by the NumPy reference (float32
    coordinates, float64 sums) alone."""
    return case.dtype == "f64" and (case.op == "ortrg" or (case.op == "interp"
                                                           and case.m != "nearest"))


def _torch_stands_in_for_tf(case):
    """PyTorch judges in TF's place where TF is missing or has no GPU. It rounds half-pixel
    sample positions its own way, and on CUDA its nearest-exact backward breaks exact ties its
    own way (docs/semantics.md §9), so there a difference is a finding about PyTorch. ORT
    scales that TF cannot express are PyTorch's to judge: those differences are failures."""
    return not (case.op == "ortrg" and case.sc)


def _tape_agreement(case, inputs, attrs, ref):
    try:
        tape = tf_tape(case, inputs, attrs, "/CPU:0")
    except Unsupported as exc:
        return f"n/a ({exc})"
    if np.array_equal(np.asarray(tape), np.asarray(ref)):
        return "bitwise"
    return f"max|diff| {np.abs(np.asarray(tape, np.float64) - ref).max():.3g}"


ORACLES = [
    # TF's own ops: float32 ResizeBilinearGrad / ResizeNearestNeighborGrad results of a
    # bitwise backend must equal them exactly, and its forward resizes' in every dtype
    Oracle("tf-cpu-raw", "cpu", tf_available,
           supports=lambda case: case.op in ("rbg", "rnn", "conv") + FORWARD_OPS,
           compute=lambda case, inputs, attrs: tf_raw(case, inputs, attrs, "/CPU:0"),
           bitwise=lambda case: (case.op in ("rbg", "rnn") and case.dtype == "f32"
                                 or case.op in FORWARD_OPS),
           cross_check=_tape_agreement),
    # InterpolateBackward and ResizeGrad: TF compositions, through tfcompat's tensorflow backend
    Oracle("tf-cpu", "cpu", tf_available,
           supports=lambda case: case.op in ("interp", "ortrg") and not _linear_f64_no_tf(case),
           compute=lambda case, inputs, attrs: tf_raw(case, inputs, attrs, "/CPU:0"),
           backend="tensorflow"),
    Oracle("torch-cpu", "cpu", lambda: torch_available(),
           supports=lambda case: not _linear_f64_no_tf(case),
           compute=lambda case, inputs, attrs: torch_oracle(case, inputs, attrs, "cpu"),
           backend="torch", finding=_torch_stands_in_for_tf),
    Oracle("numpy-reference", "cpu", lambda: True, supports=lambda case: True,
           compute=numpy_reference, backend="numpy"),
]


def gpu_oracles(torch_device="cuda"):
    """TF's GPUs (tolerance, not bitwise: TF's GPU kernels use FMA and atomics), or PyTorch's
    CUDA device when TF lists no GPU."""
    gpus = tf_gpus()
    if gpus:
        return [Oracle(f"tf-{dev}", dev, tf_available, supports=lambda case: True,
                       compute=(lambda dev: lambda case, inputs, attrs: tf_raw(case, inputs, attrs,
                                                                               dev))(dev),
                       cross_check=(lambda dev: lambda case, inputs, attrs, ref: _repeatable(
                           case, inputs, attrs, ref, dev))(dev))
                for dev in gpus]
    if torch_available(cuda=True) or (torch_device != "cuda" and torch_available()):
        return [Oracle("torch-cuda", torch_device, lambda: True,
                       supports=lambda case: not _linear_f64_no_tf(case),
                       compute=lambda case, inputs, attrs: torch_oracle(case, inputs, attrs,
                                                                        torch_device),
                       backend="torch", finding=_torch_stands_in_for_tf)]
    return []


def _repeatable(case, inputs, attrs, ref, device):
    again = tf_raw(case, inputs, attrs, device)
    same = np.array_equal(np.asarray(ref).view(np.uint8), np.asarray(again).view(np.uint8))
    return "TF GPU deterministic over 2 runs" if same else "TF GPU bits differ between 2 runs"
