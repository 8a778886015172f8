"""Karpenter's emptiness consolidation, as a hook of :class:`tests.fake_kube.FakeKube`.

Written from kubernetes-sigs/karpenter (commit 2266468, 2026-08-20), not copied; the
rules that decide whether a node drained for a MIG relayout survives:

* a node is a candidate when Karpenter launched it (label ``karpenter.sh/nodepool``) and
  it is not annotated ``karpenter.sh/do-not-disrupt: "true"``
  (``pkg/controllers/state/statenode.go`` ``ValidateNodeDisruptable``); cordon
  (``spec.unschedulable``) is not looked at (``pkg/controllers/disruption/types.go``
  ``NewCandidate``);
* a static NodePool (``spec.replicas`` set) is never consolidated, nor one whose
  ``disruption.consolidateAfter`` is ``Never``
  (``pkg/controllers/disruption/emptiness.go`` ``ShouldDisrupt``);
  ``consolidateAfter`` defaults to ``0s`` (``pkg/apis/v1/nodepool.go``);
* a node is empty when no pod on it is reschedulable: active (not ``Succeeded`` or
  ``Failed``) and owned neither by a DaemonSet nor by the node (a mirror pod)
  (``pkg/utils/pod/scheduling.go`` ``IsReschedulable``), and it is consolidatable once
  it has been empty for ``consolidateAfter`` (the NodeClaim's ``Consolidatable``
  condition), timed on ``clock`` (without one, at once).

Karpenter then deletes the NodeClaim, drains the node and terminates the instance; here
the Node object goes, and its name is added to ``deleted``.
"""

from __future__ import annotations

import re
from typing import Any

from tests.fake_kube import Clock, FakeKube, Request

NODE_POOL = "karpenter.sh/nodepool"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"


class Consolidation:
    """Deletes the empty, unprotected nodes of dynamic NodePools, as Karpenter's emptiness does."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock
        self.deleted: list[str] = []
        self.deleted_at: list[int] = []
        """For each deletion, how many requests the server had had (the one running included)."""
        self._empty_since: dict[str, float] = {}

    def __call__(self, fake: FakeKube, request: Request) -> None:
        now = self.clock.now() if self.clock is not None else 0.0
        objects = fake.state.objects
        busy = {
            (pod.get("spec") or {}).get("nodeName")
            for (api, plural, _, _), pod in objects.items()
            if (api, plural) == ("v1", "pods") and _reschedulable(pod)
        }
        for (api, plural, _, name), node in list(objects.items()):
            if (api, plural) != ("v1", "nodes"):
                continue
            meta = node.get("metadata") or {}
            pool_name = (meta.get("labels") or {}).get(NODE_POOL)
            if pool_name is None or (meta.get("annotations") or {}).get(DO_NOT_DISRUPT) == "true":
                self._empty_since.pop(name, None)
                continue
            after = _consolidate_after_s(
                objects.get(("karpenter.sh/v1", "nodepools", None, pool_name))
            )
            if after is None or name in busy:
                self._empty_since.pop(name, None)
                continue
            since = self._empty_since.setdefault(name, now)
            if now - since >= after:
                del objects[(api, plural, None, name)]
                self._empty_since.pop(name, None)
                self.deleted.append(name)
                self.deleted_at.append(len(fake.requests))


def _reschedulable(pod: dict[str, Any]) -> bool:
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return not any(o.get("kind") in ("DaemonSet", "Node") for o in owners)


def _consolidate_after_s(pool: dict[str, Any] | None) -> float | None:
    """Seconds a node of ``pool`` must be empty before it goes; None: never consolidated."""
    if pool is None:
        return None  # NewCandidate: no NodePool, no candidate
    spec = pool.get("spec") or {}
    if spec.get("replicas") is not None:
        return None  # a static NodePool
    value = str((spec.get("disruption") or {}).get("consolidateAfter", "0s"))
    if value == "Never":
        return None
    units = {"s": 1, "m": 60, "h": 3600}
    return float(sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smh])", value)))
