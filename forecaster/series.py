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
is an error naming the file, the line and the column. A negative value is dropped
as a bad sample (demand is never below zero; the count is logged), as the hygiene
policy does for collected series (:mod:`forecaster.hygiene`).

Bounds, each a one-line :class:`DataError`: at most :data:`MAX_HISTORY_BYTES` per
file, :data:`MAX_ROWS` rows and :data:`MAX_SERIES` series; timestamps between
:data:`EARLIEST` and :data:`LATEST`; a step of at least one second.
:func:`check_forecast_size` bounds what one series may ask of an estimator.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pandas as pd

from forecaster.errors import DataError
from forecaster.files import open_regular

History = dict[str, pd.Series]

log = logging.getLogger(__name__)

MAX_HISTORY_BYTES = 512 * 1024 * 1024
"""Largest history file read (about 10 million rows of ``timestamp,value``)."""
MAX_ROWS = 5_000_000
"""Most rows read from one file."""
MAX_LINE_BYTES = 64 * 1024
"""Longest line read, header included (a ``timestamp,series,value`` row is under 300 bytes;
a line of megabytes, or a header of a million columns, takes pandas minutes)."""
_SCAN_CHUNK_BYTES = 1024 * 1024
"""How much of a history file is scanned for line lengths at a time."""
MAX_CELL_CHARS = 64
"""Longest timestamp or value cell read (an ISO timestamp with nanoseconds is 35)."""
MAX_VALUE = 1e15
"""Larger magnitudes are dropped as bad samples: no demand signal reaches it, and sums of
such values overflow to infinity in the planner."""
MAX_SERIES = 2000
"""Most series in one long-format file (a config holds at most 2,000 signals)."""
EARLIEST = pd.Timestamp("1970-01-01")
"""Oldest timestamp accepted: before the Unix epoch no metric system recorded anything."""
LATEST = pd.Timestamp("2200-01-01")
"""Newest timestamp accepted; later ones overflow nanosecond arithmetic downstream."""
MIN_STEP = pd.Timedelta(seconds=1)
"""Finest sampling step (Prometheus' own resolution is one second at best in practice)."""
MAX_FORECAST_POINTS = 500_000
"""Most history points one series may bring to an estimator (14 days at 2.5 s)."""
MAX_DURATION_S = 10 * 366 * 86400.0
"""Longest duration :func:`parse_duration` reads (ten years; longer ones overflow timestamps)."""
MAX_HORIZON_STEPS = 200_000
"""Most steps one forecast may cover (a day at 1 s is 86,400)."""

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
    """Read a CSV export into a history; raise :class:`DataError` on bad content.

    Only a regular file is read (a FIFO or a device is refused, never waited on), of at
    most :data:`MAX_HISTORY_BYTES` and with no line over :data:`MAX_LINE_BYTES`, both
    checked before pandas parses anything.
    """
    path = Path(path)
    try:
        with open_regular(path, MAX_HISTORY_BYTES, "history file", DataError) as handle:
            _check_lines(handle, path)
            handle.seek(0)
            frame = pd.read_csv(handle, dtype=str, keep_default_na=False, nrows=MAX_ROWS + 1)
    except DataError:
        raise  # already one line naming the file (a DataError is also a ValueError)
    except pd.errors.EmptyDataError as exc:
        raise DataError(f"history file {str(path)!r} is empty") from exc
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise DataError(f"history file {str(path)!r} is not a readable CSV: {first}") from exc
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
    if len(frame) > MAX_ROWS:
        raise DataError(
            f"history file {str(path)!r} has more than {MAX_ROWS} rows; "
            "aggregate it to a coarser step"
        )

    for col, what in ((tcol, "an ISO-8601 timestamp"), (vcol, "a number or empty")):
        # A 10 MB cell would take minutes to parse as a number or a date.
        too_long = frame[col].str.len() > MAX_CELL_CHARS
        if too_long.any():
            i = int(np.flatnonzero(too_long.to_numpy())[0])
            raise DataError(
                f"history file {str(path)!r} line {i + 2}: column {col!r} has "
                f"{len(frame[col].iloc[i])} characters, expected {what}"
            )
    stamps = pd.to_datetime(frame[tcol], errors="coerce", utc=True, format="mixed")
    bad_t = stamps.isna()
    if bad_t.any():
        i = int(np.flatnonzero(bad_t.to_numpy())[0])
        raise DataError(
            f"history file {str(path)!r} line {i + 2}: column {tcol!r} has "
            f"{_shown(frame[tcol].iloc[i])}, expected an ISO-8601 timestamp"
        )
    outside = (stamps < EARLIEST.tz_localize("UTC")) | (stamps >= LATEST.tz_localize("UTC"))
    if outside.any():
        i = int(np.flatnonzero(outside.to_numpy())[0])
        raise DataError(
            f"history file {str(path)!r} line {i + 2}: column {tcol!r} has "
            f"{_shown(frame[tcol].iloc[i])}, expected a time between {EARLIEST.year} and "
            f"{LATEST.year}"
        )
    raw = frame[vcol].str.strip()
    values = pd.to_numeric(raw.replace({"": "nan"}), errors="coerce")
    bad_v = values.isna() & ~raw.str.lower().isin(["", "nan", "na", "null"])
    if bad_v.any():
        i = int(np.flatnonzero(bad_v.to_numpy())[0])
        raise DataError(
            f"history file {str(path)!r} line {i + 2}: column {vcol!r} has "
            f"{_shown(frame[vcol].iloc[i])}, expected a number or empty"
        )
    negative = (values < 0) | (values.abs() > MAX_VALUE)
    if negative.any():
        log.warning(
            "history file %s: %d negative or absurd (> 1e15) value(s) dropped as bad samples "
            "(first on line %d)",
            path,
            int(negative.sum()),
            int(np.flatnonzero(negative.to_numpy())[0]) + 2,
        )
        values = values.mask(negative)
    index = pd.DatetimeIndex(stamps).tz_convert(None)
    data = pd.DataFrame({"t": index, "v": values.to_numpy(dtype=float)})
    if scol is None:
        data["s"] = path.stem
    else:
        data["s"] = frame[scol].to_numpy()
        count = data["s"].nunique()
        if count > MAX_SERIES:
            raise DataError(
                f"history file {str(path)!r} has {count} series; at most {MAX_SERIES} are read"
            )
    history: History = {}
    for name, group in data.groupby("s", sort=True):
        series = pd.Series(group["v"].to_numpy(), index=pd.DatetimeIndex(group["t"]), dtype=float)
        history[str(name)] = cleaned = clean_series(series, name=str(name))
        _check_step(cleaned, f"history file {str(path)!r}")
    return history


def _check_lines(handle: BinaryIO, path: Path) -> None:
    """Refuse (one line) a file with a line over :data:`MAX_LINE_BYTES` or that grew past the bound.

    Scanned a chunk at a time, so a single line of gigabytes is refused after reading
    about :data:`MAX_LINE_BYTES`, never held whole in memory.
    """
    line = 1  # the number of the line the scan is in
    run = 0  # bytes of that line seen so far
    total = 0
    while chunk := handle.read(_SCAN_CHUNK_BYTES):
        total += len(chunk)
        if total > MAX_HISTORY_BYTES:
            raise DataError(
                f"history file {str(path)!r} grew past {MAX_HISTORY_BYTES} bytes while read"
            )
        ends = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == ord("\n"))
        # Lengths of the lines that end in this chunk, newline excluded, then the open one.
        lengths = np.diff(ends, prepend=-1) - 1
        if lengths.size:
            lengths[0] += run
            run = len(chunk) - int(ends[-1]) - 1
        else:
            run += len(chunk)
        over = np.flatnonzero(lengths > MAX_LINE_BYTES)
        if over.size or run > MAX_LINE_BYTES:
            at = line + int(over[0]) if over.size else line + lengths.size
            raise DataError(
                f"history file {str(path)!r} line {at}: over {MAX_LINE_BYTES} bytes; "
                "expected rows of timestamp,value or timestamp,series,value"
            )
        line += lengths.size


def _shown(value: object, limit: int = 80) -> str:
    text = " ".join(repr(str(value)[: limit + 1]).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_step(series: pd.Series, where: str) -> None:
    if len(series.index) < 2:
        return
    deltas = np.diff(pd.DatetimeIndex(series.index).as_unit("ns").asi8)
    finest = pd.Timedelta(int(deltas.min()), unit="ns") if len(deltas) else MIN_STEP
    if finest < MIN_STEP:
        raise DataError(
            f"{where}: series {_shown(series.name)} has samples {finest} apart; "
            f"expected a step of at least {MIN_STEP.total_seconds():g} s (aggregate it)"
        )


def check_forecast_size(y: pd.Series, horizon: pd.Timedelta) -> None:
    """Refuse (one line) a series or horizon too large to forecast in bounded time and memory.

    Checked on the raw series, before it is put on a grid: a millisecond step or a
    span of centuries would make the grid itself the problem.
    """
    name = _shown(y.name)
    index = pd.DatetimeIndex(y.index)
    if index.tz is not None:
        index = index.tz_convert(None)
    if len(index) == 0:
        return
    if index.min() < EARLIEST or index.max() >= LATEST:
        raise DataError(
            f"series {name}: timestamps {index.min()} .. {index.max()} are outside "
            f"{EARLIEST.year}-{LATEST.year}"
        )
    if len(index) < 2:
        return
    step = infer_step(pd.Series(np.zeros(len(index)), index=index.sort_values(), name=y.name))
    if step < MIN_STEP:
        raise DataError(
            f"series {name}: step {step} is under {MIN_STEP.total_seconds():g} s; aggregate it"
        )
    points = (index.max() - index.min()) / step + 1
    if points > MAX_FORECAST_POINTS:
        raise DataError(
            f"series {name}: {points:.0f} points at a {step} step; at most {MAX_FORECAST_POINTS} "
            "are forecast: aggregate it to a coarser step or shorten the window"
        )
    steps = horizon / step
    if steps > MAX_HORIZON_STEPS:
        raise DataError(
            f"series {name}: a {horizon} horizon is {steps:.0f} steps of {step}; at most "
            f"{MAX_HORIZON_STEPS} are forecast: use a coarser step or a shorter horizon"
        )


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
        if not text > 0 or not math.isfinite(text) or text > MAX_DURATION_S:
            raise DataError(
                f"duration {_shown(text)} must be positive and at most {MAX_DURATION_S:g} s"
            )
        return pd.Timedelta(seconds=float(text))
    raw = str(text)[:100].strip().lower()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    try:
        seconds = float(raw[:-1]) * units[raw[-1]] if raw and raw[-1] in units else float(raw)
    except ValueError as exc:
        raise DataError(
            f"duration {_shown(text)} is not understood; expected e.g. 300, '15m', '24h', '90d'"
        ) from exc
    if not math.isfinite(seconds) or seconds <= 0:
        raise DataError(f"duration {_shown(text)} must be positive")
    if seconds > MAX_DURATION_S:
        raise DataError(f"duration {_shown(text)} is over {MAX_DURATION_S:g} s (ten years)")
    return pd.Timedelta(seconds=seconds)
