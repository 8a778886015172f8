"""Replay forecasts kept on disk (scaler.replay.forecast_store, ``simulate --forecast-cache``):
a second run forecasts nothing and replays the same figures; another trace or setting
names another file; an unreadable file is an empty cache; a link planted at the file is refused."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import scaler.replay.walkforward as walkforward
from forecaster.files import OutputError
from scaler.replay.forecast_store import load_forecasts, save_forecasts, store_path
from scaler.replay.protocol import ReplaySetup, Trace, prepare_trace
from scaler.replay.simulating import run_replay
from scaler.replay.walkforward import ForecastCache
from tests.test_growth import diurnal

SETUP = replace(ReplaySetup(), forecast_method="seasonal_naive_1d", growth_backtest_s=2 * 86400)


def _trace(seed: int = 0):
    return prepare_trace(diurnal(6, seed=seed).rename("d"), 1.0, SETUP)


@pytest.fixture(scope="module")
def replayed() -> tuple[Trace, ForecastCache]:
    """One predictive replay's forecasts, for the tests that only need a filled cache
    (they copy what they change)."""
    trace = _trace()
    cache: ForecastCache = {}
    run_replay(trace, SETUP, ("predictive",), cache=cache)
    return trace, cache


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the forecasts the replay makes."""
    calls: list[int] = []
    real = walkforward.forecast_series

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(walkforward, "forecast_series", counted)
    return calls


@pytest.mark.slow
def test_a_second_run_forecasts_nothing_and_replays_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting(monkeypatch)
    trace = _trace()
    path = store_path(tmp_path, trace, [SETUP])
    cache: ForecastCache = load_forecasts(path)
    assert cache == {}
    first = run_replay(trace, SETUP, ("reactive", "predictive"), cache=cache)
    made = len(calls)
    assert made > 0 and len(cache) == made
    save_forecasts(cache, path)

    again = load_forecasts(path)
    assert again.keys() == cache.keys()
    key = next(iter(cache))
    pd.testing.assert_frame_equal(again[key].frame, cache[key].frame, check_freq=False)
    assert again[key].last_timestamp == cache[key].last_timestamp
    second = run_replay(trace, SETUP, ("reactive", "predictive"), cache=again)
    assert len(calls) == made  # nothing forecast again
    for policy in ("reactive", "predictive"):
        assert second.scores[policy] == first.scores[policy]


def test_another_trace_or_setting_is_another_file(tmp_path: Path) -> None:
    trace = _trace()
    path = store_path(tmp_path, trace, [SETUP])
    assert path.parent == tmp_path and path.name.startswith("d-")
    assert store_path(tmp_path, trace, [SETUP]) == path
    assert store_path(tmp_path, _trace(seed=1), [SETUP]) != path
    assert store_path(tmp_path, trace, [replace(SETUP, reforecast_s=1800)]) != path
    # Lead times within the test forecasts' least reach share them; a longer one does not.
    assert store_path(tmp_path, trace, [replace(SETUP, lead_time_s=2400)]) == path
    assert store_path(tmp_path, trace, [replace(SETUP, lead_time_s=7200)]) != path


def test_an_unreadable_file_is_an_empty_cache_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "d-x.json"
    path.write_text('{"format": 1, "forecasts": [{"method": "auto"}]}')
    with pytest.warns(UserWarning, match="unreadable"):
        assert load_forecasts(path) == {}
    path.write_text("not json")
    with pytest.warns(UserWarning, match="forecasting afresh"):
        assert load_forecasts(path) == {}


@pytest.mark.slow
def test_a_link_planted_at_the_cache_file_is_refused_not_followed(
    tmp_path: Path, replayed: tuple[Trace, ForecastCache]
) -> None:
    # The cache file is tiercast's own name in the folder: a link there was planted.
    trace, cache = replayed
    target = tmp_path / "kept.json"
    target.write_text("")
    path = store_path(tmp_path / "cache", trace, [SETUP])
    path.parent.mkdir()
    path.symlink_to(target)
    with pytest.raises(OutputError, match=r"--forecast-cache .*link"):
        save_forecasts(cache, path)
    assert path.is_symlink() and target.read_text() == ""


@pytest.mark.slow
def test_nan_values_survive_the_round_trip(
    tmp_path: Path, replayed: tuple[Trace, ForecastCache]
) -> None:
    _, cache = replayed
    key = next(iter(cache))
    fc = cache[key]
    frame = fc.frame.copy()
    frame.iloc[0, 0] = np.nan
    cache = {key: replace(fc, frame=frame, recent_max=float("nan"))}
    save_forecasts(cache, tmp_path / "f.json")
    back = load_forecasts(tmp_path / "f.json")[key]
    assert np.isnan(back.frame.iloc[0, 0]) and np.isnan(back.recent_max)
