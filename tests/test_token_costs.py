"""Cost per 1M tokens (scaler.reports.tokens) on a hand-made fleet."""

from __future__ import annotations

import numpy as np
import pytest

from scaler.config import ConfigError, parse_config
from scaler.reports.tokens import token_costs, token_section
from tests.planning_inputs import plan_for
from tests.test_planning import NOW, POOL_KINDS, forecast


def _config(token_signal: str = "tok") -> dict:
    return {
        "signals": [{"name": "rps"}, {"name": "tok"}],
        "workloads": [
            {
                "name": "chat",
                "signal": "rps",
                "gpu_model": "H100",
                "units_per_replica": 1,
                "token_signal": token_signal,
            }
        ],
        "pools": [
            {
                "name": "reserved",
                "gpu_model": "H100",
                "gpus_per_node": 8,
                "min_nodes": 2,
                "max_nodes": 2,
                **POOL_KINDS["reserved"],
            },
            {
                "name": "on-demand",
                "gpu_model": "H100",
                "gpus_per_node": 8,
                "max_nodes": 20,
                **POOL_KINDS["on-demand"],
            },
        ],
        "policy": {"horizon_s": 7200},
    }


def test_cost_per_million_tokens_is_the_workloads_cost_over_its_tokens() -> None:
    config = parse_config(_config())
    n = 30
    forecasts = {
        "rps": forecast(np.full(n, 24.0), 0.1, 24.0, 24.0),
        # 5,000 tokens a second all along.
        "tok": forecast(np.full(n, 5000.0), 0.1, 5000.0, 5000.0),
    }
    plan = plan_for(config, forecasts, {"reserved": 2, "on-demand": 1}, NOW)
    (row,) = token_costs(config.served_workloads, plan, forecasts)
    steps = len(plan.timeline)
    tokens = 5000.0 * plan.step_s * steps
    assert row["tokens_m"] == pytest.approx(tokens / 1e6)
    # The only workload carries its model's whole planned cost.
    cost = sum(
        float(np.sum(p.target_nodes)) * p.gpus_per_node * p.price_per_gpu_hour * plan.step_s / 3600
        for p in plan.pools
    )
    assert row["cost"] == pytest.approx(cost)
    assert row["per_m"] == pytest.approx(cost / tokens * 1e6)
    # On reserved alone the same GPU-hours cost less than on on-demand alone.
    assert row["per_m_reserved"] < row["per_m"] < row["per_m_on-demand"]
    sec = token_section([row], "USD", "ru")
    assert sec is not None and sec.title == "Стоимость 1 млн токенов"
    assert token_section([], "USD", "en") is None


def test_a_token_signal_must_be_declared() -> None:
    with pytest.raises(
        ConfigError, match=r"workloads\[0\]\.token_signal: 'nope' is not a declared"
    ):
        parse_config(_config("nope"))
