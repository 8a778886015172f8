"""A user's own fleet in the replay: ``tiercast simulate --config FILE``.

The published protocol replays one fixed fleet (8-GPU nodes, $4/GPU-h on-demand, a
10-minute lead time; :class:`~scaler.replay.protocol.ReplaySetup`). This module turns a
tiercast config file into the fleet the replay runs instead: the pools of one signal's GPU
model with their own node size, prices, tiers, lead times and bounds, the user's policy
and forecast, and the constants the baselines read, taken from those pools
(:func:`load_user_fleet`, :class:`UserFleet`).

What the replay cannot represent is refused with one line rather than approximated: a
signal whose workloads run on several GPU models or on MIG slices, and pools of one model
with different node sizes (the replay counts demand in nodes of one size).

The replay boots every pool for the same number of steps, ``ReplaySetup.lead_steps``: the
longest lead time of the fleet (the planner still plans each pool with its own).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forecaster.errors import BadInputError
from scaler.catalog.gpus import gpu_model
from scaler.config import (
    Config,
    ForecastConfig,
    PolicyConfig,
    PoolConfig,
    SignalConfig,
    WorkloadConfig,
    load_config,
    parse_config,
)
from scaler.replay.protocol import STEP, ReplaySetup

REPLAY_SIGNAL = "demand"
"""Name of the one signal of a replay fleet: the trace replayed."""

DEFAULT_LEAD_TIME_S = 600
"""Seconds a pool's lead time counts for where the config gives no number of seconds
(``lead_time_s: auto``) and the pool has no ``lead_time_fallback_s``: PoolConfig's default."""


@dataclass(frozen=True)
class UserFleet:
    """The fleet of a config file, ready to replay."""

    config: Config
    """Replay-ready config: one signal, ``demand`` (5-minute steps), the chosen workloads
    driven by it, the pools of their GPU model (prices, tiers, lead times, bounds and spot
    rates as in the file; provider ``recording``; ``current_nodes`` dropped, save that a
    reserved pool that gives it is held at its commitment), the user's policy with
    ``cycle_s`` forced to 300 (the replay plans every 5-minute step, whatever the cycle of
    the deployment) and the user's forecast and finance sections."""
    setup: ReplaySetup
    """The replay's constants from the fleet: node size, the cheapest on-demand price
    (what the baselines' single pool costs), the longest lead time, the policy's
    stabilization, unserved budget, quantile, headroom and horizon, the forecast method,
    the reserved and spot prices and reclaim rate where the fleet has such pools; the
    rest the published protocol's."""
    units_per_gpu: float
    """Signal units one GPU serves: demand in GPUs is ``ceil(signal / this)``."""
    tiers: bool
    """Whether the fleet has a reserved or a spot pool."""
    signal: str
    """Name of the chosen signal in the file (a long-format history's series, usually)."""

    def describe(self) -> str:
        """One line for the replay's header: the pools, node size, prices and lead times."""
        pools = self.config.pools
        node = f"{pools[0].gpus_per_node}-GPU {gpu_model(pools[0].gpu_model).name} nodes"
        currency = self.config.finance.currency
        parts = []
        for p in pools:
            price = (
                f"{p.price_per_gpu_hour:g} {currency}/GPU-h"
                if currency
                else f"${p.price_per_gpu_hour:g}/GPU-h"
            )
            reclaims = (
                f", {100 * p.spot_interruption_rate_per_hour:g}%/h reclaims"
                if p.spot_interruption_rate_per_hour > 0
                else ""
            )
            parts.append(
                f"{p.name} ({p.tier}, {price}{reclaims}, lead {_duration(p.lead_time_s)}, "
                f"{p.min_nodes}-{p.max_nodes} nodes)"
            )
        count = f"{len(pools)} pool{'s' if len(pools) != 1 else ''}"
        return (
            f"signal {self.signal!r}: {count} of {node}: {', '.join(parts)}; "
            f"replay lead {_duration(self.setup.lead_time_s)}"
        )


def load_user_fleet(path: str | Path, signal: str | None = None) -> UserFleet:
    """The replay fleet of the config file at ``path``, for ``signal`` (None: the only
    signal that drives a workload).

    Raises :class:`~forecaster.errors.BadInputError` (one line) for an invalid file, an
    unknown or ambiguous signal, and a fleet the replay cannot represent: workloads on
    several GPU models or on MIG slices, pools of different node sizes.
    """
    source = str(path)
    user = load_config(path)
    chosen = _chosen_signal(user.signals, user.workloads, signal, source)
    workloads = [w for w in user.workloads if w.signal == chosen]
    model = _one_gpu_model(workloads, chosen, source)
    pools = user.pools_for(model)
    _one_node_size(pools, model, source)
    config = _replay_config(user, chosen, workloads, pools, source)
    return UserFleet(
        config=config,
        setup=_setup(config.pools, config.policy, config.forecast),
        units_per_gpu=1.0 / sum(w.gpus_per_replica / w.units_per_replica for w in workloads),
        tiers=any(p.tier in ("reserved", "spot") for p in config.pools),
        signal=chosen,
    )


def lead_time_of(pool: Any) -> int:
    """A pool's lead time in seconds: ``lead_time_s`` where it is a number of seconds;
    otherwise (``auto``) its ``lead_time_fallback_s`` where the pool has one, else 600."""
    value: object = pool.lead_time_s
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    fallback: object = getattr(pool, "lead_time_fallback_s", DEFAULT_LEAD_TIME_S)
    if isinstance(fallback, int | float) and not isinstance(fallback, bool) and fallback >= 0:
        return int(fallback)
    return DEFAULT_LEAD_TIME_S


# --------------------------------------------------------------------------- choosing


def _chosen_signal(
    signals: Sequence[SignalConfig],
    workloads: Sequence[WorkloadConfig],
    signal: str | None,
    source: str,
) -> str:
    """``signal`` where the file declares it and it drives a workload, else the only such."""
    driving = list(dict.fromkeys(w.signal for w in workloads))
    declared = [s.name for s in signals]
    if signal is not None:
        if signal not in declared:
            raise BadInputError(
                f"{source}: no signal {signal!r}; the file declares {', '.join(declared)}"
            )
        if signal not in driving:
            raise BadInputError(
                f"{source}: signal {signal!r} drives no workload; signals with workloads: "
                f"{', '.join(driving)}"
            )
        return signal
    if len(driving) == 1:
        return driving[0]
    raise BadInputError(
        f"{source}: {len(driving)} signals drive workloads ({', '.join(driving)}); "
        "name the one to replay"
    )


def _one_gpu_model(workloads: list[WorkloadConfig], signal: str, source: str) -> str:
    """The GPU model of the signal's workloads; refused on MIG or on several models."""
    mig = [w.name for w in workloads if w.mig_profile is not None]
    if mig:
        raise BadInputError(
            f"{source}: signal {signal!r} drives MIG workloads ({', '.join(mig)}); the replay "
            "counts whole GPUs only"
        )
    by_model: dict[str, list[str]] = {}
    for w in workloads:
        by_model.setdefault(gpu_model(w.gpu_model).name, []).append(w.name)
    if len(by_model) > 1:
        listed = "; ".join(f"{m}: {', '.join(names)}" for m, names in by_model.items())
        raise BadInputError(
            f"{source}: signal {signal!r} drives workloads on several GPU models ({listed}); "
            "replay one GPU model at a time"
        )
    return next(iter(by_model))


def _one_node_size(pools: list[PoolConfig], model: str, source: str) -> None:
    """Refuse pools of ``model`` with different ``gpus_per_node``."""
    sizes = {p.gpus_per_node for p in pools}
    if len(sizes) > 1:
        listed = ", ".join(f"{p.name} {p.gpus_per_node}" for p in pools)
        raise BadInputError(
            f"{source}: the {model} pools have different node sizes (GPUs per node: {listed}); "
            "replay one pool size at a time"
        )


# --------------------------------------------------------------------------- building


def _replay_config(
    user: Config,
    signal: str,
    workloads: list[WorkloadConfig],
    pools: list[PoolConfig],
    source: str,
) -> Config:
    """The replay-ready config of the chosen signal (see :attr:`UserFleet.config`)."""
    data = {
        "signals": [
            {
                "name": REPLAY_SIGNAL,
                "unit": user.signal(signal).unit,
                "step_s": int(STEP.total_seconds()),
            }
        ],
        "workloads": [_workload(w) for w in workloads],
        "pools": [_pool(p) for p in pools],
        # The replay plans every 5-minute step: the policy's cycle is the replay's.
        "policy": {**user.policy.model_dump(), "cycle_s": int(STEP.total_seconds())},
        "forecast": user.forecast.model_dump(),
        "finance": user.finance.model_dump(),
        # The user's own GPU models, so that their pools resolve in the replay too.
        "gpu_models": [g.model_dump() for g in user.gpu_models],
    }
    return parse_config(data, source=f"replay fleet of {source}")


def _workload(w: WorkloadConfig) -> dict[str, object]:
    return {
        "name": w.name,
        "signal": REPLAY_SIGNAL,
        "gpu_model": w.gpu_model,
        "units_per_replica": w.units_per_replica,
        "gpus_per_replica": w.gpus_per_replica,
        "min_replicas": w.min_replicas,
    }


def _pool(p: PoolConfig) -> dict[str, object]:
    """A pool as the replay runs it: its shape, price, tier, lead time, bounds and reclaim
    rate; the provider recording; ``current_nodes`` dropped (the replay starts warm).

    The planner never scales a reserved pool: it holds what runs. Where the file says
    what runs (``current_nodes``), that commitment is the pool's size in the replay
    (``min_nodes`` = ``max_nodes`` = :attr:`PoolConfig.committed_nodes`); otherwise the
    replay's warm start sizes it within its bounds and holds it.
    """
    min_nodes, max_nodes = p.min_nodes, p.max_nodes
    if p.tier == "reserved" and p.current_nodes is not None:
        min_nodes = max_nodes = p.committed_nodes
    return {
        "name": p.name,
        "tier": p.tier,
        "gpu_model": p.gpu_model,
        "gpus_per_node": p.gpus_per_node,
        "price_per_gpu_hour": p.price_per_gpu_hour,
        "lead_time_s": lead_time_of(p),
        "min_nodes": min_nodes,
        "max_nodes": max_nodes,
        "spot_interruption_rate_per_hour": p.spot_interruption_rate_per_hour,
    }


def _setup(
    fleet: Sequence[PoolConfig], policy: PolicyConfig, forecast: ForecastConfig
) -> ReplaySetup:
    """The baselines' and the walk's constants from the fleet's pools, the policy and the
    forecast settings (see :attr:`UserFleet.setup`)."""
    pools = list(fleet)
    by_tier = {tier: [p for p in pools if p.tier == tier] for tier in ("reserved", "spot")}
    default = ReplaySetup()
    spot = min(by_tier["spot"], key=_price, default=None)
    reserved = min(by_tier["reserved"], key=_price, default=None)
    return ReplaySetup(
        gpus_per_node=pools[0].gpus_per_node,
        price_per_gpu_hour=_price(_baseline_pool(pools)),
        lead_time_s=max(p.lead_time_s for p in pools),
        forecast_method=forecast.method,
        quantile=policy.quantile,
        headroom_fraction=policy.headroom_fraction,
        stabilization_s=policy.scale_down_stabilization_s,
        unserved_budget=policy.unserved_budget,
        horizon_s=policy.horizon_s,
        growth_backtest_s=policy.growth_backtest_s,
        growth_refresh_s=policy.growth_refresh_s,
        reserved_price_per_gpu_hour=(
            _price(reserved) if reserved is not None else default.reserved_price_per_gpu_hour
        ),
        spot_price_per_gpu_hour=_price(spot)
        if spot is not None
        else default.spot_price_per_gpu_hour,
        spot_interruption_rate_per_hour=(
            spot.spot_interruption_rate_per_hour
            if spot is not None
            else default.spot_interruption_rate_per_hour
        ),
    )


def _baseline_pool(pools: list[PoolConfig]) -> PoolConfig:
    """The pool whose price the single-pool baselines pay: the cheapest on-demand pool, else
    the cheapest pool not reserved, else the cheapest pool."""
    on_demand = [p for p in pools if p.tier == "on-demand"]
    elastic = [p for p in pools if p.tier != "reserved"]
    return min(on_demand or elastic or pools, key=_price)


def _price(pool: PoolConfig) -> float:
    return pool.price_per_gpu_hour


def _duration(seconds: int) -> str:
    """``25 min``, ``1 h 30 min`` or ``90 s``."""
    if seconds % 60:
        return f"{seconds} s"
    hours, minutes = divmod(seconds // 60, 60)
    if hours and minutes:
        return f"{hours} h {minutes} min"
    return f"{hours} h" if hours else f"{minutes} min"
