"""The sentences of a tier plan: its notes, and each pool's decision with its reason.

Every sentence :func:`scaler.planning.tiers.plan_capacity` writes is built here, so
that their wording (which the reports translate phrase by phrase,
:mod:`scaler.reports.i18n`) is in one place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from scaler.catalog.gpus import gpu_model
from scaler.config import PoolConfig, WorkloadConfig
from scaler.planning.margins import Margin
from scaler.planning.need import PoolLevels
from scaler.plans import Decision


def hhmm(ts: pd.Timestamp) -> str:
    return ts.strftime("%H:%MZ")


def held_notes(held: Mapping[str, str]) -> list[str]:
    """One note per GPU model held on stale or missing data."""
    return [
        f"{key}: {why}; holding current capacity (no scale-down)"
        for key, why in sorted(held.items())
    ]


def inventory_notes(
    pools: Iterable[PoolConfig],
    inventory: Mapping[str, int],
    current: Mapping[str, int],
    max_step: int,
) -> list[str]:
    """A note per pool found outside its min/max nodes, and what is planned from."""
    notes: list[str] = []
    for p in pools:
        raw = int(inventory.get(p.name, p.min_nodes))
        if raw > p.max_nodes:
            notes.append(
                f"{p.name}: {raw} node(s) now is above max_nodes ({p.max_nodes}); stepping down "
                f"by at most max_step_nodes ({max_step}) a cycle"
            )
        elif raw != current[p.name]:
            notes.append(
                f"{p.name}: {raw} node(s) now is below min_nodes ({p.min_nodes}); planning from {current[p.name]}"
            )
    return notes


def budget_note(model: str, budget_per_hour: float, least: float) -> str:
    """The note for a budget below what a GPU model's pools cannot shed this cycle."""
    return (
        f"{model}: budget {budget_per_hour:.2f}/h is below what these pools "
        f"cannot shed this cycle ({least:.2f}/h); no scale-up"
    )


def shortfall_note(
    model: str, qname: str, first_at: pd.Timestamp, most_short: float, causes: Sequence[str]
) -> str:
    """The note for demand that cannot be covered from ``first_at`` on, and why."""
    return (
        f"{model}: {qname} demand cannot be covered from {hhmm(first_at)} "
        f"(up to {most_short:.1f} GPUs short; bound: {', '.join(causes)})"
    )


def margin_notes(
    workloads: Iterable[WorkloadConfig],
    learned: Mapping[str, Margin],
    headroom: Mapping[str, float],
) -> dict[str, str]:
    """Per GPU model, the clauses naming each of its signals' margins and their evidence."""
    notes: dict[str, str] = {}
    for w in workloads:
        key = gpu_model(w.gpu_model).name
        m = learned.get(w.signal)
        clause = (
            m.describe()
            if m is not None
            else f"margin {100 * headroom[w.signal]:.1f}% for {w.signal!r} "
            "(policy.headroom_fraction: too little history to learn one)"
        )
        if clause not in notes.get(key, ""):
            notes[key] = "; ".join(x for x in (notes.get(key), clause) if x)
    return notes


def near_sources(
    workloads: Iterable[WorkloadConfig], learned: Mapping[str, Margin], qname: str
) -> dict[str, str]:
    """Per GPU model, where its near-term demand comes from, in a reason's words: the
    forecast's growth quantile, the forecast median's change, or the newest observation
    times a margin (several signals: each source once)."""
    out: dict[str, list[str]] = {}
    for w in workloads:
        m = learned.get(w.signal)
        source = m.source if m is not None else f"{qname} forecast"
        names = out.setdefault(gpu_model(w.gpu_model).name, [])
        if source not in names:
            names.append(source)
    return {k: " + ".join(v) for k, v in out.items()}


def decide(
    pool: PoolConfig,
    cur: int,
    target: int,
    levels: PoolLevels,
    binding: Sequence[str],
    held_why: str | None,
    qname: str,
    max_step: int,
    stabilization_s: int,
) -> tuple[Decision, str]:
    """``pool``'s decision from ``cur`` to ``target`` nodes and the reason that names
    the demand (``qname``: where its near-term number comes from, :func:`near_sources`),
    its time and lead time, the cost and what binds."""
    p = pool
    model = gpu_model(p.gpu_model).name
    need_up, need_keep, needed_at = levels.need_up, levels.need_keep, levels.needed_at
    lead_min = p.lead_time_s / 60
    delta_cost = (target - cur) * p.price_per_node_hour
    bound = f" (bound: {', '.join(binding)})" if binding else ""
    if held_why is not None and target > cur:
        return "scale-up", (
            f"{held_why}, forecast not used; the newest observation needs "
            f"{need_up:.1f} GPUs of {model}, above what is held; +{target - cur} node(s) at "
            f"{p.price_per_node_hour:.2f}/h each, +{delta_cost:.2f}/h{bound}"
        )
    if target > cur:
        return "scale-up", (
            f"{qname}: demand for {model} reaches {need_up:.1f} GPUs by {hhmm(needed_at)} "
            f"(lead time {lead_min:.0f} min); +{target - cur} node(s) at "
            f"{p.price_per_node_hour:.2f}/h each, +{delta_cost:.2f}/h{bound}"
        )
    if target < cur and cur > p.max_nodes:
        return "scale-down", (
            f"{cur} node(s) now is above max_nodes {p.max_nodes}; stepping down by at most "
            f"{max_step} node(s) a cycle (max_step_nodes); -{cur - target} "
            f"node(s) saves {-delta_cost:.2f}/h{bound}"
        )
    if target < cur:
        return "scale-down", (
            f"{qname}: demand for {model} stays at or under {need_keep:.1f} GPUs until "
            f"{hhmm(levels.hold_until)} "
            f"(lead time {levels.lead_hold.total_seconds() / 60:.0f} min + "
            f"{stabilization_s / 60:.0f} min "
            f"stabilization); -{cur - target} node(s) saves {-delta_cost:.2f}/h{bound}"
        )
    held = f"; {held_why}, holding" if held_why is not None else ""
    return "no-op", (
        f"{cur} node(s) fit demand for {model} of {need_up:.1f} GPUs at "
        f"{hhmm(needed_at)} ({qname}; lead time {lead_min:.0f} min){held}{bound}; "
        f"cost unchanged at {cur * p.price_per_node_hour:.2f}/h"
    )
