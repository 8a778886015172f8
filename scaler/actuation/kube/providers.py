"""The Kubernetes capacity provider: one pool mechanism per pool, the MIG relabel, the Events.

:class:`KubeProvider` is the :class:`scaler.actuation.protocol.CapacityProvider` the cycle
talks to. It reads the inventory from node labels (and Cluster API Machines) and
hands each action to its pool's provider, chosen by ``PoolConfig.provider.kind``, one
small class per mechanism, each in its own module:

* ``cluster-api`` (:mod:`~scaler.actuation.kube.cluster_api`): ``MachineDeployment``
  replicas through its ``scale`` subresource, refused when a managed topology or the
  cluster autoscaler owns them;
* ``karpenter`` (:mod:`~scaler.actuation.kube.karpenter`): a static NodePool's replicas
  through its scale subresource, or a NodePool's ``spec.limits["nvidia.com/gpu"]``; both
  reported ``accepted`` (not ``applied``) while the cluster cannot be seen to act on them;
* ``placeholder`` (:mod:`~scaler.actuation.kube.placeholders`): a negative PriorityClass
  and a Deployment of pause pods whose replicas fill the planned headroom, so any cluster
  autoscaler adds nodes early and real pods preempt the placeholders;
* ``capacity-buffer`` (:mod:`~scaler.actuation.kube.capacity_buffers`): the same headroom
  as an upstream ``CapacityBuffer`` (``autoscaling.x-k8s.io/v1beta1``) where the cluster
  serves that API, placeholders where it does not.

Actions of kind ``kueue-quota`` set the training ClusterQueue's GPU ``nominalQuota`` (and,
in a cohort, ``borrowingLimit``) per ResourceFlavor to the spare capacity the plan
forecasts for the next hour (:mod:`~scaler.actuation.kube.kueue`, built by
:meth:`KubeProvider.kueue_action` where ``kubernetes.kueue`` is set and Kueue is served).

Actions of kind ``mig-layout`` (``details``: ``node`` and ``mig_config``, or the MIG
planner's ``layout`` / ``label`` with its ``mig_parted_entry``; ``new_node`` for a node
not provisioned yet) relabel one node for the GPU Operator's MIG manager
(:mod:`~scaler.actuation.kube.mig_relabel`): the entry is added to the mig-parted
ConfigMap the ClusterPolicy names when it is not there
(:mod:`~scaler.actuation.kube.mig_parted`), then cordon, evict through the Eviction API
(PodDisruptionBudgets hold), set ``nvidia.com/mig.config``, wait for
``nvidia.com/mig.config.state=success``, uncordon; on ``failed`` or a timeout the
previous label is restored and the node uncordoned. :meth:`KubeProvider.mig_inventory`
gives the MIG planner the nodes' real layouts, and :meth:`KubeProvider.lead_time_observations`
gives ``lead_time_s: auto`` the node starts the cluster shows
(:mod:`~scaler.actuation.kube.readiness`).

Actions of kind ``device-plugin-config`` (``details``: ``node``, ``mode`` ``time-slicing``
or ``mps``, ``replicas``) share one node's GPUs through the device plugin's config
(:mod:`~scaler.actuation.kube.device_plugin`): the config added to the ConfigMap the
ClusterPolicy's ``devicePlugin.config.name`` names, the node drained where running pods
would lose their devices, ``nvidia.com/device-plugin.config`` set, GPU feature
discovery's ``nvidia.com/gpu.sharing-strategy`` and ``nvidia.com/gpu.replicas`` waited for.

Every action that changed something leaves an ``events.k8s.io/v1`` Event on each
object it changed, with the action's reason (:mod:`~scaler.actuation.kube.events`).

Safety: every write follows a fresh read and is skipped when the object is
already at (or, in the decision's direction, beyond) the target, so a second run
of the same plan changes nothing; writes carry the ``resourceVersion`` they were
computed from and are recomputed on 409 (:mod:`~scaler.actuation.kube.writes`); the
transport backs off on 429/5xx and timeouts; at most ``kubernetes.max_changes_per_cycle``
actions change anything in one cycle; and after an API failure the rest of the cycle is
skipped, so the record lists exactly what landed.
"""

from __future__ import annotations

import datetime
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from forecaster.errors import BadInputError
from scaler.actuation.kube import seeding
from scaler.actuation.kube.capacity_buffers import CapacityBufferPool
from scaler.actuation.kube.cluster_api import ClusterApiPool
from scaler.actuation.kube.device_plugin import (
    DEVICE_PLUGIN_CONFIG,
    DevicePluginConfigMap,
    DevicePluginRefused,
    SharingChange,
    SharingRelabel,
)
from scaler.actuation.kube.events import change_events, notice_event
from scaler.actuation.kube.inventory import (
    SHARING_ANNOTATION,
    NodeInfo,
    mig_node_states,
    node_mig_configs,
    nodes_per_pool,
    read_nodes,
    shared_inventory,
)
from scaler.actuation.kube.karpenter import KarpenterPool
from scaler.actuation.kube.kueue import KIND as KUEUE_QUOTA
from scaler.actuation.kube.kueue import KueueQuota
from scaler.actuation.kube.mig_parted import OPERATOR_CONFIG, MigConfigRefused, MigPartedConfig
from scaler.actuation.kube.mig_relabel import MigRelabel
from scaler.actuation.kube.placeholders import PlaceholderPool
from scaler.actuation.kube.pool import PoolProvider
from scaler.actuation.kube.readiness import observe_lead_times
from scaler.actuation.kube.transport import (
    KubeApiError,
    MemoryTransport,
    RetryPolicy,
    Session,
    Transport,
    connect,
)
from scaler.actuation.protocol import ActionResult, RecordingProvider
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
from scaler.planning.mig.state import MigNodeState
from scaler.planning.sharing import resolved_mode
from scaler.planning.sharing_actions import SharedNodeState
from scaler.plans import Action
from scaler.records import LeadTimeObservation

log = logging.getLogger(__name__)


def pool_provider(pool: PoolConfig, kube: KubernetesConfig) -> PoolProvider | None:
    """The mechanism of the pool's provider kind; None for ``recording`` pools."""
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
        self.mig_parted = MigPartedConfig(session, self.kube)
        self.mig = MigRelabel(
            session, config.pools, self.kube, self.mig_parted, dry_run, clock, sleep, wall
        )
        self.sharing = SharingRelabel(session, self.kube, self.mig, dry_run, clock, sleep, wall)
        kueue = config.kubernetes.kueue
        self.kueue = KueueQuota(kueue, self.kube) if kueue is not None else None

    # ---- CapacityProvider -------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        """The cluster's GPU nodes, read now."""
        return read_nodes(self.session, self.config.pools, self.kube)

    def inventory(self) -> dict[str, int]:
        """Nodes per pool: counted from node labels (Kubernetes pools), configured otherwise.

        A sharing change an earlier run left on a node (killed mid-change) is finished or
        rolled back first (:meth:`SharingRelabel.resume`), so no node stays cordoned by it.
        """
        self.session.calls = []
        nodes = self.nodes()
        if not self.dry_run and self.finish_sharing_changes(nodes):
            nodes = self.nodes()
        counts = nodes_per_pool(nodes, self.config.pools)
        out = {name: counts[name] for name in self.pools}
        if self.recording is not None:
            out.update(self.recording.inventory())
        return out

    def finish_sharing_changes(self, nodes: list[NodeInfo]) -> int:
        """Finish or roll back every sharing change recorded on ``nodes``; how many.

        An API error is logged and leaves the record for the next run (the cycle goes on)."""
        done = 0
        for node in nodes:
            if SHARING_ANNOTATION not in node.annotations:
                continue
            change = SharingChange.from_annotations(node.annotations)
            if change is None:
                log.warning(
                    "node %s: %s does not read; remove it and uncordon the node by hand",
                    node.name,
                    SHARING_ANNOTATION,
                )
                continue
            try:
                _, line = self.sharing.resume(node.name, node.labels, change)
            except KubeApiError as exc:
                log.error("node %s: sharing change left as it was (%s)", node.name, exc)
                continue
            log.warning("%s", line)
            done += 1
        return done

    def apply(self, action: Action) -> ActionResult:
        self.session.calls = []
        if (
            self.recording is not None
            and action.pool not in self.pools
            and (action.kind != KUEUE_QUOTA)
        ):
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
                ok, message = self.mig.relabel(action)
            elif action.kind == DEVICE_PLUGIN_CONFIG:
                ok, message = self.sharing.apply(action)
            elif action.kind == KUEUE_QUOTA and self.kueue is not None:
                ok, message = self.kueue.apply(self.session, action)
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

    def record_event(self, reason: str, note: str) -> None:
        """An Event about tiercast itself (``notice_event``) in its pod's namespace; a
        refused Event is logged, never raised."""
        if self.dry_run or not self.kube.events:
            return
        when = self.wall().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        namespace = os.environ.get("POD_NAMESPACE") or "default"
        path, body = notice_event(
            reason, note, when, self.instance, namespace, os.environ.get("POD_NAME")
        )
        try:
            self.session.request("POST", path, body)
        except KubeApiError as exc:
            log.warning("event %s not recorded: %s", reason, exc)

    def stop_waits_on(self, stop: threading.Event) -> None:
        """End the long waits when ``stop`` is set: the MIG relabel's (ConfigMap refresh,
        drain, MIG manager; the node keeps its recorded step and the next run finishes it)
        and the sharing change's, which share them (ConfigMap refresh, drain, GPU feature
        discovery, the MPS daemon; the change is rolled back at once)."""
        self.mig.stopping = stop.is_set
        if self.sleep is time.sleep:
            self.mig.sleep = stop.wait

    # ---- what the MIG planner reads --------------------------------------------------

    def mig_inventory(
        self,
    ) -> tuple[dict[str, list[MigNodeState]] | None, dict[str, Any] | None]:
        """The MIG-managed pools' nodes and the mig-parted entries the MIG manager can apply.

        ``(None, None)`` when there are no MIG pools or no ClusterPolicy (no GPU Operator:
        the planner then reads the config's ``mig_layouts``).
        """
        if not any(p.mig_layouts is not None for p in self.config.pools):
            return None, None
        policy = self.mig_parted.policy()
        if policy is None:
            return None, None
        strategy = ((policy.get("spec") or {}).get("mig") or {}).get("strategy")
        path = self.mig_parted.config_map_path(policy)
        try:
            _, data = self.mig_parted.read(path)
            configs: dict[str, Any] = data["mig-configs"]
        except (KubeApiError, MigConfigRefused) as exc:
            log.warning("mig-parted config unreadable (%s): MIG nodes are held", exc)
            configs = {}
        nodes = self.nodes()
        own: dict[str, dict[str, Any]] = {}
        if path.rsplit("/", 1)[-1] == OPERATOR_CONFIG:
            # No custom config: the MIG manager applies what it generated per node.
            mig_pools = {p.name for p in self.config.pools if p.mig_layouts is not None}
            own = node_mig_configs(
                self.session,
                self.kube.gpu_operator_namespace,
                [n.name for n in nodes if n.pool in mig_pools],
            )
        states = mig_node_states(nodes, self.config.pools, configs, strategy, own)
        # Pools this provider does not act on (``recording``) keep their configured layouts.
        return {k: v for k, v in states.items() if k in self.pools}, configs

    # ---- what the sharing plan reads -----------------------------------------------

    def sharing_inventory(
        self,
    ) -> tuple[dict[str, list[SharedNodeState]] | None, str | None]:
        """The nodes of the pools this provider acts on that have no ``mig_layouts``, as
        the sharing plan reads them (:func:`scaler.actuation.kube.inventory.shared_inventory`),
        and why no node's sharing can change (None when it can).

        ``(None, reason)`` where the GPU Operator names no device plugin config ConfigMap
        (no ClusterPolicy, no ``devicePlugin.config.name``) or cannot run a mode the
        workloads are planned in (MPS beside the ``mixed`` MIG strategy): every action
        would be refused.
        """
        config_map = DevicePluginConfigMap(self.session, self.kube)
        try:
            policy = config_map.policy()
            config_map.path(policy)
            for mode in sorted({resolved_mode(w) for w in self.config.workloads}):
                config_map.check_mode(policy, mode)
        except DevicePluginRefused as exc:
            return None, f"the cluster cannot take device plugin configs ({exc})"
        read = shared_inventory(self.session, self.config.pools, self.kube)
        return {k: v for k, v in read.items() if k in self.pools}, None

    # ---- the Kueue quota ------------------------------------------------------------

    def kueue_action(self, section: dict[str, Any], at: str) -> Action | None:
        """The action setting the training ClusterQueue's quota to the plan's
        ``workloads.kueue`` section, against what it holds now; None where no
        ``kubernetes.kueue`` is configured or Kueue or the ClusterQueue is not there."""
        if self.kueue is None:
            return None
        self.session.calls = []
        return self.kueue.action(section, at, self.session)

    # ---- what lead_time_s: auto reads ------------------------------------------------

    def lead_time_observations(
        self, pools: Sequence[str] | None = None
    ) -> list[LeadTimeObservation]:
        """Node starts the cluster shows for ``pools`` (default: the ``lead_time_s: auto``
        ones) among the pools this provider acts on (:mod:`~scaler.actuation.kube.readiness`)."""
        names = (
            list(pools)
            if pools is not None
            else [p.name for p in self.config.pools if p.lead_time_auto]
        )
        acted_on = [n for n in names if n in self.pools]
        return observe_lead_times(self.session, self.config.pools, self.kube, acted_on)

    # ---- dry-run without a cluster ------------------------------------------------

    def seed(self, store: MemoryTransport) -> None:
        """Fill ``store`` with the nodes and objects the config's ``current_nodes`` describe.

        MIG-managed pools' nodes carry the labels and devices their ``mig_layouts`` give,
        with a ClusterPolicy and mig-parted ConfigMap as a GPU Operator cluster has them.
        """
        seeding.seed(store, self.config, self.pools)


def has_kubernetes_pools(config: Config) -> bool:
    """Whether any pool is acted on through the Kubernetes API."""
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
        raise BadInputError(
            "--dry-run=server needs a cluster: give --kubeconfig or --context, or run with "
            "--dry-run (client) to plan against an in-memory copy of the cluster"
        )

    def cluster() -> Transport:
        return transport or connect(kubeconfig, context, policy, kube.request_timeout_s)

    if not dry_run:
        try:
            live = cluster()
        except BadInputError as exc:
            # No credentials: the one case where the dry-run is the way forward.
            raise type(exc)(f"{exc}; run with --dry-run to plan without a cluster") from exc
        return KubeProvider(config, Session(live))
    if server_dry_run:
        return KubeProvider(config, Session(cluster(), server_dry_run=True), dry_run=True)
    if have_cluster:
        return KubeProvider(config, Session(MemoryTransport(upstream=cluster())), dry_run=True)
    store = MemoryTransport()
    provider = KubeProvider(config, Session(store), dry_run=True)
    provider.seed(store)
    return provider
