"""The reactive rule's cost-unserved frontier, and a policy's saving at matched service.

One fixed reactive headroom is a poor yardstick: a policy that spends more than the
20% rule where the unserved budget needs it, or less where it does not, is neither
better nor worse for it. So the reactive rule is replayed on the same test period at
every headroom from 0% to 100% in steps of 2.5% (:data:`HEADROOMS`), which traces what
reacting costs at each level of unserved demand.

Nor is one fixed hold: the planner keeps capacity for lead time + stabilization
(:func:`scaler.replay.protocol.planner_hold_s`: 60 minutes at a 40-minute lead), and a
reactive rule held only 30 minutes would pay for its shorter memory in unserved demand,
flattering the planner. So every headroom is replayed at each hold of
:func:`frontier_holds` (the reactive rule's own 30 minutes and the planner's hold), and
each hold traces its own frontier; at a policy's service the cheaper of them is the
yardstick, so the reactive rule holds at least as long as the planner wherever that is
cheaper, and the replay tables print the hold of the point used.

A policy's *saving at matched service* is the frontier's cost at the policy's
unserved share, interpolated linearly between one hold's efficient points
(those no other point beats on both cost and unserved), minus the policy's cost, as
a share of the former. Where the policy leaves less unserved than any point does,
the frontier's best-serving point stands in (the saving is then understated, and
:attr:`Matched.beyond` says so; with several holds the cheaper stand-in, so the saving
stays understated); where it leaves more than every point, the cheapest point's cost. Reversals are compared with those of the efficient point of the same
service: the cheapest one leaving no more unserved than the policy, whose headroom and
hold the replay tables print.

A test period is a few days, so each saving comes with how far it moves over them
(:func:`matched_interval`): a bootstrap over whole test days, each draw resampling the
days, summing every run's cost and unserved demand over them (:class:`DayTotals`) and
matching the policy on that draw's frontier, so the policy and every point of the
frontier are scored on the same days.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from scaler.replay.baselines import reactive_requests
from scaler.replay.fleets import FleetRun, single_pool_run
from scaler.replay.protocol import STEP, STEP_H, STEPS_PER_DAY, ReplaySetup, Trace, planner_hold_s
from scaler.replay.scoring import Score, score

HEADROOMS: tuple[float, ...] = tuple(round(0.025 * k, 3) for k in range(41))
"""Reactive headrooms the frontier is traced at: 0% to 100% in steps of 2.5%."""

DRAWS = 1000
"""Bootstrap draws of :func:`matched_interval`."""
LEVEL = 0.9
"""The central share of the draws an interval spans."""

RunOf = Callable[[np.ndarray, ReplaySetup], FleetRun]
"""A fleet run of the reactive rule's requests (nodes per test step) under a setup."""


def frontier_holds(setup: ReplaySetup) -> tuple[int, ...]:
    """The holds (seconds) the frontier is traced at: the reactive rule's own
    (``reactive_hold_s``, 30 minutes) and the planner's (lead time + stabilization),
    ascending and without repeats (one hold at the 10-minute lead)."""
    return tuple(sorted({setup.reactive_hold_s, planner_hold_s(setup)}))


def by_day(values: np.ndarray) -> np.ndarray:
    """Per-step values summed per test day (the last day may be partial)."""
    days = -(-len(values) // STEPS_PER_DAY)
    return np.bincount(np.arange(len(values)) // STEPS_PER_DAY, weights=values, minlength=days)


@dataclass(frozen=True, eq=False)
class DayTotals:
    """One run's cost and demand left unserved (GPU-steps) per test day."""

    cost: np.ndarray
    short: np.ndarray

    @classmethod
    def of(cls, run: FleetRun, demand: np.ndarray, gpus_per_node: int) -> DayTotals:
        """``run`` against ``demand`` (GPUs per test step) by day. A pool billed in whole
        periods has its cost spread over its steps in proportion to what they requested
        (the periods cross the days), so the days still add up to the run's cost."""
        billed = run.cost_by_pool() if run.billing else {}
        step_cost = np.zeros(len(demand))
        for p, n in run.requested.items():
            per = n * run.price_per_node_step[p]
            if p in run.billing and per.sum() > 0:
                per = per * (billed[p] / per.sum())
            step_cost = step_cost + per
        short = np.maximum(0.0, demand - run.usable_total * gpus_per_node)
        return cls(by_day(step_cost), by_day(short))

    def drawn(self, s: Score, weights: np.ndarray, demanded: float) -> Score:
        """``s`` over the days ``weights`` draws (copies of each day), ``demanded`` the
        GPU-steps those days ask for."""
        short = float(weights @ self.short)
        return replace(
            s,
            cost=float(weights @ self.cost),
            unserved_gpu_hours=short * STEP_H,
            unserved_share=short / demanded if demanded > 0 else 0.0,
        )


@dataclass(frozen=True)
class Matched:
    """A policy against the frontier at its own unserved share."""

    frontier_cost: float
    """What reacting costs at that unserved share (interpolated)."""
    saving: float
    """``(frontier_cost - cost) / frontier_cost``."""
    headroom: float
    """The headroom of the efficient point of the same service (see the module docstring)."""
    reversals: int
    """That point's reversals."""
    beyond: bool
    """True where the policy serves better than any point of the frontier."""
    hold_s: int = 1800
    """That point's hold, seconds."""


@dataclass(frozen=True)
class Frontier:
    """The reactive rule's score at each headroom and hold on one test period (point k
    is ``headrooms[k]`` held ``holds[k]`` seconds)."""

    headrooms: tuple[float, ...]
    scores: tuple[Score, ...]
    holds: tuple[int, ...] = ()
    """Each point's hold, seconds (empty: every point held ``reactive_hold_s``, 1800)."""
    days: tuple[DayTotals, ...] = ()
    """Each point's run by test day (empty: not kept, no interval)."""

    def resampled(self, weights: np.ndarray, demanded: float) -> Frontier | None:
        """The frontier over the days ``weights`` draws; None where its days were not kept."""
        if len(self.days) != len(self.scores):
            return None
        scores = tuple(
            d.drawn(s, weights, demanded) for s, d in zip(self.scores, self.days, strict=True)
        )
        return Frontier(self.headrooms, scores, self.holds)

    def points(self) -> list[tuple[float, int, Score]]:
        """``(headroom, hold_s, score)`` of every point."""
        holds = self.holds or (1800,) * len(self.headrooms)
        return list(zip(self.headrooms, holds, self.scores, strict=True))

    def efficient(self) -> list[tuple[float, int, Score]]:
        """The points no other beats on both cost and unserved, by unserved share ascending."""
        pts = sorted(self.points(), key=lambda p: p[2].cost)
        out: list[tuple[float, int, Score]] = []
        best = math.inf
        for h, hold, s in pts:
            if s.unserved_share < best - 1e-15:
                out.append((h, hold, s))
                best = s.unserved_share
        return sorted(out, key=lambda p: p[2].unserved_share)

    def match(self, policy: Score) -> Matched:
        """``policy`` at matched service (module docstring): against each hold's frontier,
        then the cheapest of those at the policy's service."""
        holds = sorted(set(h for _, h, _ in self.points()))
        if len(holds) == 1:
            return self._match_one(policy)
        each = [self.at_hold(h)._match_one(policy) for h in holds]
        return min(each, key=lambda m: m.frontier_cost)

    def at_hold(self, hold_s: int) -> Frontier:
        """The points held ``hold_s`` seconds."""
        pts = [p for p in self.points() if p[1] == hold_s]
        return Frontier(
            tuple(p[0] for p in pts), tuple(p[2] for p in pts), tuple(p[1] for p in pts)
        )

    def _match_one(self, policy: Score) -> Matched:
        eff = self.efficient()
        u = policy.unserved_share
        us = np.array([s.unserved_share for _, _, s in eff])
        cs = np.array([s.cost for _, _, s in eff])
        beyond = u < us[0] - 1e-15
        # np.interp holds the end values outside the range: the best-serving point below,
        # the cheapest point's cost above.
        cost = float(np.interp(u, us, cs))
        at_or_better = [p for p in eff if p[2].unserved_share <= u + 1e-15]
        h, hold, point = (
            max(at_or_better, key=lambda p: p[2].unserved_share) if at_or_better else eff[0]
        )
        saving = (cost - policy.cost) / cost if cost > 0 else math.nan
        return Matched(cost, saving, h, point.reversals, beyond, hold)


@dataclass(frozen=True)
class CheapestOf(Frontier):
    """Several frontiers as one: a policy is matched against each (each at its own holds,
    :meth:`Frontier.match`) and the cheapest at its service is kept, as the holds of one
    frontier are. Its points are all the parts' points. Matching each part apart, not
    their pooled points, keeps it a lower bound of every part at every service: between
    two points the match interpolates, and pooled points from different parts can lie
    above a part's own chord."""

    parts: tuple[Frontier, ...] = ()

    @classmethod
    def of(cls, parts: Sequence[Frontier]) -> CheapestOf:
        if not parts:
            raise ValueError("CheapestOf needs at least one frontier")
        pts = [p for f in parts for p in f.points()]
        return cls(
            headrooms=tuple(p[0] for p in pts),
            scores=tuple(p[2] for p in pts),
            holds=tuple(p[1] for p in pts),
            parts=tuple(parts),
        )

    def resampled(self, weights: np.ndarray, demanded: float) -> Frontier | None:
        parts = [p.resampled(weights, demanded) for p in self.parts]
        if any(p is None for p in parts):
            return None
        return CheapestOf.of([p for p in parts if p is not None])

    def match(self, policy: Score) -> Matched:
        return min((f.match(policy) for f in self.parts), key=lambda m: m.frontier_cost)


def reactive_frontier(
    trace: Trace,
    setup: ReplaySetup,
    headrooms: tuple[float, ...] = HEADROOMS,
    holds: Sequence[int] | None = None,
    run_of: RunOf | None = None,
) -> Frontier:
    """The reactive rule replayed at each of ``headrooms`` and ``holds`` (default
    :func:`frontier_holds`) on ``trace``'s test period, each run on one on-demand pool
    or as ``run_of`` runs its requests (the tiered reactive baseline,
    :mod:`scaler.replay.tiers`)."""
    demand = trace.demand[trace.test_start :]
    window = max(1, round(setup.reversal_window_s / STEP.total_seconds()))
    holds = tuple(holds) if holds is not None else frontier_holds(setup)
    run_of = run_of or (lambda requests, s: single_pool_run("reactive", requests, s))
    hs, held, scores, days = [], [], [], []
    for hold in holds:
        for h in headrooms:
            at = replace(setup, reactive_headroom=h, reactive_hold_s=hold)
            run = run_of(reactive_requests(trace, at), at)
            scores.append(score(run, demand, setup.gpus_per_node, math.nan, math.nan, window))
            days.append(DayTotals.of(run, demand, setup.gpus_per_node))
            hs.append(h)
            held.append(hold)
    return Frontier(tuple(hs), tuple(scores), tuple(held), tuple(days))


def matched_draws(
    frontier: Frontier,
    policy: Score,
    days: DayTotals,
    demand: np.ndarray,
    draws: int = DRAWS,
    seed: int = 0,
) -> np.ndarray | None:
    """``policy``'s saving at matched service (run by day: ``days``; ``demand`` GPUs per
    test step) on each of ``draws`` bootstrap draws of whole test days (module docstring);
    None where the frontier kept no days. Series replayed over the same test days and
    given the same ``seed`` draw the same days, so their savings can be averaged draw by
    draw."""
    need = by_day(np.asarray(demand, dtype=float))
    if not len(need):
        return None
    weights = np.random.default_rng(seed).multinomial(
        len(need), np.full(len(need), 1 / len(need)), size=draws
    )
    savings = np.empty(draws)
    for i, w in enumerate(weights.astype(float)):
        demanded = float(w @ need)
        drawn = frontier.resampled(w, demanded)
        if drawn is None:
            return None
        savings[i] = drawn.match(days.drawn(policy, w, demanded)).saving
    return savings


def central(values: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The ``level`` central interval of ``values`` (NaN left out)."""
    tail = (1 - level) / 2
    return float(np.nanquantile(values, tail)), float(np.nanquantile(values, 1 - tail))


def matched_interval(
    frontier: Frontier,
    policy: Score,
    days: DayTotals,
    demand: np.ndarray,
    draws: int = DRAWS,
    level: float = LEVEL,
    seed: int = 0,
) -> tuple[float, float] | None:
    """:func:`matched_draws` as its ``level`` central interval."""
    got = matched_draws(frontier, policy, days, demand, draws, seed)
    return None if got is None else central(got, level)


def day_seed(first: pd.Timestamp) -> int:
    """The bootstrap seed of a test period starting at ``first``: its day since the epoch,
    so that series over the same test days draw the same days."""
    return int(first.value // 86_400_000_000_000)
