"""The learned mix of seasonal bases: its solver, what it learns, and its fast backtest."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.estimators import make
from forecaster.profile_mix import ProfileMix, lad_simplex


def test_lad_recovers_convex_weights_despite_bursts() -> None:
    rng = np.random.default_rng(0)
    X = rng.uniform(10, 20, size=(2000, 3))
    y = 0.7 * X[:, 0] + 0.3 * X[:, 1] + rng.normal(0, 0.2, 2000)
    bursts = rng.choice(2000, 100, replace=False)
    y[bursts] += 200.0  # bursts a least-squares fit would chase
    w = lad_simplex(X, y)
    assert w.sum() == pytest.approx(1.0)
    assert (w >= 0).all()
    np.testing.assert_allclose(w, [0.7, 0.3, 0.0], atol=0.03)


def test_lad_ignores_nan_rows_and_falls_back_to_equal_weights() -> None:
    X = np.array([[1.0, 2.0], [np.nan, 1.0], [3.0, 4.0]])
    np.testing.assert_allclose(lad_simplex(X, np.array([1.0, 2.0, 3.0])), [0.5, 0.5])
    assert lad_simplex(np.ones((50, 1)), np.ones(50)).tolist() == [1.0]


def _series(days: float, weekly: float, daily: float, noise: float, seed: int = 0) -> pd.Series:
    rng = np.random.default_rng(seed)
    index = pd.date_range("2026-03-02", periods=int(days * 48), freq="30min", name="timestamp")
    hours = index.hour.to_numpy() + index.minute.to_numpy() / 60
    weekend = index.day_of_week.to_numpy() >= 5
    level = 100 + daily * np.sin(2 * np.pi * hours / 24) - weekly * weekend
    return pd.Series(level + rng.normal(0, noise, len(index)), index=index, name="s")


def test_a_weekly_cycle_is_learned_from_the_weekly_bases() -> None:
    est = make("profile_mix").fit(_series(35, weekly=60, daily=20, noise=2))
    weights = est.mix_weights_  # type: ignore[attr-defined]
    assert weights.get("weekly", 0) + weights.get("last_week", 0) > 0.6, weights
    frame = est.predict(48 * 7, [0.5])
    index = pd.DatetimeIndex(frame.index)
    weekend = frame["q0.5"][index.day_of_week >= 5].mean()
    weekday = frame["q0.5"][index.day_of_week < 5].mean()
    assert weekday - weekend > 40


def test_noise_without_a_cycle_leans_on_the_level() -> None:
    est = make("profile_mix").fit(_series(21, weekly=0, daily=0, noise=10))
    weights = est.mix_weights_  # type: ignore[attr-defined]
    assert weights.get("level", 0) > 0.5, weights


def test_under_two_weeks_no_weekly_basis_and_under_three_days_the_daily_profile() -> None:
    ten = make("profile_mix").fit(_series(10, weekly=60, daily=20, noise=2))
    assert not {"weekly", "last_week"} & set(ten.mix_weights_)  # type: ignore[attr-defined]
    two = make("profile_mix").fit(_series(2.5, weekly=0, daily=20, noise=2))
    assert two.mix_weights_ == {"daily": 1.0}  # type: ignore[attr-defined]
    assert two.predict(24, [0.1, 0.5, 0.9]).notna().all().all()


def test_a_level_shift_is_followed() -> None:
    y = _series(21, weekly=0, daily=20, noise=2, seed=3)
    shifted = y.copy()
    shifted.iloc[-60:] += 40  # a new client since yesterday
    plain = make("profile_mix").fit(y).predict(6, [0.5]).to_numpy()
    moved = make("profile_mix").fit(shifted).predict(6, [0.5]).to_numpy()
    assert (moved - plain).mean() > 20


@pytest.mark.parametrize("days", [5, 13, 16, 70])
def test_fast_backtest_equals_refitting_on_each_prefix(days: int) -> None:
    y = _series(days, weekly=30, daily=20, noise=4, seed=days)
    y.iloc[100:130] = np.nan  # a gap inside the bases' look-back
    y.iloc[-200:-190] = np.nan
    m = 48
    n = len(y)
    # Origins from under three days of history up, across the two-week mark.
    origins = [o for o in (n - m - k * m for k in range(14)) if o >= 3]
    fast = ProfileMix().backtest_medians(y, origins, m)
    slow = np.array(
        [make("profile_mix").fit(y.iloc[:o]).predict(m, [0.5]).to_numpy()[:, 0] for o in origins]
    )
    np.testing.assert_allclose(fast, slow, rtol=1e-9, atol=1e-9)


def test_trailing_mean_matches_pandas_rolling_mean_with_gaps() -> None:
    from forecaster.profile_mix import trailing_mean

    rng = np.random.default_rng(1)
    values = rng.normal(100, 20, 500)
    values[rng.choice(500, 60, replace=False)] = np.nan
    values[:5] = np.nan
    for window in (1, 4, 12):
        want = pd.Series(values).rolling(window, min_periods=1).mean().to_numpy()
        np.testing.assert_allclose(trailing_mean(values, window), want, rtol=1e-12)
