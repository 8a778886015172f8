"""Karpenter pools: a static NodePool's replicas, or a NodePool's GPU limit.

Follows Karpenter's ``karpenter.sh/v1`` NodePool: ``spec.replicas`` through the scale
subresource of static NodePools (Karpenter v1.8+, provisioned only with its
``StaticCapacity`` feature gate), or ``spec.limits["nvidia.com/gpu"]``, and the CRD's CEL
rules on which of the two a NodePool may carry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scaler.actuation.kube.inventory import GPU_RESOURCE, KARPENTER_NODEPOOL, NodeInfo
from scaler.actuation.kube.pool import Scaled
from scaler.actuation.kube.transport import MERGE_PATCH, KubeApiError, MemoryTransport, Session
from scaler.actuation.kube.writes import direction_reached, until_no_conflict
from scaler.config import KarpenterProviderConfig, KubernetesConfig, PoolConfig
from scaler.plans import Action

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
"""Node annotation that keeps Karpenter from disrupting a node (``"true"``).

Karpenter's disruption candidates ignore cordon (``pkg/controllers/disruption/types.go``
``NewCandidate``; ``pkg/controllers/state/statenode.go`` ``ValidateNodeDisruptable``
checks only this annotation), and a dynamic NodePool's ``consolidateAfter`` defaults to
``0s`` (``pkg/apis/v1/nodepool.go``): a node drained for a MIG relayout is an emptiness
candidate at once unless annotated."""


def karpenter_managed(labels: dict[str, str]) -> bool:
    """Whether Karpenter launched the node: it labels its nodes ``karpenter.sh/nodepool``
    (``pkg/apis/v1/labels.go`` ``NodePoolLabelKey``), whatever provider tiercast's pool uses."""
    return KARPENTER_NODEPOOL in labels


class KarpenterPool:
    """Karpenter: a static NodePool's replicas (scale subresource) or a NodePool's GPU limit.

    Neither is reported ``applied``, since neither makes Karpenter act by itself:

    * ``replicas``: written through the NodePool's scale subresource (``.spec.replicas``,
      status from ``.status.nodes``, Karpenter v1.8+). Karpenter provisions static
      capacity only with its ``StaticCapacity`` feature gate (alpha, off by default);
      with the gate off the write is accepted and nothing happens. The outcome is
      ``accepted`` with ``status.nodes``; when spec and status already agree it is
      ``applied``. A dynamic NodePool (no ``spec.replicas``) is refused before any
      write, since the CRD's CEL rules never let a NodePool change mode, and a target
      above the NodePool's ``limits.nodes`` is named as not in effect.
    * ``limits``: ``spec.limits["nvidia.com/gpu"]`` is a ceiling. Raising it adds no node
      unless pods are pending (pair the pool with placeholder headroom); lowering it
      removes none. Always ``accepted``, never a scale-down done.
    """

    def __init__(self, pool: PoolConfig, settings: KarpenterProviderConfig, kube: KubernetesConfig):
        self.pool, self.settings, self.kube = pool, settings, kube
        self.path = f"/apis/{settings.api_version}/nodepools/{settings.node_pool}"

    def _limit_nodes(self, obj: dict[str, Any]) -> int:
        limit = str(((obj.get("spec") or {}).get("limits") or {}).get(GPU_RESOURCE, "0"))
        try:
            return int(limit) // self.pool.gpus_per_node
        except ValueError:
            # A limit written by hand in another unit: treat as unknown, so it is rewritten.
            return -1

    @staticmethod
    def _node_limit(spec: dict[str, Any]) -> int | None:
        """A static NodePool's ``limits.nodes`` (its ceiling during scaling and drift), or None."""
        value = (spec.get("limits") or {}).get("nodes")
        try:
            return None if value is None else int(str(value))
        except ValueError:
            return None

    def scale(
        self, session: Session, action: Action, nodes: Callable[[], list[NodeInfo]]
    ) -> Scaled:
        if self.settings.mode == "replicas":
            return self._replicas(session, action)
        return self._limits(session, action)

    def _replicas(self, session: Session, action: Action) -> Scaled:
        name = self.settings.node_pool
        gate = (
            "Karpenter provisions static NodePools only with its StaticCapacity feature gate "
            "(alpha, off by default)"
        )

        def attempt() -> Scaled:
            pool = session.get(self.path)  # a missing NodePool stays an API error
            spec = pool.get("spec") or {}
            if "replicas" not in spec:
                # The CRD's CEL rule has(self.replicas) == has(oldSelf.replicas) refuses
                # the write with 422: say so before trying.
                return Scaled(
                    f"NodePool {name} is dynamic (no spec.replicas), and Karpenter never lets a "
                    "NodePool move between dynamic and static; use mode: limits, or a NodePool "
                    "created with spec.replicas",
                    "failed",
                )
            try:
                scale = session.get(f"{self.path}/scale")
            except KubeApiError as exc:
                if not exc.not_found:
                    raise
                return Scaled(
                    f"NodePool {name} has no scale subresource: static NodePools need "
                    "Karpenter v1.8+; use mode: limits with a placeholder pool for headroom",
                    "failed",
                )
            current = int((scale.get("spec") or {}).get("replicas") or 0)
            status = int((scale.get("status") or {}).get("replicas") or 0)
            cap = self._node_limit(spec)
            capped = ""
            if cap is not None and action.target_nodes > cap:
                capped = (
                    f"; limits.nodes {cap} stops Karpenter at {cap} nodes, "
                    f"short of {action.target_nodes}"
                )
            if direction_reached(action.decision, current, action.target_nodes):
                if status == current and not capped:
                    return Scaled(f"NodePool {name} at {current} replicas (status.nodes {status})")
                return Scaled(
                    f"accepted, not in effect: NodePool {name} spec.replicas is {current} but "
                    f"status.nodes is {status}{capped}; {gate}",
                    "accepted",
                )
            body = {
                "apiVersion": "autoscaling/v1",
                "kind": "Scale",
                "metadata": {"name": name, "resourceVersion": scale["metadata"]["resourceVersion"]},
                "spec": {"replicas": action.target_nodes},
            }
            session.request("PUT", f"{self.path}/scale", body)
            return Scaled(
                f"accepted, not in effect yet: NodePool {name} spec.replicas {current} -> "
                f"{action.target_nodes} (status.nodes {status}){capped}; {gate}",
                "accepted",
            )

        return until_no_conflict(self.path, self.kube.conflict_retries, attempt)

    def _limits(self, session: Session, action: Action) -> Scaled:
        name = self.settings.node_pool
        if action.decision == "scale-down":
            effect = "a lower limit removes no nodes (Karpenter's consolidation or expiry does)"
        else:
            effect = "nodes come only for pending pods (pair the pool with placeholder headroom)"

        def attempt() -> Scaled:
            obj = session.get(self.path)
            if "replicas" in (obj.get("spec") or {}):
                # The CRD's CEL rule allows no limit but limits.nodes on a static NodePool.
                return Scaled(
                    f"NodePool {name} is static (spec.replicas set): Karpenter allows only "
                    f"limits.nodes on it, not {GPU_RESOURCE}; use mode: replicas",
                    "failed",
                )
            current = self._limit_nodes(obj)
            if current >= 0 and direction_reached(action.decision, current, action.target_nodes):
                return Scaled(
                    f"accepted, cap only: NodePool {name} limit already allows {current} nodes; {effect}",
                    "accepted",
                )
            gpus = action.target_nodes * self.pool.gpus_per_node
            # Custom resources take JSON merge patch only (no strategic merge).
            body = {
                "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                "spec": {"limits": {GPU_RESOURCE: str(gpus)}},
            }
            session.request("PATCH", self.path, body, MERGE_PATCH)
            return Scaled(
                f"accepted, cap only: NodePool {name} limit {GPU_RESOURCE} -> {gpus} "
                f"({action.target_nodes} nodes); {effect}",
                "accepted",
            )

        return until_no_conflict(self.path, self.kube.conflict_retries, attempt)

    def seed(self, store: MemoryTransport, nodes: int) -> None:
        spec: dict[str, Any] = {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.sh",
                        "kind": "NodeClass",
                        "name": "default",
                    },
                    "requirements": [],
                }
            }
        }
        status: dict[str, Any] = {"nodes": nodes}
        if self.settings.mode == "replicas":
            spec["replicas"] = nodes
        else:
            spec["limits"] = {GPU_RESOURCE: str(nodes * self.pool.gpus_per_node)}
        store.add(
            self.path,
            {
                "apiVersion": self.settings.api_version,
                "kind": "NodePool",
                "spec": spec,
                "status": status,
            },
        )
