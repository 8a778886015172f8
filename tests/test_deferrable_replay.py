"""The tier replay's synthetic deferrable training: idle reserved GPUs filled, priced against on-demand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scaler.replay.deferrable import deferrable_replay, format_deferrable
from scaler.replay.fleets import FleetRun
from scaler.replay.protocol import ReplaySetup, Trace
from scaler.replay.simulating import Replay

DAY = 288  # 5-minute steps


def replay(demand: np.ndarray, reserved_nodes: int = 2, on_demand_nodes: int = 0) -> Replay:
    """Two test days after one training day; the tiered run holds ``reserved_nodes``
    8-GPU reserved nodes and ``on_demand_nodes`` on-demand ones throughout."""
    index = pd.date_range("2026-11-29", periods=3 * DAY, freq="5min")
    full = np.concatenate([np.zeros(DAY), demand])
    trace = Trace("t", pd.Series(full, index=index), full, 1.0, DAY)
    steps = 2 * DAY
    run = FleetRun(
        "predictive-tiers",
        {"reserved": np.full(steps, reserved_nodes), "on-demand": np.full(steps, on_demand_nodes)},
        {"reserved": np.full(steps, reserved_nodes), "on-demand": np.full(steps, on_demand_nodes)},
        {"reserved": 8 * 2.4 / 12, "on-demand": 8 * 4.0 / 12},
    )
    return Replay(trace, ReplaySetup(), {"predictive-tiers": run}, {})


def test_training_fills_the_idle_reserved_gpus_first_and_costs_nothing_extra() -> None:
    # 16 reserved GPUs, 10 of them serving: 6 idle for 24 h is 144 GPU-hours a day.
    result = deferrable_replay(replay(np.full(2 * DAY, 10.0)), 100.0)
    assert result.days == 2 and result.due_gpu_hours == 200
    assert result.placed_gpu_hours["reserved"] == pytest.approx(200)
    assert result.idle_gpu_hours["reserved"] == pytest.approx(288)
    assert result.reserved_filled_share == pytest.approx(200 / 288)
    assert result.days_met == 2 and result.cost == 0
    assert result.on_demand_only_cost == pytest.approx(200 * 4.0)
    text = format_deferrable(result)
    assert "69.4% filled" in text and "100.0% cheaper" in text


def test_what_does_not_fit_by_the_end_of_the_day_is_priced_on_on_demand() -> None:
    # Demand leaves no GPU idle during the day's first half: 6 x 12 h = 72 GPU-hours fit.
    demand = np.tile(np.r_[np.full(DAY // 2, 16.0), np.full(DAY // 2, 10.0)], 2)
    result = deferrable_replay(replay(demand, on_demand_nodes=1), 100.0)
    # On-demand's 8 GPUs idle all day too (whole-node rounding, paid for anyway), but the
    # idle reserved GPUs come first: all 72 of them from noon, the other 28 on on-demand.
    assert result.placed_total == pytest.approx(200) and result.cost == 0
    assert result.placed_gpu_hours["reserved"] == pytest.approx(2 * 72)
    assert result.placed_gpu_hours["on-demand"] == pytest.approx(2 * 28)
    assert result.reserved_filled_share == pytest.approx(1.0)
    tight = deferrable_replay(replay(demand), 100.0)
    assert tight.placed_total == pytest.approx(144) and tight.days_met == 0
    assert tight.unplaced_gpu_hours == pytest.approx(56) and tight.cost == pytest.approx(224)
