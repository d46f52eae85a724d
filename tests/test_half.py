"""float16 and bfloat16: the kernels' own conversions equal NumPy's and ml_dtypes' (so TF's),
and half-type results are the float32 computation rounded once."""
import tracemalloc

import ml_dtypes
import numpy as np
import pytest

import tfcompat as T
from tfcompat import _kernels as baseline
from tfcompat import _simd
from tfcompat.conv import STRATEGIES, current_machine

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


def _widening_strategies():
    """The conv strategies that compute bfloat16 in float32 here: all but oneDNN's where
    oneDNN multiplies bfloat16 natively, and those this machine has."""
    m = current_machine()
    bf16 = np.dtype(ml_dtypes.bfloat16)
    return [s.name for s in STRATEGIES
            if not (s.name.startswith("onednn") and m.gemm_type(bf16) in (None, bf16))
            and not (s.name.endswith("tiles") and not m.tiles) and s.name != "onednn-matmul"]


@pytest.mark.parametrize("strategy", _widening_strategies())
@pytest.mark.parametrize("w_value, dy_value", [(1e-39, 1e30), (1e-20, 1e-20)])
def test_conv_bfloat16_keeps_subnormals_in_float32(w_value, dy_value, strategy, monkeypatch):
    """Computed in float32, bfloat16 keeps subnormal filter values and subnormal sums: each
    interior dx value of a 3x3 filter over 16 output channels is 144 equal products, exact in
    float32 (8-bit significands, well inside its range), rounded once. (Where oneDNN multiplies
    bfloat16 in bfloat16 they are zeros, as in TF: tests/test_against_tf.py.) Four input
    channels, which every strategy takes."""
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", strategy)
    bf16 = ml_dtypes.bfloat16
    w = np.full((3, 3, 4, 16), w_value, bf16)
    dy = np.full((2, 8, 8, 16), dy_value, bf16)
    got = T.conv2d_backprop_input([2, 8, 8, 4], w, dy, strides=[1, 1, 1, 1], padding="SAME")
    exact = 144 * float(w.flat[0]) * float(dy.flat[0])
    assert exact != 0
    interior = got[:, 1:7, 1:7, :].astype(np.float64)
    assert np.array_equal(interior, np.full(interior.shape, float(bf16(exact))))


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


needs_tiles = pytest.mark.skipif(not current_machine().tiles,
                                 reason="the tile kernels need AVX512F and a build with them")


@needs_tiles
@pytest.mark.parametrize("module", BUILDS[:1], ids=["baseline"])
@pytest.mark.parametrize("dtype,bf", HALVES, ids=["float16", "bfloat16"])
def test_channel_tiles_round_hard_values_like_the_scalar_rounding(module, dtype, bf, rng,
                                                                 monkeypatch):
    """The channel tile kernel rounds its float32 sums to a half type in AVX-512 registers:
    bit for bit what the scalar rounding (tested against NumPy and ml_dtypes above) gives for
    the float32 result of the same kernel, on sums that overflow, underflow to subnormals and
    zero, fall halfway between two values, and are infinite or NaN (from NaN, from 0 x inf,
    and from a NaN with a payload)."""
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", "channel-tiles")
    scale = 2.0 ** rng.integers(-30, 30, (2, 6, 5, 2)) if bf else 2.0 ** rng.integers(-14, 9, (2, 6, 5, 2))
    dy = (rng.integers(-64, 65, (2, 6, 5, 2)) / 16 * scale).astype(dtype)
    dy[0, 0, 0, 0], dy[0, 1, 1, 1], dy[1, 2, 3, 0] = np.inf, np.nan, -np.inf
    # a NaN with a payload, which the products carry and the rounding drops
    dy.view(np.uint16)[1, 4, 2, 1] = 0xffc3 if bf else 0xfe05
    filt = (rng.integers(-64, 65, (3, 3, 16, 2)) / 32).astype(dtype)
    filt[1, 1, 3, 0] = 0    # 0 x inf at some dx values: NaN
    kw = dict(strides=[1, 2, 2, 1], padding="SAME")
    got = T.conv2d_backprop_input([2, 12, 10, 16], filt, dy, **kw)
    ref32 = T.conv2d_backprop_input([2, 12, 10, 16], filt.astype(np.float32),
                                    dy.astype(np.float32), **kw)
    want = np.empty(ref32.size, np.uint16)
    module.from_float32(np.ascontiguousarray(ref32).reshape(-1), want, bf, 1)
    flat = ref32.reshape(-1)
    assert np.isnan(flat).any() and np.isinf(flat).any()
    assert np.array_equal(got.view(np.uint16).reshape(-1), want)


@needs_tiles
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_channel_tiles_widen_a_large_filters_hard_values_exactly(dtype, rng, monkeypatch):
    """A filter over the channel tiles' L2 budget (3x3, C = 80, OC = 496: two groups of
    columns), whose taps each worker widens to float32 as it copies them: subnormal, the
    largest finite and infinite filter values are widened exactly, bit for bit our float32
    result on the widened inputs, rounded once (any NaN matching any NaN)."""
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", "channel-tiles")
    info = ml_dtypes.finfo(dtype)
    filt = (rng.integers(-64, 65, (3, 3, 80, 496)) / 32).astype(dtype)
    # dx channel 5 sums only subnormal products; channel 9 takes the largest value and an
    # infinity, 70 a negative infinity
    filt[:, :, 5, :] = (rng.integers(1, 8, (3, 3, 496)) * info.smallest_subnormal).astype(dtype)
    filt[0, 1, 9, 17], filt[2, 2, 9, 300], filt[1, 0, 70, 495] = info.max, np.inf, -np.inf
    dy = (rng.integers(-8, 9, (1, 4, 5, 496)) / 4).astype(dtype)
    got = T.conv2d_backprop_input([1, 4, 5, 80], filt, dy, strides=[1, 1, 1, 1], padding="SAME")
    ref32 = T.conv2d_backprop_input([1, 4, 5, 80], filt.astype(np.float32),
                                    dy.astype(np.float32), strides=[1, 1, 1, 1], padding="SAME")
    assert (ref32[..., 5] != 0).any() and np.isinf(ref32).any()
    with np.errstate(over="ignore"):
        want = ref32.astype(dtype)
    _same_or_both_nan(got.view(np.uint16), want.view(np.uint16), dtype)


@needs_tiles
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_channel_tiles_widen_dy_afresh_for_each_call(dtype, monkeypatch):
    """A half type on the channel tiles widens dy to float32 a window of rows at a time, kept
    by each worker from band to band: here 16 of an image's 40 dy rows (64 x 512 values a
    row), so the window moves within the image. Two calls of the same shapes with different dy,
    each on 1, 2 and 3 threads: each is its own float32 result rounded once, whatever ran
    before it."""
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", "channel-tiles")
    filt = np.random.default_rng(1).standard_normal((3, 3, 16, 512)).astype(dtype)
    kw = dict(strides=[1, 1, 1, 1], padding="SAME")
    for seed in (2, 3):
        dy = np.random.default_rng(seed).standard_normal((1, 40, 64, 512)).astype(dtype)
        ref = T.conv2d_backprop_input([1, 40, 64, 16], filt.astype(np.float32),
                                      dy.astype(np.float32), **kw).astype(dtype)
        for threads in (1, 2, 3):
            with _num_threads(threads):
                got = T.conv2d_backprop_input([1, 40, 64, 16], filt, dy, **kw)
            assert np.array_equal(got.view(np.uint16), ref.view(np.uint16))


@needs_tiles
def test_channel_tiles_widen_at_most_a_window_per_worker(monkeypatch):
    """A large image's bands are cut so that each worker's widened window stays at
    CONV_TILE_WIDE_VALUES float32 values (2 MiB): one 256 x 512 image of 64 channels (its
    rows alone would take 34 rows, 4.3 MiB, a worker), on 8 threads, allocates less than
    8 x 2.5 MiB beyond dx; and the result is still the float32 one (bands of other heights)
    rounded once."""
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", "channel-tiles")
    rng = np.random.default_rng(4)
    dy = rng.standard_normal((1, 256, 512, 64)).astype(ml_dtypes.bfloat16)
    filt = rng.standard_normal((3, 3, 16, 64)).astype(ml_dtypes.bfloat16)
    kw = dict(strides=[1, 1, 1, 1], padding="SAME")
    with _num_threads(8):
        T.conv2d_backprop_input([1, 256, 512, 16], filt, dy, **kw)
        T.release_memory()
        tracemalloc.start()
        got = T.conv2d_backprop_input([1, 256, 512, 16], filt, dy, **kw)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak - got.nbytes < 8 * 2.5 * 2 ** 20, peak - got.nbytes
    ref = T.conv2d_backprop_input([1, 256, 512, 16], filt.astype(np.float32),
                                  dy.astype(np.float32), **kw).astype(ml_dtypes.bfloat16)
    assert np.array_equal(got.view(np.uint16), ref.view(np.uint16))
