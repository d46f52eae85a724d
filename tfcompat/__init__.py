"""tfcompat: TensorFlow-exact backward passes of image resizing and convolution, and TF's
forward resizes.

Kernels are looked up in a tfjs-style registry by ``(backend, kernel)``; the functional API
(``resize_bilinear_grad`` and friends) mirrors ``tf.raw_ops`` argument names. Importing
tfcompat registers the ``cython``, ``numpy`` and ``tensorflow`` backends but never imports
TensorFlow.
"""
from ._simd import kernel_build
from ._memory import memory_pool_stats, release_memory, set_memory_pool_limit
from ._threads import get_num_threads, set_num_threads
from .api import (conv2d_backprop_input, conv_strategy, interpolate_backward, resize_bilinear,
                  resize_bilinear_grad, resize_grad, resize_nearest_neighbor,
                  resize_nearest_neighbor_grad)
from .kernel_names import (CONV2D_BACKPROP_INPUT, FORWARD_KERNEL_NAMES, INTERPOLATE_BACKWARD,
                           KERNEL_NAMES, RESIZE_BILINEAR, RESIZE_BILINEAR_GRAD, RESIZE_GRAD,
                           RESIZE_NEAREST_NEIGHBOR, RESIZE_NEAREST_NEIGHBOR_GRAD)
from .registry import (KernelConfig, UnsupportedError, get_backend, get_kernel, get_kernels_for_backend,
                       list_backends, list_kernels, register_kernel, set_backend,
                       unregister_kernel)
from .backends import register_all_kernels

register_all_kernels()

__version__ = "0.1.0"

__all__ = [
    "CONV2D_BACKPROP_INPUT", "FORWARD_KERNEL_NAMES", "INTERPOLATE_BACKWARD", "KERNEL_NAMES",
    "RESIZE_BILINEAR", "RESIZE_BILINEAR_GRAD", "RESIZE_GRAD", "RESIZE_NEAREST_NEIGHBOR",
    "RESIZE_NEAREST_NEIGHBOR_GRAD", "KernelConfig", "conv2d_backprop_input",
    "conv_strategy",
    "get_backend", "get_kernel", "get_kernels_for_backend", "get_num_threads",
    "interpolate_backward", "kernel_build", "list_backends", "list_kernels", "memory_pool_stats",
    "register_all_kernels", "release_memory", "set_memory_pool_limit",
    "register_kernel", "resize_bilinear", "resize_bilinear_grad", "resize_grad",
    "resize_nearest_neighbor", "resize_nearest_neighbor_grad",
    "set_backend", "set_num_threads", "unregister_kernel", "UnsupportedError",
]
