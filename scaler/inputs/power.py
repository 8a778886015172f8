"""Reading GPU power and heat from NVIDIA's DCGM exporter at ``now``.

:func:`collect_power` asks Prometheus, at ``now``, per GPU (by ``power.node_label``,
``gpu`` and ``modelName``, the labels the exporter puts on every series):

* the clock-event reasons bitmask, ``DCGM_FI_DEV_CLOCKS_EVENT_REASONS`` (DCGM 3.3 and
  later), else its older name ``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS``;
* the SM clock, ``DCGM_FI_DEV_SM_CLOCK`` (MHz), and per ``modelName`` the highest SM clock
  over ``power.max_clock_window_s``;
* the power drawn, ``DCGM_FI_DEV_POWER_USAGE`` (W), and the temperature,
  ``DCGM_FI_DEV_GPU_TEMP`` (C), for the plan's ``risk.power`` and its notes;

and returns a :class:`scaler.planning.power.PowerReading`, whose rule
(:func:`scaler.planning.power.clock_ratio`) counts throttled GPUs for less.

An empty answer (no exporter, a fleet without DCGM) is no reading and changes nothing.
A value that is not a finite number, a series without the labels a GPU is told by, and
a GPU of no known model count as unthrottled. A server that fails raises as collection
does: the cycle ends before planning and nothing scales; a refused override query is one
line naming it (``power.clock_query: ...``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import pandas as pd

from forecaster.errors import BadInputError
from forecaster.sources import LabelledSeries, MetricSource
from scaler.catalog.gpus import gpu_model, product_matches
from scaler.config import Config, PowerConfig, PrometheusConfig, SignalConfig
from scaler.inputs.instant import prometheus_source, reads_prometheus
from scaler.planning.power import GpuPower, PowerReading
from scaler.plans import iso

log = logging.getLogger(__name__)

STEP = pd.Timedelta(seconds=60)
"""Grid of the short range read at ``now`` (the newest evaluation is the one used)."""


def _by(power: PowerConfig) -> str:
    return f"{power.node_label}, gpu, modelName"


def throttle_query(power: PowerConfig) -> str:
    """PromQL for each GPU's clock-event reasons (the new name, else the old)."""
    if power.throttle_query is not None:
        return power.throttle_query
    by = _by(power)
    return (
        f"max by ({by}) (DCGM_FI_DEV_CLOCKS_EVENT_REASONS)"
        f" or max by ({by}) (DCGM_FI_DEV_CLOCK_THROTTLE_REASONS)"
    )


def clock_query(power: PowerConfig) -> str:
    """PromQL for each GPU's SM clock, MHz."""
    if power.clock_query is not None:
        return power.clock_query
    return f"max by ({_by(power)}) (DCGM_FI_DEV_SM_CLOCK)"


def max_clock_query(power: PowerConfig) -> str:
    """PromQL for the highest SM clock per ``modelName`` over the window, MHz."""
    if power.max_clock_query is not None:
        return power.max_clock_query
    window = power.max_clock_window_s
    return f"max by (modelName) (max_over_time(DCGM_FI_DEV_SM_CLOCK[{window}s]))"


def _by_gpu(power: PowerConfig, metric: str) -> str:
    return f"max by ({_by(power)}) ({metric})"


def wanted(
    prometheus: PrometheusConfig | None, signals: Sequence[SignalConfig], power: PowerConfig
) -> bool:
    """Whether DCGM is read: the ``power`` section is enabled, and ``signals`` are read from
    ``prometheus``."""
    return reads_prometheus(prometheus, signals, power.enabled)


def collect_power(
    config: Config, now: pd.Timestamp, source: MetricSource | None = None
) -> PowerReading | None:
    """The fleet's GPUs at ``now`` (None where :func:`wanted` says no, or nothing answers)."""
    if source is None:
        if not wanted(config.prometheus, config.signals, config.power):
            return None
        source = prometheus_source(config.prometheus)
    now = pd.Timestamp(now)
    power = config.power
    pool_models = sorted({gpu_model(p.gpu_model).name for p in config.pools})
    node = power.node_label
    names: dict[tuple[str, str], str] = {}
    reasons = _per_gpu(
        _newest(source, throttle_query(power), now, "power.throttle_query"), node, names
    )
    clocks = _per_gpu(_newest(source, clock_query(power), now, "power.clock_query"), node, names)
    if not reasons and not clocks:
        return None
    tops: dict[str, float] = {}
    for series, value in _newest(source, max_clock_query(power), now, "power.max_clock_query"):
        label = series.labels.get("modelName", "")
        tops[label] = max(tops.get(label, 0.0), value)
    watts = _per_gpu(
        _newest(source, _by_gpu(power, "DCGM_FI_DEV_POWER_USAGE"), now, ""), node, names
    )
    temps = _per_gpu(_newest(source, _by_gpu(power, "DCGM_FI_DEV_GPU_TEMP"), now, ""), node, names)
    gpus = []
    unattributed = 0
    for key in sorted(set(reasons) | set(clocks)):
        name = names.get(key, "")
        model = _model_of(name, power, pool_models)
        raw = reasons.get(key)
        g = GpuPower(
            node=key[0],
            gpu=key[1],
            model=model,
            reasons=int(raw) if raw is not None and raw == math.floor(raw) else None,
            clock_mhz=clocks.get(key),
            max_clock_mhz=tops.get(name, tops.get("")),
            power_w=watts.get(key),
            temp_c=temps.get(key),
        )
        if model is None and g.slowdown:
            unattributed += 1
        gpus.append(g)
    out = PowerReading(at=iso(now), gpus=tuple(gpus), unattributed=unattributed)
    if out.lost_gpus():
        log.warning("throttled GPUs: %s", "; ".join(map(str, out.notes())))
    return out


def _newest(
    source: MetricSource, query: str, now: pd.Timestamp, field: str
) -> list[tuple[LabelledSeries, float]]:
    """Each series' finite value at the newest evaluation up to ``now``."""
    try:
        result = source.range(query, now - 2 * STEP, now, STEP)
    except BadInputError as exc:
        if not field:
            # Power drawn and temperature only inform the notes: a refusal is no reason
            # to end a cycle.
            log.warning("power: %s", " ".join(str(exc).split())[:240])
            return []
        raise BadInputError(f"{field}: {' '.join(str(exc).split())[:240]}") from exc
    out = []
    for s in result:
        if not len(s.values) or s.values.index[-1] <= now - STEP:
            continue  # absent from the newest evaluation: the GPU no longer reports
        value = float(s.values.iloc[-1])
        if math.isfinite(value) and value >= 0:
            out.append((s, value))
    return out


def _per_gpu(
    found: list[tuple[LabelledSeries, float]],
    node_label: str,
    names: dict[tuple[str, str], str],
) -> dict[tuple[str, str], float]:
    """Values by (node, gpu); series without both labels are logged and left out.
    ``names`` collects each GPU's ``modelName``."""
    out: dict[tuple[str, str], float] = {}
    odd = 0
    for series, value in found:
        node, gpu = series.labels.get(node_label), series.labels.get("gpu")
        if not node or not gpu:
            odd += 1
            continue
        out[(node, gpu)] = value
        name = series.labels.get("modelName")
        if name:
            names[(node, gpu)] = name
    if odd:
        log.warning("power: %d series without %s/gpu left out", odd, node_label)
    return out


def _model_of(name: str, power: PowerConfig, pool_models: list[str]) -> str | None:
    """The catalog GPU model of a ``modelName`` (``NVIDIA H100 80GB HBM3``), or None;
    ``pool_models``: the catalog models of the config's pools, sorted."""
    if name:
        product = "-".join(name.split())
        for m in pool_models:
            if product_matches(m, product) or product_matches(m, name):
                return m
        try:
            found = gpu_model(name).name
            return found if found in pool_models else None
        except KeyError:
            pass
    if power.gpu_model is not None:
        return gpu_model(power.gpu_model).name
    return pool_models[0] if len(pool_models) == 1 else None
