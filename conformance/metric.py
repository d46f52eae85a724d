"""How close is close: the conformance metric of docs/semantics.md, shared by the tests and by
``python -m conformance``.

Per element, ``|got - ref| <= tol(dtype) * S + tiny``, where S is the same backward applied to
|dy| (and |filter|): the sum of the magnitudes of everything added into that element, so the
bound scales with the rounding error any summation order can make. ``tiny`` is the output
format's resolution at zero (one smallest subnormal): no implementation can do better than the
format. Integer results must be equal. The error reported is ``|got - ref| / S``.
"""
import ml_dtypes
import numpy as np

from tfcompat import _forward, _resample
from tfcompat.conv import problem as _conv
from tfcompat.backends import numpy_backend
from tfcompat.kernel_names import CONV2D_BACKPROP_INPUT

FLOAT16 = np.dtype(np.float16)
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)

#: tol(dtype) of the resize-type kernels
TOL = {FLOAT64: 1e-12, FLOAT32: 2e-6, FLOAT16: 2e-3, BFLOAT16: 1.6e-2}
#: tol(dtype) of Conv2DBackpropInput (a GEMM's summation order is the BLAS's)
CONV_TOL = {**TOL, FLOAT32: 1e-5}
TINY = 1e-30


def tolerance(dtype, conv=False):
    """tol(dtype); None for integer dtypes (they must be equal)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iub":
        return None
    return (CONV_TOL if conv else TOL)[dtype]


def resolution_at_zero(dtype):
    """The '+ tiny' of the metric: one smallest subnormal of ``dtype``."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iub":
        return TINY
    return max(float(ml_dtypes.finfo(dtype).smallest_subnormal), TINY)


def magnitude(kernel_name, inputs, attrs):
    """S: the float64 NumPy reference of the same backward applied to |dy| (and |filter|); of
    a forward resize, the same resize of |images|."""
    if kernel_name == CONV2D_BACKPROP_INPUT:
        problem = _conv.conv_problem(inputs, attrs)
        return numpy_backend.conv_backprop_input(problem, absolute=True).astype(np.float64)
    if kernel_name in _forward.PARSERS:
        problem = _forward.PARSERS[kernel_name](inputs, attrs)
        if problem.linear:
            return _lerp_magnitude(problem)
        return numpy_backend.forward(problem, absolute=True).astype(np.float64)
    problem = _resample.PARSERS[kernel_name](inputs, attrs)
    return numpy_backend.resample(problem, absolute=True).astype(np.float64)


def _lerp_magnitude(problem):
    """S of the bilinear forward: the largest |value| among each output's taps. TF evaluates it
    as lerps ``a + (b - a) * w`` in float32, whose rounding scales with the taps, not with the
    weighted sum: 1.235 + (0.001 - 1.235) * 0.9756 = 0.0311 rounds at 1.235's scale
    (docs/semantics.md §9)."""
    data = np.abs(problem.images.astype(np.float32).astype(np.float64))
    if problem.identity:
        return data
    for k, axis in enumerate(problem.axes):
        moved = np.moveaxis(data, 1 + k, 0)
        out = np.maximum.reduce([moved[idx] for idx, _ in numpy_backend.axis_taps(axis)])
        data = np.moveaxis(out, 0, 1 + k)
    return np.ascontiguousarray(data)


class Comparison:
    """The outcome of :func:`compare`: ``passed``, the worst ``|got - ref| / S`` (``norm_err``),
    its ``index``, and ``got``/``ref`` there."""
    __slots__ = ("passed", "norm_err", "index", "got", "ref")

    def __init__(self, passed, norm_err, index, got, ref):
        self.passed, self.norm_err, self.index, self.got, self.ref = (
            passed, norm_err, index, got, ref)

    def __repr__(self):
        return (f"Comparison(passed={self.passed}, norm_err={self.norm_err:.3e}, "
                f"index={self.index}, got={self.got!r}, ref={self.ref!r})")


def compare(got, ref, scale, dtype, conv=False, out_dtype=None):
    """Element-wise ``|got - ref| <= tol(dtype) * scale + tiny(out_dtype)``. ``dtype`` picks the
    tolerance (integers: equality), ``out_dtype`` (default: the same) the resolution floor.
    A shape mismatch or a NaN where the reference has none fails; the same infinity as the
    reference's, or a NaN where it has one, passes."""
    got64 = np.asarray(got).astype(np.float64)
    ref64 = np.asarray(ref).astype(np.float64)
    if got64.shape != ref64.shape:
        return Comparison(False, float("inf"), [], float("nan"), float("nan"))
    if got64.size == 0:
        return Comparison(True, 0.0, [], 0.0, 0.0)
    tol = tolerance(dtype, conv)
    # equal values (an infinity of the same sign included) and NaN for NaN need no tolerance
    same = (got64 == ref64) | (np.isnan(got64) & np.isnan(ref64))
    with np.errstate(invalid="ignore"):
        err = np.where(same, 0.0, np.abs(got64 - ref64))
    if tol is None:
        ok = same
        norm = np.where(ok, 0.0, np.inf)
    else:
        bound = tol * np.asarray(scale, np.float64) + resolution_at_zero(out_dtype or dtype)
        ok = (np.isfinite(err) & (err <= bound)) | same     # an infinite difference never
        with np.errstate(invalid="ignore"):
            norm = np.where(same, 0.0, err / np.maximum(scale, TINY))
    worst = np.where(np.isnan(norm), np.inf, norm)
    i = np.unravel_index(int(np.argmax(worst)), norm.shape)
    return Comparison(bool(ok.all()), float(worst[i]), [int(v) for v in i], float(got64[i]),
                      float(ref64[i]))


def ulp_distance(a, b):
    """The largest distance in units in the last place between two float32 arrays (0: the same
    bits, up to the sign of zero)."""
    ai = np.ascontiguousarray(a, np.float32).view(np.int32).astype(np.int64)
    bi = np.ascontiguousarray(b, np.float32).view(np.int32).astype(np.int64)
    # map the sign-magnitude encoding onto a monotonic integer line
    ai = np.where(ai < 0, -(ai & 0x7FFFFFFF), ai)
    bi = np.where(bi < 0, -(bi & 0x7FFFFFFF), bi)
    return int(np.abs(ai - bi).max()) if ai.size else 0
