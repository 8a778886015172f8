"""The data-hygiene policy: what tiercast does to raw metric samples before forecasting.

Real Prometheus data has gaps, counter resets, NaN and ``±Inf``, restarts and
stale series. Every collected series goes through :func:`clean` once, and the
rules are these, in this order:

1. **Non-finite and negative values are dropped.** NaN and ``±Inf`` carry no
   usable level (Prometheus makes them from ``0/0`` and ``x/0`` in ratios), and
   demand (requests, tokens, GPUs, bytes) is never below zero: a negative sample
   is a broken exporter or a counter read without ``rate()``, and forecasting it
   would plan negative capacity. So is a magnitude over 1e15 (no signal reaches it;
   sums of such values overflow). Each becomes a gap, counted in the report.
2. **Duplicates and out-of-order samples are resolved.** Samples are sorted by
   time with a stable sort; of several samples at one timestamp the last one
   received wins (the same rule as :func:`forecaster.series.clean_series` and
   as a re-ingested TSDB). Both are counted.
3. **The series is put on the signal's grid**: buckets of ``step`` anchored at
   the epoch, the mean of the samples in each. A Prometheus range query already
   answers on that grid, so this changes nothing there; it matters for other
   sources.
4. **Short gaps are interpolated, long gaps are left missing.** A run of missing
   grid points between two observed ones is filled linearly in time when it
   spans at most ``max_fill_gap`` (missing points × step); a longer run stays
   NaN, because inventing hours of demand is worse than admitting the hole, and
   it is reported with its start, end and length. Nothing is invented before
   the first or after the newest observed sample.
5. **Counters are read through ``rate()`` or ``increase()`` in PromQL**, which
   handle counter resets (a restart that drops the counter to zero) on the
   server. tiercast never differentiates a raw counter itself;
   :func:`counter_problem` refuses a query that selects a counter (a name ending
   in ``_total``, ``_count``, ``_sum`` or ``_bucket``) without such a function.
6. **Stale series are marked.** A series whose newest observed sample is older
   than ``staleness_limit`` at ``now`` is stale; an empty series is stale too.
   Stale signals never lead to a scale-down: the planner holds every pool they
   feed (see ``scaler.planning.tiers``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

MAX_VALUE = 1e15
"""Samples larger than this are dropped with the negative ones (see rule 1)."""
DEFAULT_MAX_FILL_GAP = pd.Timedelta(minutes=15)
DEFAULT_STALENESS_LIMIT = pd.Timedelta(minutes=15)


@dataclass(frozen=True)
class HygienePolicy:
    """The tunable parts of the policy."""

    max_fill_gap: pd.Timedelta = DEFAULT_MAX_FILL_GAP
    """Longest run of missing points (missing points × step) filled by interpolation. Default 15 min."""
    staleness_limit: pd.Timedelta = DEFAULT_STALENESS_LIMIT
    """A series whose newest sample is older than this at ``now`` is stale. Default 15 min."""


@dataclass(frozen=True)
class Gap:
    """A run of missing grid points left unfilled: first and last missing timestamp."""

    start: pd.Timestamp
    end: pd.Timestamp
    points: int


@dataclass
class HygieneReport:
    """What :func:`clean` did to one series, for logs and reports."""

    name: str
    series: pd.Series
    """The cleaned series on the grid (long gaps NaN)."""
    received: int = 0
    nonfinite_dropped: int = 0
    negative_dropped: int = 0
    duplicates_resolved: int = 0
    out_of_order: int = 0
    filled_points: int = 0
    long_gaps: list[Gap] = field(default_factory=list)
    newest: pd.Timestamp | None = None
    stale: bool = False

    @property
    def empty(self) -> bool:
        return self.newest is None

    def summary(self) -> str:
        """One line: what was wrong and what was done."""
        if self.empty:
            negatives = f", {self.negative_dropped} negative" if self.negative_dropped else ""
            return (
                f"{self.name}: no finite sample ({self.received} received{negatives}); "
                "treated as stale"
            )
        parts = [f"{self.received} samples"]
        if self.nonfinite_dropped:
            parts.append(f"{self.nonfinite_dropped} NaN/Inf dropped")
        if self.negative_dropped:
            parts.append(f"{self.negative_dropped} negative dropped")
        if self.duplicates_resolved:
            parts.append(f"{self.duplicates_resolved} duplicate(s) resolved")
        if self.out_of_order:
            parts.append(f"{self.out_of_order} out of order")
        if self.filled_points:
            parts.append(f"{self.filled_points} point(s) interpolated")
        if self.long_gaps:
            longest = max(self.long_gaps, key=lambda g: g.points)
            parts.append(
                f"{len(self.long_gaps)} long gap(s) left missing (longest {longest.points} "
                f"points from {longest.start})"
            )
        if self.stale:
            parts.append(f"STALE: newest sample at {self.newest}")
        return f"{self.name}: " + ", ".join(parts)


def _empty(name: str) -> pd.Series:
    return pd.Series([], index=pd.DatetimeIndex([], name="timestamp"), dtype=float, name=name)


def clean(
    series: pd.Series,
    step: pd.Timedelta,
    now: pd.Timestamp | None = None,
    policy: HygienePolicy | None = None,
    name: str | None = None,
) -> HygieneReport:
    """Apply the policy to ``series`` on a grid of ``step``; see the module docstring."""
    policy = policy or HygienePolicy()
    label = name if name is not None else str(series.name)
    if step <= pd.Timedelta(0):
        raise ValueError(f"step must be positive, got {step}")
    raw = series.astype(float)
    index = pd.DatetimeIndex(raw.index)
    if index.tz is not None:
        index = index.tz_convert(None)
    values = raw.to_numpy(dtype=float)
    report = HygieneReport(name=label, series=_empty(label), received=len(values))

    finite = np.isfinite(values)
    report.nonfinite_dropped = int((~finite).sum())
    negative = finite & ((values < 0) | (np.abs(values) > MAX_VALUE))
    report.negative_dropped = int(negative.sum())
    finite &= ~negative
    stamps = index.as_unit("ns").asi8[finite]
    values = values[finite]
    if len(values) == 0:
        report.stale = True
        return report

    # Out of order: a sample earlier than one already received.
    running_max = np.maximum.accumulate(stamps)
    report.out_of_order = int((stamps[1:] < running_max[:-1]).sum())
    order = np.argsort(stamps, kind="stable")
    stamps, values = stamps[order], values[order]
    last_of_group = np.append(stamps[1:] != stamps[:-1], True)
    report.duplicates_resolved = int((~last_of_group).sum())
    stamps, values = stamps[last_of_group], values[last_of_group]

    s = pd.Series(values, index=pd.DatetimeIndex(stamps.astype("datetime64[ns]")), dtype=float)
    gridded = s.resample(step, origin="epoch").mean()
    missing = gridded.isna().to_numpy()
    filled = gridded.copy()
    if missing.any():
        # Runs of missing points: each is bounded by observed points on both sides
        # because resample spans first..last observed bucket.
        edges = np.flatnonzero(np.diff(np.concatenate(([0], missing.astype(int), [0]))))
        fill_mask = np.zeros(len(missing), dtype=bool)
        for start, stop in zip(edges[::2], edges[1::2], strict=True):
            points = int(stop - start)
            if points * step <= policy.max_fill_gap:
                fill_mask[start:stop] = True
            else:
                report.long_gaps.append(
                    Gap(
                        start=gridded.index[start],
                        end=gridded.index[stop - 1],
                        points=points,
                    )
                )
        interpolated = gridded.interpolate(method="time", limit_area="inside")
        filled[fill_mask] = interpolated[fill_mask]
        report.filled_points = int(fill_mask.sum())
    filled.index.name = "timestamp"
    filled.name = label
    report.series = filled
    report.newest = pd.Timestamp(gridded.dropna().index[-1])
    if now is not None:
        report.stale = pd.Timestamp(now) - report.newest > policy.staleness_limit
    return report


_COUNTER_NAME = re.compile(
    r"(?<![A-Za-z0-9_:])([A-Za-z_:][A-Za-z0-9_:]*(?:_total|_count|_sum|_bucket))\b"
)
_COUNTER_FUNCS = re.compile(r"\b(rate|irate|increase|resets|changes|deriv|idelta|delta)\s*\(")


def counter_problem(query: str) -> str | None:
    """Why ``query`` reads a raw counter, or ``None`` when it looks fine.

    A heuristic on names: a counter's level only grows, so forecasting it plans
    for ever more capacity. Any rate-like function in the query is taken as
    reading the counter correctly.
    """
    # Label values are not metric names: blank out string literals first.
    bare = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', query)
    if _COUNTER_FUNCS.search(bare):
        return None
    m = _COUNTER_NAME.search(bare)
    if m is None:
        return None
    name = m.group(1)
    return (
        f"query selects counter {name!r} without rate() or increase(); "
        f"read it as e.g. sum(rate({name}[5m]))"
    )
