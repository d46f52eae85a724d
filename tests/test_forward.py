"""TF's forward resizes, ResizeBilinear and ResizeNearestNeighbor (docs/semantics.md §12): the
cython backend equal to TF's raw ops bit for bit in every dtype and flag, on 1, 2 and 3
threads; the NumPy reference within the metric; TF's refusals refused in our words."""
import itertools

import ml_dtypes
import numpy as np
import pytest

import tfcompat as T
from conformance import metric
from conformance.runner import same_bits

from helpers import tf_or_skip

SIZES = (1, 2, 3, 5, 17, 41)
FLAGS = [(False, False), (True, False), (False, True)]
DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.uint8, np.int16,
          np.uint16, np.int32, np.int64]


def _grid():
    """Every (I, O) pair of SIZES on the height, a rotated pair on the width, channels and
    dtypes rotating: up- and downscaling, identity, one pixel, non-square."""
    pairs = list(itertools.product(SIZES, SIZES))
    out = []
    for k, (ih, oh) in enumerate(pairs):
        iw, ow = pairs[(7 * k + 5) % len(pairs)]
        out.append((1 + k % 3, ih, iw, oh, ow, (1, 3, 4, 17, 64)[k % 5], DTYPES[k % len(DTYPES)]))
    return out


GRID = _grid()


def _images(rng, b, ih, iw, c, dtype):
    x = rng.standard_normal((b, ih, iw, c)) * 60
    return x.astype(dtype)


@pytest.mark.parametrize("case", GRID, ids=["b{}_i{}x{}_o{}x{}_c{}_{}".format(
    *c[:6], np.dtype(c[6]).name) for c in GRID])
def test_forward_equals_tf_bit_for_bit(case):
    tf = tf_or_skip()
    b, ih, iw, oh, ow, c, dtype = case
    x = _images(np.random.default_rng(ih * 100 + iw), b, ih, iw, c, dtype)
    for align, half in FLAGS:
        kw = dict(align_corners=align, half_pixel_centers=half)
        want_b = tf.raw_ops.ResizeBilinear(images=x, size=[oh, ow], **kw).numpy()
        want_n = tf.raw_ops.ResizeNearestNeighbor(images=x, size=[oh, ow], **kw).numpy()
        for threads in (1, 2, 3):
            T.set_num_threads(threads)
            assert same_bits(T.resize_bilinear(x, [oh, ow], **kw), want_b), (kw, threads)
            assert same_bits(T.resize_nearest_neighbor(x, [oh, ow], **kw), want_n), kw


@pytest.mark.parametrize("c", [31, 32, 64])
def test_a_downscale_of_wide_pixels_equals_tf_bit_for_bit(c):
    """A downscale's rows of 32 channels or more are made in one pass from the input rows
    (docs/performance.md#the-forward-resizes), 31 row by row: TF's bits either way, where output
    rows share input rows (40 -> 27) and where none do (2x, 3x, 36 -> 17), on 1-3 threads."""
    tf = tf_or_skip()
    rng = np.random.default_rng(c)
    for dtype in (np.float32, np.float64, np.uint8):
        x = _images(rng, 2, 40, 36, c, dtype)
        for size in ([20, 18], [13, 12], [27, 24], [13, 17]):
            for align, half in FLAGS:
                kw = dict(align_corners=align, half_pixel_centers=half)
                want = tf.raw_ops.ResizeBilinear(images=x, size=size, **kw).numpy()
                for threads in (1, 2, 3):
                    T.set_num_threads(threads)
                    got = T.resize_bilinear(x, size, **kw)
                    assert same_bits(got, want), (dtype, size, kw, threads)


def test_a_streamed_output_equals_tf_bit_for_bit():
    """A float32 bilinear output of 32 MiB or more is written by streaming stores
    (docs/performance.md#the-forward-resizes): TF's bits still, on 1 and 2 threads, through the
    NumPy API (and the C entry, the JAX front's path, in tests/test_jax_front.py)."""
    tf = tf_or_skip()
    x = np.random.default_rng(9).standard_normal((1, 61, 67, 32)).astype(np.float32)
    for align, half in FLAGS:
        kw = dict(align_corners=align, half_pixel_centers=half)
        want = tf.raw_ops.ResizeBilinear(images=x, size=[512, 513], **kw).numpy()
        assert want.nbytes >= 32 << 20
        for threads in (1, 2):
            T.set_num_threads(threads)
            assert same_bits(T.resize_bilinear(x, [512, 513], **kw), want), (kw, threads)


@pytest.mark.parametrize("size", [(4, 5), (2, 5), (7, 3)])
def test_infinities_and_nan_as_tf(size):
    """A NaN, an infinity and its negative among the pixels: TF's NaN where the lerp meets
    them (inf - inf, inf * 0), the infinity where it does not; and an image resized to its own
    size is cast, the infinity kept (TF's shortcut)."""
    tf = tf_or_skip()
    x = np.arange(2 * 4 * 5 * 3, dtype=np.float32).reshape(2, 4, 5, 3)
    x[0, 1, 2, 0], x[0, 2, 2, 1], x[1, 3, 4, 2] = np.inf, -np.inf, np.nan
    for align, half in FLAGS:
        kw = dict(align_corners=align, half_pixel_centers=half)
        want = tf.raw_ops.ResizeBilinear(images=x, size=list(size), **kw).numpy()
        assert same_bits(T.resize_bilinear(x, size, **kw), want), kw


def test_an_image_resized_to_its_size_is_cast():
    """TF's shortcut, by hand: int16 values as float32, an infinity kept (the formula would
    give inf - inf = NaN at its neighbours' zero weights)."""
    x = np.array([[1, 2], [3, 4]], np.int16).reshape(1, 2, 2, 1)
    assert T.resize_bilinear(x, [2, 2]).ravel().tolist() == [1.0, 2.0, 3.0, 4.0]
    y = np.array([[1, np.inf], [2, 3]], np.float32).reshape(1, 2, 2, 1)
    assert T.resize_bilinear(y, [2, 2]).ravel().tolist() == [1.0, np.inf, 2.0, 3.0]


def test_hand_checked_values():
    """2 -> 4 wide, one row. Legacy: x * 0.5 -> 0, 0.5, 1, 1.5 (clamped to pixel 1): 10, 15,
    20, 20. Half-pixel: (x + 0.5) * 0.5 - 0.5 -> -0.25 (both taps pixel 0), 0.25, 0.75, 1.25:
    10, 12.5, 17.5, 20. Align corners: x * 1/3: 10, 13.333334, 16.666668, 20. Nearest legacy:
    floor(x * 0.5): 10, 10, 20, 20."""
    x = np.array([10, 20], np.float32).reshape(1, 1, 2, 1)
    assert T.resize_bilinear(x, [1, 4]).ravel().tolist() == [10, 15, 20, 20]
    assert T.resize_bilinear(x, [1, 4], half_pixel_centers=True).ravel().tolist() == [
        10, 12.5, 17.5, 20]
    got = T.resize_bilinear(x, [1, 4], align_corners=True).ravel()
    assert got.tolist() == np.array([10, 13.333334, 16.666668, 20], np.float32).tolist()
    assert T.resize_nearest_neighbor(x, [1, 4]).ravel().tolist() == [10, 10, 20, 20]


@pytest.mark.parametrize("case", GRID[::4], ids=lambda c: "b{}_i{}x{}_o{}x{}_c{}".format(*c[:6]))
def test_numpy_reference_within_the_metric_of_tf(case):
    tf = tf_or_skip()
    b, ih, iw, oh, ow, c, dtype = case
    x = _images(np.random.default_rng(7), b, ih, iw, c, dtype)
    for align, half in FLAGS:
        kw = dict(align_corners=align, half_pixel_centers=half)
        want = tf.raw_ops.ResizeBilinear(images=x, size=[oh, ow], **kw).numpy()
        got = T.resize_bilinear(x, [oh, ow], backend="numpy", **kw)
        scale = T.resize_bilinear(np.abs(x.astype(np.float64)), [oh, ow], backend="numpy",
                                  **kw)
        assert metric.compare(got, want, scale, np.float32).passed, kw
        want = tf.raw_ops.ResizeNearestNeighbor(images=x, size=[oh, ow], **kw).numpy()
        assert same_bits(T.resize_nearest_neighbor(x, [oh, ow], backend="numpy", **kw), want)


@pytest.mark.parametrize("form", ["strided", "fortran", "byteswapped", "list", "read-only"])
def test_inputs_in_any_form(form):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 5, 4)).astype(np.float32)
    want_b = T.resize_bilinear(x, [9, 7], half_pixel_centers=True)
    want_n = T.resize_nearest_neighbor(x, [9, 7], half_pixel_centers=True)
    if form == "strided":
        big = np.zeros((2, 6, 5, 8), np.float32)
        big[..., ::2] = x
        given = big[..., ::2]
    elif form == "fortran":
        given = np.asfortranarray(x)
    elif form == "byteswapped":
        given = x.astype(">f4")
    elif form == "list":
        given = x.tolist()
    else:
        given = x.copy()
        given.flags.writeable = False
    assert same_bits(T.resize_bilinear(given, [9, 7], half_pixel_centers=True), want_b)
    assert same_bits(T.resize_nearest_neighbor(given, [9, 7], half_pixel_centers=True), want_n)


def test_empty_batch_and_channels_give_empty_outputs():
    """TF returns a (0, 2, 2, 1) output for an empty batch; so do we, and for no channels."""
    assert T.resize_bilinear(np.ones((0, 2, 2, 1), np.float32), [3, 3]).shape == (0, 3, 3, 1)
    out = T.resize_nearest_neighbor(np.ones((1, 2, 2, 0), np.int8), [3, 3])
    assert out.shape == (1, 3, 3, 0) and out.dtype == np.int8


@pytest.mark.parametrize("call, error, match", [
    (lambda x: T.resize_bilinear(x, [0, 3]), ValueError, r"size: got \[0, 3\]; expected two "
                                                         r"positive ints"),
    (lambda x: T.resize_bilinear(x, [3]), ValueError, "size"),
    (lambda x: T.resize_bilinear(x, [2.5, 3]), TypeError, r"size\[0\]: got 2.5"),
    (lambda x: T.resize_nearest_neighbor(x, [3, 3], align_corners=True,
                                         half_pixel_centers=True),
     ValueError, "align_corners: got True together with half_pixel_centers=True"),
    (lambda x: T.resize_bilinear(x.astype(np.uint32), [3, 3]), TypeError,
     "images: got dtype uint32"),
    (lambda x: T.resize_bilinear(x[:, :0], [3, 3]), ValueError, "non-zero height and width"),
    (lambda x: T.resize_bilinear(x[0], [3, 3]), ValueError,
     r"images: got shape \(2, 2, 1\) \(rank 3\)"),
])
def test_tf_refusals_in_our_words(call, error, match):
    x = np.ones((1, 2, 2, 1), np.float32)
    with pytest.raises(error, match=match):
        call(x)


def test_nearest_refuses_an_axis_of_2_to_the_24():
    """TF refuses a source height or width of 2^24 or more (its float32 coordinates); shape
    checks come before any allocation, so a shape-only view of a huge axis is enough."""
    x = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), (1, 1 << 24, 1, 1), (0, 0, 0, 0))
    with pytest.raises(ValueError, match="below 2\\^24"):
        T.resize_nearest_neighbor(x, [2, 2])


def test_the_registry_has_both_forwards_under_tfjs_names():
    x = np.arange(4, dtype=np.float32).reshape(1, 2, 2, 1)
    for backend in ("cython", "numpy"):
        out = T.get_kernel("ResizeBilinear", backend).kernel_func(
            {"images": x}, {"size": [3, 3], "alignCorners": True})
        assert out[0, 1, 1, 0] == 1.5    # the centre of 0, 1, 2, 3
        out = T.get_kernel("ResizeNearestNeighbor", backend).kernel_func(
            {"images": x}, {"size": [1, 1]})
        assert out.ravel().tolist() == [0.0]
    with pytest.raises(ValueError, match="missing attribute 'size'"):
        T.get_kernel("ResizeBilinear", "cython").kernel_func({"images": x}, {})
