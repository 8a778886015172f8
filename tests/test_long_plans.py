"""Plans longer than a day: the MILP plans the first day, the greedy allocator projects the
rest (scaler.planning.solver), so a 90-day plan is not 25,920 integer steps a pool."""

from __future__ import annotations

import numpy as np
import pytest

import scaler.planning.solver as solver
from tests.planning_inputs import plan_for
from tests.test_planning import NOW, POOL_KINDS, _h100_config, forecast, usable_gpus

DAY = 288


def _fleet(days: float):
    config = _h100_config(
        [
            {"name": "reserved", "min_nodes": 2, "max_nodes": 2, **POOL_KINDS["reserved"]},
            {"name": "spot", "max_nodes": 3, **POOL_KINDS["spot"]},
            {"name": "on-demand", "max_nodes": 40, **POOL_KINDS["on-demand"]},
        ],
        {"horizon_s": int(days * 86400), "max_step_nodes": 4},
    )
    steps = int(days * DAY)
    t = np.arange(steps)
    # A daily cycle from 20 to 140 GPUs and a rise of 30 GPUs on the third day.
    level = 80 - 60 * np.cos(2 * np.pi * t / DAY) + np.where(t >= 2 * DAY, 30.0, 0.0)
    return config, {"rps": forecast(level, 0.1, 20, 20)}, {"reserved": 2, "spot": 0, "on-demand": 1}


@pytest.mark.slow
def test_a_long_plan_acts_as_the_one_day_plan_and_covers_every_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sizes: list[int] = []
    real = solver._solve_milp

    def milp(prob: solver.ModelProblem) -> solver.ModelSolution | None:
        sizes.append(len(prob.need))
        return real(prob)

    monkeypatch.setattr(solver, "_solve_milp", milp)
    config, forecasts, inventory = _fleet(4)
    long_plan = plan_for(config, forecasts, inventory, NOW)
    # The MILP saw the first day and a lead time past it, not four days.
    assert sizes and max(sizes) <= DAY + 3
    assert long_plan.risk["solver"] == "milp"
    day_config, day_forecasts, _ = _fleet(1)
    day_plan = plan_for(day_config, day_forecasts, inventory, NOW)
    first = {a.pool: a.target_nodes for a in long_plan.actions}
    assert first == {a.pool: a.target_nodes for a in day_plan.actions}
    # Every step of the four days is covered at the planned quantile, the rise included,
    # and the schedule never moves a pool by more than max_step_nodes a cycle.
    need = np.array(long_plan.demand_gpus["H100-80GB"])
    assert len(need) == 4 * DAY
    assert (usable_gpus(config, long_plan, inventory) >= need - 1e-9).all()
    for p in long_plan.pools:
        assert np.abs(np.diff(p.target_nodes)).max() <= 4
    assert long_plan.risk["expected_unserved_gpu_hours"] == 0


def test_a_long_plan_falls_back_to_greedy_alone_when_the_milp_gives_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(solver, "_solve_milp", lambda prob: None)
    config, forecasts, inventory = _fleet(3)
    plan = plan_for(config, forecasts, inventory, NOW)
    assert plan.risk["solver"] == "greedy"
    assert any("greedy fallback" in n for n in map(str, plan.notes))
