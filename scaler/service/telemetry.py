"""tiercast's own health: Prometheus self-metrics, /healthz and /readyz, structured logs.

:class:`Telemetry` owns one ``prometheus_client`` registry (never the global one, so
tests and several services in one process do not share counters) and turns each
cycle's values into gauges and counters. :class:`MetricsServer` serves it with the
two probes on one port. :func:`configure_logging` switches the log format to one
JSON object per line; both formats pass through :class:`RedactSecrets`, so a token
or password that reaches a message (a URL with credentials, an Authorization header
in an exception) is masked before it is written.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pandas as pd
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    generate_latest,
)

from forecaster import __version__
from forecaster.errors import TemporaryError
from forecaster.forecasting import SeriesForecast
from forecaster.secrets import RedactSecrets
from forecaster.secrets import redact as redact  # re-exported: the service masks with it
from scaler.actuation.protocol import ActionResult
from scaler.config import Fleet, PoolConfig
from scaler.plans import CapacityPlan
from scaler.serving import IDLE_TIMEOUT_S, BoundedHTTPServer

log = logging.getLogger(__name__)

Probe = Callable[[], tuple[bool, str]]
"""A health check: (healthy, one-line reason)."""


def error_kind(exc: BaseException) -> str:
    """A stable metric label for an error: its class name in snake case, less ``Error``.

    ``TemporaryError`` -> ``temporary``, ``StaleDataError`` -> ``stale_data``,
    anything that is not one of tiercast's own errors -> ``internal``.
    """
    from forecaster.errors import TiercastError

    if not isinstance(exc, TiercastError):
        return "internal"
    name = type(exc).__name__.removesuffix("Error") or "tiercast"
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class Telemetry:
    """The self-metrics of one tiercast process.

    Scheduled jobs are labelled ``task`` (``cycle``, ``refit``, ``report``), not ``job``:
    Prometheus sets ``job`` on every scraped series itself.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        # In this order: /metrics lists the families in the order they were registered.
        self._declare_signal_metrics(r)
        self._declare_capacity_metrics(r)
        self._declare_run_metrics(r)
        self._declare_plan_metrics(r)
        Info("tiercast_build", "tiercast version.", registry=r).info({"version": __version__})

    def _declare_signal_metrics(self, r: CollectorRegistry) -> None:
        """Per signal: its forecast, newest value and staleness."""
        self.forecast = Gauge(
            "tiercast_forecast",
            "Forecast of a signal at a quantile: one lead time ahead (at=lead) or its "
            "peak over the horizon (at=peak), in the signal's unit.",
            ["signal", "quantile", "at"],
            registry=r,
        )
        self.signal_last = Gauge(
            "tiercast_signal_last_value",
            "Newest observed value of a signal.",
            ["signal"],
            registry=r,
        )
        self.staleness = Gauge(
            "tiercast_data_staleness_seconds",
            "Seconds between the cycle's now and a signal's newest observed sample.",
            ["signal"],
            registry=r,
        )

    def _declare_capacity_metrics(self, r: CollectorRegistry) -> None:
        """Per pool: planned and actual nodes; the actions taken."""
        self.planned = Gauge(
            "tiercast_capacity_planned_nodes",
            "Target nodes of a pool for now, as planned by the last cycle.",
            ["pool", "tier"],
            registry=r,
        )
        self.actual = Gauge(
            "tiercast_capacity_actual_nodes",
            "Nodes of a pool read from the provider after the last cycle acted.",
            ["pool", "tier"],
            registry=r,
        )
        self.actions = Counter(
            "tiercast_actions",
            "Actions by decision and result (applied, recorded, skipped, failed).",
            ["decision", "result"],
            registry=r,
        )

    def _declare_run_metrics(self, r: CollectorRegistry) -> None:
        """Per job: durations, runs, skips, errors, last success; and the Lease."""
        self.duration = Histogram(
            "tiercast_job_duration_seconds",
            "Wall time of a job run.",
            ["task"],
            buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
            registry=r,
        )
        self.runs = Counter(
            "tiercast_job_runs",
            "Job runs by final status (ok, held, failed, abandoned).",
            ["task", "status"],
            registry=r,
        )
        self.skipped = Counter(
            "tiercast_job_skipped",
            "Scheduled runs not started: overlap (previous run still going) or missed "
            "(later than the misfire grace).",
            ["task", "reason"],
            registry=r,
        )
        self.errors = Counter(
            "tiercast_errors",
            "Errors by kind (temporary, data, stale_data, records, internal, ...) and the "
            "stage that raised them (collect, forecast, plan, act, record, lease, ...).",
            ["kind", "stage"],
            registry=r,
        )
        self.last_success = Gauge(
            "tiercast_job_last_success_timestamp_seconds",
            "Unix time of the last run that ended ok or held.",
            ["task"],
            registry=r,
        )
        self.leader = Gauge(
            "tiercast_leader", "1 while this replica holds the Lease and may actuate.", registry=r
        )

    def _declare_plan_metrics(self, r: CollectorRegistry) -> None:
        """The fleet as planned: held GPU models, spend, unserved demand."""
        self.held = Gauge(
            "tiercast_held_gpu_models",
            "GPU models whose pools are held (no scale-down) on stale or missing data.",
            registry=r,
        )
        self.cost = Gauge(
            "tiercast_cost_per_hour",
            "Spend per hour of the fleet now (state=current) and as planned (state=planned).",
            ["state"],
            registry=r,
        )
        self.unserved = Gauge(
            "tiercast_expected_unserved_gpu_hours",
            "Expected GPU-hours of demand the plan leaves unserved over the horizon.",
            registry=r,
        )
        self.drift_coverage = Gauge(
            "tiercast_forecast_coverage",
            "Share of a signal's actuals inside its lowest-highest forecast quantiles, one lead "
            "time ahead, over drift.window_s of run records.",
            ["signal"],
            registry=r,
        )
        self.drift_error = Gauge(
            "tiercast_forecast_error",
            "Mean absolute error of a signal's median forecast one lead time ahead over its "
            "mean actual, over drift.window_s of run records.",
            ["signal"],
            registry=r,
        )
        self.drifted = Gauge(
            "tiercast_forecast_drifted",
            "1 while a signal's forecast error or coverage is out of its band (drift).",
            ["signal"],
            registry=r,
        )
        self.drift_refits = Counter(
            "tiercast_drift_refits",
            "Models refitted ahead of schedule because their forecasts drifted.",
            ["signal"],
            registry=r,
        )
        self.waiting = Gauge(
            "tiercast_waiting_gpus",
            "GPUs of pods Pending past starvation.pending_threshold_s and of Kueue's pending "
            "workloads, per GPU model, as the last cycle read them (a floor under its plan).",
            ["gpu_model"],
            registry=r,
        )

    def error(self, exc: BaseException, stage: str) -> str:
        """Count an error; returns its kind label."""
        kind = error_kind(exc)
        self.errors.labels(kind=kind, stage=stage).inc()
        return kind

    def observe_forecasts(
        self,
        fleet: Fleet,
        forecasts: Mapping[str, SeriesForecast],
        now: pd.Timestamp,
    ) -> None:
        """Each signal's last value, staleness and forecast (one lead time ahead, the
        fleet's largest, and at its peak); a signal of ``fleet`` with none is stale."""
        lead = pd.Timedelta(seconds=max(p.lead_time_s for p in fleet.pools))
        for name, fc in forecasts.items():
            self.signal_last.labels(signal=name).set(fc.last_value)
            self.staleness.labels(signal=name).set(
                max(0.0, (now - fc.last_timestamp).total_seconds())
            )
            ahead = fc.frame[fc.frame.index >= now + lead]
            row = ahead.iloc[0] if len(ahead) else fc.frame.iloc[-1]
            for col in fc.frame.columns:
                q = col[1:]
                self.forecast.labels(signal=name, quantile=q, at="lead").set(float(row[col]))
                self.forecast.labels(signal=name, quantile=q, at="peak").set(
                    float(fc.frame[col].max())
                )
        # A signal with no usable history has no forecast: its staleness is unknown, and
        # the planner holds its pools; make that visible rather than leave an old value.
        for s in fleet.signals:
            if s.name not in forecasts:
                self.staleness.labels(signal=s.name).set(float("inf"))

    def observe_plan(self, pools: Sequence[PoolConfig], plan: CapacityPlan) -> None:
        """The plan's targets (by the tier of ``pools``), holds, cost, risk and starvation."""
        tiers = {p.name: p.tier for p in pools}
        for p in plan.pools:
            target = p.target_nodes[0] if p.target_nodes else p.current_nodes
            self.planned.labels(pool=p.pool, tier=tiers.get(p.pool, p.tier)).set(target)
        self.held.set(len(plan.risk.get("held_models", {})))
        self.cost.labels(state="current").set(plan.cost["per_hour_current"])
        self.cost.labels(state="planned").set(plan.cost["per_hour_now"])
        self.unserved.set(plan.risk["expected_unserved_gpu_hours"])
        starvation = plan.risk.get("starvation")
        if isinstance(starvation, dict):
            # Every planned GPU model, so one whose pods stopped waiting reads 0, not its past.
            read = starvation.get("models", {})
            for model in sorted({p.gpu_model for p in plan.pools} | set(read)):
                waiting = read.get(model, {}).get("waiting_gpus", 0.0)
                self.waiting.labels(gpu_model=model).set(float(waiting))

    def observe_drift(self, judged: Mapping[str, Any]) -> None:
        """Per signal judged (``scaler.service.drift.SignalDrift``): coverage, error, drifted."""
        for name, d in judged.items():
            if d.points:
                self.drift_coverage.labels(signal=name).set(d.coverage)
                self.drift_error.labels(signal=name).set(d.error)
            self.drifted.labels(signal=name).set(1 if d.out_of_band else 0)

    def observe_drift_refits(self, refitted: Mapping[str, Any]) -> None:
        for name in refitted:
            self.drift_refits.labels(signal=name).inc()

    def observe_actions(self, results: list[ActionResult]) -> None:
        for r in results:
            self.actions.labels(decision=r.action.decision, result=r.outcome).inc()

    def observe_inventory(self, pools: Sequence[PoolConfig], inventory: Mapping[str, int]) -> None:
        for p in pools:
            if p.name in inventory:
                self.actual.labels(pool=p.name, tier=p.tier).set(inventory[p.name])

    def observe_run(self, job: str, status: str, duration_s: float, finished: float) -> None:
        self.runs.labels(task=job, status=status).inc()
        self.duration.labels(task=job).observe(duration_s)
        if status in ("ok", "held"):
            self.last_success.labels(task=job).set(finished)

    def exposition(self) -> bytes:
        """The registry in Prometheus text format."""
        return generate_latest(self.registry)


class MetricsServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` on one port, in a daemon thread.

    ``/healthz`` (liveness) fails only when restarting would help: the scheduler is
    gone or a job is wedged. A Prometheus or API-server outage is not a liveness
    failure; it shows in ``tiercast_errors_total`` instead. ``/readyz`` fails until
    the service has started and while it shuts down.
    """

    def __init__(
        self,
        telemetry: Telemetry,
        host: str,
        port: int,
        healthz: Probe,
        readyz: Probe,
    ) -> None:
        self.telemetry = telemetry
        probes = {"/healthz": healthz, "/readyz": readyz}

        class Handler(BaseHTTPRequestHandler):
            timeout = IDLE_TIMEOUT_S  # an idle client does not hold its thread for ever

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, telemetry.exposition(), CONTENT_TYPE_LATEST)
                elif path in probes:
                    try:
                        ok, why = probes[path]()
                    except Exception as exc:  # a probe that raises is a failing probe
                        ok, why = False, f"probe raised {type(exc).__name__}: {exc}"
                    self._send(200 if ok else 503, (why + "\n").encode(), "text/plain")
                else:
                    self._send(404, b"not found; try /metrics, /healthz or /readyz\n", "text/plain")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                # Scrapes every few seconds would drown the service's own log lines.
                log.debug("metrics endpoint: " + format, *args)

        try:
            self._server: ThreadingHTTPServer = BoundedHTTPServer((host, port), Handler)
        except OSError as exc:
            raise TemporaryError(
                f"service.metrics_port: cannot listen on {host}:{port}: {exc}"
            ) from exc
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="tiercast-metrics", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


# Attributes every LogRecord has; anything else came through ``extra=`` and is a field.
_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and any ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": pd.Timestamp(record.created, unit="s", tz="UTC").isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value if isinstance(value, int | float | bool | None) else str(value)
        return json.dumps(out, default=str)


def configure_logging(fmt: str, level: int | None = None) -> None:
    """Set the root handlers' format (``text`` or ``json``) and mask secrets in both."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.StreamHandler())
    if level is not None:
        root.setLevel(level)
    for handler in root.handlers:
        if fmt == "json":
            handler.setFormatter(JsonFormatter())
        if not any(isinstance(f, RedactSecrets) for f in handler.filters):
            handler.addFilter(RedactSecrets())
