"""Where the tiered plan's saving against the tiered reactive rule comes from, on one series.

The tier replay scores the tiered plan against the tiered reactive rule's frontier at matched
service: every headroom and hold, with the rule's commitment, the cheapest at the plan's
service chosen with hindsight on the test period (:mod:`scaler.replay.tiers`). A loss there
can come from the forecast or from the margin alone, and the replay does not say which.
:func:`tier_gap` splits it by replaying one more run: the tiered reactive rule at the plan's
own margin (learnt on the training period) and hold (lead time + stabilization,
:func:`scaler.replay.protocol.planner_hold_s`), with the same commitment, spot depth,
spares and reclaim seed.

- **the plan against its margin's rule**: what the plan does that a reactive rule with the
  same margin and hold does not (the forecast's growth over the lead time, on-demand cover
  while reclaimed spot is replaced, the planner's bounds); zero cost and service apart
  where the plan is that rule step for step;
- **its margin's rule against the frontier** at matched service: the margin learnt on the
  training period against the headroom and hold hindsight picks on the test period, which
  no rule without hindsight has.

``tiercast lab tier-gap`` prints both for each series of a suite file.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from scaler.replay.baselines import reactive_requests
from scaler.replay.fleets import FleetRun
from scaler.replay.frontier import Matched
from scaler.replay.protocol import STEP, STEP_H, planner_hold_s
from scaler.replay.scoring import score
from scaler.replay.simulating import Replay
from scaler.replay.tiers import tier_sizes, tiered_reactive_run

TIERED = "predictive-tiers"


@dataclass(frozen=True)
class Fleet:
    """One run's money, unserved demand and node-steps per tier on the test period."""

    cost: float
    unserved_gpu_h: float
    node_steps: dict[str, int]

    @classmethod
    def of(cls, run: FleetRun, demand: np.ndarray, gpus_per_node: int) -> Fleet:
        short = np.maximum(0.0, demand - run.usable_total * gpus_per_node)
        steps = {pool: int(n.sum()) for pool, n in sorted(run.requested.items())}
        return cls(run.cost(), float(short.sum() * STEP_H), steps)


@dataclass(frozen=True)
class TierGap:
    """The tiered plan, the tiered reactive rule at the plan's margin and hold, and each
    against the rule's frontier at matched service (module docstring)."""

    margin: float
    hold_s: int
    plan: Fleet
    rule: Fleet
    plan_matched: Matched
    rule_matched: Matched

    @property
    def plan_vs_rule(self) -> float:
        """The plan's saving against its margin's rule, by cost (service beside it)."""
        return (self.rule.cost - self.plan.cost) / self.rule.cost if self.rule.cost else 0.0


def tier_gap(replay: Replay) -> TierGap | None:
    """The split of ``replay``'s tiered saving (a tier replay, ``run_replay(...,
    tiers=True)``); None where it has no tiered plan or the plan learnt no margin."""
    plan_run, frontier = replay.runs.get(TIERED), replay.tier_frontiers.get("rule")
    if plan_run is None or plan_run.margin is None or frontier is None:
        return None
    trace, setup = replay.trace, replay.setup
    margin, hold = plan_run.margin.margin, planner_hold_s(setup)
    committed, spot_max = tier_sizes(trace, setup)
    at = replace(setup, reactive_headroom=margin, reactive_hold_s=hold)
    rule_run = tiered_reactive_run(reactive_requests(trace, at), committed, spot_max, setup)
    demand = trace.demand[trace.test_start :]
    window = max(1, round(setup.reversal_window_s / STEP.total_seconds()))
    rule_score = score(
        rule_run,
        demand,
        setup.gpus_per_node,
        replay.runs["oracle"].cost(),
        replay.runs["clairvoyant"].cost(),
        window,
    )
    return TierGap(
        margin=margin,
        hold_s=hold,
        plan=Fleet.of(plan_run, demand, setup.gpus_per_node),
        rule=Fleet.of(rule_run, demand, setup.gpus_per_node),
        plan_matched=replay.tier_matched["rule"],
        rule_matched=frontier.match(rule_score),
    )


HEADER = (
    "series",
    "lead min",
    "margin %",
    "hold min",
    "plan $",
    "unserved GPU-h",
    "rule at margin $",
    "unserved GPU-h",
    "plan vs rule at margin %",
    "rule at margin vs frontier %",
    "plan vs frontier %",
    "frontier point",
    "on-demand node-steps plan/rule",
)


def gap_row(name: str, lead_s: int, gap: TierGap) -> list[str]:
    """One line of ``tiercast lab tier-gap``'s table (:data:`HEADER`)."""
    point = gap.plan_matched
    return [
        name,
        f"{lead_s // 60}",
        f"{100 * gap.margin:.1f}",
        f"{gap.hold_s // 60}",
        f"{gap.plan.cost:,.0f}",
        f"{gap.plan.unserved_gpu_h:.2f}",
        f"{gap.rule.cost:,.0f}",
        f"{gap.rule.unserved_gpu_h:.2f}",
        f"{100 * gap.plan_vs_rule:.2f}",
        f"{100 * gap.rule_matched.saving:.2f}",
        f"{100 * point.saving:.2f}",
        f"+{100 * point.headroom:.1f}% held {point.hold_s // 60} min",
        f"{gap.plan.node_steps.get('on-demand', 0)}/{gap.rule.node_steps.get('on-demand', 0)}",
    ]
