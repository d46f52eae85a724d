"""Every error of docs/semantics.md §7: the type, and a message naming the argument and value."""
import numpy as np
import pytest

import tfcompat as T
from helpers import BACKENDS

f32 = np.float32
DY = np.ones((1, 4, 4, 2), f32)
IMG = np.zeros((1, 2, 2, 2), f32)
W = np.ones((3, 3, 2, 4), f32)
CONV_DY = np.ones((1, 3, 3, 4), f32)


def bil(grads=DY, original_image=IMG, **kw):
    return lambda backend: T.resize_bilinear_grad(grads, original_image, backend=backend, **kw)


def nn(grads=DY, size=(2, 2), **kw):
    return lambda backend: T.resize_nearest_neighbor_grad(grads, size, backend=backend, **kw)


def conv(input_sizes=(1, 5, 5, 2), filter=W, out_backprop=CONV_DY, **kw):
    kw.setdefault("strides", [1, 1, 1, 1])
    kw.setdefault("padding", "VALID")
    return lambda backend: T.conv2d_backprop_input(input_sizes, filter, out_backprop,
                                                   backend=backend, **kw)


def interp(src=np.zeros((1, 2, 2, 2), f32), diff_dst=DY, **kw):
    kw.setdefault("mode", "linear")
    return lambda backend: T.interpolate_backward(src, diff_dst, backend=backend, **kw)


def ort(dy=np.ones((1, 2, 4, 4), f32), x=np.zeros((1, 2, 2, 2), f32), **kw):
    return lambda backend: T.resize_grad(dy, x, backend=backend, **kw)


CASES = [
    # ResizeBilinearGrad
    ("bil both flags", bil(align_corners=True, half_pixel_centers=True), ValueError, "align_corners must be False"),
    ("bil rank", bil(grads=np.ones((4, 4, 2), f32)), ValueError, r"grads: got shape \(4, 4, 2\)"),
    ("bil image rank", bil(original_image=np.zeros((2, 2, 2), f32)), ValueError, "original_image: got shape"),
    ("bil batch", bil(original_image=np.zeros((3, 2, 2, 2), f32)), ValueError, "batch 1"),
    ("bil channels", bil(original_image=np.zeros((1, 2, 2, 5), f32)), ValueError, "channels"),
    ("bil dy dtype", bil(grads=np.ones((1, 4, 4, 2), np.float16)), TypeError, "grads: got dtype float16"),
    ("bil int dy", bil(grads=np.ones((1, 4, 4, 2), np.int32)), TypeError, "grads: got dtype int32"),
    ("bil image dtype", bil(original_image=np.zeros((1, 2, 2, 2), np.int32)), TypeError, "original_image: got dtype int32"),
    ("bil flag type", bil(align_corners="yes"), TypeError, "align_corners: got 'yes'"),
    ("bil zero size", bil(original_image=np.zeros((1, 0, 2, 2), f32)), ValueError, "spatial dimension 0 is 0"),
    ("bil object", bil(grads=np.array([[None]], dtype=object)), TypeError, "grads: got dtype object"),
    ("bil string", bil(grads="abc"), TypeError, "grads: got dtype <U3"),
    ("bil None", bil(grads=None), TypeError, "grads: got None"),
    ("bil ragged", bil(grads=[[1.0], [1.0, 2.0]]), TypeError, "grads: could not convert"),
    # ResizeNearestNeighborGrad
    ("nn size len", nn(size=(2, 2, 2)), ValueError, r"size: got \[2, 2, 2\]"),
    ("nn size neg", nn(size=(-2, 2)), ValueError, "size: got"),
    ("nn size zero", nn(size=(0, 2)), ValueError, "spatial dimension 0 is 0"),
    ("nn size float", nn(size=(2.5, 2)), TypeError, r"size\[0\]: got 2.5"),
    ("nn dtype", nn(grads=np.ones((1, 4, 4, 2), np.int64)), TypeError, "grads: got dtype int64"),
    ("nn bool", nn(grads=np.ones((1, 4, 4, 2), bool)), TypeError, "grads: got dtype bool"),
    ("nn rank", nn(grads=np.ones((4, 4), f32)), ValueError, "grads: got shape"),
    # Conv2DBackpropInput
    ("conv mismatch", conv(input_sizes=(1, 6, 6, 2)), ValueError, "actual = 3, computed = 4"),
    ("conv batch", conv(input_sizes=(2, 5, 5, 2)), ValueError, "out_backprop: batch 1"),
    ("conv out ch", conv(filter=np.ones((3, 3, 2, 5), f32)), ValueError, "out_channels 5"),
    ("conv in ch", conv(input_sizes=(1, 5, 5, 3)), ValueError, "in_channels 2"),
    ("conv grouped", conv(input_sizes=(1, 5, 5, 4)), ValueError, "grouped convolution is not supported"),
    ("conv stride 0", conv(strides=[1, 0, 1, 1]), ValueError, "strides: got"),
    ("conv stride N", conv(strides=[2, 1, 1, 1]), ValueError, "1 in the batch and channel"),
    ("conv stride len", conv(strides=[1, 1]), ValueError, r"strides: got \[1, 1\] \(2 values\)"),
    ("conv dilation 0", conv(dilations=[1, 0, 1, 1]), ValueError, "dilations: got"),
    ("conv padding", conv(padding="FULL"), ValueError, "padding: got 'FULL'"),
    ("conv explicit neg", conv(padding="EXPLICIT", explicit_paddings=[0, 0, -1, 0, 0, 0, 0, 0]), ValueError, "non-negative"),
    ("conv explicit N", conv(padding="EXPLICIT", explicit_paddings=[1, 0, 0, 0, 0, 0, 0, 0]), ValueError, "batch and channel"),
    ("conv explicit len", conv(padding="EXPLICIT", explicit_paddings=[0, 0]), ValueError, "explicit_paddings: got"),
    ("conv explicit with VALID", conv(explicit_paddings=[0] * 8), ValueError, "unless padding is 'EXPLICIT'"),
    ("conv format", conv(data_format="NWHC"), ValueError, "data_format: got 'NWHC'"),
    ("conv dtype mix", conv(filter=np.ones((3, 3, 2, 4), np.float64)), TypeError, "filter: got dtype float64"),
    ("conv int", conv(filter=np.ones((3, 3, 2, 4), np.int32), out_backprop=np.ones((1, 3, 3, 4), np.int32)), TypeError, "out_backprop: got dtype int32"),
    ("conv filter rank", conv(filter=np.ones((3, 2, 4), f32)), ValueError, "filter: got shape"),
    ("conv sizes len", conv(input_sizes=(5, 5, 2)), ValueError, "input_sizes: got"),
    ("conv sizes neg", conv(input_sizes=(1, -5, 5, 2)), ValueError, "input_sizes: got"),
    ("conv too small", conv(input_sizes=(1, 1, 5, 2)), ValueError, "smaller than the dilated filter"),
    # InterpolateBackward
    ("interp mode", interp(mode="cubic"), ValueError, "mode: got 'cubic'"),
    ("interp bilinear rank", interp(mode="bilinear", src=np.zeros((1, 2, 2), f32), diff_dst=np.ones((1, 4, 2), f32)), ValueError, "mode 'bilinear' expects rank 4"),
    ("interp trilinear rank", interp(mode="trilinear"), ValueError, "mode 'trilinear' expects rank 5"),
    ("interp transform", interp(coordinate_transformation_mode="tf_crop_and_resize"), ValueError, "coordinate_transformation_mode: got"),
    ("interp format", interp(data_format="NHWC"), ValueError, "data_format: got 'NHWC'"),
    ("interp sizes", interp(sizes=[4, 5]), ValueError, r"sizes: got \[4, 5\]"),
    ("interp sizes len", interp(sizes=[4]), ValueError, r"sizes: got \[4\]"),
    ("interp scales", interp(scales=[3.0, 2.0]), ValueError, "floor"),
    ("interp scales neg", interp(scales=[-2.0, 2.0]), ValueError, "positive finite"),
    ("interp dtype", interp(diff_dst=np.ones((1, 4, 4, 2), np.int32)), TypeError, "diff_dst: got dtype int32"),
    ("interp dtype mix", interp(src=np.zeros((1, 2, 2, 2), np.float64)), TypeError, "src: got dtype float64"),
    ("interp src rank", interp(src=np.zeros((1, 2, 2, 2, 2), f32)), ValueError, "src: got shape"),
    ("interp channels", interp(src=np.zeros((1, 2, 2, 3), f32)), ValueError, "channels"),
    # ResizeGrad
    ("ort mode", ort(mode="nearest"), ValueError, "mode: got 'nearest'"),
    ("ort transform", ort(coordinate_transformation_mode="asymmetric"), ValueError, "coordinate_transformation_mode"),
    ("ort scales NC", ort(scales=[2, 1, 2, 2]), ValueError, "1.0 for N and C"),
    ("ort scales len", ort(scales=[2, 2]), ValueError, "scales: got"),
    ("ort scales mismatch", ort(scales=[1, 1, 3, 3]), ValueError, "floor"),
    ("ort dtype", ort(dy=np.ones((1, 2, 4, 4), np.int8)), TypeError, "dy: got dtype int8"),
    ("ort dtype mix", ort(x=np.zeros((1, 2, 2, 2), np.float64)), TypeError, "x: got dtype float64"),
    ("ort rank", ort(dy=np.ones((2, 4, 4), f32)), ValueError, "dy: got shape"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,call,exc,match", CASES, ids=[c[0] for c in CASES])
def test_error(name, call, exc, match, backend):
    with pytest.raises(exc, match=match):
        call(backend)


def test_the_functional_api_names_its_own_arguments():
    """The functional API's errors name its arguments (tf.raw_ops's); the registry's keep
    tfjs's names for the same mistakes."""
    cases = [
        (bil(grads=np.ones((1, 4, 4, 2), np.int64)), TypeError, "grads: got dtype int64",
         "dy: got dtype int64", {"dy": np.ones((1, 4, 4, 2), np.int64), "images": IMG}, {}),
        (bil(original_image=np.zeros((1, 2, 2, 3), f32)), ValueError,
         "grads: 2 channels .* do not match original_image's 3", "dy: 2 channels .* do not "
         "match images's 3", {"dy": DY, "images": np.zeros((1, 2, 2, 3), f32)}, {}),
        (bil(align_corners=True, half_pixel_centers=True), ValueError,
         "align_corners: got True together with half_pixel_centers=True",
         "alignCorners: got True together with halfPixelCenters=True", {"dy": DY, "images": IMG},
         {"alignCorners": True, "halfPixelCenters": True}),
    ]
    k = T.get_kernel("ResizeBilinearGrad", "cython").kernel_func
    for call, exc, functional, registry, inputs, attrs in cases:
        with pytest.raises(exc, match=functional):
            call(None)
        with pytest.raises(exc, match=registry):
            k(inputs, attrs)
    with pytest.raises(ValueError, match="filter: in_channels 4 .* does not match "
                       "input_sizes's 2 channels"):
        conv(filter=np.ones((3, 3, 4, 4), f32))(None)
    c = T.get_kernel("Conv2DBackpropInput", "cython").kernel_func
    with pytest.raises(ValueError, match="does not match inputShape's 2 channels"):
        c({"dy": CONV_DY, "filter": np.ones((3, 3, 4, 4), f32)}, {"inputShape": [1, 5, 5, 2]})


def test_registry_attrs_errors():
    k = T.get_kernel("ResizeBilinearGrad", "cython").kernel_func
    with pytest.raises(ValueError, match="unknown attribute"):
        k({"dy": DY, "images": IMG}, {"alignCorner": True})
    with pytest.raises(ValueError, match="missing input 'images'"):
        k({"dy": DY}, {})
    c = T.get_kernel("Conv2DBackpropInput", "cython").kernel_func
    with pytest.raises(ValueError, match="missing attribute 'inputShape'"):
        c({"dy": CONV_DY, "filter": W}, {})
    with pytest.raises(ValueError, match="dimRoundingMode"):
        c({"dy": CONV_DY, "filter": W}, {"inputShape": [1, 5, 5, 2], "pad": "valid",
                                          "dimRoundingMode": "ceil"})
    with pytest.raises(ValueError, match="dimRoundingMode: got 'up'"):
        c({"dy": CONV_DY, "filter": W}, {"inputShape": [1, 5, 5, 2], "pad": 0,
                                          "dimRoundingMode": "up"})
    with pytest.raises(ValueError, match="pad: got -1"):
        c({"dy": CONV_DY, "filter": W}, {"inputShape": [1, 5, 5, 2], "pad": -1})


@pytest.mark.parametrize("front, framework, extra", [("torch", "torch", "tfcompat[torch]"),
                                                     ("jax", "jax", "tfcompat[jax]")])
def test_a_front_without_its_framework_names_the_extra(front, framework, extra):
    """``import tfcompat.torch`` / ``tfcompat.jax`` where the framework cannot be imported (a
    fresh process in which importing it fails, as where it is not installed): an ImportError
    naming the extra to install."""
    import subprocess
    import sys
    code = (f"import sys; sys.modules[{framework!r}] = None\n"
            f"try:\n    import tfcompat.{front}\nexcept ImportError as exc:\n    print(exc)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert f"tfcompat.{front} needs" in run.stdout and f"pip install '{extra}'" in run.stdout
