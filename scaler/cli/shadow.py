"""``tiercast shadow``: the shadow scorecard from the run records.

Every cycle records, per pool, the capacity the cluster actually had beside the plan and
the demand (``RunRecord.shadow``). This command scores them over a period
(:mod:`scaler.reports.shadow`): the GPU-hours and money of what the cluster ran and of
tiercast's plan, the demand each left unserved, the changes each made, and one verdict
line. ``tiercast simulate --prometheus-url`` prints the same scorecard from the cluster's
Prometheus instead of the records.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from scaler.replay.from_prometheus import ClusterHistory
    from scaler.replay.simulating import Replay
    from scaler.replay.user_fleet import UserFleet
    from scaler.reports.shadow import ShadowInput

MAX_RECORDS = 50_000
"""Most cycle records read (30 days of 1-minute cycles fit)."""


def cmd_shadow(args: argparse.Namespace) -> int:
    from scaler.records import RunStore
    from scaler.reports.shadow import (
        format_scorecard,
        period,
        score_shadow,
        shadow_input_from_records,
        within,
    )

    path, keep = _records_path(args)
    store = RunStore(path, keep_days=keep)
    records = store.recent(limit=MAX_RECORDS, job="cycle")
    newest = _newest(records)
    start, end = period(args.since, args.until, newest)
    chosen = within(records, start, end)
    data = shadow_input_from_records(chosen, source=f"run records {path}")
    if data is None:
        print(
            f"tiercast shadow: no cycle in {str(path)!r} between {start:%Y-%m-%d %H:%M}Z and "
            f"{end:%Y-%m-%d %H:%M}Z recorded the cluster's capacity; nothing to compare "
            "(cycles of this version record it, dry-run or not)",
            file=sys.stderr,
        )
        return 1
    card = score_shadow(data)
    if args.output == "table":
        print(format_scorecard(card))
    else:
        from scaler.cli.common import print_document

        print_document(card.to_dict(), args.output)
    return 0


def _records_path(args: argparse.Namespace) -> tuple[str, int]:
    """``--records``, else the config's ``service.records_path`` (state directory applied)."""
    if args.records is not None:
        return args.records, 30
    from scaler.config import ServiceConfig, load_config
    from scaler.inputs.loading import resolve_config_path, service_with_state_paths

    config_path = resolve_config_path(args)
    service = load_config(config_path).service if config_path else ServiceConfig()
    service = service_with_state_paths(service, args)
    return service.records_path, service.records_keep_days


def _newest(records: list[Any]) -> pd.Timestamp:
    """The newest cycle's time: the default end of the period (the wall clock without one)."""
    from scaler.reports.shadow import newest_at

    found = newest_at(records)
    return found if found is not None else pd.Timestamp.now(tz="UTC").tz_localize(None)


@dataclass(frozen=True)
class ReplayTools:
    """What ``simulate`` lends the Prometheus path (passed in, not imported: ``simulate``
    imports this module): its setup of a user fleet, its policies, its replay with progress,
    and its file writer."""

    fleet_setup: Callable[[argparse.Namespace, Any], Any]
    policies: Callable[[argparse.Namespace], list[str]]
    replay: Callable[..., Any]
    write_files: Callable[[Any, str, str], None]


def cmd_simulate_prometheus(args: argparse.Namespace, tools: ReplayTools) -> int:
    """``tiercast simulate --prometheus-url URL --config FILE --since 14d``: the user-fleet
    replay on the signal read from Prometheus, its table, and the shadow scorecard of
    tiercast's replayed plans against the nodes the cluster ran
    (:mod:`scaler.replay.from_prometheus`)."""
    from forecaster.errors import BadInputError
    from scaler.replay.forecast_store import kept_forecasts
    from scaler.replay.from_prometheus import read_cluster_history
    from scaler.replay.protocol import prepare_trace
    from scaler.replay.tables import format_table, format_tiers
    from scaler.replay.user_fleet import load_user_fleet
    from scaler.reports.shadow import format_scorecard, period, score_shadow

    if args.config is None:
        raise BadInputError(
            "simulate: --prometheus-url replays the signal and pools of --config; give --config FILE"
        )
    if args.history is not None or args.suite is not None:
        raise BadInputError("simulate: give one of --history, --suite or --prometheus-url")
    if args.units_per_gpu is not None:
        raise BadInputError(
            "simulate: --units-per-gpu comes from the workloads of --config; give one of them"
        )
    args.method_given = args.method is not None
    fleet = load_user_fleet(args.config, args.signal)
    now = pd.Timestamp.now(tz="UTC").tz_localize(None).floor("5min")
    start, end = period(args.since, args.until, now)
    cluster = read_cluster_history(args.config, fleet, args.prometheus_url, start, end)
    setup = tools.fleet_setup(args, fleet)
    trace = prepare_trace(cluster.history[fleet.signal], fleet.units_per_gpu, setup)
    tiers = bool(args.tiers or fleet.tiers)
    policies = tools.policies(args)
    test = trace.test_index
    print(
        f"tiercast simulate | {cluster.url}, signal {fleet.signal!r}, {start:%Y-%m-%d %H:%M}Z to "
        f"{end:%Y-%m-%d %H:%M}Z | demand = ceil(value / {fleet.units_per_gpu:g}) GPUs | test "
        f"{test[0]:%Y-%m-%d %H:%M} to {test[-1]:%Y-%m-%d %H:%M} ({len(test)} steps of 5 min) | "
        f"config {args.config}: {fleet.describe()} | reforecast every {args.reforecast}"
    )
    with kept_forecasts(args.forecast_cache, trace, [setup]) as cache:
        replay = tools.replay(args, trace, setup, policies, cache, tiers, fleet.config)
    print(format_table(replay))
    if tiers:
        print(format_tiers(replay))
    planner = "predictive-tiers" if tiers else "predictive"
    if planner in replay.runs:
        print()
        print(format_scorecard(score_shadow(shadow_from_replay(cluster, replay, fleet, planner))))
    else:
        print(f"shadow scorecard: --policies has no {planner}; tiercast was not replayed")
    tools.write_files(replay, args.timeline_out, args.chart_out)
    return 0


def shadow_from_replay(
    cluster: ClusterHistory, replay: Replay, fleet: UserFleet, policy: str
) -> ShadowInput:
    """The scorecard's input over the replay's test period: the nodes the cluster ran
    against ``policy``'s run (tiercast on the fleet's pools), demand as the replay scores it."""
    import numpy as np

    from scaler.catalog.gpus import gpu_model
    from scaler.replay.protocol import STEP
    from scaler.reports.shadow import PoolTrack, ShadowInput

    index = replay.trace.test_index
    run = replay.runs[policy]
    model = gpu_model(fleet.config.pools[0].gpu_model).name
    tracks = []
    for p in fleet.config.pools:
        frame = cluster.nodes.get(p.name)
        if frame is None:
            frame = pd.DataFrame(np.nan, index=index, columns=["nodes", "ready_gpus"])
        frame = frame.reindex(index)
        tracks.append(
            PoolTrack(
                pool=p.name,
                gpu_model=model,
                gpus_per_node=p.gpus_per_node,
                price_per_gpu_hour=p.price_per_gpu_hour,
                lead_time_s=int(p.lead_time_s),
                planned=np.asarray(run.requested[p.name], dtype=float),
                nodes=frame["nodes"].to_numpy(dtype=float),
                ready_gpus=frame["ready_gpus"].to_numpy(dtype=float),
                planned_usable=np.asarray(run.usable[p.name], dtype=float),
            )
        )
    demand = np.asarray(replay.trace.demand[replay.trace.test_start :], dtype=float)
    return ShadowInput(
        index=index,
        step_s=STEP.total_seconds(),
        pools=tuple(tracks),
        demand={model: demand},
        currency=fleet.config.finance.currency,
        source=f"Prometheus {cluster.url}",
    )


def add_prometheus_flags(p: argparse.ArgumentParser) -> None:
    """``simulate``'s flags to replay straight from the cluster's Prometheus."""
    p.add_argument(
        "--prometheus-url",
        metavar="URL",
        help="with --config: read the signal's query and kube-state-metrics' node series of "
        "each pool from this Prometheus, replay, and score tiercast against what the cluster "
        "ran (no CSV export; docs/operations.md)",
    )
    p.add_argument(
        "--since",
        default="14d",
        help="with --prometheus-url: start of the history, a duration before --until (14d) "
        "or a UTC time (default: %(default)s)",
    )
    p.add_argument(
        "--until",
        help="with --prometheus-url: end of the history, a UTC time (default: now)",
    )


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "shadow",
        help="the capacity the cluster ran against tiercast's plan: cost, unserved, verdict",
        description=(
            "Score the run records over a period: per pool and in total, the GPU-hours and "
            "money of the capacity the cluster ran and of tiercast's plan (each plan serving "
            "after its pool's lead time), the demand each left unserved, the changes each "
            "made, and whether acting would have cost less. Steps without capacity history "
            "are said, never filled in."
        ),
    )
    p.add_argument("--config", "-c", help="YAML config; its service.records_path is read")
    p.add_argument(
        "--records",
        help="SQLite run-record file (default: service.records_path of --config, else "
        "tiercast-records.sqlite in the state directory)",
    )
    from scaler.cli.common import add_state_flag

    add_state_flag(p)
    p.add_argument(
        "--since",
        default="14d",
        help="start of the period: a duration before its end (14d) or a UTC time "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--until", help="end of the period, a UTC time (default: the newest recorded cycle)"
    )
    p.add_argument(
        "-o",
        "--output",
        choices=("table", "json", "yaml"),
        default="table",
        help="table (default), or every figure as json or yaml",
    )
    p.set_defaults(func=cmd_shadow)
