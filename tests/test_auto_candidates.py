"""A live cycle's ``auto`` and ``tiercast bench-forecast``'s ``auto`` consider the same
candidates, the global model in neither (docs/forecasting.md, "A global model across the
fleet"): the benchmark scores what a cycle gets."""

from __future__ import annotations

from typing import ClassVar

import pandas as pd

from forecaster import estimators
from forecaster.benchmarks import accuracy
from forecaster.estimators import SeasonalNaive
from forecaster.forecasting import choose_estimator
from forecaster.global_model import Fleet, current_fleet, fleet_context
from forecaster.selection import AutoSelector, auto_candidates
from forecaster.synthetic import seasonal_series

END = pd.Timestamp("2026-11-05")


def _siblings(days: int = 10) -> list[pd.Series]:
    return [
        seasonal_series(f"s{i}", end=END, days=days, step="1h", base=30.0 * (i + 1), seed=i)
        for i in range(3)
    ]


def test_a_cycle_and_the_benchmark_fit_auto_with_the_same_candidates() -> None:
    siblings = _siblings()
    y = siblings[0]
    cycle, _ = choose_estimator(y, "auto")  # what run/serve fit for one signal
    bench = accuracy._factory("auto")()  # what bench-forecast backtests at each origin
    assert isinstance(cycle, AutoSelector) and isinstance(bench, AutoSelector)
    cycle.set_params(slow_candidates=())  # the slow ones only cost time here
    bench.set_params(slow_candidates=())
    cycle.fit(y)
    # A fleet in context (as the benchmark once gave the group's series) changes nothing.
    with fleet_context(Fleet.of(siblings)):
        bench.fit(y)
    assert cycle.considered_ == bench.considered_
    assert cycle.considered_ == auto_candidates(cycle, cycle.weekly_)
    for est in (cycle, bench):
        assert not any("global" in name for name in est.considered_), est.considered_
        assert not any("global" in name for name in est.scores_)
    assert cycle.chosen_ == bench.chosen_


class _Recording(SeasonalNaive):
    """The daily naive model, noting the fleet in context at each fit."""

    seen: ClassVar[list[Fleet | None]] = []

    def fit(self, history: pd.Series) -> _Recording:
        _Recording.seen.append(current_fleet())
        super().fit(history)
        return self


def test_the_benchmark_gives_the_method_under_test_no_fleet() -> None:
    """As a cycle forecasts each signal alone, the benchmark's method sees its series alone."""
    y = seasonal_series("s0", end=END, days=16, step="15min", seed=1)
    estimators.register("recording_bench_fleet", _Recording)
    _Recording.seen = []
    try:
        rows = accuracy.accuracy_rows(y, ("recording_bench_fleet",), "group")
    finally:
        estimators._REGISTRY.pop("recording_bench_fleet", None)
    assert [r.method for r in rows] == [accuracy.TIERCAST + "recording_bench_fleet"]
    assert _Recording.seen and all(fleet is None for fleet in _Recording.seen)
