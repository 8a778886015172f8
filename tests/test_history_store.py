"""tiercast's own history beyond Prometheus' retention (forecaster.history_store)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.errors import BadInputError
from forecaster.history_store import HistoryStore, signal_key
from tests.prometheus_server import prometheus  # noqa: F401  (the session fixture)

STEP = pd.Timedelta(minutes=5)


def minutely(start: str, hours: float, level: float = 10.0) -> pd.Series:
    idx = pd.date_range(start, periods=int(hours * 60), freq="1min", name="timestamp")
    return pd.Series(level + np.arange(len(idx)) % 5, index=idx, name="rps")


def test_a_cycle_appends_and_a_later_forecast_sees_what_prometheus_forgot(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "history", STEP)
    # Day one and two as the cycles read them, at a 1-minute step: kept at 5 minutes.
    assert store.append({"rps": minutely("2026-03-01", 48)}) == 2 * 288
    held = store.read("rps")
    assert len(held) == 2 * 288 and (held.index[1] - held.index[0]) == STEP
    assert held.iloc[0] == pytest.approx(12.0)  # the mean of 10..14
    # Later Prometheus answers only from day two: the store supplies day one in front.
    fresh = minutely("2026-03-02", 24, level=20.0).resample(STEP).mean()
    joined = store.extend({"rps": fresh})["rps"]
    assert joined.index[0] == pd.Timestamp("2026-03-01")
    assert joined.index.is_monotonic_increasing and not joined.index.duplicated().any()
    # Where both have a step, Prometheus wins.
    assert joined.loc["2026-03-02 00:00"] == pytest.approx(22.0)
    assert store.days("rps") == pytest.approx(2.0)
    # One partition a day, named by the day, under a folder of the signal.
    parts = sorted(p.name for p in (tmp_path / "history" / signal_key("rps")).iterdir())
    assert parts == ["2026-03-01.parquet", "2026-03-02.parquet"]


def test_appending_the_same_window_twice_changes_nothing(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path, STEP)
    s = minutely("2026-03-01 20:00", 8)
    store.append({"rps": s})
    once = store.read("rps")
    store.append({"rps": s})
    pd.testing.assert_series_equal(store.read("rps"), once)


def test_old_partitions_are_pruned_and_names_never_share_a_folder(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path, STEP, max_days=2)
    for day in ("2026-03-01", "2026-03-02", "2026-03-03", "2026-03-04"):
        store.append({"a/b": minutely(day, 1)}, now=pd.Timestamp(day))
    assert store.read("a/b").index[0] == pd.Timestamp("2026-03-02")
    assert signal_key("a/b") != signal_key("a_b") and "/" not in signal_key("a/b")


def test_a_corrupt_partition_is_skipped_with_a_warning_never_a_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = HistoryStore(tmp_path, STEP)
    store.append({"rps": minutely("2026-03-01", 48)})
    bad = tmp_path / signal_key("rps") / "2026-03-01.parquet"
    bad.write_bytes(b"not parquet")
    with caplog.at_level(logging.WARNING):
        held = store.read("rps")
    assert held.index[0] == pd.Timestamp("2026-03-02") and "set aside" in caplog.text
    # extend falls back to what Prometheus returned.
    fresh = minutely("2026-03-03", 1).resample(STEP).mean()
    assert store.extend({"rps": fresh})["rps"].index[0] == pd.Timestamp("2026-03-02")


def test_a_link_in_the_store_is_refused_not_written_through(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = HistoryStore(tmp_path / "h", STEP)
    folder = tmp_path / "h" / signal_key("rps")
    folder.mkdir(parents=True)
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    os.symlink(target, folder / "2026-03-01.parquet")
    with caplog.at_level(logging.WARNING):
        store.append({"rps": minutely("2026-03-01", 1)})
    assert target.read_text() == "keep me"
    assert (folder / "2026-03-01.parquet").is_symlink()
    assert "could not keep" in caplog.text


def test_bad_settings_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="step must be positive"):
        HistoryStore(tmp_path, pd.Timedelta(0))
    with pytest.raises(BadInputError, match="max_days"):
        HistoryStore(tmp_path, STEP, max_days=0)


def test_a_cycle_keeps_what_prometheus_answered_and_the_next_sees_past_its_window(
    prometheus,  # noqa: F811
    tmp_path: Path,
) -> None:
    from scaler.config import parse_config
    from scaler.inputs.loading import _collect_prometheus
    from tests.prometheus_server import RPS_METRIC, csv_series, needs_trace
    from tests.test_prometheus_source import M_SMALL, _config

    expected = csv_series(needs_trace(prometheus, M_SMALL))
    data = _config(prometheus, f'{RPS_METRIC}{{model="m-small"}}')
    data["model_store"] = {"path": str(tmp_path / "state" / "models")}
    config = parse_config(data)
    day = pd.Timedelta(days=1)
    first = expected.index[0] + 5 * day
    # Each cycle reads one day (lookback_s); three daily cycles leave three days kept.
    for k in range(3):
        got = _collect_prometheus(config, "rps", now=first + k * day)["rps"]
    span = got.dropna().index[-1] - got.dropna().index[0]
    assert span > 2.9 * day  # one day from Prometheus, two more from the store
    kept = got[got.index < first + day]
    np.testing.assert_allclose(
        kept.dropna().to_numpy(), expected.reindex(kept.dropna().index).to_numpy()
    )
    assert (tmp_path / "state" / "models" / "history").is_dir()
    # keep_history_days 0: only Prometheus' own window.
    off = parse_config({**data, "prometheus": {**data["prometheus"], "keep_history_days": 0}})
    alone = _collect_prometheus(off, "rps", now=first + 2 * day)["rps"].dropna()
    assert alone.index[-1] - alone.index[0] <= day


def test_history_url_takes_the_range_queries_and_credentials_need_tls_there_too() -> None:
    from scaler.config import parse_config
    from scaler.inputs.collecting import settings_from_config

    base = {
        "signals": [{"name": "rps", "query": "sum(rate(x[5m]))"}],
        "workloads": [{"name": "w", "signal": "rps", "gpu_model": "H100", "units_per_replica": 1}],
        "pools": [
            {
                "name": "p",
                "tier": "on-demand",
                "gpu_model": "H100",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 4,
            }
        ],
    }
    prom = {"url": "https://prometheus:9090", "history_url": "https://thanos-query:9090"}
    config = parse_config({**base, "prometheus": prom})
    assert config.prometheus is not None
    assert settings_from_config(config.prometheus, history=True).url == prom["history_url"]
    assert settings_from_config(config.prometheus).url == prom["url"]
    leaky = {**prom, "history_url": "http://thanos:9090", "bearer_token_file": "/t"}
    with pytest.raises(Exception, match="http://"):
        parse_config({**base, "prometheus": leaky})
