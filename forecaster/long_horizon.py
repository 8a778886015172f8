"""Forecasts for long horizons: the level and a robust weekly shape past the first week.

A model chosen by one-day backtests (:mod:`forecaster.selection`) is good for the days
ahead; weeks ahead it mostly repeats the last week, one-off spikes included, with bands as
wide on day 90 as on day 7. For a horizon over :data:`LONG_HORIZON` (the 30- and 90-day
finance runs), the model keeps its first week (:data:`MODEL_SPAN`, over which its bands are
calibrated by lead day) and, after a day of blending, the forecast is

* the **shape**: the median over the history's weeks of each time-of-week slot, each week
  divided by its own mean (at least :data:`MIN_WEEKS` weeks; else the median time-of-day
  profile of the days, times a day-of-week factor), so a spike seen once is not planned
  again;
* times the **level**: the median daily mean of the last week. The trend of the daily
  means (Theil-Sen slope) is reported where its 90% interval excludes zero, and not
  extrapolated: a slope carried a month ahead did worse than none on most groups of the
  traces in a first try; the backtested bands carry the drift
  (docs/forecasting.md#long-horizons);
* with **bands** from backtests of this very rule on the series' own history at lead days
  1, 7, 14 and 30 (:data:`BAND_LEADS`): the quantiles of log(actual / forecast) at each lead,
  interpolated between leads, never narrower than the model's band at the seam. Beyond the
  longest lead the history supports, the bands hold its width, and a note says how far that
  is from the horizon asked.

Pure numpy, pandas and scipy; no fitting state is kept.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

LONG_HORIZON = pd.Timedelta(days=7)
"""Horizons longer than this get the long-horizon forecast past :data:`MODEL_SPAN`."""
MODEL_SPAN = pd.Timedelta(days=7)
"""The model's own forecast is kept this far (its bands are calibrated by lead day up to
here); the next day blends into the long rule."""
MIN_WEEKS = 3
"""Whole weeks of history for a weekly shape (a median of two would halve a spike only)."""
BAND_LEADS: tuple[int, ...] = (1, 7, 14, 30)
"""Lead days at which the rule is backtested for its bands."""
MIN_TRAIN_DAYS = 14
"""History a backtest origin needs before it."""
ORIGINS_PER_LEAD = 8
"""Most backtest origins per lead day (the newest, a day or more apart)."""
TREND_CONFIDENCE = 0.90
QUIET_PERIOD = 0.25
"""A week (or day) whose mean is under this share of the median week's is left out of the
shape."""


@dataclass(frozen=True)
class _Rule:
    """The long-horizon rule fitted on one history: shape by slot, level and trend."""

    shape: np.ndarray
    """Multiplier per slot of the period (a week, or a day when ``weekly`` is False)."""
    weekly: bool
    weekday_factor: np.ndarray
    """Per day of week (Monday first), for the daily shape; ones for the weekly one."""
    level: float
    """Mean per step at the history's end: the median daily mean of the last week."""
    slope_per_day: float
    """The daily means' Theil-Sen slope where its interval excludes zero, else 0: reported,
    not extrapolated (see the module docstring)."""
    end: pd.Timestamp
    """The first timestamp after the history."""
    step: pd.Timedelta
    ceiling: float = math.inf
    """The largest value of the weeks the shape was taken from: with no trend extrapolated,
    nothing is forecast above what those weeks reached."""

    def predict(self, index: pd.DatetimeIndex) -> np.ndarray:
        """The median path at ``index``."""
        level = max(0.0, self.level)
        slot = _slots(index, self.step, self.weekly)
        factor = self.shape[slot]
        if not self.weekly:
            factor = factor * self.weekday_factor[index.day_of_week]
        return np.clip(level * factor, 0.0, self.ceiling)


def _slots(index: pd.DatetimeIndex, step: pd.Timedelta, weekly: bool) -> np.ndarray:
    """The slot of each timestamp within the week (or the day), at ``step``."""
    span = pd.Timedelta(days=7 if weekly else 1)
    per = max(1, int(span / step))
    since = np.asarray((index - pd.Timestamp("1970-01-05")) / step, dtype=float)
    return (np.floor(since).astype(np.int64) % per).astype(np.int64)


def fit_rule(y: pd.Series, step: pd.Timedelta) -> _Rule | None:
    """The rule on history ``y`` (regular at ``step``); None with under two days of it."""
    y = y.astype(float)
    per_day = max(1, int(pd.Timedelta(days=1) / step))
    if y.notna().sum() < 2 * per_day:
        return None
    index = pd.DatetimeIndex(y.index)
    end = index[-1] + step
    daily = y.resample("1D").mean().dropna()
    daily = daily[daily.index >= daily.index[-1] - pd.Timedelta(days=56)]
    weeks = len(y) // (7 * per_day)
    weekly = weeks >= MIN_WEEKS
    shape, weekday = _shape(y, step, weekly, min(weeks, 8), per_day)
    recent = daily[daily.index > daily.index[-1] - pd.Timedelta(days=7)]
    level = float(np.median(recent.to_numpy())) if len(recent) else float(y.mean())
    slope = 0.0
    if len(daily) >= 14:
        t = np.asarray((daily.index - daily.index[-1]) / pd.Timedelta(days=1), dtype=float)
        res = stats.theilslopes(daily.to_numpy(), t, alpha=TREND_CONFIDENCE)
        if res.low_slope > 0 or res.high_slope < 0:
            slope = float(res.slope)
    if not math.isfinite(level):
        return None
    span = (min(weeks, 8) * 7 if weekly else min(len(y) // per_day, 28)) * per_day
    ceiling = float(np.nanmax(y.to_numpy(dtype=float)[-max(span, per_day) :]))
    return _Rule(shape, weekly, weekday, max(0.0, level), slope, end, step, ceiling)


def _shape(
    y: pd.Series, step: pd.Timedelta, weekly: bool, weeks: int, per_day: int
) -> tuple[np.ndarray, np.ndarray]:
    """The median shape per slot (each period divided by its mean) and, for a daily shape,
    the day-of-week factor."""
    index = pd.DatetimeIndex(y.index)
    values = y.to_numpy(dtype=float)
    period_days = 7 if weekly else 1
    per = per_day * period_days
    span = (weeks if weekly else min(len(values) // per_day, 28)) * per
    values, index = values[-span:], index[-span:]
    slot = _slots(index, step, weekly)
    period_id = np.floor(
        np.asarray((index - index[0]) / pd.Timedelta(days=period_days), dtype=float)
    ).astype(int)
    frame = pd.DataFrame({"v": values, "slot": slot, "period": period_id})
    means = frame.groupby("period")["v"].transform("mean")
    # A period far quieter than the others (a tenant idle for a week) says nothing of the
    # shape, and divided by its near-zero mean its one job would read as a spike of 100x.
    typical = float(frame.groupby("period")["v"].mean().median())
    usable = means > QUIET_PERIOD * typical if typical > 0 else means > 0
    frame["r"] = np.where(usable, frame["v"] / means.where(usable, 1.0), np.nan)
    shape = frame.groupby("slot")["r"].median().reindex(range(per)).to_numpy()
    shape = pd.Series(shape).interpolate(limit_direction="both").fillna(1.0).to_numpy()
    shape = shape / shape.mean() if shape.mean() > 0 else np.ones(per)
    weekday = np.ones(7)
    if not weekly:
        daily = y.resample("1D").mean().dropna()
        if len(daily) >= 7 and daily.mean() > 0:
            by_day = daily.groupby(pd.DatetimeIndex(daily.index).day_of_week).median()
            weekday = by_day.reindex(range(7)).fillna(by_day.mean()).to_numpy() / daily.median()
            weekday = np.where(np.isfinite(weekday) & (weekday > 0), weekday, 1.0)
    return shape, weekday


def _lead_errors(y: pd.Series, step: pd.Timedelta, lead_days: int) -> np.ndarray:
    """log(actual / forecast) of the rule on ``y``'s own history, ``lead_days`` ahead: the
    day ending ``lead_days`` after each origin, at most :data:`ORIGINS_PER_LEAD` origins."""
    per_day = max(1, int(pd.Timedelta(days=1) / step))
    n = len(y)
    values = y.to_numpy(dtype=float)
    eps = max(1e-9, 0.01 * float(np.nanmean(values)) if np.isfinite(np.nanmean(values)) else 1e-9)
    out: list[np.ndarray] = []
    latest = n - lead_days * per_day
    earliest = MIN_TRAIN_DAYS * per_day
    origins = range(latest, earliest - 1, -max(per_day, (latest - earliest) // ORIGINS_PER_LEAD))
    for o in list(origins)[:ORIGINS_PER_LEAD]:
        rule = fit_rule(y.iloc[:o], step)
        if rule is None:
            continue
        window = slice(o + (lead_days - 1) * per_day, o + lead_days * per_day)
        actual = values[window]
        pred = rule.predict(pd.DatetimeIndex(y.index[window]))
        ok = np.isfinite(actual)
        out.append(np.log((actual[ok] + eps) / (pred[ok] + eps)))
    return np.concatenate(out) if out else np.array([])


def long_horizon_frame(
    y: pd.Series, frame: pd.DataFrame, step: pd.Timedelta, quantiles: Sequence[float]
) -> tuple[pd.DataFrame, list[str]]:
    """``frame`` (the model's forecast) with everything past :data:`MODEL_SPAN` replaced by
    the long-horizon rule, blended over the day after; the notes say how its bands were
    set. Unchanged, with a note, where the history is under two days."""
    rule = fit_rule(y, step)
    if rule is None:
        return frame, ["long horizon: under two days of history, the model's forecast is kept"]
    index = pd.DatetimeIndex(frame.index)
    lead_days = np.asarray((index - rule.end) / pd.Timedelta(days=1), dtype=float) + (
        step / pd.Timedelta(days=1)
    )
    path = rule.predict(index)
    measured = {d: e for d in BAND_LEADS if (e := _lead_errors(y, step, d)).size >= 10}
    notes = [_shape_note(rule)]
    cols = {float(c[1:]): c for c in frame.columns}
    model_days = MODEL_SPAN / pd.Timedelta(days=1)
    within = np.flatnonzero(lead_days <= model_days)
    at_seam = int(within[-1]) if within.size else 0
    out = frame.copy()
    blend = np.clip(lead_days - model_days, 0.0, 1.0)
    mid = frame[cols[0.5]].to_numpy(dtype=float) if 0.5 in cols else path
    for q in sorted(cols):
        model = frame[cols[q]].to_numpy(dtype=float)
        ratio = _ratio(measured, q, lead_days) if q != 0.5 else np.ones(len(model))
        if q != 0.5 and len(model):
            # Never narrower than the model's own band at the seam (relative to its median).
            seam_ratio = (model[at_seam] + 1e-9) / (mid[at_seam] + 1e-9)
            ratio = np.maximum(ratio, seam_ratio) if q > 0.5 else np.minimum(ratio, seam_ratio)
        out[cols[q]] = (1 - blend) * model + blend * path * ratio
    out = _sorted_columns(out, cols)
    longest = max(measured, default=0)
    asked = math.ceil(lead_days[-1]) if len(lead_days) else 0
    if not measured:
        notes.append(
            f"long horizon: the history is too short to backtest the long-horizon rule "
            f"(it needs {MIN_TRAIN_DAYS + 1} days); its bands hold the model's width at day "
            f"{MODEL_SPAN.days}"
        )
    elif longest < asked:
        notes.append(
            f"long horizon: bands from backtests at lead days {', '.join(map(str, sorted(measured)))}; "
            f"beyond day {longest} they hold its width, {asked - longest} days short of the "
            f"{asked} asked"
        )
    else:
        notes.append(
            f"long horizon: bands from backtests at lead days {', '.join(map(str, sorted(measured)))}"
        )
    return out, notes


def _ratio(measured: dict[int, np.ndarray], q: float, lead_days: np.ndarray) -> np.ndarray:
    """exp of the q-quantile of the backtest's log errors at each lead (interpolated between
    the measured leads, held beyond them); ones where nothing was measured."""
    if not measured:
        return np.ones(len(lead_days))
    leads = sorted(measured)
    at = np.array([float(np.quantile(measured[d], q)) for d in leads])
    return np.exp(np.interp(lead_days, np.array(leads, dtype=float), at))


def _sorted_columns(frame: pd.DataFrame, cols: dict[float, str]) -> pd.DataFrame:
    """Quantile columns in order at every step (a blend could cross them)."""
    keys = sorted(cols)
    values = np.sort(frame[[cols[k] for k in keys]].to_numpy(dtype=float), axis=1)
    out = frame.copy()
    for j, k in enumerate(keys):
        out[cols[k]] = np.maximum(0.0, values[:, j])
    return out


def _shape_note(rule: _Rule) -> str:
    shape = (
        "weekly shape (median of the history's weeks)"
        if rule.weekly
        else ("daily shape (median of the history's days) by day of week")
    )
    trend = (
        f"a trend of {rule.slope_per_day:+.3g} a day, not extrapolated (it is in the bands)"
        if rule.slope_per_day
        else "no significant trend"
    )
    return (
        f"long horizon: past day {MODEL_SPAN.days} the forecast is the level of the last week "
        f"({rule.level:.4g}), {trend}, times the {shape}"
    )
