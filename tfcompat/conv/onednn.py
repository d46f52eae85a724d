"""oneDNN's two strategies: onednn-matmul, a 1x1 conv as one multithreaded matmul, and
onednn-gather, the stride phases' bands by single-threaded matmuls that each worker runs from
the kernel (conv_onednn.pxi) with its own streams and memory objects (tfcompat/_dnnl.py has
the C API)."""
import contextlib
import threading
from dataclasses import dataclass

import numpy as np

from .. import _checks as ck, _memory
from .._arrays import avx512_kernels, round_to, to_float32
from . import plans
from .tables import fold_images, geometry, phase_tables, phases_cannot

F32, F16, BF16 = ck.FLOAT32, ck.FLOAT16, ck.BFLOAT16


def onednn_cannot(p, m):
    if not m.onednn:
        return "oneDNN is not installed, or TFCOMPAT_ONEDNN=off"
    if m.gemm_type(p.dtype) is None:
        return f"oneDNN has no fast {p.dtype} matmul here"
    return None


def native_bf16(p, m):
    """Whether this conv is bfloat16 that oneDNN multiplies in bfloat16."""
    return p.dtype == BF16 and m.gemm_type(p.dtype) == BF16


# -- onednn-matmul -------------------------------------------------------------------------

@dataclass(frozen=True)
class MatmulParams:
    # a float32 conv (or a half type oneDNN widens) of two or more images is one matmul where
    # its filter takes at least this many bytes in float32: the gather's single-threaded GEMMs,
    # one per band, each read all of it, and beyond half the L2 it comes from further out for
    # every band (docs/performance.md#onednn-matmul)
    filter_bytes: int = 1 << 20
    # a half type oneDNN widens: one matmul only where its widened dy and dx take at most this
    # many values (float32 copies of both; docs/performance.md#onednn-matmul)
    wide_values: int = 1 << 22


MATMUL = MatmulParams()


def matmul_cannot(p, m, nthreads, params):
    if not p.direct:
        return "not a 1x1, stride-1, unpadded conv"
    why = onednn_cannot(p, m)
    if why:
        return why
    # oneDNN 3.2 splits a half type's sums among threads on AMX from 16 threads on with more
    # than 1024 output channels (brgemm_matmul_utils.cpp, compute_blocking_heuristic_amx):
    # its result would depend on the thread count
    if (m.gemm_type(p.dtype) == p.dtype != F32 and m.amx and nthreads >= 16
            and p.OC > 1024):
        return (f"oneDNN would split each sum among threads ({p.dtype} on AMX, {nthreads} "
                f"threads, {p.OC} > 1024 output channels)")
    return None


def matmul_declines(p, m, nthreads, params):
    if m.gemm_type(p.dtype) != F32:
        return None     # a half type multiplied in its own type: always one matmul
    values = p.N * p.H * p.W * (p.C + p.OC)
    if p.dtype != F32 and values > params.wide_values:
        return (f"{p.dtype} widened to float32: dy and dx would take {values} float32 values "
                f"(more than {params.wide_values})")
    if p.N != 1 and p.C * p.OC * 4 < params.filter_bytes:
        return (f"{p.N} images and a filter of {p.C * p.OC * 4} bytes in float32 (under "
                f"{params.filter_bytes}): the gathers' single-threaded GEMMs are as fast")
    return None


def run_matmul(p, m, nthreads, dy, params):
    """dx = dy @ filter^T over every pixel; a half type oneDNN widens is widened before and
    rounded once after."""
    gemm = m.gemm_type(p.dtype)
    filt = np.ascontiguousarray(p.filter).reshape(p.C, p.OC)
    widened = gemm != p.dtype
    if widened:
        # float32 copies of dy and the filter, and a float32 dx rounded into dx
        values = p.N * p.H * p.W * (p.OC + p.C) + p.C * p.OC
        _memory.check_peak(p.dx_bytes + p.layout_bytes() + 4 * values, "inputShape",
                           "dx, its layout's copies and float32 copies of dy, filter and dx")
        dy, filt = to_float32(dy, nthreads), to_float32(filt, nthreads)
    m_rows = p.N * p.H * p.W
    dx = matmul(dy, filt, m_rows, p.OC, p.C, nthreads,
                None if widened else p.dx_buffer((m_rows, p.C), p.dtype))
    dx = round_to(dx, p.dtype, nthreads) if widened else dx
    return dx.reshape(p.N, p.H, p.W, p.C)


# -- onednn-gather -------------------------------------------------------------------------

@dataclass(frozen=True)
class GatherParams:
    # a band's gathered dy holds at most this many values (docs/performance.md#onednn-gather)
    band_values: int = 1 << 17
    # the fewest input channels with which two or more images take it; for bfloat16 that
    # oneDNN multiplies in bfloat16, whose GEMMs run at twice the float32 rate, fewer
    # (docs/performance.md#onednn-gather)
    min_c: int = 24
    native_bf16_min_c: int = 9
    # column classes (dy read in place) and merged row phases (a GEMM per dy row writes a dx
    # row) where they apply (docs/performance.md#onednn-gather)
    classes: bool = True
    merge: bool = True
    # dx rows copied or rounded in AVX-512 instructions where the CPU has them, and, into a dx
    # of stream_bytes or more, with streaming stores (0: never;
    # docs/performance.md#streaming-stores)
    avx512_rows: bool = True
    stream_bytes: int = 4 << 20
    # as the col2im's (col2im.Col2imParams)
    fold_pixels: int = 196
    fold_values: int = 1 << 17


GATHER = GatherParams()


def all_merged(p, params=GATHER):
    """Whether every row phase of this conv merges in oneDNN's gather."""
    return p.sw <= p.W and bool((geometry(p, params.band_values, True, False,
                                          merge=params.merge)[7] >= 0).all())


def units(p, gemm, params=GATHER):
    """The work of oneDNN's gather for this conv (which takes sw <= W), in units of its largest
    unit of work: every image's rows over the tallest band of a row phase (the bands of each
    row phase py, its sw phases together, so its first phase, every sw-th row of the phase
    table, stands for it)."""
    rows = geometry(p, params.band_values, True, gemm.itemsize == 2,
                    merge=params.merge)[1][::p.sw].tolist()
    return p.N * sum(r[2] for r in rows) / max(min(r[2], r[6]) for r in rows)


def gather_cannot(p, m, nthreads, params):
    why = onednn_cannot(p, m) or phases_cannot(p)
    if why is None and p.sw > p.W:
        why = (f"a stride of {p.sw} over an image {p.W} wide (it lays a row phase's stride "
               f"phases out as dx's rows)")
    return why


def gather_declines(p, m, nthreads, params):
    least = params.native_bf16_min_c if native_bf16(p, m) else params.min_c
    if p.N >= 2 and p.C < least:
        return (f"{p.N} images with {p.C} input channels (fewer than {least}): the col2im's "
                f"wider GEMMs are faster")
    disjoint = p.sh * p.sw > 1 and p.fh <= p.sh and p.fw <= p.sw
    if disjoint and m.gemm_type(p.dtype) == F32 and not all_merged(p, params):
        return ("taps that do not overlap, in float32, with row phases that do not all "
                "merge: the col2im's one GEMM per band is faster")
    return None


def run_gather(p, m, nthreads, dy, params):
    gemm = m.gemm_type(p.dtype)
    nhwc = (p.N, p.H, p.W, p.C)
    p, dy = fold_images(p, dy, params.fold_pixels, params.fold_values)
    tables = phase_tables(p, gemm, nthreads, params.band_values, dnnl=True,
                          classes=params.classes, merge=params.merge)
    plan = plans.new_plan(plans.Kind.CONV_ONEDNN_GATHER, p)
    plan.phases(tables)
    avx512 = params.avx512_rows and avx512_kernels()
    stream = params.stream_bytes > 0 and (p.N * p.H * p.W * p.C * p.dtype.itemsize
                                          >= params.stream_bytes)
    plan.onednn(avx512, stream)
    nt = plans.threads_for(plan, nthreads)
    with workers(gemm_shapes(tables, p.OC, p.C), nt, gemm) as lent:
        status = lent.bind(plan)
        dx = plans.run(plan, p, dy, nt)
    if status.any():
        raise RuntimeError(f"oneDNN's matmul failed with status {int(status[status != 0][0])}")
    return dx.reshape(nhwc)


# -- oneDNN's objects ----------------------------------------------------------------------


def _dnnl_type(dtype):
    from .. import _dnnl
    return {F32: _dnnl.F32, ck.BFLOAT16: _dnnl.BF16, F16: _dnnl.F16}[np.dtype(dtype)]


def matmul(dy, filt, m, k, n, nthreads, dx=None):
    """A 1x1, stride-1, unpadded conv: dx [m, n] = dy [m, k] @ filt [n, k]^T by one oneDNN
    matmul in dy's type (float32 accumulation; a half type's dx rounded once) on ``nthreads``
    threads (docs/performance.md#onednn-matmul). The matmul reads the filter [C, OC] as its
    transposed b: a transposed copy of a large filter took longer than the matmul. ``dx``: the
    [m, n] array to write (None: a new one)."""
    from .. import _dnnl as D
    L = D.library()
    t = _dnnl_type(dy.dtype)
    mm = D.matmul(m, k, n, t, t, nthreads, b_transposed=True)
    dx = _memory.empty((m, n), dy.dtype) if dx is None else dx
    with L.lock:
        mems = [L.memory(md.value, D.ptr(a)) for md, a in zip(mm.mds, (dy, filt, dx))]
        try:
            L.execute(mm.primitive, list(zip((D.ARG_SRC, D.ARG_WEIGHTS, D.ARG_DST), mems)))
        finally:
            for mem in mems:
                L.lib.dnnl_memory_destroy(mem)
    return dx


class _DnnlWorkers:
    """oneDNN's side of the gather (ConvPlan.use_dnnl) for one set of GEMM shapes, input
    type and worker count: single-threaded matmuls (float32 out), one per stride
    phase and band height (its bands, and its last, shorter one), and per worker a stream, a
    scratchpad and memory objects, which the kernel points at each call's data. One call uses
    it at a time (:func:`workers` lends it out). Every image runs the same primitives
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


def gemm_shapes(g, oc, c):
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
def workers(shapes, nt, in_dtype):
    """An idle :class:`_DnnlWorkers` for these arguments (or a new one), returned after use; at
    most :data:`_DNNL_IDLE_MAX` are kept idle."""
    key = (shapes, nt, in_dtype)
    with _dnnl_idle_lock:
        lent = _DNNL_IDLE.pop(key, None)
    if lent is None:
        lent = _DnnlWorkers(shapes, nt, in_dtype)
    yield lent
    with _dnnl_idle_lock:
        _DNNL_IDLE.pop(key, None)       # a concurrent call's, if any, is dropped
        _DNNL_IDLE[key] = lent
        while len(_DNNL_IDLE) > _DNNL_IDLE_MAX:
            _DNNL_IDLE.pop(next(iter(_DNNL_IDLE)))

