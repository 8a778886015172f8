"""Actuators: the one place that changes the world, behind a small Protocol.

A :class:`CapacityProvider` reads inventory (nodes per pool now) and applies one
action. ``RecordingProvider`` is the dry-run: it keeps an in-memory inventory,
records every call it *would* make, and applies it to its own state, so a second
identical cycle records nothing new (actions are idempotent). Kubernetes-backed
providers live in :mod:`scaler.actuation.kube` and follow the same Protocol.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from scaler.plans import Action


class NotImplementedByProvider(NotImplementedError):
    """An optional provider capability this provider does not have."""


@dataclass(frozen=True)
class ActionResult:
    action: Action
    outcome: str
    """``applied``, ``accepted`` (the API took the change, the cluster is not seen acting on
    it yet: Karpenter replicas or limits), ``recorded`` (dry-run), ``skipped``
    (re-validation failed) or ``failed``."""
    message: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    """The API calls made or, in dry-run, that would be made: verb, path, body."""


@runtime_checkable
class CapacityProvider(Protocol):
    """Required: ``inventory`` and ``apply``."""

    def inventory(self) -> dict[str, int]:
        """Nodes per pool, read fresh from the source of truth."""
        ...

    def apply(self, action: Action) -> ActionResult:
        """Bring ``action.pool`` to ``action.target_nodes``; idempotent."""
        ...


class RecordingProvider:
    """Dry-run provider: records the calls, applies them to an in-memory inventory."""

    def __init__(self, inventory: dict[str, int]) -> None:
        self._inventory = dict(inventory)
        self.calls: list[dict[str, Any]] = []

    def inventory(self) -> dict[str, int]:
        return dict(self._inventory)

    def apply(self, action: Action) -> ActionResult:
        if action.kind != "nodes":
            call = {"verb": "relabel", "pool": action.pool, "body": dict(action.details)}
            self.calls.append(call)
            what = {"mig-layout": "MIG layout"}.get(action.kind, action.kind.replace("-", " "))
            return ActionResult(action, "recorded", f"{what} change recorded", [call])
        if self._inventory.get(action.pool) == action.target_nodes:
            return ActionResult(action, "recorded", "already at target; no call")
        call = {
            "verb": "scale",
            "pool": action.pool,
            "body": {"replicas": action.target_nodes},
        }
        self.calls.append(call)
        self._inventory[action.pool] = action.target_nodes
        return ActionResult(
            action, "recorded", f"would scale {action.pool} to {action.target_nodes}", [call]
        )
