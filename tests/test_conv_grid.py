"""Every conv strategy on one grid of shapes, dtypes and layouts, forced through
TFCOMPAT_CONV_STRATEGY: each result within the metric of the float64 NumPy reference, and the
same bits on 1, 2, 3 and 7 threads. A strategy that cannot run a case on this machine
(tfcompat.conv's ``cannot``: no oneDNN, no AVX-512, float64 on the tile kernels, ...) is not
generated for it; the summary's one skip says what is not installed. The shapes are chosen so
that each strategy's variants run (docs/architecture.md#the-conv-strategies): the notes say
which."""
import functools

import ml_dtypes
import numpy as np
import pytest

import tfcompat as T
from tfcompat.conv import STRATEGIES, current_machine
from tfcompat.conv.problem import conv_problem, functional_attrs

from helpers import CONV_TOL, assert_close

BF, F16, F32, F64 = ml_dtypes.bfloat16, np.float16, np.float32, np.float64
DTYPES = {"float32": F32, "bfloat16": BF, "float16": F16, "float64": F64}
THREADS = (1, 2, 3, 7)

# id: (N, H, W, C, OC, (fh, fw), (sh, sw), dilation, padding: "SAME", "VALID" or (t, b, l, r))
SHAPES = {
    # 3x3 stride 1: rows of 9 pixels (tiles of 5 and 4); C = 16, one vector of channels
    "k3_s1_c16": (2, 13, 9, 16, 20, (3, 3), (1, 1), 1, "SAME"),
    # few channels, every stride phase with taps, pads on one side only; C = 5 lane tiles
    "k3_s2_c5": (3, 23, 9, 5, 3, (3, 3), (2, 2), 1, (1, 2, 0, 1)),
    # stride 3, dilation 2, 5x3: phases no tap reaches; C = 17 (a vector and one channel)
    "k5x3_s3_d2": (2, 22, 10, 17, 33, (5, 3), (3, 3), 2, (3, 0, 2, 2)),
    # 2x2 stride 2 on an even image: each dx pixel one tap, row phases merged (oneDNN)
    "k2_s2_merged": (2, 12, 10, 24, 8, (2, 2), (2, 2), 1, "VALID"),
    # 3x3 stride 2 on 12 columns: oneDNN's column classes (dy read in place)
    "k3_s2_classes": (2, 22, 12, 24, 16, (3, 3), (2, 2), 1, (0, 1, 0, 1)),
    # 5x5 stride 2 on 96 columns, tall enough for bands inside dy: column classes of 2 and 3
    # taps with shifts -1, 0 and 1
    "k5_s2_classes": (1, 300, 96, 26, 18, (5, 5), (2, 2), 1, (1, 2, 1, 2)),
    # a 1x1 of sixteen 5x5 images: k images to one GEMM (folded)
    "k1_fold": (16, 5, 5, 24, 16, (1, 1), (1, 1), 1, "VALID"),
    # one image of a 1x1: short bands that the threads share
    "k1_one_image": (1, 45, 8, 6, 9, (1, 1), (1, 1), 1, "VALID"),
    # a 1x1 at stride 2
    "k1_s2": (3, 9, 8, 12, 7, (1, 1), (2, 2), 1, "VALID"),
    # one image, 7x7 stride 2, pads of 3: a stem layer
    "k7_s2_one_image": (1, 19, 17, 3, 10, (7, 7), (2, 2), 1, (3, 3, 3, 3)),
    # rows 4 pixels wide: the channel tiles take runs of rows; C = 48
    "k3_w4_runs": (2, 13, 4, 48, 20, (3, 3), (1, 1), 1, "SAME"),
    # C = 80 (blocks of 64 and 16), OC = 130 (chunks of 128 and 2), rows of 7
    "k3_c80_oc130": (2, 13, 7, 80, 130, (3, 3), (1, 1), 1, "SAME"),
    # an image smaller than the stride: stride phases without rows or columns
    "k3_s3_tiny": (3, 2, 2, 3, 2, (2, 3), (3, 3), 1, (1, 0, 2, 1)),
    # images one pixel wide: run as one pixel tall (a 1-D conv, dilation 3)
    "rows_d3": (2, 97, 1, 3, 8, (3, 1), (1, 1), 3, (3, 0, 0, 0)),
    # filters over the channel tiles' cache budget: groups of columns whose taps each worker
    # copies (OC 512; one image: the groups are the units the threads share), or, over 2 MiB
    # a group, copied before the threads start (OC 1000)
    "k3_c150_oc512": (3, 8, 7, 150, 512, (3, 3), (1, 1), 1, "SAME"),
    "k3_c150_oc512_one_image": (1, 6, 7, 150, 512, (3, 3), (1, 1), 1, "SAME"),
    "k3_c80_oc1000": (2, 8, 7, 80, 1000, (3, 3), (2, 2), 1, "SAME"),
    # one small image, C = 300: the BLAS gather splits its GEMMs into groups of columns
    "k3_c300_one_image": (1, 7, 6, 300, 40, (3, 3), (1, 1), 1, "SAME"),
    # 64 columns, dilation 2: the col2im's ring of column bands wraps many times
    "k3_d2_ring": (2, 40, 64, 3, 4, (3, 3), (1, 1), 2, (1, 2, 0, 1)),
    # 64 x 32 images, OC = 64: several gather bands per phase
    "k3_bands": (2, 64, 32, 8, 64, (3, 3), (1, 1), 1, "SAME"),
    # one output channel, rows of 150: dx pixels in the lanes (16 a vector)
    "k3_oc1_pixels": (2, 9, 150, 1, 1, (3, 3), (1, 1), 1, "SAME"),
    # four output channels at stride 2: 4 dx pixels a vector; 5 and 7 output channels: 3
    # and 2 pixels a vector, a lane or two empty
    "k3_s2_oc4_pixels": (2, 9, 33, 3, 4, (3, 3), (2, 2), 1, (1, 2, 0, 1)),
    "k3_oc5_pixels": (1, 9, 70, 2, 5, (3, 3), (1, 1), 1, "SAME"),
    "k3_oc7_pixels": (2, 7, 45, 4, 7, (5, 3), (1, 1), 2, (4, 4, 1, 1)),
    # few channels, output channels in the lanes: OC 21 (a partial last vector), C = 10 at
    # stride 1 (float32's widest), C = 11 on one image (the channel tiles, 5 lanes empty)
    "k3_c3_oc21": (2, 13, 17, 3, 21, (3, 3), (1, 1), 1, "SAME"),
    "k3_c10_oc40": (2, 6, 9, 10, 40, (3, 3), (1, 1), 1, "SAME"),
    "k3_c11_one_image": (1, 19, 17, 11, 10, (3, 3), (1, 1), 1, (1, 1, 1, 1)),
    # a patch embedding: 8x8 taps at stride 8, none overlapping
    "patch_k8": (2, 32, 32, 3, 16, (8, 8), (8, 8), 1, "VALID"),
    # stride 70 on a 70 x 70 image: 4,900 phases, more than the phase tables take
    "s70_phases": (1, 70, 70, 4, 4, (1, 1), (70, 70), 1, "VALID"),
    # stride 2 x 1 and dilation 1 x 2 (different per axis through the layouts), EXPLICIT
    "k3_s2x1": (2, 16, 11, 32, 24, (3, 3), (2, 1), 1, (1, 1, 2, 0)),
}


def _args(shape_id, dtype, layout, seed=0):
    n, h, w, c, oc, (fh, fw), (sh, sw), d, pad = SHAPES[shape_id]
    if isinstance(pad, str):
        padding, explicit = pad, []
        oh = -(-h // sh) if pad == "SAME" else (h - (fh - 1) * d - 1) // sh + 1
        ow = -(-w // sw) if pad == "SAME" else (w - (fw - 1) * d - 1) // sw + 1
    else:
        t, b, left, r = pad
        padding = "EXPLICIT"
        explicit = ([0, 0, t, b, left, r, 0, 0] if layout == "NHWC"
                    else [0, 0, 0, 0, t, b, left, r])
        oh = (h + t + b - (fh - 1) * d - 1) // sh + 1
        ow = (w + left + r - (fw - 1) * d - 1) // sw + 1
    rng = np.random.default_rng(seed)
    filt = rng.standard_normal((fh, fw, c, oc)).astype(dtype)
    dy = rng.standard_normal((n, oh, ow, oc)).astype(dtype)
    sizes, strides, dil = [n, h, w, c], [1, sh, sw, 1], [1, d, d, 1]
    if layout == "NCHW":
        dy = np.ascontiguousarray(dy.transpose(0, 3, 1, 2))
        sizes, strides, dil = [n, c, h, w], [1, 1, sh, sw], [1, 1, d, d]
    kw = dict(strides=strides, padding=padding, explicit_paddings=explicit,
              data_format=layout, dilations=dil)
    return sizes, filt, dy, kw


def _problem(shape_id, dtype, layout):
    sizes, filt, dy, kw = _args(shape_id, dtype, layout)
    attrs = functional_attrs(sizes, filt, dy, kw["strides"], kw["padding"],
                             kw["explicit_paddings"], kw["data_format"], kw["dilations"])
    p = conv_problem({"dy": dy, "filter": filt}, attrs)
    return p.as_rows() or p


def _cases():
    """(strategy, shape, dtype, layout) for every strategy that can run the case here."""
    machine, threads = current_machine(), max(THREADS)
    out = []
    for s in STRATEGIES:
        for shape_id in SHAPES:
            for dname, dtype in DTYPES.items():
                for layout in ("NHWC", "NCHW"):
                    p = _problem(shape_id, dtype, layout)
                    if s.cannot(p, machine, threads, s.params) is None:
                        out.append(pytest.param(s.name, shape_id, dname, layout,
                                                id=f"{s.name}-{shape_id}-{dname}-{layout}"))
    return out


CASES = _cases()


@functools.lru_cache(maxsize=None)
def _reference(shape_id, dname, layout):
    """(float64 reference, S) of the case: the NumPy backend on the case's values."""
    sizes, filt, dy, kw = _args(shape_id, DTYPES[dname], layout)
    f64 = lambda a: a.astype(F64)   # noqa: E731
    ref = T.conv2d_backprop_input(sizes, f64(filt), f64(dy), backend="numpy", **kw)
    scale = T.conv2d_backprop_input(sizes, np.abs(f64(filt)), np.abs(f64(dy)), backend="numpy",
                                    **kw)
    return ref, scale


def same_bits_on(threads, call):
    """call() on each thread count in turn: the same bits on all; returns the first."""
    outs = []
    for k in threads:
        T.set_num_threads(k)
        outs.append(call())
    for k, o in zip(threads[1:], outs[1:]):
        assert np.array_equal(o.view(np.uint8), outs[0].view(np.uint8)), f"{k} threads"
    return outs[0]


@pytest.mark.parametrize("strategy, shape_id, dname, layout", CASES)
def test_strategy_matches_reference_on_any_thread_count(strategy, shape_id, dname, layout,
                                                        monkeypatch):
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", strategy)
    sizes, filt, dy, kw = _args(shape_id, DTYPES[dname], layout)
    assert T.conv_strategy(sizes, filt, dy, **kw).name == strategy
    got = same_bits_on(THREADS, lambda: T.conv2d_backprop_input(sizes, filt, dy, **kw))
    ref, scale = _reference(shape_id, dname, layout)
    assert got.dtype == np.dtype(DTYPES[dname]) and got.shape == ref.shape
    assert_close(got, ref, scale, DTYPES[dname], CONV_TOL)


def test_every_strategy_runs_here():
    """Each strategy this machine has runs on some shape of the grid; what it lacks is
    named in the skip (pip install -e '.[onednn]' for oneDNN's)."""
    machine = current_machine()
    ran = {c.values[0] for c in CASES}
    missing = [s.name for s in STRATEGIES if s.name not in ran]
    # oneDNN's strategies need a fast matmul of some grid dtype (a brgemm kernel: AVX-512)
    no_matmul = all(machine.gemm_type(np.dtype(d)) is None for d in DTYPES.values())
    for name in missing:
        assert name.startswith("onednn") and no_matmul or name.endswith("tiles") \
            and not machine.tiles, name
    if missing:
        pytest.skip(f"{', '.join(missing)} cannot run here, and their cases were not made "
                    f"({machine.describe()}; pip install -e '.[onednn]' for oneDNN's)")


def test_the_default_strategy_is_one_of_the_grids(rng):
    """With no override, each grid shape runs the strategy conv_strategy names, and gives the
    bits that strategy gives when forced."""
    import os
    assert "TFCOMPAT_CONV_STRATEGY" not in os.environ
    for shape_id in SHAPES:
        sizes, filt, dy, kw = _args(shape_id, F32, "NHWC")
        name = T.conv_strategy(sizes, filt, dy, **kw).name
        auto = T.conv2d_backprop_input(sizes, filt, dy, **kw)
        os.environ["TFCOMPAT_CONV_STRATEGY"] = name
        try:
            forced = T.conv2d_backprop_input(sizes, filt, dy, **kw)
        finally:
            del os.environ["TFCOMPAT_CONV_STRATEGY"]
        assert np.array_equal(auto.view(np.uint8), forced.view(np.uint8)), shape_id
