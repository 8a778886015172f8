"""The replay's text output: the table of one replay (a row per policy, with its saving at
matched service against the reactive frontier), the tier line (the tiered planner against
on-demand only, and the share of the clairvoyant tiers' saving it captures) and a suite's
summaries (a row per series, then the averages over groups; with several lead times, one
table of groups by lead time)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from forecaster.tables import aligned
from scaler.replay.frontier import LEVEL, Matched, central
from scaler.replay.protocol import STEP_H, STEPS_PER_DAY
from scaler.replay.scoring import Score
from scaler.replay.simulating import Replay
from scaler.replay.suite import Suite, SuiteResult
from scaler.replay.tiers import TIER_CAPTURE_TARGET, clairvoyant_tier_saving

# --------------------------------------------------------------------------- one replay

_TABLE_HEADER = (
    "policy",
    "cost $",
    "x oracle",
    "x clairvoyant",
    "unserved GPU-h",
    "unserved %",
    "steps short %",
    "changes",
    "reversals",
    "saving at matched %",
    "frontier headroom %",
    "frontier hold min",
    "frontier reversals",
)


def format_table(replay: Replay) -> str:
    """The replay table: one row per policy, the real ones against the reactive frontier."""
    rows = [
        _TABLE_HEADER,
        *(_policy_row(s, replay.matched.get(p)) for p, s in replay.scores.items()),
    ]
    spreads = [f"{p} {spread(iv)}" for p, iv in replay.intervals.items()]
    days = math.ceil(len(replay.trace.test_index) / STEPS_PER_DAY)
    tail = (
        [f"saving at matched service, {LEVEL:.0%} over the {days} test days: " + "; ".join(spreads)]
        if spreads
        else []
    )
    return "\n".join(aligned(rows, right=range(1, len(_TABLE_HEADER))) + tail)


def spread(interval: tuple[float, float]) -> str:
    """A saving's interval over the test days, in percent."""
    lo, hi = interval
    return f"{100 * lo:+.2f}% to {100 * hi:+.2f}%"


def _policy_row(s: Score, m: Matched | None) -> tuple[str, ...]:
    matched = (
        (
            f"{'>=' if m.beyond else ''}{100 * m.saving:.2f}",
            f"{100 * m.headroom:.1f}",
            f"{m.hold_s // 60}",
            str(m.reversals),
        )
        if m is not None
        else ("-", "-", "-", "-")
    )
    return (
        s.policy,
        f"{s.cost:,.0f}",
        f"{s.cost_vs_oracle:.3f}",
        f"{s.cost_vs_clairvoyant:.3f}",
        f"{s.unserved_gpu_hours:.2f}",
        f"{100 * s.unserved_share:.3f}",
        f"{100 * s.steps_short_share:.2f}",
        str(s.changes),
        str(s.reversals),
        *matched,
    )


def tier_capture(tiered: Score, single: Score, clairvoyant: float) -> tuple[float, float, bool]:
    """``(saving, captured, ok)``: what tiers save against on-demand only, the share of the
    clairvoyant tiers' saving that is, and whether the target is met (at least
    :data:`TIER_CAPTURE_TARGET` of it with no more unserved)."""
    saving = 1 - tiered.cost / single.cost if single.cost > 0 else math.nan
    captured = saving / clairvoyant if clairvoyant > 0 else math.nan
    no_more = tiered.unserved_gpu_hours <= single.unserved_gpu_hours + 1e-9
    enough = captured >= TIER_CAPTURE_TARGET - 1e-9 if clairvoyant > 0 else saving >= -1e-9
    return saving, captured, bool(no_more and enough)


def format_tiers(replay: Replay) -> str:
    """Tiercast on tiers against tiercast on on-demand only, with the tier split."""
    single = replay.scores.get("predictive")
    tiered = replay.scores.get("predictive-tiers")
    if tiered is None:
        return ""
    if single is None:
        return "\n".join(_tier_baseline_lines(replay.tier_matched, tiered, replay.tier_intervals))
    run = replay.runs["predictive-tiers"]
    by_pool = run.cost_by_pool()
    gpu_h = {
        p: float(n.sum()) * replay.setup.gpus_per_node * STEP_H for p, n in run.requested.items()
    }
    split = ", ".join(f"{p} {gpu_h[p]:,.0f} GPU-h ${by_pool[p]:,.0f}" for p in sorted(by_pool))
    clairvoyant = clairvoyant_tier_saving(replay.trace, replay.setup)
    saving, captured, _ = tier_capture(tiered, single, clairvoyant)
    verdict = "no more" if tiered.unserved_gpu_hours <= single.unserved_gpu_hours + 1e-9 else "MORE"
    return (
        f"tiers: ${tiered.cost:,.0f} vs on-demand only ${single.cost:,.0f}: {100 * saving:.1f}% cheaper "
        f"(clairvoyant tiers at these prices: {100 * clairvoyant:.1f}%, so {100 * captured:.0f}% of "
        f"theirs); unserved {tiered.unserved_gpu_hours:.2f} vs {single.unserved_gpu_hours:.2f} GPU-h "
        f"({verdict} unserved); {split}; spot nodes reclaimed: {run.reclaimed}"
        + "".join(
            f"\n{line}"
            for line in _tier_baseline_lines(replay.tier_matched, tiered, replay.tier_intervals)
        )
    )


def _tier_baseline_lines(
    tier_matched: dict[str, Matched],
    tiered: Score,
    intervals: dict[str, tuple[float, float]] | None = None,
) -> list[str]:
    """The tiered plan against the tiered reactive baseline at matched service, a line per
    way of sizing the baseline's commitment, each with its interval over the test days."""
    intervals = intervals or {}
    how = {
        "rule": "commitment by tiercast's rule on the training period",
        "hindsight": "commitment chosen at hindsight on the test period",
        "floor": "the cheapest of every commitment at this service",
    }
    return [
        f"tiers vs tiered reactive ({how.get(r, r)}): ${tiered.cost:,.0f} vs "
        f"${m.frontier_cost:,.0f} at {100 * tiered.unserved_share:.3f}% unserved: saving at "
        f"matched service {'>=' if m.beyond else ''}{100 * m.saving:.2f}%"
        + (f" ({LEVEL:.0%} over test days {spread(intervals[r])})" if r in intervals else "")
        + " (its point: "
        f"headroom {100 * m.headroom:.1f}%, hold {m.hold_s // 60} min)"
        for r, m in tier_matched.items()
    ]


# --------------------------------------------------------------------------- a suite

_SUMMARY_HEADER = (
    "series",
    "group",
    "x clairv. pred/react",
    "unserved % pred/react",
    "saving at matched %",
    "frontier hold min",
    "ablations at matched %",
    "reversals pred/frontier",
    "reversals<=frontier+1/wk",
    "tiers cheaper %",
    "clairv. tiers %",
    "captured %",
    "unserved GPU-h tiers/od",
    "tiers vs tiered reactive % rule/hindsight/floor",
    "tiers ok",
)


def ablations(results: Sequence[SuiteResult]) -> list[str]:
    """The ablation policies replayed (``predictive[METHOD]``), in the order first seen."""
    seen: list[str] = []
    for r in results:
        seen += [p for p in r.scores if p.startswith("predictive[") and p not in seen]
    return seen


def format_summary(results: Sequence[SuiteResult], suite: Suite) -> str:
    """One row per series (predictive against reactive and the frontier, tiers against
    on-demand only), then the averages over groups (series of a group first, then groups)
    for the groups the parameters were tuned on, the others, and all."""
    rows: list[tuple[str, ...]] = [_SUMMARY_HEADER]
    tiers_ok: dict[str, bool] = {}
    for r in results:
        row = _series_row(r)
        if row is None:
            continue
        cells, ok = row
        rows.append(cells)
        if ok is not None:
            tiers_ok[r.entry.path] = ok
    lines = aligned(rows, right=range(2, len(_SUMMARY_HEADER)))
    lines.append("")
    lines += _group_averages(results, suite)
    if tiers_ok:
        lines.append(_tiers_verdict(tiers_ok))
    return "\n".join(lines)


def reversals_ok(r: SuiteResult, policy: str = "predictive") -> bool:
    """Whether ``policy`` reversed at most the frontier point of its service, plus one a week."""
    s, m = r.scores.get(policy), r.matched.get(policy)
    if s is None or m is None:
        return True
    return s.reversals <= m.reversals + math.ceil(r.test_days / 7 - 1e-9)


def _series_row(r: SuiteResult) -> tuple[tuple[str, ...], bool | None] | None:
    """One series' summary row, and whether its tiers met the target (None: no tier replay);
    None where predictive or reactive was not replayed."""
    s = r.scores
    p, re_ = s.get("predictive"), s.get("reactive")
    t = s.get("predictive-tiers")
    m = r.matched.get("predictive")
    if p is None or re_ is None or m is None:
        return None
    tier = tier_capture(t, p, r.tiers_clairvoyant) if t is not None else None
    abl = "/".join(
        f"{100 * r.matched[a].saving:.1f}" if a in r.matched else "-" for a in ablations([r])
    )
    cells = (
        Path(r.entry.path).stem,
        r.entry.group,
        f"{p.cost_vs_clairvoyant:.3f}/{re_.cost_vs_clairvoyant:.3f}",
        f"{100 * p.unserved_share:.3f}/{100 * re_.unserved_share:.3f}",
        f"{'>=' if m.beyond else ''}{100 * m.saving:.2f}",
        f"{m.hold_s // 60}",
        abl or "-",
        f"{p.reversals}/{m.reversals}",
        "yes" if reversals_ok(r) else "NO",
        f"{100 * tier[0]:.1f}" if tier is not None else "-",
        f"{100 * r.tiers_clairvoyant:.1f}" if math.isfinite(r.tiers_clairvoyant) else "-",
        f"{100 * tier[1]:.0f}" if tier is not None and math.isfinite(tier[1]) else "-",
        f"{t.unserved_gpu_hours:.2f}/{p.unserved_gpu_hours:.2f}" if t is not None else "-",
        "/".join(
            f"{'>=' if tm.beyond else ''}{100 * tm.saving:.1f}" for tm in r.tier_matched.values()
        )
        or "-",
        ("yes" if tier[2] else "NO") if tier is not None else "-",
    )
    return cells, (tier[2] if tier is not None else None)


def _splits(results: Sequence[SuiteResult], suite: Suite) -> list[tuple[str, list[str]]]:
    """The groups tuned on, the confirming ones and all, with their labels."""
    groups = sorted({r.entry.group for r in results})
    tuned = [g for g in groups if g in suite.tuned_on]
    confirm = [g for g in groups if g not in suite.tuned_on]
    return [
        (label, which)
        for label, which in (
            (f"tuned on ({', '.join(tuned) or '-'})", tuned),
            (f"confirming ({', '.join(confirm) or '-'})", confirm),
            ("all groups", groups),
        )
        if which
    ]


def _group_averages(results: Sequence[SuiteResult], suite: Suite) -> list[str]:
    """A line each for the groups tuned on, the confirming ones and all: every policy's cost
    and unserved share, and the planner's saving at matched service, averaged over the
    series of a group, then over groups."""
    lines = []
    for label, which in _splits(results, suite):
        parts = []
        for policy in ("reactive", "predictive", "predictive-tiers"):
            cost, unserved = _averaged(results, which, policy)
            if not math.isnan(cost):
                parts.append(f"{policy} {cost:.3f} x clairvoyant, {100 * unserved:.3f}% unserved")
        for policy in ("predictive", *ablations(results)):
            saving = group_mean(results, which, lambda r, p=policy: _saving(r, p))
            if not math.isnan(saving):
                spread_ = _mean_spread(results, which, "draws", policy)
                parts.append(f"{policy} saving at matched service {100 * saving:.2f}%{spread_}")
        for rule in _tier_rules(results):
            saving = group_mean(results, which, lambda r, rule=rule: _tier_saving(r, rule))
            if not math.isnan(saving):
                spread_ = _mean_spread(results, which, "tier_draws", rule)
                parts.append(
                    f"predictive-tiers saving against tiered reactive ({rule}) "
                    f"{100 * saving:.2f}%{spread_}"
                )
        lines.append(f"average over groups, {label}: " + "; ".join(parts))
    return lines


def _mean_spread(results: Sequence[SuiteResult], which: Sequence[str], kind: str, key: str) -> str:
    """The group mean's interval over the test days, `` (90% ...)``: each draw's savings
    (``kind``, ``draws`` or ``tier_draws``, at ``key``) averaged as the mean is (over a
    group's series, then over groups; series over the same test days drew the same days);
    empty where a series of ``which`` has no draws."""
    per_group = []
    for g in which:
        series = [getattr(r, kind).get(key) for r in results if r.entry.group == g]
        if not series:
            continue
        if any(d is None for d in series):
            return ""
        per_group.append(np.nanmean(np.vstack([d for d in series if d is not None]), axis=0))
    if not per_group:
        return ""
    lo, hi = central(np.nanmean(np.vstack(per_group), axis=0))
    return f" ({LEVEL:.0%} over test days {spread((lo, hi))})"


def _saving(r: SuiteResult, policy: str) -> float:
    m = r.matched.get(policy)
    return m.saving if m is not None else math.nan


def _tier_saving(r: SuiteResult, rule: str) -> float:
    """The tiered plan's saving at matched service against the tiered reactive baseline
    with its commitment sized by ``rule``."""
    m = r.tier_matched.get(rule)
    return m.saving if m is not None else math.nan


def _tier_rules(results: Sequence[SuiteResult]) -> list[str]:
    """The ways the tiered reactive baseline was sized in ``results``, in the order first seen."""
    seen: list[str] = []
    for r in results:
        seen += [k for k in r.tier_matched if k not in seen]
    return seen


def group_mean(results: Sequence[SuiteResult], which: Sequence[str], value: object) -> float:
    """``value(result)`` averaged over the series of each group of ``which``, then over
    those groups (NaN values left out)."""
    per_group = []
    for g in which:
        vals = [value(r) for r in results if r.entry.group == g]  # type: ignore[operator]
        vals = [v for v in vals if isinstance(v, float) and math.isfinite(v)]
        if vals:
            per_group.append(_mean(vals))
    return _mean(per_group)


def _averaged(
    results: Sequence[SuiteResult], which: Sequence[str], policy: str
) -> tuple[float, float]:
    """``policy``'s cost against the clairvoyant and unserved share, averaged over the series
    of each group of ``which``, then over those groups."""
    per_group = []
    for g in which:
        members = [r.scores[policy] for r in results if r.entry.group == g and policy in r.scores]
        if members:
            per_group.append(
                (
                    _mean([m.cost_vs_clairvoyant for m in members]),
                    _mean([m.unserved_share for m in members]),
                )
            )
    return _mean([c for c, _ in per_group]), _mean([u for _, u in per_group])


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def _tiers_verdict(tiers_ok: dict[str, bool]) -> str:
    """How many series' tiers met the target."""
    met = sum(tiers_ok.values())
    return (
        f"tiers: {met} of {len(tiers_ok)} series capture at least "
        f"{100 * TIER_CAPTURE_TARGET:.0f}% of what clairvoyant tiers save at these prices, "
        "with no more unserved than on-demand only"
    )


# --------------------------------------------------------------------------- several leads


def format_leads(results: Sequence[SuiteResult], suite: Suite) -> str:
    """Groups by lead time: the planner's saving at matched service (and each ablation's),
    its cost against the clairvoyant and how many groups the forecast's gain holds on."""
    leads = sorted({r.lead_time_s for r in results})
    policies = ["predictive", *ablations(results)]
    groups = sorted({r.entry.group for r in results})
    header = ["group", *(f"{lead // 60} min" for lead in leads)]
    rows: list[tuple[str, ...]] = [tuple(header)]
    order = [(g, [g]) for g in groups] + [
        (f"mean, {label}", w) for label, w in _splits(results, suite)
    ]
    for label, which in order:
        cells = [label]
        for lead in leads:
            at = [r for r in results if r.lead_time_s == lead]
            savings = [group_mean(at, which, lambda r, p=p: _saving(r, p)) for p in policies]
            cost = _averaged(at, which, "predictive")[0]
            cells.append(
                "/".join(f"{100 * s:.1f}" if math.isfinite(s) else "-" for s in savings)
                + f" ({cost:.3f}x)"
            )
        rows.append(tuple(cells))
    names = "/".join(policies)
    lines = [
        f"saving at matched service % ({names}), and predictive x clairvoyant, by lead time:",
        *aligned(rows, right=range(1, len(header))),
    ]
    for lead in leads:
        at = [r for r in results if r.lead_time_s == lead]
        for a in policies[1:]:
            wins = sum(
                group_mean(at, [g], lambda r: _saving(r, "predictive"))
                > group_mean(at, [g], lambda r, a=a: _saving(r, a)) + 1e-12
                for g in groups
            )
            lines.append(
                f"{lead // 60} min: predictive beats {a} on {wins} of {len(groups)} groups"
            )
    lines += _tier_leads(results, suite, leads, order)
    return "\n".join(lines)


def _tier_leads(
    results: Sequence[SuiteResult],
    suite: Suite,
    leads: Sequence[int],
    order: Sequence[tuple[str, Sequence[str]]],
) -> list[str]:
    """Groups by lead time: the tiered plan's saving at matched service against the tiered
    reactive baseline (commitment by rule / at hindsight / the floor of every commitment),
    and the groups it is >= 0 on."""
    rules = _tier_rules(results)
    if not rules:
        return []
    rows: list[tuple[str, ...]] = [("group", *(f"{lead // 60} min" for lead in leads))]
    for label, which in order:
        cells = [label]
        for lead in leads:
            at = [r for r in results if r.lead_time_s == lead]
            vals = [group_mean(at, which, lambda r, k=k: _tier_saving(r, k)) for k in rules]
            cells.append("/".join(f"{100 * v:.1f}" if math.isfinite(v) else "-" for v in vals))
        rows.append(tuple(cells))
    groups = [label for label, which in order if len(which) == 1 and which[0] == label]
    lines = [
        "",
        f"tiers against the tiered reactive baseline, saving at matched service % "
        f"({'/'.join(rules)}), by lead time:",
        *aligned(rows, right=range(1, len(leads) + 1)),
    ]
    for lead in leads:
        at = [r for r in results if r.lead_time_s == lead]
        for k in rules:
            ok = sum(group_mean(at, [g], lambda r, k=k: _tier_saving(r, k)) >= 0 for g in groups)
            lines.append(
                f"{lead // 60} min: tiers >= tiered reactive ({k}) on {ok} of {len(groups)} groups"
            )
    return lines
