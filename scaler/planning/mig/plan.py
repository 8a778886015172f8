"""The MIG plan: every MIG-managed pool's layout actions and the plan's ``mig`` section.

Per GPU model: its nodes (from the cluster, else from the config's ``mig_layouts``), its
slice demand, the target layouts with and without changes, when to change, and the
actions; then the ``nvidia.com/mig.config`` label per node and a mig-parted config
(``version: v1``) with one named entry per distinct node layout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from forecaster.estimators import quantile_column
from forecaster.forecasting import SeriesForecast
from scaler.catalog.gpus import gpu_model
from scaler.catalog.mig import Layout, geometry
from scaler.config import Fleet, PolicyConfig, PoolConfig
from scaler.planning.demand import planning_grid
from scaler.planning.mig.actions import (
    drain_of,
    keep_reason,
    name_target,
    node_entry,
    node_targets,
    relayout_action,
    resume_action,
    unchanged_action,
)
from scaler.planning.mig.context import MigContext
from scaler.planning.mig.demand import held_signals, peak_need, slice_demand
from scaler.planning.mig.layouts import Costs, GpuState
from scaler.planning.mig.node_layouts import solve_node_layouts
from scaler.planning.mig.state import MigNode, MigNodeState, configured_nodes
from scaler.planning.mig.timing import when_to_change
from scaler.plans import Action, iso


@dataclass
class MigPlan:
    """The MIG layout actions and the plan's ``mig`` section."""

    actions: list[Action] = field(default_factory=list)
    section: dict[str, Any] = field(default_factory=dict)


def mig_pools(pools: Iterable[PoolConfig]) -> list[PoolConfig]:
    """The MIG-managed pools: those with ``mig_layouts`` set."""
    return [p for p in pools if p.mig_layouts is not None]


def plan_mig(
    fleet: Fleet,
    policy: PolicyConfig,
    forecasts: Mapping[str, SeriesForecast],
    inventory: Mapping[str, int],
    now: pd.Timestamp,
    targets: Mapping[str, int] | None = None,
    method: str = "auto",
    stale: set[str] | None = None,
    node_states: Mapping[str, Sequence[MigNodeState]] | None = None,
    known_configs: Mapping[str, Any] | None = None,
    recent: Mapping[str, Mapping[str, float]] | None = None,
) -> MigPlan:
    """MIG layout actions and the plan's ``mig`` section for every MIG-managed pool.

    ``stale`` names signals whose data is stale or missing: the layouts of a GPU model
    fed by one are held (never re-partitioned on bad data). ``node_states`` are the
    pools' real nodes read from the cluster (names, current layouts, MIG strategy, a
    change in progress; a relayout tiercast started and has not finished gets a
    ``relayout`` action that finishes it, ahead of the others); a pool without an entry is read from its ``mig_layouts``
    (the dry-run without a cluster). ``known_configs`` are the entries of the
    mig-parted config the MIG manager reads: target layouts already there are named
    as there, the others get ``tiercast-`` names and their entries in the actions.
    A pool the tier plan shrinks this cycle keeps its layouts, since which node goes
    is the provider's choice; a node with ``mig.strategy=single`` only gets layouts of
    one profile on every GPU. ``recent`` names, per GPU model, the profiles that plan on
    the peak of their recent instances instead of the forecast, with that peak
    (:func:`scaler.planning.mig.persistence.recent_peaks`); the plan's
    ``demand_instances`` stay the forecast's, so later cycles can judge it again.
    """
    pools = mig_pools(fleet.pools)
    if not pools:
        return MigPlan()
    now = pd.Timestamp(now)
    grid = planning_grid(now, policy.horizon_s, policy.cycle_s)
    demand = slice_demand(fleet, forecasts, grid, policy.quantile)
    held_by_model = held_signals(fleet.workloads, forecasts, stale or set())
    plan = MigPlan()
    # Relayouts an earlier run started and did not finish come first: their nodes are
    # held, and only this action uncordons them (or rolls the change back).
    for p in pools:
        for state in (node_states or {}).get(p.name, ()):
            if state.relayout is not None:
                plan.actions.append(resume_action(p, state, inventory, now))
    configs: dict[str, list[dict]] = {}
    labels: dict[str, str] = {}
    section_pools: dict[str, Any] = {}
    for model in sorted({gpu_model(p.gpu_model).name for p in pools}):
        geometry(model)
        group = [p for p in pools if gpu_model(p.gpu_model).name == model]
        nodes = _group_nodes(group, inventory, targets or {}, node_states)
        forecast = demand.get(model, {})
        flat = {p: float(v) for p, v in (recent or {}).get(model, {}).items() if p in forecast}
        ctx = MigContext(
            model=model,
            now=now,
            grid=grid,
            qname=quantile_column(policy.quantile),
            horizon_h=policy.horizon_s / 3600,
            step_s=policy.cycle_s,
            change_s=max(p.mig_change_s for p in group),
            lead_s=max(p.lead_time_s for p in group),
            inventory=inventory,
            known_configs=known_configs,
            recent=tuple(sorted(flat)),
        )
        planned = {p: np.full(len(grid), flat[p]) if p in flat else v for p, v in forecast.items()}
        out = _plan_model(ctx, group, nodes, planned, method, held_by_model[model])
        out.section["demand_instances"] = _rounded(forecast)
        out.section["recent_peak_instances"] = dict(sorted(flat.items()))
        plan.actions += out.actions
        configs.update(out.configs)
        labels.update(out.labels)
        section_pools[model] = out.section
    plan.section = {
        "quantile": policy.quantile,
        "models": section_pools,
        "node_labels": dict(sorted(labels.items())),
        "mig_parted_config": {"version": "v1", "mig-configs": dict(sorted(configs.items()))},
    }
    return plan


def _rounded(series: Mapping[str, np.ndarray]) -> dict[str, list[float]]:
    """Instances per profile and step as the plan's JSON keeps them."""
    return {p: [round(float(x), 3) for x in v] for p, v in sorted(series.items())}


def _group_nodes(
    group: Sequence[PoolConfig],
    inventory: Mapping[str, int],
    targets: Mapping[str, int],
    node_states: Mapping[str, Sequence[MigNodeState]] | None,
) -> list[MigNode]:
    """The nodes of a GPU model's MIG pools: read from the cluster where ``node_states``
    has the pool, else from its ``mig_layouts``; nodes still to come as new ones."""
    nodes: list[MigNode] = []
    for p in group:
        current = int(inventory.get(p.name, p.min_nodes))
        if node_states is not None and p.name in node_states:
            known = list(node_states[p.name])
        else:
            known = configured_nodes(p, current)
        nodes += _nodes(p, known, current, int(targets.get(p.name, current)))
    return nodes


def _nodes(
    pool: PoolConfig, known: Sequence[MigNodeState], current_nodes: int, target_nodes: int
) -> list[MigNode]:
    """The pool's nodes: the ``known`` ones (held while the pool shrinks), then new ones up
    to ``target_nodes``."""
    shrinking = target_nodes < current_nodes
    out = [
        MigNode(
            pool,
            n.name,
            list(n.current),
            False,
            n.mig_config,
            n.strategy,
            n.held
            or (
                f"pool {pool.name} scales down {current_nodes} -> {target_nodes} this cycle; "
                "its layouts wait until it settles"
                if shrinking
                else None
            ),
        )
        for n in known
    ]
    # Nodes still to come are named when they join; their layout is set on arrival, under
    # the MIG strategy the pool's nodes share (the ClusterPolicy's, as a rule).
    strategies = {n.strategy for n in known}
    strategy = next(iter(strategies)) if len(strategies) == 1 else None
    for k in range(len(out), target_nodes):
        whole = [Layout(whole=True)] * pool.gpus_per_node
        out.append(MigNode(pool, f"{pool.name}-new-{k}", whole, True, strategy=strategy))
    return out


@dataclass
class _ModelMig:
    """One GPU model's share of the MIG plan."""

    actions: list[Action] = field(default_factory=list)
    configs: dict[str, list[dict]] = field(default_factory=dict)
    """mig-parted entries to add, by name."""
    labels: dict[str, str] = field(default_factory=dict)
    """``nvidia.com/mig.config`` per node."""
    section: dict[str, Any] = field(default_factory=dict)


def _plan_model(
    ctx: MigContext,
    group: Sequence[PoolConfig],
    nodes: list[MigNode],
    series: dict[str, np.ndarray],
    method: str,
    held: list[str],
) -> _ModelMig:
    """One GPU model: its slice demand, target layouts per GPU, when to change, and the
    actions with their reasons."""
    model = ctx.model
    gpus = [
        GpuState(lay, n.new, fixed=n.held is not None, single=n.strategy == "single")
        for n in nodes
        for lay in n.current
    ]
    need = peak_need(series, sum(p.mig_whole_gpus for p in group))
    costs = Costs(used_gpu_h=ctx.horizon_h, change_gpu_h=ctx.change_s / 3600)
    best = solve_node_layouts(model, nodes, gpus, need, costs, method)
    keep = solve_node_layouts(model, nodes, gpus, need, costs, method, allow_changes=False)
    timing = when_to_change(ctx, series, gpus, best, keep, held, drain_of(nodes, best))
    chosen = best if timing.mode in ("cover", "save") else keep
    out = _ModelMig()
    unchanged: dict[str, list[str]] = {p.name: [] for p in group}
    pool_nodes: list[dict[str, Any]] = []
    for n, tgt in zip(nodes, node_targets(nodes, chosen), strict=True):
        t = name_target(ctx, n, tgt)
        if not t.in_config:
            out.configs[t.target] = t.entry
        out.labels[n.name] = t.target
        pool_nodes.append(node_entry(t))
        if t.changed:
            out.actions.append(relayout_action(ctx, t, need, timing))
        else:
            unchanged[n.pool.name].append(n.name)
    keep_why = keep_reason(timing, chosen, best, nodes)
    cap = chosen.capacity()
    for p in group:
        if not unchanged[p.name] and any(n.pool is p for n in nodes):
            continue
        out.actions.append(unchanged_action(ctx, p, unchanged[p.name], need, cap, keep_why))
    out.section = {
        "pools": [p.name for p in group],
        "demand_peak_instances": {p: int(n) for p, n in sorted(need.items())},
        "demand_instances": _rounded(series),
        "capacity_instances": {p: int(n) for p, n in sorted(cap.items())},
        "shortfall_instances": dict(sorted(chosen.shortfall.items())),
        "gpus": len(gpus),
        "gpus_used": chosen.used,
        "gpus_changed": chosen.changed,
        "gpus_used_without_changes": keep.used,
        "decision": timing.mode,
        "solver": chosen.solver,
        "window": {"start": iso(timing.window_at), "end": iso(timing.window_end)},
        "saved_gpu_hours": round(timing.saved_h, 3),
        "drain_gpu_hours": round(timing.drain_h, 3),
        "covered_gpu_hours": round(timing.covered_h, 3),
        "drain_shortfall_gpu_hours": round(timing.drain_short_h, 3),
        "nodes": pool_nodes,
    }
    return out
