"""The Python side of the C entry (tfcompat/csrc/capi.pxi, docs/architecture.md#the-c-entry):
a signature the C side has not seen is validated here, by the same policy layer as every
other call, and its cython-backend plan built; errors carry the message a Python caller gets,
in the op's TF argument names."""
import dataclasses
import math
from typing import NamedTuple

import numpy as np

from . import _checks as ck
from . import _forward as fw
from . import _resample as rs
from .api import _shape_only, rename
from ._simd import kernels as _kernels
from .backends import cython_backend as _cb
from .ops import OPS, table as _table

# The C entry's kernel codes, defined in csrc/capi.h only: {registry name: code}. A code's
# Python name is the name of its kernel's constant in the op table
# (KernelCode.RESIZE_BILINEAR_GRAD: ops.RESIZE_BILINEAR_GRAD, "ResizeBilinearGrad").
KernelCode = _kernels.KernelCode
CODES = {getattr(_table, code.name): code for code in KernelCode}
NAMES = {code: name for name, code in CODES.items()}

class OpCPlan(NamedTuple):
    """What the C entry copies of a validated signature (csrc/capi.pxi)."""
    plan: object        # a grad's cython-backend ResamplePlan, or a forward's ForwardCPlan
    forward: bool
    out_dims: tuple     # in the signature's layout
    out_code: int       # the output's dtype code (capi.h)


def op_plan(kernel, front, layout, args, values, n_values, n_args):
    """The plan of an op's signature (csrc/capi.h's TfcOpSig: ``args`` its arguments as
    (kind, dtype or None, dims, strides), ``values`` the values it keeps of ``n_values``),
    checked against the op table's record of ``kernel``: an :class:`OpCPlan` (ValueError,
    TypeError or MemoryError, in the op's TF argument names, for an invalid signature).
    ``front``: a framework front's call, every tensor of the input's dtype; else TF's op (a
    grad only: no TF kernel of ours runs a forward)."""
    name = NAMES.get(kernel)
    if name is None or not OPS[name].c_args or OPS[name].method is None:
        # (the conv's signature is made into its own plan key in C: capi_conv.pxi)
        raise ValueError(f"tfcompat's C entry: no resize plan for kernel code {kernel}")
    try:
        return _op_plan(OPS[name], bool(front), layout, args, values, n_values, n_args)
    except (ValueError, TypeError, MemoryError) as exc:
        raise type(exc)(rename(name, str(exc))) from None


def _op_plan(op, front, layout, args, values, n_values, n_args):
    if layout not in _kernels.LAYOUTS.values():
        raise ValueError(f"tfcompat's C entry: no layout {layout}")
    nchw = layout == _kernels.LAYOUTS["NCHW"]
    kinds = tuple(_kernels.ARG_KINDS[kind] for _, kind in op.c_args)
    if n_args != len(kinds) or tuple(a[0] for a in args) != kinds:
        raise ValueError(f"tfcompat's C entry: {op.name} takes the arguments {list(op.c_args)}")
    got, attrs = decode(op, args, values, n_values)
    align, half = attrs["align_corners"], attrs["half_pixel_centers"]
    _, dtype, dims, strides = args[0]
    if any(a[1] is None for a in args if a[0] != _kernels.ARG_KINDS["values"]):
        raise TypeError("tfcompat's C entry: a dtype code it does not know")
    channels_last = _memory_order(dims, strides, nchw)
    shape = _nhwc(dims, nchw)
    nearest = op.method == "nearest"
    if front:
        if dtype not in front_dtypes(op.name):
            raise TypeError(f"a front's {op.name} takes {ck.dtype_names(front_dtypes(op.name))}"
                            f"; got {dtype}")
        ck.check_align_half(align, half)
    if not op.grad_of:
        if not front:
            raise ValueError(f"{op.name}: the C entry plans a forward resize for a front "
                             "(front=1) only")
        size = got["size"]
        if len(size) != 2 or len(shape) != 4:
            raise ValueError(f"images: got shape {shape} and size {list(size)}; expected "
                             "[batch, height, width, channels] and [new_height, new_width]")
        out_shape = (shape[0], size[0], size[1], shape[3])
        plan = _forward_cplan(op.name, nearest, dtype, shape, out_shape, align, half)
        if not channels_last:   # NCHW memory: B * C images of one channel
            b, ih, iw, c, oh, ow = plan.sizes
            plan.sizes, plan.pixel = (b * c, ih, iw, 1, oh, ow), dtype.itemsize
        return OpCPlan(plan, True, _dims_of(out_shape, nchw), _kernels.DTYPE_CODES[dtype])
    if "size" in got:   # TF's nearest grad writes [batch, size..., channels]
        image = (shape[0],) + got["size"] + (shape[-1],) if shape else got["size"]
        out_dtype = dtype
    else:
        image, out_dtype = _nhwc(args[1][2], nchw), args[1][1]
    dy = rs.ArrayMeta(shape, dtype)
    if front and not nearest:   # (TF's op reads float32 grads; a front's are widened)
        dy = rs.ArrayMeta(shape, ck.FLOAT64 if dtype == ck.FLOAT64 else ck.FLOAT32)
    layout = rs._tf_pair_layout(op.name, dy, image, out_dtype, align, half, nearest)
    if front:
        layout = dataclasses.replace(layout, dy_dtype=dtype)
    if not channels_last:
        layout = dataclasses.replace(layout, channels_last=False)
    plan = _cb.resample_plan(layout)
    return OpCPlan(plan, False, _dims_of(image, nchw), _kernels.DTYPE_CODES[out_dtype])


def encode(op, args, attrs):
    """An op signature's values (csrc/capi.h): each values argument's first TFC_MAX_LIST
    elements (``args``: {name: its elements}), then the attributes (``attrs``: {TF's name:
    value}) as their kinds keep them in the op table's record."""
    out = []
    for name, kind in op.c_args:
        if kind == "values":
            out += [_value(v) for v in list(args[name])[:_kernels.MAX_LIST]]
    for name, kind, *choices in op.c_attrs:
        v = attrs[name]
        if kind == "ints":
            out += [len(v)] + [int(x) for x in list(v)[:_kernels.MAX_LIST]]
        elif kind == "choice":
            out.append(choices[0].index(v) if v in choices[0] else -1)
        else:
            out.append(_value(v))
    return out


def _value(v):
    """An int as it is; a float as its double's bits."""
    if isinstance(v, (float, np.floating)):
        return int(np.array(v, np.float64).view(np.int64))
    return int(v)


def decode(op, args, values, n_values):
    """What :func:`encode` (or the TF plugin) kept in a signature's values: ({values
    argument: its kept elements}, {TF's attribute name: value}); ValueError where the count
    is not the record's."""
    got, at = {}, 0
    for (name, kind), (_, dtype, dims, _) in zip(op.c_args, args):
        if kind == "values":
            n = min(math.prod(dims), _kernels.MAX_LIST)
            v = [int(x) for x in values[at:at + n]]
            if dtype is not None and dtype.kind == "f":
                v = np.array(v, np.int64).view(np.float64).tolist()
            got[name] = tuple(v)
            at += n
    attrs = {}
    for name, kind, *choices in op.c_attrs:
        if at >= len(values):
            break
        if kind == "ints":
            n = int(values[at])
            attrs[name] = tuple(int(x) for x in values[at + 1:at + 1 + min(max(n, 0),
                                                                            _kernels.MAX_LIST)])
            at += 1 + min(max(n, 0), _kernels.MAX_LIST)
        elif kind == "choice":
            i = int(values[at])
            attrs[name] = choices[0][i] if 0 <= i < len(choices[0]) else None
            at += 1
        elif kind == "float":
            attrs[name] = float(np.array(values[at], np.int64).view(np.float64))
            at += 1
        else:
            attrs[name] = bool(values[at]) if kind == "bool" else int(values[at])
            at += 1
    if n_values != at or len(attrs) != len(op.c_attrs):
        raise ValueError(f"tfcompat's C entry: {op.name} got {n_values} values; expected "
                         f"{at} for its arguments {list(op.c_args)} and attributes "
                         f"{[a[0] for a in op.c_attrs]}")
    return got, attrs


def front_dtypes(name):
    """The dtypes a framework front's call of op ``name`` takes (the op table's): every dtype
    of a forward whose output has its input's dtype (nearest: a copy); else the float types
    (a front's result has its input's dtype, and a gradient is a float's)."""
    op = OPS[name]
    if not op.grad_of and op.out_dtype == op.inputs[0].key:
        return op.dtypes(op.inputs[0].key)
    return ck.FLOAT_DTYPES


def _nhwc(dims, nchw):
    dims = tuple(int(d) for d in dims)
    return (dims[0], dims[2], dims[3], dims[1]) if nchw and len(dims) == 4 else dims


def _dims_of(shape, nchw):
    """An NHWC shape in the signature's layout."""
    return (shape[0], shape[3], shape[1], shape[2]) if nchw else tuple(shape)


def _memory_order(dims, strides, nchw):
    """True where a tensor's memory is NHWC (TF's and JAX's tensors, a channels_last NCHW one),
    False where it is NCHW; ValueError for other strides (a front copies those first)."""
    def same(want):     # (a dimension of size 1 may have any stride)
        return all(d == 1 or s == w for d, s, w in zip(dims, strides, want))
    contiguous = tuple(math.prod(dims[i + 1:]) for i in range(len(dims)))
    if not any(strides) or same(contiguous):
        return not nchw
    if nchw and len(dims) == 4:
        n, c, h, w = dims
        if same((h * w * c, 1, w * c, c)):
            return True
    raise ValueError(f"tfcompat's C entry: strides {list(strides)} of a tensor of shape "
                     f"{list(dims)}; expected C-contiguous" + (" or channels_last" if nchw else ""))


class ForwardCPlan:
    """What the C entry copies of a forward resize's signature (csrc/capi.pxi): the sizes
    (B, IH, IW, C, OH, OW), the cython backend's axis tables, and the conversions around the
    kernel: ``widen`` and ``round_out`` (0, 1 float16, 2 bfloat16) a half type's float32
    images and output; ``copy``: a bilinear resize to the image's own size, which TF casts."""

    def __init__(self, problem, dtype):
        b, ih, iw, c = problem.images.shape
        _, oh, ow, _ = problem.out_shape
        self.empty, self.out_shape = problem.empty, problem.out_shape
        self.out_bytes = math.prod(problem.out_shape) * dtype.itemsize
        self.sizes = (b, ih, iw, c, oh, ow)
        self.linear, self.copy = problem.linear, problem.linear and problem.identity
        half = 1 if dtype == ck.FLOAT16 else 2 if dtype == ck.BFLOAT16 else 0
        self.widen = self.round_out = half if problem.linear else 0
        self.src_num = (ck.FLOAT32 if self.widen else dtype).num
        self.wide = problem.linear and dtype == ck.FLOAT64
        self.pixel = c * dtype.itemsize
        self.tables = () if self.empty or self.copy else _cb.forward_plan(problem).tables


def _forward_cplan(name, nearest, dtype, shape, out_shape, align_corners, half_pixel_centers):
    attrs = {"size": list(out_shape[1:3]), "alignCorners": bool(align_corners),
             "halfPixelCenters": bool(half_pixel_centers)}
    p = fw._problem(name, {"images": _shape_only(shape, dtype)}, attrs)
    # TF's float32 arithmetic, rounded once for a half type; float64 in float64 (the fronts'
    # extension, docs/semantics.md §12)
    computed = (dtype if nearest else ck.FLOAT64 if dtype == ck.FLOAT64 else ck.FLOAT32)
    return ForwardCPlan(fw.ForwardProblem(p.images, name, p.axes, computed), dtype)


_capsule = None


def capsule():
    """The C entry's PyCapsule ("tfcompat.C_API", a TfcApi of csrc/capi.h), made once; the
    thread count it reports follows tfcompat.set_num_threads from then on."""
    global _capsule
    if _capsule is None:
        from . import _threads
        from ._simd import kernels
        _capsule = kernels.c_api_capsule()
        _threads.on_change(lambda n: kernels.capi_set_threads(n))
    return _capsule


_TILES = ("lane-tiles", "channel-tiles")


class ConvCPlan:
    """What the C entry keeps of a Conv2DBackpropInput signature (csrc/capi_conv.pxi): dx's
    shape and bytes, and either ``plan`` (a tile strategy's ConvPlan, run from C with this
    call's taps in ``layout``) or ``runner`` (tfcompat's Python conv, under the GIL)."""

    def __init__(self, p, out_shape, out_bytes):
        self.out_shape, self.out_bytes = out_shape, out_bytes
        self.empty = p.empty
        self.plan = self.runner = None
        self.layout, self.simd, self.taps_bytes, self.nbytes = 0, False, 0, 0


class _ConvRunner:
    """A conv run by tfcompat's Python conv on the C entry's memory (memoryviews)."""

    def __init__(self, p):
        from .conv.run import run_conv
        self.p, self.run_conv = p, run_conv
        self.dy_bytes, self.filter_bytes = p.dy.nbytes, p.filter.nbytes

    def __call__(self, dy, w, dx):
        p = self.p
        out = np.frombuffer(dx, p.dtype).reshape(p.out_shape)
        q = dataclasses.replace(p, dy=np.frombuffer(dy, p.dtype).reshape(p.dy.shape),
                                filter=np.frombuffer(w, p.dtype).reshape(p.filter.shape),
                                out=out if p.channels_last else None)
        got = self.run_conv(q)
        # NHWC: written in place, unless a strategy made its own (a half type it widens)
        if got.__array_interface__["data"][0] != out.__array_interface__["data"][0]:
            out[...] = got


def _counted(name, values, count, expected):
    if count > len(values):    # the C side keeps at most 8 (16) values
        raise ValueError(f"{name}: got {count} values; expected {expected}")
    return values


def conv_plan(dtype, dy_shape, filter_shape, sizes_rank, input_sizes, sizes_count, padding,
              strides, strides_count, dilations, dilations_count, explicit_paddings,
              paddings_count, data_format, threads):
    """A :class:`ConvCPlan` for a TF Conv2DBackpropInput signature (ValueError or TypeError
    for an invalid one, MemoryError for one whose dx and scratch cannot fit), its strategy
    chosen for ``threads`` threads as a Python call's is. Each list comes with its count (the
    C side keeps at most 8 values of each, 16 paddings)."""
    import math

    from .api import _shape_only
    from .conv import problem as cp, run as cr, tiles
    from ._arrays import avx512_kernels
    from ._memory import check_peak
    from ._simd import kernels as kn
    from .registry import CONV2D_BACKPROP_INPUT

    if dtype is None:
        raise TypeError("out_backprop: a dtype tfcompat's conv does not take")
    try:
        if sizes_rank != 1:
            raise ValueError(f"input_sizes: got a tensor of rank {sizes_rank}; expected a "
                             "vector of 2 or 4 values")
        strides = _counted("strides", strides, strides_count, 4)
        dilations = _counted("dilations", dilations, dilations_count, 4)
        explicit_paddings = _counted("explicit_paddings", explicit_paddings, paddings_count, 8)
        dy = _shape_only(tuple(dy_shape), dtype)
        w = _shape_only(tuple(filter_shape), dtype)
        attrs = cp.functional_attrs(_counted("input_sizes", input_sizes, sizes_count, "2 or 4"),
                                    w, dy, strides, padding, explicit_paddings, data_format,
                                    dilations)
        p = cp.conv_problem({"dy": dy, "filter": w}, attrs)
    except (ValueError, TypeError, MemoryError) as exc:
        raise type(exc)(rename(CONV2D_BACKPROP_INPUT, str(exc))) from None
    out = ConvCPlan(p, p.out_shape, math.prod(p.out_shape) * p.dtype.itemsize)
    if p.empty:
        return out
    nthreads = max(1, threads)
    q, strategy, choice = cr._choice(p, nthreads)
    if not (p.channels_last and strategy.name in _TILES):
        out.runner = _ConvRunner(p)
        return out
    q, plan, raw = tiles.c_plan(strategy.name, q, nthreads, strategy.params)
    if plan.kind == kn.ConvKind.CONV_LANE_TILES:
        out.layout = kn.TapsLayout.TAPS_LANES
        taps = plan.tables[0][4].nbytes
    elif raw:
        out.layout = kn.TapsLayout.TAPS_FILTER if q.C % 16 == 0 else kn.TapsLayout.TAPS_PADDED
        taps = 0 if q.C % 16 == 0 else plan.tables[0][4].nbytes
    else:
        out.layout = kn.TapsLayout.TAPS_BLOCKS
        taps = plan.tables[0][4].nbytes * (1 + (q.dtype.itemsize == 2) / 2)
    nt = min(nthreads, plan.units())
    scratch = plan.workspace(nt) * q.compute_dtype.itemsize + taps
    check_peak(p.dx_bytes + scratch, "input_sizes",
               f"dx and {scratch / 2**30:.2f} GiB of the kernel's scratch and filter taps")
    out.plan, out.simd, out.taps_bytes = plan, avx512_kernels(), int(taps)
    out.nbytes = sum(a.nbytes for a in plan.tables[0] if hasattr(a, "nbytes")) + sum(
        a.nbytes for a in plan.tables[1:])
    return out
