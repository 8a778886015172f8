"""scikit-learn's quantile gradient boosting with its per-leaf quantiles computed faster.

With ``loss="quantile"`` scikit-learn's ``HistGradientBoostingRegressor`` sets every
leaf of every tree to a quantile of the residuals in it (``np.percentile`` on each
leaf, ``_update_leaves_values``): most of the time of the small fits that ``auto``'s
gradient boosting candidate backtests went to numpy's argument handling there, not
to growing trees. :class:`QuantileGradientBoosting` is the same estimator with that
quantile taken by :func:`one_quantile`, numpy's linear method step by step, so that every leaf value, every tree and every forecast is the
same to the bit (``tests/test_forecast_speed.py``). Anything else (sample weights,
another loss) goes to scikit-learn unchanged.

:func:`one_thread` limits OpenMP to one thread around a fit or forecast with one
``threadpoolctl`` controller made once: ``threadpool_limits(...)`` looks up the
loaded libraries afresh on every call, which cost more than the forecast it wrapped.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from sklearn._loss.loss import PinballLoss
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import ThreadpoolController


def one_quantile(values: np.ndarray, q: float) -> float:
    """``np.quantile(values, q)`` (linear method) of a 1-D float array without NaN, bit for bit.

    The arithmetic of numpy's linear method (virtual index ``(n - 1) * q``, its floor,
    gamma, and the two-sided lerp) in Python floats, which round as numpy's float64
    does, around one ``np.partition``; an array holding NaN goes to numpy itself.
    """
    n = values.size
    virtual = (n - 1) * q
    below = math.floor(virtual)
    if virtual >= n - 1:
        lo = hi = n - 1
    elif virtual < 0:
        lo = hi = 0
    else:
        lo, hi = int(below), int(below) + 1
    gamma = virtual - below
    part = np.partition(values, sorted({lo, hi, n - 1}))
    last = float(part[n - 1])
    if last != last:  # NaN sorts last
        return float(np.quantile(values, q))
    a, b = float(part[lo]), float(part[hi])
    diff = b - a
    if gamma >= 0.5:
        return b - diff * (1 - gamma)
    return a + diff * gamma


class _PinballLoss(PinballLoss):
    """scikit-learn's pinball loss; its intercept (each leaf's value) by :func:`one_quantile`."""

    def fit_intercept_only(self, y_true: np.ndarray, sample_weight: Any = None) -> Any:
        if sample_weight is not None or y_true.ndim != 1 or y_true.dtype != np.float64:
            return super().fit_intercept_only(y_true, sample_weight)
        # np.percentile(y, 100 * q) takes the quantile at (100 * q) / 100: the same level.
        level = float(np.true_divide(100 * self.closs.quantile, 100))
        if y_true.size == 0:
            return super().fit_intercept_only(y_true, sample_weight)
        return np.float64(one_quantile(y_true, level))


class QuantileGradientBoosting(HistGradientBoostingRegressor):
    """``HistGradientBoostingRegressor`` whose quantile loss sets leaf values faster, same numbers."""

    def _get_loss(self, sample_weight: Any) -> Any:
        if self.loss == "quantile" and sample_weight is None:
            return _PinballLoss(sample_weight=None, quantile=self.quantile)
        return super()._get_loss(sample_weight)


@functools.cache
def _controller() -> ThreadpoolController:
    return ThreadpoolController()


def one_thread() -> Any:
    """A context manager holding OpenMP to one thread (see the module docstring)."""
    return _controller().limit(limits=1, user_api="openmp")
