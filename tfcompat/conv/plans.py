"""What the strategies' runners share: a compiled ConvPlan's sizes and storage, and running it
with its scratch and the thread count its units allow."""
import numpy as np

from .. import _memory
from .._arrays import half_kind
from .._simd import kernels as _kernels

F64 = np.dtype(np.float64)
_STORAGE = {None: 0, False: 1, True: 2}   # conv_core.pxi's STORE_NATIVE, _FLOAT16, _BFLOAT16
Kind = _kernels.ConvKind

_blas_controller = None


def blas_single_thread():
    """Limit every loaded BLAS to one thread (its threads would fight the kernels' team)."""
    global _blas_controller
    if _blas_controller is None:
        from threadpoolctl import ThreadpoolController
        _blas_controller = ThreadpoolController()
    return _blas_controller.limit(limits=1, user_api="blas")


def new_plan(kind, p):
    """A ConvPlan of ``kind`` for problem ``p`` (its compute type float64 or float32)."""
    return _kernels.ConvPlan(kind, (p.N, p.H, p.W, p.C, p.OH, p.OW, p.OC, p.fh, p.fw),
                             _STORAGE[half_kind(p.dtype)], p.compute_dtype == F64)


def threads_for(plan, nthreads):
    """The threads a plan whose units the threads share runs on: at most one a unit."""
    return max(1, min(nthreads, plan.units()))


def run(plan, p, dy, nt, w2=None):
    """dx (NHWC, p's dtype: a half type rounded by the kernel) from ``plan`` on ``nt`` threads,
    with its scratch from the output pool; ``w2``: the col2im's filter [fh * fw * C, OC]."""
    ct = p.compute_dtype
    n_work = plan.workspace(nt)
    # with a copy of the filter in the compute type (the tiles' taps, the col2im's w2)
    scratch = (n_work + p.filter.size) * ct.itemsize
    _memory.check_peak(p.dx_bytes + p.layout_bytes() + scratch, "inputShape",
                       f"dx, its layout's copies and {scratch / 2**30:.2f} GiB of the "
                       "kernel's scratch and filter")
    work = _memory.empty(n_work, ct) if n_work else None
    dx = p.dx_buffer((p.N, p.H, p.W, p.C), p.dtype)
    plan.run(dy, np.empty(0, ct) if w2 is None else w2, dx, nt, work)
    return dx
