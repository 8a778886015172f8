"""The ``predictive`` policy: tiercast's own planner replayed walk-forward on a trace, every
5-minute step planned from the data before it, on one on-demand pool or on reserved + spot
+ on-demand (:func:`replay_config`, :func:`tiercast_run`).

A trace may carry a leading signal (:func:`with_leading`, ``simulate --leading CSV``): the
near-term rule then also tries it (:mod:`scaler.planning.leading`) on the training period,
and where it is chosen, each step adds its share of the leading series as visible at that
step."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from forecaster.forecasting import SeriesForecast, forecast_series
from scaler.config import (
    BillingConfig,
    Config,
    ForecastConfig,
    PolicyConfig,
    PoolConfig,
    parse_config,
)
from scaler.planning.billing import billed_seconds
from scaler.planning.coverage import allocate
from scaler.planning.growth import walk_forward
from scaler.planning.leading import aligned
from scaler.planning.margins import Margin, learn_margin
from scaler.planning.solver import Solver
from scaler.planning.tiers import CapacityInputs, plan_capacity, signal_granule, signal_replica
from scaler.plans import CapacityPlan, PastCycle
from scaler.replay.fleets import FleetRun, SpotFleet
from scaler.replay.protocol import STEP, STEP_H, STEPS_PER_DAY, ReplaySetup, Trace
from scaler.replay.tiers import tier_sizes

ForecastCache = dict[tuple[str, str, pd.Timestamp], SeriesForecast]
"""Forecasts by (method, test or backtest, time), shared between runs on one trace."""
BACKTEST_REACH = pd.Timedelta(hours=3)
"""How far past a refresh the backtest's forecasts reach: every lead time up to 2 hours
of a 30-minute source, so that replays at several leads share them."""
TEST_REACH = pd.Timedelta(hours=1)
"""The least lead time the test forecasts' horizon allows for (a longer lead, more)."""


def _quantiles(forecast: ForecastConfig, policy: PolicyConfig) -> list[float]:
    """The quantiles the replay's forecasts compute: the config's and the policy's."""
    return sorted(set(forecast.quantiles) | {policy.quantile})


# --------------------------------------------------------------------------- the fleet


def replay_config(trace: Trace, setup: ReplaySetup, tiers: bool = False) -> Config:
    """The fleet tiercast plans in the replay: one on-demand pool, or reserved + spot + on-demand."""
    workload = {
        "name": trace.name,
        "signal": "demand",
        "gpu_model": "H100-80GB",
        "units_per_replica": trace.units_per_gpu,
    }
    pools = [_on_demand_pool(setup)] + (_tier_pools(trace, setup) if tiers else [])
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


def _node_shape(setup: ReplaySetup) -> dict[str, object]:
    """What every pool of the replay shares: the GPU, the node size, the lead time."""
    return {
        "gpu_model": "H100-80GB",
        "gpus_per_node": setup.gpus_per_node,
        "lead_time_s": setup.lead_time_s,
    }


def _on_demand_pool(setup: ReplaySetup) -> dict[str, object]:
    return {
        "name": "on-demand",
        "tier": "on-demand",
        "price_per_gpu_hour": setup.price_per_gpu_hour,
        "max_nodes": 100_000,
        **_node_shape(setup),
    }


def _tier_pools(trace: Trace, setup: ReplaySetup) -> list[dict[str, object]]:
    """The reserved commitment and the spot market, sized on the training period."""
    reserved, spot_max = tier_sizes(trace, setup)
    return [
        {
            "name": "reserved",
            "tier": "reserved",
            "price_per_gpu_hour": setup.reserved_price_per_gpu_hour,
            "min_nodes": reserved,
            "max_nodes": reserved,
            **_node_shape(setup),
        },
        {
            "name": "spot",
            "tier": "spot",
            "price_per_gpu_hour": setup.spot_price_per_gpu_hour,
            "max_nodes": spot_max,
            "spot_interruption_rate_per_hour": setup.spot_interruption_rate_per_hour,
            **_node_shape(setup),
        },
    ]


# --------------------------------------------------------------------------- the walk


def tiercast_run(
    trace: Trace,
    setup: ReplaySetup,
    config: Config,
    policy: str = "predictive",
    solver: Solver = "auto",
    progress: Callable[[str], None] | None = None,
    forecast_cache: ForecastCache | None = None,
) -> FleetRun:
    """Replay tiercast's planner walk-forward: every step plans from data before it.

    ``forecast_cache``: forecasts by refresh time, shared between runs on the same
    trace and setup (the on-demand and the tiered replay forecast the same data).

    The forecast is refreshed every ``reforecast_s`` of simulated time from the last
    ``lookback_s`` of history; each 5-minute step re-plans from that forecast and
    the demand observed up to the step before, against the fleet as it is then.
    """
    started = time.perf_counter()
    pools = list(config.pools)
    memory = _hold_window(config.pools, config.policy)
    margin = _training_margin(trace, setup, config, memory, forecast_cache)
    planner = _Planner.for_run(trace, config, solver, margin, memory)
    forecasts = _Forecasts.for_run(trace, setup, config.forecast, config.policy, forecast_cache)
    fleet = _Fleet.for_run(pools, setup, len(trace.index) - trace.test_start)
    headroom = margin.margin if margin is not None else config.policy.headroom_fraction
    inventory = _warm_start(trace, pools, memory, headroom, config.policy.cycle_s)
    past: list[PastCycle] = []
    for i in range(fleet.steps):
        t = trace.test_start + i
        now = trace.index[t]
        window, forecast = forecasts.at(t, now)
        plan = _leading_at(planner, trace, t).plan(
            now, forecast, window, inventory, past, fleet.node_starts(trace.index)
        )
        targets = {a.pool: a.target_nodes for a in plan.actions}
        # Warm start (_warm_start): the first request was in place before the test, so
        # it is no raise that the hold rules would keep for a window.
        moved_from = targets if i == 0 else inventory
        past = _remembered(past, now, plan, targets, moved_from, forecast.last_timestamp, memory)
        fleet.record(i, t, targets)
        inventory = dict(targets)
        _report_day(progress, policy, i, fleet.steps)
    return fleet.run(policy, margin, time.perf_counter() - started)


def _hold_window(pools: Sequence[PoolConfig], policy: PolicyConfig) -> pd.Timedelta:
    """Lead time + stabilization: how far back the planner's hysteresis and floor look."""
    return pd.Timedelta(seconds=policy.scale_down_stabilization_s) + pd.Timedelta(
        seconds=max(p.lead_time_s for p in pools)
    )


def _training_margin(
    trace: Trace,
    setup: ReplaySetup,
    config: Config,
    memory: pd.Timedelta,
    cache: ForecastCache | None = None,
) -> Margin | None:
    """The margin learnt once, from the training period as the policies see it, with the
    replay's forecaster walked forward over its last ``growth_backtest_s``.

    Only its source intervals that ended by the first test step: never the test period.
    """
    quantiles = _quantiles(config.forecast, config.policy)
    store = cache if cache is not None else {}

    def forecast(window: pd.Series, horizon: pd.Timedelta) -> SeriesForecast:
        # One horizon for every lead time, so that replays at several leads share them.
        key = (setup.forecast_method, "backtest", window.index[-1])
        if key not in store:
            store[key] = forecast_series(
                window.rename("demand"),
                max(horizon, pd.Timedelta(seconds=setup.reforecast_s) + BACKTEST_REACH),
                quantiles,
                setup.forecast_method,
            )
        return store[key]

    training = trace.signal.iloc[: trace.visible_end(trace.test_start) : trace.hold]
    leading = _leading_of(trace)
    backtest = walk_forward(
        setup.forecast_method,
        pd.Timedelta(seconds=setup.growth_backtest_s),
        pd.Timedelta(seconds=setup.growth_refresh_s or setup.reforecast_s),
        pd.Timedelta(seconds=setup.lookback_s),
        forecast=forecast,
    )
    return learn_margin(
        training,
        setup.lead_time_s,
        config.policy.unserved_budget,
        step=trace.hold * STEP,
        signal="demand",
        floor_window=memory,
        granule=signal_granule(config.fleet, "demand"),
        replica=signal_replica(config.workloads, "demand"),
        backtest=backtest,
        leading=None if leading is None else leading.loc[training.index],
        leading_signal=None if leading is None else str(leading.name),
    )


def _warm_start(
    trace: Trace,
    pools: list[PoolConfig],
    memory: pd.Timedelta,
    margin: float,
    cycle_s: int,
) -> dict[str, int]:
    """Nodes per pool before the first test step: what the planner would hold for the newest
    visible demand of lead + stabilization with the signal's margin (so that its first
    request is no raise)."""
    first = trace.test_start
    seen = [
        trace.visible_demand(t) for t in range(max(0, first - int(memory / STEP) + 1), first + 1)
    ]
    start = allocate(pools, math.ceil(max(seen) * (1 + margin) - 1e-9), cycle_s)
    return {p.name: start[p.name] for p in pools}


def _remembered(
    past: list[PastCycle],
    now: pd.Timestamp,
    plan: CapacityPlan,
    targets: dict[str, int],
    current: dict[str, int],
    observed_at: pd.Timestamp,
    memory: pd.Timedelta,
) -> list[PastCycle]:
    """The cycles the planner's hysteresis reads next (what the product reads from its run
    records): those within ``memory`` of now, and this one."""
    kept = [c for c in past if now - c.at < memory]
    kept.append(
        PastCycle(
            at=now,
            targets=dict(targets),
            need_gpus=dict(plan.risk["near_need_gpus"]),
            observed_gpus=dict(plan.risk["observed_gpus"]),
            current=dict(current),
            observed_at={"demand": observed_at},
        )
    )
    return kept


def _report_day(progress: Callable[[str], None] | None, policy: str, i: int, steps: int) -> None:
    """Tell ``progress`` when step ``i`` ends a simulated day."""
    if progress is not None and i % STEPS_PER_DAY == STEPS_PER_DAY - 1:
        progress(f"{policy}: day {(i + 1) // STEPS_PER_DAY} of {steps // STEPS_PER_DAY} replayed")


# --------------------------------------------------------------------------- its parts


@dataclass
class _Forecasts:
    """What the planner sees at each step: the visible history, and the forecast refreshed
    every ``reforecast_s`` of simulated time from its last ``lookback_s``."""

    trace: Trace
    horizon: pd.Timedelta
    quantiles: list[float]
    method: str
    lookback_steps: int
    every: pd.Timedelta
    cache: ForecastCache | None
    next_refresh: pd.Timestamp
    latest: SeriesForecast | None = None

    @classmethod
    def for_run(
        cls,
        trace: Trace,
        setup: ReplaySetup,
        forecast: ForecastConfig,
        policy: PolicyConfig,
        cache: ForecastCache | None,
    ) -> _Forecasts:
        # Long enough to plan from a forecast up to one refresh old (the same for every
        # lead time up to TEST_REACH, so that replays at several leads share them).
        lead = max(pd.Timedelta(seconds=setup.lead_time_s), TEST_REACH)
        horizon = pd.Timedelta(seconds=setup.reforecast_s + policy.horizon_s) + lead
        return cls(
            trace,
            horizon + 2 * STEP,
            _quantiles(forecast, policy),
            setup.forecast_method,
            int(pd.Timedelta(seconds=setup.lookback_s) / STEP),
            pd.Timedelta(seconds=setup.reforecast_s),
            cache,
            trace.index[trace.test_start],
        )

    def at(self, t: int, now: pd.Timestamp) -> tuple[pd.Series, SeriesForecast]:
        """The visible history at step ``t`` and the forecast the planner combines with it."""
        # Only the source intervals that ended by now are visible (scaler.replay.simulating).
        end = self.trace.visible_end(t)
        window = self.trace.signal.iloc[max(0, end - self.lookback_steps) : end]
        if now >= self.next_refresh or self.latest is None:
            self.latest = self._forecast(now, window)
            self.next_refresh = now + self.every
        return window, _observed_forecast(self.latest, window)

    def _forecast(self, now: pd.Timestamp, window: pd.Series) -> SeriesForecast:
        cache = self.cache if self.cache is not None else {}
        key = (self.method, "test", now)
        if key not in cache:
            cache[key] = forecast_series(
                window.rename("demand"), self.horizon, self.quantiles, self.method
            )
        return cache[key]


def _observed_forecast(fc: SeriesForecast, observed: pd.Series) -> SeriesForecast:
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


@dataclass(frozen=True)
class _Planner:
    """tiercast's planner as each replay step calls it, with what is fixed for the run."""

    config: Config
    solver: Solver
    margin: Margin | None
    floor_steps: int
    """Steps the observed floor's peak is taken over (lead + stabilization)."""
    stale_after: pd.Timedelta

    @classmethod
    def for_run(
        cls,
        trace: Trace,
        config: Config,
        solver: Solver,
        margin: Margin | None,
        memory: pd.Timedelta,
    ) -> _Planner:
        # A coarse source's newest value is one interval old when it becomes visible:
        # stale only once it is older than that plus the policy's limit.
        limit = pd.Timedelta(seconds=config.policy.staleness_limit_s) + trace.hold * STEP
        return cls(config, solver, margin, int(memory / STEP) + 1, limit)

    def plan(
        self,
        now: pd.Timestamp,
        forecast: SeriesForecast,
        window: pd.Series,
        inventory: dict[str, int],
        past: Sequence[PastCycle],
        node_starts: dict[str, list[pd.Timestamp]] | None = None,
    ) -> CapacityPlan:
        stale = {"demand"} if now - forecast.last_timestamp > self.stale_after else set()
        config = self.config
        inputs = CapacityInputs(
            config.fleet,
            config.policy,
            {"demand": forecast},
            inventory,
            now,
            stale,
            margins={"demand": self.margin},
            method=config.forecast.method,
            history={"demand": window.iloc[-self.floor_steps :]},
            past=past,
            node_starts=node_starts,
            kueue=config.kubernetes.kueue,
            currency=config.finance.currency,
        )
        return plan_capacity(inputs, solver=self.solver, with_signals=False)


@dataclass
class _Fleet:
    """The replayed pools: each pool's spot fleet (reclaims drawn from one seeded generator,
    none where the rate is 0) and what it requested and got at each test step."""

    steps: int
    lead_steps: int
    fleets: dict[str, SpotFleet]
    requested: dict[str, np.ndarray]
    usable: dict[str, np.ndarray]
    prices: dict[str, float]
    billing: dict[str, BillingConfig] = field(default_factory=dict)
    starts: dict[str, list[int]] = field(default_factory=dict)
    """Pools with ``billing``: the trace step each node was requested at (those of the
    warm start are of unknown start, left out), released soonest paid end first."""

    @classmethod
    def for_run(cls, pools: list[PoolConfig], setup: ReplaySetup, steps: int) -> _Fleet:
        rng = np.random.default_rng(setup.seed)
        return cls(
            steps,
            setup.lead_steps,
            {
                p.name: SpotFleet(
                    setup.lead_steps, 1 - (1 - p.spot_interruption_rate_per_hour) ** STEP_H, rng
                )
                for p in pools
            },
            {p.name: np.zeros(steps, dtype=np.int64) for p in pools},
            {p.name: np.zeros(steps, dtype=np.int64) for p in pools},
            {p.name: p.price_per_node_hour * STEP_H for p in pools},
            {p.name: p.billing for p in pools if p.billing is not None},
        )

    def record(self, i: int, t: int, targets: dict[str, int]) -> None:
        """Request ``targets`` at test step ``i`` (trace step ``t``)."""
        for name, fleet in self.fleets.items():
            if i == 0:
                # Warm start: the first request was in place and serving before the test.
                fleet.ready_at = [t - self.lead_steps] * targets[name]
            self.requested[name][i] = targets[name]
            self.usable[name][i] = fleet.step(t, targets[name])
        for name, billing in self.billing.items():
            held = self.starts.setdefault(name, [])
            before = int(self.requested[name][i - 1]) if i else targets[name]
            if targets[name] > before:
                held += [t] * (targets[name] - before)
            elif targets[name] < before:
                # As the planner releases them: those whose paid period ends first.
                step_s = STEP_H * 3600

                def wasted(
                    s: int, billing: BillingConfig = billing, step_s: float = step_s
                ) -> float:
                    return billed_seconds((t - s) * step_s, billing) - (t - s) * step_s

                held.sort(key=wasted)
                del held[: max(0, len(held) - targets[name])]

    def node_starts(self, index: pd.DatetimeIndex) -> dict[str, list[pd.Timestamp]]:
        """When the nodes of pools with ``billing`` started, for the planner."""
        return {name: [index[s] for s in held] for name, held in self.starts.items()}

    def run(self, policy: str, margin: Margin | None, seconds: float) -> FleetRun:
        return FleetRun(
            policy,
            self.requested,
            self.usable,
            self.prices,
            reclaimed=sum(f.reclaimed for f in self.fleets.values()),
            seconds=seconds,
            plans=self.steps,
            margin=margin,
            billing=self.billing,
            step_s=STEP_H * 3600,
        )


# --------------------------------------------------------------------------- a leading signal


@dataclass(frozen=True)
class LeadingTrace(Trace):
    """A trace with the series of its leading signal on the same 5-minute grid."""

    leading: pd.Series | None = None
    """The leading signal on the trace's grid (NaN where it has no value at or just before a
    step); its name is the leading signal's."""


def with_leading(trace: Trace, leading: pd.Series, name: str = "leading") -> LeadingTrace:
    """``trace`` with ``leading`` put on its grid: at each step the leading series' last value
    at or before it, at most one source interval old (never a later one)."""
    on_grid = aligned(leading, trace.index, trace.hold * STEP)
    fields = {f: getattr(trace, f) for f in trace.__dataclass_fields__}
    fields.pop("leading", None)
    return LeadingTrace(**fields, leading=pd.Series(on_grid, index=trace.index, name=name))


def _leading_of(trace: Trace) -> pd.Series | None:
    return getattr(trace, "leading", None)


def _leading_at(planner: _Planner, trace: Trace, t: int) -> _Planner:
    """``planner`` with its leading rule's share as the leading series stands at step ``t``
    (only the source intervals that ended by then); as it is without a leading rule."""
    margin, leading = planner.margin, _leading_of(trace)
    if margin is None or margin.leading is None or leading is None:
        return planner
    end = trace.visible_end(t)
    keep = (margin.leading.arrival.window_steps + 2) * trace.hold
    # The steps of the training grid (one per source interval), ending at the newest.
    pos = np.arange(end - 1, max(-1, end - 1 - keep), -trace.hold)[::-1]
    y = trace.signal.to_numpy(dtype=float)[pos]
    x = leading.to_numpy(dtype=float)[pos]
    return replace(planner, margin=replace(margin, leading=margin.leading.at(y, x)))
