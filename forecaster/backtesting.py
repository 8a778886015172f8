"""Rolling-origin backtests and the accuracy measures tiercast reports.

A backtest refits an estimator at several *origins*, each time on the data strictly
before the origin, and compares its forecast of the following steps with what
happened. The scores are scaled so that series of any unit compare:

* **MASE**: mean absolute error of the median forecast divided by the in-sample
  MAE of the one-day seasonal naive forecast on that origin's training data
  (below 1 means better than "same as yesterday" was in-sample);
* **scaled pinball loss** per quantile, with the same denominator;
* **coverage** per quantile (share of actuals at or below the forecast) and of the
  central interval between the lowest and highest quantile.

NaN actuals are ignored everywhere. :func:`protocol_origins` gives the origins of
the benchmark protocol of docs/benchmarks.md (daily at 00:00 over the last 7 days, or the
last 4 for series of 14 days or less).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from forecaster.errors import DataError
from forecaster.estimators import BaseEstimator, check_quantiles, quantile_column
from forecaster.series import infer_step, parse_duration, steps_per

DAY = pd.Timedelta(days=1)


def naive_scale(values: np.ndarray, season_steps: int) -> float:
    """In-sample MAE of the seasonal naive forecast ``y[t - season]``: the MASE denominator.

    A flat series has no naive error; a tiny positive floor keeps the ratios finite.
    """
    if len(values) <= season_steps:
        season_steps = 1
    diff = np.abs(values[season_steps:] - values[:-season_steps])
    diff = diff[~np.isnan(diff)]
    scale = float(diff.mean()) if diff.size else 0.0
    if scale > 0:
        return scale
    level = np.nanmean(np.abs(values)) if np.isfinite(values).any() else 0.0
    return float(max(level * 1e-3, 1e-9))


def pinball(actual: np.ndarray, forecast: np.ndarray, q: float | np.ndarray) -> np.ndarray:
    """Pinball (quantile) loss per point; NaN where the actual is missing.

    ``q`` may be an array broadcast against the forecast (one level per column).
    """
    diff = actual - forecast
    return np.maximum(q * diff, (q - 1.0) * diff)


@dataclass
class Backtest:
    """Forecasts of one estimator at several origins, with the actuals that followed."""

    label: str
    origins: list[pd.Timestamp]
    quantiles: list[float]
    forecasts: np.ndarray
    """Shape (origins, horizon, quantiles)."""
    actuals: np.ndarray
    """Shape (origins, horizon); NaN where nothing was observed."""
    scales: np.ndarray
    """MASE denominator per origin (one-day seasonal naive MAE on its training data)."""
    fit_seconds: float
    notes: list[str] = field(default_factory=list)
    cpu_seconds: float = math.nan
    """Process CPU time of the fits and forecasts (``time.process_time``: every thread of
    this process, first-call costs included); NaN where it was not measured."""
    labels: list[str] = field(default_factory=list)
    """Per origin: the fitted estimator's label (what ``auto`` chose there)."""

    def column(self, q: float) -> np.ndarray:
        return self.forecasts[:, :, self.quantiles.index(q)]

    def point(self) -> np.ndarray:
        """The median forecast (or the middle quantile when 0.5 was not asked for)."""
        if 0.5 in self.quantiles:
            return self.column(0.5)
        return self.forecasts[:, :, len(self.quantiles) // 2]

    def _scaled(self, loss: np.ndarray) -> float:
        scaled = loss / self.scales[:, None]
        return float(np.nanmean(scaled)) if np.isfinite(scaled).any() else float("nan")

    def mase(self) -> float:
        return self._scaled(np.abs(self.actuals - self.point()))

    def scaled_pinball(self, q: float) -> float:
        return self._scaled(pinball(self.actuals, self.column(q), q))

    def coverage(self, q: float) -> float:
        """Share of observed actuals at or below the ``q`` forecast (about ``q`` when calibrated)."""
        mask = ~np.isnan(self.actuals)
        if not mask.any():
            return float("nan")
        return float((self.actuals[mask] <= self.column(q)[mask]).mean())

    def interval_coverage(self) -> float:
        """Share of observed actuals inside [lowest quantile, highest quantile]."""
        mask = ~np.isnan(self.actuals)
        lo, hi = self.forecasts[:, :, 0], self.forecasts[:, :, -1]
        if not mask.any():
            return float("nan")
        inside = (self.actuals[mask] >= lo[mask]) & (self.actuals[mask] <= hi[mask])
        return float(inside.mean())

    def per_origin(self) -> list[dict[str, Any]]:
        """Scores of each origin alone: its MASE, its coverage per quantile, and its bias
        (mean actual minus median, over the mean absolute actual): the days that made a
        series' totals. NaN where an origin saw no actual."""
        point = self.point()
        out = []
        for i, origin in enumerate(self.origins):
            actual = self.actuals[i]
            seen = ~np.isnan(actual)
            row: dict[str, Any] = {"origin": origin.isoformat(), "observed": int(seen.sum())}
            if seen.any():
                error = actual[seen] - point[i][seen]
                level = float(np.mean(np.abs(actual[seen])))
                row["mase"] = float(np.mean(np.abs(error)) / self.scales[i])
                row["bias"] = float(np.mean(error) / level) if level > 0 else math.nan
                for q in self.quantiles:
                    below = actual[seen] <= self.column(q)[i][seen]
                    row[f"coverage_{quantile_column(q)}"] = float(below.mean())
            else:
                row["mase"] = row["bias"] = math.nan
                for q in self.quantiles:
                    row[f"coverage_{quantile_column(q)}"] = math.nan
            out.append(row)
        return out

    def scores(self) -> dict[str, float]:
        """The summary written to tables, JSON and the model store."""
        out = {"mase": self.mase()}
        for q in self.quantiles:
            out[f"pinball_{quantile_column(q)}"] = self.scaled_pinball(q)
            out[f"coverage_{quantile_column(q)}"] = self.coverage(q)
        if len(self.quantiles) > 1:
            out["interval_coverage"] = self.interval_coverage()
        out["fit_seconds"] = self.fit_seconds
        out["origins"] = float(len(self.origins))
        return out


def backtest(
    factory: Callable[[], BaseEstimator],
    y: pd.Series,
    origins: Sequence[pd.Timestamp],
    horizon: int,
    quantiles: Sequence[float],
    label: str | None = None,
    tick: Callable[[], None] | None = None,
    max_history: pd.Timedelta | None = None,
    context: Callable[[pd.Timestamp], AbstractContextManager[Any]] | None = None,
) -> Backtest:
    """Refit ``factory()`` at each origin on the data before it; forecast ``horizon`` steps.

    ``max_history``, when given, cuts each origin's training data to that span before
    the origin (timestamps at or after ``origin - max_history``), the way a metrics
    store with that retention would hold it; the MASE scale of the origin is taken on
    the same cut. ``tick``, when given, is called after each origin (a progress hook).
    ``context(origin)``, when given, is entered around each origin's fit and forecast
    (the benchmark sets the fleet of sibling series as they stood at the origin)."""
    qs = check_quantiles(quantiles, "backtest")
    if not origins:
        raise DataError(f"series {y.name!r}: no backtest origin inside the history")
    step = infer_step(y)
    m_day = steps_per(DAY, step)
    values = y.to_numpy(dtype=float)
    forecasts = np.full((len(origins), horizon, len(qs)), np.nan)
    actuals = np.full((len(origins), horizon), np.nan)
    scales = np.ones(len(origins))
    seconds = 0.0
    cpu = 0.0
    name = label
    notes: list[str] = []
    labels: list[str] = []
    for i, origin in enumerate(origins):
        cut = int(y.index.searchsorted(origin))
        first = 0 if max_history is None else int(y.index.searchsorted(origin - max_history))
        train = y.iloc[first:cut]
        if train.notna().sum() < 2:
            raise DataError(f"series {y.name!r}: under 2 observations before origin {origin}")
        scales[i] = naive_scale(values[first:cut], m_day)
        start, start_cpu = time.perf_counter(), time.process_time()
        with context(origin) if context is not None else contextlib.nullcontext():
            est = factory()
            frame = est.fit(train).predict(horizon, qs)
        seconds += time.perf_counter() - start
        cpu += time.process_time() - start_cpu
        labels.append(est.label())
        name = name or est.label()
        if getattr(est, "fallback_", None):
            notes.append(f"{origin}: {est.fallback_}")
        forecasts[i] = frame.to_numpy()
        future = y.reindex(frame.index)
        actuals[i] = future.to_numpy(dtype=float)
        if tick is not None:
            tick()
    return Backtest(
        label=name or "estimator",
        origins=list(origins),
        quantiles=qs,
        forecasts=forecasts,
        actuals=actuals,
        scales=scales,
        fit_seconds=seconds,
        notes=notes,
        cpu_seconds=cpu,
        labels=labels,
    )


def protocol_test_days(y: pd.Series) -> int:
    """Length of the benchmark's test period: 7 days, or 4 for series of 14 days or less."""
    span_days = round((y.index[-1] - y.index[0]) / DAY)
    return 4 if span_days <= 14 else 7


def parse_max_history(text: str) -> pd.Timedelta:
    """A ``--max-history`` value: a duration (``15d``, ``3w``, ``36h``) of at least a day."""
    span = parse_duration(text)
    if span < DAY:
        raise DataError(f"max history {text!r} is under a day")
    return span


def protocol_origins(y: pd.Series) -> list[pd.Timestamp]:
    """Origins of the benchmark protocol: every 00:00 inside the test period."""
    step = infer_step(y)
    end = y.index[-1] + step
    start = end - protocol_test_days(y) * DAY
    first = start.ceil("D")
    return list(pd.date_range(first, end - step, freq="D"))


def daily_origins(y: pd.Series, count: int, horizon: int) -> list[pd.Timestamp]:
    """``count`` origins one day apart ending ``horizon`` steps before the end, newest first.

    Aligned with the end of the history, so a backtest sees the forecast's own
    phase of the day; used by selection and calibration.
    """
    step = infer_step(y)
    last = y.index[-1] + step - horizon * step
    return [last - k * DAY for k in range(count) if last - k * DAY > y.index[0]]
