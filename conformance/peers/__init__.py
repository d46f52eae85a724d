"""Peer backends: other frameworks' own, unmodified kernels in tfcompat's registry, so that
``python -m conformance --peers`` judges them against TensorFlow beside tfcompat's and
``python -m asv_benchmarks.compare`` times them beside ours.

- ``tfjs-cpu``: tfjs 4.22.0's CPU kernels under Node.js (runKernel);
  ``python -m conformance.peers.tfjs_peer install``
- ``onednn``: oneDNN 3.2's resampling and convolution primitives; ``pip install
  'tfcompat[onednn]'``
- ``onednn-graph``: oneDNN 3.2's graph API InterpolateBackward op; the same
- ``torch``: PyTorch's CPU backward ops; ``pip install 'tfcompat[torch]'``
- ``jax``: gradients of jax.image.resize (antialias=False) and lax.conv_general_dilated;
  ``pip install 'tfcompat[jax]'``
- ``jax-antialias``: the same with jax.image.resize's default antialias

They live beside the conformance suite, not in the tfcompat package: they are the harness's,
and register into tfcompat's registry (``register_peers()``) like any user's backend.

Each registers only the kernels its framework has, and raises tfcompat.UnsupportedError for
an attribute combination, dtype or layout the framework lacks, or when the framework itself
is not installed (the message says which and how to install it). Adapters map attributes; they
never change a peer's arithmetic: a peer that differs from TF is a finding. ONNX Runtime's
ResizeGrad has no CPU kernel (``onnxruntime-training`` runs it on CUDA or ROCm only), so it is
no peer here.
"""
import importlib

from tfcompat.registry import register_kernel

PEER_BACKENDS = ("tfjs-cpu", "onednn", "onednn-graph", "torch", "jax", "jax-antialias")


def _peer(name):
    # imported when asked for, not with this package: ``python -m
    # conformance.peers.tfjs_peer install`` then runs a module nothing imported yet
    return importlib.import_module(f"{__name__}.{name}")


def register_peers(overwrite=False):
    """Register every peer backend's kernels (no framework is imported until a kernel runs).
    Returns the backend names."""
    for name in ("tfjs_peer", "onednn_peer", "torch_peer", "jax_peer"):
        for config in _peer(name).KERNEL_CONFIGS:
            register_kernel(config, overwrite=overwrite)
    for config in _peer("onednn_peer").GRAPH_KERNEL_CONFIGS:
        register_kernel(config, overwrite=overwrite)
    return PEER_BACKENDS


def missing():
    """{backend: why it cannot run here, or None}."""
    why = {"tfjs-cpu": _peer("tfjs_peer").missing(), "onednn": _peer("onednn_peer").missing(),
           "torch": _peer("torch_peer").missing(), "jax": _peer("jax_peer").missing()}
    why["jax-antialias"] = why["jax"]
    why["onednn-graph"] = why["onednn"]
    return why
