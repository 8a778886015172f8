"""The reasons of a tier plan: its notes, and each pool's decision with its reason.

Every note and reason :func:`scaler.planning.tiers.plan_capacity` gives is built here,
as a :class:`scaler.wording.Reason` (a code, its parameters and the evidence in the plan
it refers to); the words are in :mod:`scaler.wording`'s tables, one per language. A
signal's learnt margin is evidence stated once, in ``risk.margins.<signal>``: a pool's
reason names its signals and refers to it, never repeats it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from forecaster.suspect import Suspicion
from scaler import wording as w
from scaler.catalog.gpus import gpu_model
from scaler.config import PoolConfig, WorkloadConfig
from scaler.planning.need import PoolLevels
from scaler.plans import Decision
from scaler.wording import Reason


def hhmm(ts: pd.Timestamp) -> str:
    return w.hhmm(ts)


def held_notes(held: Mapping[str, Sequence[Reason]]) -> list[Reason]:
    """One note per cause of each GPU model held on stale, missing, suspect or implausible
    data: the cause's code is the note's ``why``, rendered with its parameters."""
    return [
        Reason(
            w.NOTE_HELD,
            {**cause.params, "model": key, "why": cause.code},
            (f"risk.held_models.{key}", *cause.refs),
        )
        for key, causes in sorted(held.items())
        for cause in causes
    ]


def suspicion_reason(signal: str, found: Suspicion) -> Reason:
    """What :mod:`forecaster.suspect` found in ``signal``, as a reason of its code (a
    sentence where the rule gave none)."""
    if found.code in w.CODES:
        return Reason(found.code, {**found.params, "signal": signal})
    return w.legacy(f"signal {signal!r}: {found.why}")


def suspicion_reasons(
    found: Mapping[str, Sequence[Suspicion]],
) -> tuple[dict[str, list[Reason]], list[Reason]]:
    """Per signal whose newest data is suspect, why (its pools hold); and the notes for
    suspect samples that hold nothing (an old spike, treated as missing)."""
    held: dict[str, list[Reason]] = {}
    notes: list[Reason] = []
    for signal, suspicions in found.items():
        for s in suspicions:
            if s.hold:
                held.setdefault(signal, []).append(suspicion_reason(signal, s))
            else:
                notes.append(suspicion_reason(signal, s))
    return held, notes


def inventory_notes(
    pools: Iterable[PoolConfig],
    inventory: Mapping[str, int],
    current: Mapping[str, int],
    max_step: int,
) -> list[Reason]:
    """A note per pool found outside its min/max nodes, and what is planned from."""
    notes: list[Reason] = []
    for p in pools:
        raw = int(inventory.get(p.name, p.min_nodes))
        if raw > p.max_nodes:
            notes.append(
                Reason(
                    w.NOTE_ABOVE_MAX,
                    {
                        "pool": p.name,
                        "nodes_now": raw,
                        "max_nodes": p.max_nodes,
                        "max_step": max_step,
                    },
                )
            )
        elif raw != current[p.name]:
            notes.append(
                Reason(
                    w.NOTE_BELOW_MIN,
                    {
                        "pool": p.name,
                        "nodes_now": raw,
                        "min_nodes": p.min_nodes,
                        "planned": current[p.name],
                    },
                )
            )
    return notes


def budget_note(model: str, budget_per_hour: float, least: float) -> Reason:
    """The note for a budget below what a GPU model's pools cannot shed this cycle."""
    return Reason(
        w.NOTE_BUDGET,
        {"model": model, "budget_per_hour": budget_per_hour, "least_per_hour": least},
    )


def shortfall_note(
    model: str, qname: str, first_at: pd.Timestamp, most_short: float, causes: Sequence[str]
) -> Reason:
    """The note for demand that cannot be covered from ``first_at`` on, and why."""
    return Reason(
        w.NOTE_SHORTFALL,
        {
            "model": model,
            "quantile": qname,
            "at": hhmm(first_at),
            "gpus_short": round(most_short, 4),
            "bound": tuple(causes),
        },
        ("risk.shortfall",),
    )


def model_signals(workloads: Iterable[WorkloadConfig]) -> dict[str, list[str]]:
    """Per GPU model, the signals that feed it, each once, in config order: what a pool's
    reason names (each signal's margin and its evidence are ``risk.margins.<signal>``)."""
    out: dict[str, list[str]] = {}
    for wl in workloads:
        names = out.setdefault(gpu_model(wl.gpu_model).name, [])
        if wl.signal not in names:
            names.append(wl.signal)
    return out


def decide(
    pool: PoolConfig,
    cur: int,
    target: int,
    levels: PoolLevels,
    binding: Sequence[str],
    held_why: str | None,
    signals: Sequence[str],
    max_step: int,
    stabilization_s: int,
) -> tuple[Decision, Reason]:
    """``pool``'s decision from ``cur`` to ``target`` nodes and its reason: the demand of
    ``signals`` (each one's near-term rule is ``risk.margins.<signal>``), its time and
    lead time, the cost and what binds."""
    p = pool
    model = gpu_model(p.gpu_model).name
    delta_cost = round((target - cur) * p.price_per_node_hour, 4)
    common: dict[str, object] = {"model": model, "bound": tuple(binding)}
    refs = [f"risk.margins.{s}" for s in signals]
    if binding:
        refs.append(f"risk.binding.{p.name}")
    held_refs = (f"risk.held_models.{model}",)
    lead_min = round(p.lead_time_s / 60)
    if held_why is not None and target > cur:
        return "scale-up", Reason(
            w.SCALE_UP_HELD,
            {
                **common,
                "gpus": round(levels.need_up, 4),
                "nodes": target - cur,
                "price_per_node_hour": p.price_per_node_hour,
                "cost_per_hour": delta_cost,
            },
            (*held_refs, *refs[len(signals) :]),
        )
    if target > cur:
        return "scale-up", Reason(
            w.SCALE_UP_FORECAST,
            {
                **common,
                "gpus": round(levels.need_up, 4),
                "at": hhmm(levels.needed_at),
                "signals": tuple(signals),
                "lead_min": lead_min,
                "nodes": target - cur,
                "price_per_node_hour": p.price_per_node_hour,
                "cost_per_hour": delta_cost,
            },
            tuple(refs),
        )
    if target < cur and cur > p.max_nodes:
        return "scale-down", Reason(
            w.SCALE_DOWN_MAX_NODES,
            {
                **common,
                "nodes_now": cur,
                "max_nodes": p.max_nodes,
                "max_step": max_step,
                "nodes": cur - target,
                "saves_per_hour": -delta_cost,
            },
            tuple(refs[len(signals) :]),
        )
    if target < cur:
        return "scale-down", Reason(
            w.SCALE_DOWN_DEMAND,
            {
                **common,
                "gpus": round(levels.need_keep, 4),
                "until": hhmm(levels.hold_until),
                "signals": tuple(signals),
                "lead_min": round(levels.lead_hold.total_seconds() / 60),
                "stabilization_min": round(stabilization_s / 60),
                "nodes": cur - target,
                "saves_per_hour": -delta_cost,
            },
            tuple(refs),
        )
    held = held_why is not None
    return "no-op", Reason(
        w.NO_OP_FITS,
        {
            **common,
            "nodes_now": cur,
            "gpus": round(levels.need_up, 4),
            "at": hhmm(levels.needed_at),
            "signals": tuple(signals),
            "lead_min": lead_min,
            "cost_per_hour": round(cur * p.price_per_node_hour, 4),
            "held": held,
        },
        (*refs, *(held_refs if held else ())),
    )
