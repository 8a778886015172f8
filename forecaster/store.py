"""The model store: one fitted forecaster per series, reused between runs.

Selecting and calibrating a model costs a backtest; forecasting from a selected
model costs almost nothing. The store keeps the fitted model of each series (a
joblib file) with a JSON sidecar of metadata (estimator, parameters, training
window, backtest scores, tiercast version, creation time), and on the next run

* **reuses** it when it is still good: the model is moved onto the new data
  with ``update`` (cheap models refit their state, Prophet keeps its fit), so
  the selection and the quantile calibration carry over;
* **refits** it when it is due: older than ``max_age_s`` (by the wall clock or
  by how far the data moved past its training window), or drifted (its live
  error on the data that arrived since training is over ``drift_ratio`` times
  its backtest error);
* **replaces** an artifact that cannot be trusted: unreadable, written by
  another format or tiercast version, for another series or method, or whose
  training data does not match the history now given. These never fail a run:
  the model is refitted and the reason recorded.

``path=None`` keeps models in memory only (what a replay that re-forecasts every
cycle in one process wants); a path also keeps an in-memory copy so repeated
calls in one process do not re-read the file.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd

from forecaster import __version__
from forecaster.estimators import BaseEstimator

log = logging.getLogger(__name__)

FORMAT = 2
"""Bumped when the artifact layout changes; older artifacts are refitted, not read."""

TAIL = pd.Timedelta(days=1)
"""How much of the training data is fingerprinted to recognise the same series later."""


@dataclass
class StoreOutcome:
    """What the store did for one series, for the forecast's reason and notes."""

    model: BaseEstimator
    reused: bool
    note: str
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Entry:
    model: BaseEstimator
    meta: dict[str, Any]
    tail: pd.Series


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    return str(value)


class ModelStore:
    """Fitted forecasters by series and method, on disk under ``path`` (or in memory)."""

    def __init__(
        self,
        path: str | Path | None = "models",
        max_age_s: float = 86400.0,
        drift_ratio: float = 2.0,
        min_drift_points: int = 12,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.max_age_s = max_age_s
        self.drift_ratio = drift_ratio
        self.min_drift_points = min_drift_points
        self.clock = clock
        self._memory: dict[str, _Entry] = {}
        self.stats = {"reused": 0, "fitted": 0}

    def key(self, series: str, method: str) -> str:
        """File stem for a series and method: readable, and unique through a short hash."""
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", series)[:60] or "series"
        digest = hashlib.sha1(f"{series}\0{method}".encode()).hexdigest()[:10]
        return f"{safe}-{method}-{digest}"

    def _files(self, key: str) -> tuple[Path, Path]:
        assert self.path is not None
        return self.path / f"{key}.joblib", self.path / f"{key}.json"

    def _read(self, key: str) -> tuple[_Entry | None, str]:
        if key in self._memory:
            return self._memory[key], ""
        if self.path is None:
            return None, ""
        model_file, meta_file = self._files(key)
        if not model_file.exists():
            return None, ""
        try:
            meta = json.loads(meta_file.read_text(encoding="utf-8"))
            payload = joblib.load(model_file)
            entry = _Entry(payload["model"], meta, payload["tail"])
        except Exception as exc:  # a corrupt pickle can raise nearly anything
            return None, f"stored model {model_file.name} is unreadable ({type(exc).__name__})"
        return entry, ""

    def _check(self, entry: _Entry, series: str, method: str, y: pd.Series) -> str:
        """Why the stored entry cannot be reused for ``y`` ('' when it can)."""
        meta = entry.meta
        if meta.get("format") != FORMAT or meta.get("tiercast_version") != __version__:
            return (
                f"stored model is from format {meta.get('format')} / tiercast "
                f"{meta.get('tiercast_version')}, this is format {FORMAT} / {__version__}"
            )
        if meta.get("series") != series or meta.get("method") != method:
            return f"stored model belongs to {meta.get('series')!r}/{meta.get('method')!r}"
        if not isinstance(entry.model, BaseEstimator) or not hasattr(
            entry.model, "last_timestamp_"
        ):
            return "stored artifact is not a fitted tiercast estimator"
        end = pd.Timestamp(meta["training_window"]["end"])
        step = pd.Timedelta(seconds=meta["training_window"]["step_s"])
        if len(y) < 2 or y.index[1] - y.index[0] != step:
            return "the history's step differs from the stored model's"
        if y.index[-1] < end:
            return "the history ends before the stored model's training window"
        current = y.reindex(entry.tail.index).to_numpy(dtype=float)
        stored = entry.tail.to_numpy(dtype=float)
        if not np.allclose(current, stored, equal_nan=True, rtol=1e-9, atol=1e-12):
            return "the history no longer matches the stored model's training data"
        age_wall = self.clock() - float(meta["created_at_epoch"])
        age_data = (y.index[-1] - end).total_seconds()
        if max(age_wall, age_data) > self.max_age_s:
            return f"stored model is {max(age_wall, age_data) / 3600:.1f} h old (limit {self.max_age_s / 3600:g} h)"
        live = getattr(entry.model, "live_error", None)
        expected = float(meta.get("backtest", {}).get("backtest_mase") or float("nan"))
        if live is not None and math.isfinite(expected):
            error, count = live(y)
            if count >= self.min_drift_points and error > self.drift_ratio * max(expected, 0.05):
                return (
                    f"drift: live MASE {error:.2f} over {count} new points is over "
                    f"{self.drift_ratio:g}x the backtest MASE {expected:.2f}"
                )
        return ""

    def get_or_fit(
        self, y: pd.Series, method: str, factory: Callable[[], BaseEstimator]
    ) -> StoreOutcome:
        """The model for ``y`` (a regular series): reused when valid, else fitted and stored."""
        series = str(y.name)
        key = self.key(series, method)
        entry, problem = self._read(key)
        if entry is not None:
            problem = self._check(entry, series, method, y)
            if not problem:
                model = copy.deepcopy(entry.model).update(y)
                self.stats["reused"] += 1
                self._memory[key] = entry
                created = entry.meta.get("created_at", "?")
                return StoreOutcome(
                    model, True, f"reused stored model (fitted {created})", entry.meta
                )
        model = factory().fit(y)
        self.stats["fitted"] += 1
        meta = self._meta(series, method, y, model)
        entry = _Entry(copy.deepcopy(model), meta, y[y.index > y.index[-1] - TAIL].copy())
        self._memory[key] = entry
        self._write(key, entry)
        note = f"refitted: {problem}" if problem else "fitted (no stored model)"
        return StoreOutcome(model, False, note, meta)

    def _meta(self, series: str, method: str, y: pd.Series, model: BaseEstimator) -> dict[str, Any]:
        now = self.clock()
        describe = getattr(model, "describe", None)
        return _jsonable(
            {
                "format": FORMAT,
                "series": series,
                "method": method,
                "estimator": model.label(),
                "params": model.get_params(),
                "training_window": {
                    "start": y.index[0].isoformat(),
                    "end": y.index[-1].isoformat(),
                    "step_s": (y.index[1] - y.index[0]).total_seconds(),
                    "points": int(y.notna().sum()),
                },
                "backtest": describe() if describe is not None else {},
                "fallback": getattr(model, "fallback_", None),
                "tiercast_version": __version__,
                "created_at": pd.Timestamp(now, unit="s").isoformat() + "Z",
                "created_at_epoch": now,
            }
        )

    def _write(self, key: str, entry: _Entry) -> None:
        if self.path is None:
            return
        model_file, meta_file = self._files(key)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            tmp = model_file.with_name(model_file.name + ".tmp")
            joblib.dump({"model": entry.model, "tail": entry.tail}, tmp)
            tmp.replace(model_file)
            tmp = meta_file.with_name(meta_file.name + ".tmp")
            tmp.write_text(json.dumps(entry.meta, indent=2, sort_keys=True), encoding="utf-8")
            tmp.replace(meta_file)
        except OSError as exc:
            # A read-only or full volume costs the next run a refit, never this run.
            log.warning("model store: cannot write %s (%s); continuing without it", model_file, exc)

    def metadata(self, series: str, method: str) -> dict[str, Any] | None:
        """The stored metadata of a series, or None."""
        entry, _ = self._read(self.key(series, method))
        return entry.meta if entry is not None else None
