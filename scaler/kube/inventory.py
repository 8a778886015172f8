"""Inventory: the cluster's GPU nodes, grouped into the config's pools by their labels.

A node belongs to the first pool (in config order) one of whose selectors
matches its labels. Each pool is tried with, in order: its provider's
``node_selector`` when given; otherwise the pool label
(``tiercast.io/pool=<pool>``, configurable as ``kubernetes.pool_label``) and the
label its provider's controller puts on nodes (``karpenter.sh/nodepool=<node_pool>``
for Karpenter, ``cluster.x-k8s.io/deployment-name=<machine_deployment>`` for
Cluster API). The tier is read from ``kubernetes.tier_label``
(``karpenter.sh/capacity-type`` by default) or ``tiercast.io/tier``. Nodes being
deleted are not counted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from scaler.config import (
    ClusterApiProviderConfig,
    Config,
    KarpenterProviderConfig,
    PlaceholderProviderConfig,
    PoolConfig,
)
from scaler.kube.transport import Session, selector_matches

KARPENTER_NODEPOOL = "karpenter.sh/nodepool"
CAPI_DEPLOYMENT = "cluster.x-k8s.io/deployment-name"
TIER_LABEL_FALLBACK = "tiercast.io/tier"
GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
MIG_CONFIG = "nvidia.com/mig.config"
MIG_STATE = "nvidia.com/mig.config.state"
NODES_PATH = "/api/v1/nodes"


@dataclass(frozen=True)
class NodeInfo:
    """What the planner and the MIG relabel need to know about one GPU node."""

    name: str
    pool: str | None
    tier: str | None
    gpu_product: str | None
    gpus: int
    """Allocatable ``nvidia.com/gpu``."""
    mig: dict[str, int] = field(default_factory=dict)
    """Allocatable MIG devices by resource (``nvidia.com/mig-1g.10gb``: 7)."""
    mig_config: str | None = None
    mig_state: str | None = None
    unschedulable: bool = False
    ready: bool = False
    labels: dict[str, str] = field(default_factory=dict)


def pool_selectors(pool: PoolConfig, pool_label: str) -> list[str]:
    """The label selectors that place a node in ``pool``, most specific first."""
    p = pool.provider
    if (
        isinstance(
            p, ClusterApiProviderConfig | KarpenterProviderConfig | PlaceholderProviderConfig
        )
        and p.node_selector
    ):
        return [p.node_selector]
    selectors = [f"{pool_label}={pool.name}"]
    if isinstance(p, KarpenterProviderConfig):
        selectors.append(f"{KARPENTER_NODEPOOL}={p.node_pool}")
    elif isinstance(p, ClusterApiProviderConfig):
        selectors.append(f"{CAPI_DEPLOYMENT}={p.machine_deployment}")
    return selectors


def _int_quantity(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def node_info(obj: dict[str, Any], config: Config) -> NodeInfo:
    meta = obj.get("metadata", {})
    labels = dict(meta.get("labels") or {})
    allocatable = obj.get("status", {}).get("allocatable") or {}
    pool = next(
        (
            p.name
            for p in config.pools
            if any(
                selector_matches(s, labels) for s in pool_selectors(p, config.kubernetes.pool_label)
            )
        ),
        None,
    )
    conditions = obj.get("status", {}).get("conditions") or []
    return NodeInfo(
        name=meta.get("name", ""),
        pool=pool,
        tier=labels.get(config.kubernetes.tier_label) or labels.get(TIER_LABEL_FALLBACK),
        gpu_product=labels.get(GPU_PRODUCT),
        gpus=_int_quantity(allocatable.get(GPU_RESOURCE, 0)),
        mig={
            k: _int_quantity(v) for k, v in allocatable.items() if k.startswith(MIG_RESOURCE_PREFIX)
        },
        mig_config=labels.get(MIG_CONFIG),
        mig_state=labels.get(MIG_STATE),
        unschedulable=bool(obj.get("spec", {}).get("unschedulable", False)),
        ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
        labels=labels,
    )


def read_nodes(session: Session, config: Config) -> list[NodeInfo]:
    """Every node not being deleted, with its pool (None when no pool's selector matches)."""
    listing = session.get(NODES_PATH)
    return [
        node_info(obj, config)
        for obj in listing.get("items", [])
        if not obj.get("metadata", {}).get("deletionTimestamp")
    ]


def nodes_per_pool(nodes: list[NodeInfo], config: Config) -> dict[str, int]:
    counts = Counter(n.pool for n in nodes if n.pool is not None)
    return {p.name: counts.get(p.name, 0) for p in config.pools}
