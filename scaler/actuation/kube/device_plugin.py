"""Time-slicing and MPS through the GPU Operator: the device plugin's sharing config, per node.

NVIDIA's device plugin reads a ``version: v1`` config whose ``sharing.timeSlicing`` or
``sharing.mps`` gives each resource (``nvidia.com/gpu``) a number of ``replicas``
(NVIDIA/k8s-device-plugin, commit 1b826ac, ``api/config/v1/config.go``, ``sharing.go``,
``replicas.go``). The GPU Operator mounts the ConfigMap its ClusterPolicy names in
``spec.devicePlugin.config.name``, one key per named config, and the device plugin's
config manager picks the key a node's ``nvidia.com/device-plugin.config`` label names
(``cmd/config-manager/main.go``, which acts when the label's value changes). GPU feature
discovery then labels the node ``nvidia.com/gpu.sharing-strategy`` (``time-slicing`` or
``mps``), ``nvidia.com/gpu.replicas`` and the product with ``-SHARED``
(``internal/lm/resource.go``), and the device plugin advertises ``replicas`` devices per
GPU.

A ``device-plugin-config`` action (``details``: ``node``, ``mode`` and ``replicas``)
is applied as a MIG relayout is (:mod:`scaler.actuation.kube.mig_relabel`): the config
is added to that ConfigMap where missing (a JSON merge patch with the ``resourceVersion``
read; a key of the same name with other content is never replaced), the kubelet's
refresh of the mounted copy waited out (``kubernetes.mig_config_sync_s``); a node whose
running GPU pods would lose their devices (fewer devices advertised, or another sharing
strategy under them) is cordoned and drained through the Eviction API first; then the
label is set, GPU feature discovery's labels waited for (``kubernetes.mig_timeout_s``),
and the node uncordoned. On a timeout the previous label is restored. Refused before
any change: no ClusterPolicy, no ``devicePlugin.config.name``, MPS where the
ClusterPolicy's MIG strategy is ``mixed`` (the device plugin exits with "using
--mig-strategy=mixed is not supported with MPS", ``cmd/nvidia-device-plugin/main.go``),
``replicas`` below 2 (``replicas.go``: "number of replicas must be >= 2"), or more than
48 MPS clients (``cmd/mps-control-daemon/mps/device.go``).

Dry-run is the same code: the writes go through the session (server-side dry-run or the
in-memory cluster) with the exact ConfigMap data and label in their bodies, and the
waits are noted instead of awaited.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import yaml

from scaler.actuation.kube.inventory import NODES_PATH, SHARING_ANNOTATION
from scaler.actuation.kube.karpenter import DO_NOT_DISRUPT, karpenter_managed
from scaler.actuation.kube.mig_parted import CLUSTER_POLICIES
from scaler.actuation.kube.mig_relabel import CORDONED_BY, MigRelabel, Stopped
from scaler.actuation.kube.transport import (
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    KubeApiError,
    Session,
)
from scaler.actuation.kube.writes import still_conflicting
from scaler.config import KubernetesConfig
from scaler.planning.mig.state import Relayout, read_record, record_annotation, utc_text
from scaler.planning.sharing import MPS_MAX_CLIENTS, SharingMode, device_plugin_config
from scaler.planning.sharing_actions import (
    ACTION_KIND,
    CONFIG_LABEL,
    REPLICAS_LABEL,
    SHARING_STRATEGY_LABEL,
)
from scaler.plans import Action

log = logging.getLogger(__name__)

DEVICE_PLUGIN_CONFIG = ACTION_KIND
"""The action kind this module applies (the sharing plan emits it)."""
SHARING_STRATEGY = SHARING_STRATEGY_LABEL
REPLICAS = REPLICAS_LABEL
GPU_RESOURCE = "nvidia.com/gpu"
SEEDED_DEVICE_PLUGIN_CONFIG = "tiercast-device-plugin-config"
"""The device plugin's ConfigMap ``deploy/`` grants tiercast (docs/kubernetes.md)."""


class DevicePluginRefused(Exception):
    """A sharing change that cannot take effect (no GPU Operator, a config it would reject)."""


def config_name(mode: str, replicas: int) -> str:
    """The ConfigMap key tiercast writes for ``mode`` x ``replicas``: ``tiercast-mps-4``."""
    return device_plugin_config(_mode(mode), replicas)[0]


def _mode(mode: str) -> SharingMode:
    if mode == "mps":
        return "mps"
    if mode == "time-slicing":
        return "time-slicing"
    raise DevicePluginRefused(f"mode {mode!r} is not time-slicing or mps")


def sharing_config(mode: str, replicas: int) -> dict[str, Any]:
    """The device plugin's ``version: v1`` config sharing every GPU ``replicas`` ways.

    Raises :class:`DevicePluginRefused` for what the device plugin would reject.
    """
    shared = _mode(mode)
    if replicas < 2:
        raise DevicePluginRefused(f"replicas {replicas}: the device plugin needs at least 2")
    if mode == "mps" and replicas > MPS_MAX_CLIENTS:
        raise DevicePluginRefused(
            f"replicas {replicas}: an MPS server takes at most {MPS_MAX_CLIENTS} clients"
        )
    return dict(device_plugin_config(shared, replicas)[1])


def render(entry: dict[str, Any]) -> str:
    """The ConfigMap value of ``entry``, as written (stable key order)."""
    return yaml.safe_dump(entry, sort_keys=False)


class DevicePluginConfigMap:
    """The ClusterPolicy and the device plugin's config ConfigMap it names."""

    def __init__(self, session: Session, kube: KubernetesConfig) -> None:
        self.session = session
        self.kube = kube

    def policy(self) -> dict[str, Any]:
        """The ClusterPolicy; :class:`DevicePluginRefused` where there is none."""
        try:
            return self.session.get(f"{CLUSTER_POLICIES}/{self.kube.cluster_policy}")
        except KubeApiError as exc:
            if exc.not_found:
                raise DevicePluginRefused(
                    f"no ClusterPolicy {self.kube.cluster_policy} (is NVIDIA's GPU Operator "
                    "installed?)"
                ) from exc
            raise

    def check_mode(self, policy: dict[str, Any], mode: str) -> None:
        """:class:`DevicePluginRefused` where the device plugin cannot run ``mode`` under
        ``policy``: MPS beside the ``mixed`` MIG strategy."""
        strategy = ((policy.get("spec") or {}).get("mig") or {}).get("strategy")
        if mode == "mps" and strategy == "mixed":
            raise DevicePluginRefused(
                "the ClusterPolicy's mig.strategy is mixed, which the device plugin does "
                "not run with MPS"
            )

    def path(self, policy: dict[str, Any]) -> str:
        """The ConfigMap ``spec.devicePlugin.config.name`` names."""
        spec = policy.get("spec") or {}
        name = ((spec.get("devicePlugin") or {}).get("config") or {}).get("name")
        if not name:
            raise DevicePluginRefused(
                f"ClusterPolicy {self.kube.cluster_policy} names no devicePlugin.config.name; "
                "create a ConfigMap for the device plugin's configs and point it there"
            )
        return f"/api/v1/namespaces/{self.kube.gpu_operator_namespace}/configmaps/{name}"

    def ensure(self, path: str, key: str, entry: dict[str, Any]) -> bool:
        """Add ``key: entry`` to the ConfigMap at ``path``, keeping every key there; whether
        it was added (False: already there, the same)."""
        text = render(entry)
        for _ in range(self.kube.conflict_retries + 1):
            cm = self.session.get(path)
            data = cm.get("data") or {}
            if key in data:
                try:
                    same = yaml.safe_load(data[key]) == entry
                except yaml.YAMLError:
                    same = False
                if not same:
                    raise DevicePluginRefused(
                        f"ConfigMap {path.rsplit('/', 1)[-1]} already has a different {key}; "
                        "tiercast never replaces one"
                    )
                return False
            body = {
                "metadata": {"resourceVersion": cm["metadata"]["resourceVersion"]},
                "data": {key: text},
            }
            try:
                self.session.request("PATCH", path, body, MERGE_PATCH)
            except KubeApiError as exc:
                if exc.conflict:
                    continue
                raise
            return True
        raise still_conflicting(path, self.kube.conflict_retries)


MPS_DAEMON_APP = "nvidia-device-plugin-mps-control-daemon"
"""The ``app`` label of the GPU Operator's MPS control daemon pods
(NVIDIA/gpu-operator ``assets/state-mps-control-daemon/0400_daemonset.yaml``)."""


@dataclass(frozen=True)
class SharingChange:
    """A sharing change tiercast started on a node, as :data:`SHARING_ANNOTATION` records it.

    Written in the patch that cordons (or, with no cordon, the one that relabels), moved on
    to ``relabelled`` in the patch that sets ``nvidia.com/device-plugin.config``, removed in
    the patch that uncordons; so a run killed at any step leaves the node saying what to
    undo, and the next run finishes or rolls it back (:meth:`SharingRelabel.resume`).
    """

    step: str
    """``draining`` (label unchanged) or ``relabelled`` (label at ``target``)."""
    target: str
    previous: str | None
    mode: str
    replicas: int
    since: str
    cordoned: bool = False
    """Whether tiercast cordoned the node (and alone uncordons it)."""
    do_not_disrupt: bool = False
    """Whether tiercast set ``karpenter.sh/do-not-disrupt`` (and alone removes it)."""

    def to_annotation(self) -> str:
        return record_annotation(self)

    @classmethod
    def from_annotations(cls, annotations: dict[str, str] | None) -> SharingChange | None:
        """The change a node's annotations record; None when none or unreadable."""
        return read_record(cls, annotations, SHARING_ANNOTATION, ("draining", "relabelled"))


class SharingRelabel:
    """Applies ``device-plugin-config`` actions; ``dry_run`` notes the waits instead.

    The drain is the MIG relabel's (``nodes``) and the cordon marks the node the same way,
    so a node someone else cordoned stays cordoned; a node Karpenter launched gets
    ``karpenter.sh/do-not-disrupt`` while it drains, removed after if tiercast set it.
    Every wait is the MIG relabel's stop-aware pause, so a shutdown request ends it
    (:class:`~scaler.actuation.kube.mig_relabel.Stopped`): the change is then rolled
    back at once; a run killed outright leaves its :class:`SharingChange` on the node
    for :meth:`resume`.
    """

    def __init__(
        self,
        session: Session,
        kube: KubernetesConfig,
        nodes: MigRelabel,
        dry_run: bool,
        clock: Callable[[], float],
        sleep: Callable[[float], Any],
        wall: Callable[[], datetime.datetime],
    ) -> None:
        self.session = session
        self.kube = kube
        self.config_map = DevicePluginConfigMap(session, kube)
        self.nodes = nodes
        self.dry_run = dry_run
        self.clock = clock
        self.sleep = sleep
        self.wall = wall

    def apply(self, action: Action) -> tuple[bool, str]:
        """Share ``details.node``'s GPUs ``details.replicas`` ways by ``details.mode``."""
        details = action.details
        name, mode = details.get("node"), details.get("mode")
        try:
            replicas = int(details.get("replicas", 0))
            entry = sharing_config(str(mode), replicas)
        except (TypeError, ValueError, DevicePluginRefused) as exc:
            return False, f"device-plugin-config action for pool {action.pool}: {exc}"
        if not name:
            return False, f"device-plugin-config action for pool {action.pool} lacks details node"
        path = f"{NODES_PATH}/{name}"
        try:
            node = self.session.get(path)
        except KubeApiError as exc:
            if exc.not_found:
                return False, f"node {name} not found; nothing changed"
            raise
        key = config_name(str(mode), replicas)
        meta = node.get("metadata", {})
        labels = meta.get("labels") or {}
        pending = SharingChange.from_annotations(meta.get("annotations"))
        if pending is not None:
            # An earlier run's change first (a stale plan, or a run that skipped the
            # inventory): finished or rolled back, then this action from what is left.
            log.warning("%s", self.resume(str(name), labels, pending)[1])
            node = self.session.get(path)
            meta = node.get("metadata", {})
            labels = meta.get("labels") or {}
        if labels.get(CONFIG_LABEL) == key and _advertised(labels, str(mode), replicas):
            return True, f"node {name} already shares its GPUs {replicas} ways by {mode}"
        try:
            cm_path = self._ensure_config(key, str(mode), entry)
        except DevicePluginRefused as exc:
            return False, f"node {name}: {exc}; nothing changed"
        except Stopped:
            return False, f"node {name}: stopped by shutdown before any node change"
        change = SharingChange(
            "draining", key, labels.get(CONFIG_LABEL), str(mode), replicas, utc_text(self.wall())
        )
        why = self._change(str(name), path, node, change)
        if why is not None:
            return False, why
        verb = "would share" if self.dry_run else "shares"
        return True, (
            f"node {name} {verb} each GPU {replicas} ways by {mode} ({CONFIG_LABEL}={key}, "
            f"ConfigMap {cm_path.rsplit('/', 1)[-1]} key {key}: {render(entry).strip()!r})"
        )

    def _ensure_config(self, key: str, mode: str, entry: dict[str, Any]) -> str:
        """The ConfigMap holding ``key`` (added where missing, its refresh waited out).

        A ConfigMap tiercast may not read or write (403: the ClusterPolicy names one outside
        RBAC's ``resourceNames``) refuses this action, not the cycle.
        """
        policy = self.config_map.policy()
        self.config_map.check_mode(policy, mode)
        cm_path = self.config_map.path(policy)
        try:
            added = self.config_map.ensure(cm_path, key, entry)
        except KubeApiError as exc:
            if exc.status != 403:
                raise
            raise DevicePluginRefused(
                f"ConfigMap {cm_path.rsplit('/', 1)[-1]} (the ClusterPolicy's "
                "devicePlugin.config.name) is not one tiercast's RBAC grants; point the "
                f"ClusterPolicy at {SEEDED_DEVICE_PLUGIN_CONFIG} or add it to the Role's "
                "resourceNames"
            ) from exc
        if added:
            self._pause(self.kube.mig_config_sync_s, f"the mounted copy of {key}")
        return cm_path

    def _change(
        self, name: str, path: str, node: dict[str, Any], change: SharingChange
    ) -> str | None:
        """Cordon and drain where pods would lose devices, relabel, wait, uncordon; why it
        failed (rolled back), or None when done."""
        labels = node.get("metadata", {}).get("labels") or {}
        recorded = False
        if self._loses_devices(name, labels, change.mode, change.replicas):
            change, recorded = self._cordon(path, node, change), True
            drain = Relayout("draining", change.target, change.previous, change.since)
            try:
                why = self.nodes._drain(name, drain)
            except Stopped:
                self._end(path, change, restore=False)
                return (
                    f"node {name}: stopped by shutdown during the drain; node uncordoned, "
                    "sharing not changed"
                )
            if why is not None:
                self._end(path, change, restore=False)
                return f"node {name}: {why}; sharing not changed"
        relabel = change.previous != change.target
        if relabel or recorded:
            # The config manager acts on a change of the value only: a node labelled
            # already (an earlier run stopped while waiting) is waited for, not relabelled.
            change, recorded = self._relabel(path, change, relabel), True
        try:
            done = self._await_labels(path, change.mode, change.replicas)
            if done is None and change.mode == "mps":
                done = self._await_mps_daemon(name)
        except Stopped as stop:
            if recorded:
                self._end(path, change, restore=relabel)
            return (
                f"node {name}: stopped by shutdown while waiting for {stop.step}; "
                f"{CONFIG_LABEL} {'restored to ' + (change.previous or 'unset') if relabel else 'unchanged'}"
                f"{', node uncordoned' if change.cordoned else ''}"
            )
        if recorded:
            self._end(path, change, restore=done is not None and relabel)
        if done is not None:
            if not relabel:
                return f"node {name}: {done}"
            return f"node {name}: {done}; {CONFIG_LABEL} restored to {change.previous or 'unset'}"
        return None

    def resume(self, name: str, labels: dict[str, str], change: SharingChange) -> tuple[bool, str]:
        """Finish or roll back the change an earlier run left recorded on ``node``: finished
        (uncordoned) where the node shows the target shared, and for MPS its daemon up; rolled
        back otherwise (the previous label put back, uncordoned). No wait: whatever the
        node's ``labels`` show now decides. Returns whether the target was reached, and a
        line."""
        path = f"{NODES_PATH}/{name}"
        reached = (
            change.step == "relabelled"
            and labels.get(CONFIG_LABEL) == change.target
            and _advertised(labels, change.mode, change.replicas)
            and (change.mode != "mps" or self._mps_daemon_ready(name))
        )
        foreign = labels.get(CONFIG_LABEL) not in (change.target, change.previous)
        restore = change.step == "relabelled" and not reached and not foreign
        self._end(path, change, restore=restore)
        if reached:
            return True, (
                f"node {name}: the sharing change to {change.target} an earlier run left "
                f"({change.step} since {change.since}) is finished; node uncordoned"
            )
        return False, (
            f"node {name}: the sharing change to {change.target} an earlier run left "
            f"({change.step} since {change.since}) is rolled back; {CONFIG_LABEL} "
            f"{'restored to ' + (change.previous or 'unset') if restore else 'unchanged'}, "
            "node uncordoned"
        )

    def _cordon(self, path: str, node: dict[str, Any], change: SharingChange) -> SharingChange:
        """Cordon the node (marked as tiercast's) and, on a node Karpenter launched, set
        ``karpenter.sh/do-not-disrupt`` (Karpenter's disruption ignores cordon), with the
        change recorded, in one patch; the change with what tiercast did."""
        meta = node.get("metadata", {})
        annotations = meta.get("annotations") or {}
        cordon = not node.get("spec", {}).get("unschedulable")
        guard = karpenter_managed(meta.get("labels") or {}) and (
            annotations.get(DO_NOT_DISRUPT) != "true"
        )
        change = replace(change, cordoned=cordon, do_not_disrupt=guard)
        written: dict[str, Any] = {SHARING_ANNOTATION: change.to_annotation()}
        body: dict[str, Any] = {"metadata": {"annotations": written}}
        if cordon:
            body["spec"] = {"unschedulable": True}
            written[CORDONED_BY] = "true"
        if guard:
            written[DO_NOT_DISRUPT] = "true"
        self.session.request("PATCH", path, body, STRATEGIC_MERGE_PATCH)
        return change

    def _relabel(self, path: str, change: SharingChange, relabel: bool) -> SharingChange:
        """Set the label (where it changes) and move the record on, in one patch."""
        moved = replace(change, step="relabelled", since=utc_text(self.wall()))
        meta: dict[str, Any] = {"annotations": {SHARING_ANNOTATION: moved.to_annotation()}}
        if relabel:
            meta["labels"] = {CONFIG_LABEL: change.target}
        self.session.request("PATCH", path, {"metadata": meta}, MERGE_PATCH)
        return moved

    def _end(self, path: str, change: SharingChange, restore: bool) -> None:
        """End the change in one patch: its record, tiercast's cordon and do-not-disrupt
        removed, and with ``restore`` the previous label put back."""
        annotations: dict[str, Any] = {SHARING_ANNOTATION: None}
        body: dict[str, Any] = {"metadata": {"annotations": annotations}}
        if change.cordoned:
            body["spec"] = {"unschedulable": None}
            annotations[CORDONED_BY] = None
        if change.do_not_disrupt:
            annotations[DO_NOT_DISRUPT] = None
        if restore:
            body["metadata"]["labels"] = {CONFIG_LABEL: change.previous}
        self.session.request("PATCH", path, body, MERGE_PATCH)

    def _loses_devices(self, name: str, labels: dict[str, str], mode: str, replicas: int) -> bool:
        """Whether running pods on ``name`` use GPUs the new config takes away: fewer devices
        per GPU, or another strategy under them (MPS clients must restart under it)."""
        now_strategy = labels.get(SHARING_STRATEGY) or "none"
        try:
            now_replicas = max(1, int(labels.get(REPLICAS) or 1))
        except ValueError:
            now_replicas = 1
        if now_strategy == mode and replicas >= now_replicas:
            return False
        if now_strategy in ("none", "") and mode == "time-slicing":
            # Time-slicing adds devices over the same GPUs: running pods keep theirs.
            return False
        try:
            pods = self.session.get("/api/v1/pods", {"fieldSelector": f"spec.nodeName={name}"})
        except KubeApiError as exc:
            if not (self.dry_run and exc.status == 403):
                raise
            return True  # the dry-run install lists no pods: shown as the drain it may need
        for pod in pods.get("items", []):
            if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                continue
            for c in pod.get("spec", {}).get("containers", []):
                resources = c.get("resources") or {}
                if any(GPU_RESOURCE in (resources.get(k) or {}) for k in ("limits", "requests")):
                    return True
        return False

    def _await_labels(self, path: str, mode: str, replicas: int) -> str | None:
        """Wait for GPU feature discovery's labels to show the sharing; why not, or None.

        A shutdown request ends the wait (:class:`Stopped`)."""
        timeout = self.kube.mig_timeout_s
        if self.dry_run:
            self.session.note(
                "WAIT",
                path,
                until=f"{SHARING_STRATEGY}={mode},{REPLICAS}={replicas}",
                timeout_s=timeout,
            )
            return None
        deadline = self.clock() + timeout
        while True:
            labels = self.session.get(path).get("metadata", {}).get("labels") or {}
            if _advertised(labels, mode, replicas):
                return None
            if self.clock() >= deadline:
                return (
                    f"GPU feature discovery showed no {SHARING_STRATEGY}={mode} with "
                    f"{REPLICAS}={replicas} within {timeout} s"
                )
            self._pause(self.kube.poll_interval_s, "GPU feature discovery's labels")

    def _mps_daemon_ready(self, name: str) -> bool:
        """Whether the GPU Operator's MPS control daemon pod on ``name`` is Ready: the device
        plugin serves MPS devices only once the daemon is up (NVIDIA/k8s-device-plugin
        ``cmd/mps-control-daemon/main.go`` writes ``/mps/.ready`` when its daemons started)."""
        pods = self.session.get(
            f"/api/v1/namespaces/{self.kube.gpu_operator_namespace}/pods",
            {"labelSelector": f"app={MPS_DAEMON_APP}", "fieldSelector": f"spec.nodeName={name}"},
        )
        for pod in pods.get("items", []):
            for cond in (pod.get("status") or {}).get("conditions") or []:
                if cond.get("type") == "Ready" and cond.get("status") == "True":
                    return True
        return False

    def _await_mps_daemon(self, name: str) -> str | None:
        """Wait (``mig_timeout_s``) for the MPS control daemon on ``name`` to be Ready, so
        the node is not uncordoned before MPS clients can start; why not, or None."""
        timeout = self.kube.mig_timeout_s
        if self.dry_run:
            self.session.note(
                "WAIT", name, until=f"pod app={MPS_DAEMON_APP} Ready", timeout_s=timeout
            )
            return None
        deadline = self.clock() + timeout
        while not self._mps_daemon_ready(name):
            if self.clock() >= deadline:
                return f"the MPS control daemon on {name} was not Ready within {timeout} s"
            self._pause(self.kube.poll_interval_s, "the MPS control daemon")
        return None

    def _pause(self, seconds: float, what: str) -> None:
        """The MIG relabel's pause: a shutdown request ends it (:class:`Stopped`)."""
        if self.dry_run:
            self.session.note("WAIT", what, seconds=seconds)
            return
        self.nodes._pause(seconds, what)


def _advertised(labels: dict[str, str], mode: str, replicas: int) -> bool:
    """Whether GPU feature discovery's labels show ``mode`` x ``replicas``."""
    return labels.get(SHARING_STRATEGY) == mode and labels.get(REPLICAS) == str(replicas)
