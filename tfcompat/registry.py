"""A tfjs-style kernel registry.

A kernel is found by its name (one of the five in :mod:`tfcompat.kernel_names`, or a name of
your own) and the name of a backend. The built-in backends list their kernels in one place
each and :func:`tfcompat.backends.register_all_kernels` registers them, as tfjs's
``register_all_kernels.ts`` does. Keys are ``(backend_name, kernel_name)`` tuples, so backend names may
contain any character, underscores included.

Behaviour, each tested:

* registering a key that is already registered raises ``KeyError`` unless
  ``overwrite=True`` is passed (tfjs only warns, which hides mistakes);
* :func:`get_kernel` for a missing key raises ``KeyError`` listing what is registered for that
  kernel name and that backend;
* :func:`unregister_kernel` for a missing key raises ``KeyError`` (as tfjs does).
"""
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from .kernel_names import (CONV2D_BACKPROP_INPUT, INTERPOLATE_BACKWARD,  # noqa: F401
                           KERNEL_NAMES, RESIZE_BILINEAR_GRAD, RESIZE_GRAD,
                           RESIZE_NEAREST_NEIGHBOR_GRAD)

class UnsupportedError(NotImplementedError):
    """Raised by a kernel_func for an input or attribute combination its backend does not
    have (a peer framework without that mode, say). Valid for the kernel, so not a ValueError;
    ``python -m conformance`` reports it as n/a, never as a failure."""


KernelFunc = Callable[[Mapping[str, Any], Mapping[str, Any]], np.ndarray]


@dataclass(frozen=True)
class KernelConfig:
    """One kernel of one backend: ``kernel_func(inputs, attrs) -> numpy.ndarray``."""
    kernel_name: str
    backend_name: str
    kernel_func: KernelFunc

    def __post_init__(self):
        for field in ("kernel_name", "backend_name"):
            value = getattr(self, field)
            if not isinstance(value, str) or not value:
                raise TypeError(f"{field}: got {value!r}; expected a non-empty str")
        if not callable(self.kernel_func):
            raise TypeError(f"kernel_func: got {self.kernel_func!r}; expected a callable "
                            "kernel_func(inputs, attrs)")


_registry: dict[tuple[str, str], KernelConfig] = {}


def register_kernel(config: KernelConfig, *, overwrite: bool = False) -> None:
    """Register ``config`` under ``(config.backend_name, config.kernel_name)``."""
    if not isinstance(config, KernelConfig):
        raise TypeError(f"config: got {type(config).__name__}; expected a KernelConfig")
    key = (config.backend_name, config.kernel_name)
    if key in _registry and not overwrite:
        raise KeyError(f"kernel {config.kernel_name!r} is already registered for backend "
                       f"{config.backend_name!r}; pass overwrite=True to replace it")
    _registry[key] = config


def unregister_kernel(kernel_name: str, backend_name: str) -> KernelConfig:
    """Remove and return a registered kernel; ``KeyError`` when it is not registered."""
    key = (backend_name, kernel_name)
    if key not in _registry:
        raise KeyError(f"kernel {kernel_name!r} is not registered for backend {backend_name!r}")
    return _registry.pop(key)


def get_kernel(kernel_name: str, backend_name: str | None = None) -> KernelConfig:
    """The registered config (of the default backend when ``backend_name`` is None), or
    ``KeyError`` naming what is available."""
    if backend_name is None:
        backend_name = _default_backend
    try:
        return _registry[(backend_name, kernel_name)]
    except KeyError:
        have_backends = sorted(b for b, k in _registry if k == kernel_name)
        have_kernels = sorted(k for b, k in _registry if b == backend_name)
        swapped = ""
        if (kernel_name, backend_name) in _registry:
            swapped = (f"; did you mean get_kernel({backend_name!r}, {kernel_name!r})? (the "
                       "kernel's name comes first)")
        raise KeyError(
            f"kernel {kernel_name!r} is not registered for backend {backend_name!r}; "
            f"backends with {kernel_name!r}: {have_backends or 'none'}; "
            f"kernels of {backend_name!r}: {have_kernels or 'none'}{swapped}") from None


def get_kernels_for_backend(backend_name: str) -> list[KernelConfig]:
    """Every kernel registered for ``backend_name``, sorted by kernel name."""
    return sorted((c for (b, _), c in _registry.items() if b == backend_name),
                  key=lambda c: c.kernel_name)


def list_backends() -> list[str]:
    return sorted({b for b, _ in _registry})


def list_kernels(backend_name: str | None = None) -> list[tuple[str, str]]:
    """Registered ``(backend_name, kernel_name)`` keys, optionally for one backend."""
    return sorted(k for k in _registry if backend_name is None or k[0] == backend_name)


_default_backend = "cython"


def set_backend(backend_name: str) -> None:
    """Choose the backend used when a functional call passes ``backend=None``."""
    if backend_name not in list_backends():
        raise ValueError(f"backend: got {backend_name!r}; expected one of {list_backends()}")
    global _default_backend
    _default_backend = backend_name


def get_backend() -> str:
    return _default_backend
