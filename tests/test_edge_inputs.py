"""Edge inputs: where TF answers, we answer the same (docs/semantics.md §7); where TF's answer
is an accident of its arithmetic, we refuse in our own words; Python lists convert as TF
converts them; loose checks are tight."""
import os

import numpy as np
import pytest

import tfcompat as T
from conformance import metric

from helpers import assert_bitwise

f32 = np.float32


def test_a_valid_axis_narrower_than_the_filter_has_no_outputs_as_in_tf():
    """VALID, an axis 1 wide under a 4-tap filter at stride 2: TF divides (1 - 4 + 2) / 2
    truncating toward zero, so the axis has 0 outputs and an empty dy gives zeros (TF 2.21's
    answer: zeros of shape (1, 1, 1, 1))."""
    got = T.conv2d_backprop_input([1, 1, 1, 1], np.ones((4, 4, 1, 1), f32),
                                  np.ones((1, 0, 0, 1), f32), strides=[1, 2, 2, 1],
                                  padding="VALID")
    assert_bitwise(got, np.zeros((1, 1, 1, 1), f32))


def test_a_negative_output_size_is_refused_though_tf_answers_an_empty_dy():
    """(1 - 5 + 2) / 2 = -1: no output size exists. TF 2.21 returns zeros for an empty dy there
    (it checks no shape when dy is empty); we refuse, as TF does for any dy that is not
    empty."""
    with pytest.raises(ValueError, match="computed output size -1 is negative"):
        T.conv2d_backprop_input([1, 1, 1, 1], np.ones((5, 5, 1, 1), f32),
                                np.ones((1, 0, 0, 1), f32), strides=[1, 2, 2, 1],
                                padding="VALID")


@pytest.mark.parametrize("backend", ["cython", "numpy"])
@pytest.mark.parametrize("shape, dy, padding", [((0, 1, 1, 1), (1, 5, 4, 1), "VALID"),
                                                ((0, 1, 1, 1), (1, 4, 4, 1), "SAME"),
                                                ((1, 0, 1, 1), (1, 4, 5, 1), "VALID")])
def test_a_filter_without_taps_gives_zeros(shape, dy, padding, backend):
    """A filter with a zero spatial dimension has no taps: dx is zeros (TF 2.21 too), the
    output size computed with its dilated extent (f - 1) d + 1 = 0."""
    got = T.conv2d_backprop_input([1, 4, 4, 1], np.ones(shape, f32), np.ones(dy, f32),
                                  strides=[1, 1, 1, 1], padding=padding, backend=backend)
    assert_bitwise(got, np.zeros((1, 4, 4, 1), f32))


def test_a_filter_without_taps_still_checks_dy():
    """TF 2.21 returns zeros for a filter without taps whatever dy's shape (it checks none);
    we hold dy to the output size the filter's extent gives (5 rows here, VALID)."""
    with pytest.raises(ValueError, match="actual = 4, computed = 5"):
        T.conv2d_backprop_input([1, 4, 4, 1], np.ones((0, 1, 1, 1), f32),
                                np.ones((1, 4, 4, 1), f32), strides=[1, 1, 1, 1],
                                padding="VALID")


@pytest.mark.parametrize("backend", ["cython", "numpy"])
@pytest.mark.parametrize("dtype", [f32, np.int32, np.float16])
def test_nearest_grad_of_an_empty_grads_is_zeros_as_in_tf(dtype, backend):
    got = T.resize_nearest_neighbor_grad(np.ones((1, 0, 4, 1), dtype), [2, 2], backend=backend)
    assert_bitwise(got, np.zeros((1, 2, 2, 1), dtype))


def test_bilinear_grad_of_an_empty_grads_is_refused_as_in_tf():
    """TF's ResizeBilinearGrad refuses it ("resized dimensions must be positive")."""
    with pytest.raises(ValueError, match="grads: got shape .* spatial dimension 0 is 0"):
        T.resize_bilinear_grad(np.ones((1, 0, 4, 1), f32), np.zeros((1, 2, 2, 1), f32))


def test_mismatched_batch_or_channels_stay_errors():
    """TF's bilinear grad returns grads' batch and channels whatever original_image's are;
    ours refuses the mismatch (docs/semantics.md §7)."""
    with pytest.raises(ValueError, match="batch 2"):
        T.resize_bilinear_grad(np.ones((2, 4, 4, 3), f32), np.zeros((1, 2, 2, 3), f32))
    with pytest.raises(ValueError, match="3 channels"):
        T.resize_bilinear_grad(np.ones((1, 4, 4, 3), f32), np.zeros((1, 2, 2, 4), f32))


def test_python_lists_convert_as_tf_converts_them():
    """Floats become float32 and ints int32, as tf.convert_to_tensor makes them: a list of
    float32 values gives float32's bits, an image given as a list gives a float32 dx."""
    rng = np.random.default_rng(3)
    dy = rng.standard_normal((1, 6, 5, 2)).astype(f32)
    img = np.zeros((1, 3, 4, 2), f32)
    want = T.resize_bilinear_grad(dy, img, half_pixel_centers=True)
    assert_bitwise(T.resize_bilinear_grad(dy.tolist(), img, half_pixel_centers=True), want)
    assert_bitwise(T.resize_bilinear_grad(dy, img.tolist(), half_pixel_centers=True), want)
    ints = (dy * 10).astype(np.int32)
    assert_bitwise(T.resize_nearest_neighbor_grad(ints.tolist(), [3, 4]),
                   T.resize_nearest_neighbor_grad(ints, [3, 4]))
    w = rng.standard_normal((3, 3, 2, 2)).astype(f32)
    kw = dict(strides=[1, 2, 2, 1], padding="SAME")
    assert_bitwise(T.conv2d_backprop_input([1, 11, 9, 2], w.tolist(), dy.tolist(), **kw),
                   T.conv2d_backprop_input([1, 11, 9, 2], w, dy, **kw))


def test_negative_sizes_are_refused_naming_the_size():
    with pytest.raises(ValueError, match=r"size: got \[-2, -3\]; spatial dimension 1 is -3"):
        T.resize_nearest_neighbor_grad(np.ones((1, 2, 2, 1), f32), [-2, -3])


def test_a_shape_holding_a_fraction_is_refused():
    class ShapeOnly:    # an image given by its shape and dtype only
        shape, dtype = (1, 2.5, 2, 1), np.dtype(f32)
    with pytest.raises(TypeError, match=r"original_image.shape\[1\]: got 2.5; expected an int"):
        T.resize_bilinear_grad(np.ones((1, 4, 4, 1), f32), ShapeOnly())


def test_thread_counts_below_the_documented_negatives_are_refused():
    cpus = len(os.sched_getaffinity(0))
    T.set_num_threads(-cpus)
    assert T.get_num_threads() == 1
    with pytest.raises(ValueError, match=f"num_threads: got {-cpus - 1}; expected -1"):
        T.set_num_threads(-cpus - 1)
    with pytest.raises(ValueError, match="num_threads: got -100"):
        T.set_num_threads(-100)


def test_the_metric_takes_the_same_infinity_and_nan_for_nan():
    inf, nan = np.inf, np.nan
    assert metric.compare([inf], [inf], [inf], f32).passed
    assert metric.compare([-inf, 1.0], [-inf, 1.0], [inf, 1.0], f32).passed
    assert metric.compare([nan], [nan], [1.0], f32).passed
    assert not metric.compare([inf], [-inf], [inf], f32).passed
    assert not metric.compare([nan], [1.0], [1.0], f32).passed
    assert not metric.compare([1.0], [nan], [1.0], f32).passed
    assert not metric.compare([inf], [1.0], [inf], f32).passed
