"""The implementations compared, as zero-argument callables built on prepared data.

Shared by the asv suite and the comparison command so both time exactly the same calls.
Each ``make_*`` returns a dict name -> callable, or raises NotImplementedError.
"""
import os

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tfcompat  # noqa: E402

from .shapes import CONV, INTERP, RESIZE, conv_out  # noqa: E402

FLAGS = {"legacy": (False, False), "align": (True, False), "half": (False, True)}
# (op, flags) -> PyTorch's F.interpolate (mode, align_corners) for the TF modes it has
TORCH_MODES = {("bilinear", "align"): ("bilinear", True), ("bilinear", "half"): ("bilinear", False),
               ("nearest", "legacy"): ("nearest", None),
               ("nearest", "half"): ("nearest-exact", None)}
# implementations timed beside ours and TF's, in the order the tables show them
OTHERS = ("torch", "tfjs-cpu", "onednn", "onednn-graph", "jax", "jax-antialias")


def peer_funcs(kernel, inputs, attrs, peers):
    """{peer: callable} for the peers (registered backends) that run this call; a peer that
    lacks the mode or is not installed (tfcompat.UnsupportedError) is left out."""
    out = {}
    for peer in peers:
        func = tfcompat.get_kernel(kernel, peer).kernel_func if (
            (peer, kernel) in tfcompat.list_kernels()) else None
        if func is None:
            continue
        try:
            func(inputs, attrs)
        except tfcompat.UnsupportedError:
            continue
        out[peer] = (lambda f: lambda: f(inputs, attrs))(func)
    return out


def dtype_of(name):
    import ml_dtypes
    return {"float32": np.float32, "float64": np.float64, "float16": np.float16,
            "bfloat16": ml_dtypes.bfloat16}[name]


def tf_module():
    from conformance._tf import import_tensorflow
    try:
        return import_tensorflow()
    except ImportError:
        return None


def torch_module(threads=None):
    try:
        import torch
    except ImportError:
        return None
    if threads:
        torch.set_num_threads(threads)
    return torch


def make_resize(shape_id, op, flags, threads, rng, only=None, peers=()):
    img_shape, dy_shape = RESIZE[shape_id]
    dy = rng.standard_normal(dy_shape).astype(np.float32)
    img = np.zeros(img_shape, np.float32)
    align, half = FLAGS[flags]
    impls = {}
    if op == "bilinear":
        impls["tfcompat"] = lambda: tfcompat.resize_bilinear_grad(
            dy, img, align_corners=align, half_pixel_centers=half)
    else:
        size = list(img_shape[1:3])
        impls["tfcompat"] = lambda: tfcompat.resize_nearest_neighbor_grad(
            dy, size, align_corners=align, half_pixel_centers=half)
    tf = tf_module() if only in (None, "tensorflow") else None
    if tf is not None:
        dyt, imgt = tf.constant(dy), tf.constant(img)
        if op == "bilinear":
            impls["tensorflow"] = lambda: tf.raw_ops.ResizeBilinearGrad(
                grads=dyt, original_image=imgt, align_corners=align, half_pixel_centers=half).numpy()
        else:
            impls["tensorflow"] = lambda: tf.raw_ops.ResizeNearestNeighborGrad(
                grads=dyt, size=list(img_shape[1:3]), align_corners=align,
                half_pixel_centers=half).numpy()
    torch = torch_module(threads) if only in (None, "torch") else None
    mode = TORCH_MODES.get((op, flags))
    if torch is not None and mode is not None:
        impls["torch"] = _torch_resize(torch, dy, img_shape, mode)
    kernel = "ResizeBilinearGrad" if op == "bilinear" else "ResizeNearestNeighborGrad"
    impls.update(peer_funcs(kernel, {"dy": dy, "images": img},
                            {"alignCorners": align, "halfPixelCenters": half}, peers))
    bytes_moved = dy.nbytes + img.nbytes
    return impls, bytes_moved


def make_forward(shape_id, op, flags, threads, rng, only=None, peers=()):
    """TF's forward resize of a workload's image to its dy's size: ours, TF's raw op,
    PyTorch's F.interpolate (channels-last, the modes it shares with TF) and the peers that
    register the forward kernel."""
    img_shape, dy_shape = RESIZE[shape_id]
    img = rng.standard_normal(img_shape).astype(np.float32)
    size = list(dy_shape[1:3])
    align, half = FLAGS[flags]
    fn = tfcompat.resize_bilinear if op == "bilinear" else tfcompat.resize_nearest_neighbor
    impls = {"tfcompat": lambda: fn(img, size, align_corners=align, half_pixel_centers=half)}
    tf = tf_module() if only in (None, "tensorflow") else None
    if tf is not None:
        imgt = tf.constant(img)
        op_tf = tf.raw_ops.ResizeBilinear if op == "bilinear" else tf.raw_ops.ResizeNearestNeighbor
        impls["tensorflow"] = lambda: op_tf(images=imgt, size=size, align_corners=align,
                                            half_pixel_centers=half).numpy()
    torch = torch_module(threads) if only in (None, "torch") else None
    mode = TORCH_MODES.get((op, flags))
    if torch is not None and mode is not None:
        import torch.nn.functional as F
        x = torch.from_numpy(np.moveaxis(img, -1, 1).copy()).contiguous(
            memory_format=torch.channels_last)
        kw = {} if mode[1] is None else {"align_corners": mode[1]}
        impls["torch"] = lambda: F.interpolate(x, size=tuple(size), mode=mode[0], **kw)
    kernel = "ResizeBilinear" if op == "bilinear" else "ResizeNearestNeighbor"
    impls.update(peer_funcs(kernel, {"images": img}, {"size": size, "alignCorners": align,
                                                      "halfPixelCenters": half}, peers))
    out_bytes = dy_shape[0] * size[0] * size[1] * dy_shape[3] * 4
    return impls, img.nbytes + out_bytes


def _torch_resize(torch, dy, img_shape, mode):
    """PyTorch's upsample backward, channels-last (the same memory layout as ours)."""
    import torch.nn.functional as F
    grad = torch.from_numpy(np.moveaxis(dy, -1, 1).copy()).contiguous(
        memory_format=torch.channels_last if dy.ndim == 4 else torch.channels_last_3d)
    x_shape = (img_shape[0], img_shape[-1]) + tuple(img_shape[1:-1])
    name, align = mode
    kw = {} if align is None else {"align_corners": align}
    x = torch.zeros(x_shape).contiguous(
        memory_format=torch.channels_last if dy.ndim == 4 else torch.channels_last_3d)
    x.requires_grad_(True)
    y = F.interpolate(x, size=tuple(dy.shape[1:-1]), mode=name, **kw)

    def run():
        (g,) = torch.autograd.grad(y, x, grad, retain_graph=True)
        return g
    return run


def make_resize_grad(shape_id, rng, only=None):
    """ORT's ResizeGrad on a workload's shapes, NCHW, half-pixel: ours and TF's raw
    ResizeBilinearGrad on the same values (ORT's mapping equals TF's when scales are not
    given)."""
    img_shape, dy_shape = RESIZE[shape_id]
    dy = rng.standard_normal(dy_shape).astype(np.float32)
    d_nchw = np.ascontiguousarray(dy.transpose(0, 3, 1, 2))
    x = np.zeros((img_shape[0], img_shape[3], img_shape[1], img_shape[2]), np.float32)
    impls = {"tfcompat": lambda: tfcompat.resize_grad(d_nchw, x)}
    tf = tf_module() if only in (None, "tensorflow") else None
    if tf is not None:
        dyt, imgt = tf.constant(dy), tf.zeros(img_shape, tf.float32)
        impls["tensorflow"] = lambda: tf.raw_ops.ResizeBilinearGrad(
            grads=dyt, original_image=imgt, half_pixel_centers=True).numpy()
    return impls


def make_interp(shape_id, layout, threads, rng, only=None, peers=()):
    src_shape, dst_shape = INTERP[shape_id]
    dy = rng.standard_normal(dst_shape).astype(np.float32)
    src = np.zeros(src_shape, np.float32)
    if layout == "NCX":
        dy_in, src_in = np.ascontiguousarray(np.moveaxis(dy, -1, 1)), np.ascontiguousarray(
            np.moveaxis(src, -1, 1))
    else:
        dy_in, src_in = dy, src
    impls = {"tfcompat": lambda: tfcompat.interpolate_backward(
        src_in, dy_in, mode="trilinear", data_format=layout)}
    torch = torch_module(threads) if only in (None, "torch") else None
    if torch is not None:
        import torch.nn.functional as F
        fmt = torch.channels_last_3d if layout == "NXC" else torch.contiguous_format
        grad = torch.from_numpy(np.moveaxis(dy, -1, 1).copy()).contiguous(memory_format=fmt)
        x = torch.zeros((src_shape[0], src_shape[-1]) + src_shape[1:-1]).contiguous(
            memory_format=fmt).requires_grad_(True)
        y = F.interpolate(x, size=dst_shape[1:-1], mode="trilinear", align_corners=False)
        impls["torch"] = lambda: torch.autograd.grad(y, x, grad, retain_graph=True)[0]
    impls.update(peer_funcs("InterpolateBackward", {"src": src_in, "diff_dst": dy_in},
                            {"mode": "trilinear", "data_format": layout}, peers))
    return impls, dy.nbytes + src.nbytes


def stream_floor(src, dst, chunks, threads):
    """tfcompat's instrument (tfcompat/csrc/instruments.pxi): reads every float of ``src`` once
    and writes every float of ``dst`` once, in ``chunks`` matching pieces on ``threads``
    threads. Its preconditions are checked here."""
    from tfcompat._simd import kernels
    for name, a in (("src", src), ("dst", dst)):
        if not (isinstance(a, np.ndarray) and a.dtype == np.float32 and a.flags.c_contiguous):
            raise TypeError(f"{name}: expected a C-contiguous float32 array")
    if not 1 <= chunks <= min(src.size, dst.size):
        raise ValueError(f"chunks: got {chunks}; expected 1 <= chunks <= "
                         f"{min(src.size, dst.size)} (the shorter array's length)")
    kernels.instrument_stream_floor(src, dst, chunks, threads)


def floor_probe(src_nbytes, dst_nbytes, threads):
    """A callable that reads ``src_nbytes`` and writes ``dst_nbytes`` once, on ``threads``
    threads (:func:`stream_floor`): the least memory traffic of a resize backward with that
    |dy| and |dx|. Its arrays are NumPy's, like the dy the workloads pass."""
    src = np.ones(src_nbytes // 4, np.float32)
    dst = np.ones(dst_nbytes // 4, np.float32)  # written once here, so no page faults later
    chunks = max(threads, min(src.size, dst.size, src.size // 16384))
    return lambda: stream_floor(src, dst, chunks, threads)


def fma_peak_probe(threads, rounds=1_000_000):
    """A callable that runs tfcompat's instrument of the float32 multiply-add peak
    (tfcompat/csrc/peak.h: independent chains of vector FMAs in registers, AVX-512 where this
    CPU has it, else AVX2) for ``rounds`` rounds on each of ``threads`` threads, the float32
    operations one call does, and which instructions ran ("AVX-512" or "AVX2"); None where the
    instrument is not built or the CPU has no FMA.
    No conv multiplies faster, so a conv's FLOPs at this rate are its compute floor."""
    from tfcompat import _checks as ck
    from tfcompat._simd import cpu_has, kernels
    threads, rounds = ck.as_int(threads, "threads"), ck.as_int(rounds, "rounds")
    for name, v in (("threads", threads), ("rounds", rounds)):
        if v < 1:
            raise ValueError(f"{name}: got {v!r}; expected an int >= 1")
    if not kernels.instrument_fma_peak_built():
        return None
    if cpu_has("AVX512F"):
        width = 512
    elif cpu_has("AVX2") and cpu_has("FMA3"):
        width = 256
    else:
        return None
    flops = float(kernels.instrument_fma_round_flops(width)) * rounds * threads
    return ((lambda: kernels.instrument_fma_peak(rounds, width, threads)), flops,
            "AVX-512" if width == 512 else "AVX2")


def make_conv(shape_id, dtype_name, threads, rng, only=None, peers=()):
    x_shape, w_shape, s, pad = CONV[shape_id]
    dt = dtype_of(dtype_name)
    w = (rng.standard_normal(w_shape) * 0.1).astype(dt)
    dy = rng.standard_normal(conv_out(x_shape, w_shape, s, pad)).astype(dt)
    strides = [1, s, s, 1]
    impls = {"tfcompat": lambda: tfcompat.conv2d_backprop_input(
        x_shape, w, dy, strides=strides, padding=pad)}
    tf = tf_module() if only in (None, "tensorflow") else None
    if tf is not None:
        wt, dyt = tf.constant(w), tf.constant(dy)
        impls["tensorflow"] = lambda: tf.raw_ops.Conv2DBackpropInput(
            input_sizes=list(x_shape), filter=wt, out_backprop=dyt, strides=strides,
            padding=pad).numpy()
    torch = torch_module(threads) if only in (None, "torch") else None
    if torch is not None and dtype_name in ("float32", "float64", "bfloat16"):
        tdt = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}[dtype_name]
        wtt = torch.from_numpy(w.astype(np.float32).transpose(3, 2, 0, 1).copy()).to(tdt)
        gtt = torch.from_numpy(dy.astype(np.float32).transpose(0, 3, 1, 2).copy()).to(tdt).contiguous(
            memory_format=torch.channels_last)
        in_nchw = (x_shape[0], x_shape[3], x_shape[1], x_shape[2])
        if pad == "SAME":
            need = max(0, (dy.shape[1] - 1) * s + w_shape[0] - x_shape[1])
            if need % 2:
                in_nchw = None  # asymmetric SAME padding: PyTorch has no such conv
            padding = need // 2
        else:
            padding = 0
        if in_nchw is not None:
            impls["torch"] = lambda: torch.nn.grad.conv2d_input(in_nchw, wtt, gtt, stride=s,
                                                                padding=padding)
    impls.update(peer_funcs("Conv2DBackpropInput", {"dy": dy, "filter": w},
                            {"inputShape": list(x_shape), "strides": s, "pad": pad.lower()},
                            peers))
    flops = 2.0 * np.prod(dy.shape) * w_shape[0] * w_shape[1] * w_shape[2]
    return impls, flops
