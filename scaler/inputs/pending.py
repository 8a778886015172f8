"""Reading what waits for GPUs: pending GPU pods (kube-state-metrics) and Kueue workloads.

:func:`collect_starvation` asks Prometheus three things at ``now`` and returns a
:class:`scaler.planning.starvation.Starvation`:

* the GPUs requested (``kube_pod_container_resource_requests{resource="nvidia_com_gpu"}``)
  by pods whose ``kube_pod_status_phase{phase="Pending"}`` is 1 and that were created
  (``kube_pod_created``) over ``starvation.pending_threshold_s`` ago: the pods that wait;
* the GPUs requested by Running pods: what runs;
* ``kueue_pending_workloads{status="active"}`` pending throughout the threshold, per
  ClusterQueue, times the GPUs a workload of that queue asks for.

tiercast's own placeholder pods (the priority classes of the config's ``placeholder`` and
``capacity-buffer`` pools, and ``tiercast-placeholder``) are left out of both pod
queries: a placeholder that waits is headroom being bought, not demand, and counting it
would buy more placeholders. Each query may be replaced in the config.

A series of a default query without the labels it groups by (``namespace`` and ``pod``;
``namespace`` for the running GPUs; ``cluster_queue``) is no answer of kube-state-metrics
or Kueue: it is logged and left out, never planned on.

An empty answer (no kube-state-metrics, no Kueue, nothing pending) is zero waiting. A
server that fails raises as collection does (:mod:`scaler.inputs.collecting`): the cycle
ends before planning and nothing scales; a refused override query is one line naming it.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Sequence

import pandas as pd

from forecaster.errors import BadInputError
from forecaster.sources import LabelledSeries, MetricSource
from scaler.catalog.gpus import gpu_model, product_matches
from scaler.config import Config, PoolConfig, PrometheusConfig, SignalConfig, StarvationConfig
from scaler.inputs.instant import prometheus_source, reads_prometheus
from scaler.planning.starvation import ModelWaiting, Starvation
from scaler.plans import iso

log = logging.getLogger(__name__)

PLACEHOLDER_CLASS = "tiercast-placeholder"
"""The placeholder pools' default PriorityClass, always left out of the pod queries."""
STEP = pd.Timedelta(seconds=60)
"""Grid of the short range read at ``now`` (the newest evaluation is the one used)."""

_GPU_REQUESTS = (
    'sum by (namespace, pod) (kube_pod_container_resource_requests{resource="nvidia_com_gpu"})'
)


def placeholder_classes(pools: Sequence[PoolConfig]) -> list[str]:
    """PriorityClasses of tiercast's own placeholder pods in ``pools``, sorted."""
    names = {PLACEHOLDER_CLASS}
    for p in pools:
        cls = getattr(p.provider, "priority_class", None)
        if isinstance(cls, str):
            names.add(cls)
    return sorted(names)


def _unless_placeholders(pools: Sequence[PoolConfig]) -> str:
    pattern = "|".join(re.escape(c).replace("\\-", "-") for c in placeholder_classes(pools))
    return f' unless on (namespace, pod) kube_pod_info{{priority_class=~"{pattern}"}}'


def waiting_query(s: StarvationConfig, pools: Sequence[PoolConfig]) -> str:
    """PromQL for the GPUs of pods Pending past the threshold, one series per pod (the
    placeholder pods of ``pools`` left out)."""
    if s.query is not None:
        return s.query
    return (
        f"{_GPU_REQUESTS}"
        ' and on (namespace, pod) (max by (namespace, pod) (kube_pod_status_phase{phase="Pending"}) == 1)'
        " and on (namespace, pod) ((time() - max by (namespace, pod) (kube_pod_created))"
        f" > {s.pending_threshold_s})" + _unless_placeholders(pools)
    )


def running_query(s: StarvationConfig, pools: Sequence[PoolConfig]) -> str:
    """PromQL for the GPUs of Running pods, one series per namespace (a cluster runs far
    more pods than wait, more than ``prometheus.max_series`` one series each)."""
    if s.running_query is not None:
        return s.running_query
    return (
        f"sum by (namespace) ({_GPU_REQUESTS}"
        ' and on (namespace, pod) (max by (namespace, pod) (kube_pod_status_phase{phase="Running"}) == 1)'
        + _unless_placeholders(pools)
        + ")"
    )


def kueue_query(s: StarvationConfig) -> str:
    """PromQL for Kueue's workloads pending throughout the threshold, per ClusterQueue."""
    if s.kueue_query is not None:
        return s.kueue_query
    pending = 'kueue_pending_workloads{status="active"}'
    if s.pending_threshold_s <= 0:
        return pending
    # The least pending over the threshold, of queues that had workloads pending already
    # a threshold ago (min_over_time alone would count a queue seen for a minute).
    t = s.pending_threshold_s
    return f"min_over_time({pending}[{t}s]) and on (cluster_queue) ({pending} offset {t}s)"


def wanted(
    prometheus: PrometheusConfig | None,
    signals: Sequence[SignalConfig],
    starvation: StarvationConfig,
) -> bool:
    """Whether starvation is read: the section is enabled, and ``signals`` are read from
    ``prometheus``."""
    return reads_prometheus(prometheus, signals, starvation.enabled)


def collect_starvation(
    config: Config, now: pd.Timestamp, source: MetricSource | None = None
) -> Starvation | None:
    """What waits for GPUs at ``now`` (None where :func:`wanted` says no)."""
    if source is None:
        if not wanted(config.prometheus, config.signals, config.starvation):
            return None
        source = prometheus_source(config.prometheus)
    s = config.starvation
    pools = config.pools
    pool_models = sorted({gpu_model(p.gpu_model).name for p in pools})
    now = pd.Timestamp(now)
    models: dict[str, dict[str, float]] = {}
    unattributed: dict[str, float] = {}

    def row(model: str) -> dict[str, float]:
        return models.setdefault(model, {"running": 0.0, "waiting": 0.0, "pods": 0, "wl": 0})

    waiting = _newest(source, waiting_query(s, pools), now, "starvation.query")
    for series, value in _labelled(waiting, ("namespace", "pod") if s.query is None else ()):
        model = _model_of(series, s, pool_models)
        if model is None:
            unattributed[series.key] = unattributed.get(series.key, 0.0) + value
            continue
        row(model)["waiting"] += value
        row(model)["pods"] += 1
    running = _newest(source, running_query(s, pools), now, "starvation.running_query")
    for series, value in _labelled(running, ("namespace",) if s.running_query is None else ()):
        model = _model_of(series, s, pool_models)
        if model is not None:
            row(model)["running"] += value
    queues = {q.cluster_queue: q for q in s.kueue_queues}
    kueue = _newest(source, kueue_query(s), now, "starvation.kueue_query")
    for series, value in _labelled(kueue, ("cluster_queue",) if s.kueue_query is None else ()):
        workloads = math.floor(value)
        if workloads <= 0:
            continue
        queue = queues.get(series.labels.get("cluster_queue", ""))
        per = queue.gpus_per_workload if queue else s.kueue_gpus_per_workload
        model = gpu_model(queue.gpu_model).name if queue else _model_of(series, s, pool_models)
        if model is None:
            unattributed[series.key] = unattributed.get(series.key, 0.0) + workloads * per
            continue
        row(model)["waiting"] += workloads * per
        row(model)["wl"] += workloads
    out = Starvation(
        at=iso(now),
        threshold_s=s.pending_threshold_s,
        models={
            m: ModelWaiting(r["running"], r["waiting"], int(r["pods"]), int(r["wl"]))
            for m, r in sorted(models.items())
        },
        unattributed_gpus=sum(unattributed.values()),
        unattributed=tuple(sorted(unattributed)),
    )
    if out.waiting_gpus > 0:
        log.warning("GPU demand waits for capacity: %s", "; ".join(map(str, out.notes())))
    return out


def _newest(
    source: MetricSource, query: str, now: pd.Timestamp, field: str
) -> Iterable[tuple[LabelledSeries, float]]:
    """Each series' value at the newest evaluation up to ``now`` (finite and positive)."""
    try:
        result = source.range(query, now - 2 * STEP, now, STEP)
    except BadInputError as exc:
        raise BadInputError(f"{field}: {' '.join(str(exc).split())[:240]}") from exc
    out = []
    for s in result:
        if not len(s.values) or s.values.index[-1] <= now - STEP:
            continue  # absent from the newest evaluation: no longer pending (or running)
        value = float(s.values.iloc[-1])
        if math.isfinite(value) and value > 0:
            out.append((s, value))
    return out


def _labelled(
    found: Iterable[tuple[LabelledSeries, float]], labels: tuple[str, ...]
) -> list[tuple[LabelledSeries, float]]:
    """The series that carry ``labels`` (what the default query groups by); an answer
    without them is not kube-state-metrics' or Kueue's, and is logged, not counted."""
    out: list[tuple[LabelledSeries, float]] = []
    odd: list[tuple[LabelledSeries, float]] = []
    for series, value in found:
        (out if all(series.labels.get(k) for k in labels) else odd).append((series, value))
    if odd:
        log.warning(
            "starvation: %d series without %s left out (e.g. %s)",
            len(odd),
            "/".join(labels),
            odd[0][0].key[:200],
        )
    return out


def _model_of(series: LabelledSeries, s: StarvationConfig, pool_models: list[str]) -> str | None:
    """The catalog GPU model a series is about, or None where it cannot be told;
    ``pool_models``: the catalog models of the config's pools, sorted."""
    value = series.labels.get(s.gpu_model_label) if s.gpu_model_label else None
    if value:
        try:
            name = gpu_model(value).name
            if name in pool_models:
                return name
        except KeyError:
            pass
        for m in pool_models:
            if product_matches(m, value):
                return m
        return None
    if s.gpu_model is not None:
        return gpu_model(s.gpu_model).name
    return pool_models[0] if len(pool_models) == 1 else None
