"""Which MIG profiles plan on the peak of their recent demand instead of their forecast.

Layouts hold for hours, so the MIG planner covers each profile's peak over the horizon.
At the cycle's own past decisions (the plans kept in the run records) this module asks,
per GPU model and profile, which predicted the true peak over the horizon better: the
forecast's peak at the policy quantile (what the plan covered, its ``demand_instances``)
or the peak of the instances observed over the horizon before the decision (persistence),
by the pinball loss at the policy quantile. The forecast is kept only where it was
clearly better, by more than a standard error of the difference over days
(:func:`scaler.planning.mig.demand.clear_peak_source`); elsewhere the profile plans on
persistence, the simpler rule: a flat demand at the peak of its last horizon of observed
instances. With fewer than :data:`MIN_DECISIONS` past decisions whose
horizon has been observed since, the forecast stays. Replayed per workload in
``tiercast simulate --mig`` (``planner-chosen``; docs/benchmarks.md, "The forecast or
persistence, per workload").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from scaler.catalog.gpus import gpu_model
from scaler.config import WorkloadConfig
from scaler.planning.mig.demand import clear_peak_source, replicas_for, workload_profile

SPAN = pd.Timedelta(days=7)
"""How far back past decisions are judged."""
EVERY = pd.Timedelta(hours=1)
"""One past decision judged per this much time (the first plan of each hour)."""
MIN_DECISIONS = 24
"""Past decisions a profile needs before persistence may replace its forecast: a day's."""


@dataclass(frozen=True)
class PastMigDemand:
    """One past plan's MIG demand: when it was made, and per GPU model and profile the peak
    instances its forecast asked for over its horizon."""

    at: pd.Timestamp
    peaks: Mapping[str, Mapping[str, float]]


def past_mig_demand(plan: Mapping[str, Any]) -> PastMigDemand | None:
    """The MIG demand of a plan's JSON form (a run record's full plan); None where it has
    none or it is not as the plan schema writes it."""
    mig, created = plan.get("mig"), plan.get("created_at")
    if not isinstance(mig, dict) or not isinstance(created, str):
        return None
    peaks: dict[str, dict[str, float]] = {}
    for model, section in (mig.get("models") or {}).items():
        demand = section.get("demand_instances") if isinstance(section, dict) else None
        if not isinstance(demand, dict):
            continue
        for profile, values in demand.items():
            finite = [float(v) for v in values if isinstance(v, int | float) and math.isfinite(v)]
            if finite:
                peaks.setdefault(str(model), {})[str(profile)] = max(finite)
    at = utc_naive(created)
    return PastMigDemand(at, peaks) if peaks and at is not None else None


def utc_naive(text: str) -> pd.Timestamp | None:
    """An ISO-8601 UTC time as plans and records write it (``...Z``), without a zone; None
    where it is not one."""
    try:
        at = pd.Timestamp(text.rstrip("Z"))
    except ValueError:
        return None
    return at.tz_localize(None) if at.tzinfo else at


def observed_instances(
    workloads: Iterable[WorkloadConfig], history: Mapping[str, pd.Series]
) -> dict[str, dict[str, pd.Series]]:
    """Per GPU model and MIG profile, the instances the observed signals needed at each of
    their timestamps (a signal's gaps hold its last value where another signal has one)."""
    parts: dict[tuple[str, str], list[pd.Series]] = {}
    for w in workloads:
        profile, series = workload_profile(w), history.get(w.signal)
        if profile is None or series is None or series.dropna().empty:
            continue
        s = series.dropna()
        need = pd.Series(replicas_for(w, s.to_numpy(dtype=float)), index=s.index)
        parts.setdefault((gpu_model(w.gpu_model).name, profile), []).append(need)
    out: dict[str, dict[str, pd.Series]] = {}
    for (model, profile), needs in parts.items():
        frame = pd.concat(needs, axis=1).sort_index().ffill().fillna(0.0)
        out.setdefault(model, {})[profile] = frame.sum(axis=1)
    return out


def _peak(series: pd.Series, start: pd.Timestamp, end: pd.Timestamp) -> float | None:
    """The peak of ``series`` in ``(start, end]``; None without an observation there."""
    window = series[(series.index > start) & (series.index <= end)]
    return float(window.max()) if len(window) else None


def _judged(
    past: Sequence[PastMigDemand], now: pd.Timestamp, horizon: pd.Timedelta
) -> list[PastMigDemand]:
    """The first past plan of each :data:`EVERY` over :data:`SPAN` whose horizon has been
    observed since, oldest first."""
    kept: dict[pd.Timestamp, PastMigDemand] = {}
    for p in sorted(past, key=lambda p: p.at):
        if now - horizon - SPAN <= p.at <= now - horizon:
            kept.setdefault(p.at.floor(EVERY), p)
    return list(kept.values())


def recent_peaks(
    past: Sequence[PastMigDemand],
    observed: Mapping[str, Mapping[str, pd.Series]],
    now: pd.Timestamp,
    horizon: pd.Timedelta,
    quantile: float,
) -> dict[str, dict[str, float]]:
    """Per GPU model, the profiles that plan on persistence and the peak instances they
    plan on: the peak of the last ``horizon`` of observations, where the forecast did not
    predict the peak over the horizon clearly better at the past decisions (module
    docstring)."""
    decisions = _judged(past, now, horizon)
    out: dict[str, dict[str, float]] = {}
    for model, profiles in observed.items():
        for profile, inst in profiles.items():
            rows = []
            for d in decisions:
                forecast = d.peaks.get(model, {}).get(profile)
                before = _peak(inst, d.at - horizon, d.at)
                after = _peak(inst, d.at, d.at + horizon)
                if forecast is not None and before is not None and after is not None:
                    rows.append((forecast, before, after, d.at.floor("D")))
            now_peak = _peak(inst, now - horizon, now)
            if len(rows) < MIN_DECISIONS or now_peak is None:
                continue
            f, r, a, days = (np.array(c) for c in zip(*rows, strict=True))
            if clear_peak_source(f, r, a, days, quantile) == "recent-peak":
                out.setdefault(model, {})[profile] = now_peak
    return out
