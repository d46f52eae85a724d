"""The per-axis index tables of the resampling kernels, built once per layout.

For every spatial axis the coordinate rule (docs/semantics.md) gives a *forward map*: for each
resized index x, its source index (nearest) or its two source indices and weights (linear),
computed by tfcompat._kernels in float32 with TF's evaluation order. The kernels walk dx rows,
so for the outer axes (z, y) the map is inverted into a *gather table* (CSR: for each source
index, the resized indices that feed it, ascending, with their weights); the innermost axis (x)
keeps its forward map. Problems of one or two spatial axes get trivial leading axes (size 1 ->
1, weight exactly 1.0f), so every kernel sees three. See tfcompat/csrc/rows.pxi.
"""
from typing import NamedTuple, Optional

import numpy as np

from ._simd import kernels as _kernels

I32 = np.dtype(np.int32)
F32 = np.dtype(np.float32)


class ResampleTables(NamedTuple):
    """Every table a ResamplePlan reads; None where the kernel's family does not use one."""
    z_off: np.ndarray
    z_src: np.ndarray
    z_cnt: Optional[np.ndarray]
    z_w0: Optional[np.ndarray]
    z_w1: Optional[np.ndarray]
    y_off: np.ndarray
    y_src: np.ndarray
    y_cnt: Optional[np.ndarray]
    y_w0: Optional[np.ndarray]
    y_w1: Optional[np.ndarray]
    x_lo: np.ndarray                # linear: the low tap; nearest: the index
    x_hi: Optional[np.ndarray]
    x_wlo: Optional[np.ndarray]
    x_whi: Optional[np.ndarray]
    x_off: Optional[np.ndarray]     # the nearest float32 gather's column runs (see below)

    @property
    def nbytes(self):
        return sum(t.nbytes for t in self if t is not None)


def forward_map(axis):
    """(lo, hi, w_lo, w_hi) of a linear axis, or (index,) of a nearest one."""
    O = axis.out_size
    if axis.linear:
        lo, hi = np.empty(O, I32), np.empty(O, I32)
        wl, wh = np.empty(O, F32), np.empty(O, F32)
        _kernels.linear_axis_map(axis.rule, axis.in_size, O, axis.ort_scale, lo, hi, wl, wh)
        return lo, hi, wl, wh
    idx = np.empty(O, I32)
    _kernels.nearest_axis_map(axis.rule, axis.in_size, O, idx)
    return (idx,)


def gather_table(axis, fwd=None):
    """(offsets, source, count, w0, w1) of one axis: the inverted forward map."""
    fwd = forward_map(axis) if fwd is None else fwd
    if axis.linear:
        return _kernels.invert_axis_map(axis.in_size, *fwd, True)
    ones = np.ones(axis.out_size, F32)
    return _kernels.invert_axis_map(axis.in_size, fwd[0], fwd[0], ones, ones, False)


_TRIVIAL = (np.array([0, 1], I32), np.array([0], I32), np.array([1], I32),
            np.array([1.0], F32), np.array([0.0], F32))

# The nearest float32 gather (tfcompat/csrc/nearest.pxi) reads at most this many dy rows per
# dx row; it must equal GATHER_MAX_ROWS there.
GATHER_MAX_ROWS = 4
WINDOW_MAX_C = 64


def _gather_runs(channels, in_x, z_off, y_off, x_idx):
    """For the nearest float32 gather: dx column i takes x in [x_off[i], x_off[i + 1]) (an
    int32 array of in_x + 1), or None where the gather does not apply. It needs 8 to 64
    channels, few dy rows per dx row, and each dx column's x contiguous: the maps never
    decrease, and the check keeps that an assumption no caller can break."""
    rows = int(np.diff(z_off).max(initial=0)) * int(np.diff(y_off).max(initial=0))
    if (8 <= channels <= WINDOW_MAX_C and rows <= GATHER_MAX_ROWS
            and bool(np.all(np.diff(x_idx) >= 0))):
        return np.searchsorted(x_idx, np.arange(in_x + 1)).astype(I32)
    return None


def resample_tables(axes, channels, float32_gather):
    """The tables of ``axes`` (1 to 3 Axis, the innermost last). ``channels``: channels per
    row as the kernel sees them (1 for NCX). ``float32_gather``: a float32 nearest kernel,
    which gets the gather's column runs where they apply."""
    axes = (None,) * (3 - len(axes)) + tuple(axes)
    z = _TRIVIAL if axes[0] is None else gather_table(axes[0])
    y = _TRIVIAL if axes[1] is None else gather_table(axes[1])
    x = forward_map(axes[2])
    if axes[2].linear:
        tables = ResampleTables(*z, *y, *x, None)
    else:
        runs = (_gather_runs(channels, axes[2].in_size, z[0], y[0], x[0])
                if float32_gather else None)
        tables = ResampleTables(z[0], z[1], None, None, None, y[0], y[1], None, None, None,
                                x[0], None, None, None, runs)
    for t in tables:
        if t is not None:
            t.flags.writeable = False
    return tables
