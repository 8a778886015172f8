"""Starvation: GPU pods and Kueue workloads that wait become a floor under the next plan.

The pending pods are read from a real Prometheus over backfilled kube-state-metrics and
Kueue series (``kube_pod_status_phase``, ``kube_pod_container_resource_requests``,
``kube_pod_created``, ``kube_pod_info``, ``kueue_pending_workloads``); the planner is
then given what runs plus what waits.
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
from scaler.config import Config, ConfigError, parse_config
from scaler.inputs.backfilling import TraceSeries, write_blocks
from scaler.inputs.demo import DEMO_CONFIG
from scaler.inputs.pending import collect_starvation, waiting_query
from scaler.planning.starvation import ModelWaiting, Starvation
from scaler.service.cycle import run_cycle
from tests.planning_inputs import plan_for
from tests.prometheus_server import PrometheusServer, start_prometheus
from tests.test_planning import NOW as PLAN_NOW
from tests.test_planning import forecast

T0 = pd.Timestamp("2024-03-01T00:00:00")
NOW = T0 + pd.Timedelta(hours=2)
MINUTES = 150


def _epoch(t: pd.Timestamp) -> float:
    return (t - pd.Timestamp("1970-01-01")).total_seconds()


def _series(labels: dict[str, str], value: float, start: pd.Timestamp, end: pd.Timestamp) -> Any:
    """A gauge at ``value`` every minute of ``[start, end]``."""
    stamps = pd.date_range(start, end, freq="1min")
    t = np.array([_epoch(x) for x in stamps])
    return TraceSeries(labels=labels, timestamps_s=t, values=np.full(len(t), float(value)))


# (namespace, pod, phase, GPUs, created, last seen, priority class)
PODS = (
    ("ml", "train-0", "Pending", 4, T0, T0 + pd.Timedelta(minutes=MINUTES), "batch"),
    ("ml", "serve-0", "Running", 2, T0, T0 + pd.Timedelta(minutes=MINUTES), "serving"),
    # Pending for two minutes only: under the 300 s threshold.
    ("ml", "young-0", "Pending", 1, NOW - pd.Timedelta(minutes=2), NOW, "batch"),
    # Pending until half an hour ago, then gone (scheduled and finished).
    ("ml", "done-0", "Pending", 3, T0, NOW - pd.Timedelta(minutes=30), "batch"),
    # tiercast's own placeholder: waits on purpose, is never demand.
    (
        "tiercast-system",
        "tiercast-placeholder-x",
        "Pending",
        8,
        T0,
        T0 + pd.Timedelta(minutes=MINUTES),
        "tiercast-placeholder",
    ),
)


def _backfill(tsdb: Path) -> None:
    phases, requests, created, info = [], [], [], []
    for ns, pod, phase, gpus, start, end, cls in PODS:
        who = {"namespace": ns, "pod": pod, "uid": f"uid-{pod}"}
        for p in ("Pending", "Running", "Succeeded"):
            phases.append(_series({**who, "phase": p}, 1.0 if p == phase else 0.0, start, end))
        requests.append(
            _series(
                {**who, "container": "main", "resource": "nvidia_com_gpu", "unit": "integer"},
                gpus,
                start,
                end,
            )
        )
        requests.append(
            _series({**who, "container": "main", "resource": "cpu", "unit": "core"}, 16, start, end)
        )
        created.append(_series(who, _epoch(start), start, end))
        info.append(_series({**who, "priority_class": cls, "node": ""}, 1.0, start, end))
    end = T0 + pd.Timedelta(minutes=MINUTES)
    kueue = [
        _series({"cluster_queue": "research", "status": "active"}, 3, T0, end),
        _series({"cluster_queue": "research", "status": "inadmissible"}, 5, T0, end),
        # A queue whose workloads appeared a minute ago: not yet waiting.
        _series(
            {"cluster_queue": "fresh", "status": "active"}, 2, NOW - pd.Timedelta(minutes=1), end
        ),
    ]
    write_blocks("kube_pod_status_phase", phases, tsdb)
    write_blocks("kube_pod_container_resource_requests", requests, tsdb)
    write_blocks("kube_pod_created", created, tsdb)
    write_blocks("kube_pod_info", info, tsdb)
    write_blocks("kueue_pending_workloads", kueue, tsdb)


@pytest.fixture(scope="module")
def ksm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """A real Prometheus over backfilled kube-state-metrics and Kueue series."""
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed (Debian's prometheus package)")
    workdir = tmp_path_factory.mktemp("ksm")
    tsdb = workdir / "tsdb"
    _backfill(tsdb)
    server = start_prometheus(tsdb, workdir)
    yield server
    server.stop()


def _config(url: str, **starvation: Any) -> Config:
    """One H100 on-demand pool of 8-GPU nodes, its signal from Prometheus at ``url``."""
    return parse_config(
        {
            "signals": [{"name": "rps", "query": "sum(vllm:num_requests_running)"}],
            "workloads": [
                {"name": "w", "signal": "rps", "gpu_model": "H100", "units_per_replica": 1}
            ],
            "pools": [
                {
                    "name": "on-demand",
                    "tier": "on-demand",
                    "gpu_model": "H100",
                    "gpus_per_node": 8,
                    "price_per_gpu_hour": 4.0,
                    "lead_time_s": 600,
                    "max_nodes": 40,
                }
            ],
            "prometheus": {"url": url},
            "starvation": {
                "kueue_queues": [
                    {"cluster_queue": "research", "gpu_model": "H100", "gpus_per_workload": 2}
                ],
                **starvation,
            },
        }
    )


def test_pending_gpu_pods_and_kueue_workloads_are_read_from_kube_state_metrics(
    ksm: PrometheusServer,
) -> None:
    got = collect_starvation(_config(ksm.url), NOW)
    assert got is not None
    w = got.models["H100-80GB"]
    # train-0's 4 GPUs wait (young-0 is under the threshold, done-0 is gone, the
    # placeholder is tiercast's own), and 3 research workloads of 2 GPUs; the fresh
    # queue's have not waited 300 s yet. serve-0 runs on 2; CPU requests count for nothing.
    assert (w.waiting_gpus, w.pods, w.workloads, w.running_gpus) == (10.0, 1, 3, 2.0)
    assert got.floor() == {"H100-80GB": 12.0}
    assert got.unattributed_gpus == 0
    # A lower threshold lets young-0 count, and the fresh queue's 2 x 1 GPU.
    young = collect_starvation(_config(ksm.url, pending_threshold_s=60), NOW)
    assert young is not None
    assert young.models["H100-80GB"].waiting_gpus == 10.0 + 1 + 2
    # Half an hour earlier done-0 still waited.
    earlier = collect_starvation(_config(ksm.url), NOW - pd.Timedelta(minutes=40))
    assert earlier is not None and earlier.models["H100-80GB"].pods == 2


def test_a_pending_gpu_pod_raises_the_next_plan(ksm: PrometheusServer) -> None:
    config = _config(ksm.url)
    starvation = collect_starvation(config, NOW)
    assert starvation is not None
    # The forecast and the newest observation say 1 GPU; one node is running.
    fc = forecast(np.full(300, 1.0), 0.1, 1.0, 1.0)
    inventory = {"on-demand": 1}
    without = plan_for(config, {"rps": fc}, inventory, PLAN_NOW)
    with_waiting = plan_for(config, {"rps": fc}, inventory, PLAN_NOW, waiting=starvation.floor())
    assert without.actions[0].target_nodes == 1
    # What runs (2) plus what waits (10) is 12 GPUs: two 8-GPU nodes.
    assert with_waiting.actions[0].decision == "scale-up"
    assert with_waiting.actions[0].target_nodes == 2
    assert with_waiting.demand_gpus["H100-80GB"][0] >= 12.0


def test_waiting_gpus_hold_a_scale_down_of_the_nodes_pods_run_on() -> None:
    config = _config("http://127.0.0.1:9")
    fc = forecast(np.full(300, 0.0), 0.1, 0.0, 0.0)
    floor = Starvation("2026-03-02T00:00:00Z", 300, {"H100-80GB": ModelWaiting(16.0, 0.0)})
    plan = plan_for(config, {"rps": fc}, {"on-demand": 3}, PLAN_NOW, waiting=floor.floor())
    # Demand fell to zero, but 16 GPUs of Running pods keep two nodes.
    assert plan.actions[0].target_nodes == 2


def test_the_cycle_notes_what_waited_and_records_it_in_the_plan_risk(tmp_path: Path) -> None:
    config = parse_config({**_file_config(), "model_store": {"path": str(tmp_path)}})
    idx = pd.date_range(PLAN_NOW - pd.Timedelta(days=3), PLAN_NOW, freq="5min", name="timestamp")
    history = {"rps": pd.Series(np.full(len(idx), 4.0), index=idx)}
    starvation = Starvation(
        "2026-03-02T00:00:00Z", 300, {"H100-80GB": ModelWaiting(8.0, 16.0, pods=2)}
    )
    result = run_cycle(
        config, history, RecordingProvider({"on-demand": 1}), PLAN_NOW, starvation=starvation
    )
    risk = result.plan.risk["starvation"]
    assert risk["models"]["H100-80GB"] == {
        "running_gpus": 8.0,
        "waiting_gpus": 16.0,
        "pods": 2,
        "workloads": 0,
    }
    assert any(
        "16 GPU(s) wait;" in n and "; 2 pod(s) Pending over 300 s" in n
        for n in map(str, result.plan.notes)
    )
    assert result.plan.actions[0].target_nodes == 3


def _file_config() -> dict[str, Any]:
    return {
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
    }


def test_file_signals_read_no_starvation_and_the_query_excludes_placeholders() -> None:
    assert collect_starvation(parse_config(_file_config()), NOW) is None
    config = _config("http://127.0.0.1:9")
    q = waiting_query(config.starvation, config.pools)
    assert 'kube_pod_status_phase{phase="Pending"}' in q and "> 300" in q
    assert 'priority_class=~"tiercast-placeholder"' in q


def test_a_refused_override_query_is_one_line_naming_the_field(ksm: PrometheusServer) -> None:
    with pytest.raises(BadInputError) as info:
        collect_starvation(_config(ksm.url, query="sum(("), NOW)
    assert str(info.value).startswith("starvation.query: ")
    assert "\n" not in str(info.value)


def test_several_gpu_models_without_a_label_are_reported_not_planned_on() -> None:
    got = Starvation("2026-03-02T00:00:00Z", 300, {}, unattributed_gpus=4.0, unattributed=("{}",))
    assert got.floor() == {}
    assert "set starvation.gpu_model or starvation.gpu_model_label" in str(got.notes()[0])


@pytest.mark.parametrize(
    ("starvation", "expected"),
    [
        ({"pending_threshold_s": -1}, "starvation.pending_threshold_s"),
        ({"gpu_model": "B300"}, "starvation.gpu_model: unknown GPU model 'B300'"),
        ({"gpu_model": "T4"}, "starvation.gpu_model: no pool has GPU model 'T4'"),
        (
            {"kueue_queues": [{"cluster_queue": "a", "gpu_model": "H100"}] * 2},
            "starvation.kueue_queues: name 'a' is used twice",
        ),
        ({"gpu_model_label": "nvidia.com/gpu"}, "starvation.gpu_model_label"),
        ({"query": ""}, "starvation.query"),
    ],
)
def test_bad_starvation_config_is_one_line(starvation: dict[str, Any], expected: str) -> None:
    data = copy.deepcopy(DEMO_CONFIG)
    data["starvation"] = starvation
    with pytest.raises(ConfigError) as info:
        parse_config(data, "cfg.yaml")
    message = str(info.value)
    assert "\n" not in message and message.startswith("cfg.yaml: ")
    assert expected in message


def test_the_review_says_how_many_gpu_hours_waited() -> None:
    from scaler.config import FinanceConfig
    from scaler.reports import reviewing
    from scaler.reports.finance import PricedFleet
    from scaler.reports.hindsight import hindsight_section
    from tests.test_reviewing import OD, T0, _cycle, _history, fleet

    config = fleet([{**OD, "max_nodes": 100}])
    cycles = []
    for k, waiting in enumerate([0.0, 8.0, 16.0, 0.0]):
        c = _cycle(T0 + pd.Timedelta(minutes=5 * k), 4.0, 1)
        risk = {
            "starvation": Starvation(
                "x", 300, {"H100-80GB": ModelWaiting(8.0, waiting, pods=int(waiting // 8))}
            ).to_dict()
        }
        cycles.append(reviewing.RecordedCycle(c.created_at, c.forecast, {**c.plan, "risk": risk}))
    h = reviewing.from_records(PricedFleet.of(config), _history({}), cycles, 0.9)
    [row] = h.waited.to_dict(orient="records")
    # 8 GPUs for one 5-minute cycle, then 16 for one: 2 GPU-hours.
    assert row["waited_gpu_hours"] == pytest.approx(24 * 300 / 3600)
    assert (row["peak_waiting_gpus"], row["cycles"]) == (16.0, 2)
    section = hindsight_section(h, FinanceConfig(), 0.1, 0.9, "en")
    line = next(p for p in section.paragraphs if "waited for capacity" in p)
    assert "2.0 GPU-hours (H100-80GB 2.0), at most 16 GPUs at once, in 2 cycle(s)" in line
    # Records from before starvation was read: no line at all.
    plain = reviewing.from_records(PricedFleet.of(config), _history({}), [_cycle(T0, 4.0, 1)], 0.9)
    assert plain.waited.empty


def test_an_answer_without_the_default_querys_labels_is_left_out() -> None:
    from forecaster.sources import LabelledSeries, StaticSource
    from scaler.inputs.pending import kueue_query, running_query

    config = _config("http://127.0.0.1:9")
    idx = pd.DatetimeIndex([NOW - pd.Timedelta(minutes=1), NOW], name="timestamp")

    def one(labels: dict[str, str], value: float) -> list[LabelledSeries]:
        return [LabelledSeries(labels, pd.Series([value, value], index=idx))]

    source = StaticSource(
        {
            # A server that answers every query with the same series (a stub, a proxy).
            waiting_query(config.starvation, config.pools): one({"__name__": "demand"}, 40.0)
            + one({"namespace": "ml", "pod": "a"}, 2.0),
            running_query(config.starvation, config.pools): one({"__name__": "demand"}, 40.0),
            kueue_query(config.starvation): one({"__name__": "demand"}, 40.0),
        }
    )
    got = collect_starvation(config, NOW, source)
    assert got is not None
    assert got.models["H100-80GB"] == ModelWaiting(0.0, 2.0, pods=1, workloads=0)


def test_starvation_defaults_are_pinned() -> None:
    from scaler.config import StarvationConfig

    s = StarvationConfig()
    assert (s.enabled, s.pending_threshold_s, s.gpu_model, s.gpu_model_label) == (
        True,
        300,
        None,
        None,
    )
    assert (s.query, s.running_query, s.kueue_query, s.kueue_queues) == (None, None, None, ())
    assert s.kueue_gpus_per_workload == 1


def test_the_waiting_gpus_are_a_metric_per_gpu_model() -> None:
    from dataclasses import replace

    from scaler.service.telemetry import Telemetry

    config = _config("http://127.0.0.1:9")
    fc = forecast(np.full(300, 1.0), 0.1, 1.0, 1.0)
    plan = plan_for(config, {"rps": fc}, {"on-demand": 1}, PLAN_NOW)
    starving = Starvation("x", 300, {"H100-80GB": ModelWaiting(2.0, 10.0, pods=1)})
    telemetry = Telemetry()
    telemetry.observe_plan(
        config.pools, replace(plan, risk={**plan.risk, "starvation": starving.to_dict()})
    )
    assert 'tiercast_waiting_gpus{gpu_model="H100-80GB"} 10.0' in telemetry.exposition().decode()
    # The next cycle reads nothing waiting: the gauge goes to 0, not its old value.
    nothing = Starvation("y", 300).to_dict()
    telemetry.observe_plan(config.pools, replace(plan, risk={**plan.risk, "starvation": nothing}))
    assert 'tiercast_waiting_gpus{gpu_model="H100-80GB"} 0.0' in telemetry.exposition().decode()
