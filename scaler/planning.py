"""The tier planner: forecasts and inventory in, a :class:`CapacityPlan` out.

Pure: it takes ``now`` as an argument and touches nothing outside. For each GPU
model it sizes the pools serving it so that, from ``now + lead time`` on, capacity
covers the policy quantile of forecast GPU demand at the least cost:

1. *Levels.* ``need_up`` is the largest quantile demand in the window a pool can
   still influence this cycle, ``[now + lead, now + lead + cycle)``. ``floor`` is
   the demand observed over the last hour plus headroom: the plan never goes below
   what is running now, so a wrong forecast degrades to reactive scaling rather
   than an outage. ``need_keep`` is the largest quantile demand over
   ``[now, now + lead + stabilization)``: capacity needed again within that window
   is not released, because it could not come back in time.
2. *Allocation.* Reserved nodes up to ``min_nodes`` are paid for anyway and used
   first; the rest of the demand is filled cheapest first by effective price, where
   a spot node counts for ``1 - min(0.5, rate * (lead + cycle) / 1h)`` of its GPUs
   (expected loss to reclamation while a replacement boots), so on-demand takes
   over when spot is scarce or too risky.
3. *Bounds.* Per pool min/max, a max step per cycle, then the budget cap (scale-ups
   are trimmed, most expensive first). Every bound that changes a target is named
   in the plan.
4. *Safety.* A stale or missing signal holds every pool it feeds: no scale-down.

A later, optimizing planner may replace step 2; the plan's shape stays.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from forecaster.estimators import quantile_column
from forecaster.forecasting import SeriesForecast
from scaler.catalog import gpu_model
from scaler.config import Config, PoolConfig
from scaler.plans import Action, CapacityPlan, Decision, PoolPlan, SignalSummary, iso
from scaler.translating import current_demand_by_model, demand_by_model, planning_grid


def spot_loss_fraction(pool: PoolConfig, cycle_s: int) -> float:
    """Share of a pool's GPUs expected to be missing at any time through reclamation."""
    if pool.tier != "spot" or pool.spot_interruption_rate_per_hour <= 0:
        return 0.0
    exposure_h = (pool.lead_time_s + cycle_s) / 3600.0
    return min(0.5, pool.spot_interruption_rate_per_hour * exposure_h)


def effective_gpus(pool: PoolConfig, nodes: int | float, cycle_s: int) -> float:
    return float(nodes) * pool.gpus_per_node * (1.0 - spot_loss_fraction(pool, cycle_s))


def allocate(pools: list[PoolConfig], gpus: float, cycle_s: int) -> dict[str, int]:
    """Cheapest node counts per pool covering ``gpus`` GPUs (within each pool's min/max)."""
    alloc = {p.name: p.min_nodes for p in pools}
    remaining = max(0.0, gpus) - sum(effective_gpus(p, p.min_nodes, cycle_s) for p in pools)

    def eff_price(p: PoolConfig) -> float:
        return p.price_per_gpu_hour / max(1e-9, 1.0 - spot_loss_fraction(p, cycle_s))

    for p in sorted(pools, key=lambda p: (eff_price(p), p.name)):
        if remaining <= 1e-9:
            break
        per_node = effective_gpus(p, 1, cycle_s)
        extra = min(p.max_nodes - alloc[p.name], math.ceil(remaining / per_node - 1e-9))
        if extra > 0:
            alloc[p.name] += extra
            remaining -= extra * per_node
    return alloc


def _window_max(
    values: np.ndarray, grid: pd.DatetimeIndex, start: pd.Timestamp, end: pd.Timestamp
) -> float:
    mask = (grid >= start) & (grid < end)
    if not mask.any():
        # The window starts past the horizon: use the last planned step.
        mask = grid == grid[-1] if start >= grid[-1] else grid >= start
    return float(np.max(values[mask]))


def _hhmm(ts: pd.Timestamp) -> str:
    return ts.strftime("%H:%MZ")


def _expected_unserved(
    demand_q: dict[float, np.ndarray], capacity: np.ndarray, step_h: float
) -> float:
    """E[max(0, D - C)] in GPU-hours, D's quantile function interpolated from the columns."""
    if not demand_q:
        return 0.0
    levels = np.array(sorted(demand_q))
    table = np.vstack([demand_q[q] for q in levels])  # (n_q, T)
    us = np.linspace(0.005, 0.995, 100)
    total = 0.0
    for j in range(table.shape[1]):
        d = np.interp(us, levels, table[:, j])
        total += float(np.maximum(0.0, d - capacity[j]).sum())
    return total / len(us) * step_h


def plan_capacity(
    config: Config,
    forecasts: Mapping[str, SeriesForecast],
    inventory: Mapping[str, int],
    now: pd.Timestamp,
    stale: set[str] | None = None,
) -> CapacityPlan:
    """Plan every pool; ``inventory`` is nodes per pool now, ``stale`` the stale signals."""
    policy = config.policy
    q = policy.quantile
    stale = set(stale or ())
    now = pd.Timestamp(now)
    grid = planning_grid(now, policy.horizon_s, policy.cycle_s)
    cycle = pd.Timedelta(seconds=policy.cycle_s)
    step_h = policy.cycle_s / 3600.0
    notes: list[str] = []

    demand = demand_by_model(config, dict(forecasts), grid, q)
    quantiles = sorted({float(c[1:]) for fc in forecasts.values() for c in fc.frame.columns} | {q})
    demand_all = {qq: demand_by_model(config, dict(forecasts), grid, qq) for qq in quantiles}
    observed = current_demand_by_model(config, dict(forecasts))

    # Which GPU models have a signal that is stale or missing: those pools hold.
    held_models: dict[str, str] = {}
    for w in config.workloads:
        key = gpu_model(w.gpu_model).name
        if w.signal not in forecasts:
            held_models[key] = f"no data for signal {w.signal!r}"
        elif w.signal in stale:
            held_models.setdefault(key, f"signal {w.signal!r} is stale")
    for key, why in sorted(held_models.items()):
        notes.append(f"{key}: {why}; holding current capacity (no scale-down)")

    targets_now: dict[str, int] = {}
    levels_now: dict[str, tuple[float, float, pd.Timestamp]] = {}
    binding: dict[str, list[str]] = {p.name: [] for p in config.pools}
    timelines: dict[str, list[int]] = {}
    models = sorted({gpu_model(p.gpu_model).name for p in config.pools})
    for model in models:
        pools = config.pools_for(model)
        d = demand.get(model, np.zeros(len(grid)))
        floor = observed.get(model, 0.0) * (1.0 + policy.headroom_fraction)
        for p in pools:
            lead = pd.Timedelta(seconds=p.lead_time_s)
            need_up = max(_window_max(d, grid, now + lead, now + lead + cycle), floor)
            need_keep = max(
                _window_max(
                    d,
                    grid,
                    now,
                    now + lead + pd.Timedelta(seconds=policy.scale_down_stabilization_s) + cycle,
                ),
                floor,
            )
            up = allocate(pools, need_up, policy.cycle_s)[p.name]
            keep = allocate(pools, need_keep, policy.cycle_s)[p.name]
            current = int(inventory.get(p.name, p.min_nodes))
            target = up
            if target < current:
                target = max(target, min(current, keep))
                if target > up:
                    binding[p.name].append("stabilization")
            if model in held_models and target < current:
                target = current
                binding[p.name].append("stale-data")
            target = max(p.min_nodes, min(p.max_nodes, target))
            if up > p.max_nodes:
                binding[p.name].append("max_nodes")
            if abs(target - current) > policy.max_step_nodes:
                target = current + int(math.copysign(policy.max_step_nodes, target - current))
                binding[p.name].append("max_step")
            targets_now[p.name] = target
            levels_now[p.name] = (need_up, need_keep, now + lead)
        # Released capacity disappears now, added capacity only after its lead time:
        # while replacements boot, what stays must cover demand until they serve.
        slowest = max(
            (
                p.lead_time_s
                for p in pools
                if targets_now[p.name] > int(inventory.get(p.name, p.min_nodes))
            ),
            default=0,
        )
        bridge = max(_window_max(d, grid, now, now + pd.Timedelta(seconds=slowest) + cycle), floor)
        for p in sorted(pools, key=lambda p: p.price_per_gpu_hour):
            current = int(inventory.get(p.name, p.min_nodes))
            staying = sum(
                effective_gpus(
                    x,
                    min(targets_now[x.name], int(inventory.get(x.name, x.min_nodes))),
                    policy.cycle_s,
                )
                for x in pools
            )
            while targets_now[p.name] < current and staying < bridge - 1e-9:
                targets_now[p.name] += 1
                staying += effective_gpus(p, 1, policy.cycle_s)
                if "bridging" not in binding[p.name]:
                    binding[p.name].append("bridging")
        allocs = [allocate(pools, float(v), policy.cycle_s) for v in d]
        for p in pools:
            timelines[p.name] = [a[p.name] for a in allocs]
            if timelines[p.name]:
                timelines[p.name][0] = targets_now[p.name]

    # Budget cap: trim scale-ups, most expensive nodes first.
    if policy.budget_per_hour is not None:
        spend = sum(targets_now[p.name] * p.price_per_node_hour for p in config.pools)
        for p in sorted(config.pools, key=lambda p: -p.price_per_gpu_hour):
            current = int(inventory.get(p.name, p.min_nodes))
            while spend > policy.budget_per_hour + 1e-9 and targets_now[p.name] > max(
                current, p.min_nodes
            ):
                targets_now[p.name] -= 1
                spend -= p.price_per_node_hour
                if "budget" not in binding[p.name]:
                    binding[p.name].append("budget")
        if spend > policy.budget_per_hour + 1e-9:
            notes.append(
                f"budget {policy.budget_per_hour:.2f}/h is below current spend {spend:.2f}/h; no scale-up"
            )
        for p in config.pools:
            timelines[p.name][0] = targets_now[p.name]

    actions: list[Action] = []
    pool_plans: list[PoolPlan] = []
    for p in config.pools:
        current = int(inventory.get(p.name, p.min_nodes))
        target = targets_now[p.name]
        need_up, need_keep, needed_at = levels_now[p.name]
        model = gpu_model(p.gpu_model).name
        lead_min = p.lead_time_s / 60
        delta_cost = (target - current) * p.price_per_node_hour
        qname = quantile_column(q)
        bound = f" (bound: {', '.join(binding[p.name])})" if binding[p.name] else ""
        decision: Decision
        if target > current:
            decision = "scale-up"
            reason = (
                f"{qname} demand for {model} reaches {need_up:.1f} GPUs by {_hhmm(needed_at)} "
                f"(lead time {lead_min:.0f} min); +{target - current} node(s) at "
                f"{p.price_per_node_hour:.2f}/h each{bound}"
            )
        elif target < current:
            decision = "scale-down"
            until = needed_at + pd.Timedelta(seconds=policy.scale_down_stabilization_s)
            reason = (
                f"{qname} demand for {model} stays under {need_keep:.1f} GPUs until {_hhmm(until)} "
                f"(lead time {lead_min:.0f} min + {policy.scale_down_stabilization_s / 60:.0f} min "
                f"stabilization); -{current - target} node(s) saves {-delta_cost:.2f}/h{bound}"
            )
        else:
            decision = "no-op"
            held = f"; {held_models[model]}, holding" if model in held_models else ""
            reason = (
                f"{current} node(s) fit {qname} demand for {model} of {need_up:.1f} GPUs at "
                f"{_hhmm(needed_at)} (lead time {lead_min:.0f} min){held}{bound}; cost unchanged"
            )
        actions.append(
            Action(
                pool=p.name,
                decision=decision,
                current_nodes=current,
                target_nodes=target,
                at=iso(now),
                needed_at=iso(needed_at),
                cost_delta_per_hour=round(delta_cost, 4),
                reason=reason,
            )
        )
        pool_plans.append(
            PoolPlan(
                pool=p.name,
                tier=p.tier,
                gpu_model=model,
                gpus_per_node=p.gpus_per_node,
                price_per_gpu_hour=p.price_per_gpu_hour,
                lead_time_s=p.lead_time_s,
                current_nodes=current,
                target_nodes=timelines[p.name],
                binding=binding[p.name],
            )
        )

    # Cost and risk of the planned timeline.
    by_tier: dict[str, float] = {}
    for p in config.pools:
        by_tier[p.tier] = (
            by_tier.get(p.tier, 0.0)
            + float(np.sum(timelines[p.name])) * p.price_per_node_hour * step_h
        )
    unserved = 0.0
    for model in models:
        cap = np.zeros(len(grid))
        for p in config.pools_for(model):
            cap += np.array([effective_gpus(p, n, policy.cycle_s) for n in timelines[p.name]])
        unserved += _expected_unserved(
            {qq: demand_all[qq].get(model, np.zeros(len(grid))) for qq in quantiles}, cap, step_h
        )
    cost = {
        "per_hour_now": round(
            sum(targets_now[p.name] * p.price_per_node_hour for p in config.pools), 4
        ),
        "per_hour_current": round(
            sum(
                int(inventory.get(p.name, p.min_nodes)) * p.price_per_node_hour
                for p in config.pools
            ),
            4,
        ),
        "horizon_total": round(sum(by_tier.values()), 2),
        "horizon_by_tier": {k: round(v, 2) for k, v in sorted(by_tier.items())},
    }
    risk = {
        "expected_unserved_gpu_hours": round(unserved, 3),
        "binding": {k: v for k, v in binding.items() if v},
        "held_models": held_models,
    }
    signals = []
    for s in config.signals:
        fc = forecasts.get(s.name)
        if fc is None:
            continue
        qs = fc.quantile(q)
        signals.append(
            SignalSummary(
                name=s.name,
                unit=s.unit,
                estimator=fc.estimator,
                reason=fc.reason,
                last_timestamp=iso(fc.last_timestamp),
                last_value=round(fc.last_value, 6),
                stale=s.name in stale,
                peak_at_quantile=round(float(qs.max()), 6),
                notes=list(fc.notes),
            )
        )
    return CapacityPlan(
        created_at=iso(now),
        quantile=q,
        horizon_s=policy.horizon_s,
        step_s=policy.cycle_s,
        timeline=[iso(t) for t in grid],
        signals=signals,
        demand_gpus={k: [round(float(x), 4) for x in v] for k, v in sorted(demand.items())},
        pools=pool_plans,
        actions=actions,
        cost=cost,
        risk=risk,
        notes=notes,
    )
