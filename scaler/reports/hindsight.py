"""The capacity review's forecast-against-actual section, from :class:`reviewing.Hindsight`.

Charts per signal (what was forecast for each moment against what happened) and per
GPU model (planned GPUs against the demand that came), the forecast's accuracy over
the period, and what idle GPUs and unserved demand cost per pool and per tier.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from forecaster.estimators import quantile_column
from scaler.config import FinanceConfig
from scaler.reports.capacity_charts import hindsight_capacity_chart, hindsight_signal_chart
from scaler.reports.document import Column, Section, Table, frame_rows, money_label
from scaler.reports.i18n import fmt_number, t
from scaler.reports.reviewing import Hindsight


def hindsight_section(
    h: Hindsight, finance: FinanceConfig, low: float, high: float, lang: str
) -> Section:
    """The forecast-against-actual section: charts per signal and GPU model, costs per pool/tier."""
    sec = Section("hindsight", t(lang, "sec_hindsight"))
    if h.empty:
        sec.paragraphs.append(t(lang, "hindsight_none"))
        sec.paragraphs += waited_lines(h, lang) + drift_lines(h, lang)
        return sec
    sec.paragraphs += _intro(h, finance.unserved_price_per_gpu_hour, lang)
    sec.paragraphs += waited_lines(h, lang) + drift_lines(h, lang)
    for name, g in h.signals.groupby("signal", sort=False):
        sec.charts.append(hindsight_signal_chart(str(name), g, low, high, h.quantile, lang))
    for model, g in h.gpus.groupby("gpu_model", sort=False):
        sec.charts.append(hindsight_capacity_chart(str(model), g, lang))
    sec.tables.append(_accuracy_table(h, low, high, lang))
    sec.tables += _cost_tables(h, finance.currency, lang)
    sec.paragraphs.extend(h.notes)
    return sec


def _intro(h: Hindsight, unserved_price: float | None, lang: str) -> list[str]:
    """Where the numbers come from and how demand left unserved is priced."""
    return [
        t(
            lang,
            "hindsight_intro_" + h.source,
            start=h.start.strftime("%Y-%m-%d %H:%M"),
            end=h.end.strftime("%Y-%m-%d %H:%M"),
            q=quantile_column(h.quantile),
        ),
        t(lang, "hindsight_short_priced", price=fmt_number(unserved_price, lang, 2))
        if unserved_price is not None
        else t(lang, "hindsight_short_fallback"),
    ]


def waited_lines(h: Hindsight, lang: str) -> list[str]:
    """One line: the GPU-hours that waited for capacity over the period (pending GPU pods,
    Kueue workloads), by GPU model; none when no recorded cycle read them."""
    if h.waited.empty:
        return []
    w = h.waited
    threshold = int(w["threshold_s"].iloc[0])
    total = float(w["waited_gpu_hours"].sum())
    if total <= 0:
        return [t(lang, "hindsight_waited_none", threshold=threshold)]
    models = ", ".join(
        f"{model} {fmt_number(hours, lang, 1)}"
        for model, hours in zip(w["gpu_model"], w["waited_gpu_hours"].astype(float), strict=True)
        if hours > 0
    )
    return [
        t(
            lang,
            "hindsight_waited",
            threshold=threshold,
            hours=fmt_number(total, lang, 1),
            models=models,
            peak=fmt_number(float(w["peak_waiting_gpus"].max()), lang, 0),
            cycles=int(w["cycles"].max()),
        )
    ]


def drift_lines(h: Hindsight, lang: str) -> list[str]:
    """One line per model refitted ahead of schedule because its forecasts drifted."""
    if h.drift.empty:
        return []
    out = []
    for r in h.drift.to_dict(orient="records"):
        out.append(
            t(
                lang,
                "hindsight_drift",
                signal=r["signal"],
                at=pd.Timestamp(r["at"]).strftime("%Y-%m-%d %H:%M"),
                band=r.get("band", ""),
                coverage=fmt_number(100 * float(r.get("coverage", float("nan"))), lang, 0),
                error=fmt_number(100 * float(r.get("error", float("nan"))), lang, 0),
                points=int(r.get("points", 0)),
            )
        )
    return out


def _accuracy_table(h: Hindsight, low: float, high: float, lang: str) -> Table:
    """Per signal: error, band coverage and how often demand beat the policy quantile."""
    return Table(
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
        frame_rows(h.accuracy()),
    )


def _cost_tables(h: Hindsight, currency: str, lang: str) -> list[Table]:
    """GPU-hours planned, used, idle and short with their cost, per pool and per tier."""
    money_cols = [
        Column("planned_gpu_hours", t(lang, "col_planned_gpu_h"), 0),
        Column("used_gpu_hours", t(lang, "col_used_gpu_h"), 0),
        Column("idle_gpu_hours", t(lang, "col_idle_gpu_h"), 0),
        Column("idle_cost", money_label(t(lang, "col_idle_cost"), currency), 2),
        Column("short_gpu_hours", t(lang, "col_short_gpu_h"), 0),
        Column("short_cost", money_label(t(lang, "col_short_cost"), currency), 2),
    ]
    pools = Table(
        "hindsight_pools",
        t(lang, "tbl_hindsight_pools"),
        [
            Column("pool", t(lang, "col_pool")),
            Column("tier", t(lang, "col_tier")),
            Column("gpu_model", t(lang, "col_gpu_model")),
            *money_cols,
        ],
        _tiers_named(frame_rows(h.pools), lang),
    )
    tiers = Table(
        "hindsight_tiers",
        t(lang, "tbl_hindsight_tiers"),
        [Column("tier", t(lang, "col_tier")), *money_cols],
        _tiers_named(frame_rows(h.by_tier()), lang),
    )
    return [pools, tiers]


def _tiers_named(rows: list[dict[str, Any]], lang: str) -> list[dict[str, Any]]:
    """The rows with each tier in the reader's words."""
    for r in rows:
        r["tier"] = t(lang, "tier_" + str(r["tier"]))
    return rows


def hindsight_recommendation(h: Hindsight, currency: str, lang: str) -> list[tuple[int, str, str]]:
    """The period's shortfall and idle capacity with their cost, for the summary (none when the
    review has no pools); ranked higher when demand went unserved."""
    if h.pools.empty:
        return []
    tot = h.pools[["short_gpu_hours", "short_cost", "idle_gpu_hours", "idle_cost"]].sum()
    text = t(
        lang,
        "summary_hindsight",
        short=fmt_number(tot["short_gpu_hours"], lang, 0),
        short_cost=f"{fmt_number(tot['short_cost'], lang, 2)} {currency}".strip(),
        idle=fmt_number(tot["idle_gpu_hours"], lang, 0),
        idle_cost=f"{fmt_number(tot['idle_cost'], lang, 2)} {currency}".strip(),
    )
    return [(2 if tot["short_gpu_hours"] > 0 else 4, text, "hindsight")]
