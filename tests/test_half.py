"""float16 and bfloat16: the kernels' own conversions equal NumPy's and ml_dtypes' (so TF's),
and half-type results are the float32 computation rounded once."""
import tracemalloc

import ml_dtypes
import numpy as np
import pytest

import tfcompat as T
from tfcompat import _kernels as baseline
from tfcompat import _simd
from tfcompat.backends import cython_backend

BUILDS = [baseline] + ([_simd._load_avx2()] if _simd._cpu_has_avx2() else [])
HALVES = [(np.float16, False), (ml_dtypes.bfloat16, True)]


def _same_or_both_nan(got_bits, ref_bits, dtype):
    """Bit equality, except that any NaN matches any NaN (NaN payloads are not kept)."""
    got_nan = np.isnan(got_bits.view(dtype).astype(np.float32))
    ref_nan = np.isnan(ref_bits.view(dtype).astype(np.float32))
    assert np.array_equal(got_nan, ref_nan)
    bad = (got_bits != ref_bits) & ~ref_nan
    assert not bad.any(), (got_bits[bad][:5], ref_bits[bad][:5])


@pytest.mark.parametrize("module", BUILDS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
@pytest.mark.parametrize("dtype,bf", HALVES, ids=["float16", "bfloat16"])
def test_widening_every_bit_pattern(module, dtype, bf):
    bits = np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16)
    got = np.empty(bits.size, np.float32)
    module.to_float32(bits, got, bf, 2)
    ref = bits.view(dtype).astype(np.float32)
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got.view(np.uint32)[~nan], ref.view(np.uint32)[~nan])


def _hard_floats(rng):
    """Random float32 bit patterns, every float16 and bfloat16 value with its neighbours and the
    halfway points between it and the next (ties to even), and the special values."""
    parts = [rng.integers(0, 2 ** 32, 2_000_000, dtype=np.uint64).astype(np.uint32)]
    every = np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16)
    for dtype, half_ulp in ((np.float16, 1 << 12), (ml_dtypes.bfloat16, 1 << 15)):
        base = every.view(dtype).astype(np.float32).view(np.uint32).astype(np.int64)
        for delta in (-1, 0, 1, half_ulp - 1, half_ulp, half_ulp + 1):
            parts.append(((base + delta) % 2 ** 32).astype(np.uint32))
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65519.996, 65520, 2 ** -25,
                        -(2 ** -25), 3 * 2 ** -26, 2 ** -14, 1e-40, -1e-45,
                        np.finfo(np.float32).max], np.float32)
    return np.concatenate(parts + [special.view(np.uint32)]).view(np.float32)


@pytest.mark.parametrize("module", BUILDS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
@pytest.mark.parametrize("dtype,bf", HALVES, ids=["float16", "bfloat16"])
def test_rounding_matches_numpy_and_ml_dtypes(module, dtype, bf, rng):
    f = _hard_floats(rng)
    got = np.empty(f.size, np.uint16)
    module.from_float32(f, got, bf, 2)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = f.astype(dtype).view(np.uint16)
    _same_or_both_nan(got, ref, dtype)


CONV_CASES = [  # (x shape NHWC, filter HWIO, stride, padding)
    ((3, 17, 14, 5), (3, 3, 5, 6), 2, "SAME"),
    ((2, 9, 8, 12), (1, 1, 12, 7), 1, "VALID"),     # the 1x1 direct GEMM
    ((1, 11, 13, 4), (2, 2, 4, 3), 2, "VALID"),     # one image: the multi-threaded path
    ((4, 10, 10, 3), (5, 5, 3, 8), 1, "SAME"),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "x{}_w{}_s{}_{}".format(*c))
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_conv_half_is_float32_rounded_once(case, fmt, dtype, rng, monkeypatch):
    """Half types are widened exactly, computed as float32 and rounded once: bit for bit our
    float32 result on the widened inputs, rounded by NumPy / ml_dtypes, by the same strategy:
    the tile kernel for few channels where the half type took it (each dx value's products in
    the same order), else without the tile kernels, which take float32 alone there."""
    xs, ws, s, pad = case
    n, h, w, _ = xs
    oh = -(-h // s) if pad == "SAME" else (h - ws[0]) // s + 1
    ow = -(-w // s) if pad == "SAME" else (w - ws[1]) // s + 1
    filt = rng.standard_normal(ws).astype(dtype)
    dy = rng.standard_normal((n, oh, ow, ws[3])).astype(dtype)
    sizes = list(xs)
    if fmt == "NCHW":
        dy = dy.transpose(0, 3, 1, 2)
        sizes = [n, xs[3], h, w]
    strides = [1, s, s, 1] if fmt == "NHWC" else [1, 1, s, s]
    kw = dict(strides=strides, padding=pad, data_format=fmt)
    took, real = [], cython_backend._use_oc_lanes
    monkeypatch.setattr(cython_backend, "_use_oc_lanes",
                        lambda *a: took.append(real(*a)) or took[-1])
    got = T.conv2d_backprop_input(sizes, filt, dy, **kw)
    half_took = bool(took and took[0])     # a half-type 1x1 asks nothing: one GEMM
    if not half_took:
        monkeypatch.setattr(cython_backend, "CONV_TILES", "off")
    ref32 = T.conv2d_backprop_input(sizes, filt.astype(np.float32), dy.astype(np.float32), **kw)
    assert took[-1] == half_took
    assert got.dtype == np.dtype(dtype) and got.shape == ref32.shape
    assert np.array_equal(got.view(np.uint16), ref32.astype(dtype).view(np.uint16))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_conv_half_same_bits_on_any_thread_count(dtype, rng):
    filt = rng.standard_normal((3, 3, 6, 5)).astype(dtype)
    dy = rng.standard_normal((5, 8, 8, 5)).astype(dtype)
    outs = []
    for threads in (1, 2, 3, 4):
        with _num_threads(threads):
            outs.append(T.conv2d_backprop_input([5, 16, 16, 6], filt, dy, strides=[1, 2, 2, 1],
                                                padding="SAME"))
    for o in outs[1:]:
        assert np.array_equal(o.view(np.uint16), outs[0].view(np.uint16))


class _num_threads:
    def __init__(self, n):
        self.n = n

    def __enter__(self):
        self.old = T.get_num_threads()
        T.set_num_threads(self.n)

    def __exit__(self, *exc):
        T.set_num_threads(self.old)


def test_conv_half_keeps_no_float32_copy_of_dx(rng):
    """Rows are rounded as they are finished: the call's extra memory (per-thread image
    buffers) stays well below one float32 copy of dx."""
    filt = rng.standard_normal((2, 2, 16, 16)).astype(np.float16)
    dy = rng.standard_normal((16, 48, 48, 16)).astype(np.float16)
    T.release_memory()
    tracemalloc.start()
    out = T.conv2d_backprop_input([16, 96, 96, 16], filt, dy, strides=[1, 2, 2, 1],
                                  padding="VALID")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    dx32 = out.size * 4
    assert peak - out.nbytes < dx32 / 2, (peak - out.nbytes, dx32)
