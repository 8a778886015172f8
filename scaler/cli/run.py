"""``tiercast run``: one full cycle, collect, forecast, plan, act (or record with --dry-run),
through the same job function ``serve`` schedules; and how a cycle is printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from forecaster import __version__
from scaler.cli.common import (
    add_dry_run_flags,
    add_input_flags,
    add_output_flag,
    add_verbose_flag,
    print_document,
)
from scaler.inputs.loading import load_inputs, shown_path

if TYPE_CHECKING:
    from scaler.plans import CapacityPlan
    from scaler.service.cycle import CycleResult


def cycle_document(result: CycleResult) -> dict:
    """The plan and what became of each action, as ``-o json|yaml`` prints it."""
    return {
        "plan": json.loads(result.plan.to_json()),
        "dry_run": result.dry_run,
        "results": [
            {
                "pool": r.action.pool,
                "decision": r.action.decision,
                "target_nodes": r.action.target_nodes,
                "outcome": r.outcome,
                "message": r.message,
                "calls": r.calls,
            }
            for r in result.results
        ],
    }


SCREEN_WIDTH = 120
"""The terminal width the default output keeps to (``-o wide`` and ``-v`` do not)."""


def written_line(result: CycleResult, out: str | None, records: str | None = None) -> str:
    """Where the cycle wrote: the plan, the run record (``run``) and the model store; the
    parts packed into lines of at most :data:`SCREEN_WIDTH` characters."""
    parts = [f"plan written to {shown_path(out)}"] if out else []
    if records:
        parts.append(f"run record in {shown_path(records)}")
    if result.config is not None:
        parts.append(f"models in {shown_path(result.config.model_store.path)}")
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 2 + len(part) <= SCREEN_WIDTH:
            lines[-1] += "; " + part
        else:
            lines.append(part)
    return "\n".join(lines)


def print_cycle(
    result: CycleResult,
    label: str,
    out: str | None,
    output: str = "table",
    records: str | None = None,
    acted: bool = True,
    lang: str = "en",
    verbose: bool = False,
) -> None:
    """The cycle on stdout. ``acted=False`` (``plan``): no action went to any provider,
    so none is printed as recorded or applied. ``lang`` other than English (``plan
    --lang ru``): the plan in that language, every number kept. ``output``: ``table``
    fits a 120-column terminal (short reasons, one line per write); ``wide`` adds the
    evidence columns; ``json``/``yaml`` the documents. ``verbose``: every write's body
    and each outcome's whole message."""
    if output not in ("table", "wide"):
        print_document(cycle_document(result), output)
        if out:
            print(written_line(result, out, records), file=sys.stderr)
        return
    if lang != "en":
        _print_localized(result, label, out, lang)
        return
    from scaler.plans import actions_table

    plan = result.plan
    wide = output == "wide"
    mode = "dry-run" if result.dry_run else "live"
    print(f"tiercast {__version__} | {label} | now {plan.created_at} | {mode}")
    print(
        f"forecast: quantile q{plan.quantile:g}, horizon {plan.horizon_s / 3600:g} h, step {plan.step_s} s"
    )
    print("\n".join(signals_table(plan, wide)))
    print()
    print(actions_table(plan, wide=wide))
    print()
    for note in plan.notes:
        print(f"note: {note}")
    c = plan.cost
    print(
        f"cost: {c['per_hour_current']:.2f}/h now -> {c['per_hour_now']:.2f}/h planned; "
        f"{c['horizon_total']:.2f} over the horizon; expected unserved "
        f"{plan.risk['expected_unserved_gpu_hours']:.2f} GPU-h"
    )
    if not acted and result.results:
        print(
            "plan only: nothing was applied or recorded (tiercast run --dry-run records the calls)"
        )
    if acted:
        _print_results(result, verbose or wide)
    if out:
        print(written_line(result, out, records))


def signals_table(plan: CapacityPlan, wide: bool = False) -> list[str]:
    """One row per signal: its forecast method, newest value, peak at the plan's quantile
    and near-term rule (short; ``wide``: the full method, timestamp and the rule's evidence
    on a line under the table)."""
    from scaler.cli.common import text_table
    from scaler.plans import short_method
    from scaler.wording import margin_reason

    q = f"q{plan.quantile:g}"
    margins = plan.risk.get("margins") or {}
    rows = [["SIGNAL", "FORECAST", "NEWEST", "AT", f"PEAK {q}", "NEAR TERM"]]
    for s in plan.signals:
        entry = margins.get(s.name)
        at = s.last_timestamp if wide else _clock(s.last_timestamp, plan.created_at)
        rows.append(
            [
                s.name,
                s.estimator if wide else short_method(s.estimator),
                f"{s.last_value:,.2f} {s.unit}" if s.unit != "1" else f"{s.last_value:,.2f}",
                at + (" STALE" if s.stale else ""),
                f"{s.peak_at_quantile:,.2f}",
                margin_reason(s.name, entry).short("en") if entry else "-",
            ]
        )
    lines = text_table(rows, right={4})
    if wide:
        for s in plan.signals:
            if margins.get(s.name):
                lines.append(f"  {s.name}: {margin_reason(s.name, margins[s.name]).text('en')}")
    return lines


def _clock(timestamp: str, created_at: str) -> str:
    """``HH:MMZ`` of a timestamp within a day before the plan, else the whole timestamp."""
    from datetime import datetime, timedelta

    try:
        age = datetime.fromisoformat(created_at) - datetime.fromisoformat(timestamp)
    except ValueError:
        return timestamp
    return timestamp[11:16] + "Z" if timedelta(0) <= age < timedelta(days=1) else timestamp


def _print_results(result: CycleResult, verbose: bool) -> None:
    """What became of each action and the writes it made or, in dry-run, would make: one
    line each (verb, path, what changes); ``verbose``: the whole message and body."""
    shown = [r for r in result.results if r.outcome != "recorded" or r.calls or verbose]
    for r in result.results:
        head = r.message if verbose else _message_head(r.message)
        what = f"{r.outcome}: {r.action.pool} {r.action.decision} -> {r.action.target_nodes}"
        print(f"{what}: {head}" if head else what)
        for call in r.calls:
            if call.get("verb") != "GET":
                print(f"    {_format_call(call) if verbose else _call_line(call)}")
    if shown and not verbose:
        print("(each write's body and whole message: -v, or -o json)")


def _message_head(message: str) -> str:
    """An outcome message's first clause (up to the first ``: `` or ``; ``), its status;
    the rest is in ``-v`` and the run record."""
    cuts = [i for i in (message.find(": "), message.find("; ")) if i > 0]
    return message[: min(cuts)] if cuts else message


def _print_margin(plan: CapacityPlan, signal: str, lang: str) -> None:
    """The signal's near-term rule in short, once under the signal (every pool reason naming
    the signal refers to it; ``explain`` has its evidence); nothing where there is no margin."""
    from scaler.wording import margin_reason

    entry = (plan.risk.get("margins") or {}).get(signal)
    if entry:
        print(f"  {'':<16} {margin_reason(signal, entry).short(lang)}")


def _print_localized(result: CycleResult, label: str, out: str | None, lang: str) -> None:
    """What ``plan`` prints, in ``lang``: the forecast lines, the actions with their reasons
    translated (:func:`scaler.reports.actions.actions_text_table`), the notes and the cost."""
    from scaler.reports.actions import actions_text_table
    from scaler.reports.i18n import fmt_number, t, translate_source
    from scaler.wording import render

    plan = result.plan
    q = f"q{plan.quantile:g}"
    mode = t(lang, "plan_mode_dry_run" if result.dry_run else "plan_mode_live")
    print(f"tiercast {__version__} | {translate_source(label, lang)} | {plan.created_at} | {mode}")
    print(
        t(
            lang,
            "plan_forecast_line",
            q=q,
            hours=fmt_number(plan.horizon_s / 3600, lang, 0),
            step=plan.step_s,
        )
    )
    for s in plan.signals:
        flag = " " + t(lang, "plan_stale") if s.stale else ""
        print(
            f"  {s.name:<16} {s.estimator:<22} "
            + t(
                lang,
                "plan_signal_line",
                last=fmt_number(s.last_value, lang, 2),
                unit=s.unit,
                at=s.last_timestamp,
                q=q,
                peak=fmt_number(s.peak_at_quantile, lang, 2),
            )
            + flag
        )
        _print_margin(plan, s.name, lang)
    print()
    print(actions_text_table(plan, lang, short=True))
    print()
    for note in plan.notes:
        print(f"{t(lang, 'plan_note')}: {render(note, lang)}")
    c = plan.cost
    print(
        t(
            lang,
            "plan_cost_line",
            now=fmt_number(c["per_hour_current"], lang, 2),
            planned=fmt_number(c["per_hour_now"], lang, 2),
            total=fmt_number(c["horizon_total"], lang, 2),
            unserved=fmt_number(plan.risk["expected_unserved_gpu_hours"], lang, 2),
        )
    )
    if result.results:
        print(t(lang, "plan_only"))
    if out:
        print(t(lang, "plan_written", path=shown_path(out)))


def cmd_run(args: argparse.Namespace) -> int:
    """One cycle through the same job function ``serve`` schedules (exit codes: scaler.service.runs)."""
    from scaler.service.runs import Inputs
    from scaler.service.wiring import run_once

    def load() -> Inputs:
        config, history, now, label = load_inputs(args)
        return Inputs(config, history, now, label)

    def show(result: CycleResult, label: str) -> None:
        # run_once has resolved args.plan_out; the config planned with has the records path.
        records = result.config.service.records_path if result.config is not None else None
        if not getattr(args, "recorded", True):
            records = None  # the record was not written: nothing says it was
        print_cycle(result, label, args.plan_out, args.output, records, verbose=args.verbose)

    return run_once(args, load, show)


def _format_call(call: dict) -> str:
    """One API call as ``VERB path?query body``; reads are left out of the printed list."""
    where = call.get("path") or call.get("pool", "")
    if call.get("query"):
        where += "?" + "&".join(f"{k}={v}" for k, v in call["query"].items())
    extra = {k: v for k, v in call.items() if k not in ("verb", "path", "pool", "query", "status")}
    text = f"{call['verb']} {where}"
    if "body" in extra:
        text += " " + json.dumps(extra.pop("body"), separators=(",", ":"), sort_keys=True)
    if extra:
        text += " " + " ".join(f"{k}={v}" for k, v in extra.items())
    return text


_IDENTITY = {
    "apiVersion",
    "kind",
    "metadata.name",
    "metadata.namespace",
    "metadata.resourceVersion",
}
"""Fields of a write's body that name the object rather than change it."""


def _call_line(call: dict) -> str:
    """One write as ``VERB path: what changes`` (the body's changed fields, or the new
    object's name); the whole body is in ``-v`` and ``-o json``."""
    where = call.get("path") or call.get("pool", "")
    if call.get("query"):
        where += "?" + "&".join(f"{k}={v}" for k, v in call["query"].items())
    change = _change(call)
    return f"{call['verb']} {where}" + (f": {change}" if change else "")


def _change(call: dict) -> str:
    """What a write changes, in a few ``field=value`` words."""
    body = call.get("body")
    if call["verb"] == "relabel" and isinstance(body, dict):
        labels = ", ".join(f"{k}={v}" for k, v in (body.get("label") or {}).items())
        was = f" (was {body['from']})" if body.get("from") else ""
        return f"{body.get('node', '')} {labels}{was}".strip()
    if not isinstance(body, dict):
        extra = {k: v for k, v in call.items() if k not in ("verb", "path", "pool", "query")}
        return " ".join(f"{k}={v}" for k, v in extra.items() if k != "status")
    if call["verb"] == "POST" and isinstance(body.get("metadata"), dict):
        parts = [f"new {body['metadata'].get('name', '')}".strip()]
        spec = body.get("spec")
        if isinstance(spec, dict) and "replicas" in spec:
            parts.append(f"replicas={spec['replicas']}")
        return ", ".join(parts)
    leaves = [(k, v) for k, v in _leaves(body) if k not in _IDENTITY]
    words = [f"{k}={v}" for k, v in leaves[:3]]
    if len(leaves) > 3:
        words.append(f"+{len(leaves) - 3} more")
    return ", ".join(words)


def _leaves(value: object, prefix: str = "") -> list[tuple[str, object]]:
    """``(dotted.path, value)`` of every scalar (or list) in a JSON body."""
    if isinstance(value, dict):
        out: list[tuple[str, object]] = []
        for k, v in value.items():
            out += _leaves(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    if isinstance(value, list):
        return [(prefix, json.dumps(value, separators=(",", ":")))]
    return [(prefix, value)]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="one full cycle: collect, forecast, plan, act (or record with --dry-run)",
        description="Run one plan-and-act cycle. With no --config it runs the built-in demo fleet.",
    )
    add_input_flags(p)
    add_output_flag(p, wide=True)
    add_verbose_flag(p)
    add_dry_run_flags(p)
    k = p.add_argument_group(
        "Kubernetes (pools whose provider kind is cluster-api, karpenter or placeholder)"
    )
    k.add_argument(
        "--kubeconfig",
        help="kubeconfig file; default: in-cluster service account, else ~/.kube/config",
    )
    k.add_argument("--context", help="kubeconfig context; default: the current context")
    p.set_defaults(func=cmd_run)
