"""The ``jax`` and ``jax-antialias`` peers: gradients of JAX's own ``jax.image.resize`` and
``jax.lax.conv_general_dilated`` (``pip install 'tfcompat[jax]'``), taken with ``jax.vjp`` and
jit-compiled once per configuration.

``jax.image.resize`` knows one coordinate mapping, half-pixel centres, for its linear and
nearest methods; it has no align-corners and no TF legacy mapping. Its ``antialias`` argument
defaults to True, which, when downsampling, widens the linear kernel to the scale (an area-like
filter TF's resize does not apply): a porting pitfall. So two backends: ``jax`` passes
``antialias=False`` (the TF-equivalent call), ``jax-antialias`` leaves JAX's default.

- ResizeBilinearGrad (half pixel), ResizeNearestNeighborGrad (half pixel),
  InterpolateBackward (``half_pixel`` and ``tf_half_pixel_for_nn``, 1 to 3 axes, NXC and NCX):
  ``jax.image.resize`` of the spatial axes.
- ResizeGrad, half pixel: with ``scales``, ``jax.image.scale_and_translate`` with those scales
  and no translation (it samples ``(x + 0.5) / scale - 0.5``, ORT's mapping).
- ResizeBilinear, ResizeNearestNeighbor (half pixel): ``jax.image.resize`` itself, jit-compiled,
  in the image's dtype (a bilinear result returned as float32, as TF returns it; JAX has no
  integer linear resize).
- Conv2DBackpropInput: every padding (as explicit (before, after) pairs), stride, dilation
  (``rhs_dilation``) and layout (``dimension_numbers``).
- float64 runs inside ``jax.enable_x64(True)``, a scoped switch.
"""
import functools

import numpy as np

from tfcompat import _forward as fw, _resample as rs
from tfcompat.conv import problem as _conv
from tfcompat._resample import Rule
from tfcompat.kernel_names import (CONV2D_BACKPROP_INPUT, INTERPOLATE_BACKWARD,
                                   RESIZE_BILINEAR, RESIZE_BILINEAR_GRAD, RESIZE_GRAD,
                                   RESIZE_NEAREST_NEIGHBOR, RESIZE_NEAREST_NEIGHBOR_GRAD)
from tfcompat.registry import KernelConfig, UnsupportedError

BACKENDS = ("jax", "jax-antialias")


def _jax():
    try:
        import jax
    except ImportError:
        raise UnsupportedError("JAX is not installed: pip install 'tfcompat[jax]'") from None
    return jax


def missing():
    try:
        _jax()
    except UnsupportedError as exc:
        return str(exc)
    return None


_HALF = (Rule.LINEAR_HALF_PIXEL, Rule.NEAREST_HALF_PIXEL, Rule.LINEAR_ORT_HALF_PIXEL)


@functools.lru_cache(maxsize=64)
def _resize_vjp(in_shape, out_shape, method, antialias, spatial, scales, dtype):
    """jit(dy -> d resize / d x) for one configuration."""
    jax = _jax()
    import jax.numpy as jnp

    def forward(x):
        if scales:
            return jax.image.scale_and_translate(
                x, out_shape, spatial, jnp.asarray(scales, jnp.float32),
                jnp.zeros(len(spatial), jnp.float32), method, antialias=antialias)
        return jax.image.resize(x, out_shape, method, antialias=antialias)

    def backward(g):
        _, pullback = jax.vjp(forward, jnp.zeros(in_shape, g.dtype))
        return pullback(g)[0]

    return jax.jit(backward)


@functools.lru_cache(maxsize=64)
def _resize_jit(out_shape, method, antialias):
    jax = _jax()
    return jax.jit(lambda x: jax.image.resize(x, out_shape, method, antialias=antialias))


def _forward(problem, antialias):
    jax = _jax()
    rule = problem.axes[0].rule
    if rule not in _HALF:
        raise UnsupportedError(f"jax.image.resize has half-pixel centres only (got "
                               f"{problem.axes[0].describe()})")
    images = np.asarray(problem.images)
    if problem.linear and images.dtype.kind in "iu":
        raise UnsupportedError(f"jax.image.resize has no linear {images.dtype} resize")
    with jax.enable_x64(images.dtype == np.float64):
        fn = _resize_jit(tuple(problem.out_shape), "linear" if problem.linear else "nearest",
                         antialias)
        out = np.asarray(fn(images))
    return out.astype(problem.out_dtype, copy=False)


def _resample(problem, antialias):
    jax = _jax()
    axes = problem.layout.axes
    rule = axes[0].rule
    if rule not in _HALF:
        raise UnsupportedError(f"jax.image.resize has half-pixel centres only (got "
                               f"{axes[0].describe()})")
    dy = np.asarray(problem.dy)
    if dy.dtype.kind in "iu":
        raise UnsupportedError(f"JAX does not differentiate {dy.dtype} data")
    first = 1 if problem.channels_last else 2
    spatial = tuple(range(first, first + len(axes)))
    scales = ()
    if rule == Rule.LINEAR_ORT_HALF_PIXEL and any(a.ort_scale > 0 for a in axes):
        scales = tuple(float(a.ort_scale) for a in axes)
    method = "linear" if problem.linear else "nearest"
    in_shape = problem.out_shape
    with jax.enable_x64(dy.dtype == np.float64):
        fn = _resize_vjp(tuple(in_shape), tuple(dy.shape), method, antialias, spatial, scales,
                         dy.dtype.name)
        out = np.asarray(fn(dy))
    return out.astype(problem.out_dtype, copy=False)


@functools.lru_cache(maxsize=64)
def _conv_vjp(x_shape, w_shape, strides, padding, dilation, layout, dtype):
    jax = _jax()
    import jax.numpy as jnp
    dn = (layout, "HWIO", layout)

    def backward(w, g):
        def forward(x):
            return jax.lax.conv_general_dilated(x, w, strides, padding, rhs_dilation=dilation,
                                                dimension_numbers=dn)
        _, pullback = jax.vjp(forward, jnp.zeros(x_shape, g.dtype))
        return pullback(g)[0]

    return jax.jit(backward)


def _conv_grad(inputs, attrs):
    p = _conv.conv_problem(inputs, attrs)
    jax = _jax()
    dy, w = np.asarray(p.dy), np.asarray(p.filter)
    with jax.enable_x64(dy.dtype == np.float64):
        fn = _conv_vjp(tuple(p.out_shape), tuple(w.shape), (p.sh, p.sw),
                       ((p.pad_top, p.pad_bottom), (p.pad_left, p.pad_right)), (p.dh, p.dw),
                       "NHWC" if p.channels_last else "NCHW", dy.dtype.name)
        return np.asarray(fn(w, dy)).astype(p.dtype, copy=False)


def _configs(backend, antialias):
    def resize_bilinear_grad(inputs, attrs):
        return _resample(rs.resize_bilinear_grad_problem(inputs, attrs), antialias)

    def resize_nearest_neighbor_grad(inputs, attrs):
        return _resample(rs.resize_nearest_neighbor_grad_problem(inputs, attrs), antialias)

    def interpolate_backward(inputs, attrs):
        return _resample(rs.interpolate_backward_problem(inputs, attrs), antialias)

    def resize_grad(inputs, attrs):
        return _resample(rs.resize_grad_problem(inputs, attrs), antialias)

    def resize_bilinear(inputs, attrs):
        return _forward(fw.resize_bilinear_problem(inputs, attrs), antialias)

    def resize_nearest_neighbor(inputs, attrs):
        return _forward(fw.resize_nearest_neighbor_problem(inputs, attrs), antialias)

    return (
        KernelConfig(RESIZE_BILINEAR_GRAD, backend, resize_bilinear_grad),
        KernelConfig(RESIZE_NEAREST_NEIGHBOR_GRAD, backend, resize_nearest_neighbor_grad),
        KernelConfig(CONV2D_BACKPROP_INPUT, backend, _conv_grad),
        KernelConfig(INTERPOLATE_BACKWARD, backend, interpolate_backward),
        KernelConfig(RESIZE_GRAD, backend, resize_grad),
        KernelConfig(RESIZE_BILINEAR, backend, resize_bilinear),
        KernelConfig(RESIZE_NEAREST_NEIGHBOR, backend, resize_nearest_neighbor),
    )


KERNEL_CONFIGS = _configs("jax", False) + _configs("jax-antialias", True)
