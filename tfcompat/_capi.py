"""The Python side of the C entry (tfcompat/csrc/capi.pxi, docs/architecture.md#the-c-entry):
a signature the C side has not seen is validated here, by the same policy layer as every
other call, and its cython-backend plan built; errors carry the message a Python caller gets,
in the op's TF argument names."""
from . import _resample as rs
from .api import rename
from .backends import cython_backend as _cb
from .kernel_names import RESIZE_BILINEAR_GRAD, RESIZE_NEAREST_NEIGHBOR_GRAD

_KERNELS = {0: (RESIZE_BILINEAR_GRAD, False), 1: (RESIZE_NEAREST_NEIGHBOR_GRAD, True)}


def resample_plan(kernel, dy_dtype, out_dtype, dy_shape, image_shape, align_corners,
                  half_pixel_centers):
    """The cython backend's ResamplePlan of a TF resize grad's signature (ValueError or
    TypeError for an invalid one)."""
    name, nearest = _KERNELS[kernel]
    try:
        layout = rs._tf_pair_layout(name, rs.ArrayMeta(tuple(dy_shape), dy_dtype),
                                    tuple(image_shape), out_dtype, align_corners,
                                    half_pixel_centers, nearest)
    except (ValueError, TypeError) as exc:
        raise type(exc)(rename(name, str(exc))) from None
    return _cb.resample_plan(layout)


_capsule = None


def capsule():
    """The C entry's PyCapsule ("tfcompat.C_API", a TfcApi of csrc/capi.h), made once; the
    thread count it reports follows tfcompat.set_num_threads from then on."""
    global _capsule
    if _capsule is None:
        from . import _threads
        from ._simd import kernels
        _capsule = kernels.c_api_capsule()
        _threads.on_change(lambda n: kernels.capi_set_threads(n))
    return _capsule
