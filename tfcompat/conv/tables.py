"""The tables a conv's plans read: per axis, the (output, tap) pairs of each dx index (the
col2im); per stride phase, its dx rows and columns, the taps that reach it and where they read
dy (the gathers and tile kernels); the filter's taps. All but the taps depend on the shapes
only and are kept, read-only, in the plan cache."""
import dataclasses

import numpy as np

from .. import _memory
from .._arrays import avx512_kernels, to_float32
from .._plans import PLANS
from .._simd import kernels as _kernels
from .problem import ck
from ..registry import CONV2D_BACKPROP_INPUT

# The most stride phases holding dx pixels, min(sh, H) * min(sw, W), for which the phase
# strategies (the gathers and tile kernels) make tables: theirs and their units of work are
# per phase, the col2im's are not (a stride of 1,000 on a 1,000 x 1,000 image has a million
# phases of one pixel each)
MAX_GATHER_PHASES = 4096


def phases_cannot(p):
    """Why the phase strategies cannot run ``p`` (MAX_GATHER_PHASES), or None."""
    if p.phases > MAX_GATHER_PHASES:
        return f"{p.phases} stride phases (more than {MAX_GATHER_PHASES})"
    return None


def axis_tables(p):
    """conv_axis_table of H and of W (the col2im's gather lists), from the plan cache."""
    return (shared_tables(_kernels.conv_axis_table, p.H, p.OH, p.fh, p.sh, p.dh, p.pad_top),
            shared_tables(_kernels.conv_axis_table, p.W, p.OW, p.fw, p.sw, p.dw, p.pad_left))


def column_ring(p, h_tab, itemsize, band_bytes):
    """(band, cap): output rows per GEMM band (at least ``band_bytes`` of column rows) and rows
    in the per-thread ring of columns, or (OH, OH) where the ring would not be smaller than the
    whole image's columns (or band_bytes is 0)."""
    off, out = h_tab[0], h_tab[1]
    first, last = off[:-1], off[1:] - 1
    rows = last >= first
    if not rows.any() or band_bytes <= 0:
        return p.OH, p.OH
    # span: how far back from the newest column row computed so far a dx row may still read
    # (with a stride > 1 and dilation, a later dx row can read an older output row)
    newest = np.maximum.accumulate(np.where(rows, out[np.maximum(last, 0)], -1))
    span = int((newest[rows] - out[first[rows]]).max()) + 1
    band = max(1, -(-(band_bytes // itemsize) // p.OW))
    cap = band * -(-(band + span - 1) // band)
    return (p.OH, p.OH) if cap >= p.OH else (band, cap)


def phase_tables(p, ct, nthreads, limit, *, dnnl=False, short_rows=0, tiles=0, wide=0,
                 raw=False, runs=True, classes=True, merge=True):
    """The phase strategies' tables (ConvPlan.phases): for each stride phase (py, px), its dx
    rows and columns, the taps that reach it, where each tap reads dy, and the filter's taps as
    a [taps * OC, C] matrix of dtype ``ct``; and the scratch per worker, in values of the
    compute type, for the gathered A and the GEMM's output. All but the filter's taps depend on
    the shapes only and are made once per geometry (:func:`geometry`); the taps are copied out
    of this call's filter by ``nthreads`` threads. ``limit``: the values of a band's A;
    ``short_rows``: for one image of a 1x1 conv, whose bands are the only units the threads
    share, bands of at most this many GEMM rows (0: no limit).

    ``dnnl`` (oneDNN's gather, conv_onednn.pxi; ``ct`` the matmuls' input type): every phase
    gets Wq = ceil(W / sw) columns and the phases of a py one band, so that their outputs share
    dx's row layout; A holds the band's dy rows with one tap row each, in ``ct``; the output is
    float32; ``classes``: column classes where they pay (:func:`_column_classes`); ``merge``:
    row phases merged where they can be.

    ``tiles`` (conv_tiles.pxi): the phases and bands without a gather; as scratch only the tile
    kernel's pointers, a row of zeros and a row's running totals; with ``raw`` (the channel
    tiles' workers copy their groups' taps), the filter itself (C padded to a multiple of 16)
    instead of its taps; 2: the lane tiles, rows taken alone, each tap's filter as [C, OC], its
    own layout (OC rounded up to a multiple of 16, zeros from OC on). ``wide``, ``runs``: see
    :func:`_gather_geometry`. Last in the tuple, the filter's taps' indices (of its fh * fw) in
    the order of the taps."""
    strides, info, offy, offx, tap_rows, a_values, out_values, merged = geometry(
        p, limit, dnnl, ct.itemsize == 2, short_rows, tiles, wide, runs, classes, merge)
    if tiles:
        a_values, out_values = _kernels.conv_tile_scratch(p.fh * p.fw, p.OC, p.W), 0
    if tiles == 2:
        w = np.asarray(p.filter, ct).reshape(p.fh * p.fw, p.C, p.OC)
        taps = _aligned_empty((len(tap_rows), p.C, tile_channels(p.OC)), ct)
        taps[:, :, p.OC:] = 0
        taps[:, :, :p.OC] = w[tap_rows]
        return (strides, info, offy, offx, taps.reshape(-1), a_values, out_values, merged,
                tap_rows)
    filt = p.filter
    if tiles and p.C % 16:
        # the tile kernel reads whole vectors of 16 channels: zeros in the columns from C on
        filt = np.zeros(p.filter.shape[:2] + (tile_channels(p.C), p.OC), p.filter.dtype)
        filt[:, :, :p.C] = p.filter
    if raw:
        # a filter run in groups of columns: each worker copies (and widens) the taps of its
        # own groups (conv_tiles.pxi's _tile_group_taps), so it goes as it is
        return (strides, info, offy, offx, np.ascontiguousarray(filt).reshape(-1), a_values,
                out_values, merged, tap_rows)
    taps = _filter_taps(filt, tap_rows, ct, nthreads,
                        _kernels.CONV_TILE_BLOCK if tiles else 0)
    if (merged >= 0).any():
        # a merged row phase's taps side by side: [OC, sw * C], after every phase's own
        blocks = [taps]
        for py in np.flatnonzero(merged >= 0):
            own = [taps[o:o + p.OC * p.C].reshape(p.OC, p.C) for o in info[py * p.sw:
                                                                          (py + 1) * p.sw, 7]]
            blocks.append(np.stack(own, axis=1).reshape(-1))
        taps = np.concatenate(blocks, out=_aligned_empty(sum(b.size for b in blocks),
                                                         taps.dtype))
    return strides, info, offy, offx, taps, a_values, out_values, merged, tap_rows


class _SharedTables:
    """Tables that depend on a conv's shapes only, kept in the plan cache (its bound counts
    their bytes) and shared, read-only, by every call of those shapes."""

    def __init__(self, value):
        self.value = value
        arrays = [a for a in value if isinstance(a, np.ndarray)]
        for arr in arrays:
            arr.flags.writeable = False
        self.nbytes = sum(arr.nbytes for arr in arrays)


def shared_tables(make, *args):
    """``make(*args)`` (a tuple holding the tables), made once while the plan cache keeps it."""
    key = (CONV2D_BACKPROP_INPUT, make.__name__) + args
    entry = PLANS.get(key)
    if entry is None:
        entry = _SharedTables(make(*args))
        PLANS.put(key, entry)
    return entry.value


def geometry(p, limit, dnnl, bits, short_rows=0, tiles=0, wide=0, runs=True, classes=True,
             merge=True):
    """This conv's :func:`_gather_geometry`, from the plan cache."""
    # oneDNN's matmuls read dy's own values unless a half type is widened for float32 GEMMs
    reads_dy = classes and dnnl and (bits or p.dtype == ck.FLOAT32)
    return shared_tables(_gather_geometry, p.H, p.W, p.C, p.OC, p.OH, p.OW, p.fh, p.fw, p.sh,
                         p.sw, p.dh, p.dw, p.pad_top, p.pad_left, limit, dnnl, bits,
                         short_rows, reads_dy, tiles, wide, runs, merge)


def _column_classes(oys, oxs, hp, band, wq, oh, ow, sw, reads_dy):
    """How many column classes a phase's GEMMs take (its info's last column, conv_onednn.pxi's
    _dnnl_band; 0: none, the gather). Class r holds the phase's columns i = r, r + ntx, ...
    (ntx: its taps per tap row); where the taps read consecutive dy columns and ntx divides
    dy's width, class r's A rows are the runs of ntx pixels of dy shifted by offx[0] + r
    columns, ntx apart: dy itself for the class with no shift, read in place in the bands
    whose dy rows are all inside dy, and a shifted copy for the others (one copy of dy per
    class instead of the gather's ntx). Used where one class has no shift, the matmuls read
    dy's own values and at least half the phase's rows are in such bands (else the classes
    copy as much as the gather, in GEMMs 1 / ntx as tall: C3's ran 2-3 % slower); with more
    than one class only for sw > 1, whose phase outputs are placed column by column anyway."""
    ntx = len(oxs)
    if not (reads_dy and oys and ntx and wq == ow and ow % ntx == 0 and (ntx == 1 or sw > 1)):
        return 0
    if oxs != list(range(oxs[0], oxs[0] + ntx)) or not oxs[0] <= 0 < oxs[0] + ntx:
        return 0
    inside = sum(min(band, hp - j0) for j0 in range(0, hp, band)
                 if j0 + min(oys) >= 0 and min(j0 + band, hp) - 1 + max(oys) < oh)
    return ntx if 2 * inside >= hp else 0


def _gather_geometry(H, W, C, OC, OH, OW, fh, fw, sh, sw, dh, dw, pad_top, pad_left, limit,
                     dnnl, bits, short_rows, reads_dy, tiles=0, wide=0, runs=True, merge=True):
    """:func:`phase_tables` but the filter's taps: (strides, phase info, offy, offx, the
    taps' indices into the filter's fh * fw, A values, output values, merged row phases).
    ``limit``: the values of a band's A; ``bits``: A holds 16-bit values (in float32
    scratch); ``short_rows``: at most that many GEMM rows (rounded up to whole rows; 0: no
    limit); ``reads_dy``: oneDNN's matmuls can read dy's values in place (their column
    classes, :func:`_column_classes`). With oneDNN and ``merge``, a row phase py is merged (its
    entry: where its merged taps start in the taps, else -1) where each of its sw > 1 phases
    takes one tap, read at the phase's own dy position, and the phases fill dx's rows whole
    (conv_onednn.pxi's ``merged``). ``tiles`` (which gather nothing): where a row goes alone
    (the lane tiles, or rows too wide for runs, or ``runs`` off), bands of an eighth of the
    phase's rows (one row for 15 or fewer), so that even one image has enough bands for the
    threads to share out evenly, and few enough that each band's set-up costs nothing to speak
    of; a run of narrow rows keeps its band. ``wide``: the values of a half type's widened
    window (conv_tiles.pxi), which holds a band's dy rows, so that its bands read at most that
    many (a row alone at least), and a worker's scratch stays that small, however large the
    image."""
    wq = -(-W // sw)
    if tiles == 1:  # the tile kernel's taps have C rounded up to a multiple of 16 columns
        C = tile_channels(C)
    elif tiles == 2:  # and the tile kernel for few channels, OC
        OC = tile_channels(OC)
    info, offy, offx, tap_rows, merged = [], [], [], [], []
    a_values = out_values = offset = 0
    # only the phases that hold dx rows and columns (py < H, px < W): a stride larger than the
    # image leaves the others empty, and they would make the tables grow with the stride
    for py in range(min(sh, H)):
        kys = [k for k in range(fh) if (py + pad_top - k * dh) % sh == 0]
        hp = len(range(py, H, sh))
        group, spans, own_tap, reads = [], [], [], []
        for px in range(min(sw, W)):   # oneDNN's gather: only where sw <= W
            # descending, so that the taps read dy's columns in ascending order: with
            # consecutive columns the kernel gathers them in one copy (conv_gather.pxi)
            kxs = [k for k in reversed(range(fw)) if (px + pad_left - k * dw) % sw == 0]
            wp = wq if dnnl else len(range(px, W, sw))
            # tap (ky, kx) of dx row py + sh j reads dy row j + (py + pad_top - ky dh) / sh
            oys = [(py + pad_top - k * dh) // sh for k in kys]
            span = max(oys) - min(oys) if oys else 0
            if dnnl:    # A: band + span dy rows of one tap row each
                band = (limit // max(1, wp * len(kxs) * OC) - span) if kys else limit
            else:
                band = limit // max(1, wp * len(kys) * len(kxs) * OC)
            if short_rows:
                band = min(band, -(-short_rows // max(1, wp)))
            if tiles and (tiles == 2 or not runs or not _kernels.conv_tile_rows_run(wp)):
                band = max(1, hp // 8)
                if wide:
                    # two of a half type's bands and the span of their taps in its window,
                    # so that it is widened once for two bands: a 16th, 32nd, ... of the
                    # rows, which the threads share as evenly as an 8th
                    fit, parts = max(1, (wide // max(1, OW * OC) - span) // 2), 8
                    while band > fit:
                        parts *= 2
                        band = max(1, hp // parts)
            oxs = [(px + pad_left - k * dw) // sw for k in kxs]
            if not (kys and kxs) and not dnnl:
                # no tap reaches the phase: its one unit writes zeros (a stride much larger
                # than the filter leaves most phases so, and a unit per band cost more)
                band = hp
            group.append([py, px, hp, wp, len(kys), len(kxs), max(1, min(hp, band)), 0, 0])
            spans.append(span)
            reads.append((oys, oxs))
            offy.append(oys + [0] * (fh - len(kys)))
            offx.append(oxs + [0] * (fw - len(kxs)))
            tap_rows += [ky * fw + kx for ky in kys for kx in kxs]
            # one tap, read at the phase's own dy position
            own_tap.append(oys == oxs == [0])
        if dnnl:
            band = min(row[6] for row in group)
            for row in group:
                row[6] = band
            for row, (oys, oxs) in zip(group, reads):
                row[8] = _column_classes(oys, oxs, hp, band, wq, OH, OW, sw, reads_dy)
        merged.append(merge and dnnl and sw > 1 and all(own_tap) and wq * sw == W
                      and wq == OW and hp <= OH)
        for row, span in zip(group, spans):
            k2 = row[4] * row[5] * OC
            row[7] = offset
            offset += k2 * C
            a_rows = (row[6] + span) * row[5] * OC if dnnl else row[6] * k2
            a_values = max(a_values, a_rows * row[3])
            # dnnl: the row buffer of the sw phases, and one phase's output when sw > 1
            out_values = max(out_values, row[6] * row[3] * C * ((sw + (sw > 1)) if dnnl else 1))
        info += group
    if dnnl and bits:
        a_values = -(-a_values // 2)  # 16-bit values, in float32 scratch
    starts = []
    for m in merged:   # the merged taps go after every phase's own
        starts.append(offset if m else -1)
        offset += OC * sw * C if m else 0
    return ((sh, sw), *(np.asarray(x, np.int32) for x in (info, offy, offx, tap_rows)),
            a_values, out_values, np.asarray(starts, np.int32))


def _aligned_empty(shape, dtype):
    """np.empty(shape, dtype) starting on a 64-byte boundary (NumPy's own arrays start on 16),
    from the output pool (pool.h aligns every block so): the filter's taps, so that the GEMMs'
    and the tile kernel's vector loads of them each lie in one cache line, and a filter of 1
    MiB or more gets the block its last call's taps freed."""
    return _memory.empty(shape, dtype)


def _filter_taps(filt, tap_rows, ct, nthreads, block=0):
    """The filter's taps ``tap_rows`` (of its fh * fw, in order), each as an [OC, C] matrix,
    flat, in ``ct`` (the filter's dtype, or float32 for a half type the GEMMs widen); with
    ``block``, each matrix as blocks of that many columns (conv_filter_taps)."""
    fh, fw, c, oc = filt.shape
    w = np.ascontiguousarray(filt).reshape(fh * fw, c, oc)
    taps = _aligned_empty((len(tap_rows), oc, c), w.dtype)
    _kernels.conv_filter_taps(w, tap_rows, taps, nthreads, block, avx512_kernels())
    return (taps if taps.dtype == ct else to_float32(taps, nthreads)).reshape(-1)


def fold_images(p, dy, fold_pixels, limit):
    """(problem, dy): a 1x1, stride-1 conv of small images as the 1x1 conv of N / k images k
    times as tall, k the largest divisor of N with k * OH * OW <= fold_pixels that leaves at
    least 4 GEMMs for the threads and k * OH * OW * OC <= ``limit`` values (oneDNN's gather's
    band); or as it is. oneDNN's matmul of one 7x7 image's 49 rows runs far below one of 98 or
    196, and the GEMM of a one-pixel image is all call overhead
    (docs/performance.md#small-images-of-a-1x1-conv)."""
    if not p.direct:
        return p, dy
    rows = max(1, limit // max(1, p.OW * p.OC))
    k = 1
    for j in range(2, min(p.N // 4, fold_pixels // max(1, p.OH * p.OW)) + 1):
        if p.N % j == 0 and j * p.OH * p.OW <= fold_pixels and j * p.OH <= rows:
            k = j
    if k == 1:
        return p, dy
    p = dataclasses.replace(p, dy=dy.reshape(p.N // k, k * p.OH, p.OW, p.OC), N=p.N // k,
                            H=k * p.H, OH=k * p.OH)
    return p, p.dy


def tile_channels(c):
    """C rounded up to the tile kernel's vectors of 16 channels."""
    return -(-c // 16) * 16
