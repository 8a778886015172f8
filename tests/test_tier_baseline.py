"""The tiered reactive baseline of the tier replay (issue 46): reserved sized by tiercast's
rule (or at hindsight, or every commitment as a floor), spot for the rest up to the market depth with the reclaim spares,
on-demand above it, all following the reactive rule's target; and the tiered plan scored
against it at matched service."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import numpy as np
import pandas as pd
import pytest

from scaler.replay.frontier import CheapestOf, Frontier, Matched
from scaler.replay.protocol import STEP_H, ReplaySetup, prepare_trace
from scaler.replay.scoring import Score
from scaler.replay.suite import Suite, SuiteResult, SuiteSeries
from scaler.replay.tables import format_leads, format_summary
from scaler.replay.tiers import (
    _cheapest_tiers,
    _spot_spare,
    tier_sizes,
    tier_split,
    tiered_reactive_frontier,
    tiered_reactive_run,
)

SETUP = ReplaySetup(short_test_days=1)
NO_RECLAIMS = replace(SETUP, spot_interruption_rate_per_hour=0.0)
FEW = (0.0, 0.2, 0.5)


def _trace(values: np.ndarray, setup: ReplaySetup = SETUP):
    idx = pd.date_range("2026-01-01", periods=len(values), freq="5min", name="timestamp")
    return prepare_trace(pd.Series(np.asarray(values, float), index=idx, name="d"), 1, setup)


def _wavy(seed: int = 0) -> np.ndarray:
    """Two days of 5-minute demand between about 10 and 90 GPUs."""
    rng = np.random.default_rng(seed)
    t = np.arange(576)
    return np.maximum(1, 50 + 35 * np.sin(2 * np.pi * t / 288) + rng.normal(0, 4, 576))


def test_reserved_first_then_spot_with_its_spare_then_on_demand() -> None:
    # 3 reserved, a market of 8 spot nodes of which 1 is the spare against reclaims.
    split = tier_split(np.array([0, 3, 5, 10, 20]), 3, 8, SETUP)
    assert split["reserved"].tolist() == [3] * 5
    assert split["spot"].tolist() == [0, 0, 3, 8, 8]  # 2 + spare, 7 + spare, capped
    assert split["on-demand"].tolist() == [0, 0, 0, 0, 10]


def test_without_reclaims_each_tier_serves_by_the_lead_time_rule() -> None:
    target = np.array([4, 4, 9, 9, 9, 9, 2, 2])
    run = tiered_reactive_run(target, 2, 4, NO_RECLAIMS)
    assert run.usable["reserved"].tolist() == [2] * 8
    # Nothing to reclaim, no spare; the raise at step 2 serves two steps (10 minutes) later.
    assert run.requested["spot"].tolist() == [2, 2, 4, 4, 4, 4, 0, 0]
    assert run.usable["spot"].tolist() == [2, 2, 2, 2, 4, 4, 0, 0]
    assert run.requested["on-demand"].tolist() == [0, 0, 3, 3, 3, 3, 0, 0]
    assert run.usable["on-demand"].tolist() == [0, 0, 0, 0, 3, 3, 0, 0]
    node_h = 8 * STEP_H
    assert run.cost() == pytest.approx(node_h * (16 * 2.40 + 20 * 1.40 + 12 * 4.0))


def test_reclaimed_spot_loses_its_gpus_and_the_spare_covers_them() -> None:
    setup = replace(SETUP, spot_interruption_rate_per_hour=0.2)
    run = tiered_reactive_run(np.full(288, 6), 0, 10, setup)
    assert run.reclaimed > 0
    # 6 nodes counted + the spare (the binomial's 90% quantile of a full market's reclaims
    # over a replacement window, at least one): a reclaim at a time leaves 6 serving.
    assert _spot_spare(10, setup) == 1
    assert run.requested["spot"].tolist() == [7] * 288
    assert (run.usable["spot"] >= 6).mean() > 0.9 and (run.usable["spot"] < 7).any()


def test_the_commitment_is_tiercast_s_rule_or_the_cheapest_at_hindsight() -> None:
    trace = _trace(_wavy())
    rule = tiered_reactive_frontier(trace, SETUP, "rule", FEW)
    hindsight = tiered_reactive_frontier(trace, SETUP, "hindsight", FEW)
    committed, spot_max = tier_sizes(trace, SETUP)
    assert committed > 0 and spot_max > 0
    for (h, hold, r), (h2, hold2, s) in zip(rule.points(), hindsight.points(), strict=True):
        assert (h, hold) == (h2, hold2)
        # The same requests, each split its cheapest for the test period: never dearer.
        assert s.cost <= r.cost + 1e-6
    with pytest.raises(ValueError, match="reserved"):
        tiered_reactive_frontier(trace, SETUP, "guess", FEW)


def test_the_floor_is_no_dearer_than_either_commitment_at_any_service() -> None:
    trace = _trace(_wavy(1))
    rule = tiered_reactive_frontier(trace, SETUP, "rule", FEW)
    hindsight = tiered_reactive_frontier(trace, SETUP, "hindsight", FEW)
    floor = tiered_reactive_frontier(trace, SETUP, "floor", FEW)
    committed, _ = tier_sizes(trace, SETUP)
    # Every commitment from none to the largest request, each at every headroom and hold,
    # and the rule's and hindsight's frontiers beside them.
    holds = sorted(set(floor.holds))
    assert len(floor.points()) % (len(FEW) * len(holds)) == 0
    frontiers = len(floor.points()) // (len(FEW) * len(holds))
    assert frontiers - 2 > committed + 1
    # The rule's own points are among the floor's (the same commitment, the same runs).
    floor_scores = {(h, hold, s.cost, s.unserved_share) for h, hold, s in floor.points()}
    for h, hold, s in rule.points():
        assert (h, hold, s.cost, s.unserved_share) in floor_scores
    # At each service the rule's and hindsight's points reach, and between them (where the
    # match interpolates), the floor costs no more than either.
    points = rule.points() + hindsight.points()
    shares = sorted({s.unserved_share for _, _, s in points})
    between = [(a + b) / 2 for a, b in pairwise(shares)]
    for share in [*shares, *between]:
        probe = replace(points[0][2], policy="probe", unserved_share=share)
        best = min(rule.match(probe).frontier_cost, hindsight.match(probe).frontier_cost)
        assert floor.match(probe).frontier_cost <= best + 1e-6


def test_cheapest_of_matches_each_frontier_apart_not_their_pooled_points() -> None:
    # A: 1.0 unserved at $10, none at $20 (at 0.5: $15 on its chord). B: 0.4 at $17, which
    # pooled with A's points would lift the chord at 0.5 to $15.83.
    def point(share: float, cost: float) -> Score:
        return Score("reactive", cost, 1.0, 1.0, 0.0, share, 0.0)

    a = Frontier((0.0, 0.5), (point(1.0, 10.0), point(0.0, 20.0)))
    b = Frontier((0.2,), (point(0.4, 17.0),))
    pooled = Frontier(a.headrooms + b.headrooms, a.scores + b.scores)
    probe = point(0.5, 14.0)
    assert pooled.match(probe).frontier_cost == pytest.approx(10 + 7 * 0.5 / 0.6)
    both = CheapestOf.of([a, b])
    assert both.match(probe).frontier_cost == pytest.approx(15.0)
    assert len(both.points()) == 3
    with pytest.raises(ValueError, match="at least one"):
        CheapestOf.of([])


def test_hindsight_is_the_cheapest_exact_split_of_the_requests() -> None:
    need = np.array([2.0, 2, 2, 6, 6, 2])
    n, cost = _cheapest_tiers(need, 4, NO_RECLAIMS)
    split = tier_split(need.astype(int), n, 4, NO_RECLAIMS)
    node_h = 8 * STEP_H
    assert cost == pytest.approx(
        node_h
        * (
            split["reserved"].sum() * 2.40
            + split["spot"].sum() * 1.40
            + split["on-demand"].sum() * 4.0
        )
    )


def _result(group: str, lead: int, rule: float, hindsight: float) -> SuiteResult:
    score = Score("predictive", 100.0, 1.0, 1.1, 0.0, 0.001, 0.0)
    m = Matched(120.0, 0.1, 0.2, 1, False, 3600)
    return SuiteResult(
        SuiteSeries(f"{group}.csv", 1, group),
        group,
        {"reactive": score, "predictive": score, "predictive-tiers": score},
        matched={"predictive": m},
        lead_time_s=lead,
        tier_matched={
            "rule": Matched(1, rule, 0.1, 0, False, 1800),
            "hindsight": Matched(1, hindsight, 0.1, 0, False, 3600),
        },
    )


def test_the_summaries_print_the_tier_saving_and_the_frontier_hold() -> None:
    suite = Suite("t", (), ("a",))
    results = [_result("a", 1200, 0.10, 0.04), _result("b", 1200, -0.02, -0.06)]
    text = format_summary(results, suite)
    row = next(line for line in text.splitlines() if line.startswith("a "))
    assert "10.0/4.0" in row and " 60 " in row  # the frontier point's hold, 60 minutes
    assert "predictive-tiers saving against tiered reactive (rule) 4.00%" in text
    assert "predictive-tiers saving against tiered reactive (hindsight) -1.00%" in text
    leads = format_leads([*results, _result("a", 2400, 0.2, 0.1)], suite)
    assert "tiers against the tiered reactive baseline" in leads
    assert "20 min: tiers >= tiered reactive (rule) on 1 of 2 groups" in leads


@pytest.mark.slow
def test_the_tier_replay_prints_the_tiered_plan_against_the_tiered_reactive_baseline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import scaler.replay.simulating as simulating
    from scaler.replay.baselines import reactive_requests
    from scaler.replay.tables import format_table, format_tiers

    setup = replace(SETUP, lead_time_s=1200)
    trace = _trace(_wavy(1), setup)

    def plan(trace, setup, config, policy, **_):  # type: ignore[no-untyped-def]
        # The planner's walk stands aside: a tiered run of the reactive rule at 10% stands in
        # for the tiered plan, so only the baseline and its wiring are under test here.
        committed, spot_max = tier_sizes(trace, setup)
        at = replace(setup, reactive_headroom=0.1)
        run = tiered_reactive_run(reactive_requests(trace, at), committed, spot_max, at)
        return replace(run, policy=policy)

    monkeypatch.setattr(simulating, "tiercast_run", plan)
    replay = simulating.run_replay(trace, setup, ("reactive", "predictive"), tiers=True)
    assert set(replay.tier_matched) == {"rule", "hindsight", "floor"}
    tiered = replay.scores["predictive-tiers"]
    for m in replay.tier_matched.values():
        assert m.saving == pytest.approx(1 - tiered.cost / m.frontier_cost)
        assert m.hold_s in (1800, 2400)
    # The stand-in is a point of the rule-sized baseline's frontier: no saving against it.
    assert replay.tier_matched["rule"].saving <= 1e-9
    # The floor is no dearer than the rule at the plan's service.
    assert replay.tier_matched["floor"].saving <= replay.tier_matched["rule"].saving + 1e-9
    text = format_tiers(replay)
    assert "tiers vs tiered reactive (commitment by tiercast's rule" in text
    assert "tiers vs tiered reactive (commitment chosen at hindsight" in text
    assert "tiers vs tiered reactive (the cheapest of every commitment" in text
    assert "frontier hold min" in format_table(replay)
