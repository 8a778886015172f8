"""Power and heat: throttled GPUs count for less, power caps bind, energy is priced.

The DCGM exporter's series (``DCGM_FI_DEV_CLOCKS_EVENT_REASONS`` and its older name
``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS``, ``DCGM_FI_DEV_SM_CLOCK``,
``DCGM_FI_DEV_POWER_USAGE``, ``DCGM_FI_DEV_GPU_TEMP``, labelled ``Hostname``, ``gpu`` and
``modelName``) are read from a real Prometheus over backfilled blocks; the planner is then
given the GPUs throttled GPUs no longer serve.
"""

from __future__ import annotations

import copy
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from forecaster.errors import BadInputError
from scaler.actuation.protocol import RecordingProvider
from scaler.config import Config, ConfigError, PowerConfig, parse_config
from scaler.inputs.backfilling import TraceSeries, write_blocks
from scaler.inputs.power import collect_power, throttle_query
from scaler.planning.power import (
    HW_THERMAL_SLOWDOWN,
    SW_POWER_CAP,
    GpuPower,
    PowerReading,
    clock_ratio,
)
from scaler.reports import finance
from scaler.service.cycle import run_cycle
from tests.planning_inputs import plan_for
from tests.prometheus_server import PrometheusServer, start_prometheus
from tests.test_finance import LEVELS, START, fake_forecast, fleet
from tests.test_planning import NOW as PLAN_NOW
from tests.test_planning import forecast

T0 = pd.Timestamp("2024-03-01T00:00:00")
NOW = T0 + pd.Timedelta(hours=2)
H100_NAME = "NVIDIA H100 80GB HBM3"


def _config(url: str = "http://127.0.0.1:9", **pool: Any) -> Config:
    """One H100 on-demand pool of 8-GPU nodes, its signal from Prometheus at ``url``."""
    return parse_config(_data(url, **pool))


def _data(url: str = "http://127.0.0.1:9", **pool: Any) -> dict[str, Any]:
    model = pool.get("gpu_model", "H100")
    return copy.deepcopy(
        {
            "signals": [{"name": "rps", "query": "sum(vllm:num_requests_running)"}],
            "workloads": [
                {"name": "w", "signal": "rps", "gpu_model": model, "units_per_replica": 1}
            ],
            "pools": [
                {
                    "name": "on-demand",
                    "tier": "on-demand",
                    "gpu_model": model,
                    "gpus_per_node": 8,
                    "price_per_gpu_hour": 4.0,
                    "lead_time_s": 600,
                    "max_nodes": 40,
                    **pool,
                }
            ],
            "prometheus": {"url": url},
        }
    )


def _gpu(node: str, gpu: int, reasons: int | None, clock: float | None, **kw: Any) -> GpuPower:
    return GpuPower(
        node, str(gpu), kw.pop("model", "H100-80GB"), reasons, clock, kw.pop("top", 1980.0), **kw
    )


def _throttled_node(node: str = "gpu-a", ratio: float = 0.5, gpus: int = 4) -> PowerReading:
    """``gpus`` GPUs of ``node`` thermally throttled to ``ratio`` of 1980 MHz, the rest not."""
    hot = [_gpu(node, i, HW_THERMAL_SLOWDOWN, 1980.0 * ratio) for i in range(gpus)]
    cool = [_gpu(node, i, 0, 1980.0) for i in range(gpus, 8)]
    return PowerReading("2026-03-02T00:00:00Z", tuple(hot + cool))


# --- the rule ------------------------------------------------------------------------


def test_a_throttled_node_counts_for_less_and_the_next_plan_keeps_a_node_more() -> None:
    config = _config()
    # 14 GPUs of demand, with the headroom: two 8-GPU nodes; two are running.
    fc = forecast(np.full(300, 14.0), 0.1, 14.0, 14.0)
    reading = _throttled_node()
    assert reading.lost_gpus() == {"H100-80GB": pytest.approx(2.0)}
    node = reading.throttled_nodes()["gpu-a"]
    assert (node["gpus"], node["counted_gpus"], node["why"]) == (4, 2.0, ["thermal"])
    without = plan_for(config, {"rps": fc}, {"on-demand": 2}, PLAN_NOW)
    derated = plan_for(config, {"rps": fc}, {"on-demand": 2}, PLAN_NOW, derated=reading.lost_gpus())
    assert without.actions[0].target_nodes == 2
    # Four GPUs at half their clock serve as two: 2 GPUs more to cover, a third node.
    assert derated.actions[0].decision == "scale-up"
    assert derated.actions[0].target_nodes == 3
    assert derated.demand_gpus["H100-80GB"][0] == pytest.approx(
        without.demand_gpus["H100-80GB"][0] + 2.0
    )
    note = str(reading.notes()[0])
    assert note.startswith("H100-80GB: 4 GPU(s) on 1 node(s) throttled (thermal)")
    assert "need raised by 2 GPU(s)" in note


def test_power_slowdown_counts_by_its_clock_and_other_reasons_do_not() -> None:
    assert clock_ratio(_gpu("n", 0, SW_POWER_CAP, 1485.0)) == pytest.approx(0.75)
    # Idle (0x1), application clocks (0x2) and sync boost (0x10) are no slowdown of work.
    for reasons in (0x1, 0x2, 0x10, 0x100):
        assert clock_ratio(_gpu("n", 0, reasons, 600.0)) == 1.0


@pytest.mark.parametrize(
    "gpu",
    [
        _gpu("n", 0, None, 990.0),  # no reasons reported
        _gpu("n", 0, HW_THERMAL_SLOWDOWN, None),  # no clock
        _gpu("n", 0, HW_THERMAL_SLOWDOWN, 990.0, top=None),  # no highest clock
        _gpu("n", 0, HW_THERMAL_SLOWDOWN, 990.0, top=0.0),
        _gpu("n", 0, HW_THERMAL_SLOWDOWN, float("nan")),
        _gpu("n", 0, HW_THERMAL_SLOWDOWN, float("inf")),
        _gpu("n", 0, HW_THERMAL_SLOWDOWN, 2500.0),  # above the highest: no slowdown seen
        _gpu("n", 0, HW_THERMAL_SLOWDOWN, 10.0),  # 0.5% of the clock: a reading error
        _gpu("n", 0, -1, 990.0),
        _gpu("n", 0, 2**62, 990.0),  # no bitmask NVML defines
        _gpu("n", 0, HW_THERMAL_SLOWDOWN, 990.0, model=None),  # no known GPU model
    ],
)
def test_bad_or_missing_dcgm_data_changes_nothing(gpu: GpuPower) -> None:
    reading = PowerReading("x", (gpu,))
    assert clock_ratio(gpu) == 1.0
    assert reading.lost_gpus() == {}
    config = _config()
    fc = forecast(np.full(300, 14.0), 0.1, 14.0, 14.0)
    without = plan_for(config, {"rps": fc}, {"on-demand": 2}, PLAN_NOW)
    got = plan_for(config, {"rps": fc}, {"on-demand": 2}, PLAN_NOW, derated=reading.lost_gpus())
    assert got.to_dict() == without.to_dict()


def test_throttling_never_lowers_a_plan_nor_buys_for_no_demand() -> None:
    config = _config()
    idle = forecast(np.full(300, 0.0), 0.1, 0.0, 0.0)
    reading = _throttled_node(ratio=0.25, gpus=8)
    without = plan_for(config, {"rps": idle}, {"on-demand": 0}, PLAN_NOW)
    got = plan_for(config, {"rps": idle}, {"on-demand": 0}, PLAN_NOW, derated=reading.lost_gpus())
    # Nothing is needed: a throttled GPU's lost share does not become a need of its own.
    assert got.actions[0].target_nodes == without.actions[0].target_nodes == 0
    busy = forecast(np.full(300, 20.0), 0.1, 20.0, 20.0)
    for lost in (0.0, 1.0, 6.0, 100.0):
        plan = plan_for(
            config, {"rps": busy}, {"on-demand": 3}, PLAN_NOW, derated={"H100-80GB": lost}
        )
        assert plan.actions[0].target_nodes >= 3


# --- the power cap -------------------------------------------------------------------


def test_the_power_cap_binds_and_is_named() -> None:
    # H100 at its 700 W TDP: an 8-GPU node draws 5.6 kW; 12 kW holds two nodes.
    config = _config(max_power_kw=12)
    assert config.pools[0].power_cap_nodes == 2
    fc = forecast(np.full(300, 30.0), 0.1, 30.0, 30.0)
    plan = plan_for(config, {"rps": fc}, {"on-demand": 1}, PLAN_NOW)
    pool = plan.pools[0]
    assert plan.actions[0].target_nodes == 2
    assert max(pool.target_nodes) == 2
    assert "max_power_kw" in pool.binding and "max_nodes" not in pool.binding
    [short] = plan.risk["shortfall"]
    assert "max_power_kw" in short["because"]
    assert "max_power_kw" in plan.actions[0].reason.params["bound"]
    # Without the cap the same demand gets four nodes.
    free = plan_for(_config(), {"rps": fc}, {"on-demand": 1}, PLAN_NOW)
    assert max(free.pools[0].target_nodes) >= 4


def test_a_pool_above_its_power_cap_steps_down_to_it_and_says_why() -> None:
    config = _config(max_power_kw=12, watts_per_gpu=350)  # PCIe boards: four nodes fit
    assert config.pools[0].power_cap_nodes == 4
    fc = forecast(np.full(300, 60.0), 0.1, 60.0, 60.0)
    plan = plan_for(config, {"rps": fc}, {"on-demand": 6}, PLAN_NOW)
    assert plan.actions[0].target_nodes == 4
    assert "max_power_kw" in plan.pools[0].binding


@pytest.mark.parametrize(
    ("pool", "expected"),
    [
        (
            {"max_power_kw": 12, "min_nodes": 3},
            "pools[0].max_power_kw: 12 kW holds 2 node(s) of 8 x 700 W, below min_nodes (3)",
        ),
        (
            {"gpu_model": "A10G", "price_per_kwh": 0.2},
            "pools[0].watts_per_gpu: required with price_per_kwh",
        ),
        ({"gpu_model": "A10G", "max_power_kw": 5}, "watts_per_gpu: required with max_power_kw"),
        ({"price_per_kwh": -1}, "pools[0].price_per_kwh"),
        ({"watts_per_gpu": 0}, "pools[0].watts_per_gpu"),
        ({"max_power_kw": 0}, "pools[0].max_power_kw"),
    ],
)
def test_bad_power_config_is_one_line_naming_the_field(pool: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(_data(**pool), "cfg.yaml")
    message = str(info.value)
    assert "\n" not in message and message.startswith("cfg.yaml: ")
    assert expected in message


def test_power_defaults_are_pinned() -> None:
    p = PowerConfig()
    assert (p.enabled, p.node_label, p.max_clock_window_s, p.gpu_model) == (
        True,
        "Hostname",
        7 * 86400,
        None,
    )
    assert (p.throttle_query, p.clock_query, p.max_clock_query) == (None, None, None)
    pool = _config().pools[0]
    assert (pool.price_per_kwh, pool.watts_per_gpu, pool.max_power_kw) == (None, None, None)
    assert pool.gpu_watts == 700  # the catalog's H100 SXM TDP
    assert pool.power_cap_nodes is None


# --- energy in the finance projection --------------------------------------------------


def test_energy_cost_per_pool_and_tier_in_the_finance_projection() -> None:
    from scaler.reports.finance_report import build_finance_report

    od = {"name": "od", "tier": "on-demand", "price_per_gpu_hour": 2.0, "price_per_kwh": 0.2}
    spot = {"name": "spot", "tier": "spot", "price_per_gpu_hour": 9.0, "watts_per_gpu": 350}
    config = fleet([od, spot])
    proj = finance.project(config, {"rps": fake_forecast(LEVELS)}, START, pd.Timedelta(hours=72))
    base = proj.baseline
    pools = base.monthly_pools[base.monthly_pools["band"] == "expected"]
    by_pool = pools.groupby("pool")[["energy_kwh", "energy_cost", "cost"]].sum()
    # 4 GPUs (expected) on the cheaper on-demand pool for 72 h at 700 W and 0.2 a kWh.
    assert by_pool.loc["od", "energy_kwh"] == pytest.approx(4 * 72 * 0.7)
    assert by_pool.loc["od", "energy_cost"] == pytest.approx(4 * 72 * 0.7 * 0.2)
    # No energy price on the spot pool: no energy cost, and the node cost is unchanged.
    assert by_pool.loc["spot", "energy_cost"] == 0.0
    assert by_pool.loc["od", "cost"] == pytest.approx(4 * 72 * 2.0)
    tiers = base.monthly[base.monthly["band"] == "expected"].groupby("tier")["energy_cost"].sum()
    assert tiers["on-demand"] == pytest.approx(40.32)
    assert base.total_energy_cost("expected") == pytest.approx(40.32)
    assert proj.to_dict()["scenarios"][0]["totals"]["expected"]["energy_cost"] == 40.32
    for lang, label in (("en", "Energy cost, expected"), ("ru", "Стоимость электроэнергии")):
        report = build_finance_report(proj, config, "test", lang=lang, charts=False)
        fig = next(f for f in report.figures if f.key == "energy_cost_expected")
        assert fig.value == pytest.approx(40.32)
        table = next(tb for s in report.sections for tb in s.tables if tb.key == "monthly_by_tier")
        assert any(label in c.label for c in table.columns)
        assert sum(r["energy_cost_expected"] for r in table.rows) == pytest.approx(40.32)


def test_no_energy_price_adds_no_energy_columns() -> None:
    proj = finance.project(
        fleet([{"name": "od", "tier": "on-demand", "price_per_gpu_hour": 2.0}]),
        {"rps": fake_forecast(LEVELS)},
        START,
        pd.Timedelta(hours=24),
    )
    assert "energy_cost" not in proj.baseline.monthly.columns
    assert "energy_cost" not in proj.to_dict()["scenarios"][0]["totals"]["expected"]


# --- against a real Prometheus -------------------------------------------------------


def _epoch(t: pd.Timestamp) -> float:
    return (t - pd.Timestamp("1970-01-01")).total_seconds()


def _series(labels: dict[str, str], values: list[tuple[pd.Timestamp, float]]) -> TraceSeries:
    """A gauge at each ``(from, value)`` from that time on, every minute up to NOW + 30 min."""
    stamps = pd.date_range(T0, NOW + pd.Timedelta(minutes=30), freq="1min")
    v = np.full(len(stamps), np.nan)
    for start, value in values:
        v[stamps >= start] = value
    keep = ~np.isnan(v)
    t = np.array([_epoch(x) for x in stamps])
    return TraceSeries(labels=labels, timestamps_s=t[keep], values=v[keep])


HOT = NOW - pd.Timedelta(minutes=30)


def _backfill(tsdb: Path) -> None:
    new, old, clocks, watts, temps = [], [], [], [], []
    for node, gpu in [(n, g) for n in ("gpu-a", "gpu-b") for g in range(8)]:
        who = {
            "Hostname": node,
            "gpu": str(gpu),
            "modelName": H100_NAME,
            "UUID": f"GPU-{node}{gpu}",
        }
        clock = [(T0, 1980.0)]
        if node == "gpu-a":
            # The exporter of DCGM 3.3+: the new name. GPUs 0-3 run hot for the last 30 min.
            hot = gpu < 4
            new.append(_series(who, [(T0, 0.0), (HOT, float(HW_THERMAL_SLOWDOWN if hot else 0))]))
            if hot:
                clock.append((HOT, 990.0))
        else:
            # An older exporter: the old name. GPU 0 at its power cap, idle bit set too.
            reasons = SW_POWER_CAP | 0x1 if gpu == 0 else 0
            old.append(_series(who, [(T0, 0.0), (HOT, float(reasons))]))
            if gpu == 0:
                clock.append((HOT, 1485.0))
        clocks.append(_series(who, clock))
        watts.append(_series(who, [(T0, 650.0)]))
        temps.append(_series(who, [(T0, 88.0 if node == "gpu-a" else 60.0)]))
    # A series without the labels a GPU is told by: left out.
    clocks.append(_series({"job": "stray"}, [(T0, 100.0)]))
    write_blocks("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", new, tsdb)
    write_blocks("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", old, tsdb)
    write_blocks("DCGM_FI_DEV_SM_CLOCK", clocks, tsdb)
    write_blocks("DCGM_FI_DEV_POWER_USAGE", watts, tsdb)
    write_blocks("DCGM_FI_DEV_GPU_TEMP", temps, tsdb)


@pytest.fixture(scope="module")
def dcgm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """A real Prometheus over backfilled DCGM exporter series."""
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed (Debian's prometheus package)")
    workdir = tmp_path_factory.mktemp("dcgm")
    tsdb = workdir / "tsdb"
    _backfill(tsdb)
    server = start_prometheus(tsdb, workdir)
    yield server
    server.stop()


def test_throttled_gpus_are_read_from_the_dcgm_exporter(dcgm: PrometheusServer) -> None:
    config = _config(dcgm.url)
    got = collect_power(config, NOW)
    assert got is not None
    assert len(got.gpus) == 16  # both names of the reasons; the stray series left out
    # gpu-a: 4 GPUs at 990 of 1980 MHz serve as 2; gpu-b: GPU 0 at 1485 MHz serves 0.75.
    assert got.lost_gpus() == {"H100-80GB": pytest.approx(2.25)}
    nodes = got.throttled_nodes()
    assert nodes["gpu-a"]["why"] == ["thermal"] and nodes["gpu-a"]["gpus"] == 4
    assert nodes["gpu-b"]["why"] == ["power"] and nodes["gpu-b"]["counted_gpus"] == 0.75
    risk = got.to_dict()
    assert risk["power_kw"] == pytest.approx(16 * 0.65)
    assert risk["max_temp_c"] == 88.0
    # Before they ran hot, nothing was throttled: the reading changes no plan.
    before = collect_power(config, HOT - pd.Timedelta(minutes=10))
    assert before is not None and before.lost_gpus() == {}
    # The next plan keeps a node more for what the throttled GPUs lost.
    fc = forecast(np.full(300, 14.0), 0.1, 14.0, 14.0)
    plan = plan_for(config, {"rps": fc}, {"on-demand": 2}, PLAN_NOW, derated=got.lost_gpus())
    assert plan.actions[0].target_nodes == 3


def test_an_empty_dcgm_answer_is_no_reading(dcgm: PrometheusServer) -> None:
    # An hour before the exporter's first sample: nothing answers.
    assert collect_power(_config(dcgm.url), T0 - pd.Timedelta(hours=1)) is None
    assert "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS" in throttle_query(_config().power)


def test_a_refused_override_query_is_one_line_naming_the_field(dcgm: PrometheusServer) -> None:
    config = _config(dcgm.url)
    config = config.model_copy(
        update={"power": config.power.model_copy(update={"clock_query": "max(("})}
    )
    with pytest.raises(BadInputError) as info:
        collect_power(config, NOW)
    assert str(info.value).startswith("power.clock_query: ")
    assert "\n" not in str(info.value)


@pytest.mark.slow
def test_file_signals_read_no_power_and_the_cycle_records_a_reading(tmp_path: Path) -> None:
    data = {
        "signals": [{"name": "rps"}],
        "workloads": [{"name": "w", "signal": "rps", "gpu_model": "H100", "units_per_replica": 1}],
        "pools": [
            {
                "name": "on-demand",
                "tier": "on-demand",
                "gpu_model": "H100",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 4.0,
            }
        ],
        "forecast": {"method": "seasonal_naive_1d"},
        "model_store": {"path": str(tmp_path)},
    }
    config = parse_config(data)
    assert collect_power(config, NOW) is None
    idx = pd.date_range(PLAN_NOW - pd.Timedelta(days=3), PLAN_NOW, freq="5min", name="timestamp")
    history = {"rps": pd.Series(np.full(len(idx), 14.0), index=idx)}
    plain = run_cycle(config, history, RecordingProvider({"on-demand": 2}), PLAN_NOW)
    result = run_cycle(
        config, history, RecordingProvider({"on-demand": 2}), PLAN_NOW, power=_throttled_node()
    )
    assert result.plan.risk["power"]["lost_gpus"] == {"H100-80GB": 2.0}
    assert any("throttled (thermal)" in str(n) for n in result.plan.notes)
    assert result.plan.actions[0].target_nodes >= plain.plan.actions[0].target_nodes


def test_a_plan_with_a_power_cap_and_a_reading_matches_the_plan_schema() -> None:
    import dataclasses

    import jsonschema

    from tests.test_planning import SCHEMA

    config = _config(max_power_kw=12)
    fc = forecast(np.full(300, 30.0), 0.1, 30.0, 30.0)
    reading = _throttled_node()
    plan = plan_for(config, {"rps": fc}, {"on-demand": 1}, PLAN_NOW, derated=reading.lost_gpus())
    plan = dataclasses.replace(plan, risk={**plan.risk, "power": reading.to_dict()})
    jsonschema.validate(plan.to_dict(), SCHEMA)
