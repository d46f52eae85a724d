"""The conv's strategies on hand-checked cases (each dx value exact: one product, or sums whose
value hand arithmetic gives), on hard values (infinities, NaN, sums past a type's range), on
large outputs stored past the caches, and from several Python threads at once; and the
default strategy on shapes whose rewrites (images folded, one pixel wide as rows) it takes.
Every strategy that can run a case here is tried, forced through TFCOMPAT_CONV_STRATEGY."""
import ctypes
import threading

import ml_dtypes
import numpy as np
import pytest

import tfcompat as T
from tfcompat.conv import STRATEGIES, current_machine
from tfcompat.conv.problem import conv_problem, functional_attrs

from helpers import CONV_TOL, assert_close
from test_conv_grid import same_bits_on

BF, F16, F32, F64 = ml_dtypes.bfloat16, np.float16, np.float32, np.float64
MACHINE = current_machine()


def runnable(sizes, filt, dy, kw, names=None):
    """The strategies (of ``names``, or all) that can run this call here."""
    attrs = functional_attrs(sizes, filt, dy, kw["strides"], kw["padding"],
                             kw.get("explicit_paddings", []), kw.get("data_format", "NHWC"),
                             kw.get("dilations", [1, 1, 1, 1]))
    p = conv_problem({"dy": dy, "filter": filt}, attrs)
    p = p.as_rows() or p
    return [s.name for s in STRATEGIES if (names is None or s.name in names)
            and s.cannot(p, MACHINE, 7, s.params) is None]


def strategy_params(dtypes, shape=((2, 9, 9, 3), (3, 3, 3, 2), 2, "VALID"), names=None):
    """pytest params (strategy, dtype) for every strategy that can run ``shape`` in each
    dtype here."""
    (n, h, w, c), (fh, fw, _, oc), s, pad = shape
    out = []
    for dt in dtypes:
        oh = (h - fh) // s + 1 if pad == "VALID" else -(-h // s)
        ow = (w - fw) // s + 1 if pad == "VALID" else -(-w // s)
        filt = np.zeros((fh, fw, c, oc), dt)
        dy = np.zeros((n, oh, ow, oc), dt)
        kw = dict(strides=[1, s, s, 1], padding=pad)
        for name in runnable([n, h, w, c], filt, dy, kw, names):
            out.append(pytest.param(name, dt, id=f"{name}-{np.dtype(dt)}"))
    return out


def one_hot(w, n, h, wd, nchw, ch=0):
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


ALL = (F32, BF, F16, F64)


@pytest.mark.parametrize("nchw", [False, True], ids=["NHWC", "NCHW"])
@pytest.mark.parametrize("strategy, dtype", strategy_params(ALL, ((1, 6, 8, 3), (2, 2, 3, 2),
                                                                   2, "VALID")))
def test_2x2_stride_2_puts_each_tap_at_its_own_dx_position(strategy, dtype, nchw,
                                                           monkeypatch):
    """2x2 filter, stride 2, VALID (each dx element takes exactly one tap; oneDNN's row phases
    merge): the filter's small integers, exact in every dtype, at their dx positions."""
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", strategy)
    w = (np.arange(2 * 2 * 3 * 2).reshape(2, 2, 3, 2) % 7 + 1).astype(dtype)
    got, want = one_hot(w, 1, 6, 8, nchw)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got.astype(np.float64), want)


# (C, OC, output channel ch): blocks of 64 and 16 channels; 41 in a block of 48 (7 zeros);
# OC 512, whose filter the channel tiles run in groups of columns (C 80, 150: 64 + 64 + 22)
ONE_HOT = [(80, 3, 0), (41, 3, 0), (80, 512, 300), (150, 512, 511), (3, 48, 37), (3, 20, 18)]


def _one_hot_params():
    out = []
    for c, oc, ch in ONE_HOT:
        for name, dt in [p.values for p in strategy_params((F32, F64), ((2, 9, 9, c),
                                                                       (3, 3, c, oc), 2,
                                                                       "VALID"))]:
            out.append(pytest.param(name, dt, c, oc, ch,
                                    id=f"{name}-{np.dtype(dt)}-C{c}_OC{oc}"))
    return out


@pytest.mark.parametrize("nchw", [False, True], ids=["NHWC", "NCHW"])
@pytest.mark.parametrize("strategy, dtype, c, oc, ch", _one_hot_params())
def test_3x3_stride_2_puts_each_tap_at_its_dx_position(strategy, dtype, c, oc, ch, nchw,
                                                       monkeypatch):
    """3x3 filter, stride 2, VALID, two 9x9 images: a one-hot dy puts the filter's taps of
    output channel ch at their dx positions (small integers, exact), and nothing else."""
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", strategy)
    w = (np.arange(3 * 3 * c * oc).reshape(3, 3, c, oc) % 11 - 5).astype(dtype)
    got, want = one_hot(w, 2, 9, 9, nchw, ch)
    np.testing.assert_array_equal(got.astype(np.float64), want)


@pytest.mark.parametrize("strategy, dtype", strategy_params((F16,), ((2, 4, 5, 2),
                                                                     (3, 3, 2, 512), 1,
                                                                     "SAME")))
def test_float16_sums_in_float32(strategy, dtype, monkeypatch):
    """float16 products summed in float16 would stop at 2048 (2048 + 1 rounds back to 2048);
    in float32 the 9 taps x 512 channels of ones at an interior dx element sum to 4608, which
    float16 holds exactly (hand arithmetic; the edges take 6 or 4 taps: 3072, 2048)."""
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", strategy)
    oc = 512
    dy = np.ones((2, 4, 5, oc), dtype)
    filt = np.ones((3, 3, 2, oc), dtype)
    got = T.conv2d_backprop_input([2, 4, 5, 2], filt, dy, strides=[1, 1, 1, 1], padding="SAME")
    want = np.full((2, 4, 5, 2), 4608.0)
    want[:, [0, -1], :, :] = 3072
    want[:, :, [0, -1], :] = 3072
    want[:, [0, 0, -1, -1], [0, -1, 0, -1], :] = 2048
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got.astype(np.float64), want)


# the strategies that leave out a tap reading outside dy (as TF 2.21 and the NumPy reference
# do); the gathers multiply it by a gathered zero (docs/semantics.md §4)
SKIPS_TAPS_OUTSIDE = ("lane-tiles", "channel-tiles", "col2im")


def _taps_params():
    out = []
    for c, oc in [(16, 3), (3, 16), (3, 21), (3, 1), (3, 2)]:
        for name in runnable([2, 7, 9, c], np.zeros((3, 3, c, oc), F32),
                             np.zeros((2, 7, 9, oc), F32), dict(strides=[1] * 4, padding="SAME"),
                             SKIPS_TAPS_OUTSIDE):
            out.append(pytest.param(name, c, oc, id=f"{name}-C{c}_OC{oc}"))
    return out


@pytest.mark.parametrize("kx", [0, 2], ids=["last_pixel", "first_pixel"])
@pytest.mark.parametrize("strategy, c, oc", _taps_params())
def test_taps_outside_dy_are_left_out(strategy, c, oc, kx, monkeypatch):
    """An infinite filter value on the middle row's tap kx (3x3, padding 1), output channel
    OC - 1, which reads outside dy at a row's last (kx = 0) or first (kx = 2) pixel: those
    pixels take nothing from it, as in the NumPy reference (and TF 2.21 on these shapes),
    instead of 0 x inf = NaN. dy > 0, so every dx value is +inf (the tap reads inside dy) or
    finite, never NaN."""
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", strategy)
    n, h, w = 2, 7, 9
    rng = np.random.default_rng(3)
    filt = rng.standard_normal((3, 3, c, oc)).astype(F32)
    filt[1, kx, :, -1] = np.inf
    dy = (np.abs(rng.standard_normal((n, h, w, oc))) + 0.5).astype(F32)
    kw = dict(strides=[1, 1, 1, 1], padding="SAME")
    got = T.conv2d_backprop_input([n, h, w, c], filt, dy, **kw)
    ref = T.conv2d_backprop_input([n, h, w, c], filt.astype(F64), dy.astype(F64),
                                  backend="numpy", **kw)
    assert not np.isnan(got).any()
    inf = np.isinf(ref)
    assert inf.any() and not inf.all()
    np.testing.assert_array_equal(np.isinf(got), inf)
    rest = np.where(np.isinf(filt), 0, filt).astype(F64)
    ref = T.conv2d_backprop_input([n, h, w, c], rest, dy.astype(F64), backend="numpy", **kw)
    scale = T.conv2d_backprop_input([n, h, w, c], np.abs(rest), dy.astype(F64),
                                    backend="numpy", **kw)
    assert_close(got[~inf], ref[~inf], scale[~inf], F32, CONV_TOL)


STREAM_BYTES = 4 << 20   # dx from which the kernels store past the caches


@pytest.mark.parametrize("k", [2, 3], ids=["2x2", "3x3"])
@pytest.mark.parametrize("nchw", [False, True], ids=["NHWC", "NCHW"])
@pytest.mark.parametrize("strategy, dtype", strategy_params(
    (F32, BF, F16), ((2, 130, 130, 64), (3, 3, 64, 8), 2, "VALID"),
    ("channel-tiles", "onednn-gather")))
def test_a_large_dx_is_written_at_every_position(strategy, dtype, nchw, k, monkeypatch):
    """A dx of 4 MiB or more, which the channel tiles (float32) and oneDNN's gather store with
    streaming stores (on CPUs with AVX512F): into the memory of a dx the call before (the
    col2im, which writes every value) filled with other values, and which the output pool
    hands back, a one-hot dy puts the taps of output channel 5 at their dx positions exactly
    and zeros everywhere else."""
    c = 64
    w = (np.arange(k * k * c * 8).reshape(k, k, c, 8) % 11 - 5).astype(dtype)
    size = 130 if dtype == F32 else 182    # dx of 8.5 MB and 8.5 MB
    sizes = [2, c, size, size] if nchw else [2, size, size, c]
    oh = (size - k) // 2 + 1
    dy = np.ones((2, 8, oh, oh) if nchw else (2, oh, oh, 8), dtype)
    kw = dict(strides=[1, 1, 2, 2] if nchw else [1, 2, 2, 1], padding="VALID",
              data_format="NCHW" if nchw else "NHWC")
    T.release_memory()
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", "col2im")
    before = T.conv2d_backprop_input(sizes, w, dy, **kw)
    assert np.count_nonzero(before) > 0.8 * before.size
    del before
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", strategy)
    got, want = one_hot(w, 2, size, size, nchw, 5)
    assert got.nbytes >= STREAM_BYTES
    np.testing.assert_array_equal(got.astype(np.float64), want)


@pytest.mark.parametrize("case", [((3, 3), (1, 1)), ((3, 3), (2, 1)), ((2, 2), (2, 2))],
                         ids=["k3_s1", "k3_s2x1", "k2_s2"])
@pytest.mark.parametrize("strategy, dtype", strategy_params(
    (F32, BF, F16), ((2, 96, 96, 128), (3, 3, 128, 24), 1, "SAME"),
    ("channel-tiles", "onednn-gather")))
def test_a_large_dx_matches_reference(strategy, dtype, case, monkeypatch):
    """Two 96 x 96 images of 128 channels (a dx over 4 MiB, stored past the caches): within
    tolerance of the reference, the same bits on 1, 2 and 3 threads."""
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", strategy)
    (fh, fw), (sh, sw) = case
    n, h, w, c, oc = 2, 96, 96, 128, 24
    oh, ow = -(-h // sh), -(-w // sw)
    rng = np.random.default_rng(6)
    filt = rng.standard_normal((fh, fw, c, oc))
    dy = rng.standard_normal((n, oh, ow, oc))
    kw = dict(strides=[1, sh, sw, 1], padding="SAME")
    ref = T.conv2d_backprop_input([n, h, w, c], filt.astype(dtype).astype(F64),
                                  dy.astype(dtype).astype(F64), backend="numpy", **kw)
    scale = T.conv2d_backprop_input([n, h, w, c], np.abs(filt), np.abs(dy), backend="numpy",
                                    **kw)
    got = same_bits_on((1, 2, 3), lambda: T.conv2d_backprop_input(
        [n, h, w, c], filt.astype(dtype), dy.astype(dtype), **kw))
    assert got.nbytes >= STREAM_BYTES
    assert_close(got, ref, scale, dtype, CONV_TOL)


def _widened_here():
    """The half types each strategy computes in float32 here (every strategy but oneDNN's
    where oneDNN multiplies that type natively): (strategy, dtype) params."""
    out = []
    for dt in (F16, BF):
        gemm = MACHINE.gemm_type(np.dtype(dt))
        for s in STRATEGIES:
            if s.name.startswith("onednn") and gemm in (None, np.dtype(dt)):
                continue
            if s.name.endswith("tiles") and not MACHINE.tiles:
                continue
            out.append((s.name, dt))
    return out


HALF_CASES = [  # (x shape NHWC, filter HWIO, stride, padding)
    ((3, 17, 14, 5), (3, 3, 5, 6), 2, "SAME"),
    ((2, 9, 8, 12), (1, 1, 12, 7), 1, "VALID"),
    ((1, 9, 8, 12), (1, 1, 12, 7), 1, "VALID"),
    ((1, 11, 13, 4), (2, 2, 4, 3), 2, "VALID"),
    ((4, 10, 10, 3), (5, 5, 3, 8), 1, "SAME"),
    ((2, 9, 11, 16), (3, 3, 16, 5), 2, "SAME"),
    ((1, 7, 6, 20), (5, 3, 20, 9), 1, "SAME"),
    ((3, 6, 7, 48), (3, 3, 48, 70), 1, "VALID"),
    # filters over the channel tiles' L2 budget, in groups of columns that the workers copy
    # and widen (OC not a multiple of 16: the last 16 x 16 tiles copied one value at a time)
    ((1, 5, 6, 80), (3, 3, 80, 500), 1, "SAME"),
    ((2, 7, 8, 72), (3, 3, 72, 470), 2, "SAME"),
]


def _half_params():
    out = []
    for strategy, dtype in _widened_here():
        for case in HALF_CASES:
            xs, ws, s, pad = case
            oh = -(-xs[1] // s) if pad == "SAME" else (xs[1] - ws[0]) // s + 1
            ow = -(-xs[2] // s) if pad == "SAME" else (xs[2] - ws[1]) // s + 1
            if runnable(list(xs), np.zeros(ws, dtype), np.zeros((xs[0], oh, ow, ws[3]), dtype),
                        dict(strides=[1, s, s, 1], padding=pad), (strategy,)):
                out.append(pytest.param(strategy, dtype, case, id=f"{strategy}-"
                                        f"{np.dtype(dtype)}-x{xs}_w{ws}_s{s}_{pad}"))
    return out


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("strategy, dtype, case", _half_params())
def test_half_is_float32_rounded_once(strategy, dtype, case, fmt, monkeypatch):
    """Where a strategy computes a half type in float32 (widened exactly, rounded once): bit
    for bit its float32 result on the widened inputs, rounded by ml_dtypes."""
    xs, ws, s, pad = case
    n, h, w, _ = xs
    oh = -(-h // s) if pad == "SAME" else (h - ws[0]) // s + 1
    ow = -(-w // s) if pad == "SAME" else (w - ws[1]) // s + 1
    rng = np.random.default_rng(7)
    filt = rng.standard_normal(ws).astype(dtype)
    dy = rng.standard_normal((n, oh, ow, ws[3])).astype(dtype)
    sizes = list(xs)
    if fmt == "NCHW":
        dy = dy.transpose(0, 3, 1, 2)
        sizes = [n, xs[3], h, w]
    kw = dict(strides=[1, s, s, 1] if fmt == "NHWC" else [1, 1, s, s], padding=pad,
              data_format=fmt)
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", strategy)
    got = T.conv2d_backprop_input(sizes, filt, dy, **kw)
    ref32 = T.conv2d_backprop_input(sizes, filt.astype(F32), dy.astype(F32), **kw)
    assert got.dtype == np.dtype(dtype) and got.shape == ref32.shape
    with np.errstate(over="ignore"):
        want = ref32.astype(dtype)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("n", [1, 60], ids=["small", "streamed"])
@pytest.mark.parametrize("strategy, dtype", [p for p in _widened_here()
                                             if p[0] in ("onednn-gather", "channel-tiles")])
def test_half_rounding_of_hard_values(strategy, dtype, n, monkeypatch):
    """A strategy's float32 rows rounded to a half type (in AVX-512 instructions where the
    CPU has them; streamed with 60 images, a dx over 4 MiB) give ml_dtypes' bits: NaN,
    infinities, sums past the type's largest value and every row's first and last values
    outside whole 64-byte lines (rows of 13 x 37 values) included."""
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", strategy)
    rng = np.random.default_rng(8)
    big = 3e4 if dtype == F16 else 3e38
    filt = (rng.standard_normal((3, 3, 37, 20)) * 2).astype(dtype)
    dy = rng.standard_normal((n, 41, 13, 20))
    dy[..., 0, 3] = big          # sums past the largest value: infinities
    dy[..., 5, 4] = np.nan
    dy[..., 7, 5] = np.inf
    dy = dy.astype(dtype)
    kw = dict(strides=[1, 2, 1, 1], padding="SAME")
    got = T.conv2d_backprop_input([n, 81, 13, 37], filt, dy, **kw)
    ref32 = T.conv2d_backprop_input([n, 81, 13, 37], filt.astype(F32), dy.astype(F32), **kw)
    assert (got.nbytes >= STREAM_BYTES) == (n == 60)
    assert np.isnan(ref32).any() and np.isinf(ref32).any()
    with np.errstate(over="ignore", invalid="ignore"):
        want = ref32.astype(dtype)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def _concurrent_calls(strategy):
    """The calls of the concurrency test that ``strategy`` can run here."""
    calls = []
    for k, (xs, ws, s) in enumerate([((5, 9, 8, 9), (3, 3, 9, 12), 2),
                                      ((4, 8, 10, 9), (2, 2, 9, 12), 2),
                                      ((4, 9, 10, 9), (3, 3, 9, 12), 1),
                                      ((4, 9, 10, 9), (1, 1, 9, 12), 1)]):
        for dt in (BF, F32, F16):
            rng = np.random.default_rng(k)
            filt = rng.standard_normal(ws).astype(dt)
            oh, ow = -(-xs[1] // s), -(-xs[2] // s)
            dy = rng.standard_normal((xs[0], oh, ow, ws[3])).astype(dt)
            kw = dict(strides=[1, s, s, 1], padding="SAME")
            if strategy in runnable(list(xs), filt, dy, kw, (strategy,)):
                calls.append((list(xs), filt, dy, kw))
    return calls


@pytest.mark.parametrize("strategy", [s.name for s in STRATEGIES if _concurrent_calls(s.name)])
def test_concurrent_calls_give_the_same_bits(strategy, monkeypatch):
    """Calls from several Python threads at once (oneDNN: each with its own streams, memory
    objects and scratchpads; primitives shared) give what each gives alone."""
    calls = _concurrent_calls(strategy)
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", strategy)
    alone = [T.conv2d_backprop_input(*c[:3], **c[3]) for c in calls]
    bad = []

    def worker(seed):
        for i in range(12):
            k = (seed + i) % len(calls)
            got = T.conv2d_backprop_input(*calls[k][:3], **calls[k][3])
            if not np.array_equal(got.view(np.uint8), alone[k].view(np.uint8)):
                bad.append((seed, i, k))

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == []


@pytest.mark.skipif(not MACHINE.onednn, reason="oneDNN is not installed: pip install -e "
                    "'.[onednn]'")
def test_onednn_leaves_openmp_settings_alone(rng):
    """oneDNN's primitives are made under tfcompat's thread count, set on the calling thread
    only for that moment: the process's OpenMP setting is what it was."""
    gomp = ctypes.CDLL("libgomp.so.1")
    before = gomp.omp_get_max_threads()
    for k in (1, 3):
        T.set_num_threads(k)
        T.conv2d_backprop_input([2, 5, 7, 6], rng.standard_normal((1, 1, 6, 9)).astype(BF),
                                rng.standard_normal((2, 5, 7, 9)).astype(BF),
                                strides=[1, 1, 1, 1], padding="VALID")
        T.conv2d_backprop_input([2, 9, 8, 24], rng.standard_normal((3, 3, 24, 4)).astype(F32),
                                rng.standard_normal((2, 5, 4, 4)).astype(F32),
                                strides=[1, 2, 2, 1], padding="SAME")
        assert gomp.omp_get_max_threads() == before


def _run(xs, ws, s, pads, dtype, d=1, rng=None):
    """(got, ref, scale) of the default strategy on NHWC x shape xs, filter ws."""
    n, h, w, c = xs
    fh, fw, _, oc = ws
    pt, pb, pl, pr = pads
    oh = (h + pt + pb - (fh - 1) * d - 1) // s[0] + 1
    ow = (w + pl + pr - (fw - 1) * d - 1) // s[1] + 1
    rng = rng or np.random.default_rng(2)
    filt = rng.standard_normal(ws)
    dy = rng.standard_normal((n, oh, ow, oc))
    kw = dict(strides=[1, s[0], s[1], 1], padding="EXPLICIT", dilations=[1, d, d, 1],
              explicit_paddings=[0, 0, pt, pb, pl, pr, 0, 0])
    call = lambda: T.conv2d_backprop_input(xs, filt.astype(dtype), dy.astype(dtype),  # noqa
                                           **kw)
    got = same_bits_on((1, 2, 3), call)
    f64 = lambda a: a.astype(dtype).astype(F64)   # noqa: E731
    ref = T.conv2d_backprop_input(xs, f64(filt), f64(dy), backend="numpy", **kw)
    scale = T.conv2d_backprop_input(xs, np.abs(f64(filt)), np.abs(f64(dy)), backend="numpy",
                                    **kw)
    return got, ref, scale


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("n, hw, c, oc", [(2000, 1, 8, 8), (30, 3, 20, 12), (9, 7, 4, 5)])
def test_1x1_of_many_small_images(n, hw, c, oc, dtype):
    """A 1x1, stride-1 conv of small images is the 1x1 conv of one image k times as tall
    (16 GEMMs of 125 images, 5 of 6, 7x7 images one by one): against the NumPy reference,
    with the same bits on 1, 2 and 3 threads."""
    got, ref, scale = _run((n, hw, hw, c), (1, 1, c, oc), (1, 1), (0, 0, 0, 0), dtype)
    assert_close(got, ref, scale, dtype, CONV_TOL)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("n, hw, c, oc, k", [(2, 64, 3, 32, 16), (3, 40, 1, 20, 8),
                                             (2, 30, 2, 7, 4), (1, 48, 3, 16, 16)])
def test_patch_embedding_filters(n, hw, c, oc, k, dtype):
    """A k x k filter at stride k (a vision transformer's patch embedding: each dx pixel takes
    one tap), few input channels."""
    got, ref, scale = _run((n, hw, hw, c), (k, k, c, oc), (k, k), (0, 0, 0, 0), dtype)
    assert_close(got, ref, scale, dtype, CONV_TOL)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("nchw", [False, True], ids=["NHWC", "NCHW"])
@pytest.mark.parametrize("n, h, c, oc, fh, sh, sw, d, pads", [
    (1, 5000, 4, 4, 9, 1, 1, 1, (4, 4, 0, 0)), (3, 300, 64, 32, 5, 2, 1, 1, (2, 2, 0, 0)),
    (2, 1000, 1, 16, 31, 4, 4, 1, (0, 0, 0, 3)), (2, 97, 3, 8, 3, 1, 1, 3, (3, 0, 0, 0)),
    (4, 50, 20, 1, 4, 3, 2, 1, (1, 2, 0, 1))])
def test_images_one_pixel_wide_run_as_rows(n, h, c, oc, fh, sh, sw, d, pads, nchw, dtype, rng):
    """A conv over images one pixel wide (W = fw = 1, no left pad: a 1-D conv along H) runs
    as the same conv over images one pixel tall, with H's stride, dilation and pads (and a
    right pad below W's stride, which leaves OW = 1) moved to W: against the NumPy reference,
    NHWC and NCHW, with the same bits on 1, 2 and 3 threads."""
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
    assert T.conv_strategy(sizes, filt, dy, **kw).as_rows
    got = same_bits_on((1, 2, 3), lambda: T.conv2d_backprop_input(sizes, filt, dy, **kw))
    f64 = lambda a: a.astype(F64)   # noqa: E731
    ref = T.conv2d_backprop_input(sizes, f64(filt), f64(dy), backend="numpy", **kw)
    scale = T.conv2d_backprop_input(sizes, np.abs(f64(filt)), np.abs(f64(dy)), backend="numpy",
                                    **kw)
    assert got.dtype == np.dtype(dtype)
    assert_close(got, ref, scale, dtype, CONV_TOL)
