"""The col2im strategy: a BLAS GEMM of dy and the filter into columns, summed into dx in a
fixed order (conv_col2im.pxi); the last of the list, which runs every conv."""
from dataclasses import dataclass

import numpy as np

from . import plans
from .tables import axis_tables, column_ring, fold_images


@dataclass(frozen=True)
class Col2imParams:
    # each per-image column band is one GEMM of at least this many bytes of column rows; the
    # ring of bands keeps the columns in cache for the col2im (0: the whole image's columns;
    # docs/performance.md#col2im)
    band_bytes: int = 2048
    # a 1x1, stride-1 conv of images smaller than this many pixels runs k images to a GEMM, up
    # to fold_values values of dy a GEMM (0: one image a GEMM;
    # docs/performance.md#small-images-of-a-1x1-conv)
    fold_pixels: int = 196
    fold_values: int = 1 << 17


PARAMS = Col2imParams()


def cannot(p, m, nthreads, params):
    return None


def declines(p, m, nthreads, params):
    return None


def run(p, m, nthreads, dy, params):
    """Per image (two or more: each thread its images, single-threaded BLAS inside), or one
    image (its GEMM on BLAS's own threads, its dx rows on ours)."""
    ct = p.compute_dtype
    h_tab, w_tab = axis_tables(p)
    nhwc = (p.N, p.H, p.W, p.C)
    p, dy = fold_images(p, dy, params.fold_pixels, params.fold_values)
    per_image = p.N >= 2
    w2 = np.ascontiguousarray(p.filter, dtype=ct).reshape(-1, p.OC)
    band, cap = (column_ring(p, h_tab, ct.itemsize, params.band_bytes) if per_image
                 else (p.OH, p.OH))
    plan = plans.new_plan(plans.Kind.CONV_COL2IM, p)
    plan.col2im(h_tab, w_tab, per_image, p.direct, band, cap)
    if not per_image:
        return plans.run(plan, p, dy, nthreads, w2).reshape(nhwc)
    with plans.blas_single_thread():
        return plans.run(plan, p, dy, plans.threads_for(plan, nthreads), w2).reshape(nhwc)
