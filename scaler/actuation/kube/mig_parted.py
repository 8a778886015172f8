"""The GPU Operator's MIG configuration: its ClusterPolicy and the mig-parted ConfigMap it names.

Follows NVIDIA's GPU Operator: the ``nvidia.com/v1`` ClusterPolicy (``spec.mig.strategy``,
``spec.migManager.config.name``) and the mig-parted ``config.yaml`` (``version``,
``mig-configs``) in a core ``v1`` ConfigMap, which the MIG manager reads. tiercast adds
the entries its layouts need, keeps every entry already there, never edits the operator's
own ``default-mig-parted-config``, and removes only its own ``tiercast-`` entries once no
node names them (nor a relayout in progress targets them).

The MIG manager reads a copy of the ConfigMap that the kubelet mounts into its pod and
refreshes at its next sync of that pod, not the API object: an entry is applicable only
once that copy has caught up. tiercast keeps, in the ConfigMap's
``tiercast.io/mig-parted-added-at`` annotation, when it added each entry, so whichever
run relabels a node to it (this one or a later one) waits out the refresh
(:meth:`MigPartedConfig.ensure` returns when the copy can have caught up).
"""

from __future__ import annotations

import datetime
import json
import logging
from dataclasses import dataclass
from typing import Any

import yaml

from forecaster.documents import parse_document
from forecaster.errors import BadInputError
from scaler.actuation.kube.inventory import MIG_CONFIG, NODES_PATH
from scaler.actuation.kube.transport import MERGE_PATCH, KubeApiError, Session
from scaler.actuation.kube.writes import still_conflicting, until_no_conflict
from scaler.config import KubernetesConfig
from scaler.planning.mig.state import Relayout, parse_utc, utc_text

log = logging.getLogger(__name__)

CLUSTER_POLICIES = "/apis/nvidia.com/v1/clusterpolicies"
OPERATOR_CONFIG = "default-mig-parted-config"
"""The mig-parted ConfigMap the GPU Operator creates and keeps rewriting: tiercast never edits it."""
MIG_PARTED_KEY = "config.yaml"
OWN_PREFIX = "tiercast-"
"""The prefix of the mig-parted entries tiercast adds (and alone may remove)."""
SEEDED_CONFIG = "tiercast-mig-parted-config"
"""The mig-parted ConfigMap name the deploy/ RBAC grants, and the offline dry-run seeds."""
ADDED_AT = "tiercast.io/mig-parted-added-at"
"""ConfigMap annotation: when tiercast added each of its entries (JSON, name -> UTC time)."""


@dataclass(frozen=True)
class Ensured:
    """Where a mig-parted entry is, and from when the MIG manager's mounted copy has it."""

    path: str
    """The ConfigMap's path."""
    written: bool
    """Whether this call added the entry."""
    visible_at: datetime.datetime | None
    """When the kubelet's refresh of the mounted copy can have brought the entry (its
    addition plus ``kubernetes.mig_config_sync_s``); None when it was there before
    tiercast recorded adding it."""


class MigConfigRefused(Exception):
    """A MIG change that cannot take effect (no GPU Operator, a config tiercast may not edit)."""


class MigPartedConfig:
    """The ClusterPolicy of ``kubernetes.cluster_policy`` and the mig-parted ConfigMap it names."""

    def __init__(self, session: Session, kube: KubernetesConfig) -> None:
        self.session = session
        self.kube = kube

    def policy(self) -> dict[str, Any] | None:
        """The ClusterPolicy, or None where there is none (no GPU Operator)."""
        try:
            return self.session.get(f"{CLUSTER_POLICIES}/{self.kube.cluster_policy}")
        except KubeApiError as exc:
            if exc.not_found:
                return None
            raise

    def config_map_path(self, policy: dict[str, Any]) -> str:
        """The path of the mig-parted ConfigMap ``policy`` names (the operator's by default)."""
        spec = policy.get("spec") or {}
        name = ((spec.get("migManager") or {}).get("config") or {}).get("name") or OPERATOR_CONFIG
        return f"/api/v1/namespaces/{self.kube.gpu_operator_namespace}/configmaps/{name}"

    def read(self, path: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The ConfigMap at ``path`` and its parsed ``config.yaml``."""
        cm = self.session.get(path)
        text = (cm.get("data") or {}).get(MIG_PARTED_KEY)
        if text is None:
            raise MigConfigRefused(f"ConfigMap {path.rsplit('/', 1)[-1]} has no {MIG_PARTED_KEY}")
        name = path.rsplit("/", 1)[-1]
        try:
            # Bounded like every input document (nesting, aliases): never a RecursionError.
            data = parse_document(str(text), name, f"ConfigMap {MIG_PARTED_KEY}") or {}
        except BadInputError as exc:
            raise MigConfigRefused(str(exc)) from exc
        if not isinstance(data, dict) or not isinstance(data.get("mig-configs"), dict):
            raise MigConfigRefused(f"ConfigMap {path.rsplit('/', 1)[-1]}: no mig-configs mapping")
        return cm, data

    def ensure(
        self,
        want: str,
        entry: Any,
        needs_mixed: bool = False,
        now: datetime.datetime | None = None,
    ) -> Ensured:
        """Make ``want`` applicable by the MIG manager: where it is and from when it applies.

        The entry is added to the mig-parted ConfigMap the ClusterPolicy names, keeping
        every entry already there; an entry of the same name is never replaced. The
        addition's time (``now``, UTC) goes into the :data:`ADDED_AT` annotation in the
        same patch. Raises :class:`MigConfigRefused` when the change cannot be made to work.
        """
        now = now or datetime.datetime.now(datetime.UTC)
        sync = datetime.timedelta(seconds=self.kube.mig_config_sync_s)
        policy = self.policy()
        if policy is None:
            raise MigConfigRefused(
                f"no ClusterPolicy {self.kube.cluster_policy} (is NVIDIA's GPU Operator installed?)"
            )
        strategy = ((policy.get("spec") or {}).get("mig") or {}).get("strategy")
        if needs_mixed and strategy != "mixed":
            raise MigConfigRefused(
                f"{want} mixes MIG profiles, which needs the ClusterPolicy's "
                f"mig.strategy=mixed (it is {strategy or 'unset, i.e. single'})"
            )
        path = self.config_map_path(policy)
        name = path.rsplit("/", 1)[-1]
        for _ in range(self.kube.conflict_retries + 1):
            cm, data = self.read(path)
            configs = data["mig-configs"]
            added = _added_at(cm)
            if want in configs:
                if entry is not None and configs[want] != entry:
                    raise MigConfigRefused(
                        f"ConfigMap {name} already has a different {want}; tiercast never replaces one"
                    )
                at = parse_utc(added.get(want))
                return Ensured(path, False, at + sync if at is not None else None)
            if entry is None:
                raise MigConfigRefused(
                    f"{want} is not in ConfigMap {name} and no entry was planned"
                )
            if name == OPERATOR_CONFIG:
                raise MigConfigRefused(
                    f"the ClusterPolicy names the operator's own {OPERATOR_CONFIG}, which the operator "
                    f"rewrites; point migManager.config.name at a ConfigMap you own (README) to add {want}"
                )
            merged = {**data, "mig-configs": {**configs, want: entry}}
            stamps = {**added, want: utc_text(now)}
            body = {
                "metadata": {
                    "resourceVersion": cm["metadata"]["resourceVersion"],
                    "annotations": {ADDED_AT: json.dumps(stamps, sort_keys=True)},
                },
                "data": {MIG_PARTED_KEY: yaml.safe_dump(merged, sort_keys=False)},
            }
            try:
                self.session.request("PATCH", path, body, MERGE_PATCH)
            except KubeApiError as exc:
                if exc.conflict:
                    continue
                raise
            return Ensured(path, True, now + sync)
        raise still_conflicting(path, self.kube.conflict_retries)

    def prune(self) -> str:
        """Drop tiercast's own mig-parted entries that no node's label names any more.

        Only ``tiercast-`` entries go, and only when no node in the cluster (in a pool or
        not) carries that ``nvidia.com/mig.config`` nor has a relayout in progress to it
        (a run stopped mid-drain still needs its entry); the operator's entries and the
        operator's own ConfigMap are never touched. Returns a note for the action's
        message; a failure here is logged and never fails the relayout that just worked.
        """
        try:
            policy = self.policy()
            if policy is None:
                return ""
            path = self.config_map_path(policy)
            if path.rsplit("/", 1)[-1] == OPERATOR_CONFIG:
                return ""

            def attempt() -> str:
                listing = self.session.get(NODES_PATH)
                named = {
                    (n.get("metadata", {}).get("labels") or {}).get(MIG_CONFIG)
                    for n in listing.get("items", [])
                }
                for n in listing.get("items", []):
                    record = Relayout.from_annotations(n.get("metadata", {}).get("annotations"))
                    if record is not None:
                        named.add(record.target)
                cm, data = self.read(path)
                configs = data["mig-configs"]
                unused = sorted(k for k in configs if k.startswith(OWN_PREFIX) and k not in named)
                if not unused:
                    return ""
                kept = {k: v for k, v in configs.items() if k not in unused}
                stamps = {k: v for k, v in _added_at(cm).items() if k in kept}
                body = {
                    "metadata": {
                        "resourceVersion": cm["metadata"]["resourceVersion"],
                        "annotations": {ADDED_AT: json.dumps(stamps, sort_keys=True)},
                    },
                    "data": {
                        MIG_PARTED_KEY: yaml.safe_dump(
                            {**data, "mig-configs": kept}, sort_keys=False
                        )
                    },
                }
                self.session.request("PATCH", path, body, MERGE_PATCH)
                return (
                    f"; removed unused {', '.join(unused)} from ConfigMap {path.rsplit('/', 1)[-1]}"
                )

            return until_no_conflict(path, self.kube.conflict_retries, attempt)
        except (KubeApiError, MigConfigRefused) as exc:
            log.warning("unused tiercast mig-parted entries not removed: %s", exc)
            return f"; unused tiercast entries not removed ({exc})"


def _added_at(cm: dict[str, Any]) -> dict[str, str]:
    """The :data:`ADDED_AT` annotation of ``cm``; empty when absent or unreadable."""
    raw = ((cm.get("metadata") or {}).get("annotations") or {}).get(ADDED_AT)
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
