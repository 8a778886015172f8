"""What a policy requested and what it got: the lead-time rule (:func:`usable_nodes`), a
spot pool's random reclaims (:class:`SpotFleet`) and one policy's run (:class:`FleetRun`).

A run prices each pool per step it requests a node, or, for a pool with ``billing``,
by whole billed periods (:func:`scaler.planning.billing.billed_node_seconds`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from scaler.config import BillingConfig
from scaler.planning.billing import billed_node_seconds
from scaler.planning.margins import Margin
from scaler.replay.protocol import ReplaySetup


def usable_nodes(requested: Sequence[int] | np.ndarray, lead_steps: int) -> np.ndarray:
    """Usable nodes per step under the lead-time rule, starting warm at ``requested[0]``."""
    r = np.asarray(requested, dtype=np.int64)
    u = np.empty_like(r)
    if len(r) == 0:
        return u
    prev = int(r[0])
    for t in range(len(r)):
        lo = max(0, t - lead_steps)
        # Before the first step the policy had requested its first request all along.
        window_min = (
            int(r[lo : t + 1].min()) if t >= lead_steps else min(int(r[0]), int(r[: t + 1].min()))
        )
        prev = min(int(r[t]), max(prev, window_min))
        u[t] = prev
    return u


@dataclass
class SpotFleet:
    """Nodes of one spot pool, each with the step it starts serving; reclaims are random.

    Without reclaims it reproduces :func:`usable_nodes` exactly: a raise adds nodes
    that serve after the lead time, a cut cancels the youngest (booting) nodes first.
    """

    lead_steps: int
    rate_per_step: float
    rng: np.random.Generator
    ready_at: list[int] = field(default_factory=list)
    reclaimed: int = 0

    def step(self, t: int, requested: int) -> int:
        """Apply the request at step t; return the usable nodes at t."""
        if self.rate_per_step > 0 and self.ready_at:
            lost = self.rng.random(len(self.ready_at)) < self.rate_per_step
            if lost.any():
                self.reclaimed += int(lost.sum())
                # The provider keeps the requested count: each lost node is replaced
                # and the replacement boots for the lead time.
                self.ready_at = [
                    t + self.lead_steps if gone else r
                    for r, gone in zip(self.ready_at, lost, strict=True)
                ]
        self.ready_at.sort()
        if requested > len(self.ready_at):
            self.ready_at += [t + self.lead_steps] * (requested - len(self.ready_at))
        elif requested < len(self.ready_at):
            del self.ready_at[requested:]
        return sum(1 for r in self.ready_at if r <= t)


@dataclass
class FleetRun:
    """What one policy requested and got, per pool and step of the test period."""

    policy: str
    requested: dict[str, np.ndarray]
    usable: dict[str, np.ndarray]
    price_per_node_step: dict[str, float]
    reclaimed: int = 0
    seconds: float = 0.0
    plans: int = 0
    margin: Margin | None = None
    """The margin the planner learnt from the training period (tiercast's runs)."""
    billing: dict[str, BillingConfig] = field(default_factory=dict)
    """Pools billed in whole periods; the others are priced per step requested."""
    step_s: float = 300.0
    """Seconds of one step (what ``billing`` rounds up)."""

    @property
    def requested_total(self) -> np.ndarray:
        return np.sum(list(self.requested.values()), axis=0)

    @property
    def usable_total(self) -> np.ndarray:
        return np.sum(list(self.usable.values()), axis=0)

    def cost(self) -> float:
        return float(sum(self.cost_by_pool().values()))

    def cost_by_pool(self) -> dict[str, float]:
        return {p: self._pool_cost(p) for p in self.requested}

    def _pool_cost(self, pool: str) -> float:
        """Steps requested times the price per node-step, or whole billed periods."""
        billing = self.billing.get(pool)
        if billing is None:
            return float(self.requested[pool].sum() * self.price_per_node_step[pool])
        billed = billed_node_seconds(self.requested[pool], self.step_s, billing).sum()
        return float(billed / self.step_s * self.price_per_node_step[pool])


def single_pool_run(policy: str, requested: np.ndarray, setup: ReplaySetup) -> FleetRun:
    """A baseline's run: ``requested`` on one on-demand pool (the oracle with no lead time)."""
    lead = 0 if policy == "oracle" else setup.lead_steps
    return FleetRun(
        policy,
        {"on-demand": requested},
        {"on-demand": usable_nodes(requested, lead)},
        {"on-demand": setup.node_price_per_step},
    )
