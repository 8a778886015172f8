"""Which nodes the device plugin shares, and the ``device-plugin-config`` actions that share them.

The sharing plan (:mod:`scaler.planning.pooling`) says what each GPU model's shared
workloads need: per pooling group, and per shared workload in no group, a number of GPUs
shared ``tiercast-<mode>-<r>`` (:func:`scaler.planning.sharing.device_plugin_config`). NVIDIA's
device plugin shares every GPU of a node the same way, chosen per node by the label
``nvidia.com/device-plugin.config`` (NVIDIA/k8s-device-plugin, commit 1b826ac,
``cmd/config-manager/main.go``, which acts when the label's value changes;
``api/config/v1/config.go`` ``DisableResourceNamingInConfig``), so a need of ``G`` GPUs is
``ceil(G / gpus per node)`` nodes carrying that label. This module chooses those nodes and
emits one ``device-plugin-config`` action (``details``: ``node``, ``mode``, ``replicas``)
per node whose label must change; :mod:`scaler.actuation.kube.device_plugin` applies it.

``G`` is the GPUs the need takes at the policy quantile over the next lead time of the
model's pools, and never below what the newest observation needs: a pooling group's
``ceil(J / r)`` (``J`` its joint replicas, :func:`scaler.planning.demand.quantile_replicas`;
every GPU of the group's nodes is shared ``r`` ways, so that is what the label must
cover), a single workload's ``ceil(R / r)``.

Nodes, least churn first: those carrying the wanted label already count and get no
action; then nodes with no ``nvidia.com/device-plugin.config`` label that GPU feature
discovery does not show shared (``nvidia.com/gpu.sharing-strategy``), those without running
GPU pods first where that is known, in the config's pool order and by name. Never a node
of a MIG-managed pool (``mig_layouts`` set: the MIG planner's), never one that is held
(cordoned, not Ready, MIG devices on it, labels that cannot be read), never one labelled
with someone else's config, and none of a pool the tier plan shrinks this cycle (which node
goes is the provider's choice). Nodes the pool adds this cycle get a note: they are
labelled once they join.

Safety: the device plugin's config only adds devices through this module, never takes any
away. The actuator has no action that unshares a node, so a node labelled ``tiercast-*``
that no need wants keeps its label, with a note (unlabelling it is a manual step, after
draining its shared pods). Missing or bad data (no node inventory, a stale signal of a
need) gives no action, only a note.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from forecaster.errors import BadInputError
from forecaster.estimators import quantile_column
from forecaster.forecasting import SeriesForecast
from scaler import wording
from scaler.catalog.gpus import gpu_model
from scaler.config import Fleet, PolicyConfig, PoolConfig, WorkloadConfig
from scaler.planning.demand import planning_grid, quantile_replicas, replicas_for
from scaler.planning.sharing import (
    SHARED_MODES,
    SharingMode,
    device_plugin_config,
    pooling_groups,
    resolved_mode,
    workload_replicas_per_gpu,
)
from scaler.plans import Action, iso
from scaler.wording import Reason

ACTION_KIND = "device-plugin-config"
"""The kind of the actions this module emits (``scaler.actuation.kube.device_plugin``)."""
CONFIG_LABEL = "nvidia.com/device-plugin.config"
"""The node label the device plugin's config manager reads (``cmd/config-manager``)."""
SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
"""GPU feature discovery's sharing strategy (``internal/lm/resource.go``)."""
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
"""GPU feature discovery's replicas per GPU (``internal/lm/resource.go``)."""
TIERCAST_PREFIX = "tiercast-"
"""Every config name tiercast writes starts so (:func:`device_plugin_config`)."""


@dataclass(frozen=True)
class SharedNodeState:
    """One node of a pool without ``mig_layouts`` as the cluster shows it (read by
    ``scaler.actuation.kube.inventory.shared_node_states``), or as the config describes it."""

    name: str
    gpus: int
    """Physical GPUs (never the replicas the device plugin advertises)."""
    config: str | None = None
    """Its ``nvidia.com/device-plugin.config`` label; None: unset (the ClusterPolicy's default)."""
    strategy: str | None = None
    """GPU feature discovery's ``nvidia.com/gpu.sharing-strategy``; None: not labelled."""
    replicas: int | None = None
    """GPU feature discovery's ``nvidia.com/gpu.replicas``; None: not labelled."""
    held: str | None = None
    """Why its sharing must not change now (cordoned, not Ready, labels not understood)."""
    gpu_pods: int | None = None
    """Running pods that request ``nvidia.com/gpu`` there; None: not known."""

    @property
    def shown_shared(self) -> bool:
        """Whether GPU feature discovery shows the node's GPUs shared."""
        return self.strategy not in (None, "", "none")


def configured_shared_nodes(pool: PoolConfig, count: int) -> list[SharedNodeState]:
    """The pool's nodes as the config describes them (no cluster read): ``<pool>-<i>``, as the
    offline dry-run's in-memory cluster names them, unlabelled, ``gpus_per_node`` each."""
    return [SharedNodeState(f"{pool.name}-{i}", pool.gpus_per_node) for i in range(count)]


def has_shared_workloads(fleet: Fleet) -> bool:
    """Whether any served workload is planned on time-sliced or MPS GPUs (two or more
    replicas per GPU): only then are nodes read for the sharing plan."""
    return any(_shared(w) for w in fleet.served_workloads)


def _shared(w: WorkloadConfig) -> bool:
    return resolved_mode(w) in SHARED_MODES and workload_replicas_per_gpu(w) >= 2


@dataclass(frozen=True)
class SharedNeed:
    """GPUs one pooling group, or one shared workload in no group, needs shared one way."""

    model: str
    mode: SharingMode
    replicas_per_gpu: int
    workloads: tuple[WorkloadConfig, ...]
    group: str | None
    """The pooling group's key (``H100-80GB/mps``); None for a single workload."""

    @property
    def config_name(self) -> str:
        """The ``nvidia.com/device-plugin.config`` value: ``tiercast-mps-4``."""
        return device_plugin_config(self.mode, self.replicas_per_gpu)[0]

    @property
    def entry(self) -> dict[str, object]:
        """The device plugin's ``version: v1`` config of :attr:`config_name`."""
        return device_plugin_config(self.mode, self.replicas_per_gpu)[1]

    def who(self) -> str:
        names = ", ".join(w.name for w in self.workloads)
        if self.group is not None:
            return f"pooling group {self.group} ({names})"
        return f"workload {names!r} ({self.mode})"


def _note(code: str, need: SharedNeed, **params: object) -> Reason:
    """A plan note about ``need``: its workloads, sharing mode and action kind, and ``params``."""
    return Reason(
        code,
        {"workloads": [w.name for w in need.workloads], "mode": need.mode, "kind": ACTION_KIND}
        | params,
    )


def shared_needs(fleet: Fleet) -> list[SharedNeed]:
    """The needs of the config's served workloads, in config order: one per pooling group,
    one per shared workload in no group (:func:`scaler.planning.sharing.pooling_groups`)."""
    served = [w for w in fleet.served_workloads if _shared(w)]
    needs: list[SharedNeed] = []
    grouped: set[str] = set()
    for g in pooling_groups(served):
        if g.replicas_per_gpu < 2:
            continue  # its members fit no GPU together: each is planned on its own below
        needs.append(SharedNeed(g.model, g.mode, g.replicas_per_gpu, g.workloads, g.key))
        grouped |= {w.name for w in g.workloads}
    for w in served:
        if w.name not in grouped:
            model = gpu_model(w.gpu_model).name
            needs.append(
                SharedNeed(model, resolved_mode(w), workload_replicas_per_gpu(w), (w,), None)
            )
    first = {w.name: i for i, w in enumerate(fleet.served_workloads)}
    return sorted(needs, key=lambda n: first[n.workloads[0].name])


@dataclass
class SharingActions:
    """The ``device-plugin-config`` actions, the keys they add to the plan's ``sharing``
    section, and the notes."""

    actions: list[Action] = field(default_factory=list)
    section: dict[str, Any] = field(default_factory=dict)
    notes: list[Reason | str] = field(default_factory=list)


@dataclass
class _Node:
    """A node as the choice works on it."""

    pool: PoolConfig
    state: SharedNodeState
    target: str | None
    """The ``nvidia.com/device-plugin.config`` it ends with (its own where unchanged)."""
    why: str
    free: bool
    """Whether it may take a new label: unlabelled, unshared, not held, its pool not shrinking."""
    changed: bool = False


def plan_sharing_actions(
    fleet: Fleet,
    policy: PolicyConfig,
    forecasts: Mapping[str, SeriesForecast],
    inventory: Mapping[str, int],
    now: pd.Timestamp,
    node_states: Mapping[str, Sequence[SharedNodeState]] | None,
    targets: Mapping[str, int] | None = None,
    stale: set[str] | None = None,
    history: Mapping[str, pd.Series] | None = None,
    source: str = "cluster",
    unavailable: str | None = None,
) -> SharingActions:
    """The ``device-plugin-config`` actions that label enough nodes for every shared need.

    ``node_states``: per pool without ``mig_layouts``, its nodes (read from the cluster, or
    :func:`configured_shared_nodes` where none is read; ``source`` says which, for the
    section); None where they could not be read: then no action, a note per need. A pool
    missing from it has no nodes known. ``unavailable``: why no node's sharing can change
    now (the cluster has no device plugin config to add to): no action either, and the
    note says so. ``targets``: the nodes per pool the tier plan asks for now (a pool that
    shrinks keeps its labels; one that grows gets a note for the nodes to come).
    ``stale``: signals whose data is stale or missing: a need fed by one gets no action.
    Empty when no served workload is shared.
    """
    needs = shared_needs(fleet)
    if not needs:
        return SharingActions()
    _check_node_states(fleet, node_states)
    now = pd.Timestamp(now)
    grid = planning_grid(now, policy.horizon_s, policy.cycle_s)
    workloads, replicas, joint = quantile_replicas(fleet, forecasts, grid, policy.quantile, history)
    by_name = dict(zip((w.name for w in workloads), replicas, strict=True))
    qname = quantile_column(policy.quantile)
    out = SharingActions()
    nodes = _known_nodes(fleet, needs, node_states, targets or {}, inventory)
    need_entries: list[dict[str, Any]] = []
    wanted = {(n.model, n.config_name) for n in needs}
    for need in needs:
        lead_s = _lead_s(fleet, need.model)
        held = sorted(
            {w.signal for w in need.workloads if w.signal in (stale or set())}
            | {w.signal for w in need.workloads if w.signal not in forecasts}
        )
        gpus = 0 if held else _need_gpus(need, by_name, joint, forecasts, grid, now, lead_s)
        entry = _need_entry(need, gpus)
        need_entries.append(entry)
        if held:
            entry["held"] = f"signal(s) {', '.join(held)} stale or missing"
            out.notes.append(
                _note(wording.NOTE_SHARING_HELD, need, signals=tuple(held), label=CONFIG_LABEL)
            )
            continue
        if node_states is None or unavailable is not None:
            why = unavailable or "the nodes' labels could not be read"
            entry["held"] = why
            per_node = max(
                (p.gpus_per_node for p in _shareable_pools(fleet, need.model)), default=0
            )
            count = math.ceil(gpus / per_node) if per_node else 0
            out.notes.append(
                _note(
                    wording.NOTE_SHARING_UNREAD,
                    need,
                    gpus=gpus,
                    count=count,
                    label=CONFIG_LABEL,
                    config=need.config_name,
                    detail=why,
                )
            )
            continue
        _choose(need, gpus, nodes.get(need.model, []), entry, out, qname, lead_s, now, inventory)
        _to_come(need, entry, fleet, targets or {}, inventory, out)
    out.notes += _left_shared(nodes, wanted)
    if source == "config" and out.actions:
        out.notes.append(
            Reason(wording.NOTE_SHARING_FROM_CONFIG, {"kind": ACTION_KIND, "label": CONFIG_LABEL})
        )
    out.section = _section(needs, need_entries, nodes, source if node_states is not None else None)
    return out


def _check_node_states(
    fleet: Fleet, node_states: Mapping[str, Sequence[SharedNodeState]] | None
) -> None:
    """Every pool ``node_states`` names is one of the fleet's, and not MIG-managed."""
    pools = {p.name: p for p in fleet.pools}
    for name in node_states or {}:
        if name not in pools:
            raise BadInputError(f"node_states[{name!r}]: no pool of that name in the config")
        if pools[name].mig_layouts is not None:
            raise BadInputError(
                f"node_states[{name!r}]: pool {name} is MIG-managed (mig_layouts set); its "
                "nodes are the MIG planner's"
            )


def _need_entry(need: SharedNeed, gpus: int) -> dict[str, Any]:
    """The section's entry for ``need``, before any node is counted or chosen."""
    return {
        "gpu_model": need.model,
        "config": need.config_name,
        "mode": need.mode,
        "replicas_per_gpu": need.replicas_per_gpu,
        "workloads": [w.name for w in need.workloads],
        "group": need.group,
        "gpus": gpus,
        "gpus_labelled": 0,
        "nodes_labelled": [],
        "nodes_to_label": [],
        "held": None,
    }


def _section(
    needs: Sequence[SharedNeed],
    need_entries: list[dict[str, Any]],
    nodes: Mapping[str, list[_Node]],
    nodes_from: str | None,
) -> dict[str, Any]:
    """The keys the sharing actions add to the plan's ``sharing`` section."""
    section_nodes = [n for model in sorted(nodes) for n in nodes[model]]
    return {
        "nodes_from": nodes_from,
        "needs": need_entries,
        "device_plugin_configs": {n.config_name: n.entry for n in needs},
        "node_labels": dict(
            sorted((n.state.name, n.target) for n in section_nodes if n.target is not None)
        ),
        "nodes": [
            {
                "node": n.state.name,
                "pool": n.pool.name,
                "gpus": n.state.gpus,
                "current": n.state.config,
                "target": n.target,
                "changed": n.changed,
                "gpu_pods": n.state.gpu_pods,
                "held": n.state.held,
                "why": n.why,
            }
            for n in section_nodes
        ],
    }


def _shareable_pools(fleet: Fleet, model: str) -> list[PoolConfig]:
    """The pools of ``model`` whose nodes the device plugin may share: not MIG-managed."""
    return [p for p in fleet.pools_for(model) if p.mig_layouts is None]


def _lead_s(fleet: Fleet, model: str) -> int:
    return max((p.lead_time_s for p in _shareable_pools(fleet, model)), default=0)


def _need_gpus(
    need: SharedNeed,
    by_name: Mapping[str, np.ndarray],
    joint: Mapping[str, np.ndarray],
    forecasts: Mapping[str, SeriesForecast],
    grid: pd.DatetimeIndex,
    now: pd.Timestamp,
    lead_s: int,
) -> int:
    """GPUs ``need`` takes shared: the most over the next ``lead_s`` (at least the first
    step) at the policy quantile, never below what the newest observation needs."""
    near = np.asarray(grid < now + pd.Timedelta(seconds=lead_s))
    near[0] = True
    newest = sum(float(replicas_for(w, forecasts[w.signal].last_value)) for w in need.workloads)
    if need.group is not None and need.group in joint:
        together = np.asarray(joint[need.group], dtype=float)
    else:
        together = np.sum([by_name[w.name] for w in need.workloads], axis=0)
    # ceil(replicas / r): scaler.planning.sharing.pooled_gpus and dedicated_gpus, r >= 2.
    r = need.replicas_per_gpu
    ahead = float(np.ceil(together[near] / r - 1e-9).max())
    return int(max(0.0, ahead, math.ceil(newest / r - 1e-9)))


def _known_nodes(
    fleet: Fleet,
    needs: Sequence[SharedNeed],
    node_states: Mapping[str, Sequence[SharedNodeState]] | None,
    targets: Mapping[str, int],
    inventory: Mapping[str, int],
) -> dict[str, list[_Node]]:
    """Per GPU model with shared needs, the nodes of its pools without ``mig_layouts``, each
    with its current label as its target and why it may or may not be labelled."""
    out: dict[str, list[_Node]] = {}
    if node_states is None:
        return out
    models = {n.model for n in needs}
    for pool in fleet.pools:
        model = gpu_model(pool.gpu_model).name
        if model not in models or pool.mig_layouts is not None:
            continue
        current = int(inventory.get(pool.name, pool.min_nodes))
        target = int(targets.get(pool.name, current))
        shrinking = (
            f"pool {pool.name} scales down {current} -> {target} this cycle; its nodes are "
            "labelled once it settles"
            if target < current
            else None
        )
        for s in sorted(node_states.get(pool.name, ()), key=lambda s: s.name):
            why = s.held or shrinking or _not_free(s)
            out.setdefault(model, []).append(
                _Node(pool, s, s.config, why or "unlabelled, not shared", why is None)
            )
    return out


def _not_free(s: SharedNodeState) -> str | None:
    """Why a node that is not held still cannot take a new label; None when it can."""
    if s.config is not None and not s.config.startswith(TIERCAST_PREFIX):
        return f"{CONFIG_LABEL}={s.config} is not tiercast's: left as it is"
    if s.config is not None:
        return f"{CONFIG_LABEL}={s.config}"
    if s.shown_shared:
        return (
            f"{SHARING_STRATEGY_LABEL}={s.strategy} with no {CONFIG_LABEL}: shared by the "
            "ClusterPolicy's default config, left as it is"
        )
    return None


def _choose(
    need: SharedNeed,
    gpus: int,
    nodes: list[_Node],
    entry: dict[str, Any],
    out: SharingActions,
    qname: str,
    lead_s: int,
    now: pd.Timestamp,
    inventory: Mapping[str, int],
) -> None:
    """Count the nodes labelled already, then label free ones until ``gpus`` are covered."""
    name = need.config_name
    have = 0
    for n in nodes:
        if n.state.config != name:
            continue
        if n.state.held is not None:
            n.why = f"labelled {name} but held ({n.state.held}): not counted"
            continue
        have += n.state.gpus
        entry["nodes_labelled"].append(n.state.name)
        n.why = f"labelled {name} already"
        if not (n.state.strategy == need.mode and n.state.replicas == need.replicas_per_gpu):
            n.why += " (GPU feature discovery does not show it yet)"
    entry["gpus_labelled"] = have
    pool_order = {p: i for i, p in enumerate(dict.fromkeys(n.pool.name for n in nodes))}
    # Without running GPU pods first (no drain), unknown next, busy last; then the config's
    # pool order and the name.
    free = sorted(
        (n for n in nodes if n.free),
        key=lambda n: (
            1 if n.state.gpu_pods is None else 2 if n.state.gpu_pods else 0,
            pool_order[n.pool.name],
            n.state.name,
        ),
    )
    covered = have
    chosen: list[_Node] = []
    for n in free:
        if covered >= gpus:
            break
        if n.state.gpus <= 0:
            continue
        chosen.append(n)
        covered += n.state.gpus
    entry["nodes_to_label"] = [n.state.name for n in chosen]
    entry["gpus_short"] = max(0, gpus - covered)
    for n in chosen:
        n.target, n.changed, n.free = name, True, False
        n.why = f"labelled {name} for {need.who()}"
        out.actions.append(_action(need, n, gpus, have, len(chosen), qname, lead_s, now, inventory))


def _action(
    need: SharedNeed,
    n: _Node,
    gpus: int,
    have: int,
    count: int,
    qname: str,
    lead_s: int,
    now: pd.Timestamp,
    inventory: Mapping[str, int],
) -> Action:
    """The ``device-plugin-config`` action labelling node ``n`` for ``need``."""
    name, s = need.config_name, n.state
    current_nodes = int(inventory.get(n.pool.name, n.pool.min_nodes))
    return Action(
        pool=n.pool.name,
        decision="relayout",
        current_nodes=current_nodes,
        target_nodes=current_nodes,
        at=iso(now),
        needed_at=iso(now + pd.Timedelta(seconds=n.pool.lead_time_s)),
        cost_delta_per_hour=0.0,
        reason=Reason(
            wording.SHARING_LABEL,
            {
                "quantile": qname,
                "model": need.model,
                "workloads": tuple(wl.name for wl in need.workloads),
                "group": need.group,
                "gpus": gpus,
                "replicas": need.replicas_per_gpu,
                "mode": need.mode,
                "lead_min": round(lead_s / 60),
                "have": have,
                "node": s.name,
                "node_gpus": s.gpus,
                "gpu_pods": s.gpu_pods,
                "count": count,
                "label": CONFIG_LABEL,
                "config": name,
            },
        ),
        kind=ACTION_KIND,
        details={
            "node": s.name,
            "mode": need.mode,
            "replicas": need.replicas_per_gpu,
            "layout": name,
            "from": s.config,
            "label": {CONFIG_LABEL: name},
            "device_plugin_config": need.entry,
            "workloads": [w.name for w in need.workloads],
            "group": need.group,
            "gpus": s.gpus,
        },
    )


def _to_come(
    need: SharedNeed,
    entry: dict[str, Any],
    fleet: Fleet,
    targets: Mapping[str, int],
    inventory: Mapping[str, int],
    out: SharingActions,
) -> None:
    """A note for the GPUs still short: nodes the tier plan adds, or none to label."""
    short = int(entry.get("gpus_short", 0))
    if short <= 0:
        return
    growing = []
    for p in _shareable_pools(fleet, need.model):
        current = int(inventory.get(p.name, p.min_nodes))
        target = int(targets.get(p.name, current))
        if target > current:
            growing.append(f"{p.name} {current} -> {target}")
    name = need.config_name
    if growing:
        out.notes.append(
            _note(
                wording.NOTE_SHARING_TO_COME,
                need,
                gpus_short=short,
                config=name,
                growing=tuple(growing),
                label=CONFIG_LABEL,
            )
        )
    else:
        out.notes.append(
            _note(
                wording.NOTE_SHARING_NO_NODE, need, gpus_short=short, config=name, model=need.model
            )
        )


def _left_shared(nodes: Mapping[str, list[_Node]], wanted: set[tuple[str, str]]) -> list[Reason]:
    """A note per node labelled with a ``tiercast-*`` config no need wants any more."""
    notes: list[Reason] = []
    for model in sorted(nodes):
        for n in nodes[model]:
            label = n.state.config
            if label is None or not label.startswith(TIERCAST_PREFIX) or (model, label) in wanted:
                continue
            n.why = f"labelled {label}, which no shared workload needs now: left shared"
            notes.append(
                Reason(
                    wording.NOTE_SHARING_LEFT,
                    {
                        "node": n.state.name,
                        "label": CONFIG_LABEL,
                        "config": label,
                        "kind": ACTION_KIND,
                    },
                )
            )
    return notes
