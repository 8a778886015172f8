"""What heads each report: the recommendations that matter, ranked, each linking to the
section that explains it.

A recommendation is ``(rank, text, section key)``; lower ranks come first and at most
:data:`SUMMARY_MAX` are shown. Ranks: 0 demand that will go unserved, 1 a commitment
to change, 2 a forecast that lost to a baseline, a scenario's cost or a review
period with demand left unserved, 3 a pool at its limit or a commitment to keep,
4 a review period without shortfall.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from forecaster.estimators import quantile_column
from scaler.config import Fleet, PolicyConfig, PoolConfig
from scaler.planning.cost_and_risk import need_shortfall
from scaler.plans import CapacityPlan
from scaler.reports.commitments import commitment_recommendations, reserved_idle_recommendations
from scaler.reports.document import KeyFigure, Section, frame_rows
from scaler.reports.finance import CommitmentAdvice, FinanceProjection, ReservedIdle
from scaler.reports.hindsight import hindsight_recommendation
from scaler.reports.i18n import fmt_number, t, translate_bound
from scaler.reports.reviewing import Hindsight
from scaler.wording import NOTE_SOLVER_FALLBACK, Reason

Recommendation = tuple[int, str, str]
"""(rank, text, key of the section that explains it)."""

SUMMARY_MAX = 5
"""At most this many recommendations head a report."""


def summary_section(items: Sequence[Recommendation], lang: str) -> Section:
    """The recommendations that matter, most important first (lower rank first), each linking
    to the section that explains it."""
    ranked = [(text, link) for _, text, link in sorted(items, key=lambda x: x[0])]
    sec = Section("summary", t(lang, "sec_summary"), items=ranked[:SUMMARY_MAX])
    if not ranked:
        sec.paragraphs.append(t(lang, "summary_nothing"))
    return sec


def _bound_pools(
    pools: Sequence[PoolConfig], plan: CapacityPlan, lang: str
) -> list[Recommendation]:
    """Pools the plan holds at ``max_nodes`` (off commitment) or that name it as binding."""
    limits = {p.name: p for p in pools}
    out = []
    for pp in plan.pools:
        p = limits.get(pp.pool)
        if p is None or not pp.target_nodes:
            continue
        peak = max(pp.target_nodes)
        unserved = "max_nodes" in pp.binding
        if unserved or (p.tier != "reserved" and peak >= p.max_nodes > 0):
            when = plan.timeline[pp.target_nodes.index(peak)][11:16] + "Z"
            key = "summary_max_nodes_short" if unserved else "summary_max_nodes"
            out.append(
                (
                    0 if unserved else 3,
                    t(lang, key, pool=pp.pool, max=p.max_nodes, at=when),
                    "capacity",
                )
            )
    return out


FALLBACK_NOTE = "planned with the greedy fallback"
"""The words of the planner's note for a GPU model the optimizer gave no schedule for, in
plans written before notes were values (now :data:`scaler.wording.NOTE_SOLVER_FALLBACK`)."""


def solver_fallbacks(plan: CapacityPlan) -> list[str]:
    """GPU models the plan's optimizer gave up on (a time limit, a failure), planned by the
    greedy fallback instead (:func:`scaler.planning.solver.solve`)."""
    out = []
    for note in plan.notes:
        if isinstance(note, Reason):
            model = str(note.params.get("model", ""))
            if note.code == NOTE_SOLVER_FALLBACK and model not in out:
                out.append(model)
            continue
        model, sep, rest = note.partition(": ")
        if sep and FALLBACK_NOTE in rest and model not in out:
            out.append(model)
    return out


def plan_shortfalls(fleet: Fleet, policy: PolicyConfig, plan: CapacityPlan) -> dict[str, float]:
    """GPU-hours of the plan's need (the policy quantile with its margin) the plan leaves short,
    per GPU model."""
    return need_shortfall(
        fleet,
        policy,
        {p.pool: p.target_nodes for p in plan.pools},
        plan.demand_gpus,
        plan.step_s,
    )


def plan_recommendations(
    fleet: Fleet,
    policy: PolicyConfig,
    plan: CapacityPlan,
    lang: str,
    link: str = "capacity",
    fallback_link: str = "notes",
) -> list[Recommendation]:
    """What the figures rest on, first: demand the plan leaves short (when, how much, what
    binds; linking to ``link``) and GPU models planned by the greedy fallback rather than the
    optimizer (linking to ``fallback_link``: the review's notes, where the planner says so)."""
    out: list[Recommendation] = []
    short = plan_shortfalls(fleet, policy, plan)
    records = {str(r.get("gpu_model")): r for r in plan.risk.get("shortfall", []) or []}
    q = quantile_column(plan.quantile)
    for model in sorted(set(short) | set(records)):
        r = records.get(model, {})
        first = str(r.get("first_at", ""))
        out.append(
            (
                0,
                t(
                    lang,
                    "summary_plan_short",
                    model=model,
                    q=q,
                    gpu_hours=fmt_number(short.get(model, 0.0), lang, 1),
                    gpus=fmt_number(float(r.get("max_gpus_short", 0.0)), lang, 1),
                    at=first[11:16] + "Z" if first else "–",
                    because=", ".join(
                        translate_bound(str(b), lang) for b in r.get("because", []) or []
                    )
                    or "–",
                ),
                link,
            )
        )
    for model in solver_fallbacks(plan):
        out.append((0, t(lang, "summary_solver_fallback", model=model), fallback_link))
    return out


def plan_figures(
    fleet: Fleet, policy: PolicyConfig, plan: CapacityPlan, lang: str
) -> list[KeyFigure]:
    """What the plan's figures rest on: the GPU-hours of its need it leaves short, and (when
    any) the GPU models the greedy fallback planned instead of the optimizer."""
    figures = [
        KeyFigure(
            "plan_short_gpu_hours",
            t(lang, "fig_plan_short", q=quantile_column(plan.quantile)),
            round(sum(plan_shortfalls(fleet, policy, plan).values()), 2),
            t(lang, "unit_gpu_hours"),
        )
    ]
    fallbacks = solver_fallbacks(plan)
    if fallbacks:
        figures.append(
            KeyFigure(
                "solver_fallback_models", t(lang, "fig_solver_fallback"), len(fallbacks), "", 0
            )
        )
    return figures


def _lost_to_baseline(rows: Sequence[Mapping[str, Any]], lang: str) -> list[Recommendation]:
    """Signals whose forecast in use scored a worse MASE than a seasonal-naive baseline."""
    out = []
    by_signal: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_signal.setdefault(str(r["signal"]), []).append(r)
    for name, rs in by_signal.items():
        used = [r for r in rs if r.get("chosen") and r.get("mase") is not None]
        base = [
            r
            for r in rs
            if not r.get("chosen") and r.get("mase") is not None and math.isfinite(r["mase"])
        ]
        if not used or not base or not math.isfinite(used[0]["mase"]):
            continue
        best = min(base, key=lambda r: r["mase"])
        if used[0]["mase"] > best["mase"]:
            out.append(
                (
                    2,
                    t(
                        lang,
                        "summary_lost_to_baseline",
                        signal=name,
                        mase=fmt_number(used[0]["mase"], lang, 3),
                        baseline=best["estimator"],
                        base_mase=fmt_number(best["mase"], lang, 3),
                    ),
                    "accuracy",
                )
            )
    return out


def capacity_recommendations(
    fleet: Fleet,
    policy: PolicyConfig,
    currency: str,
    plan: CapacityPlan,
    advice: Sequence[CommitmentAdvice],
    accuracy: Sequence[Mapping[str, Any]],
    hindsight: Hindsight,
    lang: str,
    reserved_idle: Sequence[ReservedIdle] = (),
) -> list[Recommendation]:
    """The capacity review's: a plan that falls short or fell back, pools at their limit,
    commitments and idle reserved capacity, forecasts that lost to a baseline, and what the
    review period cost."""
    return [
        *plan_recommendations(fleet, policy, plan, lang),
        *_bound_pools(fleet.pools, plan, lang),
        *commitment_recommendations(advice, lang, currency),
        *reserved_idle_recommendations(reserved_idle, currency, lang),
        *_lost_to_baseline(accuracy, lang),
        *hindsight_recommendation(hindsight, currency, lang),
    ]


def finance_recommendations(
    projection: FinanceProjection,
    lang: str,
    currency: str = "",
    plan_items: Sequence[Recommendation] = (),
) -> list[Recommendation]:
    """The finance dry-run's: the plan's shortfall or fallback (``plan_items``, from
    :func:`plan_recommendations`), commitments and idle reserved capacity, what each scenario
    adds, and demand the high band leaves unserved."""
    return [
        *plan_items,
        *commitment_recommendations(projection.commitments, lang, currency),
        *reserved_idle_recommendations(projection.reserved_idle, currency, lang),
        *_scenario_costs(projection, lang),
        *_finance_shortfall(projection, lang),
    ]


def _scenario_costs(projection: FinanceProjection, lang: str) -> list[Recommendation]:
    """Each scenario's cost against the baseline in the high and the expected band."""
    base = projection.baseline
    ref = base.total_cost("high")
    base_exp = base.total_cost("expected")
    out = []
    for sp in projection.scenarios[1:]:
        if not ref:
            continue
        delta = sp.total_cost("high") - ref
        text = t(
            lang,
            "summary_scenario",
            scenario=sp.scenario.name,
            high=fmt_number(100 * delta / ref, lang, 1),
            expected=fmt_number(
                100 * (sp.total_cost("expected") / base_exp - 1) if base_exp else 0.0, lang, 1
            ),
        )
        out.append((2, text, "scenarios"))
    return out


def _finance_shortfall(projection: FinanceProjection, lang: str) -> list[Recommendation]:
    """GPU models whose high band leaves more than half a GPU-hour unserved."""
    demand = projection.baseline.demand
    out = []
    for r in frame_rows(demand[demand["band"] == "high"]):
        if r["short_gpu_hours"] > 0.5:
            text = t(
                lang,
                "summary_finance_short",
                model=r["gpu_model"],
                short=fmt_number(r["short_gpu_hours"], lang, 0),
            )
            out.append((0, text, "projection"))
    return out
