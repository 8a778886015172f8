"""Suspect data: values that are in range but unlike the series' own past.

:mod:`forecaster.hygiene` drops what no demand can be (NaN, ``±Inf``, negatives,
magnitudes over 1e15). What this module finds can be demand, but is far more likely a
broken exporter or a partial answer, and planning on it would release or buy capacity
for nothing. The rules, each judged against the series itself:

* **A spike**: a sample over :data:`SPIKE_FACTOR` times the series' q0.99 (of at least
  :data:`MIN_SAMPLES` samples). It is treated as missing, wherever it is; when it is
  among the newest samples (within the staleness limit of the newest one) the signal
  is suspect.
* **A run of zeros unlike the past**: the newest samples are all zero, for longer than
  any run of zeros before them, after a past with demand in it. The zeros are treated
  as missing and the signal is suspect, until the run has lasted :data:`BELIEVED_AFTER`
  (then it is the new level).
* **Label sets that stopped reporting** (:func:`stopped_label_sets`, for a signal summed
  over label sets by :mod:`scaler.inputs.collecting`): label sets that carried a share
  of the sum stopped while others went on, no new label set took their place, and the
  sum fell with them. The sum from then on is partial: it is treated as missing and the
  signal is suspect, until the label sets come back or the drop has lasted
  :data:`BELIEVED_AFTER`.

A suspect signal is *held* like a stale one (``scaler.planning.tiers``): its pools keep
their nodes and grow only where the last good observations need more. The verdict on a
label set drop rides with the summed series itself, as a mark in ``Series.attrs``
(:func:`mark`, :func:`marked`), so that a history stays a ``dict`` of series;
:func:`screen_history` applies every rule to a history at ``now``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

SPIKE_FACTOR = 1000.0
"""A sample over this many times the series' q0.99 is a spike."""
SPIKE_QUANTILE = 0.99
MIN_SAMPLES = 24
"""Fewest finite samples the spike rule judges on (fewer give no q0.99 worth the name)."""
BELIEVED_AFTER = pd.Timedelta(days=1)
"""How long a run of zeros or a label set drop holds before it is taken as the new level."""
DROP_SHARE = 0.1
"""Label sets that carried less than this share of the sum when they stopped (drained
replicas) are no sign of a partial answer."""
_MARK = "tiercast.suspect"

# What each rule found, as a code with its parameters: ``scaler.wording`` renders them in
# every language it speaks (the forecaster never imports scaler; a test there checks the
# codes are its own).
SPIKE = "suspect.spike"
ZEROS = "suspect.zeros"
LABEL_SETS = "suspect.label-sets-stopped"


@dataclass(frozen=True)
class Suspicion:
    """What one rule found in one series."""

    since: pd.Timestamp
    """The first timestamp treated as missing."""
    why: str
    """One line: what was found, from when (English, for the log)."""
    hold: bool = True
    """Whether the newest data is affected, so that the signal's pools hold."""
    code: str = ""
    """Which rule found it (:data:`SPIKE`, :data:`ZEROS`, :data:`LABEL_SETS`)."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """The figures ``why`` states, by name (JSON scalars), for ``code``'s wording."""


@dataclass
class Screened:
    """A history after :func:`screen_history`: suspect samples missing, and why."""

    history: dict[str, pd.Series]
    held: dict[str, str]
    """Signal -> why its pools hold (one line)."""
    notes: list[str]
    """Suspect samples treated as missing that hold nothing (an old spike)."""
    found: dict[str, list[Suspicion]] = field(default_factory=dict)
    """Signal -> what the rules found in it, holding or not (their codes and figures)."""


def _when(ts: pd.Timestamp) -> str:
    """A timestamp as the notes print it: ``2026-11-30 11:00Z``."""
    return pd.Timestamp(ts).strftime("%Y-%m-%d %H:%MZ")


def mark(series: pd.Series, suspicion: Suspicion) -> pd.Series:
    """``series`` carrying ``suspicion`` for :func:`screen_history` (a copy)."""
    out = series.copy()
    out.attrs[_MARK] = suspicion
    return out


def marked(series: pd.Series) -> Suspicion | None:
    """The suspicion :func:`mark` attached to ``series``, if any."""
    found = series.attrs.get(_MARK)
    return found if isinstance(found, Suspicion) else None


def spikes(series: pd.Series, recent: pd.Timedelta) -> tuple[pd.Series, Suspicion | None]:
    """``series`` with its spikes missing, and what was found (see the module docstring)."""
    values = series.dropna()
    if len(values) < MIN_SAMPLES:
        return series, None
    # "lower": a quantile of observed values, not pulled up towards one spike among few.
    ref = float(np.quantile(values.to_numpy(dtype=float), SPIKE_QUANTILE, method="lower"))
    if not ref > 0:
        return series, None
    bad = values[values > SPIKE_FACTOR * ref]
    if bad.empty:
        return series, None
    out = series.copy()
    out[bad.index] = np.nan
    newest = values.index[-1]
    hold = bool((bad.index >= newest - recent).any())
    first = pd.Timestamp(bad.index[-1] if hold else bad.index[0])
    which, value = ("newest", bad.iloc[-1]) if hold else ("first", bad.iloc[0])
    params = {
        "samples": len(bad),
        "factor": SPIKE_FACTOR,
        "quantile": f"q{SPIKE_QUANTILE:g}",
        "reference": ref,
        "which": which,
        "value": float(value),
        "at": _when(first),
    }
    why = (
        f"{len(bad)} sample(s) over {SPIKE_FACTOR:g}x its q{SPIKE_QUANTILE:g} ({ref:.4g}), "
        f"the {which} {value:.4g} at {_when(first)}; treated as missing"
    )
    return out, Suspicion(first, why, hold, SPIKE, params)


def _zero_runs(values: pd.Series) -> list[tuple[pd.Timestamp, pd.Timedelta]]:
    """Each run of zeros: its first timestamp and how long until the next non-zero sample."""
    zero = values.to_numpy(dtype=float) == 0
    stamps = values.index
    runs: list[tuple[pd.Timestamp, pd.Timedelta]] = []
    start: int | None = None
    for i, z in enumerate(zero):
        if z and start is None:
            start = i
        elif not z and start is not None:
            runs.append((stamps[start], stamps[i] - stamps[start]))
            start = None
    return runs


def zero_run(series: pd.Series, now: pd.Timestamp) -> tuple[pd.Series, Suspicion | None]:
    """``series`` with a trailing run of zeros unlike its past missing, and what was found."""
    values = series.dropna()
    if values.empty or values.iloc[-1] != 0:
        return series, None
    nonzero = np.flatnonzero(values.to_numpy(dtype=float) != 0)
    if len(nonzero) == 0:
        return series, None  # never any demand: nothing to compare with
    start = pd.Timestamp(values.index[nonzero[-1] + 1])
    lasted = pd.Timestamp(now) - start
    if lasted >= BELIEVED_AFTER:
        return series, None
    past = _zero_runs(values[values.index < start])
    longest = max((d for _, d in past), default=pd.Timedelta(0))
    if lasted <= longest:
        return series, None  # zeros as long as this have happened before
    out = series.copy()
    out[out.index >= start] = np.nan
    points = int((values.index >= start).sum())
    longest_min = round(longest.total_seconds() / 60)
    why = (
        f"zeros since {_when(start)} ({points} sample(s)), unlike its past (longest run of "
        f"zeros before: {longest_min} min); treated as missing"
    )
    params = {"since": _when(start), "samples": points, "longest_min": longest_min}
    return out, Suspicion(start, why, True, ZEROS, params)


def stopped_label_sets(
    by_labels: Mapping[str, pd.Series],
    summed: pd.Series,
    now: pd.Timestamp,
    staleness_limit: pd.Timedelta,
) -> Suspicion | None:
    """Whether ``summed`` (the sum of ``by_labels``) is partial at ``now``; see the module."""
    sets = {k: s.dropna() for k, s in by_labels.items()}
    sets = {k: s for k, s in sets.items() if len(s)}
    summed = summed.dropna()
    if len(sets) < 2 or summed.empty:
        return None
    now = pd.Timestamp(now)
    newest = {k: pd.Timestamp(s.index[-1]) for k, s in sets.items()}
    reporting = sum(now - t <= staleness_limit for t in newest.values())
    if not reporting:
        return None  # every label set is old: the signal is stale, which holds already
    counts = pd.concat(list(sets.values()), axis=1).notna().sum(axis=1)
    stopped = [
        k
        for k, t in newest.items()
        if now - t > staleness_limit and now - t < BELIEVED_AFTER and int(counts[t]) > reporting
    ]
    if not stopped:
        return None
    first = min(newest[k] for k in stopped)
    last = max(newest[k] for k in stopped)
    carried = sum(float(sets[k].iloc[-1]) for k in stopped)
    before = float(summed[summed.index <= first].iloc[-1])
    after = summed[summed.index > last]
    if after.empty or before <= 0 or carried < DROP_SHARE * before:
        return None
    # The other label sets took the load up (a replica replaced or scaled in): no gap.
    if before - float(after.iloc[0]) <= carried / 2:
        return None
    since = pd.Timestamp(after.index[0])
    total = int(counts[first])
    return Suspicion(
        since,
        f"{len(stopped)} of {total} label sets stopped reporting at {_when(since)} "
        f"(they carried {carried:.4g} of {before:.4g}); the sum since is partial, "
        "treated as missing",
        True,
        LABEL_SETS,
        {
            "stopped": len(stopped),
            "total": total,
            "at": _when(since),
            "carried": carried,
            "before": before,
        },
    )


def screen(
    series: pd.Series, now: pd.Timestamp, recent: pd.Timedelta
) -> tuple[pd.Series, list[Suspicion]]:
    """One series through every rule: the series with suspect samples missing, and why."""
    found: list[Suspicion] = []
    given = marked(series)
    out = series if series.dtype.kind == "f" else series.astype(float)
    if given is not None:
        out = out.copy()
        out[out.index >= given.since] = np.nan
        found.append(given)
    out, spike = spikes(out, recent)
    out, zeros = zero_run(out, now)
    found += [s for s in (spike, zeros) if s is not None]
    return out, found


def screen_history(
    history: Mapping[str, pd.Series], now: pd.Timestamp, recent: pd.Timedelta
) -> Screened:
    """Every series of ``history`` through :func:`screen` at ``now``.

    ``recent``: how close to the newest sample a spike holds the signal (the staleness
    limit: a spike older than that is only a gap).
    """
    out: dict[str, pd.Series] = {}
    held: dict[str, str] = {}
    notes: list[str] = []
    by_signal: dict[str, list[Suspicion]] = {}
    for name, y in history.items():
        cleaned, found = screen(y, now, recent)
        out[name] = cleaned
        if found:
            by_signal[name] = found
        holding = [s.why for s in found if s.hold]
        if holding:
            held[name] = "; ".join(holding)
        notes += [f"signal {name!r}: {s.why}" for s in found if not s.hold]
    return Screened(out, held, notes, by_signal)
