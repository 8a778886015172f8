"""Starvation: GPU demand that waits for capacity, as a floor under the plan's need.

A GPU pod Pending for longer than ``starvation.pending_threshold_s``, or a Kueue
workload pending that long, is demand the fleet already failed to serve: it was
observed, not forecast. The next plan's need for that GPU model is therefore at least
what runs plus what waits (:meth:`Starvation.floor`), raised into the observed floor of
the planner's demand levels (:func:`with_floor`), so a pending GPU pod raises the next
plan and no plan releases capacity that running pods hold.

This module holds the value (:class:`Starvation`, what :mod:`scaler.inputs.pending`
reads from kube-state-metrics and Kueue) and the pure functions the planner and the
cycle apply to it: the floor, the plan's notes and the plan's ``risk.starvation`` entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from scaler.planning.need import DemandLevels
from scaler.wording import NOTE_WAITING, NOTE_WAITING_UNKNOWN, Reason


@dataclass(frozen=True)
class ModelWaiting:
    """One GPU model's pods and workloads: GPUs running and GPUs waiting past the threshold."""

    running_gpus: float = 0.0
    """GPUs requested by Running pods on this model (placeholders excluded)."""
    waiting_gpus: float = 0.0
    """GPUs requested by pods Pending past the threshold, and by Kueue's waiting workloads."""
    pods: int = 0
    """Pods Pending past the threshold."""
    workloads: int = 0
    """Kueue workloads pending past the threshold."""

    @property
    def floor_gpus(self) -> float:
        """What runs plus what waits: the least the next plan may need."""
        return self.running_gpus + self.waiting_gpus

    def to_dict(self) -> dict[str, Any]:
        return {
            "running_gpus": round(self.running_gpus, 4),
            "waiting_gpus": round(self.waiting_gpus, 4),
            "pods": self.pods,
            "workloads": self.workloads,
        }


@dataclass(frozen=True)
class Starvation:
    """What waits for GPUs at ``at``, per GPU model (catalog names)."""

    at: str
    """When it was read (ISO-8601 UTC)."""
    threshold_s: int
    """How long a pod or workload waited at least to count."""
    models: Mapping[str, ModelWaiting] = field(default_factory=dict)
    unattributed_gpus: float = 0.0
    """Waiting GPUs whose GPU model could not be told (several models, no label): reported,
    never planned on."""
    unattributed: tuple[str, ...] = ()
    """The label sets of those series, for the note."""

    def floor(self) -> dict[str, float]:
        """Per GPU model, the least its need may be: what runs plus what waits."""
        return {m: w.floor_gpus for m, w in sorted(self.models.items()) if w.floor_gpus > 0}

    @property
    def waiting_gpus(self) -> float:
        return sum(w.waiting_gpus for w in self.models.values()) + self.unattributed_gpus

    def to_dict(self) -> dict[str, Any]:
        """The plan's ``risk.starvation`` entry (read back by the review)."""
        return {
            "at": self.at,
            "threshold_s": self.threshold_s,
            "models": {m: w.to_dict() for m, w in sorted(self.models.items())},
            "unattributed_gpus": round(self.unattributed_gpus, 4),
        }

    def notes(self) -> list[Reason]:
        """One note per GPU model with waiting GPUs, and one for what cannot be attributed."""
        out = []
        for model, w in sorted(self.models.items()):
            if w.waiting_gpus <= 0:
                continue
            params = {
                "model": model,
                "waiting_gpus": w.waiting_gpus,
                "floor_gpus": w.floor_gpus,
                "running_gpus": w.running_gpus,
                "pending_pods": w.pods,
                "threshold_s": self.threshold_s,
                "pending_workloads": w.workloads,
            }
            out.append(Reason(NOTE_WAITING, params, (f"risk.starvation.models.{model}",)))
        if self.unattributed_gpus > 0:
            shown = (*self.unattributed[:3], *(("...",) if len(self.unattributed) > 3 else ()))
            out.append(
                Reason(
                    NOTE_WAITING_UNKNOWN,
                    {"waiting_gpus": self.unattributed_gpus, "series": shown},
                    ("risk.starvation",),
                )
            )
        return out


def with_floor(levels: DemandLevels, floor: Mapping[str, float] | None) -> DemandLevels:
    """``levels`` with each GPU model's observed floor, recorded floor and newest demand
    raised to at least ``floor`` (GPUs that run plus GPUs that wait)."""
    if not floor:
        return levels

    def raised(table: Mapping[str, float]) -> dict[str, float]:
        out = dict(table)
        for model, gpus in floor.items():
            out[model] = max(out.get(model, 0.0), float(gpus))
        return out

    return replace(
        levels,
        observed=raised(levels.observed),
        recorded=raised(levels.recorded),
        newest=raised(levels.newest),
    )
