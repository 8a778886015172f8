"""Per-series selection: evidence-based choice, recorded reasons, calibrated quantiles."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np
import pandas as pd
import pytest

from forecaster import estimators
from forecaster.backtesting import backtest, daily_origins
from forecaster.estimators import BaseEstimator, SeasonalNaive
from forecaster.forecasting import forecast_series
from forecaster.selection import CHEAP_CANDIDATES, AutoSelector, adjusted_level, autocorrelation
from forecaster.store import ModelStore


def series(
    days: int, *, daily: float = 40.0, weekend: float = 1.0, noise: float = 3.0, seed: int = 0
) -> pd.Series:
    index = pd.date_range("2026-02-02", periods=days * 24, freq="1h", name="timestamp")
    rng = np.random.default_rng(seed)
    hours = index.hour.to_numpy()
    level = 100 + daily * np.sin(2 * np.pi * hours / 24)
    level = level * np.where(index.day_of_week.to_numpy() >= 5, weekend, 1.0)
    return pd.Series(level + rng.normal(0, noise, len(index)), index=index, name="s")


WITH_NAIVE = tuple(dict.fromkeys((*CHEAP_CANDIDATES, "seasonal_naive_1d")))
"""The default candidates with the daily naive baseline, to check they beat it head to head."""


def test_no_cycle_is_detected_and_a_level_model_wins() -> None:
    rng = np.random.default_rng(1)
    index = pd.date_range("2026-02-02", periods=20 * 24, freq="1h", name="timestamp")
    y = pd.Series(50 + np.cumsum(rng.normal(0, 1, len(index))), index=index, name="walk")
    est = AutoSelector(candidates=WITH_NAIVE, slow_candidates=()).fit(y)
    assert "no usable daily cycle" in est.reason_
    assert "seasonal_naive" not in est.chosen_.split("+")[0]
    assert est.scores_[est.chosen_] <= est.scores_["seasonal_naive_1d"]


def test_weekly_pattern_selects_a_weekly_model() -> None:
    y = series(28, weekend=0.4, noise=2.0)
    est = AutoSelector(candidates=WITH_NAIVE, slow_candidates=()).fit(y)
    assert "7d" in est.chosen_, est.reason_
    assert est.scores_[est.chosen_] < est.scores_["seasonal_naive_1d"]
    assert "lowest backtest MASE" in est.reason_


def test_ensemble_weights_are_normalised() -> None:
    est = AutoSelector(slow_candidates=()).fit(series(21, noise=8.0, seed=2))
    assert sum(est.weights_.values()) == pytest.approx(1.0)
    assert set(est.weights_) <= set(AutoSelector().candidates)


def test_q09_covers_about_90_percent_of_future_actuals() -> None:
    y = series(30, noise=6.0, seed=3)
    origins = daily_origins(y, 5, 24)
    bt = backtest(
        lambda: AutoSelector(slow_candidates=(), max_origins=10), y, origins, 24, [0.1, 0.5, 0.9]
    )
    assert 0.8 <= bt.coverage(0.9) <= 0.97
    assert 0.03 <= bt.coverage(0.1) <= 0.2


class NominalTails(AutoSelector):
    """The selector with its walk-forward tail scales switched off: the residual quantiles as pooled."""

    def _calibrate(self, actual: np.ndarray, point: np.ndarray) -> None:
        super()._calibrate(actual, point)
        self.tail_scales_ = (1.0, 1.0)


def drifting(days: int, seed: int) -> pd.Series:
    """A daily cycle on a level that takes a random step every day (a drifting, shifting series)."""
    index = pd.date_range("2026-02-02", periods=days * 24, freq="1h", name="timestamp")
    rng = np.random.default_rng(seed)
    level = np.repeat(100 + np.cumsum(rng.normal(0, 10, days)), 24)
    cycle = 30 * np.sin(2 * np.pi * index.hour.to_numpy() / 24)
    return pd.Series(level + cycle + rng.normal(0, 3, len(index)), index=index, name="d")


@pytest.mark.slow
def test_walk_forward_tails_keep_coverage_when_the_level_drifts() -> None:
    miss = {"walk-forward": 0.0, "nominal": 0.0}
    for seed in (1, 2, 3):
        y = drifting(24, seed)
        origins = daily_origins(y, 5, 24)
        kinds: dict[str, type[AutoSelector]] = {
            "walk-forward": AutoSelector,
            "nominal": NominalTails,
        }
        for label, kind in kinds.items():
            bt = backtest(partial(kind, slow_candidates=()), y, origins, 24, [0.1, 0.5, 0.9])
            miss[label] += abs(bt.coverage(0.9) - 0.9) + abs(bt.coverage(0.1) - 0.1)
    # Pooled residuals of a few days understate a new day's level step; walking forward
    # over the origins measures that and widens the tails.
    assert miss["walk-forward"] < 0.8 * miss["nominal"], miss


def test_adjusted_levels_are_monotone_and_never_cross_the_median() -> None:
    qs = np.linspace(0.01, 0.99, 99)
    assert [adjusted_level(q, 1.0, 1.0) for q in qs] == pytest.approx(qs)
    for lower, upper in ((0.3, 0.5), (1.0, 0.1), (0.1, 1.0)):
        levels = [adjusted_level(q, lower, upper) for q in qs]
        assert levels == sorted(levels)
        assert all(lv <= 0.5 for q, lv in zip(qs, levels, strict=True) if q < 0.5)
        assert all(lv >= 0.5 for q, lv in zip(qs, levels, strict=True) if q > 0.5)
        assert adjusted_level(0.9, lower, upper) == pytest.approx(1 - 0.1 * upper)


def test_short_history_falls_back_with_a_reason() -> None:
    y = series(1)
    est = AutoSelector().fit(y)
    assert est.chosen_ == "seasonal_naive_1d"
    assert "too short to backtest" in (est.fallback_ or "")
    assert np.isfinite(est.predict(12, [0.5, 0.9]).to_numpy()).all()


class CountingFake(BaseEstimator):
    """A slow-model stand-in that counts its fits (shared across instances)."""

    name = "counting_fake"
    fits = 0

    def __init__(self) -> None:  # no hyper-parameters (``clone`` reads them from here)
        pass

    def fit(self, history: pd.Series) -> CountingFake:
        type(self).fits += 1
        self._inner = SeasonalNaive("1d").fit(history)
        self.last_timestamp_ = self._inner.last_timestamp_
        self.step_ = self._inner.step_
        self.nonnegative_ = self._inner.nonnegative_
        return self

    def predict(self, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        return self._inner.predict(horizon, quantiles)


def test_slow_candidates_run_within_the_fit_budget_and_the_reason_says_what_was_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(estimators._REGISTRY, "counting_fake", CountingFake)
    monkeypatch.setitem(
        __import__("forecaster.selection").selection.MIN_HISTORY_DAYS, "counting_fake", 1.0
    )
    y = series(14, noise=1.0)
    CountingFake.fits = 0
    est = AutoSelector(slow_candidates=("counting_fake",), budget_s=60.0).fit(y)
    assert CountingFake.fits == 7  # every slow origin (a week), even where cheap models do well
    assert "counting_fake" in est.scores_ and "also tried counting_fake" in est.reason_
    assert "slow-candidate budget 60 s" in est.reason_
    CountingFake.fits = 0
    est = AutoSelector(slow_candidates=("counting_fake",), budget_s=0.0).fit(y)
    assert CountingFake.fits == 0
    assert "counting_fake" not in est.scores_
    assert "over budget, skipped counting_fake" in est.reason_
    # Accuracy-first can be turned back into "slow models only where cheap ones struggle".
    est = AutoSelector(slow_candidates=("counting_fake",), slow_above_mase=1.0).fit(y)
    assert CountingFake.fits == 0 and "counting_fake" not in est.scores_


def test_update_keeps_the_selection_and_moves_the_origin() -> None:
    y = series(21, noise=4.0, seed=5)
    est = AutoSelector(slow_candidates=()).fit(y.iloc[:-24])
    chosen = est.chosen_
    est.update(y)
    frame = est.predict(3, [0.5])
    assert est.chosen_ == chosen
    assert frame.index[0] == y.index[-1] + pd.Timedelta("1h")


def test_the_drift_check_reads_the_kept_median_as_the_model_would_forecast() -> None:
    # The stored model's live error from the median kept at fit time equals the one from
    # predicting with the model, for every count of new points up to past the kept width;
    # a model moved onto newer data drops it (its own forecast starts later).
    y = series(21, noise=4.0, seed=5)
    est = AutoSelector(candidates=("ets_auto", "theta", "seasonal_naive_1d"), slow_candidates=())
    est.fit(y.iloc[: -3 * 24])
    assert len(est.live_median_) == est.residuals_.shape[1]
    without = AutoSelector.__new__(AutoSelector)
    without.__dict__.update({k: v for k, v in est.__dict__.items() if k != "live_median_"})
    for new in (1, 5, 24, 3 * 24):
        seen = y.iloc[: len(y) - 3 * 24 + new]
        assert est.live_error(seen) == without.live_error(seen)
    assert est.live_error(y)[1] == min(3 * 24, est.residuals_.shape[1])
    est.update(y)
    assert not hasattr(est, "live_median_")


@pytest.mark.slow
def test_forecast_series_auto_reports_the_choice() -> None:
    y = series(15, noise=4.0, seed=6).rename("selection_report")
    fc = forecast_series(y, pd.Timedelta("6h"), [0.1, 0.5, 0.9], "auto", ModelStore(None))
    assert fc.reason.startswith("auto: lowest backtest MASE")
    assert fc.estimator != "auto"
    assert list(fc.frame.columns) == ["q0.1", "q0.5", "q0.9"] and len(fc.frame) == 6


def test_autocorrelation_sees_a_cycle() -> None:
    values = series(7, noise=1.0).to_numpy()
    assert autocorrelation(values, 24) > 0.9
    assert np.isnan(autocorrelation(values[:10], 24))


def _reference_medians(name: str, y: pd.Series, origins: list[int], horizon: int) -> np.ndarray:
    """The straightforward backtest: a new estimator fitted on a pandas slice at each origin."""
    return np.array(
        [
            estimators.make(name).fit(y.iloc[:o]).predict(horizon, [0.5]).to_numpy()[:, 0]
            for o in origins
        ]
    )


@pytest.mark.parametrize(
    "name",
    [
        "seasonal_naive_1d",
        "seasonal_naive_7d",
        "seasonal_profile_1d",
        "seasonal_profile_7d",
        "profile_regression_1d",
        "profile_regression_7d",
        "profile_mix",
        "recent_level",
    ],
)
def test_fast_backtest_equals_refitting_on_each_slice(name: str) -> None:
    # 40 days at 1 h: past profile regression's 35-day span, so both its shared-profile
    # and its per-origin paths run; gaps and a level shift exercise the NaN branches.
    y = series(40, weekend=0.6, noise=6.0, seed=11)
    y.iloc[200:230] = np.nan
    y.iloc[700:703] = np.nan
    y.iloc[800:] += 35.0
    horizon = 24
    origins = [len(y) - horizon - 24 * k for k in range(36)] + [30, 5]
    fast = estimators.make(name)
    assert isinstance(fast, estimators.ArrayEstimator)
    got = fast.backtest_medians(y, origins, horizon)
    want = _reference_medians(name, y, origins, horizon)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    assert not hasattr(fast, "_memo") or fast._memo is None  # no backtest state is left behind


def test_the_median_is_the_chosen_models_point_forecast() -> None:
    # A biased backtest must not shift the median: only the other quantiles are
    # residual quantiles around the point forecast.
    y = series(21, noise=5.0, seed=9)
    y.iloc[-24 * 3 :] += 25.0  # three days above every earlier one
    est = AutoSelector(slow_candidates=()).fit(y)
    frame = est.predict(30, [0.1, 0.5, 0.9])
    point = est.model_.predict(30, [0.5])["q0.5"]
    np.testing.assert_allclose(frame["q0.5"].to_numpy(), point.to_numpy())
    assert (frame["q0.9"] >= frame["q0.5"]).all() and (frame["q0.1"] <= frame["q0.5"]).all()


@pytest.mark.slow
def test_auto_mix_selects_among_the_profile_mix_candidates() -> None:
    from forecaster.selection import MIX_CANDIDATES, SLOW_CANDIDATES

    assert "profile_mix" in MIX_CANDIDATES and "seasonal_naive_1d" not in MIX_CANDIDATES
    y = series(21, weekend=0.5, noise=4.0, seed=12)
    est = estimators.make("auto_mix")
    assert isinstance(est, AutoSelector)
    est.fit(y)
    assert set(est.weights_) <= set(MIX_CANDIDATES) | set(SLOW_CANDIDATES)
    assert "profile_mix" in est.scores_
    frame = est.predict(24, [0.1, 0.5, 0.9])
    assert (frame["q0.9"] >= frame["q0.1"]).all()
    forecast = forecast_series(y, pd.Timedelta("12h"), [0.5, 0.9], method="auto_mix")
    assert len(forecast.frame) == 12 and "lowest backtest MASE" in forecast.reason


def test_a_registered_estimator_takes_settings_by_name() -> None:
    from forecaster.errors import BadInputError

    est = estimators.make("auto(budget_s=3, ensemble_size=4)")
    assert isinstance(est, AutoSelector)
    assert est.budget_s == 3.0 and isinstance(est.budget_s, float) and est.ensemble_size == 4
    assert estimators.make("auto").budget_s == 1.5  # the registered default is untouched
    for spec, says in [
        ("auto(budget=3)", "'budget=3' is not key=value with a key among"),
        ("auto(budget_s=fast)", "budget_s='fast' is not a number"),
        ("auto(ensemble_size=2.5)", "ensemble_size must be int like its default 5; got 2.5"),
        ("auto(budget_s=true)", "budget_s must be float"),
        ("nothing(a=1)", "unknown estimator 'nothing'"),
    ]:
        with pytest.raises(BadInputError, match=None) as err:
            estimators.make(spec)
        assert says in str(err.value) and "\n" not in str(err.value)


def test_combine_top_always_uses_the_ensemble_of_the_best_few() -> None:
    y = series(21, seed=4)
    chosen = AutoSelector(slow_candidates=(), combine="top", ensemble_size=3).fit(y)
    assert chosen.chosen_.startswith("ensemble(") and len(chosen.weights_) == 3
    ranked = sorted((k for k in chosen.scores_ if "(" not in k), key=chosen.scores_.__getitem__)
    assert list(chosen.weights_) == ranked[:3]
    assert chosen.predict(24, [0.1, 0.5, 0.9]).notna().all().all()


def test_median_ensembles_take_each_quantile_median_over_members() -> None:
    from forecaster.ensemble import Ensemble

    y = series(21, seed=5)
    members = ("seasonal_naive_1d", "recent_level", "last_value")
    med = Ensemble(members=members, combine="median").fit(y).predict(24, [0.1, 0.5, 0.9])
    each = np.stack(
        [estimators.make(m).fit(y).predict(24, [0.1, 0.5, 0.9]).to_numpy() for m in members]
    )
    np.testing.assert_allclose(med.to_numpy(), np.median(each, axis=0))
    assert (np.diff(med.to_numpy(), axis=1) >= -1e-9).all()  # quantiles stay ordered
    est = AutoSelector(slow_candidates=(), combine="median").fit(y)
    assert any(k.startswith("median(") for k in est.scores_)


def test_recency_weights_prefer_the_model_of_the_newer_days() -> None:
    # Two weeks of a strong daily cycle, then a week of a flat level: with equal weights
    # the older origins still favour the cycle; halving each origin's weight every day
    # chooses by the newer ones.
    index = pd.date_range("2026-02-02", periods=21 * 24, freq="1h", name="timestamp")
    rng = np.random.default_rng(6)
    cycle = 60 * np.sin(2 * np.pi * index.hour.to_numpy() / 24)
    cycle[-7 * 24 :] = 0.0
    y = pd.Series(200 + cycle + rng.normal(0, 2, len(index)), index=index, name="s")
    cands = ("seasonal_naive_1d", "seasonal_profile_1d", "recent_level")
    equal = AutoSelector(candidates=cands, slow_candidates=(), ensemble_size=1).fit(y)
    recent = AutoSelector(
        candidates=cands, slow_candidates=(), ensemble_size=1, recency_halflife_days=1.0
    ).fit(y)
    assert recent.scores_["recent_level"] < recent.scores_["seasonal_profile_1d"]
    assert recent.chosen_ == "recent_level" != equal.chosen_


def test_an_unknown_combination_is_a_one_line_error() -> None:
    from forecaster.errors import BadInputError

    says = "combine must be one of select, top, median, not 'vote'"
    with pytest.raises(BadInputError, match=says):
        estimators.make('auto(combine="vote")')  # where the method is read, not at fit
    with pytest.raises(BadInputError, match=says):
        AutoSelector(combine="vote").fit(series(8))
    with pytest.raises(BadInputError, match="'combine' parameter of Ensemble"):
        estimators.make('ensemble(combine="mode")')


def test_two_weeks_of_a_weekly_pattern_are_enough_to_find_it() -> None:
    y = series(14, weekend=0.4, noise=2.0)
    est = AutoSelector(candidates=WITH_NAIVE, slow_candidates=()).fit(y)
    assert est.weekly_ is not None and est.weekly_["found"], est.reason_
    assert est.weekly_["days"] == 7 and est.weekly_["error_ratio"] < 1.0
    assert "weekly pattern found" in est.reason_
    assert "7d" in est.chosen_, est.reason_  # a weekly candidate is kept and chosen
    assert est.scores_[est.chosen_] < est.scores_["seasonal_naive_1d"]
    assert est.describe()["weekly_pattern"]["found"] is True


def test_two_weeks_without_a_weekly_pattern_leave_the_weekly_candidates_out() -> None:
    y = series(14, weekend=1.0, noise=8.0, seed=4)
    est = AutoSelector(candidates=WITH_NAIVE, slow_candidates=()).fit(y)
    assert est.weekly_ is not None and not est.weekly_["found"], est.reason_
    assert "weekly pattern not found" in est.reason_ and "left out seasonal_naive_7d" in est.reason_
    assert "7d" not in est.chosen_
    assert not [k for k in est.scores_ if "7d" in k]  # never backtested, never combined


def test_the_weekly_test_rarely_finds_a_pattern_that_is_not_there() -> None:
    from forecaster.selection import weekly_pattern
    from forecaster.synthetic import seasonal_series

    found = []
    for seed in range(20):
        y = seasonal_series("s", days=15, step="15min", weekend_factor=1.0, seed=seed)
        found.append(weekly_pattern(y.to_numpy(), 96)["found"])
    assert sum(found) <= 2  # a 5% one-sided test, and the weekly copy must also forecast better
    for seed in range(5):
        y = seasonal_series("s", days=15, step="15min", weekend_factor=0.6, seed=seed)
        evidence = weekly_pattern(y.to_numpy(), 96)
        assert evidence["found"] and evidence["p_value"] < 0.01


def test_one_extreme_day_does_not_hide_a_weekly_pattern() -> None:
    from forecaster.selection import weekly_pattern

    found = []
    for seed in range(5):
        values = series(15, weekend=0.9, noise=2.0, seed=seed).to_numpy().copy()
        values[-3 * 24 : -2 * 24] *= 0.1  # a storm: one weekday at a tenth of its level
        evidence = weekly_pattern(values, 24)
        # The storm takes the values' correlation under significance (one-sided p 0.07 to
        # 0.10); their ranks keep the weekends' repeat.
        assert evidence["correlation"] < 0.6 and evidence["rank_correlation"] > 0.9
        found.append(evidence["found"])
    assert all(found)


def test_the_weekly_test_needs_ten_days_and_lets_a_flat_series_be() -> None:
    from forecaster.selection import weekly_pattern

    assert not weekly_pattern(series(9, weekend=0.4).to_numpy(), 24)["found"]
    flat = weekly_pattern(np.full(14 * 24, 5.0), 24)
    assert not flat["found"] and flat["days"] == 7


def test_three_weeks_or_more_keep_every_weekly_candidate_in_play() -> None:
    y = series(21, weekend=1.0, noise=8.0, seed=4)
    est = AutoSelector(candidates=WITH_NAIVE, slow_candidates=()).fit(y)
    assert est.weekly_ is None and "weekly pattern" not in est.reason_
    assert "seasonal_naive_7d" in est.scores_  # ranked by its backtests alone, as before
