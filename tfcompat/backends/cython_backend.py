"""The ``cython`` backend: the product. Python prepares C-contiguous buffers and per-axis
tables; one call into ``tfcompat._kernels`` does the arithmetic."""
import functools
import os
from typing import NamedTuple

import numpy as np

from .. import _checks as ck, _conv, _memory, _resample as rs
from .._simd import kernels as _kernels
from .._threads import get_num_threads
from ..registry import (CONV2D_BACKPROP_INPUT, RESIZE_BILINEAR_GRAD, RESIZE_NEAREST_NEIGHBOR_GRAD,
                        KernelConfig, register_kernel)

BACKEND = "cython"
_I32 = np.int32
_F32 = np.float32

# The trivial axis (size 1 -> 1, weight exactly 1.0f) pads 1-D and 2-D problems to 3-D.
_TRIVIAL = (np.array([0, 1], _I32), np.array([0], _I32), np.array([1], _I32),
            np.array([1.0], _F32), np.array([0.0], _F32))
for _a in _TRIVIAL:
    _a.flags.writeable = False


def axis_forward_map(axis):
    """(lo, hi, w_lo, w_hi) for a linear axis, or (index,) for a nearest one."""
    O = axis.out_size
    if axis.linear:
        lo, hi = np.empty(O, _I32), np.empty(O, _I32)
        wl, wh = np.empty(O, _F32), np.empty(O, _F32)
        _kernels.linear_axis_map(axis.rule, axis.in_size, O, axis.ort_scale, lo, hi, wl, wh)
        return lo, hi, wl, wh
    idx = np.empty(O, _I32)
    _kernels.nearest_axis_map(axis.rule, axis.in_size, O, idx)
    return (idx,)


def _gather_table(axis, fwd=None):
    fwd = axis_forward_map(axis) if fwd is None else fwd
    if axis.linear:
        return _kernels.invert_axis_map(axis.in_size, *fwd, True)
    ones = np.ones(axis.out_size, _F32)
    return _kernels.invert_axis_map(axis.in_size, fwd[0], fwd[0], ones, ones, False)


_CACHED_AXIS_MAX = 1 << 16


@functools.lru_cache(maxsize=64)
def _cached_tables(axis):
    fwd = axis_forward_map(axis)
    tables = (fwd, _gather_table(axis, fwd))
    for a in tables[0] + tables[1]:
        a.flags.writeable = False
    return tables


def _cacheable(axis):
    return axis.out_size + axis.in_size <= _CACHED_AXIS_MAX


def forward_map(axis):
    """axis_forward_map(axis), from the cache for a small axis (see axis_tables)."""
    return _cached_tables(axis)[0] if _cacheable(axis) else axis_forward_map(axis)


def gather_table(axis):
    """_gather_table(axis), from the cache for a small axis (see axis_tables)."""
    return _cached_tables(axis)[1] if _cacheable(axis) else _gather_table(axis)


def axis_tables(axis):
    """(forward map, gather table) of one axis. Both depend on the axis alone, and a training
    loop asks for the same ones on every step, so axes whose two sizes add up to at most 65536
    are cached (read-only arrays, 64 axes at most); a call of a few KB spent about a third of
    its Python time rebuilding them. Larger axes are built on every call, and only the table
    the call needs."""
    return forward_map(axis), gather_table(axis)


def _half_kind(dtype):
    """True for bfloat16, False for float16, None for any other dtype."""
    if dtype == ck.BFLOAT16:
        return True
    if dtype == ck.FLOAT16:
        return False
    return None


def to_float32(arr, nthreads):
    """A C-contiguous float32 copy of a float16/bfloat16 array (exact), in parallel."""
    src = np.ascontiguousarray(arr)
    out = np.empty(src.shape, _F32)
    _kernels.to_float32(src.reshape(-1).view(np.uint16), out.reshape(-1), _half_kind(arr.dtype),
                        nthreads)
    return out


def round_to(dx, dtype, nthreads):
    """The float32 array ``dx`` rounded once to ``dtype`` (nearest even), in parallel where
    ``dtype`` is float16 or bfloat16."""
    kind = _half_kind(dtype)
    if kind is None or dx.dtype != _F32:
        return dx.astype(dtype)
    src = np.ascontiguousarray(dx)
    out = _memory.empty(src.shape, dtype)
    _kernels.from_float32(src.reshape(-1), out.reshape(-1).view(np.uint16), kind, nthreads)
    return out


# integer nearest grads are summed as unsigned integers of the same width: the sums wrap as TF's
_UNSIGNED = {np.dtype(np.int8): np.dtype(np.uint8), np.dtype(np.uint8): np.dtype(np.uint8),
             np.dtype(np.int32): np.dtype(np.uint32)}


def _kernel_buffers(problem, plan, nthreads):
    """dy as the kernel reads it: C-contiguous, flat, of the plan's source type."""
    if plan.widen_half:
        return to_float32(problem.dy, nthreads).reshape(-1)
    return np.ascontiguousarray(problem.dy, plan.copy_dtype).view(plan.src_dtype).reshape(-1)


def _padded_axes(layout):
    """The layout's axes padded to 3-D at the front (None: the trivial axis)."""
    return (None,) * (3 - len(layout.axes)) + tuple(layout.axes)


def _tables(axes):
    """The kernel's table arguments for 3-D ``axes``: z and y gather tables, x forward map;
    a nearest call passes only the tables' index arrays."""
    z_tab = _TRIVIAL if axes[0] is None else gather_table(axes[0])
    y_tab = _TRIVIAL if axes[1] is None else gather_table(axes[1])
    x_map = forward_map(axes[2])
    if axes[2].linear:
        return z_tab + y_tab + x_map
    return z_tab[:2] + y_tab[:2] + x_map


# A plan keeps its tables when they are this small: 256 plans then hold at most 16 MiB of
# tables, where larger tables (up to ~1 MiB an axis) stay bounded by the axis cache (64 axes).
_PLAN_TABLE_BYTES = 64 << 10


class _Plan(NamedTuple):
    sizes: tuple        # the kernel's (rows_b, Iz, Iy, Ix, Oz, Oy, Ox, C)
    tables: tuple       # its table arguments; None when larger than _PLAN_TABLE_BYTES
    copy_dtype: np.dtype    # dy's C-contiguous copy (when it is not already one)...
    src_dtype: np.dtype     # ...viewed as the type the kernel reads
    widen_half: bool        # float16/bfloat16 dy: widened to float32 by to_float32 instead
    acc_dtype: np.dtype     # dx as the kernel writes it
    dx_size: int
    resampler: object       # a _kernels.Resampler when the tables are kept and dy and dx need
                            # no conversion (float32, float64, the integers), else None


@functools.lru_cache(maxsize=256)
def _plan(layout):
    """What ``resample`` derives from a layout: sizes, small tables and dtypes. Cached per
    layout, so a repeated call only looks it up."""
    axes = _padded_axes(layout)
    in3 = tuple(1 if a is None else a.in_size for a in axes)
    out3 = tuple(1 if a is None else a.out_size for a in axes)
    if layout.channels_last:
        rows_b, C = layout.batch, layout.channels
    else:
        rows_b, C = layout.batch * layout.channels, 1
    tables = _tables(axes) if all(a is None or _cacheable(a) for a in axes) else None
    if tables is not None and sum(t.nbytes for t in tables) > _PLAN_TABLE_BYTES:
        tables = None
    dt = layout.dy_dtype
    if dt in _UNSIGNED:
        copy, src = dt, _UNSIGNED[dt]
        acc = src
    else:
        acc = layout.compute_dtype
        # a linear resize reads float32 or float64 grads; a nearest one sums in the type it reads
        copy = src = (ck.FLOAT64 if dt == ck.FLOAT64 else ck.FLOAT32) if layout.linear else acc
    widen = src == _F32 and _half_kind(dt) is not None
    sizes = (rows_b,) + in3 + out3 + (C,)
    out = layout.out_dtype
    resampler = None
    if (tables is not None and not widen and copy == dt and not layout.empty
            and (out == acc or dt in _UNSIGNED)):
        resampler = _kernels.Resampler(layout.linear, sizes, tables, src, acc, dt,
                                       layout.out_shape, out)
    return _Plan(sizes, tables, copy, src, widen, acc, rows_b * in3[0] * in3[1] * in3[2] * C,
                 resampler)


def resample(problem, num_threads=None):
    out_shape = problem.out_shape
    if problem.empty:
        return np.zeros(out_shape, dtype=problem.out_dtype)
    nthreads = get_num_threads() if num_threads is None else num_threads
    plan = _plan(problem.layout)
    if plan.resampler is not None:
        dx = plan.resampler.run(problem.dy, nthreads)
        if dx is not None:  # dy was an aligned C-contiguous ndarray of the layout's dtype
            return dx
    tables = plan.tables if plan.tables is not None else _tables(_padded_axes(problem.layout))
    dy = _kernel_buffers(problem, plan, nthreads)
    dx = _memory.empty(plan.dx_size, plan.acc_dtype)
    if problem.linear:
        _kernels.linear_backward(dy, dx, *plan.sizes, *tables, nthreads)
    else:
        _kernels.nearest_backward(dy, dx, *plan.sizes, *tables, nthreads)
    dx = dx.reshape(out_shape)
    if problem.dy.dtype.kind in "iu":
        return dx.view(problem.dy.dtype)
    return dx if dx.dtype == problem.out_dtype else round_to(dx, problem.out_dtype, nthreads)


_blas_controller = None


def _blas_single_thread():
    """Limit every loaded BLAS to one thread (its threads would fight our OpenMP threads)."""
    global _blas_controller
    if _blas_controller is None:
        from threadpoolctl import ThreadpoolController
        _blas_controller = ThreadpoolController()
    return _blas_controller.limit(limits=1, user_api="blas")


# The per-image conv computes an image's columns in bands of output rows, each band one GEMM of
# at least BAND_GEMM_BYTES // itemsize column rows (512 float32, 256 float64), into a small ring
# just ahead of the dx rows that read them, so the col2im reads them from cache. Measured on
# the 2-core VM against whole-image columns: C1 float32 16.6 -> 12.8 ms, float64 34.2 -> 24.4;
# C5 13.6 -> 11.1 and 54 -> 45; C2/C3 unchanged. Bands of 128 rows were slower (small GEMMs).
BAND_GEMM_BYTES = int(os.environ.get("TFCOMPAT_BAND_BYTES", "2048"))


def column_ring(p, h_tab, itemsize):
    """(band, cap): output rows per GEMM band and rows in the per-thread ring of columns, or
    (OH, OH) where the ring would not be smaller than the whole image's columns."""
    off, out = h_tab[0], h_tab[1]
    first, last = off[:-1], off[1:] - 1
    rows = last >= first
    if not rows.any():
        return p.OH, p.OH
    # span: how far back from the newest column row computed so far a dx row may still read
    # (with a stride > 1 and dilation, a later dx row can read an older output row)
    newest = np.maximum.accumulate(np.where(rows, out[np.maximum(last, 0)], -1))
    span = int((newest[rows] - out[first[rows]]).max()) + 1
    band = max(1, -(-(BAND_GEMM_BYTES // itemsize) // p.OW))
    cap = band * -(-(band + span - 1) // band)
    return (p.OH, p.OH) if cap >= p.OH else (band, cap)


def conv_backprop_input(problem, num_threads=None):
    p = problem
    if p.empty:
        return np.zeros(p.out_shape, dtype=p.dtype)
    nthreads = get_num_threads() if num_threads is None else num_threads
    ct = p.compute_dtype
    half = _half_kind(p.dtype)
    dy = p.dy if p.channels_last else p.dy.transpose(0, 2, 3, 1)
    w2 = np.ascontiguousarray(p.filter, dtype=ct).reshape(p.fh * p.fw * p.C, p.OC)
    K = p.fh * p.fw * p.C
    rows = p.OH * p.OW
    direct = (p.fh, p.fw, p.sh, p.sw, p.pad_top, p.pad_left, p.OH, p.OW) == (1, 1, 1, 1, 0, 0, p.H, p.W)
    h_tab = _kernels.conv_axis_table(p.H, p.OH, p.fh, p.sh, p.dh, p.pad_top)
    w_tab = _kernels.conv_axis_table(p.W, p.OW, p.fw, p.sw, p.dw, p.pad_left)
    nt = max(1, min(nthreads, p.N))
    band, cap = column_ring(p, h_tab, np.dtype(ct).itemsize)
    if p.N >= 2 and half is not None:
        # float16/bfloat16: each thread widens its own image, and rounds each dx row as it is
        # finished; no float32 copy of the whole dy or dx
        dy = np.ascontiguousarray(dy)
        dx = _memory.empty((p.N, p.H, p.W, p.C), p.dtype)
        work = _memory.empty(nt * _kernels.conv16_work_size(p.OH, p.OW, p.OC, K, p.W * p.C,
                                                            direct, cap), _F32)
        with _blas_single_thread():
            _kernels.conv_backward_per_image_16(
                dy.reshape(-1).view(np.uint16), w2.reshape(-1), work,
                dx.reshape(-1).view(np.uint16), p.N, p.H, p.W, p.C, p.OH, p.OW, p.OC, p.fh, p.fw,
                *h_tab, *w_tab, nt, direct, half, band, cap)
    elif p.N >= 2:
        # one image per thread, single-threaded BLAS inside (scikit-learn's k-means pattern);
        # the path depends on N only, never on the thread count
        dy = np.ascontiguousarray(dy, dtype=ct)
        dx = _memory.empty((p.N, p.H, p.W, p.C), ct)
        cols = np.empty(0, ct) if direct else _memory.empty(nt * cap * p.OW * K, ct)
        with _blas_single_thread():
            _kernels.conv_backward_per_image(
                dy.reshape(-1), w2.reshape(-1), cols, dx.reshape(-1), p.N, p.H, p.W, p.C, p.OH,
                p.OW, p.OC, p.fh, p.fw, *h_tab, *w_tab, nt, direct, band, cap)
    else:
        # a single image: multi-threaded BLAS, then the OpenMP col2im; half types widened first
        dy = to_float32(dy, nthreads) if half is not None else np.ascontiguousarray(dy, dtype=ct)
        dx = _memory.empty((p.N, p.H, p.W, p.C), ct)
        if direct:
            # 1x1, stride 1, no padding: dx is one GEMM, no col2im
            np.matmul(dy.reshape(-1, p.OC), w2.T, out=dx.reshape(-1, p.C))
        else:
            cols = _memory.empty((rows, K), ct)
            np.matmul(dy.reshape(rows, p.OC), w2.T, out=cols)
            _kernels.col2im_nhwc(cols.reshape(-1), dx.reshape(-1), 1, p.H, p.W, p.C,
                                 p.OH, p.OW, p.fh, p.fw, *h_tab, *w_tab, nthreads)
    if not p.channels_last:
        dx = np.ascontiguousarray(dx.transpose(0, 3, 1, 2))
    return dx if dx.dtype == p.dtype else round_to(dx, p.dtype, nthreads)


def _resample_kernel(parser):
    def kernel_func(inputs, attrs):
        return resample(parser(inputs, attrs))
    return kernel_func


# Remembered TF-pair calls per kernel; cleared when full (each value is a plan's Resampler,
# whose tables are at most _PLAN_TABLE_BYTES).
_REMEMBERED_CALLS = 256


class _TfPairKernel:
    """kernel_func of ResizeBilinearGrad and ResizeNearestNeighborGrad. A call whose
    ``tf_pair_key`` (tfcompat/_kernels.pyx: dy's and images' dtypes and shapes and the two
    flags, all that the parser checks) passed the parser before goes straight from that key to
    its layout's Resampler, in C; any other call takes the parser and ``resample``, and is
    remembered. In the comparison command's order (TF, PyTorch and the floor between our calls)
    this and the Resampler took an R4 nearest call through the registry (SPEC.md 7) from
    0.21-0.30 to 0.15-0.19 ms (2026-11-24, three interleaved runs)."""

    def __init__(self, parser):
        self.parser = parser
        self.calls = {}

    def __call__(self, inputs, attrs):
        nthreads = get_num_threads()
        dx = _kernels.tf_pair_cached(self.calls, inputs, attrs, nthreads)
        if dx is not None:
            return dx
        problem = self.parser(inputs, attrs)
        dx = resample(problem, nthreads)
        key = _kernels.tf_pair_key(inputs, attrs)
        if key is not None and not problem.empty:
            resampler = _plan(problem.layout).resampler
            if resampler is not None:
                if len(self.calls) >= _REMEMBERED_CALLS:
                    self.calls.clear()
                self.calls[key] = resampler
        return dx


_TF_PAIR = (RESIZE_BILINEAR_GRAD, RESIZE_NEAREST_NEIGHBOR_GRAD)


def _conv_kernel(inputs, attrs):
    return conv_backprop_input(_conv.conv_problem(inputs, attrs))


for _name, _parser in rs.PARSERS.items():
    _func = _TfPairKernel(_parser) if _name in _TF_PAIR else _resample_kernel(_parser)
    register_kernel(KernelConfig(_name, BACKEND, _func))
register_kernel(KernelConfig(CONV2D_BACKPROP_INPUT, BACKEND, _conv_kernel))
