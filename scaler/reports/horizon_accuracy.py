"""The capacity review's accuracy at the horizon planned for, lead day by lead day.

The accuracy table of :mod:`scaler.reports.accuracy` scores forecasts one day ahead;
a 7-day or 90-day plan rests on forecasts a week or months ahead. Here the forecaster
in use (the estimator the pipeline chose, followed by the long-horizon rule of
:mod:`forecaster.long_horizon` where the plan's horizon is past a week, as in
:func:`forecaster.forecasting.forecast_series`) is refitted at a few origins a day
apart on the signal's own history, each with the whole horizon of actuals after it
(:func:`forecaster.backtesting.backtest`), and scored per lead day: MASE of the median
and coverage of the low-high band.

An origin needs :data:`MIN_TRAIN` of history before it and the horizon's days of
actuals after it, so a short history supports fewer lead days than asked: the section
then scores the longest lead the history supports and says how far that is from the
horizon asked, or that no backtest at that lead is possible. Cost is bounded by
:data:`MAX_ORIGINS` fits per signal.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from forecaster.backtesting import Backtest, daily_origins
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
"""Most origins per signal (one fit each), however many ``--backtest-origins`` asks for."""
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
    """signal, estimator, lead_day, origins, mase, coverage."""
    supported: dict[str, int] = field(default_factory=dict)
    """Longest lead day each signal's history supports (0: none)."""
    history_days: dict[str, float] = field(default_factory=dict)
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
    factories = registered()
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
        step = infer_step(y)
        m_day = steps_per(DAY, step)
        points = [
            o
            for o in daily_origins(y, min(origins, MAX_ORIGINS), lead * m_day)
            if o - y.index[0] >= MIN_TRAIN
        ]
        in_use = fc.estimator if fc.estimator in factories else method
        if in_use not in factories or not points:
            out.supported[name] = 0
            continue
        inner = factories[in_use]

        def factory(inner: Callable[[], BaseEstimator] = inner) -> BaseEstimator:
            return _AtHorizon(inner(), long)

        try:
            bt = counted_backtest(
                factory, y, points, lead * m_day, quantiles, in_use, name, bar, " at the horizon"
            )
        except (TiercastError, ValueError, FloatingPointError) as exc:
            out.skipped.append(f"{name}/{in_use}: {exc}")
            out.supported[name] = 0
            continue
        label = in_use if in_use == fc.estimator else f"{in_use} ({fc.estimator})"
        for day, scored in enumerate(by_lead_day(bt, m_day), start=1):
            out.rows.append(
                {
                    "signal": name,
                    "estimator": label,
                    "lead_day": day,
                    "origins": len(points),
                    "mase": scored.mase(),
                    "coverage": scored.interval_coverage(),
                }
            )
    return out


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
                Column("mase", t(lang, "col_mase"), 3),
                Column("coverage", t(lang, "col_coverage", **band), 0, percent=True),
            ],
            result.rows,
        )
    )
    for name in dict.fromkeys(r["signal"] for r in result.rows):
        rows = [r for r in result.rows if r["signal"] == name]
        sec.charts.append(lead_day_chart(name, rows, low, high, lang))


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
