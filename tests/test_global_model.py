"""The global model: one quantile GBM over a fleet's series, shared by all of them."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from forecaster.backtesting import backtest
from forecaster.errors import BadInputError
from forecaster.estimators import SeasonalNaive, make
from forecaster.global_model import (
    Fleet,
    GlobalBoosting,
    cache_stats,
    clear_cache,
    compact_trees,
    current_fleet,
    fleet_at_origin,
    fleet_context,
    fleet_context_at,
    predict_trees,
    training_rows,
    walk_trees,
)
from forecaster.parallel import ForecastSpec, JoblibBackend, forecast_all
from forecaster.selection import AutoSelector
from forecaster.synthetic import seasonal_series

END = pd.Timestamp("2026-11-05")  # a Thursday, 00:00
HOUR = pd.Timedelta(hours=1)


def hourly_fleet(count: int = 4, days: int = 28, weekend: float = 0.4) -> list[pd.Series]:
    """Siblings on one calendar: different levels and peak hours, the same weekends."""
    return [
        seasonal_series(
            f"sib{i}",
            end=END,
            days=days,
            step="1h",
            base=40.0 * (i + 1),
            weekend_factor=weekend,
            noise=0.08,
            peak_hour=9.0 + 2 * i,
            seed=i,
        )
        for i in range(count)
    ]


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    """Each test counts and fits from an empty cache."""
    clear_cache()


@pytest.mark.slow
def test_a_sibling_changed_after_the_cutoff_does_not_change_the_forecast() -> None:
    siblings = hourly_fleet()
    last = END - pd.Timedelta(days=5) - HOUR
    target = siblings[0][siblings[0].index <= last]
    changed = [s.copy() for s in siblings]
    changed[1][changed[1].index > last] *= 10.0  # the future of one sibling, rewritten
    changed[2][changed[2].index > last] = np.nan  # and another's, lost

    def forecast(fleet: list[pd.Series]) -> tuple[pd.DataFrame, GlobalBoosting]:
        with fleet_context(Fleet.of(fleet)):
            est = GlobalBoosting().fit(target)
        return est.predict(48, [0.1, 0.5, 0.9]), est

    want, est = forecast(siblings)
    got, again = forecast(changed)
    assert est.fallback_ is None and est.cutoff_ is not None and est.cutoff_ <= last
    assert again.cutoff_ == est.cutoff_
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    for a, b in zip(
        training_rows(Fleet.of(siblings), HOUR, est.cutoff_, 200_000, 0),
        training_rows(Fleet.of(changed), HOUR, est.cutoff_, 200_000, 0),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    # The control: the same change before the cutoff does move the forecast.
    earlier = [s.copy() for s in siblings]
    earlier[1][earlier[1].index <= last] *= 10.0
    moved, _ = forecast(earlier)
    assert not np.allclose(moved.to_numpy(), want.to_numpy())


def _young_and_siblings(
    seed: int, hide_weekend: bool
) -> tuple[pd.Series, pd.Series, list[pd.Series]]:
    """Four 28-day siblings with weekends at 40% of weekdays, and a 10-day-old series of
    the same kind (history and the week that follows), at 15 minutes."""
    siblings = [
        seasonal_series(
            f"sib{i}",
            end=END,
            days=28,
            step="15min",
            base=50.0 * (i + 1),
            weekend_factor=0.4,
            noise=0.1 if hide_weekend else 0.2,
            peak_hour=10.0 + i,
            seed=100 * seed + i,
        )
        for i in range(4)
    ]
    whole = seasonal_series(
        "young",
        end=END + pd.Timedelta(days=7),
        days=17,
        step="15min",
        base=300.0,
        weekend_factor=0.4,
        noise=0.1 if hide_weekend else 0.2,
        peak_hour=12.0,
        seed=100 * seed + 11,
    )
    young = whole[whole.index < END].copy()
    if hide_weekend:
        young[young.index.day_of_week >= 5] = np.nan  # its exporter was down that weekend
    return young, whole[whole.index >= END], siblings


@pytest.mark.slow
def test_a_ten_day_old_series_borrows_the_weekend_its_own_history_cannot_show() -> None:
    young, future, siblings = _young_and_siblings(seed=0, hide_weekend=True)
    assert (young.index[-1] - young.index[0]) < pd.Timedelta(days=10)
    assert young[young.index.day_of_week >= 5].isna().all()
    with fleet_context(Fleet.of([*siblings, young])):
        shared = make("global_gbm").fit(young).predict(7 * 96, [0.5])["q0.5"]
    alone = make("gbm").fit(young).predict(7 * 96, [0.5])["q0.5"]
    weekend = shared.index.day_of_week >= 5
    actual = future.reindex(shared.index)
    truth = actual[weekend].mean() / actual[~weekend].mean()

    def ratio(f: pd.Series) -> float:
        return float(f[weekend].mean() / f[~weekend].mean())

    assert abs(ratio(shared) - truth) < 0.1, (ratio(shared), truth)
    assert ratio(alone) > 0.8  # the per-series model repeats weekdays through the weekend
    shared_error = float((shared - actual).abs()[weekend].mean())
    alone_error = float((alone - actual).abs()[weekend].mean())
    assert shared_error < 0.25 * alone_error


@pytest.mark.slow
def test_with_one_noisy_weekend_of_its_own_the_fleet_still_forecasts_it_better() -> None:
    young, future, siblings = _young_and_siblings(seed=0, hide_weekend=False)
    with fleet_context(Fleet.of([*siblings, young])):
        shared = make("global_gbm").fit(young).predict(7 * 96, [0.5])["q0.5"]
    alone = make("gbm").fit(young).predict(7 * 96, [0.5])["q0.5"]
    weekend = shared.index.day_of_week >= 5
    actual = future.reindex(shared.index)
    assert (shared - actual).abs()[weekend].mean() < (alone - actual).abs()[weekend].mean()
    assert (shared - actual).abs().mean() < (alone - actual).abs().mean()


@pytest.mark.slow
def test_the_global_model_is_deterministic_and_its_trees_predict_as_scikit_learn() -> None:
    siblings = hourly_fleet()
    y = siblings[0]
    with fleet_context(Fleet.of(siblings)):
        first = GlobalBoosting().fit(y).predict(36, [0.1, 0.5, 0.9])
    clear_cache()
    with fleet_context(Fleet.of(list(reversed(siblings)))):  # order does not matter
        second = GlobalBoosting().fit(y).predict(36, [0.1, 0.5, 0.9])
    pd.testing.assert_frame_equal(first, second, check_exact=True)

    from sklearn.ensemble import HistGradientBoostingRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 5))
    X[rng.random(X.shape) < 0.1] = np.nan
    target = np.nan_to_num(X[:, 0]) + np.sin(np.nan_to_num(X[:, 1]))
    model = HistGradientBoostingRegressor(
        loss="quantile", quantile=0.9, max_iter=40, random_state=0
    ).fit(X, target)
    trees = compact_trees(model)
    np.testing.assert_array_equal(predict_trees(trees, X[:500]), model.predict(X[:500]))
    np.testing.assert_array_equal(walk_trees(trees, X[:500]), model.predict(X[:500]))


@pytest.mark.slow
def test_without_a_fleet_the_global_model_falls_back_and_says_why() -> None:
    siblings = hourly_fleet(count=3, days=14)
    y = siblings[0]
    alone = make("global_gbm").fit(y)
    assert alone.fallback_ is not None and "no fleet context (a lone series)" in alone.fallback_
    pd.testing.assert_frame_equal(
        alone.predict(24, [0.1, 0.5, 0.9]),
        SeasonalNaive(season="1d").fit(y).predict(24, [0.1, 0.5, 0.9]),
    )
    with fleet_context(Fleet.of(siblings[:2])):
        few = make("global_gbm").fit(y)
    assert few.fallback_ is not None
    assert "the fleet has 1 other series with a day of history by the cutoff (needs 2)" in (
        few.fallback_
    )
    with fleet_context(Fleet.of(siblings)):
        enough = make("global_gbm").fit(y)
    assert enough.fallback_ is None


def test_auto_never_considers_the_global_model_even_with_a_fleet_in_context() -> None:
    """A live cycle forecasts each signal alone, so auto leaves the global model out
    everywhere (docs/forecasting.md): a fleet in context changes nothing."""
    siblings = hourly_fleet(count=3, days=14)
    alone = AutoSelector(slow_candidates=()).fit(siblings[0])
    with fleet_context(Fleet.of(siblings)):
        together = AutoSelector(slow_candidates=()).fit(siblings[0])
    for est in (alone, together):
        assert not any("global" in name for name in est.considered_), est.considered_
        assert not any("global" in name for name in est.scores_)
        assert "fleet" not in est.reason_ and "fleet" not in est.describe()
    assert alone.considered_ == together.considered_ and alone.chosen_ == together.chosen_
    assert cache_stats()["fits"] == 0


def test_bad_input_gets_one_clear_line() -> None:
    y = hourly_fleet(count=1, days=10)[0]
    cases = [
        (lambda: Fleet.of([pd.Series([1.0, 2.0])]), "fleet: every series needs a name"),
        (
            lambda: Fleet.of({"a": [1.0, 2.0]}),  # type: ignore[dict-item]
            "fleet: series 'a' must be a pandas Series on a DatetimeIndex; got list",
        ),
        (lambda: Fleet.of([y, y]), "fleet: series name 'sib0' appears twice"),
        (
            lambda: GlobalBoosting(max_rows=10).fit(y),
            "The 'max_rows' parameter of GlobalBoosting must be an int >= 1000. Got 10 instead.",
        ),
        (
            lambda: make("global_gbm(learning_rate=0)"),
            "The 'learning_rate' parameter of GlobalBoosting must be a number > 0. Got 0.0",
        ),
        (
            lambda: fleet_context("sib0").__enter__(),  # type: ignore[arg-type]
            "fleet_context expects a Fleet (Fleet.of(series)) or None; got str",
        ),
    ]
    for call, message in cases:
        with pytest.raises(BadInputError) as info:
            call()
        assert message in str(info.value)
        assert "\n" not in str(info.value)
    assert current_fleet() is None


@pytest.mark.slow
def test_one_fit_per_cutoff_is_shared_by_every_series_of_the_fleet() -> None:
    history = hourly_fleet(count=4, days=14)
    with fleet_context(Fleet.of(history)):
        make("global_gbm").fit(history[0])
        first = cache_stats()["fits"]
        for y in history[1:]:
            make("global_gbm").fit(y)
    stats = cache_stats()
    # The four series end together, so they share one cutoff: fitted once for all four.
    assert 0 < first == stats["fits"]
    assert stats["hits"] >= 3 * first


@pytest.mark.slow
def test_a_fitted_global_model_is_stored_without_pickle_and_moves_onto_new_data(
    tmp_path: Path,
) -> None:
    from forecaster.artifacts import dumps, loads

    siblings = hourly_fleet()
    y = siblings[0][siblings[0].index < END - pd.Timedelta(days=1)]
    with fleet_context(Fleet.of(siblings)):
        est = GlobalBoosting().fit(y)
    want = est.predict(30, [0.1, 0.5, 0.9])
    blob = tmp_path / "global.npz"
    blob.write_bytes(dumps({"model": est}, "global", None))  # no signing key needed
    again = loads(blob, "global", None)["model"]
    got = again.predict(30, [0.1, 0.5, 0.9])
    np.testing.assert_array_equal(got.to_numpy(), want.to_numpy())
    assert (got.index == want.index).all()
    twin = copy.deepcopy(est)
    assert twin.trees_ is est.trees_  # one fleet's trees, not a copy per series
    moved = twin.update(siblings[0])  # a day newer, outside any fleet context
    assert moved.trees_ is est.trees_ and moved.last_timestamp_ == siblings[0].index[-1]
    assert moved.predict(24, [0.5]).index[0] == END


def test_the_parallel_path_forecasts_every_series_alone() -> None:
    """No fleet travels to the workers: the global model named there falls back, and says why."""
    series = hourly_fleet(count=3, days=14)
    spec = ForecastSpec(12 * HOUR, (0.1, 0.5, 0.9), "global_gbm")
    report = forecast_all(series, spec, JoblibBackend(1), batch_size=2)
    assert any("no fleet context" in n for n in report.forecasts["sib0"].notes)


class _Recording(SeasonalNaive):
    """The daily naive model, noting the fleet in context at each fit."""

    seen: ClassVar[list[Fleet | None]] = []

    def fit(self, history: pd.Series) -> _Recording:
        _Recording.seen.append(current_fleet())
        super().fit(history)
        return self


def test_the_benchmark_gives_the_fleet_as_it_stood_at_each_origin() -> None:
    series = [s.resample("15min").ffill() for s in hourly_fleet(count=3, days=28)]
    y = series[0]
    origins = [END - pd.Timedelta(days=k) for k in (3, 2, 1)]
    retention = pd.Timedelta(days=15)
    _Recording.seen = []
    backtest(
        _Recording,
        y,
        origins,
        96,
        (0.5,),
        max_history=retention,
        context=functools.partial(fleet_context_at, series, retention),
    )
    assert len(_Recording.seen) == 3
    for origin, fleet in zip(origins, _Recording.seen, strict=True):
        assert fleet is not None and len(fleet) == 3
        assert fleet is fleet_at_origin(series, origin, retention)
        for s in fleet.series.values():
            assert s.index[-1] < origin and s.index[0] >= origin - retention
    assert current_fleet() is None


@pytest.mark.slow
def test_tiercast_forecast_gives_the_series_of_its_file_to_each_other_as_the_fleet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from scaler.cli import main

    siblings = hourly_fleet(count=3, days=14)
    rows = [
        pd.DataFrame(
            {
                "timestamp": y.index.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "series": y.name,
                "value": y.values,
            }
        )
        for y in siblings
    ]
    fleet_file = tmp_path / "fleet.csv"
    pd.concat(rows).to_csv(fleet_file, index=False)
    lone_file = tmp_path / "lone.csv"
    rows[0].drop(columns="series").to_csv(lone_file, index=False)

    from forecaster import estimators

    estimators.register("recording_forecast_fleet", _Recording)
    try:

        def fleets(*args: str) -> list[int]:
            """The size of the fleet in context at each fit (0: none)."""
            _Recording.seen = []
            argv = ["forecast", "--horizon", "6h", "-o", "json", "--no-progress", "--method"]
            assert main([*argv, "recording_forecast_fleet", *args]) == 0
            assert json.loads(capsys.readouterr().out)["forecasts"]
            return [len(f) if f is not None else 0 for f in _Recording.seen]

        # The global model named on its own gets the file's series as its fleet.
        assert fleets("--history", str(fleet_file)) == [3, 3, 3]
        assert fleets("--history", str(fleet_file), "--series", "sib1") == [3]
        assert fleets("--history", str(lone_file)) == [0]
    finally:
        estimators._REGISTRY.pop("recording_forecast_fleet", None)


def test_tiercast_backtest_gives_the_fleet_as_it_stood_at_each_origin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from scaler.cli import main

    siblings = hourly_fleet(count=3, days=14)
    fleet_file = tmp_path / "fleet.csv"
    pd.concat(
        pd.DataFrame(
            {
                "timestamp": y.index.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "series": y.name,
                "value": y.values,
            }
        )
        for y in siblings
    ).to_csv(fleet_file, index=False)
    seen: list[tuple[pd.Timestamp, pd.Timestamp | None]] = []

    class Recording(SeasonalNaive):
        """Records, at each fit, the end of its history and the newest sibling value it sees."""

        def fit(self, history: pd.Series) -> Recording:
            fleet = current_fleet()
            newest = max(s.index[-1] for s in fleet.series.values()) if fleet else None
            seen.append((history.index[-1], newest))
            return super().fit(history)

    from forecaster import estimators

    estimators.register("recording_fleet", Recording)
    try:

        def run(*extra: str) -> list[dict[str, object]]:
            out = tmp_path / "bt.json"
            args = ["backtest", "--history", str(fleet_file), "--methods", "recording_fleet"]
            assert main([*args, "--origins", "3", "--json", str(out), "--no-progress", *extra]) == 0
            capsys.readouterr()
            return list(json.loads(out.read_text()))

        rows = run("--series", "sib1")
        assert [r["series"] for r in rows] == ["sib1"]
        assert len(seen) == 3
        for end, newest in seen:  # every sibling cut before the origin, as a cluster held it
            assert newest is not None and newest == end
        seen.clear()
        run("--no-fleet")
        assert len(seen) == 9 and all(newest is None for _, newest in seen)
    finally:
        estimators._REGISTRY.pop("recording_fleet", None)
