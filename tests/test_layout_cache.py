"""The caches of the per-call Python work: checks cached on shapes, dtypes and attributes
(tfcompat/_resample.py), and the cython backend's per-layout plan. A repeated call must reuse
them and still compute from its own dy; a bad input must fail on every call, not only the first;
and no cache may keep a user's array alive."""
import gc
import weakref

import numpy as np
import pytest

import tfcompat as T
from tfcompat import _resample as rs
from tfcompat.backends import cython_backend as cb
from tfcompat.backends import numpy_backend as nb
from conftest import assert_bitwise, assert_close

f32 = np.float32


def _assert_matches_reference(p):
    """The cython backend against the float64 NumPy reference, with SPEC.md 6's metric."""
    scale = nb.resample(rs.ResampleProblem(np.abs(p.dy), p.layout))
    assert_close(cb.resample(p), nb.resample(p), scale, p.out_dtype)


def test_repeated_call_reuses_its_layout_and_plan():
    rng = np.random.default_rng(0)
    img = np.zeros((2, 5, 7, 3), f32)
    inputs = lambda dy: {"dy": dy, "images": img}
    attrs = {"alignCorners": False, "halfPixelCenters": True}
    a = rng.standard_normal((2, 9, 4, 3)).astype(f32)
    b = rng.standard_normal((2, 9, 4, 3)).astype(f32)
    pa = rs.resize_bilinear_grad_problem(inputs(a), attrs)
    pb = rs.resize_bilinear_grad_problem(inputs(b), attrs)
    assert pa.layout is pb.layout
    assert cb._plan(pa.layout) is cb._plan(pb.layout)
    # the same layout, each call with its own values: equal to the independent reference
    for p in (pa, pb):
        _assert_matches_reference(p)


def test_cached_layout_answers_like_a_fresh_one():
    """Layout fields as the parser derives them (a bilinear grad with a float64 image sums in
    float64; its output takes the image's dtype)."""
    dy = np.ones((3, 4, 6, 2), f32)
    p = rs.resize_bilinear_grad_problem({"dy": dy, "images": np.zeros((3, 2, 3, 2), np.float64)},
                                        {"alignCorners": True})
    assert (p.batch, p.channels, p.channels_last, p.out_shape) == (3, 2, True, (3, 2, 3, 2))
    assert p.out_dtype == np.float64 and p.compute_dtype == np.float64 and p.linear
    assert [(a.in_size, a.out_size, a.rule) for a in p.axes] == [(2, 4, rs.LIN_TF_ALIGN),
                                                                 (3, 6, rs.LIN_TF_ALIGN)]


def test_same_shapes_different_values_stay_bitwise_equal_to_a_first_call():
    """Ones then twos through one cached layout: every element of the second is twice the
    first (a power-of-two scale is exact in float32), so no state of the first call leaked."""
    ones = np.ones((1, 6, 6, 8), f32)
    first = T.resize_nearest_neighbor_grad(ones, (4, 4), half_pixel_centers=True)
    again = T.resize_nearest_neighbor_grad(ones * 2, (4, 4), half_pixel_centers=True)
    assert_bitwise(again, first * 2)
    # resized 6 -> original 4, half-pixel nearest: floor((x + 0.5) * (4/6)) maps x = 0..5 to
    # 0, 1, 1, 2, 3, 3 (float32: 1.5 * 0.6666667 = 1.0000001, 4.5 * 0.6666667 = 3.0000002), so
    # per axis the original pixels take 1, 2, 1, 2 resized ones, and a dx element their product
    counts = np.array([1, 2, 1, 2], f32)
    assert_bitwise(first, np.broadcast_to((counts[:, None] * counts)[None, :, :, None],
                                          (1, 4, 4, 8)).astype(f32))


BAD_CALLS = {
    "bilinear rank": lambda: T.resize_bilinear_grad(np.ones((4, 4, 2), f32),
                                                    np.zeros((1, 2, 2, 2), f32)),
    "bilinear both flags": lambda: T.resize_bilinear_grad(
        np.ones((1, 4, 4, 2), f32), np.zeros((1, 2, 2, 2), f32), align_corners=True,
        half_pixel_centers=True),
    "nearest size": lambda: T.resize_nearest_neighbor_grad(np.ones((1, 4, 4, 2), f32), (0, 2)),
    "nearest grads rank": lambda: T.resize_nearest_neighbor_grad(np.ones((4, 4, 2), f32), (2, 2)),
    "interp channels": lambda: T.interpolate_backward(np.zeros((1, 2, 2, 3), f32),
                                                      np.ones((1, 4, 4, 2), f32), mode="linear"),
    "interp sizes": lambda: T.interpolate_backward(np.zeros((1, 2, 2, 2), f32),
                                                   np.ones((1, 4, 4, 2), f32), mode="linear",
                                                   sizes=[4, 5]),
}


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_a_bad_call_fails_every_time(name):
    messages = []
    for _ in range(3):
        with pytest.raises((ValueError, TypeError)) as info:
            BAD_CALLS[name]()
        messages.append(str(info.value))
    assert len(set(messages)) == 1, messages


def test_a_good_call_after_a_bad_one_with_the_same_shapes():
    """interp: sizes are checked outside the cached layout, so a bad ``sizes`` does not poison
    the layout that the same shapes use with good ones."""
    src, dd = np.zeros((1, 2, 2, 2), f32), np.ones((1, 4, 4, 2), f32)
    with pytest.raises(ValueError, match="sizes"):
        T.interpolate_backward(src, dd, mode="linear", sizes=[4, 5])
    got = T.interpolate_backward(src, dd, mode="linear", sizes=[4, 4])
    # 4 -> 2 half-pixel linear, ones: every source pixel gathers weights summing to 2 per axis
    assert_bitwise(got, np.full((1, 2, 2, 2), 4.0, f32))


def test_caches_keep_no_user_array_alive():
    dy = np.ones((1, 8, 8, 4), f32)
    img = np.zeros((1, 4, 4, 4), f32)
    refs = [weakref.ref(dy), weakref.ref(img)]
    T.resize_bilinear_grad(dy, img, half_pixel_centers=True)
    T.resize_nearest_neighbor_grad(dy, (4, 4))
    T.interpolate_backward(img, dy, mode="bilinear")
    del dy, img
    gc.collect()
    assert all(r() is None for r in refs)


def test_nearest_placeholder_image_is_read_only_and_holds_no_data():
    """The functional nearest grad passes the registry a shape-and-dtype-only ``images``,
    shared between calls: a backend must not be able to write into it."""
    seen = {}

    def spy(inputs, attrs):
        seen["images"] = inputs["images"]
        return cb.resample(rs.resize_nearest_neighbor_grad_problem(inputs, attrs))

    T.register_kernel(T.KernelConfig("ResizeNearestNeighborGrad", "spy_backend", spy))
    try:
        T.resize_nearest_neighbor_grad(np.ones((2, 6, 4, 3), f32), (3, 2), backend="spy_backend")
    finally:
        T.unregister_kernel("ResizeNearestNeighborGrad", "spy_backend")
    images = seen["images"]
    assert images.shape == (2, 3, 2, 3) and images.dtype == f32
    assert not images.flags.writeable and images.strides == (0, 0, 0, 0)
    assert not images.any()


def test_plans_keep_only_small_tables():
    """Plans are cached (256 layouts) beyond the axis-table cache's bound (64 axes), so they keep
    tables of at most _PLAN_TABLE_BYTES; larger ones come from the axis cache on every call."""
    rng = np.random.default_rng(1)
    dy = rng.standard_normal((1, 3, 9000, 2)).astype(f32)
    img = np.zeros((1, 2, 4500, 2), f32)
    attrs = {"halfPixelCenters": True}
    big = rs.resize_bilinear_grad_problem({"dy": dy, "images": img}, attrs)
    assert cb._plan(big.layout).tables is None
    _assert_matches_reference(big)
    small = rs.resize_bilinear_grad_problem({"dy": dy[:, :, :40], "images": img[:, :, :20]}, attrs)
    tables = cb._plan(small.layout).tables
    assert tables is not None and sum(t.nbytes for t in tables) <= cb._PLAN_TABLE_BYTES
    _assert_matches_reference(small)
