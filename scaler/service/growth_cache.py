"""The growth backtest's forecasts, kept between cycles.

The near-term rule is calibrated by a walk-forward backtest of the forecaster
(:func:`scaler.planning.growth.backtest_growth`): one forecast at each refresh time of
the last ``policy.growth_backtest_s``. The product makes those forecasts at whole
multiples of ``policy.growth_refresh_s`` (midnight UTC for a day), so that a CronJob
running every few minutes asks for the same ones cycle after cycle. Without this cache
it fits them all again every cycle: three ``auto`` selections per signal at the
defaults, most of a cycle's time.

Each forecast's median is kept, keyed by the signal, the method, the origin (the
newest timestamp the forecast saw), the lookback, the horizon, and a digest of the last
day of values before the origin. A backfill that rewrites that day makes a new
forecast; Prometheus' retention trimming the oldest points of the window does not,
because the forecast made at that time saw them. Entries older than ``keep`` before
the newest origin asked for are dropped when the cache is saved.

The cache is one JSON file beside the model store (``growth-backtests.json``), read
once per process within a size and nesting bound and written atomically; a missing
file is an empty cache, an unreadable or malformed one is set aside as
``growth-backtests.json.bad`` with a warning and the cache starts empty, and a malformed
entry (a bad or offset origin, a huge step) is dropped: the forecasts are made again,
never a failed cycle.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from forecaster.documents import read_document, set_aside
from forecaster.errors import BadInputError
from forecaster.files import write_atomic
from forecaster.forecasting import SeriesForecast, forecast_series
from scaler.planning.growth import Forecaster

log = logging.getLogger(__name__)

FILE_NAME = "growth-backtests.json"
FORMAT = 1
MAX_BYTES = 32 * 1024 * 1024
"""The cache file is refused (and rebuilt) past this size."""
DIGEST_SPAN = pd.Timedelta(days=1)
"""The values before an origin whose digest a kept forecast must match."""


class GrowthCache:
    """Medians of the growth backtest's forecasts, by signal and origin (see the module)."""

    def __init__(self, path: Path | None, keep: pd.Timedelta) -> None:
        self.path = path
        self.keep = keep
        self._entries: dict[str, dict[str, Any]] = {}
        self._changed = False
        self.stats = {"kept": 0, "made": 0}
        if path is not None:
            # Dropped entries rewrite the file at the next save, so the warning is once.
            self._entries, self._changed = _read(path)

    def forecaster(
        self, signal: str, method: str, quantiles: tuple[float, ...] = (0.5,)
    ) -> Forecaster:
        """The backtest's forecaster for ``signal``: a kept median, else a new forecast."""

        def forecast(window: pd.Series, horizon: pd.Timedelta) -> SeriesForecast:
            key = _key(signal, method, window, horizon)
            entry = self._entries.get(key)
            if entry is not None:
                fc = _forecast(signal, window, entry)
                if fc is not None:
                    self.stats["kept"] += 1
                    return fc
            fc = forecast_series(window, horizon, quantiles, method)
            self._entries[key] = _entry(window, fc)
            self._changed = True
            self.stats["made"] += 1
            return fc

        return forecast

    def forget(self, signal: str) -> int:
        """Drop ``signal``'s kept forecasts, so its growth backtest is made again (after a
        drift refit its margin is re-learned from fresh forecasts); how many were dropped."""
        prefix = f"{signal}|"
        gone = [k for k in self._entries if k.startswith(prefix)]
        for k in gone:
            del self._entries[k]
        self._changed = self._changed or bool(gone)
        return len(gone)

    def save(self) -> None:
        """Write the cache (when it changed), without entries older than ``keep``."""
        if self.path is None or not self._changed:
            return
        newest = max((e["origin"] for e in self._entries.values()), default=None)
        if newest is not None:
            cut = pd.Timestamp(newest) - self.keep
            self._entries = {
                k: e for k, e in self._entries.items() if pd.Timestamp(e["origin"]) >= cut
            }
        body = json.dumps({"format": FORMAT, "entries": self._entries}, separators=(",", ":"))
        try:
            write_atomic(self.path, body, parents=True, owned=True)
            self._changed = False
        except OSError as exc:
            log.warning("growth backtest cache %s not written: %s", self.path, exc)


def _key(signal: str, method: str, window: pd.Series, horizon: pd.Timedelta) -> str:
    origin = window.index[-1]
    recent = window[window.index > origin - DIGEST_SPAN]
    digest = hashlib.sha256(
        recent.index.as_unit("ns").asi8.tobytes() + recent.to_numpy(dtype=float).tobytes()
    ).hexdigest()[:32]
    lookback = (origin - window.index[0]).total_seconds()
    return "|".join(
        [
            signal,
            method,
            origin.isoformat(),
            f"{lookback:g}",
            f"{horizon.total_seconds():g}",
            digest,
        ]
    )


def _entry(window: pd.Series, fc: SeriesForecast) -> dict[str, Any]:
    median = fc.frame["q0.5"] if "q0.5" in fc.frame.columns else fc.quantile(0.5)
    index = pd.DatetimeIndex(median.index)
    return {
        "origin": window.index[-1].isoformat(),
        "estimator": fc.estimator,
        "start": index[0].isoformat() if len(index) else window.index[-1].isoformat(),
        "step_s": fc.step.total_seconds(),
        "median": [float(v) if math.isfinite(v) else None for v in median.to_numpy(dtype=float)],
    }


def _forecast(signal: str, window: pd.Series, entry: dict[str, Any]) -> SeriesForecast | None:
    """The kept forecast as the backtest reads it (its median); None if malformed."""
    try:
        step = pd.Timedelta(seconds=float(entry["step_s"]))
        values = np.array(
            [math.nan if v is None else float(v) for v in entry["median"]], dtype=float
        )
        start = pd.Timestamp(entry["start"])
        if step <= pd.Timedelta(0):
            return None
        estimator = str(entry["estimator"])
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    try:
        index = pd.date_range(start, periods=len(values), freq=step)
    except (ValueError, OverflowError):
        return None
    observed = window.dropna()
    if observed.empty:
        return None
    last = observed.index[-1]
    recent = observed[observed.index > last - pd.Timedelta(hours=1)]
    return SeriesForecast(
        name=signal,
        frame=pd.DataFrame({"q0.5": values}, index=index),
        estimator=estimator,
        reason="kept from an earlier cycle's growth backtest",
        step=step,
        last_timestamp=last,
        last_value=float(observed.iloc[-1]),
        recent_max=float(recent.max()),
        n_observed=len(observed),
    )


MAX_MEDIAN = 100_000
"""Most values in one kept median (a week at a 1-minute step is 10,080)."""
MAX_STEP = pd.Timedelta(days=366)
"""The largest step a kept forecast may have."""
_EARLIEST = pd.Timestamp("1970-01-01")
_LATEST = pd.Timestamp("2200-01-01")


def _instant(value: Any) -> pd.Timestamp | None:
    """A naive timestamp in 1970-2200 written as text, else None (an offset one included:
    the cache writes naive UTC times, and an offset one cannot be ordered against them)."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError, OverflowError):
        return None
    if ts is pd.NaT or ts.tzinfo is not None or not _EARLIEST <= ts <= _LATEST:
        return None
    return ts


def _usable(entry: Any) -> bool:
    """Whether ``entry`` is a kept forecast :func:`_forecast` and :meth:`GrowthCache.save`
    can use: a bounded median of numbers, a sane step, and its times in range."""
    if not isinstance(entry, dict) or _instant(entry.get("origin")) is None:
        return False
    start = _instant(entry.get("start"))
    step_s, median = entry.get("step_s"), entry.get("median")
    if start is None or not isinstance(entry.get("estimator"), str):
        return False
    if isinstance(step_s, bool) or not isinstance(step_s, int | float):
        return False
    if not (math.isfinite(step_s) and 0 < step_s <= MAX_STEP.total_seconds()):
        return False
    if not isinstance(median, list) or len(median) > MAX_MEDIAN:
        return False
    if start + pd.Timedelta(seconds=float(step_s)) * len(median) > _LATEST:
        return False
    return all(
        v is None or (isinstance(v, int | float) and not isinstance(v, bool)) for v in median
    )


def _read(path: Path) -> tuple[dict[str, dict[str, Any]], bool]:
    """The usable entries of the cache file, and whether any were dropped. A file that
    cannot be read or is not a cache is set aside (``NAME.bad``) and the cache starts
    empty: its forecasts are made again, never a failed cycle."""
    if not path.exists() and not path.is_symlink():
        return {}, False
    try:
        data = read_document(path, MAX_BYTES, "growth backtest cache", follow=False, json_only=True)
    except BadInputError as exc:
        set_aside(path, str(exc), log)
        return {}, False
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(entries, dict):
        set_aside(path, f"not a growth backtest cache of format {FORMAT}", log)
        return {}, False
    usable = {k: e for k, e in entries.items() if isinstance(k, str) and _usable(e)}
    dropped = len(entries) - len(usable)
    if dropped:
        log.warning(
            "growth backtest cache %s: %d malformed entr%s dropped (bad origin, start, step "
            "or median); made again",
            path,
            dropped,
            "y" if dropped == 1 else "ies",
        )
    return usable, bool(dropped)


_CACHES: dict[str, GrowthCache] = {}


def growth_cache_for(store_path: Path | None, keep: pd.Timedelta) -> GrowthCache:
    """One cache per model store folder in a process (a service reads its file once)."""
    if store_path is None:
        return GrowthCache(None, keep)
    key = str(store_path.resolve())
    if key not in _CACHES:
        _CACHES[key] = GrowthCache(store_path / FILE_NAME, keep)
    _CACHES[key].keep = keep
    return _CACHES[key]


Backtests = Callable[[str], Forecaster]
"""``signal -> forecaster``: what :func:`scaler.planning.tiers.learn_margins` backtests with."""
