"""The ``tf-plugin`` backend: TF's own raw ops with ``tfcompat.tf.enable()`` in effect, run in a
worker process, so that TF's own kernels stay the oracle in the harness's process
(``python -m conformance --plugin``; docs/architecture.md#inside-tensorflow).

The worker (multiprocessing's ``spawn``: a fresh interpreter) imports TF, enables the plugin
and answers one call at a time over a pipe; it is started on the first call and ended at exit.
Kernels: ResizeBilinearGrad, ResizeNearestNeighborGrad and Conv2DBackpropInput, the ops the
plugin covers (the conv with the case's SAME or VALID padding, else EXPLICIT, as the
tensorflow backend passes it). An error in the worker comes back with its type and message,
and so does a call that TF answered with its own kernel (tfcompat's call counter of the op did
not move): a result of TF's kernel is not tfcompat's pass.
"""
import atexit
import multiprocessing
import threading

from tfcompat.kernel_names import (CONV2D_BACKPROP_INPUT, RESIZE_BILINEAR_GRAD,
                                   RESIZE_NEAREST_NEIGHBOR_GRAD)
from tfcompat.registry import KernelConfig

BACKEND = "tf-plugin"


def _serve(conn, enable_kwargs):
    import os
    import warnings
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf
    import tfcompat.tf as ttf
    with warnings.catch_warnings():     # a miss fails the cases it answers, below
        warnings.simplefilter("ignore", RuntimeWarning)
        ttf.enable(**enable_kwargs)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        kernel, inputs, attrs = msg
        before = ttf.enabled()["calls"][kernel]
        try:
            if kernel == CONV2D_BACKPROP_INPUT:
                out, called = _conv(tf, inputs, attrs)
            else:
                flags = {"align_corners": bool(attrs.get("alignCorners", False)),
                         "half_pixel_centers": bool(attrs.get("halfPixelCenters", False))}
                if kernel == RESIZE_BILINEAR_GRAD:
                    out = tf.raw_ops.ResizeBilinearGrad(grads=inputs["dy"],
                                                        original_image=inputs["images"], **flags)
                else:
                    out = tf.raw_ops.ResizeNearestNeighborGrad(
                        grads=inputs["dy"], size=list(np.shape(inputs["images"])[1:3]), **flags)
                out, called = out.numpy(), True
        except Exception as exc:    # (an InvalidArgumentError: its message)
            conn.send(("error", type(exc).__name__, getattr(exc, "message", str(exc))))
            continue
        calls = ttf.enabled()["calls"]
        if called and calls[kernel] == before:
            conn.send(("error", "NotTfcompat", f"TF answered {kernel} with its own kernel "
                       f"(tfcompat's call counter stayed at {before}); enabled: "
                       f"{ttf.enabled()['missed'] or ttf.enabled()['ops']}"))
        else:
            conn.send(("ok", out, calls))


def _conv(tf, inputs, attrs):
    """(result, whether TF's op was called)."""
    import numpy as np
    from tfcompat.conv.problem import conv_problem
    p = conv_problem(inputs, attrs)
    if p.empty:     # as the tensorflow backend: TF refuses some empty shapes
        return np.zeros(p.out_shape, p.dtype), False
    pb, pr = p.floor_pads()
    nhwc = p.channels_last
    pad = attrs.get("pad", "valid")
    kw = {"padding": pad.upper()} if isinstance(pad, str) else {
        "padding": "EXPLICIT",
        "explicit_paddings": ([0, 0, p.pad_top, pb, p.pad_left, pr, 0, 0] if nhwc
                              else [0, 0, 0, 0, p.pad_top, pb, p.pad_left, pr])}
    out = tf.raw_ops.Conv2DBackpropInput(
        input_sizes=list(p.out_shape), filter=tf.constant(p.filter),
        out_backprop=tf.constant(p.dy),
        strides=[1, p.sh, p.sw, 1] if nhwc else [1, 1, p.sh, p.sw],
        dilations=[1, p.dh, p.dw, 1] if nhwc else [1, 1, p.dh, p.dw],
        data_format="NHWC" if nhwc else "NCHW", **kw)
    return np.asarray(out.numpy(), p.dtype), True


class _Worker:
    def __init__(self):
        self.lock = threading.Lock()
        self.proc = self.conn = None
        self.calls = None
        self.enable_kwargs = {"ops": "all"}     # every kernel, judged

    def call(self, kernel, inputs, attrs):
        with self.lock:
            if self.proc is None or not self.proc.is_alive():
                ctx = multiprocessing.get_context("spawn")
                self.conn, child = ctx.Pipe()
                self.proc = ctx.Process(target=_serve, args=(child, self.enable_kwargs),
                                        daemon=True)
                self.proc.start()
            self.conn.send((kernel, inputs, attrs))
            reply = self.conn.recv()
        if reply[0] == "ok":
            self.calls = reply[2]
            return reply[1]
        raise RuntimeError(f"tf-plugin {kernel}: {reply[1]}: {reply[2]}")

    def close(self):
        if self.proc is not None and self.proc.is_alive():
            self.conn.send(None)
            self.proc.join(10)
        self.proc = None


WORKER = _Worker()
atexit.register(WORKER.close)


def configure(**enable_kwargs):
    """The arguments the worker passes to ``tfcompat.tf.enable`` (default ``ops="all"``), e.g.
    ``onednn=False`` to judge what a user who left TF's oneDNN conv in place gets; a running
    worker is ended, so that the next call starts one with them."""
    WORKER.close()
    WORKER.enable_kwargs = {"ops": "all", **enable_kwargs}


def resize_bilinear_grad(inputs, attrs):
    return WORKER.call(RESIZE_BILINEAR_GRAD, inputs, attrs)


def resize_nearest_neighbor_grad(inputs, attrs):
    return WORKER.call(RESIZE_NEAREST_NEIGHBOR_GRAD, inputs, attrs)


def conv2d_backprop_input(inputs, attrs):
    return WORKER.call(CONV2D_BACKPROP_INPUT, inputs, attrs)


KERNEL_CONFIGS = (
    KernelConfig(RESIZE_BILINEAR_GRAD, BACKEND, resize_bilinear_grad),
    KernelConfig(RESIZE_NEAREST_NEIGHBOR_GRAD, BACKEND, resize_nearest_neighbor_grad),
    KernelConfig(CONV2D_BACKPROP_INPUT, BACKEND, conv2d_backprop_input),
)
