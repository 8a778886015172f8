"""The growth quantile (scaler.planning.growth), the near-term rule that uses it, the reactive
frontier (scaler.replay.frontier) and the replay at other lead times."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from forecaster.forecasting import SeriesForecast
from scaler.planning.growth import (
    GrowthBacktest,
    actual_growth,
    backtest_growth,
    predicted_growth,
    walk_forward,
)
from scaler.planning.margins import learn_margin
from scaler.replay.baselines import reactive_requests
from scaler.replay.frontier import HEADROOMS, reactive_frontier
from scaler.replay.protocol import ReplaySetup, prepare_trace
from scaler.replay.scoring import Score
from scaler.replay.simulating import run_replay

STEP = pd.Timedelta(minutes=5)


def diurnal(days: int, seed: int = 0, noise: float = 0.05) -> pd.Series:
    """Demand with a morning ramp (06:00-09:00 from 20 to 60) and an evening decline."""
    idx = pd.date_range("2026-01-05", periods=days * 288, freq=STEP, name="timestamp")
    hour = idx.hour + idx.minute / 60
    level = np.interp(hour, [0, 6, 9, 17, 21, 24], [20, 20, 60, 60, 20, 20])
    rng = np.random.default_rng(seed)
    return pd.Series(level * (1 + noise * rng.standard_normal(len(idx))), index=idx, name="rps")


def _forecast(values: np.ndarray, start: pd.Timestamp) -> SeriesForecast:
    idx = pd.date_range(start, periods=len(values), freq=STEP, name="timestamp")
    frame = pd.DataFrame({"q0.1": values * 0.9, "q0.5": values, "q0.9": values * 1.1}, index=idx)
    return SeriesForecast(
        "rps", frame, "test", "test", STEP, start - STEP, float(values[0]), float(values[0]), 100
    )


def test_predicted_growth_is_the_forecast_medians_rise_over_the_lead_time() -> None:
    start = pd.Timestamp("2026-01-05 06:00")
    fc = _forecast(np.array([20.0, 22.0, 30.0, 40.0, 50.0]), start)
    # Newest observation one step before the forecast: its base is the first value (20),
    # and the window of 2 + 1 steps ahead of it peaks at 30.
    assert predicted_growth(fc, start - STEP, STEP, 2) == pytest.approx(30.0 / 20.0)
    # From the second step: base 22, window up to 50.
    assert predicted_growth(fc, start + STEP, STEP, 2) == pytest.approx(50.0 / 22.0)
    # A median that gives no scale: 1.
    assert predicted_growth(_forecast(np.zeros(5), start), start, STEP, 2) == 1.0


def test_actual_growth_is_the_peak_of_the_next_lead_time_over_now() -> None:
    got = actual_growth(np.array([10.0, 20.0, 15.0, 0.0, 5.0]), 1)
    assert got[:3].tolist() == pytest.approx([2.0, 0.75, 1 / 3])
    assert np.isnan(got[3]) and np.isnan(got[4])


@pytest.mark.slow
def test_the_growth_quantile_is_calibrated_out_of_sample() -> None:
    # Calibrated on the first five days of origins, the q0.9 growth covers the actual
    # growth of the next five on about 90% of the windows.
    y = diurnal(14, seed=1)
    run = walk_forward(
        "seasonal_naive_1d", pd.Timedelta(days=10), pd.Timedelta(hours=1), pd.Timedelta(days=28)
    )
    bt = run(y.to_numpy(), pd.DatetimeIndex(y.index), 3)
    assert bt is not None and bt.refreshes == 240
    half = len(bt.origins) // 2

    def part(sl: slice) -> GrowthBacktest:
        return replace(
            bt,
            origins=bt.origins[sl],
            positions=bt.positions[sl],
            predicted=bt.predicted[sl],
            actual=bt.actual[sl],
        )

    first, second = part(slice(0, half)), part(slice(half, None))
    for level in (0.75, 0.9):
        growth = first.calibrate(level)
        corr = np.array([growth.correction(t) for t in second.origins])
        ok = np.isfinite(second.actual)
        covered = float(np.mean(second.actual[ok] <= second.predicted[ok] * corr[ok]))
        assert abs(covered - level) <= 0.05, (level, covered)


@pytest.mark.slow
def test_a_morning_ramp_gets_more_room_than_an_evening_decline() -> None:
    y = diurnal(8, seed=2)
    bt = backtest_growth(
        y.to_numpy(),
        pd.DatetimeIndex(y.index),
        6,
        lambda w, h: _seasonal(w, h),
        "seasonal_naive_1d",
        pd.Timedelta(days=5),
        pd.Timedelta(hours=1),
        pd.Timedelta(days=28),
    )
    assert bt is not None
    growth = bt.calibrate(0.9)
    hours = np.asarray(bt.origins.hour)
    factor = bt.predicted * np.array([growth.correction(t) for t in bt.origins])
    morning = factor[(hours >= 6) & (hours < 8)].mean()
    evening = factor[(hours >= 17) & (hours < 20)].mean()
    assert morning > 1.2 and morning > evening + 0.2


def _seasonal(window: pd.Series, horizon: pd.Timedelta) -> SeriesForecast:
    """Yesterday's values as the forecast (the seasonal naive model, without the registry)."""
    from forecaster.forecasting import forecast_series

    return forecast_series(window, horizon, (0.5,), "seasonal_naive_1d")


@pytest.mark.slow
def test_the_forecasts_growth_is_used_near_term_where_it_serves_as_well_for_less() -> None:
    # On a series whose ramps come at the same hour every day, the growth of a seasonal
    # forecast serves as well as reacting for less than any reactive margin does.
    y = diurnal(8, seed=3, noise=0.02)
    backtest = walk_forward(
        "seasonal_naive_1d", pd.Timedelta(days=5), pd.Timedelta(hours=1), pd.Timedelta(days=28)
    )
    m = learn_margin(
        y, 1800, 0.005, signal="rps", floor_window=pd.Timedelta(hours=1), backtest=backtest
    )
    assert m is not None and m.growth is not None and m.forecast_shape
    assert m.growth_cost_ratio is not None and m.flat_cost_ratio is not None
    assert m.growth_cost_ratio < m.flat_cost_ratio
    assert m.source.startswith("forecast growth q")
    assert "less than newest observation x margin" in m.describe()
    # Without a backtest the rule is reacting with a margin, and the reason says why.
    flat = learn_margin(y, 1800, 0.005, signal="rps", floor_window=pd.Timedelta(hours=1))
    assert flat is not None and flat.growth is None
    assert flat.source == "newest observation x margin"


def _score(cost: float, unserved: float, reversals: int = 0) -> Score:
    return Score("p", cost, 1.0, 1.0, 0.0, unserved, 0.0, 0, reversals)


def test_saving_at_matched_service_interpolates_the_frontier() -> None:
    from scaler.replay.frontier import Frontier

    f = Frontier(
        (0.0, 0.1, 0.2, 0.3),
        (_score(100, 0.04, 9), _score(110, 0.02, 5), _score(120, 0.01, 3), _score(125, 0.01, 2)),
    )
    # Headroom 30% serves no better than 20% for more: not on the efficient frontier.
    assert [h for h, _, _ in f.efficient()] == [0.2, 0.1, 0.0]
    m = f.match(_score(99, 0.015))
    assert m.frontier_cost == pytest.approx(115.0) and m.saving == pytest.approx(16 / 115)
    # The point of the same service: the least headroom leaving no more unserved.
    assert m.headroom == 0.2 and m.reversals == 3 and not m.beyond
    better = f.match(_score(130, 0.0))
    assert better.beyond and better.frontier_cost == 120.0 and better.saving < 0
    worse = f.match(_score(90, 0.5))
    assert worse.frontier_cost == 100.0 and worse.headroom == 0.0


@pytest.mark.slow
def test_the_frontier_replays_the_reactive_rule_at_every_headroom() -> None:
    trace = prepare_trace(diurnal(6), 1.0)
    setup = ReplaySetup()
    f = reactive_frontier(trace, setup)
    assert f.headrooms == HEADROOMS and len(HEADROOMS) == 41 and HEADROOMS[-1] == 1.0
    costs = [s.cost for s in f.scores]
    assert costs == sorted(costs)
    # The 20% point is the reactive baseline itself.
    at20 = f.scores[HEADROOMS.index(0.2)]
    base = reactive_requests(trace, setup)
    assert at20.cost == pytest.approx(float(base.sum()) * setup.node_price_per_step)


@pytest.mark.slow
def test_at_a_30_minute_lead_predictive_adds_nodes_before_the_ramp_and_reactive_after() -> None:
    # The same morning ramp every day (06:00-09:00): the planner, forecasting it, asks for
    # nodes before observed demand rises; reacting asks once it has risen.
    y = diurnal(9, seed=4, noise=0.01) * 4
    setup = replace(
        ReplaySetup(), lead_time_s=1800, forecast_method="seasonal_naive_1d", test_days=1
    )
    trace = prepare_trace(y, 1.0, setup)
    replay = run_replay(trace, setup, ("reactive", "predictive"))
    test = trace.test_index
    demand = trace.demand[trace.test_start :]
    overnight = (test.hour >= 2) & (test.hour < 5)
    base_demand = demand[overnight].max()
    rises = int(np.flatnonzero((test.hour >= 5) & (demand > base_demand))[0])

    def first_raise(policy: str) -> int:
        req = replay.runs[policy].requested_total
        base = req[overnight].max()
        return int(np.flatnonzero((test.hour >= 5) & (req > base))[0])

    assert first_raise("predictive") < rises < first_raise("reactive"), (
        test[first_raise("predictive")],
        test[rises],
        test[first_raise("reactive")],
    )
    assert replay.matched["predictive"].saving > 0


@pytest.mark.parametrize("rise", [0.0, 0.1, 0.5, 2.0])
def test_a_forecast_that_rises_more_never_lowers_capacity(rise: float) -> None:
    # The growth rule on a hand-made fleet: scaling the forecast's future up (every
    # quantile, by a factor growing from 1 at its first step) never lowers the need or
    # the nodes requested now.
    from scaler.planning.growth import Growth
    from scaler.planning.margins import Margin
    from tests.planning_inputs import plan_for
    from tests.test_planning import NOW, _fleet, forecast, history

    config, _, inventory = _fleet()
    growth = Growth(0.9, {}, 1.1, False, 500, 24, "fake", 3, STEP)
    margin = Margin("rps", 0.05, 0.0, None, 0.005, 3.0, True, growth=growth)
    level = 40 + 20 * np.sin(np.linspace(0, 3, 30))
    seen = history([40.0] * 300)
    base = forecast(level, 0.1, 40, 40)
    ramp = 1 + rise * np.linspace(0, 1, 30)
    up = forecast(level * ramp, 0.1, 40, 40)

    def plan(fc: SeriesForecast) -> tuple[np.ndarray, int]:
        p = plan_for(
            config, {"rps": fc}, inventory, NOW, history={"rps": seen}, margins={"rps": margin}
        )
        return np.array(p.demand_gpus["H100-80GB"]), sum(a.target_nodes for a in p.actions)

    need0, nodes0 = plan(base)
    need1, nodes1 = plan(up)
    assert np.all(need1 >= need0 - 1e-9) and nodes1 >= nodes0


@pytest.mark.parametrize(
    "value, words",
    [("7m", "multiple of 5 minutes"), ("7h", "from 0 to 6 hours"), ("soon", "--lead-time")],
)
def test_a_bad_lead_time_is_one_line_naming_the_flag(workdir, capsys, value, words) -> None:
    from scaler.cli import main

    diurnal(6).to_frame("value").to_csv(workdir / "d.csv")
    code = main(["simulate", "--history", "d.csv", "--lead-time", value])
    err = capsys.readouterr().err.strip()
    assert code == 2 and words in err and "--lead-time" in err and "\n" not in err


@pytest.mark.parametrize("value", ["12h", "91d", "soon", "=1d"])
def test_a_bad_growth_backtest_is_one_line_naming_the_flag(workdir, capsys, value) -> None:
    from scaler.cli import main

    diurnal(6).to_frame("value").to_csv(workdir / "d.csv")
    code = main(["simulate", "--history", "d.csv", "--growth-backtest", value])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--growth-backtest" in err and "\n" not in err


@pytest.mark.slow
def test_growth_backtest_0_replays_the_rule_without_the_forecasts_growth(workdir, capsys) -> None:
    # The ablation of the forecast's growth itself: the same planner, newest observation x
    # a learnt margin, and the reason says so.
    from scaler.cli import main

    diurnal(9).to_frame("value").to_csv(workdir / "d.csv")
    args = ["simulate", "--history", "d.csv", "--policies", "reactive,predictive"]
    args += ["--method", "seasonal_naive_1d", "--timeline-out", "", "--chart-out", ""]
    assert main([*args, "--growth-backtest", "0"]) == 0
    flat = capsys.readouterr().out
    assert "predictive: near term newest observation x margin" in flat
    assert main([*args, "--growth-backtest", "2d"]) == 0
    grown = capsys.readouterr().out
    assert "of the growth over the lead time from 'seasonal_naive_1d' forecasts" in grown


def test_an_unknown_ablation_policy_is_refused() -> None:
    from forecaster.errors import BadInputError

    trace = prepare_trace(diurnal(6), 1.0)
    with pytest.raises(BadInputError, match=r"predictive\[METHOD\]"):
        run_replay(trace, ReplaySetup(), ("reactive", "predictive[]"))


@pytest.mark.slow
def test_simulate_replays_your_own_pools_at_their_lead_times(workdir, capsys) -> None:
    # A config of reserved + on-demand pools of 4-GPU nodes, 30 minutes to boot: the replay
    # runs on them and says so, and every lead time of --lead-time gets its table.
    from scaler.cli import main

    diurnal(6).to_frame("value").to_csv(workdir / "d.csv")
    (workdir / "fleet.yaml").write_text(
        "signals:\n  - {name: rps, step_s: 300}\n"
        "workloads:\n  - {name: chat, signal: rps, gpu_model: H100-80GB, units_per_replica: 10}\n"
        "pools:\n"
        "  - {name: committed, tier: reserved, gpu_model: H100-80GB, gpus_per_node: 4,"
        " price_per_gpu_hour: 2.0, lead_time_s: 1800, min_nodes: 1, max_nodes: 1}\n"
        "  - {name: elastic, tier: on-demand, gpu_model: H100-80GB, gpus_per_node: 4,"
        " price_per_gpu_hour: 3.5, lead_time_s: 1800, max_nodes: 40}\n"
        "policy: {horizon_s: 7200}\nforecast: {method: last_value}\n"
    )
    code = main(
        [
            "simulate",
            "--history",
            "d.csv",
            "--config",
            "fleet.yaml",
            "--policies",
            "reactive,predictive",
            "--timeline-out",
            "",
            "--chart-out",
            "",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "config fleet.yaml" in out and "committed" in out and "lead 30 min" in out
    assert "predictive-tiers" in out and "saving at matched %" in out
    code = main(
        [
            "simulate",
            "--history",
            "d.csv",
            "--units-per-gpu",
            "10",
            "--method",
            "last_value",
            "--policies",
            "reactive",
            "--lead-time",
            "10m,30m",
            "--timeline-out",
            "",
            "--chart-out",
            "",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "lead 10 min" in out and "lead 30 min" in out
