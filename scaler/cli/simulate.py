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

import pandas as pd

from forecaster.errors import BadInputError, DataError
from forecaster.files import check_output, check_output_folder, write_output
from forecaster.progress import Progress, add_progress_flag
from forecaster.series import parse_duration, read_history_csv
from scaler.cli.common import select_series
from scaler.config import Config
from scaler.replay.deferrable import deferrable_replay, format_deferrable
from scaler.replay.forecast_store import kept_forecasts
from scaler.replay.mig_report import add_mig_flags, cmd_mig
from scaler.replay.protocol import ReplaySetup, Trace, prepare_trace
from scaler.replay.simulating import POLICIES, Replay, ablation, planner_days, run_replay
from scaler.replay.suite import SuiteResult, load_suite
from scaler.replay.suite_runner import check_suite_files, replay_suite
from scaler.replay.tables import format_leads, format_summary, format_table, format_tiers
from scaler.replay.timeline import timeline_frame, write_chart
from scaler.replay.user_fleet import UserFleet, load_user_fleet
from scaler.replay.walkforward import ForecastCache


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
        lead_time_s=lead_times(args.lead_time)[0],
        reforecast_s=int(reforecast.total_seconds()),
        forecast_method=args.method or "auto",
        seed=args.seed,
        spot_max_share=args.spot_max_share,
        stabilization_s=stabilization_s,
        unserved_budget=args.unserved_budget,
        growth_backtest_s=_growth_backtest_s(args.growth_backtest),
    )


def _growth_backtest_s(value: str | None) -> int:
    """``--growth-backtest`` in seconds: 0, or a duration from 1 day to 90 days."""
    if value is None:
        return ReplaySetup().growth_backtest_s
    text = str(value).strip()
    if text == "0":
        return 0
    try:
        seconds = int(parse_duration(text).total_seconds())
    except DataError as exc:
        raise BadInputError(f"--growth-backtest: {exc}") from exc
    if seconds != 0 and not 86400 <= seconds <= 90 * 86400:
        raise BadInputError(f"--growth-backtest: {text!r} must be 0 or a duration from 1d to 90d")
    return seconds


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


def lead_times(value: str) -> list[int]:
    """``--lead-time``: one or more durations (``10m,20m,40m``), in seconds, each in 5-minute
    steps of the replay from 0 to 6 hours."""
    out: list[int] = []
    for part in str(value).split(","):
        text = part.strip()
        if not text:
            continue
        try:
            seconds = int(text) if text.isdigit() else int(parse_duration(text).total_seconds())
        except DataError as exc:
            raise BadInputError(f"--lead-time: {exc}") from exc
        if not 0 <= seconds <= 6 * 3600 or seconds % 300:
            raise BadInputError(
                f"--lead-time: {text!r} must be a multiple of 5 minutes from 0 to 6 hours"
            )
        if seconds not in out:
            out.append(seconds)
    if not out:
        raise BadInputError(f"--lead-time: no duration in {value!r}")
    return out


def _setups(args: argparse.Namespace) -> list[ReplaySetup]:
    """One setup per ``--lead-time``."""
    base = _setup(args)
    return [replace(base, lead_time_s=lead) for lead in lead_times(args.lead_time)]


def _policies(args: argparse.Namespace, suite: bool = False) -> list[str]:
    """``--policies``, then the ablations (``--ablations``; the suite's default: last_value
    and seasonal_naive_1d) as ``predictive[METHOD]``."""
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    methods = args.ablations if args.ablations is not None else (DEFAULT_ABLATIONS if suite else "")
    for m in (x.strip() for x in methods.split(",")):
        if m and ablation(m) not in policies:
            policies.append(ablation(m))
    return policies


DEFAULT_ABLATIONS = "last_value,seasonal_naive_1d"
"""Forecasts the suite replays the planner with beside its own, so a gain is visibly the forecast's."""


def cmd_suite(args: argparse.Namespace) -> int:
    folder = Path(args.suite)
    if not folder.is_dir():
        raise BadInputError(f"--suite: {str(folder)!r} is not a folder (the traces folder)")
    suite = load_suite(args.suite_file) if args.suite_file else load_suite()
    setups = _setups(args)
    setup = setups[0]
    policies = _policies(args, suite=True)
    check_suite_files(folder, suite)
    leads = ", ".join(f"{s.lead_time_s // 60}" for s in setups)
    print(
        f"tiercast simulate --suite {args.suite} | suite {suite.name!r}, {len(suite.series)} series | "
        f"{setup.gpus_per_node}-GPU nodes, ${setup.price_per_gpu_hour:g}/GPU-h, lead {leads} min | "
        f"reforecast every {args.reforecast}",
        flush=True,
    )
    results: list[SuiteResult] = []
    with Progress.for_args(args, "simulate --suite", len(suite.series), "series") as bar:
        replays = replay_suite(
            folder,
            suite,
            setups,
            policies,
            args.tiers,
            jobs=args.jobs,
            started=lambda e: bar.describe(e.path),
            forecast_cache=args.forecast_cache,
        )
        for per_lead in replays:
            for block, result in per_lead:
                bar.write(block + "\n", sys.stdout)
                results.append(result)
            bar.update()
    for s in setups:
        if len(setups) > 1:
            print(f"\n== summary at lead {s.lead_time_s // 60} min")
        print(format_summary([r for r in results if r.lead_time_s == s.lead_time_s], suite))
    if len(setups) > 1:
        print()
        print(format_leads(results, suite))
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    if getattr(args, "prometheus_url", None) is not None:
        from scaler.cli.shadow import ReplayTools, cmd_simulate_prometheus

        tools = ReplayTools(_fleet_setup, _policies, _replay_showing_progress, _write_files)
        return cmd_simulate_prometheus(args, tools)
    if args.mig is not None:
        return cmd_mig(args)
    if (args.history is None) == (args.suite is None):
        raise BadInputError("simulate: give exactly one of --history CSV or --suite DIR")
    args.method_given = args.method is not None
    if args.config is not None and args.suite is not None:
        raise BadInputError("simulate: --config replays one --history, not a --suite")
    if getattr(args, "leading", None) is not None and (args.suite or args.pooled):
        raise BadInputError("simulate: --leading goes with one --history, not --suite or --pooled")
    if args.config is None and args.units_per_gpu is None:
        args.units_per_gpu = 1.0
    _check_deferrable(args)
    _check_outputs(args)
    if args.suite is not None:
        return cmd_suite(args)
    if args.pooled is not None:
        return _cmd_pooled(args, _pooled_history(args.history))
    try:
        history = read_history_csv(args.history)
    except DataError as exc:
        raise BadInputError(f"--history: {exc}") from exc
    fleet = _user_fleet(args)
    series = select_series(
        history, args.series if args.series or fleet is None else _series_of(history, fleet)
    )
    policies = _policies(args)
    name = Path(args.history).stem if args.series is None else args.series
    setups = _setups(args) if fleet is None else [_fleet_setup(args, fleet)]
    units = args.units_per_gpu if fleet is None else fleet.units_per_gpu
    tiers = args.tiers or (fleet is not None and fleet.tiers)
    traces = [prepare_trace(series.rename(name), units, s) for s in setups]
    traces = _leading_traces(args, traces)
    with kept_forecasts(args.forecast_cache, traces[0], setups) as cache:
        for k, (setup, trace) in enumerate(zip(setups, traces, strict=True)):
            test = trace.test_index
            shape = (
                f"{setup.gpus_per_node}-GPU nodes, ${setup.price_per_gpu_hour:g}/GPU-h, "
                f"lead {setup.lead_time_s // 60} min"
                if fleet is None
                else f"config {args.config}: {fleet.describe()}"
            )
            print(
                f"tiercast simulate | {args.history} | demand = ceil(value / {units:g}) GPUs | "
                f"test {test[0]:%Y-%m-%d %H:%M} to {test[-1]:%Y-%m-%d %H:%M} ({len(test)} steps of 5 min) | "
                f"{shape} | reforecast every {args.reforecast}"
            )
            replay = _replay_showing_progress(
                args, trace, setup, policies, cache, tiers, None if fleet is None else fleet.config
            )
            print(format_table(replay))
            if tiers:
                print(format_tiers(replay))
            if args.deferrable_gpu_hours_per_day:
                load = deferrable_replay(replay, args.deferrable_gpu_hours_per_day)
                print(format_deferrable(load))
            margin = replay.runs["predictive"].margin if "predictive" in replay.runs else None
            if margin is not None:
                print(f"predictive: {margin.describe()}")
            for policy, run in replay.runs.items():
                if run.plans:
                    print(f"{policy}: {run.plans} plans in {run.seconds:.1f} s", file=sys.stderr)
            # Several lead times: the files are those of the first.
            if k == 0:
                _write_files(replay, args.timeline_out, args.chart_out)
    return 0


def _leading_traces(args: argparse.Namespace, traces: list[Trace]) -> list[Trace]:
    """``--leading``: each trace with the leading series on its grid (as it is without)."""
    if getattr(args, "leading", None) is None:
        return traces
    from scaler.replay.walkforward import with_leading

    try:
        data = read_history_csv(args.leading)
    except DataError as exc:
        raise BadInputError(f"--leading: {exc}") from exc
    if len(data) != 1:
        raise BadInputError(f"--leading: {args.leading!r} holds {len(data)} series; give one")
    leading = next(iter(data.values()))
    out = [with_leading(t, leading, Path(args.leading).stem) for t in traces]
    training = out[0].leading.iloc[: out[0].test_start] if out[0].leading is not None else None
    if training is None or not training.notna().any():
        raise BadInputError(
            f"--leading: {args.leading!r} has no value on the training steps of --history"
        )
    return list(out)


def _check_deferrable(args: argparse.Namespace) -> None:
    """``--deferrable-gpu-hours-per-day``: positive, with ``--tiers`` and one ``--history``."""
    value = args.deferrable_gpu_hours_per_day
    if value is None:
        return
    if not 0 < value <= 1e7:
        raise BadInputError(
            f"--deferrable-gpu-hours-per-day must be above 0 and at most 1e7; got {value!r}"
        )
    if args.suite is not None or not args.tiers:
        raise BadInputError(
            "--deferrable-gpu-hours-per-day needs --tiers and one --history: it fills the "
            "idle GPUs of the tiered planner's reserved pool"
        )


def _replay_showing_progress(
    args: argparse.Namespace,
    trace: Trace,
    setup: ReplaySetup,
    policies: list[str],
    cache: ForecastCache,
    tiers: bool,
    fleet: Config | None,
) -> Replay:
    """:func:`run_replay`, each simulated day of the planner shown on the progress bar, or
    on stderr with ``--progress`` where no bar is shown."""
    days = planner_days(trace, policies, tiers)
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
            tiers=tiers,
            progress=progress if args.progress or bar.enabled else None,
            cache=cache,
            fleet=fleet,
        )


def _user_fleet(args: argparse.Namespace) -> UserFleet | None:
    """``--config``: the user's own pools and policy, or None."""
    if args.config is None:
        return None
    if args.units_per_gpu is not None:
        raise BadInputError(
            "simulate: --units-per-gpu comes from the workloads of --config; give one of them"
        )
    return load_user_fleet(args.config, args.signal)


def _series_of(history: dict[str, pd.Series], fleet: UserFleet) -> str | None:
    """The series of a long-format history named like the fleet's signal, where there is one."""
    return fleet.signal if fleet.signal in history else None


def _fleet_setup(args: argparse.Namespace, fleet: UserFleet) -> ReplaySetup:
    """The fleet's setup with the replay's own flags (refresh, seed); the lead times are the
    pools', and the planning horizon at most what the hold rules look at (lead time +
    stabilization, at least an hour): only the first step of each plan is acted on."""
    base = _setup(args)
    s = fleet.setup
    horizon = max(3600, min(s.horizon_s, 2 * (s.lead_time_s + s.stabilization_s)))
    return replace(
        s,
        reforecast_s=base.reforecast_s,
        seed=base.seed,
        forecast_method=args.method if args.method_given else s.forecast_method,
        horizon_s=horizon,
        growth_backtest_s=s.growth_backtest_s
        if args.growth_backtest is None
        else base.growth_backtest_s,
    )


def _check_outputs(args: argparse.Namespace) -> None:
    """Outputs that can never be written are refused before the replay runs, not after."""
    if args.forecast_cache:
        check_output_folder(args.forecast_cache, "--forecast-cache")
    if args.suite is None:
        for flag, path in (("--timeline-out", args.timeline_out), ("--chart-out", args.chart_out)):
            if path:
                check_output(path, flag)


def _write_files(replay: Replay, timeline_out: str, chart_out: str) -> None:
    """The timeline CSV and the chart, each where asked ('' for none)."""
    if timeline_out:
        write_output(timeline_out, timeline_frame(replay).to_csv(index=False), "--timeline-out")
        print(f"timeline written to {timeline_out}")
    if chart_out:
        write_chart(replay, chart_out, "--chart-out")
        print(f"chart written to {chart_out}")


def _pooled_history(text: str) -> dict[str, pd.Series]:
    """``--history`` with ``--pooled``: one long-format CSV, or several CSVs separated by
    commas, a file of one series named by its file name."""
    from pathlib import Path

    history: dict[str, pd.Series] = {}
    for path in [p.strip() for p in str(text).split(",") if p.strip()]:
        try:
            data = read_history_csv(path)
        except DataError as exc:
            raise BadInputError(f"--history: {exc}") from exc
        named = {Path(path).stem: next(iter(data.values()))} if len(data) == 1 else data
        for name, y in named.items():
            if name in history:
                raise BadInputError(f"--history: series {name!r} is given twice")
            history[name] = y.rename(name)
    return history


def _cmd_pooled(args: argparse.Namespace, history: dict[str, pd.Series]) -> int:
    """``--pooled``: every series of the file as one workload of a shared fleet
    (:mod:`scaler.replay.pooled`), replayed whole, in dedicated shared sets and pooled."""
    from scaler.replay.pooled import PooledSetup, format_pooled, pooled_replay

    lead_s = lead_times(args.lead_time)[0]
    try:
        every_s = int(parse_duration(args.reforecast).total_seconds())
    except DataError as exc:
        raise BadInputError(f"--reforecast: {exc}") from exc
    setup = PooledSetup(
        mode=args.pooled,
        memory_gb=args.memory_gb,
        compute_share=args.compute_share,
        units_per_replica=args.units_per_gpu,
        lead_time_s=lead_s,
        reforecast_s=every_s,
    )
    result = pooled_replay(history, setup)
    print(
        f"tiercast simulate --pooled {args.pooled} | {args.history} | {len(result.series)} "
        f"series, replicas = ceil(value / {args.units_per_gpu:g}), {args.memory_gb:g} GB each on "
        f"{setup.gpu_model} | test {result.test_start:%Y-%m-%d %H:%M} to "
        f"{result.test_end:%Y-%m-%d %H:%M} | lead {lead_s // 60} min, reforecast every "
        f"{args.reforecast}, q{setup.quantile:g}, ${setup.price_per_gpu_hour:g}/GPU-h"
    )
    print(format_pooled(result))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="replay a demand CSV walk-forward: static, reactive, predictive, clairvoyant, oracle",
        description=(
            "Replay a demand history walk-forward under the published protocol (5-minute steps, "
            "8-GPU nodes, $4/GPU-h, 10-minute lead time unless --lead-time; test period the last 7 days, or 4 for "
            "series of 14 days or less) and compare tiercast's planner with the baselines."
        ),
    )
    _add_input_flags(p)
    add_mig_flags(p)
    from scaler.cli.shadow import add_prometheus_flags

    add_prometheus_flags(p)
    _add_policy_flags(p)
    _add_output_flags(p)
    add_progress_flag(p)
    p.set_defaults(func=cmd_simulate)


def _add_input_flags(p: argparse.ArgumentParser) -> None:
    """What is replayed: one history or a suite, and the demand's units."""
    p.add_argument(
        "--history",
        help="CSV (timestamp,value or long format); with --pooled, several separated by commas",
    )
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
        "--leading",
        metavar="CSV",
        help="a leading signal of --history (queued demand that runs after a delay, e.g. "
        "running plus queued GPUs): the near-term rule tries it on the training period "
        "and uses it where it pays (docs/replay.md, 'Leading signals')",
    )
    p.add_argument(
        "--units-per-gpu",
        type=float,
        default=None,
        help="signal units one GPU serves: demand = ceil(value / this) (default 1)",
    )
    p.add_argument(
        "--config",
        help="replay your own pools (lead times, node sizes, prices, tiers) and policy from a "
        "tiercast config file, for the workloads of one signal (with --history)",
    )
    p.add_argument("--signal", help="with --config: the signal whose workloads are replayed")
    p.add_argument(
        "--pooled",
        choices=("mps", "time-slicing"),
        default=None,
        help="replay every series of a long-format --history as one shared fleet: a whole "
        "GPU per replica, dedicated shared sets, and pooled (docs/replay.md)",
    )
    p.add_argument(
        "--memory-gb",
        type=float,
        default=16.0,
        help="with --pooled: GPU memory per replica, GB (default: %(default)s)",
    )
    p.add_argument(
        "--compute-share",
        type=float,
        default=None,
        help="with --pooled: share of a GPU per replica, 0-1 (default: what memory leaves)",
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
        "--deferrable-gpu-hours-per-day",
        type=float,
        default=None,
        metavar="N",
        help="with --tiers: add N GPU-hours of deferrable training due by the end of each day, "
        "placed into the GPUs the tiered fleet leaves idle, and price it against on-demand",
    )
    p.add_argument(
        "--lead-time",
        default="10m",
        help="seconds or a duration from requesting a node to it serving, for every pool; "
        "several, comma-separated (10m,20m,40m), replay each (default: %(default)s)",
    )
    p.add_argument(
        "--ablations",
        default=None,
        help="forecast methods the planner is also replayed with, as predictive[METHOD] "
        f"(default: none; with --suite: {DEFAULT_ABLATIONS}; '' for none)",
    )
    p.add_argument(
        "--reforecast",
        default="1h",
        help="how often the forecast is refreshed in simulated time (default: %(default)s)",
    )
    p.add_argument(
        "--method",
        default=None,
        help="forecast estimator or 'auto' (default: auto; with "
        "--config, the file's forecast.method)",
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
        "--growth-backtest",
        metavar="DURATION",
        help="predictive: how much of the training period's end the forecaster is walked "
        "forward over to calibrate its growth quantile, 1d to 90d, or 0 for a near-term rule "
        "that never uses the forecast's growth (newest observation x margin); default: 7d, "
        "or the file's policy.growth_backtest_s with --config",
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
    p.add_argument(
        "--forecast-cache",
        metavar="DIR",
        help="keep each trace's forecasts in DIR and reuse them in later runs with the same "
        "trace, forecasting settings and forecaster code (a planner change then replays "
        "without refitting); default: none",
    )
