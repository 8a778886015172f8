"""Idle GPU-hours and their cost per workload (scaler.reports.workload_costs) on hand-made
fleets: whole GPUs on a reserved pool, two MPS workloads pooled on one GPU model, a
workload without data, and the section in both languages and both writers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from forecaster.forecasting import SeriesForecast
from scaler.config import Config, parse_config
from scaler.planning.demand import gpus_of_replicas, replicas_for
from scaler.plans import CapacityPlan
from scaler.reports import finance
from scaler.reports.document import Report, Section
from scaler.reports.finance_report import build_finance_report
from scaler.reports.html import render_html
from scaler.reports.markdown import render_markdown
from scaler.reports.tokens import token_costs
from scaler.reports.workload_costs import (
    plan_price_per_gpu_hour,
    workload_cost_section,
    workload_costs,
)
from tests.hand_made import flat_forecast
from tests.planning_inputs import plan_for
from tests.test_report import english_words

NOW = pd.Timestamp("2026-03-02T00:00:00")
STEP = pd.Timedelta(minutes=5)
STEPS = 24  # two hours of five-minute steps


def _forecast(name: str, level: float, spread: float) -> SeriesForecast:
    return flat_forecast(name, level, NOW, STEP, STEPS, spread)


def _config(workloads: list[dict[str, Any]], pools: list[dict[str, Any]]) -> Config:
    signals = sorted({s for w in workloads for s in (w["signal"], w.get("token_signal")) if s})
    return parse_config(
        {
            "signals": [{"name": s} for s in signals],
            "workloads": [{"gpu_model": "H100", "units_per_replica": 1, **w} for w in workloads],
            "pools": pools,
            "policy": {"horizon_s": STEPS * 300},
        },
        "cfg.yaml",
    )


RESERVED = {
    "name": "reserved",
    "tier": "reserved",
    "gpu_model": "H100",
    "gpus_per_node": 8,
    "price_per_gpu_hour": 2.4,
    "min_nodes": 2,
    "max_nodes": 2,
}
ON_DEMAND = {
    "name": "on-demand",
    "tier": "on-demand",
    "gpu_model": "H100",
    "gpus_per_node": 8,
    "price_per_gpu_hour": 4.0,
    "max_nodes": 20,
    "lead_time_s": 600,
}


def _row(plan_rows: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(r for r in plan_rows if r["workload"] == name)


def _table(section: Section) -> list[dict[str, Any]]:
    (table,) = section.tables
    return table.rows


def test_a_workload_on_reserved_gpus_shows_its_idle_gpu_hours_and_their_cost() -> None:
    config = _config(
        [{"name": "chat", "signal": "rps", "token_signal": "tok"}], [RESERVED, ON_DEMAND]
    )
    # 10 replicas at the median, 11 at q0.9: one GPU of eleven idle at every step.
    forecasts = {"rps": _forecast("rps", 10.0, 0.1), "tok": _forecast("tok", 5000.0, 0.0)}
    plan = plan_for(config, forecasts, {"reserved": 2, "on-demand": 0}, NOW)
    (row,) = workload_costs(config.fleet, plan, forecasts).rows
    hours = len(plan.timeline) * plan.step_s / 3600
    assert row.mode == "whole" and row.replicas_per_gpu == 1 and row.missing is None
    assert row.planned_gpu_hours == pytest.approx(11 * hours)
    assert row.used_gpu_hours == pytest.approx(10 * hours)
    assert row.idle_gpu_hours == pytest.approx(1 * hours)
    assert row.idle_share == pytest.approx(1 / 11)
    # Sixteen reserved GPUs hold it all: the plan buys reserved GPU-hours only, at 2.40.
    assert {p.pool: max(p.target_nodes) for p in plan.pools} == {"reserved": 2, "on-demand": 0}
    assert row.price_per_gpu_hour == pytest.approx(2.4)
    assert row.idle_cost == pytest.approx(hours * 2.4)
    # The price is the one the cost per 1M tokens is priced at: cost over GPU-hours.
    (tokens,) = token_costs(config.served_workloads, plan, forecasts)
    assert tokens["cost"] / tokens["gpu_hours"] == pytest.approx(row.price_per_gpu_hour)
    section = workload_cost_section(config.fleet, config.finance.currency, plan, forecasts, "en")
    assert section is not None and section.key == "workload_costs"
    shown = _row(_table(section), "chat")
    assert shown["idle_gpu_hours"] == pytest.approx(hours) and shown["mode"] == "whole GPUs"
    assert shown["idle_cost"] == pytest.approx(hours * 2.4)


def test_a_mixed_plan_prices_every_gpu_hour_at_its_mix_of_tiers() -> None:
    config = _config([{"name": "chat", "signal": "rps"}], [RESERVED, ON_DEMAND])
    # 30 replicas: 16 reserved GPUs and on-demand nodes for the rest.
    forecasts = {"rps": _forecast("rps", 30.0, 0.1)}
    plan = plan_for(config, forecasts, {"reserved": 2, "on-demand": 2}, NOW)
    paid = {p.pool: float(np.sum(p.target_nodes)) * p.gpus_per_node for p in plan.pools}
    assert paid["on-demand"] > 0
    mix = (paid["reserved"] * 2.4 + paid["on-demand"] * 4.0) / sum(paid.values())
    assert plan_price_per_gpu_hour(plan) == {"H100-80GB": pytest.approx(mix)}
    (row,) = workload_costs(config.fleet, plan, forecasts).rows
    assert 2.4 < row.price_per_gpu_hour < 4.0
    assert row.planned_cost == pytest.approx(row.planned_gpu_hours * mix)


MPS = {"sharing": "mps", "memory_gb": 18, "compute_share": 0.25}
H100_POOL = {
    "name": "h100",
    "tier": "on-demand",
    "gpu_model": "H100",
    "gpus_per_node": 8,
    "price_per_gpu_hour": 2.5,
    "max_nodes": 50,
    "lead_time_s": 600,
}


def _mps_fleet() -> tuple[Config, dict[str, SeriesForecast], dict[str, pd.Series], CapacityPlan]:
    config = _config(
        [{"name": "a", "signal": "a", **MPS}, {"name": "b", "signal": "b", **MPS}], [H100_POOL]
    )
    # q0.9: 5 and 2 replicas, 2 and 1 GPUs in dedicated sets of 4 replicas a GPU; pooled,
    # 4 + sqrt(2^2 + 1^2) = 6.2 -> 7 replicas, 2 GPUs.
    forecasts = {"a": _forecast("a", 3.0, 0.6), "b": _forecast("b", 1.0, 0.6)}
    idx = pd.date_range(NOW - pd.Timedelta(days=3), NOW - STEP, freq=STEP)
    rng = np.random.default_rng(1)
    history = {n: pd.Series(5 + rng.normal(0, 1, len(idx)), idx) for n in ("a", "b")}
    plan = plan_for(config, forecasts, {"h100": 1}, NOW, history=history)
    return config, forecasts, history, plan


def test_pooled_mps_workloads_share_the_physical_gpu_hours_priced_per_physical_gpu() -> None:
    config, forecasts, history, plan = _mps_fleet()
    group = plan.sharing["pools"]["H100-80GB/mps"]
    assert group["replicas_per_gpu"] == 4 and group["saved_gpu_hours"] > 0
    costs = workload_costs(config.fleet, plan, forecasts, history)
    (pooled,) = costs.groups
    a, b = costs.rows
    assert (a.group, b.group) == ("H100-80GB/mps", "H100-80GB/mps")
    assert (a.mode, a.replicas_per_gpu) == ("mps", 4)
    # The members' shares add up to the group's physical GPU-hours, the plan's: its
    # dedicated sets less what pooling saves.
    hours = len(plan.timeline) * plan.step_s / 3600
    dedicated = sum(
        float(np.sum(gpus_of_replicas(w, replicas_for(w, forecasts[w.signal].frame["q0.9"]))))
        for w in config.workloads
    )
    physical = dedicated * plan.step_s / 3600 - group["saved_gpu_hours"]
    assert a.planned_gpu_hours + b.planned_gpu_hours == pytest.approx(pooled.gpu_hours)
    assert pooled.gpu_hours == pytest.approx(physical, abs=1e-3)
    # Split by replicas at q0.9: 5 of a to 2 of b.
    assert pooled.gpu_hours == pytest.approx(2 * hours)
    assert a.planned_gpu_hours == pytest.approx(5 / 7 * 2 * hours)
    assert b.planned_gpu_hours == pytest.approx(2 / 7 * 2 * hours)
    # Each is priced per physical GPU: the pool's 2.50, not 2.50 a replica.
    for row in (a, b):
        assert row.price_per_gpu_hour == pytest.approx(2.5)
        assert row.planned_cost == pytest.approx(row.planned_gpu_hours * 2.5)
    assert a.planned_cost + b.planned_cost == pytest.approx(physical * 2.5, abs=0.01)
    # Used: the median replicas (3 and 1) at a quarter of a GPU each.
    assert a.used_gpu_hours == pytest.approx(3 / 4 * hours)
    assert b.used_gpu_hours == pytest.approx(1 / 4 * hours)
    assert a.idle_gpu_hours == pytest.approx(a.planned_gpu_hours - a.used_gpu_hours)
    # Without the history (the finance report) the group's GPU-hours are still the plan's.
    blind = workload_costs(config.fleet, plan, forecasts)
    assert blind.groups[0].gpu_hours == pytest.approx(physical, abs=1e-3)
    assert sum(r.planned_gpu_hours for r in blind.rows) == pytest.approx(physical, abs=1e-3)
    section = workload_cost_section(
        config.fleet, config.finance.currency, plan, forecasts, "en", history
    )
    assert section is not None
    assert any(p.startswith("Pooling group H100-80GB/mps (a, b, 4 ") for p in section.paragraphs)
    assert _row(_table(section), "a")["mode"] == "MPS"
    assert _row(_table(section), "a")["replicas_per_gpu"] == "4"


def test_without_the_history_a_group_keeps_the_plans_pooled_gpu_hours() -> None:
    config = _config(
        [{"name": "a", "signal": "a", **MPS}, {"name": "b", "signal": "b", **MPS}], [H100_POOL]
    )
    # Medians 2 and 2, q0.9 5 and 4 replicas: dedicated 2 + 1 GPUs; the sum of the quantiles
    # (9 replicas) needs 3 GPUs too, the joint quantile on independent changes
    # (4 + sqrt(3^2 + 2^2) = 7.6 -> 8 replicas) needs 2.
    forecasts = {"a": _forecast("a", 2.0, 1.5), "b": _forecast("b", 2.0, 1.0)}
    idx = pd.date_range(NOW - pd.Timedelta(days=3), NOW - STEP, freq=STEP)
    rng = np.random.default_rng(2)
    history = {n: pd.Series(5 + rng.normal(0, 1, len(idx)), idx) for n in ("a", "b")}
    plan = plan_for(config, forecasts, {"h100": 1}, NOW, history=history)
    hours = len(plan.timeline) * plan.step_s / 3600
    assert plan.sharing["pools"]["H100-80GB/mps"]["saved_gpu_hours"] == pytest.approx(hours)
    seen = workload_costs(config.fleet, plan, forecasts, history)
    blind = workload_costs(config.fleet, plan, forecasts)
    for costs in (seen, blind):
        assert costs.groups[0].gpu_hours == pytest.approx(2 * hours, abs=1e-3)
        a, b = costs.rows
        assert a.planned_gpu_hours == pytest.approx(5 / 9 * 2 * hours, abs=1e-3)
        assert b.planned_gpu_hours == pytest.approx(4 / 9 * 2 * hours, abs=1e-3)
        assert a.used_gpu_hours == pytest.approx(2 / 4 * hours)


def test_a_workload_without_data_claims_no_idle() -> None:
    config = _config(
        [
            {"name": "chat", "signal": "rps"},
            {"name": "code", "signal": "code_rps"},
            {"name": "batch", "signal": "batch_rps"},
        ],
        [RESERVED, ON_DEMAND],
    )
    gaps = _forecast("batch_rps", 1.0, 0.1)
    gaps.frame.loc[:, :] = np.nan
    forecasts = {"rps": _forecast("rps", 10.0, 0.1), "batch_rps": gaps}
    # code_rps: no forecast; batch_rps: a forecast without a number in it.
    plan = plan_for(config, forecasts, {"reserved": 2, "on-demand": 0}, NOW)
    chat, code, batch = workload_costs(config.fleet, plan, forecasts).rows
    assert chat.missing is None and chat.idle_gpu_hours > 0
    assert (code.missing, batch.missing) == ("no_forecast", "no_median")
    for row in (code, batch):
        assert np.isnan(row.idle_gpu_hours) and np.isnan(row.idle_cost)
        assert np.isnan(row.idle_share)
    # A stale signal's forecast is not followed by the planner: no data either.
    stale = plan_for(config, forecasts, {"reserved": 2}, NOW, stale={"rps"})
    assert workload_costs(config.fleet, stale, forecasts).rows[0].missing == "stale"
    section = workload_cost_section(config.fleet, config.finance.currency, plan, forecasts, "en")
    assert section is not None
    rows = _table(section)
    for name in ("code", "batch"):
        shown = _row(rows, name)
        assert shown["idle_gpu_hours"] == "no data"
        assert "idle_cost" not in shown and "idle_share" not in shown
    assert section.paragraphs[-1] == (
        "No data, so no idle is claimed: code (no forecast), batch (no median over the plan)."
    )
    # The total is the one workload with data: nothing is made up for the others.
    assert not any(r["workload"] == "Total" for r in rows)


def _every_kind() -> tuple[Config, CapacityPlan, dict[str, SeriesForecast], dict[str, pd.Series]]:
    """Whole GPUs, MIG, two pooled MPS workloads and one without a forecast."""
    config = _config(
        [
            {"name": "chat", "signal": "rps"},
            {"name": "a", "signal": "a", **MPS},
            {"name": "b", "signal": "b", **MPS},
            {
                "name": "embed",
                "signal": "embed",
                "gpu_model": "A100-80GB",
                "mig_profile": "1g.10gb",
            },
            {"name": "code", "signal": "code_rps"},
        ],
        [
            RESERVED,
            ON_DEMAND,
            {**H100_POOL, "gpu_model": "A100-80GB", "name": "a100", "price_per_gpu_hour": 1.8},
        ],
    )
    forecasts = {n: _forecast(n, 4.0, 0.5) for n in ("rps", "a", "b", "embed")}
    plan = plan_for(config, forecasts, {"reserved": 2, "a100": 1}, NOW)
    return config, plan, forecasts, {}


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_the_section_renders_in_both_writers_with_the_currency(lang: str) -> None:
    config, plan, forecasts, _ = _every_kind()
    section = workload_cost_section(config.fleet, config.finance.currency, plan, forecasts, lang)
    assert section is not None
    (table,) = section.tables
    money = [
        c for c in table.columns if c.key in ("price_per_gpu_hour", "planned_cost", "idle_cost")
    ]
    assert len(money) == 3 and all(c.label.endswith(", USD") for c in money)
    modes = {r["workload"]: r["mode"] for r in table.rows}
    report = Report("report", lang, "T", "", "2026-03-02T00:00:00Z", [], [section])
    md, page = render_markdown(report), render_html(report)
    no_data = "no data" if lang == "en" else "нет данных"
    for text in (md, page):
        assert table.title in text and no_data in text and modes["a"] in text
    assert modes["embed"] == "MIG" and modes["a"] == "MPS"
    assert _row(table.rows, "embed")["replicas_per_gpu"] == "7"


def test_a_russian_section_has_no_english_words() -> None:
    config, plan, forecasts, _ = _every_kind()
    section = workload_cost_section(config.fleet, config.finance.currency, plan, forecasts, "ru")
    assert section is not None
    report = Report("report", "ru", "Т", "", "2026-03-02T00:00:00Z", [], [section])
    names = {w.name for w in config.workloads} | {p.gpu_model for p in plan.pools}
    # MPS is NVIDIA's name for it, as MIG is; Russian text keeps it.
    names |= {"MPS", "H100-80GB", "A100-80GB"}
    assert english_words(report, names) == {}
    assert section.title == "Простой GPU по нагрузкам"
    rows = {r["workload"]: r for r in _table(section)}
    assert rows["code"]["idle_gpu_hours"] == "нет данных"
    assert rows["chat"]["mode"] == "целые GPU" and "Итого" in rows


def test_the_finance_report_shows_the_table_with_the_plan_and_its_forecasts() -> None:
    config, plan, forecasts, _ = _every_kind()
    projection = finance.project(config, forecasts, NOW, pd.Timedelta(hours=2))
    for lang in ("en", "ru"):
        report = build_finance_report(
            projection, config, "test", lang, charts=False, plan=plan, forecasts=forecasts
        )
        keys = [s.key for s in report.sections]
        assert "workload_costs" in keys and keys.index("workload_costs") < keys.index("commitments")
    # Without the plan's forecasts there is nothing to split by workload.
    bare = build_finance_report(projection, config, "test", charts=False, plan=plan)
    assert "workload_costs" not in [s.key for s in bare.sections]
