"""CapacityBuffer pools: headroom as the cluster autoscaler's upstream ``CapacityBuffer``.

Follows the cluster autoscaler's ``autoscaling.x-k8s.io/v1beta1`` CapacityBuffer (the
``buffer.x-k8s.io/active-capacity`` strategy, a ``podTemplateRef`` to a core ``v1``
PodTemplate, and the conditions its buffer controller reports), read from API discovery;
where the API is not served, the pool is a placeholder pool.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from scaler.actuation.kube.inventory import NodeInfo
from scaler.actuation.kube.placeholders import TEMPLATE_HASH, PlaceholderPool
from scaler.actuation.kube.pool import Scaled
from scaler.actuation.kube.transport import (
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    KubeApiError,
    MemoryTransport,
    Session,
)
from scaler.actuation.kube.writes import create_or_update, until_no_conflict
from scaler.config import CapacityBufferProviderConfig, KubernetesConfig, PoolConfig
from scaler.plans import Action

BUFFER_API = "autoscaling.x-k8s.io/v1beta1"
"""The cluster autoscaler's CapacityBuffer API group/version tiercast writes."""
BUFFER_NAME = "tiercast-buffer"
ACTIVE_CAPACITY = "buffer.x-k8s.io/active-capacity"
"""The buffer provisioning strategy in which the autoscaler adds nodes for fake pods."""


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


class CapacityBufferPool:
    """Headroom as an upstream ``CapacityBuffer`` (``autoscaling.x-k8s.io/v1beta1``).

    Where the cluster serves that API (read from discovery once per provider), the pool
    has a PodTemplate ``tiercast-buffer-POOL`` shaped as one chunk (the placeholder
    pod: pause, ``nvidia.com/gpu``, node affinity to the pool) and a CapacityBuffer of
    the same name with ``provisioningStrategy: buffer.x-k8s.io/active-capacity``,
    ``podTemplateRef`` and ``replicas`` chunks, sized as placeholders are. The cluster
    autoscaler's buffer controller then keeps that much spare capacity with fake pods
    that real pods never have to preempt. The outcome is ``applied`` only once the
    buffer's status says the controller took this spec (``ReadyForProvisioning`` for
    the current generation, ``status.replicas`` equal to the target), else ``accepted``.
    A placeholder Deployment left from before the API was served is scaled to 0.

    Where the API is not served, the pool is a :class:`PlaceholderPool`: pause-pod
    Deployments at a negative priority, which every cluster autoscaler understands.
    """

    def __init__(
        self, pool: PoolConfig, settings: CapacityBufferProviderConfig, kube: KubernetesConfig
    ):
        self.pool, self.settings, self.kube = pool, settings, kube
        self.placeholders = PlaceholderPool(pool, settings, kube)
        self.name = f"{BUFFER_NAME}-{pool.name}"
        ns = settings.namespace
        self.template_path = f"/api/v1/namespaces/{ns}/podtemplates/{self.name}"
        self.buffer_path = f"/apis/{BUFFER_API}/namespaces/{ns}/capacitybuffers/{self.name}"
        self._served: bool | None = None

    def served(self, session: Session) -> bool:
        """Whether the cluster serves ``capacitybuffers`` in ``autoscaling.x-k8s.io/v1beta1``."""
        if self._served is None:
            try:
                listing = session.get(f"/apis/{BUFFER_API}")
            except KubeApiError as exc:
                if not exc.not_found:
                    raise
                listing = {}
            names = {r.get("name") for r in listing.get("resources") or []}
            self._served = "capacitybuffers" in names
        return self._served

    def _chunk(self) -> dict[str, Any]:
        """One chunk's pod template: the placeholder pod without its priority class.

        The buffer's pods are simulated by the autoscaler, never created, so nothing has
        to preempt them and no PriorityClass is needed.
        """
        template = self.placeholders.template()
        template["spec"].pop("priorityClassName", None)
        return template

    def _template_hash(self) -> str:
        text = json.dumps(self._chunk(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def scale(
        self, session: Session, action: Action, nodes: Callable[[], list[NodeInfo]]
    ) -> Scaled:
        if not self.served(session):
            done = self.placeholders.scale(session, action, nodes)
            return Scaled(
                f"{BUFFER_API} CapacityBuffers are not served here: placeholder pods instead; "
                + done.message,
                done.outcome,
            )
        used = self.placeholders.used_gpus(session, nodes)
        want = self.placeholders.replicas_for(action.target_nodes, used)
        why = f"{action.target_nodes} nodes x {self.pool.gpus_per_node} GPUs - {used} in use"
        notes = self._ensure_template(session)
        notes += self._ensure_buffer(session, want)
        notes += self._retire_placeholders(session)
        buffer = session.get(self.buffer_path)
        status = buffer.get("status") or {}
        head = f"CapacityBuffer {self.name}: " + (", ".join(notes) if notes else "no change")
        head += f" ({want} chunks of {self.placeholders.gpus_per_pod} GPUs: {why})"
        seen = self._status_problem(buffer, want)
        if seen is None:
            return Scaled(f"{head}; the autoscaler reports {status.get('replicas')} chunks ready")
        return Scaled(f"accepted, not in effect yet: {head}; {seen}", "accepted")

    @staticmethod
    def _status_problem(buffer: dict[str, Any], want: int) -> str | None:
        """Why the buffer's status does not show ``want`` chunks taken up, or None.

        The cluster autoscaler's buffer controller sets ``ReadyForProvisioning`` and
        ``status.replicas`` once it translated the spec, ``LimitedByQuotas`` when resource
        quotas cut the chunks, and ``Provisioning=False`` when it cannot add the nodes.
        The conditions are ``metav1.Condition`` (``apis/capacitybuffer/.../v1beta1/types.go``):
        one whose ``observedGeneration`` is below the buffer's ``metadata.generation`` was
        set for an earlier spec and says nothing of this one.
        """
        status = buffer.get("status") or {}
        ready = _condition(buffer, "ReadyForProvisioning")
        quota = _condition(buffer, "LimitedByQuotas")
        provisioning = _condition(buffer, "Provisioning")

        def said(c: dict[str, Any]) -> str:
            return str(c.get("message") or c.get("reason") or "no message")

        if ready is None:
            return "no autoscaler has reported on it yet (is its capacity buffer controller on?)"
        generation = (buffer.get("metadata") or {}).get("generation")
        seen = ready.get("observedGeneration")
        if isinstance(generation, int) and isinstance(seen, int) and seen < generation:
            return (
                f"ReadyForProvisioning is for generation {seen}, the buffer is at {generation}: "
                "the autoscaler has not read this spec yet"
            )
        if ready.get("status") != "True":
            return f"ReadyForProvisioning={ready.get('status')}: {said(ready)}"
        if quota is not None and quota.get("status") == "True":
            return f"LimitedByQuotas: {said(quota)}"
        if provisioning is not None and provisioning.get("status") == "False":
            return f"Provisioning=False: {said(provisioning)}"
        if status.get("replicas") != want:
            return f"status.replicas {status.get('replicas')} is for an earlier spec"
        return None

    def _ensure_template(self, session: Session) -> list[str]:
        digest = self._template_hash()

        def create() -> list[str]:
            body = {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {
                    "name": self.name,
                    "namespace": self.settings.namespace,
                    "labels": dict(self.placeholders.labels),
                    "annotations": {TEMPLATE_HASH: digest},
                },
                "template": self._chunk(),
            }
            session.request(
                "POST", f"/api/v1/namespaces/{self.settings.namespace}/podtemplates", body
            )
            return ["PodTemplate created"]

        def update(current: dict[str, Any]) -> list[str]:
            notes = (current.get("metadata") or {}).get("annotations") or {}
            if notes.get(TEMPLATE_HASH) == digest:
                return []
            patch = {
                "metadata": {
                    "annotations": {TEMPLATE_HASH: digest},
                    "resourceVersion": current["metadata"]["resourceVersion"],
                },
                "template": {**self._chunk(), "$patch": "replace"},
            }
            session.request("PATCH", self.template_path, patch, STRATEGIC_MERGE_PATCH)
            return ["PodTemplate updated"]

        return create_or_update(
            session, self.template_path, self.kube.conflict_retries, create, update
        )

    def _ensure_buffer(self, session: Session, want: int) -> list[str]:
        def create() -> list[str]:
            body = {
                "apiVersion": BUFFER_API,
                "kind": "CapacityBuffer",
                "metadata": {
                    "name": self.name,
                    "namespace": self.settings.namespace,
                    "labels": dict(self.placeholders.labels),
                },
                "spec": {
                    "provisioningStrategy": ACTIVE_CAPACITY,
                    "podTemplateRef": {"name": self.name},
                    "replicas": want,
                },
            }
            session.request(
                "POST",
                f"/apis/{BUFFER_API}/namespaces/{self.settings.namespace}/capacitybuffers",
                body,
            )
            return [f"created with {want} chunks"]

        def update(buffer: dict[str, Any]) -> list[str]:
            spec = buffer.get("spec") or {}
            current = spec.get("replicas")
            if current == want and (spec.get("podTemplateRef") or {}).get("name") == self.name:
                return []
            # Custom resources take JSON merge patch only.
            patch = {
                "metadata": {"resourceVersion": buffer["metadata"]["resourceVersion"]},
                "spec": {"replicas": want, "podTemplateRef": {"name": self.name}},
            }
            session.request("PATCH", self.buffer_path, patch, MERGE_PATCH)
            return [f"chunks {current} -> {want}"]

        return create_or_update(
            session, self.buffer_path, self.kube.conflict_retries, create, update
        )

    def _retire_placeholders(self, session: Session) -> list[str]:
        """Scale to 0 the placeholder Deployment of a time the API was not served."""
        path = f"{self.placeholders.deployment_path}/scale"

        def attempt() -> list[str]:
            try:
                scale = session.get(path)
            except KubeApiError as exc:
                if exc.not_found:
                    return []
                raise
            current = int((scale.get("spec") or {}).get("replicas") or 0)
            if current == 0:
                return []
            body = {
                "apiVersion": "autoscaling/v1",
                "kind": "Scale",
                "metadata": {
                    "name": self.placeholders.name,
                    "namespace": self.settings.namespace,
                    "resourceVersion": scale["metadata"]["resourceVersion"],
                },
                "spec": {"replicas": 0},
            }
            session.request("PUT", path, body)
            return [f"placeholder Deployment {self.placeholders.name} {current} -> 0"]

        return until_no_conflict(path, self.kube.conflict_retries, attempt)

    def seed(self, store: MemoryTransport, nodes: int) -> None:
        """The offline dry-run shows the CapacityBuffer path: the API is seeded as served."""
        store.discovery[BUFFER_API] = {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": BUFFER_API,
            "resources": [
                {"name": "capacitybuffers", "namespaced": True, "kind": "CapacityBuffer"},
                {"name": "capacitybuffers/status", "namespaced": True, "kind": "CapacityBuffer"},
            ],
        }
