"""What heads the finance report and the review: the commitment trade-off in money per band,
idle reserved capacity, a plan that falls short or fell back, and the currency of every
money column.

Hand-made fleets of 1-GPU nodes with constant forecasts, so every amount is worked out
by hand in the comments.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from scaler.config import Config
from scaler.plans import CapacityPlan
from scaler.reports import finance
from scaler.reports.document import Report
from scaler.reports.finance_report import build_finance_report
from tests.test_finance import ON_DEMAND, START, fake_forecast, fleet

HOURS = 48


def _report(
    config: Config, levels: dict[float, Any], plan: CapacityPlan | None = None, lang: str = "en"
) -> tuple[finance.FinanceProjection, Report]:
    proj = finance.project(
        config, {"rps": fake_forecast(levels, hours=HOURS)}, START, pd.Timedelta(hours=HOURS)
    )
    return proj, build_finance_report(proj, config, "test fleet", lang, charts=False, plan=plan)


def _summary(report: Report) -> list[str]:
    return [text for text, _ in next(s for s in report.sections if s.key == "summary").items]


def _table(report: Report, key: str) -> Any:
    return next(tb for s in report.sections for tb in s.tables if tb.key == key)


# ---------------------------------------------------------------- the commitment trade-off

# 4 reserved GPUs at 1.0, on-demand at 2.0; demand 3 / 5 / 7 GPUs (low / expected / high).
# A 5th reserved GPU costs 1.0/h more in the low case and saves 2.0 - 1.0 = 1.0/h of
# on-demand in the expected and the high case: over 48 h, -48 / +48 / +48. Releasing the
# 4th saves 48 low and loses 48 expected and high. Keeping 4 is the advice.
TRADE_POOLS = [
    {"name": "res", "tier": "reserved", "price_per_gpu_hour": 1.0, "min_nodes": 4},
    ON_DEMAND,
]
TRADE_LEVELS = {0.1: 3.0, 0.5: 5.0, 0.9: 7.0}


def test_headline_names_the_next_level_up_and_down_in_money_per_band() -> None:
    proj, report = _report(fleet(TRADE_POOLS), TRADE_LEVELS)
    [advice] = proj.commitments
    assert (advice.kind, advice.recommended_nodes) == ("keep", 4)
    up, down = advice.trade_offs()
    assert (up.nodes, down.nodes) == (5, 3)
    assert dict(up.saving) == pytest.approx({"low": -48.0, "expected": 48.0, "high": 48.0})
    assert dict(down.saving) == pytest.approx({"low": 48.0, "expected": -48.0, "high": -48.0})
    assert up.deciding_band == "low" and down.deciding_band in ("expected", "high")
    [headline] = [x for x in _summary(report) if x.startswith("H100-80GB: keep 4")]
    assert "against 4 node(s): 5 node(s) loses 48.00 USD low, saves 48.00 USD expected" in headline
    assert "saves 48.00 USD high (the low case decides)" in headline
    assert "3 node(s) saves 48.00 USD low, loses 48.00 USD expected" in headline
    # The same sentence heads the commitment section, and finance.json keeps the numbers.
    commitments = next(s for s in report.sections if s.key == "commitments")
    assert headline in commitments.paragraphs
    data = advice.to_dict()["trade_offs"]
    assert data[0]["saving"] == {"low": -48.0, "expected": 48.0, "high": 48.0}


def test_verdicts_name_the_band_and_the_amount() -> None:
    _, report = _report(fleet(TRADE_POOLS), TRADE_LEVELS)
    rows = {r["nodes"]: r["verdict"] for r in _table(report, "commitment_options").rows}
    assert rows[4] == "advised"
    assert rows[5] == "against keeping, loses 48.00 USD if demand comes in low"
    assert rows[3].startswith("against keeping, loses 48.00 USD")
    # Releasing everything puts 4 GPUs on on-demand at 2.0 - 1.0 more: 4 x 48 = 192 in the
    # expected and the high case alike (the first of them is named).
    assert rows[0] == "against keeping, loses 192.00 USD in the expected case"
    assert not any("some case" in v for v in rows.values())


def test_a_refused_release_says_how_much_demand_it_leaves_unserved() -> None:
    # On-demand is capped at 2 GPUs: releasing the 4th reserved GPU leaves demand of the
    # expected (5) and high (7) case unserved; the high case leaves 1 GPU x 48 h more.
    pools = [TRADE_POOLS[0], {**ON_DEMAND, "max_nodes": 3}]
    proj, report = _report(fleet(pools), TRADE_LEVELS)
    [advice] = proj.commitments
    down = next(x for x in advice.trade_offs() if x.nodes == advice.recommended_nodes - 1)
    assert down.refused and down.unserved_added[down.deciding_band] == pytest.approx(48.0)
    headline = next(x for x in _summary(report) if x.startswith("H100-80GB:"))
    assert "is refused: it leaves 48 more GPU-h unserved" in headline
    rows = {r["nodes"]: r["verdict"] for r in _table(report, "commitment_options").rows}
    assert rows[advice.recommended_nodes - 1].startswith("refused: leaves 48 more GPU-h unserved")


def test_idle_reserved_capacity_above_the_threshold_heads_the_report() -> None:
    # 10 reserved GPUs at 1.5, expected demand 4: 6 idle GPUs x 48 h = 288 GPU-h (60%),
    # costing 288 x 1.5 = 432.00.
    pools = [{"name": "res", "tier": "reserved", "price_per_gpu_hour": 1.5, "min_nodes": 10}]
    pools.append(ON_DEMAND)
    proj, report = _report(fleet(pools), {0.1: 2.0, 0.5: 4.0, 0.9: 6.0})
    [idle] = proj.reserved_idle
    assert idle.idle_gpu_hours == pytest.approx(288.0) and idle.share == pytest.approx(0.6)
    assert idle.idle_cost == pytest.approx(432.0)
    [item] = [x for x in _summary(report) if "idle" in x]
    assert "res" in item and "60% idle" in item and "288 of 480" in item
    assert "432.00 USD" in item
    assert report.figure("idle_reserved_cost").value == pytest.approx(432.0)
    assert report.figure("idle_reserved_gpu_hours").unit == "GPU-h"
    # 20% idle (8 of 10 busy) stays out of the headline.
    _, busy = _report(fleet(pools), {0.1: 8.0, 0.5: 8.0, 0.9: 8.0})
    assert not any("idle" in x for x in _summary(busy))


# ---------------------------------------------------------------- the solver and shortfalls


def _plan(config: Config, levels: dict[float, Any], monkeypatch: Any, timeout: bool) -> Any:
    from scaler.planning import solver
    from tests.planning_inputs import plan_for

    if timeout:
        # What SciPy's HiGHS gives on a time limit: no schedule.
        monkeypatch.setattr(solver, "_run_milp", lambda program: None)
    forecasts = {"rps": fake_forecast(levels, hours=HOURS)}
    inventory = {p.name: p.min_nodes for p in config.pools}
    return plan_for(config, forecasts, inventory, START)


def test_a_capped_plan_says_it_is_short_beside_its_unserved_figure(monkeypatch: Any) -> None:
    # On-demand capped at 3 GPUs against demand of 5 to 7: the plan is short all along.
    config = fleet([{**ON_DEMAND, "max_nodes": 3}])
    plan = _plan(config, TRADE_LEVELS, monkeypatch, timeout=False)
    assert plan.risk["shortfall"]
    _, report = _report(config, TRADE_LEVELS, plan)
    short = report.figure("plan_short_gpu_hours")
    assert short.value > 0 and short.label == "Demand the plan leaves short (q0.9)"
    # A plan that leaves its need short never reads as leaving nothing unserved.
    assert plan.risk["expected_unserved_gpu_hours"] > 0
    [item] = [x for x in _summary(report) if "short" in x and "the plan leaves" in x]
    assert item.startswith("H100-80GB: the plan leaves") and "bound: max_nodes" in item


def test_a_plan_short_of_its_need_never_reports_nothing_unserved() -> None:
    import dataclasses

    from tests.planning_inputs import plan_for

    # The forecast's q0.9 (3 GPUs) fits the 3 on-demand GPUs, but the newest observation
    # (6, plus its margin) puts the plan's need at 7: the plan is 4 GPUs short near term.
    # Integrating the forecast alone gave "0.00 GPU-h unserved" beside that shortfall.
    config = fleet([{**ON_DEMAND, "max_nodes": 3}])
    fc = fake_forecast({0.1: 1.0, 0.5: 2.0, 0.9: 3.0}, hours=HOURS)
    fc = dataclasses.replace(fc, last_value=6.0, recent_max=6.0)
    plan = plan_for(config, {"rps": fc}, {"od": 0}, START)
    [short] = plan.risk["shortfall"]
    assert short["max_gpus_short"] == pytest.approx(4.0)
    assert plan.risk["expected_unserved_gpu_hours"] > 0
    _, report = _report(config, {0.1: 1.0, 0.5: 2.0, 0.9: 3.0}, plan)
    figures = {f.key: f.value for f in report.figures}
    assert figures["plan_short_gpu_hours"] >= plan.risk["expected_unserved_gpu_hours"] > 0


def test_a_solver_that_times_out_is_named_in_the_headline_and_figures(
    monkeypatch: Any,
) -> None:
    config = fleet([ON_DEMAND])
    plan = _plan(config, TRADE_LEVELS, monkeypatch, timeout=True)
    assert plan.risk["solver"] == "greedy"
    _, report = _report(config, TRADE_LEVELS, plan)
    assert report.figure("solver_fallback_models").value == 1
    assert any("greedy allocator planned it" in x for x in _summary(report))
    assert any("planned with the greedy fallback" in n for n in map(str, plan.notes))
    # Without a fallback there is no such figure and no such item.
    monkeypatch.undo()
    plan = _plan(config, TRADE_LEVELS, monkeypatch, timeout=False)
    _, report = _report(config, TRADE_LEVELS, plan)
    assert "solver_fallback_models" not in {f.key for f in report.figures}
    assert not any("greedy" in x for x in _summary(report))
    assert report.figure("plan_short_gpu_hours").value == 0


# ---------------------------------------------------------------- the currency


def _money_columns(report: Report) -> list[str]:
    money = ("cost", "price", "saving", "delta_low", "delta_expected", "delta_high")
    return [
        c.label
        for s in report.sections
        for tb in s.tables
        for c in tb.columns
        if any(m in c.key for m in money) and c.digits is not None and not c.percent
    ]


def test_every_money_column_and_figure_names_the_currency() -> None:
    config = fleet(TRADE_POOLS)
    assert config.finance.currency == "USD"
    _, report = _report(config, TRADE_LEVELS)
    labels = _money_columns(report)
    assert len(labels) >= 10 and all(x.endswith(", USD") for x in labels), labels
    money_figures = [f for f in report.figures if "cost" in f.key or "saving" in f.key]
    assert money_figures and all(f.unit == "USD" for f in money_figures)
    intro = next(s for s in report.sections if s.key == "projection").paragraphs
    assert any("Costs are in USD" in p for p in intro)
    # The Russian report names it the same way.
    _, ru = _report(config, TRADE_LEVELS, lang="ru")
    assert all(x.endswith(", USD") for x in _money_columns(ru))


@pytest.mark.slow
def test_the_review_of_a_capped_fallback_plan_heads_with_both(monkeypatch: Any) -> None:
    from scaler.reports.capacity import build_capacity_report

    config = fleet([{**ON_DEMAND, "max_nodes": 3}])
    plan = _plan(config, TRADE_LEVELS, monkeypatch, timeout=True)
    index = pd.date_range(START - pd.Timedelta(days=2), START, freq="5min", inclusive="left")
    history = {"rps": pd.Series(5.0, index=index, name="rps")}
    forecasts = {"rps": fake_forecast(TRADE_LEVELS, hours=HOURS)}
    review = build_capacity_report(
        config, history, plan, forecasts, "test fleet", backtest_origins=0
    )
    items = next(s for s in review.sections if s.key == "summary").items
    links = {link for text, link in items if "the plan leaves" in text or "greedy" in text}
    assert links == {"capacity", "notes"}
    assert items[0][1] in ("capacity", "notes")  # ranked first
    assert review.figure("plan_short_gpu_hours").value > 0
    assert review.figure("solver_fallback_models").value == 1
    assert review.figure("expected_unserved_gpu_hours").value > 0
    # Money in the review names its currency too.
    assert review.figure("cost_per_hour_current").unit == "USD/h"
    assert review.figure("cost_horizon_total").unit == "USD"
    labels = _money_columns(review)
    labels += [c.label for c in _table(review, "cost_daily").columns if c.key != "period"]
    assert len(labels) >= 4 and all(x.endswith(", USD") for x in labels), labels
