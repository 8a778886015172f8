"""The fake API server keeps the contract: checked through the official client's typed APIs.

If these pass, a provider that works against the fake relies only on behaviour
the real API server has (resource versions, 409/404/422, selectors, patch
semantics, the scale subresource, PDB-guarded evictions, Leases).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.fake_kube import ApiError, FakeKube, gpu_node, kubeconfig_for, node_pool, pod, start_fake


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    f = start_fake()
    # These tests exercise the server's own semantics with writes tiercast never makes (a
    # taint, any label): the admission policies, which judge tiercast's, are off here
    # (tests/test_kube_admission.py tests them).
    f.admission = None
    yield f
    f.stop()


@pytest.fixture
def api(fake: FakeKube, tmp_path: Path) -> client.ApiClient:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig_for(fake.url)))
    return config.new_client_from_config(config_file=str(path))


@pytest.mark.slow
def test_unauthenticated_requests_are_refused(fake: FakeKube) -> None:
    anonymous = client.CoreV1Api(client.ApiClient(client.Configuration(host=fake.url)))
    with pytest.raises(ApiException) as info:
        anonymous.list_node()
    assert info.value.status == 401


def test_resource_versions_conflict_and_not_found(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_node(gpu_node("n1", {"tiercast.io/pool": "a"}))
    node = core.read_node("n1")
    rv = node.metadata.resource_version
    node.metadata.labels["x"] = "1"
    updated = core.replace_node("n1", node)
    assert int(updated.metadata.resource_version) > int(rv)
    node.metadata.resource_version = rv  # stale
    with pytest.raises(ApiException) as info:
        core.replace_node("n1", node)
    assert info.value.status == 409
    with pytest.raises(ApiException) as info:
        core.create_node(gpu_node("n1", {}))
    assert info.value.status == 409 and "AlreadyExists" in info.value.body
    with pytest.raises(ApiException) as info:
        core.read_node("missing")
    assert info.value.status == 404


@pytest.mark.slow
def test_invalid_labels_and_replicas_are_422(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_node(gpu_node("n1", {}))
    with pytest.raises(ApiException) as info:
        core.patch_node("n1", {"metadata": {"labels": {"bad key!": "x"}}})
    assert info.value.status == 422
    with pytest.raises(ApiException) as info:
        core.patch_node("n1", {"metadata": {"labels": {"ok": "no spaces allowed"}}})
    assert info.value.status == 422
    apps = client.AppsV1Api(api)
    with pytest.raises(ApiException) as info:
        apps.create_namespaced_deployment(
            "default",
            {
                "metadata": {"name": "d"},
                "spec": {
                    "replicas": -1,
                    "selector": {"matchLabels": {"a": "b"}},
                    "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}},
                },
            },
        )
    assert info.value.status == 422


def test_label_and_field_selectors(fake: FakeKube, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_node(gpu_node("a1", {"pool": "a", "tier": "spot"}))
    core.create_node(gpu_node("a2", {"pool": "a", "tier": "on-demand"}))
    core.create_node(gpu_node("b1", {"pool": "b"}))

    def names(selector: str) -> set[str]:
        return {n.metadata.name for n in core.list_node(label_selector=selector).items}

    assert names("pool=a") == {"a1", "a2"}
    assert names("pool==a,tier!=spot") == {"a2"}
    assert names("pool in (a,b),!tier") == {"b1"}
    assert names("tier notin (spot)") == {"a2", "b1"}
    assert names("tier") == {"a1", "a2"}
    core.create_namespaced_pod("default", pod("p1", "default", "a1"))
    core.create_namespaced_pod("kube-system", pod("p2", "kube-system", "b1"))
    on_a1 = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=a1")
    assert [p.metadata.name for p in on_a1.items] == ["p1"]
    with pytest.raises(ApiException) as info:
        core.list_pod_for_all_namespaces(field_selector="spec.schedulerName=x")
    assert info.value.status == 400


def test_merge_and_strategic_patches_on_labels(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_node(gpu_node("n1", {"keep": "1", "drop": "1"}))
    # The typed client sends strategic merge for objects: null deletes a label, others merge.
    core.patch_node("n1", {"metadata": {"labels": {"drop": None, "new": "2"}}})
    assert core.read_node("n1").metadata.labels == {"keep": "1", "new": "2"}
    # JSON patch (a list) replaces exactly one key, with ~1 escaping a '/'.
    core.patch_node(
        "n1",
        [{"op": "add", "path": "/metadata/labels/nvidia.com~1mig.config", "value": "all-1g.10gb"}],
    )
    assert core.read_node("n1").metadata.labels["nvidia.com/mig.config"] == "all-1g.10gb"


def test_strategic_merge_is_refused_for_custom_resources(fake: FakeKube) -> None:
    fake.create("/apis/karpenter.sh/v1/nodepools", node_pool("gpu", replicas=1))
    code, body, _ = fake.handle(
        "PATCH",
        "/apis/karpenter.sh/v1/nodepools/gpu",
        "application/strategic-merge-patch+json",
        b'{"spec": {"replicas": 2}}',
        "Bearer fake-kube-token",
    )
    assert code == 415 and body["reason"] == "UnsupportedMediaType"
    code, body, _ = fake.handle(
        "PATCH",
        "/apis/karpenter.sh/v1/nodepools/gpu",
        "application/merge-patch+json",
        b'{"spec": {"replicas": 2}}',
        "Bearer fake-kube-token",
    )
    assert code == 200 and body["spec"]["replicas"] == 2


def test_scale_subresource_shares_the_parent_version(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    labels = {"app": "x"}
    apps.create_namespaced_deployment(
        "default",
        {
            "metadata": {"name": "x"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": []}},
            },
        },
    )
    scale = apps.read_namespaced_deployment_scale("x", "default")
    assert scale.spec.replicas == 1
    assert scale.metadata.resource_version == (
        apps.read_namespaced_deployment("x", "default").metadata.resource_version
    )
    scale.spec.replicas = 3
    apps.replace_namespaced_deployment_scale("x", "default", scale)
    assert apps.read_namespaced_deployment("x", "default").spec.replicas == 3
    with pytest.raises(ApiException) as info:  # the same (now stale) resource version
        apps.replace_namespaced_deployment_scale("x", "default", scale)
    assert info.value.status == 409


def test_eviction_respects_pod_disruption_budgets(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    for i in range(2):
        core.create_namespaced_pod("default", pod(f"web-{i}", "default", "n1", {"app": "web"}))
    client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-0"}}
    core.create_namespaced_pod_eviction("web-0", "default", body)
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod_eviction(
            "web-1", "default", {**body, "metadata": {"name": "web-1"}}
        )
    assert info.value.status == 429 and "disruption budget" in info.value.body
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["web-1"]


def test_dry_run_validates_without_persisting(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_node(gpu_node("n1", {}))
    core.patch_node("n1", {"spec": {"unschedulable": True}}, dry_run="All")
    assert core.read_node("n1").spec.unschedulable is None
    with pytest.raises(ApiException) as info:
        core.patch_node("n1", {"spec": {"unschedulable": "yes"}}, dry_run="All")
    assert info.value.status == 422


def test_leases_for_leader_election(api: client.ApiClient) -> None:
    coord = client.CoordinationV1Api(api)
    body = {
        "metadata": {"name": "tiercast-leader"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }
    created = coord.create_namespaced_lease("tiercast-system", body)
    mine = coord.read_namespaced_lease("tiercast-leader", "tiercast-system")
    mine.spec.holder_identity = "b"
    coord.replace_namespaced_lease("tiercast-leader", "tiercast-system", mine)
    stale = created
    stale.spec.holder_identity = "c"
    with pytest.raises(ApiException) as info:
        coord.replace_namespaced_lease("tiercast-leader", "tiercast-system", stale)
    assert info.value.status == 409
    lease = coord.read_namespaced_lease("tiercast-leader", "tiercast-system")
    assert lease.spec.holder_identity == "b"
    with pytest.raises(ApiException) as info:
        coord.create_namespaced_lease("no-such-namespace", body)
    assert info.value.status == 404


def test_injected_faults(fake: FakeKube) -> None:
    auth = "Bearer fake-kube-token"
    fake.inject("429", times=1, path="/api/v1/nodes")
    fake.inject("500", times=1, method="GET")
    code, _, headers = fake.handle("GET", "/api/v1/nodes", None, b"", auth)
    assert (code, headers) == (429, {"Retry-After": "0"})
    code, _, _ = fake.handle("GET", "/api/v1/nodes", None, b"", auth)
    assert code == 500
    code, body, _ = fake.handle("GET", "/api/v1/nodes", None, b"", auth)
    assert code == 200 and body["items"] == []
    fake.inject("timeout", times=1, delay_s=0.01)
    code, _, _ = fake.handle("GET", "/api/v1/nodes", None, b"", auth)
    assert code == 0  # the connection is dropped without an answer


def _patch(fake: FakeKube, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    code, answer, _ = fake.handle(
        "PATCH",
        path,
        "application/merge-patch+json",
        json.dumps(body).encode(),
        "Bearer fake-kube-token",
    )
    return code, answer


def test_node_pool_writes_meet_the_karpenter_crd_rules(fake: FakeKube) -> None:
    pools = "/apis/karpenter.sh/v1/nodepools"
    with pytest.raises(ApiError, match=r"spec\.template\.spec: Required"):
        fake.create(pools, {**node_pool("bare"), "spec": {"limits": {"nvidia.com/gpu": "8"}}})
    fake.create(pools, node_pool("dyn", limits={"nvidia.com/gpu": "8"}))
    fake.create(pools, node_pool("static", replicas=2))
    for path, body, why in (
        (f"{pools}/dyn", {"spec": {"limits": {"nvidia.com/gpu": "eight"}}}, "quantity"),
        (f"{pools}/dyn", {"spec": {"replicas": 3}}, "Cannot transition"),
        (f"{pools}/static", {"spec": {"replicas": None}}, "Cannot transition"),
        (f"{pools}/static", {"spec": {"replicas": -1}}, "greater than or equal to 0"),
        (f"{pools}/static", {"spec": {"limits": {"nvidia.com/gpu": "8"}}}, "limits.nodes"),
        (f"{pools}/static", {"spec": {"weight": 10}}, "weight"),
    ):
        code, answer = _patch(fake, path, body)
        assert code == 422 and why in answer["message"], (body, answer)
    # Unknown spec fields are pruned, as a structural schema does, not stored.
    code, answer = _patch(fake, f"{pools}/static", {"spec": {"nodes": 4}})
    assert code == 200 and "nodes" not in answer["spec"]
    # The scale subresource: .spec.replicas, status from .status.nodes.
    fake.mutate(f"{pools}/static", lambda o: o.setdefault("status", {}).update({"nodes": 1}))
    scale = fake.get(f"{pools}/static/scale")
    assert scale["spec"]["replicas"] == 2 and scale["status"]["replicas"] == 1
    code, answer = _patch(fake, f"{pools}/dyn/scale", {"spec": {"replicas": 2}})
    assert code == 422 and "Cannot transition" in answer["message"]
    # A dynamic NodePool's scale reads spec.replicas 0, as the API server answers.
    assert fake.get(f"{pools}/dyn/scale")["spec"]["replicas"] == 0


def test_node_pool_template_rules_and_status_subresource(fake: FakeKube) -> None:
    """Karpenter v1.8's NodePool: immutable nodeClassRef group and kind, requirement
    values, at most 100 requirements, and a status written only through ``/status``."""
    pools = "/apis/karpenter.sh/v1/nodepools"
    fake.create(pools, node_pool("static", replicas=2))
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"}

    def template(**changes: Any) -> dict[str, Any]:
        tmpl = {"nodeClassRef": dict(ref), "requirements": []}
        tmpl.update(changes)
        return {"spec": {"template": {"spec": tmpl}}}

    for body, why in (
        (template(nodeClassRef={**ref, "kind": "OtherClass"}), "nodeClassRef.kind is immutable"),
        (template(nodeClassRef={**ref, "group": "x.io"}), "nodeClassRef.group is immutable"),
        (
            template(requirements=[{"key": "zone", "operator": "In", "values": []}]),
            "'In' must have a value",
        ),
        (
            template(requirements=[{"key": "cpu", "operator": "Gt", "values": ["a"]}]),
            "single positive integer",
        ),
        (
            template(requirements=[{"key": "k", "operator": "Exists"}] * 101),
            "at most 100",
        ),
    ):
        code, answer = _patch(fake, f"{pools}/static", body)
        assert code == 422 and why in answer["message"], (body, answer)
    # The name may change; the group and kind may not.
    code, _ = _patch(fake, f"{pools}/static", template(nodeClassRef={**ref, "name": "gpu2"}))
    assert code == 200
    # An update of the NodePool itself keeps the status; /status changes only the status.
    fake.mutate(f"{pools}/static", lambda o: o.update(status={"nodes": 1}))
    code, answer = _patch(
        fake, f"{pools}/static", {"status": {"nodes": 9}, "spec": {"replicas": 3}}
    )
    assert code == 200 and answer["status"] == {"nodes": 1} and answer["spec"]["replicas"] == 3
    code, answer = _patch(
        fake, f"{pools}/static/status", {"status": {"nodes": 3}, "spec": {"replicas": 7}}
    )
    assert code == 200 and answer["status"] == {"nodes": 3} and answer["spec"]["replicas"] == 3


def test_budgets_count_the_owners_scale_not_the_pods_that_exist(fake: FakeKube) -> None:
    fake.create(
        "/apis/apps/v1/namespaces/default/replicasets",
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web-rs"},
            "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    for i in range(3):  # the fourth replica is pending elsewhere
        fake.create(
            "/api/v1/namespaces/default/pods",
            pod(
                f"web-{i}",
                "default",
                "n1",
                {"app": "web"},
                owner_kind="ReplicaSet",
                owner_name="web-rs",
            ),
        )
    fake.create(
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-0"}}
    code, answer, _ = fake.handle(
        "POST",
        "/api/v1/namespaces/default/pods/web-0/eviction",
        "application/json",
        json.dumps(body).encode(),
        "Bearer fake-kube-token",
    )
    # Expected 4 (the ReplicaSet's scale), 3 healthy, 3 needed: counting the pods (3)
    # would have allowed it.
    assert code == 429 and "needs 3 healthy pods and has 3" in answer["message"]
    # A pod without a controller under maxUnavailable: the budget allows nothing.
    fake.create("/api/v1/namespaces/default/pods", pod("bare", "default", "n1", {"app": "web"}))
    body["metadata"]["name"] = "bare"
    code, answer, _ = fake.handle(
        "POST",
        "/api/v1/namespaces/default/pods/bare/eviction",
        "application/json",
        json.dumps(body).encode(),
        "Bearer fake-kube-token",
    )
    assert code == 429 and "expected pod count is unknown" in answer["message"]


def test_a_pod_without_conditions_is_not_ready_for_a_budget(api: client.ApiClient) -> None:
    """kubernetes ``pkg/controller/disruption/disruption.go``: only Ready pods are healthy."""
    core = client.CoreV1Api(api)
    for i in range(2):
        body = pod(f"job-{i}", "default", "n1", {"app": "job"})
        if i == 1:
            body["status"].pop("conditions")  # running, no Ready condition reported yet
        core.create_namespaced_pod("default", body)
    client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
        "default",
        {
            "metadata": {"name": "job"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "job"}}},
        },
    )
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "job-0"}}
    with pytest.raises(ApiException) as info:  # one healthy pod: none may go
        core.create_namespaced_pod_eviction("job-0", "default", body)
    assert info.value.status == 429


def test_node_taints_replace_as_a_whole_and_are_unique_by_key_and_effect(
    fake: FakeKube,
) -> None:
    """NodeSpec.taints is ``+listType=atomic`` (k8s.io/api ``core/v1/types.go``) and
    validated unique by (key, effect) (``pkg/apis/core/validation/validation.go``)."""
    fake.create("/api/v1/nodes", gpu_node("n1", {}))
    both = [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "effect": "NoExecute"},
    ]
    code, _, _ = fake.handle(
        "PATCH",
        "/api/v1/nodes/n1",
        "application/strategic-merge-patch+json",
        json.dumps({"spec": {"taints": both}}).encode(),
        "Bearer fake-kube-token",
    )
    assert code == 200
    assert fake.get("/api/v1/nodes/n1")["spec"]["taints"] == both  # one key, two effects
    one = [{"key": "dedicated", "effect": "NoSchedule"}]
    code, _, _ = fake.handle(
        "PATCH",
        "/api/v1/nodes/n1",
        "application/strategic-merge-patch+json",
        json.dumps({"spec": {"taints": one}}).encode(),
        "Bearer fake-kube-token",
    )
    assert code == 200 and fake.get("/api/v1/nodes/n1")["spec"]["taints"] == one
    code, answer = _patch(fake, "/api/v1/nodes/n1", {"spec": {"taints": one + one}})
    assert code == 422 and "unique by key and effect" in answer["message"]
