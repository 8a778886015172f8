"""Estimators: the pluggable forecasting models, scikit-learn style.

Contract (checked by ``tests/test_estimator_contract.py`` over the registry):

* hyper-parameters only in ``__init__`` (and visible through ``get_params``);
* ``fit(history) -> self`` on a regular series (see :mod:`forecaster.series`);
  fitted state lives in attributes ending in ``_``;
* ``predict(horizon, quantiles)`` before ``fit`` raises :class:`NotFittedError`;
* ``predict`` returns a frame indexed by the ``horizon`` timestamps that follow
  the last history timestamp at the history's own step, one column per quantile
  named by :func:`quantile_column`, monotone non-decreasing across quantiles,
  and non-negative when the history was.

New estimators register themselves with :func:`register`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from forecaster.errors import BadInputError, DataError, NotFittedError
from forecaster.series import infer_step, parse_duration, regularize, steps_per

DAY = pd.Timedelta(days=1)
WEEK = pd.Timedelta(days=7)


def quantile_column(q: float) -> str:
    """Column name for quantile ``q``: ``0.9 -> 'q0.9'``, ``0.05 -> 'q0.05'``."""
    return f"q{q:g}"


def check_quantiles(quantiles: Sequence[float], owner: str = "predict") -> list[float]:
    """Validate and sort quantiles; one clear line when one is out of range."""
    qs = [float(q) for q in quantiles]
    if not qs:
        raise BadInputError(f"The 'quantiles' parameter of {owner} must be non-empty. Got [].")
    for q in qs:
        if not (0.0 < q < 1.0) or math.isnan(q):
            raise BadInputError(
                f"The 'quantiles' parameter of {owner} must be in (0, 1). Got {q!r} instead."
            )
    return sorted(set(qs))


def check_horizon(horizon: int, owner: str = "predict") -> int:
    if isinstance(horizon, bool) or not isinstance(horizon, int | np.integer) or horizon < 1:
        raise BadInputError(
            f"The 'horizon' parameter of {owner} must be an int >= 1 (steps). Got {horizon!r} instead."
        )
    return int(horizon)


@runtime_checkable
class Estimator(Protocol):
    """What the pipeline needs of a forecasting model."""

    def fit(self, history: pd.Series) -> Estimator: ...

    def predict(self, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame: ...


class BaseEstimator:
    """Shared plumbing: parameters, fitted checks, output frame shape."""

    name: ClassVar[str] = "base"

    def fit(self, history: pd.Series) -> BaseEstimator:
        raise NotImplementedError

    def predict(self, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        raise NotImplementedError

    def get_params(self) -> dict[str, Any]:
        sig = inspect.signature(type(self).__init__)
        return {p: getattr(self, p) for p in sig.parameters if p != "self"}

    def set_params(self, **params: Any) -> BaseEstimator:
        valid = self.get_params()
        for key, value in params.items():
            if key not in valid:
                raise BadInputError(f"{type(self).__name__} has no parameter {key!r}")
            setattr(self, key, value)
        return self

    def label(self) -> str:
        """Short name recorded in plans, reports and the model store."""
        return self.name

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def _check_fitted(self) -> None:
        if not hasattr(self, "last_timestamp_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call 'fit' first."
            )

    def _prepare(self, history: pd.Series) -> pd.Series:
        if not isinstance(history, pd.Series):
            raise DataError(
                f"{type(self).__name__}.fit expects a pandas Series, got {type(history).__name__}"
            )
        y = regularize(history)
        if y.notna().sum() < 2:
            raise DataError(f"series {history.name!r} has fewer than 2 observed values")
        self.step_ = infer_step(y) if len(y) > 1 else pd.Timedelta(minutes=5)
        self.last_timestamp_ = y.index[-1]
        observed = y.dropna()
        self.nonnegative_ = bool((observed >= 0).all())
        return y

    def _future_index(self, horizon: int) -> pd.DatetimeIndex:
        start = self.last_timestamp_ + self.step_
        return pd.date_range(start, periods=horizon, freq=self.step_, name="timestamp")

    def _frame(self, values: np.ndarray, quantiles: list[float], horizon: int) -> pd.DataFrame:
        """Shape a (horizon, n_quantiles) array into the output frame, enforcing order and sign."""
        arr = np.asarray(values, dtype=float).reshape(horizon, len(quantiles))
        arr = np.maximum.accumulate(arr, axis=1)  # monotone in the quantile
        if self.nonnegative_:
            arr = np.clip(arr, 0.0, None)
        return pd.DataFrame(
            arr, index=self._future_index(horizon), columns=[quantile_column(q) for q in quantiles]
        )


class SeasonalNaive(BaseEstimator):
    """Repeat the last season; quantiles from the empirical seasonal-lag residuals.

    ``season`` is a period (``"1d"`` or ``"7d"``). Point forecast for step h is the
    value one (or more) seasons back; the spread is the empirical distribution of
    ``y_t - y_{t-season}`` over the history, so the bands are as wide as the series
    has actually moved from one season to the next. Missing last-season values are
    filled from the season before, then from the series median.
    """

    name = "seasonal_naive"

    def __init__(self, season: str = "1d") -> None:
        self.season = season

    def label(self) -> str:
        return f"seasonal_naive_{self.season}"

    def fit(self, history: pd.Series) -> SeasonalNaive:
        y = self._prepare(history)
        period = parse_duration(self.season)
        m = steps_per(period, self.step_)
        if len(y) < m:
            # Too short for one full season: fall back to a flat last-value model.
            m = 1
        self.season_steps_ = m
        values = y.to_numpy(dtype=float)
        # Pattern of the last season, filled from older seasons where missing.
        pattern = values[-m:].copy()
        k = 2
        while np.isnan(pattern).any() and k * m <= len(values):
            older = values[len(values) - k * m : len(values) - (k - 1) * m]
            pattern = np.where(np.isnan(pattern), older, pattern)
            k += 1
        median = float(np.nanmedian(values))
        self.pattern_ = np.where(np.isnan(pattern), median, pattern)
        resid = values[m:] - values[:-m] if len(values) > m else np.array([0.0])
        resid = resid[~np.isnan(resid)]
        self.residuals_ = resid if resid.size else np.array([0.0])
        return self

    def predict(self, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        self._check_fitted()
        horizon = check_horizon(horizon, f"{type(self).__name__}.predict")
        qs = check_quantiles(quantiles, f"{type(self).__name__}.predict")
        m = self.season_steps_
        point = np.resize(self.pattern_, horizon) if m > 1 else np.full(horizon, self.pattern_[-1])
        # Beyond one season the forecast repeats itself; widen by sqrt(seasons ahead).
        seasons_ahead = (
            np.floor(np.arange(horizon) / m) + 1 if m > 1 else np.sqrt(np.arange(1, horizon + 1))
        )
        scale = np.sqrt(seasons_ahead) if m > 1 else seasons_ahead
        offsets = np.quantile(self.residuals_, qs)
        out = point[:, None] + scale[:, None] * offsets[None, :]
        return self._frame(out, qs, horizon)


_REGISTRY: dict[str, Callable[[], BaseEstimator]] = {}


def register(name: str, factory: Callable[[], BaseEstimator]) -> None:
    """Add an estimator under ``name`` (its default configuration)."""
    _REGISTRY[name] = factory


def registered() -> dict[str, Callable[[], BaseEstimator]]:
    """Name -> factory for every registered estimator."""
    return dict(_REGISTRY)


def make(name: str) -> BaseEstimator:
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise BadInputError(
            f"unknown estimator {name!r}; expected one of {', '.join(sorted(_REGISTRY))}"
        ) from None


register("seasonal_naive_1d", lambda: SeasonalNaive(season="1d"))
register("seasonal_naive_7d", lambda: SeasonalNaive(season="7d"))
