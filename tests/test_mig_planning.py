"""MIG layout planning: slice demand, the exact and heuristic solvers, timing, outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from forecaster.forecasting import SeriesForecast
from scaler.actuation.protocol import RecordingProvider
from scaler.catalog.mig import Layout
from scaler.cli.lab.mig import random_instances
from scaler.config import ConfigError, parse_config
from scaler.inputs.demo import demo_inputs
from scaler.planning.demand import gpus_for, planning_grid
from scaler.planning.mig.demand import slice_demand
from scaler.planning.mig.layouts import Costs, GpuState, solve_exact, solve_heuristic
from scaler.planning.mig.plan import MigPlan, plan_mig
from scaler.planning.mig.timing import quiet_window
from scaler.service.cycle import run_cycle
from tests.conftest import REPO
from tests.planning_inputs import plan_for

NOW = pd.Timestamp("2026-11-02T00:00:00")
SEVEN_1G = Layout.of({"1g.10gb": 7})
WHOLE = Layout(whole=True)


def config(layouts: list[str], more: tuple[dict[str, Any], ...] = (), **pool: Any) -> Any:
    """One pool ``mig`` of A100s; an embedding workload on signal ``rps`` at 1g.10gb, and
    ``more`` workloads, each on a signal of its own name."""
    return parse_config(
        {
            "signals": [{"name": "rps"}, *({"name": wl["signal"]} for wl in more)],
            "workloads": [
                {
                    "name": "embed",
                    "signal": "rps",
                    "gpu_model": "A100-80GB",
                    "units_per_replica": 10.0,
                    "mig_profile": "1g.10gb",
                },
                *more,
            ],
            "pools": [
                {
                    "name": "mig",
                    "tier": "reserved",
                    "gpu_model": "A100-80GB",
                    "gpus_per_node": 2,
                    "price_per_gpu_hour": 2.0,
                    "current_nodes": 2,
                    "min_nodes": 2,
                    "max_nodes": 2,
                    "mig_layouts": layouts,
                    **pool,
                }
            ],
            "policy": {"horizon_s": 6 * 3600, "cycle_s": 300},
        }
    )


def forecast(values: np.ndarray, name: str = "rps") -> SeriesForecast:
    idx = pd.date_range(NOW, periods=len(values), freq="5min", name="timestamp")
    frame = pd.DataFrame({"q0.1": values * 0.8, "q0.5": values, "q0.9": values * 1.0}, index=idx)
    return SeriesForecast(
        name,
        frame,
        "fake",
        "test",
        pd.Timedelta("5min"),
        NOW - pd.Timedelta("5min"),
        float(values[0]),
        float(values[0]),
        100,
    )


def test_slice_demand_counts_instances_per_profile() -> None:
    cfg = config(["whole", "whole"])
    grid = planning_grid(NOW, 3600, 300)
    d = slice_demand(cfg.fleet, {"rps": forecast(np.full(100, 95.0))}, grid, 0.9)
    assert set(d) == {"A100-80GB"}
    assert d["A100-80GB"]["1g.10gb"].max() == 10  # ceil(95 / 10) instances


def test_mig_workloads_count_as_gpu_shares_for_the_tier_planner() -> None:
    w = config(["whole"]).workloads[0]
    # 14 replicas on 1g.10gb (1/7 of a GPU each) are 2 GPUs, not 14.
    assert gpus_for(w, np.array([140.0]))[0] == pytest.approx(2.0)


def test_current_layout_already_fits_so_nothing_changes() -> None:
    cfg = config(["1g.10gb:7", "whole"])
    plan = plan_mig(cfg.fleet, cfg.policy, {"rps": forecast(np.full(100, 120.0))}, {"mig": 2}, NOW)
    assert [a.decision for a in plan.actions] == ["no-op"]
    assert "keep their MIG layouts" in plan.actions[0].reason.text()
    section = plan.section["models"]["A100-80GB"]
    assert section["decision"] == "fits" and section["gpus_changed"] == 0
    assert plan.section["node_labels"] == {
        "mig-0": "tiercast-all-7x1g.10gb",
        "mig-1": "all-disabled",
    }


def test_demand_beyond_the_current_layout_relayouts_now() -> None:
    cfg = config(["1g.10gb:7", "whole"])
    plan = plan_mig(cfg.fleet, cfg.policy, {"rps": forecast(np.full(100, 250.0))}, {"mig": 2}, NOW)
    relayouts = [a for a in plan.actions if a.decision == "relayout"]
    assert len(relayouts) == 1 and relayouts[0].kind == "mig-layout"
    assert relayouts[0].details["node"] == "mig-1"
    assert relayouts[0].reason.params["quantile"] == "q0.9"
    assert relayouts[0].reason.params["lead_min"] > 0
    cap = plan.section["models"]["A100-80GB"]["capacity_instances"]
    assert cap["1g.10gb"] >= 25
    mig_parted = plan.section["mig_parted_config"]
    assert mig_parted["version"] == "v1"
    assert plan.section["node_labels"]["mig-1"] in mig_parted["mig-configs"]


def test_whole_gpus_are_kept_for_training() -> None:
    cfg = config(["whole", "whole"], mig_whole_gpus=3)
    plan = plan_mig(cfg.fleet, cfg.policy, {"rps": forecast(np.full(100, 60.0))}, {"mig": 2}, NOW)
    layouts = [n["layouts"] for n in plan.section["models"]["A100-80GB"]["nodes"]]
    assert sum(lay == "whole" for node in layouts for lay in node) == 3


def test_a_change_is_timed_in_the_quietest_window_before_it_is_needed() -> None:
    # Demand rises above the current 14 slices at step 40, with a trough at steps 10-20.
    values = np.full(72, 60.0)
    values[10:20] = 5.0
    values[40:] = 200.0
    cfg = config(["1g.10gb:7", "1g.10gb:7"])
    cfg = cfg.model_copy(
        update={
            "pools": (cfg.pools[0].model_copy(update={"mig_layouts": ("1g.10gb:7", "3g.40gb:2")}),)
        }
    )
    plan = plan_mig(cfg.fleet, cfg.policy, {"rps": forecast(values)}, {"mig": 2}, NOW)
    section = plan.section["models"]["A100-80GB"]
    assert section["decision"] == "cover"
    start = pd.Timestamp(section["window"]["start"].rstrip("Z"))
    assert NOW + pd.Timedelta("50min") <= start <= NOW + pd.Timedelta("85min")
    assert all(a.decision == "no-op" for a in plan.actions)  # scheduled, not now
    assert any(a.reason.code == "mig.relayout-scheduled" for a in plan.actions)


def test_a_change_that_does_not_pay_for_itself_is_not_made() -> None:
    gpus = [GpuState(SEVEN_1G), GpuState(SEVEN_1G)]
    cheap = solve_exact("A100-80GB", gpus, {"1g.10gb": 4}, Costs(used_gpu_h=24, change_gpu_h=0.25))
    assert cheap is not None and (cheap.used, cheap.changed) == (1, 0)
    # Two 3g GPUs could merge onto one, but the drain costs more than the horizon saves.
    gpus = [GpuState(Layout.of({"3g.40gb": 1})), GpuState(Layout.of({"3g.40gb": 1}))]
    dear = solve_exact("A100-80GB", gpus, {"3g.40gb": 2}, Costs(used_gpu_h=0.1, change_gpu_h=1.0))
    assert dear is not None and (dear.used, dear.changed) == (2, 0)
    worth = solve_exact("A100-80GB", gpus, {"3g.40gb": 2}, Costs(used_gpu_h=24, change_gpu_h=0.25))
    assert worth is not None and (worth.used, worth.changed) == (1, 1)


def test_exact_and_heuristic_report_shortfall_when_the_fleet_is_too_small() -> None:
    gpus = [GpuState(WHOLE)]
    for sol in (
        solve_exact("A100-80GB", gpus, {"3g.40gb": 3}),
        solve_heuristic("A100-80GB", gpus, {"3g.40gb": 3}),
    ):
        assert sol is not None and sol.shortfall == {"3g.40gb": 1}


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.slow
def test_heuristic_within_five_percent_of_exact_on_64_gpus(seed: int) -> None:
    for inst in random_instances(64, seed):
        exact = solve_exact(inst.model, inst.gpus, inst.demand, time_limit_s=20)
        heur = solve_heuristic(inst.model, inst.gpus, inst.demand)
        assert exact is not None and not exact.shortfall and not heur.shortfall
        assert heur.used <= exact.used * 1.05
        assert exact.cost <= heur.cost + 1e-6


def test_quiet_window() -> None:
    load = np.array([5, 4, 1, 1, 3, 0, 9], dtype=float)
    assert quiet_window(load, 2, 5) == 2
    assert quiet_window(load, 1, 6) == 5
    assert quiet_window(load, 3, 0) == 0


def test_stale_signal_holds_the_layouts() -> None:
    cfg = config(["1g.10gb:7", "whole"])
    plan = plan_mig(
        cfg.fleet,
        cfg.policy,
        {"rps": forecast(np.full(100, 250.0))},
        {"mig": 2},
        NOW,
        stale={"rps"},
    )
    assert all(a.decision == "no-op" for a in plan.actions)
    assert "stale" in plan.actions[0].reason.text()


def test_config_rejects_bad_mig_fields_in_one_line() -> None:
    base = json.loads(json.dumps(config(["whole"]).model_dump(mode="json")))
    base["workloads"][0]["mig_profile"] = "1g.5gb"
    with pytest.raises(ConfigError, match=r"workloads\[0\]\.mig_profile: MIG profile '1g.5gb'"):
        parse_config(base)
    base["workloads"][0]["mig_profile"] = "1g.10gb"
    base["pools"][0]["mig_layouts"] = ["4g.40gb:2"]
    with pytest.raises(ConfigError, match=r"mig_layouts\[0\]: '4g.40gb:2' is not a valid"):
        parse_config(base)


@pytest.mark.slow
@pytest.mark.usefixtures("warm_demo_models")
def test_demo_cycle_shows_mig_layout_actions(workdir: Path) -> None:
    """(In a temporary folder: the demo config's model store is the relative ``models``.)"""
    import jsonschema

    cfg, history, now = demo_inputs()
    inventory = {p.name: p.current_nodes or p.min_nodes for p in cfg.pools}
    result = run_cycle(cfg, history, RecordingProvider(inventory), now)
    mig_actions = [a for a in result.plan.actions if a.kind == "mig-layout"]
    assert {a.pool for a in mig_actions} == {"a100-mig"}
    assert any(a.decision == "relayout" for a in mig_actions)
    plan = json.loads(result.plan.to_json())
    jsonschema.validate(plan, json.loads((REPO / "scaler" / "plan.schema.json").read_text()))
    assert plan["mig"]["mig_parted_config"]["version"] == "v1"
    assert set(plan["mig"]["node_labels"]) == {"a100-mig-0", "a100-mig-1"}
    assert any(
        c["action"].kind == "mig-layout" for c in [{"action": r.action} for r in result.results]
    )
    # Same inputs, same plan: the MIG section is deterministic too.
    again = plan_for(cfg, result.forecasts, inventory, now)
    mig = plan_mig(
        cfg.fleet,
        cfg.policy,
        result.forecasts,
        inventory,
        now,
        {p.pool: p.target_nodes[0] for p in again.pools},
    )
    assert mig.section == plan["mig"]


# ---- real nodes, the operator's config, strategy, and the tier plan ------------------------


def _states(strategy: str | None = "mixed", held: str | None = None) -> dict[str, Any]:
    from scaler.planning.mig.state import MigNodeState

    return {
        "mig": [
            MigNodeState("gpu-node-a7", (SEVEN_1G, SEVEN_1G), "all-1g.10gb", strategy),
            MigNodeState("gpu-node-b2", (WHOLE, WHOLE), "all-disabled", strategy, held),
        ]
    }


def _known() -> dict[str, Any]:
    from tests.gpu_operator import default_mig_parted_config

    return default_mig_parted_config()["mig-configs"]


def test_real_nodes_and_the_operators_names_are_used() -> None:
    cfg = config(["whole", "whole"])
    plan = plan_mig(
        cfg.fleet,
        cfg.policy,
        {"rps": forecast(np.full(100, 250.0))},
        {"mig": 2},
        NOW,
        node_states=_states(),
        known_configs=_known(),
    )
    (act,) = [a for a in plan.actions if a.decision == "relayout"]
    # The config's mig_layouts say both nodes are whole; the cluster says otherwise.
    assert act.details["node"] == "gpu-node-b2" and act.details["from"] == "all-disabled"
    # 7 x 1g.10gb on both GPUs is the operator's own all-1g.10gb (device-filter read for
    # the A100-80GB): reused by name, nothing to add to the ConfigMap.
    assert act.details["layout"] == "all-1g.10gb" and act.details["in_mig_parted_config"]
    assert plan.section["node_labels"] == {
        "gpu-node-a7": "all-1g.10gb",
        "gpu-node-b2": "all-1g.10gb",
    }


def test_a_layout_the_operator_lacks_gets_a_tiercast_name_and_its_entry() -> None:
    cfg = config(["whole", "whole"], gpus_per_node=2)

    def plan_at(level: float) -> MigPlan:
        return plan_mig(
            cfg.fleet,
            cfg.policy,
            {"rps": forecast(np.full(100, level))},
            {"mig": 2},
            NOW,
            node_states=_states(),
            known_configs={"all-disabled": _known()["all-disabled"]},
        )

    # 3 x 2g.20gb instances wanted beside the 14 1g.10gb of gpu-node-a7.
    plan = plan_at(140.0)
    assert all(a.decision != "relayout" for a in plan.actions)  # 14 slices already fit
    plan = plan_at(250.0)
    (act,) = [a for a in plan.actions if a.decision == "relayout"]
    assert act.details["layout"].startswith("tiercast-")
    assert not act.details["in_mig_parted_config"]
    assert act.details["mig_parted_entry"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}
    ]
    assert act.details["layout"] in plan.section["mig_parted_config"]["mig-configs"]


def test_a_node_with_a_change_in_progress_is_held() -> None:
    cfg = config(["whole", "whole"])
    states = _states(held="nvidia.com/mig.config.state=pending")
    plan = plan_mig(
        cfg.fleet,
        cfg.policy,
        {"rps": forecast(np.full(100, 250.0))},
        {"mig": 2},
        NOW,
        node_states=states,
    )
    assert not [a for a in plan.actions if a.decision == "relayout"]
    (noop,) = plan.actions
    assert "gpu-node-b2: nvidia.com/mig.config.state=pending" in noop.reason.text()
    assert plan.section["models"]["A100-80GB"]["shortfall_instances"] == {"1g.10gb": 11}


def test_single_strategy_nodes_never_get_mixed_layouts() -> None:
    cfg = parse_config(
        {
            **json.loads(config(["whole", "whole"]).model_dump_json()),
            "signals": [{"name": "rps"}, {"name": "big"}],
            "workloads": [
                {
                    "name": "small",
                    "signal": "rps",
                    "gpu_model": "A100-80GB",
                    "units_per_replica": 10.0,
                    "mig_profile": "1g.10gb",
                },
                {
                    "name": "big",
                    "signal": "big",
                    "gpu_model": "A100-80GB",
                    "units_per_replica": 10.0,
                    "mig_profile": "3g.40gb",
                },
            ],
        }
    )
    fc = {"rps": forecast(np.full(100, 160.0)), "big": forecast(np.full(100, 10.0), "big")}
    mixed = plan_mig(cfg.fleet, cfg.policy, fc, {"mig": 2}, NOW, node_states=_states("mixed"))
    nodes = mixed.section["models"]["A100-80GB"]["nodes"]
    assert any("," in lay for n in nodes for lay in n["layouts"])  # 1g.10gb:4,3g.40gb:1
    assert mixed.section["models"]["A100-80GB"]["shortfall_instances"] == {}
    single = plan_mig(cfg.fleet, cfg.policy, fc, {"mig": 2}, NOW, node_states=_states("single"))
    section = single.section["models"]["A100-80GB"]
    # Each node gets one layout on every GPU, not a refusal: the whole node b2 takes
    # 2 x 3g.40gb per GPU, the closest cover one profile per node allows.
    layouts = {n["node"]: n["layouts"] for n in section["nodes"]}
    assert layouts == {
        "gpu-node-a7": ["1g.10gb:7", "1g.10gb:7"],
        "gpu-node-b2": ["3g.40gb:2", "3g.40gb:2"],
    }
    (relayout,) = [a for a in single.actions if a.decision == "relayout"]
    assert relayout.details["node"] == "gpu-node-b2"
    assert relayout.details["needs_mixed_strategy"] is False
    assert "(mig.strategy single)" in relayout.reason.text()
    assert not any("would need mig.strategy=mixed" in a.reason.text() for a in single.actions)
    assert section["shortfall_instances"] == {"1g.10gb": 2}


@pytest.mark.slow
def test_single_strategy_uniform_layouts_hold_for_every_solver() -> None:
    """Random fleets on mig.strategy=single: every node ends with one layout on every GPU."""
    from scaler.planning.mig.node_layouts import solve_node_layouts
    from scaler.planning.mig.state import MigNode

    rng = np.random.default_rng(7)
    pool = config(["whole", "whole"]).pools[0]
    profiles = ["1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb"]
    for trial in range(20):
        nodes = [
            MigNode(pool, f"n{i}", [WHOLE] * 4, new=bool(i % 3 == 2), strategy="single")
            for i in range(4)
        ]
        gpus = [GpuState(lay, n.new, single=True) for n in nodes for lay in n.current]
        demand = {p: int(rng.integers(0, 9)) for p in profiles}
        for method in ("exact", "heuristic"):
            sol = solve_node_layouts("A100-80GB", nodes, gpus, demand, Costs(), method)
            for k, n in enumerate(nodes):
                tgt = [a or WHOLE for a in sol.assignment[4 * k : 4 * k + 4]]
                assert len(set(tgt)) == 1, (trial, method, n.name, tgt)
                assert tgt[0].whole or len(tgt[0].counts) == 1
            assert not sol.blocked


def test_a_pool_the_tier_plan_shrinks_is_not_relayouted() -> None:
    cfg = config(["whole", "whole"], min_nodes=0)
    fc = {"rps": forecast(np.full(100, 250.0))}
    grow = plan_mig(cfg.fleet, cfg.policy, fc, {"mig": 2}, NOW, {"mig": 2}, node_states=_states())
    assert [a for a in grow.actions if a.decision == "relayout"]
    shrink = plan_mig(cfg.fleet, cfg.policy, fc, {"mig": 2}, NOW, {"mig": 1}, node_states=_states())
    assert not [a for a in shrink.actions if a.decision == "relayout"]
    assert "scales down 2 -> 1 this cycle" in shrink.actions[0].reason.text()


def test_a_change_pays_for_every_gpu_of_the_node_it_drains() -> None:
    # One node of 8 GPUs at 3 x 1g.10gb each; 6 instances are asked for. Moving them onto
    # one GPU at 7 x 1g.10gb frees a GPU but drains the whole node: 8 GPUs out of service
    # for the change time (15 minutes), not only the one GPU whose layout changes.
    cfg = config(["1g.10gb:3"], gpus_per_node=8, current_nodes=1, min_nodes=1, max_nodes=1)
    sections = {}
    for hours in (1, 6):
        policy = cfg.policy.model_copy(update={"horizon_s": hours * 3600})
        rps = {"rps": forecast(np.full(hours * 12, 60.0))}
        plan = plan_mig(cfg.fleet, policy, rps, {"mig": 1}, NOW)
        sections[hours] = plan.section["models"]["A100-80GB"]
    one_hour, six_hours = sections[1], sections[6]
    assert one_hour["gpus_changed"] == 0 and one_hour["gpus_used_without_changes"] == 2
    # Over an hour the GPU freed saves 0.75 GPU-h, which paid for one GPU's drain (0.25)
    # but not for the node's (8 x 0.25 = 2.0): the layouts are kept.
    assert one_hour["decision"] == "not-worth"
    assert one_hour["drain_gpu_hours"] == pytest.approx(2.0)
    assert one_hour["saved_gpu_hours"] == pytest.approx(0.75)
    # Over six hours it saves 5.75 GPU-h, more than the node's drain: changed.
    assert six_hours["decision"] == "save" and six_hours["gpus_changed"] == 1
    assert six_hours["drain_gpu_hours"] == pytest.approx(2.0)


def test_a_drain_counts_whole_running_nodes_and_no_new_one() -> None:
    from scaler.planning.mig.actions import drain_of
    from scaler.planning.mig.layouts import LayoutSolution
    from scaler.planning.mig.state import MigNode

    pool = config(["whole"]).pools[0]
    three = Layout.of({"1g.10gb": 3})
    nodes = [
        MigNode(pool, "a", [three, three], new=False),
        MigNode(pool, "b", [three, three], new=False),
        MigNode(pool, "c", [WHOLE, WHOLE], new=True),
    ]
    # Node a changes one GPU, b none (one GPU left unused keeps its layout), c is new.
    assignment = [SEVEN_1G, None, three, None, SEVEN_1G, SEVEN_1G]
    chosen = LayoutSolution(assignment, used=4, changed=1, shortfall={}, solver="test", seconds=0)
    drain = drain_of(nodes, chosen)
    # Node a's two GPUs are out of service; node b serves meanwhile in its current layouts.
    assert drain.gpus == 2
    assert drain.serving == {"1g.10gb": 6}


TRAINING = {
    "name": "train",
    "signal": "jobs",
    "gpu_model": "A100-80GB",
    "units_per_replica": 1.0,
    "mig_profile": "3g.40gb",
}
"""A training workload at 3g.40gb, beside the embedding one at 1g.10gb."""


def test_a_coverage_relayout_is_made_only_when_it_covers_more_than_its_drain_takes() -> None:
    # Two nodes of 2 GPUs at 7 x 1g.10gb serve 25 embedding instances; the training
    # workload's 3g.40gb instances fit no current layout.
    cfg = config(["1g.10gb:7", "1g.10gb:7"], more=(TRAINING,))
    sections = {}
    for name, when in (("blip", slice(40, 41)), ("lasting", slice(40, None))):
        jobs = np.zeros(72)
        jobs[when] = 1.0
        fc = {"rps": forecast(np.full(72, 250.0)), "jobs": forecast(jobs, "jobs")}
        plan = plan_mig(cfg.fleet, cfg.policy, fc, {"mig": 2}, NOW)
        sections[name] = (plan.section["models"]["A100-80GB"], plan.actions)
    # One 3g.40gb instance for 5 minutes (half a GPU, 4 of its 8 memory slices: 0.04
    # GPU-h) is not worth draining a node for 15 minutes: of the 25 embedding instances
    # the other node holds 14, so 11 go short (11/7 GPU x 0.25 h = 0.39 GPU-h).
    blip, blip_actions = sections["blip"]
    assert blip["decision"] == "not-worth"
    assert blip["covered_gpu_hours"] == pytest.approx(0.5 / 12, abs=1e-3)
    assert blip["drain_shortfall_gpu_hours"] == pytest.approx(11 / 7 / 4, abs=1e-3)
    assert blip["shortfall_instances"] == {"3g.40gb": 1}
    assert not [a for a in blip_actions if a.kind == "mig-layout" and a.decision == "relayout"]
    assert "would cover 0.04 GPU-h of forecast shortfall and leave 0.39 GPU-h short" in (
        blip_actions[-1].reason.text()
    )
    # Lasting from step 40 to the horizon's end (32 steps), it is: a relayout for coverage.
    lasting, lasting_actions = sections["lasting"]
    assert lasting["decision"] == "cover" and lasting["shortfall_instances"] == {}
    assert lasting["covered_gpu_hours"] == pytest.approx(32 * 0.5 / 12, abs=1e-3)
    assert [a for a in lasting_actions if a.decision == "relayout"]


def test_change_records_on_nodes_read_back_or_are_none() -> None:
    """Relayout and SharingChange share one reader: a round trip gives the record; a missing
    required field, a step not theirs, JSON that is not an object or not JSON give None."""
    from scaler.actuation.kube.device_plugin import SharingChange
    from scaler.actuation.kube.inventory import SHARING_ANNOTATION
    from scaler.planning.mig.state import RELAYOUT_ANNOTATION, Relayout

    relayout = Relayout("draining", "all-1g.10gb", None, "2026-12-06T00:00:00Z", True)
    sharing = SharingChange("relabelled", "mps-4", "none", "mps", 4, "2026-12-06T00:00:00Z", True)
    assert Relayout.from_annotations({RELAYOUT_ANNOTATION: relayout.to_annotation()}) == relayout
    assert SharingChange.from_annotations({SHARING_ANNOTATION: sharing.to_annotation()}) == sharing
    # Written before a field with a default existed: read with the default.
    old = '{"step":"draining","target":"x","since":"t"}'
    assert Relayout.from_annotations({RELAYOUT_ANNOTATION: old}) == Relayout(
        "draining", "x", None, "t"
    )
    for raw in (
        '{"step":"draining","target":"x"}',
        '{"step":"done","target":"x","since":"t"}',
        "[1]",
        "not json",
        "",
    ):
        assert Relayout.from_annotations({RELAYOUT_ANNOTATION: raw}) is None, raw
    bad_replicas = '{"step":"draining","target":"x","mode":"mps","replicas":"a","since":"t"}'
    assert SharingChange.from_annotations({SHARING_ANNOTATION: bad_replicas}) is None
    assert Relayout.from_annotations(None) is None
