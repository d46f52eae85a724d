"""Fixtures shared by every test; helpers live in tests/helpers.py."""
import collections
import os

# This test process's own choice, made before tfcompat loads libgomp: idle OpenMP workers sleep
# after 1,000 spins instead of 300,000, so that on a busy machine the suite's workers do not
# burn the cores they wait for. The whole suite on 2 cores beside 2 busy processes: 167 s with
# libgomp's default, 80 s with this (52 s quiet either way, within the noise: 48-52).
# tfcompat itself sets nothing.
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.setdefault("GOMP_SPINCOUNT", "1000")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tfcompat  # noqa: E402

def pytest_addoption(parser):
    parser.addoption("--fuzz-cases", type=int, default=300, metavar="N",
                     help="cases of tests/test_fuzz.py's seeded fuzz against TF (default 300; "
                          "the full run: 3000)")


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


def pytest_terminal_summary(terminalreporter):
    """The skips in one line, each reason once with its count (pytest's -ra lists each)."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    reasons = collections.Counter()
    for report in skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(
            report.longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    terminalreporter.write_line(f"{len(skipped)} skipped: " + "; ".join(
        f"{n} x {reason}" for reason, n in reasons.most_common()))
