"""The long-horizon benchmark: 14- and 30-day forecasts with and without the long-horizon rule.

Every trace of at least 28 days (15-minute means, as in :mod:`forecaster.benchmarks.accuracy`)
is forecast from one origin, 30 days before its end where it spans 50 days or more, else 14,
on up to 60 days of history before it, by ``auto`` as a plan of that horizon asks for it: once
with the long-horizon rule past day 7 (:mod:`forecaster.long_horizon`), once with the model's
own forecast all the way (what it was before), from the same fitted model. Scored per lead
window (days 1, 2-7, 8-14, 15-30): the mean absolute error of the median over the mean of
the history it was made from (not the window's own mean: a Helios tenant that goes idle
has a mean near zero there, and any forecast of its usual level would score 20 times its
error), and the share of actuals inside q0.1-q0.9 (nominal 0.80), averaged by group.

    python -m forecaster.benchmarks.long_horizon --traces ../shared/data/traces
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd

from forecaster import forecasting
from forecaster.benchmarks.accuracy import ORIGINAL_GROUPS, BenchSeries, discover, span_days
from forecaster.store import ModelStore

WINDOWS: tuple[tuple[int, int], ...] = ((0, 1), (1, 7), (7, 14), (14, 30))
"""Lead windows scored, in days after the origin: (after, up to)."""
MIN_DAYS = 28
LONG_DAYS = 50
HISTORY = pd.Timedelta(days=60)
VARIANTS = ("model", "long")


def score_series(s: BenchSeries) -> list[dict[str, object]]:
    """The rows of one series: per variant and lead window, error and coverage."""
    horizon_days = 30 if span_days(s.y) >= LONG_DAYS else 14
    origin = s.y.index[-1] - pd.Timedelta(days=horizon_days)
    history = s.y[(s.y.index <= origin) & (s.y.index > origin - HISTORY)]
    actual = s.y[s.y.index > origin]
    lead = np.asarray((actual.index - origin) / pd.Timedelta(days=1), dtype=float)
    store = ModelStore(path=None)
    rows: list[dict[str, object]] = []
    for variant in VARIANTS:
        never = pd.Timedelta(days=10**4)
        long_after = forecasting.LONG_HORIZON if variant == "long" else never
        with mock.patch.object(forecasting, "LONG_HORIZON", long_after):
            fc = forecasting.forecast_series(
                history, pd.Timedelta(days=horizon_days), (0.1, 0.5, 0.9), "auto", store
            )
        frame = fc.frame.reindex(actual.index)
        a = actual.to_numpy(dtype=float)
        for after, upto in WINDOWS:
            m = (lead > after) & (lead <= upto) & np.isfinite(a)
            if upto > horizon_days or not m.any():
                continue
            mid = frame["q0.5"].to_numpy()[m]
            lo, hi = frame["q0.1"].to_numpy()[m], frame["q0.9"].to_numpy()[m]
            scale = float(np.nanmean(np.abs(history.to_numpy(dtype=float))))
            rows.append(
                {
                    "group": s.group,
                    "series": s.relative,
                    "variant": variant,
                    "window": f"{after + 1}-{upto}",
                    "error": float(np.mean(np.abs(a[m] - mid))) / scale if scale > 0 else np.nan,
                    "coverage": float(np.mean((a[m] >= lo) & (a[m] <= hi))),
                }
            )
    return rows


def summary(rows: Sequence[dict[str, object]], dev_groups: Sequence[str]) -> str:
    """By group and lead window: error and coverage of both variants, then the means over
    the groups chosen on and the groups that confirm."""
    frame = pd.DataFrame(list(rows))
    table = frame.pivot_table(
        index=["window", "group"], columns="variant", values=["error", "coverage"], aggfunc="mean"
    )
    table.columns = [f"{c[1]} {c[0]}" for c in table.columns.to_flat_index()]
    table = table[[f"{v} {m}" for m in ("error", "coverage") for v in VARIANTS]]
    order = {f"{a + 1}-{b}": i for i, (a, b) in enumerate(WINDOWS)}
    table = table.sort_index(key=lambda idx: idx.map(lambda x: order.get(x, x)))
    lines = [table.round(3).to_string(), ""]
    by_group = table.reset_index()
    for label, keep in (
        ("chosen on", by_group["group"].isin(dev_groups)),
        ("confirming", ~by_group["group"].isin(dev_groups)),
        ("all groups", by_group["group"].notna()),
    ):
        part = by_group[keep].groupby("window")[list(table.columns)].mean()
        part = part.sort_index(key=lambda idx: idx.map(lambda x: order.get(x, x)))
        groups = sorted(set(by_group[keep]["group"]))
        lines += [
            f"mean over groups, {label} ({', '.join(groups)}):",
            part.round(3).to_string(),
            "",
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m forecaster.benchmarks.long_horizon")
    p.add_argument("--traces", default="../shared/data/traces", help="the public traces folder")
    p.add_argument(
        "--dev-groups",
        default=",".join(("helios_earth", *ORIGINAL_GROUPS)),
        help="groups the rule was chosen on (the others confirm)",
    )
    args = p.parse_args(argv)
    traces = Path(args.traces)
    if not traces.is_dir():
        print(f"skipped: no traces folder at {traces}", file=sys.stderr)
        return 0
    rows: list[dict[str, object]] = []
    for s in discover(traces):
        if span_days(s.y) < MIN_DAYS:
            continue
        print(f"{s.relative} ...", file=sys.stderr, flush=True)
        rows += score_series(s)
    print(summary(rows, [g for g in args.dev_groups.split(",") if g]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
