"""The MIG replay's fair yardstick: the reactive relayout at every headroom and hold, and
each policy's GPU-hours against it at matched service.

One reactive point (20% over the newest observation) is a poor yardstick for the planner,
which holds its forecast's peak over a 6-hour horizon: a reactive rule that held as long,
or at another headroom, could serve as well for less. So the reactive relayout
(:class:`scaler.replay.mig.Reactive`) is replayed on the same pool and test period at every
headroom of :data:`HEADROOMS` and every hold of :func:`holds_of` (the newest observation
alone, and the peak of the last ``horizon_s``, as long as the planner covers ahead), and a
policy is matched on the frontier those points trace as the tier replay matches its plans
(:meth:`scaler.replay.frontier.Frontier.match`): GPU-hours interpolated at the policy's
share of unserved slice-hours, the cheaper hold at that service kept.

A week of test days is few: how far each saving could move on another week is
:func:`matched_intervals`, a bootstrap over whole test days (each draw resamples the days,
sums every run's GPU-hours, unserved and demanded slice-hours over them, and matches each
policy on the frontier of that draw), so a policy and the reactive points are always
scored on the same days.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from scaler.replay.frontier import (
    DRAWS,
    LEVEL,
    DayTotals,
    Frontier,
    Matched,
    by_day,
    matched_interval,
)
from scaler.replay.mig import POLICIES, MigResult, Reactive, replay_policy, shared_pool
from scaler.replay.mig_fleet import MigPool, MigTally, compute_slices
from scaler.replay.mig_scenarios import MigDemand
from scaler.replay.protocol import STEP, STEP_H
from scaler.replay.scoring import Score

HEADROOMS: tuple[float, ...] = tuple(round(0.1 * k, 1) for k in range(11))
"""Reactive headrooms the frontier is traced at: 0% to 100% in steps of 10%."""
MATCHED = tuple(p for p in POLICIES if p not in ("static", "reactive"))
"""The policies matched on the frontier: every planner."""


def holds_of(horizon_s: int) -> tuple[int, ...]:
    """Holds in seconds: the newest observation alone (0), and the planner's horizon."""
    return (0, horizon_s)


def _slices_demanded(demand: MigDemand) -> np.ndarray:
    """Compute slices the test period asks for, per step."""
    model, t0 = demand.scenario.gpu_model, demand.test_start
    steps = len(demand.index) - t0
    total = np.zeros(steps)
    for p, v in demand.instances().items():
        total = total + np.asarray(v[t0:], dtype=float) * compute_slices(model, p)
    return total


def demanded_slice_hours(demand: MigDemand) -> float:
    """Compute slice-hours the test period asks for: the denominator of an unserved share."""
    return float(_slices_demanded(demand).sum() * STEP_H)


def score_of(tally: MigTally, price_per_gpu_hour: float, demanded: float) -> Score:
    """A MIG tally as the replay's score: cost, unserved slice-hours and their share."""
    unserved = tally.unserved_slice_hours
    return Score(
        policy=tally.policy,
        cost=tally.cost(price_per_gpu_hour),
        cost_vs_oracle=math.nan,
        cost_vs_clairvoyant=math.nan,
        unserved_gpu_hours=unserved,
        unserved_share=unserved / demanded if demanded > 0 else 0.0,
        steps_short_share=float(np.mean(tally.unserved_slices > 0)),
        changes=tally.relayouts,
    )


def reactive_frontier(demand: MigDemand, result: MigResult) -> Frontier:
    """The reactive relayout replayed at every headroom and hold on ``result``'s pool, each
    point's run kept by test day for :func:`matched_intervals`."""
    sc, setup = demand.scenario, result.setup
    shared = shared_pool(result.static_layouts, sc.gpus_per_node, setup.spare_fraction)
    inst, demanded = demand.instances(), demanded_slice_hours(demand)
    price = setup.price_per_gpu_hour
    hs, held, scores, days = [], [], [], []
    for hold_s in holds_of(setup.horizon_s):
        steps = max(1, round(hold_s / STEP.total_seconds()))
        for h in HEADROOMS:
            pool = MigPool.of(sc.gpu_model, sc.gpus_per_node, shared, setup.change_s)
            policy = Reactive(demand, setup, headroom=h, hold_steps=steps)
            tally = replay_policy(
                "reactive", policy, pool, inst, demand.test_start, demand.index, setup.cycle_steps
            )
            scores.append(score_of(tally, price, demanded))
            days.append(_by_day(tally, price))
            hs.append(h)
            held.append(hold_s)
    return Frontier(tuple(hs), tuple(scores), tuple(held), tuple(days))


def _by_day(tally: MigTally, price_per_gpu_hour: float) -> DayTotals:
    """A MIG run by test day: its cost, and its unserved compute slices (per step)."""
    return DayTotals(
        by_day(tally.gpus * STEP_H * price_per_gpu_hour), by_day(tally.unserved_slices)
    )


def matched_intervals(
    demand: MigDemand,
    result: MigResult,
    frontier: Frontier,
    draws: int = DRAWS,
    level: float = LEVEL,
    seed: int = 0,
) -> dict[str, tuple[float, float]]:
    """Each policy of :data:`MATCHED`'s saving against ``frontier`` (:func:`reactive_frontier`)
    as the ``level`` central interval of a bootstrap over whole test days (module docstring;
    :func:`scaler.replay.frontier.matched_interval`, compute slices standing for GPUs)."""
    price, demanded = result.setup.price_per_gpu_hour, demanded_slice_hours(demand)
    need = _slices_demanded(demand)
    out = {}
    for name, tally in result.tallies.items():
        if name not in MATCHED:
            continue
        policy = score_of(tally, price, demanded)
        got = matched_interval(frontier, policy, _by_day(tally, price), need, draws, level, seed)
        if got is not None:
            out[name] = got
    return out


def matched(demand: MigDemand, result: MigResult, frontier: Frontier) -> Mapping[str, Matched]:
    """Each replayed policy of :data:`MATCHED` against the frontier at its own service."""
    demanded = demanded_slice_hours(demand)
    price = result.setup.price_per_gpu_hour
    return {
        name: frontier.match(score_of(t, price, demanded))
        for name, t in result.tallies.items()
        if name in MATCHED
    }
