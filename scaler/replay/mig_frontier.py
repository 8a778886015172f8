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
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from scaler.replay.frontier import Frontier, Matched
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


def demanded_slice_hours(demand: MigDemand) -> float:
    """Compute slice-hours the test period asks for: the denominator of an unserved share."""
    model, t0 = demand.scenario.gpu_model, demand.test_start
    return float(
        sum(v[t0:].sum() * compute_slices(model, p) for p, v in demand.instances().items()) * STEP_H
    )


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
    """The reactive relayout replayed at every headroom and hold on ``result``'s pool."""
    sc, setup = demand.scenario, result.setup
    shared = shared_pool(result.static_layouts, sc.gpus_per_node, setup.spare_fraction)
    inst, demanded = demand.instances(), demanded_slice_hours(demand)
    hs, held, scores = [], [], []
    for hold_s in holds_of(setup.horizon_s):
        steps = max(1, round(hold_s / STEP.total_seconds()))
        for h in HEADROOMS:
            pool = MigPool.of(sc.gpu_model, sc.gpus_per_node, shared, setup.change_s)
            policy = Reactive(demand, setup, headroom=h, hold_steps=steps)
            tally = replay_policy(
                "reactive", policy, pool, inst, demand.test_start, demand.index, setup.cycle_steps
            )
            scores.append(score_of(tally, setup.price_per_gpu_hour, demanded))
            hs.append(h)
            held.append(hold_s)
    return Frontier(tuple(hs), tuple(scores), tuple(held))


def matched(demand: MigDemand, result: MigResult, frontier: Frontier) -> Mapping[str, Matched]:
    """Each replayed policy of :data:`MATCHED` against the frontier at its own service."""
    demanded = demanded_slice_hours(demand)
    price = result.setup.price_per_gpu_hour
    return {
        name: frontier.match(score_of(t, price, demanded))
        for name, t in result.tallies.items()
        if name in MATCHED
    }
