"""Quantiles of sorted data without np.quantile's partition (stats.sorted_quantiles) are numpy's, to the bit."""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.model.stats import sorted_quantiles

_VALUES = st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=64),
                    st.floats(-1e3, 1e3, width=32), st.sampled_from([0.0, -0.0, 1.0, 85.87, 1e308, -1e308, 5e-324]))
_QS = st.lists(st.one_of(st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]), st.floats(0.0, 1.0)), min_size=1, max_size=5)


def _bits(values: np.ndarray) -> list[bytes]:
    # (+ 0.0: -0.0 and 0.0 are equal values whose order numpy's partition leaves as it finds them)
    return [struct.pack("d", float(v) + 0.0) for v in values]


@settings(max_examples=500, deadline=None)
@given(st.lists(_VALUES, min_size=1, max_size=300), _QS, st.integers(0, 3))
def test_the_quantiles_of_sorted_data_are_numpys_to_the_bit(values: list[float], qs: list[float], repeat: int) -> None:
    ordered = np.sort(np.array(values * (repeat + 1), dtype=np.float64))  # repeats: equal neighbours
    want = np.quantile(ordered, qs)
    got = sorted_quantiles(ordered, qs)
    assert _bits(got) == _bits(want), (ordered, qs, got, want)


def test_data_with_a_nan_or_none_is_numpys() -> None:
    ordered = np.sort(np.array([1.0, float("nan"), 2.0]))
    assert np.isnan(sorted_quantiles(ordered, (0.1, 0.5))).all()
    assert _bits(sorted_quantiles(np.array([3.0, 7.0]), (0.25, 0.5, 0.75))) == _bits(np.array([4.0, 5.0, 6.0]))
