"""One plan-and-act cycle: history in, forecast, plan, re-validate, act or record.

This is the function a CronJob (``tiercast run``) and the service scheduler both
call. It is the same code in dry-run: only the provider differs. Every action is
re-validated against a fresh inventory read just before it is applied; an action
whose pool changed underneath it is skipped and reported, never forced.

Pools with ``lead_time_s: auto`` are planned with the lead time learned from the
cluster (:mod:`scaler.service.lead_times`): the planner gets a config with whole
seconds, and the plan a note per such pool.

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
from scaler.actuation.protocol import ActionResult, CapacityProvider
from scaler.config import Config
from scaler.planning.billing import starts_from_past
from scaler.planning.footprints import observed_footprints
from scaler.planning.mig.plan import mig_pools, plan_mig
from scaler.planning.power import PowerReading
from scaler.planning.sharing_actions import (
    SharedNodeState,
    configured_shared_nodes,
    has_shared_workloads,
    plan_sharing_actions,
)
from scaler.planning.starvation import Starvation
from scaler.planning.tiers import learn_margins, plan_capacity
from scaler.plans import Action, CapacityPlan, PastCycle, iso, past_cycle
from scaler.records import RunStore
from scaler.service.growth_cache import growth_cache_for
from scaler.service.lead_times import LeadTime, learn_lead_times, with_lead_times

log = logging.getLogger(__name__)


@dataclass
class CycleResult:
    plan: CapacityPlan
    results: list[ActionResult] = field(default_factory=list)
    dry_run: bool = True
    forecasts: dict[str, SeriesForecast] = field(default_factory=dict)
    config: Config | None = None
    """The config the plan was made with: ``lead_time_s: auto`` resolved to seconds."""
    lead_times: dict[str, LeadTime] = field(default_factory=dict)
    """How each ``lead_time_s: auto`` pool's lead time was chosen."""

    @property
    def calls(self) -> list[dict]:
        return [c for r in self.results for c in r.calls]


def stale_signals(
    config: Config, forecasts: dict[str, SeriesForecast], now: pd.Timestamp
) -> set[str]:
    limit = pd.Timedelta(seconds=config.policy.staleness_limit_s)
    return {name for name, fc in forecasts.items() if now - fc.last_timestamp > limit}


_STORES: dict[tuple[str, int, str | None], ModelStore] = {}


def model_store_for(config: Config) -> ModelStore:
    """The config's model store; one object per path and age limit in a process.

    Kept between cycles so a long-running service or a replay reads each stored
    model from disk once, not every cycle.
    """
    path = Path(config.model_store.path).resolve()  # a relative path means the working dir
    key_file = config.model_store.signing_key_file
    key = (str(path), config.model_store.max_age_s, key_file)
    if key not in _STORES:
        _STORES[key] = ModelStore(
            path, max_age_s=config.model_store.max_age_s, signing_key=load_signing_key(key_file)
        )
    return _STORES[key]


def forecast_for_plan(
    config: Config, history: History, now: pd.Timestamp
) -> dict[str, SeriesForecast]:
    """Forecast every signal far enough ahead to cover the horizon plus the longest lead time."""
    lead = max(p.lead_time_s for p in config.pools)
    horizon = pd.Timedelta(seconds=config.policy.horizon_s + lead + config.policy.cycle_s)
    quantiles = sorted(set(config.forecast.quantiles) | {config.policy.quantile})
    upto = {name: y[y.index < now] for name, y in history.items()}
    usable = {name: y for name, y in upto.items() if y.notna().sum() >= 2}
    for name in sorted(set(upto) - set(usable)):
        log.warning("signal %s has no usable history before %s", name, now)
    # Forecast from the newest sample to now + horizon: a stale series needs more steps.
    out = {}
    store = model_store_for(config)
    settings = config.forecast
    if settings.jobs != 1 or settings.backend == "dask":
        # Many signals: worker processes or a Dask cluster share the on-disk store.
        spec = ForecastSpec(
            horizon,
            tuple(quantiles),
            settings.method,
            str(store.path) if store.path is not None else None,
            store.max_age_s,
            now,
            signing_key_file=config.model_store.signing_key_file,
        )
        return forecast_history_parallel(
            usable, spec, settings.backend, settings.jobs, settings.scheduler, settings.batch_size
        )
    for name, y in usable.items():
        gap = max(pd.Timedelta(0), now - y.dropna().index[-1])
        try:
            out.update(
                forecast_history({name: y}, horizon + gap, quantiles, config.forecast.method, store)
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
    plan: CapacityPlan, provider: CapacityProvider, now: pd.Timestamp
) -> tuple[CapacityPlan, Action | None]:
    """The plan with its Kueue quota action (the training ClusterQueue's GPU quota to the
    spare capacity of the next hour, :mod:`scaler.actuation.kube.kueue`), where the plan
    has a ``workloads.kueue`` section and the provider can read the ClusterQueue."""
    section = plan.workloads.get("kueue")
    reader = getattr(provider, "kueue_action", None)
    quota = reader(section, iso(now)) if section and callable(reader) else None
    if quota is None:
        return plan, None
    return dataclasses.replace(plan, actions=[*plan.actions, quota]), quota


MAX_BILLING_RECORDS = 5000
"""Most cycle records read to date the nodes of pools with ``billing`` (17 days at 5 min)."""


def node_starts(
    config: Config,
    past: Sequence[PastCycle],
    records: RunStore | None,
    inventory: dict[str, int],
    now: pd.Timestamp,
) -> dict[str, list[pd.Timestamp]]:
    """When the nodes of pools with ``billing`` started, from the cycles that acted.

    The hysteresis reads only the newest cycles; a node's paid period may have begun long
    before, so the records are read back over the longest billing period (at most
    :data:`MAX_BILLING_RECORDS` cycles). Nodes older than every record are of unknown
    start and are released as planned.
    """
    billed = [p for p in config.pools if p.billing is not None]
    if not billed:
        return {}
    cycles = list(past)
    if records is not None:
        span = max(max(p.billing.granularity_s, p.billing.minimum_s) for p in billed if p.billing)
        limit = min(MAX_BILLING_RECORDS, span // config.policy.cycle_s + 24)
        try:
            cycles = past_cycles(records.recent(limit=limit, job="cycle")) or cycles
        except (TiercastError, TypeError, ValueError) as exc:
            log.info("no run records to date billed nodes: %s", str(exc)[:200])
    return starts_from_past(billed, cycles, inventory, now)


def shared_node_inventory(
    provider: CapacityProvider, config: Config, inventory: dict[str, int]
) -> tuple[dict[str, list[SharedNodeState]] | None, str, str | None]:
    """The nodes the sharing plan chooses from, per pool without ``mig_layouts``; where they
    come from (``cluster`` or ``config``); and why no node's sharing can change, or None.

    A provider that reads a cluster (the Kubernetes provider, alone or inside the service's
    guard) gives the nodes as they are, read now; a pool it does not act on, and every pool
    of a provider that reads none (``tiercast plan``), has the nodes its configured count
    describes, unlabelled (:func:`configured_shared_nodes`). A cluster that cannot be read
    gives None, and one whose GPU Operator names no device plugin config ConfigMap (no
    ClusterPolicy, no ``devicePlugin.config.name``) the reason: the plan then changes no
    node's sharing and says why, rather than failing an action every cycle.
    """
    configured = {
        p.name: configured_shared_nodes(p, int(inventory.get(p.name, p.min_nodes)))
        for p in config.pools
        if p.mig_layouts is None
    }
    reader = getattr(provider, "sharing_inventory", None)
    if not callable(reader):
        return configured, "config", None
    try:
        read, unavailable = reader()
    except TiercastError as exc:
        log.warning("nodes unreadable for the sharing plan (%s): no node's sharing changes", exc)
        return None, "cluster", None
    if read is None and unavailable is None:  # a guard around a provider that reads none
        return configured, "config", None
    if read is None:
        return None, "cluster", unavailable
    return {k: read.get(k, v) for k, v in configured.items()}, "cluster", None


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
    """Forecast, plan against the provider's inventory, then apply the changes.

    ``past``: earlier cycles (:func:`past_cycles` of the run records), for the
    planner's hysteresis across cycles. ``lead_time_records``: where the node starts of
    ``lead_time_s: auto`` pools are kept between cycles (None: only those the provider
    shows now count). ``starvation``: what waits for GPUs now
    (:func:`scaler.inputs.pending.collect_starvation`); what runs plus what waits is a
    floor under each GPU model's need. ``power``: the DCGM exporter's GPUs now
    (:func:`scaler.inputs.power.collect_power`); throttled GPUs count for less.
    """
    config, lead_times = learn_lead_times(config, provider, lead_time_records)
    # Suspect samples (spikes, zeros unlike the past, partial sums) are gaps from here on,
    # and the signals whose newest data is suspect hold their pools (forecaster.suspect).
    screened = screen_history(history, now, pd.Timedelta(seconds=config.policy.staleness_limit_s))
    history = screened.history
    for name, why in sorted(screened.held.items()):
        log.warning("signal %s: %s; its pools hold", name, why)
    # Footprints the config leaves out, read off the replicas' memory and utilization.
    config, footprint_notes = observed_footprints(config, history)
    forecasts = forecast_for_plan(config, history, now)
    stale = stale_signals(config, forecasts, now)
    inventory = provider.inventory()
    # The history feeds the planner's learnt margins and observed floor (scaler.planning.tiers);
    # the margins' growth backtest keeps its forecasts between cycles (growth_cache).
    policy = config.policy
    cache = growth_cache_for(
        model_store_for(config).path,
        keep=pd.Timedelta(seconds=policy.growth_backtest_s + policy.growth_refresh_s),
    )
    margins = learn_margins(
        config, forecasts, history, lambda signal: cache.forecaster(signal, config.forecast.method)
    )
    cache.save()
    plan = plan_capacity(
        config,
        forecasts,
        inventory,
        now,
        stale=stale,
        margins=margins,
        suspect=screened.held,
        history=history,
        past=past,
        waiting=starvation.floor() if starvation is not None else None,
        node_starts=node_starts(config, past, lead_time_records, inventory, now),
        derated=power.lost_gpus() if power is not None else None,
    )
    if power is not None:
        plan = dataclasses.replace(
            plan, notes=plan.notes + power.notes(), risk={**plan.risk, "power": power.to_dict()}
        )
    if starvation is not None:
        plan = dataclasses.replace(
            plan,
            notes=plan.notes + starvation.notes(),
            risk={**plan.risk, "starvation": starvation.to_dict()},
        )
    if screened.notes or footprint_notes:
        plan = dataclasses.replace(plan, notes=plan.notes + screened.notes + footprint_notes)
    plan = with_lead_times(plan, lead_times)
    if mig_pools(config):
        # MIG layouts are planned on the node counts the tier planner targets now.
        targets = {p.pool: p.target_nodes[0] for p in plan.pools if p.target_nodes}
        # A provider that can read the cluster's MIG state gives the real nodes and the
        # mig-parted entries the MIG manager can apply; otherwise the config's mig_layouts.
        reader = getattr(provider, "mig_inventory", None)
        node_states, known = reader() if callable(reader) else (None, None)
        mig = plan_mig(
            config,
            forecasts,
            inventory,
            now,
            targets,
            stale=stale | set(screened.held),
            node_states=node_states,
            known_configs=known,
        )
        plan = dataclasses.replace(plan, actions=plan.actions + mig.actions, mig=mig.section)
    if has_shared_workloads(config):
        # Time-slicing and MPS: the nodes whose nvidia.com/device-plugin.config must change.
        targets = {p.pool: p.target_nodes[0] for p in plan.pools if p.target_nodes}
        shared_nodes, source, unavailable = shared_node_inventory(provider, config, inventory)
        sharing = plan_sharing_actions(
            config,
            forecasts,
            inventory,
            now,
            shared_nodes,
            targets,
            stale=stale | set(screened.held),
            history=history,
            source=source,
            unavailable=unavailable,
        )
        plan = dataclasses.replace(
            plan,
            actions=plan.actions + sharing.actions,
            sharing={**plan.sharing, **sharing.section},
            notes=plan.notes + sharing.notes,
        )
    results: list[ActionResult] = []
    for action in plan.changes():
        fresh = provider.inventory()
        if fresh.get(action.pool) != action.current_nodes:
            results.append(
                ActionResult(
                    action,
                    "skipped",
                    f"inventory changed since planning ({action.current_nodes} -> {fresh.get(action.pool)}); "
                    "will re-plan next cycle",
                )
            )
            continue
        results.append(provider.apply(action))
    plan, quota = with_kueue_quota(plan, provider, now)
    if quota is not None and quota.decision != "no-op":
        results.append(provider.apply(quota))
    return CycleResult(
        plan=plan,
        results=results,
        dry_run=dry_run,
        forecasts=forecasts,
        config=config,
        lead_times=lead_times,
    )
