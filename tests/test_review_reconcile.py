"""The totals of the capacity review and the finance dry-run add up (scaler/reports/reconcile.py).

The demo's 90-day review and finance report, built from one plan on a warm model store:
each shows the reconciliation table, its totals are the figures the reports show elsewhere
(the review's planned cost, the finance report's expected and high cases, the workload
table's total, the advised commitment option's expected cost), and the differences listed
under each total add up to the gap to the next.
"""

from __future__ import annotations

import argparse
import itertools
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from scaler.reports.document import Report, Table
from scaler.reports.reconcile import TOTALS, Reconciliation, Step, Total


def _table(report: Report, key: str) -> Table:
    return next(tb for s in report.sections for tb in s.tables if tb.key == key)


def _chain(table: Table) -> list[tuple[str, float, list[float]]]:
    """(total, value, the differences listed under it) in the table's order."""
    out: list[tuple[str, float, list[float]]] = []
    for r in table.rows:
        if r["kind"] == "total":
            out.append((r["total"], r["value"], []))
        else:
            assert r["kind"] == "step" and out and r["total"] == out[-1][0], r
            out[-1][2].append(r["difference"])
    return out


def _adds_up(chain: list[tuple[str, float, list[float]]]) -> None:
    assert [k for k, _, _ in chain] == [k for k in TOTALS if k in {k for k, _, _ in chain}]
    for (_, value, steps), (_, following, _) in itertools.pairwise(chain):
        assert value + math.fsum(steps) == pytest.approx(following, abs=0.01)
    assert chain[-1][2] == []


def _demo(horizon: str) -> tuple[Report, Report, Any]:
    from scaler.cli.plan import plan_without_acting
    from scaler.reports import finance
    from scaler.reports.capacity import build_capacity_report
    from scaler.reports.finance_report import build_finance_report

    args = argparse.Namespace(
        config=None, history=None, now=None, horizon=horizon, current_nodes=[]
    )
    config, history, _, label, result = plan_without_acting(args)
    plan = result.plan
    review = build_capacity_report(
        config, history, plan, result.forecasts, label, "en", backtest_origins=0
    )
    now = pd.Timestamp(plan.created_at).tz_localize(None)
    projection = finance.project(
        config, result.forecasts, now, pd.Timedelta(seconds=config.policy.horizon_s)
    )
    money = build_finance_report(
        projection, config, label, "en", charts=False, plan=plan, forecasts=result.forecasts
    )
    return review, money, plan


@pytest.mark.slow
def test_the_demo_review_and_finance_report_reconcile_their_totals(
    warm_demo_models: list[Path],
) -> None:
    review, money, plan = _demo("90d")
    chains = [_chain(_table(r, "reconciliation")) for r in (review, money)]
    for chain in chains:
        _adds_up(chain)
        assert [k for k, _, _ in chain] == list(TOTALS)
        totals = {k: v for k, v, _ in chain}
        # Each total is a figure the reports show elsewhere, not typed again.
        assert totals["plan"] == pytest.approx(review.figure("cost_horizon_total").value, abs=0.01)
        assert totals["plan"] == pytest.approx(plan.cost["horizon_total"], abs=0.01)
        assert totals["expected"] == pytest.approx(money.figure("cost_expected").value, abs=0.01)
        assert totals["high"] == pytest.approx(money.figure("cost_high").value, abs=0.01)
        (workload_total,) = [
            r for r in _table(money, "workload_costs").rows if r["gpu_model"] == "–"
        ]
        assert totals["workloads"] == pytest.approx(workload_total["planned_cost"])
        advised = [
            r["cost_expected"]
            for r in _table(money, "commitment_options").rows
            if r["verdict"] == "advised"
        ]
        assert advised and totals["commitments"] == pytest.approx(sum(advised), abs=0.01)
        # The totals differ (the four totals of the issue), so the differences carry weight.
        assert len({round(v) for v in totals.values()}) == len(totals)
    # One plan, one projection: both reports show the same chain.
    for (k0, v0, s0), (k1, v1, s1) in zip(*chains, strict=True):
        assert k0 == k1 and v0 == pytest.approx(v1) and s0 == pytest.approx(s1)
    # Why the A100 the summary calls idle has no commitment row, in the section it links to.
    commitments = next(s for s in review.sections if s.key == "commitments")
    assert any(p.startswith("A100-80GB has no row here") for p in commitments.paragraphs)


def test_a_chain_whose_differences_do_not_add_up_is_caught() -> None:
    # The check itself can fail: a difference left out shows as a gap.
    good = Reconciliation(
        [Total("plan", 100.0, {}, [Step("projection", {}, -10.0)]), Total("high", 90.0)]
    )
    assert all(a == pytest.approx(b) for a, b in good.gaps())
    bad = Reconciliation([Total("plan", 100.0, {}, []), Total("high", 90.0)])
    ((gap, listed),) = bad.gaps()
    assert gap == pytest.approx(-10.0) and listed == 0.0
