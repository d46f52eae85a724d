"""Conv2DBackpropInput's strategies, as one ordered list (oneDNN's implementation list is the
model): each record says why it cannot run a problem on this machine, or why it declines one
it could run (a later strategy is faster there); the first that does neither runs. Each
strategy's module (onednn.py, tiles.py, gather.py, col2im.py) holds its checks, its runner
and its parameters, a frozen dataclass whose fields are its thresholds, each with the section
of docs/performance.md that measured it. ``TFCOMPAT_CONV_STRATEGY=<name>`` runs the named
strategy on every conv it can run, whatever its reasons to decline.

Adding a strategy: its module, its record here (in its place in the order), its compiled
kernel (tfcompat/csrc/conv_*.pxi, a ConvKind and a unit); the test grid takes every record.
"""
import os
from dataclasses import dataclass
from typing import Any, Callable

from . import col2im, gather, onednn, tiles

OVERRIDE_VARIABLE = "TFCOMPAT_CONV_STRATEGY"


@dataclass(frozen=True)
class ConvStrategy:
    """``cannot(problem, machine, threads, params)``: why this strategy cannot run the problem
    here (a missing library or instruction set, a size its kernel does not take), else None.
    ``declines(problem, machine, threads, params)``: why it leaves a problem it could run to a
    later strategy, else None. ``run(problem, machine, threads, dy, params)``: dx, NHWC, from
    dy, NHWC. ``params``: its thresholds."""

    name: str
    summary: str
    cannot: Callable
    declines: Callable
    run: Callable
    params: Any


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


STRATEGIES = (
    ConvStrategy("onednn-matmul", "a 1x1 conv as one multithreaded oneDNN matmul",
                 onednn.matmul_cannot, onednn.matmul_declines, onednn.run_matmul,
                 onednn.MATMUL),
    ConvStrategy("lane-tiles", "AVX-512 tiles with output channels (or dx pixels) in the "
                 "lanes, for few input channels", tiles.lanes_cannot, tiles.lanes_declines,
                 tiles.run_lanes, tiles.LANES),
    ConvStrategy("channel-tiles", "AVX-512 tiles of 6 dx pixels by 64 channels per stride "
                 "phase", tiles.channels_cannot, tiles.channels_declines, tiles.run_channels,
                 tiles.CHANNELS),
    ConvStrategy("onednn-gather", "per stride phase, gathered dy times the filter's taps by "
                 "oneDNN's single-threaded matmuls", onednn.gather_cannot,
                 onednn.gather_declines, onednn.run_gather, onednn.GATHER),
    ConvStrategy("blas-gather", "per stride phase, gathered dy times the filter's taps by "
                 "single-threaded BLAS GEMMs", gather.cannot, gather.declines, gather.run,
                 gather.PARAMS),
    ConvStrategy("col2im", "BLAS GEMM of dy and the filter into columns, summed into dx",
                 col2im.cannot, col2im.declines, col2im.run, col2im.PARAMS),
)


def forced_name(strategies=STRATEGIES):
    """The strategy TFCOMPAT_CONV_STRATEGY names, or None (unset, empty or 'auto')."""
    value = os.environ.get(OVERRIDE_VARIABLE, "")
    name = value.strip().lower()
    if name in ("", "auto"):
        return None
    names = [s.name for s in strategies]
    if name not in names:
        raise ValueError(f"{OVERRIDE_VARIABLE}: got {value!r}; expected 'auto' or one of "
                         + ", ".join(names))
    return name


def choose(p, m, nthreads, forced=None, strategies=STRATEGIES):
    """(strategy, declined): the first of ``strategies`` that neither cannot run nor declines
    problem ``p`` on machine ``m`` with ``nthreads`` threads, and the (name, reason) of each
    before it; or the ``forced`` one (a name), with a ValueError where it cannot run ``p``."""
    if forced is not None:
        strategy = next(s for s in strategies if s.name == forced)
        why = strategy.cannot(p, m, nthreads, strategy.params)
        if why is not None:
            able = [s.name for s in strategies if s.cannot(p, m, nthreads, s.params) is None]
            raise ValueError(f"{OVERRIDE_VARIABLE}: got {forced!r}, which cannot run this conv: "
                             f"{why}; strategies that can: {', '.join(able)}")
        return strategy, ()
    declined = []
    for strategy in strategies:
        why = (strategy.cannot(p, m, nthreads, strategy.params)
               or strategy.declines(p, m, nthreads, strategy.params))
        if why is None:
            return strategy, tuple(declined)
        declined.append((strategy.name, why))
    raise ValueError("no conv strategy runs this problem: " + "; ".join(
        f"{n}: {r}" for n, r in declined))
