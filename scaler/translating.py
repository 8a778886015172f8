"""Demand translation: forecast quantiles of signals into GPUs needed per GPU model.

For a workload driven by signal ``s`` with ``units_per_replica`` u, ``gpus_per_replica``
g and ``min_replicas`` m, the GPUs needed when the signal is x are

    gpus(x) = g * max(m, ceil(x / u))

This is monotone in x, so applying it to a forecast quantile gives the same
quantile of GPU demand. Workloads on the same GPU model are summed quantile by
quantile; a sum of q-quantiles is at least the q-quantile of the sum, so the
result errs towards having capacity (documented, and deliberate).

Near term, the forecast is combined with what is observed now. The forecast
says how demand *changes* over the next minutes; the newest observation says
where it *is*. For a grid step t the *anchored* signal is

    anchored(t) = last * median(t) / median(t_last)

(``median`` the forecast's median, ``t_last`` the newest observation; a ratio of 1
where the median is not positive). A day-ahead model's level is often off by more
than the next minutes' change, while its shape (a morning ramp, a half-hourly
step) is right; anchoring keeps the shape and drops the level error, so a wrong
forecast degrades to reactive scaling. See :mod:`scaler.planning` for how the
planner uses it.

Bursts no forecast foresees (a load that doubles within minutes) are covered by
the *burst guard*, learnt from the signal's own recent history: for a grid step m
signal steps after the newest observation,

    burst(m) = last * Q_q( max(y[i+1..i+m]) / y[i] )

the policy quantile ``q`` of the largest rise over m steps seen in the last day
(:data:`BURST_WINDOW`). Where the series rises calmly it is close to 1 and costs
nothing; where it jumps, the planner keeps the margin those jumps needed, the
way a reactive autoscaler's fixed headroom would, but sized from the data.

Signals are put on the planning grid (``now`` to ``now + horizon`` at the cycle
step) by taking, for each grid step, the largest forecast value inside it: the
capacity chosen for a step must cover its worst sub-step.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from forecaster.estimators import quantile_column
from forecaster.forecasting import SeriesForecast
from scaler.catalog import gpu_model
from scaler.config import Config, WorkloadConfig
from scaler.mig import gpu_fraction, resolve_profile


def gpus_for(workload: WorkloadConfig, value: float | np.ndarray) -> np.ndarray:
    """GPUs ``workload`` needs when its signal is ``value`` (elementwise).

    A MIG workload (``mig_profile``) runs one replica per instance, so each replica
    counts as the share of a GPU its instance takes (``scaler.mig.gpu_fraction``), not
    as whole GPUs: the tier planner keeps room for the slices without counting them
    twice, and the MIG planner (``scaler.mig_planning``) chooses the layouts.
    """
    x = np.nan_to_num(np.asarray(value, dtype=float), nan=0.0)
    replicas = np.ceil(np.maximum(x, 0.0) / workload.units_per_replica - 1e-9)
    replicas = np.maximum(replicas, workload.min_replicas)
    if workload.mig_profile is not None:
        profile = resolve_profile(workload.gpu_model, workload.mig_profile, workload.memory_gb)
        return replicas * gpu_fraction(workload.gpu_model, profile)
    return replicas * workload.gpus_per_replica


BURST_WINDOW = pd.Timedelta(days=1)
"""History the burst guard learns rises from: one day sees every hour of a daily cycle."""
BURST_MIN_SAMPLES = 12
"""Fewer rises than this (an hour at 5-minute steps) say nothing about bursts: no guard."""


def rise_quantiles(
    observed: pd.Series, step: pd.Timedelta, max_steps: int, quantile: float
) -> np.ndarray:
    """``Q_q(max(y[i+1..i+m]) / y[i])`` for m = 1..max_steps over the last :data:`BURST_WINDOW`.

    ``observed`` is the signal's recent history (NaN for gaps); an entry is NaN where
    fewer than :data:`BURST_MIN_SAMPLES` rises with a positive base were seen.
    """
    out = np.full(max_steps, np.nan)
    seen = observed.dropna()
    if seen.empty or max_steps < 1 or step <= pd.Timedelta(0):
        return out
    last = seen.index[-1]
    seen = seen[seen.index > last - BURST_WINDOW]
    grid = pd.date_range(seen.index[0], last, freq=step)
    # Samples off the step (a source that moved its scrape offset) are gaps, not rises.
    v = seen.reindex(grid).to_numpy(dtype=float)
    base = v[:-1]
    ahead = np.full(len(base), np.nan)
    # A rise over m steps needs m + 1 samples: a short or stale history has fewer.
    for m in range(1, min(max_steps, len(v) - 1) + 1):
        nxt = np.full(len(base), np.nan)
        nxt[: len(v) - m] = v[m:]
        # Largest value over the next m steps: a burst that comes and goes still needed GPUs.
        ahead = np.fmax(ahead, nxt)
        valid = np.isfinite(base) & (base > 0) & np.isfinite(ahead)
        valid[len(v) - m :] = False
        if valid.sum() >= BURST_MIN_SAMPLES:
            out[m - 1] = float(np.quantile(ahead[valid] / base[valid], quantile))
    return out


def burst_demand_by_model(
    config: Config,
    forecasts: dict[str, SeriesForecast],
    observed: dict[str, pd.Series],
    grid: pd.DatetimeIndex,
    quantile: float,
    reach: int,
    headroom_fraction: float = 0.0,
) -> dict[str, np.ndarray]:
    """The burst guard in GPUs per GPU model on the first ``reach`` grid steps (0 beyond).

    Grid step j covers the signal steps up to ``grid[j] + cycle``; a workload's guard
    is its newest observation times the larger of ``1 + headroom_fraction`` and the
    ``quantile`` of the rises seen over that many steps (the headroom alone where its
    recent history is too short), so the sum over workloads never drops below any
    one workload's headroom floor.
    """
    cycle = grid[1] - grid[0] if len(grid) > 1 else pd.Timedelta(minutes=5)
    out: dict[str, np.ndarray] = {}
    for w in config.workloads:
        fc = forecasts.get(w.signal)
        history = observed.get(w.signal)
        if fc is None:
            continue
        step = fc.step if fc.step > pd.Timedelta(0) else cycle
        if history is None:
            history = pd.Series(dtype=float, index=pd.DatetimeIndex([]))
        near = grid[: max(0, min(reach, len(grid)))]
        if len(near) == 0:
            continue
        # Signal steps between the newest observation and the end of each grid step.
        ahead = (near + cycle - step - fc.last_timestamp) / step
        steps = np.maximum(1, np.ceil(np.asarray(ahead, dtype=float) - 1e-9)).astype(int)
        recent = history[history.index <= fc.last_timestamp]
        rises = rise_quantiles(recent, step, int(steps.max()), quantile)
        ratio = np.fmax(rises[steps - 1], 1.0 + headroom_fraction)
        gpus = np.zeros(len(grid))
        gpus[: len(near)] = gpus_for(w, fc.last_value * ratio)
        key = gpu_model(w.gpu_model).name
        out[key] = out.get(key, np.zeros(len(grid))) + gpus
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
    config: Config,
    forecasts: dict[str, SeriesForecast],
    grid: pd.DatetimeIndex,
    quantile: float,
) -> dict[str, np.ndarray]:
    """GPUs needed at ``quantile`` per GPU model on ``grid``."""
    col = quantile_column(quantile)
    out: dict[str, np.ndarray] = {}
    for w in config.workloads:
        fc = forecasts.get(w.signal)
        if fc is None:
            continue
        series = fc.frame[col] if col in fc.frame.columns else fc.quantile(quantile)
        values = on_grid(series, grid)
        key = gpu_model(w.gpu_model).name
        out[key] = out.get(key, np.zeros(len(grid))) + gpus_for(w, values)
    return out


def current_demand_by_model(
    config: Config, forecasts: dict[str, SeriesForecast], headroom_fraction: float = 0.0
) -> dict[str, float]:
    """The observed floor per GPU model: GPUs for what is running now, with headroom.

    Per workload ``max(gpus(last * (1 + headroom)), gpus(largest value of the last
    hour))``: the newest demand plus a margin for growth while new nodes boot, and
    never less than what the last hour actually needed (a dip of one sample does not
    release capacity).
    """
    out: dict[str, float] = {}
    for w in config.workloads:
        fc = forecasts.get(w.signal)
        if fc is None:
            continue
        key = gpu_model(w.gpu_model).name
        level = max(fc.last_value * (1.0 + headroom_fraction), fc.recent_max)
        out[key] = out.get(key, 0.0) + float(gpus_for(w, level))
    return out


def newest_demand_by_model(
    config: Config, forecasts: dict[str, SeriesForecast]
) -> dict[str, float]:
    """GPUs per GPU model for the newest observation of each signal, no margin.

    What a pool held on stale or missing data may still scale up to: the demand
    that is already there, not a forecast made from old data.
    """
    out: dict[str, float] = {}
    for w in config.workloads:
        fc = forecasts.get(w.signal)
        if fc is None:
            continue
        key = gpu_model(w.gpu_model).name
        out[key] = out.get(key, 0.0) + float(gpus_for(w, fc.last_value))
    return out


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
    config: Config,
    forecasts: dict[str, SeriesForecast],
    grid: pd.DatetimeIndex,
    headroom_fraction: float = 0.0,
) -> dict[str, np.ndarray]:
    """GPUs per GPU model for ``last * (1 + headroom) * median ratio`` on ``grid``."""
    out: dict[str, np.ndarray] = {}
    for w in config.workloads:
        fc = forecasts.get(w.signal)
        if fc is None:
            continue
        values = fc.last_value * (1.0 + headroom_fraction) * median_ratio(fc, grid)
        key = gpu_model(w.gpu_model).name
        out[key] = out.get(key, np.zeros(len(grid))) + gpus_for(w, values)
    return out
