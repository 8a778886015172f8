"""Sharing modes as capacity: how many replicas one GPU holds, and pooling across workloads.

A workload's ``sharing`` (``whole``, ``mig``, ``time-slicing``, ``mps`` or ``auto``) and
``isolation`` decide the mode it is planned in (:func:`resolved_mode`); its footprint
(:class:`Footprint`: GPU memory and compute share per replica) decides how many of its
replicas one GPU holds under that mode (:func:`replicas_per_gpu`). The rules are NVIDIA's
device plugin's (NVIDIA/k8s-device-plugin, commit 1b826ac):

* the device plugin gives every GPU of a node the same ``replicas`` (``rename`` and
  ``devices`` in ``sharing.*.resources`` are ignored, ``api/config/v1/config.go``
  ``DisableResourceNamingInConfig``), and ``replicas`` must be at least 2
  (``api/config/v1/replicas.go``), so one GPU holds ``r`` replicas of whatever workloads
  the scheduler puts there;
* time-slicing limits nothing: any ``r`` replicas may land on one GPU, so ``r`` times the
  largest memory per replica of the co-located workloads must fit the GPU's memory, and
  ``r`` times the largest compute share must not pass one GPU;
* MPS splits each GPU evenly: every client's pinned memory limit is the GPU's memory over
  ``r`` and its active thread percentage ``100 / r`` (``cmd/mps-control-daemon/mps/daemon.go``),
  at most 48 clients on Volta and later (``cmd/mps-control-daemon/mps/device.go``); so each
  co-located replica's memory must fit ``memory / r`` and its share ``1 / r``: the same
  bound as time-slicing, now enforced, plus the client limit.

A footprint that is not declared counts as a whole GPU (memory the GPU's, share 1): missing
data packs nothing, so it never releases capacity. ``auto`` picks a shared mode only for a
workload that declares a footprint of less than a GPU (``compute_share`` or
``replicas_per_gpu``) and only where ``isolation`` admits it: MPS for ``preferred`` and
``none``, time-slicing for ``none`` only (where it packs more than MPS's 48 clients);
``required`` stays on whole GPUs or MIG.

Pooling: the shared workloads of one GPU model and mode may run on the same GPUs
(:func:`pooling_groups`). Their dedicated need is one set of GPUs per workload,
``sum_w ceil(R_w / r_w)``; pooled it is ``ceil(J / r_g)``, with ``r_g`` the replicas per GPU
that every workload of the group fits and ``J`` the joint replicas: at a forecast quantile,
the quantile of the sum estimated as the sum of medians plus the root of ``s' C s``
(``s`` the spreads of the quantile over the median, ``C`` the correlation of the signals'
changes on their common history, clipped to [0, 1]: :func:`joint_quantile`); without
enough common history ``C`` is all ones, which is the sum of the quantiles. The planner
takes the smaller of the two per step, so pooling never needs more GPUs than dedicated sets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from scaler.catalog.gpus import gpu_model
from scaler.config import WorkloadConfig

SharingMode = Literal["whole", "mig", "time-slicing", "mps"]
"""The mode a workload is planned in, once ``auto`` is resolved."""

SHARED_MODES: tuple[SharingMode, ...] = ("time-slicing", "mps")
"""The device plugin's sharing modes (those this module packs)."""

MPS_MAX_CLIENTS = 48
"""Clients one MPS server takes on Volta and later (``cmd/mps-control-daemon/mps/device.go``)."""

MIN_COMMON_POINTS = 48
"""Common history points needed to estimate the signals' correlation (else assumed 1)."""

CORRELATION_WINDOW = pd.Timedelta(days=7)
"""The newest history the correlation is estimated on."""


@dataclass(frozen=True)
class Footprint:
    """What one replica of a workload takes of one GPU."""

    memory_gb: float
    """GPU memory per replica, GB: ``memory_gb``, else the GPU's whole memory."""
    compute_share: float
    """Share of one GPU's compute per replica, 0 to 1: ``compute_share``, else
    ``1 / replicas_per_gpu``, else 1."""


def footprint(workload: WorkloadConfig) -> Footprint:
    """``workload``'s footprint; what is not declared counts as a whole GPU."""
    memory = gpu_model(workload.gpu_model).memory_gb
    share = 1.0
    if workload.compute_share is not None:
        share = workload.compute_share
    elif workload.replicas_per_gpu is not None:
        share = 1.0 / workload.replicas_per_gpu
    return Footprint(
        memory_gb=float(workload.memory_gb if workload.memory_gb is not None else memory),
        compute_share=float(share),
    )


def _declares_footprint(workload: WorkloadConfig) -> bool:
    return workload.compute_share is not None or workload.replicas_per_gpu is not None


def replicas_per_gpu(workloads: Sequence[WorkloadConfig], mode: SharingMode) -> int:
    """Replicas one GPU holds of any mix of ``workloads`` (one GPU model) under ``mode``.

    1 for ``whole`` and ``mig`` (a MIG workload's slice is counted by the MIG catalog), and
    wherever the footprints leave no room for two: the device plugin then is not asked to
    share (it needs ``replicas >= 2``).
    """
    if mode not in SHARED_MODES or not workloads:
        return 1
    memory = float(gpu_model(workloads[0].gpu_model).memory_gb)
    prints = [footprint(w) for w in workloads]
    # A small tolerance keeps 0.25 x 4 from rounding to 3.
    by_memory = math.floor(memory / max(p.memory_gb for p in prints) + 1e-9)
    by_compute = math.floor(1.0 / max(p.compute_share for p in prints) + 1e-9)
    r = min(by_memory, by_compute)
    declared = [w.replicas_per_gpu for w in workloads if w.replicas_per_gpu is not None]
    if declared:
        r = min(r, *declared)
    if mode == "mps":
        r = min(r, MPS_MAX_CLIENTS)
    return max(1, r)


def resolved_mode(workload: WorkloadConfig) -> SharingMode:
    """The mode ``workload`` is planned in (module docstring)."""
    if workload.mig_profile is not None:
        return "mig"
    if workload.sharing != "auto":
        return workload.sharing
    if (
        workload.isolation == "required"
        or workload.gpus_per_replica > 1
        or not _declares_footprint(workload)
    ):
        return "whole"
    if workload.isolation == "none" and replicas_per_gpu([workload], "time-slicing") > (
        replicas_per_gpu([workload], "mps")
    ):
        return "time-slicing"
    if replicas_per_gpu([workload], "mps") > 1:
        return "mps"
    return "whole"


def workload_replicas_per_gpu(workload: WorkloadConfig) -> int:
    """Replicas of ``workload`` alone one GPU holds in its mode (1 unless shared)."""
    return replicas_per_gpu([workload], resolved_mode(workload))


def dedicated_gpus(workload: WorkloadConfig, replicas: np.ndarray) -> np.ndarray | None:
    """GPUs of a set of its own for ``replicas`` of a shared ``workload``; ``None`` when
    the workload is not shared (whole GPUs or MIG: the caller counts those)."""
    r = workload_replicas_per_gpu(workload)
    if r < 2:
        return None
    return np.ceil(np.asarray(replicas, dtype=float) / r - 1e-9)


@dataclass(frozen=True)
class PoolingGroup:
    """Shared workloads of one GPU model and mode that may run on the same GPUs."""

    model: str
    mode: SharingMode
    workloads: tuple[WorkloadConfig, ...]

    @property
    def key(self) -> str:
        """``<model>/<mode>``, the group's name in the plan."""
        return f"{self.model}/{self.mode}"

    @property
    def replicas_per_gpu(self) -> int:
        """Replicas one GPU holds of any mix of the group's workloads."""
        return replicas_per_gpu(self.workloads, self.mode)


def pooling_groups(workloads: Sequence[WorkloadConfig]) -> list[PoolingGroup]:
    """The groups of two or more shared workloads per GPU model and mode, in config order."""
    grouped: dict[tuple[str, SharingMode], list[WorkloadConfig]] = {}
    for w in workloads:
        mode = resolved_mode(w)
        if mode in SHARED_MODES and workload_replicas_per_gpu(w) >= 2:
            grouped.setdefault((gpu_model(w.gpu_model).name, mode), []).append(w)
    return [
        PoolingGroup(model, mode, tuple(ws)) for (model, mode), ws in grouped.items() if len(ws) > 1
    ]


def pooled_gpus(group: PoolingGroup, joint_replicas: np.ndarray) -> np.ndarray:
    """GPUs ``group`` needs pooled for ``joint_replicas`` replicas in all (``inf`` where
    the group's workloads together fit no shared GPU)."""
    r = group.replicas_per_gpu
    if r < 2:
        return np.full(np.shape(joint_replicas), np.inf)
    return np.ceil(np.asarray(joint_replicas, dtype=float) / r - 1e-9)


DEVICE_PLUGIN_KEYS = {"time-slicing": "timeSlicing", "mps": "mps"}
"""Each shared mode's key under ``sharing`` in the device plugin's ``version: v1`` config."""


def device_plugin_config(mode: SharingMode, replicas: int) -> tuple[str, dict[str, object]]:
    """The name (``tiercast-mps-4``) and the device plugin's ``version: v1`` config that
    share every GPU of a node ``replicas`` ways by ``mode`` (NVIDIA/k8s-device-plugin
    ``api/config/v1/sharing.go``); what the plan asks for, checked again before acting
    (:mod:`scaler.actuation.kube.device_plugin`)."""
    resources = {"resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}
    entry: dict[str, object] = {"version": "v1", "sharing": {DEVICE_PLUGIN_KEYS[mode]: resources}}
    return f"tiercast-{mode}-{replicas}", entry


def signal_correlation(
    signals: Sequence[str], history: Mapping[str, pd.Series] | None
) -> np.ndarray:
    """Correlation of the signals' changes (first differences) over their newest common
    history, clipped to [0, 1]; 1 wherever it cannot be estimated (a signal without
    history, fewer than :data:`MIN_COMMON_POINTS` common points, a flat signal).

    Changes rather than levels: two signals that share a daily shape are correlated in
    level, and the forecasts carry that shape already; what the quantiles' spreads carry
    is the change the forecast did not see coming. Clipping at 0 never lets a negative
    correlation claim more than independence.
    """
    n = len(signals)
    out = np.ones((n, n))
    if history is None or n < 2:
        return out
    series = {}
    for s in set(signals):
        y = history.get(s)
        if y is None or len(y) < MIN_COMMON_POINTS:
            continue
        y = y[~y.index.duplicated(keep="last")].sort_index()
        series[s] = y[y.index > y.index[-1] - CORRELATION_WINDOW]
    for i in range(n):
        for j in range(i + 1, n):
            a, b = signals[i], signals[j]
            if a == b or a not in series or b not in series:
                continue
            both = pd.concat([series[a], series[b]], axis=1, join="inner").dropna().diff().dropna()
            if len(both) < MIN_COMMON_POINTS:
                continue
            x, y = both.iloc[:, 0].to_numpy(float), both.iloc[:, 1].to_numpy(float)
            if x.std() <= 0 or y.std() <= 0:
                continue
            rho = float(np.corrcoef(x, y)[0, 1])
            out[i, j] = out[j, i] = min(1.0, max(0.0, rho)) if np.isfinite(rho) else 1.0
    return out


def joint_quantile(
    medians: Sequence[np.ndarray], quantiles: Sequence[np.ndarray], correlation: np.ndarray
) -> np.ndarray:
    """The quantile of a sum of replica demands, per step: ``sum(medians) + sqrt(s' C s)``.

    ``s`` are the spreads ``quantile - median`` (never below 0), ``C`` the correlation
    (:func:`signal_correlation`). With ``C`` all ones this is the sum of the quantiles; it
    is never below the largest single quantile, nor above the sum of them.
    """
    med = np.vstack([np.asarray(m, dtype=float) for m in medians])
    q = np.vstack([np.asarray(x, dtype=float) for x in quantiles])
    spread = np.maximum(q - med, 0.0)
    rss = np.sqrt(np.maximum(np.einsum("it,ij,jt->t", spread, correlation, spread), 0.0))
    joint = med.sum(axis=0) + rss
    return np.minimum(np.maximum(joint, q.max(axis=0)), q.sum(axis=0))
