"""The Kueue quota: the training ClusterQueue's GPU nominalQuota follows the plan's spare capacity.

Against the fake API server, which serves Kueue's ``kueue.x-k8s.io/v1beta1`` ClusterQueue
and refuses what Kueue's CRD rules and validating webhook refuse (:mod:`tests.fake_kueue`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from scaler.actuation.kube.kueue import KIND, quantity
from scaler.actuation.kube.providers import KubeProvider, build_provider
from scaler.actuation.kube.transport import ClientTransport, RetryPolicy, Session
from scaler.config import Config, parse_config
from scaler.service.cycle import with_kueue_quota
from tests.fake_kube import Clock, FakeKube, connect_to, start_fake
from tests.fake_kueue import cluster_queue
from tests.planning_inputs import plan_for
from tests.test_workload_classes import forecast

CQ = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/training"
CQS = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues"
AT = "2026-12-02T00:00:00Z"


def kueue_config(**kueue: Any) -> Config:
    """Inference on ``rps`` and deferrable training on 4 reserved 8-GPU H100 nodes."""
    return parse_config(
        {
            "signals": [{"name": "rps"}],
            "workloads": [
                {"name": "chat", "signal": "rps", "gpu_model": "H100", "units_per_replica": 1},
                {
                    "name": "train",
                    "class": "training",
                    "gpu_model": "H100",
                    "deferrable": {"gpu_hours": 100, "deadline": "1d"},
                },
            ],
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
                }
            ],
            "policy": {"horizon_s": 7200, "headroom_fraction": 0.0},
            "kubernetes": {
                "request_timeout_s": 0.3,
                "kueue": {"flavors": {"H100": "h100"}, **kueue},
            },
        }
    )


def section(
    nominal: int = 24, borrowing: int | None = 0, hold: str | None = None
) -> dict[str, Any]:
    """A plan's ``workloads.kueue`` section for the H100 flavor."""
    return {
        "cluster_queue": "training",
        "resource": "nvidia.com/gpu",
        "flavors": {
            "H100-80GB": {
                "flavor": "h100",
                "nominal_quota": nominal,
                "borrowing_limit": borrowing,
                "hold": hold,
                "hourly": [],
            }
        },
    }


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    f = start_fake()
    yield f
    f.stop()


@pytest.fixture
def transport(fake: FakeKube, tmp_path: Path) -> ClientTransport:
    clock = Clock()
    return connect_to(fake, tmp_path, RetryPolicy(1, 0.01, 0.02, sleep=clock.sleep), timeout_s=0.3)


def provider(transport: ClientTransport, **kueue: Any) -> KubeProvider:
    return KubeProvider(kueue_config(**kueue), Session(transport))


def gpu_quota(fake: FakeKube, flavor: int = 0) -> dict[str, Any]:
    entry: dict[str, Any] = fake.get(CQ)["spec"]["resourceGroups"][0]["flavors"][flavor][
        "resources"
    ][1]
    return entry


def _post(fake: FakeKube, body: dict[str, Any]) -> tuple[int, Any]:
    code, answer, _ = fake.handle(
        "POST", CQS, "application/json", json.dumps(body).encode(), "Bearer fake-kube-token"
    )
    return code, answer


def test_the_fake_refuses_what_kueue_refuses(fake: FakeKube) -> None:
    short = cluster_queue("a")
    short["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()
    renamed = cluster_queue("b")
    renamed["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["name"] = "nvidia.com/mig"
    twice = cluster_queue("c", {"h100": 8})
    twice["spec"]["resourceGroups"].append(
        {
            "coveredResources": ["memory"],
            "flavors": [{"name": "h100", "resources": [{"name": "memory", "nominalQuota": "1Ti"}]}],
        }
    )
    for body, why in (
        (cluster_queue("d", {"h100": {"nominalQuota": "8", "borrowingLimit": "4"}}),
         "borrowingLimit must be nil when cohort is empty"),
        (cluster_queue("e", {"h100": {"nominalQuota": "8", "lendingLimit": "2"}}),
         "lendingLimit: must be nil when cohort is empty"),
        (cluster_queue("f", {"h100": {"nominalQuota": "8", "lendingLimit": "9"}}, cohort="ml"),
         "must be less than or equal to the nominalQuota"),
        (cluster_queue("g", {"h100": -1}), "must be greater than or equal to 0"),
        (cluster_queue("h", {"h100": "eight"}), "quantities must match the regex"),
        (cluster_queue("i", {"h100": {}}), "nominalQuota: Required value"),
        (short, "the same number of resources as the coveredResources"),
        (renamed, "must match the name in coveredResources"),
        (twice, 'Duplicate value: "h100"'),
        (cluster_queue("j", {"H100": 8}), "a DNS-1123 subdomain"),
    ):  # fmt: skip
        code, answer = _post(fake, body)
        assert code == 422 and why in answer["message"], (why, answer)
    # What Kueue takes: limits within a cohort, a lending limit at most the quota.
    ok = cluster_queue(
        "k", {"h100": {"nominalQuota": "8", "borrowingLimit": "4", "lendingLimit": "8"}}, "ml"
    )
    assert _post(fake, ok)[0] == 201
    assert fake.get(f"{CQS}/k")["spec"]["queueingStrategy"] == "BestEffortFIFO"


def test_the_quota_is_written_to_the_flavor_and_a_second_run_changes_nothing(
    fake: FakeKube, transport: ClientTransport
) -> None:
    fake.create(CQS, cluster_queue(flavors={"h100": 8, "a100": 4}, cohort="ml"))
    p = provider(transport)
    action = p.kueue_action(section(24, 6), AT)
    assert action is not None and action.kind == KIND and action.decision == "scale-up"
    assert (action.pool, action.current_nodes, action.target_nodes) == ("training", 8, 24)
    assert action.reason.code == "kueue.quota" and action.reason.params["flavors"] == ("h100",)
    assert "nvidia.com/gpu nominalQuota 8 -> 24" in action.reason.text()
    assert action.details["flavors"]["h100"]["borrowing_limit"] == 6
    result = p.apply(action)
    assert result.outcome == "applied", result
    assert gpu_quota(fake) == {
        "name": "nvidia.com/gpu",
        "nominalQuota": "24",
        "borrowingLimit": "6",
    }
    assert gpu_quota(fake, 1)["nominalQuota"] == "4"  # other flavors untouched
    patch = [c for c in result.calls if c["verb"] == "PATCH"]
    assert len(patch) == 1 and patch[0]["body"]["metadata"]["resourceVersion"]
    again = p.kueue_action(section(24, 6), AT)
    assert again is not None and again.decision == "no-op"
    assert "no change" in p.apply(again).message
    assert len([r for r in fake.writes() if r.path == CQ]) == 1


def test_without_a_cohort_no_limit_is_written_and_a_lending_limit_follows_the_quota(
    fake: FakeKube, transport: ClientTransport
) -> None:
    fake.create(CQS, cluster_queue())
    result = provider(transport).apply(
        provider(transport).kueue_action(section(12, 12), AT)  # type: ignore[arg-type]
    )
    assert result.outcome == "applied"
    assert gpu_quota(fake) == {"name": "nvidia.com/gpu", "nominalQuota": "12"}
    fake.mutate(
        CQ,
        lambda o: (
            o["spec"].update(cohort="ml")
            or o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1].update(
                lendingLimit="12"
            )
        ),
    )
    p = provider(transport, borrowing=False)
    action = p.kueue_action(section(5, None), AT)
    assert action is not None and action.decision == "scale-down"
    assert p.apply(action).outcome == "applied"
    assert gpu_quota(fake) == {"name": "nvidia.com/gpu", "nominalQuota": "5", "lendingLimit": "5"}


def test_the_fake_refuses_an_invalid_quota_and_the_action_fails(
    fake: FakeKube, transport: ClientTransport
) -> None:
    fake.create(CQS, cluster_queue())
    p = provider(transport)
    action = p.kueue_action(section(-3), AT)
    assert action is not None
    result = p.apply(action)
    assert result.outcome == "failed" and "422" in result.message
    assert "must be greater than or equal to 0" in result.message
    assert gpu_quota(fake)["nominalQuota"] == "8"


def test_a_missing_flavor_or_resource_is_one_line_and_nothing_is_written(
    fake: FakeKube, transport: ClientTransport
) -> None:
    fake.create(CQS, cluster_queue(flavors={"a100": 4}))
    p = provider(transport)
    action = p.kueue_action(section(16), AT)
    assert action is not None
    result = p.apply(action)
    assert result.outcome == "failed"
    assert result.message == (
        "ClusterQueue training has no flavor h100 covering nvidia.com/gpu; "
        "tiercast sets quotas, it does not add flavors"
    )
    assert fake.writes() == []


def test_a_model_held_on_bad_data_keeps_its_quota(
    fake: FakeKube, transport: ClientTransport
) -> None:
    fake.create(CQS, cluster_queue())
    action = provider(transport).kueue_action(section(0, hold="signal 'rps' is stale"), AT)
    assert action is not None and action.decision == "no-op"
    assert action.reason.params["held_flavors"] == ("h100",)
    assert "workloads.kueue.flavors" in action.reason.refs  # where why it is held is said


def test_no_kueue_served_or_no_cluster_queue_means_no_action(
    fake: FakeKube, transport: ClientTransport
) -> None:
    assert provider(transport).kueue_action(section(), AT) is None  # no ClusterQueue
    fake.unserved.add("kueue.x-k8s.io/v1beta1")
    fake.create(CQS, cluster_queue())
    assert provider(transport).kueue_action(section(), AT) is None  # no Kueue


def test_an_unreadable_cluster_queue_leaves_the_quota_and_the_cycle_goes_on(
    fake: FakeKube, transport: ClientTransport
) -> None:
    fake.create(CQS, cluster_queue())
    fake.inject("500", path="clusterqueues/training", times=5)
    action = provider(transport).kueue_action(section(), AT)
    assert action is not None and action.decision == "no-op"
    assert action.reason.code == "kueue.unreadable"
    assert action.reason.text().startswith("ClusterQueue training unreadable (")
    assert action.reason.text().endswith("quota left as it is")


def test_dry_run_writes_nothing(fake: FakeKube, transport: ClientTransport) -> None:
    fake.create(CQS, cluster_queue())
    client = build_provider(kueue_config(), dry_run=True, transport=transport)
    action = client.kueue_action(section(20), AT)
    assert action is not None
    result = client.apply(action)
    assert result.outcome == "recorded" and any(c["verb"] == "PATCH" for c in result.calls)
    assert fake.writes() == [] and gpu_quota(fake)["nominalQuota"] == "8"
    server = build_provider(kueue_config(), dry_run=True, server_dry_run=True, transport=transport)
    action = server.kueue_action(section(20), AT)
    assert action is not None and server.apply(action).outcome == "recorded"
    assert fake.writes() and all(r.query == {"dryRun": "All"} for r in fake.writes())
    assert gpu_quota(fake)["nominalQuota"] == "8"


def test_the_planned_spare_capacity_becomes_the_quota(
    fake: FakeKube, transport: ClientTransport
) -> None:
    fake.create(CQS, cluster_queue(cohort="ml"))
    config = kueue_config()
    now = pd.Timestamp("2026-12-02T00:00:00")
    plan = plan_for(config, {"rps": forecast("rps", 10.0)}, {"reserved": 4}, now, solver="greedy")
    p = KubeProvider(config, Session(transport))
    plan, quota = with_kueue_quota(plan, p, now)
    assert quota is not None and plan.actions[-1] == quota
    # 32 reserved GPUs, 10 for inference: 22 spare all hour.
    assert quota.target_nodes == 22 and p.apply(quota).outcome == "applied"
    assert gpu_quota(fake)["nominalQuota"] == "22" and gpu_quota(fake)["borrowingLimit"] == "0"


def test_quantities_are_read_as_kubernetes_writes_them() -> None:
    assert [quantity(v) for v in (8, "8", "500m", "1k", "2Ki", "x", True)] == [
        8.0,
        8.0,
        0.5,
        1000.0,
        2048.0,
        None,
        None,
    ]
