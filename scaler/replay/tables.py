"""The replay's text output: the table of one replay (a row per policy), the tier line (the
tiered planner against on-demand only) and a suite's summary (a row per series, then the
averages over groups)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from forecaster.tables import aligned
from scaler.replay.protocol import STEP_H
from scaler.replay.scoring import Score
from scaler.replay.simulating import Replay
from scaler.replay.suite import Suite, SuiteResult
from scaler.replay.tiers import TIER_SAVING_TARGET, clairvoyant_tier_saving

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
)


def format_table(replay: Replay) -> str:
    """The replay table: one row per policy."""
    rows = [_TABLE_HEADER, *(_policy_row(s) for s in replay.scores.values())]
    return "\n".join(aligned(rows, right=range(1, len(_TABLE_HEADER))))


def _policy_row(s: Score) -> tuple[str, ...]:
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
    )


def format_tiers(replay: Replay) -> str:
    """Tiercast on tiers against tiercast on on-demand only, with the tier split."""
    single = replay.scores.get("predictive")
    tiered = replay.scores.get("predictive-tiers")
    if single is None or tiered is None:
        return ""
    run = replay.runs["predictive-tiers"]
    by_pool = run.cost_by_pool()
    gpu_h = {
        p: float(n.sum()) * replay.setup.gpus_per_node * STEP_H for p, n in run.requested.items()
    }
    split = ", ".join(f"{p} {gpu_h[p]:,.0f} GPU-h ${by_pool[p]:,.0f}" for p in sorted(by_pool))
    saving = 1 - tiered.cost / single.cost if single.cost > 0 else math.nan
    verdict = "no more" if tiered.unserved_gpu_hours <= single.unserved_gpu_hours + 1e-9 else "MORE"
    clairvoyant = clairvoyant_tier_saving(replay.trace, replay.setup)
    return (
        f"tiers: ${tiered.cost:,.0f} vs on-demand only ${single.cost:,.0f}: {100 * saving:.1f}% cheaper "
        f"(clairvoyant tiers at these prices: {100 * clairvoyant:.1f}%); "
        f"unserved {tiered.unserved_gpu_hours:.2f} vs {single.unserved_gpu_hours:.2f} GPU-h ({verdict} unserved); "
        f"{split}; spot nodes reclaimed: {run.reclaimed}"
    )


# --------------------------------------------------------------------------- a suite

_SUMMARY_HEADER = (
    "series",
    "group",
    "x clairv. pred/react",
    "unserved % pred/react",
    "reversals pred/react",
    "cost<=react",
    "unserved<=react",
    "reversals<=react",
    "tiers cheaper %",
    "clairv. tiers %",
    "unserved GPU-h tiers/od",
    "tiers ok",
)


def format_summary(results: Sequence[SuiteResult], suite: Suite) -> str:
    """One row per series (predictive against reactive, tiers against on-demand only), then
    the averages over groups (series of a group first, then groups) for the groups the
    parameters were tuned on, the others, and all."""
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
        lines.append(_tiers_verdict(results, tiers_ok))
    return "\n".join(lines)


def _series_row(r: SuiteResult) -> tuple[tuple[str, ...], bool | None] | None:
    """One series' summary row, and whether its tiers met the target (None: no tier replay);
    None where predictive or reactive was not replayed."""
    s = r.scores
    p, re_ = s.get("predictive"), s.get("reactive")
    t = s.get("predictive-tiers")
    if p is None or re_ is None:
        return None
    saving = 1 - t.cost / p.cost if t is not None and p.cost > 0 else math.nan
    ok = (
        None
        if t is None
        else saving >= TIER_SAVING_TARGET and t.unserved_gpu_hours <= p.unserved_gpu_hours + 1e-9
    )
    cells = (
        Path(r.entry.path).stem,
        r.entry.group,
        f"{p.cost_vs_clairvoyant:.3f}/{re_.cost_vs_clairvoyant:.3f}",
        f"{100 * p.unserved_share:.3f}/{100 * re_.unserved_share:.3f}",
        f"{p.reversals}/{re_.reversals}",
        "yes" if p.cost <= re_.cost + 1e-9 else "NO",
        "yes" if p.unserved_gpu_hours <= re_.unserved_gpu_hours + 1e-9 else "NO",
        "yes" if p.reversals <= re_.reversals else "NO",
        f"{100 * saving:.1f}" if t is not None else "-",
        f"{100 * r.tiers_clairvoyant:.1f}" if math.isfinite(r.tiers_clairvoyant) else "-",
        f"{t.unserved_gpu_hours:.2f}/{p.unserved_gpu_hours:.2f}" if t is not None else "-",
        ("yes" if ok else "NO") if t is not None else "-",
    )
    return cells, ok


def _group_averages(results: Sequence[SuiteResult], suite: Suite) -> list[str]:
    """A line each for the groups tuned on, the confirming ones and all: every policy's cost
    and unserved share averaged over the series of a group, then over groups."""
    groups = sorted({r.entry.group for r in results})
    tuned = [g for g in groups if g in suite.tuned_on]
    confirm = [g for g in groups if g not in suite.tuned_on]
    lines = []
    for label, which in (
        (f"tuned on ({', '.join(tuned) or '-'})", tuned),
        (f"confirming ({', '.join(confirm) or '-'})", confirm),
        ("all groups", groups),
    ):
        if not which:
            continue
        parts = []
        for policy in ("reactive", "predictive", "predictive-tiers"):
            cost, unserved = _averaged(results, which, policy)
            if not math.isnan(cost):
                parts.append(f"{policy} {cost:.3f} x clairvoyant, {100 * unserved:.3f}% unserved")
        lines.append(f"average over groups, {label}: " + "; ".join(parts))
    return lines


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


def _tiers_verdict(results: Sequence[SuiteResult], tiers_ok: dict[str, bool]) -> str:
    """How many series' tiers met the target, and of the others how many could not have."""
    missed = [r for r in results if tiers_ok.get(r.entry.path) is False]
    shaped = [r for r in missed if r.tiers_clairvoyant < TIER_SAVING_TARGET]
    return (
        f"tiers: {len(tiers_ok) - len(missed)} of {len(tiers_ok)} series at least "
        f"{100 * TIER_SAVING_TARGET:.0f}% cheaper than on-demand only with no more unserved; "
        f"on {len(shaped)} of the {len(missed)} others even clairvoyant tiers at these "
        f"prices save less than {100 * TIER_SAVING_TARGET:.0f}%"
    )
