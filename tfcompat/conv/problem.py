"""Conv2DBackpropInput's problem (docs/semantics.md): attribute parsing, output-size
arithmetic for every padding kind, and TF's checks."""
import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .. import _checks as ck, _memory
from ..ops import CONV2D_BACKPROP_INPUT, OPS

KERNEL = CONV2D_BACKPROP_INPUT
OP = OPS[KERNEL]
ATTRS = OP.attr_keys


@dataclass(frozen=True)
class ConvProblem:
    dy: np.ndarray          # as given (layout of data_format)
    filter: np.ndarray      # [fh, fw, in_c, out_c]
    channels_last: bool
    N: int
    H: int
    W: int
    C: int
    OH: int
    OW: int
    OC: int
    fh: int
    fw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pad_top: int
    pad_left: int
    pad_bottom: int
    pad_right: int
    # NCHW: the kernels' NHWC dx transposed in its own buffer (run.py decides, by memory)
    nchw_in_place: bool = False
    # NHWC: a C-contiguous array of dx's size and dtype the kernels write dx into, instead of
    # a new one (the C entry's caller's buffer, tfcompat/_capi.py); None: a new array
    out: np.ndarray = None

    def dx_buffer(self, shape, dtype):
        """Where a strategy writes dx (``shape``, ``dtype``): ``out`` (NHWC, the same dtype),
        reshaped, or a new array."""
        if self.out is not None and self.channels_last and np.dtype(dtype) == self.dtype:
            return self.out.reshape(shape)
        return _memory.empty(shape, dtype)

    @property
    def out_shape(self):
        if self.channels_last:
            return (self.N, self.H, self.W, self.C)
        return (self.N, self.C, self.H, self.W)

    @property
    def dtype(self):
        return self.dy.dtype

    out_dtype = dtype

    @property
    def compute_dtype(self):
        return ck.FLOAT64 if self.dtype == ck.FLOAT64 else ck.FLOAT32

    @property
    def empty(self):
        """No products: dx is zeros (an empty dy, or a filter with no taps, as in TF)."""
        return (0 in (self.N, self.H, self.W, self.C) or 0 in (self.OH, self.OW, self.OC)
                or 0 in (self.fh, self.fw))

    def floor_pads(self):
        """(bottom, right) pads with which a floor-rounding output size (TF's EXPLICIT,
        oneDNN's) gives (OH, OW): fewer than the call's where the floor discarded some, more
        where tfjs's 'ceil' or 'round' made the output larger."""
        eff_h, eff_w = (self.fh - 1) * self.dh + 1, (self.fw - 1) * self.dw + 1
        return (max(0, (self.OH - 1) * self.sh + eff_h - self.H - self.pad_top),
                max(0, (self.OW - 1) * self.sw + eff_w - self.W - self.pad_left))

    @property
    def dx_bytes(self):
        return self.N * self.H * self.W * self.C * self.dtype.itemsize

    def layout_bytes(self):
        """Bytes a call holds beside dx for its layout (docs/semantics.md §7): NCHW, dy's NHWC
        copy and the NCHW dx (one image of it where dx is transposed in place, image by image:
        :func:`nchw_needs_in_place`); NHWC, a copy of a dy that is not C-contiguous and aligned."""
        if self.channels_last:
            dy = self.dy
            return 0 if dy.flags.c_contiguous and dy.flags.aligned else dy.nbytes
        image = self.dx_bytes // self.N if self.nchw_in_place else self.dx_bytes
        return self.dy.nbytes + image

    def flops(self):
        return 2.0 * self.N * self.OH * self.OW * self.OC * self.fh * self.fw * self.C

    @property
    def direct(self):
        """A 1x1, stride-1, unpadded conv: dx = dy @ filter^T, one GEMM over the pixels."""
        return ((self.fh, self.fw, self.sh, self.sw, self.pad_top, self.pad_left, self.OH,
                 self.OW) == (1, 1, 1, 1, 0, 0, self.H, self.W))

    @property
    def phases(self):
        """The stride phases that hold dx pixels, min(sh, H) * min(sw, W)."""
        return min(self.sh, self.H) * min(self.sw, self.W)

    def as_rows(self):
        """A conv over images one pixel wide (W = OW = fw = 1, no padding on the left: a 1-D
        conv along H, as [N, L, 1, C]) as the same conv over images one pixel tall, whose dx
        rows the kernels take whole instead of one pixel at a time: dy, the filter and dx keep
        their memory, reshaped, and H's stride, dilation and pads go to W. None for any other
        conv (docs/performance.md#one-pixel-wide-images-as-rows)."""
        if not (self.W == 1 and self.OW == 1 and self.fw == 1 and self.pad_left == 0
                and self.H > 1):
            return None
        dy = self.dy.reshape((self.N, 1, self.OH, self.OC) if self.channels_last
                             else (self.N, self.OC, 1, self.OH))
        return dataclasses.replace(
            self, dy=dy, filter=self.filter.reshape(1, self.fh, self.C, self.OC), H=1,
            W=self.H, OH=1, OW=self.OH, fh=1, fw=self.fh, sh=self.sw, sw=self.sh, dh=self.dw,
            dw=self.dh, pad_top=0, pad_left=self.pad_top, pad_bottom=self.pad_right,
            pad_right=self.pad_bottom)


def _spatial_pair(value, name, data_format):
    """[a, b], a single number, or 4 values in data order with 1 at N and C."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        vals = (int(value), int(value))
    else:
        vals = ck.as_int_tuple(value, name, (1, 2, 4))
        if len(vals) == 1:
            vals = vals * 2
        elif len(vals) == 4:
            n_i, c_i, h_i, w_i = (0, 3, 1, 2) if data_format == "NHWC" else (0, 1, 2, 3)
            if vals[n_i] != 1 or vals[c_i] != 1:
                raise ValueError(f"{name}: got {list(vals)}; expected 1 in the batch and channel "
                                 f"positions of {data_format}")
            vals = (vals[h_i], vals[w_i])
    for v in vals:
        if v < 1:
            raise ValueError(f"{name}: got {list(vals)}; expected positive values")
    return vals


# An NCHW dx of at least this many bytes in two or more images, whose transposed copy would not
# fit in the memory left, is transposed from the kernels' NHWC in its own buffer, one image at a
# time through a one-image buffer: 1.03-1.50x the copy's time (docs/performance.md#nchw-output)
NCHW_IN_PLACE_BYTES = 64 << 20


def nchw_needs_in_place(p):
    """Whether an NCHW conv's dx should be transposed in place: a copy (two dx and dy's
    copy at the peak) would not fit where dx and one image would."""
    if p.channels_last or p.N < 2 or p.dx_bytes < NCHW_IN_PLACE_BYTES:
        return False
    avail = _memory.available_bytes()
    if avail is None:
        return False
    # the pool's cached blocks would go back first (_memory.check_peak)
    avail += _memory.memory_pool_stats()["cached_bytes"]
    return 2 * p.dx_bytes + p.dy.nbytes > avail


def _round(value, mode):
    if mode in (None, "floor"):
        return math.floor(value)
    if mode == "ceil":
        return math.ceil(value)
    return math.floor(value + 0.5)  # JavaScript Math.round: halves up


def _div(n, d):
    """n / d truncated toward zero, as TF's C++ integer division (GetWindowedOutputSize): a
    VALID axis 1 wide under a 4-tap filter at stride 2 has (1 - 4 + 2) / 2 = 0 outputs there,
    not floor's -1."""
    return -(-n // d) if n < 0 else n // d


def conv_output_size(size, ksize, stride, dilation, padding, pads=(0, 0), rounding=None):
    """(output size, pad before, pad after) of one spatial axis (docs/semantics.md).

    ``padding``: 'valid', 'same', or 'explicit' with ``pads`` = (before, after) (a tfjs
    numeric pad p is explicit (p, p)). ``rounding``: tfjs's dimRoundingMode for an explicit
    pad (None: floor, TF's arithmetic). The size may come out negative: the caller reports it.
    """
    eff = (ksize - 1) * dilation + 1
    if padding == "valid":
        return _div(size - eff + stride, stride), 0, 0
    if padding == "same":
        out = -(-size // stride)
        need = max(0, (out - 1) * stride + eff - size)
        return out, need // 2, need - need // 2  # the odd pixel goes after
    before, after = pads
    if rounding is None:
        return _div(size + before + after - eff + stride, stride), before, after
    return _round((size + before + after - eff) / stride + 1, rounding), before, after


def _explicit_pads(pad, data_format):
    """Explicit pads [[0,0],[t,b],[l,r],[0,0]] (or 8 flat values) in data order."""
    flat = ck.as_int_tuple(np.asarray(pad, dtype=object).reshape(-1).tolist()
                           if not isinstance(pad, np.ndarray) else pad, "pad", (8,))
    pairs = [flat[0:2], flat[2:4], flat[4:6], flat[6:8]]
    if any(v < 0 for v in flat):
        raise ValueError(f"pad: got {[list(p) for p in pairs]}; expected non-negative values")
    n_i, c_i, h_i, w_i = (0, 3, 1, 2) if data_format == "NHWC" else (0, 1, 2, 3)
    if pairs[n_i] != (0, 0) or pairs[c_i] != (0, 0):
        raise ValueError(f"pad: got {[list(p) for p in pairs]}; expected [0, 0] for the batch and "
                         f"channel dimensions of {data_format}")
    return pairs[h_i], pairs[w_i]


def _check_extents(strides, dilations, ksizes, pads, pad):
    """Strides, dilations, explicit pads and the dilated filter's extent within int32: TF's
    strides and dilations are int32 attributes (larger ones abort TF 2.21's process), and our
    kernels' tables hold dy offsets of up to the filter's extent plus the padding as int32."""
    for name, vals in (("strides", strides), ("dilations", dilations)):
        if max(vals) > ck.MAX_AXIS:
            raise ValueError(f"{name}: got {list(vals)}; expected values at most {ck.MAX_AXIS}")
    if max(pads) > ck.MAX_AXIS:
        raise ValueError(f"pad: got {pad!r}; expected values at most {ck.MAX_AXIS}")
    for k, (f, d) in enumerate(zip(ksizes, dilations)):
        if (f - 1) * d + 1 > ck.MAX_AXIS:
            raise ValueError(f"dilations: got {list(dilations)}, with which the filter's spatial "
                             f"dimension {k} ({f} taps) spans {(f - 1) * d + 1} positions; "
                             f"expected at most {ck.MAX_AXIS}")


def conv_problem(inputs, attrs):
    ck.check_attrs(attrs, KERNEL, ATTRS)
    dy = ck.as_array(ck.get_input(inputs, "dy", KERNEL), "dy")
    w = ck.as_array(ck.get_input(inputs, "filter", KERNEL), "filter")
    fmt = OP.attr("dataFormat")
    data_format = ck.choice(attrs.get("dataFormat", fmt.default), "dataFormat", fmt.choices)
    channels_last = data_format == "NHWC"
    ck.check_dtype(dy, "dy", OP.dtypes("dy"))
    ck.check_dtype(w, "filter", OP.dtypes("filter"))
    if w.dtype != dy.dtype:
        raise TypeError(f"filter: got dtype {w.dtype}; expected the dtype of dy ({dy.dtype})")
    ck.check_rank(dy, "dy", 4, data_format)
    ck.check_rank(w, "filter", 4, "[filter_height, filter_width, in_channels, out_channels]")
    if "inputShape" not in attrs:
        raise ValueError(f"{KERNEL}: missing attribute 'inputShape'; expected the 4-D shape of x")
    x_shape = ck.as_int_tuple(attrs["inputShape"], "inputShape", (4,))
    if any(d < 0 for d in x_shape):
        raise ValueError(f"inputShape: got {list(x_shape)}; expected non-negative sizes")
    ck.check_size(x_shape, "inputShape", max(dy.dtype.itemsize, 4))
    if channels_last:
        N, H, W, C = x_shape
        dN, dOH, dOW, dOC = dy.shape
    else:
        N, C, H, W = x_shape
        dN, dOC, dOH, dOW = dy.shape
    fh, fw, fic, foc = (int(d) for d in w.shape)
    if dN != N:
        raise ValueError(f"dy: batch {dN} (shape {tuple(dy.shape)}) does not match inputShape's "
                         f"batch {N} ({list(x_shape)})")
    if foc != dOC:
        raise ValueError(f"filter: out_channels {foc} (shape {tuple(w.shape)}) does not match dy's "
                         f"{dOC} channels (shape {tuple(dy.shape)})")
    if fic != C:
        grouped = fic > 0 and C % fic == 0
        raise ValueError(f"filter: in_channels {fic} (shape {tuple(w.shape)}) does not match "
                         f"inputShape's {C} channels ({list(x_shape)})"
                         + ("; grouped convolution is not supported" if grouped else ""))
    sh, sw = _spatial_pair(attrs.get("strides", OP.attr("strides").default), "strides",
                           data_format)
    dh, dw = _spatial_pair(attrs.get("dilations", OP.attr("dilations").default),
                           "dilations", data_format)
    rounding = attrs.get("dimRoundingMode")
    if rounding is not None:
        ck.choice(rounding, "dimRoundingMode", OP.attr("dimRoundingMode").choices)
    pad = attrs.get("pad", OP.attr("pad").default)
    if isinstance(pad, str):
        kind = ck.choice(pad.lower(), "pad", OP.attr("pad").choices)
        if rounding is not None:
            raise ValueError(f"dimRoundingMode: got {rounding!r} with pad {pad!r}; it applies only "
                             "to a numeric or explicit pad")
        pads_h = pads_w = (0, 0)
    else:
        kind = "explicit"
        if isinstance(pad, (int, float, np.integer, np.floating)) and not isinstance(pad, bool):
            p = ck.as_int(pad, "pad")
            if p < 0:
                raise ValueError(f"pad: got {p}; expected a non-negative number")
            pads_h = pads_w = (p, p)
        else:
            pads_h, pads_w = _explicit_pads(pad, data_format)
    _check_extents((sh, sw), (dh, dw), (fh, fw), pads_h + pads_w, pad)
    oh, pt, pb = conv_output_size(H, fh, sh, dh, kind, pads_h, rounding)
    ow, pl, pr = conv_output_size(W, fw, sw, dw, kind, pads_w, rounding)
    for k, (o, actual, i, f, s, d) in enumerate(((oh, dOH, H, fh, sh, dh), (ow, dOW, W, fw, sw, dw))):
        if o < 0:
            raise ValueError(f"inputShape: spatial dimension {k} of size {i} is smaller than the "
                             f"dilated filter ({(f - 1) * d + 1}); the computed output size {o} "
                             "is negative")
        if o != actual:
            raise ValueError(f"dy: size of out_backprop doesn't match computed: actual = {actual}, "
                             f"computed = {o} (spatial dim {k}: input {i}, filter {f}, stride {s}, "
                             f"dilation {d}, pad {pad!r})")
    if oh * ow * fh * fw * C > ck.MAX_AXIS or fh * fw * C * dOC > ck.MAX_AXIS:
        raise ValueError(f"dy: one image's columns ({oh}x{ow} x {fh}x{fw}x{C}) exceed the "
                         f"{ck.MAX_AXIS} elements a BLAS call can address")
    return ConvProblem(dy, w, channels_last, N, H, W, C, oh, ow, dOC, fh, fw, sh, sw, dh, dw, pt, pl,
                       pb, pr)


def functional_attrs(input_sizes, filter, out_backprop, strides, padding, explicit_paddings,
                     data_format, dilations):
    """Map ``tf.raw_ops.Conv2DBackpropInput`` arguments to the registry's tfjs attributes."""
    data_format = ck.choice(data_format, "data_format", ("NHWC", "NCHW"))
    sizes = ck.as_int_tuple(input_sizes, "input_sizes", (2, 4))
    if len(sizes) == 2:
        dy_shape = np.shape(out_backprop)
        w_shape = np.shape(filter)
        if len(dy_shape) != 4 or len(w_shape) != 4:
            raise ValueError(f"input_sizes: got 2 values {list(sizes)}, which need a rank-4 "
                             f"out_backprop and filter to supply N and C; got shapes {dy_shape} "
                             f"and {w_shape}")
        n, c = dy_shape[0], w_shape[2]
        sizes = (n, sizes[0], sizes[1], c) if data_format == "NHWC" else (n, c, sizes[0], sizes[1])
    strides = ck.as_int_tuple(strides, "strides", (4,))
    dilations = ck.as_int_tuple(dilations, "dilations", (4,))
    padding = ck.choice(padding, "padding", ("SAME", "VALID", "EXPLICIT"))
    if padding == "EXPLICIT":
        pads = ck.as_int_tuple(explicit_paddings, "explicit_paddings", (8,))
        pad = [list(pads[0:2]), list(pads[2:4]), list(pads[4:6]), list(pads[6:8])]
    else:
        if explicit_paddings is not None and len(tuple(explicit_paddings)) not in (0,):
            raise ValueError(f"explicit_paddings: got {list(explicit_paddings)} with padding "
                             f"{padding!r}; expected [] unless padding is 'EXPLICIT'")
        pad = padding.lower()
    return {"inputShape": list(sizes), "strides": list(strides), "pad": pad,
            "dataFormat": data_format, "dilations": list(dilations)}
