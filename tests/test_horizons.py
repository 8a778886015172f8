"""Bands at every horizon, level shifts, and the seasonal-naive floor of selection.

Hand-made hourly series with known behaviour: noise that grows with the lead
time, flat noise (no cone), an 80% drop that stays, and a model that fits its
history perfectly but forecasts badly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest

from forecaster import estimators
from forecaster.backtesting import backtest
from forecaster.estimators import BaseEstimator
from forecaster.forecasting import forecast_series
from forecaster.selection import AutoSelector, detect_level_shift
from forecaster.store import ModelStore

QS = [0.1, 0.5, 0.9]


def hourly(values: np.ndarray, name: str = "s") -> pd.Series:
    index = pd.date_range("2026-03-02", periods=len(values), freq="1h", name="timestamp")
    return pd.Series(values, index=index, name=name)


def cycle(days: int) -> np.ndarray:
    hours = np.arange(days * 24) % 24
    return 100 + 40 * np.sin(2 * np.pi * hours / 24)


def test_the_seven_day_band_of_flat_noise_stays_bounded() -> None:
    rng = np.random.default_rng(0)
    y = hourly(100 + rng.normal(0, 5, 28 * 24), "flat")
    est = AutoSelector(slow_candidates=()).fit(y)
    frame = est.predict(7 * 24, QS)
    upper = frame["q0.9"].to_numpy()
    day1, day7 = upper[:24].mean(), upper[-24:].mean()
    assert upper.max() < 100 + 5 * 5  # nothing like a cone
    assert day7 - 100 < 1.5 * (day1 - 100) + 2.0
    assert est.calibrated_days_ == 7


def _growing_noise(days: int, seed: int) -> np.ndarray:
    """A daily cycle on a level that takes a random step each day: error grows with the lead."""
    rng = np.random.default_rng(seed)
    level = np.repeat(np.cumsum(rng.normal(0, 12, days)), 24)
    return cycle(days) + 300 + level + rng.normal(0, 2, days * 24)


@pytest.mark.slow
def test_quantiles_are_calibrated_per_lead_day_where_noise_grows_with_the_lead() -> None:
    horizon = 7 * 24
    per_lead = np.zeros(7)
    seen = np.zeros(7)
    widths = []
    for seed in range(4):
        y = hourly(_growing_noise(50, seed), f"walk{seed}")
        origins = [y.index[-1] + pd.Timedelta("1h") - pd.Timedelta(days=7 + k) for k in range(4)]
        bt = backtest(lambda: AutoSelector(slow_candidates=()), y, origins, horizon, QS)
        upper, actual = bt.column(0.9), bt.actuals
        for d in range(7):
            a, u = actual[:, d * 24 : (d + 1) * 24], upper[:, d * 24 : (d + 1) * 24]
            per_lead[d] += (a <= u).sum()
            seen[d] += a.size
        width = (bt.column(0.9) - bt.column(0.1)).mean(axis=0)
        widths.append([width[d * 24 : (d + 1) * 24].mean() for d in range(7)])
    coverage = per_lead / seen
    assert ((coverage >= 0.7) & (coverage <= 1.0)).all(), coverage
    mean_width = np.mean(widths, axis=0)
    assert mean_width[6] > 1.4 * mean_width[0], mean_width  # wider at day 7, as the noise is


@pytest.mark.slow
def test_leads_the_backtests_do_not_reach_hold_the_last_width_and_say_so() -> None:
    rng = np.random.default_rng(3)
    y = hourly(cycle(6) + rng.normal(0, 3, 6 * 24), "short")
    est = AutoSelector(slow_candidates=()).fit(y)
    assert 1 <= est.calibrated_days_ < 7
    frame = est.predict(7 * 24, QS)
    width = (frame["q0.9"] - frame["q0.1"]).to_numpy()
    last = est.calibrated_days_ * 24
    np.testing.assert_allclose(width[last:], width[last], rtol=0.05)  # held, relative to level
    notes = est.horizon_notes(7 * 24)
    assert any(f"beyond lead day {est.calibrated_days_}" in n for n in notes), notes
    fc = forecast_series(y, pd.Timedelta(days=7), QS, "auto", ModelStore(None))
    assert any("hold the width" in n for n in fc.notes)
    assert est.horizon_notes(12) == []


@pytest.mark.slow
def test_an_80_percent_drop_is_followed_within_a_day() -> None:
    rng = np.random.default_rng(4)
    values = cycle(29) + rng.normal(0, 3, 29 * 24)
    drop = 21 * 24
    values[drop:] *= 0.2
    y = hourly(values[: drop + 24], "drop")  # one day after the drop
    new_level = values[drop + 24 : drop + 48]
    est = AutoSelector().fit(y)
    frame = est.predict(24, QS)
    assert abs(frame["q0.5"].mean() - new_level.mean()) <= 0.2 * new_level.mean(), est.reason_
    assert frame["q0.9"].max() < 0.5 * values[:drop].mean()  # the band follows too
    assert "level shift" in est.reason_


def test_a_burst_or_a_normal_day_is_not_a_level_shift() -> None:
    rng = np.random.default_rng(5)
    values = cycle(28) + rng.normal(0, 3, 28 * 24)
    assert detect_level_shift(values, 24) is None
    burst = values.copy()
    burst[-3:] *= 3  # three hours: a burst
    assert detect_level_shift(burst, 24) is None
    lasting = values.copy()
    lasting[-10:] *= 0.5
    start, factor, offset = detect_level_shift(lasting, 24)  # type: ignore[misc]
    assert start == len(values) - 10 and factor == pytest.approx(0.5, abs=0.05) and offset == 0


def test_a_fall_below_every_earlier_value_is_a_shift_after_three_hours() -> None:
    """Load that leaves (a job ends, traffic moves) takes the series under its floor: three
    hours there are a shift; three hours as low as a usual trough, or a fall to the floor's
    level that has lasted two hours, are not."""
    rng = np.random.default_rng(6)
    values = (cycle(28) + rng.normal(0, 3, 28 * 24))[:-18]  # ends at the daily peak
    floor = values.min()
    gone = values.copy()
    gone[-3:] = 0.4 * floor + rng.normal(0, 0.5, 3)
    start, factor, offset = detect_level_shift(gone, 24)  # type: ignore[misc]
    assert start == len(values) - 3 and factor < 0.5 and offset == 0
    brief = values.copy()
    brief[-2:] = 0.4 * floor
    assert detect_level_shift(brief, 24) is None
    trough = values.copy()
    trough[-3:] = floor + 1.0  # as low as the lowest hour before, not under it
    assert detect_level_shift(trough, 24) is None
    six_hours = values.copy()
    six_hours[-6:] = floor + 1.0  # a fall that lasts is a shift wherever it lands
    assert detect_level_shift(six_hours, 24) is not None


def test_a_step_is_measured_from_the_day_before_it() -> None:
    """Three busy days at 1.5 times the usual cycle, then a fall to half of it: the step is
    a factor of 1/3 on the day before (the busy level), not the 1/2 of the week's median
    profile, which would leave the busy days above the new level once the history is
    moved onto it. Where the day before already stood at the new level, the profile is the
    reference, as before."""
    rng = np.random.default_rng(7)
    values = cycle(28) + rng.normal(0, 1, 28 * 24)
    busy = values.copy()
    busy[-3 * 24 :] *= 1.5
    busy[-10:] = values[-10:] * 0.5
    start, factor, offset = detect_level_shift(busy, 24)  # type: ignore[misc]
    assert start == len(values) - 10 and factor == pytest.approx(1 / 3, abs=0.03) and offset == 0
    early = values.copy()
    early[-34:] *= 0.5
    early[-12] = values[-12]  # one usual hour: the run is the last 11 hours, and the
    found = detect_level_shift(early, 24)  # day before them is at the new level already
    assert found is not None and found[0] == len(values) - 11
    assert found[1] == pytest.approx(0.5, abs=0.05)


def test_a_step_that_fills_the_troughs_is_an_offset_not_a_factor() -> None:
    """Peaks of 70 and troughs of 30 become a flat-ish 55 with peaks of 80: moved by an
    offset, the old shape fits the new hours; scaled by the troughs' ratio, the peaks
    would be forecast at 130."""
    rng = np.random.default_rng(9)
    base = np.tile([70.0, 30.0, 30.0, 30.0], 28 * 6) + rng.normal(0, 1, 28 * 24)
    values = base.copy()
    values[-12:] = np.tile([80.0, 55.0, 55.0, 55.0], 3) + rng.normal(0, 1, 12)
    start, factor, offset = detect_level_shift(values, 24)  # type: ignore[misc]
    assert start == len(values) - 12 and factor == 1.0 and offset == pytest.approx(25, abs=3)


class Memorizer(BaseEstimator):
    """Fits its history perfectly (it stores it) and forecasts by replaying it from the start."""

    name = "memorizer"

    def __init__(self) -> None:
        pass

    def fit(self, history: pd.Series) -> Memorizer:
        y = self._prepare(history)
        self.values_ = y.to_numpy(dtype=float)
        return self

    def in_sample_error(self) -> float:
        return 0.0

    def predict(self, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        horizon, qs = self._predict_args(horizon, quantiles)
        shifted = np.resize(self.values_[5:], horizon)  # wrong phase out of sample
        return self._frame(np.repeat(shifted[:, None], len(qs), axis=1), qs, horizon)


def test_selection_never_uses_a_model_that_backtests_worse_than_the_daily_naive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(estimators._REGISTRY, "memorizer", Memorizer)
    rng = np.random.default_rng(6)
    y = hourly(cycle(21) + rng.normal(0, 3, 21 * 24), "fancy")
    est = AutoSelector(candidates=("memorizer",), slow_candidates=()).fit(y)
    assert Memorizer().fit(y).in_sample_error() == 0.0  # it wins in-sample
    assert est.chosen_ == "seasonal_naive_1d"
    assert "backtested worse than seasonal_naive_1d" in est.reason_
    frame = est.predict(24, QS)
    naive = estimators.make("seasonal_naive_1d").fit(y).predict(24, [0.5])
    np.testing.assert_allclose(frame["q0.5"].to_numpy(), naive["q0.5"].to_numpy())
