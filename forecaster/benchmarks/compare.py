"""Before and after on the forecasting benchmark, by half.

Two ``tiercast lab bench-forecast --json`` files of the same series, test days and rivals
(one per tree, or per variant) give each group's ratio before and after, the means over
the groups chosen on and the groups that only confirm (the protocol of
docs/benchmarks.md) and over all of them, and a **paired** bootstrap of each change: in
each draw the same calendar test days are picked for both files, so that a hard day
counts on both sides and the interval is of the change itself, not of either level. A
change inside its interval's spread is not one a rule can be chosen against.

    python -m forecaster.benchmarks.compare BEFORE.json AFTER.json [--choose G,G] [--draws N]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from forecaster.benchmarks.accuracy import (
    CHOOSE,
    BenchRow,
    day_weights,
    drawable_groups,
    group_draws,
    summarize,
)
from forecaster.errors import BadInputError


@dataclass(frozen=True)
class Change:
    """One group's or half's mean ratio before and after, and the paired 90% interval of
    the change (after minus before) over the bootstrap's draws."""

    name: str
    before: float
    after: float
    low: float
    high: float

    @property
    def change(self) -> float:
        return self.after - self.before


def load_rows(path: str | Path) -> list[BenchRow]:
    """The benchmark rows of one ``--json`` file; a clear one-line error if it is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        known = {f.name for f in fields(BenchRow)}
        return [BenchRow(**{k: v for k, v in r.items() if k in known}) for r in data["accuracy"]]
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise BadInputError(f"{path}: not a bench-forecast --json file ({exc})") from exc


def compare(
    before: Sequence[BenchRow],
    after: Sequence[BenchRow],
    choose: Sequence[str] = CHOOSE,
    draws: int = 2000,
    seed: int = 0,
) -> list[Change]:
    """Each group's change, then the choosing half's, the confirming half's and all groups'
    (means of the groups' ratios), each with its paired 90% interval."""
    was, now = summarize(before).groups, summarize(after).groups
    groups = [g for g in now if g in was]
    if not groups:
        raise BadInputError("the two files share no group; nothing to compare")
    paired = _paired_draws(before, after, groups, draws, seed)
    out = [_change(g, was[g].ratio, now[g].ratio, paired[g]) for g in groups]
    halves = {
        "choosing half": [g for g in groups if g in choose],
        "confirming half": [g for g in groups if g not in choose],
        "all groups": groups,
    }
    for name, members in halves.items():
        if members:
            draws_of = np.mean([paired[g] for g in members], axis=0)
            out.append(
                _change(
                    name,
                    float(np.mean([was[g].ratio for g in members])),
                    float(np.mean([now[g].ratio for g in members])),
                    draws_of,
                )
            )
    return out


def _change(name: str, before: float, after: float, draws: np.ndarray) -> Change:
    finite = draws[np.isfinite(draws)]
    low, high = np.percentile(finite, [5, 95]) if finite.size else (np.nan, np.nan)
    return Change(name, before, after, float(low), float(high))


def _paired_draws(
    before: Sequence[BenchRow],
    after: Sequence[BenchRow],
    groups: Sequence[str],
    draws: int,
    seed: int,
) -> Mapping[str, np.ndarray]:
    """Per group, the change of its ratio in each draw, the same days drawn for both files."""
    rng = np.random.default_rng(seed)
    was, now = drawable_groups(before), drawable_groups(after)
    out = {}
    for g in groups:
        a, b = now.get(g, []), was.get(g, [])
        if not a and not b:  # files written before per-day errors were kept: no interval
            out[g] = np.full(draws, np.nan)
            continue
        if [m[0].series for m in a] != [m[0].series for m in b] or any(
            x[0].day_dates != y[0].day_dates for x, y in zip(a, b, strict=True)
        ):
            raise BadInputError(
                f"group {g!r}: the two files hold other series or test days; "
                "run both with the same traces, groups and --max-history"
            )
        weights = day_weights(a, rng, draws)
        with np.errstate(invalid="ignore"):
            out[g] = group_draws(a, weights)[0] - group_draws(b, weights)[0]
    return out


def format_changes(changes: Sequence[Change]) -> str:
    """A Markdown table of the changes (lower is better), paste-able into the docs."""
    lines = [
        "| group | before | after | change | paired 90% interval of the change |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for c in changes:
        lines.append(
            f"| {c.name} | {c.before:.4f} | {c.after:.4f} | {c.change:+.4f} | "
            f"{c.low:+.4f} to {c.high:+.4f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m forecaster.benchmarks.compare", description=__doc__)
    p.add_argument("before", help="bench-forecast --json file of the tree before")
    p.add_argument("after", help="bench-forecast --json file of the tree after")
    p.add_argument("--choose", default=",".join(CHOOSE), help="groups chosen on; others confirm")
    p.add_argument("--draws", type=int, default=2000, help="bootstrap draws (default: 2000)")
    args = p.parse_args(argv)
    try:
        if args.draws < 100:
            raise BadInputError(f"--draws must be at least 100; got {args.draws}")
        changes = compare(
            load_rows(args.before),
            load_rows(args.after),
            [g for g in args.choose.split(",") if g],
            args.draws,
        )
    except BadInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_changes(changes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
