"""tfcompat: TensorFlow-exact backward passes of image resizing and convolution.

Kernels are looked up in a tfjs-style registry by ``(backend, kernel)``; the functional API
(``resize_bilinear_grad`` and friends) mirrors ``tf.raw_ops`` argument names. Importing
tfcompat registers the ``cython``, ``numpy`` and ``tensorflow`` backends but never imports
TensorFlow.
"""
import os as _os

# Before the kernels load libgomp: unless the user chose a wait policy, idle OpenMP workers spin
# for 10,000 rounds (a fraction of a millisecond here) and then sleep, instead of libgomp's
# default 300,000 (milliseconds). Measured on the 2-core VM: with the default, TF's Conv2D
# backprop called right after one of our calls took 16.4-16.9 ms instead of 10.1 (our idle
# worker held one of the two cores); with 10,000 it took 10.6, and our own times did not change.
# It takes effect only if nothing in the process has loaded libgomp yet (torch does).
if "GOMP_SPINCOUNT" not in _os.environ and "OMP_WAIT_POLICY" not in _os.environ:
    _os.environ["GOMP_SPINCOUNT"] = "10000"

from ._simd import kernel_build  # noqa: E402
from ._memory import memory_pool_stats, release_memory, set_memory_pool_limit
from ._threads import get_num_threads, openmp_enabled, set_num_threads
from .api import (conv2d_backprop_input, interpolate_backward, resize_bilinear_grad, resize_grad,
                  resize_nearest_neighbor_grad)
from .registry import (CONV2D_BACKPROP_INPUT, INTERPOLATE_BACKWARD, KERNEL_NAMES,
                       RESIZE_BILINEAR_GRAD, RESIZE_GRAD, RESIZE_NEAREST_NEIGHBOR_GRAD,
                       KernelConfig, get_backend, get_kernel, get_kernels_for_backend,
                       list_backends, list_kernels, register_kernel, set_backend,
                       unregister_kernel)
from . import backends  # noqa: F401  (registers the built-in backends)

__version__ = "0.1.0"

__all__ = [
    "CONV2D_BACKPROP_INPUT", "INTERPOLATE_BACKWARD", "KERNEL_NAMES", "RESIZE_BILINEAR_GRAD",
    "RESIZE_GRAD", "RESIZE_NEAREST_NEIGHBOR_GRAD", "KernelConfig", "conv2d_backprop_input",
    "get_backend", "get_kernel", "get_kernels_for_backend", "get_num_threads",
    "interpolate_backward", "kernel_build", "list_backends", "list_kernels", "memory_pool_stats",
    "openmp_enabled", "release_memory", "set_memory_pool_limit",
    "register_kernel", "resize_bilinear_grad", "resize_grad", "resize_nearest_neighbor_grad",
    "set_backend", "set_num_threads", "unregister_kernel",
]
