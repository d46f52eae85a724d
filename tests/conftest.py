import ml_dtypes
import numpy as np
import pytest

import tfcompat
from tfcompat import _checks as ck

# SPEC.md section 6: per-dtype tolerances of |got - ref| / S, S = the backward of |dy| (and |w|).
TOL = {ck.FLOAT64: 1e-12, ck.FLOAT32: 2e-6, ck.FLOAT16: 2e-3, ck.BFLOAT16: 1.6e-2}
CONV_TOL = {**TOL, ck.FLOAT32: 1e-5}
TINY = 1e-30

BACKENDS = ("cython", "numpy")


def tf_or_skip():
    return pytest.importorskip("tensorflow", reason="TensorFlow is not installed: "
                               "pip install -e '.[tf]' to run the comparisons with TF")


def assert_close(got, ref, scale, dtype, tol=TOL, what=""):
    """|got - ref| <= tol[dtype] * scale + tiny, element-wise (SPEC.md 6)."""
    got = np.asarray(got).astype(np.float64)
    ref = np.asarray(ref).astype(np.float64)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    err = np.abs(got - ref)
    # + the format's resolution at zero (one smallest subnormal), as in the harness
    floor = max(float(ml_dtypes.finfo(np.dtype(dtype)).smallest_subnormal), TINY)
    bound = tol[np.dtype(dtype)] * np.asarray(scale, dtype=np.float64) + floor
    bad = ~(err <= bound)
    if bad.any():
        i = np.unravel_index(np.argmax(np.where(bad, err - bound, -np.inf)), err.shape)
        raise AssertionError(f"{what}: {int(bad.sum())} elements out of tolerance; worst at {i}: "
                             f"got {got[i]!r}, ref {ref[i]!r}, scale {np.asarray(scale)[i]!r}")


def assert_bitwise(got, ref, what=""):
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, ref.dtype, got.shape,
                                                              ref.shape)
    if not np.array_equal(np.ascontiguousarray(got).view(np.uint8),
                          np.ascontiguousarray(ref).view(np.uint8)):
        d = np.abs(got.astype(np.float64) - ref.astype(np.float64))
        i = np.unravel_index(np.nanargmax(d), d.shape)
        raise AssertionError(f"{what}: not bitwise equal; worst at {i}: {got[i]!r} vs {ref[i]!r}")


_SESSION = []


def pytest_sessionstart(session):
    _SESSION.append(session)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    # the summary is printed; with TF loaded, skip the native exit handlers, one of which (TF's
    # thread-local oneDNN primitive cache) can segfault at exit: see conformance/tfexit.py
    if _SESSION:
        from conformance.tfexit import exit_without_native_teardown
        exit_without_native_teardown(_SESSION[-1].exitstatus)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _restore_threads():
    yield
    tfcompat.set_num_threads(None)


# hypothesis profiles: "ci" (default) keeps the suite fast; HYPOTHESIS_PROFILE=thorough runs
# many more examples on demand.
try:
    from hypothesis import HealthCheck, settings

    settings.register_profile("ci", max_examples=40, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("thorough", max_examples=1500, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    import os as _os
    settings.load_profile(_os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:  # pragma: no cover
    pass
