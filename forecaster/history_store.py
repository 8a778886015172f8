"""tiercast's own history of the signals it forecasts, kept beyond Prometheus' retention.

Prometheus keeps 15 days by default (``--storage.tsdb.retention.time``), and a forecast
that sees only those misses the weekly and monthly shape a longer history shows. The store
keeps every signal a cycle reads, downsampled to the planning step (the mean of each
step), in daily Parquet partitions::

    <root>/<signal key>/<YYYY-MM-DD>.parquet     columns: timestamp (UTC), value

A cycle appends what it read (:meth:`HistoryStore.append`: each day it touched is merged
with what the store held for it and rewritten whole, atomically); the forecast reads the
store and Prometheus together (:meth:`HistoryStore.extend`): the store only before the
first sample Prometheus returned, Prometheus from there on. Partitions older than
``max_days`` are removed when a cycle appends.

Nothing here may stop a cycle: an unreadable or corrupt partition is set aside
(``DAY.parquet.bad``) with a warning and the day is rebuilt from what the cycle reads
(less history, never a failed plan); a partition's Parquet footer is checked (rows,
decompressed size, columns) before any page is read, so a small file that inflates to
gigabytes is refused unread. A failed write is logged and the cycle goes on. Every partition is a file tiercast created: links and special files in the store are
refused, never written through or replaced.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.documents import set_aside
from forecaster.errors import BadInputError
from forecaster.files import read_bounded, write_atomic

log = logging.getLogger(__name__)

MAX_PARTITION_BYTES = 16 * 1024 * 1024
"""A day of one signal at a 1-second step is under 2 MB; anything larger is not ours."""
MAX_PARTITION_ROWS = 2 * 86_400
"""A day at a 1-second step, with room for a repeated stamp; more rows are not ours."""
MAX_PARTITION_INFLATED = 64 * 1024 * 1024
"""Most bytes a partition's two columns may decompress to (a full day is about 1.4 MB)."""
COLUMNS = ("timestamp", "value")
DEFAULT_MAX_DAYS = 400


def signal_key(name: str) -> str:
    """A folder name for signal ``name``: its readable part and a hash (names may hold any
    character, and two names must never share a folder)."""
    readable = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:60].strip(".") or "signal"
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:12]
    return f"{readable}-{digest}"


class HistoryStore:
    """Signals by name, at ``step``, in daily Parquet partitions under ``root``."""

    def __init__(
        self, root: str | Path, step: pd.Timedelta, max_days: int = DEFAULT_MAX_DAYS
    ) -> None:
        if not step > pd.Timedelta(0):
            raise BadInputError(f"history store: step must be positive; got {step}")
        if not 1 <= max_days <= 100_000:
            raise BadInputError(f"history store: max_days must be 1 to 100000; got {max_days}")
        self.root = Path(root)
        self.step = step
        self.max_days = max_days

    # ------------------------------------------------------------------ writing

    def append(self, history: Mapping[str, pd.Series], now: pd.Timestamp | None = None) -> int:
        """Merge ``history`` into the store (its values win where both have a step); the
        points now stored for the days it touched. Old partitions are pruned. Never raises
        for a write that fails: it is logged, and the cycle goes on."""
        written = 0
        for name, series in history.items():
            try:
                written += self._append_one(str(name), series)
                self._prune(str(name), now)
            except (OSError, ValueError, BadInputError) as exc:
                log.warning("history store: could not keep %r: %s", str(name), str(exc)[:200])
        return written

    def _append_one(self, name: str, series: pd.Series) -> int:
        fresh = self._on_step(series)
        if fresh.empty:
            return 0
        folder = self.root / signal_key(name)
        written = 0
        days = pd.DatetimeIndex(fresh.index).normalize()
        for day in days.unique():
            part = fresh[days == day]
            held = self._read_partition(folder / _partition_name(day))
            merged = part.combine_first(held) if held is not None else part
            self._write_partition(folder / _partition_name(day), merged)
            written += len(merged)
        return written

    def _write_partition(self, path: Path, values: pd.Series) -> None:
        frame = pd.DataFrame(
            {"timestamp": pd.DatetimeIndex(values.index).as_unit("ns"), "value": values.to_numpy()}
        )
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        # The folder per signal is the store's own: a link planted there is refused.
        write_atomic(path, buffer.getvalue(), parents=True, owned=True, owned_folder=True)

    def _prune(self, name: str, now: pd.Timestamp | None) -> None:
        folder = self.root / signal_key(name)
        if not folder.is_dir():
            return
        newest = _naive(now) if now is not None else None
        parts = sorted(folder.glob("*.parquet"))
        if newest is None and parts:
            newest = _day_of(parts[-1])
        if newest is None:
            return
        cutoff = newest.normalize() - pd.Timedelta(days=self.max_days)
        for p in parts:
            day = _day_of(p)
            if day is not None and day < cutoff and p.is_file() and not p.is_symlink():
                p.unlink()

    # ------------------------------------------------------------------ reading

    def read(
        self, name: str, since: pd.Timestamp | None = None, before: pd.Timestamp | None = None
    ) -> pd.Series:
        """What the store holds for ``name`` (from ``since``; only the days that start before
        ``before``), on its step; empty if nothing."""
        folder = self.root / signal_key(name)
        pieces = []
        if folder.is_dir():
            for p in sorted(folder.glob("*.parquet")):
                day = _day_of(p)
                if day is None or (since is not None and day < _naive(since).normalize()):
                    continue
                if before is not None and day >= _naive(before):
                    continue  # a day the caller has from elsewhere: not read at all
                held = self._read_partition(p)
                if held is not None:
                    pieces.append(held)
        if not pieces:
            return pd.Series(dtype=float, name=name, index=pd.DatetimeIndex([], name="timestamp"))
        out = pd.concat(pieces).sort_index()
        out = out[~out.index.duplicated(keep="last")]
        if since is not None:
            out = out[out.index >= _naive(since)]
        return out.rename(name)

    def extend(self, history: Mapping[str, pd.Series]) -> dict[str, pd.Series]:
        """Each series of ``history`` with what the store holds before its first sample in
        front of it, at the store's step: Prometheus is the source wherever it answers."""
        out: dict[str, pd.Series] = {}
        for name, series in history.items():
            fresh = series.dropna()
            # Only the days before Prometheus' first sample are read: the rest it answers.
            first_seen = _naive(pd.Timestamp(fresh.index[0])) if not fresh.empty else None
            try:
                stored = self.read(str(name), before=first_seen)
            except (OSError, ValueError, BadInputError) as exc:
                log.warning("history store: could not read %r: %s", str(name), str(exc)[:200])
                stored = pd.Series(dtype=float)
            if fresh.empty or stored.empty:
                out[str(name)] = series if not fresh.empty else stored.rename(str(name))
                continue
            older = stored[stored.index < first_seen]
            if older.empty:
                out[str(name)] = series
                continue
            joined = pd.concat([older, series.astype(float)]).sort_index()
            joined = joined[~joined.index.duplicated(keep="last")].rename(str(name))
            joined.attrs = dict(series.attrs)  # a suspicion marked on it stays on it
            out[str(name)] = joined
        return out

    def days(self, name: str) -> float:
        """Days the store spans for ``name`` (0 when it holds nothing)."""
        held = self.read(name)
        if held.empty:
            return 0.0
        return float((held.index[-1] - held.index[0] + self.step) / pd.Timedelta(days=1))

    # ------------------------------------------------------------------ helpers

    def _on_step(self, series: pd.Series) -> pd.Series:
        s = pd.to_numeric(series, errors="coerce").astype(float)
        index = pd.DatetimeIndex(s.index)
        if index.tz is not None:
            index = index.tz_convert("UTC").tz_localize(None)
        s = pd.Series(s.to_numpy(), index=index).dropna()
        s = s[np.isfinite(s.to_numpy())]
        if s.empty:
            return s
        return s.resample(self.step, origin="epoch").mean().dropna()

    def _read_partition(self, path: Path) -> pd.Series | None:
        """One day's values; None when absent, and None with a warning when unreadable."""
        if not path.exists() and not path.is_symlink():
            return None
        try:
            raw = read_bounded(path, MAX_PARTITION_BYTES, "history partition", follow=False)
            _check_partition(raw, path)
            frame = pd.read_parquet(io.BytesIO(raw), columns=list(COLUMNS))
            index = pd.DatetimeIndex(frame["timestamp"])
            values = pd.to_numeric(frame["value"], errors="coerce").to_numpy(dtype=float)
        except (OSError, ValueError, KeyError, TypeError, BadInputError) as exc:
            # Set aside, not skipped every cycle: the cycle's append rebuilds the day.
            set_aside(path, f"history partition: {exc}", log)
            return None
        if index.tz is not None:
            index = index.tz_convert("UTC").tz_localize(None)
        s = pd.Series(values, index=index.rename("timestamp")).dropna()
        return s[np.isfinite(s.to_numpy())]


def _check_partition(raw: bytes, path: Path) -> None:
    """Refuse a partition by its Parquet footer before any page is read: more rows than a
    day holds at a 1-second step, columns that would inflate past
    :data:`MAX_PARTITION_INFLATED`, or no ``timestamp`` and ``value`` columns (a small file
    that decompresses to gigabytes never gets that far)."""
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(io.BytesIO(raw)).metadata
    except Exception as exc:  # pyarrow raises its own error classes for a bad footer
        raise BadInputError(f"{path.name}: not a Parquet file: {str(exc)[:120]}") from None
    names = set(meta.schema.names)
    if not set(COLUMNS) <= names:
        raise BadInputError(f"{path.name}: columns {sorted(names)[:5]}; expected {COLUMNS}")
    if meta.num_rows > MAX_PARTITION_ROWS:
        raise BadInputError(
            f"{path.name}: {meta.num_rows} rows; a day holds at most {MAX_PARTITION_ROWS}"
        )
    inflated = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            column = group.column(c)
            if column.path_in_schema in COLUMNS:
                inflated += max(column.total_uncompressed_size, 0)
    if inflated > MAX_PARTITION_INFLATED:
        raise BadInputError(
            f"{path.name}: {inflated} bytes once decompressed; at most "
            f"{MAX_PARTITION_INFLATED} are read"
        )


def _partition_name(day: pd.Timestamp) -> str:
    return f"{day:%Y-%m-%d}.parquet"


def _day_of(path: Path) -> pd.Timestamp | None:
    try:
        return pd.Timestamp(path.stem)
    except ValueError:
        return None


def _naive(ts: pd.Timestamp) -> pd.Timestamp:
    ts = pd.Timestamp(ts)
    return ts.tz_convert("UTC").tz_localize(None) if ts.tzinfo is not None else ts
