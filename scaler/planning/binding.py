"""What binds a GPU model's plan: the bounds that keep a pool's first step away from
what the need alone would hold in it, and the bounds that leave need uncovered.

A plan names them (``PoolPlan.binding``, ``risk.binding``, ``risk.shortfall``) so that
its reasons say why a target is not where the forecast alone would put it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scaler.config import PoolConfig
from scaler.planning.coverage import allocate, lead_steps
from scaler.planning.solver import ModelProblem, ModelSolution


def first_step_bounds(
    pool: PoolConfig,
    prob: ModelProblem,
    timelines: Mapping[str, list[int]],
    need_up: float,
    no_news: bool,
) -> list[str]:
    """The bounds that keep ``pool``'s first step away from what the need now alone
    (``need_up``) would hold in it."""
    p = pool
    n0 = timelines[p.name][0]
    cur = prob.current[p.name]
    wanted = allocate(prob.pools, need_up, prob.cycle_s, prob.spares)[p.name]
    binding: list[str] = []
    if p.name in prob.cap_now and n0 == prob.cap_now[p.name] and n0 < wanted:
        binding.append("released-recently")
    if prob.held and n0 == cur:
        binding.append("stale-data")
    if no_news and n0 == cur and n0 > wanted:
        binding.append("no-new-observation")
    if n0 < cur and n0 > wanted:
        # Kept above what the forecast alone asks: either it serves while a
        # cheaper pool's new nodes boot, or it is needed again soon.
        growing = any(
            timelines[x.name][0] > prob.current[x.name] for x in prob.pools if x.name != p.name
        )
        binding.append("bridging" if growing else "stabilization")
    if abs(n0 - cur) == prob.max_step:
        binding.append("max_step")
    if cur > p.max_nodes:
        binding.append("max_nodes")
    return binding


@dataclass(frozen=True)
class Shortfall:
    """Need left uncovered after the lead time, and the bounds that leave it."""

    step: int
    """The first grid step short after the soonest lead time."""
    most: float
    """The most GPUs short from that lead time on."""
    causes: list[str]
    at_step: dict[str, int]
    """Nodes requested per pool at ``step``."""


def late_shortfall(
    prob: ModelProblem, sol: ModelSolution, timelines: Mapping[str, list[int]]
) -> Shortfall | None:
    """The shortfall the lead time could have prevented (none before it is a bound)."""
    short = sol.shortfall
    # A shortfall the lead time could not prevent is not a bound; one after it is.
    first_reach = min(lead_steps(p, prob.cycle_s) for p in prob.pools)
    late = np.flatnonzero(short[first_reach:] > 1e-6) + first_reach
    if not late.size:
        return None
    k = int(late[0])
    at_k = {p.name: timelines[p.name][k] for p in prob.pools}
    return Shortfall(k, float(short[first_reach:].max()), _shortfall_causes(prob, at_k), at_k)


def _shortfall_causes(prob: ModelProblem, at_k: Mapping[str, int]) -> list[str]:
    """What keeps the pools from covering the need at a step: their max_nodes, the
    budget, else the step per cycle."""
    pools = prob.pools
    causes: list[str] = []
    # A reserved pool is at its bound at its commitment.
    if all(at_k[p.name] >= prob.fixed.get(p.name, p.max_nodes) for p in pools):
        causes.append("max_nodes")
    if prob.budget is not None:
        spend = sum(at_k[p.name] * p.price_per_node_hour for p in pools)
        cheapest = (
            min(
                p.price_per_node_hour
                for p in pools
                if at_k[p.name] < prob.fixed.get(p.name, p.max_nodes)
            )
            if any(at_k[p.name] < prob.fixed.get(p.name, p.max_nodes) for p in pools)
            else math.inf
        )
        if spend + cheapest > prob.budget + 1e-9:
            causes.append("budget")
    if not causes:
        causes.append("max_step")
    return causes


def name_shortfall_bounds(
    prob: ModelProblem, shortfall: Shortfall, binding: dict[str, list[str]]
) -> None:
    """Add the shortfall's causes to each pool's bounds (max_nodes only where it is at it)."""
    for p in prob.pools:
        for c in shortfall.causes:
            if c not in binding[p.name] and (
                c != "max_nodes" or shortfall.at_step[p.name] >= prob.fixed.get(p.name, p.max_nodes)
            ):
                binding[p.name].append(c)
