"""Deferrable training in the tier replay: idle reserved GPUs filled, against on-demand.

What it is for: ``tiercast simulate --tiers --deferrable-gpu-hours-per-day N`` adds a
synthetic deferrable training load to the replay of the tiered planner: every day of the
test period, N GPU-hours of training are due by the end of that day (00:00 UTC next).
They are placed as :func:`scaler.planning.deferrable.place` places them into the GPUs
the tiered planner's fleet had serving at each 5-minute step (its usable nodes) that the
trace's demand left idle: idle reserved GPUs first (paid whether used or not), as early
as they come, then the idle headroom of on-demand and spot. The demand is the actual
one, which is what the PriorityClasses give in the cluster: inference preempts the
training whenever it needs the GPUs, so training only ever has what inference leaves.
What does not fit by the deadline is priced as served on on-demand capacity. The
yardstick is the same training served on on-demand capacity alone.

Not modelled: work lost to preemption (a job restarts from its last checkpoint), the
lead time and node rounding of the on-demand capacity the remainder would need (it is
priced per GPU-hour), and jobs' own shapes (the work is divisible into whole GPUs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from scaler.config import WorkloadConfig
from scaler.planning.deferrable import DeferredWork, place
from scaler.replay.protocol import STEP
from scaler.replay.simulating import Replay

TIERED = "predictive-tiers"
ORDER = ("reserved", "on-demand", "spot")
"""The order demand fills the replay's pools in, and training after it."""


@dataclass(frozen=True)
class DeferrableReplay:
    """What a daily deferrable training load got in one tier replay."""

    days: int
    gpu_hours_per_day: float
    due_gpu_hours: float
    placed_gpu_hours: dict[str, float]
    """Training GPU-hours placed into each pool's idle GPUs."""
    idle_gpu_hours: dict[str, float]
    """Each pool's idle GPU-hours before the training (usable GPUs less served demand)."""
    days_met: int
    """Days whose whole load fit into idle GPUs by the deadline."""
    on_demand_price_per_gpu_hour: float

    @property
    def placed_total(self) -> float:
        return sum(self.placed_gpu_hours.values())

    @property
    def unplaced_gpu_hours(self) -> float:
        return max(0.0, self.due_gpu_hours - self.placed_total)

    @property
    def on_demand_only_cost(self) -> float:
        """The training served on on-demand capacity alone."""
        return self.due_gpu_hours * self.on_demand_price_per_gpu_hour

    @property
    def cost(self) -> float:
        """Placed into idle GPUs (paid for already), the rest on on-demand."""
        return self.unplaced_gpu_hours * self.on_demand_price_per_gpu_hour

    @property
    def reserved_filled_share(self) -> float:
        idle = self.idle_gpu_hours.get("reserved", 0.0)
        return self.placed_gpu_hours.get("reserved", 0.0) / idle if idle > 0 else 0.0


def deferrable_replay(replay: Replay, gpu_hours_per_day: float) -> DeferrableReplay:
    """Place ``gpu_hours_per_day`` of training due by the end of each test day into the
    idle GPUs of the replay's tiered run (see the module docstring)."""
    run = replay.runs[TIERED]
    setup, trace = replay.setup, replay.trace
    gpn = setup.gpus_per_node
    demand = np.asarray(trace.demand[trace.test_start :], dtype=float)
    index = trace.test_index
    step_h = STEP.total_seconds() / 3600.0
    pools = [p for p in ORDER if p in run.usable] + [p for p in run.usable if p not in ORDER]
    left = demand.copy()
    idle: dict[str, np.ndarray] = {}
    for p in pools:
        usable = np.asarray(run.usable[p], dtype=float) * gpn
        served = np.minimum(usable, np.maximum(left, 0.0))
        idle[p] = usable - served
        left = left - served
    placed = {p: 0.0 for p in pools}
    due = 0.0
    met = 0
    days = pd.DatetimeIndex(index).normalize()
    for day in days.unique():
        mask = np.asarray(days == day)
        grid = pd.DatetimeIndex(index[mask])
        deadline = day + pd.Timedelta(days=1)
        if grid[-1] + STEP < deadline:
            continue  # a partial last day: its deadline falls past the test period
        work = DeferredWork(
            WorkloadConfig.model_validate(
                {
                    "name": "training",
                    "class": "training",
                    "gpu_model": "H100-80GB",
                    "deferrable": {"gpu_hours": gpu_hours_per_day, "deadline": "1d"},
                }
            ),
            "H100-80GB",
            gpu_hours_per_day,
            deadline,
            "replay",
        )
        today = {"H100-80GB": {p: idle[p][mask] for p in pools}}
        (placement,) = place([work], today, grid, int(STEP.total_seconds()))
        for p, gpus in placement.by_pool.items():
            placed[p] += float(gpus.sum() * step_h)
        due += gpu_hours_per_day
        met += placement.placed_gpu_hours >= gpu_hours_per_day - 1e-6
    return DeferrableReplay(
        days=round(due / gpu_hours_per_day) if gpu_hours_per_day else 0,
        gpu_hours_per_day=gpu_hours_per_day,
        due_gpu_hours=due,
        placed_gpu_hours=placed,
        idle_gpu_hours={p: float(idle[p].sum() * step_h) for p in pools},
        days_met=met,
        on_demand_price_per_gpu_hour=setup.price_per_gpu_hour,
    )


def format_deferrable(result: DeferrableReplay) -> str:
    """Two lines: where the training went, and its cost against on-demand alone."""
    r = result
    idle = r.idle_gpu_hours.get("reserved", 0.0)
    others = ", ".join(
        f"{p} {r.placed_gpu_hours[p]:,.0f} of {r.idle_gpu_hours[p]:,.0f} idle"
        for p in r.placed_gpu_hours
        if p != "reserved"
    )
    saving = 1 - r.cost / r.on_demand_only_cost if r.on_demand_only_cost else 0.0
    return (
        f"deferrable training: {r.gpu_hours_per_day:g} GPU-h a day due by 00:00 UTC, "
        f"{r.days} days, {r.due_gpu_hours:,.0f} GPU-h; placed in idle GPUs "
        f"{r.placed_total:,.0f} GPU-h (reserved {r.placed_gpu_hours.get('reserved', 0.0):,.0f} "
        f"of {idle:,.0f} idle reserved GPU-h, {100 * r.reserved_filled_share:.1f}% filled; "
        f"{others}); deadline met from idle GPUs alone on {r.days_met} of {r.days} days\n"
        f"deferrable training cost: ${r.cost:,.0f} ({r.unplaced_gpu_hours:,.0f} GPU-h on "
        f"on-demand at ${r.on_demand_price_per_gpu_hour:g}/GPU-h) vs ${r.on_demand_only_cost:,.0f} "
        f"served on on-demand alone: {100 * saving:.1f}% cheaper"
    )
