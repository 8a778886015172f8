"""The tier replay's fleet sizes and yardsticks: how many reserved nodes to commit and how deep
the spot market is (from the training period only), what clairvoyant tiers would save, and
the tiered reactive baseline tiercast's tiered plan is scored against.

The tiered reactive baseline (:func:`tiered_reactive_run`) is what a team without a
forecast would run on the same three tiers: the reserved commitment, sized either by
the rule tiercast's replay uses (:func:`tier_sizes`, on the training period) or at
hindsight (the cheapest for the baseline's own requests on the test period, reported
beside it), and as a floor (every commitment tried at every headroom and hold, the
cheapest at each service kept: no reactive team on these tiers does better); the
reactive rule's target (newest demand x (1 + headroom), held) with
the rest on spot, up to the same market depth and with the same reclaim spares, and
on-demand above that. Spot nodes are reclaimed as in the tiered planner's replay (the
same seeded rate) and replaced after the lead time; the spares cover the gap.
:func:`tiered_reactive_frontier` traces it at every headroom and hold of the reactive
frontier, so the tiered plan is scored against it at matched service.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from scaler.planning.coverage import reclaim_spares
from scaler.replay.baselines import oracle_requests, reactive_requests
from scaler.replay.fleets import FleetRun, SpotFleet, usable_nodes
from scaler.replay.frontier import (
    HEADROOMS,
    CheapestOf,
    Frontier,
    RunOf,
    frontier_holds,
    reactive_frontier,
)
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


def _spot_spare(spot_max: int, setup: ReplaySetup) -> int:
    """Spare spot nodes held against reclaims once spot holds any: the policy quantile of
    the reclaims of a full market over a replacement window, at least one (N+1)."""
    loss = min(0.5, setup.spot_interruption_rate_per_hour * (setup.lead_time_s / 3600 + STEP_H))
    return reclaim_spares(spot_max, loss, setup.quantile)


def _cheapest_tiers(need: np.ndarray, spot_max: int, setup: ReplaySetup) -> tuple[int, float]:
    """(reserved nodes, cost) of the cheapest tier split serving ``need`` nodes per step exactly:
    reserved first, then spot up to the market depth less its reclaim spares, then on-demand."""
    spare = _spot_spare(spot_max, setup)
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


# --------------------------------------------------------------------------- tiered reactive

RESERVED_RULES: tuple[str, ...] = ("rule", "hindsight", "floor")
"""How the tiered reactive baseline's commitment is sized: by tiercast's replay rule on the
training period (:func:`tier_sizes`); at hindsight on the test period, the cheapest split of
each point's own requests; or every commitment at every point (``floor``): the cheapest
any commitment reaches at each service, a lower bound for a reactive team on these tiers."""


def tier_split(
    target: np.ndarray, reserved: int, spot_max: int, setup: ReplaySetup
) -> dict[str, np.ndarray]:
    """Nodes per tier for ``target`` nodes per step: ``reserved`` always, then spot up to
    the market depth less its spares (plus the spares, once it holds any) where that is
    cheaper than on-demand, then on-demand."""
    spare = _spot_spare(spot_max, setup)
    rest = np.maximum(0, np.asarray(target, dtype=np.int64) - reserved)
    spot = np.minimum(rest, max(0, spot_max - spare))
    # A node of spot counts with its spares: worth it only where cheaper than on-demand.
    pays = (spot + spare) * setup.spot_price_per_gpu_hour < spot * setup.price_per_gpu_hour
    spot = np.where(pays, spot, 0)
    return {
        "reserved": np.full(len(rest), reserved, dtype=np.int64),
        "spot": np.where(spot > 0, spot + spare, 0).astype(np.int64),
        "on-demand": (rest - spot).astype(np.int64),
    }


def tiered_reactive_run(
    target: np.ndarray, reserved: int, spot_max: int, setup: ReplaySetup
) -> FleetRun:
    """The tiered reactive baseline's run of ``target`` nodes per test step (module
    docstring): reserved always serving, spot reclaimed at the replay's seeded rate,
    on-demand under the lead-time rule; all warm at their first request."""
    requested = tier_split(target, reserved, spot_max, setup)
    rate = 1 - (1 - setup.spot_interruption_rate_per_hour) ** STEP_H
    spot = SpotFleet(setup.lead_steps, rate, np.random.default_rng(setup.seed))
    first = int(requested["spot"][0]) if len(target) else 0
    spot.ready_at = [-setup.lead_steps] * first
    spot_usable = np.array([spot.step(t, int(n)) for t, n in enumerate(requested["spot"])])
    usable = {
        "reserved": requested["reserved"].copy(),
        "spot": spot_usable.astype(np.int64),
        "on-demand": usable_nodes(requested["on-demand"], setup.lead_steps),
    }
    node_h = setup.gpus_per_node * STEP_H
    prices = {
        "reserved": node_h * setup.reserved_price_per_gpu_hour,
        "spot": node_h * setup.spot_price_per_gpu_hour,
        "on-demand": node_h * setup.price_per_gpu_hour,
    }
    return FleetRun("tiered-reactive", requested, usable, prices, reclaimed=spot.reclaimed)


def tiered_reactive_frontier(
    trace: Trace,
    setup: ReplaySetup,
    reserved: str = "rule",
    headrooms: tuple[float, ...] | None = None,
) -> Frontier:
    """The tiered reactive baseline at every headroom and hold of the reactive frontier, its
    commitment sized by ``reserved`` (:data:`RESERVED_RULES`): ``rule``, tiercast's
    (:func:`tier_sizes`); ``hindsight``, for each point the count that serves that point's
    own requests on the test period cheapest (:func:`_cheapest_tiers`); ``floor``, each
    point at every count from none to its largest request, so the frontier's efficient
    points are the cheapest any commitment reaches at each service (:func:`_floor_frontier`).
    """
    if reserved not in RESERVED_RULES:
        raise ValueError(f"reserved must be one of {RESERVED_RULES}; got {reserved!r}")
    if reserved == "floor":
        return tiered_reactive_frontiers(trace, setup, headrooms)["floor"]
    committed, spot_max = tier_sizes(trace, setup)

    def run_of(requests: np.ndarray, at: ReplaySetup) -> FleetRun:
        n = committed if reserved == "rule" else _cheapest_tiers(requests, spot_max, at)[0]
        return tiered_reactive_run(requests, n, spot_max, at)

    return reactive_frontier(trace, setup, headrooms or HEADROOMS, run_of=run_of)


def tiered_reactive_frontiers(
    trace: Trace, setup: ReplaySetup, headrooms: tuple[float, ...] | None = None
) -> dict[str, Frontier]:
    """The tiered reactive baseline under every rule of :data:`RESERVED_RULES`, the floor
    built on the rule's and hindsight's frontiers rather than replaying them again."""
    rule = tiered_reactive_frontier(trace, setup, "rule", headrooms)
    hindsight = tiered_reactive_frontier(trace, setup, "hindsight", headrooms)
    floor = _floor_frontier(trace, setup, headrooms or HEADROOMS, (rule, hindsight))
    return {"rule": rule, "hindsight": hindsight, "floor": floor}


def _committed_run(committed: int, spot_max: int) -> RunOf:
    """The tiered reactive run of any requests at a fixed commitment."""

    def run_of(requests: np.ndarray, at: ReplaySetup) -> FleetRun:
        return tiered_reactive_run(requests, committed, spot_max, at)

    return run_of


def _floor_frontier(
    trace: Trace, setup: ReplaySetup, headrooms: tuple[float, ...], beside: tuple[Frontier, ...]
) -> Frontier:
    """Every headroom and hold at every commitment from 0 to the largest request of the
    widest headroom (a larger one serves no better: reserved nodes already serve every
    request), each commitment a frontier of its own, with ``beside`` (the rule's, whose
    commitment is then not replayed again, and hindsight's): matched against each, the
    cheapest kept (:class:`CheapestOf`), so it costs no more than any of them at any
    service."""
    committed, spot_max = tier_sizes(trace, setup)
    hold = max(frontier_holds(setup))
    top = int(
        reactive_requests(
            trace, replace(setup, reactive_headroom=max(headrooms), reactive_hold_s=hold)
        ).max(initial=0)
    )
    parts = [
        reactive_frontier(trace, setup, headrooms, run_of=_committed_run(n, spot_max))
        for n in range(top + 1)
        if n != committed
    ]
    return CheapestOf.of([*parts, *beside])
