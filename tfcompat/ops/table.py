"""The op table: one record per kernel. The registry's names (tfcompat.kernel_names), the
functional API's argument names, the policy layer's dtype lists and attribute defaults, the
C entry's codes, the harness and the three fronts read these records; nothing else states
an op's names, dtypes or gradient pairing (docs/architecture.md#the-op-table).

``tf_types`` are TF 2.21's: the type attribute T its op definition allows, of those its CPU
kernels register (tests/test_ops.py reads both from TF's registries)."""
import ml_dtypes
import numpy as np

from .schema import DATA, SHAPE, VALUE, Attr, Input, Op

# -- the registry's names ---------------------------------------------------------------------
RESIZE_BILINEAR_GRAD = "ResizeBilinearGrad"
RESIZE_NEAREST_NEIGHBOR_GRAD = "ResizeNearestNeighborGrad"
CONV2D_BACKPROP_INPUT = "Conv2DBackpropInput"
INTERPOLATE_BACKWARD = "InterpolateBackward"
RESIZE_GRAD = "ResizeGrad"
RESIZE_BILINEAR = "ResizeBilinear"
RESIZE_NEAREST_NEIGHBOR = "ResizeNearestNeighbor"

# -- dtypes -----------------------------------------------------------------------------------
FLOAT16 = np.dtype(np.float16)
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
INT8, UINT8, INT16, UINT16, INT32, INT64 = (
    np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64))
FLOATS = (FLOAT16, BFLOAT16, FLOAT32, FLOAT64)
HALVES = (FLOAT16, BFLOAT16)
# TF's resizes (REGISTER_OP's T; TF 2.21 also registers uint32 and uint64 CPU kernels, which
# its op definition refuses)
RESIZE_TYPES = (FLOAT32, FLOAT64, FLOAT16, BFLOAT16, INT8, UINT8, INT16, UINT16, INT32, INT64)
# ResizeNearestNeighborGrad's T
NEAREST_GRAD_TYPES = (UINT8, INT8, INT32) + FLOATS


# -- shape functions: (input shapes by key, attrs) -> the output's shape -------------------------
def _resized(shapes, attrs):
    b, _, _, c = shapes["images"]
    return (b, attrs["size"][0], attrs["size"][1], c)


def _shape_of(key):
    return lambda shapes, attrs: tuple(shapes[key])


def _conv_input_shape(shapes, attrs):
    return tuple(attrs["inputShape"])


_ALIGN = Attr("alignCorners", "align_corners", False)
_HALF = Attr("halfPixelCenters", "half_pixel_centers", False)
# the C entry's attributes: (TF's name, kind[, the strings a choice takes, in TF's words])
_FLAGS = (("align_corners", "bool"), ("half_pixel_centers", "bool"))
_IMAGES_SIZE = (("images", "tensor"), ("size", "values"))

OPS = {op.name: op for op in (
    Op(RESIZE_BILINEAR, "tensorflow",
       inputs=(Input("images", "images", DATA, RESIZE_TYPES),),
       attrs=(Attr("size", "size", tf_input=True), _ALIGN, _HALF),
       out_dtype=FLOAT32, shape=_resized, tf_types=RESIZE_TYPES, tf_type_input="images",
       fronts={"torch": "resize_bilinear", "jax": "tfcompat_resize"}, api="resize_bilinear",
       method="bilinear", c_args=_IMAGES_SIZE, c_attrs=_FLAGS),
    Op(RESIZE_NEAREST_NEIGHBOR, "tensorflow",
       inputs=(Input("images", "images", DATA, RESIZE_TYPES),),
       attrs=(Attr("size", "size", tf_input=True), _ALIGN, _HALF),
       out_dtype="images", shape=_resized, tf_types=RESIZE_TYPES, tf_type_input="images",
       fronts={"torch": "resize_nearest", "jax": "tfcompat_resize"},
       api="resize_nearest_neighbor", method="nearest", c_args=_IMAGES_SIZE, c_attrs=_FLAGS),
    # float64 grads are tfcompat's extension (TF's op reads float32 grads only)
    Op(RESIZE_BILINEAR_GRAD, "tensorflow",
       inputs=(Input("dy", "grads", DATA, (FLOAT32, FLOAT64)),
               Input("images", "original_image", SHAPE, FLOATS)),
       attrs=(_ALIGN, _HALF),
       out_dtype="images", shape=_shape_of("images"), grad_of=RESIZE_BILINEAR, wrt="images",
       tf_types=FLOATS, tf_type_input="images",
       fronts={"torch": "resize_bilinear_backward", "jax": "tfcompat_resize",
               "tf": RESIZE_BILINEAR_GRAD},
       api="resize_bilinear_grad", method="bilinear",
       c_args=(("grads", "tensor"), ("original_image", "shape")), c_attrs=_FLAGS),
    # the registry takes the original images (shape and dtype); TF's op their size
    Op(RESIZE_NEAREST_NEIGHBOR_GRAD, "tensorflow",
       inputs=(Input("dy", "grads", DATA, NEAREST_GRAD_TYPES),
               Input("images", "size", SHAPE, same_as="dy")),
       attrs=(_ALIGN, _HALF),
       out_dtype="dy", shape=_shape_of("images"), grad_of=RESIZE_NEAREST_NEIGHBOR,
       wrt="images", tf_types=NEAREST_GRAD_TYPES, tf_type_input="dy",
       fronts={"torch": "resize_nearest_backward", "jax": "tfcompat_resize",
               "tf": RESIZE_NEAREST_NEIGHBOR_GRAD},
       api="resize_nearest_neighbor_grad", method="nearest",
       c_args=(("grads", "tensor"), ("size", "values")), c_attrs=_FLAGS),
    # TF's CPU kernels also take int32, which tfcompat does not
    Op(CONV2D_BACKPROP_INPUT, "tensorflow",
       inputs=(Input("dy", "out_backprop", DATA, FLOATS),
               Input("filter", "filter", DATA, FLOATS)),
       attrs=(Attr("inputShape", "input_sizes", tf_input=True),
              Attr("strides", "strides", 1),
              Attr("pad", "explicit_paddings", "valid", ("valid", "same")),
              Attr("dataFormat", "data_format", "NHWC", ("NHWC", "NCHW")),
              Attr("dimRoundingMode", "dimRoundingMode", None, ("floor", "round", "ceil"),
                   extension=True),
              Attr("dilations", "dilations", 1)),
       out_dtype="dy", shape=_conv_input_shape, grad_of="Conv2D", wrt="input",
       tf_types=(FLOAT16, BFLOAT16, FLOAT32, FLOAT64, INT32), tf_type_input="dy",
       fronts={"tf": CONV2D_BACKPROP_INPUT}, api="conv2d_backprop_input",
       c_args=(("input_sizes", "values"), ("filter", "tensor"), ("out_backprop", "tensor")),
       c_attrs=(("strides", "ints"), ("padding", "choice", ("SAME", "VALID", "EXPLICIT")),
                ("explicit_paddings", "ints"), ("data_format", "choice", ("NHWC", "NCHW")),
                ("dilations", "ints"))),
    Op(INTERPOLATE_BACKWARD, "onednn",
       inputs=(Input("src", "src", SHAPE, FLOATS),
               Input("diff_dst", "diff_dst", DATA, same_as="src"),
               Input("sizes", "sizes", VALUE)),
       attrs=(Attr("mode", "mode", None, ("nearest", "linear", "bilinear", "trilinear")),
              Attr("coordinate_transformation_mode", "coordinate_transformation_mode",
                   "half_pixel", ("half_pixel", "align_corners", "asymmetric",
                                  "pytorch_half_pixel", "tf_half_pixel_for_nn")),
              Attr("sizes", "sizes"), Attr("scales", "scales"),
              Attr("data_format", "data_format", "NXC", ("NXC", "NCX"))),
       out_dtype="src", shape=_shape_of("src"), grad_of="Interpolate", wrt="src",
       api="interpolate_backward"),
    Op(RESIZE_GRAD, "onnxruntime",
       inputs=(Input("dY", "dy", DATA, (FLOAT16, FLOAT32, FLOAT64)),
               Input("X", "x", SHAPE, same_as="dY"),
               Input("roi", "roi", VALUE), Input("scales", "scales", VALUE)),
       attrs=(Attr("mode", "mode", "linear", ("linear",)),
              Attr("coordinate_transformation_mode", "coordinate_transformation_mode",
                   "half_pixel", ("half_pixel", "align_corners"))),
       out_dtype="X", shape=_shape_of("X"), grad_of="Resize", wrt="X", api="resize_grad"),
)}

# the five backward kernels, and TF's forward resizes
KERNEL_NAMES = tuple(name for name, op in OPS.items() if op.grad_of)
FORWARD_KERNEL_NAMES = tuple(name for name, op in OPS.items() if not op.grad_of)
# Inputs whose values (not only shape and dtype) the kernels' checks read: they belong to a
# call's cache key (tfcompat/backends/cython_backend.py) with their values.
PARAMETER_INPUTS = {name: op.value_inputs for name, op in OPS.items() if op.value_inputs}
# {forward: its gradient} where both are in the table
GRADIENTS = {op.grad_of: name for name, op in OPS.items() if op.grad_of in OPS}
# TF's resizes by method: {method: (forward, gradient)}
RESIZES = {op.method: (name, GRADIENTS[name]) for name, op in OPS.items()
           if op.method and name in GRADIENTS}
