"""Cluster API pools: a ``MachineDeployment``'s replicas through its ``scale`` subresource.

Follows Cluster API's ``cluster.x-k8s.io`` MachineDeployment (the newest version the cluster
serves, ``v1beta2`` since Cluster API v1.11, unless the pool names one) and the
``autoscaling/v1`` Scale it serves; the offline dry-run seeds the MachineDeployment and one
Machine per node, tied to its Node through ``status.nodeRef`` as Cluster API ties them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scaler.actuation.kube.inventory import (
    CAPI_DEPLOYMENT,
    CAPI_GROUP,
    CAPI_VERSIONS,
    NodeInfo,
    capi_api_version,
)
from scaler.actuation.kube.pool import Scaled
from scaler.actuation.kube.transport import KubeApiError, MemoryTransport, Session
from scaler.actuation.kube.writes import direction_reached, until_no_conflict
from scaler.config import ClusterApiProviderConfig, KubernetesConfig, PoolConfig
from scaler.plans import Action

TOPOLOGY_OWNED = "topology.cluster.x-k8s.io/owned"
"""Label Cluster API puts on a MachineDeployment its Cluster's managed topology (ClusterClass) owns."""
TOPOLOGY_NAME = "topology.cluster.x-k8s.io/deployment-name"
"""Label naming the ``Cluster.spec.topology.workers.machineDeployments[].name`` it came from."""
CLUSTER_NAME = "cluster.x-k8s.io/cluster-name"
AUTOSCALER_MIN = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
AUTOSCALER_MAX = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"


class ClusterApiPool:
    """Cluster API: ``MachineDeployment`` replicas through the ``scale`` subresource.

    Refused, before any write, when another owner would revert the replicas: a
    MachineDeployment of a managed topology (label ``topology.cluster.x-k8s.io/owned``)
    whose topology entry sets ``replicas`` (the topology controller then keeps them at
    that value), or one the cluster autoscaler manages (its
    ``...-autoscaler-node-group-min-size`` / ``-max-size`` annotations). A topology entry
    that leaves ``replicas`` unset leaves them, in Cluster API's words, to "an external
    entity (like cluster autoscaler)" (``api/core/v1beta2/cluster_types.go``,
    ``MachineDeploymentTopology.Replicas``): tiercast may be that entity.
    """

    def __init__(
        self, pool: PoolConfig, settings: ClusterApiProviderConfig, kube: KubernetesConfig
    ):
        self.pool, self.settings, self.kube = pool, settings, kube

    def path(self, session: Session) -> str:
        """The MachineDeployment's path, in the version the cluster serves."""
        s = self.settings
        return (
            f"/apis/{capi_api_version(session, s)}/namespaces/{s.namespace}"
            f"/machinedeployments/{s.machine_deployment}"
        )

    def owner(self, md: dict[str, Any], session: Session) -> str | None:
        """Who else sets this MachineDeployment's replicas, or None."""
        meta = md.get("metadata") or {}
        labels = meta.get("labels") or {}
        if TOPOLOGY_OWNED in labels:
            owned = self._topology_replicas(md, session)
            if owned is not None:
                return owned
        notes = meta.get("annotations") or {}
        if AUTOSCALER_MIN in notes or AUTOSCALER_MAX in notes:
            return (
                "the cluster autoscaler manages it (node-group min/max size annotations) and "
                "would undo the change; use a placeholder pool for headroom instead"
            )
        return None

    def _topology_replicas(self, md: dict[str, Any], session: Session) -> str | None:
        """Why the managed topology owns the replicas, or None when its entry leaves them unset."""
        meta = md.get("metadata") or {}
        labels = meta.get("labels") or {}
        cluster = (md.get("spec") or {}).get("clusterName") or labels.get(CLUSTER_NAME)
        entry_name = labels.get(TOPOLOGY_NAME)
        path = (
            f"/apis/{capi_api_version(session, self.settings)}/namespaces/"
            f"{self.settings.namespace}/clusters/{cluster}"
        )
        try:
            obj = session.get(path) if cluster else {}
        except KubeApiError as exc:
            # 403: the RBAC lacks get on clusters.cluster.x-k8s.io; refused below, safely.
            if not (exc.not_found or exc.status == 403):
                raise
            obj = {}
        workers = ((obj.get("spec") or {}).get("topology") or {}).get("workers") or {}
        entries = [
            e for e in workers.get("machineDeployments") or [] if e.get("name") == entry_name
        ]
        where = f"Cluster {cluster} spec.topology.workers.machineDeployments[{entry_name}]"
        if not entries:
            return (
                f"its Cluster's managed topology (ClusterClass) owns it and {where} could not "
                "be read to tell whether it sets the replicas; nothing changed"
            )
        if entries[0].get("replicas") is not None:
            return (
                f"its Cluster's managed topology (ClusterClass) sets the replicas "
                f"({where}.replicas={entries[0]['replicas']}) and reverts any other; "
                "set them there or leave them unset for tiercast to manage"
            )
        return None

    def scale(
        self, session: Session, action: Action, nodes: Callable[[], list[NodeInfo]]
    ) -> Scaled:
        name = self.settings.machine_deployment
        path = self.path(session)
        owner = self.owner(session.get(path), session)
        if owner:
            return Scaled(f"MachineDeployment {name} not scaled: {owner}", "failed")

        def attempt() -> Scaled:
            scale = session.get(f"{path}/scale")
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
            session.request("PUT", f"{path}/scale", body)
            return Scaled(f"MachineDeployment {name} replicas {current} -> {action.target_nodes}")

        return until_no_conflict(path, self.kube.conflict_retries, attempt)

    def seed(self, store: MemoryTransport, nodes: int) -> None:
        """The MachineDeployment and its Machines, in the pool's version or the newest one."""
        s = self.settings
        version = s.api_version or f"{CAPI_GROUP}/{CAPI_VERSIONS[0]}"
        store.discovery.setdefault(
            version,
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": version,
                "resources": [
                    {"name": "machinedeployments", "namespaced": True, "kind": "MachineDeployment"},
                    {"name": "machinedeployments/scale", "namespaced": True, "kind": "Scale"},
                    {"name": "machines", "namespaced": True, "kind": "Machine"},
                ],
            },
        )
        store.add(
            f"/apis/{version}/namespaces/{s.namespace}/machinedeployments/{s.machine_deployment}",
            {
                "apiVersion": version,
                "kind": "MachineDeployment",
                "spec": {"replicas": nodes, "clusterName": "demo"},
                "status": {"replicas": nodes},
            },
        )
        for i in range(nodes):
            store.add(
                f"/apis/{version}/namespaces/{s.namespace}/machines/{s.machine_deployment}-{i}",
                {
                    "apiVersion": version,
                    "kind": "Machine",
                    "metadata": {"labels": {CAPI_DEPLOYMENT: s.machine_deployment}},
                    "status": {"nodeRef": {"kind": "Node", "name": f"{self.pool.name}-{i}"}},
                },
            )
