"""The scheduled jobs other than the cycle: refitting the models and writing the
capacity report, each run through :class:`ScheduledJob` and recorded like a cycle.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from forecaster.errors import TiercastError
from scaler.actuation.protocol import RecordingProvider
from scaler.plans import iso
from scaler.records import RecordsError, RunRecord, RunStore
from scaler.service.cycle import run_cycle
from scaler.service.runs import EXIT_FAILED, EXIT_OK, Inputs, JobOutcome, utc_now
from scaler.service.telemetry import Telemetry

log = logging.getLogger(__name__)


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


REFIT_BUDGET_S = 1800.0
"""Seconds the scheduled refit spends at most: past it, the signals not yet refitted are
left (one note line); their models age as before and a cycle refits each when it is due."""


def refit_models(
    inputs: Inputs, budget_s: float = REFIT_BUDGET_S, clock: Callable[[], float] = time.monotonic
) -> list[str]:
    """Refit every signal's model now (a quiet hour), so cycles reuse fresh fits; within
    ``budget_s`` seconds (each refit starts only while some is left)."""
    from forecaster.artifacts import load_signing_key
    from forecaster.forecasting import SeriesForecast, forecast_history
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
    began = clock()
    forecasts: dict[str, SeriesForecast] = {}
    left: list[str] = []
    for name, y in usable.items():
        if clock() - began >= budget_s:
            left.append(name)
            continue
        # One cycle ahead is enough: the point is fitting and storing the models.
        forecasts |= forecast_history(
            {name: y},
            pd.Timedelta(seconds=config.policy.cycle_s),
            sorted(set(config.forecast.quantiles) | {config.policy.quantile}),
            config.forecast.method,
            store,
        )
    notes = [f"{n}: {fc.estimator} ({fc.reason})" for n, fc in forecasts.items()]
    if left:
        notes.append(
            f"refit budget of {budget_s:g} s spent: {len(left)} signal(s) not refitted "
            f"({', '.join(left[:5])}{', ...' if len(left) > 5 else ''}); each is refitted by "
            "a cycle when its model is due"
        )
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
        # Lead times of auto pools as the cycles learned them, read from the run records.
        records = RunStore(config.service.records_path, config.service.records_keep_days)
        result = run_cycle(
            config,
            inputs.history,
            RecordingProvider(inventory),
            now,
            True,
            lead_time_records=records,
        )
        # The review's forecast-against-actual reads the cycles this service recorded
        # over the last week (the report's schedule is weekly by default).
        recorded = reviewing.load_records(
            config.service.records_path, now - pd.Timedelta(days=7), now
        )
        report = build_capacity_report(
            result.config or config,
            inputs.history,
            result.plan,
            result.forecasts,
            inputs.source,
            recorded=recorded,
        )
        written = write_report(report, out_dir, flag="service.report_out")
        return [f"wrote {p}" for p in written]

    return body
