"""Hostile inputs, properties, memory and concurrency (issue: never crash, never lie)."""
import gc
import os
import threading
import tracemalloc

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

import tfcompat as T
from helpers import CONV_TOL, assert_close, conv_forward, resample_forward

SIZES = st.sampled_from([1, 2, 3, 5, 7, 11, 13, 17])
FLOATS = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16]


def _tf():
    try:
        import tensorflow as tf
        return tf
    except ImportError:
        return None


# ------------------------------------------------------------------------------------------
# Properties: cython == numpy within tolerance, bitwise with TF for float32 TF-pair resizes,
# adjoint identity
# ------------------------------------------------------------------------------------------

@given(b=st.integers(1, 3), ih=SIZES, iw=SIZES, oh=SIZES, ow=SIZES, c=st.sampled_from([1, 2, 3, 8]),
       flags=st.sampled_from([(False, False), (True, False), (False, True)]),
       out_dt=st.sampled_from(FLOATS), seed=st.integers(0, 2 ** 16))
def test_property_bilinear(b, ih, iw, oh, ow, c, flags, out_dt, seed):
    rng = np.random.default_rng(seed)
    dy = rng.standard_normal((b, oh, ow, c)).astype(np.float32)
    img = np.zeros((b, ih, iw, c), out_dt)
    a, h = flags
    got = T.resize_bilinear_grad(dy, img, align_corners=a, half_pixel_centers=h)
    ref = T.resize_bilinear_grad(dy, img.astype(np.float64), align_corners=a, half_pixel_centers=h,
                                 backend="numpy")
    s = T.resize_bilinear_grad(np.abs(dy), img.astype(np.float64), align_corners=a,
                               half_pixel_centers=h, backend="numpy")
    tol_dt = np.float32 if out_dt == np.float64 else out_dt  # float32 products by definition
    assert_close(got, ref, s, tol_dt, what="cython vs numpy")
    tf = _tf()
    if tf is not None and out_dt == np.float32:
        want = tf.raw_ops.ResizeBilinearGrad(grads=dy, original_image=img, align_corners=a,
                                             half_pixel_centers=h).numpy()
        assert np.array_equal(got.view(np.int32), want.view(np.int32))
    x = rng.standard_normal((b, ih, iw, c))
    t = "align_corners" if a else "half_pixel" if h else "asymmetric"
    y = rng.standard_normal((b, oh, ow, c))
    lhs = np.vdot(resample_forward(x, (1, 2), (oh, ow), [("linear", t)] * 2), y)
    rhs = np.vdot(x, T.resize_bilinear_grad(y, x, align_corners=a, half_pixel_centers=h))
    assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-9)


@given(b=st.integers(1, 3), ih=SIZES, iw=SIZES, oh=SIZES, ow=SIZES, c=st.sampled_from([1, 3, 5]),
       flags=st.sampled_from([(False, False), (True, False), (False, True), (True, True)]),
       dt=st.sampled_from([np.float32, np.float64, np.int8, np.uint8, np.int32]),
       seed=st.integers(0, 2 ** 16))
def test_property_nearest(b, ih, iw, oh, ow, c, flags, dt, seed):
    rng = np.random.default_rng(seed)
    dy = (rng.standard_normal((b, oh, ow, c)) * 50).astype(dt)
    a, h = flags
    got = T.resize_nearest_neighbor_grad(dy, [ih, iw], align_corners=a, half_pixel_centers=h)
    ref = T.resize_nearest_neighbor_grad(dy, [ih, iw], align_corners=a, half_pixel_centers=h,
                                         backend="numpy")
    if np.dtype(dt).kind == "f":
        s = T.resize_nearest_neighbor_grad(np.abs(dy).astype(np.float64), [ih, iw], align_corners=a,
                                           half_pixel_centers=h, backend="numpy")
        assert_close(got, ref, s, dt)
    else:
        assert np.array_equal(got, ref)  # integer sums are exact (and wrap identically)
    tf = _tf()
    if tf is not None and dt in (np.float32, np.int32):
        want = tf.raw_ops.ResizeNearestNeighborGrad(grads=dy, size=[ih, iw], align_corners=a,
                                                    half_pixel_centers=h).numpy()
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


@given(rank=st.integers(1, 3), mode=st.sampled_from(["nearest", "linear"]),
       transform=st.sampled_from(["half_pixel", "align_corners", "asymmetric",
                                  "pytorch_half_pixel", "tf_half_pixel_for_nn"]),
       fmt=st.sampled_from(["NXC", "NCX"]), dt=st.sampled_from(FLOATS),
       sizes=st.lists(st.tuples(SIZES, SIZES), min_size=3, max_size=3), c=st.integers(1, 4),
       seed=st.integers(0, 2 ** 16))
def test_property_interpolate(rank, mode, transform, fmt, dt, sizes, c, seed):
    rng = np.random.default_rng(seed)
    in_sp = tuple(s[0] for s in sizes[:rank])
    out_sp = tuple(s[1] for s in sizes[:rank])
    shape = (lambda sp: (2,) + sp + (c,)) if fmt == "NXC" else (lambda sp: (2, c) + sp)
    dy = rng.standard_normal(shape(out_sp)).astype(dt)
    src = np.zeros(shape(in_sp), dt)
    kw = dict(mode=mode, coordinate_transformation_mode=transform, data_format=fmt)
    got = T.interpolate_backward(src, dy, **kw)
    ref = T.interpolate_backward(src.astype(np.float64), dy.astype(np.float64), backend="numpy", **kw)
    s = T.interpolate_backward(src.astype(np.float64), np.abs(dy.astype(np.float64)),
                               backend="numpy", **kw)
    assert got.dtype == dt
    assert_close(got, ref, s, dt)
    x = rng.standard_normal(shape(in_sp))
    y = rng.standard_normal(shape(out_sp))
    pos = tuple(range(1, rank + 1)) if fmt == "NXC" else tuple(range(2, rank + 2))
    lhs = np.vdot(resample_forward(x, pos, out_sp, [(mode, transform)] * rank), y)
    rhs = np.vdot(x, T.interpolate_backward(x, y, **kw))
    assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-9)


@given(b=st.integers(1, 3), h=st.integers(1, 12), w=st.integers(1, 12), c=st.integers(1, 5),
       oc=st.integers(1, 5), fh=st.integers(1, 4), fw=st.integers(1, 4), s=st.integers(1, 3),
       d=st.integers(1, 2), pads=st.tuples(*[st.integers(0, 2)] * 4),
       fmt=st.sampled_from(["NHWC", "NCHW"]), dt=st.sampled_from(FLOATS), seed=st.integers(0, 2 ** 16))
def test_property_conv(b, h, w, c, oc, fh, fw, s, d, pads, fmt, dt, seed):
    pt, pb, pl, pr = pads
    oh = (h + pt + pb - (fh - 1) * d - 1) // s + 1
    ow = (w + pl + pr - (fw - 1) * d - 1) // s + 1
    assume(oh >= 1 and ow >= 1)
    rng = np.random.default_rng(seed)
    wt = rng.standard_normal((fh, fw, c, oc))
    x = rng.standard_normal((b, h, w, c))
    y = rng.standard_normal((b, oh, ow, oc))
    explicit = [0, 0, pt, pb, pl, pr, 0, 0] if fmt == "NHWC" else [0, 0, 0, 0, pt, pb, pl, pr]
    strides, dil = ([1, s, s, 1], [1, d, d, 1]) if fmt == "NHWC" else ([1, 1, s, s], [1, 1, d, d])
    to = (lambda a: a) if fmt == "NHWC" else (lambda a: a.transpose(0, 3, 1, 2))
    sizes = list(to(x).shape)
    kw = dict(strides=strides, padding="EXPLICIT", explicit_paddings=explicit, data_format=fmt,
              dilations=dil)
    got = T.conv2d_backprop_input(sizes, wt.astype(dt), to(y).astype(dt), **kw)
    ref = T.conv2d_backprop_input(sizes, wt.astype(dt).astype(np.float64),
                                  to(y).astype(dt).astype(np.float64), backend="numpy", **kw)
    sc = T.conv2d_backprop_input(sizes, np.abs(wt), np.abs(to(y)), backend="numpy", **kw)
    assert got.dtype == dt
    assert_close(got, ref, sc, dt, CONV_TOL)
    lhs = np.vdot(conv_forward(x, wt, s, d, pads), y)
    rhs = np.vdot(to(x), T.conv2d_backprop_input(sizes, wt, to(y), **kw))
    assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-9)


# ------------------------------------------------------------------------------------------
# Invalid-input fuzzing: ValueError/TypeError with a message, or a correct result; never a crash
# ------------------------------------------------------------------------------------------

def _hostile_values(rng):
    good = rng.standard_normal((2, 6, 5, 3)).astype(np.float32)
    return [
        None, 3.0, 7, "x", b"bytes", [], [[1.0, 2.0], [3.0]], object(), {"a": 1},
        np.array([None, 1.0], dtype=object), np.array("str"), np.array(1.0, np.float32),
        np.ones((6, 5, 3), np.float32), np.ones((1, 2, 6, 5, 3), np.float32),
        np.ones((2, 0, 5, 3), np.float32), np.ones((2, 6, 5, 3), np.complex64),
        np.ones((2, 6, 5, 3), bool), np.ones((2, 6, 5, 3), np.int64), np.ones((2, 6, 5, 3), "M8[s]"),
        np.ones((3, 6, 5, 3), np.float32), np.ones((2, 6, 5, 4), np.float32),
        np.full((2, 6, 5, 3), np.nan, np.float32), np.full((2, 6, 5, 3), np.inf, np.float32),
        good[:, ::2], good[:, ::-1], good.tolist(), np.asfortranarray(good),
    ]


def _calls(value):
    img = np.zeros((2, 3, 4, 3), np.float32)
    return [
        lambda: T.resize_bilinear_grad(value, img),
        lambda: T.resize_bilinear_grad(np.ones((2, 6, 5, 3), np.float32), value),
        lambda: T.resize_nearest_neighbor_grad(value, [3, 4]),
        lambda: T.resize_nearest_neighbor_grad(np.ones((2, 6, 5, 3), np.float32), value),
        lambda: T.interpolate_backward(img, value, mode="linear"),
        lambda: T.interpolate_backward(value, np.ones((2, 6, 5, 3), np.float32), mode="nearest"),
        lambda: T.resize_grad(value, img.transpose(0, 3, 1, 2)),
        lambda: T.resize_grad(np.ones((2, 3, 6, 5), np.float32), img.transpose(0, 3, 1, 2),
                              scales=value),
        lambda: T.conv2d_backprop_input([2, 6, 5, 3], value, np.ones((2, 4, 3, 2), np.float32),
                                        strides=[1, 1, 1, 1], padding="VALID"),
        lambda: T.conv2d_backprop_input(value, np.ones((3, 3, 3, 2), np.float32),
                                        np.ones((2, 4, 3, 2), np.float32), strides=[1, 1, 1, 1],
                                        padding="VALID"),
        lambda: T.conv2d_backprop_input([2, 6, 5, 3], np.ones((3, 3, 3, 2), np.float32),
                                        np.ones((2, 4, 3, 2), np.float32), strides=value,
                                        padding="VALID"),
        lambda: T.conv2d_backprop_input([2, 6, 5, 3], np.ones((3, 3, 3, 2), np.float32),
                                        np.ones((2, 4, 3, 2), np.float32), strides=[1, 1, 1, 1],
                                        padding="EXPLICIT", explicit_paddings=value),
        lambda: T.resize_nearest_neighbor_grad(np.ones((2, 6, 5, 3), np.float32), [3, 4],
                                               align_corners=value),
    ]


@pytest.mark.parametrize("backend", ["cython", "numpy"])
def test_fuzz_invalid_inputs_raise_or_compute(backend):
    T.set_backend(backend)
    tried = raised = computed = 0
    try:
        for value in _hostile_values(np.random.default_rng(0)):
            for call in _calls(value):
                tried += 1
                try:
                    out = call()
                except (ValueError, TypeError, MemoryError) as exc:
                    raised += 1
                    assert str(exc), "an error without a message"
                else:
                    computed += 1
                    assert isinstance(out, np.ndarray)
    finally:
        T.set_backend("cython")
    assert tried == raised + computed and raised > tried // 2


def test_valid_hostile_layouts_compute_the_same(tmp_path):
    rng = np.random.default_rng(1)
    dy = rng.standard_normal((2, 9, 7, 3)).astype(np.float32)
    img = np.zeros((2, 4, 5, 3), np.float32)
    want = T.resize_bilinear_grad(dy, img, half_pixel_centers=True)
    mm = np.lib.format.open_memmap(tmp_path / "dy.npy", mode="w+", dtype=np.float32, shape=dy.shape)
    mm[:] = dy
    ro = dy.copy()
    ro.setflags(write=False)
    big = np.zeros((2, 18, 14, 6), np.float32)
    big[:, ::2, ::2, ::2] = dy
    for variant in (mm, np.load(tmp_path / "dy.npy", mmap_mode="r"), ro, big[:, ::2, ::2, ::2],
                    np.ascontiguousarray(dy[:, ::-1])[:, ::-1], np.asfortranarray(dy), dy.tolist()):
        got = T.resize_bilinear_grad(variant, img, half_pixel_centers=True)
        if isinstance(variant, list):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)  # a list is float64 grads
        else:
            assert np.array_equal(got, want)


def test_huge_requests_fail_cleanly():
    dy = np.ones((1, 2, 2, 64), np.float32)
    for size in ([100000, 100000], [2 ** 31, 1], [2 ** 40, 2 ** 40]):
        with pytest.raises((MemoryError, ValueError), match="size"):
            T.resize_nearest_neighbor_grad(dy, size)
    with pytest.raises((MemoryError, ValueError), match="input_sizes"):
        T.conv2d_backprop_input([1, 200000, 200000, 64], np.ones((1, 1, 64, 64), np.float32),
                                np.broadcast_to(np.float32(0), (1, 200000, 200000, 64)),
                                strides=[1, 1, 1, 1], padding="VALID")


@pytest.mark.parametrize("backend", ["cython", "numpy"])
@pytest.mark.parametrize("stride", [9, 3000, 2 ** 31 - 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_conv_stride_beyond_the_image(backend, stride, dtype, fmt):
    """A stride larger than the image: dy is one pixel, and with SAME padding (need =
    max(0, 0 * stride + 3 - 8) = 0, so no pad) dx[y, x] = w[y, x] @ dy for y, x < 3, zero
    elsewhere, by hand. The work must not grow with the stride (a table per stride phase
    once took minutes and gigabytes at 3,000)."""
    rng = np.random.default_rng(stride)
    w = rng.standard_normal((3, 3, 5, 4)).astype(dtype)
    dy = rng.standard_normal((2, 1, 1, 4)).astype(dtype)
    want = np.zeros((2, 8, 7, 5))
    want[:, :3, :3] = np.einsum("yxco,no->nyxc", w.astype(np.float64), dy[:, 0, 0].astype(np.float64))
    scale = np.zeros_like(want)
    scale[:, :3, :3] = np.einsum("yxco,no->nyxc", np.abs(w.astype(np.float64)),
                                 np.abs(dy[:, 0, 0].astype(np.float64)))
    if fmt == "NHWC":
        got = T.conv2d_backprop_input([2, 8, 7, 5], w, dy, strides=[1, stride, stride, 1],
                                      padding="SAME", backend=backend)
    else:
        got = T.conv2d_backprop_input([2, 5, 8, 7], w, dy.transpose(0, 3, 1, 2),
                                      strides=[1, 1, stride, stride], padding="SAME",
                                      data_format="NCHW", backend=backend).transpose(0, 2, 3, 1)
    assert_close(got, want, scale, dtype, CONV_TOL, f"stride {stride}")
    assert not got[:, 3:].any() and not got[:, :, 3:].any()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 2])
def test_conv_stride_phases_more_than_a_gather_takes(dtype, n):
    """A stride of 70 on a 140 x 150 image: 4,900 stride phases of 2 x 2 or 2 x 3 pixels, more
    than the phase-based strategies take (the col2im runs it), against the NumPy reference;
    and the same bits on 1 and 2 threads."""
    rng = np.random.default_rng(n)
    w = rng.standard_normal((3, 4, 16, 8)).astype(dtype)
    dy = rng.standard_normal((n, 2, 3, 8)).astype(dtype)
    kw = dict(strides=[1, 70, 70, 1], padding="VALID")
    want = T.conv2d_backprop_input([n, 140, 150, 16], w, dy, backend="numpy", **kw)
    from tfcompat.backends.numpy_backend import conv_backprop_input
    from tfcompat.conv.problem import conv_problem
    scale = conv_backprop_input(conv_problem({"dy": dy, "filter": w},
                                             {"inputShape": [n, 140, 150, 16], "strides": 70}),
                                absolute=True)
    got = []
    for threads in (1, 2):
        T.set_num_threads(threads)
        got.append(T.conv2d_backprop_input([n, 140, 150, 16], w, dy, **kw))
    assert_close(got[0], want, scale, dtype, CONV_TOL)
    assert np.array_equal(got[0].view(np.uint8), got[1].view(np.uint8))


def test_conv_extents_beyond_int32_are_refused():
    """TF's strides and dilations are int32 attributes (larger ones abort TF 2.21's process);
    our tables hold the dilated filter's extent and the pads as int32: a clear error names
    the argument."""
    w = np.ones((3, 3, 2, 2), np.float32)
    dy = np.ones((1, 1, 1, 2), np.float32)
    with pytest.raises(ValueError, match=r"strides: got \[2147483648, 1\]"):
        T.conv2d_backprop_input([1, 4, 4, 2], w, dy, strides=[1, 2 ** 31, 1, 1], padding="SAME")
    with pytest.raises(ValueError, match=r"dilations: got \[1, 1099511627776\]"):
        T.conv2d_backprop_input([1, 4, 4, 2], w, np.ones((1, 4, 4, 2), np.float32),
                                strides=[1, 1, 1, 1], padding="SAME",
                                dilations=[1, 1, 2 ** 40, 1])
    with pytest.raises(ValueError, match="dilations: .* spans 2147483649 positions"):
        T.conv2d_backprop_input([1, 4, 4, 2], w, np.ones((1, 4, 4, 2), np.float32),
                                strides=[1, 1, 1, 1], padding="SAME",
                                dilations=[1, 2 ** 30, 1, 1])
    with pytest.raises(ValueError, match="explicit_paddings: .* expected values at most "
                       "2147483647"):
        T.conv2d_backprop_input([1, 4, 4, 2], w, dy, strides=[1, 2 ** 31 - 1, 1, 1],
                                padding="EXPLICIT",
                                explicit_paddings=[0, 0, 2 ** 31, 2 ** 31, 0, 0, 0, 0])


def test_big_endian_inputs_are_read_as_their_numbers():
    """Arrays in the other byte order (FITS files, network formats) hold the same numbers, and
    TF takes them so: by hand, a 2 x 2 dy onto a 1 x 1 image sums it (10), and a 1 x 1 filter
    of 2 doubles dy; dx comes out in the machine's byte order."""
    dy = np.array([1, 2, 3, 4]).reshape(1, 2, 2, 1)
    got = T.resize_nearest_neighbor_grad(dy.astype(">i4"), [1, 1])
    assert got.dtype == np.int32 and got.ravel().tolist() == [10]
    got = T.resize_bilinear_grad(dy.astype(">f4"), np.zeros((1, 1, 1, 1), ">f8"))
    assert got.dtype == np.float64 and got.ravel().tolist() == [10.0]
    got = T.conv2d_backprop_input([1, 2, 2, 1], np.full((1, 1, 1, 1), 2, ">f4"), dy.astype(">f4"),
                                  strides=[1, 1, 1, 1], padding="VALID")
    assert got.dtype == np.float32 and got.ravel().tolist() == [2.0, 4.0, 6.0, 8.0]
    got = T.resize_grad(dy.reshape(1, 1, 2, 2).astype(">f8"), np.zeros((1, 1, 1, 1), ">f8"))
    assert got.dtype == np.float64 and got.ravel().tolist() == [10.0]


# ------------------------------------------------------------------------------------------
# Memory: peak within output + bounded scratch; no leak over 1,000 calls
# ------------------------------------------------------------------------------------------

def _peak(fn):
    gc.collect()
    tracemalloc.start()
    out = fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak, out.nbytes


@pytest.mark.parametrize("name", ["bilinear_up", "bilinear_down", "nearest", "trilinear_ncx",
                                  "bilinear_f16", "conv", "conv_16_threads"])
def test_peak_memory_is_output_plus_bounded_scratch(name):
    rng = np.random.default_rng(0)
    if name == "conv_16_threads":  # a 16-core machine's default, on any machine
        T.set_num_threads(16)
    if name == "bilinear_up":
        dy = rng.standard_normal((2, 64, 64, 16)).astype(np.float32)
        img = np.zeros((2, 32, 32, 16), np.float32)
        fn = lambda: T.resize_bilinear_grad(dy, img)  # noqa: E731
    elif name == "bilinear_down":
        dy = rng.standard_normal((2, 32, 32, 16)).astype(np.float32)
        img = np.zeros((2, 64, 64, 16), np.float32)
        fn = lambda: T.resize_bilinear_grad(dy, img)  # noqa: E731
    elif name == "nearest":
        dy = rng.standard_normal((2, 64, 64, 16)).astype(np.float32)
        fn = lambda: T.resize_nearest_neighbor_grad(dy, [32, 48])  # noqa: E731
    elif name == "trilinear_ncx":
        dy = rng.standard_normal((1, 4, 16, 16, 16)).astype(np.float32)
        src = np.zeros((1, 4, 8, 8, 8), np.float32)
        fn = lambda: T.interpolate_backward(src, dy, mode="trilinear", data_format="NCX")  # noqa: E731
    elif name == "bilinear_f16":
        dy = rng.standard_normal((2, 64, 64, 16)).astype(np.float32)
        img = np.zeros((2, 32, 32, 16), np.float16)
        fn = lambda: T.resize_bilinear_grad(dy, img)  # noqa: E731
    else:
        w = rng.standard_normal((3, 3, 16, 16)).astype(np.float32)
        dy = rng.standard_normal((4, 16, 16, 16)).astype(np.float32)
        fn = lambda: T.conv2d_backprop_input([4, 32, 32, 16], w, dy, strides=[1, 2, 2, 1],  # noqa: E731
                                             padding="SAME")
    fn()
    peak, out = _peak(fn)
    tables = 64 * 1024  # per-axis tables and Python objects
    if name == "bilinear_f16":
        bound = out + 2 * out + tables      # one float32 buffer of the output's size
    elif name.startswith("conv"):
        # each thread holds at most one image's columns
        cols = T.get_num_threads() * 16 * 16 * 3 * 3 * 16 * 4
        bound = out + cols + tables
    else:
        bound = out + tables
    assert peak <= bound, f"{name}: peak {peak} bytes > output {out} + scratch"


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux)")
def test_no_leak_over_1000_calls():
    rng = np.random.default_rng(0)
    dy = rng.standard_normal((2, 16, 16, 4)).astype(np.float32)
    img = np.zeros((2, 8, 8, 4), np.float32)
    w = rng.standard_normal((3, 3, 4, 4)).astype(np.float32)
    calls = [
        lambda: T.resize_bilinear_grad(dy, img),
        lambda: T.resize_nearest_neighbor_grad(dy, [8, 8]),
        lambda: T.interpolate_backward(img, dy, mode="linear"),
        lambda: T.resize_grad(dy.transpose(0, 3, 1, 2), img.transpose(0, 3, 1, 2)),
        lambda: T.conv2d_backprop_input([2, 16, 16, 4], w, dy, strides=[1, 1, 1, 1], padding="SAME"),
    ]
    for c in calls:
        for _ in range(50):
            c()
    before = _rss()
    for _ in range(1000):
        for c in calls:
            c()
    growth = _rss() - before
    assert growth < 8 * 2 ** 20, f"RSS grew by {growth / 2**20:.1f} MiB over 1,000 calls of each kernel"


# ------------------------------------------------------------------------------------------
# Concurrency: the kernels release the GIL; concurrent calls give the serial results
# ------------------------------------------------------------------------------------------

def test_concurrent_calls_from_python_threads():
    rng = np.random.default_rng(0)
    jobs = []
    for k in range(8):
        dy = rng.standard_normal((2, 40 + k, 33, 8)).astype(np.float32)
        img = np.zeros((2, 17, 20 + k, 8), np.float32)
        w = rng.standard_normal((3, 3, 8, 8)).astype(np.float32)
        jobs += [lambda dy=dy, img=img: T.resize_bilinear_grad(dy, img, half_pixel_centers=True),
                 lambda dy=dy, img=img: T.resize_nearest_neighbor_grad(dy, img.shape[1:3]),
                 lambda dy=dy, w=w, k=k: T.conv2d_backprop_input([2, 40 + k, 33, 8], w, dy,
                                                            strides=[1, 1, 1, 1], padding="SAME")]
    serial = [j() for j in jobs]
    results = [None] * len(jobs)

    def worker(i):
        for _ in range(3):
            results[i] = jobs[i]()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(serial, results):
        assert np.array_equal(a, b)
