"""The tier planner: forecasts and inventory in, a :class:`CapacityPlan` out.

Pure: it takes ``now`` as an argument and touches nothing outside. For each GPU
model it chooses the nodes requested per pool at every step of the planning grid
(``now`` to ``now + horizon`` at the cycle step) so that usable capacity covers
the *need* at the least cost. Only the first step is acted on; the rest is the
projection the plan reports.

Need, per grid step j (GPUs of one model):

* beyond the reach of this cycle's action (``j > lead``): the policy quantile of
  forecast demand in step j (:mod:`scaler.planning.demand`); this is the projection;
* within reach (``j <= lead``), the near-term rule learnt for each signal on its
  own history (:mod:`scaler.planning.margins`) replaces it: the newest observation
  times the forecast's *growth quantile* (:mod:`scaler.planning.growth`: the
  forecast's predicted growth over the lead time, times the quantile of its own
  errors measured by a walk-forward backtest of the forecaster at that lead, by time
  of day), with the signal's margin, where that rule served as well as reacting for
  less on the history; else the newest observation times its margin (held over the
  window, as reacting does); without either (too little history), the *anchored*
  demand ``last * (1 + headroom_fraction) * median(t_j) / median(t_last)``. Never
  less than the *observed floor*, the largest demand of lead time + stabilization.
  A forecast that is wrong about the level therefore degrades to reactive scaling,
  not to an outage, and a forecast ramp (a morning rise) is provisioned a lead time
  before it arrives;
* a margin is headroom on the replicas the signal needs (``ceil(replicas x (1 +
  margin))``, :func:`scaler.planning.demand.gpus_for`), as the reactive rule adds it
  to the GPUs in use and as it was replayed; the reasons name where each near-term
  number comes from ("forecast growth q0.9 (auto)", "newest observation x margin")
  and the evidence for it;
* from reach to ``now + lead + scale_down_stabilization`` the same near-term level
  replaces the quantile too (what the hold rules below keep);
* a signal on the rule without the forecast scales as it was replayed: its observed
  floor is the largest newest value of lead time + stabilization with the margin;
  the cycle records only its newest value with the margin, so the records do not
  hold that peak for a second window;
* within reach, at least the *keep level*: the largest anchored demand (without
  headroom) over ``[now, now + lead + scale_down_stabilization)``. Capacity that
  will be needed again within that window is not released, since it could not
  come back in time.

No flapping, across cycles (``past``, the earlier cycles' requests and needs, from
the run records or the replay): within ``W = lead + scale_down_stabilization``

* the need up to ``now + W`` is at least the largest need of this plan over that
  window and of every earlier cycle within it (never above what is held now):
  capacity is released only once every cycle of the window agrees;
* a pool raised within W is not lowered, and the first step of the projection
  never releases nodes that a later step requests again to serve within W (not
  those requested for the quantile beyond W, nor the steps of the ramp towards it
  that ``max_step_nodes`` imposes: a forecast level that observations contradict
  would hold them cycle after cycle);
* where nothing has been observed since the last cycle (a coarse source between
  its values) and the near-term need moves with a forecast's shape, nothing is
  released: the shape moving on is no evidence that demand fell, and the next
  value, which would often ask for the nodes again, decides;
* nodes that a cycle within the lead time raised still boot: they serve only once
  it has passed, so what bridges them meanwhile (on-demand while spot boots) is not
  released by the next cycle;
* a pool that released nodes within W is raised only as far as the observed floor
  (demand already there, with its margin) forces it, never on a forecast alone.

Stale or missing data holds, both ways: a GPU model fed by such a signal keeps
its pools (no scale-down) and grows only where the newest observations already
need more than it holds; the forecast is not used, and the plan's risk figures
measure against that same need. Suspect data (``suspect``, :mod:`forecaster.suspect`:
spikes, zeros unlike the past, label sets that stopped reporting) holds the same way,
on the observations before it; so does a need over a thousand times the most a GPU
model's pools can hold, which then grows on nothing (:func:`implausible_models`).

``CapacityPlan.demand_gpus`` reports this need, so the plan shows what it covers.

Usable capacity obeys the lead time: a node requested at step k serves from
``k + lead`` if it stays requested, and a released node stops serving at once.
A spot pool that holds any node covers the need with *spare* nodes on top
(:func:`scaler.planning.coverage.spare_nodes`): the policy quantile of a binomial over its nodes, each
reclaimed with probability ``rate * (lead + cycle) / 1h`` (seen at the next cycle
at the latest, then a replacement boots for the lead time), and at least one
(N+1), so the reclaims of a replacement window leave the need covered. Where
spot is capped or a spare does not pay, on-demand takes the need. The plan's
expected cost and risk use the expected loss (``spot_loss_fraction``).

The problem is a small mixed-integer program solved with :func:`scipy.optimize.milp`
(HiGHS): integer nodes per pool and step, continuous usable nodes, and a
shortfall variable per step priced far above any GPU, so a need that cannot be
met (max nodes, max step, budget) gives a plan that says so instead of failing.
Constraints: min/max nodes per pool, at most ``max_step_nodes`` change per pool
and cycle, total spend per hour under ``budget_per_hour``, no scale-down of a pool
fed by stale or missing data. The search is bounded by a count of
branch-and-bound nodes, not the clock, so a plan does not depend on how loaded the
machine is. When the solver is unavailable, fails or finds no schedule within that
count, a greedy allocator (reserved first, then cheapest effective price, then the
same bounds) produces the plan and a note says so.

A pool found above its ``max_nodes`` (a live inventory; a file inventory there is
refused at load) steps down by at most ``max_step_nodes`` a cycle, like any change.

:func:`plan_capacity` reads as these steps, per GPU model (:func:`plan_model`): the
need (:mod:`scaler.planning.need`), the problem with this cycle's bounds on its pools
(:mod:`scaler.planning.bounds`), the solve (:mod:`scaler.planning.solver`), the first
step kept where the projection needs it again, and the bounds that bind and the
shortfall named (:mod:`scaler.planning.binding`); then each pool's action with its
reason (:mod:`scaler.planning.reasons`) and the plan's cost and risk
(:mod:`scaler.planning.cost_and_risk`). What a pool's nodes count for (spot's loss and
spares, the cheapest allocation) is :mod:`scaler.planning.coverage`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from forecaster.estimators import quantile_column
from forecaster.forecasting import SeriesForecast
from scaler.catalog.gpus import gpu_model
from scaler.config import (
    Fleet,
    KueueQuotaConfig,
    PolicyConfig,
    PoolConfig,
    SignalConfig,
    WorkloadConfig,
)
from scaler.planning.billing import NodeStarts, keep_paid_nodes
from scaler.planning.binding import (
    Shortfall,
    first_step_bounds,
    late_shortfall,
    name_shortfall_bounds,
)
from scaler.planning.bounds import PlanningCycle, model_problem, quiet_models
from scaler.planning.cost_and_risk import expected_unserved, plan_cost
from scaler.planning.coverage import covered_gpus, lead_steps, spare_nodes
from scaler.planning.deferrable import plan_deferrable
from scaler.planning.demand import planning_grid
from scaler.planning.growth import Forecaster, bounded_refresh, walk_forward
from scaler.planning.leading import leading_signal_of
from scaler.planning.margins import Margin, learn_margin
from scaler.planning.need import (
    DemandLevels,
    PoolLevels,
    demand_levels,
    held_models,
    hold_across_cycles,
    implausible_models,
    near_term_need,
    pool_levels,
    reach_of,
)
from scaler.planning.pooling import sharing_report
from scaler.planning.power import derated_need, name_power_bounds, power_capped
from scaler.planning.reasons import (
    decide,
    held_notes,
    inventory_notes,
    model_signals,
    shortfall_note,
)
from scaler.planning.solver import ModelProblem, ModelSolution, Solver, solve
from scaler.planning.starvation import with_floor
from scaler.plans import Action, CapacityPlan, PastCycle, PoolPlan, SignalSummary, iso
from scaler.wording import Reason


def signal_granule(fleet: Fleet, signal: str) -> float:
    """Signal units one node serves: the step in which capacity for ``signal`` comes.

    0 (no rounding assumed) where the signal shares its GPU model with another
    signal's workloads, drives a MIG workload, or has no pool: there the nodes are
    not the signal's alone, so their rounding is no margin it can count on.
    """
    driven = [w for w in fleet.workloads if w.signal == signal]
    if not driven or any(w.mig_profile is not None for w in driven):
        return 0.0
    models = {gpu_model(w.gpu_model).name for w in driven}
    others = [
        w for w in fleet.workloads if w.signal != signal and gpu_model(w.gpu_model).name in models
    ]
    if others or len(models) != 1:
        return 0.0
    pools = fleet.pools_for(next(iter(models)))
    if not pools:
        return 0.0
    gpus_per_unit = sum(w.gpus_per_replica / w.units_per_replica for w in driven)
    return min(p.gpus_per_node for p in pools) / gpus_per_unit


def signal_replica(workloads: Iterable[WorkloadConfig], signal: str) -> float:
    """Signal units of one replica of the workload ``signal`` drives (0 where several do).

    The margin is headroom on replicas (:func:`scaler.planning.demand.gpus_for`), so the
    walk-forward replay rounds the signal up to replicas before adding it.
    """
    driven = [w for w in workloads if w.signal == signal]
    return float(driven[0].units_per_replica) if len(driven) == 1 else 0.0


def learn_margins(
    fleet: Fleet,
    policy: PolicyConfig,
    method: str,
    forecasts: Mapping[str, SeriesForecast],
    history: Mapping[str, pd.Series],
    backtests: Callable[[str], Forecaster] | None = None,
) -> dict[str, Margin | None]:
    """Each forecast signal's margin, learnt from its history up to its newest observation.

    ``method``: the forecast method the growth backtest fits at each origin (the config's
    ``forecast.method``). ``backtests``: the forecaster the growth backtest uses for a
    signal instead; the service passes one that keeps those forecasts between cycles
    (:mod:`scaler.service.growth_cache`). Its forecasts are made at whole multiples of
    ``policy.growth_refresh_s``, so consecutive cycles share them.
    """
    lead = max((p.lead_time_s for p in fleet.pools), default=0)
    floor = pd.Timedelta(seconds=lead + policy.scale_down_stabilization_s)
    out: dict[str, Margin | None] = {}
    for name, fc in forecasts.items():
        y = history.get(name)
        if y is None:
            continue
        span = pd.Timedelta(seconds=policy.growth_backtest_s)
        backtest = walk_forward(
            method,
            span,
            # At most MAX_GROWTH_REFRESHES forecasts per signal, whatever the settings.
            bounded_refresh(span, pd.Timedelta(seconds=policy.growth_refresh_s)),
            lookback=pd.Timedelta(days=28),
            forecast=backtests(name) if backtests is not None else None,
            align=True,
        )
        seen = y[y.index <= fc.last_timestamp]
        leading = leading_signal_of(fleet.workloads, name)
        lead_seen = history.get(leading) if leading is not None else None
        out[name] = learn_margin(
            seen,
            lead,
            policy.unserved_budget,
            step=fc.step if fc.step > pd.Timedelta(0) else None,
            signal=name,
            floor_window=floor,
            granule=signal_granule(fleet, name),
            replica=signal_replica(fleet.workloads, name),
            backtest=backtest,
            # A workload's leading signal, up to the same newest observation (never after).
            leading=None if lead_seen is None else lead_seen[lead_seen.index <= fc.last_timestamp],
            leading_signal=leading,
        )
    return out


@dataclass(frozen=True)
class CapacityInputs:
    """What one tier plan is made from: the fleet and policy it plans for, what the cycle
    saw, and the settings of the deferrable work's placement.

    Built once at the cycle's edge (the service's cycle, the replay, the tests) from the
    config's :attr:`~scaler.config.Config.fleet` (with the lead times and footprints the
    cycle resolved), ``policy``, ``forecast.method``, ``kubernetes.kueue`` and
    ``finance.currency``; the defaults are the config's.
    """

    fleet: Fleet
    policy: PolicyConfig
    forecasts: Mapping[str, SeriesForecast]
    inventory: Mapping[str, int]
    """Nodes per pool now."""
    now: pd.Timestamp
    stale: AbstractSet[str] = frozenset()
    """Signals whose data is stale or missing: they hold their pools."""
    suspect: Mapping[str, Sequence[Reason] | str] | None = None
    """Signal -> why its data is suspect (:mod:`forecaster.suspect`, as
    :func:`scaler.planning.reasons.suspicion_reasons` states it); held like stale ones."""
    history: Mapping[str, pd.Series] | None = None
    """Observations per signal, from which each signal's margin is learnt
    (:mod:`scaler.planning.margins`); without it (or too short) the margin is
    ``policy.headroom_fraction``."""
    past: Sequence[PastCycle] = ()
    """What earlier cycles asked for (:class:`scaler.plans.PastCycle`, from the run
    records), for the hysteresis across cycles (module docstring, "No flapping")."""
    margins: Mapping[str, Margin | None] | None = None
    """Margins learnt already (the cycle, the replay's training period); they replace
    learning from ``history`` with ``method``."""
    method: str = "auto"
    """The forecast method the margins' growth backtest fits (``forecast.method``)."""
    waiting: Mapping[str, float] | None = None
    """Per GPU model, the GPUs that run plus those that wait for capacity
    (:mod:`scaler.planning.starvation`): observed demand the need never goes under."""
    node_starts: NodeStarts | None = None
    """Per pool, when its nodes started; a pool with ``billing`` releases only nodes whose
    paid period ends before the next cycle (:mod:`scaler.planning.billing`)."""
    derated: Mapping[str, float] | None = None
    """Per GPU model, the GPUs that throttled GPUs no longer serve
    (:mod:`scaler.planning.power`), added to its need."""
    kueue: KueueQuotaConfig | None = None
    """The training ClusterQueue whose quota the plan sizes (``kubernetes.kueue``)."""
    currency: str = "USD"
    """What the placement notes price in (``finance.currency``)."""


def plan_capacity(
    inputs: CapacityInputs, *, solver: Solver = "auto", with_signals: bool = True
) -> CapacityPlan:
    """Plan every pool of ``inputs.fleet`` (:class:`CapacityInputs`).

    ``solver``: ``auto`` (MILP, greedy fallback), ``milp`` or ``greedy``.
    ``with_signals=False`` skips the per-signal summaries (the replay plans every
    5 minutes and does not read them). Pools' ``max_power_kw`` caps their nodes.
    """
    policy, now, forecasts = inputs.policy, pd.Timestamp(inputs.now), inputs.forecasts
    history, stale = inputs.history or {}, set(inputs.stale)
    # A pool's max_power_kw is a ceiling on its nodes like max_nodes, named on its own.
    capped, power_caps = power_capped(inputs.fleet.pools)
    whole = inputs.fleet.with_pools(tuple(capped))
    # Deferrable training and batch are placed afterwards into what this plan leaves idle.
    served = whole.served()
    cycle = _planning_cycle(served.pools, policy, inputs.inventory, now, inputs.past)
    learned, headroom = _signal_margins(served, inputs)
    levels, held_why = _levels_and_held(served, inputs, cycle, learned, headroom)
    # What the plan's risk says of each held model: its causes in English, one line.
    held = {m: "; ".join(str(r) for r in why) for m, why in held_why.items()}
    fleet = _plan_models(served, inputs, cycle, levels, held, learned, solver)
    _keep_paid_nodes(fleet, served.pools, cycle, inputs.node_starts, now, policy.cycle_s)
    name_power_bounds(
        power_caps,
        fleet.timelines,
        fleet.binding,
        fleet.shortfalls,
        {p.name: gpu_model(p.gpu_model).name for p in served.pools},
    )
    actions, pool_plans = _pool_outputs(
        served.pools,
        policy,
        inputs.inventory,
        fleet,
        held,
        model_signals(served.workloads),
        learned,
        now,
    )
    deferred = plan_deferrable(
        whole,
        forecasts,
        cycle,
        fleet.need,
        fleet.timelines,
        held,
        stale,
        kueue=inputs.kueue,
        currency=inputs.currency,
    )
    shared = sharing_report(served, policy, forecasts, cycle.grid, history)
    return CapacityPlan(
        created_at=iso(now),
        quantile=policy.quantile,
        horizon_s=policy.horizon_s,
        step_s=policy.cycle_s,
        timeline=[iso(t) for t in cycle.grid],
        signals=_signal_summaries(served.signals, forecasts, policy.quantile, stale)
        if with_signals
        else [],
        demand_gpus={k: [round(float(x), 4) for x in v] for k, v in sorted(fleet.need.items())},
        pools=pool_plans,
        actions=actions,
        cost=plan_cost(served.pools, fleet.timelines, inputs.inventory, policy.cycle_s / 3600.0),
        risk=_risk(served, policy, forecasts, cycle.grid, fleet, held, levels, learned, headroom),
        notes=[
            *held_notes(held_why),
            *inventory_notes(served.pools, inputs.inventory, cycle.current, policy.max_step_nodes),
            *fleet.notes,
            *deferred.notes,
            *shared.notes,
        ],
        workloads=deferred.section,
        sharing=shared.section,
    )


def _levels_and_held(
    served: Fleet,
    inputs: CapacityInputs,
    cycle: PlanningCycle,
    learned: Mapping[str, Margin],
    headroom: Mapping[str, float],
) -> tuple[DemandLevels, dict[str, list[Reason]]]:
    """Every GPU model's demand levels (with what waits for capacity as a floor), and the
    models held on stale, missing, suspect or implausible data, with why."""
    forecasts = inputs.forecasts
    levels = demand_levels(
        served, inputs.policy, forecasts, inputs.history or {}, cycle.grid, learned, headroom
    )
    levels = with_floor(levels, inputs.waiting)
    held = held_models(served.workloads, forecasts, set(inputs.stale), inputs.suspect)
    implausible = implausible_models(served.pools, levels)
    if implausible:
        # A need past anything the pools could hold is bad data: held, and its newest
        # demand does not count either (it would buy every pool's maximum).
        for model, why in implausible.items():
            held[model] = [*held.get(model, []), why]
        levels = replace(levels, newest={**levels.newest, **dict.fromkeys(implausible, 0.0)})
    return levels, held


def _plan_models(
    served: Fleet,
    inputs: CapacityInputs,
    cycle: PlanningCycle,
    levels: DemandLevels,
    held: Mapping[str, str],
    learned: Mapping[str, Margin],
    solver: Solver,
) -> _Fleet:
    """Every GPU model planned (:func:`plan_model`), in name order, merged."""
    quiet = quiet_models(served.workloads, inputs.forecasts, learned, inputs.past, cycle.now)
    fleet = _Fleet(binding={p.name: [] for p in served.pools})
    for model in sorted({gpu_model(p.gpu_model).name for p in served.pools}):
        fleet.add(
            plan_model(
                model,
                served.pools_for(model),
                levels,
                cycle,
                held=model in held,
                no_news=model not in held and model in quiet,
                solver=solver,
                lost=(inputs.derated or {}).get(model, 0.0),
            )
        )
    return fleet


def _keep_paid_nodes(
    fleet: _Fleet,
    pools: Sequence[PoolConfig],
    cycle: PlanningCycle,
    node_starts: NodeStarts | None,
    now: pd.Timestamp,
    cycle_s: int,
) -> None:
    """Pools with ``billing`` keep the nodes whose paid period outlasts the next cycle
    (:func:`scaler.planning.billing.keep_paid_nodes`), named as a bound."""
    first = {name: tl[0] for name, tl in fleet.timelines.items() if tl}
    paid = keep_paid_nodes(pools, first, cycle.current, node_starts or {}, now, cycle_s)
    for name, keep in paid.items():
        fleet.timelines[name][0] = keep.target
        fleet.binding[name].append("billing")
        fleet.notes.append(keep.note())


def _planning_cycle(
    pools: Sequence[PoolConfig],
    policy: PolicyConfig,
    inventory: Mapping[str, int],
    now: pd.Timestamp,
    past: Sequence[PastCycle],
) -> PlanningCycle:
    """This cycle's grid, the nodes each pool is planned from, and the policy's rules."""
    # A pool above its max_nodes (a live inventory; a file inventory there is refused at
    # load) steps down by at most max_step_nodes a cycle, like any other change; one
    # below its min_nodes is planned from min_nodes.
    current = {p.name: max(p.min_nodes, int(inventory.get(p.name, p.min_nodes))) for p in pools}
    return PlanningCycle(
        now=now,
        grid=planning_grid(now, policy.horizon_s, policy.cycle_s),
        current=current,
        past=past,
        quantile=policy.quantile,
        cycle_s=policy.cycle_s,
        stabilization=pd.Timedelta(seconds=policy.scale_down_stabilization_s),
        max_step=policy.max_step_nodes,
        budget_per_hour=policy.budget_per_hour,
        fleet=tuple(pools),
    )


def _signal_margins(
    served: Fleet, inputs: CapacityInputs
) -> tuple[dict[str, Margin], dict[str, float]]:
    """The margins learnt (given, or learnt from ``history``), and one margin per signal:
    its learnt one, else the configured headroom."""
    margins = inputs.margins
    if margins is None:
        margins = learn_margins(
            served, inputs.policy, inputs.method, inputs.forecasts, inputs.history or {}
        )
    learned = {k: v for k, v in margins.items() if v is not None}
    headroom = {
        s.name: learned[s.name].margin if s.name in learned else inputs.policy.headroom_fraction
        for s in served.signals
    }
    return learned, headroom


# --- one GPU model ------------------------------------------------------------------


@dataclass
class ModelPlan:
    """One GPU model's share of the plan."""

    model: str
    need: np.ndarray
    """GPUs to cover per grid step (what the plan reports as ``demand_gpus``)."""
    near_need: float
    """The near-term need this cycle records for later cycles' hold rules."""
    spares: dict[str, int]
    """Spare nodes per spot pool against reclaims."""
    timelines: dict[str, list[int]]
    """Nodes requested per pool and grid step."""
    levels: dict[str, PoolLevels]
    binding: dict[str, list[str]]
    """Per pool, the bounds that keep its first step where it is (and the shortfall's)."""
    shortfall: dict[str, object] | None
    solver: str
    notes: list[Reason | str]


def plan_model(
    model: str,
    pools: list[PoolConfig],
    levels: DemandLevels,
    cycle: PlanningCycle,
    *,
    held: bool,
    no_news: bool,
    solver: Solver,
    lost: float = 0.0,
) -> ModelPlan:
    """One GPU model: its need, its problem with this cycle's bounds, the solve, the first
    step kept where the projection needs it again, and the bounds and shortfall named.

    ``held``: fed by stale or missing data; ``no_news``: nothing observed since the last
    cycle where a forecast's shape moves its need. ``lost``: GPUs that throttled GPUs no
    longer serve, added to the need (:func:`scaler.planning.power.derated_need`).
    """
    stab = cycle.stabilization
    reach = reach_of(pools, cycle.grid, cycle.now, cycle.cycle, stab)
    need, near_need = near_term_need(
        levels, model, cycle.grid, cycle.now, reach, stab, cycle.cycle, held
    )
    if not held:
        need = hold_across_cycles(
            need, model, reach, cycle.past, cycle.now, stab, _held_gpus(pools, cycle)
        )
    if lost > 0:
        need = derated_need(need, lost, _held_gpus(pools, cycle))
    spares = _spares(pools, need, cycle)
    floor = levels.observed.get(model, 0.0)
    prob, budget_note = model_problem(
        pools, need, spares, cycle, reach.lead_max + stab, floor, held, no_news
    )
    sol = solve(prob, solver)
    notes: list[Reason | str] = [budget_note] if budget_note is not None else []
    notes.extend(n.with_params(model=model) for n in sol.notes)
    timelines = first_step_targets(prob, sol, reach.window, solver)
    at_lead = {
        p.name: pool_levels(p, need, reach, cycle.grid, cycle.now, cycle.cycle, stab) for p in pools
    }
    binding = {
        p.name: first_step_bounds(p, prob, timelines, at_lead[p.name].need_up, no_news)
        for p in pools
    }
    shortfall = late_shortfall(prob, sol, timelines)
    if shortfall is not None:
        name_shortfall_bounds(prob, shortfall, binding)
        first_at = cycle.grid[shortfall.step]
        qname = quantile_column(cycle.quantile)
        notes.append(shortfall_note(model, qname, first_at, shortfall.most, shortfall.causes))
    return ModelPlan(
        model,
        need,
        near_need,
        spares,
        timelines,
        at_lead,
        binding,
        _shortfall_record(model, cycle.grid, shortfall),
        sol.solver,
        notes,
    )


def _shortfall_record(
    model: str, grid: pd.DatetimeIndex, shortfall: Shortfall | None
) -> dict[str, object] | None:
    """The plan's ``risk.shortfall`` entry for ``model`` (None: no shortfall to name)."""
    if shortfall is None:
        return None
    return {
        "gpu_model": model,
        "first_at": iso(grid[shortfall.step]),
        "max_gpus_short": round(shortfall.most, 3),
        "because": shortfall.causes,
    }


def _held_gpus(pools: Iterable[PoolConfig], cycle: PlanningCycle) -> float:
    """GPUs the nodes held now count for, spot spares held back."""
    current, q = cycle.current, cycle.quantile
    return sum(
        covered_gpus(p, current[p.name], spare_nodes(p, current[p.name], q, cycle.cycle_s))
        for p in pools
    )


def _spares(pools: Iterable[PoolConfig], need: np.ndarray, cycle: PlanningCycle) -> dict[str, int]:
    """Spare nodes per pool against reclaims (spot only; 0 for other tiers)."""
    top = float(need.max()) if len(need) else 0.0
    return {
        p.name: spare_nodes(
            p,
            # The nodes the pool would hold if it took the whole need: what the
            # reclaims are drawn from when spot is used to the full.
            min(p.max_nodes, max(cycle.current[p.name], math.ceil(top / p.gpus_per_node))),
            cycle.quantile,
            cycle.cycle_s,
        )
        for p in pools
    }


def first_step_targets(
    prob: ModelProblem, sol: ModelSolution, window: np.ndarray, solver: Solver
) -> dict[str, list[int]]:
    """Nodes per pool and step from ``sol``, the first step never releasing nodes that
    this plan's own projection needs again within the hold window ``window`` (a swap
    between pools included), as far as the budget allows."""
    within = _window_solution(prob, sol, window, solver)
    timelines: dict[str, list[int]] = {}
    for p in prob.pools:
        tl = [int(x) for x in sol.nodes[p.name]]
        serving = _serving_steps(p, window, prob.cycle_s)
        again_nodes = max((int(x) for x in within.nodes[p.name][1:serving]), default=tl[0])
        if tl[0] < prob.current[p.name] and again_nodes > tl[0]:
            tl[0] = _kept_nodes(prob, sol, timelines, p, again_nodes, tl[0])
        timelines[p.name] = tl
    return timelines


def _serving_steps(pool: PoolConfig, window: np.ndarray, cycle_s: int) -> int:
    """Steps whose requests serve within the hold window: one made at step j serves from
    j + lead. Those that only prepare for the projection beyond it (the unanchored
    quantile) do not hold capacity now: a forecast level that the observations
    contradict would otherwise keep the nodes cycle after cycle."""
    reach_window = max(1, int(window.sum()))
    return max(1, reach_window - lead_steps(pool, cycle_s))


def _window_solution(
    prob: ModelProblem, sol: ModelSolution, window: np.ndarray, solver: Solver
) -> ModelSolution:
    """What the hold window asks for again: ``sol``, or, where its first step releases
    nodes that its later serving steps request again, the plan of the window's need
    alone (so that the steps of a ramp towards the quantile beyond the window, at
    ``max_step_nodes`` a cycle, do not count either)."""
    if not any(
        int(sol.nodes[p.name][0]) < prob.current[p.name]
        and max(sol.nodes[p.name][1 : _serving_steps(p, window, prob.cycle_s)], default=0)
        > sol.nodes[p.name][0]
        for p in prob.pools
    ):
        return sol
    need = prob.need
    peak_w = float(need[window].max()) if window.any() else 0.0
    return solve(replace(prob, need=np.where(window, need, np.minimum(need, peak_w))), solver)


def _kept_nodes(
    prob: ModelProblem,
    sol: ModelSolution,
    timelines: Mapping[str, list[int]],
    pool: PoolConfig,
    again_nodes: int,
    planned: int,
) -> int:
    """The nodes ``pool`` keeps now instead of ``planned``: what the window asks for again,
    never above what it holds, its ceiling or the budget left by the other pools."""
    p = pool
    keep_n = min(prob.current[p.name], again_nodes, prob.ceiling(p, 0))
    if prob.budget is not None:
        spend = sum(
            (timelines[x.name][0] if x.name in timelines else int(sol.nodes[x.name][0]))
            * x.price_per_node_hour
            for x in prob.pools
            if x.name != p.name
        )
        room = math.floor((prob.budget - spend) / p.price_per_node_hour + 1e-9)
        keep_n = max(planned, min(keep_n, room))
    return keep_n


# --- the plan's parts ---------------------------------------------------------------


@dataclass
class _Fleet:
    """Every GPU model's plan merged, in the order the models are planned."""

    binding: dict[str, list[str]]
    """Per pool (every pool of the config, in its order)."""
    need: dict[str, np.ndarray] = field(default_factory=dict)
    near_need: dict[str, float] = field(default_factory=dict)
    spares: dict[str, int] = field(default_factory=dict)
    """Spot pools' spare nodes, where they hold any."""
    timelines: dict[str, list[int]] = field(default_factory=dict)
    levels: dict[str, PoolLevels] = field(default_factory=dict)
    shortfalls: list[dict[str, object]] = field(default_factory=list)
    solvers: set[str] = field(default_factory=set)
    notes: list[Reason | str] = field(default_factory=list)

    def add(self, plan: ModelPlan) -> None:
        self.need[plan.model] = plan.need
        self.near_need[plan.model] = plan.near_need
        self.spares.update({k: v for k, v in plan.spares.items() if v})
        self.timelines.update(plan.timelines)
        self.levels.update(plan.levels)
        self.binding.update(plan.binding)
        if plan.shortfall is not None:
            self.shortfalls.append(plan.shortfall)
        self.solvers.add(plan.solver)
        self.notes.extend(plan.notes)


def _pool_outputs(
    pools: Sequence[PoolConfig],
    policy: PolicyConfig,
    inventory: Mapping[str, int],
    fleet: _Fleet,
    held: Mapping[str, str],
    signals_of: Mapping[str, Sequence[str]],
    learned: Mapping[str, Margin],
    now: pd.Timestamp,
) -> tuple[list[Action], list[PoolPlan]]:
    """Per pool, its action (decision and reason) and its planned timeline."""
    actions: list[Action] = []
    pool_plans: list[PoolPlan] = []
    for p in pools:
        cur = int(inventory.get(p.name, p.min_nodes))
        target = fleet.timelines[p.name][0]
        model = gpu_model(p.gpu_model).name
        levels = fleet.levels[p.name]
        decision, reason = decide(
            p,
            cur,
            target,
            levels,
            fleet.binding[p.name],
            held.get(model),
            signals_of.get(model, ()),
            policy.max_step_nodes,
            policy.scale_down_stabilization_s,
        )
        actions.append(
            Action(
                pool=p.name,
                decision=decision,
                current_nodes=cur,
                target_nodes=target,
                at=iso(now),
                needed_at=iso(levels.needed_at),
                cost_delta_per_hour=round((target - cur) * p.price_per_node_hour, 4),
                reason=reason,
            )
        )
        pool_plans.append(
            PoolPlan(
                pool=p.name,
                tier=p.tier,
                gpu_model=model,
                gpus_per_node=p.gpus_per_node,
                price_per_gpu_hour=p.price_per_gpu_hour,
                lead_time_s=p.lead_time_s,
                current_nodes=cur,
                target_nodes=fleet.timelines[p.name],
                binding=fleet.binding[p.name],
            )
        )
    return actions, pool_plans


def _risk(
    served: Fleet,
    policy: PolicyConfig,
    forecasts: Mapping[str, SeriesForecast],
    grid: pd.DatetimeIndex,
    fleet: _Fleet,
    held: dict[str, str],
    levels: DemandLevels,
    learned: Mapping[str, Margin],
    headroom: Mapping[str, float],
) -> dict[str, object]:
    """The plan's risk section: unserved demand expected, what binds, what holds, the
    solver, spot spares, the near-term need recorded, and each signal's margin."""
    unserved = expected_unserved(served, policy, forecasts, grid, fleet.timelines, held, fleet.need)
    return {
        "expected_unserved_gpu_hours": round(unserved, 3),
        "binding": {k: v for k, v in fleet.binding.items() if v},
        "held_models": held,
        "shortfall": fleet.shortfalls,
        "solver": "+".join(sorted(fleet.solvers)),
        "spot_spare_nodes": fleet.spares,
        "near_need_gpus": fleet.near_need,
        "observed_gpus": {k: round(v, 4) for k, v in sorted(levels.observed.items())},
        "observed_at": {k: iso(fc.last_timestamp) for k, fc in sorted(forecasts.items())},
        "margins": {
            s.name: (
                {"source": "learned", **learned[s.name].to_dict()}
                if s.name in learned
                else {"source": "policy.headroom_fraction", "margin": headroom[s.name]}
            )
            for s in served.signals
        },
    }


def _signal_summaries(
    signals: Iterable[SignalConfig],
    forecasts: Mapping[str, SeriesForecast],
    q: float,
    stale: set[str],
) -> list[SignalSummary]:
    """A summary per signal with a forecast: estimator, newest value, peak at ``q``."""
    out: list[SignalSummary] = []
    for s in signals:
        fc = forecasts.get(s.name)
        if fc is None:
            continue
        qs = fc.quantile(q)
        out.append(
            SignalSummary(
                name=s.name,
                unit=s.unit,
                estimator=fc.estimator,
                reason=fc.reason,
                last_timestamp=iso(fc.last_timestamp),
                last_value=round(fc.last_value, 6),
                stale=s.name in stale,
                peak_at_quantile=round(float(qs.max()), 6),
                notes=list(fc.notes),
            )
        )
    return out
