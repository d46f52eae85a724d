"""The peer backends (conformance.peers): each adapter's attribute mapping on small cases worked
out by hand, its unsupported modes, and every finding the conformance matrix reports (the
peer's own output on a hand-checked case). Tests of a peer skip, with the reason, only where
that peer is not installed."""
import os
import select
import signal

import numpy as np
import pytest

import tfcompat as T
from conformance import peers as P
from conformance.peers import jax_peer, onednn_peer, tfjs_peer, torch_peer

f32, f64 = np.float32, np.float64
P.register_peers(overwrite=True)


def _skip_unless(module):
    why = module.missing()
    return pytest.mark.skipif(why is not None, reason=f"peer not installed: {why}")


def _run(backend, kernel, inputs, attrs):
    return T.get_kernel(kernel, backend).kernel_func(inputs, attrs)


def _width(values, dtype=f32):
    """A [1, 1, W, 1] tensor with the given values along W (a 1-D case in a 2-D kernel)."""
    return np.asarray(values, dtype).reshape(1, 1, -1, 1)


def _nearest_1d(backend, values, size, **flags):
    dy = _width(values)
    out = _run(backend, "ResizeNearestNeighborGrad",
               {"dy": dy, "images": np.zeros((1, 1, size, 1), f32)},
               {"alignCorners": flags.get("align", False),
                "halfPixelCenters": flags.get("half", False)})
    return out.reshape(-1)


def _conv_same_odd(backend):
    """x 3x3, filter 2x2 of ones, stride 2, SAME: out 2x2, one pad row and column, both after
    (TF). Each dx element receives exactly one (oy, ky) x (ox, kx) pair: all ones. Symmetric
    padding on either side would leave a row or column of zeros."""
    return _run(backend, "Conv2DBackpropInput",
                {"dy": np.ones((1, 2, 2, 1), f32), "filter": np.ones((2, 2, 1, 1), f32)},
                {"inputShape": [1, 3, 3, 1], "strides": 2, "pad": "same"})


def test_peers_register_only_the_kernels_they_have():
    kernels = {b: {k for bb, k in T.list_kernels() if bb == b} for b in P.PEER_BACKENDS}
    assert kernels["tfjs-cpu"] == {"ResizeBilinearGrad", "ResizeNearestNeighborGrad",
                                   "Conv2DBackpropInput", "ResizeBilinear",
                                   "ResizeNearestNeighbor"}
    for b in ("onednn", "torch", "jax", "jax-antialias"):
        assert kernels[b] == set(T.KERNEL_NAMES) | set(T.FORWARD_KERNEL_NAMES), b
    assert kernels["onednn-graph"] == {"InterpolateBackward"}


def test_a_missing_framework_is_unsupported_with_its_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv("TFCOMPAT_TFJS_DIR", str(tmp_path))
    with pytest.raises(T.UnsupportedError, match="tfjs_peer install"):
        _nearest_1d("tfjs-cpu", [1, 2], 1)
    monkeypatch.setattr(tfjs_peer.shutil, "which", lambda name: None)  # no Node.js
    with pytest.raises(T.UnsupportedError, match="Node.js .*tfjs_peer install"):
        _nearest_1d("tfjs-cpu", [1, 2], 1)
    import sys
    monkeypatch.setitem(sys.modules, "torch", None)  # an import of torch now fails
    with pytest.raises(T.UnsupportedError, match=r"pip install 'tfcompat\[torch\]'"):
        _nearest_1d("torch", [1, 2], 1)
    monkeypatch.setitem(sys.modules, "jax", None)
    with pytest.raises(T.UnsupportedError, match=r"pip install 'tfcompat\[jax\]'"):
        _nearest_1d("jax", [1, 2], 1, half=True)


def test_peers_check_inputs_as_every_backend_does():
    for b in [b for b in P.PEER_BACKENDS if (b, "ResizeBilinearGrad") in T.list_kernels()]:
        with pytest.raises(ValueError, match="halfPixelCenters"):
            _run(b, "ResizeBilinearGrad", {"dy": np.ones((1, 2, 2, 1), f32),
                                           "images": np.zeros((1, 1, 1, 1), f32)},
                 {"alignCorners": True, "halfPixelCenters": True})


# ------------------------------------------------------------------------------------------
# tfjs-cpu
# ------------------------------------------------------------------------------------------

tfjs = _skip_unless(tfjs_peer)

# 2x2 -> 4x4 with dy = ones. Legacy, scale 0.5: x = 0..3 -> s = 0, 0.5, 1, 1.5; pixel 0 takes
# 1 + 0.5, pixel 1 0.5 + 1 + 1 (1.5 clamps both taps to 1): per axis (1.5, 2.5), and a dx
# element the product. Half pixel: s = -0.25, 0.25, 0.75, 1.25: pixel 0 takes 1 + 0.75 + 0.25,
# pixel 1 0.25 + 0.75 + 1: 2 and 2, so 4 everywhere.
LEGACY_2_TO_4 = np.array([[2.25, 3.75], [3.75, 6.25]], f32)


@tfjs
def test_tfjs_legacy_bilinear_is_tf_s():
    dy = np.ones((1, 4, 4, 1), f32)
    out = _run("tfjs-cpu", "ResizeBilinearGrad", {"dy": dy, "images": np.zeros((1, 2, 2, 1), f32)},
               {"alignCorners": False, "halfPixelCenters": False})
    np.testing.assert_array_equal(out[0, :, :, 0], LEGACY_2_TO_4)
    np.testing.assert_array_equal(T.resize_bilinear_grad(dy, np.zeros((1, 2, 2, 1), f32))[0, :, :, 0],
                                  LEGACY_2_TO_4)


@tfjs
def test_finding_tfjs_ignores_half_pixel_centers():
    dy = np.ones((1, 4, 4, 1), f32)
    img = np.zeros((1, 2, 2, 1), f32)
    out = _run("tfjs-cpu", "ResizeBilinearGrad", {"dy": dy, "images": img},
               {"halfPixelCenters": True})
    np.testing.assert_array_equal(out[0, :, :, 0], LEGACY_2_TO_4)  # the legacy mapping
    np.testing.assert_array_equal(T.resize_bilinear_grad(dy, img, half_pixel_centers=True),
                                  np.full((1, 2, 2, 1), 4.0, f32))
    # nearest, 1-D 3 -> 5 with dy = 1..5: legacy floor(0.6 x) = 0, 0, 1, 1, 2 -> [3, 7, 5];
    # half pixel floor((x + 0.5) 0.6) = 0, 0, 1, 2, 2 -> [3, 3, 9]
    np.testing.assert_array_equal(_nearest_1d("tfjs-cpu", [1, 2, 3, 4, 5], 3, half=True),
                                  [3, 7, 5])
    np.testing.assert_array_equal(_nearest_1d("cython", [1, 2, 3, 4, 5], 3, half=True), [3, 3, 9])


@tfjs
def test_finding_tfjs_bilinear_grad_is_b_w_h_c():
    out = _run("tfjs-cpu", "ResizeBilinearGrad", {"dy": np.ones((1, 4, 4, 1), f32),
                                                  "images": np.zeros((1, 2, 3, 1), f32)}, {})
    assert out.shape == (1, 3, 2, 1)  # TF: the images' shape, (1, 2, 3, 1)


@tfjs
def test_finding_tfjs_nearest_grad_reads_dy_with_the_images_batch_stride():
    """dy = 0..31 as [2, 4, 4, 1] onto 2x2, legacy: each pixel takes a 2x2 block of its
    batch's dy. Batch 1's pixel (0, 0): 16 + 17 + 20 + 21 = 74; tfjs starts batch 1 at offset
    4 (the images' batch stride, 2 * 2) and sums 4 + 5 + 8 + 9 = 26."""
    dy = np.arange(32, dtype=f32).reshape(2, 4, 4, 1)
    inputs = {"dy": dy, "images": np.zeros((2, 2, 2, 1), f32)}
    assert _run("tfjs-cpu", "ResizeNearestNeighborGrad", inputs, {})[1, 0, 0, 0] == 26
    assert _run("cython", "ResizeNearestNeighborGrad", inputs, {})[1, 0, 0, 0] == 74
    assert _run("tfjs-cpu", "ResizeNearestNeighborGrad", inputs, {})[0, 0, 0, 0] == 10


@tfjs
def test_finding_tfjs_nearest_grad_never_returns_for_align_corners_onto_size_1(monkeypatch):
    """alignCorners with an original axis of 1: tfjs's scale is 0, its search window infinite,
    and the call never returns. The adapter's timeout kills Node, and the next call starts a
    new process."""
    monkeypatch.setenv("TFCOMPAT_TFJS_TIMEOUT", "2")
    _nearest_1d("tfjs-cpu", [1, 2], 1)
    before = tfjs_peer.NODE.pid
    with pytest.raises(TimeoutError, match="no answer within 2 s"):
        _run("tfjs-cpu", "ResizeNearestNeighborGrad",
             {"dy": np.ones((1, 4, 3, 2), f32), "images": np.zeros((1, 1, 1, 2), f32)},
             {"alignCorners": True})
    assert tfjs_peer.NODE.pid is None and not _alive(before)
    np.testing.assert_array_equal(_nearest_1d("tfjs-cpu", [1, 2, 3, 4, 5], 3), [3, 7, 5])
    assert tfjs_peer.NODE.pid not in (None, before)


@tfjs
def test_tfjs_conv_maps_padding_strides_and_layout():
    np.testing.assert_array_equal(_conv_same_odd("tfjs-cpu"), np.ones((1, 3, 3, 1), f32))
    # VALID, x 3x3, ones: the count of (oy, ky) pairs per row times per column
    out = _run("tfjs-cpu", "Conv2DBackpropInput",
               {"dy": np.ones((1, 1, 2, 2), f32), "filter": np.ones((2, 2, 1, 1), f32)},
               {"inputShape": [1, 1, 3, 3], "strides": [1, 1], "pad": "valid",
                "dataFormat": "NCHW"})
    np.testing.assert_array_equal(out[0, 0], [[1, 2, 1], [2, 4, 2], [1, 2, 1]])
    # explicit pads with a rounding mode: passed on as tfjs names them
    got = _run("tfjs-cpu", "Conv2DBackpropInput",
               {"dy": np.ones((1, 2, 2, 1), f32), "filter": np.ones((2, 2, 1, 1), f32)},
               {"inputShape": [1, 3, 3, 1], "strides": 2, "pad": 1,
                "dimRoundingMode": "floor"})
    want = T.conv2d_backprop_input([1, 3, 3, 1], np.ones((2, 2, 1, 1), f32),
                                   np.ones((1, 2, 2, 1), f32), strides=[1, 2, 2, 1],
                                   padding="EXPLICIT", explicit_paddings=[0, 0, 1, 1, 1, 1, 0, 0])
    np.testing.assert_array_equal(got, want)


@tfjs
def test_tfjs_lacks_float64_and_dilations():
    with pytest.raises(T.UnsupportedError, match="float32"):
        _run("tfjs-cpu", "ResizeBilinearGrad", {"dy": np.ones((1, 2, 2, 1), f64),
                                                "images": np.zeros((1, 1, 1, 1), f64)}, {})
    with pytest.raises(T.UnsupportedError, match="dilations"):
        _run("tfjs-cpu", "Conv2DBackpropInput",
             {"dy": np.ones((1, 1, 1, 1), f32), "filter": np.ones((2, 2, 1, 1), f32)},
             {"inputShape": [1, 3, 3, 1], "pad": "valid", "dilations": 2})


def _alive(pid):
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


@tfjs
def test_the_node_process_starts_once_is_reused_and_leaves_no_zombie():
    tfjs_peer.NODE.close()
    assert tfjs_peer.NODE.pid is None
    _nearest_1d("tfjs-cpu", [1, 2], 1)
    pid = tfjs_peer.NODE.pid
    for _ in range(3):
        _nearest_1d("tfjs-cpu", [1, 2], 1)
    assert tfjs_peer.NODE.pid == pid and _alive(pid)
    tfjs_peer.NODE.close()
    assert not _alive(pid)
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped: no zombie left to wait for


@tfjs
def test_a_crash_in_a_call_is_a_clear_error_and_the_next_call_restarts():
    _nearest_1d("tfjs-cpu", [1, 2], 1)
    pid = tfjs_peer.NODE.pid
    original = tfjs_peer.NODE._read

    def crash_first(timeout):
        os.kill(pid, signal.SIGKILL)  # Node dies while the call waits for its answer
        tfjs_peer.NODE.proc.wait()
        # what Node wrote before it died is dropped: the call meets a Node that died without
        # answering, whether or not this small kernel had already answered (else a race)
        fd = tfjs_peer.NODE.proc.stdout.fileno()
        while select.select([fd], [], [], 0)[0] and os.read(fd, 1 << 16):
            pass
        tfjs_peer.NODE._read = original
        return original(timeout)

    tfjs_peer.NODE._read = crash_first
    with pytest.raises(RuntimeError, match=r"exited \(code -9\)"):
        _nearest_1d("tfjs-cpu", [1, 2], 1)
    assert not _alive(pid)
    np.testing.assert_array_equal(_nearest_1d("tfjs-cpu", [1, 2, 3, 4, 5], 3), [3, 7, 5])
    assert tfjs_peer.NODE.pid != pid


# ------------------------------------------------------------------------------------------
# torch
# ------------------------------------------------------------------------------------------

torch_ = _skip_unless(torch_peer)


@torch_
def test_torch_nearest_modes():
    """1-D 3 -> 5, dy = 1..5: legacy ('nearest', floor(0.6 x)) -> [3, 7, 5]; half pixel
    ('nearest-exact', floor((x + 0.5) 0.6)) -> [3, 3, 9]; align corners has no mode."""
    np.testing.assert_array_equal(_nearest_1d("torch", [1, 2, 3, 4, 5], 3), [3, 7, 5])
    np.testing.assert_array_equal(_nearest_1d("torch", [1, 2, 3, 4, 5], 3, half=True), [3, 3, 9])
    with pytest.raises(T.UnsupportedError, match="align_corners"):
        _nearest_1d("torch", [1, 2, 3, 4, 5], 3, align=True)
    with pytest.raises(T.UnsupportedError, match="int32"):
        _run("torch", "ResizeNearestNeighborGrad", {"dy": np.ones((1, 2, 2, 1), np.int32),
                                                    "images": np.zeros((1, 1, 1, 1), np.int32)},
             {})


@torch_
def test_torch_linear_modes():
    """2 -> 3 align corners, ones: s = 0, 0.5, 1 -> [1.5, 1.5]; 2 -> 4 half pixel, ones:
    [2, 2] (see LEGACY_2_TO_4's note); TF's legacy bilinear has no PyTorch mode."""
    out = _run("torch", "InterpolateBackward", {"src": np.zeros((1, 1, 2), f32),
                                                "diff_dst": np.ones((1, 1, 3), f32)},
               {"mode": "linear", "coordinate_transformation_mode": "align_corners",
                "data_format": "NCX"})
    np.testing.assert_array_equal(out.reshape(-1), [1.5, 1.5])
    out = _run("torch", "ResizeBilinearGrad", {"dy": np.ones((1, 4, 4, 1), f32),
                                               "images": np.zeros((1, 2, 2, 1), f32)},
               {"halfPixelCenters": True})
    np.testing.assert_array_equal(out, np.full((1, 2, 2, 1), 4.0, f32))
    with pytest.raises(T.UnsupportedError, match="legacy"):
        _run("torch", "ResizeBilinearGrad", {"dy": np.ones((1, 4, 4, 1), f32),
                                             "images": np.zeros((1, 2, 2, 1), f32)}, {})


@torch_
def test_finding_torch_rounds_the_half_pixel_position_once():
    """PyTorch computes the half-pixel position (x + 0.5) * scale - 0.5 with one rounding (as a
    fused multiply-add would; its CUDA kernel gives the same weights), TF with two. 17 -> 41,
    x = 39: TF's float32 position 15.878048 weighs pixels 15 and 16 by 0.12195206 and
    0.87804794; PyTorch's 15.878049 by 0.1219511 and 0.8780489."""
    I, O, x = 17, 41, 39
    one_hot = np.zeros(O, f32)
    one_hot[x] = 1.0
    inputs = {"dy": _width(one_hot), "images": np.zeros((1, 1, I, 1), f32)}
    scale = f32(I) / f32(O)
    twice = f32(f32(f32(x) + f32(0.5)) * scale) - f32(0.5)
    once = f32(np.float64(scale) * (x + 0.5) - 0.5)  # exact in float64, then rounded once
    assert once != twice
    for backend, pos in (("torch", once), ("cython", twice)):
        got = _run(backend, "ResizeBilinearGrad", inputs, {"halfPixelCenters": True}).reshape(-1)
        lerp = pos - f32(15)
        assert got[15:17].tolist() == [f32(1) - lerp, lerp] and not got[:15].any(), backend
        # the forward reads the same position: pixels 15 and 16 of 0 and 1 give the lerp
        image = (np.arange(I) >= 16).astype(f32)
        out = _run(backend, "ResizeBilinear", {"images": _width(image)},
                   {"size": [1, O], "halfPixelCenters": True}).reshape(-1)
        assert out[x] == lerp, backend


@torch_
def test_torch_resize_grad_scales_and_conv_padding():
    dy, x = np.ones((1, 1, 6, 6), f32), np.zeros((1, 1, 4, 4), f32)
    out = _run("torch", "ResizeGrad", {"dY": dy, "X": x,
                                       "scales": np.array([1, 1, 1.7, 1.7], f32)}, {})
    # ONNX Runtime's published vector (docs/semantics.md §6)
    np.testing.assert_allclose(out[0, 0, 0], [2.7128, 2.9550, 2.7612, 1.4533], atol=1e-4)
    np.testing.assert_array_equal(_conv_same_odd("torch"), np.ones((1, 3, 3, 1), f32))


@torch_
def test_finding_torch_samples_an_axis_resized_to_1_at_its_centre():
    """4 -> 1, linear, pytorch_half_pixel: ONNX defines s = 0 (all to pixel 0); PyTorch's
    align_corners=False takes s = (0 + 0.5) * 4 - 0.5 = 1.5 (half to pixels 1 and 2)."""
    inputs = {"src": np.zeros((1, 1, 4), f32), "diff_dst": np.ones((1, 1, 1), f32)}
    attrs = {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel",
             "data_format": "NCX"}
    np.testing.assert_array_equal(_run("torch", "InterpolateBackward", inputs, attrs).reshape(-1),
                                  [0, 0.5, 0.5, 0])
    np.testing.assert_array_equal(_run("cython", "InterpolateBackward", inputs, attrs).reshape(-1),
                                  [1, 0, 0, 0])


@torch_
def test_finding_torch_float64_coordinates():
    """5 -> 9 half pixel in float64: PyTorch's weights are the float64 formula's; the
    definition computes the coordinate in float32 (TF's), and the two differ near 1e-8."""
    dy = np.zeros((1, 1, 9))
    dy[0, 0, 1] = 1.0  # only x = 1: s = 1.5 * 5/9 - 0.5
    inputs = {"src": np.zeros((1, 1, 5)), "diff_dst": dy}
    attrs = {"mode": "linear", "data_format": "NCX"}
    got = _run("torch", "InterpolateBackward", inputs, attrs).reshape(-1)
    s64 = 1.5 * 5 / 9 - 0.5
    s32 = float(np.float32(np.float32(1.5) * np.float32(np.float32(5) / np.float32(9)))
                - np.float32(0.5))
    assert got[0] == pytest.approx(1 - s64, abs=1e-15) and got[1] == pytest.approx(s64, abs=1e-15)
    ours = _run("cython", "InterpolateBackward", inputs, attrs).reshape(-1)
    assert ours[1] == s32 and abs(ours[1] - got[1]) > 1e-9


# ------------------------------------------------------------------------------------------
# jax
# ------------------------------------------------------------------------------------------

jax_ = _skip_unless(jax_peer)


@jax_
def test_jax_half_pixel_modes_and_what_it_lacks():
    np.testing.assert_array_equal(_nearest_1d("jax", [1, 2, 3, 4, 5], 3, half=True), [3, 3, 9])
    out = _run("jax", "ResizeBilinearGrad", {"dy": np.ones((1, 4, 4, 1), f32),
                                             "images": np.zeros((1, 2, 2, 1), f32)},
               {"halfPixelCenters": True})
    np.testing.assert_allclose(out, np.full((1, 2, 2, 1), 4.0, f32), rtol=1e-6)
    for flags in ({}, {"alignCorners": True}):
        with pytest.raises(T.UnsupportedError, match="half-pixel centres only"):
            _run("jax", "ResizeBilinearGrad", {"dy": np.ones((1, 4, 4, 1), f32),
                                               "images": np.zeros((1, 2, 2, 1), f32)}, flags)
    np.testing.assert_array_equal(_conv_same_odd("jax"), np.ones((1, 3, 3, 1), f32))
    out = _run("jax", "Conv2DBackpropInput", {"dy": np.ones((1, 2, 2, 1)),
                                              "filter": np.ones((2, 2, 1, 1))},
               {"inputShape": [1, 3, 3, 1], "strides": 2, "pad": "same"})
    assert out.dtype == f64


@jax_
def test_finding_jax_antialiases_when_downsampling():
    """4 -> 2 linear, dy = ones. Without antialias, s = 0.5 and 2.5: each pixel takes 0.5.
    jax.image.resize's default widens the triangle kernel to the scale (2): output 0 samples
    pixels 0, 1, 2 with weights 0.75, 0.75, 0.25 (pixel -1 falls outside and the rest is
    renormalised by 1.75), output 1 pixels 1, 2, 3 with 0.25, 0.75, 0.75: [3, 4, 4, 3] / 7."""
    inputs = {"src": np.zeros((1, 1, 4), f32), "diff_dst": np.ones((1, 1, 2), f32)}
    attrs = {"mode": "linear", "data_format": "NCX"}
    np.testing.assert_allclose(_run("jax", "InterpolateBackward", inputs, attrs).reshape(-1),
                               [0.5] * 4, rtol=1e-6)
    np.testing.assert_allclose(
        _run("jax-antialias", "InterpolateBackward", inputs, attrs).reshape(-1),
        np.array([3, 4, 4, 3]) / 7, rtol=1e-6)
    np.testing.assert_array_equal(_run("cython", "InterpolateBackward", inputs, attrs).reshape(-1),
                                  [0.5] * 4)


# ------------------------------------------------------------------------------------------
# oneDNN
# ------------------------------------------------------------------------------------------

onednn = _skip_unless(onednn_peer)


@onednn
def test_onednn_half_pixel_modes_and_what_it_lacks():
    np.testing.assert_array_equal(_nearest_1d("onednn", [1, 2, 3, 4, 5], 3, half=True),
                                  [3, 3, 9])
    out = _run("onednn", "ResizeBilinearGrad", {"dy": np.ones((1, 4, 4, 1), f32),
                                                "images": np.zeros((1, 2, 2, 1), f32)},
               {"halfPixelCenters": True})
    np.testing.assert_array_equal(out, np.full((1, 2, 2, 1), 4.0, f32))
    with pytest.raises(T.UnsupportedError, match="no align_corners"):
        _nearest_1d("onednn", [1, 2, 3, 4, 5], 3, align=True)
    with pytest.raises(T.UnsupportedError, match="float64"):
        _run("onednn", "InterpolateBackward", {"src": np.zeros((1, 1, 2)),
                                               "diff_dst": np.ones((1, 1, 3))},
             {"mode": "linear", "data_format": "NCX"})
    np.testing.assert_array_equal(_conv_same_odd("onednn"), np.ones((1, 3, 3, 1), f32))
    # NCHW, dilation 2: x 5x5, filter 2x2 of ones, VALID -> out 3x3; taps at 0 and 2 apart
    got = _run("onednn", "Conv2DBackpropInput",
               {"dy": np.ones((1, 1, 3, 3), f32), "filter": np.ones((2, 2, 1, 1), f32)},
               {"inputShape": [1, 1, 5, 5], "pad": "valid", "dataFormat": "NCHW",
                "dilations": 2})
    rows = np.array([1, 1, 2, 1, 1], f32)  # rows 0..4 receive 1, 1, 2, 1, 1 (oy, ky) pairs
    np.testing.assert_array_equal(got[0, 0], np.outer(rows, rows))


@onednn
def test_finding_onednn_coordinates_are_x_plus_half_times_i_over_o():
    """oneDNN computes s = (x + 0.5) * I / O - 0.5; TF multiplies by I / O rounded to float32.
    Nearest, I = 2, O = 41, x = 20: exactly 41 * 2 / 41 = 1 -> oneDNN pixel 1; TF's float32
    20.5 * 0.04878049 = 0.99999994 -> pixel 0. Bilinear 17 -> 5: oneDNN's result is the
    (x + 0.5) * I / O formula's, bit for bit."""
    one_hot = np.zeros(41, f32)
    one_hot[20] = 1.0
    assert _nearest_1d("onednn", one_hot, 2, half=True).tolist() == [0, 1]
    assert _nearest_1d("cython", one_hot, 2, half=True).tolist() == [1, 0]
    I, O = 17, 5
    dy = np.random.default_rng(0).standard_normal(O).astype(f32)
    got = _run("onednn", "ResizeBilinearGrad", {"dy": _width(dy),
                                                "images": np.zeros((1, 1, I, 1), f32)},
               {"halfPixelCenters": True}).reshape(-1)
    want = np.zeros(I, f32)
    for x in range(O):
        s = f32(f32(f32(x) + f32(0.5)) * f32(I) / f32(O)) - f32(0.5)
        lo, hi, lerp = max(int(np.floor(s)), 0), min(int(np.ceil(s)), I - 1), s - f32(np.floor(s))
        want[lo] += dy[x] * (f32(1) - lerp)
        want[hi] += dy[x] * lerp
    np.testing.assert_array_equal(got, want)


@onednn
def test_finding_onednn_factors_do_not_change_the_mapping():
    """ORT's scales 1.7 (6x6 -> 4x4, dY = ones) as oneDNN's factors: oneDNN maps by the sizes
    (2.25 everywhere, ORT's value without scales), not ORT's 2.7128 2.9550 ..."""
    out = _run("onednn", "ResizeGrad", {"dY": np.ones((1, 1, 6, 6), f32),
                                        "X": np.zeros((1, 1, 4, 4), f32),
                                        "scales": np.array([1, 1, 1.7, 1.7], f32)}, {})
    np.testing.assert_allclose(out, np.full((1, 1, 4, 4), 2.25), rtol=1e-6)


@onednn
def test_onednn_graph_api_interpolate_backward():
    """The graph API's InterpolateBackward op, attributes as the op names them: nearest half
    pixel, 3 -> 5, dy = 1..5: floor((x + 0.5) * 0.6) = 0, 0, 1, 2, 2 -> [3, 3, 9]; 2 -> 4
    linear half pixel, ones -> [2, 2]; align_corners: oneDNN reports the partition as
    unsupported on the CPU."""
    def run(mode, transform, dd, size):
        return _run("onednn-graph", "InterpolateBackward",
                    {"src": np.zeros((1, 1, size), f32), "diff_dst": np.asarray(dd, f32).reshape(1, 1, -1)},
                    {"mode": mode, "coordinate_transformation_mode": transform,
                     "data_format": "NCX"}).reshape(-1)
    np.testing.assert_array_equal(run("nearest", "half_pixel", [1, 2, 3, 4, 5], 3), [3, 3, 9])
    np.testing.assert_array_equal(run("linear", "half_pixel", [1, 1, 1, 1], 2), [2, 2])
    with pytest.raises(T.UnsupportedError, match="does not support"):
        run("linear", "align_corners", [1, 1, 1], 2)
    with pytest.raises(T.UnsupportedError, match="asymmetric"):
        run("linear", "asymmetric", [1, 1, 1], 2)


@onednn
def test_onednn_frees_the_objects_of_shapes_it_no_longer_keeps(monkeypatch):
    """The adapter keeps the primitives of recent shapes; a long run of distinct shapes must
    free the oneDNN objects of those it drops, not leak them (counted at oneDNN's C API), and
    every result stays right: a 1x1 filter of 2 doubles dy; nearest 2 -> 1 sums the pairs."""
    from tfcompat import _dnnl
    lib = _dnnl.library().lib
    counts = {"dnnl_primitive_create": 0, "dnnl_primitive_destroy": 0}
    for name in counts:
        real = getattr(lib, name)

        def counted(*args, _real=real, _name=name):
            counts[_name] += 1
            return _real(*args)
        monkeypatch.setattr(lib, name, counted)
    for w in range(1, 201):
        dy = np.arange(w, dtype=f32).reshape(1, 1, w, 1)
        got = _run("onednn", "Conv2DBackpropInput", {"dy": dy, "filter": np.full((1, 1, 1, 1), 2, f32)},
                   {"inputShape": [1, 1, w, 1], "strides": 1, "pad": "valid"})
        np.testing.assert_array_equal(got, 2 * dy)
        got = _run("onednn", "ResizeNearestNeighborGrad",
                   {"dy": np.ones((1, 1, 2 * w, 1), f32), "images": np.zeros((1, 1, w, 1), f32)},
                   {"alignCorners": False, "halfPixelCenters": True})
        np.testing.assert_array_equal(got, np.full((1, 1, w, 1), 2, f32))
    made, freed = counts["dnnl_primitive_create"], counts["dnnl_primitive_destroy"]
    assert made >= 400 and freed >= made // 2, counts


# ------------------------------------------------------------------------------------------
# The forward resizes (ResizeBilinear, ResizeNearestNeighbor)
# ------------------------------------------------------------------------------------------

def _forward_1d(backend, kernel, values, size, **flags):
    """A 1-D forward resize of ``values`` (a [1, 1, W, 1] image) to ``size``."""
    return _run(backend, kernel, {"images": _width(values, flags.pop("dtype", f32))},
                {"size": [1, size], "alignCorners": flags.get("align", False),
                 "halfPixelCenters": flags.get("half", False)}).reshape(-1)


@pytest.mark.parametrize("backend", ["tfjs-cpu", "onednn", "torch", "jax"])
def test_forward_modes_each_peer_maps(backend):
    """[1, 3] resized to 4 with half-pixel centres (every peer's mode): s = -0.25, 0.25, 0.75,
    1.25 -> 1, 1.5, 2.5, 3 (both ends clamped); nearest floor((x + 0.5) / 2) -> 1, 1, 3, 3.
    The modes a peer lacks are unsupported, naming what it lacks."""
    module = {"tfjs-cpu": tfjs_peer, "onednn": onednn_peer, "torch": torch_peer,
              "jax": jax_peer}[backend]
    if module.missing():
        pytest.skip(f"peer not installed: {module.missing()}")
    got = _forward_1d(backend, "ResizeBilinear", [1, 3], 4, half=True)
    assert got.dtype == f32 and got.tolist() == [1, 1.5, 2.5, 3]
    assert _forward_1d(backend, "ResizeNearestNeighbor", [1, 3], 4, half=True).tolist() == \
        [1, 1, 3, 3]
    assert _forward_1d("cython", "ResizeBilinear", [1, 3], 4, half=True).tolist() == \
        [1, 1.5, 2.5, 3]
    if backend in ("onednn", "jax"):
        with pytest.raises(T.UnsupportedError, match="half-pixel centres only"):
            _forward_1d(backend, "ResizeBilinear", [1, 3], 4, align=True)
    if backend == "torch":
        # align corners 2 -> 3: s = 0, 0.5, 1; TF1's legacy mode has no PyTorch mode
        assert _forward_1d("torch", "ResizeBilinear", [1, 3], 3, align=True).tolist() == [1, 2, 3]
        with pytest.raises(T.UnsupportedError, match="legacy"):
            _forward_1d("torch", "ResizeBilinear", [1, 3], 3)


@tfjs
def test_finding_tfjs_forward_computes_in_float64():
    """tfjs's CPU resize computes its coordinates and lerps in JavaScript numbers (float64) and
    rounds once when it stores float32; TF computes each step in float32. [1, 3] to 3, TF1's
    legacy mode: TF's scale 0.6666667 (float32) gives 1 + 2 * 0.6666667 = 2.3333335; tfjs's
    2 / 3 in float64 gives 2.3333333333333335, stored as 2.3333333."""
    tf_value = f32(1) + f32(2) * f32(f32(2) / f32(3))
    js_value = f32(1 + 2 * (2 / 3))
    assert tf_value != js_value
    assert _forward_1d("tfjs-cpu", "ResizeBilinear", [1, 3], 3).tolist() == [1, js_value, 3]
    assert _forward_1d("cython", "ResizeBilinear", [1, 3], 3).tolist() == [1, tf_value, 3]


@pytest.mark.parametrize("backend", ["tfjs-cpu", "onednn"])
def test_finding_forward_nearest_half_pixel_2_to_41(backend):
    """Half-pixel nearest, 2 -> 41, x = 20: TF's float32 20.5 * 0.04878049 = 0.99999994 ->
    pixel 0; oneDNN's (x + 0.5) * I / O = 41 / 41 = 1 and tfjs's float64 20.5 * (2 / 41) =
    1.0000000000000002 -> pixel 1 (the same finding as the backward's)."""
    module = tfjs_peer if backend == "tfjs-cpu" else onednn_peer
    if module.missing():
        pytest.skip(f"peer not installed: {module.missing()}")
    assert f32(20.5) * (f32(2) / f32(41)) < 1 <= 20.5 * (2 / 41)
    got = _forward_1d(backend, "ResizeNearestNeighbor", [5, 7], 41, half=True)
    assert got[19:22].tolist() == [5, 7, 7]
    assert _forward_1d("cython", "ResizeNearestNeighbor", [5, 7], 41,
                       half=True)[19:22].tolist() == [5, 5, 7]


@jax_
def test_finding_jax_forward_antialiases_when_downsampling():
    """4 -> 2 linear, [0, 4, 8, 12]: without antialias s = 0.5, 2.5 -> 2, 10 (TF's); with
    JAX's default the widened kernel (weights 0.75, 0.75, 0.25 over pixels 0-2, renormalised
    by 1.75: the backward's finding) gives (0 + 3 + 2) / 1.75 = 20 / 7 and 64 / 7."""
    assert _forward_1d("jax", "ResizeBilinear", [0, 4, 8, 12], 2, half=True).tolist() == [2, 10]
    np.testing.assert_allclose(
        _forward_1d("jax-antialias", "ResizeBilinear", [0, 4, 8, 12], 2, half=True),
        [20 / 7, 64 / 7], rtol=1e-6)
