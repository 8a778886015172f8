"""Kubernetes providers against the fake API server, through the official client over HTTP.

Covers scale up and down per provider, an idempotent second run, a conflict
retried, bounded retries on 429/500/timeouts, the per-cycle change cap, a
consistent record when a cycle fails half way, and server-side dry run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.actuation.kube.providers import KubeProvider, build_provider
from scaler.actuation.kube.transport import ClientTransport, RetryPolicy, Session
from scaler.config import Config, parse_config
from scaler.plans import Action
from tests.fake_kube import (
    Clock,
    FakeKube,
    Request,
    connect_to,
    gpu_node,
    node_pool,
    pod,
    start_fake,
)

MD = "/apis/cluster.x-k8s.io/v1beta1/namespaces/default/machinedeployments/gpu-md"
STATIC = "/apis/karpenter.sh/v1/nodepools/gpu-static"
SPOT = "/apis/karpenter.sh/v1/nodepools/gpu-spot"
HOLD = "/apis/apps/v1/namespaces/tiercast-system/deployments/tiercast-placeholder-hold"


def make_config(extra_pools: list[dict[str, Any]] | None = None, **kube: Any) -> Config:
    pool = {"tier": "on-demand", "gpu_model": "H100-80GB", "gpus_per_node": 8}
    return parse_config(
        {
            "signals": [{"name": "s"}],
            "workloads": [
                {"name": "w", "signal": "s", "gpu_model": "H100-80GB", "units_per_replica": 1}
            ],
            "pools": [
                {
                    **pool,
                    "name": "capi",
                    "price_per_gpu_hour": 3.0,
                    "provider": {"kind": "cluster-api", "machine_deployment": "gpu-md"},
                },
                {
                    **pool,
                    "name": "static",
                    "price_per_gpu_hour": 4.0,
                    "provider": {
                        "kind": "karpenter",
                        "node_pool": "gpu-static",
                        "mode": "replicas",
                    },
                },
                {
                    **pool,
                    "name": "spot",
                    "tier": "spot",
                    "price_per_gpu_hour": 1.5,
                    "provider": {"kind": "karpenter", "node_pool": "gpu-spot"},
                },
                {
                    **pool,
                    "name": "hold",
                    "price_per_gpu_hour": 4.5,
                    "provider": {"kind": "placeholder"},
                },
                *[{**pool, **extra} for extra in extra_pools or []],
            ],
            "kubernetes": {
                "request_timeout_s": 0.3,
                "drain_timeout_s": 60,
                "mig_timeout_s": 120,
                "poll_interval_s": 5,
                **kube,
            },
        },
        "test config",
    )


def seed(fake: FakeKube) -> None:
    """Two Cluster API nodes, one static and one spot Karpenter node, two placeholder-pool nodes."""
    fake.create(
        "/apis/cluster.x-k8s.io/v1beta1/namespaces/default/machinedeployments",
        {
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "MachineDeployment",
            "metadata": {"name": "gpu-md"},
            "spec": {"replicas": 2, "clusterName": "c1"},
        },
    )
    # Cluster API labels Machines, not Nodes: a Machine's status.nodeRef names its Node.
    for machine, node in (("gpu-md-x1", "md-a"), ("gpu-md-x2", "md-b")):
        fake.create(
            "/apis/cluster.x-k8s.io/v1beta1/namespaces/default/machines",
            {
                "apiVersion": "cluster.x-k8s.io/v1beta1",
                "kind": "Machine",
                "metadata": {
                    "name": machine,
                    "labels": {"cluster.x-k8s.io/deployment-name": "gpu-md"},
                },
                "spec": {"clusterName": "c1"},
                "status": {"nodeRef": {"kind": "Node", "name": node}},
            },
        )
    for name, spec in (
        ("gpu-static", {"replicas": 1}),
        ("gpu-spot", {"limits": {"nvidia.com/gpu": "8"}}),
    ):
        fake.create("/apis/karpenter.sh/v1/nodepools", node_pool(name, **spec))
        fake.mutate(
            f"/apis/karpenter.sh/v1/nodepools/{name}", lambda o: o.update(status={"nodes": 1})
        )
    nodes = [
        ("md-a", {}),
        ("md-b", {}),
        (
            "static-a",
            {"karpenter.sh/nodepool": "gpu-static", "karpenter.sh/capacity-type": "on-demand"},
        ),
        ("spot-a", {"karpenter.sh/nodepool": "gpu-spot", "karpenter.sh/capacity-type": "spot"}),
        ("hold-a", {"tiercast.io/pool": "hold"}),
        ("hold-b", {"tiercast.io/pool": "hold"}),
        ("cpu-a", {"kubernetes.io/os": "linux"}),
    ]
    for name, labels in nodes:
        fake.create("/api/v1/nodes", gpu_node(name, labels))
    fake.create(
        "/api/v1/namespaces/default/pods", pod("llm-0", "default", "hold-a", {"app": "llm"}, gpus=8)
    )


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    f = start_fake()
    seed(f)
    yield f
    f.stop()


@pytest.fixture
def transport(fake: FakeKube, tmp_path: Path, clock: Clock) -> ClientTransport:
    return connect_to(fake, tmp_path, RetryPolicy(4, 0.05, 0.2, sleep=clock.sleep), timeout_s=0.3)


def provider_for(
    transport: ClientTransport,
    clock: Clock,
    extra_pools: list[dict[str, Any]] | None = None,
    **kube: Any,
) -> KubeProvider:
    return KubeProvider(
        make_config(extra_pools, **kube), Session(transport), clock=clock.now, sleep=clock.sleep
    )


def action(pool: str, current: int, target: int, **kw: Any) -> Action:
    decision = "scale-up" if target > current else "scale-down" if target < current else "no-op"
    return Action(
        pool=pool,
        decision=kw.pop("decision", decision),
        current_nodes=current,
        target_nodes=target,
        at="2026-11-30T00:00:00Z",
        needed_at="2026-11-30T00:10:00Z",
        cost_delta_per_hour=0.0,
        reason="test",
        **kw,
    )


def writes(fake: FakeKube) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in fake.writes()]


def test_inventory_counts_nodes_per_pool_from_labels(
    transport: ClientTransport, clock: Clock
) -> None:
    provider = provider_for(transport, clock)
    assert provider.inventory() == {"capi": 2, "static": 1, "spot": 1, "hold": 2}
    tiers = {n.name: n.tier for n in provider.nodes()}
    assert tiers["spot-a"] == "spot" and tiers["static-a"] == "on-demand"
    assert {n.name: n.pool for n in provider.nodes()}["cpu-a"] is None


def test_cluster_api_scales_through_the_scale_subresource(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    provider = provider_for(transport, clock)
    up = provider.apply(action("capi", 2, 5))
    assert up.outcome == "applied", up.message
    assert fake.get(MD)["spec"]["replicas"] == 5
    put = [c for c in up.calls if c["verb"] == "PUT"]
    assert [c["path"] for c in put] == [f"{MD}/scale"]
    assert (
        put[0]["body"]["spec"] == {"replicas": 5} and put[0]["body"]["metadata"]["resourceVersion"]
    )
    down = provider.apply(action("capi", 5, 1))
    assert down.outcome == "applied" and fake.get(MD)["spec"]["replicas"] == 1


def test_karpenter_static_replicas_and_gpu_limits(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    provider = provider_for(transport, clock)
    static = provider.apply(action("static", 1, 3))
    # Through the scale subresource; with StaticCapacity off nothing follows spec.replicas.
    assert [(c["verb"], c["path"]) for c in static.calls if c["verb"] != "GET"] == [
        ("PUT", f"{STATIC}/scale"),
        ("POST", "/apis/events.k8s.io/v1/namespaces/default/events"),  # on the NodePool
    ]
    assert static.outcome == "accepted" and "not in effect" in static.message
    assert "StaticCapacity" in static.message and "status.nodes 1" in static.message
    assert fake.get(STATIC)["spec"]["replicas"] == 3
    # The next cycle: spec already at 3, status still 1: accepted, not in effect, no write.
    again = provider.apply(action("static", 1, 3))
    assert again.outcome == "accepted" and "status.nodes is 1" in again.message
    assert not [c for c in again.calls if c["verb"] != "GET"]
    # With the gate on, status follows and the change is applied.
    fake.mutate(STATIC, lambda o: o["status"].update(nodes=3))
    assert provider.apply(action("static", 1, 3)).outcome == "applied"
    result = provider.apply(action("spot", 1, 4))
    assert result.outcome == "accepted" and "cap only" in result.message
    assert "pending pods" in result.message
    assert fake.get(SPOT)["spec"]["limits"] == {"nvidia.com/gpu": "32"}
    patch = next(c for c in result.calls if c["verb"] == "PATCH")
    assert patch["content_type"] == "application/merge-patch+json"  # CRDs refuse strategic merge
    down = provider.apply(action("spot", 4, 2))
    assert fake.get(SPOT)["spec"]["limits"] == {"nvidia.com/gpu": "16"}
    # A lower ceiling removes no node: never reported as a scale-down done.
    assert down.outcome == "accepted" and "removes no nodes" in down.message


def test_cluster_api_nodes_are_matched_through_machines(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    provider = provider_for(transport, clock)
    # No node carries cluster.x-k8s.io/deployment-name; the Machines' nodeRefs place them.
    assert {n.name for n in provider.nodes() if n.pool == "capi"} == {"md-a", "md-b"}
    fake.delete_object("/apis/cluster.x-k8s.io/v1beta1/namespaces/default/machines/gpu-md-x2")
    assert provider.inventory()["capi"] == 1


@pytest.mark.parametrize(
    ("where", "key", "why"),
    [
        ("labels", "topology.cluster.x-k8s.io/owned", "managed topology"),
        (
            "annotations",
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size",
            "cluster autoscaler",
        ),
    ],
)
def test_cluster_api_owners_that_revert_replicas_are_refused(
    fake: FakeKube, transport: ClientTransport, clock: Clock, where: str, key: str, why: str
) -> None:
    fake.mutate(MD, lambda o: o["metadata"].setdefault(where, {}).update({key: "4"}))
    result = provider_for(transport, clock).apply(action("capi", 2, 4))
    assert result.outcome == "failed" and why in result.message
    assert fake.get(MD)["spec"]["replicas"] == 2 and not fake.writes()


@pytest.mark.slow
def test_placeholders_fill_the_headroom_and_follow_the_target(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    provider = provider_for(transport, clock)
    up = provider.apply(action("hold", 2, 4))
    assert up.outcome == "applied", up.message
    # 4 nodes x 8 GPUs, 8 of them used by llm-0: 3 placeholders of 8 GPUs.
    deployment = fake.get(HOLD)
    assert deployment["spec"]["replicas"] == 3
    spec = deployment["spec"]["template"]["spec"]
    assert spec["priorityClassName"] == "tiercast-placeholder"
    assert spec["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "8"}
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "tiercast.io/pool", "operator": "In", "values": ["hold"]}
    ]
    assert (
        fake.get("/apis/scheduling.k8s.io/v1/priorityclasses/tiercast-placeholder")["value"] == -10
    )
    down = provider.apply(action("hold", 4, 2))
    assert fake.get(HOLD)["spec"]["replicas"] == 1
    assert [c["path"] for c in down.calls if c["verb"] != "GET"] == [
        f"{HOLD}/scale",
        "/apis/events.k8s.io/v1/namespaces/tiercast-system/events",
    ]


@pytest.mark.slow
def test_a_second_run_of_the_same_plan_changes_nothing(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    plan = [
        action("capi", 2, 4),
        action("static", 1, 2),
        action("spot", 1, 3),
        action("hold", 2, 3),
    ]
    first = provider_for(transport, clock)
    outcomes = [first.apply(a).outcome for a in plan]
    assert outcomes == ["applied", "accepted", "accepted", "applied"]
    before = len(fake.writes())
    assert before > 0
    second = provider_for(transport, clock)
    results = [second.apply(a) for a in plan]
    assert len(fake.writes()) == before
    assert all(
        "no change" in r.message or "already" in r.message or "is 2 but" in r.message
        for r in results
    ), [r.message for r in results]
    assert second.changes == 0


def test_scale_up_never_lowers_and_scale_down_never_raises(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    fake.mutate(MD, lambda o: o["spec"].update(replicas=6))  # nodes still booting: 2 exist
    result = provider_for(transport, clock).apply(action("capi", 2, 4))
    assert "no change" in result.message and fake.get(MD)["spec"]["replicas"] == 6


def test_a_conflict_is_retried_on_a_fresh_read(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    def concurrent_writer(f: FakeKube, r: Request) -> None:
        # Another controller changes the MachineDeployment between our read and our write.
        if r.method == "PUT" and r.path.endswith("/scale") and not getattr(f, "bumped", False):
            f.bumped = True  # type: ignore[attr-defined]
            f.mutate(MD, lambda o: o["metadata"].setdefault("annotations", {}).update(touched="1"))

    fake.hooks.append(concurrent_writer)
    result = provider_for(transport, clock).apply(action("capi", 2, 3))
    assert result.outcome == "applied"
    assert [c["status"] for c in result.calls if c["verb"] == "PUT"] == [409, "ok"]
    assert fake.get(MD)["spec"]["replicas"] == 3


def test_429_500_and_timeouts_are_retried_with_bounded_backoff(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    fake.inject("429", times=2, method="GET", path="/scale")
    fake.inject("500", times=1, method="PUT")
    fake.inject("timeout", times=1, method="PUT", delay_s=0.6)
    result = provider_for(transport, clock).apply(action("capi", 2, 4))
    assert result.outcome == "applied", result.message
    assert fake.get(MD)["spec"]["replicas"] == 4
    assert len(clock.slept) == 4 and max(clock.slept) <= 0.2


def test_a_cycle_that_fails_half_way_keeps_a_consistent_record(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    provider = provider_for(transport, clock)
    fake.inject("500", times=50, method="PUT", path=STATIC)
    plan = [action("capi", 2, 3), action("static", 1, 2), action("spot", 1, 2)]
    results = [provider.apply(a) for a in plan]
    assert [r.outcome for r in results] == ["applied", "failed", "skipped"]
    assert "500" in results[1].message and "rest of this cycle" in results[1].message
    assert [c["status"] for c in results[1].calls if c["verb"] == "PUT"] == [500]
    assert results[2].calls == [] and "not attempted" in results[2].message
    assert fake.get(MD)["spec"]["replicas"] == 3  # what landed is what the record says
    assert fake.get(SPOT)["spec"]["limits"] == {"nvidia.com/gpu": "8"}
    assert [
        c["path"]
        for c in provider.session.journal
        if c["verb"] != "GET" and not c["path"].endswith("/events")
    ] == [
        f"{MD}/scale",
        f"{STATIC}/scale",
    ]


def test_the_per_cycle_change_cap_defers_the_rest(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    provider = provider_for(transport, clock, max_changes_per_cycle=1)
    first, second = provider.apply(action("capi", 2, 3)), provider.apply(action("static", 1, 2))
    assert first.outcome == "applied"
    assert second.outcome == "skipped" and "cap" in second.message
    assert fake.get(STATIC)["spec"]["replicas"] == 1


def test_server_side_dry_run_sends_dry_run_all_and_persists_nothing(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    provider = build_provider(make_config(), dry_run=True, server_dry_run=True, transport=transport)
    result = provider.apply(action("capi", 2, 5))
    assert result.outcome == "recorded"
    assert all(r.query == {"dryRun": "All"} for r in fake.writes())
    assert fake.writes() and fake.get(MD)["spec"]["replicas"] == 2


def test_client_dry_run_over_a_cluster_reads_it_and_writes_nothing(
    fake: FakeKube, transport: ClientTransport
) -> None:
    provider = build_provider(make_config(), dry_run=True, transport=transport)
    assert provider.inventory()["capi"] == 2
    result = provider.apply(action("capi", 2, 5))
    assert result.outcome == "recorded"
    # Read the MachineDeployment (who owns its replicas?) and its scale, write the scale.
    assert [c["verb"] for c in result.calls] == ["GET", "GET", "PUT"]
    assert fake.writes() == [] and fake.get(MD)["spec"]["replicas"] == 2
    again = provider.apply(action("capi", 2, 5))  # the recorded write is remembered
    assert "no change" in again.message


def test_offline_dry_run_lists_calls_from_the_configured_inventory() -> None:
    config = make_config()
    provider = build_provider(config, dry_run=True)
    assert provider.inventory() == {"capi": 0, "static": 0, "spot": 0, "hold": 0}
    result = provider.apply(action("capi", 0, 2))
    assert result.outcome == "recorded"
    # Offline, the MachineDeployment is seeded in Cluster API's current version, v1beta2.
    assert [(c["verb"], c["path"]) for c in result.calls if c["verb"] != "GET"] == [
        ("PUT", f"{MD}/scale".replace("/v1beta1/", "/v1beta2/"))
    ]


def test_server_dry_run_needs_a_cluster() -> None:
    from forecaster.errors import BadInputError

    with pytest.raises(BadInputError, match="--dry-run=server"):
        build_provider(make_config(), dry_run=True, server_dry_run=True)


def test_a_node_pool_without_the_scale_subresource_is_refused(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    fake.without_scale.add("nodepools")  # a Karpenter before v1.8: no static NodePools
    result = provider_for(transport, clock).apply(action("static", 1, 3))
    assert result.outcome == "failed" and "Karpenter v1.8+" in result.message
    assert not fake.writes()


def test_static_replicas_on_a_dynamic_node_pool_are_refused_before_writing(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    # The CRD refuses adding spec.replicas to a dynamic NodePool (422): tiercast says so
    # itself, writes nothing, and the rest of the cycle still runs.
    fake.mutate(STATIC, lambda o: o["spec"].pop("replicas"))
    provider = provider_for(transport, clock)
    result = provider.apply(action("static", 1, 3))
    assert result.outcome == "failed" and "is dynamic (no spec.replicas)" in result.message
    assert not fake.writes()
    assert provider.apply(action("spot", 1, 2)).outcome == "accepted"


def test_a_gpu_limit_on_a_static_node_pool_is_refused_before_writing(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    # A pool in mode limits pointed at the static NodePool.
    pool = {"tier": "on-demand", "gpu_model": "H100-80GB", "gpus_per_node": 8}
    cfg = make_config(
        [{**pool, "name": "capped", "price_per_gpu_hour": 4.0,
          "provider": {"kind": "karpenter", "node_pool": "gpu-static",
                       "node_selector": "tiercast.io/pool=capped"}}]
    )  # fmt: skip
    provider = KubeProvider(cfg, Session(transport), clock=clock.now, sleep=clock.sleep)
    result = provider.apply(action("capped", 1, 3))
    assert result.outcome == "failed" and "only limits.nodes" in result.message
    assert not fake.writes()


def test_static_replicas_beyond_limits_nodes_say_so(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    fake.mutate(STATIC, lambda o: o["spec"].update(limits={"nodes": 2}))
    provider = provider_for(transport, clock)
    result = provider.apply(action("static", 1, 3))
    assert result.outcome == "accepted" and "limits.nodes 2" in result.message
    assert fake.get(STATIC)["spec"]["replicas"] == 3
    # Even with status caught up to the cap, the target is not in effect.
    fake.mutate(STATIC, lambda o: o["status"].update(nodes=2))
    again = provider.apply(action("static", 1, 3))
    assert again.outcome == "accepted" and "short of 3" in again.message


@pytest.mark.slow
def test_every_change_records_an_event_and_a_refused_event_changes_nothing(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    provider = provider_for(transport, clock)
    result = provider.apply(action("capi", 2, 3))
    (event,) = [c["body"] for c in result.calls if c["path"].endswith("/events")]
    assert event["regarding"] == {
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "MachineDeployment",
        "name": "gpu-md",
        "namespace": "default",
    }
    assert (event["reason"], event["type"], event["reportingController"]) == (
        "ScaleUp",
        "Normal",
        "tiercast.io/tiercast",
    )
    assert event["note"].startswith("test -> applied: MachineDeployment gpu-md replicas 2 -> 3")
    stored = [o for k, o in fake.state.objects.items() if k[1] == "events"]
    assert len(stored) == 1
    # No change, no event; a refused Event is logged and the action still applied.
    assert not [c for c in provider.apply(action("capi", 2, 3)).calls if "events" in c["path"]]
    fake.inject("500", times=10, method="POST", path="/events")
    assert provider.apply(action("capi", 3, 4)).outcome == "applied"
    assert fake.get(MD)["spec"]["replicas"] == 4
    # Switched off: no Event at all.
    quiet = provider_for(transport, clock, events=False)
    assert not [c for c in quiet.apply(action("capi", 4, 5)).calls if "events" in c["path"]]


def test_the_fake_refuses_events_a_real_server_refuses(fake: FakeKube) -> None:
    from tests.fake_kube import ApiError

    bad = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "x.1"},
        "eventTime": "2026-12-01T10:00:00Z",  # not a MicroTime
        "reportingController": "tiercast.io/tiercast",
        "reportingInstance": "pod-1",
        "action": "Scale",
        "reason": "ScaleUp",
        "type": "Normal",
        "regarding": {"kind": "Node", "name": "n1"},
    }
    with pytest.raises(ApiError, match="eventTime"):
        fake.create("/apis/events.k8s.io/v1/namespaces/default/events", bad)
    with pytest.raises(ApiError, match="type"):
        fake.create(
            "/apis/events.k8s.io/v1/namespaces/default/events",
            {**bad, "eventTime": "2026-12-01T10:00:00.000000Z", "type": "Info"},
        )
