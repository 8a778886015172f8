"""The capacity plan: a pure value produced by planning and consumed by actuators.

A :class:`CapacityPlan` holds what the planner saw (forecast summaries), what it
wants (target nodes per pool over the horizon), what it will do now (one
:class:`Action` per pool, each with a decision and a typed reason,
:class:`scaler.wording.Reason`, rendered at the edge), and what
that costs and risks. ``to_dict`` gives the documented JSON form
(``scaler/plan.schema.json``); nothing in here talks to the outside world.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import pandas as pd

from scaler.wording import Reason

Decision = Literal["no-op", "scale-up", "scale-down", "relayout"]
DECISIONS: tuple[str, ...] = ("no-op", "scale-up", "scale-down", "relayout")
SCHEMA_VERSION = 2
"""2: each action's ``reason`` (and a typed note) is an object ``{code, params, refs, text}``;
1: a sentence (still read, :meth:`scaler.wording.Reason.from_value`)."""
EXPORT_CHECKS: list[Callable[[dict[str, Any]], object]] = []
"""Run on every plan's JSON form at :meth:`CapacityPlan.to_dict`: the tests add
:func:`scaler.plan_schema.check_plan` (``tests/conftest.py``); the product runs none."""


def iso(ts: pd.Timestamp) -> str:
    """UTC ISO-8601 with a ``Z``: the one timestamp form in plans and records."""
    t = pd.Timestamp(ts)
    if t.tzinfo is not None:
        t = t.tz_convert("UTC").tz_localize(None)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Action:
    """One change (or explicit non-change) to one pool."""

    pool: str
    decision: Decision
    current_nodes: int
    target_nodes: int
    at: str
    """When to act (ISO-8601 UTC): now, for actions in this cycle."""
    needed_at: str
    """When the capacity must be serving: ``at`` + the pool's lead time."""
    cost_delta_per_hour: float
    """Change in spend per hour if applied (negative saves)."""
    reason: Reason
    """Why: a code and its parameters (:mod:`scaler.wording`), rendered at the edge."""
    kind: str = "nodes"
    """What is changed: ``nodes`` for pool size, ``mig-layout`` for MIG relabels."""
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A reason read back from an old plan (a sentence) or its JSON form becomes a value.
        if not isinstance(self.reason, Reason):
            object.__setattr__(self, "reason", Reason.from_value(self.reason))

    @property
    def amount(self) -> int:
        return self.target_nodes - self.current_nodes


@dataclass(frozen=True)
class SignalSummary:
    name: str
    unit: str
    estimator: str
    reason: str
    last_timestamp: str
    last_value: float
    stale: bool
    peak_at_quantile: float
    """Highest forecast value at the policy quantile over the horizon."""
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PoolPlan:
    pool: str
    tier: str
    gpu_model: str
    gpus_per_node: int
    price_per_gpu_hour: float
    lead_time_s: int
    current_nodes: int
    target_nodes: list[int]
    """Target nodes at each timestamp of ``CapacityPlan.timeline``."""
    binding: list[str] = field(default_factory=list)
    """Constraints that bound this pool's target now (max_nodes, max_step, budget)."""


@dataclass(frozen=True)
class CapacityPlan:
    created_at: str
    quantile: float
    horizon_s: int
    step_s: int
    timeline: list[str]
    """Timestamps of the planning grid (ISO-8601 UTC)."""
    signals: list[SignalSummary]
    demand_gpus: dict[str, list[float]]
    """GPUs needed per GPU model at the policy quantile, on the timeline."""
    pools: list[PoolPlan]
    actions: list[Action]
    cost: dict[str, Any]
    risk: dict[str, Any]
    notes: list[Reason | str] = field(default_factory=list)
    """Typed notes (:class:`scaler.wording.Reason`) and, from steps without codes, sentences."""
    mig: dict[str, Any] = field(default_factory=dict)
    """MIG layouts: mig-parted config and per-node ``nvidia.com/mig.config`` values."""
    workloads: dict[str, Any] = field(default_factory=dict)
    """Workload classes (``scaler.planning.deferrable``): each workload's class, priority
    and PriorityClass; deferrable work placed into idle capacity and what unmet deadlines
    need; per pool and hour the served need, the deferrable work and the idle GPUs; the
    Kueue quota. Empty in plans made before workload classes."""
    sharing: dict[str, Any] = field(default_factory=dict)
    """Time-slicing and MPS (``scaler.planning.pooling``): each shared workload's mode and
    replicas per GPU, and per pooling group the GPUs in dedicated sets and pooled, and what
    pooling saves in GPU-hours and money; empty when nothing is shared."""
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        # asdict would give a reason's fields only: the JSON form adds its English text.
        for a, d in zip(self.actions, out["actions"], strict=True):
            d["reason"] = a.reason.to_dict()
        out["notes"] = [n.to_dict() if isinstance(n, Reason) else n for n in self.notes]
        for check in EXPORT_CHECKS:
            check(out)
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    def changes(self) -> list[Action]:
        """Actions that change something; no-ops are dropped before acting."""
        return [a for a in self.actions if a.decision != "no-op"]


@dataclass(frozen=True)
class PastCycle:
    """What one earlier cycle asked for: the state the planner's hysteresis reads.

    Built from the run records (:func:`past_cycle`) or, in the replay, from the
    plans it made. ``need_gpus`` is the largest near-term need per GPU model that
    the cycle covered (its ``demand_gpus`` over the first lead time).
    """

    at: pd.Timestamp
    targets: dict[str, int]
    """Nodes per pool the cycle requested."""
    need_gpus: dict[str, float]
    observed_gpus: dict[str, float] = field(default_factory=dict)
    """The observed floor per GPU model at that cycle (newest demand with headroom)."""
    current: dict[str, int] = field(default_factory=dict)
    """Nodes per pool the cycle started from: ``targets`` against it is the cycle's move."""
    observed_at: dict[str, pd.Timestamp] = field(default_factory=dict)
    """Per signal, the newest observation the cycle planned from (UTC, naive)."""


def past_cycle(plan: CapacityPlan | dict[str, Any]) -> PastCycle:
    """The state a later cycle needs from ``plan``: a plan, its JSON form, or the
    summary a run record keeps (``scaler.records.plan_summary``)."""
    data = plan.to_dict() if isinstance(plan, CapacityPlan) else plan
    pools = data.get("pools", [])
    if isinstance(pools, dict):
        # A run record's summary: pool -> current_nodes, target_nodes_now.
        targets = {str(k): int(v["target_nodes_now"]) for k, v in pools.items()}
        current = {str(k): int(v["current_nodes"]) for k, v in pools.items()}
    else:
        targets = {
            str(p["pool"]): int(p["target_nodes"][0] if p["target_nodes"] else p["current_nodes"])
            for p in pools
        }
        current = {str(p["pool"]): int(p["current_nodes"]) for p in pools}
    near = data.get("risk", {}).get("near_need_gpus", {})
    observed = data.get("risk", {}).get("observed_gpus", {})
    seen = data.get("risk", {}).get("observed_at", {})
    observed_at: dict[str, pd.Timestamp] = {}
    for k, v in seen.items() if isinstance(seen, dict) else ():
        try:
            observed_at[str(k)] = naive_utc(pd.Timestamp(str(v)))
        except ValueError:
            continue  # an unreadable entry says nothing newer was seen: no hold from it
    return PastCycle(
        at=pd.Timestamp(str(data["created_at"])).tz_localize(None),
        targets=targets,
        need_gpus={str(k): float(v) for k, v in near.items()},
        observed_gpus={str(k): float(v) for k, v in observed.items()},
        current=current,
        observed_at=observed_at,
    )


def naive_utc(ts: pd.Timestamp) -> pd.Timestamp:
    """``ts`` as a naive UTC timestamp (naive ones are taken as UTC already)."""
    return ts.tz_convert("UTC").tz_localize(None) if ts.tzinfo is not None else ts


def actions_table(plan: CapacityPlan, wide: bool = False) -> str:
    """The plan's actions, one row per action: the short reason (:data:`scaler.wording.SHORT`)
    fits a 120-column terminal; ``wide`` (``-o wide``) adds when the capacity is needed and
    the evidence: the signals, their forecast, the margin each learnt, the growth rule
    and the bound that binds the pool."""
    header = ["POOL", "DECISION", "NODES", "COST/H", "REASON"]
    if wide:
        header = [*header[:3], "NEEDED AT", "COST/H", "SIGNALS", "FORECAST", "MARGIN"]
        header += ["GROWTH", "BOUND", "REASON"]
    rows = [header]
    context = {"quantile": f"q{plan.quantile:g}"}
    for a in plan.actions:
        if a.kind == "nodes":
            nodes = f"{a.current_nodes}->{a.target_nodes}"
        else:
            nodes = str(a.details.get("layout", "")) if wide else "layout"
        row = [a.pool, a.decision, nodes, f"{a.cost_delta_per_hour:+.2f}"]
        if wide:
            row.insert(3, a.needed_at[11:16] + "Z")
            row += list(action_evidence(plan, a))
        rows.append([*row, a.reason.short("en", **context)])
    # Imported here: tabulate is needed only when a table is printed, not on every import.
    from forecaster.tables import aligned

    return "\n".join(aligned(rows, right={4 if wide else 3}))


def action_signals(action: Action) -> list[str]:
    """The signals an action's reason names (its ``signals``, else its margin references)."""
    named = action.reason.params.get("signals")
    if isinstance(named, tuple) and named:
        return [str(x) for x in named]
    prefix = "risk.margins."
    return [r[len(prefix) :] for r in action.reason.refs if r.startswith(prefix)]


def action_evidence(plan: CapacityPlan, action: Action) -> tuple[str, str, str, str, str]:
    """``-o wide``'s evidence of one action: its signals, each signal's forecast method,
    the margin each learnt (or the policy's), the growth rule each applies, and the bound
    on the pool (``-`` where there is none); several signals are joined with ``/``."""
    names = action_signals(action)
    estimators = {s.name: s.estimator for s in plan.signals}
    margins = plan.risk.get("margins") or {}
    forecast, margin, growth = [], [], []
    for name in names:
        forecast.append(estimators.get(name, "-"))
        entry = margins.get(name) or {}
        if entry:
            source = "learnt" if entry.get("source") == "learned" else "policy"
            margin.append(f"{100 * float(entry.get('margin') or 0.0):g}% {source}")
            rule = entry.get("growth")
            growth.append(
                f"{float(rule.get('level', 0.0)):g} {rule.get('method', '')}".strip()
                if isinstance(rule, dict)
                else "none"
            )
        else:
            margin.append("-")
            growth.append("-")
    binding = (plan.risk.get("binding") or {}).get(action.pool) or []
    bound = ",".join(str(b) for b in binding) if action.kind == "nodes" else ""
    return (
        ",".join(names) or "-",
        "/".join(forecast) or "-",
        "/".join(margin) or "-",
        "/".join(growth) or "-",
        bound or "-",
    )


def short_method(estimator: str, limit: int = 24) -> str:
    """A forecast method's name for a narrow column: an ensemble of many is named by its
    combiner and count (``median(4 methods)``); the full name is in ``-o wide`` and
    ``tiercast explain``."""
    if len(estimator) <= limit or "(" not in estimator:
        return estimator
    head, inner = estimator.split("(", 1)
    return f"{head}({inner.count('+') + 1} methods)"
