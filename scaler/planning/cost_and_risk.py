"""A tier plan's cost and risk figures: spend over the horizon per tier, and the
GPU-hours of demand it is expected to leave unserved.

Spot capacity counts for its expected GPUs (:func:`scaler.planning.coverage.effective_gpus`);
the expected unserved demand integrates the forecast's quantile function against the
planned capacity, or, for a GPU model held on bad data, measures against the need the
plan covers (the newest observation), as its shortfall does. From the policy quantile up,
the quantile function is held at or above the plan's need: the need is what the planner
takes demand at that quantile to be (a learned margin or the newest observation can put it
above the forecast's column), so a plan that leaves its need short is never reported as
leaving nothing unserved. :func:`need_shortfall` gives that shortfall itself, per GPU model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from forecaster.forecasting import SeriesForecast
from scaler.catalog.gpus import gpu_model
from scaler.config import Fleet, PolicyConfig, PoolConfig
from scaler.planning.coverage import effective_gpus
from scaler.planning.demand import demand_by_model


def plan_cost(
    pools: Iterable[PoolConfig],
    timelines: Mapping[str, Sequence[int]],
    inventory: Mapping[str, int],
    step_h: float,
) -> dict[str, object]:
    """Spend per hour now, as found, and over the horizon (in all and per tier)."""
    pools = list(pools)
    by_tier: dict[str, float] = {}
    for p in pools:
        by_tier[p.tier] = (
            by_tier.get(p.tier, 0.0)
            + float(np.sum(timelines[p.name])) * p.price_per_node_hour * step_h
        )
    return {
        "per_hour_now": round(sum(timelines[p.name][0] * p.price_per_node_hour for p in pools), 4),
        "per_hour_current": round(
            sum(int(inventory.get(p.name, p.min_nodes)) * p.price_per_node_hour for p in pools),
            4,
        ),
        "horizon_total": round(sum(by_tier.values()), 2),
        "horizon_by_tier": {k: round(v, 2) for k, v in sorted(by_tier.items())},
    }


def expected_unserved(
    fleet: Fleet,
    policy: PolicyConfig,
    forecasts: Mapping[str, SeriesForecast],
    grid: pd.DatetimeIndex,
    timelines: Mapping[str, Sequence[int]],
    held_models: Mapping[str, str],
    need_by_model: Mapping[str, np.ndarray],
) -> float:
    """GPU-hours of demand the planned timelines are expected to leave unserved."""
    q = policy.quantile
    step_h = policy.cycle_s / 3600.0
    quantiles = sorted({float(c[1:]) for fc in forecasts.values() for c in fc.frame.columns} | {q})
    demand_all = {qq: demand_by_model(fleet, dict(forecasts), grid, qq) for qq in quantiles}
    unserved = 0.0
    for model in sorted({gpu_model(p.gpu_model).name for p in fleet.pools}):
        cap = np.zeros(len(grid))
        for p in fleet.pools_for(model):
            cap += np.array([effective_gpus(p, n, policy.cycle_s) for n in timelines[p.name]])
        if model in held_models:
            # Held on bad data: the risk is measured against the demand the plan
            # covers (the newest observation), as the shortfall is, not a stale forecast.
            unserved += float(np.maximum(0.0, need_by_model[model] - cap).sum()) * step_h
        else:
            need = need_by_model.get(model)
            unserved += _expected_unserved(
                {
                    qq: _at_least_need(demand_all[qq].get(model, np.zeros(len(grid))), need, qq, q)
                    for qq in quantiles
                },
                cap,
                step_h,
            )
    return unserved


def _at_least_need(
    demand: np.ndarray, need: np.ndarray | None, level: float, q: float
) -> np.ndarray:
    """A quantile column of demand, at or above the plan's need from the policy quantile up."""
    if need is None or level < q or len(need) != len(demand):
        return demand
    return np.maximum(demand, np.asarray(need, dtype=float))


def need_shortfall(
    fleet: Fleet,
    policy: PolicyConfig,
    timelines: Mapping[str, Sequence[int]],
    need_by_model: Mapping[str, Sequence[float]],
    step_s: int,
) -> dict[str, float]:
    """GPU-hours of the plan's need its timelines leave uncovered, per GPU model (models with
    none are left out). Spot counts for its expected GPUs, as in planning."""
    step_h = step_s / 3600.0
    out: dict[str, float] = {}
    for model, need in sorted(need_by_model.items()):
        n = np.asarray(need, dtype=float)
        cap = np.zeros(len(n))
        for p in fleet.pools_for(model):
            nodes = list(timelines.get(p.name, ()))[: len(n)]
            if nodes:
                cap[: len(nodes)] += np.array([effective_gpus(p, k, policy.cycle_s) for k in nodes])
        short = float(np.maximum(0.0, n - cap - 1e-9).sum()) * step_h
        if short > 0:
            out[model] = short
    return out


def _expected_unserved(
    demand_q: dict[float, np.ndarray], capacity: np.ndarray, step_h: float
) -> float:
    """E[max(0, D - C)] in GPU-hours, D's quantile function interpolated from the columns."""
    if not demand_q:
        return 0.0
    levels = np.array(sorted(demand_q))
    table = np.vstack([demand_q[q] for q in levels])  # (n_q, T)
    us = np.linspace(0.005, 0.995, 100)
    # Piecewise-linear quantile function per step, flat beyond the outer columns.
    pos = np.interp(us, levels, np.arange(len(levels)))
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, len(levels) - 1)
    w = (pos - lo)[:, None]
    d = (1 - w) * table[lo] + w * table[hi]  # (n_u, T)
    return float(np.maximum(0.0, d - capacity[None, :]).sum()) / len(us) * step_h
