"""``tiercast lab tier-gap`` (scaler.replay.tier_gap): the tiered plan against the tiered
reactive rule at the plan's own margin and hold, and each against the rule's frontier."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scaler.cli import main
from scaler.planning.margins import Margin
from scaler.replay.baselines import reactive_requests
from scaler.replay.protocol import ReplaySetup, planner_hold_s, prepare_trace
from scaler.replay.tier_gap import gap_row, tier_gap
from scaler.replay.tiers import tier_sizes, tiered_reactive_run

SETUP = replace(ReplaySetup(short_test_days=1), lead_time_s=1200)


def _trace():
    rng = np.random.default_rng(1)
    t = np.arange(576)
    values = np.maximum(1, 50 + 35 * np.sin(2 * np.pi * t / 288) + rng.normal(0, 4, 576))
    idx = pd.date_range("2026-01-01", periods=len(values), freq="5min", name="timestamp")
    return prepare_trace(pd.Series(values, index=idx, name="d"), 1, SETUP)


def _margin(m: float) -> Margin:
    return Margin("d", m, 0.001, None, 0.005, 1.0, True, forecast_shape=False)


def _replay(monkeypatch: pytest.MonkeyPatch, extra_on_demand: int = 0):  # type: ignore[no-untyped-def]
    import scaler.replay.simulating as simulating

    def plan(trace, setup, config, policy, **_):  # type: ignore[no-untyped-def]
        # A stand-in for the planner's walk: the tiered reactive rule at 10% held as the
        # planner holds, plus ``extra_on_demand`` nodes on-demand at every step.
        committed, spot_max = tier_sizes(trace, setup)
        at = replace(setup, reactive_headroom=0.1, reactive_hold_s=planner_hold_s(setup))
        run = tiered_reactive_run(reactive_requests(trace, at), committed, spot_max, setup)
        requested = dict(run.requested)
        requested["on-demand"] = requested["on-demand"] + extra_on_demand
        usable = dict(run.usable)
        usable["on-demand"] = usable["on-demand"] + extra_on_demand
        return replace(run, policy=policy, requested=requested, usable=usable, margin=_margin(0.1))

    monkeypatch.setattr(simulating, "tiercast_run", plan)
    return simulating.run_replay(_trace(), SETUP, ("predictive",), tiers=True)


@pytest.mark.slow
def test_a_plan_that_is_its_margin_s_rule_differs_from_it_by_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gap = tier_gap(_replay(monkeypatch))
    assert gap is not None
    assert gap.margin == 0.1 and gap.hold_s == 2400
    assert gap.plan == gap.rule and gap.plan_vs_rule == 0.0
    # The whole of the saving against the frontier is the margin against hindsight's point.
    assert gap.plan_matched.saving == pytest.approx(gap.rule_matched.saving)
    assert gap.plan_matched.saving <= 1e-9
    row = gap_row("d", SETUP.lead_time_s, gap)
    assert row[1:4] == ["20", "10.0", "40"] and row[8] == "0.00"


@pytest.mark.slow
def test_what_the_plan_adds_beyond_its_rule_is_counted_as_the_plan_s_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gap = tier_gap(_replay(monkeypatch, extra_on_demand=1))
    assert gap is not None
    steps = len(_trace().test_index)
    assert gap.plan.node_steps["on-demand"] == gap.rule.node_steps["on-demand"] + steps
    node_step = SETUP.gpus_per_node * SETUP.price_per_gpu_hour / 12
    assert gap.plan.cost == pytest.approx(gap.rule.cost + steps * node_step)
    assert gap.plan_vs_rule < 0
    assert gap.plan.unserved_gpu_h <= gap.rule.unserved_gpu_h


def test_tier_gap_skips_without_the_traces_and_refuses_a_bad_lead(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nseries:\n  - {path: a/b.csv, units_per_gpu: 1, group: g}\n")
    args = ["lab", "tier-gap", "--suite-file", str(suite)]
    assert main([*args, "--traces", str(tmp_path / "absent")]) == 0
    assert "skipped" in capsys.readouterr().err
    assert main([*args, "--lead-time", "7m"]) == 2
    assert "--lead-time: '7m' must be a multiple of 5 minutes" in capsys.readouterr().err
