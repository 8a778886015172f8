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

New estimators register themselves with :func:`register`. The heavier ones live in
their own modules (:mod:`forecaster.prophet_model`, :mod:`forecaster.boosting`,
:mod:`forecaster.ensemble`, :mod:`forecaster.selection`) and are imported the first
time the registry is read, so importing this module stays cheap.

An estimator that cannot use the history it is given (too short for its lags, a
failed solver) falls back to the daily seasonal naive model and records why in
``fallback_``; ``update(history)`` moves a fitted estimator onto newer data as
cheaply as it can (a refit for the naive models, new lag values for boosting, a
shifted forecast origin for Prophet), which is what the model store relies on.
"""

from __future__ import annotations

import copy
import functools
import importlib
import inspect
import json
import math
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

import numpy as np
import pandas as pd

from forecaster.errors import BadInputError, DataError, NotFittedError
from forecaster.series import infer_step, regularize, steps_per
from forecaster.series import parse_duration as _parse_duration

DAY = pd.Timedelta(days=1)
WEEK = pd.Timedelta(days=7)


@functools.lru_cache(maxsize=256, typed=True)
def parse_duration(text: str | int | float) -> pd.Timedelta:
    """:func:`forecaster.series.parse_duration`, memoised: a backtest parses the same few
    hyper-parameters at every origin."""
    return _parse_duration(text)


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
    fallback_: str | None
    """Why a simpler model stands in, or None; set by every fit."""
    delegate_: BaseEstimator | None
    """The stand-in model of estimators that can fall back to one."""

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

    def check_settings(self) -> None:
        """Raise :class:`BadInputError` naming a setting outside its allowed values.

        Called by :func:`make` once settings are applied, so that a bad
        ``forecast.method`` fails where it is read rather than falling back at fit.
        """

    def label(self) -> str:
        """Short name recorded in plans, reports and the model store."""
        return self.name

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def _predict_args(self, horizon: int, quantiles: Sequence[float]) -> tuple[int, list[float]]:
        """The fitted check and the validated ``predict`` arguments every estimator starts with."""
        self._check_fitted()
        owner = f"{type(self).__name__}.predict"
        return check_horizon(horizon, owner), check_quantiles(quantiles, owner)

    def _fall_back_to_naive(self, y: pd.Series, why: str) -> None:
        """Let the daily seasonal naive model stand in (``delegate_``), saying why in ``fallback_``."""
        self.delegate_ = SeasonalNaive(season="1d").fit(y)
        self.fallback_ = f"{why}; daily seasonal naive used"

    def _prepare_values(self, values: np.ndarray, step: pd.Timedelta) -> None:
        """What :meth:`_prepare` sets from a regular series, given only its values and step.

        The fast backtest path refits on prefixes of one regular series; building a
        pandas series per origin cost more than many of the fits themselves.
        """
        if np.count_nonzero(~np.isnan(values)) < 2:
            raise DataError(f"{len(values)} steps of history have fewer than 2 observed values")
        self.step_ = step
        self.nonnegative_ = bool(np.nanmin(values) >= 0)
        self.fallback_ = None

    def _check_fitted(self) -> None:
        if not hasattr(self, "last_timestamp_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call 'fit' first."
            )

    def artifact_state(self) -> dict[str, Any]:
        """The attributes the model store writes for this estimator (see :mod:`forecaster.artifacts`).

        All of them by default; an estimator holding a library object that only
        pickles can leave it out here and rebuild it in :meth:`restore_artifact`
        from plain arrays and values, so that it is stored without pickle.
        """
        return dict(vars(self))

    def restore_artifact(self) -> None:
        """Rebuild, after loading, what :meth:`artifact_state` left out; the default has nothing to."""

    def update(self, history: pd.Series) -> BaseEstimator:
        """Move a fitted estimator onto ``history`` (newer data); the default refits."""
        return self.fit(history)

    def backtest_medians(self, y: pd.Series, origins: Sequence[int], horizon: int) -> np.ndarray:
        """Median forecasts, shape (origins, horizon), of a copy refitted on ``y[:o]`` at each origin.

        Selection only needs the median; an estimator that can produce it for less
        than a full fit overrides this.
        """
        out = np.empty((len(origins), horizon))
        for i, o in enumerate(origins):
            out[i] = clone(self).fit(y.iloc[:o]).predict(horizon, [0.5]).to_numpy()[:, 0]
        return out

    def _prepare(self, history: pd.Series) -> pd.Series:
        if not isinstance(history, pd.Series):
            raise DataError(
                f"{type(self).__name__}.fit expects a pandas Series, got {type(history).__name__}"
            )
        regular = is_regular(history)
        y = history if regular else regularize(history)
        if y.notna().sum() < 2:
            raise DataError(f"series {history.name!r} has fewer than 2 observed values")
        if regular:
            self.step_ = y.index[1] - y.index[0]
        else:
            self.step_ = infer_step(y) if len(y) > 1 else pd.Timedelta(minutes=5)
        self.last_timestamp_ = y.index[-1]
        values = y.to_numpy(dtype=float)
        self.nonnegative_ = bool(np.nanmin(values) >= 0)
        self.fallback_ = None
        return y

    def _future_index(self, horizon: int) -> pd.DatetimeIndex:
        start = self.last_timestamp_ + self.step_
        return pd.date_range(start, periods=horizon, freq=self.step_, name="timestamp")

    def _finish(self, values: np.ndarray, quantiles: Sequence[float], horizon: int) -> np.ndarray:
        """A (horizon, n_quantiles) array made monotone in the quantile and, if needed, non-negative."""
        arr = np.asarray(values, dtype=float).reshape(horizon, len(quantiles))
        arr = np.maximum.accumulate(arr, axis=1)  # monotone in the quantile
        if self.nonnegative_:
            arr = np.clip(arr, 0.0, None)
        return arr

    def _frame(self, values: np.ndarray, quantiles: list[float], horizon: int) -> pd.DataFrame:
        """Shape a (horizon, n_quantiles) array into the output frame, enforcing order and sign."""
        return pd.DataFrame(
            self._finish(values, quantiles, horizon),
            index=self._future_index(horizon),
            columns=[quantile_column(q) for q in quantiles],
        )


class ArrayEstimator(BaseEstimator):
    """An estimator whose fit and forecast are functions of the history's values and step alone.

    Subclasses implement ``_fit_values`` and ``_predict_values``; ``fit`` and
    ``predict`` wrap them in the pandas contract. Backtests call the array methods
    on prefixes of one series without building a pandas object per origin, and a
    subclass may override :meth:`backtest_medians` to share work across origins.
    """

    def fit(self, history: pd.Series) -> Self:
        y = self._prepare(history)
        self._fit_values(y.to_numpy(dtype=float))
        return self

    def predict(self, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        horizon, qs = self._predict_args(horizon, quantiles)
        return self._frame(self._predict_values(horizon, qs), qs, horizon)

    _memo: dict[tuple[int, int], np.ndarray] | None = None
    """Intermediate results by position, valid only while one series is being backtested."""

    def _fit_values(self, values: np.ndarray) -> None:
        raise NotImplementedError

    def _predict_values(self, horizon: int, qs: Sequence[float]) -> np.ndarray:
        raise NotImplementedError

    def backtest_medians(self, y: pd.Series, origins: Sequence[int], horizon: int) -> np.ndarray:
        """Median forecasts, shape (origins, horizon), refitted on ``y[:o]`` at each origin ``o``.

        ``y`` is a regular series; the numbers are those of ``fit(y.iloc[:o])`` and
        ``predict(horizon, [0.5])``, without a pandas object per origin.
        """
        if len(y) < 3 or min(origins, default=3) < 3:
            # Prefixes this short are not "regular" to _prepare; keep its exact path.
            return super().backtest_medians(y, origins, horizon)
        out = np.empty((len(origins), horizon))
        values = y.to_numpy(dtype=float)
        step = y.index[1] - y.index[0]
        self._memo = {}
        try:
            for i, o in enumerate(origins):
                train = values[:o]
                self._prepare_values(train, step)
                self._fit_values(train)
                out[i] = self._finish(self._predict_values(horizon, [0.5]), [0.5], horizon)[:, 0]
        finally:
            del self._memo  # back to the class default: a fitted model carries no memo
        return out


def clone(estimator: BaseEstimator) -> BaseEstimator:
    """An unfitted copy with the same hyper-parameters (scikit-learn's ``clone``)."""
    return type(estimator)(**copy.deepcopy(estimator.get_params()))


def is_regular(y: pd.Series) -> bool:
    """True when ``y`` already sits on a sorted grid with one constant step (no resampling needed)."""
    if len(y) < 3 or not isinstance(y.index, pd.DatetimeIndex) or y.index.tz is not None:
        return False
    if y.dtype != np.float64:
        return False
    stamps = y.index.as_unit("ns").asi8
    deltas = np.diff(stamps)
    if deltas[0] <= 0 or not (deltas == deltas[0]).all():
        return False
    # regularize() anchors buckets at the epoch; a grid off that anchor is resampled.
    if stamps[0] % deltas[0] != 0:
        return False
    return not bool(np.isinf(y.to_numpy()).any())


def season_matrix(values: np.ndarray, m: int, k: int) -> np.ndarray:
    """The last ``k`` whole seasons of ``m`` steps as rows (oldest first), aligned to the end."""
    k = max(1, min(k, len(values) // m))
    return values[len(values) - k * m :].reshape(k, m)


class SeasonalNaive(ArrayEstimator):
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

    def _fit_values(self, values: np.ndarray) -> None:
        period = parse_duration(self.season)
        m = steps_per(period, self.step_)
        if len(values) < m:
            # Too short for one full season: fall back to a flat last-value model.
            m = 1
        self.season_steps_ = m
        # Pattern of the last season, filled from older seasons where missing.
        pattern = values[-m:].copy()
        k = 2
        while np.isnan(pattern).any() and k * m <= len(values):
            older = values[len(values) - k * m : len(values) - (k - 1) * m]
            pattern = np.where(np.isnan(pattern), older, pattern)
            k += 1
        if np.isnan(pattern).any():  # the median is only needed to fill what is still missing
            pattern = np.where(np.isnan(pattern), float(np.nanmedian(values)), pattern)
        self.pattern_ = pattern
        resid = values[m:] - values[:-m] if len(values) > m else np.array([0.0])
        resid = resid[~np.isnan(resid)]
        self.residuals_ = resid if resid.size else np.array([0.0])

    def _predict_values(self, horizon: int, qs: Sequence[float]) -> np.ndarray:
        m = self.season_steps_
        point = np.resize(self.pattern_, horizon) if m > 1 else np.full(horizon, self.pattern_[-1])
        # Beyond one season the forecast repeats itself; widen by sqrt(seasons ahead).
        seasons_ahead = (
            np.floor(np.arange(horizon) / m) + 1 if m > 1 else np.sqrt(np.arange(1, horizon + 1))
        )
        scale = np.sqrt(seasons_ahead) if m > 1 else seasons_ahead
        return residual_spread(point, scale, self.residuals_, qs)


def residual_spread(
    point: np.ndarray, scale: np.ndarray, residuals: np.ndarray, qs: Sequence[float]
) -> np.ndarray:
    """Point forecast plus the empirical residual quantiles, widened step by step by ``scale``."""
    return point[:, None] + scale[:, None] * linear_quantiles(residuals, qs)[None, :]


def _honest_residuals(
    values: np.ndarray,
    m: int,
    k: int,
    rounds: int,
    point: Callable[[np.ndarray], np.ndarray],
    memo: dict[tuple[int, int], np.ndarray] | None = None,
) -> np.ndarray:
    """Out-of-sample errors of ``point`` over the last ``rounds`` seasons.

    ``point(past)`` forecasts the next ``m`` steps from ``past``; each of the last
    seasons is forecast from the data before it, so the spread is what the model
    really misses by, not its in-sample fit. ``memo`` keeps the errors by (m, origin)
    while ``values`` are prefixes of one series: backtest origins a season apart
    share most of their rounds.
    """
    errors = []
    n = len(values)
    for r in range(1, rounds + 1):
        origin = n - r * m
        if origin < m:
            break
        kept = memo.get((m, origin)) if memo is not None else None
        if kept is None:
            err = values[origin : origin + m] - point(values[:origin])
            kept = err[~np.isnan(err)]
            if memo is not None:
                memo[(m, origin)] = kept
        errors.append(kept)
    out = np.concatenate(errors) if errors else np.array([])
    return out if out.size else np.array([0.0])


class SeasonalProfile(ArrayEstimator):
    """A robust seasonal profile: the median of the last ``seasons`` seasons, phase by phase.

    Repeating one season (seasonal naive) carries that season's noise and bursts
    into the forecast; the median over several seasons keeps the shape and drops
    one-off spikes. With ``level=True`` the profile is shifted by the median gap
    between the most recent ``level_window`` of data and the profile, so a level
    shift is followed within hours instead of ``seasons`` seasons. Quantiles come
    from the profile's out-of-sample errors over the last few seasons.
    """

    name = "seasonal_profile"

    def __init__(
        self, season: str = "1d", seasons: int = 7, level: bool = True, level_window: str = "6h"
    ) -> None:
        self.season = season
        self.seasons = seasons
        self.level = level
        self.level_window = level_window

    def label(self) -> str:
        return f"seasonal_{'profile' if self.level else 'median'}_{self.season}"

    def _point(self, values: np.ndarray, m: int, horizon: int) -> np.ndarray:
        if len(values) < m:
            tail = values[~np.isnan(values)]
            return np.full(horizon, tail[-1] if tail.size else 0.0)
        profile = median_rows(season_matrix(values, m, self.seasons))
        if np.isnan(profile).any():
            profile = np.where(np.isnan(profile), np.nanmedian(values), profile)
        if self.level:
            w = min(m, steps_per(parse_duration(self.level_window), self.step_))
            gap = values[-w:] - profile[-w:]
            gap = gap[~np.isnan(gap)]
            if gap.size:
                profile = profile + _median(gap)
        return np.resize(profile, horizon)

    def _fit_values(self, values: np.ndarray) -> None:
        m = steps_per(parse_duration(self.season), self.step_)
        if len(values) < 2 * m:
            self.fallback_ = (
                f"{len(values)} steps is under two {self.season} seasons; last-value model used"
            )
            m = max(1, min(m, len(values) // 2))
        self.season_steps_ = m
        self.values_ = values[-max(self.seasons, 1) * m :].copy()
        self.residuals_ = _honest_residuals(
            values, m, self.seasons, 3, lambda past: self._point(past, m, m), self._memo
        )

    def _predict_values(self, horizon: int, qs: Sequence[float]) -> np.ndarray:
        m = self.season_steps_
        point = self._point(self.values_, m, horizon)
        scale = np.sqrt(np.floor(np.arange(horizon) / m) + 1)
        return residual_spread(point, scale, self.residuals_, qs)


def median_rows(block: np.ndarray) -> np.ndarray:
    """Column medians ignoring NaN; the plain median when there is none (much faster)."""
    if not np.isnan(block).any():
        # np.median's own arithmetic (the middle value, or the mean of the middle two
        # as (a + b) / 2) on one partition, without its general-purpose overhead.
        rows = block.shape[0]
        if rows == 0 or block.ndim != 2 or block.dtype != np.float64:
            return np.median(block, axis=0)
        half = rows // 2
        if rows % 2:
            return np.partition(block, half, axis=0)[half]
        part = np.partition(block, [half - 1, half], axis=0)
        return (part[half - 1] + part[half]) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column stays NaN
        return np.nanmedian(block, axis=0)


def rolling_profile(values: np.ndarray, m: int, k: int) -> np.ndarray:
    """Honest seasonal profile at every step: the median of the ``k`` seasons before it.

    Position t gets the median of ``values[t - m], values[t - 2m], ... values[t - k m]``
    (NaN where none exists), so deviations from it are out-of-sample.
    """
    n = len(values)
    rows = -(-n // m)
    pad = rows * m - n
    padded = np.full(rows * m, np.nan)
    padded[pad:] = values
    block = padded.reshape(rows, m)
    out = np.full((rows, m), np.nan)
    for j in range(1, rows):
        if j > k or pad == 0:
            out[j] = median_rows(block[max(0, j - k) : j])
            continue
        # The first row is padding up to ``pad``: take those phases from the rows
        # after it, so a series without gaps keeps median_rows' fast (NaN-free) path.
        out[j, pad:] = median_rows(block[0:j, pad:])
        if j > 1:
            out[j, :pad] = median_rows(block[1:j, :pad])
    return out.reshape(-1)[pad:]


class ProfileRegression(ArrayEstimator):
    """Seasonal median profile plus a learned, horizon-dependent pull towards the recent level.

    The deviation of the series from its (honest, rolling) profile is smoothed over
    ``smooth`` and, for every step ahead h, regressed linearly on the current
    smoothed deviation: ``d[t+h] = a_h + b_h * s[t]`` with ``b_h`` clipped to
    [0, 1]. A series whose departures from the usual shape persist (level shifts,
    a new client) learns ``b_h`` near 1 and follows the recent level; one whose
    departures are short bursts learns ``b_h`` near 0 and keeps the profile. The
    intercept absorbs a slow trend the lagging median would miss. Quantiles come
    from the regression's residuals per horizon bucket. Only the last ``window``
    of history trains the regression, so old regimes fade out.
    """

    name = "profile_regression"

    def __init__(
        self,
        season: str = "1d",
        seasons: int = 7,
        smooth: str = "1h",
        window: str = "28d",
        max_horizon: str = "1d",
    ) -> None:
        self.season = season
        self.seasons = seasons
        self.smooth = smooth
        self.window = window
        self.max_horizon = max_horizon

    def label(self) -> str:
        return f"profile_regression_{self.season}"

    def _span(self, m: int) -> int:
        """Steps of history the fit uses: the regression window plus the profile's seasons."""
        return max(steps_per(parse_duration(self.window), self.step_), 3 * m) + self.seasons * m

    def _smoothed(self, dev: np.ndarray, m: int) -> np.ndarray:
        w = min(steps_per(parse_duration(self.smooth), self.step_), m)
        return np.asarray(pd.Series(dev).rolling(w, min_periods=1).mean().to_numpy())

    def _fit_values(
        self,
        values: np.ndarray,
        dev: np.ndarray | None = None,
        smoothed: np.ndarray | None = None,
    ) -> None:
        """Fit on ``values``; ``dev`` and ``smoothed``, when given, are the deviations from the
        rolling profile and their rolling mean, already computed over exactly these values."""
        m = steps_per(parse_duration(self.season), self.step_)
        if len(values) < 2 * m:
            self.fallback_ = f"{len(values)} steps is under two {self.season} seasons"
            m = max(1, len(values) // 2)
        self.season_steps_ = m
        values = values[-self._span(m) :]
        if dev is None or smoothed is None:
            dev = values - rolling_profile(values, m, self.seasons)
            smoothed = self._smoothed(dev, m)
        w = min(steps_per(parse_duration(self.smooth), self.step_), m)
        self.smooth_steps_ = w
        self.values_ = values[-self.seasons * m :].copy()
        self.current_ = self._current(values, m, w)
        # Coefficients per step up to max_horizon; further steps reuse the last one.
        reach = max(1, min(steps_per(parse_duration(self.max_horizon), self.step_), len(dev) - 3))
        self.reach_ = reach
        # The coefficients change smoothly with h: fit them at up to 24 anchor steps
        # (denser near the origin) and interpolate, which keeps fine steps cheap.
        anchors = _anchor_steps(reach)
        a = np.zeros(len(anchors))
        b = np.zeros(len(anchors))
        none = np.array([])  # shared by the steps without an anchor: only its size is read
        resid: list[np.ndarray] = [none] * reach
        recent = 7 * m  # residuals of the last week only: the spread of the current regime
        # Without gaps no pair needs dropping, and selecting every element only copies.
        gaps = bool(np.isnan(smoothed).any() or np.isnan(dev).any())
        # NaN only before the first profile (the usual case: the first season has none)
        # lets every anchor be fitted at once; what that cannot fit exactly stays in the loop.
        todo = self._fit_anchors(anchors, smoothed, dev, recent, a, b, resid)
        for i, h in enumerate(anchors):
            if not todo[i]:
                continue
            x, z = smoothed[:-h], dev[h:]
            if gaps:
                ok = ~(np.isnan(x) | np.isnan(z))
                if ok.sum() < 3:
                    continue
                x, z = x[ok], z[ok]
            # np.mean is this sum over the count; calling the reduction directly is cheaper.
            x_mean = np.add.reduce(x) / x.size
            z_mean = np.add.reduce(z) / z.size
            xc = x - x_mean
            var = float(xc @ xc)
            slope = float(xc @ (z - z_mean) / var) if var > 0 else 0.0
            b[i] = min(1.0, max(0.0, slope))
            a[i] = float(z_mean - b[i] * x_mean)
            # Element-wise, so only the kept tail need be computed.
            resid[h - 1] = z[-recent:] - a[i] - b[i] * x[-recent:]
        every = np.arange(1, reach + 1)
        self.intercepts_ = np.interp(every, anchors, a)
        self.slopes_ = np.interp(every, anchors, b)
        self.residual_buckets_ = _bucket_residuals(resid, 4)

    @staticmethod
    def _fit_anchors(
        anchors: np.ndarray,
        smoothed: np.ndarray,
        dev: np.ndarray,
        recent: int,
        a: np.ndarray,
        b: np.ndarray,
        resid: list[np.ndarray],
    ) -> np.ndarray:
        """The per-anchor regressions of :meth:`_fit_values` at once; True where left undone.

        Anchor h regresses ``dev[t + h]`` on ``smoothed[t]`` over the t where both are
        observed. When the only NaN are a leading run in each (the rolling profile
        has none for the first season), those t are one contiguous range per anchor,
        so the sums come from running totals and one dot product per anchor, and the
        kept residuals of all anchors from one strided view (the last ``recent``
        values of ``dev`` are the same for every h), instead of a dozen array
        operations per anchor. Sums are only reordered; anchors whose variance is too
        small for running totals to resolve it (a near-constant series) are returned
        for the exact loop, as is everything when NaN fall elsewhere.
        """
        n = len(dev)
        todo = np.ones(len(anchors), dtype=bool)
        x_nan, z_nan = np.isnan(smoothed), np.isnan(dev)
        if x_nan.all() or z_nan.all():
            return todo
        x_first, z_first = int(np.argmin(x_nan)), int(np.argmin(z_nan))
        if x_nan[x_first:].any() or z_nan[z_first:].any():
            return todo
        x = np.where(x_nan, 0.0, smoothed)
        z = np.where(z_nan, 0.0, dev)
        begin = np.maximum(x_first, z_first - anchors).clip(min=0)  # first t per anchor
        stop = n - anchors  # t < stop
        count = stop - begin
        usable = count >= 3  # as the loop: fewer observed pairs leave the anchor at zero
        todo[~usable] = False
        if not usable.any():
            return todo
        h, begin, stop, count = anchors[usable], begin[usable], stop[usable], count[usable]
        size = count.astype(float)
        run_x = np.concatenate(([0.0], np.cumsum(x)))
        run_xx = np.concatenate(([0.0], np.cumsum(x * x)))
        run_z = np.concatenate(([0.0], np.cumsum(z)))
        sum_xx = run_xx[stop] - run_xx[begin]
        x_mean = (run_x[stop] - run_x[begin]) / size
        z_mean = (run_z[n] - run_z[begin + h]) / size
        var = sum_xx - size * x_mean * x_mean
        # Running totals lose about n * eps of sum_xx; below a safe multiple of that the
        # centred sum of the loop is needed to tell a tiny variance from none.
        resolved = var > 1e-8 * sum_xx
        cross = np.array([x[i:j] @ z[i + k : n] for i, j, k in zip(begin, stop, h, strict=True)])
        cov = cross - size * x_mean * z_mean
        slope = cov / np.where(resolved, var, 1.0)
        fit_b = np.clip(slope, 0.0, 1.0)
        fit_a = z_mean - fit_b * x_mean
        rows = np.flatnonzero(usable)[resolved]
        a[rows] = fit_a[resolved]
        b[rows] = fit_b[resolved]
        todo[rows] = False
        h, count, fit_a, fit_b = h[resolved], count[resolved], fit_a[resolved], fit_b[resolved]
        if len(h) and count.min() >= recent:
            # Row r of the window view is smoothed[r : r + recent].
            windows = np.lib.stride_tricks.sliding_window_view(smoothed, recent)
            x_tails = windows[n - h - recent]
            kept = (dev[-recent:][None, :] - fit_a[:, None]) - fit_b[:, None] * x_tails
            for i, step in enumerate(h):
                resid[step - 1] = kept[i]
        else:  # fewer pairs than the kept week at some anchor: tails of different lengths
            for i, step in enumerate(h):
                tail = min(recent, int(count[i]))
                z_tail = dev[n - tail :]
                x_tail = smoothed[n - step - tail : n - step]
                resid[step - 1] = z_tail - fit_a[i] - fit_b[i] * x_tail
        return todo

    def _current(self, values: np.ndarray, m: int, w: int) -> float:
        """The smoothed deviation of the last ``w`` steps from the profile of the seasons before."""
        block = season_matrix(values, m, self.seasons + 1)
        if len(block) < 2:
            return 0.0
        base = median_rows(block[:-1])
        gap = block[-1, -w:] - base[-w:]
        gap = gap[~np.isnan(gap)]
        return float(gap.mean()) if gap.size else 0.0

    def _profile_ahead(self, horizon: int) -> np.ndarray:
        """The seasonal profile over the next ``horizon`` steps (the regression corrects it)."""
        m = self.season_steps_
        profile = median_rows(season_matrix(self.values_, m, self.seasons))
        if np.isnan(profile).any():  # the fill median is only needed where a phase has none
            profile = np.where(np.isnan(profile), np.nanmedian(self.values_), profile)
        return np.resize(profile, horizon)

    def _predict_values(self, horizon: int, qs: Sequence[float]) -> np.ndarray:
        reach = self.reach_
        steps = np.minimum(np.arange(horizon), reach - 1)
        correction = self.intercepts_[steps] + self.slopes_[steps] * self.current_
        point = self._profile_ahead(horizon) + correction
        buckets = self.residual_buckets_
        idx = np.minimum(np.arange(horizon) * len(buckets) // reach, len(buckets) - 1)
        table = np.array([linear_quantiles(r, qs) for r in buckets])
        grow = np.sqrt(np.maximum(1.0, (np.arange(horizon) + 1) / reach))
        return point[:, None] + grow[:, None] * table[idx]

    def backtest_medians(self, y: pd.Series, origins: Sequence[int], horizon: int) -> np.ndarray:
        """As the base method, with the rolling profile and smoothed deviations computed once.

        The profile at step t is the median of the same phase in the seasons before t,
        and the rolling mean runs from the first step, so over a prefix both equal
        the prefix of the whole series' values: shared by every origin whose fit uses
        its whole prefix (no fallback season, shorter than the regression window).
        """
        if len(y) < 3 or min(origins, default=3) < 3:
            return super().backtest_medians(y, origins, horizon)
        values = y.to_numpy(dtype=float)
        self.step_ = step = y.index[1] - y.index[0]
        m = steps_per(parse_duration(self.season), step)
        shared = [o for o in origins if 2 * m <= o <= self._span(m)]
        if not shared:
            return super().backtest_medians(y, origins, horizon)
        end = max(shared)
        dev = values[:end] - rolling_profile(values[:end], m, self.seasons)
        smoothed = self._smoothed(dev, m)
        out = np.empty((len(origins), horizon))
        for i, o in enumerate(origins):
            train = values[:o]
            self._prepare_values(train, step)
            if o in shared:
                self._fit_values(train, dev[:o], smoothed[:o])
            else:
                self._fit_values(train)
            out[i] = self._finish(self._predict_values(horizon, [0.5]), [0.5], horizon)[:, 0]
        return out


@functools.lru_cache(maxsize=64)
def _anchor_steps(reach: int) -> np.ndarray:
    """Up to 24 horizon steps in 1..reach, denser near the origin (read-only: it is shared)."""
    anchors = np.unique(np.round(np.geomspace(1, reach, min(reach, 24))).astype(int))
    anchors.setflags(write=False)
    return anchors


def interpolate_levels(levels: list[float], columns: np.ndarray, q: float) -> np.ndarray:
    """Column for quantile ``q`` of ``columns`` (one per trained level in ``levels``, ascending)
    by linear interpolation between the levels, clamped at the outer ones."""
    if q <= levels[0]:
        return columns[:, 0]
    if q >= levels[-1]:
        return columns[:, -1]
    j = int(np.searchsorted(levels, q)) - 1
    w = (q - levels[j]) / (levels[j + 1] - levels[j])
    return (1 - w) * columns[:, j] + w * columns[:, j + 1]


def linear_quantiles(values: np.ndarray, qs: Sequence[float]) -> np.ndarray:
    """``np.quantile(values, qs)`` (linear method) for a 1-D float array, bit for bit.

    The profile regression looks up a few quantiles of four small residual buckets
    at every backtest origin; numpy's general quantile spends most of that time on
    argument handling. This follows its arithmetic step by step (virtual index,
    neighbours, gamma, the two-sided lerp) so results do not change; arrays with
    NaN, or anything not a plain 1-D float array, go to numpy itself.
    """
    n = values.size
    if values.ndim != 1 or n == 0 or values.dtype != np.float64:
        return np.asarray(np.quantile(values, qs))
    q = np.asarray(qs, dtype=float)
    virtual = (n - 1) * q
    previous = np.floor(virtual).astype(np.intp)
    following = previous + 1
    above = virtual >= n - 1
    previous[above] = n - 1
    following[above] = n - 1
    below = virtual < 0
    previous[below] = 0
    following[below] = 0
    gamma = virtual - np.floor(virtual)
    # The last position too: partitioning sorts NaN there, so one look finds any.
    part = np.partition(values, sorted({n - 1, *previous.tolist(), *following.tolist()}))
    if np.isnan(part[-1]):
        return np.asarray(np.quantile(values, qs))
    a, b = part[previous], part[following]
    diff = b - a
    out = a + diff * gamma
    upper = gamma >= 0.5
    out[upper] = (b - diff * (1 - gamma))[upper]
    return out


def _bucket_residuals(per_step: list[np.ndarray], buckets: int) -> list[np.ndarray]:
    """Pool per-step residual arrays into ``buckets`` contiguous horizon buckets."""
    buckets = max(1, min(buckets, len(per_step)))
    edges = np.linspace(0, len(per_step), buckets + 1).astype(int)
    out: list[np.ndarray] = []
    for i in range(buckets):
        chunk = [r for r in per_step[edges[i] : edges[i + 1]] if r.size]
        if not chunk:  # no anchor in this bucket: borrow the nearest earlier one
            chunk = [out[-1]] if out else [r for r in per_step if r.size][:1]
        out.append(np.concatenate(chunk) if chunk else np.array([0.0]))
    return out


def _median(values: np.ndarray) -> float:
    """``float(np.median(values))`` of a non-empty 1-D array without NaN, via :func:`median_rows`."""
    return float(median_rows(values.reshape(-1, 1))[0])


def _median_or_nan(values: np.ndarray) -> float:
    observed = values[~np.isnan(values)]
    return _median(observed) if observed.size else float("nan")


class RecentLevel(ArrayEstimator):
    """A flat forecast at the median of the last ``window``: the model for series without a cycle.

    The negative control for the seasonal models: when a series has no usable daily
    or weekly pattern, repeating yesterday doubles the noise, while a robust recent
    level does not. Quantiles come from how far the series moved over one
    ``window`` ahead of each past origin, widened with the square root of the
    horizon in windows.
    """

    name = "recent_level"

    def __init__(self, window: str = "6h") -> None:
        self.window = window

    def label(self) -> str:
        return f"recent_level_{self.window}"

    def _fit_values(self, values: np.ndarray) -> None:
        w = min(steps_per(parse_duration(self.window), self.step_), max(1, len(values) // 2))
        self.window_steps_ = w
        tail = values[-w:]
        tail = tail[~np.isnan(tail)]
        self.level_ = _median(tail) if tail.size else float(np.nanmedian(values))
        self.residuals_ = _honest_residuals(
            values, w, 1, 24, lambda past: np.full(w, _median_or_nan(past[-w:])), self._memo
        )

    def _predict_values(self, horizon: int, qs: Sequence[float]) -> np.ndarray:
        scale = np.sqrt(np.floor(np.arange(horizon) / self.window_steps_) + 1)
        point = np.full(horizon, self.level_)
        return residual_spread(point, scale, self.residuals_, qs)


class LastValue(RecentLevel):
    """The last observed value, flat (the random-walk forecast): for series that wander.

    GPUs held by running jobs, processors of a batch cluster: where the level moves
    like a random walk, the last value beats any median of the recent past.
    """

    name = "last_value"

    def __init__(self) -> None:
        super().__init__(window="1s")

    def label(self) -> str:
        return "last_value"


_REGISTRY: dict[str, Callable[[], BaseEstimator]] = {}
# Modules that register more estimators when imported (kept lazy: Prophet is slow to import).
_PLUGINS = (
    "forecaster.prophet_model",
    "forecaster.boosting",
    "forecaster.global_model",
    "forecaster.ensemble",
    "forecaster.selection",
    "forecaster.profile_mix",
    "forecaster.statistical",
)
_plugins_loaded = False


def _load_plugins() -> None:
    global _plugins_loaded
    if not _plugins_loaded:
        _plugins_loaded = True
        for module in _PLUGINS:
            importlib.import_module(module)


def register(name: str, factory: Callable[[], BaseEstimator]) -> None:
    """Add an estimator under ``name`` (its default configuration)."""
    _REGISTRY[name] = factory


def registered() -> dict[str, Callable[[], BaseEstimator]]:
    """Name -> factory for every registered estimator."""
    _load_plugins()
    return dict(_REGISTRY)


_SETTINGS = re.compile(r"^\s*([A-Za-z_][\w]*)\s*\((.*)\)\s*$")


def _with_settings(est: BaseEstimator, spec: str, settings: str) -> BaseEstimator:
    """``est`` with the ``key=value`` settings of ``spec`` (JSON scalars, or a JSON list of
    numbers for a parameter whose default is a tuple of numbers), type-checked."""
    params = est.get_params()
    for item in (x.strip() for x in re.split(r",(?![^\[]*\])", settings)):
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not item or not eq or key not in params:
            raise BadInputError(
                f"estimator {spec!r}: {item!r} is not key=value with a key among "
                f"{', '.join(sorted(params))}"
            )
        try:
            value = json.loads(raw)
        except ValueError:
            raise BadInputError(
                f"estimator {spec!r}: {key}={raw.strip()!r} is not a number, true, false or "
                'a "quoted" string'
            ) from None
        old = params[key]
        if isinstance(old, bool):
            ok = isinstance(value, bool)
        elif isinstance(old, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif isinstance(old, float):
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            ok = ok and math.isfinite(value)
            value = float(value) if ok else value
        elif isinstance(old, tuple) and all(isinstance(v, int | float) for v in old):
            ok = isinstance(value, list) and bool(value)
            ok = ok and all(
                isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                for v in value
            )
            value = tuple(float(v) for v in value) if ok else value
        else:
            ok = isinstance(old, str) and isinstance(value, str)
        if not ok:
            raise BadInputError(
                f"estimator {spec!r}: {key} must be {type(old).__name__} like its default "
                f"{old!r}; got {raw.strip()}"
            )
        est.set_params(**{key: value})
    est.check_settings()
    return est


def make(name: str) -> BaseEstimator:
    """A new, unfitted estimator registered under ``name``.

    ``name(key=value, ...)`` sets scalar constructor parameters of the registered
    estimator (``auto(budget_s=3.0)``): a variant that benchmarks and configurations
    can name without registering it.
    """
    match = _SETTINGS.match(name) if "(" in name else None
    base = match.group(1) if match else name
    if base not in _REGISTRY:
        _load_plugins()
    try:
        est = _REGISTRY[base]()
    except KeyError:
        raise BadInputError(
            f"unknown estimator {base!r}; expected one of {', '.join(sorted(_REGISTRY))}"
        ) from None
    return _with_settings(est, name, match.group(2)) if match else est


register("seasonal_naive_1d", lambda: SeasonalNaive(season="1d"))
register("seasonal_naive_7d", lambda: SeasonalNaive(season="7d"))
register("seasonal_profile_1d", lambda: SeasonalProfile(season="1d", seasons=7))
register("seasonal_profile_7d", lambda: SeasonalProfile(season="7d", seasons=4))
register("seasonal_median_1d", lambda: SeasonalProfile(season="1d", seasons=7, level=False))
register("seasonal_median_7d", lambda: SeasonalProfile(season="7d", seasons=4, level=False))
register("profile_regression_1d", lambda: ProfileRegression(season="1d", seasons=7))
register("profile_regression_7d", lambda: ProfileRegression(season="7d", seasons=4))
register("recent_level", lambda: RecentLevel(window="6h"))
register("last_value", LastValue)
