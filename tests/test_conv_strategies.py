"""Which conv strategy runs a problem, and why the others decline (tfcompat/conv/strategies.py,
docs/architecture.md#the-conv-strategies): the rules as a table of problems and machines, the
override TFCOMPAT_CONV_STRATEGY, tfcompat.conv_strategy and the per-call log line."""
import logging

import ml_dtypes
import numpy as np
import pytest

import tfcompat as T
from tfcompat.conv import STRATEGIES, Machine, choose, current_machine
from tfcompat.conv.problem import conv_problem, functional_attrs

BF, F16, F32, F64 = ml_dtypes.bfloat16, np.float16, np.float32, np.float64

# machines: no AVX-512 and no oneDNN; AVX-512 tiles only; oneDNN without AVX-512 tiles (an
# AVX2 CPU); AMD Zen 4/5 (bfloat16 multiplied natively, float16 widened); an Intel Xeon with
# AMX (both half types natively)
BARE = Machine()
TILES = Machine(tiles=True)
DNNL = Machine(onednn=True, onednn_f32=True)
ZEN = Machine(tiles=True, onednn=True, onednn_f32=True, onednn_bf16=True)
XEON = Machine(tiles=True, onednn=True, onednn_f32=True, onednn_bf16=True, onednn_f16=True,
               amx=True)


def problem(n, h, w, c, oc, k=(3, 3), s=1, pad="SAME", dtype=F32, d=1):
    """A shape-only problem (zero-stride arrays: only shapes and dtypes are read)."""
    kh, kw = k
    oh = -(-h // s) if pad == "SAME" else (h - (kh - 1) * d - 1) // s + 1
    ow = -(-w // s) if pad == "SAME" else (w - (kw - 1) * d - 1) // s + 1
    dy = np.broadcast_to(np.zeros((), dtype), (n, oh, ow, oc))
    filt = np.broadcast_to(np.zeros((), dtype), (kh, kw, c, oc))
    attrs = functional_attrs([n, h, w, c], filt, dy, [1, s, s, 1], pad, [], "NHWC",
                             [1, d, d, 1])
    return conv_problem({"dy": dy, "filter": filt}, attrs)


C1 = dict(n=8, h=56, w=56, c=64, oc=64)
C4 = dict(n=8, h=28, w=28, c=256, oc=512, k=(1, 1), pad="VALID")
C5 = dict(n=4, h=272, w=272, c=32, oc=64, k=(2, 2), s=2, pad="VALID")
NOT_1X1 = ("onednn-matmul", "not a 1x1")
NO_TILES = [("lane-tiles", "no AVX-512"), ("channel-tiles", "no AVX-512")]
NO_DNNL = ("onednn-gather", "oneDNN is not installed")

# (problem, machine, threads, expected strategy, [(declined strategy, words of its reason)])
# by the rules of docs/architecture.md#the-conv-strategies, worked by hand
SELECTION = [
    # C1: the channel tiles wherever they are; float64 everywhere the col2im (8 images, and
    # float64 has no tiles and no oneDNN); without both, float32 the col2im too (OC >= C)
    (problem(**C1), ZEN, 2, "channel-tiles",
     [NOT_1X1, ("lane-tiles", "64 input channels (its kernel takes at most 10)")]),
    (problem(**C1, dtype=F64), ZEN, 2, "col2im",
     [NOT_1X1, ("lane-tiles", "float64"), ("channel-tiles", "float64"),
      ("onednn-gather", "no fast float64 matmul"), ("blas-gather", "8 images, float64")]),
    (problem(**C1), BARE, 2, "col2im",
     [("onednn-matmul", "not a 1x1")] + NO_TILES
     + [NO_DNNL, ("blas-gather", "64 output and 64 input")]),
    # bfloat16 that oneDNN multiplies natively: its gather, which fills 8 images x 56 rows
    # over bands of 14 rows (131072 // (56 x 3 x 64) - 2 span = 10 rows: 8 x 56 / 10 = 44.8)
    (problem(**C1, dtype=BF), ZEN, 2, "onednn-gather",
     [NOT_1X1, ("lane-tiles", "at most 10"),
      ("channel-tiles", "oneDNN multiplies in bfloat16, whose gather has 44.8 units")]),
    (problem(**C1, dtype=BF), TILES, 2, "channel-tiles",
     [NOT_1X1, ("lane-tiles", "at most 10")]),
    (problem(**C1, dtype=F16), ZEN, 2, "channel-tiles",
     [NOT_1X1, ("lane-tiles", "at most 10")]),
    # C4 (1x1, 512 KiB filter, 8 images): oneDNN's gather in float32; one matmul in bfloat16
    # on Zen (multiplied natively); a 1 MiB filter makes float32 one matmul too
    (problem(**C4), ZEN, 2, "onednn-gather",
     [("onednn-matmul", "8 images and a filter of 524288 bytes"),
      ("lane-tiles", "256 input channels"), ("channel-tiles", "1x1")]),
    (problem(**C4, dtype=BF), ZEN, 2, "onednn-matmul", []),
    (problem(**dict(C4, c=512)), ZEN, 2, "onednn-matmul", []),
    (problem(**C4), TILES, 2, "col2im",
     [("onednn-matmul", "oneDNN"), ("lane-tiles", "256 input"), ("channel-tiles", "1x1"),
      NO_DNNL, ("blas-gather", "1x1")]),
    # one image of a 1x1: one matmul with oneDNN; without, the half types share the
    # gather's bands, float32 the col2im's one GEMM
    (problem(1, 9, 8, 12, 7, k=(1, 1), pad="VALID"), ZEN, 2, "onednn-matmul", []),
    (problem(1, 9, 8, 6, 7, k=(1, 1), pad="VALID", dtype=BF), TILES, 2, "blas-gather",
     [("onednn-matmul", "oneDNN"), ("lane-tiles", "1x1"), ("channel-tiles", "1x1"), NO_DNNL]),
    (problem(1, 9, 8, 6, 7, k=(1, 1), pad="VALID"), TILES, 2, "col2im",
     [("onednn-matmul", "oneDNN"), ("lane-tiles", "1x1"), ("channel-tiles", "1x1"), NO_DNNL,
      ("blas-gather", "1x1")]),
    # float16 widened to float32 for one matmul while dy and dx take at most 2^22 values:
    # 1 x 64 x 64 x (512 + 512) = 4194304 = 2^22 takes it, 2 x 64 x 64 x 1024 does not
    (problem(1, 64, 64, 512, 512, k=(1, 1), pad="VALID", dtype=F16), ZEN, 2,
     "onednn-matmul", []),
    (problem(2, 64, 64, 512, 512, k=(1, 1), pad="VALID", dtype=F16), ZEN, 2,
     "onednn-gather", [("onednn-matmul", "8388608 float32 values"),
                       ("lane-tiles", "512 input"), ("channel-tiles", "1x1")]),
    # AMX from 16 threads on splits a half type's sums where OC > 1024
    (problem(1, 2, 3, 3, 1025, k=(1, 1), pad="VALID", dtype=BF), XEON, 16, "onednn-gather",
     [("onednn-matmul", "split each sum among threads"), ("lane-tiles", "1x1"),
      ("channel-tiles", "1x1")]),
    (problem(1, 2, 3, 3, 1025, k=(1, 1), pad="VALID", dtype=BF), XEON, 15, "onednn-matmul", []),
    (problem(1, 2, 3, 3, 1024, k=(1, 1), pad="VALID", dtype=BF), XEON, 16, "onednn-matmul", []),
    (problem(1, 2, 3, 3, 1025, k=(1, 1), pad="VALID", dtype=F16), ZEN, 16, "onednn-matmul", []),
    # C5 (2x2 stride 2: every row phase merges): oneDNN's gather with oneDNN, else the tiles
    (problem(**C5), ZEN, 2, "onednn-gather",
     [NOT_1X1, ("lane-tiles", "32 input channels"), ("channel-tiles", "every row phase merges")]),
    (problem(**C5), TILES, 2, "channel-tiles", [NOT_1X1, ("lane-tiles", "32 input channels")]),
    # few input channels: the lane tiles; RGB, 8 images
    (problem(8, 32, 32, 3, 16), ZEN, 2, "lane-tiles", [NOT_1X1]),
    # 7-10 channels: float32 at stride 1 only
    (problem(2, 6, 9, 10, 40), TILES, 2, "lane-tiles", [("onednn-matmul", "not a 1x1")]),
    (problem(2, 12, 18, 8, 16, s=2), TILES, 2, "col2im",
     [NOT_1X1, ("lane-tiles", "8 input channels (more than 6)"),
      ("channel-tiles", "8 input channels in 16 lanes"), NO_DNNL,
      ("blas-gather", "16 output and 8 input")]),
    (problem(2, 6, 9, 11, 16), TILES, 2, "channel-tiles",
     [NOT_1X1, ("lane-tiles", "its kernel takes at most 10")]),
    # the half types: 96 products per dx value, 32 per input channel for C = 1, 2, or at most
    # 8 output channels (pixels in the lanes; with a stride 1, 2, 4 or 8 of them), and with a
    # stride at most 3 input channels
    (problem(2, 6, 9, 3, 16, dtype=BF), TILES, 2, "lane-tiles", [NOT_1X1]),   # 144 products
    (problem(2, 6, 9, 3, 10, dtype=F16), TILES, 2, "col2im",                 # 90, 10 > 8
     [NOT_1X1, ("lane-tiles", "90 products per dx value (fewer than 96)"),
      ("channel-tiles", "3 input channels in 16 lanes"), NO_DNNL,
      ("blas-gather", "2 images, float16")]),
    (problem(2, 6, 9, 1, 4, dtype=BF), TILES, 2, "lane-tiles", [NOT_1X1]),    # 36 >= 32
    (problem(2, 12, 18, 2, 16, s=2, dtype=F16), TILES, 2, "col2im",           # 36 < 64
     [NOT_1X1, ("lane-tiles", "36 products per dx value (fewer than 64)"),
      ("channel-tiles", "2 input channels"), NO_DNNL, ("blas-gather", "2 images, float16")]),
    (problem(2, 12, 18, 3, 48, s=2, dtype=F16), TILES, 2, "lane-tiles", [NOT_1X1]),  # 108
    (problem(2, 12, 18, 4, 48, s=2, dtype=BF), TILES, 2, "col2im",
     [NOT_1X1, ("lane-tiles", "at a stride with 4 input channels"),
      ("channel-tiles", "4 input channels"), NO_DNNL, ("blas-gather", "2 images, bfloat16")]),
    (problem(2, 6, 9, 3, 3, dtype=BF), TILES, 2, "lane-tiles", [NOT_1X1]),    # pixels
    (problem(2, 12, 18, 2, 8, s=2, dtype=F16), TILES, 2, "lane-tiles", [NOT_1X1]),
    (problem(2, 12, 18, 2, 3, s=2, dtype=F16), TILES, 2, "col2im",
     [NOT_1X1, ("lane-tiles", "products per dx value"), ("channel-tiles", "2 input"), NO_DNNL,
      ("blas-gather", "2 images, float16")]),
    # a patch embedding (taps that do not overlap, stride 16 x 16) of two images: the col2im
    (problem(2, 64, 64, 3, 32, k=(16, 16), s=16, pad="VALID"), ZEN, 2, "col2im",
     [NOT_1X1, ("lane-tiles", "patch embedding"), ("channel-tiles", "3 input channels"),
      ("onednn-gather", "fewer than 24"), ("blas-gather", "32 output and 3 input")]),
    (problem(1, 48, 48, 3, 16, k=(16, 16), s=16, pad="VALID"), ZEN, 2, "lane-tiles",
     [NOT_1X1]),
    # C not a multiple of 16, two or more images: the channel tiles where two thirds of the
    # channel lanes hold channels (12 of 16, 22 of 32, 33 of 48), not 20 of 32
    (problem(2, 6, 9, 12, 4), TILES, 2, "channel-tiles",
     [NOT_1X1, ("lane-tiles", "12 input channels (its kernel")]),
    (problem(2, 6, 9, 22, 4), TILES, 2, "channel-tiles", [NOT_1X1, ("lane-tiles", "22 input")]),
    (problem(2, 6, 9, 20, 4), TILES, 2, "blas-gather",
     [NOT_1X1, ("lane-tiles", "20 input"), ("channel-tiles", "20 input channels in 32 lanes"),
      NO_DNNL]),
    (problem(1, 6, 9, 20, 4), TILES, 2, "channel-tiles", [NOT_1X1, ("lane-tiles", "20 input")]),
    # oneDNN's gather from 24 input channels with two or more images (bfloat16 natively: 9)
    (problem(2, 6, 9, 20, 40), DNNL, 2, "col2im",
     [NOT_1X1] + NO_TILES + [("onednn-gather", "20 input channels (fewer than 24)"),
                             ("blas-gather", "40 output and 20 input")]),
    (problem(2, 6, 9, 24, 40), DNNL, 2, "onednn-gather", [NOT_1X1] + NO_TILES),
    (problem(4, 6, 9, 12, 16, dtype=BF), ZEN, 2, "onednn-gather",
     [NOT_1X1, ("lane-tiles", "at most 10"), ("channel-tiles", "oneDNN multiplies")]),
    # bfloat16 natively, one 7x7 image: one band of oneDNN's gather, so the channel tiles
    (problem(1, 7, 7, 32, 512, dtype=BF), ZEN, 2, "channel-tiles",
     [NOT_1X1, ("lane-tiles", "at most 10")]),
    # a stride wider than the image: not oneDNN's gather
    (problem(2, 2, 2, 24, 40, s=3), DNNL, 2, "col2im",
     [NOT_1X1] + NO_TILES + [("onednn-gather", "stride of 3 over an image 2 wide"),
                             ("blas-gather", "40 output and 24")]),
    # more than 4096 stride phases: only the col2im
    (problem(1, 70, 70, 16, 4, k=(1, 1), s=70, pad="VALID"), ZEN, 2, "col2im",
     [NOT_1X1, ("lane-tiles", "4900 stride phases"), ("channel-tiles", "4900 stride phases"),
      ("onednn-gather", "4900 stride phases"), ("blas-gather", "4900 stride phases")]),
    # float32 with fewer output than input channels: the BLAS gather
    (problem(2, 9, 9, 64, 32, s=2), BARE, 2, "blas-gather",
     [NOT_1X1] + NO_TILES + [NO_DNNL]),
]


def _id(row):
    p, m, t, name, _ = row
    machine = {BARE: "bare", TILES: "tiles", DNNL: "dnnl", ZEN: "zen", XEON: "xeon"}[m]
    return (f"{p.dtype}_N{p.N}_{p.H}x{p.W}x{p.C}_OC{p.OC}_k{p.fh}x{p.fw}_s{p.sh}_{machine}"
            f"_t{t}")


@pytest.mark.parametrize("row", SELECTION, ids=_id)
def test_selection_rules(row):
    p, machine, threads, name, declined = row
    strategy, why = choose(p, machine, threads)
    assert strategy.name == name, why
    assert [n for n, _ in why] == [n for n, _ in declined], why
    for (_, reason), (_, words) in zip(why, declined):
        assert words in reason, (reason, words)


def test_the_list_names_each_strategy_once_and_ends_with_the_col2im():
    names = [s.name for s in STRATEGIES]
    assert names == ["onednn-matmul", "lane-tiles", "channel-tiles", "onednn-gather",
                     "blas-gather", "col2im"]
    assert choose(problem(2, 5, 5, 3, 3, dtype=F64), BARE, 1)[0].name in names


def _conv(dtype=F32, n=2, h=9, w=8, c=5, oc=3):
    rng = np.random.default_rng(0)
    filt = rng.standard_normal((3, 3, c, oc)).astype(dtype)
    dy = rng.standard_normal((n, h, w, oc)).astype(dtype)
    return [n, h, w, c], filt, dy, dict(strides=[1, 1, 1, 1], padding="SAME")


def test_conv_strategy_reports_what_runs_and_why(monkeypatch):
    """tfcompat.conv_strategy is choose() on this machine; forcing a strategy that can run the
    conv runs it and says so."""
    args = _conv()
    got = T.conv_strategy(*args[:3], **args[3])
    p = conv_problem({"dy": args[2], "filter": args[1]}, functional_attrs(
        args[0], args[1], args[2], [1, 1, 1, 1], "SAME", [], "NHWC", [1, 1, 1, 1]))
    want, declined = choose(p, current_machine(), T.get_num_threads())
    assert (got.name, got.declined, got.forced) == (want.name, declined, False)
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", "col2im")
    forced = T.conv_strategy(*args[:3], **args[3])
    assert (forced.name, forced.declined, forced.forced) == ("col2im", (), True)
    assert "TFCOMPAT_CONV_STRATEGY" in str(forced)


def test_override_unknown_name_lists_the_strategies(monkeypatch):
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", "winograd")
    args = _conv()
    with pytest.raises(ValueError, match="TFCOMPAT_CONV_STRATEGY: got 'winograd'; expected "
                       "'auto' or one of onednn-matmul, lane-tiles, channel-tiles, "
                       "onednn-gather, blas-gather, col2im"):
        T.conv2d_backprop_input(*args[:3], **args[3])


def test_override_of_a_strategy_that_cannot_run_says_why(monkeypatch):
    """The 1x1-only matmul forced on a 3x3 conv: the reason, and the strategies that can."""
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", "onednn-matmul")
    args = _conv(dtype=F64)
    with pytest.raises(ValueError, match=r"TFCOMPAT_CONV_STRATEGY: got 'onednn-matmul', which "
                       r"cannot run this conv: not a 1x1, stride-1, unpadded conv; strategies "
                       r"that can: .*blas-gather, col2im"):
        T.conv2d_backprop_input(*args[:3], **args[3])


def test_override_auto_and_empty_mean_the_list(monkeypatch):
    args = _conv()
    want = T.conv_strategy(*args[:3], **args[3]).name
    for value in ("auto", "", " AUTO "):
        monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", value)
        got = T.conv_strategy(*args[:3], **args[3])
        assert (got.name, got.forced) == (want, False)


def test_onednn_variable_is_checked(monkeypatch):
    monkeypatch.setenv("TFCOMPAT_ONEDNN", "maybe")
    args = _conv()
    with pytest.raises(ValueError, match="TFCOMPAT_ONEDNN: got 'maybe'; expected 'auto'"):
        T.conv2d_backprop_input(*args[:3], **args[3])


def test_onednn_off_leaves_onednn_out(monkeypatch):
    monkeypatch.setenv("TFCOMPAT_ONEDNN", "off")
    m = current_machine()
    assert not m.onednn and m.gemm_type(np.dtype(F32)) is None
    args = _conv(c=24, oc=40)
    assert not T.conv_strategy(*args[:3], **args[3]).name.startswith("onednn")


def test_each_call_logs_its_strategy(caplog):
    """One DEBUG line per call on the 'tfcompat.conv' logger: the problem, the threads, the
    strategy and every earlier strategy's reason; nothing at the default level."""
    args = _conv(dtype=F64)
    with caplog.at_level(logging.WARNING, logger="tfcompat.conv"):
        T.conv2d_backprop_input(*args[:3], **args[3])
    assert caplog.records == []
    with caplog.at_level(logging.DEBUG, logger="tfcompat.conv"):
        T.conv2d_backprop_input(*args[:3], **args[3])
        T.conv2d_backprop_input(*args[:3], **args[3])
    lines = [r.getMessage() for r in caplog.records if r.name == "tfcompat.conv"]
    want = T.conv_strategy(*args[:3], **args[3])
    assert len(lines) == 2 and lines[0] == lines[1]
    assert lines[0].startswith("conv float64 dx [2, 9, 8, 5] <- dy [2, 9, 8, 3] 3x3 stride 1x1 ")
    assert lines[0].endswith(str(want)) and "declined onednn-matmul: not a 1x1" in lines[0]


def test_images_one_pixel_wide_are_reported_as_rows():
    rng = np.random.default_rng(1)
    filt = rng.standard_normal((5, 1, 3, 4)).astype(F32)
    dy = rng.standard_normal((2, 20, 1, 4)).astype(F32)
    got = T.conv_strategy([2, 24, 1, 3], filt, dy, strides=[1, 1, 1, 1], padding="VALID")
    assert got.as_rows and "[as rows]" in str(got)


try:
    from hypothesis import assume, given, strategies as st
except ImportError:   # pragma: no cover
    given = None

if given is not None:
    @given(n=st.integers(1, 3), h=st.integers(1, 14), w=st.integers(1, 14),
           c=st.integers(1, 40), oc=st.integers(1, 40), fh=st.integers(1, 5),
           fw=st.integers(1, 5), sh=st.integers(1, 4), sw=st.integers(1, 4),
           d=st.integers(1, 2), pads=st.tuples(*[st.integers(0, 3)] * 4),
           fmt=st.sampled_from(["NHWC", "NCHW"]),
           dt=st.sampled_from([F32, BF, F16, F64]), seed=st.integers(0, 2 ** 16))
    def test_property_every_strategy_that_can_run_a_conv_agrees_with_the_reference(
            n, h, w, c, oc, fh, fw, sh, sw, d, pads, fmt, dt, seed):
        """A random conv problem: the strategy the list picks and every other that can run it
        (forced) within the metric of the float64 reference; the pick is the first that
        neither cannot nor declines."""
        import os
        from helpers import CONV_TOL, assert_close
        pt, pb, pl, pr = pads
        oh = (h + pt + pb - (fh - 1) * d - 1) // sh + 1
        ow = (w + pl + pr - (fw - 1) * d - 1) // sw + 1
        assume(oh >= 1 and ow >= 1)
        rng = np.random.default_rng(seed)
        filt = rng.standard_normal((fh, fw, c, oc)).astype(dt)
        dy = rng.standard_normal((n, oh, ow, oc)).astype(dt)
        sizes, strides, dil = [n, h, w, c], [1, sh, sw, 1], [1, d, d, 1]
        explicit = [0, 0, pt, pb, pl, pr, 0, 0]
        if fmt == "NCHW":
            dy = np.ascontiguousarray(dy.transpose(0, 3, 1, 2))
            sizes, strides, dil = [n, c, h, w], [1, 1, sh, sw], [1, 1, d, d]
            explicit = [0, 0, 0, 0, pt, pb, pl, pr]
        kw = dict(strides=strides, padding="EXPLICIT", explicit_paddings=explicit,
                  data_format=fmt, dilations=dil)
        f64 = lambda a: a.astype(F64)   # noqa: E731
        ref = T.conv2d_backprop_input(sizes, f64(filt), f64(dy), backend="numpy", **kw)
        scale = T.conv2d_backprop_input(sizes, np.abs(f64(filt)), np.abs(f64(dy)),
                                        backend="numpy", **kw)
        attrs = functional_attrs(sizes, filt, dy, strides, "EXPLICIT", explicit, fmt, dil)
        p = conv_problem({"dy": dy, "filter": filt}, attrs)
        p = p.as_rows() or p
        m, threads = current_machine(), T.get_num_threads()
        picked = T.conv_strategy(sizes, filt, dy, **kw).name
        first = next(s.name for s in STRATEGIES if s.cannot(p, m, threads, s.params) is None
                     and s.declines(p, m, threads, s.params) is None)
        assert picked == first
        for s in STRATEGIES:
            if s.cannot(p, m, threads, s.params) is not None:
                continue
            os.environ["TFCOMPAT_CONV_STRATEGY"] = s.name
            try:
                got = T.conv2d_backprop_input(sizes, filt, dy, **kw)
            finally:
                del os.environ["TFCOMPAT_CONV_STRATEGY"]
            assert_close(got, ref, scale, dt, CONV_TOL, what=s.name)
