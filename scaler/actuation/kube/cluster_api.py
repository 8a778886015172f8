"""Cluster API pools: a ``MachineDeployment``'s replicas through its ``scale`` subresource.

Follows Cluster API's ``cluster.x-k8s.io`` MachineDeployment (``v1beta1`` by default) and the
``autoscaling/v1`` Scale it serves; the offline dry-run seeds the MachineDeployment and one
Machine per node, tied to its Node through ``status.nodeRef`` as Cluster API ties them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scaler.actuation.kube.inventory import CAPI_DEPLOYMENT, NodeInfo
from scaler.actuation.kube.pool import Scaled
from scaler.actuation.kube.transport import MemoryTransport, Session
from scaler.actuation.kube.writes import direction_reached, until_no_conflict
from scaler.config import ClusterApiProviderConfig, KubernetesConfig, PoolConfig
from scaler.plans import Action

TOPOLOGY_OWNED = "topology.cluster.x-k8s.io/owned"
"""Label Cluster API puts on a MachineDeployment its Cluster's managed topology (ClusterClass) owns."""
AUTOSCALER_MIN = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
AUTOSCALER_MAX = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"


class ClusterApiPool:
    """Cluster API: ``MachineDeployment`` replicas through the ``scale`` subresource.

    Refused, before any write, when another owner would revert the replicas: a
    MachineDeployment of a managed topology (label ``topology.cluster.x-k8s.io/owned``:
    the topology controller sets replicas from ``Cluster.spec.topology``), or one the
    cluster autoscaler manages (its ``...-autoscaler-node-group-min-size`` /
    ``-max-size`` annotations).
    """

    def __init__(
        self, pool: PoolConfig, settings: ClusterApiProviderConfig, kube: KubernetesConfig
    ):
        self.pool, self.settings, self.kube = pool, settings, kube
        s = settings
        self.path = f"/apis/{s.api_version}/namespaces/{s.namespace}/machinedeployments/{s.machine_deployment}"

    def owner(self, md: dict[str, Any]) -> str | None:
        """Who else sets this MachineDeployment's replicas, or None."""
        meta = md.get("metadata") or {}
        if TOPOLOGY_OWNED in (meta.get("labels") or {}):
            return (
                "its Cluster's managed topology (ClusterClass) owns the replicas and reverts "
                "them; set Cluster.spec.topology.workers.machineDeployments[].replicas instead"
            )
        notes = meta.get("annotations") or {}
        if AUTOSCALER_MIN in notes or AUTOSCALER_MAX in notes:
            return (
                "the cluster autoscaler manages it (node-group min/max size annotations) and "
                "would undo the change; use a placeholder pool for headroom instead"
            )
        return None

    def scale(
        self, session: Session, action: Action, nodes: Callable[[], list[NodeInfo]]
    ) -> Scaled:
        name = self.settings.machine_deployment
        owner = self.owner(session.get(self.path))
        if owner:
            return Scaled(f"MachineDeployment {name} not scaled: {owner}", "failed")

        def attempt() -> Scaled:
            scale = session.get(f"{self.path}/scale")
            current = int(scale.get("spec", {}).get("replicas") or 0)
            if direction_reached(action.decision, current, action.target_nodes):
                return Scaled(f"MachineDeployment {name} already at {current} replicas; no change")
            body = {
                "apiVersion": "autoscaling/v1",
                "kind": "Scale",
                "metadata": {
                    "name": name,
                    "namespace": self.settings.namespace,
                    "resourceVersion": scale["metadata"]["resourceVersion"],
                },
                "spec": {"replicas": action.target_nodes},
            }
            session.request("PUT", f"{self.path}/scale", body)
            return Scaled(f"MachineDeployment {name} replicas {current} -> {action.target_nodes}")

        return until_no_conflict(self.path, self.kube.conflict_retries, attempt)

    def seed(self, store: MemoryTransport, nodes: int) -> None:
        s = self.settings
        store.add(
            self.path,
            {
                "apiVersion": s.api_version,
                "kind": "MachineDeployment",
                "spec": {"replicas": nodes, "clusterName": "demo"},
                "status": {"replicas": nodes},
            },
        )
        for i in range(nodes):
            store.add(
                f"/apis/{s.api_version}/namespaces/{s.namespace}/machines/{s.machine_deployment}-{i}",
                {
                    "apiVersion": s.api_version,
                    "kind": "Machine",
                    "metadata": {"labels": {CAPI_DEPLOYMENT: s.machine_deployment}},
                    "status": {"nodeRef": {"kind": "Node", "name": f"{self.pool.name}-{i}"}},
                },
            )
