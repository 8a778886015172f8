"""``tiercast explain [POOL]``: everything behind each decision of the last plan, as
``kubectl describe`` shows an object: the pool, its actions with their whole reasons, the
demand of its GPU model, each signal's forecast, the margin it learnt and from what, the
growth calibration, and the bound that binds the pool.

It reads the plan file a cycle wrote (``run`` and ``plan`` write it in the state directory
unless ``--plan-out`` or ``service.plan_out`` say otherwise), or ``--plan FILE``; it
forecasts and plans nothing, so it answers at once.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from forecaster.errors import BadInputError

MAX_PLAN_BYTES = 64 * 1024 * 1024
"""A plan file larger than this is not one tiercast wrote (a year at a 5-minute step is
a few MB)."""

BOUNDS: dict[str, str] = {
    "bridging": "kept above what the forecast asks while another pool's new nodes boot",
    "stabilization": "kept above what the forecast asks: it is needed again within the "
    "lead time + policy.scale_down_stabilization_s",
    "released-recently": "released within the lead time + stabilization: asked back only as "
    "far as the demand already observed forces",
    "stale-data": "a signal it depends on is stale or missing: held, no scale-down",
    "no-new-observation": "nothing observed since the last cycle: the next value decides",
    "max_step": "moves by at most policy.max_step_nodes a cycle",
    "max_nodes": "at or above the pool's max_nodes",
    "budget": "policy.budget_per_hour leaves no room for another node",
    "billing": "nodes kept to the end of their paid period",
    "max_power_kw": "the power budget (max_power_kw) leaves no room for another node",
}
"""What each bound word of a plan (``pools[].binding``, ``risk.binding``) means."""

LABEL_WIDTH = 16


def default_plan_file(args: argparse.Namespace) -> Path:
    """``--plan``; else the plan path of ``--config`` (``service.plan_out``, else the
    state directory's); else the state directory's ``tiercast-plan.json``."""
    from scaler.inputs.loading import (
        DEFAULT_PLAN_FILE,
        default_state_dir,
        plan_path,
        resolve_config_path,
        with_state_paths,
    )

    if args.plan:
        return Path(args.plan)
    config_path = resolve_config_path(args)
    if config_path:
        from scaler.config import load_config

        config = with_state_paths(load_config(config_path), args)
        return Path(plan_path(config, args))
    base = Path(args.state_dir).expanduser() if args.state_dir else default_state_dir()
    return base / DEFAULT_PLAN_FILE


def read_plan(path: Path) -> dict[str, Any]:
    """The plan JSON at ``path``; a missing or unreadable file is one line (exit 2)."""
    from forecaster.files import read_bounded
    from scaler.inputs.loading import shown_path

    if not path.exists():
        raise BadInputError(
            f"no plan at {shown_path(path)}: run `tiercast run --dry-run` (or `tiercast plan`) "
            "first, or give --plan FILE"
        )
    raw = read_bounded(path, MAX_PLAN_BYTES, "plan file")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise BadInputError(f"plan file {shown_path(path)} is not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("pools"), list):
        raise BadInputError(f"plan file {shown_path(path)} is not a tiercast plan (no pools)")
    return data


def describe(plan: Mapping[str, Any], pools: Sequence[str] = ()) -> list[str]:
    """The lines ``tiercast explain`` prints for ``pools`` (every pool when empty)."""
    names = [str(p.get("pool")) for p in plan["pools"]]
    unknown = [p for p in pools if p not in names]
    if unknown:
        raise BadInputError(
            f"pool {unknown[0]!r} is not in the plan; it has {', '.join(names) or 'no pools'}"
        )
    q = f"q{float(plan.get('quantile', 0.0)):g}"
    lines = [
        _field(
            "Plan",
            f"{plan.get('created_at')}, {q} over {int(plan.get('horizon_s', 0)) / 3600:g} h "
            f"at a {plan.get('step_s')} s step",
        )
    ]
    for pool in plan["pools"]:
        if pools and pool.get("pool") not in pools:
            continue
        lines.append("")
        lines += describe_pool(plan, pool)
    return lines


def describe_pool(plan: Mapping[str, Any], pool: Mapping[str, Any]) -> list[str]:
    """One pool: what it is, its actions, its bound, its GPU model's demand and signals."""
    name, model = str(pool["pool"]), str(pool.get("gpu_model"))
    targets = [int(t) for t in pool.get("target_nodes") or []]
    out = [
        _field("Name", name),
        _field("Tier", pool.get("tier")),
        _field(
            "GPU model",
            f"{model}, {pool.get('gpus_per_node')} per node, "
            f"{float(pool.get('price_per_gpu_hour', 0.0)):.2f} per GPU-hour",
        ),
        _field("Lead time", f"{pool.get('lead_time_s')} s"),
        _field(
            "Nodes",
            f"{pool.get('current_nodes')} now, {targets[0]} planned now"
            + (f"; {min(targets)} to {max(targets)} over the horizon" if targets else ""),
        ),
    ]
    binding = list(
        pool.get("binding") or (plan.get("risk", {}).get("binding") or {}).get(name) or []
    )
    out.append(
        _field("Bound", "none" if not binding else binding[0] + ": " + BOUNDS.get(binding[0], ""))
    )
    out += [_field("", f"{b}: {BOUNDS.get(b, '')}") for b in binding[1:]]
    out.append("Actions:")
    out += _actions(plan, name)
    out += _demand(plan, model)
    out.append("Signals:")
    for signal in _signals_of(plan, name):
        out += _signal(plan, signal)
    notes = [n for n in _notes(plan) if name in n or model in n]
    if notes:
        out.append("Notes:")
        out += [f"  {n}" for n in notes]
    return out


def _field(label: str, value: object, indent: str = "") -> str:
    head = f"{label}:" if label else ""
    return f"{indent}{head:<{LABEL_WIDTH - len(indent)}}{value}"


def _actions(plan: Mapping[str, Any], pool: str) -> list[str]:
    from scaler.wording import Reason

    out = []
    for a in plan.get("actions") or []:
        if a.get("pool") != pool:
            continue
        reason = Reason.from_value(a.get("reason"))
        if a.get("kind", "nodes") == "nodes":
            what = f"{a.get('current_nodes')} -> {a.get('target_nodes')} nodes"
        else:
            what = f"layout {(a.get('details') or {}).get('layout', '')}"
        out.append(
            f"  {a.get('decision')}: {what}, at {str(a.get('at'))[11:16]}Z, needed "
            f"{str(a.get('needed_at'))[11:16]}Z, {float(a.get('cost_delta_per_hour', 0.0)):+.2f}/h"
        )
        out.append(_field("Reason", reason.text("en"), "    "))
        refs = f" (evidence: {', '.join(reason.refs)})" if reason.refs else ""
        out.append(_field("Code", reason.code + refs, "    "))
    return out or ["  none"]


def _demand(plan: Mapping[str, Any], model: str) -> list[str]:
    """The GPU model's need: near term, observed and the peak at the plan's quantile."""
    risk = plan.get("risk") or {}
    q = f"q{float(plan.get('quantile', 0.0)):g}"
    parts = []
    near = (risk.get("near_need_gpus") or {}).get(model)
    if near is not None:
        parts.append(f"near-term need {float(near):.1f} GPUs")
    seen = (risk.get("observed_gpus") or {}).get(model)
    if seen is not None:
        parts.append(f"observed {float(seen):.1f} GPUs")
    series = (plan.get("demand_gpus") or {}).get(model) or []
    timeline = plan.get("timeline") or []
    if series:
        k = max(range(len(series)), key=lambda i: series[i])
        at = timeline[k] if k < len(timeline) else "?"
        parts.append(f"peak {q} {float(series[k]):.1f} GPUs at {at}")
    out = [_field("Demand", f"{model}: " + ("; ".join(parts) or "none planned"))]
    held = (risk.get("held_models") or {}).get(model)
    if held:
        out.append(_field("Held", f"{held}: no scale-down"))
    for s in risk.get("shortfall") or []:
        if isinstance(s, Mapping) and s.get("gpu_model") == model:
            because = ", ".join(str(b) for b in s.get("because") or []) or "-"
            out.append(
                _field(
                    "Shortfall",
                    f"up to {float(s.get('max_gpus_short') or 0.0):.1f} GPUs short from "
                    f"{s.get('first_at')}; bound: {because}",
                )
            )
    return out


def _signals_of(plan: Mapping[str, Any], pool: str) -> list[str]:
    """The signals the pool's actions name (their ``signals`` or margin references)."""
    from scaler.plans import Action, action_signals

    found: list[str] = []
    for a in plan.get("actions") or []:
        if a.get("pool") != pool:
            continue
        action = Action(
            pool, "no-op", 0, 0, "", "", 0.0, a.get("reason"), a.get("kind", "nodes"), {}
        )
        found += [s for s in action_signals(action) if s not in found]
    return found


def _signal(plan: Mapping[str, Any], name: str) -> list[str]:
    """A signal's forecast, the margin it learnt and from what, and its growth rule."""
    from scaler.wording import margin_reason

    q = f"q{float(plan.get('quantile', 0.0)):g}"
    summary: Mapping[str, Any] = next(
        (s for s in plan.get("signals") or [] if s.get("name") == name), {}
    )
    out = [f"  {name}:"]
    if summary:
        stale = " (STALE)" if summary.get("stale") else ""
        out.append(
            _field(
                "Forecast",
                f"{summary.get('estimator')}; newest {float(summary.get('last_value', 0.0)):,.2f} "
                f"{summary.get('unit')} at {summary.get('last_timestamp')}{stale}; peak {q} "
                f"{float(summary.get('peak_at_quantile', 0.0)):,.2f}",
                "    ",
            )
        )
        if summary.get("reason"):
            out.append(_field("Chosen", summary["reason"], "    "))
    entry = ((plan.get("risk") or {}).get("margins") or {}).get(name)
    if not entry:
        return [*out, _field("Margin", "none in this plan", "    ")]
    out.append(_field("Near term", margin_reason(name, entry).text("en"), "    "))
    out.append(_field("Margin", _margin_evidence(entry), "    "))
    out.append(_field("Growth", _growth_evidence(entry), "    "))
    return out


def _pct(value: object) -> str:
    return "-" if value is None else f"{100 * float(value):.2f}%"  # type: ignore[arg-type]


def _margin_evidence(entry: Mapping[str, Any]) -> str:
    """What the margin was learnt from: the history, its unserved share against the budget,
    the next smaller margin's, and the reactive baseline's."""
    margin = f"{100 * float(entry.get('margin') or 0.0):g}%"
    if entry.get("source") != "learned":
        return f"{margin} from policy.headroom_fraction (too little history to learn one)"
    within = "within" if entry.get("within_budget") else "over"
    capped = "; capped" if entry.get("capped") else ""
    below = entry.get("smaller_unserved_share")
    smaller = (
        f"the next smaller margin leaves {_pct(below)}" if below is not None else "none smaller"
    )
    return (
        f"{margin} learnt on {float(entry.get('history_days') or 0.0):.1f} d of history: "
        f"{_pct(entry.get('unserved_share'))} of demand unserved, {within} the budget "
        f"{_pct(entry.get('budget'))} (target {_pct(entry.get('target'))}); {smaller}; reactive "
        f"{_pct(entry.get('reactive_unserved_share'))} unserved at "
        f"{float(entry.get('reactive_cost_ratio') or 0.0):.2f}x demand, this rule "
        f"{float(entry.get('cost_ratio') or 0.0):.2f}x{capped}"
    )


def _growth_evidence(entry: Mapping[str, Any]) -> str:
    """The growth calibration: the rule chosen, its level and origins, the cost of each
    rule in the backtest, and the forecast errors with and without growth."""
    rule = entry.get("growth")
    g, f = entry.get("growth_cost_ratio"), entry.get("flat_cost_ratio")
    costs = (
        f"; backtest cost {float(g):.3f}x demand with growth, {float(f):.3f}x without"
        if g is not None and f is not None
        else ""
    )
    error = entry.get("growth_error") or {}
    errors = (
        f"; error {float(error['forecast']):.4f} with the forecast's growth, "
        f"{float(error['no_growth']):.4f} without"
        if isinstance(error, Mapping) and {"forecast", "no_growth"} <= set(error)
        else ""
    )
    if isinstance(rule, Mapping):
        head = (
            f"growth {float(rule.get('level', 0.0)):g} ({rule.get('method')}) from "
            f"{rule.get('samples')} origins, overall correction "
            f"{float(rule.get('overall_correction') or 1.0):.3f}"
        )
    else:
        head = f"not used: {entry.get('near_term') or 'newest observation x margin'}"
    return head + costs + errors


def _notes(plan: Mapping[str, Any]) -> list[str]:
    from scaler.wording import Reason

    return [
        n if isinstance(n, str) else Reason.from_value(n).text("en")
        for n in plan.get("notes") or []
    ]


def cmd_explain(args: argparse.Namespace) -> int:
    path = default_plan_file(args)
    if args.list_pools:  # shell completion: the pools of the last plan, nothing on error
        with contextlib.suppress(BadInputError):
            print(" ".join(str(p.get("pool")) for p in read_plan(path)["pools"]))
        return 0
    plan = read_plan(path)
    print("\n".join(describe(plan, args.pools)))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explain",
        help="everything behind each decision of the last plan, like kubectl describe",
        description="Describe the last plan's decisions: per pool its actions with their whole "
        "reasons, the bound that binds it, its GPU model's demand, and each signal's forecast, "
        "learnt margin (and from what) and growth calibration. Reads the plan file the last "
        "`tiercast run` or `tiercast plan` wrote (the state directory's tiercast-plan.json "
        "unless --plan-out or service.plan_out named another), or --plan FILE.",
    )
    p.add_argument("pools", nargs="*", metavar="POOL", help="pools to explain (default: all)")
    p.add_argument("--plan", metavar="FILE", help="the plan JSON to read (default: the last plan)")
    p.add_argument(
        "--config",
        "-c",
        help="the config whose plan to read (its service.plan_out or state directory)",
    )
    from scaler.cli.common import add_state_flag

    add_state_flag(p)
    p.add_argument("--list-pools", action="store_true", help=argparse.SUPPRESS)
    # Shell completion offers the last plan's pools for POOL (scaler.cli.completion).
    p.set_defaults(complete_positional="tiercast explain --list-pools")
    p.set_defaults(func=cmd_explain)
