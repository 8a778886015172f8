"""The MIG replay: MIG-managed pools replayed walk-forward on real traces (``tiercast simulate --mig``).

A scenario (:mod:`scaler.replay.mig_scenarios`) is one pool of one GPU model and several
workloads with declared MIG profiles, each driven by a public trace. Over the test period,
every ``cycle_s`` a policy decides from what it may know then, and every 5-minute step is
scored (:mod:`scaler.replay.mig_fleet`: GPU-hours, GPU-hours lost to drains, unserved
slice-hours). The policies:

- ``static``: the best static layout chosen on the training period: the fewest GPUs whose
  layouts cover every profile's training peak, all held, never changed;
- ``reactive``: starts from the static layouts on the shared pool, holds the fewest GPUs
  covering the newest observed demand plus ``reactive_headroom``, and re-partitions (same
  solver, same drain time) only when that demand does not fit the current layouts;
- ``planner``: tiercast's MIG planner (:func:`scaler.planning.mig.plan.plan_mig`) on
  forecasts refreshed every ``reforecast_s`` from the history before each decision (the
  replay's forecast machinery, :mod:`scaler.replay.walkforward`, and its cache); its
  relayouts start when the plan says ``relayout`` now, and it holds the GPUs that cover its
  plan's peak instances over the horizon;
- ``planner-keep``: the same forecasts and holding, never relayouting: the share of the
  planner's saving that its relayouts make;
- ``planner-cover``: the same, relayouting only where the plan's layouts would fall short
  of its forecast (the plan's ``cover`` decisions), never to save GPUs alone (``save``):
  what each kind of relayout gives and costs;
- ``planner-peak``: the same planner given, for every workload, a flat forecast at the
  peak of its last ``horizon_s`` of visible observations: what the forecast adds to the
  planner over persistence of the horizon's peak;
- ``planner-chosen``: the same planner, each workload on its forecast or on persistence,
  whichever predicted the 6-hour peak better over the training period's last 7 days
  (:func:`choose_sources`, :func:`scaler.planning.mig.demand.peak_source`);
- ``clairvoyant``: the same planner given the true future demand as its forecast.

No decision at step ``t`` reads a value of step ``t`` or later, except ``clairvoyant``'s.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd

from forecaster.forecasting import SeriesForecast, forecast_series
from scaler.catalog.mig import Layout, parse_layout
from scaler.config import Config, parse_config
from scaler.planning.demand import planning_grid
from scaler.planning.mig.demand import peak_source, slice_demand
from scaler.planning.mig.layouts import Costs, GpuState, solve_layouts, weighted_gpus
from scaler.planning.mig.persistence import (
    PastMigDemand,
    observed_instances,
    past_mig_demand,
    recent_peaks,
)
from scaler.planning.mig.plan import plan_mig
from scaler.planning.mig.state import MigNodeState
from scaler.replay.forecast_store import kept_forecasts
from scaler.replay.frontier import Matched
from scaler.replay.mig_fleet import MigPool, MigTally, account_step
from scaler.replay.mig_scenarios import MigDemand, MigScenario
from scaler.replay.protocol import STEP, ReplaySetup
from scaler.replay.walkforward import ForecastCache, _Forecasts

POOL = "mig"
"""The replayed pool's name."""
POLICIES = (
    "static",
    "reactive",
    "planner",
    "planner-keep",
    "planner-cover",
    "planner-peak",
    "planner-chosen",
    "clairvoyant",
)


@dataclass(frozen=True)
class MigSetup:
    """The MIG replay's constants; the defaults are the published ones (``docs/replay.md``)."""

    cycle_s: int = 3600
    """Seconds between decisions (the planner's ``policy.cycle_s``): layouts hold for hours
    and a drain takes 15 minutes, so an hour; every policy decides on the same clock."""
    horizon_s: int = 6 * 3600
    """The planner's ``policy.horizon_s``: its layouts cover the peak over this."""
    change_s: int = 900
    """A pool's ``mig_change_s``: a node out of service while drained and re-partitioned."""
    quantile: float = 0.9
    reforecast_s: int = 3600
    lookback_s: int = 28 * 86400
    method: str = "auto"
    reactive_headroom: float = 0.2
    price_per_gpu_hour: float = 4.0
    spare_fraction: float = 0.25
    """The shared pool of the changing policies: the static GPUs plus this share, in whole nodes."""
    test_days: int | None = None
    """Days replayed; None: the replay protocol's (7, or 4 for series of 14 days or less)."""

    @property
    def cycle_steps(self) -> int:
        return max(1, math.ceil(self.cycle_s / STEP.total_seconds()))

    def replay_setup(self) -> ReplaySetup:
        """The replay protocol's setup for the forecasts and the test period."""
        base = ReplaySetup()
        days = base.test_days if self.test_days is None else self.test_days
        short = base.short_test_days if self.test_days is None else self.test_days
        return ReplaySetup(
            test_days=days,
            short_test_days=short,
            reforecast_s=self.reforecast_s,
            lookback_s=self.lookback_s,
            forecast_method=self.method,
            quantile=self.quantile,
            horizon_s=self.horizon_s,
        )

    def costs(self) -> Costs:
        """The planner's GPU-hour costs (``plan_mig``'s): a held GPU, a changed one."""
        return Costs(used_gpu_h=self.horizon_s / 3600, change_gpu_h=self.change_s / 3600)


@dataclass
class MigResult:
    """One scenario's replay: every policy's tally and what the pools started from."""

    scenario: MigScenario
    setup: MigSetup
    test_index: pd.DatetimeIndex
    static_layouts: list[Layout]
    pool_gpus: int
    train_peak: dict[str, int]
    test_peak: dict[str, int]
    tallies: dict[str, MigTally] = field(default_factory=dict)
    chosen: dict[str, str] = field(default_factory=dict)
    """``planner-chosen``'s source per workload: ``forecast`` or ``recent-peak``."""
    matched: dict[str, Matched] = field(default_factory=dict)
    """Policies against the reactive frontier at matched service
    (:mod:`scaler.replay.mig_frontier`); empty when it was not traced."""
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    """The same savings' 90% intervals over the test days
    (:func:`scaler.replay.mig_frontier.matched_intervals`); empty when not traced."""


class _Policy(Protocol):
    def decide(self, pool: MigPool, t: int, now: pd.Timestamp) -> None: ...


# --------------------------------------------------------------------------- the fleet


def best_static(model: str, need: Mapping[str, int]) -> list[Layout]:
    """The fewest GPUs whose layouts cover ``need`` (the planner's exact solver, new GPUs),
    like layouts side by side so that a node carries one kind where it can."""
    need = {p: int(n) for p, n in need.items() if n > 0}
    gpus = [GpuState(Layout(whole=True), new=True)] * max(1, sum(need.values()))
    sol = solve_layouts(model, gpus, need, Costs(used_gpu_h=1.0, change_gpu_h=0.0), "auto")
    return sorted((a for a in sol.assignment if a is not None), key=lambda lay: lay.name)


def shared_pool(static: list[Layout], gpus_per_node: int, spare: float) -> list[Layout]:
    """The changing policies' pool: the static GPUs, then spares taking the static layouts
    in turn, up to whole nodes with ``spare`` more GPUs."""
    total = math.ceil(len(static) * (1 + spare) / gpus_per_node) * gpus_per_node
    return [static[i] if i < len(static) else static[i % len(static)] for i in range(total)]


def mig_config(scenario: MigScenario, setup: MigSetup, nodes: int) -> Config:
    """The tiercast config of the replayed pool: its workloads and one MIG-managed pool."""
    workloads: list[dict[str, Any]] = [
        {
            "name": w.name,
            "signal": w.name,
            "gpu_model": scenario.gpu_model,
            "units_per_replica": w.units_per_replica,
            "mig_profile": w.mig_profile,
            **({"memory_gb": w.memory_gb} if w.memory_gb is not None else {}),
        }
        for w in scenario.workloads
    ]
    pool = {
        "name": POOL,
        "tier": "reserved",
        "gpu_model": scenario.gpu_model,
        "gpus_per_node": scenario.gpus_per_node,
        "price_per_gpu_hour": setup.price_per_gpu_hour,
        "current_nodes": nodes,
        "min_nodes": nodes,
        "max_nodes": nodes,
        "mig_layouts": ["whole"] * nodes,
        "mig_change_s": setup.change_s,
    }
    data = {
        "signals": [{"name": w.name, "step_s": 300} for w in scenario.workloads],
        "workloads": workloads,
        "pools": [pool],
        "policy": {
            "quantile": setup.quantile,
            "horizon_s": setup.horizon_s,
            "cycle_s": setup.cycle_s,
        },
        "forecast": {"method": setup.method},
    }
    return parse_config(data, source=f"MIG replay scenario {scenario.name}")


def node_states(pool: MigPool) -> list[MigNodeState]:
    """The pool's nodes as the planner reads them from a cluster: a draining node held."""
    return [
        MigNodeState(
            f"{POOL}-{n}",
            tuple(pool.layouts[i] for i in pool.node_gpus(n)),
            strategy="mixed",
            held="relayout in progress" if pool.draining[n] else None,
        )
        for n in range(pool.nodes)
    ]


# --------------------------------------------------------------------------- the policies


class _Static:
    def decide(self, pool: MigPool, t: int, now: pd.Timestamp) -> None:
        """Nothing changes: the layouts and GPUs chosen on the training period."""


@dataclass
class Reactive:
    """The reactive relayout: hold for the peak of the newest ``hold_steps`` observations
    (1: the newest alone) plus ``headroom`` (None: the setup's); re-partition only when
    that does not fit the current layouts."""

    demand: MigDemand
    setup: MigSetup
    headroom: float | None = None
    hold_steps: int = 1

    def decide(self, pool: MigPool, t: int, now: pd.Timestamp) -> None:
        h = self.setup.reactive_headroom if self.headroom is None else self.headroom
        seen = self.demand.visible_instances(t, self.hold_steps)
        need = {p: math.ceil(n * (1 + h) - 1e-9) for p, n in seen.items()}
        have = pool.all_capacity()
        if any(have.get(p, 0) < n for p, n in need.items()):
            relayout_to_fit(pool, need, self.setup.costs())
        pool.hold_for(need)


def relayout_to_fit(pool: MigPool, need: Mapping[str, int], costs: Costs) -> None:
    """Re-partition the nodes the planner's solver changes to cover ``need`` (draining
    nodes kept as they are)."""
    gpus = [GpuState(lay, fixed=not pool.in_service(i)) for i, lay in enumerate(pool.layouts)]
    sol = solve_layouts(pool.model, gpus, dict(need), costs, "auto", allow_changes=True)
    for n in range(pool.nodes):
        span = pool.node_gpus(n)
        target = [sol.assignment[i] or pool.layouts[i] for i in span]
        if target != [pool.layouts[i] for i in span]:
            pool.relayout(n, target)


@dataclass
class _Planner:
    """tiercast's MIG planner each cycle, on forecasts (or the truth) of every workload."""

    config: Config
    forecasts: Mapping[str, _Forecasts] | None
    """Per workload signal; None: clairvoyant (the true future as the forecast)."""
    demand: MigDemand
    setup: MigSetup
    acts_on: tuple[str, ...] = ("cover", "save")
    """The plan's decisions (``when_to_change`` modes) whose relayouts start: both, only
    ``cover``, or none (the plan's layouts are then never applied)."""
    persist: tuple[str, ...] = ()
    """Workloads planned on the peak of their recent observations (:func:`recent_peak`)
    instead of their forecast."""
    learns: bool = False
    """As the cycle does: profiles plan on their recent peak where it predicted their peak
    better than the forecast at this run's own past decisions
    (:mod:`scaler.planning.mig.persistence`; the run's plans stand in for the records)."""
    past: list[PastMigDemand] = field(default_factory=list)

    def decide(self, pool: MigPool, t: int, now: pd.Timestamp) -> None:
        fc = self._forecasts(t, now)
        plan = plan_mig(
            self.config.fleet,
            self.config.policy,
            fc,
            {POOL: pool.nodes},
            now,
            node_states={POOL: node_states(pool)},
            recent=self._recent(t, now) if self.learns else None,
        )
        if self.learns:
            made = past_mig_demand({"created_at": now.isoformat(), "mig": plan.section})
            self.past += [made] if made is not None else []
        section = plan.section["models"][pool.model]
        if section.get("decision") in self.acts_on:
            targets = {e["node"]: e["layouts"] for e in section["nodes"]}
            for a in plan.actions:
                if a.kind == "mig-layout" and a.decision == "relayout":
                    node = str(a.details["node"])
                    lays = [parse_layout(pool.model, s) for s in targets[node]]
                    pool.relayout(int(node.rsplit("-", 1)[1]), lays)
        pool.hold_for(section["demand_peak_instances"])

    def warm_up(self, times: Iterable[int]) -> None:
        """The past a tiercast running before the test would have recorded: the forecast's
        demand per profile at each decision of ``times`` (the training period's last week),
        as its plans keep it."""
        policy = self.config.policy
        for t in times:
            now = self.demand.index[t]
            grid = planning_grid(now, policy.horizon_s, policy.cycle_s)
            fc = self._forecasts(t, now)
            demand = slice_demand(self.config.fleet, fc, grid, policy.quantile)
            peaks = {m: {p: float(v.max()) for p, v in per.items()} for m, per in demand.items()}
            self.past.append(PastMigDemand(now, peaks))

    def _recent(self, t: int, now: pd.Timestamp) -> dict[str, dict[str, float]]:
        """The profiles that plan on their recent peak now, judged on the past decisions."""
        seen = {
            w.signal: self.demand.traces[w.name].signal.iloc[
                : self.demand.traces[w.name].visible_end(t)
            ]
            for w in self.config.workloads
            if w.name in self.demand.traces
        }
        observed = observed_instances(self.config.workloads, seen)
        horizon = pd.Timedelta(seconds=self.setup.horizon_s)
        return recent_peaks(self.past, observed, now, horizon, self.setup.quantile)

    def _forecasts(self, t: int, now: pd.Timestamp) -> dict[str, SeriesForecast]:
        steps = math.ceil(self.setup.horizon_s / STEP.total_seconds()) + self.setup.cycle_steps
        back = math.ceil(self.setup.horizon_s / STEP.total_seconds())
        out: dict[str, SeriesForecast] = {}
        for name, trace in self.demand.traces.items():
            if name in self.persist:
                out[name] = recent_peak(trace.signal, trace.visible_end(t), back, steps)
            elif self.forecasts is not None:
                out[name] = self.forecasts[name].at(t, now)[1]
            else:
                out[name] = true_future(trace.signal, t, steps, self.setup.quantile)
        return out


class _SignalForecasts(_Forecasts):
    """The replay's forecasts of one signal, fitted under the signal's own name: the
    forecaster keeps one model per name in the process, so signals sharing the replay's
    usual name ``demand`` would refit each other's model at every refresh."""

    def _forecast(self, now: pd.Timestamp, window: pd.Series) -> SeriesForecast:
        cache = self.cache if self.cache is not None else {}
        key = (self.method, "test", now)
        if key not in cache:
            name = str(self.trace.name)
            cache[key] = forecast_series(
                window.rename(name), self.horizon, self.quantiles, self.method
            )
        return cache[key]


def true_future(signal: pd.Series, t: int, steps: int, quantile: float) -> SeriesForecast:
    """The true values from step ``t`` on, as a forecast at every quantile (clairvoyant)."""
    seen = signal.ffill().fillna(0.0)
    future = seen.iloc[t : t + steps]
    if len(future) == 0:
        future = seen.iloc[-1:]
    cols = sorted({0.1, 0.5, 0.9, quantile})
    frame = pd.DataFrame({f"q{q:g}": future.to_numpy() for q in cols}, index=future.index)
    last = seen.index[max(0, t - 1)]
    value = float(seen.iloc[max(0, t - 1)])
    return SeriesForecast(
        str(signal.name), frame, "clairvoyant", "the true future", STEP, last, value, value, t
    )


def recent_peak(signal: pd.Series, end: int, back: int, steps: int) -> SeriesForecast:
    """A flat forecast, at every quantile, at the peak of the ``back`` observations before
    step ``end`` (gaps hold the last value), for ``steps`` steps from ``end``."""
    seen = signal.iloc[:end].ffill().dropna()
    peak = float(seen.iloc[-back:].max()) if len(seen) else 0.0
    index = pd.date_range(
        signal.index[end - 1] + STEP if end else signal.index[0], periods=steps, freq=STEP
    )
    frame = pd.DataFrame({f"q{q:g}": np.full(steps, peak) for q in (0.1, 0.5, 0.9)}, index=index)
    last = seen.index[-1] if len(seen) else signal.index[0]
    value = float(seen.iloc[-1]) if len(seen) else 0.0
    return SeriesForecast(
        str(signal.name),
        frame,
        "recent-peak",
        "the peak of the last hours",
        STEP,
        last,
        value,
        value,
        len(seen),
    )


TRAINING_DAYS = 7
"""Days at the end of the training period whose decisions judge forecast and persistence."""


def choose_sources(
    demand: MigDemand, setup: MigSetup, sources: Mapping[str, _Forecasts]
) -> dict[str, str]:
    """Per workload, ``forecast`` or ``recent-peak`` (:func:`peak_source`): at each decision
    time of the training period's last :data:`TRAINING_DAYS` days whose next ``horizon_s``
    is still in training, the forecast's peak at the policy quantile over the horizon and
    the peak of the last ``horizon_s`` of observations, against the true peak."""
    span = math.ceil(setup.horizon_s / STEP.total_seconds())
    times = range(_week_start(demand, setup), demand.test_start - span + 1, setup.cycle_steps)
    out: dict[str, str] = {}
    for name, trace in demand.traces.items():
        truth = trace.signal.ffill().fillna(0.0).to_numpy(dtype=float)
        fc, recent, actual = [], [], []
        for t in times:
            now = demand.index[t]
            q = sources[name].at(t, now)[1].quantile(setup.quantile)
            fc.append(float(q[(q.index >= now) & (q.index < now + span * STEP)].max()))
            recent.append(_window_peak(trace.signal, trace.visible_end(t), span))
            actual.append(float(truth[t : t + span].max()))
        out[name] = peak_source(np.array(fc), np.array(recent), np.array(actual), setup.quantile)
    return out


def _week_start(demand: MigDemand, setup: MigSetup) -> int:
    """The first step of the training period's last :data:`TRAINING_DAYS` days, with at
    least ``horizon_s`` of history before it."""
    span = math.ceil(setup.horizon_s / STEP.total_seconds())
    return max(span, demand.test_start - TRAINING_DAYS * 86400 // int(STEP.total_seconds()))


def _last_week(demand: MigDemand, setup: MigSetup) -> range:
    """The decision steps of the training period's last :data:`TRAINING_DAYS` days, on the
    clock of the test's decisions."""
    t0, first = demand.test_start, _week_start(demand, setup)
    return range(first + (t0 - first) % setup.cycle_steps, t0, setup.cycle_steps)


def _window_peak(signal: pd.Series, end: int, back: int) -> float:
    """The peak of the ``back`` observations before step ``end`` (gaps hold the last value)."""
    seen = signal.iloc[:end].ffill().dropna()
    return float(seen.iloc[-back:].max()) if len(seen) else 0.0


# --------------------------------------------------------------------------- the walk


def replay_policy(
    name: str,
    policy: _Policy,
    pool: MigPool,
    demand: Mapping[str, np.ndarray],
    test_start: int,
    index: pd.DatetimeIndex,
    cycle_steps: int,
) -> MigTally:
    """Walk the test period: a decision every ``cycle_steps``, every step scored."""
    started = time.perf_counter()
    steps = len(index) - test_start
    tally = MigTally.empty(name, steps)
    for i in range(steps):
        t = test_start + i
        if i % cycle_steps == 0:
            policy.decide(pool, t, index[t])
        account_step(pool, {p: float(v[t]) for p, v in demand.items()}, tally, i)
    tally.relayouts = pool.relayouts
    tally.mean_need = float(np.mean(pool.needs)) if pool.needs else 0.0
    tally.seconds = time.perf_counter() - started
    return tally


def run_mig_replay(
    demand: MigDemand,
    setup: MigSetup,
    policies: tuple[str, ...] = POLICIES,
    forecast_cache: str | None = None,
) -> MigResult:
    """Replay ``policies`` on one scenario's demand."""
    sc, t0 = demand.scenario, demand.test_start
    inst = demand.instances()
    train_peak = {p: int(v[:t0].max()) for p, v in inst.items()}
    static = best_static(sc.gpu_model, train_peak)
    shared = shared_pool(static, sc.gpus_per_node, setup.spare_fraction)
    result = MigResult(
        sc,
        setup,
        demand.index[t0:],
        static,
        len(shared),
        train_peak,
        {p: int(v[t0:].max()) for p, v in inst.items()},
    )
    config = mig_config(sc, setup, math.ceil(len(shared) / sc.gpus_per_node))
    rsetup = setup.replay_setup()
    with ExitStack() as stack:
        caches: dict[str, ForecastCache] = {
            name: stack.enter_context(kept_forecasts(forecast_cache, trace, [rsetup]))
            for name, trace in demand.traces.items()
        }
        for name in policies:
            layouts = static if name == "static" else shared
            pool = MigPool.of(sc.gpu_model, sc.gpus_per_node, layouts, setup.change_s)
            # Each policy walks its own forecasts forward from the test's start (they
            # share the cache, so a forecast is made once).
            sources = {
                w: _SignalForecasts.for_run(
                    trace, rsetup, config.forecast, config.policy, caches[w]
                )
                for w, trace in demand.traces.items()
            }
            policy = _policy(name, demand, setup, config, sources)
            if name == "planner-chosen" and isinstance(policy, _Planner):
                result.chosen = {
                    w: "recent-peak" if w in policy.persist else "forecast" for w in demand.traces
                }
            result.tallies[name] = replay_policy(
                name, policy, pool, inst, t0, demand.index, setup.cycle_steps
            )
            if name == "static":
                result.tallies[name].mean_need = weighted_gpus(sc.gpu_model, train_peak)
    return result


def _policy(
    name: str,
    demand: MigDemand,
    setup: MigSetup,
    config: Config,
    sources: Mapping[str, _Forecasts],
) -> _Policy:
    if name == "static":
        return _Static()
    if name == "reactive":
        return Reactive(demand, setup)
    acts = {"planner": ("cover", "save"), "planner-keep": (), "planner-cover": ("cover",)}
    if name in acts:
        planner = _Planner(config, sources, demand, setup, acts_on=acts[name], learns=True)
        planner.warm_up(_last_week(demand, setup))
        return planner
    if name == "planner-peak":
        return _Planner(config, None, demand, setup, persist=tuple(demand.traces))
    if name == "planner-chosen":
        chosen = choose_sources(demand, setup, sources)
        persist = tuple(w for w, source in chosen.items() if source == "recent-peak")
        return _Planner(config, sources, demand, setup, persist=persist)
    if name == "clairvoyant":
        return _Planner(config, None, demand, setup)
    raise ValueError(f"unknown MIG replay policy {name!r}; expected one of {', '.join(POLICIES)}")
