"""``tiercast lab tier-gap``: the tiered plan's saving against the tiered reactive rule, split
into what the plan does beyond its own margin's rule and what hindsight's headroom does
beyond that margin (:mod:`scaler.replay.tier_gap`), for each series of a suite file."""

from __future__ import annotations

import argparse
from dataclasses import replace

from forecaster.benchmarks.long_horizon import traces_folder
from forecaster.series import read_history_csv
from forecaster.tables import aligned
from scaler.cli.simulate import lead_times
from scaler.replay.forecast_store import kept_forecasts
from scaler.replay.protocol import ReplaySetup, prepare_trace
from scaler.replay.simulating import run_replay
from scaler.replay.suite import load_suite
from scaler.replay.suite_runner import check_suite_files
from scaler.replay.tier_gap import HEADER, gap_row, tier_gap


def cmd_tier_gap(args: argparse.Namespace) -> int:
    leads = lead_times(args.lead_time)
    suite = load_suite(args.suite_file)
    traces = traces_folder(args.traces)
    if traces is None:
        return 0
    check_suite_files(traces, suite)
    rows = [list(HEADER)]
    for entry in suite.series:
        path = traces / entry.path
        series = next(iter(read_history_csv(path).values())).rename(path.stem)
        setups = [replace(ReplaySetup(), lead_time_s=lead) for lead in leads]
        trace = prepare_trace(series, entry.units_per_gpu, setups[0])
        with kept_forecasts(args.forecast_cache or None, trace, setups) as cache:
            for setup in setups:
                replay = run_replay(trace, setup, ("predictive",), tiers=True, cache=cache)
                gap = tier_gap(replay)
                if gap is None:
                    print(f"{entry.path}: no tiered plan with a learnt margin; left out")
                    continue
                rows.append(gap_row(path.stem, setup.lead_time_s, gap))
                print(f"{path.stem} at {setup.lead_time_s // 60} min: done", flush=True)
    print("\n".join(aligned(rows, right=range(1, len(HEADER) - 2))))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "tier-gap",
        help="the tiered plan against the tiered rule at its margin and at hindsight's",
        description="For each series of a suite file, the tier replay's tiered plan, the tiered "
        "reactive rule at the plan's learnt margin and hold (same commitment, spot depth, spares "
        "and reclaims), and each against the rule's frontier at matched service: how much of the "
        "plan's saving or loss is the plan's own doing and how much the margin against the "
        "headroom hindsight picks.",
    )
    p.add_argument("--traces", default="../shared/data/traces", help="the public traces folder")
    p.add_argument("--suite-file", required=True, help="suite YAML naming the series")
    p.add_argument("--lead-time", default="20m,40m", help="lead times (default: %(default)s)")
    p.add_argument(
        "--forecast-cache", default="", help="folder keeping each series' forecasts (the replay's)"
    )
    p.set_defaults(func=cmd_tier_gap)
