"""``tiercast lab bench-forecast`` (also ``tiercast bench-forecast``): the forecasting benchmark.

Runs the fixed benchmark protocol of docs/benchmarks.md on the public traces and the
100-series speed check, and prints the tables docs/benchmarks.md quotes. Every method,
the one under test included, forecasts each series alone, as a live cycle does: ``auto``
is scored with the candidates a cycle gives it (:func:`forecaster.selection.auto_candidates`).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forecaster.backtesting import parse_max_history
from forecaster.benchmarks.accuracy import (
    BASELINES,
    STATSFORECAST_RIVALS,
    TIERCAST,
    BenchSeries,
    ForecastCache,
    StatsforecastServer,
    accuracy_rows,
    bootstrap_mean_ratio,
    coverage_by_group,
    discover,
    format_chosen,
    format_fit_times,
    format_group_table,
    format_horizon_table,
    format_table,
    history_text,
    horizon_coverage,
    horizon_verdict,
    speed,
    statsforecast_python,
    summarize,
)
from forecaster.errors import BadInputError
from forecaster.estimators import make
from forecaster.progress import Progress, add_progress_flag

DEFAULT_TRACES = Path(__file__).resolve().parents[4] / "shared" / "data" / "traces"
DEFAULT_CACHE = Path(__file__).resolve().parents[3] / ".cache" / "bench-forecast"


def _bench_methods(method: str, rivals: list[str]) -> list[str]:
    """The method under test and the rivals the benchmark compares it with."""
    return [method, *rivals]


def _rivals(args: argparse.Namespace) -> list[str]:
    rivals = [r.strip() for r in args.rivals.split(",") if r.strip()]
    unknown = [r for r in rivals if r not in BASELINES and r not in STATSFORECAST_RIVALS]
    if unknown or not rivals:
        raise BadInputError(
            f"--rivals: {','.join(unknown) or repr(args.rivals)} is not a rival; "
            f"expected a comma-separated subset of {','.join((*BASELINES, *STATSFORECAST_RIVALS))}"
        )
    if args.skip_prophet:
        rivals = [r for r in rivals if r != "prophet_default"]
    return rivals


def cmd_bench(args: argparse.Namespace) -> int:
    traces = Path(args.traces)
    if args.method in BASELINES:
        raise BadInputError(f"--method: {args.method!r} is a rival; pass the method to test")
    make(args.method)  # an unknown name fails here, before minutes of backtests
    rivals = _rivals(args)
    groups = [g.strip() for g in args.groups.split(",") if g.strip()] if args.groups else None
    needs_traces = args.accuracy or args.horizon_coverage
    if needs_traces and not traces.is_dir():
        raise BadInputError(
            f"--traces: {str(traces)!r} is not a folder; expected the public traces"
        )
    series = discover(traces, groups) if needs_traces else []
    if needs_traces and not series:
        raise BadInputError(
            f"--groups: no series of at least 14 days in {str(traces)!r} for {args.groups!r}"
        )
    cache = None if args.no_cache else ForecastCache(Path(args.cache))
    today = datetime.now(UTC).date().isoformat()
    print(f"tiercast forecasting benchmark, measured {today}")
    found = sorted({s.group for s in series})
    print(f"{len(series)} series of at least 14 days in {len(found)} groups: {', '.join(found)}")
    print(f"every method trains on {history_text(args.max_history)}")
    report: dict[str, Any] = {"date": today, "groups": found}
    # One unit per series and pass, and per fit of the speed check.
    total = len(series) * (int(args.accuracy) + int(args.horizon_coverage))
    server = _statsforecast_server(args, rivals)
    try:
        with Progress.for_args(args, "bench-forecast", total + 2 * args.speed_count, "unit") as bar:
            _bench(args, series, rivals, cache, report, bar, server)
    finally:
        if server is not None:
            server.close()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    return 0


def _statsforecast_server(
    args: argparse.Namespace, rivals: list[str]
) -> StatsforecastServer | None:
    """The statsforecast worker when a statsforecast rival is asked for (one line if it cannot start)."""
    if not any(r in STATSFORECAST_RIVALS for r in rivals) or not args.accuracy:
        return None
    python = statsforecast_python(args.statsforecast_python)
    if python is None:
        raise BadInputError(
            "--rivals: statsforecast is not installed here (it needs pandas < 3); "
            "pass --statsforecast-python PATH, an interpreter that has it"
        )
    server = StatsforecastServer(python)
    print(f"statsforecast {server.version} rivals run in {python}")
    return server


def _bench(
    args: argparse.Namespace,
    series: list[BenchSeries],
    rivals: list[str],
    cache: ForecastCache | None,
    report: dict[str, Any],
    bar: Progress,
    server: StatsforecastServer | None = None,
) -> None:
    """The benchmark's passes: tables on stdout, one line per series done on stderr."""
    if args.accuracy:
        methods = _bench_methods(args.method, rivals)
        rows = []
        for item in series:
            bar.describe(f"accuracy {item.relative}")
            rows.extend(accuracy_rows(item.y, methods, item.group, cache, args.max_history, server))
            bar.update()
            bar.write(f"  {item.relative}: done")
        summary = summarize(rows)
        spread = bootstrap_mean_ratio(rows)
        with bar.paused():
            if args.per_series:
                print()
                print(format_table(rows))
            print()
            print(
                "Mean MASE per group (ratio: tiercast's mean MASE over that of the group's best rival):"
            )
            print()
            print(format_group_table(summary, [TIERCAST + args.method, *rivals]))
            print()
            for line in summary.verdicts():
                print(f"- {line}")
            if spread is not None:
                print(f"- {spread.line()}")
                print(f"- {spread.groups_line(summary)}")
                print(f"- {spread.coverage_line(summary)}")
            print()
            print(
                "Accuracy and fit and forecast time per method, per fit (one series at one "
                "origin; cached rivals keep the time of their run):"
            )
            print()
            print(format_fit_times(rows))
            print()
            print(f"What tiercast {args.method} chose, over its fits:")
            print()
            print(format_chosen(rows), flush=True)
        if spread is not None:
            report["mean_ratio_uncertainty"] = vars(spread)
        report["accuracy"] = [vars(r) for r in rows]
        report["ratios"] = summary.ratios
        report["group_ratios"] = {g.group: g.ratio for g in summary.groups.values()}
        report["mean_ratio"] = summary.mean_ratio
    if args.horizon_coverage:
        results = []
        for item in series:
            bar.describe(f"7-day backtest {item.relative}")
            lead = horizon_coverage(item.y, args.method, item.group, max_history=args.max_history)
            if lead is not None:
                results.append(lead)
            bar.update()
            bar.write(f"  {item.relative}: 7-day backtest done")
        by_group = coverage_by_group(results)
        with bar.paused():
            print()
            print(
                f"q0.9 coverage per horizon day (tiercast {args.method}, 7-day backtests from "
                "7 daily origins ending a week before each series' end; mean over a group's series):"
            )
            print()
            print(format_horizon_table(by_group))
            print()
            print(f"- {horizon_verdict(by_group)}", flush=True)
        report["horizon_coverage"] = by_group
    if args.speed_count > 0:
        bar.describe(f"speed check, {args.speed_count} series")
        timing = speed(args.speed_count, tick=bar.tick)
        with bar.paused():
            print()
            for line in timing.lines():
                print(f"- {line}", flush=True)
        report["speed"] = vars(timing)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``bench-forecast``."""
    _add_bench_forecast(sub)


def _add_bench_forecast(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench-forecast",
        help="the forecasting benchmark of docs/benchmarks.md: accuracy by group on public traces, and speed",
        description=(
            "Accuracy protocol on every series of at least 14 days in the traces folder "
            "(15-minute means; origins daily at 00:00 over the last 7 days, or 4 for 14-day "
            "series; 24 h ahead) for tiercast's auto selection (or --method) and six rivals, "
            "scored by group (the traces README's groups), with the bootstrap uncertainty of "
            "the mean ratio and the fit time per method; optionally q0.9 coverage per day of a "
            "7-day-horizon backtest; then fit+forecast time for synthetic series of 14 days."
        ),
    )
    p.add_argument(
        "--traces",
        default=str(DEFAULT_TRACES),
        help="public traces folder (default: %(default)s)",
    )
    p.add_argument(
        "--groups",
        help="only these comma-separated groups, e.g. servegen,nyc_taxi (default: all)",
    )
    p.add_argument(
        "--no-accuracy",
        dest="accuracy",
        action="store_false",
        help="skip the accuracy table",
    )
    p.add_argument(
        "--rivals",
        default=",".join(BASELINES),
        help="comma-separated rivals (default: %(default)s)",
    )
    p.add_argument("--skip-prophet", action="store_true", help="leave out the (slow) Prophet rival")
    p.add_argument(
        "--statsforecast-python",
        metavar="PATH",
        help="a Python interpreter with statsforecast installed, for the opt-in rivals "
        f"{', '.join(STATSFORECAST_RIVALS)} (statsforecast needs pandas < 3, so it runs in "
        "its own process; default: this interpreter where it has statsforecast)",
    )
    p.add_argument(
        "--method",
        default="auto",
        help="registered estimator to benchmark against the rivals "
        "(default: %(default)s; the speed check always times auto)",
    )
    p.add_argument(
        "--horizon-coverage",
        action="store_true",
        help="also backtest the method at a 7-day horizon and print q0.9 coverage per day",
    )
    p.add_argument(
        "--per-series", action="store_true", help="also print every series' row per method"
    )
    p.add_argument(
        "--cache",
        default=str(DEFAULT_CACHE),
        help="folder for the rivals' cached backtests (default: %(default)s)",
    )
    p.add_argument("--no-cache", action="store_true", help="recompute the rivals too")
    p.add_argument(
        "--max-history",
        type=parse_max_history,
        help="train every method at every origin on only this much history before it, "
        "e.g. 15d (a metrics store's retention; default: all of it)",
    )
    p.add_argument(
        "--speed-count",
        type=int,
        default=100,
        help="series in the speed check; 0 skips it (default: %(default)s)",
    )
    # Kept for one release: every method now sees only its own series (no fleet), as
    # a live cycle forecasts each signal alone.
    p.add_argument("--no-fleet", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--json", help="also write the results as JSON here")
    add_progress_flag(p)
    p.set_defaults(func=cmd_bench)
