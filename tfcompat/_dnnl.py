"""oneDNN's C API through ctypes: the library, a CPU engine and stream, memory descriptors and
primitives. Used by the onednn peer (conformance/peers/onednn_peer.py) and by the cython
backend's conv GEMMs (oneDNN's matmul, where the library is installed:
``pip install 'tfcompat[onednn]'``). Only oneDNN's plain C functions are used, with the enum
values of oneDNN 3.2's headers (include/oneapi/dnnl/dnnl_common_types.h, dnnl_types.h),
checked against ``dnnl_version()`` when the library loads.
"""
import contextlib
import ctypes
import functools
import glob
import os
import sys
import threading

from .registry import UnsupportedError

DNNL_CPU = 1
F16, BF16, F32 = 1, 2, 3
FORMAT_ANY = 1
FORWARD_TRAINING = 64
CONVOLUTION_DIRECT = 0x1
RESAMPLING_NEAREST, RESAMPLING_LINEAR = 0x2fff0, 0x2fff1
ARG_SRC, ARG_DST, ARG_WEIGHTS, ARG_DIFF_SRC, ARG_DIFF_DST = 1, 17, 33, 129, 145
ARG_SCRATCHPAD = 80
QUERY_IMPL_INFO_STR = 8
QUERY_DIFF_SRC_MD, QUERY_WEIGHTS_MD, QUERY_DIFF_DST_MD, QUERY_SCRATCHPAD_MD = 130, 131, 134, 136
SCRATCHPAD_USER = 1
RUNTIME_SEQ, RUNTIME_OMP = 1, 2   # dnnl_config.h: the CPU threading runtime it was built with
MAX_NDIMS = 12
Dims = ctypes.c_int64 * MAX_NDIMS


class _ExecArg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", ctypes.c_void_p)]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint),
                ("gpu_runtime", ctypes.c_uint)]


def _library_path():
    if os.environ.get("TFCOMPAT_DNNL_LIB"):
        return os.environ["TFCOMPAT_DNNL_LIB"]
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        found = sorted(glob.glob(os.path.join(prefix, "lib", "libdnnl.so.3*")))
        if found:
            return found[0]
    return "libdnnl.so.3"


class _Library:
    """libdnnl, a CPU engine and a stream; created on first use."""

    def __init__(self):
        path = _library_path()
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as exc:
            raise UnsupportedError(f"oneDNN is not installed ({exc}): pip install "
                                   "'tfcompat[onednn]'") from None
        lib = self.lib
        lib.dnnl_version.restype = ctypes.POINTER(_Version)
        v = lib.dnnl_version().contents
        self.version = f"{v.major}.{v.minor}.{v.patch}"
        self.cpu_runtime = v.cpu_runtime
        if v.major != 3:
            raise UnsupportedError(f"oneDNN {self.version} at {path}: this adapter speaks "
                                   "oneDNN 3's C API")
        lib.dnnl_primitive_desc_query_md.restype = ctypes.c_void_p
        lib.dnnl_memory_desc_get_size.restype = ctypes.c_size_t
        self.engine = ctypes.c_void_p()
        self.ok(lib.dnnl_engine_create(ctypes.byref(self.engine), DNNL_CPU, 0),
                 "dnnl_engine_create")
        self.stream = ctypes.c_void_p()
        self.ok(lib.dnnl_stream_create(ctypes.byref(self.stream), self.engine, 1),
                 "dnnl_stream_create")
        self.lock = threading.Lock()
        self.execute_address = ctypes.cast(lib.dnnl_primitive_execute, ctypes.c_void_p).value
        self.wait_address = ctypes.cast(lib.dnnl_stream_wait, ctypes.c_void_p).value
        self.set_handle_address = ctypes.cast(lib.dnnl_memory_set_data_handle,
                                              ctypes.c_void_p).value
        self._gomp = None

    @contextlib.contextmanager
    def threads(self, n):
        """Primitives created inside run with ``n`` threads (oneDNN's OpenMP runtime fixes a
        primitive's thread count when it is created, from the creating thread's OpenMP
        setting, which this sets and restores; the sequential runtime always runs one)."""
        if self.cpu_runtime == RUNTIME_SEQ:
            yield
            return
        if self.cpu_runtime != RUNTIME_OMP:
            raise UnsupportedError(f"oneDNN {self.version} was built with threading runtime "
                                   f"{self.cpu_runtime}; tfcompat controls only OpenMP's")
        if self._gomp is None:
            self._gomp = ctypes.CDLL("libgomp.so.1")  # the runtime libdnnl loaded
        before = self._gomp.omp_get_max_threads()
        self._gomp.omp_set_num_threads(n)
        try:
            yield
        finally:
            self._gomp.omp_set_num_threads(before)

    @staticmethod
    def ok(status, what):
        if status != 0:
            if status == 3:  # dnnl_unimplemented
                raise UnsupportedError(f"oneDNN has no implementation for this ({what})")
            raise RuntimeError(f"oneDNN {what} failed with status {status}")

    def md(self, shape, dtype, strides=None):
        """A memory descriptor: plain ``strides`` (in elements), or format ``any``."""
        handle = ctypes.c_void_p()
        dims = Dims(*shape)
        if strides is None:
            self.ok(self.lib.dnnl_memory_desc_create_with_tag(
                ctypes.byref(handle), len(shape), dims, dtype, FORMAT_ANY), "memory_desc")
        else:
            self.ok(self.lib.dnnl_memory_desc_create_with_strides(
                ctypes.byref(handle), len(shape), dims, dtype, Dims(*strides)), "memory_desc")
        return handle

    def primitive(self, pd):
        prim = ctypes.c_void_p()
        self.ok(self.lib.dnnl_primitive_create(ctypes.byref(prim), pd), "primitive_create")
        return prim

    def impl(self, pd):
        name = ctypes.c_char_p()
        self.lib.dnnl_primitive_desc_query(pd, QUERY_IMPL_INFO_STR, 0, ctypes.byref(name))
        return name.value.decode() if name.value else "?"

    def memory(self, md, ptr):
        mem = ctypes.c_void_p()
        self.ok(self.lib.dnnl_memory_create(ctypes.byref(mem), ctypes.c_void_p(md),
                                             self.engine, ctypes.c_void_p(ptr)), "memory_create")
        return mem

    def execute(self, prim, args):
        arr = (_ExecArg * len(args))(*[_ExecArg(a, m) for a, m in args])
        self.ok(self.lib.dnnl_primitive_execute(prim, self.stream, len(args), arr), "execute")
        self.ok(self.lib.dnnl_stream_wait(self.stream), "stream_wait")

    def reorder(self, src_md, dst_md):
        pd = ctypes.c_void_p()
        self.ok(self.lib.dnnl_reorder_primitive_desc_create(
            ctypes.byref(pd), ctypes.c_void_p(src_md), self.engine, ctypes.c_void_p(dst_md),
            self.engine, None), "reorder")
        try:
            return self.primitive(pd)
        finally:
            self.lib.dnnl_primitive_desc_destroy(pd)  # the primitive keeps its own copy

    def new_stream(self):
        stream = ctypes.c_void_p()
        self.ok(self.lib.dnnl_stream_create(ctypes.byref(stream), self.engine, 1), "stream_create")
        return stream

    def query_md(self, pd, what):
        return self.lib.dnnl_primitive_desc_query_md(pd, what, 0)

    def same(self, a, b):
        return bool(self.lib.dnnl_memory_desc_equal(ctypes.c_void_p(a), ctypes.c_void_p(b)))

    def size(self, md):
        return self.lib.dnnl_memory_desc_get_size(ctypes.c_void_p(md))


_LIB = None
_WHY_NOT = None  # the UnsupportedError of the first failed load: not retried on every call


def library():
    global _LIB, _WHY_NOT
    if _LIB is None:
        if _WHY_NOT is not None:
            raise UnsupportedError(_WHY_NOT)
        try:
            _LIB = _Library()
        except UnsupportedError as exc:
            _WHY_NOT = str(exc)
            raise
    return _LIB


def missing():
    try:
        library()
    except UnsupportedError as exc:
        return str(exc)
    return None


class Owner:
    """oneDNN objects freed together, newest first, when this is (or by ``close``): what a
    cached primitive holds, so that a cache entry that is dropped frees its objects, and an
    error halfway through making them frees those already made."""

    def __init__(self):
        self.L = library()
        self.items = []

    def own(self, destroy, handle):
        """``handle``, to be freed by the C function ``destroy`` (e.g. "dnnl_primitive_destroy")."""
        self.items.append((destroy, handle))
        return handle

    def close(self):
        while self.items:
            destroy, handle = self.items.pop()
            getattr(self.L.lib, destroy)(handle)

    __del__ = close


def plain_strides(shape, order):
    """Element strides of a tensor whose logical dims are ``shape`` stored in ``order`` (the
    logical dims from outermost to innermost)."""
    strides = [0] * len(shape)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= shape[d]
    return strides


def ptr(arr):
    return arr.ctypes.data


class Matmul:
    """oneDNN's matmul out[m, n] = a[m, k] @ b[k, n], all row-major (out's rows ``ldc`` apart;
    with ``b_transposed``, b is read from its transpose [n, k], row-major): a and b of
    ``in_dtype`` (F32, BF16, F16), float32 accumulation, ``out_dtype`` out (rounded once), or
    out += a @ b (``accumulate``: oneDNN's sum post-op), created to run with ``threads``
    threads.
    With ``user_scratchpad`` the caller passes the scratchpad (ARG_SCRATCHPAD), so that one
    primitive can run in several threads at once. ``mds``: the (a, b, out) memory descriptors;
    ``scratchpad_md`` and ``scratchpad_bytes``; ``impl``: the implementation oneDNN chose.
    Its oneDNN objects are freed with it."""

    def __init__(self, m, k, n, in_dtype, out_dtype, threads, user_scratchpad, ldc,
                 accumulate=False, b_transposed=False):
        L = library()
        self.owner = own = Owner()
        self.mds = tuple(own.own("dnnl_memory_desc_destroy", L.md(shape, dtype, strides))
                         for shape, dtype, strides in (((m, k), in_dtype, (k, 1)),
                                                       ((k, n), in_dtype,
                                                        (1, k) if b_transposed else (n, 1)),
                                                       ((m, n), out_dtype, (ldc, 1))))
        attr = ctypes.c_void_p()
        L.ok(L.lib.dnnl_primitive_attr_create(ctypes.byref(attr)), "primitive_attr_create")
        try:
            if user_scratchpad:
                L.ok(L.lib.dnnl_primitive_attr_set_scratchpad_mode(attr, SCRATCHPAD_USER),
                     "set_scratchpad_mode")
            if accumulate:
                post_ops = ctypes.c_void_p()
                L.ok(L.lib.dnnl_post_ops_create(ctypes.byref(post_ops)), "post_ops_create")
                try:
                    # dst = 1 * dst + a @ b; 0, 0: no zero point, dst's own data type
                    L.ok(L.lib.dnnl_post_ops_append_sum(post_ops, ctypes.c_float(1.0), 0, 0),
                         "post_ops_append_sum")
                    L.ok(L.lib.dnnl_primitive_attr_set_post_ops(attr, post_ops),
                         "set_post_ops")
                finally:
                    L.lib.dnnl_post_ops_destroy(post_ops)
            pd = ctypes.c_void_p()
            with L.threads(threads):
                L.ok(L.lib.dnnl_matmul_primitive_desc_create(
                    ctypes.byref(pd), L.engine, *self.mds[:2], None, self.mds[2], attr),
                    "matmul_primitive_desc_create")
                own.own("dnnl_primitive_desc_destroy", pd)
                self.primitive = own.own("dnnl_primitive_destroy", L.primitive(pd))
        finally:
            L.lib.dnnl_primitive_attr_destroy(attr)
        self.scratchpad_md = L.query_md(pd, QUERY_SCRATCHPAD_MD)
        self.scratchpad_bytes = L.size(self.scratchpad_md) if self.scratchpad_md else 0
        self.impl = L.impl(pd)


@functools.lru_cache(maxsize=64)
def matmul(m, k, n, in_dtype, out_dtype, threads, user_scratchpad=False, ldc=None,
           accumulate=False, b_transposed=False):
    """The :class:`Matmul` for these arguments, made once."""
    return Matmul(m, k, n, in_dtype, out_dtype, threads, user_scratchpad,
                  n if ldc is None else ldc, accumulate, b_transposed)


# dnnl_get_effective_cpu_isa()'s values (dnnl_types.h, dnnl_cpu_isa_t) are bit sets, each ISA
# holding the bits of the ones it extends: avx512_core_bf16 0xe7, avx512_core_fp16 0x1ef, and the
# AMX ISAs add bits above those
ISA_BF16, ISA_FP16 = 0xe7, 0x1ef


@functools.lru_cache(maxsize=None)
def cpu_isa():
    """(bf16, fp16, amx): whether oneDNN's kernels on this CPU use AVX512-BF16, AVX512-FP16 and
    AMX (dnnl_get_effective_cpu_isa)."""
    isa = library().lib.dnnl_get_effective_cpu_isa()
    return (isa & ISA_BF16 == ISA_BF16, isa & ISA_FP16 == ISA_FP16, isa & ~ISA_FP16 != 0)
