"""The plan's MIG actions: node targets, their config names, ``mig-layout`` actions and reasons.

Per node the ``nvidia.com/mig.config`` value of both ends and its entry in the plan's
``mig`` section; per changed node a ``relayout`` (or scheduled ``no-op``) action, per
pool one ``no-op`` for the nodes that keep their layouts, each with its reason; per node
with a relayout tiercast started and has not finished, a ``relayout`` that finishes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from scaler import wording as w
from scaler.catalog.mig import Layout, mig_parted_entry, needs_mixed_strategy
from scaler.config import PoolConfig
from scaler.planning.mig.context import MigContext
from scaler.planning.mig.layouts import LayoutSolution, capacity_of
from scaler.planning.mig.state import MigNode, MigNodeState, resolve_config_name
from scaler.planning.mig.timing import Drain, Timing
from scaler.plans import Action, iso
from scaler.wording import Reason, pairs


def node_targets(nodes: Sequence[MigNode], chosen: LayoutSolution) -> list[list[Layout]]:
    """Per node, the layout of each GPU in ``chosen`` (a GPU it leaves unused keeps its own)."""
    out: list[list[Layout]] = []
    k = 0
    for n in nodes:
        out.append(
            [
                lay if (a := chosen.assignment[k + i]) is None else a
                for i, lay in enumerate(n.current)
            ]
        )
        k += len(n.current)
    return out


def drain_of(nodes: Sequence[MigNode], chosen: LayoutSolution) -> Drain:
    """What applying ``chosen`` takes out of service: every GPU of each running node any
    of whose GPUs changes layout. A relayout cordons and drains the whole node before it
    relabels (:data:`scaler.planning.mig.state.RELAYOUT_STEPS`), and a new
    ``nvidia.com/mig.config`` label makes the GPU Operator's MIG manager stop the node's GPU
    operands (device plugin, GPU feature discovery, DCGM exporter; NVIDIA/mig-parted,
    deployments/gpu-operator/reconfigure-mig.sh), so its unchanged GPUs stop serving too.
    A node still to come is labelled on arrival and drains nothing. ``serving`` is what the
    running nodes that are not drained hold meanwhile, in their current layouts."""
    gpus = 0
    serving: list[Layout] = []
    for n, tgt in zip(nodes, node_targets(nodes, chosen), strict=True):
        if n.new:
            continue
        if any(a != b for a, b in zip(n.current, tgt, strict=True)):
            gpus += len(n.current)
        else:
            serving.extend(n.current)
    return Drain(gpus, capacity_of(serving))


@dataclass(frozen=True)
class NodeTarget:
    """One node's target layouts and the ``nvidia.com/mig.config`` names of both ends."""

    node: MigNode
    layouts: list[Layout]
    changed: int
    """GPUs whose layout changes."""
    current: str
    target: str
    in_config: bool
    """Whether the known mig-parted config has the target already."""
    entry: list[dict]
    """The target's mig-parted entry."""


def name_target(ctx: MigContext, n: MigNode, tgt: list[Layout]) -> NodeTarget:
    """Node ``n`` going to ``tgt``, its current and target layouts named."""
    model, known_configs = ctx.model, ctx.known_configs
    changed = sum(1 for a, b in zip(n.current, tgt, strict=True) if a != b)
    if changed:
        tgt_name, in_config = resolve_config_name(model, tgt, known_configs)
        cur_name = n.label or resolve_config_name(model, n.current, known_configs)[0]
    else:
        cur_name = n.label or resolve_config_name(model, n.current, known_configs)[0]
        tgt_name, in_config = cur_name, n.label is not None
    return NodeTarget(n, tgt, changed, cur_name, tgt_name, in_config, mig_parted_entry(tgt))


def node_entry(t: NodeTarget) -> dict[str, Any]:
    """The node's entry in the plan's MIG section."""
    n = t.node
    return {
        "node": n.name,
        "pool": n.pool.name,
        "new": n.new,
        "current": t.current,
        "target": t.target,
        "gpus_changed": t.changed,
        "layouts": [lay.spec() for lay in t.layouts],
        "strategy": n.strategy,
        "held": n.held,
    }


def relayout_action(
    ctx: MigContext, t: NodeTarget, need: Mapping[str, int], timing: Timing
) -> Action:
    """The ``mig-layout`` action of a node whose layouts change: now, in a later window,
    or on arrival for a node still to come."""
    n, change_s = t.node, ctx.change_s
    current_nodes = int(ctx.inventory.get(n.pool.name, n.pool.min_nodes))
    if n.new:
        # A node still booting is labelled when it joins: nothing to drain.
        decision, at, code = "no-op", ctx.now, w.MIG_RELAYOUT_ON_JOIN
    elif timing.act_now:
        decision, at, code = "relayout", ctx.now, w.MIG_RELAYOUT_NOW
    else:
        decision, at, code = "no-op", timing.window_at, w.MIG_RELAYOUT_SCHEDULED
    params: dict[str, object] = {
        "node": n.name,
        "from_layout": t.current,
        "to_layout": t.target,
        "gpus_changed": t.changed,
        "change_min": round(change_s / 60),
        "lead_min": round(ctx.lead_s / 60),
        "window": f"{timing.window_at:%H:%M}-{timing.window_end:%H:%M}Z",
        "model": ctx.model,
        "quantile": ctx.qname,
        "single": n.strategy == "single",
    }
    if timing.mode == "cover":
        params["cover"] = True
    else:
        params.update(saved_h=round(timing.saved_h, 4), drain_h=round(timing.drain_h, 4))
    if ctx.recent:
        params["recent_peak"] = ctx.recent
    # The demand per profile is the plan's mig section's, stated once per GPU model.
    reason = Reason(code, params, (f"mig.models.{ctx.model}.demand_peak_instances",))
    return Action(
        pool=n.pool.name,
        decision=decision,  # type: ignore[arg-type]
        current_nodes=current_nodes,
        target_nodes=current_nodes,
        at=iso(at),
        needed_at=iso(at + pd.Timedelta(seconds=change_s)),
        cost_delta_per_hour=0.0,
        reason=reason,
        kind="mig-layout",
        details={
            "node": n.name,
            "layout": t.target,
            "from": t.current,
            "label": {"nvidia.com/mig.config": t.target},
            "mig_parted_entry": t.entry,
            "in_mig_parted_config": t.in_config,
            "needs_mixed_strategy": needs_mixed_strategy(t.layouts),
            "gpus_changed": t.changed,
            "window_start": iso(timing.window_at),
            "window_end": iso(timing.window_end),
            "new_node": n.new,
        },
    )


def resume_action(
    pool: PoolConfig, node: MigNodeState, inventory: Mapping[str, int], now: pd.Timestamp
) -> Action:
    """The ``mig-layout`` action that finishes the relayout ``node`` records (``node.relayout``).

    A relayout outlives the run that started it (the ConfigMap refresh, the drain and the
    MIG manager can take longer than a CronJob run), and once the MIG manager reports
    ``success`` the node is at its target and no layout change would be planned: this
    action is what uncordons it, or rolls the change back on ``failed``.
    """
    r = node.relayout
    assert r is not None
    current_nodes = int(inventory.get(pool.name, pool.min_nodes))
    return Action(
        pool=pool.name,
        decision="relayout",
        current_nodes=current_nodes,
        target_nodes=current_nodes,
        at=iso(now),
        needed_at=iso(now),
        cost_delta_per_hour=0.0,
        reason=Reason(
            w.MIG_RESUME,
            {
                "node": node.name,
                "since": str(r.since),
                "from_layout": r.previous,
                "to_layout": r.target,
                "step": str(r.step),
            },
        ),
        kind="mig-layout",
        details={
            "node": node.name,
            "layout": r.target,
            "from": r.previous,
            "label": {"nvidia.com/mig.config": r.target},
            "resume": True,
            "step": r.step,
        },
    )


def keep_reason(
    timing: Timing, chosen: LayoutSolution, best: LayoutSolution, nodes: Sequence[MigNode]
) -> dict[str, object]:
    """Why the nodes that keep their layouts keep them: the parameters of their reason."""
    out: dict[str, object] = {}
    if timing.mode == "held":
        out["held_signals"] = tuple(timing.held)
    elif timing.mode == "not-worth" and timing.covered_h > 0:
        out.update(
            cover_not_worth_h=round(timing.covered_h, 4),
            drain_short_h=round(timing.drain_short_h, 4),
        )
    elif timing.mode == "not-worth":
        out.update(not_worth_h=round(timing.saved_h, 4), drain_h=round(timing.drain_h, 4))
    elif chosen.shortfall:
        out["short"], out["short_profiles"] = pairs(chosen.shortfall)
    holds = sorted({f"{n.name}: {n.held}" for n in nodes if n.held})
    if holds:
        out["held_nodes"] = tuple(holds)
    if best.blocked:
        out["blocked"] = tuple(best.blocked)
    return out


def unchanged_action(
    ctx: MigContext,
    pool: PoolConfig,
    unchanged: list[str],
    need: Mapping[str, int],
    cap: Mapping[str, int],
    keep_why: Mapping[str, object],
) -> Action:
    """The pool's ``no-op`` action for its nodes that keep their layouts."""
    p = pool
    current_nodes = int(ctx.inventory.get(p.name, p.min_nodes))
    capacity, profiles = pairs({x: cap.get(x, 0) for x in need})
    reason = Reason(
        w.MIG_KEEP,
        {
            "nodes": len(unchanged),
            "model": ctx.model,
            "quantile": ctx.qname,
            "lead_min": round(p.lead_time_s / 60),
            "capacity": capacity,
            "profiles": profiles,
            **keep_why,
            **({"recent_peak": ctx.recent} if ctx.recent else {}),
        },
        (f"mig.models.{ctx.model}.demand_peak_instances",),
    )
    return Action(
        pool=p.name,
        decision="no-op",
        current_nodes=current_nodes,
        target_nodes=current_nodes,
        at=iso(ctx.now),
        needed_at=iso(ctx.now + pd.Timedelta(seconds=p.lead_time_s)),
        cost_delta_per_hour=0.0,
        reason=reason,
        kind="mig-layout",
        details={"layout": "unchanged", "nodes": unchanged},
    )
