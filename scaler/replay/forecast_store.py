"""Replay forecasts kept on disk between runs (``tiercast simulate --forecast-cache DIR``).

A replay spends nearly all its time forecasting: every simulated hour of the test
period and of the training backtest is one fit of the forecaster. Those forecasts depend
on the trace, the replay's forecasting settings and the forecaster's code, not on the
planner, so a planner change replayed on the same traces can reuse them. One JSON file
per trace holds them, named by a digest of everything they depend on: the signal's
values and timestamps, the forecasting settings of the replay, the lead times' reach and
the forecaster's code and libraries (:func:`forecaster_fingerprint`). A change to any of
these names another file, so a stale forecast is never read. A file that cannot be read
is an empty cache (with a warning), never an error: the replay then forecasts as without
one.
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import forecaster
from forecaster.files import write_output
from forecaster.forecasting import SeriesForecast
from scaler.replay.protocol import ReplaySetup, Trace
from scaler.replay.walkforward import TEST_REACH, ForecastCache

FORMAT = 1
"""Version of the file layout: bump it when the layout changes."""


@cache
def forecaster_fingerprint() -> str:
    """A digest of the forecaster package's source and the numeric libraries' versions: two
    checkouts with the same fingerprint forecast the same."""
    digest = hashlib.sha256(f"format={FORMAT}".encode())
    root = Path(forecaster.__file__).parent
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    for package in ("numpy", "pandas", "scikit-learn", "scipy", "statsmodels", "prophet"):
        try:
            digest.update(f"{package}={metadata.version(package)}".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{package}=absent".encode())
    return digest.hexdigest()[:20]


def store_path(folder: Path, trace: Trace, setups: Iterable[ReplaySetup]) -> Path:
    """The file of ``trace``'s forecasts under ``folder`` for replays at ``setups``."""
    setups = list(setups)
    digest = hashlib.sha256(forecaster_fingerprint().encode())
    signal = trace.signal
    digest.update(pd.DatetimeIndex(signal.index).as_unit("ns").asi8.tobytes())
    digest.update(signal.to_numpy(dtype=float).tobytes())
    settings = sorted(
        {
            (
                s.lookback_s,
                s.reforecast_s,
                s.horizon_s,
                s.quantile,
                s.growth_backtest_s,
                s.growth_refresh_s,
                max(s.lead_time_s, int(TEST_REACH.total_seconds())),
                trace.test_start,
                trace.hold,
            )
            for s in setups
        }
    )
    digest.update(json.dumps(settings).encode())
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(signal.name))[:80]
    return folder / f"{stem or 'trace'}-{digest.hexdigest()[:20]}.json"


@contextmanager
def kept_forecasts(
    folder: str | None, trace: Trace, setups: Iterable[ReplaySetup]
) -> Iterator[ForecastCache]:
    """The forecast cache of replays of ``trace`` at ``setups``: read from ``folder`` and
    written back once the block has added to it (a plain empty cache where ``folder`` is
    None)."""
    if not folder:
        yield {}
        return
    path = store_path(Path(folder), trace, setups)
    forecasts = load_forecasts(path)
    known = len(forecasts)
    yield forecasts
    if len(forecasts) > known:
        save_forecasts(forecasts, path)


def load_forecasts(path: Path) -> ForecastCache:
    """The forecasts stored at ``path`` (empty where there is no file or it is unreadable)."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
        return {
            (e["method"], e["kind"], pd.Timestamp(e["at"])): _forecast(e["forecast"])
            for e in data["forecasts"]
        }
    except (OSError, ValueError, KeyError, TypeError) as exc:
        warnings.warn(
            f"--forecast-cache: {path} is unreadable ({exc}); forecasting afresh",
            stacklevel=2,
        )
        return {}


def save_forecasts(cache: ForecastCache, path: Path) -> None:
    """Write ``cache`` to ``path``, atomically; the file is tiercast's own, so a link or
    special file planted at its name is refused (one line naming ``--forecast-cache``)."""
    entries = [
        {"method": m, "kind": k, "at": at.isoformat(), "forecast": _record(fc)}
        for (m, k, at), fc in sorted(cache.items(), key=lambda kv: kv[0])
    ]
    text = json.dumps({"format": FORMAT, "forecasts": entries}, separators=(",", ":"))
    write_output(path, text, "--forecast-cache", parents=True, owned=True)


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _record(fc: SeriesForecast) -> dict[str, object]:
    frame = fc.frame
    return {
        "name": fc.name,
        "index": [int(v) for v in pd.DatetimeIndex(frame.index).as_unit("ns").asi8],
        "tz": str(pd.DatetimeIndex(frame.index).tz or ""),
        "index_name": frame.index.name,
        "columns": [str(c) for c in frame.columns],
        "values": [[_num(float(v)) for v in row] for row in frame.to_numpy(dtype=float)],
        "estimator": fc.estimator,
        "reason": fc.reason,
        "step_s": fc.step.total_seconds(),
        "last_timestamp": fc.last_timestamp.isoformat(),
        "last_value": _num(fc.last_value),
        "recent_max": _num(fc.recent_max),
        "n_observed": fc.n_observed,
        "notes": list(fc.notes),
    }


def _nan(x: float | None) -> float:
    return math.nan if x is None else float(x)


def _forecast(r: dict[str, Any]) -> SeriesForecast:
    index = pd.DatetimeIndex(np.asarray(r["index"], dtype="int64").astype("datetime64[ns]"))
    if r["tz"]:
        index = index.tz_localize("UTC").tz_convert(str(r["tz"]))
    index.name = r.get("index_name")
    values = np.array([[_nan(v) for v in row] for row in r["values"]], dtype=float)
    columns = [str(c) for c in r["columns"]]
    frame = pd.DataFrame(values.reshape(len(index), len(columns)), index=index, columns=columns)
    return SeriesForecast(
        name=str(r["name"]),
        frame=frame,
        estimator=str(r["estimator"]),
        reason=str(r["reason"]),
        step=pd.Timedelta(seconds=float(r["step_s"])),
        last_timestamp=pd.Timestamp(str(r["last_timestamp"])),
        last_value=_nan(r["last_value"]),
        recent_max=_nan(r["recent_max"]),
        n_observed=int(r["n_observed"]),
        notes=[str(n) for n in r["notes"]],
    )
