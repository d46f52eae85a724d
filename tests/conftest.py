"""Fixtures shared by every test; helpers live in tests/helpers.py."""
import collections
import os

import numpy as np
import pytest

import tfcompat

# TF's oneDNN optimizations are on by default only on some x86 CPUs (those with AVX512_VNNI,
# AVX512_BF16 or AMX: not AMD Zen 3); TF's own switch turns them on everywhere, so that TF's
# CPU kernels, the oracle, are the same kind on every CPU the suite runs on (Eigen's refuse
# dilated conv gradients). Tests of the switch's other side set it to 0 themselves.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")


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
