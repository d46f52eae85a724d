"""Each strategy's runner: its tables, its compiled ConvPlan (tfcompat/csrc/conv.pxi) and the
GEMM engine around it. Every runner takes the problem, the machine, the thread count and dy as
a C-contiguous NHWC array, and returns dx, NHWC."""
import dataclasses

import numpy as np

from .. import _memory
from .._arrays import avx512_kernels, half_kind, round_to, to_float32
from .._simd import kernels as _kernels
from . import onednn
from .tables import axis_tables, column_ring, gather_tables, images_per_band

F64 = np.dtype(np.float64)
_STORAGE = {None: 0, False: 1, True: 2}   # conv.pxi's STORE_NATIVE, STORE_FLOAT16, STORE_BFLOAT16

_blas_controller = None


def _blas_single_thread():
    """Limit every loaded BLAS to one thread (its threads would fight our OpenMP threads)."""
    global _blas_controller
    if _blas_controller is None:
        from threadpoolctl import ThreadpoolController
        _blas_controller = ThreadpoolController()
    return _blas_controller.limit(limits=1, user_api="blas")


def run_onednn_matmul(p, m, nthreads, dy):
    """dx = dy @ filter^T, one oneDNN matmul over every pixel; a half type oneDNN widens is
    widened before and rounded once after."""
    gemm = m.gemm_type(p.dtype)
    filt = np.ascontiguousarray(p.filter).reshape(p.C, p.OC)
    widened = gemm != p.dtype
    if widened:
        dy, filt = to_float32(dy, nthreads), to_float32(filt, nthreads)
    dx = onednn.matmul(dy, filt, p.N * p.H * p.W, p.OC, p.C, nthreads)
    dx = round_to(dx, p.dtype, nthreads) if widened else dx
    return dx.reshape(p.N, p.H, p.W, p.C)


_LANE_TILES, _CHANNEL_TILES, _ONEDNN_GATHER, _BLAS_GATHER, _COL2IM = range(5)


def _run_planned(kind, p, m, nthreads, dy):
    """The strategies that run a ConvPlan: the tile kernels, the gathers and the col2im."""
    ct = p.compute_dtype
    half = half_kind(p.dtype)
    h_tab, w_tab = axis_tables(p)
    direct = p.direct
    one_1x1 = direct and p.N == 1
    nhwc = (p.N, p.H, p.W, p.C)
    k = images_per_band(p) if direct else 1
    if k > 1:
        # a 1x1 conv of k small images is the 1x1 conv of one image k times as tall
        p = dataclasses.replace(p, dy=dy.reshape(p.N // k, k * p.OH, p.OW, p.OC), N=p.N // k,
                                H=k * p.H, OH=k * p.OH)
        dy = p.dy
    tiles = kind in (_LANE_TILES, _CHANNEL_TILES)
    lanes = kind == _LANE_TILES
    dnnl = kind == _ONEDNN_GATHER
    gemm = m.gemm_type(p.dtype) if dnnl else None
    if tiles:
        # a half type on the channel tiles: dy widened a window of rows at a time
        wide = _kernels.CONV_TILE_WIDE_VALUES if half is not None and not lanes else 0
        gather = gather_tables(p, ct, False, nthreads, one_1x1, tiles=2 if lanes else 1,
                               wide=wide)
    elif dnnl:
        gather = gather_tables(p, gemm, True, nthreads, one_1x1)
    elif kind == _BLAS_GATHER:
        gather = gather_tables(p, ct, False, nthreads, one_1x1)
    else:
        gather = None
    per_image = p.N >= 2 or gather is not None
    # the col2im's GEMM's filter (the gathers and tile kernels read their taps)
    w2 = (np.ascontiguousarray(p.filter, dtype=ct) if gather is None
          else np.empty(0, ct)).reshape(-1, p.OC)
    band, cap = (column_ring(p, h_tab, ct.itemsize) if per_image and gather is None
                 else (p.OH, p.OH))
    # avx512: oneDNN's gather copies or rounds dx's rows in AVX-512 instructions (conv.pxi's
    # _dnnl_row_out)
    plan = _kernels.ConvPlan((p.N, p.H, p.W, p.C, p.OH, p.OW, p.OC, p.fh, p.fw), h_tab, w_tab,
                             per_image, direct, band, cap, _STORAGE[half], ct == F64, gather,
                             dnnl, tiles, lanes, dnnl and avx512_kernels())
    nt = max(1, min(nthreads, plan.units())) if per_image else nthreads
    n_work = plan.workspace(nt)
    work = _memory.empty(n_work, ct) if n_work else None
    dx = _memory.empty((p.N, p.H, p.W, p.C), p.dtype)  # float16/bfloat16: rounded by the kernel
    if dnnl:
        with onednn.workers(onednn.gemm_shapes(gather, p.OC, p.C), nt, gemm) as lent:
            status = lent.bind(plan)
            plan.run(dy, w2, dx, nt, work)
        if status.any():
            raise RuntimeError(f"oneDNN's matmul failed with status {int(status[status != 0][0])}")
    elif per_image and not tiles:
        # single-threaded BLAS inside our threads, each taking whole images (the col2im, from
        # two images on) or bands of images (the gather)
        with _blas_single_thread():
            plan.run(dy, w2, dx, nt, work)
    else:
        plan.run(dy, w2, dx, nt, work)
    return dx.reshape(nhwc)


def run_lane_tiles(p, m, nthreads, dy):
    return _run_planned(_LANE_TILES, p, m, nthreads, dy)


def run_channel_tiles(p, m, nthreads, dy):
    return _run_planned(_CHANNEL_TILES, p, m, nthreads, dy)


def run_onednn_gather(p, m, nthreads, dy):
    return _run_planned(_ONEDNN_GATHER, p, m, nthreads, dy)


def run_blas_gather(p, m, nthreads, dy):
    return _run_planned(_BLAS_GATHER, p, m, nthreads, dy)


def run_col2im(p, m, nthreads, dy):
    return _run_planned(_COL2IM, p, m, nthreads, dy)
