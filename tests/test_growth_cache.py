"""The growth backtest's forecasts kept between cycles (scaler.service.growth_cache)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from forecaster.forecasting import SeriesForecast
from scaler.config import Config
from scaler.inputs.demo import demo_inputs
from scaler.planning.growth import Forecaster
from scaler.planning.margins import Margin
from scaler.planning.tiers import learn_margins
from scaler.service.cycle import forecast_for_plan
from scaler.service.growth_cache import FILE_NAME, GrowthCache

pytestmark = pytest.mark.slow

KEEP = pd.Timedelta(days=4)
NO_SHIFT = pd.Timedelta(0)


@pytest.fixture(autouse=True)
def _cwd_in_tmp(workdir: Path) -> Path:
    """The demo config's model store is the relative path ``models``: each test runs in a
    temporary folder of its own, so its fits land there and never in the checkout."""
    return workdir


def _inputs(now_shift: pd.Timedelta = NO_SHIFT) -> tuple[Config, dict, dict, pd.Timestamp]:
    config, history, now = demo_inputs()
    # A cheap forecaster keeps the test fast; the cache is the same for `auto`.
    forecast = config.forecast.model_copy(update={"method": "seasonal_naive_1d"})
    config = config.model_copy(update={"forecast": forecast})
    now = now + now_shift  # the demo's history ends at its "now": shift back, not ahead
    seen = {name: y[y.index < now] for name, y in history.items()}
    forecasts = forecast_for_plan(
        config.pools, config.policy, config.forecast, config.model_store, seen, now
    )
    return config, seen, forecasts, now


def _counting(cache: GrowthCache, method: str, calls: list[str]) -> Callable[[str], Forecaster]:
    def backtests(signal: str) -> Forecaster:
        inner = cache.forecaster(signal, method)

        def forecast(window: pd.Series, horizon: pd.Timedelta) -> SeriesForecast:
            calls.append(signal)
            return inner(window, horizon)

        return forecast

    return backtests


def _summary(margins: dict[str, Margin | None]) -> dict[str, tuple[object, ...] | None]:
    return {
        k: (m.margin, m.source, m.growth_cost_ratio) if m is not None else None
        for k, m in margins.items()
    }


def test_a_second_cycle_minutes_later_makes_no_backtest_forecast(tmp_path: Path) -> None:
    config, history, forecasts, _ = _inputs(pd.Timedelta(minutes=-5))
    method = config.forecast.method
    plain = learn_margins(config.fleet, config.policy, config.forecast.method, forecasts, history)

    first = GrowthCache(tmp_path / FILE_NAME, KEEP)
    cached = learn_margins(
        config.fleet,
        config.policy,
        config.forecast.method,
        forecasts,
        history,
        _counting(first, method, []),
    )
    first.save()
    assert first.stats["made"] > 0 and first.stats["kept"] == 0
    # Kept or not, the margins are the same.
    assert _summary(cached) == _summary(plain)

    # The next cycle, five minutes later, in a fresh process: every forecast is kept.
    config, history, forecasts, _ = _inputs()
    second = GrowthCache(tmp_path / FILE_NAME, KEEP)
    learn_margins(
        config.fleet,
        config.policy,
        config.forecast.method,
        forecasts,
        history,
        _counting(second, method, []),
    )
    assert second.stats["made"] == 0
    assert second.stats["kept"] == first.stats["made"]


def test_a_day_later_only_the_new_origin_is_forecast_and_old_ones_are_dropped(
    tmp_path: Path,
) -> None:
    config, history, forecasts, _ = _inputs(pd.Timedelta(days=-1))
    method = config.forecast.method
    cache = GrowthCache(tmp_path / FILE_NAME, KEEP)
    learn_margins(
        config.fleet,
        config.policy,
        config.forecast.method,
        forecasts,
        history,
        _counting(cache, method, []),
    )
    cache.save()
    made = cache.stats["made"]
    signals = len([n for n in forecasts if n in history])

    later = GrowthCache(tmp_path / FILE_NAME, pd.Timedelta(days=1))
    config, history, forecasts, _ = _inputs()
    learn_margins(
        config.fleet,
        config.policy,
        config.forecast.method,
        forecasts,
        history,
        _counting(later, method, []),
    )
    # One new refresh time per signal; the others were kept.
    assert later.stats["made"] == signals
    assert later.stats["kept"] == made - signals
    later.save()
    entries = json.loads((tmp_path / FILE_NAME).read_text())["entries"]
    origins = sorted({pd.Timestamp(e["origin"]) for e in entries.values()})
    assert origins[-1] - origins[0] <= pd.Timedelta(days=1)


def test_a_rewritten_last_day_makes_a_new_forecast(tmp_path: Path) -> None:
    config, history, forecasts, _ = _inputs()
    method = config.forecast.method
    cache = GrowthCache(tmp_path / FILE_NAME, KEEP)
    learn_margins(
        config.fleet,
        config.policy,
        config.forecast.method,
        forecasts,
        history,
        _counting(cache, method, []),
    )
    cache.save()

    name = sorted(history)[0]
    y = history[name].copy()
    y.iloc[-3 * 24 * 12 :] *= 1.5  # a backfill rewrote the last three days of one signal
    changed = {**history, name: y}
    again = GrowthCache(tmp_path / FILE_NAME, KEEP)
    calls: list[str] = []
    learn_margins(
        config.fleet,
        config.policy,
        config.forecast.method,
        forecasts,
        changed,
        _counting(again, method, calls),
    )
    assert again.stats["made"] > 0
    assert again.stats["made"] <= calls.count(name)


@pytest.mark.parametrize("content", [b"{not json", b'{"format": 99, "entries": {}}', b"[]"])
def test_a_bad_cache_file_is_an_empty_cache(
    tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / FILE_NAME
    path.write_bytes(content)
    config, history, forecasts, _ = _inputs()
    with caplog.at_level(logging.WARNING, logger="scaler.service.growth_cache"):
        cache = GrowthCache(path, KEEP)
    assert "growth backtest cache" in caplog.text
    learn_margins(
        config.fleet,
        config.policy,
        config.forecast.method,
        forecasts,
        history,
        _counting(cache, config.forecast.method, []),
    )
    cache.save()
    assert json.loads(path.read_text())["format"] == 1


def test_a_link_at_the_cache_path_is_neither_followed_nor_replaced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    link = tmp_path / "store" / FILE_NAME
    link.parent.mkdir()
    link.symlink_to(target)
    config, history, forecasts, _ = _inputs()
    cache = GrowthCache(link, KEEP)
    learn_margins(
        config.fleet,
        config.policy,
        config.forecast.method,
        forecasts,
        history,
        _counting(cache, config.forecast.method, []),
    )
    with caplog.at_level(logging.WARNING, logger="scaler.service.growth_cache"):
        cache.save()
    assert target.read_text() == "keep me"
    assert link.is_symlink()
    assert "not written" in caplog.text
