"""The capacity review's actions: what the plan changes, when, at what cost, and why.

Each action's reason is a value (:class:`scaler.wording.Reason`), rendered in the
reader's language from its code and parameters. A sentence read from a plan written
before reasons were values has no code: a report in another language builds a sentence
from the action's fields and keeps the planner's own words beside it.
"""

from __future__ import annotations

from forecaster.estimators import quantile_column
from scaler.plans import CapacityPlan
from scaler.reports.document import Column, Section, Table, money_label
from scaler.reports.i18n import fmt_number, t, translate_bound
from scaler.wording import LEGACY


def actions_section(plan: CapacityPlan, lang: str, currency: str = "") -> Section:
    """The plan's actions, each with the planner's reason in the reader's language."""
    sec = Section("actions", t(lang, "sec_actions"), [t(lang, "sec_actions_intro")])
    sec.tables.append(
        Table(
            "actions",
            t(lang, "tbl_actions"),
            [
                Column("pool", t(lang, "col_pool")),
                Column("decision", t(lang, "col_decision")),
                Column("nodes", t(lang, "col_nodes")),
                Column("needed_at", t(lang, "col_needed_at")),
                Column("cost_delta_per_hour", money_label(t(lang, "col_cost_delta"), currency), 2),
                Column("reason", t(lang, "col_reason")),
            ],
            [
                {
                    "pool": a.pool,
                    "decision": t(lang, "decision_" + a.decision.replace("-", "_")),
                    "nodes": f"{a.current_nodes} → {a.target_nodes}"
                    if a.kind == "nodes"
                    else _layout(str(a.details.get("layout", "")), lang),
                    "needed_at": a.needed_at,
                    "cost_delta_per_hour": a.cost_delta_per_hour,
                    "reason": _action_reason(plan, i, lang),
                }
                for i, a in enumerate(plan.actions)
            ],
        )
    )
    return sec


def _layout(name: str, lang: str) -> str:
    """A MIG layout's name; ``unchanged`` (the layouts are kept) in the reader's words."""
    return t(lang, "layout_unchanged") if name == "unchanged" else name


def actions_text_table(plan: CapacityPlan, lang: str, short: bool = False) -> str:
    """The plan's actions as the terminal prints them (``tiercast plan --lang ru``): the
    columns, decisions and reasons in ``lang``, numbers as the language writes them;
    ``short``: each typed reason in its short form (:data:`scaler.wording.SHORT`)."""
    from forecaster.tables import aligned

    rows = [
        tuple(
            t(lang, key).upper() if lang == "en" else t(lang, key)
            for key in (
                "col_pool",
                "col_decision",
                "col_nodes",
                "col_needed_at",
                "col_cost_delta",
                "col_reason",
            )
        )
    ]
    for i, a in enumerate(plan.actions):
        rows.append(
            (
                a.pool,
                t(lang, "decision_" + a.decision.replace("-", "_")),
                f"{a.current_nodes} → {a.target_nodes}"
                if a.kind == "nodes"
                else _layout(str(a.details.get("layout", "")), lang),
                a.needed_at[11:16] + "Z",
                ("+" if a.cost_delta_per_hour >= 0 else "−")
                + fmt_number(abs(a.cost_delta_per_hour), lang, 2),
                a.reason.short(lang, quantile=f"q{plan.quantile:g}")
                if short and a.reason.code != LEGACY
                else _action_reason(plan, i, lang),
            )
        )
    return "\n".join(aligned(rows))


def _action_reason(plan: CapacityPlan, index: int, lang: str) -> str:
    """The planner's reason in ``lang``, rendered from its code and parameters.

    An old plan's sentence (no code) falls back, in another language than English, to a
    sentence built from the action's fields, with the planner's own words beside it.
    """
    a = plan.actions[index]
    if lang == "en" or a.reason.code != LEGACY:
        return a.reason.text(lang)
    pool = next((p for p in plan.pools if p.pool == a.pool), None)
    lead_min = (pool.lead_time_s / 60) if pool else 0.0
    built = t(
        lang,
        "reason_" + a.decision.replace("-", "_"),
        pool=a.pool,
        current=a.current_nodes,
        target=a.target_nodes,
        amount=abs(a.amount),
        needed_at=a.needed_at[11:16] + "Z",
        lead=fmt_number(lead_min, lang, 0),
        cost=fmt_number(abs(a.cost_delta_per_hour), lang, 2),
        q=quantile_column(plan.quantile),
        bound=", ".join(translate_bound(b, lang) for b in pool.binding)
        if pool and pool.binding
        else "–",
    )
    return f"{built} ({a.reason.text('en')})"
