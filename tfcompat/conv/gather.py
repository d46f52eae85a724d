"""The BLAS gather strategy: per stride phase and band, gathered dy times the filter's taps
by single-threaded BLAS GEMMs (conv_gather.pxi), the threads sharing the bands of every
image."""
from dataclasses import dataclass

from .. import _checks as ck
from . import plans
from .tables import fold_images, phase_tables, phases_cannot


@dataclass(frozen=True)
class BlasGatherParams:
    # a band of gathered dy rows holds at most this many values (docs/performance.md#blas-gather)
    band_values: int = 1 << 19
    # one image of a 1x1 conv: bands of GEMMs of this many rows, so that the image has enough
    # units for the threads to share (docs/performance.md#blas-gather)
    one_image_rows: int = 128
    # fewer units than split_units (one small image: one band): each GEMM's columns split into
    # groups of at least split_cols, as many as bring it to split_units units, which the
    # threads share (else one thread runs them all; docs/performance.md#blas-gather)
    split_units: int = 4
    split_cols: int = 128
    # as the col2im's (col2im.Col2imParams)
    fold_pixels: int = 196
    fold_values: int = 1 << 17


PARAMS = BlasGatherParams()


def cannot(p, m, nthreads, params):
    return phases_cannot(p)


def declines(p, m, nthreads, params):
    if p.direct and not (p.N == 1 and p.dtype in ck.HALF_DTYPES):
        return "a 1x1, stride-1, unpadded conv: the col2im's one GEMM per image"
    if p.N != 1 and not (p.dtype == ck.FLOAT32 and p.OC < p.C):
        # with one image the col2im's one GEMM would run on BLAS's own threads beside our
        # idle ones; with more, float32 with OC < C gathers less than the col2im's columns
        return f"{p.N} images, {p.dtype}, {p.OC} output and {p.C} input channels"
    return None


def run(p, m, nthreads, dy, params):
    nhwc = (p.N, p.H, p.W, p.C)
    one_1x1 = p.direct and p.N == 1
    p, dy = fold_images(p, dy, params.fold_pixels, params.fold_values)
    tables = phase_tables(p, p.compute_dtype, nthreads, params.band_values,
                          short_rows=params.one_image_rows if one_1x1 else 0)
    plan = plans.new_plan(plans.Kind.CONV_BLAS_GATHER, p)
    plan.phases(tables)
    plan.blas_gather(params.split_units, params.split_cols)
    with plans.blas_single_thread():
        return plans.run(plan, p, dy, plans.threads_for(plan, nthreads)).reshape(nhwc)
