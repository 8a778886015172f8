"""The model store: one fitted forecaster per series, reused between runs.

Selecting and calibrating a model costs a backtest; forecasting from a selected
model costs almost nothing. The store keeps the fitted model of each series (an
``.npz`` artifact, see :mod:`forecaster.artifacts`) with a JSON sidecar of metadata (estimator, parameters, training
window, backtest scores, tiercast version, creation time), and on the next run

* **reuses** it when it is still good: the model is moved onto the new data
  with ``update`` (cheap models refit their state, Prophet keeps its fit), so
  the selection and the quantile calibration carry over;
* **refits** it when it is due: older than ``max_age_s`` (by the wall clock or
  by how far the data moved past its training window), or drifted (its live
  error on the data that arrived since training is over ``drift_ratio`` times
  its backtest error), or forgotten by :meth:`ModelStore.evict` (the cycle does
  so when its recorded forecasts drifted from what happened);
* **replaces** an artifact that cannot be trusted: unreadable, written by
  another format or tiercast version, for another series or method, or whose
  training data does not match the history now given. These never fail a run:
  the model is refitted and the reason recorded.

Reading never executes code from the volume: the artifact format has no code
in it, pickled parts (scikit-learn trees) load only when their HMAC verifies
with the store's signing key (``model_store.signing_key_file``), and every
sidecar field is type-checked before use, so a sidecar that is valid JSON of
the wrong shape is replaced, not fatal every cycle. Files of the earlier
``.joblib`` format are never opened.

Nor does reading allocate what a file claims: an archive whose members would inflate
past :data:`MAX_ARTIFACT_BYTES`, or whose array headers declare more than that, is
refused from its zip directory and ``.npy`` headers alone (:func:`check_archive`), and
only regular files are read, never through a link. Writing goes through a temporary
file created exclusively under a random name and renamed over the entry
(:func:`forecaster.files.write_atomic` with ``owned=True``), so a link planted at a
temporary or final name is never written through.

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
import os
import re
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from forecaster import __version__
from forecaster.artifacts import ArtifactError, Unpersistable, UntrustedArtifact, dumps, loads
from forecaster.errors import BadInputError
from forecaster.estimators import BaseEstimator
from forecaster.files import open_regular, read_bounded, write_atomic

log = logging.getLogger(__name__)

FORMAT = 3
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


MAX_SIDECAR_BYTES = 1024 * 1024
"""A sidecar larger than this is not read (a real one is a few kilobytes)."""

MAX_ARTIFACT_BYTES = 256 * 1024 * 1024
"""Most bytes an artifact may hold, as a file and as the arrays its members declare
(uncompressed, all together); a larger one is refused unread and refitted. A real one is
about 150 KB; the largest a series may bring (500,000 points) is a few tens of MB."""


class RefusedArtifact(ArtifactError):
    """The artifact is over :data:`MAX_ARTIFACT_BYTES`, or not a regular file (the store refits)."""


def check_archive(path: Path) -> None:
    """Refuse an ``.npz`` whose arrays would take more than :data:`MAX_ARTIFACT_BYTES` to load.

    Only the zip directory and each member's ``.npy`` header are read, never the data: a
    small compressed member can declare a shape of terabytes, and numpy allocates the
    declared shape before it reads a byte. Each member's uncompressed size (which
    :mod:`zipfile` enforces while reading) and each header's shape times item size count
    against the bound; a header larger than its member is forged. Raises
    :class:`RefusedArtifact` or :class:`ArtifactError`. Links and special files are
    refused too: the store owns its names.
    """
    try:
        with (
            open_regular(path, MAX_ARTIFACT_BYTES, "stored model", follow=False) as handle,
            zipfile.ZipFile(handle) as archive,
        ):
            members = archive.infolist()
            total = sum(info.file_size for info in members)
            if total > MAX_ARTIFACT_BYTES:
                raise RefusedArtifact(
                    f"its members inflate to {total} bytes; at most {MAX_ARTIFACT_BYTES} are read"
                )
            for info in members:
                with archive.open(info) as member:
                    declared = _declared_bytes(member, info.filename)
                if declared > info.file_size:
                    raise RefusedArtifact(
                        f"member {info.filename[:40]!r} declares {declared} bytes of array "
                        f"in a {info.file_size}-byte member"
                    )
    except BadInputError as exc:
        raise RefusedArtifact(str(exc)) from exc
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
        raise ArtifactError(f"not a readable array archive ({type(exc).__name__})") from exc


def _declared_bytes(member: Any, name: str) -> int:
    """The bytes the ``.npy`` header at the start of ``member`` declares (shape times item size)."""
    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(member)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(member)
    else:  # tiercast writes 1.0; 3.0 is only for structured field names it never uses
        raise ArtifactError(f"member {name[:40]!r} is .npy version {version}")
    if any(n < 0 for n in shape):
        raise ArtifactError(f"member {name[:40]!r} declares a negative shape")
    return math.prod(shape) * dtype.itemsize


def _not_a_folder(path: Path) -> str:
    """Why ``path`` cannot hold the store ('' when it is a folder or can be made one).

    The nearest part of ``path`` that exists must be a folder: a regular file, a device,
    a dangling link there would fail every write.
    """
    existing = path
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if existing.is_dir():
        return ""
    what = "is not a folder" if existing == path else "lies under something that is not a folder"
    return f"model_store.path {str(path)!r} {what}"


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def sidecar_problem(meta: Any) -> str:
    """Why a sidecar's fields cannot be used ('' when every field has the type the store reads)."""
    if not isinstance(meta, dict):
        return f"expected a JSON object, got {type(meta).__name__}"
    for name, kind in (
        ("format", int),
        ("series", str),
        ("method", str),
        ("tiercast_version", str),
    ):
        if not isinstance(meta.get(name), kind) or isinstance(meta.get(name), bool):
            return f"field {name!r} is not a {kind.__name__}"
    if not _number(meta.get("created_at_epoch")):
        return "field 'created_at_epoch' is not a finite number"
    window = meta.get("training_window")
    if not isinstance(window, dict):
        return "field 'training_window' is not an object"
    if not _number(window.get("step_s")) or window["step_s"] <= 0:
        return "field 'training_window.step_s' is not a positive number"
    for name in ("start", "end"):
        try:
            pd.Timestamp(str(window.get(name)))
        except (ValueError, TypeError, OverflowError):
            return f"field 'training_window.{name}' is not a timestamp"
        if not isinstance(window.get(name), str):
            return f"field 'training_window.{name}' is not a timestamp"
    backtest = meta.get("backtest", {})
    if not isinstance(backtest, dict):
        return "field 'backtest' is not an object"
    mase = backtest.get("backtest_mase")
    if mase is not None and (not isinstance(mase, int | float) or isinstance(mase, bool)):
        return "field 'backtest.backtest_mase' is not a number"
    if not isinstance(meta.get("created_at", ""), str):
        return "field 'created_at' is not a string"
    return ""


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
        signing_key: bytes | None = None,
    ) -> None:
        self.path = Path(path) if path is not None else None
        problem = _not_a_folder(self.path) if self.path is not None else ""
        if problem:
            # The store is a cache: without it every cycle refits, which costs time, never
            # capacity. One warning here, not one per series and cycle.
            log.warning("%s; models are refitted every cycle and not stored", problem)
            self.path = None
        self.max_age_s = max_age_s
        self.drift_ratio = drift_ratio
        self.min_drift_points = min_drift_points
        self.clock = clock
        self.signing_key = signing_key
        self._memory: dict[str, _Entry] = {}
        self.stats = {"reused": 0, "fitted": 0}

    def key(self, series: str, method: str) -> str:
        """File stem for a series and method: readable, and unique through a short hash."""
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", series)[:60] or "series"
        digest = hashlib.sha1(f"{series}\0{method}".encode()).hexdigest()[:10]
        return f"{safe}-{method}-{digest}"

    def _files(self, key: str) -> tuple[Path, Path]:
        assert self.path is not None
        return self.path / f"{key}.npz", self.path / f"{key}.json"

    def _read(self, key: str) -> tuple[_Entry | None, str]:
        if key in self._memory:
            return self._memory[key], ""
        if self.path is None:
            return None, ""
        model_file, meta_file = self._files(key)
        if not os.path.lexists(model_file):
            return None, ""
        try:
            raw = read_bounded(meta_file, MAX_SIDECAR_BYTES, "sidecar", follow=False)
            meta = json.loads(raw.decode("utf-8"))
        except BadInputError as exc:  # a link, a special file, too large, missing
            log.warning("model store: %s; refitting", exc)
            return None, f"sidecar {meta_file.name} refused: {exc}"
        except (OSError, ValueError, RecursionError) as exc:
            return None, f"sidecar {meta_file.name} is unreadable ({type(exc).__name__})"
        problem = sidecar_problem(meta)
        if problem:
            return None, f"sidecar {meta_file.name} is malformed: {problem}"
        try:
            check_archive(model_file)  # before numpy allocates what the archive declares
            payload = loads(model_file, key, self.signing_key)
        except (UntrustedArtifact, RefusedArtifact) as exc:
            log.warning("model store: refused %s: %s; refitting", model_file.name, exc)
            return None, f"stored model {model_file.name} refused: {exc}"
        except ArtifactError as exc:
            return None, f"stored model {model_file.name} is unreadable ({exc})"
        except Exception as exc:  # a malformed (code-free) description can raise many things
            return None, f"stored model {model_file.name} is unreadable ({type(exc).__name__})"
        if not isinstance(payload, dict) or not isinstance(payload.get("tail"), pd.Series):
            return None, f"stored model {model_file.name} has no training tail"
        model = payload.get("model")
        if not isinstance(model, BaseEstimator):
            return None, f"stored model {model_file.name} is not a tiercast estimator"
        return _Entry(model, meta, payload["tail"]), ""

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
            model = None
            try:
                problem = self._check(entry, series, method, y)
                if not problem:
                    model = copy.deepcopy(entry.model).update(y)
            except Exception as exc:  # an artifact that reads but does not work: refit it
                problem = f"stored model cannot be used ({type(exc).__name__})"
            if model is not None:
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
            blob = dumps({"model": entry.model, "tail": entry.tail}, key, self.signing_key)
        except Unpersistable as exc:
            log.info("model store: %s not written: %s", model_file.name, exc)
            # An older artifact left in place would be read (and refused) every cycle.
            for stale in (model_file, meta_file):
                stale.unlink(missing_ok=True)
            return
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            # Random, exclusively created temporaries; a link at either name is refused.
            write_atomic(model_file, blob, owned=True)
            write_atomic(meta_file, json.dumps(entry.meta, indent=2, sort_keys=True), owned=True)
        except OSError as exc:
            # A read-only or full volume costs the next run a refit, never this run.
            log.warning("model store: cannot write %s (%s); continuing without it", model_file, exc)

    def evict(self, series: str, method: str) -> bool:
        """Forget the stored model of ``series`` (memory and files), so that the next
        :meth:`get_or_fit` refits it ahead of its age limit; whether one was stored."""
        key = self.key(series, method)
        had = self._memory.pop(key, None) is not None
        if self.path is not None:
            for f in self._files(key):
                if f.is_file() and not f.is_symlink():
                    f.unlink(missing_ok=True)
                    had = True
        return had

    def metadata(self, series: str, method: str) -> dict[str, Any] | None:
        """The stored metadata of a series, or None."""
        entry, _ = self._read(self.key(series, method))
        return entry.meta if entry is not None else None
