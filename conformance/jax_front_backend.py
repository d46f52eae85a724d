"""The ``jax-front`` backend: ``tfcompat.jax.resize`` (the JAX front's XLA FFI custom calls,
under ``jax.jit``) judged by TF's raw ops like the cython backend (``python -m conformance
--jax-front``; docs/architecture.md#inside-jax).

Kernels: ResizeBilinear and ResizeNearestNeighbor (the jitted resize), ResizeBilinearGrad and
ResizeNearestNeighborGrad (the jitted vjp of the resize, given the case's dy as the
cotangent). The front takes float32, float16, bfloat16 and float64 (inside
``jax.enable_x64(True)``, a scoped switch), and the nearest forward integers too
(tfcompat._capi.front_dtypes), and keeps x's dtype, so a case it cannot express is passed over
(UnsupportedError, n/a): integer images of the bilinear resize or a gradient, a bilinear grad
whose dy's dtype is not
the image's (TF's op takes float32 grads for a half-type image; JAX's cotangent has the
primal's dtype, float32 dy for a float64 image excepted: widened exactly), and a nearest grad
with both flags (TF's forward refuses them, so the front's does).
"""
import functools

import numpy as np

from tfcompat.kernel_names import (RESIZE_BILINEAR, RESIZE_BILINEAR_GRAD,
                                   RESIZE_NEAREST_NEIGHBOR, RESIZE_NEAREST_NEIGHBOR_GRAD)
from tfcompat._capi import front_dtypes
from tfcompat._checks import dtype_names
from tfcompat.ops import RESIZES
from tfcompat.registry import KernelConfig, UnsupportedError

BACKEND = "jax-front"


def _front():
    try:
        import jax
        import tfcompat.jax as tj
    except ImportError:
        raise UnsupportedError("JAX is not installed: pip install 'tfcompat[jax]'") from None
    return jax, tj


@functools.lru_cache(maxsize=128)
def _jitted(method, size, align, half, grad):
    """jit(x -> resize) or jit((x, dy) -> vjp of the resize at x, applied to dy)."""
    jax, tj = _front()

    def f(x):
        return tj.resize(x, size, method, align_corners=align, half_pixel_centers=half)

    if not grad:
        return jax.jit(f)
    return jax.jit(lambda x, dy: jax.vjp(f, x)[1](dy)[0])


def _flags(attrs):
    return bool(attrs.get("alignCorners", False)), bool(attrs.get("halfPixelCenters", False))


def _dtype(a, what, op):
    if np.dtype(a.dtype) not in front_dtypes(op):
        raise UnsupportedError(f"the JAX front's {op} takes {dtype_names(front_dtypes(op))}; "
                               f"{what} is {np.dtype(a.dtype).name}")
    return np.dtype(a.dtype).name


def _run(fn, *arrays):
    jax, _ = _front()
    if any(np.dtype(a.dtype) == np.float64 for a in arrays):
        with jax.enable_x64(True):
            return np.asarray(fn(*arrays))
    return np.asarray(fn(*arrays))


def bitwise(case):
    """Where the front is held to TF's bits: float32 (forward and grads) and the nearest
    forward's copy in every dtype. A half-type bilinear forward is TF's float32 result rounded
    once to x's dtype, a float64 one computed in float64 (docs/semantics.md §14): within."""
    return case.dtype == "f32" or case.op == "rn"


def _forward(method, inputs, attrs):
    images = np.asarray(inputs["images"])
    _dtype(images, "images", RESIZES[method][0])
    align, half = _flags(attrs)
    return _run(_jitted(method, tuple(int(v) for v in attrs["size"]), align, half, False),
                images)


def _grad(method, inputs, attrs):
    dy, images = np.asarray(inputs["dy"]), np.asarray(inputs["images"])
    dtype = _dtype(images, "images", RESIZES[method][1])
    if np.dtype(dy.dtype).name != dtype:
        if not (dtype == "float64" and dy.dtype == np.float32):
            raise UnsupportedError(f"the JAX front's cotangent has x's dtype ({dtype}); this "
                                   f"case's dy is {np.dtype(dy.dtype).name}")
        dy = dy.astype(np.float64)
    align, half = _flags(attrs)
    if align and half:
        raise UnsupportedError("the JAX front's resize refuses align_corners with "
                               "half_pixel_centers, as TF's forward does (TF's nearest grad "
                               "alone takes both)")
    x = np.zeros(images.shape, images.dtype) if images.strides == (0,) * images.ndim else images
    return _run(_jitted(method, tuple(dy.shape[1:3]), align, half, True), x, dy)


KERNEL_CONFIGS = (
    KernelConfig(RESIZE_BILINEAR, BACKEND, functools.partial(_forward, "bilinear")),
    KernelConfig(RESIZE_NEAREST_NEIGHBOR, BACKEND, functools.partial(_forward, "nearest")),
    KernelConfig(RESIZE_BILINEAR_GRAD, BACKEND, functools.partial(_grad, "bilinear")),
    KernelConfig(RESIZE_NEAREST_NEIGHBOR_GRAD, BACKEND, functools.partial(_grad, "nearest")),
)
