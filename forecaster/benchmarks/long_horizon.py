"""The long-horizon benchmark: 28-day forecasts from rolling origins, scored by lead week.

Every trace of at least :data:`MIN_DAYS` days (15-minute means, as in
:mod:`forecaster.benchmarks.accuracy`) is forecast 28 days ahead by ``auto`` from up to
``--origins`` origins a week apart, the newest 28 days before its end, each with at least
:data:`MIN_HISTORY` before it. At each origin the forecaster sees only the history a cycle
would have had then: everything before the origin, at most ``--max-history`` of it (a
history store that has kept that long), nothing after. The model is fitted once per origin;
its own 28-day forecast (``model``, what a plan had before the long-horizon rule) and the
long-horizon rule past day 7 for each ``--damping`` of the trend and each ``--scores``
error its bands are calibrated on (``long@<damping>``, ``long@<damping>/<score>`` for a
score other than the default log error, with ``/no-floor`` under ``--no-seam-floor``;
:mod:`forecaster.long_horizon`) are scored on the same actuals.

Scored per lead week (days 1-7, 8-14, 15-21, 22-28): the share of actuals inside
q0.1-q0.9 (nominal 0.80; target 0.70-0.90 per group), the share at or below q0.9 (target
0.85-0.95) and the mean absolute error of the median over the mean of the history it was
made from (not the window's own mean: a Helios tenant that goes idle has a mean near zero
there). Series are averaged within their group, groups are averaged with equal weight, and
the groups a rule is chosen on (``--choose``) are reported apart from those that confirm it.
Each group-week's coverage also gets a 90% interval over bootstrap draws of the group's
calendar test days (:func:`day_intervals`), and each half the count of group-weeks that
miss a target with their whole interval: days within a week move together (a level that
changed after the origin stays changed), so these intervals are narrower than the
uncertainty of one to three origins, and a miss by the whole of one is a miss the days
cannot explain.

    python -m forecaster.benchmarks.long_horizon --traces ../shared/data/traces
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import pickle
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd

from forecaster import forecasting
from forecaster.benchmarks.accuracy import CHOOSE, BenchSeries, calendar_draws, discover, span_days
from forecaster.long_horizon import BAND_SCORE, BAND_SCORES, DAMPING, long_horizon_frame
from forecaster.series import infer_step, regularize
from forecaster.store import ModelStore

WEEKS = 4
HORIZON = pd.Timedelta(days=7 * WEEKS)
MIN_DAYS = 35
"""Traces shorter than this are left out (a week of history before 28 days ahead)."""
MIN_HISTORY = pd.Timedelta(days=7)
"""History an origin needs before it."""
QUANTILES = (0.1, 0.5, 0.9)


def traces_folder(path: str) -> Path | None:
    """The public traces folder at ``path``; None, saying on stderr that the benchmark is
    skipped, where there is none."""
    traces = Path(path)
    if traces.is_dir():
        return traces
    print(f"skipped: no traces folder at {traces}", file=sys.stderr)
    return None


def long_series(traces: Path, groups: Sequence[str] | None) -> Iterator[BenchSeries]:
    """Every trace of ``groups`` (None: all) under ``traces`` of at least :data:`MIN_DAYS`,
    announced on stderr as it comes."""
    for s in discover(traces, groups):
        if span_days(s.y) >= MIN_DAYS:
            print(f"{s.relative} ...", file=sys.stderr, flush=True)
            yield s


def origins_of(y: pd.Series, count: int) -> list[pd.Timestamp]:
    """Up to ``count`` origins a week apart, the newest :data:`HORIZON` before the end,
    each with :data:`MIN_HISTORY` before it; newest first."""
    newest = y.index[-1] - HORIZON
    out = [newest - pd.Timedelta(days=7 * k) for k in range(count)]
    return [o for o in out if o - y.index[0] >= MIN_HISTORY]


def model_frame(history: pd.Series, cache: Path | None, key: str) -> tuple[pd.DataFrame, str]:
    """``auto``'s own 28-day forecast on ``history`` (no long-horizon rule) and its label;
    kept in ``cache`` under ``key`` when given."""
    path = None
    if cache is not None:
        digest = hashlib.sha256(
            key.encode() + pd.util.hash_pandas_object(history).to_numpy().tobytes()
        ).hexdigest()[:20]
        path = cache / f"{digest}.pkl"
        if path.is_file():
            with path.open("rb") as f:
                frame, label = pickle.load(f)  # our own cache, written above
            return frame, label
    never = pd.Timedelta(days=10**4)
    with mock.patch.object(forecasting, "LONG_HORIZON", never):
        fc = forecasting.forecast_series(history, HORIZON, QUANTILES, "auto", ModelStore(None))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:
            pickle.dump((fc.frame, fc.estimator), f)
    return fc.frame, fc.estimator


def score_series(
    s: BenchSeries,
    origins: int,
    max_history: pd.Timedelta,
    dampings: Sequence[float],
    cache: Path | None = None,
    scores: Sequence[str] = (BAND_SCORE,),
    seam_floor: bool = True,
) -> list[dict[str, object]]:
    """The rows of one series: per origin, variant and lead week, coverage and error."""
    rows: list[dict[str, object]] = []
    for origin in origins_of(s.y, origins):
        history = s.y[(s.y.index <= origin) & (s.y.index > origin - max_history)]
        actual = s.y[(s.y.index > origin) & (s.y.index <= origin + HORIZON)]
        frame, label = model_frame(history, cache, f"{s.relative}|{origin}|{max_history}")
        regular = regularize(history)
        variants = {"model": frame}
        for d, score in itertools.product(dampings, scores):
            name = f"long@{d:g}" + ("" if score == BAND_SCORE else f"/{score}")
            variants[name + ("" if seam_floor else "/no-floor")] = long_horizon_frame(
                regular, frame, infer_step(regular), QUANTILES, d, score, seam_floor
            )[0]
        ahead = (pd.DatetimeIndex(actual.index) - origin) / pd.Timedelta(days=1)
        lead = np.asarray(ahead, dtype=np.float64)
        a = actual.to_numpy(dtype=float)
        scale = float(np.nanmean(np.abs(history.to_numpy(dtype=float))))
        days = (history.index[-1] - history.index[0]) / pd.Timedelta(days=1)
        for name, f in variants.items():
            f = f.reindex(actual.index)
            lo, mid, hi = (f[f"q{q}"].to_numpy(dtype=float) for q in QUANTILES)
            for week in range(1, WEEKS + 1):
                m = (lead > 7 * (week - 1)) & (lead <= 7 * week) & np.isfinite(a)
                if not m.any():
                    continue
                inside, below = (a >= lo) & (a <= hi), a <= hi
                rows.append(
                    {
                        "group": s.group,
                        "series": s.relative,
                        "origin": str(origin),
                        "history_days": round(days, 1),
                        "estimator": label,
                        "variant": name,
                        "week": week,
                        "coverage": float(np.mean(inside[m])),
                        "q0.9": float(np.mean(below[m])),
                        "error": float(np.mean(np.abs(a[m] - mid[m]))) / scale
                        if scale > 0
                        else np.nan,
                        **day_counts(origin, lead, m, inside, below),
                    }
                )
    return rows


def day_counts(
    origin: pd.Timestamp, lead: np.ndarray, m: np.ndarray, inside: np.ndarray, below: np.ndarray
) -> dict[str, tuple[object, ...]]:
    """Per lead day of one week's scored actuals (``m``): its calendar day (the origin's
    date plus the lead day), how many actuals, how many inside q0.1-q0.9 and at or below
    q0.9: what :func:`day_intervals` draws."""
    day = np.ceil(lead[m]).astype(int)
    keys = sorted(set(day.tolist()))
    return {
        "days": tuple(str((origin + pd.Timedelta(days=int(k))).date()) for k in keys),
        "day_n": tuple(int(np.sum(day == k)) for k in keys),
        "day_inside": tuple(int(np.sum(inside[m][day == k])) for k in keys),
        "day_below": tuple(int(np.sum(below[m][day == k])) for k in keys),
    }


def day_intervals(
    rows: Sequence[dict[str, object]], draws: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Per variant, group and lead week, the 90% interval of q0.1-q0.9 coverage and of q0.9
    coverage over bootstrap draws of the group's calendar test days (with replacement, the
    same days for every series of the group, as the day-ahead benchmark draws them), each
    draw averaged as :func:`by_group` averages (series over their origins, then over the
    group's series). Columns ``coverage_lo``, ``coverage_hi``, ``q0.9_lo``, ``q0.9_hi``."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame([r for r in rows if "days" in r])
    out = []
    for (variant, group, week), part in frame.groupby(["variant", "group", "week"], sort=True):
        calendar = sorted({d for days in part["days"] for d in days})
        where = {d: i for i, d in enumerate(calendar)}
        times = calendar_draws(rng, len(calendar), draws)
        counts = {k: np.zeros((len(part), len(calendar))) for k in ("n", "inside", "below")}
        for i, r in enumerate(part.to_dict("records")):
            cols = [where[d] for d in r["days"]]
            for key in counts:
                counts[key][i, cols] = r[f"day_{key}"]
        seen = times @ counts["n"].T  # draws x rows
        row: dict[str, object] = {"variant": variant, "group": group, "week": week}
        for metric, key in (("coverage", "inside"), ("q0.9", "below")):
            with np.errstate(invalid="ignore", divide="ignore"):
                share = pd.DataFrame(np.where(seen > 0, (times @ counts[key].T) / seen, np.nan))
            # Each series' mean over its origins, then the group's over its series.
            share.columns = part["series"].to_numpy()
            value = share.T.groupby(level=0).mean().mean(axis=0).to_numpy()
            value = value[np.isfinite(value)]
            row[f"{metric}_lo"] = float(np.percentile(value, 5)) if value.size else np.nan
            row[f"{metric}_hi"] = float(np.percentile(value, 95)) if value.size else np.nan
        out.append(row)
    return pd.DataFrame(out)


def by_group(rows: Sequence[dict[str, object]]) -> pd.DataFrame:
    """Mean over each group's series (each series' mean over its origins), per variant and
    lead week."""
    frame = pd.DataFrame(list(rows))
    per_series = frame.groupby(["group", "series", "variant", "week"])[
        ["coverage", "q0.9", "error"]
    ].mean()
    return per_series.groupby(["group", "variant", "week"]).mean()


def summary(rows: Sequence[dict[str, object]], choose: Sequence[str]) -> str:
    """Per variant: coverage, q0.9 coverage and error by group and lead week; the means of
    the groups chosen on and of those that confirm; and the targets, half by half."""
    groups = by_group(rows).reset_index()
    spans = day_intervals(rows) if any("days" in r for r in rows) else pd.DataFrame()
    lines: list[str] = []
    for variant in dict.fromkeys(groups["variant"]):
        part = groups[groups["variant"] == variant]
        lines.append(f"== {variant}: q0.1-q0.9 coverage | q0.9 coverage | error, by lead week")
        for metric in ("coverage", "q0.9", "error"):
            table = part.pivot(index="group", columns="week", values=metric)
            table.columns = [f"{metric} w{w}" for w in table.columns]
            half = np.where(table.index.isin(choose), "choose", "confirm")
            means = table.groupby(half).mean()
            means.index = [f"mean {h}" for h in means.index]
            lines += [pd.concat([table, means]).round(3).to_string(), ""]
            if metric != "error" and not spans.empty:
                lines += [interval_table(spans[spans["variant"] == variant], metric), ""]
        for label, keep in (
            ("choose", part["group"].isin(choose)),
            ("confirm", ~part["group"].isin(choose)),
        ):
            sub = part[keep]
            if sub.empty:
                continue
            cov_out = sub[(sub["coverage"] < 0.70) | (sub["coverage"] > 0.90)]
            q9_out = sub[(sub["q0.9"] < 0.85) | (sub["q0.9"] > 0.95)]
            lines.append(
                f"{label} half ({', '.join(sorted(set(sub['group'])))}): group-weeks with "
                f"q0.1-q0.9 coverage outside 0.70-0.90: {len(cov_out)} of {len(sub)}; "
                f"q0.9 coverage outside 0.85-0.95: {len(q9_out)} of {len(sub)}"
            )
            if not spans.empty:
                lines.append(f"  {outside_whole_interval(sub, spans[spans['variant'] == variant])}")
        lines.append("")
    return "\n".join(lines)


def interval_table(spans: pd.DataFrame, metric: str) -> str:
    """Each group's 90% interval of ``metric`` over test days, by lead week."""
    low, high = spans[f"{metric}_lo"], spans[f"{metric}_hi"]
    span = [f"{lo:.2f}..{hi:.2f}" for lo, hi in zip(low, high, strict=True)]
    text = spans.assign(span=span).pivot(index="group", columns="week", values="span")
    text.columns = [f"{metric} w{w} 90%" for w in text.columns]
    return text.to_string()


def outside_whole_interval(part: pd.DataFrame, spans: pd.DataFrame) -> str:
    """How many of ``part``'s group-weeks lie outside each target with their whole 90%
    interval over test days (:func:`day_intervals`): the misses the test days can tell from
    a calibrated band."""
    merged = part.merge(spans, on=["group", "week"], how="left")
    cov = (merged["coverage_hi"] < 0.70) | (merged["coverage_lo"] > 0.90)
    q9 = (merged["q0.9_hi"] < 0.85) | (merged["q0.9_lo"] > 0.95)
    return (
        "with the whole 90% interval over test days outside the target: q0.1-q0.9 "
        f"{int(cov.sum())} of {len(merged)}, q0.9 {int(q9.sum())} of {len(merged)}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m forecaster.benchmarks.long_horizon")
    p.add_argument("--traces", default="../shared/data/traces", help="the public traces folder")
    p.add_argument("--choose", default=",".join(CHOOSE), help="groups chosen on; others confirm")
    p.add_argument("--groups", default="", help="comma-separated groups to run (default: all)")
    p.add_argument("--origins", type=int, default=3, help="origins a week apart per series")
    p.add_argument("--max-history", default="60d", help="most history an origin sees")
    p.add_argument(
        "--damping",
        default=f"{DAMPING:g}",
        help="trend dampings of the long-horizon rule to score, comma-separated (0: no trend)",
    )
    p.add_argument(
        "--scores",
        default=BAND_SCORE,
        help=f"backtest errors the bands are calibrated on, comma-separated: "
        f"{', '.join(BAND_SCORES)}",
    )
    p.add_argument(
        "--no-seam-floor",
        action="store_true",
        help="let the rule's backtests alone set the bands (not floored at the model's)",
    )
    p.add_argument("--cache", default="", help="folder keeping each origin's model forecast")
    p.add_argument("--rows", default="", help="write every row as CSV here")
    args = p.parse_args(argv)
    traces = traces_folder(args.traces)
    if traces is None:
        return 0
    try:
        max_history = pd.Timedelta(args.max_history.upper())
        dampings = [float(d) for d in args.damping.split(",") if d]
        scores = [s for s in args.scores.split(",") if s]
        unknown = sorted(set(scores) - set(BAND_SCORES))
        if unknown:
            raise ValueError(f"unknown --scores {', '.join(unknown)}")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    wanted = [g for g in args.groups.split(",") if g] or None
    cache = Path(args.cache) if args.cache else None
    rows: list[dict[str, object]] = []
    for s in long_series(traces, wanted):
        rows += score_series(
            s, args.origins, max_history, dampings, cache, scores, not args.no_seam_floor
        )
    if not rows:
        print("no trace of 35 days or more", file=sys.stderr)
        return 0
    if args.rows:
        pd.DataFrame(rows).to_csv(args.rows, index=False)
    print(summary(rows, [g for g in args.choose.split(",") if g]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
