"""What the sections a cycle reads from Prometheus at ``now`` share (``starvation``,
``power``): whether a config reads them, and the source they ask."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from forecaster.sources import MetricSource
    from scaler.config import PrometheusConfig, SignalConfig


def reads_prometheus(
    prometheus: PrometheusConfig | None, signals: Sequence[SignalConfig], enabled: bool
) -> bool:
    """Whether a section switched by ``enabled`` is read: it is on, and the config's
    ``signals`` come from its ``prometheus`` (a history file or the demo has no cluster
    to ask)."""
    return enabled and prometheus is not None and any(s.query is not None for s in signals)


def prometheus_source(prometheus: PrometheusConfig | None) -> MetricSource:
    """The configured Prometheus (``url``, not ``history_url``: these are instant queries)."""
    # Imported here: the Prometheus client is only needed by configs that query it.
    from scaler.inputs.collecting import source_from_config

    return source_from_config(prometheus)
