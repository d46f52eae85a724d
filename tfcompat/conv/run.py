"""A Conv2DBackpropInput call: the problem (images one pixel wide as one pixel tall), the
strategy, dy and dx in NHWC, and the strategy's runner."""
import dataclasses
import logging

import numpy as np

from .. import _memory
from .._arrays import swap_inner_axes
from .._threads import kernel_threads
from .machine import current_machine
from .problem import nchw_needs_in_place
from .strategies import STRATEGIES, ConvChoice, choose, forced_name

# ``logging.getLogger("tfcompat.conv").setLevel(logging.DEBUG)`` (with a handler): one line per
# call, the problem and the strategy that ran it, with each earlier strategy's reason
log = logging.getLogger("tfcompat.conv")


def _choice(problem, nthreads, strategies=STRATEGIES, as_rows=True):
    """(problem as run, strategy, ConvChoice)."""
    p = problem
    rows = p.as_rows() if as_rows else None
    if rows is not None:
        p = rows
    forced = forced_name(strategies)
    strategy, declined = choose(p, current_machine(), nthreads, forced, strategies)
    return p, strategy, ConvChoice(strategy.name, declined, forced is not None, rows is not None)


def describe(p):
    return (f"{p.dtype} dx [{p.N}, {p.H}, {p.W}, {p.C}] <- dy [{p.N}, {p.OH}, {p.OW}, {p.OC}] "
            f"{p.fh}x{p.fw} stride {p.sh}x{p.sw} dilation {p.dh}x{p.dw} pads "
            f"{p.pad_top},{p.pad_bottom},{p.pad_left},{p.pad_right} "
            f"{'NHWC' if p.channels_last else 'NCHW'}")


def strategy_of(problem, nthreads=None):
    """The :class:`ConvChoice` a call with this problem would make."""
    return _choice(problem, kernel_threads() if nthreads is None else nthreads)[2]


def run_conv(problem, strategies=STRATEGIES, as_rows=True):
    """dx for a validated problem (tfcompat.conv.problem.conv_problem), by the first of
    ``strategies`` (the list, or a variant of it: asv_benchmarks/conv_ab.py) that takes it;
    images one pixel wide run as one pixel tall but where ``as_rows`` is off (the A/B)."""
    p = problem
    if p.empty:
        return np.zeros(p.out_shape, dtype=p.dtype)
    nthreads = kernel_threads()
    q, strategy, choice = _choice(p, nthreads, strategies, as_rows)
    if log.isEnabledFor(logging.DEBUG):
        log.debug("conv %s, %d threads: %s", describe(p), nthreads, choice)
    if nchw_needs_in_place(q):
        q = dataclasses.replace(q, nchw_in_place=True)
    # dx and the layout's copies, before anything is allocated; the strategy's scratch is
    # checked with them where it is known (plans.run, onednn.run_matmul)
    _memory.check_peak(q.dx_bytes + q.layout_bytes(), "inputShape",
                       "dx and its layout's copies")
    if q.channels_last:
        dy = np.require(q.dy, requirements="CA")
    else:
        dy = swap_inner_axes(q.dy.reshape(q.N, q.OC, q.OH * q.OW), nthreads).reshape(
            q.N, q.OH, q.OW, q.OC)
    dx = strategy.run(q, current_machine(), nthreads, dy, strategy.params)
    if not q.channels_last:
        dx = _to_nchw(q, dx, nthreads)
    return dx.reshape(p.out_shape)


def _to_nchw(q, dx, nthreads):
    """The kernels' NHWC dx as NCHW: a transposed copy, or, where that would not fit in
    memory (``q.nchw_in_place``), the same buffer transposed one image at a time through a
    one-image copy (dx plus one image at the peak, not two dx; docs/semantics.md §11)."""
    n, h, w, c = dx.shape
    if not q.nchw_in_place:
        return swap_inner_axes(dx.reshape(n, h * w, c), nthreads).reshape(n, c, h, w)
    flat = dx.reshape(n, h * w * c)
    for i in range(n):
        image = swap_inner_axes(flat[i].reshape(1, h * w, c), nthreads)
        flat[i] = image.reshape(-1)
        del image
    return flat.reshape(n, c, h, w)
