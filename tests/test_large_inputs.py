"""Large inputs bounded (issue #50, findings 7 and 11).

``tiercast backfill`` caps its series, groups rows in one sort (no pass over the rows per
series), picks promtool's block duration so a long history writes a bounded number of
blocks, and removes what promtool began when it runs over its time; the growth
backtest makes a bounded number of forecasts per signal whatever its settings.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import scaler.inputs.backfilling as backfilling
from forecaster.errors import BadInputError, TemporaryError
from forecaster.forecasting import SeriesForecast, forecast_series
from scaler.cli import main
from scaler.inputs.backfilling import (
    LARGEST_AUTO_BLOCK_H,
    TARGET_BLOCKS,
    TraceSeries,
    block_hours,
    series_from_files,
    write_blocks,
)
from scaler.planning.growth import MAX_GROWTH_REFRESHES, Forecaster, bounded_refresh

HOUR = 3600.0


def _long_csv(path: Path, series: int, rows: int = 2) -> Path:
    stamps = pd.date_range("2026-11-01", periods=rows, freq="5min").strftime("%Y-%m-%dT%H:%M:%SZ")
    frame = pd.DataFrame(
        {
            "timestamp": np.tile(stamps, series),
            "series": np.repeat([f"s{i}" for i in range(series)], rows),
            "value": np.arange(series * rows) % 7,
        }
    )
    frame.to_csv(path, index=False)
    return path


def _fake_promtool(folder: Path, body: str) -> Path:
    """A promtool whose help lists --max-block-duration (as promtool's does where it is not
    hidden); ``body`` runs for the real call, after its arguments are kept in ``args``."""
    script = folder / "promtool"
    script.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do [ "$a" = "--help" ] && { echo "  --max-block-duration=2h"; exit 0; }; done\n'
        f'echo "$@" > {folder}/args\n' + body
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def _trace(hours: float, step_s: float = 60.0) -> TraceSeries:
    t = 1.7e9 + np.arange(0.0, hours * HOUR + 1, step_s)
    return TraceSeries({}, t, np.ones(len(t)))


def test_a_long_history_writes_a_bounded_number_of_blocks() -> None:
    # 10^6 one-minute rows: promtool's default 2 h blocks would be about 8,300.
    million = _trace(1_000_000 / 60)
    hours = block_hours([million])
    assert hours == 486
    assert (1_000_000 / 60) / hours + 1 <= TARGET_BLOCKS
    assert block_hours([_trace(24)]) == 2  # a day stays in promtool's 2 h blocks
    for span_h in (10, 100, 1_000, 10_000, 30_000):
        chosen = block_hours([_trace(span_h, step_s=3600)])
        assert chosen in backfilling.BLOCK_RANGES_H and chosen <= LARGEST_AUTO_BLOCK_H
        assert span_h / chosen + 1 <= TARGET_BLOCKS or chosen == LARGEST_AUTO_BLOCK_H


def test_the_chosen_block_duration_is_passed_to_promtool(tmp_path: Path) -> None:
    tool = _fake_promtool(tmp_path, 'mkdir -p "$6/01FAKEBLOCK"\n')
    write_blocks("m", [_trace(24 * 30)], tmp_path / "tsdb", promtool=str(tool))
    assert "--max-block-duration=18h" in (tmp_path / "args").read_text()


def test_more_series_than_the_cap_are_one_line(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _long_csv(workdir / "many.csv", series=5)
    with pytest.raises(BadInputError, match="--max-series: the input has 5 series; at most 4"):
        series_from_files([workdir / "many.csv"], {}, "series", max_series=4)
    code = main(["backfill", "many.csv", "--tsdb", "tsdb", "--metric", "m", "--max-series", "4"])
    assert code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "--max-series" in err[0]
    assert not (workdir / "tsdb").exists()


@pytest.mark.slow
def test_many_series_are_grouped_in_linear_time(tmp_path: Path) -> None:
    small = _long_csv(tmp_path / "small.csv", series=2_000)
    large = _long_csv(tmp_path / "large.csv", series=20_000)

    def seconds(path: Path) -> float:
        began = time.perf_counter()
        found = series_from_files([path], {}, "series", max_series=20_000)
        assert len(found) in (2_000, 20_000)
        return time.perf_counter() - began

    seconds(small)  # warm-up
    # The least of a few runs of each: what the machine's other work cannot add to.
    ratio = min(seconds(large) for _ in range(2)) / max(min(seconds(small) for _ in range(3)), 1e-3)
    # Ten times the series: ten times the time when linear, a hundred when quadratic.
    assert ratio < 40, ratio


def test_a_promtool_timeout_leaves_no_partial_block_or_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(temp))
    tsdb = tmp_path / "tsdb"
    (tsdb / "01OLDBLOCK").mkdir(parents=True)
    tool = _fake_promtool(
        tmp_path,
        'mkdir -p "$6/01HALFWRITTEN.tmp-for-creation" && touch "$6/lock" '
        '&& touch "$TMPDIR/head-chunk" && exec sleep 30\n',
    )
    began = time.monotonic()
    with pytest.raises(TemporaryError, match=r"did not finish .* in 0\.5 s; the blocks"):
        write_blocks("m", [_trace(24)], tsdb, promtool=str(tool), timeout_s=0.5)
    assert time.monotonic() - began < 20
    assert sorted(os.listdir(tsdb)) == ["01OLDBLOCK"]
    assert os.listdir(temp) == []


def test_a_file_where_the_tsdb_folder_goes_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "tsdb").write_text("a file")
    tool = _fake_promtool(tmp_path, "exit 0\n")
    with pytest.raises(BadInputError, match=r"--tsdb .*not a folder|--tsdb .*exists"):
        write_blocks("m", [_trace(2)], tmp_path / "tsdb", promtool=str(tool))


def test_the_growth_refresh_is_widened_to_a_bounded_count() -> None:
    span, every = pd.Timedelta(days=45), pd.Timedelta(seconds=300)
    wider = bounded_refresh(span, every)
    assert span / wider <= MAX_GROWTH_REFRESHES
    assert wider % every == pd.Timedelta(0)  # a multiple: aligned times stay shared
    default = pd.Timedelta(days=1)
    assert bounded_refresh(pd.Timedelta(days=3), default) == default


@pytest.mark.slow
def test_a_cycle_with_a_45_day_backtest_refreshed_every_5_minutes_is_bounded(
    workdir: Path,
) -> None:
    from scaler.inputs.demo import demo_inputs
    from scaler.planning.tiers import learn_margins
    from scaler.service.cycle import forecast_for_plan

    config, history, now = demo_inputs()
    forecast = config.forecast.model_copy(update={"method": "seasonal_naive_1d"})
    policy = config.policy.model_copy(
        update={"growth_backtest_s": 45 * 86400, "growth_refresh_s": 300}
    )
    config = config.model_copy(update={"forecast": forecast, "policy": policy})
    forecasts = forecast_for_plan(
        config.pools, config.policy, config.forecast, config.model_store, history, now
    )
    calls: dict[str, int] = {}

    def counting(signal: str) -> Forecaster:
        def forecast(window: pd.Series, horizon: pd.Timedelta) -> SeriesForecast:
            calls[signal] = calls.get(signal, 0) + 1
            assert calls[signal] <= MAX_GROWTH_REFRESHES, "the backtest is not bounded"
            return forecast_series(window, horizon, (0.5,), "seasonal_naive_1d")

        return forecast

    backtests: Callable[[str], Forecaster] = counting
    learn_margins(config.fleet, config.policy, "seasonal_naive_1d", forecasts, history, backtests)
    assert calls and max(calls.values()) <= MAX_GROWTH_REFRESHES


def test_the_scheduled_refit_stops_at_its_budget_and_says_what_it_left(tmp_path: Path) -> None:
    from scaler.config import parse_config
    from scaler.service.runs import Inputs
    from scaler.service.scheduled import refit_models

    names = ["a", "b", "c"]
    config = parse_config(
        {
            "signals": [{"name": n, "step_s": 300} for n in names],
            "workloads": [
                {"name": f"w{n}", "signal": n, "gpu_model": "H100", "units_per_replica": 1}
                for n in names
            ],
            "pools": [
                {
                    "name": "p",
                    "tier": "on-demand",
                    "gpu_model": "H100",
                    "gpus_per_node": 8,
                    "price_per_gpu_hour": 1.0,
                }
            ],
            "forecast": {"method": "seasonal_naive_1d"},
            "model_store": {"path": str(tmp_path / "models")},
        }
    )
    index = pd.date_range("2026-11-01", periods=3 * 288, freq="5min")
    history = {n: pd.Series(10.0 + np.arange(len(index)) % 288, index=index) for n in names}
    ticks = iter(range(0, 10_000, 100))
    notes = refit_models(
        Inputs(config, history, index[-1] + pd.Timedelta("5min"), "test"),
        budget_s=150,
        clock=lambda: float(next(ticks)),
    )
    assert notes[0].startswith("a: ")
    assert notes[-1].startswith("refit budget of 150 s spent: 2 signal(s) not refitted (b, c)")
    assert len(notes) == 2
