"""Relabel one node for the GPU Operator's MIG manager: cordon, drain, relabel, wait, uncordon.

Follows the core ``v1`` Node (``spec.unschedulable``), the ``policy/v1`` Eviction API
(PodDisruptionBudgets hold) and the MIG manager's node labels: it applies the mig-parted
entry that ``nvidia.com/mig.config`` names, only when that label's value changes
(NVIDIA/mig-parted ``cmd/nvidia-mig-manager/main.go``, the informer's ``UpdateFunc``),
and reports ``nvidia.com/mig.config.state``. The entry is first added to the mig-parted
ConfigMap when missing (:mod:`scaler.actuation.kube.mig_parted`) and the kubelet's refresh
of the MIG manager's mounted copy waited out; on ``failed`` or a timeout the previous
label is restored and the node uncordoned.

A relayout outlives a CronJob run: the refresh, the drain (``drain_timeout_s``) and the
MIG manager (up to 5 minutes per GPU operand it stops,
``pkg/mig/reconfigure/reconfigure.go``) add up to more than one run's deadline. So the
step reached is kept on the node itself, in the :data:`~scaler.planning.mig.state.RELAYOUT_ANNOTATION`
annotation, written in the same patch as the cordon and moved on in the same patch as
the relabel. The node, not the run records, holds it because the CronJob's pod is new
each run and the service's replicas each have their own records, while whichever
replica leads next reads the same node; and the record goes with the node when the node
goes. The next run's planner sees the record (:func:`~scaler.planning.mig.state.with_relayout`)
and plans a ``resume`` action, which :meth:`MigRelabel.relabel` finishes from the
recorded step, whatever stopped the last run (SIGTERM at the Job's deadline, SIGKILL,
an API failure). The drain and the MIG manager's wait are timed from the step's start,
so resuming never extends them. A shutdown request ends every wait at once
(:meth:`MigRelabel.relabel` then reports the step it left the node at).

On a node Karpenter launched, ``karpenter.sh/do-not-disrupt: "true"`` is set for the
relayout (Karpenter's disruption ignores cordon) and removed after, only if tiercast set it.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
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
from scaler.actuation.kube.karpenter import DO_NOT_DISRUPT, karpenter_managed
from scaler.actuation.kube.mig_parted import Ensured, MigConfigRefused, MigPartedConfig
from scaler.actuation.kube.transport import (
    MERGE_PATCH,
    RETRY_STATUSES,
    STRATEGIC_MERGE_PATCH,
    KubeApiError,
    Session,
)
from scaler.config import KubernetesConfig, PoolConfig
from scaler.planning.mig.state import RELAYOUT_ANNOTATION, Relayout, parse_utc, utc_text
from scaler.plans import Action

log = logging.getLogger(__name__)

CORDONED_BY = "tiercast.io/cordoned"
"""Annotation on a node tiercast cordoned, so only tiercast's own cordon is undone."""


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class Stopped(Exception):
    """A shutdown request ended a wait; ``step`` says what the node was waiting for."""

    def __init__(self, step: str) -> None:
        super().__init__(step)
        self.step = step


class MigRelabel:
    """Applies ``mig-layout`` actions; ``dry_run`` lists the waits instead of awaiting them.

    ``clock``/``sleep`` time the waits within a run; ``wall`` (UTC) times the steps kept on
    the node across runs; ``stopping`` is checked around every wait (a shutdown request).
    """

    def __init__(
        self,
        session: Session,
        pools: Sequence[PoolConfig],
        kube: KubernetesConfig,
        mig_parted: MigPartedConfig,
        dry_run: bool,
        clock: Callable[[], float],
        sleep: Callable[[float], Any],
        wall: Callable[[], datetime.datetime] = _utc_now,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.session = session
        self.pools = tuple(pools)
        self.kube = kube
        self.mig_parted = mig_parted
        self.dry_run = dry_run
        self.clock = clock
        self.sleep = sleep
        self.wall = wall
        self.stopping = stopping

    def relabel(self, action: Action) -> tuple[bool, str]:
        """Cordon, drain, relabel, wait for the MIG manager, uncordon. Returns (ok, message).

        A node with a relayout recorded on it has that one finished first, from the step
        it reached (the action may be the planner's ``resume`` of it, or a stale plan).
        """
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
        info = node_info(node, self.pools, self.kube, machine_owners(self.session, self.pools))
        refused = self._refusal(name, info, action)
        if refused is not None:
            return False, refused
        annotations = node.get("metadata", {}).get("annotations") or {}
        ours = annotations.get(CORDONED_BY) == "true"
        record = Relayout.from_annotations(annotations)
        if record is not None:
            return self._resume(name, path, info, record, ours)
        if details.get("resume"):
            return True, f"node {name}: no relayout in progress any more; nothing to finish"
        if info.mig_config == want and info.mig_state == "success":
            return True, self._already_there(path, name, want, ours)
        if info.mig_config == want:
            # The MIG manager acts on a change of the label's value only: writing the same
            # value again would wait for nothing.
            return False, (
                f"node {name} is already labelled {MIG_CONFIG}={want} "
                f"({MIG_STATE}={info.mig_state or 'unset'}); the MIG manager reconfigures "
                "only when the label changes; nothing changed"
            )
        try:
            ensured = self._add_entry(want, details)
        except MigConfigRefused as exc:
            if ours:
                self._uncordon(path)
            return False, f"node {name}: {exc}; nothing changed"
        try:
            self._await_mounted_copy(ensured)
        except Stopped:
            return False, (
                f"node {name}: stopped by shutdown while the MIG manager's copy of the "
                "ConfigMap catches up; the node is unchanged"
            )
        cordoned, record = self._start(path, info, annotations, want, ours)
        return self._continue(name, path, record, cordoned)

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
        pool = next(p for p in self.pools if p.name == action.pool)
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

    def _add_entry(self, want: str, details: dict[str, Any]) -> Ensured:
        """Make ``want`` an entry of the mig-parted ConfigMap (adding it when missing)."""
        return self.mig_parted.ensure(
            want,
            details.get("mig_parted_entry"),
            bool(details.get("needs_mixed_strategy")),
            self.wall(),
        )

    def _await_mounted_copy(self, ensured: Ensured) -> None:
        """Wait until the MIG manager's mounted copy of the ConfigMap can hold the entry.

        The MIG manager reads the copy the kubelet refreshes at its next sync of the pod,
        not the API object, and sets ``failed`` for a name that copy lacks. The wait runs
        from when tiercast added the entry (by this run or an earlier one), not from now.
        """
        if ensured.visible_at is None:
            return
        remaining = (ensured.visible_at - self.wall()).total_seconds()
        if remaining <= 0:
            return
        if self.dry_run:
            self.session.note(
                "WAIT",
                ensured.path,
                until="the kubelet refreshes the MIG manager's mounted ConfigMap",
                timeout_s=round(remaining, 3),
            )
            return
        self._pause(remaining, "the kubelet's refresh of the mig-parted ConfigMap")

    def _start(
        self, path: str, info: NodeInfo, annotations: dict[str, Any], want: str, ours: bool
    ) -> tuple[bool, Relayout]:
        """Cordon the node and record the relayout on it, in one patch.

        Returns whether the cordon is tiercast's (to undo at the end) and the record. On
        a node Karpenter launched, ``karpenter.sh/do-not-disrupt`` is set in the same
        patch unless already there.
        """
        guard = karpenter_managed(info.labels) and annotations.get(DO_NOT_DISRUPT) != "true"
        record = Relayout("draining", want, info.mig_config, utc_text(self.wall()), guard)
        written: dict[str, Any] = {RELAYOUT_ANNOTATION: record.to_annotation()}
        body: dict[str, Any] = {"metadata": {"annotations": written}}
        cordon = not info.unschedulable
        if cordon:
            body["spec"] = {"unschedulable": True}
            written[CORDONED_BY] = "true"
        if guard:
            written[DO_NOT_DISRUPT] = "true"
        self.session.request("PATCH", path, body, STRATEGIC_MERGE_PATCH)
        return cordon or ours, record

    def _continue(self, name: str, path: str, record: Relayout, cordoned: bool) -> tuple[bool, str]:
        """Run the relayout on from ``record.step`` to its end: uncordoned, or rolled back.

        A shutdown request leaves the node as it is, with its record, for the next run;
        so does an API error, which still fails the cycle.
        """
        try:
            if record.step == "draining":
                blocked = self._drain(name, record)
                if blocked:
                    self._finish(path, record, cordoned)
                    return (
                        False,
                        f"drain of {name} aborted: {blocked}; {MIG_CONFIG} unchanged, "
                        "node uncordoned",
                    )
                record = self._set_config(path, record)
            state = self._await_state(path, record)
        except Stopped as stop:
            return False, (
                f"node {name}: stopped by shutdown while waiting for {stop.step}; left "
                f"cordoned with its relayout recorded in {RELAYOUT_ANNOTATION}: the next "
                "run finishes it"
            )
        except KubeApiError as exc:
            log.error(
                "node %s: relayout to %s stopped at %s (%s); the next run finishes it",
                name,
                record.target,
                record.step,
                exc,
            )
            raise
        if state == "success":
            self._finish(path, record, cordoned)
            done = (
                f"node {name}: {MIG_CONFIG} {record.previous} -> {record.target} "
                f"({MIG_STATE}=success)"
            )
            return True, done + self.mig_parted.prune()
        self._finish(path, record, cordoned, restore=True)
        return False, (
            f"node {name}: MIG manager reported {state} for {record.target}; "
            f"restored {MIG_CONFIG}={record.previous} and uncordoned"
        )

    def _resume(
        self, name: str, path: str, info: NodeInfo, record: Relayout, ours: bool
    ) -> tuple[bool, str]:
        """Finish the relayout an earlier run recorded on the node, from its step."""
        expected = record.previous if record.step == "draining" else record.target
        if info.mig_config != expected:
            # Someone else relabelled the node meanwhile: tiercast's change is over; its
            # cordon and annotations go, the label stays as they left it.
            self._finish(path, record, ours)
            return False, (
                f"node {name}: {MIG_CONFIG} is {info.mig_config}, not {expected} as "
                f"tiercast's relayout to {record.target} left it; relayout dropped, "
                "tiercast's cordon removed"
            )
        if record.step == "draining":
            try:
                ensured = self.mig_parted.ensure(record.target, None, now=self.wall())
                self._await_mounted_copy(ensured)
            except MigConfigRefused as exc:
                self._finish(path, record, ours)
                return False, f"node {name}: {exc}; {MIG_CONFIG} unchanged, node uncordoned"
            except Stopped as stop:
                return False, (
                    f"node {name}: stopped by shutdown while waiting for {stop.step}; the "
                    "next run finishes the relayout"
                )
        ok, message = self._continue(name, path, record, ours)
        return ok, f"resumed ({record.step} since {record.since}): {message}"

    def _set_config(self, path: str, record: Relayout) -> Relayout:
        """Set the target label and move the record on to ``relabelled``, in one patch.

        Dropping the state label in the same patch keeps a stale ``success`` from the
        previous layout from being read as this change's result.
        """
        moved = replace(record, step="relabelled", since=utc_text(self.wall()))
        self.session.request(
            "PATCH",
            path,
            {
                "metadata": {
                    "labels": {MIG_CONFIG: record.target, MIG_STATE: None},
                    "annotations": {RELAYOUT_ANNOTATION: moved.to_annotation()},
                }
            },
            MERGE_PATCH,
        )
        return moved

    def _await_state(self, path: str, record: Relayout) -> str:
        """The MIG manager's verdict: ``success``, ``failed``, or why none came in time."""
        if self.dry_run:
            self.session.note(
                "WAIT", path, until=f"{MIG_STATE}=success", timeout_s=self.kube.mig_timeout_s
            )
            return "success"
        return self._wait_for_state(path, record)

    def _finish(self, path: str, record: Relayout, cordoned: bool, restore: bool = False) -> None:
        """End the relayout in one patch: tiercast's cordon and annotations removed, and with
        ``restore`` the previous label put back (a new value, so the MIG manager applies it)."""
        annotations: dict[str, Any] = {RELAYOUT_ANNOTATION: None}
        body: dict[str, Any] = {"metadata": {"annotations": annotations}}
        if cordoned:
            body["spec"] = {"unschedulable": None}
            annotations[CORDONED_BY] = None
        if record.do_not_disrupt:
            annotations[DO_NOT_DISRUPT] = None
        if restore:
            body["metadata"]["labels"] = {MIG_CONFIG: record.previous, MIG_STATE: None}
        self.session.request("PATCH", path, body, MERGE_PATCH)

    def _uncordon(self, path: str) -> None:
        self.session.request(
            "PATCH",
            path,
            {"spec": {"unschedulable": None}, "metadata": {"annotations": {CORDONED_BY: None}}},
            STRATEGIC_MERGE_PATCH,
        )

    def _pause(self, seconds: float, step: str) -> None:
        """Sleep ``seconds``; a shutdown request, before or during, ends the wait (:class:`Stopped`)."""
        if self.stopping():
            raise Stopped(step)
        self.sleep(seconds)
        if self.stopping():
            raise Stopped(step)

    def _remaining_s(self, since: str, timeout_s: float) -> float:
        """What is left of ``timeout_s`` counted from ``since`` (a step's start, maybe in an
        earlier run)."""
        start = parse_utc(since)
        if start is None:
            return float(timeout_s)
        return timeout_s - max(0.0, (self.wall() - start).total_seconds())

    def _evictable(self, name: str) -> list[dict[str, Any]]:
        try:
            pods = self.session.get("/api/v1/pods", {"fieldSelector": f"spec.nodeName={name}"})
        except KubeApiError as exc:
            if not (self.dry_run and exc.status == 403):
                raise
            # The dry-run install lists no pods (deploy/components/acting grants it).
            self.session.note(
                "DRAIN",
                f"{NODES_PATH}/{name}",
                until="every evictable pod evicted (pods not listable here)",
            )
            return []
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

    def _drain(self, name: str, record: Relayout) -> str | None:
        """Evict every evictable pod on the node; returns why it gave up, or None when drained.

        The drain may take ``drain_timeout_s`` from the record's start, across runs.
        """
        timeout = self.kube.drain_timeout_s
        deadline = self.clock() + self._remaining_s(record.since, timeout)
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
                return f"eviction of {ns}/{pod} refused for {timeout} s (PodDisruptionBudget)"
            self._pause(self.kube.poll_interval_s, "the drain")
        if self.dry_run:
            return None
        while self._evictable(name):
            if self.clock() >= deadline:
                return f"pods on {name} still terminating after {timeout} s"
            self._pause(self.kube.poll_interval_s, "pods to terminate")
        return None

    def _wait_for_state(self, path: str, record: Relayout) -> str:
        """Poll the state label until the MIG manager's verdict or ``mig_timeout_s`` from the
        relabel (across runs)."""
        timeout = self.kube.mig_timeout_s
        deadline = self.clock() + self._remaining_s(record.since, timeout)
        while True:
            state = (self.session.get(path).get("metadata", {}).get("labels") or {}).get(MIG_STATE)
            if state in ("success", "failed"):
                return state
            if self.clock() >= deadline:
                return f"no success within {timeout} s (last state {state or 'unset'})"
            self._pause(self.kube.poll_interval_s, f"{MIG_STATE}=success")


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
