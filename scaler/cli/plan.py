"""``tiercast plan``: forecast and plan without acting, then the finance dry-run.

``plan_without_acting`` is shared with ``tiercast report``: both plan exactly as ``run``
does, with a recording provider, so they can never change the cluster.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from scaler.cli.common import DryRunAction, add_input_flags, add_output_flag, write_file
from scaler.cli.run import print_cycle
from scaler.inputs.loading import load_inputs, plan_flag, plan_path

if TYPE_CHECKING:
    import pandas as pd

    from forecaster.series import History
    from scaler.config import Config, PoolConfig, ServiceConfig
    from scaler.records import RunStore
    from scaler.service.cycle import CycleResult


def lead_time_records(
    pools: Sequence[PoolConfig], service: ServiceConfig, path: str | None = None
) -> RunStore | None:
    """The run records the plan reads, as ``run`` plans from them: the node starts of
    ``lead_time_s: auto`` pools, and the past plans of MIG-managed pools (whose profiles
    may plan on their recent peak, :mod:`scaler.planning.mig.persistence`).

    ``path``: the records file (default ``service.records_path``). None where no pool is
    ``auto`` or MIG-managed, or the file does not exist, so a command that never acts never
    creates one; the recording provider shows no node starts, so nothing is written to it
    either.
    """
    from scaler.records import RunStore

    if not any(p.lead_time_auto or p.mig_layouts is not None for p in pools):
        return None
    records = Path(path or service.records_path)
    if not records.is_file():
        return None
    return RunStore(records, service.records_keep_days)


def plan_without_acting(
    args: argparse.Namespace,
) -> tuple[Config, History, pd.Timestamp, str, CycleResult]:
    """Load the inputs, apply ``--horizon``, and plan against the configured inventory.

    ``plan`` and ``report`` share this: both forecast and plan exactly as ``run`` does,
    with a recording provider, so they can never change the cluster. ``lead_time_s: auto``
    pools are planned from the node starts the run records hold (``--records`` where the
    command has it, else ``service.records_path``), else their fallback; the config
    returned is the one loaded, the one planned with is ``result.config``.
    """
    from forecaster.progress import active
    from forecaster.series import parse_duration
    from scaler.actuation.protocol import RecordingProvider
    from scaler.inputs.pending import collect_starvation
    from scaler.inputs.power import collect_power
    from scaler.service.cycle import run_cycle

    config, history, now, label = load_inputs(args)
    bar = active()
    if bar is not None:  # one unit per signal forecast (forecaster.forecasting.forecast_history)
        bar.add_total(len(config.signals))
        counted = bar.n
    if getattr(args, "horizon", None):
        horizon_s = int(parse_duration(args.horizon).total_seconds())
        config = config.model_copy(
            update={"policy": config.policy.model_copy(update={"horizon_s": horizon_s})}
        )
    inventory = {
        p.name: p.current_nodes if p.current_nodes is not None else p.min_nodes
        for p in config.pools
    }
    result = run_cycle(
        config,
        history,
        RecordingProvider(inventory),
        now,
        dry_run=True,
        lead_time_records=lead_time_records(
            config.pools, config.service, getattr(args, "records", None)
        ),
        starvation=collect_starvation(config, now),
        power=collect_power(config, now),
    )
    if bar is not None:  # signals forecast in worker processes are counted here
        bar.update(max(0, len(config.signals) - (bar.n - counted)))
    return config, history, now, label, result


def cmd_plan(args: argparse.Namespace) -> int:
    from forecaster.progress import Progress, counting
    from scaler.cli.finance import finance_dry_run, prepare_finance

    finance_options = prepare_finance(args)
    # A unit per signal forecast and one for the plan; the finance projection adds one per
    # scenario and its files.
    with Progress.for_args(args, "plan", total=1) as bar, counting(bar):
        bar.describe("forecast and plan")
        config, _, now, label, result = plan_without_acting(args)
        # Never the working folder: --plan-out, service.plan_out, else the state directory.
        plan_out = plan_path(config, args)
        write_file(plan_out, result.plan.to_json(), *plan_flag(config, args))
        bar.update(label="finance projection")
        with bar.paused():
            print_cycle(
                result, label, plan_out, args.output, acted=False, lang=finance_options.lang
            )
        if args.output in ("table", "wide"):
            finance_dry_run(finance_options, config, result, now, label, bar)
        else:
            # stdout carries the document alone, so it can be piped to jq or yq.
            with contextlib.redirect_stdout(sys.stderr):
                finance_dry_run(finance_options, config, result, now, label, bar)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="forecast and plan without acting; print the plan",
        description="Forecast and plan; never acts. Finance uses it with --horizon for projections.",
    )
    add_input_flags(p)
    add_output_flag(p, wide=True)
    p.add_argument(
        "--dry-run",
        action=DryRunAction,
        modes=("client",),
        refused="; plan never contacts a cluster, and tiercast run --dry-run=server sends "
        "the writes to the API server",
        help="accepted for symmetry with 'run' (client only); plan never acts",
    )
    p.add_argument(
        "--horizon",
        help="planning horizon, e.g. 24h, 7d, 90d (default: the config's policy.horizon_s)",
    )
    from scaler.cli.finance import add_finance_flags

    add_finance_flags(p)
    p.set_defaults(func=cmd_plan)
