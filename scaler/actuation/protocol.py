"""Actuators: the one place that changes the world, behind small Protocols.

A :class:`CapacityProvider` reads inventory (nodes per pool now) and applies one
action. ``RecordingProvider`` is the dry-run: it keeps an in-memory inventory,
records every call it *would* make, and applies it to its own state, so a second
identical cycle records nothing new (actions are idempotent). Kubernetes-backed
providers live in :mod:`scaler.actuation.kube` and follow the same Protocol.

Required of every provider (:class:`CapacityProvider`): ``inventory()`` and
``apply(action)``.

Optional, each its own runtime-checkable Protocol, found once per provider by
:func:`capabilities_of` (a :class:`Capabilities` value; a missing one is None there, and
the cycle plans without it):

* :class:`MigInventoryReader` ``mig_inventory()``: the MIG-managed pools' nodes and the
  mig-parted entries (else the config's ``mig_layouts`` describe them);
* :class:`SharingInventoryReader` ``sharing_inventory()``: the nodes the sharing plan
  labels (else the nodes the configured counts describe);
* :class:`KueueQuotaReader` ``kueue_action(section, at)``: the training ClusterQueue's
  quota action (else none);
* :class:`LeadTimeReader` ``lead_time_observations(pools)``: node starts for
  ``lead_time_s: auto`` (else only the run records' count);
* :class:`EventRecorder` ``record_event(reason, note)``: Events about tiercast itself;
* :class:`StopWaits` ``stop_waits_on(event)``: long waits inside one action end at
  shutdown.

A provider that wraps another (the service's guard) says what it offers by
``capabilities()`` (:class:`Wrapping`): only what the wrapped provider has.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from scaler.planning.mig.state import MigNodeState
from scaler.planning.sharing_actions import SharedNodeState
from scaler.plans import Action
from scaler.records import LeadTimeObservation


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


@runtime_checkable
class MigInventoryReader(Protocol):
    def mig_inventory(
        self,
    ) -> tuple[Mapping[str, Sequence[MigNodeState]] | None, Mapping[str, Any] | None]:
        """The MIG-managed pools' nodes and the mig-parted entries; ``(None, None)`` where
        there are none to read (the planner then reads the config's ``mig_layouts``)."""
        ...


@runtime_checkable
class SharingInventoryReader(Protocol):
    def sharing_inventory(
        self,
    ) -> tuple[Mapping[str, Sequence[SharedNodeState]] | None, str | None]:
        """The nodes the sharing plan chooses from, and why none can change (or None)."""
        ...


@runtime_checkable
class KueueQuotaReader(Protocol):
    def kueue_action(self, section: dict[str, Any], at: str) -> Action | None:
        """The action setting the training ClusterQueue's quota to ``section``; None
        where there is no ClusterQueue to set."""
        ...


@runtime_checkable
class LeadTimeReader(Protocol):
    def lead_time_observations(self, pools: Sequence[str]) -> list[LeadTimeObservation]:
        """The node starts the provider can see for ``pools``."""
        ...


@runtime_checkable
class EventRecorder(Protocol):
    def record_event(self, reason: str, note: str) -> None:
        """Record one Event about tiercast itself; a refused Event is logged, never raised."""
        ...


@runtime_checkable
class StopWaits(Protocol):
    def stop_waits_on(self, stop: threading.Event) -> None:
        """End the provider's long waits inside one action when ``stop`` is set."""
        ...


@dataclass(frozen=True)
class Capabilities:
    """The optional capabilities of one provider: the object to call for each, or None."""

    mig: MigInventoryReader | None = None
    sharing: SharingInventoryReader | None = None
    kueue: KueueQuotaReader | None = None
    lead_times: LeadTimeReader | None = None
    events: EventRecorder | None = None
    stop_waits: StopWaits | None = None


@runtime_checkable
class Wrapping(Protocol):
    def capabilities(self) -> Capabilities:
        """What this provider offers: those of the provider it wraps."""
        ...


def capabilities_of(provider: object) -> Capabilities:
    """The optional capabilities ``provider`` declares (module docstring), checked once."""
    if isinstance(provider, Wrapping):
        return provider.capabilities()
    return Capabilities(
        mig=provider if isinstance(provider, MigInventoryReader) else None,
        sharing=provider if isinstance(provider, SharingInventoryReader) else None,
        kueue=provider if isinstance(provider, KueueQuotaReader) else None,
        lead_times=provider if isinstance(provider, LeadTimeReader) else None,
        events=provider if isinstance(provider, EventRecorder) else None,
        stop_waits=provider if isinstance(provider, StopWaits) else None,
    )


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
