"""Workload classes in the plan: deferrable training and batch placed into idle capacity.

What it is for: inference is latency-bound and is planned from its forecast (and a
``critical`` training run with it, on capacity of its own); non-critical training and
batch are *deferrable demand*, GPU-hours to be done by a deadline. This module places
that work, after the tier plan is made, into the GPUs the plan holds and the served
need leaves idle (the forecast's troughs, reserved nodes paid for anyway, whole-node
rounding), and never changes the tier plan: when inference rises, the need rises, the
idle GPUs shrink and the placement drops first; that is also what the PriorityClasses
the plan names do in the cluster (placeholders lowest, then batch and training, then
inference and critical runs). Where the idle GPUs do not get the work done by its
deadline, the plan says what the deadline would need: the extra GPUs and nodes of the
cheapest pool with room, for how long, and their cost. Nothing is bought for it here:
spending on deferrable work is a decision the plan prices, not one it takes.

Pure: values in, the plan's ``workloads`` section out (:func:`plan_deferrable`), with
``now`` from the planning cycle. Bad or missing data places nothing (a queue signal
with no fresh value) or holds the Kueue quota where it is (a GPU model held on bad
data); it never lowers any pool.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from forecaster.forecasting import SeriesForecast
from scaler import wording
from scaler.catalog.gpus import gpu_model
from scaler.config import (
    DEFAULT_PRIORITY,
    TIER_ORDER,
    Fleet,
    KueueQuotaConfig,
    PlaceholderProviderConfig,
    PoolConfig,
    WorkloadConfig,
    deadline_value,
)
from scaler.planning.bounds import PlanningCycle
from scaler.planning.coverage import lead_steps
from scaler.planning.demand import demand_by_model
from scaler.plans import iso
from scaler.wording import Reason

PLACEHOLDER_PRIORITY_CLASS = "tiercast-placeholder"


@dataclass(frozen=True)
class DeferredWork:
    """One deferrable workload's work this cycle."""

    workload: WorkloadConfig
    gpu_model: str
    gpu_hours: float
    """GPU-hours left to do (from the config, or the queue signal's newest value)."""
    deadline: pd.Timestamp
    """When it must be done (naive UTC, as the planning grid)."""
    source: str
    """``config`` or ``signal 'NAME'``."""


@dataclass
class Placement:
    """Where one deferrable workload's GPUs go on the grid, and what is left over."""

    work: DeferredWork
    gpus: np.ndarray
    """GPUs of idle capacity the work is given per grid step."""
    due_gpu_hours: float
    """Of its GPU-hours, those due within the horizon (all of them where the deadline
    falls inside it; a share at an even pace where it falls beyond)."""
    placed_gpu_hours: float
    """GPU-hours placed before the deadline (and within the horizon)."""
    by_pool: dict[str, np.ndarray] = field(default_factory=dict)
    """Of ``gpus``, those on each pool's idle GPUs."""
    extra: dict[str, Any] | None = None
    """What the deadline would need beyond the idle GPUs, where it is not met."""


@dataclass
class DeferrablePlan:
    """The plan's ``workloads`` section and the notes the planner adds."""

    section: dict[str, Any] = field(default_factory=dict)
    notes: list[Reason] = field(default_factory=list)


# --- which work, how much, by when ----------------------------------------------------


def deadline_at(text: str, now: pd.Timestamp) -> pd.Timestamp:
    """A deferrable workload's deadline as a naive UTC time: an ISO-8601 time, or ``now``
    plus a duration (``12h``)."""
    kind, value = deadline_value(text)
    now = pd.Timestamp(now)
    if kind == "in":
        return now + pd.Timedelta(seconds=value)
    at = pd.Timestamp(value, unit="s", tz="UTC")
    return at.tz_convert(now.tz) if now.tzinfo is not None else at.tz_localize(None)


def deferred_work(
    fleet: Fleet,
    forecasts: Mapping[str, SeriesForecast],
    now: pd.Timestamp,
    stale: set[str],
) -> tuple[list[DeferredWork], list[Reason]]:
    """Every deferrable workload's work, highest priority and earliest deadline first, and
    the notes for those that cannot be placed (a queue signal without a fresh value)."""
    out: list[DeferredWork] = []
    notes: list[Reason] = []
    for w in fleet.workloads:
        if not w.is_deferrable or w.deferrable is None:
            continue
        hours = w.deferrable.gpu_hours
        source = "config"
        if hours is None:
            fc = forecasts.get(w.signal)
            value = None if fc is None else fc.last_value
            if w.signal in stale or value is None or not math.isfinite(value) or value < 0:
                code = (
                    wording.NOTE_DEFER_STALE if w.signal in stale else wording.NOTE_DEFER_NO_VALUE
                )
                notes.append(Reason(code, {"workload": w.name, "signal": w.signal}))
                continue
            hours, source = float(value), f"signal {w.signal!r}"
        out.append(
            DeferredWork(
                w,
                gpu_model(w.gpu_model).name,
                float(hours),
                deadline_at(w.deferrable.deadline, now),
                source,
            )
        )
    out.sort(key=lambda d: (-d.workload.effective_priority, d.deadline, d.workload.name))
    return out, notes


# --- the capacity the plan holds, and what the served need leaves idle ----------------


def usable_gpus(
    pool: PoolConfig, timeline: Sequence[int], current: int, cycle_s: int
) -> np.ndarray:
    """GPUs of ``pool`` serving at each grid step: a node requested at step k serves
    from k + lead while it stays requested; a released one stops at once."""
    nodes = np.asarray(timeline, dtype=float)
    lead = lead_steps(pool, cycle_s)
    booted = np.concatenate([np.full(min(lead, len(nodes)), float(current)), nodes])[: len(nodes)]
    return np.minimum(nodes, booted) * pool.gpus_per_node


def pool_order(pools: Sequence[PoolConfig]) -> list[PoolConfig]:
    """The order the served need fills pools in (reserved, then cheapest): what is left
    idle is in the last ones, and deferrable work goes to reserved idle GPUs first."""
    return sorted(pools, key=lambda p: (TIER_ORDER[p.tier], p.price_per_gpu_hour, p.name))


def split_by_pool(
    pools: Sequence[PoolConfig], capacity: Mapping[str, np.ndarray], gpus: np.ndarray
) -> dict[str, np.ndarray]:
    """``gpus`` per step spread over ``pools`` in :func:`pool_order`, each up to ``capacity``."""
    left = np.maximum(np.asarray(gpus, dtype=float), 0.0)
    out: dict[str, np.ndarray] = {}
    for p in pool_order(pools):
        take = np.minimum(left, capacity[p.name])
        out[p.name] = take
        left = left - take
    return out


# --- placing the work -------------------------------------------------------------------


def step_hours(grid: pd.DatetimeIndex, cycle_s: int, deadline: pd.Timestamp) -> np.ndarray:
    """Hours of each grid step before ``deadline`` (0 after it, a fraction for the step it
    falls in)."""
    start = (grid - grid[0]).total_seconds().to_numpy() if len(grid) else np.zeros(0)
    left = (deadline - grid[0]).total_seconds() - start
    return np.clip(left, 0.0, float(cycle_s)) / 3600.0


def place(
    work: Sequence[DeferredWork],
    idle: Mapping[str, Mapping[str, np.ndarray]],
    grid: pd.DatetimeIndex,
    cycle_s: int,
) -> list[Placement]:
    """Each work item, in order, takes the idle GPUs of its GPU model, pool by pool in the
    order ``idle`` gives them (reserved first: paid for whether used or not; then
    capacity held for inference's headroom, which the planner may release), as early as
    they come in each (whole replicas, at most ``max_gpus`` at once), until its GPU-hours
    are placed or its deadline passes; later items get what is left.

    ``idle``: GPU model -> pool -> idle GPUs per grid step.
    """
    left = {
        model: {name: np.floor(np.maximum(v, 0.0) + 1e-9) for name, v in pools.items()}
        for model, pools in idle.items()
    }
    horizon_end = grid[-1] + pd.Timedelta(seconds=cycle_s) if len(grid) else pd.Timestamp(0)
    out: list[Placement] = []
    for d in work:
        w = d.workload
        hours = step_hours(grid, cycle_s, d.deadline)
        most = (
            math.inf
            if w.deferrable is None or w.deferrable.max_gpus is None
            else float(w.deferrable.max_gpus)
        )
        width = w.gpus_per_replica
        gpus = np.zeros(len(grid))
        by_pool: dict[str, np.ndarray] = {}
        todo = d.gpu_hours
        for name, room in left.get(d.gpu_model, {}).items():
            cap = np.floor(np.minimum(room, np.maximum(most - gpus, 0.0)) / width + 1e-9) * width
            took = np.zeros(len(grid))
            for j in np.flatnonzero((hours > 0) & (cap > 0)):
                if todo <= 1e-9:
                    break
                take = min(float(cap[j]), math.ceil(todo / hours[j] / width - 1e-9) * width)
                took[j] = take
                todo -= take * hours[j]
            left[d.gpu_model][name] = room - took
            by_pool[name] = took
            gpus += took
        placed = min(d.gpu_hours, float((gpus * hours).sum()))
        span = (d.deadline - grid[0]).total_seconds() if len(grid) else 0.0
        inside = (horizon_end - grid[0]).total_seconds() if len(grid) else 0.0
        due = d.gpu_hours if span <= inside or span <= 0 else d.gpu_hours * inside / span
        out.append(Placement(d, gpus, due, placed, by_pool=by_pool))
    return out


def deadline_need(
    placement: Placement,
    pools: Sequence[PoolConfig],
    targets: Mapping[str, Sequence[int]],
    grid: pd.DatetimeIndex,
    cycle_s: int,
) -> dict[str, Any] | None:
    """What the placement's deadline needs beyond the idle GPUs: the cheapest pool with
    room (on-demand before spot, reserved last: a commitment is not bought for a
    deadline), the nodes to add over the time left after its lead time, and their cost.
    None where the deadline is met."""
    short = placement.due_gpu_hours - placement.placed_gpu_hours
    if short <= 1e-6:
        return None
    d = placement.work
    end = min(d.deadline, grid[-1] + pd.Timedelta(seconds=cycle_s))
    window_h = max(0.0, (end - grid[0]).total_seconds() / 3600.0)
    rank = {"on-demand": 0, "spot": 1, "reserved": 2}
    candidates = sorted(pools, key=lambda p: (rank[p.tier], p.price_per_gpu_hour, p.name))
    out: dict[str, Any] = {"short_gpu_hours": round(short, 3)}
    if d.deadline <= grid[0]:
        out.update(meets_deadline=False, binding="the deadline has passed")
        return out
    for p in candidates:
        hours = window_h - p.lead_time_s / 3600.0
        room = p.max_nodes - max((int(x) for x in targets.get(p.name, [0])), default=0)
        if hours <= 0 or room <= 0:
            continue
        cap = d.workload.deferrable.max_gpus if d.workload.deferrable else None
        gpus = math.ceil(short / hours - 1e-9)
        if cap is not None:
            gpus = min(gpus, cap)
        nodes = min(room, math.ceil(gpus / p.gpus_per_node))
        run_h = short / (nodes * p.gpus_per_node) if nodes else 0.0
        done = min(short, nodes * p.gpus_per_node * min(run_h, hours))
        out.update(
            pool=p.name,
            tier=p.tier,
            extra_gpus=nodes * p.gpus_per_node,
            extra_nodes=nodes,
            hours=round(min(run_h, hours), 3),
            cost=round(nodes * p.price_per_node_hour * min(run_h, hours), 2),
            meets_deadline=done >= short - 1e-6,
        )
        if not out["meets_deadline"]:
            out["binding"] = "max_nodes" if nodes == room else "max_gpus"
        return out
    out.update(meets_deadline=False, binding="no pool has room before the deadline")
    return out


# --- the plan's section -------------------------------------------------------------------


def priority_classes(fleet: Fleet) -> list[dict[str, Any]]:
    """The PriorityClasses the plan names, lowest first: placeholders, then deferrable
    batch and training, then inference and critical runs (which nothing preempts)."""
    out: dict[str, dict[str, Any]] = {}
    for p in fleet.pools:
        if isinstance(p.provider, PlaceholderProviderConfig):
            pc = p.provider.priority_class
            out.setdefault(
                pc,
                {
                    "name": pc,
                    "value": p.provider.priority,
                    "for": ["placeholders"],
                    "preemption_policy": "PreemptLowerPriority",
                },
            )
    if not out:
        out[PLACEHOLDER_PRIORITY_CLASS] = {
            "name": PLACEHOLDER_PRIORITY_CLASS,
            "value": -10,
            "for": ["placeholders"],
            "preemption_policy": "PreemptLowerPriority",
        }
    for w in fleet.workloads:
        name = priority_class_name(w)
        entry = out.setdefault(
            name,
            {
                "name": name,
                "value": w.effective_priority,
                "for": [],
                # Deferrable work never preempts anything to start: it waits for idle GPUs.
                "preemption_policy": "Never" if w.is_deferrable else "PreemptLowerPriority",
            },
        )
        entry["for"].append(w.name)
    return sorted(out.values(), key=lambda e: (int(e["value"]), str(e["name"])))


def priority_class_name(w: WorkloadConfig) -> str:
    """``tiercast-<class>[-critical][-<priority>]``: the class, and the value where not the
    class default."""
    base = f"tiercast-{w.workload_class}" + ("-critical" if w.critical else "")
    default = DEFAULT_PRIORITY["inference" if w.critical else w.workload_class]
    return base if w.effective_priority == default else f"{base}-{w.effective_priority}"


def _hourly(
    grid: pd.DatetimeIndex, cycle_s: int, series: Mapping[str, np.ndarray]
) -> list[dict[str, Any]]:
    """GPU-hours per clock hour of each named series (GPUs per step x step hours)."""
    hours = grid.floor("h")
    step_h = cycle_s / 3600.0
    rows: list[dict[str, Any]] = []
    for hour in hours.unique():
        mask = np.asarray(hours == hour)
        row: dict[str, Any] = {"hour": iso(hour)}
        for name, values in series.items():
            row[name] = round(float(values[mask].sum() * step_h), 3)
        rows.append(row)
    return rows


def _kueue_quota(
    kueue: KueueQuotaConfig | None,
    cycle_s: int,
    idle: Mapping[str, np.ndarray],
    grid: pd.DatetimeIndex,
    held: Mapping[str, str],
    models: set[str],
) -> dict[str, Any] | None:
    """The training ClusterQueue's quota per GPU model: the spare GPUs the plan forecasts
    for the next hour (their least: nominalQuota; their peak less that: borrowingLimit),
    and the same per hour of the horizon. A model held on bad data holds its quota."""
    if kueue is None:
        return None
    hours = grid.floor("h")
    first = np.asarray(hours == hours[0]) if len(grid) else np.zeros(0, bool)
    if first.sum() < max(1, round(3600 / cycle_s)) and len(grid):
        # The first clock hour is partial: the quota spans the next 60 minutes instead.
        first = np.asarray(grid < grid[0] + pd.Timedelta(hours=1))
    named = {gpu_model(k).name: v for k, v in kueue.flavors.items()}
    flavors: dict[str, Any] = {}
    # The models named, else those of the deferrable work (else every pool's).
    for key in sorted(set(named) or models):
        spare = np.floor(np.maximum(idle.get(key, np.zeros(len(grid))), 0.0) + 1e-9)
        nominal = int(spare[first].min()) if first.any() else 0
        peak = int(spare[first].max()) if first.any() else 0
        hourly = [
            {"hour": iso(h), "spare_gpus": int(spare[np.asarray(hours == h)].min())}
            for h in hours.unique()
        ]
        flavors[key] = {
            "flavor": named.get(key),
            "nominal_quota": nominal,
            "borrowing_limit": max(0, peak - nominal) if kueue.borrowing else None,
            "hold": held.get(key),
            "hourly": hourly,
        }
    return {"cluster_queue": kueue.cluster_queue, "resource": kueue.resource, "flavors": flavors}


def plan_deferrable(
    fleet: Fleet,
    forecasts: Mapping[str, SeriesForecast],
    cycle: PlanningCycle,
    need: Mapping[str, np.ndarray],
    timelines: Mapping[str, Sequence[int]],
    held: Mapping[str, str],
    stale: set[str],
    *,
    kueue: KueueQuotaConfig | None,
    currency: str,
) -> DeferrablePlan:
    """The plan's ``workloads`` section: each workload's class, priority and PriorityClass;
    deferrable work placed into idle GPUs, with what unmet deadlines would need; per pool
    and hour the served need, the deferrable work placed and the GPUs left idle; and,
    with ``kueue`` (the config's ``kubernetes.kueue``), the training ClusterQueue's quota.
    ``currency``: the unit the placement notes price in (``finance.currency``).

    ``fleet`` is the whole fleet (deferrable workloads included); ``need`` and
    ``timelines`` are the tier plan's, sized for the served workloads only.
    """
    grid, cycle_s = cycle.grid, cycle.cycle_s
    classes = {
        w.name: {
            "class": w.workload_class,
            "priority": w.effective_priority,
            "priority_class": priority_class_name(w),
            "critical": w.critical,
            "deferrable": w.is_deferrable,
        }
        for w in fleet.workloads
    }
    if kueue is None and not any(w.workload_class != "inference" for w in fleet.workloads):
        # An inference-only fleet: the section names the classes, and nothing else changes.
        return DeferrablePlan({"classes": classes, "priority_classes": priority_classes(fleet)})
    capacity = {
        p.name: usable_gpus(p, timelines[p.name], cycle.current[p.name], cycle_s)
        for p in fleet.pools
    }
    critical = demand_by_model(
        replace(fleet, workloads=tuple(w for w in fleet.workloads if w.critical)),
        dict(forecasts),
        grid,
        cycle.quantile,
    )
    zeros = np.zeros(len(grid))
    served_by_pool: dict[str, np.ndarray] = {}
    idle_by_pool: dict[str, np.ndarray] = {}
    idle: dict[str, dict[str, np.ndarray]] = {}
    for model in sorted({gpu_model(p.gpu_model).name for p in fleet.pools}):
        pools = pool_order(fleet.pools_for(model))
        served = split_by_pool(pools, capacity, need.get(model, zeros))
        for p in pools:
            served_by_pool[p.name] = served[p.name]
            idle_by_pool[p.name] = capacity[p.name] - served[p.name]
        idle[model] = {p.name: idle_by_pool[p.name] for p in pools}
    work, notes = deferred_work(fleet, forecasts, cycle.now, stale)
    placements = place(work, idle, grid, cycle_s)
    placed_by_pool = {p.name: zeros.copy() for p in fleet.pools}
    for pl in placements:
        for name, gpus in pl.by_pool.items():
            placed_by_pool[name] += gpus
            idle_by_pool[name] = idle_by_pool[name] - gpus
        pools = fleet.pools_for(pl.work.gpu_model)
        pl.extra = deadline_need(pl, pools, timelines, grid, cycle_s)
        notes.append(_placement_note(pl, currency))
    deferrable = {pl.work.workload.name: _placement_entry(pl) for pl in placements}
    hourly = {
        p.name: _hourly(
            grid,
            cycle_s,
            {
                "inference_gpu_hours": served_by_pool[p.name],
                "deferrable_gpu_hours": placed_by_pool[p.name],
                "idle_gpu_hours": np.maximum(idle_by_pool[p.name], 0.0),
            },
        )
        for p in fleet.pools
    }
    section: dict[str, Any] = {
        "classes": classes,
        "priority_classes": priority_classes(fleet),
        "critical_gpus": {k: [round(float(x), 4) for x in v] for k, v in sorted(critical.items())},
        "deferrable": deferrable,
        "hourly": hourly,
    }
    models = {gpu_model(w.gpu_model).name for w in fleet.workloads if w.is_deferrable}
    spare = {m: sum(pools.values(), zeros.copy()) for m, pools in idle.items()}
    quota = _kueue_quota(kueue, cycle_s, spare, grid, held, models or set(spare))
    if quota is not None:
        section["kueue"] = quota
    return DeferrablePlan(section, notes)


def _placement_entry(pl: Placement) -> dict[str, Any]:
    d = pl.work
    return {
        "class": d.workload.workload_class,
        "gpu_model": d.gpu_model,
        "source": d.source,
        "gpu_hours": round(d.gpu_hours, 3),
        "deadline": iso(d.deadline),
        "due_in_horizon_gpu_hours": round(pl.due_gpu_hours, 3),
        "placed_gpu_hours": round(pl.placed_gpu_hours, 3),
        "meets_deadline": pl.extra is None,
        "gpus": [round(float(x), 3) for x in pl.gpus],
        "deadline_needs": pl.extra,
    }


def _placement_note(pl: Placement, currency: str) -> Reason:
    """The plan's note on one placement: met, short and why, or the nodes it would need."""
    d = pl.work
    params: dict[str, Any] = {
        "workload": d.workload.name,
        "workload_class": d.workload.workload_class,
        "placed_gpu_hours": pl.placed_gpu_hours,
        "due_gpu_hours": pl.due_gpu_hours,
        "deadline": iso(d.deadline),
        "model": d.gpu_model,
    }
    refs = (f"workloads.deferrable.{d.workload.name}",)
    x = pl.extra
    if x is None:
        return Reason(wording.NOTE_DEFER_MET, params, refs)
    if "pool" not in x:
        params.update(short_gpu_hours=x["short_gpu_hours"], binding=x["binding"])
        return Reason(wording.NOTE_DEFER_SHORT, params, refs)
    params.update(
        extra_nodes=x["extra_nodes"],
        extra_gpus=x["extra_gpus"],
        pool=x["pool"],
        hours=x["hours"],
        cost=x["cost"],
        currency=currency,
    )
    if x["meets_deadline"]:
        return Reason(wording.NOTE_DEFER_NODES, params, refs)
    params["binding"] = x["binding"]
    return Reason(wording.NOTE_DEFER_NODES_SHORT, params, refs)
