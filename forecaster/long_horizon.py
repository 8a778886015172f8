"""Forecasts for long horizons: the level, a damped trend and a robust weekly shape past the
first week, with bands calibrated by lead on the rule's own backtests.

A model chosen by one-day backtests (:mod:`forecaster.selection`) is good for the days
ahead; weeks ahead it mostly repeats the last week, one-off spikes included, with bands as
wide on day 90 as on day 7. For a horizon over :data:`LONG_HORIZON` (the 30- and 90-day
finance runs), the model keeps its first week (:data:`MODEL_SPAN`, over which its bands are
calibrated by lead day) and, after a day of blending, the forecast is

* the **shape**: the median over the history's weeks of each time-of-week slot, each week
  divided by its own mean (at least :data:`MIN_WEEKS` weeks; else the median time-of-day
  profile of the days, times a day-of-week factor), so a spike seen once is not planned
  again;
* times the **level**: the median daily mean of the last week, moved by the **trend** of
  the daily means (Theil-Sen slope over up to eight weeks) where its 90% interval excludes
  zero, damped by :data:`DAMPING` a day
  (the level carries at most ``DAMPING / (1 - DAMPING)`` days of slope, however far
  ahead; 0 by default: the trend is reported, not extrapolated, as measured);
* with **bands** from backtests of this very rule on the series' own history at lead days
  1, 7, 14 and 30 (:data:`BAND_LEADS`; at each origin the rule is fitted on the history
  before it, nothing after): the empirical quantiles of log(actual / forecast) at each lead
  (quantile recalibration by lead, the split-conformal recipe with the lead's errors as
  scores; each tail is its own quantile of the signed errors, so a median that runs high
  or low gets an asymmetric band; :data:`BAND_SCORES` lists the other errors the
  benchmark can calibrate on), interpolated between leads and never narrower than the model's band at the
  seam. Beyond the longest lead the history supports (and past the seam), the band's
  distance from the median in log ratio grows as a power of the lead
  (:func:`beyond_measured`): the growth measured between the two longest leads backtested
  (:func:`growth_exponent`, within 0 and a random walk's 0.5), or :data:`DEFAULT_GROWTH`
  with fewer, and a note says from which lead that rule takes over.

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
DEFAULT_GROWTH = 0.1
"""Exponent of the band's growth with the lead past the longest measured lead, where the
series' backtests measure fewer than two leads: the median, over the groups the rule is
chosen on, of the measured growth of the spread of log errors from lead day 7 to 30
(aws_cloudwatch 0.105, nab_twitter2015 -0.042, nasa_http 0.117; 2026-12-05,
docs/benchmarks.md). A random walk's would be 0.5."""
MIN_BAND_ORIGINS = 3
"""Origins a lead day needs for its backtest errors to set the band there."""
TREND_CONFIDENCE = 0.90
DAMPING = 0.0
"""Daily damping of the trend (0: not extrapolated, 1: a straight line): day h ahead of the
last week's middle the level has moved by the slope times ``sum(DAMPING**i, i=1..h)``.
0 by the long-horizon benchmark of 2026-12-05: 0.5, 0.8 and 0.9 each raised the error of
the median on the groups that confirm (docs/forecasting.md#long-horizons)."""
BAND_SCORES: tuple[str, ...] = ("log", "relative", "level")
"""The backtest errors a band can be calibrated on: ``"log"``, log(actual / forecast)
(the bound is the median times exp of the score's quantile); ``"relative"``, (actual -
forecast) / (forecast + :data:`RELATIVE_FLOOR` x level), the score of ``auto``'s
day-ahead bands; ``"level"``, (actual - forecast) / level (the bound of both is the median
plus the scale times the quantile), the level being the rule's at that origin. ``"log"``
by the long-horizon benchmark of 2026-12-05 (second round): ``"relative"`` was chosen on
the choosing groups and made the confirming ones worse (docs/benchmarks.md)."""
BAND_SCORE = "log"
RELATIVE_FLOOR = 0.1
"""The share of the level under which the forecast is not taken as the scale of a
``"relative"`` error (as ``auto``'s day-ahead bands floor theirs)."""
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
    """The daily means' Theil-Sen slope where its interval excludes zero, else 0."""
    end: pd.Timestamp
    """The first timestamp after the history."""
    step: pd.Timedelta
    ceiling: float = math.inf
    """The largest value of the weeks the shape was taken from: nothing is forecast above
    what those weeks reached, but for the trend's move."""
    damping: float = DAMPING

    def level_at(self, days_ahead: np.ndarray) -> np.ndarray:
        """The level ``days_ahead`` after the history's end: the last week's level (its
        middle, 3.5 days before the end) moved by the damped trend."""
        h = np.maximum(0.0, np.asarray(days_ahead, dtype=float) + 3.5)
        phi = min(max(self.damping, 0.0), 1.0)
        carried = h if phi >= 1.0 else phi * (1.0 - phi**h) / (1.0 - phi)
        return np.maximum(0.0, self.level + self.slope_per_day * carried)

    def predict(self, index: pd.DatetimeIndex) -> np.ndarray:
        """The median path at ``index``."""
        level = max(0.0, self.level)
        slot = _slots(index, self.step, self.weekly)
        factor = self.shape[slot]
        if not self.weekly:
            factor = factor * self.weekday_factor[index.day_of_week]
        flat = np.clip(level * factor, 0.0, self.ceiling)
        if not self.slope_per_day or level <= 0:
            return flat
        ahead = np.asarray((index - self.end) / pd.Timedelta(days=1), dtype=float)
        return flat * self.level_at(ahead) / level


def _slots(index: pd.DatetimeIndex, step: pd.Timedelta, weekly: bool) -> np.ndarray:
    """The slot of each timestamp within the week (or the day), at ``step``."""
    span = pd.Timedelta(days=7 if weekly else 1)
    per = max(1, int(span / step))
    since = np.asarray((index - pd.Timestamp("1970-01-05")) / step, dtype=float)
    return (np.floor(since).astype(np.int64) % per).astype(np.int64)


def fit_rule(y: pd.Series, step: pd.Timedelta, damping: float = DAMPING) -> _Rule | None:
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
    return _Rule(shape, weekly, weekday, max(0.0, level), slope, end, step, ceiling, damping)


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


def _lead_errors(
    y: pd.Series,
    step: pd.Timedelta,
    lead_days: int,
    damping: float = DAMPING,
    score: str = BAND_SCORE,
) -> tuple[np.ndarray, int]:
    """The errors (``score``, one of :data:`BAND_SCORES`) of the rule on ``y``'s own
    history, ``lead_days`` ahead: the day ending ``lead_days`` after each origin, at most
    :data:`ORIGINS_PER_LEAD` origins, each fitted on the history before it only; and how
    many origins gave errors."""
    per_day = max(1, int(pd.Timedelta(days=1) / step))
    n = len(y)
    values = y.to_numpy(dtype=float)
    mean = float(np.nanmean(values)) if np.isfinite(values).any() else math.nan
    eps = max(1e-9, 0.01 * mean) if math.isfinite(mean) else 1e-9
    out: list[np.ndarray] = []
    latest = n - lead_days * per_day
    earliest = MIN_TRAIN_DAYS * per_day
    if latest < earliest:
        return np.array([]), 0
    origins = range(latest, earliest - 1, -max(per_day, (latest - earliest) // ORIGINS_PER_LEAD))
    for o in list(origins)[:ORIGINS_PER_LEAD]:
        rule = fit_rule(y.iloc[:o], step, damping)
        if rule is None:
            continue
        window = slice(o + (lead_days - 1) * per_day, o + lead_days * per_day)
        actual = values[window]
        pred = rule.predict(pd.DatetimeIndex(y.index[window]))
        ok = np.isfinite(actual)
        if not ok.any() or (score != "log" and rule.level <= 0):
            continue
        if score == "log":
            out.append(np.log((actual[ok] + eps) / (pred[ok] + eps)))
        else:
            scale = error_scale(score, pred[ok], rule.level)
            out.append((actual[ok] - pred[ok]) / scale)
    return (np.concatenate(out) if out else np.array([])), len(out)


def error_scale(score: str, forecast: np.ndarray, level: float) -> np.ndarray:
    """The scale a ``"relative"`` or ``"level"`` error is divided by (see
    :data:`BAND_SCORES`)."""
    if score == "relative":
        return np.maximum(forecast, 0.0) + RELATIVE_FLOOR * level
    if score == "level":
        return np.full(np.shape(forecast), level)
    raise ValueError(f"unknown band score {score!r}; use one of {', '.join(BAND_SCORES)}")


def measured_errors(
    y: pd.Series, step: pd.Timedelta, damping: float = DAMPING, score: str = BAND_SCORE
) -> dict[int, np.ndarray]:
    """The rule's backtest errors (``score``) at each of :data:`BAND_LEADS` that at least
    :data:`MIN_BAND_ORIGINS` origins of ``y`` reach."""
    out = {}
    for d in BAND_LEADS:
        errors, origins = _lead_errors(y, step, d, damping, score)
        if origins >= MIN_BAND_ORIGINS and errors.size >= 10:
            out[d] = errors
    return out


def conformal_level(q: float, n: int) -> float:
    """The empirical quantile level that split-conformal prediction takes for a bound at
    ``q`` from ``n`` scores: ceil((n + 1) q) / n above the median (floor((n + 1) q) / n
    below), clipped to [0, 1]."""
    if n <= 0:
        return q
    if q >= 0.5:
        return min(1.0, math.ceil((n + 1) * q - 1e-9) / n)
    return max(0.0, math.floor((n + 1) * q + 1e-9) / n)


def beyond_measured(
    log_ratio: float, lead: np.ndarray, last: float, center: float = 0.0, growth: float = 0.5
) -> np.ndarray:
    """The stated rule past the longest lead any backtest reaches: the band's distance from
    ``center`` (the errors' median there) in log ratio at ``last``, grown as
    (lead / last) ** ``growth`` (0.5: a random walk's spread)."""
    return center + (log_ratio - center) * (np.maximum(lead, last) / last) ** growth


def growth_exponent(measured: dict[int, np.ndarray]) -> float:
    """How the backtests' q0.1-q0.9 spread of log errors grows with the lead: the exponent
    between the two longest measured leads, within [0, 0.5] (never narrowing, never faster
    than a random walk); :data:`DEFAULT_GROWTH` with under two leads measured."""
    if len(measured) < 2:
        return DEFAULT_GROWTH
    a, b = sorted(measured)[-2:]
    spread = [float(np.quantile(measured[d], 0.9) - np.quantile(measured[d], 0.1)) for d in (a, b)]
    if min(spread) <= 0:
        return DEFAULT_GROWTH
    return float(np.clip(math.log(spread[1] / spread[0]) / math.log(b / a), 0.0, 0.5))


def band_log_ratio(
    measured: dict[int, np.ndarray],
    q: float,
    lead_days: np.ndarray,
    seam: float,
    seam_day: float,
    seam_floor: bool = True,
) -> np.ndarray:
    """The q-bound's distance from the median at each lead, in the backtest errors' own
    units (log(q-band / median) for log errors): the backtests' conformal q-quantile at each
    measured lead, one tail at a time, interpolated between leads; never
    narrower than the model's own band (``seam``, its distance at ``seam_day``, itself
    calibrated by the model's backtests at that lead) unless ``seam_floor`` is False; past
    the later of the longest measured lead and ``seam_day``, grown by
    :func:`beyond_measured` at the series' own :func:`growth_exponent`."""
    upper = q > 0.5
    pick = np.maximum if upper else np.minimum
    growth = growth_exponent(measured)
    if not measured:
        return beyond_measured(seam, lead_days, seam_day, 0.0, growth)
    leads = sorted(measured)
    at = np.array(
        [float(np.quantile(measured[d], conformal_level(q, measured[d].size))) for d in leads]
    )
    floor = seam if seam_floor else (-math.inf if upper else math.inf)
    out = pick(np.interp(lead_days, np.array(leads, dtype=float), at), floor)
    anchor = max(float(leads[-1]), seam_day) if seam_floor else float(leads[-1])
    past = lead_days > anchor
    center = float(np.median(measured[leads[-1]]))
    value = float(pick(at[-1], floor))
    out[past] = pick(beyond_measured(value, lead_days[past], anchor, center, growth), floor)
    return out


def long_horizon_frame(
    y: pd.Series,
    frame: pd.DataFrame,
    step: pd.Timedelta,
    quantiles: Sequence[float],
    damping: float = DAMPING,
    score: str = BAND_SCORE,
    seam_floor: bool = True,
) -> tuple[pd.DataFrame, list[str]]:
    """``frame`` (the model's forecast) with everything past :data:`MODEL_SPAN` replaced by
    the long-horizon rule, blended over the day after; the notes say how its bands were
    set. Unchanged, with a note, where the history is under two days. ``score`` and
    ``seam_floor`` are the band's (:func:`band_log_ratio`); the defaults are the
    product's, the others are there to be benchmarked."""
    if score not in BAND_SCORES:
        raise ValueError(f"unknown band score {score!r}; use one of {', '.join(BAND_SCORES)}")
    rule = fit_rule(y, step, damping)
    if rule is None:
        return frame, ["long horizon: under two days of history, the model's forecast is kept"]
    index = pd.DatetimeIndex(frame.index)
    lead_days = np.asarray((index - rule.end) / pd.Timedelta(days=1), dtype=float) + (
        step / pd.Timedelta(days=1)
    )
    path = rule.predict(index)
    if score != "log" and rule.level <= 0:
        score = "log"  # an idle history has no level to scale errors by
    measured = measured_errors(y, step, damping, score)
    cols = {float(c[1:]): c for c in frame.columns}
    model_days = MODEL_SPAN / pd.Timedelta(days=1)
    within = np.flatnonzero(lead_days <= model_days)
    at_seam = int(within[-1]) if within.size else 0
    out = frame.copy()
    blend = np.clip(lead_days - model_days, 0.0, 1.0)
    mid = frame[cols[0.5]].to_numpy(dtype=float) if 0.5 in cols else path
    for q in sorted(cols):
        model = frame[cols[q]].to_numpy(dtype=float)
        if q == 0.5 or not len(model):
            ratio = np.ones(len(model))
        else:
            seam_day = max(1.0, float(lead_days[at_seam]))
            if score != "log":
                scale = error_scale(score, path, rule.level)
                seam = (model[at_seam] - mid[at_seam]) / scale[at_seam]
                far = band_log_ratio(measured, q, lead_days, seam, seam_day, seam_floor)
                out[cols[q]] = (1 - blend) * model + blend * (path + scale * far)
                continue
            seam = math.log((model[at_seam] + 1e-9) / (mid[at_seam] + 1e-9))
            ratio = np.exp(band_log_ratio(measured, q, lead_days, seam, seam_day, seam_floor))
        out[cols[q]] = (1 - blend) * model + blend * path * ratio
    out = _sorted_columns(out, cols)
    asked = math.ceil(lead_days[-1]) if len(lead_days) else 0
    return out, [_shape_note(rule), _band_note(measured, asked)]


def _band_note(measured: dict[int, np.ndarray], asked: int) -> str:
    """How the long-horizon bands were set, and where the stated rule took over."""
    growth = round(growth_exponent(measured), 2)
    if not measured:
        return (
            f"long horizon: the history is too short to backtest the long-horizon rule at "
            f"{MIN_BAND_ORIGINS} origins (it needs {MIN_TRAIN_DAYS + MIN_BAND_ORIGINS} days); "
            f"past day {MODEL_SPAN.days} its bands widen from the model's band at day "
            f"{MODEL_SPAN.days} as (lead / {MODEL_SPAN.days}) ** {growth:g}"
        )
    leads = ", ".join(map(str, sorted(measured)))
    longest = max(max(measured), MODEL_SPAN.days)
    how = "as measured between its two longest leads" if len(measured) >= 2 else "by default"
    if longest < asked:
        return (
            f"long horizon: bands from backtests at lead days {leads}; beyond day {longest} "
            f"they widen as (lead / {longest}) ** {growth:g} ({how}), {asked - longest} days "
            f"short of the {asked} asked"
        )
    return f"long horizon: bands from backtests at lead days {leads}"


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
        f"a trend of {rule.slope_per_day:+.3g} a day damped by {rule.damping:g} a day"
        if rule.slope_per_day and rule.damping > 0
        else "no significant trend"
        if not rule.slope_per_day
        else f"a trend of {rule.slope_per_day:+.3g} a day, not extrapolated"
    )
    return (
        f"long horizon: past day {MODEL_SPAN.days} the forecast is the level of the last week "
        f"({rule.level:.4g}), {trend}, times the {shape}"
    )
