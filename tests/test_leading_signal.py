"""A leading signal in the near-term rule (scaler.planning.leading): picked up where queued
demand arrives after a known delay, ablated where it says nothing, never read past the
newest observation, validated in the config, and no change for a workload without one."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scaler.cli import main
from scaler.config import ConfigError, parse_config
from scaler.inputs.demo import DEMO_CONFIG
from scaler.planning.leading import EXCESS, RISE, Arrival, LeadingRule, aligned, newest_boost
from scaler.planning.margins import Margin, learn_margin
from scaler.replay.protocol import ReplaySetup, prepare_trace
from scaler.replay.walkforward import _leading_at, _Planner, with_leading
from scaler.wording import MARGIN_FLAT, MARGIN_LEADING, margin_reason, render
from tests.hand_made import flat_forecast
from tests.plan_checks import validate_plan
from tests.planning_inputs import plan_for

STEP = pd.Timedelta(minutes=5)
WINDOW = pd.Timedelta(minutes=30)


def jobs(n: int = 864, delay: int = 2, seed: int = 0) -> tuple[pd.Series, pd.Series]:
    """GPUs of running jobs over a base of 40, and running plus queued: each job waits
    ``delay`` steps in the queue, then runs 6 to 35 steps (a known delay)."""
    rng = np.random.default_rng(seed)
    run, queued = np.full(n, 40.0), np.zeros(n)
    for a in range(n):
        for _ in range(rng.poisson(0.25)):
            size, dur = float(rng.integers(4, 17)), int(rng.integers(6, 36))
            queued[a : min(n, a + delay)] += size
            run[min(n, a + delay) : min(n, a + delay + dur)] += size
    idx = pd.date_range("2026-01-01", periods=n, freq=STEP)
    return pd.Series(run, idx, name="running"), pd.Series(run + queued, idx, name="demanded")


def learn(y: pd.Series, leading: pd.Series | None = None) -> Margin | None:
    """The near-term rule at a 10-minute lead, with ``leading`` named 'q'."""
    return learn_margin(
        y, 600, 0.005, step=STEP, floor_window=WINDOW, leading=leading, leading_signal="q"
    )


@pytest.mark.slow
def test_a_leading_series_that_arrives_after_a_known_delay_is_picked_up() -> None:
    y, demanded = jobs()
    m = learn(y, demanded)
    assert m is not None and m.leading is not None
    assert m.leading.signal == "q" and m.leading.arrived is not None and m.leading.arrived > 0.5
    # Cheaper than "no change" (newest x margin) and than reacting, at the same service.
    assert m.leading_cost_ratio is not None and m.flat_cost_ratio is not None
    assert m.cost_ratio == pytest.approx(m.leading_cost_ratio)
    assert m.leading_cost_ratio < 0.97 * m.flat_cost_ratio
    assert m.reactive_cost_ratio is not None and m.cost_ratio is not None
    assert m.cost_ratio < m.reactive_cost_ratio
    assert m.unserved_share <= (m.target or 0.0) + 1e-12
    assert "leading signal" in m.describe() and m.source == "leading signal 'q'"
    entry = {"source": "learned", **m.to_dict()}
    reason = margin_reason("running", entry)
    assert reason.code == MARGIN_LEADING and "'q'" in render(reason)
    assert "'q'" in render(reason, "ru")


@pytest.mark.slow
def test_a_useless_leading_series_is_ablated_away() -> None:
    y, _ = jobs()
    base = learn(y)
    other_run, other_all = jobs(seed=7)
    # Queued demand of another tenant, that never runs here, and a series behind the signal.
    for useless in (y + (other_all - other_run), y.shift(2).bfill(), y * 0 + 500.0):
        m = learn(y, useless)
        assert m is not None and base is not None and m.leading is None
        assert (m.margin, m.forecast_shape, m.cost_ratio) == (
            base.margin,
            base.forecast_shape,
            base.cost_ratio,
        )
        assert "not used" in m.describe()
        reason = margin_reason("running", {"source": "learned", **m.to_dict()})
        assert reason.code == MARGIN_FLAT and "not used" in render(reason)


# learn_margin's result on jobs() before the leading rule existed (the code at the commit
# before it), pinned: a signal without a leading signal is learnt exactly as before.
BEFORE = [
    (
        {},
        {"margin": 0.2, "unserved_share": 0.003154, "smaller_unserved_share": 0.004212},
        {"cost_ratio": 1.298964, "target": 0.003154, "flat_cost_ratio": 1.298964},
    ),
    (
        {"granule": 8.0, "replica": 1.0},
        {"margin": 0.2, "unserved_share": 0.002099, "smaller_unserved_share": 0.002453},
        {"cost_ratio": 1.339555, "target": 0.002099, "flat_cost_ratio": 1.339555},
    ),
    (
        {"reactive_headroom": None},
        {"margin": 0.175, "unserved_share": 0.004212, "smaller_unserved_share": 0.005776},
        {"cost_ratio": 1.271903, "target": 0.005, "flat_cost_ratio": 1.271903},
    ),
]


@pytest.mark.parametrize(("kw", "first", "second"), BEFORE)
def test_without_a_leading_signal_the_rule_is_exactly_as_before(
    kw: dict[str, float | None], first: dict[str, float], second: dict[str, float]
) -> None:
    y, _ = jobs()
    m = learn_margin(y, 600, 0.005, step=STEP, floor_window=WINDOW, **kw)  # type: ignore[arg-type]
    assert m is not None and m.leading is None and m.leading_signal is None
    got = m.to_dict()
    assert {k: got[k] for k in first} == first and {k: got[k] for k in second} == second
    assert not any(k.startswith("leading") for k in got)
    assert "leading" not in m.describe()


def _fleet_config(leading: str | None) -> dict[str, object]:
    workload: dict[str, object] = {
        "name": "train",
        "signal": "running",
        "gpu_model": "H100",
        "units_per_replica": 1,
    }
    if leading:
        workload["leading_signal"] = leading
    return {
        "signals": [{"name": "running", "step_s": 300}, {"name": "queued", "step_s": 300}],
        "workloads": [workload],
        "pools": [
            {
                "name": "od",
                "tier": "on-demand",
                "gpu_model": "H100-80GB",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 4,
                "max_nodes": 100,
                "lead_time_s": 600,
            }
        ],
        "policy": {"growth_backtest_s": 0, "scale_down_stabilization_s": 1200},
    }


def _plan(leading_name: str | None, queued: pd.Series, y: pd.Series) -> dict[str, object]:
    config = parse_config(_fleet_config(leading_name), "leading.yaml")
    now = y.index[-1] + STEP
    fc = {
        "running": flat_forecast("running", float(y.iloc[-1]), now, STEP, 24),
        "queued": flat_forecast("queued", float(queued.iloc[-1]), now, STEP, 24),
    }
    plan = plan_for(config, fc, {"od": 10}, now, history={"running": y, "queued": queued})
    return plan.to_dict()


@pytest.mark.slow
def test_a_workload_without_a_leading_signal_plans_as_with_one_that_is_ablated() -> None:
    y, demanded = jobs()
    # A series that follows the signal instead of leading it.
    useless = y.shift(2).bfill().rename("queued")
    without = _plan(None, useless, y)
    ablated = _plan("queued", useless, y)
    used = _plan("queued", demanded, y)
    for plan in (without, ablated, used):
        validate_plan(plan)
    margins = [p["risk"]["margins"]["running"] for p in (without, ablated, used)]  # type: ignore[index]
    assert not any(k.startswith("leading") for k in margins[0])
    assert margins[1]["leading"] is None and margins[1]["leading_signal"] == "queued"
    assert margins[2]["leading"]["signal"] == "queued"
    # The same decisions where the leading signal is not used.
    assert without["actions"] == ablated["actions"]
    assert without["risk"]["near_need_gpus"] == ablated["risk"]["near_need_gpus"]  # type: ignore[index]


def test_the_leading_rule_adds_its_share_of_the_newest_values_only() -> None:
    rule = LeadingRule("q", Arrival(RISE, 3), 0.5, STEP)
    y = np.array([10.0, 10, 10, 10, 10])
    x = np.array([10.0, 10, 14, 20, 30])
    # Rise over 3 steps at the newest: 30 - 10 = 20, half of it.
    assert rule.at(y, x).boost == pytest.approx(10.0)
    excess = LeadingRule("q", Arrival(EXCESS), 1.0, STEP)
    assert excess.at(y, x).boost == pytest.approx(20.0)
    # A missing newest leading value adds nothing (never a scale-down either).
    assert rule.at(y, np.array([10.0, 10, 14, 20, np.nan])).boost == 0.0


@pytest.mark.slow
def test_the_leading_series_is_never_read_past_the_newest_observation() -> None:
    grid = pd.date_range("2026-01-01", periods=4, freq=STEP)
    # Leading values a minute after each step: each step sees the one before it.
    late = pd.Series([1.0, 2, 3, 4], grid + pd.Timedelta(minutes=1))
    got = aligned(late, grid, STEP)
    assert np.isnan(got[0]) and list(got[1:]) == [1.0, 2.0, 3.0]
    # The learnt rule and its value now are the same whatever the leading series does later.
    y, demanded = jobs()
    future = pd.Series(
        1e4, pd.date_range(y.index[-1] + STEP, periods=50, freq=STEP), name="demanded"
    )
    a, b = learn(y, demanded), learn(y, pd.concat([demanded, future]))
    assert a is not None and b is not None and a.leading is not None
    assert a.to_dict() == b.to_dict()
    at = y.index[-1]
    assert newest_boost(a.leading, y, demanded, at).boost == pytest.approx(
        newest_boost(a.leading, y, pd.concat([demanded, future]), at).boost
    )


@pytest.mark.slow
def test_the_replay_adds_the_leading_share_as_visible_at_each_step() -> None:
    y, demanded = jobs(n=5 * 288)
    setup = ReplaySetup()
    trace = with_leading(prepare_trace(y, 1.0, setup), demanded, "demanded")
    assert trace.leading is not None and trace.leading.name == "demanded"
    m = learn(y.iloc[: trace.test_start], demanded.iloc[: trace.test_start])
    assert m is not None and m.leading is not None
    planner = _Planner(None, "auto", m, 7, pd.Timedelta(minutes=10))  # type: ignore[arg-type]
    t = trace.test_start + 100
    now = _leading_at(planner, trace, t).margin
    assert now is not None and now.leading is not None
    # What it adds is the rule's share of the series up to step t - 1, the newest visible.
    window = slice(t - now.leading.arrival.window_steps - 1, t)
    want = now.leading.at(y.to_numpy()[window], demanded.to_numpy()[window]).boost
    assert now.leading.boost == pytest.approx(want)
    # Changing the leading series from step t on changes nothing at t.
    later = trace.leading.copy()
    later.iloc[t:] = 1e4
    changed = dataclasses.replace(trace, leading=later)
    assert _leading_at(planner, changed, t).margin.leading.boost == pytest.approx(want)  # type: ignore[union-attr]
    # Without a leading rule the planner is the one given.
    plain = dataclasses.replace(planner, margin=learn(y.iloc[: trace.test_start]))
    assert _leading_at(plain, trace, t) is plain


def _config_error(mutate: object) -> str:
    data = copy.deepcopy(DEMO_CONFIG)
    mutate(data)  # type: ignore[operator]
    with pytest.raises(ConfigError) as info:
        parse_config(data, "cfg.yaml")
    message = str(info.value)
    assert "\n" not in message and message.startswith("cfg.yaml")
    return message


def test_the_config_names_a_declared_leading_signal_other_than_the_workloads_own() -> None:
    msg = _config_error(lambda d: d["workloads"][0].update(leading_signal="nope"))
    assert "workloads[0].leading_signal" in msg and "'nope'" in msg
    own = DEMO_CONFIG["workloads"][0]["signal"]
    msg = _config_error(lambda d: d["workloads"][0].update(leading_signal=own))
    assert "workloads[0].leading_signal" in msg and "own signal" in msg
    other = DEMO_CONFIG["signals"][1]["name"]
    data = copy.deepcopy(DEMO_CONFIG)
    data["workloads"][0]["leading_signal"] = other
    assert parse_config(data, "cfg.yaml").workloads[0].leading_signal == other


def test_simulate_refuses_a_leading_series_it_cannot_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    y, _ = jobs(n=5 * 288)
    history = tmp_path / "running.csv"
    y.rename("value").to_csv(history, index_label="timestamp")
    elsewhere = pd.Series([1.0, 2.0, 3.0], pd.date_range("2001-01-01", periods=3, freq=STEP))
    leading = tmp_path / "queued.csv"
    elsewhere.rename("value").to_csv(leading, index_label="timestamp")
    common = ["simulate", "--history", str(history), "--timeline-out", "", "--chart-out", ""]
    assert main([*common, "--leading", str(leading)]) == 2
    err = capsys.readouterr().err
    assert "--leading" in err and "no value on the training steps" in err
    assert main([*common, "--leading", str(tmp_path / "missing.csv")]) == 2
    assert "--leading" in capsys.readouterr().err
    assert main(["simulate", "--suite", str(tmp_path), "--leading", str(leading)]) == 2
    assert "--leading goes with one --history" in capsys.readouterr().err
