"""Adjoint identity <F(x), y> == <x, B(y)> for every kernel, with the forward ops of
tests/helpers.py (written from docs/semantics.md's formulas with scalar float32 coordinate
math, independent of both backends)."""

import numpy as np
import pytest

import tfcompat as T
from helpers import BACKENDS, conv_forward, resample_forward

f32 = np.float32


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
