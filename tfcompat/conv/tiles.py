"""The tile strategies (conv_tiles.pxi, tiles_channel.h, tiles_lanes.h): the stride phases'
bands summed in AVX-512 registers from dy in place, no gather and no GEMM. lane-tiles puts
dy's output channels (or, for up to 8 of them, dx pixels) in the vector lanes, for few input
channels; channel-tiles tiles 6 dx pixels by 64 channels."""
from dataclasses import dataclass

from .. import _checks as ck
from .._simd import kernels as _kernels
from . import onednn, plans
from .tables import fold_images, phase_tables, phases_cannot, tile_channels

F32, F64, BF16 = ck.FLOAT32, ck.FLOAT64, ck.BFLOAT16
LANES_MAX_C = _kernels.CONV_LANES_MAX_C             # the lane tiles' kernel's most channels
PIXEL_LANES_MAX_OC = _kernels.CONV_PIXEL_LANES_MAX_OC   # ... and most OC with pixels in lanes
TILE_C = _kernels.CONV_TILE_BLOCK                   # the channel tiles' block of columns


@dataclass(frozen=True)
class LaneTilesParams:
    # the most input channels C it takes, and with float32 at stride 1 (at most LANES_MAX_C):
    # with 7-10 channels its tiles hold 2 or 3 pixels, enough where every dx value takes all
    # the filter's taps, too few at a stride (docs/performance.md#lane-tiles)
    max_c: int = 6
    stride1_max_c: int = 10
    # the fewest products per dx value, fh * fw * OC / (sh * sw), with which a half type takes
    # it (half_work, or half_work_per_c per input channel where that is fewer), and the most
    # input channels with which a strided one does: below, widening dy and rounding each dx
    # value on its own cost more than the other strategies save (docs/performance.md#lane-tiles)
    half_work: int = 96
    half_work_per_c: int = 32
    half_strided_max_c: int = 3
    # the output channel counts whose tiles hold dx pixels in the lanes (tfc_px_row): no lane
    # sum per dx value, so a half type takes them whatever its products per dx value, with a
    # stride only where the pixels fill the vectors (docs/performance.md#lane-tiles)
    pixel_strided_oc: tuple = (1, 2, 4, 8)
    pixel_lanes: bool = True
    # from two images on, taps that do not overlap (fh <= sh, fw <= sw: a patch embedding) at
    # strides of sh * sw >= this many pixels keep the col2im, whose one GEMM per image beat
    # this kernel's many stride phases of a few rows each (docs/performance.md#lane-tiles)
    disjoint_stride: int = 16
    # a band's rows: an eighth of its phase's (rows go alone); as blas-gather's otherwise
    band_values: int = 1 << 19
    one_image_rows: int = 128
    # as the col2im's (col2im.Col2imParams)
    fold_pixels: int = 196
    fold_values: int = 1 << 17


@dataclass(frozen=True)
class ChannelTilesParams:
    # bfloat16 that oneDNN multiplies natively takes oneDNN's gather where its work fills at
    # least this many of the gather's largest units (onednn.units), the tiles' float32
    # multiply-adds running at half its rate; below, one unit holds most of the work and one
    # thread would run it (docs/performance.md#channel-tiles)
    native_bf16_gather_units: float = 2
    # the bytes of filter taps a group of 64-column blocks holds for one pass over a thread's
    # images: half of an L2 of 2 MiB; a group's taps copied by each worker where they take at
    # most raw_bytes (else the whole filter's, once, before the threads start;
    # docs/performance.md#channel-tiles)
    filter_bytes: int = 1 << 20
    raw_bytes: int = 2 << 20
    # narrow phase rows (tiles of 4 pixels or fewer) in runs of rows
    # (docs/performance.md#channel-tiles)
    runs: bool = True
    # a half type's dy widened a window of at most this many values per worker
    wide_values: int = 1 << 19
    # a float32 dx of at least this many bytes stored with streaming stores (0: never;
    # docs/performance.md#streaming-stores)
    stream_bytes: int = 4 << 20
    # a band's rows: an eighth of its phase's where rows go alone; runs of narrow rows in bands
    # as blas-gather's (gather.BlasGatherParams)
    band_values: int = 1 << 19
    one_image_rows: int = 128
    # as the col2im's (col2im.Col2imParams)
    fold_pixels: int = 196
    fold_values: int = 1 << 17


LANES = LaneTilesParams()
CHANNELS = ChannelTilesParams()


def _tiles_cannot(p, m):
    if not m.tiles:
        return "no AVX-512 tile kernels here (a CPU without AVX512F, or not compiled in)"
    if p.dtype == F64:
        return "float64 (the tile kernels sum in float32)"
    return phases_cannot(p)


def _direct_declines(p):
    if p.direct:
        return "a 1x1, stride-1, unpadded conv: one GEMM per image is as fast or faster"
    return None


def lanes_cannot(p, m, nthreads, params):
    why = _tiles_cannot(p, m)
    if why is None and p.C > LANES_MAX_C:
        why = f"{p.C} input channels (its kernel takes at most {LANES_MAX_C})"
    return why


def lanes_declines(p, m, nthreads, params):
    why = _direct_declines(p)
    if why:
        return why
    strided = p.sh * p.sw > 1
    if (p.N >= 2 and p.fh <= p.sh and p.fw <= p.sw
            and p.sh * p.sw >= params.disjoint_stride):
        return (f"{p.N} images of a patch embedding (taps that do not overlap at a stride of "
                f"{p.sh}x{p.sw}): the col2im's one GEMM per image is faster")
    if p.dtype in ck.HALF_DTYPES:
        least = min(params.half_work, params.half_work_per_c * p.C)
        pixels = (params.pixel_lanes and p.OC <= PIXEL_LANES_MAX_OC
                  and (not strided or p.OC in params.pixel_strided_oc))
        if p.fh * p.fw * p.OC < least * p.sh * p.sw and not pixels:
            return (f"{p.dtype} with {p.fh * p.fw * p.OC / (p.sh * p.sw):g} products per dx "
                    f"value (fewer than {least})")
        if strided and p.C > params.half_strided_max_c:
            return (f"{p.dtype} at a stride with {p.C} input channels (more than "
                    f"{params.half_strided_max_c})")
    most = params.stride1_max_c if p.dtype == F32 and not strided else params.max_c
    if p.C > most:
        return f"{p.C} input channels (more than {most})"
    return None


def channels_cannot(p, m, nthreads, params):
    return _tiles_cannot(p, m)


def channels_declines(p, m, nthreads, params):
    why = _direct_declines(p)
    if why:
        return why
    lanes = tile_channels(p.C)
    if p.N >= 2 and 3 * p.C < 2 * lanes:
        return (f"{p.N} images with {p.C} input channels in {lanes} lanes (under two thirds "
                f"full)")
    if onednn.native_bf16(p, m) and not (
            onednn.gather_cannot(p, m, nthreads, onednn.GATHER)
            or onednn.gather_declines(p, m, nthreads, onednn.GATHER)):
        units = onednn.units(p, BF16)
        if units >= params.native_bf16_gather_units:
            return (f"bfloat16 that oneDNN multiplies in bfloat16, whose gather has "
                    f"{units:g} units of work (at least {params.native_bf16_gather_units:g})")
        return None
    if m.gemm_type(p.dtype) is not None and onednn.all_merged(p):
        return "every row phase merges: oneDNN's GEMM per dy row writes a whole dx row"
    return None


def _setup(kind, p, dy, nthreads, params, group_cols=TILE_C, raw=False, stream=False,
           runs=True, wide=0, pixels=True):
    """(problem, dy, plan): the ConvPlan of ``kind`` for ``p`` (its images folded where a 1x1
    conv's are small: the same memory, reshaped)."""
    one_1x1 = p.direct and p.N == 1
    p, dy = fold_images(p, dy, params.fold_pixels, params.fold_values)
    tables = phase_tables(p, p.compute_dtype, nthreads, params.band_values,
                          short_rows=params.one_image_rows if one_1x1 else 0,
                          tiles=2 if kind == plans.Kind.CONV_LANE_TILES else 1,
                          wide=wide, raw=raw, runs=runs)
    plan = plans.new_plan(kind, p)
    plan.phases(tables)
    plan.tiles(group_cols, raw, stream, runs, wide, pixels)
    return p, dy, plan


def _lanes(p, params):
    return plans.Kind.CONV_LANE_TILES, {"pixels": params.pixel_lanes}


def _channels(p, params):
    taps = p.fh * p.fw
    # the dx columns of a group: as many blocks of TILE_C columns as have taps (taps * OC
    # values a column) within filter_bytes, at least one
    group_cols = TILE_C * max(1, params.filter_bytes // (taps * p.OC * TILE_C * 4))
    raw = (group_cols < tile_channels(p.C)
           and taps * p.OC * group_cols * 4 <= params.raw_bytes)
    stream = (params.stream_bytes > 0 and p.dtype == F32
              and p.N * p.H * p.W * p.C * 4 >= params.stream_bytes)
    wide = params.wide_values if p.dtype in ck.HALF_DTYPES else 0
    return plans.Kind.CONV_CHANNEL_TILES, {"group_cols": group_cols, "raw": raw,
                                           "stream": stream, "runs": params.runs, "wide": wide}


def _run(how, p, nthreads, dy, params):
    nhwc = (p.N, p.H, p.W, p.C)
    kind, kw = how(p, params)
    p, dy, plan = _setup(kind, p, dy, nthreads, params, **kw)
    return plans.run(plan, p, dy, plans.threads_for(plan, nthreads)).reshape(nhwc)


def run_lanes(p, m, nthreads, dy, params):
    return _run(_lanes, p, nthreads, dy, params)


def run_channels(p, m, nthreads, dy, params):
    return _run(_channels, p, nthreads, dy, params)


def c_plan(name, p, nthreads, params):
    """For the C entry (tfcompat/_capi.py): (problem, ConvPlan, raw) of tile strategy ``name``
    for the NHWC problem ``p``, whose filter's taps each call copies from its own filter
    (csrc/capi_conv.pxi; the plan's, made from ``p``'s filter, only give their sizes)."""
    kind, kw = (_lanes if name == "lane-tiles" else _channels)(p, params)
    q, _, plan = _setup(kind, p, p.dy, nthreads, params, **kw)
    return q, plan, kw.get("raw", False)
