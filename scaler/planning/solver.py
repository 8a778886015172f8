"""The solvers of one GPU model's tier problem: a MILP, and a greedy allocator behind it.

:class:`ModelProblem` is what :mod:`scaler.planning.tiers` asks for one GPU model: the
need per grid step and the bounds on every pool. :func:`solve` answers with the nodes
per pool and step and the need left uncovered (:class:`ModelSolution`). The MILP
(:func:`scipy.optimize.milp`, HiGHS) has integer nodes per pool and step, continuous
usable nodes and a shortfall variable per step priced far above any GPU; its search is
bounded by a count of branch-and-bound nodes, not the clock. When it is unavailable,
fails or finds no schedule within that count, the greedy allocator plans.

A plan longer than a day (:data:`MILP_SPAN_S`) is solved by the MILP for its first day and
by the greedy allocator beyond, from the nodes the MILP reached: only the first step is
acted on, and what lies days ahead is a projection for the reports, the same allocation
the finance projection prices (:mod:`scaler.reports.finance`). A 90-day plan at 5-minute
steps would give the MILP 25,920 integer steps a pool.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, OptimizeResult, milp

from scaler.config import PoolConfig
from scaler.planning.coverage import allocate, covered_gpus, lead_steps
from scaler.wording import NOTE_SOLVER_FALLBACK, NOTE_SOLVER_NODE_LIMIT, Reason

log = logging.getLogger(__name__)

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
    notes: list[Reason] = field(default_factory=list)
    """What the plan's notes say of the solve (the GPU model is the caller's to add)."""


MILP_SPAN_S = 86400
"""The MILP plans the first day of a plan; beyond it the greedy allocator projects."""


@dataclass(frozen=True)
class _Columns:
    """Where each MILP variable sits: nodes requested (``n``) and usable (``u``) per pool
    and step, the shortfall per step (``s``), and per spot pool with spares and step a
    binary (``y``) saying whether the pool holds nodes then."""

    n_pools: int
    k_steps: int
    n_spared: int

    @property
    def count(self) -> int:
        return 2 * self.n_pools * self.k_steps + self.k_steps + self.n_spared * self.k_steps

    def nv(self, p: int, k: int) -> int:
        return p * self.k_steps + k

    def uv(self, p: int, k: int) -> int:
        return self.n_pools * self.k_steps + p * self.k_steps + k

    def sv(self, k: int) -> int:
        return 2 * self.n_pools * self.k_steps + k

    def yv(self, s: int, k: int) -> int:
        return 2 * self.n_pools * self.k_steps + self.k_steps + s * self.k_steps + k


@dataclass(frozen=True)
class _Program:
    """A MILP as :func:`scipy.optimize.milp` takes it."""

    cost: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    integrality: np.ndarray
    matrix: sparse.csr_array
    lo: np.ndarray
    hi: np.ndarray


class _Rows:
    """Constraint rows of a sparse matrix with their bounds, in the order they are added."""

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.r = 0

    def add(self, entries: list[tuple[int, float]], lb: float, ub: float) -> None:
        for c, v in entries:
            self.rows.append(self.r)
            self.cols.append(c)
            self.vals.append(v)
        self.lo.append(lb)
        self.hi.append(ub)
        self.r += 1


def _solve_milp(prob: ModelProblem) -> ModelSolution | None:
    """The least-cost schedule as a MILP; None when the solver gives no solution."""
    # A binary per spot pool with spares and step says whether the pool holds nodes
    # then: a spot pool that holds any carries its spares, an empty one none.
    spared = [i for i, p in enumerate(prob.pools) if prob.spares.get(p.name, 0) > 0]
    cols = _Columns(len(prob.pools), len(prob.need), len(spared))
    res = _run_milp(_build_program(prob, cols, spared))
    if res is None:
        return None
    return _read_solution(prob, cols, res)


def _build_program(prob: ModelProblem, cols: _Columns, spared: list[int]) -> _Program:
    """Objective, variable bounds and constraint rows of ``prob``."""
    cost, lower, upper, integrality = _objective_and_bounds(prob, cols, spared)
    rows = _Rows()
    _step_rows(prob, cols, spared, rows)
    _pool_rows(prob, cols, rows)
    matrix = sparse.csr_array((rows.vals, (rows.rows, rows.cols)), shape=(rows.r, cols.count))
    return _Program(cost, lower, upper, integrality, matrix, np.array(rows.lo), np.array(rows.hi))


def _objective_and_bounds(
    prob: ModelProblem, cols: _Columns, spared: list[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cost, lower and upper bound and integrality of every variable."""
    pools, k_steps = prob.pools, cols.k_steps
    nv, uv, sv, yv = cols.nv, cols.uv, cols.sv, cols.yv
    n_vars = cols.count
    step_h = prob.cycle_s / 3600.0
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
    return cost, lower, upper, integrality


def _step_rows(prob: ModelProblem, cols: _Columns, spared: list[int], rows: _Rows) -> None:
    """Per step: coverage of the need, the spares a spot pool with nodes carries, the budget."""
    pools = prob.pools
    nv, uv, sv, yv = cols.nv, cols.uv, cols.sv, cols.yv
    for k in range(cols.k_steps):
        # Coverage: usable GPUs less the spot spares, plus shortfall, reach the need.
        rows.add(
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
            rows.add([(uv(i, k), 1.0), (yv(s, k), -float(big))], -np.inf, 0.0)
        if prob.budget is not None:
            rows.add(
                [(nv(i, k), p.price_per_node_hour) for i, p in enumerate(pools)],
                -np.inf,
                prob.budget,
            )


def _pool_rows(prob: ModelProblem, cols: _Columns, rows: _Rows) -> None:
    """Per pool and step: usable only after the lead time, at most ``max_step`` a cycle."""
    nv, uv = cols.nv, cols.uv
    for i, p in enumerate(prob.pools):
        leads = lead_steps(p, prob.cycle_s)
        for k in range(cols.k_steps):
            # Usable only if requested over the whole lead time up to k.
            for j in range(max(0, k - leads), k + 1):
                rows.add([(uv(i, k), 1.0), (nv(i, j), -1.0)], -np.inf, 0.0)
            if k == 0:
                cur = prob.current[p.name]
                rows.add([(nv(i, 0), 1.0)], cur - prob.max_step, cur + prob.max_step)
            else:
                rows.add([(nv(i, k), 1.0), (nv(i, k - 1), -1.0)], -prob.max_step, prob.max_step)


def _run_milp(program: _Program) -> OptimizeResult | None:
    """HiGHS on ``program``, bounded by a node count; None when it raises."""
    try:
        return milp(
            program.cost,
            constraints=LinearConstraint(program.matrix, program.lo, program.hi),
            integrality=program.integrality,
            bounds=Bounds(program.lower, program.upper),
            options={
                "node_limit": MILP_NODE_LIMIT,
                "time_limit": MILP_TIME_BACKSTOP_S,
                "presolve": True,
            },
        )
    except (ValueError, RuntimeError) as exc:
        log.warning("milp failed: %s", exc)
        return None


def _read_solution(prob: ModelProblem, cols: _Columns, res: OptimizeResult) -> ModelSolution | None:
    """Nodes and shortfall from the solver's answer; None when it found no schedule."""
    notes: list[Reason] = []
    timed_out = "time limit" in str(res.message).lower()
    if res.x is not None and res.status == 1 and not timed_out:
        # The node limit: the best schedule found within a fixed amount of search.
        notes.append(Reason(NOTE_SOLVER_NODE_LIMIT, {"node_limit": MILP_NODE_LIMIT}))
    elif res.x is None or res.status != 0:
        log.warning("milp gave no solution: %s", res.message)
        return None
    x = np.asarray(res.x)
    k_steps = cols.k_steps
    nodes = {
        p.name: np.rint(x[[cols.nv(i, k) for k in range(k_steps)]]).astype(int)
        for i, p in enumerate(prob.pools)
    }
    shortfall = np.maximum(0.0, x[[cols.sv(k) for k in range(k_steps)]])
    shortfall[shortfall < 1e-6] = 0.0
    return ModelSolution(nodes, shortfall, "milp", notes)


def _solve_greedy(prob: ModelProblem) -> ModelSolution:
    """Level by level: reserved first, then cheapest effective price, then the bounds."""
    nodes = _greedy_schedule(prob)
    return ModelSolution(nodes, _uncovered(prob, nodes), "greedy")


def _greedy_schedule(prob: ModelProblem) -> dict[str, np.ndarray]:
    """Nodes per pool and step: the cheapest cover of each step's level, then the bounds."""
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
            _shed_for_budget(prob, alloc, prev, k, prob.budget)
        for p in pools:
            nodes[p.name][k] = alloc[p.name]
        prev = alloc
    return nodes


def _shed_for_budget(
    prob: ModelProblem, alloc: dict[str, int], prev: Mapping[str, int], k: int, budget: float
) -> None:
    """Lower ``alloc`` (step ``k``), dearest GPUs first, until it fits ``budget``, never
    below what the bounds hold."""
    spend = sum(alloc[p.name] * p.price_per_node_hour for p in prob.pools)
    for p in sorted(prob.pools, key=lambda p: -p.price_per_gpu_hour):
        floor = max(p.min_nodes, prev[p.name] - prob.max_step)
        if prob.held:
            floor = max(floor, prob.current[p.name])
        if k == 0:
            floor = max(floor, prob.floor_now.get(p.name, 0))
        floor = prob.floor(p, k, max(floor, prob.fixed.get(p.name, 0)))
        while spend > budget + 1e-9 and alloc[p.name] > floor:
            alloc[p.name] -= 1
            spend -= p.price_per_node_hour


def _uncovered(prob: ModelProblem, nodes: Mapping[str, np.ndarray]) -> np.ndarray:
    """GPUs of need per step that ``nodes`` leave uncovered under the lead-time rule."""
    k_steps = len(prob.need)
    shortfall = np.zeros(k_steps)
    for k in range(k_steps):
        cap = 0.0
        for p in prob.pools:
            leads = lead_steps(p, prob.cycle_s)
            window = nodes[p.name][max(0, k - leads) : k + 1]
            usable = int(window.min())
            if k < leads:
                usable = min(usable, prob.serving_now(p, k))
            cap += covered_gpus(p, usable, prob.spares.get(p.name, 0))
        shortfall[k] = max(0.0, float(prob.need[k]) - cap)
    shortfall[shortfall < 1e-6] = 0.0
    return shortfall


def _solve_split(prob: ModelProblem, head_steps: int) -> ModelSolution | None:
    """The MILP over the first ``head_steps`` (seeing a lead time past them, so that its
    last steps request what the next ones need), the greedy allocator beyond, from the
    nodes the MILP reached; the shortfall measured on the whole schedule."""
    lead = max((lead_steps(p, prob.cycle_s) for p in prob.pools), default=0)
    head = _solve_milp(replace(prob, need=prob.need[: head_steps + lead]))
    if head is None:
        return None
    reached = {p.name: int(head.nodes[p.name][head_steps - 1]) for p in prob.pools}
    tail = replace(
        prob,
        need=prob.need[head_steps:],
        current=reached,
        held=False,
        cap_now={},
        floor_now={},
        booting={},
    )
    rest = _greedy_schedule(tail)
    nodes = {}
    for p in prob.pools:
        after = rest[p.name]
        if prob.held:  # held: never below what runs now, over the whole horizon
            after = np.maximum(after, prob.current[p.name])
        nodes[p.name] = np.concatenate([head.nodes[p.name][:head_steps], after])
    return ModelSolution(nodes, _uncovered(prob, nodes), head.solver, head.notes)


def solve(prob: ModelProblem, solver: Solver = "auto") -> ModelSolution:
    """Solve one GPU model's problem; ``auto`` is the MILP with the greedy as fallback."""
    if solver in ("auto", "milp"):
        head_steps = max(1, math.ceil(MILP_SPAN_S / prob.cycle_s))
        split = len(prob.need) > head_steps
        sol = _solve_split(prob, head_steps) if split else _solve_milp(prob)
        if sol is not None:
            return sol
        greedy = _solve_greedy(prob)
        greedy.notes.append(Reason(NOTE_SOLVER_FALLBACK))
        return greedy
    return _solve_greedy(prob)
