"""The capacity review's accuracy section: each signal's estimator against the baselines.

Uses :mod:`forecaster.backtesting`: one-day-ahead forecasts (or shorter for a short
history) at daily origins ending at the newest sample, scored by MASE, the pinball
loss of the highest quantile and the coverage of the low-high band. The estimator in
use is scored beside the seasonal-naive baselines, so the reader sees whether the
forecast is worth more than "the same as yesterday".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from forecaster.errors import TiercastError
from forecaster.estimators import quantile_column, registered
from forecaster.forecasting import SeriesForecast
from forecaster.progress import Progress
from forecaster.series import History, infer_step
from scaler.reports.document import Column, Section, Table
from scaler.reports.i18n import t

if TYPE_CHECKING:
    from forecaster.backtesting import Backtest

BASELINES: tuple[str, ...] = ("seasonal_naive_1d", "seasonal_naive_7d")
"""Estimators every signal's forecast is scored against."""


def accuracy_rows(
    history: History,
    forecasts: Mapping[str, SeriesForecast],
    quantiles: Sequence[float],
    origins: int,
    method: str = "auto",
    keep: dict[str, Backtest] | None = None,
    progress: Progress | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Rolling-origin scores of each signal's estimator against the seasonal-naive baselines.

    ``keep``, when given, receives each signal's backtest of the estimator in use (the
    forecast-against-actual section reuses them rather than refitting). ``progress``
    counts one unit per origin of each backtest.

    Uses :mod:`forecaster.backtesting`: one-day-ahead forecasts (or shorter for a
    short history) at ``origins`` daily origins ending at the newest sample.
    """
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    if origins <= 0:
        return rows, skipped
    try:
        from forecaster.backtesting import daily_origins
    except ImportError as exc:  # a build without the backtesting module still reports
        return rows, [f"forecaster.backtesting is not available ({exc})"]
    factories = registered()
    bar = progress or Progress(False)
    for name, fc in forecasts.items():
        if len(history[name].dropna()) < 4:
            skipped.append(name)
            continue
        y = history[name][history[name].index <= fc.last_timestamp]
        step = infer_step(y)
        horizon = _one_day_or_shorter(y, step)
        points = daily_origins(y, origins, horizon)
        if not points:
            skipped.append(name)
            continue
        # The estimator in use, refitted as the pipeline would; a selector's pick (an
        # ensemble label, say) is not in the registry, so the selector itself is scored.
        in_use = fc.estimator if fc.estimator in factories else method
        candidates = [in_use] if in_use in factories else []
        candidates += [b for b in BASELINES if b in factories]
        for label in dict.fromkeys(candidates):
            try:
                bt = counted_backtest(
                    factories[label], y, points, horizon, quantiles, label, name, bar
                )
            except (TiercastError, ValueError) as exc:
                skipped.append(f"{name}/{label}: {exc}")
                continue
            if keep is not None and label == in_use:
                keep[name] = bt
            scores = bt.scores()
            rows.append(
                {
                    "signal": name,
                    "estimator": _estimator_label(label, fc.estimator, in_use),
                    "chosen": label == in_use,
                    "origins": len(points),
                    "horizon_h": horizon * step / pd.Timedelta(hours=1),
                    "mase": scores["mase"],
                    "pinball_high": scores.get(f"pinball_{quantile_column(max(quantiles))}"),
                    "interval_coverage": scores.get("interval_coverage"),
                }
            )
    return rows, skipped


def _one_day_or_shorter(y: pd.Series, step: pd.Timedelta) -> int:
    """Steps ahead each origin forecasts: a day, or a quarter of a short history."""
    span = y.index[-1] - y.index[0]
    return max(1, int(min(pd.Timedelta(days=1), span / 4) / step))


def counted_backtest(
    factory: Callable[..., Any],
    y: pd.Series,
    points: Sequence[pd.Timestamp],
    horizon: int,
    quantiles: Sequence[float],
    label: str,
    name: str,
    bar: Progress,
    what: str = "",
) -> Backtest:
    """One estimator's backtest, one progress unit per origin even when it fails part way
    (``what`` is added to the bar's label)."""
    from forecaster.backtesting import backtest

    bar.add_total(len(points))
    bar.describe(f"backtest {name} {label}{what}")
    done = bar.n
    try:
        return backtest(factory, y, points, horizon, quantiles, label=label, tick=bar.tick)
    except (TiercastError, ValueError, FloatingPointError):
        bar.update(len(points) - (bar.n - done))  # the origins it did not reach
        raise


def _estimator_label(label: str, estimator: str, in_use: str) -> str:
    """A row's estimator; the selector in use also names the forecast's pick."""
    if label == estimator or label != in_use:
        return label
    return f"{label} ({estimator})"


def accuracy_section(
    rows: Sequence[Mapping[str, Any]],
    skipped: Sequence[str],
    low: float,
    high: float,
    origins: int,
    lang: str,
) -> Section:
    """The scores as a table, with what could not be scored and why."""
    sec = Section(
        "accuracy",
        t(lang, "sec_accuracy"),
        [
            t(
                lang,
                "sec_accuracy_intro",
                low=quantile_column(low),
                high=quantile_column(high),
                n=origins,
            )
        ],
    )
    if not rows:
        sec.paragraphs.append(t(lang, "accuracy_none"))
    sec.tables.append(
        Table(
            "accuracy",
            t(lang, "tbl_accuracy"),
            [
                Column("signal", t(lang, "col_signal")),
                Column("estimator", t(lang, "col_estimator")),
                Column("chosen", t(lang, "col_chosen")),
                Column("origins", t(lang, "col_origins"), 0),
                Column("horizon_h", t(lang, "col_horizon_h"), 1),
                Column("mase", t(lang, "col_mase"), 3),
                Column("pinball_high", t(lang, "col_pinball", q=quantile_column(high)), 3),
                Column(
                    "interval_coverage",
                    t(lang, "col_coverage", low=quantile_column(low), high=quantile_column(high)),
                    0,
                    percent=True,
                ),
            ],
            [{**r, "chosen": t(lang, "yes") if r["chosen"] else ""} for r in rows],
        )
    )
    if skipped:
        sec.paragraphs.append(t(lang, "accuracy_skipped", what="; ".join(skipped)))
    return sec
