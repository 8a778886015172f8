"""Demand translation: forecast quantiles of signals into GPUs needed per GPU model.

For a workload driven by signal ``s`` with ``units_per_replica`` u, ``gpus_per_replica``
g and ``min_replicas`` m, the GPUs needed when the signal is x are

    gpus(x) = g * max(m, ceil(x / u))

This is monotone in x, so applying it to a forecast quantile gives the same
quantile of GPU demand. Workloads on the same GPU model are summed quantile by
quantile; a sum of q-quantiles is at least the q-quantile of the sum, so the
result errs towards having capacity (documented, and deliberate).

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


def gpus_for(workload: WorkloadConfig, value: float | np.ndarray) -> np.ndarray:
    """GPUs ``workload`` needs when its signal is ``value`` (elementwise)."""
    x = np.nan_to_num(np.asarray(value, dtype=float), nan=0.0)
    replicas = np.ceil(np.maximum(x, 0.0) / workload.units_per_replica - 1e-9)
    replicas = np.maximum(replicas, workload.min_replicas)
    return replicas * workload.gpus_per_replica


def planning_grid(now: pd.Timestamp, horizon_s: int, step_s: int) -> pd.DatetimeIndex:
    """Timestamps ``now, now+step, ...`` covering the horizon."""
    n = max(1, math.ceil(horizon_s / step_s))
    return pd.date_range(now, periods=n, freq=pd.Timedelta(seconds=step_s), name="timestamp")


def on_grid(series: pd.Series, grid: pd.DatetimeIndex) -> np.ndarray:
    """Largest value of ``series`` inside each grid step (the next value where none falls inside)."""
    step = grid[1] - grid[0] if len(grid) > 1 else pd.Timedelta(minutes=5)
    idx = pd.DatetimeIndex(series.index).as_unit("ns").asi8
    vals = series.to_numpy(dtype=float)
    out = np.empty(len(grid))
    for i, t in enumerate(grid):
        lo = np.searchsorted(idx, t.value, side="left")
        hi = np.searchsorted(idx, (t + step).value, side="left")
        if hi > lo:
            out[i] = np.nanmax(vals[lo:hi])
        else:
            out[i] = vals[min(int(lo), len(vals) - 1)]
    return out


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
    config: Config, forecasts: dict[str, SeriesForecast]
) -> dict[str, float]:
    """GPUs needed for the largest demand observed in the last hour, per GPU model."""
    out: dict[str, float] = {}
    for w in config.workloads:
        fc = forecasts.get(w.signal)
        if fc is None:
            continue
        key = gpu_model(w.gpu_model).name
        out[key] = out.get(key, 0.0) + float(gpus_for(w, max(fc.recent_max, fc.last_value)))
    return out
