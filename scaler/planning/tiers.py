"""The tier planner: forecasts and inventory in, a :class:`CapacityPlan` out.

Pure: it takes ``now`` as an argument and touches nothing outside. For each GPU
model it chooses the nodes requested per pool at every step of the planning grid
(``now`` to ``now + horizon`` at the cycle step) so that usable capacity covers
the *need* at the least cost. Only the first step is acted on; the rest is the
projection the plan reports.

Need, per grid step j (GPUs of one model):

* beyond the reach of this cycle's action (``j > lead``): the policy quantile of
  forecast demand in step j (:mod:`scaler.planning.demand`); this is the projection;
* within reach (``j <= lead``), the forecast conditioned on what is observed now
  replaces it: the *anchored* demand ``last * (1 + headroom_fraction) *
  median(t_j) / median(t_last)`` (the forecast's predicted change applied to the
  newest observation), and never less than the *observed floor*, the newest
  demand times ``1 + headroom_fraction`` and the largest demand of the last hour.
  A forecast that is wrong about the level therefore degrades to reactive
  scaling, not to an outage, and a forecast ramp (a morning rise, a half-hourly
  step) is provisioned a lead time before it arrives;
* the margin in the two levels above is each signal's own, learnt from its
  history (:mod:`scaler.planning.margins`: the cheapest margin whose walk-forward replay
  over that history leaves no more demand unserved than a reactive rule did there,
  and at most ``policy.unserved_budget``); ``policy.headroom_fraction`` only where
  the history is too short. A margin is headroom on the replicas the signal
  needs (``ceil(replicas x (1 + margin))``, :func:`scaler.planning.demand.gpus_for`),
  as the reactive rule adds it to the GPUs in use and as it was replayed. A
  series that jumps within a lead time keeps the margin its jumps needed; a calm
  one pays nothing for it. The reasons name each margin and its evidence;
* from reach to ``now + lead + scale_down_stabilization`` the anchored demand
  replaces the quantile too (what the hold rules below keep);
* a signal whose forecast shape did not pay on its own history (the margin fell
  back to the reactive reference, :mod:`scaler.planning.margins`) is anchored on a flat
  median near term: its newest value with its margin, and its observed floor is
  the largest newest value of lead time + stabilization with the margin (as that
  rule was replayed); the cycle records only its newest value with the margin, so
  the records do not hold that peak for a second window;
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
measure against that same need.

``CapacityPlan.demand_gpus`` reports this need, so the plan shows what it covers.

Usable capacity obeys the lead time: a node requested at step k serves from
``k + lead`` if it stays requested, and a released node stops serving at once.
A spot pool that holds any node covers the need with *spare* nodes on top
(:func:`spare_nodes`): the policy quantile of a binomial over its nodes, each
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
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.stats import binom

from forecaster.estimators import quantile_column
from forecaster.forecasting import SeriesForecast
from scaler.catalog.gpus import gpu_model
from scaler.config import Config, PoolConfig
from scaler.planning.demand import (
    anchored_demand_by_model,
    current_demand_by_model,
    demand_by_model,
    newest_demand_by_model,
    planning_grid,
)
from scaler.planning.margins import Margin, learn_margin
from scaler.plans import (
    Action,
    CapacityPlan,
    Decision,
    PastCycle,
    PoolPlan,
    SignalSummary,
    iso,
    naive_utc,
)

log = logging.getLogger(__name__)


def signal_granule(config: Config, signal: str) -> float:
    """Signal units one node serves: the step in which capacity for ``signal`` comes.

    0 (no rounding assumed) where the signal shares its GPU model with another
    signal's workloads, drives a MIG workload, or has no pool: there the nodes are
    not the signal's alone, so their rounding is no margin it can count on.
    """
    driven = [w for w in config.workloads if w.signal == signal]
    if not driven or any(w.mig_profile is not None for w in driven):
        return 0.0
    models = {gpu_model(w.gpu_model).name for w in driven}
    others = [
        w for w in config.workloads if w.signal != signal and gpu_model(w.gpu_model).name in models
    ]
    if others or len(models) != 1:
        return 0.0
    pools = config.pools_for(next(iter(models)))
    if not pools:
        return 0.0
    gpus_per_unit = sum(w.gpus_per_replica / w.units_per_replica for w in driven)
    return min(p.gpus_per_node for p in pools) / gpus_per_unit


def signal_replica(config: Config, signal: str) -> float:
    """Signal units of one replica of the workload ``signal`` drives (0 where several do).

    The margin is headroom on replicas (:func:`scaler.planning.demand.gpus_for`), so the
    walk-forward replay rounds the signal up to replicas before adding it.
    """
    driven = [w for w in config.workloads if w.signal == signal]
    return float(driven[0].units_per_replica) if len(driven) == 1 else 0.0


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


def learn_margins(
    config: Config, forecasts: Mapping[str, SeriesForecast], history: Mapping[str, pd.Series]
) -> dict[str, Margin | None]:
    """Each forecast signal's margin, learnt from its history up to its newest observation."""
    lead = max((p.lead_time_s for p in config.pools), default=0)
    floor = pd.Timedelta(seconds=lead + config.policy.scale_down_stabilization_s)
    out: dict[str, Margin | None] = {}
    for name, fc in forecasts.items():
        y = history.get(name)
        if y is None:
            continue
        seen = y[y.index <= fc.last_timestamp]
        out[name] = learn_margin(
            seen,
            lead,
            config.policy.unserved_budget,
            step=fc.step if fc.step > pd.Timedelta(0) else None,
            signal=name,
            floor_window=floor,
            granule=signal_granule(config, name),
            replica=signal_replica(config, name),
        )
    return out


def _without_shape(fc: SeriesForecast) -> SeriesForecast:
    """``fc`` with a flat median: anchored on it, the newest value is held as it is."""
    frame = fc.frame.copy()
    frame["q0.5"] = 1.0
    return replace(fc, frame=frame)


Solver = Literal["auto", "milp", "greedy"]
SHORTFALL_PRICE_FACTOR = 1000.0
"""A GPU-hour short costs this many times the dearest GPU-hour: never traded for money."""
MILP_NODE_LIMIT = 10_000
"""Branch-and-bound nodes the MILP may explore. A count, not a clock, bounds the search, so
the same inputs give the same plan however loaded the machine is (a wall-clock limit made
plans depend on load). Plans take one node as a rule (tests/test_planning.py's cases:
at most 1, under 0.2 s); at the limit the best schedule found is the plan, and a note
says so."""
MILP_TIME_BACKSTOP_S = 120.0
"""Wall-clock backstop against a pathological problem, far beyond any measured solve;
only it could make a plan depend on load. When it binds, the greedy allocator plans (the
same for the same inputs) and a note says so."""


def spot_loss_fraction(pool: PoolConfig, cycle_s: int) -> float:
    """Share of a pool's GPUs expected to be missing at any time through reclamation."""
    if pool.tier != "spot" or pool.spot_interruption_rate_per_hour <= 0:
        return 0.0
    exposure_h = (pool.lead_time_s + cycle_s) / 3600.0
    return min(0.5, pool.spot_interruption_rate_per_hour * exposure_h)


def effective_gpus(pool: PoolConfig, nodes: int | float, cycle_s: int) -> float:
    """Expected GPUs of ``nodes`` of ``pool`` (spot discounted by its expected loss)."""
    return float(nodes) * pool.gpus_per_node * (1.0 - spot_loss_fraction(pool, cycle_s))


def spare_nodes(pool: PoolConfig, nodes: int, quantile: float, cycle_s: int) -> int:
    """Spare nodes a spot pool of ``nodes`` holds against reclaims (N+1 at least).

    Each node is lost with probability ``spot_loss_fraction`` over one replacement
    window (lead time plus a cycle), so the count lost at once is binomial. The pool
    holds its policy ``quantile``, and at least one: a single reclaim, the common
    case, then never uncovers the need while the replacement boots (at small pools
    the quantile alone is 0, which is what left reclaims unserved). 0 for other tiers.
    """
    return reclaim_spares(nodes, spot_loss_fraction(pool, cycle_s), quantile)


def reclaim_spares(nodes: int, loss: float, quantile: float) -> int:
    """Spares for ``nodes`` each lost with probability ``loss``: the binomial's
    ``quantile``, at least 1 (N+1); 0 when nothing can be lost."""
    if loss <= 0 or nodes <= 0:
        return 0
    return max(1, min(nodes, int(binom.ppf(quantile, nodes, loss))))


def covered_gpus(pool: PoolConfig, nodes: int | float, spare: int) -> float:
    """GPUs ``nodes`` of ``pool`` count for towards the need: spares held back on spot."""
    if nodes <= 0:
        return 0.0
    return max(0.0, float(nodes) - spare) * pool.gpus_per_node


def allocate(
    pools: list[PoolConfig],
    gpus: float,
    cycle_s: int,
    spares: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Cheapest node counts per pool covering ``gpus`` GPUs (within each pool's min/max).

    ``spares``: nodes a spot pool holds beyond what it counts for, once it holds any
    (the planner's rule). Without it, spot counts for its expected GPUs
    (:func:`effective_gpus`), which is what a cost projection wants.
    """
    alloc = {p.name: p.min_nodes for p in pools}

    def counted(p: PoolConfig, n: int) -> float:
        if spares is None:
            return effective_gpus(p, n, cycle_s)
        return covered_gpus(p, n, spares.get(p.name, 0))

    remaining = max(0.0, gpus) - sum(counted(p, p.min_nodes) for p in pools)

    def eff_price(p: PoolConfig) -> float:
        return p.price_per_gpu_hour / max(1e-9, 1.0 - spot_loss_fraction(p, cycle_s))

    for p in sorted(pools, key=lambda p: (eff_price(p), p.name)):
        if remaining <= 1e-9:
            break
        have = counted(p, alloc[p.name])
        if spares is None:
            want = alloc[p.name] + math.ceil(remaining / effective_gpus(p, 1, cycle_s) - 1e-9)
        else:
            # Nodes counting towards the need, plus the spares once the pool holds any.
            want = math.ceil((remaining + have) / p.gpus_per_node - 1e-9) + spares.get(p.name, 0)
        n = min(p.max_nodes, max(alloc[p.name], want))
        if n > alloc[p.name]:
            remaining -= counted(p, n) - have
            alloc[p.name] = n
    return alloc


def lead_steps(pool: PoolConfig, cycle_s: int) -> int:
    """Grid steps between requesting a node of ``pool`` and it serving."""
    return math.ceil(pool.lead_time_s / cycle_s - 1e-9)


@dataclass
class ModelProblem:
    """One GPU model's planning problem on the grid."""

    pools: list[PoolConfig]
    need: np.ndarray
    """GPUs to cover per grid step (quantile, floor and keep levels applied)."""
    current: dict[str, int]
    """Nodes requested now, clipped to each pool's min/max."""
    held: bool
    max_step: int
    budget: float | None
    """Spend per hour available to these pools (None: no cap)."""
    cycle_s: int
    spares: dict[str, int] = field(default_factory=dict)
    """Spare nodes per spot pool, held on top of what it counts for once it holds any."""
    cap_now: dict[str, int] = field(default_factory=dict)
    """Most nodes a pool may request now (a pool that released capacity within lead
    time plus stabilization grows only as far as observed demand forces it)."""
    fixed: dict[str, int] = field(default_factory=dict)
    """Pools held at these nodes at every step: reserved commitments, which change only
    through the finance advice (scaler.reports.finance), never as if they were elastic."""
    floor_now: dict[str, int] = field(default_factory=dict)
    """Fewest nodes a pool may request now (a pool raised within lead time plus
    stabilization is not released before the window has passed)."""
    booting: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per pool, ``(nodes, steps)``: nodes an earlier cycle raised that still boot, so
    that they serve only from grid step ``steps`` on (what bridges them is kept)."""

    def serving_now(self, pool: PoolConfig, k: int) -> int:
        """Nodes of ``pool`` held now that can serve at step ``k`` (before new ones boot)."""
        cur = self.current[pool.name]
        nodes, steps = self.booting.get(pool.name, (0, 0))
        return max(0, cur - nodes) if k < steps else cur

    def ceiling(self, pool: PoolConfig, k: int) -> int:
        """Most nodes ``pool`` may request at grid step ``k``: its ``max_nodes``, or, for a
        pool found above it, a descent of at most ``max_step`` a cycle down to it."""
        cur = self.current[pool.name]
        if cur <= pool.max_nodes:
            return pool.max_nodes
        return max(pool.max_nodes, cur - self.max_step * (k + 1))

    def floor(self, pool: PoolConfig, k: int, least: int) -> int:
        """``least`` nodes at step ``k``, but never above :meth:`ceiling`."""
        return min(least, self.ceiling(pool, k))


@dataclass
class ModelSolution:
    nodes: dict[str, np.ndarray]
    """Requested nodes per pool and grid step."""
    shortfall: np.ndarray
    """GPUs of need left uncovered per grid step."""
    solver: str
    notes: list[str] = field(default_factory=list)


def _solve_milp(prob: ModelProblem) -> ModelSolution | None:
    """The least-cost schedule as a MILP; None when the solver gives no solution."""
    pools, k_steps = prob.pools, len(prob.need)
    n_pools = len(pools)
    # A binary per spot pool with spares and step says whether the pool holds nodes
    # then: a spot pool that holds any carries its spares, an empty one none.
    spared = [i for i, p in enumerate(pools) if prob.spares.get(p.name, 0) > 0]
    n_vars = 2 * n_pools * k_steps + k_steps + len(spared) * k_steps
    step_h = prob.cycle_s / 3600.0

    def nv(p: int, k: int) -> int:
        return p * k_steps + k

    def uv(p: int, k: int) -> int:
        return n_pools * k_steps + p * k_steps + k

    def sv(k: int) -> int:
        return 2 * n_pools * k_steps + k

    def yv(s: int, k: int) -> int:
        return 2 * n_pools * k_steps + k_steps + s * k_steps + k

    dearest = max(p.price_per_gpu_hour for p in pools)
    cost = np.zeros(n_vars)
    lower = np.zeros(n_vars)
    upper = np.full(n_vars, np.inf)
    integrality = np.zeros(n_vars)
    for i, p in enumerate(pools):
        leads = lead_steps(p, prob.cycle_s)
        cur = prob.current[p.name]
        for k in range(k_steps):
            cost[nv(i, k)] = p.price_per_node_hour * step_h
            lower[nv(i, k)] = cur if prob.held else p.min_nodes
            if k == 0 and p.name in prob.floor_now:
                lower[nv(i, k)] = max(lower[nv(i, k)], prob.floor_now[p.name])
            upper[nv(i, k)] = prob.ceiling(p, k)
            if k == 0 and p.name in prob.cap_now:
                upper[nv(i, k)] = max(
                    lower[nv(i, k)], min(prob.ceiling(p, k), prob.cap_now[p.name])
                )
            # A pool above its max_nodes steps down towards it whatever else holds it.
            upper[nv(i, k)] = min(upper[nv(i, k)], prob.ceiling(p, k))
            lower[nv(i, k)] = prob.floor(p, k, int(lower[nv(i, k)]))
            if p.name in prob.fixed:
                lower[nv(i, k)] = upper[nv(i, k)] = prob.floor(p, k, prob.fixed[p.name])
            integrality[nv(i, k)] = 1
            # Nodes asked for now serve only after the lead time; until then, at most
            # what is there now can serve.
            upper[uv(i, k)] = prob.serving_now(p, k) if k < leads else prob.ceiling(p, k)
    for k in range(k_steps):
        cost[sv(k)] = SHORTFALL_PRICE_FACTOR * dearest * step_h
        for s in range(len(spared)):
            upper[yv(s, k)] = 1
            integrality[yv(s, k)] = 1
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lo: list[float] = []
    hi: list[float] = []
    r = 0

    def add(entries: list[tuple[int, float]], lb: float, ub: float) -> None:
        nonlocal r
        for c, v in entries:
            rows.append(r)
            cols.append(c)
            vals.append(v)
        lo.append(lb)
        hi.append(ub)
        r += 1

    for k in range(k_steps):
        # Coverage: usable GPUs less the spot spares, plus shortfall, reach the need.
        add(
            [(uv(i, k), float(p.gpus_per_node)) for i, p in enumerate(pools)]
            + [
                (yv(s, k), -float(pools[i].gpus_per_node * prob.spares[pools[i].name]))
                for s, i in enumerate(spared)
            ]
            + [(sv(k), 1.0)],
            float(prob.need[k]),
            np.inf,
        )
        for s, i in enumerate(spared):
            # A spot pool serving with nodes at k carries its spares.
            big = max(pools[i].max_nodes, prob.current[pools[i].name])
            add([(uv(i, k), 1.0), (yv(s, k), -float(big))], -np.inf, 0.0)
        if prob.budget is not None:
            add(
                [(nv(i, k), p.price_per_node_hour) for i, p in enumerate(pools)],
                -np.inf,
                prob.budget,
            )
    for i, p in enumerate(pools):
        leads = lead_steps(p, prob.cycle_s)
        for k in range(k_steps):
            # Usable only if requested over the whole lead time up to k.
            for j in range(max(0, k - leads), k + 1):
                add([(uv(i, k), 1.0), (nv(i, j), -1.0)], -np.inf, 0.0)
            if k == 0:
                cur = prob.current[p.name]
                add([(nv(i, 0), 1.0)], cur - prob.max_step, cur + prob.max_step)
            else:
                add([(nv(i, k), 1.0), (nv(i, k - 1), -1.0)], -prob.max_step, prob.max_step)
    matrix = sparse.csr_array((vals, (rows, cols)), shape=(r, n_vars))
    try:
        res = milp(
            cost,
            constraints=LinearConstraint(matrix, np.array(lo), np.array(hi)),
            integrality=integrality,
            bounds=Bounds(lower, upper),
            options={
                "node_limit": MILP_NODE_LIMIT,
                "time_limit": MILP_TIME_BACKSTOP_S,
                "presolve": True,
            },
        )
    except (ValueError, RuntimeError) as exc:
        log.warning("milp failed: %s", exc)
        return None
    notes: list[str] = []
    timed_out = "time limit" in str(res.message).lower()
    if res.x is not None and res.status == 1 and not timed_out:
        # The node limit: the best schedule found within a fixed amount of search.
        notes.append(
            f"the optimizer stopped at its node limit ({MILP_NODE_LIMIT}); best plan found"
        )
    elif res.x is None or res.status != 0:
        log.warning("milp gave no solution: %s", res.message)
        return None
    x = np.asarray(res.x)
    nodes = {
        p.name: np.rint(x[[nv(i, k) for k in range(k_steps)]]).astype(int)
        for i, p in enumerate(pools)
    }
    shortfall = np.maximum(0.0, x[[sv(k) for k in range(k_steps)]])
    shortfall[shortfall < 1e-6] = 0.0
    return ModelSolution(nodes, shortfall, "milp", notes)


def _solve_greedy(prob: ModelProblem) -> ModelSolution:
    """Level by level: reserved first, then cheapest effective price, then the bounds."""
    pools, k_steps = prob.pools, len(prob.need)
    lead = max((lead_steps(p, prob.cycle_s) for p in pools), default=0)
    nodes = {p.name: np.zeros(k_steps, dtype=int) for p in pools}
    prev = dict(prob.current)
    for k in range(k_steps):
        # What is requested at k must cover the need until it could be replaced.
        level = float(np.max(prob.need[k : k + lead + 1]))
        alloc = allocate(pools, level, prob.cycle_s, prob.spares)
        for p in pools:
            n = alloc[p.name]
            if prob.held:
                n = max(n, prob.current[p.name])
            n = min(max(n, prev[p.name] - prob.max_step), prev[p.name] + prob.max_step)
            if k == 0 and p.name in prob.cap_now:
                n = min(n, max(prob.cap_now[p.name], prob.current[p.name] if prob.held else 0))
            if k == 0 and p.name in prob.floor_now:
                n = max(n, prob.floor_now[p.name])
            n = prob.fixed.get(p.name, n)
            alloc[p.name] = max(p.min_nodes, min(prob.ceiling(p, k), n))
        if prob.budget is not None:
            spend = sum(alloc[p.name] * p.price_per_node_hour for p in pools)
            for p in sorted(pools, key=lambda p: -p.price_per_gpu_hour):
                floor = max(p.min_nodes, prev[p.name] - prob.max_step)
                if prob.held:
                    floor = max(floor, prob.current[p.name])
                if k == 0:
                    floor = max(floor, prob.floor_now.get(p.name, 0))
                floor = prob.floor(p, k, max(floor, prob.fixed.get(p.name, 0)))
                while spend > prob.budget + 1e-9 and alloc[p.name] > floor:
                    alloc[p.name] -= 1
                    spend -= p.price_per_node_hour
        for p in pools:
            nodes[p.name][k] = alloc[p.name]
        prev = alloc
    shortfall = np.zeros(k_steps)
    for k in range(k_steps):
        cap = 0.0
        for p in pools:
            leads = lead_steps(p, prob.cycle_s)
            window = nodes[p.name][max(0, k - leads) : k + 1]
            usable = int(window.min())
            if k < leads:
                usable = min(usable, prob.serving_now(p, k))
            cap += covered_gpus(p, usable, prob.spares.get(p.name, 0))
        shortfall[k] = max(0.0, float(prob.need[k]) - cap)
    shortfall[shortfall < 1e-6] = 0.0
    return ModelSolution(nodes, shortfall, "greedy")


def solve(prob: ModelProblem, solver: Solver = "auto") -> ModelSolution:
    """Solve one GPU model's problem; ``auto`` is the MILP with the greedy as fallback."""
    if solver in ("auto", "milp"):
        sol = _solve_milp(prob)
        if sol is not None:
            return sol
        greedy = _solve_greedy(prob)
        greedy.notes.append("the optimizer gave no solution; planned with the greedy fallback")
        return greedy
    return _solve_greedy(prob)


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


def _window_max(
    values: np.ndarray, grid: pd.DatetimeIndex, start: pd.Timestamp, end: pd.Timestamp
) -> float:
    mask = (grid >= start) & (grid < end)
    if not mask.any():
        # The window starts past the horizon: use the last planned step.
        mask = grid == grid[-1] if start >= grid[-1] else grid >= start
    return float(np.max(values[mask]))


def _hhmm(ts: pd.Timestamp) -> str:
    return ts.strftime("%H:%MZ")


def _expected_unserved(
    demand_q: dict[float, np.ndarray], capacity: np.ndarray, step_h: float
) -> float:
    """E[max(0, D - C)] in GPU-hours, D's quantile function interpolated from the columns."""
    if not demand_q:
        return 0.0
    levels = np.array(sorted(demand_q))
    table = np.vstack([demand_q[q] for q in levels])  # (n_q, T)
    us = np.linspace(0.005, 0.995, 100)
    # Piecewise-linear quantile function per step, flat beyond the outer columns.
    pos = np.interp(us, levels, np.arange(len(levels)))
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, len(levels) - 1)
    w = (pos - lo)[:, None]
    d = (1 - w) * table[lo] + w * table[hi]  # (n_u, T)
    return float(np.maximum(0.0, d - capacity[None, :]).sum()) / len(us) * step_h


def _pool_budget(
    config: Config, pools: list[PoolConfig], current: Mapping[str, int]
) -> float | None:
    """Spend per hour left for ``pools`` under the fleet budget, other pools held at current."""
    budget = config.policy.budget_per_hour
    if budget is None:
        return None
    names = {p.name for p in pools}
    others = sum(
        current[p.name] * p.price_per_node_hour for p in config.pools if p.name not in names
    )
    return budget - others


def plan_capacity(
    config: Config,
    forecasts: Mapping[str, SeriesForecast],
    inventory: Mapping[str, int],
    now: pd.Timestamp,
    stale: set[str] | None = None,
    *,
    solver: Solver = "auto",
    with_signals: bool = True,
    history: Mapping[str, pd.Series] | None = None,
    past: Sequence[PastCycle] = (),
    margins: Mapping[str, Margin | None] | None = None,
) -> CapacityPlan:
    """Plan every pool; ``inventory`` is nodes per pool now, ``stale`` the stale signals.

    ``history``: observations per signal, from which each signal's margin is learnt
    (:mod:`scaler.planning.margins`); without it (or too short) the margin is
    ``policy.headroom_fraction``. ``margins``: margins learnt already (the replay
    learns them once from its training period); they replace learning from ``history``.
    ``solver``: ``auto`` (MILP, greedy fallback), ``milp`` or ``greedy``.
    ``with_signals=False`` skips the per-signal summaries (the replay plans every
    5 minutes and does not read them).
    ``past``: what earlier cycles asked for (:class:`scaler.plans.PastCycle`, from the
    run records), for the hysteresis across cycles (module docstring, "No flapping").
    """
    policy = config.policy
    q = policy.quantile
    stale = set(stale or ())
    now = pd.Timestamp(now)
    grid = planning_grid(now, policy.horizon_s, policy.cycle_s)
    cycle = pd.Timedelta(seconds=policy.cycle_s)
    step_h = policy.cycle_s / 3600.0
    notes: list[str] = []
    qname = quantile_column(q)

    demand = demand_by_model(config, dict(forecasts), grid, q)
    quantiles = sorted({float(c[1:]) for fc in forecasts.values() for c in fc.frame.columns} | {q})
    if margins is None:
        margins = learn_margins(config, forecasts, history or {})
    learned = {k: v for k, v in margins.items() if v is not None}
    # One margin per signal: its learned one, else the configured headroom.
    headroom = {
        s.name: learned[s.name].margin if s.name in learned else policy.headroom_fraction
        for s in config.signals
    }
    # The observed floor keeps the peak of the last lead time + stabilization.
    hold_window = pd.Timedelta(
        seconds=max((p.lead_time_s for p in config.pools), default=0)
        + policy.scale_down_stabilization_s
    )
    peaks: dict[str, float] = {}
    # What this cycle records as its own near-term need for later cycles' hold rules.
    record_peaks: dict[str, float] = {}
    # The margin on the window's peak: only where the rule without shape was learnt.
    peak_headroom: dict[str, float] = {}
    for name, sf in forecasts.items():
        y = (history or {}).get(name)
        if y is None:
            continue
        seen = y[(y.index <= sf.last_timestamp) & (y.index > sf.last_timestamp - hold_window)]
        peaks[name] = max([sf.last_value, *seen.dropna().tolist()])
        if learned.get(name) is not None and not learned[name].forecast_shape:
            # A signal whose margin fell back to the rule without the forecast's shape
            # scales as that rule was replayed (scaler.planning.margins): the largest newest value
            # of the window, with its margin. The cycle records only its newest value
            # with the margin, so that the records do not hold the window's peak for
            # another window on top (that held nodes reacting would not).
            peak_headroom[name] = headroom[name]
            record_peaks[name] = sf.last_value
        else:
            record_peaks[name] = peaks[name]
    observed = current_demand_by_model(config, dict(forecasts), headroom, peaks, peak_headroom)
    recorded_floor = current_demand_by_model(
        config, dict(forecasts), headroom, record_peaks, peak_headroom
    )
    # A signal whose forecast shape did not pay on its own history (scaler.planning.margins) is
    # anchored on a flat median near term: its newest value, with its margin.
    shaped = {
        name: fc
        if learned.get(name) is None or learned[name].forecast_shape
        else _without_shape(fc)
        for name, fc in forecasts.items()
    }
    anchored = anchored_demand_by_model(config, shaped, grid, headroom)
    steady = anchored_demand_by_model(config, shaped, grid, 0.0)
    newest = newest_demand_by_model(config, dict(forecasts))
    need_by_model: dict[str, np.ndarray] = {}

    # Which GPU models have a signal that is stale or missing: those pools hold.
    held_models: dict[str, str] = {}
    for w in config.workloads:
        key = gpu_model(w.gpu_model).name
        if w.signal not in forecasts:
            held_models[key] = f"no data for signal {w.signal!r}"
        elif w.signal in stale:
            held_models.setdefault(key, f"signal {w.signal!r} is stale")
    # Per GPU model, its signals, and whether any has a forecast shape that moves the
    # near-term need between observations (those without are anchored flat).
    fed_by: dict[str, set[str]] = {}
    shaped_models: set[str] = set()
    for w in config.workloads:
        if w.signal in forecasts:
            key = gpu_model(w.gpu_model).name
            fed_by.setdefault(key, set()).add(w.signal)
            m = learned.get(w.signal)
            if m is None or m.forecast_shape:
                shaped_models.add(key)
    for key, why in sorted(held_models.items()):
        notes.append(f"{key}: {why}; holding current capacity (no scale-down)")

    # A pool above its max_nodes (a live inventory; a file inventory there is refused at
    # load) steps down by at most max_step_nodes a cycle, like any other change; one
    # below its min_nodes is planned from min_nodes.
    current = {
        p.name: max(p.min_nodes, int(inventory.get(p.name, p.min_nodes))) for p in config.pools
    }
    for p in config.pools:
        raw = int(inventory.get(p.name, p.min_nodes))
        if raw > p.max_nodes:
            notes.append(
                f"{p.name}: {raw} node(s) now is above max_nodes ({p.max_nodes}); stepping down "
                f"by at most max_step_nodes ({policy.max_step_nodes}) a cycle"
            )
        elif raw != current[p.name]:
            notes.append(
                f"{p.name}: {raw} node(s) now is below min_nodes ({p.min_nodes}); planning from {current[p.name]}"
            )

    timelines: dict[str, list[int]] = {}
    binding: dict[str, list[str]] = {p.name: [] for p in config.pools}
    levels_now: dict[str, tuple[float, float, pd.Timestamp]] = {}
    # Per pool: the end of the hold window its GPU model's need is kept over, and
    # the model's longest lead time (the window is lead + stabilization).
    hold_until: dict[str, tuple[pd.Timestamp, pd.Timedelta]] = {}
    shortfalls: list[dict[str, object]] = []
    solvers: set[str] = set()
    models = sorted({gpu_model(p.gpu_model).name for p in config.pools})
    stab = pd.Timedelta(seconds=policy.scale_down_stabilization_s)
    spare_by_pool: dict[str, int] = {}
    near_need: dict[str, float] = {}
    windows: dict[str, np.ndarray] = {}
    for model in models:
        pools = config.pools_for(model)
        d = demand.get(model, np.zeros(len(grid)))
        floor = observed.get(model, 0.0)
        lead_max = pd.Timedelta(seconds=max(p.lead_time_s for p in pools))
        near = grid < now + lead_max + cycle
        window = grid < now + lead_max + stab + cycle
        windows[model] = window
        is_held = model in held_models
        anchor = anchored.get(model, np.zeros(len(grid)))
        if is_held:
            # Stale or missing data: no forecast counts, only the demand already
            # observed; the pools hold (lower bound) and grow only where it exceeds them.
            need = np.full(len(grid), newest.get(model, 0.0))
        else:
            keep = _window_max(
                steady.get(model, np.zeros(len(grid))), grid, now, now + lead_max + stab + cycle
            )
            need = d.astype(float).copy()
            # Within reach of this cycle's action, the forecast conditioned on the newest
            # observation replaces the unconditioned quantile (module docstring).
            need[near] = np.maximum(anchor[near], max(floor, keep))
            # Up to lead time + stabilization, too: what the hold rules below keep is
            # the forecast conditioned on now, not the day-ahead quantile's level.
            need[window & ~near] = anchor[window & ~near]
        # What this cycle itself asks for near term; later cycles' hysteresis reads it.
        # With the forecast's shape it includes the observed peak the floor holds, so
        # through the records a peak is held up to twice lead + stabilization: leaving
        # it out was measured to cost more demand unserved and more reversals than the
        # capacity it saved (README, "Replay"). Without the shape the record is the
        # newest value with its margin, as the margin's rule was replayed.
        provision = float(need[near].max()) if near.any() else 0.0
        record = need[near]
        if not is_held and near.any():
            record = np.maximum(anchor[near], max(recorded_floor.get(model, floor), keep))
        near_need[model] = round(float(record.max()) if near.any() else 0.0, 4)
        recent = [c for c in past if now - (lead_max + stab) < pd.Timestamp(c.at) < now]
        if not is_held:
            # No flapping (module docstring): capacity that this plan's own need, or
            # the need of a cycle within lead time + stabilization, asks for again
            # within that window is not released; never more than is held now.
            cover_now = sum(
                covered_gpus(p, current[p.name], spare_nodes(p, current[p.name], q, policy.cycle_s))
                for p in pools
            )
            again = max(
                float(need[window].max()) if window.any() else 0.0,
                max((c.need_gpus.get(model, 0.0) for c in recent), default=0.0),
            )
            # What this plan provisions near term counts as held: the level kept over
            # the window is then the same before and after this plan's own raise is
            # applied (re-planning from the applied targets keeps them).
            held_level = max(cover_now, provision)
            need[window] = np.maximum(need[window], min(held_level, again))
        need_by_model[model] = need
        top = float(need.max()) if len(need) else 0.0
        spares = {
            p.name: spare_nodes(
                p,
                # The nodes the pool would hold if it took the whole need: what the
                # reclaims are drawn from when spot is used to the full.
                min(p.max_nodes, max(current[p.name], math.ceil(top / p.gpus_per_node))),
                q,
                policy.cycle_s,
            )
            for p in pools
        }
        spare_by_pool.update({k: v for k, v in spares.items() if v})
        prob = ModelProblem(
            pools=pools,
            need=need,
            current={p.name: current[p.name] for p in pools},
            held=model in held_models,
            max_step=policy.max_step_nodes,
            budget=_pool_budget(config, pools, current),
            cycle_s=policy.cycle_s,
            spares=spares,
        )
        moves = {
            p.name: _recent_moves(past, p.name, current[p.name], now, lead_max + stab)
            for p in pools
        }
        released = [p for p in pools if moves[p.name][1]]
        if released and not prob.held:
            # Released within lead time + stabilization: requested again only as far
            # as the observed floor (demand already there, with headroom) forces it.
            covered_now = sum(
                covered_gpus(p, current[p.name], spares.get(p.name, 0)) for p in pools
            )
            forced = allocate(pools, floor, policy.cycle_s, spares)
            prob.cap_now = {
                p.name: max(current[p.name], forced[p.name] if floor > covered_now else 0)
                for p in released
            }
        # Raised within lead time + stabilization: not released before the window
        # has passed (the hysteresis across cycles, from the past cycles' requests).
        prob.floor_now = {p.name: current[p.name] for p in pools if moves[p.name][0]}
        # Nodes raised within a lead time are still booting: they serve only once it has
        # passed, so whatever bridges them until then is not released before.
        prob.booting = _booting(past, pools, current, now, policy.cycle_s)
        # Nothing observed since the last cycle (a coarse source between its values):
        # the forecast's shape moving on alone releases nothing; the next value decides.
        # Where no signal of the model has a shape, nothing moves between values anyway.
        no_news = (
            not is_held
            and model in shaped_models
            and _nothing_new(past, now, forecasts, fed_by.get(model, set()))
        )
        if no_news:
            prob.floor_now.update({p.name: current[p.name] for p in pools})
        # Reserved capacity is a commitment: held where it is, never scaled as elastic.
        prob.fixed = {p.name: current[p.name] for p in pools if p.tier == "reserved"}
        if prob.budget is not None:
            # Never force a scale-down for money: the cap stops growth, it does not evict.
            least = sum(
                prob.floor(
                    p,
                    0,
                    max(
                        p.min_nodes,
                        current[p.name] - policy.max_step_nodes,
                        current[p.name]
                        if prob.held or p.name in prob.floor_now or p.name in prob.fixed
                        else 0,
                    ),
                )
                * p.price_per_node_hour
                for p in pools
            )
            if least > prob.budget + 1e-9:
                notes.append(
                    f"{model}: budget {policy.budget_per_hour:.2f}/h is below what these pools "
                    f"cannot shed this cycle ({least:.2f}/h); no scale-up"
                )
                # What is held now, less what a pool above its max_nodes must shed.
                prob.budget = max(
                    least,
                    sum(
                        min(current[p.name], prob.ceiling(p, 0)) * p.price_per_node_hour
                        for p in pools
                    ),
                )
        sol = solve(prob, solver)
        solvers.add(sol.solver)
        notes.extend(f"{model}: {n}" for n in sol.notes)
        reach_window = max(1, int(windows[model].sum()))

        def serving_steps(p: PoolConfig, reach_window: int = reach_window) -> int:
            # Requests that serve within the window: one made at step j serves from
            # j + lead. Those that only prepare for the projection beyond it (the
            # unanchored quantile) do not hold capacity now: a forecast level that the
            # observations contradict would otherwise keep the nodes cycle after cycle.
            return max(1, reach_window - lead_steps(p, policy.cycle_s))

        within = sol
        if any(
            int(sol.nodes[p.name][0]) < current[p.name]
            and max(sol.nodes[p.name][1 : serving_steps(p)], default=0) > sol.nodes[p.name][0]
            for p in pools
        ):
            # Nor do the steps of a ramp towards it (max_step_nodes a cycle): what the
            # window asks for again is read from the plan of the window's need alone.
            span = windows[model]
            peak_w = float(need[span].max()) if span.any() else 0.0
            within = solve(
                replace(prob, need=np.where(span, need, np.minimum(need, peak_w))), solver
            )
        for p in pools:
            tl = [int(x) for x in sol.nodes[p.name]]
            serving = serving_steps(p)
            again_nodes = max((int(x) for x in within.nodes[p.name][1:serving]), default=tl[0])
            if tl[0] < current[p.name] and again_nodes > tl[0]:
                # Never release nodes that this plan's own projection needs again
                # within lead time + stabilization (a swap between pools included),
                # as far as the budget allows.
                keep_n = min(current[p.name], again_nodes, prob.ceiling(p, 0))
                if prob.budget is not None:
                    spend = sum(
                        (timelines[x.name][0] if x.name in timelines else int(sol.nodes[x.name][0]))
                        * x.price_per_node_hour
                        for x in pools
                        if x.name != p.name
                    )
                    room = math.floor((prob.budget - spend) / p.price_per_node_hour + 1e-9)
                    keep_n = max(tl[0], min(keep_n, room))
                tl[0] = keep_n
            timelines[p.name] = tl
        for p in pools:
            lead = pd.Timedelta(seconds=p.lead_time_s)
            need_up = _window_max(need, grid, now + lead, now + lead + cycle)
            kept = float(need[windows[model]].max()) if windows[model].any() else need_up
            levels_now[p.name] = (need_up, kept, now + lead)
            hold_until[p.name] = (now + lead_max + stab, lead_max)
            n0 = timelines[p.name][0]
            # What the need now alone would hold in this pool: the bounds below name
            # what keeps the target away from it.
            wanted = allocate(pools, need_up, policy.cycle_s, spares)[p.name]
            if p.name in prob.cap_now and n0 == prob.cap_now[p.name] and n0 < wanted:
                binding[p.name].append("released-recently")
            if prob.held and n0 == current[p.name]:
                binding[p.name].append("stale-data")
            if no_news and n0 == current[p.name] and n0 > wanted:
                binding[p.name].append("no-new-observation")
            if n0 < current[p.name] and n0 > wanted:
                # Kept above what the forecast alone asks: either it serves while a
                # cheaper pool's new nodes boot, or it is needed again soon.
                growing = any(
                    timelines[x.name][0] > current[x.name] for x in pools if x.name != p.name
                )
                binding[p.name].append("bridging" if growing else "stabilization")
            if abs(n0 - current[p.name]) == policy.max_step_nodes:
                binding[p.name].append("max_step")
            if current[p.name] > p.max_nodes:
                binding[p.name].append("max_nodes")
        short = sol.shortfall
        # A shortfall the lead time could not prevent is not a bound; one after it is.
        first_reach = min(lead_steps(p, policy.cycle_s) for p in pools)
        late = np.flatnonzero(short[first_reach:] > 1e-6) + first_reach
        if late.size:
            k = int(late[0])
            causes: list[str] = []
            at_k = {p.name: timelines[p.name][k] for p in pools}
            # A reserved pool is at its bound at its commitment.
            if all(at_k[p.name] >= prob.fixed.get(p.name, p.max_nodes) for p in pools):
                causes.append("max_nodes")
            if prob.budget is not None:
                spend = sum(at_k[p.name] * p.price_per_node_hour for p in pools)
                cheapest = (
                    min(
                        p.price_per_node_hour
                        for p in pools
                        if at_k[p.name] < prob.fixed.get(p.name, p.max_nodes)
                    )
                    if any(at_k[p.name] < prob.fixed.get(p.name, p.max_nodes) for p in pools)
                    else math.inf
                )
                if spend + cheapest > prob.budget + 1e-9:
                    causes.append("budget")
            if not causes:
                causes.append("max_step")
            for p in pools:
                for c in causes:
                    if c not in binding[p.name] and (
                        c != "max_nodes" or at_k[p.name] >= prob.fixed.get(p.name, p.max_nodes)
                    ):
                        binding[p.name].append(c)
            shortfalls.append(
                {
                    "gpu_model": model,
                    "first_at": iso(grid[k]),
                    "max_gpus_short": round(float(short[first_reach:].max()), 3),
                    "because": causes,
                }
            )
            notes.append(
                f"{model}: {qname} demand cannot be covered from {_hhmm(grid[k])} "
                f"(up to {float(short[first_reach:].max()):.1f} GPUs short; bound: {', '.join(causes)})"
            )
    margin_notes: dict[str, str] = {}
    for w in config.workloads:
        key = gpu_model(w.gpu_model).name
        m = learned.get(w.signal)
        clause = (
            m.describe()
            if m is not None
            else f"margin {100 * headroom[w.signal]:.1f}% for {w.signal!r} "
            "(policy.headroom_fraction: too little history to learn one)"
        )
        if clause not in margin_notes.get(key, ""):
            margin_notes[key] = "; ".join(x for x in (margin_notes.get(key), clause) if x)
    actions: list[Action] = []
    pool_plans: list[PoolPlan] = []
    for p in config.pools:
        cur = int(inventory.get(p.name, p.min_nodes))
        target = timelines[p.name][0]
        need_up, need_keep, needed_at = levels_now[p.name]
        model = gpu_model(p.gpu_model).name
        lead_min = p.lead_time_s / 60
        delta_cost = (target - cur) * p.price_per_node_hour
        bound = f" (bound: {', '.join(binding[p.name])})" if binding[p.name] else ""
        decision: Decision
        if model in held_models and target > cur:
            decision = "scale-up"
            reason = (
                f"{held_models[model]}, forecast not used; the newest observation needs "
                f"{need_up:.1f} GPUs of {model}, above what is held; +{target - cur} node(s) at "
                f"{p.price_per_node_hour:.2f}/h each, +{delta_cost:.2f}/h{bound}"
            )
        elif target > cur:
            decision = "scale-up"
            reason = (
                f"{qname} demand for {model} reaches {need_up:.1f} GPUs by {_hhmm(needed_at)} "
                f"(lead time {lead_min:.0f} min); +{target - cur} node(s) at "
                f"{p.price_per_node_hour:.2f}/h each, +{delta_cost:.2f}/h{bound}"
            )
        elif target < cur and cur > p.max_nodes:
            decision = "scale-down"
            reason = (
                f"{cur} node(s) now is above max_nodes {p.max_nodes}; stepping down by at most "
                f"{policy.max_step_nodes} node(s) a cycle (max_step_nodes); -{cur - target} "
                f"node(s) saves {-delta_cost:.2f}/h{bound}"
            )
        elif target < cur:
            decision = "scale-down"
            until, lead_hold = hold_until[p.name]
            reason = (
                f"{qname} demand for {model} stays at or under {need_keep:.1f} GPUs until {_hhmm(until)} "
                f"(lead time {lead_hold.total_seconds() / 60:.0f} min + "
                f"{policy.scale_down_stabilization_s / 60:.0f} min "
                f"stabilization); -{cur - target} node(s) saves {-delta_cost:.2f}/h{bound}"
            )
        else:
            decision = "no-op"
            held = f"; {held_models[model]}, holding" if model in held_models else ""
            reason = (
                f"{cur} node(s) fit {qname} demand for {model} of {need_up:.1f} GPUs at "
                f"{_hhmm(needed_at)} (lead time {lead_min:.0f} min){held}{bound}; "
                f"cost unchanged at {cur * p.price_per_node_hour:.2f}/h"
            )
        if model not in held_models and margin_notes.get(model):
            reason += "; " + margin_notes[model]
        actions.append(
            Action(
                pool=p.name,
                decision=decision,
                current_nodes=cur,
                target_nodes=target,
                at=iso(now),
                needed_at=iso(needed_at),
                cost_delta_per_hour=round(delta_cost, 4),
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
                target_nodes=timelines[p.name],
                binding=binding[p.name],
            )
        )

    # Cost and risk of the planned timeline.
    by_tier: dict[str, float] = {}
    for p in config.pools:
        by_tier[p.tier] = (
            by_tier.get(p.tier, 0.0)
            + float(np.sum(timelines[p.name])) * p.price_per_node_hour * step_h
        )
    demand_all = {qq: demand_by_model(config, dict(forecasts), grid, qq) for qq in quantiles}
    unserved = 0.0
    for model in models:
        cap = np.zeros(len(grid))
        for p in config.pools_for(model):
            cap += np.array([effective_gpus(p, n, policy.cycle_s) for n in timelines[p.name]])
        if model in held_models:
            # Held on bad data: the risk is measured against the demand the plan
            # covers (the newest observation), as the shortfall is, not a stale forecast.
            unserved += float(np.maximum(0.0, need_by_model[model] - cap).sum()) * step_h
        else:
            unserved += _expected_unserved(
                {qq: demand_all[qq].get(model, np.zeros(len(grid))) for qq in quantiles},
                cap,
                step_h,
            )
    cost = {
        "per_hour_now": round(
            sum(timelines[p.name][0] * p.price_per_node_hour for p in config.pools), 4
        ),
        "per_hour_current": round(
            sum(
                int(inventory.get(p.name, p.min_nodes)) * p.price_per_node_hour
                for p in config.pools
            ),
            4,
        ),
        "horizon_total": round(sum(by_tier.values()), 2),
        "horizon_by_tier": {k: round(v, 2) for k, v in sorted(by_tier.items())},
    }
    risk = {
        "expected_unserved_gpu_hours": round(unserved, 3),
        "binding": {k: v for k, v in binding.items() if v},
        "held_models": held_models,
        "shortfall": shortfalls,
        "solver": "+".join(sorted(solvers)),
        "spot_spare_nodes": spare_by_pool,
        "near_need_gpus": near_need,
        "observed_gpus": {k: round(v, 4) for k, v in sorted(observed.items())},
        "observed_at": {k: iso(fc.last_timestamp) for k, fc in sorted(forecasts.items())},
        "margins": {
            s.name: (
                {"source": "learned", **learned[s.name].to_dict()}
                if s.name in learned
                else {"source": "policy.headroom_fraction", "margin": headroom[s.name]}
            )
            for s in config.signals
        },
    }
    signals = []
    for s in config.signals if with_signals else ():
        fc = forecasts.get(s.name)
        if fc is None:
            continue
        qs = fc.quantile(q)
        signals.append(
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
    return CapacityPlan(
        created_at=iso(now),
        quantile=q,
        horizon_s=policy.horizon_s,
        step_s=policy.cycle_s,
        timeline=[iso(t) for t in grid],
        signals=signals,
        demand_gpus={k: [round(float(x), 4) for x in v] for k, v in sorted(need_by_model.items())},
        pools=pool_plans,
        actions=actions,
        cost=cost,
        risk=risk,
        notes=notes,
    )
