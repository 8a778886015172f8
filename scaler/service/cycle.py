"""One plan-and-act cycle: history in, forecast, plan, re-validate, act or record.

This is the function a CronJob (``tiercast run``) and the service scheduler both
call. It is the same code in dry-run: only the provider differs. Every action is
re-validated against a fresh inventory read just before it is applied; an action
whose pool changed underneath it is skipped and reported, never forced.

:func:`run_cycle` reads as its steps, each a function that returns a value: collect
(:func:`collect`: learn the ``auto`` lead times, screen the history, read footprints),
:func:`forecast`, plan (:func:`plan_tiers`, then :func:`plan_mig_layouts`, then
:func:`plan_sharing`), re-validate and :func:`act`, and record (the
:class:`CycleResult`). The config is never rewritten: the planning steps take the fleet
the cycle builds once from it (:class:`scaler.config.Fleet`) and the sections they read.
The provider's optional capabilities are found once (:func:`scaler.actuation.protocol.capabilities_of`).

Pools with ``lead_time_s: auto`` are planned with the lead time learned from the
cluster (:mod:`scaler.service.lead_times`): the fleet carries whole seconds, and the
plan a note per such pool.

Before forecasting, the history is screened for suspect data
(:func:`forecaster.suspect.screen_history`): suspect samples become gaps, and a signal
whose newest data is suspect holds the pools it feeds, as a stale one does.

GPU demand that waits for capacity (pending GPU pods, Kueue workloads:
:mod:`scaler.planning.starvation`, read by :mod:`scaler.inputs.pending`) is a floor
under the plan's need; the plan's notes and ``risk.starvation`` say what waited.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from forecaster.artifacts import load_signing_key
from forecaster.errors import BadInputError, TiercastError
from forecaster.forecasting import SeriesForecast, forecast_history
from forecaster.parallel import ForecastSpec, forecast_history_parallel
from forecaster.series import History
from forecaster.store import ModelStore
from forecaster.suspect import screen_history
from scaler.actuation.protocol import (
    ActionResult,
    Capabilities,
    CapacityProvider,
    KueueQuotaReader,
    MigInventoryReader,
    SharingInventoryReader,
    capabilities_of,
)
from scaler.config import Config, Fleet, ForecastConfig, ModelStoreConfig, PolicyConfig, PoolConfig
from scaler.planning.billing import starts_from_past
from scaler.planning.footprints import implausible_footprints, observed_footprints
from scaler.planning.margins import Margin
from scaler.planning.mig.persistence import observed_instances, recent_peaks
from scaler.planning.mig.plan import mig_pools, plan_mig
from scaler.planning.power import PowerReading
from scaler.planning.reasons import suspicion_reasons
from scaler.planning.sharing_actions import (
    SharedNodeState,
    configured_shared_nodes,
    has_shared_workloads,
    plan_sharing_actions,
)
from scaler.planning.starvation import Starvation
from scaler.planning.tiers import CapacityInputs, learn_margins, plan_capacity
from scaler.plans import Action, CapacityPlan, PastCycle, iso, past_cycle
from scaler.records import RunStore
from scaler.service.growth_cache import growth_cache_for
from scaler.service.lead_times import (
    LeadTime,
    learn_lead_times,
    planned_seconds,
    with_lead_times,
)
from scaler.service.mig_past import past_mig_plans
from scaler.wording import Reason

log = logging.getLogger(__name__)


@dataclass
class CycleResult:
    plan: CapacityPlan
    results: list[ActionResult] = field(default_factory=list)
    dry_run: bool = True
    forecasts: dict[str, SeriesForecast] = field(default_factory=dict)
    loaded: Config | None = None
    """The config the cycle was given, as loaded."""
    fleet: Fleet | None = None
    """The fleet the plan was made for: ``lead_time_s: auto`` resolved to seconds, observed
    footprints filled in."""
    lead_times: dict[str, LeadTime] = field(default_factory=dict)
    """How each ``lead_time_s: auto`` pool's lead time was chosen."""

    @property
    def calls(self) -> list[dict]:
        return [c for r in self.results for c in r.calls]

    @property
    def config(self) -> Config | None:
        """The config as planned, for what reads a whole config after the cycle (reports,
        summaries, metrics): the loaded one with :attr:`fleet`'s pools and workloads."""
        if self.loaded is None or self.fleet is None:
            return self.loaded
        return self.loaded.model_copy(
            update={"pools": self.fleet.pools, "workloads": self.fleet.workloads}
        )


def stale_signals(
    policy: PolicyConfig, forecasts: dict[str, SeriesForecast], now: pd.Timestamp
) -> set[str]:
    """Signals whose newest sample is older than ``policy.staleness_limit_s`` at ``now``."""
    limit = pd.Timedelta(seconds=policy.staleness_limit_s)
    return {name for name, fc in forecasts.items() if now - fc.last_timestamp > limit}


_STORES: dict[tuple[str, int, str | None], ModelStore] = {}


def model_store_for(settings: ModelStoreConfig) -> ModelStore:
    """The ``model_store`` section's store; one object per path and age limit in a process.

    Kept between cycles so a long-running service or a replay reads each stored
    model from disk once, not every cycle.
    """
    path = Path(settings.path).resolve()  # a relative path means the working dir
    key_file = settings.signing_key_file
    key = (str(path), settings.max_age_s, key_file)
    if key not in _STORES:
        _STORES[key] = ModelStore(
            path, max_age_s=settings.max_age_s, signing_key=load_signing_key(key_file)
        )
    return _STORES[key]


def forecast_for_plan(
    pools: Sequence[PoolConfig],
    policy: PolicyConfig,
    settings: ForecastConfig,
    models: ModelStoreConfig,
    history: History,
    now: pd.Timestamp,
) -> dict[str, SeriesForecast]:
    """Forecast every signal far enough ahead to cover the policy's horizon plus the longest
    lead time of ``pools`` (the cycle passes its fleet's, lead times learned), with the
    ``forecast`` section's method and workers and the models of the ``model_store`` section."""
    lead = max(p.lead_time_s for p in pools)
    horizon = pd.Timedelta(seconds=policy.horizon_s + lead + policy.cycle_s)
    quantiles = sorted(set(settings.quantiles) | {policy.quantile})
    upto = {name: y[y.index < now] for name, y in history.items()}
    usable = {name: y for name, y in upto.items() if y.notna().sum() >= 2}
    for name in sorted(set(upto) - set(usable)):
        log.warning("signal %s has no usable history before %s", name, now)
    # Forecast from the newest sample to now + horizon: a stale series needs more steps.
    out = {}
    store = model_store_for(models)
    if settings.jobs != 1 or settings.backend == "dask":
        # Many signals: worker processes or a Dask cluster share the on-disk store.
        spec = ForecastSpec(
            horizon,
            tuple(quantiles),
            settings.method,
            str(store.path) if store.path is not None else None,
            store.max_age_s,
            now,
            signing_key_file=models.signing_key_file,
        )
        return forecast_history_parallel(
            usable, spec, settings.backend, settings.jobs, settings.scheduler, settings.batch_size
        )
    for name, y in usable.items():
        gap = max(pd.Timedelta(0), now - y.dropna().index[-1])
        try:
            out.update(
                forecast_history({name: y}, horizon + gap, quantiles, settings.method, store)
            )
        except BadInputError as exc:
            # One malformed signal holds only the pools it feeds (the planner holds a
            # GPU model whose signal has no forecast); the rest of the plan goes ahead.
            log.warning("signal %s: no forecast (%s); its pools hold", name, str(exc)[:200])
    return out


def past_cycles(records: Sequence[Any]) -> list[PastCycle]:
    """What earlier cycles asked for, from run records (``scaler.records.RunRecord``).

    Only cycles that acted count (not dry runs: their targets were never applied);
    a record whose plan summary is not of the expected shape is skipped.
    """
    out: list[PastCycle] = []
    for r in records:
        if getattr(r, "job", None) != "cycle" or getattr(r, "dry_run", True) or not r.plan:
            continue
        try:
            out.append(past_cycle(r.plan))
        except (KeyError, TypeError, ValueError, AttributeError):
            log.warning("run %s: plan summary unreadable; not used for hysteresis", r.run_id)
    return out


def with_kueue_quota(
    plan: CapacityPlan, reader: KueueQuotaReader | None, now: pd.Timestamp
) -> tuple[CapacityPlan, Action | None]:
    """The plan with its Kueue quota action (the training ClusterQueue's GPU quota to the
    spare capacity of the next hour, :mod:`scaler.actuation.kube.kueue`), where the plan
    has a ``workloads.kueue`` section and the provider can read the ClusterQueue."""
    section = plan.workloads.get("kueue")
    quota = reader.kueue_action(section, iso(now)) if section and reader is not None else None
    if quota is None:
        return plan, None
    return dataclasses.replace(plan, actions=[*plan.actions, quota]), quota


MAX_BILLING_RECORDS = 5000
"""Most cycle records read to date the nodes of pools with ``billing`` (17 days at 5 min)."""


def node_starts(
    pools: Sequence[PoolConfig],
    cycle_s: int,
    past: Sequence[PastCycle],
    records: RunStore | None,
    inventory: dict[str, int],
    now: pd.Timestamp,
) -> dict[str, list[pd.Timestamp]]:
    """When the nodes of pools with ``billing`` started, from the cycles that acted.

    The hysteresis reads only the newest cycles; a node's paid period may have begun long
    before, so the records are read back over the longest billing period (at most
    :data:`MAX_BILLING_RECORDS` cycles of ``cycle_s``). Nodes older than every record are
    of unknown start and are released as planned.
    """
    billed = [p for p in pools if p.billing is not None]
    if not billed:
        return {}
    cycles = list(past)
    if records is not None:
        span = max(max(p.billing.granularity_s, p.billing.minimum_s) for p in billed if p.billing)
        limit = min(MAX_BILLING_RECORDS, span // cycle_s + 24)
        try:
            cycles = past_cycles(records.recent(limit=limit, job="cycle")) or cycles
        except (TiercastError, TypeError, ValueError) as exc:
            log.info("no run records to date billed nodes: %s", str(exc)[:200])
    return starts_from_past(billed, cycles, inventory, now)


def shared_node_inventory(
    reader: SharingInventoryReader | None, pools: Sequence[PoolConfig], inventory: dict[str, int]
) -> tuple[dict[str, list[SharedNodeState]] | None, str, str | None]:
    """The nodes the sharing plan chooses from, per pool without ``mig_layouts``; where they
    come from (``cluster`` or ``config``); and why no node's sharing can change, or None.

    A provider that reads a cluster (``reader``: the Kubernetes provider, alone or inside
    the service's guard) gives the nodes as they are, read now; a pool it does not act on,
    and every pool of a provider that reads none (``tiercast plan``), has the nodes its
    configured count describes, unlabelled (:func:`configured_shared_nodes`). A cluster
    that cannot be read gives None, and one whose GPU Operator names no device plugin
    config ConfigMap (no ClusterPolicy, no ``devicePlugin.config.name``) the reason: the
    plan then changes no node's sharing and says why, rather than failing an action every
    cycle.
    """
    configured = {
        p.name: configured_shared_nodes(p, int(inventory.get(p.name, p.min_nodes)))
        for p in pools
        if p.mig_layouts is None
    }
    if reader is None:
        return configured, "config", None
    try:
        read, unavailable = reader.sharing_inventory()
    except TiercastError as exc:
        log.warning("nodes unreadable for the sharing plan (%s): no node's sharing changes", exc)
        return None, "cluster", None
    if read is None and unavailable is None:  # a cluster with nothing to read
        return configured, "config", None
    if read is None:
        return None, "cluster", unavailable
    return {k: list(read.get(k, v)) for k, v in configured.items()}, "cluster", None


# --- the cycle's steps ------------------------------------------------------------------


@dataclass(frozen=True)
class Collected:
    """What the cycle plans from, once collected and screened."""

    fleet: Fleet
    """The config's fleet as planned: ``lead_time_s: auto`` pools at their learned lead
    time, footprints read off the replicas' signals filled in."""
    history: History
    """The history with suspect samples as gaps (:func:`forecaster.suspect.screen_history`)."""
    suspect: dict[str, list[Reason]]
    """Signals whose newest data is suspect, and why (``suspect.*`` reasons): they hold
    their pools."""
    lead_times: dict[str, LeadTime]
    notes: list[Reason | str]
    """What the screen and the footprints say, for the plan's notes."""


def collect(
    config: Config,
    history: History,
    capabilities: Capabilities,
    now: pd.Timestamp,
    records: RunStore | None,
) -> Collected:
    """Learn the ``auto`` lead times, screen the history for suspect data, and read the
    footprints the config leaves out off the replicas' memory and utilization."""
    lead_times = learn_lead_times(config.pools, capabilities.lead_times, records)
    # Suspect samples (spikes, zeros unlike the past, partial sums) are gaps from here on,
    # and the signals whose newest data is suspect hold their pools (forecaster.suspect).
    screened = screen_history(history, now, pd.Timedelta(seconds=config.policy.staleness_limit_s))
    for name, why in sorted(screened.held.items()):
        log.warning("signal %s: %s; its pools hold", name, why)
    filled, footprint_notes = observed_footprints(config.workloads, screened.history)
    fleet = config.fleet.with_lead_times(planned_seconds(lead_times)).with_workloads(filled)
    suspect, suspect_notes = suspicion_reasons(screened.found)
    # Footprints far below what any replica uses are suspect data: never packed, and the
    # workload's demand signal holds its pools (scaler.planning.footprints).
    for signal, causes in implausible_footprints(config.workloads, screened.history).items():
        for cause in causes:
            log.warning("%s", cause.text())
        suspect.setdefault(signal, []).extend(causes)
    notes: list[Reason | str] = [*suspect_notes, *footprint_notes]
    return Collected(fleet, screened.history, suspect, lead_times, notes)


@dataclass(frozen=True)
class Forecasts:
    """Every signal's forecast, the stale ones, and each signal's learnt margin."""

    by_signal: dict[str, SeriesForecast]
    stale: set[str]
    margins: dict[str, Margin | None]

    def held(self, collected: Collected) -> set[str]:
        """Signals that hold their pools: stale, missing or suspect."""
        return self.stale | set(collected.suspect)


def forecast(config: Config, collected: Collected, now: pd.Timestamp) -> Forecasts:
    """Forecast every signal, find the stale ones, and learn each signal's margin; the
    margins' growth backtest keeps its forecasts between cycles (growth_cache)."""
    policy = config.policy
    by_signal = forecast_for_plan(
        collected.fleet.pools, policy, config.forecast, config.model_store, collected.history, now
    )
    stale = stale_signals(policy, by_signal, now)
    cache = growth_cache_for(
        model_store_for(config.model_store).path,
        keep=pd.Timedelta(seconds=policy.growth_backtest_s + policy.growth_refresh_s),
    )
    method = config.forecast.method
    margins = learn_margins(
        collected.fleet,
        policy,
        method,
        by_signal,
        collected.history,
        lambda signal: cache.forecaster(signal, method),
    )
    cache.save()
    return Forecasts(by_signal, stale, margins)


@dataclass(frozen=True)
class Observed:
    """What the cluster shows now, beside the history: its nodes per pool, the cycles that
    acted before, what waits for GPUs and what throttled GPUs no longer serve."""

    inventory: dict[str, int]
    past: Sequence[PastCycle] = ()
    records: RunStore | None = None
    starvation: Starvation | None = None
    power: PowerReading | None = None


def plan_tiers(
    config: Config,
    collected: Collected,
    forecasts: Forecasts,
    observed: Observed,
    now: pd.Timestamp,
) -> CapacityPlan:
    """The tier plan (:func:`scaler.planning.tiers.plan_capacity`), with what the cycle
    found on the way in its notes and risk: power, starvation, the screen and footprints,
    and each ``auto`` pool's lead time."""
    fleet, policy, inventory = collected.fleet, config.policy, observed.inventory
    starvation, power = observed.starvation, observed.power
    inputs = CapacityInputs(
        fleet,
        policy,
        forecasts.by_signal,
        inventory,
        now,
        stale=forecasts.stale,
        suspect=collected.suspect,
        history=collected.history,
        past=observed.past,
        margins=forecasts.margins,
        method=config.forecast.method,
        waiting=starvation.floor() if starvation is not None else None,
        node_starts=node_starts(
            fleet.pools, policy.cycle_s, observed.past, observed.records, inventory, now
        ),
        derated=power.lost_gpus() if power is not None else None,
        kueue=config.kubernetes.kueue,
        currency=config.finance.currency,
    )
    plan = plan_capacity(inputs)
    notes, risk = list(plan.notes), dict(plan.risk)
    if power is not None:
        notes += power.notes()
        risk["power"] = power.to_dict()
    if starvation is not None:
        notes += starvation.notes()
        risk["starvation"] = starvation.to_dict()
    plan = dataclasses.replace(plan, notes=notes + collected.notes, risk=risk)
    return with_lead_times(plan, collected.lead_times)


def _targets_now(plan: CapacityPlan) -> dict[str, int]:
    """The node counts the tier plan targets now, per pool."""
    return {p.pool: p.target_nodes[0] for p in plan.pools if p.target_nodes}


def plan_mig_layouts(
    plan: CapacityPlan,
    config: Config,
    collected: Collected,
    forecasts: Forecasts,
    observed: Observed,
    reader: MigInventoryReader | None,
    now: pd.Timestamp,
) -> CapacityPlan:
    """``plan`` with the MIG layout actions and its ``mig`` section, planned on the node
    counts the tier plan targets now; unchanged without MIG-managed pools."""
    if not mig_pools(collected.fleet.pools):
        return plan
    # A provider that can read the cluster's MIG state gives the real nodes and the
    # mig-parted entries the MIG manager can apply; otherwise the config's mig_layouts.
    node_states, known = reader.mig_inventory() if reader is not None else (None, None)
    # Profiles whose recent peak predicted their peak better than the forecast at this
    # cycle's past decisions plan on it (scaler.planning.mig.persistence).
    horizon = pd.Timedelta(seconds=config.policy.horizon_s)
    past = past_mig_plans(observed.records, now, horizon)
    observed_now = observed_instances(collected.fleet.workloads, collected.history)
    recent = recent_peaks(past, observed_now, now, horizon, config.policy.quantile)
    mig = plan_mig(
        collected.fleet,
        config.policy,
        forecasts.by_signal,
        observed.inventory,
        now,
        _targets_now(plan),
        stale=forecasts.held(collected),
        node_states=node_states,
        known_configs=known,
        recent=recent,
    )
    return dataclasses.replace(plan, actions=plan.actions + mig.actions, mig=mig.section)


def plan_sharing(
    plan: CapacityPlan,
    config: Config,
    collected: Collected,
    forecasts: Forecasts,
    observed: Observed,
    reader: SharingInventoryReader | None,
    now: pd.Timestamp,
) -> CapacityPlan:
    """``plan`` with the time-slicing and MPS actions (the nodes whose
    nvidia.com/device-plugin.config must change) and its ``sharing`` section; unchanged
    when no served workload is shared."""
    if not has_shared_workloads(collected.fleet):
        return plan
    inventory = observed.inventory
    shared_nodes, source, unavailable = shared_node_inventory(
        reader, collected.fleet.pools, inventory
    )
    sharing = plan_sharing_actions(
        collected.fleet,
        config.policy,
        forecasts.by_signal,
        inventory,
        now,
        shared_nodes,
        _targets_now(plan),
        stale=forecasts.held(collected),
        history=collected.history,
        source=source,
        unavailable=unavailable,
    )
    return dataclasses.replace(
        plan,
        actions=plan.actions + sharing.actions,
        sharing={**plan.sharing, **sharing.section},
        notes=[*plan.notes, *sharing.notes],
    )


def revalidated(provider: CapacityProvider, action: Action) -> ActionResult | None:
    """A ``skipped`` result where the pool's nodes changed since planning (read fresh);
    None where ``action`` may be applied."""
    fresh = provider.inventory()
    if fresh.get(action.pool) == action.current_nodes:
        return None
    return ActionResult(
        action,
        "skipped",
        f"inventory changed since planning ({action.current_nodes} -> {fresh.get(action.pool)}); "
        "will re-plan next cycle",
    )


def act(
    plan: CapacityPlan,
    provider: CapacityProvider,
    capabilities: Capabilities,
    now: pd.Timestamp,
) -> tuple[CapacityPlan, list[ActionResult]]:
    """Apply every change that still holds against a fresh inventory, then the Kueue quota;
    the plan comes back with its quota action."""
    results: list[ActionResult] = []
    for action in plan.changes():
        results.append(revalidated(provider, action) or provider.apply(action))
    plan, quota = with_kueue_quota(plan, capabilities.kueue, now)
    if quota is not None and quota.decision != "no-op":
        results.append(provider.apply(quota))
    return plan, results


def said_as_planned(config: Config, history: History, plan: CapacityPlan) -> CapacityPlan:
    """``plan`` with a note, and a warning, for each signal Prometheus returned no data for
    (:data:`scaler.inputs.loading.NO_PROMETHEUS_DATA`), saying what the plan did with its
    pools: held where its GPU model is held, else planned from the history store's data."""
    from scaler.inputs.loading import NO_PROMETHEUS_DATA
    from scaler.wording import NOTE_NO_SERIES_HELD, NOTE_STORE_COVERED

    held = plan.risk.get("held_models") or {}
    notes: list[Reason | str] = []
    for s in config.signals:
        y = history.get(s.name)
        if y is None or not y.attrs.get(NO_PROMETHEUS_DATA):
            continue
        models = {w.gpu_model for w in config.workloads if w.signal == s.name}
        pools = tuple(p.name for p in config.pools if p.gpu_model in models) or ("none",)
        values = y.dropna()
        if values.empty or any(m in held for m in models):
            note = Reason(NOTE_NO_SERIES_HELD, {"signal": s.name, "pools": pools})
        else:
            newest = iso(pd.Timestamp(values.index[-1]))
            note = Reason(NOTE_STORE_COVERED, {"signal": s.name, "pools": pools, "newest": newest})
        log.warning("%s", note.text("en"))
        notes.append(note)
    return dataclasses.replace(plan, notes=[*plan.notes, *notes]) if notes else plan


def run_cycle(
    config: Config,
    history: History,
    provider: CapacityProvider,
    now: pd.Timestamp,
    dry_run: bool = True,
    past: Sequence[PastCycle] = (),
    lead_time_records: RunStore | None = None,
    starvation: Starvation | None = None,
    power: PowerReading | None = None,
) -> CycleResult:
    """Collect, forecast, plan (tiers, then MIG, then sharing), re-validate and act, record.

    ``past``: earlier cycles (:func:`past_cycles` of the run records), for the
    planner's hysteresis across cycles. ``lead_time_records``: where the node starts of
    ``lead_time_s: auto`` pools are kept between cycles (None: only those the provider
    shows now count). ``starvation``: what waits for GPUs now
    (:func:`scaler.inputs.pending.collect_starvation`); what runs plus what waits is a
    floor under each GPU model's need. ``power``: the DCGM exporter's GPUs now
    (:func:`scaler.inputs.power.collect_power`); throttled GPUs count for less.
    """
    capabilities = capabilities_of(provider)
    collected = collect(config, history, capabilities, now, lead_time_records)
    forecasts = forecast(config, collected, now)
    observed = Observed(provider.inventory(), past, lead_time_records, starvation, power)
    plan = plan_tiers(config, collected, forecasts, observed, now)
    plan = plan_mig_layouts(plan, config, collected, forecasts, observed, capabilities.mig, now)
    plan = plan_sharing(plan, config, collected, forecasts, observed, capabilities.sharing, now)
    plan = said_as_planned(config, history, plan)
    plan, results = act(plan, provider, capabilities, now)
    return CycleResult(
        plan=plan,
        results=results,
        dry_run=dry_run,
        forecasts=forecasts.by_signal,
        loaded=config,
        fleet=collected.fleet,
        lead_times=collected.lead_times,
    )
