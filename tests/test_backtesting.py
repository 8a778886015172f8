"""Rolling-origin backtests: the protocol's origins, the scores, and the CLI table."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from forecaster.backtesting import (
    Backtest,
    backtest,
    daily_origins,
    naive_scale,
    protocol_origins,
)
from forecaster.estimators import BaseEstimator, SeasonalNaive
from scaler.cli import main


def daily_cycle(days: int, step: str = "15min", noise: float = 0.0, seed: int = 0) -> pd.Series:
    periods = int(days * 86400 / pd.Timedelta(step).total_seconds())
    index = pd.date_range("2026-01-05", periods=periods, freq=step, name="timestamp")
    hours = index.hour.to_numpy() + index.minute.to_numpy() / 60
    rng = np.random.default_rng(seed)
    values = 100 + 40 * np.sin(2 * np.pi * hours / 24) + rng.normal(0, noise, len(index))
    return pd.Series(values, index=index, name="cycle")


def test_protocol_uses_the_last_7_days_or_4_for_short_series() -> None:
    long = daily_cycle(30)
    origins = protocol_origins(long)
    assert len(origins) == 7
    assert all(o == o.normalize() for o in origins)
    assert origins[-1] == long.index[-1].normalize()
    short = daily_cycle(14)
    assert len(protocol_origins(short)) == 4


def test_daily_origins_keep_the_phase_of_the_end() -> None:
    y = daily_cycle(10)
    origins = daily_origins(y, 3, 96)
    end = y.index[-1] + pd.Timedelta("15min")
    assert origins == [end - pd.Timedelta(days=k + 1) for k in range(3)]


def test_a_perfect_forecast_scores_zero_and_full_coverage() -> None:
    y = daily_cycle(10)
    bt = backtest(lambda: SeasonalNaive("1d"), y, protocol_origins(y), 96, [0.1, 0.5, 0.9])
    assert bt.mase() == pytest.approx(0.0, abs=1e-9)
    assert bt.coverage(0.9) == 1.0
    assert bt.forecasts.shape == (4, 96, 3)


def test_scores_are_scaled_by_the_in_sample_daily_naive_error() -> None:
    actual = np.array([[1.0, 2.0, np.nan]])
    forecast = np.stack([actual - 1, actual, actual + 1], axis=-1)
    forecast[0, :, 1] = [2.0, 2.0, 2.0]  # median off by 1 and 0
    bt = Backtest(
        label="x",
        origins=[pd.Timestamp("2026-01-01")],
        quantiles=[0.1, 0.5, 0.9],
        forecasts=forecast,
        actuals=actual,
        scales=np.array([2.0]),
        fit_seconds=0.0,
    )
    assert bt.mase() == pytest.approx(0.25)  # mean(|1-2|, |2-2|) / 2, NaN ignored
    assert bt.coverage(0.9) == 1.0 and bt.coverage(0.1) == 0.0
    assert bt.scaled_pinball(0.9) == pytest.approx(0.1 * 1 / 2)
    assert naive_scale(np.array([1.0, 2.0, 1.0, 2.0]), 1) == pytest.approx(1.0)


class Late(BaseEstimator):
    """A fake that lags reality by a constant: the backtest must see exactly that error."""

    name = "late"

    def __init__(self, offset: float = 5.0) -> None:
        self.offset = offset

    def fit(self, history: pd.Series) -> Late:
        self._inner = SeasonalNaive("1d").fit(history)
        self.last_timestamp_ = self._inner.last_timestamp_
        self.step_ = self._inner.step_
        self.nonnegative_ = True
        return self

    def predict(self, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        return self._inner.predict(horizon, quantiles) + self.offset


def test_backtest_measures_a_known_error() -> None:
    y = daily_cycle(10)
    scale = naive_scale(y.to_numpy(), 96)  # zero for a pure cycle: floored
    bt = backtest(lambda: Late(5.0), y, protocol_origins(y), 96, [0.5])
    assert np.allclose(np.abs(bt.actuals - bt.point()), 5.0)
    assert bt.coverage(0.5) == 1.0
    assert scale > 0


def _hourly_csv(path: Path, days: int) -> None:
    """A noisy hourly daily cycle of ``days`` days as a timestamp,value CSV."""
    y = daily_cycle(days, step="1h", noise=3.0)
    frame = pd.DataFrame({"timestamp": y.index.strftime("%Y-%m-%dT%H:%M:%S"), "value": y.values})
    frame.to_csv(path, index=False)


def test_backtest_cli_prints_a_table_and_writes_json(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _hourly_csv(workdir / "h.csv", days=9)
    code = main(
        [
            "backtest",
            "--history",
            "h.csv",
            "--methods",
            "seasonal_naive_1d,seasonal_profile_1d",
            "--json",
            "bt.json",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 0
    assert "MASE" in out and "seasonal_profile_1d" in out
    data = json.loads((workdir / "bt.json").read_text())
    assert {d["method"] for d in data} == {"seasonal_naive_1d", "seasonal_profile_1d"}
    assert all(len(d["origins"]) == 4 for d in data)
    assert data[1]["scores"]["mase"] < data[0]["scores"]["mase"]  # the median beats one noisy day


def test_per_origin_scores_add_up_to_the_totals_and_name_the_bad_day() -> None:
    y = daily_cycle(10, noise=2.0)
    origins = protocol_origins(y)
    bad = origins[2]
    y[(y.index >= bad) & (y.index < bad + pd.Timedelta(days=1))] *= 1.5  # one day 50% up
    bt = backtest(lambda: SeasonalNaive("1d"), y, origins, 96, [0.1, 0.5, 0.9])
    days = bt.per_origin()
    assert [d["origin"] for d in days] == [o.isoformat() for o in origins]
    assert np.isclose(np.mean([d["mase"] for d in days]), bt.mase())
    assert np.isclose(np.mean([d["coverage_q0.9"] for d in days]), bt.coverage(0.9))
    worst = max(days, key=lambda d: d["mase"])
    assert worst["origin"] == bad.isoformat()
    assert worst["bias"] > 0.25 and worst["coverage_q0.9"] < 0.5


def test_backtest_cli_per_origin_and_max_history(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _hourly_csv(workdir / "h.csv", days=20)
    args = ["backtest", "--history", "h.csv", "--methods", "seasonal_naive_1d", "--no-progress"]
    code = main([*args, "--per-origin", "--max-history", "5d", "--json", "bt.json"])
    out, _ = capsys.readouterr()
    assert code == 0
    data = json.loads((workdir / "bt.json").read_text())
    assert len(data[0]["per_origin"]) == len(data[0]["origins"]) == 7
    assert out.count(" origin ") == 7 and "bias" in out
    with pytest.raises(SystemExit) as stop:  # refused as bench-forecast refuses it
        main([*args, "--max-history", "12h"])
    _, err = capsys.readouterr()
    assert stop.value.code == 2 and "--max-history" in err.strip().splitlines()[-1]


def test_backtest_cli_rejects_an_unknown_method(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    y = daily_cycle(5, step="1h")
    pd.DataFrame({"timestamp": y.index.astype(str), "value": y.values}).to_csv(
        workdir / "h.csv", index=False
    )
    code = main(["backtest", "--history", "h.csv", "--methods", "nonsense"])
    _, err = capsys.readouterr()
    assert code == 2 and "unknown estimator 'nonsense'" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.traces
def test_auto_beats_the_daily_naive_on_a_negative_control() -> None:
    from forecaster.benchmarks.accuracy import accuracy_rows, load_bench_series
    from tests.conftest import trace_path

    y = load_bench_series(trace_path("nab/aws_elb_request_count_5min.csv"))
    rows = {r.method: r for r in accuracy_rows(y, ["auto", "seasonal_naive_1d"])}
    assert rows["tiercast auto"].mase < rows["seasonal_naive_1d"].mase
    assert 0.8 <= rows["tiercast auto"].coverage_q09 <= 0.97


def test_trace_groups_follow_the_traces_readme() -> None:
    from forecaster.benchmarks.accuracy import trace_group

    assert trace_group("nab/nyc_taxi_passengers_30min.csv") == "nyc_taxi"
    assert trace_group("nab/aws_elb_request_count_5min.csv") == "aws_cloudwatch"
    assert trace_group("helios_earth/helios_earth_vc3sl_gpus_running_5min.csv") == "helios_earth"
    assert trace_group("bitbrains_rnd/x.csv") == "bitbrains"
    assert trace_group("pwa_nasa_ipsc/nasa_ipsc_busy_processors_5min.csv") == "nasa_ipsc"
    assert trace_group("bsc_marenostrum3/y.csv") == "marenostrum3"
    assert trace_group("new_folder/z.csv") == "new_folder"  # unknown folders: a group each


def test_group_scoring_averages_series_within_a_group_then_groups() -> None:
    from forecaster.benchmarks.accuracy import bootstrap_mean_ratio, summarize

    # Group g1 has three series (ratios 0.5, 0.5, 0.5), g2 one (ratio 1.0): the mean
    # over groups is 0.75 where a mean over series would say 0.625.
    rows = []
    for name in ("a", "b", "c"):
        rows += _rows(name, [5.0, 5.0], [10.0, 10.0], [20.0, 20.0], group="g1")
    rows += _rows("d", [10.0, 10.0], [10.0, 10.0], [30.0, 12.0], group="g2")
    summary = summarize(rows)
    assert summary.groups["g1"].ratio == pytest.approx(0.5)
    assert summary.groups["g1"].series == 3 and summary.groups["g2"].series == 1
    assert summary.groups["g2"].ratio == pytest.approx(1.0)
    assert summary.mean_ratio == pytest.approx(0.75)
    assert summary.groups["g2"].mase["prophet_default"] == pytest.approx(21 / 96)
    verdicts = summary.verdicts()
    assert "mean over 2 groups" in verdicts[0] and "0.750 (target <= 0.9): met" in verdicts[0]
    assert "worst group g2 ratio 1.000" in verdicts[1] and ": met" in verdicts[1]
    assert summary.groups["g1"].best_rival == "seasonal_naive_1d"
    spread = bootstrap_mean_ratio(rows, draws=300)
    assert spread is not None and spread.low <= 0.75 <= spread.high
    assert spread.groups["g1"] == pytest.approx((0.5, 0.5))  # every day 0.5: no spread
    assert "no group above 1.0" in spread.groups_line(summary)


def test_a_group_above_target_says_whether_its_test_days_could_explain_it() -> None:
    from forecaster.benchmarks.accuracy import bootstrap_mean_ratio, summarize

    # g1 loses to the naive model by 1.2 on every day; g2 by 1.1 on average, from one
    # bad day of four, so other days could have put it under 1.
    rows = _rows("a", [12.0] * 4, [10.0] * 4, [30.0] * 4, group="g1")
    rows += _rows("b", [8.0, 8.0, 8.0, 20.0], [10.0] * 4, [30.0] * 4, group="g2")
    summary = summarize(rows)
    spread = bootstrap_mean_ratio(rows, draws=1000)
    assert spread is not None
    assert spread.groups["g1"] == pytest.approx((1.2, 1.2))
    lo, hi = spread.groups["g2"]
    assert lo < 1.0 < hi
    line = spread.groups_line(summary)
    assert line.startswith("groups above 1.0: g1 1.200 (90% 1.200 to 1.200), g2 1.100")
    assert line.endswith("1 of 2 with the whole 90% interval above 1.0")


def test_coverage_outside_its_range_says_whether_its_test_days_could_explain_it() -> None:
    from forecaster.benchmarks.accuracy import COVERAGE_RANGE, bootstrap_mean_ratio, summarize

    # g1: six days at 0.94 and one event day at 0.2 (coverage 0.834, outside, but a draw
    # without the event day is inside); g2: every day at 0.5 (outside in every draw); g3:
    # inside.
    per_day = {"g1": [90] * 6 + [19], "g2": [48] * 7, "g3": [86] * 7}
    rows = []
    for group, below in per_day.items():
        group_rows = _rows(group, [8.0] * 7, [10.0] * 7, [30.0] * 7, group=group)
        group_rows[0].coverage_q09 = sum(below) / (96 * 7)
        group_rows[0].day_below = below
        group_rows[0].day_observed = [96] * 7
        rows += group_rows
    summary = summarize(rows)
    spread = bootstrap_mean_ratio(rows, draws=1000)
    assert spread is not None
    lo, hi = spread.coverage["g1"]
    assert lo < COVERAGE_RANGE[0] < hi
    assert spread.coverage["g2"] == pytest.approx((0.5, 0.5))
    line = spread.coverage_line(summary)
    assert line.startswith("q0.9 coverage outside [0.85, 0.95]: g2 0.500 (90% 0.500 to 0.500), g1")
    assert "g3" not in line and line.endswith("1 of 2 with the whole 90% interval outside")
    inside = [r for r in rows if r.group == "g3"]
    assert bootstrap_mean_ratio(inside, draws=100).coverage_line(summarize(inside)) == (  # type: ignore[union-attr]
        "q0.9 coverage in [0.85, 0.95] in every group"
    )


def _rows(
    series: str, mine: list[float], naive: list[float], other: list[float], group: str = ""
) -> list:
    from tests.bench_rows import bench_rows

    methods = {"tiercast auto": mine, "seasonal_naive_1d": naive, "prophet_default": other}
    return bench_rows(series, methods, group)


def test_a_rival_near_zero_on_one_series_does_not_decide_its_group() -> None:
    from forecaster.benchmarks.accuracy import bootstrap_mean_ratio, summarize

    # An idle tenant: a rival is almost perfect (0.03) where tiercast makes 0.3; on the
    # other series tiercast is better. Per-series ratios (10 and 0.83) would say 5.4.
    rows = _rows("idle", [28.8] * 3, [2.88] * 3, [50.0] * 3, group="g")
    rows += _rows("busy", [96.0] * 3, [115.2] * 3, [200.0] * 3, group="g")
    summary = summarize(rows)
    assert summary.ratios["idle"] == pytest.approx(10.0)
    assert summary.groups["g"].ratio == pytest.approx((0.3 + 1.0) / (0.03 + 1.2))
    spread = bootstrap_mean_ratio(rows, draws=200)
    assert spread is not None and spread.high == pytest.approx(summary.groups["g"].ratio)


def test_bootstrap_of_the_mean_ratio_resamples_test_days_paired_across_methods() -> None:
    from forecaster.benchmarks.accuracy import BenchRow, bootstrap_mean_ratio, summarize

    # Every day tiercast makes 0.8 of the best baseline's error: no draw can differ.
    steady = _rows("a", [8.0, 16.0, 40.0], [10.0, 20.0, 50.0], [30.0, 30.0, 60.0])
    spread = bootstrap_mean_ratio(steady, draws=500)
    assert spread is not None and spread.draws == 500
    assert spread.standard_error == pytest.approx(0.0, abs=1e-12)
    assert spread.low == pytest.approx(0.8) and spread.high == pytest.approx(0.8)
    assert spread.share_within_target == 1.0

    # One day where tiercast is far better: the ratio depends on whether it is drawn.
    lucky = _rows("b", [10.0, 10.0, 2.0, 10.0], [10.0, 10.0, 10.0, 10.0], [20.0] * 4)
    point = summarize(steady + lucky).mean_ratio
    spread = bootstrap_mean_ratio(steady + lucky, draws=2000, seed=1)
    assert spread is not None
    assert 0.02 < spread.standard_error < 0.2
    assert spread.low < point < spread.high
    assert spread == bootstrap_mean_ratio(steady + lucky, draws=2000, seed=1)  # seeded

    # Rows without per-day errors (an older JSON) give no bootstrap.
    bare = [BenchRow(r.series, r.method, r.mase, 0.0, 0.9, 0.0) for r in steady]
    assert bootstrap_mean_ratio(bare) is None


def test_bench_rows_keep_per_day_errors_that_add_up_to_the_mase() -> None:
    from forecaster.benchmarks.accuracy import accuracy_rows

    index = pd.date_range("2026-01-01", periods=12 * 96, freq="15min", name="timestamp")
    phase = np.arange(len(index)) % 96
    y = pd.Series(10 + np.sin(phase / 96 * 2 * np.pi), index=index, name="s")
    y.iloc[-50:-40] = np.nan  # NaN actuals are left out of both sums
    y = y + np.random.default_rng(0).normal(0, 0.1, len(y))
    rows = accuracy_rows(y, ["seasonal_naive_1d"])
    row = rows[0]
    assert len(row.day_errors) == len(row.day_counts) == 4
    assert sum(row.day_counts) == 4 * 96 - 10
    assert sum(row.day_errors) / sum(row.day_counts) == pytest.approx(row.mase)


@pytest.mark.parametrize(
    ("method", "message"),
    [("nonsense", "unknown estimator 'nonsense'"), ("seasonal_naive_1d", "is a rival")],
)
def test_bench_forecast_rejects_a_method_it_cannot_test(
    method: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["bench-forecast", "--method", method, "--speed-count", "0"])
    _, err = capsys.readouterr()
    assert code == 2 and message in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.traces
def test_bench_forecast_tests_another_method_with_its_uncertainty(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "bench-forecast",
            "--method",
            "seasonal_profile_7d",
            "--groups",
            "nasa_http,servegen",
            "--rivals",
            "seasonal_naive_1d,seasonal_naive_7d",
            "--no-cache",
            "--speed-count",
            "0",
            "--json",
            "b.json",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 0
    assert "tiercast seasonal_profile_7d" in out and "| nasa_http | 1 |" in out
    assert "uncertainty of the mean ratio" in out
    data = json.loads((workdir / "b.json").read_text())
    spread = data["mean_ratio_uncertainty"]
    mean = data["mean_ratio"]
    assert spread["low"] <= mean <= spread["high"] and spread["standard_error"] > 0


class Recorder(BaseEstimator):
    """A fake that records what each fit was handed (and its history window), then forecasts 0."""

    name = "recorder"
    seen: ClassVar[list[tuple[str, pd.Timestamp, pd.Timestamp, str]]] = []
    """(method, first and last timestamp of the training data, window) per fit."""

    def __init__(self, method: str = "", window: str = "28d") -> None:
        self.method = method
        self.window = window

    def fit(self, history: pd.Series) -> Recorder:
        y = self._prepare(history)
        Recorder.seen.append((self.method, y.index[0], y.index[-1], self.window))
        return self

    def predict(self, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        horizon, qs = self._predict_args(horizon, quantiles)
        return self._frame(np.zeros((horizon, len(qs))), qs, horizon)


def _recording(
    monkeypatch: pytest.MonkeyPatch,
) -> list[tuple[str, pd.Timestamp, pd.Timestamp, str]]:
    from forecaster.benchmarks import accuracy

    seen: list[tuple[str, pd.Timestamp, pd.Timestamp, str]] = []
    monkeypatch.setattr(Recorder, "seen", seen)
    monkeypatch.setattr(accuracy, "make", lambda name: Recorder(method=name))
    return seen


@pytest.mark.parametrize("days", [7, 15, 21])
def test_max_history_cuts_every_methods_training_at_every_origin(
    monkeypatch: pytest.MonkeyPatch, days: int
) -> None:
    from forecaster.benchmarks.accuracy import BASELINES, TIERCAST, accuracy_rows

    seen = _recording(monkeypatch)
    y = daily_cycle(40, noise=1.0)
    step = pd.Timedelta("15min")
    cut = pd.Timedelta(days=days)
    rows = accuracy_rows(y, ["auto", *BASELINES], max_history=cut)
    origins = protocol_origins(y)
    expected = (
        ["auto", *BASELINES]
        if days >= 14
        else [m for m in ("auto", *BASELINES) if m != "seasonal_naive_7d"]
    )
    assert [r.method for r in rows] == [TIERCAST + "auto", *expected[1:]]
    by_method: dict[str, list[tuple[pd.Timestamp, pd.Timestamp]]] = {}
    for method, first, last, window in seen:
        by_method.setdefault(method, []).append((first, last))
        # The rivals' own history window is the cut itself; the method under test keeps its own.
        assert window == ("28d" if method == "auto" else f"{int(cut.total_seconds())}s")
    assert sorted(by_method) == sorted(expected)
    for method, spans in by_method.items():
        assert len(spans) == len(origins), method
        for origin, (first, last) in zip(origins, spans, strict=True):
            assert last == origin - step, method
            assert first == origin - cut, method  # exactly the last `days` days, for everyone


def test_without_max_history_every_method_trains_on_all_of_the_history(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from forecaster.benchmarks.accuracy import BASELINES, accuracy_rows

    seen = _recording(monkeypatch)
    y = daily_cycle(40, noise=1.0)
    accuracy_rows(y, ["auto", *BASELINES])
    assert {m for m, *_ in seen} == {"auto", *BASELINES}
    assert all(first == y.index[0] for _, first, _, _ in seen)
    for method, _, _, window in seen:
        if method != "auto":  # no rival keeps a shorter window of its own (28 days before)
            assert pd.Timedelta(window) > y.index[-1] - y.index[0]


def test_max_history_gives_each_origin_the_mase_scale_of_its_cut() -> None:
    y = daily_cycle(30, noise=1.0)
    y.iloc[: 10 * 96] += np.random.default_rng(1).normal(0, 30.0, 10 * 96)  # a noisy start
    origins = protocol_origins(y)
    full = backtest(lambda: SeasonalNaive("1d"), y, origins, 96, [0.5])
    short = backtest(
        lambda: SeasonalNaive("1d"), y, origins, 96, [0.5], max_history=pd.Timedelta(days=15)
    )
    for i, origin in enumerate(origins):
        train = y[(y.index >= origin - pd.Timedelta(days=15)) & (y.index < origin)]
        assert short.scales[i] == pytest.approx(naive_scale(train.to_numpy(), 96))
    assert (short.scales < full.scales).all()  # the noisy start is beyond the cut


@pytest.mark.parametrize("value", ["3x", "12h"])
def test_bench_forecast_refuses_a_max_history_that_is_not_a_day_or_more(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["bench-forecast", "--max-history", value, "--speed-count", "0"])
    _, err = capsys.readouterr()
    assert stop.value.code == 2 and "--max-history" in err


def test_series_that_share_test_days_are_resampled_together() -> None:
    from dataclasses import replace

    from forecaster.benchmarks.accuracy import bootstrap_mean_ratio

    # Two tenants of one group and one week: the same day is hard for tiercast on both.
    mine, naive = [40.0, 10.0, 10.0, 10.0], [10.0] * 4
    rows = _rows("t1", mine, naive, [50.0] * 4, group="g") + _rows(
        "t2", mine, naive, [50.0] * 4, group="g"
    )
    dates = ["2026-01-05", "2026-01-06", "2026-01-07", "2026-01-08"]
    dated = [replace(r, day_dates=dates) for r in rows]
    joint = bootstrap_mean_ratio(dated, draws=3000, seed=3)
    apart = bootstrap_mean_ratio(rows, draws=3000, seed=3)
    assert joint is not None and apart is not None
    # Drawn apart, the two tenants average each other's luck away: an interval narrower
    # than the one week of data supports (by about the square root of two).
    assert joint.standard_error > 1.25 * apart.standard_error
    one = bootstrap_mean_ratio(dated[:3], draws=3000, seed=3)
    assert one is not None and joint.standard_error == pytest.approx(one.standard_error, rel=0.1)
