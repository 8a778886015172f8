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

Footprint signals are screened like demand signals (:func:`implausible_footprints`): a
replica whose memory reads under :data:`MIN_MEMORY_GB` (a CUDA context alone takes about
that) or under the weights of its model at INT4 (``model_params_b`` x
:data:`MIN_GB_PER_B_PARAMS`), or whose utilization never reaches
:data:`MIN_UTILIZATION_PCT`, is a broken exporter or a wrong query, not a replica that
fits twenty to a GPU. Such a footprint is not read (the workload keeps a whole GPU) and
the workload's demand signal is suspect (``suspect.footprint``): its pools hold, never a
scale-down on it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from scaler import wording
from scaler.catalog.gpus import gpu_model
from scaler.config import WorkloadConfig
from scaler.wording import NOTE_FOOTPRINT_READ, Reason

OBSERVED_QUANTILE = 0.99
"""The quantile of a replica's use its footprint is sized on."""
HEADROOM = 0.10
"""Added on top of the observed quantile."""
SHARE_STEP = 0.05
"""The compute share is rounded up to a multiple of this."""
MIN_HISTORY = pd.Timedelta(days=1)
"""The least span of history a footprint is read from."""
MIN_MEMORY_GB = 0.5
"""The least GPU memory a replica plausibly uses: its CUDA context alone takes about this."""
MIN_GB_PER_B_PARAMS = 0.5
"""GB per billion parameters of the smallest weights a replica loads (INT4)."""
MIN_UTILIZATION_PCT = 1.0
"""A serving replica's q0.99 utilization under this percent is not a measurement of it."""


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


def implausible_footprint(w: WorkloadConfig, history: Mapping[str, pd.Series]) -> Reason | None:
    """Why the footprint ``w``'s signals show is implausibly small (see the module), or None."""
    if not _may_share(w) or (w.memory_signal is None and w.utilization_signal is None):
        return None
    checks: list[tuple[str | None, float, str]] = []
    if w.memory_gb is None:
        floor = max(MIN_MEMORY_GB, MIN_GB_PER_B_PARAMS * (w.model_params_b or 0.0))
        checks.append((w.memory_signal, floor, "GB"))
    if w.compute_share is None and w.replicas_per_gpu is None:
        checks.append((w.utilization_signal, MIN_UTILIZATION_PCT, "%"))
    for name, floor, unit in checks:
        seen = _observed(history.get(name)) if name is not None else None
        if seen is None or seen[1] < MIN_HISTORY or seen[0] >= floor:
            continue
        params = {
            "signal": w.signal,
            "workload": w.name,
            "footprint_signal": name,
            "value": round(seen[0], 6),
            "floor": round(floor, 6),
            "unit": unit,
        }
        return Reason(wording.SUSPECT_FOOTPRINT, params)
    return None


def implausible_footprints(
    workloads: Iterable[WorkloadConfig], history: Mapping[str, pd.Series]
) -> dict[str, list[Reason]]:
    """Per demand signal, why the footprints of its workloads are suspect: the cycle holds
    the signal's pools as it does for suspect demand (``Collected.suspect``)."""
    out: dict[str, list[Reason]] = {}
    for w in workloads:
        why = implausible_footprint(w, history)
        if why is not None:
            out.setdefault(w.signal, []).append(why)
    return out


def observed_footprint(
    w: WorkloadConfig, history: Mapping[str, pd.Series]
) -> tuple[WorkloadConfig, Reason | None]:
    """``w`` with the footprint its signals show filled in where it declares none, and a
    note saying what was read; ``(w, None)`` where nothing is filled in (an implausible
    footprint included: it is never packed)."""
    if not _may_share(w) or (w.memory_signal is None and w.utilization_signal is None):
        return w, None
    if implausible_footprint(w, history) is not None:
        return w, None
    gpu = gpu_model(w.gpu_model)
    memory, share = w.memory_gb, w.compute_share
    if share is None and w.replicas_per_gpu is not None:
        share = 1.0 / w.replicas_per_gpu
    read: dict[str, float] = {}
    if memory is None and w.memory_signal is not None:
        seen = _observed(history.get(w.memory_signal))
        if seen is not None and seen[1] >= MIN_HISTORY:
            need = math.ceil(seen[0] * (1 + HEADROOM) - 1e-9)
            if 0 < need <= gpu.memory_gb:
                memory = float(max(need, 1))
                read.update(
                    memory_seen=seen[0],
                    memory_days=seen[1] / pd.Timedelta(days=1),
                    memory_gb=memory,
                )
    if share is None and w.utilization_signal is not None:
        seen = _observed(history.get(w.utilization_signal))
        if seen is not None and seen[1] >= MIN_HISTORY:
            steps = math.ceil(seen[0] / 100 * (1 + HEADROOM) / SHARE_STEP - 1e-9)
            share = min(1.0, max(1, steps) * SHARE_STEP)
            read.update(util_seen=seen[0], util_days=seen[1] / pd.Timedelta(days=1), share=share)
    if not read or memory is None or share is None:
        # Half a footprint packs nothing (the other half counts as the whole GPU).
        return w, None
    update: dict[str, float] = {}
    if w.memory_gb is None:
        update["memory_gb"] = memory
    if w.compute_share is None and w.replicas_per_gpu is None:
        update["compute_share"] = round(share, 6)
    filled = w.model_copy(update=update)
    note = Reason(
        NOTE_FOOTPRINT_READ,
        {
            "workload": w.name,
            "quantile": f"q{OBSERVED_QUANTILE:g}",
            "headroom_pct": 100 * HEADROOM,
            **read,
        },
    )
    return filled, note


def observed_footprints(
    workloads: Iterable[WorkloadConfig], history: Mapping[str, pd.Series]
) -> tuple[dict[str, WorkloadConfig], list[Reason]]:
    """Per workload whose footprint its signals fill in, the workload as planned
    (:func:`observed_footprint`), and a note per such workload; the planner takes them
    as a fleet's workloads (:meth:`scaler.config.Fleet.with_workloads`)."""
    filled: dict[str, WorkloadConfig] = {}
    notes: list[Reason] = []
    for w in workloads:
        seen, note = observed_footprint(w, history)
        if note is not None:
            filled[w.name] = seen
            notes.append(note)
    return filled, notes
