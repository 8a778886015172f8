"""The finance dry-run's charts: expected cost per month by tier, and the scenarios side
by side, each with its low-high range as whiskers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from scaler.config import TIER_ORDER
from scaler.reports.charts import TIER_COLORS, finish_chart, month_axis, new_figure
from scaler.reports.document import Chart
from scaler.reports.finance import BANDS, FinanceProjection
from scaler.reports.i18n import t

if TYPE_CHECKING:
    from matplotlib.axes import Axes


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


def monthly_tier_chart(monthly: pd.DataFrame, lang: str, currency: str = "") -> Chart:
    """Expected cost per month stacked by tier, with the low-high range of the total."""
    fig, ax = new_figure()
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
    month_axis(ax, x, months, lang, currency)
    return finish_chart(fig, ax, "monthly-by-tier", t(lang, "chart_monthly_tier"), lang, 4)


def scenario_chart(projection: FinanceProjection, lang: str, currency: str = "") -> Chart:
    """Expected cost per month for each scenario side by side, low-high as whiskers."""
    fig, ax = new_figure()
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
    month_axis(ax, x, months, lang, currency)
    return finish_chart(fig, ax, "scenarios", t(lang, "chart_scenarios"), lang, min(n, 4))
