"""Collecting a signal's history from Prometheus for one cycle.

:func:`collect_signal` reads the signal's PromQL over the configured lookback,
at the signal's ``step_s``, through a :class:`~forecaster.sources.MetricSource`
(a :class:`~forecaster.prometheus.PrometheusSource` built from the config's
``prometheus`` section unless one is given), cleans each series by the written
policy in :mod:`forecaster.hygiene`, and binds the result to the signal.

How several label sets bind to one signal: a query that returns several series
(per model, pool, node) is **summed per timestamp** into the signal's series,
because a signal is one demand figure that one set of workloads serves; a
timestamp where no series has a value stays missing rather than reading as zero.
When label sets that carried part of the sum stop reporting while others go on, the
sum from then on is partial: the series is marked (:func:`forecaster.suspect.mark`),
the cycle treats it as missing from then on and holds the pools it feeds. A label set
Prometheus returns twice with different values (a federation or remote-read overlap, a
relabelling that dropped the label telling them apart) is suspect the same way from the
first timestamp the copies disagree at: never last-one-wins.
The cleaned per-label series are returned too, under ``"<signal>{label="v",...}"``
keys, for reports; :func:`scaler.service.cycle.bind_history` keeps only the signal names
for planning. Write ``sum by (...)`` in the query to choose the split yourself.

An empty answer is not an error: the signal binds to an empty series, the
planner then has no data for it and holds every pool it feeds (no scale-down),
and the log says why. A server that is down, slow or failing raises
:class:`~forecaster.errors.TemporaryError`: the cycle ends before planning, so
nothing scales, the last plan file is left as it was, and ``tiercast run`` exits 1.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecaster.errors import BadInputError
from forecaster.hygiene import HygienePolicy, HygieneReport, clean, counter_problem
from forecaster.prometheus import PrometheusSettings, PrometheusSource
from forecaster.sources import LabelledSeries, MetricSource
from forecaster.suspect import Suspicion, mark, stopped_label_sets
from scaler.config import Config, PrometheusConfig

log = logging.getLogger(__name__)


@dataclass
class Collection:
    """One signal's collected history and what hygiene found, for logs and reports."""

    signal: str
    query: str
    start: pd.Timestamp
    end: pd.Timestamp
    series: pd.Series
    """The signal as planned on: the per-label series summed (empty when no data)."""
    by_labels: dict[str, pd.Series] = field(default_factory=dict)
    """Cleaned series per label set, keyed ``{label="v",...}``."""
    reports: list[HygieneReport] = field(default_factory=list)

    @property
    def stale(self) -> bool:
        return not self.reports or all(r.stale for r in self.reports)

    def history(self) -> dict[str, pd.Series]:
        """``{signal: summed}`` plus ``{signal{labels}: series}`` when there are several."""
        out = {self.signal: self.series}
        if len(self.by_labels) > 1:
            out.update({f"{self.signal}{key}": s for key, s in self.by_labels.items()})
        return out


def settings_from_config(prometheus: PrometheusConfig, history: bool = False) -> PrometheusSettings:
    """The source's settings; ``history``: for range queries of signal history, sent to
    ``history_url`` where the config names a long-term store."""
    return PrometheusSettings(
        url=(prometheus.history_url or prometheus.url) if history else prometheus.url,
        bearer_token_file=prometheus.bearer_token_file,
        username=prometheus.username,
        password_file=prometheus.password_file,
        ca_file=prometheus.ca_file,
        verify_tls=prometheus.verify_tls,
        timeout_s=prometheus.timeout_s,
        retries=prometheus.retries,
        retry_backoff_s=prometheus.retry_backoff_s,
        allow_insecure=prometheus.allow_insecure,
        max_response_bytes=prometheus.max_response_bytes,
        max_series=prometheus.max_series,
    )


def source_from_config(
    prometheus: PrometheusConfig | None, history: bool = False
) -> PrometheusSource:
    """The configured Prometheus (the config's ``prometheus`` section); ``history``: the one
    signal history is read from."""
    if prometheus is None:
        raise BadInputError(
            "config: signals with a 'query' need a 'prometheus' section with at least 'url'"
        )
    return PrometheusSource(settings_from_config(prometheus, history))


def _wall_clock() -> pd.Timestamp:
    return pd.Timestamp.now(tz="UTC").tz_localize(None)


def collect(
    config: Config,
    signal_name: str,
    now: pd.Timestamp | None = None,
    source: MetricSource | None = None,
) -> Collection:
    """Read, clean and bind one signal; see the module docstring."""
    names = [s.name for s in config.signals]
    if signal_name not in names:
        raise BadInputError(
            f"signal {signal_name!r} is not declared (declared: {', '.join(names)})"
        )
    signal = config.signal(signal_name)
    if signal.query is None:
        raise BadInputError(f"signal {signal_name!r} has no 'query' to collect")
    problem = counter_problem(signal.query)
    if problem is not None:
        raise BadInputError(f"signals[{names.index(signal_name)}].query ({signal_name}): {problem}")
    if source is None:
        source = source_from_config(config.prometheus, history=True)
    lookback_s = config.prometheus.lookback_s if config.prometheus is not None else 14 * 86400
    fill_s = config.prometheus.max_fill_gap_s if config.prometheus is not None else 900
    end = pd.Timestamp(now) if now is not None else _wall_clock()
    start = end - pd.Timedelta(seconds=lookback_s)
    step = pd.Timedelta(seconds=signal.step_s)
    policy = HygienePolicy(
        max_fill_gap=pd.Timedelta(seconds=fill_s),
        staleness_limit=pd.Timedelta(seconds=config.policy.staleness_limit_s),
    )
    results = source.range(signal.query, start, end, step)
    collection = Collection(
        signal=signal_name, query=signal.query, start=start, end=end, series=_empty(signal_name)
    )
    results, conflict = _without_duplicates(signal_name, results)
    gappy: list[HygieneReport] = []
    for item in results:
        label = signal_name if not item.labels else f"{signal_name}{item.key}"
        report = clean(item.values, step, now=end, policy=policy, name=label)
        collection.reports.append(report)
        collection.by_labels[item.key] = report.series
        if report.long_gaps or report.stale:
            gappy.append(report)
        log.log(logging.INFO, "collected %s", report.summary())
    _warn_gaps(signal_name, gappy, len(results))
    if not results:
        log.warning(
            # Not "held": the history store may cover the signal; the cycle's note says
            # what the plan did with its pools (scaler.service.cycle.said_as_planned).
            "signal %s: query %r returned no series between %s and %s (a misspelt metric or "
            "label?)",
            signal_name,
            signal.query,
            start,
            end,
        )
    frames = [s for s in collection.by_labels.values() if len(s)]
    if frames:
        # min_count=1: a timestamp where no label set has a value is a gap, not zero demand.
        summed = pd.concat(frames, axis=1).sum(axis=1, min_count=1)
        summed.index.name = "timestamp"
        collection.series = summed.rename(signal_name).astype(float)
        # Label sets that stopped reporting leave a partial sum: marked, so the cycle
        # treats it as missing and holds the pools it feeds (forecaster.suspect).
        dropped = stopped_label_sets(
            collection.by_labels, collection.series, end, policy.staleness_limit
        )
        if dropped is not None:
            log.warning("signal %s: %s; pools it feeds are held", signal_name, dropped.why)
            collection.series = mark(collection.series, dropped)
        if conflict is not None and (dropped is None or conflict.since <= dropped.since):
            # Held by the cycle's screen, which says so in one line (forecaster.suspect).
            collection.series = mark(collection.series, conflict)
    if frames and collection.stale:
        log.warning(
            "signal %s is stale: newest sample %s is older than %d s before %s; no scale-down",
            signal_name,
            max(r.newest for r in collection.reports if r.newest is not None),
            config.policy.staleness_limit_s,
            end,
        )
    return collection


DUPLICATE_LABEL_SETS = "suspect.duplicate-label-sets"
"""The code of :func:`_without_duplicates`' suspicion (``scaler.wording`` words it)."""


def _without_duplicates(
    signal: str, results: list[LabelledSeries]
) -> tuple[list[LabelledSeries], Suspicion | None]:
    """``results`` with one series per label set, and the suspicion where Prometheus
    returned a label set more than once with different values.

    Copies that agree wherever both have a value are one series (merged). Copies that
    disagree leave no way to tell which is the demand: the first copy is kept and the
    signal is marked suspect from the first timestamp they disagree at, so it is treated
    as missing from there and its pools hold, never last-one-wins (a pool went 5 -> 0).
    """
    kept: dict[str, LabelledSeries] = {}
    copies: dict[str, int] = {}
    first: tuple[pd.Timestamp, str] | None = None
    for item in results:
        held = kept.get(item.key)
        if held is None:
            kept[item.key] = item
            continue
        copies[item.key] = copies.get(item.key, 1) + 1
        at = _first_disagreement(held.values, item.values)
        if at is None:
            merged = held.values.combine_first(item.values)
            kept[item.key] = LabelledSeries(held.labels, merged)
        elif first is None or at < first[0]:
            first = (at, item.key)
    if first is None:
        if copies:
            log.info(
                "signal %s: %d label set(s) returned twice with equal values", signal, len(copies)
            )
        return list(kept.values()), None
    at, key = first
    n = copies[key]
    why = (
        f"Prometheus returned {n} series with the labels {key[:120]} and different values "
        f"(first at {at:%Y-%m-%d %H:%MZ}); treated as missing"
    )
    params = {"copies": n, "labels": key[:120], "at": f"{at:%Y-%m-%d %H:%MZ}"}
    return list(kept.values()), Suspicion(at, why, True, DUPLICATE_LABEL_SETS, params)


def _first_disagreement(a: pd.Series, b: pd.Series) -> pd.Timestamp | None:
    """The first timestamp where both series have a value and the values differ."""
    left, right = a.dropna().align(b.dropna(), join="inner")
    x, y = left.to_numpy(dtype=float), right.to_numpy(dtype=float)
    differ = ~np.isclose(x, y, rtol=1e-9, atol=0.0, equal_nan=True)
    if not differ.any():
        return None
    return pd.Timestamp(left.index[int(np.argmax(differ))])


def collect_signal(
    config: Config,
    signal_name: str,
    now: pd.Timestamp | None = None,
    source: MetricSource | None = None,
) -> dict[str, pd.Series]:
    """History for one signal: ``{signal: series}`` plus per-label series when there are several.

    ``now`` is the end of the window (default: the wall clock); the window is the
    config's ``prometheus.lookback_s`` before it.
    """
    return collect(config, signal_name, now=now, source=source).history()


def _warn_gaps(signal_name: str, gappy: list[HygieneReport], total: int) -> None:
    """One warning for the label sets with long gaps or that stopped, however many: pods
    that come and go make one label set each (thousands of lines otherwise)."""
    if not gappy:
        return
    if total == 1:
        log.warning("collected %s", gappy[0].summary())
        return
    log.warning(
        "signal %s: %d of %d label sets have long gaps or stopped reporting (pods that "
        "came and went?); e.g. %s (each at INFO)",
        signal_name,
        len(gappy),
        total,
        gappy[0].summary()[:200],
    )


def _empty(name: str) -> pd.Series:
    return pd.Series([], index=pd.DatetimeIndex([], name="timestamp"), dtype=float, name=name)
