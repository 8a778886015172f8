"""A user's config file as the replay's fleet (``scaler.replay.user_fleet``): the setup taken
from the pools, the signal chosen, the fleets refused, and a short replay on the pools."""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from forecaster.errors import BadInputError
from scaler.config import PoolConfig
from scaler.replay.baselines import reactive_requests
from scaler.replay.fleets import single_pool_run, usable_nodes
from scaler.replay.protocol import STEP_H, ReplaySetup, prepare_trace
from scaler.replay.user_fleet import UserFleet, lead_time_of, load_user_fleet
from scaler.replay.walkforward import ForecastCache, tiercast_run

TIERED: dict[str, Any] = {
    "signals": [
        {"name": "rps", "unit": "requests/s", "query": "sum(rate(requests_total[5m]))"},
        {"name": "batch", "file": "batch.csv"},
    ],
    "workloads": [
        {"name": "chat", "signal": "rps", "gpu_model": "H100", "units_per_replica": 10},
        {
            "name": "chat-large",
            "signal": "rps",
            "gpu_model": "H100-80GB",
            "units_per_replica": 40,
            "gpus_per_replica": 2,
        },
        {"name": "embed", "signal": "batch", "gpu_model": "L4", "units_per_replica": 5},
    ],
    "pools": [
        {
            "name": "committed",
            "tier": "reserved",
            "gpu_model": "H100-80GB",
            "gpus_per_node": 4,
            "price_per_gpu_hour": 2.1,
            "lead_time_s": 1500,
            "min_nodes": 1,
            "max_nodes": 3,
            "current_nodes": 2,
            "provider": {"kind": "karpenter", "node_pool": "h100-reserved"},
        },
        {
            "name": "cheap",
            "tier": "spot",
            "gpu_model": "H100-80GB",
            "gpus_per_node": 4,
            "price_per_gpu_hour": 1.3,
            "lead_time_s": 1500,
            "max_nodes": 6,
            "spot_interruption_rate_per_hour": 0.04,
        },
        {
            "name": "elastic",
            "tier": "on-demand",
            "gpu_model": "H100",
            "gpus_per_node": 4,
            "price_per_gpu_hour": 3.5,
            "lead_time_s": 2400,
            "max_nodes": 40,
            "current_nodes": 5,
        },
        {
            "name": "l4",
            "tier": "on-demand",
            "gpu_model": "L4",
            "gpus_per_node": 8,
            "price_per_gpu_hour": 0.8,
        },
    ],
    "policy": {
        "quantile": 0.95,
        "headroom_fraction": 0.15,
        "scale_down_stabilization_s": 900,
        "unserved_budget": 0.01,
        "horizon_s": 3600,
        "cycle_s": 60,
        "max_step_nodes": 6,
    },
    "forecast": {"method": "seasonal_naive_1d", "quantiles": [0.5, 0.9]},
}


def write(tmp_path: Path, data: dict[str, Any], name: str = "fleet.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def tiered() -> dict[str, Any]:
    return copy.deepcopy(TIERED)


def test_a_tiered_config_gives_the_setup_of_its_pools(tmp_path: Path) -> None:
    fleet = load_user_fleet(write(tmp_path, tiered()), "rps")
    s = fleet.setup
    assert (s.gpus_per_node, s.price_per_gpu_hour) == (4, 3.5)
    # The longest lead time of the pools: 40 minutes, 8 steps of 5 minutes.
    assert (s.lead_time_s, s.lead_steps) == (2400, 8)
    assert (s.quantile, s.headroom_fraction, s.stabilization_s) == (0.95, 0.15, 900)
    assert (s.unserved_budget, s.horizon_s, s.forecast_method) == (0.01, 3600, "seasonal_naive_1d")
    assert (s.reserved_price_per_gpu_hour, s.spot_price_per_gpu_hour) == (2.1, 1.3)
    assert s.spot_interruption_rate_per_hour == 0.04
    # Everything else is the published protocol's.
    default = ReplaySetup()
    assert (s.reactive_headroom, s.reactive_hold_s, s.test_days, s.reforecast_s, s.seed) == (
        default.reactive_headroom,
        default.reactive_hold_s,
        default.test_days,
        default.reforecast_s,
        default.seed,
    )
    # 10 units per GPU and 40 per 2 GPUs: 0.1 + 0.05 GPUs per unit.
    assert fleet.units_per_gpu == pytest.approx(1 / 0.15)
    assert fleet.tiers and fleet.signal == "rps"


def test_the_near_term_rule_is_calibrated_as_the_file_sets_it(tmp_path: Path) -> None:
    # The product walks its forecaster over policy.growth_backtest_s, refreshed every
    # policy.growth_refresh_s; the replay of the file's pools does the same (the published
    # suites keep their own: 7 days, hourly).
    data = tiered()
    data["policy"].update(growth_backtest_s=2 * 86400, growth_refresh_s=12 * 3600)
    fleet = load_user_fleet(write(tmp_path, data), "rps")
    assert (fleet.setup.growth_backtest_s, fleet.setup.growth_refresh_s) == (172800, 43200)
    defaults = load_user_fleet(write(tmp_path, tiered(), "plain.yaml"), "rps").setup
    assert (defaults.growth_backtest_s, defaults.growth_refresh_s) == (3 * 86400, 86400)
    assert ReplaySetup().growth_refresh_s is None  # the suites: every reforecast_s

    history = diurnal(6, 200 * fleet.units_per_gpu)
    full = prepare_trace(history, fleet.units_per_gpu, fleet.setup)
    trace = replace(full, test_start=len(full.index) - 2)
    cache: ForecastCache = {}
    tiercast_run(trace, fleet.setup, fleet.config, "predictive", forecast_cache=cache)
    made = sorted(at for (_, kind, at) in cache if kind == "backtest")
    # Two days of origins, one forecast every 12 hours.
    assert len(made) == 4
    assert {b - a for a, b in itertools.pairwise(made)} == {pd.Timedelta(hours=12)}


def test_the_replay_config_keeps_the_pools_and_policy_of_the_file(tmp_path: Path) -> None:
    config = load_user_fleet(write(tmp_path, tiered()), "rps").config
    assert [(s.name, s.step_s, s.query, s.file) for s in config.signals] == [
        ("demand", 300, None, None)
    ]
    assert [(w.name, w.signal) for w in config.workloads] == [
        ("chat", "demand"),
        ("chat-large", "demand"),
    ]
    pools = {p.name: p for p in config.pools}
    assert list(pools) == ["committed", "cheap", "elastic"]
    assert {n: (p.tier, p.price_per_gpu_hour, p.lead_time_s) for n, p in pools.items()} == {
        "committed": ("reserved", 2.1, 1500),
        "cheap": ("spot", 1.3, 1500),
        "elastic": ("on-demand", 3.5, 2400),
    }
    assert all(p.provider.kind == "recording" and p.current_nodes is None for p in config.pools)
    # The reserved commitment (2 running) is the pool's size; the others keep their bounds.
    assert (pools["committed"].min_nodes, pools["committed"].max_nodes) == (2, 2)
    assert (pools["elastic"].min_nodes, pools["elastic"].max_nodes) == (0, 40)
    assert pools["cheap"].spot_interruption_rate_per_hour == 0.04
    assert (config.policy.cycle_s, config.policy.max_step_nodes, config.policy.quantile) == (
        300,
        6,
        0.95,
    )
    assert (config.forecast.method, config.forecast.quantiles) == ("seasonal_naive_1d", (0.5, 0.9))
    assert config.prometheus is None


def test_describe_names_the_pools_prices_and_lead_times(tmp_path: Path) -> None:
    line = load_user_fleet(write(tmp_path, tiered()), "rps").describe()
    assert "\n" not in line
    assert "3 pools of 4-GPU H100-80GB nodes" in line
    assert "committed (reserved, 2.1 USD/GPU-h, lead 25 min, 2-2 nodes)" in line
    assert "cheap (spot, 1.3 USD/GPU-h, 4%/h reclaims, lead 25 min, 0-6 nodes)" in line
    assert "elastic (on-demand, 3.5 USD/GPU-h, lead 40 min, 0-40 nodes)" in line
    data = tiered()
    data["finance"] = {"currency": "EUR"}
    assert "3.5 EUR/GPU-h" in load_user_fleet(write(tmp_path, data), "rps").describe()


def test_a_reserved_pool_without_current_nodes_keeps_its_bounds(tmp_path: Path) -> None:
    data = tiered()
    del data["pools"][0]["current_nodes"]
    pools = {p.name: p for p in load_user_fleet(write(tmp_path, data), "rps").config.pools}
    assert (pools["committed"].min_nodes, pools["committed"].max_nodes) == (1, 3)


def test_the_only_signal_with_workloads_is_chosen(tmp_path: Path) -> None:
    data = tiered()
    data["workloads"] = data["workloads"][:2]
    data["pools"] = data["pools"][2:3]
    fleet = load_user_fleet(write(tmp_path, data))
    assert fleet.signal == "rps" and not fleet.tiers
    assert [p.name for p in fleet.config.pools] == ["elastic"]


def test_the_signal_must_be_named_where_several_drive_workloads(tmp_path: Path) -> None:
    path = write(tmp_path, tiered())
    with pytest.raises(BadInputError, match=r"2 signals drive workloads \(rps, batch\)"):
        load_user_fleet(path)
    with pytest.raises(BadInputError, match=r"no signal 'gpu'; the file declares rps, batch"):
        load_user_fleet(path, "gpu")
    data = tiered()
    data["signals"].append({"name": "idle"})
    with pytest.raises(BadInputError, match=r"signal 'idle' drives no workload.*rps, batch"):
        load_user_fleet(write(tmp_path, data), "idle")
    with pytest.raises(BadInputError, match="does not exist"):
        load_user_fleet(tmp_path / "missing.yaml")


def test_the_other_signals_pools_are_chosen_for_it(tmp_path: Path) -> None:
    fleet = load_user_fleet(write(tmp_path, tiered()), "batch")
    assert [p.name for p in fleet.config.pools] == ["l4"]
    assert [w.name for w in fleet.config.workloads] == ["embed"]
    assert (fleet.setup.gpus_per_node, fleet.setup.price_per_gpu_hour) == (8, 0.8)
    # The file gives no lead time: the pool's default.
    assert fleet.setup.lead_time_s == 600
    assert fleet.units_per_gpu == 5


def test_a_signal_on_several_gpu_models_is_refused(tmp_path: Path) -> None:
    data = tiered()
    data["workloads"][2]["signal"] = "rps"
    with pytest.raises(BadInputError, match=r"several GPU models.*L4-24GB: embed.*one GPU model"):
        load_user_fleet(write(tmp_path, data), "rps")


def test_a_mig_workload_is_refused(tmp_path: Path) -> None:
    data = tiered()
    data["workloads"][0]["mig_profile"] = "1g.10gb"
    with pytest.raises(BadInputError, match=r"MIG workloads \(chat\)") as err:
        load_user_fleet(write(tmp_path, data), "rps")
    assert "\n" not in str(err.value)


def test_pools_of_different_node_sizes_are_refused(tmp_path: Path) -> None:
    data = tiered()
    data["pools"][2]["gpus_per_node"] = 8
    with pytest.raises(BadInputError, match="replay one pool size at a time") as err:
        load_user_fleet(write(tmp_path, data), "rps")
    assert "committed 4, cheap 4, elastic 8" in str(err.value)


def test_the_baselines_price_falls_back_to_spot_then_reserved(tmp_path: Path) -> None:
    data = tiered()
    data["pools"] = [p for p in data["pools"] if p["name"] != "elastic"]
    assert load_user_fleet(write(tmp_path, data), "rps").setup.price_per_gpu_hour == 1.3
    data["pools"] = [p for p in data["pools"] if p["name"] != "cheap"]
    only_reserved = load_user_fleet(write(tmp_path, data), "rps")
    assert only_reserved.setup.price_per_gpu_hour == 2.1
    assert only_reserved.setup.spot_price_per_gpu_hour == ReplaySetup().spot_price_per_gpu_hour


def test_a_lead_time_that_is_no_number_of_seconds_uses_the_fallback() -> None:
    assert lead_time_of(SimpleNamespace(lead_time_s=1500)) == 1500
    assert lead_time_of(SimpleNamespace(lead_time_s="auto", lead_time_fallback_s=900)) == 900
    assert lead_time_of(SimpleNamespace(lead_time_s="auto")) == 600
    assert lead_time_of(SimpleNamespace(lead_time_s="auto", lead_time_fallback_s=None)) == 600


def test_an_auto_lead_time_replays_with_its_fallback(tmp_path: Path) -> None:
    if "lead_time_fallback_s" not in PoolConfig.model_fields:
        pytest.skip("this tree's PoolConfig has no 'lead_time_s: auto'")
    data = tiered()
    data["pools"][2].update(lead_time_s="auto", lead_time_fallback_s=3000)
    fleet = load_user_fleet(write(tmp_path, data), "rps")
    assert [p.lead_time_s for p in fleet.config.pools] == [1500, 1500, 3000]
    assert (fleet.setup.lead_time_s, fleet.setup.lead_steps) == (3000, 10)


def diurnal(days: int, peak: float) -> pd.Series:
    """A day-long sine between 10% and 100% of ``peak`` (signal units), on 5-minute steps."""
    n = days * 288
    t = np.arange(n)
    rng = np.random.default_rng(1)
    values = peak * (0.55 - 0.45 * np.cos(2 * np.pi * t / 288)) + rng.normal(0, peak * 0.01, n)
    idx = pd.date_range("2026-03-02", periods=n, freq="5min", name="timestamp")
    return pd.Series(np.maximum(values, 0.0), index=idx, name="rps")


def test_a_short_replay_runs_on_the_pools_of_the_file(tmp_path: Path) -> None:
    fleet: UserFleet = load_user_fleet(write(tmp_path, tiered()), "rps")
    # 20 to 200 GPUs a day; only the 3 hours of a morning rise are replayed, to keep the test
    # short (the trough is at midnight, the peak at noon).
    history = diurnal(6, 200 * fleet.units_per_gpu).iloc[: 5 * 288 + 108]
    full = prepare_trace(history, fleet.units_per_gpu, fleet.setup)
    trace = replace(full, test_start=len(full.index) - 36)
    start = trace.test_start
    run = tiercast_run(trace, fleet.setup, fleet.config, "predictive", solver="greedy")
    prices = {p.name: p.price_per_gpu_hour * 4 * STEP_H for p in fleet.config.pools}
    assert run.price_per_node_step == pytest.approx(prices)
    assert list(run.requested) == ["committed", "cheap", "elastic"]
    # The reserved commitment is held; the rise is bought on the elastic pools.
    assert (run.requested["committed"] == 2).all()
    assert run.requested["elastic"][-1] > run.requested["elastic"][0]
    # Every pool boots for the fleet's longest lead time: 8 steps (40 minutes).
    assert fleet.setup.lead_steps == 8
    for name in ("committed", "elastic"):
        assert run.usable[name].tolist() == usable_nodes(run.requested[name], 8).tolist()
    rise = int(np.argmax(np.diff(run.requested["elastic"]) > 0)) + 1
    assert run.usable["elastic"][rise] < run.requested["elastic"][rise]

    reactive = reactive_requests(trace, fleet.setup)
    seen = trace.demand[start - 1 : start + 35]
    assert reactive[0] == math.ceil(seen[0] * 1.2 / 4 - 1e-9)  # in 4-GPU nodes
    baseline = single_pool_run("reactive", reactive, fleet.setup)
    assert baseline.price_per_node_step["on-demand"] == pytest.approx(3.5 * 4 * STEP_H)
    assert baseline.usable["on-demand"].tolist() == usable_nodes(reactive, 8).tolist()
