"""When layouts change: the lowest-demand window, and whether a change is worth its drains.

A change needed for coverage happens in the lowest-demand window before the current
layouts fall short, and only when the forecast's shortfall it removes exceeds the one its
drains make; a change that only saves GPUs happens in the lowest-demand window of the
horizon, and only when the GPU-hours it saves exceed the GPU-hours its drains cost (a
drain takes the whole node out of service, not only the GPUs whose layout changes).
A window that starts within this cycle gives a ``relayout`` action; a later one gives a
``no-op`` naming the window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from scaler.catalog.mig import gpu_fraction
from scaler.planning.mig.context import MigContext
from scaler.planning.mig.layouts import GpuState, LayoutSolution, capacity_of, weighted_gpus


def quiet_window(load: np.ndarray, width: int, last_start: int) -> int:
    """Start index of the ``width``-step window with the least total load, starting by ``last_start``."""
    width = max(1, width)
    last_start = max(0, min(last_start, len(load) - width))
    sums = np.convolve(load, np.ones(width), mode="valid")[: last_start + 1]
    return int(np.argmin(sums)) if len(sums) else 0


@dataclass(frozen=True)
class Drain:
    """What a change takes out of service while it is applied."""

    gpus: int
    """Every GPU of each running node it drains."""
    serving: dict[str, int]
    """Instances per profile the running nodes it does not drain hold meanwhile."""


@dataclass(frozen=True)
class Timing:
    """Whether and when a GPU model's layouts change."""

    mode: str
    """``held``, ``fits``, ``cover``, ``save`` or ``not-worth``."""
    start: int
    """The grid step the change window starts at."""
    window_at: pd.Timestamp
    window_end: pd.Timestamp
    saved_h: float
    """GPU-hours the change saves over the horizon."""
    drain_h: float
    """GPU-hours its drains cost: every GPU of a drained node, its unchanged ones too."""
    held: list[str]
    """Signals stale or missing (the layouts hold)."""
    covered_h: float = 0.0
    """Forecast shortfall a change for coverage removes after its window (GPU-hours)."""
    drain_short_h: float = 0.0
    """Forecast shortfall its drains make in the window (GPU-hours)."""

    @property
    def act_now(self) -> bool:
        return self.mode in ("cover", "save") and self.start == 0


def shortfall_h(
    model: str,
    series: Mapping[str, np.ndarray],
    cap: Mapping[str, int],
    steps: slice,
    step_h: float,
) -> float:
    """GPU-hours of ``series`` over ``steps`` that ``cap`` does not hold, each instance at its
    profile's share of a GPU."""
    return step_h * sum(
        gpu_fraction(model, p) * float(np.clip(v[steps] - cap.get(p, 0), 0, None).sum())
        for p, v in series.items()
    )


def when_to_change(
    ctx: MigContext,
    series: Mapping[str, np.ndarray],
    gpus: Sequence[GpuState],
    best: LayoutSolution,
    keep: LayoutSolution,
    held: list[str],
    drain: Drain,
) -> Timing:
    """When and whether ``best`` replaces the current layouts (``keep``).

    A change needed for coverage goes in the lowest-demand window before the current
    layouts fall short, and only when the forecast's shortfall it removes after the window
    exceeds the shortfall its drain makes in the window (the same forecast against what
    the undrained nodes hold): a brief predicted shortfall is not worth a real one. One
    that only saves GPUs goes in the lowest-demand window of the horizon, and only when it
    saves more GPU-hours than its drains cost: ``drain.gpus`` (every GPU of each node it
    drains, :func:`scaler.planning.mig.actions.drain_of`) out of service for the drain
    and re-partition time."""
    model, grid, change_s = ctx.model, ctx.grid, ctx.change_s
    # Load per step (GPU-equivalents), for the quiet window and the coverage deadline.
    w = {p: gpu_fraction(model, p) for p in series}
    load = sum((w[p] * v for p, v in series.items()), np.zeros(len(grid)))
    # What the GPUs hold today, used or not: the layouts fall short when demand passes it.
    now_cap = capacity_of(g.current for g in gpus if not g.new)
    short_at = [
        i for i in range(len(grid)) if any(series[p][i] > now_cap.get(p, 0) + 1e-9 for p in series)
    ]
    width = max(1, math.ceil(change_s / ctx.step_s))
    step_h = ctx.step_s / 3600
    saved_h = (keep.used - best.used) * max(0.0, ctx.horizon_h - change_s / 3600)
    drain_h = drain.gpus * change_s / 3600
    covered_h = drain_short_h = 0.0
    start = 0
    needed_for_cover = (
        weighted_gpus(model, keep.shortfall) > weighted_gpus(model, best.shortfall) + 1e-9
    )
    if needed_for_cover and not held and best.changed:
        deadline = short_at[0] if short_at else len(grid) - 1
        start = quiet_window(load, width, deadline - width)
        window, after = slice(start, start + width), slice(start + width, None)
        covered_h = shortfall_h(model, series, keep.capacity(), after, step_h) - shortfall_h(
            model, series, best.capacity(), after, step_h
        )
        drain_short_h = shortfall_h(model, series, drain.serving, window, step_h) - shortfall_h(
            model, series, now_cap, window, step_h
        )
    if held:
        mode = "held"
    elif best.changed == 0:
        mode = "fits"
    elif needed_for_cover and covered_h > drain_short_h:
        mode = "cover"
    elif saved_h > drain_h:
        mode = "save"
        start = quiet_window(load, width, len(grid) - width)
    else:
        mode = "not-worth"
    window_at = grid[min(start, len(grid) - 1)]
    window_end = window_at + pd.Timedelta(seconds=change_s)
    return Timing(
        mode, start, window_at, window_end, saved_h, drain_h, held, covered_h, drain_short_h
    )
