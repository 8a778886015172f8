"""Right-sizing per workload: what each replica uses against what it is given, and the
smallest MIG profile or GPU that would hold it.

For a workload with a ``memory_signal`` (GPU memory one replica uses, GB) the table gives
the observed q0.99 of it over the history, what a replica is given (its MIG profile's
memory, or its GPU's), and the smallest fit with :data:`HEADROOM` on top: a MIG profile of
its own GPU model where the model has MIG, else the smallest GPU model of the catalog.
With a ``utilization_signal`` (percent of its GPU a replica keeps busy) a MIG profile must
also give the q0.99 of that share of the GPU's compute. With ``model_params_b``, the
weights are taken as stored at 2 bytes a parameter (FP16/BF16) and the rest of what the
replica uses (KV cache, activations) as overhead, and the table says what fits the same
replica with FP8 (1 byte) and INT4 (half a byte) weights.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from scaler.catalog.gpus import BUILTIN_GPU_MODELS, gpu_model, user_models
from scaler.catalog.mig import GEOMETRIES
from scaler.config import WorkloadConfig
from scaler.reports.document import Column, Section, Table
from scaler.reports.i18n import t

HEADROOM = 0.10
"""What a fit leaves on top of the observed q0.99."""
OBSERVED_QUANTILE = 0.99
BYTES_PER_PARAM = {"fp16": 2.0, "fp8": 1.0, "int4": 0.5}


def _catalog_gpus() -> list[tuple[str, int]]:
    """(name, memory GB) of every GPU model known, smallest memory first."""
    names = set(BUILTIN_GPU_MODELS) | {m.name for m in user_models()}
    return sorted(((n, gpu_model(n).memory_gb) for n in names), key=lambda x: (x[1], x[0]))


def smallest_fit(model: str, memory_gb: float, compute: float | None) -> str:
    """The smallest MIG profile of ``model`` holding ``memory_gb`` (and ``compute``, a share
    of the GPU) with the headroom, else the smallest GPU model holding the memory; "–" when
    nothing does."""
    need = memory_gb * (1 + HEADROOM)
    key = gpu_model(model).name
    geo = GEOMETRIES.get(key)
    if geo is not None:
        fits = [
            p
            for p in geo.base_profiles
            if p.memory_gb >= need
            and (compute is None or p.compute_slices / geo.compute_slices >= compute)
        ]
        if fits:
            best = min(fits, key=lambda p: (p.memory_gb, p.compute_slices))
            return best.name
    for name, gb in _catalog_gpus():
        if gb >= need:
            return name
    return "–"


def _given_gb(w: WorkloadConfig) -> float:
    """Memory a replica is given: its MIG profile's, else its GPUs'."""
    key = gpu_model(w.gpu_model).name
    if w.mig_profile and w.mig_profile != "auto" and key in GEOMETRIES:
        return float(GEOMETRIES[key].profile(w.mig_profile).memory_gb)
    return float(gpu_model(w.gpu_model).memory_gb * w.gpus_per_replica)


def _q99(y: pd.Series | None) -> float:
    values = y.dropna().to_numpy(dtype=float) if y is not None else np.array([])
    values = values[np.isfinite(values)]
    return float(np.quantile(values, OBSERVED_QUANTILE)) if values.size else math.nan


def rightsizing_rows(
    workloads: Sequence[WorkloadConfig], history: Mapping[str, pd.Series]
) -> list[dict[str, Any]]:
    """A row per workload of the served ``workloads`` with a memory signal that has history."""
    rows = []
    for w in workloads:
        if w.memory_signal is None:
            continue
        memory = _q99(history.get(w.memory_signal))
        if not math.isfinite(memory):
            continue
        util = _q99(history.get(w.utilization_signal)) if w.utilization_signal else math.nan
        compute = min(1.0, max(0.0, util / 100.0)) if math.isfinite(util) else None
        given = _given_gb(w)
        row: dict[str, Any] = {
            "workload": w.name,
            "gpu_model": gpu_model(w.gpu_model).name,
            "memory_q99": memory,
            "memory_given": given,
            "memory_share": memory / given if given else math.nan,
            "util_q99": util,
            "fit": smallest_fit(w.gpu_model, memory, compute),
            "fit_fp8": "–",
            "fit_int4": "–",
        }
        if w.model_params_b is not None:
            overhead = max(0.0, memory - w.model_params_b * BYTES_PER_PARAM["fp16"])
            for key in ("fp8", "int4"):
                need = w.model_params_b * BYTES_PER_PARAM[key] + overhead
                row[f"fit_{key}"] = smallest_fit(w.gpu_model, need, compute)
        rows.append(row)
    return rows


def rightsizing_section(rows: list[dict[str, Any]], lang: str) -> Section | None:
    """The right-sizing table; None without a row."""
    if not rows:
        return None
    columns = [
        Column("workload", t(lang, "col_workload")),
        Column("gpu_model", t(lang, "col_gpu_model")),
        Column("memory_q99", t(lang, "col_memory_q99"), 1),
        Column("memory_given", t(lang, "col_memory_given"), 1),
        Column("memory_share", t(lang, "col_memory_share"), 0, percent=True),
        Column("util_q99", t(lang, "col_util_q99"), 0),
        Column("fit", t(lang, "col_fit")),
        Column("fit_fp8", t(lang, "col_fit_fp8")),
        Column("fit_int4", t(lang, "col_fit_int4")),
    ]
    sec = Section(
        "rightsizing",
        t(lang, "sec_rightsizing"),
        [t(lang, "sec_rightsizing_intro", headroom=round(100 * HEADROOM))],
    )
    sec.tables.append(Table("rightsizing", t(lang, "tbl_rightsizing"), columns, rows))
    return sec
