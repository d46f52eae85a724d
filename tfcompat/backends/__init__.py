"""Built-in backends. Importing this package registers ``numpy``, ``cython`` and
``tensorflow`` (whose kernels import TensorFlow only when called)."""
from . import numpy_backend, cython_backend, tensorflow_backend  # noqa: F401
