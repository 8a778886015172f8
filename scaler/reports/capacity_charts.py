"""The capacity review's charts: signals with their forecast bands, planned capacity
against demand per GPU model, MIG instances per profile, spend by tier, and the
review period's forecast and capacity against what happened."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from forecaster.estimators import quantile_column
from forecaster.forecasting import SeriesForecast
from scaler.config import TIER_ORDER
from scaler.reports.charts import BAND_COLORS, TIER_COLORS, finish_chart, new_figure, time_axis
from scaler.reports.document import Chart
from scaler.reports.i18n import t

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure as MplFigure


def _finish_over_time(
    fig: MplFigure,
    ax: Axes,
    ylabel: str | None,
    key: str,
    title: str,
    lang: str,
    ncols: int,
    alt: str | None = None,
) -> Chart:
    """The end of a chart over time with y from zero: the y label (if any), the date
    axis, then :func:`finish_chart`."""
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    time_axis(ax, lang)
    return finish_chart(fig, ax, key, title, lang, ncols, alt=alt)


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
    """A signal's recent history and its forecast: the low-high band, the median and the
    policy quantile, with a dotted line at the newest sample."""
    import matplotlib.dates as mdates

    fig, ax = new_figure()
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
    ax.axvline(float(mdates.date2num(forecast.last_timestamp)), color="#777777", lw=0.8, ls=":")
    return _finish_over_time(
        fig,
        ax,
        f"{name}, {unit}",
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
    fig, ax = new_figure()
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
    return _finish_over_time(
        fig,
        ax,
        t(lang, "axis_gpus"),
        f"capacity-{model}",
        t(lang, "chart_capacity", model=model),
        lang,
        3,
        alt=t(lang, "chart_capacity_alt", model=model),
    )


def _profile(profile: str, lang: str) -> str:
    """A MIG profile's name; the whole-GPU pseudo-profile in the reader's words."""
    return t(lang, "profile_whole") if profile == "whole" else profile


def mig_chart(
    model: str,
    grid: pd.DatetimeIndex,
    demand: Mapping[str, np.ndarray],
    capacity: Mapping[str, float],
    lang: str,
) -> Chart:
    """MIG instances needed per profile over the timeline, with the planned layouts' capacity."""
    fig, ax = new_figure()
    colors = ["#1b6ca8", "#e07b39", "#5aa55a", "#8e44ad", "#c0392b", "#7f8c8d"]
    for i, (profile, values) in enumerate(sorted(demand.items())):
        color = colors[i % len(colors)]
        ax.step(
            grid,
            values,
            where="post",
            color=color,
            lw=1.2,
            label=t(lang, "legend_mig_demand", profile=_profile(profile, lang)),
        )
        if profile in capacity:
            ax.axhline(
                float(capacity[profile]),
                color=color,
                lw=1.0,
                ls="--",
                label=t(lang, "legend_mig_capacity", profile=_profile(profile, lang)),
            )
    ax.set_ylabel(t(lang, "axis_instances"))
    top = max([float(np.max(v)) for v in demand.values()] + [float(c) for c in capacity.values()])
    ax.set_ylim(0, max(1.0, top) * 1.1)
    time_axis(ax, lang)
    return finish_chart(fig, ax, f"mig-{model}", t(lang, "chart_mig", model=model), lang, 4)


def mig_use_chart(
    model: str,
    grid: pd.DatetimeIndex,
    slices: np.ndarray,
    compute: np.ndarray,
    lang: str,
) -> Chart:
    """The share of a GPU model's MIG instances in use and the share of its GPUs' compute
    they take, on one axis: the two measures the MIG chart and the utilization table show."""
    fig, ax = new_figure()
    ax.step(
        grid,
        100 * slices,
        where="post",
        color="#1b6ca8",
        lw=1.2,
        label=t(lang, "legend_mig_slices"),
    )
    ax.step(
        grid,
        100 * compute,
        where="post",
        color="#e07b39",
        lw=1.2,
        label=t(lang, "legend_mig_compute"),
    )
    ax.set_ylabel(t(lang, "axis_percent"))
    ax.set_ylim(0, 105)
    time_axis(ax, lang)
    return finish_chart(fig, ax, f"mig-use-{model}", t(lang, "chart_mig_use", model=model), lang, 2)


def tier_cost_chart(
    grid: pd.DatetimeIndex, by_tier: Mapping[str, np.ndarray], lang: str, currency: str = ""
) -> Chart:
    """Planned spend per hour by tier over the plan's timeline."""
    fig, ax = new_figure()
    tiers = sorted(by_tier, key=lambda x: TIER_ORDER.get(x, 9))
    ax.stackplot(
        grid,
        *[by_tier[x] for x in tiers],
        labels=[t(lang, "tier_" + x) for x in tiers],
        colors=[TIER_COLORS.get(x, "#999999") for x in tiers],
        alpha=0.7,
        step="post",
    )
    label = t(lang, "axis_cost_per_hour")
    ylabel = f"{label}, {currency}" if currency else label
    return _finish_over_time(fig, ax, ylabel, "cost-by-tier", t(lang, "chart_cost_tier"), lang, 3)


def hindsight_signal_chart(
    name: str, frame: pd.DataFrame, low: float, high: float, q: float, lang: str
) -> Chart:
    """What was forecast for each moment of the review period against what happened."""
    fig, ax = new_figure()
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
    title = t(lang, "chart_hindsight_signal", name=name)
    return _finish_over_time(fig, ax, None, f"hindsight-signal-{name}", title, lang, 4)


def hindsight_capacity_chart(model: str, frame: pd.DataFrame, lang: str) -> Chart:
    """Planned GPUs against the demand that came, shortfall and idle shaded."""
    fig, ax = new_figure()
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
    return _finish_over_time(
        fig,
        ax,
        t(lang, "axis_gpus"),
        f"hindsight-capacity-{model}",
        t(lang, "chart_hindsight_capacity", model=model),
        lang,
        5,
    )
