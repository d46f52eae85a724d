"""The ``tf-plugin`` backend: TF's own raw ops with ``tfcompat.tf.enable()`` in effect, run in a
worker process, so that TF's own kernels stay the oracle in the harness's process
(``python -m conformance --plugin``; docs/architecture.md#inside-tensorflow).

The worker (multiprocessing's ``spawn``: a fresh interpreter) imports TF, enables the plugin
and answers one call at a time over a pipe; it is started on the first call and ended at exit.
Kernels: ResizeBilinearGrad and ResizeNearestNeighborGrad, the ops the plugin covers. An error
in the worker comes back as the same exception type and message.
"""
import atexit
import multiprocessing
import threading

from tfcompat.kernel_names import RESIZE_BILINEAR_GRAD, RESIZE_NEAREST_NEIGHBOR_GRAD
from tfcompat.registry import KernelConfig

BACKEND = "tf-plugin"


def _serve(conn):
    import os
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf
    import tfcompat.tf as ttf
    ttf.enable()
    while True:
        msg = conn.recv()
        if msg is None:
            return
        kernel, inputs, attrs = msg
        try:
            flags = {"align_corners": bool(attrs.get("alignCorners", False)),
                     "half_pixel_centers": bool(attrs.get("halfPixelCenters", False))}
            if kernel == RESIZE_BILINEAR_GRAD:
                out = tf.raw_ops.ResizeBilinearGrad(grads=inputs["dy"],
                                                    original_image=inputs["images"], **flags)
            else:
                out = tf.raw_ops.ResizeNearestNeighborGrad(
                    grads=inputs["dy"], size=list(np.shape(inputs["images"])[1:3]), **flags)
            conn.send(("ok", out.numpy(), ttf.enabled()["calls"]))
        except Exception as exc:    # (an InvalidArgumentError: its message)
            conn.send(("error", type(exc).__name__, getattr(exc, "message", str(exc))))


class _Worker:
    def __init__(self):
        self.lock = threading.Lock()
        self.proc = self.conn = None
        self.calls = None

    def call(self, kernel, inputs, attrs):
        with self.lock:
            if self.proc is None or not self.proc.is_alive():
                ctx = multiprocessing.get_context("spawn")
                self.conn, child = ctx.Pipe()
                self.proc = ctx.Process(target=_serve, args=(child,), daemon=True)
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


def resize_bilinear_grad(inputs, attrs):
    return WORKER.call(RESIZE_BILINEAR_GRAD, inputs, attrs)


def resize_nearest_neighbor_grad(inputs, attrs):
    return WORKER.call(RESIZE_NEAREST_NEIGHBOR_GRAD, inputs, attrs)


KERNEL_CONFIGS = (
    KernelConfig(RESIZE_BILINEAR_GRAD, BACKEND, resize_bilinear_grad),
    KernelConfig(RESIZE_NEAREST_NEIGHBOR_GRAD, BACKEND, resize_nearest_neighbor_grad),
)
