"""How the totals of the capacity review and the finance dry-run relate, in one table.

The two reports show several totals for one fleet over one horizon, each with its own
label: the workload table's planned cost, the plan's cost over the horizon, the finance
projection's high and expected cases, and the expected cost of the advised commitment
options. :func:`reconcile` puts them in one chain, each total followed by the
differences that lead to the next, every one computed from the same plan and projection
(never typed in), so that each total is the previous one plus the differences between:

1. **workloads**: the served workloads' GPU-hours at the plan's quantile, priced at the
   plan's price per GPU-hour of their GPU model (:mod:`scaler.reports.workload_costs`);
   per GPU model, the plan buys more (whole nodes, spot spares, near-term margins),
   or a model no workload is served on;
2. **plan**: every pool's planned nodes at the policy quantile on the plan's step (what
   the cycle would buy, lead times and stabilization included); per pool, the projection
   instead fills the hourly peak of the high band with the planner's allocation, reserved
   pools held at their commitment, billing periods applied;
3. **high**: the finance projection's high case; per pool, demand at the median instead
   of the high quantile;
4. **expected**: the finance projection's expected case; the GPU models the commitment
   advice does not cover are left out (with the projection's reason), and per advised GPU
   model the advised option's expected cost replaces its pools' baseline cost (a changed
   commitment; options are priced by the hour, without billing periods);
5. **commitments**: the advised options' expected cost.

A total that a report cannot compute (no served workload, no commitment advice) is left
out with its differences, and the chain joins the totals either side of it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forecaster.estimators import quantile_column
from scaler.catalog.gpus import gpu_model
from scaler.plans import CapacityPlan
from scaler.reports.document import Column, Section, Table, money_label
from scaler.reports.finance import FinanceProjection, Note
from scaler.reports.i18n import fmt_number, render_note, t
from scaler.reports.workload_costs import WorkloadCosts

TOTALS: tuple[str, ...] = ("workloads", "plan", "high", "expected", "commitments")
"""The totals in the order of the chain."""
_TINY = 0.005
"""A difference under half a cent is not a row."""


@dataclass(frozen=True)
class Step:
    """A difference from one total towards the next: ``amount`` is added."""

    code: str
    """Why, as the i18n key ``rec_step_<code>``."""
    params: Mapping[str, Any]
    amount: float


@dataclass(frozen=True)
class Total:
    """One total of a report and the differences from it to the next total of the chain."""

    key: str
    """One of :data:`TOTALS`."""
    value: float
    params: Mapping[str, Any] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)


@dataclass(frozen=True)
class Reconciliation:
    totals: list[Total]

    def gaps(self) -> list[tuple[float, float]]:
        """Per pair of neighbouring totals: (next minus this, the sum of the differences)."""
        return [
            (b.value - a.value, math.fsum(s.amount for s in a.steps))
            for a, b in zip(self.totals, self.totals[1:], strict=False)
        ]


def _plan_pool_costs(plan: CapacityPlan) -> dict[str, tuple[float, float]]:
    """Pool -> (GPU-hours, cost) of the plan's targets over the horizon."""
    step_h = plan.step_s / 3600.0
    out = {}
    for p in plan.pools:
        gpu_h = float(np.sum(p.target_nodes)) * p.gpus_per_node * step_h
        out[p.pool] = (gpu_h, gpu_h * p.price_per_gpu_hour)
    return out


def _projection_pool_costs(
    projection: FinanceProjection, band: str
) -> dict[str, tuple[float, float]]:
    """Pool -> (GPU-hours, cost) of the baseline projection in ``band``."""
    frame = projection.baseline.monthly_pools
    if frame.empty:
        return {}
    sums = frame[frame["band"] == band].groupby("pool", sort=False)[["gpu_hours", "cost"]].sum()
    return {str(k): (float(r["gpu_hours"]), float(r["cost"])) for k, r in sums.iterrows()}


def _workload_total(plan: CapacityPlan, costs: WorkloadCosts) -> Total:
    """The workload table's total, and per GPU model what the plan buys beyond it."""
    known = [c for c in costs.rows if c.missing is None and math.isfinite(c.planned_cost)]
    by_model: dict[str, tuple[float, float]] = {}
    for pool, (gpu_h, cost) in _plan_pool_costs(plan).items():
        model = gpu_model(next(p.gpu_model for p in plan.pools if p.pool == pool)).name
        h, c = by_model.get(model, (0.0, 0.0))
        by_model[model] = (h + gpu_h, c + cost)
    steps = []
    for model, (gpu_h, cost) in by_model.items():
        mine = [c for c in known if gpu_model(c.gpu_model).name == model]
        served_h = math.fsum(c.planned_gpu_hours for c in mine)
        amount = cost - math.fsum(c.planned_cost for c in mine)
        if abs(amount) >= _TINY:
            code = "beyond_workloads" if mine else "no_workload"
            params = {"model": model, "gpu_hours": gpu_h - served_h, "price": cost / gpu_h}
            steps.append(Step(code, params, amount))
    return Total("workloads", math.fsum(c.planned_cost for c in known), {}, steps)


def _plan_total(plan: CapacityPlan, projection: FinanceProjection) -> Total:
    """The plan's cost, and per pool what the projection's high case does instead."""
    planned = _plan_pool_costs(plan)
    high = _projection_pool_costs(projection, "high")
    tiers = {p.pool: p.tier for p in plan.pools}
    steps = []
    for pool in dict.fromkeys([*planned, *high]):
        plan_h, plan_c = planned.get(pool, (0.0, 0.0))
        proj_h, proj_c = high.get(pool, (0.0, 0.0))
        if abs(proj_c - plan_c) >= _TINY:
            params = {"pool": pool, "tier": tiers.get(pool, ""), "plan_h": plan_h, "proj_h": proj_h}
            steps.append(Step("projection", params, proj_c - plan_c))
    total = math.fsum(c for _, c in planned.values())
    params = {"step_min": plan.step_s / 60, "hours": plan.horizon_s / 3600}
    return Total("plan", total, params, steps)


def _high_total(projection: FinanceProjection) -> Total:
    """The high case, and per pool what demand at the median changes."""
    high = _projection_pool_costs(projection, "high")
    expected = _projection_pool_costs(projection, "expected")
    frame = projection.baseline.monthly_pools
    tiers = dict(zip(frame.get("pool", []), frame.get("tier", []), strict=False))
    steps = []
    for pool in dict.fromkeys([*high, *expected]):
        hi_h, hi_c = high.get(pool, (0.0, 0.0))
        ex_h, ex_c = expected.get(pool, (0.0, 0.0))
        if abs(ex_c - hi_c) >= _TINY:
            params = {"pool": pool, "tier": tiers.get(pool, ""), "high_h": hi_h, "expected_h": ex_h}
            steps.append(Step("band", params, ex_c - hi_c))
    return Total("high", projection.baseline.total_cost("high"), {}, steps)


def _expected_total(projection: FinanceProjection) -> Total:
    """The expected case, and what separates it from the advised options' expected cost."""
    expected = _projection_pool_costs(projection, "expected")
    frame = projection.baseline.monthly_pools
    models = dict(zip(frame.get("pool", []), frame.get("gpu_model", []), strict=False))
    advised = {c.gpu_model: c for c in projection.commitments}
    why = {n.params.get("model"): n for n in projection.notes if "model" in n.params}
    steps = []
    for model in dict.fromkeys(models.values()):
        pools = [p for p, m in models.items() if m == model]
        cost = math.fsum(expected.get(p, (0.0, 0.0))[1] for p in pools)
        advice = advised.get(model)
        option = advice.recommended_option() if advice is not None else None
        if advice is None or option is None:
            note = why.get(model, Note("no_advice", {"model": model}))
            params = {"model": model, "pools": ", ".join(pools), "note": note}
            steps.append(Step("not_advised", params, -cost))
            continue
        params = {
            "model": model,
            "nodes": option.nodes,
            "current": advice.current_nodes,
            "term": option.term,
        }
        steps.append(Step("advised", params, option.cost["expected"] - cost))
    return Total("expected", projection.baseline.total_cost("expected"), {}, steps)


def reconcile(
    plan: CapacityPlan,
    projection: FinanceProjection | None,
    costs: WorkloadCosts | None,
) -> Reconciliation:
    """The chain of totals (module docstring) of one plan and its projection; the workload
    total only with ``costs``, the projection's only with ``projection``."""
    totals: list[Total] = []
    if costs is not None and any(c.missing is None for c in costs.rows):
        totals.append(_workload_total(plan, costs))
    if projection is None:
        plan_only = _plan_pool_costs(plan)
        return Reconciliation([*totals, Total("plan", math.fsum(c for _, c in plan_only.values()))])
    totals += [_plan_total(plan, projection), _high_total(projection)]
    advised = [c.recommended_option() for c in projection.commitments]
    options = [o for o in advised if o is not None]
    expected = _expected_total(projection)
    if not options:
        return Reconciliation([*totals, Total("expected", expected.value)])
    models = ", ".join(c.gpu_model for c in projection.commitments)
    last = Total("commitments", math.fsum(o.cost["expected"] for o in options), {"models": models})
    return Reconciliation([*totals, expected, last])


# ---------------------------------------------------------------- the section


def _total_text(
    x: Total, plan: CapacityPlan, projection: FinanceProjection | None, lang: str
) -> tuple[str, str]:
    """(name, what it counts) of a total in ``lang``."""
    high = quantile_column(projection.bands.high) if projection is not None else ""
    params = {
        "q": quantile_column(plan.quantile),
        "high": high,
        "step": fmt_number(plan.step_s / 60, lang, 0),
        "hours": fmt_number(plan.horizon_s / 3600, lang, 0),
        "models": x.params.get("models", ""),
    }
    return t(lang, "rec_total_" + x.key, **params), t(lang, "rec_counts_" + x.key, **params)


def _step_text(s: Step, plan: CapacityPlan, projection: FinanceProjection | None, lang: str) -> str:
    """Why a difference is there, in ``lang``, with its numbers."""
    p = dict(s.params)
    if s.code == "not_advised":
        note: Note = p.pop("note")
        p["why"] = render_note(note.key, dict(note.params), lang)
    for k in ("gpu_hours", "plan_h", "proj_h", "high_h", "expected_h"):
        if k in p:
            p[k] = fmt_number(float(p[k]), lang, 0)
    if "price" in p:
        p["price"] = fmt_number(float(p["price"]), lang, 2)
    if "tier" in p:
        p["tier"] = t(lang, "tier_" + p["tier"]) if p["tier"] else "–"
    if "term" in p:
        p["term"] = t(lang, "term_" + p["term"]) if p["term"] else ""
    p["q"] = quantile_column(plan.quantile)
    p["high"] = quantile_column(projection.bands.high) if projection is not None else ""
    p["step"] = fmt_number(plan.step_s / 60, lang, 0)
    return t(lang, "rec_step_" + s.code, **p)


def reconciliation_rows(
    rec: Reconciliation, plan: CapacityPlan, projection: FinanceProjection | None, lang: str
) -> list[dict[str, Any]]:
    """A row per total (its value) and per difference (its amount), in the chain's order;
    ``kind`` says which, ``total`` names the total a row belongs to."""
    rows: list[dict[str, Any]] = []
    for i, x in enumerate(rec.totals):
        name, counts = _total_text(x, plan, projection, lang)
        rows.append(
            {"kind": "total", "total": x.key, "name": name, "value": x.value, "why": counts}
        )
        if i + 1 < len(rec.totals):
            rows += [
                {
                    "kind": "step",
                    "total": x.key,
                    "name": "",
                    "difference": s.amount,
                    "why": _step_text(s, plan, projection, lang),
                }
                for s in x.steps
            ]
    return rows


def reconciliation_section(
    plan: CapacityPlan,
    projection: FinanceProjection | None,
    costs: WorkloadCosts | None,
    currency: str,
    lang: str,
) -> Section | None:
    """The section both reports show: every total, what it counts, and the differences from
    each to the next with their reasons; None with fewer than two totals."""
    rec = reconcile(plan, projection, costs)
    if len(rec.totals) < 2:
        return None
    sec = Section("reconciliation", t(lang, "sec_reconcile"), [t(lang, "sec_reconcile_intro")])
    sec.tables.append(
        Table(
            "reconciliation",
            t(lang, "tbl_reconcile"),
            [
                Column("name", t(lang, "col_rec_total")),
                Column("value", money_label(t(lang, "col_rec_value"), currency), 2),
                Column("difference", money_label(t(lang, "col_rec_difference"), currency), 2),
                Column("why", t(lang, "col_rec_why")),
            ],
            reconciliation_rows(rec, plan, projection, lang),
        )
    )
    return sec
