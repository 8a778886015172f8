"""``tiercast serve`` and ``tiercast run`` put together: the config and the loader, the
provider for each cycle, the election, and the jobs handed to the scheduler.

:func:`run_once` runs one cycle through :class:`scaler.service.cycle_job.CycleJob` and
returns its exit code; :func:`serve` runs the cycle, refit and report jobs through
:class:`scaler.service.scheduler.Service` until SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from forecaster.errors import TemporaryError, TiercastError
from scaler.actuation.protocol import CapacityProvider, RecordingProvider
from scaler.config import Config
from scaler.inputs.loading import load_cycle_config, plan_flag, plan_path
from scaler.records import RunStore
from scaler.service.cycle import CycleResult
from scaler.service.cycle_job import CycleJob, ProviderFactory
from scaler.service.leader import AlwaysLeader, Leadership
from scaler.service.runs import EXIT_ABANDONED, Inputs, JobOutcome, Stop, live_signals, utc_now
from scaler.service.scheduled import ScheduledJob, refit_models, write_capacity_report
from scaler.service.scheduler import Service
from scaler.service.telemetry import Telemetry, configure_logging

log = logging.getLogger(__name__)


def provider_factory(
    dry_run: bool,
    server_dry_run: bool = False,
    kubeconfig: str | None = None,
    context: str | None = None,
) -> ProviderFactory:
    """Kubernetes-backed when the config has such pools, otherwise recording."""

    def make(config: Config) -> CapacityProvider:
        if any(p.provider.kind not in ("recording", None) for p in config.pools):
            # Imported here: the Kubernetes client is slow to import and only this path needs it.
            from scaler.actuation.kube.providers import build_provider, has_kubernetes_pools

            if has_kubernetes_pools(config):
                return build_provider(config, dry_run, server_dry_run, kubeconfig, context)
        return RecordingProvider(
            {
                p.name: p.current_nodes if p.current_nodes is not None else p.min_nodes
                for p in config.pools
            }
        )

    return make


def run_once(
    args: argparse.Namespace,
    load: Callable[[], Inputs],
    show: Callable[[CycleResult, str], None],
) -> int:
    """``tiercast run``: one cycle through :class:`CycleJob`; returns the exit code.

    With ``--config``, only the config is read before the job starts; collection (the
    part that talks to Prometheus and can fail or be interrupted) runs inside the job,
    so a failed or SIGTERM-ed collection still leaves its run record.
    """
    stop = Stop()
    stop.install()
    config_path = getattr(args, "config", None)
    inputs: Inputs | None = None
    if config_path and getattr(args, "history", None) is None:
        config = load_cycle_config(config_path, args)
    else:
        inputs = load()
        config = inputs.config
    # The plan's path is resolved once, for the job and for what `run` prints.
    flag, owned = plan_flag(config, args)
    args.plan_out = plan_path(config, args)
    configure_logging(os.environ.get("TIERCAST_LOG_FORMAT") or config.service.log_format)
    dry_run = bool(args.dry_run or getattr(args, "server_dry_run", False))
    make = provider_factory(
        dry_run,
        bool(getattr(args, "server_dry_run", False)),
        getattr(args, "kubeconfig", None),
        getattr(args, "context", None),
    )
    provider = make(config)
    if isinstance(provider, RecordingProvider):
        if not args.dry_run:
            log.info("no cluster provider is configured for these pools; recording actions instead")
        dry_run = True
    loaded = inputs
    job = CycleJob(
        load=(lambda: loaded) if loaded is not None else load,
        make_provider=lambda _config: provider,
        store=RunStore(config.service.records_path, config.service.records_keep_days),
        dry_run=dry_run,
        stop=stop,
        plan_out=args.plan_out,
        plan_flag=flag,
        plan_owned=owned,
        retries=config.service.action_retries,
        # `run` prints a failure as its one final line; the job's log line would repeat it.
        log_failures=False,
    )
    outcome = job()
    # What `run` prints it wrote is what it did write.
    if not outcome.plan_written:
        args.plan_out = None
    args.recorded = outcome.recorded
    if outcome.result is not None:
        show(outcome.result, outcome.record.source)
    if outcome.error is not None:
        if isinstance(outcome.error, TiercastError):
            raise outcome.error
        raise TemporaryError(
            f"cycle failed: {type(outcome.error).__name__}: {outcome.error}"
        ) from outcome.error
    if outcome.status != "ok":
        detail = "; ".join(outcome.record.notes[:2]) or ", ".join(
            f"{a['pool']}: {a['message']}"
            for a in outcome.record.actions
            if a["outcome"] != "applied"
        )
        if not detail and outcome.status == "abandoned":
            detail = "a stop request (SIGTERM or SIGINT) arrived before the cycle finished"
        print(
            f"tiercast: cycle {outcome.status}: {detail or 'no reason recorded'}", file=sys.stderr
        )
    return outcome.exit_code


def _ignore(_value: object) -> None:
    return None


def make_leadership(
    config: Config,
    telemetry: Telemetry,
    identity: str,
    kubeconfig: str | None = None,
    context: str | None = None,
) -> Leadership:
    """The Lease elector of ``service.leader_election`` (else a lone replica that always
    leads), reaching the cluster actuation reaches: ``kubeconfig`` at ``context``
    (``serve --kubeconfig/--context``), else the pod's service account."""
    svc = config.service
    if not svc.leader_election:
        return AlwaysLeader()
    from scaler.service.leader import LeaseElector, coordination_api, default_namespace

    return LeaseElector(
        coordination_api(kubeconfig, context),
        svc.lease_name,
        svc.lease_namespace or default_namespace(),
        identity,
        svc.lease_duration_s,
        svc.lease_renew_s,
        on_change=lambda leading: telemetry.leader.set(1 if leading else 0),
        on_error=lambda exc: _ignore(telemetry.error(exc, "lease")),
    )


def serve(args: argparse.Namespace, show: Callable[[CycleResult, str], None] | None = None) -> int:
    """``tiercast serve``: run the scheduled jobs until SIGTERM; ``show``: how ``--once``
    prints its cycle."""
    load = _serve_loader(args)
    config = _serve_config(args, load)
    svc = config.service
    from scaler.service.leader import default_identity

    identity = default_identity()
    telemetry = Telemetry()
    stop = Stop()
    leadership = make_leadership(config, telemetry, identity, args.kubeconfig, args.context)
    # --dry-run=server is a dry-run too: its writes reach the API server with dryRun=All.
    dry_run = bool(args.dry_run or args.server_dry_run)
    cycle = CycleJob(
        load=load,
        make_provider=provider_factory(dry_run, args.server_dry_run, args.kubeconfig, args.context),
        telemetry=telemetry,
        store=RunStore(svc.records_path, svc.records_keep_days),
        leadership=leadership,
        dry_run=dry_run,
        stop=stop,
        plan_out=svc.plan_out,
        identity=identity,
        retries=svc.action_retries,
    )
    jobs = _scheduled_jobs(cycle, load, config, telemetry, identity)
    service = Service(config, jobs, telemetry, leadership, stop)
    stop.install()
    service.start(schedule=not args.once)
    log.warning(
        "tiercast serve: cycle %r, metrics on :%s, %s",
        svc.cycle_schedule,
        svc.metrics_port or "off",
        f"Lease {svc.lease_name}" if svc.leader_election else "single replica",
    )
    once: JobOutcome | None = None
    if args.once:
        once = cycle()
        if show is not None and once.result is not None:
            show(once.result, once.record.source)
        stop.set()
    stop.event.wait()
    finished = service.shutdown(svc.shutdown_grace_s)
    if not finished:
        # A job is stuck past the grace period; its thread cannot be interrupted, and
        # waiting for it would only delay the kubelet's SIGKILL. Nothing half-applied
        # is left: the job checks the stop flag before every action.
        logging.shutdown()
        os._exit(EXIT_ABANDONED)
    # --once is a rehearsal or a CronJob-like run: its exit status is the cycle's own
    # (0 ok, 1 held or failed, 143 abandoned), as its run record says.
    return once.exit_code if once is not None else 0


def _serve_loader(args: argparse.Namespace) -> Callable[[], Inputs]:
    """How every scheduled job of ``serve`` loads its inputs (``--time-offset`` applied)."""
    from scaler.inputs.loading import load_inputs

    offset = None
    if getattr(args, "time_offset", None):
        from forecaster.series import parse_duration

        offset = parse_duration(args.time_offset)

    def load() -> Inputs:
        if offset is not None:
            # A rehearsal on backfilled history: every cycle's "now" is the wall clock
            # moved back by the offset, so the schedule walks through the old data.
            args.now = (utc_now() - offset).isoformat()
        config, history, now, label = load_inputs(args)
        # Files, the demo and --now carry their own time; live data is planned at the wall clock.
        live = live_signals(config.signals) and not args.now
        return Inputs(config, history, None if live else now, label)

    return load


def _serve_config(args: argparse.Namespace, load: Callable[[], Inputs]) -> Config:
    """The config ``serve`` starts with, its logging set up and the flags' overrides applied."""
    if getattr(args, "config", None) and getattr(args, "history", None) is None:
        # Only the config at start-up: Prometheus may be down now and up by the next cycle.
        config = load_cycle_config(args.config, args)
    else:
        config = load().config
    svc = config.service
    configure_logging(args.log_format or os.environ.get("TIERCAST_LOG_FORMAT") or svc.log_format)
    overrides: dict[str, Any] = {}
    if args.metrics_port is not None:
        overrides["metrics_port"] = args.metrics_port
    if args.leader_election:
        overrides["leader_election"] = True
    if overrides:
        config = config.model_copy(update={"service": svc.model_copy(update=overrides)})
    return config


def _scheduled_jobs(
    cycle: CycleJob,
    load: Callable[[], Inputs],
    config: Config,
    telemetry: Telemetry,
    identity: str,
) -> dict[str, tuple[str, Callable[[], Any]]]:
    """The service's jobs by name: (cron schedule, job) for the cycle, refit and report."""
    svc = config.service
    store = RunStore(svc.records_path, svc.records_keep_days)
    return {
        "cycle": (svc.cycle_schedule, cycle),
        "refit": (
            svc.refit_schedule,
            ScheduledJob("refit", load, refit_models, telemetry, store, identity=identity),
        ),
        "report": (
            svc.report_schedule,
            ScheduledJob(
                "report",
                load,
                write_capacity_report(svc.report_out),
                telemetry,
                store,
                identity=identity,
            ),
        ),
    }
