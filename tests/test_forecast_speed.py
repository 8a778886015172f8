"""The faster forecasting paths give the answers of the straightforward ones.

Each speed-up of ``auto`` and its candidates is checked against a reference
computation on hand-made inputs: scikit-learn's own quantile boosting for
:mod:`forecaster.fast_boosting`, numpy's quantile for its per-leaf quantile, and the
whole ``auto`` selection (chosen candidate, scores and forecast quantiles) with the
fast parts swapped back for the library's. The benchmark's CPU column, its count of
what ``auto`` chose and the statsforecast rival's windows are checked here too.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor

import forecaster.boosting as boosting
import forecaster.estimators as estimators
from forecaster.backtesting import backtest, protocol_origins
from forecaster.benchmarks.accuracy import (
    QUANTILES,
    BenchRow,
    chosen_counts,
    format_chosen,
    format_fit_times,
    statsforecast_backtest,
)
from forecaster.errors import BadInputError
from forecaster.estimators import make
from forecaster.fast_boosting import QuantileGradientBoosting, one_quantile, one_thread
from forecaster.selection import AutoSelector


def _boosting_args(q: float) -> dict:
    return dict(
        loss="quantile",
        quantile=q,
        max_iter=15,
        max_leaf_nodes=15,
        min_samples_leaf=5,
        early_stopping=False,
        random_state=0,
    )


@pytest.mark.parametrize("q", [0.1, 0.5, 0.9, 0.07])
def test_quantile_boosting_equals_scikit_learn(q: float) -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 4))
    y = 2.0 * X[:, 0] + np.abs(X[:, 1]) + rng.standard_t(3, size=300)
    with one_thread():  # OpenMP threads on a busy machine cost seconds
        reference = HistGradientBoostingRegressor(**_boosting_args(q)).fit(X, y).predict(X)
        fast = QuantileGradientBoosting(**_boosting_args(q)).fit(X, y).predict(X)
    np.testing.assert_array_equal(fast, reference)


def test_one_quantile_equals_numpy() -> None:
    rng = np.random.default_rng(5)
    cases = [np.array([4.0]), np.array([1.0, 1.0, 2.0]), np.array([-3.0, 7.5])]
    for _ in range(120):
        n = int(rng.integers(1, 60))
        values = rng.normal(size=n) * 10.0 ** rng.uniform(-6, 6)
        cases.append(np.round(values) if n % 3 == 0 else values)
    for values in cases:
        for q in (0.0, 0.1, 0.5, 0.9, 1.0, 0.3333, float(rng.uniform())):
            assert one_quantile(values, q) == float(np.quantile(values, q)), (values, q)
    with_nan = np.array([1.0, np.nan, 3.0])
    assert math.isnan(one_quantile(with_nan, 0.5))


def _hand_made(days: int = 8, step: str = "1h", seed: int = 0, noise: float = 3.0) -> pd.Series:
    """A daily cycle, a weekday effect, a slow trend and noise: gbm has something to learn."""
    index = pd.date_range(
        "2026-03-02", periods=days * (pd.Timedelta("1D") // pd.Timedelta(step)), freq=step
    )
    hours = np.arange(len(index)) * (pd.Timedelta(step) / pd.Timedelta("1h"))
    rng = np.random.default_rng(seed)
    values = (
        50.0
        + 20.0 * np.sin(2 * np.pi * hours / 24)
        + 6.0 * (index.day_of_week >= 5)
        + 0.05 * hours
        + rng.normal(0.0, noise, len(index))
    )
    return pd.Series(values, index=index, name=f"demand{seed}")


@pytest.mark.slow
def test_gbm_forecast_equals_the_library_path(monkeypatch: pytest.MonkeyPatch) -> None:
    _sklearn_gbm(monkeypatch)
    y = _hand_made()
    fast = make("gbm").fit(y).predict(30, [0.1, 0.5, 0.9]).to_numpy()
    monkeypatch.setattr(boosting, "QuantileGradientBoosting", HistGradientBoostingRegressor)
    reference = make("gbm").fit(y).predict(30, [0.1, 0.5, 0.9]).to_numpy()
    np.testing.assert_array_equal(fast, reference)


@pytest.mark.slow
def test_auto_selection_equals_the_library_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chosen candidate, every score and the forecast quantiles, with gbm among the
    candidates, equal to 1e-9 with the fast parts swapped back for scikit-learn's."""

    def run() -> tuple[str, dict, np.ndarray]:
        est = AutoSelector(slow_candidates=("gbm",)).fit(y)
        return est.chosen_, est.scores_, est.predict(48, [0.1, 0.5, 0.9]).to_numpy()

    _sklearn_gbm(monkeypatch)
    y = _hand_made(days=9, seed=1)
    chosen, scores, quantiles = run()
    assert "gbm" in scores  # the boosting candidate was backtested
    monkeypatch.setattr(boosting, "QuantileGradientBoosting", HistGradientBoostingRegressor)
    ref_chosen, ref_scores, ref_quantiles = run()
    assert chosen == ref_chosen
    assert scores == ref_scores
    np.testing.assert_allclose(quantiles, ref_quantiles, rtol=0, atol=1e-9)


def test_backtest_keeps_cpu_seconds_and_labels() -> None:
    y = _hand_made(days=15, step="15min")
    origins = protocol_origins(y)
    bt = backtest(lambda: make("seasonal_naive_1d"), y, origins, 96, QUANTILES)
    assert bt.labels == ["seasonal_naive_1d"] * len(origins)
    assert bt.cpu_seconds >= 0.0 and math.isfinite(bt.cpu_seconds)


def _row(method: str, chosen: list[str], cpu: float = 1.0) -> BenchRow:
    return BenchRow(
        "s",
        method,
        0.5,
        0.1,
        0.9,
        2.0,
        day_errors=[1.0] * len(chosen),
        day_counts=[96] * len(chosen),
        cpu_seconds=cpu,
        chosen=chosen,
    )


def test_chosen_counts_split_combinations_into_members() -> None:
    rows = [
        _row(
            "tiercast auto", ["gbm", "median(gbm+theta+seasonal_naive_1d)", "ensemble(theta+gbm)"]
        ),
        _row("seasonal_naive_1d", ["seasonal_naive_1d"] * 3),
    ]
    counts = chosen_counts(rows)
    assert counts == {"gbm": (1, 2), "theta": (0, 2), "seasonal_naive_1d": (0, 1)}
    assert "| gbm | 1 | 2 |" in format_chosen(rows)


def test_fit_times_show_cpu_per_fit_and_a_dash_when_unmeasured() -> None:
    table = format_fit_times(
        [_row("tiercast auto", ["gbm"] * 4, cpu=2.0), _row("mstl", ["x"], cpu=math.nan)]
    )
    assert "| tiercast auto | 0.500 | 4 | 0.500 | 0.500 | 2.0 | 2.0 |" in table
    assert "| mstl | 0.500 | 1 | 2.000 | - | 2.0 | - |" in table


class FakeServer:
    """Stands in for the statsforecast worker: the mean is the window's last value, the
    80% interval +-1; records each window it is sent."""

    def __init__(self) -> None:
        self.windows: list[tuple[str, list[int], np.ndarray]] = []

    def forecast(self, model: str, season: list[int], h: int, y: np.ndarray) -> dict:
        self.windows.append((model, season, y))
        if model == "autotheta":
            return {"error": "ValueError: no"}
        last = float(y[-1])
        return {"mean": [last] * h, "lo": [last - 1.0] * h, "hi": [last + 1.0] * h, "cpu": 0.25}


def test_statsforecast_backtest_windows_and_quantiles() -> None:
    y = _hand_made(days=22, step="15min")
    y.iloc[-200] = np.nan  # a gap inside the last training windows: filled, never sent as NaN
    origins = protocol_origins(y)
    server = FakeServer()
    bt = statsforecast_backtest(server, "statsforecast_mstl", y, origins, pd.Timedelta(days=14))  # type: ignore[arg-type]
    assert len(server.windows) == len(origins)
    for (model, season, window), origin in zip(server.windows, origins, strict=True):
        assert model == "mstl" and not np.isnan(window).any()
        assert len(window) == 14 * 96 and season == [96, 672]
        assert window[-1] == y[y.index < origin].iloc[-1]
    assert bt.cpu_seconds == pytest.approx(0.25 * len(origins))
    first = bt.forecasts[0]
    np.testing.assert_allclose(first[:, 1] - first[:, 0], 1.0)
    np.testing.assert_allclose(first[:, 2] - first[:, 1], 1.0)
    # A failed window falls back to the daily seasonal naive forecast, noted.
    failed = statsforecast_backtest(server, "statsforecast_autotheta", y, origins[:1])  # type: ignore[arg-type]
    assert failed.notes and "seasonal naive" in failed.notes[0]
    cut = y[y.index < origins[0]].to_numpy()[-96:]
    np.testing.assert_allclose(failed.forecasts[0][:, 1], cut)


def _statsforecast_python() -> str | None:
    given = os.environ.get("TIERCAST_STATSFORECAST_PYTHON")
    if given:
        return given
    try:
        import statsforecast  # noqa: F401
    except ImportError:
        return None
    return sys.executable


@pytest.mark.slow
def test_statsforecast_worker_answers_a_window() -> None:
    """The real worker, where an interpreter with statsforecast is at hand (it needs pandas < 3)."""
    python = _statsforecast_python()
    if python is None:
        pytest.skip("no interpreter with statsforecast (set TIERCAST_STATSFORECAST_PYTHON)")
    from forecaster.benchmarks.accuracy import StatsforecastServer

    server = StatsforecastServer(python)
    try:
        y = 10 + np.sin(np.arange(4 * 96) * 2 * np.pi / 96)
        reply = server.forecast("mstl", [96], 96, y)
        bad = server.forecast("nope", [96], 96, y)
    finally:
        server.close()
    assert len(reply["mean"]) == 96 and reply["cpu"] >= 0
    assert np.all(np.array(reply["lo"]) <= np.array(reply["hi"]))
    assert "error" in bad
    assert json.dumps(reply)  # plain JSON back


def test_worker_imports_nothing_of_the_project() -> None:
    source = (
        Path(__file__).parents[1] / "forecaster/benchmarks/statsforecast_worker.py"
    ).read_text()
    assert "from forecaster" not in source and "import forecaster" not in source


@pytest.mark.slow
def test_theta_backtest_holds_the_oldest_fit_as_update_does() -> None:
    """Theta's backtest fits once, at the oldest origin; every later origin's forecast is the
    one that fitted model moved onto that origin's history by ``update`` gives (the
    reference), and the oldest origin's is a plain refit's."""
    import copy

    from forecaster.statistical import ThetaForecaster

    y = _hand_made(days=10, step="1h", seed=2)
    origins = [len(y) - 24 - 24 * k for k in range(4)]
    got = ThetaForecaster().backtest_medians(y, origins, 24)
    oldest = min(origins)
    base = ThetaForecaster().fit(y.iloc[:oldest])
    for row, o in zip(got, origins, strict=True):
        if o == oldest:
            expected = base.median(24)
        else:
            moved = copy.deepcopy(base).update(y.iloc[:o])
            assert moved.alpha_ == base.alpha_  # held, not estimated again
            expected = moved.median(24)
        np.testing.assert_allclose(row, expected, rtol=0, atol=1e-9)


@pytest.mark.slow
def test_auto_builds_the_median_model_it_backtested() -> None:
    """A chosen gbm is built as its median model alone (the one its backtests scored), and
    auto's median is that model's forecast; the band still comes from the residuals."""
    y = _hand_made(days=9, seed=4, noise=12.0)  # noisy: repeating yesterday doubles the noise
    est = AutoSelector(candidates=("recent_level",), slow_candidates=("gbm",), combine="select")
    est.fit(y)
    members = [m for m, _ in est.model_.fitted_] if hasattr(est.model_, "fitted_") else [est.model_]
    gbm = [m for m in members if m.name == "gbm"]
    assert gbm and all(m.trained_quantiles_ == [0.5] for m in gbm)
    frame = est.predict(24, [0.1, 0.5, 0.9]).to_numpy()
    np.testing.assert_allclose(frame[:, 1], est.model_.predict(24, [0.5]).to_numpy()[:, 0])
    assert (frame[:, 2] > frame[:, 0]).all()


def test_settings_take_a_list_for_a_tuple_of_numbers() -> None:
    assert make("gbm(quantiles=[0.5])").get_params()["quantiles"] == (0.5,)
    assert make("gbm(quantiles=[0.1, 0.9], max_iter=5)").get_params()["max_iter"] == 5
    with pytest.raises(Exception, match="quantiles must be tuple"):
        make('gbm(quantiles=["a"])')


@pytest.mark.slow
def test_prefix_cache_gives_the_answers_of_refitting() -> None:
    """Two fits a day apart on one history (as the growth backtest's refreshes): the second,
    served from the backtests of the first where the history before an origin is the same,
    chooses, scores and forecasts as with nothing cached (to 1e-9)."""
    from forecaster.selection import PREFIX_CACHE

    y = _hand_made(days=9, seed=6, noise=8.0)
    first, second = y.iloc[: -24 * 2], y.iloc[:-24]

    def fit(history: pd.Series) -> AutoSelector:
        est = AutoSelector(slow_candidates=("gbm", "theta"), max_origins=6, slow_origins=3)
        return est.fit(history)

    PREFIX_CACHE.clear()
    fresh = fit(second)
    assert PREFIX_CACHE.hits == 0
    PREFIX_CACHE.clear()
    fit(first)
    cached = fit(second)
    assert PREFIX_CACHE.hits > 0
    assert cached.chosen_ == fresh.chosen_ and cached.scores_ == fresh.scores_
    np.testing.assert_allclose(cached.residuals_, fresh.residuals_, rtol=0, atol=1e-9)
    np.testing.assert_allclose(
        cached.predict(48, [0.1, 0.5, 0.9]).to_numpy(),
        fresh.predict(48, [0.1, 0.5, 0.9]).to_numpy(),
        rtol=0,
        atol=1e-9,
    )
    # Another start is another history: nothing is served from the cache.
    PREFIX_CACHE.clear()
    fit(first)
    hits = PREFIX_CACHE.hits
    fit(second.iloc[24:])
    assert PREFIX_CACHE.hits == hits


def _sklearn_gbm(monkeypatch: pytest.MonkeyPatch) -> None:
    """``gbm`` (and ``auto``'s gbm candidate) built on scikit-learn's trees, as before LightGBM."""
    monkeypatch.setitem(
        estimators._REGISTRY, "gbm", lambda: boosting.QuantileBoosting(engine="sklearn")
    )


def test_lightgbm_engine_learns_the_cycle_and_repeats_itself() -> None:
    """LightGBM's trees forecast the hand-made cycle about as well as scikit-learn's, the
    same to the bit on a second fit (one thread, deterministic), and quantiles in order."""
    y = _hand_made(days=10, seed=2)
    history, actual = y.iloc[:-24], y.iloc[-24:].to_numpy()
    light = boosting.QuantileBoosting(engine="lightgbm").fit(history)
    again = boosting.QuantileBoosting(engine="lightgbm").fit(history)
    sk = boosting.QuantileBoosting(engine="sklearn").fit(history)
    frame = light.predict(24, [0.1, 0.5, 0.9]).to_numpy()
    np.testing.assert_array_equal(frame, again.predict(24, [0.1, 0.5, 0.9]).to_numpy())
    assert (np.diff(frame, axis=1) >= 0).all()
    light_error = np.mean(np.abs(frame[:, 1] - actual))
    sk_error = np.mean(np.abs(sk.predict(24, [0.5]).to_numpy()[:, 0] - actual))
    flat_error = np.mean(np.abs(history.mean() - actual))  # what ignoring the cycle costs
    assert light_error < 0.5 * flat_error and light_error < 1.2 * sk_error


def test_gbm_engine_is_lightgbm_by_default_and_checked() -> None:
    assert make("gbm").get_params()["engine"] == "lightgbm"
    assert make("gbm(quantiles=[0.5])").get_params()["engine"] == "lightgbm"
    with pytest.raises(BadInputError, match="engine"):
        make('gbm(engine="xgboost")').fit(_hand_made())


def _trend_and_day(seed: int, slope: float) -> np.ndarray:
    """240 hourly values: a level of 100, a trend, a daily cycle of 20 and noise of 3."""
    rng = np.random.default_rng(seed)
    t = np.arange(240)
    return 100 + slope * t + 20 * np.sin(2 * np.pi * t / 24) + rng.normal(0, 3, t.size)


def _ets_configs() -> list[dict]:
    """Every additive configuration auto fits: with or without a daily season, damped or not."""
    from forecaster.statistical import _ets_config

    return [_ets_config(season, damped) for season in (None, 24) for damped in (False, True)]


def test_ets_mean_equals_statsmodels_forecast_to_the_bit() -> None:
    """The ETS forecast without statsmodels' step loop: every additive configuration auto
    fits (level or damped trend, with or without a season), at horizons shorter and longer
    than a season, after a fit and after a smoothing pass with the parameters held."""
    import warnings

    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    from forecaster.statistical import _ets_mean, _ets_smoothed

    values = _trend_and_day(seed=11, slope=0.08)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for config in _ets_configs():
            fitted = ETSModel(pd.Series(values[:200]), **config).fit(disp=False)
            moved = _ets_smoothed(values, config, fitted.params)
            for result in (fitted, moved):
                for horizon in (1, 5, 24, 7 * 24 + 5):
                    expected = np.asarray(result.forecast(horizon), dtype=float)
                    np.testing.assert_array_equal(_ets_mean(result, horizon), expected)
        multiplicative = ETSModel(pd.Series(values), error="mul").fit(disp=False)
        np.testing.assert_array_equal(
            _ets_mean(multiplicative, 10), np.asarray(multiplicative.forecast(10), dtype=float)
        )


def test_held_ets_results_forecast_as_statsmodels_smooth_without_its_hessian(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A smoothing pass with the parameters held gives statsmodels' own ``smooth`` results
    to the bit (means, intervals, states), pickles, and computes no Hessian."""
    import pickle
    import warnings

    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    from forecaster.statistical import _ets_smoothed

    values = _trend_and_day(seed=5, slope=0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for config in _ets_configs():
            params = ETSModel(pd.Series(values[:200]), **config).fit(disp=False).params
            library = ETSModel(pd.Series(values), **config).smooth(params)
            with monkeypatch.context() as m:
                m.setattr(ETSModel, "hessian", lambda *a, **k: pytest.fail("Hessian"))
                held = _ets_smoothed(values, config, params)
                frames = [
                    r.get_prediction(240, 240 + 29).summary_frame(alpha=0.2).to_numpy()
                    for r in (library, held)
                ]
            np.testing.assert_array_equal(frames[0], frames[1])
            np.testing.assert_array_equal(np.asarray(library.states), np.asarray(held.states))
            assert np.isnan(np.asarray(held.cov_params(), dtype=float)).all()
            again = pickle.loads(pickle.dumps(held))
            np.testing.assert_array_equal(again.forecast(5), library.forecast(5))
