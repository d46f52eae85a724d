"""Running cases: oracles, the SPEC.md section 6 metric, ULP distances, GPU handling."""
import time
from dataclasses import dataclass, field

import numpy as np

import tfcompat

from . import oracles as O

TOL = {"f64": 1e-12, "f32": 2e-6, "f16": 2e-3, "bf16": 1.6e-2}
CONV_TOL = dict(TOL, f32=1e-5)
TINY = 1e-30


def tiny(dtype_name):
    """The '+ tiny' of SPEC.md 6: the output format's resolution at zero (one smallest
    subnormal). A correctly rounded float16 result in the subnormal range can be 3e-8 off, which
    is more than 2e-3 * S when S is small; no implementation can do better than the format."""
    import ml_dtypes
    if dtype_name in O.NP_DTYPES and O.NP_DTYPES[dtype_name].kind == "f" or dtype_name == "bf16":
        return max(float(ml_dtypes.finfo(O.NP_DTYPES[dtype_name]).smallest_subnormal), TINY)
    return TINY
# Backends held to 0 ULP against TF CPU on float32 ResizeBilinearGrad / ResizeNearestNeighborGrad.
# The numpy backend sums in float64 by design, so it is held to the tolerance only.
BITWISE_BACKENDS = {"cython"}


@dataclass
class Result:
    id: str
    op: str
    kernel: str
    dtype: str
    backend: str
    device: str
    oracle: str
    passed: bool
    norm_err: float
    worst_index: list
    got: float
    ref: float
    ulp: int | None
    bitwise_required: bool
    note: str = ""
    tf_raw_vs_tape: str = ""
    shapes: dict = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)
    seconds: float = 0.0


def ulp_distance(a, b):
    """Max distance in units in the last place between two float32 arrays (0 = identical)."""
    ai = np.ascontiguousarray(a, np.float32).view(np.int32).astype(np.int64)
    bi = np.ascontiguousarray(b, np.float32).view(np.int32).astype(np.int64)
    # map the sign-magnitude encoding onto a monotonic integer line
    ai = np.where(ai < 0, -(ai & 0x7FFFFFFF), ai)
    bi = np.where(bi < 0, -(bi & 0x7FFFFFFF), bi)
    return int(np.abs(ai - bi).max()) if ai.size else 0


def tolerance_dtype(case):
    """The precision a case is defined in. TF's ResizeBilinearGrad takes float32 grads, so its
    products are float32 whatever the output dtype (SPEC.md 1): float64 outputs of that op are
    held to the float32 tolerance (and reported with their ULP-free error like any other)."""
    if case.op == "rbg" and case.dtype == "f64":
        return "f32"
    return case.dtype


def compare(got, ref, scale, dtype, conv, out_dtype=None):
    """(passed, worst normalised error |got-ref|/S, its index, got, ref). ``dtype`` picks the
    tolerance, ``out_dtype`` (default: the same) the resolution floor."""
    got64 = np.asarray(got).astype(np.float64)
    ref64 = np.asarray(ref).astype(np.float64)
    if got64.shape != ref64.shape:
        return False, float("inf"), [], float("nan"), float("nan")
    if got64.size == 0:
        return True, 0.0, [], 0.0, 0.0
    err = np.abs(got64 - ref64)
    if dtype in ("u8", "i8", "i32"):
        ok = got64 == ref64
        norm = np.where(ok, 0.0, np.inf)
    else:
        tol = (CONV_TOL if conv else TOL)[dtype]
        ok = err <= tol * scale + tiny(out_dtype or dtype)
        norm = err / np.maximum(scale, TINY)
        ok &= ~np.isnan(err)
    i = np.unravel_index(int(np.nanargmax(np.where(np.isnan(norm), np.inf, norm))), norm.shape)
    return bool(ok.all()), float(norm[i]), [int(v) for v in i], float(got64[i]), float(ref64[i])


def _shapes(inputs):
    return {k: list(np.shape(v)) for k, v in inputs.items() if v is not None}


def _attrs_json(attrs):
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in attrs.items()}


def cpu_oracle(case, inputs, attrs, have_tf):
    """(reference array, oracle name, raw-vs-tape agreement, note)."""
    notes = []
    if case.id in O.ORT_VECTORS:
        notes.append("ORT published vector checked")
    tf_is_f32_only = case.dtype == "f64" and (case.op == "ortrg" or
                                              (case.op == "interp" and case.m != "nearest"))
    if tf_is_f32_only:
        # TF resizes linearly in float32 only, and PyTorch's float64 path computes coordinates in
        # float64; the definition (float32 coordinates, float64 sums) is the NumPy reference's.
        notes.append("float64 linear resize: TF is float32-only and PyTorch uses float64 "
                     "coordinates; oracle: the float64 NumPy reference")
        return O.numpy_reference(case, inputs, attrs), "numpy-reference", "", "; ".join(notes)
    if have_tf and not tf_is_f32_only:
        try:
            ref = O.tf_raw(case, inputs, attrs, "/CPU:0")
            name = "tf-cpu-raw" if case.op in ("rbg", "rnn", "conv") else "tf-cpu"
            agree = ""
            try:
                tape = O.tf_tape(case, inputs, attrs, "/CPU:0")
                agree = ("bitwise" if np.array_equal(np.asarray(tape), np.asarray(ref))
                         else f"max|diff| {np.abs(np.asarray(tape, np.float64) - ref).max():.3g}")
            except O.Unsupported as exc:
                agree = f"n/a ({exc})"
            return ref, name, agree, "; ".join(notes)
        except O.Unsupported as exc:
            notes.append(f"TF: {exc}")
        except Exception as exc:  # TF rejects the attribute set (e.g. stride with dilation)
            notes.append(f"TF rejects: {str(exc).splitlines()[0][:100]}")
    if O.torch_available():
        try:
            return O.torch_oracle(case, inputs, attrs, "cpu"), "torch-cpu", "", "; ".join(notes)
        except Exception as exc:  # Unsupported, or torch rejecting the attribute set
            notes.append(f"torch: {str(exc).splitlines()[0][:100]}")
    notes.append("oracle: the float64 NumPy reference")
    return O.numpy_reference(case, inputs, attrs), "numpy-reference", "", "; ".join(notes)


def _check_ort_vector(case, out):
    want = O.ORT_VECTORS.get(case.id)
    if want is None:
        return True
    plane = np.asarray(out, np.float64)[0, 0]
    return all(np.allclose(plane[row], vals, atol=1e-4) for row, vals in want.items())


def run_case(case, backends, devices, have_tf, torch_device=None):
    """Results of one case: one per (backend, device). A case whose setup raises is recorded
    as failing for every backend, with the exception, and the run goes on."""
    try:
        return _run_case(case, backends, devices, have_tf, torch_device)
    except Exception as exc:
        return [Result(case.id, case.op, case.kernel_name, case.dtype, b, "cpu", "none", False,
                       float("inf"), [], float("nan"), float("nan"), None, False,
                       f"harness error: {type(exc).__name__}: {exc}") for b in backends]


def _run_case(case, backends, devices, have_tf, torch_device=None):
    t0 = time.perf_counter()
    inputs, attrs = O.materialize(case)
    scale = O.magnitude(case, inputs, attrs)
    conv = case.op == "conv"
    outs = {}
    for b in backends:
        try:
            outs[b] = (tfcompat.get_kernel(case.kernel_name, b).kernel_func(inputs, attrs), "")
        except Exception as exc:
            outs[b] = (None, f"{type(exc).__name__}: {exc}")
    results = []
    oracle_sets = []
    if "cpu" in devices:
        oracle_sets.append(("cpu",) + cpu_oracle(case, inputs, attrs, have_tf))
    for dev in devices:
        if dev == "cpu":
            continue
        try:
            if dev.startswith("/GPU"):
                ref = O.tf_raw(case, inputs, attrs, dev)
                again = O.tf_raw(case, inputs, attrs, dev)
                same = np.array_equal(np.asarray(ref).view(np.uint8), np.asarray(again).view(np.uint8))
                oracle_sets.append((dev, ref, f"tf-{dev}", "",
                                    "TF GPU deterministic over 2 runs" if same
                                    else "TF GPU bits differ between 2 runs"))
            else:  # torch CUDA oracle
                oracle_sets.append((dev, O.torch_oracle(case, inputs, attrs, torch_device), "torch-cuda", "",
                                    "PyTorch CUDA oracle (TF lists no GPU)"))
        except (O.Unsupported, Exception) as exc:
            oracle_sets.append((dev, None, "none", "", f"no GPU oracle: {str(exc).splitlines()[0][:100]}"))
    for dev, ref, oname, agree, note in oracle_sets:
        for b in backends:
            got, err = outs[b]
            bitwise = (dev == "cpu" and oname == "tf-cpu-raw" and case.dtype == "f32"
                       and case.op in ("rbg", "rnn") and b in BITWISE_BACKENDS)
            if ref is None:
                continue
            if got is None:
                results.append(Result(case.id, case.op, case.kernel_name, case.dtype, b, dev, oname,
                                      False, float("inf"), [], float("nan"), float("nan"), None,
                                      bitwise, err, agree, _shapes(inputs), _attrs_json(attrs)))
                continue
            ok, norm, idx, g, r = compare(got, ref, scale, tolerance_dtype(case), conv, case.dtype)
            ulp = (ulp_distance(got, ref) if case.dtype == "f32" and not conv
                   and np.shape(got) == np.shape(ref) else None)
            if bitwise and ulp != 0:
                ok = False
            if not _check_ort_vector(case, got):
                ok, note = False, (note + "; " if note else "") + "ORT published vector MISMATCH"
            results.append(Result(case.id, case.op, case.kernel_name, case.dtype, b, dev, oname, ok,
                                  norm, idx, g, r, ulp, bitwise, note, agree, _shapes(inputs),
                                  _attrs_json(attrs)))
    dt = time.perf_counter() - t0
    for r in results:
        r.seconds = dt
    return results
