"""Helpers shared by the tests: the metric's assertions, TF's availability, and forward ops
written from docs/semantics.md's formulas (scalar float32 coordinate math, independent of every
backend) for the adjoint and property tests."""
import math

import numpy as np
import pytest

from conformance.metric import CONV_TOL, TOL, resolution_at_zero  # noqa: F401  (re-exported)

f32 = np.float32
BACKENDS = ("cython", "numpy")


def tf_or_skip():
    return pytest.importorskip("tensorflow", reason="TensorFlow is not installed: "
                               "pip install -e '.[tf]' to run the comparisons with TF")


def random_front_cases(n, seed):
    """(b, c, ih, iw, oh, ow) of the framework fronts' bitwise tests, with every edge their
    issues name: axes of size 1, down- and upscaling, non-square, batches of 1 to 3."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        b, c = int(rng.integers(1, 4)), int(rng.integers(1, 20))
        ih, iw = (int(v) for v in rng.choice([1, 2, 3, 5, 8, 13, 31], 2))
        oh, ow = (int(v) for v in rng.choice([1, 2, 4, 7, 16, 29, 40], 2))
        out.append((b, c, ih, iw, oh, ow))
    return out


def tf_resize(tf, method, x, size, align, half):
    """TF's ResizeBilinear or ResizeNearestNeighbor of NHWC ``x`` (a NumPy array)."""
    op = tf.raw_ops.ResizeBilinear if method == "bilinear" else tf.raw_ops.ResizeNearestNeighbor
    return op(images=x, size=list(size), align_corners=align, half_pixel_centers=half).numpy()


def tf_resize_grad(tf, method, g, x, align, half):
    """TF's ResizeBilinearGrad or ResizeNearestNeighborGrad of NHWC grads ``g`` for image ``x``."""
    if method == "bilinear":
        return tf.raw_ops.ResizeBilinearGrad(grads=g, original_image=x, align_corners=align,
                                             half_pixel_centers=half).numpy()
    return tf.raw_ops.ResizeNearestNeighborGrad(grads=g, size=list(x.shape[1:3]),
                                                align_corners=align,
                                                half_pixel_centers=half).numpy()


def assert_close(got, ref, scale, dtype, tol=TOL, what=""):
    """|got - ref| <= tol[dtype] * scale + tiny, element-wise (conformance/metric.py)."""
    got = np.asarray(got).astype(np.float64)
    ref = np.asarray(ref).astype(np.float64)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    err = np.abs(got - ref)
    bound = tol[np.dtype(dtype)] * np.asarray(scale, dtype=np.float64) + resolution_at_zero(dtype)
    bad = ~(err <= bound)
    if bad.any():
        i = np.unravel_index(np.argmax(np.where(bad, err - bound, -np.inf)), err.shape)
        raise AssertionError(f"{what}: {int(bad.sum())} elements out of tolerance; worst at {i}: "
                             f"got {got[i]!r}, ref {ref[i]!r}, scale {np.asarray(scale)[i]!r}")


def assert_bitwise(got, ref, what=""):
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, ref.dtype, got.shape,
                                                              ref.shape)
    if not np.array_equal(np.ascontiguousarray(got).view(np.uint8),
                          np.ascontiguousarray(ref).view(np.uint8)):
        d = np.abs(got.astype(np.float64) - ref.astype(np.float64))
        i = np.unravel_index(np.nanargmax(d), d.shape)
        raise AssertionError(f"{what}: not bitwise equal; worst at {i}: {got[i]!r} vs {ref[i]!r}")


def _tf_scale(i, o, align):
    if align and o > 1 and i != 1:
        return f32(i - 1) / f32(o - 1)
    return f32(i) / f32(o)


def forward_taps(i, o, rule):
    """For each resized x: list of (source index, weight). rule: (method, transform)."""
    method, transform = rule[:2]
    taps = []
    for x in range(o):
        xf = f32(x)
        if method == "nearest":
            scale = _tf_scale(i, o, transform in ("align_corners", "align_half"))
            if transform in ("half_pixel", "pytorch_half_pixel", "tf_half_pixel_for_nn"):
                idx = math.floor((xf + f32(0.5)) * scale)
            elif transform == "align_corners":
                s = float(xf * scale)
                idx = math.floor(s + 0.5)  # roundf for s >= 0, exact in float64
            elif transform == "align_half":
                idx = math.floor(float((xf + f32(0.5)) * scale) + 0.5)
            else:
                idx = math.floor(xf * scale)
            taps.append([(min(idx, i - 1), 1.0)])
        elif transform.startswith("ort"):
            if transform == "ort_align":
                scale = f32(i - 1) / f32(o - 1) if o > 1 else f32(0)
                s = scale * xf
            else:
                scale = f32(1) / f32(rule[2]) if len(rule) > 2 else f32(i) / f32(o)
                s = max(scale * (xf + f32(0.5)) - f32(0.5), f32(0))
            i0 = min(int(s), i - 1)
            l1 = s - f32(i0)
            taps.append([(i0, float(f32(1) - l1)), (i0 + 1 if i0 < i - 1 else i0, float(l1))])
        else:
            scale = _tf_scale(i, o, transform == "align_corners")
            if transform in ("half_pixel", "tf_half_pixel_for_nn") or (
                    transform == "pytorch_half_pixel" and o > 1):
                s = (xf + f32(0.5)) * scale - f32(0.5)
            elif transform == "pytorch_half_pixel":
                s = f32(0)
            else:
                s = xf * scale
            fl = f32(math.floor(s))
            lerp = s - fl
            taps.append([(max(int(fl), 0), float(f32(1) - lerp)),
                         (min(math.ceil(s), i - 1), float(lerp))])
    return taps


def resample_forward(x, axes_pos, out_sizes, rules):
    y = x
    for pos, o, rule in zip(axes_pos, out_sizes, rules):
        taps = forward_taps(y.shape[pos], o, rule)
        moved = np.moveaxis(y, pos, 0)
        out = np.zeros((o,) + moved.shape[1:])
        for xo, tl in enumerate(taps):
            for idx, w in tl:
                out[xo] += w * moved[idx]
        y = np.moveaxis(out, 0, pos)
    return y


def conv_forward(x, w, s, d, pads):
    """NHWC conv2d from the definition; pads = (top, bottom, left, right)."""
    n, h, wd, c = x.shape
    fh, fw, _, oc = w.shape
    pt, pb, pl, pr = pads
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    oh = (h + pt + pb - (fh - 1) * d - 1) // s + 1
    ow = (wd + pl + pr - (fw - 1) * d - 1) // s + 1
    y = np.zeros((n, oh, ow, oc))
    for ky in range(fh):
        for kx in range(fw):
            patch = xp[:, ky * d:ky * d + (oh - 1) * s + 1:s, kx * d:kx * d + (ow - 1) * s + 1:s, :]
            y += patch @ w[ky, kx]
    return y
