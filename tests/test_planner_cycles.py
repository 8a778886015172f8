"""Planner rules across cycles and on bad data: no flapping, stale signals, reasons from the plan."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from forecaster.forecasting import SeriesForecast
from scaler import wording
from scaler.actuation.protocol import RecordingProvider
from scaler.config import Config, parse_config
from scaler.plans import CapacityPlan, past_cycle
from scaler.service.cycle import run_cycle
from scaler.wording import Reason
from tests.planning_inputs import plan_for
from tests.test_planning import NOW, PROPS, STEP, cases, forecast, history

CYCLE = pd.Timedelta(minutes=5)


def two_models(max_step: int = 8) -> Config:
    """A fresh signal on H100 pools and another signal on an A100 pool."""
    return parse_config(
        {
            "signals": [{"name": "fresh"}, {"name": "old"}],
            "workloads": [
                {"name": "a", "signal": "fresh", "gpu_model": "H100", "units_per_replica": 1},
                {"name": "b", "signal": "old", "gpu_model": "A100-80GB", "units_per_replica": 1},
            ],
            "pools": [
                {
                    "name": "h100",
                    "tier": "on-demand",
                    "gpu_model": "H100",
                    "gpus_per_node": 8,
                    "price_per_gpu_hour": 4.0,
                    "max_nodes": 40,
                },
                {
                    "name": "a100",
                    "tier": "on-demand",
                    "gpu_model": "A100-80GB",
                    "gpus_per_node": 8,
                    "price_per_gpu_hour": 3.0,
                    "max_nodes": 40,
                },
            ],
            "policy": {"horizon_s": 7200, "max_step_nodes": max_step},
        }
    )


def renamed(fc: SeriesForecast, name: str, age: pd.Timedelta = STEP) -> SeriesForecast:
    return replace(fc, name=name, last_timestamp=NOW - age)


@pytest.mark.slow
@given(
    st.floats(0, 200),
    st.floats(0, 200),
    st.floats(0, 200),
    st.integers(0, 30),
    st.integers(0, 30),
    st.sampled_from([pd.Timedelta(hours=6), pd.Timedelta(days=1), pd.Timedelta(days=7)]),
)
@PROPS
def test_a_stale_signal_changes_no_pool_target(
    fresh_level: float, old_level: float, old_last: float, h100: int, a100: int, age
) -> None:
    config = two_models()
    fresh = renamed(forecast(np.full(30, fresh_level), 0.2, fresh_level, fresh_level), "fresh")
    # The stale forecast says demand will soar; only its newest observation counts.
    old = renamed(forecast(np.full(30, old_level * 3 + 50), 0.2, old_last, old_last), "old", age)
    inventory = {"h100": h100, "a100": a100}
    stale = plan_for(config, {"fresh": fresh, "old": old}, inventory, NOW, stale={"old"})
    missing = plan_for(config, {"fresh": fresh}, inventory, NOW)
    good = plan_for(config, {"fresh": fresh, "old": renamed(old, "old")}, inventory, NOW)
    target = {a.pool: a.target_nodes for a in stale.actions}
    # The fresh signal's pools are planned as if nothing were wrong elsewhere.
    h = {p.pool: p.target_nodes for p in stale.pools}["h100"]
    assert h == {p.pool: p.target_nodes for p in missing.pools}["h100"]
    assert h == {p.pool: p.target_nodes for p in good.pools}["h100"]
    # The stale signal's pool holds, and grows only where the newest observation
    # already needs more than it holds.
    needed = int(np.ceil(np.ceil(old_last - 1e-9) / 8 - 1e-9))
    if needed <= a100:
        assert target["a100"] == a100
    else:
        assert target["a100"] == min(a100 + 8, needed)
    assert stale.risk["held_models"] == {"A100-80GB": "signal 'old' is stale"}
    # Risk and the printed shortfall measure against the same need.
    short = [s for s in stale.risk["shortfall"] if s["gpu_model"] == "A100-80GB"]
    if short:
        assert stale.risk["expected_unserved_gpu_hours"] > 0


def naive_two_models(store: Path) -> Config:
    """The two-model fleet forecast by the daily seasonal naive model, its store at ``store``."""
    config = two_models()
    return config.model_copy(
        update={
            "forecast": config.forecast.model_copy(update={"method": "seasonal_naive_1d"}),
            "model_store": config.model_store.model_copy(update={"path": str(store)}),
        }
    )


def gauge(end: pd.Timestamp, days: int = 6) -> pd.Series:
    idx = pd.date_range(end - pd.Timedelta(days=days), end, freq="5min", name="timestamp")
    t = np.arange(len(idx))
    return pd.Series(50 + 20 * np.sin(2 * np.pi * t / 288), index=idx)


@pytest.mark.parametrize("age", [pd.Timedelta(days=1), pd.Timedelta(days=2), pd.Timedelta(days=7)])
@pytest.mark.slow
def test_one_stale_signal_beside_a_fresh_one_through_the_cycle(tmp_path, age) -> None:
    config = naive_two_models(tmp_path)
    now = pd.Timestamp("2026-03-10T00:00:00")
    fresh = gauge(now - CYCLE)
    history = {"fresh": fresh, "old": gauge(now - age)}
    inventory = {"h100": 3, "a100": 9}
    result = run_cycle(config, history, RecordingProvider(dict(inventory)), now)
    alone = run_cycle(config, {"fresh": fresh}, RecordingProvider(dict(inventory)), now)
    plan = result.plan
    actions = {a.pool: a for a in plan.actions}
    # The fresh signal's pool is planned from its forecast, as without the stale one.
    assert actions["h100"].decision == "scale-up"
    assert (
        actions["h100"].target_nodes == {a.pool: a for a in alone.plan.actions}["h100"].target_nodes
    )
    # The stale one holds its pool: 9 nodes (72 GPUs) cover its newest observation.
    assert actions["a100"].decision == "no-op" and actions["a100"].target_nodes == 9
    assert "risk.held_models.A100-80GB" in actions["a100"].reason.refs
    assert "signal 'old' is stale" in plan.risk["held_models"]["A100-80GB"]
    assert any("'old' is stale" in str(n) for n in plan.notes)


# --------------------------------------------------------------------------- no flapping


@st.composite
def cycle_runs(draw: st.DrawFn):
    lead = draw(st.sampled_from([300, 600, 900]))
    stab = draw(st.sampled_from([0, 600, 1800]))
    kinds = draw(st.sampled_from([["on-demand"], ["reserved", "on-demand"], ["spot", "on-demand"]]))
    prices = {"reserved": 2.4, "on-demand": 4.0, "spot": 1.4}
    pools = [
        {
            "name": k,
            "tier": k,
            "gpu_model": "H100",
            "gpus_per_node": 8,
            "lead_time_s": lead,
            "price_per_gpu_hour": prices[k],
            "max_nodes": 30,
            **({"spot_interruption_rate_per_hour": 0.05} if k == "spot" else {}),
        }
        for k in kinds
    ]
    config = parse_config(
        {
            "signals": [{"name": "rps"}],
            "workloads": [
                {"name": "w", "signal": "rps", "gpu_model": "H100", "units_per_replica": 1}
            ],
            "pools": pools,
            "policy": {
                "horizon_s": 7200,
                "scale_down_stabilization_s": stab,
                "max_step_nodes": draw(st.integers(1, 8)),
            },
        }
    )
    n = draw(st.integers(4, 14))
    first = draw(st.floats(1, 150))
    # Observed demand never rises; the forecasts do whatever they like.
    falls = draw(st.lists(st.floats(0.5, 1.0), min_size=n, max_size=n))
    lasts = list(first * np.cumprod(falls))
    levels = draw(st.lists(st.floats(0, 250), min_size=n, max_size=n))
    slopes = draw(st.lists(st.floats(-5, 5), min_size=n, max_size=n))
    inventory = {p["name"]: draw(st.integers(0, 20)) for p in pools}
    return config, lasts, levels, slopes, inventory


@pytest.mark.slow
@given(cycle_runs())
@PROPS
def test_no_reversal_within_lead_and_stabilization_unless_observed_demand_rises(run) -> None:
    config, lasts, levels, slopes, inventory = run
    window = pd.Timedelta(
        seconds=max(p.lead_time_s for p in config.pools) + config.policy.scale_down_stabilization_s
    )
    past = []
    moves: dict[str, list[tuple[pd.Timestamp, int]]] = {p.name: [] for p in config.pools}
    held = dict(inventory)
    for i, (last, level, slope) in enumerate(zip(lasts, levels, slopes, strict=True)):
        now = NOW + i * CYCLE
        curve = np.maximum(0, level + slope * np.arange(30))
        fc = replace(
            forecast(curve, 0.3, last, last),
            frame=forecast(curve, 0.3, last, last).frame.set_axis(
                pd.date_range(now, periods=30, freq=STEP, name="timestamp")
            ),
            last_timestamp=now - STEP,
        )
        plan = plan_for(config, {"rps": fc}, held, now, past=past)
        for a in plan.actions:
            if a.target_nodes != a.current_nodes:
                moves[a.pool].append((now, int(np.sign(a.target_nodes - a.current_nodes))))
            held[a.pool] = a.target_nodes
        past.append(past_cycle(plan))
    for pool, seq in moves.items():
        for (t0, s0), (t1, s1) in itertools.pairwise(seq):
            assert not (s1 == -s0 and t1 - t0 < window), (pool, seq)


# --------------------------------------------------------------------------- reasons


def _need_over(plan: CapacityPlan, model: str, start: pd.Timestamp, end: pd.Timestamp) -> float:
    times = pd.DatetimeIndex([pd.Timestamp(t).tz_localize(None) for t in plan.timeline])
    need = np.array(plan.demand_gpus[model])
    mask = (times >= start) & (times < end)
    if not mask.any():
        mask = times == times[-1] if start >= times[-1] else times >= start
    return float(need[mask].max())


def check_reasons(config: Config, plan: CapacityPlan) -> None:
    """Every number an action's reason carries is the plan's own value, and every signal
    it names has its margin stated once in ``risk.margins``, which the reason refers to."""
    data = plan.to_dict()
    cycle = pd.Timedelta(seconds=config.policy.cycle_s)
    stab = pd.Timedelta(seconds=config.policy.scale_down_stabilization_s)
    created = pd.Timestamp(data["created_at"]).tz_localize(None)
    for a in data["actions"]:
        pool = next(p for p in config.pools if p.name == a["pool"])
        model = next(pp for pp in data["pools"] if pp["pool"] == a["pool"])["gpu_model"]
        code, params, refs = a["reason"]["code"], a["reason"]["params"], a["reason"]["refs"]
        assert a["reason"]["text"] == Reason.from_value(a["reason"]).text("en")
        needed_at = pd.Timestamp(a["needed_at"]).tz_localize(None)
        amount = a["target_nodes"] - a["current_nodes"]
        assert (
            params["bound"]
            == data["pools"][[p["pool"] for p in data["pools"]].index(a["pool"])]["binding"]
        )
        if a["decision"] == "scale-up":
            assert code in (wording.SCALE_UP_FORECAST, wording.SCALE_UP_HELD)
            assert params["nodes"] == amount
            assert params["cost_per_hour"] == pytest.approx(a["cost_delta_per_hour"])
            assert params["price_per_node_hour"] == pool.price_per_node_hour
        if a["decision"] == "scale-down" and a["current_nodes"] > pool.max_nodes:
            # A pool found above its ceiling steps down towards it by the max step.
            assert code == wording.SCALE_DOWN_MAX_NODES
            assert params["nodes"] == -amount and params["max_nodes"] == pool.max_nodes
            assert params["saves_per_hour"] == pytest.approx(-a["cost_delta_per_hour"])
            assert params["max_step"] == config.policy.max_step_nodes
        elif a["decision"] == "scale-down":
            assert code == wording.SCALE_DOWN_DEMAND
            assert params["nodes"] == -amount
            assert params["saves_per_hour"] == pytest.approx(-a["cost_delta_per_hour"])
            # The need is kept over the GPU model's hold window: its longest lead
            # time plus the stabilization window.
            lead_max = pd.Timedelta(
                seconds=max(q.lead_time_s for q in config.pools if q.gpu_model == pool.gpu_model)
            )
            kept = _need_over(plan, model, created, created + lead_max + stab + cycle)
            assert params["gpus"] == pytest.approx(kept, abs=1e-3)
            assert params["until"] == (created + lead_max + stab).strftime("%H:%MZ")
        if code in (wording.SCALE_UP_FORECAST, wording.NO_OP_FITS):
            need = _need_over(plan, model, needed_at, needed_at + cycle)
            assert params["gpus"] == pytest.approx(need, abs=1e-3)
            assert params["at"] == needed_at.strftime("%H:%MZ")
            assert params["lead_min"] == round(pool.lead_time_s / 60)
        if a["decision"] == "no-op":
            assert code == wording.NO_OP_FITS and amount == 0
            assert params["cost_per_hour"] == pytest.approx(
                a["current_nodes"] * pool.price_per_node_hour
            )
        if model in data["risk"]["held_models"]:
            assert f"risk.held_models.{model}" in refs or a["decision"] == "scale-down"
            continue
        if code == wording.SCALE_DOWN_MAX_NODES:
            continue  # above its ceiling: no demand is cited, so no signal either
        # The signals the reason names, each with its margin stated once in risk.margins.
        assert params["signals"], a["reason"]
        for sig in params["signals"]:
            assert f"risk.margins.{sig}" in refs and sig in data["risk"]["margins"]
            margin = data["risk"]["margins"][sig]
            line = wording.margin_reason(sig, margin)
            assert line.params["margin_pct"] == pytest.approx(100 * margin["margin"])
            if margin["source"] == "learned":
                assert line.params["days"] == margin["history_days"]
                assert line.params["unserved_pct"] == pytest.approx(100 * margin["unserved_share"])


@pytest.mark.slow
@given(cases(), st.booleans())
@PROPS
def test_reasons_are_computed_from_the_plan(case, learn: bool) -> None:
    config, forecasts, inventory = case
    y = history(([40.0] * 15 + [60.0] * 4) * 16 * 2) if learn else None
    plan = plan_for(
        config, forecasts, inventory, NOW, history={"rps": y} if y is not None else None
    )
    check_reasons(config, plan)
    assert (plan.risk["margins"]["rps"]["source"] == "learned") == learn


def test_past_cycles_come_from_the_run_records_of_cycles_that_acted() -> None:
    from scaler.records import RunRecord, plan_summary
    from scaler.service.cycle import past_cycles

    config = two_models()
    fresh = renamed(forecast(np.full(30, 80.0), 0.2, 80.0, 80.0), "fresh")
    old = renamed(forecast(np.full(30, 20.0), 0.2, 20.0, 20.0), "old")
    plan = plan_for(config, {"fresh": fresh, "old": old}, {"h100": 2, "a100": 9}, NOW)

    def record(run_id: str, dry_run: bool, job: str = "cycle", summary=None) -> RunRecord:
        return RunRecord(
            run_id,
            job,
            plan.created_at,
            plan.created_at,
            1.0,
            "ok",
            0,
            dry_run=dry_run,
            plan=summary if summary is not None else plan_summary(plan),
        )

    got = past_cycles(
        [
            record("a", dry_run=False),
            record("b", dry_run=True),
            record("c", dry_run=False, job="refit"),
            record("d", dry_run=False, summary={"pools": {"h100": {}}}),
        ]
    )
    assert len(got) == 1
    want = past_cycle(plan)
    assert got[0] == want
    assert want.current == {"h100": 2, "a100": 9}
    assert want.targets == {a.pool: a.target_nodes for a in plan.actions}
    assert want.need_gpus == plan.risk["near_need_gpus"]


def test_the_unserved_budget_default_is_pinned() -> None:
    from scaler.config import PolicyConfig

    assert PolicyConfig().unserved_budget == 0.005


def test_reserved_capacity_is_never_scaled_as_if_elastic() -> None:
    config = parse_config(
        {
            "signals": [{"name": "rps"}],
            "workloads": [
                {"name": "w", "signal": "rps", "gpu_model": "H100", "units_per_replica": 1}
            ],
            "pools": [
                {
                    "name": "reserved",
                    "tier": "reserved",
                    "gpu_model": "H100",
                    "gpus_per_node": 8,
                    "price_per_gpu_hour": 2.4,
                    "max_nodes": 20,
                },
                {
                    "name": "on-demand",
                    "tier": "on-demand",
                    "gpu_model": "H100",
                    "gpus_per_node": 8,
                    "price_per_gpu_hour": 4.0,
                    "max_nodes": 20,
                },
            ],
            "policy": {"horizon_s": 7200},
        }
    )
    for level in (10.0, 120.0):
        fc = forecast(np.full(30, level), 0.1, level, level)
        plan = plan_for(config, {"rps": fc}, {"reserved": 4, "on-demand": 2}, NOW)
        reserved = next(p for p in plan.pools if p.pool == "reserved")
        # A commitment changes only through the finance advice: 4 nodes at every step.
        assert set(reserved.target_nodes) == {4}
    # The rest of a high demand goes to on-demand.
    assert next(a for a in plan.actions if a.pool == "on-demand").decision == "scale-up"


@pytest.mark.parametrize("kind", ["empty", "all-nan", "one-sample"])
@pytest.mark.slow
def test_an_empty_or_malformed_signal_holds_only_its_pools(tmp_path, kind) -> None:
    config = naive_two_models(tmp_path)
    now = pd.Timestamp("2026-03-10T00:00:00")
    fresh = gauge(now - CYCLE)
    bad = {
        "empty": pd.Series(dtype=float, index=pd.DatetimeIndex([], name="timestamp")),
        "all-nan": gauge(now - CYCLE) * np.nan,
        "one-sample": gauge(now - CYCLE).iloc[-1:],
    }[kind]
    inventory = {"h100": 3, "a100": 9}
    result = run_cycle(
        config, {"fresh": fresh, "old": bad}, RecordingProvider(dict(inventory)), now
    )
    alone = run_cycle(config, {"fresh": fresh}, RecordingProvider(dict(inventory)), now)
    actions = {a.pool: a for a in result.plan.actions}
    assert (
        actions["h100"].target_nodes == {a.pool: a for a in alone.plan.actions}["h100"].target_nodes
    )
    assert actions["a100"].decision == "no-op" and actions["a100"].target_nodes == 9
    assert result.plan.risk["held_models"] == {"A100-80GB": "no data for signal 'old'"}
