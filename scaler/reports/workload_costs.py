"""Idle GPU-hours and their cost per workload, shared GPUs priced per physical GPU.

The capacity tables count idle GPUs per GPU model and pool; this one says which workload
leaves them idle. Per served workload, over the plan's timeline:

* **planned**: the GPUs its replicas at the plan's quantile take (:func:`quantile_replicas`
  and :func:`gpus_of_replicas` of :mod:`scaler.planning.demand`, as the planner counts
  them: whole GPUs, the MIG share, or a set of shared GPUs of its own);
* **used**: the GPUs its replicas at the forecast median take, each replica counted at its
  share of a GPU (``1 / replicas per GPU`` on a shared GPU, whose other slots hold other
  replicas);
* **idle**: planned minus used, step by step, never below zero, and its share of planned.

A pooling group (shared workloads of one GPU model and mode on the same GPUs,
:func:`scaler.planning.sharing.pooling_groups`) pays for its physical GPUs once: per step,
each member's planned GPUs are its replicas over the group's summed replicas times the
group's GPUs (pooled, or the dedicated sets where those are fewer; then each member's own
set), so the members' rows add up to the group's physical GPU-hours. Where the history the
plan estimated the joint quantile from is not at hand (the finance report), the group's
GPU-hours are the plan's (its ``sharing`` section), split in the same shares.

Every GPU-hour is priced at the plan's price per GPU-hour of its GPU model
(:func:`plan_price_per_gpu_hour`: the cost of the pools the plan buys over the GPU-hours
they give, the mix of tiers the cost per 1M tokens of :mod:`scaler.reports.tokens` is
priced at). A workload without a forecast, with a stale signal or with no median over the
plan has no data: its row says so and claims no idle.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from forecaster.forecasting import SeriesForecast
from scaler.catalog.gpus import gpu_model
from scaler.config import Fleet, WorkloadConfig
from scaler.planning.demand import (
    gpus_of_replicas,
    on_grid,
    pooled_savings,
    quantile_replicas,
    replicas_for,
)
from scaler.planning.sharing import (
    SHARED_MODES,
    PoolingGroup,
    SharingMode,
    pooling_groups,
    resolved_mode,
    workload_replicas_per_gpu,
)
from scaler.plans import CapacityPlan
from scaler.reports.document import Column, Section, Table, money_label
from scaler.reports.i18n import fmt_number, t

MISSING_REASONS: tuple[str, ...] = ("no_forecast", "stale", "no_median")
"""Why a workload has no data: no forecast of its signal, a stale signal (the planner
holds its pools rather than follow the forecast), or no finite median over the plan."""


@dataclass(frozen=True)
class WorkloadCost:
    """One workload's planned, used and idle GPU-hours over the plan, and their price."""

    workload: str
    gpu_model: str
    mode: SharingMode
    """How its replicas are planned: whole GPUs, MIG, time-slicing or MPS."""
    replicas_per_gpu: float
    """Replicas one GPU holds (the group's on pooled GPUs; ``1 / gpus_per_replica`` on
    whole GPUs, ``1 / share`` on MIG)."""
    group: str | None
    """Its pooling group's key (``H100-80GB/mps``), None when it has GPUs of its own."""
    planned_gpu_hours: float
    """GPU-hours its replicas at the plan's quantile take (NaN without data)."""
    used_gpu_hours: float
    """GPU-hours its replicas at the forecast median take (NaN without data)."""
    idle_gpu_hours: float
    """Planned minus used per step, never below zero (NaN without data)."""
    price_per_gpu_hour: float
    """The plan's price per GPU-hour of its GPU model (NaN where the plan buys none)."""
    missing: str | None = None
    """Why there is no data (one of :data:`MISSING_REASONS`), None when there is."""

    @property
    def idle_share(self) -> float:
        """Idle over planned GPU-hours (NaN without data or planned GPU-hours)."""
        if self.missing is not None or not self.planned_gpu_hours > 0:
            return math.nan
        return self.idle_gpu_hours / self.planned_gpu_hours

    @property
    def planned_cost(self) -> float:
        return self.planned_gpu_hours * self.price_per_gpu_hour

    @property
    def idle_cost(self) -> float:
        return self.idle_gpu_hours * self.price_per_gpu_hour


@dataclass(frozen=True)
class GroupHours:
    """A pooling group's physical GPU-hours over the plan, the sum of its members' rows."""

    key: str
    mode: SharingMode
    workloads: tuple[str, ...]
    replicas_per_gpu: int
    gpu_hours: float


@dataclass(frozen=True)
class WorkloadCosts:
    """Every served workload's row, in config order, and the pooling groups behind them."""

    rows: list[WorkloadCost]
    groups: list[GroupHours]


def plan_price_per_gpu_hour(plan: CapacityPlan) -> dict[str, float]:
    """Per GPU model, what a GPU-hour costs on the plan: its pools' cost over the GPU-hours
    they give (spot at its nominal GPUs), the mix of tiers the plan buys. A model whose
    pools the plan holds at no node has no price."""
    paid: dict[str, float] = {}
    cost: dict[str, float] = {}
    for p in plan.pools:
        hours = float(np.sum(p.target_nodes)) * p.gpus_per_node * plan.step_s / 3600.0
        model = gpu_model(p.gpu_model).name
        paid[model] = paid.get(model, 0.0) + hours
        cost[model] = cost.get(model, 0.0) + hours * p.price_per_gpu_hour
    return {m: cost[m] / h for m, h in paid.items() if h > 0}


def _median(fc: SeriesForecast) -> pd.Series:
    return fc.frame["q0.5"] if "q0.5" in fc.frame.columns else fc.quantile(0.5)


def _missing(
    w: WorkloadConfig,
    forecasts: Mapping[str, SeriesForecast],
    stale: set[str],
    grid: pd.DatetimeIndex,
) -> str | None:
    fc = forecasts.get(w.signal)
    if fc is None:
        return "no_forecast"
    if w.signal in stale:
        return "stale"
    median = _median(fc).to_numpy(dtype=float)
    if not np.isfinite(median).any() or not len(grid):
        return "no_median"
    return None


def _per_replica(w: WorkloadConfig) -> float:
    """GPUs one replica of ``w`` takes on a set of its own: its share where shared."""
    r = workload_replicas_per_gpu(w)
    if resolved_mode(w) in SHARED_MODES and r >= 2:
        return 1.0 / r
    return float(gpus_of_replicas(w, np.ones(1))[0])


def _planned_mode(w: WorkloadConfig) -> SharingMode:
    """The mode ``w`` is planned in: a shared mode no second replica fits is whole GPUs."""
    mode = resolved_mode(w)
    if mode in SHARED_MODES and workload_replicas_per_gpu(w) < 2:
        return "whole"
    return mode


def _plan_group_hours(plan: CapacityPlan, group: PoolingGroup, dedicated_h: float) -> float | None:
    """The group's physical GPU-hours as the plan's ``sharing`` section counts them (its
    dedicated sets less what pooling saves), None where the plan has no such group or
    made it of other workloads."""
    entry = plan.sharing.get("pools", {}).get(group.key)
    if not isinstance(entry, Mapping):
        return None
    if list(entry.get("workloads", [])) != [w.name for w in group.workloads]:
        return None
    return max(0.0, dedicated_h - float(entry.get("saved_gpu_hours", 0.0)))


def workload_costs(
    fleet: Fleet,
    plan: CapacityPlan,
    forecasts: Mapping[str, SeriesForecast],
    history: Mapping[str, pd.Series] | None = None,
) -> WorkloadCosts:
    """A row per served workload of ``fleet`` (module docstring); ``history`` for the pooling
    groups' joint quantile as the planner estimates it."""
    grid = pd.DatetimeIndex(pd.to_datetime(plan.timeline)).tz_localize(None)
    step_h = plan.step_s / 3600.0
    stale = {s.name for s in plan.signals if s.stale}
    served = fleet.served_workloads
    missing = {w.name: _missing(w, forecasts, stale, grid) for w in served}
    usable = {w.signal: forecasts[w.signal] for w in served if missing[w.name] is None}
    workloads, q_replicas, joint = quantile_replicas(fleet, usable, grid, plan.quantile, history)
    quantile = dict(zip((w.name for w in workloads), q_replicas, strict=True))
    median = {w.name: replicas_for(w, on_grid(_median(usable[w.signal]), grid)) for w in workloads}
    planned: dict[str, np.ndarray] = {}
    used: dict[str, np.ndarray] = {}
    for w in workloads:
        planned[w.name] = gpus_of_replicas(w, quantile[w.name])
        used[w.name] = median[w.name] * _per_replica(w)
    groups = _share_groups(plan, workloads, q_replicas, joint, quantile, median, planned, used)
    prices = plan_price_per_gpu_hour(plan)
    in_group = {name: g for g in groups for name in g.workloads}
    rows = []
    for w in served:
        model = gpu_model(w.gpu_model).name
        group = in_group.get(w.name)
        per_gpu = group.replicas_per_gpu if group else 1.0 / _per_replica(w)
        why = missing[w.name]
        if why is None:
            idle = np.maximum(planned[w.name] - used[w.name], 0.0)
            hours = (
                float(np.sum(planned[w.name]) * step_h),
                float(np.sum(used[w.name]) * step_h),
                float(np.sum(idle) * step_h),
            )
        else:
            hours = (math.nan, math.nan, math.nan)
        rows.append(
            WorkloadCost(
                workload=w.name,
                gpu_model=model,
                mode=group.mode if group else _planned_mode(w),
                replicas_per_gpu=float(per_gpu),
                group=group.key if group else None,
                planned_gpu_hours=hours[0],
                used_gpu_hours=hours[1],
                idle_gpu_hours=hours[2],
                price_per_gpu_hour=prices.get(model, math.nan),
                missing=why,
            )
        )
    return WorkloadCosts(rows=rows, groups=groups)


def _share_groups(
    plan: CapacityPlan,
    workloads: Sequence[WorkloadConfig],
    q_replicas: Sequence[np.ndarray],
    joint: Mapping[str, np.ndarray],
    quantile: Mapping[str, np.ndarray],
    median: Mapping[str, np.ndarray],
    planned: dict[str, np.ndarray],
    used: dict[str, np.ndarray],
) -> list[GroupHours]:
    """Replace each pooling group's members' ``planned`` and ``used`` GPUs by their shares
    of the group's physical GPUs; the groups with their GPU-hours."""
    step_h = plan.step_s / 3600.0
    savings = pooled_savings(workloads, q_replicas, joint)
    out = []
    for group in pooling_groups(workloads):
        saving = savings[group.key]
        names = [w.name for w in group.workloads]
        together = np.sum([quantile[n] for n in names], axis=0)
        hours = float(np.sum(saving.pooled) * step_h)
        told = _plan_group_hours(plan, group, float(np.sum(saving.dedicated) * step_h))
        scale = 1.0
        pooled = saving.saved > 0
        if told is not None and hours > 0 and abs(told - hours) > 1e-3:
            # Computed without the plan's history, the joint quantile is wider and may
            # not pool where the plan did: the plan's GPU-hours, pooled, by replicas.
            scale, hours, pooled = told / hours, told, np.ones_like(pooled)
        for w in group.workloads:
            share = np.divide(
                quantile[w.name], together, out=np.zeros_like(together), where=together > 0
            )
            planned[w.name] = scale * np.where(pooled, share * saving.pooled, planned[w.name])
            used[w.name] = median[w.name] * np.where(
                pooled, 1.0 / group.replicas_per_gpu, _per_replica(w)
            )
        out.append(
            GroupHours(
                key=group.key,
                mode=group.mode,
                workloads=tuple(names),
                replicas_per_gpu=group.replicas_per_gpu,
                gpu_hours=hours,
            )
        )
    return out


# ---------------------------------------------------------------- the table


def workload_rows(costs: WorkloadCosts, lang: str) -> list[dict[str, Any]]:
    """The table's rows in ``lang``, a total over the workloads with data last."""
    rows: list[dict[str, Any]] = []
    for c in costs.rows:
        row: dict[str, Any] = {
            "workload": c.workload,
            "gpu_model": c.gpu_model,
            "mode": t(lang, "sharing_mode_" + c.mode),
            "replicas_per_gpu": _replicas_text(c.replicas_per_gpu, lang),
            "price_per_gpu_hour": c.price_per_gpu_hour,
        }
        if c.missing is None:
            row |= {
                "planned_gpu_hours": c.planned_gpu_hours,
                "used_gpu_hours": c.used_gpu_hours,
                "idle_gpu_hours": c.idle_gpu_hours,
                "idle_share": c.idle_share,
                "planned_cost": c.planned_cost,
                "idle_cost": c.idle_cost,
            }
        else:
            row["idle_gpu_hours"] = t(lang, "workload_no_data")
        rows.append(row)
    known = [c for c in costs.rows if c.missing is None]
    if len(known) > 1:
        planned = sum(c.planned_gpu_hours for c in known)
        idle = sum(c.idle_gpu_hours for c in known)
        rows.append(
            {
                "workload": t(lang, "col_total"),
                "gpu_model": "–",
                "mode": "–",
                "replicas_per_gpu": "–",
                "planned_gpu_hours": planned,
                "used_gpu_hours": sum(c.used_gpu_hours for c in known),
                "idle_gpu_hours": idle,
                "idle_share": idle / planned if planned > 0 else math.nan,
                "price_per_gpu_hour": math.nan,
                "planned_cost": _sum_finite(c.planned_cost for c in known),
                "idle_cost": _sum_finite(c.idle_cost for c in known),
            }
        )
    return rows


def _sum_finite(values: Any) -> float:
    """The sum of the priced amounts (a model the plan buys none of has no price)."""
    return float(sum(v for v in values if math.isfinite(v)))


def _replicas_text(value: float, lang: str) -> str:
    """``4`` for MPS with four replicas a GPU, ``0,5`` for a replica of two GPUs."""
    whole = abs(value - round(value)) < 1e-9
    return fmt_number(value, lang, 0 if whole else 2)


def workload_section(costs: WorkloadCosts, quantile: float, currency: str, lang: str) -> Section:
    """The per-workload idle table, with a sentence per pooling group and one naming the
    workloads without data."""
    q = f"q{quantile:g}"
    columns = [
        Column("workload", t(lang, "col_workload")),
        Column("gpu_model", t(lang, "col_gpu_model")),
        Column("mode", t(lang, "col_sharing_mode")),
        Column("replicas_per_gpu", t(lang, "col_replicas_per_gpu")),
        Column("planned_gpu_hours", t(lang, "col_workload_planned_gpu_h", q=q), 1),
        Column("used_gpu_hours", t(lang, "col_workload_used_gpu_h"), 1),
        Column("idle_gpu_hours", t(lang, "col_idle_gpu_h"), 1),
        Column("idle_share", t(lang, "col_idle_share"), 0, percent=True),
        Column("price_per_gpu_hour", money_label(t(lang, "col_price_gpu_hour"), currency), 2),
        Column("planned_cost", money_label(t(lang, "col_workload_planned_cost"), currency), 2),
        Column("idle_cost", money_label(t(lang, "col_idle_cost"), currency), 2),
    ]
    sec = Section(
        "workload_costs", t(lang, "sec_workload_costs"), [t(lang, "sec_workload_costs_intro", q=q)]
    )
    for g in costs.groups:
        sec.paragraphs.append(
            t(
                lang,
                "workload_costs_group",
                group=g.key,
                workloads=", ".join(g.workloads),
                replicas=g.replicas_per_gpu,
                hours=fmt_number(g.gpu_hours, lang, 1),
            )
        )
    without = [
        f"{c.workload} ({t(lang, 'workload_missing_' + c.missing)})"
        for c in costs.rows
        if c.missing is not None
    ]
    if without:
        sec.paragraphs.append(t(lang, "workload_costs_no_data", workloads=", ".join(without)))
    sec.tables.append(
        Table("workload_costs", t(lang, "tbl_workload_costs"), columns, workload_rows(costs, lang))
    )
    return sec


def workload_cost_section(
    fleet: Fleet,
    currency: str,
    plan: CapacityPlan,
    forecasts: Mapping[str, SeriesForecast],
    lang: str,
    history: Mapping[str, pd.Series] | None = None,
) -> Section | None:
    """The section both reports show, priced in ``currency``; None when ``fleet`` serves no
    workload or the plan has no timeline."""
    costs = served_workload_costs(fleet, plan, forecasts, history)
    return workload_section(costs, plan.quantile, currency, lang) if costs is not None else None


def served_workload_costs(
    fleet: Fleet,
    plan: CapacityPlan,
    forecasts: Mapping[str, SeriesForecast],
    history: Mapping[str, pd.Series] | None = None,
) -> WorkloadCosts | None:
    """:func:`workload_costs`, or None when ``fleet`` serves no workload or the plan has no
    timeline (the reports then show no workload table)."""
    if not fleet.served_workloads or not plan.timeline:
        return None
    return workload_costs(fleet, plan, forecasts, history)
