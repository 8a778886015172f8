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

from scaler.catalog.mig import Layout, mig_parted_entry, needs_mixed_strategy
from scaler.config import PoolConfig
from scaler.planning.mig.context import MigContext
from scaler.planning.mig.layouts import LayoutSolution
from scaler.planning.mig.state import MigNode, MigNodeState, resolve_config_name
from scaler.planning.mig.timing import Timing
from scaler.plans import Action, iso


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
    n, model, change_s = t.node, ctx.model, ctx.change_s
    window_txt = f"{timing.window_at:%H:%M}-{timing.window_end:%H:%M}Z"
    current_nodes = int(ctx.inventory.get(n.pool.name, n.pool.min_nodes))
    if n.new:
        # A node still booting is labelled when it joins: nothing to drain.
        decision, at, when = "no-op", ctx.now, "label it when the node joins (no drain)"
    elif timing.act_now:
        decision, at, when = (
            "relayout",
            ctx.now,
            f"now, in the lowest-demand window {window_txt}",
        )
    else:
        decision, at, when = (
            "no-op",
            timing.window_at,
            f"scheduled for the lowest-demand window {window_txt}",
        )
    if n.strategy == "single":
        when += " (one layout on every GPU: the node's mig.strategy is single)"
    if timing.mode == "cover":
        why = "needed before the current layouts fall short"
    else:
        why = f"saves {timing.saved_h:.1f} GPU-h against {timing.drain_h:.1f} GPU-h of drain"
    return Action(
        pool=n.pool.name,
        decision=decision,  # type: ignore[arg-type]
        current_nodes=current_nodes,
        target_nodes=current_nodes,
        at=iso(at),
        needed_at=iso(at + pd.Timedelta(seconds=change_s)),
        cost_delta_per_hour=0.0,
        reason=(
            f"{ctx.qname} MIG demand for {model} peaks at {_demand_text(need)}; node {n.name} "
            f"{t.current} -> {t.target} ({t.changed} GPU(s); drain + re-partition "
            f"{change_s / 60:.0f} min, lead time {ctx.lead_s / 60:.0f} min) {when}; {why}; "
            "spend unchanged (+0.00/h)"
        ),
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
        reason=(
            f"finish the relayout of node {node.name} started {r.since}: "
            f"{r.previous} -> {r.target}, {r.step}; spend unchanged (+0.00/h)"
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


def _demand_text(need: Mapping[str, int]) -> str:
    return ", ".join(f"{n} x {p}" for p, n in sorted(need.items())) or "no instances"


def keep_reason(
    timing: Timing, chosen: LayoutSolution, best: LayoutSolution, nodes: Sequence[MigNode]
) -> str:
    """Why the nodes that keep their layouts keep them."""
    if timing.mode == "held":
        keep_why = f"signal(s) {', '.join(timing.held)} stale or missing; holding the layouts"
    elif timing.mode == "not-worth":
        keep_why = (
            f"a relayout would save {timing.saved_h:.1f} GPU-h but cost {timing.drain_h:.1f} GPU-h "
            "of drain; keeping the current layouts"
        )
    elif chosen.shortfall:
        short = ", ".join(f"{n} x {p}" for p, n in sorted(chosen.shortfall.items()))
        keep_why = f"the pool's GPUs cannot hold it all: short {short}"
    else:
        keep_why = "the layouts cover it"
    holds = sorted({f"{n.name}: {n.held}" for n in nodes if n.held})
    if holds:
        keep_why += "; held: " + "; ".join(holds)
    if best.blocked:
        keep_why += (
            f"; {', '.join(best.blocked)} would need mig.strategy=mixed "
            "(the GPU Operator's ClusterPolicy has single): not re-partitioned"
        )
    return keep_why


def unchanged_action(
    ctx: MigContext,
    pool: PoolConfig,
    unchanged: list[str],
    need: Mapping[str, int],
    cap: Mapping[str, int],
    keep_why: str,
) -> Action:
    """The pool's ``no-op`` action for its nodes that keep their layouts."""
    p = pool
    cap_txt = ", ".join(f"{cap.get(x, 0)} x {x}" for x in sorted(need)) or "none"
    current_nodes = int(ctx.inventory.get(p.name, p.min_nodes))
    return Action(
        pool=p.name,
        decision="no-op",
        current_nodes=current_nodes,
        target_nodes=current_nodes,
        at=iso(ctx.now),
        needed_at=iso(ctx.now + pd.Timedelta(seconds=p.lead_time_s)),
        cost_delta_per_hour=0.0,
        reason=(
            f"{len(unchanged)} node(s) keep their MIG layouts: {ctx.qname} MIG "
            f"demand for {ctx.model} peaks at {_demand_text(need)}, capacity {cap_txt} "
            f"(lead time {p.lead_time_s / 60:.0f} min); {keep_why}"
        ),
        kind="mig-layout",
        details={"layout": "unchanged", "nodes": unchanged},
    )
