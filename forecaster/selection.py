"""Per-series model selection by rolling-origin backtest, with calibrated quantiles.

:class:`AutoSelector` is the estimator behind ``method='auto'``. On ``fit`` it

1. backtests the cheap candidates (seasonal naive 1 d and 7 d, robust daily and
   weekly profiles, the profile regressions, a recent level and the last value for
   series without a cycle) at up to ``max_origins`` origins one day apart, aligned
   with the end of the history so every backtest forecast starts at the same time
   of day as the real one (never the global model of :mod:`forecaster.global_model`:
   a live cycle forecasts each signal alone, so :func:`auto_candidates` is the one
   list of candidates, for a cycle and a benchmark alike);
2. backtests the slow candidates (statsmodels AutoETS and Theta, gradient boosting,
   Prophet, MSTL) at up to ``slow_origins`` origins on every series, while their
   projected cost fits the per-series ``budget_s``; what was skipped, and why, is
   in the reason;
3. ranks everything by MASE, adjusted by the paired difference to the candidate
   with the most origins on the same days, tries combinations of the best few
   (``combine``: by default the skill-weighted average of the best two and the
   median of the best three, four and five, each quantile's median over members,
   which one member far off the others does not move), and never keeps a choice
   that backtests worse than the daily seasonal naive model on its own origins;
4. refits the winner on the whole history (moved onto the new level first when a
   lasting level shift ends it, see :func:`detect_level_shift`) and keeps its
   backtest residuals as the calibration of its quantiles (split-conformal
   style): per quarter of the first day ahead and per lead day up to
   ``lead_days``, each from the backtests at that lead, held (never extrapolated)
   beyond; in the series' units or relative to the forecast level, whichever
   predicts held-out origins better. The median is the point forecast itself: a
   median residual from a few backtest days is too noisy to correct the model's
   bias with.

With under three weekly cycles of history (:data:`WEEKLY_TEST_BELOW_DAYS`), whether a
weekly pattern is real is decided from the history itself before step 1
(:func:`weekly_pattern`): the weekly candidates stay in play where it is and are left
out where it is not, so that one noisy week is not copied as if it were a cycle.

``choice`` names the rule of step 3: ``lowest`` (the default) as above;
``stable_copy`` or ``stable_median`` score every candidate and combination by its mean
backtest error plus a standard error and keep a robust default unless it is clearly
beaten (:mod:`forecaster.choice`); the floor of the daily seasonal naive model holds for
every rule.

Every decision is recorded in ``reason_`` and ``scores_``. Histories too short to
backtest fall back to the daily seasonal naive model and say so in ``fallback_``.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from forecaster.backtesting import naive_scale, pinball
from forecaster.choice import RULES as CHOICE_RULES
from forecaster.choice import Pool, pick
from forecaster.ensemble import combination_label
from forecaster.errors import BadInputError, TiercastError
from forecaster.estimators import (
    BaseEstimator,
    SeasonalNaive,
    linear_quantiles,
    make,
    register,
    rolling_profile,
)
from forecaster.long_horizon import LONG_HORIZON, MODEL_SPAN
from forecaster.series import parse_duration, steps_per

DAY = pd.Timedelta(days=1)
NAIVE = "seasonal_naive_1d"
"""The floor of every selection: a chosen model must backtest at least as well as this."""

CHEAP_CANDIDATES: tuple[str, ...] = (
    "seasonal_naive_1d",
    "seasonal_naive_7d",
    "seasonal_profile_1d",
    "seasonal_profile_7d",
    "profile_regression_1d",
    "profile_regression_7d",
    "recent_level",
    "last_value",
)
SLOW_CANDIDATES: tuple[str, ...] = ("ets_auto", "theta", "gbm", "prophet", "mstl")
"""Tried after the cheap ones, in about this order of cost, while the fit budget lasts."""

MIN_HISTORY_DAYS: dict[str, float] = {
    "seasonal_naive_1d": 1.0,
    "seasonal_profile_1d": 2.0,
    "seasonal_naive_7d": 7.0,
    "seasonal_median_1d": 2.0,
    "seasonal_profile_7d": 7.0,
    "seasonal_median_7d": 14.0,
    "profile_regression_1d": 3.0,
    "profile_regression_7d": 9.0,
    "profile_mix": 3.0,
    "recent_level": 0.5,
    "last_value": 0.5,
    "gbm": 3.0,
    "global_gbm": 2.0,
    "global_gbm_median": 2.0,
    "prophet": 2.0,
    "ets_auto": 2.0,
    "mstl": 2.0,
    "theta": 2.0,
}
"""History each candidate needs before a backtest origin to be itself (not its fallback)."""

MEDIAN_ONLY: dict[str, str] = {"gbm": "gbm(quantiles=[0.5])"}
"""Candidates that train one model per quantile, as ``auto`` builds its chosen ones: ``auto``
asks only the median of its chosen model (its bands come from the backtests' residuals, see
:meth:`AutoSelector.predict`), and the backtests that chose it scored that median model alone
(``QuantileBoosting.backtest_medians``); the other quantile models were trained for nothing."""

COMBINE_MODES: tuple[str, ...] = ("select", "top", "median")
"""``select``: the best backtest of the single models and the skill-weighted ensembles of
the best few; ``top``: always the ensemble of the best ``ensemble_size`` (forecast
combination); ``median``: as ``select`` with median ensembles of the best three or more."""

TAIL_SCALES: tuple[float, ...] = (1.0, 0.8, 0.65, 0.5, 0.4, 0.3, 0.2, 0.1)
"""Factors on the tail mass beyond a quantile (1 - q above the median, q below) tried in
calibration; the nominal 1.0 comes first so that it wins ties."""

CALIBRATION_QUANTILES = (0.1, 0.9)
"""The lower and upper quantiles whose walk-forward pinball loss sets the tail scales."""


def adjusted_level(q: float, lower_scale: float, upper_scale: float) -> float:
    """The residual quantile level used for forecast quantile ``q``.

    The tail mass beyond ``q`` is multiplied by the scale of its side (below 1
    widens the band), and the level never crosses the median, so the mapping stays
    monotone in ``q``.
    """
    if q > 0.5:
        return float(min(1.0, max(0.5, 1.0 - (1.0 - q) * upper_scale)))
    if q < 0.5:
        return float(max(0.0, min(0.5, q * lower_scale)))
    return q


_FIT_ERRORS = (TiercastError, ValueError, FloatingPointError, np.linalg.LinAlgError)


def autocorrelation(values: np.ndarray, lag: int) -> float:
    """Pearson correlation of the series with itself ``lag`` steps back (NaN pairs dropped)."""
    if lag <= 0 or len(values) <= lag + 2:
        return float("nan")
    a, b = values[lag:], values[:-lag]
    ok = ~(np.isnan(a) | np.isnan(b))
    if ok.sum() < 3 or np.std(a[ok]) == 0 or np.std(b[ok]) == 0:
        return float("nan")
    return float(np.corrcoef(a[ok], b[ok])[0, 1])


WEEKLY_CANDIDATES = frozenset(
    {"seasonal_naive_7d", "seasonal_profile_7d", "seasonal_median_7d", "profile_regression_7d"}
)
"""The candidates that repeat a weekly season (what the weekly-pattern decision keeps or drops)."""

WEEKLY_TEST_BELOW_DAYS = 21.0
"""Histories shorter than this (one or two weekly cycles) test for a weekly pattern; longer
ones keep every weekly candidate in play, ranked by their backtests alone."""

WEEKLY_P_VALUE = 0.05
"""One-sided significance of the week-apart correlation of daily levels that counts as a pattern."""


def weekly_pattern(values: np.ndarray, m_day: int) -> dict[str, Any]:
    """Whether ``values`` (``m_day`` steps a day) show a real weekly pattern, and the evidence.

    Whole days are taken aligned with the end of the history. Two questions, both
    answered on the days that have a day and a week before them:

    * does copying last week forecast better than copying yesterday? The weekly
      naive model's mean absolute error over those days against the daily naive
      model's on the same days and steps (``error_ratio``, below 1 when it does);
    * is that more than chance? Each day's level (its mean, less a linear trend over
      the history) is paired with the level of the same weekday a week before; a
      weekly pattern makes the pairs correlate. ``p_value`` is the one-sided p-value
      of that correlation (Student's t with pairs - 2 degrees of freedom), of the
      values or of their ranks, whichever is smaller: the rank correlation is not
      thrown by one extreme day (a storm, an outage), the values' by a pattern of
      two low days among seven.

    ``found`` when the error ratio is below 1 and the p-value below
    :data:`WEEKLY_P_VALUE`. A paired test of the two models' daily errors alone
    cannot tell with one or two weeks: a weekday/weekend pattern shows in the
    errors of the two days the weekend starts and ends, two of the seven days
    scored (see docs/forecasting.md). Fewer than three pairs: not found.
    """
    days = len(values) // m_day
    out: dict[str, Any] = {
        "found": False,
        "days": 0,
        "error_ratio": math.nan,
        "correlation": math.nan,
        "rank_correlation": math.nan,
        "p_value": math.nan,
    }
    if days < 10:
        return out
    block = np.asarray(values[len(values) - days * m_day :], dtype=float).reshape(days, m_day)
    weekly = np.abs(block[7:] - block[:-7])
    daily = np.abs(block[7:] - block[6:-1])
    both = np.isfinite(weekly) & np.isfinite(daily)
    scored = both.any(axis=1)
    daily_error = float(daily[both].sum())
    out["days"] = int(scored.sum())
    if daily_error > 0:
        out["error_ratio"] = float(weekly[both].sum()) / daily_error
    with np.errstate(all="ignore"):
        observed = np.isfinite(block).sum(axis=1) >= m_day // 2
        level = np.where(
            observed, np.nanmean(np.where(observed[:, None], block, 0.0), axis=1), np.nan
        )
    t = np.arange(days, dtype=float)
    ok = np.isfinite(level)
    if ok.sum() < 3:
        return out
    level = level - np.polyval(np.polyfit(t[ok], level[ok], 1), t)
    now, before = level[7:], level[:-7]
    pair = np.isfinite(now) & np.isfinite(before)
    k = int(pair.sum())
    if k < 3 or np.std(now[pair]) == 0 or np.std(before[pair]) == 0:
        return out
    from scipy import stats

    def one_sided(r: float) -> float:
        stat = r * math.sqrt((k - 2) / max(1e-12, 1.0 - r * r))
        return float(stats.t.sf(stat, k - 2))

    r = float(np.corrcoef(now[pair], before[pair])[0, 1])
    ranks = float(stats.spearmanr(now[pair], before[pair]).statistic)
    out["correlation"] = r
    out["rank_correlation"] = ranks
    out["p_value"] = min(one_sided(r), one_sided(ranks) if math.isfinite(ranks) else 1.0)
    out["found"] = bool(out["error_ratio"] < 1.0 and out["p_value"] < WEEKLY_P_VALUE)
    return out


def weekly_text(evidence: dict[str, Any]) -> str:
    """The weekly-pattern decision in words, for the selection's reason."""
    verdict = "found" if evidence["found"] else "not found"
    return (
        f"weekly pattern {verdict} (weekly/daily naive error {evidence['error_ratio']:.2f} over "
        f"{evidence['days']} days, week-apart correlation of daily levels "
        f"{evidence['correlation']:.2f}, p {evidence['p_value']:.3f})"
    )


def detrended(values: np.ndarray, period: int) -> np.ndarray:
    """Values minus their centred rolling mean over one ``period``.

    A wandering level (a random walk, a trend) correlates with itself at any lag;
    removing it first leaves only what repeats within the period.
    """
    trend = (
        pd.Series(values)
        .rolling(period, center=True, min_periods=max(1, period // 2))
        .mean()
        .to_numpy()
    )
    return values - trend


SLOW_FIT_SECONDS: dict[str, tuple[float, float, float]] = {
    "ets_auto": (0.3, 0.02, 0.0),
    "theta": (0.0, 0.1, 0.0),
    "gbm": (0.0, 0.3, 0.25),
    "prophet": (0.0, 0.5, 0.4),
    "mstl": (0.0, 2.5, 0.0),
}
"""Projected seconds of a slow candidate's backtest on a busy 2-core machine: (once per
backtest, per origin, per origin and further 2,688 steps of history), at 2,688 steps (28 days
of 15-minute history); the statsmodels models see at most 28 days. AutoETS chooses and fits
its model once and then only smooths at the other origins; Theta's backtests skip its
prediction intervals. Measured on the benchmark traces on 2026-12-01 (4 origins at 14, 28 and
56 days, under load); only used to project costs against the budget, never timed at run time.
gbm's entry is still scikit-learn's, 2 to 2.5x LightGBM's: at LightGBM's cost gbm would be
backtested on histories of a month and more, which on 2026-12-06 (all the history, a one-off
run with gbm's projected cost set to zero, compared by `forecaster.benchmarks.compare`) made
the choosing half better (0.731 to 0.709) and the confirming half worse (0.702 to 0.733,
nyc_taxi and azure_vm2019 +0.077 each)."""

REFERENCE_STEPS = 2688
WINDOW_28D = pd.Timedelta(days=28)
STATISTICAL = frozenset({"ets_auto", "theta", "mstl"})


def projected_backtest_seconds(name: str, origins: Sequence[int], step: pd.Timedelta) -> float:
    """Projected seconds to backtest ``name`` at ``origins`` (histories of that many steps)."""
    once, per_origin, per_more = SLOW_FIT_SECONDS.get(name, (0.0, 1.0, 0.0))
    cap = int(WINDOW_28D / step) if name in STATISTICAL else None

    def units(steps: int) -> float:
        return (min(steps, cap) if cap else steps) / REFERENCE_STEPS

    total = once * min(1.0, units(min(origins))) if origins else 0.0
    for steps in origins:
        total += per_origin * min(1.0, units(steps)) + per_more * max(0.0, units(steps) - 1.0)
    return total


SHIFT_MIN_HOURS = 6
"""A level shift counts once it has lasted this long (shorter runs are bursts)..."""
SHIFT_MIN_HOURS_NEW_RANGE = 3
"""...or this long for a fall whose every hour lies below the lowest value of all the
history before it: a floor never seen before is load that left (a job ended, traffic
moved, a group scaled in), while a rise of a few hours above every past value is as
likely a burst that passes (the hours of any upward run still have to reach
:data:`SHIFT_MIN_HOURS`)."""
SHIFT_MAX_DAYS = 3
"""Beyond this the seasonal medians have mostly moved onto the new level themselves."""
SHIFT_RELATIVE = 0.2
"""Smallest lasting change, relative to the usual level, treated as a level shift."""
SHIFT_TYPICAL = 4.0
"""...and it must also exceed this many times the series' usual hourly deviation."""


def detect_level_shift(values: np.ndarray, m_day: int) -> tuple[int, float, float] | None:
    """A lasting step change at the end of ``values``: (start index, factor, offset), or None.

    Every hour's median deviation from the honest daily profile (the median of the
    same phase over the 7 days before) is compared with the series' usual hourly
    deviation over the two weeks before the last two days. A shift is a run of
    hours, ending now and lasting at least :data:`SHIFT_MIN_HOURS` (at most
    :data:`SHIFT_MAX_DAYS`; :data:`SHIFT_MIN_HOURS_NEW_RANGE` for a fall below every
    earlier value), all off in the same direction by more than
    :data:`SHIFT_TYPICAL` times the usual deviation and more than
    :data:`SHIFT_RELATIVE` of the usual level. The new level is measured against the
    same hours of the last day before the run (:func:`_day_before`), or against the
    profile when there is no such day or it stood within :data:`SHIFT_RELATIVE` of the
    new level already (the step came before it). It is a factor on the old for a
    non-negative series (offset 0), otherwise an offset (factor 1).
    """
    n = len(values)
    hour = max(1, m_day // 24)
    blocks = n // hour
    if n < 4 * m_day or blocks < 24 * 4:
        return None
    profile = rolling_profile(values, m_day, 7)
    tail = slice(n - blocks * hour, n)
    dev = (values[tail] - profile[tail]).reshape(blocks, hour)
    with np.errstate(all="ignore"):
        observed = np.isfinite(dev).any(axis=1)
        hourly = np.where(observed, np.nanmedian(np.where(np.isfinite(dev), dev, 0.0), axis=1), 0.0)
    hourly[~observed] = np.nan
    per_day = 24
    usual = hourly[-16 * per_day : -2 * per_day]
    usual = np.abs(usual[np.isfinite(usual)])
    level = profile[-7 * m_day :]
    level = np.abs(level[np.isfinite(level)])
    if usual.size < per_day or level.size == 0:
        return None
    threshold = max(
        SHIFT_TYPICAL * float(np.median(usual)), SHIFT_RELATIVE * float(np.median(level))
    )
    if not threshold > 0:
        return None
    sign = np.sign(hourly[-1]) if np.isfinite(hourly[-1]) else 0.0
    run = 0
    for h in hourly[::-1]:
        if not np.isfinite(h) or np.sign(h) != sign or abs(h) <= threshold:
            break
        run += 1
    if sign == 0 or run > SHIFT_MAX_DAYS * per_day:
        return None
    start = n - run * hour
    if run < SHIFT_MIN_HOURS and not (
        sign < 0 and run >= SHIFT_MIN_HOURS_NEW_RANGE and _below_floor(values, start, hour)
    ):
        return None
    recent = values[start:]
    base = _day_before(values, start, m_day)
    if base is None or not _steps_from(recent, base, hour, SHIFT_RELATIVE * np.median(level)):
        base = profile[start:]  # the step came before the day before, or there is no such day
    ok = np.isfinite(recent) & np.isfinite(base)
    if ok.sum() < hour:
        return None
    recent, base = recent[ok], base[ok]
    offset = float(np.median(recent - base))
    if np.nanmin(values) >= 0 and float(np.median(base)) > 0:
        factor = float(np.clip(np.median(recent) / np.median(base), 0.05, 20.0))
        # A step that lifts the troughs more than the peaks (or the reverse) is an
        # offset, not a factor: keep whichever maps the old shape onto the hours
        # since the step more closely.
        scaled = float(np.mean(np.abs(recent - factor * base)))
        shifted = float(np.mean(np.abs(recent - np.maximum(base + offset, 0.0))))
        if scaled <= shifted:
            return start, factor, 0.0
    return start, 1.0, offset


def _day_before(values: np.ndarray, start: int, m_day: int) -> np.ndarray | None:
    """The step's reference: for every step from ``start`` on, the value at the same phase
    of the last day before ``start`` (None when the history has no whole day before it).

    A step is measured from where the series stood just before it, not from the median
    of the week: when the days before the step stood above the week's median (a busy
    spell, then the fall), a factor against the median leaves those days above the new
    level once the history is moved onto it."""
    if start < m_day:
        return None
    day = values[start - m_day : start]
    if not np.isfinite(day).any():
        return None
    return day[np.arange(len(values) - start) % m_day]


def _steps_from(recent: np.ndarray, base: np.ndarray, hour: int, least: float) -> bool:
    """Whether ``recent`` stands more than ``least`` off ``base`` (the median difference over
    at least an hour of steps observed in both)."""
    ok = np.isfinite(recent) & np.isfinite(base)
    return bool(ok.sum() >= hour and abs(float(np.median(recent[ok] - base[ok]))) > least)


def _below_floor(values: np.ndarray, start: int, hour: int) -> bool:
    """Whether every hour from ``start`` on (its median) lies below the lowest value of
    the history before ``start``."""
    before = values[:start]
    before = before[np.isfinite(before)]
    recent = values[start : start + (len(values) - start) // hour * hour].reshape(-1, hour)
    if before.size == 0 or recent.size == 0:
        return False
    with np.errstate(all="ignore"):
        medians = np.nanmedian(recent, axis=1)
    return bool(np.isfinite(medians).all() and (medians < before.min()).all())


PER_ORIGIN = frozenset(
    {*CHEAP_CANDIDATES, "seasonal_median_1d", "seasonal_median_7d", "profile_mix", "gbm", "mstl"}
)
"""Candidates whose backtest forecast at an origin is a function of the history before it
alone (a refit there, or its exact shortcut): :data:`PREFIX_CACHE` may serve it. Not AutoETS
and Theta, whose backtests hold the model fitted at the oldest origin, nor Prophet."""


class PrefixCache:
    """Backtest rows of the :data:`PER_ORIGIN` candidates by the history they were fitted on,
    the ``size`` most recent, kept for this process.

    Fits of one series a day apart (the growth backtest's daily refreshes, the benchmark's
    daily origins on all the history) backtest the same candidates at the same origins on
    the same history; a row taken from here is the row a refit would give (the key holds
    the candidate, the steps forecast, the origin and a digest of the history before it,
    with its start and step). A row is a day of steps (a week for the slow candidates), so
    2,048 rows of 5-minute forecasts hold at most about 33 MB, and a few fits' worth.
    """

    def __init__(self, size: int = 2048) -> None:
        self.size = size
        self.rows: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self.hits = 0

    def get(self, key: tuple) -> np.ndarray | None:
        row = self.rows.get(key)
        if row is not None:
            self.rows.move_to_end(key)
            self.hits += 1
        return row

    def put(self, key: tuple, row: np.ndarray) -> None:
        row.setflags(write=False)
        self.rows[key] = row
        while len(self.rows) > self.size:
            self.rows.popitem(last=False)

    def clear(self) -> None:
        self.rows.clear()
        self.hits = 0


PREFIX_CACHE = PrefixCache()


def auto_candidates(
    selector: AutoSelector, weekly: dict[str, Any] | None = None
) -> tuple[str, ...]:
    """The cheap candidates ``selector`` backtests for a series: its ``candidates``, less
    the weekly ones where ``weekly`` (:func:`weekly_pattern`'s evidence) found no weekly
    cycle (unless nothing else is left). The slow ones follow in ``slow_candidates``.

    The one list for a live cycle, the nightly refit, ``tiercast backtest`` and
    ``tiercast bench-forecast``: no fleet candidate (the global model) is ever added,
    since a cycle forecasts each signal alone, so the benchmarks score what a cycle gets.
    """
    candidates = tuple(selector.candidates)
    if weekly is not None and not weekly["found"]:
        kept = tuple(c for c in candidates if c not in WEEKLY_CANDIDATES)
        candidates = kept or candidates
    return candidates


class AutoSelector(BaseEstimator):
    """Backtest-selected, conformally calibrated forecaster; see the module docstring."""

    name = "auto"
    residuals_: np.ndarray
    calibration_: str
    shift_: tuple[int, float, float] | None
    weekly_: dict[str, Any] | None
    """The weekly-pattern decision of a short history (:func:`weekly_pattern`); None when
    the history was long enough not to need one."""
    calibrated_days_: int
    lead_steps_: int
    _memo: dict[str, tuple[tuple[int, ...], np.ndarray]] | None = None
    _prefix: dict[int, tuple[int, int, bytes]] | None = None
    """This fit's history before each backtest origin, by digest (:meth:`_prefix_key`)."""

    def __init__(
        self,
        candidates: tuple[str, ...] = CHEAP_CANDIDATES,
        slow_candidates: tuple[str, ...] = SLOW_CANDIDATES,
        slow_above_mase: float = 0.0,
        max_origins: int = 14,
        min_origins: int = 2,
        slow_origins: int = 7,
        ensemble_size: int = 5,
        weight_power: float = 2.0,
        backtest_horizon: str = "1d",
        buckets: int = 4,
        budget_s: float = 1.5,
        lead_days: int = 7,
        level_shifts: bool = True,
        combine: str = "median",
        recency_halflife_days: float = 0.0,
        choice: str = "lowest",
    ) -> None:
        self.candidates = candidates
        self.slow_candidates = slow_candidates
        self.slow_above_mase = slow_above_mase
        self.max_origins = max_origins
        self.min_origins = min_origins
        self.slow_origins = slow_origins
        self.ensemble_size = ensemble_size
        self.weight_power = weight_power
        self.backtest_horizon = backtest_horizon
        self.buckets = buckets
        self.budget_s = budget_s
        self.lead_days = lead_days
        self.level_shifts = level_shifts
        self.combine = combine
        self.recency_halflife_days = recency_halflife_days
        self.choice = choice

    def label(self) -> str:
        return getattr(self, "chosen_", "auto")

    # -- fitting -------------------------------------------------------------------

    def _backtest(
        self, name: str, y: pd.Series, origins: list[int], horizon: int
    ) -> np.ndarray | None:
        """Median forecasts (origins, horizon) of ``name`` refitted at each origin; None on failure.

        The slow candidates forecast ``lead_days`` ahead at once (the fits dominate
        their cost, not the days forecast) and are kept for this fit, so that
        calibrating the chosen model per lead day does not fit them again at the same
        origins.
        """
        memo = self._memo
        if memo is not None and name in memo:
            done, result = memo[name]
            if done[: len(origins)] == tuple(origins) and result.shape[1] >= horizon:
                return result[: len(origins), :horizon]
        steps = horizon
        keep = memo is not None and name in self.slow_candidates
        if keep:
            steps = max(horizon, self.lead_days * steps_per(DAY, self.step_))
        try:
            result = self._shared_backtest(name, y, origins, steps)
        except _FIT_ERRORS:
            return None
        if keep and memo is not None:
            memo[name] = (tuple(origins), result)
        return result[:, :horizon]

    def _shared_backtest(
        self, name: str, y: pd.Series, origins: list[int], steps: int
    ) -> np.ndarray:
        """``make(name).backtest_medians(y, origins, steps)``, each origin's row taken from
        :data:`PREFIX_CACHE` where this process has backtested ``name`` on the same history
        before that origin (same values, start and step), fitted only where it has not."""
        if name not in PER_ORIGIN or not len(origins) or self._prefix is None:
            return make(name).backtest_medians(y, origins, steps)
        keys = [self._prefix_key(name, y, o, steps) for o in origins]
        rows = [PREFIX_CACHE.get(k) for k in keys]
        missing = [i for i, row in enumerate(rows) if row is None]
        if missing:
            fresh = make(name).backtest_medians(y, [origins[i] for i in missing], steps)
            for j, i in enumerate(missing):
                rows[i] = fresh[j].copy()
                PREFIX_CACHE.put(keys[i], fresh[j].copy())
        return np.stack(rows)  # type: ignore[arg-type]

    def _prefix_key(self, name: str, y: pd.Series, origin: int, steps: int) -> tuple:
        """What a per-origin backtest row depends on: the candidate, the steps forecast and
        the history before ``origin`` (its start, step and values, by digest)."""
        prefix = self._prefix if self._prefix is not None else {}
        if origin not in prefix:
            values = np.ascontiguousarray(y.to_numpy(dtype=float)[:origin])
            digest = hashlib.blake2b(values.tobytes(), digest_size=20).digest()
            prefix[origin] = (int(y.index[0].value), int(self.step_.value), digest)
        return (name, steps, origin, *prefix[origin])

    def check_settings(self) -> None:
        if self.combine not in COMBINE_MODES:
            raise BadInputError(
                f"auto: combine must be one of {', '.join(COMBINE_MODES)}, not {self.combine!r}"
            )
        if self.choice != "lowest" and self.choice not in CHOICE_RULES:
            raise BadInputError(
                f"auto: choice must be lowest or one of {', '.join(CHOICE_RULES)}, "
                f"not {self.choice!r}"
            )

    def fit(self, history: pd.Series) -> AutoSelector:
        self.check_settings()
        self.choice_note_ = ""
        self._memo = {}
        self._prefix = {}
        try:
            fitted = self._fit(history)
        finally:
            self.__dict__.pop("_memo", None)  # backtests of this fit only; never stored
            self.__dict__.pop("_prefix", None)
        fitted._keep_live_median()
        return fitted

    def _keep_live_median(self) -> None:
        """Keep the fitted model's median over the leads :meth:`live_error` scores (those
        of the residuals), so that a stored model's drift check reads it instead of
        rebuilding the model's state on its old window each cycle (for AutoETS and Theta,
        a quarter of a warm cycle): the same numbers, computed once per fit (test)."""
        frame = self.model_.predict(self._live_width(), [0.5])
        self.live_median_ = np.asarray(frame.to_numpy()[:, 0], dtype=float)

    def _live_width(self) -> int:
        """The most leads :meth:`live_error` scores: the calibrated ones (at least one)."""
        return max(self.residuals_.shape[1], 1)

    def _fit(self, history: pd.Series) -> AutoSelector:
        started = time.perf_counter()
        y = self._prepare(history)
        values = y.to_numpy(dtype=float)
        n = len(values)
        m_day = steps_per(DAY, self.step_)
        horizon = steps_per(parse_duration(self.backtest_horizon), self.step_)
        self.scale_ = naive_scale(values, m_day)
        self.level_ = float(np.nanmean(np.abs(values)))
        self.seasonality_ = {
            "daily_acf": autocorrelation(detrended(values, m_day), m_day),
            "weekly_acf": autocorrelation(detrended(values, 7 * m_day), 7 * m_day),
        }
        origins = [n - horizon - k * m_day for k in range(self.max_origins)]
        origins = [o for o in origins if o >= max(2, m_day // 2)]
        actual = np.array([values[o : o + horizon] for o in origins]).reshape(len(origins), horizon)

        self.weekly_ = None
        if n < WEEKLY_TEST_BELOW_DAYS * m_day:
            self.weekly_ = weekly_pattern(values, m_day)
        candidates = auto_candidates(self, self.weekly_)
        self.considered_ = (*candidates, *self.slow_candidates)
        points: dict[str, np.ndarray] = {}
        skipped: list[str] = []
        for name in candidates:
            need = math.ceil(MIN_HISTORY_DAYS.get(name, 1.0) * m_day)
            usable = [o for o in origins if o >= need]
            if len(usable) < self.min_origins:
                skipped.append(name)
                continue
            result = self._backtest(name, y, usable, horizon)
            if result is not None:
                points[name] = result
        if not points:
            return self._fall_back(
                y, f"{(y.index[-1] - y.index[0])} of history is too short to backtest"
            )

        # Every candidate is scored on its own origins against the reference model
        # (the one with the most origins) on those same origins, so a model that needs
        # more history is neither excluded nor judged on a different set of days: its
        # score is the reference's MASE over all origins plus their paired difference
        # on the shared ones. (A ratio to the reference blew up where the shared days
        # were flat and the reference's error on them near zero.)
        reference = max(points, key=lambda k: len(points[k]))
        ref_points = points[reference]
        ref_mase = self._mase(actual[: len(ref_points)], ref_points)

        def relative(candidate: np.ndarray) -> float:
            k = len(candidate)
            ref = self._mase(actual[:k], ref_points[:k])
            mine = self._mase(actual[:k], candidate)
            return max(0.0, ref_mase + mine - ref) if math.isfinite(ref) else mine

        scores = {name: relative(p) for name, p in points.items() if np.isfinite(p).all()}
        best_cheap = min(scores.values(), default=math.inf)
        tried_slow, over_budget = self._slow(y, origins, horizon, m_day, best_cheap, points)
        for name in tried_slow:
            if name in points and np.isfinite(points[name]).all():
                scores[name] = relative(points[name])
        ranking = sorted(scores, key=lambda k: scores[k])
        chosen, chosen_points, weights = ranking[0], points[ranking[0]], {ranking[0]: 1.0}
        pool = Pool.of(points, scores, actual, self.scale_)  # for a choice rule, with combinations

        # Skill-weighted ensembles of the best few, on the origins their members share.
        for size in range(2, min(self.ensemble_size, len(ranking)) + 1):
            top = ranking[:size]
            k = min(len(points[name]) for name in top)
            w = np.array([1.0 / max(scores[name], 1e-9) ** self.weight_power for name in top])
            w = w / w.sum()
            median = self.combine == "median" and size >= 3
            if median:
                blend = np.median(np.stack([points[name][:k] for name in top]), axis=0)
            else:
                blend = sum(wi * points[name][:k] for wi, name in zip(w, top, strict=True))
            label = combination_label(top, "median" if median else "mean")
            scores[label] = relative(blend)
            pool.add(label, blend, dict(zip(top, w.tolist(), strict=True)))
            forced = self.combine == "top" and size == min(self.ensemble_size, len(ranking))
            if forced or scores[label] < scores[chosen]:
                chosen, chosen_points = label, blend
                weights = dict(zip(top, w.tolist(), strict=True))

        if self.choice != "lowest":  # forecaster.choice: penalized, shrunk to a default
            chosen, chosen_points, weights, self.choice_note_ = pick(self.choice, pool)
            scores.setdefault(chosen, relative(chosen_points))
        self.guard_ = ""
        naive = points.get(NAIVE)
        if naive is None:  # the floor is checked even when it is not a candidate
            naive = self._backtest(NAIVE, y, origins[: len(chosen_points)], horizon)
        if naive is not None and chosen != NAIVE:
            # Never use a model that backtests worse than repeating yesterday, judged
            # on the origins both were backtested on (the naive model needs a day of
            # history, so a short history may give it fewer origins than the choice).
            k = min(len(chosen_points), len(naive))
            if self._mase(actual[:k], chosen_points[:k]) > self._mase(actual[:k], naive[:k]):
                self.guard_ = f"{chosen} backtested worse than {NAIVE} on its {k} origins"
                chosen, chosen_points, weights = NAIVE, naive[:k], {NAIVE: 1.0}
                scores.setdefault(NAIVE, relative(naive[:k]))

        common = len(ref_points)
        self.chosen_ = chosen
        self.weights_ = weights
        self.scores_ = {k: round(float(v), 4) for k, v in scores.items()}
        self.backtest_mase_ = float(scores[chosen])
        self.origins_ = len(chosen_points)
        self._calibrate(actual[: len(chosen_points)], chosen_points)
        self._calibrate_leads(y, origins[: len(chosen_points)], m_day)
        self.history_steps_ = n
        self.shift_ = detect_level_shift(values, m_day) if self.level_shifts else None
        self.model_ = self._build(self._shifted_history(y))
        self.budget_note_ = f"slow-candidate budget {self.budget_s:g} s (projected)" + (
            f"; over budget, skipped {', '.join(over_budget)}" if over_budget else ""
        )
        self.fit_seconds_ = time.perf_counter() - started
        self.reason_ = self._explain(ranking, skipped, tried_slow, common)
        return self

    def _slow(
        self,
        y: pd.Series,
        origins: list[int],
        horizon: int,
        m_day: int,
        best_cheap: float,
        points: dict[str, np.ndarray],
    ) -> tuple[list[str], list[str]]:
        """Backtest the slow candidates while the budget lasts; (tried, skipped for time).

        The cost of a candidate is projected from :data:`SLOW_FIT_SECONDS` for the
        histories it would see at its origins; one that would overrun what is left
        of ``budget_s`` is skipped. Projected, not measured, so that refitting the
        same history always makes the same choice, however busy the machine is.
        """
        tried: list[str] = []
        over: list[str] = []
        if best_cheap < self.slow_above_mase:
            return tried, over
        left = self.budget_s
        for name in self.slow_candidates:
            need = math.ceil(MIN_HISTORY_DAYS.get(name, 1.0) * m_day)
            usable = [o for o in origins[: self.slow_origins] if o >= need]
            if len(usable) < self.min_origins:
                continue
            cost = projected_backtest_seconds(name, usable, self.step_)
            if cost > left:
                over.append(f"{name} (~{cost:.1f} s)")
                continue
            left -= cost
            tried.append(name)
            result = self._backtest(name, y, usable, horizon)
            if result is not None:
                points[name] = result
        return tried, over

    def _calibrate_leads(self, y: pd.Series, origins: list[int], m_day: int) -> None:
        """Residuals of the chosen model per lead time, up to ``lead_days`` days ahead.

        The chosen members are backtested again from the same origins over
        ``lead_days`` days; origin k (k days before the newest) sees lead days 1 to
        k + 1, so every lead day that some origin reaches gets residuals from the
        backtests at that lead. Lead days no origin reaches keep the width of the
        last calibrated day (see :meth:`horizon_notes`).
        """
        day1 = self.residuals_
        self.lead_steps_ = day1.shape[1] if day1.ndim == 2 and day1.shape[1] else m_day
        self.residual_origins_ = list(origins)
        self.calibrated_days_ = 1 if np.isfinite(day1).any() else 0
        if self.lead_days <= 1 or self.calibration_ == "model" or not origins:
            return
        values = y.to_numpy(dtype=float)
        n = len(values)
        steps = self.lead_days * m_day
        point = np.zeros((len(origins), steps))
        for name, w in self.weights_.items():
            result = self._backtest(name, y, origins, steps)
            if result is None:
                return  # keep the day-1 residuals
            point += w * result
        actual = np.full((len(origins), steps), np.nan)
        for i, o in enumerate(origins):
            seen = values[o : min(o + steps, n)]
            actual[i, : len(seen)] = seen
        res = actual - point
        if self.calibration_ == "relative":
            res = res / self._denominator(point)
        res[:, : day1.shape[1]] = day1[:, : min(day1.shape[1], steps)]
        self.residuals_ = res
        self.lead_steps_ = m_day
        self.calibrated_days_ = self._count_calibrated(res)

    @staticmethod
    def _min_block(m_day: int) -> int:
        """Residuals a lead day needs to be calibrated on its own: two days' worth of origins."""
        return max(10, 2 * m_day)

    def _shifted_history(self, y: pd.Series) -> pd.Series:
        """The history with the part before a detected lasting level shift moved onto the new level.

        The chosen models then forecast the shape they learned at the level the
        series has now, instead of the median of days that no longer apply; the
        backtest residuals of the days since the shift are dropped (they measure the
        shift, not the model) and absolute ones are rescaled to the new level.
        """
        if self.shift_ is None:
            return y
        start, factor, offset = self.shift_
        values = y.to_numpy(dtype=float).copy()
        values[:start] = values[:start] * factor + offset
        if self.nonnegative_:
            values[:start] = np.maximum(values[:start], 0.0)
        res = self.residuals_
        if res.size:
            res = res.copy()
            at = np.array(self.residual_origins_)[:, None] + np.arange(res.shape[1])[None, :]
            res[at >= start] = np.nan
            if self.calibration_ == "absolute":
                res = res * factor
            if np.isfinite(res).any():
                self.residuals_ = res
                self.calibrated_days_ = self._count_calibrated(res)
        return pd.Series(values, index=y.index, name=y.name)

    def _count_calibrated(self, res: np.ndarray) -> int:
        m: int = self.lead_steps_ if hasattr(self, "lead_steps_") else int(res.shape[1])
        days = max(1, -(-res.shape[1] // m))
        calibrated = [
            int(np.isfinite(res[:, d * m : (d + 1) * m]).sum()) >= self._min_block(m)
            for d in range(days)
        ]
        return sum(calibrated) or int(np.isfinite(res).any())

    def _mase(self, actual: np.ndarray, point: np.ndarray) -> float:
        """MASE over backtest origins (row 0 the newest), each origin's weight halved
        every ``recency_halflife_days`` further back when that is set (0: equal)."""
        err = np.abs(actual - point)
        if not np.isfinite(err).any():
            return float("inf")
        if self.recency_halflife_days <= 0 or err.ndim != 2:
            return float(np.nanmean(err) / self.scale_)
        w = 0.5 ** (np.arange(err.shape[0]) / self.recency_halflife_days)
        ok = np.isfinite(err)
        per = np.where(ok, err, 0.0).sum(axis=1)
        cnt = ok.sum(axis=1)
        return float((w * per).sum() / max((w * cnt).sum(), 1e-12) / self.scale_)

    def _build(self, y: pd.Series) -> BaseEstimator:
        names = tuple(self.weights_)
        specs = names
        if np.isfinite(self.residuals_).any():  # only the median is asked of it (predict)
            specs = tuple(MEDIAN_ONLY.get(name, name) for name in names)
        if len(specs) == 1:
            return make(specs[0]).fit(y)
        from forecaster.ensemble import Ensemble

        return Ensemble(
            members=specs,
            weights=tuple(self.weights_[k] for k in names),
            combine="median" if self.chosen_.startswith("median(") else "mean",
        ).fit(y)

    def _fall_back(self, y: pd.Series, why: str) -> AutoSelector:
        self.fallback_ = f"{why}; daily seasonal naive used"
        self.chosen_ = "seasonal_naive_1d"
        self.weights_ = {"seasonal_naive_1d": 1.0}
        self.scores_ = {}
        self.backtest_mase_ = float("nan")
        self.origins_ = 0
        self.residuals_ = np.empty((0, 0))
        self.calibration_ = "model"
        self.tail_scales_ = (1.0, 1.0)
        self.calibrated_days_ = 0
        self.shift_ = None
        self.guard_ = ""
        self.model_ = SeasonalNaive(season="1d").fit(y)
        self.reason_ = f"auto: {self.fallback_}"
        return self

    def _denominator(self, point: np.ndarray) -> np.ndarray:
        """Scale of a relative residual: the forecast level, floored at a tenth of the mean level."""
        return np.maximum(point, 0.0) + 0.1 * self.level_ + 1e-12

    def _calibrate(self, actual: np.ndarray, point: np.ndarray) -> None:
        """Keep backtest residuals, absolute or relative, and the tail scales of their quantiles.

        Both choices are made walking forward over the backtest origins (rows newest
        first): each origin is forecast with the residuals of the origins before it
        only, as the live forecast will be. Residuals pooled from a few days
        understate the spread of a new day when the series drifts (a growing
        series sits above every day it was calibrated on) or shifts level; the
        walk-forward pinball loss sees exactly that and picks a wider tail, while a
        stable series keeps the nominal one.
        """
        absolute = actual - point
        modes = {"absolute": absolute}
        if self.nonnegative_:
            modes["relative"] = absolute / self._denominator(point)
        self.calibration_ = "absolute"
        self.tail_scales_ = (1.0, 1.0)
        if len(actual) >= 3:
            best = math.inf
            for mode, res in modes.items():
                loss, scales = self._walk_forward(actual, point, res, mode == "relative")
                if loss < best:
                    best, self.calibration_, self.tail_scales_ = loss, mode, scales
        self.residuals_ = modes[self.calibration_]

    def _walk_forward(
        self, actual: np.ndarray, point: np.ndarray, res: np.ndarray, relative: bool
    ) -> tuple[float, tuple[float, float]]:
        """Walk-forward pinball loss of one residual kind and its best (lower, upper) tail scales."""
        q_lo, q_hi = CALIBRATION_QUANTILES
        levels = [adjusted_level(q_lo, a, 1.0) for a in TAIL_SCALES]
        levels += [0.5] + [adjusted_level(q_hi, 1.0, a) for a in TAIL_SCALES]
        n = len(TAIL_SCALES)
        losses = np.zeros(len(levels))
        targets = np.array([q_lo] * n + [0.5] + [q_hi] * n)
        # Oldest first; the first two origins only train.
        rows = list(range(len(actual)))[::-1]
        for i in range(2, len(rows)):
            test, train = rows[i], rows[:i]
            if not np.isfinite(actual[test]).any():
                continue
            off = self._offsets(res[train], levels)[0]
            if relative:
                off = off * self._denominator(point[test])[:, None]
            fc = point[test][:, None] + off
            losses += np.nan_to_num(np.nanmean(pinball(actual[test][:, None], fc, targets), axis=0))
        lo, hi = int(np.argmin(losses[:n])), int(np.argmin(losses[n + 1 :]))
        total = float(losses[lo] + losses[n] + losses[n + 1 + hi])
        return total, (float(TAIL_SCALES[lo]), float(TAIL_SCALES[hi]))

    def _offsets(self, residuals: np.ndarray, qs: Sequence[float]) -> np.ndarray:
        """Residual quantiles per horizon bucket, broadcast to shape (1, width, len(qs)).

        The first lead day is split into ``buckets`` buckets; every later lead day is
        one bucket of its own, calibrated from the backtests at that lead. A later
        day with too few residuals holds the offsets of the day before it.

        The median's offset is zero: the median is the model's own point forecast, since
        the median residual of a couple of weeks of backtest days is too noisy a bias
        correction (it cost accuracy on the benchmark and on held-out windows; see
        docs/benchmarks.md). Only ``q == 0.5`` maps to the median level (see
        :func:`adjusted_level`).
        """
        width = residuals.shape[1]
        m = min(getattr(self, "lead_steps_", width) or width, width)
        out = np.zeros((width, len(qs)))
        first = residuals[:, :m]
        everything = first[np.isfinite(first)]
        buckets = max(1, min(self.buckets, m))
        edges = np.linspace(0, m, buckets + 1).astype(int)
        for b in range(buckets):
            block = first[:, edges[b] : edges[b + 1]]
            block = block[np.isfinite(block)]
            if block.size < 10:
                block = everything
            if block.size:
                out[edges[b] : edges[b + 1]] = linear_quantiles(block, qs)
        for start in range(m, width, m):
            stop = min(start + m, width)
            block = residuals[:, start:stop]
            block = block[np.isfinite(block)]
            if block.size >= self._min_block(m):
                out[start:stop] = linear_quantiles(block, qs)
            else:  # not reached by enough backtests: hold the width of the day before
                out[start:stop] = out[start - 1]
        out[:, [i for i, q in enumerate(qs) if q == 0.5]] = 0.0
        return out[None, :, :]

    def horizon_notes(self, horizon: int) -> list[str]:
        """What a forecast ``horizon`` steps ahead should say about how its bands were set."""
        self._check_fitted()
        notes = []
        m = getattr(self, "lead_steps_", 0)
        days = getattr(self, "calibrated_days_", 0)
        if m and self.calibration_ != "model":
            asked = -(-horizon // m)
            # Past the model's span of a long horizon the long-horizon rule sets the bands
            # (forecaster.long_horizon), and its own note says how.
            held_to = min(asked, MODEL_SPAN.days) if asked > LONG_HORIZON.days else asked
            if held_to > days:
                upto = f" up to day {held_to}" if held_to < asked else ""
                notes.append(
                    f"quantiles beyond lead day {days} hold the width of day {days}{upto}: "
                    f"the backtests of this series reach {days} of the {asked} days asked"
                )
        if getattr(self, "shift_", None) is not None:
            notes.append(self._shift_text())
        return notes

    def _shift_text(self) -> str:
        start, factor, offset = self.shift_  # type: ignore[misc]
        hours = (self.history_steps_ - start) * (self.step_ / pd.Timedelta(hours=1))
        change = f"x{factor:.2f}" if offset == 0 else f"{offset:+.3g}"
        return (
            f"level shift over the last {hours:.0f} h ({change}): "
            "the history before it was moved onto the new level"
        )

    def _explain(self, ranking: list[str], skipped: list[str], slow: list[str], common: int) -> str:
        shown = ", ".join(f"{k} {self.scores_[k]:.2f}" for k in ranking[:4] if k != self.chosen_)
        acf = self.seasonality_["daily_acf"]
        cycle = (
            f"daily autocorrelation {acf:.2f}"
            if np.isfinite(acf) and acf >= 0.3
            else "no usable daily cycle detected"
        )
        parts = [
            f"auto: lowest backtest MASE over up to {common} daily origins: {self.chosen_} "
            f"{self.backtest_mase_:.2f} (others: {shown or 'none'})",
            cycle,
            f"quantiles calibrated on {np.isfinite(self.residuals_).sum()} {self.calibration_} "
            f"residuals, tail scales {self.tail_scales_[0]:g}/{self.tail_scales_[1]:g} walking forward",
        ]
        weekly = getattr(self, "weekly_", None)
        if weekly is not None:
            left_out = [c for c in self.candidates if c in WEEKLY_CANDIDATES]
            if all(c in WEEKLY_CANDIDATES for c in self.candidates):
                left_out = []  # nothing else to choose from: kept
            parts.append(
                weekly_text(weekly)
                + (f": left out {', '.join(left_out)}" if left_out and not weekly["found"] else "")
            )
        if slow:
            parts.append("also tried " + ", ".join(slow))
        if skipped:
            parts.append("too little history for " + ", ".join(skipped))
        if getattr(self, "choice_note_", ""):
            parts.append(self.choice_note_)
        if self.guard_:
            parts.append(f"{self.guard_}: {NAIVE} used")
        parts.append(f"bands calibrated per lead day up to day {self.calibrated_days_}")
        if self.shift_ is not None:
            parts.append(self._shift_text())
        parts.append(self.budget_note_)
        return "; ".join(parts)

    # -- reuse ----------------------------------------------------------------------

    def update(self, history: pd.Series) -> AutoSelector:
        """Keep the selection and calibration; move the chosen model onto ``history``."""
        if not hasattr(self, "model_"):
            return self.fit(history)
        y = self._prepare(history)
        self.model_ = self.model_.update(y)
        self.__dict__.pop("live_median_", None)  # the fitted model's, from an older end
        return self

    def live_error(self, history: pd.Series) -> tuple[float, int]:
        """MASE of the stored forecast against what arrived after the training end, and how many points.

        Compared with ``backtest_mase_`` by the model store to decide whether the
        series drifted away from what the model learned.
        """
        self._check_fitted()
        newer = history[history.index > self.last_timestamp_]
        steps = min(len(newer), self._live_width())
        if steps == 0:
            return float("nan"), 0
        kept = getattr(self, "live_median_", None)
        if kept is not None and len(kept) >= steps:
            index: pd.Index = self._future_index(steps)
            median = kept[:steps]
        else:  # a model stored before the median was kept
            frame = self.model_.predict(steps, [0.5])
            index, median = frame.index, frame.to_numpy()[:, 0]
        actual = history.reindex(index).to_numpy(dtype=float)
        err = np.abs(actual - median)
        count = int(np.isfinite(err).sum())
        if count == 0:
            return float("nan"), 0
        return float(np.nanmean(err) / self.scale_), count

    # -- forecasting ------------------------------------------------------------------

    def predict(self, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        horizon, qs = self._predict_args(horizon, quantiles)
        if self.calibration_ == "model" or not np.isfinite(self.residuals_).any():
            return self.model_.predict(horizon, qs)
        point = self.model_.predict(horizon, [0.5]).to_numpy()[:, 0]
        lower, upper = self.tail_scales_
        levels = [adjusted_level(q, lower, upper) for q in qs]
        base = self._offsets(self.residuals_, levels)[0]
        width = base.shape[0]
        # Past the calibrated leads the width is held, not extrapolated (no cone).
        offsets = base[np.minimum(np.arange(horizon), width - 1)]
        if self.calibration_ == "relative":
            offsets = offsets * self._denominator(point)[:, None]
        return self._frame(point[:, None] + offsets, qs, horizon)

    def describe(self) -> dict[str, Any]:
        """Metadata for the model store and the backtest report."""
        return {
            "chosen": self.chosen_,
            "weights": self.weights_,
            "scores": self.scores_,
            "backtest_mase": self.backtest_mase_,
            "origins": self.origins_,
            "calibration": self.calibration_,
            "tail_scales": list(self.tail_scales_),
            "seasonality": {k: round(v, 3) for k, v in self.seasonality_.items()}
            if hasattr(self, "seasonality_")
            else {},
            "calibrated_lead_days": getattr(self, "calibrated_days_", 0),
            "level_shift": list(shift) if (shift := getattr(self, "shift_", None)) else None,
            "weekly_pattern": getattr(self, "weekly_", None),
            "reason": self.reason_,
            "fallback": self.fallback_,
        }


MIX_CANDIDATES: tuple[str, ...] = (
    *(c for c in CHEAP_CANDIDATES if c != "seasonal_naive_1d"),
    "profile_mix",
)
"""``auto_mix``'s candidates: the learned profile mix in place of the daily naive model."""


register("auto", AutoSelector)
# Opt-in: the slow candidates at 7 origins within 10 s per series (about 20x auto's fit time).
register("auto_thorough", lambda: AutoSelector(budget_s=10.0, slow_origins=7))
# Opt-in: more accurate on the held-out windows of the benchmark traces (see docs/benchmarks.md),
# about 1.7x the fitting time of ``auto`` on 5-minute series.
register("auto_mix", lambda: AutoSelector(candidates=MIX_CANDIDATES, ensemble_size=5))
