"""The cycle's past MIG demand, read back from the run records.

The MIG planner judges, per profile, its forecast against persistence of the recent peak
at its own past decisions (:mod:`scaler.planning.mig.persistence`); those decisions are
the plans the cycle kept in the run records. This reads the first cycle plan of each hour
over the judged span (so a CronJob every 5 minutes costs one plan an hour to decompress),
and keeps what each says of its MIG demand. Unreadable records are left out with a
warning: the planner then has fewer decisions to judge by, and below its minimum keeps
the forecast, never a failed cycle.
"""

from __future__ import annotations

import logging

import pandas as pd

from forecaster.errors import BadInputError
from scaler.planning.mig.persistence import (
    EVERY,
    SPAN,
    PastMigDemand,
    past_mig_demand,
    utc_naive,
)
from scaler.plans import iso
from scaler.records import RecordsError, RunStore

log = logging.getLogger(__name__)


def past_mig_plans(
    records: RunStore | None, now: pd.Timestamp, horizon: pd.Timedelta
) -> list[PastMigDemand]:
    """The MIG demand of the first cycle plan of each hour between ``now - horizon - SPAN``
    and ``now - horizon``, from ``records`` (none without records)."""
    if records is None:
        return []
    try:
        runs = records.runs_between("cycle", iso(now - horizon - SPAN), iso(now - horizon))
    except BadInputError:
        return []  # no records yet: the first cycle
    except RecordsError as exc:
        log.warning("MIG persistence: run records unreadable, the forecast stays: %s", exc)
        return []
    first: dict[pd.Timestamp, tuple[pd.Timestamp, str]] = {}
    for run_id, started in runs:
        at = utc_naive(started)
        if at is not None and at.floor(EVERY) not in first:
            first[at.floor(EVERY)] = (at, run_id)
    out: list[PastMigDemand] = []
    for _, run_id in sorted(first.values()):
        try:
            plan = records.full_plan(run_id)
        except (RecordsError, BadInputError) as exc:
            log.warning("MIG persistence: plan of run %s left out: %s", run_id[:40], exc)
            continue
        past = past_mig_demand(plan) if plan is not None else None
        if past is not None:
            out.append(past)
    return out
