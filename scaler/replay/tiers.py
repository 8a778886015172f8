"""The tier replay's fleet sizes and yardstick: how many reserved nodes to commit and how deep
the spot market is (from the training period only), and what clairvoyant tiers would save."""

from __future__ import annotations

import math

import numpy as np

from scaler.planning.coverage import reclaim_spares
from scaler.replay.baselines import oracle_requests
from scaler.replay.protocol import STEP, STEP_H, ReplaySetup, Trace

TIER_CAPTURE_TARGET = 0.8
"""Tiers must save at least this share of what clairvoyant tiers save on the same test
period at the same prices (:func:`clairvoyant_tier_saving`), against on-demand only, with
no more demand unserved (the replay's tier target)."""


def tier_sizes(trace: Trace, setup: ReplaySetup) -> tuple[int, int]:
    """Reserved nodes to commit and the spot market's depth, from the training period only.

    Spot depth is ``spot_max_share`` of the training peak in nodes. The reserved
    commitment is the count that would have minimised the cost of the training
    period's last ``commitment_history_s`` (14 days) with the rest served by spot
    and then on-demand, spot counted the way the planner counts it (its spares
    against reclaims held on top, N+1): a reserved node pays when it displaces
    enough dearer hours. Sized on the recent level, not on a month or three of
    history that a tenant's load has since left (NASA iPSC, Helios vcMod).
    """
    need = np.ceil(trace.demand[: trace.test_start] / setup.gpus_per_node - 1e-9)
    peak = int(need.max()) if need.size else 0
    spot_max = math.floor(peak * setup.spot_max_share)
    recent = need[-_commitment_steps(setup) :] if setup.commitment_history_s > 0 else need
    best, _ = _cheapest_tiers(recent, spot_max, setup)
    return best, spot_max


def _commitment_steps(setup: ReplaySetup) -> int:
    return max(1, math.ceil(setup.commitment_history_s / STEP.total_seconds()))


def _cheapest_tiers(need: np.ndarray, spot_max: int, setup: ReplaySetup) -> tuple[int, float]:
    """(reserved nodes, cost) of the cheapest tier split serving ``need`` nodes per step exactly:
    reserved first, then spot up to the market depth less its reclaim spares, then on-demand."""
    loss = min(0.5, setup.spot_interruption_rate_per_hour * (setup.lead_time_s / 3600 + STEP_H))
    spare = reclaim_spares(spot_max, loss, setup.quantile)
    per_node_h = setup.gpus_per_node * STEP_H
    best, best_cost = 0, math.inf
    for n in range(int(need.max()) + 1 if need.size else 1):
        rest = np.maximum(0.0, need - n)
        spot = np.minimum(rest, max(0, spot_max - spare))
        held = np.where(spot > 0, spot + spare, 0.0)
        cost = per_node_h * (
            n * len(need) * setup.reserved_price_per_gpu_hour
            + held.sum() * setup.spot_price_per_gpu_hour
            + (rest - spot).sum() * setup.price_per_gpu_hour
        )
        if cost < best_cost - 1e-9:
            best, best_cost = n, cost
    return best, best_cost


def clairvoyant_tier_saving(trace: Trace, setup: ReplaySetup) -> float:
    """What tiers save on the test period at the replay's prices when demand is known: a
    clairvoyant fleet serving the test demand exactly, split at hindsight into the cheapest
    reserved + spot (the training period's market depth) + on-demand, against the same
    nodes on-demand only.

    A flat demand saves the reserved discount (40% at the defaults) plus what spot adds;
    a spiky one less, since a reserved node idles between peaks and spot is capped. It
    tells how much of a series' miss of the tier target is its shape and the prices
    rather than the planner (a planner's own margins can save a little more or less:
    its on-demand-only replay holds more than the clairvoyant's).
    """
    need = oracle_requests(trace, setup).astype(float)
    on_demand = float(need.sum()) * setup.gpus_per_node * STEP_H * setup.price_per_gpu_hour
    if not on_demand > 0:
        return math.nan
    _, spot_max = tier_sizes(trace, setup)
    _, cost = _cheapest_tiers(need, spot_max, setup)
    return 1.0 - cost / on_demand
