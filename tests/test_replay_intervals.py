"""A saving at matched service with its interval over the test days (scaler.replay.frontier:
``DayTotals``, ``matched_interval``): each draw resamples whole days, and the policy and
the frontier are scored on the same ones."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from scaler.replay.baselines import reactive_requests
from scaler.replay.fleets import FleetRun, single_pool_run
from scaler.replay.frontier import CheapestOf, DayTotals, matched_interval, reactive_frontier
from scaler.replay.protocol import STEP_H, ReplaySetup, Trace, prepare_trace
from scaler.replay.scoring import Score, score

FEW = (0.0, 0.2, 0.5, 1.0)


def _trace(days: int, test_days: int, odd_day: int | None = None) -> tuple[Trace, ReplaySetup]:
    """A daily cycle; ``odd_day`` (a test day) has its afternoon doubled."""
    setup = ReplaySetup(short_test_days=test_days)
    t = np.arange(days * 288)
    values = 20 + 10 * np.sin(2 * np.pi * t / 288)
    if odd_day is not None:
        start = (days - test_days + odd_day) * 288
        values[start + 150 : start + 250] *= 2
    idx = pd.date_range("2026-01-01", periods=len(values), freq="5min", name="timestamp")
    return prepare_trace(pd.Series(values, index=idx, name="d"), 1, setup), setup


def _policy(
    trace: Trace, setup: ReplaySetup, headroom: float
) -> tuple[FleetRun, Score, np.ndarray]:
    """A reactive run at ``headroom`` held 60 minutes: a point off the 30-minute frontier."""
    at = replace(setup, reactive_headroom=headroom, reactive_hold_s=3600)
    run = single_pool_run("p", reactive_requests(trace, at), at)
    demand = trace.demand[trace.test_start :]
    return run, score(run, demand, setup.gpus_per_node, np.nan, np.nan), demand


def test_the_days_add_up_to_the_run() -> None:
    trace, setup = _trace(5, 3)
    run, s, demand = _policy(trace, setup, 0.1)
    days = DayTotals.of(run, demand, setup.gpus_per_node)
    assert len(days.cost) == 3
    assert days.cost.sum() == pytest.approx(s.cost)
    assert days.short.sum() * STEP_H == pytest.approx(s.unserved_gpu_hours)
    # Every day once: the run itself.
    whole = days.drawn(s, np.ones(3), float(demand.sum()))
    assert whole.cost == pytest.approx(s.cost)
    assert whole.unserved_share == pytest.approx(s.unserved_share)


def test_one_test_day_gives_the_saving_itself() -> None:
    trace, setup = _trace(2, 1)
    run, s, demand = _policy(trace, setup, 0.1)
    frontier = reactive_frontier(trace, setup, FEW)
    saving = frontier.match(s).saving
    got = matched_interval(
        frontier, s, DayTotals.of(run, demand, setup.gpus_per_node), demand, draws=20
    )
    assert got is not None
    lo, hi = got
    assert lo == pytest.approx(saving) and hi == pytest.approx(saving)


def test_an_odd_day_spreads_the_saving_and_the_draws_are_seeded() -> None:
    trace, setup = _trace(8, 4, odd_day=2)
    run, s, demand = _policy(trace, setup, 0.1)
    frontier = reactive_frontier(trace, setup, FEW)
    days = DayTotals.of(run, demand, setup.gpus_per_node)
    got = matched_interval(frontier, s, days, demand, draws=200)
    assert got is not None
    lo, hi = got
    # Draws with more copies of the odd day save less than the days as they came.
    assert lo < frontier.match(s).saving <= hi + 1e-12 and lo < hi - 0.01
    assert matched_interval(frontier, s, days, demand, draws=200) == got
    # Several frontiers as one resample part by part: every day once is the match itself.
    both = CheapestOf.of([frontier, reactive_frontier(trace, setup, (0.3,))])
    whole = both.resampled(np.ones(4), float(demand.sum()))
    assert whole is not None and whole.match(s).saving == pytest.approx(both.match(s).saving)
    # A frontier without its days has no interval.
    bare = type(frontier)(frontier.headrooms, frontier.scores, frontier.holds)
    assert matched_interval(bare, s, days, demand, draws=10) is None


def test_the_mean_over_groups_is_drawn_as_it_is_averaged() -> None:
    from scaler.replay.suite import SuiteResult, SuiteSeries
    from scaler.replay.tables import _mean_spread

    def result(group: str, draws: np.ndarray | None) -> SuiteResult:
        return SuiteResult(
            SuiteSeries(f"{group}.csv", 1.0, group),
            group,
            {},
            draws={} if draws is None else {"predictive": draws},
        )

    draws = np.linspace(-0.1, 0.1, 101)
    # Two series of group a average to 0 on every draw; group b is the draws themselves:
    # the mean over groups is half of b's, draw by draw.
    results = [result("a", draws), result("a", -draws), result("b", draws)]
    text = _mean_spread(results, ["a", "b"], "draws", "predictive")
    lo, hi = np.quantile(draws / 2, [0.05, 0.95])
    assert text == f" (90% over test days {100 * lo:+.2f}% to {100 * hi:+.2f}%)"
    # A series without draws: no interval for the mean rather than one of part of it.
    assert _mean_spread([*results, result("b", None)], ["a", "b"], "draws", "predictive") == ""
