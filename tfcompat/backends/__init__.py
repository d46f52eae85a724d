"""The built-in backends, and the one place that registers their kernels.

Each backend module lists its kernels as ``KERNEL_CONFIGS``, one named kernel function per
kernel name; :func:`register_all_kernels` registers them all (tfjs's
``register_all_kernels.ts`` is the model). ``import tfcompat`` calls it once. The tensorflow
backend imports TensorFlow only when one of its kernels runs.
"""
from ..registry import register_kernel
from . import cython_backend, numpy_backend, tensorflow_backend

BACKEND_MODULES = (cython_backend, numpy_backend, tensorflow_backend)


def register_all_kernels(overwrite=False):
    """Register every built-in kernel: the cython, numpy and tensorflow backends' five each.
    ``overwrite=True`` replaces registrations of the same keys (after a user replaced one)."""
    for module in BACKEND_MODULES:
        for config in module.KERNEL_CONFIGS:
            register_kernel(config, overwrite=overwrite)
