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

The physical GPU count is read where it is. GPU feature discovery writes
``nvidia.com/gpu.count`` once per labeler and later labelers win
(NVIDIA/k8s-device-plugin ``internal/lm/list.go``): under ``mig.strategy=none`` and
``mixed`` it is the node's GPUs; under ``single`` with MIG on, the MIG labeler comes
last and writes there the number of MIG devices, with the product
``<model>-MIG-<profile>`` (``internal/lm/mig-strategy.go``), while the device plugin
advertises those devices as ``nvidia.com/gpu``. There the GPUs are the MIG devices
divided by what the node's ``nvidia.com/mig.config`` entry gives each GPU of the
pool's model (:func:`physical_gpus`).

With no custom mig-parted ConfigMap, the MIG manager of GPU Operator v26.3 and later
(mig-parted v0.14) generates its config from the node's hardware and publishes it as
the ConfigMap ``<node>-mig-config`` in its namespace (mig-parted
``cmd/nvidia-mig-manager/main.go``, ``createNodeConfigMap``): that is the config the
node's label is resolved through where it exists (:func:`node_mig_configs`).

:func:`shared_node_states` turns the nodes of the other pools (no ``mig_layouts``) into
what the sharing plan needs (:mod:`scaler.planning.sharing_actions`): the physical GPUs
(read as above), the device plugin's ``nvidia.com/device-plugin.config`` label, GPU
feature discovery's ``nvidia.com/gpu.sharing-strategy`` and ``nvidia.com/gpu.replicas``
(``internal/lm/resource.go``), the running GPU pods, and why a node must be left alone
(cordoned, not Ready, MIG devices on it, another GPU model, labels that do not read).
"""

from __future__ import annotations

import contextlib
import weakref
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from forecaster.documents import parse_document
from forecaster.errors import BadInputError
from scaler.actuation.kube.transport import KubeApiError, Session, selector_matches
from scaler.catalog.gpus import GPU_MODELS, device_ids_for_product, gpu_model, product_matches
from scaler.catalog.mig import (
    MIG_RESOURCE_PREFIX,
    Layout,
    mig_resource,
    parse_mig_parted_entry,
    profile_of_device_name,
)
from scaler.config import (
    ClusterApiProviderConfig,
    KarpenterProviderConfig,
    KubernetesConfig,
    PlaceholderProviderConfig,
    PoolConfig,
)
from scaler.planning.mig.state import RELAYOUT_ANNOTATION, MigNodeState, with_relayout
from scaler.planning.sharing_actions import (
    CONFIG_LABEL,
    REPLICAS_LABEL,
    SHARING_STRATEGY_LABEL,
    SharedNodeState,
)

KARPENTER_NODEPOOL = "karpenter.sh/nodepool"
CAPI_DEPLOYMENT = "cluster.x-k8s.io/deployment-name"
TIER_LABEL_FALLBACK = "tiercast.io/tier"
GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_RESOURCE = "nvidia.com/gpu"
MIG_CONFIG = "nvidia.com/mig.config"
MIG_STATE = "nvidia.com/mig.config.state"
SHARING_ANNOTATION = "tiercast.io/sharing-change"
"""Node annotation holding the sharing change tiercast has in progress there (JSON,
``scaler.actuation.kube.device_plugin.SharingChange``)."""
MIG_STRATEGY = "nvidia.com/mig.strategy"
GPU_COUNT = "nvidia.com/gpu.count"
GPU_REPLICAS = REPLICAS_LABEL
GPU_SHARING = SHARING_STRATEGY_LABEL
NODES_PATH = "/api/v1/nodes"
NODE_MIG_CONFIG = "{node}-mig-config"
"""The ConfigMap the MIG manager (mig-parted v0.14+) publishes its generated config in."""
MAX_GPUS_PER_NODE = 16
"""The most GPUs a node is searched for when the physical count must be derived."""


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
    """GPU feature discovery's ``nvidia.com/gpu.count``: physical GPUs under the ``none`` and
    ``mixed`` strategies, the MIG devices under ``single`` with MIG on (:func:`physical_gpus`)."""
    unschedulable: bool = False
    ready: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    """The node's annotations (a relayout tiercast has in progress is recorded there)."""
    replicas: int = 1
    """How many times the device plugin advertises each device as ``nvidia.com/gpu``: GPU
    feature discovery's ``nvidia.com/gpu.replicas`` under time-slicing or MPS, else 1."""

    @property
    def devices(self) -> int:
        """Allocatable ``nvidia.com/gpu`` as devices, not replicas: under time-slicing or
        MPS the device plugin advertises each device ``replicas`` times (and GPU feature
        discovery adds ``-SHARED`` to the product, NVIDIA/k8s-device-plugin
        ``internal/lm/resource.go``), so 8 GPUs at 4 replicas are 32 ``nvidia.com/gpu``."""
        return self.gpus // self.replicas


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
    obj: dict[str, Any],
    pools: Sequence[PoolConfig],
    kube: KubernetesConfig,
    owners: Mapping[str, str] | None = None,
) -> NodeInfo:
    """One node, told to one of ``pools`` by ``kube``'s pool label; ``owners`` maps node
    names to the Cluster API pool whose Machine names them."""
    meta = obj.get("metadata", {})
    labels = dict(meta.get("labels") or {})
    allocatable = obj.get("status", {}).get("allocatable") or {}
    name = meta.get("name", "")
    pool = next(
        (
            p.name
            for p in pools
            if any(selector_matches(s, labels) for s in pool_selectors(p, kube.pool_label))
            or (owners or {}).get(name) == p.name
        ),
        None,
    )
    conditions = obj.get("status", {}).get("conditions") or []
    count = labels.get(GPU_COUNT)
    shared = labels.get(GPU_SHARING) in ("time-slicing", "mps")
    replicas = _int_quantity(labels.get(GPU_REPLICAS, 1)) if shared else 1
    return NodeInfo(
        name=name,
        pool=pool,
        tier=labels.get(kube.tier_label) or labels.get(TIER_LABEL_FALLBACK),
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
        annotations=dict(meta.get("annotations") or {}),
        replicas=max(1, replicas),
    )


CAPI_GROUP = "cluster.x-k8s.io"
CAPI_VERSIONS = ("v1beta2", "v1beta1")
"""Cluster API's versions, newest first: ``v1beta1`` is deprecated since Cluster API v1.11
(``+kubebuilder:deprecatedversion`` in ``api/core/v1beta1/machinedeployment_types.go``)."""
_capi_served: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def capi_api_version(session: Session, settings: ClusterApiProviderConfig) -> str:
    """The Cluster API group/version to use: the pool's ``api_version`` when set, else the
    newest one whose discovery lists ``machinedeployments`` (``v1beta2`` where served).

    Read once per transport (one cluster); ``v1beta1`` when discovery shows neither.
    """
    if settings.api_version:
        return settings.api_version
    try:
        return _capi_served[session.transport]
    except (KeyError, TypeError):
        pass
    found = f"{CAPI_GROUP}/{CAPI_VERSIONS[-1]}"
    for version in CAPI_VERSIONS:
        try:
            listing = session.get(f"/apis/{CAPI_GROUP}/{version}")
        except KubeApiError as exc:
            if exc.not_found:
                continue
            raise
        if "machinedeployments" in {r.get("name") for r in listing.get("resources") or []}:
            found = f"{CAPI_GROUP}/{version}"
            break
    # A transport that cannot be weakly referenced is asked again next time.
    with contextlib.suppress(TypeError):
        _capi_served[session.transport] = found
    return found


def machine_owners(session: Session, pools: Sequence[PoolConfig]) -> dict[str, str]:
    """Node name -> Cluster API pool, through each MachineDeployment's Machines' ``status.nodeRef``.

    Pools with a ``node_selector`` are matched by it instead and not listed here.
    """
    out: dict[str, str] = {}
    for p in pools:
        s = p.provider
        if not isinstance(s, ClusterApiProviderConfig) or s.node_selector:
            continue
        machines = session.get(
            f"/apis/{capi_api_version(session, s)}/namespaces/{s.namespace}/machines",
            {"labelSelector": f"{CAPI_DEPLOYMENT}={s.machine_deployment}"},
        )
        for m in machines.get("items", []):
            if m.get("metadata", {}).get("deletionTimestamp"):
                continue
            ref = (m.get("status") or {}).get("nodeRef") or {}
            if ref.get("name"):
                out.setdefault(str(ref["name"]), p.name)
    return out


def read_nodes(
    session: Session, pools: Sequence[PoolConfig], kube: KubernetesConfig
) -> list[NodeInfo]:
    """Every node not being deleted, with its pool (None when no pool's selector matches)."""
    owners = machine_owners(session, pools)
    listing = session.get(NODES_PATH)
    return [
        node_info(obj, pools, kube, owners)
        for obj in listing.get("items", [])
        if not obj.get("metadata", {}).get("deletionTimestamp")
    ]


def nodes_per_pool(nodes: list[NodeInfo], pools: Sequence[PoolConfig]) -> dict[str, int]:
    counts = Counter(n.pool for n in nodes if n.pool is not None)
    return {p.name: counts.get(p.name, 0) for p in pools}


def _advertised(layouts: list[Layout]) -> dict[str, int]:
    """The ``nvidia.com/mig-*`` resources the device plugin advertises for ``layouts`` (mixed)."""
    out: dict[str, int] = {}
    for lay in layouts:
        for p, n in lay.counts:
            out[mig_resource(p)] = out.get(mig_resource(p), 0) + n
    return out


def product_mismatch(node: NodeInfo, pool: PoolConfig) -> str | None:
    """One line when the node's ``nvidia.com/gpu.product`` is not the pool's GPU model."""
    if node.gpu_product is None or product_matches(pool.gpu_model, node.gpu_product):
        return None
    return (
        f"node {node.name}: {GPU_PRODUCT}={node.gpu_product} is not pool {pool.name}'s "
        f"{gpu_model(pool.gpu_model).name}; fix the pool's gpu_model or its node selector"
    )


def single_strategy_profile(node: NodeInfo) -> str | None:
    """The MIG profile GPU feature discovery names in the product under ``mig.strategy=single``.

    ``NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.me`` gives ``1g.10gb+me``; ``INVALID`` where GFD
    found the node unfit for ``single`` (MIG on and off, two profiles, an empty MIG GPU:
    ``internal/lm/mig-strategy.go`` ``newInvalidMigStrategyLabeler``); None with no
    ``-MIG-`` part (no GPU in MIG mode: the count is the GPUs).
    """
    product = (node.gpu_product or "").removesuffix("-SHARED")
    _, sep, profile = product.partition("-MIG-")
    if not sep:
        return None
    return "INVALID" if profile == "INVALID" else profile_of_device_name(profile)


def sharing(node: NodeInfo) -> str:
    """How the device plugin shares each GPU: ``none``, or ``time-slicing x4`` / ``mps x2``.

    From GPU feature discovery's ``nvidia.com/gpu.sharing-strategy`` and
    ``nvidia.com/gpu.replicas`` (``internal/lm/resource.go`` ``baseLabeler``).
    """
    strategy = node.labels.get(GPU_SHARING) or "none"
    replicas = node.labels.get(GPU_REPLICAS)
    if strategy == "none" or not replicas:
        return strategy
    return f"{strategy} x{replicas}"


def physical_gpus(
    node: NodeInfo, pool: PoolConfig, strategy: str | None, entry: Any
) -> tuple[int, str | None]:
    """The node's physical GPUs, and why they could not be read (then the pool's ``gpus_per_node``).

    Under ``none`` and ``mixed``, or ``single`` with no GPU in MIG mode, GPU feature
    discovery's ``nvidia.com/gpu.count`` is the GPUs. Under ``single`` with MIG on it
    is the MIG devices, all of one profile: the GPUs are the count ``n`` for which the
    node's mig-parted ``entry``, read for the pool's model, gives every GPU a layout and
    ``n`` GPUs hold exactly that many devices (56 x ``1g.10gb`` on ``all-1g.10gb`` is
    8 H100s).
    """
    return _physical(node, pool.gpu_model, pool.gpus_per_node, strategy, entry)


def _physical(
    node: NodeInfo, model: str | None, fallback: int, strategy: str | None, entry: Any
) -> tuple[int, str | None]:
    """:func:`physical_gpus` for a GPU ``model`` (None: not known) and a ``fallback`` count."""
    profile = single_strategy_profile(node) if strategy == "single" else None
    if profile is None:
        if node.gpu_count is None and node.replicas > 1 and node.devices:
            # Shared and no gpu.count label: the replicas advertised, divided back.
            return node.devices, None
        return node.gpu_count or fallback, None
    if model is None:
        return fallback, f"{GPU_PRODUCT}={node.gpu_product} is no GPU model of the catalog"
    if profile == "INVALID":
        return fallback, (
            f"{GPU_PRODUCT}={node.gpu_product}: GPU feature discovery finds this node unfit "
            "for mig.strategy=single (MIG on and off, two profiles or an empty MIG GPU)"
        )
    devices = node.gpu_count if node.gpu_count is not None else node.devices
    if entry is None:
        return fallback, (
            f"mig.strategy=single counts {devices} MIG devices in {GPU_COUNT} and "
            f"{MIG_CONFIG}={node.mig_config} is not in the mig-parted config: "
            "the physical GPUs cannot be told"
        )
    for n in range(1, MAX_GPUS_PER_NODE + 1):
        try:
            per = parse_mig_parted_entry(
                model,
                entry,
                n,
                str(node.mig_config),
                device_ids_for_product(model, node.gpu_product),
            )
        except BadInputError:
            continue
        if len(per) == n and sum(lay.count(profile) for lay in per.values()) == devices:
            return n, None
    return fallback, (
        f"mig.strategy=single: {devices} MIG devices of {profile} are no whole number of "
        f"GPUs laid out as {node.mig_config}"
    )


def _single_disagreement(node: NodeInfo, current: tuple[Layout, ...]) -> str | None:
    """Under ``single``: why the advertised ``nvidia.com/gpu`` does not show ``current``."""
    profile = single_strategy_profile(node)
    profiles = {p for lay in current for p, _ in lay.counts}
    if all(lay.whole for lay in current):
        if profile is None:
            return None
        return f"{GPU_PRODUCT}={node.gpu_product} shows MIG devices, {node.mig_config} none"
    devices = sum(n for lay in current for _, n in lay.counts)
    if profiles != {profile} or node.devices != devices:
        return (
            f"allocatable {GPU_RESOURCE}={node.gpus} ({GPU_PRODUCT}={node.gpu_product}"
            f"{f', {node.replicas} replicas each' if node.replicas > 1 else ''}) "
            f"disagrees with {node.mig_config} (device plugin not restarted yet?)"
        )
    return None


def mig_node_state(
    node: NodeInfo, pool: PoolConfig, mig_configs: Mapping[str, Any], strategy: str | None
) -> MigNodeState:
    """What the MIG planner needs of one node: per-GPU layouts, strategy, and any reason to hold."""
    strategy = node.mig_strategy or strategy
    entry = mig_configs.get(node.mig_config) if node.mig_config is not None else None
    gpus, unknown = physical_gpus(node, pool, strategy, entry)
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
        if node.mig or single_strategy_profile(node) not in (None, "INVALID"):
            return held(f"MIG devices on the node but no {MIG_CONFIG} label")
        return MigNodeState(node.name, whole, None, strategy)
    if entry is None:
        return held(f"{MIG_CONFIG}={node.mig_config} is not in the mig-parted config")
    if unknown is not None:
        return held(unknown)
    try:
        ids = device_ids_for_product(pool.gpu_model, node.gpu_product)
        per = parse_mig_parted_entry(pool.gpu_model, entry, gpus, node.mig_config, ids)
    except BadInputError as exc:
        return held(str(exc))
    if len(per) != gpus:
        return held(f"{node.mig_config} does not say what {gpus - len(per)} of its GPUs hold")
    current = tuple(per[i] for i in range(gpus))
    # The device plugin advertises per profile with the mixed strategy, as nvidia.com/gpu
    # with single (NVIDIA/k8s-device-plugin internal/rm/rm.go AddDefaultResourcesToConfig).
    if strategy == "mixed" and node.mig != _advertised(list(current)):
        return held(
            f"allocatable MIG devices {dict(sorted(node.mig.items()))} disagree with "
            f"{node.mig_config} (device plugin not restarted yet?)",
            current,
        )
    if strategy == "single":
        disagree = _single_disagreement(node, current)
        if disagree is not None:
            return held(disagree, current)
    return MigNodeState(node.name, current, node.mig_config, strategy)


def mig_node_states(
    nodes: list[NodeInfo],
    pools: Sequence[PoolConfig],
    mig_configs: Mapping[str, Any],
    strategy: str | None,
    node_configs: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, list[MigNodeState]]:
    """The nodes of every MIG-managed pool (``mig_layouts`` set), in name order.

    ``node_configs`` holds, per node name, the mig-configs of the node's own
    ``<node>-mig-config`` (:func:`node_mig_configs`), read instead of ``mig_configs``.
    """
    out: dict[str, list[MigNodeState]] = {}
    for pool in pools:
        if pool.mig_layouts is None:
            continue
        out[pool.name] = [
            with_relayout(
                mig_node_state(n, pool, (node_configs or {}).get(n.name, mig_configs), strategy),
                n.annotations,
            )
            for n in sorted(nodes, key=lambda n: n.name)
            if n.pool == pool.name
        ]
    return out


def node_mig_configs(
    session: Session, namespace: str, names: Iterable[str]
) -> dict[str, dict[str, Any]]:
    """The mig-configs the MIG manager generated for each node that has one, by node name.

    GPU Operator v26.3 and later with no custom mig-parted ConfigMap: the MIG manager
    builds its config from the GPUs it finds and writes it, key ``config.yaml``, to
    ``<node>-mig-config`` in its own namespace (mig-parted ``cmd/nvidia-mig-manager/main.go``
    ``setupMigConfig``, ``createNodeConfigMap``); where it found no profiles it falls back
    to the operator's static config and writes none. A node without one, or whose copy
    does not parse, is left out (the static config is read for it).
    """
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        path = f"/api/v1/namespaces/{namespace}/configmaps/{NODE_MIG_CONFIG.format(node=name)}"
        try:
            cm = session.get(path)
        except KubeApiError as exc:
            if exc.not_found or exc.status == 403:
                continue
            raise
        try:
            text = str((cm.get("data") or {}).get("config.yaml") or "")
            data = parse_document(text, path, "ConfigMap config.yaml") or {}
        except BadInputError:  # bounded like every input document: never a RecursionError
            continue
        configs = data.get("mig-configs") if isinstance(data, dict) else None
        if isinstance(configs, dict):
            out[name] = configs
    return out


@dataclass(frozen=True)
class NodeView:
    """One node as ``tiercast inventory`` shows it: what the planner reads of it, and why."""

    name: str
    pool: str | None
    tier: str | None
    product: str | None
    """GPU feature discovery's ``nvidia.com/gpu.product``."""
    model: str | None
    """The catalog's GPU model: the pool's, else the one the product names."""
    gpus: int | None
    """Physical GPUs (:func:`physical_gpus`); None when the node reports none."""
    mig_strategy: str | None
    mig_config: str | None
    layout: str | None
    """The layout per GPU, as the config writes it (``8 x 1g.10gb:7``)."""
    mig_state: str | None
    sharing: str
    cordoned: bool
    held: bool
    why: str
    """Why the node is held, or what the planner counts it for."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pool": self.pool,
            "tier": self.tier,
            "product": self.product,
            "model": self.model,
            "gpus": self.gpus,
            "mig_strategy": self.mig_strategy,
            "mig_config": self.mig_config,
            "layout": self.layout,
            "mig_state": self.mig_state,
            "sharing": self.sharing,
            "cordoned": self.cordoned,
            "held": self.held,
            "why": self.why,
        }


def _layout_text(current: Iterable[Layout]) -> str:
    groups: list[tuple[str, int]] = []
    for lay in current:
        spec = lay.spec()
        if groups and groups[-1][0] == spec:
            groups[-1] = (spec, groups[-1][1] + 1)
        else:
            groups.append((spec, 1))
    return ", ".join(f"{n} x {spec}" for spec, n in groups)


def _catalog_model(product: str | None) -> str | None:
    if not product:
        return None
    return next((m for m in GPU_MODELS if product_matches(m, product)), None)


def node_views(
    nodes: list[NodeInfo],
    pools: Sequence[PoolConfig],
    mig_configs: Mapping[str, Any],
    strategy: str | None,
    node_configs: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[NodeView]:
    """Every node with what the planner reads of it: pool, physical GPUs, MIG and sharing.

    Nodes of MIG-managed pools are read exactly as :func:`mig_node_states` reads them
    (held or not, and why); other nodes are counted in their pool or, outside any, not
    counted at all.
    """
    by_name = {p.name: p for p in pools}
    states = {
        s.name: s
        for group in mig_node_states(nodes, pools, mig_configs, strategy, node_configs).values()
        for s in group
    }
    out: list[NodeView] = []
    for node in sorted(nodes, key=lambda n: n.name):
        pool = by_name.get(node.pool) if node.pool else None
        model = gpu_model(pool.gpu_model).name if pool else _catalog_model(node.gpu_product)
        node_strategy = node.mig_strategy or strategy
        configs = (node_configs or {}).get(node.name, mig_configs)
        entry = configs.get(node.mig_config) if node.mig_config else None
        state = states.get(node.name)
        if state is not None:
            gpus: int | None = len(state.current)
            known = entry is not None or node.mig_config is None
            layout: str | None = _layout_text(state.current) if known else None
            held = state.held is not None
            why = state.held or f"counted in pool {node.pool}; its layouts planned"
        else:
            fallback = pool.gpus_per_node if pool else 0
            count, unknown = _physical(node, model, fallback, node_strategy, entry)
            gpus = count or None
            layout = None
            if entry is not None and model is not None and count:
                try:
                    ids = device_ids_for_product(model, node.gpu_product)
                    per = parse_mig_parted_entry(model, entry, count, str(node.mig_config), ids)
                    layout = _layout_text(per.get(i, Layout(whole=True)) for i in range(count))
                except BadInputError as exc:
                    unknown = unknown or str(exc)
            held = False
            if pool is None:
                why = "in no pool (no pool selector matches its labels): not counted"
            else:
                why = f"counted in pool {pool.name}"
                if unknown:
                    why += f" ({unknown})"
            if pool is not None and (mismatch := product_mismatch(node, pool)):
                why += f"; {mismatch}"
        out.append(
            NodeView(
                name=node.name,
                pool=node.pool,
                tier=node.tier,
                product=node.gpu_product,
                model=model,
                gpus=gpus,
                mig_strategy=node_strategy,
                mig_config=node.mig_config,
                layout=layout,
                mig_state=node.mig_state,
                sharing=sharing(node),
                cordoned=node.unschedulable,
                held=held,
                why=why,
            )
        )
    return out


def gpu_pods_per_node(session: Session) -> dict[str, int] | None:
    """Running (not ``Succeeded`` or ``Failed``) pods requesting ``nvidia.com/gpu``, per node
    name; None where pods cannot be listed (the sharing plan then does not know which nodes
    are busy)."""
    try:
        pods = session.get(
            "/api/v1/pods", {"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"}
        )
    except KubeApiError as exc:
        if exc.not_found or exc.status == 403:
            return None
        raise
    out: dict[str, int] = {}
    for pod in pods.get("items", []):
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            continue
        for c in (pod.get("spec") or {}).get("containers", []):
            res = c.get("resources") or {}
            if any(GPU_RESOURCE in (res.get(k) or {}) for k in ("limits", "requests")):
                out[node] = out.get(node, 0) + 1
                break
    return out


def shared_node_state(
    node: NodeInfo, pool: PoolConfig, gpu_pods: Mapping[str, int] | None = None
) -> SharedNodeState:
    """What the sharing plan needs of one node of a pool without ``mig_layouts``."""
    gpus, unknown = physical_gpus(node, pool, node.mig_strategy, None)
    labels = node.labels
    strategy = labels.get(GPU_SHARING)
    raw = labels.get(GPU_REPLICAS)
    replicas: int | None = None
    held: str | None = None
    if raw is not None:
        try:
            replicas = int(raw)
        except ValueError:
            held = f"{GPU_REPLICAS}={raw!r} is not a whole number"
    mismatch = product_mismatch(node, pool)
    if node.unschedulable:
        held = "cordoned"
    elif not node.ready:
        held = "not Ready"
    elif mismatch is not None:
        held = mismatch
    elif node.mig or single_strategy_profile(node) is not None:
        held = "MIG devices on the node: its GPUs are not whole"
    elif RELAYOUT_ANNOTATION in node.annotations:
        held = "a MIG relayout tiercast started is in progress"
    elif SHARING_ANNOTATION in node.annotations:
        held = "a sharing change tiercast started is in progress"
    elif unknown is not None:
        held = unknown
    elif strategy not in (None, "", "none", "time-slicing", "mps"):
        held = f"{GPU_SHARING}={strategy!r} is no sharing strategy the device plugin has"
    return SharedNodeState(
        name=node.name,
        gpus=gpus,
        config=labels.get(CONFIG_LABEL),
        strategy=strategy,
        replicas=replicas,
        held=held,
        gpu_pods=None if gpu_pods is None else int(gpu_pods.get(node.name, 0)),
    )


def shared_node_states(
    nodes: list[NodeInfo],
    pools: Sequence[PoolConfig],
    gpu_pods: Mapping[str, int] | None = None,
) -> dict[str, list[SharedNodeState]]:
    """The nodes of every pool without ``mig_layouts``, in name order (``gpu_pods``: running
    GPU pods per node, :func:`gpu_pods_per_node`; None where not known)."""
    out: dict[str, list[SharedNodeState]] = {}
    for pool in pools:
        if pool.mig_layouts is not None:
            continue
        out[pool.name] = [
            shared_node_state(n, pool, gpu_pods)
            for n in sorted(nodes, key=lambda n: n.name)
            if n.pool == pool.name
        ]
    return out


def shared_inventory(
    session: Session, pools: Sequence[PoolConfig], kube: KubernetesConfig
) -> dict[str, list[SharedNodeState]]:
    """:func:`shared_node_states` of the cluster's nodes, read now with their GPU pods."""
    nodes = read_nodes(session, pools, kube)
    return shared_node_states(nodes, pools, gpu_pods_per_node(session))
