"""``tiercast serve``'s scheduler: :class:`Service` runs the jobs on their cron schedules
(APScheduler 3), serves /metrics and the probes, and runs the election, all started and
stopped together.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    JobEvent,
    JobExecutionEvent,
)
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from scaler.config import Config, parse_schedule
from scaler.service.leader import Leadership
from scaler.service.runs import Stop
from scaler.service.telemetry import MetricsServer, Telemetry

log = logging.getLogger(__name__)

WEDGED_AFTER_S: dict[str, float] = {"cycle": 1800.0, "refit": 6 * 3600.0, "report": 3600.0}
"""A job running longer than this fails ``/healthz``, so the kubelet restarts the pod."""


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
        self._scheduled = True
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
        if self._scheduled and not self.scheduler.running and not self.stop.is_set():
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

    def start(self, schedule: bool = True) -> None:
        """Serve metrics, take part in the election and, with ``schedule``, run the jobs on
        their schedules (``serve --once`` runs its one cycle itself: nothing scheduled may
        start beside it and outlive the shutdown grace)."""
        svc = self.config.service
        if svc.metrics_port:
            self.metrics = MetricsServer(
                self.telemetry, svc.metrics_host, svc.metrics_port, self.healthz, self.readyz
            ).start()
        self.leadership.start()
        self._scheduled = schedule
        if not schedule:
            return
        self.scheduler.start()
        if "cycle" not in self.jobs:
            self._ready = True
        for job in self.scheduler.get_jobs():
            log.info("scheduled %s: next run %s", job.id, job.next_run_time)

    def shutdown(self, grace_s: float) -> bool:
        """Stop scheduling, let running jobs finish for up to ``grace_s``; True if they did."""
        self.stop.set(self.stop.signal)
        if self.scheduler.running:
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
