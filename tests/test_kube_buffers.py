"""The ``capacity-buffer`` provider: upstream CapacityBuffers where served, placeholders otherwise.

Against the fake API server, which serves the cluster autoscaler's
``autoscaling.x-k8s.io/v1beta1`` CapacityBuffer CRD with its schema and CEL rules
(or, with ``unserved``, does not serve it at all).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.actuation.kube.providers import KubeProvider
from scaler.actuation.kube.transport import RetryPolicy
from tests.fake_kube import (
    ApiError,
    Clock,
    FakeKube,
    Request,
    connect_to,
    gpu_node,
    pod,
    start_fake,
)
from tests.test_kube_providers import action, make_config, provider_for, seed

API = "autoscaling.x-k8s.io/v1beta1"
NS = "/apis/autoscaling.x-k8s.io/v1beta1/namespaces/tiercast-system"
BUFFERS = f"{NS}/capacitybuffers"
BUFFER = f"{BUFFERS}/tiercast-buffer-buf"
TEMPLATE = "/api/v1/namespaces/tiercast-system/podtemplates/tiercast-buffer-buf"
PLACEHOLDER = "/apis/apps/v1/namespaces/tiercast-system/deployments/tiercast-placeholder-buf"
BUFFER_POOL = {"name": "buf", "price_per_gpu_hour": 4.5, "provider": {"kind": "capacity-buffer"}}


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    f = start_fake()
    seed(f)
    for name in ("buf-a", "buf-b"):
        f.create("/api/v1/nodes", gpu_node(name, {"tiercast.io/pool": "buf"}))
    f.create("/api/v1/namespaces/default/pods", pod("train-0", "default", "buf-a", gpus=8))
    yield f
    f.stop()


def buffer_provider(
    fake: FakeKube, folder: Path, clock: Clock, timeout_s: float = 10.0
) -> KubeProvider:
    """A provider (a cycle's) with the capacity-buffer pool, talking to ``fake``."""
    policy = RetryPolicy(2, 0.01, 0.02, sleep=clock.sleep)
    return provider_for(connect_to(fake, folder, policy, timeout_s), clock, [BUFFER_POOL])


@pytest.fixture
def provider(fake: FakeKube, tmp_path: Path, clock: Clock) -> KubeProvider:
    return buffer_provider(fake, tmp_path, clock, timeout_s=0.3)


def _post(fake: FakeKube, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    code, answer, _ = fake.handle(
        "POST", path, "application/json", json.dumps(body).encode(), "Bearer fake-kube-token"
    )
    return code, answer


def buffer(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "CapacityBuffer",
        "metadata": {"name": name},
        "spec": spec,
    }


def controller_reports(
    fake: FakeKube,
    ready: str = "True",
    message: str = "ready",
    replicas: int | None = None,
    extra: list[dict[str, Any]] | None = None,
) -> None:
    """What the cluster autoscaler's buffer controller writes once it translated a buffer."""

    def report(o: dict[str, Any]) -> None:
        o["status"] = {
            "podTemplateRef": {"name": o["spec"]["podTemplateRef"]["name"]},
            "replicas": o["spec"]["replicas"] if replicas is None else replicas,
            "provisioningStrategy": o["spec"]["provisioningStrategy"],
            "conditions": [
                {
                    "type": "ReadyForProvisioning",
                    "status": ready,
                    "reason": "AttributesSetSuccessfully" if ready == "True" else "error",
                    "message": message,
                    "lastTransitionTime": "2026-12-01T00:00:00Z",
                },
                *(extra or []),
            ],
        }

    fake.mutate(BUFFER, report)


def test_the_fake_refuses_what_the_capacity_buffer_crd_refuses(fake: FakeKube) -> None:
    for body, why in (
        ({**buffer("a"), "spec": None}, "spec: Required"),
        (buffer("b", podTemplateRef={"name": "t"}), "replicas or limits must also be set"),
        (
            buffer(
                "c",
                podTemplateRef={"name": "t"},
                scalableRef={"kind": "Deployment", "name": "d"},
                replicas=1,
            ),
            "PodTemplateRef and ScalableRef",
        ),
        (buffer("d", podTemplateRef={"name": ""}, replicas=1), "podTemplateRef.name: Required"),
        (buffer("e", scalableRef={"name": "d"}, percentage=10), "scalableRef.kind: Required"),
        (buffer("f", podTemplateRef={"name": "t"}, replicas=-1), "greater than or equal to 0"),
        (buffer("g", podTemplateRef={"name": "t"}, replicas=2**31), "int32"),
        (buffer("h", scalableRef={"kind": "Deployment", "name": "d"}, percentage="10"), "int32"),
        (buffer("i", podTemplateRef={"name": "t"}, limits={"nvidia.com/gpu": "many"}), "quantity"),
    ):
        code, answer = _post(fake, BUFFERS, body)
        assert code == 422 and why in answer["message"], (body, answer)
    # Defaults and pruning, as a structural schema with defaults does.
    code, answer = _post(
        fake, BUFFERS, buffer("ok", podTemplateRef={"name": "t"}, replicas=0, owner="x")
    )
    assert code == 201
    assert answer["spec"] == {
        "podTemplateRef": {"name": "t"},
        "replicas": 0,
        "provisioningStrategy": "buffer.x-k8s.io/active-capacity",
    }
    # Discovery lists it; a cluster without the CRD answers 404 for both.
    listing = fake.get_discovery(API)
    assert {"capacitybuffers", "capacitybuffers/status"} <= {
        r["name"] for r in listing["resources"]
    }
    fake.unserved.add(API)
    with pytest.raises(ApiError, match="could not find"):
        fake.get_discovery(API)
    code, _ = _post(fake, BUFFERS, buffer("later", podTemplateRef={"name": "t"}, replicas=1))
    assert code == 404


@pytest.mark.slow
def test_a_served_api_gets_a_pod_template_and_a_buffer(
    fake: FakeKube, provider: KubeProvider
) -> None:
    result = provider.apply(action("buf", 2, 4))
    # 4 nodes x 8 GPUs - 8 in use by real pods = 24 GPUs = 3 chunks of 8.
    assert result.outcome == "accepted", result.message
    assert "no autoscaler has reported on it yet" in result.message
    writes = [(c["verb"], c["path"]) for c in result.calls if c["verb"] != "GET"]
    assert writes[:2] == [
        ("POST", "/api/v1/namespaces/tiercast-system/podtemplates"),
        ("POST", BUFFERS),
    ]
    cb = fake.get(BUFFER)
    assert cb["spec"] == {
        "provisioningStrategy": "buffer.x-k8s.io/active-capacity",
        "podTemplateRef": {"name": "tiercast-buffer-buf"},
        "replicas": 3,
    }
    chunk = fake.get(TEMPLATE)["template"]["spec"]
    (container,) = chunk["containers"]
    assert container["resources"]["requests"] == {"nvidia.com/gpu": "8"}
    assert "priorityClassName" not in chunk  # simulated pods: nothing to preempt
    terms = chunk["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "tiercast.io/pool", "operator": "In", "values": ["buf"]}
    ]
    # No placeholder Deployment and no PriorityClass where the upstream API serves.
    assert not fake.exists(PLACEHOLDER)
    assert not fake.exists("/apis/scheduling.k8s.io/v1/priorityclasses/tiercast-placeholder")
    # Events on what changed, as for every provider.
    events = [r.body for r in fake.requests if r.path.endswith("/events") and r.method == "POST"]
    assert {e["regarding"]["kind"] for e in events} == {"CapacityBuffer", "PodTemplate"}
    assert all(e["reason"] == "ScaleUp" for e in events)

    # Once the autoscaler's buffer controller took this spec, the same plan is applied
    # and writes nothing.
    controller_reports(fake)
    before = len(fake.writes())
    again = provider.apply(action("buf", 2, 4))
    assert again.outcome == "applied" and "3 chunks ready" in again.message, again.message
    assert len(fake.writes()) == before
    # Scaling down: one merge patch of spec.replicas; the old status is for an older spec.
    down = provider.apply(action("buf", 4, 2))
    assert fake.get(BUFFER)["spec"]["replicas"] == 1
    patch = next(c for c in down.calls if c["verb"] == "PATCH")
    assert patch["content_type"] == "application/merge-patch+json"
    assert down.outcome == "accepted" and "is for an earlier spec" in down.message
    # What the controller says when it does not take the buffer as asked is quoted.
    for kwargs, said in (
        (
            {"ready": "False", "message": "pod template not found"},
            "ReadyForProvisioning=False: pod template not found",
        ),
        (
            {
                "replicas": 0,
                "extra": [
                    {
                        "type": "LimitedByQuotas",
                        "status": "True",
                        "reason": "ResourceQuotasAllocated",
                        "message": "Buffer replicas limited from 1 to 0 due to quotas: gpu-quota",
                    }
                ],
            },
            "LimitedByQuotas: Buffer replicas limited from 1 to 0",
        ),
        (
            {
                "extra": [
                    {
                        "type": "Provisioning",
                        "status": "False",
                        "reason": "NoNodeGroup",
                        "message": "",
                    }
                ]
            },
            "Provisioning=False: NoNodeGroup",
        ),
    ):
        controller_reports(fake, **kwargs)
        seen = provider.apply(action("buf", 4, 2))
        assert seen.outcome == "accepted" and said in seen.message, seen.message
    controller_reports(fake)
    assert provider.apply(action("buf", 4, 2)).outcome == "applied"


def _outdate_template(fake: FakeKube) -> None:
    """Make the PodTemplate's hash say it was written for another chunk shape."""
    fake.mutate(
        TEMPLATE,
        lambda o: o["metadata"]["annotations"].update({"tiercast.io/template-hash": "old"}),
    )


@pytest.mark.slow
def test_a_changed_chunk_shape_updates_the_pod_template(
    fake: FakeKube, provider: KubeProvider
) -> None:
    provider.apply(action("buf", 2, 4))
    _outdate_template(fake)
    fake.mutate(TEMPLATE, lambda o: o["template"]["spec"]["containers"][0].update(image="old:1"))
    result = provider.apply(action("buf", 2, 4))
    assert "PodTemplate updated" in result.message
    assert (
        fake.get(TEMPLATE)["template"]["spec"]["containers"][0]["image"]
        == "registry.k8s.io/pause:3.10"
    )


def test_without_the_api_placeholders_hold_the_headroom(
    fake: FakeKube, provider: KubeProvider
) -> None:
    fake.unserved.add(API)
    result = provider.apply(action("buf", 2, 4))
    assert result.outcome == "applied", result.message
    assert result.message.startswith(
        "autoscaling.x-k8s.io/v1beta1 CapacityBuffers are not served here: placeholder pods instead"
    )
    assert fake.get(PLACEHOLDER)["spec"]["replicas"] == 3
    assert not [r for r in fake.writes() if "capacitybuffers" in r.path or "podtemplates" in r.path]


@pytest.mark.slow
def test_placeholders_left_from_before_the_api_are_retired(
    fake: FakeKube, tmp_path: Path, clock: Clock, provider: KubeProvider
) -> None:
    fake.unserved.add(API)
    provider.apply(action("buf", 2, 4))
    assert fake.get(PLACEHOLDER)["spec"]["replicas"] == 3
    # The CRD is installed: the next provider (next cycle) moves the headroom to a buffer.
    fake.unserved.clear()
    later = buffer_provider(fake, tmp_path, clock)
    result = later.apply(action("buf", 2, 4))
    assert "placeholder Deployment tiercast-placeholder-buf 3 -> 0" in result.message
    assert fake.get(PLACEHOLDER)["spec"]["replicas"] == 0
    assert fake.get(BUFFER)["spec"]["replicas"] == 3


def test_the_offline_dry_run_shows_the_buffer_writes() -> None:
    from scaler.actuation.kube.providers import build_provider

    cfg = make_config([{**BUFFER_POOL, "current_nodes": 1}])
    provider = build_provider(cfg, dry_run=True)
    result = provider.apply(action("buf", 1, 2))
    assert result.outcome == "recorded"
    assert [(c["verb"], c["path"]) for c in result.calls if c["verb"] != "GET"] == [
        ("POST", "/api/v1/namespaces/tiercast-system/podtemplates"),
        ("POST", BUFFERS),
    ]


@pytest.mark.slow
def test_a_conflicting_write_is_retried_on_a_fresh_read(
    fake: FakeKube, provider: KubeProvider
) -> None:
    provider.apply(action("buf", 2, 4))
    _outdate_template(fake)
    bumped: set[str] = set()

    def concurrent_writer(f: FakeKube, r: Request) -> None:
        # Another writer changes each object between our read and our first patch of it.
        if r.method == "PATCH" and r.path in (TEMPLATE, BUFFER) and r.path not in bumped:
            bumped.add(r.path)
            f.mutate(r.path, lambda o: o["metadata"].setdefault("labels", {}).update(touched="1"))

    fake.hooks.append(concurrent_writer)
    result = provider.apply(action("buf", 4, 2))
    patches = [(c["path"], c["status"]) for c in result.calls if c["verb"] == "PATCH"]
    assert patches == [(TEMPLATE, 409), (TEMPLATE, "ok"), (BUFFER, 409), (BUFFER, "ok")]
    assert "PodTemplate updated" in result.message and "chunks 3 -> 1" in result.message
    assert fake.get(BUFFER)["spec"]["replicas"] == 1


@pytest.mark.slow
def test_a_ready_condition_for_an_earlier_generation_is_not_taken_as_this_spec(
    fake: FakeKube, provider: KubeProvider
) -> None:
    """``metav1.Condition.observedGeneration`` below ``metadata.generation`` is stale
    (k8s.io/apimachinery ``pkg/apis/meta/v1/types.go``, ``Condition``)."""
    provider.apply(action("buf", 2, 4))
    controller_reports(fake)
    generation = fake.get(BUFFER)["metadata"]["generation"]

    def stale(o: dict[str, Any]) -> None:
        o["status"]["conditions"][0]["observedGeneration"] = generation - 1

    fake.mutate(BUFFER, stale)
    fake.mutate(BUFFER, lambda o: o["metadata"].update(generation=generation + 1))
    seen = provider.apply(action("buf", 2, 4))
    assert seen.outcome == "accepted" and "not read this spec yet" in seen.message, seen.message

    def current(o: dict[str, Any]) -> None:
        o["status"]["conditions"][0]["observedGeneration"] = o["metadata"]["generation"]

    fake.mutate(BUFFER, current)
    assert provider.apply(action("buf", 2, 4)).outcome == "applied"
