"""``tiercast simulate``: replay a demand CSV walk-forward under every scaling policy.

Prints the replay table (cost, cost against the oracle and the clairvoyant,
unserved demand), writes the timeline CSV and a chart. The protocol and the
policies are in :mod:`scaler.replay.simulating`; this module parses, calls and prints.
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
from scaler.replay.protocol import ReplaySetup, Trace, prepare_trace
from scaler.replay.simulating import POLICIES, Replay, planner_days, run_replay
from scaler.replay.suite import SuiteResult, load_suite
from scaler.replay.suite_runner import check_suite_files, replay_suite
from scaler.replay.tables import format_summary, format_table, format_tiers
from scaler.replay.timeline import timeline_frame, write_chart


def _setup(args: argparse.Namespace) -> ReplaySetup:
    try:
        reforecast = parse_duration(args.reforecast)
    except DataError as exc:
        raise BadInputError(f"--reforecast: {exc}") from exc
    if not 0 <= args.spot_max_share <= 1:
        raise BadInputError(
            f"--spot-max-share must be between 0 and 1; got {args.spot_max_share!r}"
        )
    stabilization_s = _stabilization_s(args.stabilization)
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


def _stabilization_s(value: str | None) -> int:
    """``--stabilization`` in seconds: a duration, or a bare number of seconds."""
    if value is None:
        return ReplaySetup().stabilization_s
    try:
        text = str(value).strip()
        # A bare number is seconds (0 allowed: no stabilization).
        return int(text) if text.isdigit() else int(parse_duration(text).total_seconds())
    except DataError as exc:
        raise BadInputError(f"--stabilization: {exc}") from exc


def _policies(args: argparse.Namespace) -> list[str]:
    return [p.strip() for p in args.policies.split(",") if p.strip()]


def cmd_suite(args: argparse.Namespace) -> int:
    folder = Path(args.suite)
    if not folder.is_dir():
        raise BadInputError(f"--suite: {str(folder)!r} is not a folder (the traces folder)")
    suite = load_suite(args.suite_file) if args.suite_file else load_suite()
    setup = _setup(args)
    policies = _policies(args)
    check_suite_files(folder, suite)
    print(
        f"tiercast simulate --suite {args.suite} | suite {suite.name!r}, {len(suite.series)} series | "
        f"{setup.gpus_per_node}-GPU nodes, ${setup.price_per_gpu_hour:g}/GPU-h, lead {setup.lead_time_s // 60} min | "
        f"reforecast every {args.reforecast}",
        flush=True,
    )
    results: list[SuiteResult] = []
    with Progress.for_args(args, "simulate --suite", len(suite.series), "series") as bar:
        replays = replay_suite(
            folder,
            suite,
            setup,
            policies,
            args.tiers,
            jobs=args.jobs,
            started=lambda e: bar.describe(e.path),
        )
        for block, result in replays:
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
    policies = _policies(args)
    setup = _setup(args)
    name = Path(args.history).stem if args.series is None else args.series
    trace = prepare_trace(series.rename(name), args.units_per_gpu, setup)
    test = trace.test_index
    print(
        f"tiercast simulate | {args.history} | demand = ceil(value / {args.units_per_gpu:g}) GPUs | "
        f"test {test[0]:%Y-%m-%d %H:%M} to {test[-1]:%Y-%m-%d %H:%M} ({len(test)} steps of 5 min) | "
        f"{setup.gpus_per_node}-GPU nodes, ${setup.price_per_gpu_hour:g}/GPU-h, lead {setup.lead_time_s // 60} min | "
        f"reforecast every {args.reforecast}"
    )
    replay = _replay_showing_progress(args, trace, setup, policies)
    print(format_table(replay))
    if args.tiers:
        print(format_tiers(replay))
    for policy, run in replay.runs.items():
        if run.plans:
            print(f"{policy}: {run.plans} plans in {run.seconds:.1f} s", file=sys.stderr)
    _write_files(replay, args.timeline_out, args.chart_out)
    return 0


def _replay_showing_progress(
    args: argparse.Namespace, trace: Trace, setup: ReplaySetup, policies: list[str]
) -> Replay:
    """:func:`run_replay`, each simulated day of the planner shown on the progress bar, or
    on stderr with ``--progress`` where no bar is shown."""
    days = planner_days(trace, policies, args.tiers)
    with Progress.for_args(args, "simulate", days, "day") as bar:

        def progress(msg: str) -> None:
            if bar.enabled:
                bar.update(label=msg)
            else:
                print(msg, file=sys.stderr, flush=True)

        return run_replay(
            trace,
            setup,
            policies,
            tiers=args.tiers,
            progress=progress if args.progress or bar.enabled else None,
        )


def _write_files(replay: Replay, timeline_out: str, chart_out: str) -> None:
    """The timeline CSV and the chart, each where asked ('' for none)."""
    if timeline_out:
        Path(timeline_out).parent.mkdir(parents=True, exist_ok=True)
        timeline_frame(replay).to_csv(timeline_out, index=False)
        print(f"timeline written to {timeline_out}")
    if chart_out:
        Path(chart_out).parent.mkdir(parents=True, exist_ok=True)
        write_chart(replay, chart_out)
        print(f"chart written to {chart_out}")


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
    _add_input_flags(p)
    _add_policy_flags(p)
    _add_output_flags(p)
    add_progress_flag(p)
    p.set_defaults(func=cmd_simulate)


def _add_input_flags(p: argparse.ArgumentParser) -> None:
    """What is replayed: one history or a suite, and the demand's units."""
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


def _add_policy_flags(p: argparse.ArgumentParser) -> None:
    """Which policies, and the parameters of the planner's replay."""
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


def _add_output_flags(p: argparse.ArgumentParser) -> None:
    """Where the timeline and the chart go, and progress lines."""
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
