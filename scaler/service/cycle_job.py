"""The cycle job: :class:`CycleJob`, the plan-and-act cycle, and its run record.

:class:`CycleJob` is the one job function. ``tiercast run`` calls it once (a
CronJob); ``tiercast serve`` calls it from an APScheduler 3 ``BackgroundScheduler``
on the ``service.cycle_schedule`` cron, beside the refit and report jobs. Each run:

1. loads config and fresh history; a failure here ends the run ``failed`` before
   anything is planned, so nothing changes;
2. forecasts, plans (``lead_time_s: auto`` learned from the cluster and kept in the run
   records, :mod:`scaler.service.lead_times`) and acts through
   :func:`scaler.service.cycle.run_cycle`, with the
   provider wrapped in :class:`scaler.service.guarded.GuardedProvider`, which checks
   leadership and shutdown before every action, retries temporary API failures only
   after re-reading the pool (an action that did land is not sent twice), and turns
   errors into ``failed`` results rather than half-done cycles;
3. writes a run record and updates the self-metrics.

Its status and exit code are those of :mod:`scaler.service.runs`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from forecaster.errors import TemporaryError, TiercastError
from forecaster.files import write_output
from scaler.actuation.protocol import CapacityProvider
from scaler.config import Config, Fleet, ModelStoreConfig, PolicyConfig
from scaler.inputs.pending import collect_starvation
from scaler.inputs.power import collect_power
from scaler.planning.power import PowerReading
from scaler.planning.starvation import Starvation
from scaler.plans import PastCycle, iso
from scaler.records import (
    RecordsError,
    RunRecord,
    RunStore,
    forecast_summary,
    inputs_summary,
    plan_summary,
)
from scaler.reports.shadow import observed_capacity, shadow_summary
from scaler.service.cycle import CycleResult, model_store_for, past_cycles, run_cycle
from scaler.service.drift import (
    STATE_FILE,
    DriftState,
    DriftWatch,
    SignalDrift,
    judge_records,
    records_needed,
    respond,
)
from scaler.service.growth_cache import growth_cache_for
from scaler.service.guarded import GuardedProvider
from scaler.service.leader import AlwaysLeader, Leadership
from scaler.service.runs import (
    EXIT_ABANDONED,
    EXIT_FAILED,
    EXIT_OK,
    Inputs,
    JobOutcome,
    Stop,
    utc_now,
)
from scaler.service.telemetry import Telemetry

log = logging.getLogger(__name__)
SUMMARY_LOGGER = "tiercast.cycle"
"""The logger of the one INFO line per cycle (:func:`cycle_summary`): ``serve`` shows it at its default
log level, which keeps every other logger at WARNING."""
summary_log = logging.getLogger(SUMMARY_LOGGER)

ProviderFactory = Callable[[Config], CapacityProvider]
"""Builds the provider for one cycle (a fresh one each time: providers keep per-cycle
state such as the change cap and the halt after an API failure)."""


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
    plan_flag: str = "service.plan_out"
    """What named ``plan_out``, for the one line when it cannot be written."""
    plan_owned: bool = False
    """``plan_out`` is the default file in the state directory: a link there is refused."""
    identity: str = ""
    retries: int = 2
    sleep: Callable[[float], Any] | None = None
    log_failures: bool = True
    """Log a failed cycle as an error (``serve``); ``run`` prints it once itself, so there
    the line goes to the debug log only."""
    read_starvation: Callable[[Config, pd.Timestamp], Starvation | None] = collect_starvation
    """What waits for GPUs now (pending GPU pods, Kueue workloads), read after the history;
    a failure ends the cycle before planning, as a failed collection does."""
    read_power: Callable[[Config, pd.Timestamp], PowerReading | None] = collect_power
    """The DCGM exporter's GPUs now (throttling, clocks, power), read after the history."""

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
        now = inputs.now if inputs.now is not None else self.clock()
        starvation = self.read_starvation(config, now)
        power = self.read_power(config, now)
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
        policy = config.policy
        watch = DriftWatch.over(config.drift, config.pools, policy.cycle_s, config.forecast.method)
        drifted = self._refit_drifted(watch, policy, config.model_store, inputs.history, now, run)
        # What the cluster had, read before any action (the shadow scorecard's incumbent).
        capacity = observed_capacity(run.guard.provider, config.pools)
        run.result = run_cycle(
            config,
            inputs.history,
            run.guard,
            now,
            dry_run=self.dry_run or not run.leader,
            past=self._past_cycles(),
            lead_time_records=self.store,
            starvation=starvation,
            power=power,
        )
        if drifted:
            plan = run.result.plan
            run.result.plan = dataclasses.replace(
                plan,
                notes=plan.notes + [d.reason(config.drift) for d in drifted.values()],
                risk={**plan.risk, "drift": {k: d.to_dict() for k, d in drifted.items()}},
            )
        run.abandoned = run.guard.abandoned
        run.stage = "record"
        # Summaries and metrics read the fleet as planned: auto lead times resolved.
        quantiles = sorted(set(config.forecast.quantiles) | {policy.quantile})
        fleet = run.result.fleet or config.fleet
        self._observe(run.result, run.guard, fleet, quantiles, now, run.fields)
        run.fields["shadow"] = shadow_summary(
            run.result.plan,
            fleet,
            run.result.forecasts,
            capacity,
            now,
            config.finance.currency,
            policy.cycle_s,
        )

    def _refit_drifted(
        self,
        watch: DriftWatch,
        policy: PolicyConfig,
        models: ModelStoreConfig,
        history: Any,
        now: pd.Timestamp,
        run: _CycleRun,
    ) -> dict[str, SignalDrift]:
        """Judge each signal's forecasts against what happened (scaler.service.drift) and
        refit the drifted ones before this cycle forecasts; an Event from the leader.
        ``policy``: how long the growth backtest keeps its forecasts; ``models``: the store
        whose models a refit evicts."""
        if self.store is None or not watch.settings.enabled:
            return {}
        try:
            records = self.store.recent(limit=records_needed(watch), job="cycle")
        except (TiercastError, TypeError, ValueError) as exc:
            log.info("no run records to judge drift: %s", str(exc)[:200])
            return {}
        store = model_store_for(models)
        state = DriftState(store.path / STATE_FILE if store.path is not None else None)
        judged = judge_records(watch, records, history, now, state)
        self.telemetry.observe_drift(judged)
        cache = growth_cache_for(
            store.path,
            keep=pd.Timedelta(seconds=policy.growth_backtest_s + policy.growth_refresh_s),
        )
        events = run.guard.inner.events if run.guard is not None else None
        sink = events if run.leader else None
        done = respond(judged, watch, now, store, cache, state, sink)
        self.telemetry.observe_drift_refits(done)
        return done

    def _observe(
        self,
        result: CycleResult,
        guard: GuardedProvider,
        fleet: Fleet,
        quantiles: list[float],
        now: pd.Timestamp,
        fields: dict[str, Any],
    ) -> None:
        """The run record's summaries, the self-metrics, ``plan_out`` and the inventory gauge,
        for ``fleet`` as planned; ``quantiles``: those the forecast summary keeps."""
        lead = max(p.lead_time_s for p in fleet.pools)
        fields.update(
            forecast=forecast_summary(result.forecasts, quantiles, lead),
            plan=plan_summary(result.plan),
            # The run record keeps the notes as English lines (typed ones rendered).
            notes=[str(n) for n in result.plan.notes],
        )
        self.telemetry.observe_forecasts(fleet, result.forecasts, now)
        self.telemetry.observe_plan(fleet.pools, result.plan)
        self.telemetry.observe_actions(result.results)
        if self.plan_out:
            write_output(
                self.plan_out, result.plan.to_json(), self.plan_flag, owned=self.plan_owned
            )
        try:
            self.telemetry.observe_inventory(fleet.pools, guard.provider.inventory())
        except TemporaryError as exc:
            self.telemetry.error(exc, "inventory")

    def _failed(self, run: _CycleRun, exc: Exception) -> None:
        """Count and log a failure, naming the step it happened in."""
        run.error = exc
        where = run.stage
        if run.stage == "forecast" and run.guard is not None and run.guard.stage != "plan":
            where = run.guard.stage
        kind = self.telemetry.error(exc, where)
        log.log(
            logging.ERROR if self.log_failures else logging.DEBUG,
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
        # The plan file is written last in the cycle: written where nothing failed.
        run.plan_written = bool(self.plan_out) and run.error is None and run.result is not None
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
        recorded = False
        if self.store is not None:
            try:
                self.store.add(record, run.result.plan if run.result else None)
                recorded = True
            except (RecordsError, OSError) as exc:
                self.telemetry.error(exc, "record")
                log.error("%s", exc, extra={"run_id": run.run_id, "job": "cycle"})
                code = max(code, EXIT_FAILED)
        summary_log.info(
            "cycle %s %s in %.1f s%s: %s",
            run.run_id,
            status,
            duration,
            " (dry-run)" if self.dry_run else "",
            cycle_summary(run.result),
            extra={"run_id": run.run_id, "job": "cycle", "status": status},
        )
        return JobOutcome(
            "cycle", status, code, record, run.result, run.error, run.plan_written, recorded
        )


class _Abandoned(Exception):
    """Internal: a shutdown arrived before the cycle started acting."""


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
    plan_written: bool = False
    """``plan_out`` was written (what ``run`` may then say it wrote)."""
    error: BaseException | None = None
    guard: GuardedProvider | None = None
    abandoned: bool = False
    stage: str = "collect"


def cycle_summary(result: CycleResult | None) -> str:
    """A cycle in one line, the service's INFO line: the changes, the cost now -> planned,
    and the held pools and why (``no plan`` where the cycle stopped before planning)."""
    if result is None:
        return "no plan"
    plan = result.plan
    changes = [
        f"{a.pool} {a.current_nodes}->{a.target_nodes}"
        if a.kind == "nodes"
        else f"{a.pool} {a.decision} {a.details.get('node', '')}".rstrip()
        for a in plan.changes()
    ]
    cost = plan.cost
    held = plan.risk.get("held_models") or {}
    pools = {p.pool: p.gpu_model for p in plan.pools}
    held_text = "; ".join(
        f"{', '.join(sorted(p for p, m in pools.items() if m == model)) or model} ({why})"
        for model, why in sorted(held.items())
    )
    return (
        f"{len(changes)} change(s){': ' + ', '.join(changes) if changes else ''}; "
        f"cost {float(cost.get('per_hour_current', 0.0)):.2f}/h now -> "
        f"{float(cost.get('per_hour_now', 0.0)):.2f}/h planned; "
        f"held: {held_text or 'none'}"
    )


def _action_rows(result: CycleResult | None) -> list[dict[str, Any]]:
    """Each action and its outcome, as the run record keeps them."""
    return [
        {
            "pool": r.action.pool,
            "decision": r.action.decision,
            "kind": r.action.kind,
            "current_nodes": r.action.current_nodes,
            "target_nodes": r.action.target_nodes,
            "reason": r.action.reason.to_dict(),
            "outcome": r.outcome,
            "message": r.message,
        }
        for r in (result.results if result else [])
    ]


def _cycle_status(run: _CycleRun, actions: list[dict[str, Any]]) -> tuple[str, int]:
    """The run's status and exit code (see :mod:`scaler.service.runs`)."""
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
