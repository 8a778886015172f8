"""Cluster API pools: managed topologies that leave replicas to others, and the served version.

Cluster API documents a topology entry without ``replicas`` as leaving them to "an
external entity (like cluster autoscaler)" (kubernetes-sigs/cluster-api
``api/core/v1beta2/cluster_types.go``, ``MachineDeploymentTopology.Replicas``, commit
ae7ff04, 2026-08-21), and marks ``v1beta1`` deprecated since v1.11
(``+kubebuilder:deprecatedversion`` in ``api/core/v1beta1/machinedeployment_types.go``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.actuation.kube.transport import ClientTransport, RetryPolicy
from tests.fake_kube import Clock, FakeKube, connect_to, start_fake
from tests.test_kube_providers import MD, action, provider_for, seed

V1BETA2 = "cluster.x-k8s.io/v1beta2"
CLUSTERS = "/apis/cluster.x-k8s.io/v1beta1/namespaces/default/clusters"


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    f = start_fake()
    seed(f)
    yield f
    f.stop()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def transport(fake: FakeKube, tmp_path: Path, clock: Clock) -> ClientTransport:
    return connect_to(fake, tmp_path, RetryPolicy(2, 0.01, 0.02, sleep=clock.sleep))


def topology(fake: FakeKube, replicas: int | None) -> None:
    """The MachineDeployment as a ClusterClass topology creates it, and its Cluster."""
    entry: dict[str, Any] = {"class": "gpu", "name": "gpu"}
    if replicas is not None:
        entry["replicas"] = replicas
    fake.create(
        CLUSTERS,
        {
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "Cluster",
            "metadata": {"name": "c1"},
            "spec": {
                "topology": {
                    "class": "prod",
                    "version": "v1.34.1",
                    "workers": {"machineDeployments": [entry]},
                }
            },
        },
    )
    fake.mutate(
        MD,
        lambda o: (
            o["metadata"]
            .setdefault("labels", {})
            .update(
                {
                    "topology.cluster.x-k8s.io/owned": "",
                    "topology.cluster.x-k8s.io/deployment-name": "gpu",
                    "cluster.x-k8s.io/cluster-name": "c1",
                }
            )
        ),
    )


def test_a_topology_that_leaves_replicas_unset_lets_tiercast_scale(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    topology(fake, replicas=None)
    result = provider_for(transport, clock).apply(action("capi", 2, 4))
    assert result.outcome == "applied", result.message
    assert fake.get(MD)["spec"]["replicas"] == 4


def test_a_topology_that_sets_replicas_is_refused(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    topology(fake, replicas=2)
    result = provider_for(transport, clock).apply(action("capi", 2, 4))
    assert result.outcome == "failed" and "replicas=2" in result.message
    assert fake.get(MD)["spec"]["replicas"] == 2 and not fake.writes()


def test_the_newest_served_version_is_used_by_default(
    fake: FakeKube, transport: ClientTransport, clock: Clock
) -> None:
    fake.unserved.discard(V1BETA2)
    base = f"/apis/{V1BETA2}/namespaces/default"
    fake.create(
        f"{base}/machinedeployments",
        {
            "apiVersion": V1BETA2,
            "kind": "MachineDeployment",
            "metadata": {"name": "gpu-md"},
            "spec": {"replicas": 3, "clusterName": "c1"},
        },
    )
    for machine, node in (("gpu-md-y1", "md-a"), ("gpu-md-y2", "md-b"), ("gpu-md-y3", "md-c")):
        fake.create(
            f"{base}/machines",
            {
                "apiVersion": V1BETA2,
                "kind": "Machine",
                "metadata": {
                    "name": machine,
                    "labels": {"cluster.x-k8s.io/deployment-name": "gpu-md"},
                },
                "spec": {"clusterName": "c1"},
                "status": {"nodeRef": {"name": node}},
            },
        )
    provider = provider_for(transport, clock)
    assert provider.inventory()["capi"] == 2  # md-c has no Node yet
    result = provider.apply(action("capi", 3, 5))
    assert result.outcome == "applied", result.message
    assert fake.get(f"{base}/machinedeployments/gpu-md")["spec"]["replicas"] == 5
    assert fake.get(MD)["spec"]["replicas"] == 2  # the v1beta1 copy is not what was read
    # A pool that names a version keeps it.
    pinned = provider_for(
        transport,
        clock,
        [
            {
                "name": "pinned",
                "price_per_gpu_hour": 3.0,
                "provider": {
                    "kind": "cluster-api",
                    "machine_deployment": "gpu-md",
                    "api_version": "cluster.x-k8s.io/v1beta1",
                },
            }
        ],
    )
    done = pinned.apply(action("pinned", 2, 3))
    assert done.outcome == "applied", done.message
    assert fake.get(MD)["spec"]["replicas"] == 3
