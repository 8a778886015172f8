"""The protocol's metrics of one policy's run: cost against the yardsticks, unserved demand,
and the request changes undone within the reversal window (:func:`score`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scaler.replay.fleets import FleetRun
from scaler.replay.protocol import STEP_H


@dataclass(frozen=True)
class Score:
    """The protocol's metrics for one policy on one series."""

    policy: str
    cost: float
    cost_vs_oracle: float
    cost_vs_clairvoyant: float
    unserved_gpu_hours: float
    unserved_share: float
    steps_short_share: float
    changes: int = 0
    """Steps at which a pool's request changed, summed over pools."""
    reversals: int = 0
    """Of those, the changes undone (opposite direction) within the reversal window."""


def count_reversals(requested: Sequence[int] | np.ndarray, window_steps: int) -> tuple[int, int]:
    """``(changes, reversed)`` of one request series.

    A change is a step whose request differs from the step before; it is reversed
    when a change in the other direction follows within ``window_steps`` steps
    (2 -> 3 at 08:35 after 3 -> 2 at 08:30 reverses the cut).
    """
    r = np.asarray(requested, dtype=np.int64)
    sign = np.sign(np.diff(r))
    at = np.flatnonzero(sign)
    undone = 0
    for k, i in enumerate(at):
        for j in at[k + 1 :]:
            if j - i > window_steps:
                break
            if sign[j] == -sign[i]:
                undone += 1
                break
    return len(at), undone


def score(
    run: FleetRun,
    demand: np.ndarray,
    gpus_per_node: int,
    oracle: float,
    clairvoyant: float,
    reversal_steps: int = 6,
) -> Score:
    """``run`` scored against ``demand`` (GPUs per test step) and the yardsticks' costs."""
    short = np.maximum(0.0, demand - run.usable_total * gpus_per_node)
    flips = [count_reversals(r, reversal_steps) for r in run.requested.values()]
    total = float(demand.sum())
    cost = run.cost()
    return Score(
        policy=run.policy,
        cost=cost,
        cost_vs_oracle=cost / oracle if oracle > 0 else math.nan,
        cost_vs_clairvoyant=cost / clairvoyant if clairvoyant > 0 else math.nan,
        unserved_gpu_hours=float(short.sum()) * STEP_H,
        unserved_share=float(short.sum()) / total if total > 0 else 0.0,
        steps_short_share=float((short > 1e-9).mean()) if len(short) else 0.0,
        changes=sum(c for c, _ in flips),
        reversals=sum(u for _, u in flips),
    )
