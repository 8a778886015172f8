"""The stable choice rule of forecaster.choice on hand-made backtest errors per origin."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from forecaster.choice import (
    KAPPA,
    MIN_ORIGINS,
    Pool,
    choose,
    clear_advantage,
    origin_errors,
    penalized_scores,
    pick,
)
from forecaster.errors import BadInputError
from forecaster.estimators import make
from forecaster.selection import AutoSelector

STEADY = np.array([1.0, 1.1, 0.9, 1.0, 1.05, 0.95])


def test_the_penalty_prefers_a_stable_candidate_to_a_lower_mean_with_wild_spread() -> None:
    stable = np.full(6, 0.6) + np.array([0.02, -0.02, 0.01, -0.01, 0.0, 0.0])
    wild = np.array([0.05, 1.2, 0.05, 1.1, 0.05, 0.45])  # mean 0.483 < 0.6
    assert wild.mean() < stable.mean()
    result = choose({"wild": wild, "stable": stable}, default=None)
    assert result.name == "stable"
    # without the penalty the lower mean would have won
    assert choose({"wild": wild, "stable": stable}, default=None, kappa=0.0).name == "wild"
    assert result.scores["wild"] == pytest.approx(
        wild.mean() + KAPPA * wild.std(ddof=1) / math.sqrt(6)
    )


def test_too_few_origins_keep_the_default() -> None:
    default = np.array([1.0, 1.2])
    winner = np.array([0.5, 0.6])  # far better, but on two days only
    assert MIN_ORIGINS > 2
    result = choose({"copy": default, "model": winner}, default="copy")
    assert result.winner == "model"
    assert result.name == "copy" and result.shrunk
    assert "default kept" in result.note


def test_a_margin_within_noise_keeps_the_default() -> None:
    default = np.array([1.4, 0.6, 1.4, 0.6, 1.4, 0.6])  # mean 1.0, wild
    winner = np.full(6, 0.9)  # steadier and 0.1 better on average...
    result = choose({"copy": default, "model": winner}, default="copy")
    assert result.winner == "model"  # ...so it has the lowest penalized score...
    # ...but the paired difference (0.5, -0.3, ...) is well within one standard error
    assert not clear_advantage(winner, default)
    assert result.name == "copy" and result.shrunk


def test_clear_evidence_picks_the_best() -> None:
    result = choose({"copy": STEADY, "model": STEADY - 0.3}, default="copy")
    assert result.name == "model" and not result.shrunk
    assert clear_advantage(STEADY - 0.3, STEADY)


def test_ties_go_to_the_candidate_listed_first_every_time() -> None:
    same = {"a": STEADY.copy(), "b": STEADY.copy(), "c": STEADY + 0.2}
    assert {choose(same, default=None).name for _ in range(3)} == {"a"}
    flipped = {"b": STEADY.copy(), "a": STEADY.copy(), "c": STEADY + 0.2}
    assert choose(flipped, default=None).name == "b"
    # a winner tied with the default is not clearly ahead of it: the default stays
    assert choose({"a": STEADY.copy(), "d": STEADY.copy()}, default="d").name == "d"


def test_candidates_with_fewer_origins_compare_through_the_reference() -> None:
    long = np.array([1.0, 1.0, 1.0, 3.0, 3.0, 3.0])  # hard old days the short one never saw
    short = np.array([0.9, 0.9, 0.9])  # newest three only: 0.1 better on the days shared
    scores = penalized_scores({"long": long, "short": short}, kappa=0.0)
    assert scores["long"] == pytest.approx(2.0)
    assert scores["short"] == pytest.approx(1.9)  # not 0.9: the same days are compared


def test_origin_errors_ignore_missing_actuals_and_empty_origins() -> None:
    actual = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan], [2.0, 2.0, 2.0]])
    point = np.array([[2.0, 5.0, 3.0], [1.0, 1.0, 1.0]])
    errors = origin_errors(actual, point, scale=0.5)
    assert errors[0] == pytest.approx(1.0)  # (1 + 0) / 2 observed / 0.5
    assert math.isnan(errors[1]) and len(errors) == 2


def _pool(errors_by_name: dict[str, float], days: int = 6, wobble: float = 0.05) -> Pool:
    """A pool whose candidates each miss the actual (all 10) by a fixed amount, plus a
    day-to-day wobble of ``wobble`` (in phase for the first candidate, against it for the
    second, and so on), so their errors per origin are known."""
    actual = np.full((days, 4), 10.0)
    pool = Pool(actual)
    swing = np.resize([wobble, -wobble], days)[:, None]
    for i, (name, miss) in enumerate(errors_by_name.items()):
        pool.add(name, actual + miss + swing * (-1) ** i, {name: 1.0}, single=True)
    return pool


def test_the_copy_rule_shrinks_to_the_better_seasonal_copy() -> None:
    # gbm is 0.02 better on average than the weekly copy, day to day 0.12 better or 0.08 worse
    pool = _pool({"seasonal_naive_1d": 2.0, "seasonal_naive_7d": 1.0, "gbm": 0.98})
    name, points, weights, note = pick("stable_copy", pool)
    assert name == "seasonal_naive_7d" and weights == {"seasonal_naive_7d": 1.0}
    assert points is pool.points["seasonal_naive_7d"] and "default kept" in note
    # 0.5 better every day: clear, gbm replaces the copy
    pool = _pool({"seasonal_naive_1d": 2.0, "seasonal_naive_7d": 1.0, "gbm": 0.5})
    assert pick("stable_copy", pool)[0] == "gbm"


def test_the_median_rule_builds_the_median_of_the_best_three() -> None:
    actual = np.full((6, 1), 10.0)
    sign = np.resize([1.0, -1.0], 6)[:, None]
    points = {
        "d": actual + 3.0,
        "a": actual + 0.9 * sign,  # off by 0.9 every day, above then below
        "b": actual - 0.95 * sign,  # 0.95, on the other side
        "c": actual + 1.0 * sign,
    }
    pool = Pool.of(points, dict.fromkeys(points, 0.0), actual, 1.0)
    name, points, weights, note = pick("stable_median", pool)
    assert name == "median(a+b+c)" and set(weights) == {"a", "b", "c"}
    expected = np.median(np.stack([pool.points[k] for k in "abc"]), axis=0)
    assert np.allclose(points, expected)
    # the winner a is no better than the median on any day: the default stays
    assert "default kept" in note


def test_an_unknown_rule_is_refused() -> None:
    with pytest.raises(BadInputError, match="choice must be"):
        AutoSelector(choice="best_guess").check_settings()
    pool = _pool({"a": 1.0})
    with pytest.raises(ValueError, match="unknown rule"):
        pick("best_guess", pool)


def _daily(days: int = 10) -> pd.Series:
    index = pd.date_range("2026-03-02", periods=days * 24, freq="1h", name="timestamp")
    rng = np.random.default_rng(3)
    values = 50 + 30 * np.sin(2 * np.pi * index.hour.to_numpy() / 24) + rng.normal(0, 3, len(index))
    return pd.Series(values, index=index, name="demand")


def test_auto_with_a_choice_rule_says_what_it_chose_and_forecasts() -> None:
    y = _daily()
    est = make('auto(budget_s=0.0, choice="stable_copy")').fit(y)
    assert isinstance(est, AutoSelector)
    assert est.choice_note_.startswith("choice stable_copy: ")
    assert est.choice_note_ in est.reason_
    assert est.chosen_ in est.scores_
    frame = est.predict(24, [0.1, 0.5, 0.9])
    assert frame.notna().all().all()
    assert make("auto(budget_s=0.0)").fit(y).choice_note_ == ""
