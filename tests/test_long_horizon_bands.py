"""Long-horizon bands (forecaster.long_horizon): a one-off spike is not copied into later
weeks, bands widen past day 7 as the rule's own backtests say, a history too short for
them widens by the stated square-root rule with a note, and a trend is followed, damped."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from forecaster.long_horizon import (
    BAND_LEADS,
    DEFAULT_GROWTH,
    MODEL_SPAN,
    band_log_ratio,
    beyond_measured,
    conformal_level,
    fit_rule,
    growth_exponent,
    long_horizon_frame,
    measured_errors,
)
from scaler.reports.horizon_accuracy import HorizonAccuracy, horizon_flags, ladder_offsets

STEP = pd.Timedelta(hours=1)
START = pd.Timestamp("2026-01-05")  # a Monday
QS = (0.1, 0.5, 0.9)


def weekly(days: int, noise: float = 0.05, seed: int = 0) -> pd.Series:
    """A daily cycle, quieter at weekends, with multiplicative noise, hourly."""
    rng = np.random.default_rng(seed)
    idx = pd.date_range(START, periods=days * 24, freq=STEP, name="timestamp")
    hour = idx.hour.to_numpy()
    weekend = idx.day_of_week.to_numpy() >= 5
    base = 100 + 50 * np.sin(2 * np.pi * (hour - 6) / 24)
    base = np.where(weekend, 0.6 * base, base)
    return pd.Series(base * rng.lognormal(0, noise, len(idx)), index=idx, name="rps")


def copied_week(y: pd.Series, days: int, spread: float = 0.2) -> pd.DataFrame:
    """What a seasonal-naive model forecasts: the last week again and again, with a band of
    +-``spread`` around it."""
    idx = pd.date_range(y.index[-1] + STEP, periods=days * 24, freq=STEP)
    last = y.to_numpy()[-7 * 24 :]
    mid = np.resize(last, len(idx))
    return pd.DataFrame(
        {"q0.1": mid * (1 - spread), "q0.5": mid, "q0.9": mid * (1 + spread)}, index=idx
    )


def daily_width(frame: pd.DataFrame) -> pd.Series:
    rel = (frame["q0.9"] - frame["q0.1"]) / frame["q0.5"]
    day = (frame.index - frame.index[0]) // pd.Timedelta(days=1) + 1
    return rel.groupby(day).mean()


def test_a_one_off_spike_is_not_copied_into_later_weeks() -> None:
    clean = weekly(28)
    y = clean.copy()
    spike_at = y.index[-30]  # the Saturday of the last week
    y[spike_at] = 5000.0
    model = copied_week(y, 35)
    out, notes = long_horizon_frame(y, model, STEP, QS)
    without, _ = long_horizon_frame(clean, copied_week(clean, 35), STEP, QS)
    usual = y[(y.index.day_of_week == spike_at.day_of_week) & (y.index.hour == spike_at.hour)]
    # The model copies the spike into every week; past the first, the rule does not: it
    # forecasts that hour as it would had the spike never happened, the usual Saturday.
    assert model.loc[spike_at + pd.Timedelta(days=14), "q0.5"] == 5000.0
    for k in (2, 3, 4):
        t = spike_at + pd.Timedelta(days=7 * k)
        assert out.loc[t, "q0.5"] == pytest.approx(without.loc[t, "q0.5"], rel=0.05)
        assert out.loc[t, "q0.5"] < 1.25 * usual.iloc[:-1].median()
        assert out.loc[t, "q0.9"] < 500
    # The first week is the model's own.
    first = out.index < y.index[-1] + STEP + MODEL_SPAN
    pd.testing.assert_frame_equal(out[first], model[first])
    assert any("weekly shape" in n for n in notes)


@pytest.mark.slow
def test_bands_widen_past_day_seven_where_the_backtests_show_error_growth() -> None:
    rng = np.random.default_rng(2)
    # A level that drifts day by day (a random walk of daily steps of about 5%): the
    # further ahead, the further off any forecast of it.
    walk = np.exp(np.cumsum(rng.normal(0, 0.05, 90)))
    y = weekly(90, noise=0.02, seed=1) * np.repeat(walk, 24)
    measured = measured_errors(y, STEP)
    assert sorted(measured) == list(BAND_LEADS)
    spread = {d: np.quantile(e, 0.9) - np.quantile(e, 0.1) for d, e in measured.items()}
    assert spread[30] > spread[7] > spread[1]
    out, notes = long_horizon_frame(y, copied_week(y, 60, spread=0.05), STEP, QS)
    width = daily_width(out)
    assert width.loc[9] > width.loc[7]
    assert width.loc[14] > width.loc[9] and width.loc[30] > width.loc[14]
    # Past day 30, the longest lead backtested, the stated rule widens them further.
    assert width.loc[60] > width.loc[30]
    note = next(n for n in notes if "bands from backtests" in n)
    assert "1, 7, 14, 30" in note and "beyond day 30" in note and "as measured" in note
    assert (out["q0.1"] <= out["q0.5"]).all() and (out["q0.5"] <= out["q0.9"]).all()


def test_a_short_history_widens_by_the_stated_rule_and_says_so() -> None:
    y = weekly(12)
    model = copied_week(y, 28, spread=0.2)
    out, notes = long_horizon_frame(y, model, STEP, QS)
    assert measured_errors(y, STEP) == {}
    note = next(n for n in notes if "too short to backtest" in n)
    assert f"as (lead / 7) ** {DEFAULT_GROWTH:g}" in note
    # The seam's band (x1.2 at day 7) grows as (lead / 7) ** DEFAULT_GROWTH in log ratio.
    end = y.index[-1] + STEP
    for day in (14, 28):
        t = end + pd.Timedelta(days=day) - STEP
        ratio = out.loc[t, "q0.9"] / out.loc[t, "q0.5"]
        grown = (day / 7) ** DEFAULT_GROWTH
        assert math.log(ratio) == pytest.approx(math.log(1.2) * grown, rel=0.02)
        low = out.loc[t, "q0.1"] / out.loc[t, "q0.5"]
        assert math.log(low) == pytest.approx(math.log(0.8) * grown, rel=0.02)
        assert ratio > 1.2 and low < 0.8


def test_beyond_the_longest_backtested_lead_the_spread_grows_as_measured() -> None:
    lead = np.array([14.0, 28.0, 56.0])
    assert beyond_measured(0.3, lead, 14.0, center=0.1) == pytest.approx(
        [0.3, 0.1 + 0.2 * math.sqrt(2), 0.1 + 0.2 * 2]
    )
    # The growth between the two longest leads: a spread doubling from day 7 to 28 is
    # lead ** 0.5; one that narrows grows by nothing; under two leads, the default.
    errors = {7: np.linspace(-0.1, 0.1, 101), 28: np.linspace(-0.2, 0.2, 101)}
    assert growth_exponent(errors) == pytest.approx(0.5)
    assert growth_exponent({7: errors[28], 28: errors[7]}) == 0.0
    assert growth_exponent({7: errors[7]}) == DEFAULT_GROWTH
    up = band_log_ratio(errors, 0.9, np.array([7.0, 28.0, 112.0]), seam=0.0, seam_day=7.0)
    assert up[2] == pytest.approx(up[1] * 2, rel=0.02)
    # A spread that narrows from day 7 to 14 (as backtests may say where errors saturate)
    # is followed there, and does not grow past the last lead.
    narrowing = {1: np.linspace(-0.1, 0.1, 101), 7: np.linspace(-0.3, 0.3, 101)}
    narrowing[14] = np.linspace(-0.2, 0.2, 101)
    up = band_log_ratio(narrowing, 0.9, np.array([7.0, 14.0, 28.0]), seam=0.0, seam_day=7.0)
    assert up[1] < up[0] and up[2] == pytest.approx(up[1])
    # The model's band at the seam is a floor at every lead.
    up = band_log_ratio(narrowing, 0.9, np.array([7.0, 28.0]), seam=0.5, seam_day=7.0)
    assert (up >= 0.5).all()


def test_the_conformal_level_of_a_bound() -> None:
    assert conformal_level(0.9, 9) == 1.0  # ceil(10 * 0.9) / 9
    assert conformal_level(0.9, 99) == pytest.approx(90 / 99)
    assert conformal_level(0.1, 99) == pytest.approx(10 / 99)
    assert conformal_level(0.9, 0) == 0.9


def test_a_trend_is_followed_and_damped() -> None:
    # The default damping is 0 (measured: a trend carried ahead raised the error on the
    # groups that confirm); with a damping set, the level follows the trend.
    y = weekly(42) * np.linspace(1.0, 2.0, 42 * 24)
    assert fit_rule(y, STEP) is not None
    rule = fit_rule(y, STEP, damping=0.9)
    assert rule is not None and rule.slope_per_day > 0
    week = pd.Timedelta(days=7)
    first = pd.date_range(y.index[-1] + STEP, periods=24 * 7, freq=STEP)
    means = [rule.predict(first + k * week).mean() for k in range(6)]
    # The forecast rises week on week, past the last week's level ...
    assert all(b > a for a, b in itertools.pairwise(means))
    assert means[0] > y.iloc[-7 * 24 :].mean() * 0.98
    # ... by less and less (damped), and a straight line would have gone further.
    steps = np.diff(means)
    assert steps[-1] < 0.5 * steps[0]
    straight = fit_rule(y, STEP, damping=1.0)
    flat = fit_rule(y, STEP, damping=0.0)
    assert straight is not None and flat is not None
    later = first + 5 * week
    assert straight.predict(later).mean() > means[5] > flat.predict(later).mean()


def _scored(coverage: list[float], history: float, plan: float = 21.0) -> HorizonAccuracy:
    rows = [
        {
            "signal": "chat_rps",
            "estimator": "seasonal_naive_7d",
            "lead_day": d,
            "origins": 3,
            "history_days": history,
            "mase": 0.6,
            "coverage": c,
        }
        for d, c in enumerate(coverage, start=1)
    ]
    return HorizonAccuracy(
        asked_days=90,
        origins=3,
        rows=rows,
        supported={"chat_rps": len(rows)},
        history_days={"chat_rps": plan},
    )


def test_coverage_far_from_nominal_at_a_lead_day_is_flagged_with_why() -> None:
    # 38% at lead day 2 on origins with 8 days of history, the plan's forecast 21: flagged,
    # and the line says the score is of a forecast with less history than the plan's.
    flags = horizon_flags(_scored([0.81, 0.38, 0.75], history=8.0), 0.1, 0.9, "en")
    assert len(flags) == 1
    rank, text, link = flags[0]
    assert rank == 2 and link == "accuracy"
    assert "chat_rps" in text and "38%" in text and "lead day 2" in text and "80%" in text
    assert "1 of 3 scored lead days" in text and "8.0 days of history" in text
    assert "21.0" in text
    # Lead days off with about the plan's history are named too, with what their band did.
    mixed = _scored([0.92, 0.93, 0.92, 0.80, 0.40], history=8.0)
    for r in mixed.rows[:3]:
        r["history_days"] = 19.0
    text = horizon_flags(mixed, 0.1, 0.9, "en")[0][1]
    assert "40% of actuals at lead day 5" in text and "4 of 5 scored lead days" in text
    assert "; and at lead days 1–3, with about the plan's history the band is wider" in text
    # With about the plan's history, the band itself is blamed: too narrow, or too wide.
    narrow = horizon_flags(_scored([0.62], history=20.0), 0.1, 0.9, "en")[0][1]
    assert "too narrow" in narrow
    wide = horizon_flags(_scored([0.97], history=20.0), 0.1, 0.9, "en")[0][1]
    assert "wider than" in wide
    assert horizon_flags(_scored([0.62], history=20.0), 0.1, 0.9, "ru")[0][1].startswith(
        "chat_rps: полоса"
    )


def test_coverage_within_ten_points_of_nominal_is_not_flagged() -> None:
    assert horizon_flags(_scored([0.71, 0.80, 0.89, 0.90], history=8.0), 0.1, 0.9, "en") == []
    assert horizon_flags(_scored([], history=8.0), 0.1, 0.9, "en") == []


def test_each_lead_day_is_scored_at_the_newest_origins_that_reach_it() -> None:
    # A 7-day plan on 28 days: 4 origins per lead day, the newest that reach it.
    by_lead, per_lead = ladder_offsets(7, 4, 21)
    assert per_lead == 4 and by_lead[1] == [1, 2, 3, 4] and by_lead[7] == [7, 8, 9, 10]
    # The demo: 21 days and a 90-day plan support 13 lead days; at most 10 fits, so two
    # origins a lead, lead day 1 at the two newest and lead day 13 at the oldest two.
    by_lead, per_lead = ladder_offsets(13, 3, 14)
    fitted = {o for os in by_lead.values() for o in os}
    assert per_lead == 2 and len(fitted) <= 10
    assert by_lead[1] == [1, 2] and by_lead[13] == [13, 14]
    assert all(len(os) == 2 and min(os) >= d for d, os in by_lead.items())
    by_lead, per_lead = ladder_offsets(90, 4, 300)
    fitted = {o for os in by_lead.values() for o in os}
    assert len(fitted) <= 10 and per_lead == 2
    assert all(len(os) == 2 and min(os) >= d for d, os in by_lead.items())


def test_the_model_note_holds_its_width_only_up_to_where_the_long_horizon_rule_starts() -> None:
    from forecaster.selection import AutoSelector

    y = weekly(6)
    est = AutoSelector(slow_candidates=()).fit(y)
    days = est.calibrated_days_
    assert 1 <= days < 7
    week = " ".join(est.horizon_notes(7 * 24))
    assert f"hold the width of day {days}:" in week and "of the 7 days asked" in week
    # A 90-day forecast: past day 7 the long-horizon rule sets the bands, with its own note.
    far = " ".join(est.horizon_notes(90 * 24))
    assert f"hold the width of day {days} up to day 7:" in far and "of the 90 days asked" in far
