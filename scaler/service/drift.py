"""Forecasts that notice drift: forecast against actual per signal, from the run records.

Every cycle record keeps, per signal, what the cycle forecast one lead time ahead (the
largest pool lead time, the one the planner acts over) at each quantile
(:func:`scaler.records.forecast_summary`). :func:`forecast_pairs` puts each beside what
the history shows happened then; :func:`judge` measures, over the rolling
``drift.window_s``, the median's error (mean absolute error over the mean actual) and
the coverage of the lowest-highest quantile band, at every cycle of the last
``drift.for_s``. A signal whose window is out of band (coverage under
``drift.min_coverage`` or error over ``drift.max_error``, with at least
``drift.min_points`` pairs) at every one of them has drifted.

:func:`respond` then refits its model ahead of schedule (the model store forgets it, so
this cycle's forecast refits), re-learns its margin (the growth backtest's kept
forecasts are dropped), writes an Event and counts it; the cycle's plan keeps it in
``risk.drift`` and a note, and the review lists it. The time of the refit is kept in
``drift-state.json`` beside the model store: only forecasts made after it are judged
again, so one drift is one refit, not one per cycle while the window still holds the
forecasts of the old model.

Missing records or history judge nothing; a judgement never changes capacity by itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from forecaster.documents import read_document, set_aside
from forecaster.errors import BadInputError
from forecaster.files import write_atomic
from forecaster.series import History
from forecaster.store import ModelStore
from scaler.config import DriftConfig, PoolConfig
from scaler.plans import iso
from scaler.service.growth_cache import GrowthCache
from scaler.wording import DRIFT_BOTH, DRIFT_COVERAGE, DRIFT_ERROR, NOTE_DRIFT, Reason

log = logging.getLogger(__name__)

STATE_FILE = "drift-state.json"
MAX_STATE_BYTES = 1024 * 1024
EARLIEST, LATEST = pd.Timestamp("1970-01-01"), pd.Timestamp("2200-01-01")
"""The refit times a drift state may hold."""
MAX_RECORDS = 5000
"""Most cycle records read to judge drift (17 days of 5-minute cycles)."""


@dataclass(frozen=True)
class DriftWatch:
    """What judging drift reads: the ``drift`` section, the lead time the forecasts are
    judged at (the largest pool lead time), the planning cycle and the forecast method
    whose stored models a refit evicts."""

    settings: DriftConfig
    lead_s: int
    cycle_s: int
    method: str

    @classmethod
    def over(
        cls, settings: DriftConfig, pools: Sequence[PoolConfig], cycle_s: int, method: str
    ) -> DriftWatch:
        """The watch over ``pools``, judged at their largest lead time."""
        return cls(settings, max(p.lead_time_s for p in pools), cycle_s, method)


class EventSink(Protocol):
    """Where a drift's Event goes: the Kubernetes provider (``record_event``) or a fake."""

    def record_event(self, reason: str, note: str) -> None:
        """Record one Event about tiercast itself."""
        ...


@dataclass(frozen=True)
class SignalDrift:
    """One signal's forecast against actual over the newest window."""

    signal: str
    coverage: float
    """Share of actuals inside the lowest-highest forecast quantiles (NaN: not judged)."""
    error: float
    """Mean absolute error of the median over the mean actual (NaN: not judged)."""
    points: int
    """Forecast-actual pairs in the newest window."""
    out_of_band: bool
    """The newest window is out of band."""
    drifted: bool
    """Out of band at every cycle of ``drift.for_s``: refit."""
    band: str = ""
    """The quantiles the coverage is of (``q0.1-q0.9``)."""

    def why(self, config: DriftConfig) -> str:
        """One line: what left its band, over how many pairs and for how long."""
        return self.reason(config).text("en")

    def reason(self, config: DriftConfig) -> Reason:
        """:meth:`why` as a plan note, rendered in the reader's language."""
        low = self.coverage < config.min_coverage
        high = self.error > config.max_error
        part = DRIFT_BOTH if low and high else (DRIFT_COVERAGE if low else DRIFT_ERROR)
        return Reason(
            NOTE_DRIFT,
            {
                "signal": self.signal,
                "why": part,
                "band": self.band,
                "coverage_pct": 100 * self.coverage,
                "min_coverage_pct": 100 * config.min_coverage,
                "error_pct": 100 * self.error,
                "max_error_pct": 100 * config.max_error,
                "points": self.points,
                "window_h": config.window_s / 3600,
                "for_min": config.for_s / 60,
            },
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "coverage": round(self.coverage, 4),
            "error": round(self.error, 4),
            "points": self.points,
            "band": self.band,
        }


def forecast_pairs(records: Sequence[Any], history: History, lead_s: int) -> pd.DataFrame:
    """Each recorded cycle's forecast one lead time ahead beside what happened then.

    Columns: ``signal``, ``made_at`` (the cycle's newest observation), ``at`` (one lead
    time later), ``actual`` and one per recorded quantile; a moment after the newest
    sample is left out (not happened yet).
    """
    rows = []
    lead = pd.Timedelta(seconds=lead_s)
    seen = {name: y.dropna() for name, y in history.items()}
    for r in records:
        forecast = getattr(r, "forecast", None)
        if getattr(r, "job", "cycle") != "cycle" or not isinstance(forecast, Mapping):
            continue
        for name, f in forecast.items():
            y = seen.get(name)
            if y is None or not len(y) or not isinstance(f, Mapping):
                continue
            try:
                made = _naive(str(f["last_timestamp"]))
                quantiles = {str(k): float(v) for k, v in dict(f.get("at_lead", {})).items()}
            except (KeyError, TypeError, ValueError):
                continue
            at = made + lead
            if at > y.index[-1] or not (y.index <= at).any():
                continue
            actual = float(y[y.index <= at].iloc[-1])
            rows.append({"signal": name, "made_at": made, "at": at, "actual": actual, **quantiles})
    return pd.DataFrame(rows)


def _naive(ts: str) -> pd.Timestamp:
    t = pd.Timestamp(ts)
    return t.tz_convert(None) if t.tzinfo is not None else t


def judge(
    pairs: pd.DataFrame,
    config: DriftConfig,
    now: pd.Timestamp,
    cycle_s: int,
    refitted_at: Mapping[str, pd.Timestamp] | None = None,
) -> dict[str, SignalDrift]:
    """Per signal, its forecast against actual over the window ending at each cycle of
    the last ``for_s`` (only forecasts made after its last drift refit)."""
    out: dict[str, SignalDrift] = {}
    if pairs.empty:
        return out
    refitted_at = refitted_at or {}
    steps = max(0, config.for_s // cycle_s)
    ends = [now - pd.Timedelta(seconds=k * cycle_s) for k in range(steps, -1, -1)]
    for name, g in pairs.groupby("signal", sort=True):
        since = refitted_at.get(str(name))
        if since is not None:
            g = g[g["made_at"] > since]
        cols = sorted(
            (c for c in g.columns if c.startswith("q") and g[c].notna().any()), key=_level
        )
        if len(cols) < 2 or "q0.5" not in cols:
            continue
        lo, hi = cols[0], cols[-1]
        judged = [_window(g, end, config, lo, hi) for end in ends]
        coverage, error, points = judged[-1]
        bad = [_out_of_band(c, e, p, config) for c, e, p in judged]
        out[str(name)] = SignalDrift(
            str(name), coverage, error, points, bad[-1], all(bad), f"{lo}-{hi}"
        )
    return out


def _level(column: str) -> float:
    try:
        return float(column[1:])
    except ValueError:
        return float("nan")


def _window(
    g: pd.DataFrame, end: pd.Timestamp, config: DriftConfig, lo: str, hi: str
) -> tuple[float, float, int]:
    w = g[(g["at"] > end - pd.Timedelta(seconds=config.window_s)) & (g["at"] <= end)]
    w = w.dropna(subset=["actual", lo, hi, "q0.5"])
    if w.empty:
        return float("nan"), float("nan"), 0
    a = w["actual"].to_numpy(dtype=float)
    inside = (a >= w[lo].to_numpy(dtype=float)) & (a <= w[hi].to_numpy(dtype=float))
    scale = max(float(np.mean(np.abs(a))), 1e-9)
    error = float(np.mean(np.abs(a - w["q0.5"].to_numpy(dtype=float)))) / scale
    return float(np.mean(inside)), error, len(w)


def _out_of_band(coverage: float, error: float, points: int, config: DriftConfig) -> bool:
    if points < config.min_points:
        return False
    return bool(coverage < config.min_coverage or error > config.max_error)


class DriftState:
    """When each signal was last refitted for drift, kept beside the model store."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.refitted_at: dict[str, pd.Timestamp] = {}
        if path is not None and (path.exists() or path.is_symlink()):
            self.refitted_at = _read_state(path)

    def mark(self, signal: str, at: pd.Timestamp) -> None:
        self.refitted_at[signal] = pd.Timestamp(at)
        if self.path is None:
            return
        body = json.dumps({"refitted_at": {k: iso(v) for k, v in sorted(self.refitted_at.items())}})
        try:
            write_atomic(self.path, body, parents=True, owned=True)
        except OSError as exc:
            log.warning("drift state %s not written: %s", self.path, exc)


def _read_state(path: Path) -> dict[str, pd.Timestamp]:
    """The refit times in the drift state file; a file that cannot be read or used (too
    large, nested too deep, not JSON, a time that is not one) is set aside as
    ``drift-state.json.bad`` with a warning and drift starts afresh: never a failed cycle."""
    try:
        body = read_document(path, MAX_STATE_BYTES, "drift state", follow=False, json_only=True)
        given = body.get("refitted_at", {}) if isinstance(body, dict) else None
        if not isinstance(given, dict):
            raise BadInputError(f"drift state {str(path)!r}: refitted_at: expected a mapping")
        out: dict[str, pd.Timestamp] = {}
        for k, v in given.items():
            at = _naive(v) if isinstance(v, str) and len(v) <= 64 else None
            if not isinstance(at, pd.Timestamp) or not EARLIEST <= at <= LATEST:
                raise BadInputError(f"drift state: refitted_at.{str(k)[:60]}: not a time")
            out[str(k)] = at
        return out
    except (BadInputError, ValueError, TypeError, OverflowError) as exc:
        set_aside(path, str(exc), log)
        return {}


def respond(
    drifts: Mapping[str, SignalDrift],
    watch: DriftWatch,
    now: pd.Timestamp,
    store: ModelStore,
    cache: GrowthCache,
    state: DriftState,
    events: EventSink | None,
) -> dict[str, SignalDrift]:
    """Refit each drifted signal ahead of schedule, re-learn its margin, say so; the
    signals refitted."""
    done: dict[str, SignalDrift] = {}
    for name, d in sorted(drifts.items()):
        if not d.drifted:
            continue
        store.evict(name, watch.method)
        cache.forget(name)
        cache.save()
        state.mark(name, now)
        why = d.why(watch.settings)
        log.warning("%s", why)
        if events is not None:
            events.record_event("ForecastDrift", why)
        done[name] = d
    return done


def judge_records(
    watch: DriftWatch,
    records: Sequence[Any],
    history: History,
    now: pd.Timestamp,
    state: DriftState,
) -> dict[str, SignalDrift]:
    """:func:`judge` over ``records`` (newest first or not) and ``history``."""
    pairs = forecast_pairs(records, history, watch.lead_s)
    return judge(pairs, watch.settings, now, watch.cycle_s, state.refitted_at)


def records_needed(watch: DriftWatch) -> int:
    """Cycle records that cover the window and ``for_s`` (at most :data:`MAX_RECORDS`)."""
    span = watch.settings.window_s + watch.settings.for_s
    return int(min(MAX_RECORDS, (span + watch.lead_s) // watch.cycle_s + 12))
