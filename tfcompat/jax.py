"""TF's resizes inside JAX: :func:`resize`, forward and backward bit for bit TF's
``ResizeBilinear``/``ResizeNearestNeighbor`` and their grads in float32, under ``jax.jit``,
``jax.grad`` (grad of grad too), ``jax.vmap`` and ahead-of-time compilation.

Both directions are XLA FFI custom calls on the CPU (the target ``tfcompat_resize``) that run
tfcompat's kernels from C through its C entry: csrc/jax_ffi.cc, built on first use against the
installed jaxlib's headers with the system C++ compiler and cached under
``$XDG_CACHE_HOME/tfcompat`` or ``~/.cache/tfcompat`` (docs/architecture.md#inside-jax). A
compiled computation names the kernel, the flags and nothing else: the handler finds its plan
by the signature it sees, so an executable from JAX's persistent compilation cache runs in a
new process. JAX is an optional dependency; ``import tfcompat`` never imports it.
"""
import ctypes
import functools
import os
import threading

import numpy as np

try:
    import jax
    import jax.custom_batching
except ImportError as exc:
    raise ImportError(f"tfcompat.jax needs JAX: pip install 'tfcompat[jax]' [{exc}]") from exc

from . import _capi, _native
from ._simd import kernels as _kernels
from . import _checks as ck
from .ops import OPS, RESIZE_BILINEAR, RESIZES

if not hasattr(jax, "ffi") or not hasattr(jax.ffi, "ffi_call"):
    raise ImportError(f"tfcompat.jax needs JAX 0.5 or newer (jax.ffi); this is {jax.__version__}")

__all__ = ["library_info", "register", "resize"]

METHODS = tuple(RESIZES)
# the FFI target every op of the table with a JAX front names (one handler: csrc/jax_ffi.cc)
TARGET = OPS[RESIZE_BILINEAR].fronts["jax"]
# each method's dtypes (the C entry's front rule: nearest also copies integers; a gradient is
# a float's), in the order TF's op lists them
_TYPES = {method: tuple(d for d in OPS[forward].dtypes("images")
                        if d in _capi.front_dtypes(forward))
          for method, (forward, _) in RESIZES.items()}
# each method's C entry kernel codes (csrc/capi.h, read by tfcompat._capi): (forward, grad)
_CODES = {method: (_capi.CODES[forward], _capi.CODES[grad])
          for method, (forward, grad) in RESIZES.items()}
_SOURCE = "jax_ffi.cc"
_lock = threading.Lock()
_lib = None


def register():
    """Build (first use), load and register the FFI target ``tfcompat_resize`` with XLA, once;
    its library's path. :func:`resize` does this when it is first traced; a process that runs
    a compiled computation it did not trace (a deserialized executable) calls it first."""
    return _library()[1]


def _library():
    """(the FFI library, its path), built (first use), loaded and registered with XLA once."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            from . import __version__
            source = os.path.join(_native.CSRC, _SOURCE)
            include = jax.ffi.include_dir()
            who = "tfcompat.jax"

            def steps(tmp, out):
                cxx = _native.compiler("CXX", "c++", who)
                _native.run_tool(cxx + ["-shared", "-fPIC", "-O2", "-std=c++17", "-I", include,
                                        "-I", _native.CSRC, source, "-o", out], who)

            path = _native.build("jax-ffi", "libtfcompat_jax.so",
                                 f"jaxlib{jax.lib.__version__}-tfcompat{__version__}"
                                 f"-abi{_native.abi_version()}",
                                 (source, os.path.join(_native.CSRC, "capi.h"),
                                  os.path.join(_native.CSRC, "pool_claim.h")), include, steps)
            lib = ctypes.CDLL(path)
            lib.tfc_jax_init.argtypes = [ctypes.c_void_p]
            lib.tfc_jax_calls.argtypes = [ctypes.c_int]
            lib.tfc_jax_calls.restype = ctypes.c_long
            if lib.tfc_jax_init(_native.capi_pointer()) != 0:
                raise RuntimeError("tfcompat.jax: the FFI library and tfcompat's kernels have "
                                   "different C entry versions (a stale build?)")
            jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(lib.TfcRun),
                                        platform="cpu")
            _lib = (lib, path)
    return _lib


def library_info():
    """{"library": the FFI library's path, "calls": {kernel: calls the handler has run}}
    (registers the target first if needed)."""
    lib, path = _library()
    names = [name for pair in RESIZES.values() for name in pair]
    return {"library": path, "calls": {n: lib.tfc_jax_calls(_capi.CODES[n]) for n in names}}


# -- checks: the caller's arguments, in its own names, before anything is traced ----------------

def _check_platform(x):
    """CPU only: the FFI target is registered for the CPU platform."""
    if isinstance(x, jax.core.Tracer):
        platform = jax.default_backend()    # (what a jit without a device places it on)
    else:
        platforms = {d.platform for d in x.devices()}
        platform = platforms.pop() if len(platforms) == 1 else ",".join(sorted(platforms))
    if platform != "cpu":
        raise ValueError(f"x: got an array on {platform!r}; tfcompat.jax.resize runs on the "
                         "CPU only (jax.device_put(x, jax.devices('cpu')[0]))")


def resize(x, size, method="bilinear", *, align_corners=False, half_pixel_centers=False):
    """TF's ``ResizeBilinear``/``ResizeNearestNeighbor`` of ``x`` ([batch, height, width,
    channels], NHWC; float32, float16, bfloat16, or float64 with ``jax_enable_x64``;
    ``method="nearest"`` also int8, uint8, int16, uint16, int32, int64) to ``size``
    = [new_height, new_width], differentiable by TF's ``ResizeBilinearGrad``/
    ``ResizeNearestNeighborGrad`` (and twice: the grad's grad is the resize).

    ``align_corners``/``half_pixel_centers`` as in ``tf.raw_ops`` (both False: TF1's legacy
    rule). The result has x's dtype: float32 is TF's, bit for bit; a half type is TF's float32
    result rounded once; float64 is the same formula computed in float64 (TF's own kernel
    would return float32). Unlike ``jax.image.resize`` it never antialiases. Works under
    ``jit``, ``grad``, ``vmap`` (leading batch axes fold into the kernel's batch), on the CPU.
    """
    if method not in METHODS:
        raise ValueError(f"method: got {method!r}; expected one of {list(METHODS)}")
    if not isinstance(x, jax.Array):
        x = jax.numpy.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"x: got shape {tuple(x.shape)} (rank {x.ndim}); expected rank 4 "
                         "([batch, height, width, channels])")
    if np.dtype(x.dtype) not in _TYPES[method]:
        raise TypeError(f"x: got dtype {x.dtype}; tfcompat.jax.resize takes "
                        f"{ck.dtype_names(_TYPES[method])} with method={method!r}")
    size = ck.front_size(size, "size", " (static Python ints, not traced values)")
    ck.front_flags(align_corners, half_pixel_centers)
    _check_platform(x)
    b, h, w, c = x.shape
    ck.front_spatial(x.shape, h, w, method == "nearest")
    ck.check_size((b,) + size + (c,), "size", np.dtype(x.dtype).itemsize)
    sharding = getattr(jax.typeof(x), "sharding", None)
    if (isinstance(sharding, jax.sharding.NamedSharding) and not sharding.mesh.empty
            and any(e is not None for e in tuple(sharding.spec)[1:3])):
        # an explicit H or W sharding (a type) is undone before the call, where JAX
        # differentiates it: the custom call's own types have H and W unsharded
        x = jax.sharding.reshard(x, _spatial_unsharded(sharding.spec, x.ndim))
    return _resize(x, size, (h, w), method, bool(align_corners), bool(half_pixel_centers))


# -- the custom calls and their derivatives --------------------------------------------------------

def _call(kernel, x, out_hw, align_corners, half_pixel_centers):
    """The handler on x ([..., B, H, W, C]), its result [..., B, out_hw, C] in x's dtype."""
    _library()
    shape = tuple(x.shape[:-3]) + tuple(out_hw) + (x.shape[-1],)
    if 0 in shape:
        # no values: x's own (empty) corner broadcast, so the result keeps x's type (its
        # manual axes and sharding), as a custom_vjp's backward must
        return jax.numpy.broadcast_to(x[..., :1, :1, :], shape)
    return _op(kernel, tuple(out_hw), bool(align_corners), bool(half_pixel_centers))(x)


def _spatial_unsharded(spec, ndim):
    """A PartitionSpec's entries for an [..., B, H, W, C] array with H and W unsharded (each
    output pixel reads a neighbourhood of input rows and columns); batch and channels keep
    theirs."""
    entries = list(spec) + [None] * (ndim - len(spec))
    entries[-3] = entries[-2] = None
    return jax.sharding.PartitionSpec(*entries)


def _ffi(x, kernel, out_hw, align_corners, half_pixel_centers):
    """The custom call on x as it is (a shard, under a partitioning). Its result type carries
    x's: the manual axes it varies over (inside shard_map) and, on a mesh its type names
    (shard_map's, an explicit-sharding mesh), x's sharding with H and W unsharded."""
    aval = jax.typeof(x)
    shape = tuple(x.shape[:-3]) + tuple(out_hw) + (x.shape[-1],)
    sharding = getattr(aval, "sharding", None)
    out_sharding = None
    if isinstance(sharding, jax.sharding.NamedSharding) and not sharding.mesh.empty:
        out_sharding = jax.sharding.NamedSharding(sharding.mesh,
                                                  _spatial_unsharded(sharding.spec, x.ndim))
    result = jax.ShapeDtypeStruct(shape, x.dtype, sharding=out_sharding,
                                  manual_axis_type=getattr(aval, "manual_axis_type", None))
    # vmap: the batched operand goes to the same handler with its leading axes (folded there)
    kinds, counts, values = _arguments(kernel, out_hw, align_corners, half_pixel_centers)
    return jax.ffi.ffi_call(TARGET, result, vmap_method="broadcast_all")(
        x, kernel=np.int32(kernel), kinds=kinds, counts=counts, values=values)


def _arguments(kernel, out_hw, align_corners, half_pixel_centers):
    """The handler's description of a call of op ``kernel`` (its record's C arguments): each
    argument's kind (x is the one tensor; a shape-only one is the result's), the values
    arguments' lengths, and their values (``size``: the result's height and width) followed by
    the attributes."""
    op = OPS[_capi.NAMES[kernel]]
    kinds = [_kernels.ARG_KINDS[kind] for _, kind in op.c_args]
    sizes = [{"size": tuple(out_hw)}[arg] for arg, kind in op.c_args if kind == "values"]
    values = _capi.encode(op, {"size": tuple(out_hw)}, {
        "align_corners": align_corners, "half_pixel_centers": half_pixel_centers})
    return (np.array(kinds, np.int64), np.array([len(v) for v in sizes], np.int64),
            np.array(values, np.int64))


@functools.lru_cache(maxsize=None)
def _op(kernel, out_hw, align_corners, half_pixel_centers):
    """The custom call with a partitioning rule: under ``jit`` a batch- or channel-sharded x is
    computed shard by shard, each device its own (no all-gather); an H or W sharding is undone
    first. ``custom_vmap`` gives vmap the handler's folding of leading axes (custom_partitioning
    has no batching rule of its own)."""
    from jax.experimental.custom_partitioning import custom_partitioning

    def local(x):
        return _ffi(x, kernel, out_hw, align_corners, half_pixel_centers)

    partitioned = custom_partitioning(local)

    def shardings(mesh, arg_shapes):
        x = arg_shapes[0]
        spec = getattr(x.sharding, "spec", jax.sharding.PartitionSpec())
        return jax.sharding.NamedSharding(mesh, _spatial_unsharded(spec, len(x.shape)))

    def partition(mesh, arg_shapes, result_shape):
        s = shardings(mesh, arg_shapes)
        return mesh, local, s, (s,)

    def infer(mesh, arg_shapes, result_shape):
        return shardings(mesh, arg_shapes)

    partitioned.def_partition(partition, infer_sharding_from_operands=infer,
                              sharding_rule="... h w c -> ... oh ow c",
                              need_replication_factors=("h", "w", "oh", "ow"))

    @jax.custom_batching.custom_vmap
    def op(x):
        return partitioned(x)

    @op.def_vmap
    def _batched(axis_size, in_batched, x):
        # the batch axis comes first: one more leading axis, folded by the handler
        return op(x), in_batched[0]

    return op


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3, 4, 5))
def _resize(x, size, in_hw, method, align_corners, half_pixel_centers):
    return _call(_CODES[method][0], x, size, align_corners, half_pixel_centers)


def _resize_fwd(x, size, in_hw, method, align_corners, half_pixel_centers):
    return _resize(x, size, in_hw, method, align_corners, half_pixel_centers), None


def _resize_bwd(size, in_hw, method, align_corners, half_pixel_centers, _, g):
    return (_resize_grad(g, size, in_hw, method, align_corners, half_pixel_centers),)


_resize.defvjp(_resize_fwd, _resize_bwd)


# The grad is linear in its input: its own grad is the resize (so grad of grad works).
@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3, 4, 5))
def _resize_grad(g, size, in_hw, method, align_corners, half_pixel_centers):
    return _call(_CODES[method][1], g, in_hw, align_corners, half_pixel_centers)


def _resize_grad_fwd(g, size, in_hw, method, align_corners, half_pixel_centers):
    return _resize_grad(g, size, in_hw, method, align_corners, half_pixel_centers), None


def _resize_grad_bwd(size, in_hw, method, align_corners, half_pixel_centers, _, gg):
    return (_resize(gg, size, in_hw, method, align_corners, half_pixel_centers),)


_resize_grad.defvjp(_resize_grad_fwd, _resize_grad_bwd)
