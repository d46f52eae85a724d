"""Cases as data, with compact printable ids that parse back (in the spirit of oneDNN benchdnn).

Examples::

    rbg_b2_i5x7_o10x3_c3_thp_f32          ResizeBilinearGrad, half-pixel centers
    rnn_b1_i3x5_o5x9_c1_tachp_f16         ResizeNearestNeighborGrad, both flags
    rb_b2_i5x7_o10x3_c3_tlg_u8            ResizeBilinear (the forward), TF1's legacy mode
    rn_b1_i3x5_o5x9_c1_tac_f32            ResizeNearestNeighbor, align corners
    conv_b3_i9x8_c3_oc4_k3x3_s2x2_d1x1_pE1.2.0.1_lnchw_f32
    interp_mtrilinear_tac_lncx_b2_i5x3x4_o9x2x7_c3_bf16
    ortrg_b1_i4x4_o6x6_c1_thp_sc1.7x1.7_f32

Tokens after the op: ``b`` batch, ``i`` original spatial sizes, ``o`` resized sizes, ``c``
channels, ``oc`` output channels, ``k`` kernel, ``s`` strides, ``d`` dilations, ``p`` padding
(SAME, VALID or explicit top.bottom.left.right), ``m`` mode, ``t`` flags or coordinate mode,
``l`` layout, ``sc`` ORT scales; the last token is the dtype.
"""
import itertools
from dataclasses import dataclass, field, replace

from tfcompat.ops import table as T

# each op's token: the op table's records (tfcompat/ops)
OPS = {"rbg": T.RESIZE_BILINEAR_GRAD, "rnn": T.RESIZE_NEAREST_NEIGHBOR_GRAD,
       "conv": T.CONV2D_BACKPROP_INPUT, "interp": T.INTERPOLATE_BACKWARD, "ortrg": T.RESIZE_GRAD,
       "rb": T.RESIZE_BILINEAR, "rn": T.RESIZE_NEAREST_NEIGHBOR}
# the forward resizes: their cases have the TF pair's tokens, i the image, o the output size
FORWARD_OPS = tuple(tok for tok, name in OPS.items() if not T.OPS[name].grad_of)
# each dtype's token
DTYPE_TOKENS = {"f32": T.FLOAT32, "f64": T.FLOAT64, "f16": T.FLOAT16, "bf16": T.BFLOAT16,
                "u8": T.UINT8, "i8": T.INT8, "u16": T.UINT16, "i16": T.INT16, "i32": T.INT32,
                "i64": T.INT64}
DTYPES = tuple(DTYPE_TOKENS)


def op_dtypes(op, key):
    """The tokens of every dtype the op table's record of ``op`` takes for input ``key``,
    float32's first."""
    record = T.OPS[OPS[op]]
    tokens = {d: tok for tok, d in DTYPE_TOKENS.items()}
    return ("f32",) + tuple(tokens[d] for d in record.dtypes(key) if d != T.FLOAT32)
# flags of the TF pair: legacy, align corners, half pixel, both (nearest only)
TF_FLAGS = {"lg": (False, False), "ac": (True, False), "hp": (False, True), "achp": (True, True)}
INTERP_T = {"hp": "half_pixel", "ac": "align_corners", "as": "asymmetric",
            "pt": "pytorch_half_pixel", "tfnn": "tf_half_pixel_for_nn"}


@dataclass(frozen=True)
class Case:
    op: str
    dtype: str
    b: int = 1
    i: tuple = ()
    o: tuple = ()
    c: int = 1
    oc: int = 0
    k: tuple = ()
    s: tuple = ()
    d: tuple = ()
    p: str = ""
    m: str = ""
    t: str = ""
    l: str = ""  # noqa: E741
    sc: tuple = field(default=())

    @property
    def kernel_name(self):
        return OPS[self.op]

    @property
    def id(self):
        return format_id(self)


def _dims(v):
    return "x".join(str(x) for x in v)


def format_id(c):
    parts = [c.op]
    if c.m:
        parts.append("m" + c.m)
    if c.op == "interp":
        parts += ["t" + c.t, "l" + c.l]
    parts += [f"b{c.b}", "i" + _dims(c.i)]
    if c.op == "conv":
        parts += [f"c{c.c}", f"oc{c.oc}", "k" + _dims(c.k), "s" + _dims(c.s), "d" + _dims(c.d),
                  "p" + c.p, "l" + c.l]
    else:
        parts += ["o" + _dims(c.o), f"c{c.c}"]
        if c.op != "interp":
            parts.append("t" + c.t)
        if c.sc:
            parts.append("sc" + "x".join(repr(float(v)) for v in c.sc))
    parts.append(c.dtype)
    return "_".join(parts)


def parse_id(text):
    """The :class:`Case` a printable id describes; ``ValueError`` for a malformed one."""
    tokens = text.strip().split("_")
    if len(tokens) < 3 or tokens[0] not in OPS or tokens[-1] not in DTYPES:
        raise ValueError(f"case id: got {text!r}; expected <op>_<tokens>_<dtype> with op in "
                         f"{sorted(OPS)} and dtype in {list(DTYPES)}")
    kw = {"op": tokens[0], "dtype": tokens[-1]}
    ints = lambda v: tuple(int(x) for x in v.split("x"))  # noqa: E731
    try:
        for tok in tokens[1:-1]:
            for key, conv in (("oc", int), ("sc", lambda v: tuple(float(x) for x in v.split("x"))),
                              ("b", int), ("i", ints), ("o", ints), ("c", int), ("k", ints),
                              ("s", ints), ("d", ints), ("p", str), ("m", str), ("t", str),
                              ("l", str)):
                if tok.startswith(key) and len(tok) > len(key):
                    kw[key] = conv(tok[len(key):])
                    break
            else:
                raise ValueError(f"unknown token {tok!r}")
    except ValueError as exc:
        raise ValueError(f"case id: could not parse {text!r}: {exc}") from None
    case = Case(**kw)
    if format_id(case) != text.strip():
        raise ValueError(f"case id: {text!r} is not in canonical form ({format_id(case)!r})")
    return case


# ------------------------------------------------------------------------------------------
# Grids
# ------------------------------------------------------------------------------------------
# (batch, original HxW, resized HxW, channels): up, down, non-square, identity, size 1
RESIZE_SHAPES_QUICK = [
    (1, (4, 4), (8, 8), 3), (2, (8, 8), (4, 4), 3), (1, (5, 7), (11, 3), 2), (3, (3, 5), (5, 9), 1),
    (1, (1, 1), (4, 3), 2), (2, (4, 3), (1, 1), 2), (1, (2, 2), (41, 41), 1), (1, (41, 17), (2, 5), 3),
    (2, (17, 5), (17, 5), 4), (1, (6, 9), (13, 4), 64), (3, (1, 5), (3, 1), 3), (1, (32, 24), (64, 48), 8),
]
SIZES_FULL = (1, 2, 3, 5, 17, 41)


def _resize_shapes_full():
    out = []
    for k, ((ih, oh), (iw, ow)) in enumerate(itertools.product(
            itertools.product(SIZES_FULL, SIZES_FULL), itertools.product(SIZES_FULL, (1, 3, 41)))):
        b, c = [(1, 1), (3, 3), (1, 64), (3, 1)][k % 4]
        out.append((b, (ih, iw), (oh, ow), c))
    return out


def _tf_pair_cases(op, shapes, dtypes_by_index):
    flags = ("lg", "ac", "hp") + (("achp",) if op == "rnn" else ())
    cases = []
    for n, (b, i, o, c) in enumerate(shapes):
        for t in flags:
            for dt in dtypes_by_index(n):
                cases.append(Case(op, dt, b=b, i=i, o=o, c=c, t=t))
    return cases


def _conv_cases(full):
    kernels = [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (3, 1)] if full else [(1, 1), (2, 2), (3, 3), (5, 5)]
    strides = (1, 2, 3) if full else (1, 2)
    dils = (1, 2)
    pads = ("SAME", "VALID", "E1.1.1.1", "E0.2.1.0")
    layouts = ("nhwc", "nchw")
    dtypes = op_dtypes("conv", "dy")
    cases = []
    for n, (k, s, d, p, lay) in enumerate(itertools.product(kernels, strides, dils, pads, layouts)):
        if not full and n % 3:
            continue
        b = (1, 3)[n % 2]
        h, w = ((7, 8), (9, 6), (8, 8), (11, 7))[n % 4]
        pads = (0, 0, 0, 0) if p in ("SAME", "VALID") else tuple(int(v) for v in p[1:].split("."))
        if p != "SAME" and min(h + pads[0] + pads[1] - (k[0] - 1) * d - 1,
                               w + pads[2] + pads[3] - (k[1] - 1) * d - 1) < 0:
            continue  # the dilated filter does not fit: not a valid convolution
        for dt in (dtypes if full else (dtypes[n % 4],) + (() if n % 4 == 0 else ("f32",))):
            cases.append(Case("conv", dt, b=b, i=(h, w), c=3, oc=4, k=k, s=(s, s), d=(d, d), p=p,
                              l=lay))
        if full:  # for the tile kernels, where they run: one block of 16 channels (or, every
            # other time, 8 channels, few enough at stride 1 for dy's channels in the lanes), a
            # block of 64 and one of 16 with 130 input channels, a block of 48 whose last 8
            # channels are zeros, or few channels with dy's 16 in the lanes
            c, oc = ((16, 4) if (n // 4) % 2 else (8, 12), (80, 130), (40, 9), (3, 16))[n % 4]
            # the few-channel tiles take float16 and bfloat16 too: every third of those;
            # any OC, here 20 (a whole vector of dy's channels and a partial one) or 16
            dt = ("f32", "f16", "bf16")[(n // 4) % 3] if c == 3 else "f32"
            oc = 20 if c == 3 and (dt == "f32" or (n // 12) % 2) else oc
            cases.append(Case("conv", dt, b=b, i=(h, w), c=c, oc=oc, k=k, s=(s, s),
                              d=(d, d), p=p, l=lay))
    if not full:  # the layer types of docs/semantics.md §10 at a small size
        cases += [Case("conv", "f32", b=2, i=(14, 14), c=16, oc=16, k=(3, 3), s=(1, 1), d=(1, 1),
                       p="SAME", l="nhwc"),
                  Case("conv", "f32", b=2, i=(16, 16), c=8, oc=16, k=(2, 2), s=(2, 2), d=(1, 1),
                       p="VALID", l="nhwc"),
                  Case("conv", "f32", b=2, i=(16, 16), c=3, oc=16, k=(7, 7), s=(2, 2), d=(1, 1),
                       p="SAME", l="nhwc")]
    return cases


def _interp_cases(full):
    spatial = {1: ((5,), (9,)), 2: ((5, 3), (9, 2)), 3: ((5, 3, 4), (9, 2, 7))}
    extra = {1: ((1,), (4,)), 2: ((4, 4), (1, 8)), 3: ((2, 3, 2), (4, 3, 1))}
    modes = {"nearest": (1, 2, 3), "linear": (1, 2, 3), "bilinear": (2,), "trilinear": (3,)}
    dtypes = op_dtypes("interp", "diff_dst")
    cases = []
    n = 0
    for mode, ranks in modes.items():
        for t in INTERP_T:
            for r in ranks:
                for lay in ("nxc", "ncx"):
                    shapes = [spatial[r], extra[r]] if full else [spatial[r] if n % 2 else extra[r]]
                    for i, o in shapes:
                        for dt in (dtypes if full else (dtypes[n % 4],)):
                            cases.append(Case("interp", dt, b=2, i=i, o=o, c=3, m=mode, t=t, l=lay))
                    n += 1
    return cases


def _ort_cases(full):
    cases = [Case("ortrg", "f32", b=1, i=(4, 4), o=(6, 6), c=1, t="hp", sc=(1.7, 1.7)),
             Case("ortrg", "f32", b=1, i=(4, 4), o=(8, 8), c=1, t="hp"),
             Case("ortrg", "f32", b=1, i=(4, 4), o=(8, 8), c=1, t="ac")]
    shapes = [((5, 7), (11, 3)), ((8, 8), (4, 4)), ((3, 5), (6, 12)), ((1, 4), (3, 1))]
    for n, ((i, o), t, dt) in enumerate(itertools.product(
            shapes, ("hp", "ac"), op_dtypes("ortrg", "dY") if full else ("f32",))):
        cases.append(Case("ortrg", dt, b=2, i=i, o=o, c=3, t=t))
    scaled = [((4, 6), (2.5, 1.5)), ((7, 3), (1.3, 2.7)), ((5, 5), (0.6, 0.8))]
    for i, sc in scaled:
        o = tuple(int(a * b) for a, b in zip(i, sc))
        cases.append(Case("ortrg", "f32", b=2, i=i, o=o, c=2, t="hp", sc=sc))
    return cases


def grid(name):
    """The named grid: 'quick' (a few hundred cases) or 'full' (thousands), without duplicates."""
    seen = {}
    for case in _grid(name):
        seen.setdefault(case.id, case)
    return list(seen.values())


def _grid(name):
    if name == "quick":
        # float32, and every other shape one more of the op's other dtypes in turn
        def turns(op, key, odd):
            others = op_dtypes(op, key)[1:]
            return lambda n: ("f32",) + ((others[(n // 2) % len(others)],) if n % 2 == odd
                                         else ())
        half = lambda n: ("f32",) + ((op_dtypes("rbg", "images")[1:][n % 3],) if n % 2 == 0 else ())  # noqa: E731
        nn_dt = turns("rnn", "dy", 1)
        # the forwards' nine other dtypes: one per shape
        fwd_others = op_dtypes("rb", "images")[1:]
        fwd_dt = lambda n: ("f32", fwd_others[n % len(fwd_others)])  # noqa: E731
        return (_tf_pair_cases("rbg", RESIZE_SHAPES_QUICK, half)
                + _tf_pair_cases("rnn", RESIZE_SHAPES_QUICK, nn_dt)
                + _conv_cases(False) + _interp_cases(False) + _ort_cases(False)
                + _tf_pair_cases("rb", RESIZE_SHAPES_QUICK, fwd_dt)
                + _tf_pair_cases("rn", RESIZE_SHAPES_QUICK, fwd_dt))
    if name == "full":
        shapes = _resize_shapes_full() + RESIZE_SHAPES_QUICK
        # float32, and every fifth shape every other dtype of the op
        def every(op, key):
            return lambda n: op_dtypes(op, key) if n % 5 == 0 else ("f32",)
        return (_tf_pair_cases("rbg", shapes, every("rbg", "images"))
                + _tf_pair_cases("rnn", shapes, every("rnn", "dy"))
                + _conv_cases(True) + _interp_cases(True) + _ort_cases(True)
                + _tf_pair_cases("rb", shapes, every("rb", "images"))
                + _tf_pair_cases("rn", shapes, every("rn", "images")))
    raise ValueError(f"grid: got {name!r}; expected 'quick' or 'full'")


def shard(cases, spec):
    """The K-th of N disjoint slices (``spec`` = 'K/N', K from 1): every N-th case."""
    try:
        k, n = (int(v) for v in spec.split("/"))
    except ValueError:
        raise ValueError(f"--shard: got {spec!r}; expected K/N with 1 <= K <= N") from None
    if not 1 <= k <= n:
        raise ValueError(f"--shard: got {spec!r}; expected K/N with 1 <= K <= N")
    return cases[k - 1::n]


def with_dtype(case, dtype):
    return replace(case, dtype=dtype)
