"""Each kernel's peak memory (docs/semantics.md §11): the formula against tracemalloc's peak of
a call, and the check before allocation under an address-space limit, in a subprocess, so that
a regression fails the test instead of the machine."""
import gc
import json
import os
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

import tfcompat as T

f32, f16 = np.float32, np.float16
MiB = 1 << 20
SLACK = 64 * 1024   # Python objects and small tables beside the formula's arrays


def _peak(fn):
    """tracemalloc's peak of ``fn()``, the output pool emptied first (its cached blocks are
    counted again when handed out, but not released memory's)."""
    T.release_memory()
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# Each case: the call, a shape no other test uses (so its tables are built inside the
# measurement), and the §11 formula worked by hand.
def _nearest_tall():
    """(1, 4, 4, 1) -> [2^24 + 3, 1] nearest: the row axis's build, 8 out + 8 in + 4 + 16 n
    with out = n = 4, in = 2^24 + 3, outweighs its kept offsets plus dx, 4 (in + 1) + 4 n +
    4 in. The width axis is innermost: 4 out = 4."""
    dy = np.ones((1, 4, 4, 1), f32)
    i = 2 ** 24 + 3
    build = 8 * 4 + 8 * i + 4 + 16 * 4
    kept = 4 * (i + 1) + 4 * 4 + 4 * 4
    return lambda: T.resize_nearest_neighbor_grad(dy, [i, 4]), max(build, kept + 4 * i * 4)


def _bilinear_down():
    """(1, 4, 4, 1) grads into a (1, 2^23 + 8, 4, 1) image: rows in = 2^23 + 8, out = 4,
    n = 2 out = 8 (a downscale's two taps always differ): kept 4 (in + 1) + 16 n; build
    16 out + 8 in + 4 + 16 n; columns 16 out = 64 kept; a call dx = 16 in."""
    dy = np.ones((1, 4, 4, 1), f32)
    i = 2 ** 23 + 8
    img = np.zeros((1, i, 4, 1), f32)
    kept = 4 * (i + 1) + 16 * 8 + 16 * 4
    build = 16 * 4 + 8 * i + 4 + 16 * 8
    return lambda: T.resize_bilinear_grad(dy, img), max(build, kept + 16 * i)


def _bilinear_float16():
    """A float16 dx of (2, 255, 257, 16) from float32 grads of (2, 510, 514, 16): dx 2 e
    plus its float32 sums 4 e (tables: rows 4 (255 + 1) + 16 * 1020, columns 16 * 514)."""
    dy = np.ones((2, 510, 514, 16), f32)
    img = np.zeros((2, 255, 257, 16), f16)
    e = 2 * 255 * 257 * 16
    tables = 4 * 256 + 16 * 1020 + 16 * 514
    return lambda: T.resize_bilinear_grad(dy, img), tables + 6 * e


def _nearest_strided():
    """A strided float32 grads view (2, 509, 511, 16) into [253, 255]: dx plus grads' copy
    beside the tables: rows 4 (253 + 1) + 4 * 509, columns 4 * 511 and their runs (16
    channels, at most 2 dy rows a dx row) 4 (255 + 1)."""
    base = np.ones((2, 509, 1022, 16), f32)
    dy = base[:, :, ::2]
    e = 2 * 253 * 255 * 16
    tables = 4 * 254 + 4 * 509 + 4 * 511 + 4 * 256
    return (lambda: T.resize_nearest_neighbor_grad(dy, [253, 255]),
            tables + 4 * e + 2 * 509 * 511 * 16 * 4)


RESAMPLE = {"nearest_tall": _nearest_tall, "bilinear_down": _bilinear_down,
            "bilinear_float16": _bilinear_float16, "nearest_strided": _nearest_strided}


@pytest.mark.parametrize("name", list(RESAMPLE))
def test_resample_peak_is_the_formula(name):
    fn, formula = RESAMPLE[name]()
    peak = _peak(fn)
    assert formula - SLACK <= peak <= formula + SLACK, (
        f"{name}: measured {peak / MiB:.3f} MiB, formula {formula / MiB:.3f} MiB")


def _conv(n, c, hw, oc, k, stride, dtype, data_format):
    rng = np.random.default_rng(0)
    h = w = hw
    oh = -(-h // stride)
    filt = rng.standard_normal((k, k, c, oc)).astype(dtype)
    if data_format == "NHWC":
        dy, shape, strides = (rng.standard_normal((n, oh, oh, oc)).astype(dtype),
                              [n, h, w, c], [1, stride, stride, 1])
    else:
        dy, shape, strides = (rng.standard_normal((n, oc, oh, oh)).astype(dtype),
                              [n, c, h, w], [1, 1, stride, stride])
    fn = lambda: T.conv2d_backprop_input(shape, filt, dy, strides=strides,  # noqa: E731
                                         padding="SAME", data_format=data_format)
    return fn, n * h * w * c * np.dtype(dtype).itemsize, dy.nbytes, filt.size


@pytest.mark.parametrize("name, args, layout", [
    # NHWC: dx, the filter's float32 copy and the strategy's bands
    ("nhwc", (2, 64, 97, 64, 3, 1, f32, "NHWC"), lambda dx, dy: 0),
    # NCHW, one image: a second dx and dy's NHWC copy
    ("nchw_one_image", (1, 16, 1031, 16, 3, 1, f32, "NCHW"), lambda dx, dy: dx + dy),
    # NCHW, a 130 MiB dx of two images, memory to spare: a transposed copy too
    ("nchw_two_images", (2, 16, 1033, 8, 3, 2, f32, "NCHW"), lambda dx, dy: dx + dy),
])
def test_conv_peak_is_the_formula(name, args, layout):
    fn, dx, dy, taps = _conv(*args)
    fixed = dx + layout(dx, dy) + 4 * taps
    # per thread, at most a band of 2^19 gathered values and as many of dx rows
    bands = T.get_num_threads() * 2 * (1 << 19) * 4
    peak = _peak(fn)
    assert fixed - SLACK <= peak <= fixed + bands + SLACK, (
        f"{name}: measured {peak / MiB:.3f} MiB, dx, layout and filter {fixed / MiB:.3f} MiB")


def test_conv_widened_matmul_peak_is_the_formula(monkeypatch):
    """A float16 1x1 conv on oneDNN's matmul where it widens float16 (no AVX512-FP16): dx plus
    float32 dy, filter and dx, 4 (N H W (C + OC) + C OC)."""
    from tfcompat.conv import current_machine
    if current_machine().gemm_type(f16) != np.dtype(f32):
        pytest.skip("oneDNN is not installed, or multiplies float16 natively here")
    monkeypatch.setenv("TFCOMPAT_CONV_STRATEGY", "onednn-matmul")
    rng = np.random.default_rng(0)
    filt = rng.standard_normal((1, 1, 256, 256)).astype(f16)
    dy = rng.standard_normal((1, 61, 67, 256)).astype(f16)
    pixels = 61 * 67
    formula = 2 * pixels * 256 + 4 * (pixels * 512 + 256 * 256)
    peak = _peak(lambda: T.conv2d_backprop_input([1, 61, 67, 256], filt, dy,
                                                 strides=[1, 1, 1, 1], padding="VALID"))
    assert formula - SLACK <= peak <= formula + SLACK, (peak / MiB, formula / MiB)


# ------------------------------------------------------------------------------------------
# Under an address-space limit: a MemoryError of ours, before any allocation
# ------------------------------------------------------------------------------------------

_CHILD = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    import tfcompat as T
    f32 = np.float32
    dy = np.ones((1, 4, 4, 1), f32)
    w = np.ones((3, 3, 16, 16), f32)
    T.resize_nearest_neighbor_grad(dy, [64, 4])   # start the team's threads first
    T.conv2d_backprop_input([1, 16, 64, 64], w, np.ones((1, 16, 64, 64), f32),
                            strides=[1, 1, 1, 1], padding="SAME", data_format="NCHW")
    # NCHW, 8 images: a 256 MiB dx whose transposed copy (544 MiB with dy's) would not fit,
    # transposed in place (320 MiB)
    rng = np.random.default_rng(0)
    w8 = rng.standard_normal((3, 3, 16, 8)).astype(f32)
    dy8 = rng.standard_normal((8, 8, 362, 362)).astype(f32)
    with open("/proc/self/status") as f:
        vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
    headroom = int(sys.argv[1]) << 20
    resource.setrlimit(resource.RLIMIT_AS, (vm + headroom, resource.RLIM_INFINITY))
    big_dy = np.ones((1, 16, 2048, 2048), f32) if len(sys.argv) > 2 else None
    calls = {
        "nearest_2**31-1": lambda: T.resize_nearest_neighbor_grad(dy, [2**31 - 1, 1]),
        # a 256 MiB dx whose row table takes as much again
        "nearest_2**26": lambda: T.resize_nearest_neighbor_grad(dy, [2**26, 1]),
        # a 64 MiB dx, 128 MiB at its peak: fits
        "nearest_2**24": lambda: T.resize_nearest_neighbor_grad(dy, [2**24, 1]),
        # NCHW, one image: a 256 MiB dx, twice that and dy's copy at the peak
        "conv_nchw": lambda: T.conv2d_backprop_input(
            [1, 16, 2048, 2048], w, big_dy, strides=[1, 1, 1, 1], padding="SAME",
            data_format="NCHW"),
        "conv_nchw_in_place": lambda: T.conv2d_backprop_input(
            [8, 16, 724, 724], w8, dy8, strides=[1, 1, 2, 2], padding="SAME",
            data_format="NCHW"),
    }
    out = {}
    for name, call in calls.items():
        if name == "conv_nchw" and big_dy is None:
            continue
        result = None
        try:
            result = call()
            out[name] = "ok"
        except MemoryError as exc:
            out[name] = "MemoryError: " + str(exc)
        if name == "conv_nchw_in_place" and out[name] == "ok":
            in_place = result
        del result
    del big_dy
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    if "in_place" in dir():   # the NHWC call's bits, transposed, with memory to spare
        nhwc = T.conv2d_backprop_input([8, 724, 724, 16], w8,
                                       np.ascontiguousarray(dy8.transpose(0, 2, 3, 1)),
                                       strides=[1, 2, 2, 1], padding="SAME")
        out["in_place_bits"] = bool(np.array_equal(in_place, nhwc.transpose(0, 3, 1, 2)))
    print(json.dumps(out))
""")


def _run_child(headroom_mib, conv):
    args = [sys.executable, "-c", _CHILD, str(headroom_mib)] + (["conv"] if conv else [])
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"rc {proc.returncode}: {proc.stderr[-2000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc (Linux)")
def test_a_peak_beyond_the_address_space_limit_is_a_memory_error():
    """With 384 MiB of address space left, the calls whose peak exceeds it raise our
    MemoryError, naming the argument and the peak, before they allocate; the ones that fit
    run, the NCHW conv of 8 images by transposing its dx in place, with the NHWC call's bits.
    dy of the one-image conv (256 MiB) is allocated under the limit too, so it gets 256 MiB
    more."""
    out = _run_child(384 + 256, conv=True)
    assert out["conv_nchw_in_place"] == "ok" and out["in_place_bits"] is True, out
    for name, arg, gib in (("nearest_2**31-1", "size", "16.00"),
                           ("nearest_2**26", "size", "0.50"),
                           ("conv_nchw", "input_sizes", "0.75")):
        assert out[name].startswith("MemoryError: " + arg), (name, out[name])
        assert f"needs {gib} GiB at its peak" in out[name], (name, out[name])
    assert out["nearest_2**24"] == "ok", out
