"""Footprints from what replicas use: GPU memory and compute share read off their signals.

A workload that shares GPUs by time-slicing or MPS is packed by its footprint per replica
(:class:`scaler.planning.sharing.Footprint`): ``memory_gb`` and ``compute_share``. Where
the config does not declare them but names the signals that measure them
(``memory_signal``: GB one replica uses; ``utilization_signal``: percent of its GPU one
replica keeps busy), :func:`observed_footprints` reads them for the cycle from the
history: the q0.99 of each signal over its history, with :data:`HEADROOM` on top, memory
rounded up to a whole GB and the compute share up to a multiple of :data:`SHARE_STEP`,
so that the replicas per GPU do not move with every cycle's noise (a change of replicas
relabels and may drain nodes).

What is declared wins. Nothing is filled in from less than :data:`MIN_HISTORY` of
finite, non-negative values, for a workload that may not share (``isolation:
required``, ``whole``, MIG, several GPUs per replica), or where the observed memory does
not fit the GPU: such a workload keeps the whole-GPU footprint. A share is only taken
with a memory (declared or observed) and the other way round, since a footprint that
declares one of the two still counts the other as the whole GPU and packs nothing:
missing data never packs replicas tighter, so it never releases capacity.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from scaler.catalog.gpus import gpu_model
from scaler.config import WorkloadConfig

OBSERVED_QUANTILE = 0.99
"""The quantile of a replica's use its footprint is sized on."""
HEADROOM = 0.10
"""Added on top of the observed quantile."""
SHARE_STEP = 0.05
"""The compute share is rounded up to a multiple of this."""
MIN_HISTORY = pd.Timedelta(days=1)
"""The least span of history a footprint is read from."""


def _observed(y: pd.Series | None) -> tuple[float, pd.Timedelta] | None:
    """The q0.99 of ``y``'s finite, non-negative values and the span they cover; None
    without any."""
    if y is None or y.empty:
        return None
    values = pd.to_numeric(y, errors="coerce")
    values = values[np.isfinite(values.to_numpy(dtype=float)) & (values >= 0)]
    if values.empty:
        return None
    span = pd.Timedelta(values.index.max() - values.index.min())
    return float(np.quantile(values.to_numpy(dtype=float), OBSERVED_QUANTILE)), span


def _may_share(w: WorkloadConfig) -> bool:
    return (
        w.sharing in ("auto", "time-slicing", "mps")
        and w.isolation != "required"
        and w.mig_profile is None
        and w.gpus_per_replica == 1
        and not w.is_deferrable
    )


def observed_footprint(
    w: WorkloadConfig, history: Mapping[str, pd.Series]
) -> tuple[WorkloadConfig, str | None]:
    """``w`` with the footprint its signals show filled in where it declares none, and a
    note saying what was read; ``(w, None)`` where nothing is filled in."""
    if not _may_share(w) or (w.memory_signal is None and w.utilization_signal is None):
        return w, None
    gpu = gpu_model(w.gpu_model)
    memory, share = w.memory_gb, w.compute_share
    if share is None and w.replicas_per_gpu is not None:
        share = 1.0 / w.replicas_per_gpu
    read: list[str] = []
    if memory is None and w.memory_signal is not None:
        seen = _observed(history.get(w.memory_signal))
        if seen is not None and seen[1] >= MIN_HISTORY:
            need = math.ceil(seen[0] * (1 + HEADROOM) - 1e-9)
            if 0 < need <= gpu.memory_gb:
                memory = float(max(need, 1))
                read.append(
                    f"q{OBSERVED_QUANTILE:g} memory {seen[0]:.1f} GB over "
                    f"{seen[1] / pd.Timedelta(days=1):.1f} d -> {memory:g} GB"
                )
    if share is None and w.utilization_signal is not None:
        seen = _observed(history.get(w.utilization_signal))
        if seen is not None and seen[1] >= MIN_HISTORY:
            steps = math.ceil(seen[0] / 100 * (1 + HEADROOM) / SHARE_STEP - 1e-9)
            share = min(1.0, max(1, steps) * SHARE_STEP)
            read.append(
                f"q{OBSERVED_QUANTILE:g} utilization {seen[0]:.0f}% over "
                f"{seen[1] / pd.Timedelta(days=1):.1f} d -> compute share {share:.2f}"
            )
    if not read or memory is None or share is None:
        # Half a footprint packs nothing (the other half counts as the whole GPU).
        return w, None
    update: dict[str, float] = {}
    if w.memory_gb is None:
        update["memory_gb"] = memory
    if w.compute_share is None and w.replicas_per_gpu is None:
        update["compute_share"] = round(share, 6)
    filled = w.model_copy(update=update)
    note = (
        f"workload {w.name!r}: footprint from its signals ({'; '.join(read)}, "
        f"{HEADROOM:.0%} headroom)"
    )
    return filled, note


def observed_footprints(
    workloads: Iterable[WorkloadConfig], history: Mapping[str, pd.Series]
) -> tuple[dict[str, WorkloadConfig], list[str]]:
    """Per workload whose footprint its signals fill in, the workload as planned
    (:func:`observed_footprint`), and a note per such workload; the planner takes them
    as a fleet's workloads (:meth:`scaler.config.Fleet.with_workloads`)."""
    filled: dict[str, WorkloadConfig] = {}
    notes: list[str] = []
    for w in workloads:
        seen, note = observed_footprint(w, history)
        if note is not None:
            filled[w.name] = seen
            notes.append(note)
    return filled, notes
