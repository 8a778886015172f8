"""The long-horizon forecast (forecaster.long_horizon): past the first week, the level and a
robust weekly shape, with bands from backtests of the rule at lead days 1, 7, 14 and 30."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.forecasting import forecast_series
from forecaster.long_horizon import fit_rule, long_horizon_frame

STEP = pd.Timedelta(hours=1)
START = pd.Timestamp("2026-01-05")  # a Monday


def weekly(days: int, noise: float = 0.05, seed: int = 0) -> pd.Series:
    """A daily cycle, quieter at weekends, with multiplicative noise, hourly."""
    rng = np.random.default_rng(seed)
    idx = pd.date_range(START, periods=days * 24, freq=STEP, name="timestamp")
    hour = idx.hour.to_numpy()
    weekend = idx.day_of_week.to_numpy() >= 5
    base = 100 + 50 * np.sin(2 * np.pi * (hour - 6) / 24)
    base = np.where(weekend, 0.6 * base, base)
    return pd.Series(base * rng.lognormal(0, noise, len(idx)), index=idx, name="rps")


@pytest.mark.slow
def test_a_one_off_spike_is_not_planned_again_past_the_first_week() -> None:
    y = weekly(42)
    spike_at = y.index[-30]  # Saturday of the last week
    y[spike_at] = 5000.0
    fc = forecast_series(y, pd.Timedelta(days=30), (0.1, 0.5, 0.9), "seasonal_naive_7d")
    frame = fc.frame
    same_slot = [spike_at + pd.Timedelta(days=7 * k) for k in (2, 3, 4)]
    # Weeks 2 to 4 hold the usual level at that hour, not the spike.
    usual = y[y.index.day_of_week == spike_at.day_of_week]
    usual = usual[usual.index.hour == spike_at.hour].iloc[:-1].median()
    for t in same_slot:
        assert frame.loc[t, "q0.5"] == pytest.approx(usual, rel=0.15)
        assert frame.loc[t, "q0.9"] < 1000
    # The first week is the model's own: a 7-day forecast gives the same numbers there.
    week = forecast_series(y, pd.Timedelta(days=7), (0.1, 0.5, 0.9), "seasonal_naive_7d").frame
    pd.testing.assert_frame_equal(frame.iloc[: len(week)], week)
    assert any("past day 7" in n for n in fc.notes)


@pytest.mark.slow
def test_bands_widen_with_the_lead_where_the_level_wanders() -> None:
    y = weekly(120, noise=0.02, seed=1)
    rng = np.random.default_rng(2)
    # A level that drifts day by day (a random walk of daily steps of about 4%).
    walk = np.exp(np.cumsum(rng.normal(0, 0.04, 120)))
    y = y * np.repeat(walk, 24)
    fc = forecast_series(y, pd.Timedelta(days=60), (0.1, 0.5, 0.9), "seasonal_naive_7d")
    rel = (fc.frame["q0.9"] - fc.frame["q0.1"]) / fc.frame["q0.5"]
    day = (fc.frame.index - fc.frame.index[0]) // pd.Timedelta(days=1)
    width = rel.groupby(day).mean()
    assert width.loc[13] > width.loc[8] and width.loc[29] > width.loc[13]
    assert (fc.frame["q0.1"] <= fc.frame["q0.5"]).all()
    assert (fc.frame["q0.5"] <= fc.frame["q0.9"]).all()
    # The history supports lead day 30 but not 60, and the note says how far it falls short.
    note = next(n for n in fc.notes if "bands from backtests" in n)
    assert "1, 7, 14, 30" in note and "30 days short of the 60 asked" in note


def test_too_short_a_history_keeps_the_model_width_and_says_so() -> None:
    y = weekly(10)
    fc = forecast_series(y, pd.Timedelta(days=20), (0.1, 0.5, 0.9), "seasonal_naive_1d")
    assert any("too short to backtest" in n for n in fc.notes)
    # Under three weeks: a daily shape by day of week, weekends quieter.
    rule = fit_rule(y, STEP)
    assert rule is not None and not rule.weekly
    assert rule.weekday_factor[5] < rule.weekday_factor[2]
    assert np.isfinite(fc.frame.to_numpy()).all() and (fc.frame.to_numpy() >= 0).all()


def test_with_no_damping_a_trend_is_reported_not_extrapolated() -> None:
    y = weekly(42) * np.linspace(1.0, 2.0, 42 * 24)
    rule = fit_rule(y, STEP, damping=0.0)
    assert rule is not None and rule.slope_per_day > 0
    later = pd.date_range(y.index[-1] + pd.Timedelta(days=14), periods=24 * 7, freq=STEP)
    sooner = later - pd.Timedelta(days=7)
    assert rule.predict(later).mean() == pytest.approx(rule.predict(sooner).mean(), rel=1e-9)


def test_under_two_days_of_history_the_model_forecast_is_kept() -> None:
    y = weekly(1)
    frame = pd.DataFrame(
        {"q0.5": np.ones(24 * 10)},
        index=pd.date_range(y.index[-1] + STEP, periods=24 * 10, freq=STEP),
    )
    out, notes = long_horizon_frame(y, frame, STEP, (0.5,))
    assert out is frame and "under two days" in notes[0]
