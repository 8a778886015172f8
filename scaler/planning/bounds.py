"""The bounds on one GPU model's tier problem this cycle, beyond its need.

What earlier cycles asked for (``past``) bounds this one (:mod:`scaler.planning.tiers`,
"No flapping"): a pool raised within lead time + stabilization is not released before
the window has passed, one that released nodes within it grows only as far as the
observed floor forces, nodes still booting keep what bridges them, and where nothing
has been observed since the last cycle nothing is released. Reserved pools hold their
commitment, and the budget caps growth but never forces a scale-down.
:func:`model_problem` puts these bounds and the need into a :class:`ModelProblem`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from forecaster.forecasting import SeriesForecast
from scaler.catalog.gpus import gpu_model
from scaler.config import PoolConfig, WorkloadConfig
from scaler.planning.coverage import allocate, covered_gpus
from scaler.planning.margins import Margin
from scaler.planning.reasons import budget_note
from scaler.planning.solver import ModelProblem
from scaler.plans import PastCycle, naive_utc
from scaler.wording import Reason


@dataclass(frozen=True)
class PlanningCycle:
    """What every GPU model's plan of one cycle shares."""

    now: pd.Timestamp
    grid: pd.DatetimeIndex
    """The planning grid: ``now`` to ``now + horizon`` at the cycle step."""
    current: Mapping[str, int]
    """Nodes each pool is planned from (its inventory, at least its ``min_nodes``)."""
    past: Sequence[PastCycle]
    """What earlier cycles asked for."""
    quantile: float
    cycle_s: int
    stabilization: pd.Timedelta
    """``policy.scale_down_stabilization_s``."""
    max_step: int
    """``policy.max_step_nodes``."""
    budget_per_hour: float | None
    fleet: Sequence[PoolConfig]
    """Every pool (what the other GPU models spend counts against the budget)."""

    @property
    def cycle(self) -> pd.Timedelta:
        return pd.Timedelta(seconds=self.cycle_s)


def model_problem(
    pools: list[PoolConfig],
    need: np.ndarray,
    spares: dict[str, int],
    cycle: PlanningCycle,
    hold: pd.Timedelta,
    floor: float,
    held: bool,
    no_news: bool,
) -> tuple[ModelProblem, Reason | None]:
    """The problem of the GPU model whose pools are ``pools``, and a note where the
    budget is below what they cannot shed.

    ``hold``: the model's lead time + stabilization; ``floor``: its observed floor;
    ``held``: fed by stale or missing data; ``no_news``: nothing observed since the
    last cycle moves its need.
    """
    current = cycle.current
    moves = {
        p.name: _recent_moves(cycle.past, p.name, current[p.name], cycle.now, hold) for p in pools
    }
    cap_now: dict[str, int] = {}
    released = [p for p in pools if moves[p.name][1]]
    if released and not held:
        # Released within lead time + stabilization: requested again only as far
        # as the observed floor (demand already there, with headroom) forces it.
        covered_now = sum(covered_gpus(p, current[p.name], spares.get(p.name, 0)) for p in pools)
        forced = allocate(pools, floor, cycle.cycle_s, spares)
        cap_now = {
            p.name: max(current[p.name], forced[p.name] if floor > covered_now else 0)
            for p in released
        }
    # Raised within lead time + stabilization: not released before the window
    # has passed (the hysteresis across cycles, from the past cycles' requests).
    floor_now = {p.name: current[p.name] for p in pools if moves[p.name][0]}
    # Nothing observed since the last cycle (a coarse source between its values):
    # the forecast's shape moving on alone releases nothing; the next value decides.
    # Where no signal of the model has a shape, nothing moves between values anyway.
    if no_news:
        floor_now.update({p.name: current[p.name] for p in pools})
    prob = ModelProblem(
        pools=pools,
        need=need,
        current={p.name: current[p.name] for p in pools},
        held=held,
        max_step=cycle.max_step,
        budget=_pool_budget(cycle.budget_per_hour, cycle.fleet, pools, current),
        cycle_s=cycle.cycle_s,
        spares=spares,
        cap_now=cap_now,
        # Reserved capacity is a commitment: held where it is, never scaled as elastic.
        fixed={p.name: current[p.name] for p in pools if p.tier == "reserved"},
        floor_now=floor_now,
        # Nodes raised within a lead time are still booting: they serve only once it has
        # passed, so whatever bridges them until then is not released before.
        booting=_booting(cycle.past, pools, current, cycle.now, cycle.cycle_s),
    )
    return _within_budget(prob, gpu_model(pools[0].gpu_model).name, cycle.budget_per_hour)


def _within_budget(
    prob: ModelProblem, model: str, budget_per_hour: float | None
) -> tuple[ModelProblem, Reason | None]:
    """``prob`` with its budget raised to what its pools cannot shed this cycle, and a
    note saying so; never force a scale-down for money: the cap stops growth, it does
    not evict."""
    if prob.budget is None or budget_per_hour is None:
        return prob, None
    least = sum(
        prob.floor(
            p,
            0,
            max(
                p.min_nodes,
                prob.current[p.name] - prob.max_step,
                prob.current[p.name]
                if prob.held or p.name in prob.floor_now or p.name in prob.fixed
                else 0,
            ),
        )
        * p.price_per_node_hour
        for p in prob.pools
    )
    if least <= prob.budget + 1e-9:
        return prob, None
    # What is held now, less what a pool above its max_nodes must shed.
    budget = max(
        least,
        sum(
            min(prob.current[p.name], prob.ceiling(p, 0)) * p.price_per_node_hour
            for p in prob.pools
        ),
    )
    return replace(prob, budget=budget), budget_note(model, budget_per_hour, least)


def quiet_models(
    workloads: Iterable[WorkloadConfig],
    forecasts: Mapping[str, SeriesForecast],
    learned: Mapping[str, Margin],
    past: Sequence[PastCycle],
    now: pd.Timestamp,
) -> set[str]:
    """GPU models with nothing observed since the last cycle where a forecast shape
    moves the near-term need between observations (those without are anchored flat)."""
    # Per GPU model, its signals, and whether any has a forecast shape.
    fed_by: dict[str, set[str]] = {}
    shaped_models: set[str] = set()
    for w in workloads:
        if w.signal in forecasts:
            key = gpu_model(w.gpu_model).name
            fed_by.setdefault(key, set()).add(w.signal)
            m = learned.get(w.signal)
            if m is None or m.forecast_shape:
                shaped_models.add(key)
    return {
        key for key in shaped_models if _nothing_new(past, now, forecasts, fed_by.get(key, set()))
    }


def _booting(
    past: Sequence[PastCycle],
    pools: Sequence[PoolConfig],
    current: Mapping[str, int],
    now: pd.Timestamp,
    cycle_s: int,
) -> dict[str, tuple[int, int]]:
    """Per pool, the nodes earlier cycles raised within its lead time, and the grid step
    from which the last of them serves (never more than it holds now)."""
    out: dict[str, tuple[int, int]] = {}
    for p in pools:
        lead = pd.Timedelta(seconds=p.lead_time_s)
        raised, ready = 0, now
        for c in past:
            at = pd.Timestamp(c.at)
            start = c.current.get(p.name)
            if start is None or p.name not in c.targets or not (now - lead < at <= now):
                continue
            # Only what the inventory shows was applied (a skipped action raised nothing).
            up = min(c.targets[p.name], current[p.name]) - start
            if up > 0:
                raised += up
                ready = max(ready, at + lead)
        raised = min(raised, current[p.name])
        steps = math.ceil((ready - now) / pd.Timedelta(seconds=cycle_s) - 1e-9)
        if raised > 0 and steps > 0:
            out[p.name] = (raised, steps)
    return out


def _nothing_new(
    past: Sequence[PastCycle],
    now: pd.Timestamp,
    forecasts: Mapping[str, SeriesForecast],
    signals: set[str],
) -> bool:
    """Whether no signal in ``signals`` has an observation newer than the last cycle saw."""
    earlier = [c for c in past if pd.Timestamp(c.at) < now]
    if not signals or not earlier:
        return False
    last = max(earlier, key=lambda c: pd.Timestamp(c.at))
    if not all(s in last.observed_at for s in signals):
        return False
    return all(
        naive_utc(pd.Timestamp(forecasts[s].last_timestamp)) <= naive_utc(last.observed_at[s])
        for s in signals
    )


def _recent_moves(
    past: Sequence[PastCycle], pool: str, current: int, now: pd.Timestamp, window: pd.Timedelta
) -> tuple[bool, bool]:
    """``(raised, released)``: whether ``pool``'s request rose or fell within ``window``.

    A move is a cycle's target against the nodes it started from (``PastCycle.current``;
    where a record lacks it, the previous cycle's target), at that cycle's time.
    """
    seq = sorted((c for c in past if pool in c.targets and c.at < now), key=lambda c: c.at)
    raised = released = False
    before: int | None = None
    for c in seq:
        start = c.current.get(pool, before)
        if start is not None and now - pd.Timestamp(c.at) < window:
            raised |= c.targets[pool] > start
            released |= c.targets[pool] < start
        before = c.targets[pool]
    return raised, released


def _pool_budget(
    budget: float | None,
    fleet: Iterable[PoolConfig],
    pools: list[PoolConfig],
    current: Mapping[str, int],
) -> float | None:
    """Spend per hour left for ``pools`` under the fleet budget, other pools held at current."""
    if budget is None:
        return None
    names = {p.name for p in pools}
    others = sum(current[p.name] * p.price_per_node_hour for p in fleet if p.name not in names)
    return budget - others
