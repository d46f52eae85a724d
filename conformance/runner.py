"""Running cases: every backend's result judged by the first oracle that can judge it.

For each device (the CPU, and each GPU oracle), the oracles are tried in order
(conformance/oracles.py): one that is not available, does not support the case, *is* the
backend under test, or raises Unsupported is passed over. The metric is metric.py's.
Outcomes: ``bitwise`` (the same bits), ``within`` (within tolerance), ``differs``, ``n/a``
(the backend raised tfcompat.UnsupportedError: it lacks that mode), ``error`` (it raised
anything else), ``self-check`` (no oracle but the backend itself could judge it). A result that
differs from an oracle standing in for TF (``Oracle.finding``) is marked a finding: it is
reported, and counts as a failure only under ``--strict``.
"""
import time
from dataclasses import dataclass, field

import numpy as np

import tfcompat
from conformance import metric

from . import oracles as O

# Backends held to 0 ULP against the bitwise oracle (TF CPU's float32 ResizeBilinearGrad and
# ResizeNearestNeighborGrad). The numpy backend sums in float64 by design: tolerance only.
BITWISE_BACKENDS = {"cython"}
# a bitwise backend held to 0 ULP on only some of those cases: backend -> case predicate (the
# JAX front, whose half-type and float64 bilinear forwards are not TF's float32 output)
BITWISE_ONLY = {}
PASSING = ("bitwise", "within", "n/a", "self-check")


@dataclass
class Result:
    id: str
    op: str
    kernel: str
    dtype: str
    backend: str
    device: str
    oracle: str
    outcome: str
    passed: bool
    norm_err: float
    worst_index: list
    got: float
    ref: float
    ulp: int | None
    bitwise_required: bool
    note: str = ""
    cross_check: str = ""
    shapes: dict = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)
    seconds: float = 0.0
    finding: bool = False  # a difference from an oracle that stands in for TF (Oracle.finding)


def tolerance_dtype(case):
    """The precision a case is defined in. TF's ResizeBilinearGrad takes float32 grads, so its
    products are float32 whatever the output dtype: float64 outputs of that op are held to the
    float32 tolerance."""
    if case.op == "rbg" and case.dtype == "f64":
        return "f32"
    if case.op == "rb" and case.dtype not in ("f16", "bf16"):
        return "f32"     # TF's ResizeBilinear computes (and returns) float32 for every dtype
    return case.dtype


def out_dtype(case):
    """The dtype of a case's result: float32 for TF's bilinear forward, else the case's."""
    return "f32" if case.op == "rb" else case.dtype


def _shapes(inputs):
    return {k: list(np.shape(v)) for k, v in inputs.items() if v is not None}


def _attrs_json(attrs):
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in attrs.items()}


def same_bits(got, ref):
    """The same bits, every NaN counting as one value: a NaN's sign and payload are the first
    NaN operand's (x86), so they follow the order of the operands, not the values
    (docs/semantics.md §9)."""
    got, ref = np.array(got), np.array(ref)
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return False
    if got.dtype.kind not in "iub":
        both = np.isnan(got) & np.isnan(ref)
        got[both] = ref[both] = 0
    return np.array_equal(np.ascontiguousarray(got).view(np.uint8),
                          np.ascontiguousarray(ref).view(np.uint8))


def grade(case, got, ref, scale, bitwise_required):
    """(outcome, passed, comparison, ULP distance or None, note)."""
    dt = O.NP_DTYPES[out_dtype(case)]
    cmp = metric.compare(got, ref, scale, O.NP_DTYPES[tolerance_dtype(case)], case.op == "conv",
                         dt)
    same_shape = np.shape(got) == np.shape(ref)
    ulp = (metric.ulp_distance(got, ref) if out_dtype(case) == "f32" and case.op != "conv"
           and same_shape and np.asarray(got).dtype == np.float32 else None)
    note = ""
    if not same_shape:
        outcome, note = "differs", f"shape {list(np.shape(got))}, oracle {list(np.shape(ref))}"
    elif not cmp.passed:
        outcome = "differs"
    elif same_bits(np.asarray(got).astype(dt, copy=False), np.asarray(ref).astype(dt, copy=False)):
        outcome = "bitwise"
    else:
        outcome = "within"
    passed = outcome in PASSING and not (bitwise_required and outcome != "bitwise")
    if bitwise_required and outcome == "within":
        note = "bitwise required"
    return outcome, passed, cmp, ulp, note


def _check_ort_vector(case, out):
    want = O.ORT_VECTORS.get(case.id)
    if want is None:
        return True
    plane = np.asarray(out, np.float64)[0, 0]
    return all(np.allclose(plane[row], vals, atol=1e-4) for row, vals in want.items())


class _References:
    """Each oracle's reference for one case, computed at most once."""

    def __init__(self, case, inputs, attrs):
        self.case, self.inputs, self.attrs = case, inputs, attrs
        self.done = {}

    def get(self, oracle):
        """(reference or None, note)."""
        if oracle.name not in self.done:
            try:
                ref = oracle.compute(self.case, self.inputs, self.attrs)
                note = ""
                if oracle.cross_check is not None:
                    note = oracle.cross_check(self.case, self.inputs, self.attrs, ref)
                self.done[oracle.name] = (ref, note)
            except O.Unsupported as exc:
                self.done[oracle.name] = (None, f"{oracle.name}: {exc}")
            except Exception as exc:  # TF rejects the attribute set (stride with dilation...)
                self.done[oracle.name] = (None, f"{oracle.name} rejects: "
                                                f"{str(exc).splitlines()[0][:100]}")
        return self.done[oracle.name]


def judge(oracles, backend, case, refs):
    """(oracle, reference, cross-check note, notes of the oracles passed over), with oracle
    None when none but the backend itself could judge (``self-check``) or none at all."""
    notes, self_only = [], False
    for oracle in oracles:
        if not oracle.available() or not oracle.supports(case):
            continue
        if oracle.backend == backend:
            self_only = True
            continue
        ref, note = refs.get(oracle)
        if ref is None:
            notes.append(note)
            continue
        return oracle, ref, note, notes
    return None, None, "self-check" if self_only else "", notes


def run_case(case, backends, devices):
    """Results of one case: one per (backend, device). ``devices``: (device name, oracles in
    order). A case whose setup raises is recorded as an error for every backend, and the run
    goes on."""
    try:
        return _run_case(case, backends, devices)
    except Exception as exc:
        return [Result(case.id, case.op, case.kernel_name, case.dtype, b, "cpu", "none", "error",
                       False, float("inf"), [], float("nan"), float("nan"), None, False,
                       f"harness error: {type(exc).__name__}: {exc}") for b in backends]


def _run_case(case, backends, devices):
    t0 = time.perf_counter()
    inputs, attrs = O.materialize(case)
    scale = O.magnitude(case, inputs, attrs)
    refs = _References(case, inputs, attrs)
    outs = {}
    have = set(tfcompat.list_kernels())
    for b in backends:
        if (b, case.kernel_name) not in have:
            outs[b] = (None, "n/a", f"{b} has no {case.kernel_name} kernel")
            continue
        try:
            outs[b] = (tfcompat.get_kernel(case.kernel_name, b).kernel_func(inputs, attrs), "", "")
        except tfcompat.UnsupportedError as exc:
            outs[b] = (None, "n/a", str(exc))
        except Exception as exc:
            outs[b] = (None, "error", f"{type(exc).__name__}: {exc}")
    common = dict(shapes=_shapes(inputs), attrs=_attrs_json(attrs))
    results = []
    for device, oracles in devices:
        for b in backends:
            oracle, ref, cross, passed_over = judge(oracles, b, case, refs)
            name = oracle.name if oracle else "none"
            bitwise = bool(oracle and oracle.bitwise(case) and b in BITWISE_BACKENDS
                           and BITWISE_ONLY.get(b, bool)(case))
            got, status, why = outs[b]
            notes = ([why] if why else []) + passed_over
            if O.ORT_VECTORS.get(case.id):
                notes.append("ORT published vector checked")
            if got is None or oracle is None:
                outcome = status or ("self-check" if cross == "self-check" else "n/a")
                if outcome == "n/a" and not status:
                    notes.append("no oracle supports this case")
                results.append(Result(case.id, case.op, case.kernel_name, case.dtype, b, device,
                                      name, outcome, outcome in PASSING, float("nan"), [],
                                      float("nan"), float("nan"), None, bitwise,
                                      "; ".join(notes), "", **common))
                continue
            outcome, ok, cmp, ulp, note = grade(case, got, ref, scale, bitwise)
            if note:
                notes.append(note)
            if not _check_ort_vector(case, got):
                ok = False
                outcome = "differs"
                notes.append("ORT published vector MISMATCH")
            finding = not ok and oracle.finding(case)
            if finding:
                notes.append(f"a finding about {name}, which stands in for TF here")
            results.append(Result(case.id, case.op, case.kernel_name, case.dtype, b, device, name,
                                  outcome, ok, cmp.norm_err, cmp.index, cmp.got, cmp.ref, ulp,
                                  bitwise, "; ".join(notes), cross, finding=finding, **common))
    dt = time.perf_counter() - t0
    for r in results:
        r.seconds = dt
    return results
