"""``tiercast serve``: the long-running service (``scaler.service.wiring.serve``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scaler.service.cycle import CycleResult


def cmd_serve(args: argparse.Namespace) -> int:
    """``tiercast serve``: run the scheduled jobs until SIGTERM."""
    from scaler.cli.run import print_cycle
    from scaler.service.wiring import serve

    def show(result: CycleResult, label: str) -> None:
        # --once: the cycle as `run` prints it (its INFO line goes to the log as well).
        print_cycle(result, label, None)

    return serve(args, show)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve",
        help="run the cycle (and other jobs) on their cron schedules until SIGTERM",
        description="Long-running service: scheduled cycles, /metrics, /healthz, /readyz, "
        "and Lease-based leader election (config section 'service').",
    )
    p.add_argument("--config", "-c", help="YAML config; default: the built-in demo")
    p.add_argument("--history", help="CSV history instead of the config's sources")
    p.add_argument("--now", help=argparse.SUPPRESS)
    p.add_argument(
        "--time-offset",
        help="rehearse on backfilled history: each cycle plans as of the wall clock minus "
        "this duration (e.g. 30d), reading Prometheus up to that time",
    )
    p.add_argument("--plan-out", default=None, help=argparse.SUPPRESS)
    from scaler.cli.common import add_dry_run_flags, add_prometheus_url_flag, add_state_flag

    add_prometheus_url_flag(p)
    add_state_flag(p)
    add_dry_run_flags(p)
    p.add_argument("--kubeconfig", help="kubeconfig file; default: in-cluster service account")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument(
        "--metrics-port", type=int, help="override service.metrics_port (0 turns it off)"
    )
    p.add_argument("--log-format", choices=("text", "json"), help="override service.log_format")
    p.add_argument(
        "--leader-election",
        action="store_true",
        help="campaign for the Lease (service.lease_name); only the leader actuates",
    )
    p.add_argument(
        "--once",
        action="store_true",
        help="run one cycle now, print it as `run` does, then shut down as on SIGTERM",
    )
    p.set_defaults(func=cmd_serve)
