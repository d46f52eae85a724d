"""The cython backend's per-axis table cache: what it returns is what a fresh build gives, and
nobody can write into it."""
import numpy as np
import pytest

from tfcompat import _resample as rs
from tfcompat.backends import cython_backend as cb


@pytest.mark.parametrize("axis", [rs.Axis(5, 17, rs.LIN_TF_HALF), rs.Axis(41, 3, rs.NN_ALIGN),
                                  rs.Axis(7, 7, rs.LIN_ORT_HALF, 1.5)])
def test_cached_tables_equal_fresh_ones_and_are_read_only(axis):
    fwd, gather = cb.axis_tables(axis)
    again = cb.axis_tables(axis)
    assert again[0] is fwd and again[1] is gather  # cached
    fresh_fwd = cb.axis_forward_map(axis)
    fresh_gather = cb._gather_table(axis)
    for got, want in zip(fwd + gather, fresh_fwd + fresh_gather):
        assert got.dtype == want.dtype and np.array_equal(got, want)
        assert not got.flags.writeable
        with pytest.raises(ValueError):
            got[...] = 0


def test_large_axes_are_not_cached():
    axis = rs.Axis(70000, 140000, rs.NN_HALF)
    first, second = cb.axis_tables(axis), cb.axis_tables(axis)
    assert first[0][0] is not second[0][0]
    assert np.array_equal(first[0][0], second[0][0])
