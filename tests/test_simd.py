"""The AVX2 build of the kernels must return the baseline build's bits, and the NCX (one channel
per row) path must return the NXC path's bits: both add the same terms in the same order."""
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import tfcompat as T
from tfcompat import _kernels as baseline
from tfcompat import _simd

avx2 = _simd._load_avx2() if _simd._cpu_has_avx2() else None
needs_avx2 = pytest.mark.skipif(avx2 is None, reason="no AVX2 build or no AVX2 on this CPU")


def _cases(rng):
    f32 = np.float32
    dy4 = rng.standard_normal((3, 37, 29, 20)).astype(f32)
    yield "bilinear legacy", lambda: T.resize_bilinear_grad(dy4, np.zeros((3, 13, 41, 20), f32))
    yield "bilinear align", lambda: T.resize_bilinear_grad(
        dy4, np.zeros((3, 13, 41, 20), f32), align_corners=True)
    yield "bilinear half f64", lambda: T.resize_bilinear_grad(
        dy4, np.zeros((3, 74, 11, 20), np.float64), half_pixel_centers=True)
    yield "nearest int8", lambda: T.resize_nearest_neighbor_grad(
        (dy4 * 50).astype(np.int8), [13, 11], half_pixel_centers=True)
    yield "nearest bf16", lambda: T.resize_nearest_neighbor_grad(
        dy4.astype(ml_dtypes.bfloat16), [74, 9], align_corners=True)
    dy5 = rng.standard_normal((2, 9, 17, 6, 7)).astype(f32)
    for fmt, order in (("NXC", (0, 1, 2, 3, 4)), ("NCX", (0, 4, 1, 2, 3))):
        for dtype in (f32, np.float64):
            yield f"trilinear {fmt} {dtype.__name__}", lambda fmt=fmt, order=order, dtype=dtype: (
                T.interpolate_backward(np.zeros((2, 4, 5, 13, 7), dtype).transpose(order),
                                       dy5.astype(dtype).transpose(order),
                                       mode="trilinear", data_format=fmt))
    yield "resize_grad", lambda: T.resize_grad(dy4[:, :17, :11, :].transpose(0, 3, 1, 2).copy(),
                                               np.zeros((3, 20, 7, 5), f32),
                                               scales=[1, 1, 17 / 7, 11 / 5])
    w = rng.standard_normal((3, 3, 8, 16)).astype(f32)
    w16 = rng.standard_normal((3, 3, 16, 16)).astype(f32)
    for n in (1, 3):
        dyc = rng.standard_normal((n, 16, 16, 16)).astype(f32)
        yield f"conv N={n}", lambda dyc=dyc, n=n: T.conv2d_backprop_input(
            [n, 31, 31, 8], w, dyc, strides=[1, 2, 2, 1], padding="SAME")
        # C = 16: float32 on the tile kernel where the CPU has AVX512F, in both builds
        yield f"conv N={n} C=16", lambda dyc=dyc, n=n: T.conv2d_backprop_input(
            [n, 31, 31, 16], w16, dyc, strides=[1, 2, 2, 1], padding="SAME")
        for half in (np.float16, ml_dtypes.bfloat16):
            yield f"conv N={n} {np.dtype(half)}", lambda dyc=dyc, n=n, half=half: (
                T.conv2d_backprop_input([n, 31, 31, 8], w.astype(half), dyc.astype(half),
                                        strides=[1, 2, 2, 1], padding="SAME"))
            # and on the tile kernel: dy widened in each build, the sums rounded in AVX-512
            yield f"conv N={n} C=16 {np.dtype(half)}", lambda dyc=dyc, n=n, half=half: (
                T.conv2d_backprop_input([n, 31, 31, 16], w16.astype(half), dyc.astype(half),
                                        strides=[1, 2, 2, 1], padding="SAME"))


_DIGESTS = """
import hashlib, sys
import numpy as np
sys.path.insert(0, {tests!r})
import tfcompat
from test_simd import _cases
for name, fn in _cases(np.random.default_rng(7)):
    out = np.ascontiguousarray(fn())
    print(name, out.dtype, hashlib.sha256(out.view(np.uint8)).hexdigest())
"""


@needs_avx2
def test_avx2_build_is_bitwise_the_baseline():
    """Every case's bits in a process that runs the baseline build (TFCOMPAT_SIMD=baseline)
    and in one that runs the AVX2 build (TFCOMPAT_SIMD=avx2)."""
    code = _DIGESTS.format(tests=os.path.dirname(os.path.abspath(__file__)))
    outs = []
    for value in ("baseline", "avx2"):
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=600, env=dict(os.environ, TFCOMPAT_SIMD=value))
        assert res.returncode == 0, res.stderr
        outs.append(res.stdout.splitlines())
    assert len(outs[0]) > 20
    assert outs[0] == outs[1]


@pytest.mark.parametrize("mode,rank,ct", [("linear", 1, "half_pixel"),
                                          ("bilinear", 2, "half_pixel"),
                                          ("bilinear", 2, "align_corners"),
                                          ("trilinear", 3, "half_pixel"),
                                          ("trilinear", 3, "asymmetric"),
                                          ("trilinear", 3, "pytorch_half_pixel")])
@pytest.mark.parametrize("channels", [1, 4, 9, 8, 21, 37, 40])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ncx_path_equals_nxc_path_bitwise(mode, rank, ct, channels, dtype, rng):
    """Channels 4 and 9 use the four-channel NCX kernel (9 with one left over); 8 to 40 the
    vector window of NXC float32 rows (40 = one 32-channel block and one 8-channel block; 9, 21
    and 37 have overlapping vectors); up, down and equal sizes mix one- and two-weight rows."""
    in_sp, out_sp = (5, 9, 4)[:rank], (11, 4, 4)[:rank]
    dy = rng.standard_normal((2,) + out_sp + (channels,)).astype(dtype)
    src = np.zeros((2,) + in_sp + (channels,), dtype)
    _assert_ncx_equals_nxc(src, dy, mode=mode, coordinate_transformation_mode=ct)


def _assert_ncx_equals_nxc(src, dy, **kw):
    """interpolate_backward on NXC src/dy and on their NCX transposes give the same bits."""
    rank = dy.ndim - 2
    nxc = T.interpolate_backward(src, dy, data_format="NXC", **kw)
    to_ncx = (0, rank + 1) + tuple(range(1, rank + 1))
    ncx = T.interpolate_backward(src.transpose(to_ncx), dy.transpose(to_ncx),
                                 data_format="NCX", **kw)
    back = np.ascontiguousarray(np.moveaxis(ncx, 1, -1))
    assert np.array_equal(back.view(np.uint8), np.ascontiguousarray(nxc).view(np.uint8))


@pytest.mark.parametrize("ox", [8, 16, 19, 35])
@pytest.mark.parametrize("rank,mode", [(1, "linear"), (2, "bilinear"), (3, "trilinear")])
@pytest.mark.parametrize("channels", [8, 9, 16])
def test_ncx_wide_rows_equal_nxc_bitwise(ox, rank, mode, channels, rng):
    """NCX float32 interleaves eight channel rows into pixels eight at a time (a vector
    transpose per eight pixels, then single pixels): rows of 8, 16, 19 and 35 pixels, up and
    down (x sizes 13 and 5), groups of eight channels and a short last group (9)."""
    for ix in (13, 5):
        in_sp, out_sp = (3, 4, ix)[-rank:], (5, 7, ox)[-rank:]
        dy = rng.standard_normal((2,) + out_sp + (channels,)).astype(np.float32)
        src = np.zeros((2,) + in_sp + (channels,), np.float32)
        _assert_ncx_equals_nxc(src, dy, mode=mode)


def _build_in_subprocess(value):
    env = dict(os.environ, TFCOMPAT_SIMD=value)
    return subprocess.run([sys.executable, "-c", "import tfcompat; print(tfcompat.kernel_build())"],
                          env=env, capture_output=True, text=True, timeout=120)


def test_simd_switch():
    res = _build_in_subprocess("baseline")
    assert res.returncode == 0 and res.stdout.strip() == "baseline"
    res = _build_in_subprocess("sse9")
    assert res.returncode != 0 and "TFCOMPAT_SIMD: got 'sse9'" in res.stderr
    res = _build_in_subprocess("auto")
    assert res.stdout.strip() == ("avx2" if avx2 is not None else "baseline")
    assert T.kernel_build() in ("avx2", "baseline")


@pytest.mark.tf
@pytest.mark.parametrize("channels", [3, 8, 9, 16, 21, 31, 32, 33, 37, 40, 45, 63, 64, 72])
@pytest.mark.parametrize("align,half", [(False, False), (True, False), (False, True)])
def test_vector_window_bitwise_tf(channels, align, half, rng):
    """Every way the window splits a row (_row_blocks): one vector (8); one block of 2, 3 or 4
    vectors, the last overlapping when C % 8 != 0 (9, 16, 21, 31, 32); 16 channels and then the
    rest (37); 32-channel blocks and then the rest (40, 45, 64). 3 and 72 take the scatter.
    Bilinear and nearest. Nearest with at most 4 dy rows per dx row takes the gather, whose
    blocks are 64 channels (64), 32 (32, 40), and a last one of 1 to 4 vectors that may overlap
    the block before it (33, 37: one vector ending at C; 45, 63: two and four vectors); the 8x
    upscale (4, 3 from 32, 24) has 8 rows per dx row and takes the scatter's runs."""
    tf = pytest.importorskip("tensorflow")
    for iy, ix, oy, ox in [(5, 7, 11, 13), (13, 9, 4, 5), (1, 3, 7, 1), (17, 41, 3, 2),
                           (4, 3, 32, 24)]:
        dy = rng.standard_normal((2, oy, ox, channels)).astype(np.float32)
        img = np.zeros((2, iy, ix, channels), np.float32)
        want = tf.raw_ops.ResizeBilinearGrad(grads=dy, original_image=img, align_corners=align,
                                             half_pixel_centers=half).numpy()
        got = T.resize_bilinear_grad(dy, img, align_corners=align, half_pixel_centers=half)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (iy, ix, oy, ox)
        want = tf.raw_ops.ResizeNearestNeighborGrad(grads=dy, size=[iy, ix], align_corners=align,
                                                    half_pixel_centers=half).numpy()
        got = T.resize_nearest_neighbor_grad(dy, [iy, ix], align_corners=align,
                                             half_pixel_centers=half)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (iy, ix, oy, ox)


def _at_offset(a, offset):
    """A copy of ``a`` whose data starts ``offset`` bytes past a 64-byte boundary."""
    buf = np.empty(a.nbytes + 128, np.uint8)
    start = (-buf.ctypes.data) % 64 + offset
    out = buf[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    assert out.ctypes.data % 64 == offset
    return out


@pytest.mark.tf
@pytest.mark.parametrize("channels", [21, 48, 64, 256])
def test_source_alignment_changes_no_bits(channels, rng):
    """dy as TF and torch hand it over (64-byte aligned), as NumPy does (16 past), and at every
    other float offset the window's vector loads meet; the multi-block rows (48, 64) prefetch
    the rest of each pixel from their first block. Each result equals TF's, bit for bit."""
    tf = pytest.importorskip("tensorflow")
    dy = rng.standard_normal((2, 12, 10, channels)).astype(np.float32)
    img = np.zeros((2, 6, 5, channels), np.float32)
    want = tf.raw_ops.ResizeBilinearGrad(grads=dy, original_image=img,
                                         half_pixel_centers=True).numpy()
    want_nn = tf.raw_ops.ResizeNearestNeighborGrad(grads=dy, size=[6, 5],
                                                   half_pixel_centers=True).numpy()
    for offset in (0, 4, 16, 32, 48, 60):
        d = _at_offset(dy, offset)
        got = T.resize_bilinear_grad(d, img, half_pixel_centers=True)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), offset
        got = T.resize_nearest_neighbor_grad(d, [6, 5], half_pixel_centers=True)
        assert np.array_equal(got.view(np.uint32), want_nn.view(np.uint32)), offset


def test_selection_without_an_avx2_build(monkeypatch):
    """A build without _kernels_avx2 (TFCOMPAT_NO_AVX2=1, or not x86-64) or a CPU without AVX2
    runs the baseline under 'auto' and refuses 'avx2' with a message."""
    monkeypatch.setattr(_simd, "_load_avx2", lambda: None)
    assert _simd._select("auto") == (baseline, "baseline")
    assert _simd._select("baseline") == (baseline, "baseline")
    with pytest.raises(ImportError, match="TFCOMPAT_SIMD=avx2"):
        _simd._select("avx2")
    monkeypatch.setattr(_simd, "_cpu_has_avx2", lambda: False)
    monkeypatch.setattr(_simd, "_load_avx2", lambda: pytest.fail("loaded on a CPU without AVX2"))
    assert _simd._select("auto") == (baseline, "baseline")
