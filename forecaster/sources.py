"""Metric sources: where history comes from, behind one small Protocol.

A :class:`MetricSource` answers one question, "the samples of this query between
``start`` and ``end`` at ``step``", with one :class:`LabelledSeries` per label set
(per model, pool, node...). The labels are the series' identity; the values are
the raw samples as the source returned them (NaN and ``±Inf`` included), because
cleaning is a written policy of its own (:mod:`forecaster.hygiene`), not a side
effect of reading.

Implementations: :class:`forecaster.prometheus.PrometheusSource` (a real server)
and :class:`StaticSource` (fixed series in memory, for tests and replays).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import pandas as pd


def label_key(labels: Mapping[str, str]) -> str:
    """A stable text identity for a label set: ``{model="chat",pool="a"}``; ``{}`` when empty."""
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return "{" + inner + "}"


@dataclass(frozen=True)
class LabelledSeries:
    """One series of a query result: its labels and its samples in time order."""

    labels: Mapping[str, str]
    values: pd.Series
    """Float samples on a ``DatetimeIndex`` named ``timestamp`` (UTC, naive)."""

    @property
    def key(self) -> str:
        return label_key(self.labels)


@runtime_checkable
class MetricSource(Protocol):
    """Reads history for a query.

    Required: :meth:`range`. A source raises :class:`~forecaster.errors.TemporaryError`
    when the backend is down or slow (the next cycle may succeed) and
    :class:`~forecaster.errors.BadInputError` when the query itself is refused.
    """

    def range(
        self, query: str, start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta
    ) -> list[LabelledSeries]:
        """Samples of ``query`` on the grid ``start, start + step, ... <= end``, one per label set."""
        ...


@dataclass
class StaticSource:
    """A source that answers every query from fixed series, cut to the asked window.

    ``series`` maps a query to its label sets; the step is not resampled (the
    series are returned at their own spacing), which is what a replay of an
    export needs.
    """

    series: Mapping[str, Sequence[LabelledSeries]]
    calls: list[tuple[str, pd.Timestamp, pd.Timestamp, pd.Timedelta]] = field(default_factory=list)

    def range(
        self, query: str, start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta
    ) -> list[LabelledSeries]:
        self.calls.append((query, start, end, step))
        out = []
        for s in self.series.get(query, ()):
            window = s.values[(s.values.index >= start) & (s.values.index <= end)]
            out.append(LabelledSeries(labels=dict(s.labels), values=window))
        return out
