"""``tiercast simulate``: replay a demand CSV walk-forward under every scaling policy.

Prints the replay table (cost, cost against the oracle and the clairvoyant,
unserved demand), writes the timeline CSV and a chart. The protocol and the
policies are in :mod:`scaler.replay.simulating`.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from forecaster.errors import BadInputError, DataError
from forecaster.progress import Progress, add_progress_flag
from forecaster.series import parse_duration, read_history_csv
from scaler.cli.common import select_series
from scaler.replay.simulating import (
    POLICIES,
    ReplaySetup,
    SuiteResult,
    SuiteSeries,
    format_summary,
    format_table,
    format_tiers,
    load_suite,
    prepare_trace,
    run_replay,
    suite_result,
    timeline_frame,
    write_chart,
)


def _setup(args: argparse.Namespace) -> ReplaySetup:
    try:
        reforecast = parse_duration(args.reforecast)
    except DataError as exc:
        raise BadInputError(f"--reforecast: {exc}") from exc
    if not 0 <= args.spot_max_share <= 1:
        raise BadInputError(
            f"--spot-max-share must be between 0 and 1; got {args.spot_max_share!r}"
        )
    if args.stabilization is None:
        stabilization_s = ReplaySetup().stabilization_s
    else:
        try:
            text = str(args.stabilization).strip()
            # A bare number is seconds (0 allowed: no stabilization).
            stabilization_s = (
                int(text) if text.isdigit() else int(parse_duration(text).total_seconds())
            )
        except DataError as exc:
            raise BadInputError(f"--stabilization: {exc}") from exc
    if not 0 <= args.unserved_budget <= 0.5:
        raise BadInputError(
            f"--unserved-budget must be between 0 and 0.5; got {args.unserved_budget!r}"
        )
    return replace(
        ReplaySetup(),
        reforecast_s=int(reforecast.total_seconds()),
        forecast_method=args.method,
        seed=args.seed,
        spot_max_share=args.spot_max_share,
        stabilization_s=stabilization_s,
        unserved_budget=args.unserved_budget,
    )


def _suite_one(
    folder: str, entry: SuiteSeries, setup: ReplaySetup, policies: list[str], tiers: bool
) -> tuple[str, SuiteResult]:
    """Replay one suite series; the printed block and the figures for the summary."""
    path = Path(folder) / entry.path
    try:
        history = read_history_csv(path)
    except DataError as exc:
        raise BadInputError(f"--suite: {entry.path}: {exc}") from exc
    series = next(iter(history.values()))
    trace = prepare_trace(series.rename(path.stem), entry.units_per_gpu, setup)
    replay = run_replay(trace, setup, policies, tiers=tiers)
    test = trace.test_index
    result = suite_result(entry, replay)
    block = [
        f"== {entry.path} ({entry.group}) | demand = ceil(value / {entry.units_per_gpu:g}) GPUs | "
        f"test {test[0]:%Y-%m-%d %H:%M} to {test[-1]:%Y-%m-%d %H:%M}",
        format_table(replay),
    ]
    if tiers:
        block.append(format_tiers(replay))
    if result.margin:
        block.append(f"predictive: {result.margin}")
    return "\n".join(block), result


def cmd_suite(args: argparse.Namespace) -> int:
    folder = Path(args.suite)
    if not folder.is_dir():
        raise BadInputError(f"--suite: {str(folder)!r} is not a folder (the traces folder)")
    suite = load_suite(args.suite_file) if args.suite_file else load_suite()
    setup = _setup(args)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    missing = [e.path for e in suite.series if not (folder / e.path).is_file()]
    if missing:
        raise BadInputError(
            f"--suite: {len(missing)} file(s) of suite {suite.name!r} are not in {str(folder)!r}, "
            f"e.g. {missing[0]}"
        )
    print(
        f"tiercast simulate --suite {args.suite} | suite {suite.name!r}, {len(suite.series)} series | "
        f"{setup.gpus_per_node}-GPU nodes, ${setup.price_per_gpu_hour:g}/GPU-h, lead {setup.lead_time_s // 60} min | "
        f"reforecast every {args.reforecast}",
        flush=True,
    )
    results: list[SuiteResult] = []
    with Progress.for_args(args, "simulate --suite", len(suite.series), "series") as bar:
        if args.jobs > 1:
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(args.jobs) as pool:
                futures = [
                    pool.submit(_suite_one, str(folder), e, setup, policies, args.tiers)
                    for e in suite.series
                ]
                for e, f in zip(suite.series, futures, strict=True):
                    bar.describe(e.path)
                    block, result = f.result()
                    bar.write(block + "\n", sys.stdout)
                    results.append(result)
                    bar.update()
        else:
            for e in suite.series:
                bar.describe(e.path)
                block, result = _suite_one(str(folder), e, setup, policies, args.tiers)
                bar.write(block + "\n", sys.stdout)
                results.append(result)
                bar.update()
    print(format_summary(results, suite))
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    if (args.history is None) == (args.suite is None):
        raise BadInputError("simulate: give exactly one of --history CSV or --suite DIR")
    if args.suite is not None:
        return cmd_suite(args)
    try:
        history = read_history_csv(args.history)
    except DataError as exc:
        raise BadInputError(f"--history: {exc}") from exc
    series = select_series(history, args.series)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    setup = _setup(args)
    trace = prepare_trace(
        series.rename(Path(args.history).stem if args.series is None else args.series),
        args.units_per_gpu,
        setup,
    )
    test = trace.test_index
    print(
        f"tiercast simulate | {args.history} | demand = ceil(value / {args.units_per_gpu:g}) GPUs | "
        f"test {test[0]:%Y-%m-%d %H:%M} to {test[-1]:%Y-%m-%d %H:%M} ({len(test)} steps of 5 min) | "
        f"{setup.gpus_per_node}-GPU nodes, ${setup.price_per_gpu_hour:g}/GPU-h, lead {setup.lead_time_s // 60} min | "
        f"reforecast every {args.reforecast}"
    )

    # The replay reports each simulated day of each run of the planner.
    runs = int("predictive" in policies) + int(args.tiers)
    with Progress.for_args(args, "simulate", runs * (len(test) // 288), "day") as bar:

        def progress(msg: str) -> None:
            if bar.enabled:
                bar.update(label=msg)
            else:
                print(msg, file=sys.stderr, flush=True)

        replay = run_replay(
            trace,
            setup,
            policies,
            tiers=args.tiers,
            progress=progress if args.progress or bar.enabled else None,
        )
    print(format_table(replay))
    if args.tiers:
        print(format_tiers(replay))
    for name, run in replay.runs.items():
        if run.plans:
            print(f"{name}: {run.plans} plans in {run.seconds:.1f} s", file=sys.stderr)
    if args.timeline_out:
        Path(args.timeline_out).parent.mkdir(parents=True, exist_ok=True)
        timeline_frame(replay).to_csv(args.timeline_out, index=False)
        print(f"timeline written to {args.timeline_out}")
    if args.chart_out:
        Path(args.chart_out).parent.mkdir(parents=True, exist_ok=True)
        write_chart(replay, args.chart_out)
        print(f"chart written to {args.chart_out}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="replay a demand CSV walk-forward: static, reactive, predictive, clairvoyant, oracle",
        description=(
            "Replay a demand history walk-forward under the published protocol (5-minute steps, "
            "8-GPU nodes, $4/GPU-h, 10-minute lead time; test period the last 7 days, or 4 for "
            "series of 14 days or less) and compare tiercast's planner with the baselines."
        ),
    )
    p.add_argument("--history", help="CSV (timestamp,value or long format)")
    p.add_argument(
        "--suite",
        metavar="DIR",
        help="replay every series of the suite definition from this traces folder "
        "(one table per series, then the summary over groups)",
    )
    p.add_argument(
        "--suite-file",
        help="suite definition (YAML; default: the dev suite, scaler/replay/replay_suite.yaml)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="suite series replayed at once, in worker processes (default: %(default)s)",
    )
    p.add_argument("--series", help="the series to replay from a long-format file")
    p.add_argument(
        "--units-per-gpu",
        type=float,
        default=1.0,
        help="signal units one GPU serves: demand = ceil(value / this) (default 1)",
    )
    p.add_argument(
        "--policies",
        default=",".join(POLICIES),
        help="comma-separated policies to report (default: %(default)s)",
    )
    p.add_argument(
        "--tiers",
        action="store_true",
        help="also replay tiercast on reserved ($2.40) + spot ($1.40, 5%%/h reclaims) + on-demand",
    )
    p.add_argument(
        "--reforecast",
        default="1h",
        help="how often the forecast is refreshed in simulated time (default: %(default)s)",
    )
    p.add_argument(
        "--method", default="auto", help="forecast estimator or 'auto' (default: %(default)s)"
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the spot reclaims (default: %(default)s)"
    )
    p.add_argument(
        "--spot-max-share",
        type=float,
        default=0.5,
        help="spot market depth as a share of the training peak in nodes (default: %(default)s)",
    )
    p.add_argument(
        "--stabilization",
        help="predictive: policy.scale_down_stabilization_s, seconds or a duration (default: 20m)",
    )
    p.add_argument(
        "--unserved-budget",
        type=float,
        default=ReplaySetup().unserved_budget,
        help="predictive: policy.unserved_budget, what a learnt margin may leave unserved "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--timeline-out",
        default="tiercast-timeline.csv",
        help="timeline CSV (default: %(default)s; '' for none)",
    )
    p.add_argument(
        "--chart-out",
        default="tiercast-replay.png",
        help="chart PNG (default: %(default)s; '' for none)",
    )
    p.add_argument(
        "--progress",
        action="store_true",
        help="a line per simulated day on stderr where no progress bar is shown",
    )
    add_progress_flag(p)
    p.set_defaults(func=cmd_simulate)
