"""The policies tiercast's planner is measured against, each a request per test step on one
on-demand pool: ``static``, ``reactive`` and the two yardsticks, ``clairvoyant`` and
``oracle`` (:mod:`scaler.replay.simulating` defines them)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from scaler.replay.protocol import STEP, ReplaySetup, Trace


def static_requests(trace: Trace, setup: ReplaySetup) -> np.ndarray:
    """The training peak times (1 + ``static_headroom``), held over the whole test period."""
    peak = float(np.max(trace.demand[: trace.test_start]))
    n = math.ceil(peak * (1 + setup.static_headroom) / setup.gpus_per_node - 1e-9)
    return np.full(len(trace.demand) - trace.test_start, n, dtype=np.int64)


def reactive_requests(trace: Trace, setup: ReplaySetup) -> np.ndarray:
    """Target ``ceil(d(t-1) * 1.2 / 8)``; a lower target applies once it has held the window.

    ``d(t-1)`` is the newest demand visible at t: of a coarse source, the last
    interval that ended by t.
    """
    d = trace.demand
    hold = max(1, round(setup.reactive_hold_s / STEP.total_seconds()))
    start = trace.test_start
    # target[i] is the target of step start - hold + 1 + i, from the demand it sees.
    seen = np.array([trace.visible_demand(t) for t in range(start - hold + 1, len(d))])
    target = np.ceil(seen * (1 + setup.reactive_headroom) / setup.gpus_per_node - 1e-9)
    # R(t) is the largest target of the last ``hold`` steps: it rises at once and falls
    # only once every target in the window has been lower.
    out = np.array([target[i : i + hold].max() for i in range(len(d) - start)])
    return out.astype(np.int64)


def oracle_requests(trace: Trace, setup: ReplaySetup) -> np.ndarray:
    """Demand itself in nodes, step by step (served at once: the oracle has no lead time)."""
    d = trace.demand[trace.test_start :]
    return np.ceil(d / setup.gpus_per_node - 1e-9).astype(np.int64)


def clairvoyant_requests(trace: Trace, setup: ReplaySetup) -> np.ndarray:
    """The peak demand of the lead time ahead, in nodes: everything served, under the lead time."""
    d = trace.demand
    n = len(d)
    out = []
    for t in range(trace.test_start, n):
        window = d[t : min(n, t + setup.lead_steps + 1)]
        out.append(math.ceil(float(window.max()) / setup.gpus_per_node - 1e-9))
    return np.array(out, dtype=np.int64)


BASELINES: dict[str, Callable[[Trace, ReplaySetup], np.ndarray]] = {
    "static": static_requests,
    "reactive": reactive_requests,
    "clairvoyant": clairvoyant_requests,
    "oracle": oracle_requests,
}
"""The baselines' request rules, by policy name."""
