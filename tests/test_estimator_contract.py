"""The estimator contract, run over every registered estimator.

fit returns self; refitting is idempotent; predict before fit raises
NotFittedError; output columns and index are right and monotone in the quantile;
NaN gaps and short histories are handled (a fallback is recorded, never a crash);
non-negative signals give non-negative forecasts; get_params round-trips.
Series are small (hourly, 10 days) so the Prophet fits stay quick.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.errors import BadInputError, NotFittedError
from forecaster.estimators import BaseEstimator, clone, make, quantile_column, registered

NAMES = [*sorted(registered()), 'ensemble(combine="median")']
"""Every registered estimator, and the settings that change how one forecasts."""
SLOW = {"prophet", "prophet_default"}
COSTLY = {*SLOW, "auto", "auto_mix", "auto_thorough", "ets_auto", "gbm", "mstl", "theta"}
"""Estimators whose fit on the 10-day series takes about half a second of CPU or more (the
``auto`` selections tens of times that): their fitting checks run in the slow tier, every
other estimator's in the fast tier."""


def tiered(names: list[str]) -> list:
    """``names`` as parameters, the costly estimators marked slow."""
    return [pytest.param(n, marks=pytest.mark.slow) if n in COSTLY else n for n in names]


QS = [0.1, 0.5, 0.9]


def hourly(days: int = 10, seed: int = 0, name: str = "demand") -> pd.Series:
    rng = np.random.default_rng(seed)
    index = pd.date_range("2026-03-02", periods=days * 24, freq="1h", name="timestamp")
    hours = index.hour.to_numpy()
    values = 50 + 30 * np.sin(2 * np.pi * hours / 24) + rng.normal(0, 4, len(index))
    return pd.Series(np.clip(values, 0, None), index=index, name=name)


def test_the_registry_holds_every_family() -> None:
    expected = {
        "seasonal_naive_1d",
        "seasonal_naive_7d",
        "seasonal_profile_1d",
        "profile_regression_1d",
        "recent_level",
        "prophet",
        "prophet_default",
        "gbm",
        "ensemble",
        "auto",
    }
    assert expected <= set(NAMES)


@pytest.mark.parametrize("name", tiered(NAMES))
def test_fit_returns_self_and_predicts_the_right_frame(name: str) -> None:
    y = hourly()
    est = make(name)
    assert est.fit(y) is est
    frame = est.predict(30, QS)
    assert list(frame.columns) == [quantile_column(q) for q in QS]
    expected = pd.date_range(y.index[-1] + pd.Timedelta("1h"), periods=30, freq="1h")
    assert (frame.index == expected).all()
    values = frame.to_numpy()
    assert np.isfinite(values).all()
    assert (np.diff(values, axis=1) >= 0).all(), "quantiles must be monotone"
    assert (values >= 0).all(), "a non-negative signal needs non-negative forecasts"


@pytest.mark.parametrize("name", tiered(NAMES))
def test_refit_is_idempotent(name: str) -> None:
    y = hourly(seed=1)
    est = make(name)
    first = est.fit(y).predict(12, QS)
    second = est.fit(y).predict(12, QS)
    pd.testing.assert_frame_equal(first, second)


@pytest.mark.parametrize("name", NAMES)
def test_predict_before_fit_raises(name: str) -> None:
    with pytest.raises(NotFittedError, match="not fitted"):
        make(name).predict(4, QS)


@pytest.mark.parametrize("name", tiered(NAMES))
def test_nan_gaps_are_handled(name: str) -> None:
    y = hourly(seed=2)
    y.iloc[40:70] = np.nan  # a 30-hour outage
    y.iloc[-3] = np.nan
    frame = make(name).fit(y).predict(24, QS)
    assert np.isfinite(frame.to_numpy()).all()


@pytest.mark.parametrize("name", NAMES)
def test_short_history_falls_back_and_records_it(name: str) -> None:
    y = hourly(days=10).iloc[-12:]  # half a day: too short for every lag and season
    est = make(name).fit(y)
    frame = est.predict(6, QS)
    assert np.isfinite(frame.to_numpy()).all()
    assert (frame.to_numpy() >= 0).all()
    if name not in ("recent_level", "last_value", "seasonal_naive_1d", "seasonal_naive_7d"):
        assert est.fallback_, f"{name} must record why it fell back"


@pytest.mark.parametrize("name", NAMES)
def test_params_round_trip_through_clone(name: str) -> None:
    est = make(name)
    copy = clone(est)
    assert copy is not est and copy.get_params() == est.get_params()
    assert not hasattr(copy, "last_timestamp_")


def test_bad_predict_arguments_are_one_line() -> None:
    est = make("seasonal_profile_1d").fit(hourly())
    with pytest.raises(BadInputError, match="'horizon' parameter"):
        est.predict(0, QS)
    with pytest.raises(BadInputError, match=r"must be in \(0, 1\)"):
        est.predict(3, [0.5, 1.5])


def test_a_level_shift_moves_the_profile_regression() -> None:
    y = hourly(days=14, seed=3)
    shifted = y.copy()
    shifted.iloc[-30:] += 40  # a new client since yesterday
    plain = make("profile_regression_1d").fit(y).predict(6, [0.5]).to_numpy()
    moved = make("profile_regression_1d").fit(shifted).predict(6, [0.5]).to_numpy()
    assert (moved - plain).mean() > 20


def test_recent_level_ignores_a_missing_cycle() -> None:
    rng = np.random.default_rng(4)
    index = pd.date_range("2026-01-01", periods=240, freq="1h")
    y = pd.Series(100 + rng.normal(0, 5, 240), index=index, name="flat")
    frame = make("recent_level").fit(y).predict(24, QS)
    assert abs(frame["q0.5"].mean() - 100) < 5
    assert frame["q0.5"].std() < 0.5  # flat: no invented cycle


def test_upper_quantile_of_a_baseline_is_sane() -> None:
    y = hourly(days=14, seed=5)
    est: BaseEstimator = make("seasonal_naive_1d").fit(y)
    frame = est.predict(24, QS)
    assert (frame["q0.9"] > frame["q0.1"]).all()


@pytest.mark.slow
def test_boosting_leaves_out_a_weekly_lag_it_never_saw() -> None:
    # Six days of history: every target two days in has a 1- and 2-day lag, none a
    # weekly one; an all-missing feature used to make the binning raise.
    y = hourly(days=6, seed=6)
    est = make("gbm").fit(y)
    assert not getattr(est, "fallback_", None)
    assert len(est.lags_) == 2  # type: ignore[attr-defined]
    frame = est.predict(24, QS)
    assert frame.notna().all().all()
    longer = make("gbm").fit(hourly(days=12, seed=6))
    assert len(longer.lags_) == 3  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_backtest_medians_are_the_refitted_median_forecasts(name: str) -> None:
    # What selection backtests must be what the estimator forecasts when refitted
    # on each prefix; the boosting's median-only shortcut is compared with its
    # median model, and with the full fit wherever its quantile models do not cross.
    if name in SLOW or name in ("gbm", "ets_auto", "theta"):
        pytest.skip(
            "Prophet is slow; the boosting's, AutoETS's and Theta's shortcuts have their own tests"
        )
    y = hourly(days=12, seed=3)
    origins = [len(y) - 24 - 24 * k for k in range(3)]
    got = make(name).backtest_medians(y, origins, 24)
    for i, o in enumerate(origins):
        want = make(name).fit(y.iloc[:o]).predict(24, [0.5]).to_numpy()[:, 0]
        np.testing.assert_allclose(got[i], want, rtol=1e-9, atol=1e-9)


@pytest.mark.slow
def test_ets_backtests_hold_the_model_fitted_at_the_oldest_origin() -> None:
    # AutoETS chooses and fits once, before the oldest origin, then smooths: the
    # oldest origin is exactly a refit; later ones run the same model further.
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    y = hourly(days=12, seed=3)
    origins = [len(y) - 24 - 24 * k for k in range(3)]
    got = make("ets_auto").backtest_medians(y, origins, 24)
    oldest = make("ets_auto").fit(y.iloc[: origins[-1]])
    refit = oldest.predict(24, [0.5]).to_numpy()[:, 0]
    np.testing.assert_allclose(got[-1], refit, rtol=1e-9, atol=1e-9)
    for i, o in enumerate(origins[:-1]):
        window = y.to_numpy()[oldest.window_start_ : o]  # type: ignore[attr-defined]
        model = ETSModel(pd.Series(window), **oldest.config_)  # type: ignore[attr-defined]
        held = model.smooth(oldest.result_.params).forecast(24)  # type: ignore[attr-defined]
        np.testing.assert_allclose(got[i], np.clip(held, 0, None), rtol=1e-9, atol=1e-9)
        # ...and stays close to what a refit on that prefix forecasts.
        again = make("ets_auto").fit(y.iloc[:o]).predict(24, [0.5]).to_numpy()[:, 0]
        assert np.mean(np.abs(got[i] - again)) < 0.1 * np.mean(np.abs(again))


@pytest.mark.slow
def test_ets_update_moves_the_fitted_model_onto_newer_data_without_refitting() -> None:
    # A stored AutoETS moved onto a day more of history runs its model (configuration
    # and parameters held) over the new window: what a refit would start from, cheaper.
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    y = hourly(days=12, seed=5)
    old = make("ets_auto").fit(y.iloc[:-24])
    params = np.asarray(old.result_.params).copy()  # type: ignore[attr-defined]
    moved = old.update(y)
    assert moved.last_timestamp_ == y.index[-1]
    np.testing.assert_array_equal(moved.result_.params, params)  # type: ignore[attr-defined]
    window = y.to_numpy()[moved.window_start_ :]  # type: ignore[attr-defined]
    want = ETSModel(pd.Series(window), **old.config_).smooth(params).forecast(24)  # type: ignore[attr-defined]
    got = moved.predict(24, [0.5]).to_numpy()[:, 0]
    np.testing.assert_allclose(got, np.clip(want, 0, None), rtol=1e-9, atol=1e-9)
    again = make("ets_auto").fit(y).predict(24, [0.5]).to_numpy()[:, 0]
    assert np.mean(np.abs(got - again)) < 0.1 * np.mean(np.abs(again))
    # A model that fell back to the seasonal naive model is refitted instead.
    short = make("ets_auto").fit(y.iloc[:30])
    assert short.fallback_ and short.update(y).fallback_ is None


def test_theta_update_holds_the_smoothing_weight_and_redoes_the_rest(tmp_path: Path) -> None:
    # On the data it was fitted on, Theta moved by update forecasts what the fit does
    # (the smoothing weight held, the decomposition and drift redone, as statsmodels'
    # fit does them); on a day more it stays close to a refit; a stored model rebuilt
    # from its window and weight forecasts the same as before it was stored.
    import copy

    from forecaster.artifacts import dumps, loads

    y = hourly(days=12, seed=5)
    fitted = make("theta").fit(y)
    want = fitted.predict(24, [0.5]).to_numpy()[:, 0]
    same = copy.deepcopy(fitted).update(y).predict(24, [0.5]).to_numpy()[:, 0]
    np.testing.assert_allclose(same, want, rtol=1e-9, atol=1e-9)
    old = make("theta").fit(y.iloc[:-24])
    moved = old.update(y)
    assert moved.last_timestamp_ == y.index[-1]
    assert moved.alpha_ == old.alpha_  # type: ignore[attr-defined]
    got = moved.predict(24, [0.5]).to_numpy()[:, 0]
    assert np.mean(np.abs(got - want)) < 0.05 * np.mean(np.abs(want))
    blob = tmp_path / "theta.npz"
    blob.write_bytes(dumps({"model": fitted}, "theta", None))
    again = loads(blob, "theta", None)["model"]
    assert "result_" not in vars(again)  # rebuilt from the window and the weight
    np.testing.assert_allclose(again.predict(24, [0.5]).to_numpy()[:, 0], want, atol=1e-9)


@pytest.mark.slow
def test_boosting_backtests_its_median_model_alone() -> None:
    from forecaster.boosting import QuantileBoosting

    y = hourly(days=12, seed=4)
    origins = [len(y) - 24, len(y) - 48]
    got = make("gbm").backtest_medians(y, origins, 24)
    for i, o in enumerate(origins):
        alone = QuantileBoosting(quantiles=(0.5,)).fit(y.iloc[:o])
        np.testing.assert_array_equal(got[i], alone.predict(24, [0.5]).to_numpy()[:, 0])
        # The full fit sorts across its quantile models: equal wherever they do not cross.
        full = make("gbm").fit(y.iloc[:o]).predict(24, [0.5]).to_numpy()[:, 0]
        assert np.isclose(got[i], full, rtol=1e-12).mean() > 0.5
