"""Each tail of a long-horizon band on its own (forecaster.long_horizon): a median that runs
biased gets an asymmetric band that covers near nominal where a symmetric one does not; the
band's errors can be scored relative to a floored forecast instead of in log ratio, and
the floor at the model's band at the seam can be lifted, both for the benchmark."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.benchmarks.long_horizon import main
from forecaster.long_horizon import (
    RELATIVE_FLOOR,
    band_log_ratio,
    conformal_level,
    error_scale,
    long_horizon_frame,
    measured_errors,
)

STEP = pd.Timedelta(hours=1)
START = pd.Timestamp("2026-01-05")  # a Monday
QS = (0.1, 0.5, 0.9)
LEADS = np.array([7.0, 14.0, 21.0, 28.0])


def test_a_biased_median_gets_a_band_that_covers_its_upper_tail_near_nominal() -> None:
    rng = np.random.default_rng(0)
    # Backtests of a median that runs 30% low (log errors centred on +0.3, spread 0.1) at
    # every lead; the coming errors are drawn from the same distribution (exchangeable).
    measured = {d: rng.normal(0.3, 0.1, 400) for d in (1, 7, 14, 30)}
    coming = rng.normal(0.3, 0.1, 20_000)
    up = band_log_ratio(measured, 0.9, LEADS, seam=0.05, seam_day=7.0)
    low = band_log_ratio(measured, 0.1, LEADS, seam=-0.05, seam_day=7.0, seam_floor=False)
    # Each tail is its own quantile of the signed errors: both bounds sit above the median
    # (the lower one only without the floor at the model's band, which reaches below it).
    assert (low > 0.1).all() and (up > 0.4).all()
    floored = band_log_ratio(measured, 0.1, LEADS, seam=-0.05, seam_day=7.0)
    assert floored == pytest.approx(np.full(len(LEADS), -0.05))
    assert np.mean(coming <= up[0]) == pytest.approx(0.9, abs=0.02)
    assert np.mean((coming >= low[0]) & (coming <= up[0])) == pytest.approx(0.8, abs=0.03)
    # A symmetric band (the median +- the 0.8-quantile of |error|) covers as much of the
    # two sides together, but its upper bound only 0.80 of the time, under 0.85.
    errors = measured[7]
    half = float(np.quantile(np.abs(errors), conformal_level(0.8, errors.size)))
    assert np.mean(np.abs(coming) <= half) == pytest.approx(0.8, abs=0.03)
    assert np.mean(coming <= half) < 0.85


def test_without_the_seam_floor_the_rule_s_own_backtests_set_each_tail() -> None:
    measured = {d: np.linspace(-0.1, 0.1, 201) for d in (1, 7, 14, 30)}
    floored = band_log_ratio(measured, 0.9, LEADS, seam=0.5, seam_day=7.0)
    alone = band_log_ratio(measured, 0.9, LEADS, seam=0.5, seam_day=7.0, seam_floor=False)
    assert (floored >= 0.5).all()
    assert alone == pytest.approx(np.full(len(LEADS), 0.08), abs=0.005)
    low = band_log_ratio(measured, 0.1, LEADS, seam=-0.5, seam_day=7.0, seam_floor=False)
    assert low == pytest.approx(np.full(len(LEADS), -0.08), abs=0.005)


def idle_nights(days: int, seed: int = 0) -> pd.Series:
    """Busy days (100 +- 5%) and idle nights: 0, or a small job (2) a third of the time."""
    rng = np.random.default_rng(seed)
    idx = pd.date_range(START, periods=days * 24, freq=STEP, name="timestamp")
    day = (idx.hour >= 8) & (idx.hour < 20)
    busy = 100 * rng.lognormal(0, 0.05, len(idx))
    night = np.where(rng.random(len(idx)) < 1 / 3, 2.0, 0.0)
    return pd.Series(np.where(day, busy, night), index=idx, name="rps")


def test_a_relative_score_keeps_the_band_of_busy_hours_from_idle_nights() -> None:
    y = idle_nights(42)
    idx = pd.date_range(y.index[-1] + STEP, periods=28 * 24, freq=STEP)
    # A model forecast of the usual day (100 busy, 0 at night) with a band of +-10%.
    mid = np.where((idx.hour >= 8) & (idx.hour < 20), 100.0, 0.0)
    model = pd.DataFrame({"q0.1": 0.9 * mid, "q0.5": mid, "q0.9": 1.1 * mid}, index=idx)
    noon = (idx.hour == 12) & (idx > idx[0] + pd.Timedelta(days=9))
    # The log ratio of a small job over an idle night's forecast of nearly 0 is large, and
    # one quantile per lead day is set over every hour of it: busy hours get it too.
    logged, _ = long_horizon_frame(y, model, STEP, QS)
    relative, _ = long_horizon_frame(y, model, STEP, QS, score="relative")
    log_up = (logged["q0.9"] / logged["q0.5"])[noon]
    rel_up = (relative["q0.9"] / relative["q0.5"])[noon]
    assert log_up.min() > 3.0
    assert rel_up.max() < 1.5
    assert (relative["q0.1"] <= relative["q0.5"]).all()
    assert (relative["q0.5"] <= relative["q0.9"]).all()
    # The relative errors are the signed error over the forecast floored at a tenth of the
    # level.
    assert error_scale("relative", np.array([0.0, 50.0]), 40.0) == pytest.approx(
        [RELATIVE_FLOOR * 40.0, 50.0 + RELATIVE_FLOOR * 40.0]
    )
    assert sorted(measured_errors(y, STEP, score="relative")) == [1, 7, 14]
    with pytest.raises(ValueError, match="unknown band score"):
        long_horizon_frame(y, model, STEP, QS, score="absolute")


def test_the_benchmark_refuses_an_unknown_score(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--traces", ".", "--scores", "log,absolute"]) == 2
    assert "unknown --scores absolute" in capsys.readouterr().err
