"""Billing periods: nodes are released at the end of a paid period, and priced in whole ones.

Hourly billing (``{granularity_s: 3600, minimum_s: 3600}``) and per-second billing with a
one-minute minimum (``{granularity_s: 1, minimum_s: 60}``) through the planner, the cycle's
node dating from run records, the replay's pricing and the finance projection.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pandas as pd
import pytest

from scaler.config import BillingConfig, Config, ConfigError, parse_config
from scaler.inputs.demo import DEMO_CONFIG
from scaler.planning.billing import (
    billed_node_seconds,
    billed_seconds,
    keep_paid_nodes,
    starts_from_past,
)
from scaler.plans import PastCycle
from scaler.replay.fleets import FleetRun
from scaler.reports import finance
from tests.planning_inputs import plan_for
from tests.test_finance import LEVELS, START, fake_forecast
from tests.test_finance import fleet as finance_fleet
from tests.test_planning import NOW, forecast

HOURLY = {"granularity_s": 3600, "minimum_s": 3600}
PER_SECOND = {"granularity_s": 1, "minimum_s": 60}


def _config(billing: dict[str, int] | None) -> Config:
    pool: dict[str, Any] = {
        "name": "od",
        "tier": "on-demand",
        "gpu_model": "H100",
        "gpus_per_node": 8,
        "price_per_gpu_hour": 4.0,
        "lead_time_s": 600,
        "max_nodes": 40,
    }
    if billing is not None:
        pool["billing"] = billing
    return parse_config(
        {
            "signals": [{"name": "rps"}],
            "workloads": [
                {"name": "w", "signal": "rps", "gpu_model": "H100", "units_per_replica": 1}
            ],
            "pools": [pool],
            "policy": {"scale_down_stabilization_s": 0},
        }
    )


def test_billed_seconds_round_up_to_the_period_and_the_minimum() -> None:
    hourly, per_second = BillingConfig(**HOURLY), BillingConfig(**PER_SECOND)
    assert [billed_seconds(u, hourly) for u in (1, 3600, 3601)] == [3600, 3600, 7200]
    assert [billed_seconds(u, per_second) for u in (1, 59, 61.0)] == [60, 60, 61]
    assert billed_seconds(61.5, None) == 61.5


def _plan(billing: dict[str, int] | None, starts: list[pd.Timestamp], now: pd.Timestamp) -> Any:
    # Demand fell from three nodes' worth to under one node's: the plan wants 3 -> 1.
    fc = forecast(np.full(300, 4.0), 0.1, 4.0, 4.0)
    return plan_for(_config(billing), {"rps": fc}, {"od": 3}, now, node_starts={"od": starts})


def test_a_node_is_kept_to_the_end_of_its_paid_hour_when_releasing_saves_nothing() -> None:
    # Two nodes started 20 minutes ago (paid to NOW + 40 min), one 58 minutes ago (paid to
    # NOW + 2 min, before the next cycle: it goes now).
    starts = [NOW - pd.Timedelta(minutes=20)] * 2 + [NOW - pd.Timedelta(minutes=58)]
    assert _plan(None, starts, NOW).actions[0].target_nodes == 1
    plan = _plan(HOURLY, starts, NOW)
    [action] = plan.actions
    assert (action.decision, action.target_nodes) == ("scale-down", 2)
    assert "billing" in plan.pools[0].binding
    assert any(
        "od: 1 node(s) kept to the end of their paid period" in n and "paid until 00:40Z" in n
        for n in map(str, plan.notes)
    )
    # The cost saved is the plan's own: one node released.
    assert action.cost_delta_per_hour == pytest.approx(-32.0)
    # 36 minutes on, the kept node's hour ends within the cycle: released then.
    later = NOW + pd.Timedelta(minutes=36)
    assert _plan(HOURLY, starts[:2], later).actions[0].target_nodes == 1


def test_per_second_billing_and_unknown_starts_release_at_once() -> None:
    starts = [NOW - pd.Timedelta(minutes=20)] * 3
    assert _plan(PER_SECOND, starts, NOW).actions[0].target_nodes == 1
    # Nodes of unknown start are released as planned (as without billing).
    assert _plan(HOURLY, [], NOW).actions[0].target_nodes == 1
    # A node up 30 s with a one-minute minimum is paid to within the cycle: released.
    young = [NOW - pd.Timedelta(seconds=30)] * 3
    assert _plan(PER_SECOND, young, NOW).actions[0].target_nodes == 1


def test_a_raise_is_never_held_back_by_billing() -> None:
    config = _config(HOURLY)
    kept = keep_paid_nodes(config.pools, {"od": 5}, {"od": 3}, {"od": [NOW] * 3}, NOW, 300)
    assert kept == {}


def test_node_starts_come_from_the_cycles_that_raised_the_pool() -> None:
    config = _config(HOURLY)
    t = NOW - pd.Timedelta(minutes=50)
    past = [
        PastCycle(at=t, targets={"od": 3}, need_gpus={}, current={"od": 1}),
        PastCycle(
            at=t + pd.Timedelta(minutes=5), targets={"od": 3}, need_gpus={}, current={"od": 3}
        ),
        PastCycle(
            at=t + pd.Timedelta(minutes=30), targets={"od": 4}, need_gpus={}, current={"od": 3}
        ),
    ]
    starts = starts_from_past(config.pools, past, {"od": 4}, NOW)
    # One node held before the records (unknown), two raised at t, one at t + 30 min.
    assert starts == {"od": [t, t, t + pd.Timedelta(minutes=30)]}
    # A cut ends the nodes whose paid period ends first (unknown ones first).
    cut = [*past, PastCycle(at=NOW, targets={"od": 2}, need_gpus={}, current={"od": 4})]
    assert starts_from_past(config.pools, cut, {"od": 2}, NOW) == {
        "od": [t, t + pd.Timedelta(minutes=30)]
    }


def test_the_replay_prices_whole_billed_periods_and_per_step_without_billing() -> None:
    requested = {"od": np.array([1, 1, 0, 0, 2, 2, 2, 0])}
    price = {"od": 1.0}  # per node-step of 5 minutes
    plain = FleetRun("p", requested, requested, price)
    assert plain.cost() == 8.0  # unchanged: steps requested x price
    hourly = FleetRun("p", requested, requested, price, billing={"od": BillingConfig(**HOURLY)})
    # Each of the three node runs is billed an hour: 12 steps each.
    assert hourly.cost() == pytest.approx(36.0)
    per_second = FleetRun(
        "p", requested, requested, price, billing={"od": BillingConfig(**PER_SECOND)}
    )
    assert per_second.cost() == pytest.approx(8.0)


def test_billed_node_seconds_releases_the_node_whose_period_ends_first() -> None:
    # Two nodes start an hour apart at 30-minute steps; one is released at step 3
    # (1.5 h after the first start): the second node (started 0.5 h ago) would waste
    # 30 min, the first 30 min too; then both run to the end.
    hourly = BillingConfig(**HOURLY)
    billed = billed_node_seconds([1, 1, 2, 1, 1], 1800, hourly)
    assert billed.sum() == pytest.approx(3 * 3600 + 3600)
    assert billed_node_seconds([1, 1, 2, 1, 1], 1800, None).sum() == 6 * 1800


def test_the_finance_projection_prices_by_billing_periods() -> None:
    daily = {"name": "od", "tier": "on-demand", "price_per_gpu_hour": 2.0}
    plain = finance.project(
        finance_fleet([daily]), {"rps": fake_forecast(LEVELS)}, START, pd.Timedelta(hours=36)
    )
    hourly = finance.project(
        finance_fleet([{**daily, "billing": HOURLY}]),
        {"rps": fake_forecast(LEVELS)},
        START,
        pd.Timedelta(hours=36),
    )
    # Hourly billing on an hourly grid is what the hours cost.
    assert hourly.baseline.total_cost("expected") == pytest.approx(
        plain.baseline.total_cost("expected")
    )
    by_day = finance.project(
        finance_fleet([{**daily, "billing": {"granularity_s": 86400, "minimum_s": 86400}}]),
        {"rps": fake_forecast(LEVELS)},
        START,
        pd.Timedelta(hours=36),
    )
    # 4 GPUs for 36 h billed by the day: 48 h each.
    assert by_day.baseline.total_cost("expected") == pytest.approx(4 * 48 * 2.0)
    assert plain.baseline.total_cost("expected") == pytest.approx(4 * 36 * 2.0)


@pytest.mark.parametrize(
    ("billing", "expected"),
    [
        ({"granularity_s": 0}, "pools[0].billing.granularity_s"),
        ({"granularity_s": 3600, "minimum_s": -1}, "pools[0].billing.minimum_s"),
        ({"minimum_s": 60}, "pools[0].billing.granularity_s: required field is missing"),
        ({"granularity_s": 3600, "every": 1}, "pools[0].billing.every: unknown field"),
    ],
)
def test_bad_billing_is_one_line(billing: dict[str, Any], expected: str) -> None:
    data = copy.deepcopy(DEMO_CONFIG)
    data["pools"][0]["billing"] = billing
    with pytest.raises(ConfigError) as info:
        parse_config(data, "cfg.yaml")
    message = str(info.value)
    assert "\n" not in message and expected in message


def test_billing_defaults_are_pinned() -> None:
    assert _config(None).pools[0].billing is None
    assert BillingConfig(granularity_s=3600).minimum_s == 0
