"""Kueue: the training ClusterQueue's GPU quota follows the spare capacity the plan forecasts.

Where Kueue admits training (the API group ``kueue.x-k8s.io`` served), the plan's
``workloads.kueue`` section (:mod:`scaler.planning.deferrable`) gives, per GPU model, the
spare GPUs of the next hour: their least becomes the ClusterQueue's ``nominalQuota`` for
the GPU resource in that model's ResourceFlavor and, in a cohort, their peak less that its
``borrowingLimit``. Training admitted within it runs on GPUs inference leaves idle, and is
preempted first when inference rises (its PriorityClass is below inference's).

Follows Kueue's ClusterQueue (``apis/kueue/v1beta1/clusterqueue_types.go``;
``v1beta2`` where only that is served, which names the cohort ``cohortName``):
``spec.resourceGroups[]`` each with ``coveredResources`` and ``flavors[]``, each flavor's
``resources[]`` in the order of ``coveredResources`` with ``nominalQuota`` and optional
``borrowingLimit`` / ``lendingLimit``. ``resourceGroups`` is an atomic list, so a write
sends the whole list back, carrying the resourceVersion it was read at. Kueue refuses a
``borrowingLimit`` or ``lendingLimit`` without a cohort and a ``lendingLimit`` above the
``nominalQuota``: no limit is written without a cohort, and a lending limit above the new
quota is lowered to it. Flavors and resources are never added: a ClusterQueue without
the flavor or the resource is a one-line failure naming what is missing.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from scaler import wording
from scaler.actuation.kube.transport import MERGE_PATCH, KubeApiError, MemoryTransport, Session
from scaler.actuation.kube.writes import until_no_conflict
from scaler.config import KubernetesConfig, KueueQuotaConfig
from scaler.plans import Action, Decision
from scaler.wording import Reason

KUEUE_GROUP = "kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")
"""Served versions tiercast writes, newest first (``v1beta1`` is deprecated upstream)."""
KIND = "kueue-quota"
"""The action kind that sets a ClusterQueue's quota."""

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_SUFFIX = {
    None: 1.0,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}


class QuotaRefused(Exception):
    """The ClusterQueue cannot take the quota as planned (a flavor or resource missing)."""


def quantity(value: Any) -> float | None:
    """A Kubernetes quantity (``8``, ``"8"``, ``"500m"``, ``"1k"``) as a number; None when
    it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    m = _QUANTITY.match(str(value).strip())
    if m is None:
        return None
    try:
        return float(m.group(1)) * _SUFFIX[m.group(2)]
    except ValueError:
        return None


class KueueQuota:
    """Reads and sets one ClusterQueue's quota of one resource per flavor."""

    def __init__(self, settings: KueueQuotaConfig, kube: KubernetesConfig) -> None:
        self.settings, self.kube = settings, kube
        self._version: str | bool | None = False  # False: not looked up yet

    def version(self, session: Session) -> str | None:
        """The ``kueue.x-k8s.io`` version serving ``clusterqueues`` here, or None."""
        if self._version is False:
            self._version = None
            for v in VERSIONS:
                try:
                    listing = session.get(f"/apis/{KUEUE_GROUP}/{v}")
                except KubeApiError as exc:
                    if not exc.not_found:
                        raise
                    continue
                if "clusterqueues" in {r.get("name") for r in listing.get("resources") or []}:
                    self._version = v
                    break
        return self._version if isinstance(self._version, str) else None

    def path(self, version: str) -> str:
        return f"/apis/{KUEUE_GROUP}/{version}/clusterqueues/{self.settings.cluster_queue}"

    def current(self, session: Session) -> dict[str, dict[str, float | None]] | None:
        """Per flavor covering the resource, its ``nominalQuota``, ``borrowingLimit`` and
        ``lendingLimit`` now, and ``cohort`` (1.0 in a cohort, else None); None where Kueue
        or the ClusterQueue is not there."""
        version = self.version(session)
        if version is None:
            return None
        try:
            queue = session.get(self.path(version))
        except KubeApiError as exc:
            if exc.not_found:
                return None
            raise
        out: dict[str, dict[str, float | None]] = {}
        spec = queue.get("spec") or {}
        cohort = 1.0 if spec.get("cohortName" if version == "v1beta2" else "cohort") else None
        for _, flavor, entry in self._entries(queue):
            out[flavor] = {
                "nominal_quota": quantity(entry.get("nominalQuota")),
                "borrowing_limit": quantity(entry["borrowingLimit"])
                if "borrowingLimit" in entry
                else None,
                "lending_limit": quantity(entry["lendingLimit"])
                if "lendingLimit" in entry
                else None,
                "cohort": cohort,
            }
        return out

    def _entries(self, queue: dict[str, Any]) -> list[tuple[int, str, dict[str, Any]]]:
        """(group index, flavor name, the resource's quota entry) for every flavor of the
        group covering ``resource``."""
        out = []
        for i, group in enumerate((queue.get("spec") or {}).get("resourceGroups") or []):
            covered = group.get("coveredResources") or []
            if self.settings.resource not in covered:
                continue
            for flavor in group.get("flavors") or []:
                for entry in flavor.get("resources") or []:
                    if entry.get("name") == self.settings.resource:
                        out.append((i, str(flavor.get("name")), entry))
        return out

    def action(self, section: dict[str, Any], at: str, session: Session) -> Action | None:
        """The quota action for the plan's ``workloads.kueue`` section against what the
        ClusterQueue holds now; None where Kueue or the ClusterQueue is not there. An
        unreadable ClusterQueue (RBAC, the API server) gives a no-op naming why: the quota
        stays as it is and the cycle goes on."""
        try:
            now = self.current(session)
        except KubeApiError as exc:
            return self._noop(at, str(exc))
        if now is None:
            return None
        want: dict[str, dict[str, Any]] = {}
        held: list[str] = []
        unnamed: list[str] = []
        entries = section.get("flavors") or {}
        for model, entry in sorted(entries.items()):
            flavor = entry.get("flavor")
            if flavor is None:
                flavor = next(iter(now)) if len(now) == 1 and len(entries) == 1 else None
            if flavor is None:
                unnamed.append(model)
                continue
            if entry.get("hold"):
                held.append(flavor)
                continue
            want[flavor] = {
                "gpu_model": model,
                "nominal_quota": int(entry["nominal_quota"]),
                "borrowing_limit": entry.get("borrowing_limit"),
            }
        current = sum(int(now.get(f, {}).get("nominal_quota") or 0) for f in want)
        target = sum(w["nominal_quota"] for w in want.values())
        changed = any(
            now.get(f, {}).get("nominal_quota") != w["nominal_quota"]
            or (
                now.get(f, {}).get("cohort") is not None
                and w["borrowing_limit"] is not None
                and now.get(f, {}).get("borrowing_limit") != w["borrowing_limit"]
            )
            for f, w in want.items()
        )
        decision: Decision = (
            "no-op" if not changed else "scale-down" if target < current else "scale-up"
        )
        # Each flavor's quota, borrowing limit and GPU model are this action's details, and
        # why a flavor is held is the plan's workloads.kueue section: the reason refers to them.
        reason = Reason(
            wording.KUEUE_QUOTA,
            {
                "queue": self.settings.cluster_queue,
                "resource": self.settings.resource,
                "quota_from": current,
                "quota_to": target,
                "flavors": tuple(sorted(want)),
                "held_flavors": tuple(held),
                "unnamed": tuple(unnamed),
            },
            ("details.flavors", "workloads.kueue.flavors"),
        )
        return Action(
            pool=self.settings.cluster_queue,
            decision=decision if want else "no-op",
            current_nodes=current,
            target_nodes=target,
            at=at,
            needed_at=at,
            cost_delta_per_hour=0.0,
            reason=reason,
            kind=KIND,
            details={"resource": self.settings.resource, "flavors": want},
        )

    def _noop(self, at: str, error: str) -> Action:
        return Action(
            pool=self.settings.cluster_queue,
            decision="no-op",
            current_nodes=0,
            target_nodes=0,
            at=at,
            needed_at=at,
            cost_delta_per_hour=0.0,
            reason=Reason(
                wording.KUEUE_UNREADABLE, {"queue": self.settings.cluster_queue, "error": error}
            ),
            kind=KIND,
            details={"resource": self.settings.resource, "flavors": {}},
        )

    def apply(self, session: Session, action: Action) -> tuple[bool, str]:
        """Set the quotas ``action.details`` names, on a fresh read; skipped when already so."""
        version = self.version(session)
        if version is None:
            return False, f"{KUEUE_GROUP} is not served here: no ClusterQueue to set"
        path = self.path(version)
        want: dict[str, dict[str, Any]] = action.details.get("flavors") or {}

        def attempt() -> tuple[bool, str]:
            queue = session.get(path)
            spec = queue.get("spec") or {}
            cohort = spec.get("cohortName" if version == "v1beta2" else "cohort")
            groups = copy.deepcopy(spec.get("resourceGroups") or [])
            notes: list[str] = []
            found = {f: e for _, f, e in self._entries({"spec": {"resourceGroups": groups}})}
            missing = sorted(set(want) - set(found))
            if missing:
                return False, (
                    f"ClusterQueue {self.settings.cluster_queue} has no flavor "
                    f"{', '.join(missing)} covering {self.settings.resource}; "
                    "tiercast sets quotas, it does not add flavors"
                )
            for flavor, w in sorted(want.items()):
                notes += _set_quota(found[flavor], flavor, w, bool(cohort))
            if not notes:
                return True, f"ClusterQueue {self.settings.cluster_queue}: no change"
            patch = {
                "metadata": {"resourceVersion": queue["metadata"]["resourceVersion"]},
                # resourceGroups is an atomic list: the whole list goes back.
                "spec": {"resourceGroups": groups},
            }
            session.request("PATCH", path, patch, MERGE_PATCH)
            return True, f"ClusterQueue {self.settings.cluster_queue}: " + ", ".join(notes)

        return until_no_conflict(path, self.kube.conflict_retries, attempt)

    def seed(self, store: MemoryTransport) -> None:
        """Nothing to seed: offline, no Kueue is served, and no quota is set."""


def _set_quota(entry: dict[str, Any], flavor: str, want: dict[str, Any], cohort: bool) -> list[str]:
    """Change one flavor's quota entry in place to ``want``; what changed, in words."""
    notes: list[str] = []
    nominal = int(want["nominal_quota"])
    if quantity(entry.get("nominalQuota")) != nominal:
        notes.append(f"{flavor} nominalQuota {entry.get('nominalQuota')} -> {nominal}")
        entry["nominalQuota"] = str(nominal)
    borrow = want.get("borrowing_limit")
    if cohort and borrow is not None and quantity(entry.get("borrowingLimit")) != borrow:
        notes.append(f"{flavor} borrowingLimit {entry.get('borrowingLimit')} -> {borrow}")
        entry["borrowingLimit"] = str(int(borrow))
    lend = quantity(entry.get("lendingLimit")) if "lendingLimit" in entry else None
    if lend is not None and lend > nominal:
        # Kueue refuses a lendingLimit above the nominalQuota.
        notes.append(f"{flavor} lendingLimit {entry['lendingLimit']} -> {nominal}")
        entry["lendingLimit"] = str(nominal)
    return notes


def _shown(value: float | None) -> str:
    if value is None:
        return "unset"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
