"""The MIG replay (``tiercast simulate --mig``): its accounting, its policies' ordering on a
case worked out by hand, and that no decision reads the data it is scored on."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.errors import BadInputError
from scaler.catalog.mig import Layout
from scaler.cli import main
from scaler.replay import mig
from scaler.replay.mig import POLICIES, MigSetup, best_static, run_mig_replay
from scaler.replay.mig_fleet import MigPool, MigTally, account_step
from scaler.replay.mig_frontier import (
    HEADROOMS,
    matched,
    matched_intervals,
    reactive_frontier,
)
from scaler.replay.mig_report import format_mig, pick_policies
from scaler.replay.mig_scenarios import (
    SCENARIOS,
    MigDemand,
    MigScenario,
    MigWorkload,
    load_demand,
)
from scaler.replay.protocol import STEP_H

MODEL = "H100-80GB"
SEVEN_1G = Layout.of({"1g.10gb": 7})
ONE_7G = Layout.of({"7g.80gb": 1})
TRACES = Path(__file__).resolve().parents[2] / "shared" / "data" / "traces"


def _write(folder: Path, name: str, values: np.ndarray, start: str = "2026-11-01") -> str:
    idx = pd.date_range(start, periods=len(values), freq="5min")
    pd.DataFrame({"timestamp": idx.strftime("%Y-%m-%dT%H:%M:%S"), "value": values}).to_csv(
        folder / f"{name}.csv", index=False
    )
    return f"{name}.csv"


def _phases(days: int) -> tuple[np.ndarray, np.ndarray]:
    """Each day, 14 x 1g.10gb from 00:00 to 12:00, then 2 x 7g.80gb until midnight."""
    half = 144
    small = np.tile(np.r_[np.full(half, 14.0), np.zeros(half)], days)
    large = np.tile(np.r_[np.zeros(half), np.full(half, 2.0)], days)
    return small, large


def _demand(tmp_path: Path, small: np.ndarray, large: np.ndarray, setup: MigSetup) -> MigDemand:
    scenario = MigScenario(
        "hand-made",
        "two phases a day",
        (
            MigWorkload("small", _write(tmp_path, "small", small), 1.0, "1g.10gb"),
            MigWorkload("large", _write(tmp_path, "large", large), 1.0, "7g.80gb"),
        ),
        gpus_per_node=1,
    )
    return load_demand(tmp_path, scenario, setup.replay_setup())


HOURLY = MigSetup(cycle_s=3600, test_days=1, method="last_value", spare_fraction=1.0)
"""Decisions on the hour over a one-day test, so that every figure is countable by hand; the
changing policies' pool is twice the static one (no relayout is forced by its size)."""


# --------------------------------------------------------------------------- accounting


def test_unserved_slice_hours_weigh_each_missing_instance_by_its_compute_slices() -> None:
    pool = MigPool.of(MODEL, 1, [SEVEN_1G], 900)
    tally = MigTally.empty("p", 2)
    # 9 x 1g asked of 7: 2 slices short; a 3g.40gb instance with none: 3 slices short.
    account_step(pool, {"1g.10gb": 9, "3g.40gb": 1}, tally, 0)
    account_step(pool, {"1g.10gb": 7}, tally, 1)
    assert list(tally.unserved_slices) == [5.0, 0.0]
    assert tally.unserved_slice_hours == pytest.approx(5 * STEP_H)
    assert tally.gpu_hours == pytest.approx(2 * STEP_H)


def test_a_drain_takes_the_whole_node_out_of_service_and_is_counted_as_lost_gpu_hours() -> None:
    # Two 2-GPU nodes; node 0 re-partitions one GPU: both its GPUs are out for 15 minutes.
    pool = MigPool.of(MODEL, 2, [SEVEN_1G] * 4, 900)
    pool.relayout(0, [SEVEN_1G, ONE_7G])
    # 3 GPUs' worth: node 1's 2 GPUs in service, and node 0's 7 x 1g GPU once drained.
    pool.hold_for({"1g.10gb": 21})
    assert pool.relayouts == 1
    tally = MigTally.empty("p", 4)
    for i in range(4):
        account_step(pool, {"1g.10gb": 14}, tally, i)
    assert list(tally.drain_gpus) == [2, 2, 2, 0]
    assert tally.drain_gpu_hours == pytest.approx(2 * 0.25)
    # Paid while draining: node 1's 2 GPUs and the draining node's 2; then the 3 held.
    assert list(tally.gpus) == [4, 4, 4, 3]
    # 7 x 1g short while node 0 drains (14 of 21 demanded), none after.
    tally = MigTally.empty("p", 1)
    pool.relayout(0, [SEVEN_1G, SEVEN_1G])
    pool.hold_for({"1g.10gb": 21})
    account_step(pool, {"1g.10gb": 21}, tally, 0)
    assert tally.unserved_slice_hours == pytest.approx(7 * STEP_H)
    # All of it while the node drained; a step short with no drain counts apart.
    assert tally.unserved_during_drains == pytest.approx(7 * STEP_H)
    calm = MigTally.empty("p", 1)
    account_step(MigPool.of(MODEL, 1, [SEVEN_1G], 900), {"1g.10gb": 9}, calm, 0)
    assert calm.unserved_slice_hours == pytest.approx(2 * STEP_H)
    assert calm.unserved_during_drains == 0


def test_relayout_to_the_same_layouts_is_no_relayout() -> None:
    pool = MigPool.of(MODEL, 1, [SEVEN_1G], 900)
    pool.relayout(0, [SEVEN_1G])
    assert pool.relayouts == 0 and pool.draining == [0]


def test_best_static_layout_covers_each_profiles_peak_with_fewest_gpus() -> None:
    lays = best_static(MODEL, {"1g.10gb": 14, "7g.80gb": 2})
    assert sorted(lay.name for lay in lays) == ["7g.80gb", "7g.80gb", "7x1g.10gb", "7x1g.10gb"]


# --------------------------------------------------------------------------- the policies


@pytest.mark.slow
def test_static_reactive_clairvoyant_match_the_figures_worked_out_by_hand(tmp_path: Path) -> None:
    # Two training days and a one-day test of the same two phases; units 1 per replica.
    demand = _demand(tmp_path, *_phases(3), HOURLY)
    result = run_mig_replay(demand, HOURLY, ("static", "reactive", "clairvoyant"))
    static, reactive, clair = (result.tallies[p] for p in ("static", "reactive", "clairvoyant"))
    # Static: 2 GPUs of 7 x 1g and 2 of 7g, all day: 4 x 24.
    assert static.gpu_hours == pytest.approx(96.0)
    assert static.unserved_slice_hours == 0.0
    # Reactive holds 3 GPUs every hour (14 x 1.2 -> 17 instances; 2 x 1.2 -> 3 x 7g) and
    # sees each switch an hour late: 14 x 1g (1 slice) at 00:00 and 2 x 7g (7 slices) at
    # 12:00, an hour each.
    assert reactive.gpu_hours == pytest.approx(72.0)
    assert reactive.unserved_slice_hours == pytest.approx(14.0 + 14.0)
    assert reactive.relayouts == 0
    # Clairvoyant covers its 6-hour horizon: both phases (4 GPUs) from 07:00 to 12:00,
    # 2 GPUs the other 19 hours; the pool already has both layouts, so no relayout.
    assert clair.gpu_hours == pytest.approx(4 * 5 + 2 * 19)
    assert clair.unserved_slice_hours == 0.0
    assert clair.relayouts == 0 and clair.drain_gpu_hours == 0.0
    assert clair.gpu_hours < reactive.gpu_hours < static.gpu_hours


def _ramp(tmp_path: Path, *policies: str) -> list[MigTally]:
    """``policies`` replayed where the large model is absent from training and arrives at
    12:00 of the test day."""
    small, large = _phases(3)
    large[: 2 * 288] = 0.0
    result = run_mig_replay(_demand(tmp_path, small, large, HOURLY), HOURLY, policies)
    return [result.tallies[p] for p in policies]


@pytest.mark.slow
def test_a_relayout_is_made_before_the_ramp_and_its_drain_is_counted(tmp_path: Path) -> None:
    # The static layout (all 1g) cannot serve the large model; the clairvoyant planner
    # re-partitions ahead of the ramp.
    static, reactive, clair = _ramp(tmp_path, "static", "reactive", "clairvoyant")
    # Static: 2 x 7g (7 slices) unserved for 12 hours.
    assert static.unserved_slice_hours == pytest.approx(2 * 7 * 12)
    assert clair.relayouts >= 1
    assert clair.drain_gpu_hours == pytest.approx(clair.relayouts * 0.25)
    assert clair.unserved_slice_hours == 0.0
    # Reactive re-partitions only once the 7g demand is seen: an hour unserved, then the drain.
    assert reactive.relayouts >= 1
    assert reactive.unserved_slice_hours >= 2 * 7 * 1
    assert clair.unserved_slice_hours < reactive.unserved_slice_hours < static.unserved_slice_hours


@pytest.mark.slow
def test_planner_cover_relayouts_for_coverage_as_the_planner_does(tmp_path: Path) -> None:
    # The ramp of the test above: every relayout there is for coverage (the layouts cannot
    # serve the large model), so planner-cover makes the planner's; planner-keep none.
    plan, keep, cover = _ramp(tmp_path, "planner", "planner-keep", "planner-cover")
    assert plan.relayouts >= 1 and keep.relayouts == 0
    assert cover.relayouts == plan.relayouts
    assert np.array_equal(cover.gpus, plan.gpus)
    assert cover.unserved_slice_hours == plan.unserved_slice_hours < keep.unserved_slice_hours


@pytest.mark.parametrize(("decision", "acts"), [("save", False), ("cover", True), ("fits", False)])
def test_planner_cover_starts_no_relayout_that_only_saves(
    monkeypatch: pytest.MonkeyPatch, decision: str, acts: bool
) -> None:
    from types import SimpleNamespace

    action = SimpleNamespace(kind="mig-layout", decision="relayout", details={"node": "mig-0"})
    section = {"decision": decision, "nodes": [{"node": "mig-0", "layouts": ["7g.80gb"]}]}
    plan = SimpleNamespace(
        actions=[action],
        section={"models": {"A100-80GB": {**section, "demand_peak_instances": {}}}},
    )
    monkeypatch.setattr(mig, "plan_mig", lambda *a, **k: plan)
    monkeypatch.setattr(mig, "node_states", lambda pool: [])
    started: list[int] = []
    pool = SimpleNamespace(
        model="A100-80GB",
        nodes=1,
        relayout=lambda node, layouts: started.append(node),
        hold_for=lambda need: None,
    )
    config = SimpleNamespace(fleet=None, policy=None)
    planner = mig._Planner(config, {}, None, None, acts_on=("cover",))  # type: ignore[arg-type]
    monkeypatch.setattr(planner, "_forecasts", lambda t, now: {})
    planner.decide(pool, 0, pd.Timestamp("2026-12-06"))  # type: ignore[arg-type]
    assert started == ([0] if acts else [])


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["reactive", "planner"])
def test_no_decision_reads_the_step_it_decides_for_or_later(tmp_path: Path, policy: str) -> None:
    small, large = _phases(3)
    cut = 2 * 288 + 144  # 12:00 of the test day, a decision time
    other_small, other_large = small.copy(), large.copy()
    other_small[cut:] = 50.0
    other_large[cut:] = 6.0
    runs = []
    for k, (a, b) in enumerate(((small, large), (other_small, other_large))):
        folder = tmp_path / str(k)
        folder.mkdir()
        demand = _demand(folder, a, b, HOURLY)
        runs.append(run_mig_replay(demand, HOURLY, (policy,)).tallies[policy])
    steps = cut - 2 * 288
    # Identical up to the decision after the cut: the one at the cut sees only what came
    # before it, so it holds the same GPUs for its hour.
    assert np.array_equal(runs[0].gpus[: steps + 12], runs[1].gpus[: steps + 12])
    # ... and the changed future does change later decisions (the test can fail).
    assert not np.array_equal(runs[0].gpus, runs[1].gpus)


# --------------------------------------------------------------------------- the command


def test_mig_list_names_every_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--mig", "list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in SCENARIOS)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--mig", "nope", "--traces", "."], "unknown scenario nope"),
        (["--mig", "llm-api"], "give --traces DIR"),
    ],
)
def test_mig_bad_input_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", *argv]) == 2
    assert message in capsys.readouterr().err


def test_mig_completion_offers_the_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    assert "'simulate --mig') opts='list all llm-api helios-small helios-large'" in script


def test_scenarios_load_from_the_public_traces() -> None:
    if not TRACES.is_dir():
        pytest.skip(f"the public traces folder {TRACES} is absent")
    setup = replace(MigSetup(), method="last_value")
    for scenario in SCENARIOS.values():
        demand = load_demand(TRACES, scenario, setup.replay_setup())
        inst = demand.instances()
        assert set(inst) == set(demand.profiles.values())
        assert all(len(v) == len(demand.index) for v in inst.values())
        assert 0 < demand.test_start < len(demand.index)


def test_policies_with_mig_pick_a_subset_and_the_tier_replays_list_means_all() -> None:
    assert pick_policies("clairvoyant,static") == ("static", "clairvoyant")
    assert pick_policies("static,reactive,predictive,clairvoyant,oracle") == POLICIES
    assert pick_policies(None) == POLICIES
    assert pick_policies("planner-cover,planner") == ("planner", "planner-cover")
    with pytest.raises(BadInputError, match=r"--policies: 'planer' is no MIG replay policy"):
        pick_policies("static,planer")


# --------------------------------------------------------------------------- the frontier


def test_the_reactive_frontier_holds_the_recent_peak_and_matches_a_policy(tmp_path: Path) -> None:
    demand = _demand(tmp_path, *_phases(3), HOURLY)
    result = run_mig_replay(demand, HOURLY, ("reactive", "clairvoyant"))
    frontier = reactive_frontier(demand, result)
    points = {(h, hold): s for h, hold, s in frontier.points()}
    assert len(points) == 2 * len(HEADROOMS)
    # The newest observation at +20% is the table's reactive policy, to the slice-hour.
    newest = points[(0.2, 0)]
    assert newest.cost == pytest.approx(result.tallies["reactive"].cost(HOURLY.price_per_gpu_hour))
    assert newest.unserved_gpu_hours == pytest.approx(28.0)
    # Holding the peak of the last 6 hours keeps the phase that just ended: more GPU-hours
    # than the newest observation alone, and no fewer misses at the switches (the phase
    # that starts was last seen 12 hours before, outside the window).
    peak, alone = points[(0.0, HOURLY.horizon_s)], points[(0.0, 0)]
    assert peak.cost > alone.cost
    assert peak.unserved_gpu_hours == pytest.approx(28.0)
    # Every point misses the switches alike, so the cheapest of them is the frontier; the
    # clairvoyant serves everything, better than every point: it is matched against that
    # point, and flagged as beyond it (its saving understated).
    m = matched(demand, result, frontier)["clairvoyant"]
    assert m.beyond and m.frontier_cost == pytest.approx(alone.cost)
    assert m.saving == pytest.approx(1 - 58.0 / 48.0)
    assert "reactive" not in matched(demand, result, frontier)
    result.matched.update(matched(demand, result, frontier))
    # One test day: every bootstrap draw is that day, so the interval is the saving itself.
    lo, hi = matched_intervals(demand, result, frontier, draws=50)["clairvoyant"]
    assert lo == pytest.approx(m.saving) and hi == pytest.approx(m.saving)
    result.intervals.update({"clairvoyant": (lo, hi)})
    row = next(ln for ln in format_mig(result).splitlines() if ln.startswith("clairvoyant"))
    assert row.split()[-4:] == [">=-20.8%", "-20.8%..-20.8%", "+0%", "newest"]


@pytest.mark.slow
def test_the_savings_interval_spans_what_other_weeks_of_the_same_days_give(
    tmp_path: Path,
) -> None:
    setup = replace(HOURLY, test_days=3)
    small, large = _phases(5)
    # The second test day asks 14 more small instances all afternoon: a day unlike the others.
    day = 3 * 288
    small[day + 160 : day + 288] = 14.0
    demand = _demand(tmp_path, small, large, setup)
    result = run_mig_replay(demand, setup, ("reactive", "clairvoyant"))
    frontier = reactive_frontier(demand, result)
    saving = matched(demand, result, frontier)["clairvoyant"]
    lo, hi = matched_intervals(demand, result, frontier, draws=300)["clairvoyant"]
    # Draws with more or fewer copies of the odd day move the saving both ways.
    assert lo < saving.saving < hi
    again = matched_intervals(demand, result, frontier, draws=300)["clairvoyant"]
    assert again == (lo, hi)  # seeded: the same table twice


def test_recent_peak_is_flat_at_the_peak_of_the_visible_window() -> None:
    from scaler.replay.mig import recent_peak

    idx = pd.date_range("2026-11-01", periods=10, freq="5min")
    signal = pd.Series([1.0, 9.0, 2.0, np.nan, 3.0, 4.0, 50.0, 60.0, 70.0, 80.0], index=idx)
    # The 4 observations before step 6 (2, a gap holding 2, 3, 4): the 9 and the later
    # values are out of the window.
    fc = recent_peak(signal, 6, 4, 5)
    assert fc.frame.index[0] == idx[6] and len(fc.frame) == 5
    assert (fc.frame.to_numpy() == 4.0).all()
    assert fc.last_timestamp == idx[5] and fc.last_value == 4.0


def test_peak_source_takes_persistence_only_where_it_predicted_the_peak_better() -> None:
    from scaler.planning.mig.demand import peak_source

    actual = np.array([10.0, 12.0, 10.0, 11.0])
    close, far = np.array([10.0, 12.0, 10.0, 11.0]), np.array([6.0, 6.0, 6.0, 6.0])
    assert peak_source(far, close, actual, 0.9) == "recent-peak"
    assert peak_source(close, far, actual, 0.9) == "forecast"
    # A tie, or nothing to judge by, keeps the forecast.
    assert peak_source(close, close, actual, 0.9) == "forecast"
    assert peak_source(np.array([]), np.array([]), np.array([]), 0.9) == "forecast"
    # Under-prediction weighs 9 times over-prediction at q0.9: 1 short loses to 5 over.
    assert peak_source(actual - 1, actual + 5, actual, 0.9) == "recent-peak"


def test_each_workload_is_planned_on_what_predicted_its_peak_better(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from scaler.replay.mig import choose_sources, recent_peak, true_future

    # "small" has a daily block that the last 6 hours' peak lags by hours, and a perfect
    # forecast; "large" a level one higher each day, and a forecast of none at all.
    days = 10
    hour = np.arange(days * 288) % 288
    daily = np.where((hour >= 96) & (hour < 192), 14.0, 2.0)
    level = 2.0 + np.arange(days * 288) // 288
    demand = _demand(tmp_path, daily, level, HOURLY)
    small, large = demand.traces["small"], demand.traces["large"]
    seen: list[int] = []

    def perfect(t: int, now: pd.Timestamp) -> tuple[None, object]:
        seen.append(t)
        return None, true_future(small.signal, t, 100, 0.9)

    def nothing(t: int, now: pd.Timestamp) -> tuple[None, object]:
        return None, recent_peak(large.signal * 0, large.visible_end(t), 1, 100)

    sources = {"small": SimpleNamespace(at=perfect), "large": SimpleNamespace(at=nothing)}
    got = choose_sources(demand, HOURLY, sources)  # type: ignore[arg-type]
    assert got == {"small": "forecast", "large": "recent-peak"}
    # Judged at the hourly decisions of the training period's last 7 days whose next
    # 6 hours end before the test starts.
    t0 = demand.test_start
    assert seen == list(range(t0 - 7 * 288, t0 - 72 + 1, 12))
