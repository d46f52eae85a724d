"""The ``cython`` backend: the product.

Every kernel function validates through the parsers (tfcompat/_resample.py,
tfcompat/_conv.py), then runs one plan (tfcompat/csrc/plan.pxi, tfcompat/csrc/conv.pxi).

Repeated calls: a resampling call whose inputs are NumPy arrays in the machine's byte order
and whose attributes are plain values has a *call key* holding everything the parser reads
(dtypes, shapes, attribute values and their types, the values of parameter inputs such as
``scales``). A key seen before goes straight to its plan, with no parsing; any other call is
parsed, and its plan is found by its layout. Both live in one bounded cache (:data:`MAX_PLANS`
plans, :data:`MAX_PLAN_BYTES` bytes of tables, oldest out first), so a training loop
validates once and memory stays bounded.
The conv keeps the tables that depend on its shapes only in the same cache.
"""
import contextlib
import dataclasses
import functools
import os
import threading

import numpy as np

from .. import _checks as ck, _conv as _conv_policy, _memory, _resample as rs, _tables
from .._simd import cpu_has as _cpu_has, kernels as _kernels
from .._threads import kernel_threads
from ..kernel_names import (CONV2D_BACKPROP_INPUT, INTERPOLATE_BACKWARD, PARAMETER_INPUTS,
                            RESIZE_BILINEAR_GRAD, RESIZE_GRAD, RESIZE_NEAREST_NEIGHBOR_GRAD)
from ..registry import KernelConfig, UnsupportedError

BACKEND = "cython"
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
F16 = np.dtype(np.float16)
Kind = _kernels.ResampleKind

# ---------------------------------------------------------------------------------------------
# dtype conversions at the edges
# ---------------------------------------------------------------------------------------------


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
    out = np.empty(src.shape, F32)
    _kernels.to_float32(src, out, _half_kind(arr.dtype), nthreads)
    return out


def _avx512_kernels():
    """Whether tiles.h's AVX-512 code (the tile kernels, its transposes and row stores) is
    compiled in and this CPU has AVX512F."""
    return _kernels.conv_tiles_built() and _cpu_has("AVX512F")


@functools.lru_cache(maxsize=None)
def _simd_transposes():
    """Whether conv_filter_taps may transpose 4- and 8-byte values in AVX-512 registers (asked once:
    it is on every conv's path)."""
    return _avx512_kernels()


def swap_inner_axes(arr, nthreads):
    """arr [n, r, s] as a C-contiguous [n, s, r] array of the same dtype (its elements'
    bits), copied by ``nthreads`` threads in 16 x 16 tiles (conv_filter_taps: a batch of
    transposes), several times faster than NumPy's copy of the transposed view (NCHW's dy
    and dx, docs/performance.md)."""
    src = np.ascontiguousarray(arr)
    n, r, s = src.shape
    out = _memory.empty((n, s, r), src.dtype)
    _kernels.conv_filter_taps(src, np.arange(n, dtype=np.int32), out, nthreads, 0,
                              _simd_transposes())
    return out


def round_to(dx, dtype, nthreads):
    """The float32 array ``dx`` rounded once to ``dtype`` (nearest even), in parallel where
    ``dtype`` is float16 or bfloat16."""
    kind = _half_kind(dtype)
    if kind is None or dx.dtype != F32:
        return dx.astype(dtype)
    src = np.ascontiguousarray(dx)
    out = _memory.empty(src.shape, dtype)
    _kernels.from_float32(src, out, kind, nthreads)
    return out


# ---------------------------------------------------------------------------------------------
# Resampling: plans and the one bounded cache
# ---------------------------------------------------------------------------------------------

# (linear, the dtype the kernel reads, the dtype it sums in) -> kernel kind; integer nearest
# grads are summed as unsigned integers of their width, whose sums wrap as TF's do
_KINDS = {
    (True, F32, F32): Kind.LINEAR_F32, (True, F32, F64): Kind.LINEAR_F32_F64,
    (True, F64, F64): Kind.LINEAR_F64,
    (False, F32, F32): Kind.NEAREST_F32, (False, F64, F64): Kind.NEAREST_F64,
    (False, np.dtype(np.uint8), np.dtype(np.uint8)): Kind.NEAREST_U8,
    (False, np.dtype(np.int8), np.dtype(np.int8)): Kind.NEAREST_U8,
    (False, np.dtype(np.int32), np.dtype(np.int32)): Kind.NEAREST_U32,
}


class ResamplePlan:
    """What a validated resampling layout needs at run time: the compiled plan (sizes, tables,
    kernel kind), dy's and dx's dtypes and the conversions between them and the kernel's.

    ``plan(dy, num_threads)`` returns dx. ``dy`` has the layout's dtype and shape (the parser
    or the call key proved it); an aligned C-contiguous dy whose dx needs no rounding goes to
    the kernel as it is."""

    __slots__ = ("kernel", "empty", "out_shape", "out_dtype", "src_dtype", "acc_dtype",
                 "widen", "direct", "work_per_thread", "nbytes")

    def __init__(self, layout):
        self.out_shape = layout.out_shape
        self.out_dtype = layout.out_dtype
        self.empty = layout.empty
        self.kernel = None
        self.nbytes = 0
        if self.empty:
            return
        dt = layout.dy_dtype
        if dt.kind in "iu":
            src = acc = dt
        else:
            acc = layout.compute_dtype
            # a linear resize reads float32 or float64 grads; a nearest one sums in the type
            # it reads; float16/bfloat16 grads are widened to float32 first
            src = (F64 if dt == F64 else F32) if layout.linear else acc
        self.src_dtype, self.acc_dtype = src, acc
        self.widen = dt != src
        self.direct = not self.widen and (acc == self.out_dtype)
        if layout.channels_last:
            rows_b, channels = layout.batch, layout.channels
        else:
            rows_b, channels = layout.batch * layout.channels, 1
        axes = (None,) * (3 - len(layout.axes)) + tuple(layout.axes)
        ins = tuple(1 if a is None else a.in_size for a in axes)
        outs = tuple(1 if a is None else a.out_size for a in axes)
        kind = _KINDS[(layout.linear, src, acc)]
        tables = _tables.resample_tables(layout.axes, channels, kind == Kind.NEAREST_F32)
        # NCX float32 linear: each thread transposes eight channel rows into scratch
        self.work_per_thread = ((outs[2] + ins[2]) * 8
                                if kind == Kind.LINEAR_F32 and channels == 1 else 0)
        self.kernel = _kernels.ResamplePlan(kind, (rows_b,) + ins + outs + (channels,), tables,
                                            self.work_per_thread)
        self.nbytes = tables.nbytes

    def __call__(self, dy, nthreads):
        if self.empty:
            return np.zeros(self.out_shape, dtype=self.out_dtype)
        work = (np.empty(self.work_per_thread * nthreads, F32) if self.work_per_thread
                else None)
        if self.direct:
            flags = dy.flags
            if flags.c_contiguous and flags.aligned:
                dx = _memory.empty(self.out_shape, self.out_dtype)
                self.kernel.run(dy, dx, nthreads, work)
                return dx
        if self.widen:
            src = to_float32(dy, nthreads)
        else:
            src = np.require(dy, requirements="CA")
        dx = _memory.empty(self.out_shape, self.acc_dtype)
        self.kernel.run(src, dx, nthreads, work)
        return dx if dx.dtype == self.out_dtype else round_to(dx, self.out_dtype, nthreads)


MAX_PLANS = 256
MAX_PLAN_BYTES = 64 << 20


class PlanCache:
    """At most ``max_plans`` plans holding at most ``max_bytes`` bytes of tables; a plan larger
    than that is not kept, and the oldest plans make room for a new one. Lookups take no
    lock; insertions do."""

    def __init__(self, max_plans=MAX_PLANS, max_bytes=MAX_PLAN_BYTES):
        self.max_plans, self.max_bytes = max_plans, max_bytes
        self.plans = {}
        self.nbytes = 0
        self._lock = threading.Lock()

    def get(self, key):
        return self.plans.get(key)

    def put(self, key, plan):
        if plan.nbytes > self.max_bytes:
            return
        with self._lock:
            if key in self.plans:
                return
            while self.plans and (len(self.plans) >= self.max_plans
                                  or self.nbytes + plan.nbytes > self.max_bytes):
                self.nbytes -= self.plans.pop(next(iter(self.plans))).nbytes
            self.plans[key] = plan
            self.nbytes += plan.nbytes

    def clear(self):
        with self._lock:
            self.plans.clear()
            self.nbytes = 0


_PLANS = PlanCache()


class _Unkeyable(Exception):
    pass


def _freeze(value):
    """A hashable, type-exact stand-in for an attribute or parameter value."""
    t = type(value)
    if value is None or t in (bool, int, float, str):
        return (t, value)
    if t in (list, tuple):
        return (t, tuple(_freeze(v) for v in value))
    if (t is np.ndarray and value.dtype.kind in "biuf" and value.dtype.isnative
            and value.size <= 64):
        return (t, value.dtype, value.shape, value.tobytes())
    raise _Unkeyable


def call_key(kernel_name, inputs, attrs):
    """The call key (see the module docstring), or None for a call it cannot describe: one
    whose inputs are not NumPy arrays, or whose attributes are not plain values."""
    if type(inputs) is not dict or type(attrs) is not dict:
        return None
    params = PARAMETER_INPUTS.get(kernel_name, ())
    parts = [kernel_name]
    try:
        for name, value in inputs.items():
            if name in params:
                parts.append((name, _freeze(value)))
            elif type(value) is np.ndarray and value.dtype.isnative:
                # (the other byte order is converted by the parser, so never skips it)
                parts.append((name, value.dtype, value.shape))
            elif value is None:
                parts.append((name, None))
            else:
                return None
        for name, value in attrs.items():
            t = type(value)
            parts.append((name, t, value) if t is bool or t is str else (name, _freeze(value)))
    except _Unkeyable:
        return None
    return tuple(parts)


def _resample(kernel_name, dy_name, parser, inputs, attrs):
    key = call_key(kernel_name, inputs, attrs)
    plan = None if key is None else _PLANS.get(key)
    if plan is not None:
        return plan(inputs[dy_name], kernel_threads())
    problem = parser(inputs, attrs)
    plan = _PLANS.get(problem.layout)
    if plan is None:
        plan = ResamplePlan(problem.layout)
        _PLANS.put(problem.layout, plan)
    if key is not None:
        _PLANS.put(key, plan)
    return plan(problem.dy, kernel_threads())


def resize_bilinear_grad(inputs, attrs):
    return _resample(RESIZE_BILINEAR_GRAD, "dy", rs.resize_bilinear_grad_problem, inputs, attrs)


def resize_nearest_neighbor_grad(inputs, attrs):
    return _resample(RESIZE_NEAREST_NEIGHBOR_GRAD, "dy", rs.resize_nearest_neighbor_grad_problem,
                     inputs, attrs)


def interpolate_backward(inputs, attrs):
    return _resample(INTERPOLATE_BACKWARD, "diff_dst", rs.interpolate_backward_problem, inputs,
                     attrs)


def resize_grad(inputs, attrs):
    return _resample(RESIZE_GRAD, "dY", rs.resize_grad_problem, inputs, attrs)


# ---------------------------------------------------------------------------------------------
# Conv2DBackpropInput
# ---------------------------------------------------------------------------------------------

_blas_controller = None


def _blas_single_thread():
    """Limit every loaded BLAS to one thread (its threads would fight our OpenMP threads)."""
    global _blas_controller
    if _blas_controller is None:
        from threadpoolctl import ThreadpoolController
        _blas_controller = ThreadpoolController()
    return _blas_controller.limit(limits=1, user_api="blas")


def _env_int(name, default):
    """A tuning variable's integer (docs/performance.md), or a ValueError that names it."""
    value = os.environ.get(name, str(default))
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}: got {value!r}; expected an integer") from None


# Each per-image column band is one GEMM of at least this many bytes of column rows; the ring
# of bands keeps the columns in cache for the col2im (docs/performance.md).
BAND_GEMM_BYTES = _env_int("TFCOMPAT_BAND_BYTES", 2048)


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


_STORAGE = {None: 0, False: 1, True: 2}   # conv.pxi's STORE_NATIVE, STORE_FLOAT16, STORE_BFLOAT16

# The gather strategy's band of gathered dy rows: at most this many values, with our BLAS and
# with oneDNN's matmuls (docs/performance.md)
GATHER_VALUES = _env_int("TFCOMPAT_GATHER_VALUES", 1 << 19)
DNNL_GATHER_VALUES = _env_int("TFCOMPAT_DNNL_GATHER_VALUES", 1 << 17)
# The gather bands of one image of a 1x1 conv: GEMMs of this many rows, so that the image has
# enough units for the threads to share (docs/performance.md)
ONE_IMAGE_BAND_M = 128
# float32/float64/float16 (and bfloat16 without oneDNN's matmul) with two or more images:
# "auto" picks (_use_gather), "gather" forces the gather strategy, any other value the col2im
CONV_STRATEGY = os.environ.get("TFCOMPAT_CONV_STRATEGY", "auto")
# the tile kernels (conv.pxi's _tile_phase_band): "auto" where they run (_use_tiles,
# _use_oc_lanes), "off" never
CONV_TILES = os.environ.get("TFCOMPAT_CONV_TILES", "auto")


def gather_tables(p, ct, dnnl=False, nthreads=1, short_bands=False, tiles=0, wide=0):
    """The gather strategy's tables (conv.pxi, ConvPlan's ``gather``): for each stride phase
    (py, px), its dx rows and columns, the taps that reach it, where each tap reads dy, and the
    filter's taps as a [taps * OC, C] matrix of dtype ``ct``; and the scratch per worker, in
    values of the compute type, for the gathered A and the GEMM's output. All but the filter's
    taps depend on the shapes only and are made once per geometry (:func:`_gather_geometry`);
    the taps are copied out of this call's filter by ``nthreads`` threads. ``short_bands``: for
    one image of a 1x1 conv, whose bands are the only units the threads share, bands of
    :data:`ONE_IMAGE_BAND_M` GEMM rows.

    ``dnnl`` (conv.pxi's _dnnl_band, ``ct`` the matmuls' input type): every phase gets
    Wq = ceil(W / sw) columns and the phases of a py one band, so that their outputs share
    dx's row layout; A holds the band's dy rows with one tap row each, in ``ct``; the output
    is float32.

    ``tiles`` (conv.pxi's _tile_phase_band): the phases and bands of the gather without
    oneDNN, and as scratch only the tile kernel's pointers, a row of zeros and a row's running
    totals; where the filter runs in more than one group of columns of at most 2 MiB of
    taps (conv.pxi's conv_tile_raw), the filter itself instead of its taps (each worker copies
    the taps of the groups it runs, widened to float32: conv.pxi's tile_raw); 2: the tile
    kernel for few channels (tiles.h's tfc_oc_rows), rows taken alone, each tap's filter as
    [C, OC], its own layout (OC rounded up to a multiple of 16, zeros from OC on). ``wide``: see
    :func:`_gather_geometry`. Last in the tuple, the filter's taps' indices (of its
    fh * fw) in the order of the taps."""
    strides, info, offy, offx, tap_rows, a_values, out_values, merged = _geometry(
        p, dnnl, ct.itemsize == 2, short_bands, tiles, wide)
    if tiles:
        a_values, out_values = _kernels.conv_tile_scratch(p.fh * p.fw, p.OC, p.W), 0
    if tiles == 2:
        w = np.asarray(p.filter, ct).reshape(p.fh * p.fw, p.C, p.OC)
        taps = _aligned_empty((len(tap_rows), p.C, _tile_channels(p.OC)), ct)
        taps[:, :, p.OC:] = 0
        taps[:, :, :p.OC] = w[tap_rows]
        return (strides, info, offy, offx, taps.reshape(-1), a_values, out_values, merged,
                tap_rows)
    filt = p.filter
    if tiles and p.C % 16:
        # the tile kernel reads whole vectors of 16 channels: zeros in the columns from C on
        filt = np.zeros(p.filter.shape[:2] + (_tile_channels(p.C), p.OC), p.filter.dtype)
        filt[:, :, :p.C] = p.filter
    if tiles and _kernels.conv_tile_raw(p.fh * p.fw, p.C, p.OC):
        # a filter run in groups of columns: each worker copies (and widens) the taps of its
        # own groups (conv.pxi's tile_raw), so it goes as it is
        return (strides, info, offy, offx, np.ascontiguousarray(filt).reshape(-1), a_values,
                out_values, merged, tap_rows)
    taps = _filter_taps(filt, tap_rows, ct, nthreads,
                        _kernels.CONV_TILE_BLOCK if tiles else 0)
    if (merged >= 0).any():
        # a merged row phase's taps side by side: [OC, sw * C], after every phase's own
        blocks = [taps]
        for py in np.flatnonzero(merged >= 0):
            own = [taps[o:o + p.OC * p.C].reshape(p.OC, p.C) for o in info[py * p.sw:
                                                                          (py + 1) * p.sw, 7]]
            blocks.append(np.stack(own, axis=1).reshape(-1))
        taps = np.concatenate(blocks, out=_aligned_empty(sum(b.size for b in blocks),
                                                         taps.dtype))
    return strides, info, offy, offx, taps, a_values, out_values, merged, tap_rows


class _SharedTables:
    """Tables that depend on a conv's shapes only, kept in the plan cache (its bound counts
    their bytes) and shared, read-only, by every call of those shapes."""

    def __init__(self, value):
        self.value = value
        arrays = [a for a in value if isinstance(a, np.ndarray)]
        for arr in arrays:
            arr.flags.writeable = False
        self.nbytes = sum(arr.nbytes for arr in arrays)


def _shared_tables(make, *args):
    """``make(*args)`` (a tuple holding the tables), made once while the plan cache keeps it."""
    key = (CONV2D_BACKPROP_INPUT, make.__name__) + args
    entry = _PLANS.get(key)
    if entry is None:
        entry = _SharedTables(make(*args))
        _PLANS.put(key, entry)
    return entry.value


def _geometry(p, dnnl, bits, short_bands, tiles=False, wide=0):
    """This conv's :func:`_gather_geometry`, from the plan cache."""
    # oneDNN's matmuls read dy's own values unless a half type is widened for float32 GEMMs
    reads_dy = dnnl and (bits or p.dtype == F32)
    return _shared_tables(_gather_geometry, p.H, p.W, p.C, p.OC, p.OH, p.OW, p.fh, p.fw, p.sh,
                          p.sw, p.dh, p.dw, p.pad_top, p.pad_left,
                          DNNL_GATHER_VALUES if dnnl else GATHER_VALUES, dnnl, bits,
                          short_bands, reads_dy, tiles, wide)


def _column_classes(oys, oxs, hp, band, wq, oh, ow, sw, reads_dy):
    """How many column classes a phase's GEMMs take (its info's last column, conv.pxi's
    _dnnl_band; 0: none, the gather). Class r holds the phase's columns i = r, r + ntx, ...
    (ntx: its taps per tap row); where the taps read consecutive dy columns and ntx divides
    dy's width, class r's A rows are the runs of ntx pixels of dy shifted by offx[0] + r
    columns, ntx apart: dy itself for the class with no shift, read in place in the bands
    whose dy rows are all inside dy, and a shifted copy for the others (one copy of dy per
    class instead of the gather's ntx). Used where one class has no shift, the matmuls read
    dy's own values and at least half the phase's rows are in such bands (else the classes
    copy as much as the gather, in GEMMs 1 / ntx as tall: C3's ran 2-3 % slower); with more
    than one class only for sw > 1, whose phase outputs are placed column by column anyway."""
    ntx = len(oxs)
    if not (reads_dy and oys and ntx and wq == ow and ow % ntx == 0 and (ntx == 1 or sw > 1)):
        return 0
    if oxs != list(range(oxs[0], oxs[0] + ntx)) or not oxs[0] <= 0 < oxs[0] + ntx:
        return 0
    inside = sum(min(band, hp - j0) for j0 in range(0, hp, band)
                 if j0 + min(oys) >= 0 and min(j0 + band, hp) - 1 + max(oys) < oh)
    return ntx if 2 * inside >= hp else 0


def _gather_geometry(H, W, C, OC, OH, OW, fh, fw, sh, sw, dh, dw, pad_top, pad_left, limit,
                     dnnl, bits, short_bands, reads_dy, tiles=False, wide=0):
    """:func:`gather_tables` but the filter's taps: (strides, phase info, offy, offx, the
    taps' indices into the filter's fh * fw, A values, output values, merged row phases).
    ``limit``: the values of a band's A; ``bits``: A holds 16-bit values (in float32
    scratch); ``short_bands``: at most :data:`ONE_IMAGE_BAND_M` GEMM rows (rounded up to whole
    rows); ``reads_dy``: oneDNN's matmuls can read dy's values in place (their column classes,
    :func:`_column_classes`). With oneDNN, a row phase py is merged (its entry: where its
    merged taps start in the taps, else -1) where each of its sw > 1 phases takes one tap, read
    at the phase's own dy position, and the phases fill dx's rows whole (conv.pxi's
    ph_merged). ``tiles`` (the tile kernel, which gathers nothing): where it takes each row
    alone, bands of an eighth of the phase's rows (one row for 15 or fewer), so that even one
    image has enough bands for the threads to share out evenly, and few enough that each
    band's set-up costs nothing to speak of; a run of narrow rows keeps its band. ``wide``:
    the values of a half type's widened window (conv.pxi's TILE_WIDE_VALUES), which holds a
    band's dy rows, so that its bands read at most that many (a row alone at least), and a
    worker's scratch stays that small, however large the image."""
    wq = -(-W // sw)
    if tiles == 1:  # the tile kernel's taps have C rounded up to a multiple of 16 columns
        C = _tile_channels(C)
    elif tiles == 2:  # and the tile kernel for few channels, OC
        OC = _tile_channels(OC)
    info, offy, offx, tap_rows, merged = [], [], [], [], []
    a_values = out_values = offset = 0
    # only the phases that hold dx rows and columns (py < H, px < W): a stride larger than the
    # image leaves the others empty, and they would make the tables grow with the stride
    for py in range(min(sh, H)):
        kys = [k for k in range(fh) if (py + pad_top - k * dh) % sh == 0]
        hp = len(range(py, H, sh))
        group, spans, own_tap, reads = [], [], [], []
        for px in range(min(sw, W)):   # oneDNN's gather: only where sw <= W (_onednn_gather)
            # descending, so that the taps read dy's columns in ascending order: with
            # consecutive columns the kernel gathers them in one copy (_gather_band)
            kxs = [k for k in reversed(range(fw)) if (px + pad_left - k * dw) % sw == 0]
            wp = wq if dnnl else len(range(px, W, sw))
            # tap (ky, kx) of dx row py + sh j reads dy row j + (py + pad_top - ky dh) / sh
            oys = [(py + pad_top - k * dh) // sh for k in kys]
            span = max(oys) - min(oys) if oys else 0
            if dnnl:    # A: band + span dy rows of one tap row each
                band = (limit // max(1, wp * len(kxs) * OC) - span) if kys else limit
            else:
                band = limit // max(1, wp * len(kys) * len(kxs) * OC)
            if short_bands:
                band = min(band, -(-ONE_IMAGE_BAND_M // max(1, wp)))
            if tiles and (tiles == 2 or not _kernels.conv_tile_rows_run(wp)):
                band = max(1, hp // 8)
                if wide:
                    # two of a half type's bands and the span of their taps in its window,
                    # so that it is widened once for two bands: a 16th, 32nd, ... of the
                    # rows, which the threads share as evenly as an 8th
                    fit, parts = max(1, (wide // max(1, OW * OC) - span) // 2), 8
                    while band > fit:
                        parts *= 2
                        band = max(1, hp // parts)
            oxs = [(px + pad_left - k * dw) // sw for k in kxs]
            if not (kys and kxs) and not dnnl:
                # no tap reaches the phase: its one unit writes zeros (a stride much larger
                # than the filter leaves most phases so, and a unit per band cost more)
                band = hp
            group.append([py, px, hp, wp, len(kys), len(kxs), max(1, min(hp, band)), 0, 0])
            spans.append(span)
            reads.append((oys, oxs))
            offy.append(oys + [0] * (fh - len(kys)))
            offx.append(oxs + [0] * (fw - len(kxs)))
            tap_rows += [ky * fw + kx for ky in kys for kx in kxs]
            # one tap, read at the phase's own dy position
            own_tap.append(oys == oxs == [0])
        if dnnl:
            band = min(row[6] for row in group)
            for row in group:
                row[6] = band
            for row, (oys, oxs) in zip(group, reads):
                row[8] = _column_classes(oys, oxs, hp, band, wq, OH, OW, sw, reads_dy)
        merged.append(dnnl and sw > 1 and all(own_tap) and wq * sw == W and wq == OW
                      and hp <= OH)
        for row, span in zip(group, spans):
            k2 = row[4] * row[5] * OC
            row[7] = offset
            offset += k2 * C
            a_rows = (row[6] + span) * row[5] * OC if dnnl else row[6] * k2
            a_values = max(a_values, a_rows * row[3])
            # dnnl: the row buffer of the sw phases, and one phase's output when sw > 1
            out_values = max(out_values, row[6] * row[3] * C * ((sw + (sw > 1)) if dnnl else 1))
        info += group
    if dnnl and bits:
        a_values = -(-a_values // 2)  # 16-bit values, in float32 scratch
    starts = []
    for m in merged:   # the merged taps go after every phase's own
        starts.append(offset if m else -1)
        offset += OC * sw * C if m else 0
    return ((sh, sw), *(np.asarray(x, np.int32) for x in (info, offy, offx, tap_rows)),
            a_values, out_values, np.asarray(starts, np.int32))


def _aligned_empty(shape, dtype):
    """np.empty(shape, dtype) starting on a 64-byte boundary (NumPy's own arrays start on 16),
    from the output pool (pool.h aligns every block so): the filter's taps, so that the GEMMs'
    and the tile kernel's vector loads of them each lie in one cache line, and a filter of 1
    MiB or more gets the block its last call's taps freed (docs/performance.md)."""
    return _memory.empty(shape, dtype)


def _filter_taps(filt, tap_rows, ct, nthreads, block=0):
    """The filter's taps ``tap_rows`` (of its fh * fw, in order), each as an [OC, C] matrix,
    flat, in ``ct`` (the filter's dtype, or float32 for a half type the GEMMs widen); with
    ``block``, each matrix as blocks of that many columns (conv_filter_taps)."""
    fh, fw, c, oc = filt.shape
    w = np.ascontiguousarray(filt).reshape(fh * fw, c, oc)
    taps = _aligned_empty((len(tap_rows), oc, c), w.dtype)
    _kernels.conv_filter_taps(w, tap_rows, taps, nthreads, block, _simd_transposes())
    return (taps if taps.dtype == ct else to_float32(taps, nthreads)).reshape(-1)


# The fewest input channels C for which a conv of two or more images takes oneDNN's gather
# (_onednn_gather); for bfloat16 that oneDNN multiplies in bfloat16 (_gemm_type), whose GEMMs
# run at twice the float32 rate, fewer: with 9-16 channels its gather beat the channel tile
# kernel and the col2im by 1.3-2.0x, with 8 it won or lost by up to 1.25x (docs/performance.md)
ONEDNN_MIN_C = 24
NATIVE_BF16_MIN_C = 9
# oneDNN's matmul in the conv: "auto" where it is installed, "off" never (our BLAS GEMMs)
ONEDNN = os.environ.get("TFCOMPAT_ONEDNN", "auto")
# the type oneDNN multiplies bfloat16 and float16 in: "auto" (_gemm_type), "native" (dy's own
# type, float32 accumulation) or "float32" (widened)
HALF_GEMM = os.environ.get("TFCOMPAT_HALF_GEMM", "auto")

_dnnl_usable = None


def _onednn_available():
    global _dnnl_usable
    if ONEDNN == "off":
        return False
    if _dnnl_usable is None:
        from .. import _dnnl
        _dnnl_usable = (_dnnl.missing() is None and _dnnl.library().cpu_runtime
                        in (_dnnl.RUNTIME_SEQ, _dnnl.RUNTIME_OMP))
    return _dnnl_usable


@functools.lru_cache(maxsize=None)
def _brgemm(dtype):
    """Whether oneDNN runs a single-threaded matmul of ``dtype`` with one of its brgemm kernels
    (the fast ones, and single-threaded as made: on CPUs without them it falls back to a
    reference or a differently threaded GEMM, which tfcompat does not use; or, as oneDNN 3.2
    does for float16 on a CPU without AVX512-FP16, to none)."""
    from .. import _dnnl
    try:
        return all(_dnnl.matmul(1024, 576, 64, _dnnl_type(dtype), _dnnl.F32, 1, True,
                                accumulate=add).impl.startswith("brg:") for add in (False, True))
    except UnsupportedError:
        return False


def _gemm_type(dtype):
    """The dtype oneDNN's matmuls read for a conv of ``dtype`` (float32 accumulation), or None
    for our own BLAS GEMMs (no oneDNN, or float64, which oneDNN's CPU matmul lacks). Half
    types are multiplied in their own type where oneDNN runs that at least as fast as float32
    on this CPU, by the instruction sets it reports (docs/performance.md): bfloat16 on AMX, or
    AVX512-BF16 without AVX512-FP16 (AMD Zen 4: about twice its float32 rate); float16 with
    AVX512-FP16; otherwise widened to float32 (an Intel core with AVX512-FP16 whose AMX is
    hidden, as in some VMs, ran the bfloat16 matmul at half its float32 rate)."""
    if dtype == F64 or not _onednn_available():
        return None
    f32 = F32 if _brgemm(F32) else None
    if dtype == F32 or HALF_GEMM == "float32":
        return f32
    if HALF_GEMM == "native":
        native = True
    else:
        from .. import _dnnl
        bf16, fp16, amx = _dnnl.cpu_isa()
        native = (amx or (bf16 and not fp16)) if dtype == ck.BFLOAT16 else fp16
    return dtype if native and _brgemm(dtype) else f32


def _dnnl_type(dtype):
    from .. import _dnnl
    return {F32: _dnnl.F32, ck.BFLOAT16: _dnnl.BF16, F16: _dnnl.F16}[np.dtype(dtype)]


# A 1x1, stride-1, unpadded float32 conv is one multithreaded oneDNN matmul (_use_direct) where
# its filter takes at least this many bytes: the gather's single-threaded GEMMs, one per band,
# each read all of it, and beyond half the L2 it comes from further out for every band
# (docs/performance.md)
DIRECT_FILTER_BYTES = 1 << 20
# ... and a float16 or bfloat16 one that oneDNN multiplies widened to float32, by the same
# rule, where its widened dy and dx take at most this many values (float32 copies of both)
DIRECT_WIDE_VALUES = 1 << 22


def _use_direct(p, direct, gemm, nthreads):
    """Whether a 1x1, stride-1, unpadded conv (``direct``) is one oneDNN matmul over all its
    pixels on ``nthreads`` threads (:func:`_direct`): a float16 or bfloat16 conv oneDNN
    multiplies in its own type (our float32 GEMMs would widen both), and a float32 one of one
    image (the gather would cut it into short bands) or whose filter takes DIRECT_FILTER_BYTES
    (in float32) or more, and a half type widened to float32 by that rule where its widened dy
    and dx take at most DIRECT_WIDE_VALUES. oneDNN 3.2's matmul reduces each output's sum in
    one thread, in the same order whatever the thread count, but for bfloat16 and float16 on
    AMX from 16 threads on with more than 1024 output channels (brgemm_matmul_utils.cpp,
    compute_blocking_heuristic_amx: nthr_k up to nthr / 8 and K / 1024), where it splits them
    among threads: those take the gather, whose results never depend on the thread count."""
    if not direct or gemm is None:
        return False
    if gemm != p.dtype and (gemm != F32 or p.N * p.H * p.W * (p.C + p.OC) > DIRECT_WIDE_VALUES):
        return False
    if gemm == F32:
        return CONV_STRATEGY == "auto" and (p.N == 1 or p.C * p.OC * 4 >= DIRECT_FILTER_BYTES)
    from .. import _dnnl
    return not (_dnnl.cpu_isa()[2] and nthreads >= 16 and p.OC > 1024)


def _direct(dy, filt, m, k, n, nthreads):
    """A 1x1, stride-1, unpadded conv: dx [m, n] = dy [m, k] @ filt [n, k]^T by one oneDNN
    matmul in dy's type (float32 accumulation; a half type's dx rounded once) on ``nthreads``
    threads (docs/performance.md). The matmul reads the filter [C, OC] as its transposed
    b: a transposed copy of a large filter took longer than the matmul."""
    from .. import _dnnl as D
    L = D.library()
    t = _dnnl_type(dy.dtype)
    mm = D.matmul(m, k, n, t, t, nthreads, b_transposed=True)
    dx = _memory.empty((m, n), dy.dtype)
    with L.lock:
        mems = [L.memory(md.value, D.ptr(a)) for md, a in zip(mm.mds, (dy, filt, dx))]
        try:
            L.execute(mm.primitive, list(zip((D.ARG_SRC, D.ARG_WEIGHTS, D.ARG_DST), mems)))
        finally:
            for mem in mems:
                L.lib.dnnl_memory_destroy(mem)
    return dx


class _DnnlWorkers:
    """oneDNN's side of the gather (conv.pxi's ``use_dnnl``) for one set of GEMM shapes, input
    type and worker count: single-threaded matmuls (float32 out), one per stride
    phase and band height (its bands, and its last, shorter one), and per worker a stream, a
    scratchpad and memory objects, which the kernel points at each call's data. One call uses
    it at a time (:func:`_dnnl_workers` lends it out). Every image runs the same primitives
    whichever worker takes it, so the result does not depend on the thread count."""

    def __init__(self, shapes, nt, in_dtype):
        from .. import _dnnl as D
        L = self.L = D.library()
        self.bits = in_dtype.itemsize == 2
        self.owner = own = D.Owner()   # the memory objects and streams
        streams, self.scratch = [], []
        t = _dnnl_type(in_dtype)
        # [phase][tail * 2 + add]: a Matmul, or None
        self.made = [[D.matmul(m, k, n, t, D.F32, 1, True, accumulate=add)
                      if m and k and (adds or not add) else None
                      for m, k, adds, n in kinds for add in (False, True)] for kinds in shapes]
        self.prims = np.array([[x.primitive.value if x else 0 for x in kinds]
                               for kinds in self.made], np.uintp)
        scratch_bytes = max([x.scratchpad_bytes for kinds in self.made for x in kinds if x]
                            or [0])
        self.args = np.zeros((nt, len(shapes), 4, 4), np.dtype(D._ExecArg))
        arg_ids = (D.ARG_SRC, D.ARG_WEIGHTS, D.ARG_DST, D.ARG_SCRATCHPAD)
        for t in range(nt):
            scratch = np.empty(max(1, scratch_bytes), np.uint8)
            self.scratch.append(scratch)
            for ph, kinds in enumerate(self.made):
                for kind, x in enumerate(kinds):
                    if x is None:
                        continue
                    for j, md in enumerate([m.value for m in x.mds] + [x.scratchpad_md]):
                        mem = own.own("dnnl_memory_destroy",
                                      L.memory(md, D.ptr(scratch) if j == 3 else None))
                        self.args[t, ph, kind, j] = (arg_ids[j], mem.value)
            streams.append(own.own("dnnl_stream_destroy", L.new_stream()))
        self.stream_ptrs = np.array([s.value for s in streams], np.uintp)

    def bind(self, plan):
        """Give ``plan`` these workers; returns the per-worker status array to check."""
        status = np.zeros(len(self.stream_ptrs), np.int32)
        plan.use_dnnl(self.L.execute_address, self.L.wait_address, self.L.set_handle_address,
                      self.prims, self.stream_ptrs, self.args, status, self.bits)
        return status


_DNNL_IDLE = {}                 # (shapes, workers) -> idle _DnnlWorkers, most recent last
_DNNL_IDLE_MAX = 16
_dnnl_idle_lock = threading.Lock()


def _dnnl_shapes(g, oc, c):
    """Per phase, the (m, k, adds, n) of its full bands and of its last, shorter band (m 0:
    none): k the inner dimension of one tap row's GEMM, adds whether more tap rows add to it,
    n its outputs per row (c); a merged row phase has one GEMM per dy row,
    [wp, oc] @ [oc, sw * c], as the full band of its first phase, and no other."""
    (_, sw), info, merged = g[0], g[1], g[7]
    out = []
    merged = merged.tolist()
    for py, px, hp, wp, taps_y, taps_x, band, _, classes in info.tolist():
        kx, adds = taps_x * oc, taps_y > 1
        if merged[py] >= 0:
            out.append(((wp if px == 0 else 0, oc, False, sw * c), (0, oc, False, sw * c)))
        else:
            # a column class's GEMM has a 1 / classes of the band's rows
            per = max(1, classes)
            out.append(((band * wp // per, kx, adds, c), ((hp % band) * wp // per, kx, adds, c)))
    return tuple(out)


@contextlib.contextmanager
def _dnnl_workers(shapes, nt, in_dtype):
    """An idle :class:`_DnnlWorkers` for these arguments (or a new one), returned after use; at
    most :data:`_DNNL_IDLE_MAX` are kept idle."""
    key = (shapes, nt, in_dtype)
    with _dnnl_idle_lock:
        workers = _DNNL_IDLE.pop(key, None)
    if workers is None:
        workers = _DnnlWorkers(shapes, nt, in_dtype)
    yield workers
    with _dnnl_idle_lock:
        _DNNL_IDLE.pop(key, None)       # a concurrent call's, if any, is dropped
        _DNNL_IDLE[key] = workers
        while len(_DNNL_IDLE) > _DNNL_IDLE_MAX:
            _DNNL_IDLE.pop(next(iter(_DNNL_IDLE)))


def _use_gather(p):
    """The gather strategy (without oneDNN: :func:`_onednn_gather` decides with it) for one
    image, whose bands our threads share, where the col2im's one GEMM would run on BLAS's own
    threads beside our idle ones (docs/performance.md); and for float32 when the filter has
    fewer output than input channels: its gathered dy (taps * OC per dx position) is then
    smaller than the col2im's columns (taps * C per dy position), and C3 ran 1.09-1.12x faster
    with it; with OC >= C (C1, C2, C5) or other dtypes it was as fast or slower."""
    if CONV_STRATEGY != "auto":
        return CONV_STRATEGY == "gather"
    return p.N == 1 or (p.dtype == F32 and p.OC < p.C)


def _use_tiles(p, gemm, direct):
    """float32, float16 and bfloat16 on the tile kernel (conv.pxi's _tile_phase_band,
    tiles.h): where it is compiled in, the CPU has AVX512F and the conv is not a 1x1, stride-1,
    unpadded one (``direct``: one GEMM per image, as fast or faster). It reads dy in place (a
    half type's widened to float32 a window of rows at a time), sums each tile in registers
    and stores it at its dx position (a half type's rounded once): no gathered copy and no
    output to place (the half types too ran faster on it than on oneDNN's gather, in their
    own type or widened, and ours: docs/performance.md), but for bfloat16 that oneDNN
    multiplies in bfloat16: its gather takes each conv it would take whose work fills
    NATIVE_BF16_GATHER_UNITS of the gather's largest units. A tile is 16 to 64 channels wide, so
    where C is not a multiple of 16 the last vector of channels is partly zeros: with two or
    more images, where at least two thirds of the channel lanes of the tiles hold channels
    (C = 11-16, 22 and up, not 17-21 nor 10 or fewer), it still beats the col2im; one image
    takes it whatever C (faster than oneDNN's gather and ours there). With
    oneDNN's matmuls (``gemm``), a conv whose row phases all merge (C5's 2x2 stride 2) keeps
    them: one GEMM per dy row that writes a dx row was faster there (docs/performance.md)."""
    if not ((p.dtype == F32 or _half_kind(p.dtype) is not None) and _tiles_allowed(direct)):
        return False
    if p.N >= 2 and 3 * p.C < 2 * _tile_channels(p.C):
        return False
    if _native_bf16(p, gemm) and _onednn_gather(p, gemm):
        return _dnnl_units(p, gemm) < NATIVE_BF16_GATHER_UNITS
    return gemm is None or not _all_merged(p)


# The least work, in units of its largest unit (_dnnl_units), from which a bfloat16 conv that
# oneDNN multiplies in bfloat16 (_gemm_type: AVX512-BF16's two products per lane and
# instruction, or AMX) takes oneDNN's gather instead of the channel tile kernel, whose float32
# multiply-adds run at half that rate: 1.4-2.0x faster on C1-C3 and most shapes of two or more
# images. Below it, one unit holds most of the work (one small image, or one whose second band
# is a row), so one thread runs it while the gather, which does not split a band's columns,
# leaves the other idle; the tile kernel shares an image's bands and column groups
# (docs/performance.md)
NATIVE_BF16_GATHER_UNITS = 2


def _native_bf16(p, gemm):
    """Whether this conv is bfloat16 that oneDNN multiplies in bfloat16 (``gemm``, _gemm_type)."""
    return gemm == p.dtype == ck.BFLOAT16


def _dnnl_units(p, gemm):
    """The work of oneDNN's gather for this conv (which takes sw <= W), in units of its largest
    unit of work: every image's rows over the tallest band of a row phase (conv.pxi's
    _unit_starts: the bands of each row phase py, its sw phases together, so its first phase,
    every sw-th row of the phase table, stands for it)."""
    rows = _geometry(p, True, gemm.itemsize == 2, False)[1][::p.sw].tolist()
    return p.N * sum(r[2] for r in rows) / max(min(r[2], r[6]) for r in rows)


def _tiles_allowed(direct):
    """What either tile kernel needs beyond its dtypes and channels: not turned off
    (TFCOMPAT_CONV_TILES, TFCOMPAT_CONV_STRATEGY), not a 1x1, stride-1, unpadded conv, compiled
    in, and a CPU with AVX512F."""
    return CONV_TILES != "off" and CONV_STRATEGY == "auto" and not direct and _avx512_kernels()


def _tile_channels(c):
    """C rounded up to the tile kernel's vectors of 16 channels."""
    return -(-c // 16) * 16


# The most input channels C for which a conv takes the tile kernel for few channels
# (_use_oc_lanes), and for which a float32 conv at stride 1 does (at most tiles.h's
# TFC_OC_MAX_C): with 7-10 channels its tiles hold 2 or 3 pixels, enough where every dx value
# takes all the filter's taps, too few at a stride (docs/performance.md)
OC_LANES_MAX_C = 6
OC_LANES_STRIDE1_MAX_C = 10
# The fewest products per dx value, fh * fw * OC / (sh * sw), for which a float16 or bfloat16
# conv takes it (OC_LANES_HALF_WORK, or OC_LANES_HALF_WORK_PER_C per input channel where that
# is fewer), and the most input channels with which a strided one does: below, or with more
# channels and a stride (whose phases with few taps leave each dx value few products for its
# lane sum and rounding), widening dy and rounding each dx value on its own cost more than the
# other strategies save (docs/performance.md)
OC_LANES_HALF_WORK = 96
OC_LANES_HALF_WORK_PER_C = 32
OC_LANES_HALF_STRIDED_MAX_C = 3
# The output channel counts whose tiles hold dx pixels in the lanes (tiles.h's tfc_px_row, up
# to PIXEL_LANES_MAX_OC): no lane sum per dx value, so a half type takes them whatever its
# products per dx value, with a stride only where the pixels fill the vectors (with 3, 5, 6 or
# 7 output channels a strided float16 conv ran slower than the other strategies:
# docs/performance.md)
PIXEL_LANES_MAX_OC = _kernels.CONV_PIXEL_LANES_MAX_OC
PIXEL_LANES_STRIDED_OC = (1, 2, 4, 8)
# From two images on, a filter whose taps do not overlap (fh <= sh, fw <= sw: a patch
# embedding) at strides of sh * sw >= this many pixels keeps the col2im: its one GEMM per
# image, every tap's C columns side by side, beat this kernel's many stride phases, whose bands
# hold a few rows each (a 32x32 stride-32 filter: 1,024 phases of 7 rows; docs/performance.md)
OC_LANES_DISJOINT_STRIDE = 16


def _use_oc_lanes(p, direct):
    """The tile kernel for few channels (tiles.h's tfc_oc_rows), for float32, float16 and
    bfloat16 (dy widened as it is read, each dx value rounded once): as _use_tiles, where
    C <= OC_LANES_MAX_C (float32 at stride 1: OC_LANES_STRIDE1_MAX_C), whatever OC (a last
    partial vector of output channels is read by masked loads); for the half types, where
    each dx value takes OC_LANES_HALF_WORK products or more (OC_LANES_HALF_WORK_PER_C per
    channel for C = 1 and 2) or its tiles hold dx pixels (OC <= PIXEL_LANES_MAX_OC, with a
    stride one of PIXEL_LANES_STRIDED_OC), and, with a stride, C <= OC_LANES_HALF_STRIDED_MAX_C;
    not for two or more images whose taps do not overlap at OC_LANES_DISJOINT_STRIDE. Its
    tiles put dy's output channels in the vector lanes, 16 at a time, where the channel tiles
    would leave most lanes empty (3 of 16 for an RGB image), and sum each dx value's lanes at
    the end; with at most 8 output channels, 16 // OC dx pixels a vector instead
    (docs/performance.md)."""
    half = _half_kind(p.dtype) is not None
    strided = p.sh * p.sw > 1
    if (p.N >= 2 and p.fh <= p.sh and p.fw <= p.sw
            and p.sh * p.sw >= OC_LANES_DISJOINT_STRIDE):
        return False
    if half:
        least = min(OC_LANES_HALF_WORK, OC_LANES_HALF_WORK_PER_C * p.C)
        pixels = p.OC <= PIXEL_LANES_MAX_OC and (not strided or p.OC in PIXEL_LANES_STRIDED_OC)
        if ((p.fh * p.fw * p.OC < least * p.sh * p.sw and not pixels)
                or (strided and p.C > OC_LANES_HALF_STRIDED_MAX_C)):
            return False
    most = OC_LANES_STRIDE1_MAX_C if p.dtype == F32 and not strided else OC_LANES_MAX_C
    return (p.dtype == F32 or half) and p.C <= most and _tiles_allowed(direct)


def _all_merged(p):
    """Whether every row phase of this conv merges with oneDNN (_gather_geometry)."""
    return p.sw <= p.W and bool((_geometry(p, True, False, False)[7] >= 0).all())


# The most stride phases holding dx pixels, min(sh, H) * min(sw, W), with which a conv takes
# one of the gathers or tile kernels: their tables and units of work are per phase, the
# col2im's are not (a stride of 1,000 on a 1,000 x 1,000 image has a million phases of one
# pixel each)
MAX_GATHER_PHASES = 4096


def _gathers_fit(p):
    """Whether the phase-based strategies may take this conv (MAX_GATHER_PHASES)."""
    return min(p.sh, p.H) * min(p.sw, p.W) <= MAX_GATHER_PHASES


def _onednn_gather(p, gemm):
    """Whether a conv runs the gather with oneDNN's matmuls of ``gemm``
    (conv.pxi's _dnnl_band): always, but for a strided filter whose taps do not overlap
    (each dx element takes at most one tap) when oneDNN would multiply in float32 and its row
    phases do not all merge: there the col2im's one GEMM per band, every tap's C columns side
    by side, beat one narrow GEMM per stride phase; where they merge (C5's 2x2 stride 2), a
    GEMM per dy row writing a dx row beat both (docs/performance.md). Nor, from two images on,
    where C < ONEDNN_MIN_C (NATIVE_BF16_MIN_C for bfloat16 multiplied in bfloat16): the
    gather's GEMMs are C columns wide, and the col2im's (taps * C columns, each thread an
    image) are faster there in every dtype, an RGB image's first layer (C = 3) the most
    (docs/performance.md). Nor where sw > W."""
    if p.sw > p.W:  # it lays the sw phases of a row phase out as dx's row (_dnnl_band)
        return False
    if p.N >= 2 and p.C < (NATIVE_BF16_MIN_C if _native_bf16(p, gemm) else ONEDNN_MIN_C):
        return False
    disjoint = p.sh * p.sw > 1 and p.fh <= p.sh and p.fw <= p.sw
    if not (disjoint and gemm == F32):
        return True
    return _all_merged(p)


def _as_rows(p):
    """A conv over images one pixel wide (W = OW = fw = 1, no padding on the left: a 1-D conv
    along H, as [N, L, 1, C]) as the same conv over images one pixel tall, whose dx rows the
    kernels take whole instead of one pixel at a time: dy, the filter and dx keep their memory,
    reshaped, and H's stride, dilation and pads go to W. None for any other conv."""
    if not (p.W == 1 and p.OW == 1 and p.fw == 1 and p.pad_left == 0 and p.H > 1):
        return None
    dy = p.dy.reshape((p.N, 1, p.OH, p.OC) if p.channels_last else (p.N, p.OC, 1, p.OH))
    return dataclasses.replace(
        p, dy=dy, filter=p.filter.reshape(1, p.fh, p.C, p.OC), H=1, W=p.H, OH=1, OW=p.OH, fh=1,
        fw=p.fh, sh=p.sw, sw=p.sh, dh=p.dw, dw=p.dh, pad_top=0, pad_left=p.pad_top,
        pad_bottom=p.pad_right, pad_right=p.pad_bottom)


def _run_conv(problem):
    p = problem
    if p.empty:
        return np.zeros(p.out_shape, dtype=p.dtype)
    rows = _as_rows(p)
    if rows is not None:
        return _run_conv(rows).reshape(p.out_shape)
    nthreads = kernel_threads()
    ct = p.compute_dtype
    half = _half_kind(p.dtype)
    if p.channels_last:
        dy = np.require(p.dy, requirements="CA")
    else:
        dy = swap_inner_axes(p.dy.reshape(p.N, p.OC, p.OH * p.OW), nthreads).reshape(
            p.N, p.OH, p.OW, p.OC)
    direct = (p.fh, p.fw, p.sh, p.sw, p.pad_top, p.pad_left, p.OH, p.OW) == (1, 1, 1, 1, 0, 0, p.H, p.W)
    gemm = _gemm_type(p.dtype)
    if _use_direct(p, direct, gemm, nthreads):
        filt = np.ascontiguousarray(p.filter).reshape(p.C, p.OC)
        widened = gemm != p.dtype   # a half type widened, its float32 dx rounded once
        if widened:
            dy, filt = to_float32(dy, nthreads), to_float32(filt, nthreads)
        dx = _direct(dy, filt, p.N * p.H * p.W, p.OC, p.C, nthreads)
        dx = (round_to(dx, p.dtype, nthreads) if widened else dx).reshape(p.N, p.H, p.W, p.C)
        return dx if p.channels_last else _channels_first(dx, nthreads)
    h_tab = _shared_tables(_kernels.conv_axis_table, p.H, p.OH, p.fh, p.sh, p.dh, p.pad_top)
    w_tab = _shared_tables(_kernels.conv_axis_table, p.W, p.OW, p.fw, p.sw, p.dw, p.pad_left)
    # single-threaded BLAS (or oneDNN) inside our threads, each taking whole images (the
    # col2im, from two images on: scikit-learn's k-means pattern) or bands of images (the
    # gathers); the strategy depends on the shapes only, never on the thread count
    phased = _gathers_fit(p)
    oc_lanes = phased and _use_oc_lanes(p, direct)
    tiles = oc_lanes or (phased and _use_tiles(p, gemm, direct))
    dnnl = not tiles and phased and gemm is not None and _onednn_gather(p, gemm)
    one_1x1 = direct and p.N == 1
    nhwc = (p.N, p.H, p.W, p.C)
    k = _images_per_band(p) if direct else 1
    if k > 1:
        # a 1x1 conv of k small images is the 1x1 conv of one image k times as tall (oneDNN's
        # gather or our col2im: _use_direct took the rest)
        p = dataclasses.replace(p, dy=dy.reshape(p.N // k, k * p.OH, p.OW, p.OC), N=p.N // k,
                                H=k * p.H, OH=k * p.OH)
        dy = p.dy
    if tiles:
        # a half type on the channel tiles: dy widened a window of rows at a time
        wide = _kernels.CONV_TILE_WIDE_VALUES if half is not None and not oc_lanes else 0
        gather = gather_tables(p, ct, False, nthreads, one_1x1, tiles=2 if oc_lanes else 1,
                               wide=wide)
    elif dnnl:
        gather = gather_tables(p, gemm, True, nthreads, one_1x1)
    elif phased and (not direct or (one_1x1 and half is not None)) and _use_gather(p):
        # a half-type 1x1 image too: its one GEMM would run on BLAS's threads between our
        # widening and rounding, whose idle workers spin beside them (docs/performance.md)
        gather = gather_tables(p, ct, False, nthreads, one_1x1)
    else:
        gather = None
    per_image = p.N >= 2 or gather is not None
    # the GEMM's filter, for every strategy but the gathers (they read their taps)
    w2 = (np.ascontiguousarray(p.filter, dtype=ct) if gather is None
          else np.empty(0, ct)).reshape(-1, p.OC)
    band, cap = (column_ring(p, h_tab, ct.itemsize) if per_image and gather is None
                 else (p.OH, p.OH))
    # avx512: oneDNN's gather copies or rounds dx's rows in AVX-512 instructions (conv.pxi's
    # _dnnl_row_out)
    plan = _kernels.ConvPlan((p.N, p.H, p.W, p.C, p.OH, p.OW, p.OC, p.fh, p.fw), h_tab, w_tab,
                             per_image, direct, band, cap, _STORAGE[half], ct == F64, gather,
                             dnnl, tiles, oc_lanes, dnnl and _avx512_kernels())
    nt = max(1, min(nthreads, plan.units())) if per_image else nthreads
    n_work = plan.workspace(nt)
    work = _memory.empty(n_work, ct) if n_work else None
    dx = _memory.empty((p.N, p.H, p.W, p.C), p.dtype)  # float16/bfloat16: rounded by the kernel
    if dnnl:
        with _dnnl_workers(_dnnl_shapes(gather, p.OC, p.C), nt, gemm) as workers:
            status = workers.bind(plan)
            plan.run(dy, w2, dx, nt, work)
        if status.any():
            raise RuntimeError(f"oneDNN's matmul failed with status {int(status[status != 0][0])}")
    elif per_image and not tiles:
        with _blas_single_thread():
            plan.run(dy, w2, dx, nt, work)
    else:
        plan.run(dy, w2, dx, nt, work)
    dx = dx.reshape(nhwc)
    return dx if p.channels_last else _channels_first(dx, nthreads)


# A 1x1, stride-1 conv of two or more images multiplies each band of an image (oneDNN's
# gather) or each image (our col2im) as one GEMM; images smaller than this many pixels go k
# to a GEMM (_images_per_band)
FOLD_PIXELS = 196


def _images_per_band(p):
    """How many images of a 1x1, stride-1 conv one GEMM takes: the largest divisor k of N with
    k * OH * OW <= FOLD_PIXELS, leaving at least 4 GEMMs for the threads and within oneDNN's
    gather's band: oneDNN's matmul of one 7x7 image's 49 rows runs far below one of 98 or 196,
    and the GEMM of a one-pixel image is all call overhead (docs/performance.md)."""
    rows = max(1, DNNL_GATHER_VALUES // max(1, p.OW * p.OC))
    best = 1
    for k in range(2, min(p.N // 4, FOLD_PIXELS // max(1, p.OH * p.OW)) + 1):
        if p.N % k == 0 and k * p.OH * p.OW <= FOLD_PIXELS and k * p.OH <= rows:
            best = k
    return best


def _channels_first(dx, nthreads):
    """NHWC dx as NCHW."""
    n, h, w, c = dx.shape
    return swap_inner_axes(dx.reshape(n, h * w, c), nthreads).reshape(n, c, h, w)


def conv2d_backprop_input(inputs, attrs):
    return _run_conv(_conv_policy.conv_problem(inputs, attrs))


KERNEL_CONFIGS = (
    KernelConfig(RESIZE_BILINEAR_GRAD, BACKEND, resize_bilinear_grad),
    KernelConfig(RESIZE_NEAREST_NEIGHBOR_GRAD, BACKEND, resize_nearest_neighbor_grad),
    KernelConfig(CONV2D_BACKPROP_INPUT, BACKEND, conv2d_backprop_input),
    KernelConfig(INTERPOLATE_BACKWARD, BACKEND, interpolate_backward),
    KernelConfig(RESIZE_GRAD, BACKEND, resize_grad),
)
