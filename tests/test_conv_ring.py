"""The per-image conv computes columns in bands into a ring of output rows. The benchmark shapes
are large enough to use the ring; these small cases force it (tiny bands), so every stride,
dilation, padding and filter size walks a ring that wraps many times."""
import itertools

import ml_dtypes
import numpy as np
import pytest

import tfcompat as T
from tfcompat.backends import cython_backend

from helpers import CONV_TOL, assert_close, spy

CASES = [  # (fh, fw, stride, dilation, pads (top, bottom, left, right))
    (fh, fw, s, d, pads)
    for (fh, fw), s, d, pads in itertools.product(
        [(1, 1), (2, 2), (3, 3), (5, 3)], [1, 2, 3], [1, 2], [(0, 0, 0, 0), (1, 2, 0, 1), (3, 0, 2, 2)])
]


def _run(case, dtype, rng, n=3, h=23, w=9, c=3, oc=4):
    fh, fw, s, d, (pt, pb, pl, pr) = case
    oh = (h + pt + pb - (fh - 1) * d - 1) // s + 1
    ow = (w + pl + pr - (fw - 1) * d - 1) // s + 1
    if oh < 1 or ow < 1:
        pytest.skip("filter larger than the padded input")
    filt = rng.standard_normal((fh, fw, c, oc))
    dy = rng.standard_normal((n, oh, ow, oc))
    kw = dict(strides=[1, s, s, 1], padding="EXPLICIT", dilations=[1, d, d, 1],
              explicit_paddings=[0, 0, pt, pb, pl, pr, 0, 0])
    got = T.conv2d_backprop_input([n, h, w, c], filt.astype(dtype), dy.astype(dtype), **kw)
    ref = T.conv2d_backprop_input([n, h, w, c], filt.astype(dtype).astype(np.float64),
                                  dy.astype(dtype).astype(np.float64), backend="numpy", **kw)
    scale = T.conv2d_backprop_input([n, h, w, c], np.abs(filt), np.abs(dy), backend="numpy", **kw)
    return got, ref, scale


def _same_bits_on(threads, f):
    """f() on each of the thread counts ``threads`` in turn (the count restored after),
    asserting that the results have the same bits; returns them."""
    old = T.get_num_threads()
    outs = []
    try:
        for k in threads:
            T.set_num_threads(k)
            outs.append(f())
    finally:
        T.set_num_threads(old)
    for o in outs[1:]:
        assert np.array_equal(o.view(np.uint8), outs[0].view(np.uint8))
    return outs


@pytest.mark.parametrize("band_bytes", [1, 40])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "k{}x{}_s{}_d{}_p{}".format(*c))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16],
                         ids=["float32", "float64", "float16"])
def test_ring_of_columns_matches_reference(case, dtype, band_bytes, rng, monkeypatch):
    monkeypatch.setattr(cython_backend, "ONEDNN", "off")  # the ring, with or without oneDNN
    monkeypatch.setattr(cython_backend, "BAND_GEMM_BYTES", band_bytes)
    got, ref, scale = _run(case, dtype, rng)
    assert got.dtype == np.dtype(dtype)
    assert_close(got, ref, scale, dtype, CONV_TOL)


def test_ring_is_used_and_bounded(rng):
    """C1's shape gets a ring of a few output rows, not the image's 56."""
    p = type("P", (), {"OH": 56, "OW": 56})
    from tfcompat import _simd
    h_tab = _simd.kernels.conv_axis_table(56, 56, 3, 1, 1, 1)
    band, cap = cython_backend.column_ring(p, h_tab, 4)
    # 512 column rows per band is 10 output rows of 56; one dx row reads 3 output rows
    assert (band, cap) == (10, 20)
    assert cython_backend.column_ring(p, h_tab, 8) == (5, 10)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["float32", "bfloat16"])
def test_ring_same_bits_on_any_thread_count(dtype, monkeypatch):
    monkeypatch.setattr(cython_backend, "BAND_GEMM_BYTES", 1)
    monkeypatch.setattr(cython_backend, "ONEDNN", "off")  # the ring, with or without oneDNN
    _same_bits_on((1, 2, 3), lambda: _run((3, 3, 2, 2, (1, 2, 0, 1)), dtype,
                                          np.random.default_rng(5), n=5)[0])


# The gather strategy (conv.pxi: _conv_image_gather; the default for float32 filters with fewer
# output than input channels, TFCOMPAT_CONV_STRATEGY=gather forces it): one GEMM per stride
# phase of gathered dy. Forced here for every dtype on the same grid, with tiny bands so that
# each phase takes many, and strides above the filter size so that some phases have no tap.
@pytest.mark.parametrize("values", [1, 1 << 19])
@pytest.mark.parametrize("case", CASES + [(1, 2, 3, 1, (0, 0, 1, 0)), (2, 1, 3, 2, (1, 1, 0, 0))],
                         ids=lambda c: "k{}x{}_s{}_d{}_p{}".format(*c))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16],
                         ids=["float32", "float64", "float16", "bfloat16"])
def test_gather_strategy_matches_reference(case, dtype, values, rng, monkeypatch):
    monkeypatch.setattr(cython_backend, "ONEDNN", "off")
    monkeypatch.setattr(cython_backend, "CONV_STRATEGY", "gather")
    monkeypatch.setattr(cython_backend, "GATHER_VALUES", values)
    got, ref, scale = _run(case, dtype, rng, c=5, oc=3)
    assert got.dtype == np.dtype(dtype)
    assert_close(got, ref, scale, dtype, CONV_TOL)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["float32", "bfloat16"])
def test_gather_strategy_same_bits_on_any_thread_count(dtype, monkeypatch):
    monkeypatch.setattr(cython_backend, "ONEDNN", "off")
    monkeypatch.setattr(cython_backend, "CONV_STRATEGY", "gather")
    monkeypatch.setattr(cython_backend, "GATHER_VALUES", 64)
    outs = []
    for k in (1, 2, 3):
        T.set_num_threads(k)
        outs.append(_run((3, 3, 2, 1, (1, 2, 0, 1)), dtype, np.random.default_rng(5), n=5,
                         c=6, oc=2)[0])
    for o in outs[1:]:
        assert np.array_equal(o.view(np.uint8), outs[0].view(np.uint8))


def _onednn_missing():
    from tfcompat import _dnnl
    return _dnnl.missing()


needs_onednn = pytest.mark.skipif(_onednn_missing() is not None,
                                  reason=f"oneDNN not installed: {_onednn_missing()}")


BF = ml_dtypes.bfloat16
F32 = np.float32
# (dtype, TFCOMPAT_HALF_GEMM): float32; the half types multiplied in their own type and widened
ONEDNN_TYPES = [(np.float32, "auto"), (BF, "native"), (BF, "float32"), (np.float16, "native"),
                (np.float16, "float32")]
ONEDNN_IDS = ["float32", "bfloat16", "bfloat16-as-f32", "float16", "float16-as-f32"]


def _onednn(monkeypatch, half_gemm, values=None):
    monkeypatch.setattr(cython_backend, "ONEDNN", "auto")
    # these small cases' C (3 to 17) would send two or more images to the col2im
    monkeypatch.setattr(cython_backend, "ONEDNN_MIN_C", 0)
    monkeypatch.setattr(cython_backend, "CONV_TILES", "off")   # float32: oneDNN's matmuls
    monkeypatch.setattr(cython_backend, "HALF_GEMM", half_gemm)
    if values is not None:
        monkeypatch.setattr(cython_backend, "DNNL_GATHER_VALUES", values)


@needs_onednn
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype, half_gemm", ONEDNN_TYPES, ids=ONEDNN_IDS)
def test_1x1_through_onednn_matches_reference(fmt, dtype, half_gemm, rng, monkeypatch):
    """A 1x1, stride-1 conv is one GEMM: with oneDNN installed, a half type's own matmul
    (float32 accumulation, rounded once) or the float32 gather's. Within the dtype's tolerance
    of the float64 reference, and the same bits on any thread count."""
    _onednn(monkeypatch, half_gemm)
    n, h, w, c, oc = 3, 5, 7, 6, 4
    filt = rng.standard_normal((1, 1, c, oc)).astype(dtype)
    nhwc = rng.standard_normal((n, h, w, oc)).astype(dtype)
    dy = nhwc if fmt == "NHWC" else np.ascontiguousarray(nhwc.transpose(0, 3, 1, 2))
    sizes = [n, h, w, c] if fmt == "NHWC" else [n, c, h, w]
    strides = [1, 1, 1, 1]
    outs = []
    for k in (1, 2, 3):
        T.set_num_threads(k)
        outs.append(T.conv2d_backprop_input(sizes, filt, dy, strides=strides, padding="VALID",
                                            data_format=fmt))
    for o in outs[1:]:
        assert np.array_equal(o.view(np.uint8), outs[0].view(np.uint8))
    got = outs[0]
    f64 = np.float64
    ref = T.conv2d_backprop_input(sizes, filt.astype(f64), dy.astype(f64), strides=strides,
                                  padding="VALID", data_format=fmt, backend="numpy")
    scale = T.conv2d_backprop_input(sizes, np.abs(filt.astype(f64)), np.abs(dy.astype(f64)),
                                    strides=strides, padding="VALID", data_format=fmt,
                                    backend="numpy")
    assert got.dtype == np.dtype(dtype) and got.shape == ref.shape
    assert_close(got, ref, scale, dtype, CONV_TOL)


@needs_onednn
@pytest.mark.parametrize("n, hw", [(8, 5), (12, 7), (6, 3)], ids=["k2", "k3", "k1"])
@pytest.mark.parametrize("dtype, half_gemm", ONEDNN_TYPES, ids=ONEDNN_IDS)
def test_1x1_of_small_images_through_onednn(n, hw, dtype, half_gemm, monkeypatch):
    """A 1x1, stride-1 conv of small images through oneDNN's gather puts k of them in one band
    (_images_per_band: k = 2 for eight 5x5 images, 3 for twelve 7x7, and 1 for six 3x3,
    which would leave fewer than 4 bands), one GEMM over their pixels (or, for a half type's
    own matmul, one over the batch). Within tolerance of the reference, the same bits on 1, 2
    and 3 threads, the images in their places."""
    _onednn(monkeypatch, half_gemm)
    got = _on_1_2_3_threads((1, 1, 1, 1, (0, 0, 0, 0)), dtype, 4, n=n, h=hw, w=hw, c=24, oc=16)
    assert got.dtype == np.dtype(dtype) and got.shape == (n, hw, hw, 24)


# With oneDNN installed (TFCOMPAT_ONEDNN=auto) every conv of two or more images but float64
# with C >= ONEDNN_MIN_C (0 here) runs the gather with oneDNN's single-threaded matmul per band
# of each stride phase (float32 with a strided filter whose taps do not overlap keeps the
# col2im). The extra cases, 10 columns
# wide: a 2x2 stride-2 filter on an even input, whose phases read dy itself (no gather), and
# 3x3 stride 1. Then shapes whose stride phases read dy in column classes (each class of
# columns i = r, r + ntx, ... reads runs of ntx dy pixels in place, or a shifted copy), 12
# columns wide for an even dy width: taps per tap row 2 (3x3 stride 2), 2 and 3 (5x5), 3 with
# shifts -1, 0 and 1 beside phases no tap reaches (dilation 2), and 1 (stride 3). ``values``
# 1 and 40 make many bands and a shorter last band (for the classes, bands of a row or a few,
# most inside dy and the first and last reaching beyond it).
CLASS_CASES = [(3, 3, 2, 1, (0, 1, 0, 1)), (5, 5, 2, 1, (1, 2, 1, 2)), (3, 3, 2, 2, (2, 2, 2, 2)),
               (3, 3, 3, 1, (1, 1, 1, 1))]
ONEDNN_CASES = ([(case, 10) for case in CASES + [(2, 2, 2, 1, (0, 0, 0, 0)),
                                                 (1, 1, 2, 1, (0, 0, 0, 0)),
                                                 (3, 3, 1, 1, (1, 1, 1, 1))]]
                + [(case, 12) for case in CLASS_CASES])


def _case_id(case_w):
    case, w = case_w
    return "k{}x{}_s{}_d{}_p{}".format(*case) + f"_w{w}"


@needs_onednn
@pytest.mark.parametrize("values", [1, 40, 1 << 19])
@pytest.mark.parametrize("case_w", ONEDNN_CASES, ids=_case_id)
@pytest.mark.parametrize("dtype, half_gemm", ONEDNN_TYPES, ids=ONEDNN_IDS)
def test_through_onednn_matmul_matches_reference(case_w, dtype, half_gemm, values, rng,
                                                 monkeypatch):
    _onednn(monkeypatch, half_gemm, values)
    case, w = case_w
    got, ref, scale = _run(case, dtype, rng, h=22, w=w, c=5, oc=3)
    assert got.dtype == np.dtype(dtype)
    assert_close(got, ref, scale, dtype, CONV_TOL)


@needs_onednn
@pytest.mark.parametrize("case_w", [((3, 3, 2, 1, (1, 2, 0, 1)), 10),
                                    ((2, 2, 2, 1, (0, 0, 0, 0)), 10),
                                    ((3, 3, 1, 2, (2, 2, 2, 2)), 10)]
                         + [(case, 12) for case in CLASS_CASES[:3]], ids=_case_id)
@pytest.mark.parametrize("dtype, half_gemm", ONEDNN_TYPES, ids=ONEDNN_IDS)
def test_through_onednn_same_bits_on_any_thread_count(case_w, dtype, half_gemm, monkeypatch):
    _onednn(monkeypatch, half_gemm, 200)
    case, w = case_w
    _same_bits_on((1, 2, 3, 5), lambda: _run(case, dtype, np.random.default_rng(5), n=7, h=22,
                                             w=w, c=17, oc=33)[0])


# one image, through our BLAS (TFCOMPAT_ONEDNN=off) and through oneDNN
ONE_IMAGE_PATHS = (
    [pytest.param(dt, "off", id=name + "-blas") for dt, name in
     [(np.float32, "float32"), (np.float64, "float64"), (np.float16, "float16"), (BF, "bfloat16")]]
    + [pytest.param(dt, half, id=name + "-onednn", marks=needs_onednn)
       for (dt, half), name in zip(ONEDNN_TYPES, ONEDNN_IDS)])


@pytest.mark.parametrize("case", [(3, 3, 1, 1, (1, 1, 1, 1)), (3, 3, 2, 1, (1, 2, 0, 1)),
                                  (5, 3, 3, 2, (3, 0, 2, 2)), (2, 2, 2, 1, (0, 0, 0, 0)),
                                  (1, 1, 1, 1, (0, 0, 0, 0))],
                         ids=lambda c: "k{}x{}_s{}_d{}_p{}".format(*c))
@pytest.mark.parametrize("dtype, path", ONE_IMAGE_PATHS)
def test_one_image_shares_its_bands_between_threads(case, dtype, path, monkeypatch):
    """The gathers' threads share out bands, not images, so one image runs on several threads
    too (single-threaded BLAS or oneDNN in each): within tolerance of the reference and the
    same bits on any thread count. ``path``: TFCOMPAT_ONEDNN=off, or oneDNN's TFCOMPAT_HALF_GEMM."""
    if path == "off":
        monkeypatch.setattr(cython_backend, "ONEDNN", "off")
        monkeypatch.setattr(cython_backend, "CONV_TILES", "off")   # float32: our BLAS's GEMMs
        monkeypatch.setattr(cython_backend, "GATHER_VALUES", 100)
    else:
        _onednn(monkeypatch, path, 100)
    _on_1_2_3_threads(case, dtype, 9, h=22, w=10, c=7, oc=5)


def _on_1_2_3_threads(case, dtype, seed, n=1, **sizes):
    """``n`` images (one unless said) of ``case`` within tolerance of the reference, the same
    bits on 1, 2 and 3 threads; returns the result."""
    def one():
        got, ref, scale = _run(case, dtype, np.random.default_rng(seed), n=n, **sizes)
        assert_close(got, ref, scale, dtype, CONV_TOL)
        return got
    return _same_bits_on((1, 2, 3), one)[0]


@pytest.mark.parametrize("dtype, path", [p for p in ONE_IMAGE_PATHS
                                         if p.values[0] not in (np.float32, np.float64)
                                         or p.values[1] != "off"])
def test_one_image_1x1_splits_into_bands_at_the_default_sizes(dtype, path, monkeypatch):
    """One image of a 1x1 conv (its one GEMM would fit one band at the default band sizes) is
    cut into short bands for the threads to share, through oneDNN and, for the half types,
    through our BLAS: within tolerance of the reference, the same bits on any thread count.
    (With oneDNN, float32 and a half type multiplied in its own type are one multithreaded
    matmul by default, tested below; TFCOMPAT_CONV_STRATEGY=gather keeps float32 on the
    bands.)"""
    if path == "off":
        monkeypatch.setattr(cython_backend, "ONEDNN", "off")
    else:
        _onednn(monkeypatch, path)
        monkeypatch.setattr(cython_backend, "CONV_STRATEGY", "gather")
    _on_1_2_3_threads((1, 1, 1, 1, (0, 0, 0, 0)), dtype, 4, h=45, w=8, c=6, oc=9)


@pytest.mark.parametrize("case", [(3, 3, 1, 1, (1, 1, 1, 1)), (3, 3, 1, 2, (2, 2, 2, 2)),
                                  (2, 2, 2, 1, (0, 0, 0, 0))],
                         ids=lambda c: "k{}x{}_s{}_d{}_p{}".format(*c))
@pytest.mark.parametrize("c", [300, 130])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, BF],
                         ids=["float64", "float32", "bfloat16"])
def test_gather_of_one_small_image_splits_its_columns(case, c, dtype, monkeypatch):
    """One small image through our gather (without oneDNN or the tile kernel: float64, and
    CPUs without AVX512F) has fewer bands than GATHER_SPLIT_UNITS, so its GEMMs are split into
    groups of columns for the threads to share (C = 300: 160 and 140; 130: one group of all
    of them; stride 2: four phases, no split): within tolerance of the reference, the same
    bits on 1, 2 and 3 threads."""
    monkeypatch.setattr(cython_backend, "ONEDNN", "off")
    monkeypatch.setattr(cython_backend, "CONV_TILES", "off")
    used = spy(monkeypatch, cython_backend, "_use_gather")
    _on_1_2_3_threads(case, dtype, 13, h=7, w=6, c=c, oc=40)
    assert used == [True] * 3


@needs_onednn
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("n, hw, c, oc, budget", [(1, 9, 6, 9, None), (3, 5, 13, 21, 0),
                                                  (2, 3, 512, 512, None)],
                         ids=["one-image", "small-budget", "1MiB-filter"])
def test_float32_1x1_as_one_onednn_matmul(fmt, n, hw, c, oc, budget, monkeypatch):
    """With oneDNN, a float32 1x1, stride-1 conv of one image, or whose filter takes
    DIRECT_FILTER_BYTES (1 MiB: 512 x 512 float32 values) or more, is one multithreaded
    oneDNN matmul that reads the filter as its transposed operand (a C != OC filter read the
    wrong way round would not even give dx's shape): within tolerance of the float64
    reference, the same bits on 1, 2 and 3 threads."""
    _onednn(monkeypatch, "auto")
    if budget is not None:
        monkeypatch.setattr(cython_backend, "DIRECT_FILTER_BYTES", budget)
    used = spy(monkeypatch, cython_backend, "_use_direct")
    rng = np.random.default_rng(11)
    filt = rng.standard_normal((1, 1, c, oc)).astype(F32)
    nhwc = rng.standard_normal((n, hw, hw, oc)).astype(F32)
    dy = nhwc if fmt == "NHWC" else np.ascontiguousarray(nhwc.transpose(0, 3, 1, 2))
    sizes = [n, hw, hw, c] if fmt == "NHWC" else [n, c, hw, hw]
    kw = dict(strides=[1, 1, 1, 1], padding="VALID", data_format=fmt)
    outs = _same_bits_on((1, 2, 3), lambda: T.conv2d_backprop_input(sizes, filt, dy, **kw))
    assert used == [True] * 3
    f64 = np.float64
    ref = T.conv2d_backprop_input(sizes, filt.astype(f64), dy.astype(f64), backend="numpy", **kw)
    scale = T.conv2d_backprop_input(sizes, np.abs(filt.astype(f64)), np.abs(dy.astype(f64)),
                                    backend="numpy", **kw)
    assert outs[0].shape == ref.shape
    assert_close(outs[0], ref, scale, F32, CONV_TOL)


@needs_onednn
@pytest.mark.parametrize("dtype", [BF, np.float16], ids=["bfloat16", "float16"])
@pytest.mark.parametrize("n, hw, c, oc, filter_bytes, wide_values, takes", [
    (1, 9, 6, 9, 1 << 20, 1 << 22, True), (2, 3, 512, 512, 1 << 20, 1 << 22, True),
    (3, 5, 13, 21, 0, 1 << 22, True), (1, 9, 6, 9, 1 << 20, 9 * 9 * 15, True),
    (1, 9, 6, 9, 1 << 20, 9 * 9 * 15 - 1, False), (3, 5, 13, 21, 1 << 20, 1 << 22, False)],
    ids=["one-image", "1MiB-filter", "small-budget", "at-the-widened-values",
         "over-the-widened-values", "small-filter"])
def test_half_1x1_widened_to_float32_as_one_onednn_matmul(dtype, n, hw, c, oc, filter_bytes,
                                                           wide_values, takes, monkeypatch):
    """A float16 or bfloat16 1x1 conv that oneDNN multiplies widened to float32 takes
    float32's rule for one matmul over all its pixels (one image, or a filter of
    DIRECT_FILTER_BYTES in float32 or more) where its widened dy and dx take at most
    DIRECT_WIDE_VALUES (this one image's 9 x 9 x 15; one value less: the gather): bit for bit
    our float32 result on the widened inputs, rounded once, and the same bits on 1, 2 and 3
    threads."""
    _onednn(monkeypatch, "float32")
    monkeypatch.setattr(cython_backend, "DIRECT_FILTER_BYTES", filter_bytes)
    monkeypatch.setattr(cython_backend, "DIRECT_WIDE_VALUES", wide_values)
    rng = np.random.default_rng(12)
    filt = rng.standard_normal((1, 1, c, oc)).astype(dtype)
    dy = rng.standard_normal((n, hw, hw, oc)).astype(dtype)
    kw = dict(strides=[1, 1, 1, 1], padding="VALID")
    used = spy(monkeypatch, cython_backend, "_use_direct")
    outs = _same_bits_on((1, 2, 3),
                         lambda: T.conv2d_backprop_input([n, hw, hw, c], filt, dy, **kw))
    assert used == [takes] * 3
    if takes:
        ref32 = T.conv2d_backprop_input([n, hw, hw, c], filt.astype(F32), dy.astype(F32), **kw)
        assert outs[0].dtype == np.dtype(dtype)
        assert np.array_equal(outs[0].view(np.uint16), ref32.astype(dtype).view(np.uint16))


@needs_onednn
def test_float32_1x1_with_a_small_filter_keeps_the_gather(monkeypatch):
    """Two or more images of a float32 1x1 conv whose filter takes less than
    DIRECT_FILTER_BYTES (C4's 256 x 512: 512 KiB) keep the gather's single-threaded GEMMs
    (as fast or faster there, docs/performance.md); one byte less of budget, or one image,
    and they are one matmul."""
    _onednn(monkeypatch, "auto")
    used = spy(monkeypatch, cython_backend, "_use_direct")
    f = np.ones((1, 1, 256, 512), F32)
    T.conv2d_backprop_input([2, 2, 2, 256], f, np.ones((2, 2, 2, 512), F32), strides=[1] * 4,
                            padding="VALID")
    monkeypatch.setattr(cython_backend, "DIRECT_FILTER_BYTES", 256 * 512 * 4)
    got = T.conv2d_backprop_input([2, 2, 2, 256], f, np.ones((2, 2, 2, 512), F32),
                                  strides=[1] * 4, padding="VALID")
    monkeypatch.setattr(cython_backend, "DIRECT_FILTER_BYTES", 1 << 20)
    T.conv2d_backprop_input([1, 2, 2, 256], f, np.ones((1, 2, 2, 512), F32), strides=[1] * 4,
                            padding="VALID")
    assert used == [False, True, True]
    assert np.array_equal(got, np.full((2, 2, 2, 256), 512, F32))


@needs_onednn
@pytest.mark.parametrize("dtype", [BF, np.float16])
def test_half_1x1_leaves_the_matmul_where_onednn_would_split_its_sums(dtype, monkeypatch):
    """oneDNN 3.2 splits a bfloat16 or float16 matmul's sums among threads on AMX from 16
    threads on where K (OC) > 1024: such a 1x1 conv takes the gather, whose results do not
    depend on the thread count; with 15 threads, without AMX or with OC = 1024 it is one
    matmul. (The CPU's AMX is reported, not used: the results are checked elsewhere.)"""
    from tfcompat import _dnnl
    if not cython_backend._brgemm(np.dtype(dtype)):
        pytest.skip(f"oneDNN has no {np.dtype(dtype)} matmul kernel on this CPU (float16 needs "
                    "AVX512-FP16): the conv widens it, and the split cannot arise")
    _onednn(monkeypatch, "native")
    isa = [(True, True, True)]
    monkeypatch.setattr(_dnnl, "cpu_isa", lambda: isa[0])
    used = spy(monkeypatch, cython_backend, "_use_direct")
    old = T.get_num_threads()
    try:
        for threads, amx, oc in [(16, True, 1025), (15, True, 1025), (16, False, 1025),
                                 (16, True, 1024)]:
            isa[0] = (True, True, amx)
            T.set_num_threads(threads)
            T.conv2d_backprop_input([1, 1, 2, 3], np.ones((1, 1, 3, oc), dtype),
                                    np.ones((1, 1, 2, oc), dtype), strides=[1] * 4,
                                    padding="VALID")
    finally:
        T.set_num_threads(old)
    assert used == [False, True, True, True]


@needs_onednn
@pytest.mark.parametrize("nchw", [False, True], ids=["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype, half_gemm", ONEDNN_TYPES, ids=ONEDNN_IDS)
def test_a_2x2_stride_2_puts_each_tap_at_its_own_dx_position(dtype, half_gemm, nchw,
                                                              monkeypatch):
    """2x2 filter, stride 2, VALID (each dx element takes exactly one tap: the row phases
    whose GEMM writes dx rows whole): dy is 1 at (i, j) = (1, 2) of a 3x4 dy and 0 elsewhere,
    so dx[2 + a, 4 + b, c] = w[a, b, c, 0] and every other dx element is 0 (hand arithmetic;
    the filter's values are small integers, exact in every dtype)."""
    _onednn(monkeypatch, half_gemm)
    c, oc = 3, 2
    w = (np.arange(2 * 2 * c * oc).reshape(2, 2, c, oc) % 7 + 1).astype(dtype)
    got, want = _one_hot_dy(w, 1, 6, 8, nchw)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got.astype(np.float64), want)


def _one_hot_dy(w, n, h, wd, nchw, ch=0):
    """A VALID, stride-2 conv with filter w into n images of h x wd whose dy is 1 at (1, 2),
    channel ch, of the last image and 0 elsewhere: (got, want), want by hand arithmetic (each
    dx element takes at most one product): dx[2 + a, 4 + b, c] = w[a, b, c, ch], else 0."""
    fh, fw, c, oc = w.shape
    dy = np.zeros((n, (h - fh) // 2 + 1, (wd - fw) // 2 + 1, oc), w.dtype)
    dy[-1, 1, 2, ch] = 1
    want = np.zeros((n, h, wd, c), np.float64)
    want[-1, 2:2 + fh, 4:4 + fw, :] = w[:, :, :, ch].astype(np.float64)
    sizes, strides = [n, h, wd, c], [1, 2, 2, 1]
    if nchw:
        dy, want = dy.transpose(0, 3, 1, 2).copy(), want.transpose(0, 3, 1, 2)
        sizes, strides = [n, c, h, wd], [1, 1, 2, 2]
    got = T.conv2d_backprop_input(sizes, w, dy, strides=strides, padding="VALID",
                                  data_format="NCHW" if nchw else "NHWC")
    return got, want


HALF_ONEDNN_TYPES = [t for t in ONEDNN_TYPES if t[0] != np.float32]
HALF_ONEDNN_IDS = [i for t, i in zip(ONEDNN_TYPES, ONEDNN_IDS) if t[0] != np.float32]


@needs_onednn
@pytest.mark.parametrize("k", [2, 3], ids=["2x2_rows_merged", "3x3"])
@pytest.mark.parametrize("nchw", [False, True], ids=["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype, half_gemm", HALF_ONEDNN_TYPES, ids=HALF_ONEDNN_IDS)
def test_through_onednn_streams_a_large_dx_to_every_position(dtype, half_gemm, nchw, k,
                                                             monkeypatch):
    """A half-type dx of CONV_TILE_STREAM_BYTES or more from oneDNN's gather, each row rounded
    from oneDNN's float32 output with streaming stores (on CPUs with AVX512F): into the memory
    of a dx the call before (our col2im, which writes every value) filled with other values,
    and which the output pool hands back, a one-hot dy (_one_hot_dy) puts the taps of output
    channel 5 at their dx positions exactly, and zeros everywhere else; a 2x2 filter at stride
    2 (a GEMM per dy row that writes a dx row) and a 3x3 one (the band's rows rounded after
    its GEMMs). 128 x 128 images: dx is exactly 4 MiB, and a 2x2 filter's phases fill its
    rows whole."""
    c = 64
    w = (np.arange(k * k * c * 8).reshape(k, k, c, 8) % 11 - 5).astype(dtype)
    sizes = [2, c, 128, 128] if nchw else [2, 128, 128, c]
    oh = (128 - k) // 2 + 1
    dy = np.ones((2, 8, oh, oh) if nchw else (2, oh, oh, 8), dtype)
    kw = dict(strides=[1, 1, 2, 2] if nchw else [1, 2, 2, 1], padding="VALID",
              data_format="NCHW" if nchw else "NHWC")
    T.release_memory()
    monkeypatch.setattr(cython_backend, "ONEDNN", "off")
    monkeypatch.setattr(cython_backend, "CONV_TILES", "off")
    before = T.conv2d_backprop_input(sizes, w, dy, **kw)
    assert np.count_nonzero(before) > 0.8 * before.size
    del before
    _onednn(monkeypatch, half_gemm)
    used = spy(monkeypatch, cython_backend, "_onednn_gather")
    got, want = _one_hot_dy(w, 2, 128, 128, nchw, 5)
    assert used == [True]
    assert got.dtype == np.dtype(dtype) and got.nbytes >= _stream_bytes()
    np.testing.assert_array_equal(got.astype(np.float64), want)


@needs_onednn
@pytest.mark.parametrize("dtype, half_gemm, strides", [
    (BF, "native", (2, 2)), (BF, "float32", (1, 1)), (np.float16, "float32", (2, 2)),
    (np.float32, "auto", (2, 1))], ids=["bfloat16-s2", "bfloat16-as-f32-s1", "float16-as-f32-s2",
                                        "float32-s2x1"])
def test_through_onednn_streamed_dx_matches_reference(dtype, half_gemm, strides, rng,
                                                      monkeypatch):
    """Two 96 x 96 images of 128 channels through oneDNN's gather (a dx over
    CONV_TILE_STREAM_BYTES, its rows copied or rounded from oneDNN's output with streaming
    stores; float32 at strides (2, 1), whose rows are copied rather than written by the GEMM
    or placed pixel by pixel): within tolerance of the reference, the same bits on 1, 2 and 3
    threads."""
    _onednn(monkeypatch, half_gemm)
    used = spy(monkeypatch, cython_backend, "_onednn_gather")
    n, h, w, c, oc = 2, 96, 96, 128, 24
    oh, ow = -(-h // strides[0]), -(-w // strides[1])
    filt = rng.standard_normal((3, 3, c, oc))
    dy = rng.standard_normal((n, oh, ow, oc))
    kw = dict(strides=[1, *strides, 1], padding="SAME")
    ref = T.conv2d_backprop_input([n, h, w, c], filt.astype(dtype).astype(np.float64),
                                  dy.astype(dtype).astype(np.float64), backend="numpy", **kw)
    scale = T.conv2d_backprop_input([n, h, w, c], np.abs(filt), np.abs(dy), backend="numpy",
                                    **kw)

    def one():
        got = T.conv2d_backprop_input([n, h, w, c], filt.astype(dtype), dy.astype(dtype), **kw)
        assert_close(got, ref, scale, dtype, CONV_TOL)
        return got
    got = _same_bits_on((1, 2, 3), one)[0]
    assert used == [True] * 3
    assert got.nbytes >= _stream_bytes()


@pytest.mark.parametrize("nchw", [False, True], ids=["NHWC", "NCHW"])
def test_float64_gather_puts_each_tap_at_its_dx_position(nchw, monkeypatch):
    """One image in float64 takes our gather, whose filter taps are copied transposed (in
    16 x 16 tiles of 8-byte values where the CPU has AVX512F, as are NCHW's dy and dx): a
    one-hot dy (_one_hot_dy) on output channel 37 of 48 puts that channel's taps, C = 80, at
    their dx positions exactly, and nothing else anywhere."""
    used = spy(monkeypatch, cython_backend, "_use_gather")
    w = (np.arange(3 * 3 * 80 * 48).reshape(3, 3, 80, 48) % 13 - 6).astype(np.float64)
    got, want = _one_hot_dy(w, 1, 9, 9, nchw, 37)
    assert used == [True]
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, want)


@needs_onednn
@pytest.mark.parametrize("half_gemm", ["native", "float32"])
def test_float16_through_onednn_sums_in_float32(half_gemm, monkeypatch):
    """float16 products summed in float16 would stop at 2048 (2048 + 1 rounds back to 2048);
    in float32 the 9 taps x 512 channels of ones at an interior dx element sum to 4608, which
    float16 holds exactly (hand arithmetic; the edges take 6 or 4 taps: 3072, 2048)."""
    _onednn(monkeypatch, half_gemm)
    oc = 512
    dy = np.ones((2, 4, 5, oc), np.float16)
    filt = np.ones((3, 3, 2, oc), np.float16)
    got = T.conv2d_backprop_input([2, 4, 5, 2], filt, dy, strides=[1, 1, 1, 1], padding="SAME")
    want = np.full((2, 4, 5, 2), 4608.0)
    want[:, [0, -1], :, :] = 3072
    want[:, :, [0, -1], :] = 3072
    want[:, [0, 0, -1, -1], [0, -1, 0, -1], :] = 2048
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got.astype(np.float64), want)


@needs_onednn
def test_through_onednn_concurrent_calls_give_the_same_bits(monkeypatch):
    """Calls from several Python threads at once (each with its own oneDNN streams, memory
    objects and scratchpads; primitives shared) give what each gives alone."""
    import threading
    _onednn(monkeypatch, "native", 300)
    cases = [(3, 3, 2, 1, (1, 2, 0, 1)), (2, 2, 2, 1, (0, 0, 0, 0)), (3, 3, 1, 1, (1, 1, 1, 1))]
    dtypes = [BF, np.float32, np.float16]
    alone = [[_run(case, dt, np.random.default_rng(k), n=4, h=22, w=10, c=9, oc=12)[0]
              for k, case in enumerate(cases)] for dt in dtypes]
    bad = []

    def worker(seed):
        for i in range(12):
            k, d = (seed + i) % len(cases), (seed + i // 3) % len(dtypes)
            got = _run(cases[k], dtypes[d], np.random.default_rng(k), n=4, h=22, w=10, c=9,
                       oc=12)[0]
            if not np.array_equal(got.view(np.uint8), alone[d][k].view(np.uint8)):
                bad.append((seed, i, k, d))

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == []


@needs_onednn
@pytest.mark.parametrize("h, w", [(1, 1), (1, 5), (5, 1), (3, 2)])
@pytest.mark.parametrize("dtype, half_gemm", ONEDNN_TYPES, ids=ONEDNN_IDS)
def test_through_onednn_image_smaller_than_the_stride(h, w, dtype, half_gemm, rng, monkeypatch):
    """Some stride phases have no dx row or column (H or W below the stride): they have no
    GEMM and are skipped (hypothesis found W = 1, stride 2 once); with W below the stride
    oneDNN's gather is not taken (its row phases lay out sw phases as dx's row), and these
    shapes check that whatever runs instead."""
    _onednn(monkeypatch, half_gemm)
    got, ref, scale = _run((1, 2, 2, 1, (0, 0, 0, 1)), dtype, rng, n=2, h=h, w=w, c=1, oc=1)
    assert_close(got, ref, scale, dtype, CONV_TOL)
    got, ref, scale = _run((2, 3, 3, 1, (1, 0, 2, 1)), dtype, rng, n=3, h=h, w=w, c=3, oc=2)
    assert_close(got, ref, scale, dtype, CONV_TOL)


@needs_onednn
def test_bfloat16_through_onednn_leaves_openmp_settings_alone(rng, monkeypatch):
    """oneDNN's primitives are made under tfcompat's thread count, set on the calling thread
    only for that moment: the process's OpenMP setting is what it was."""
    _onednn(monkeypatch, "native")  # the 1x1 conv's matmul is made for k threads
    import ctypes
    gomp = ctypes.CDLL("libgomp.so.1")
    before = gomp.omp_get_max_threads()
    bf = ml_dtypes.bfloat16
    for k in (1, 3):
        T.set_num_threads(k)
        T.conv2d_backprop_input([2, 5, 7, 6], rng.standard_normal((1, 1, 6, 9)).astype(bf),
                                rng.standard_normal((2, 5, 7, 9)).astype(bf),
                                strides=[1, 1, 1, 1], padding="VALID")
        T.conv2d_backprop_input([2, 9, 8, 3], rng.standard_normal((3, 3, 3, 4)).astype(bf),
                                rng.standard_normal((2, 5, 4, 4)).astype(bf),
                                strides=[1, 2, 2, 1], padding="SAME")
        assert gomp.omp_get_max_threads() == before


# The tile kernel (tiles.h, conv.pxi's _tile_phase_band): float32 with C a multiple of 16 on a
# CPU with AVX512F. Without oneDNN (TFCOMPAT_ONEDNN=off here) every such conv but a 1x1,
# stride-1, unpadded one takes it. C = 16 (one block of one vector), 48 and 80 (a block of 64
# and one of 16); OC = 3 (many taps in one step), 20 and 130 (chunks of 128 and 2 channels);
# widths 9 and 23 (each row alone, tiles of 5 and 4, of 6, 6, 6 and 5), 7 and 4 (rows whose
# tiles would be 4 pixels or fewer: several rows in one run of tiles, a tile may span two);
# strides above the filter size leave phases no tap reaches.
def _tiles_missing():
    from tfcompat import _simd
    if not _simd.kernels.conv_tiles_built():
        return "the tile kernel is not compiled in (not x86-64 with GCC or Clang)"
    if not _simd.cpu_has("AVX512F"):
        return "this CPU has no AVX512F"
    return None


needs_tiles = pytest.mark.skipif(_tiles_missing() is not None, reason=str(_tiles_missing()))


def _tiles(monkeypatch, choice="_use_tiles"):
    """Through our kernels without oneDNN; returns the list of the answers of ``choice``
    (_use_tiles, or _use_oc_lanes for the tile kernel for few channels), one per call, to show
    which calls took the tile kernel."""
    monkeypatch.setattr(cython_backend, "ONEDNN", "off")
    monkeypatch.setattr(cython_backend, "CONV_TILES", "auto")
    return spy(monkeypatch, cython_backend, choice)


def _direct(case):
    fh, fw, s, _, pads = case
    return (fh, fw, s, pads) == (1, 1, 1, (0, 0, 0, 0))


@needs_tiles
@pytest.mark.parametrize("c, oc, w", [(16, 3, 9), (80, 130, 23), (48, 20, 7), (80, 130, 4),
                                     (16, 3, 1), (40, 9, 9), (100, 33, 7), (16, 5, 16)])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "k{}x{}_s{}_d{}_p{}".format(*c))
def test_tiles_match_reference(case, c, oc, w, rng, monkeypatch):
    used = _tiles(monkeypatch)
    got, ref, scale = _run(case, np.float32, rng, n=2, h=13, w=w, c=c, oc=oc)
    assert used == [not _direct(case)]
    assert got.dtype == np.float32
    assert_close(got, ref, scale, np.float32, CONV_TOL)


@needs_tiles
@pytest.mark.parametrize("case", [(3, 3, 2, 1, (1, 2, 0, 1)), (5, 3, 1, 2, (3, 0, 2, 2)),
                                  (2, 2, 2, 1, (0, 0, 0, 0))],
                         ids=lambda c: "k{}x{}_s{}_d{}_p{}".format(*c))
@pytest.mark.parametrize("w", [23, 7])
def test_tiles_same_bits_on_any_thread_count(case, w, monkeypatch):
    used = _tiles(monkeypatch)
    monkeypatch.setattr(cython_backend, "GATHER_VALUES", 3000)   # several bands per phase
    _same_bits_on((1, 2, 3, 5), lambda: _run(case, np.float32, np.random.default_rng(5), n=5,
                                             h=22, w=w, c=48, oc=20)[0])
    assert all(used) and len(used) == 4


@needs_tiles
@pytest.mark.parametrize("case", [(3, 3, 1, 1, (1, 1, 1, 1)), (3, 3, 2, 1, (1, 2, 0, 1))],
                         ids=lambda c: "k{}x{}_s{}_d{}_p{}".format(*c))
def test_tiles_one_image_shares_its_bands_between_threads(case, monkeypatch):
    used = _tiles(monkeypatch)
    monkeypatch.setattr(cython_backend, "GATHER_VALUES", 3000)
    _on_1_2_3_threads(case, np.float32, 9, h=22, w=10, c=32, oc=5)
    assert all(used) and len(used) == 3


@needs_tiles
@pytest.mark.parametrize("c, oc, ch", [(80, 3, 0), (41, 3, 0), (80, 512, 300), (150, 512, 511)],
                         ids=["C80", "C41", "C80_OC512", "C150_OC512"])
@pytest.mark.parametrize("nchw", [False, True], ids=["NHWC", "NCHW"])
def test_tiles_put_each_tap_at_its_dx_position(nchw, c, oc, ch, monkeypatch):
    """3x3 filter, stride 2, VALID, C = 80 (blocks of 64 and 16 channels), 41 (a block of 48,
    the last 7 of them zeros) or 150 (64, 64 and 22 in a block of 32), two 9x9 images: a
    one-hot dy (_one_hot_dy) puts the filter's taps of output channel ch at their dx
    positions (small integers, exact in float32), and nothing else anywhere. With OC = 512
    the filter runs in groups of columns whose taps each worker copies from the filter
    itself."""
    used = _tiles(monkeypatch)
    w = (np.arange(3 * 3 * c * oc).reshape(3, 3, c, oc) % 11 - 5).astype(np.float32)
    got, want = _one_hot_dy(w, 2, 9, 9, nchw, ch)
    assert used == [True]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.astype(np.float64), want)


def _stream_bytes():
    from tfcompat import _simd
    return _simd.kernels.CONV_TILE_STREAM_BYTES


@needs_tiles
@pytest.mark.parametrize("c", [64, 80])
@pytest.mark.parametrize("nchw", [False, True], ids=["NHWC", "NCHW"])
def test_tiles_stream_a_large_dx_to_every_position(nchw, c, monkeypatch):
    """A float32 dx of CONV_TILE_STREAM_BYTES or more whose C is a multiple of 16 (64: one
    block of 64 channels; 80: blocks of 64 and 16) is stored with streaming stores: into the
    memory of a dx the call before (the col2im, which writes every value with plain stores)
    filled with other values, and which the output pool hands back, a one-hot dy
    (_one_hot_dy) puts the taps of output channel 5 at their dx positions exactly, and zeros
    everywhere else."""
    used = _tiles(monkeypatch)
    w = (np.arange(3 * 3 * c * 8).reshape(3, 3, c, 8) % 11 - 5).astype(np.float32)
    sizes = [2, c, 129, 129] if nchw else [2, 129, 129, c]
    dy = np.ones((2, 8, 64, 64) if nchw else (2, 64, 64, 8), np.float32)
    kw = dict(strides=[1, 1, 2, 2] if nchw else [1, 2, 2, 1], padding="VALID",
              data_format="NCHW" if nchw else "NHWC")
    T.release_memory()
    monkeypatch.setattr(cython_backend, "CONV_TILES", "off")
    before = T.conv2d_backprop_input(sizes, w, dy, **kw)
    assert np.count_nonzero(before) > 0.9 * before.size
    del before
    monkeypatch.setattr(cython_backend, "CONV_TILES", "auto")
    got, want = _one_hot_dy(w, 2, 129, 129, nchw, 5)
    assert used == [False, True]
    assert got.nbytes >= _stream_bytes()
    np.testing.assert_array_equal(got.astype(np.float64), want)


@needs_tiles
@pytest.mark.parametrize("case", [(3, 3, 1, 1, (1, 1, 1, 1)), (3, 3, 2, 1, (1, 2, 0, 1))],
                         ids=lambda c: "k{}x{}_s{}_d{}_p{}".format(*c))
def test_tiles_streamed_dx_matches_reference(case, monkeypatch):
    """Two 96 x 96 images of 64 channels (a dx over CONV_TILE_STREAM_BYTES, stored with
    streaming stores): within tolerance of the reference, the same bits on 1, 2 and 3
    threads."""
    used = _tiles(monkeypatch)
    got = _on_1_2_3_threads(case, np.float32, 6, n=2, h=96, w=96, c=64, oc=24)
    assert used == [True] * 3
    assert got.nbytes >= _stream_bytes()


@needs_onednn
@needs_tiles
@pytest.mark.parametrize("n", [1, 60], ids=["small", "streamed"])
@pytest.mark.parametrize("dtype, half_gemm", HALF_ONEDNN_TYPES, ids=HALF_ONEDNN_IDS)
def test_through_onednn_rows_rounded_in_avx512_keep_the_bits(dtype, half_gemm, n, rng,
                                                             monkeypatch):
    """oneDNN's float32 rows rounded into a half type's dx in AVX-512 instructions (on CPUs
    with AVX512F; streamed with 60 images, a dx over CONV_TILE_STREAM_BYTES) give the bits of
    the scalar rounding the kernel uses without AVX512F: NaN, infinities, sums past the type's
    largest value and every row's first and last values outside whole 64-byte lines (rows of
    13 x 37 values) included."""
    _onednn(monkeypatch, half_gemm)
    big = 3e4 if dtype == np.float16 else 3e38
    filt = (rng.standard_normal((3, 3, 37, 20)) * 2).astype(dtype)
    dy = rng.standard_normal((n, 41, 13, 20))
    dy[..., 0, 3] = big          # sums past the largest value: infinities
    dy[..., 5, 4] = np.nan
    dy[..., 7, 5] = np.inf
    dy = dy.astype(dtype)
    kw = dict(strides=[1, 2, 1, 1], padding="SAME")

    fast = T.conv2d_backprop_input([n, 81, 13, 37], filt, dy, **kw)
    assert (fast.nbytes >= _stream_bytes()) == (n == 60)
    with monkeypatch.context() as m:
        real = cython_backend._cpu_has
        m.setattr(cython_backend, "_cpu_has", lambda name: name != "AVX512F" and real(name))
        scalar = T.conv2d_backprop_input([n, 81, 13, 37], filt, dy, **kw)
    wide = fast.astype(np.float32)
    assert np.isnan(wide).any() and np.isinf(wide).any()
    np.testing.assert_array_equal(fast.view(np.uint16), scalar.view(np.uint16))


@needs_tiles
@pytest.mark.parametrize("case", [(3, 3, 1, 1, (1, 1, 1, 1)), (3, 3, 2, 1, (1, 2, 0, 1)),
                                  (5, 3, 1, 2, (3, 0, 2, 2)), (3, 3, 4, 1, (0, 0, 0, 0))],
                         ids=lambda c: "k{}x{}_s{}_d{}_p{}".format(*c))
@pytest.mark.parametrize("c", [80, 150])
@pytest.mark.parametrize("oc", [512, 1000])
def test_tiles_with_a_filter_over_the_cache_budget(case, c, oc, monkeypatch):
    """OC = 512 or 1000 and 9 or 15 taps: a block of 64 columns of the filter's taps takes 1.2
    MB or more, over the tile kernel's 1 MiB budget, so the threads run C = 80's two column
    blocks (64 and 16), or C = 150's three (64, 64 and 22 in a block of 32), one after the
    other over all of their images (stride 4: the phases no tap reaches are zeroed block by
    block); each worker copies its blocks' taps (OC = 512), or, over 2 MiB a block (OC =
    1000), all are copied before the threads start. Within tolerance of the reference, the
    same bits on 1, 2 and 3 threads, with several bands per image."""
    used = _tiles(monkeypatch)
    monkeypatch.setattr(cython_backend, "GATHER_VALUES", 30000)
    _on_1_2_3_threads(case, np.float32, 4, n=3, h=8, w=7, c=c, oc=oc)
    assert used == [True] * 3


@needs_tiles
@pytest.mark.parametrize("case", [(3, 3, 1, 1, (1, 1, 1, 1)), (3, 3, 2, 1, (1, 2, 0, 1))],
                         ids=lambda c: "k{}x{}_s{}_d{}_p{}".format(*c))
@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF],
                         ids=["float32", "float16", "bfloat16"])
def test_tiles_one_image_with_a_filter_over_the_cache_budget(case, dtype, monkeypatch):
    """One small image (one band a phase) with OC = 512 and C = 150: the filter's three
    groups of columns are the units the threads share, each worker copying the taps of the
    groups it runs. Within tolerance of the reference, the same bits on 1, 2 and 3 threads
    (a half type widened and rounded once, as on any other tiles)."""
    used = _tiles(monkeypatch)
    _on_1_2_3_threads(case, dtype, 8, h=6, w=7, c=150, oc=512)
    assert used == [True] * 3


@needs_tiles
@pytest.mark.parametrize("case", [(3, 3, 1, 1, (1, 1, 1, 1)), (3, 3, 2, 1, (1, 2, 0, 1)),
                                  (7, 7, 2, 1, (3, 3, 3, 3))],
                         ids=lambda c: "k{}x{}_s{}_d{}_p{}".format(*c))
@pytest.mark.parametrize("c", [11, 12, 23])
def test_tiles_one_image_of_few_channels(case, c, monkeypatch):
    """One image whose C is not a multiple of 16 (11: one vector of channels, 5 of its lanes
    zeros; fewer channels take the tiles for few channels), without oneDNN: the tile kernel,
    within tolerance of the reference, the same bits on 1, 2 and 3 threads."""
    used = _tiles(monkeypatch)
    monkeypatch.setattr(cython_backend, "GATHER_VALUES", 3000)
    _on_1_2_3_threads(case, np.float32, 6, h=19, w=17, c=c, oc=10)
    assert used == [True] * 3


# (images, C): whether a float32 conv takes the tile kernel (_use_tiles): multiples of 16;
# with two or more images, C whose tiles' channel lanes are at least two thirds channels
# (12 of 16, 22 of 32, 33 of 48), not 8 of 16 nor 20 of 32; one image, any C (with the tiles
# for few channels, which take C <= 10 at stride 1 first, held to C <= 6 here)
TILE_TAKES = [((2, 16), True), ((2, 8), False), ((2, 12), True), ((2, 20), False),
              ((2, 22), True), ((2, 33), True), ((2, 57), True), ((1, 7), True), ((1, 20), True)]


@needs_tiles
@pytest.mark.parametrize("onednn", [pytest.param("off", id="no-onednn"),
                                    pytest.param("auto", id="onednn", marks=needs_onednn)])
def test_tiles_take_c_not_a_multiple_of_16_by_the_share_of_channel_lanes(onednn, rng,
                                                                          monkeypatch):
    """TILE_TAKES (3x3, stride 1, SAME), with oneDNN or without (those the tile kernel leaves
    run oneDNN's gather or the col2im); each result within tolerance of the reference."""
    used = _tiles(monkeypatch)
    monkeypatch.setattr(cython_backend, "ONEDNN", onednn)
    monkeypatch.setattr(cython_backend, "OC_LANES_STRIDE1_MAX_C", 6)
    for (n, c), _ in TILE_TAKES:
        got, ref, scale = _run((3, 3, 1, 1, (1, 1, 1, 1)), np.float32, rng, n=n, h=6, w=9,
                               c=c, oc=4)
        assert_close(got, ref, scale, np.float32, CONV_TOL)
    assert used == [takes for _, takes in TILE_TAKES]


# (N, H, W, C, OC) of a 3x3 bfloat16 conv, and whether it keeps the channel tile kernel where
# oneDNN multiplies bfloat16 in bfloat16: one 7x7 image is one band of oneDNN's gather (its
# default band values), so one thread would run it; two such images, or one 14x14 image (four
# bands), share their work between two; two or more images take it from C = 9 on
# (NATIVE_BF16_MIN_C; float32 from 24)
NATIVE_BF16_TAKES = [((1, 7, 7, 32, 512), True), ((2, 7, 7, 32, 512), False),
                     ((1, 14, 14, 32, 512), False), ((4, 6, 9, 32, 16), False),
                     ((3, 6, 9, 12, 16), False)]


@needs_tiles
@needs_onednn
def test_native_bfloat16_takes_onednn_gather_from_two_units_of_work(rng, monkeypatch):
    """On a CPU where oneDNN multiplies bfloat16 in bfloat16 (AVX512-BF16's two products per
    instruction, reported here), a bfloat16 conv leaves the tile kernel, which multiplies in
    float32, for oneDNN's gather where its work fills two of the gather's units, and two or
    more images take that gather from 9 input channels on (NATIVE_BF16_TAKES); each result within tolerance of the reference, the same bits on 1-3
    threads."""
    from tfcompat import _dnnl
    if not cython_backend._brgemm(np.dtype(BF)):
        pytest.skip("oneDNN has no bfloat16 matmul kernel on this CPU")
    used = spy(monkeypatch, cython_backend, "_use_tiles")
    monkeypatch.setattr(cython_backend, "ONEDNN", "auto")
    monkeypatch.setattr(cython_backend, "CONV_TILES", "auto")
    monkeypatch.setattr(cython_backend, "HALF_GEMM", "auto")
    monkeypatch.setattr(_dnnl, "cpu_isa", lambda: (True, False, False))
    for n, h, w, c, oc in (shape for shape, _ in NATIVE_BF16_TAKES):
        case = (3, 3, 1, 1, (1, 1, 1, 1))
        got, ref, scale = _run(case, BF, rng, n=n, h=h, w=w, c=c, oc=oc)
        assert got.dtype == BF
        assert_close(got, ref, scale, BF, CONV_TOL)
        _same_bits_on((1, 2, 3), lambda: _run(case, BF, np.random.default_rng(1), n=n, h=h,
                                              w=w, c=c, oc=oc)[0])
    # each shape asked once per call: its own, then on 1, 2 and 3 threads
    assert used == [takes for _, takes in NATIVE_BF16_TAKES for _ in range(4)]


def _oc_lanes_everywhere(monkeypatch):
    """_tiles for the tile kernel for few channels, which every dtype then takes on every
    geometry up to its 10 channels, however few products each dx value takes."""
    used = _tiles(monkeypatch, "_use_oc_lanes")
    monkeypatch.setattr(cython_backend, "OC_LANES_HALF_WORK", 0)
    monkeypatch.setattr(cython_backend, "OC_LANES_HALF_STRIDED_MAX_C", 10)
    monkeypatch.setattr(cython_backend, "OC_LANES_MAX_C", 10)
    return used


@needs_tiles
@pytest.mark.parametrize("c, oc, w, n", [(1, 16, 9, 2), (3, 64, 23, 1), (4, 32, 7, 3),
                                         (6, 48, 4, 2), (5, 16, 1, 1), (2, 32, 13, 2),
                                         (1, 6, 9, 2), (3, 24, 23, 1), (6, 21, 7, 3),
                                         (2, 1, 13, 2), (4, 40, 4, 2), (5, 17, 10, 1),
                                         (7, 16, 9, 2), (8, 24, 13, 1), (10, 33, 5, 2)])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "k{}x{}_s{}_d{}_p{}".format(*c))
@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF], ids=["float32", "float16",
                                                                     "bfloat16"])
def test_tiles_of_output_channels_match_reference(case, c, oc, w, n, dtype, rng, monkeypatch):
    """The tile kernel for few channels (C <= 10: tiles.h's tfc_oc_rows) on every stride,
    dilation, padding and filter size, rows of 1 to 23 pixels (a short last tile, a pixel's
    taps outside dy, images narrower than the stride), OC a multiple of 16 or not (LeNet's
    1 -> 6, 3 -> 24, a single output channel: a last vector read by masked loads, which the
    16-bit types read as pairs and, for an odd count, one value); float16 and bfloat16
    widened as dy is read and rounded once."""
    used = _oc_lanes_everywhere(monkeypatch)
    got, ref, scale = _run(case, dtype, rng, n=n, h=13, w=w, c=c, oc=oc)
    assert used == [not _direct(case)]
    assert got.dtype == np.dtype(dtype)
    assert_close(got, ref, scale, dtype, CONV_TOL)


@needs_tiles
@pytest.mark.parametrize("c, w, n", [(1, 150, 1), (2, 70, 1), (3, 100, 2), (4, 16, 1),
                                     (8, 33, 2), (10, 17, 1)])
@pytest.mark.parametrize("oc", [1, 2, 3, 4, 5, 7, 8])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "k{}x{}_s{}_d{}_p{}".format(*c))
def test_tiles_of_pixels_match_reference(case, oc, c, w, n, rng, monkeypatch):
    """float32 with 1 to 8 output channels on the tile kernel for few channels (tiles.h's
    tfc_px_row: 16 // OC dx pixels a vector, 1 to 8 vectors a tile): rows of 16 to 150 pixels,
    so whole tiles, a short last vector and pixels whose taps read outside dy at both ends, on
    every stride, dilation, padding and filter size."""
    used = _oc_lanes_everywhere(monkeypatch)
    got, ref, scale = _run(case, np.float32, rng, n=n, h=9, w=w, c=c, oc=oc)
    assert used == [not _direct(case)]
    assert_close(got, ref, scale, np.float32, CONV_TOL)


@needs_tiles
@pytest.mark.parametrize("c, w, n", [(1, 150, 1), (3, 100, 2), (5, 45, 1), (10, 17, 2)])
@pytest.mark.parametrize("oc", [1, 2, 3, 4, 6, 8])
@pytest.mark.parametrize("case", CASES[::4], ids=lambda c: "k{}x{}_s{}_d{}_p{}".format(*c))
@pytest.mark.parametrize("dtype", [np.float16, BF], ids=["float16", "bfloat16"])
def test_tiles_of_pixels_in_half_types_match_reference(case, oc, c, w, n, dtype, rng,
                                                       monkeypatch):
    """test_tiles_of_pixels_match_reference for float16 and bfloat16: dy widened as it is read
    (the lanes at a row's ends one by one), each dx value rounded once."""
    used = _oc_lanes_everywhere(monkeypatch)
    got, ref, scale = _run(case, dtype, rng, n=n, h=9, w=w, c=c, oc=oc)
    assert used == [not _direct(case)]
    assert got.dtype == np.dtype(dtype)
    assert_close(got, ref, scale, dtype, CONV_TOL)


@needs_tiles
@pytest.mark.parametrize("case", [(3, 3, 2, 1, (1, 2, 0, 1)), (5, 3, 1, 2, (3, 0, 2, 2))],
                         ids=lambda c: "k{}x{}_s{}_d{}_p{}".format(*c))
@pytest.mark.parametrize("dtype, oc", [(np.float32, 32), (BF, 32), (np.float32, 21),
                                       (np.float16, 21), (np.float32, 1),
                                       (np.float32, 4), (BF, 2), (np.float32, 5)],
                         ids=["float32", "bfloat16", "float32_partial_vector",
                              "float16_partial_vector", "float32_one_output_channel",
                              "float32_pixels_of_4_output_channels",
                              "bfloat16_pixels_of_2_output_channels",
                              "float32_pixels_of_5_output_channels"])
def test_tiles_of_output_channels_same_bits_on_any_thread_count(case, dtype, oc, monkeypatch):
    used = _oc_lanes_everywhere(monkeypatch)
    monkeypatch.setattr(cython_backend, "GATHER_VALUES", 3000)
    _on_1_2_3_threads(case, dtype, 4, n=3, h=22, w=17, c=3, oc=oc)
    assert used == [True] * 3


@needs_tiles
@pytest.mark.parametrize("oc, ch", [(16, 0), (20, 18), (1, 0), (8, 5), (3, 2)],
                         ids=["OC16", "OC20_partial_vector", "OC1_pixels_in_the_lanes",
                              "OC8_pixels_in_the_lanes", "OC3_pixels_in_15_lanes"])
def test_tiles_of_output_channels_put_each_tap_at_its_dx_position(oc, ch, monkeypatch):
    """C = 3, OC = 16, 20, 1, 8 or 3 (dx pixels in the lanes: tfc_px_row): a one-hot dy
    (_one_hot_dy) on output channel ch (18: in the partial last vector of OC = 20) puts the
    filter's taps of that channel at their dx positions, exactly (one product and zeros in each
    sum)."""
    used = _tiles(monkeypatch, "_use_oc_lanes")
    w = (np.arange(3 * 3 * 3 * oc).reshape(3, 3, 3, oc) % 11 - 5).astype(np.float32)
    got, want = _one_hot_dy(w, 2, 9, 9, False, ch)
    assert used == [True]
    np.testing.assert_array_equal(got.astype(np.float64), want)


@needs_tiles
def test_tiles_of_output_channels_take_few_channels_and_whole_vectors(rng, monkeypatch):
    """Which convs take the tile kernel for few channels: C <= OC_LANES_MAX_C = 6 (float32 at
    stride 1: 10), any OC, not a 1x1 stride-1 unpadded conv, and for the half types 96
    products or more per dx value (3x3, stride 1, OC 16: 144, OC 10: 90; stride 2, OC 32: 72;
    OC 48: 108), 32 per input channel with C = 1 or 2 (3x3 stride 1, OC 4: 36; stride 2, OC
    16: 36), or up to 8 output channels (tfc_px_row; with a stride 1, 2, 4 or 8), and, with a
    stride, C <= 3; each result within tolerance of the reference."""
    used = _tiles(monkeypatch, "_use_oc_lanes")
    same = (3, 3, 1, 1, (1, 1, 1, 1))
    takes = [(same, 3, 64, F32, True), (same, 6, 16, F32, True), (same, 7, 16, BF, False),
             (same, 3, 10, F32, True), (same, 3, 24, BF, True), (same, 3, 10, np.float16, False),
             ((1, 1, 1, 1, (0, 0, 0, 0)), 3, 16, F32, False),
             ((1, 1, 2, 1, (0, 0, 0, 0)), 3, 16, F32, True),
             # float16 and bfloat16 from OC_LANES_HALF_WORK = 96 products per dx value (32
             # per input channel with C = 1, 2), with a stride for C <= 3 only
             (same, 3, 16, BF, True), ((3, 3, 2, 1, (1, 1, 1, 1)), 3, 32, BF, False),
             ((3, 3, 2, 1, (1, 1, 1, 1)), 3, 48, np.float16, True),
             ((3, 3, 2, 1, (1, 1, 1, 1)), 4, 48, BF, False), (same, 1, 4, BF, True),
             ((3, 3, 2, 1, (1, 1, 1, 1)), 2, 16, np.float16, False),
             # 7-10 channels: float32 at stride 1 only
             (same, 8, 16, F32, True), (same, 10, 40, F32, True), (same, 11, 16, F32, False),
             ((3, 3, 2, 1, (1, 1, 1, 1)), 8, 16, F32, False), (same, 8, 16, BF, False),
             ((3, 3, 2, 1, (1, 1, 1, 1)), 4, 48, F32, True),
             # up to 8 output channels (dx pixels in the lanes): the half types whatever
             # their products per dx value, with a stride for 1, 2, 4 or 8 of them and
             # C <= 3 only
             (same, 1, 1, BF, True), (same, 6, 2, np.float16, True), (same, 3, 3, BF, True),
             ((3, 3, 2, 1, (1, 1, 1, 1)), 2, 8, np.float16, True),
             ((3, 3, 2, 1, (1, 1, 1, 1)), 2, 3, np.float16, False),
             ((3, 3, 2, 1, (1, 1, 1, 1)), 4, 4, BF, False), (same, 3, 9, BF, False)]
    for case, c, oc, dtype, _ in takes:
        got, ref, scale = _run(case, dtype, rng, n=2, h=6, w=9, c=c, oc=oc)
        assert_close(got, ref, scale, dtype, CONV_TOL)
    assert used == [t for *_, t in takes]


def test_without_avx512_the_tile_kernel_is_not_used(rng, monkeypatch):
    """On a CPU without AVX512F (NumPy's report, made to say so here) a float32 conv with C a
    multiple of 16 runs the other strategies, within tolerance of the reference."""
    used = _tiles(monkeypatch)
    monkeypatch.setattr(cython_backend, "_cpu_has", lambda feature: False)
    got, ref, scale = _run((3, 3, 2, 1, (1, 2, 0, 1)), np.float32, rng, n=2, h=13, w=9, c=32,
                           oc=5)
    assert used == [False]
    assert_close(got, ref, scale, np.float32, CONV_TOL)


@needs_tiles
@pytest.mark.parametrize("choice, c, oc", [("_use_tiles", 16, 3), ("_use_oc_lanes", 3, 16),
                                           ("_use_oc_lanes", 3, 21), ("_use_oc_lanes", 3, 1),
                                           ("_use_oc_lanes", 3, 2)],
                         ids=["channel_tiles", "few_channels", "few_channels_partial_vector",
                              "one_output_channel", "two_output_channels"])
@pytest.mark.parametrize("kx", [0, 2], ids=["last_pixel", "first_pixel"])
def test_tiles_leave_out_taps_outside_dy(kx, choice, c, oc, monkeypatch):
    """An infinite filter value on the middle row's tap kx (3x3, padding 1), output channel
    OC - 1 (with OC = 21, in the few-channel tiles' partial last vector), which reads
    outside dy at a row's last (kx = 0) or first (kx = 2) pixel: those pixels take nothing
    from it, as in the col2im and the NumPy reference (and TF 2.21 on these shapes), instead
    of 0 x inf = NaN, on either tile kernel. dy > 0, so every dx value is +inf (the tap reads
    inside dy) or finite, never NaN."""
    used = _tiles(monkeypatch, choice)
    (fh, fw, s), (pt, pb, pl, pr) = (3, 3, 1), (1, 1, 1, 1)
    n, h, w = 2, 7, 9     # width 9: channel tiles of 5 and 4 pixels, few-channel ones of 8 and 1
    rng = np.random.default_rng(3)
    filt = rng.standard_normal((fh, fw, c, oc)).astype(np.float32)
    filt[1, kx, :, -1] = np.inf
    oh, ow = (h + pt + pb - fh) // s + 1, (w + pl + pr - fw) // s + 1
    dy = (np.abs(rng.standard_normal((n, oh, ow, oc))) + 0.5).astype(np.float32)
    kw = dict(strides=[1, s, s, 1], padding="EXPLICIT",
              explicit_paddings=[0, 0, pt, pb, pl, pr, 0, 0])
    got = T.conv2d_backprop_input([n, h, w, c], filt, dy, **kw)
    ref = T.conv2d_backprop_input([n, h, w, c], filt.astype(np.float64), dy.astype(np.float64),
                                  backend="numpy", **kw)
    assert used == [True]
    assert not np.isnan(got).any()
    inf = np.isinf(ref)
    assert inf.any() and not inf.all()
    np.testing.assert_array_equal(np.isinf(got), inf)
    # where the tap reads outside dy, dx is the conv of the rest of the filter
    rest = np.where(np.isinf(filt), 0, filt).astype(np.float64)
    ref = T.conv2d_backprop_input([n, h, w, c], rest, dy.astype(np.float64), backend="numpy", **kw)
    scale = T.conv2d_backprop_input([n, h, w, c], np.abs(rest), dy.astype(np.float64),
                                    backend="numpy", **kw)
    assert_close(got[~inf], ref[~inf], scale[~inf], np.float32, CONV_TOL)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("n, hw, c, oc", [(2000, 1, 8, 8), (30, 3, 20, 12), (9, 7, 4, 5)])
def test_1x1_of_many_small_images_runs_images_together(n, hw, c, oc, dtype, rng):
    """A 1x1, stride-1 conv of small images is the 1x1 conv of one image k times as tall
    (_images_per_band), with or without oneDNN (our col2im took one GEMM per image): here 16
    GEMMs of 125 images, 5 of 6, and 7x7 images one by one, against the NumPy reference, with
    the same bits on 1, 2 and 3 threads."""
    got, ref, scale = _run((1, 1, 1, 1, (0, 0, 0, 0)), dtype, rng, n=n, h=hw, w=hw, c=c, oc=oc)
    assert_close(got, ref, scale, dtype, CONV_TOL)
    dy = rng.standard_normal((n, hw, hw, oc)).astype(dtype)
    filt = rng.standard_normal((1, 1, c, oc)).astype(dtype)
    _same_bits_on((1, 2, 3), lambda: T.conv2d_backprop_input(
        [n, hw, hw, c], filt, dy, strides=[1, 1, 1, 1], padding="VALID"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("n, hw, c, oc, k", [(2, 64, 3, 32, 16), (3, 40, 1, 20, 8), (2, 30, 2, 7, 4),
                                             (1, 48, 3, 16, 16)])
def test_patch_embedding_filters(n, hw, c, oc, k, dtype, rng):
    """A k x k filter at stride k (a vision transformer's patch embedding: each dx pixel takes
    one tap), few input channels: from two images on the col2im runs it, one image the tile
    kernel for few channels; against the NumPy reference, with the same bits on 1, 2 and 3
    threads."""
    got, ref, scale = _run((k, k, k, 1, (0, 0, 0, 0)), dtype, rng, n=n, h=hw, w=hw, c=c, oc=oc)
    assert_close(got, ref, scale, dtype, CONV_TOL)
    dy = rng.standard_normal((n, hw // k, hw // k, oc)).astype(dtype)
    filt = rng.standard_normal((k, k, c, oc)).astype(dtype)
    _same_bits_on((1, 2, 3), lambda: T.conv2d_backprop_input(
        [n, hw, hw, c], filt, dy, strides=[1, k, k, 1], padding="VALID"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("nchw", [False, True], ids=["NHWC", "NCHW"])
@pytest.mark.parametrize("n, h, c, oc, fh, sh, sw, d, pads", [
    (1, 5000, 4, 4, 9, 1, 1, 1, (4, 4, 0, 0)), (3, 300, 64, 32, 5, 2, 1, 1, (2, 2, 0, 0)),
    (2, 1000, 1, 16, 31, 4, 4, 1, (0, 0, 0, 3)), (2, 97, 3, 8, 3, 1, 1, 3, (3, 0, 0, 0)),
    (4, 50, 20, 1, 4, 3, 2, 1, (1, 2, 0, 1))])
def test_images_one_pixel_wide_run_as_rows(n, h, c, oc, fh, sh, sw, d, pads, nchw, dtype, rng,
                                           monkeypatch):
    """A conv over images one pixel wide (W = fw = 1, no left pad: a 1-D conv along H) runs
    as the same conv over images one pixel tall (_as_rows: the kernels took such images a
    pixel at a time), with H's stride, dilation and pads (and a right pad below W's stride,
    which leaves OW = 1) moved to W: against the NumPy reference, NHWC and NCHW, with the same
    bits on 1, 2 and 3 threads."""
    taken = spy(monkeypatch, cython_backend, "_as_rows")
    pt, pb, pl, pr = pads
    oh = (h + pt + pb - (fh - 1) * d - 1) // sh + 1
    filt = rng.standard_normal((fh, 1, c, oc)).astype(dtype)
    dy = rng.standard_normal((n, oh, 1, oc)).astype(dtype)
    sizes, strides, dil = [n, h, 1, c], [1, sh, sw, 1], [1, d, 1, 1]
    exp = [0, 0, pt, pb, pl, pr, 0, 0]
    if nchw:
        dy = dy.transpose(0, 3, 1, 2).copy()
        sizes, strides, dil = [n, c, h, 1], [1, 1, sh, sw], [1, 1, d, 1]
        exp = [0, 0, 0, 0, pt, pb, pl, pr]
    kw = dict(strides=strides, padding="EXPLICIT", explicit_paddings=exp, dilations=dil,
              data_format="NCHW" if nchw else "NHWC")
    call = lambda: T.conv2d_backprop_input(sizes, filt, dy, **kw)   # noqa: E731
    got = call()
    f64 = lambda a: a.astype(np.float64)   # noqa: E731
    ref = T.conv2d_backprop_input(sizes, f64(filt), f64(dy), backend="numpy", **kw)
    scale = T.conv2d_backprop_input(sizes, np.abs(f64(filt)), np.abs(f64(dy)), backend="numpy",
                                    **kw)
    assert taken[0] is not None
    assert got.dtype == np.dtype(dtype)
    assert_close(got, ref, scale, dtype, CONV_TOL)
    _same_bits_on((1, 2, 3), call)
