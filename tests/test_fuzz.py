"""A seeded differential fuzz of the five kernels against TensorFlow.

Case ``k`` of the run is drawn from ``numpy.random.default_rng((20261128, k))``: a kernel, a
dtype, its flags or modes, shapes from one pixel to scale factors of 1:500 and 500:1, conv
strides up to 100, dilations and every padding kind, both layouts; one in eight float cases of
the three kernels TF has as ops has NaN and infinities in dy. Each input then reaches the
kernel in one of the forms a caller may hand it: as it is, a strided view, a view with a
negative stride, Fortran order, the other byte order, an unaligned buffer, read-only, a TF
tensor, or a Python list (float32 and int32 only, the types a list converts to). The reference
is TF's on the plain inputs: its raw grad op for ResizeBilinearGrad, ResizeNearestNeighborGrad
and Conv2DBackpropInput, its resize compositions (the tensorflow backend) for
InterpolateBackward and ResizeGrad, and, where TF computes no such thing (float64 linear
interpolation), the float64 NumPy reference. Graded as the conformance harness grades
(conformance/runner.py): float32 resize grads bit for bit, the rest within docs/semantics.md
§9's tolerance.

The suite runs the first 300 cases; ``python -m pytest tests/test_fuzz.py --fuzz-cases 3000``
is the full run (about 2,600 of its cases judged by TF, the rest by the NumPy reference where
TF has no such op: float64 linear interpolation, and NCHW or dilated convs, which TF's CPU
kernel runs only with oneDNN; 15 s on 2 cores).
"""
import numpy as np

import tfcompat as T
from conformance import oracles as O, runner
from conformance.cases import INTERP_T, Case

from helpers import tf_or_skip

tf = tf_or_skip()

SEED = 20261128
FORMS = ("plain", "strided", "negative-stride", "fortran", "byteswapped", "unaligned",
         "read-only", "tf-tensor", "list")


def pytest_generate_tests(metafunc):
    if "case_index" in metafunc.fixturenames:
        n = metafunc.config.getoption("fuzz_cases")
        metafunc.parametrize("case_index", range(n))


def _size(rng, extreme):
    """A spatial size: mostly small, sometimes 13-64, and for an extreme axis 200-500."""
    if extreme:
        return int(rng.integers(200, 501))
    return int(rng.choice([rng.integers(1, 13), rng.integers(13, 65)], p=[0.8, 0.2]))


def _resize_sizes(rng, rank):
    """(in, out) spatial sizes; one case in ten has an axis scaled by up to 1:500 or 500:1
    against a 1-3 pixel other side, its other axes kept small."""
    ins, outs = [], []
    wild = rng.random() < 0.1
    for ax in range(rank):
        if wild and ax == 0:
            big, small = _size(rng, True), int(rng.integers(1, 4))
            i, o = (big, small) if rng.random() < 0.5 else (small, big)
        else:
            i, o = _size(rng, False), _size(rng, False)
        ins.append(i)
        outs.append(o)
    return tuple(ins), tuple(outs)


def _fit(rng, elems_per_channel, cap=40_000):
    """(batch, channels) keeping batch * channels * elems_per_channel within ``cap``."""
    b = int(rng.integers(1, 4))
    c = int(rng.choice([1, 2, 3, 4, 8, 16, 17, 64]))
    while b * c * elems_per_channel > cap and c > 1:
        c = max(1, c // 2)
    while b * c * elems_per_channel > cap and b > 1:
        b -= 1
    return b, c


def random_case(rng):
    op = rng.choice(["rbg", "rnn", "conv", "interp", "ortrg"], p=[0.25, 0.25, 0.25, 0.15, 0.1])
    if op in ("rbg", "rnn"):
        i, o = _resize_sizes(rng, 2)
        b, c = _fit(rng, max(i[0] * i[1], o[0] * o[1]))
        dtypes = ["f32", "f64", "f16", "bf16"] + (["u8", "i8", "i32"] if op == "rnn" else [])
        weights = np.array([6.0] + [1.0] * (len(dtypes) - 1))
        dt = str(rng.choice(dtypes, p=weights / weights.sum()))
        t = str(rng.choice(["lg", "ac", "hp"] + (["achp"] if op == "rnn" else [])))
        return Case(op, dt, b=b, i=i, o=o, c=c, t=t)
    if op == "conv":
        return _random_conv(rng)
    if op == "interp":
        mode = str(rng.choice(["nearest", "linear", "bilinear", "trilinear"]))
        rank = {"bilinear": 2, "trilinear": 3}.get(mode, int(rng.integers(1, 4)))
        i, o = _resize_sizes(rng, rank)
        b, c = _fit(rng, max(np.prod(i), np.prod(o)))
        dt = str(rng.choice(["f32", "f64", "f16", "bf16"], p=[.55, .15, .15, .15]))
        return Case("interp", dt, b=b, i=i, o=o, c=c, m=mode, t=str(rng.choice(list(INTERP_T))),
                    l=str(rng.choice(["nxc", "ncx"])))
    i, o = _resize_sizes(rng, 2)
    b, c = _fit(rng, max(i[0] * i[1], o[0] * o[1]))
    t = str(rng.choice(["hp", "ac"]))
    sc = ()
    if t == "hp" and rng.random() < 0.3:   # explicit scales, the output sizes their floor
        scales = tuple(round(float(rng.uniform(0.5, 3.0)), 2) for _ in range(2))
        if all(int(a * s) >= 1 for a, s in zip(i, scales)):
            sc, o = scales, tuple(int(a * s) for a, s in zip(i, scales))
    return Case("ortrg", str(rng.choice(["f32", "f64", "f16"], p=[.6, .2, .2])), b=b, i=i, o=o,
                c=c, t=t, sc=sc)


def _random_conv(rng):
    k = tuple(int(rng.choice([1, 2, 3, 4, 5, 7])) for _ in range(2))
    if rng.random() < 0.05:   # a stride beyond the image
        s = (int(rng.integers(20, 101)),) * 2
    else:
        s = tuple(int(rng.integers(1, 5)) for _ in range(2))
    d = tuple(int(rng.choice([1, 1, 2, 3])) for _ in range(2))
    size = lambda: int(rng.integers(1, 25))  # noqa: E731
    i = (size(), size())
    p = str(rng.choice(["SAME", "VALID", "E"]))
    if p == "E":
        p = "E" + ".".join(str(int(rng.integers(0, 4))) for _ in range(4))
    pads = (0, 0, 0, 0) if p in ("SAME", "VALID") else tuple(int(v) for v in p[1:].split("."))
    for ax in range(2):  # a dilated filter that fits (else there is no conv to take)
        if p != "SAME" and i[ax] + pads[2 * ax] + pads[2 * ax + 1] < (k[ax] - 1) * d[ax] + 1:
            d = (1, d[1]) if ax == 0 else (d[0], 1)
            k = (1, k[1]) if ax == 0 and i[0] + pads[0] + pads[1] < k[0] else k
            k = (k[0], 1) if ax == 1 and i[1] + pads[2] + pads[3] < k[1] else k
    c = int(rng.choice([1, 3, 4, 8, 16, 20, 64]))
    oc = int(rng.choice([1, 3, 4, 8, 16, 20, 64]))
    while 3 * i[0] * i[1] * max(c, oc) * k[0] * k[1] > 600_000 and max(c, oc) > 1:
        c, oc = max(1, c // 2), max(1, oc // 2)
    dt = str(rng.choice(["f32", "f64", "f16", "bf16"], p=[.55, .15, .15, .15]))
    return Case("conv", dt, b=int(rng.integers(1, 4)), i=i, c=c, oc=oc, k=k, s=s, d=d, p=p,
                l=str(rng.choice(["nhwc", "nchw"])))


def _inject(rng, a):
    """dy with a few NaN and infinities (a copy)."""
    a = a.copy()
    flat = a.reshape(-1)
    for v in (np.nan, np.inf, -np.inf):
        flat[rng.integers(0, flat.size, size=1 + flat.size // 500)] = v
    return a


def _as_form(form, a):
    """``a`` as the caller's ``form``; the same values."""
    if form == "strided":
        big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        big[..., ::2] = a
        return big[..., ::2]
    if form == "negative-stride":
        return np.ascontiguousarray(a[::-1])[::-1]
    if form == "fortran":
        return np.asfortranarray(a)
    if form == "byteswapped":
        return a.astype(a.dtype.newbyteorder())
    if form == "unaligned":
        buf = np.zeros(a.nbytes + 1, np.uint8)
        out = buf[1:].view(a.dtype).reshape(a.shape)
        out[...] = a
        return out
    if form == "read-only":
        out = a.copy()
        out.flags.writeable = False
        return out
    if form == "tf-tensor":
        return tf.constant(a)
    if form == "list":
        return a.tolist()
    return a


def _form_for(rng, a):
    """A form ``a`` can take: a list only for float32 and int32 (what a list converts to), the
    other byte order not for bfloat16 (ml_dtypes has none) or one-byte types."""
    forms = list(FORMS)
    if a.dtype not in (np.float32, np.int32):
        forms.remove("list")
    if a.dtype.itemsize == 1 or a.dtype == O.NP_DTYPES["bf16"]:
        forms.remove("byteswapped")
    return str(rng.choice(forms))


def _reference(case, inputs, attrs):
    """(reference, oracle name, bit for bit required)."""
    tf_oracle = O.ORACLES[0] if case.op in ("rbg", "rnn", "conv") else O.ORACLES[1]
    if tf_oracle.supports(case):
        try:
            return (tf_oracle.compute(case, inputs, attrs), tf_oracle.name,
                    tf_oracle.bitwise(case))
        except (O.Unsupported, tf.errors.OpError):
            pass   # TF's CPU conv without oneDNN takes neither NCHW nor dilations
    if case.op == "conv":
        try:
            return O.tf_tape(case, inputs, attrs, "/CPU:0"), "tf-cpu-tape", False
        except O.Unsupported:
            pass
    return O.numpy_reference(case, inputs, attrs), "numpy-reference", False


def test_fuzz_against_tf(case_index):
    rng = np.random.default_rng((SEED, case_index))
    case = random_case(rng)
    inputs, attrs = O.materialize(case)
    dy_key = {"rbg": "dy", "rnn": "dy", "conv": "dy", "interp": "diff_dst", "ortrg": "dY"}[case.op]
    floating = inputs[dy_key].dtype.kind == "f" or inputs[dy_key].dtype == O.NP_DTYPES["bf16"]
    # non-finite dy only where TF's own op is the reference: TF's and PyTorch's compositions
    # put a zero weight's inf * 0 on other pixels than the kernels' taps (docs/semantics.md §9)
    if rng.random() < 0.125 and floating and case.op in ("rbg", "rnn", "conv"):
        inputs[dy_key] = _inject(rng, inputs[dy_key])
    with np.errstate(invalid="ignore", over="ignore"):   # the NaN and infinities put in dy
        ref, oracle, bitwise = _reference(case, inputs, attrs)
    forms = {k: _form_for(rng, v) for k, v in inputs.items() if k != "scales"}
    given = {k: (_as_form(forms[k], v) if k in forms else v) for k, v in inputs.items()}
    got = T.get_kernel(case.kernel_name, "cython").kernel_func(given, attrs)
    scale = O.magnitude(case, inputs, attrs)
    outcome, passed, cmp, _, note = runner.grade(case, got, ref, scale, bitwise)
    assert passed, (f"case {case_index}: {case.id} with inputs {forms} against {oracle}: "
                    f"{outcome} {note}; worst at {cmp.index}: got {cmp.got!r}, "
                    f"reference {cmp.ref!r}")
