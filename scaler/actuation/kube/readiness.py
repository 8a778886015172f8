"""Lead times observed in the cluster: how long each pool's nodes took from being asked for
to serving, read from the API objects tiercast already reads, for ``lead_time_s: auto``.

One observation per object, by pool mechanism:

* Karpenter pools (``karpenter``): each ``karpenter.sh/v1`` NodeClaim of the NodePool
  (label ``karpenter.sh/nodepool``), from its ``Launched`` condition's
  ``lastTransitionTime`` (the cloud provider created the instance) to its ``Initialized``
  condition's (the Node is Ready, its startup taints are gone and its extended resources,
  ``nvidia.com/gpu`` included, are registered). Condition types as in
  kubernetes-sigs/karpenter ``pkg/apis/v1/nodeclaim_status.go`` (``ConditionTypeLaunched``,
  ``ConditionTypeInitialized``; checked at commit 2266468, 2026-08-20), set by
  ``pkg/controllers/nodeclaim/lifecycle/launch.go`` and ``initialization.go``.
* Cluster API pools (``cluster-api``): each Machine of the MachineDeployment (label
  ``cluster.x-k8s.io/deployment-name``), from ``metadata.creationTimestamp`` to the
  Node serving; see :func:`machine_start` for which condition dates that.
* Pools that add nodes through any autoscaler (``placeholder``, ``capacity-buffer``):
  each Node of the pool (the inventory's selectors), from ``metadata.creationTimestamp``
  to the ``lastTransitionTime`` of its ``Ready`` condition with status ``True``.

``recording`` pools have no cluster objects and give none. A start that took longer than
:data:`MAX_START_S` (the longest ``lead_time_s`` a config may give) is not one: the object
became ready again after a failure long after it started. An API error on one pool's
objects is logged and that pool gives no observation this cycle; it never fails the cycle.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scaler.actuation.kube.inventory import (
    CAPI_DEPLOYMENT,
    KARPENTER_NODEPOOL,
    NODES_PATH,
    capi_api_version,
    machine_owners,
    node_info,
)
from scaler.actuation.kube.transport import KubeApiError, Session
from scaler.config import (
    ClusterApiProviderConfig,
    KarpenterProviderConfig,
    KubernetesConfig,
    PoolConfig,
)
from scaler.records import LeadTimeObservation

log = logging.getLogger(__name__)

MAX_START_S = 86400
"""Longest node start counted, in seconds (the bound of ``lead_time_s``)."""

NODE_CLAIM_LAUNCHED = "Launched"
NODE_CLAIM_INITIALIZED = "Initialized"
MACHINE_NODE_HEALTHY = "NodeHealthy"
MACHINE_READY = "Ready"
NODE_READY = "Ready"


def parse_time(value: Any) -> datetime.datetime | None:
    """An API timestamp (RFC 3339, ``2026-11-30T00:20:00Z``) in UTC, or None when unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        t = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.UTC)
    return t.astimezone(datetime.UTC)


def _iso(t: datetime.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def condition_time(
    conditions: Iterable[Any], kind: str, status: str = "True"
) -> datetime.datetime | None:
    """``lastTransitionTime`` of the condition of type ``kind`` when its status is ``status``."""
    for c in conditions:
        if isinstance(c, dict) and c.get("type") == kind:
            return parse_time(c.get("lastTransitionTime")) if c.get("status") == status else None
    return None


def _observation(
    pool: str,
    kind: str,
    obj: Mapping[str, Any],
    started: datetime.datetime | None,
    ready: datetime.datetime | None,
) -> LeadTimeObservation | None:
    name = (obj.get("metadata") or {}).get("name")
    if not name or started is None or ready is None:
        return None
    seconds = (ready - started).total_seconds()
    if not 0 <= seconds <= MAX_START_S:
        return None
    return LeadTimeObservation(pool, f"{kind}/{name}", _iso(started), _iso(ready), seconds)


def _conditions(obj: Mapping[str, Any], *path: str) -> list[Any]:
    value: Any = obj.get("status") or {}
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, list) else []


def node_start(obj: Mapping[str, Any], pool: str) -> LeadTimeObservation | None:
    """A Node: ``metadata.creationTimestamp`` to its ``Ready`` condition turning ``True``."""
    started = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
    ready = condition_time(_conditions(obj, "conditions"), NODE_READY)
    return _observation(pool, "Node", obj, started, ready)


def node_claim_start(obj: Mapping[str, Any], pool: str) -> LeadTimeObservation | None:
    """A Karpenter NodeClaim: its ``Launched`` condition to its ``Initialized`` condition
    (both ``True``; kubernetes-sigs/karpenter ``pkg/apis/v1/nodeclaim_status.go``)."""
    conditions = _conditions(obj, "conditions")
    launched = condition_time(conditions, NODE_CLAIM_LAUNCHED)
    initialized = condition_time(conditions, NODE_CLAIM_INITIALIZED)
    return _observation(pool, "NodeClaim", obj, launched, initialized)


def machine_start(obj: Mapping[str, Any], pool: str) -> LeadTimeObservation | None:
    """A Cluster API Machine: ``metadata.creationTimestamp`` to its Node serving.

    ``status.nodeRef`` carries no time of its own, so the moment is read from a
    condition, and only once ``nodeRef`` is set: ``NodeHealthy`` when present, else
    ``Ready``, each at its ``lastTransitionTime`` with status ``True``. ``NodeHealthy``
    first because the Machine controller keeps it ``False`` (``WaitingForNodeRef``,
    ``NodeProvisioning``) until ``nodeRef`` is set and marks it ``True`` only when the
    Node's own ``Ready`` is ``True`` (``core/reconcilers/machine/machine_controller_noderef.go``),
    so its transition is the Node becoming usable; ``Ready`` summarizes the bootstrap,
    infrastructure and node conditions (and, in the v1beta2 conditions, health checks and
    readiness gates), so it can move for reasons other than the start and serves only
    where ``NodeHealthy`` is missing. Conditions are read from ``status.conditions``,
    then ``status.v1beta2.conditions`` (a ``v1beta1`` Machine), then
    ``status.deprecated.v1beta1.conditions`` (a ``v1beta2`` Machine). Field and condition
    names as in kubernetes-sigs/cluster-api ``api/core/v1beta1/machine_types.go``
    (``MachineStatus.NodeRef``, ``Conditions``, ``V1Beta2``) and
    ``api/core/v1beta1/condition_consts.go`` (``ReadyCondition``,
    ``MachineNodeHealthyCondition``), formerly ``api/v1beta1/``; checked at commit
    ae7ff04, 2026-08-21.
    """
    if not ((obj.get("status") or {}).get("nodeRef") or {}).get("name"):
        return None
    started = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
    lists = [
        _conditions(obj, "conditions"),
        _conditions(obj, "v1beta2", "conditions"),
        _conditions(obj, "deprecated", "v1beta1", "conditions"),
    ]
    for kind in (MACHINE_NODE_HEALTHY, MACHINE_READY):
        present = [
            c for c in lists if any(isinstance(x, dict) and x.get("type") == kind for x in c)
        ]
        if present:
            return _observation(pool, "Machine", obj, started, condition_time(present[0], kind))
    return None


def _pool_objects(session: Session, pool: PoolConfig) -> tuple[list[dict[str, Any]], str] | None:
    """The objects that date the starts of a Karpenter or Cluster API pool, and their kind."""
    s = pool.provider
    if isinstance(s, KarpenterProviderConfig):
        path = f"/apis/{s.api_version}/nodeclaims"
        listing = session.get(path, {"labelSelector": f"{KARPENTER_NODEPOOL}={s.node_pool}"})
        return list(listing.get("items", [])), "NodeClaim"
    if isinstance(s, ClusterApiProviderConfig):
        path = f"/apis/{capi_api_version(session, s)}/namespaces/{s.namespace}/machines"
        listing = session.get(path, {"labelSelector": f"{CAPI_DEPLOYMENT}={s.machine_deployment}"})
        return list(listing.get("items", [])), "Machine"
    return None


def observe_lead_times(
    session: Session,
    pools: Sequence[PoolConfig],
    kube: KubernetesConfig,
    names: Sequence[str] | None = None,
) -> list[LeadTimeObservation]:
    """Every completed node start the cluster shows for the ``pools`` named in ``names``
    (default: the ``auto`` ones); nodes are told to pools by ``kube``'s pool label."""
    wanted = [
        p
        for p in pools
        if (p.name in names if names is not None else p.lead_time_auto)
        and p.provider.kind != "recording"
    ]
    out: list[LeadTimeObservation] = []
    by_nodes: list[PoolConfig] = []
    for pool in wanted:
        try:
            found = _pool_objects(session, pool)
        except KubeApiError as exc:
            log.warning(
                "pool %s: node starts not readable (%s); lead time from records", pool.name, exc
            )
            continue
        if found is None:
            by_nodes.append(pool)
            continue
        items, kind = found
        start = node_claim_start if kind == "NodeClaim" else machine_start
        timed = (start(obj, pool.name) for obj in items if isinstance(obj, dict))
        out.extend(o for o in timed if o is not None)
    if by_nodes:
        out.extend(_node_starts(session, pools, kube, {p.name for p in by_nodes}))
    return out


def _node_starts(
    session: Session, pools: Sequence[PoolConfig], kube: KubernetesConfig, names: set[str]
) -> list[LeadTimeObservation]:
    """Starts of the Nodes of the pools named in ``names``, placed in pools as the inventory
    places them."""
    try:
        owners = machine_owners(session, pools)
        listing = session.get(NODES_PATH)
    except KubeApiError as exc:
        log.warning("nodes not readable for lead times (%s); lead times from records", exc)
        return []
    out = []
    for obj in listing.get("items", []):
        if not isinstance(obj, dict):
            continue
        pool = node_info(obj, pools, kube, owners).pool
        if pool is not None and pool in names:
            observed = node_start(obj, pool)
            if observed is not None:
                out.append(observed)
    return out
