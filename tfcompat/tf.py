"""tfcompat inside TensorFlow: ``tfcompat.tf.enable()`` makes TF's own gradient computations
(eager, ``tf.function``, Keras ``fit``) run tfcompat's kernels for ResizeBilinearGrad,
ResizeNearestNeighborGrad and Conv2DBackpropInput (the gradient of ``conv2d``, and the
forward of ``conv2d_transpose``/``Conv2DTranspose``).

``enable()`` builds a small kernel library against the installed TF's C kernel API
(tfcompat/csrc/tf_plugin.c, and tf_pool.cc, which runs our kernels' threads on TF's intra-op
pool; with ``tf.sysconfig``'s flags and the system C and C++ compilers, once per TF version,
tfcompat version and C ABI, cached under ``$XDG_CACHE_HOME/tfcompat`` or
``~/.cache/tfcompat``), loads it, and registers its kernels at priority 1 on the CPU, above
TF's own. It clears TF's eager kernel cache, so that ops that already ran eagerly pick ours
too. Under ``jit_compile=True`` XLA compiles these ops itself and ours do not run (the result
is still TF's). TF's oneDNN rewrite of a float32 or bfloat16 Conv2DBackpropInput (on by default
on x86) is covered too. docs/architecture.md#inside-tensorflow.
"""
import ctypes
import os
import sys
import threading

from . import _native

COVERED = {
    "ResizeBilinearGrad": ("float32", "float64", "float16", "bfloat16"),
    "ResizeNearestNeighborGrad": ("uint8", "int8", "int32", "float16", "bfloat16", "float32",
                                  "float64"),
    "Conv2DBackpropInput": ("float16", "bfloat16", "float32", "float64"),
}
# What enable() takes without ``ops``: every dtype of the resize grads (2-9x TF's kernels,
# TF's bits), and the conv where TF's CPU kernel is Eigen's (float16: 6-12x; float64), not
# where it is oneDNN's (float32 at parity, bfloat16 slower on a CPU that multiplies bfloat16
# natively; docs/performance.md#inside-tensorflow): those two only when named.
DEFAULT = {
    "ResizeBilinearGrad": COVERED["ResizeBilinearGrad"],
    "ResizeNearestNeighborGrad": COVERED["ResizeNearestNeighborGrad"],
    "Conv2DBackpropInput": ("float16", "float64"),
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
    return _native.cache_dir("tf-plugin")


def _build(tf):
    """The path of the kernel library for this TF, built if not cached: tf_plugin.c (TF's C
    kernel API) and tf_pool.cc (TF's intra-op pool, through its C++ headers)."""
    from . import __version__
    pool_source = os.path.join(_native.CSRC, "tf_pool.cc")
    flags = tf.sysconfig.get_compile_flags()
    c_flags = [f for f in flags if not f.startswith("--std")]
    link = tf.sysconfig.get_link_flags()
    libdir = [f[2:] for f in link if f.startswith("-L")]
    who = "tfcompat.tf.enable()"

    def steps(tmp, out):
        cc, cxx = _native.compiler("CC", "cc", who), _native.compiler("CXX", "c++", who)
        c_obj, cc_obj = os.path.join(tmp, "plugin.o"), os.path.join(tmp, "pool.o")
        _native.run_tool(cc + ["-c", "-fPIC", "-O2", "-std=c11", "-I", _native.CSRC] + c_flags
                         + [_SOURCE, "-o", c_obj], who)
        _native.run_tool(cxx + ["-c", "-fPIC", "-O2"] + flags + [pool_source, "-o", cc_obj],
                         who)
        _native.run_tool(cxx + ["-shared", c_obj, cc_obj, "-o", out] + link
                         + [f"-Wl,-rpath,{d}" for d in libdir], who)

    return _native.build("tf-plugin", "libtfcompat_tf.so",
                         f"tf{tf.__version__}-tfcompat{__version__}",
                         (_SOURCE, os.path.join(_native.CSRC, "capi.h"), pool_source,
                          os.path.join(_native.CSRC, "pool_claim.h")),
                         " ".join(flags + link), steps)


def _wanted(ops):
    """{(op, dtype)} that ``ops`` names: None (DEFAULT), "all" (COVERED), or names of ops
    (every dtype) and "op:dtype"."""
    if ops is None:
        return {(op, d) for op, ds in DEFAULT.items() for d in ds}
    if ops == "all":
        return {(op, d) for op, ds in COVERED.items() for d in ds}
    names = (ops,) if isinstance(ops, str) else tuple(ops)
    out = set()
    for name in names:
        op, _, dtype = str(name).partition(":")
        if op not in COVERED or (dtype and dtype not in COVERED[op]):
            raise ValueError(f"ops: got {name!r}; expected 'all', an op of {list(COVERED)} or "
                             "'op:dtype' with one of its dtypes (tfcompat.tf.COVERED)")
        out |= {(op, dtype)} if dtype else {(op, d) for d in COVERED[op]}
    if not out:
        raise ValueError(f"ops: got {list(names)}; expected at least one op")
    return out


def enable(ops=None):
    """Build (first use) and load tfcompat's TF kernel library and register its kernels for
    ``ops``: None (:data:`DEFAULT`), "all" (:data:`COVERED`), or a list of op names (all
    their dtypes) and "op:dtype" strings, e.g. ``["ResizeBilinearGrad",
    "Conv2DBackpropInput:float32"]``. Returns :func:`enabled`'s description. Idempotent and
    safe from several threads; a later call may add kernels, never take one back (TF keeps a
    kernel for the process's life). Call it before building models; it clears TF's eager
    kernel cache for the ops that already ran."""
    global _state
    wanted = _wanted(ops)
    with _lock:
        if _state is not None and wanted <= _state["kernels"]:
            return enabled()
        tf = _tensorflow()
        if _state is None:
            path = _build(tf)
            lib = ctypes.CDLL(path)
            lib.tfc_plugin_register.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                                ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
            lib.tfc_plugin_calls.argtypes = [ctypes.c_int]
            lib.tfc_plugin_calls.restype = ctypes.c_long
            _state = {"library": path, "lib": lib, "kernels": set()}
        lib = _state["lib"]
        api = _native.capi_pointer()
        err = ctypes.create_string_buffer(1024)
        from tensorflow.python.framework import op_def_registry
        onednn = op_def_registry.get("_MklNativeConv2DBackpropInput") is not None
        for op, dtype in sorted(wanted - _state["kernels"]):
            code = tf.as_dtype(dtype).as_datatype_enum
            if lib.tfc_plugin_register(api, list(COVERED).index(op), code, int(onednn), err,
                                       len(err)) != 0:
                raise RuntimeError("tfcompat.tf.enable(): "
                                   + err.value.decode(errors="replace"))
            _state["kernels"].add((op, dtype))
        from tensorflow.python.eager import context
        context.context().clear_kernel_cache()
        return enabled()


def enabled():
    """None before :func:`enable`; then {"ops": {op: dtypes covered}, "library": path,
    "calls": {op: calls our kernels have run}, "conv_calls_through_python": how many of the
    Conv2DBackpropInput calls ran tfcompat's Python conv under the GIL (a strategy other than
    the tile kernels, or NCHW) instead of running in C}."""
    if _state is None:
        return None
    lib = _state["lib"]
    kernels = _state["kernels"]
    return {"ops": {op: tuple(d for d in ds if (op, d) in kernels)
                    for op, ds in COVERED.items() if any((op, d) in kernels for d in ds)},
            "library": _state["library"],
            "calls": {"ResizeBilinearGrad": lib.tfc_plugin_calls(0),
                      "ResizeNearestNeighborGrad": lib.tfc_plugin_calls(1),
                      "Conv2DBackpropInput": lib.tfc_plugin_calls(2)},
            "conv_calls_through_python": lib.tfc_plugin_calls(3)}


if __name__ == "__main__":
    print(enable(), file=sys.stderr)
