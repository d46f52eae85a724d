"""Fixtures shared by every test; helpers live in tests/helpers.py."""
import numpy as np
import pytest

import tfcompat

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
