"""Config validation: the example file loads, defaults are pinned, every bad shape gets one line."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.config import ConfigError, PolicyConfig, PoolConfig, load_config, parse_config
from scaler.inputs.demo import DEMO_CONFIG
from tests.conftest import REPO


def test_example_config_loads() -> None:
    config = load_config(REPO / "data" / "example-config.yaml")
    assert {p.tier for p in config.pools} == {"reserved", "on-demand", "spot"}
    assert config.policy.quantile == 0.9


def test_documented_defaults_are_pinned() -> None:
    p = PolicyConfig()
    assert (p.quantile, p.headroom_fraction, p.scale_down_stabilization_s) == (0.9, 0.1, 1800)
    assert (p.max_step_nodes, p.budget_per_hour, p.horizon_s, p.cycle_s, p.staleness_limit_s) == (
        8,
        None,
        86400,
        300,
        900,
    )
    pool = PoolConfig(
        name="x", tier="on-demand", gpu_model="H100", gpus_per_node=8, price_per_gpu_hour=1.0
    )
    assert (
        pool.lead_time_s,
        pool.min_nodes,
        pool.max_nodes,
        pool.spot_interruption_rate_per_hour,
    ) == (600, 0, 100, 0.0)


def _bad(mutate: Any) -> str:
    data = copy.deepcopy(DEMO_CONFIG)
    mutate(data)
    with pytest.raises(ConfigError) as info:
        parse_config(data, "cfg.yaml")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("cfg.yaml")
    return message


def test_bad_tier_names_field_value_and_choices() -> None:
    msg = _bad(lambda d: d["pools"][1].update(tier="ondemand"))
    assert "pools[1].tier" in msg and "'ondemand'" in msg and "on-demand" in msg


def test_missing_field() -> None:
    msg = _bad(lambda d: d["pools"][0].pop("gpus_per_node"))
    assert "pools[0].gpus_per_node" in msg and "required" in msg


def test_unknown_field_is_a_typo() -> None:
    msg = _bad(lambda d: d["policy"].update(quantil=0.9))
    assert "policy.quantil" in msg and "unknown field" in msg


def test_negative_price() -> None:
    msg = _bad(lambda d: d["pools"][0].update(price_per_gpu_hour=-1))
    assert "pools[0].price_per_gpu_hour" in msg and "-1" in msg


def test_quantile_out_of_range() -> None:
    msg = _bad(lambda d: d["policy"].update(quantile=1.5))
    assert "policy.quantile" in msg and "1.5" in msg


def test_min_above_max() -> None:
    msg = _bad(lambda d: d["pools"][1].update(min_nodes=30, max_nodes=3))
    assert "max_nodes" in msg and "min_nodes" in msg


def test_unknown_signal_reference() -> None:
    msg = _bad(lambda d: d["workloads"][0].update(signal="nope"))
    assert "workloads[0].signal" in msg and "'nope'" in msg


def test_unknown_gpu_model() -> None:
    msg = _bad(lambda d: d["pools"][0].update(gpu_model="B300"))
    assert "pools[0].gpu_model" in msg and "B300" in msg


def test_workload_without_pool_of_its_model() -> None:
    msg = _bad(lambda d: d["workloads"][0].update(gpu_model="A30"))
    assert "no pool has GPU model" in msg


def test_duplicate_pool_names() -> None:
    msg = _bad(lambda d: d["pools"][1].update(name="h100-reserved"))
    assert "used twice" in msg


def test_wrong_type() -> None:
    msg = _bad(lambda d: d["pools"][0].update(gpus_per_node="eight"))
    assert "pools[0].gpus_per_node" in msg and "'eight'" in msg


def test_spot_rate_on_non_spot_tier() -> None:
    msg = _bad(lambda d: d["pools"][1].update(spot_interruption_rate_per_hour=0.1))
    assert "spot" in msg


def test_both_query_and_file() -> None:
    msg = _bad(lambda d: d["signals"][0].update(query="up", file="x.csv"))
    assert "signals[0]" in msg and "not both" in msg


def test_not_a_mapping() -> None:
    with pytest.raises(ConfigError, match="expected a mapping"):
        parse_config([1, 2], "cfg.yaml")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")


def test_invalid_yaml_names_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("signals:\n  - name: [unclosed\n")
    with pytest.raises(ConfigError, match=r"line \d+"):
        load_config(path)


def test_roundtrip_demo_as_yaml(tmp_path: Path) -> None:
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(DEMO_CONFIG))
    assert load_config(path).pools[0].name == "h100-reserved"
