"""Workload classes and priority: deferrable training and batch in the plan.

Inference (and a critical training run) is planned from its forecast; deferrable work is
placed into the GPUs that leaves idle, gives way first when inference rises, and an
unmet deadline is reported with the capacity it would need and its cost.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import numpy as np
import pandas as pd
import pytest

from forecaster.forecasting import SeriesForecast
from scaler.config import ConfigError, parse_config
from scaler.plans import CapacityPlan
from tests.conftest import REPO
from tests.hand_made import flat_forecast
from tests.planning_inputs import plan_for

SCHEMA = json.loads((REPO / "scaler" / "plan.schema.json").read_text())
NOW = pd.Timestamp("2026-12-02T00:00:00")
STEP = pd.Timedelta(minutes=5)
STEPS = 12 * 12  # a 12-hour horizon


def forecast(name: str, level: np.ndarray | float, last: float | None = None) -> SeriesForecast:
    """A flat-spread forecast of ``level`` (a constant or one value per 5 minutes)."""
    return flat_forecast(name, level, NOW, STEP, STEPS, last=last)


def config(*extra: dict[str, Any], kueue: dict[str, Any] | None = None, **deferred: Any) -> Any:
    """Inference on signal ``rps`` (one GPU per unit) over 4 reserved and up to 6
    on-demand 8-GPU H100 nodes; ``extra`` workloads beside it."""
    workloads: list[dict[str, Any]] = [
        {"name": "chat", "signal": "rps", "gpu_model": "H100", "units_per_replica": 1}
    ]
    if deferred:
        workloads.append(
            {"name": "train", "class": "training", "gpu_model": "H100", "deferrable": deferred}
        )
    data: dict[str, Any] = {
        "signals": [{"name": "rps"}, {"name": "queue", "unit": "GPU-hours"}],
        "workloads": [*workloads, *extra],
        "pools": [
            {
                "name": "reserved",
                "tier": "reserved",
                "gpu_model": "H100",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 2.0,
                "min_nodes": 4,
                "max_nodes": 4,
                "lead_time_s": 0,
            },
            {
                "name": "on-demand",
                "tier": "on-demand",
                "gpu_model": "H100",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 4.0,
                "max_nodes": 6,
                "lead_time_s": 600,
            },
        ],
        "policy": {
            "horizon_s": STEPS * 300,
            "scale_down_stabilization_s": 0,
            "headroom_fraction": 0.0,
        },
        "finance": {"currency": "USD"},
    }
    if kueue is not None:
        data["kubernetes"] = {"kueue": kueue}
    return parse_config(data)


def plan(cfg: Any, rps: np.ndarray | float, **kw: Any) -> CapacityPlan:
    forecasts = {"rps": forecast("rps", rps)}
    forecasts.update(kw.pop("forecasts", {}))
    result = plan_for(cfg, forecasts, {"reserved": 4, "on-demand": 0}, NOW, solver="greedy", **kw)
    jsonschema.validate(json.loads(result.to_json()), SCHEMA)
    return result


def test_classes_priorities_and_priority_classes_are_named_in_the_plan() -> None:
    cfg = config(
        {
            "name": "pretrain",
            "signal": "rps",
            "class": "training",
            "critical": True,
            "gpu_model": "H100",
            "units_per_replica": 1e9,
            "min_replicas": 8,
        },
        {
            "name": "nightly",
            "class": "batch",
            "gpu_model": "H100",
            "deferrable": {"gpu_hours": 10, "deadline": "12h"},
        },
        gpu_hours=20,
        deadline="2026-12-02T06:00:00Z",
    )
    section = plan(cfg, 8.0).workloads
    assert section["classes"]["chat"] == {
        "class": "inference",
        "priority": 1000,
        "priority_class": "tiercast-inference",
        "critical": False,
        "deferrable": False,
    }
    assert section["classes"]["pretrain"]["priority"] == 1000
    assert section["classes"]["train"]["priority_class"] == "tiercast-training"
    # Lowest first: placeholders, then batch, training, then inference and critical runs.
    order = [(pc["name"], pc["value"]) for pc in section["priority_classes"]]
    assert order == [
        ("tiercast-placeholder", -10),
        ("tiercast-batch", 50),
        ("tiercast-training", 100),
        ("tiercast-inference", 1000),
        ("tiercast-training-critical", 1000),
    ]
    never = {pc["name"] for pc in section["priority_classes"] if pc["preemption_policy"] == "Never"}
    assert never == {"tiercast-batch", "tiercast-training"}


def test_deferrable_work_fills_the_idle_reserved_gpus_and_meets_its_deadline() -> None:
    # 8 GPUs of inference on 32 reserved GPUs: 24 idle for 6 hours is 144 GPU-hours.
    cfg = config(gpu_hours=100, deadline="2026-12-02T06:00:00Z")
    result = plan(cfg, 8.0)
    entry = result.workloads["deferrable"]["train"]
    assert entry["placed_gpu_hours"] == pytest.approx(100, abs=0.01)
    assert entry["meets_deadline"] and entry["deadline_needs"] is None
    # Deferrable work changes nothing in the tier plan: no on-demand node for it.
    assert all(n == 0 for p in result.pools if p.pool == "on-demand" for n in p.target_nodes)
    hourly = result.workloads["hourly"]["reserved"]
    assert hourly[0]["inference_gpu_hours"] == pytest.approx(8.0)
    assert hourly[0]["deferrable_gpu_hours"] == pytest.approx(24.0)
    assert hourly[0]["idle_gpu_hours"] == pytest.approx(0.0)
    assert sum(h["deferrable_gpu_hours"] for h in hourly) == pytest.approx(100, abs=0.01)
    assert any("'train' (training): 100.0 of 100.0" in n for n in map(str, result.notes))


def test_a_deadline_troughs_cannot_meet_is_reported_with_the_capacity_it_needs() -> None:
    # 300 GPU-hours in 6 hours, 24 idle GPUs: 144 fit, 156 do not.
    cfg = config(gpu_hours=300, deadline="2026-12-02T06:00:00Z")
    entry = plan(cfg, 8.0).workloads["deferrable"]["train"]
    assert entry["placed_gpu_hours"] == pytest.approx(144, abs=0.01)
    assert not entry["meets_deadline"]
    need = entry["deadline_needs"]
    assert need["short_gpu_hours"] == pytest.approx(156, abs=0.01)
    # On-demand, after its 10-minute lead time: 156 / 5.833 h = 26.7 -> 27 GPUs -> 4 nodes.
    assert (need["pool"], need["extra_nodes"], need["extra_gpus"]) == ("on-demand", 4, 32)
    assert need["meets_deadline"]
    assert need["hours"] == pytest.approx(156 / 32, abs=0.001)
    assert need["cost"] == pytest.approx(156 * 4.0, abs=0.01)


def test_a_deadline_past_every_pool_s_room_says_what_binds() -> None:
    cfg = config(gpu_hours=2000, deadline="2026-12-02T06:00:00Z")
    need = plan(cfg, 8.0).workloads["deferrable"]["train"]["deadline_needs"]
    assert need["extra_nodes"] == 6 and not need["meets_deadline"]
    assert need["binding"] == "max_nodes"


def test_a_deadline_already_passed_says_so() -> None:
    cfg = config(gpu_hours=10, deadline="2026-12-01T00:00:00Z")
    entry = plan(cfg, 8.0).workloads["deferrable"]["train"]
    assert entry["placed_gpu_hours"] == 0
    assert entry["deadline_needs"] == {
        "short_gpu_hours": 10.0,
        "meets_deadline": False,
        "binding": "the deadline has passed",
    }


def test_when_inference_rises_deferrable_placement_drops_first() -> None:
    cfg = config(gpu_hours=300, deadline="2026-12-02T06:00:00Z")
    quiet = plan(cfg, 8.0)
    rising = np.where(np.arange(STEPS) < 24, 8.0, 30.0)  # inference rises after 2 hours
    busy = plan(cfg, rising)
    q, b = quiet.workloads["deferrable"]["train"], busy.workloads["deferrable"]["train"]
    assert b["placed_gpu_hours"] < q["placed_gpu_hours"]
    # Where inference rose, the training gave way and inference kept everything it needs.
    gpus = np.asarray(b["gpus"])
    assert gpus[:24].min() == 24 and gpus[30:72].max() <= 2
    reserved = busy.workloads["hourly"]["reserved"]
    assert reserved[4]["inference_gpu_hours"] == pytest.approx(30.0)
    assert np.allclose(np.asarray(busy.demand_gpus["H100-80GB"])[30:72], 30.0)


def test_critical_training_keeps_its_capacity_when_inference_rises() -> None:
    critical = {
        "name": "pretrain",
        "signal": "rps",
        "class": "training",
        "critical": True,
        "gpu_model": "H100",
        "units_per_replica": 1e9,  # its signal never adds a replica: min_replicas is the run
        "min_replicas": 16,
    }
    cfg = config(critical, gpu_hours=300, deadline="2026-12-02T06:00:00Z")
    quiet, busy = plan(cfg, 8.0), plan(cfg, np.where(np.arange(STEPS) < 24, 8.0, 30.0))
    for result, rps in ((quiet, 8.0), (busy, 30.0)):
        need = np.asarray(result.demand_gpus["H100-80GB"])
        assert need[40] == pytest.approx(rps + 16)  # inference and the critical run
        assert result.workloads["critical_gpus"]["H100-80GB"][40] == 16
    # With 16 GPUs kept for the run, training gets only what is left: 8 reserved GPUs, and
    # once inference rises to 30, the 2 GPUs 46 leave of 48 on whole nodes.
    assert quiet.workloads["deferrable"]["train"]["gpus"][0] == 8
    assert busy.workloads["deferrable"]["train"]["gpus"][40] == 48 - 46


def test_a_queue_signal_gives_pending_gpu_hours_and_a_stale_one_places_nothing() -> None:
    cfg = config(
        {
            "name": "train",
            "class": "training",
            "signal": "queue",
            "gpu_model": "H100",
            "deferrable": {"deadline": "4h", "max_gpus": 16},
        }
    )
    queue = {"queue": forecast("queue", 50.0)}
    entry = plan(cfg, 8.0, forecasts=queue).workloads["deferrable"]["train"]
    assert entry["source"] == "signal 'queue'" and entry["gpu_hours"] == 50
    assert entry["deadline"] == "2026-12-02T04:00:00Z"
    assert max(entry["gpus"]) == 16 and entry["meets_deadline"]
    stale = plan(cfg, 8.0, forecasts=queue, stale={"queue"})
    assert stale.workloads["deferrable"] == {}
    assert any("queue signal 'queue' is stale" in n for n in map(str, stale.notes))
    # The stale queue holds nothing else: the inference pools plan as before.
    assert [p.target_nodes for p in stale.pools] == [
        p.target_nodes for p in plan(cfg, 8.0, forecasts=queue).pools
    ]


def test_the_kueue_quota_is_the_spare_capacity_of_the_next_hour() -> None:
    cfg = config(gpu_hours=50, deadline="12h", kueue={"flavors": {"H100": "h100"}})
    rising = np.where(np.arange(STEPS) < 6, 8.0, 20.0)  # inference rises after 30 minutes
    quota = plan(cfg, rising).workloads["kueue"]
    assert quota["cluster_queue"] == "training" and quota["resource"] == "nvidia.com/gpu"
    flavor = quota["flavors"]["H100-80GB"]
    assert flavor["flavor"] == "h100"
    assert (flavor["nominal_quota"], flavor["borrowing_limit"]) == (12, 12)
    assert flavor["hold"] is None
    assert flavor["hourly"][1] == {"hour": "2026-12-02T01:00:00Z", "spare_gpus": 12}
    held = plan(cfg, 8.0, stale={"rps"}).workloads["kueue"]["flavors"]["H100-80GB"]
    assert held["hold"] == "signal 'rps' is stale"


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        (
            {"name": "t", "class": "training", "gpu_model": "H100"},
            "workloads[1].deferrable: a non-critical training workload needs deferrable",
        ),
        (
            {"name": "t", "class": "trainig", "gpu_model": "H100"},
            "workloads[1].class: Input should be 'inference', 'training' or 'batch'",
        ),
        (
            {
                "name": "t",
                "class": "batch",
                "gpu_model": "H100",
                "deferrable": {"gpu_hours": 5, "deadline": "friday"},
            },
            "workloads[1].deferrable.deadline: 'friday' is neither an ISO-8601 time",
        ),
        (
            {
                "name": "t",
                "class": "batch",
                "gpu_model": "H100",
                "deferrable": {"gpu_hours": 5, "deadline": "2026-12-05T00:00:00"},
            },
            "has no time zone",
        ),
        (
            {
                "name": "t",
                "class": "training",
                "gpu_model": "H100",
                "priority": 2000,
                "deferrable": {"gpu_hours": 5, "deadline": "1d"},
            },
            "workloads[1].priority: 2000 is not below inference workload 'chat' (1000)",
        ),
        (
            {
                "name": "t",
                "class": "training",
                "gpu_model": "H100",
                "deferrable": {"deadline": "1d"},
            },
            "workloads[1].deferrable.gpu_hours: give gpu_hours, or a signal",
        ),
        (
            {
                "name": "t",
                "signal": "rps",
                "units_per_replica": 1,
                "gpu_model": "H100",
                "critical": True,
            },
            "workloads[1].critical: applies to training and batch",
        ),
        (
            {
                "name": "t",
                "class": "training",
                "critical": True,
                "signal": "rps",
                "units_per_replica": 1,
                "gpu_model": "H100",
                "deferrable": {"gpu_hours": 5, "deadline": "1d"},
            },
            "workloads[1].deferrable: only non-critical training and batch are deferrable",
        ),
    ],
)
def test_invalid_workload_classes_get_one_line_naming_the_field(
    workload: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        config(workload)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_defaults_are_pinned() -> None:
    w = config(gpu_hours=1, deadline="1d").workloads
    assert (w[0].workload_class, w[0].priority, w[0].critical, w[0].deferrable) == (
        "inference",
        None,
        False,
        None,
    )
    assert w[1].effective_priority == 100 and w[1].deferrable is not None
    assert w[1].deferrable.max_gpus is None and w[1].signal == ""
    k = config(kueue={}).kubernetes.kueue
    assert k is not None
    assert (k.cluster_queue, k.resource, k.flavors, k.borrowing) == (
        "training",
        "nvidia.com/gpu",
        {},
        True,
    )
    assert config().kubernetes.kueue is None
