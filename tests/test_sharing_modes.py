"""Time-slicing and MPS as capacity the planner chooses, and pooling across workloads
(scaler.planning.sharing, scaler.planning.pooling; docs/mig.md#sharing-modes)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forecaster.forecasting import SeriesForecast
from scaler.config import Config, ConfigError, parse_config
from scaler.planning.demand import demand_by_model, gpus_for, packed_by_model
from scaler.planning.sharing import (
    MPS_MAX_CLIENTS,
    joint_quantile,
    pooling_groups,
    replicas_per_gpu,
    resolved_mode,
    signal_correlation,
)
from tests.conftest import REPO
from tests.hand_made import flat_forecast
from tests.planning_inputs import plan_for

NOW = pd.Timestamp("2026-03-02T00:00:00")
STEP = pd.Timedelta(minutes=5)
SCHEMA = json.loads((REPO / "scaler" / "plan.schema.json").read_text())


def _config(*workloads: dict[str, Any]) -> Config:
    signals = sorted({w.get("signal", w["name"]) for w in workloads})
    return parse_config(
        {
            "signals": [{"name": s} for s in signals],
            "workloads": [
                {"signal": w["name"], "gpu_model": "H100", "units_per_replica": 1, **w}
                for w in workloads
            ],
            "pools": [
                {
                    "name": "h100",
                    "tier": "on-demand",
                    "gpu_model": "H100",
                    "gpus_per_node": 8,
                    "price_per_gpu_hour": 2.5,
                    "max_nodes": 50,
                    "lead_time_s": 600,
                }
            ],
        },
        "cfg.yaml",
    )


def _forecast(name: str, level: float, spread: float = 0.2, n: int = 288) -> SeriesForecast:
    return flat_forecast(name, level, NOW, STEP, n, spread)


def _grid(n: int = 288) -> pd.DatetimeIndex:
    return pd.date_range(NOW, periods=n, freq=STEP, name="timestamp")


# --- modes ----------------------------------------------------------------------------


@pytest.mark.parametrize("sharing", ["auto", "whole", "mig"])
def test_an_isolation_required_workload_never_lands_on_time_slicing_or_mps(sharing: str) -> None:
    extra = {"mig_profile": "1g.10gb"} if sharing == "mig" else {}
    config = _config(
        {
            "name": "a",
            "sharing": sharing,
            "isolation": "required",
            "memory_gb": 8,
            "compute_share": 0.1,
            "replicas_per_gpu": 8,
            **extra,
        }
    )
    (w,) = config.workloads
    assert resolved_mode(w) in ("whole", "mig")
    assert not pooling_groups(config.workloads)


@pytest.mark.parametrize("sharing", ["time-slicing", "mps"])
def test_required_isolation_is_refused_for_shared_modes_at_load(sharing: str) -> None:
    with pytest.raises(ConfigError, match=r"workloads\[0\]\.sharing"):
        _config({"name": "a", "sharing": sharing, "isolation": "required"})


def test_auto_picks_mps_for_preferred_and_time_slicing_only_for_none() -> None:
    config = _config(
        {"name": "a", "memory_gb": 1, "compute_share": 0.01},
        {"name": "b", "memory_gb": 1, "compute_share": 0.01, "isolation": "none"},
        {"name": "c", "memory_gb": 10, "compute_share": 0.25, "isolation": "none"},
        {"name": "d"},
    )
    modes = [resolved_mode(w) for w in config.workloads]
    # MPS caps at 48 clients: 80 fit by memory, so isolation none takes time-slicing; at 4 per
    # GPU MPS packs as many and isolates more; no footprint: whole GPUs.
    assert modes == ["mps", "time-slicing", "mps", "whole"]
    assert replicas_per_gpu([config.workloads[0]], "mps") == MPS_MAX_CLIENTS


def test_time_sliced_replicas_pack_by_memory_and_compute() -> None:
    config = _config(
        {"name": "a", "sharing": "time-slicing", "memory_gb": 20, "compute_share": 0.2},
        {"name": "b", "sharing": "mps", "memory_gb": 30, "replicas_per_gpu": 2},
    )
    a, b = config.workloads
    assert replicas_per_gpu([a], "time-slicing") == 4  # 80 GB / 20 GB
    assert replicas_per_gpu([b], "mps") == 2
    # 10 replicas at 4 per GPU: 3 GPUs, not 10.
    assert float(gpus_for(a, 10.0)) == 3.0
    assert float(gpus_for(b, 3.0)) == 2.0


def test_a_shared_workload_without_a_footprint_keeps_whole_gpus() -> None:
    # Missing data never leads to a scale-down: nothing declared, nothing packed.
    config = _config({"name": "a", "sharing": "time-slicing"})
    assert float(gpus_for(config.workloads[0], 10.0)) == 10.0
    plan = plan_for(config, {"a": _forecast("a", 10)}, {"h100": 2}, NOW)
    assert any("no second replica fits" in n for n in map(str, plan.notes))


def test_co_located_time_sliced_workloads_whose_memory_does_not_fit_are_refused() -> None:
    with pytest.raises(ConfigError) as info:
        _config({"name": "a", "sharing": "time-slicing", "memory_gb": 30, "replicas_per_gpu": 4})
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith("cfg.yaml: workloads[0].replicas_per_gpu: 4 co-located time-slicing")
    with pytest.raises(ConfigError, match=r"workloads\[0\]\.memory_gb: 90 GB per replica"):
        _config({"name": "a", "sharing": "mps", "memory_gb": 90})
    with pytest.raises(ConfigError, match=r"workloads\[0\]\.replicas_per_gpu"):
        _config({"name": "a", "sharing": "mps", "compute_share": 0.5, "replicas_per_gpu": 3})
    with pytest.raises(ConfigError, match=r"workloads\[0\]\.gpus_per_replica"):
        _config({"name": "a", "sharing": "mps", "gpus_per_replica": 2})


def test_a_pooling_group_packs_to_what_every_member_fits() -> None:
    config = _config(
        {"name": "a", "sharing": "time-slicing", "memory_gb": 10, "compute_share": 0.1},
        {"name": "b", "sharing": "time-slicing", "memory_gb": 40, "compute_share": 0.25},
    )
    (group,) = pooling_groups(config.workloads)
    # Any two replicas may share a GPU: 2 x 40 GB fits, 3 x 40 GB does not.
    assert group.replicas_per_gpu == 2
    # Dedicated: a 3 at 8 per GPU -> 1, b 1 at 2 -> 1; pooled: 4 at 2 -> 2. The fewer wins.
    out = packed_by_model(config.workloads, [np.array([3.0]), np.array([1.0])])
    assert out["H100-80GB"].tolist() == [2.0]
    out = packed_by_model(config.workloads, [np.array([1.0]), np.array([1.0])])
    assert out["H100-80GB"].tolist() == [1.0]


# --- pooling from the joint forecast --------------------------------------------------


def test_joint_quantile_is_between_the_largest_and_the_sum_of_quantiles() -> None:
    med = [np.array([10.0]), np.array([10.0])]
    q = [np.array([14.0]), np.array([13.0])]
    independent = joint_quantile(med, q, np.eye(2))
    assert independent[0] == pytest.approx(20 + 5.0)
    assert joint_quantile(med, q, np.ones((2, 2)))[0] == pytest.approx(27.0)


def test_correlation_from_history_and_one_without_it() -> None:
    idx = pd.date_range("2026-02-01", periods=500, freq="5min")
    rng = np.random.default_rng(0)
    x = pd.Series(rng.normal(100, 5, 500).cumsum(), idx)
    y = pd.Series(rng.normal(100, 5, 500).cumsum(), idx)
    c = signal_correlation(["x", "y"], {"x": x, "y": y})
    assert 0.0 <= c[0, 1] < 0.3
    assert signal_correlation(["x", "y"], {"x": x})[0, 1] == 1.0
    assert signal_correlation(["x", "x"], {"x": x})[0, 1] == 1.0
    assert signal_correlation(["x", "y"], None)[0, 1] == 1.0


def test_the_plan_shows_what_pooling_saves_in_gpus_and_money() -> None:
    names = ["a", "b", "c"]
    config = _config(
        *({"name": n, "sharing": "mps", "memory_gb": 18, "compute_share": 0.25} for n in names)
    )
    forecasts = {n: _forecast(n, 3.0, spread=0.6) for n in names}
    idx = pd.date_range(NOW - pd.Timedelta(days=3), NOW - STEP, freq=STEP)
    rng = np.random.default_rng(1)
    history = {n: pd.Series(5 + rng.normal(0, 1, len(idx)), idx) for n in names}
    plan = plan_for(config, forecasts, {"h100": 1}, NOW, history=history)
    jsonschema.validate(json.loads(plan.to_json()), SCHEMA)
    pool = plan.sharing["pools"]["H100-80GB/mps"]
    assert pool["workloads"] == names and pool["replicas_per_gpu"] == 4
    assert pool["joint_quantile"] == "estimated"
    # Dedicated: 5 replicas each at q0.9 (4.8), 2 GPUs each, 6 in all. Pooled from the
    # joint quantile (about independent changes): 9 + sqrt(3 x 2^2) = 12.5 -> 13 replicas,
    # 4 GPUs; the sum of the quantiles (15 replicas) would also be 4, the peak's saving is
    # the rounding, the joint quantile's is the spread.
    assert pool["dedicated_peak_gpus"] == 6.0
    assert pool["pooled_peak_gpus"] == 4.0
    assert pool["saved_peak_gpus"] == 2.0
    assert pool["saved_cost"] == pytest.approx(pool["saved_gpu_hours"] * 2.5, abs=0.01)
    assert plan.sharing["workloads"]["a"] == {"mode": "mps", "replicas_per_gpu": 4}
    # The device plugin's config the group's nodes need, as the actuator writes it.
    assert pool["device_plugin_config"] == {
        "name": "tiercast-mps-4",
        "config": {
            "version": "v1",
            "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
        },
    }
    assert any(
        n.startswith("pooling H100-80GB/mps (a, b, c, 4 replicas per GPU)")
        for n in map(str, plan.notes)
    )


def test_pooling_saves_where_replicas_round_up_in_dedicated_sets() -> None:
    names = ["a", "b", "c", "d"]
    config = _config(
        *(
            {"name": n, "sharing": "time-slicing", "memory_gb": 20, "compute_share": 0.25}
            for n in names
        )
    )
    forecasts = {n: _forecast(n, 1.0, spread=0.0) for n in names}
    plan = plan_for(config, forecasts, {"h100": 1}, NOW)
    pool = plan.sharing["pools"]["H100-80GB/time-slicing"]
    # One replica each: four dedicated GPUs, one pooled GPU.
    assert (pool["dedicated_peak_gpus"], pool["pooled_peak_gpus"]) == (4.0, 1.0)
    assert pool["saved_gpu_hours"] == pytest.approx(3 * 24.0)
    # Near term each replica count takes its margin (1 -> 2): 8 replicas, 2 GPUs, not 4.
    assert max(plan.demand_gpus["H100-80GB"]) == pytest.approx(2.0)


@settings(max_examples=60, deadline=None)
@given(
    levels=st.lists(st.floats(0, 60), min_size=2, max_size=4),
    spreads=st.lists(st.floats(0, 1), min_size=4, max_size=4),
    memory=st.lists(st.sampled_from([5, 10, 16, 20, 26, 40, 80]), min_size=4, max_size=4),
    mode=st.sampled_from(["time-slicing", "mps"]),
)
def test_pooling_never_needs_more_gpus_than_dedicated_sets(
    levels: list[float], spreads: list[float], memory: list[int], mode: str
) -> None:
    names = [f"w{i}" for i in range(len(levels))]
    config = _config(
        *(
            {"name": n, "sharing": mode, "memory_gb": memory[i], "compute_share": 0.1}
            for i, n in enumerate(names)
        )
    )
    forecasts = {n: _forecast(n, levels[i], spreads[i], n=12) for i, n in enumerate(names)}
    grid = _grid(12)
    pooled = demand_by_model(config.fleet, forecasts, grid, 0.9)["H100-80GB"]
    dedicated = sum(
        gpus_for(w, forecasts[w.name].frame["q0.9"].to_numpy()) for w in config.workloads
    )
    assert (pooled <= dedicated + 1e-9).all()


def test_the_footprint_fields_default_to_none() -> None:
    (w,) = _config({"name": "a"}).workloads
    assert (w.memory_gb, w.compute_share, w.replicas_per_gpu) == (None, None, None)
    assert resolved_mode(w) == "whole"


def test_missing_data_for_a_shared_workload_never_scales_down() -> None:
    config = _config(
        {"name": "a", "sharing": "mps", "memory_gb": 10, "compute_share": 0.1},
        {"name": "b", "sharing": "mps", "memory_gb": 10, "compute_share": 0.1},
    )
    # No forecast for b: its GPU model holds at the 3 nodes it has.
    plan = plan_for(config, {"a": _forecast("a", 1.0)}, {"h100": 3}, NOW, stale={"b"})
    (pool,) = plan.pools
    assert min(pool.target_nodes) >= 3
    assert all(a.decision != "scale-down" for a in plan.actions)
