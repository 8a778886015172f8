"""Inventory: the cluster's GPU nodes, grouped into the config's pools, and their MIG state.

A node belongs to the first pool (in config order) one of whose selectors
matches its labels. Each pool is tried with, in order: its provider's
``node_selector`` when given; otherwise the pool label
(``tiercast.io/pool=<pool>``, configurable as ``kubernetes.pool_label``) and, for
Karpenter, the label its controller puts on nodes (``karpenter.sh/nodepool``).
Cluster API puts ``cluster.x-k8s.io/deployment-name`` on Machines, not on Nodes, so a
Cluster API pool without a ``node_selector`` owns the nodes its MachineDeployment's
Machines name in ``status.nodeRef``. The tier is read from ``kubernetes.tier_label``
(``karpenter.sh/capacity-type`` by default) or ``tiercast.io/tier``. Nodes being
deleted are not counted.

:func:`mig_node_states` turns the nodes of MIG-managed pools into what the MIG
planner needs: the layout of each GPU, from the node's ``nvidia.com/mig.config``
label resolved through the mig-parted config the MIG manager reads (its
``device-filter`` groups read for the pool's GPU model) and checked against the MIG
devices the device plugin advertises; the MIG strategy (GPU feature discovery's
``nvidia.com/mig.strategy`` label, else the ClusterPolicy's); and why a node must
be left alone (a ``nvidia.com/gpu.product`` that is not the pool's GPU model, a
change ``pending`` or ``failed``, a label the config does not have, devices that
disagree with the label).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from forecaster.errors import BadInputError
from scaler.actuation.kube.transport import Session, selector_matches
from scaler.catalog.gpus import gpu_model, product_matches
from scaler.catalog.mig import Layout, parse_mig_parted_entry
from scaler.config import (
    ClusterApiProviderConfig,
    Config,
    KarpenterProviderConfig,
    PlaceholderProviderConfig,
    PoolConfig,
)
from scaler.planning.mig.state import MigNodeState

KARPENTER_NODEPOOL = "karpenter.sh/nodepool"
CAPI_DEPLOYMENT = "cluster.x-k8s.io/deployment-name"
TIER_LABEL_FALLBACK = "tiercast.io/tier"
GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
MIG_CONFIG = "nvidia.com/mig.config"
MIG_STATE = "nvidia.com/mig.config.state"
MIG_STRATEGY = "nvidia.com/mig.strategy"
GPU_COUNT = "nvidia.com/gpu.count"
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
    mig_strategy: str | None = None
    """GPU feature discovery's ``nvidia.com/mig.strategy`` (``single``, ``mixed``)."""
    gpu_count: int | None = None
    """Physical GPUs (``nvidia.com/gpu.count``); allocatable ``nvidia.com/gpu`` drops with MIG."""
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
    return selectors


def _int_quantity(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def node_info(
    obj: dict[str, Any], config: Config, owners: Mapping[str, str] | None = None
) -> NodeInfo:
    """One node; ``owners`` maps node names to the Cluster API pool whose Machine names them."""
    meta = obj.get("metadata", {})
    labels = dict(meta.get("labels") or {})
    allocatable = obj.get("status", {}).get("allocatable") or {}
    name = meta.get("name", "")
    pool = next(
        (
            p.name
            for p in config.pools
            if any(
                selector_matches(s, labels) for s in pool_selectors(p, config.kubernetes.pool_label)
            )
            or (owners or {}).get(name) == p.name
        ),
        None,
    )
    conditions = obj.get("status", {}).get("conditions") or []
    count = labels.get(GPU_COUNT)
    return NodeInfo(
        name=name,
        pool=pool,
        tier=labels.get(config.kubernetes.tier_label) or labels.get(TIER_LABEL_FALLBACK),
        gpu_product=labels.get(GPU_PRODUCT),
        gpus=_int_quantity(allocatable.get(GPU_RESOURCE, 0)),
        mig={
            k: _int_quantity(v) for k, v in allocatable.items() if k.startswith(MIG_RESOURCE_PREFIX)
        },
        mig_config=labels.get(MIG_CONFIG),
        mig_state=labels.get(MIG_STATE),
        mig_strategy=labels.get(MIG_STRATEGY),
        gpu_count=_int_quantity(count) if count is not None else None,
        unschedulable=bool(obj.get("spec", {}).get("unschedulable", False)),
        ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
        labels=labels,
    )


def machine_owners(session: Session, config: Config) -> dict[str, str]:
    """Node name -> Cluster API pool, through each MachineDeployment's Machines' ``status.nodeRef``.

    Pools with a ``node_selector`` are matched by it instead and not listed here.
    """
    out: dict[str, str] = {}
    for p in config.pools:
        s = p.provider
        if not isinstance(s, ClusterApiProviderConfig) or s.node_selector:
            continue
        machines = session.get(
            f"/apis/{s.api_version}/namespaces/{s.namespace}/machines",
            {"labelSelector": f"{CAPI_DEPLOYMENT}={s.machine_deployment}"},
        )
        for m in machines.get("items", []):
            if m.get("metadata", {}).get("deletionTimestamp"):
                continue
            ref = (m.get("status") or {}).get("nodeRef") or {}
            if ref.get("name"):
                out.setdefault(str(ref["name"]), p.name)
    return out


def read_nodes(session: Session, config: Config) -> list[NodeInfo]:
    """Every node not being deleted, with its pool (None when no pool's selector matches)."""
    owners = machine_owners(session, config)
    listing = session.get(NODES_PATH)
    return [
        node_info(obj, config, owners)
        for obj in listing.get("items", [])
        if not obj.get("metadata", {}).get("deletionTimestamp")
    ]


def nodes_per_pool(nodes: list[NodeInfo], config: Config) -> dict[str, int]:
    counts = Counter(n.pool for n in nodes if n.pool is not None)
    return {p.name: counts.get(p.name, 0) for p in config.pools}


def _advertised(layouts: list[Layout]) -> dict[str, int]:
    out: dict[str, int] = {}
    for lay in layouts:
        for p, n in lay.counts:
            out[f"{MIG_RESOURCE_PREFIX}{p}"] = out.get(f"{MIG_RESOURCE_PREFIX}{p}", 0) + n
    return out


def product_mismatch(node: NodeInfo, pool: PoolConfig) -> str | None:
    """One line when the node's ``nvidia.com/gpu.product`` is not the pool's GPU model."""
    if node.gpu_product is None or product_matches(pool.gpu_model, node.gpu_product):
        return None
    return (
        f"node {node.name}: {GPU_PRODUCT}={node.gpu_product} is not pool {pool.name}'s "
        f"{gpu_model(pool.gpu_model).name}; fix the pool's gpu_model or its node selector"
    )


def mig_node_state(
    node: NodeInfo, pool: PoolConfig, mig_configs: Mapping[str, Any], strategy: str | None
) -> MigNodeState:
    """What the MIG planner needs of one node: per-GPU layouts, strategy, and any reason to hold."""
    gpus = node.gpu_count or pool.gpus_per_node
    strategy = node.mig_strategy or strategy
    whole = (Layout(whole=True),) * gpus

    def held(why: str, current: tuple[Layout, ...] = whole) -> MigNodeState:
        return MigNodeState(node.name, current, node.mig_config, strategy, why)

    mismatch = product_mismatch(node, pool)
    if mismatch is not None:
        # Another model's MIG geometry: its layouts cannot be read or planned as this one's.
        return held(mismatch)
    if node.mig_state in ("pending", "rebooting"):
        return held(f"{MIG_STATE}={node.mig_state}: a MIG change is in progress")
    if node.mig_state == "failed":
        return held(f"{MIG_STATE}=failed: the last MIG change failed; fix it before a new one")
    if node.mig_config is None:
        if node.mig:
            return held(f"MIG devices {sorted(node.mig)} but no {MIG_CONFIG} label")
        return MigNodeState(node.name, whole, None, strategy)
    entry = mig_configs.get(node.mig_config)
    if entry is None:
        return held(f"{MIG_CONFIG}={node.mig_config} is not in the mig-parted config")
    try:
        per = parse_mig_parted_entry(pool.gpu_model, entry, gpus, node.mig_config)
    except BadInputError as exc:
        return held(str(exc))
    if len(per) != gpus:
        return held(f"{node.mig_config} does not say what {gpus - len(per)} of its GPUs hold")
    current = tuple(per[i] for i in range(gpus))
    # The device plugin advertises per profile only with the mixed strategy.
    if strategy == "mixed" and node.mig != _advertised(list(current)):
        return held(
            f"allocatable MIG devices {dict(sorted(node.mig.items()))} disagree with "
            f"{node.mig_config} (device plugin not restarted yet?)",
            current,
        )
    return MigNodeState(node.name, current, node.mig_config, strategy)


def mig_node_states(
    nodes: list[NodeInfo],
    config: Config,
    mig_configs: Mapping[str, Any],
    strategy: str | None,
) -> dict[str, list[MigNodeState]]:
    """The nodes of every MIG-managed pool (``mig_layouts`` set), in name order."""
    out: dict[str, list[MigNodeState]] = {}
    for pool in config.pools:
        if pool.mig_layouts is None:
            continue
        out[pool.name] = [
            mig_node_state(n, pool, mig_configs, strategy)
            for n in sorted(nodes, key=lambda n: n.name)
            if n.pool == pool.name
        ]
    return out
