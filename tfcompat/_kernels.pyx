# cython: language_level=3
"""Compiled kernels of tfcompat (see docs/architecture.md).

This file is the extension's root; it includes one section per concern, each in
tfcompat/csrc/ beside the C headers it uses:

    common.pxi       build facts, index checks, the vector type, the fused types
    team.pxi         the kernels' one team of threads (team.h)
    pool.pxi         the output buffer pool (pool.h)
    half.pxi         float16/bfloat16 <-> float32 (half.h)
    coords.pxi       coordinate rules (rules.h) and per-axis tables
    rows.pxi         the row walk shared by the resampling kernels
    linear.pxi       linear resampling backward
    nearest.pxi      nearest-neighbour resampling backward
    plan.pxi         ResamplePlan: the one entry point of the resampling kernels
    forward.pxi      the forward resizes: ResizeBilinear, ResizeNearestNeighbor
    conv_core.pxi    Conv2DBackpropInput: what every strategy shares (sizes, phases, taps)
    conv_col2im.pxi  its strategies, each with its argument struct: the col2im,
    conv_gather.pxi    the BLAS gather,
    conv_onednn.pxi    oneDNN's gather,
    conv_tiles.pxi     the channel and lane tiles (tiles_channel.h, tiles_lanes.h)
    conv_plan.pxi    ConvPlan: the one entry point of the conv
    instruments.pxi  what the benchmarks time beside the kernels

Policy lives in Python (tfcompat/_resample.py, tfcompat/conv/, tfcompat/backends/): every
argument here has been validated, every array is C-contiguous and every index in the tables
has been proven in range before these functions run. The kernels never validate, never
allocate in their loops and never raise. Parallel loops (team.h) give each output row to one
share, summed in a fixed order, so results do not depend on the number of threads. Float32 coordinate
math follows TensorFlow's evaluation order (docs/semantics.md), and the extension is compiled
with -ffp-contract=off.

tfcompat/_kernels_avx2.pyx includes this file: the same kernels compiled with -mavx2.
"""
from libc.math cimport floorf, ceilf, roundf
from libc.string cimport memcpy, memset
from libc.stdlib cimport malloc, free
from libc.stdint cimport int32_t, int64_t, intptr_t, uint8_t, uint16_t, uint32_t, uint64_t
from scipy.linalg.cython_blas cimport sgemm, dgemm

import numpy as np
cimport numpy as cnp

cnp.import_array()

include "csrc/common.pxi"
include "csrc/team.pxi"
include "csrc/pool.pxi"
include "csrc/half.pxi"
include "csrc/coords.pxi"
include "csrc/rows.pxi"
include "csrc/linear.pxi"
include "csrc/nearest.pxi"
include "csrc/plan.pxi"
include "csrc/forward.pxi"
include "csrc/capi.pxi"
include "csrc/conv_core.pxi"
include "csrc/conv_col2im.pxi"
include "csrc/conv_gather.pxi"
include "csrc/conv_onednn.pxi"
include "csrc/conv_tiles.pxi"
include "csrc/conv_plan.pxi"
include "csrc/capi_conv.pxi"
include "csrc/instruments.pxi"
