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

from scaler.config import Config
from scaler.plans import CapacityPlan
from scaler.reports.commitments import commitment_recommendations
from scaler.reports.document import Section, frame_rows
from scaler.reports.finance import CommitmentAdvice, FinanceProjection
from scaler.reports.hindsight import hindsight_recommendation
from scaler.reports.i18n import fmt_number, t
from scaler.reports.reviewing import Hindsight

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


def _bound_pools(config: Config, plan: CapacityPlan, lang: str) -> list[Recommendation]:
    """Pools the plan holds at ``max_nodes`` (off commitment) or that name it as binding."""
    limits = {p.name: p for p in config.pools}
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
    config: Config,
    plan: CapacityPlan,
    advice: Sequence[CommitmentAdvice],
    accuracy: Sequence[Mapping[str, Any]],
    hindsight: Hindsight,
    lang: str,
) -> list[Recommendation]:
    """The capacity review's: pools at their limit, commitments, forecasts that lost to a
    baseline, and what the review period cost."""
    return [
        *_bound_pools(config, plan, lang),
        *commitment_recommendations(advice, lang),
        *_lost_to_baseline(accuracy, lang),
        *hindsight_recommendation(hindsight, config.finance.currency, lang),
    ]


def finance_recommendations(projection: FinanceProjection, lang: str) -> list[Recommendation]:
    """The finance dry-run's: commitments, what each scenario adds, and demand the high band
    leaves unserved."""
    return [
        *commitment_recommendations(projection.commitments, lang),
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
