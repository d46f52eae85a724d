"""Conv2DBackpropInput's strategies, as one ordered list (oneDNN's implementation list is the
model): each record says why it cannot run a problem on this machine, or why it declines one
it could run (a later strategy is faster there); the first that does neither runs. Each
strategy's thresholds sit beside its record, each with the section of docs/performance.md
that measured it. ``TFCOMPAT_CONV_STRATEGY=<name>`` runs the named strategy on every conv it
can run, whatever its reasons to decline.

Adding a strategy: its record here (in its place in the order), its runner in plans.py, and
its compiled kernel (tfcompat/csrc/conv_*.pxi); the test grid takes every record.
"""
import os
from dataclasses import dataclass
from typing import Callable

from .. import _checks as ck
from .._simd import kernels as _kernels
from . import plans
from .tables import geometry, tile_channels

F32, F64, BF16 = ck.FLOAT32, ck.FLOAT64, ck.BFLOAT16
OVERRIDE_VARIABLE = "TFCOMPAT_CONV_STRATEGY"


@dataclass(frozen=True)
class ConvStrategy:
    """``cannot(problem, machine, threads)``: why this strategy cannot run the problem here (a
    missing library or instruction set, a size its kernel does not take), else None.
    ``declines(problem, machine, threads)``: why it leaves a problem it could run to a later
    strategy, else None. ``run(problem, machine, threads, dy)``: dx, NHWC, from dy, NHWC."""

    name: str
    summary: str
    cannot: Callable
    declines: Callable
    run: Callable


@dataclass(frozen=True)
class ConvChoice:
    """The strategy that runs a conv, and why every one before it did not: ``declined`` holds
    (name, reason) pairs; ``forced``: named by TFCOMPAT_CONV_STRATEGY; ``as_rows``: the conv
    of images one pixel wide was run as images one pixel tall."""

    name: str
    declined: tuple = ()
    forced: bool = False
    as_rows: bool = False

    def __str__(self):
        why = "; ".join(f"{n}: {r}" for n, r in self.declined)
        return (self.name + (" (TFCOMPAT_CONV_STRATEGY)" if self.forced else "")
                + (" [as rows]" if self.as_rows else "") + (f" <- declined {why}" if why else ""))


def _never(p, m, nthreads):
    return None


def _half(p):
    return p.dtype in ck.HALF_DTYPES


# -- the phase-based strategies ------------------------------------------------------------

# The most stride phases holding dx pixels, min(sh, H) * min(sw, W), with which a conv takes
# one of the gathers or tile kernels: their tables and units of work are per phase, the
# col2im's are not (a stride of 1,000 on a 1,000 x 1,000 image has a million phases of one
# pixel each)
MAX_GATHER_PHASES = 4096


def _phases_cannot(p):
    if p.phases > MAX_GATHER_PHASES:
        return f"{p.phases} stride phases (more than {MAX_GATHER_PHASES})"
    return None


def _all_merged(p):
    """Whether every row phase of this conv merges with oneDNN (tables._gather_geometry)."""
    return p.sw <= p.W and bool((geometry(p, True, False, False)[7] >= 0).all())


def _dnnl_units(p, gemm):
    """The work of oneDNN's gather for this conv (which takes sw <= W), in units of its largest
    unit of work: every image's rows over the tallest band of a row phase (conv.pxi's
    _unit_starts: the bands of each row phase py, its sw phases together, so its first phase,
    every sw-th row of the phase table, stands for it)."""
    rows = geometry(p, True, gemm.itemsize == 2, False)[1][::p.sw].tolist()
    return p.N * sum(r[2] for r in rows) / max(min(r[2], r[6]) for r in rows)


def _onednn_cannot(p, m):
    if not m.onednn:
        return "oneDNN is not installed, or TFCOMPAT_ONEDNN=off"
    if m.gemm_type(p.dtype) is None:
        return f"oneDNN has no fast {p.dtype} matmul here"
    return None


def _native_bf16(p, m):
    """Whether this conv is bfloat16 that oneDNN multiplies in bfloat16."""
    return p.dtype == BF16 and m.gemm_type(p.dtype) == BF16


def _direct_declines(p):
    if p.direct:
        return "a 1x1, stride-1, unpadded conv: one GEMM per image is as fast or faster"
    return None


# -- onednn-matmul -------------------------------------------------------------------------

# A 1x1, stride-1, unpadded float32 conv is one multithreaded oneDNN matmul where its filter
# takes at least this many bytes: the gather's single-threaded GEMMs, one per band, each read
# all of it, and beyond half the L2 it comes from further out for every band
# (docs/performance.md#onednn-matmul)
DIRECT_FILTER_BYTES = 1 << 20
# ... and a float16 or bfloat16 one that oneDNN multiplies widened to float32, by the same
# rule, where its widened dy and dx take at most this many values (float32 copies of both)
DIRECT_WIDE_VALUES = 1 << 22


def _matmul_cannot(p, m, nthreads):
    if not p.direct:
        return "not a 1x1, stride-1, unpadded conv"
    why = _onednn_cannot(p, m)
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


def _matmul_declines(p, m, nthreads):
    if m.gemm_type(p.dtype) != F32:
        return None     # a half type multiplied in its own type: always one matmul
    values = p.N * p.H * p.W * (p.C + p.OC)
    if p.dtype != F32 and values > DIRECT_WIDE_VALUES:
        return (f"{p.dtype} widened to float32: dy and dx would take {values} float32 values "
                f"(more than {DIRECT_WIDE_VALUES})")
    if p.N != 1 and p.C * p.OC * 4 < DIRECT_FILTER_BYTES:
        return (f"{p.N} images and a filter of {p.C * p.OC * 4} bytes in float32 (under "
                f"{DIRECT_FILTER_BYTES}): the gathers' single-threaded GEMMs are as fast")
    return None


# -- lane-tiles ----------------------------------------------------------------------------

# The most input channels C for which a conv takes the tile kernel for few channels, and for
# which a float32 conv at stride 1 does (at most LANES_MAX_C, its kernel's limit): with 7-10
# channels its tiles hold 2 or 3 pixels, enough where every dx value takes all the filter's
# taps, too few at a stride (docs/performance.md#lane-tiles)
LANES_MAX_C = _kernels.CONV_LANES_MAX_C
OC_LANES_MAX_C = 6
OC_LANES_STRIDE1_MAX_C = 10
# The fewest products per dx value, fh * fw * OC / (sh * sw), for which a float16 or bfloat16
# conv takes it (OC_LANES_HALF_WORK, or OC_LANES_HALF_WORK_PER_C per input channel where that
# is fewer), and the most input channels with which a strided one does: below, widening dy
# and rounding each dx value on its own cost more than the other strategies save
# (docs/performance.md#lane-tiles)
OC_LANES_HALF_WORK = 96
OC_LANES_HALF_WORK_PER_C = 32
OC_LANES_HALF_STRIDED_MAX_C = 3
# The output channel counts whose tiles hold dx pixels in the lanes (tiles.h's tfc_px_row):
# no lane sum per dx value, so a half type takes them whatever its products per dx value,
# with a stride only where the pixels fill the vectors (docs/performance.md#lane-tiles)
PIXEL_LANES_MAX_OC = _kernels.CONV_PIXEL_LANES_MAX_OC
PIXEL_LANES_STRIDED_OC = (1, 2, 4, 8)
# From two images on, a filter whose taps do not overlap (fh <= sh, fw <= sw: a patch
# embedding) at strides of sh * sw >= this many pixels keeps the col2im: its one GEMM per
# image beat this kernel's many stride phases of a few rows each
# (docs/performance.md#lane-tiles)
OC_LANES_DISJOINT_STRIDE = 16


def _tiles_cannot(p, m):
    if not m.tiles:
        return "no AVX-512 tile kernels here (a CPU without AVX512F, or not compiled in)"
    if p.dtype == F64:
        return "float64 (the tile kernels sum in float32)"
    return _phases_cannot(p)


def _lanes_cannot(p, m, nthreads):
    why = _tiles_cannot(p, m)
    if why is None and p.C > LANES_MAX_C:
        why = f"{p.C} input channels (its kernel takes at most {LANES_MAX_C})"
    return why


def _lanes_declines(p, m, nthreads):
    why = _direct_declines(p)
    if why:
        return why
    strided = p.sh * p.sw > 1
    if (p.N >= 2 and p.fh <= p.sh and p.fw <= p.sw
            and p.sh * p.sw >= OC_LANES_DISJOINT_STRIDE):
        return (f"{p.N} images of a patch embedding (taps that do not overlap at a stride of "
                f"{p.sh}x{p.sw}): the col2im's one GEMM per image is faster")
    if _half(p):
        least = min(OC_LANES_HALF_WORK, OC_LANES_HALF_WORK_PER_C * p.C)
        pixels = p.OC <= PIXEL_LANES_MAX_OC and (not strided or p.OC in PIXEL_LANES_STRIDED_OC)
        if p.fh * p.fw * p.OC < least * p.sh * p.sw and not pixels:
            return (f"{p.dtype} with {p.fh * p.fw * p.OC / (p.sh * p.sw):g} products per dx "
                    f"value (fewer than {least})")
        if strided and p.C > OC_LANES_HALF_STRIDED_MAX_C:
            return (f"{p.dtype} at a stride with {p.C} input channels (more than "
                    f"{OC_LANES_HALF_STRIDED_MAX_C})")
    most = OC_LANES_STRIDE1_MAX_C if p.dtype == F32 and not strided else OC_LANES_MAX_C
    if p.C > most:
        return f"{p.C} input channels (more than {most})"
    return None


# -- channel-tiles -------------------------------------------------------------------------

# The least work, in units of its largest unit (_dnnl_units), from which a bfloat16 conv that
# oneDNN multiplies in bfloat16 takes oneDNN's gather instead of the channel tile kernel, whose
# float32 multiply-adds run at half that rate; below it one unit holds most of the work and
# one thread would run it (docs/performance.md#channel-tiles)
NATIVE_BF16_GATHER_UNITS = 2


def _channel_tiles_declines(p, m, nthreads):
    why = _direct_declines(p)
    if why:
        return why
    lanes = tile_channels(p.C)
    if p.N >= 2 and 3 * p.C < 2 * lanes:
        return (f"{p.N} images with {p.C} input channels in {lanes} lanes (under two thirds "
                f"full)")
    if _native_bf16(p, m) and not (_dnnl_gather_cannot(p, m, nthreads)
                                   or _dnnl_gather_declines(p, m, nthreads)):
        units = _dnnl_units(p, BF16)
        if units >= NATIVE_BF16_GATHER_UNITS:
            return (f"bfloat16 that oneDNN multiplies in bfloat16, whose gather has "
                    f"{units:g} units of work (at least {NATIVE_BF16_GATHER_UNITS})")
        return None
    if m.gemm_type(p.dtype) is not None and _all_merged(p):
        return "every row phase merges: oneDNN's GEMM per dy row writes a whole dx row"
    return None


# -- onednn-gather -------------------------------------------------------------------------

# The fewest input channels C for which a conv of two or more images takes oneDNN's gather;
# for bfloat16 that oneDNN multiplies in bfloat16, whose GEMMs run at twice the float32 rate,
# fewer (docs/performance.md#onednn-gather)
ONEDNN_MIN_C = 24
NATIVE_BF16_MIN_C = 9


def _dnnl_gather_cannot(p, m, nthreads):
    why = _onednn_cannot(p, m) or _phases_cannot(p)
    if why is None and p.sw > p.W:
        why = (f"a stride of {p.sw} over an image {p.W} wide (it lays a row phase's stride "
               f"phases out as dx's rows)")
    return why


def _dnnl_gather_declines(p, m, nthreads):
    least = NATIVE_BF16_MIN_C if _native_bf16(p, m) else ONEDNN_MIN_C
    if p.N >= 2 and p.C < least:
        return (f"{p.N} images with {p.C} input channels (fewer than {least}): the col2im's "
                f"wider GEMMs are faster")
    disjoint = p.sh * p.sw > 1 and p.fh <= p.sh and p.fw <= p.sw
    if disjoint and m.gemm_type(p.dtype) == F32 and not _all_merged(p):
        return ("taps that do not overlap, in float32, with row phases that do not all "
                "merge: the col2im's one GEMM per band is faster")
    return None


# -- blas-gather ---------------------------------------------------------------------------

def _gather_cannot(p, m, nthreads):
    return _phases_cannot(p)


def _gather_declines(p, m, nthreads):
    if p.direct and not (p.N == 1 and _half(p)):
        return "a 1x1, stride-1, unpadded conv: the col2im's one GEMM per image"
    if p.N != 1 and not (p.dtype == F32 and p.OC < p.C):
        # with one image the col2im's one GEMM would run on BLAS's own threads beside our
        # idle ones; with more, float32 with OC < C gathers less than the col2im's columns
        # (docs/performance.md#blas-gather)
        return f"{p.N} images, {p.dtype}, {p.OC} output and {p.C} input channels"
    return None


STRATEGIES = (
    ConvStrategy("onednn-matmul", "a 1x1 conv as one multithreaded oneDNN matmul",
                 _matmul_cannot, _matmul_declines, plans.run_onednn_matmul),
    ConvStrategy("lane-tiles", "AVX-512 tiles with output channels (or dx pixels) in the "
                 "lanes, for few input channels", _lanes_cannot, _lanes_declines,
                 plans.run_lane_tiles),
    ConvStrategy("channel-tiles", "AVX-512 tiles of 6 dx pixels by 64 channels per stride "
                 "phase", lambda p, m, t: _tiles_cannot(p, m), _channel_tiles_declines,
                 plans.run_channel_tiles),
    ConvStrategy("onednn-gather", "per stride phase, gathered dy times the filter's taps by "
                 "oneDNN's single-threaded matmuls", _dnnl_gather_cannot,
                 _dnnl_gather_declines, plans.run_onednn_gather),
    ConvStrategy("blas-gather", "per stride phase, gathered dy times the filter's taps by "
                 "single-threaded BLAS GEMMs", _gather_cannot, _gather_declines,
                 plans.run_blas_gather),
    ConvStrategy("col2im", "BLAS GEMM of dy and the filter into columns, summed into dx",
                 _never, _never, plans.run_col2im),
)
BY_NAME = {s.name: s for s in STRATEGIES}


def forced_name():
    """The strategy TFCOMPAT_CONV_STRATEGY names, or None (unset, empty or 'auto')."""
    value = os.environ.get(OVERRIDE_VARIABLE, "")
    name = value.strip().lower()
    if name in ("", "auto"):
        return None
    if name not in BY_NAME:
        raise ValueError(f"{OVERRIDE_VARIABLE}: got {value!r}; expected 'auto' or one of "
                         + ", ".join(BY_NAME))
    return name


def choose(p, m, nthreads, forced=None):
    """(strategy, declined): the first strategy of STRATEGIES that neither cannot run nor
    declines problem ``p`` on machine ``m`` with ``nthreads`` threads, and the (name, reason)
    of each before it; or the ``forced`` one (a name), with a ValueError where it cannot run
    ``p``."""
    if forced is not None:
        strategy = BY_NAME[forced]
        why = strategy.cannot(p, m, nthreads)
        if why is not None:
            able = [s.name for s in STRATEGIES if s.cannot(p, m, nthreads) is None]
            raise ValueError(f"{OVERRIDE_VARIABLE}: got {forced!r}, which cannot run this conv: "
                             f"{why}; strategies that can: {', '.join(able)}")
        return strategy, ()
    declined = []
    for strategy in STRATEGIES:
        why = strategy.cannot(p, m, nthreads) or strategy.declines(p, m, nthreads)
        if why is None:
            return strategy, tuple(declined)
        declined.append((strategy.name, why))
    raise AssertionError("col2im declines nothing")
