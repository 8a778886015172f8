"""Production mode: the cycle job, ``tiercast serve`` and the one-shot ``tiercast run``.

:class:`CycleJob` is the one job function. ``tiercast run`` calls it once (a
CronJob); ``tiercast serve`` calls it from an APScheduler 3 ``BackgroundScheduler``
on the ``service.cycle_schedule`` cron, beside the refit and report jobs. Each run:

1. loads config and fresh history; a failure here ends the run ``failed`` before
   anything is planned, so nothing changes;
2. forecasts, plans and acts through :func:`scaler.service.cycle.run_cycle`, with the
   provider wrapped in :class:`GuardedProvider`, which checks leadership and
   shutdown before every action, retries temporary API failures only after
   re-reading the pool (an action that did land is not sent twice), and turns
   errors into ``failed`` results rather than half-done cycles;
3. writes a run record and updates the self-metrics.

Exit codes of ``tiercast run`` (and the ``exit_code`` of every run record):
0 ``ok``; 1 ``held`` (a pool was held on stale or missing data: the plan was
made and is safe, but the data needs a look) or ``failed`` (a dependency was
down, an action failed, or the run record could not be written); 2 bad input or
config; 143 ``abandoned`` (SIGTERM before or while acting: remaining actions were
not sent). A CronJob's failed Job, or ``kube_job_status_failed``, catches 1, 2 and 143.

``now`` is ``--now`` when given, the wall clock when any signal is read from
Prometheus, and otherwise just after the newest sample (files and the demo).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    JobEvent,
    JobExecutionEvent,
)
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from forecaster.errors import BadInputError, TemporaryError, TiercastError
from forecaster.retrying import Attempts, Retry, RetryPolicy
from forecaster.series import History
from scaler.actuation.protocol import ActionResult, CapacityProvider, RecordingProvider
from scaler.config import Config, parse_schedule
from scaler.plans import Action, PastCycle, iso
from scaler.records import (
    RecordsError,
    RunRecord,
    RunStore,
    forecast_summary,
    inputs_summary,
    plan_summary,
)
from scaler.service.cycle import CycleResult, past_cycles, run_cycle
from scaler.service.leader import AlwaysLeader, Leadership
from scaler.service.telemetry import MetricsServer, Telemetry, configure_logging

log = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_ABANDONED = 0, 1, 2, 143

WEDGED_AFTER_S: dict[str, float] = {"cycle": 1800.0, "refit": 6 * 3600.0, "report": 3600.0}
"""A job running longer than this fails ``/healthz``, so the kubelet restarts the pod."""

RETRY_BACKOFF_S = (1.0, 4.0, 10.0)
"""Waits before the 1st, 2nd, 3rd+ retry of an action, unless the error names a delay."""
MAX_RETRY_WAIT_S = 30.0
"""The longest wait before a retry of an action, a delay the error names included."""


class Inputs(NamedTuple):
    config: Config
    history: History
    now: pd.Timestamp | None
    """None: use the job's clock (live data)."""
    source: str


def utc_now() -> pd.Timestamp:
    return pd.Timestamp.now(tz="UTC").tz_localize(None)


def live_signals(config: Config) -> bool:
    """Whether any signal is read from Prometheus (then ``now`` is the wall clock)."""
    return any(s.query is not None for s in config.signals)


class Stop:
    """A shutdown request: set by SIGTERM/SIGINT, checked before every action."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal: int | None = None

    def is_set(self) -> bool:
        return self.event.is_set()

    def set(self, signum: int | None = None) -> None:
        self.signal = signum
        self.event.set()

    def install(self) -> None:
        """Route SIGTERM and SIGINT here (only possible from the main thread)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, _frame: self._on_signal(signum))

    def _on_signal(self, signum: int) -> None:
        log.warning(
            "%s received: finishing the current step, no new actions",
            signal.Signals(signum).name,
        )
        self.set(signum)


class GuardedProvider:
    """Wraps the real provider: leadership, shutdown and retries around every ``apply``."""

    def __init__(
        self,
        provider: CapacityProvider,
        act: Callable[[], bool],
        stop: Stop,
        telemetry: Telemetry,
        retries: int = 2,
        sleep: Callable[[float], Any] | None = None,
    ) -> None:
        self.provider = provider
        self.act = act
        self.stop = stop
        self.telemetry = telemetry
        self.retries = retries
        self._sleep = sleep or (lambda s: stop.event.wait(s))
        self.stage = "plan"
        self.abandoned = False

    def inventory(self) -> dict[str, int]:
        stage, self.stage = self.stage, "inventory"
        inv = self.provider.inventory()
        self.stage = stage
        return inv

    def mig_inventory(self) -> tuple[Any, Any]:
        """The wrapped provider's MIG nodes and mig-parted entries, when it can read them."""
        reader = getattr(self.provider, "mig_inventory", None)
        if not callable(reader):
            return None, None
        stage, self.stage = self.stage, "inventory"
        out = reader()
        self.stage = stage
        return out

    def apply(self, action: Action) -> ActionResult:
        """Apply ``action`` when leading and not stopping, retrying temporary API errors.

        A retry comes only after the wait, while still leading and not stopping, and for a
        node count only when the pool is not already at the target (the failed call may
        have landed). An error a retry would repeat, or any other, fails the action.
        """
        self.stage = "act"
        if self.stop.is_set():
            self.abandoned = True
            return ActionResult(action, "skipped", "shutting down: not applied")
        if not self.act():
            what = (
                f"scale {action.pool} to {action.target_nodes}"
                if action.kind == "nodes"
                else f"change {action.pool}"
            )
            return ActionResult(action, "recorded", f"not the leader or dry-run: would {what}")
        tries = Attempts(self._retry_policy(action))
        for attempt in tries:
            if isinstance(tries.last_error, TemporaryError):
                settled = self._settled_before_retry(action, tries.last_error)
                if settled is not None:
                    return settled
            with attempt:
                return self._apply_once(action)
        return ActionResult(
            action, "failed", f"gave up after {self.retries + 1} attempts: {tries.last_error}"
        )

    def _retry_policy(self, action: Action) -> RetryPolicy:
        def log_retry(retry: Retry) -> None:
            log.warning("%s: %s; retrying in %.1f s", action.pool, retry.error, retry.delay_s)

        return RetryPolicy(
            self.retries,
            # Uncapped here so that the log line names the delay the error asked for; the
            # wait itself is capped at MAX_RETRY_WAIT_S.
            max_s=math.inf,
            sleep=lambda seconds: self._sleep(min(seconds, MAX_RETRY_WAIT_S)),
            schedule=RETRY_BACKOFF_S,
            retryable=lambda error: isinstance(error, TemporaryError),
            delay_hint=lambda error: getattr(error, "delay_s", None) or None,
            before_sleep=log_retry,
        )

    def _apply_once(self, action: Action) -> ActionResult:
        """One try: the provider's result, a failed result, or a TemporaryError to retry."""
        try:
            return self.provider.apply(action)
        except TemporaryError as exc:
            self.telemetry.error(exc, "act")
            raise
        except BadInputError as exc:
            # The API rejected the change itself (422, 403): a retry would repeat it.
            self.telemetry.error(exc, "act")
            return ActionResult(action, "failed", str(exc))
        except Exception as exc:
            self.telemetry.error(exc, "act")
            log.error("%s: unexpected %s: %s", action.pool, type(exc).__name__, exc)
            return ActionResult(action, "failed", f"{type(exc).__name__}: {exc}")

    def _settled_before_retry(self, action: Action, error: TemporaryError) -> ActionResult | None:
        """After the wait: a result that makes the retry needless, or None to retry."""
        if self.stop.is_set() or not self.act():
            self.abandoned = self.stop.is_set()
            return ActionResult(action, "skipped", f"stopped before retrying: {error}")
        if action.kind != "nodes":
            return None
        # The failed call may have landed (a timeout after the write): re-read the pool,
        # and do not send the change again if it is already there.
        try:
            now_nodes = self.provider.inventory().get(action.pool)
        except TemporaryError as inv_exc:
            self.telemetry.error(inv_exc, "inventory")
            return None
        if now_nodes == action.target_nodes:
            return ActionResult(action, "applied", f"confirmed at {now_nodes} after a retried call")
        return None


ProviderFactory = Callable[[Config], CapacityProvider]
"""Builds the provider for one cycle (a fresh one each time: providers keep per-cycle
state such as the change cap and the halt after an API failure)."""


@dataclass
class JobOutcome:
    job: str
    status: str
    exit_code: int
    record: RunRecord
    result: CycleResult | None = None
    error: BaseException | None = None


def _write_atomic(path: str, text: str) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(p)


@dataclass
class CycleJob:
    """The plan-and-act cycle: the function ``run`` calls once and ``serve`` on a schedule."""

    load: Callable[[], Inputs]
    make_provider: ProviderFactory
    telemetry: Telemetry = field(default_factory=Telemetry)
    store: RunStore | None = None
    leadership: Leadership = field(default_factory=AlwaysLeader)
    dry_run: bool = True
    """For the record: whether the provider itself only records (dry-run providers)."""
    stop: Stop = field(default_factory=Stop)
    clock: Callable[[], pd.Timestamp] = utc_now
    plan_out: str | None = None
    identity: str = ""
    retries: int = 2
    sleep: Callable[[float], Any] | None = None

    def _past_cycles(self) -> list[PastCycle]:
        """Recent cycles from the run records, for the planner's hysteresis across cycles.

        No records yet, or unreadable ones, give no state (the planner then holds
        only what the plan itself and the observed floor ask for).
        """
        if self.store is None:
            return []
        try:
            return past_cycles(self.store.recent(limit=24, job="cycle"))
        except (TiercastError, TypeError, ValueError) as exc:
            log.info("no run records for hysteresis: %s", str(exc)[:200])
            return []

    def __call__(self) -> JobOutcome:
        """One cycle: load the inputs, plan and act (leadership and shutdown checked before
        every action, each retried), then record the run and its telemetry."""
        run = self._begin()
        try:
            self._plan_and_act(run)
        except _Abandoned:
            run.abandoned = True
        except Exception as exc:
            self._failed(run, exc)
        return self._finish(run)

    def _begin(self) -> _CycleRun:
        started, t0 = self.clock(), time.monotonic()
        run_id = uuid.uuid4().hex[:12]
        leader = self.leadership.is_leader()
        self.telemetry.leader.set(1 if leader else 0)
        return _CycleRun(run_id, started, t0, leader)

    def _plan_and_act(self, run: _CycleRun) -> None:
        """Load, forecast, plan and act; ``run.stage`` names the step a failure is in."""
        inputs = self.load()
        config = inputs.config
        run.fields.update(source=inputs.source, inputs=inputs_summary(inputs.history))
        if self.stop.is_set():
            raise _Abandoned()
        run.stage = "provider"
        run.guard = GuardedProvider(
            self.make_provider(config),
            act=self.leadership.is_leader,
            stop=self.stop,
            telemetry=self.telemetry,
            retries=self.retries,
            sleep=self.sleep,
        )
        run.stage = "forecast"
        now = inputs.now if inputs.now is not None else self.clock()
        run.result = run_cycle(
            config,
            inputs.history,
            run.guard,
            now,
            dry_run=self.dry_run or not run.leader,
            past=self._past_cycles(),
        )
        run.abandoned = run.guard.abandoned
        run.stage = "record"
        self._observe(run.result, run.guard, config, now, run.fields)

    def _observe(
        self,
        result: CycleResult,
        guard: GuardedProvider,
        config: Config,
        now: pd.Timestamp,
        fields: dict[str, Any],
    ) -> None:
        """The run record's summaries, the self-metrics, ``plan_out`` and the inventory gauge."""
        quantiles = sorted(set(config.forecast.quantiles) | {config.policy.quantile})
        lead = max(p.lead_time_s for p in config.pools)
        fields.update(
            forecast=forecast_summary(result.forecasts, quantiles, lead),
            plan=plan_summary(result.plan),
            notes=list(result.plan.notes),
        )
        self.telemetry.observe_forecasts(config, result.forecasts, now)
        self.telemetry.observe_plan(config, result.plan)
        self.telemetry.observe_actions(result.results)
        if self.plan_out:
            _write_atomic(self.plan_out, result.plan.to_json())
        try:
            self.telemetry.observe_inventory(config, guard.provider.inventory())
        except TemporaryError as exc:
            self.telemetry.error(exc, "inventory")

    def _failed(self, run: _CycleRun, exc: Exception) -> None:
        """Count and log a failure, naming the step it happened in."""
        run.error = exc
        where = run.stage
        if run.stage == "forecast" and run.guard is not None and run.guard.stage != "plan":
            where = run.guard.stage
        kind = self.telemetry.error(exc, where)
        log.error(
            "cycle %s failed in %s: %s: %s",
            run.run_id,
            where,
            type(exc).__name__,
            exc,
            extra={"run_id": run.run_id, "job": "cycle", "stage": where, "error_kind": kind},
        )

    def _finish(self, run: _CycleRun) -> JobOutcome:
        """Write the run record and the run's metrics; the outcome ``run`` and ``serve`` see."""
        actions = _action_rows(run.result)
        status, code = _cycle_status(run, actions)
        duration = time.monotonic() - run.t0
        record = RunRecord(
            run_id=run.run_id,
            job="cycle",
            started_at=iso(run.started),
            finished_at=iso(self.clock()),
            duration_s=round(duration, 3),
            status=status,
            exit_code=code,
            dry_run=self.dry_run,
            leader=run.leader,
            identity=self.identity,
            error=f"{type(run.error).__name__}: {run.error}" if run.error is not None else None,
            actions=actions,
            **run.fields,
        )
        self.telemetry.observe_run("cycle", status, duration, time.time())
        if self.store is not None:
            try:
                self.store.add(record, run.result.plan if run.result else None)
            except (RecordsError, OSError) as exc:
                self.telemetry.error(exc, "record")
                log.error("%s", exc, extra={"run_id": run.run_id, "job": "cycle"})
                code = max(code, EXIT_FAILED)
        log.info(
            "cycle %s %s in %.1f s: %d action(s)",
            run.run_id,
            status,
            duration,
            len(actions),
            extra={"run_id": run.run_id, "job": "cycle", "status": status},
        )
        return JobOutcome("cycle", status, code, record, run.result, run.error)


@dataclass
class _CycleRun:
    """One cycle as it goes: filled in step by step, then read for the run record."""

    run_id: str
    started: pd.Timestamp
    t0: float
    """``time.monotonic()`` at the start, for the duration."""
    leader: bool
    fields: dict[str, Any] = field(default_factory=lambda: {"source": ""})
    """The run record's inputs, forecast and plan summaries, as far as the cycle got."""
    result: CycleResult | None = None
    error: BaseException | None = None
    guard: GuardedProvider | None = None
    abandoned: bool = False
    stage: str = "collect"


def _action_rows(result: CycleResult | None) -> list[dict[str, Any]]:
    """Each action and its outcome, as the run record keeps them."""
    return [
        {
            "pool": r.action.pool,
            "decision": r.action.decision,
            "kind": r.action.kind,
            "current_nodes": r.action.current_nodes,
            "target_nodes": r.action.target_nodes,
            "reason": r.action.reason,
            "outcome": r.outcome,
            "message": r.message,
        }
        for r in (result.results if result else [])
    ]


def _cycle_status(run: _CycleRun, actions: list[dict[str, Any]]) -> tuple[str, int]:
    """The run's status and exit code (see the module's docstring)."""
    if run.abandoned:
        return "abandoned", EXIT_ABANDONED
    if run.error is not None:
        code = run.error.exit_code if isinstance(run.error, TiercastError) else EXIT_FAILED
        return "failed", code
    if any(a["outcome"] == "failed" for a in actions):
        return "failed", EXIT_FAILED
    if run.result is not None and run.result.plan.risk.get("held_models"):
        return "held", EXIT_FAILED
    return "ok", EXIT_OK


@dataclass
class ScheduledJob:
    """A job other than the cycle (``refit``, ``report``): load inputs, run ``body``, record it.

    ``body(inputs)`` returns notes for the run record; an exception fails the run
    (counted in ``tiercast_errors_total{stage=<job>}``) without stopping the service.
    """

    name: str
    load: Callable[[], Inputs]
    body: Callable[[Inputs], list[str]]
    telemetry: Telemetry = field(default_factory=Telemetry)
    store: RunStore | None = None
    clock: Callable[[], pd.Timestamp] = utc_now
    identity: str = ""

    def __call__(self) -> JobOutcome:
        started, t0 = self.clock(), time.monotonic()
        run_id = uuid.uuid4().hex[:12]
        error: BaseException | None = None
        notes: list[str] = []
        source = ""
        try:
            inputs = self.load()
            source = inputs.source
            notes = self.body(inputs)
        except Exception as exc:
            error = exc
            self.telemetry.error(exc, self.name)
            log.error(
                "%s %s failed: %s: %s",
                self.name,
                run_id,
                type(exc).__name__,
                exc,
                extra={"run_id": run_id, "job": self.name},
            )
        status = "ok" if error is None else "failed"
        code = EXIT_OK
        if error is not None:
            code = error.exit_code if isinstance(error, TiercastError) else EXIT_FAILED
        duration = time.monotonic() - t0
        record = RunRecord(
            run_id=run_id,
            job=self.name,
            started_at=iso(started),
            finished_at=iso(self.clock()),
            duration_s=round(duration, 3),
            status=status,
            exit_code=code,
            identity=self.identity,
            source=source,
            error=f"{type(error).__name__}: {error}" if error is not None else None,
            notes=notes,
        )
        self.telemetry.observe_run(self.name, status, duration, time.time())
        if self.store is not None:
            try:
                self.store.add(record)
            except (RecordsError, OSError) as exc:
                self.telemetry.error(exc, "record")
                log.error("%s", exc, extra={"run_id": run_id, "job": self.name})
        log.info("%s %s %s in %.1f s", self.name, run_id, status, duration)
        return JobOutcome(self.name, status, code, record, None, error)


def refit_models(inputs: Inputs) -> list[str]:
    """Refit every signal's model now (a quiet hour), so cycles reuse fresh fits."""
    from forecaster.artifacts import load_signing_key
    from forecaster.forecasting import forecast_history
    from forecaster.store import ModelStore

    config = inputs.config
    # max_age_s=0: every stored model is due, so each one is refitted and written.
    store = ModelStore(
        config.model_store.path,
        max_age_s=0,
        signing_key=load_signing_key(config.model_store.signing_key_file),
    )
    now = inputs.now if inputs.now is not None else utc_now()
    history = {n: y[y.index < now] for n, y in inputs.history.items()}
    usable = {n: y for n, y in history.items() if y.notna().sum() >= 2}
    # One cycle ahead is enough: the point is fitting and storing the models.
    forecasts = forecast_history(
        usable,
        pd.Timedelta(seconds=config.policy.cycle_s),
        sorted(set(config.forecast.quantiles) | {config.policy.quantile}),
        config.forecast.method,
        store,
    )
    notes = [f"{n}: {fc.estimator} ({fc.reason})" for n, fc in forecasts.items()]
    notes += [f"{n}: no usable history; not refitted" for n in sorted(set(history) - set(usable))]
    return notes


def write_capacity_report(out_dir: str) -> Callable[[Inputs], list[str]]:
    """The scheduled capacity report: a dry-run plan and ``tiercast report``'s files."""

    def body(inputs: Inputs) -> list[str]:
        from scaler.reports import reviewing
        from scaler.reports.capacity import build_capacity_report
        from scaler.reports.writing import write_report

        config = inputs.config
        now = inputs.now if inputs.now is not None else utc_now()
        inventory = {
            p.name: p.current_nodes if p.current_nodes is not None else p.min_nodes
            for p in config.pools
        }
        result = run_cycle(config, inputs.history, RecordingProvider(inventory), now, True)
        # The review's forecast-against-actual reads the cycles this service recorded
        # over the last week (the report's schedule is weekly by default).
        recorded = reviewing.load_records(
            config.service.records_path, now - pd.Timedelta(days=7), now
        )
        report = build_capacity_report(
            config,
            inputs.history,
            result.plan,
            result.forecasts,
            inputs.source,
            recorded=recorded,
        )
        written = write_report(report, out_dir)
        return [f"wrote {p}" for p in written]

    return body


class _Abandoned(Exception):
    """Internal: a shutdown arrived before the cycle started acting."""


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
        from scaler.config import load_config

        config = load_config(config_path)
    else:
        inputs = load()
        config = inputs.config
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
        retries=config.service.action_retries,
    )
    outcome = job()
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
        print(f"tiercast: cycle {outcome.status}: {detail}", file=sys.stderr)
    return outcome.exit_code


class Service:
    """The scheduler, the metrics endpoint and the election, started and stopped together.

    Every job runs with ``max_instances=1`` (a run still going when the next is due is
    skipped and counted as ``overlap``), ``coalesce=True`` (runs missed while the
    process was stopped or busy collapse into one) and the configured misfire grace
    (a run later than that is dropped and counted as ``missed``).
    """

    def __init__(
        self,
        config: Config,
        jobs: dict[str, tuple[str, Callable[[], Any]]],
        telemetry: Telemetry,
        leadership: Leadership,
        stop: Stop,
    ) -> None:
        self.config = config
        self.jobs = jobs
        self.telemetry = telemetry
        self.leadership = leadership
        self.stop = stop
        self.metrics: MetricsServer | None = None
        self.scheduler = BackgroundScheduler(
            timezone="UTC",
            executors={"default": ThreadPoolExecutor(max_workers=max(2, len(jobs)))},
            job_defaults={
                "max_instances": 1,
                "coalesce": True,
                "misfire_grace_time": config.service.misfire_grace_s,
            },
        )
        self._running: dict[str, float] = {}
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._ready = False
        self.scheduler.add_listener(
            self._on_event, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED | EVENT_JOB_ERROR
        )
        for name, (schedule, fn) in jobs.items():
            self.scheduler.add_job(
                self._tracked(name, fn), parse_schedule(schedule), id=name, name=name
            )

    def _tracked(self, name: str, fn: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            with self._lock:
                self._running[name] = time.monotonic()
            try:
                outcome = fn()
                # Ready once a cycle has planned (ok or held): a service that cannot
                # reach Prometheus yet stays up, not ready, and retries on schedule.
                if name == "cycle" and getattr(outcome, "status", None) in ("ok", "held"):
                    self._ready = True
            finally:
                with self._lock:
                    self._running.pop(name, None)
                    self._idle.notify_all()

        return run

    def _on_event(self, event: JobEvent) -> None:
        if event.code == EVENT_JOB_MAX_INSTANCES:
            self.telemetry.skipped.labels(task=event.job_id, reason="overlap").inc()
            log.warning("%s: previous run still going; this run is skipped", event.job_id)
        elif event.code == EVENT_JOB_MISSED:
            self.telemetry.skipped.labels(task=event.job_id, reason="missed").inc()
            log.warning("%s: run missed its misfire grace; skipped", event.job_id)
        elif isinstance(event, JobExecutionEvent) and event.exception is not None:
            # Job functions catch their own errors; this is a bug, but the service goes on.
            self.telemetry.error(event.exception, event.job_id)
            log.error(
                "%s raised %s: %s", event.job_id, type(event.exception).__name__, event.exception
            )

    def healthz(self) -> tuple[bool, str]:
        if not self.scheduler.running and not self.stop.is_set():
            return False, "scheduler is not running"
        with self._lock:
            for name, since in self._running.items():
                age = time.monotonic() - since
                if age > WEDGED_AFTER_S.get(name, 3600.0):
                    return False, f"job {name} has been running for {age:.0f} s"
        return True, "ok"

    def readyz(self) -> tuple[bool, str]:
        if self.stop.is_set():
            return False, "shutting down"
        if not self._ready:
            return False, "no cycle has completed yet"
        return True, "ok"

    def start(self) -> None:
        svc = self.config.service
        if svc.metrics_port:
            self.metrics = MetricsServer(
                self.telemetry, svc.metrics_host, svc.metrics_port, self.healthz, self.readyz
            ).start()
        self.leadership.start()
        self.scheduler.start()
        if "cycle" not in self.jobs:
            self._ready = True
        for job in self.scheduler.get_jobs():
            log.info("scheduled %s: next run %s", job.id, job.next_run_time)

    def shutdown(self, grace_s: float) -> bool:
        """Stop scheduling, let running jobs finish for up to ``grace_s``; True if they did."""
        self.stop.set(self.stop.signal)
        self.scheduler.shutdown(wait=False)
        deadline = time.monotonic() + grace_s
        with self._lock:
            while self._running and time.monotonic() < deadline:
                self._idle.wait(timeout=max(0.01, deadline - time.monotonic()))
            unfinished = sorted(self._running)
        if unfinished:
            log.error("shutdown grace over; abandoning %s", ", ".join(unfinished))
        self.leadership.stop()
        self.telemetry.leader.set(0)
        if self.metrics is not None:
            self.metrics.stop()
        return not unfinished


def _ignore(_value: object) -> None:
    return None


def make_leadership(config: Config, telemetry: Telemetry, identity: str) -> Leadership:
    svc = config.service
    if not svc.leader_election:
        return AlwaysLeader()
    from scaler.service.leader import LeaseElector, coordination_api, default_namespace

    return LeaseElector(
        coordination_api(),
        svc.lease_name,
        svc.lease_namespace or default_namespace(),
        identity,
        svc.lease_duration_s,
        svc.lease_renew_s,
        on_change=lambda leading: telemetry.leader.set(1 if leading else 0),
        on_error=lambda exc: _ignore(telemetry.error(exc, "lease")),
    )


def serve(args: argparse.Namespace) -> int:
    """``tiercast serve``: run the scheduled jobs until SIGTERM."""
    load = _serve_loader(args)
    config = _serve_config(args, load)
    svc = config.service
    from scaler.service.leader import default_identity

    identity = default_identity()
    telemetry = Telemetry()
    stop = Stop()
    leadership = make_leadership(config, telemetry, identity)
    cycle = CycleJob(
        load=load,
        make_provider=provider_factory(
            args.dry_run, args.server_dry_run, args.kubeconfig, args.context
        ),
        telemetry=telemetry,
        store=RunStore(svc.records_path, svc.records_keep_days),
        leadership=leadership,
        dry_run=args.dry_run,
        stop=stop,
        plan_out=svc.plan_out,
        identity=identity,
        retries=svc.action_retries,
    )
    jobs = _scheduled_jobs(cycle, load, config, telemetry, identity)
    service = Service(config, jobs, telemetry, leadership, stop)
    stop.install()
    service.start()
    log.warning(
        "tiercast serve: cycle %r, metrics on :%s, %s",
        svc.cycle_schedule,
        svc.metrics_port or "off",
        f"Lease {svc.lease_name}" if svc.leader_election else "single replica",
    )
    once: JobOutcome | None = None
    if args.once:
        once = cycle()
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
        live = live_signals(config) and not args.now
        return Inputs(config, history, None if live else now, label)

    return load


def _serve_config(args: argparse.Namespace, load: Callable[[], Inputs]) -> Config:
    """The config ``serve`` starts with, its logging set up and the flags' overrides applied."""
    if getattr(args, "config", None) and getattr(args, "history", None) is None:
        # Only the config at start-up: Prometheus may be down now and up by the next cycle.
        from scaler.config import load_config

        config = load_config(args.config)
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
