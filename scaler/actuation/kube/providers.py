"""Capacity providers that act through the Kubernetes API, one small class per mechanism.

:class:`KubeProvider` is the :class:`scaler.actuation.protocol.CapacityProvider` the cycle
talks to. It reads the inventory from node labels (and Cluster API Machines) and
hands each action to its pool's provider, chosen by ``PoolConfig.provider.kind``:

* ``cluster-api``: ``MachineDeployment`` replicas through its ``scale`` subresource,
  refused when a managed topology or the cluster autoscaler owns them;
* ``karpenter``: a static NodePool's replicas through its scale subresource, or a
  NodePool's ``spec.limits["nvidia.com/gpu"]``; both reported ``accepted`` (not
  ``applied``) while the cluster cannot be seen to act on them;
* ``placeholder``: a negative PriorityClass and a Deployment of pause pods whose
  replicas fill the planned headroom, so any cluster autoscaler adds nodes early
  and real pods preempt the placeholders;
* ``capacity-buffer``: the same headroom as an upstream ``CapacityBuffer``
  (``autoscaling.x-k8s.io/v1beta1``) where the cluster serves that API, placeholders
  where it does not.

Actions of kind ``mig-layout`` (``details``: ``node`` and ``mig_config``, or the MIG
planner's ``layout`` / ``label`` with its ``mig_parted_entry``; ``new_node`` for a node
not provisioned yet) relabel one node for the GPU Operator's MIG manager: the entry is
added to the mig-parted ConfigMap the ClusterPolicy names when it is not there, then
cordon, evict through the Eviction API (PodDisruptionBudgets hold), set
``nvidia.com/mig.config``, wait for ``nvidia.com/mig.config.state=success``, uncordon;
on ``failed`` or a timeout the previous label is restored and the node uncordoned.
:meth:`KubeProvider.mig_inventory` gives the MIG planner the nodes' real layouts.

Every action that changed something leaves an ``events.k8s.io/v1`` Event on each
object it changed, with the action's reason.

Safety: every write follows a fresh read and is skipped when the object is
already at (or, in the decision's direction, beyond) the target, so a second run
of the same plan changes nothing; writes carry the ``resourceVersion`` they were
computed from and are recomputed on 409; the transport backs off on 429/5xx and
timeouts; at most ``kubernetes.max_changes_per_cycle`` actions change anything in
one cycle; and after an API failure the rest of the cycle is skipped, so the
record lists exactly what landed.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import math
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import yaml

from forecaster import retrying
from forecaster.retrying import Attempts
from scaler.actuation.kube.inventory import (
    CAPI_DEPLOYMENT,
    GPU_COUNT,
    GPU_PRODUCT,
    GPU_RESOURCE,
    MIG_CONFIG,
    MIG_STATE,
    MIG_STRATEGY,
    NODES_PATH,
    NodeInfo,
    machine_owners,
    mig_node_states,
    node_info,
    nodes_per_pool,
    pool_selectors,
    product_mismatch,
    read_nodes,
)
from scaler.actuation.kube.transport import (
    MERGE_PATCH,
    RETRY_STATUSES,
    STRATEGIC_MERGE_PATCH,
    KubeApiError,
    MemoryTransport,
    RetryPolicy,
    Session,
    Transport,
    connect,
    equality_terms,
)
from scaler.actuation.protocol import ActionResult, RecordingProvider
from scaler.catalog.gpus import gpu_model
from scaler.catalog.mig import mig_parted_entry
from scaler.config import (
    KUBERNETES_PROVIDER_KINDS,
    CapacityBufferProviderConfig,
    ClusterApiProviderConfig,
    Config,
    KarpenterProviderConfig,
    KubernetesConfig,
    PlaceholderProviderConfig,
    PoolConfig,
)
from scaler.planning.mig_layouts import MigNodeState, configured_nodes, resolve_config_name
from scaler.plans import Action

log = logging.getLogger(__name__)

_T = TypeVar("_T")

CLUSTER_POLICIES = "/apis/nvidia.com/v1/clusterpolicies"
OPERATOR_CONFIG = "default-mig-parted-config"
"""The mig-parted ConfigMap the GPU Operator creates and keeps rewriting: tiercast never edits it."""
MIG_PARTED_KEY = "config.yaml"
OWN_PREFIX = "tiercast-"
"""The prefix of the mig-parted entries tiercast adds (and alone may remove)."""
SEEDED_CONFIG = "tiercast-mig-parted-config"
"""The mig-parted ConfigMap name the deploy/ RBAC grants, and the offline dry-run seeds."""


class MigConfigRefused(Exception):
    """A MIG change that cannot take effect (no GPU Operator, a config tiercast may not edit)."""


CORDONED_BY = "tiercast.io/cordoned"
"""Annotation on a node tiercast cordoned, so only tiercast's own cordon is undone."""
PLACEHOLDER_NAME = "tiercast-placeholder"
TEMPLATE_HASH = "tiercast.io/template-hash"


def _direction_reached(decision: str, current: int, target: int) -> bool:
    """True when nothing is left to do: a scale-up never lowers, a scale-down never raises."""
    if decision == "scale-up":
        return current >= target
    if decision == "scale-down":
        return current <= target
    return current == target


@dataclass(frozen=True)
class Scaled:
    """What one pool provider did: a one-line message, and whether the cluster acts on it."""

    message: str
    outcome: str = "applied"
    """``applied``; ``accepted`` (the API took the change but the cluster will not act on it
    as asked, or tiercast cannot know it will); ``failed`` (refused before writing)."""


class PoolProvider(Protocol):
    """Required: ``scale`` (one pool to ``action.target_nodes``) and ``seed`` (dry-run state)."""

    def scale(
        self, session: Session, action: Action, nodes: Callable[[], list[NodeInfo]]
    ) -> Scaled:
        """Make at most the calls needed; say what changed and whether it takes effect.

        ``nodes`` reads the inventory when called (only providers that need it pay the call).
        """
        ...

    def seed(self, store: MemoryTransport, nodes: int) -> None:
        """Create the objects this provider reads, as they would be with ``nodes`` nodes."""
        ...


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
            if _direction_reached(action.decision, current, action.target_nodes):
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

        return _until_no_conflict(self.path, self.kube.conflict_retries, attempt)

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
            if _direction_reached(action.decision, current, action.target_nodes):
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

        return _until_no_conflict(self.path, self.kube.conflict_retries, attempt)

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
            if current >= 0 and _direction_reached(action.decision, current, action.target_nodes):
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

        return _until_no_conflict(self.path, self.kube.conflict_retries, attempt)

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

    def _used_gpus(self, session: Session, nodes: Callable[[], list[NodeInfo]]) -> int:
        """GPUs requested by real (non-placeholder) pods on the pool's nodes."""
        names = {n.name for n in nodes() if n.pool == self.pool.name}
        if not names:
            return 0
        pods = session.get(
            "/api/v1/pods",
            {
                "fieldSelector": "status.phase!=Succeeded,status.phase!=Failed",
                "labelSelector": f"app.kubernetes.io/name!={PLACEHOLDER_NAME}",
            },
        )
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
            session.get(self.priority_path)
            return False
        except KubeApiError as exc:
            if not exc.not_found:
                raise
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
        return Scaled(self._scale(session, action, nodes))

    def _scale(self, session: Session, action: Action, nodes: Callable[[], list[NodeInfo]]) -> str:
        created_pc = self._ensure_priority_class(session)
        used = self._used_gpus(session, nodes)
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
        raise _conflicts(self.deployment_path, self.kube.conflict_retries)

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
        used = self.placeholders._used_gpus(session, nodes)
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
        """
        status = buffer.get("status") or {}
        ready = _condition(buffer, "ReadyForProvisioning")
        quota = _condition(buffer, "LimitedByQuotas")
        provisioning = _condition(buffer, "Provisioning")

        def said(c: dict[str, Any]) -> str:
            return str(c.get("message") or c.get("reason") or "no message")

        if ready is None:
            return "no autoscaler has reported on it yet (is its capacity buffer controller on?)"
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

        return _create_or_update(
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

        return _create_or_update(
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

        return _until_no_conflict(path, self.kube.conflict_retries, attempt)

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


def _conflicts(path: str, retries: int) -> KubeApiError:
    return KubeApiError(
        f"{path}: still conflicting after {retries} re-reads; another writer keeps changing it",
        status=409,
        reason="Conflict",
    )


def _is_conflict(error: BaseException) -> bool:
    return isinstance(error, KubeApiError) and error.conflict


def _at_once(_seconds: float) -> None:
    """No wait between re-reads: a conflict means another writer got there first."""


def _until_no_conflict(path: str, retries: int, attempt: Callable[[], _T]) -> _T:
    """Run ``attempt`` (a fresh read, then a write carrying its resourceVersion) again on
    each 409 Conflict, at most ``retries`` times more; other errors pass through."""
    tries = Attempts(
        retrying.RetryPolicy(retries, base_s=0.0, sleep=_at_once, retryable=_is_conflict)
    )
    for each in tries:
        with each:
            return attempt()
    raise _conflicts(path, retries)


def _create_or_update(
    session: Session,
    path: str,
    retries: int,
    create: Callable[[], list[str]],
    update: Callable[[dict[str, Any]], list[str]],
) -> list[str]:
    """Read ``path``: ``create()`` it when missing, else ``update(current)``; their notes.

    ``update`` decides from the object it is given and either returns ``[]`` (already
    as wanted) or writes with that object's resourceVersion; its 409 Conflict re-reads
    and decides again, at most ``retries`` times more (:func:`_until_no_conflict`). The
    create runs outside those retries: a 409 AlreadyExists from it passes through, as
    any other error does.
    """

    def attempt() -> list[str] | None:
        try:
            current = session.get(path)
        except KubeApiError as exc:
            if not exc.not_found:
                raise
            return None
        return update(current)

    notes = _until_no_conflict(path, retries, attempt)
    return create() if notes is None else notes


def pool_provider(pool: PoolConfig, kube: KubernetesConfig) -> PoolProvider | None:
    p = pool.provider
    if isinstance(p, ClusterApiProviderConfig):
        return ClusterApiPool(pool, p, kube)
    if isinstance(p, KarpenterProviderConfig):
        return KarpenterPool(pool, p, kube)
    if isinstance(p, CapacityBufferProviderConfig):
        return CapacityBufferPool(pool, p, kube)
    if isinstance(p, PlaceholderProviderConfig):
        return PlaceholderPool(pool, p, kube)
    return None


EVENT_CONTROLLER = "tiercast.io/tiercast"
_KINDS = {
    "nodes": "Node",
    "machinedeployments": "MachineDeployment",
    "nodepools": "NodePool",
    "deployments": "Deployment",
    "priorityclasses": "PriorityClass",
    "configmaps": "ConfigMap",
    "capacitybuffers": "CapacityBuffer",
    "podtemplates": "PodTemplate",
}
_EVENT_REASONS = {
    "scale-up": ("ScaleUp", "Scale"),
    "scale-down": ("ScaleDown", "Scale"),
    "relayout": ("MigRelayout", "Relabel"),
    "no-op": ("Reconciled", "Update"),
}


def change_events(
    action: Action,
    calls: list[dict[str, Any]],
    outcome: str,
    message: str,
    when: str,
    instance: str,
) -> list[tuple[str, dict[str, Any]]]:
    """One ``events.k8s.io/v1`` Event per object the action's successful writes changed.

    Each carries the action's reason (and the outcome's message) as its note, the
    decision as its reason, and ``Warning`` when the action failed. Events of
    cluster-scoped objects go to ``default``, as kubectl's do.
    """
    seen: dict[tuple[str, str | None, str], str] = {}
    for c in calls:
        if (
            c["verb"] in ("GET", "WAIT")
            or c.get("status") != "ok"
            or c["path"].endswith("/eviction")
        ):
            continue
        parts = [x for x in c["path"].split("/") if x]
        api = parts[1] if parts[0] == "api" else f"{parts[1]}/{parts[2]}"
        rest = parts[2:] if parts[0] == "api" else parts[3:]
        ns = None
        if rest[:1] == ["namespaces"] and len(rest) >= 3:  # a collection POST has 3
            ns, rest = rest[1], rest[2:]
        if len(rest) < 2 or rest[0] not in _KINDS:
            name = ((c.get("body") or {}).get("metadata") or {}).get("name")
            if not (rest and rest[0] in _KINDS and name):
                continue
            rest = [rest[0], name]
        seen.setdefault((rest[0], ns, rest[1]), api)
    reason, verb = _EVENT_REASONS.get(action.decision, ("Changed", "Update"))
    out = []
    for k, ((plural, ns, name), api) in enumerate(sorted(seen.items())):
        note = f"{action.reason} -> {outcome}: {message}"
        digest = hashlib.sha1(f"{when}|{plural}|{name}|{k}".encode()).hexdigest()[:10]
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{digest}", "namespace": ns or "default"},
            "eventTime": when,
            "reportingController": EVENT_CONTROLLER,
            "reportingInstance": instance[:128],
            "action": verb,
            "reason": reason,
            "type": "Warning" if outcome == "failed" else "Normal",
            "note": note if len(note) <= 1024 else note[:1021] + "...",
            "regarding": {
                "apiVersion": api,
                "kind": _KINDS[plural],
                "name": name,
                **({"namespace": ns} if ns else {}),
            },
        }
        out.append((f"/apis/events.k8s.io/v1/namespaces/{ns or 'default'}/events", body))
    return out


class KubeProvider:
    """The cycle's :class:`CapacityProvider` for pools with a Kubernetes provider kind.

    Pools whose provider kind is ``recording`` are handed to a
    :class:`RecordingProvider` over their configured ``current_nodes``. With
    ``dry_run``, waits (drain, MIG manager) are listed instead of awaited and
    outcomes read ``recorded``; writes go wherever the session's transport sends
    them (an in-memory cluster, or a real one with ``dryRun=All``).
    """

    def __init__(
        self,
        config: Config,
        session: Session,
        dry_run: bool = False,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        wall: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self.wall = wall
        self.instance = os.environ.get("HOSTNAME") or socket.gethostname() or "tiercast"
        self.config = config
        self.kube = config.kubernetes
        self.session = session
        self.dry_run = dry_run
        self.clock = clock
        self.sleep = sleep
        self.pools: dict[str, PoolProvider] = {}
        recorded: dict[str, int] = {}
        for pool in config.pools:
            handler = pool_provider(pool, self.kube)
            if handler is None:
                recorded[pool.name] = (
                    pool.current_nodes if pool.current_nodes is not None else pool.min_nodes
                )
            else:
                self.pools[pool.name] = handler
        self.recording = RecordingProvider(recorded) if recorded else None
        self.changes = 0
        self.halted: str | None = None

    # ---- CapacityProvider -------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        return read_nodes(self.session, self.config)

    def inventory(self) -> dict[str, int]:
        """Nodes per pool: counted from node labels (Kubernetes pools), configured otherwise."""
        self.session.calls = []
        counts = nodes_per_pool(self.nodes(), self.config)
        out = {name: counts[name] for name in self.pools}
        if self.recording is not None:
            out.update(self.recording.inventory())
        return out

    def apply(self, action: Action) -> ActionResult:
        self.session.calls = []
        if self.recording is not None and action.pool not in self.pools:
            return self.recording.apply(action)
        if self.halted:
            return ActionResult(action, "skipped", f"not attempted: {self.halted}")
        if self.changes >= self.kube.max_changes_per_cycle:
            return ActionResult(
                action,
                "skipped",
                f"per-cycle change cap ({self.kube.max_changes_per_cycle}) reached; next cycle",
            )
        done = "recorded" if self.dry_run else "applied"
        try:
            if action.kind == "mig-layout":
                ok, message = self._relabel(action)
            elif action.kind == "nodes":
                scaled = self.pools[action.pool].scale(self.session, action, self.nodes)
                ok, message = scaled.outcome != "failed", scaled.message
                if scaled.outcome == "accepted" and not self.dry_run:
                    done = "accepted"
            else:
                return ActionResult(
                    action,
                    "skipped",
                    f"action kind {action.kind!r} is not one this provider applies",
                )
        except KubeApiError as exc:
            self.halted = f"an earlier action failed ({exc})"
            if self.session.writes():
                self.changes += 1
            return ActionResult(
                action,
                "failed",
                f"{exc}; the rest of this cycle is skipped",
                list(self.session.calls),
            )
        if self.session.writes():
            self.changes += 1
        outcome = done if ok else "failed"
        self._events(action, outcome, message)
        return ActionResult(action, outcome, message, list(self.session.calls))

    def _events(self, action: Action, outcome: str, message: str) -> None:
        """Record the change on each object it touched; a refused Event never fails the action."""
        if self.dry_run or not self.kube.events:
            return
        when = self.wall().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        for path, body in change_events(
            action, list(self.session.calls), outcome, message, when, self.instance
        ):
            try:
                self.session.request("POST", path, body)
            except KubeApiError as exc:
                log.warning("event on %s not recorded: %s", body["regarding"]["name"], exc)

    # ---- the GPU Operator's MIG configuration ---------------------------------------------

    def _policy(self) -> dict[str, Any] | None:
        try:
            return self.session.get(f"{CLUSTER_POLICIES}/{self.kube.cluster_policy}")
        except KubeApiError as exc:
            if exc.not_found:
                return None
            raise

    def _config_map_path(self, policy: dict[str, Any]) -> str:
        spec = policy.get("spec") or {}
        name = ((spec.get("migManager") or {}).get("config") or {}).get("name") or OPERATOR_CONFIG
        return f"/api/v1/namespaces/{self.kube.gpu_operator_namespace}/configmaps/{name}"

    def _read_mig_parted(self, path: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The ConfigMap at ``path`` and its parsed ``config.yaml``."""
        cm = self.session.get(path)
        text = (cm.get("data") or {}).get(MIG_PARTED_KEY)
        if text is None:
            raise MigConfigRefused(f"ConfigMap {path.rsplit('/', 1)[-1]} has no {MIG_PARTED_KEY}")
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise MigConfigRefused(f"ConfigMap {path.rsplit('/', 1)[-1]}: {exc}") from exc
        if not isinstance(data.get("mig-configs"), dict):
            raise MigConfigRefused(f"ConfigMap {path.rsplit('/', 1)[-1]}: no mig-configs mapping")
        return cm, data

    def mig_inventory(
        self,
    ) -> tuple[dict[str, list[MigNodeState]] | None, dict[str, Any] | None]:
        """The MIG-managed pools' nodes and the mig-parted entries the MIG manager can apply.

        ``(None, None)`` when there are no MIG pools or no ClusterPolicy (no GPU Operator:
        the planner then reads the config's ``mig_layouts``).
        """
        if not any(p.mig_layouts is not None for p in self.config.pools):
            return None, None
        policy = self._policy()
        if policy is None:
            return None, None
        strategy = ((policy.get("spec") or {}).get("mig") or {}).get("strategy")
        try:
            _, data = self._read_mig_parted(self._config_map_path(policy))
            configs: dict[str, Any] = data["mig-configs"]
        except (KubeApiError, MigConfigRefused) as exc:
            log.warning("mig-parted config unreadable (%s): MIG nodes are held", exc)
            configs = {}
        states = mig_node_states(self.nodes(), self.config, configs, strategy)
        # Pools this provider does not act on (``recording``) keep their configured layouts.
        return {k: v for k, v in states.items() if k in self.pools}, configs

    def _ensure_mig_config(self, want: str, entry: Any, needs_mixed: bool = False) -> str | None:
        """Make ``want`` applicable by the MIG manager; returns the ConfigMap path if written.

        The entry is added to the mig-parted ConfigMap the ClusterPolicy names, keeping
        every entry already there; an entry of the same name is never replaced. Raises
        :class:`MigConfigRefused` when the change cannot be made to work.
        """
        policy = self._policy()
        if policy is None:
            raise MigConfigRefused(
                f"no ClusterPolicy {self.kube.cluster_policy} (is NVIDIA's GPU Operator installed?)"
            )
        strategy = ((policy.get("spec") or {}).get("mig") or {}).get("strategy")
        if needs_mixed and strategy != "mixed":
            raise MigConfigRefused(
                f"{want} mixes MIG profiles, which needs the ClusterPolicy's "
                f"mig.strategy=mixed (it is {strategy or 'unset, i.e. single'})"
            )
        path = self._config_map_path(policy)
        name = path.rsplit("/", 1)[-1]
        for _ in range(self.kube.conflict_retries + 1):
            cm, data = self._read_mig_parted(path)
            configs = data["mig-configs"]
            if want in configs:
                if entry is not None and configs[want] != entry:
                    raise MigConfigRefused(
                        f"ConfigMap {name} already has a different {want}; tiercast never replaces one"
                    )
                return None
            if entry is None:
                raise MigConfigRefused(
                    f"{want} is not in ConfigMap {name} and no entry was planned"
                )
            if name == OPERATOR_CONFIG:
                raise MigConfigRefused(
                    f"the ClusterPolicy names the operator's own {OPERATOR_CONFIG}, which the operator "
                    f"rewrites; point migManager.config.name at a ConfigMap you own (README) to add {want}"
                )
            merged = {**data, "mig-configs": {**configs, want: entry}}
            body = {
                "metadata": {"resourceVersion": cm["metadata"]["resourceVersion"]},
                "data": {MIG_PARTED_KEY: yaml.safe_dump(merged, sort_keys=False)},
            }
            try:
                self.session.request("PATCH", path, body, MERGE_PATCH)
            except KubeApiError as exc:
                if exc.conflict:
                    continue
                raise
            return path
        raise _conflicts(path, self.kube.conflict_retries)

    def _prune_mig_configs(self) -> str:
        """Drop tiercast's own mig-parted entries that no node's label names any more.

        Only ``tiercast-`` entries go, and only when no node in the cluster (in a pool or
        not) carries that ``nvidia.com/mig.config``; the operator's entries and the
        operator's own ConfigMap are never touched. Returns a note for the action's
        message; a failure here is logged and never fails the relayout that just worked.
        """
        try:
            policy = self._policy()
            if policy is None:
                return ""
            path = self._config_map_path(policy)
            if path.rsplit("/", 1)[-1] == OPERATOR_CONFIG:
                return ""

            def attempt() -> str:
                listing = self.session.get(NODES_PATH)
                named = {
                    (n.get("metadata", {}).get("labels") or {}).get(MIG_CONFIG)
                    for n in listing.get("items", [])
                }
                cm, data = self._read_mig_parted(path)
                configs = data["mig-configs"]
                unused = sorted(k for k in configs if k.startswith(OWN_PREFIX) and k not in named)
                if not unused:
                    return ""
                kept = {k: v for k, v in configs.items() if k not in unused}
                body = {
                    "metadata": {"resourceVersion": cm["metadata"]["resourceVersion"]},
                    "data": {
                        MIG_PARTED_KEY: yaml.safe_dump(
                            {**data, "mig-configs": kept}, sort_keys=False
                        )
                    },
                }
                self.session.request("PATCH", path, body, MERGE_PATCH)
                return (
                    f"; removed unused {', '.join(unused)} from ConfigMap {path.rsplit('/', 1)[-1]}"
                )

            return _until_no_conflict(path, self.kube.conflict_retries, attempt)
        except (KubeApiError, MigConfigRefused) as exc:
            log.warning("unused tiercast mig-parted entries not removed: %s", exc)
            return f"; unused tiercast entries not removed ({exc})"

    # ---- MIG relabel -----------------------------------------------------------------

    def _relabel(self, action: Action) -> tuple[bool, str]:
        """Cordon, drain, relabel, wait for the MIG manager, uncordon. Returns (ok, message)."""
        details = action.details
        # The MIG planner writes the config name as ``layout`` and the label to set; every
        # spelling is accepted so the two sides can evolve independently.
        want = (
            details.get("mig_config")
            or (details.get("label") or {}).get(MIG_CONFIG)
            or details.get("layout")
        )
        name = details.get("node")
        if not name or not want:
            missing = ", ".join(k for k, v in (("node", name), ("mig_config", want)) if not v)
            return False, f"mig-layout action for pool {action.pool} lacks details {missing}"
        name, want = str(name), str(want)
        path = f"{NODES_PATH}/{name}"
        try:
            node = self.session.get(path)
        except KubeApiError as exc:
            if exc.not_found:
                if details.get("new_node"):
                    return True, f"node {name} is not provisioned yet; its layout waits for it"
                return False, f"node {name} not found; nothing changed"
            raise
        info = node_info(node, self.config, machine_owners(self.session, self.config))
        if info.pool != action.pool:
            return False, f"node {name} is in pool {info.pool}, not {action.pool}; nothing changed"
        pool = next(p for p in self.config.pools if p.name == action.pool)
        mismatch = product_mismatch(info, pool)
        if mismatch is not None:
            return False, f"{mismatch}; nothing changed"
        annotations = node.get("metadata", {}).get("annotations") or {}
        ours = annotations.get(CORDONED_BY) == "true"
        if info.mig_config == want and info.mig_state == "success":
            if ours:  # a previous run stopped between success and uncordon: finish it
                self._uncordon(path)
                return True, f"node {name} already at {MIG_CONFIG}={want}; uncordoned"
            return True, f"node {name} already at {MIG_CONFIG}={want}; no change"
        try:
            wrote = self._ensure_mig_config(
                want, details.get("mig_parted_entry"), bool(details.get("needs_mixed_strategy"))
            )
        except MigConfigRefused as exc:
            if ours:
                self._uncordon(path)
            return False, f"node {name}: {exc}; nothing changed"
        if wrote:
            # The MIG manager reads a mounted copy of the ConfigMap, which the kubelet
            # refreshes about once a minute: relabelling sooner would fail the change.
            if self.dry_run:
                self.session.note(
                    "WAIT",
                    wrote,
                    until="the kubelet refreshes mounted ConfigMaps",
                    timeout_s=self.kube.mig_config_sync_s,
                )
            else:
                self.sleep(self.kube.mig_config_sync_s)
        previous = info.mig_config
        cordoned = ours
        if not info.unschedulable:
            self.session.request(
                "PATCH",
                path,
                {
                    "spec": {"unschedulable": True},
                    "metadata": {"annotations": {CORDONED_BY: "true"}},
                },
                STRATEGIC_MERGE_PATCH,
            )
            cordoned = True
        relabelled = False
        try:
            blocked = self._drain(name)
            if blocked:
                if cordoned:
                    self._uncordon(path)
                return (
                    False,
                    f"drain of {name} aborted: {blocked}; {MIG_CONFIG} unchanged, node uncordoned",
                )
            # Dropping the state label in the same patch keeps a stale "success" from the
            # previous layout from being read as this change's result.
            self.session.request(
                "PATCH",
                path,
                {"metadata": {"labels": {MIG_CONFIG: want, MIG_STATE: None}}},
                MERGE_PATCH,
            )
            relabelled = True
            if self.dry_run:
                self.session.note(
                    "WAIT", path, until=f"{MIG_STATE}=success", timeout_s=self.kube.mig_timeout_s
                )
                state = "success"
            else:
                state = self._wait_for_state(path)
            if state == "success":
                if cordoned:
                    self._uncordon(path)
                done = f"node {name}: {MIG_CONFIG} {previous} -> {want} ({MIG_STATE}=success)"
                return True, done + self._prune_mig_configs()
            self._restore(path, previous)
            relabelled = False
            if cordoned:
                self._uncordon(path)
            return False, (
                f"node {name}: MIG manager reported {state} for {want}; "
                f"restored {MIG_CONFIG}={previous} and uncordoned"
            )
        except KubeApiError:
            # Best effort to leave the node as found; the error still fails the cycle.
            try:
                if relabelled:
                    self._restore(path, previous)
                if cordoned:
                    self._uncordon(path)
            except KubeApiError as undo:
                log.error("node %s left cordoned or relabelled: %s", name, undo)
            raise

    def _uncordon(self, path: str) -> None:
        self.session.request(
            "PATCH",
            path,
            {"spec": {"unschedulable": None}, "metadata": {"annotations": {CORDONED_BY: None}}},
            STRATEGIC_MERGE_PATCH,
        )

    def _restore(self, path: str, previous: str | None) -> None:
        self.session.request(
            "PATCH",
            path,
            {"metadata": {"labels": {MIG_CONFIG: previous, MIG_STATE: None}}},
            MERGE_PATCH,
        )

    def _evictable(self, name: str) -> list[dict[str, Any]]:
        pods = self.session.get("/api/v1/pods", {"fieldSelector": f"spec.nodeName={name}"})
        out = []
        for pod in pods.get("items", []):
            meta = pod.get("metadata", {})
            if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                continue
            if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
                continue  # static pods cannot be evicted
            if any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or []):
                continue  # the DaemonSet controller would put them straight back
            out.append(pod)
        return out

    def _drain(self, name: str) -> str | None:
        """Evict every evictable pod on the node; returns why it gave up, or None when drained."""
        deadline = self.clock() + self.kube.drain_timeout_s
        remaining = {
            (p["metadata"]["namespace"], p["metadata"]["name"]) for p in self._evictable(name)
        }
        blocked: dict[tuple[str, str], str] = {}
        while remaining:
            for ns, pod in sorted(remaining):
                body = {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": pod, "namespace": ns},
                }
                try:
                    # 429 here means a PodDisruptionBudget said no: this loop waits it out.
                    self.session.request(
                        "POST",
                        f"/api/v1/namespaces/{ns}/pods/{pod}/eviction",
                        body,
                        retry_statuses=RETRY_STATUSES - {429},
                    )
                except KubeApiError as exc:
                    if exc.status == 429:
                        blocked[(ns, pod)] = str(exc)
                        continue
                    if not exc.not_found:
                        raise
                remaining.discard((ns, pod))
                blocked.pop((ns, pod), None)
            if not remaining:
                break
            if self.clock() >= deadline:
                ns, pod = sorted(blocked or remaining)[0]
                return (
                    f"eviction of {ns}/{pod} refused for {self.kube.drain_timeout_s} s "
                    f"(PodDisruptionBudget)"
                )
            self.sleep(self.kube.poll_interval_s)
        if self.dry_run:
            return None
        while self._evictable(name):
            if self.clock() >= deadline:
                return f"pods on {name} still terminating after {self.kube.drain_timeout_s} s"
            self.sleep(self.kube.poll_interval_s)
        return None

    def _wait_for_state(self, path: str) -> str:
        deadline = self.clock() + self.kube.mig_timeout_s
        while True:
            state = (self.session.get(path).get("metadata", {}).get("labels") or {}).get(MIG_STATE)
            if state in ("success", "failed"):
                return state
            if self.clock() >= deadline:
                return (
                    f"no success within {self.kube.mig_timeout_s} s (last state {state or 'unset'})"
                )
            self.sleep(self.kube.poll_interval_s)

    # ---- dry-run without a cluster ------------------------------------------------

    def seed(self, store: MemoryTransport) -> None:
        """Fill ``store`` with the nodes and objects the config's ``current_nodes`` describe.

        MIG-managed pools' nodes carry the labels and devices their ``mig_layouts`` give,
        with a ClusterPolicy and mig-parted ConfigMap as a GPU Operator cluster has them.
        """
        configs: dict[str, Any] = {
            "all-disabled": [{"devices": "all", "mig-enabled": False}],
            "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
        }
        for pool in self.config.pools:
            handler = self.pools.get(pool.name)
            if handler is None:
                continue
            count = pool.current_nodes if pool.current_nodes is not None else pool.min_nodes
            selectors = pool_selectors(pool, self.kube.pool_label)
            try:
                labels = equality_terms(selectors[-1])
            except ValueError:
                labels = {self.kube.pool_label: pool.name}
            labels |= {
                self.kube.tier_label: pool.tier,
                GPU_PRODUCT: gpu_model(pool.gpu_model).name,
            }
            mig = configured_nodes(pool, count) if pool.mig_layouts is not None else []
            for i in range(count):
                node_labels = dict(labels)
                allocatable = {GPU_RESOURCE: str(pool.gpus_per_node)}
                if mig:
                    per = list(mig[i].current)
                    name, _ = resolve_config_name(pool.gpu_model, per, configs)
                    configs.setdefault(name, mig_parted_entry(per))
                    node_labels |= {
                        MIG_CONFIG: name,
                        MIG_STATE: "success",
                        MIG_STRATEGY: "mixed",
                        GPU_COUNT: str(pool.gpus_per_node),
                    }
                    allocatable = {GPU_RESOURCE: str(sum(lay.whole for lay in per))}
                    for lay in per:
                        for prof, n in lay.counts:
                            key = f"nvidia.com/mig-{prof}"
                            allocatable[key] = str(int(allocatable.get(key, "0")) + n)
                store.add(
                    f"{NODES_PATH}/{pool.name}-{i}",
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {"labels": node_labels},
                        "spec": {},
                        "status": {
                            "allocatable": allocatable,
                            "conditions": [{"type": "Ready", "status": "True"}],
                        },
                    },
                )
            handler.seed(store, count)
        if any(p.mig_layouts is not None for p in self.config.pools):
            # A GPU Operator as the deploy/ README sets it up: mixed strategy, and a
            # mig-parted ConfigMap tiercast may edit holding the nodes' current layouts.
            store.add(
                f"{CLUSTER_POLICIES}/{self.kube.cluster_policy}",
                {
                    "apiVersion": "nvidia.com/v1",
                    "kind": "ClusterPolicy",
                    "spec": {
                        "mig": {"strategy": "mixed"},
                        "migManager": {"enabled": True, "config": {"name": SEEDED_CONFIG}},
                    },
                },
            )
            store.add(
                f"/api/v1/namespaces/{self.kube.gpu_operator_namespace}/configmaps/{SEEDED_CONFIG}",
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "data": {
                        MIG_PARTED_KEY: yaml.safe_dump(
                            {"version": "v1", "mig-configs": configs}, sort_keys=False
                        )
                    },
                },
            )


def has_kubernetes_pools(config: Config) -> bool:
    return any(p.provider.kind in KUBERNETES_PROVIDER_KINDS for p in config.pools)


def build_provider(
    config: Config,
    dry_run: bool,
    server_dry_run: bool = False,
    kubeconfig: str | None = None,
    context: str | None = None,
    transport: Transport | None = None,
) -> KubeProvider:
    """The provider ``tiercast run`` uses for a config with Kubernetes pools.

    * live: the cluster from ``transport``, ``kubeconfig``/``context`` or the pod's
      service account;
    * ``dry_run`` with a cluster (flags given, or running in one): reads the
      cluster; with ``server_dry_run`` writes are sent with ``dryRun=All`` so the
      server validates them without persisting, else they stay in memory;
    * ``dry_run`` without a cluster: an in-memory cluster seeded from the config.
    """
    kube = config.kubernetes
    policy = RetryPolicy(kube.retries, kube.backoff_base_s, kube.backoff_max_s)
    have_cluster = (
        transport is not None
        or kubeconfig is not None
        or context is not None
        or bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    )
    if server_dry_run and not have_cluster:
        from forecaster.errors import BadInputError

        raise BadInputError("--server-dry-run needs a cluster: give --kubeconfig or --context")

    def cluster() -> Transport:
        return transport or connect(kubeconfig, context, policy, kube.request_timeout_s)

    if not dry_run:
        return KubeProvider(config, Session(cluster()))
    if server_dry_run:
        return KubeProvider(config, Session(cluster(), server_dry_run=True), dry_run=True)
    if have_cluster:
        return KubeProvider(config, Session(MemoryTransport(upstream=cluster())), dry_run=True)
    store = MemoryTransport()
    provider = KubeProvider(config, Session(store), dry_run=True)
    provider.seed(store)
    return provider
