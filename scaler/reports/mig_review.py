"""The MIG part of the capacity review: demand against capacity per profile, in instances.

Reads the plan's ``mig`` section as MIG planning writes it (``models`` with
``demand_instances`` on the timeline, ``demand_peak_instances``,
``capacity_instances``, ``shortfall_instances`` and ``nodes``). An instance is
costed at its compute share of the pool's GPU price (``3g.40gb`` on an A100 takes
3 of 7 compute slices).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from forecaster.estimators import quantile_column
from scaler.catalog.gpus import gpu_model
from scaler.plans import CapacityPlan
from scaler.reports.capacity_charts import mig_chart, mig_use_chart
from scaler.reports.charts import by_day
from scaler.reports.document import Column, Section, Table, money_label
from scaler.reports.i18n import fmt_number, t


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


def add_mig(
    cap: Section,
    prices: Mapping[str, float],
    plan: CapacityPlan,
    grid: pd.DatetimeIndex,
    lang: str,
    currency: str = "",
    daily: bool = False,
) -> None:
    """Per MIG profile: demand against capacity in instances, and what an instance-hour costs;
    ``prices`` is each pool's price per GPU-hour. ``daily``: the charts show each whole
    day's peak (a long plan's steps would draw a barcode)."""
    models = sorted(plan.mig.get("models", {}).items())
    if daily:
        cap.paragraphs.append(t(lang, "charts_daily_mig"))
    shown = _day_peaks if daily else _as_is
    for model, m in models:
        series = {
            k: np.asarray(v, dtype=float)
            for k, v in (m.get("demand_instances", {}) or {}).items()
            if len(v) == len(grid)
        }
        if series:
            capacity = m.get("capacity_instances", {}) or {}
            x, values = shown(grid, list(series.values()))
            peaks = dict(zip(series, values, strict=True))
            cap.charts.append(mig_chart(model, x, peaks, capacity, lang))
    pool_rows = mig_pool_rows(plan)
    for model, m in models:
        use = mig_use(model, m, grid)
        if use is not None:
            cap.paragraphs.append(_use_sentence(model, use, plan.quantile, lang))
            x, (slices, compute) = shown(grid, [use.slices, use.compute])
            cap.charts.append(mig_use_chart(model, x, slices, compute, lang))
    cap.tables.append(
        Table("mig_pools", t(lang, "tbl_mig_pools"), _mig_pool_columns(lang), pool_rows)
    )
    cap.paragraphs += _pool_remarks(pool_rows, lang)
    cap.tables.append(_profiles_table(models, prices, lang, currency))
    cap.tables.append(_nodes_table(models, lang))


def _as_is(
    grid: pd.DatetimeIndex, values: Sequence[np.ndarray]
) -> tuple[pd.DatetimeIndex, list[np.ndarray]]:
    return grid, list(values)


def _day_peaks(
    grid: pd.DatetimeIndex, values: Sequence[np.ndarray]
) -> tuple[pd.DatetimeIndex, list[np.ndarray]]:
    """Each whole day's peak of every series on ``grid`` (:func:`by_day`)."""
    frame = pd.DataFrame({i: np.asarray(v, dtype=float) for i, v in enumerate(values)}, index=grid)
    peaks = by_day(frame, "max")
    return pd.DatetimeIndex(peaks.index), [peaks[i].to_numpy() for i in range(len(values))]


@dataclass(frozen=True)
class MigUse:
    """How one GPU model's MIG layouts are used over the timeline, in two measures a
    reviewer sees side by side: the share of the layouts' instances in use (the MIG chart)
    and the share of the GPUs' compute those instances take (the utilization table's kind)."""

    instances: int
    """Instances the layouts offer."""
    gpus: int
    """GPUs under the layouts."""
    slices: np.ndarray
    """Share of the instances in use per step (demand at the policy quantile, capped)."""
    compute: np.ndarray
    """Share of the GPUs' compute those instances take per step."""
    peak_at: int
    """Step of the most instances in use."""
    peak_used: float
    peak_gpus: float


def mig_use(model: str, m: Mapping[str, Any], grid: pd.DatetimeIndex) -> MigUse | None:
    """Instances in use and the compute they take, per step; None without MIG demand."""
    capacity = {k: float(v) for k, v in (m.get("capacity_instances", {}) or {}).items()}
    demand = {
        k: np.minimum(np.asarray(v, dtype=float), capacity.get(k, 0.0))
        for k, v in (m.get("demand_instances", {}) or {}).items()
        if len(v) == len(grid)
    }
    instances = int(sum(capacity.values()))
    gpus = int(m.get("gpus", 0) or 0)
    if not demand or instances <= 0 or gpus <= 0:
        return None
    used = sum(demand.values())
    compute = sum(v * mig_share(model, k) for k, v in demand.items())
    peak = int(np.argmax(used))
    return MigUse(
        instances,
        gpus,
        np.asarray(used / instances, dtype=float),
        np.asarray(compute / gpus, dtype=float),
        peak,
        float(used[peak]),
        float(compute[peak]),
    )


def _use_sentence(model: str, use: MigUse, q: float, lang: str) -> str:
    """The one sentence that puts slice occupancy and GPU utilization side by side."""
    return t(
        lang,
        "mig_use",
        model=model,
        q=quantile_column(q),
        used=fmt_number(use.peak_used, lang, 0),
        instances=use.instances,
        occupancy=fmt_number(100 * use.slices[use.peak_at], lang, 0),
        peak_gpus=fmt_number(use.peak_gpus, lang, 1),
        gpus=use.gpus,
        peak_compute=fmt_number(100 * use.compute[use.peak_at], lang, 0),
        mean_occupancy=fmt_number(100 * float(use.slices.mean()), lang, 0),
        mean_compute=fmt_number(100 * float(use.compute.mean()), lang, 0),
    )


def _pool_remarks(rows: Sequence[Mapping[str, Any]], lang: str) -> list[str]:
    """A pool whose MIG layouts and tier plan disagree is called out; so is one about to grow."""
    out = []
    for r in rows:
        if r["mig_nodes"] != r["target_now"]:
            out.append(t(lang, "mig_disagrees", **r))
        elif r["target_max"] > r["target_now"]:
            out.append(t(lang, "mig_grows", **r))
    return out


def _profiles_table(
    models: Sequence[tuple[str, Mapping[str, Any]]],
    prices: Mapping[str, float],
    lang: str,
    currency: str = "",
) -> Table:
    """Per GPU model and profile: peak demand, capacity, shortfall and an instance-hour's cost."""
    rows: list[dict[str, Any]] = []
    for model, m in models:
        pools = [p for p in m.get("pools", []) if p in prices]
        price = min((prices[p] for p in pools), default=float("nan"))
        peak = m.get("demand_peak_instances", {}) or {}
        capacity = m.get("capacity_instances", {}) or {}
        short = m.get("shortfall_instances", {}) or {}
        for profile in sorted(set(peak) | set(capacity)):
            share = mig_share(model, profile)
            rows.append(
                {
                    "gpu_model": model,
                    "profile": t(lang, "profile_whole") if profile == "whole" else profile,
                    "peak_demand": peak.get(profile, 0),
                    "capacity": capacity.get(profile, 0),
                    "shortfall": short.get(profile, 0),
                    "gpu_share": share,
                    "cost_instance_hour": price * share,
                }
            )
    return Table(
        "mig_profiles",
        t(lang, "tbl_mig_profiles"),
        [
            Column("gpu_model", t(lang, "col_gpu_model")),
            Column("profile", t(lang, "col_profile")),
            Column("peak_demand", t(lang, "col_peak_instances"), 0),
            Column("capacity", t(lang, "col_capacity_instances"), 0),
            Column("shortfall", t(lang, "col_shortfall_instances"), 0),
            Column("gpu_share", t(lang, "col_gpu_share"), 0, percent=True),
            Column(
                "cost_instance_hour", money_label(t(lang, "col_cost_instance_hour"), currency), 3
            ),
        ],
        rows,
    )


def _nodes_table(models: Sequence[tuple[str, Mapping[str, Any]]], lang: str) -> Table:
    """Each node's current and target layout and the GPUs the change touches."""
    rows = [
        {
            "node": n.get("node", ""),
            "pool": n.get("pool", ""),
            "current": n.get("current", ""),
            "target": n.get("target", ""),
            "gpus_changed": n.get("gpus_changed", 0),
        }
        for _, m in models
        for n in m.get("nodes", []) or []
    ]
    return Table(
        "mig_nodes",
        t(lang, "tbl_mig_nodes"),
        [
            Column("node", t(lang, "col_node")),
            Column("pool", t(lang, "col_pool")),
            Column("current", t(lang, "col_current_layout")),
            Column("target", t(lang, "col_target_layout")),
            Column("gpus_changed", t(lang, "col_gpus_changed"), 0),
        ],
        rows,
    )
