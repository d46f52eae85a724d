"""Adjoint identity <F(x), y> == <x, B(y)> for every kernel, with forward ops written here from
SPEC.md's formulas (scalar float32 coordinate math, independent of both backends)."""
import math

import numpy as np
import pytest

import tfcompat as T
from conftest import BACKENDS

f32 = np.float32


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


def _check(fx, y, x, bx):
    lhs, rhs = float(np.vdot(fx, y)), float(np.vdot(x, bx))
    assert lhs == pytest.approx(rhs, rel=1e-10, abs=1e-10)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("align,half", [(False, False), (True, False), (False, True)])
def test_adjoint_resize_bilinear(backend, align, half, rng):
    x = rng.standard_normal((2, 5, 3, 4))
    y = rng.standard_normal((2, 7, 8, 4))
    t = "align_corners" if align else "half_pixel" if half else "asymmetric"
    fx = resample_forward(x, (1, 2), (7, 8), [("linear", t)] * 2)
    _check(fx, y, x, T.resize_bilinear_grad(y, x, align_corners=align, half_pixel_centers=half,
                                            backend=backend))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("align,half", [(False, False), (True, False), (False, True), (True, True)])
def test_adjoint_resize_nearest(backend, align, half, rng):
    x = rng.standard_normal((2, 5, 3, 4))
    y = rng.standard_normal((2, 11, 2, 4))
    t = "align_half" if align and half else "align_corners" if align else \
        "half_pixel" if half else "asymmetric"
    fx = resample_forward(x, (1, 2), (11, 2), [("nearest", t)] * 2)
    _check(fx, y, x, T.resize_nearest_neighbor_grad(y, [5, 3], align_corners=align,
                                                    half_pixel_centers=half, backend=backend))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("transform", ["half_pixel", "align_corners", "asymmetric",
                                       "pytorch_half_pixel"])
@pytest.mark.parametrize("rank,fmt", [(1, "NXC"), (2, "NCX"), (3, "NXC"), (3, "NCX")])
def test_adjoint_interpolate(backend, mode, transform, rank, fmt, rng):
    in_sp, out_sp = (4, 3, 5)[:rank], (7, 1, 2)[:rank]
    if fmt == "NXC":
        x = rng.standard_normal((2,) + in_sp + (3,))
        y = rng.standard_normal((2,) + out_sp + (3,))
        pos = tuple(range(1, rank + 1))
    else:
        x = rng.standard_normal((2, 3) + in_sp)
        y = rng.standard_normal((2, 3) + out_sp)
        pos = tuple(range(2, rank + 2))
    fx = resample_forward(x, pos, out_sp, [(mode, transform)] * rank)
    bx = T.interpolate_backward(x, y, mode=mode, coordinate_transformation_mode=transform,
                                data_format=fmt, backend=backend)
    _check(fx, y, x, bx)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("transform,scales", [("half_pixel", None), ("align_corners", None),
                                              ("half_pixel", (1.7, 2.5))])
def test_adjoint_resize_grad(backend, transform, scales, rng):
    x = rng.standard_normal((2, 3, 4, 4))
    if scales:
        out_sp = (int(4 * f32(scales[0])), int(4 * f32(scales[1])))
        rules = [("linear", "ort_half", s) for s in scales]
    else:
        out_sp = (6, 9)
        rules = [("linear", "ort_align" if transform == "align_corners" else "ort_half")] * 2
    y = rng.standard_normal((2, 3) + out_sp)
    fx = resample_forward(x, (2, 3), out_sp, rules)
    bx = T.resize_grad(y, x, scales=None if scales is None else [1, 1, *scales],
                       coordinate_transformation_mode=transform, backend=backend)
    _check(fx, y, x, bx)


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


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("s,d,pads", [(1, 1, (0, 0, 0, 0)), (2, 1, (1, 2, 0, 1)), (1, 2, (2, 2, 2, 2)),
                                      (3, 1, (0, 1, 1, 0)), (2, 2, (1, 1, 1, 1))])
def test_adjoint_conv(backend, s, d, pads, rng):
    x = rng.standard_normal((2, 9, 8, 3))
    w = rng.standard_normal((3, 2, 3, 4))
    fx = conv_forward(x, w, s, d, pads)
    y = rng.standard_normal(fx.shape)
    pt, pb, pl, pr = pads
    bx = T.conv2d_backprop_input(x.shape, w, y, strides=[1, s, s, 1], padding="EXPLICIT",
                                 explicit_paddings=[0, 0, pt, pb, pl, pr, 0, 0],
                                 dilations=[1, d, d, 1], backend=backend)
    _check(fx, y, x, bx)
