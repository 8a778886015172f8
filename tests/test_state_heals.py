"""State that heals (#50 finding 10): a state file tiercast reads back every cycle and
cannot use is set aside (``NAME.bad``, with a warning) or its bad part dropped, so the
next cycle runs and rebuilds it, never a cycle that fails until someone deletes it.
Sizes and nesting are bounded on read, Parquet included (its footer is checked before
any page is read)."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster import history_store
from forecaster.history_store import MAX_PARTITION_ROWS, HistoryStore, signal_key
from scaler.service.drift import STATE_FILE, DriftState
from scaler.service.growth_cache import FILE_NAME, GrowthCache

KEEP = pd.Timedelta(days=4)
STEP = pd.Timedelta(minutes=5)
DEEP = b'{"format": 1, "entries": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


def _window(hours: int = 48) -> pd.Series:
    idx = pd.date_range("2026-11-01", periods=hours * 12, freq="5min", name="timestamp")
    return pd.Series(10.0 + np.arange(len(idx)) % 7, index=idx, name="rps")


def _entry(**changes: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "origin": "2026-11-02T23:55:00",
        "estimator": "seasonal_naive_1d",
        "start": "2026-11-03T00:00:00",
        "step_s": 300.0,
        "median": [1.0, 2.0, None],
    }
    entry.update(changes)
    return entry


# The growth backtest cache


@pytest.mark.parametrize(
    "content",
    [DEEP, b"\xff\xfe not json", b'{"format": 1, "entries": 1', b"[1, 2]"],
    ids=["nested-past-the-limit", "not-utf-8", "truncated", "not-a-cache"],
)
def test_an_unusable_growth_cache_is_set_aside_and_rebuilt(
    tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / FILE_NAME
    path.write_bytes(content)
    with caplog.at_level(logging.WARNING):
        cache = GrowthCache(path, KEEP)
    assert "set aside" in caplog.text and len(caplog.records) == 1
    assert len(caplog.records[0].getMessage()) <= 230  # one line under 300 with its prefix
    assert (tmp_path / f"{FILE_NAME}.bad").read_bytes() == content
    cache.forecaster("rps", "seasonal_naive_1d")(_window(), pd.Timedelta(hours=6))
    cache.save()
    assert json.loads(path.read_text())["format"] == 1
    # The next cycle reads the rebuilt file without a word.
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        again = GrowthCache(path, KEEP)
    assert not caplog.records and again.stats == {"kept": 0, "made": 0}


@pytest.mark.parametrize(
    "bad",
    [
        _entry(origin="2026-11-02T23:55:00+05:00"),
        _entry(origin="not a time"),
        _entry(origin="9999-12-31T00:00:00"),
        _entry(step_s=1e20),
        _entry(step_s=-300),
        _entry(step_s=float("nan")),
        _entry(start="2262-04-11T00:00:00", step_s=86400.0),
        _entry(median=["x"]),
        _entry(median=[0.0] * 100_001),
        {"origin": 5},
        [1, 2],
    ],
    ids=[
        "offset-origin",
        "bad-origin",
        "far-origin",
        "huge-step",
        "negative-step",
        "nan-step",
        "past-the-calendar",
        "text-median",
        "huge-median",
        "origin-a-number",
        "entry-a-list",
    ],
)
def test_a_malformed_growth_cache_entry_is_dropped_and_the_cycle_goes_on(
    tmp_path: Path, bad: object, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / FILE_NAME
    good = _entry()
    path.write_text(json.dumps({"format": 1, "entries": {"good": good, "bad": bad}}))
    with caplog.at_level(logging.WARNING):
        cache = GrowthCache(path, KEEP)
    assert "1 malformed entry dropped" in caplog.text
    # What failed every cycle before: saving (the origins are compared) and forecasting.
    cache.forecaster("rps", "seasonal_naive_1d")(_window(), pd.Timedelta(hours=6))
    cache.save()
    kept = json.loads(path.read_text())["entries"]
    assert "bad" not in kept and kept["good"] == good


# The drift state


@pytest.mark.parametrize(
    "content",
    [
        b'{"refitted_at": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"refitted_at": {"rps": "not a time"}}',
        b'{"refitted_at": {"rps": "99999-01-01"}}',
        b'{"refitted_at": [1]}',
        b"\x00\x01\x02",
    ],
    ids=["nested-past-the-limit", "bad-time", "far-time", "not-a-mapping", "binary"],
)
def test_an_unusable_drift_state_is_set_aside_and_drift_starts_afresh(
    tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / STATE_FILE
    path.write_bytes(content)
    with caplog.at_level(logging.WARNING):
        state = DriftState(path)
    assert state.refitted_at == {}
    assert "set aside" in caplog.text and len(caplog.records) == 1
    assert (tmp_path / f"{STATE_FILE}.bad").read_bytes() == content
    state.mark("rps", pd.Timestamp("2026-11-30T12:00"))
    assert DriftState(path).refitted_at == {"rps": pd.Timestamp("2026-11-30T12:00")}


def test_a_good_drift_state_still_reads(tmp_path: Path) -> None:
    path = tmp_path / STATE_FILE
    path.write_text(json.dumps({"refitted_at": {"rps": "2026-11-30T12:00:00Z"}}))
    assert DriftState(path).refitted_at == {"rps": pd.Timestamp("2026-11-30T12:00")}
    assert not (tmp_path / f"{STATE_FILE}.bad").exists()


# The history store's Parquet partitions


def _partition(store: HistoryStore, day: str) -> Path:
    return store.root / signal_key("rps") / f"{day}.parquet"


def _write_rows(path: Path, rows: int) -> None:
    """A small file of many equal rows: Parquet's encodings make it tiny on disk."""
    index = pd.date_range("2026-11-01", periods=rows, freq="1ms")
    frame = pd.DataFrame({"timestamp": index, "value": np.zeros(rows)})
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False, compression="zstd")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buffer.getvalue())


def test_a_partition_that_inflates_is_set_aside_unread_and_the_day_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = HistoryStore(tmp_path / "history", STEP)
    path = _partition(store, "2026-11-01")
    _write_rows(path, MAX_PARTITION_ROWS + 1)
    assert path.stat().st_size < history_store.MAX_PARTITION_BYTES

    def never(*args: object, **kwargs: object) -> pd.DataFrame:
        raise AssertionError("a partition over the bound was decoded")

    monkeypatch.setattr(history_store.pd, "read_parquet", never)
    with caplog.at_level(logging.WARNING):
        assert store.read("rps").empty
    assert "set aside" in caplog.text and "rows" in caplog.text
    assert path.with_name(path.name + ".bad").exists() and not path.exists()
    monkeypatch.undo()
    # The cycle's append rebuilds the day; the next read is quiet.
    day = pd.date_range("2026-11-01", periods=288, freq="5min", name="timestamp")
    store.append({"rps": pd.Series(1.0, index=day)})
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert len(store.read("rps")) == 288
    assert not caplog.records


@pytest.mark.parametrize(
    "content",
    [b"PAR1 not really", b"\x00" * 64],
    ids=["bad-footer", "zeros"],
)
def test_a_corrupt_partition_is_set_aside_once(
    tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    store = HistoryStore(tmp_path / "history", STEP)
    path = _partition(store, "2026-11-01")
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with caplog.at_level(logging.WARNING):
        assert store.read("rps").empty
        assert store.read("rps").empty
    assert len(caplog.records) == 1 and "set aside" in caplog.text


def test_a_partition_without_its_columns_is_set_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = HistoryStore(tmp_path / "history", STEP)
    path = _partition(store, "2026-11-01")
    path.parent.mkdir(parents=True)
    buffer = io.BytesIO()
    pd.DataFrame({"a": [1.0]}).to_parquet(buffer, index=False)
    path.write_bytes(buffer.getvalue())
    with caplog.at_level(logging.WARNING):
        assert store.read("rps").empty
    assert "columns" in caplog.text and "set aside" in caplog.text
