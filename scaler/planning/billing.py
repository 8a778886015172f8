"""Billing periods: a node is paid for in whole periods, so it is released at their end.

A pool's ``billing: {granularity_s, minimum_s}`` says how its provider bills a node: up
for ``u`` seconds, it is billed ``max(minimum_s, ceil(u / granularity_s) *
granularity_s)`` (:func:`billed_seconds`). Releasing a node in the middle of a period
already paid for saves nothing, and keeping it to the period's end costs nothing more
while it still serves. So where the plan releases nodes now, :func:`keep_paid_nodes`
releases only those whose paid period ends before the next cycle (keeping them longer
would start a new period) and keeps the rest to the cycle before their period ends;
releasing at once never saves more for a period already paid. Nodes whose start is not
known are released as planned (per-second billing, the behaviour without ``billing``).

Which nodes started when (:class:`NodeStarts`): from the provider where it can say, else
from the run records, each cycle's raise starting that many nodes at its time
(:func:`starts_from_past`). The replay (:mod:`scaler.replay.fleets`) and the finance
projection (:mod:`scaler.reports.finance`) price nodes by the same rule
(:func:`billed_node_seconds`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from scaler.config import BillingConfig, PoolConfig
from scaler.plans import PastCycle
from scaler.wording import NOTE_PAID_PERIOD, Reason

NodeStarts = Mapping[str, Sequence[pd.Timestamp]]
"""Per pool, when each of its nodes started (was asked for), as far as known."""


def billed_seconds(up_s: float, billing: BillingConfig | None) -> float:
    """Seconds billed for a node up ``up_s`` seconds (``up_s`` itself without billing)."""
    up_s = max(0.0, float(up_s))
    if billing is None:
        return up_s
    periods = math.ceil(up_s / billing.granularity_s - 1e-9)
    return float(max(billing.minimum_s, periods * billing.granularity_s))


def paid_until(started: pd.Timestamp, now: pd.Timestamp, billing: BillingConfig) -> pd.Timestamp:
    """The end of the period a node started at ``started`` has been paid for by ``now``."""
    return started + pd.Timedelta(seconds=billed_seconds((now - started).total_seconds(), billing))


@dataclass(frozen=True)
class PaidKeep:
    """A pool whose release this cycle waits for the end of paid periods."""

    pool: str
    planned: int
    """The first step's target as planned."""
    target: int
    """The first step's target once paid nodes are kept."""
    kept_until: pd.Timestamp
    """The latest end of a paid period among the kept nodes."""
    billing: BillingConfig

    def note(self) -> Reason:
        """The plan's note: how many nodes wait for the end of their paid period, and why."""
        return Reason(
            NOTE_PAID_PERIOD,
            {
                "pool": self.pool,
                "nodes": self.target - self.planned,
                "granularity_s": self.billing.granularity_s,
                "minimum_s": self.billing.minimum_s,
                "until": self.kept_until.strftime("%H:%MZ"),
            },
            (f"risk.binding.{self.pool}",),
        )


def keep_paid_nodes(
    pools: Sequence[PoolConfig],
    planned: Mapping[str, int],
    current: Mapping[str, int],
    starts: NodeStarts,
    now: pd.Timestamp,
    cycle_s: int,
) -> dict[str, PaidKeep]:
    """Per pool with ``billing`` that the plan lowers now, how far the release waits.

    ``planned``: each pool's first-step target; ``current``: the nodes it holds. Of the
    nodes to release, those whose paid period ends before the next cycle (or whose start
    is unknown) go now, in the order their periods end; the others are kept.
    """
    out: dict[str, PaidKeep] = {}
    for p in pools:
        if p.billing is None or p.name not in planned:
            continue
        cur, target = int(current.get(p.name, 0)), int(planned[p.name])
        if target >= cur:
            continue
        known = sorted(paid_until(pd.Timestamp(s), now, p.billing) for s in starts.get(p.name, ()))
        known = known[-cur:] if cur else []  # the newest starts are the nodes that remain
        unknown = cur - len(known)
        ending = [e for e in known if (e - now).total_seconds() < cycle_s]
        paid = known[len(ending) :]
        wanted = cur - target
        release = min(wanted, unknown + len(ending))
        if release < wanted:
            # The nodes kept are the paid ones the plan would release first: the soonest ends.
            kept_until = paid[wanted - release - 1]
            out[p.name] = PaidKeep(p.name, target, cur - release, kept_until, p.billing)
    return out


def starts_from_past(
    pools: Sequence[PoolConfig],
    past: Sequence[PastCycle],
    current: Mapping[str, int],
    now: pd.Timestamp,
) -> dict[str, list[pd.Timestamp]]:
    """When each pool's nodes started, as the run records tell it: every cycle's raise
    starts that many nodes at its time, every cut ends those whose paid period ends first;
    nodes held before the oldest record are of unknown start (left out)."""
    out: dict[str, list[pd.Timestamp]] = {}
    ordered = sorted(past, key=lambda c: pd.Timestamp(c.at))
    for p in pools:
        if p.billing is None:
            continue
        alive: list[pd.Timestamp | None] = []
        for c in ordered:
            at = pd.Timestamp(c.at)
            before, after = c.current.get(p.name), c.targets.get(p.name)
            if before is None or after is None or at > now:
                continue
            if len(alive) < before:
                unknown: list[pd.Timestamp | None] = [None] * (before - len(alive))
                alive = unknown + alive
            elif len(alive) > before:
                alive = _released(alive, len(alive) - before, at, p.billing)
            if after > before:
                alive += [at] * (after - before)
            elif after < before:
                alive = _released(alive, before - after, at, p.billing)
        held = int(current.get(p.name, 0))
        if len(alive) > held:
            alive = _released(alive, len(alive) - held, now, p.billing)
        out[p.name] = [s for s in alive if s is not None]
    return out


def _released(
    alive: list[pd.Timestamp | None], n: int, at: pd.Timestamp, billing: BillingConfig
) -> list[pd.Timestamp | None]:
    """``alive`` without the ``n`` nodes whose paid period ends first (unknown ones first)."""

    def ends(s: pd.Timestamp | None) -> pd.Timestamp:
        return pd.Timestamp.min if s is None else paid_until(s, at, billing)

    order = sorted(range(len(alive)), key=lambda i: ends(alive[i]))
    gone = set(order[:n])
    return [s for i, s in enumerate(alive) if i not in gone]


def billed_node_seconds(
    counts: Sequence[int] | np.ndarray, step_s: float, billing: BillingConfig | None
) -> np.ndarray:
    """Node-seconds billed per step for a pool holding ``counts[t]`` nodes at step t.

    Each step bills the nodes it holds for the step; a node released at step t adds, at
    t, what its billing rounds its time up to (its paid period's rest, or the minimum);
    nodes still held after the last step add their paid period's rest there. Released
    nodes are those whose paid period ends first. Without ``billing``: ``counts * step_s``.
    """
    c = np.asarray(counts, dtype=np.int64)
    out = c.astype(float) * float(step_s)
    if billing is None or len(c) == 0:
        return out
    alive: list[int] = []  # the step each node started at

    def extra(start: int, end: int) -> float:
        up = (end - start) * float(step_s)
        return billed_seconds(up, billing) - up

    for t, n in enumerate(c):
        if n > len(alive):
            alive += [t] * (int(n) - len(alive))
        elif n < len(alive):
            # The node whose paid period ends soonest goes first: the least paid time wasted.
            alive.sort(key=lambda s: extra(s, t))
            for s in alive[: len(alive) - int(n)]:
                out[t] += extra(s, t)
            del alive[: len(alive) - int(n)]
    end = len(c)
    for s in alive:
        out[-1] += extra(s, end)
    return out
