"""tfcompat inside TensorFlow: ``tfcompat.tf.enable()`` makes TF's own gradient computations
(eager, ``tf.function``, Keras ``fit``) run tfcompat's kernels for ResizeBilinearGrad,
ResizeNearestNeighborGrad and Conv2DBackpropInput (the gradient of ``conv2d``, and the
forward of ``conv2d_transpose``/``Conv2DTranspose``).

``enable()`` builds a small kernel library against the installed TF's C kernel API
(tfcompat/csrc/tf_plugin.c, with ``tf.sysconfig``'s flags and the system C compiler, once per
TF version, tfcompat version and C ABI, cached under ``$XDG_CACHE_HOME/tfcompat`` or
``~/.cache/tfcompat``), loads it, and registers its kernels at priority 1 on the CPU, above
TF's own. It clears TF's eager kernel cache, so that ops that already ran eagerly pick ours
too. Under ``jit_compile=True`` XLA compiles these ops itself and ours do not run (the result
is still TF's). TF's oneDNN rewrite of a float32 or bfloat16 Conv2DBackpropInput (on by default
on x86) is covered too. docs/architecture.md#inside-tensorflow.
"""
import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading

from . import _capi

COVERED = {
    "ResizeBilinearGrad": ("float32", "float64", "float16", "bfloat16"),
    "ResizeNearestNeighborGrad": ("uint8", "int8", "int32", "float16", "bfloat16", "float32",
                                  "float64"),
    "Conv2DBackpropInput": ("float16", "bfloat16", "float32", "float64"),
}
_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc", "tf_plugin.c")
_lock = threading.Lock()
_state = None


def _tensorflow():
    try:
        import tensorflow as tf
    except ImportError:
        raise ImportError("tfcompat.tf.enable() needs TensorFlow: pip install "
                          "'tfcompat[tf]'") from None
    return tf


def cache_dir():
    """Where built kernel libraries are kept."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tfcompat", "tf-plugin")


def _compiler():
    cc = os.environ.get("CC", "cc").split()
    if shutil.which(cc[0]) is None:
        raise RuntimeError(f"tfcompat.tf.enable() builds its kernel library with a C compiler "
                           f"and found none ({cc[0]!r}: set CC or install gcc)")
    return cc


def _build(tf):
    """The path of the kernel library for this TF, built if not cached."""
    from . import __version__
    csrc = os.path.dirname(_SOURCE)
    flags = [f for f in tf.sysconfig.get_compile_flags() if not f.startswith("--std")]
    link = tf.sysconfig.get_link_flags()
    libdir = [f[2:] for f in link if f.startswith("-L")]
    with open(_SOURCE, "rb") as f:
        source = f.read()
    with open(os.path.join(csrc, "capi.h"), "rb") as f:
        header = f.read()
    key = hashlib.sha256(b"\0".join([tf.__version__.encode(), __version__.encode(), source,
                                     header, " ".join(flags + link).encode()])).hexdigest()[:16]
    target_dir = os.path.join(cache_dir(), f"tf{tf.__version__}-tfcompat{__version__}-{key}")
    target = os.path.join(target_dir, "libtfcompat_tf.so")
    if os.path.exists(target):
        return target
    cc = _compiler()
    os.makedirs(target_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target_dir)
    os.close(fd)
    cmd = (cc + ["-shared", "-fPIC", "-O2", "-std=c11", "-I", csrc] + flags + [_SOURCE, "-o", tmp]
           + link + [f"-Wl,-rpath,{d}" for d in libdir])
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        os.unlink(tmp)
        raise RuntimeError("tfcompat.tf.enable(): building the kernel library failed:\n"
                           + " ".join(cmd) + "\n" + run.stderr[-4000:])
    os.replace(tmp, target)    # atomic: another process may build the same library
    return target


def enable(ops=None):
    """Build (first use) and load tfcompat's TF kernel library and register its kernels for
    ``ops`` (names of :data:`COVERED`; None: all of them); returns :func:`enabled`'s
    description. Idempotent and safe from several threads; a later call may add ops, never
    take one back (TF keeps a kernel for the process's life). Call it before building models;
    it clears TF's eager kernel cache for the ops that already ran."""
    global _state
    names = tuple(COVERED) if ops is None else (ops,) if isinstance(ops, str) else tuple(ops)
    unknown = [n for n in names if n not in COVERED]
    if unknown or not names:
        raise ValueError(f"ops: got {list(names)}; expected names among {list(COVERED)}")
    with _lock:
        if _state is not None and set(names) <= _state["ops"]:
            return enabled()
        tf = _tensorflow()
        if _state is None:
            path = _build(tf)
            lib = ctypes.CDLL(path)
            lib.tfc_plugin_register.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                                ctypes.c_char_p, ctypes.c_size_t]
            lib.tfc_plugin_calls.argtypes = [ctypes.c_int]
            lib.tfc_plugin_calls.restype = ctypes.c_long
        else:
            path, lib = _state["library"], _state["lib"]
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        api = get(_capi.capsule(), b"tfcompat.C_API")
        err = ctypes.create_string_buffer(1024)
        from tensorflow.python.framework import op_def_registry
        onednn = op_def_registry.get("_MklNativeConv2DBackpropInput") is not None
        mask = sum(1 << list(COVERED).index(n) for n in set(names))
        if lib.tfc_plugin_register(api, mask, int(onednn), err, len(err)) != 0:
            raise RuntimeError(f"tfcompat.tf.enable(): {err.value.decode(errors='replace')}")
        from tensorflow.python.eager import context
        context.context().clear_kernel_cache()
        done = set(names) | (_state["ops"] if _state else set())
        _state = {"library": path, "lib": lib, "ops": done}
        return enabled()


def enabled():
    """None before :func:`enable`; then {"ops": {op: dtypes covered}, "library": path,
    "calls": {op: calls our kernels have run}, "conv_calls_through_python": how many of the
    Conv2DBackpropInput calls ran tfcompat's Python conv under the GIL (a strategy other than
    the tile kernels, or NCHW) instead of running in C}."""
    if _state is None:
        return None
    lib = _state["lib"]
    return {"ops": {op: d for op, d in COVERED.items() if op in _state["ops"]},
            "library": _state["library"],
            "calls": {"ResizeBilinearGrad": lib.tfc_plugin_calls(0),
                      "ResizeNearestNeighborGrad": lib.tfc_plugin_calls(1),
                      "Conv2DBackpropInput": lib.tfc_plugin_calls(2)},
            "conv_calls_through_python": lib.tfc_plugin_calls(3)}


if __name__ == "__main__":
    print(enable(), file=sys.stderr)
