"""The capacity review's accuracy at the horizon planned for, lead day by lead day.

The accuracy table of :mod:`scaler.reports.accuracy` scores forecasts one day ahead;
a 7-day or 90-day plan rests on forecasts a week or months ahead. Here the forecaster
in use (the estimator the pipeline chose, followed by the long-horizon rule of
:mod:`forecaster.long_horizon` where the plan's horizon is past a week, as in
:func:`forecaster.forecasting.forecast_series`) is refitted at a few origins a day
apart on the signal's own history, each with the whole horizon of actuals after it
(:func:`forecaster.backtesting.backtest`), and scored per lead day: MASE of the median
and coverage of the low-high band.

The plan's forecast is made from the whole history; an origin sees only the history
before it, so the scores are of a forecast made with less. To score as near the plan's
forecast as the history allows, each lead day is scored at the newest origins that have
that day of actuals after them (lead day 1 a day before the end, lead day 13 thirteen
days before it), not at origins old enough for the whole horizon, and each row says how
many days of history its origins had beside the plan's: a shortfall is stated, not
hidden. An origin needs :data:`MIN_TRAIN` of history before it, so a short history
supports fewer lead days than asked: the section then scores the longest lead the
history supports and says how far that is from the horizon asked, or that no backtest at
that lead is possible. Cost is bounded by :data:`MAX_FITS` fits per signal.

:func:`horizon_flags` puts a line in the review's "What matters" where the band's coverage
at a scored lead day is more than :data:`FLAG_POINTS` from nominal, with why.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from forecaster.backtesting import Backtest
from forecaster.errors import TiercastError
from forecaster.estimators import BaseEstimator, quantile_column, registered
from forecaster.forecasting import SeriesForecast
from forecaster.long_horizon import LONG_HORIZON, long_horizon_frame
from forecaster.progress import Progress
from forecaster.series import History, infer_step, steps_per
from scaler.reports.accuracy import counted_backtest
from scaler.reports.document import Chart, Column, Section, Table
from scaler.reports.i18n import fmt_number, t

DAY = pd.Timedelta(days=1)
MAX_ORIGINS = 4
"""Most origins per lead day, however many ``--backtest-origins`` asks for."""
MAX_FITS = 10
"""Most origins (one fit each) per signal over all lead days."""
LADDER: tuple[int, ...] = (1, 2, 3, 4, 5, 7, 10, 14, 21, 30, 45, 60, 90, 120, 180, 270, 366)
"""Lead days whose newest origins are fitted; a lead day between two is scored at the
newest fitted origins that reach it."""
FLAG_POINTS = 0.10
"""Coverage this far from nominal (0.10: ten points) at any scored lead day is flagged."""
HISTORY_SHARE = 0.75
"""A flag blames the history where the flagged row's origins had under this share of the
history the plan's forecast was made from."""
MIN_ORIGINS = 2
"""Origins a lead needs to count as supported (one origin is one path, not a score)."""
MIN_TRAIN = pd.Timedelta(days=7)
"""History an origin needs before it: a week, so the weekly models are themselves."""


@dataclass
class HorizonAccuracy:
    """Per signal and lead day, how the forecaster in use scored at the plan's horizon."""

    asked_days: int
    """Lead days of the plan's horizon (rounded up to whole days)."""
    origins: int
    """Origins asked for (``--backtest-origins``); 0 means backtests are off."""
    rows: list[dict[str, Any]] = field(default_factory=list)
    """signal, estimator, lead_day, origins, history_days (the origins' least), mase,
    coverage."""
    supported: dict[str, int] = field(default_factory=dict)
    """Longest lead day each signal's history supports (0: none)."""
    history_days: dict[str, float] = field(default_factory=dict)
    """Days of history the plan's forecast of each signal was made from."""
    skipped: list[str] = field(default_factory=list)


class _AtHorizon(BaseEstimator):
    """The estimator in use followed, past a week, by the long-horizon rule: what
    :func:`forecaster.forecasting.forecast_series` forecasts, as one estimator."""

    name = "at_horizon"

    def __init__(self, inner: BaseEstimator, long: bool = False) -> None:
        self.inner = inner
        self.long = long

    def fit(self, history: pd.Series) -> _AtHorizon:
        self.inner.fit(history)
        self.history_ = history
        self.fallback_ = getattr(self.inner, "fallback_", None)
        self.delegate_ = None
        return self

    def predict(self, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        frame = self.inner.predict(horizon, quantiles)
        if self.long:
            frame, _ = long_horizon_frame(
                self.history_, frame, infer_step(self.history_), list(quantiles)
            )
        return frame

    def label(self) -> str:
        return self.inner.label()


def lead_days_asked(horizon: pd.Timedelta) -> int:
    """Whole lead days of ``horizon`` (a 36-hour plan asks for 2)."""
    return max(1, math.ceil(horizon / DAY - 1e-9))


def longest_lead(y: pd.Series, asked: int, origins: int) -> int:
    """The longest lead day (at most ``asked``) at which ``min(origins, MIN_ORIGINS)``
    origins a day apart each have :data:`MIN_TRAIN` before them and the lead's days of
    actuals after them; 0 when there is none."""
    if len(y) < 2:
        return 0
    span = y.index[-1] + infer_step(y) - y.index[0]
    need = max(1, min(origins, MIN_ORIGINS)) - 1
    longest = math.floor((span - MIN_TRAIN) / DAY + 1e-9) - need
    return max(0, min(asked, longest))


def horizon_accuracy(
    history: History,
    forecasts: Mapping[str, SeriesForecast],
    horizon: pd.Timedelta,
    quantiles: Sequence[float],
    origins: int,
    method: str = "auto",
    progress: Progress | None = None,
) -> HorizonAccuracy:
    """Walk-forward backtests of each signal's forecaster at the plan's horizon, scored per
    lead day; nothing is fitted when ``origins`` is 0. ``progress`` counts one unit per
    origin."""
    out = HorizonAccuracy(asked_days=lead_days_asked(horizon), origins=origins)
    if origins <= 0:
        return out
    bar = progress or Progress(False)
    long = horizon > LONG_HORIZON
    for name, fc in forecasts.items():
        y = history[name][history[name].index <= fc.last_timestamp]
        seen = y.dropna()
        out.history_days[name] = (
            float((seen.index[-1] - seen.index[0]) / DAY) if len(seen) >= 2 else 0.0
        )
        lead = longest_lead(y, out.asked_days, origins) if len(seen) >= 2 else 0
        out.supported[name] = lead
        if lead == 0:
            continue
        try:
            _score_signal(out, name, fc, y, lead, origins, method, long, quantiles, bar)
        except (TiercastError, ValueError, FloatingPointError) as exc:
            out.skipped.append(f"{name}: {exc}")
            out.supported[name] = 0
    return out


def ladder_offsets(lead: int, per_lead: int, most_offset: int) -> tuple[dict[int, list[int]], int]:
    """Origins as whole days before the end (offset d: d days of actuals after it), and
    for each lead day 1..``lead`` the newest ``per_lead`` of them that reach it, none
    older than ``most_offset`` (history before it); fewer origins per lead, then every other
    rung of :data:`LADDER`, until at most :data:`MAX_FITS` origins are fitted. Returns
    ``({lead_day: offsets}, per_lead)``."""
    rungs = [d for d in LADDER if d < lead] + [lead]
    while True:
        offsets = sorted({d + k for d in rungs for k in range(per_lead) if d + k <= most_offset})
        if len(offsets) <= MAX_FITS or (per_lead <= MIN_ORIGINS and len(rungs) <= 2):
            break
        if per_lead > MIN_ORIGINS:
            per_lead -= 1
        else:  # every other rung between the first and the last
            rungs = [rungs[0], *rungs[1:-1][1::2], rungs[-1]]
    by_lead = {d: [o for o in offsets if o >= d][:per_lead] for d in range(1, lead + 1)}
    return by_lead, per_lead


def _score_signal(
    out: HorizonAccuracy,
    name: str,
    fc: SeriesForecast,
    y: pd.Series,
    lead: int,
    origins: int,
    method: str,
    long: bool,
    quantiles: Sequence[float],
    bar: Progress,
) -> None:
    """One signal's rows: each lead day scored at the newest origins that reach it."""
    step = infer_step(y)
    m_day = steps_per(DAY, step)
    end = y.index[-1] + step
    most = math.floor((end - y.index[0] - MIN_TRAIN) / DAY + 1e-9)
    by_lead, _ = ladder_offsets(lead, max(1, min(origins, MAX_ORIGINS)), most)
    offsets = sorted({o for os in by_lead.values() for o in os})
    factories = registered()
    in_use = fc.estimator if fc.estimator in factories else method
    if in_use not in factories or not offsets:
        out.supported[name] = 0
        return
    inner = factories[in_use]

    def factory(inner: Callable[[], BaseEstimator] = inner) -> BaseEstimator:
        return _AtHorizon(inner(), long)

    points = [end - o * DAY for o in offsets]
    bt = counted_backtest(
        factory, y, points, lead * m_day, quantiles, in_use, name, bar, " at the horizon"
    )
    label = in_use if in_use == fc.estimator else f"{in_use} ({fc.estimator})"
    first = y.dropna().index[0]
    for day in range(1, lead + 1):
        rows = [offsets.index(o) for o in by_lead[day]]
        if len(rows) < min(MIN_ORIGINS, len(offsets)):
            continue
        scored = _subset(bt, rows, (day - 1) * m_day, day * m_day)
        history = min((points[i] - first) / DAY for i in rows)
        out.rows.append(
            {
                "signal": name,
                "estimator": label,
                "lead_day": day,
                "origins": len(rows),
                "history_days": round(float(history), 1),
                "mase": scored.mase(),
                "coverage": scored.interval_coverage(),
            }
        )


def _subset(bt: Backtest, rows: Sequence[int], start: int, stop: int) -> Backtest:
    """``bt`` at origins ``rows`` and steps ``start`` to ``stop``."""
    idx = list(rows)
    return Backtest(
        label=bt.label,
        origins=[bt.origins[i] for i in idx],
        quantiles=bt.quantiles,
        forecasts=bt.forecasts[idx, start:stop],
        actuals=bt.actuals[idx, start:stop],
        scales=bt.scales[idx],
        fit_seconds=bt.fit_seconds,
    )


def by_lead_day(bt: Backtest, steps_per_day: int) -> list[Backtest]:
    """``bt`` cut into one backtest per lead day (day 1 is the first ``steps_per_day`` steps),
    so each is scored with :class:`~forecaster.backtesting.Backtest`'s own measures."""
    horizon = bt.actuals.shape[1]
    return [
        Backtest(
            label=bt.label,
            origins=bt.origins,
            quantiles=bt.quantiles,
            forecasts=bt.forecasts[:, start : start + steps_per_day],
            actuals=bt.actuals[:, start : start + steps_per_day],
            scales=bt.scales,
            fit_seconds=bt.fit_seconds,
        )
        for start in range(0, horizon, steps_per_day)
    ]


def add_horizon_accuracy(
    sec: Section, result: HorizonAccuracy, low: float, high: float, lang: str
) -> None:
    """The lead-day scores into the accuracy section ``sec``: what they are, per signal how
    far the history reaches, a table and a chart per signal. Nothing for a plan of a day or
    less (the one-day table is at its horizon)."""
    if result.asked_days <= 1:
        return
    band = {"low": quantile_column(low), "high": quantile_column(high)}
    if result.origins <= 0:
        sec.paragraphs.append(t(lang, "lead_accuracy_off", days=result.asked_days))
        return
    n = min(result.origins, MAX_ORIGINS)
    sec.paragraphs.append(t(lang, "lead_accuracy_intro", days=result.asked_days, n=n, **band))
    for name, lead in result.supported.items():
        if lead == 0:
            sec.paragraphs.append(
                t(
                    lang,
                    "lead_accuracy_none",
                    signal=name,
                    days=result.asked_days,
                    have=fmt_number(result.history_days.get(name, 0.0), lang, 1),
                    need=MIN_TRAIN.days + max(1, min(result.origins, MIN_ORIGINS)),
                )
            )
        elif lead < result.asked_days:
            sec.paragraphs.append(
                t(lang, "lead_accuracy_short", signal=name, lead=lead, days=result.asked_days)
            )
    if result.skipped:
        sec.paragraphs.append(t(lang, "accuracy_skipped", what="; ".join(result.skipped)))
    if not result.rows:
        return
    sec.tables.append(
        Table(
            "accuracy_by_lead",
            t(lang, "tbl_accuracy_by_lead", days=result.asked_days),
            [
                Column("signal", t(lang, "col_signal")),
                Column("estimator", t(lang, "col_estimator")),
                Column("lead_day", t(lang, "col_lead_day"), 0),
                Column("origins", t(lang, "col_origins"), 0),
                Column("history_days", t(lang, "col_history_days"), 1),
                Column("mase", t(lang, "col_mase"), 3),
                Column("coverage", t(lang, "col_coverage", **band), 0, percent=True),
            ],
            result.rows,
        )
    )
    for name in dict.fromkeys(r["signal"] for r in result.rows):
        rows = [r for r in result.rows if r["signal"] == name]
        sec.charts.append(lead_day_chart(name, rows, low, high, lang))


def horizon_flags(
    result: HorizonAccuracy, low: float, high: float, lang: str
) -> list[tuple[int, str, str]]:
    """A "What matters" line per signal whose band coverage at a scored lead day is more
    than :data:`FLAG_POINTS` from nominal (``high - low``), with why: scored on less
    history than the plan's forecast had, or bands too narrow or too wide for the demand.
    Ranked with a forecast that lost to its baseline (2); links to the accuracy section."""
    nominal = high - low
    out = []
    for name in dict.fromkeys(str(r["signal"]) for r in result.rows):
        rows = [r for r in result.rows if r["signal"] == name]
        off = [
            r
            for r in rows
            if math.isfinite(float(r["coverage"]))
            and abs(float(r["coverage"]) - nominal) > FLAG_POINTS + 1e-9
        ]
        if not off:
            continue
        worst = max(off, key=lambda r: abs(float(r["coverage"]) - nominal))
        narrow = float(worst["coverage"]) < nominal
        plan_days = result.history_days.get(name, math.nan)
        had = float(worst.get("history_days", plan_days))
        if _short(had, plan_days):
            why = t(
                lang,
                "lead_flag_history",
                had=fmt_number(had, lang, 1),
                plan=fmt_number(plan_days, lang, 1),
            )
            # Lead days off with about the plan's history say something of its bands too.
            near = [r for r in off if not _short(float(r.get("history_days", math.nan)), plan_days)]
            if near:
                under = sum(float(r["coverage"]) < nominal for r in near) * 2 > len(near)
                why += t(
                    lang,
                    "lead_flag_also",
                    days=_day_list([int(r["lead_day"]) for r in near]),
                    why=t(lang, "lead_flag_narrow" if under else "lead_flag_wide"),
                )
        else:
            why = t(lang, "lead_flag_narrow" if narrow else "lead_flag_wide")
        text = t(
            lang,
            "summary_lead_coverage",
            signal=name,
            low=quantile_column(low),
            high=quantile_column(high),
            coverage=fmt_number(100 * float(worst["coverage"]), lang, 0),
            nominal=fmt_number(100 * nominal, lang, 0),
            day=int(worst["lead_day"]),
            off=len(off),
            scored=len(rows),
            why=why,
        )
        out.append((2, text, "accuracy"))
    return out


def _short(had: float, plan_days: float) -> bool:
    """Whether origins with ``had`` days of history had under :data:`HISTORY_SHARE` of the
    plan's ``plan_days`` (False where either is unknown)."""
    return math.isfinite(had) and math.isfinite(plan_days) and had < HISTORY_SHARE * plan_days


def _day_list(days: Sequence[int]) -> str:
    """Lead days as runs: [1, 2, 3, 5] is "1–3, 5"."""
    runs: list[list[int]] = []
    for d in sorted(days):
        if runs and d == runs[-1][-1] + 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def lead_day_chart(
    name: str, rows: Sequence[Mapping[str, Any]], low: float, high: float, lang: str
) -> Chart:
    """MASE (left axis) and band coverage (right axis, with the nominal width) by lead day."""
    from matplotlib.ticker import MaxNLocator

    from scaler.reports.charts import BAND_COLORS, finish_chart, new_figure

    days = np.array([r["lead_day"] for r in rows], dtype=float)
    fig, ax = new_figure()
    ax.plot(
        days,
        [r["mase"] for r in rows],
        color=BAND_COLORS["expected"],
        marker="o",
        label=t(lang, "legend_mase"),
    )
    ax.set_ylim(bottom=0)
    ax.set_xlabel(t(lang, "axis_lead_day"))
    ax.set_ylabel(t(lang, "col_mase"))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    band = {"low": quantile_column(low), "high": quantile_column(high)}
    color = "#e07b39"
    right = ax.twinx()
    right.plot(days, [100 * float(r["coverage"]) for r in rows], color=color, marker="s")
    right.axhline(100 * (high - low), color=color, lw=0.8, ls=":")
    right.set_ylim(0, 105)
    right.set_ylabel(t(lang, "axis_coverage_percent"))
    # The legend is drawn on the left axis: an empty line stands for the right one.
    ax.plot([], [], color=color, marker="s", label=t(lang, "legend_lead_coverage", **band))
    title = t(lang, "chart_lead_accuracy", name=name)
    return finish_chart(fig, ax, f"lead-accuracy-{name}", title, lang, 2)
