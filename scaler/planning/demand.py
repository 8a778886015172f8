"""Demand translation: forecast quantiles of signals into GPUs needed per GPU model.

For a workload driven by signal ``s`` with ``units_per_replica`` u, ``gpus_per_replica``
g and ``min_replicas`` m, the GPUs needed when the signal is x are

    gpus(x) = g * max(m, ceil(x / u))

This is monotone in x, so applying it to a forecast quantile gives the same
quantile of GPU demand. Workloads on the same GPU model are summed quantile by
quantile; a sum of q-quantiles is at least the q-quantile of the sum, so the
result errs towards having capacity (documented, and deliberate). The exception is a
pooling group, shared workloads of one model and mode that may run on the same GPUs
(time-slicing, MPS: :mod:`scaler.planning.sharing`): it is packed from the quantile of
its replicas' sum, estimated from the medians, the spreads and the signals' correlation,
and never needs more GPUs than a dedicated set per workload.

Near term, the forecast is combined with what is observed now. The forecast
says how demand *changes* over the next minutes; the newest observation says
where it *is*. For a grid step t the *anchored* signal is

    anchored(t) = last * median(t) / median(t_last)

(``median`` the forecast's median, ``t_last`` the newest observation; a ratio of 1
where the median is not positive). A day-ahead model's level is often off by more
than the next minutes' change, while its shape (a morning ramp, a half-hourly
step) is right; anchoring keeps the shape and drops the level error, so a wrong
forecast degrades to reactive scaling. See :mod:`scaler.planning.tiers` for how the
planner uses it.

What demand does within a lead time beyond the forecast's predicted change (a
load that doubles within minutes) is covered by a *margin* over the newest
observation, one per signal: learnt from the signal's own history
(:mod:`scaler.planning.margins`), or ``policy.headroom_fraction`` where the history is too
short to learn from.

Signals are put on the planning grid (``now`` to ``now + horizon`` at the cycle
step) by taking, for each grid step, the largest forecast value inside it: the
capacity chosen for a step must cover its worst sub-step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecaster.estimators import quantile_column
from forecaster.forecasting import SeriesForecast
from scaler.catalog.gpus import gpu_model
from scaler.catalog.mig import gpu_fraction, resolve_profile
from scaler.config import Fleet, WorkloadConfig
from scaler.planning.sharing import (
    dedicated_gpus,
    joint_quantile,
    pooled_gpus,
    pooling_groups,
    signal_correlation,
)


def gpus_for(
    workload: WorkloadConfig, value: float | np.ndarray, margin: float = 0.0
) -> np.ndarray:
    """GPUs ``workload`` needs when its signal is ``value`` (elementwise), with ``margin``.

    The margin is headroom on the replicas the value needs, ``ceil(replicas x (1 +
    margin))``, as a reactive autoscaler adds headroom to the GPUs in use: the same
    rule whether it is replayed on a history (:mod:`scaler.planning.margins`) or planned.

    A MIG workload (``mig_profile``) runs one replica per instance, so each replica
    counts as the share of a GPU its instance takes (``scaler.catalog.mig.gpu_fraction``), not
    as whole GPUs: the tier planner keeps room for the slices without counting them
    twice, and the MIG planner (``scaler.planning.mig``) chooses the layouts.
    """
    return gpus_of_replicas(workload, replicas_for(workload, value, margin))


def replicas_for(
    workload: WorkloadConfig, value: float | np.ndarray, margin: float = 0.0
) -> np.ndarray:
    """Replicas ``workload`` needs when its signal is ``value`` (elementwise), with ``margin``."""
    x = np.nan_to_num(np.asarray(value, dtype=float), nan=0.0)
    replicas = np.ceil(np.maximum(x, 0.0) / workload.units_per_replica - 1e-9)
    if margin:
        replicas = np.ceil(replicas * (1.0 + margin) - 1e-9)
    return np.maximum(replicas, workload.min_replicas)


def gpus_of_replicas(workload: WorkloadConfig, replicas: np.ndarray) -> np.ndarray:
    """GPUs of ``replicas`` of ``workload`` on a set of its own: whole GPUs, the MIG share,
    or, time-sliced or under MPS, ``ceil(replicas / replicas per GPU)``
    (:mod:`scaler.planning.sharing`)."""
    if workload.mig_profile is not None:
        profile = resolve_profile(workload.gpu_model, workload.mig_profile, workload.memory_gb)
        return replicas * gpu_fraction(workload.gpu_model, profile)
    shared = dedicated_gpus(workload, replicas)
    if shared is not None:
        return shared
    return replicas * workload.gpus_per_replica


def packed_by_model(
    workloads: Sequence[WorkloadConfig],
    replicas: Sequence[np.ndarray],
    joint: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """GPUs per GPU model for ``replicas`` of each of ``workloads``: each workload's own
    GPUs (:func:`gpus_of_replicas`), except that a pooling group's shared workloads
    (:func:`scaler.planning.sharing.pooling_groups`) take the fewer of their dedicated sets
    and the pooled GPUs of ``joint[group.key]`` replicas (the replicas' sum where absent)."""
    out: dict[str, np.ndarray] = {}
    pooled = pooled_savings(workloads, replicas, joint)
    for w, r in zip(workloads, replicas, strict=True):
        key = gpu_model(w.gpu_model).name
        out[key] = out.get(key, 0.0) + gpus_of_replicas(w, np.asarray(r, dtype=float))
    for saving in pooled.values():
        out[saving.model] = out[saving.model] - saving.saved
    return out


@dataclass(frozen=True)
class PoolSaving:
    """One pooling group's GPUs per step: dedicated sets, pooled, and what pooling saves."""

    model: str
    dedicated: np.ndarray
    pooled: np.ndarray
    saved: np.ndarray
    """``dedicated - min(dedicated, pooled)``, never negative."""


def pooled_savings(
    workloads: Sequence[WorkloadConfig],
    replicas: Sequence[np.ndarray],
    joint: Mapping[str, np.ndarray] | None = None,
) -> dict[str, PoolSaving]:
    """Per pooling group (its ``key``), what pooling its workloads' ``replicas`` saves."""
    by_name = {w.name: np.asarray(r, dtype=float) for w, r in zip(workloads, replicas, strict=True)}
    out: dict[str, PoolSaving] = {}
    for group in pooling_groups(workloads):
        own = [by_name[w.name] for w in group.workloads]
        dedicated = np.sum(
            [gpus_of_replicas(w, r) for w, r in zip(group.workloads, own, strict=True)], axis=0
        )
        together = (joint or {}).get(group.key)
        pooled = pooled_gpus(
            group, np.sum(own, axis=0) if together is None else np.asarray(together, dtype=float)
        )
        best = np.minimum(dedicated, pooled)
        out[group.key] = PoolSaving(group.model, dedicated, best, dedicated - best)
    return out


def planning_grid(now: pd.Timestamp, horizon_s: int, step_s: int) -> pd.DatetimeIndex:
    """Timestamps ``now, now+step, ...`` covering the horizon."""
    n = max(1, math.ceil(horizon_s / step_s))
    return pd.date_range(now, periods=n, freq=pd.Timedelta(seconds=step_s), name="timestamp")


def on_grid(series: pd.Series, grid: pd.DatetimeIndex) -> np.ndarray:
    """Largest value of ``series`` inside each grid step (the next value where none falls inside)."""
    step = grid[1] - grid[0] if len(grid) > 1 else pd.Timedelta(minutes=5)
    idx = pd.DatetimeIndex(series.index).as_unit("ns").asi8
    vals = series.to_numpy(dtype=float)
    out = np.full(len(grid), -np.inf)
    if len(vals) == 0:
        return np.zeros(len(grid))
    start = pd.DatetimeIndex(grid).as_unit("ns").asi8
    step_ns = int(step.value)
    bucket = (idx - start[0]) // step_ns
    inside = (bucket >= 0) & (bucket < len(grid)) & ~np.isnan(vals)
    np.maximum.at(out, bucket[inside], vals[inside])
    empty = ~np.isfinite(out)
    if empty.any():
        # No sample inside the step (a coarser forecast, or past its end): the next one.
        lo = np.searchsorted(idx, start[empty], side="left")
        out[empty] = vals[np.minimum(lo, len(vals) - 1)]
    return np.nan_to_num(out, nan=0.0)


def demand_by_model(
    fleet: Fleet,
    forecasts: dict[str, SeriesForecast],
    grid: pd.DatetimeIndex,
    quantile: float,
    history: Mapping[str, pd.Series] | None = None,
) -> dict[str, np.ndarray]:
    """GPUs needed at ``quantile`` per GPU model on ``grid`` (shared workloads packed and
    pooled, :func:`packed_by_model`; ``history`` for the pooled groups' correlation)."""
    workloads, replicas, joint = quantile_replicas(fleet, forecasts, grid, quantile, history)
    return packed_by_model(workloads, replicas, joint)


def quantile_replicas(
    fleet: Fleet,
    forecasts: Mapping[str, SeriesForecast],
    grid: pd.DatetimeIndex,
    quantile: float,
    history: Mapping[str, pd.Series] | None = None,
) -> tuple[list[WorkloadConfig], list[np.ndarray], dict[str, np.ndarray]]:
    """The served workloads with a forecast, their replicas at ``quantile`` on ``grid``, and
    per pooling group the joint replicas at ``quantile``: the quantile of the sum, not the
    sum of the quantiles (:func:`scaler.planning.sharing.joint_quantile`, the correlation
    from ``history``; without it the sum of the quantiles)."""
    workloads: list[WorkloadConfig] = []
    replicas: list[np.ndarray] = []
    medians: dict[str, np.ndarray] = {}
    col = quantile_column(quantile)
    for w in fleet.served_workloads:
        fc = forecasts.get(w.signal)
        if fc is None:
            continue
        series = fc.frame[col] if col in fc.frame.columns else fc.quantile(quantile)
        workloads.append(w)
        replicas.append(replicas_for(w, on_grid(series, grid)))
    joint: dict[str, np.ndarray] = {}
    by_name = dict(zip((w.name for w in workloads), replicas, strict=True))
    for group in pooling_groups(workloads):
        names = [w.name for w in group.workloads]
        for w in group.workloads:
            fc = forecasts[w.signal]
            median = fc.frame["q0.5"] if "q0.5" in fc.frame.columns else fc.quantile(0.5)
            medians[w.name] = replicas_for(w, on_grid(median, grid))
        correlation = signal_correlation([w.signal for w in group.workloads], history)
        together = joint_quantile(
            [medians[n] for n in names], [by_name[n] for n in names], correlation
        )
        joint[group.key] = np.ceil(together - 1e-9)
    return workloads, replicas, joint


Headroom = float | Mapping[str, float]
"""One margin for every signal, or a margin per signal name (a learned one, scaler.planning.margins)."""


def headroom_for(headroom: Headroom, signal: str, default: float = 0.0) -> float:
    """The margin of ``signal``: its own where ``headroom`` maps it, else ``default``."""
    if isinstance(headroom, Mapping):
        return float(headroom.get(signal, default))
    return float(headroom)


def current_demand_by_model(
    fleet: Fleet,
    forecasts: dict[str, SeriesForecast],
    headroom_fraction: Headroom = 0.0,
    recent_peaks: Mapping[str, float] | None = None,
    peak_headroom: Headroom = 0.0,
) -> dict[str, float]:
    """The observed floor per GPU model: GPUs for what is running now, with headroom.

    Per workload ``max(gpus(last, headroom), gpus(recent peak, peak_headroom))``: the newest
    demand plus a margin for growth while new nodes boot, and never less than what
    the recent past actually needed (a dip of one sample does not release
    capacity). The recent peak is ``recent_peaks[signal]`` where given (the planner's
    lead time + stabilization window), else the forecast's last hour.
    """

    def level(w: WorkloadConfig, fc: SeriesForecast) -> float:
        peak = (recent_peaks or {}).get(w.signal, fc.recent_max)
        return max(
            float(replicas_for(w, fc.last_value, headroom_for(headroom_fraction, w.signal))),
            float(replicas_for(w, peak, headroom_for(peak_headroom, w.signal))),
        )

    return _summed_by_model(fleet, forecasts, level)


def newest_demand_by_model(fleet: Fleet, forecasts: dict[str, SeriesForecast]) -> dict[str, float]:
    """GPUs per GPU model for the newest observation of each signal, no margin.

    What a pool held on stale or missing data may still scale up to: the demand
    that is already there, not a forecast made from old data.
    """
    return _summed_by_model(fleet, forecasts, lambda w, fc: float(replicas_for(w, fc.last_value)))


def _summed_by_model(
    fleet: Fleet,
    forecasts: dict[str, SeriesForecast],
    level: Callable[[WorkloadConfig, SeriesForecast], float],
) -> dict[str, float]:
    """GPUs per GPU model for ``level`` (replicas) of every workload whose signal has a
    forecast, packed (:func:`packed_by_model`) in the config's workload order."""
    workloads = [w for w in fleet.served_workloads if w.signal in forecasts]
    replicas = [np.asarray(level(w, forecasts[w.signal])) for w in workloads]
    return {k: float(v) for k, v in packed_by_model(workloads, replicas).items()}


def median_ratio(fc: SeriesForecast, grid: pd.DatetimeIndex) -> np.ndarray:
    """Forecast median on ``grid`` over the median at the newest observation (1 where undefined)."""
    median = fc.frame["q0.5"] if "q0.5" in fc.frame.columns else fc.quantile(0.5)
    if median.empty:
        return np.ones(len(grid))
    at_last = median[median.index <= fc.last_timestamp]
    # A fresh forecast starts one step after the newest observation: use its first value.
    base = float(at_last.iloc[-1]) if len(at_last) else float(median.iloc[0])
    values = on_grid(median, grid)
    # A median at (or within rounding of) zero carries no scale to anchor on.
    if not np.isfinite(base) or base <= 1e-6 * max(1.0, float(np.nanmax(np.abs(values)))):
        return np.ones(len(grid))
    with np.errstate(over="ignore", invalid="ignore"):
        ratio = values / base
    return np.where(np.isfinite(ratio) & (ratio > 0), ratio, 1.0)


def anchored_demand_by_model(
    fleet: Fleet,
    forecasts: dict[str, SeriesForecast],
    grid: pd.DatetimeIndex,
    headroom_fraction: Headroom = 0.0,
) -> dict[str, np.ndarray]:
    """GPUs per GPU model for ``last * median ratio`` on ``grid``, with headroom (:func:`gpus_for`)."""
    workloads = [w for w in fleet.served_workloads if w.signal in forecasts]
    replicas = [
        replicas_for(
            w,
            forecasts[w.signal].last_value * median_ratio(forecasts[w.signal], grid),
            headroom_for(headroom_fraction, w.signal),
        )
        for w in workloads
    ]
    return packed_by_model(workloads, replicas)
