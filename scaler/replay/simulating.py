"""Walk-forward replay: how a scaling policy would have done on a real demand trace.

The replay follows one fixed protocol so that numbers are comparable across
policies and series (README, "Replay"):

* Demand is GPUs per 5-minute step, ``ceil(signal / units_per_gpu)``; a source
  with a longer step holds each value over its 5-minute steps for scoring. A gap
  in the source is a gap for the policies (they see no data) and is scored with
  the last known demand held.
* A value becomes visible to the policies at the *end* of its interval: the
  decision at step t sees the values whose intervals ended by t (for a 30-minute
  source, the decision at 10:20 knows the 9:30-10:00 value, not 10:00-10:30's).
  The scored demand and the clairvoyant and oracle yardsticks are unchanged.
* Nodes have ``gpus_per_node`` GPUs. ``R(t)`` is the nodes requested at step t,
  all of them billed (booting ones included). A node is usable once requested
  continuously for the lead time (L steps): ``U(t) = min(R(t), max(U(t-1),
  min(R(t-L..t))))``; lowering the request cancels booting nodes first and
  releases usable ones at once. Every policy starts the test period warm: before
  its first step it is taken to have requested, and be serving, its first request.
* The decision at step t uses demand up to t-1 only (walk-forward), and of a
  coarse source only the intervals that ended by t.
* A *reversal* is a change of a pool's request undone within 30 minutes (a raise
  followed by a cut, or a cut by a raise); the table counts them for every policy.
* The test period is the last 7 days (the last 4 for series of 14 days or less);
  everything before it is training.

Policies: ``static`` (training peak x 1.1), ``reactive`` (last demand x 1.2, lowered
after the target has been lower for 30 minutes), ``predictive`` (tiercast's
planner, :func:`scaler.planning.tiers.plan_capacity`, fed the latest forecast and the
demand observed so far), ``clairvoyant`` (perfect foresight under the lead time:
the cheapest schedule that serves everything) and ``oracle`` (demand itself, no
lead time; a lower bound no policy can reach).

The tier replay adds a reserved pool (billed whether used or not) and a spot pool
whose nodes are each reclaimed at a fixed hourly probability (seeded); a
reclaimed node's GPUs vanish at once and its replacement boots for the lead time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.errors import BadInputError
from forecaster.forecasting import SeriesForecast, forecast_series
from forecaster.series import clean_series, infer_step
from scaler.config import Config, parse_config
from scaler.planning.margins import Margin, learn_margin
from scaler.planning.tiers import (
    Solver,
    allocate,
    plan_capacity,
    reclaim_spares,
    signal_granule,
    signal_replica,
)
from scaler.plans import PastCycle

STEP = pd.Timedelta(minutes=5)
STEP_H = STEP / pd.Timedelta(hours=1)
POLICIES: tuple[str, ...] = ("static", "reactive", "predictive", "clairvoyant", "oracle")


@dataclass(frozen=True)
class ReplaySetup:
    """The protocol's constants; the defaults are the published protocol."""

    gpus_per_node: int = 8
    price_per_gpu_hour: float = 4.0
    """On-demand price, and the price of every node in the single-tier replay."""
    lead_time_s: int = 600
    """Seconds a node must be requested before it serves. Default 600 (2 steps)."""
    static_headroom: float = 0.1
    """Static fleet: training peak times (1 + this)."""
    reactive_headroom: float = 0.2
    """Reactive: last demand times (1 + this)."""
    reactive_hold_s: int = 1800
    """Reactive: the target must have been lower this long before it is lowered."""
    test_days: int = 7
    """Days replayed; ``short_test_days`` for series of ``short_series_days`` or less."""
    short_test_days: int = 4
    short_series_days: int = 14
    reforecast_s: int = 3600
    """Predictive: how often (simulated seconds) the forecast is refreshed."""
    lookback_s: int = 28 * 86400
    """Predictive: history given to the forecaster each refresh: four weeks, so that
    weekly patterns have whole seasons to learn from."""
    forecast_method: str = "auto"
    quantile: float = 0.9
    """Predictive: forecast quantile the planner covers."""
    headroom_fraction: float = 0.1
    """Predictive: policy.headroom_fraction, the margin only where a signal has too little
    history to learn its own (scaler.planning.margins); the replay's training period always has."""
    stabilization_s: int = 1200
    """Predictive: policy.scale_down_stabilization_s. 1200: with the 10-minute lead time
    the hold window (lead + stabilization) is the 30 minutes over which reversals are
    counted and reactive holds its target (chosen on servegen and azure_vm2019: 600
    gave m_small 58 reversals instead of 13 for no saving)."""
    unserved_budget: float = 0.005
    """Predictive: policy.unserved_budget, what the learnt margin may leave unserved
    in the walk-forward replay of the training period (scaler.planning.margins)."""
    horizon_s: int = 3600
    """Predictive: planning horizon of each step's plan (only the first step is acted on)."""
    # Tier replay.
    reserved_price_per_gpu_hour: float = 2.40
    spot_price_per_gpu_hour: float = 1.40
    spot_interruption_rate_per_hour: float = 0.05
    spot_max_share: float = 0.5
    """Spot market depth: at most this share of the training peak's nodes can be spot."""
    seed: int = 0
    reversal_window_s: int = 1800
    """A change of a pool's request undone within this many seconds is a reversal."""

    @property
    def lead_steps(self) -> int:
        return math.ceil(self.lead_time_s / STEP.total_seconds())

    @property
    def node_price_per_step(self) -> float:
        return self.gpus_per_node * self.price_per_gpu_hour * STEP_H


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Trace:
    """A signal on the 5-minute replay grid and the demand in GPUs it implies."""

    name: str
    signal: pd.Series
    """Signal on the 5-minute grid; NaN where the source has a gap."""
    demand: np.ndarray
    """GPUs per step, gaps holding the last known value (for scoring)."""
    units_per_gpu: float
    test_start: int
    """Index of the first test step."""
    hold: int = 1
    """5-minute steps per source interval (6 for a 30-minute source)."""

    def visible_end(self, t: int) -> int:
        """Steps visible to the decision at step ``t``: those whose source interval ended by t."""
        return (t // self.hold) * self.hold

    def visible_demand(self, t: int) -> float:
        """The newest demand the decision at step ``t`` knows (the scored demand, held over gaps)."""
        end = self.visible_end(t)
        return float(self.demand[end - 1]) if end > 0 else 0.0

    @property
    def index(self) -> pd.DatetimeIndex:
        return pd.DatetimeIndex(self.signal.index)

    @property
    def test_index(self) -> pd.DatetimeIndex:
        return self.index[self.test_start :]


def prepare_trace(
    series: pd.Series, units_per_gpu: float, setup: ReplaySetup | None = None
) -> Trace:
    """Put ``series`` on the 5-minute grid (holding coarser values) and split off the test period."""
    setup = setup or ReplaySetup()
    if not units_per_gpu > 0:
        raise BadInputError(f"--units-per-gpu must be > 0; got {units_per_gpu!r}")
    name = str(series.name or "demand")
    s = clean_series(series, name=name)
    if s.notna().sum() < 2:
        raise BadInputError(f"series {name!r} has fewer than 2 observed values; nothing to replay")
    native = infer_step(s.dropna())
    if native < STEP or native % STEP != pd.Timedelta(0):
        raise BadInputError(
            f"series {name!r} has a step of {native}; the replay needs a multiple of 5 minutes"
        )
    s = s.resample(native, origin="epoch").mean()
    hold = int(native / STEP)
    grid = pd.date_range(s.index[0], s.index[-1] + native - STEP, freq=STEP, name="timestamp")
    # Hold each value over its 5-minute steps, but never across a gap of the source.
    signal = s.reindex(grid).ffill(limit=hold - 1) if hold > 1 else s.reindex(grid)
    signal = signal.clip(lower=0.0).rename(name)
    demand = np.ceil(signal.ffill().fillna(0.0).to_numpy() / units_per_gpu - 1e-9)
    span = grid[-1] - grid[0] + STEP
    days = (
        setup.short_test_days
        if span <= pd.Timedelta(days=setup.short_series_days)
        else setup.test_days
    )
    start = grid[-1] + STEP - pd.Timedelta(days=days)
    test_start = int(np.searchsorted(grid.asi8, start.value))
    if test_start < int(pd.Timedelta(days=1) / STEP):
        raise BadInputError(
            f"series {name!r} spans {span}; the replay needs at least one day of training "
            f"before its {days}-day test period"
        )
    return Trace(name, signal, np.maximum(demand, 0.0), units_per_gpu, test_start, hold)


# --------------------------------------------------------------------------- rules


def usable_nodes(requested: Sequence[int] | np.ndarray, lead_steps: int) -> np.ndarray:
    """Usable nodes per step under the lead-time rule, starting warm at ``requested[0]``."""
    r = np.asarray(requested, dtype=np.int64)
    u = np.empty_like(r)
    if len(r) == 0:
        return u
    prev = int(r[0])
    for t in range(len(r)):
        lo = max(0, t - lead_steps)
        # Before the first step the policy had requested its first request all along.
        window_min = (
            int(r[lo : t + 1].min()) if t >= lead_steps else min(int(r[0]), int(r[: t + 1].min()))
        )
        prev = min(int(r[t]), max(prev, window_min))
        u[t] = prev
    return u


@dataclass
class SpotFleet:
    """Nodes of one spot pool, each with the step it starts serving; reclaims are random.

    Without reclaims it reproduces :func:`usable_nodes` exactly: a raise adds nodes
    that serve after the lead time, a cut cancels the youngest (booting) nodes first.
    """

    lead_steps: int
    rate_per_step: float
    rng: np.random.Generator
    ready_at: list[int] = field(default_factory=list)
    reclaimed: int = 0

    def step(self, t: int, requested: int) -> int:
        """Apply the request at step t; return the usable nodes at t."""
        if self.rate_per_step > 0 and self.ready_at:
            lost = self.rng.random(len(self.ready_at)) < self.rate_per_step
            if lost.any():
                self.reclaimed += int(lost.sum())
                # The provider keeps the requested count: each lost node is replaced
                # and the replacement boots for the lead time.
                self.ready_at = [
                    t + self.lead_steps if gone else r
                    for r, gone in zip(self.ready_at, lost, strict=True)
                ]
        self.ready_at.sort()
        if requested > len(self.ready_at):
            self.ready_at += [t + self.lead_steps] * (requested - len(self.ready_at))
        elif requested < len(self.ready_at):
            del self.ready_at[requested:]
        return sum(1 for r in self.ready_at if r <= t)


# --------------------------------------------------------------------------- baselines


def static_requests(trace: Trace, setup: ReplaySetup) -> np.ndarray:
    peak = float(np.max(trace.demand[: trace.test_start]))
    n = math.ceil(peak * (1 + setup.static_headroom) / setup.gpus_per_node - 1e-9)
    return np.full(len(trace.demand) - trace.test_start, n, dtype=np.int64)


def reactive_requests(trace: Trace, setup: ReplaySetup) -> np.ndarray:
    """Target ``ceil(d(t-1) * 1.2 / 8)``; a lower target applies once it has held the window.

    ``d(t-1)`` is the newest demand visible at t: of a coarse source, the last
    interval that ended by t.
    """
    d = trace.demand
    hold = max(1, round(setup.reactive_hold_s / STEP.total_seconds()))
    start = trace.test_start
    # target[i] is the target of step start - hold + 1 + i, from the demand it sees.
    seen = np.array([trace.visible_demand(t) for t in range(start - hold + 1, len(d))])
    target = np.ceil(seen * (1 + setup.reactive_headroom) / setup.gpus_per_node - 1e-9)
    # R(t) is the largest target of the last ``hold`` steps: it rises at once and falls
    # only once every target in the window has been lower.
    out = np.array([target[i : i + hold].max() for i in range(len(d) - start)])
    return out.astype(np.int64)


def oracle_requests(trace: Trace, setup: ReplaySetup) -> np.ndarray:
    d = trace.demand[trace.test_start :]
    return np.ceil(d / setup.gpus_per_node - 1e-9).astype(np.int64)


def clairvoyant_requests(trace: Trace, setup: ReplaySetup) -> np.ndarray:
    d = trace.demand
    n = len(d)
    out = []
    for t in range(trace.test_start, n):
        window = d[t : min(n, t + setup.lead_steps + 1)]
        out.append(math.ceil(float(window.max()) / setup.gpus_per_node - 1e-9))
    return np.array(out, dtype=np.int64)


# --------------------------------------------------------------------------- tiercast


def replay_config(trace: Trace, setup: ReplaySetup, tiers: bool = False) -> Config:
    """The fleet tiercast plans in the replay: one on-demand pool, or reserved + spot + on-demand."""
    workload = {
        "name": trace.name,
        "signal": "demand",
        "gpu_model": "H100-80GB",
        "units_per_replica": trace.units_per_gpu,
    }
    base = {
        "gpu_model": "H100-80GB",
        "gpus_per_node": setup.gpus_per_node,
        "lead_time_s": setup.lead_time_s,
    }
    pools: list[dict[str, object]] = [
        {
            "name": "on-demand",
            "tier": "on-demand",
            "price_per_gpu_hour": setup.price_per_gpu_hour,
            "max_nodes": 100_000,
            **base,
        }
    ]
    if tiers:
        reserved, spot_max = tier_sizes(trace, setup)
        pools += [
            {
                "name": "reserved",
                "tier": "reserved",
                "price_per_gpu_hour": setup.reserved_price_per_gpu_hour,
                "min_nodes": reserved,
                "max_nodes": reserved,
                **base,
            },
            {
                "name": "spot",
                "tier": "spot",
                "price_per_gpu_hour": setup.spot_price_per_gpu_hour,
                "max_nodes": spot_max,
                "spot_interruption_rate_per_hour": setup.spot_interruption_rate_per_hour,
                **base,
            },
        ]
    data = {
        "signals": [{"name": "demand", "step_s": 300}],
        "workloads": [workload],
        "pools": pools,
        "policy": {
            "quantile": setup.quantile,
            "headroom_fraction": setup.headroom_fraction,
            "scale_down_stabilization_s": setup.stabilization_s,
            "unserved_budget": setup.unserved_budget,
            "horizon_s": setup.horizon_s,
            "cycle_s": int(STEP.total_seconds()),
        },
        "forecast": {"method": setup.forecast_method},
    }
    return parse_config(data, source="replay fleet")


TIER_SAVING_TARGET = 0.4
"""Tiers must cost at least this share less than on-demand only (the replay's tier target)."""


def tier_sizes(trace: Trace, setup: ReplaySetup) -> tuple[int, int]:
    """Reserved nodes to commit and the spot market's depth, from the training period only.

    Spot depth is ``spot_max_share`` of the training peak in nodes. The reserved
    commitment is the count that would have minimised the training period's cost
    with the rest served by spot and then on-demand, spot counted the way the
    planner counts it (its spares against reclaims held on top, N+1): a reserved
    node pays when it displaces enough dearer hours.
    """
    need = np.ceil(trace.demand[: trace.test_start] / setup.gpus_per_node - 1e-9)
    peak = int(need.max()) if need.size else 0
    spot_max = math.floor(peak * setup.spot_max_share)
    best, _ = _cheapest_tiers(need, spot_max, setup)
    return best, spot_max


def _cheapest_tiers(need: np.ndarray, spot_max: int, setup: ReplaySetup) -> tuple[int, float]:
    """(reserved nodes, cost) of the cheapest tier split serving ``need`` nodes per step exactly:
    reserved first, then spot up to the market depth less its reclaim spares, then on-demand."""
    loss = min(0.5, setup.spot_interruption_rate_per_hour * (setup.lead_time_s / 3600 + STEP_H))
    spare = reclaim_spares(spot_max, loss, setup.quantile)
    per_node_h = setup.gpus_per_node * STEP_H
    best, best_cost = 0, math.inf
    for n in range(int(need.max()) + 1 if need.size else 1):
        rest = np.maximum(0.0, need - n)
        spot = np.minimum(rest, max(0, spot_max - spare))
        held = np.where(spot > 0, spot + spare, 0.0)
        cost = per_node_h * (
            n * len(need) * setup.reserved_price_per_gpu_hour
            + held.sum() * setup.spot_price_per_gpu_hour
            + (rest - spot).sum() * setup.price_per_gpu_hour
        )
        if cost < best_cost - 1e-9:
            best, best_cost = n, cost
    return best, best_cost


def clairvoyant_tier_saving(trace: Trace, setup: ReplaySetup) -> float:
    """What tiers save on the test period at the replay's prices when demand is known: a
    clairvoyant fleet serving the test demand exactly, split at hindsight into the cheapest
    reserved + spot (the training period's market depth) + on-demand, against the same
    nodes on-demand only.

    A flat demand saves the reserved discount (40% at the defaults) plus what spot adds;
    a spiky one less, since a reserved node idles between peaks and spot is capped. It
    tells how much of a series' miss of the tier target is its shape and the prices
    rather than the planner (a planner's own margins can save a little more or less:
    its on-demand-only replay holds more than the clairvoyant's).
    """
    need = oracle_requests(trace, setup).astype(float)
    on_demand = float(need.sum()) * setup.gpus_per_node * STEP_H * setup.price_per_gpu_hour
    if not on_demand > 0:
        return math.nan
    _, spot_max = tier_sizes(trace, setup)
    _, cost = _cheapest_tiers(need, spot_max, setup)
    return 1.0 - cost / on_demand


@dataclass
class FleetRun:
    """What one policy requested and got, per pool and step of the test period."""

    policy: str
    requested: dict[str, np.ndarray]
    usable: dict[str, np.ndarray]
    price_per_node_step: dict[str, float]
    reclaimed: int = 0
    seconds: float = 0.0
    plans: int = 0
    margin: Margin | None = None
    """The margin the planner learnt from the training period (tiercast's runs)."""

    @property
    def requested_total(self) -> np.ndarray:
        return np.sum(list(self.requested.values()), axis=0)

    @property
    def usable_total(self) -> np.ndarray:
        return np.sum(list(self.usable.values()), axis=0)

    def cost(self) -> float:
        return float(
            sum(self.requested[p].sum() * self.price_per_node_step[p] for p in self.requested)
        )

    def cost_by_pool(self) -> dict[str, float]:
        return {
            p: float(self.requested[p].sum() * self.price_per_node_step[p]) for p in self.requested
        }


def single_pool_run(policy: str, requested: np.ndarray, setup: ReplaySetup) -> FleetRun:
    lead = 0 if policy == "oracle" else setup.lead_steps
    return FleetRun(
        policy,
        {"on-demand": requested},
        {"on-demand": usable_nodes(requested, lead)},
        {"on-demand": setup.node_price_per_step},
    )


def _observed_forecast(
    fc: SeriesForecast, observed: pd.Series, now: pd.Timestamp
) -> SeriesForecast:
    """The latest forecast, with the freshest observations the planner combines it with."""
    seen = observed.dropna()
    last_ts = seen.index[-1]
    recent = seen[seen.index > last_ts - pd.Timedelta(hours=1)]
    return replace(
        fc,
        last_timestamp=last_ts,
        last_value=float(seen.iloc[-1]),
        recent_max=float(recent.max()),
        n_observed=len(seen),
    )


def tiercast_run(
    trace: Trace,
    setup: ReplaySetup,
    config: Config,
    policy: str = "predictive",
    solver: Solver = "auto",
    progress: Callable[[str], None] | None = None,
    forecast_cache: dict[pd.Timestamp, SeriesForecast] | None = None,
) -> FleetRun:
    """Replay tiercast's planner walk-forward: every step plans from data before it.

    ``forecast_cache``: forecasts by refresh time, shared between runs on the same
    trace and setup (the on-demand and the tiered replay forecast the same data).

    The forecast is refreshed every ``reforecast_s`` of simulated time from the last
    ``lookback_s`` of history; each 5-minute step re-plans from that forecast and
    the demand observed up to the step before, against the fleet as it is then.
    """
    started = time.perf_counter()
    rng = np.random.default_rng(setup.seed)
    signal = trace.signal
    index = trace.index
    pools = list(config.pools)
    fleets = {
        p.name: SpotFleet(
            setup.lead_steps,
            1 - (1 - p.spot_interruption_rate_per_hour) ** STEP_H,
            rng,
        )
        for p in pools
    }
    quantiles = sorted(set(config.forecast.quantiles) | {config.policy.quantile})
    horizon = (
        pd.Timedelta(seconds=setup.reforecast_s + config.policy.horizon_s + setup.lead_time_s)
        + 2 * STEP
    )
    lookback = pd.Timedelta(seconds=setup.lookback_s)
    # A coarse source's newest value is one interval old when it becomes visible:
    # stale only once it is older than that plus the policy's limit.
    limit = pd.Timedelta(seconds=config.policy.staleness_limit_s) + trace.hold * STEP
    n_test = len(index) - trace.test_start
    requested = {p.name: np.zeros(n_test, dtype=np.int64) for p in pools}
    usable = {p.name: np.zeros(n_test, dtype=np.int64) for p in pools}
    # The state across cycles the product reads from its run records.
    past: list[PastCycle] = []
    memory = pd.Timedelta(seconds=config.policy.scale_down_stabilization_s) + pd.Timedelta(
        seconds=max(p.lead_time_s for p in pools)
    )
    floor_steps = int(memory / STEP) + 1
    # Margins learnt once, from the training period as the policies see it (its
    # source intervals that ended by the first test step): never from the test period.
    training = signal.iloc[: trace.visible_end(trace.test_start) : trace.hold]
    margin = learn_margin(
        training,
        setup.lead_time_s,
        config.policy.unserved_budget,
        step=trace.hold * STEP,
        signal="demand",
        floor_window=memory,
        granule=signal_granule(config, "demand"),
        replica=signal_replica(config, "demand"),
    )
    # Warm start at what the planner would hold: the newest visible demand of lead +
    # stabilization with the signal's margin (its first request is then no raise).
    first = trace.test_start
    seen = [
        trace.visible_demand(t) for t in range(max(0, first - int(memory / STEP) + 1), first + 1)
    ]
    margin_now = margin.margin if margin is not None else config.policy.headroom_fraction
    start_alloc = allocate(
        pools, math.ceil(max(seen) * (1 + margin_now) - 1e-9), config.policy.cycle_s
    )
    inventory = {p.name: start_alloc[p.name] for p in pools}
    fc: SeriesForecast | None = None
    next_refresh = index[trace.test_start]
    for i in range(n_test):
        t = trace.test_start + i
        now = index[t]
        # Only the source intervals that ended by now are visible (module docstring).
        end = trace.visible_end(t)
        window = signal.iloc[max(0, end - int(lookback / STEP)) : end]
        if now >= next_refresh or fc is None:
            cache = forecast_cache if forecast_cache is not None else {}
            if now not in cache:
                cache[now] = forecast_series(
                    window.rename("demand"), horizon, quantiles, setup.forecast_method
                )
            fc = cache[now]
            next_refresh = now + pd.Timedelta(seconds=setup.reforecast_s)
        forecasts = {"demand": _observed_forecast(fc, window, now)}
        stale = {"demand"} if now - forecasts["demand"].last_timestamp > limit else set()
        plan = plan_capacity(
            config,
            forecasts,
            inventory,
            now,
            stale,
            solver=solver,
            with_signals=False,
            margins={"demand": margin},
            # What the observed floor's peak is taken over (lead + stabilization).
            history={"demand": window.iloc[-floor_steps:]},
            past=past,
        )
        targets = {a.pool: a.target_nodes for a in plan.actions}
        past = [c for c in past if now - c.at < memory]
        past.append(
            PastCycle(
                at=now,
                targets=dict(targets),
                need_gpus=dict(plan.risk["near_need_gpus"]),
                observed_gpus=dict(plan.risk["observed_gpus"]),
                # Warm start (below): the first request was in place before the test,
                # so it is no raise that the hold rules would keep for a window.
                current=dict(targets) if i == 0 else dict(inventory),
                observed_at={"demand": forecasts["demand"].last_timestamp},
            )
        )
        for p in pools:
            fleet = fleets[p.name]
            if i == 0:
                # Warm start: the first request was in place and serving before the test.
                fleet.ready_at = [t - setup.lead_steps] * targets[p.name]
            requested[p.name][i] = targets[p.name]
            usable[p.name][i] = fleet.step(t, targets[p.name])
        inventory = dict(targets)
        if progress is not None and i % 288 == 287:
            progress(f"{policy}: day {(i + 1) // 288} of {n_test // 288} replayed")
    prices = {p.name: p.price_per_node_hour * STEP_H for p in pools}
    run = FleetRun(policy, requested, usable, prices)
    run.reclaimed = sum(f.reclaimed for f in fleets.values())
    run.seconds = time.perf_counter() - started
    run.plans = n_test
    run.margin = margin
    return run


# --------------------------------------------------------------------------- scoring


@dataclass(frozen=True)
class Score:
    """The protocol's metrics for one policy on one series."""

    policy: str
    cost: float
    cost_vs_oracle: float
    cost_vs_clairvoyant: float
    unserved_gpu_hours: float
    unserved_share: float
    steps_short_share: float
    changes: int = 0
    """Steps at which a pool's request changed, summed over pools."""
    reversals: int = 0
    """Of those, the changes undone (opposite direction) within the reversal window."""


def count_reversals(requested: Sequence[int] | np.ndarray, window_steps: int) -> tuple[int, int]:
    """``(changes, reversed)`` of one request series.

    A change is a step whose request differs from the step before; it is reversed
    when a change in the other direction follows within ``window_steps`` steps
    (2 -> 3 at 08:35 after 3 -> 2 at 08:30 reverses the cut).
    """
    r = np.asarray(requested, dtype=np.int64)
    sign = np.sign(np.diff(r))
    at = np.flatnonzero(sign)
    undone = 0
    for k, i in enumerate(at):
        for j in at[k + 1 :]:
            if j - i > window_steps:
                break
            if sign[j] == -sign[i]:
                undone += 1
                break
    return len(at), undone


def score(
    run: FleetRun,
    demand: np.ndarray,
    gpus_per_node: int,
    oracle: float,
    clairvoyant: float,
    reversal_steps: int = 6,
) -> Score:
    short = np.maximum(0.0, demand - run.usable_total * gpus_per_node)
    flips = [count_reversals(r, reversal_steps) for r in run.requested.values()]
    total = float(demand.sum())
    cost = run.cost()
    return Score(
        policy=run.policy,
        cost=cost,
        cost_vs_oracle=cost / oracle if oracle > 0 else math.nan,
        cost_vs_clairvoyant=cost / clairvoyant if clairvoyant > 0 else math.nan,
        unserved_gpu_hours=float(short.sum()) * STEP_H,
        unserved_share=float(short.sum()) / total if total > 0 else 0.0,
        steps_short_share=float((short > 1e-9).mean()) if len(short) else 0.0,
        changes=sum(c for c, _ in flips),
        reversals=sum(u for _, u in flips),
    )


@dataclass
class Replay:
    """Every policy's run and score on one trace."""

    trace: Trace
    setup: ReplaySetup
    runs: dict[str, FleetRun]
    scores: dict[str, Score]


def run_replay(
    trace: Trace,
    setup: ReplaySetup,
    policies: Sequence[str] = POLICIES,
    tiers: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Replay:
    """Run ``policies`` (and, with ``tiers``, tiercast on reserved + spot + on-demand)."""
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise BadInputError(
            f"--policies: unknown policy {unknown[0]!r}; expected some of {', '.join(POLICIES)}"
        )
    baselines = {
        "static": static_requests,
        "reactive": reactive_requests,
        "clairvoyant": clairvoyant_requests,
        "oracle": oracle_requests,
    }
    runs: dict[str, FleetRun] = {}
    cache: dict[pd.Timestamp, SeriesForecast] = {}
    for name in (*policies, "clairvoyant", "oracle"):
        if name in runs:
            continue
        if name == "predictive":
            runs[name] = tiercast_run(
                trace,
                setup,
                replay_config(trace, setup),
                name,
                progress=progress,
                forecast_cache=cache,
            )
        else:
            runs[name] = single_pool_run(name, baselines[name](trace, setup), setup)
    if tiers:
        config = replay_config(trace, setup, tiers=True)
        runs["predictive-tiers"] = tiercast_run(
            trace, setup, config, "predictive-tiers", progress=progress, forecast_cache=cache
        )
    demand = trace.demand[trace.test_start :]
    oracle = runs["oracle"].cost()
    clair = runs["clairvoyant"].cost()
    # The clairvoyant and the oracle are always reported: every cost is measured against them.
    order = [p for p in POLICIES if p in runs] + [p for p in runs if p not in POLICIES]
    window = max(1, round(setup.reversal_window_s / STEP.total_seconds()))
    scores = {p: score(runs[p], demand, setup.gpus_per_node, oracle, clair, window) for p in order}
    return Replay(trace, setup, runs, scores)


def format_table(replay: Replay) -> str:
    """The replay table: one row per policy."""
    header = (
        "policy",
        "cost $",
        "x oracle",
        "x clairvoyant",
        "unserved GPU-h",
        "unserved %",
        "steps short %",
        "changes",
        "reversals",
    )
    rows = [header]
    for s in replay.scores.values():
        rows.append(
            (
                s.policy,
                f"{s.cost:,.0f}",
                f"{s.cost_vs_oracle:.3f}",
                f"{s.cost_vs_clairvoyant:.3f}",
                f"{s.unserved_gpu_hours:.2f}",
                f"{100 * s.unserved_share:.3f}",
                f"{100 * s.steps_short_share:.2f}",
                str(s.changes),
                str(s.reversals),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        "  ".join(
            c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    return "\n".join(lines)


def format_tiers(replay: Replay) -> str:
    """Tiercast on tiers against tiercast on on-demand only, with the tier split."""
    single = replay.scores.get("predictive")
    tiered = replay.scores.get("predictive-tiers")
    if single is None or tiered is None:
        return ""
    run = replay.runs["predictive-tiers"]
    by_pool = run.cost_by_pool()
    gpu_h = {
        p: float(n.sum()) * replay.setup.gpus_per_node * STEP_H for p, n in run.requested.items()
    }
    split = ", ".join(f"{p} {gpu_h[p]:,.0f} GPU-h ${by_pool[p]:,.0f}" for p in sorted(by_pool))
    saving = 1 - tiered.cost / single.cost if single.cost > 0 else math.nan
    verdict = "no more" if tiered.unserved_gpu_hours <= single.unserved_gpu_hours + 1e-9 else "MORE"
    clairvoyant = clairvoyant_tier_saving(replay.trace, replay.setup)
    return (
        f"tiers: ${tiered.cost:,.0f} vs on-demand only ${single.cost:,.0f}: {100 * saving:.1f}% cheaper "
        f"(clairvoyant tiers at these prices: {100 * clairvoyant:.1f}%); "
        f"unserved {tiered.unserved_gpu_hours:.2f} vs {single.unserved_gpu_hours:.2f} GPU-h ({verdict} unserved); "
        f"{split}; spot nodes reclaimed: {run.reclaimed}"
    )


def timeline_frame(replay: Replay) -> pd.DataFrame:
    """Long form: ``timestamp,policy,demand_gpus,requested_nodes,usable_nodes`` per step and policy."""
    idx = replay.trace.test_index
    demand = replay.trace.demand[replay.trace.test_start :]
    frames = []
    for name, run in replay.runs.items():
        frames.append(
            pd.DataFrame(
                {
                    "timestamp": [t.strftime("%Y-%m-%dT%H:%M:%S") for t in idx],
                    "policy": name,
                    "demand_gpus": demand.astype(int),
                    "requested_nodes": run.requested_total.astype(int),
                    "usable_nodes": run.usable_total.astype(int),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def write_chart(replay: Replay, path: str) -> None:
    """Demand against each policy's usable GPUs over the test period (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    idx = replay.trace.test_index
    demand = replay.trace.demand[replay.trace.test_start :]
    fig, ax = plt.subplots(figsize=(14, 5), dpi=100)
    ax.fill_between(idx, demand, step="post", color="0.8", label="demand (GPUs)")
    for name, run in replay.runs.items():
        if name == "oracle":
            continue
        ax.step(
            idx,
            run.usable_total * replay.setup.gpus_per_node,
            where="post",
            lw=0.9,
            label=f"{name} usable GPUs",
        )
    ax.set_title(f"tiercast simulate: {replay.trace.name} (test period)")
    ax.set_ylabel("GPUs")
    ax.legend(loc="upper left", fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# --------------------------------------------------------------------------- suites

SUITE_FILE = Path(__file__).with_name("replay_suite.yaml")
"""The dev suite: which files, in which units and groups (documented in the file)."""


@dataclass(frozen=True)
class SuiteSeries:
    """One series of a suite: its file under the suite folder, units and group."""

    path: str
    units_per_gpu: float
    group: str


@dataclass(frozen=True)
class Suite:
    name: str
    series: tuple[SuiteSeries, ...]
    tuned_on: tuple[str, ...] = ()
    """Groups the replay policy's parameters were chosen on; the rest confirm them."""


def load_suite(path: str | Path = SUITE_FILE) -> Suite:
    """Read a suite definition (YAML: ``name``, ``tuned_on``, ``series`` of path/units/group)."""
    import yaml

    where = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise BadInputError(f"suite {where!r}: cannot read: {str(exc)[:200]}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("series"), list):
        raise BadInputError(f"suite {where!r}: expected a mapping with a 'series' list")
    out = []
    for i, item in enumerate(data["series"]):
        if not isinstance(item, dict):
            raise BadInputError(f"suite {where!r}: series[{i}] must be a mapping; got {item!r:.80}")
        path_i, units, group = item.get("path"), item.get("units_per_gpu"), item.get("group")
        if not isinstance(path_i, str) or not path_i:
            raise BadInputError(f"suite {where!r}: series[{i}].path must be a file path")
        if (
            isinstance(units, bool)
            or not isinstance(units, int | float)
            or not math.isfinite(units)
            or units <= 0
        ):
            raise BadInputError(
                f"suite {where!r}: series[{i}].units_per_gpu must be a number > 0; got {units!r:.40}"
            )
        if not isinstance(group, str) or not group:
            raise BadInputError(f"suite {where!r}: series[{i}].group must be a name")
        out.append(SuiteSeries(path_i, float(units), group))
    tuned = data.get("tuned_on") or []
    if not isinstance(tuned, list) or not all(isinstance(g, str) for g in tuned):
        raise BadInputError(f"suite {where!r}: tuned_on must be a list of group names")
    return Suite(str(data.get("name", Path(path).stem)), tuple(out), tuple(tuned))


@dataclass(frozen=True)
class SuiteResult:
    """The figures of one suite series that the summary needs."""

    entry: SuiteSeries
    name: str
    scores: dict[str, Score]
    tiers_gpu_hours: dict[str, float] = field(default_factory=dict)
    margin: str = ""
    tiers_clairvoyant: float = math.nan
    """:func:`clairvoyant_tier_saving` of the series: what clairvoyant tiers save on its test period."""


def suite_result(entry: SuiteSeries, replay: Replay) -> SuiteResult:
    tiered = replay.runs.get("predictive-tiers")
    gpu_h = (
        {
            p: float(n.sum()) * replay.setup.gpus_per_node * STEP_H
            for p, n in tiered.requested.items()
        }
        if tiered is not None
        else {}
    )
    pred = replay.runs.get("predictive")
    margin = pred.margin.describe() if pred is not None and pred.margin is not None else ""
    clairvoyant = (
        clairvoyant_tier_saving(replay.trace, replay.setup) if tiered is not None else math.nan
    )
    return SuiteResult(entry, replay.trace.name, dict(replay.scores), gpu_h, margin, clairvoyant)


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def format_summary(results: Sequence[SuiteResult], suite: Suite) -> str:
    """One row per series (predictive against reactive, tiers against on-demand only), then
    the averages over groups (series of a group first, then groups) for the groups the
    parameters were tuned on, the others, and all."""
    header = (
        "series",
        "group",
        "x clairv. pred/react",
        "unserved % pred/react",
        "reversals pred/react",
        "cost<=react",
        "unserved<=react",
        "reversals<=react",
        "tiers cheaper %",
        "clairv. tiers %",
        "unserved GPU-h tiers/od",
        "tiers ok",
    )
    rows = [header]
    tiers_ok: dict[str, bool] = {}
    for r in results:
        s = r.scores
        p, re_ = s.get("predictive"), s.get("reactive")
        t = s.get("predictive-tiers")
        if p is None or re_ is None:
            continue
        saving = 1 - t.cost / p.cost if t is not None and p.cost > 0 else math.nan
        if t is not None:
            tiers_ok[r.entry.path] = (
                saving >= TIER_SAVING_TARGET and t.unserved_gpu_hours <= p.unserved_gpu_hours + 1e-9
            )
        rows.append(
            (
                Path(r.entry.path).stem,
                r.entry.group,
                f"{p.cost_vs_clairvoyant:.3f}/{re_.cost_vs_clairvoyant:.3f}",
                f"{100 * p.unserved_share:.3f}/{100 * re_.unserved_share:.3f}",
                f"{p.reversals}/{re_.reversals}",
                "yes" if p.cost <= re_.cost + 1e-9 else "NO",
                "yes" if p.unserved_gpu_hours <= re_.unserved_gpu_hours + 1e-9 else "NO",
                "yes" if p.reversals <= re_.reversals else "NO",
                f"{100 * saving:.1f}" if t is not None else "-",
                f"{100 * r.tiers_clairvoyant:.1f}" if math.isfinite(r.tiers_clairvoyant) else "-",
                f"{t.unserved_gpu_hours:.2f}/{p.unserved_gpu_hours:.2f}" if t is not None else "-",
                ("yes" if tiers_ok[r.entry.path] else "NO") if t is not None else "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(
            c.rjust(w) if i > 1 else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.append("")
    groups = sorted({r.entry.group for r in results})
    tuned = [g for g in groups if g in suite.tuned_on]
    confirm = [g for g in groups if g not in suite.tuned_on]

    def averaged(which: Sequence[str], policy: str) -> tuple[float, float]:
        per_group = []
        for g in which:
            members = [
                r.scores[policy] for r in results if r.entry.group == g and policy in r.scores
            ]
            if members:
                per_group.append(
                    (
                        _mean([m.cost_vs_clairvoyant for m in members]),
                        _mean([m.unserved_share for m in members]),
                    )
                )
        return _mean([c for c, _ in per_group]), _mean([u for _, u in per_group])

    for label, which in (
        (f"tuned on ({', '.join(tuned) or '-'})", tuned),
        (f"confirming ({', '.join(confirm) or '-'})", confirm),
        ("all groups", groups),
    ):
        if not which:
            continue
        parts = []
        for policy in ("reactive", "predictive", "predictive-tiers"):
            cost, unserved = averaged(which, policy)
            if not math.isnan(cost):
                parts.append(f"{policy} {cost:.3f} x clairvoyant, {100 * unserved:.3f}% unserved")
        lines.append(f"average over groups, {label}: " + "; ".join(parts))
    if tiers_ok:
        missed = [r for r in results if tiers_ok.get(r.entry.path) is False]
        shaped = [r for r in missed if r.tiers_clairvoyant < TIER_SAVING_TARGET]
        lines.append(
            f"tiers: {len(tiers_ok) - len(missed)} of {len(tiers_ok)} series at least "
            f"{100 * TIER_SAVING_TARGET:.0f}% cheaper than on-demand only with no more unserved; "
            f"on {len(shaped)} of the {len(missed)} others even clairvoyant tiers at these "
            f"prices save less than {100 * TIER_SAVING_TARGET:.0f}%"
        )
    return "\n".join(lines)
