"""tfcompat against TensorFlow's own gradients (raw grad ops and GradientTape).

Skipped with a visible reason when TensorFlow is not installed.
"""
import itertools

import ml_dtypes
import numpy as np
import pytest

import tfcompat as T
from tfcompat import _resample as rs
from tfcompat.conv import problem as _conv
from tfcompat.backends import numpy_backend
from helpers import CONV_TOL, assert_bitwise, assert_close, tf_or_skip

tf = tf_or_skip()

SIZES = (1, 2, 3, 5, 17, 41)
BIL_FLAGS = [(False, False), (True, False), (False, True)]
NN_FLAGS = BIL_FLAGS + [(True, True)]


def _shape_grid():
    """Every (I, O) pair of SIZES on the height axis, each paired with a rotated (I, O) on the
    width axis, with batch {1, 3} and channels {1, 3, 64} rotating: 72 shapes that cover up- and
    down-scaling, identity, size 1 and non-square on both axes."""
    pairs = list(itertools.product(SIZES, SIZES))
    bc = [(1, 1), (3, 3), (1, 64), (3, 1), (1, 3), (3, 64)]
    out = []
    for k, (ih, oh) in enumerate(pairs):
        for j in (0, 1):
            iw, ow = pairs[(7 * k + 13 * j + 5) % len(pairs)]
            b, c = bc[(k + 3 * j) % len(bc)]
            out.append((b, ih, iw, oh, ow, c))
    return out


GRID = _shape_grid()


def _dy(rng, b, oh, ow, c, dtype=np.float32):
    return rng.standard_normal((b, oh, ow, c)).astype(dtype)


@pytest.mark.parametrize("shape", GRID, ids=["b{}_i{}x{}_o{}x{}_c{}".format(*s) for s in GRID])
def test_float32_resize_grads_bitwise_equal_tf(shape, rng):
    b, ih, iw, oh, ow, c = shape
    dy = _dy(rng, b, oh, ow, c)
    img = tf.zeros((b, ih, iw, c))
    for align, half in BIL_FLAGS:
        ref = tf.raw_ops.ResizeBilinearGrad(grads=dy, original_image=img, align_corners=align,
                                            half_pixel_centers=half).numpy()
        got = T.resize_bilinear_grad(dy, img, align_corners=align, half_pixel_centers=half)
        assert_bitwise(got, ref, f"bilinear align={align} half={half}")
    for align, half in NN_FLAGS:
        ref = tf.raw_ops.ResizeNearestNeighborGrad(grads=dy, size=[ih, iw], align_corners=align,
                                                   half_pixel_centers=half).numpy()
        got = T.resize_nearest_neighbor_grad(dy, [ih, iw], align_corners=align,
                                             half_pixel_centers=half)
        assert_bitwise(got, ref, f"nearest align={align} half={half}")


@pytest.mark.parametrize("shape", GRID[::3])
def test_numpy_reference_matches_tf(shape, rng):
    b, ih, iw, oh, ow, c = shape
    dy = _dy(rng, b, oh, ow, c)
    img = np.zeros((b, ih, iw, c), np.float32)
    for align, half in BIL_FLAGS:
        ref = tf.raw_ops.ResizeBilinearGrad(grads=dy, original_image=img, align_corners=align,
                                            half_pixel_centers=half).numpy()
        p = rs.resize_bilinear_grad_problem({"dy": dy, "images": img},
                                            {"alignCorners": align, "halfPixelCenters": half})
        got = numpy_backend.resample(p)
        assert_close(got, ref, numpy_backend.resample(p, absolute=True), np.float32, what="bilinear")
    for align, half in NN_FLAGS:
        ref = tf.raw_ops.ResizeNearestNeighborGrad(grads=dy, size=[ih, iw], align_corners=align,
                                                   half_pixel_centers=half).numpy()
        p = rs.resize_nearest_neighbor_grad_problem({"dy": dy, "images": img},
                                                    {"alignCorners": align, "halfPixelCenters": half})
        got = numpy_backend.resample(p)
        assert_close(got, ref, numpy_backend.resample(p, absolute=True), np.float32, what="nearest")


@pytest.mark.parametrize("align,half", BIL_FLAGS)
@pytest.mark.parametrize("backend", ["cython", "numpy"])
def test_gradient_tape_through_forward_resize(align, half, backend, rng):
    x = tf.constant(rng.standard_normal((2, 5, 7, 3)).astype(np.float32))
    dy = _dy(rng, 2, 11, 4, 3)
    for method, ours in (("bilinear", T.resize_bilinear_grad), ("nearest", None)):
        with tf.GradientTape() as tape:
            tape.watch(x)
            if method == "bilinear":
                y = tf.compat.v1.image.resize_bilinear(x, (11, 4), align_corners=align,
                                                       half_pixel_centers=half)
            else:
                y = tf.compat.v1.image.resize_nearest_neighbor(x, (11, 4), align_corners=align,
                                                               half_pixel_centers=half)
        ref = tape.gradient(y, x, output_gradients=dy).numpy()
        if method == "bilinear":
            got = ours(dy, x, align_corners=align, half_pixel_centers=half, backend=backend)
        else:
            got = T.resize_nearest_neighbor_grad(dy, [5, 7], align_corners=align,
                                                 half_pixel_centers=half, backend=backend)
        if backend == "cython":
            assert_bitwise(got, ref, method)
        else:
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_tf2_image_resize_defaults(rng):
    """tf.image.resize (TF2) uses half-pixel centers for bilinear and nearest."""
    x = tf.constant(rng.standard_normal((1, 6, 9, 2)).astype(np.float32))
    dy = _dy(rng, 1, 13, 4, 2)
    for method in ("bilinear", "nearest"):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.image.resize(x, (13, 4), method=method)
        ref = tape.gradient(y, x, output_gradients=dy).numpy()
        if method == "bilinear":
            got = T.resize_bilinear_grad(dy, x, half_pixel_centers=True)
        else:
            got = T.resize_nearest_neighbor_grad(dy, [6, 9], half_pixel_centers=True)
        assert_bitwise(got, ref, method)


@pytest.mark.parametrize("align,half", BIL_FLAGS)
def test_bilinear_float64_image_bitwise_and_half_types(align, half, rng):
    dy = _dy(rng, 2, 9, 13, 5)
    for dtype in (np.float64, np.float16, ml_dtypes.bfloat16):
        img = np.zeros((2, 4, 6, 5), dtype)
        got = T.resize_bilinear_grad(dy, img, align_corners=align, half_pixel_centers=half)
        assert got.dtype == dtype
        ref = tf.raw_ops.ResizeBilinearGrad(grads=dy, original_image=tf.constant(img),
                                            align_corners=align, half_pixel_centers=half).numpy()
        if dtype == np.float64:
            # TF: float32 products, float64 sums; so do we -> identical bits
            assert_bitwise(got, ref, "float64")
        else:
            # TF sums half types in half precision; we sum in float32 and round once, so compare
            # both with the float64 reference: ours within tolerance, TF's no closer than ours.
            p64 = rs.resize_bilinear_grad_problem({"dy": dy, "images": img.astype(np.float64)},
                                                  {"alignCorners": align, "halfPixelCenters": half})
            exact = numpy_backend.resample(p64)
            scale = numpy_backend.resample(p64, absolute=True)
            assert_close(got, exact, scale, dtype, what=str(dtype))
            assert np.abs(got.astype(np.float64) - exact).max() <= \
                np.abs(ref.astype(np.float64) - exact).max() + 1e-12


# ----------------------------------------------------------------------------------------------
# Conv2DBackpropInput
# ----------------------------------------------------------------------------------------------

def _conv_cases():
    cases = []
    kernels = [(1, 1), (2, 2), (3, 3), (4, 3), (5, 5), (1, 3)]
    for k, (fh, fw) in enumerate(kernels):
        for s in (1, 2, 3):
            for d in (1, 2):
                for pad in ("SAME", "VALID", "EXPLICIT"):
                    fmt = ("NHWC", "NCHW")[(k + s + d) % 2]
                    b = (1, 3)[(k + s) % 2]
                    h, w = (7, 8) if (s + d) % 2 else (9, 6)
                    case = (fh, fw, s, d, pad, fmt, b, h, w)
                    explicit = _conv_attrs(case)[2]
                    hp = explicit[2:4] if fmt == "NHWC" else explicit[4:6]
                    wp = explicit[4:6] if fmt == "NHWC" else explicit[6:8]
                    # only the cases whose filter fits the padded input
                    if _out_size(h, fh, s, d, pad, hp) > 0 and _out_size(w, fw, s, d, pad, wp) > 0:
                        cases.append(case)
    return cases


def _conv_attrs(case):
    fh, fw, s, d, pad, fmt, b, h, w = case
    if fmt == "NHWC":
        strides, dil = [1, s, s, 1], [1, d, d, 1]
        pads = [0, 0, 1, 2, 0, 1, 0, 0]
    else:
        strides, dil = [1, 1, s, s], [1, 1, d, d]
        pads = [0, 0, 0, 0, 1, 2, 0, 1]
    return strides, dil, (pads if pad == "EXPLICIT" else [])


def _tf_conv_grad(x_shape, w, dy, strides, pad, explicit, fmt, dil):
    return tf.raw_ops.Conv2DBackpropInput(input_sizes=x_shape, filter=w, out_backprop=dy,
                                          strides=strides, padding=pad,
                                          explicit_paddings=explicit, data_format=fmt,
                                          dilations=dil).numpy()


def _out_size(i, f, s, d, pad, explicit):
    eff = (f - 1) * d + 1
    if pad == "SAME":
        return -(-i // s)
    if pad == "VALID":
        return (i - eff + s) // s
    return (i + explicit[0] + explicit[1] - eff) // s + 1


CONV_CASES = _conv_cases()


@pytest.mark.parametrize("case", CONV_CASES, ids=["k{}x{}_s{}_d{}_{}_{}_b{}_{}x{}".format(*c)
                                                  for c in CONV_CASES])
def test_conv_matches_tf_every_dtype(case, rng):
    fh, fw, s, d, pad, fmt, b, h, w = case
    cin, cout = 3, 4
    strides, dil, explicit = _conv_attrs(case)
    x_shape = [b, h, w, cin] if fmt == "NHWC" else [b, cin, h, w]
    w32 = rng.standard_normal((fh, fw, cin, cout)).astype(np.float32)
    oh = _out_size(h, fh, s, d, pad, explicit[2:4] if fmt == "NHWC" else explicit[4:6])
    ow = _out_size(w, fw, s, d, pad, explicit[4:6] if fmt == "NHWC" else explicit[6:8])
    dy_shape = (b, oh, ow, cout) if fmt == "NHWC" else (b, cout, oh, ow)
    dy32 = rng.standard_normal(dy_shape).astype(np.float32)
    for dtype in (np.float32, np.float64, np.float16, ml_dtypes.bfloat16):
        wt, dyt = w32.astype(dtype), dy32.astype(dtype)
        got = T.conv2d_backprop_input(x_shape, wt, dyt, strides=strides, padding=pad,
                                      explicit_paddings=explicit, data_format=fmt, dilations=dil)
        assert got.dtype == dtype
        p = _conv.conv_problem({"dy": dyt, "filter": wt}, _conv.functional_attrs(
            x_shape, wt, dyt, strides, pad, explicit, fmt, dil))
        scale = numpy_backend.conv_backprop_input(p, absolute=True).astype(np.float64)
        ref_np = numpy_backend.conv_backprop_input(
            _conv.conv_problem({"dy": dyt.astype(np.float64), "filter": wt.astype(np.float64)},
                               _conv.functional_attrs(x_shape, wt, dyt, strides, pad, explicit,
                                                      fmt, dil)))
        assert_close(got, ref_np, scale, dtype, CONV_TOL, what=f"{dtype} vs numpy float64")
        try:
            ref = _tf_conv_grad(x_shape, tf.constant(wt), tf.constant(dyt), strides, pad,
                                explicit, fmt, dil)
        except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError):
            continue  # e.g. a dtype/layout TF's CPU build lacks; the float64 check above holds
        # TF's own rounding is within the same bound of the exact result, so allow both
        assert_close(got, ref, 2 * scale, dtype, CONV_TOL, what=f"{dtype} vs TF")



# bfloat16 filter values that are subnormal (1e-39) against dy values of 1e30 (an interior dx
# value 144 x 1.0e-9 in exact arithmetic), and normal values whose products are subnormal
# (1e-20 x 1e-20: 144 x 1.0e-40)
BF16_SUBNORMAL = [(1e-39, 1e30), (1e-20, 1e-20)]


@pytest.mark.parametrize("w_value, dy_value", BF16_SUBNORMAL)
def test_conv_bfloat16_subnormals_as_tf_where_onednn_multiplies_bfloat16(w_value, dy_value):
    """Where oneDNN multiplies bfloat16 in bfloat16 (AVX512-BF16 without AVX512-FP16, or AMX),
    its kernels take subnormal values as zero and flush subnormal results, and TF's own
    bfloat16 conv on such a CPU does the same: tfcompat's result there is TF's, zeros
    (docs/semantics.md §4; tests/test_half.py checks the paths that keep them)."""
    from tfcompat.conv import current_machine
    bf16 = np.dtype(ml_dtypes.bfloat16)
    if current_machine().gemm_type(bf16) != bf16:
        pytest.skip("oneDNN is not installed or does not multiply bfloat16 in bfloat16 here")
    x_shape, ones = [2, 8, 8, 16], [1, 1, 1, 1]
    w = np.full((3, 3, 16, 16), w_value, bf16)
    dy = np.full((2, 8, 8, 16), dy_value, bf16)
    got = T.conv2d_backprop_input(x_shape, w, dy, strides=ones, padding="SAME")
    ref = _tf_conv_grad(x_shape, tf.constant(w), tf.constant(dy), ones, "SAME", [], "NHWC",
                        ones)
    assert not ref.astype(np.float32).any()
    assert_bitwise(got, ref)



@pytest.mark.parametrize("pad,s,d", [("SAME", 1, 1), ("VALID", 2, 1), ("SAME", 1, 2)])
def test_conv_gradient_tape_through_tf_nn_conv2d(pad, s, d, rng):
    x = tf.constant(rng.standard_normal((2, 9, 8, 3)).astype(np.float32))
    w = rng.standard_normal((3, 3, 3, 5)).astype(np.float32)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.nn.conv2d(x, w, strides=s, padding=pad, dilations=d)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    ref = tape.gradient(y, x, output_gradients=dy).numpy()
    for backend in ("cython", "numpy"):
        got = T.conv2d_backprop_input([9, 8], w, dy, strides=[1, s, s, 1], padding=pad,
                                      dilations=[1, d, d, 1], backend=backend)
        scale = T.conv2d_backprop_input([9, 8], np.abs(w), np.abs(dy), strides=[1, s, s, 1],
                                        padding=pad, dilations=[1, d, d, 1], backend="numpy")
        assert_close(got, ref, scale, np.float32, CONV_TOL, what=backend)


def test_tfjs_numeric_pad_and_rounding_against_tf_explicit(rng):
    k = T.get_kernel("Conv2DBackpropInput", "cython").kernel_func
    w = rng.standard_normal((3, 3, 2, 3)).astype(np.float32)
    for pad, mode, h in ((1, None, 7), (1, "ceil", 8), (2, "round", 8), (0, "floor", 8)):
        o = {"ceil": np.ceil, "round": lambda v: np.floor(v + 0.5)}.get(mode, np.floor)(
            (h - 3 + 2 * pad) / 2 + 1)
        o = int(o)
        dy = rng.standard_normal((1, o, o, 3)).astype(np.float32)
        got = k({"dy": dy, "filter": w}, {"inputShape": [1, h, h, 2], "strides": [2, 2],
                                          "pad": pad, "dimRoundingMode": mode} if mode else
                {"inputShape": [1, h, h, 2], "strides": 2, "pad": pad})
        # the same gradient via TF with explicit pads large enough to hold every tap
        extra = max(0, (o - 1) * 2 + 3 - h - 2 * pad)
        ref = _tf_conv_grad([1, h, h, 2], w, dy, [1, 2, 2, 1], "EXPLICIT",
                            [0, 0, pad, pad + extra, pad, pad + extra, 0, 0], "NHWC", [1, 1, 1, 1])
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------------------------
# InterpolateBackward and ResizeGrad
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("transform", ["half_pixel", "align_corners"])
def test_interpolate_2d_nxc_bilinear_bitwise_equals_resize_bilinear_grad(transform, rng):
    dy = _dy(rng, 2, 9, 14, 3)
    src = np.zeros((2, 5, 6, 3), np.float32)
    for mode in ("linear", "bilinear"):
        got = T.interpolate_backward(src, dy, mode=mode, coordinate_transformation_mode=transform)
        ref = tf.raw_ops.ResizeBilinearGrad(grads=dy, original_image=src,
                                            align_corners=transform == "align_corners",
                                            half_pixel_centers=transform == "half_pixel").numpy()
        assert_bitwise(got, ref, mode)
        nc = T.interpolate_backward(src.transpose(0, 3, 1, 2), dy.transpose(0, 3, 1, 2), mode=mode,
                                    coordinate_transformation_mode=transform, data_format="NCX")
        assert_bitwise(nc, ref.transpose(0, 3, 1, 2), "NCX")


INTERP_CASES = [(mode, transform, rank, fmt)
                for mode in ("nearest", "linear")
                for transform in ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel",
                                  "tf_half_pixel_for_nn")
                for rank in (1, 2, 3) for fmt in ("NXC", "NCX")]


@pytest.mark.parametrize("mode,transform,rank,fmt", INTERP_CASES)
def test_interpolate_matches_tf_compositions(mode, transform, rank, fmt, rng):
    in_sp, out_sp = (5, 3, 4)[:rank], (9, 2, 7)[:rank]
    b, c = 2, 3
    if fmt == "NXC":
        src_shape, dy_shape = (b,) + in_sp + (c,), (b,) + out_sp + (c,)
    else:
        src_shape, dy_shape = (b, c) + in_sp, (b, c) + out_sp
    dy = rng.standard_normal(dy_shape).astype(np.float32)
    src = np.zeros(src_shape, np.float32)
    kw = dict(mode=mode, coordinate_transformation_mode=transform, data_format=fmt)
    ref = T.interpolate_backward(src, dy, backend="tensorflow", **kw)
    scale = T.interpolate_backward(src.astype(np.float64), np.abs(dy).astype(np.float64),
                                   backend="numpy", **kw)
    for backend in ("cython", "numpy"):
        got = T.interpolate_backward(src, dy, backend=backend, **kw)
        assert_close(got, ref, scale, np.float32, what=backend)


@pytest.mark.parametrize("transform", ["half_pixel", "align_corners"])
def test_resize_grad_matches_tf(transform, rng):
    dy = rng.standard_normal((2, 3, 11, 6)).astype(np.float32)
    x = np.zeros((2, 3, 4, 9), np.float32)
    ref = T.resize_grad(dy, x, coordinate_transformation_mode=transform, backend="tensorflow")
    scale = T.resize_grad(np.abs(dy).astype(np.float64), x.astype(np.float64),
                          coordinate_transformation_mode=transform, backend="numpy")
    for backend in ("cython", "numpy"):
        got = T.resize_grad(dy, x, coordinate_transformation_mode=transform, backend=backend)
        assert_close(got, ref, scale, np.float32, what=backend)


def test_python_lists_as_tf_takes_them():
    """Lists of Python floats (and ints for the nearest grad) convert as tf.convert_to_tensor
    converts them: TF's result from the same lists, bit for bit for the resize grads (float32),
    within the conv's tolerance for the conv (float32 too: the same dtype as TF's)."""
    rng = np.random.default_rng(17)
    dy = rng.standard_normal((2, 9, 7, 3)).astype(np.float32)
    img = np.zeros((2, 4, 5, 3), np.float32)
    for align, half in BIL_FLAGS:
        got = T.resize_bilinear_grad(dy.tolist(), img.tolist(), align_corners=align,
                                     half_pixel_centers=half)
        want = tf.raw_ops.ResizeBilinearGrad(grads=dy.tolist(), original_image=img.tolist(),
                                             align_corners=align,
                                             half_pixel_centers=half).numpy()
        assert_bitwise(got, want)
    for values in (dy, (dy * 100).astype(np.int32)):
        got = T.resize_nearest_neighbor_grad(values.tolist(), [4, 5], half_pixel_centers=True)
        want = tf.raw_ops.ResizeNearestNeighborGrad(grads=values.tolist(), size=[4, 5],
                                                    half_pixel_centers=True).numpy()
        assert_bitwise(got, want)
    w = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
    d = rng.standard_normal((2, 5, 4, 4)).astype(np.float32)
    got = T.conv2d_backprop_input([2, 9, 7, 3], w.tolist(), d.tolist(), strides=[1, 2, 2, 1],
                                  padding="SAME")
    want = tf.raw_ops.Conv2DBackpropInput(input_sizes=[2, 9, 7, 3], filter=w.tolist(),
                                          out_backprop=d.tolist(), strides=[1, 2, 2, 1],
                                          padding="SAME").numpy()
    assert got.dtype == want.dtype == np.float32
    scale = T.conv2d_backprop_input([2, 9, 7, 3], np.abs(w).astype(np.float64),
                                    np.abs(d).astype(np.float64), strides=[1, 2, 2, 1],
                                    padding="SAME", backend="numpy")
    assert_close(got, want, scale, np.float32, CONV_TOL)



@pytest.mark.parametrize("filter_kind, dy_kind", [
    ("float64", "list"), ("list", "float64"), ("float16", "list"), ("list", "float16"),
    ("list", "tensor float64"), ("list", "list")])
def test_a_list_beside_an_array_binds_as_tf_s_raw_op_binds_it(filter_kind, dy_kind):
    """Conv2DBackpropInput's filter and out_backprop share TF's type attribute T: with a Python
    list among them, T is the first TF tensor's dtype, else the first input's (a list:
    float32), and the rest convert to it. tfcompat's dtype is TF's, its values within the
    conv's tolerance of TF's result on the same arguments."""
    rng = np.random.default_rng(18)
    w = rng.standard_normal((3, 3, 3, 4))
    d = rng.standard_normal((2, 5, 4, 4))

    def arg(kind, a):
        if kind == "list":
            return a.tolist()
        if kind.startswith("tensor"):
            return tf.constant(a.astype(kind.split()[1]))
        return a.astype(kind)

    kw = dict(strides=[1, 2, 2, 1], padding="SAME")
    got = T.conv2d_backprop_input([2, 9, 7, 3], arg(filter_kind, w), arg(dy_kind, d), **kw)
    want = tf.raw_ops.Conv2DBackpropInput(input_sizes=[2, 9, 7, 3], filter=arg(filter_kind, w),
                                          out_backprop=arg(dy_kind, d), **kw).numpy()
    assert got.dtype == want.dtype
    scale = T.conv2d_backprop_input([2, 9, 7, 3], np.abs(w), np.abs(d), backend="numpy", **kw)
    assert_close(got, want, scale, got.dtype, CONV_TOL)

@pytest.mark.parametrize("case", ["valid_empty", "nearest_empty", "filter_no_taps"])
def test_edge_inputs_as_tf_answers_them(case):
    """The reproducers of docs/semantics.md §7's edge inputs, TF's answer beside ours."""
    if case == "valid_empty":
        kw = dict(input_sizes=[1, 1, 1, 1], filter=np.ones((4, 4, 1, 1), np.float32),
                  out_backprop=np.ones((1, 0, 0, 1), np.float32), strides=[1, 2, 2, 1],
                  padding="VALID")
        want = tf.raw_ops.Conv2DBackpropInput(**kw).numpy()
        got = T.conv2d_backprop_input(**kw)
    elif case == "nearest_empty":
        want = tf.raw_ops.ResizeNearestNeighborGrad(grads=np.ones((1, 0, 4, 1), np.float32),
                                                    size=[2, 2]).numpy()
        got = T.resize_nearest_neighbor_grad(np.ones((1, 0, 4, 1), np.float32), [2, 2])
    else:
        kw = dict(input_sizes=[1, 4, 4, 1], filter=np.ones((0, 1, 1, 1), np.float32),
                  out_backprop=np.ones((1, 5, 4, 1), np.float32), strides=[1, 1, 1, 1],
                  padding="VALID")
        want = tf.raw_ops.Conv2DBackpropInput(**kw).numpy()
        got = T.conv2d_backprop_input(**kw)
    assert_bitwise(got, want)
