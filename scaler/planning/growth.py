"""The growth quantile: how much demand grows within a lead time, from tiercast's own forecast.

Capacity requested now serves only after the lead time L, so what it must cover is
demand over the next L (and one step): ``max(y[i+1 .. i+L+1])``. As a multiple of
the newest observation ``y[i]`` that is the *growth* ``g_i``. The forecast predicts
it: ``ĝ_i = max(median(t_i + k step), k = 1..L+1) / median(t_i)``, the forecast's
median over the window against its median now (the shape of a morning ramp, not
the level, which a day-ahead model often has wrong). The *growth quantile* at
level τ is ``ĝ_i x c_τ``, where ``c_τ`` is the τ-quantile of the forecast's own
errors ``g / ĝ``, measured by a walk-forward backtest of the forecaster actually
used (:func:`backtest_growth`: refreshed as the planner refreshes it, from the
history it would have had, at exactly that lead), by time of day where the
history supports it (a morning ramp's errors are not an evening decline's), and by
weekday against weekend where it covers two weeks or more.

:func:`growth_factors` turns a backtest into the factor per origin at a level, so
that :mod:`scaler.planning.margins` can replay the near-term rule with it on the
same history and compare it with the rule that ignores the forecast (reacting
with a margin). :class:`Growth` is the calibrated result the planner applies at
the newest observation (:func:`predicted_growth` of the live forecast times the
correction of its hour).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecaster.forecasting import SeriesForecast, forecast_series

LEVELS: tuple[float, ...] = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.925, 0.95, 0.975, 0.99)
"""Quantile levels of the growth the margin learner chooses among."""
MIN_BUCKET = 48
"""Fewer backtest origins than this in an hour's bucket (with its neighbours): the
correction of every hour is used there."""
MIN_TRAINING = pd.Timedelta(days=2)
"""History a backtest's first forecast is made from, at least."""
WEEKLY_SPAN = pd.Timedelta(days=14)
"""A backtest of at least this span calibrates weekdays and weekends apart."""

Forecaster = Callable[[pd.Series, pd.Timedelta], SeriesForecast]
"""``(history, horizon) -> forecast``: the forecaster the planner uses, as the backtest calls it."""


def predicted_growth(fc: SeriesForecast, at: pd.Timestamp, step: pd.Timedelta, lead: int) -> float:
    """``ĝ``: the forecast's median over ``(at, at + (lead+1) step]`` at its highest, over
    its median at ``at`` (the newest observation); 1 where the median gives no scale."""
    median = fc.frame["q0.5"] if "q0.5" in fc.frame.columns else fc.quantile(0.5)
    if median.empty:
        return 1.0
    idx = pd.DatetimeIndex(median.index)
    vals = median.to_numpy(dtype=float)
    return float(_ratios(idx, vals, pd.DatetimeIndex([at]), step, lead)[0])


def _ratios(
    idx: pd.DatetimeIndex,
    vals: np.ndarray,
    origins: pd.DatetimeIndex,
    step: pd.Timedelta,
    lead: int,
) -> np.ndarray:
    """:func:`predicted_growth` of one forecast median (``idx``, ``vals``) at each origin."""
    out = np.ones(len(origins))
    if len(vals) == 0:
        return out
    ns = idx.as_unit("ns").asi8
    span = (lead + 1) * int(step.value)
    scale = max(1.0, float(np.nanmax(np.abs(vals)))) if np.isfinite(vals).any() else 1.0
    for j, at in enumerate(origins.as_unit("ns").asi8):
        k = int(np.searchsorted(ns, at, side="right"))
        # The median at the origin; a forecast starting after it: its first value.
        base = float(vals[k - 1]) if k > 0 else float(vals[0])
        hi = int(np.searchsorted(ns, at + span, side="right"))
        ahead = vals[k:hi]
        if not ahead.size or not np.isfinite(base) or base <= 1e-6 * scale:
            continue
        top = float(np.nanmax(ahead)) if np.isfinite(ahead).any() else math.nan
        ratio = top / base
        if math.isfinite(ratio) and ratio > 0:
            out[j] = ratio
    return out


@dataclass(frozen=True)
class GrowthBacktest:
    """The forecaster's predicted and the actual growth at every origin of a history."""

    origins: pd.DatetimeIndex
    """Times of the newest observation at each origin (the history's own steps)."""
    positions: np.ndarray
    """Index of each origin in the history the margin learner replays."""
    predicted: np.ndarray
    """``ĝ`` at each origin."""
    actual: np.ndarray
    """``g`` at each origin (NaN where the newest value is 0 or the window not observed)."""
    lead_steps: int
    step: pd.Timedelta
    method: str
    refreshes: int
    """Forecasts made for the backtest."""

    @property
    def span(self) -> pd.Timedelta:
        return (
            self.origins[-1] - self.origins[0] + self.step if len(self.origins) else pd.Timedelta(0)
        )

    def errors(self) -> tuple[float, float]:
        """``(forecast, none)``: the mean absolute log error of the predicted growth ``ĝ``
        against the actual, and of assuming no growth (1), over the origins; NaN where
        none can be scored. How much the forecast knows about the next lead time."""
        ok = np.isfinite(self.actual) & (self.actual > 0) & (self.predicted > 0)
        if not ok.any():
            return math.nan, math.nan
        g, p = self.actual[ok], self.predicted[ok]
        return float(np.mean(np.abs(np.log(g / p)))), float(np.mean(np.abs(np.log(g))))

    def calibrate(self, level: float) -> Growth:
        """The growth quantile at ``level``: the corrections of :class:`Growth`."""
        err = self.actual / self.predicted
        ok = np.isfinite(err)
        weekly = self.span >= WEEKLY_SPAN
        hours = np.asarray(self.origins.hour)
        weekend = np.asarray(self.origins.day_of_week) >= 5
        overall = _quantile(err[ok], level)
        table: dict[tuple[int, bool], float] = {}
        pooled = 0
        for h in range(24):
            near = np.isin(hours, [(h - 1) % 24, h, (h + 1) % 24]) & ok
            for we in (False, True) if weekly else (False,):
                cell = near & (weekend == we) if weekly else near
                if cell.sum() >= MIN_BUCKET:
                    table[(h, we)] = _quantile(err[cell], level)
                else:
                    table[(h, we)] = overall
                    pooled += 1
        return Growth(
            level=level,
            corrections=table,
            overall=overall,
            weekly=weekly,
            samples=int(ok.sum()),
            pooled_buckets=pooled,
            method=self.method,
            lead_steps=self.lead_steps,
            step=self.step,
        )


def _quantile(values: np.ndarray, level: float) -> float:
    """The ``level`` quantile of ``values`` (1 where there are none)."""
    if not len(values):
        return 1.0
    return float(np.quantile(values, level, method="higher"))


@dataclass(frozen=True)
class Growth:
    """A calibrated growth quantile: ``ĝ x`` the correction of the origin's hour."""

    level: float
    corrections: dict[tuple[int, bool], float]
    """Per (hour of day, weekend) of the origin: the ``level`` quantile of ``g / ĝ``."""
    overall: float
    """The same over every origin (where an hour has too few)."""
    weekly: bool
    """Whether weekdays and weekends are calibrated apart."""
    samples: int
    pooled_buckets: int
    """Buckets with too few origins, which use ``overall``."""
    method: str
    lead_steps: int
    step: pd.Timedelta

    def correction(self, at: pd.Timestamp) -> float:
        at = pd.Timestamp(at)
        key = (at.hour, bool(at.day_of_week >= 5) if self.weekly else False)
        return self.corrections.get(key, self.overall)

    def factor(self, fc: SeriesForecast, at: pd.Timestamp) -> float:
        """The growth quantile at the newest observation ``at`` of the live forecast ``fc``."""
        return predicted_growth(fc, at, self.step, self.lead_steps) * self.correction(at)

    def describe(self) -> str:
        buckets = "by hour of day" + (" and weekday/weekend" if self.weekly else "")
        return (
            f"q{self.level:g} of the growth over the lead time from {self.method!r} forecasts, "
            f"calibrated on {self.samples} backtest origins {buckets}"
        )


def growth_factors(backtest: GrowthBacktest, growth: Growth) -> np.ndarray:
    """The growth quantile ``ĝ x c`` at each origin of ``backtest``."""
    corr = np.array([growth.correction(t) for t in backtest.origins])
    return backtest.predicted * corr


def actual_growth(known: np.ndarray, lead: int) -> np.ndarray:
    """``g_i = max(y[i+1 .. i+lead+1]) / y[i]`` (NaN where ``y[i]`` is not positive or the
    window runs past the end)."""
    n = len(known)
    out = np.full(n, np.nan)
    width = lead + 1
    if n <= width:
        return out
    ahead = np.lib.stride_tricks.sliding_window_view(known[1:], width).max(axis=1)
    base = known[: len(ahead)]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = ahead / base
    out[: len(ahead)] = np.where(base > 0, ratio, np.nan)
    return out


def backtest_growth(
    values: np.ndarray,
    grid: pd.DatetimeIndex,
    lead_steps: int,
    forecaster: Forecaster,
    method: str,
    span: pd.Timedelta,
    every: pd.Timedelta,
    lookback: pd.Timedelta,
    min_training: pd.Timedelta = MIN_TRAINING,
    align: bool = False,
) -> GrowthBacktest | None:
    """Walk ``forecaster`` forward over the last ``span`` of a regular history.

    ``values`` on ``grid`` (NaN for gaps). Every ``every`` a forecast is made from the
    ``lookback`` before it, as the planner refreshes its forecast; each origin in between
    is the newest observation the planner would anchor that forecast on. None where the
    history leaves less than a day of origins after ``min_training``. With ``align``, the
    forecasts are made at whole multiples of ``every`` since the epoch (midnight UTC for a
    day), so that cycles minutes apart ask for the same forecasts and can keep them
    (:mod:`scaler.service.growth_cache`).
    """
    step = grid[1] - grid[0] if len(grid) > 1 else pd.Timedelta(0)
    if step <= pd.Timedelta(0):
        return None
    end = grid[-1] + step
    start = max(end - span, grid[0] + min_training)
    if align and every > pd.Timedelta(0):
        start = _aligned(start, every)
    if end - start < pd.Timedelta(days=1):
        return None
    known = pd.Series(values).ffill().to_numpy()
    actual = actual_growth(np.nan_to_num(known, nan=0.0), lead_steps)
    actual[~np.isfinite(values)] = np.nan
    series = pd.Series(values, index=grid, name="demand")
    horizon = every + (lead_steps + 2) * step
    origins: list[pd.Timestamp] = []
    positions: list[np.ndarray] = []
    predicted: list[np.ndarray] = []
    refreshes = 0
    at = start
    while at < end:
        # The forecast made at ``at`` sees the values before it; it serves the origins
        # (newest observations) from one step before ``at`` until the next refresh.
        window = series[(series.index < at) & (series.index >= at - lookback)]
        lo = int(grid.searchsorted(at - step))
        hi = int(grid.searchsorted(at + every - step))
        at_next = at + every
        if window.notna().sum() < 2 or hi <= lo:
            at = at_next
            continue
        fc = forecaster(window, horizon)
        refreshes += 1
        median = fc.frame["q0.5"] if "q0.5" in fc.frame.columns else fc.quantile(0.5)
        pos = np.arange(lo, hi)
        origins.extend(grid[pos])
        positions.append(pos)
        predicted.append(
            _ratios(
                pd.DatetimeIndex(median.index),
                median.to_numpy(dtype=float),
                grid[pos],
                step,
                lead_steps,
            )
        )
        at = at_next
    if not positions:
        return None
    pos_all = np.concatenate(positions)
    return GrowthBacktest(
        origins=pd.DatetimeIndex(origins),
        positions=pos_all,
        predicted=np.concatenate(predicted),
        actual=actual[pos_all],
        lead_steps=lead_steps,
        step=step,
        method=method,
        refreshes=refreshes,
    )


MAX_GROWTH_REFRESHES = 60
"""Forecasts one signal's growth backtest makes at most in a cycle, whatever
``policy.growth_backtest_s`` and ``policy.growth_refresh_s`` say (45 days refreshed every
5 minutes would be 12,960 forecasts, a cycle of over 15 minutes): :func:`bounded_refresh`."""


def bounded_refresh(span: pd.Timedelta, every: pd.Timedelta) -> pd.Timedelta:
    """``every``, widened to a whole multiple of itself where ``span`` would take more than
    :data:`MAX_GROWTH_REFRESHES` forecasts; a multiple, so the aligned refresh times stay a
    subset of the asked ones and the growth cache keeps serving them from cycle to cycle."""
    if every <= pd.Timedelta(0) or span / every <= MAX_GROWTH_REFRESHES:
        return every
    return every * math.ceil(span / every / MAX_GROWTH_REFRESHES)


def _aligned(at: pd.Timestamp, every: pd.Timedelta) -> pd.Timestamp:
    """The first whole multiple of ``every`` since the epoch at or after ``at``."""
    epoch = pd.Timestamp(0, tz=at.tz)
    return epoch + math.ceil((at - epoch) / every) * every


def walk_forward(
    method: str,
    span: pd.Timedelta,
    every: pd.Timedelta,
    lookback: pd.Timedelta,
    forecast: Forecaster | None = None,
    quantiles: tuple[float, ...] = (0.5,),
    align: bool = False,
) -> Callable[[np.ndarray, pd.DatetimeIndex, int], GrowthBacktest | None]:
    """The backtest :func:`scaler.planning.margins.learn_margin` runs: ``forecast`` (default
    :func:`forecaster.forecasting.forecast_series` with ``method``) walked forward over the
    last ``span`` of the history, refreshed every ``every`` from the ``lookback`` before
    (at aligned times with ``align``: :func:`backtest_growth`)."""
    if forecast is None:

        def forecast(window: pd.Series, horizon: pd.Timedelta) -> SeriesForecast:
            return forecast_series(window, horizon, quantiles, method)

    chosen: Forecaster = forecast

    def run(values: np.ndarray, grid: pd.DatetimeIndex, lead: int) -> GrowthBacktest | None:
        if span <= pd.Timedelta(0):
            return None
        return backtest_growth(
            values, grid, lead, chosen, method, span, every, lookback, align=align
        )

    return run
