"""What sharing and pooling save, for the plan: its ``sharing`` section and notes.

Per workload planned on shared GPUs (time-slicing or MPS, :mod:`scaler.planning.sharing`)
its mode and replicas per GPU; per pooling group (shared workloads of one GPU model and
mode) the GPUs at the policy quantile in one dedicated set per workload and pooled from
the group's joint forecast, and what pooling saves over the horizon in GPU-hours and
money (priced at the lowest ``price_per_gpu_hour`` of the model's pools, so the saving
is never overstated).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from forecaster.forecasting import SeriesForecast
from scaler.catalog.gpus import gpu_model
from scaler.config import Fleet, PolicyConfig
from scaler.planning.demand import pooled_savings, quantile_replicas
from scaler.planning.sharing import (
    SHARED_MODES,
    device_plugin_config,
    pooling_groups,
    resolved_mode,
    signal_correlation,
    workload_replicas_per_gpu,
)
from scaler.wording import NOTE_POOLING_JOINT, NOTE_POOLING_SUM, NOTE_POOLING_WHOLE, Reason


@dataclass(frozen=True)
class SharingReport:
    """The plan's ``sharing`` section and the notes it adds."""

    section: dict[str, Any] = field(default_factory=dict)
    notes: list[Reason] = field(default_factory=list)


def sharing_report(
    fleet: Fleet,
    policy: PolicyConfig,
    forecasts: Mapping[str, SeriesForecast],
    grid: pd.DatetimeIndex,
    history: Mapping[str, pd.Series] | None = None,
) -> SharingReport:
    """Shared workloads and what pooling them saves at the policy quantile on ``grid``;
    empty when no workload is planned on shared GPUs."""
    shared: dict[str, dict[str, Any]] = {
        w.name: {"mode": resolved_mode(w), "replicas_per_gpu": workload_replicas_per_gpu(w)}
        for w in fleet.served_workloads
        if resolved_mode(w) in SHARED_MODES
    }
    if not shared:
        return SharingReport()
    quantile = policy.quantile
    step_h = policy.cycle_s / 3600.0
    workloads, replicas, joint = quantile_replicas(fleet, forecasts, grid, quantile, history)
    savings = pooled_savings(workloads, replicas, joint)
    groups: dict[str, Any] = {}
    notes: list[Reason] = []
    total_h = total_cost = 0.0
    for group in pooling_groups(workloads):
        saving = savings[group.key]
        price = min(p.price_per_gpu_hour for p in fleet.pools_for(group.model))
        hours = float(saving.saved.sum()) * step_h
        correlation = signal_correlation([w.signal for w in group.workloads], history)
        estimated = bool((correlation < 1.0).any())
        dedicated_peak = float(saving.dedicated.max()) if saving.dedicated.size else 0.0
        pooled_peak = float(saving.pooled.max()) if saving.pooled.size else 0.0
        name, entry = device_plugin_config(group.mode, max(2, group.replicas_per_gpu))
        groups[group.key] = {
            "gpu_model": group.model,
            "mode": group.mode,
            "workloads": [w.name for w in group.workloads],
            "replicas_per_gpu": group.replicas_per_gpu,
            "device_plugin_config": {"name": name, "config": entry},
            "joint_quantile": "estimated" if estimated else "sum of quantiles",
            "dedicated_peak_gpus": dedicated_peak,
            "pooled_peak_gpus": pooled_peak,
            "saved_peak_gpus": dedicated_peak - pooled_peak,
            "saved_gpu_hours": round(hours, 4),
            "saved_cost": round(hours * price, 2),
            "price_per_gpu_hour": price,
        }
        total_h += hours
        total_cost += hours * price
        params = {
            "group": group.key,
            "workloads": tuple(w.name for w in group.workloads),
            "replicas": group.replicas_per_gpu,
            "pooled_peak_gpus": pooled_peak,
            "dedicated_peak_gpus": dedicated_peak,
            "quantile": f"q{quantile:g}",
            "saved_gpu_hours": hours,
            "saved_cost": hours * price,
        }
        code = NOTE_POOLING_JOINT if estimated else NOTE_POOLING_SUM
        notes.append(Reason(code, params, (f"sharing.pools.{group.key}",)))
    for name, info in shared.items():
        if info["replicas_per_gpu"] < 2:
            model = gpu_model(
                next(w for w in fleet.served_workloads if w.name == name).gpu_model
            ).name
            notes.append(
                Reason(
                    NOTE_POOLING_WHOLE,
                    {"workload": name, "mode": info["mode"], "model": model},
                    (f"sharing.workloads.{name}",),
                )
            )
    return SharingReport(
        section={
            "workloads": shared,
            "pools": groups,
            "saved_gpu_hours": round(total_h, 4),
            "saved_cost": round(total_cost, 2),
        },
        notes=notes,
    )
