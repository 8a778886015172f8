"""``lead_time_s: auto``: each pool's lead time learned from the node starts the cluster shows.

Before every plan (:func:`scaler.service.cycle.run_cycle`), :func:`learn_lead_times`:

1. asks the provider for the node starts it can see (the Kubernetes provider reads them
   from Nodes, Karpenter NodeClaims and Cluster API Machines,
   :mod:`scaler.actuation.kube.readiness`; the recording provider of a dry-run without a
   cluster sees none);
2. keeps the new ones in the run records, once per object
   (:meth:`scaler.records.RunStore.add_lead_times`), and reads back the newest
   :data:`~scaler.records.LEAD_TIME_WINDOW` (30) of each pool;
3. resolves each ``auto`` pool's lead time to whole seconds (:func:`resolve_lead_times`),
   which the cycle plans with (:meth:`scaler.config.Fleet.with_lead_times`): the q0.9 of those starts, rounded up, or the pool's
   ``lead_time_fallback_s`` while fewer than :data:`MIN_OBSERVATIONS` (5) are known.

The planner itself never sees ``auto``; the plan gets one note per ``auto`` pool saying
which value it planned with and why (:func:`lead_time_notes`). Measuring or keeping the
observations never fails a cycle: on an error the cycle plans with what it has.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from forecaster.errors import TiercastError
from scaler import wording
from scaler.actuation.protocol import LeadTimeReader
from scaler.config import PoolConfig
from scaler.plans import CapacityPlan, iso
from scaler.records import LEAD_TIME_WINDOW, LeadTimeObservation, RunStore
from scaler.wording import Reason

log = logging.getLogger(__name__)

MIN_OBSERVATIONS = 5
"""Node starts a pool needs before its lead time is learned rather than its fallback."""
QUANTILE = 0.9
"""The lead time planned with: this quantile of the pool's recent node starts. A start
slower than most is the one that leaves demand unserved, so the median would be too short."""
MAX_LEAD_TIME_S = 86400
"""The bound of ``lead_time_s``; a learned value never exceeds it."""


@dataclass(frozen=True)
class LeadTime:
    """The lead time one ``auto`` pool is planned with, and where it came from."""

    pool: str
    seconds: int
    learned: bool
    """True: the q0.9 of ``observations`` node starts; False: ``lead_time_fallback_s``."""
    observations: int
    """Node starts it was learned from (at most 30), or known so far (below 5)."""

    @property
    def note(self) -> Reason:
        """The plan's one note about this pool's lead time."""
        if self.learned:
            return Reason(
                wording.NOTE_LEAD_LEARNED,
                {
                    "pool": self.pool,
                    "lead_time_s": self.seconds,
                    "quantile": f"q{QUANTILE:g}",
                    "starts": self.observations,
                },
            )
        return Reason(
            wording.NOTE_LEAD_FALLBACK,
            {
                "pool": self.pool,
                "lead_time_s": self.seconds,
                "starts": self.observations,
                "needed": MIN_OBSERVATIONS,
            },
        )


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values``, interpolated linearly between order statistics
    (``numpy.quantile``'s default), without numpy."""
    if not values:
        raise ValueError("quantile of no values")
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def lead_time_of(pool: PoolConfig, observations: Sequence[LeadTimeObservation]) -> LeadTime:
    """The lead time of one ``auto`` pool from its observed starts, newest first."""
    window = [o.seconds for o in observations[:LEAD_TIME_WINDOW]]
    if len(window) < MIN_OBSERVATIONS:
        return LeadTime(pool.name, pool.lead_time_fallback_s, False, len(window))
    seconds = min(MAX_LEAD_TIME_S, max(0, math.ceil(quantile(window, QUANTILE))))
    return LeadTime(pool.name, seconds, True, len(window))


def resolve_lead_times(
    pools: Iterable[PoolConfig], observations: Mapping[str, Sequence[LeadTimeObservation]]
) -> dict[str, LeadTime]:
    """Per ``auto`` pool, in config order, the lead time it is planned with and how it was
    chosen (none for a config without ``auto`` pools); :func:`planned_seconds` gives the
    whole seconds a fleet takes (:meth:`scaler.config.Fleet.with_lead_times`).

    ``observations``: per pool, its node starts newest first (as
    :meth:`RunStore.recent_lead_times` reads them).
    """
    return {
        p.name: lead_time_of(p, observations.get(p.name, ())) for p in pools if p.lead_time_auto
    }


def planned_seconds(lead_times: Mapping[str, LeadTime]) -> dict[str, int]:
    """The whole seconds each ``auto`` pool is planned with."""
    return {name: lt.seconds for name, lt in lead_times.items()}


def lead_time_notes(lead_times: Mapping[str, LeadTime]) -> list[Reason]:
    """One plan note per ``auto`` pool, in config order."""
    return [lt.note for lt in lead_times.values()]


def with_lead_times(plan: CapacityPlan, lead_times: Mapping[str, LeadTime]) -> CapacityPlan:
    """``plan`` with each ``auto`` pool's lead time in its notes and in its actions' reasons
    (where the reason's "lead time N min" comes from)."""
    if not lead_times:
        return plan
    actions = [
        dataclasses.replace(
            a,
            reason=a.reason.with_params(
                lead_from="learned" if lead_times[a.pool].learned else "fallback",
                lead_starts=lead_times[a.pool].observations,
            ),
        )
        if a.pool in lead_times
        else a
        for a in plan.actions
    ]
    return dataclasses.replace(
        plan, actions=actions, notes=[*plan.notes, *lead_time_notes(lead_times)]
    )


def measured_starts(
    reader: LeadTimeReader | None, pools: Sequence[str]
) -> list[LeadTimeObservation]:
    """The node starts ``reader`` (a provider that can see a cluster) can see for ``pools``;
    none without one."""
    if reader is None:
        return []
    try:
        return list(reader.lead_time_observations(pools))
    except TiercastError as exc:
        log.warning("node starts not read (%s); lead times from the run records", exc)
        return []


def learn_lead_times(
    pools: Sequence[PoolConfig],
    reader: LeadTimeReader | None,
    records: RunStore | None = None,
    now: pd.Timestamp | None = None,
) -> dict[str, LeadTime]:
    """Measure, keep and resolve the ``auto`` pools' lead times (see the module docstring).

    ``reader``: the provider's node starts (:func:`scaler.actuation.protocol.capabilities_of`),
    None where it sees no cluster. ``records``: where observations are kept between cycles; None keeps none, and only
    what the provider shows now counts. ``now``: the time the records' retention counts
    back from; default the wall clock.
    """
    auto = [p.name for p in pools if p.lead_time_auto]
    if not auto:
        return {}
    measured = measured_starts(reader, auto)
    observed: dict[str, list[LeadTimeObservation]] = {}
    for o in sorted(measured, key=lambda o: (o.ready, o.object), reverse=True):
        observed.setdefault(o.pool, []).append(o)
    if records is not None:
        try:
            if measured:
                when = now if now is not None else pd.Timestamp.now(tz="UTC")
                records.add_lead_times(measured, iso(when))
            observed = records.recent_lead_times(pools=auto)
        except (TiercastError, OSError) as exc:
            log.warning("lead-time observations not kept or read (%s); using this cycle's", exc)
    return resolve_lead_times(pools, observed)
