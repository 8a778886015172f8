"""The in-memory cluster of the offline dry-run, seeded from the config's ``current_nodes``.

Follows what a cluster shows the providers: core ``v1`` Nodes with the pool, tier and
GPU feature discovery labels, each pool mechanism's own objects
(:meth:`scaler.actuation.kube.pool.PoolProvider.seed`), and for MIG-managed pools the
GPU Operator's ``nvidia.com/v1`` ClusterPolicy and a mig-parted ConfigMap holding the
nodes' current layouts; for time-sliced or MPS workloads the device plugin's config
ConfigMap that ClusterPolicy names.
"""

from __future__ import annotations

from typing import Any

import yaml

from scaler.actuation.kube.device_plugin import SEEDED_DEVICE_PLUGIN_CONFIG
from scaler.actuation.kube.inventory import (
    GPU_COUNT,
    GPU_PRODUCT,
    GPU_RESOURCE,
    MIG_CONFIG,
    MIG_STATE,
    MIG_STRATEGY,
    NODES_PATH,
    pool_selectors,
)
from scaler.actuation.kube.mig_parted import CLUSTER_POLICIES, MIG_PARTED_KEY, SEEDED_CONFIG
from scaler.actuation.kube.pool import PoolProvider
from scaler.actuation.kube.transport import MemoryTransport, equality_terms
from scaler.catalog.gpus import gpu_model
from scaler.catalog.mig import Layout, mig_parted_entry, mig_resource
from scaler.config import Config, KubernetesConfig, PoolConfig
from scaler.planning.mig.state import configured_nodes, resolve_config_name
from scaler.planning.sharing_actions import has_shared_workloads


def seed(store: MemoryTransport, config: Config, pools: dict[str, PoolProvider]) -> None:
    """Fill ``store`` with the nodes and objects the config's ``current_nodes`` describe.

    MIG-managed pools' nodes carry the labels and devices their ``mig_layouts`` give,
    with a ClusterPolicy and mig-parted ConfigMap as a GPU Operator cluster has them.
    """
    kube = config.kubernetes
    configs: dict[str, Any] = {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
    }
    for pool in config.pools:
        handler = pools.get(pool.name)
        if handler is None:
            continue
        count = pool.current_nodes if pool.current_nodes is not None else pool.min_nodes
        _seed_nodes(store, pool, count, kube, configs)
        handler.seed(store, count)
    mig = any(p.mig_layouts is not None for p in config.pools)
    shared = has_shared_workloads(config.fleet)
    if mig or shared:
        _seed_gpu_operator(store, kube, configs if mig else None, shared)


def _seed_nodes(
    store: MemoryTransport,
    pool: PoolConfig,
    count: int,
    kube: KubernetesConfig,
    configs: dict[str, Any],
) -> None:
    """The pool's ``count`` nodes; a MIG pool's layouts are added to ``configs`` as met."""
    labels = _pool_labels(pool, kube)
    mig = configured_nodes(pool, count) if pool.mig_layouts is not None else []
    for i in range(count):
        node_labels = dict(labels)
        allocatable = {GPU_RESOURCE: str(pool.gpus_per_node)}
        if mig:
            mig_labels, allocatable = _mig_node(pool, list(mig[i].current), configs)
            node_labels |= mig_labels
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


def _pool_labels(pool: PoolConfig, kube: KubernetesConfig) -> dict[str, str]:
    """Labels every node of the pool carries: its selector's (or the pool label), tier, GPU."""
    selectors = pool_selectors(pool, kube.pool_label)
    try:
        labels = equality_terms(selectors[-1])
    except ValueError:
        labels = {kube.pool_label: pool.name}
    labels |= {
        kube.tier_label: pool.tier,
        GPU_PRODUCT: gpu_model(pool.gpu_model).name,
    }
    return labels


def _mig_node(
    pool: PoolConfig, per: list[Layout], configs: dict[str, Any]
) -> tuple[dict[str, str], dict[str, str]]:
    """A MIG node's labels as the MIG manager leaves them, and its allocatable devices."""
    name, _ = resolve_config_name(pool.gpu_model, per, configs)
    configs.setdefault(name, mig_parted_entry(per))
    labels = {
        MIG_CONFIG: name,
        MIG_STATE: "success",
        MIG_STRATEGY: "mixed",
        GPU_COUNT: str(pool.gpus_per_node),
    }
    allocatable = {GPU_RESOURCE: str(sum(lay.whole for lay in per))}
    for lay in per:
        for prof, n in lay.counts:
            # The device plugin's name: '+' replaced by '.' (k8s-device-plugin internal/rm/rm.go).
            key = mig_resource(prof)
            allocatable[key] = str(int(allocatable.get(key, "0")) + n)
    return labels, allocatable


def _seed_gpu_operator(
    store: MemoryTransport,
    kube: KubernetesConfig,
    configs: dict[str, Any] | None,
    shared: bool,
) -> None:
    """A GPU Operator as the deploy/ README sets it up.

    With MIG pools (``configs``: the nodes' current layouts): the mixed strategy and a
    mig-parted ConfigMap tiercast may edit; without, the operator's default strategy
    (``single``). With time-sliced or MPS workloads (``shared``): a device plugin config
    ConfigMap the ClusterPolicy's ``devicePlugin.config.name`` names, empty at first (the
    nodes run the default config), so that the dry-run shows the config and labels the
    sharing plan would write.
    """
    spec: dict[str, Any] = {"mig": {"strategy": "mixed" if configs is not None else "single"}}
    if configs is not None:
        spec["migManager"] = {"enabled": True, "config": {"name": SEEDED_CONFIG}}
    if shared:
        spec["devicePlugin"] = {"config": {"name": SEEDED_DEVICE_PLUGIN_CONFIG}}
    store.add(
        f"{CLUSTER_POLICIES}/{kube.cluster_policy}",
        {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "spec": spec},
    )
    namespace = f"/api/v1/namespaces/{kube.gpu_operator_namespace}/configmaps"
    if shared:
        store.add(
            f"{namespace}/{SEEDED_DEVICE_PLUGIN_CONFIG}",
            {"apiVersion": "v1", "kind": "ConfigMap", "data": {}},
        )
    if configs is None:
        return
    store.add(
        f"{namespace}/{SEEDED_CONFIG}",
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
