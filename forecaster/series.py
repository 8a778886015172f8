"""History as values: reading CSV exports and putting a series on a regular grid.

A *series* here is a ``pandas.Series`` of floats indexed by a sorted, unique,
timezone-naive ``DatetimeIndex`` named ``timestamp`` (UTC is assumed). A *history*
is a ``dict`` from series name to series. Everything downstream (estimators,
planner, replay) takes these shapes.

Accepted CSV shapes:

* wide-of-one: ``timestamp,value`` (the series is named after the file stem);
* long: ``timestamp,series,value`` (one series per distinct ``series``);
* ``ds``/``y``/``unique_id`` are accepted as aliases, as exported by forecasting
  tools that follow the statsforecast convention.

An empty ``value`` is a gap (NaN), kept as such; anything else that does not parse
is an error naming the file, the line and the column.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.errors import DataError

History = dict[str, pd.Series]

_TIME_ALIASES = ("timestamp", "ds", "time")
_VALUE_ALIASES = ("value", "y")
_SERIES_ALIASES = ("series", "unique_id", "name")


def _pick(columns: list[str], aliases: tuple[str, ...]) -> str | None:
    lowered = {c.strip().lower(): c for c in columns}
    for alias in aliases:
        if alias in lowered:
            return lowered[alias]
    return None


def read_history_csv(path: str | Path) -> History:
    """Read a CSV export into a history; raise :class:`DataError` on bad content."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"history file {str(path)!r} does not exist")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"history file {str(path)!r} is not a readable CSV: {first}") from exc
    except pd.errors.EmptyDataError as exc:
        raise DataError(f"history file {str(path)!r} is empty") from exc
    columns = list(frame.columns)
    tcol = _pick(columns, _TIME_ALIASES)
    vcol = _pick(columns, _VALUE_ALIASES)
    scol = _pick(columns, _SERIES_ALIASES)
    if tcol is None or vcol is None:
        raise DataError(
            f"history file {str(path)!r}: expected columns 'timestamp,value' "
            f"(or 'timestamp,series,value'), got {','.join(columns)!r}"
        )
    if frame.empty:
        raise DataError(f"history file {str(path)!r} has a header but no rows")

    stamps = pd.to_datetime(frame[tcol], errors="coerce", utc=True, format="mixed")
    bad_t = stamps.isna()
    if bad_t.any():
        i = int(np.flatnonzero(bad_t.to_numpy())[0])
        raise DataError(
            f"history file {str(path)!r} line {i + 2}: column {tcol!r} has "
            f"{frame[tcol].iloc[i]!r}, expected an ISO-8601 timestamp"
        )
    raw = frame[vcol].str.strip()
    values = pd.to_numeric(raw.replace({"": "nan"}), errors="coerce")
    bad_v = values.isna() & ~raw.str.lower().isin(["", "nan", "na", "null"])
    if bad_v.any():
        i = int(np.flatnonzero(bad_v.to_numpy())[0])
        raise DataError(
            f"history file {str(path)!r} line {i + 2}: column {vcol!r} has "
            f"{frame[vcol].iloc[i]!r}, expected a number or empty"
        )
    index = pd.DatetimeIndex(stamps).tz_convert(None)
    data = pd.DataFrame({"t": index, "v": values.to_numpy(dtype=float)})
    if scol is None:
        data["s"] = path.stem
    else:
        data["s"] = frame[scol].to_numpy()
    history: History = {}
    for name, group in data.groupby("s", sort=True):
        series = pd.Series(group["v"].to_numpy(), index=pd.DatetimeIndex(group["t"]), dtype=float)
        history[str(name)] = clean_series(series, name=str(name))
    return history


def clean_series(series: pd.Series, name: str = "value") -> pd.Series:
    """Sort, drop duplicate timestamps (keep the last), turn +-Inf into gaps."""
    s = series.astype(float).copy()
    s.index = pd.DatetimeIndex(s.index)
    if s.index.tz is not None:
        s.index = s.index.tz_convert(None)
    s = s.replace([np.inf, -np.inf], np.nan)
    s = s[~s.index.duplicated(keep="last")].sort_index()
    s.index.name = "timestamp"
    s.name = name
    return s


def infer_step(series: pd.Series) -> pd.Timedelta:
    """The series' sampling step: the most common spacing between samples."""
    if len(series.index) < 2:
        raise DataError(
            f"series {series.name!r} has {len(series.index)} sample(s), need at least 2"
        )
    deltas = pd.Series(np.diff(pd.DatetimeIndex(series.index).as_unit("ns").asi8))
    deltas = deltas[deltas > 0]
    if deltas.empty:
        raise DataError(f"series {series.name!r} has no two distinct timestamps")
    return pd.Timedelta(int(deltas.mode().iloc[0]), unit="ns")


def regularize(series: pd.Series, step: pd.Timedelta | None = None) -> pd.Series:
    """Put ``series`` on a regular grid of ``step`` (mean within each bucket).

    Buckets with no sample become NaN; a coarser source is not up-sampled by
    interpolation here (that is the hygiene policy's job).
    """
    s = clean_series(series, name=str(series.name))
    if step is None:
        step = infer_step(s)
    out = s.resample(step, origin="epoch").mean()
    out.index.name = "timestamp"
    out.name = s.name
    return out


def steps_per(period: pd.Timedelta, step: pd.Timedelta) -> int:
    """How many ``step`` fit in ``period``, at least 1."""
    return max(1, math.floor(period / step))


def parse_duration(text: str | int | float) -> pd.Timedelta:
    """Parse ``90``, ``"90s"``, ``"15m"``, ``"24h"``, ``"7d"`` or ``"2w"`` into a Timedelta."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        if text <= 0:
            raise DataError(f"duration {text!r} must be positive")
        return pd.Timedelta(seconds=float(text))
    raw = str(text).strip().lower()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    try:
        seconds = float(raw[:-1]) * units[raw[-1]] if raw and raw[-1] in units else float(raw)
    except ValueError as exc:
        raise DataError(
            f"duration {text!r} is not understood; expected e.g. 300, '15m', '24h', '90d'"
        ) from exc
    if not math.isfinite(seconds) or seconds <= 0:
        raise DataError(f"duration {text!r} must be positive")
    return pd.Timedelta(seconds=seconds)
