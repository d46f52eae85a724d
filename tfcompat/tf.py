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
is still TF's). TF's oneDNN rewrite of a Conv2DBackpropInput (on by default on x86; float32 and
bfloat16, and float16 on a CPU with AVX512-FP16) is covered too. ``enable()`` then runs each
kernel it registered once, eager and in a ``tf.function``, and lists only those that ran ours;
a miss is warned about with its reason. docs/architecture.md#inside-tensorflow.
"""
import ctypes
import os
import sys
import threading
import warnings

from . import _capi, _native
from .ops import OPS

# {op: dtype names} that enable() can register: the op table's ops with a TF front, in each
# of TF's types tfcompat computes
COVERED = {name: tuple(d.name for d in op.tf_covered) for name, op in OPS.items()
           if "tf" in op.fronts}
# What enable() takes without ``ops``: every dtype of the resize grads (2-9x TF's kernels,
# TF's bits), and the conv where TF's CPU kernel is Eigen's on most CPUs (float16: 6-12x;
# float64), not where it is oneDNN's (float32 at parity, bfloat16 slower on a CPU that
# multiplies bfloat16 natively; docs/performance.md#inside-tensorflow): those two only when
# named. float16 is taken on CPUs with AVX512-FP16 too, where TF's own is oneDNN's (summed in
# float16; not timed against ours): ours sums in float32 and rounds once.
DEFAULT = {
    "ResizeBilinearGrad": COVERED["ResizeBilinearGrad"],
    "ResizeNearestNeighborGrad": COVERED["ResizeNearestNeighborGrad"],
    "Conv2DBackpropInput": ("float16", "float64"),
}
# the op TF's oneDNN rewrite turns a Conv2DBackpropInput into, for the dtypes TF registers
# kernels of it for (onednn_kernels(): which those are depends on the TF build, not the CPU)
ONEDNN_CONV = "_MklNativeConv2DBackpropInput"
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
                         f"tf{tf.__version__}-tfcompat{__version__}-abi{_native.abi_version()}",
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


# tfc_plugin_register's arguments (csrc/tf_plugin.c)
REGISTER_ARGTYPES = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                     ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p),
                     ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                     ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int),
                     ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_char_p,
                     ctypes.c_size_t]


def register_spec(op):
    """The op table's record of ``op`` as the plugin's kernel reads a call: its C entry
    arguments' names and kinds, in TF's order, and its attributes' TF names, kinds and (a
    choice's) strings."""
    from ._simd import kernels
    record = OPS[op]
    names = [name.encode() for name, _ in record.c_args]
    kinds = [kernels.ARG_KINDS[kind] for _, kind in record.c_args]
    attrs = [a[0].encode() for a in record.c_attrs]
    attr_kinds = [kernels.ATTR_KINDS[a[1]] for a in record.c_attrs]
    choices = ["|".join(a[2]).encode() if len(a) > 2 else None for a in record.c_attrs]

    def array(ctype, values):
        return (ctype * max(len(values), 1))(*values)
    return (array(ctypes.c_char_p, names), array(ctypes.c_int, kinds), len(names),
            array(ctypes.c_char_p, attrs), array(ctypes.c_int, attr_kinds),
            array(ctypes.c_char_p, choices), len(attrs))


def onednn_kernels():
    """{dtype name: label} of TF's own CPU kernels of ``_MklNativeConv2DBackpropInput``, read
    from TF's kernel registry: the dtypes TF's oneDNN rewrite can hand a Conv2DBackpropInput
    to that op in (on a given CPU it rewrites those oneDNN runs there: float32 and bfloat16,
    float16 with AVX512-FP16 or AMX-FP16), and the label its rewritten nodes carry. Empty
    for a TF built without oneDNN."""
    tf = _tensorflow()
    from tensorflow.python.framework import kernels, op_def_registry
    if op_def_registry.get(ONEDNN_CONV) is None:
        return {}
    out = {}
    for k in kernels.get_registered_kernels_for_op(ONEDNN_CONV).kernel:
        if k.device_type != "CPU" or k.priority > 0:     # ours are registered at 1
            continue
        for c in k.constraint:
            if c.name == "T":
                out.update({tf.as_dtype(t).name: k.label for t in c.allowed_values.list.type})
    return out


def _probe_inputs(tf, op, dtype):
    """A tiny valid call of ``op`` in ``dtype``: (raw op, its tensor inputs, its attrs)."""
    import numpy as np
    t = tf.as_dtype(dtype)
    if op == "ResizeBilinearGrad":
        return (tf.raw_ops.ResizeBilinearGrad,
                {"grads": tf.ones([1, 2, 2, 1], tf.float32),
                 "original_image": tf.zeros([1, 1, 1, 1], t)}, {})
    if op == "ResizeNearestNeighborGrad":
        return (tf.raw_ops.ResizeNearestNeighborGrad,
                {"grads": tf.ones([1, 2, 2, 1], t), "size": tf.constant([1, 1], tf.int32)}, {})
    return (tf.raw_ops.Conv2DBackpropInput,
            {"input_sizes": tf.constant([1, 2, 2, 1], tf.int32),
             "filter": tf.constant(np.ones((1, 1, 1, 1)), t),
             "out_backprop": tf.constant(np.ones((1, 2, 2, 1)), t)},
            {"strides": [1, 1, 1, 1], "padding": "VALID"})


def _verify(tf, lib, pairs, onednn):
    """{(op, dtype): None if TF ran ours for it, eager and in a tf.function, else why not}.
    Each call is counted by the C library per kernel and output dtype."""
    pairs = sorted(pairs)
    probes = [_probe_inputs(tf, op, dtype) for op, dtype in pairs]

    def moved(run):
        before = [lib.tfc_plugin_dtype_calls(_capi.CODES[op], tf.as_dtype(d).as_datatype_enum)
                  for op, d in pairs]
        error = None
        try:
            run()
        except Exception as exc:    # a TF kernel that refused the call (ours would not)
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        after = [lib.tfc_plugin_dtype_calls(_capi.CODES[op], tf.as_dtype(d).as_datatype_enum)
                 for op, d in pairs]
        return [a > b for a, b in zip(after, before)], error

    eager, eager_err = [], []
    for i, (fn, inputs, attrs) in enumerate(probes):
        ok, error = moved(lambda: fn(**inputs, **attrs))
        eager.append(ok[i])
        eager_err.append(error)

    @tf.function
    def graph(args):
        return [fn(**a, **attrs) for (fn, _, attrs), a in zip(probes, args)]

    in_graph, graph_err = moved(lambda: graph([inputs for _, inputs, _ in probes]))
    onednn_dtypes = onednn_kernels()
    out = {}
    for i, (op, dtype) in enumerate(pairs):
        where = [w for w, ok in (("eager", eager[i]), ("in a tf.function", in_graph[i]))
                 if not ok]
        if not where:
            out[(op, dtype)] = None
            continue
        why = f"TF ran its own kernel, not tfcompat's ({' and '.join(where)})"
        error = eager_err[i] or graph_err
        if error:
            why += f"; the check call raised {error}"
        if op == "Conv2DBackpropInput" and dtype in onednn_dtypes and not onednn:
            why += (f": TF's oneDNN rewrite hands it to {ONEDNN_CONV}, left to TF's kernel "
                    "by enable(onednn=False)")
        out[(op, dtype)] = why
    return out


def enable(ops=None, *, onednn=True):
    """Build (first use) and load tfcompat's TF kernel library and register its kernels for
    ``ops``: None (:data:`DEFAULT`), "all" (:data:`COVERED`), or a list of op names (all
    their dtypes) and "op:dtype" strings, e.g. ``["ResizeBilinearGrad",
    "Conv2DBackpropInput:float32"]``. ``onednn``: register the conv for TF's oneDNN op too
    (:data:`ONEDNN_CONV`, every dtype TF's registry lists for it: :func:`onednn_kernels`), so
    that a call TF's oneDNN rewrite renames still runs ours; False leaves those calls to TF's
    oneDNN kernel (decided when a conv dtype is first registered).

    Then each newly registered (op, dtype) runs once on a tiny input, eager and in a
    ``tf.function``: :func:`enabled` lists under "ops" those that ran ours, under "missed"
    the others with the reason, and each miss is warned about (``RuntimeWarning``). Returns
    :func:`enabled`'s description. Idempotent and safe from several threads; a later call may
    add kernels, never take one back (TF keeps a kernel for the process's life). Call it
    before building models; it clears TF's eager kernel cache for the ops that already ran."""
    global _state
    wanted = _wanted(ops)
    if not isinstance(onednn, bool):
        raise TypeError(f"onednn: got {onednn!r}; expected True or False")
    with _lock:
        if _state is not None and wanted <= _state["kernels"]:
            return enabled()
        tf = _tensorflow()
        if _state is None:
            path = _build(tf)
            lib = ctypes.CDLL(path)
            lib.tfc_plugin_register.argtypes = REGISTER_ARGTYPES
            lib.tfc_plugin_calls.argtypes = [ctypes.c_int]
            lib.tfc_plugin_calls.restype = ctypes.c_long
            lib.tfc_plugin_python_convs.restype = ctypes.c_long
            lib.tfc_plugin_dtype_calls.argtypes = [ctypes.c_int, ctypes.c_int]
            lib.tfc_plugin_dtype_calls.restype = ctypes.c_long
            _state = {"library": path, "lib": lib, "kernels": set(), "missed": {}}
        lib = _state["lib"]
        api = _native.capi_pointer()
        err = ctypes.create_string_buffer(1024)
        labels = onednn_kernels() if onednn else {}
        new = wanted - _state["kernels"]
        for op, dtype in sorted(new):
            code = tf.as_dtype(dtype).as_datatype_enum
            label = labels.get(dtype) if op == "Conv2DBackpropInput" else None
            alias = None if label is None else ONEDNN_CONV.encode()
            if lib.tfc_plugin_register(api, _capi.CODES[op], op.encode(), code, alias,
                                       None if label is None else label.encode(),
                                       *register_spec(op), err, len(err)) != 0:
                raise RuntimeError("tfcompat.tf.enable(): "
                                   + err.value.decode(errors="replace"))
            _state["kernels"].add((op, dtype))
        from tensorflow.python.eager import context
        context.context().clear_kernel_cache()
        with tf.init_scope():   # eager, even when called while a tf.function is traced
            checked = _verify(tf, lib, new, onednn)
        for (op, dtype), why in sorted(checked.items()):
            if why is not None:
                _state["missed"][(op, dtype)] = why
                warnings.warn(f"tfcompat.tf.enable(): {op} in {dtype} is not covered: {why}",
                              RuntimeWarning, stacklevel=2)
        return enabled()


def enabled():
    """None before :func:`enable`; then {"ops": {op: dtypes whose check call ran ours, eager
    and in a tf.function}, "missed": {op: {dtype: why TF ran its own kernel}}, "library":
    path, "calls": {op: calls our kernels have run}, "conv_calls_through_python": how many of
    the Conv2DBackpropInput calls ran tfcompat's Python conv under the GIL (a strategy other
    than the tile kernels, or NCHW) instead of running in C}."""
    if _state is None:
        return None
    lib = _state["lib"]
    ran = _state["kernels"] - set(_state["missed"])
    missed = {}
    for (op, dtype), why in sorted(_state["missed"].items()):
        missed.setdefault(op, {})[dtype] = why
    return {"ops": {op: tuple(d for d in ds if (op, d) in ran)
                    for op, ds in COVERED.items() if any((op, d) in ran for d in ds)},
            "missed": missed,
            "library": _state["library"],
            "calls": {op: lib.tfc_plugin_calls(_capi.CODES[op]) for op in COVERED},
            "conv_calls_through_python": lib.tfc_plugin_python_convs()}


if __name__ == "__main__":
    print(enable(), file=sys.stderr)
