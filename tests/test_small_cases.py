"""Tiny cases whose expected values are worked out by hand from docs/semantics.md, and ORT's
vectors."""
import ml_dtypes
import numpy as np
import pytest

import tfcompat as T
from helpers import BACKENDS


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


def test_bilinear_legacy_2x3_to_4x6_ones(backend):
    # per axis, legacy scale 0.5: I=2,O=4 -> [1+0.5, 0.5+1+1] = [1.5, 2.5];
    # I=3,O=6 -> [1.5, 2, 2.5]; the 2-D result is their outer product.
    out = T.resize_bilinear_grad(np.ones((1, 4, 6, 1), np.float32), np.zeros((1, 2, 3, 1), np.float32),
                                 backend=backend)
    expected = np.array([[2.25, 3.0, 3.75], [3.75, 5.0, 6.25]], np.float32)
    np.testing.assert_array_equal(out[0, :, :, 0], expected)


def test_bilinear_half_pixel_edge_weights_land_on_pixel_zero(backend):
    # I=2,O=4 half pixel: x=0 gives s=-0.25, both taps on pixel 0 (0.25 + 0.75);
    # x=1: 0.75/0.25, x=2: 0.25/0.75, x=3: s=1.25 clamps to pixel 1 -> [2, 2] per axis.
    dy = np.zeros((1, 1, 4, 1), np.float32)
    dy[0, 0, 0, 0] = 1.0
    out = T.resize_bilinear_grad(dy, np.zeros((1, 1, 2, 1), np.float32), half_pixel_centers=True,
                                 backend=backend)
    np.testing.assert_array_equal(out.ravel(), [1.0, 0.0])
    out = T.resize_bilinear_grad(np.ones((1, 1, 4, 1), np.float32), np.zeros((1, 1, 2, 1), np.float32),
                                 half_pixel_centers=True, backend=backend)
    np.testing.assert_array_equal(out.ravel(), [2.0, 2.0])


def test_bilinear_output_is_bhwc_not_tfjs_bwhc(backend):
    out = T.resize_bilinear_grad(np.ones((2, 6, 4, 3), np.float32), np.zeros((2, 3, 2, 3), np.float32),
                                 backend=backend)
    assert out.shape == (2, 3, 2, 3)
    assert out.sum() == pytest.approx(2 * 6 * 4 * 3)


def test_nearest_align_corners_uses_roundf_not_round_half_even(backend):
    # I=3,O=5, scale 0.5: s = 0, .5, 1, 1.5, 2 -> roundf: 0, 1, 1, 2, 2 -> counts [1, 2, 2]
    # (np.round would give 0, 0, 1, 2, 2 -> [2, 1, 2]).
    out = T.resize_nearest_neighbor_grad(np.ones((1, 1, 5, 1), np.float32), [1, 3],
                                         align_corners=True, backend=backend)
    np.testing.assert_array_equal(out.ravel(), [1.0, 2.0, 2.0])


def test_nearest_half_pixel_float32_coordinate(backend):
    # docs/semantics.md §1.1: I=2, O=41, x=20: float32 (20.5 * (2/41)) = 0.99999994 -> pixel 0.
    dy = np.zeros((1, 1, 41, 1), np.float32)
    dy[0, 0, 20, 0] = 1.0
    out = T.resize_nearest_neighbor_grad(dy, [1, 2], half_pixel_centers=True, backend=backend)
    np.testing.assert_array_equal(out.ravel(), [1.0, 0.0])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_nearest_small_int_sums_wrap(backend, dtype):
    out = T.resize_nearest_neighbor_grad(np.ones((1, 16, 16, 1), dtype), [1, 1], backend=backend)
    assert out.dtype == dtype and out[0, 0, 0, 0] == 0  # 256 wraps to 0
    out = T.resize_nearest_neighbor_grad(np.ones((1, 10, 13, 1), dtype), [1, 1], backend=backend)
    assert out[0, 0, 0, 0] == dtype(130 % 256 if dtype == np.uint8 else 130 - 256)


def test_nearest_int32_wraps(backend):
    dy = np.full((1, 2, 2, 1), 2 ** 30, np.int32)
    out = T.resize_nearest_neighbor_grad(dy, [1, 1], backend=backend)
    assert out.dtype == np.int32 and out[0, 0, 0, 0] == 0  # 4 * 2**30 = 2**32 wraps to 0


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_nearest_half_types_accumulate_in_float32(backend, dtype):
    # 4096 ones: float16 accumulation (TF) stalls at 2048; ours sums in float32 -> 4096.
    out = T.resize_nearest_neighbor_grad(np.ones((1, 64, 64, 1), dtype), [1, 1], backend=backend)
    assert out.dtype == dtype and float(out[0, 0, 0, 0]) == 4096.0


def test_resize_grad_ort_vector_scales(backend):
    # ORT's ResizeGrad test: dY = ones 6x6 -> X 4x4 with scales 1.7 (docs/semantics.md §6).
    out = T.resize_grad(np.ones((1, 1, 6, 6), np.float32), np.zeros((1, 1, 4, 4), np.float32),
                        scales=[1, 1, 1.7, 1.7], backend=backend)[0, 0]
    np.testing.assert_allclose(out[0], [2.7128, 2.9550, 2.7612, 1.4533], atol=1e-4)
    np.testing.assert_allclose(out[-1], [1.4533, 1.5830, 1.4792, 0.7785], atol=1e-4)
    out = T.resize_grad(np.ones((1, 1, 6, 6), np.float32), np.zeros((1, 1, 4, 4), np.float32),
                        backend=backend)
    np.testing.assert_allclose(out, 2.25, rtol=1e-6)


def test_resize_grad_ort_vectors_8x8_to_4x4(backend):
    dy = np.ones((1, 1, 8, 8), np.float32)
    x = np.zeros((1, 1, 4, 4), np.float32)
    np.testing.assert_allclose(T.resize_grad(dy, x, backend=backend), 4.0, rtol=1e-6)
    out = T.resize_grad(dy, x, coordinate_transformation_mode="align_corners", backend=backend)[0, 0]
    np.testing.assert_allclose(out[0], [2.9388, 3.9184, 3.9184, 2.9388], atol=1e-4)
    np.testing.assert_allclose(out[1], [3.9184, 5.2245, 5.2245, 3.9184], atol=1e-4)


def test_conv_valid_2x2_ones(backend):
    out = T.conv2d_backprop_input([1, 3, 3, 1], np.ones((2, 2, 1, 1), np.float32),
                                  np.ones((1, 2, 2, 1), np.float32), strides=[1, 1, 1, 1],
                                  padding="VALID", backend=backend)
    np.testing.assert_array_equal(out[0, :, :, 0], [[1, 2, 1], [2, 4, 2], [1, 2, 1]])


def test_conv_same_stride2_odd_pixel_goes_after(backend):
    # 4x4, 3x3 filter, stride 2, SAME: out 2, need 1 -> pad top 0, bottom 1; taps reach
    # rows oy*2 + ky = {0,1,2} and {2,3,(4)} -> counts [1, 1, 2, 1] per axis.
    out = T.conv2d_backprop_input([4, 4], np.ones((3, 3, 1, 1), np.float32),
                                  np.ones((1, 2, 2, 1), np.float32), strides=[1, 2, 2, 1],
                                  padding="SAME", backend=backend)
    np.testing.assert_array_equal(out[0, :, :, 0], np.outer([1, 1, 2, 1], [1, 1, 2, 1]))


def test_conv_nchw_equals_nhwc(backend, rng):
    w = rng.standard_normal((3, 2, 4, 5))
    dy = rng.standard_normal((2, 5, 5, 4))  # NCHW, 5x4 output of a 7x5 input, VALID
    a = T.conv2d_backprop_input([2, 4, 7, 5], w, dy, strides=[1, 1, 1, 1], padding="VALID",
                                data_format="NCHW", backend=backend)
    b = T.conv2d_backprop_input([2, 7, 5, 4], w, dy.transpose(0, 2, 3, 1), strides=[1, 1, 1, 1],
                                padding="VALID", backend=backend)
    np.testing.assert_allclose(a, b.transpose(0, 3, 1, 2), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("c, oc, hw", [(32, 48, 8), (20, 17, 5)], ids=["whole_tiles", "partial"])
def test_conv_nchw_gives_the_nhwc_bits(dtype, c, oc, hw, rng):
    """The cython backend computes NCHW as NHWC, dy and dx transposed in 16 x 16 tiles (whole
    ones where C, OC and H * W are multiples of 16, the AVX-512 path for 4-byte values): NCHW's
    dx is NHWC's, transposed, to the bit."""
    w = rng.standard_normal((3, 3, c, oc)).astype(dtype)
    dy = rng.standard_normal((3, oc, hw, hw)).astype(dtype)
    kw = dict(strides=[1, 1, 1, 1], padding="SAME")
    a = T.conv2d_backprop_input([3, c, hw, hw], w, dy, data_format="NCHW", **kw)
    b = T.conv2d_backprop_input([3, hw, hw, c], w, np.ascontiguousarray(dy.transpose(0, 2, 3, 1)),
                                **kw)
    assert a.dtype == b.dtype == np.dtype(dtype) and a.flags.c_contiguous
    np.testing.assert_array_equal(a.view(np.uint8), np.ascontiguousarray(
        b.transpose(0, 3, 1, 2)).view(np.uint8))


def test_interpolate_linear_1d_align_corners(backend):
    # I=2, O=3, scale 0.5: x=0 -> p0; x=1 -> .5/.5; x=2 -> p1 => [1.5, 1.5]
    out = T.interpolate_backward(np.zeros((1, 2, 1), np.float32), np.ones((1, 3, 1), np.float32),
                                 mode="linear", coordinate_transformation_mode="align_corners",
                                 backend=backend)
    np.testing.assert_array_equal(out.ravel(), [1.5, 1.5])


def test_interpolate_pytorch_half_pixel_size_one(backend):
    # O == 1: pytorch_half_pixel uses s = 0 (all to pixel 0); half_pixel uses s = I/2 - 0.5.
    src = np.zeros((1, 4, 1), np.float32)
    dy = np.ones((1, 1, 1), np.float32)
    a = T.interpolate_backward(src, dy, mode="linear",
                               coordinate_transformation_mode="pytorch_half_pixel", backend=backend)
    b = T.interpolate_backward(src, dy, mode="linear", backend=backend)
    np.testing.assert_array_equal(a.ravel(), [1, 0, 0, 0])
    np.testing.assert_array_equal(b.ravel(), [0, 0.5, 0.5, 0])


def test_empty_batch_and_channels_return_zeros(backend):
    out = T.resize_bilinear_grad(np.ones((0, 4, 4, 3), np.float32), np.zeros((0, 2, 2, 3), np.float32),
                                 backend=backend)
    assert out.shape == (0, 2, 2, 3)
    out = T.resize_nearest_neighbor_grad(np.ones((2, 4, 4, 0), np.float32), [2, 2], backend=backend)
    assert out.shape == (2, 2, 2, 0)
    out = T.conv2d_backprop_input([0, 4, 4, 2], np.ones((3, 3, 2, 1), np.float32),
                                  np.ones((0, 2, 2, 1), np.float32), strides=[1, 1, 1, 1],
                                  padding="VALID", backend=backend)
    assert out.shape == (0, 4, 4, 2)


def test_nan_and_inf_propagate(backend):
    dy = np.ones((1, 4, 4, 1), np.float32)
    dy[0, 1, 1, 0] = np.nan
    dy[0, 3, 3, 0] = np.inf
    out = T.resize_nearest_neighbor_grad(dy, [2, 2], backend=backend)
    assert np.isnan(out[0, 0, 0, 0]) and np.isinf(out[0, 1, 1, 0]) and out[0, 0, 1, 0] == 4


def test_accepts_lists_views_and_read_only(backend):
    base = np.arange(2 * 8 * 10 * 3, dtype=np.float32).reshape(2, 8, 10, 3)
    view = base[:, ::2, ::2, :]  # non-contiguous
    ro = np.ascontiguousarray(view)
    ro.setflags(write=False)
    img = np.zeros((2, 3, 3, 3), np.float32)
    a = T.resize_bilinear_grad(view, img, backend=backend)
    b = T.resize_bilinear_grad(ro, img, backend=backend)
    c = T.resize_bilinear_grad(ro.tolist(), img, backend=backend)  # a list: float64 grads
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(c, b, rtol=1e-6)
    neg = T.resize_bilinear_grad(np.ascontiguousarray(view[:, ::-1])[:, ::-1], img, backend=backend)
    np.testing.assert_array_equal(neg, a)
