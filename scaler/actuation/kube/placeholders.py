"""Placeholder pools: headroom as pause pods at a negative priority.

Follows the Kubernetes pod-priority and preemption API: a ``scheduling.k8s.io/v1``
PriorityClass below every real pod's, and an ``apps/v1`` Deployment of pause pods sized
through its ``autoscaling/v1`` Scale. Any cluster autoscaler adds nodes for placeholders
that real pods displace, ahead of demand.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Callable
from typing import Any

from scaler.actuation.kube.inventory import GPU_RESOURCE, NodeInfo, pool_selectors
from scaler.actuation.kube.pool import Scaled
from scaler.actuation.kube.transport import (
    STRATEGIC_MERGE_PATCH,
    KubeApiError,
    MemoryTransport,
    Session,
    equality_terms,
)
from scaler.actuation.kube.writes import still_conflicting
from scaler.config import KubernetesConfig, PlaceholderProviderConfig, PoolConfig
from scaler.plans import Action

log = logging.getLogger(__name__)

PLACEHOLDER_NAME = "tiercast-placeholder"
TEMPLATE_HASH = "tiercast.io/template-hash"
EXPENDABLE_CUTOFF = -10
"""The cluster autoscaler's default ``--expendable-pods-priority-cutoff``: pods below it
are expendable and "don't cause scale up" (kubernetes/autoscaler ``cluster-autoscaler/FAQ.md``)."""


class ExpendablePriority(Exception):
    """The placeholders' PriorityClass is below the autoscaler's cutoff: they would add no node."""


class PlaceholderPool:
    """Headroom pods: replicas = ceil((target GPUs - GPUs real pods request on the pool) / GPUs per pod).

    Placeholders run at a negative priority, so every real pod preempts them and
    the cluster autoscaler (any of them) adds nodes for the displaced
    placeholders ahead of demand; fewer placeholders let it remove empty nodes.
    """

    def __init__(
        self, pool: PoolConfig, settings: PlaceholderProviderConfig, kube: KubernetesConfig
    ):
        self.pool, self.settings, self.kube = pool, settings, kube
        self.name = f"{PLACEHOLDER_NAME}-{pool.name}"
        self.gpus_per_pod = settings.gpus_per_pod or pool.gpus_per_node
        self.deployment_path = (
            f"/apis/apps/v1/namespaces/{settings.namespace}/deployments/{self.name}"
        )
        self.priority_path = f"/apis/scheduling.k8s.io/v1/priorityclasses/{settings.priority_class}"
        self.labels = {
            "app.kubernetes.io/name": PLACEHOLDER_NAME,
            "app.kubernetes.io/managed-by": "tiercast",
            kube.pool_label: pool.name,
        }

    def _affinity_terms(self) -> dict[str, str]:
        selector = self.settings.node_selector or pool_selectors(self.pool, self.kube.pool_label)[0]
        return equality_terms(selector)

    def template(self) -> dict[str, Any]:
        gpus = str(self.gpus_per_pod)
        expressions = [
            {"key": k, "operator": "In", "values": [v]}
            for k, v in sorted(self._affinity_terms().items())
        ]
        return {
            "metadata": {"labels": dict(self.labels)},
            "spec": {
                "priorityClassName": self.settings.priority_class,
                "terminationGracePeriodSeconds": 0,
                "automountServiceAccountToken": False,
                # Meets the "restricted" Pod Security Standard of tiercast's namespace.
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": 65535,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": expressions}]
                        }
                    }
                },
                "tolerations": [
                    {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
                ],
                "containers": [
                    {
                        "name": "pause",
                        "image": self.settings.image,
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        "resources": {
                            "requests": {GPU_RESOURCE: gpus},
                            "limits": {GPU_RESOURCE: gpus},
                        },
                    }
                ],
            },
        }

    def _template_hash(self) -> str:
        text = json.dumps(self.template(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def used_gpus(self, session: Session, nodes: Callable[[], list[NodeInfo]]) -> int:
        """GPUs requested by real (non-placeholder) pods on the pool's nodes."""
        names = {n.name for n in nodes() if n.pool == self.pool.name}
        if not names:
            return 0
        try:
            pods = session.get(
                "/api/v1/pods",
                {
                    "fieldSelector": "status.phase!=Succeeded,status.phase!=Failed",
                    "labelSelector": f"app.kubernetes.io/name!={PLACEHOLDER_NAME}",
                },
            )
        except KubeApiError as exc:
            if exc.status != 403:
                raise
            # The dry-run install lists no pods (deploy/components/acting grants it): the
            # headroom then counts no running pod, more placeholders, never fewer nodes.
            log.warning(
                "pool %s: pods cannot be listed (no RBAC grant): headroom counts no running pods",
                self.pool.name,
            )
            return 0
        used = 0
        for pod in pods.get("items", []):
            if pod.get("spec", {}).get("nodeName") not in names:
                continue
            for c in pod.get("spec", {}).get("containers", []):
                res = c.get("resources") or {}
                want = (res.get("requests") or {}).get(GPU_RESOURCE) or (
                    res.get("limits") or {}
                ).get(GPU_RESOURCE)
                used += int(str(want or 0))
        return used

    def replicas_for(self, target_nodes: int, used_gpus: int) -> int:
        headroom = max(0, target_nodes * self.pool.gpus_per_node - used_gpus)
        return math.ceil(headroom / self.gpus_per_pod)

    def _ensure_priority_class(self, session: Session) -> bool:
        try:
            existing = session.get(self.priority_path)
        except KubeApiError as exc:
            if not exc.not_found:
                raise
        else:
            value = existing.get("value")
            if isinstance(value, int) and value < EXPENDABLE_CUTOFF:
                raise ExpendablePriority(
                    f"PriorityClass {self.settings.priority_class} has value {value}, below the "
                    f"cluster autoscaler's --expendable-pods-priority-cutoff ({EXPENDABLE_CUTOFF}): "
                    "it adds no node for such pods; raise the class's value (-10 to -1)"
                )
            return False
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {
                "name": self.settings.priority_class,
                "labels": {"app.kubernetes.io/managed-by": "tiercast"},
            },
            "value": self.settings.priority,
            "globalDefault": False,
            "preemptionPolicy": "Never",
            "description": "tiercast headroom placeholders: preempted by every real pod",
        }
        try:
            session.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body)
        except KubeApiError as exc:
            if exc.status != 409:  # created meanwhile (or by a retried request): fine
                raise
        return True

    def scale(
        self, session: Session, action: Action, nodes: Callable[[], list[NodeInfo]]
    ) -> Scaled:
        try:
            return Scaled(self._scale(session, action, nodes))
        except ExpendablePriority as exc:
            return Scaled(f"placeholders not scaled: {exc}", "failed")

    def _scale(self, session: Session, action: Action, nodes: Callable[[], list[NodeInfo]]) -> str:
        created_pc = self._ensure_priority_class(session)
        used = self.used_gpus(session, nodes)
        want = self.replicas_for(action.target_nodes, used)
        why = f"{action.target_nodes} nodes x {self.pool.gpus_per_node} GPUs - {used} in use"
        prefix = f"PriorityClass {self.settings.priority_class} created; " if created_pc else ""
        for _ in range(self.kube.conflict_retries + 1):
            try:
                deployment = session.get(self.deployment_path)
            except KubeApiError as exc:
                if not exc.not_found:
                    raise
                self._create(session, want)
                return f"{prefix}Deployment {self.name} created with {want} placeholders ({why})"
            notes = []
            annotations = deployment.get("metadata", {}).get("annotations") or {}
            if annotations.get(TEMPLATE_HASH) != self._template_hash():
                patch = {
                    "metadata": {
                        "annotations": {TEMPLATE_HASH: self._template_hash()},
                        "resourceVersion": deployment["metadata"]["resourceVersion"],
                    },
                    "spec": {"template": self.template()},
                }
                try:
                    session.request("PATCH", self.deployment_path, patch, STRATEGIC_MERGE_PATCH)
                except KubeApiError as exc:
                    if exc.conflict:
                        continue
                    raise
                notes.append("pod template updated")
            scale = session.get(f"{self.deployment_path}/scale")
            current = int(scale.get("spec", {}).get("replicas") or 0)
            if current != want:
                body = {
                    "apiVersion": "autoscaling/v1",
                    "kind": "Scale",
                    "metadata": {
                        "name": self.name,
                        "namespace": self.settings.namespace,
                        "resourceVersion": scale["metadata"]["resourceVersion"],
                    },
                    "spec": {"replicas": want},
                }
                try:
                    session.request("PUT", f"{self.deployment_path}/scale", body)
                except KubeApiError as exc:
                    if exc.conflict:
                        continue
                    raise
                notes.append(f"placeholders {current} -> {want} ({why})")
            if not notes:
                return f"{prefix}{want} placeholders already running ({why}); no change"
            return prefix + f"Deployment {self.name}: " + ", ".join(notes)
        raise still_conflicting(self.deployment_path, self.kube.conflict_retries)

    def _create(self, session: Session, replicas: int) -> None:
        body = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": self.name,
                "namespace": self.settings.namespace,
                "labels": dict(self.labels),
                "annotations": {TEMPLATE_HASH: self._template_hash()},
            },
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": dict(self.labels)},
                "strategy": {"type": "Recreate"},
                "template": self.template(),
            },
        }
        session.request(
            "POST", f"/apis/apps/v1/namespaces/{self.settings.namespace}/deployments", body
        )

    def seed(self, store: MemoryTransport, nodes: int) -> None:
        """Nothing to seed: the first cycle creates the PriorityClass and the Deployment."""
