"""Slice demand: the MIG instances the forecasts ask for, per GPU model and profile.

A workload with a ``mig_profile`` needs one instance of that profile per replica,
``max(min_replicas, ceil(signal / units_per_replica))``, at the policy quantile on the
planning grid (``auto`` picks the smallest profile with ``memory_gb``). Layouts must hold
for hours, so the target covers the peak over the horizon; a GPU model fed by a stale or
missing signal keeps its layouts.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from forecaster.backtesting import pinball as pinball_points
from forecaster.estimators import quantile_column
from forecaster.forecasting import SeriesForecast
from scaler.catalog.gpus import gpu_model
from scaler.catalog.mig import resolve_profile
from scaler.config import Fleet, WorkloadConfig
from scaler.planning.demand import on_grid


def workload_profile(workload: WorkloadConfig) -> str | None:
    """The MIG profile one replica of ``workload`` runs on, or None for whole-GPU workloads."""
    if workload.mig_profile is None:
        return None
    return resolve_profile(workload.gpu_model, workload.mig_profile, workload.memory_gb)


def replicas_for(workload: WorkloadConfig, value: np.ndarray) -> np.ndarray:
    """Replicas ``workload`` needs when its signal is ``value``: one MIG instance each."""
    x = np.nan_to_num(np.asarray(value, dtype=float), nan=0.0)
    replicas = np.ceil(np.maximum(x, 0.0) / workload.units_per_replica - 1e-9)
    return np.maximum(replicas, workload.min_replicas)


def slice_demand(
    fleet: Fleet,
    forecasts: Mapping[str, SeriesForecast],
    grid: pd.DatetimeIndex,
    quantile: float,
) -> dict[str, dict[str, np.ndarray]]:
    """Instances needed per GPU model and MIG profile at ``quantile`` on ``grid``."""
    col = quantile_column(quantile)
    out: dict[str, dict[str, np.ndarray]] = {}
    for w in fleet.workloads:
        profile = workload_profile(w)
        fc = forecasts.get(w.signal)
        if profile is None or fc is None:
            continue
        series = fc.frame[col] if col in fc.frame.columns else fc.quantile(quantile)
        replicas = replicas_for(w, on_grid(series, grid))
        model = gpu_model(w.gpu_model).name
        per = out.setdefault(model, {})
        per[profile] = per.get(profile, np.zeros(len(grid))) + replicas
    return out


def peak_need(series: Mapping[str, np.ndarray], keep_whole: int) -> dict[str, int]:
    """Instances per profile the layouts must hold: the peak over the horizon (layouts
    hold for hours), and the whole GPUs kept for whole-GPU work."""
    peak = {p: math.ceil(float(v.max()) - 1e-9) for p, v in series.items()}
    need = {p: n for p, n in peak.items() if n > 0}
    if keep_whole:
        need["whole"] = keep_whole
    return need


def held_signals(
    workloads: Iterable[WorkloadConfig], forecasts: Mapping[str, SeriesForecast], stale: set[str]
) -> defaultdict[str, list[str]]:
    """Per GPU model, its MIG workloads' signals that are stale or missing, sorted."""
    held: defaultdict[str, list[str]] = defaultdict(list)
    for w in workloads:
        if w.mig_profile is not None and (w.signal in stale or w.signal not in forecasts):
            held[gpu_model(w.gpu_model).name].append(w.signal)
    for signals in held.values():
        signals.sort()
    return held


def pinball(actual: np.ndarray, predicted: np.ndarray, quantile: float) -> float:
    """Mean pinball loss of ``predicted`` as the ``quantile`` of ``actual``."""
    a, p = np.asarray(actual, dtype=float), np.asarray(predicted, dtype=float)
    return float(np.mean(pinball_points(a, p, quantile)))


KAPPA = 1.0
"""Standard errors by which the forecast must beat persistence to be planned on
(:func:`clear_peak_source`; the same one standard error as ``forecaster.choice.KAPPA``)."""


def clear_peak_source(
    forecast_peaks: np.ndarray,
    recent_peaks: np.ndarray,
    actual_peaks: np.ndarray,
    days: np.ndarray,
    quantile: float,
) -> str:
    """``forecast`` where the forecast predicted the peak over the horizon better than
    persistence at past decisions by more than :data:`KAPPA` standard errors of the
    difference of their pinball losses, the decisions grouped by ``days`` (decisions an
    hour apart move together); ``recent-peak`` otherwise, persistence being the simpler
    rule. With decisions on fewer than two days, as :func:`peak_source`."""
    a = np.asarray(actual_peaks, dtype=float)
    if not a.size:
        return "forecast"
    persist = pinball_points(a, np.asarray(recent_peaks, dtype=float), quantile)
    gain = pd.Series(persist - pinball_points(a, np.asarray(forecast_peaks, dtype=float), quantile))
    by_day = gain.groupby(np.asarray(days)).mean()
    if len(by_day) < 2:
        return peak_source(forecast_peaks, recent_peaks, actual_peaks, quantile)
    se = float(by_day.std(ddof=1)) / math.sqrt(len(by_day))
    return "forecast" if float(by_day.mean()) > KAPPA * se + 1e-12 else "recent-peak"


def peak_source(
    forecast_peaks: np.ndarray,
    recent_peaks: np.ndarray,
    actual_peaks: np.ndarray,
    quantile: float,
) -> str:
    """``recent-peak`` where persistence predicted the peak over the horizon better than the
    forecast at past decisions (the lower pinball loss at the policy ``quantile`` against the
    true peak), ``forecast`` otherwise (a tie, or no past decision to judge by)."""
    a = np.asarray(actual_peaks, dtype=float)
    if not a.size:
        return "forecast"
    persist = pinball(a, recent_peaks, quantile)
    return "recent-peak" if persist < pinball(a, forecast_peaks, quantile) - 1e-12 else "forecast"
