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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from scaler.replay.frontier import DRAWS, LEVEL, Frontier, Matched, by_day
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


@dataclass(frozen=True)
class ReactivePoint:
    """One point of the reactive frontier: its headroom, hold (seconds) and replayed run."""

    headroom: float
    hold_s: int
    tally: MigTally


def reactive_points(demand: MigDemand, result: MigResult) -> list[ReactivePoint]:
    """The reactive relayout replayed at every headroom and hold on ``result``'s pool."""
    sc, setup = demand.scenario, result.setup
    shared = shared_pool(result.static_layouts, sc.gpus_per_node, setup.spare_fraction)
    inst = demand.instances()
    out = []
    for hold_s in holds_of(setup.horizon_s):
        steps = max(1, round(hold_s / STEP.total_seconds()))
        for h in HEADROOMS:
            pool = MigPool.of(sc.gpu_model, sc.gpus_per_node, shared, setup.change_s)
            policy = Reactive(demand, setup, headroom=h, hold_steps=steps)
            tally = replay_policy(
                "reactive", policy, pool, inst, demand.test_start, demand.index, setup.cycle_steps
            )
            out.append(ReactivePoint(h, hold_s, tally))
    return out


def reactive_frontier(
    demand: MigDemand, result: MigResult, points: Sequence[ReactivePoint] | None = None
) -> Frontier:
    """The reactive frontier of ``points`` (replayed here where not given)."""
    points = reactive_points(demand, result) if points is None else points
    demanded, price = demanded_slice_hours(demand), result.setup.price_per_gpu_hour
    return Frontier(
        tuple(p.headroom for p in points),
        tuple(score_of(p.tally, price, demanded) for p in points),
        tuple(p.hold_s for p in points),
    )


def _demandedby_day(demand: MigDemand) -> np.ndarray:
    model, t0 = demand.scenario.gpu_model, demand.test_start
    slices = sum(v[t0:] * compute_slices(model, p) for p, v in demand.instances().items())
    return by_day(np.asarray(slices, dtype=float) * STEP_H)


def matched_intervals(
    demand: MigDemand,
    result: MigResult,
    points: Sequence[ReactivePoint],
    draws: int = DRAWS,
    level: float = LEVEL,
    seed: int = 0,
) -> dict[str, tuple[float, float]]:
    """Each policy of :data:`MATCHED`'s saving against the reactive frontier, as the
    ``level`` central interval of a bootstrap over whole test days (module docstring)."""
    price = result.setup.price_per_gpu_hour
    runs = {n: t for n, t in result.tallies.items() if n in MATCHED}
    if not runs or not points:
        return {}
    need = _demandedby_day(demand)
    counts = (
        np.random.default_rng(seed)
        .multinomial(len(need), np.full(len(need), 1 / len(need)), size=draws)
        .astype(float)
    )

    def totals(tally: MigTally) -> tuple[np.ndarray, np.ndarray]:
        return counts @ by_day(tally.gpus * STEP_H), counts @ by_day(tally.unserved_slices * STEP_H)

    demanded = counts @ need
    point_totals = [totals(p.tally) for p in points]
    saved: dict[str, list[float]] = {n: [] for n in runs}
    run_totals = {n: totals(t) for n, t in runs.items()}
    for d in range(draws):
        frontier = Frontier(
            tuple(p.headroom for p in points),
            tuple(_score("reactive", g[d], u[d], demanded[d], price) for g, u in point_totals),
            tuple(p.hold_s for p in points),
        )
        for n, (g, u) in run_totals.items():
            saved[n].append(frontier.match(_score(n, g[d], u[d], demanded[d], price)).saving)
    tail = (1 - level) / 2
    return {
        n: (float(np.nanquantile(v, tail)), float(np.nanquantile(v, 1 - tail)))
        for n, v in saved.items()
    }


def _score(policy: str, gpu_hours: float, unserved: float, demanded: float, price: float) -> Score:
    return Score(
        policy=policy,
        cost=gpu_hours * price,
        cost_vs_oracle=math.nan,
        cost_vs_clairvoyant=math.nan,
        unserved_gpu_hours=unserved,
        unserved_share=unserved / demanded if demanded > 0 else 0.0,
        steps_short_share=math.nan,
    )


def matched(demand: MigDemand, result: MigResult, frontier: Frontier) -> Mapping[str, Matched]:
    """Each replayed policy of :data:`MATCHED` against the frontier at its own service."""
    demanded = demanded_slice_hours(demand)
    price = result.setup.price_per_gpu_hour
    return {
        name: frontier.match(score_of(t, price, demanded))
        for name, t in result.tallies.items()
        if name in MATCHED
    }
