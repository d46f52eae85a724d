"""oneDNN's side of the conv: one multithreaded matmul for a 1x1 conv (the onednn-matmul
strategy), and the single-threaded matmuls, streams and memory objects each worker of
oneDNN's gather (the onednn-gather strategy) runs from the kernel (tfcompat/_dnnl.py has the
C API)."""
import contextlib
import threading

import numpy as np

from .. import _checks as ck, _memory

F32, F16 = ck.FLOAT32, ck.FLOAT16


def _dnnl_type(dtype):
    from .. import _dnnl
    return {F32: _dnnl.F32, ck.BFLOAT16: _dnnl.BF16, F16: _dnnl.F16}[np.dtype(dtype)]


def matmul(dy, filt, m, k, n, nthreads):
    """A 1x1, stride-1, unpadded conv: dx [m, n] = dy [m, k] @ filt [n, k]^T by one oneDNN
    matmul in dy's type (float32 accumulation; a half type's dx rounded once) on ``nthreads``
    threads (docs/performance.md#onednn-matmul). The matmul reads the filter [C, OC] as its transposed
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

