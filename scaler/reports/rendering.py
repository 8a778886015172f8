"""Reports for people who do not open a terminal: the capacity review and the finance dry-run.

A :class:`Report` is a value built from what a cycle or a projection already
computed: key figures, sections of paragraphs, tables and charts. Writers turn
it into one self-contained HTML file (charts embedded as base64 PNG, a Content
Security Policy that forbids loading anything, so it opens offline and cannot
leak), Markdown with the charts as PNG files beside it, one CSV per table, and
JSON with every number the page shows. Every label, heading and explanation
comes from :mod:`scaler.reports.i18n` in the report's language.

Key figures carry their raw value in ``data-value`` in the HTML and under
``key_figures`` in the JSON, so a test (or a reader) can check that the page
says what the export says.

Charts are drawn with matplotlib's Agg backend through the object API (no
pyplot global state), at a fixed pixel size recorded with each chart.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from forecaster import __version__
from forecaster.errors import BadInputError, TemporaryError, TiercastError
from forecaster.estimators import quantile_column, registered
from forecaster.forecasting import SeriesForecast
from forecaster.progress import Progress
from forecaster.series import History, infer_step
from scaler.reports import reviewing
from scaler.catalog.gpus import gpu_model
from scaler.config import TIER_ORDER, Config
from scaler.reports.finance import BANDS, CommitmentAdvice, FinanceProjection
from scaler.reports.i18n import fmt_number, month_label, render_note, t, translate_reason
from scaler.planning.tiers import effective_gpus
from scaler.plans import CapacityPlan
from scaler.planning.demand import demand_by_model

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure as MplFigure

    from forecaster.backtesting import Backtest

CHART_SIZE_PX = (960, 360)
"""Width and height of every chart in pixels (the browser test checks them)."""
CHART_DPI = 96
HISTORY_WINDOW = pd.Timedelta(days=7)
"""History shown before the forecast in each signal chart."""
FORMATS: tuple[str, ...] = ("html", "md", "csv", "json")
TIER_COLORS = {"reserved": "#1b6ca8", "on-demand": "#e07b39", "spot": "#5aa55a"}
BAND_COLORS = {"low": "#9ecae1", "expected": "#3182bd", "high": "#08519c"}


# ---------------------------------------------------------------- data model


@dataclass(frozen=True)
class KeyFigure:
    key: str
    label: str
    value: float
    unit: str = ""
    digits: int = 2


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    digits: int | None = None
    """Decimal places for a number column; None for text."""
    percent: bool = False
    """Show a fraction as a percentage."""


@dataclass
class Table:
    key: str
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]]


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    png: bytes
    width: int
    height: int
    alt: str


@dataclass
class Section:
    key: str
    title: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    items: list[tuple[str, str]] = field(default_factory=list)
    """Bullet points as (text, key of the section they link to); the summary's recommendations."""


@dataclass
class Report:
    kind: str
    """``report`` (capacity review) or ``finance`` (dry-run projection); names the files."""
    lang: str
    title: str
    subtitle: str
    created_at: str
    figures: list[KeyFigure]
    sections: list[Section]
    data: dict[str, Any] = field(default_factory=dict)
    """Raw exports (the plan, the projection) carried into the JSON."""

    def figure(self, key: str) -> KeyFigure:
        return next(f for f in self.figures if f.key == key)


# ---------------------------------------------------------------- formatting


def format_cell(value: Any, column: Column, lang: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if column.digits is None or not isinstance(value, int | float | np.number):
        return str(value)
    if column.percent:
        return fmt_number(float(value) * 100.0, lang, column.digits) + "%"
    return fmt_number(float(value), lang, column.digits)


def format_figure(f: KeyFigure, lang: str) -> str:
    text = fmt_number(f.value, lang, f.digits)
    return f"{text} {f.unit}".strip()


def _json_value(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float):
        return None if not math.isfinite(v) else v
    return v


# ---------------------------------------------------------------- charts


def _new_figure() -> tuple[MplFigure, Axes]:
    from matplotlib.figure import Figure

    w, h = CHART_SIZE_PX
    fig = Figure(figsize=(w / CHART_DPI, h / CHART_DPI), dpi=CHART_DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.grid(True, alpha=0.3)
    return fig, ax


def _render(fig: MplFigure, key: str, title: str, alt: str) -> Chart:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    buf = io.BytesIO()
    # No "Software" stamp, so the same report gives the same bytes.
    canvas.print_png(buf, metadata={"Software": None})
    w, h = canvas.get_width_height()
    return Chart(key=key, title=title, png=buf.getvalue(), width=w, height=h, alt=alt)


def _value_axis(ax: Axes, lang: str) -> None:
    """Tick labels with the language's thousands and decimal separators."""
    from matplotlib.ticker import FuncFormatter

    def label(x: float, _pos: int) -> str:
        return fmt_number(x, lang, 0 if abs(x) >= 100 or float(x).is_integer() else 1)

    ax.yaxis.set_major_formatter(FuncFormatter(label))


def _time_axis(ax: Axes, lang: str) -> None:
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator(minticks=4, maxticks=10)
    day = "%d.%m" if lang == "ru" else "%m-%d"
    formatter = mdates.ConciseDateFormatter(
        locator,
        formats=["%Y", "%m", day, "%H:%M", "%H:%M", "%S"],
        zero_formats=["", "%Y", day, day, "%H:%M", "%H:%M"],
        offset_formats=["", "%Y", "%Y-%m", "%Y-%m-%d", "%Y-%m-%d", "%Y-%m-%d %H:%M"],
    )
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(formatter)
    ax.set_xlabel(t(lang, "axis_time_utc"))


def _month_axis(ax: Axes, x: np.ndarray, months: list[str], lang: str) -> None:
    """Months along ``x`` (in the language's words) against cost."""
    ax.set_xticks(x, [month_label(m, lang) for m in months], fontsize=8)
    ax.set_xlabel(t(lang, "axis_month"))
    ax.set_ylabel(t(lang, "axis_cost"))


def _finish(
    fig: MplFigure, ax: Axes, key: str, title: str, lang: str, ncols: int, alt: str | None = None
) -> Chart:
    """The end every chart shares: value-axis separators, legend, title; rendered as ``key``."""
    _value_axis(ax, lang)
    ax.legend(loc="upper left", fontsize=8, ncols=ncols)
    ax.set_title(title, fontsize=11)
    return _render(fig, key, title, title if alt is None else alt)


def _monthly_cost_by_band(monthly: pd.DataFrame, months: list[str]) -> dict[str, np.ndarray]:
    """Band -> cost per month of ``months`` summed over the frame's tiers and pools."""
    return {
        b: monthly[monthly["band"] == b]
        .groupby("period")["cost"]
        .sum()
        .reindex(months)
        .to_numpy(dtype=float)
        for b in BANDS
    }


def _low_high_whiskers(
    ax: Axes, x: np.ndarray, totals: Mapping[str, np.ndarray], **style: Any
) -> None:
    """The low-high band around the expected values as whiskers at ``x``."""
    ax.errorbar(
        x,
        totals["expected"],
        yerr=[
            np.maximum(0, totals["expected"] - totals["low"]),
            np.maximum(0, totals["high"] - totals["expected"]),
        ],
        fmt="none",
        ecolor="#222222",
        **style,
    )


def signal_chart(
    name: str,
    unit: str,
    history: pd.Series,
    forecast: SeriesForecast,
    low: float,
    high: float,
    policy_q: float,
    lang: str,
) -> Chart:
    fig, ax = _new_figure()
    ax.plot(
        history.index,
        history.to_numpy(dtype=float),
        color="#333333",
        lw=1.0,
        label=t(lang, "legend_history"),
    )
    fc = forecast.frame
    ax.fill_between(
        fc.index,
        forecast.quantile(low).to_numpy(),
        forecast.quantile(high).to_numpy(),
        color=BAND_COLORS["low"],
        alpha=0.6,
        label=t(lang, "legend_band", low=quantile_column(low), high=quantile_column(high)),
    )
    ax.plot(
        fc.index,
        forecast.quantile(0.5).to_numpy(),
        color=BAND_COLORS["expected"],
        lw=1.2,
        label=t(lang, "legend_median"),
    )
    ax.plot(
        fc.index,
        forecast.quantile(policy_q).to_numpy(),
        color="#c0392b",
        lw=1.0,
        ls="--",
        label=t(lang, "legend_policy_quantile", q=quantile_column(policy_q)),
    )
    import matplotlib.dates as mdates

    ax.axvline(float(mdates.date2num(forecast.last_timestamp)), color="#777777", lw=0.8, ls=":")
    ax.set_ylabel(f"{name}, {unit}")
    ax.set_ylim(bottom=0)
    _time_axis(ax, lang)
    return _finish(
        fig,
        ax,
        f"signal-{name}",
        t(lang, "chart_signal", name=name),
        lang,
        4,
        alt=t(lang, "chart_signal_alt", name=name, unit=unit),
    )


def capacity_chart(
    model: str,
    grid: pd.DatetimeIndex,
    pools: Sequence[tuple[str, str, np.ndarray]],
    demand_q: np.ndarray,
    demand_median: np.ndarray,
    policy_q: float,
    lang: str,
) -> Chart:
    """Stacked planned GPUs per pool (name, tier, GPUs) against forecast GPU demand."""
    fig, ax = _new_figure()
    if pools:
        ax.stackplot(
            grid,
            *[g for _, _, g in pools],
            labels=[f"{n} ({t(lang, 'tier_' + tier)})" for n, tier, _ in pools],
            colors=[TIER_COLORS.get(tier, "#999999") for _, tier, _ in pools],
            alpha=0.55,
            step="post",
        )
    ax.step(
        grid,
        demand_q,
        where="post",
        color="#c0392b",
        lw=1.3,
        label=t(lang, "legend_demand_q", q=quantile_column(policy_q)),
    )
    ax.step(
        grid,
        demand_median,
        where="post",
        color="#222222",
        lw=1.0,
        ls="--",
        label=t(lang, "legend_demand_median"),
    )
    ax.set_ylabel(t(lang, "axis_gpus"))
    ax.set_ylim(bottom=0)
    _time_axis(ax, lang)
    return _finish(
        fig,
        ax,
        f"capacity-{model}",
        t(lang, "chart_capacity", model=model),
        lang,
        3,
        alt=t(lang, "chart_capacity_alt", model=model),
    )


def mig_chart(
    model: str,
    grid: pd.DatetimeIndex,
    demand: Mapping[str, np.ndarray],
    capacity: Mapping[str, float],
    lang: str,
) -> Chart:
    """MIG instances needed per profile over the timeline, with the planned layouts' capacity."""
    fig, ax = _new_figure()
    colors = ["#1b6ca8", "#e07b39", "#5aa55a", "#8e44ad", "#c0392b", "#7f8c8d"]
    for i, (profile, values) in enumerate(sorted(demand.items())):
        color = colors[i % len(colors)]
        ax.step(
            grid,
            values,
            where="post",
            color=color,
            lw=1.2,
            label=t(lang, "legend_mig_demand", profile=profile),
        )
        if profile in capacity:
            ax.axhline(
                float(capacity[profile]),
                color=color,
                lw=1.0,
                ls="--",
                label=t(lang, "legend_mig_capacity", profile=profile),
            )
    ax.set_ylabel(t(lang, "axis_instances"))
    top = max([float(np.max(v)) for v in demand.values()] + [float(c) for c in capacity.values()])
    # Room above the lines for the legend.
    ax.set_ylim(0, max(1.0, top) * 1.3)
    _time_axis(ax, lang)
    return _finish(fig, ax, f"mig-{model}", t(lang, "chart_mig", model=model), lang, 4)


def tier_cost_chart(grid: pd.DatetimeIndex, by_tier: Mapping[str, np.ndarray], lang: str) -> Chart:
    """Planned spend per hour by tier over the plan's timeline."""
    fig, ax = _new_figure()
    tiers = sorted(by_tier, key=lambda x: TIER_ORDER.get(x, 9))
    ax.stackplot(
        grid,
        *[by_tier[x] for x in tiers],
        labels=[t(lang, "tier_" + x) for x in tiers],
        colors=[TIER_COLORS.get(x, "#999999") for x in tiers],
        alpha=0.7,
        step="post",
    )
    ax.set_ylabel(t(lang, "axis_cost_per_hour"))
    ax.set_ylim(bottom=0)
    _time_axis(ax, lang)
    return _finish(fig, ax, "cost-by-tier", t(lang, "chart_cost_tier"), lang, 3)


def monthly_tier_chart(monthly: pd.DataFrame, lang: str) -> Chart:
    """Expected cost per month stacked by tier, with the low-high range of the total."""
    fig, ax = _new_figure()
    exp = monthly[monthly["band"] == "expected"]
    months = list(dict.fromkeys(exp["period"]))
    x = np.arange(len(months))
    bottom = np.zeros(len(months))
    for tier in sorted(set(exp["tier"]), key=lambda v: TIER_ORDER.get(v, 9)):
        vals = exp[exp["tier"] == tier].set_index("period").reindex(months)["cost"].to_numpy()
        ax.bar(
            x,
            vals,
            bottom=bottom,
            color=TIER_COLORS.get(tier, "#999999"),
            width=0.6,
            label=t(lang, "tier_" + tier),
        )
        bottom += vals
    totals = _monthly_cost_by_band(monthly, months)
    _low_high_whiskers(ax, x, totals, capsize=4, label=t(lang, "legend_low_high"))
    _month_axis(ax, x, months, lang)
    return _finish(fig, ax, "monthly-by-tier", t(lang, "chart_monthly_tier"), lang, 4)


def scenario_chart(projection: FinanceProjection, lang: str) -> Chart:
    """Expected cost per month for each scenario side by side, low-high as whiskers."""
    fig, ax = _new_figure()
    months = list(dict.fromkeys(projection.baseline.monthly["period"]))
    x = np.arange(len(months))
    n = len(projection.scenarios)
    width = 0.8 / n
    colors = ["#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363", "#d6616b"]
    for i, sp in enumerate(projection.scenarios):
        totals = _monthly_cost_by_band(sp.monthly, months)
        pos = x - 0.4 + width * (i + 0.5)
        ax.bar(
            pos,
            totals["expected"],
            width=width * 0.95,
            color=colors[i % len(colors)],
            label=sp.scenario.name if i else t(lang, "baseline"),
        )
        _low_high_whiskers(ax, pos, totals, capsize=2, lw=0.8)
    _month_axis(ax, x, months, lang)
    return _finish(fig, ax, "scenarios", t(lang, "chart_scenarios"), lang, min(n, 4))


# ---------------------------------------------------------------- accuracy


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
        from forecaster.backtesting import backtest, daily_origins
    except ImportError as exc:  # a build without the backtesting module still reports
        return rows, [f"forecaster.backtesting is not available ({exc})"]
    factories = registered()
    for name, fc in forecasts.items():
        y = history[name].dropna()
        if len(y) < 4:
            skipped.append(name)
            continue
        y = history[name][history[name].index <= fc.last_timestamp]
        step = infer_step(y)
        span = y.index[-1] - y.index[0]
        horizon = max(1, int(min(pd.Timedelta(days=1), span / 4) / step))
        # The estimator in use, refitted as the pipeline would; a selector's pick (an
        # ensemble label, say) is not in the registry, so the selector itself is scored.
        in_use = fc.estimator if fc.estimator in factories else method
        candidates = [in_use] if in_use in factories else []
        candidates += [b for b in ("seasonal_naive_1d", "seasonal_naive_7d") if b in factories]
        points = daily_origins(y, origins, horizon)
        if not points:
            skipped.append(name)
            continue
        bar = progress or Progress(False)
        for label in dict.fromkeys(candidates):
            bar.add_total(len(points))
            bar.describe(f"backtest {name} {label}")
            done = bar.n
            try:
                bt = backtest(
                    factories[label], y, points, horizon, quantiles, label=label, tick=bar.tick
                )
            except (TiercastError, ValueError) as exc:
                bar.update(len(points) - (bar.n - done))  # the origins it did not reach
                skipped.append(f"{name}/{label}: {exc}")
                continue
            if keep is not None and label == in_use:
                keep[name] = bt
            s = bt.scores()
            rows.append(
                {
                    "signal": name,
                    "estimator": label
                    if label == fc.estimator
                    else f"{label} ({fc.estimator})"
                    if label == in_use
                    else label,
                    "chosen": label == in_use,
                    "origins": len(points),
                    "horizon_h": horizon * step / pd.Timedelta(hours=1),
                    "mase": s["mase"],
                    "pinball_high": s.get(f"pinball_{quantile_column(max(quantiles))}"),
                    "interval_coverage": s.get("interval_coverage"),
                }
            )
    return rows, skipped


# ---------------------------------------------------------------- summary

SUMMARY_MAX = 5
"""At most this many recommendations head a report."""


def summary_section(items: Sequence[tuple[int, str, str]], lang: str) -> Section:
    """The recommendations that matter, most important first (lower rank first), each linking
    to the section that explains it."""
    ranked = [(text, link) for _, text, link in sorted(items, key=lambda x: x[0])]
    sec = Section("summary", t(lang, "sec_summary"), items=ranked[:SUMMARY_MAX])
    if not ranked:
        sec.paragraphs.append(t(lang, "summary_nothing"))
    return sec


def _bound_pools(config: Config, plan: CapacityPlan, lang: str) -> list[tuple[int, str, str]]:
    """Pools the plan holds at ``max_nodes`` (off commitment) or that name it as binding."""
    limits = {p.name: p for p in config.pools}
    out = []
    for pp in plan.pools:
        p = limits.get(pp.pool)
        if p is None or not pp.target_nodes:
            continue
        peak = max(pp.target_nodes)
        unserved = "max_nodes" in pp.binding
        if unserved or (p.tier != "reserved" and peak >= p.max_nodes > 0):
            when = plan.timeline[pp.target_nodes.index(peak)][11:16] + "Z"
            key = "summary_max_nodes_short" if unserved else "summary_max_nodes"
            out.append(
                (
                    0 if unserved else 3,
                    t(lang, key, pool=pp.pool, max=p.max_nodes, at=when),
                    "capacity",
                )
            )
    return out


def _lost_to_baseline(rows: Sequence[Mapping[str, Any]], lang: str) -> list[tuple[int, str, str]]:
    """Signals whose forecast in use scored a worse MASE than a seasonal-naive baseline."""
    out = []
    by_signal: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_signal.setdefault(str(r["signal"]), []).append(r)
    for name, rs in by_signal.items():
        used = [r for r in rs if r.get("chosen") and r.get("mase") is not None]
        base = [
            r
            for r in rs
            if not r.get("chosen") and r.get("mase") is not None and math.isfinite(r["mase"])
        ]
        if not used or not base or not math.isfinite(used[0]["mase"]):
            continue
        best = min(base, key=lambda r: r["mase"])
        if used[0]["mase"] > best["mase"]:
            out.append(
                (
                    2,
                    t(
                        lang,
                        "summary_lost_to_baseline",
                        signal=name,
                        mase=fmt_number(used[0]["mase"], lang, 3),
                        baseline=best["estimator"],
                        base_mase=fmt_number(best["mase"], lang, 3),
                    ),
                    "accuracy",
                )
            )
    return out


def _commitment_items(advice: Sequence[CommitmentAdvice], lang: str) -> list[tuple[int, str, str]]:
    return [
        (1 if c.kind != "keep" else 3, _advice_sentence(c, lang), "commitments") for c in advice
    ]


# ---------------------------------------------------------------- forecast against actual


def hindsight_signal_chart(
    name: str, frame: pd.DataFrame, low: float, high: float, q: float, lang: str
) -> Chart:
    """What was forecast for each moment of the review period against what happened."""
    fig, ax = _new_figure()
    f = frame.sort_values("timestamp")
    x = pd.DatetimeIndex(f["timestamp"])
    lo, hi, qc = quantile_column(low), quantile_column(high), quantile_column(q)
    if lo in f and hi in f:
        ax.fill_between(
            x,
            f[lo].to_numpy(dtype=float),
            f[hi].to_numpy(dtype=float),
            color=BAND_COLORS["low"],
            alpha=0.6,
            step="post",
            label=t(lang, "legend_band", low=lo, high=hi),
        )
    if "q0.5" in f:
        ax.step(
            x,
            f["q0.5"].to_numpy(dtype=float),
            where="post",
            color=BAND_COLORS["expected"],
            lw=1.1,
            label=t(lang, "legend_median"),
        )
    if qc in f and qc not in (lo, hi):
        ax.step(
            x,
            f[qc].to_numpy(dtype=float),
            where="post",
            color="#c0392b",
            lw=1.0,
            ls="--",
            label=t(lang, "legend_policy_quantile", q=qc),
        )
    ax.plot(
        x,
        f["actual"].to_numpy(dtype=float),
        color="#222222",
        lw=1.0,
        label=t(lang, "legend_actual"),
    )
    ax.set_ylim(bottom=0)
    _time_axis(ax, lang)
    return _finish(
        fig, ax, f"hindsight-signal-{name}", t(lang, "chart_hindsight_signal", name=name), lang, 4
    )


def hindsight_capacity_chart(model: str, frame: pd.DataFrame, lang: str) -> Chart:
    """Planned GPUs against the demand that came, shortfall and idle shaded."""
    fig, ax = _new_figure()
    f = frame.sort_values("timestamp")
    x = pd.DatetimeIndex(f["timestamp"])
    planned = f["planned_gpus"].to_numpy(dtype=float)
    actual = f["actual_gpus"].to_numpy(dtype=float)
    ax.fill_between(
        x,
        actual,
        planned,
        where=planned >= actual,
        color="#bbbbbb",
        alpha=0.6,
        step="post",
        label=t(lang, "legend_idle"),
    )
    ax.fill_between(
        x,
        planned,
        actual,
        where=actual > planned,
        color="#e74c3c",
        alpha=0.6,
        step="post",
        label=t(lang, "legend_short"),
    )
    ax.step(
        x,
        planned,
        where="post",
        color=TIER_COLORS["reserved"],
        lw=1.2,
        label=t(lang, "legend_planned"),
    )
    ax.step(
        x,
        f["forecast_gpus"].to_numpy(dtype=float),
        where="post",
        color="#c0392b",
        lw=0.9,
        ls="--",
        label=t(lang, "legend_forecast_gpus"),
    )
    ax.step(x, actual, where="post", color="#222222", lw=1.0, label=t(lang, "legend_actual_gpus"))
    ax.set_ylabel(t(lang, "axis_gpus"))
    ax.set_ylim(bottom=0)
    _time_axis(ax, lang)
    return _finish(
        fig,
        ax,
        f"hindsight-capacity-{model}",
        t(lang, "chart_hindsight_capacity", model=model),
        lang,
        5,
    )


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in r.items()} for r in frame.to_dict(orient="records")]


def hindsight_section(
    h: reviewing.Hindsight, config: Config, low: float, high: float, lang: str
) -> Section:
    """The forecast-against-actual section: charts per signal and GPU model, costs per pool/tier."""
    cur = config.finance.currency
    sec = Section("hindsight", t(lang, "sec_hindsight"))
    if h.empty:
        sec.paragraphs.append(t(lang, "hindsight_none"))
        return sec
    unserved = config.finance.unserved_price_per_gpu_hour
    sec.paragraphs.append(
        t(
            lang,
            "hindsight_intro_" + h.source,
            start=h.start.strftime("%Y-%m-%d %H:%M"),
            end=h.end.strftime("%Y-%m-%d %H:%M"),
            q=quantile_column(h.quantile),
        )
    )
    sec.paragraphs.append(
        t(lang, "hindsight_short_priced", price=fmt_number(unserved, lang, 2))
        if unserved is not None
        else t(lang, "hindsight_short_fallback")
    )
    for name, g in h.signals.groupby("signal", sort=False):
        sec.charts.append(hindsight_signal_chart(str(name), g, low, high, h.quantile, lang))
    for model, g in h.gpus.groupby("gpu_model", sort=False):
        sec.charts.append(hindsight_capacity_chart(str(model), g, lang))
    acc = h.accuracy()
    sec.tables.append(
        Table(
            "hindsight_accuracy",
            t(lang, "tbl_hindsight_accuracy"),
            [
                Column("signal", t(lang, "col_signal")),
                Column("points", t(lang, "col_points"), 0),
                Column("mae", t(lang, "col_mae"), 2),
                Column(
                    "coverage",
                    t(lang, "col_coverage", low=quantile_column(low), high=quantile_column(high)),
                    0,
                    percent=True,
                ),
                Column(
                    "above_q",
                    t(lang, "col_above_q", q=quantile_column(h.quantile)),
                    0,
                    percent=True,
                ),
            ],
            _records(acc),
        )
    )
    money_cols = [
        Column("planned_gpu_hours", t(lang, "col_planned_gpu_h"), 0),
        Column("used_gpu_hours", t(lang, "col_used_gpu_h"), 0),
        Column("idle_gpu_hours", t(lang, "col_idle_gpu_h"), 0),
        Column("idle_cost", _money(t(lang, "col_idle_cost"), cur), 2),
        Column("short_gpu_hours", t(lang, "col_short_gpu_h"), 0),
        Column("short_cost", _money(t(lang, "col_short_cost"), cur), 2),
    ]
    pool_rows = _records(h.pools)
    for r in pool_rows:
        r["tier"] = t(lang, "tier_" + str(r["tier"]))
    sec.tables.append(
        Table(
            "hindsight_pools",
            t(lang, "tbl_hindsight_pools"),
            [
                Column("pool", t(lang, "col_pool")),
                Column("tier", t(lang, "col_tier")),
                Column("gpu_model", t(lang, "col_gpu_model")),
                *money_cols,
            ],
            pool_rows,
        )
    )
    tier_rows = _records(h.by_tier())
    for r in tier_rows:
        r["tier"] = t(lang, "tier_" + str(r["tier"]))
    sec.tables.append(
        Table(
            "hindsight_tiers",
            t(lang, "tbl_hindsight_tiers"),
            [Column("tier", t(lang, "col_tier")), *money_cols],
            tier_rows,
        )
    )
    sec.paragraphs.extend(h.notes)
    return sec


# ---------------------------------------------------------------- capacity review


def _pool_gpus(config: Config, plan: CapacityPlan) -> dict[str, np.ndarray]:
    """Effective GPUs per pool on the plan's timeline (spot discounted for reclamation)."""
    pools = {p.name: p for p in config.pools}
    return {
        pp.pool: np.array(pp.target_nodes, dtype=float)
        * effective_gpus(pools[pp.pool], 1, config.policy.cycle_s)
        for pp in plan.pools
        if pp.pool in pools
    }


def _period_cost_rows(plan: CapacityPlan, grid: pd.DatetimeIndex, fmt: str) -> list[dict[str, Any]]:
    step_h = plan.step_s / 3600.0
    periods = np.asarray(grid.strftime(fmt))
    rows = []
    tiers = sorted({p.tier for p in plan.pools}, key=lambda x: TIER_ORDER.get(x, 9))
    for period in dict.fromkeys(periods):
        mask = periods == period
        row: dict[str, Any] = {"period": str(period)}
        total = 0.0
        for tier in tiers:
            cost = sum(
                float(np.asarray(p.target_nodes, dtype=float)[mask].sum())
                * p.gpus_per_node
                * p.price_per_gpu_hour
                * step_h
                for p in plan.pools
                if p.tier == tier
            )
            row[tier] = cost
            total += cost
        row["total"] = total
        rows.append(row)
    return rows


def _action_reason(plan: CapacityPlan, index: int, lang: str) -> str:
    """The planner's reason in ``lang``: translated phrase by phrase, every number kept.

    A reason whose phrases are all unknown to the translation falls back to a sentence
    built from the action's fields, with the planner's own words beside it.
    """
    a = plan.actions[index]
    if lang == "en":
        return a.reason
    text = translate_reason(a.reason, lang)
    if text is not None:
        return text
    pool = next((p for p in plan.pools if p.pool == a.pool), None)
    lead_min = (pool.lead_time_s / 60) if pool else 0.0
    built = t(
        lang,
        "reason_" + a.decision.replace("-", "_"),
        pool=a.pool,
        current=a.current_nodes,
        target=a.target_nodes,
        amount=abs(a.amount),
        needed_at=a.needed_at[11:16] + "Z",
        lead=fmt_number(lead_min, lang, 0),
        cost=fmt_number(abs(a.cost_delta_per_hour), lang, 2),
        q=quantile_column(plan.quantile),
        bound=", ".join(pool.binding) if pool and pool.binding else "–",
    )
    return f"{built} ({a.reason})"


REPORT_STEPS = 5
"""Units :func:`build_capacity_report` counts besides backtests and scenarios: one after
the signals, the accuracy table, the forecast against actual, capacity, actions to
utilization."""


def build_capacity_report(
    config: Config,
    history: History,
    plan: CapacityPlan,
    forecasts: Mapping[str, SeriesForecast],
    source: str,
    lang: str = "en",
    history_window: pd.Timedelta = HISTORY_WINDOW,
    backtest_origins: int = 3,
    recorded: Sequence[reviewing.RecordedCycle] = (),
    progress: Progress | None = None,
) -> Report:
    """The capacity review: history and forecast, accuracy, forecast against actual over the
    review period (from ``recorded`` cycles, or the backtest when there are none), plan,
    actions, cost, utilization.

    ``progress`` counts one unit per group of sections below, each backtest origin and
    each scenario of the commitment projection."""
    bar = progress or Progress(False)
    bar.add_total(REPORT_STEPS)
    q = plan.quantile
    quantiles = sorted(set(config.forecast.quantiles) | {0.5, q})
    low, high = quantiles[0], quantiles[-1]
    grid = pd.DatetimeIndex(pd.to_datetime(plan.timeline).tz_localize(None), name="timestamp")
    step_h = plan.step_s / 3600.0
    sections: list[Section] = []

    # Signals: history with forecast bands.
    sig = Section(
        "signals",
        t(lang, "sec_signals"),
        [
            t(
                lang,
                "sec_signals_intro",
                q=quantile_column(q),
                low=quantile_column(low),
                high=quantile_column(high),
            )
        ],
    )
    sig_rows = []
    units = {s.name: s.unit for s in config.signals}
    for s in plan.signals:
        fc = forecasts.get(s.name)
        if fc is None:
            continue
        y = history[s.name]
        tail = y[y.index > fc.last_timestamp - history_window]
        shown = fc.frame[fc.frame.index <= grid[-1] + pd.Timedelta(seconds=plan.step_s)]
        view = SeriesForecast(**{**fc.__dict__, "frame": shown}) if len(shown) >= 2 else fc
        sig.charts.append(
            signal_chart(s.name, units.get(s.name, s.unit), tail, view, low, high, q, lang)
        )
        sig_rows.append(
            {
                "signal": s.name,
                "unit": s.unit,
                "estimator": s.estimator,
                "last_value": s.last_value,
                "last_timestamp": s.last_timestamp,
                "peak_q": s.peak_at_quantile,
                "stale": t(lang, "yes") if s.stale else t(lang, "no"),
            }
        )
    sig.tables.append(
        Table(
            "signals",
            t(lang, "tbl_signals"),
            [
                Column("signal", t(lang, "col_signal")),
                Column("unit", t(lang, "col_unit")),
                Column("estimator", t(lang, "col_estimator")),
                Column("last_value", t(lang, "col_last_value"), 2),
                Column("last_timestamp", t(lang, "col_last_timestamp")),
                Column("peak_q", t(lang, "col_peak_q", q=quantile_column(q)), 2),
                Column("stale", t(lang, "col_stale")),
            ],
            sig_rows,
        )
    )
    sections.append(sig)
    bar.update(label="accuracy")

    # Accuracy against the baselines.
    backtests: dict[str, Backtest] = {}
    acc_rows, skipped = accuracy_rows(
        history,
        forecasts,
        quantiles,
        backtest_origins,
        config.forecast.method,
        keep=backtests,
        progress=bar,
    )
    acc = Section(
        "accuracy",
        t(lang, "sec_accuracy"),
        [
            t(
                lang,
                "sec_accuracy_intro",
                low=quantile_column(low),
                high=quantile_column(high),
                n=backtest_origins,
            )
        ],
    )
    if not acc_rows:
        acc.paragraphs.append(t(lang, "accuracy_none"))
    for r in acc_rows:
        r["chosen"] = t(lang, "yes") if r["chosen"] else ""
    acc.tables.append(
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
            acc_rows,
        )
    )
    if skipped:
        acc.paragraphs.append(t(lang, "accuracy_skipped", what="; ".join(skipped)))
    sections.append(acc)
    bar.update(label="forecast against actual")

    hindsight = (
        reviewing.from_records(config, history, recorded, q)
        if recorded
        else reviewing.from_backtests(config, history, backtests, q)
    )
    sections.append(hindsight_section(hindsight, config, low, high, lang))
    bar.update(label="capacity")

    # Capacity against demand, per GPU model and pool.
    pool_gpus = _pool_gpus(config, plan)
    median = demand_by_model(config, dict(forecasts), grid, 0.5)
    cap = Section(
        "capacity", t(lang, "sec_capacity"), [t(lang, "sec_capacity_intro", q=quantile_column(q))]
    )
    util_rows: list[dict[str, Any]] = []
    for model in sorted({p.gpu_model for p in plan.pools}):
        pools = [
            (p.pool, p.tier, pool_gpus[p.pool])
            for p in plan.pools
            if p.gpu_model == model and p.pool in pool_gpus
        ]
        d_q = np.array(plan.demand_gpus.get(model, [0.0] * len(grid)), dtype=float)
        d_m = median.get(model, np.zeros(len(grid)))
        cap.charts.append(capacity_chart(model, grid, pools, d_q, d_m, q, lang))
        capacity = sum((g for _, _, g in pools), np.zeros(len(grid)))
        paid = sum(
            (
                np.array(p.target_nodes, dtype=float) * p.gpus_per_node
                for p in plan.pools
                if p.gpu_model == model
            ),
            np.zeros(len(grid)),
        )
        util_rows.append(
            {
                "gpu_model": model,
                "capacity_gpu_hours": float(paid.sum() * step_h),
                "demand_median_gpu_hours": float(d_m.sum() * step_h),
                "demand_q_gpu_hours": float(d_q.sum() * step_h),
                "idle_gpu_hours": float(np.maximum(0.0, capacity - d_m).sum() * step_h),
                "short_gpu_hours": float(np.maximum(0.0, d_m - capacity).sum() * step_h),
                "short_q_gpu_hours": float(np.maximum(0.0, d_q - capacity).sum() * step_h),
                "utilization": float(np.minimum(d_m, capacity).sum() / paid.sum())
                if paid.sum()
                else 0.0,
            }
        )
    pool_rows = []
    for p in plan.pools:
        pool_rows.append(
            {
                "pool": p.pool,
                "tier": t(lang, "tier_" + p.tier),
                "gpu_model": p.gpu_model,
                "gpus_per_node": p.gpus_per_node,
                "current_nodes": p.current_nodes,
                "target_now": p.target_nodes[0] if p.target_nodes else p.current_nodes,
                "target_max": max(p.target_nodes) if p.target_nodes else p.current_nodes,
                "price_per_gpu_hour": p.price_per_gpu_hour,
                "lead_time_min": p.lead_time_s / 60,
                "binding": ", ".join(p.binding) or "–",
            }
        )
    cap.tables.append(
        Table(
            "pools",
            t(lang, "tbl_pools"),
            [
                Column("pool", t(lang, "col_pool")),
                Column("tier", t(lang, "col_tier")),
                Column("gpu_model", t(lang, "col_gpu_model")),
                Column("gpus_per_node", t(lang, "col_gpus_per_node"), 0),
                Column("current_nodes", t(lang, "col_current_nodes"), 0),
                Column("target_now", t(lang, "col_target_now"), 0),
                Column("target_max", t(lang, "col_target_max"), 0),
                Column("price_per_gpu_hour", t(lang, "col_price_gpu_hour"), 2),
                Column("lead_time_min", t(lang, "col_lead_min"), 0),
                Column("binding", t(lang, "col_binding")),
            ],
            pool_rows,
        )
    )
    if plan.mig.get("models"):
        cap.paragraphs.append(t(lang, "mig_intro"))
        _add_mig(cap, config, plan, grid, lang)
    sections.append(cap)
    bar.update(label="actions and cost")

    # Actions with reasons.
    act = Section("actions", t(lang, "sec_actions"), [t(lang, "sec_actions_intro")])
    act.tables.append(
        Table(
            "actions",
            t(lang, "tbl_actions"),
            [
                Column("pool", t(lang, "col_pool")),
                Column("decision", t(lang, "col_decision")),
                Column("nodes", t(lang, "col_nodes")),
                Column("needed_at", t(lang, "col_needed_at")),
                Column("cost_delta_per_hour", t(lang, "col_cost_delta"), 2),
                Column("reason", t(lang, "col_reason")),
            ],
            [
                {
                    "pool": a.pool,
                    "decision": t(lang, "decision_" + a.decision.replace("-", "_")),
                    "nodes": f"{a.current_nodes} → {a.target_nodes}"
                    if a.kind == "nodes"
                    else str(a.details.get("layout", "")),
                    "needed_at": a.needed_at,
                    "cost_delta_per_hour": a.cost_delta_per_hour,
                    "reason": _action_reason(plan, i, lang),
                }
                for i, a in enumerate(plan.actions)
            ],
        )
    )
    sections.append(act)

    # Cost by tier per day and month.
    tiers = sorted({p.tier for p in plan.pools}, key=lambda x: TIER_ORDER.get(x, 9))
    cost_cols = (
        [Column("period", t(lang, "col_period"))]
        + [Column(x, t(lang, "tier_" + x), 2) for x in tiers]
        + [Column("total", t(lang, "col_total"), 2)]
    )
    monthly_rows = _period_cost_rows(plan, grid, "%Y-%m")
    for r in monthly_rows:
        r["period"] = month_label(r["period"], lang)
    cost = Section("cost", t(lang, "sec_cost"), [t(lang, "sec_cost_intro")])
    by_tier = {
        x: sum(
            (
                np.array(p.target_nodes, dtype=float) * p.gpus_per_node * p.price_per_gpu_hour
                for p in plan.pools
                if p.tier == x
            ),
            np.zeros(len(grid)),
        )
        for x in tiers
    }
    cost.charts.append(tier_cost_chart(grid, by_tier, lang))
    cost.tables.append(
        Table(
            "cost_daily",
            t(lang, "tbl_cost_daily"),
            cost_cols,
            _period_cost_rows(plan, grid, "%Y-%m-%d"),
        )
    )
    cost.tables.append(Table("cost_monthly", t(lang, "tbl_cost_monthly"), cost_cols, monthly_rows))
    sections.append(cost)

    # Utilization and waste.
    util = Section(
        "utilization",
        t(lang, "sec_utilization"),
        [t(lang, "sec_utilization_intro", q=quantile_column(q))],
    )
    util.tables.append(
        Table(
            "utilization",
            t(lang, "tbl_utilization"),
            [
                Column("gpu_model", t(lang, "col_gpu_model")),
                Column("capacity_gpu_hours", t(lang, "col_capacity_gpu_h"), 1),
                Column("demand_median_gpu_hours", t(lang, "col_demand_median_gpu_h"), 1),
                Column(
                    "demand_q_gpu_hours", t(lang, "col_demand_q_gpu_h", q=quantile_column(q)), 1
                ),
                Column("idle_gpu_hours", t(lang, "col_idle_gpu_h"), 1),
                Column("short_gpu_hours", t(lang, "col_short_gpu_h"), 1),
                Column("short_q_gpu_hours", t(lang, "col_short_q_gpu_h", q=quantile_column(q)), 1),
                Column("utilization", t(lang, "col_utilization"), 1, percent=True),
            ],
            util_rows,
        )
    )
    sections.append(util)
    bar.update(label="commitment advice")

    # Commitment advice over the plan's horizon, from the same forecasts and pools.
    advice: list[CommitmentAdvice] = []
    if plan.horizon_s >= 3600 and any(p.tier == "reserved" for p in config.pools):
        from scaler.reports.finance import project

        now = pd.Timestamp(plan.created_at).tz_localize(None)
        projection = project(
            config, forecasts, now, pd.Timedelta(seconds=plan.horizon_s), progress=bar
        )
        advice = projection.commitments
        if advice:
            sections.append(commitment_section(projection, config, lang))

    items = _bound_pools(config, plan, lang)
    items += _commitment_items(advice, lang)
    items += _lost_to_baseline(acc_rows, lang)
    if not hindsight.pools.empty:
        tot = hindsight.pools[
            ["short_gpu_hours", "short_cost", "idle_gpu_hours", "idle_cost"]
        ].sum()
        cur = config.finance.currency
        items.append(
            (
                2 if tot["short_gpu_hours"] > 0 else 4,
                t(
                    lang,
                    "summary_hindsight",
                    short=fmt_number(tot["short_gpu_hours"], lang, 0),
                    short_cost=f"{fmt_number(tot['short_cost'], lang, 2)} {cur}".strip(),
                    idle=fmt_number(tot["idle_gpu_hours"], lang, 0),
                    idle_cost=f"{fmt_number(tot['idle_cost'], lang, 2)} {cur}".strip(),
                ),
                "hindsight",
            )
        )
    sections.insert(0, summary_section(items, lang))

    if plan.notes:
        sections.append(
            Section(
                "notes",
                t(lang, "sec_notes"),
                [t(lang, "notes_planner"), *[translate_reason(n, lang) or n for n in plan.notes]],
            )
        )

    paid_total = sum(r["capacity_gpu_hours"] for r in util_rows)
    figures = [
        KeyFigure(
            "cost_per_hour_current",
            t(lang, "fig_cost_now"),
            float(plan.cost["per_hour_current"]),
            t(lang, "unit_per_hour"),
        ),
        KeyFigure(
            "cost_per_hour_planned",
            t(lang, "fig_cost_planned"),
            float(plan.cost["per_hour_now"]),
            t(lang, "unit_per_hour"),
        ),
        KeyFigure(
            "cost_horizon_total",
            t(lang, "fig_cost_horizon", hours=fmt_number(plan.horizon_s / 3600, lang, 0)),
            float(plan.cost["horizon_total"]),
            "",
        ),
        KeyFigure("changes", t(lang, "fig_changes"), float(len(plan.changes())), "", 0),
        KeyFigure(
            "expected_unserved_gpu_hours",
            t(lang, "fig_unserved"),
            float(plan.risk["expected_unserved_gpu_hours"]),
            t(lang, "unit_gpu_hours"),
        ),
        KeyFigure(
            "idle_gpu_hours",
            t(lang, "fig_idle"),
            round(sum(r["idle_gpu_hours"] for r in util_rows), 2),
            t(lang, "unit_gpu_hours"),
        ),
        KeyFigure(
            "utilization_percent",
            t(lang, "fig_utilization"),
            round(
                100.0
                * sum(r["utilization"] * r["capacity_gpu_hours"] for r in util_rows)
                / paid_total,
                2,
            )
            if paid_total
            else 0.0,
            "%",
            1,
        ),
    ]
    return Report(
        kind="report",
        lang=lang,
        title=t(lang, "title_report"),
        subtitle=t(
            lang,
            "subtitle_report",
            source=source,
            created=plan.created_at,
            hours=fmt_number(plan.horizon_s / 3600, lang, 0),
            q=quantile_column(q),
            version=__version__,
        ),
        created_at=plan.created_at,
        figures=figures,
        sections=sections,
        data={"plan": plan.to_dict()},
    )


def mig_share(model: str, profile: str) -> float:
    """Share of a GPU's compute one instance of ``profile`` takes (``3g.40gb`` on A100: 3/7)."""
    if profile == "whole":
        return 1.0
    slices = gpu_model(model).mig_compute_slices
    head = profile.split(".", 1)[0].removesuffix("g")
    try:
        return min(1.0, int(head) / slices) if slices else 1.0
    except ValueError:
        return 1.0


def _mig_pool_columns(lang: str) -> list[Column]:
    return [
        Column("pool", t(lang, "col_pool")),
        Column("target_now", t(lang, "col_target_now"), 0),
        Column("target_max", t(lang, "col_target_max"), 0),
        Column("mig_nodes", t(lang, "col_mig_nodes"), 0),
        Column("gpus", t(lang, "col_mig_gpus"), 0),
        Column("gpus_used", t(lang, "col_mig_gpus_used"), 0),
    ]


def mig_pool_rows(plan: CapacityPlan) -> list[dict[str, Any]]:
    """Per MIG-managed pool, the tier plan's node counts beside the nodes the MIG layouts cover.

    Both come from the one plan: the MIG layouts are planned on the tier plan's target now,
    so ``mig_nodes == target_now`` holds for a plan made by one cycle.
    """
    rows = []
    by_pool = {p.pool: p for p in plan.pools}
    for _model, m in sorted(plan.mig.get("models", {}).items()):
        for name in m.get("pools", []):
            pp = by_pool.get(name)
            if pp is None:
                continue
            nodes = [n for n in m.get("nodes", []) or [] if n.get("pool") == name]
            rows.append(
                {
                    "pool": name,
                    "target_now": pp.target_nodes[0] if pp.target_nodes else pp.current_nodes,
                    "target_max": max(pp.target_nodes) if pp.target_nodes else pp.current_nodes,
                    "mig_nodes": len(nodes),
                    "gpus": len(nodes) * pp.gpus_per_node,
                    "gpus_used": m.get("gpus_used", 0) if len(m.get("pools", [])) == 1 else None,
                }
            )
    return rows


def _add_mig(
    cap: Section, config: Config, plan: CapacityPlan, grid: pd.DatetimeIndex, lang: str
) -> None:
    """Per MIG profile: demand against capacity in instances, and what an instance-hour costs.

    Reads the plan's ``mig`` section as MIG planning writes it (``models`` with
    ``demand_instances`` on the timeline, ``capacity_instances``, ``shortfall_instances``
    and ``nodes``); an instance is costed at its compute share of the pool's GPU price.
    """
    prices = {p.name: p.price_per_gpu_hour for p in config.pools}
    profile_rows: list[dict[str, Any]] = []
    node_rows: list[dict[str, Any]] = []
    for model, m in sorted(plan.mig.get("models", {}).items()):
        pools = [p for p in m.get("pools", []) if p in prices]
        price = min((prices[p] for p in pools), default=float("nan"))
        peak = m.get("demand_peak_instances", {}) or {}
        capacity = m.get("capacity_instances", {}) or {}
        short = m.get("shortfall_instances", {}) or {}
        for profile in sorted(set(peak) | set(capacity)):
            share = mig_share(model, profile)
            profile_rows.append(
                {
                    "gpu_model": model,
                    "profile": profile,
                    "peak_demand": peak.get(profile, 0),
                    "capacity": capacity.get(profile, 0),
                    "shortfall": short.get(profile, 0),
                    "gpu_share": share,
                    "cost_instance_hour": price * share,
                }
            )
        for n in m.get("nodes", []) or []:
            node_rows.append(
                {
                    "node": n.get("node", ""),
                    "pool": n.get("pool", ""),
                    "current": n.get("current", ""),
                    "target": n.get("target", ""),
                    "gpus_changed": n.get("gpus_changed", 0),
                }
            )
        series = {
            k: np.asarray(v, dtype=float)
            for k, v in (m.get("demand_instances", {}) or {}).items()
            if len(v) == len(grid)
        }
        if series:
            cap.charts.append(mig_chart(model, grid, series, capacity, lang))
    cap.tables.append(Table("mig_pools", t(lang, "tbl_mig_pools"), _mig_pool_columns(lang), []))
    cap.tables[-1].rows = mig_pool_rows(plan)
    for r in cap.tables[-1].rows:
        if r["mig_nodes"] != r["target_now"]:
            cap.paragraphs.append(t(lang, "mig_disagrees", **r))
        elif r["target_max"] > r["target_now"]:
            cap.paragraphs.append(t(lang, "mig_grows", **r))
    cap.tables.append(
        Table(
            "mig_profiles",
            t(lang, "tbl_mig_profiles"),
            [
                Column("gpu_model", t(lang, "col_gpu_model")),
                Column("profile", t(lang, "col_profile")),
                Column("peak_demand", t(lang, "col_peak_instances"), 0),
                Column("capacity", t(lang, "col_capacity_instances"), 0),
                Column("shortfall", t(lang, "col_shortfall_instances"), 0),
                Column("gpu_share", t(lang, "col_gpu_share"), 0, percent=True),
                Column("cost_instance_hour", t(lang, "col_cost_instance_hour"), 3),
            ],
            profile_rows,
        )
    )
    cap.tables.append(
        Table(
            "mig_nodes",
            t(lang, "tbl_mig_nodes"),
            [
                Column("node", t(lang, "col_node")),
                Column("pool", t(lang, "col_pool")),
                Column("current", t(lang, "col_current_layout")),
                Column("target", t(lang, "col_target_layout")),
                Column("gpus_changed", t(lang, "col_gpus_changed"), 0),
            ],
            node_rows,
        )
    )


# ---------------------------------------------------------------- finance


def _money(label: str, currency: str) -> str:
    """A money column's label with the configured currency, when there is one."""
    return f"{label}, {currency}" if currency else label


def _monthly_rows(frame: pd.DataFrame, by: Sequence[str], lang: str) -> list[dict[str, Any]]:
    """One row per month and line (tier, pool or GPU model), with each band side by side."""
    rows: list[dict[str, Any]] = []
    if frame.empty:
        return rows
    for keys, g in frame.groupby(["period", *by], sort=False):
        values = dict(zip(["period", *by], keys, strict=True))
        b = g.set_index("band")
        gpu_h = b["gpu_hours"].astype(float)
        cost = b["cost"].astype(float)
        row: dict[str, Any] = {
            "period": month_label(str(values["period"]), lang),
            "hours": float(b["hours"].iloc[0]),
            **{f"gpu_hours_{x}": float(gpu_h[x]) for x in BANDS},
            **{f"cost_{x}": float(cost[x]) for x in BANDS},
        }
        for k in by:
            row[k] = t(lang, "tier_" + str(values[k])) if k == "tier" else str(values[k])
        rows.append(row)
    return rows


def build_finance_report(
    projection: FinanceProjection,
    config: Config,
    source: str,
    lang: str = "en",
    charts: bool = True,
) -> Report:
    """The finance dry-run: projection by tier and month, scenarios, commitment advice."""
    bands = projection.bands
    base = projection.baseline
    months = len(dict.fromkeys(base.monthly["period"]))
    sections: list[Section] = []
    band_q = {b: quantile_column(bands.level(b)) for b in BANDS}

    proj = Section(
        "projection",
        t(lang, "sec_projection"),
        [
            t(lang, "sec_projection_intro", low=band_q["low"], high=band_q["high"]),
            t(lang, "currency_named", currency=config.finance.currency)
            if config.finance.currency
            else t(lang, "currency_note"),
        ],
    )
    if charts:
        proj.charts.append(monthly_tier_chart(base.monthly, lang))
    cur = config.finance.currency
    band_cols = [
        *[
            Column(f"gpu_hours_{b}", t(lang, "col_gpu_hours_band", band=t(lang, "band_" + b)), 0)
            for b in BANDS
        ],
        *[
            Column(f"cost_{b}", _money(t(lang, "col_cost_band", band=t(lang, "band_" + b)), cur), 2)
            for b in BANDS
        ],
    ]
    lines = {
        "monthly_by_tier": (["tier"], base.monthly),
        "monthly_by_pool": (["pool", "tier", "gpu_model"], base.monthly_pools),
        "monthly_by_model": (
            ["gpu_model"],
            base.monthly_pools.groupby(
                ["period", "gpu_model", "band"], sort=False, as_index=False
            ).agg(hours=("hours", "first"), gpu_hours=("gpu_hours", "sum"), cost=("cost", "sum"))
            if not base.monthly_pools.empty
            else base.monthly_pools,
        ),
    }
    key_cols = {
        "tier": Column("tier", t(lang, "col_tier")),
        "pool": Column("pool", t(lang, "col_pool")),
        "gpu_model": Column("gpu_model", t(lang, "col_gpu_model")),
    }
    for key, (by, frame) in lines.items():
        proj.tables.append(
            Table(
                key,
                t(lang, "tbl_" + key),
                [
                    Column("period", t(lang, "col_month")),
                    *[key_cols[k] for k in by],
                    Column("hours", t(lang, "col_hours"), 0),
                    *band_cols,
                ],
                _monthly_rows(frame, by, lang),
            )
        )
    demand_rows = [{str(k): v for k, v in r.items()} for r in base.demand.to_dict(orient="records")]
    for r in demand_rows:
        r["band"] = t(lang, "band_" + r["band"])
    proj.tables.append(
        Table(
            "demand",
            t(lang, "tbl_finance_demand"),
            [
                Column("gpu_model", t(lang, "col_gpu_model")),
                Column("band", t(lang, "col_band")),
                Column("demand_gpu_hours", t(lang, "col_demand_gpu_h"), 0),
                Column("capacity_gpu_hours", t(lang, "col_capacity_gpu_h"), 0),
                Column("idle_gpu_hours", t(lang, "col_idle_gpu_h"), 0),
                Column("short_gpu_hours", t(lang, "col_short_gpu_h"), 0),
            ],
            demand_rows,
        )
    )
    sections.append(proj)

    scen = Section("scenarios", t(lang, "sec_scenarios"), [t(lang, "sec_scenarios_intro")])
    base_exp = base.total_cost("expected")
    scen_rows = []
    for sp in projection.scenarios:
        row: dict[str, Any] = {
            "scenario": sp.scenario.name if not sp.scenario.is_baseline else t(lang, "baseline"),
            "definition": sp.scenario.text if not sp.scenario.is_baseline else "–",
            **{f"cost_{b}": sp.total_cost(b) for b in BANDS},
            "gpu_hours_expected": sp.total_gpu_hours("expected"),
        }
        for b in BANDS:
            ref = base.total_cost(b)
            row[f"delta_{b}"] = sp.total_cost(b) - ref
            row[f"delta_fraction_{b}"] = (sp.total_cost(b) - ref) / ref if ref else 0.0
        scen_rows.append(row)
    scen.tables.append(
        Table(
            "scenarios",
            t(lang, "tbl_scenarios"),
            [
                Column("scenario", t(lang, "col_scenario")),
                Column("definition", t(lang, "col_definition")),
                *[
                    Column(
                        f"cost_{b}",
                        _money(t(lang, "col_cost_band", band=t(lang, "band_" + b)), cur),
                        2,
                    )
                    for b in BANDS
                ],
                Column(
                    "gpu_hours_expected",
                    t(lang, "col_gpu_hours_band", band=t(lang, "band_expected")),
                    0,
                ),
                *[
                    Column(
                        f"delta_{b}",
                        _money(t(lang, "col_delta_band", band=t(lang, "band_" + b)), cur),
                        2,
                    )
                    for b in BANDS
                ],
                *[
                    Column(
                        f"delta_fraction_{b}",
                        t(lang, "col_delta_percent_band", band=t(lang, "band_" + b)),
                        1,
                        percent=True,
                    )
                    for b in BANDS
                ],
            ],
            scen_rows,
        )
    )
    if len(projection.scenarios) > 1:
        if charts:
            scen.charts.append(scenario_chart(projection, lang))
        side = []
        month_keys = list(dict.fromkeys(base.monthly["period"]))
        totals = [
            sp.monthly[sp.monthly["band"] == "expected"].groupby("period")["cost"].sum()
            for sp in projection.scenarios
        ]
        for m in month_keys:
            side.append(
                {
                    "period": month_label(m, lang),
                    **{f"s{i}": float(tot.get(m, 0.0)) for i, tot in enumerate(totals)},
                }
            )
        scen.tables.append(
            Table(
                "scenarios_monthly",
                t(lang, "tbl_scenarios_monthly"),
                [
                    Column("period", t(lang, "col_month")),
                    *[
                        Column(f"s{i}", sp.scenario.name if i else t(lang, "baseline"), 2)
                        for i, sp in enumerate(projection.scenarios)
                    ],
                ],
                side,
            )
        )
    sections.append(scen)

    sections.append(commitment_section(projection, config, lang))

    fin_items = _commitment_items(projection.commitments, lang)
    for sp in projection.scenarios[1:]:
        ref = base.total_cost("high")
        if ref:
            delta = sp.total_cost("high") - ref
            fin_items.append(
                (
                    2,
                    t(
                        lang,
                        "summary_scenario",
                        scenario=sp.scenario.name,
                        high=fmt_number(100 * delta / ref, lang, 1),
                        expected=fmt_number(
                            100 * (sp.total_cost("expected") / base_exp - 1) if base_exp else 0.0,
                            lang,
                            1,
                        ),
                    ),
                    "scenarios",
                )
            )
    short = base.demand[base.demand["band"] == "high"]
    for r in _records(short):
        if r["short_gpu_hours"] > 0.5:
            fin_items.append(
                (
                    0,
                    t(
                        lang,
                        "summary_finance_short",
                        model=r["gpu_model"],
                        short=fmt_number(r["short_gpu_hours"], lang, 0),
                    ),
                    "projection",
                )
            )
    sections.insert(0, summary_section(fin_items, lang))

    if projection.notes:
        sections.append(
            Section(
                "notes",
                t(lang, "sec_notes"),
                [render_note(n.key, dict(n.params), lang) for n in projection.notes],
            )
        )

    per_month = base_exp / (projection.hours / (365.25 * 24 / 12)) if projection.hours else 0.0
    figures = [
        KeyFigure(
            "horizon_days",
            t(lang, "fig_horizon_days"),
            round(projection.hours / 24, 2),
            t(lang, "unit_days"),
            0,
        ),
        KeyFigure(
            "cost_expected",
            t(lang, "fig_cost_band", band=t(lang, "band_expected")),
            round(base_exp, 2),
            cur,
        ),
        KeyFigure(
            "cost_low",
            t(lang, "fig_cost_band", band=t(lang, "band_low")),
            round(base.total_cost("low"), 2),
            cur,
        ),
        KeyFigure(
            "cost_high",
            t(lang, "fig_cost_band", band=t(lang, "band_high")),
            round(base.total_cost("high"), 2),
            cur,
        ),
        KeyFigure(
            "cost_per_month_expected", t(lang, "fig_cost_per_month"), round(per_month, 2), cur
        ),
        KeyFigure(
            "gpu_hours_expected",
            t(lang, "fig_gpu_hours"),
            round(base.total_gpu_hours("expected"), 2),
            t(lang, "unit_gpu_hours"),
            0,
        ),
        KeyFigure(
            "commitment_saving_per_month",
            t(lang, "fig_commit_saving"),
            round(sum(c.monthly_saving for c in projection.commitments), 2),
            cur,
        ),
    ]
    return Report(
        kind="finance",
        lang=lang,
        title=t(lang, "title_finance"),
        subtitle=t(
            lang,
            "subtitle_finance",
            source=source,
            start=projection.start.strftime("%Y-%m-%d %H:%M"),
            end=projection.end.strftime("%Y-%m-%d %H:%M"),
            months=months,
            version=__version__,
        ),
        created_at=projection.start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        figures=figures,
        sections=sections,
        data={"finance": projection.to_dict(), "pools": [p.model_dump() for p in config.pools]},
    )


def commitment_section(projection: FinanceProjection, config: Config, lang: str) -> Section:
    """Commitment advice: one sentence per GPU model, the advice table and the options behind it."""
    com = Section(
        "commitments",
        t(lang, "sec_commitments"),
        [
            t(
                lang,
                "sec_commitments_intro",
                coverage=fmt_number(95, lang, 0),
                unserved_rule=t(lang, "unserved_refused")
                if config.finance.unserved_price_per_gpu_hour is None
                else t(
                    lang,
                    "unserved_priced",
                    price=fmt_number(config.finance.unserved_price_per_gpu_hour, lang, 2),
                ),
            )
        ],
    )
    com_rows = []
    option_rows: list[dict[str, Any]] = []
    for c in projection.commitments:
        com_rows.append(
            {
                "gpu_model": c.gpu_model,
                "pool": c.pool,
                "decision": t(lang, "commit_kind_" + c.kind),
                "current_nodes": c.current_nodes,
                "recommended_nodes": c.recommended_nodes,
                "change_nodes": c.change_nodes,
                "term": c.term or "–",
                "base_load_gpus": c.base_load_gpus,
                "reserved_price": c.term_price,
                "alternative_price": c.alternative_price,
                "break_even_utilization": c.break_even_utilization,
                "changed_utilization": c.changed_utilization,
                "utilization": c.utilization,
                "unserved_now": c.current_unserved_gpu_hours["expected"],
                "unserved": c.unserved_gpu_hours["expected"],
                "monthly_saving": c.monthly_saving,
                "monthly_saving_low": c.monthly_saving_low,
                "monthly_saving_high": c.monthly_saving_high,
            }
        )
        com.paragraphs.append(_advice_sentence(c, lang))
        option_rows += _option_rows(c, lang)
    com.tables.append(
        Table(
            "commitments",
            t(lang, "tbl_commitments"),
            [
                Column("gpu_model", t(lang, "col_gpu_model")),
                Column("pool", t(lang, "col_pool")),
                Column("decision", t(lang, "col_decision")),
                Column("current_nodes", t(lang, "col_current_nodes"), 0),
                Column("recommended_nodes", t(lang, "col_recommended_nodes"), 0),
                Column("change_nodes", t(lang, "col_change_nodes"), 0),
                Column("term", t(lang, "col_term")),
                Column("base_load_gpus", t(lang, "col_base_load"), 0),
                Column("reserved_price", t(lang, "col_reserved_price"), 2),
                Column("alternative_price", t(lang, "col_alternative_price"), 2),
                Column("break_even_utilization", t(lang, "col_break_even"), 0, percent=True),
                Column("changed_utilization", t(lang, "col_changed_utilization"), 0, percent=True),
                Column("utilization", t(lang, "col_commit_utilization"), 0, percent=True),
                Column("unserved_now", t(lang, "col_unserved_now"), 0),
                Column("unserved", t(lang, "col_unserved_after"), 0),
                *[
                    Column(
                        f"monthly_saving{suffix}",
                        t(lang, "col_saving_band", band=t(lang, "band_" + b)),
                        2,
                    )
                    for b, suffix in (("expected", ""), ("low", "_low"), ("high", "_high"))
                ],
            ],
            com_rows,
        )
    )
    com.tables.append(
        Table(
            "commitment_options",
            t(lang, "tbl_commitment_options"),
            [
                Column("gpu_model", t(lang, "col_gpu_model")),
                Column("nodes", t(lang, "col_option_nodes"), 0),
                Column("term", t(lang, "col_term")),
                Column("price", t(lang, "col_reserved_price"), 2),
                *[
                    Column(f"cost_{b}", t(lang, "col_cost_band", band=t(lang, "band_" + b)), 2)
                    for b in BANDS
                ],
                *[
                    Column(
                        f"unserved_{b}", t(lang, "col_unserved_band", band=t(lang, "band_" + b)), 0
                    )
                    for b in BANDS
                ],
                Column("utilization", t(lang, "col_commit_utilization"), 0, percent=True),
                Column("verdict", t(lang, "col_verdict")),
            ],
            option_rows,
        )
    )
    return com


def _option_rows(c: CommitmentAdvice, lang: str) -> list[dict[str, Any]]:
    """The advice's key options (:meth:`CommitmentAdvice.key_options`) as table rows."""
    rows = []
    for o in c.key_options():
        verdict = (
            "option_recommended"
            if (o.nodes, o.term) == (c.recommended_nodes, c.term)
            else "option_current"
            if o.nodes == c.current_nodes
            else "option_refused"
            if o.refused
            else "option_other"
        )
        rows.append(
            {
                "gpu_model": c.gpu_model,
                "nodes": o.nodes,
                "term": o.term or "–",
                "price": o.price_per_gpu_hour,
                **{f"cost_{b}": o.cost[b] for b in BANDS},
                **{f"unserved_{b}": o.unserved_gpu_hours[b] for b in BANDS},
                "utilization": o.utilization,
                "verdict": t(lang, verdict),
            }
        )
    return rows


def _advice_sentence(c: CommitmentAdvice, lang: str) -> str:
    """One sentence per recommendation, its numbers taken from the advice's fields."""
    money = {"loss": c.detail_value}
    return t(
        lang,
        "advice_" + c.reason,
        model=c.gpu_model,
        pool=c.pool,
        term=t(lang, "term_" + c.term) if c.term else "",
        nodes=abs(c.change_nodes),
        gpus=fmt_number(abs(c.change_nodes) * c.gpus_per_node, lang, 0),
        current=c.current_nodes,
        recommended=c.recommended_nodes,
        committed=fmt_number(c.current_nodes * c.gpus_per_node, lang, 0),
        base=fmt_number(c.base_load_gpus, lang, 0),
        saving=fmt_number(c.monthly_saving, lang, 2),
        saving_low=fmt_number(c.monthly_saving_low, lang, 2),
        saving_high=fmt_number(c.monthly_saving_high, lang, 2),
        extra=fmt_number(-c.monthly_saving, lang, 2),
        break_even=fmt_number(100 * c.break_even_utilization, lang, 0),
        reserved=fmt_number(c.reserved_price, lang, 2),
        price=fmt_number(c.term_price, lang, 2),
        alternative=fmt_number(c.alternative_price, lang, 2),
        utilization=fmt_number(100 * c.utilization, lang, 0),
        changed=fmt_number(100 * c.changed_utilization, lang, 0),
        unserved=fmt_number(c.unserved_gpu_hours["expected"], lang, 0),
        unserved_now=fmt_number(c.current_unserved_gpu_hours["expected"], lang, 0),
        loss=fmt_number(money["loss"], lang, 2 if c.reason != "keep_release_unserved" else 0),
        band=t(lang, "band_case_" + c.detail_band) if c.detail_band else "",
    )


# ---------------------------------------------------------------- writers


def to_json(report: Report) -> dict[str, Any]:
    """Every number the page shows, plus the raw exports; charts by file name and size."""
    return {
        "kind": report.kind,
        "lang": report.lang,
        "title": report.title,
        "subtitle": report.subtitle,
        "created_at": report.created_at,
        "generator": f"tiercast {__version__}",
        "key_figures": {f.key: _json_value(f.value) for f in report.figures},
        "figures": [
            {
                "key": f.key,
                "label": f.label,
                "value": _json_value(f.value),
                "unit": f.unit,
                "digits": f.digits,
                "text": format_figure(f, report.lang),
            }
            for f in report.figures
        ],
        "sections": [
            {
                "key": s.key,
                "title": s.title,
                "paragraphs": s.paragraphs,
                "items": [{"text": text, "link": link} for text, link in s.items],
                "tables": [
                    {
                        "key": tb.key,
                        "title": tb.title,
                        "columns": [{"key": c.key, "label": c.label} for c in tb.columns],
                        "rows": [
                            {c.key: _json_value(r.get(c.key)) for c in tb.columns} for r in tb.rows
                        ],
                    }
                    for tb in s.tables
                ],
                "charts": [
                    {
                        "key": c.key,
                        "title": c.title,
                        "file": f"charts/{c.key}.png",
                        "width": c.width,
                        "height": c.height,
                    }
                    for c in s.charts
                ],
            }
            for s in report.sections
        ],
        "data": report.data,
    }


_CSS = """
body{font-family:"DejaVu Sans",Arial,sans-serif;margin:24px auto;max-width:1040px;color:#222;line-height:1.4}
h1{margin-bottom:0}.subtitle{color:#555;margin-top:4px}
.figures{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.figure{border:1px solid #ccd;border-radius:6px;padding:8px 12px;min-width:150px;background:#f7f9fc}
.figure .label{font-size:12px;color:#555}.figure .value{font-size:20px;font-weight:bold}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
th,td{border:1px solid #ccd;padding:3px 8px;vertical-align:top}th{background:#eef2f8;text-align:left}
td.num{text-align:right;white-space:nowrap}
img{display:block;margin:8px 0;max-width:100%;height:auto}
caption{text-align:left;font-weight:bold;padding:4px 0}
nav a{margin-right:12px}
"""


def render_html(report: Report) -> str:
    lang = report.lang
    esc = html.escape
    out = [
        "<!DOCTYPE html>",
        f'<html lang="{esc(lang)}"><head><meta charset="utf-8">',
        # Nothing may load from anywhere: the file must open offline and leak nothing.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "img-src data:; style-src 'unsafe-inline'\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<link rel="icon" href="data:,">',
        f"<title>{esc(report.title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{esc(report.title)}</h1>",
        f'<p class="subtitle">{esc(report.subtitle)}</p>',
        "<nav>"
        + "".join(f'<a href="#{esc(s.key)}">{esc(s.title)}</a>' for s in report.sections)
        + "</nav>",
        '<div class="figures">',
    ]
    for f in report.figures:
        out.append(
            f'<div class="figure"><div class="label">{esc(f.label)}</div>'
            f'<div class="value" data-key="{esc(f.key)}" data-value="{_json_value(f.value)!r}">'
            f"{esc(format_figure(f, lang))}</div></div>"
        )
    out.append("</div>")
    for s in report.sections:
        out.append(f'<section id="{esc(s.key)}"><h2>{esc(s.title)}</h2>')
        out.extend(f"<p>{esc(p)}</p>" for p in s.paragraphs)
        if s.items:
            out.append("<ul>")
            out.extend(
                f'<li><a href="#{esc(link)}" data-link="{esc(link)}">{esc(text)}</a></li>'
                for text, link in s.items
            )
            out.append("</ul>")
        for ch in s.charts:
            data = base64.b64encode(ch.png).decode("ascii")
            out.append(
                f'<figure><img src="data:image/png;base64,{data}" alt="{esc(ch.alt)}" '
                f'data-chart="{esc(ch.key)}" data-width="{ch.width}" data-height="{ch.height}" '
                f'width="{ch.width}" height="{ch.height}"></figure>'
            )
        for tb in s.tables:
            out.append(f'<table data-table="{esc(tb.key)}"><caption>{esc(tb.title)}</caption><tr>')
            out.extend(f"<th>{esc(c.label)}</th>" for c in tb.columns)
            out.append("</tr>")
            for r in tb.rows:
                out.append("<tr>")
                for c in tb.columns:
                    cls = ' class="num"' if c.digits is not None else ""
                    out.append(f"<td{cls}>{esc(format_cell(r.get(c.key), c, lang))}</td>")
                out.append("</tr>")
            if not tb.rows:
                out.append(f'<tr><td colspan="{len(tb.columns)}">{esc(t(lang, "empty"))}</td></tr>')
            out.append("</table>")
        out.append("</section>")
    out.append(
        f'<p class="subtitle">{esc(t(lang, "footer", version=__version__))}</p></body></html>'
    )
    return "\n".join(out)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report, charts_dir: str | None = "charts") -> str:
    lang = report.lang
    lines = [f"# {report.title}", "", report.subtitle, ""]
    lines += [f"| {t(lang, 'col_figure')} | {t(lang, 'col_value')} |", "| --- | ---: |"]
    lines += [
        f"| {_md_cell(f.label)} | {_md_cell(format_figure(f, lang))} |" for f in report.figures
    ]
    lines.append("")
    for s in report.sections:
        lines += [f"## {s.title}", ""]
        for p in s.paragraphs:
            lines += [p, ""]
        if s.items:
            lines += [f"- [{_md_cell(text)}](#{link})" for text, link in s.items] + [""]
        if charts_dir is not None:
            for c in s.charts:
                lines += [f"![{_md_cell(c.alt)}]({charts_dir}/{c.key}.png)", ""]
        for tb in s.tables:
            lines += [f"**{tb.title}**", ""]
            lines.append("| " + " | ".join(_md_cell(c.label) for c in tb.columns) + " |")
            lines.append(
                "| "
                + " | ".join("---:" if c.digits is not None else "---" for c in tb.columns)
                + " |"
            )
            for r in tb.rows:
                lines.append(
                    "| "
                    + " | ".join(_md_cell(format_cell(r.get(c.key), c, lang)) for c in tb.columns)
                    + " |"
                )
            if not tb.rows:
                lines.append(f"| {t(lang, 'empty')} |" + " |" * (len(tb.columns) - 1))
            lines.append("")
    return "\n".join(lines)


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def write_report(
    report: Report, out_dir: str | Path, formats: Sequence[str] = FORMATS
) -> list[Path]:
    """Write the report in ``formats`` under ``out_dir``; return the files written."""
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise BadInputError(
            f"--format: {', '.join(unknown)} not known; expected some of {', '.join(FORMATS)}"
        )
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInputError(f"--out: cannot create folder {str(out)!r}: {exc.strerror}") from exc
    written: list[Path] = []
    writers: dict[str, Callable[[], None]] = {}

    def html_() -> None:
        p = out / f"{report.kind}.html"
        _atomic_write(p, render_html(report).encode("utf-8"))
        written.append(p)

    def md_() -> None:
        charts = out / "charts"
        charts.mkdir(exist_ok=True)
        for s in report.sections:
            for c in s.charts:
                _atomic_write(charts / f"{c.key}.png", c.png)
                written.append(charts / f"{c.key}.png")
        p = out / f"{report.kind}.md"
        _atomic_write(p, render_markdown(report).encode("utf-8"))
        written.append(p)

    def csv_() -> None:
        folder = out / "csv"
        folder.mkdir(exist_ok=True)
        for s in report.sections:
            for tb in s.tables:
                buf = io.StringIO()
                w = csv.writer(buf, lineterminator="\n")
                w.writerow([c.key for c in tb.columns])
                for r in tb.rows:
                    w.writerow(
                        ["" if (v := _json_value(r.get(c.key))) is None else v for c in tb.columns]
                    )
                p = folder / f"{report.kind}-{tb.key}.csv"
                _atomic_write(p, buf.getvalue().encode("utf-8"))
                written.append(p)

    def json_() -> None:
        p = out / f"{report.kind}.json"
        _atomic_write(
            p,
            json.dumps(to_json(report), indent=2, ensure_ascii=False, default=str).encode("utf-8"),
        )
        written.append(p)

    writers = {"html": html_, "md": md_, "csv": csv_, "json": json_}
    try:
        for f in formats:
            writers[f]()
    except OSError as exc:
        raise TemporaryError(f"writing the {report.kind} under {str(out)!r} failed: {exc}") from exc
    return written
