"""Relabel one node for the GPU Operator's MIG manager: cordon, drain, relabel, wait, uncordon.

Follows the core ``v1`` Node (``spec.unschedulable``), the ``policy/v1`` Eviction API
(PodDisruptionBudgets hold) and the MIG manager's node labels: it applies the mig-parted
entry that ``nvidia.com/mig.config`` names and reports ``nvidia.com/mig.config.state``.
The entry is first added to the mig-parted ConfigMap when missing
(:mod:`scaler.actuation.kube.mig_parted`); on ``failed`` or a timeout the previous label
is restored and the node uncordoned.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from scaler.actuation.kube.inventory import (
    MIG_CONFIG,
    MIG_STATE,
    NODES_PATH,
    NodeInfo,
    machine_owners,
    node_info,
    product_mismatch,
)
from scaler.actuation.kube.mig_parted import MigConfigRefused, MigPartedConfig
from scaler.actuation.kube.transport import (
    MERGE_PATCH,
    RETRY_STATUSES,
    STRATEGIC_MERGE_PATCH,
    KubeApiError,
    Session,
)
from scaler.config import Config
from scaler.plans import Action

log = logging.getLogger(__name__)

CORDONED_BY = "tiercast.io/cordoned"
"""Annotation on a node tiercast cordoned, so only tiercast's own cordon is undone."""


class MigRelabel:
    """Applies ``mig-layout`` actions; ``dry_run`` lists the waits instead of awaiting them."""

    def __init__(
        self,
        session: Session,
        config: Config,
        mig_parted: MigPartedConfig,
        dry_run: bool,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        self.session = session
        self.config = config
        self.kube = config.kubernetes
        self.mig_parted = mig_parted
        self.dry_run = dry_run
        self.clock = clock
        self.sleep = sleep

    def relabel(self, action: Action) -> tuple[bool, str]:
        """Cordon, drain, relabel, wait for the MIG manager, uncordon. Returns (ok, message)."""
        details = action.details
        name, want = _node_and_config(details)
        if not name or not want:
            missing = ", ".join(k for k, v in (("node", name), ("mig_config", want)) if not v)
            return False, f"mig-layout action for pool {action.pool} lacks details {missing}"
        name, want = str(name), str(want)
        path = f"{NODES_PATH}/{name}"
        node = self._read_node(path)
        if node is None:
            if details.get("new_node"):
                return True, f"node {name} is not provisioned yet; its layout waits for it"
            return False, f"node {name} not found; nothing changed"
        info = node_info(node, self.config, machine_owners(self.session, self.config))
        refused = self._refusal(name, info, action)
        if refused is not None:
            return False, refused
        annotations = node.get("metadata", {}).get("annotations") or {}
        ours = annotations.get(CORDONED_BY) == "true"
        if info.mig_config == want and info.mig_state == "success":
            return True, self._already_there(path, name, want, ours)
        try:
            self._add_entry(want, details)
        except MigConfigRefused as exc:
            if ours:
                self._uncordon(path)
            return False, f"node {name}: {exc}; nothing changed"
        cordoned = self._cordon(path, info) or ours
        return self._drain_relabel_wait(name, path, want, info.mig_config, cordoned)

    # ---- the steps, in the order they run ---------------------------------------------

    def _read_node(self, path: str) -> dict[str, Any] | None:
        """The node, or None where it does not exist."""
        try:
            return self.session.get(path)
        except KubeApiError as exc:
            if exc.not_found:
                return None
            raise

    def _refusal(self, name: str, info: NodeInfo, action: Action) -> str | None:
        """Why this node is not the action's to change (another pool, another GPU), or None."""
        if info.pool != action.pool:
            return f"node {name} is in pool {info.pool}, not {action.pool}; nothing changed"
        pool = next(p for p in self.config.pools if p.name == action.pool)
        mismatch = product_mismatch(info, pool)
        if mismatch is not None:
            return f"{mismatch}; nothing changed"
        return None

    def _already_there(self, path: str, name: str, want: str, ours: bool) -> str:
        """The node shows ``want`` applied: finish a previous run's cordon, if it left one."""
        if ours:  # a previous run stopped between success and uncordon: finish it
            self._uncordon(path)
            return f"node {name} already at {MIG_CONFIG}={want}; uncordoned"
        return f"node {name} already at {MIG_CONFIG}={want}; no change"

    def _add_entry(self, want: str, details: dict[str, Any]) -> None:
        """Make ``want`` an entry of the mig-parted ConfigMap; wait for the kubelet if written."""
        wrote = self.mig_parted.ensure(
            want, details.get("mig_parted_entry"), bool(details.get("needs_mixed_strategy"))
        )
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

    def _cordon(self, path: str, info: NodeInfo) -> bool:
        """Cordon the node unless it is unschedulable already; whether this call cordoned it."""
        if info.unschedulable:
            return False
        self.session.request(
            "PATCH",
            path,
            {
                "spec": {"unschedulable": True},
                "metadata": {"annotations": {CORDONED_BY: "true"}},
            },
            STRATEGIC_MERGE_PATCH,
        )
        return True

    def _drain_relabel_wait(
        self, name: str, path: str, want: str, previous: str | None, cordoned: bool
    ) -> tuple[bool, str]:
        """Drain, set the label, wait for the MIG manager; leave the node as found on failure.

        An API error undoes what was done (best effort) and still fails the cycle.
        """
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
            self._set_config(path, want)
            relabelled = True
            state = self._await_state(path)
            if state == "success":
                if cordoned:
                    self._uncordon(path)
                done = f"node {name}: {MIG_CONFIG} {previous} -> {want} ({MIG_STATE}=success)"
                return True, done + self.mig_parted.prune()
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

    def _set_config(self, path: str, want: str) -> None:
        # Dropping the state label in the same patch keeps a stale "success" from the
        # previous layout from being read as this change's result.
        self.session.request(
            "PATCH",
            path,
            {"metadata": {"labels": {MIG_CONFIG: want, MIG_STATE: None}}},
            MERGE_PATCH,
        )

    def _await_state(self, path: str) -> str:
        """The MIG manager's verdict: ``success``, ``failed``, or why none came in time."""
        if self.dry_run:
            self.session.note(
                "WAIT", path, until=f"{MIG_STATE}=success", timeout_s=self.kube.mig_timeout_s
            )
            return "success"
        return self._wait_for_state(path)

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


def _node_and_config(details: dict[str, Any]) -> tuple[Any, Any]:
    """The action's node and the ``nvidia.com/mig.config`` wanted on it (either may be missing)."""
    # The MIG planner writes the config name as ``layout`` and the label to set; every
    # spelling is accepted so the two sides can evolve independently.
    want = (
        details.get("mig_config")
        or (details.get("label") or {}).get(MIG_CONFIG)
        or details.get("layout")
    )
    return details.get("node"), want
