"""The fast quantile and median helpers give numpy's numbers bit for bit.

The default forecaster calls them thousands of times per series; they exist only
to skip numpy's argument handling, so any difference from numpy is a bug.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from forecaster.estimators import linear_quantiles, median_rows, rolling_profile

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
QS = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, st.integers(1, 60), elements=finite))
def test_linear_quantiles_equal_numpy(values: np.ndarray) -> None:
    expected = np.quantile(values, QS)
    np.testing.assert_array_equal(linear_quantiles(values, QS), expected)


def test_linear_quantiles_with_ties_and_nan_defer_to_numpy() -> None:
    ties = np.array([3.0, 1.0, 3.0, 3.0, 2.0, 1.0])
    np.testing.assert_array_equal(linear_quantiles(ties, QS), np.quantile(ties, QS))
    with_nan = np.array([1.0, np.nan, 2.0])
    np.testing.assert_array_equal(linear_quantiles(with_nan, QS), np.quantile(with_nan, QS))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 30), st.integers(1, 6)), elements=finite))
def test_median_rows_equal_numpy(block: np.ndarray) -> None:
    np.testing.assert_array_equal(median_rows(block), np.median(block, axis=0))


def test_median_rows_ignores_nan_like_nanmedian() -> None:
    block = np.array([[1.0, np.nan], [3.0, 4.0], [2.0, np.nan]])
    np.testing.assert_array_equal(median_rows(block), np.nanmedian(block, axis=0))


def _rolling_profile_reference(values: np.ndarray, m: int, k: int) -> np.ndarray:
    """The plain definition: pad to whole seasons, nanmedian of the k seasons before."""
    n = len(values)
    rows = -(-n // m)
    padded = np.full(rows * m, np.nan)
    padded[rows * m - n :] = values
    block = padded.reshape(rows, m)
    out = np.full((rows, m), np.nan)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for j in range(1, rows):
            out[j] = np.nanmedian(block[max(0, j - k) : j], axis=0)
    return out.reshape(-1)[rows * m - n :]


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    arrays(
        np.float64,
        st.integers(2, 300),
        elements=st.one_of(finite, st.just(np.nan), st.sampled_from([0.0, 1.0, 2.0])),
    ),
    st.integers(1, 40),
    st.integers(1, 8),
)
def test_rolling_profile_equals_the_nanmedian_definition(
    values: np.ndarray, m: int, k: int
) -> None:
    # The padded first seasons take the fast NaN-free path; the numbers must not move.
    np.testing.assert_array_equal(
        rolling_profile(values, m, k), _rolling_profile_reference(values, m, k)
    )
