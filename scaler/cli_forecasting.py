"""``tiercast backtest`` and ``tiercast bench-forecast``: how far to trust the forecasts.

``backtest`` runs rolling-origin cross-validation of one or more estimators on a
CSV history and prints a table (and optionally JSON): MASE, scaled pinball loss
and coverage per quantile, interval coverage, fit seconds. ``bench-forecast``
runs the fixed benchmark protocol of the README on the public traces and the
100-series speed check, and prints the tables the README quotes.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from forecaster.backtesting import backtest, daily_origins, protocol_origins
from forecaster.benchmarking import (
    BASELINES,
    BENCH_SERIES,
    WINDOW_EXTRA,
    accuracy_rows,
    bootstrap_mean_ratio,
    family_ratios,
    format_table,
    holdout_windows,
    load_bench_series,
    speed,
    summarize,
)
from forecaster.errors import BadInputError
from forecaster.estimators import make, quantile_column
from forecaster.series import infer_step, parse_duration, read_history_csv, regularize
from scaler.cli import parse_quantiles, select_series

DEFAULT_TRACES = Path(__file__).resolve().parents[2] / "shared" / "data" / "traces"


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def cmd_backtest(args: argparse.Namespace) -> int:
    history = read_history_csv(args.history)
    if args.series:
        history = {args.series: select_series(history, args.series)}
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for method in methods:
        make(method)  # unknown names fail here, in one line, before any work
    quantiles = [q for q, _ in parse_quantiles(args.quantiles)]
    horizon = parse_duration(args.horizon)
    results: list[dict[str, Any]] = []
    header = f"{'series':<28} {'method':<22} {'MASE':>7}"
    for q in quantiles:
        header += f" {'pin ' + quantile_column(q):>10} {'cov ' + quantile_column(q):>10}"
    header += f" {'interval':>9} {'origins':>7} {'fit s':>7}"
    print(header)
    for name, raw in history.items():
        y = regularize(raw, parse_duration(args.resample) if args.resample else None).rename(name)
        step = infer_step(y)
        steps = max(1, math.ceil(horizon / step))
        if args.origins:
            origins = sorted(daily_origins(y, args.origins, steps))
        else:
            origins = protocol_origins(y)
        origins = [o for o in origins if y[y.index < o].notna().sum() >= 2]
        if not origins:
            raise BadInputError(f"series {name!r}: no backtest origin with history before it")
        for method in methods:
            bt = backtest(partial(make, method), y, origins, steps, quantiles, label=method)
            scores = bt.scores()
            line = f"{name[:28]:<28} {method[:22]:<22} {scores['mase']:>7.3f}"
            for q in quantiles:
                col = quantile_column(q)
                line += f" {scores['pinball_' + col]:>10.3f} {scores['coverage_' + col]:>10.3f}"
            line += f" {scores.get('interval_coverage', float('nan')):>9.3f}"
            line += f" {len(origins):>7d} {bt.fit_seconds:>7.2f}"
            print(line)
            results.append(
                {
                    "series": name,
                    "method": method,
                    "step_s": step.total_seconds(),
                    "horizon_steps": steps,
                    "origins": [o.isoformat() for o in origins],
                    "scores": {k: _clean(v) for k, v in scores.items()},
                    "notes": bt.notes[:20],
                }
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
        print(f"backtest written to {args.json}", file=sys.stderr)
    return 0


def _bench_methods(method: str, skip_prophet: bool) -> list[str]:
    """The method under test and the baselines the benchmark compares it with."""
    return [method, *(b for b in BASELINES if not (skip_prophet and b == "prophet_default"))]


def cmd_bench(args: argparse.Namespace) -> int:
    traces = Path(args.traces)
    loaded: dict[str, pd.Series] = {}

    def load(rel: str) -> pd.Series:
        """Each trace read once, whether the accuracy table, the windows or both need it."""
        if rel not in loaded:
            loaded[rel] = load_bench_series(traces / rel)
        return loaded[rel]

    if args.method in BASELINES:
        raise BadInputError(f"--method: {args.method!r} is a baseline; pass the method to test")
    make(args.method)  # an unknown name fails here, before minutes of backtests
    missing = [rel for rel in BENCH_SERIES if not (traces / rel).is_file()]
    if args.accuracy and missing:
        raise BadInputError(
            f"--traces: {str(traces)!r} lacks {', '.join(missing)}; expected the public traces folder"
        )
    today = datetime.now(UTC).date().isoformat()
    print(f"tiercast forecasting benchmark, measured {today}")
    report: dict[str, Any] = {"date": today}
    if args.accuracy:
        methods = _bench_methods(args.method, args.skip_prophet)
        rows = []
        for rel in BENCH_SERIES:
            rows.extend(accuracy_rows(load(rel), methods))
            print(f"  {rel}: done", file=sys.stderr, flush=True)
        print()
        print(format_table(rows))
        summary = summarize(rows)
        print()
        for line in summary.verdicts():
            print(f"- {line}")
        print(
            "- MASE ratio per series: "
            + ", ".join(f"{k} {v:.3f}" for k, v in summary.ratios.items())
        )
        spread = bootstrap_mean_ratio(rows)
        if spread is not None:
            print(f"- {spread.line()}")
            report["mean_ratio_uncertainty"] = vars(spread)
        report["accuracy"] = [vars(r) for r in rows]
        report["ratios"] = summary.ratios
    if args.windows:
        _bench_windows(traces, load, _bench_methods(args.method, args.skip_prophet), report)
    if args.speed_count > 0:
        result = speed(args.speed_count)
        print()
        for line in result.lines():
            print(f"- {line}")
        report["speed"] = vars(result)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    return 0


def _bench_windows(
    traces: Path,
    load: Callable[[str], pd.Series],
    methods: list[str],
    report: dict[str, Any],
) -> None:
    """The held-out windows: the protocol on earlier weeks of the traces (see benchmarking)."""
    rows = []
    sources = [(rel, False) for rel in BENCH_SERIES] + [(rel, True) for rel in WINDOW_EXTRA]
    for rel, extra in sources:
        if not (traces / rel).is_file():
            print(f"  {rel}: not in {traces}, skipped", file=sys.stderr, flush=True)
            continue
        for y in holdout_windows(load(rel), extra=extra):
            rows.extend(accuracy_rows(y, methods))
        print(f"  {rel} windows: done", file=sys.stderr, flush=True)
    summary = summarize(rows)
    families = family_ratios(summary)
    print()
    print(
        "Held-out windows (earlier test periods of the same traces; MASE ratio to the best baseline):"
    )
    print()
    print("| window | ratio | q0.9 coverage |")
    print("| --- | ---: | ---: |")
    for name, ratio in summary.ratios.items():
        print(f"| {name} | {ratio:.3f} | {summary.coverage[name]:.3f} |")
    print()
    print(
        f"- {len(summary.ratios)} windows of {len(families)} traces; mean ratio per trace: "
        + ", ".join(f"{k} {v:.3f}" for k, v in families.items())
    )
    worse = sum(r > 1.0 for r in summary.ratios.values())
    print(
        f"- mean over traces {np.mean(list(families.values())):.3f}; "
        f"windows worse than their best baseline: {worse} of {len(summary.ratios)}"
    )
    report["windows"] = {"ratios": summary.ratios, "coverage": summary.coverage}
    report["window_families"] = families


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "backtest",
        help="rolling-origin backtest of estimators on a CSV history; table and JSON",
        description=(
            "Refit each method at every origin on the data before it and score the next "
            "horizon: MASE and pinball loss scaled by the in-sample one-day seasonal naive "
            "MAE, coverage per quantile. Default origins: every 00:00 in the last 7 days "
            "(4 for series of 14 days or less)."
        ),
    )
    p.add_argument("--history", required=True, help="CSV history (timestamp,value or long format)")
    p.add_argument("--series", help="only this series of a long-format file")
    p.add_argument(
        "--methods",
        default="auto,seasonal_naive_1d,seasonal_naive_7d",
        help="comma-separated estimator names (default: %(default)s)",
    )
    p.add_argument("--horizon", default="24h", help="forecast horizon (default: %(default)s)")
    p.add_argument(
        "--quantiles", default="0.1,0.5,0.9", help="quantiles to score (default: %(default)s)"
    )
    p.add_argument(
        "--origins",
        type=int,
        help="instead of the protocol's origins: this many origins one day apart, ending a horizon before the end",
    )
    p.add_argument("--resample", help="resample to this step first (mean), e.g. 15m")
    p.add_argument("--json", help="also write the results as JSON here")
    p.set_defaults(func=cmd_backtest)

    p = sub.add_parser(
        "bench-forecast",
        help="the README's forecasting benchmark: accuracy on public traces and speed",
        description=(
            "Accuracy protocol on five public traces (15-minute means; origins daily at 00:00 "
            "over the last 7 days, or 4 for 14-day series; 24 h ahead) for tiercast's auto "
            "selection (or --method) and the baselines, with the bootstrap uncertainty of the "
            "mean ratio, then fit+forecast time for synthetic series of 14 days."
        ),
    )
    p.add_argument(
        "--traces",
        default=str(DEFAULT_TRACES),
        help="public traces folder (default: %(default)s)",
    )
    p.add_argument(
        "--no-accuracy",
        dest="accuracy",
        action="store_false",
        help="skip the accuracy table",
    )
    p.add_argument(
        "--skip-prophet", action="store_true", help="leave out the (slow) Prophet baseline"
    )
    p.add_argument(
        "--method",
        default="auto",
        help="registered estimator to benchmark against the baselines, e.g. auto_mix "
        "(default: %(default)s; the speed check always times auto)",
    )
    p.add_argument(
        "--windows",
        action="store_true",
        help="also run the held-out windows: the protocol on earlier weeks of the traces "
        "(several minutes with the Prophet baseline)",
    )
    p.add_argument(
        "--speed-count",
        type=int,
        default=100,
        help="series in the speed check; 0 skips it (default: %(default)s)",
    )
    p.add_argument("--json", help="also write the results as JSON here")
    p.set_defaults(func=cmd_bench)
