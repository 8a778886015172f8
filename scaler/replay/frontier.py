"""The reactive rule's cost-unserved frontier, and a policy's saving at matched service.

One fixed reactive headroom is a poor yardstick: a policy that spends more than the
20% rule where the unserved budget needs it, or less where it does not, is neither
better nor worse for it. So the reactive rule is replayed on the same test period at
every headroom from 0% to 100% in steps of 2.5% (:data:`HEADROOMS`, the same hold
rule), which traces what reacting costs at each level of unserved demand.

A policy's *saving at matched service* is the frontier's cost at the policy's
unserved share, interpolated linearly between the frontier's efficient points
(those no other point beats on both cost and unserved), minus the policy's cost, as
a share of the former. Where the policy leaves less unserved than any headroom
does, the frontier's best-serving point stands in (the saving is then understated,
and :attr:`Matched.beyond` says so); where it leaves more than headroom 0%, the
cost at 0%. Reversals are compared with those of the efficient point of the same
service: the one with the least headroom leaving no more unserved than the policy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from scaler.replay.baselines import reactive_requests
from scaler.replay.fleets import single_pool_run
from scaler.replay.protocol import STEP, ReplaySetup, Trace
from scaler.replay.scoring import Score, score

HEADROOMS: tuple[float, ...] = tuple(round(0.025 * k, 3) for k in range(41))
"""Reactive headrooms the frontier is traced at: 0% to 100% in steps of 2.5%."""


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
    """True where the policy serves better than any headroom of the frontier."""


@dataclass(frozen=True)
class Frontier:
    """The reactive rule's score at each headroom of :data:`HEADROOMS` on one test period."""

    headrooms: tuple[float, ...]
    scores: tuple[Score, ...]

    def efficient(self) -> list[tuple[float, Score]]:
        """The points no other beats on both cost and unserved, by unserved share ascending."""
        pts = sorted(zip(self.headrooms, self.scores, strict=True), key=lambda p: p[1].cost)
        out: list[tuple[float, Score]] = []
        best = math.inf
        for h, s in pts:
            if s.unserved_share < best - 1e-15:
                out.append((h, s))
                best = s.unserved_share
        return sorted(out, key=lambda p: p[1].unserved_share)

    def match(self, policy: Score) -> Matched:
        """``policy`` at matched service (module docstring)."""
        eff = self.efficient()
        u = policy.unserved_share
        us = np.array([s.unserved_share for _, s in eff])
        cs = np.array([s.cost for _, s in eff])
        beyond = u < us[0] - 1e-15
        # np.interp holds the end values outside the range: the best-serving point below,
        # headroom 0%'s cost above.
        cost = float(np.interp(u, us, cs))
        at_or_better = [(h, s) for h, s in eff if s.unserved_share <= u + 1e-15]
        h, point = max(at_or_better, key=lambda p: p[1].unserved_share) if at_or_better else eff[0]
        saving = (cost - policy.cost) / cost if cost > 0 else math.nan
        return Matched(cost, saving, h, point.reversals, beyond)


def reactive_frontier(
    trace: Trace, setup: ReplaySetup, headrooms: tuple[float, ...] = HEADROOMS
) -> Frontier:
    """The reactive rule replayed at each of ``headrooms`` on ``trace``'s test period."""
    demand = trace.demand[trace.test_start :]
    window = max(1, round(setup.reversal_window_s / STEP.total_seconds()))
    scores = []
    for h in headrooms:
        run = single_pool_run(
            "reactive", reactive_requests(trace, replace(setup, reactive_headroom=h)), setup
        )
        scores.append(score(run, demand, setup.gpus_per_node, math.nan, math.nan, window))
    return Frontier(tuple(headrooms), tuple(scores))
